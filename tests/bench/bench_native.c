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

   Where the transfer time goes, the same runs: CPU seconds per 64 MiB
   write + read of kwok (the kubelet: v4 WebSocket vs SPDY), of
   kube-apiserver, and of the client (this process, plus the kubectl
   child on its side), when BENCH_LC_PIDS names the cluster's pid files
   (tools/localcluster: "PID STARTTIME" per component). And the crypto
   floor, after the runs: the same bytes through mbedTLS's AEAD alone
   (crypto_floor), the part of the client's CPU that no relay or framing
   change can remove.

   Reads KUBECONFIG; the template (argv[1], default
   python-sandbox-template) in `default`. Prints the project's
   "bench: ..." lines. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#if ASB_TLS
#include <mbedtls/chachapoly.h>
#include <mbedtls/gcm.h>
#endif

#define BENCH_NAME "bench_native"
#define BENCH_FILE_BYTES ((uint64_t)64 << 20)
#define BENCH_BLOCK 65536
#define ROUNDS 10
#define BLOCK 20
#define REPS 3

#include "bench_file.h"

/* CPU seconds (user + system) of a process, all its threads: -1 when
   it is gone or unreadable. */
static double proc_cpu(int pid, int *ppid) {
    char path[64], b[1024], *q;
    unsigned long ut = 0, st = 0;
    int pp = 0;
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    f = fopen(path, "r");
    if (!f) return -1;
    q = fgets(b, sizeof b, f) ? strrchr(b, ')') : NULL;
    fclose(f);
    /* after the command name: state ppid pgrp session tty tpgid flags
       minflt cminflt majflt cmajflt utime stime */
    if (!q || sscanf(q + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &pp, &ut,
                     &st) != 3)
        return -1;
    if (ppid) *ppid = pp;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* A cluster component's pid from BENCH_LC_PIDS/NAME.pid, 0 if none. */
static int component_pid(const char *name) {
    const char *dir = getenv("BENCH_LC_PIDS");
    char path[512];
    int pid = 0;
    FILE *f;
    if (!dir || !*dir) return 0;
    snprintf(path, sizeof path, "%s/%s.pid", dir, name);
    f = fopen(path, "r");
    if (!f) return 0;
    if (fscanf(f, "%d", &pid) != 1) pid = 0;
    fclose(f);
    return pid;
}

static int kwok_pid, apiserver_pid;

/* This process and its live descendants (the kubectl tunnel, spawned
   through a helper process). */
static double client_cpu(void) {
    static int pid[8192], ppid[8192];
    static double cpu[8192];
    static char in[8192];
    struct rusage ru;
    double t;
    int n = 0, i, grew = 1;
    DIR *d = opendir("/proc");
    struct dirent *e;
    getrusage(RUSAGE_SELF, &ru);
    t = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
        (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    while (d && n < 8192 && (e = readdir(d)) != NULL) {
        int p = atoi(e->d_name);
        if (p <= 0 || (cpu[n] = proc_cpu(p, &ppid[n])) < 0) continue;
        pid[n] = p;
        in[n] = 0;
        n++;
    }
    if (d) closedir(d);
    while (grew) {
        int j;
        grew = 0;
        for (i = 0; i < n; i++) {
            if (in[i]) continue;
            for (j = 0; j < n && !(in[j] && pid[j] == ppid[i]); j++) {
            }
            if (ppid[i] == (int)getpid() || j < n) {
                in[i] = 1;
                t += cpu[i];
                grew = 1;
            }
        }
    }
    return t;
}

typedef struct cpu_at {
    double kwok, apiserver, client;
} cpu_at;

static void cpu_now(cpu_at *c) {
    c->kwok = kwok_pid ? proc_cpu(kwok_pid, NULL) : -1;
    c->apiserver = apiserver_pid ? proc_cpu(apiserver_pid, NULL) : -1;
    c->client = client_cpu();
}

/* The crypto floor of the native tunnel's transfer: every byte of a
   write + read crosses TLS to the apiserver in this process (a write
   sealed, a read opened), where through kubectl this process speaks
   plain HTTP to a Go child. Here mbedTLS's AEADs alone seal 64 MiB and
   open 64 MiB in 16 KiB records (TLS's), on one core, nothing else: the
   rate as a 64 MiB write + read, of the fastest. A native tunnel built
   on mbedTLS cannot move bytes faster than this, whatever it does
   around the crypto. 0: no TLS in this build. */
static double crypto_floor(const char **which) {
#if ASB_TLS
    static unsigned char in[16384], out[16384];
    unsigned char key[32], iv[12], tag[16];
    const int records = (int)(BENCH_FILE_BYTES / sizeof in);
    double best = 0;
    int a;
    memset(key, 7, sizeof key);
    memset(iv, 3, sizeof iv);
    memset(in, 0x5a, sizeof in);
    for (a = 0; a < 3; a++) {
        static const char *names[3] = {"AES-128-GCM", "AES-256-GCM", "ChaCha20-Poly1305"};
        mbedtls_gcm_context g;
        mbedtls_chachapoly_context cp;
        double t0 = now_ms(), mbs;
        int i, bad = 0;
        mbedtls_gcm_init(&g);
        mbedtls_chachapoly_init(&cp);
        if (a < 2) bad |= mbedtls_gcm_setkey(&g, MBEDTLS_CIPHER_ID_AES, key, a ? 256u : 128u);
        else bad |= mbedtls_chachapoly_setkey(&cp, key);
        for (i = 0; i < records && !bad; i++) /* the write: sealed */
            bad |= a < 2 ? mbedtls_gcm_crypt_and_tag(&g, MBEDTLS_GCM_ENCRYPT, sizeof in, iv,
                                                     sizeof iv, NULL, 0, in, out, 16, tag)
                         : mbedtls_chachapoly_encrypt_and_tag(&cp, sizeof in, iv, NULL, 0, in,
                                                              out, tag);
        for (i = 0; i < records && !bad; i++) /* the read: opened (one record, again) */
            bad |= a < 2 ? mbedtls_gcm_auth_decrypt(&g, sizeof out, iv, sizeof iv, NULL, 0, tag,
                                                    16, out, in)
                         : mbedtls_chachapoly_auth_decrypt(&cp, sizeof out, iv, NULL, 0, tag,
                                                           out, in);
        mbs = 2.0 * (double)BENCH_FILE_BYTES / 1e6 / ((now_ms() - t0) / 1e3);
        mbedtls_gcm_free(&g);
        mbedtls_chachapoly_free(&cp);
        if (bad) {
            fprintf(stderr, "bench_native: the crypto floor's %s failed\n", names[a]);
            continue;
        }
        if (mbs > best) {
            best = mbs;
            *which = names[a];
        }
    }
    return best;
#else
    *which = "none";
    return 0;
#endif
}

typedef struct side {
    const char *name;
    asb_connection_mode mode;
    asb_client *client;
    asb_sandbox *sb;
    double lat[ROUNDS * BLOCK];
    double xfer[REPS];
    double kwok_cpu[REPS], apiserver_cpu[REPS], client_cpu[REPS];
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
    file_cursor cur;
    asb_error err;
    cpu_at c0, c1;
    double t0;
    cpu_now(&c0);
    t0 = now_ms();
    memset(&cur, 0, sizeof cur);
    if (asb_sandbox_write_stream(s->sb, "bench-native-64m.bin", file_source, &cur,
                                 BENCH_FILE_BYTES, &err) != ASB_OK)
        return fail(s, "write", &err);
    memset(&cur, 0, sizeof cur);
    if (asb_sandbox_read_stream(s->sb, "bench-native-64m.bin", file_sink, &cur, &err) != ASB_OK)
        return fail(s, "read", &err);
    if (cur.mismatch || cur.off != BENCH_FILE_BYTES) {
        fprintf(stderr, "bench_native: %s: read back other bytes than written\n", s->name);
        return 1;
    }
    s->xfer[rep] = now_ms() - t0;
    cpu_now(&c1);
    s->kwok_cpu[rep] = c1.kwok - c0.kwok;
    s->apiserver_cpu[rep] = c1.apiserver - c0.apiserver;
    s->client_cpu[rep] = c1.client - c0.client;
    return 0;
}

int main(int argc, char **argv) {
    const char *tpl = argc > 1 ? argv[1] : "python-sandbox-template";
    side sides[2];
    int i, k, rc = 1;
    block_fill();
    memset(sides, 0, sizeof sides);
    kwok_pid = component_pid("kwok");
    apiserver_pid = component_pid("kube-apiserver");
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
        double mbn = 2.0 * (double)BENCH_FILE_BYTES / 1e6 / (tn / 1e3);
        double mbk = 2.0 * (double)BENCH_FILE_BYTES / 1e6 / (tk / 1e3);
        printf("bench: native tunnel run(\"true\") latency, median of %d: %.2f ms vs kubectl "
               "port-forward %.2f ms = %.2fx (goal <= 0.9x)\n",
               ROUNDS * BLOCK, ln, lk, ln / lk);
        printf("bench: native tunnel 64 MiB write + read, median of %d: %.0f MB/s vs kubectl "
               "port-forward %.0f MB/s = %.2fx (goal >= 1.0x)\n",
               REPS, mbn, mbk, mbn / mbk);
        {
            const char *aead = "none";
            double fl = crypto_floor(&aead);
            if (fl > 0)
                printf("bench: native tunnel 64 MiB write + read against its crypto floor: %.0f "
                       "MB/s vs mbedTLS %s alone %.0f MB/s = %.2fx (goal none; 128 MiB "
                       "sealed and opened in %.2f s of one core: no mbedTLS client's native "
                       "tunnel passes 1.0x of it)\n",
                       mbn, aead, fl, mbn / fl, 2.0 * (double)BENCH_FILE_BYTES / 1e6 / fl);
        }
        if (kwok_pid && apiserver_pid) {
            static const char *what[3] = {"kwok", "kube-apiserver",
                                          "client (this process + its kubectl)"};
            for (k = 0; k < 3; k++) {
                double *vn = k == 0 ? sides[0].kwok_cpu : k == 1 ? sides[0].apiserver_cpu
                                                                 : sides[0].client_cpu;
                double *vk = k == 0 ? sides[1].kwok_cpu : k == 1 ? sides[1].apiserver_cpu
                                                                 : sides[1].client_cpu;
                double cn = median(vn, REPS), ck = median(vk, REPS);
                printf("bench: native tunnel %s CPU per 64 MiB write + read, median of %d: "
                       "%.2f s vs kubectl port-forward %.2f s = %.2fx (goal none; where the "
                       "time goes)\n",
                       what[k], REPS, cn, ck, ck > 0 ? cn / ck : 0.0);
            }
        }
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
