/* make bench (gRPC): our client against grpcio's Python client on the same
   grpcio server (tests/h2/grpc_server.py), same run, in turns.
     a) sequential unary calls (Execute) on one connection: calls/s
     b) a 256 MiB server stream (Start "many": 4096 messages of 64 KiB)
     c) peak RSS of each client process during (a) and (b)
   Each side times only its calls (import, start-up and connect excluded)
   and runs in its own process, so its peak RSS is its own.
   Usage (under tests/h2/with-peers.sh): bench_grpc PYTHON GEN_DIR
          bench_grpc --child unary N | stream N SIZE   (our side) */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include <sys/resource.h>
#include <sys/wait.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int count_bytes(void *ud, const char *msg, size_t len) {
    asb_pb_reader r;
    asb_pb_field f;
    asb_pb_reader_init(&r, msg, len);
    while (asb_pb_next(&r, &f, NULL) == ASB_OK && f.number)
        if (f.number == 2) *(uint64_t *)ud += f.bytes.len;
    return 0;
}

static void command(asb_buf *b, const char *a0, const char *a1, const char *a2) {
    size_t m;
    asb_buf_init(b, NULL);
    asb_pb_begin(b, 1, &m);
    asb_pb_put_string(b, 1, a0);
    if (a1) asb_pb_put_string(b, 1, a1);
    if (a2) asb_pb_put_string(b, 1, a2);
    asb_pb_end(b, m);
}

static int child(int argc, char **argv) {
    asb_h2_desc d;
    asb_h2_conn *h;
    asb_grpc_call_desc cd;
    asb_buf req, resp;
    char url[64];
    uint64_t total = 0;
    double t0;
    int i, n = atoi(argv[3]);
    memset(&d, 0, sizeof d);
    snprintf(url, sizeof url, "http://127.0.0.1:%s", getenv("ASB_GRPC_PORT"));
    d.url = url;
    if (asb_h2_connect(&d, &h, NULL) != ASB_OK) return 1;
    memset(&cd, 0, sizeof cd);
    asb_buf_init(&resp, NULL);
    if (strcmp(argv[2], "unary") == 0) {
        command(&req, "bench", "x", NULL);
        cd.method = "/process.v1.ProcessService/Execute";
        cd.timeout_ms = 10000;
        if (asb_grpc_unary(h, &cd, req.ptr, req.len, &resp, NULL) != ASB_OK) return 1;
        t0 = now_s();
        for (i = 0; i < n; i++) {
            resp.len = 0;
            if (asb_grpc_unary(h, &cd, req.ptr, req.len, &resp, NULL) != ASB_OK) return 1;
            total += 6;
        }
    } else {
        asb_grpc_call *call;
        asb_grpc_handlers hd;
        if (argc < 5) return 1;
        command(&req, "many", argv[3], argv[4]);
        cd.method = "/process.v1.ProcessService/Start";
        cd.timeout_ms = 600000;
        memset(&hd, 0, sizeof hd);
        hd.on_message = count_bytes;
        hd.user_data = &total;
        t0 = now_s();
        if (asb_grpc_call_start(h, &cd, req.ptr, req.len, &call, NULL) != ASB_OK) return 1;
        if (asb_grpc_call_run(call, &hd, NULL) != ASB_OK) return 1;
        asb_grpc_call_free(call);
    }
    printf("secs %.6f bytes %llu\n", now_s() - t0, (unsigned long long)total);
    asb_buf_free(&req);
    asb_buf_free(&resp);
    asb_h2_conn_free(h);
    return 0;
}

typedef struct run {
    double secs;
    unsigned long long bytes;
    long maxrss_kb;
    int ok;
} run;

static run measure(char **argv) {
    run r;
    struct rusage ru;
    int status = 0, p[2];
    char out[4096];
    ssize_t n;
    size_t used;
    pid_t pid;
    memset(&r, 0, sizeof r);
    if (pipe(p) != 0) return r;
    pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(p[1]);
    /* to the end: a child may write in pieces */
    used = 0;
    while ((n = read(p[0], out + used, sizeof out - 1 - used)) > 0 && used + (size_t)n < sizeof out - 1)
        used += (size_t)n;
    if (n > 0) used += (size_t)n;
    close(p[0]);
    wait4(pid, &status, 0, &ru);
    out[used] = '\0';
    {
        /* the last "secs" line counts */
        char *last = strstr(out, "secs ");
        while (last && strstr(last + 1, "secs ")) last = strstr(last + 1, "secs ");
        if (last && last != out) memmove(out, last, strlen(last) + 1);
    }
    r.maxrss_kb = ru.ru_maxrss;
    r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
           sscanf(out, "secs %lf bytes %llu", &r.secs, &r.bytes) == 2;
    return r;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of reps, ours and theirs in turns; the largest peak RSS. */
static void duel(char **ours, char **theirs, int reps, run *o, run *t) {
    double s[2][15];
    run *side[2];
    int i, k;
    side[0] = o;
    side[1] = t;
    for (k = 0; k < 2; k++) {
        memset(side[k], 0, sizeof *side[k]);
        side[k]->ok = 1;
    }
    for (i = 0; i < reps; i++)
        for (k = 0; k < 2; k++) {
            run r = measure(k == 0 ? ours : theirs);
            if (!r.ok) side[k]->ok = 0;
            s[k][i] = r.secs;
            side[k]->bytes = r.bytes;
            if (r.maxrss_kb > side[k]->maxrss_kb) side[k]->maxrss_kb = r.maxrss_kb;
        }
    for (k = 0; k < 2; k++) {
        qsort(s[k], (size_t)reps, sizeof s[k][0], cmp_double);
        side[k]->secs = s[k][reps / 2];
    }
}

int main(int argc, char **argv) {
    static char self[4096];
    char *ours_u[] = {self, (char *)"--child", (char *)"unary", (char *)"2000", NULL};
    char *ours_s[] = {self, (char *)"--child", (char *)"stream", (char *)"4096", (char *)"65536",
                      NULL};
    char *theirs_u[8], *theirs_s[9];
    char port[16];
    run a, b, c, d;
    ssize_t n;
    if (argc >= 4 && strcmp(argv[1], "--child") == 0) return child(argc, argv);
    if (argc < 3 || !getenv("ASB_GRPC_PORT")) {
        fprintf(stderr, "bench_grpc: run under tests/h2/with-peers.sh: bench_grpc PYTHON GEN_DIR\n");
        return 2;
    }
    n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 2;
    self[n] = '\0';
    snprintf(port, sizeof port, "%s", getenv("ASB_GRPC_PORT"));
    theirs_u[0] = argv[1];
    theirs_u[1] = (char *)"tests/h2/bench_client.py";
    theirs_u[2] = argv[2];
    theirs_u[3] = port;
    theirs_u[4] = (char *)"unary";
    theirs_u[5] = (char *)"2000";
    theirs_u[6] = NULL;
    memcpy(theirs_s, theirs_u, 4 * sizeof theirs_s[0]);
    theirs_s[4] = (char *)"stream";
    theirs_s[5] = (char *)"4096";
    theirs_s[6] = (char *)"65536";
    theirs_s[7] = NULL;
    duel(ours_u, theirs_u, 5, &a, &b);
    printf("bench: grpc unary round trips (Execute, one connection, 2000), median of 5: %.0f calls/s vs "
           "grpcio %.0f calls/s = %.2fx (goal >= 1.0x)\n",
           2000 / a.secs, 2000 / b.secs, b.secs / a.secs);
    duel(ours_s, theirs_s, 3, &c, &d);
    printf("bench: grpc server stream 256 MiB (4096 x 64 KiB messages), median of 3: %.0f MB/s vs "
           "grpcio %.0f MB/s = %.2fx (goal >= 1.0x)\n",
           268.435456 / c.secs, 268.435456 / d.secs, d.secs / c.secs);
    printf("bench: grpc client peak RSS (unary / stream): %.1f / %.1f MiB vs grpcio %.1f / %.1f MiB "
           "= %.2fx / %.2fx (goal <= 0.10x)\n",
           (double)a.maxrss_kb / 1024, (double)c.maxrss_kb / 1024, (double)b.maxrss_kb / 1024,
           (double)d.maxrss_kb / 1024, (double)a.maxrss_kb / (double)b.maxrss_kb,
           (double)c.maxrss_kb / (double)d.maxrss_kb);
    if (!a.ok || !b.ok || !c.ok || !d.ok || c.bytes != 268435456ULL || d.bytes != 268435456ULL) {
        fprintf(stderr, "bench_grpc: a run failed (ours %d/%d, grpcio %d/%d, bytes %llu/%llu)\n",
                a.ok, c.ok, b.ok, d.ok, c.bytes, d.bytes);
        return 1;
    }
    return 0;
}
