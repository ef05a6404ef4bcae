/* The sandboxd runtime against the real sandboxd (agent-sandbox v0.5.6,
   built unmodified by tools/localcluster), run here on loopback beside the
   test as a sidecar would run beside its workload: ASB_CONNECT_IN_POD with
   SANDBOXD_REST_ADDR / SANDBOXD_GRPC_ADDR, no cluster. The cluster paths
   (pod tunnel, AUTO from a template) are tests/test_sandboxd_cluster.c's.
   Usage: ASB_SANDBOXD=/path/to/sandboxd test_sandboxd [case-substring...] */
#define _GNU_SOURCE 1 /* unshare, setns, pthread_timedjoin_np (the keepalive case) */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include "asbtest.h"
#include "cluster.h" /* count_entries */
#include "cancel_later.h"
#include <pthread.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <sys/wait.h>
#include <poll.h>
#include <stdint.h>
#include <stdarg.h>
#include <fcntl.h>
#include <sched.h>

static char root[256];   /* sandboxd's --root-dir */
static pid_t sbd_pid;
static int rest_port, grpc_port;

/* A port nothing listens on now (the kernel's pick, released): sandboxd
   binds it a moment later; a clash shows as sandboxd exiting, retried. */
static int free_port(void) {
    struct sockaddr_in a;
    socklen_t n = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &n) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

static int health_ok(void) {
    asb_http_client *hc;
    asb_http_request req;
    asb_http_response resp;
    char url[64];
    int ok;
    if (asb_http_client_create(NULL, &hc, NULL) != ASB_OK) return 0;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/health", rest_port);
    memset(&req, 0, sizeof req);
    req.url = url;
    ok = asb_http_do(hc, &req, &resp, NULL) == ASB_OK && resp.status == 200;
    asb_http_response_free(&resp);
    asb_http_client_free(hc);
    return ok;
}

/* Starts sandboxd on the ports (new ones unless keep), waits for its
   health. 1 when it answers. */
static int sandboxd_start(int keep) {
    int tries, i;
    const char *bin = getenv("ASB_SANDBOXD");
    if (!bin) {
        fprintf(stderr, "    ASB_SANDBOXD is not set (make test-sandboxd sets it)\n");
        return 0;
    }
    for (tries = 0; tries < 5; tries++) {
        char rp[16], gp[16], rd[300];
        if (!keep || !rest_port) {
            rest_port = free_port();
            grpc_port = free_port();
        }
        snprintf(rp, sizeof rp, "%d", rest_port);
        snprintf(gp, sizeof gp, "%d", grpc_port);
        snprintf(rd, sizeof rd, "--root-dir=%s", root);
        sbd_pid = fork();
        if (sbd_pid == 0) {
            int dn = open("/dev/null", O_WRONLY);
            if (dn >= 0) {
                dup2(dn, 1);
                dup2(dn, 2);
            }
            setenv("SANDBOX_TEST_LABEL", "from-the-orchestrator", 1);
            setenv("SANDBOX_API_TOKEN", "never-shown", 1);
            execl(bin, bin, "--rest-port", rp, "--grpc-port", gp, rd, "--shutdown-timeout=1s",
                  (char *)NULL);
            _exit(127);
        }
        for (i = 0; i < 200; i++) { /* 20 s */
            int st;
            if (waitpid(sbd_pid, &st, WNOHANG) == sbd_pid) break; /* a port clash */
            if (health_ok()) {
                char a[64];
                snprintf(a, sizeof a, "127.0.0.1:%d", rest_port);
                setenv("SANDBOXD_REST_ADDR", a, 1);
                snprintf(a, sizeof a, "127.0.0.1:%d", grpc_port);
                setenv("SANDBOXD_GRPC_ADDR", a, 1);
                return 1;
            }
            asb__sleep_ms(100);
        }
        if (i == 200) {
            kill(sbd_pid, SIGKILL);
            waitpid(sbd_pid, NULL, 0);
        }
        sbd_pid = 0;
        asb__sleep_ms(200);
    }
    return 0;
}

static void sandboxd_stop(void) {
    if (sbd_pid > 0) {
        kill(sbd_pid, SIGKILL);
        waitpid(sbd_pid, NULL, 0);
    }
    sbd_pid = 0;
}

/* An in-pod client and its handle on the running sandboxd. */
static asb_client *in_pod(asb_sandbox **sb, asb_error *err) {
    asb_client_desc d;
    asb_client *c = NULL;
    memset(&d, 0, sizeof d);
    d.mode = ASB_CONNECT_IN_POD;
    if (asb_client_create(&d, &c, err) != ASB_OK) return NULL;
    if (asb_client_sandbox_in_pod(c, sb, err) != ASB_OK) {
        asb_client_free(c);
        return NULL;
    }
    return c;
}

ASBT_TEST(handle_calls_work_on_sandboxd_as_on_the_legacy_runtime) {
    static const char bin[] = "bytes\0with a NUL\nand \xff\xfe";
    asb_error err;
    asb_sandbox *sb;
    asb_client *c = in_pod(&sb, &err);
    asb_run_result rr;
    asb_buf b;
    asb_file_list fl;
    size_t i;
    int exists = -1, saw_file = 0, saw_dir = 0;
    if (!c) fprintf(stderr, "    %s\n", err.message);
    ASBT_CHECK(c != NULL);
    ASBT_EQ_STR(asb_sandbox_runtime(sb), "sandboxd");
    /* run is /bin/sh -c: a command line means the same on both runtimes */
    ASBT_EQ_RES(asb_sandbox_run(sb, "echo out; echo err >&2; exit 3", 0, &rr, &err), ASB_OK);
    ASBT_EQ_INT(rr.exit_code, 3);
    ASBT_EQ_STR(rr.out.ptr, "out\n");
    ASBT_EQ_STR(rr.err.ptr, "err\n");
    asb_run_result_free(&rr);
    ASBT_EQ_RES(asb_sandbox_write(sb, "dir/sub/file.bin", bin, sizeof bin - 1, &err), ASB_OK);
    asb_buf_init(&b, NULL);
    ASBT_EQ_RES(asb_sandbox_read(sb, "dir/sub/file.bin", &b, &err), ASB_OK);
    ASBT_EQ_MEM(b.ptr, b.len, bin, sizeof bin - 1);
    asb_buf_free(&b);
    ASBT_EQ_RES(asb_sandbox_write(sb, "dir/top.txt", "t", 1, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_list(sb, "dir", &fl, &err), ASB_OK);
    for (i = 0; i < fl.count; i++) {
        if (strcmp(fl.entries[i].name, "sub") == 0 && fl.entries[i].is_dir) saw_dir = 1;
        if (strcmp(fl.entries[i].name, "top.txt") == 0 && !fl.entries[i].is_dir &&
            fl.entries[i].size == 1 && fl.entries[i].mod_time > 1.7e9)
            saw_file = 1;
    }
    ASBT_EQ_INT((int)fl.count, 2);
    asb_file_list_free(&fl);
    ASBT_CHECK(saw_dir && saw_file);
    ASBT_EQ_RES(asb_sandbox_exists(sb, "dir/top.txt", &exists, &err), ASB_OK);
    ASBT_EQ_INT(exists, 1);
    ASBT_EQ_RES(asb_sandbox_exists(sb, "dir/none", &exists, &err), ASB_OK);
    ASBT_EQ_INT(exists, 0);
    /* a missing file is NOT_FOUND with sandboxd's words */
    asb_buf_init(&b, NULL);
    ASBT_EQ_RES(asb_sandbox_read(sb, "dir/none", &b, &err), ASB_ERR_NOT_FOUND);
    ASBT_EQ_STR(err.reason, "NOT_FOUND");
    ASBT_CONTAINS(err.message, "path does not exist within the sandbox");
    /* the safe-path rules come first, as on the legacy runtime */
    ASBT_EQ_RES(asb_sandbox_read(sb, "../etc/passwd", &b, &err), ASB_ERR_INVALID_ARGUMENT);
    asb_buf_free(&b);
    asb_client_free(c);
}

ASBT_TEST(run_takes_env_and_cwd_and_a_write_takes_a_mode) {
    asb_error err;
    asb_sandbox *sb;
    asb_client *c = in_pod(&sb, &err);
    asb_run_result rr;
    asb_call_opts o;
    asb_env_var env[2];
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(asb_sandbox_write(sb, "work/x", "", 0, &err), ASB_OK);
    memset(&o, 0, sizeof o);
    memset(env, 0, sizeof env);
    env[0].name = "GREETING";
    env[0].value = "hello there";
    env[1].name = "EMPTY";
    o.env = env;
    o.env_count = 2;
    o.cwd = "work";
    ASBT_EQ_RES(asb_sandbox_run_opts(sb, "echo \"$GREETING[${EMPTY-unset}]\"; pwd", &o, &rr, &err),
                ASB_OK);
    ASBT_CHECK(strncmp(rr.out.ptr, "hello there[]\n", 14) == 0);
    ASBT_CHECK(strstr(rr.out.ptr + 14, "/work\n") != NULL);
    asb_run_result_free(&rr);
    env[0].name = "BAD NAME";
    ASBT_EQ_RES(asb_sandbox_run_opts(sb, "true", &o, &rr, &err), ASB_ERR_INVALID_ARGUMENT);
    asb_run_result_free(&rr);
    memset(&o, 0, sizeof o);
    o.file_mode = 0750;
    ASBT_EQ_RES(asb_sandbox_write_opts(sb, "work/tool.sh", "#!/bin/sh\necho ran\n", 19, &o, &err),
                ASB_OK);
    ASBT_EQ_RES(asb_sandbox_run(sb, "stat -c %a work/tool.sh && work/tool.sh", 0, &rr, &err),
                ASB_OK);
    ASBT_EQ_STR(rr.out.ptr, "750\nran\n");
    asb_run_result_free(&rr);
    o.file_mode = 01000;
    ASBT_EQ_RES(asb_sandbox_write_opts(sb, "work/x", "", 0, &o, &err), ASB_ERR_INVALID_ARGUMENT);
    asb_client_free(c);
}

/* command_timeout_ms (1.0.8's command_timeout): the gRPC deadline of the
   Execute call. sandboxd ends the process when it passes, and run returns
   a result as 1.0.8 does: exit 124, timed_out, no output (sandboxd sends
   none past a deadline). */
ASBT_TEST(a_command_timeout_ends_the_command_and_is_a_timed_out_result) {
    asb_error err;
    asb_sandbox *sb;
    asb_client *c = in_pod(&sb, &err);
    asb_run_result rr;
    asb_call_opts o;
    int i, gone = 0;
    ASBT_CHECK(c != NULL);
    memset(&o, 0, sizeof o);
    o.timeout_ms = 5000; /* bounds connecting; the call itself ends at the limit */
    o.command_timeout_ms = 1500;
    ASBT_EQ_RES(asb_sandbox_run_opts(sb, "echo $$ > sh.pid; echo before; exec sleep 30", &o, &rr,
                                     &err),
                ASB_OK);
    ASBT_EQ_INT(rr.timed_out, 1);
    ASBT_EQ_INT(rr.exit_code, 124);
    ASBT_EQ_STR(rr.err.ptr, "Command timed out after 1.5 seconds");
    ASBT_EQ_STR(rr.out.ptr, "");
    asb_run_result_free(&rr);
    /* the process is ended by sandboxd, not left running */
    for (i = 0; i < 100 && !gone; i++) {
        ASBT_EQ_RES(asb_sandbox_run(sb, "kill -0 $(cat sh.pid) 2>/dev/null && echo alive || echo gone",
                                    0, &rr, &err),
                    ASB_OK);
        gone = strcmp(rr.out.ptr, "gone\n") == 0;
        asb_run_result_free(&rr);
        if (!gone) asb__sleep_ms(100);
    }
    ASBT_CHECK(gone);
    /* within the limit: the command's own result */
    o.command_timeout_ms = 30000;
    ASBT_EQ_RES(asb_sandbox_run_opts(sb, "echo within; exit 3", &o, &rr, &err), ASB_OK);
    ASBT_EQ_INT(rr.timed_out, 0);
    ASBT_EQ_INT(rr.exit_code, 3);
    ASBT_EQ_STR(rr.out.ptr, "within\n");
    asb_run_result_free(&rr);
    o.command_timeout_ms = -1;
    ASBT_EQ_RES(asb_sandbox_run_opts(sb, "true", &o, &rr, &err), ASB_ERR_INVALID_ARGUMENT);
    asb_run_result_free(&rr);
    asb_client_free(c);
}

/* A terminated (or closed) handle lets go of its gRPC connection: its
   socket, its wake pipe and its I/O thread. They went only with the
   client, so a program that made and ended sandboxd sandboxes one after
   another held three descriptors and a thread for each (the sandboxd
   re-run of test_sdk_cluster's many_cycles case found it: 72
   descriptors where there were 42). */
ASBT_TEST(an_ended_handle_lets_go_of_its_grpc_connection) {
    asb_error err;
    asb_sandbox *sb;
    asb_client *c = in_pod(&sb, &err);
    asb_run_result rr;
    int fds, thr, i, closing;
    ASBT_CHECK(c != NULL);
    for (closing = 0; closing < 2; closing++) {
        ASBT_EQ_RES(asb_client_sandbox_in_pod(c, &sb, &err), ASB_OK);
        ASBT_EQ_RES(asb_sandbox_run(sb, "true", 0, &rr, &err), ASB_OK);
        asb_run_result_free(&rr);
        fds = count_entries("/proc/self/fd");
        thr = count_entries("/proc/self/task");
        if (closing)
            asb_sandbox_close_connection(sb);
        else
            ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
        ASBT_CHECK(count_entries("/proc/self/fd") <= fds - 3); /* the socket and the wake pipe */
        ASBT_CHECK(count_entries("/proc/self/task") <= thr - 1); /* the connection's I/O thread, joined */
    }
    fds = count_entries("/proc/self/fd");
    thr = count_entries("/proc/self/task");
    for (i = 0; i < 5; i++) {
        ASBT_EQ_RES(asb_client_sandbox_in_pod(c, &sb, &err), ASB_OK);
        ASBT_EQ_RES(asb_sandbox_run(sb, "true", 0, &rr, &err), ASB_OK);
        asb_run_result_free(&rr);
        ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    }
    ASBT_EQ_INT(count_entries("/proc/self/fd"), fds);
    ASBT_EQ_INT(count_entries("/proc/self/task"), thr);
    asb_client_free(c);
}

typedef struct racing_run {
    asb_sandbox *sb;
    asb_result r;
} racing_run;

static void *run_sleep_2(void *arg) {
    racing_run *x = (racing_run *)arg;
    asb_run_result rr;
    asb_error err;
    x->r = asb_sandbox_run(x->sb, "sleep 2", 0, &rr, &err);
    asb_run_result_free(&rr);
    return NULL;
}

/* The same when the handle ends while a call runs on the connection
   (a watchdog thread terminating a sandbox whose command hangs): the
   connection goes once that call lets go of it. */
ASBT_TEST(a_handle_ended_while_a_call_runs_lets_go_when_the_call_does) {
    asb_error err;
    asb_sandbox *sb;
    asb_client *c = in_pod(&sb, &err);
    racing_run x;
    pthread_t th;
    int fds, thr;
    ASBT_CHECK(c != NULL);
    fds = count_entries("/proc/self/fd");
    thr = count_entries("/proc/self/task");
    x.sb = sb;
    x.r = ASB_ERR_IO;
    ASBT_CHECK(pthread_create(&th, NULL, run_sleep_2, &x) == 0);
    asb__sleep_ms(500); /* the call's stream is open by then, or soon after */
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    pthread_join(th, NULL);
    ASBT_EQ_INT(count_entries("/proc/self/fd"), fds);
    ASBT_EQ_INT(count_entries("/proc/self/task"), thr);
    asb_client_free(c);
}

/* read_to_fd into a pipe whose reader is gone (`| head` that ended):
   ASB_ERR_IO, and no SIGPIPE: its default action would end this process
   (the library promises never to raise it). */
ASBT_TEST(reading_into_a_pipe_with_no_reader_fails_without_sigpipe) {
    asb_error err;
    asb_sandbox *sb;
    asb_client *c = in_pod(&sb, &err);
    static char big[256 * 1024];
    sigset_t pending;
    int p[2];
    ASBT_CHECK(c != NULL);
    memset(big, 'x', sizeof big);
    ASBT_EQ_RES(asb_sandbox_write(sb, "big.txt", big, sizeof big, &err), ASB_OK);
    ASBT_CHECK(pipe(p) == 0);
    close(p[0]); /* the reader is gone */
    ASBT_EQ_RES(asb_sandbox_read_to_fd(sb, "big.txt", p[1], &err), ASB_ERR_IO);
    ASBT_CONTAINS(err.message, "writing to fd");
    close(p[1]);
    sigemptyset(&pending);
    ASBT_CHECK(sigpending(&pending) == 0);
    ASBT_CHECK(!sigismember(&pending, SIGPIPE)); /* none left for later either */
    asb_client_free(c);
}

ASBT_TEST(paths_and_cwd_outside_the_root_are_permission_denied) {
    asb_error err;
    asb_sandbox *sb;
    asb_client *c = in_pod(&sb, &err);
    asb_run_result rr;
    asb_call_opts o;
    asb_file_stat st;
    asb_file_list fl;
    ASBT_CHECK(c != NULL);
    memset(&o, 0, sizeof o);
    o.cwd = "../..";
    ASBT_EQ_RES(asb_sandbox_run_opts(sb, "pwd", &o, &rr, &err), ASB_ERR_PERMISSION_DENIED);
    ASBT_EQ_STR(err.reason, "PERMISSION_DENIED");
    ASBT_CONTAINS(err.message, "escapes sandbox root");
    asb_run_result_free(&rr);
    /* list, stat and exists are the runtime's to judge */
    ASBT_EQ_RES(asb_sandbox_stat(sb, "../..", &st, NULL, &err), ASB_ERR_PERMISSION_DENIED);
    ASBT_EQ_RES(asb_sandbox_list(sb, "../../etc", &fl, &err), ASB_ERR_PERMISSION_DENIED);
    ASBT_CONTAINS(err.message, "path traversal outside sandbox root is forbidden");
    ASBT_EQ_INT(err.http_status, 403);
    /* delete follows a write's path rules: refused before it is sent (R50) */
    ASBT_EQ_RES(asb_sandbox_delete_file(sb, "../outside", 1, NULL, &err),
                ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "escapes the base directory");
    asb_client_free(c);
}

ASBT_TEST(stat_says_file_directory_or_nothing_without_moving_the_body) {
    asb_error err;
    asb_sandbox *sb;
    asb_client *c = in_pod(&sb, &err);
    asb_file_stat st;
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(asb_sandbox_write(sb, "stat/f.txt", "12345", 5, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_stat(sb, "stat/f.txt", &st, NULL, &err), ASB_OK);
    ASBT_CHECK(st.exists && !st.is_dir);
    ASBT_CHECK(st.size == 5);
    ASBT_CHECK(st.mod_time > (double)time(NULL) - 3600 && st.mod_time < (double)time(NULL) + 5);
    ASBT_EQ_RES(asb_sandbox_stat(sb, "stat", &st, NULL, &err), ASB_OK);
    ASBT_CHECK(st.exists && st.is_dir);
    ASBT_EQ_RES(asb_sandbox_stat(sb, "stat/none", &st, NULL, &err), ASB_OK);
    ASBT_EQ_INT(st.exists, 0);
    asb_client_free(c);
}

ASBT_TEST(deleting_a_non_empty_directory_is_a_conflict_until_recursive) {
    asb_error err;
    asb_sandbox *sb;
    asb_client *c = in_pod(&sb, &err);
    int exists = -1;
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(asb_sandbox_write(sb, "del/a/b.txt", "b", 1, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_delete_file(sb, "del", 0, NULL, &err), ASB_ERR_CONFLICT);
    ASBT_EQ_INT(err.http_status, 409);
    ASBT_CONTAINS(err.message, "recursive");
    ASBT_EQ_RES(asb_sandbox_exists(sb, "del/a/b.txt", &exists, &err), ASB_OK);
    ASBT_EQ_INT(exists, 1); /* nothing went */
    ASBT_EQ_RES(asb_sandbox_delete_file(sb, "del/a/b.txt", 0, NULL, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_write(sb, "del/a/c.txt", "c", 1, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_delete_file(sb, "del", 1, NULL, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_exists(sb, "del", &exists, &err), ASB_OK);
    ASBT_EQ_INT(exists, 0);
    ASBT_EQ_RES(asb_sandbox_delete_file(sb, "del", 1, NULL, &err), ASB_ERR_NOT_FOUND);
    /* the root is refused before anything is sent */
    ASBT_EQ_RES(asb_sandbox_delete_file(sb, "", 1, NULL, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_EQ_RES(asb_sandbox_delete_file(sb, "./", 1, NULL, &err), ASB_ERR_INVALID_ARGUMENT);
    /* R50: by every other spelling too. sandboxd resolves each of these to
       its root, and a recursive DELETE of the root empties it; no status
       (nothing was sent) and the file below survives each */
    ASBT_EQ_RES(asb_sandbox_write(sb, "precious.txt", "p", 1, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_write(sb, "x/y", "y", 1, &err), ASB_OK);
    {
        static const char *const roots[] = {"x/..", "./x/../", "a/b/../..", "/x/..", "/..",
                                            "x/../y/.."};
        static const char *const out[] = {"../outside", "x/../../outside", "/x/../../.."};
        size_t i;
        for (i = 0; i < sizeof roots / sizeof roots[0]; i++) {
            fprintf(stderr, "    delete \"%s\"\n", roots[i]);
            memset(&err, 0, sizeof err);
            ASBT_EQ_RES(asb_sandbox_delete_file(sb, roots[i], 1, NULL, &err),
                        ASB_ERR_INVALID_ARGUMENT);
            ASBT_EQ_INT(err.http_status, 0);
            ASBT_CONTAINS(err.message, "base directory");
            ASBT_EQ_RES(asb_sandbox_exists(sb, "precious.txt", &exists, &err), ASB_OK);
            ASBT_EQ_INT(exists, 1);
        }
        /* "/x/../../.." stays at the root (a leading '/' is the root's) */
        for (i = 0; i < sizeof out / sizeof out[0]; i++) {
            fprintf(stderr, "    delete \"%s\"\n", out[i]);
            memset(&err, 0, sizeof err);
            ASBT_EQ_RES(asb_sandbox_delete_file(sb, out[i], 1, NULL, &err),
                        ASB_ERR_INVALID_ARGUMENT);
            ASBT_EQ_INT(err.http_status, 0);
            ASBT_EQ_RES(asb_sandbox_exists(sb, "precious.txt", &exists, &err), ASB_OK);
            ASBT_EQ_INT(exists, 1);
        }
    }
    /* the root by its absolute name in the pod: sandboxd would take it as
       the root; a leading '/' means the sandbox root here, so it names a
       path below the root that is not there */
    ASBT_EQ_RES(asb_sandbox_delete_file(sb, root, 1, NULL, &err), ASB_ERR_NOT_FOUND);
    ASBT_EQ_RES(asb_sandbox_exists(sb, "precious.txt", &exists, &err), ASB_OK);
    ASBT_EQ_INT(exists, 1);
    ASBT_EQ_RES(asb_sandbox_delete_file(sb, "x/../x", 1, NULL, &err), ASB_OK); /* is "x" */
    ASBT_EQ_RES(asb_sandbox_exists(sb, "x/y", &exists, &err), ASB_OK);
    ASBT_EQ_INT(exists, 0);
    ASBT_EQ_RES(asb_sandbox_delete_file(sb, "precious.txt", 0, NULL, &err), ASB_OK);
    asb_client_free(c);
}

/* R52: a directory answers a GET with its JSON listing: a read into an fd
   or a stream judged it after the listing had been written there. It is
   judged on the response head now, before the first byte. */
static asb_result count_bytes(void *user, const char *data, size_t len) {
    (void)data;
    *(size_t *)user += len;
    return ASB_OK;
}

ASBT_TEST(reading_a_directory_into_an_fd_or_a_stream_writes_nothing) {
    asb_error err;
    asb_sandbox *sb;
    asb_client *c = in_pod(&sb, &err);
    char path[] = "/tmp/asb-sbd-dirread-XXXXXX";
    int fd = mkstemp(path);
    struct stat st;
    size_t streamed = 0;
    asb_buf out;
    ASBT_CHECK(c != NULL && fd >= 0);
    unlink(path);
    ASBT_EQ_RES(asb_sandbox_write(sb, "listed/secret-name-in-listing", "s", 1, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_read_to_fd(sb, "listed", fd, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "is a directory");
    ASBT_CHECK(fstat(fd, &st) == 0);
    ASBT_EQ_INT((int)st.st_size, 0);
    close(fd);
    ASBT_EQ_RES(asb_sandbox_read_stream(sb, "listed", count_bytes, &streamed, &err),
                ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "is a directory");
    ASBT_EQ_INT((int)streamed, 0);
    /* a file still streams, and a buffered read of the directory is refused */
    ASBT_EQ_RES(asb_sandbox_read_stream(sb, "listed/secret-name-in-listing", count_bytes,
                                        &streamed, &err),
                ASB_OK);
    ASBT_EQ_INT((int)streamed, 1);
    asb_buf_init(&out, NULL);
    ASBT_EQ_RES(asb_sandbox_read(sb, "listed", &out, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_EQ_INT((int)out.len, 0);
    asb_buf_free(&out);
    ASBT_EQ_RES(asb_sandbox_delete_file(sb, "listed", 1, NULL, &err), ASB_OK);
    asb_client_free(c);
}

ASBT_TEST(metadata_shows_the_orchestrators_variables_but_no_secret) {
    asb_error err;
    asb_sandbox *sb;
    asb_client *c = in_pod(&sb, &err);
    asb_buf b;
    ASBT_CHECK(c != NULL);
    asb_buf_init(&b, NULL);
    ASBT_EQ_RES(asb_sandbox_metadata(sb, &b, NULL, &err), ASB_OK);
    ASBT_CHECK(b.len > 0);
    ASBT_CONTAINS(b.ptr, "\"SANDBOX_TEST_LABEL\":\"from-the-orchestrator\"");
    ASBT_CHECK(strstr(b.ptr, "never-shown") == NULL);
    asb_buf_free(&b);
    asb_client_free(c);
}

/* Output collected by the callback, checked for order. */
typedef struct lines {
    pthread_mutex_t mu;
    asb_buf out, errout;
    int calls;
} lines;

static void collect(void *u, asb_process_output which, const char *p, size_t n) {
    lines *l = (lines *)u;
    pthread_mutex_lock(&l->mu);
    asb_buf_append(which == ASB_PROCESS_STDERR ? &l->errout : &l->out, p, n);
    l->calls++;
    pthread_mutex_unlock(&l->mu);
}

static void lines_init(lines *l) {
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->mu, NULL);
    asb_buf_init(&l->out, NULL);
    asb_buf_init(&l->errout, NULL);
}

static void lines_free(lines *l) {
    asb_buf_free(&l->out);
    asb_buf_free(&l->errout);
    pthread_mutex_destroy(&l->mu);
}

/* po set to run shell with its output collected into l (initialised). */
static void collect_into(asb_process_opts *po, const char *shell, lines *l) {
    lines_init(l);
    memset(po, 0, sizeof *po);
    po->shell = shell;
    po->on_output = collect;
    po->user_data = l;
}

/* What `prefix <i>` for i in [from, to], one a line, looks like. */
static void numbered_lines(asb_buf *want, const char *prefix, int from, int to) {
    int i;
    asb_buf_init(want, NULL);
    for (i = from; i <= to; i++) {
        char ln[64];
        int n = snprintf(ln, sizeof ln, "%s %d\n", prefix, i);
        asb_buf_append(want, ln, (size_t)n);
    }
}

ASBT_TEST(a_process_streaming_10000_lines_delivers_them_in_order_and_complete) {
    asb_error err;
    asb_sandbox *sb;
    asb_client *c = in_pod(&sb, &err);
    asb_process_opts po;
    asb_process *p = NULL;
    lines l;
    asb_buf want;
    int code = -2;
    ASBT_CHECK(c != NULL);
    collect_into(&po, "i=1; while [ $i -le 10000 ]; do echo line $i; i=$((i+1)); done; echo done >&2",
                 &l);
    ASBT_EQ_RES(asb_sandbox_process_start(sb, &po, &p, &err), ASB_OK);
    ASBT_CHECK(asb_process_id(p) > 0);
    ASBT_EQ_RES(asb_process_wait(p, 0, &code, &err), ASB_OK);
    ASBT_EQ_INT(code, 0);
    numbered_lines(&want, "line", 1, 10000);
    ASBT_EQ_MEM(l.out.ptr, l.out.len, want.ptr, want.len);
    ASBT_EQ_STR(l.errout.ptr, "done\n");
    ASBT_CHECK(l.calls > 2); /* chunks, as they came: not one buffered blob */
    /* after the exit, wait answers again at once with the same code */
    code = -2;
    ASBT_EQ_RES(asb_process_wait(p, 0, &code, &err), ASB_OK);
    ASBT_EQ_INT(code, 0);
    asb_buf_free(&want);
    asb_process_free(p);
    lines_free(&l);
    asb_client_free(c);
}

typedef struct feeder {
    asb_process *p;
    int lines;
    asb_result r;
} feeder;

static void *feed(void *u) {
    feeder *f = (feeder *)u;
    asb_error err;
    int i;
    f->r = ASB_OK;
    for (i = 0; i < f->lines && f->r == ASB_OK; i++) {
        char ln[32];
        int n = snprintf(ln, sizeof ln, "typed %d\n", i);
        f->r = asb_process_write_stdin(f->p, ln, (size_t)n, &err);
    }
    if (f->r == ASB_OK) f->r = asb_process_close_stdin(f->p, &err);
    return NULL;
}

ASBT_TEST(stdin_typed_on_one_thread_comes_back_through_cat_on_another) {
    asb_error err;
    asb_sandbox *sb;
    asb_client *c = in_pod(&sb, &err);
    asb_process_opts po;
    asb_process *p = NULL;
    pthread_t t;
    feeder f;
    lines l;
    asb_buf want;
    int code = -2;
    ASBT_CHECK(c != NULL);
    collect_into(&po, "cat", &l);
    ASBT_EQ_RES(asb_sandbox_process_start(sb, &po, &p, &err), ASB_OK);
    f.p = p;
    f.lines = 200;
    ASBT_CHECK(pthread_create(&t, NULL, feed, &f) == 0);
    ASBT_EQ_RES(asb_process_wait(p, 0, &code, &err), ASB_OK); /* ends at EOF */
    pthread_join(t, NULL);
    ASBT_EQ_RES(f.r, ASB_OK);
    ASBT_EQ_INT(code, 0);
    numbered_lines(&want, "typed", 0, f.lines - 1);
    ASBT_EQ_MEM(l.out.ptr, l.out.len, want.ptr, want.len);
    /* closing twice is fine; writing after the close is not */
    ASBT_EQ_RES(asb_process_close_stdin(p, &err), ASB_OK);
    ASBT_EQ_RES(asb_process_write_stdin(p, "x", 1, &err), ASB_ERR_CLOSED);
    asb_buf_free(&want);
    asb_process_free(p);
    lines_free(&l);
    asb_client_free(c);
}

/* Closing stdin is done once the process is gone, whether it ended
   before the call or, as cat does at the EOF, while the call waited for
   sandboxd's answer: the exit event can come first (a cluster run's
   feeder met NOT_FOUND from its close that way). A write after the end
   is still refused: its bytes went nowhere. */
ASBT_TEST(closing_stdin_of_a_process_that_ended_is_done) {
    asb_error err;
    asb_sandbox *sb;
    asb_client *c = in_pod(&sb, &err);
    asb_process_opts po;
    asb_process *p = NULL;
    lines l;
    asb_result r;
    int code = -2, i;
    ASBT_CHECK(c != NULL);
    collect_into(&po, "true", &l);
    ASBT_EQ_RES(asb_sandbox_process_start(sb, &po, &p, &err), ASB_OK);
    ASBT_EQ_RES(asb_process_wait(p, 0, &code, &err), ASB_OK);
    ASBT_EQ_INT(code, 0);
    ASBT_EQ_RES(asb_process_write_stdin(p, "x", 1, &err), ASB_ERR_NOT_FOUND);
    ASBT_EQ_RES(asb_process_close_stdin(p, &err), ASB_OK);
    ASBT_EQ_RES(asb_process_close_stdin(p, &err), ASB_OK);
    ASBT_EQ_RES(asb_process_write_stdin(p, "x", 1, &err), ASB_ERR_CLOSED);
    asb_process_free(p);
    lines_free(&l);
    /* the race itself, as often as a test can afford: cat ends at the EOF */
    for (i = 0; i < 30; i++) {
        collect_into(&po, "cat", &l);
        ASBT_EQ_RES(asb_sandbox_process_start(sb, &po, &p, &err), ASB_OK);
        ASBT_EQ_RES(asb_process_write_stdin(p, "x\n", 2, &err), ASB_OK);
        r = asb_process_close_stdin(p, &err);
        if (r != ASB_OK) fprintf(stderr, "    close %d: %s [%s]\n", i, err.message, err.reason);
        ASBT_EQ_RES(r, ASB_OK);
        ASBT_EQ_RES(asb_process_wait(p, 0, &code, &err), ASB_OK);
        ASBT_EQ_INT(code, 0);
        ASBT_EQ_MEM(l.out.ptr, l.out.len, "x\n", 2);
        asb_process_free(p);
        lines_free(&l);
    }
    asb_client_free(c);
}

ASBT_TEST(sigint_ends_a_sleep_that_a_short_wait_leaves_running) {
    asb_error err;
    asb_sandbox *sb;
    asb_client *c = in_pod(&sb, &err);
    asb_process_opts po;
    asb_process *p = NULL;
    asb_run_result rr;
    int code = -2;
    ASBT_CHECK(c != NULL);
    memset(&po, 0, sizeof po);
    po.shell = "exec sleep 600";
    ASBT_EQ_RES(asb_sandbox_process_start(sb, &po, &p, &err), ASB_OK);
    ASBT_EQ_RES(asb_process_wait(p, 200, &code, &err), ASB_ERR_TIMEOUT); /* still runs */
    ASBT_EQ_RES(asb_sandbox_run(sb, "pgrep -x sleep >/dev/null && echo alive", 0, &rr, &err),
                ASB_OK);
    ASBT_EQ_STR(rr.out.ptr, "alive\n");
    asb_run_result_free(&rr);
    ASBT_EQ_RES(asb_process_signal(p, SIGINT, &err), ASB_OK);
    ASBT_EQ_RES(asb_process_wait(p, 0, &code, &err), ASB_OK);
    ASBT_EQ_INT(code, -1); /* a signal: sandboxd reports no number */
    /* it is gone: signals and stdin say so */
    ASBT_EQ_RES(asb_process_signal(p, SIGTERM, &err), ASB_ERR_NOT_FOUND);
    ASBT_EQ_RES(asb_process_signal(p, SIGHUP, &err), ASB_ERR_INVALID_ARGUMENT);
    asb_process_free(p);
    asb_client_free(c);
}

ASBT_TEST(a_pty_process_sees_its_size_and_a_resize) {
    asb_error err;
    asb_sandbox *sb;
    asb_client *c = in_pod(&sb, &err);
    asb_process_opts po;
    asb_process *p = NULL;
    lines l;
    int code = -2, i;
    ASBT_CHECK(c != NULL);
    /* prints its size at each SIGWINCH (sandboxd sets the first size just
       after the start, so that one may come as a SIGWINCH too) */
    collect_into(&po, "trap 'stty size' WINCH; stty size; while :; do sleep 0.05; done", &l);
    po.pty = 1;
    po.pty_rows = 30;
    po.pty_cols = 100;
    ASBT_EQ_RES(asb_sandbox_process_start(sb, &po, &p, &err), ASB_OK);
    for (i = 0; i < 200; i++) { /* the first size is on screen */
        int seen;
        asb_process_wait(p, 50, &code, &err);
        pthread_mutex_lock(&l.mu);
        seen = l.out.len > 0 && strstr(l.out.ptr, "30 100") != NULL;
        pthread_mutex_unlock(&l.mu);
        if (seen) break;
    }
    ASBT_CHECK(i < 200);
    ASBT_EQ_RES(asb_process_resize(p, 40, 120, &err), ASB_OK);
    for (i = 0; i < 400; i++) { /* and the new one */
        int seen;
        asb_process_wait(p, 50, &code, &err);
        pthread_mutex_lock(&l.mu);
        seen = strstr(l.out.ptr, "40 120") != NULL;
        pthread_mutex_unlock(&l.mu);
        if (seen) break;
    }
    ASBT_CHECK(i < 400);
    ASBT_EQ_RES(asb_process_signal(p, SIGKILL, &err), ASB_OK);
    ASBT_EQ_RES(asb_process_wait(p, 0, &code, &err), ASB_OK);
    ASBT_EQ_INT(code, -1);
    ASBT_CHECK(strstr(l.out.ptr, "30 100") < strstr(l.out.ptr, "40 120"));
    ASBT_EQ_RES(asb_process_resize(p, 0, 10, &err), ASB_ERR_INVALID_ARGUMENT);
    asb_process_free(p);
    lines_free(&l);
    /* no PTY: resizing is sandboxd's FAILED_PRECONDITION */
    memset(&po, 0, sizeof po);
    po.shell = "exec sleep 30";
    ASBT_EQ_RES(asb_sandbox_process_start(sb, &po, &p, &err), ASB_OK);
    ASBT_EQ_RES(asb_process_resize(p, 10, 10, &err), ASB_ERR_GRPC_STATUS);
    ASBT_EQ_STR(err.reason, "FAILED_PRECONDITION");
    asb_process_free(p); /* ends it */
    asb_client_free(c);
}

ASBT_TEST(a_process_deadline_or_cancel_ends_it_and_bad_starts_say_why) {
    asb_error err;
    asb_sandbox *sb;
    asb_client *c = in_pod(&sb, &err);
    asb_process_opts po;
    asb_process *p = NULL;
    asb_cancel *cancel = NULL;
    asb_run_result rr;
    const char *argv[2];
    int code = -2, i, gone = 0;
    ASBT_CHECK(c != NULL);
    memset(&po, 0, sizeof po);
    po.shell = "exec sleep 555";
    po.timeout_ms = 300;
    ASBT_EQ_RES(asb_sandbox_process_start(sb, &po, &p, &err), ASB_OK);
    ASBT_EQ_RES(asb_process_wait(p, 0, &code, &err), ASB_ERR_TIMEOUT);
    asb_process_free(p);
    ASBT_EQ_RES(asb_cancel_create(NULL, &cancel, &err), ASB_OK);
    po.timeout_ms = 0;
    po.cancel = cancel;
    ASBT_EQ_RES(asb_sandbox_process_start(sb, &po, &p, &err), ASB_OK);
    asb_cancel_trigger(cancel);
    ASBT_EQ_RES(asb_process_wait(p, 0, &code, &err), ASB_ERR_CANCELLED);
    asb_process_free(p);
    asb_cancel_free(cancel);
    /* sandboxd kills what lost its stream */
    for (i = 0; i < 100 && !gone; i++) {
        ASBT_EQ_RES(asb_sandbox_run(sb, "pgrep -f 'slee[p] 555' || echo none", 0, &rr, &err), ASB_OK);
        gone = strcmp(rr.out.ptr, "none\n") == 0;
        asb_run_result_free(&rr);
        if (!gone) asb__sleep_ms(100);
    }
    ASBT_CHECK(gone);
    memset(&po, 0, sizeof po);
    argv[0] = "no-such-program-here";
    po.argv = argv;
    po.argc = 1;
    ASBT_EQ_RES(asb_sandbox_process_start(sb, &po, &p, &err), ASB_ERR_NOT_FOUND);
    ASBT_CONTAINS(err.message, "no-such-program-here");
    ASBT_CHECK(p == NULL);
    po.shell = "true"; /* both */
    ASBT_EQ_RES(asb_sandbox_process_start(sb, &po, &p, &err), ASB_ERR_INVALID_ARGUMENT);
    po.argv = NULL;
    po.argc = 0;
    po.cwd = "../elsewhere";
    ASBT_EQ_RES(asb_sandbox_process_start(sb, &po, &p, &err), ASB_ERR_PERMISSION_DENIED);
    asb_client_free(c);
}

/* sandboxd restarted (the same addresses): the broken HTTP/2 connection is
   replaced on the next call, files and processes alike. */
ASBT_TEST(calls_recover_after_sandboxd_restarts) {
    asb_error err;
    asb_sandbox *sb;
    asb_client *c = in_pod(&sb, &err);
    asb_run_result rr;
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(asb_sandbox_run(sb, "echo one", 0, &rr, &err), ASB_OK);
    asb_run_result_free(&rr);
    sandboxd_stop();
    ASBT_CHECK(asb_sandbox_run(sb, "echo none", 0, &rr, &err) != ASB_OK); /* nobody there */
    asb_run_result_free(&rr);
    ASBT_CHECK(sandboxd_start(1));
    ASBT_EQ_RES(asb_sandbox_run(sb, "echo two", 0, &rr, &err), ASB_OK);
    ASBT_EQ_STR(rr.out.ptr, "two\n");
    asb_run_result_free(&rr);
    asb_client_free(c);
}

/* A gRPC port whose connects never complete (a full backlog: the kernel
   drops the SYNs, as for a pod IP that went away): the call's deadline
   ends the connect, not the client's connect timeout (10 minutes here),
   and a cancel token ends it too. The connect used the timeout alone.
   The bound on how long each took is loose (30 s for 300 ms). */
ASBT_TEST(a_connect_that_never_completes_ends_at_the_calls_deadline_or_cancel) {
    asb_client_desc d;
    asb_client *c = NULL;
    asb_sandbox *sb = NULL;
    asb_error err;
    asb_run_result rr;
    asb_call_opts o;
    asb_cancel *tok = NULL;
    canceller k;
    pthread_t th;
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    char addr[64];
    int64_t t0;
    int l = socket(AF_INET, SOCK_STREAM, 0), q = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASBT_CHECK(bind(l, (struct sockaddr *)&a, sizeof a) == 0 && listen(l, 0) == 0 &&
               getsockname(l, (struct sockaddr *)&a, &al) == 0);
    ASBT_CHECK(connect(q, (struct sockaddr *)&a, sizeof a) == 0); /* the one the backlog takes */
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ntohs(a.sin_port));
    memset(&d, 0, sizeof d);
    d.mode = ASB_CONNECT_IN_POD;
    d.sandboxd_grpc_addr = addr;
    d.kube.http.connect_timeout_ms = 600000;
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_OK);
    ASBT_EQ_RES(asb_client_sandbox_in_pod(c, &sb, &err), ASB_OK);
    memset(&rr, 0, sizeof rr);
    t0 = asb__now_ms();
    ASBT_EQ_RES(asb_sandbox_run(sb, "echo never", 300, &rr, &err), ASB_ERR_TIMEOUT);
    ASBT_CHECK(asb__now_ms() - t0 < 30000);
    asb_run_result_free(&rr);
    ASBT_CONTAINS(err.message, "the 300 ms deadline passed while connecting to sandboxd; the "
                               "command was not sent");
    ASBT_EQ_RES(asb_cancel_create(NULL, &tok, &err), ASB_OK);
    memset(&o, 0, sizeof o);
    o.timeout_ms = 120000;
    o.cancel = tok;
    k.token = tok;
    k.after_ms = 300;
    ASBT_CHECK(pthread_create(&th, NULL, cancel_later, &k) == 0);
    t0 = asb__now_ms();
    ASBT_EQ_RES(asb_sandbox_run_opts(sb, "echo never", &o, &rr, &err), ASB_ERR_CANCELLED);
    ASBT_CHECK(asb__now_ms() - t0 < 30000);
    pthread_join(th, NULL);
    asb_run_result_free(&rr);
    asb_client_free(c);
    asb_cancel_free(tok);
    close(q);
    close(l);
}

/* A relay in front of sandboxd's gRPC port, as kubectl port-forward is
   one: it accepts, and for the first `drop` connections closes at once
   (kubectl does when it finds no way to the pod; seen under load after
   a pod tunnel's kubectl was replaced); with `hold`, it keeps the next
   ones open and silent (a peer that never speaks); else it relays to
   sandboxd. */
typedef struct drop_relay {
    int lfd, port;
    pthread_mutex_t mu; /* what follows: set and read by the test too */
    int drop, hold, accepted, held[8], nheld;
    pthread_t thread;
} drop_relay;

static void relay_pipe(int a, int b) {
    char buf[16384];
    struct pollfd pf[2];
    pf[0].fd = a;
    pf[1].fd = b;
    for (;;) {
        int i;
        pf[0].events = pf[1].events = POLLIN;
        if (poll(pf, 2, -1) <= 0) return;
        for (i = 0; i < 2; i++) {
            ssize_t n;
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            n = read(pf[i].fd, buf, sizeof buf);
            if (n <= 0 || write(pf[1 - i].fd, buf, (size_t)n) != n) return;
        }
    }
}

static void *drop_relay_conn(void *arg) {
    int fd = (int)(intptr_t)arg, up = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((unsigned short)grpc_port);
    if (up >= 0 && connect(up, (struct sockaddr *)&a, sizeof a) == 0) relay_pipe(fd, up);
    if (up >= 0) close(up);
    close(fd);
    return NULL;
}

static void *drop_relay_run(void *arg) {
    drop_relay *r = (drop_relay *)arg;
    for (;;) {
        pthread_t t;
        int fd = accept(r->lfd, NULL, NULL), what; /* 0 relay, 1 drop, 2 held */
        if (fd < 0) return NULL; /* the listener was shut down */
        pthread_mutex_lock(&r->mu);
        what = r->accepted++ < r->drop ? 1 : r->hold && r->nheld < 8 ? 2 : 0;
        if (what == 2) r->held[r->nheld++] = fd;
        pthread_mutex_unlock(&r->mu);
        if (what == 1) close(fd);
        if (what) continue;
        if (pthread_create(&t, NULL, drop_relay_conn, (void *)(intptr_t)fd) == 0)
            pthread_detach(t);
        else
            close(fd);
    }
}

static int drop_relay_start(drop_relay *r) {
    struct sockaddr_in a;
    socklen_t n = sizeof a;
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    r->lfd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (r->lfd >= 0 && bind(r->lfd, (struct sockaddr *)&a, sizeof a) == 0 &&
        listen(r->lfd, 16) == 0 && getsockname(r->lfd, (struct sockaddr *)&a, &n) == 0 &&
        pthread_create(&r->thread, NULL, drop_relay_run, r) == 0) {
        r->port = ntohs(a.sin_port);
        return 1;
    }
    if (r->lfd >= 0) close(r->lfd);
    pthread_mutex_destroy(&r->mu);
    return 0;
}

/* Connections accepted so far; then the first `drop` of all (counted
   from the start) are dropped, and with hold 1 the next are held, with
   hold 0 those held are closed (drop < 0, hold < 0: unchanged). */
static int drop_relay_set(drop_relay *r, int drop, int hold) {
    int n, i;
    pthread_mutex_lock(&r->mu);
    n = r->accepted;
    if (drop >= 0) r->drop = drop;
    if (hold >= 0) r->hold = hold;
    if (hold == 0) {
        for (i = 0; i < r->nheld; i++) close(r->held[i]);
        r->nheld = 0;
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

static void drop_relay_stop(drop_relay *r) {
    drop_relay_set(r, -1, 0);
    shutdown(r->lfd, SHUT_RDWR);
    pthread_join(r->thread, NULL);
    close(r->lfd);
    pthread_mutex_destroy(&r->mu);
}

/* An in-pod client whose gRPC address is the relay's (connect timeout
   ms; 0: the default). */
static asb_client *in_pod_via(drop_relay *r, int connect_ms, asb_sandbox **sb,
                              asb_error *err) {
    asb_client_desc d;
    asb_client *c = NULL;
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", r->port);
    memset(&d, 0, sizeof d);
    d.mode = ASB_CONNECT_IN_POD;
    d.sandboxd_rest_addr = getenv("SANDBOXD_REST_ADDR");
    d.sandboxd_grpc_addr = addr;
    d.kube.http.connect_timeout_ms = connect_ms;
    if (asb_client_create(&d, &c, err) != ASB_OK) return NULL;
    if (asb_client_sandbox_in_pod(c, sb, err) != ASB_OK) {
        asb_client_free(c);
        return NULL;
    }
    return c;
}

typedef struct held_start {
    asb_sandbox *sb;
    asb_result r;
    pthread_mutex_t mu;
    int done;
} held_start;

static void *held_start_run(void *arg) {
    held_start *h = (held_start *)arg;
    asb_process_opts po;
    asb_process *p = NULL;
    asb_error err;
    asb_result r;
    memset(&po, 0, sizeof po);
    po.shell = "true";
    r = asb_sandbox_process_start(h->sb, &po, &p, &err);
    asb_process_free(p);
    pthread_mutex_lock(&h->mu);
    h->r = r;
    h->done = 1;
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static void dropped_connection_cases(drop_relay *relay) {
    asb_error err;
    asb_sandbox *sb;
    asb_client *c;
    asb_run_result rr;
    asb_process *p = NULL;
    asb_process_opts po;
    asb_call_opts co;
    asb_cancel *tok = NULL;
    canceller k;
    held_start hs;
    pthread_t th;
    int i, code = -1, done;
    /* dropped once: the run goes out on the next connection */
    drop_relay_set(relay, 1, -1);
    c = in_pod_via(relay, 0, &sb, &err);
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(asb_sandbox_run(sb, "echo through", 0, &rr, &err), ASB_OK);
    ASBT_EQ_STR(rr.out.ptr, "through\n");
    asb_run_result_free(&rr);
    /* the dropped one, then the one that served; the next is dropped too */
    ASBT_EQ_INT(drop_relay_set(relay, 3, -1), 2);
    asb_client_free(c);
    /* a process start on a new handle, dropped once first */
    c = in_pod_via(relay, 0, &sb, &err);
    ASBT_CHECK(c != NULL);
    memset(&po, 0, sizeof po);
    po.shell = "exit 7";
    ASBT_EQ_RES(asb_sandbox_process_start(sb, &po, &p, &err), ASB_OK);
    ASBT_EQ_RES(asb_process_wait(p, 0, &code, &err), ASB_OK);
    ASBT_EQ_INT(code, 7);
    asb_process_free(p);
    /* dropped every time from here: the call fails after one more try */
    ASBT_EQ_INT(drop_relay_set(relay, 1000, -1), 4);
    asb_client_free(c);
    c = in_pod_via(relay, 0, &sb, &err);
    ASBT_CHECK(c != NULL);
    i = drop_relay_set(relay, -1, -1);
    ASBT_EQ_RES(asb_sandbox_run(sb, "echo never", 0, &rr, &err), ASB_ERR_CONNECT);
    asb_run_result_free(&rr);
    ASBT_CONTAINS(err.message, "before its SETTINGS");
    ASBT_EQ_INT(drop_relay_set(relay, -1, -1) - i, 2);
    asb_client_free(c);
    /* A peer that takes the connection and never speaks: the call's
       deadline ends the wait for it, saying so */
    i = drop_relay_set(relay, 0, 1);
    c = in_pod_via(relay, 60000, &sb, &err);
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(asb_sandbox_run(sb, "echo never", 1500, &rr, &err), ASB_ERR_TIMEOUT);
    asb_run_result_free(&rr);
    ASBT_CONTAINS(err.message, "deadline passed while connecting to sandboxd; the command was not sent");
    /* while one caller waits for it (no deadline but the minute's connect
       timeout), another on the handle is not held behind it: its cancel
       token ends its wait */
    memset(&hs, 0, sizeof hs);
    hs.sb = sb;
    pthread_mutex_init(&hs.mu, NULL);
    ASBT_EQ_INT(pthread_create(&th, NULL, held_start_run, &hs), 0);
    while (drop_relay_set(relay, -1, -1) < i + 2) asb__sleep_ms(10); /* it connected */
    ASBT_EQ_RES(asb_cancel_create(NULL, &tok, &err), ASB_OK);
    k.token = tok;
    k.after_ms = 300;
    {
        pthread_t kt;
        ASBT_EQ_INT(pthread_create(&kt, NULL, cancel_later, &k), 0);
        memset(&co, 0, sizeof co);
        co.cancel = tok;
        ASBT_EQ_RES(asb_sandbox_run_opts(sb, "echo never", &co, &rr, &err), ASB_ERR_CANCELLED);
        asb_run_result_free(&rr);
        pthread_join(kt, NULL);
    }
    pthread_mutex_lock(&hs.mu);
    done = hs.done;
    pthread_mutex_unlock(&hs.mu);
    ASBT_EQ_INT(done, 0); /* still waiting: only closing the relay's side ends it */
    drop_relay_set(relay, 1000, 0); /* its connection closes, a new one is dropped */
    pthread_join(th, NULL);
    ASBT_EQ_RES(hs.r, ASB_ERR_CONNECT);
    pthread_mutex_destroy(&hs.mu);
    asb_cancel_free(tok);
    asb_client_free(c);
}

/* A new gRPC connection that ends before sandboxd's SETTINGS carried
   nothing of the call: the call is made again on a new one, not failed
   ("connection closed by the peer"). Both kinds of call that open the
   connection: a unary run and a process's Start stream. And the wait for
   SETTINGS keeps the call's deadline and holds no other caller. */
ASBT_TEST(a_grpc_connection_dropped_before_sandboxd_spoke_is_made_again) {
    drop_relay relay;
    ASBT_CHECK(drop_relay_start(&relay));
    dropped_connection_cases(&relay); /* returns at its first failed check */
    drop_relay_stop(&relay);
}

ASBT_TEST(the_legacy_runtime_refuses_sandboxd_calls_before_sending_anything) {
    asb_error err;
    asb_sandbox *sb;
    asb_client *c = in_pod(&sb, &err);
    asb_file_stat st;
    asb_buf b;
    asb_process_opts po;
    asb_process *p = NULL;
    asb_call_opts o;
    asb_run_result rr;
    ASBT_CHECK(c != NULL);
    sb->rt = &asb__runtime_legacy; /* as a legacy sandbox's handle is */
    ASBT_EQ_RES(asb_sandbox_stat(sb, "x", &st, NULL, &err), ASB_ERR_UNSUPPORTED);
    ASBT_CONTAINS(err.message, "legacy runtime");
    ASBT_EQ_RES(asb_sandbox_delete_file(sb, "x", 0, NULL, &err), ASB_ERR_UNSUPPORTED);
    asb_buf_init(&b, NULL);
    ASBT_EQ_RES(asb_sandbox_metadata(sb, &b, NULL, &err), ASB_ERR_UNSUPPORTED);
    asb_buf_free(&b);
    memset(&po, 0, sizeof po);
    po.shell = "true";
    ASBT_EQ_RES(asb_sandbox_process_start(sb, &po, &p, &err), ASB_ERR_UNSUPPORTED);
    memset(&o, 0, sizeof o);
    o.cwd = "work";
    ASBT_EQ_RES(asb_sandbox_run_opts(sb, "true", &o, &rr, &err), ASB_ERR_UNSUPPORTED);
    asb_run_result_free(&rr);
    o.cwd = NULL;
    o.file_mode = 0755;
    ASBT_EQ_RES(asb_sandbox_write_opts(sb, "x", "", 0, &o, &err), ASB_ERR_UNSUPPORTED);
    sb->rt = &asb__runtime_sandboxd;
    asb_client_free(c);
}

ASBT_TEST(in_pod_needs_sandboxds_addresses_and_has_no_kubernetes_api) {
    asb_client_desc d;
    asb_client *c = NULL;
    asb_sandbox *sb = NULL;
    asb_error err;
    asb_name_list names;
    char *rest = strdup(getenv("SANDBOXD_REST_ADDR"));
    memset(&d, 0, sizeof d);
    d.mode = ASB_CONNECT_IN_POD;
    unsetenv("SANDBOXD_REST_ADDR");
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "SANDBOXD_REST_ADDR");
    d.sandboxd_rest_addr = "http://127.0.0.1:1"; /* host:port, not a URL */
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "is not host:port");
    d.sandboxd_rest_addr = rest;
    setenv("SANDBOXD_REST_ADDR", rest, 1);
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_OK); /* the desc is copied: */
    free(rest);
    ASBT_EQ_RES(asb_client_list_all(c, NULL, NULL, &names, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "no Kubernetes API");
    ASBT_EQ_RES(asb_client_sandbox_in_pod(c, &sb, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK); /* the handle only */
    {
        asb_file_stat st;
        ASBT_EQ_RES(asb_sandbox_stat(sb, "x", &st, NULL, &err), ASB_ERR_CLOSED);
    }
    asb_client_free(c);
    /* sandboxd cannot be reached through a router */
    memset(&d, 0, sizeof d);
    d.mode = ASB_CONNECT_DIRECT;
    d.direct_url = "http://127.0.0.1:1";
    d.runtime = ASB_RUNTIME_SANDBOXD;
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "not through a router");
}

/* Spans of the process API and of stat / delete_file / metadata, on the
   real sandboxd: children of the caller's span (tracer.parent; an in-pod
   handle has no lifecycle), the program's name and the exit code, never
   argv. (Their traceparent on REST: test_trace; as gRPC metadata:
   test_h2_peers.) */
typedef struct tr_span {
    char name[64], attrs[512];
    unsigned char parent[8];
    asb_result status;
} tr_span;
typedef struct tr_seen {
    pthread_mutex_t mu;
    int n;
    tr_span s[16];
} tr_seen;

static void tr_on_span(void *u, const asb_span_data *d) {
    tr_seen *t = (tr_seen *)u;
    size_t i, l = 0;
    pthread_mutex_lock(&t->mu);
    if (t->n < 16) {
        tr_span *o = &t->s[t->n++];
        memset(o, 0, sizeof *o);
        snprintf(o->name, sizeof o->name, "%s", d->name);
        memcpy(o->parent, d->parent_span_id, 8);
        o->status = d->status;
        for (i = 0; i < d->attr_count && l < sizeof o->attrs; i++) {
            int n = d->attrs[i].type == ASB_ATTR_STRING
                        ? snprintf(o->attrs + l, sizeof o->attrs - l, "%s=%s;", d->attrs[i].key,
                                   d->attrs[i].str)
                        : snprintf(o->attrs + l, sizeof o->attrs - l, "%s=%lld;", d->attrs[i].key,
                                   (long long)d->attrs[i].num);
            if (n > 0) l += (size_t)n;
        }
    }
    pthread_mutex_unlock(&t->mu);
}

static const tr_span *tr_find(tr_seen *t, const char *name) {
    int i;
    for (i = 0; i < t->n; i++)
        if (strcmp(t->s[i].name, name) == 0) return &t->s[i];
    return NULL;
}

ASBT_TEST(process_and_file_calls_are_spans_with_the_program_and_exit_code_only) {
    static tr_seen t;
    static const unsigned char pid8[8] = {0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31};
    const char *argv[3] = {"/bin/sh", "-c", "echo TOKEN=sekrit1 >/dev/null; exit 7"};
    const char *names[5] = {"svc.process_start", "svc.process_wait", "svc.stat",
                            "svc.delete_file", "svc.metadata"};
    asb_env_var ev;
    asb_client_desc d;
    asb_client *c = NULL;
    asb_sandbox *sb = NULL;
    asb_process_opts po;
    asb_process *p = NULL;
    asb_file_stat st;
    asb_buf md;
    asb_error err;
    const tr_span *s;
    int code = -2, i;
    memset(&t, 0, sizeof t);
    pthread_mutex_init(&t.mu, NULL);
    memset(&ev, 0, sizeof ev);
    ev.name = "API_KEY";
    ev.value = "sekrit2";
    memset(&d, 0, sizeof d);
    d.mode = ASB_CONNECT_IN_POD;
    d.tracer.enable = 1;
    d.tracer.otlp = -1;
    d.tracer.service_name = "svc";
    d.tracer.parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    d.tracer.on_span_end = tr_on_span;
    d.tracer.user_data = &t;
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_OK);
    ASBT_EQ_RES(asb_client_sandbox_in_pod(c, &sb, &err), ASB_OK);
    memset(&po, 0, sizeof po);
    po.argv = argv;
    po.argc = 3;
    po.env = &ev;
    po.env_count = 1;
    ASBT_EQ_RES(asb_sandbox_process_start(sb, &po, &p, &err), ASB_OK);
    ASBT_EQ_RES(asb_process_wait(p, 0, &code, &err), ASB_OK);
    ASBT_EQ_INT(code, 7);
    ASBT_EQ_RES(asb_sandbox_write(sb, "traced.txt", "12345", 5, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_stat(sb, "traced.txt", &st, NULL, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_delete_file(sb, "traced.txt", 0, NULL, &err), ASB_OK);
    asb_buf_init(&md, NULL);
    ASBT_EQ_RES(asb_sandbox_metadata(sb, &md, NULL, &err), ASB_OK);
    asb_buf_free(&md);
    for (i = 0; i < 5; i++) {
        s = tr_find(&t, names[i]);
        if (!s) fprintf(stderr, "    no span %s\n", names[i]);
        ASBT_CHECK(s != NULL);
        ASBT_CHECK(memcmp(s->parent, pid8, 8) == 0);
        ASBT_EQ_RES(s->status, ASB_OK);
    }
    s = tr_find(&t, "svc.process_start");
    ASBT_CONTAINS(s->attrs, "sandbox.command.executable=sh;");
    ASBT_CONTAINS(s->attrs, "sandbox.process.pid=");
    s = tr_find(&t, "svc.process_wait");
    ASBT_CONTAINS(s->attrs, "sandbox.exit_code=7;");
    ASBT_CONTAINS(tr_find(&t, "svc.stat")->attrs, "sandbox.file.path=traced.txt;sandbox.file.size=5;");
    for (i = 0; i < t.n; i++) {
        ASBT_CHECK(strstr(t.s[i].attrs, "sekrit") == NULL);
        ASBT_CHECK(strstr(t.s[i].attrs, "TOKEN") == NULL);
    }
    asb_process_free(p);
    asb_client_free(c);
    pthread_mutex_destroy(&t.mu);
}

static int setup_ok;

/* TCP keepalive (asb_http_client_desc.tcp_keepalive_s, which the SDK gives
   its gRPC connections too): a process stream with no deadline, on a
   sandboxd whose host then drops every packet (no FIN, no RST: a node
   powered off), fails after a few probes instead of waiting forever.
   sandboxd runs in a network namespace of its own, joined to the test's
   (also its own, made here; root) by a veth pair; "gone" is its side's
   egress queue set to hold no packet. Addresses are from 198.18.0.0/15,
   the benchmarking range, inside these namespaces only. */
typedef struct ka_wait {
    asb_process *p;
    asb_result r;
    int code;
    asb_error err;
} ka_wait;

static void *ka_wait_run(void *arg) {
    ka_wait *w = (ka_wait *)arg;
    w->r = asb_process_wait(w->p, 0, &w->code, &w->err);
    return NULL;
}

/* Bytes on their way when the host went silent: unacknowledged, so not
   keepalive's case but TCP_USER_TIMEOUT's; the error must still say why. */
static void *ka_write_run(void *arg) {
    ka_wait *w = (ka_wait *)arg;
    static char chunk[256 << 10];
    w->r = asb_process_write_stdin(w->p, chunk, sizeof chunk, &w->err);
    return NULL;
}

static int ka_sh(const char *fmt, ...) {
    char cmd[512];
    va_list ap;
    int st;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    st = system(cmd);
    if (st != 0) fprintf(stderr, "    `%s` exited %d\n", cmd, st);
    return st == 0;
}

ASBT_TEST(a_stream_to_a_peer_gone_silent_fails_by_keepalive_instead_of_waiting_forever) {
    int home = -1, go[2] = {-1, -1}, up[2] = {-1, -1}, ok = 0, joined = 0, i;
    pid_t spid = -1;
    asb_client_desc d;
    asb_client *c = NULL;
    asb_sandbox *sb = NULL;
    asb_process_opts po;
    asb_process *p = NULL;
    asb_error err;
    ka_wait w, wr;
    pthread_t t, tw;
    char rest_env[300] = "", grpc_env[300] = "", ch;
    const char *bin = getenv("ASB_SANDBOXD");
    if (geteuid() != 0) fprintf(stderr, "    needs root: it makes network namespaces\n");
    ASBT_CHECK(geteuid() == 0 && bin != NULL);
    snprintf(rest_env, sizeof rest_env, "%s", getenv("SANDBOXD_REST_ADDR"));
    snprintf(grpc_env, sizeof grpc_env, "%s", getenv("SANDBOXD_GRPC_ADDR"));
    memset(&w, 0, sizeof w);
    memset(&wr, 0, sizeof wr);
    /* this thread (and the threads it starts) into a namespace of its own,
       back home at the end */
    home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    ASBT_CHECK(home >= 0);
    ASBT_CHECK(pipe(go) == 0 && pipe(up) == 0);
    if (unshare(CLONE_NEWNET) != 0) {
        fprintf(stderr, "    unshare(CLONE_NEWNET): %s\n", strerror(errno));
        close(home);
        ASBT_CHECK(0);
    }
    spid = fork();
    if (spid == 0) {
        int dn = open("/dev/null", O_WRONLY);
        setpgid(0, 0); /* sandboxd and its socats: one kill */
        if (unshare(CLONE_NEWNET) != 0) _exit(3);
        if (write(up[1], "u", 1) != 1) _exit(3);
        if (read(go[0], &ch, 1) != 1) _exit(3); /* its link is set up */
        if (dn >= 0) {
            dup2(dn, 1);
            dup2(dn, 2);
        }
        /* sandboxd binds 127.0.0.1 only: socat carries the veth's
           address to it, in the same namespace (so silent with it) */
        setenv("ASB_KA_ROOT", root, 1);
        setenv("ASB_KA_BIN", bin, 1);
        execl("/bin/sh", "sh", "-c",
              "for p in 7101 7102; do socat TCP-LISTEN:$p,bind=198.18.0.2,fork,reuseaddr "
              "TCP:127.0.0.1:$p & done; exec \"$ASB_KA_BIN\" --rest-port 7101 --grpc-port 7102 "
              "--root-dir=\"$ASB_KA_ROOT\" --shutdown-timeout=1s", (char *)NULL);
        _exit(127);
    }
    if (spid < 0 || read(up[0], &ch, 1) != 1) goto out;
    if (!ka_sh("ip link set lo up && ip link add asbka0 type veth peer name asbka1 netns %d && "
               "ip addr add 198.18.0.1/30 dev asbka0 && ip link set asbka0 up", (int)spid) ||
        !ka_sh("nsenter -t %d -n sh -c 'ip link set lo up && ip addr add 198.18.0.2/30 dev asbka1 "
               "&& ip link set asbka1 up'", (int)spid))
        goto out;
    if (write(go[1], "g", 1) != 1) goto out;
    setenv("SANDBOXD_REST_ADDR", "198.18.0.2:7101", 1);
    setenv("SANDBOXD_GRPC_ADDR", "198.18.0.2:7102", 1);
    memset(&d, 0, sizeof d);
    d.mode = ASB_CONNECT_IN_POD;
    d.kube.http.tcp_keepalive_s = 2; /* probes at 2 s of silence, then every 1 s, 3 of them */
    if (asb_client_create(&d, &c, &err) != ASB_OK || asb_client_sandbox_in_pod(c, &sb, &err) != ASB_OK) {
        fprintf(stderr, "    client: %s\n", err.message);
        goto out;
    }
    memset(&po, 0, sizeof po);
    po.shell = "exec sleep 600";
    for (i = 0; i < 200; i++) { /* sandboxd starting: up to 20 s */
        if (asb_sandbox_process_start(sb, &po, &p, &err) == ASB_OK) break;
        asb__sleep_ms(100);
    }
    if (!p) {
        fprintf(stderr, "    start: %s\n", err.message);
        goto out;
    }
    /* the sandbox's host goes silent */
    if (!ka_sh("nsenter -t %d -n tc qdisc add dev asbka1 root pfifo limit 0", (int)spid)) goto out;
    w.p = wr.p = p;
    w.r = wr.r = ASB_OK;
    ASBT_CHECK(pthread_create(&t, NULL, ka_wait_run, &w) == 0);
    ASBT_CHECK(pthread_create(&tw, NULL, ka_write_run, &wr) == 0);
    {
        /* the probes end it within seconds; the bound is for a machine
           under load, and for the old code, which never returned */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 120;
        joined = pthread_timedjoin_np(t, NULL, &ts) == 0;
        joined = pthread_timedjoin_np(tw, NULL, &ts) == 0 && joined;
    }
    if (!joined) {
        fprintf(stderr, "    the wait or the write had not returned after 120 s\n");
        /* let the close through so that the waiting threads end */
        ka_sh("nsenter -t %d -n tc qdisc del dev asbka1 root", (int)spid);
        kill(-spid, SIGKILL);
        pthread_join(t, NULL);
        pthread_join(tw, NULL);
        goto out;
    }
    fprintf(stderr, "    wait: %s: %s\n    write: %s: %s\n", asb_result_str(w.r), w.err.message,
            asb_result_str(wr.r), wr.err.message);
    ok = w.r != ASB_OK && w.r != ASB_ERR_TIMEOUT && strstr(w.err.message, "timed out") != NULL &&
         wr.r != ASB_OK && strstr(wr.err.message, "timed out") != NULL;
out:
    if (p) asb_process_free(p);
    if (c) asb_client_free(c);
    if (spid > 0) {
        kill(-spid, SIGKILL);
        kill(spid, SIGKILL);
        waitpid(spid, NULL, 0);
    }
    if (go[0] >= 0) close(go[0]), close(go[1]);
    if (up[0] >= 0) close(up[0]), close(up[1]);
    ASBT_CHECK(setns(home, CLONE_NEWNET) == 0);
    close(home);
    setenv("SANDBOXD_REST_ADDR", rest_env, 1);
    setenv("SANDBOXD_GRPC_ADDR", grpc_env, 1);
    ASBT_CHECK(joined);
    ASBT_CHECK(ok);
}

static int check_sandboxd(const char *name, int failed) {
    (void)name;
    (void)failed;
    return !setup_ok;
}

ASBT_LIST(ASBT_CASE(handle_calls_work_on_sandboxd_as_on_the_legacy_runtime)
          ASBT_CASE(run_takes_env_and_cwd_and_a_write_takes_a_mode)
    ASBT_CASE(a_command_timeout_ends_the_command_and_is_a_timed_out_result)
    ASBT_CASE(an_ended_handle_lets_go_of_its_grpc_connection)
    ASBT_CASE(a_handle_ended_while_a_call_runs_lets_go_when_the_call_does)
    ASBT_CASE(reading_into_a_pipe_with_no_reader_fails_without_sigpipe)
          ASBT_CASE(paths_and_cwd_outside_the_root_are_permission_denied)
          ASBT_CASE(stat_says_file_directory_or_nothing_without_moving_the_body)
          ASBT_CASE(deleting_a_non_empty_directory_is_a_conflict_until_recursive)
          ASBT_CASE(reading_a_directory_into_an_fd_or_a_stream_writes_nothing)
          ASBT_CASE(metadata_shows_the_orchestrators_variables_but_no_secret)
          ASBT_CASE(a_process_streaming_10000_lines_delivers_them_in_order_and_complete)
          ASBT_CASE(stdin_typed_on_one_thread_comes_back_through_cat_on_another)
          ASBT_CASE(closing_stdin_of_a_process_that_ended_is_done)
          ASBT_CASE(sigint_ends_a_sleep_that_a_short_wait_leaves_running)
          ASBT_CASE(a_pty_process_sees_its_size_and_a_resize)
          ASBT_CASE(a_process_deadline_or_cancel_ends_it_and_bad_starts_say_why)
          ASBT_CASE(process_and_file_calls_are_spans_with_the_program_and_exit_code_only)
          ASBT_CASE(calls_recover_after_sandboxd_restarts)
          ASBT_CASE(a_connect_that_never_completes_ends_at_the_calls_deadline_or_cancel)
          ASBT_CASE(a_grpc_connection_dropped_before_sandboxd_spoke_is_made_again)
          ASBT_CASE(the_legacy_runtime_refuses_sandboxd_calls_before_sending_anything)
          ASBT_CASE(in_pod_needs_sandboxds_addresses_and_has_no_kubernetes_api)
          ASBT_CASE(a_stream_to_a_peer_gone_silent_fails_by_keepalive_instead_of_waiting_forever))

int run_all(int argc, char **argv);
#define main run_all
ASBT_MAIN()
#undef main

int main(int argc, char **argv) {
    int rc;
    char cmd[300];
    snprintf(root, sizeof root, "/tmp/asb-sandboxd-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    setup_ok = sandboxd_start(0);
    if (!setup_ok) fprintf(stderr, "sandboxd did not start (ASB_SANDBOXD=%s)\n",
                           getenv("ASB_SANDBOXD") ? getenv("ASB_SANDBOXD") : "(unset)");
    asbt_after_each = check_sandboxd;
    rc = setup_ok ? run_all(argc, argv) : 1;
    sandboxd_stop();
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) rc = 1;
    return rc;
}
