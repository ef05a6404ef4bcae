/* Stream a large file into a sandbox and back in constant memory.

       ./bigfile [MiB]     (default 64)

   Prints the throughput both ways and the process's peak RSS. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"

#include <stdio.h>
#include <sys/resource.h>

typedef struct source {
    uint64_t pos, size;
} source;

/* Produces the file's bytes on demand: nothing is held in memory. */
static long produce(void *ud, char *buf, size_t cap) {
    source *s = (source *)ud;
    size_t n = 0;
    while (n < cap && s->pos < s->size) buf[n++] = (char)(s->pos++ % 251);
    return (long)n;
}

typedef struct sink {
    uint64_t pos;
    int bad;
} sink;

static asb_result consume(void *ud, const char *p, size_t n) {
    sink *k = (sink *)ud;
    size_t i;
    for (i = 0; i < n; i++, k->pos++)
        if ((unsigned char)p[i] != (unsigned char)(k->pos % 251)) k->bad = 1;
    return ASB_OK;
}

int main(int argc, char **argv) {
    asb_client_desc desc;
    asb_client *client;
    asb_sandbox *sb;
    asb_error err;
    source src;
    sink snk;
    struct timespec t0, t1, t2;
    struct rusage ru;
    double up, down, mib = argc > 1 ? atof(argv[1]) : 64;
    int rc = 1;
    memset(&desc, 0, sizeof desc);
    if (asb_client_create(&desc, &client, &err) != ASB_OK ||
        asb_client_create_sandbox(client, "python-sandbox-template", NULL, &sb, &err) != ASB_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    src.pos = 0;
    src.size = (uint64_t)(mib * 1048576.0);
    memset(&snk, 0, sizeof snk);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (asb_sandbox_write_stream(sb, "big.bin", produce, &src, src.size, &err) != ASB_OK) {
        fprintf(stderr, "write: %s\n", err.message);
        goto out;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (asb_sandbox_read_stream(sb, "big.bin", consume, &snk, &err) != ASB_OK) {
        fprintf(stderr, "read: %s\n", err.message);
        goto out;
    }
    clock_gettime(CLOCK_MONOTONIC, &t2);
    up = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    down = (double)(t2.tv_sec - t1.tv_sec) + (double)(t2.tv_nsec - t1.tv_nsec) / 1e9;
    getrusage(RUSAGE_SELF, &ru);
    printf("%.0f MiB up in %.2f s (%.0f MiB/s), down in %.2f s (%.0f MiB/s), %s; peak RSS %ld KiB\n",
           mib, up, mib / up, down, mib / down,
           snk.pos == src.size && !snk.bad ? "identical" : "DIFFERENT", ru.ru_maxrss);
    rc = snk.pos == src.size && !snk.bad ? 0 : 1;
out:
    asb_sandbox_terminate(sb, &err);
    asb_client_free(client);
    return rc;
}
