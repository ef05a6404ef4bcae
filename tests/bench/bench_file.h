/* What the SDK benches (bench_sdk.c, bench_sandboxd.c, bench_native.c)
   share: the 64 MiB file, one pseudo-random block repeated, made before
   timing, streamed up from file_source and checked byte by byte as it
   comes back in file_sink; the clock, the median the reports take, and
   the process's peak RSS and CPU time; and the measures bench_sdk and
   bench_sandboxd both take of one sandbox, printed as the "result <name>
   <value>" lines their reports read. The includer defines BENCH_NAME (its
   messages' prefix), BENCH_BLOCK and BENCH_FILE_BYTES first, after
   including agentsandbox.h, <stdio.h>, <stdlib.h>, <sys/resource.h> and
   <time.h>. */
#ifndef ASB_BENCH_FILE_H
#define ASB_BENCH_FILE_H

#if defined(__GNUC__) || defined(__clang__)
#define BENCH_UNUSED __attribute__((unused))
#else
#define BENCH_UNUSED
#endif

static unsigned char block[BENCH_BLOCK];

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void block_fill(void) {
    uint32_t x = 2463534242u;
    size_t i;
    for (i = 0; i < sizeof block; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        block[i] = (unsigned char)x;
    }
}

typedef struct file_cursor {
    uint64_t off;
    int mismatch;
} file_cursor;

static long file_source(void *user_data, char *buf, size_t cap) {
    file_cursor *c = (file_cursor *)user_data;
    size_t at = (size_t)(c->off % BENCH_BLOCK), n = BENCH_BLOCK - at;
    if (c->off >= BENCH_FILE_BYTES) return 0;
    if (n > cap) n = cap;
    if ((uint64_t)n > BENCH_FILE_BYTES - c->off) n = (size_t)(BENCH_FILE_BYTES - c->off);
    memcpy(buf, block + at, n);
    c->off += n;
    return (long)n;
}

static asb_result file_sink(void *user_data, const char *data, size_t len) {
    file_cursor *c = (file_cursor *)user_data;
    while (len) {
        size_t at = (size_t)(c->off % BENCH_BLOCK), n = BENCH_BLOCK - at;
        if (n > len) n = len;
        if (c->off + n > BENCH_FILE_BYTES || memcmp(data, block + at, n) != 0) c->mismatch = 1;
        c->off += n;
        data += n;
        len -= n;
    }
    return ASB_OK;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

BENCH_UNUSED static long peak_rss_kib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* CPU this process used (user + system; not kubectl's): the SDK's own
   cost, apart from the tunnel, API server and runtime it waits on. */
BENCH_UNUSED static double cpu_ms(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

BENCH_UNUSED static int bench_fail(const char *what, const asb_error *err) {
    fprintf(stderr, "%s: %s: %s (%s)\n", BENCH_NAME, what, err->message,
            asb_result_str(err->code));
    return 1;
}

/* The first run("true") of a sandbox, which starts its tunnel: timed
   apart, as first_run_ms. 0, or 1 with the failure printed. */
BENCH_UNUSED static int bench_first_run(asb_sandbox *sb) {
    asb_run_result res;
    asb_error err;
    double t0 = now_ms();
    if (asb_sandbox_run(sb, "true", 60000, &res, &err) != ASB_OK)
        return bench_fail("run (first)", &err);
    printf("result first_run_ms %.3f\n", now_ms() - t0);
    asb_run_result_free(&res);
    return 0;
}

/* run("true") `runs` times, each call's milliseconds into lat[runs]; a
   call that fails or does not exit 0 ends the bench: 1, printed. */
BENCH_UNUSED static int bench_run_true(asb_sandbox *sb, double *lat, int runs) {
    asb_run_result res;
    asb_error err;
    int i;
    for (i = 0; i < runs; i++) {
        double t0 = now_ms();
        if (asb_sandbox_run(sb, "true", 60000, &res, &err) != ASB_OK) return bench_fail("run", &err);
        lat[i] = now_ms() - t0;
        if (res.exit_code != 0) {
            fprintf(stderr, "%s: run(\"true\") exited %d\n", BENCH_NAME, res.exit_code);
            asb_run_result_free(&res);
            return 1;
        }
        asb_run_result_free(&res);
    }
    return 0;
}

/* The latency lines of bench_run_true's calls (lat is sorted). */
BENCH_UNUSED static void bench_run_true_results(double *lat, int runs) {
    printf("result runs %d\n", runs);
    printf("result run_true_median_ms %.3f\n", median(lat, (size_t)runs));
    printf("result run_true_best_ms %.3f\n", lat[0]); /* sorted by median() */
}

/* The 64 MiB file written to bench-64m.bin and read back `reps` times,
   streamed both ways and checked as it arrives, inside the timing. 0, or
   1 with the failure printed. */
BENCH_UNUSED static int bench_file_rounds(asb_sandbox *sb, int reps) {
    file_cursor cur;
    asb_error err;
    double t0, tw, tr;
    int i;
    for (i = 0; i < reps; i++) {
        memset(&cur, 0, sizeof cur);
        t0 = now_ms();
        if (asb_sandbox_write_stream(sb, "bench-64m.bin", file_source, &cur, BENCH_FILE_BYTES,
                                     &err) != ASB_OK)
            return bench_fail("write", &err);
        tw = now_ms() - t0;
        memset(&cur, 0, sizeof cur);
        t0 = now_ms();
        if (asb_sandbox_read_stream(sb, "bench-64m.bin", file_sink, &cur, &err) != ASB_OK)
            return bench_fail("read", &err);
        tr = now_ms() - t0;
        if (cur.mismatch || cur.off != BENCH_FILE_BYTES) {
            fprintf(stderr, "%s: read back %llu bytes%s\n", BENCH_NAME,
                    (unsigned long long)cur.off, cur.mismatch ? ", not what was written" : "");
            return 1;
        }
        printf("result write_64m_ms %.3f\n", tw);
        printf("result read_64m_ms %.3f\n", tr);
        printf("result write_read_64m_ms %.3f\n", tw + tr);
    }
    return 0;
}

#endif
