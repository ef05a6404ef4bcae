/* make bench-scale, our side: create-to-ready of N sandboxes from one
   client, as wide as asked (tests/bench/bench_scale.py runs the Python
   SDK's side and the kubectl floor on the same cluster, and the report).

     bench_scale N WIDTH TAG
         asb_client_create_sandboxes(N, max_in_flight WIDTH) from the warm
         pool python-sandbox-warmpool in `default`, claims labelled
         asb-bench=TAG; the wall time from the call to its return (every
         sandbox Ready, and placed by the router: the library's create
         checks that), this process's peak RSS at that moment (and its
         file-backed part) and CPU time; then every claim deleted
         (untimed).

   Reads KUBECONFIG; the local tunnel (the default connection mode).
   Results go to stdout as "result <name> <value>" lines. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

/* The file-backed part of this process's RSS now (the binary, libc,
   mbedTLS: pages shared with every process that maps them; they only
   grow, so at the end it is also their share of the peak). -1: unknown. */
static long rss_file_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "RssFile: %ld", &kib) == 1) break;
    if (f) fclose(f);
    return kib;
}

int main(int argc, char **argv) {
    asb_client_desc desc;
    asb_create_opts opts;
    asb_client *client;
    asb_create_result *res;
    asb_label label;
    asb_error err;
    struct rusage ru;
    size_t n, i, ok = 0;
    int width;
    int64_t t0, t1;
    if (argc != 4 || atoi(argv[1]) <= 0) {
        fprintf(stderr, "usage: bench_scale N WIDTH TAG\n");
        return 2;
    }
    n = (size_t)atoi(argv[1]);
    width = atoi(argv[2]);
    memset(&desc, 0, sizeof desc);
    memset(&opts, 0, sizeof opts);
    label.key = "asb-bench";
    label.value = argv[3];
    opts.warm_pool = "python-sandbox-warmpool";
    opts.labels = &label;
    opts.label_count = 1;
    opts.ready_timeout_ms = 900000;
    if (asb_client_create(&desc, &client, &err) != ASB_OK) {
        fprintf(stderr, "bench_scale: client: %s\n", err.message);
        return 1;
    }
    res = (asb_create_result *)calloc(n, sizeof *res);
    if (!res) return 1;
    t0 = asb__now_ms();
    if (asb_client_create_sandboxes(client, NULL, &opts, n, width, res, &err) != ASB_OK)
        fprintf(stderr, "bench_scale: %s\n", err.message);
    t1 = asb__now_ms();
    getrusage(RUSAGE_SELF, &ru);
    for (i = 0; i < n; i++) ok += res[i].error.code == ASB_OK;
    printf("result create_ready_s %.3f\n", (double)(t1 - t0) / 1000.0);
    printf("result peak_rss_kib %ld\n", ru.ru_maxrss);
    printf("result rss_file_kib %ld\n", rss_file_kib());
    printf("result cpu_s %.3f\n", (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                                      (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
    printf("result ready %zu\n", ok);
    fflush(stdout);
    if (asb_client_delete_all(client, &err) != ASB_OK)
        fprintf(stderr, "bench_scale: delete: %s\n", err.message);
    asb_client_free(client);
    free(res);
    return ok == n ? 0 : 1;
}
