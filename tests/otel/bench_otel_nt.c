/* make bench-otel: the build without the tracer (ASB_TRACING 0), as a
   private copy of the library (ASB_STATIC) beside bench_otel.c's traced
   one, so one process interleaves calls of both. */
#define ASB_STATIC
#define ASB_TRACING 0
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"

#include <stdio.h>

int bench_nt_open(const char *router_url, const char *claim);
double bench_nt_run(void);
void bench_nt_close(void);

static asb_client *nt_client;
static asb_sandbox *nt_sb;

int bench_nt_open(const char *router_url, const char *claim) {
    asb_client_desc d;
    asb_error err;
    memset(&d, 0, sizeof d);
    d.mode = ASB_CONNECT_DIRECT;
    d.direct_url = router_url;
    if (asb_client_create(&d, &nt_client, &err) != ASB_OK ||
        asb_client_get_sandbox(nt_client, claim, NULL, 0, &nt_sb, &err) != ASB_OK) {
        fprintf(stderr, "no-tracer build: %s\n", err.message);
        return -1;
    }
    return 0;
}

/* One run("true"): its latency in microseconds, or -1. */
double bench_nt_run(void) {
    asb_run_result rr;
    asb_error err;
    struct timespec a, b;
    asb_result r;
    clock_gettime(CLOCK_MONOTONIC, &a);
    r = asb_sandbox_run(nt_sb, "true", 30000, &rr, &err);
    clock_gettime(CLOCK_MONOTONIC, &b);
    asb_run_result_free(&rr);
    if (r != ASB_OK) return -1;
    return (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
}

void bench_nt_close(void) { asb_client_free(nt_client); }
