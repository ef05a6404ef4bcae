/* make bench-native: the kubectl-free tunnel (ASB_CONNECT_NATIVE_TUNNEL:
   port-forward over WebSocket from inside this process) against `kubectl
   port-forward` (ASB_CONNECT_LOCAL_TUNNEL), the same run, one sandbox
   each, on one local cluster:

     run("true") latency: after a warm-up call per side, ROUNDS rounds of
     BLOCK calls per side, the sides alternating so both meet the same
     load on this shared machine; the median of all calls per side.
     64 MiB write + read: a file written then read back (streamed both
     ways, checked as it arrives), REPS times per side alternating; the
     median per side.

   Reads KUBECONFIG; the template (argv[1], default
   python-sandbox-template) in `default`. Prints the project's
   "bench: ..." lines. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define FILE_BYTES ((uint64_t)64 << 20)
#define BLOCK_BYTES 65536
#define ROUNDS 10
#define BLOCK 20
#define REPS 3

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static unsigned char block[BLOCK_BYTES];

typedef struct cursor {
    uint64_t off;
    int mismatch;
} cursor;

static long source(void *user, char *buf, size_t cap) {
    cursor *c = (cursor *)user;
    size_t at = (size_t)(c->off % BLOCK_BYTES), n = BLOCK_BYTES - at;
    if (c->off >= FILE_BYTES) return 0;
    if (n > cap) n = cap;
    if ((uint64_t)n > FILE_BYTES - c->off) n = (size_t)(FILE_BYTES - c->off);
    memcpy(buf, block + at, n);
    c->off += n;
    return (long)n;
}

static asb_result sink(void *user, const char *data, size_t len) {
    cursor *c = (cursor *)user;
    while (len) {
        size_t at = (size_t)(c->off % BLOCK_BYTES), n = BLOCK_BYTES - at;
        if (n > len) n = len;
        if (c->off + n > FILE_BYTES || memcmp(data, block + at, n) != 0) c->mismatch = 1;
        c->off += n;
        data += n;
        len -= n;
    }
    return ASB_OK;
}

typedef struct side {
    const char *name;
    asb_connection_mode mode;
    asb_client *client;
    asb_sandbox *sb;
    double lat[ROUNDS * BLOCK];
    double xfer[REPS];
} side;

static int fail(const side *s, const char *what, const asb_error *err) {
    fprintf(stderr, "bench_native: %s: %s: %s (%s)\n", s->name, what, err->message,
            asb_result_str(err->code));
    return 1;
}

static int runs(side *s, int from) {
    int i;
    for (i = 0; i < BLOCK; i++) {
        asb_run_result res;
        asb_error err;
        double t0 = now_ms();
        if (asb_sandbox_run(s->sb, "true", 60000, &res, &err) != ASB_OK) return fail(s, "run", &err);
        s->lat[from + i] = now_ms() - t0;
        asb_run_result_free(&res);
    }
    return 0;
}

static int transfer(side *s, int rep) {
    cursor cur;
    asb_error err;
    double t0 = now_ms();
    memset(&cur, 0, sizeof cur);
    if (asb_sandbox_write_stream(s->sb, "bench-native-64m.bin", source, &cur, FILE_BYTES, &err) !=
        ASB_OK)
        return fail(s, "write", &err);
    memset(&cur, 0, sizeof cur);
    if (asb_sandbox_read_stream(s->sb, "bench-native-64m.bin", sink, &cur, &err) != ASB_OK)
        return fail(s, "read", &err);
    if (cur.mismatch || cur.off != FILE_BYTES) {
        fprintf(stderr, "bench_native: %s: read back other bytes than written\n", s->name);
        return 1;
    }
    s->xfer[rep] = now_ms() - t0;
    return 0;
}

int main(int argc, char **argv) {
    const char *tpl = argc > 1 ? argv[1] : "python-sandbox-template";
    side sides[2];
    int i, k, rc = 1;
    uint32_t x = 2463534242u;
    for (i = 0; i < BLOCK_BYTES; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        block[i] = (unsigned char)x;
    }
    memset(sides, 0, sizeof sides);
    sides[0].name = "native tunnel";
    sides[0].mode = ASB_CONNECT_NATIVE_TUNNEL;
    sides[1].name = "kubectl port-forward";
    sides[1].mode = ASB_CONNECT_LOCAL_TUNNEL;
    for (k = 0; k < 2; k++) {
        asb_client_desc d;
        asb_create_opts o;
        asb_run_result res;
        asb_error err;
        memset(&d, 0, sizeof d);
        d.mode = sides[k].mode;
        memset(&o, 0, sizeof o);
        if (strncmp(tpl, "pool:", 5) == 0) o.warm_pool = tpl + 5;
        if (asb_client_create(&d, &sides[k].client, &err) != ASB_OK) {
            fail(&sides[k], "client", &err);
            goto out;
        }
        if (asb_client_create_sandbox(sides[k].client, o.warm_pool ? NULL : tpl, &o, &sides[k].sb,
                                      &err) != ASB_OK) {
            fail(&sides[k], "create", &err);
            goto out;
        }
        if (asb_sandbox_run(sides[k].sb, "true", 60000, &res, &err) != ASB_OK) { /* warm-up */
            fail(&sides[k], "run", &err);
            goto out;
        }
        asb_run_result_free(&res);
    }
    for (i = 0; i < ROUNDS; i++)
        for (k = 0; k < 2; k++)
            if (runs(&sides[(i + k) % 2], i * BLOCK) != 0) goto out;
    for (i = 0; i < REPS; i++)
        for (k = 0; k < 2; k++)
            if (transfer(&sides[(i + k) % 2], i) != 0) goto out;
    {
        double ln = median(sides[0].lat, ROUNDS * BLOCK), lk = median(sides[1].lat, ROUNDS * BLOCK);
        double tn = median(sides[0].xfer, REPS), tk = median(sides[1].xfer, REPS);
        double mbn = 2.0 * (double)FILE_BYTES / 1e6 / (tn / 1e3);
        double mbk = 2.0 * (double)FILE_BYTES / 1e6 / (tk / 1e3);
        printf("bench: native tunnel run(\"true\") latency, median of %d: %.2f ms vs kubectl "
               "port-forward %.2f ms = %.2fx (goal <= 0.9x)\n",
               ROUNDS * BLOCK, ln, lk, ln / lk);
        printf("bench: native tunnel 64 MiB write + read, median of %d: %.0f MB/s vs kubectl "
               "port-forward %.0f MB/s = %.2fx (goal >= 1.0x)\n",
               REPS, mbn, mbk, mbn / mbk);
    }
    rc = 0;
out:
    for (k = 0; k < 2; k++) {
        asb_error err;
        if (sides[k].sb && asb_sandbox_terminate(sides[k].sb, &err) != ASB_OK) rc = 1;
        asb_client_free(sides[k].client);
    }
    return rc;
}
