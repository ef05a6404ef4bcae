/* make bench-native-sdk, our side (bench_native_sdk.py is the Python SDK
   1.0.8 [grpc] side and the report), on sandboxd sandboxes (the real
   sandboxd in every pod of the warm pool sandboxd-warmpool, agent-sandbox
   v0.5.6), issue 17:

     bench_native_sdk claim
         makes one claim from the pool (native tunnel), prints its name
         and leaves it (the "existing claim" of `first`)
     bench_native_sdk first native|kubectl CLAIM START_NS
         a fresh process: a client in that connection mode attaches to
         CLAIM (asb_client_get_sandbox) and runs `true`; prints the time
         from START_NS (CLOCK_REALTIME, taken by the shell that started
         this process) to the result, then closes the handle (the claim
         stays)
     bench_native_sdk delete CLAIM
         deletes it
     bench_native_sdk hundred N
         N sandboxes from the pool in native-tunnel mode (16 creates at a
         time), `true` run in each so every pod's tunnel is up, then,
         with all N open: this process's RSS, its peak RSS, its child
         processes (all descendants) and their RSS summed; then all
         deleted

   The runtime is named (sandboxd), as the Python side names it with its
   SandboxdPodTunnelConnectionConfig. Reads KUBECONFIG. Results go to
   stdout as "result <name> <value>" lines. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_POOL "sandboxd-warmpool"

static int fail(const char *what, const asb_error *err) {
    fprintf(stderr, "bench_native_sdk: %s: %s (%s)\n", what, err->message,
            asb_result_str(err->code));
    return 1;
}

static asb_client *new_client(asb_connection_mode mode, asb_error *err) {
    asb_client_desc d;
    asb_client *c = NULL;
    memset(&d, 0, sizeof d);
    d.mode = mode;
    d.runtime = ASB_RUNTIME_SANDBOXD;
    if (asb_client_create(&d, &c, err) != ASB_OK) return NULL;
    return c;
}

static int make_claim(void) {
    asb_create_opts o;
    asb_sandbox *sb;
    asb_error err;
    asb_run_result rr;
    asb_client *c = new_client(ASB_CONNECT_NATIVE_TUNNEL, &err);
    if (!c) return fail("client", &err);
    memset(&o, 0, sizeof o);
    o.warm_pool = BENCH_POOL;
    if (asb_client_create_sandbox(c, NULL, &o, &sb, &err) != ASB_OK) {
        asb_client_free(c);
        return fail("create", &err);
    }
    /* sandboxd answers before anyone measures */
    if (asb_sandbox_run(sb, "true", 60000, &rr, &err) != ASB_OK) {
        asb_sandbox_terminate(sb, NULL);
        asb_client_free(c);
        return fail("run", &err);
    }
    asb_run_result_free(&rr);
    printf("%s\n", asb_sandbox_claim_name(sb));
    asb_sandbox_close_connection(sb);
    asb_client_free(c);
    return 0;
}

/* This process's CPU so far (user + system), in ms: the part of the
   first result that is ours; the rest of the wall time is waiting on the
   apiserver, kwok and sandboxd (and, in kubectl mode, a kubectl child,
   whose CPU is not in here). */
static double cpu_ms(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec) * 1e3 +
           ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e3;
}

static int first_result(const char *mode, const char *claim, const char *start_ns) {
    asb_sandbox *sb;
    asb_run_result rr;
    asb_error err;
    struct timespec ts;
    double ms;
    long long start = strtoll(start_ns, NULL, 10);
    int native = strcmp(mode, "native") == 0, rc = 0;
    asb_client *c = new_client(native ? ASB_CONNECT_NATIVE_TUNNEL : ASB_CONNECT_LOCAL_TUNNEL, &err);
    if (!c) return fail("client", &err);
    if (asb_client_get_sandbox(c, claim, NULL, 0, &sb, &err) != ASB_OK) {
        asb_client_free(c);
        return fail("attach", &err);
    }
    if (asb_sandbox_run(sb, "true", 60000, &rr, &err) != ASB_OK || rr.exit_code != 0) {
        rc = err.code != ASB_OK ? fail("run", &err) : 1;
    } else {
        clock_gettime(CLOCK_REALTIME, &ts);
        ms = ((double)ts.tv_sec * 1e9 + (double)ts.tv_nsec - (double)start) / 1e6;
        printf("result first_%s_ms %.3f\n", native ? "native" : "kubectl", ms);
        printf("result first_%s_cpu_ms %.3f\n", native ? "native" : "kubectl", cpu_ms());
    }
    asb_run_result_free(&rr);
    asb_sandbox_close_connection(sb);
    asb_client_free(c);
    return rc;
}

static int delete_claim(const char *claim) {
    asb_error err;
    asb_client *c = new_client(ASB_CONNECT_NATIVE_TUNNEL, &err);
    if (!c) return fail("client", &err);
    if (asb_client_delete_sandbox(c, claim, NULL, &err) != ASB_OK) {
        asb_client_free(c);
        return fail("delete", &err);
    }
    asb_client_free(c);
    return 0;
}

/* A number from a process's /proc status, the line starting with key
   ("VmRSS:", in KiB; "PPid:"); 0 when the process or the line is gone. */
static long proc_status(int pid, const char *key) {
    char path[64], line[256];
    size_t n = strlen(key);
    long v = 0;
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    if ((f = fopen(path, "r")) == NULL) return 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0) v = atol(line + n);
    fclose(f);
    return v;
}

static long rss_kib(int pid) { return proc_status(pid, "VmRSS:"); }
static int parent_of(int pid) { return (int)proc_status(pid, "PPid:"); }

/* Every process descending from this one: how many, their RSS summed. */
static void descendants(int *count, long *kib) {
    DIR *d = opendir("/proc");
    struct dirent *e;
    *count = 0;
    *kib = 0;
    while (d && (e = readdir(d)) != NULL) {
        int pid, p, depth;
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        pid = atoi(e->d_name);
        for (p = parent_of(pid), depth = 0; p > 1 && depth < 16; p = parent_of(p), depth++)
            if (p == (int)getpid()) {
                (*count)++;
                *kib += rss_kib(pid);
                break;
            }
    }
    if (d) closedir(d);
}

static int hundred(int n) {
    asb_create_opts o;
    asb_create_result *res;
    asb_error err;
    struct rusage ru;
    long kids_kib;
    int kids, i, rc = 0;
    asb_client *c = new_client(ASB_CONNECT_NATIVE_TUNNEL, &err);
    if (!c) return fail("client", &err);
    res = (asb_create_result *)calloc((size_t)n, sizeof *res);
    memset(&o, 0, sizeof o);
    o.warm_pool = BENCH_POOL;
    o.ready_timeout_ms = 900000;
    if (!res || asb_client_create_sandboxes(c, NULL, &o, (size_t)n, 16, res, &err) != ASB_OK) {
        rc = res ? fail("creates", &err) : 1;
    }
    for (i = 0; i < n && rc == 0; i++) {
        asb_run_result rr;
        if (asb_sandbox_run(res[i].sandbox, "true", 120000, &rr, &err) != ASB_OK) rc = fail("run", &err);
        asb_run_result_free(&rr);
    }
    if (rc == 0) {
        descendants(&kids, &kids_kib);
        getrusage(RUSAGE_SELF, &ru);
        printf("result hundred_n %d\n", n);
        printf("result hundred_rss_kib %ld\n", rss_kib((int)getpid()));
        printf("result hundred_peak_rss_kib %ld\n", ru.ru_maxrss);
        printf("result hundred_children %d\n", kids);
        printf("result hundred_children_rss_kib %ld\n", kids_kib);
        printf("result hundred_total_rss_kib %ld\n", rss_kib((int)getpid()) + kids_kib);
    }
    if (asb_client_delete_all(c, &err) != ASB_OK) rc = fail("delete all", &err);
    asb_client_free(c);
    free(res);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "claim") == 0) return make_claim();
    if (argc == 5 && strcmp(argv[1], "first") == 0 &&
        (strcmp(argv[2], "native") == 0 || strcmp(argv[2], "kubectl") == 0))
        return first_result(argv[2], argv[3], argv[4]);
    if (argc == 3 && strcmp(argv[1], "delete") == 0) return delete_claim(argv[2]);
    if (argc == 3 && strcmp(argv[1], "hundred") == 0 && atoi(argv[2]) > 0)
        return hundred(atoi(argv[2]));
    fprintf(stderr, "usage: bench_native_sdk claim | first native|kubectl CLAIM START_NS | "
                    "delete CLAIM | hundred N\n");
    return 2;
}
