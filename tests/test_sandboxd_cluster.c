/* Issue 15 end to end: the sandboxd runtime on the local control plane
   (agent-sandbox v0.5.6), against the real sandboxd built unmodified from
   the release. Every sandbox here is a claim on the warm pool
   `sandboxd-warmpool` (template `sandboxd-template`, a container named
   `sandboxd` that declares SANDBOXD_REST_ADDR / SANDBOXD_GRPC_ADDR): the
   client picks the sandboxd runtime by itself and reaches the pod through
   its own pod tunnel (`kubectl port-forward pod/<pod> :8080 :9090`), which
   kwok relays into the pod's network namespace, where sandboxd listens on
   127.0.0.1 only (tools/localcluster/README.md). One case drives 100
   of them in native-tunnel mode instead (port-forward over WebSocket
   from inside this process): no kubectl, no child process (issue 17).
   The in-cluster cases dial the pod IP instead, served by `lc.py
   pod-expose` (a proxy in the pod), or the sandbox's Service name.

   ASB_CLUSTER_KUBECONFIGS names the cluster's kubeconfigs; ASB_LC the
   command that runs lc.py. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include "asbtest.h"
#include "cluster.h"
#include "logsink.h"
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <sys/mount.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define POOL "sandboxd-warmpool"

static char kubeconfig[1024];

static void show_log(void *ud, const asb_log_record *rec) {
    struct timespec ts;
    (void)ud;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    fprintf(stderr, "    [%ld.%03ld] log %s: %s\n", (long)ts.tv_sec % 1000, ts.tv_nsec / 1000000, rec->id,
            rec->message);
}

static asb_client *new_client(asb_error *err) {
    asb_client_desc d;
    asb_client *c = NULL;
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = kubeconfig;
    d.kube.http.retry.backoff_ms = 100;
    /* auto: sandboxd because the pool's template declares it, no other hint */
    d.runtime = ASB_RUNTIME_AUTO;
    if (getenv("ASB_SHOW_LOG")) d.log.fn = show_log;
    if (asb_client_create(&d, &c, err) != ASB_OK) return NULL;
    return c;
}

/* A sandbox from the sandboxd warm pool, or NULL (the error printed). */
static asb_sandbox *new_sandbox(asb_client *c) {
    asb_create_opts o;
    asb_sandbox *sb = NULL;
    asb_error err;
    memset(&o, 0, sizeof o);
    o.warm_pool = POOL;
    if (asb_client_create_sandbox(c, NULL, &o, &sb, &err) != ASB_OK) {
        fprintf(stderr, "    create from %s: %s\n", POOL, err.message);
        return NULL;
    }
    return sb;
}

/* ---------------------------------------------------------------- processes */

/* 1 when the command line of pid holds needle (its arguments joined by
   spaces). */
static int cmdline_has(int pid, const char *needle) {
    char path[64], line[1024];
    size_t len, k;
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    if ((f = fopen(path, "r")) == NULL) return 0;
    len = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    for (k = 0; k < len; k++)
        if (!line[k]) line[k] = ' ';
    line[len] = '\0';
    return strstr(line, needle) != NULL;
}

/* kubectl processes that descend from this process (whatever supervises
   them) and whose command line holds needle ("" for all): up to cap pids
   into pids (may be NULL); returns how many. Zombies (exited, not yet
   reaped) are not counted: they hold no tunnel. */
static int kubectl_matching(const char *needle, int *pids, int cap) {
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL) {
        char name[64] = "", path[64], st[512];
        int pid, p, depth, zombie = 0;
        FILE *f;
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        pid = atoi(e->d_name);
        p = proc_parent(pid, name, sizeof name);
        if (!strstr(name, "kubectl")) continue;
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        if ((f = fopen(path, "r")) != NULL) {
            char *rp;
            if (fgets(st, sizeof st, f) && (rp = strrchr(st, ')')) != NULL && rp[2] == 'Z')
                zombie = 1;
            fclose(f);
        }
        if (zombie || !cmdline_has(pid, needle)) continue;
        for (depth = 0; p > 1 && depth < 8; depth++) {
            if (p == (int)getpid()) {
                if (n < cap && pids) pids[n] = pid;
                n++;
                break;
            }
            p = proc_parent(p, NULL, 0);
        }
    }
    if (d) closedir(d);
    return n;
}

static int kubectl_descendants(int *pids, int cap) { return kubectl_matching("", pids, cap); }

/* A sandboxd pod tunnel: `kubectl port-forward pod/<pod> :8080 :9090`. */
static int pod_tunnels(int *pids, int cap) {
    return kubectl_matching(" port-forward pod/", pids, cap);
}

/* Prints the command lines of the kubectl descendants (when a count is off). */
static void show_kubectls(void) {
    int pids[16], n = kubectl_descendants(pids, 16), i;
    for (i = 0; i < n && i < 16; i++) {
        char path[64], line[512];
        size_t len, k;
        FILE *f;
        snprintf(path, sizeof path, "/proc/%d/cmdline", pids[i]);
        if ((f = fopen(path, "r")) == NULL) continue;
        len = fread(line, 1, sizeof line - 1, f);
        fclose(f);
        for (k = 0; k < len; k++)
            if (!line[k]) line[k] = ' ';
        line[len] = '\0';
        fprintf(stderr, "    kubectl %d: %s\n", pids[i], line);
    }
}

/* Waits up to ms for the number of pod tunnels to become want. */
static int wait_pod_tunnels(int want, int ms) {
    int n = -1, waited;
    for (waited = 0; waited <= ms; waited += 50) {
        n = pod_tunnels(NULL, 0);
        if (n == want) return n;
        asb__sleep_ms(50);
    }
    return n;
}

static long peak_rss_kib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* ---------------------------------------------------------------- the handle suite */

ASBT_TEST(the_handle_suite_runs_on_a_sandboxd_template) {
    asb_error err;
    asb_client *c = new_client(&err);
    asb_sandbox *sb;
    asb_run_result rr;
    asb_buf b;
    asb_file_list fl;
    static const char bin[] = "nul\0byte\r\n\xff\xfe end";
    int ex = -1, found_dir = 0;
    size_t i;
    ASBT_CHECK(c != NULL);
    sb = new_sandbox(c);
    ASBT_CHECK(sb != NULL);
    ASBT_EQ_STR(asb_sandbox_runtime(sb), "sandboxd"); /* picked from the template */
    /* run: a shell string, stdout, stderr and the exit code */
    ASBT_EQ_RES(asb_sandbox_run(sb, "echo out; echo err >&2; exit 3", 0, &rr, &err), ASB_OK);
    ASBT_EQ_INT(rr.exit_code, 3);
    ASBT_EQ_STR(rr.out.ptr, "out\n");
    ASBT_EQ_STR(rr.err.ptr, "err\n");
    asb_run_result_free(&rr);
    ASBT_EQ_RES(asb_sandbox_run(sb, "printf '%s|' \"a b\" 'c\"d' $((6*7))", 0, &rr, &err), ASB_OK);
    ASBT_EQ_STR(rr.out.ptr, "a b|c\"d|42|");
    asb_run_result_free(&rr);
    /* write, read, exists, list */
    ASBT_EQ_RES(asb_sandbox_write(sb, "dir/a.txt", "hello", 5, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_write(sb, "dir/bin.dat", bin, sizeof bin - 1, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_write(sb, "dir/empty", "", 0, &err), ASB_OK);
    asb_buf_init(&b, NULL);
    ASBT_EQ_RES(asb_sandbox_read(sb, "dir/a.txt", &b, &err), ASB_OK);
    ASBT_EQ_INT(b.len, 5);
    ASBT_CHECK(memcmp(b.ptr, "hello", 5) == 0);
    b.len = 0;
    ASBT_EQ_RES(asb_sandbox_read(sb, "dir/bin.dat", &b, &err), ASB_OK);
    ASBT_EQ_INT(b.len, sizeof bin - 1);
    ASBT_CHECK(memcmp(b.ptr, bin, sizeof bin - 1) == 0);
    b.len = 0;
    ASBT_EQ_RES(asb_sandbox_read(sb, "dir/empty", &b, &err), ASB_OK);
    ASBT_EQ_INT(b.len, 0);
    asb_buf_free(&b);
    ASBT_EQ_RES(asb_sandbox_exists(sb, "dir/a.txt", &ex, &err), ASB_OK);
    ASBT_EQ_INT(ex, 1);
    ASBT_EQ_RES(asb_sandbox_exists(sb, "dir/none.txt", &ex, &err), ASB_OK);
    ASBT_EQ_INT(ex, 0);
    ASBT_EQ_RES(asb_sandbox_list(sb, "dir", &fl, &err), ASB_OK);
    ASBT_EQ_INT(fl.count, 3);
    for (i = 0; i < fl.count; i++) {
        if (strcmp(fl.entries[i].name, "a.txt") == 0) {
            ASBT_EQ_INT(fl.entries[i].size, 5);
            ASBT_EQ_INT(fl.entries[i].is_dir, 0);
            ASBT_CHECK(fl.entries[i].mod_time > 1.7e9);
        } else if (strcmp(fl.entries[i].name, "bin.dat") == 0) {
            ASBT_EQ_INT(fl.entries[i].size, sizeof bin - 1);
        } else {
            ASBT_EQ_STR(fl.entries[i].name, "empty");
            ASBT_EQ_INT(fl.entries[i].size, 0);
        }
    }
    asb_file_list_free(&fl);
    ASBT_EQ_RES(asb_sandbox_list(sb, ".", &fl, &err), ASB_OK);
    for (i = 0; i < fl.count; i++)
        if (strcmp(fl.entries[i].name, "dir") == 0) found_dir = fl.entries[i].is_dir;
    ASBT_CHECK(found_dir);
    asb_file_list_free(&fl);
    /* what run sees is what the file calls wrote: one sandbox root */
    ASBT_EQ_RES(asb_sandbox_run(sb, "cat dir/a.txt; wc -c < dir/bin.dat", 0, &rr, &err), ASB_OK);
    ASBT_EQ_STR(rr.out.ptr, "hello16\n");
    asb_run_result_free(&rr);
    /* run with env and cwd; a cwd outside the root is refused */
    {
        asb_call_opts co;
        asb_env_var ev[1];
        memset(&co, 0, sizeof co);
        memset(ev, 0, sizeof ev);
        ev[0].name = "GREETING";
        ev[0].value = "hi there";
        co.env = ev;
        co.env_count = 1;
        co.cwd = "dir";
        ASBT_EQ_RES(asb_sandbox_run_opts(sb, "echo \"$GREETING\"; ls", &co, &rr, &err), ASB_OK);
        ASBT_EQ_STR(rr.out.ptr, "hi there\na.txt\nbin.dat\nempty\n");
        asb_run_result_free(&rr);
        co.env = NULL;
        co.env_count = 0;
        co.cwd = "../..";
        ASBT_EQ_RES(asb_sandbox_run_opts(sb, "pwd", &co, &rr, &err), ASB_ERR_PERMISSION_DENIED);
    }
    /* a missing file is an error that says so, not an empty read */
    asb_buf_init(&b, NULL);
    ASBT_CHECK(asb_sandbox_read(sb, "dir/none.txt", &b, &err) != ASB_OK);
    ASBT_CONTAINS(err.message, "none.txt");
    asb_buf_free(&b);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    asb_client_free(c);
}

ASBT_TEST(files_go_up_from_an_fd_and_come_back_into_one) {
    asb_error err;
    asb_client *c = new_client(&err);
    asb_sandbox *sb;
    ASBT_CHECK(c != NULL);
    sb = new_sandbox(c);
    ASBT_CHECK(sb != NULL);
    ASBT_CHECK(fd_round_trip_ok(sb, "fd/five.bin"));
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    asb_client_free(c);
}

/* 1 GiB up and down through the pod tunnel, generated and checked on the
   fly: the client's memory stays flat. The bound is generous (64 MiB over
   the peak before the transfer; the streams need a few hundred KiB): it
   fails if the file, or any sizeable part of it, is ever held whole. Run
   from the plain build: under ASan freed buffers sit in its quarantine. */
typedef struct gen {
    uint64_t pos, size;
} gen;
static uint64_t word_at(uint64_t off) { return (off >> 3) * 0x9E3779B97F4A7C15ull; }
static long gen_read(void *ud, char *buf, size_t cap) {
    gen *g = (gen *)ud;
    size_t n = 0;
    while (n < cap && g->pos < g->size) {
        uint64_t w = word_at(g->pos);
        buf[n++] = (char)(w >> ((g->pos & 7) * 8));
        g->pos++;
    }
    return (long)n;
}
typedef struct check {
    uint64_t pos;
    int bad;
} check;
static asb_result check_write(void *ud, const char *p, size_t n) {
    check *k = (check *)ud;
    size_t i;
    for (i = 0; i < n; i++, k->pos++)
        if ((unsigned char)p[i] != (unsigned char)(word_at(k->pos) >> ((k->pos & 7) * 8))) k->bad = 1;
    return ASB_OK;
}

ASBT_TEST(a_1_gib_file_goes_up_and_down_in_flat_memory) {
    asb_error err;
    asb_client *c = new_client(&err);
    asb_sandbox *sb;
    gen g;
    check k;
    long before, after;
    asb_file_list fl;
    ASBT_CHECK(c != NULL);
    sb = new_sandbox(c);
    ASBT_CHECK(sb != NULL);
    ASBT_CHECK(echo_ok(sb, "tunnel up", 0)); /* the tunnel and its buffers exist before we measure */
    before = peak_rss_kib();
    g.pos = 0;
    g.size = (uint64_t)1 << 30;
    if (asb_sandbox_write_stream(sb, "big/gib.bin", gen_read, &g, g.size, &err) != ASB_OK)
        fprintf(stderr, "    write: %s\n", err.message);
    ASBT_EQ_INT(g.pos, g.size);
    memset(&k, 0, sizeof k);
    if (asb_sandbox_read_stream(sb, "big/gib.bin", check_write, &k, &err) != ASB_OK)
        fprintf(stderr, "    read: %s\n", err.message);
    after = peak_rss_kib();
    ASBT_EQ_INT(k.pos, (uint64_t)1 << 30);
    ASBT_EQ_INT(k.bad, 0);
    fprintf(stderr, "    peak RSS %ld KiB before, %ld KiB after 1 GiB up and down (+%ld KiB)\n",
            before, after, after - before);
    ASBT_CHECK(after - before < 64 * 1024); /* KiB */
    ASBT_EQ_RES(asb_sandbox_list(sb, "big", &fl, &err), ASB_OK);
    ASBT_EQ_INT(fl.count, 1);
    if (fl.count == 1) ASBT_EQ_INT(fl.entries[0].size, (uint64_t)1 << 30);
    asb_file_list_free(&fl);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    asb_client_free(c);
}


/* ---------------------------------------------------------------- streaming processes */

/* What a process sent, per stream, and how it came. */
typedef struct sink {
    pthread_mutex_t mu;
    asb_buf out, err;
    int chunks;
    /* optional: called with the lock held after each stdout chunk */
    void (*on_out)(struct sink *k);
    asb_process *p;
    int answered;
} sink;

static void sink_init(sink *k) {
    memset(k, 0, sizeof *k);
    pthread_mutex_init(&k->mu, NULL);
    asb_buf_init(&k->out, NULL);
    asb_buf_init(&k->err, NULL);
}
static void sink_free(sink *k) {
    asb_buf_free(&k->out);
    asb_buf_free(&k->err);
    pthread_mutex_destroy(&k->mu);
}
static void sink_output(void *ud, asb_process_output which, const char *data, size_t len) {
    sink *k = (sink *)ud;
    pthread_mutex_lock(&k->mu);
    k->chunks++;
    asb_buf_append(which == ASB_PROCESS_STDERR ? &k->err : &k->out, data, len);
    if (which == ASB_PROCESS_STDOUT && k->on_out) k->on_out(k);
    pthread_mutex_unlock(&k->mu);
}

static asb_result start(asb_sandbox *sb, const char *shell, const char *const *argv, size_t argc,
                        sink *k, asb_process **p, asb_error *err) {
    asb_process_opts po;
    memset(&po, 0, sizeof po);
    po.shell = shell;
    po.argv = argv;
    po.argc = argc;
    po.on_output = sink_output;
    po.user_data = k;
    return asb_sandbox_process_start(sb, &po, p, err);
}

ASBT_TEST(a_process_streams_10000_lines_in_order_and_complete) {
    asb_error err;
    asb_client *c = new_client(&err);
    asb_sandbox *sb;
    asb_process *p = NULL;
    sink k;
    int code = -2, i, bad = 0;
    size_t at = 0;
    ASBT_CHECK(c != NULL);
    sb = new_sandbox(c);
    ASBT_CHECK(sb != NULL);
    sink_init(&k);
    ASBT_EQ_RES(start(sb, "i=1; while [ $i -le 10000 ]; do echo \"line $i\"; i=$((i+1)); done; "
                          "echo done >&2",
                      NULL, 0, &k, &p, &err),
                ASB_OK);
    ASBT_CHECK(asb_process_id(p) > 0);
    ASBT_EQ_RES(asb_process_wait(p, 0, &code, &err), ASB_OK);
    ASBT_EQ_INT(code, 0);
    /* every line, in order, none torn or doubled, whatever the chunking */
    for (i = 1; i <= 10000 && !bad; i++) {
        char want[32];
        int n = snprintf(want, sizeof want, "line %d\n", i);
        if (at + (size_t)n > k.out.len || memcmp(k.out.ptr + at, want, (size_t)n) != 0) {
            fprintf(stderr, "    line %d is not where it should be (byte %zu)\n", i, at);
            bad = 1;
        }
        at += (size_t)n;
    }
    ASBT_EQ_INT(bad, 0);
    ASBT_EQ_INT(k.out.len, at); /* nothing after the last line */
    ASBT_EQ_INT(k.err.len, 5);
    ASBT_CHECK(k.err.len == 5 && memcmp(k.err.ptr, "done\n", 5) == 0);
    ASBT_CHECK(k.chunks > 2); /* it came as a stream, not as one result */
    /* after the exit, wait answers again at once with the same code */
    code = -2;
    ASBT_EQ_RES(asb_process_wait(p, 0, &code, &err), ASB_OK);
    ASBT_EQ_INT(code, 0);
    asb_process_free(p);
    sink_free(&k);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    asb_client_free(c);
}

/* Output arrives while the process runs: it prints, then waits for a line
   that is sent only once that output has been seen. Without streaming
   this could not finish (the wait below would time out). */
static void answer_on_first(sink *k) {
    asb_error err;
    /* p is NULL while start itself delivers the first output: then the
       test answers once start has returned */
    if (k->p && !k->answered && k->out.len >= 6 && memcmp(k->out.ptr, "ready\n", 6) == 0) {
        k->answered = 1;
        if (asb_process_write_stdin(k->p, "go\n", 3, &err) != ASB_OK)
            fprintf(stderr, "    write_stdin from the output callback: %s\n", err.message);
    }
}

ASBT_TEST(output_arrives_while_the_process_runs) {
    asb_error err;
    asb_client *c = new_client(&err);
    asb_sandbox *sb;
    asb_process *p = NULL;
    sink k;
    int code = -2;
    asb_result r;
    ASBT_CHECK(c != NULL);
    sb = new_sandbox(c);
    ASBT_CHECK(sb != NULL);
    sink_init(&k);
    k.on_out = answer_on_first;
    ASBT_EQ_RES(start(sb, "echo ready; read x; echo \"got $x\"", NULL, 0, &k, &p, &err), ASB_OK);
    k.p = p;
    pthread_mutex_lock(&k.mu);
    answer_on_first(&k); /* ready may have come with the start */
    pthread_mutex_unlock(&k.mu);
    r = asb_process_wait(p, 60000, &code, &err);
    if (r != ASB_OK) fprintf(stderr, "    wait: %s\n", err.message);
    ASBT_EQ_RES(r, ASB_OK);
    ASBT_EQ_INT(code, 0);
    ASBT_EQ_INT(k.answered, 1);
    ASBT_CHECK(k.out.len == 13 && memcmp(k.out.ptr, "ready\ngot go\n", 13) == 0);
    asb_process_free(p);
    sink_free(&k);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    asb_client_free(c);
}

/* stdin goes in from another thread while this one waits for the output. */
typedef struct feeder {
    asb_process *p;
    int lines;
    asb_result r;
    char why[256];
} feeder;
static void *feed(void *arg) {
    feeder *f = (feeder *)arg;
    asb_error err;
    int i;
    f->r = ASB_OK;
    for (i = 0; i < f->lines && f->r == ASB_OK; i++) {
        char line[64];
        int n = snprintf(line, sizeof line, "stdin line %d\n", i);
        f->r = asb_process_write_stdin(f->p, line, (size_t)n, &err);
    }
    if (f->r == ASB_OK) f->r = asb_process_write_stdin(f->p, "bin\0ary\xff\n", 9, &err);
    if (f->r == ASB_OK) f->r = asb_process_close_stdin(f->p, &err);
    if (f->r == ASB_OK) f->r = asb_process_close_stdin(f->p, &err); /* idempotent */
    if (f->r != ASB_OK) snprintf(f->why, sizeof f->why, "%.200s", err.message);
    return NULL;
}

ASBT_TEST(stdin_written_from_another_thread_comes_back_through_cat) {
    static const char *const argv[] = {"cat"};
    asb_error err;
    asb_client *c = new_client(&err);
    asb_sandbox *sb;
    asb_process *p = NULL;
    sink k;
    feeder f;
    pthread_t t;
    asb_buf want;
    int code = -2, i;
    ASBT_CHECK(c != NULL);
    sb = new_sandbox(c);
    ASBT_CHECK(sb != NULL);
    sink_init(&k);
    ASBT_EQ_RES(start(sb, NULL, argv, 1, &k, &p, &err), ASB_OK);
    memset(&f, 0, sizeof f);
    f.p = p;
    f.lines = 500;
    ASBT_CHECK(pthread_create(&t, NULL, feed, &f) == 0);
    ASBT_EQ_RES(asb_process_wait(p, 120000, &code, &err), ASB_OK); /* cat ends at EOF */
    pthread_join(t, NULL);
    if (f.r != ASB_OK) fprintf(stderr, "    feeder: %s\n", f.why);
    ASBT_EQ_RES(f.r, ASB_OK);
    ASBT_EQ_INT(code, 0);
    asb_buf_init(&want, NULL);
    for (i = 0; i < f.lines; i++) {
        char line[64];
        int n = snprintf(line, sizeof line, "stdin line %d\n", i);
        asb_buf_append(&want, line, (size_t)n);
    }
    asb_buf_append(&want, "bin\0ary\xff\n", 9);
    ASBT_EQ_INT(k.out.len, want.len);
    ASBT_CHECK(k.out.len == want.len && memcmp(k.out.ptr, want.ptr, want.len) == 0);
    ASBT_EQ_INT(k.err.len, 0);
    asb_buf_free(&want);
    /* the process has ended: stdin is refused, clearly */
    ASBT_CHECK(asb_process_write_stdin(p, "late\n", 5, &err) != ASB_OK);
    asb_process_free(p);
    sink_free(&k);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    asb_client_free(c);
}

/* A write to stdin that sandboxd holds (the process's stdin pipe is full,
   kept open by a child that never reads it) ends as soon as the process
   does, with ASB_ERR_NOT_FOUND, rather than after the call's 30 s (R64):
   a caller joining its stdin thread after wait was held that long. */
typedef struct stuck_feeder {
    asb_process *p;
    pthread_mutex_t mu;
    int done, writes;
    asb_result r;
    char why[256];
} stuck_feeder;
static void *feed_until_refused(void *arg) {
    stuck_feeder *f = (stuck_feeder *)arg;
    static char chunk[16384];
    asb_error err;
    asb_result r;
    int n = 0;
    do { /* 10 MB at most: the pipe holds 64 KiB */
        r = asb_process_write_stdin(f->p, chunk, sizeof chunk, &err);
    } while (r == ASB_OK && ++n < 640);
    pthread_mutex_lock(&f->mu);
    f->r = r;
    f->writes = n;
    if (r != ASB_OK) snprintf(f->why, sizeof f->why, "%.200s", err.message);
    f->done = 1;
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

ASBT_TEST(a_stdin_write_held_by_a_full_pipe_ends_with_the_process) {
    asb_error err;
    asb_client *c = new_client(&err);
    asb_sandbox *sb;
    asb_process *p = NULL;
    sink k;
    stuck_feeder f;
    pthread_t t;
    int code = -2, i, done = 0;
    ASBT_CHECK(c != NULL);
    sb = new_sandbox(c);
    ASBT_CHECK(sb != NULL);
    sink_init(&k);
    /* 3 s for the feeder to fill the pipe (it blocks within the first
       64 KiB); the child holding stdin outlives the process */
    ASBT_EQ_RES(start(sb, "exec 3<&0; sleep 40 <&3 >/dev/null 2>&1 & echo started; sleep 3; "
                          "echo done; exit 5",
                      NULL, 0, &k, &p, &err),
                ASB_OK);
    memset(&f, 0, sizeof f);
    pthread_mutex_init(&f.mu, NULL);
    f.p = p;
    ASBT_CHECK(pthread_create(&t, NULL, feed_until_refused, &f) == 0);
    ASBT_EQ_RES(asb_process_wait(p, 120000, &code, &err), ASB_OK);
    ASBT_EQ_INT(code, 5);
    ASBT_CHECK(k.out.len == 13 && memcmp(k.out.ptr, "started\ndone\n", 13) == 0);
    /* the held write gives up once the exit came: well within 20 s (the
       old code: the call's whole 30 s) */
    for (i = 0; i < 200 && !done; i++) {
        pthread_mutex_lock(&f.mu);
        done = f.done;
        pthread_mutex_unlock(&f.mu);
        if (!done) asb__sleep_ms(100);
    }
    ASBT_EQ_INT(done, 1);
    pthread_join(t, NULL);
    if (f.r != ASB_ERR_NOT_FOUND) fprintf(stderr, "    feeder: %d writes, %s\n", f.writes, f.why);
    ASBT_EQ_RES(f.r, ASB_ERR_NOT_FOUND);
    ASBT_CHECK(f.writes < 640); /* it was held, not through */
    /* later calls are refused at once, nothing sent */
    ASBT_EQ_RES(asb_process_write_stdin(p, "late\n", 5, &err), ASB_ERR_NOT_FOUND);
    ASBT_EQ_RES(asb_process_signal(p, SIGTERM, &err), ASB_ERR_NOT_FOUND);
    pthread_mutex_destroy(&f.mu);
    asb_process_free(p);
    sink_free(&k);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    asb_client_free(c);
}

ASBT_TEST(sigint_ends_sleep_600_and_the_exit_says_a_signal_did) {
    static const char *const argv[] = {"sleep", "600"};
    asb_error err;
    asb_client *c = new_client(&err);
    asb_sandbox *sb;
    asb_process *p = NULL;
    sink k;
    int code = -2;
    asb_result r;
    ASBT_CHECK(c != NULL);
    sb = new_sandbox(c);
    ASBT_CHECK(sb != NULL);
    sink_init(&k);
    ASBT_EQ_RES(start(sb, NULL, argv, 2, &k, &p, &err), ASB_OK);
    /* it runs: a short wait times out and loses nothing */
    ASBT_EQ_RES(asb_process_wait(p, 300, &code, &err), ASB_ERR_TIMEOUT);
    ASBT_EQ_RES(asb_process_signal(p, SIGINT, &err), ASB_OK);
    r = asb_process_wait(p, 60000, &code, &err); /* generous: 600 s if the signal were lost */
    ASBT_EQ_RES(r, ASB_OK);
    ASBT_EQ_INT(code, -1); /* ended by a signal (sandboxd gives no number) */
    /* a shell that handles SIGINT itself reports the conventional 130 */
    asb_process_free(p);
    p = NULL;
    ASBT_EQ_RES(start(sb, "trap 'exit 130' INT; echo armed; while :; do sleep 1; done", NULL, 0, &k,
                      &p, &err),
                ASB_OK);
    /* the trap is set once "armed" is out */
    {
        int tries;
        for (tries = 0; tries < 600; tries++) {
            int seen;
            r = asb_process_wait(p, 100, &code, &err);
            pthread_mutex_lock(&k.mu);
            seen = strstr(k.out.ptr ? k.out.ptr : "", "armed") != NULL;
            pthread_mutex_unlock(&k.mu);
            if (seen || r != ASB_ERR_TIMEOUT) break;
        }
    }
    ASBT_EQ_RES(asb_process_signal(p, SIGINT, &err), ASB_OK);
    ASBT_EQ_RES(asb_process_wait(p, 60000, &code, &err), ASB_OK);
    ASBT_EQ_INT(code, 130);
    /* other signals are refused before anything is sent; an ended process is NOT_FOUND */
    ASBT_EQ_RES(asb_process_signal(p, SIGHUP, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_EQ_RES(asb_process_signal(p, SIGTERM, &err), ASB_ERR_NOT_FOUND);
    asb_process_free(p);
    sink_free(&k);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    asb_client_free(c);
}

/* Lines of a PTY's output with "rows cols" (stty size), in order. */
static int sizes_seen(sink *k, char sizes[][16], int cap) {
    int n = 0;
    const char *q;
    pthread_mutex_lock(&k->mu);
    q = k->out.ptr ? k->out.ptr : "";
    while (*q && n < cap) {
        unsigned r, cc;
        char rest;
        const char *eol = strchr(q, '\n');
        if (sscanf(q, "size %u %u%c", &r, &cc, &rest) == 3 && (rest == '\r' || rest == '\n'))
            snprintf(sizes[n++], 16, "%u %u", r, cc);
        if (!eol) break;
        q = eol + 1;
    }
    pthread_mutex_unlock(&k->mu);
    return n;
}

ASBT_TEST(a_pty_process_sees_its_size_and_a_resize) {
    asb_error err;
    asb_client *c = new_client(&err);
    asb_sandbox *sb;
    asb_process *p = NULL;
    asb_process_opts po;
    sink k;
    char sizes[4][16];
    int code = -2, n = 0, tries;
    ASBT_CHECK(c != NULL);
    sb = new_sandbox(c);
    ASBT_CHECK(sb != NULL);
    sink_init(&k);
    memset(&po, 0, sizeof po);
    /* a terminal: its size from the start, again after the resize (the
       shell waits for a line between the two, and for one more before it
       ends). Two things sandboxd does shape the script, each seen under
       load: it starts the child first and sets the first size just after,
       so a `stty size` right away can say "0 0" (the shell waits for a size
       instead: if ours never came, no size line comes and the test fails);
       and when a PTY process exits it closes the PTY as soon as it has
       reaped the child, so output written just before the exit can be lost
       (every line checked here is seen while the shell still runs). */
    po.shell = "test -t 0 && test -t 1 || exit 9; "
               "while [ \"$(stty size)\" = '0 0' ]; do sleep 0.05; done; "
               "echo \"size $(stty size)\"; read x; echo \"size $(stty size)\"; read x";
    po.pty = 1;
    po.pty_rows = 33;
    po.pty_cols = 101;
    po.on_output = sink_output;
    po.user_data = &k;
    ASBT_EQ_RES(asb_sandbox_process_start(sb, &po, &p, &err), ASB_OK);
    for (tries = 0; tries < 600 && (n = sizes_seen(&k, sizes, 4)) < 1; tries++)
        if (asb_process_wait(p, 100, &code, &err) != ASB_ERR_TIMEOUT) break;
    ASBT_EQ_INT(n, 1);
    if (n >= 1) ASBT_EQ_STR(sizes[0], "33 101");
    ASBT_EQ_RES(asb_process_resize(p, 50, 132, &err), ASB_OK);
    ASBT_EQ_RES(asb_process_resize(p, 0, 132, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_EQ_RES(asb_process_write_stdin(p, "\n", 1, &err), ASB_OK);
    for (tries = 0; tries < 600 && (n = sizes_seen(&k, sizes, 4)) < 2; tries++)
        if (asb_process_wait(p, 100, &code, &err) != ASB_ERR_TIMEOUT) break;
    ASBT_EQ_INT(n, 2);
    if (n >= 2) ASBT_EQ_STR(sizes[1], "50 132");
    ASBT_EQ_RES(asb_process_write_stdin(p, "\n", 1, &err), ASB_OK);
    ASBT_EQ_RES(asb_process_wait(p, 60000, &code, &err), ASB_OK);
    ASBT_EQ_INT(code, 0);
    ASBT_EQ_INT(sizes_seen(&k, sizes, 4), 2);
    asb_process_free(p);
    /* without a PTY a resize is refused by sandboxd (FAILED_PRECONDITION) */
    {
        static const char *const argv[] = {"sleep", "600"};
        ASBT_EQ_RES(start(sb, NULL, argv, 2, &k, &p, &err), ASB_OK);
        ASBT_EQ_RES(asb_process_resize(p, 40, 100, &err), ASB_ERR_GRPC_STATUS);
        ASBT_CONTAINS(err.reason, "FAILED_PRECONDITION");
        asb_process_free(p); /* still running: freeing ends it */
    }
    sink_free(&k);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    asb_client_free(c);
}

/* ---------------------------------------------------------------- files only sandboxd has */

ASBT_TEST(deleting_a_non_empty_directory_needs_recursive) {
    asb_error err;
    asb_client *c = new_client(&err);
    asb_sandbox *sb;
    asb_file_stat st;
    int ex = -1;
    ASBT_CHECK(c != NULL);
    sb = new_sandbox(c);
    ASBT_CHECK(sb != NULL);
    ASBT_EQ_RES(asb_sandbox_write(sb, "tree/a/b/c.txt", "c", 1, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_write(sb, "tree/top.txt", "t", 1, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_delete_file(sb, "tree", 0, NULL, &err), ASB_ERR_CONFLICT);
    ASBT_EQ_STR(err.reason, "CONFLICT");
    ASBT_CONTAINS(err.message, "not empty");
    ASBT_EQ_RES(asb_sandbox_exists(sb, "tree/a/b/c.txt", &ex, &err), ASB_OK);
    ASBT_EQ_INT(ex, 1); /* nothing was removed */
    ASBT_EQ_RES(asb_sandbox_stat(sb, "tree", &st, NULL, &err), ASB_OK);
    ASBT_EQ_INT(st.exists, 1);
    ASBT_EQ_INT(st.is_dir, 1);
    ASBT_EQ_RES(asb_sandbox_stat(sb, "tree/top.txt", &st, NULL, &err), ASB_OK);
    ASBT_EQ_INT(st.exists, 1);
    ASBT_EQ_INT(st.is_dir, 0);
    ASBT_EQ_INT(st.size, 1);
    /* a file alone needs no recursive */
    ASBT_EQ_RES(asb_sandbox_delete_file(sb, "tree/top.txt", 0, NULL, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_stat(sb, "tree/top.txt", &st, NULL, &err), ASB_OK);
    ASBT_EQ_INT(st.exists, 0);
    ASBT_EQ_RES(asb_sandbox_delete_file(sb, "tree", 1, NULL, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_exists(sb, "tree", &ex, &err), ASB_OK);
    ASBT_EQ_INT(ex, 0);
    ASBT_EQ_RES(asb_sandbox_delete_file(sb, "tree", 1, NULL, &err), ASB_ERR_NOT_FOUND);
    /* refused before it is sent, as a write's path would be (R50) */
    ASBT_EQ_RES(asb_sandbox_delete_file(sb, "../outside", 1, NULL, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    asb_client_free(c);
}

/* ---------------------------------------------------------------- pod tunnels */

ASBT_TEST(a_killed_pod_tunnel_kubectl_mid_call_is_replaced_by_the_next_call) {
    asb_error err;
    asb_client *c = new_client(&err);
    asb_sandbox *sb;
    asb_run_result rr;
    int before[4], after[4], n;
    asb_result r;
    ASBT_CHECK(c != NULL);
    sb = new_sandbox(c);
    ASBT_CHECK(sb != NULL);
    ASBT_CHECK(echo_ok(sb, "first", 0));
    n = pod_tunnels(before, 4);
    if (n != 1) show_kubectls();
    ASBT_EQ_INT(n, 1);
    /* killed while a call is under way: that call may fail (clearly) ... */
    {
        pid_t killer = fork();
        if (killer == 0) {
            asb__sleep_ms(500);
            kill(before[0], SIGKILL);
            _exit(0);
        }
        r = asb_sandbox_run(sb, "sleep 2; echo done", 0, &rr, &err);
        if (r == ASB_OK) asb_run_result_free(&rr);
        else fprintf(stderr, "    the call under way: %s (%s)\n", err.message, asb_result_str(r));
        waitpid(killer, NULL, 0);
    }
    /* ... the next one, at once, gets a new kubectl and succeeds (its
       connect to the dead port, before kubectl's supervisor is reaped, is
       refused, or completed by the kernel and reset while kubectl is torn
       down: dialled again, refused, that tunnel stops and a new one
       starts) */
    ASBT_CHECK(echo_ok(sb, "again", 0));
    ASBT_EQ_INT(pod_tunnels(after, 4), 1);
    ASBT_CHECK(after[0] != before[0]);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    ASBT_EQ_INT(wait_pod_tunnels(0, 5000), 0); /* stopped with the handle */
    asb_client_free(c);
    ASBT_EQ_INT(kubectl_descendants(NULL, 0), 0);
}

/* A sandboxd pod named like the router's Service, in the router's
   namespace: in native-tunnel mode the dial told the router and the pods
   apart by the host "<name>.<ns>" alone, so this pod's calls went to the
   router's forward (and its Service, here absent, was looked up). The
   router is pointed at the pod's own name and namespace; the second
   client must reach the pod itself: it reads back what the first wrote. */
ASBT_TEST(native_tunnel_tells_a_pod_named_like_the_router_from_the_router) {
    asb_error err;
    asb_client *c = new_client(&err), *nc = NULL;
    asb_sandbox *sb, *nsb = NULL;
    asb_client_desc d;
    asb_run_result rr;
    asb_buf b;
    char pod[300], ns[100];
    ASBT_CHECK(c != NULL);
    sb = new_sandbox(c);
    ASBT_CHECK(sb != NULL);
    snprintf(pod, sizeof pod, "%s", asb_sandbox_pod_name(sb));
    snprintf(ns, sizeof ns, "%s", asb_sandbox_namespace(sb));
    ASBT_EQ_RES(asb_sandbox_write(sb, "who.txt", "the pod itself", 14, &err), ASB_OK);
    memset(&d, 0, sizeof d);
    d.mode = ASB_CONNECT_NATIVE_TUNNEL;
    d.runtime = ASB_RUNTIME_AUTO;
    d.kube.kubeconfig.path = kubeconfig;
    d.kube.http.retry.backoff_ms = 100;
    d.router_service = pod;
    d.router_namespace = ns;
    if (getenv("ASB_SHOW_LOG")) d.log.fn = show_log;
    ASBT_EQ_RES(asb_client_create(&d, &nc, &err), ASB_OK);
    if (asb_client_get_sandbox(nc, asb_sandbox_claim_name(sb), ns, 60000, &nsb, &err) != ASB_OK)
        fprintf(stderr, "    get: %s\n", err.message);
    asb_buf_init(&b, NULL);
    memset(&rr, 0, sizeof rr);
    if (nsb) {
        if (asb_sandbox_read(nsb, "who.txt", &b, &err) != ASB_OK)
            fprintf(stderr, "    read: %s\n", err.message);
        if (asb_sandbox_run(nsb, "echo ran", 60000, &rr, &err) != ASB_OK)
            fprintf(stderr, "    run: %s\n", err.message);
    }
    asb_client_free(nc);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    asb_client_free(c);
    ASBT_CHECK(nsb != NULL);
    ASBT_EQ_INT((int)b.len, 14);
    ASBT_CHECK(b.ptr && memcmp(b.ptr, "the pod itself", 14) == 0);
    ASBT_CHECK(rr.out.ptr && strcmp(rr.out.ptr, "ran\n") == 0);
    asb_buf_free(&b);
    asb_run_result_free(&rr);
}

ASBT_TEST(n_sandboxes_have_n_pod_tunnels_and_none_is_left_after_terminate) {
    enum { N = 3 };
    asb_error err;
    asb_client *c = new_client(&err);
    asb_sandbox *sb[N];
    int i, pids[N + 1];
    ASBT_CHECK(c != NULL);
    for (i = 0; i < N; i++) {
        char words[32];
        sb[i] = new_sandbox(c);
        ASBT_CHECK(sb[i] != NULL);
        snprintf(words, sizeof words, "sandbox-%d", i);
        ASBT_CHECK(echo_ok(sb[i], words, 0));
        if (pod_tunnels(NULL, 0) != i + 1) show_kubectls();
        ASBT_EQ_INT(pod_tunnels(NULL, 0), i + 1); /* one per pod, shared by its calls */
    }
    ASBT_CHECK(echo_ok(sb[0], "sandbox-0-again", 0));
    ASBT_EQ_INT(pod_tunnels(pids, N + 1), N);
    for (i = 0; i < N; i++) {
        ASBT_EQ_RES(asb_sandbox_terminate(sb[i], &err), ASB_OK);
        ASBT_EQ_INT(wait_pod_tunnels(N - 1 - i, 5000), N - 1 - i);
    }
    asb_client_free(c);
    ASBT_EQ_INT(kubectl_descendants(NULL, 0), 0);
    ASBT_CHECK(waitpid(-1, NULL, WNOHANG) <= 0); /* every kubectl reaped */
}

/* ---------------------------------------------------------------- native tunnel at scale */

/* Child processes of this process, counted two ways: every /proc entry
   whose parent is us, and the kernel's own answer to waitid (ECHILD: no
   child at all, running or exited; WNOWAIT reaps nothing). Children of
   any of our threads count: their parent is the process. Returns the
   larger count (1 when only waitid sees one). */
static int child_processes(void) {
    DIR *d = opendir("/proc");
    struct dirent *e;
    siginfo_t si;
    int n = 0;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        if (proc_parent(atoi(e->d_name), NULL, 0) == (int)getpid()) n++;
    }
    if (d) closedir(d);
    memset(&si, 0, sizeof si);
    if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && n == 0) n = 1;
    else if (errno != ECHILD && n == 0) n = 1; /* neither "none" nor a clean scan */
    return n;
}

/* Looks for child processes every 20 ms while the sandboxes are made and
   driven: a kubectl (or anything) started and gone between two checks at
   the end would otherwise go unseen. */
typedef struct child_watch {
    pthread_mutex_t mu;
    int stop, samples, peak;
} child_watch;

static void *watch_children(void *arg) {
    child_watch *w = (child_watch *)arg;
    for (;;) {
        int n = child_processes(), stop;
        pthread_mutex_lock(&w->mu);
        if (n > w->peak) w->peak = n;
        w->samples++;
        stop = w->stop;
        pthread_mutex_unlock(&w->mu);
        if (stop) return NULL;
        asb__sleep_ms(20);
    }
}

/* Pods in `default`, from the apiserver (-1: could not list). */
static int default_pods(void) {
    asb_kube_client_desc d;
    asb_kube_client *kc = NULL;
    asb_json_doc doc;
    asb_error err;
    asb_buf b;
    int n = -1;
    memset(&d, 0, sizeof d);
    d.kubeconfig.path = kubeconfig;
    if (asb_kube_client_create(&d, &kc, &err) != ASB_OK) return -1;
    asb_buf_init(&b, NULL);
    if (asb_kube_request(kc, "GET", "/api/v1/namespaces/default/pods", NULL, NULL, 0, &b, &err) ==
            ASB_OK &&
        asb_json_doc_parse(&doc, b.ptr, b.len, NULL, &err) == ASB_OK) {
        asb_json_iter it = asb_json_iter_begin(&doc, asb_json_find(&doc, 0, "items"));
        n = 0;
        while (asb_json_iter_next(&doc, &it, NULL, NULL)) n++;
        asb_json_doc_free(&doc);
    }
    asb_buf_free(&b);
    asb_kube_client_free(kc);
    return n;
}

/* Issue 17: one client in ASB_CONNECT_NATIVE_TUNNEL mode drives 100
   sandboxd sandboxes (the real sandboxd in every pod) with PATH naming
   nothing, so no kubectl could start: each pod's REST and gRPC ports ride
   WebSocket port-forward streams from inside this process. Every sandbox
   runs a command that writes a file of its own, which is read back from
   the same sandbox (a stream crossed between pods would show); all are
   held open together, then all deleted. No child process at any time
   (sampled throughout, and at the end), no claim left, and the
   descriptors and threads of before the client. No timing is asserted:
   the bounds are generous deadlines for a loaded machine. */
ASBT_TEST(native_mode_drives_100_sandboxd_sandboxes_with_no_child_process) {
    enum { COUNT = 100 };
    asb_client_desc d;
    asb_create_opts o;
    asb_client *c = NULL;
    asb_create_result *res;
    asb_name_list left;
    asb_error err;
    asb_label label;
    child_watch w;
    pthread_t th;
    asb_result r;
    char saved[4096], sel[32], selector[64];
    const char *old_path = getenv("PATH");
    int fds0, tasks0, i, ok = 0, ran = 0, read_back = 0, sandboxd = 0;
    int64_t t0, t_ready, t_driven, t_settled;
    int pods0 = default_pods(), pods = -1;
    ASBT_EQ_INT(child_processes(), 0);
    t0 = asb__now_ms();
    snprintf(saved, sizeof saved, "%s", old_path ? old_path : "");
    res = (asb_create_result *)calloc(COUNT, sizeof *res);
    ASBT_CHECK(res != NULL);
    fds0 = count_entries("/proc/self/fd"); /* before the watcher, which opens /proc */
    tasks0 = count_entries("/proc/self/task");
    memset(&w, 0, sizeof w);
    pthread_mutex_init(&w.mu, NULL);
    ASBT_CHECK(pthread_create(&th, NULL, watch_children, &w) == 0);
    setenv("PATH", "/nonexistent", 1);         /* no kubectl to find */
    memset(&d, 0, sizeof d);
    d.mode = ASB_CONNECT_NATIVE_TUNNEL;
    d.kube.kubeconfig.path = kubeconfig;
    d.kube.http.retry.backoff_ms = 100;
    d.runtime = ASB_RUNTIME_AUTO; /* sandboxd, from the pool's template */
    if (getenv("ASB_SHOW_LOG")) d.log.fn = show_log;
    r = asb_client_create(&d, &c, &err);
    if (r == ASB_OK) {
        snprintf(sel, sizeof sel, "%d", (int)getpid());
        label.key = "asb-native-100";
        label.value = sel;
        memset(&o, 0, sizeof o);
        o.warm_pool = POOL;
        o.labels = &label;
        o.label_count = 1;
        o.ready_timeout_ms = 900000; /* a bound for a loaded machine, not a goal */
        r = asb_client_create_sandboxes(c, NULL, &o, COUNT, 16, res, &err);
        if (r != ASB_OK) fprintf(stderr, "    creates: %s\n", err.message);
    }
    t_ready = asb__now_ms();
    for (i = 0; i < COUNT; i++) {
        asb_sandbox *sb = res[i].sandbox;
        asb_run_result rr;
        asb_buf back;
        char cmd[400], want[320];
        if (!sb || res[i].error.code != ASB_OK) continue;
        ok++;
        sandboxd += strcmp(asb_sandbox_runtime(sb), "sandboxd") == 0;
        snprintf(want, sizeof want, "sandbox %d of %.200s", i, asb_sandbox_claim_name(sb));
        snprintf(cmd, sizeof cmd, "printf '%%s' '%s' > own.txt && echo ran", want);
        if (asb_sandbox_run(sb, cmd, 120000, &rr, &err) == ASB_OK && rr.exit_code == 0 &&
            rr.out.ptr && strcmp(rr.out.ptr, "ran\n") == 0)
            ran++;
        else
            fprintf(stderr, "    sandbox %d run: %s\n", i, rr.out.ptr ? rr.out.ptr : err.message);
        asb_run_result_free(&rr);
        asb_buf_init(&back, NULL);
        if (asb_sandbox_read(sb, "own.txt", &back, &err) == ASB_OK && back.len == strlen(want) &&
            memcmp(back.ptr, want, back.len) == 0)
            read_back++;
        else
            fprintf(stderr, "    sandbox %d read: %s\n", i, back.ptr ? back.ptr : err.message);
        asb_buf_free(&back);
    }
    t_driven = asb__now_ms();
    /* all 100 still open here: the sampler has seen them together */
    if (c && asb_client_delete_all(c, &err) != ASB_OK) {
        fprintf(stderr, "    delete all: %s\n", err.message);
        r = err.code;
    }
    asb_client_free(c);
    setenv("PATH", saved, 1);
    pthread_mutex_lock(&w.mu);
    w.stop = 1;
    pthread_mutex_unlock(&w.mu);
    pthread_join(th, NULL);
    fprintf(stderr,
            "    %d sandboxes: ready in %.1f s, each ran a command and read a file in %.1f s "
            "more; child processes: peak %d over %d samples\n",
            ok, (double)(t_ready - t0) / 1e3, (double)(t_driven - t_ready) / 1e3, w.peak, w.samples);
    free(res);
    ASBT_EQ_RES(r, ASB_OK);
    ASBT_EQ_INT(ok, COUNT);
    ASBT_EQ_INT(sandboxd, COUNT);
    ASBT_EQ_INT(ran, COUNT);
    ASBT_EQ_INT(read_back, COUNT);
    ASBT_CHECK(w.samples >= 2);
    ASBT_EQ_INT(w.peak, 0);
    ASBT_EQ_INT(child_processes(), 0);
    /* every claim of this run is gone, the relays' threads and sockets too */
    {
        asb_client *lister = NULL;
        memset(&d, 0, sizeof d);
        d.kube.kubeconfig.path = kubeconfig;
        d.mode = ASB_CONNECT_DIRECT;
        d.direct_url = "http://127.0.0.1:1"; /* never dialled: only listing */
        ASBT_EQ_RES(asb_client_create(&d, &lister, &err), ASB_OK);
        snprintf(selector, sizeof selector, "asb-native-100=%s", sel);
        memset(&left, 0, sizeof left);
        ASBT_EQ_RES(asb_client_list_all(lister, "default", selector, &left, &err), ASB_OK);
        ASBT_EQ_INT((int)left.count, 0);
        asb_name_list_free(&left);
        asb_client_free(lister);
    }
    ASBT_EQ_INT(count_entries("/proc/self/task"), tasks0); /* the watcher has ended too */
    ASBT_EQ_INT(count_entries("/proc/self/fd"), fds0);
    pthread_mutex_destroy(&w.mu);
    /* The cluster settles before the next case: 100 pods going and the
       warm pool refilling keep the pod runner busy for a while on a
       loaded machine, and a case after this one must not wait behind
       them (up to 10 min; not a check: the claims are gone already). */
    t_settled = asb__now_ms();
    while (pods0 >= 0 && asb__now_ms() - t_settled < 600000 &&
           ((pods = default_pods()) < 0 || pods > pods0))
        asb__sleep_ms(1000);
    fprintf(stderr, "    pods in default: %d before, %d %.0f s after the deletes\n", pods0, pods,
            (double)(asb__now_ms() - t_settled) / 1e3);
}

/* ---------------------------------------------------------------- in-cluster */

/* `lc.py pod-expose NS/POD` for the sandbox's pod (ASB_LC: the command
   that runs lc.py, the cluster's LC_STATE_DIR in the environment): a proxy
   serving the pod's sandboxd on the pod IP, as ASB_CONNECT_IN_CLUSTER
   needs (sandboxd itself binds 127.0.0.1 only). Its pid once every port
   accepts, or -1 (why printed). It ends with this process, too. */
static pid_t expose_pod(asb_sandbox *sb) {
    const char *lc = getenv("ASB_LC");
    char pod[400], line[256];
    size_t n = 0;
    int fds[2], st;
    pid_t pid;
    if (!lc) {
        fprintf(stderr, "    ASB_LC is not set (make test-sandboxd-cluster sets it)\n");
        return -1;
    }
    snprintf(pod, sizeof pod, "%s/%s", asb_sandbox_namespace(sb), asb_sandbox_pod_name(sb));
    if (pipe(fds) != 0) return -1;
    pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl("/bin/sh", "sh", "-c", "exec $ASB_LC pod-expose \"$1\"", "sh", pod, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        return -1;
    }
    /* one line, "exposed IP PORT...", or EOF when it gave up */
    while (n + 1 < sizeof line && read(fds[0], line + n, 1) == 1 && line[n] != '\n') n++;
    line[n] = '\0';
    close(fds[0]);
    if (strncmp(line, "exposed ", 8) != 0) {
        fprintf(stderr, "    lc.py pod-expose %s: \"%s\"\n", pod, line);
        kill(pid, SIGTERM);
        waitpid(pid, &st, 0);
        return -1;
    }
    return pid;
}

/* ASB_CONNECT_IN_CLUSTER with the sandboxd runtime: the handle's calls go
   to the pod IP the cluster reports, REST on 8080 and gRPC on 9090, with
   no tunnel and no router. Before anything serves that IP the call is
   refused there; once a proxy in the pod serves it, run, the file calls
   and a streaming process with stdin all work, and no kubectl ran. */
ASBT_TEST(in_cluster_reaches_sandboxd_on_the_pod_ip_for_files_runs_and_processes) {
    static const char *const cat[] = {"cat"};
    asb_client_desc d;
    asb_client *c = NULL;
    asb_sandbox *sb;
    asb_run_result rr;
    asb_buf b;
    asb_file_list fl;
    asb_process *p = NULL;
    asb_error err;
    char ip[ASB_IP_SIZE], at[ASB_IP_SIZE + 16];
    pid_t ex;
    sink k;
    int code = -2, ex_st, i, bad = 0, pids[4];
    size_t pos = 0;
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = kubeconfig;
    d.mode = ASB_CONNECT_IN_CLUSTER;
    d.runtime = ASB_RUNTIME_AUTO;
    if (getenv("ASB_SHOW_LOG")) d.log.fn = show_log;
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_OK);
    sb = new_sandbox(c);
    ASBT_CHECK(sb != NULL);
    ASBT_EQ_STR(asb_sandbox_runtime(sb), "sandboxd");
    ASBT_EQ_RES(asb_sandbox_pod_ip(sb, ip, &err), ASB_OK);
    /* sandboxd binds the pod's 127.0.0.1: on the pod IP nothing answers yet */
    ASBT_EQ_RES(asb_sandbox_run(sb, "echo early", 0, &rr, &err), ASB_ERR_CONNECT);
    asb_run_result_free(&rr);
    snprintf(at, sizeof at, "%s port 9090", ip); /* run is the gRPC Execute */
    ASBT_CONTAINS(err.message, at);
    ex = expose_pod(sb);
    ASBT_CHECK(ex > 0);
    /* run over gRPC (9090), files over REST (8080) */
    ASBT_CHECK(echo_ok(sb, "straight to the pod", 0));
    ASBT_EQ_RES(asb_sandbox_write(sb, "ic/a.txt", "in-cluster", 10, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_write(sb, "ic/b.bin", "x\0y", 3, &err), ASB_OK);
    asb_buf_init(&b, NULL);
    ASBT_EQ_RES(asb_sandbox_read(sb, "ic/a.txt", &b, &err), ASB_OK);
    ASBT_CHECK(b.len == 10 && memcmp(b.ptr, "in-cluster", 10) == 0);
    asb_buf_free(&b);
    ASBT_EQ_RES(asb_sandbox_list(sb, "ic", &fl, &err), ASB_OK);
    ASBT_EQ_INT(fl.count, 2);
    for (i = 0; i < (int)fl.count; i++)
        ASBT_EQ_INT(fl.entries[i].size, strcmp(fl.entries[i].name, "a.txt") == 0 ? 10 : 3);
    asb_file_list_free(&fl);
    ASBT_EQ_RES(asb_sandbox_run(sb, "cat ic/a.txt; wc -c < ic/b.bin", 0, &rr, &err), ASB_OK);
    ASBT_EQ_STR(rr.out.ptr, "in-cluster3\n");
    asb_run_result_free(&rr);
    /* a stream of 3000 lines, in order and complete */
    sink_init(&k);
    ASBT_EQ_RES(start(sb, "i=1; while [ $i -le 3000 ]; do echo \"line $i\"; i=$((i+1)); done", NULL,
                      0, &k, &p, &err),
                ASB_OK);
    ASBT_EQ_RES(asb_process_wait(p, 0, &code, &err), ASB_OK);
    ASBT_EQ_INT(code, 0);
    for (i = 1; i <= 3000 && !bad; i++) {
        char want[32];
        int n = snprintf(want, sizeof want, "line %d\n", i);
        if (pos + (size_t)n > k.out.len || memcmp(k.out.ptr + pos, want, (size_t)n) != 0) bad = i;
        pos += (size_t)n;
    }
    ASBT_EQ_INT(bad, 0);
    ASBT_EQ_INT(k.out.len, pos);
    asb_process_free(p);
    sink_free(&k);
    /* stdin (WriteStdin beside the open Start stream) back through cat */
    sink_init(&k);
    p = NULL;
    ASBT_EQ_RES(start(sb, NULL, cat, 1, &k, &p, &err), ASB_OK);
    ASBT_EQ_RES(asb_process_write_stdin(p, "typed in\n", 9, &err), ASB_OK);
    ASBT_EQ_RES(asb_process_close_stdin(p, &err), ASB_OK);
    code = -2;
    ASBT_EQ_RES(asb_process_wait(p, 0, &code, &err), ASB_OK);
    ASBT_EQ_INT(code, 0);
    ASBT_CHECK(k.out.len == 9 && memcmp(k.out.ptr, "typed in\n", 9) == 0);
    asb_process_free(p);
    sink_free(&k);
    ASBT_EQ_INT(kubectl_descendants(pids, 4), 0); /* no tunnel of any kind */
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    asb_client_free(c);
    kill(ex, SIGTERM);
    ASBT_CHECK(waitpid(ex, &ex_st, 0) == ex);
}

/* In-cluster with an account that may not read Sandboxes, on the sandboxd
   runtime: the pod IP lookup is refused (403), and run, files and a
   process go to the sandbox's Service name, <sandbox>.default.svc.cluster.
   local (a copy of sandboxd-template with `service: true`), which the local
   cluster's DNS answers with the pod IP, served by `lc.py pod-expose`. In a
   child with a private mount namespace whose /etc/resolv.conf names only
   that DNS, so no lookup leaves loopback. Set up by
   tests/kube/dns-fallback-setup.sh STATE sandboxd-template
   asb-sandboxd-service-template asb-sandboxd-service-warmpool (make
   test-sandboxd-cluster). */
static int sd_dns_child(const char *state) {
    char claim[256] = "", name[256] = "";
    asb_create_opts o;
    asb_client *c = NULL, *admin = NULL;
    asb_sandbox *sb = NULL, *seen = NULL;
    asb_buf b;
    asb_error err;
    asbt_log ls;
    pid_t ex = -1;
    sink k;
    int rc = 1, code = -2, st;
    if (enter_pod_env(state) != 0) return 1;
    /* the sandboxd runtime named: the account may not read templates either */
    c = dns_account_client(state, ASB_RUNTIME_SANDBOXD, &ls);
    if (!c) goto out;
    memset(&o, 0, sizeof o);
    o.warm_pool = "asb-sandboxd-service-warmpool";
    if (asb_client_create_sandbox(c, NULL, &o, &sb, &err) != ASB_OK) {
        fprintf(stderr, "    create: %s\n", err.message);
        goto out;
    }
    if (!sb || !asb_sandbox_claim_name(sb) || !asb_sandbox_name(sb)) goto out;
    snprintf(claim, sizeof claim, "%s", asb_sandbox_claim_name(sb));
    snprintf(name, sizeof name, "%s", asb_sandbox_name(sb)); /* the pool's, not the claim's */
    if (!pod_ip_refused_ok(sb)) goto out;
    /* the admin finds the pod, to serve its sandboxd on the pod IP */
    admin = new_client(&err);
    if (!admin || asb_client_get_sandbox(admin, claim, NULL, 0, &seen, &err) != ASB_OK ||
        (ex = expose_pod(seen)) <= 0) {
        fprintf(stderr, "    the admin's view of %s: %s\n", claim, err.message);
        goto out;
    }
    if (!echo_ok(sb, "by name", 0)) goto out;
    if (asb_sandbox_write(sb, "named.txt", "by name", 7, &err) != ASB_OK) {
        fprintf(stderr, "    write: %s\n", err.message);
        goto out;
    }
    asb_buf_init(&b, NULL);
    st = asb_sandbox_read(sb, "named.txt", &b, &err) == ASB_OK && b.len == 7 &&
         memcmp(b.ptr, "by name", 7) == 0;
    asb_buf_free(&b);
    if (!st) {
        fprintf(stderr, "    read back: %s\n", err.message);
        goto out;
    }
    sink_init(&k);
    {
        asb_process *p = NULL;
        st = start(sb, "echo one; echo two", NULL, 0, &k, &p, &err) == ASB_OK &&
             asb_process_wait(p, 0, &code, &err) == ASB_OK && code == 0 && k.out.len == 8 &&
             memcmp(k.out.ptr, "one\ntwo\n", 8) == 0;
        if (!st) fprintf(stderr, "    process: %s (exit %d, %zu bytes)\n", err.message, code, k.out.len);
        asb_process_free(p);
    }
    sink_free(&k);
    if (!st || !service_name_logged_once_ok(&ls)) goto out;
    rc = 0;
out:
    if (!terminated_ok(sb)) rc = 1;
    asb_client_free(c);
    asb_client_free(admin);
    if (ex > 0) {
        kill(ex, SIGTERM);
        waitpid(ex, &st, 0);
    }
    asbt_log_close(&ls);
    if (rc == 0) printf("sandbox %s\n", name);
    fflush(stdout); /* _exit follows */
    return rc;
}

ASBT_TEST(in_cluster_sandboxd_uses_the_service_name_when_the_pod_ip_is_refused) {
    char state[1100], path[1200], line[512], name[200], sandbox[200] = "";
    pid_t pid;
    int st = 0, answered = 0, fds[2];
    size_t n = 0;
    FILE *f;
    snprintf(state, sizeof state, "%s/..", getenv("ASB_CLUSTER_KUBECONFIGS"));
    snprintf(path, sizeof path, "%s/serviceaccount-dns/token", state);
    if (access(path, R_OK) != 0)
        fprintf(stderr, "    %s is missing (tests/kube/dns-fallback-setup.sh)\n", path);
    ASBT_CHECK(access(path, R_OK) == 0);
    fflush(NULL);
    ASBT_CHECK(pipe(fds) == 0);
    pid = fork();
    ASBT_CHECK(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 1);
        _exit(sd_dns_child(state));
    }
    close(fds[1]);
    while (n + 1 < sizeof line && read(fds[0], line + n, 1) == 1) n++;
    line[n] = '\0';
    close(fds[0]);
    ASBT_CHECK(waitpid(pid, &st, 0) == pid);
    ASBT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ASBT_CHECK(sscanf(line, "sandbox %199s", sandbox) == 1);
    /* the sandbox's name went through the cluster DNS, which answered its pod IP */
    snprintf(path, sizeof path, "%s/logs/podrunner.log", state);
    f = fopen(path, "r");
    ASBT_CHECK(f != NULL);
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%*s podrunner: dns: A %199s -> 127.", name) == 1 &&
            strncmp(name, sandbox, strlen(sandbox)) == 0 &&
            strcmp(name + strlen(sandbox), ".default.svc.cluster.local") == 0)
            answered++;
    fclose(f);
    ASBT_CHECK(answered >= 1);
}

/* ---------------------------------------------------------------- after each case */

/* Claims this library made and a failed case left behind are deleted, and
   kubectl processes it left are stopped, so one failure does not cascade. */
static int sweep(const char *name, int failed) {
    asb_error err;
    asb_client *c = new_client(&err);
    asb_name_list names;
    int left = 0, pids[16], n, i;
    if (!c) {
        fprintf(stderr, "    sweep after %s: %s\n", name, err.message);
        return 1;
    }
    if (asb_client_list_all(c, "default", "agents.x-k8s.io/created-by=agentsandbox.h", &names, &err) ==
        ASB_OK) {
        for (i = 0; i < (int)names.count; i++) {
            fprintf(stderr, "    %s left claim default/%s behind%s\n", name, names.names[i],
                    failed ? " (deleted now)" : "; deleted now");
            asb_client_delete_sandbox(c, names.names[i], "default", NULL);
            left++;
        }
        asb_name_list_free(&names);
    }
    asb_client_free(c);
    n = kubectl_descendants(pids, 16);
    for (i = 0; i < n && i < 16; i++) {
        fprintf(stderr, "    %s left kubectl %d running%s\n", name, pids[i],
                failed ? " (stopped now)" : "; stopped now");
        kill(pids[i], SIGKILL);
    }
    /* reap them, and whatever supervised them, so the next case starts clean */
    for (i = 0; i < 40 && n > 0; i++) {
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        asb__sleep_ms(50);
    }
    return left + n > 0;
}

ASBT_LIST(
    ASBT_CASE(the_handle_suite_runs_on_a_sandboxd_template)
    ASBT_CASE(files_go_up_from_an_fd_and_come_back_into_one)
    ASBT_CASE(a_1_gib_file_goes_up_and_down_in_flat_memory)
    ASBT_CASE(a_process_streams_10000_lines_in_order_and_complete)
    ASBT_CASE(output_arrives_while_the_process_runs)
    ASBT_CASE(stdin_written_from_another_thread_comes_back_through_cat)
    ASBT_CASE(a_stdin_write_held_by_a_full_pipe_ends_with_the_process)
    ASBT_CASE(sigint_ends_sleep_600_and_the_exit_says_a_signal_did)
    ASBT_CASE(a_pty_process_sees_its_size_and_a_resize)
    ASBT_CASE(deleting_a_non_empty_directory_needs_recursive)
    ASBT_CASE(a_killed_pod_tunnel_kubectl_mid_call_is_replaced_by_the_next_call)
    ASBT_CASE(n_sandboxes_have_n_pod_tunnels_and_none_is_left_after_terminate)
    ASBT_CASE(native_tunnel_tells_a_pod_named_like_the_router_from_the_router)
    ASBT_CASE(native_mode_drives_100_sandboxd_sandboxes_with_no_child_process)
    ASBT_CASE(in_cluster_reaches_sandboxd_on_the_pod_ip_for_files_runs_and_processes)
    ASBT_CASE(in_cluster_sandboxd_uses_the_service_name_when_the_pod_ip_is_refused))

int main(int argc, char **argv);
#define main asbt_main
ASBT_MAIN()
#undef main
int main(int argc, char **argv) {
    snprintf(kubeconfig, sizeof kubeconfig, "%s/admin.kubeconfig", cluster_dir());
    asbt_after_each = sweep;
    return asbt_main(argc, argv);
}
