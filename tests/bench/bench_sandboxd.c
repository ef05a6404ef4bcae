/* make bench-sandboxd, our side (bench_sandboxd.py is the Python SDK 1.0.8
   [grpc] side: the same workload, each in its own processes, on the same
   sandboxd of the same cluster):

     bench_sandboxd workload RUNS
         one sandbox from the warm pool sandboxd-warmpool (the real
         sandboxd; the runtime picked from the template, the pod tunnel
         `kubectl port-forward pod/<pod> :8080 :9090`): run("true") RUNS
         times after one warm-up run that starts the tunnel; a 64 MiB file
         written and read back 3 times (streamed both ways, checked as it
         arrives, inside the timing); the first output of a streaming
         process (`echo first`, and `echo first; sleep 1`), 5 times each,
         from the start call to the first stdout chunk; then this process's
         peak RSS and CPU time.

   Reads KUBECONFIG. Results go to stdout as "result <name> <value>" lines;
   bench_sandboxd.py report compares them. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_POOL "sandboxd-warmpool"
#define BENCH_NAME "bench_sandboxd"
#define BENCH_FILE_BYTES ((uint64_t)64 << 20)
#define BENCH_BLOCK 65536
#define BENCH_FILE_REPS 3 /* the report takes the median */
#define BENCH_FIRST_REPS 5

#include "bench_file.h"

/* The first stdout chunk's time (the callback runs on the thread that
   called start or wait, so no lock is needed) and what came. */
typedef struct first_out {
    double at;
    char text[64];
    size_t len;
} first_out;

static void on_output(void *user_data, asb_process_output which, const char *data, size_t len) {
    first_out *f = (first_out *)user_data;
    if (which != ASB_PROCESS_STDOUT) return;
    if (f->at == 0) f->at = now_ms();
    while (len-- && f->len < sizeof f->text - 1) f->text[f->len++] = *data++;
    f->text[f->len] = '\0';
}

/* Start to first stdout chunk of `shell`, then its exit (untimed). */
static int first_output(asb_sandbox *sb, const char *shell, const char *key) {
    asb_process_opts po;
    asb_process *p;
    asb_error err;
    first_out f;
    double t0;
    int code = -1, i;
    for (i = 0; i < BENCH_FIRST_REPS; i++) {
        memset(&f, 0, sizeof f);
        memset(&po, 0, sizeof po);
        po.shell = shell;
        po.on_output = on_output;
        po.user_data = &f;
        t0 = now_ms();
        if (asb_sandbox_process_start(sb, &po, &p, &err) != ASB_OK) return bench_fail("start", &err);
        while (f.at == 0) {
            asb_result r = asb_process_wait(p, 1, &code, &err);
            if (r == ASB_OK) break;
            if (r != ASB_ERR_TIMEOUT) {
                asb_process_free(p);
                return bench_fail("wait", &err);
            }
        }
        if (f.at == 0 || strncmp(f.text, "first\n", 6) != 0) {
            fprintf(stderr, "bench_sandboxd: %s: first output \"%s\"\n", shell, f.text);
            asb_process_free(p);
            return 1;
        }
        printf("result %s %.3f\n", key, f.at - t0);
        if (asb_process_wait(p, 0, &code, &err) != ASB_OK || code != 0) {
            asb_process_free(p);
            return bench_fail("wait for the exit", &err);
        }
        asb_process_free(p);
    }
    return 0;
}

static int workload(int runs) {
    asb_client_desc desc;
    asb_create_opts opts;
    asb_client *client;
    asb_sandbox *sb = NULL;
    asb_error err;
    double *lat;
    int rc = 1;

    lat = (double *)malloc(sizeof *lat * (size_t)runs);
    if (!lat) return 1;
    block_fill();
    memset(&desc, 0, sizeof desc); /* KUBECONFIG, local tunnel (the pod tunnel for sandboxd) */
    desc.runtime = ASB_RUNTIME_AUTO;
    if (asb_client_create(&desc, &client, &err) != ASB_OK) {
        free(lat);
        return bench_fail("client", &err);
    }
    memset(&opts, 0, sizeof opts);
    opts.warm_pool = BENCH_POOL;
    if (asb_client_create_sandbox(client, NULL, &opts, &sb, &err) != ASB_OK) {
        bench_fail("create", &err);
        goto out;
    }
    {
        const char *rt = asb_sandbox_runtime(sb);
        if (!rt || strcmp(rt, "sandboxd") != 0) {
            fprintf(stderr, "bench_sandboxd: the runtime is %s, not sandboxd\n", rt ? rt : "(none)");
            goto out;
        }
    }
    if (bench_first_run(sb) != 0 || bench_run_true(sb, lat, runs) != 0) goto out;
    bench_run_true_results(lat, runs);
    if (bench_file_rounds(sb, BENCH_FILE_REPS) != 0) goto out;
    if (first_output(sb, "echo first", "first_output_echo_ms") != 0 ||
        first_output(sb, "echo first; sleep 1", "first_output_echo_sleep_ms") != 0)
        goto out;
    rc = 0;
out:
    if (sb && asb_sandbox_terminate(sb, &err) != ASB_OK) rc = bench_fail("terminate", &err);
    asb_client_free(client);
    if (rc == 0) {
        printf("result peak_rss_kib %ld\n", peak_rss_kib());
        printf("result cpu_ms %.3f\n", cpu_ms());
    }
    free(lat);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "workload") == 0 && atoi(argv[2]) > 0)
        return workload(atoi(argv[2]));
    fprintf(stderr, "usage: bench_sandboxd workload RUNS\n");
    return 2;
}
