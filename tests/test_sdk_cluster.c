/* The sandbox SDK end to end on the real local control plane: a real
   agent-sandbox controller binds the claim, kwok runs the pod, the pod
   runner starts agentsandbox-runtime on the pod's loopback IP, and the
   client reaches it through a real `kubectl port-forward` to the real
   sandbox-router. ASB_CLUSTER_KUBECONFIGS names the cluster's kubeconfigs. */
#define _GNU_SOURCE /* unshare(), for the private resolv.conf of one case */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include "asbtest.h"
#include "cluster.h"
#include "recorder.h"
#include "logsink.h"
#include "scanalloc.h"
#include "cancel_later.h"
#include <sys/resource.h>
#include <dirent.h>
#include <sys/stat.h>
#ifdef __linux__
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#endif

/* The router's base URL, from the client's connector as a call gets it
   (starting the tunnel when the connector has one). */
static asb_result router_base(asb_client *c, char *out, size_t cap, asb_error *err) {
    asb__endpoint ep;
    asb_result r = c->conn->endpoint(c, NULL, c->server_port, &ep, err);
    size_t n = strlen(ep.base);
    if (r == ASB_OK && n < cap) memcpy(out, ep.base, n + 1);
    return r;
}

static char kubeconfig[1024];

/* The mode of new_client's clients: the local tunnel, or with
   ASB_CONNECT_MODE=native the kubectl-free tunnel (test-kube-cluster runs
   the cases that do not test kubectl itself again that way). */
static asb_connection_mode client_mode = ASB_CONNECT_LOCAL_TUNNEL;

/* trace 1: latency histograms on (no exporter) */
/* The runtime the cases' clients ask for: the legacy one, or with
   ASB_TEST_POOL set (test-sandboxd-cluster runs the handle cases again on
   sandboxd, issue 15) auto, which finds sandboxd in the pool's template. */
static asb_runtime_kind test_runtime(void) {
    return getenv("ASB_TEST_POOL") ? ASB_RUNTIME_AUTO : ASB_RUNTIME_LEGACY;
}

static asb_client *new_client_traced(asb_error *err, int trace) {
    asb_client_desc d;
    asb_client *c = NULL;
    memset(&d, 0, sizeof d);
    d.mode = client_mode;
    d.runtime = test_runtime();
    d.kube.kubeconfig.path = kubeconfig;
    d.kube.http.retry.backoff_ms = 100;
    d.tracer.enable = trace;
    d.tracer.otlp = -1;
    if (asb_client_create(&d, &c, err) != ASB_OK) return NULL;
    return c;
}

static asb_client *new_client(asb_error *err) {
    return new_client_traced(err, 0);
}

/* A claim of python-sandbox-template, or of the warm pool ASB_TEST_POOL
   names (the sandboxd re-run). */
static asb_result create_sb(asb_client *c, const asb_create_opts *o, asb_sandbox **sb,
                            asb_error *err) {
    const char *pool = getenv("ASB_TEST_POOL");
    asb_create_opts po;
    if (!pool) return asb_client_create_sandbox(c, "python-sandbox-template", o, sb, err);
    if (o)
        po = *o;
    else
        memset(&po, 0, sizeof po);
    po.warm_pool = pool;
    return asb_client_create_sandbox(c, NULL, &po, sb, err);
}

/* How many tunnel starts (kubectl spawned to listening) the client timed. */
static uint64_t tunnel_starts(asb_client *c) {
    asb_latency_stats st;
    asb_error err;
    if (asb_client_latency(c, ASB_LATENCY_TUNNEL_START, 0, &st, &err) != ASB_OK) return 0;
    return st.count;
}

/* A loopback port free a moment ago, for the servers these tests start
   (the library no longer picks ports: kubectl does, see R3). */
static int free_port(void) {
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    if (fd < 0) return -1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &al) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static int claim_exists(asb_client *c, const char *ns, const char *claim) {
    asb_kube_resource res = {"extensions.agents.x-k8s.io", "v1alpha1", "sandboxclaims"};
    asb_error err;
    asb_result r = asb_kube_get(c->kube, &res, ns, claim, NULL, &err);
    return r == ASB_OK;
}

/* kubectl processes started by this process: each runs under a tunnel
   supervisor that is our child. Fills up to cap of their pids and their
   supervisors' (either array may be NULL); returns how many there are. */
static int kubectl_children(int *kubectl, int *supervisor, int cap) {
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL) {
        char name[64] = "";
        int pid, ppid;
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        pid = atoi(e->d_name);
        ppid = proc_parent(pid, name, sizeof name);
        if (ppid <= 0 || !strstr(name, "kubectl") || proc_parent(ppid, NULL, 0) != (int)getpid())
            continue;
        if (n < cap && kubectl) kubectl[n] = pid;
        if (n < cap && supervisor) supervisor[n] = ppid;
        n++;
    }
    if (d) closedir(d);
    return n;
}

static int count_kubectl_children(void) { return kubectl_children(NULL, NULL, 0); }

/* The kubectl that a tunnel supervisor runs (0 if none). */
static int kubectl_of(int supervisor) {
    DIR *d = opendir("/proc");
    struct dirent *e;
    int found = 0;
    while (d && (e = readdir(d)) != NULL && !found) {
        char name[64] = "";
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        if (proc_parent(atoi(e->d_name), name, sizeof name) == supervisor &&
            strstr(name, "kubectl"))
            found = atoi(e->d_name);
    }
    if (d) closedir(d);
    return found;
}

/* What a case made. A failed ASBT check leaves the function it is in at
   once, so each case's checks run in a body that records here what it
   makes as soon as it makes it, and the case frees all of it after the
   body returns, whichever check ended it: a failed check no longer leaks
   the clients, buffers, logs, descriptors and processes made before it,
   leaves its threads running on freed memory, its claims, templates and
   objects in the cluster or KUBECONFIG changed for later cases. A body
   may free a thing early (free_client, made_forget clear what they
   free). made_free frees users before what they use: the threads first,
   then every claim a client still tracks (asb_client_delete_all: a
   terminated handle is no longer tracked), the templates and objects
   (through c[0]), the clients, and last what they talked to. */
typedef struct fault_proxy fault_proxy;
typedef struct tls_terminator tls_terminator;
typedef struct tls_clients tls_clients;
static void fp_stop(fault_proxy *p);
static void tt_stop(tls_terminator *t);
static void tls_clients_free(tls_clients *tc);
static void drop_template(asb_client *c, const char *name);

typedef struct made {
    pthread_t th[5];             /* joined first: they use what is below */
    int nth;
    pid_t child[2];              /* killed and reaped when > 0 */
    int fd[3];                   /* -1: none */
    asb_client *c[3];            /* c[0] removes the templates and objects */
    const char *tpl[2];          /* make_template's, dropped */
    struct {
        const asb_kube_resource *res;
        const char *ns;          /* NULL: cluster-scoped */
        char name[64];
    } obj[2];                    /* deleted; NotFound is fine */
    int nobj;
    char claim[64];              /* a named claim in default, deleted (through c[0]) */
    fault_proxy *fp;             /* stopped, when started */
    tls_terminator *tt;          /* stopped (its nginx and files), when started */
    tls_clients *tc;             /* freed */
    recorder *rec;
    asb_http_client *http;
    asb_http_response resp;
    asb_json_doc doc;
    asb_cancel *cancel;
    asb_run_result rr;
    asb_buf buf;
    asb_name_list names;
    asb_file_list files;
    asbt_log log;                /* set up when log_open */
    int log_open;
    const char *env;             /* put back as it was, when set */
    char env_saved[1024];
    int env_had;
    void *mem[3];                /* made_alloc's (thread arguments, ...), freed last */
} made;

/* Zeroed memory that lives until the case's end: what a thread or
   made_free uses after the body has returned. */
static void *made_alloc(made *m, size_t n) {
    int i;
    for (i = 0; i < 3 && m->mem[i]; i++) {}
    if (i == 3 || !(m->mem[i] = calloc(1, n))) abort();
    return m->mem[i];
}

/* pthread_create, the thread joined before anything is freed. */
static int made_thread(made *m, void *(*fn)(void *), void *arg) {
    int r;
    if (m->nth == 5) abort();
    r = pthread_create(&m->th[m->nth], NULL, fn, arg);
    if (r == 0) m->nth++;
    return r;
}

/* Joins the case's last thread still running (the body's own join,
   before its checks). */
static void made_join_last(made *m) {
    if (m->nth > 0) pthread_join(m->th[--m->nth], NULL);
}

static void made_join(made *m) {
    while (m->nth > 0) made_join_last(m);
}

/* Sets an environment variable, put back as it was after the case. */
static void made_setenv(made *m, const char *name, const char *value) {
    const char *old = getenv(name);
    m->env = name;
    m->env_had = old != NULL;
    snprintf(m->env_saved, sizeof m->env_saved, "%s", old ? old : "");
    setenv(name, value, 1);
}

static void made_obj(made *m, const asb_kube_resource *res, const char *ns, const char *name) {
    if (m->nobj == 2) abort();
    m->obj[m->nobj].res = res;
    m->obj[m->nobj].ns = ns;
    snprintf(m->obj[m->nobj].name, sizeof m->obj[m->nobj].name, "%s", name);
    m->nobj++;
}

/* The case removed its templates and objects itself. */
static void made_forget(made *m) {
    m->nobj = 0;
    m->tpl[0] = m->tpl[1] = NULL;
}

static void free_client(asb_client **c) {
    asb_client_free(*c);
    *c = NULL;
}

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

static void made_free(made *m) {
    int i;
    made_join(m);
    for (i = 0; i < 2; i++)
        if (m->child[i] > 0) {
            kill(m->child[i], SIGKILL);
            waitpid(m->child[i], NULL, 0);
        }
    for (i = 0; i < 3; i++) close_fd(&m->fd[i]);
    for (i = 0; i < 3; i++)
        if (m->c[i]) asb_client_delete_all(m->c[i], NULL);
    for (i = 0; i < 2 && m->c[0]; i++)
        if (m->tpl[i]) drop_template(m->c[0], m->tpl[i]);
    for (i = m->nobj - 1; i >= 0 && m->c[0]; i--)
        asb_kube_delete(m->c[0]->kube, m->obj[i].res, m->obj[i].ns, m->obj[i].name, NULL);
    if (m->claim[0] && m->c[0] && asb__api_version(m->c[0], NULL) == ASB_OK) {
        asb_kube_resource res;
        asb_kube_delete(m->c[0]->kube, asb__claims(m->c[0], &res), "default", m->claim, NULL);
    }
    for (i = 0; i < 3; i++) free_client(&m->c[i]);
    if (m->tc) tls_clients_free(m->tc);
    if (m->tt) tt_stop(m->tt);
    if (m->fp) fp_stop(m->fp);
    recorder_stop(m->rec);
    asb_http_response_free(&m->resp);
    asb_http_client_free(m->http);
    asb_cancel_free(m->cancel);
    asb_run_result_free(&m->rr);
    asb_buf_free(&m->buf);
    asb_name_list_free(&m->names);
    asb_file_list_free(&m->files);
    asb_json_doc_free(&m->doc);
    if (m->log_open) asbt_log_close(&m->log);
    if (m->env && m->env_had) setenv(m->env, m->env_saved, 1);
    if (m->env && !m->env_had) unsetenv(m->env);
    for (i = 0; i < 3; i++) free(m->mem[i]);
}

/* Runs a case's body with a fresh record and frees what it made. */
static void made_run(void (*body)(made *m)) {
    made m;
    memset(&m, 0, sizeof m);
    asb_buf_init(&m.buf, NULL);
    m.fd[0] = m.fd[1] = m.fd[2] = -1;
    body(&m);
    made_free(&m);
}

/* A case: its name runs `name_body` through made_run. */
#define MADE_TEST(name)                          \
    static void name##_body(made *m);           \
    ASBT_TEST(name) { made_run(name##_body); }  \
    static void name##_body(made *m)

MADE_TEST(quick_start_create_run_write_read_exists_terminate) {
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    asb_sandbox *sb = NULL;
    asb_run_result *rr = &m->rr;
    asb_buf *data = &m->buf;
    asb_create_opts o;
    asb_label labels[1];
    int ex = -1;
    char claim[64];
    if (!c) fprintf(stderr, "    %s\n", err.message);
    ASBT_CHECK(c != NULL);
    memset(&o, 0, sizeof o);
    labels[0].key = "team";
    labels[0].value = "c-sdk";
    o.labels = labels;
    o.label_count = 1;
    o.shutdown_after_seconds = 3600;
    o.ready_timeout_ms = 60000;
    if (create_sb(c, &o, &sb, &err) != ASB_OK)
        fprintf(stderr, "    create: %s\n", err.message);
    ASBT_CHECK(sb != NULL);
    ASBT_CHECK(strncmp(asb_sandbox_claim_name(sb), "sandbox-claim-", 14) == 0);
    ASBT_CHECK(asb_sandbox_name(sb)[0] != '\0');
    ASBT_EQ_STR(asb_sandbox_namespace(sb), "default");
    snprintf(claim, sizeof claim, "%s", asb_sandbox_claim_name(sb));

    ASBT_CHECK(echo_ok(sb, "hello from the sandbox", 30000));
    ASBT_EQ_RES(asb_sandbox_run(sb, "sh -c 'echo oops >&2; exit 3'", 0, rr, &err), ASB_OK);
    ASBT_EQ_INT(rr->exit_code, 3);
    ASBT_EQ_STR(rr->err.ptr, "oops\n");
    asb_run_result_free(rr);

    ASBT_EQ_RES(asb_sandbox_write(sb, "/dir/hello.txt", "bytes\0and more", 14, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_read(sb, "dir/hello.txt", data, &err), ASB_OK);
    ASBT_EQ_MEM(data->ptr, data->len, "bytes\0and more", 14);
    asb_buf_free(data);
    ASBT_EQ_RES(asb_sandbox_exists(sb, "dir/hello.txt", &ex, &err), ASB_OK);
    ASBT_EQ_INT(ex, 1);
    ASBT_EQ_RES(asb_sandbox_exists(sb, "dir/nope.txt", &ex, &err), ASB_OK);
    ASBT_EQ_INT(ex, 0);
    ASBT_EQ_RES(asb_sandbox_read(sb, "dir/nope.txt", data, &err), ASB_ERR_NOT_FOUND);
    asb_buf_free(data);
    /* traversal never leaves the client */
    ASBT_EQ_RES(asb_sandbox_write(sb, "../etc/passwd", "x", 1, &err), ASB_ERR_INVALID_ARGUMENT);

    ASBT_CHECK(claim_exists(c, "default", claim));
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK); /* twice is fine */
    ASBT_CHECK(!asb_sandbox_is_active(sb));
    ASBT_EQ_RES(asb_sandbox_run(sb, "true", 0, rr, &err), ASB_ERR_CLOSED);
    asb_run_result_free(rr);
    ASBT_CHECK(!claim_exists(c, "default", claim));
}

MADE_TEST(missing_template_fails_fast_and_leaves_no_claim) {
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    asb_sandbox *sb = NULL;
    int64_t t0 = asb__now_ms();
    asb_kube_list_opts lo;
    asb_buf *out = &m->buf;
    asb_kube_resource res = {"extensions.agents.x-k8s.io", "v1alpha1", "sandboxclaims"};
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(asb_client_create_sandbox(c, "no-such-template", NULL, &sb, &err),
                ASB_ERR_TEMPLATE_NOT_FOUND);
    /* before the default 180 s ready timeout: the missing template ended
       the create, not the deadline (an order; a loaded machine is slow) */
    ASBT_CHECK(asb__now_ms() - t0 < 180000);
    ASBT_CONTAINS(err.message, "TemplateNotFound");
    ASBT_CHECK(sb == NULL);
    /* no claim of ours is left */
    memset(&lo, 0, sizeof lo);
    lo.label_selector = "agents.x-k8s.io/created-by=agentsandbox.h";
    ASBT_EQ_RES(asb_kube_list(c->kube, &res, "default", &lo, out, &err), ASB_OK);
    ASBT_CHECK(strstr(out->ptr, "no-such-template") == NULL);
}

static int make_template(asb_client *c, const char *name, const char *extra, int probe_port);
static void drop_template(asb_client *c, const char *name);
static const char *target(const char *name, asb_create_opts *o);

/* The controller judges a claim by the templates and pools it has seen,
   and one made a moment ago may not be among them yet: the claim is then
   TemplateNotFound (WarmPoolNotFound), which the client rightly reports
   at once (and deletes the claim). A test's template exists: create
   again until the controller has seen it. */
static asb_result create_on_new_template(asb_client *c, const char *tpl, const asb_create_opts *o,
                                         asb_sandbox **sb, asb_error *err) {
    asb_result r = ASB_ERR_TEMPLATE_NOT_FOUND;
    int i;
    for (i = 0; i < 60; i++) {
        r = asb_client_create_sandbox(c, tpl, o, sb, err);
        if (r != ASB_ERR_TEMPLATE_NOT_FOUND && r != ASB_ERR_WARMPOOL_NOT_FOUND) break;
        asb__sleep_ms(500);
    }
    return r;
}

/* A claim whose pod is never Ready (its probe looks at a port nothing
   serves): the outcome cannot hinge on how fast a busy machine makes a
   sandbox Ready (with a 1 ms timeout on the stock template, one that was
   Ready at the first look was rightly returned). */
MADE_TEST(a_ready_timeout_deletes_the_claim) {
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    asb_sandbox *sb = NULL;
    asb_create_opts o;
    const char *tpl;
    char claim[64];
    ASBT_CHECK(c != NULL);
    m->tpl[0] = "asb-unready-rt";
    ASBT_CHECK(make_template(c, "asb-unready-rt", NULL, 8899));
    tpl = target("asb-unready-rt", &o);
    o.ready_timeout_ms = 300;
    ASBT_EQ_RES(create_on_new_template(c, tpl, &o, &sb, &err), ASB_ERR_TIMEOUT);
    ASBT_CHECK(sb == NULL);
    ASBT_CONTAINS(err.message, "not ready within 300 ms");
    ASBT_CHECK(sscanf(err.message, "sandbox claim %63s", claim) == 1);
    ASBT_CHECK(!claim_exists(c, "default", claim));
}

MADE_TEST(bad_labels_and_ttl_fail_before_any_api_call) {
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    asb_sandbox *sb = NULL;
    asb_create_opts o;
    asb_label bad[1];
    ASBT_CHECK(c != NULL);
    memset(&o, 0, sizeof o);
    bad[0].key = "bad key";
    bad[0].value = "v";
    o.labels = bad;
    o.label_count = 1;
    ASBT_EQ_RES(create_sb(c, &o, &sb, &err),
                ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "bad key");
    memset(&o, 0, sizeof o);
    o.shutdown_after_seconds = -1;
    ASBT_EQ_RES(create_sb(c, &o, &sb, &err),
                ASB_ERR_INVALID_ARGUMENT);
    o.shutdown_after_seconds = INT64_MAX;
    ASBT_EQ_RES(create_sb(c, &o, &sb, &err),
                ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "overflows");
}

/* The attacker of R3 (issue 12): another local user (nobody, when the
   tests run as root) that watches /proc for `kubectl port-forward`, reads
   a local port from its argv ("N:8080", as the client wrote it before),
   binds that port first and serves whatever connects with a run answer of
   its choosing. It reports on `rep`: "READY", "SEEN <pid>" per
   port-forward it found, "BOUND <port>", "CONN <request line>". */
static void tunnel_attacker(int rep) {
    int lfd[16], nl = 0, seen[64], ns = 0;
    char line[600];
    pid_t parent = getppid();
    if (getuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(3);
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* after setuid, which clears it */
#endif
    if (write(rep, "READY\n", 6) != 6) _exit(3);
    for (;;) {
        if (getppid() != parent) _exit(0); /* a test that failed early */
        DIR *d = opendir("/proc");
        struct dirent *e;
        int i;
        while (d && (e = readdir(d)) != NULL) {
            char path[64], argv[4096];
            int pid, fd, k, known = 0;
            ssize_t n;
            if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
            pid = atoi(e->d_name);
            for (k = 0; k < ns; k++) known |= seen[k] == pid;
            if (known) continue;
            snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
            fd = open(path, O_RDONLY);
            if (fd < 0) continue;
            n = read(fd, argv, sizeof argv - 1);
            close(fd);
            if (n <= 0) continue;
            argv[n] = '\0';
            {
                const char *a = argv;
                int pf = 0;
                for (a = argv; a < argv + n; a += strlen(a) + 1) pf |= strcmp(a, "port-forward") == 0;
                if (!pf) continue;
                if (ns < 64) seen[ns++] = pid;
                if (write(rep, line, (size_t)snprintf(line, sizeof line, "SEEN %d\n", pid)) < 0)
                    _exit(3);
                for (a = argv; a < argv + n; a += strlen(a) + 1) {
                    int port = 0, remote = 0, used = 0, s1;
                    struct sockaddr_in sa;
                    if (sscanf(a, "%d:%d%n", &port, &remote, &used) != 2 || a[used] ||
                        port <= 0 || nl >= 16)
                        continue;
                    s1 = socket(AF_INET, SOCK_STREAM, 0);
                    memset(&sa, 0, sizeof sa);
                    sa.sin_family = AF_INET;
                    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                    sa.sin_port = htons((uint16_t)port);
                    if (s1 >= 0 && bind(s1, (struct sockaddr *)&sa, sizeof sa) == 0 &&
                        listen(s1, 16) == 0) {
                        lfd[nl++] = s1;
                        if (write(rep, line,
                                  (size_t)snprintf(line, sizeof line, "BOUND %d\n", port)) < 0)
                            _exit(3);
                    } else if (s1 >= 0) {
                        close(s1);
                    }
                }
            }
        }
        if (d) closedir(d);
        for (i = 0; i < nl; i++) {
            struct pollfd p;
            int cfd;
            p.fd = lfd[i];
            p.events = POLLIN;
            if (poll(&p, 1, 0) != 1 || (cfd = accept(lfd[i], NULL, NULL)) < 0) continue;
            {
                static const char body[] = "{\"stdout\":\"pwned\\n\",\"stderr\":\"\",\"exit_code\":0}";
                char req[4096], *nlp;
                ssize_t n = read(cfd, req, sizeof req - 1);
                req[n > 0 ? n : 0] = '\0';
                nlp = strpbrk(req, "\r\n");
                if (nlp) *nlp = '\0';
                if (write(rep, line, (size_t)snprintf(line, sizeof line, "CONN %.500s\n", req)) <
                    0)
                    _exit(3);
                n = snprintf(req, sizeof req,
                             "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
                             (int)sizeof body - 1, body);
                if (write(cfd, req, (size_t)n) < 0) {}
                close(cfd);
            }
        }
        asb__sleep_ms(1);
    }
}

/* Is 127.0.0.1:port a listening socket held by process pid? (its inode
   from /proc/net/tcp, then pid's descriptors) */
static int listener_of(int pid, int port) {
    FILE *f = fopen("/proc/net/tcp", "r");
    char l[512], want[32], fdir[64];
    unsigned long inode = 0;
    DIR *d;
    struct dirent *e;
    int found = 0;
    snprintf(want, sizeof want, "0100007F:%04X", port);
    while (f && fgets(l, sizeof l, f)) {
        char local[64], remote[64], st[8];
        unsigned long ino;
        if (sscanf(l, " %*d: %63s %63s %7s %*s %*s %*s %*s %*s %lu", local, remote, st, &ino) ==
                4 &&
            strcmp(local, want) == 0 && strcmp(st, "0A") == 0)
            inode = ino;
    }
    if (f) fclose(f);
    if (!inode) return 0;
    snprintf(fdir, sizeof fdir, "/proc/%d/fd", pid);
    d = opendir(fdir);
    while (d && (e = readdir(d)) != NULL && !found) {
        char p[300], target[128], sock[64];
        ssize_t n;
        snprintf(p, sizeof p, "%s/%s", fdir, e->d_name);
        n = readlink(p, target, sizeof target - 1);
        if (n <= 0) continue;
        target[n] = '\0';
        snprintf(sock, sizeof sock, "socket:[%lu]", inode);
        found = strcmp(target, sock) == 0;
    }
    if (d) closedir(d);
    return found;
}

/* R3 of issue 12: another local user cannot take over the tunnel. The
   client used to pick the port, write it into kubectl's argv (readable by
   every user in /proc/PID/cmdline) and call the tunnel ready when anything
   accepted on it: the attacker above bound it while kubectl was still
   making its API calls, got the router token and the command, and the run
   returned its "pwned". Now kubectl binds a port of its choosing and says
   which: the attacker sees the kubectl but no port, binds nothing, gets
   nothing, and the run's answer comes through the real kubectl, whose own
   listening socket the tunnel port is. */
MADE_TEST(another_local_user_cannot_take_over_the_tunnel) {
    asb_client_desc d;
    asb_client *c;
    asb_sandbox *sb = NULL;
    asb_error err;
    int rep[2], seen = 0, bound = 0, conns = 0, kpid;
    pid_t att;
    char buf[8192];
    size_t got = 0;
    ASBT_CHECK(pipe(rep) == 0);
    m->fd[0] = rep[0];
    m->fd[1] = rep[1];
    att = fork();
    if (att == 0) {
        close(rep[0]);
        tunnel_attacker(rep[1]);
        _exit(0);
    }
    if (att > 0) m->child[0] = att;
    close_fd(&m->fd[1]);
    {
        ssize_t n = read(rep[0], buf, 6);
        ASBT_CHECK(n == 6 && memcmp(buf, "READY\n", 6) == 0);
    }
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = kubeconfig;
    d.kube.http.retry.backoff_ms = 100;
    d.router_token = "router-token-the-attacker-wants";
    ASBT_EQ_RES(asb_client_create(&d, &m->c[0], &err), ASB_OK);
    c = m->c[0];
    if (create_sb(c, NULL, &sb, &err) != ASB_OK)
        fprintf(stderr, "    create: %s\n", err.message);
    ASBT_CHECK(sb != NULL);
    ASBT_CHECK(echo_ok(sb, "through the real tunnel", 30000));
    kpid = kubectl_of(c->tunnel.pid);
    ASBT_CHECK(kpid > 0);
    ASBT_CHECK(listener_of(kpid, c->tunnel.local[0])); /* kubectl's own socket */
    asb__sleep_ms(200); /* the attacker has had its look */
    kill(att, SIGKILL);
    waitpid(att, NULL, 0);
    m->child[0] = 0;
    for (;;) {
        ssize_t n = read(rep[0], buf + got, sizeof buf - 1 - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    close_fd(&m->fd[0]);
    buf[got] = '\0';
    {
        char *l;
        for (l = buf; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
            seen += strncmp(l, "SEEN ", 5) == 0;
            bound += strncmp(l, "BOUND ", 6) == 0;
            conns += strncmp(l, "CONN ", 5) == 0;
        }
    }
    if (bound || conns) fprintf(stderr, "    the attacker reports:\n%s", buf);
    ASBT_CHECK(seen >= 1); /* it watched, and saw our kubectl */
    ASBT_EQ_INT(bound, 0);
    ASBT_EQ_INT(conns, 0);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
}

MADE_TEST(killed_kubectl_is_replaced_on_the_next_call) {
    asb_error err;
    asb_client_desc d;
    asb_client *c;
    asb_sandbox *sb = NULL;
    pid_t first, second;
    memset(&d, 0, sizeof d);
    d.mode = client_mode;
    d.kube.kubeconfig.path = kubeconfig;
    d.tracer.enable = 1;
    d.tracer.otlp = -1;
    asbt_log_open(&m->log, &d.log, ASB_LOG_DEBUG);
    m->log_open = 1;
    ASBT_EQ_RES(asb_client_create(&d, &m->c[0], &err), ASB_OK);
    c = m->c[0];
    ASBT_EQ_RES(create_sb(c, NULL, &sb, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_run(sb, "true", 0, &m->rr, &err), ASB_OK);
    asb_run_result_free(&m->rr);
    first = c->tunnel.pid; /* the supervisor; kubectl runs under it */
    ASBT_CHECK(first > 0 && kubectl_of(first) > 0);
    ASBT_EQ_INT((int)tunnel_starts(c), 1);
    kill(kubectl_of(first), SIGKILL); /* kubectl alone: its supervisor follows */
    asb__sleep_ms(200);
    ASBT_CHECK(echo_ok(sb, "again", 0));
    ASBT_CHECK(c->tunnel.pid > 0 && c->tunnel.pid != first);
    /* the new kubectl's start is timed in the discovery histogram too */
    ASBT_EQ_INT((int)tunnel_starts(c), 2);
    /* and the death was told, once, as a warning naming the old kubectl:
       found reaped ("exited (signal 9)", or the supervisor's status) or,
       before its supervisor was reaped, by the refused connection */
    ASBT_EQ_INT(asbt_log_count(&m->log, "2 tunnel.exited: kubectl port-forward (pid "), 1);
    ASBT_EQ_INT(asbt_log_count(&m->log, ") exited (") +
                    asbt_log_count(&m->log, ") refused or dropped a new connection on its "),
                1);
    ASBT_EQ_INT(asbt_log_count(&m->log, "1 tunnel.start: "), 2);
    second = c->tunnel.pid;
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    free_client(&m->c[0]);
    /* the old kubectl was reaped and the new one stopped: neither is left
       as a child (by pid: the idle case's child may be running beside) */
    ASBT_CHECK(waitpid(first, NULL, WNOHANG) == -1 && errno == ECHILD);
    ASBT_CHECK(waitpid(second, NULL, WNOHANG) == -1 && errno == ECHILD);
}

/* A program that dies without asb_client_free does not leave its kubectl
   behind (Linux: the parent-death signal). */
MADE_TEST(kubectl_dies_with_a_program_that_never_freed_its_client) {
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    asb_sandbox *sb = NULL;
    int ready[2], i, gone = 0;
    pid_t child, kubectl = 0;
    char b;
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(create_sb(c, NULL, &sb, &err), ASB_OK);
    ASBT_CHECK(pipe(ready) == 0);
    m->fd[0] = ready[0];
    m->fd[1] = ready[1];
    child = fork();
    if (child == 0) {
        /* a second program: attach, run (the tunnel starts), then hang */
        asb_client *c2 = new_client(&err);
        asb_sandbox *s2 = NULL;
        asb_run_result rr;
        if (c2 && asb_client_get_sandbox(c2, asb_sandbox_claim_name(sb), NULL, 0, &s2, &err) ==
                      ASB_OK &&
            asb_sandbox_run(s2, "true", 0, &rr, &err) == ASB_OK) {
            char pid[32];
            int n = snprintf(pid, sizeof pid, "%d\n", (int)c2->tunnel.pid);
            if (write(ready[1], pid, (size_t)n) < 0) _exit(3);
            for (;;) pause();
        }
        _exit(2);
    }
    if (child > 0) m->child[0] = child;
    close_fd(&m->fd[1]);
    {
        char line[32];
        size_t n = 0;
        while (n < sizeof line - 1 && read(ready[0], &b, 1) == 1 && b != '\n') line[n++] = b;
        line[n] = '\0';
        kubectl = (pid_t)atoi(line);
    }
    close_fd(&m->fd[0]);
    kubectl = kubectl > 0 ? kubectl_of(kubectl) : 0; /* the supervisor's kubectl */
    ASBT_CHECK(kubectl > 0);
    kill(child, SIGKILL); /* no atexit, no asb_client_free */
    waitpid(child, NULL, 0);
    m->child[0] = 0;
    for (i = 0; kubectl > 0 && i < 60 && !gone; i++) {
        char path[64], st[512];
        FILE *f;
        snprintf(path, sizeof path, "/proc/%d/stat", (int)kubectl);
        f = fopen(path, "r");
        if (!f) {
            gone = 1;
        } else {
            char *rp;
            if (fgets(st, sizeof st, f) && (rp = strrchr(st, ')')) != NULL && rp[2] == 'Z')
                gone = 1; /* exited, waiting for init to reap it */
            fclose(f);
        }
        if (!gone) asb__sleep_ms(50);
    }
    if (!gone && kubectl > 0) kill(kubectl, SIGKILL); /* before the check, which leaves */
    ASBT_CHECK(gone);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
}

MADE_TEST(no_kubectl_says_so_and_suggests_direct_mode) {
    asb_error err;
    asb_client_desc d;
    asb_client *c;
    asb_sandbox *sb = NULL;
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = kubeconfig;
    d.kubectl_path = "/nonexistent/kubectl";
    ASBT_EQ_RES(asb_client_create(&d, &m->c[0], &err), ASB_OK);
    c = m->c[0];
    /* create starts kubectl as soon as the claim exists: without kubectl
       it fails at once, and the claim is not left behind */
    ASBT_EQ_RES(create_sb(c, NULL, &sb, &err),
                ASB_ERR_KUBECTL_MISSING);
    ASBT_CONTAINS(err.message, "ASB_CONNECT_DIRECT");
    ASBT_CHECK(sb == NULL);
}

MADE_TEST(a_second_client_attaches_and_a_stale_handle_is_dropped) {
    asb_error err;
    asb_client *a = m->c[0] = new_client(&err), *b = m->c[1] = new_client(&err);
    asb_sandbox *sa = NULL, *sb = NULL, *again = NULL;
    asb_run_result *rr = &m->rr;
    ASBT_CHECK(a != NULL && b != NULL);
    ASBT_EQ_RES(create_sb(a, NULL, &sa, &err), ASB_OK);
    ASBT_EQ_RES(asb_client_get_sandbox(b, asb_sandbox_claim_name(sa), "default", 0, &sb, &err),
                ASB_OK);
    ASBT_EQ_STR(asb_sandbox_name(sb), asb_sandbox_name(sa));
    ASBT_EQ_RES(asb_client_get_sandbox(b, asb_sandbox_claim_name(sa), NULL, 0, &again, &err),
                ASB_OK);
    ASBT_CHECK(again == sb); /* the live handle, not a second one */
    ASBT_EQ_RES(asb_sandbox_write(sa, "shared.txt", "from a", 6, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_run(sb, "cat shared.txt", 0, rr, &err), ASB_OK);
    ASBT_EQ_STR(rr->out.ptr, "from a");
    asb_run_result_free(rr);
    ASBT_EQ_RES(asb_sandbox_terminate(sa, &err), ASB_OK);
    ASBT_EQ_RES(asb_client_get_sandbox(b, asb_sandbox_claim_name(sa), NULL, 0, &again, &err),
                ASB_ERR_NOT_FOUND);
    ASBT_CHECK(!asb_sandbox_is_active(sb));
    ASBT_EQ_RES(asb_client_get_sandbox(b, "sandbox-claim-00000000", NULL, 0, &again, &err),
                ASB_ERR_NOT_FOUND);
}

MADE_TEST(list_all_list_active_and_delete_all) {
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    asb_sandbox *s1 = NULL, *s2 = NULL, *act[4];
    asb_create_opts o;
    asb_label l[1];
    char val[64], sel[96];
    asb_name_list *names = &m->names;
    ASBT_CHECK(c != NULL);
    snprintf(val, sizeof val, "list-%d", (int)getpid());
    snprintf(sel, sizeof sel, "batch=%s", val);
    memset(&o, 0, sizeof o);
    l[0].key = "batch";
    l[0].value = val;
    o.labels = l;
    o.label_count = 1;
    ASBT_EQ_RES(create_sb(c, &o, &s1, &err), ASB_OK);
    ASBT_EQ_RES(create_sb(c, &o, &s2, &err), ASB_OK);
    ASBT_EQ_INT(asb_client_list_active(c, act, 4), 2);
    ASBT_EQ_RES(asb_client_list_all(c, "default", sel, names, &err), ASB_OK);
    ASBT_EQ_INT(names->count, 2);
    asb_name_list_free(names);
    ASBT_EQ_RES(asb_client_delete_all(c, &err), ASB_OK);
    ASBT_EQ_INT(asb_client_list_active(c, act, 4), 0);
    ASBT_EQ_RES(asb_client_list_all(c, "default", sel, names, &err), ASB_OK);
    ASBT_EQ_INT(names->count, 0);
    asb_name_list_free(names);
    /* gone already: said so (issue 18: the tool reports it) */
    ASBT_EQ_RES(asb_client_delete_sandbox(c, asb_sandbox_claim_name(s1), NULL, &err),
                ASB_ERR_NOT_FOUND);
}

typedef struct gen {
    uint64_t pos, size;
} gen;
static long gen_read(void *ud, char *buf, size_t cap) {
    gen *g = (gen *)ud;
    size_t n = 0;
    while (n < cap && g->pos < g->size) buf[n++] = (char)((g->pos++ * 7) % 251);
    return (long)n;
}
typedef struct check {
    uint64_t pos;
    int bad;
} check;
static asb_result check_write(void *ud, const char *p, size_t n) {
    check *c = (check *)ud;
    size_t i;
    for (i = 0; i < n; i++, c->pos++)
        if ((unsigned char)p[i] != (unsigned char)((c->pos * 7) % 251)) c->bad = 1;
    return ASB_OK;
}

/* Files straight from and to descriptors: a regular file from its
   offset to its end goes up, comes back into another file byte for byte;
   a pipe is refused (its size is unknown) before anything is sent. */
MADE_TEST(files_go_up_from_an_fd_and_come_back_into_one) {
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    asb_sandbox *sb = NULL;
    int pfd[2];
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(create_sb(c, NULL, &sb, &err), ASB_OK);
    ASBT_CHECK(fd_round_trip_ok(sb, "fd/five.bin"));
    ASBT_CHECK(pipe(pfd) == 0);
    m->fd[0] = pfd[0];
    m->fd[1] = pfd[1];
    ASBT_EQ_RES(asb_sandbox_write_from_fd(sb, "fd/pipe.bin", pfd[0], &err),
                ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "not a regular file");
    close_fd(&m->fd[0]);
    close_fd(&m->fd[1]);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
}

MADE_TEST(a_64_mib_file_streams_both_ways_in_flat_memory) {
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    asb_sandbox *sb = NULL;
    gen g;
    check k;
    struct rusage r0, r1;
    asb_file_list *fl = &m->files;
    size_t i;
    int found = 0;
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(create_sb(c, NULL, &sb, &err), ASB_OK);
    getrusage(RUSAGE_SELF, &r0);
    g.pos = 0;
    g.size = 64u << 20;
    if (asb_sandbox_write_stream(sb, "big/data.bin", gen_read, &g, g.size, &err) != ASB_OK)
        fprintf(stderr, "    %s\n", err.message);
    ASBT_EQ_INT(g.pos, g.size);
    memset(&k, 0, sizeof k);
    ASBT_EQ_RES(asb_sandbox_read_stream(sb, "big/data.bin", check_write, &k, &err), ASB_OK);
    getrusage(RUSAGE_SELF, &r1);
    ASBT_EQ_INT(k.pos, 64u << 20);
    ASBT_EQ_INT(k.bad, 0);
    ASBT_CHECK(r1.ru_maxrss - r0.ru_maxrss < 16 * 1024); /* KiB: far below 64 MiB */
    ASBT_EQ_RES(asb_sandbox_list(sb, "big", fl, &err), ASB_OK);
    for (i = 0; i < fl->count; i++)
        if (strcmp(fl->entries[i].name, "data.bin") == 0) {
            found = 1;
            ASBT_EQ_INT(fl->entries[i].size, 64u << 20);
            ASBT_EQ_INT(fl->entries[i].is_dir, 0);
            ASBT_CHECK(fl->entries[i].mod_time > 1.7e9);
        }
    ASBT_CHECK(found);
    asb_file_list_free(fl);
    /* a buffered read over the cap (max_read_bytes, here 1 MiB) is an
       error, not a cut file */
    {
        asb_buf *b = &m->buf;
        c->max_read = (size_t)1 << 20;
        ASBT_EQ_RES(asb_sandbox_read(sb, "big/data.bin", b, &err), ASB_ERR_TOO_LARGE);
        ASBT_EQ_INT(b->len, 0);
        asb_buf_free(b);
    }
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
}

/* A template without a readiness probe: its pod is Ready before the
   runtime listens. probe_runtime makes create wait for the runtime too
   (through the tunnel), so the first call needs no luck. */
MADE_TEST(probe_runtime_waits_for_the_runtime_of_a_template_without_a_probe) {
    static const char tpl[] =
        "{\"apiVersion\":\"extensions.agents.x-k8s.io/v1alpha1\",\"kind\":\"SandboxTemplate\","
        "\"metadata\":{\"name\":\"asb-no-probe\"},\"spec\":{\"podTemplate\":{\"spec\":{"
        "\"containers\":[{\"name\":\"rt\",\"image\":\"agentsandbox-runtime:local\","
        "\"ports\":[{\"containerPort\":8888}]}],\"restartPolicy\":\"OnFailure\"}}}}";
    static const asb_kube_resource res = {"extensions.agents.x-k8s.io", "v1alpha1",
                                          "sandboxtemplates"};
    asb_error err;
    asb_client_desc d;
    asb_client *c;
    asb_sandbox *sb = NULL;
    asb_create_opts o;
    asbt_log *ls = &m->log;
    memset(&d, 0, sizeof d);
    d.mode = client_mode;
    d.kube.kubeconfig.path = kubeconfig;
    asbt_log_open(ls, &d.log, ASB_LOG_DEBUG);
    m->log_open = 1;
    ASBT_EQ_RES(asb_client_create(&d, &m->c[0], &err), ASB_OK);
    c = m->c[0];
    asb_kube_delete(c->kube, &res, "default", "asb-no-probe", NULL);
    made_obj(m, &res, "default", "asb-no-probe");
    ASBT_EQ_RES(asb_kube_create(c->kube, &res, "default", tpl, strlen(tpl), NULL, &err), ASB_OK);
    memset(&o, 0, sizeof o);
    o.probe_runtime = 1;
    ASBT_EQ_RES(asb_client_create_sandbox(c, "asb-no-probe", &o, &sb, &err), ASB_OK);
    /* the probe ran before create returned, and answered */
    ASBT_CHECK(ls->text.ptr && strstr(ls->text.ptr, "0 sandbox.call: GET /: 200") != NULL &&
               strstr(ls->text.ptr, "0 sandbox.call: GET /: 200") <
                   strstr(ls->text.ptr, "1 sandbox.create: claim"));
    ASBT_CHECK(echo_ok(sb, "up", 0));
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    ASBT_EQ_RES(asb_kube_delete(c->kube, &res, "default", "asb-no-probe", &err), ASB_OK);
    made_forget(m);
}

MADE_TEST(status_pod_name_hash_and_ip_come_from_the_sandbox) {
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    asb_sandbox *sb = NULL;
    asb_sandbox_state st = (asb_sandbox_state)0;
    char msg[200], ip[ASB_IP_SIZE];
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(create_sb(c, NULL, &sb, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_status(sb, &st, msg, sizeof msg, &err), ASB_OK);
    ASBT_EQ_INT(st, ASB_SANDBOX_READY);
    ASBT_CHECK(asb_sandbox_pod_name(sb)[0] != '\0');
    ASBT_EQ_INT(strlen(asb_sandbox_name_hash(sb)), 8);
    ASBT_EQ_RES(asb_sandbox_pod_ip(sb, ip, &err), ASB_OK);
    ASBT_CHECK(strncmp(ip, "127.1.", 6) == 0); /* the cluster's loopback pod range */
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    /* the Sandbox goes with its claim (garbage collection): not found soon */
    {
        int i;
        for (i = 0; i < 100; i++) {
            /* status reads the cluster, so it works on a terminated handle */
            ASBT_EQ_RES(asb_sandbox_status(sb, &st, msg, sizeof msg, &err), ASB_OK);
            if (st == ASB_SANDBOX_NOT_FOUND) break;
            asb__sleep_ms(100);
        }
        ASBT_EQ_INT(st, ASB_SANDBOX_NOT_FOUND);
    }
}

MADE_TEST(in_cluster_mode_talks_to_the_pod_ip_without_the_router) {
    asb_error err;
    asb_client_desc d;
    asb_client *c;
    asb_sandbox *sb = NULL;
    asbt_log *ls = &m->log;
    int i;
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = kubeconfig;
    d.mode = ASB_CONNECT_IN_CLUSTER;
    asbt_log_open(ls, &d.log, ASB_LOG_DEBUG);
    m->log_open = 1;
    ASBT_EQ_RES(asb_client_create(&d, &m->c[0], &err), ASB_OK);
    c = m->c[0];
    ASBT_EQ_RES(create_sb(c, NULL, &sb, &err), ASB_OK);
    for (i = 0; i < 5; i++) {
        ASBT_CHECK(echo_ok(sb, "direct", 0));
    }
    ASBT_EQ_INT(c->tunnel.pid, 0); /* no kubectl was needed */
    /* the pod IP was looked up once for five calls, as the reference does */
    ASBT_EQ_INT(asbt_log_count(ls, "sandbox.pod_ip:"), 1);
    /* a pod that moved: the cached address refuses (a loopback address of
       the pod range that nothing listens on), the call looks the IP up
       again and goes through */
    snprintf(sb->ip, sizeof sb->ip, "127.1.%d.254", atoi(sb->ip + 6));
    ASBT_CHECK(echo_ok(sb, "moved", 0));
    ASBT_EQ_INT(asbt_log_count(ls, "sandbox.pod_ip:"), 2);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
}

/* In-cluster with an account that may not read Sandboxes: the pod IP
   lookup is refused (403), said once in the log, and every call goes to
   the sandbox's Service name, <sandbox>.default.svc.cluster.local, which
   the controller made (the template says `service: true`) and the local
   cluster's DNS answers. Runs in a child with a private mount namespace
   whose /etc/resolv.conf names only that DNS (as the cluster's daemons
   have), so the name lookup never leaves loopback. Set up by
   tests/kube/dns-fallback-setup.sh. */
static int dns_fallback_child(const char *state) {
    asb_client *c = NULL;
    asb_sandbox *sb = NULL;
    asb_run_result rr;
    asb_error err;
    asbt_log ls;
    int i, rc = 1;
    if (enter_pod_env(state) != 0) return 1;
    c = dns_account_client(state, ASB_RUNTIME_LEGACY, &ls);
    if (!c) goto out;
    if (asb_client_create_sandbox(c, "asb-service-template", NULL, &sb, &err) != ASB_OK) {
        fprintf(stderr, "    create: %s\n", err.message);
        goto out;
    }
    if (!pod_ip_refused_ok(sb)) goto out;
    for (i = 0; i < 3; i++) {
        if (asb_sandbox_run(sb, "echo by name", 0, &rr, &err) != ASB_OK) {
            fprintf(stderr, "    run %d: %s\n", i, err.message);
            goto out;
        }
        if (!rr.out.ptr || strcmp(rr.out.ptr, "by name\n") != 0) {
            fprintf(stderr, "    run %d answered \"%s\"\n", i, rr.out.ptr ? rr.out.ptr : "");
            asb_run_result_free(&rr);
            goto out;
        }
        asb_run_result_free(&rr);
    }
    if (!service_name_logged_once_ok(&ls)) goto out;
    /* a template without `service: true`: no such name; the error says why
       the name was used */
    if (!terminated_ok(sb)) goto out;
    sb = NULL;
    if (create_sb(c, NULL, &sb, &err) != ASB_OK) {
        fprintf(stderr, "    create without a service: %s\n", err.message);
        goto out;
    }
    if (asb_sandbox_run(sb, "true", 0, &rr, &err) != ASB_ERR_DNS ||
        !strstr(err.message, "svc.cluster.local") || !strstr(err.message, "service: true")) {
        fprintf(stderr, "    run without a service: %s\n", err.message);
        asb_run_result_free(&rr);
        goto out;
    }
    asb_run_result_free(&rr);
    rc = 0;
out:
    if (!terminated_ok(sb)) rc = 1;
    asb_client_free(c);
    asbt_log_close(&ls);
    return rc;
}

MADE_TEST(in_cluster_mode_uses_the_service_name_when_the_pod_ip_is_refused) {
    char state[1100], logpath[1200], line[512], name[200];
    pid_t pid;
    int st = 0, answered = 0;
    FILE *f;
    snprintf(state, sizeof state, "%s/..", cluster_dir());
    snprintf(logpath, sizeof logpath, "%s/serviceaccount-dns/token", state);
    if (access(logpath, R_OK) != 0)
        fprintf(stderr, "    %s is missing (tests/kube/dns-fallback-setup.sh)\n", logpath);
    ASBT_CHECK(access(logpath, R_OK) == 0);
    fflush(NULL);
    pid = fork();
    if (pid > 0) m->child[0] = pid;
    ASBT_CHECK(pid >= 0);
    if (pid == 0) _exit(dns_fallback_child(state));
    ASBT_CHECK(waitpid(pid, &st, 0) == pid);
    m->child[0] = 0;
    ASBT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* the name went through the cluster DNS, which answered a pod IP */
    snprintf(logpath, sizeof logpath, "%s/logs/podrunner.log", state);
    f = fopen(logpath, "r");
    ASBT_CHECK(f != NULL);
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%*s podrunner: dns: A %199s -> 127.", name) == 1 &&
            strstr(name, ".default.svc.cluster.local") && strncmp(name, "sandbox-claim-", 14) == 0)
            answered++;
    fclose(f);
    ASBT_CHECK(answered >= 1);
}

/* Which agent-sandbox release runs: the claim shapes differ. */
static int is_v05(void) {
    const char *v = getenv("ASB_AGENT_SANDBOX");
    return v && strncmp(v, "v0.5", 4) == 0;
}

MADE_TEST(warm_pool_claims_match_the_clusters_api_version) {
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    asb_sandbox *sb = NULL;
    asb_create_opts o;
    ASBT_CHECK(c != NULL);
    memset(&o, 0, sizeof o);
    o.warm_pool = "python-sandbox-warmpool";
    if (!is_v05()) {
        /* v0.4.x: v1alpha1 only, so a warm-pool claim is refused clearly
           before anything is created */
        ASBT_EQ_RES(asb_client_create_sandbox(c, NULL, &o, &sb, &err), ASB_ERR_INVALID_ARGUMENT);
        ASBT_CONTAINS(err.message, "need v1beta1");
        return;
    }
    if (asb_client_create_sandbox(c, NULL, &o, &sb, &err) != ASB_OK)
        fprintf(stderr, "    %s\n", err.message);
    ASBT_CHECK(sb != NULL);
    ASBT_EQ_STR(c->api_version, "v1beta1");
    /* the pool's sandbox is adopted: its name is not the claim's */
    ASBT_CHECK(strcmp(asb_sandbox_name(sb), asb_sandbox_claim_name(sb)) != 0);
    ASBT_CHECK(echo_ok(sb, "from the pool", 0));
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    /* a template claim on v1beta1 is refused with the way out */
    ASBT_EQ_RES(create_sb(c, NULL, &sb, &err),
                ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "warm pool");
}

MADE_TEST(close_connection_keeps_the_claim_and_options_reach_the_router) {
    asb_error err;
    asb_client_desc d;
    asb_client *c;
    asb_sandbox *sb = NULL, *again = NULL;
    asb_http_header extra[1];
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = kubeconfig;
    d.send_pod_ip = 1;
    d.router_token = "router-secret";
    extra[0].name = "X-Team";
    extra[0].value = "c-sdk";
    d.extra_headers = extra;
    d.extra_header_count = 1;
    ASBT_EQ_RES(asb_client_create(&d, &m->c[0], &err), ASB_OK);
    c = m->c[0];
    ASBT_EQ_RES(create_sb(c, NULL, &sb, &err), ASB_OK);
    /* with the pod IP header, the router goes straight to the pod */
    ASBT_CHECK(echo_ok(sb, "via pod ip", 0));
    asb_sandbox_close_connection(sb);
    asb_sandbox_close_connection(sb); /* idempotent */
    ASBT_CHECK(!asb_sandbox_is_active(sb));
    ASBT_EQ_RES(asb_sandbox_run(sb, "true", 0, &m->rr, &err), ASB_ERR_CLOSED);
    asb_run_result_free(&m->rr);
    ASBT_CHECK(claim_exists(c, "default", asb_sandbox_claim_name(sb)));
    ASBT_EQ_RES(asb_client_get_sandbox(c, asb_sandbox_claim_name(sb), NULL, 0, &again, &err),
                ASB_OK);
    ASBT_CHECK(again == sb && asb_sandbox_is_active(sb));
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
}

typedef struct gw_waiter {
    asb_sandbox *sb;
    asb_result r;
    int64_t t_end;
} gw_waiter;

static void *gw_wait_run(void *arg) {
    gw_waiter *w = (gw_waiter *)arg;
    asb_run_result rr;
    asb_error err;
    w->r = asb_sandbox_run(w->sb, "true", 0, &rr, &err);
    w->t_end = asb__now_ms();
    asb_run_result_free(&rr);
    return NULL;
}

MADE_TEST(gateway_mode_skips_bad_addresses_and_reaches_the_router) {
    asb_error err;
    asb_client_desc d;
    asb_client *c;
    asb_sandbox *sb = NULL;
    const char *port = getenv("ASB_GATEWAY_PORT");
    if (!port) {
        fprintf(stderr, "    ASB_GATEWAY_PORT is not set (tests/kube/gateway-setup.sh)\n");
        ASBT_CHECK(port != NULL);
    }
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = kubeconfig;
    d.mode = ASB_CONNECT_GATEWAY;
    d.gateway_name = "asb-gw";
    d.gateway_port = atoi(port);
    d.gateway_ready_timeout_ms = 20000;
    ASBT_EQ_RES(asb_client_create(&d, &m->c[0], &err), ASB_OK);
    c = m->c[0];
    ASBT_EQ_RES(create_sb(c, NULL, &sb, &err), ASB_OK);
    ASBT_CHECK(echo_ok(sb, "through the gateway", 0));
    ASBT_CONTAINS(c->gw_base, "http://127.0.0.1:"); /* evil.com/admin, 2130706433 skipped */
    ASBT_EQ_INT(c->tunnel.pid, 0);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    free_client(&m->c[0]);
    /* a Gateway that never gets an address: create's check that the
       router places the sandbox meets no address and leaves that to the
       first call, which times out and says so */
    d.gateway_name = "no-such-gateway";
    d.gateway_ready_timeout_ms = 1500;
    ASBT_EQ_RES(asb_client_create(&d, &m->c[0], &err), ASB_OK);
    c = m->c[0];
    sb = NULL;
    ASBT_EQ_RES(create_sb(c, NULL, &sb, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_run(sb, "true", 0, &m->rr, &err), ASB_ERR_TIMEOUT);
    asb_run_result_free(&m->rr);
    ASBT_CONTAINS(err.message, "no valid address");
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    free_client(&m->c[0]);
    /* while one thread waits for that address, the client serves the
       others: the wait holds the connection's lock, not the registry's */
    d.gateway_ready_timeout_ms = 4000;
    ASBT_EQ_RES(asb_client_create(&d, &m->c[0], &err), ASB_OK);
    c = m->c[0];
    {
        /* the waiter's record outlives the body: a failed check below
           leaves the thread to made_free's join */
        gw_waiter *w = (gw_waiter *)made_alloc(m, sizeof *w);
        asb_sandbox *other = NULL;
        int64_t t_done;
        ASBT_EQ_RES(create_sb(c, NULL, &w->sb, &err),
                    ASB_OK);
        /* made first: a create through a router uses the connection too */
        ASBT_EQ_RES(create_sb(c, NULL, &other, &err),
                    ASB_OK);
        ASBT_CHECK(made_thread(m, gw_wait_run, w) == 0);
        asb__sleep_ms(300); /* the waiter is in the Gateway watch by now */
        ASBT_EQ_INT(asb_client_list_active(c, NULL, 0), 2);
        ASBT_EQ_RES(asb_sandbox_terminate(other, &err), ASB_OK);
        t_done = asb__now_ms();
        made_join(m);
        ASBT_EQ_RES(w->r, ASB_ERR_TIMEOUT);
        ASBT_CHECK(t_done < w->t_end); /* all of it happened during the wait */
        ASBT_EQ_RES(asb_sandbox_terminate(w->sb, &err), ASB_OK);
    }
}

/* The log tells the story of a session by stable ids, and never carries a
   token, an argument, an environment value or file contents (S14, S20). */
MADE_TEST(the_log_names_each_step_and_never_a_secret) {
    asb_error err;
    asb_client_desc d;
    asb_client *c;
    asb_sandbox *sb = NULL;
    asb_run_result *rr = &m->rr;
    asb_buf *data = &m->buf;
    asbt_log *ls = &m->log;
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = kubeconfig;
    d.router_token = "router-token-do-not-log";
    asbt_log_open(ls, &d.log, ASB_LOG_DEBUG);
    m->log_open = 1;
    ASBT_EQ_RES(asb_client_create(&d, &m->c[0], &err), ASB_OK);
    c = m->c[0];
    ASBT_EQ_RES(create_sb(c, NULL, &sb, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_run(sb, "/bin/echo arg-do-not-log", 0, rr, &err), ASB_OK);
    ASBT_EQ_STR(rr->out.ptr, "arg-do-not-log\n");
    asb_run_result_free(rr);
    /* the runtime runs no shell: the assignment is the program it fails to
       start; the log still names only the executable after it */
    ASBT_EQ_RES(asb_sandbox_run(sb, "API_KEY=env-do-not-log /usr/bin/env", 0, rr, &err), ASB_OK);
    asb_run_result_free(rr);
    ASBT_EQ_RES(asb_sandbox_write(sb, "notes.txt", "content-do-not-log", 18, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_read(sb, "notes.txt", data, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_read(sb, "missing.txt", data, &err), ASB_ERR_NOT_FOUND);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    free_client(&m->c[0]);
    ASBT_CHECK(ls->text.ptr != NULL);
    if (!ls->text.ptr) return;
    if (getenv("ASB_SHOW_LOG")) fprintf(stderr, "%s", ls->text.ptr);
    ASBT_CONTAINS(ls->text.ptr, "1 tunnel.start: kubectl port-forward svc/sandbox-router-svc");
    ASBT_CONTAINS(ls->text.ptr, "1 sandbox.create: claim default/");
    ASBT_CONTAINS(ls->text.ptr, "0 sandbox.run: echo: exit code 0, 15 bytes out");
    ASBT_CONTAINS(ls->text.ptr, "0 sandbox.run: env: exit code 1");
    ASBT_CONTAINS(ls->text.ptr, "0 sandbox.call: POST /upload: 200 in");
    ASBT_CONTAINS(ls->text.ptr, "0 sandbox.call: GET /download/notes.txt: 200 in");
    ASBT_CONTAINS(ls->text.ptr, "3 sandbox.call: GET http://127.0.0.1:");
    ASBT_CONTAINS(ls->text.ptr, "1 sandbox.delete: claim default/");
    ASBT_CHECK(strstr(ls->text.ptr, "do-not-log") == NULL);
}

/* A fault proxy in front of the real router, for the one fault the real
   router will not produce on demand: a 503. It listens on 127.0.0.1 only,
   answers 503 to the next `fail` requests it sees, and forwards every
   other one unchanged to the router on 127.0.0.1, adding only
   "Connection: close" so each request has a connection of its own and the
   proxy sees (and records) every one without keeping HTTP state. */
#define FP_MAX 64
struct fault_proxy { /* typedef'd above, for made */
    int listen_fd, port, upstream_port, stop;
    pthread_t thread;
    pthread_mutex_t lock;
    int fail;             /* answer 503 to this many more requests */
    int status;           /* ... or this status, when not 0 */
    int seen;             /* requests recorded since the last fp_arm */
    char line[FP_MAX][96]; /* "GET /download/notes%2Fa.txt HTTP/1.1" */
    char rid[FP_MAX][40];  /* its X-Request-ID */
    int failed[FP_MAX];    /* 1: answered 503 */
};

static const char fp_503_body[] = "{\"message\":\"no healthy upstream (fault proxy)\"}";

static int fp_wait(int fd, short ev) {
    struct pollfd pfd;
    pfd.fd = fd;
    pfd.events = ev;
    pfd.revents = 0;
    return poll(&pfd, 1, 10000) == 1;
}

static int fp_write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return 0;
        p += w;
        n -= (size_t)w;
    }
    return 1;
}

/* The header's value from a head ending in CRLF CRLF, or "". */
static void fp_header(const char *head, const char *name, char *out, size_t cap) {
    size_t nl = strlen(name);
    const char *p = strstr(head, "\r\n");
    out[0] = '\0';
    while (p && p[2] != '\r') {
        p += 2;
        if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1, *e = strstr(v, "\r\n");
            size_t n;
            while (*v == ' ') v++;
            n = (size_t)(e - v) < cap - 1 ? (size_t)(e - v) : cap - 1;
            memcpy(out, v, n);
            out[n] = '\0';
            return;
        }
        p = strstr(p, "\r\n");
    }
}

/* Copies bytes both ways until the router has answered and closed. */
static void fp_pump(int cfd, int ufd) {
    char buf[16384];
    int client_open = 1;
    for (;;) {
        struct pollfd pf[2];
        nfds_t n = 0;
        pf[n].fd = ufd;
        pf[n].events = POLLIN;
        pf[n++].revents = 0;
        if (client_open) {
            pf[n].fd = cfd;
            pf[n].events = POLLIN;
            pf[n++].revents = 0;
        }
        if (poll(pf, n, 30000) <= 0) return;
        if (pf[0].revents) {
            ssize_t r = recv(ufd, buf, sizeof buf, 0);
            if (r <= 0 || !fp_write_all(cfd, buf, (size_t)r)) return;
        }
        if (client_open && pf[1].revents) {
            ssize_t r = recv(cfd, buf, sizeof buf, 0);
            if (r <= 0) {
                client_open = 0;
                shutdown(ufd, SHUT_WR);
            } else if (!fp_write_all(ufd, buf, (size_t)r)) {
                return;
            }
        }
    }
}

static void fp_serve(fault_proxy *p, int cfd) {
    char head[16384], clen[32];
    size_t len = 0, head_len;
    const char *end = NULL, *eol;
    int fail, slot = -1;
    while (!end) {
        ssize_t r;
        if (len + 1 >= sizeof head || !fp_wait(cfd, POLLIN)) return;
        r = recv(cfd, head + len, sizeof head - 1 - len, 0);
        if (r <= 0) return;
        len += (size_t)r;
        head[len] = '\0';
        end = strstr(head, "\r\n\r\n");
    }
    head_len = (size_t)(end - head) + 4;
    eol = strstr(head, "\r\n");
    pthread_mutex_lock(&p->lock);
    fail = p->fail > 0;
    if (fail) p->fail--;
    if (p->seen < FP_MAX) {
        slot = p->seen++;
        snprintf(p->line[slot], sizeof p->line[slot], "%.*s", (int)(eol - head), head);
        fp_header(head, "X-Request-ID", p->rid[slot], sizeof p->rid[slot]);
        p->failed[slot] = fail;
    }
    pthread_mutex_unlock(&p->lock);
    if (fail) {
        /* read the whole body first: closing on unread bytes would reset
           the connection before the client reads the answer */
        unsigned long long left;
        char resp[256];
        int n;
        fp_header(head, "Content-Length", clen, sizeof clen);
        left = strtoull(clen, NULL, 10);
        left = left > len - head_len ? left - (len - head_len) : 0;
        while (left) {
            ssize_t r;
            if (!fp_wait(cfd, POLLIN)) return;
            r = recv(cfd, head, left < sizeof head ? (size_t)left : sizeof head, 0);
            if (r <= 0) return;
            left -= (unsigned long long)r;
        }
        n = snprintf(resp, sizeof resp,
                     "HTTP/1.1 %d Unavailable\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     p->status ? p->status : 503, sizeof fp_503_body - 1, fp_503_body);
        fp_write_all(cfd, resp, (size_t)n);
    } else {
        struct sockaddr_in up;
        int ufd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        memset(&up, 0, sizeof up);
        up.sin_family = AF_INET;
        up.sin_port = htons((uint16_t)p->upstream_port);
        up.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (ufd >= 0 && connect(ufd, (struct sockaddr *)&up, sizeof up) == 0 &&
            fp_write_all(ufd, head, (size_t)(eol - head)) &&
            fp_write_all(ufd, "\r\nConnection: close", 19) &&
            fp_write_all(ufd, eol, len - (size_t)(eol - head)))
            fp_pump(cfd, ufd);
        if (ufd >= 0) close(ufd);
    }
}

static void *fp_run(void *arg) {
    fault_proxy *p = (fault_proxy *)arg;
    for (;;) {
        struct pollfd pfd;
        int stop, cfd;
        pthread_mutex_lock(&p->lock);
        stop = p->stop;
        pthread_mutex_unlock(&p->lock);
        if (stop) return NULL;
        pfd.fd = p->listen_fd;
        pfd.events = POLLIN;
        pfd.revents = 0;
        if (poll(&pfd, 1, 100) != 1) continue;
        cfd = accept(p->listen_fd, NULL, NULL);
        if (cfd < 0) continue;
        fp_serve(p, cfd); /* one at a time: the test makes one call at a time */
        close(cfd);
    }
}

static int fp_start(fault_proxy *p, int upstream_port) {
    struct sockaddr_in a;
    socklen_t alen = sizeof a;
    memset(p, 0, sizeof *p);
    p->upstream_port = upstream_port;
    pthread_mutex_init(&p->lock, NULL);
    p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK); /* never 0.0.0.0 */
    if (p->listen_fd < 0 || bind(p->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(p->listen_fd, 16) != 0 ||
        getsockname(p->listen_fd, (struct sockaddr *)&a, &alen) != 0)
        return 0;
    p->port = ntohs(a.sin_port);
    return pthread_create(&p->thread, NULL, fp_run, p) == 0;
}

static void fp_stop(fault_proxy *p) {
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    close(p->listen_fd);
    pthread_mutex_destroy(&p->lock);
}

/* The next n requests get a 503; the record starts afresh. */
static void fp_arm(fault_proxy *p, int n) {
    pthread_mutex_lock(&p->lock);
    p->fail = n;
    p->status = 0;
    p->seen = 0;
    pthread_mutex_unlock(&p->lock);
}

/* As fp_arm, answering `status` instead of 503. */
static void fp_arm_status(fault_proxy *p, int n, int status) {
    fp_arm(p, n);
    pthread_mutex_lock(&p->lock);
    p->status = status;
    pthread_mutex_unlock(&p->lock);
}

/* How many recorded requests start with `prefix`, and whether they all
   carried one X-Request-ID (*same_rid, 1 when there was none to compare). */
static int fp_count(fault_proxy *p, const char *prefix, int *same_rid) {
    int i, n = 0;
    const char *first = NULL;
    pthread_mutex_lock(&p->lock);
    if (same_rid) *same_rid = 1;
    for (i = 0; i < p->seen; i++) {
        if (strncmp(p->line[i], prefix, strlen(prefix)) != 0) continue;
        n++;
        if (!first) first = p->rid[i];
        if (same_rid && (!p->rid[i][0] || strcmp(first, p->rid[i]) != 0)) *same_rid = 0;
    }
    pthread_mutex_unlock(&p->lock);
    return n;
}

static int fp_fail_left(fault_proxy *p) {
    int n;
    pthread_mutex_lock(&p->lock);
    n = p->fail;
    pthread_mutex_unlock(&p->lock);
    return n;
}

/* The checks of router_503s_are_retried_for_gets_and_returned_once_for_posts,
   apart so that a failed check still reaches the cleanup. */
static void router_503_checks(made *m, fault_proxy *p, asb_sandbox *sb) {
    asb_error err;
    asb_buf *data = &m->buf;
    asb_run_result rr;
    asb_file_list *fl = &m->files;
    asb_result r;
    int ex = 0, same = 0;

    ASBT_EQ_RES(asb_sandbox_write(sb, "notes/a.txt", "kept\n", 5, &err), ASB_OK);

    /* GETs: three 503s, then the router's answer on the fourth attempt,
       all four with the call's one X-Request-ID */
    fp_arm(p, 3);
    if (asb_sandbox_read(sb, "notes/a.txt", data, &err) != ASB_OK)
        fprintf(stderr, "    read: %s\n", err.message);
    ASBT_EQ_MEM(data->ptr, data->len, "kept\n", 5);
    asb_buf_free(data);
    ASBT_EQ_INT(fp_count(p, "GET /download/notes%2Fa.txt ", &same), 4);
    ASBT_CHECK(same);
    ASBT_EQ_INT(fp_fail_left(p), 0);

    fp_arm(p, 2);
    ASBT_EQ_RES(asb_sandbox_exists(sb, "notes/a.txt", &ex, &err), ASB_OK);
    ASBT_EQ_INT(ex, 1);
    ASBT_EQ_INT(fp_count(p, "GET /exists/", NULL), 3);

    /* four 503s: the fifth and last attempt of the policy gets through */
    fp_arm(p, 4);
    ASBT_EQ_RES(asb_sandbox_list(sb, "notes", fl, &err), ASB_OK);
    ASBT_EQ_INT(fl->count, 1);
    ASBT_EQ_STR(fl->entries[0].name, "a.txt");
    asb_file_list_free(fl);
    ASBT_EQ_INT(fp_count(p, "GET /list/notes ", NULL), 5);

    /* more 503s than attempts: the last 503 is the answer, body kept */
    fp_arm(p, 9);
    ASBT_EQ_RES(asb_sandbox_read(sb, "notes/a.txt", data, &err), ASB_ERR_HTTP_STATUS);
    asb_buf_free(data);
    ASBT_EQ_INT(err.http_status, 503);
    ASBT_EQ_INT(fp_count(p, "GET /download/", NULL), 5);
    ASBT_EQ_INT(fp_fail_left(p), 4);

    /* POST /execute: the 503 came back after the command reached the
       other side, so it is not sent again */
    fp_arm(p, 3);
    r = asb_sandbox_run(sb, "echo once", 0, &rr, &err);
    asb_run_result_free(&rr);
    ASBT_EQ_RES(r, ASB_ERR_HTTP_STATUS);
    ASBT_EQ_INT(err.http_status, 503);
    ASBT_EQ_MEM(err.body, err.body_len, fp_503_body, sizeof fp_503_body - 1);
    ASBT_EQ_INT(fp_count(p, "POST /execute ", NULL), 1);
    ASBT_EQ_INT(fp_count(p, "", NULL), 1);
    ASBT_EQ_INT(fp_fail_left(p), 2);

    /* POST /upload likewise */
    fp_arm(p, 1);
    ASBT_EQ_RES(asb_sandbox_write(sb, "notes/b.txt", "lost\n", 5, &err), ASB_ERR_HTTP_STATUS);
    ASBT_EQ_INT(err.http_status, 503);
    ASBT_EQ_INT(fp_count(p, "POST /upload ", NULL), 1);
    ASBT_EQ_INT(fp_count(p, "", NULL), 1);

    /* with the fault gone the same handle works through the proxy */
    fp_arm(p, 0);
    ASBT_CHECK(echo_ok(sb, "once", 0));
    ASBT_EQ_RES(asb_sandbox_exists(sb, "notes/b.txt", &ex, &err), ASB_OK);
    ASBT_EQ_INT(ex, 0); /* the refused upload never reached the runtime */
    ASBT_EQ_INT(fp_count(p, "POST /execute ", NULL), 1);
}

MADE_TEST(router_503s_are_retried_for_gets_and_returned_once_for_posts) {
    asb_error err;
    asb_client_desc d;
    asb_sandbox *sb = NULL;
    fault_proxy *p = (fault_proxy *)made_alloc(m, sizeof *p);
    char url[64];
    const char *port = getenv("ASB_ROUTER_PORT");
    int started;
    if (!port) {
        fprintf(stderr, "    ASB_ROUTER_PORT is not set (the router's port in cluster.json)\n");
        ASBT_CHECK(port != NULL);
    }
    started = fp_start(p, atoi(port));
    if (started) m->fp = p;
    ASBT_CHECK(started);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", p->port);
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = kubeconfig;
    d.kube.http.retry.backoff_ms = 20; /* the sandbox calls' policy too */
    d.mode = ASB_CONNECT_DIRECT;
    d.direct_url = url;
    if (asb_client_create(&d, &m->c[0], &err) == ASB_OK &&
        create_sb(m->c[0], NULL, &sb, &err) == ASB_OK) {
        router_503_checks(m, p, sb);
        if (asb_sandbox_terminate(sb, &err) != ASB_OK) asbt_failed_now = 1;
    } else {
        fprintf(stderr, "    %s\n", err.message);
        asbt_failed_now = 1;
    }
}

/* The Go sandbox-router places a request from a pod cache its own pod
   watch fills, which can learn of the Ready pod after the claim's watch
   did; a request it cannot place is a 502 (seen in make test under load:
   the soak's first command of a fresh sandbox). So create, through any
   router, sends GET / until the router places it: the first command, a
   POST never sent twice, does not meet that 502. The fault proxy plays
   the lagging cache: 502 to the first three requests after Ready. */
MADE_TEST(create_waits_until_the_router_can_place_the_new_sandbox) {
    asb_error err;
    asb_client_desc d;
    asb_sandbox *sb = NULL;
    asb_run_result rr;
    fault_proxy *p = (fault_proxy *)made_alloc(m, sizeof *p);
    char url[64];
    const char *port = getenv("ASB_ROUTER_PORT");
    int ok = 0, gets, posts, all, left, started;
    if (!port) {
        fprintf(stderr, "    ASB_ROUTER_PORT is not set (the router's port in cluster.json)\n");
        ASBT_CHECK(port != NULL);
    }
    started = fp_start(p, atoi(port));
    if (started) m->fp = p;
    ASBT_CHECK(started);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", p->port);
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = kubeconfig;
    d.mode = ASB_CONNECT_DIRECT;
    d.direct_url = url;
    fp_arm_status(p, 3, 502);
    if (asb_client_create(&d, &m->c[0], &err) == ASB_OK &&
        create_sb(m->c[0], NULL, &sb, &err) == ASB_OK) {
        memset(&rr, 0, sizeof rr);
        if (asb_sandbox_run(sb, "echo placed", 0, &rr, &err) != ASB_OK)
            fprintf(stderr, "    run: %s\n", err.message);
        else
            ok = rr.exit_code == 0 && rr.out.len == 7 && memcmp(rr.out.ptr, "placed\n", 7) == 0;
        asb_run_result_free(&rr);
        if (asb_sandbox_terminate(sb, &err) != ASB_OK) ok = 0;
    } else {
        fprintf(stderr, "    %s\n", err.message);
    }
    free_client(&m->c[0]);
    gets = fp_count(p, "GET / ", NULL);
    posts = fp_count(p, "POST /execute ", NULL);
    all = fp_count(p, "", NULL);
    left = fp_fail_left(p);
    fp_stop(p);
    m->fp = NULL;
    ASBT_CHECK(ok);
    /* four GET / (three 502s waited out), then the command, sent once */
    ASBT_EQ_INT(gets, 4);
    ASBT_EQ_INT(posts, 1);
    ASBT_EQ_INT(all, 5);
    ASBT_EQ_INT(strncmp(p->line[4], "POST /execute ", 14), 0);
    ASBT_EQ_INT(left, 0);
}

static int count_fds(void) {
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    if (d) closedir(d);
    return n;
}

/* kubectl processes that are our children. The counting heap is static:
   after a failed check made_free frees the client, which allocates
   through it, after the body has returned. */
MADE_TEST(many_cycles_leave_no_claim_process_fd_or_memory_behind) {
    asb_error err;
    static asbt_heap heap;
    asb_allocator alloc = asbt_heap_allocator(&heap);
    asb_client_desc d;
    asb_client *c;
    long live0 = 0;
    int i, cycles = getenv("ASB_SOAK_CYCLES") ? atoi(getenv("ASB_SOAK_CYCLES")) : 200;
    int fds0 = -1, kubectls = 0;
    asb_name_list *names = &m->names;
    char sel[96];
    asb_create_opts o;
    asb_label l[1];
    char val[64];
    /* every allocation of the client through a counting allocator: the
       live count after warm-up must not grow (ASan's quarantine makes RSS
       useless as a leak signal here) */
    memset(&d, 0, sizeof d);
    d.mode = client_mode;
    d.kube.kubeconfig.path = kubeconfig;
    d.kube.kubeconfig.allocator = &alloc;
    d.runtime = test_runtime();
    ASBT_EQ_RES(asb_client_create(&d, &m->c[0], &err), ASB_OK);
    c = m->c[0];
    snprintf(val, sizeof val, "soak-%d", (int)getpid());
    snprintf(sel, sizeof sel, "soak=%s", val);
    memset(&o, 0, sizeof o);
    l[0].key = "soak";
    l[0].value = val;
    o.labels = l;
    o.label_count = 1;
    for (i = 0; i < cycles; i++) {
        asb_sandbox *sb = NULL;
        asb_run_result *rr = &m->rr;
        if (create_sb(c, &o, &sb, &err) != ASB_OK)
            fprintf(stderr, "    cycle %d: %s\n", i, err.message);
        ASBT_CHECK(sb != NULL);
        {
            asb_result rres = asb_sandbox_run(sb, "true", 0, rr, &err);
            if (rres != ASB_OK)
                fprintf(stderr, "    cycle %d: run: %s (HTTP %d)\n", i, err.message,
                        err.http_status);
            ASBT_EQ_RES(rres, ASB_OK);
        }
        ASBT_EQ_INT(rr->exit_code, 0);
        asb_run_result_free(rr);
        ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
        if (i == 9) { /* after warm-up: the pool, tunnel and arenas exist */
            fds0 = count_fds();
            live0 = heap.live;
        }
        if (kubectls < count_kubectl_children()) kubectls = count_kubectl_children();
    }
    /* one tunnel for every sandbox (one pod tunnel at a time on sandboxd);
       none at all through the kubectl-free tunnel */
    ASBT_EQ_INT(kubectls, client_mode == ASB_CONNECT_NATIVE_TUNNEL ? 0 : 1);
    if (cycles > 10) {
        ASBT_EQ_INT(count_fds(), fds0);
        /* the handles list keeps one small record per terminated sandbox
           until the client is freed; nothing else may accumulate */
        ASBT_CHECK(heap.live - live0 <= cycles - 10);
    }
    ASBT_EQ_RES(asb_client_list_all(c, "default", sel, names, &err), ASB_OK);
    ASBT_EQ_INT(names->count, 0);
    asb_name_list_free(names);
    free_client(&m->c[0]);
    ASBT_EQ_INT(heap.live, 0);
    ASBT_EQ_INT(count_kubectl_children(), 0);
}

MADE_TEST(a_hundred_live_sandboxes_share_one_kubectl) {
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    int i, n = getenv("ASB_MANY") ? atoi(getenv("ASB_MANY")) : 100;
    asb_sandbox **all = (asb_sandbox **)made_alloc(m, (size_t)n * sizeof *all);
    ASBT_CHECK(c != NULL && all != NULL);
    for (i = 0; i < n; i++) {
        if (create_sb(c, NULL, &all[i], &err) != ASB_OK)
            fprintf(stderr, "    sandbox %d: %s\n", i, err.message);
        ASBT_CHECK(all[i] != NULL);
    }
    for (i = 0; i < n; i++) {
        asb_run_result *rr = &m->rr;
        char want[32];
        char cmd[48];
        asb_result r;
        snprintf(cmd, sizeof cmd, "echo %d", i);
        snprintf(want, sizeof want, "%d\n", i);
        r = asb_sandbox_run(all[i], cmd, 0, rr, &err);
        if (r != ASB_OK) fprintf(stderr, "    sandbox %d: %s\n", i, err.message);
        ASBT_EQ_RES(r, ASB_OK);
        ASBT_EQ_STR(rr->out.ptr, want); /* each call reached its own sandbox */
        asb_run_result_free(rr);
    }
    ASBT_EQ_INT(count_kubectl_children(), 1);
    ASBT_EQ_INT(asb_client_list_active(c, NULL, 0), (size_t)n);
    ASBT_EQ_RES(asb_client_delete_all(c, &err), ASB_OK);
    ASBT_EQ_INT(asb_client_list_active(c, NULL, 0), 0);
}

/* The sandbox-router closes a connection idle for 120 s (Go's IdleTimeout,
   not configurable). kwok's port-forward does not pass that close on
   (unlike a kubelet's, which ends the stream): kubectl keeps our side of
   the tunnel open and a request sent on it is swallowed, never reaching
   the router, and a POST /execute then waited for its whole deadline.
   Seen under load as an echo with no answer for 60 s in the soak and the
   hundred-sandbox cases, when a pooled connection sat idle past 120 s. The
   client does not reuse a connection idle longer than max_idle_ms (30 s
   by default), so the second command here is answered. */
/* The 125 s wait is spent in a child process forked before the first case
   (idle_case_start, from main), so it overlaps the cases before it instead
   of adding two minutes to the tier; this case then collects the child's
   verdict. The child's claim carries IDLE_LABEL, which sweep_claims leaves
   alone, and its kubectl is not ours (kubectl_children counts only the
   grandchildren of this process), so no other case sees either. */
#define IDLE_LABEL "asbt-idle-case"
static pid_t idle_child = -1;

static void idle_case_body(made *m) {
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    asb_sandbox *sb = NULL;
    asb_create_opts o;
    asb_label l[1];
    ASBT_CHECK(c != NULL);
    memset(&o, 0, sizeof o);
    l[0].key = IDLE_LABEL;
    l[0].value = "1";
    o.labels = l;
    o.label_count = 1;
    if (create_sb(c, &o, &sb, &err) != ASB_OK)
        fprintf(stderr, "    idle case: create: %s\n", err.message);
    ASBT_CHECK(sb != NULL);
    ASBT_CHECK(echo_ok(sb, "before the idle timeout", 30000));
    fprintf(stderr, "    idle case: idle for 125 s, past the router's 120 s idle timeout\n");
    asb__sleep_ms(125000);
    ASBT_CHECK(echo_ok(sb, "after the idle timeout", 30000));
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
}

static void idle_case_start(void) {
    fflush(NULL);
    idle_child = fork();
    if (idle_child == 0) {
        made_run(idle_case_body);
        exit(asbt_failed_now ? 1 : 0); /* exit, not _exit: LeakSanitizer checks the child */
    }
    if (idle_child < 0) perror("fork for the idle case");
}

ASBT_TEST(a_command_after_the_router_closed_an_idle_tunnel_connection_is_answered) {
    int st = 0;
    ASBT_CHECK(idle_child > 0);
    ASBT_CHECK(waitpid(idle_child, &st, 0) == idle_child);
    idle_child = -1;
    ASBT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* its failure is on stderr above */
}

/* One client, several threads, each driving its own sandbox: creates,
   calls and terminates interleave on the shared registry, tunnel (the
   first calls race to start it), Kubernetes client and connection pool. */
typedef struct thread_job {
    asb_client *c;
    int id;
    int ok;
    char why[300];
} thread_job;

static void *drive_one_sandbox(void *arg) {
    thread_job *j = (thread_job *)arg;
    asb_sandbox *sb = NULL;
    asb_error err;
    asb_run_result rr;
    asb_buf back;
    char cmd[64], want[64], path[64], data[64];
    int i, ex = 0;
    asb_buf_init(&back, NULL);
    snprintf(j->why, sizeof j->why, "create");
    if (create_sb(j->c, NULL, &sb, &err) != ASB_OK)
        goto fail;
    for (i = 0; i < 10; i++) {
        snprintf(cmd, sizeof cmd, "echo thread-%d-%d", j->id, i);
        snprintf(want, sizeof want, "thread-%d-%d\n", j->id, i);
        snprintf(j->why, sizeof j->why, "run %d", i);
        if (asb_sandbox_run(sb, cmd, 0, &rr, &err) != ASB_OK) goto fail;
        if (!rr.out.ptr || strcmp(rr.out.ptr, want) != 0) {
            snprintf(j->why, sizeof j->why, "run %d answered \"%s\"", i,
                     rr.out.ptr ? rr.out.ptr : "");
            asb_run_result_free(&rr);
            goto done;
        }
        asb_run_result_free(&rr);
    }
    snprintf(path, sizeof path, "t%d/data.txt", j->id);
    snprintf(data, sizeof data, "written by thread %d", j->id);
    snprintf(j->why, sizeof j->why, "write");
    if (asb_sandbox_write(sb, path, data, strlen(data), &err) != ASB_OK) goto fail;
    snprintf(j->why, sizeof j->why, "read");
    if (asb_sandbox_read(sb, path, &back, &err) != ASB_OK) goto fail;
    snprintf(j->why, sizeof j->why, "exists");
    if (asb_sandbox_exists(sb, path, &ex, &err) != ASB_OK || !ex) goto fail;
    if (back.len != strlen(data) || memcmp(back.ptr, data, back.len) != 0) {
        snprintf(j->why, sizeof j->why, "read back something else");
        goto done;
    }
    snprintf(j->why, sizeof j->why, "terminate");
    if (asb_sandbox_terminate(sb, &err) != ASB_OK) goto fail;
    sb = NULL;
    j->ok = 1;
    goto done;
fail:
    {
        size_t l = strlen(j->why);
        snprintf(j->why + l, sizeof j->why - l, ": %.250s", err.message);
    }
done:
    if (sb) asb_sandbox_terminate(sb, NULL);
    asb_buf_free(&back);
    return NULL;
}

MADE_TEST(one_client_serves_threads_that_each_drive_their_own_sandbox) {
    enum { N = 4 };
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    /* the jobs outlive the body: a failed check leaves the threads to
       made_free's join */
    thread_job *jobs = (thread_job *)made_alloc(m, N * sizeof *jobs);
    int i;
    ASBT_CHECK(c != NULL);
    for (i = 0; i < N; i++) {
        jobs[i].c = c;
        jobs[i].id = i;
        ASBT_CHECK(made_thread(m, drive_one_sandbox, &jobs[i]) == 0);
    }
    for (i = 0; i < N; i++) {
        /* the registry is read while the others work */
        (void)asb_client_list_active(c, NULL, 0);
        pthread_join(m->th[i], NULL);
    }
    m->nth = 0;
    for (i = 0; i < N; i++) {
        if (!jobs[i].ok) fprintf(stderr, "    thread %d: %s\n", i, jobs[i].why);
        ASBT_CHECK(jobs[i].ok);
    }
    /* the racing first calls shared one kubectl; the native tunnel runs none */
    ASBT_EQ_INT(count_kubectl_children(), client_mode == ASB_CONNECT_NATIVE_TUNNEL ? 0 : 1);
    ASBT_EQ_INT(asb_client_list_active(c, NULL, 0), 0);
}

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Thread A of the long-command case: a 45 s command with a 120 s
   deadline, through the real Go router (whose response-header timeout is
   30 s) and kubectl port-forward. */
typedef struct long_job {
    asb_sandbox *sb;
    const char *command;
    asb_result r;
    int exit_code;
    int64_t took;
    char why[300];
} long_job;

static void *run_long(void *arg) {
    long_job *j = (long_job *)arg;
    asb_call_opts o;
    asb_run_result rr;
    asb_error err;
    int64_t t0 = mono_ms();
    memset(&o, 0, sizeof o);
    o.timeout_ms = 120000;
    j->r = asb_sandbox_run_opts(j->sb, j->command, &o, &rr, &err);
    j->took = mono_ms() - t0;
    j->exit_code = rr.exit_code;
    if (j->r != ASB_OK) snprintf(j->why, sizeof j->why, "%s", err.message);
    asb_run_result_free(&rr);
    return NULL;
}

/* File names that need escaping in the multipart filename or the URL
   come back as written, through the router to agentsandbox-runtime. */
static void names_round_trip(made *m, asb_sandbox *sb) {
    static const char *names[] = {
        "quo\"te.txt", "back\\slash.txt", "both\\\"mix.txt", "with space.txt", "100%.txt",
        "%22literal.txt", "\303\274nic\303\270de \342\202\254.txt", "names/in \"sub\" dir/f.txt",
    };
    size_t i;
    asb_error err;
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        asb_buf *back = &m->buf;
        int ex = 0;
        asb_result r = asb_sandbox_write(sb, names[i], names[i], strlen(names[i]), &err);
        if (r != ASB_OK) fprintf(stderr, "    write %s: %s\n", names[i], err.message);
        ASBT_EQ_RES(r, ASB_OK);
        r = asb_sandbox_read(sb, names[i], back, &err);
        if (r != ASB_OK) fprintf(stderr, "    read %s: %s\n", names[i], err.message);
        ASBT_EQ_RES(r, ASB_OK);
        ASBT_EQ_MEM(back->ptr, back->len, names[i], strlen(names[i]));
        asb_buf_free(back);
        ASBT_EQ_RES(asb_sandbox_exists(sb, names[i], &ex, &err), ASB_OK);
        ASBT_EQ_INT(ex, 1);
    }
    {
        /* the list names them as written; "names/" lists the directory */
        asb_file_list *fl = &m->files;
        int found = 0;
        ASBT_EQ_RES(asb_sandbox_list(sb, ".", fl, &err), ASB_OK);
        for (i = 0; i < fl->count; i++)
            found += strcmp(fl->entries[i].name, "quo\"te.txt") == 0 ||
                     strcmp(fl->entries[i].name, "back\\slash.txt") == 0;
        asb_file_list_free(fl);
        ASBT_EQ_INT(found, 2);
        ASBT_EQ_RES(asb_sandbox_list(sb, "names/", fl, &err), ASB_OK);
        ASBT_EQ_INT(fl->count, 1);
        if (fl->count == 1) ASBT_EQ_STR(fl->entries[0].name, "in \"sub\" dir");
        asb_file_list_free(fl);
    }
    {
        /* a trailing '/' names the file, as upstream normalises it */
        asb_buf *back = &m->buf;
        ASBT_EQ_RES(asb_sandbox_write(sb, "trail/", "t", 1, &err), ASB_OK);
        ASBT_EQ_RES(asb_sandbox_read(sb, "trail", back, &err), ASB_OK);
        ASBT_EQ_MEM(back->ptr, back->len, "t", 1);
        asb_buf_free(back);
    }
}

/* Issue 13's end-to-end case, in parallel threads to keep its wall time
   near the longest command's (45 s): through kubectl port-forward and the
   real Go sandbox-router (response-header timeout 30 s), on
   agentsandbox-runtime:
   - A: `sleep 45` with a 120 s deadline succeeds (it used to be a 502 at
     30 s, and the client's own 30 s read timeout cut it too);
   - C, a second client in in-cluster mode (straight to the pod IP, no
     router): `sleep 35` on B's sandbox with the same deadline succeeds
     (the client's 30 s read timeout used to cut it);
   - B meanwhile: file names round-trip; `sleep 30` with a 2 s deadline is
     ASB_ERR_TIMEOUT after >= 2 s, and the handle works on; `sleep 60`
     cancelled from another thread returns ASB_ERR_CANCELLED at once (the
     latency is printed; the bound asserted is loose), and the next call
     on the handle works. */
MADE_TEST(long_commands_meet_their_deadlines_and_cancel_from_another_thread) {
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    asb_sandbox *a = NULL, *b = NULL, *bc = NULL;
    asb_create_opts co;
    asb_client_desc icd;
    asb_client *ic;
    /* the threads' jobs outlive the body: a failed check leaves the
       threads to made_free's join; the body joins them last first */
    long_job *lj = (long_job *)made_alloc(m, sizeof *lj), *ij = (long_job *)made_alloc(m, sizeof *ij);
    int started = 0, istarted = 0;
    ASBT_CHECK(c != NULL);
    memset(&co, 0, sizeof co);
    co.ready_timeout_ms = 120000;
    if (create_sb(c, &co, &a, &err) != ASB_OK ||
        create_sb(c, &co, &b, &err) != ASB_OK)
        fprintf(stderr, "    create: %s\n", err.message);
    ASBT_CHECK(a != NULL && b != NULL);
    lj->sb = a;
    lj->command = "sleep 45";
    ASBT_CHECK(made_thread(m, run_long, lj) == 0);
    started = 1;
    memset(&icd, 0, sizeof icd);
    icd.kube.kubeconfig.path = kubeconfig;
    icd.mode = ASB_CONNECT_IN_CLUSTER;
    icd.runtime = test_runtime();
    ASBT_EQ_RES(asb_client_create(&icd, &m->c[1], &err), ASB_OK);
    ic = m->c[1];
    ASBT_EQ_RES(asb_client_get_sandbox(ic, asb_sandbox_claim_name(b), "default", 0, &bc, &err),
                ASB_OK);
    ij->sb = bc;
    ij->command = "sleep 35";
    /* in-cluster on sandboxd needs a template whose sandboxd listens
       beyond loopback: test_sandboxd_cluster's in_cluster cases */
    if (!getenv("ASB_TEST_POOL")) {
        ASBT_CHECK(made_thread(m, run_long, ij) == 0);
        istarted = 1;
    }
    names_round_trip(m, b);
    {
        asb_call_opts o;
        asb_run_result rr;
        int64_t t0 = mono_ms(), took;
        memset(&o, 0, sizeof o);
        o.timeout_ms = 2000;
        ASBT_EQ_RES(asb_sandbox_run_opts(b, "sleep 30", &o, &rr, &err), ASB_ERR_TIMEOUT);
        took = mono_ms() - t0;
        asb_run_result_free(&rr);
        fprintf(stderr, "    2 s deadline: ASB_ERR_TIMEOUT after %lld ms\n", (long long)took);
        ASBT_CHECK(took >= 2000);
        /* issue 13 says 2-4 s (printed above); asserted: before the command
           (sleep 30) would have ended, an order a loaded machine keeps */
        ASBT_CHECK(took < 30000);
        ASBT_CONTAINS(err.message, "2000 ms deadline");
        ASBT_CONTAINS(err.message, "may still be running");
        ASBT_CHECK(echo_ok(b, "after the timeout", 30000));
    }
    {
        /* command_timeout_ms (1.0.8's command_timeout): sent as
           timeout_seconds, the runtime ends the command and answers; a
           result, with the output so far, not an error. The call's 2 s
           deadline is raised to the limit + 10 s to hear that answer. */
        asb_call_opts o;
        asb_run_result rr;
        memset(&o, 0, sizeof o);
        o.timeout_ms = 2000;
        o.command_timeout_ms = 3000;
        ASBT_EQ_RES(asb_sandbox_run_opts(b, "sh -c 'echo before; sleep 30'", &o, &rr, &err), ASB_OK);
        ASBT_EQ_INT(rr.timed_out, 1);
        ASBT_EQ_INT(rr.exit_code, 124);
        /* the legacy runtime keeps the output so far; sandboxd sends none
           past a call's deadline */
        ASBT_EQ_STR(rr.out.ptr, getenv("ASB_TEST_POOL") ? "" : "before\n");
        ASBT_CONTAINS(rr.err.ptr, "Command timed out after 3 seconds");
        asb_run_result_free(&rr);
        o.command_timeout_ms = 30000;
        ASBT_EQ_RES(asb_sandbox_run_opts(b, "echo within", &o, &rr, &err), ASB_OK);
        ASBT_EQ_INT(rr.timed_out, 0);
        ASBT_EQ_INT(rr.exit_code, 0);
        ASBT_EQ_STR(rr.out.ptr, "within\n");
        asb_run_result_free(&rr);
    }
    {
        asb_call_opts o;
        asb_run_result rr;
        canceller *k = (canceller *)made_alloc(m, sizeof *k);
        asb_result r;
        int64_t latency;
        memset(&o, 0, sizeof o);
        ASBT_EQ_RES(asb_cancel_create(NULL, &m->cancel, &err), ASB_OK);
        k->token = m->cancel;
        k->after_ms = 1500;
        o.timeout_ms = 120000;
        o.cancel = k->token;
        ASBT_CHECK(made_thread(m, cancel_later, k) == 0);
        r = asb_sandbox_run_opts(b, "sleep 60", &o, &rr, &err);
        latency = mono_ms() - k->at / 1000;
        made_join_last(m);
        asb_run_result_free(&rr);
        asb_cancel_free(m->cancel);
        m->cancel = NULL;
        fprintf(stderr, "    cancel from another thread: returned %lld ms after the trigger\n",
                (long long)latency);
        ASBT_EQ_RES(r, ASB_ERR_CANCELLED);
        ASBT_CHECK(latency < 58000); /* before sleep 60 would end: an order (latency printed above) */
        ASBT_CHECK(echo_ok(b, "after the cancel", 30000));
    }
    if (istarted) {
        made_join_last(m);
        if (ij->r != ASB_OK) fprintf(stderr, "    sleep 35 in-cluster: %s\n", ij->why);
        fprintf(stderr, "    sleep 35 in-cluster, 120 s deadline: %s after %lld ms\n",
                asb_result_str(ij->r), (long long)ij->took);
        ASBT_EQ_RES(ij->r, ASB_OK);
        ASBT_CHECK(ij->took >= 35000);
    }
    free_client(&m->c[1]);
    if (started) made_join_last(m);
    if (lj->r != ASB_OK) fprintf(stderr, "    sleep 45: %s\n", lj->why);
    fprintf(stderr, "    sleep 45 with a 120 s deadline: %s after %lld ms\n",
            asb_result_str(lj->r), (long long)lj->took);
    ASBT_EQ_RES(lj->r, ASB_OK);
    ASBT_EQ_INT(lj->exit_code, 0);
    ASBT_CHECK(lj->took >= 45000);
    ASBT_EQ_RES(asb_client_delete_all(c, &err), ASB_OK);
}

MADE_TEST(command_output_over_the_cap_is_too_large_not_cut) {
    asb_error err;
    asb_client_desc d;
    asb_client *c;
    asb_sandbox *sb = NULL;
    asb_run_result *rr = &m->rr;
    memset(&d, 0, sizeof d);
    d.mode = client_mode;
    d.kube.kubeconfig.path = kubeconfig;
    d.runtime = test_runtime();
    d.max_output_bytes = (size_t)1 << 20; /* 1 MiB for the test; 16 MiB by default */
    ASBT_EQ_RES(asb_client_create(&d, &m->c[0], &err), ASB_OK);
    c = m->c[0];
    ASBT_EQ_RES(create_sb(c, NULL, &sb, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_run(sb, "head -c 2000000 /dev/zero", 0, rr, &err), ASB_ERR_TOO_LARGE);
    ASBT_CONTAINS(err.message, "cap");
    ASBT_EQ_INT(rr->out.len, 0);
    asb_run_result_free(rr);
    ASBT_EQ_RES(asb_sandbox_run(sb, "head -c 1000 /dev/zero", 0, rr, &err), ASB_OK);
    ASBT_EQ_INT(rr->out.len, 1000); /* NULs survive the JSON round trip */
    ASBT_CHECK(rr->out.ptr[0] == 0 && rr->out.ptr[999] == 0);
    asb_run_result_free(rr);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
}

/* --- upstream security cases on the real router (tests/SECURITY.md) ----- */

static void add_header(asb_http_header *h, size_t *n, const char *name, const char *value) {
    h[*n].name = name;
    h[*n].value = value;
    (*n)++;
}

/* S19. The sandbox-router (v0.5.6, proxy/headers.go) answers 400 "Invalid
   target IP address." for an X-Sandbox-Pod-IP that does not parse or is
   unspecified, link-local (169.254.169.254: cloud metadata), multicast,
   or loopback without --allow-loopback-pod-ip; it checks the headers first
   in ServeHTTP, before authorizing, resolving or dialling anything, so
   these requests reach no address. 127.0.0.1 is not sent: this cluster's
   router allows loopback (its pods live on 127.1.x.y) and would dial it.
   The request goes through the client's own tunnel and HTTP client, the
   way asb_sandbox_run sends it. */
MADE_TEST(router_refuses_forbidden_pod_ips_with_400_and_the_client_shows_it) {
    static const char *bad[] = {"169.254.169.254", "::ffff:169.254.169.254", "0.0.0.0", "::",
                                "224.0.0.1", "239.255.255.250", "ff02::1", "ff05::2", "fe80::1",
                                "not-an-ip"};
    static const char body[] = "{\"command\":\"echo routed\"}";
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    asb_sandbox *sb = NULL;
    char base[600], url[700], ip[ASB_IP_SIZE];
    size_t i;
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(create_sb(c, NULL, &sb, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_pod_ip(sb, ip, &err), ASB_OK);
    ASBT_EQ_RES(router_base(c, base, sizeof base, &err), ASB_OK); /* kubectl tunnel */
    snprintf(url, sizeof url, "%s/execute", base);
    /* i == 0: the sandbox's real pod IP, so the 400s below come from the
       pod IP alone */
    for (i = 0; i <= sizeof bad / sizeof bad[0]; i++) {
        asb_http_header h[5];
        asb_http_request req;
        asb_http_response *resp = &m->resp;
        size_t nh = 0;
        asb_result r;
        add_header(h, &nh, "X-Sandbox-ID", asb_sandbox_name(sb));
        add_header(h, &nh, "X-Sandbox-Namespace", "default");
        add_header(h, &nh, "X-Sandbox-Port", "8888");
        add_header(h, &nh, "X-Sandbox-Pod-IP", i == 0 ? ip : bad[i - 1]);
        add_header(h, &nh, "Content-Type", "application/json");
        memset(&req, 0, sizeof req);
        req.method = "POST";
        req.url = url;
        req.headers = h;
        req.header_count = nh;
        req.body = body;
        req.body_len = sizeof body - 1;
        r = asb_http_do(c->http, &req, resp, &err);
        if (i == 0) {
            if (r != ASB_OK) fprintf(stderr, "    %s: %s\n", ip, err.message);
            ASBT_EQ_RES(r, ASB_OK);
            ASBT_CONTAINS(resp->body.ptr, "routed");
        } else {
            if (r != ASB_ERR_HTTP_STATUS || err.http_status != 400)
                fprintf(stderr, "    %s: %s (HTTP %d)\n", bad[i - 1], asb_result_str(r),
                        err.http_status);
            ASBT_EQ_RES(r, ASB_ERR_HTTP_STATUS);
            ASBT_EQ_INT(err.http_status, 400);
            ASBT_EQ_INT(resp->status, 400);
            ASBT_CHECK(recorder_has(err.body, err.body_len, "Invalid target IP address"));
            ASBT_CONTAINS(err.message, "400");
        }
        asb_http_response_free(resp);
    }
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
}

/* S20. The bearer token for the router is not forwarded to the sandbox
   (the router deletes Authorization, proxy.go Rewrite), and in-cluster
   mode never sends it. The runtime does not echo headers, so the sandbox
   side here is a recorder on the sandbox's own pod IP at another port
   (server_port): the real router forwards to it as to the runtime. */
MADE_TEST(router_token_reaches_the_router_but_never_the_sandbox) {
    static const char token[] = "s20-cluster-token-7f3b1d";
    static const asb_connection_mode modes[] = {ASB_CONNECT_LOCAL_TUNNEL, ASB_CONNECT_IN_CLUSTER};
    asb_error err;
    asb_client *a = m->c[0] = new_client(&err);
    asb_sandbox *sb = NULL;
    recorder *rec;
    char ip[ASB_IP_SIZE], v[256];
    size_t k;
    int seen = 0;
    ASBT_CHECK(a != NULL);
    ASBT_EQ_RES(create_sb(a, NULL, &sb, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_pod_ip(sb, ip, &err), ASB_OK);
    rec = m->rec = recorder_start(ip);
    ASBT_CHECK(rec != NULL);
    for (k = 0; k < 2; k++) {
        asb_client_desc d;
        asb_client *b;
        asb_sandbox *viab = NULL;
        asb_run_result *rr = &m->rr;
        recorder_request q;
        memset(&d, 0, sizeof d);
        d.kube.kubeconfig.path = kubeconfig;
        d.mode = modes[k];
        d.server_port = rec->port;
        d.router_token = token;
        d.send_pod_ip = 1;
        ASBT_EQ_RES(asb_client_create(&d, &m->c[1], &err), ASB_OK);
        b = m->c[1];
        ASBT_EQ_RES(asb_client_get_sandbox(b, asb_sandbox_claim_name(sb), NULL, 0, &viab, &err),
                    ASB_OK);
        recorder_reply(rec, 200, "{\"stdout\":\"recorded\\n\",\"stderr\":\"\",\"exit_code\":0}");
        if (asb_sandbox_run(viab, "echo hi", 2500, rr, &err) != ASB_OK)
            fprintf(stderr, "    mode %d: %s\n", (int)modes[k], err.message);
        ASBT_EQ_STR(rr->out.ptr, "recorded\n");
        asb_run_result_free(rr);
        ASBT_EQ_INT(recorder_count(rec), seen + 1);
        ASBT_CHECK(recorder_get(rec, seen, &q));
        seen++;
        ASBT_CHECK(strncmp(q.head, "POST /execute HTTP/1.1\r\n", 24) == 0);
        if (recorder_header(q.head, "Authorization", v, sizeof v))
            fprintf(stderr, "    mode %d: the sandbox got Authorization: %s\n", (int)modes[k], v);
        ASBT_CHECK(!recorder_contains_nocase(q.head, strlen(q.head), "authorization"));
        ASBT_CHECK(!recorder_has(q.head, strlen(q.head), token));
        ASBT_CHECK(!recorder_has(q.body, q.body_len, token));
        if (modes[k] == ASB_CONNECT_LOCAL_TUNNEL) {
            /* it came through the router (which adds X-Forwarded-For and
               passes the rest on), with the client's routing headers */
            ASBT_CHECK(recorder_header(q.head, "X-Forwarded-For", v, sizeof v));
            ASBT_CHECK(recorder_header(q.head, "X-Sandbox-Id", v, sizeof v));
            ASBT_EQ_STR(v, asb_sandbox_name(sb));
            ASBT_CHECK(recorder_header(q.head, "X-Sandbox-Timeout", v, sizeof v));
            ASBT_EQ_STR(v, "3");
        } else {
            /* straight to the pod: no router headers either */
            ASBT_CHECK(!recorder_header(q.head, "X-Forwarded-For", v, sizeof v));
            ASBT_CHECK(!recorder_header(q.head, "X-Sandbox-Id", v, sizeof v));
        }
        /* the sandbox side refuses: its status and body come back, the
           token appears in neither the message nor the body */
        recorder_reply(rec, 403, "{\"detail\":\"denied by the sandbox\"}");
        ASBT_EQ_RES(asb_sandbox_run(viab, "echo hi", 0, rr, &err), ASB_ERR_HTTP_STATUS);
        asb_run_result_free(rr);
        seen++;
        ASBT_EQ_INT(err.http_status, 403);
        ASBT_CHECK(recorder_has(err.body, err.body_len, "denied by the sandbox"));
        ASBT_CHECK(strstr(err.message, token) == NULL);
        ASBT_CHECK(!recorder_has(err.body, err.body_len, token));
        free_client(&m->c[1]);
    }
    recorder_stop(rec);
    m->rec = NULL;
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
}

/* S10. An IPv6 address goes into the URL in brackets. A Gateway of our
   own whose status names ::1, with a recorder on [::1] as what stands
   behind it: only the URL the client builds from the address is under
   test (the Gateway API CRD comes from tests/kube/gateway-setup.sh). */
MADE_TEST(gateway_ipv6_address_goes_into_the_url_in_brackets) {
    static const asb_kube_resource gws = {"gateway.networking.k8s.io", "v1", "gateways"};
    static const char gw[] =
        "{\"apiVersion\":\"gateway.networking.k8s.io/v1\",\"kind\":\"Gateway\","
        "\"metadata\":{\"name\":\"asb-gw6\"},\"spec\":{\"gatewayClassName\":\"asb-test\","
        "\"listeners\":[{\"name\":\"http\",\"port\":80,\"protocol\":\"HTTP\"}]}}";
    static const char st[] =
        "{\"status\":{\"addresses\":[{\"type\":\"IPAddress\",\"value\":\"::1\"}]}}";
    asb_error err;
    asb_client *a = m->c[0] = new_client(&err), *b;
    asb_client_desc d;
    asb_sandbox *sb = NULL, *viab = NULL;
    asb_run_result *rr = &m->rr;
    recorder *rec;
    recorder_request q;
    char host[64], want[64];
    ASBT_CHECK(a != NULL);
    if (!getenv("ASB_GATEWAY_PORT")) {
        fprintf(stderr, "    ASB_GATEWAY_PORT is not set (tests/kube/gateway-setup.sh)\n");
        ASBT_CHECK(getenv("ASB_GATEWAY_PORT") != NULL);
    }
    rec = m->rec = recorder_start("::1");
    ASBT_CHECK(rec != NULL);
    recorder_reply(rec, 200, "{\"stdout\":\"via [::1]\\n\",\"stderr\":\"\",\"exit_code\":0}");
    asb_kube_delete(a->kube, &gws, "default", "asb-gw6", NULL);
    made_obj(m, &gws, "default", "asb-gw6");
    ASBT_EQ_RES(asb_kube_create(a->kube, &gws, "default", gw, sizeof gw - 1, NULL, &err), ASB_OK);
    ASBT_EQ_RES(asb_kube_request(a->kube, "PATCH",
                                 "/apis/gateway.networking.k8s.io/v1/namespaces/default/"
                                 "gateways/asb-gw6/status",
                                 "application/merge-patch+json", st, sizeof st - 1, NULL, &err),
                ASB_OK);
    ASBT_EQ_RES(create_sb(a, NULL, &sb, &err), ASB_OK);
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = kubeconfig;
    d.mode = ASB_CONNECT_GATEWAY;
    d.gateway_name = "asb-gw6";
    d.gateway_port = rec->port;
    d.gateway_ready_timeout_ms = 20000;
    ASBT_EQ_RES(asb_client_create(&d, &m->c[1], &err), ASB_OK);
    b = m->c[1];
    ASBT_EQ_RES(asb_client_get_sandbox(b, asb_sandbox_claim_name(sb), NULL, 0, &viab, &err),
                ASB_OK);
    if (asb_sandbox_run(viab, "true", 0, rr, &err) != ASB_OK)
        fprintf(stderr, "    %s\n", err.message);
    ASBT_EQ_STR(rr->out.ptr, "via [::1]\n");
    asb_run_result_free(rr);
    snprintf(want, sizeof want, "http://[::1]:%d", rec->port);
    ASBT_EQ_STR(b->gw_base, want);
    ASBT_CHECK(recorder_get(rec, 0, &q));
    ASBT_CHECK(recorder_header(q.head, "Host", host, sizeof host));
    snprintf(want, sizeof want, "[::1]:%d", rec->port);
    ASBT_EQ_STR(host, want);
    free_client(&m->c[1]);
    recorder_stop(rec);
    m->rec = NULL;
    ASBT_EQ_RES(asb_kube_delete(a->kube, &gws, "default", "asb-gw6", &err), ASB_OK);
    made_forget(m);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
}

/* S13, the selector half: label selectors go into the query encoded, so
   set-based ones with spaces, parentheses and '!' reach the apiserver
   intact (unencoded, the spaces would end the request line). */
MADE_TEST(set_based_label_selectors_with_spaces_reach_the_apiserver_intact) {
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    asb_sandbox *sb = NULL;
    asb_create_opts o;
    asb_label l[1];
    asb_name_list *names = &m->names;
    char val[64], sel[200];
    ASBT_CHECK(c != NULL);
    snprintf(val, sizeof val, "sel-%d", (int)getpid());
    memset(&o, 0, sizeof o);
    l[0].key = "batch";
    l[0].value = val;
    o.labels = l;
    o.label_count = 1;
    ASBT_EQ_RES(create_sb(c, &o, &sb, &err), ASB_OK);
    snprintf(sel, sizeof sel, "batch in (%s, other-batch),!no-such-label,batch notin (x)", val);
    ASBT_EQ_RES(asb_client_list_all(c, "default", sel, names, &err), ASB_OK);
    ASBT_EQ_INT(names->count, 1);
    ASBT_EQ_STR(names->names[0], asb_sandbox_claim_name(sb));
    asb_name_list_free(names);
    snprintf(sel, sizeof sel, "batch in (%s), no-such-label", val); /* must exist: none */
    ASBT_EQ_RES(asb_client_list_all(c, "default", sel, names, &err), ASB_OK);
    ASBT_EQ_INT(names->count, 0);
    asb_name_list_free(names);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
}

/* The local cluster's state directory holds cluster.json; `key` is a
   top-level string in it. */
static int cluster_json_string(const char *key, char *out, size_t cap) {
    char path[1100], buf[8192];
    const char *slash = strrchr(kubeconfig, '/');
    FILE *f;
    size_t n;
    asb_json_doc d;
    int ok;
    /* kubeconfig is <state>/kubeconfig/admin.kubeconfig */
    snprintf(path, sizeof path, "%.*s/../cluster.json", slash ? (int)(slash - kubeconfig) : 0,
             kubeconfig);
    f = fopen(path, "r");
    if (!f) return 0;
    n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (asb_json_doc_parse(&d, buf, n, NULL, NULL) != ASB_OK) return 0;
    ok = asb_json_get_string(&d, asb_json_find(&d, 0, key), out, cap, NULL) == ASB_OK;
    asb_json_doc_free(&d);
    return ok;
}

/* S19, loopback. The cluster's router has to allow loopback pod IPs (its
   pods live on 127.1.x.y), so this starts the same sandbox-router binary
   as deployed by default: loopback refused, no Pod cache and allow-all
   authorization (so it needs no cluster), every listener on 127.0.0.1.
   Only pod IPs it refuses are sent: it checks them before resolving
   anything (without a pod IP it would look up <id>.<ns>.svc.cluster.local,
   so no request here goes without one). */
MADE_TEST(a_router_with_default_flags_refuses_loopback_pod_ips_with_400) {
    static const char *bad[] = {"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1",
                                "169.254.169.254", "::", "ff02::1"};
    static const char body[] = "{\"command\":\"true\"}";
    char bin[1024] = "", a_http[64], a_metrics[64], a_probe[64], url[128];
    asb_http_client_desc hd;
    asb_http_client *http = NULL;
    asb_error err;
    pid_t pid;
    int port = free_port(), up = 0, i, st;
    size_t k;
    if (!cluster_json_string("router_bin", bin, sizeof bin))
        fprintf(stderr, "    no router_bin in the cluster's cluster.json (make cluster-up)\n");
    ASBT_CHECK(bin[0] != '\0' && access(bin, X_OK) == 0);
    snprintf(a_http, sizeof a_http, "--http-bind-address=127.0.0.1:%d", port);
    snprintf(a_metrics, sizeof a_metrics, "--metrics-bind-address=127.0.0.1:%d", free_port());
    snprintf(a_probe, sizeof a_probe, "--health-probe-bind-address=127.0.0.1:%d",
             free_port());
    pid = fork();
    if (pid > 0) m->child[0] = pid;
    ASBT_CHECK(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        const char *argv[] = {bin, a_http, a_metrics, a_probe, "--access-log=false", NULL};
        dup2(devnull, 0);
        dup2(devnull, 1);
        dup2(devnull, 2);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    memset(&hd, 0, sizeof hd);
    hd.retry.max_attempts = 1;
    if (asb_http_client_create(&hd, &http, &err) != ASB_OK) http = NULL;
    m->http = http;
    for (i = 0; http && i < 100 && !up; i++) {
        asb_http_request req;
        asb_http_response resp;
        snprintf(url, sizeof url, "http://127.0.0.1:%d/healthz", port);
        memset(&req, 0, sizeof req);
        req.url = url;
        up = asb_http_do(http, &req, &resp, &err) == ASB_OK;
        asb_http_response_free(&resp);
        if (!up) asb__sleep_ms(100);
    }
    if (!up) fprintf(stderr, "    %s did not answer /healthz on port %d\n", bin, port);
    ASBT_CHECK(up); /* the router stopped and the client freed by made_free */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/execute", port);
    for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        asb_http_header h[5];
        asb_http_request req;
        asb_http_response resp;
        size_t nh = 0;
        asb_result r;
        add_header(h, &nh, "X-Sandbox-ID", "sb-1");
        add_header(h, &nh, "X-Sandbox-Namespace", "default");
        add_header(h, &nh, "X-Sandbox-Port", "8888");
        add_header(h, &nh, "X-Sandbox-Pod-IP", bad[k]);
        add_header(h, &nh, "Content-Type", "application/json");
        memset(&req, 0, sizeof req);
        req.method = "POST";
        req.url = url;
        req.headers = h;
        req.header_count = nh;
        req.body = body;
        req.body_len = sizeof body - 1;
        r = asb_http_do(http, &req, &resp, &err);
        asb_http_response_free(&resp);
        if (r != ASB_ERR_HTTP_STATUS || err.http_status != 400)
            fprintf(stderr, "    %s: %s (HTTP %d)\n", bad[k], asb_result_str(r), err.http_status);
        if (r != ASB_ERR_HTTP_STATUS || err.http_status != 400 ||
            !recorder_has(err.body, err.body_len, "Invalid target IP address"))
            break;
    }
    kill(pid, SIGTERM);
    waitpid(pid, &st, 0);
    m->child[0] = 0;
    ASBT_EQ_INT(k, sizeof bad / sizeof bad[0]); /* every one refused */
}

/* --- an https router: nginx terminates TLS in front of the real router ------
   Certificates come from tests/http/certs.sh (the HTTP peers' own, made
   afresh in a temporary directory); nginx runs in the foreground as one
   process (master_process off), a child of this test that dies with it,
   listening on 127.0.0.1 only:
     port[0]  server.crt (SANs localhost, 127.0.0.1, ::1)
     port[1]  the same, and a client certificate from ca.crt required
     port[2]  server-dnsonly.crt (SAN DNS:localhost only)
   each proxying to the sandbox-router's loopback port. */

struct tls_terminator { /* typedef'd above, for made */
    char dir[64];   /* certs/ and nginx/ under it; removed by tt_stop */
    char certs[96];
    pid_t pid;
    int port[3];
};

/* Runs argv to its end, stdout to /dev/null; 1 when it exited 0. */
static int run_quiet(const char *const *argv) {
    int st;
    pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int tcp_accepts(int port) {
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0) close(fd);
    return ok;
}

static void tt_print_error_log(const tls_terminator *t) {
    char path[160], line[512];
    FILE *f;
    snprintf(path, sizeof path, "%s/nginx/error.log", t->dir);
    f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) fprintf(stderr, "    nginx: %s", line);
    if (f) fclose(f);
}

static void tt_stop(tls_terminator *t) {
    const char *rm[] = {"rm", "-rf", t->dir, NULL};
    int i, st;
    if (t->pid > 0) {
        kill(t->pid, SIGTERM);
        for (i = 0; i < 300 && waitpid(t->pid, &st, WNOHANG) == 0; i++) asb__sleep_ms(10);
        if (i == 300) {
            kill(t->pid, SIGKILL);
            waitpid(t->pid, &st, 0);
        }
        t->pid = 0;
    }
    if (t->dir[0]) run_quiet(rm);
    t->dir[0] = '\0';
}

static int tt_start(tls_terminator *t, int router_port) {
    char conf[256], nd[128], pid_path[160], log_path[160];
    const char *certs_sh = "tests/http/certs.sh";
    int attempt, i;
    memset(t, 0, sizeof *t);
    snprintf(t->dir, sizeof t->dir, "/tmp/asb-tls-XXXXXX");
    if (!mkdtemp(t->dir)) {
        t->dir[0] = '\0';
        return 0;
    }
    snprintf(t->certs, sizeof t->certs, "%s/certs", t->dir);
    {
        const char *argv[] = {certs_sh, t->certs, NULL};
        if (!run_quiet(argv)) {
            fprintf(stderr, "    %s %s failed (run the test from the repository root)\n",
                    certs_sh, t->certs);
            tt_stop(t);
            return 0;
        }
    }
    snprintf(nd, sizeof nd, "%s/nginx", t->dir);
    snprintf(conf, sizeof conf, "%s/nginx.conf", nd);
    snprintf(pid_path, sizeof pid_path, "%s/nginx.pid", nd);
    snprintf(log_path, sizeof log_path, "%s/error.log", nd);
    mkdir(nd, 0700);
    /* free ports are picked before nginx binds them: another process may
       take one in between, so a failed start tries new ones */
    for (attempt = 0; attempt < 5; attempt++) {
        static const char *const cert[3] = {"server", "server", "server-dnsonly"};
        FILE *f = fopen(conf, "w");
        int up = 0;
        if (!f) break;
        for (i = 0; i < 3; i++) t->port[i] = free_port();
        fprintf(f,
                "daemon off;\nmaster_process off;\npid %s;\nerror_log %s warn;\n"
                "events { worker_connections 256; }\nhttp {\n    access_log off;\n"
                "    client_body_temp_path %s/body;\n    proxy_temp_path %s/proxy;\n"
                "    fastcgi_temp_path %s/fastcgi;\n    uwsgi_temp_path %s/uwsgi;\n"
                "    scgi_temp_path %s/scgi;\n    client_max_body_size 0;\n"
                "    proxy_http_version 1.1;\n    proxy_request_buffering off;\n"
                "    proxy_buffering off;\n    proxy_read_timeout 120s;\n"
                "    ssl_protocols TLSv1.2 TLSv1.3;\n",
                pid_path, log_path, nd, nd, nd, nd, nd);
        for (i = 0; i < 3; i++)
            fprintf(f,
                    "    server {\n        listen 127.0.0.1:%d ssl;\n"
                    "        ssl_certificate %s/%s.crt;\n        ssl_certificate_key %s/%s.key;\n"
                    "%s%s%s"
                    "        location / { proxy_pass http://127.0.0.1:%d; }\n    }\n",
                    t->port[i], t->certs, cert[i], t->certs, cert[i],
                    i == 1 ? "        ssl_verify_client on;\n        ssl_client_certificate "
                           : "",
                    i == 1 ? t->certs : "", i == 1 ? "/ca.crt;\n" : "", router_port);
        fprintf(f, "}\n");
        fclose(f);
        t->pid = fork();
        if (t->pid < 0) break;
        if (t->pid == 0) {
            const char *argv[] = {"nginx", "-p", nd, "-e", log_path, "-c", conf, NULL};
            int devnull = open("/dev/null", O_RDWR);
#ifdef __linux__
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* dies with the test, whatever ends it */
#endif
            dup2(devnull, 0);
            dup2(devnull, 1);
            execvp("nginx", (char *const *)argv);
            execv("/usr/sbin/nginx", (char *const *)argv);
            _exit(127);
        }
        for (i = 0; i < 500; i++) {
            int st;
            if (waitpid(t->pid, &st, WNOHANG) == t->pid) {
                t->pid = 0;
                break;
            }
            if (tcp_accepts(t->port[0]) && tcp_accepts(t->port[1]) && tcp_accepts(t->port[2])) {
                up = 1;
                break;
            }
            asb__sleep_ms(10);
        }
        if (up) return 1;
        if (t->pid > 0) break; /* running but not listening in 5 s: give up */
    }
    tt_print_error_log(t);
    tt_stop(t);
    return 0;
}

/* The clients one test makes, freed whatever happens (cleanup_on_free
   deletes the claims they created). */
struct tls_clients { /* typedef'd above, for made */
    asb_client *c[12];
    int n;
};

static void tls_clients_free(tls_clients *tc) {
    while (tc->n > 0) asb_client_free(tc->c[--tc->n]);
}

/* A DIRECT client for https://127.0.0.1:<port> verified with *tls. */
static asb_client *tls_direct_client(tls_clients *tc, int port, const asb_tls_config *tls,
                                     asb_error *err) {
    asb_client_desc d;
    asb_client *c = NULL;
    char url[64];
    snprintf(url, sizeof url, "https://127.0.0.1:%d", port);
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = kubeconfig;
    d.kube.http.retry.backoff_ms = 50;
    d.mode = ASB_CONNECT_DIRECT;
    d.direct_url = url;
    d.cleanup_on_free = 1;
    if (tls) d.sandbox_tls = *tls;
    if (tc->n == 12) {
        fprintf(stderr, "    tls_clients holds 12 clients at most\n");
        return NULL;
    }
    if (asb_client_create(&d, &c, err) != ASB_OK) {
        fprintf(stderr, "    client for %s: %s\n", url, err->message);
        return NULL;
    }
    tc->c[tc->n++] = c;
    return c;
}

/* Attaches to `claim` and runs `echo <word>`; returns the result. */
static asb_result tls_echo(asb_client *c, const char *claim, const char *word, asb_error *err) {
    asb_sandbox *sb = NULL;
    asb_run_result rr;
    char cmd[96];
    asb_result r = asb_client_get_sandbox(c, claim, NULL, 0, &sb, err);
    if (r != ASB_OK) return r;
    snprintf(cmd, sizeof cmd, "echo %s", word);
    r = asb_sandbox_run(sb, cmd, 30000, &rr, err);
    if (r == ASB_OK && (rr.exit_code != 0 || strncmp(rr.out.ptr, word, strlen(word)) != 0)) {
        fprintf(stderr, "    echo %s: exit %d, stdout \"%s\"\n", word, rr.exit_code, rr.out.ptr);
        r = ASB_ERR_IO;
    }
    asb_run_result_free(&rr);
    return r;
}

static void https_router_checks(made *m, const tls_terminator *t, tls_clients *tc) {
    asb_error err;
    asb_tls_config tls;
    asb_client *c;
    asb_sandbox *sb = NULL;
    asb_create_opts o;
    asb_label label[1];
    asb_buf *data = &m->buf;
    asb_name_list *names = &m->names;
    char ca[160], ca2[160], cert[160], key[160], cert2[160], key2[160], val[32], sel[64];
    char claim[64];
    int ex = 0;
    snprintf(ca, sizeof ca, "%s/ca.crt", t->certs);
    snprintf(ca2, sizeof ca2, "%s/ca2.crt", t->certs);
    snprintf(cert, sizeof cert, "%s/client-rsa.crt", t->certs);
    snprintf(key, sizeof key, "%s/client-rsa.key", t->certs);
    snprintf(cert2, sizeof cert2, "%s/client-otherca.crt", t->certs);
    snprintf(key2, sizeof key2, "%s/client-otherca.key", t->certs);

    /* the test CA: create (its runtime probe goes through TLS too), run,
       write and read */
    memset(&tls, 0, sizeof tls);
    tls.ca_file = ca;
    c = tls_direct_client(tc, t->port[0], &tls, &err);
    ASBT_CHECK(c != NULL);
    memset(&o, 0, sizeof o);
    o.probe_runtime = 1;
    o.ready_timeout_ms = 60000;
    if (create_sb(c, &o, &sb, &err) != ASB_OK)
        fprintf(stderr, "    create: %s\n", err.message);
    ASBT_CHECK(sb != NULL);
    snprintf(claim, sizeof claim, "%s", asb_sandbox_claim_name(sb));
    ASBT_CHECK(echo_ok(sb, "over tls", 30000));
    ASBT_EQ_RES(asb_sandbox_write(sb, "tls/f.bin", "x\0y\r\n", 5, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_read(sb, "tls/f.bin", data, &err), ASB_OK);
    ASBT_EQ_MEM(data->ptr, data->len, "x\0y\r\n", 5);
    asb_buf_free(data);
    ASBT_EQ_RES(asb_sandbox_exists(sb, "tls/f.bin", &ex, &err), ASB_OK);
    ASBT_EQ_INT(ex, 1);

    /* the default (the system bundle) does not know the test CA: refused,
       and the message says why and what to set */
    c = tls_direct_client(tc, t->port[0], NULL, &err);
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(tls_echo(c, claim, "never", &err), ASB_ERR_TLS_VERIFY);
    ASBT_CONTAINS(err.message, "not trusted");
    ASBT_CONTAINS(err.message, "unknown CA");
    ASBT_CONTAINS(err.message, "sandbox_tls");
    /* ... and a create whose runtime probe is refused fails at once and
       leaves no claim behind */
    snprintf(val, sizeof val, "tls-%d", (int)getpid());
    label[0].key = "asb-tls-test";
    label[0].value = val;
    o.labels = label;
    o.label_count = 1;
    sb = NULL;
    ASBT_EQ_RES(create_sb(c, &o, &sb, &err),
                ASB_ERR_TLS_VERIFY);
    ASBT_CHECK(sb == NULL);
    snprintf(sel, sizeof sel, "asb-tls-test=%s", val);
    ASBT_EQ_RES(asb_client_list_all(c, "default", sel, names, &err), ASB_OK);
    ASBT_EQ_INT(names->count, 0);
    asb_name_list_free(names);
    /* another CA is no better */
    tls.ca_file = ca2;
    c = tls_direct_client(tc, t->port[0], &tls, &err);
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(tls_echo(c, claim, "never", &err), ASB_ERR_TLS_VERIFY);
    ASBT_CONTAINS(err.message, "unknown CA");

    /* insecure_skip_verify: no verification at all */
    memset(&tls, 0, sizeof tls);
    tls.insecure_skip_verify = 1;
    c = tls_direct_client(tc, t->port[0], &tls, &err);
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(tls_echo(c, claim, "insecure", &err), ASB_OK);

    /* a certificate for "localhost" only, reached by IP: refused by name;
       server_name checks the name it does carry */
    memset(&tls, 0, sizeof tls);
    tls.ca_file = ca;
    c = tls_direct_client(tc, t->port[2], &tls, &err);
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(tls_echo(c, claim, "never", &err), ASB_ERR_TLS_VERIFY);
    ASBT_CONTAINS(err.message, "name mismatch");
    tls.server_name = "localhost";
    c = tls_direct_client(tc, t->port[2], &tls, &err);
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(tls_echo(c, claim, "by-name", &err), ASB_OK);

    /* mutual TLS: nginx answers 400 without a client certificate or with
       one from another CA, and proxies with client-rsa's */
    memset(&tls, 0, sizeof tls);
    tls.ca_file = ca;
    c = tls_direct_client(tc, t->port[1], &tls, &err);
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(tls_echo(c, claim, "never", &err), ASB_ERR_HTTP_STATUS);
    ASBT_EQ_INT(err.http_status, 400);
    ASBT_CHECK(recorder_has(err.body, err.body_len, "No required SSL certificate"));
    tls.client_cert_file = cert2;
    tls.client_key_file = key2;
    c = tls_direct_client(tc, t->port[1], &tls, &err);
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(tls_echo(c, claim, "never", &err), ASB_ERR_HTTP_STATUS);
    ASBT_EQ_INT(err.http_status, 400);
    tls.client_cert_file = cert;
    tls.client_key_file = key;
    c = tls_direct_client(tc, t->port[1], &tls, &err);
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(tls_echo(c, claim, "mutual", &err), ASB_OK);
}

/* An https router URL (a TLS terminator with a private CA in front of the
   real sandbox-router) is verified with asb_client_desc.sandbox_tls: its
   CA, server name, client certificate, or insecure; the default refuses. */
MADE_TEST(an_https_router_is_verified_with_sandbox_tls) {
    tls_terminator *t = (tls_terminator *)made_alloc(m, sizeof *t);
    const char *port = getenv("ASB_ROUTER_PORT");
    int started;
    if (!port) {
        fprintf(stderr, "    ASB_ROUTER_PORT is not set (the router's port in cluster.json)\n");
        ASBT_CHECK(port != NULL);
    }
    started = tt_start(t, atoi(port));
    if (started) m->tt = t;
    ASBT_CHECK(started);
    m->tc = (tls_clients *)made_alloc(m, sizeof *m->tc);
    https_router_checks(m, t, m->tc);
}

static void https_gateway_checks(const tls_terminator *t, tls_clients *tc) {
    asb_error err;
    asb_client_desc d;
    asb_client *c = NULL;
    asb_sandbox *sb = NULL;
    asb_result r;
    char ca[160], want[64];
    snprintf(ca, sizeof ca, "%s/ca.crt", t->certs);
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = kubeconfig;
    d.mode = ASB_CONNECT_GATEWAY;
    d.gateway_name = "asb-gw";
    d.gateway_ready_timeout_ms = 20000;
    d.gateway_https = 1;
    d.cleanup_on_free = 1;
    r = asb_client_create(&d, &c, &err);
    if (c) tc->c[tc->n++] = c; /* before the check, which leaves */
    ASBT_EQ_RES(r, ASB_OK);
    ASBT_EQ_INT(c->gw_port, 443); /* the https default */
    asb_client_free(tc->c[--tc->n]);
    c = NULL;
    d.gateway_port = t->port[0];
    d.sandbox_tls.ca_file = ca;
    r = asb_client_create(&d, &c, &err);
    if (c) tc->c[tc->n++] = c;
    ASBT_EQ_RES(r, ASB_OK);
    ASBT_EQ_RES(create_sb(c, NULL, &sb, &err), ASB_OK);
    ASBT_CHECK(echo_ok(sb, "through an https gateway", 30000));
    snprintf(want, sizeof want, "https://127.0.0.1:%d", t->port[0]);
    ASBT_EQ_STR(c->gw_base, want); /* evil.com/admin, 2130706433 skipped */
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
}

/* gateway_https: the Gateway's address over https, verified with
   sandbox_tls (the address, 127.0.0.1, is in the test server's SANs). */
MADE_TEST(gateway_https_reaches_the_router_through_a_tls_terminator) {
    tls_terminator *t = (tls_terminator *)made_alloc(m, sizeof *t);
    const char *port = getenv("ASB_ROUTER_PORT");
    int started;
    if (!port || !getenv("ASB_GATEWAY_PORT")) {
        fprintf(stderr, "    ASB_ROUTER_PORT and ASB_GATEWAY_PORT must be set "
                        "(cluster.json, tests/kube/gateway-setup.sh)\n");
        ASBT_CHECK(port != NULL && getenv("ASB_GATEWAY_PORT") != NULL);
    }
    started = tt_start(t, atoi(port));
    if (started) m->tt = t;
    ASBT_CHECK(started);
    m->tc = (tls_clients *)made_alloc(m, sizeof *m->tc);
    https_gateway_checks(t, m->tc);
}

/* -- Python SDK 1.0.8 parity: v1beta1 options, named claims, terminal
   reasons (issue 13) -------------------------------------------------------- */

/* A template (and, on v1beta1, a warm pool of 0 over it) made for one
   case: `extra` goes into the template's spec (policies), `probe_port`
   is where its readiness probe looks (8888: the runtime; anything else:
   never Ready). */
static int make_template(asb_client *c, const char *name, const char *extra, int probe_port) {
    char js[2048], av[96];
    asb_kube_resource tres = {"extensions.agents.x-k8s.io", c->api_version, "sandboxtemplates"};
    asb_kube_resource pres = {"extensions.agents.x-k8s.io", c->api_version, "sandboxwarmpools"};
    asb_error err;
    int i;
    /* the cluster's claim version, found on first use (maybe not yet) */
    if (asb__api_version(c, &err) != ASB_OK) {
        fprintf(stderr, "    template %s: %s\n", name, err.message);
        return 0;
    }
    tres.version = pres.version = c->api_version;
    snprintf(av, sizeof av, "extensions.agents.x-k8s.io/%s", c->api_version);
    /* a leftover of an earlier run goes first, and is waited out (its
       deletion may take a moment while the controller lets go of it) */
    asb_kube_delete(c->kube, &pres, "default", name, NULL);
    asb_kube_delete(c->kube, &tres, "default", name, NULL);
    for (i = 0; i < 200 && (asb_kube_get(c->kube, &pres, "default", name, NULL, NULL) == ASB_OK ||
                            asb_kube_get(c->kube, &tres, "default", name, NULL, NULL) == ASB_OK);
         i++)
        asb__sleep_ms(50);
    snprintf(js, sizeof js,
             "{\"apiVersion\":\"%s\",\"kind\":\"SandboxTemplate\",\"metadata\":{\"name\":\"%s\"},"
             "\"spec\":{%s\"podTemplate\":{\"spec\":{\"containers\":[{\"name\":\"python-runtime\","
             "\"image\":\"agentsandbox-runtime:local\",\"ports\":[{\"containerPort\":8888}],"
             "\"readinessProbe\":{\"httpGet\":{\"path\":\"/\",\"port\":%d},\"periodSeconds\":1}}],"
             "\"restartPolicy\":\"OnFailure\"}}}}",
             av, name, extra ? extra : "", probe_port);
    if (asb_kube_create(c->kube, &tres, "default", js, strlen(js), NULL, &err) != ASB_OK) {
        fprintf(stderr, "    template %s: %s\n", name, err.message);
        return 0;
    }
    if (!is_v05()) return 1;
    snprintf(js, sizeof js,
             "{\"apiVersion\":\"%s\",\"kind\":\"SandboxWarmPool\",\"metadata\":{\"name\":\"%s\"},"
             "\"spec\":{\"replicas\":0,\"sandboxTemplateRef\":{\"name\":\"%s\"}}}",
             av, name, name);
    if (asb_kube_create(c->kube, &pres, "default", js, strlen(js), NULL, &err) != ASB_OK) {
        fprintf(stderr, "    warm pool %s: %s\n", name, err.message);
        return 0;
    }
    return 1;
}

static void drop_template(asb_client *c, const char *name) {
    asb_kube_resource tres = {"extensions.agents.x-k8s.io", c->api_version, "sandboxtemplates"};
    asb_kube_resource pres = {"extensions.agents.x-k8s.io", c->api_version, "sandboxwarmpools"};
    if (is_v05()) asb_kube_delete(c->kube, &pres, "default", name, NULL);
    asb_kube_delete(c->kube, &tres, "default", name, NULL);
}

/* Create options for `name` (a template on v1alpha1, its pool on v1beta1). */
static const char *target(const char *name, asb_create_opts *o) {
    memset(o, 0, sizeof *o);
    if (!is_v05()) return name;
    o->warm_pool = name;
    return NULL;
}

/* A claim (not ours to name: raw, as another program would make it). */
static int raw_claim(asb_client *c, const char *name, const char *tpl, char *uid, size_t cap) {
    char js[1024];
    asb_kube_resource res;
    asb_buf out;
    asb_json_doc d;
    asb_error err;
    int ok = 0;
    snprintf(js, sizeof js,
             "{\"apiVersion\":\"extensions.agents.x-k8s.io/%s\",\"kind\":\"SandboxClaim\","
             "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"%s\":{\"name\":\"%s\"}}}",
             c->api_version, name, is_v05() ? "warmPoolRef" : "sandboxTemplateRef", tpl);
    asb_buf_init(&out, NULL);
    if (asb_kube_create(c->kube, asb__claims(c, &res), "default", js, strlen(js), &out, &err) ==
            ASB_OK &&
        asb_json_doc_parse(&d, out.ptr, out.len, NULL, NULL) == ASB_OK) {
        ok = asb_json_get_string(&d, asb_json_find(&d, 0, "metadata.uid"), uid, cap, NULL) == ASB_OK;
        asb_json_doc_free(&d);
    } else {
        fprintf(stderr, "    raw claim %s: %s\n", name, err.message);
    }
    asb_buf_free(&out);
    return ok;
}

/* The claim's UID now ("" when it is gone or on its way out). */
static void claim_uid(asb_client *c, const char *name, char *uid, size_t cap) {
    asb_kube_resource res;
    asb_buf out;
    asb_json_doc d;
    uid[0] = '\0';
    asb_buf_init(&out, NULL);
    if (asb_kube_get(c->kube, asb__claims(c, &res), "default", name, &out, NULL) == ASB_OK &&
        asb_json_doc_parse(&d, out.ptr, out.len, NULL, NULL) == ASB_OK) {
        if (asb_json_find(&d, 0, "metadata.deletionTimestamp") < 0)
            asb_json_get_string(&d, asb_json_find(&d, 0, "metadata.uid"), uid, cap, NULL);
        asb_json_doc_free(&d);
    }
    asb_buf_free(&out);
}

/* Deletes a claim by name and waits until it is gone (its finalizers,
   if any, done), so the name is free again. */
static void delete_claim_wait(asb_client *c, const char *name) {
    asb_kube_resource res;
    int i;
    asb_kube_delete(c->kube, asb__claims(c, &res), "default", name, NULL);
    for (i = 0; i < 200 && asb_kube_get(c->kube, &res, "default", name, NULL, NULL) == ASB_OK; i++)
        asb__sleep_ms(50);
}

typedef struct bg_create {
    asb_client *c;
    const char *tpl;
    char name[64];              /* o.claim_name's, when the case names the claim here */
    asb_create_opts o;
    asb_sandbox *sb;
    asb_error err;
    asb_result r;
    int64_t ms;
} bg_create;

static void *bg_create_run(void *arg) {
    bg_create *b = (bg_create *)arg;
    int64_t t0 = asb__now_ms();
    b->r = asb_client_create_sandbox(b->c, b->tpl, &b->o, &b->sb, &b->err);
    b->ms = asb__now_ms() - t0;
    return NULL;
}

/* v1beta1 options land on the Sandbox and its pod (v0.5.6); a v1alpha1
   controller (v0.4.6) would drop them, so they are refused before any
   claim is made. */
MADE_TEST(v1beta1_options_reach_the_sandbox_and_its_pod) {
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    asb_sandbox *sb = NULL;
    asb_create_opts o;
    asb_env_var env[1];
    asb_label pl[1], pa[1];
    const char *vct[1];
    const char *tpl;
    static const asb_kube_resource pvs = {"", "v1", "persistentvolumes"};
    asb_kube_resource pods = {"", "v1", "pods"};
    asb_kube_resource sbs;
    asb_buf *out = &m->buf;
    asb_json_doc *d = &m->doc;
    char pv[600], want[300];
    ASBT_CHECK(c != NULL);
    if (!c) return;
    ASBT_EQ_RES(asb__api_version(c, &err), ASB_OK);
    env[0].name = "ASB_MODE";
    env[0].value = "fast and \"quoted\"";
    env[0].container_name = NULL;
    pl[0].key = "sandbox.users.io/asb-test";
    pl[0].value = "v1beta1";
    pa[0].key = "asb.example.com/note";
    pa[0].value = "from the claim";
    vct[0] = "{\"metadata\":{\"name\":\"data\"},\"spec\":{\"storageClassName\":\"asb-manual\","
             "\"accessModes\":[\"ReadWriteOnce\"],\"resources\":{\"requests\":{\"storage\":\"1Gi\"}}}}";
    if (!is_v05()) {
        memset(&o, 0, sizeof o);
        o.env = env;
        o.env_count = 1;
        ASBT_EQ_RES(create_sb(c, &o, &sb, &err),
                    ASB_ERR_INVALID_ARGUMENT);
        ASBT_CONTAINS(err.message, "need v1beta1 claims");
        memset(&o, 0, sizeof o);
        o.volume_claim_templates = vct;
        o.volume_claim_template_count = 1;
        ASBT_EQ_RES(create_sb(c, &o, &sb, &err),
                    ASB_ERR_INVALID_ARGUMENT);
        ASBT_CHECK(sb == NULL);
        return; /* the sweep checks that no claim was made */
    }
    m->tpl[0] = "asb-open";
    ASBT_CHECK(make_template(c, "asb-open", "\"envVarsInjectionPolicy\":\"Allowed\","
                                            "\"volumeClaimTemplatesPolicy\":\"Allowed\",", 8888));
    /* a volume for the claim's template: the PV binder in the real
       controller manager binds it (kwok mounts nothing) */
    snprintf(pv, sizeof pv,
             "{\"apiVersion\":\"v1\",\"kind\":\"PersistentVolume\",\"metadata\":{\"name\":"
             "\"asb-pv-%d\"},\"spec\":{\"storageClassName\":\"asb-manual\",\"capacity\":"
             "{\"storage\":\"1Gi\"},\"accessModes\":[\"ReadWriteOnce\"],\"hostPath\":{\"path\":"
             "\"/tmp/asb-pv-%d\"}}}",
             (int)getpid(), (int)getpid());
    snprintf(want, sizeof want, "asb-pv-%d", (int)getpid());
    made_obj(m, &pvs, NULL, want);
    ASBT_EQ_RES(asb_kube_create(c->kube, &pvs, NULL, pv, strlen(pv), NULL, &err), ASB_OK);
    tpl = target("asb-open", &o);
    o.env = env;
    o.env_count = 1;
    o.pod_labels = pl;
    o.pod_label_count = 1;
    o.pod_annotations = pa;
    o.pod_annotation_count = 1;
    o.volume_claim_templates = vct;
    o.volume_claim_template_count = 1;
    o.ready_timeout_ms = 120000;
    if (create_on_new_template(c, tpl, &o, &sb, &err) != ASB_OK)
        fprintf(stderr, "    %s\n", err.message);
    ASBT_CHECK(sb != NULL);
    if (sb) {
        /* the Sandbox carries them */
        sbs.group = "agents.x-k8s.io";
        sbs.version = c->api_version;
        sbs.plural = "sandboxes";
        ASBT_EQ_RES(asb_kube_get(c->kube, &sbs, "default", asb_sandbox_name(sb), out, &err), ASB_OK);
        ASBT_EQ_RES(asb_json_doc_parse(d, out->ptr, out->len, NULL, &err), ASB_OK);
        ASBT_CHECK(asb_json_string_eq(d, asb_json_find(d, 0, "spec.volumeClaimTemplates.0.metadata.name"),
                                      "data", 4));
        asb_json_doc_free(d);
        /* and so does its pod: env, labels, annotations, the claim's volume */
        out->len = 0;
        ASBT_EQ_RES(asb_kube_get(c->kube, &pods, "default", asb_sandbox_pod_name(sb), out, &err),
                    ASB_OK);
        ASBT_EQ_RES(asb_json_doc_parse(d, out->ptr, out->len, NULL, &err), ASB_OK);
        ASBT_CHECK(asb_json_string_eq(
            d, asb_json_find(d, 0, "metadata.labels.sandbox\\.users\\.io/asb-test"), "v1beta1", 7));
        ASBT_CHECK(asb_json_string_eq(
            d, asb_json_find(d, 0, "metadata.annotations.asb\\.example\\.com/note"),
            "from the claim", 14));
        {
            asb_json_iter it = asb_json_iter_begin(d, asb_json_find(d, 0, "spec.containers.0.env"));
            int e, found = 0;
            while (asb_json_iter_next(d, &it, NULL, &e))
                if (asb_json_string_eq(d, asb_json_member(d, e, "name", 4), "ASB_MODE", 8) &&
                    asb_json_string_eq(d, asb_json_member(d, e, "value", 5), env[0].value,
                                       strlen(env[0].value)))
                    found = 1;
            ASBT_CHECK(found);
        }
        snprintf(want, sizeof want, "data-%s", asb_sandbox_name(sb));
        {
            asb_json_iter it = asb_json_iter_begin(d, asb_json_find(d, 0, "spec.volumes"));
            int v, found = 0;
            while (asb_json_iter_next(d, &it, NULL, &v))
                if (asb_json_string_eq(d, asb_json_find(d, v, "persistentVolumeClaim.claimName"),
                                       want, strlen(want)))
                    found = 1;
            ASBT_CHECK(found);
        }
        asb_json_doc_free(d);
        asb_buf_free(out);
        ASBT_CHECK(echo_ok(sb, "with options", 0));
        ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    }
    free_client(&m->c[0]);
    c = m->c[0] = new_client(&err);
    if (c && asb__api_version(c, &err) == ASB_OK) drop_template(c, "asb-open");
    snprintf(pv, sizeof pv, "asb-pv-%d", (int)getpid());
    if (c) asb_kube_delete(c->kube, &pvs, NULL, pv, NULL);
    made_forget(m);
}

/* R63: a claim's env values (API keys, often) come back from the
   apiserver in the create's answer and in every GET, list and watch event
   of the claim, and of its Sandbox, whose pod template carries them. The
   connection's read buffer, the response bodies (grown by realloc) and the
   watch's event lines held them and were freed without being wiped. A
   client on the scanning allocator creates a claim with an env value
   (waiting for Ready: the shared watch), gets it again, lists claims,
   looks up its Sandbox and deletes it; every block it gives back is
   scanned, and none may hold the value. */
MADE_TEST(v1beta1_claim_env_values_in_apiserver_answers_are_wiped_before_their_memory_is_freed) {
    static const char secret[] = "scan-env-answer-secret-7e2a";
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    asb_client *sc = NULL;
    asb_client_desc d;
    asb_sandbox *sb = NULL, *again = NULL;
    asb_create_opts o;
    asb_env_var env[1];
    asb_claim_list cl;
    asb_kube_resource res;
    const char *tpl;
    scanalloc sa;
    ASBT_CHECK(c != NULL);
    if (!c) return;
    ASBT_EQ_RES(asb__api_version(c, &err), ASB_OK);
    env[0].name = "ASB_API_KEY";
    env[0].value = secret;
    env[0].container_name = NULL;
    if (!is_v05()) { /* no env on v1alpha1 claims: refused before any claim */
        memset(&o, 0, sizeof o);
        o.env = env;
        o.env_count = 1;
        ASBT_EQ_RES(create_sb(c, &o, &sb, &err),
                    ASB_ERR_INVALID_ARGUMENT);
        return;
    }
    m->tpl[0] = "asb-envwipe";
    ASBT_CHECK(make_template(c, "asb-envwipe", "\"envVarsInjectionPolicy\":\"Allowed\",", 8888));
    scanalloc_init(&sa);
    scanalloc_secret(&sa, secret);
    memset(&d, 0, sizeof d);
    d.mode = ASB_CONNECT_DIRECT;
    d.direct_url = "http://127.0.0.1:1"; /* no sandbox call is made */
    d.kube.kubeconfig.path = kubeconfig;
    d.kube.http.retry.backoff_ms = 100;
    d.kube.http.allocator = &sa.a;
    ASBT_EQ_RES(asb_client_create(&d, &sc, &err), ASB_OK);
    if (sc) {
        tpl = target("asb-envwipe", &o);
        o.env = env;
        o.env_count = 1;
        o.ready_timeout_ms = 120000;
        if (create_on_new_template(sc, tpl, &o, &sb, &err) != ASB_OK)
            fprintf(stderr, "    create: %s\n", err.message);
        ASBT_CHECK(sb != NULL);
    }
    if (sb) {
        snprintf(m->claim, sizeof m->claim, "%s", asb_sandbox_claim_name(sb));
        /* the apiserver does echo the value: the scan is not vacuous */
        ASBT_EQ_RES(asb_kube_get(c->kube, asb__claims(c, &res), "default", m->claim, &m->buf,
                                 &err),
                    ASB_OK);
        ASBT_CHECK(m->buf.ptr && strstr(m->buf.ptr, secret) != NULL);
        asb_sandbox_close_connection(sb); /* the handle stays; get finds it */
        ASBT_EQ_RES(asb_client_get_sandbox(sc, m->claim, "default", 30000, &again, &err), ASB_OK);
        memset(&cl, 0, sizeof cl);
        ASBT_EQ_RES(asb_client_list_claims(sc, NULL, &cl, &err), ASB_OK);
        ASBT_CHECK(cl.count >= 1);
        asb_claim_list_free(&cl);
        ASBT_EQ_RES(asb_client_delete_sandbox(sc, m->claim, "default", &err), ASB_OK);
    }
    asb_client_free(sc);
    ASBT_EQ_INT(sa.hits, 0);
    ASBT_EQ_INT(scanalloc_live_count(&sa), 0);
    scanalloc_fini(&sa);
}

/* The reasons the controller never retries end the wait at once, with its
   message, and the claim is deleted: the ones the real controller can be
   made to report here. EnvVarsInjectionRejected, VolumeClaimTemplatesError
   and InvalidMetadata come from claims the pool's template does not allow
   (v0.5.6); PodFailed and PodSucceeded from a pod that ends before Ready
   (its phase written as a kubelet writes it, through pods/status). */
MADE_TEST(v1beta1_terminal_reasons_fail_fast_and_delete_the_claim) {
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    asb_create_opts o;
    asb_sandbox *sb = NULL;
    asb_env_var env[1];
    asb_label pl[1];
    const char *vct[1];
    char name[64];
    int i;
    ASBT_CHECK(c != NULL);
    if (!c) return;
    ASBT_EQ_RES(asb__api_version(c, &err), ASB_OK);
    env[0].name = "ASB_MODE";
    env[0].value = "x";
    env[0].container_name = NULL;
    pl[0].key = "no-domain";
    pl[0].value = "x";
    vct[0] = "{\"metadata\":{\"name\":\"data\"},\"spec\":{\"accessModes\":[\"ReadWriteOnce\"],"
             "\"resources\":{\"requests\":{\"storage\":\"1Gi\"}}}}";
    if (is_v05()) {
        static const char *reasons[] = {"EnvVarsInjectionRejected", "VolumeClaimTemplatesError",
                                        "InvalidMetadata"};
        for (i = 0; i < 3; i++) {
            int64_t t0;
            asb_result r;
            char uid[64];
            memset(&o, 0, sizeof o);
            o.warm_pool = "python-sandbox-warmpool"; /* its template allows neither */
            snprintf(name, sizeof name, "asb-terminal-%d-%d", (int)getpid(), i);
            o.claim_name = name;
            o.ready_timeout_ms = 120000;
            if (i == 0) {
                o.env = env;
                o.env_count = 1;
            } else if (i == 1) {
                o.volume_claim_templates = vct;
                o.volume_claim_template_count = 1;
            } else {
                o.pod_labels = pl;
                o.pod_label_count = 1;
            }
            t0 = asb__now_ms();
            r = asb_client_create_sandbox(c, NULL, &o, &sb, &err);
            ASBT_EQ_RES(r, ASB_ERR_CLAIM_FAILED);
            ASBT_CONTAINS(err.message, reasons[i]);
            ASBT_CHECK(strlen(err.message) > strlen(reasons[i]) + 30); /* the controller's words too */
            ASBT_CHECK(asb__now_ms() - t0 < 120000);                   /* before the ready timeout */
            claim_uid(c, name, uid, sizeof uid);
            ASBT_EQ_STR(uid, "");                                      /* deleted */
            fprintf(stderr, "    %s in %lld ms: %.160s\n", reasons[i],
                    (long long)(asb__now_ms() - t0), err.message);
        }
    }
    /* a pod that ends before it is Ready: PodFailed, then PodSucceeded
       (v0.5.6; v0.4.6's controller has no such reasons: its claim would
       wait out the deadline) */
    if (is_v05()) m->tpl[0] = "asb-unready-t";
    if (is_v05()) ASBT_CHECK(make_template(c, "asb-unready-t", NULL, 8899)); /* never Ready */
    for (i = 0; is_v05() && i < 2; i++) {
        static const char *phase[] = {"Failed", "Succeeded"};
        static const char *reason[] = {"PodFailed", "PodSucceeded"};
        /* outlives the body: a failed check leaves the thread to
           made_free's join */
        bg_create *b = (bg_create *)made_alloc(m, sizeof *b);
        asb_kube_resource pods = {"", "v1", "pods"}, res;
        char patch[128], sbname[256] = "", uid[64];
        int k, patched = 0;
        b->c = c;
        b->tpl = target("asb-unready-t", &b->o);
        snprintf(b->name, sizeof b->name, "asb-podend-%d-%d", (int)getpid(), i);
        snprintf(name, sizeof name, "%s", b->name);
        b->o.claim_name = b->name;
        b->o.ready_timeout_ms = 120000;
        ASBT_EQ_INT(made_thread(m, bg_create_run, b), 0);
        /* the claim's sandbox, then its pod Running (unready), then the end */
        for (k = 0; k < 600 && !patched; k++) {
            asb_buf out;
            asb_json_doc d;
            asb__sleep_ms(100);
            asb_buf_init(&out, NULL);
            if (!sbname[0] &&
                asb_kube_get(c->kube, asb__claims(c, &res), "default", name, &out, NULL) == ASB_OK &&
                asb_json_doc_parse(&d, out.ptr, out.len, NULL, NULL) == ASB_OK) {
                asb_json_get_string(&d, asb_json_find(&d, 0, "status.sandbox.name"), sbname,
                                    sizeof sbname, NULL);
                asb_json_doc_free(&d);
            }
            out.len = 0;
            if (sbname[0] &&
                asb_kube_get(c->kube, &pods, "default", sbname, &out, NULL) == ASB_OK &&
                asb_json_doc_parse(&d, out.ptr, out.len, NULL, NULL) == ASB_OK) {
                int running = asb_json_string_eq(&d, asb_json_find(&d, 0, "status.phase"), "Running", 7);
                asb_json_doc_free(&d);
                if (running) {
                    char path[400];
                    snprintf(patch, sizeof patch, "{\"status\":{\"phase\":\"%s\"}}", phase[i]);
                    snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/%s/status", sbname);
                    if (asb_kube_request(c->kube, "PATCH", path, "application/merge-patch+json", patch,
                                         strlen(patch), NULL, &err) == ASB_OK)
                        patched = 1;
                    else
                        fprintf(stderr, "    patch: %s\n", err.message);
                }
            }
            asb_buf_free(&out);
        }
        ASBT_CHECK(patched);
        made_join_last(m);
        ASBT_EQ_RES(b->r, ASB_ERR_CLAIM_FAILED);
        ASBT_CONTAINS(b->err.message, reason[i]);
        ASBT_CHECK(b->ms < 120000); /* before its ready timeout: the event ended the wait */
        claim_uid(c, name, uid, sizeof uid);
        ASBT_EQ_STR(uid, "");
        fprintf(stderr, "    %s: %.160s\n", reason[i], b->err.message);
        if (b->sb) asb_sandbox_terminate(b->sb, NULL);
    }
}

/* Named claims: the name is taken (409, how to attach), adopt_existing
   attaches, a claim deleted and re-created under the name during a wait
   ends the wait and is never deleted by it, a handle's terminate never
   deletes the newcomer, get_sandbox moves to the new claim, and
   cleanup_on_free leaves a named claim alone. */
MADE_TEST(v1beta1_named_claims_adopt_and_pin_the_uid) {
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err), *c2 = m->c[1] = new_client(&err);
    asb_create_opts o;
    asb_sandbox *sb = NULL, *sb2 = NULL, *again = NULL;
    const char *pool_or_tpl = is_v05() ? "python-sandbox-warmpool" : "python-sandbox-template";
    char name[64], uid[64], uid2[64];
    const char *tpl;
    ASBT_CHECK(c != NULL && c2 != NULL);
    if (!c || !c2) return;
    ASBT_EQ_RES(asb__api_version(c, &err), ASB_OK);
    tpl = target(pool_or_tpl, &o);
    if (!is_v05()) {
        /* v1alpha1 names the sandbox after the claim: a label, no dots */
        o.claim_name = "asb-named.team";
        ASBT_EQ_RES(asb_client_create_sandbox(c, tpl, &o, &sb, &err), ASB_ERR_INVALID_ARGUMENT);
        ASBT_CONTAINS(err.message, "must be a DNS-1123 label");
    }
    snprintf(name, sizeof name, is_v05() ? "asb-named-%d.team" : "asb-named-%d", (int)getpid());
    snprintf(m->claim, sizeof m->claim, "%s", name); /* made again by raw_claim below */
    o.claim_name = name;
    ASBT_EQ_RES(asb_client_create_sandbox(c, tpl, &o, &sb, &err), ASB_OK);
    ASBT_CHECK(sb != NULL);
    if (!sb) return;
    ASBT_EQ_STR(asb_sandbox_claim_name(sb), name);
    claim_uid(c, name, uid, sizeof uid);
    ASBT_EQ_STR(sb->uid, uid);
    /* taken: 409 with the way out; nothing deleted */
    ASBT_EQ_RES(asb_client_create_sandbox(c2, tpl, &o, &sb2, &err), ASB_ERR_KUBE_API);
    ASBT_EQ_INT(err.http_status, 409);
    ASBT_CONTAINS(err.message, "adopt_existing");
    claim_uid(c, name, uid2, sizeof uid2);
    ASBT_EQ_STR(uid2, uid);
    /* adopted: the same claim and sandbox, usable */
    o.adopt_existing = 1;
    ASBT_EQ_RES(asb_client_create_sandbox(c2, tpl, &o, &sb2, &err), ASB_OK);
    ASBT_CHECK(sb2 != NULL && sb2 != sb);
    if (sb2) {
        ASBT_EQ_STR(asb_sandbox_name(sb2), asb_sandbox_name(sb));
        ASBT_EQ_STR(sb2->uid, uid);
        ASBT_CHECK(echo_ok(sb2, "adopted", 0));
    }
    /* adopting it for another template or pool is refused, and it stays */
    {
        asb_create_opts w;
        asb_sandbox *x = NULL;
        const char *wt = target(is_v05() ? "other-pool" : "other-template", &w);
        w.claim_name = name;
        w.adopt_existing = 1;
        ASBT_EQ_RES(asb_client_create_sandbox(c2, wt, &w, &x, &err), ASB_ERR_INVALID_ARGUMENT);
        ASBT_CONTAINS(err.message, "not \"other-");
        claim_uid(c, name, uid2, sizeof uid2);
        ASBT_EQ_STR(uid2, uid);
    }
    /* the claim is deleted and made again under the same name (by someone
       else): the old handles' terminate leaves the newcomer alone, and
       get_sandbox moves to it */
    delete_claim_wait(c, name);
    ASBT_CHECK(raw_claim(c, name, pool_or_tpl, uid2, sizeof uid2));
    ASBT_CHECK(strcmp(uid2, uid) != 0);
    ASBT_EQ_RES(asb_sandbox_terminate(sb2, &err), ASB_OK);
    claim_uid(c, name, uid, sizeof uid);
    ASBT_EQ_STR(uid, uid2); /* still there */
    ASBT_EQ_RES(asb_client_get_sandbox(c, name, NULL, 60000, &again, &err), ASB_OK);
    ASBT_CHECK(again != NULL && again != sb);
    ASBT_EQ_INT(asb_sandbox_is_active(sb), 0);
    if (again) {
        ASBT_EQ_STR(again->uid, uid2);
        ASBT_EQ_RES(asb_sandbox_terminate(again, &err), ASB_OK);
    }
    delete_claim_wait(c, name);
    free_client(&m->c[1]);
    /* a wait pinned to its UID: deleted and re-created meanwhile */
    m->tpl[0] = "asb-unready-n";
    ASBT_CHECK(make_template(c, "asb-unready-n", NULL, 8899));
    {
        /* outlives the body: a failed check leaves the thread to
           made_free's join */
        bg_create *b = (bg_create *)made_alloc(m, sizeof *b);
        int k;
        b->c = c;
        b->tpl = target("asb-unready-n", &b->o);
        snprintf(b->name, sizeof b->name, "%s", name);
        b->o.claim_name = b->name;
        b->o.ready_timeout_ms = 120000;
        ASBT_EQ_INT(made_thread(m, bg_create_run, b), 0);
        for (k = 0; k < 200; k++) {
            claim_uid(c, name, uid, sizeof uid);
            if (uid[0]) break;
            asb__sleep_ms(50);
        }
        ASBT_CHECK(uid[0] != '\0');
        delete_claim_wait(c, name);
        ASBT_CHECK(raw_claim(c, name, "asb-unready-n", uid2, sizeof uid2));
        made_join_last(m);
        ASBT_CHECK(b->r == ASB_ERR_METADATA || b->r == ASB_ERR_NOT_FOUND);
        ASBT_CHECK(b->ms < 120000); /* before its ready timeout: the event ended the wait */
        fprintf(stderr, "    the wait ended in %lld ms: %.160s\n", (long long)b->ms, b->err.message);
        claim_uid(c, name, uid, sizeof uid);
        ASBT_EQ_STR(uid, uid2); /* the newcomer was not deleted */
        delete_claim_wait(c, name);
    }
    drop_template(c, "asb-unready-n");
    m->tpl[0] = NULL;
    free_client(&m->c[0]);
    /* cleanup_on_free deletes generated claims, never named ones */
    {
        asb_client_desc d;
        asb_client *cc;
        asb_sandbox *named = NULL;
        memset(&d, 0, sizeof d);
        d.kube.kubeconfig.path = kubeconfig;
        d.cleanup_on_free = 1;
        ASBT_EQ_RES(asb_client_create(&d, &m->c[1], &err), ASB_OK);
        cc = m->c[1];
        tpl = target(pool_or_tpl, &o);
        o.claim_name = name;
        ASBT_EQ_RES(asb_client_create_sandbox(cc, tpl, &o, &named, &err), ASB_OK);
        free_client(&m->c[1]);
        c = m->c[0] = new_client(&err);
        ASBT_CHECK(c != NULL);
        if (c) {
            ASBT_EQ_RES(asb__api_version(c, &err), ASB_OK);
            claim_uid(c, name, uid, sizeof uid);
            ASBT_CHECK(uid[0] != '\0');
            delete_claim_wait(c, name);
        }
    }
}

/* asb_kubeconfig_desc.paths: the client and its kubectl both use the
   list, whatever the process's KUBECONFIG says (here: a file that does
   not exist, which kubectl would otherwise fail on). */
MADE_TEST(kubeconfig_paths_reach_the_tunnels_kubectl_too) {
    asb_error err;
    asb_client_desc d;
    asb_client *c;
    asb_sandbox *sb = NULL;
    const char *paths[2];
    char missing[600];
    snprintf(missing, sizeof missing, "%s.missing", kubeconfig);
    paths[0] = missing; /* skipped, as kubectl skips it */
    paths[1] = kubeconfig;
    made_setenv(m, "KUBECONFIG", "/nonexistent/asb-kubeconfig"); /* put back after the case */
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.paths = paths;
    d.kube.kubeconfig.path_count = 2;
    ASBT_EQ_RES(asb_client_create(&d, &m->c[0], &err), ASB_OK);
    c = m->c[0];
    if (c) {
        ASBT_CHECK(c->kube_env && strstr(c->kube_env, kubeconfig) != NULL);
        asb_create_opts o;
        const char *tpl = target(is_v05() ? "python-sandbox-warmpool" : "python-sandbox-template", &o);
        ASBT_EQ_RES(asb_client_create_sandbox(c, tpl, &o, &sb, &err), ASB_OK);
        if (sb) {
            ASBT_CHECK(echo_ok(sb, "through the listed kubeconfig", 0)); /* kubectl's tunnel */
            ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
        }
    }
}

/* A batch's creates end on their own deadline and on the batch's cancel
   token, which tell no thread (only the shared watch does): with pods that
   are never Ready, every create of a batch, including the ones posted
   after the first ended, is a TIMEOUT with its message; cancelled from
   another thread, every one is CANCELLED. No claim is left either way. */
MADE_TEST(a_batch_ends_unready_creates_at_their_deadline_and_on_cancel) {
    asb_error err;
    asb_client *c = m->c[0] = new_client(&err);
    asb_create_result *res;
    asb_create_opts o;
    asb_label label;
    asb_name_list left;
    canceller *k;
    const char *tpl;
    char sel[64], selector[96];
    size_t i;
    ASBT_CHECK(c != NULL);
    m->tpl[0] = "asb-unready-batch";
    ASBT_CHECK(make_template(c, "asb-unready-batch", NULL, 8899));
    res = (asb_create_result *)made_alloc(m, 4 * sizeof *res);
    snprintf(sel, sizeof sel, "b%d", (int)getpid());
    snprintf(selector, sizeof selector, "asb-batch=%s", sel);
    label.key = "asb-batch";
    label.value = sel;
    tpl = target("asb-unready-batch", &o);
    o.labels = &label;
    o.label_count = 1;
    {   /* once the controller has seen the new template (see
           create_on_new_template), every create of the batch is judged */
        asb_sandbox *sb = NULL;
        o.ready_timeout_ms = 300;
        ASBT_EQ_RES(create_on_new_template(c, tpl, &o, &sb, &err), ASB_ERR_TIMEOUT);
    }
    o.ready_timeout_ms = 1500;
    /* two at a time: the last two are posted as the first two end */
    if (asb_client_create_sandboxes(c, tpl, &o, 4, 2, res, &err) != ASB_ERR_TIMEOUT)
        fprintf(stderr, "    batch: %s\n", err.message);
    ASBT_EQ_RES(err.code, ASB_ERR_TIMEOUT);
    ASBT_CONTAINS(err.message, "4 of 4 creates failed");
    for (i = 0; i < 4; i++) {
        ASBT_EQ_RES(res[i].error.code, ASB_ERR_TIMEOUT);
        ASBT_CHECK(res[i].sandbox == NULL);
        ASBT_CONTAINS(res[i].error.message, "not ready within 1500 ms");
    }
    ASBT_EQ_RES(asb_cancel_create(NULL, &m->cancel, &err), ASB_OK);
    k = (canceller *)made_alloc(m, sizeof *k);
    k->token = m->cancel;
    k->after_ms = 2000;
    o.cancel = m->cancel;
    o.ready_timeout_ms = 120000; /* a create that missed the token ends in TIMEOUT */
    ASBT_CHECK(made_thread(m, cancel_later, k) == 0);
    ASBT_EQ_RES(asb_client_create_sandboxes(c, tpl, &o, 4, 4, res, &err), ASB_ERR_CANCELLED);
    made_join_last(m);
    for (i = 0; i < 4; i++) {
        if (res[i].error.code != ASB_ERR_CANCELLED) fprintf(stderr, "    #%zu: %s\n", i,
                                                            res[i].error.message);
        ASBT_EQ_RES(res[i].error.code, ASB_ERR_CANCELLED);
        ASBT_CHECK(res[i].sandbox == NULL);
    }
    memset(&left, 0, sizeof left);
    ASBT_EQ_RES(asb_client_list_all(c, "default", selector, &left, &err), ASB_OK);
    ASBT_EQ_INT((int)left.count, 0);
    asb_name_list_free(&left);
}

ASBT_LIST(
    ASBT_CASE(quick_start_create_run_write_read_exists_terminate)
    ASBT_CASE(missing_template_fails_fast_and_leaves_no_claim)
    ASBT_CASE(a_ready_timeout_deletes_the_claim)
    ASBT_CASE(a_batch_ends_unready_creates_at_their_deadline_and_on_cancel)
    ASBT_CASE(bad_labels_and_ttl_fail_before_any_api_call)
    ASBT_CASE(killed_kubectl_is_replaced_on_the_next_call)
    ASBT_CASE(another_local_user_cannot_take_over_the_tunnel)
    ASBT_CASE(kubectl_dies_with_a_program_that_never_freed_its_client)
    ASBT_CASE(no_kubectl_says_so_and_suggests_direct_mode)
    ASBT_CASE(a_second_client_attaches_and_a_stale_handle_is_dropped)
    ASBT_CASE(list_all_list_active_and_delete_all)
    ASBT_CASE(a_64_mib_file_streams_both_ways_in_flat_memory)
    ASBT_CASE(files_go_up_from_an_fd_and_come_back_into_one)
    ASBT_CASE(status_pod_name_hash_and_ip_come_from_the_sandbox)
    ASBT_CASE(probe_runtime_waits_for_the_runtime_of_a_template_without_a_probe)
    ASBT_CASE(in_cluster_mode_talks_to_the_pod_ip_without_the_router)
    ASBT_CASE(in_cluster_mode_uses_the_service_name_when_the_pod_ip_is_refused)
    ASBT_CASE(warm_pool_claims_match_the_clusters_api_version)
    ASBT_CASE(v1beta1_options_reach_the_sandbox_and_its_pod)
    ASBT_CASE(v1beta1_claim_env_values_in_apiserver_answers_are_wiped_before_their_memory_is_freed)
    ASBT_CASE(v1beta1_terminal_reasons_fail_fast_and_delete_the_claim)
    ASBT_CASE(v1beta1_named_claims_adopt_and_pin_the_uid)
    ASBT_CASE(kubeconfig_paths_reach_the_tunnels_kubectl_too)
    ASBT_CASE(close_connection_keeps_the_claim_and_options_reach_the_router)
    ASBT_CASE(gateway_mode_skips_bad_addresses_and_reaches_the_router)
    ASBT_CASE(router_503s_are_retried_for_gets_and_returned_once_for_posts)
    ASBT_CASE(create_waits_until_the_router_can_place_the_new_sandbox)
    ASBT_CASE(a_command_after_the_router_closed_an_idle_tunnel_connection_is_answered)
    ASBT_CASE(many_cycles_leave_no_claim_process_fd_or_memory_behind)
    ASBT_CASE(a_hundred_live_sandboxes_share_one_kubectl)
    ASBT_CASE(command_output_over_the_cap_is_too_large_not_cut)
    ASBT_CASE(long_commands_meet_their_deadlines_and_cancel_from_another_thread)
    ASBT_CASE(one_client_serves_threads_that_each_drive_their_own_sandbox)
    ASBT_CASE(the_log_names_each_step_and_never_a_secret)
    ASBT_CASE(router_refuses_forbidden_pod_ips_with_400_and_the_client_shows_it)
    ASBT_CASE(router_token_reaches_the_router_but_never_the_sandbox)
    ASBT_CASE(gateway_ipv6_address_goes_into_the_url_in_brackets)
    ASBT_CASE(set_based_label_selectors_with_spaces_reach_the_apiserver_intact)
    ASBT_CASE(a_router_with_default_flags_refuses_loopback_pod_ips_with_400)
    ASBT_CASE(an_https_router_is_verified_with_sandbox_tls)
    ASBT_CASE(gateway_https_reaches_the_router_through_a_tls_terminator)
)

/* After every case: claims of ours still in `default` (and not already
   on their way out) are deleted and kubectl tunnels still running are
   stopped, so a case that failed half-way leaves nothing to the next (the
   200-cycle case counts claims, several cases count kubectl processes),
   and a case that passed but left either fails: no test may orphan a
   claim or a process. */
static int sweep_claims(const char *name, int failed) {
    asb_error err;
    asb_client *c = new_client(&err);
    asb_kube_resource res;
    asb_kube_list_opts lo;
    asb_buf out;
    asb_json_doc doc;
    asb_json_iter it;
    int item, left = 0;
    if (!c) {
        fprintf(stderr, "    sweep after %s: %s\n", name, err.message);
        return 1;
    }
    memset(&lo, 0, sizeof lo);
    lo.label_selector = "agents.x-k8s.io/created-by=agentsandbox.h";
    asb_buf_init(&out, NULL);
    if (asb__api_version(c, &err) != ASB_OK ||
        asb_kube_list(c->kube, asb__claims(c, &res), "default", &lo, &out, &err) != ASB_OK ||
        asb_json_doc_parse(&doc, out.ptr, out.len, NULL, &err) != ASB_OK) {
        fprintf(stderr, "    sweep after %s: %s\n", name, err.message);
        asb_buf_free(&out);
        asb_client_free(c);
        return 1;
    }
    it = asb_json_iter_begin(&doc, asb_json_find(&doc, 0, "items"));
    while (asb_json_iter_next(&doc, &it, NULL, &item)) {
        char claim[128];
        if (asb_json_find(&doc, item, "metadata.deletionTimestamp") >= 0) continue;
        /* the idle case's, while its child still runs (see idle_case_start) */
        if (idle_child > 0 && asb_json_find(&doc, item, "metadata.labels." IDLE_LABEL) >= 0)
            continue;
        if (asb_json_get_string(&doc, asb_json_find(&doc, item, "metadata.name"), claim,
                                sizeof claim, NULL) != ASB_OK)
            continue;
        left++;
        fprintf(stderr, "    %s left claim default/%s behind%s\n", name, claim,
                failed ? " (deleted now)" : "; deleted now");
        asb_kube_delete(c->kube, &res, "default", claim, NULL);
    }
    asb_json_doc_free(&doc);
    asb_buf_free(&out);
    asb_client_free(c);
    /* and kubectl: a case that returned early never freed its client, and
       its tunnel would be counted by every later case */
    {
        int kpid[16], sup[16], i, n = kubectl_children(kpid, sup, 16);
        for (i = 0; i < n && i < 16; i++) {
            fprintf(stderr, "    %s left kubectl %d (supervisor %d) running%s\n", name, kpid[i],
                    sup[i], failed ? " (stopped now)" : "; stopped now");
            kill(-sup[i], SIGKILL); /* the supervisor's group: it and kubectl */
            waitpid(sup[i], NULL, 0);
        }
        left += n;
    }
    return left > 0;
}

int main(int argc, char **argv);
#define main asbt_main
ASBT_MAIN()
#undef main
int main(int argc, char **argv) {
    snprintf(kubeconfig, sizeof kubeconfig, "%s/admin.kubeconfig", cluster_dir());
    if (getenv("ASB_CONNECT_MODE") && strcmp(getenv("ASB_CONNECT_MODE"), "native") == 0)
        client_mode = ASB_CONNECT_NATIVE_TUNNEL;
    asbt_after_each = sweep_claims;
    { /* the idle case's child, when the case is selected (as ASBT_MAIN selects) */
        const char *idle = "a_command_after_the_router_closed_an_idle_tunnel_connection_is_answered";
        int k, selected = argc < 2;
        for (k = 1; k < argc; k++)
            if (strstr(idle, argv[k])) selected = 1;
        if (selected) idle_case_start();
    }
    return asbt_main(argc, argv);
}
