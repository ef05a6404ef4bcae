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
#define BENCH_FILE_BYTES ((uint64_t)64 << 20)
#define BENCH_BLOCK 65536
#define BENCH_FILE_REPS 3 /* the report takes the median */

#include "bench_file.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static long peak_rss_kib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* CPU this process used (user + system; not kubectl's): the SDK's own
   cost, apart from the tunnel, API server and runtime it waits on. */
static double cpu_ms(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static int fail(const char *what, const asb_error *err) {
    fprintf(stderr, "bench_sdk: %s: %s (%s)\n", what, err->message, asb_result_str(err->code));
    return 1;
}

static int workload(int runs) {
    asb_client_desc desc;
    asb_client *client;
    asb_sandbox *sb = NULL;
    asb_run_result res;
    asb_error err;
    file_cursor cur;
    double *lat, t0, tw, tr, c0;
    int i, rc = 1;

    lat = (double *)malloc(sizeof *lat * (size_t)runs);
    if (!lat) return 1;
    block_fill();
    memset(&desc, 0, sizeof desc); /* every default: KUBECONFIG, local tunnel */
    if (asb_client_create(&desc, &client, &err) != ASB_OK) {
        free(lat);
        return fail("client", &err);
    }
    if (asb_client_create_sandbox(client, BENCH_TEMPLATE, NULL, &sb, &err) != ASB_OK) {
        fail("create", &err);
        goto out;
    }

    /* the first call starts the tunnel: timed apart */
    t0 = now_ms();
    if (asb_sandbox_run(sb, "true", 60000, &res, &err) != ASB_OK) {
        fail("run (first)", &err);
        goto out;
    }
    printf("result first_run_ms %.3f\n", now_ms() - t0);
    asb_run_result_free(&res);
    c0 = cpu_ms();
    for (i = 0; i < runs; i++) {
        t0 = now_ms();
        if (asb_sandbox_run(sb, "true", 60000, &res, &err) != ASB_OK) {
            fail("run", &err);
            goto out;
        }
        lat[i] = now_ms() - t0;
        if (res.exit_code != 0) {
            fprintf(stderr, "bench_sdk: run(\"true\") exited %d\n", res.exit_code);
            asb_run_result_free(&res);
            goto out;
        }
        asb_run_result_free(&res);
    }

    /* the client's own work per call, apart from the shared path's wait */
    printf("result run_true_cpu_us %.3f\n", (cpu_ms() - c0) * 1000.0 / runs);
    printf("result runs %d\n", runs);
    printf("result run_true_median_ms %.3f\n", median(lat, (size_t)runs));
    printf("result run_true_best_ms %.3f\n", lat[0]); /* sorted by median() */

    for (i = 0; i < BENCH_FILE_REPS; i++) {
        memset(&cur, 0, sizeof cur);
        t0 = now_ms();
        if (asb_sandbox_write_stream(sb, "bench-64m.bin", file_source, &cur, BENCH_FILE_BYTES,
                                     &err) != ASB_OK) {
            fail("write", &err);
            goto out;
        }
        tw = now_ms() - t0;
        memset(&cur, 0, sizeof cur);
        t0 = now_ms();
        if (asb_sandbox_read_stream(sb, "bench-64m.bin", file_sink, &cur, &err) != ASB_OK) {
            fail("read", &err);
            goto out;
        }
        tr = now_ms() - t0;
        if (cur.mismatch || cur.off != BENCH_FILE_BYTES) {
            fprintf(stderr, "bench_sdk: read back %llu bytes%s\n", (unsigned long long)cur.off,
                    cur.mismatch ? ", not what was written" : "");
            goto out;
        }
        printf("result write_64m_ms %.3f\n", tw);
        printf("result read_64m_ms %.3f\n", tr);
        printf("result write_read_64m_ms %.3f\n", tw + tr);
    }
    rc = 0;
out:
    if (sb && asb_sandbox_terminate(sb, &err) != ASB_OK) rc = fail("terminate", &err);
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
    if (asb_client_create(&desc, &client, &err) != ASB_OK) return fail("client", &err);
    for (i = 0; i < n && rc == 0; i++) {
        t0 = now_ms();
        if (asb_client_create_sandbox(client, BENCH_TEMPLATE, NULL, &sb, &err) != ASB_OK) {
            rc = fail("create", &err);
            break;
        }
        printf("result create_ready_ms %.3f\n", now_ms() - t0);
        /* the first create of a process also starts kubectl (ours) and
           sets up the client (both): reported apart as well */
        printf("result create_ready_%s_ms %.3f\n", i == 0 ? "first" : "next", now_ms() - t0);
        if (asb_sandbox_terminate(sb, &err) != ASB_OK) rc = fail("terminate", &err);
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
    if (asb_client_create(&desc, &client, &err) != ASB_OK) return fail("client", &err);
    if (asb_client_create_sandbox(client, BENCH_TEMPLATE, NULL, &sb, &err) != ASB_OK) {
        asb_client_free(client);
        return fail("create", &err);
    }
    if (asb_sandbox_run(sb, "echo hi", 60000, &res, &err) != ASB_OK) {
        rc = fail("run", &err);
    } else {
        fwrite(res.out.ptr, 1, res.out.len, stdout);
        clock_gettime(CLOCK_REALTIME, &ts);
        ms = ((double)ts.tv_sec * 1e9 + (double)ts.tv_nsec - (double)start) / 1e6;
        printf("result first_result_ms %.3f\n", ms);
        fflush(stdout);
        asb_run_result_free(&res);
    }
    if (asb_sandbox_terminate(sb, &err) != ASB_OK) rc = fail("terminate", &err);
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
