/* make bench (HTTP): our client against curl on the same nginx, same run.
   Each measure runs in a child process so its peak RSS is its own.
     a) 256 MiB download into a callback vs curl -o /dev/null
     b) sequential small requests on one keep-alive connection vs curl
        fetching the same URL list from one command (connection reused)
     c) peak RSS while downloading 256 MiB
   Needs the peers (tests/http/with-peers.sh sets ASB_PEER_*). */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include <sys/resource.h>
#include <sys/wait.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static asb_result discard(void *ud, const char *p, size_t n) {
    (void)p;
    *(uint64_t *)ud += n;
    return ASB_OK;
}

/* Child: the measured work. Exit status 0 on success. */
static int ours_download(const char *u) {
    asb_http_client *cl;
    asb_http_request req;
    asb_http_response resp;
    uint64_t n = 0;
    asb_result r;
    if (asb_http_client_create(NULL, &cl, NULL) != ASB_OK) return 1;
    memset(&req, 0, sizeof req);
    req.url = u;
    req.on_body = discard;
    req.on_body_user = &n;
    r = asb_http_do(cl, &req, &resp, NULL);
    asb_http_response_free(&resp);
    asb_http_client_free(cl);
    return r == ASB_OK && n == (256u << 20) ? 0 : 1;
}

static int ours_small(const char *u, int count) {
    asb_http_client *cl;
    int i;
    if (asb_http_client_create(NULL, &cl, NULL) != ASB_OK) return 1;
    for (i = 0; i < count; i++) {
        asb_http_request req;
        asb_http_response resp;
        memset(&req, 0, sizeof req);
        req.url = u;
        if (asb_http_do(cl, &req, &resp, NULL) != ASB_OK || resp.body.len != 17) return 1;
        asb_http_response_free(&resp);
    }
    asb_http_client_free(cl);
    return 0;
}

typedef struct run {
    double secs;
    long maxrss_kb;
    int ok;
} run;

/* Runs fn in a child, or argv with exec when fn is NULL. */
static run measure(int (*fn)(const char *, int), const char *u, int count, char **argv) {
    run r;
    struct rusage ru;
    int status = 0;
    double t0 = now_s();
    pid_t pid = fork();
    if (pid == 0) {
        if (argv) {
            int fd = open("/dev/null", O_WRONLY);
            dup2(fd, 1);
            dup2(fd, 2);
            execvp(argv[0], argv);
            _exit(127);
        }
        _exit(fn(u, count));
    }
    wait4(pid, &status, 0, &ru);
    r.secs = now_s() - t0;
    r.maxrss_kb = ru.ru_maxrss;
    r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    return r;
}

static int dl_adapter(const char *u, int count) {
    (void)count;
    return ours_download(u);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of reps runs for ours (fn) and for the baseline (argv), run
   in turns (ours, theirs, ours, ...) so a change in machine load during
   the bench falls on both sides alike. Loopback transfers of this size
   vary by +-20% from run to run here; a median of many is steadier than
   a best of few. Peak RSS is the largest seen. */
#define MAX_REPS 31
static void duel(int (*fn)(const char *, int), char **argv, const char *u, int count,
                 int reps, run *ours, run *theirs) {
    run *side[2];
    double secs[2][MAX_REPS];
    int i, k;
    side[0] = ours;
    side[1] = theirs;
    if (reps > MAX_REPS) reps = MAX_REPS;
    for (k = 0; k < 2; k++) {
        side[k]->maxrss_kb = 0;
        side[k]->ok = 1;
    }
    for (i = 0; i < reps; i++)
        for (k = 0; k < 2; k++) {
            run r = k == 0 ? measure(fn, u, count, NULL) : measure(NULL, u, count, argv);
            if (!r.ok) side[k]->ok = 0;
            secs[k][i] = r.secs;
            if (r.maxrss_kb > side[k]->maxrss_kb) side[k]->maxrss_kb = r.maxrss_kb;
        }
    for (k = 0; k < 2; k++) {
        qsort(secs[k], (size_t)reps, sizeof secs[k][0], cmp_double);
        side[k]->secs = secs[k][reps / 2];
    }
}

int main(void) {
    const char *port = getenv("ASB_PEER_NGINX_HTTP");
    char big[256], small[256], cfg[] = "/tmp/asb-bench-curl-XXXXXX";
    char *curl_big[] = {(char *)"curl", (char *)"-s", (char *)"-o", (char *)"/dev/null",
                        big, NULL};
    char *curl_small[] = {(char *)"curl", (char *)"-s", (char *)"-K", cfg, NULL};
    int count = 2000, i, fd;
    FILE *f;
    run a, b, c, d;
    if (!port) {
        fprintf(stderr, "bench_http: run under tests/http/with-peers.sh\n");
        return 2;
    }
    snprintf(big, sizeof big, "http://127.0.0.1:%s/big.bin", port);
    snprintf(small, sizeof small, "http://127.0.0.1:%s/small.txt", port);
    fd = mkstemp(cfg);
    f = fdopen(fd, "w");
    for (i = 0; i < count; i++) fprintf(f, "url = \"%s\"\noutput = \"/dev/null\"\n", small);
    fclose(f);

    duel(dl_adapter, curl_big, big, 1, 21, &a, &b);
    printf("bench: http download 256 MiB (plain, loopback nginx), median of 21: %.0f MB/s vs curl %.0f MB/s "
           "= %.2fx (goal >= 0.9x)\n",
           268.435456 / a.secs, 268.435456 / b.secs, b.secs / a.secs);
    printf("bench: http peak RSS during 256 MiB download: %.1f MiB vs curl %.1f MiB = %.2fx "
           "(goal: flat, under 4 MiB)\n",
           (double)a.maxrss_kb / 1024, (double)b.maxrss_kb / 1024,
           (double)a.maxrss_kb / (double)b.maxrss_kb);
    duel(ours_small, curl_small, small, count, 7, &c, &d);
    printf("bench: http sequential small GETs, one keep-alive connection (%d), median of 7: %.0f req/s vs "
           "curl %.0f req/s = %.2fx (goal >= 1.0x)\n",
           count, count / c.secs, count / d.secs, d.secs / c.secs);
    unlink(cfg);
    if (!a.ok || !b.ok || !c.ok || !d.ok) {
        fprintf(stderr, "bench_http: a run failed (ours %d/%d, curl %d/%d)\n", a.ok, c.ok,
                b.ok, d.ok);
        return 1;
    }
    return 0;
}
