/* make bench-otel: what tracing costs run("true") on the local control
   plane (v0.5.6) through the router's loopback port:

     off   tracer.enable 0 (the default)
     on    tracer.enable 1, the OTLP exporter sending to a real collector
     none  the library built with ASB_TRACING 0 (bench_otel_nt.c)

   One sandbox; three clients (one per variant) attached to it; RUNS
   rounds, each one call of every variant in a rotating order, so drift
   and load on this shared machine hit all three alike. Prints the
   project's "bench:" lines (medians) with the goals: on <= 1.05x off,
   off <= 1.01x none.

     bench_otel ROUTER_URL RUNS   (KUBECONFIG, OTEL_EXPORTER_OTLP_ENDPOINT) */
#define ASB_STATIC
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"

#include <stdio.h>
#include <stdlib.h>

int bench_nt_open(const char *router_url, const char *claim);
double bench_nt_run(void);
void bench_nt_close(void);

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof v[0], cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double run_us(asb_sandbox *sb) {
    asb_run_result rr;
    asb_error err;
    struct timespec a, b;
    asb_result r;
    clock_gettime(CLOCK_MONOTONIC, &a);
    r = asb_sandbox_run(sb, "true", 30000, &rr, &err);
    clock_gettime(CLOCK_MONOTONIC, &b);
    asb_run_result_free(&rr);
    if (r != ASB_OK) {
        fprintf(stderr, "run: %s\n", err.message);
        return -1;
    }
    return (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
}

static asb_client *client(const char *url, int traced) {
    asb_client_desc d;
    asb_client *c;
    asb_error err;
    memset(&d, 0, sizeof d);
    d.mode = ASB_CONNECT_DIRECT;
    d.direct_url = url;
    d.tracer.enable = traced;
    if (asb_client_create(&d, &c, &err) != ASB_OK) {
        fprintf(stderr, "client: %s\n", err.message);
        exit(1);
    }
    return c;
}

int main(int argc, char **argv) {
    asb_client *off, *on;
    asb_sandbox *sb_off, *sb_on;
    asb_create_opts o;
    asb_error err;
    asb_latency_stats st;
    int runs, i, k, bad = 0;
    double *v[3], m[3];
    const char *name[3] = {"off", "on", "none"};
    if (argc != 3) {
        fprintf(stderr, "usage: bench_otel ROUTER_URL RUNS\n");
        return 2;
    }
    runs = atoi(argv[2]);
    for (k = 0; k < 3; k++) v[k] = (double *)malloc((size_t)runs * sizeof(double));
    off = client(argv[1], 0);
    on = client(argv[1], 1);
    memset(&o, 0, sizeof o);
    o.warm_pool = "python-sandbox-warmpool";
    if (asb_client_create_sandbox(on, NULL, &o, &sb_on, &err) != ASB_OK ||
        asb_client_get_sandbox(off, asb_sandbox_claim_name(sb_on), NULL, 0, &sb_off, &err) !=
            ASB_OK ||
        bench_nt_open(argv[1], asb_sandbox_claim_name(sb_on)) != 0) {
        fprintf(stderr, "bench-otel: %s\n", err.message);
        return 1;
    }
    for (i = 0; i < 50; i++) { /* warm: connections, the runtime, caches */
        run_us(sb_off);
        run_us(sb_on);
        bench_nt_run();
    }
    for (i = 0; i < runs; i++) {
        for (k = 0; k < 3; k++) {
            int which = (i + k) % 3;
            double us = which == 0 ? run_us(sb_off) : which == 1 ? run_us(sb_on) : bench_nt_run();
            if (us < 0) bad++;
            v[which][i] = us;
        }
    }
    for (k = 0; k < 3; k++) m[k] = median(v[k], runs);
    fprintf(stderr, "medians (us): off %.1f, on %.1f, none %.1f\n", m[0], m[1], m[2]);
    (void)name;
    printf("bench: otel run(\"true\") through the router, median of %d interleaved: tracing on "
           "(OTLP to a real collector) %.0f us vs off %.0f us = %.3fx (goal <= 1.05x)\n",
           runs, m[1], m[0], m[1] / m[0]);
    printf("bench: otel run(\"true\") through the router, median of %d interleaved: tracing off "
           "%.0f us vs a build without the tracer %.0f us = %.3fx (goal <= 1.01x)\n",
           runs, m[0], m[2], m[0] / m[2]);
    if (asb_client_latency(on, ASB_LATENCY_RUN, 0, &st, &err) == ASB_OK)
        fprintf(stderr, "the traced client's run histogram: %llu calls, mean %.3f ms\n",
                (unsigned long long)st.count, st.count ? st.sum_ms / (double)st.count : 0.0);
    asb_sandbox_terminate(sb_on, &err);
    bench_nt_close();
    asb_client_free(off);
    asb_client_free(on);
    for (k = 0; k < 3; k++) free(v[k]);
    return bad ? 1 : 0;
}
