/* make bench-sdk, our side (bench_sdk.py is the Python SDK's side; the same
   workload, each in its own processes, on the same cluster):

     bench_sdk workload RUNS
         one sandbox: run("true") RUNS times (after one warm-up run that
         starts the tunnel), a 64 MiB file written and read back 3 times
         (streamed both ways; checked as it arrives, inside the timing),
         and this process's peak RSS and CPU time at the end.
     bench_sdk creates N
         create-to-ready of N sandboxes, one after another: the create call
         until it returns a ready handle (each deleted after, untimed).
         The driver alternates these processes with the Python side's, so
         both see the same load on this shared machine.
     bench_sdk first START_NS
         a fresh process: client, sandbox, run("echo hi"), print; reports
         the wall time from START_NS (CLOCK_REALTIME, taken by the caller
         just before exec) to the result. The sandbox is deleted after.

   Reads KUBECONFIG; template python-sandbox-template in `default`; the
   local tunnel (the default connection mode). Results go to stdout as
   "result <name> <value>" lines; bench_sdk.py report compares them. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_TEMPLATE "python-sandbox-template"
#define BENCH_NAME "bench_sdk"
#define BENCH_FILE_BYTES ((uint64_t)64 << 20)
#define BENCH_BLOCK 65536
#define BENCH_FILE_REPS 3 /* the report takes the median */

#include "bench_file.h"

static int workload(int runs) {
    asb_client_desc desc;
    asb_client *client;
    asb_sandbox *sb = NULL;
    asb_error err;
    double *lat, c0;
    int rc = 1;

    lat = (double *)malloc(sizeof *lat * (size_t)runs);
    if (!lat) return 1;
    block_fill();
    memset(&desc, 0, sizeof desc); /* every default: KUBECONFIG, local tunnel */
    if (asb_client_create(&desc, &client, &err) != ASB_OK) {
        free(lat);
        return bench_fail("client", &err);
    }
    if (asb_client_create_sandbox(client, BENCH_TEMPLATE, NULL, &sb, &err) != ASB_OK) {
        bench_fail("create", &err);
        goto out;
    }
    if (bench_first_run(sb) != 0) goto out;
    c0 = cpu_ms();
    if (bench_run_true(sb, lat, runs) != 0) goto out;
    /* the client's own work per call, apart from the shared path's wait */
    printf("result run_true_cpu_us %.3f\n", (cpu_ms() - c0) * 1000.0 / runs);
    bench_run_true_results(lat, runs);
    if (bench_file_rounds(sb, BENCH_FILE_REPS) != 0) goto out;
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

#define BENCH_SETTLE_MS 300 /* same as SETTLE_S in bench_sdk.py */

static int creates(int n) {
    asb_client_desc desc;
    asb_client *client;
    asb_sandbox *sb;
    asb_error err;
    double t0;
    int i, rc = 0;

    memset(&desc, 0, sizeof desc);
    if (asb_client_create(&desc, &client, &err) != ASB_OK) return bench_fail("client", &err);
    for (i = 0; i < n && rc == 0; i++) {
        t0 = now_ms();
        if (asb_client_create_sandbox(client, BENCH_TEMPLATE, NULL, &sb, &err) != ASB_OK) {
            rc = bench_fail("create", &err);
            break;
        }
        printf("result create_ready_ms %.3f\n", now_ms() - t0);
        /* the first create of a process also starts kubectl (ours) and
           sets up the client (both): reported apart as well */
        printf("result create_ready_%s_ms %.3f\n", i == 0 ? "first" : "next", now_ms() - t0);
        if (asb_sandbox_terminate(sb, &err) != ASB_OK) rc = bench_fail("terminate", &err);
        /* untimed: the cluster tears the old sandbox down before the next
           create, so no side's create races the other's cleanup (the
           Python side's slower loop would otherwise leave it more room) */
        asb__sleep_ms(BENCH_SETTLE_MS);
    }
    asb_client_free(client);
    return rc;
}

static int first_result(const char *start_ns) {
    asb_client_desc desc;
    asb_client *client;
    asb_sandbox *sb;
    asb_run_result res;
    asb_error err;
    struct timespec ts;
    double ms;
    long long start = strtoll(start_ns, NULL, 10);
    int rc = 0;

    memset(&desc, 0, sizeof desc);
    if (asb_client_create(&desc, &client, &err) != ASB_OK) return bench_fail("client", &err);
    if (asb_client_create_sandbox(client, BENCH_TEMPLATE, NULL, &sb, &err) != ASB_OK) {
        asb_client_free(client);
        return bench_fail("create", &err);
    }
    if (asb_sandbox_run(sb, "echo hi", 60000, &res, &err) != ASB_OK) {
        rc = bench_fail("run", &err);
    } else {
        fwrite(res.out.ptr, 1, res.out.len, stdout);
        clock_gettime(CLOCK_REALTIME, &ts);
        ms = ((double)ts.tv_sec * 1e9 + (double)ts.tv_nsec - (double)start) / 1e6;
        printf("result first_result_ms %.3f\n", ms);
        fflush(stdout);
        asb_run_result_free(&res);
    }
    if (asb_sandbox_terminate(sb, &err) != ASB_OK) rc = bench_fail("terminate", &err);
    asb_client_free(client);
    if (rc == 0) {
        printf("result first_peak_rss_kib %ld\n", peak_rss_kib());
        printf("result first_cpu_ms %.3f\n", cpu_ms());
    }
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "workload") == 0 && atoi(argv[2]) > 0)
        return workload(atoi(argv[2]));
    if (argc == 3 && strcmp(argv[1], "creates") == 0 && atoi(argv[2]) > 0)
        return creates(atoi(argv[2]));
    if (argc == 3 && strcmp(argv[1], "first") == 0) return first_result(argv[2]);
    fprintf(stderr, "usage: bench_sdk workload RUNS | creates N | first START_NS\n");
    return 2;
}
