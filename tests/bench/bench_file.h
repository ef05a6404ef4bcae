/* The 64 MiB file of the SDK benches (bench_sdk.c, bench_sandboxd.c): one
   pseudo-random block repeated, made before timing, streamed up from
   file_source and checked byte by byte as it comes back in file_sink; and
   the median the reports take. The includer defines BENCH_BLOCK and
   BENCH_FILE_BYTES first. */
#ifndef ASB_BENCH_FILE_H
#define ASB_BENCH_FILE_H

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

#endif
