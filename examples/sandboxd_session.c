// An interactive-style session with a shell in a sandboxd sandbox: start
// `sh`, feed it the lines this program reads, and print its output as it
// comes (stdout and stderr apart), while another thread does the typing.
// Ends when our stdin ends (the shell's stdin is closed: it exits) or the
// shell exits by itself; prints its exit status.
//
//   printf 'echo hi\nls /\nexit 3\n' | ./sandboxd_session
//   ./sandboxd_session sandboxd-warmpool     # type at it; Ctrl-D ends
//
// Needs a cluster with agent-sandbox v0.5+ whose warm pool's template runs
// sandboxd (it declares SANDBOXD_REST_ADDR / SANDBOXD_GRPC_ADDR, or has a
// container named "sandboxd"; `make cluster-up AGENT_SANDBOX=v0.5.6` has
// one), kubectl on PATH and a kubeconfig ($KUBECONFIG, else ~/.kube/config).
// Usage: ./sandboxd_session [warm pool, default sandboxd-warmpool]
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

// Output arrives on the thread that waits, chunk by chunk, in order.
static void show(void *user_data, asb_process_output which, const char *data,
                 size_t len) {
    FILE *to = which == ASB_PROCESS_STDERR ? stderr : stdout;
    (void)user_data;
    fwrite(data, 1, len, to);
    fflush(to);
}

// Types what we read into the shell as it comes, then closes its stdin.
// It polls, so that it notices when the shell has exited on its own.
typedef struct typist_state {
    asb_process *sh;
    pthread_mutex_t mu;
    int shell_done; // set by main once the shell exited
} typist_state;

static int shell_done(typist_state *ts) {
    int d;
    pthread_mutex_lock(&ts->mu);
    d = ts->shell_done;
    pthread_mutex_unlock(&ts->mu);
    return d;
}

static void *typist(void *arg) {
    typist_state *ts = (typist_state *)arg;
    asb_error err;
    char buf[4096];
    while (!shell_done(ts)) {
        struct pollfd pfd = {0, POLLIN, 0};
        ssize_t n;
        if (poll(&pfd, 1, 100) <= 0) continue;
        n = read(0, buf, sizeof buf);
        if (n <= 0) { // our stdin ended: so does the shell's
            if (asb_process_close_stdin(ts->sh, &err) != ASB_OK) // ASB_OK if it has exited
                fprintf(stderr, "close stdin: %s\n", err.message);
            break;
        }
        if (asb_process_write_stdin(ts->sh, buf, (size_t)n, &err) != ASB_OK) {
            // ASB_ERR_NOT_FOUND: the shell has exited (`exit`)
            if (err.code != ASB_ERR_NOT_FOUND) fprintf(stderr, "stdin: %s\n", err.message);
            break;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    static const char *const shell[] = {"sh"};
    asb_client_desc desc;
    asb_create_opts opts;
    asb_process_opts po;
    asb_client *client;
    asb_sandbox *sb;
    asb_process *sh;
    asb_error err;
    typist_state ts;
    pthread_t t;
    int code = -1, rc = 1;

    memset(&desc, 0, sizeof desc); // defaults: kubeconfig, kubectl tunnel
    desc.runtime = ASB_RUNTIME_AUTO; // sandboxd, as the template says
    memset(&opts, 0, sizeof opts);
    opts.warm_pool = argc > 1 ? argv[1] : "sandboxd-warmpool";
    if (asb_client_create(&desc, &client, &err) != ASB_OK) {
        fprintf(stderr, "client: %s\n", err.message);
        return 1;
    }
    if (asb_client_create_sandbox(client, NULL, &opts, &sb, &err) != ASB_OK) {
        fprintf(stderr, "create: %s\n", err.message);
        asb_client_free(client);
        return 1;
    }
    fprintf(stderr, "sandbox %s is ready (runtime %s); starting sh\n",
            asb_sandbox_name(sb), asb_sandbox_runtime(sb));

    memset(&po, 0, sizeof po);
    po.argv = shell; // no PTY: the shell reads commands as a script would
    po.argc = 1;
    po.on_output = show;
    if (asb_sandbox_process_start(sb, &po, &sh, &err) != ASB_OK) {
        fprintf(stderr, "start: %s\n", err.message);
        goto out;
    }
    ts.sh = sh;
    ts.shell_done = 0;
    pthread_mutex_init(&ts.mu, NULL);
    if (pthread_create(&t, NULL, typist, &ts) != 0) {
        fprintf(stderr, "cannot start the typing thread\n");
        asb_process_free(sh); // ends the shell
        goto out;
    }
    // This thread receives the output until the shell exits.
    if (asb_process_wait(sh, 0, &code, &err) != ASB_OK)
        fprintf(stderr, "wait: %s\n", err.message);
    else
        rc = 0;
    pthread_mutex_lock(&ts.mu);
    ts.shell_done = 1;
    pthread_mutex_unlock(&ts.mu);
    pthread_join(t, NULL); // within 100 ms: it polls
    pthread_mutex_destroy(&ts.mu);
    asb_process_free(sh);
    fprintf(stderr, "sh exited with %d\n", code);
out:
    if (asb_sandbox_terminate(sb, &err) != ASB_OK) { // deletes the claim
        fprintf(stderr, "delete: %s\n", err.message);
        rc = 1;
    }
    asb_client_free(client);
    return rc;
}
