/* The kubectl-free port-forward against the real local control plane
   (tools/localcluster): kube-apiserver 1.33 passing the v4.channel.k8s.io
   WebSocket to kwok, whose ClusterPortForward sends the router pod's port
   8080 to the real Go sandbox-router. Service resolution (numbers, names,
   named target ports, no Ready pod), bytes both ways compared with the
   router's own port, every credential kind, RBAC denial of
   pods/portforward for a service account made here, the error channel,
   many streams at once, a server that refuses the upgrade, an HTTP
   client and an HTTP/2 connection whose connections are streams (the
   sandboxd pods of a v0.5.6 cluster: REST and gRPC). The streams ride
   the apiserver's SPDY tunnel (1.31+) unless a case asks for v4.
   ASB_CLUSTER_KUBECONFIGS names the directory of the cluster's
   kubeconfigs (its parent holds cluster.json and pki/). */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include "asbtest.h"
#include "cluster.h"
#include "logsink.h"
#include <dirent.h>

static asb_kube_client *connect_file(const char *path, asb_error *err) {
    asb_kube_client_desc d;
    asb_kube_client *kc = NULL;
    memset(&d, 0, sizeof d);
    d.kubeconfig.path = path;
    d.http.retry.backoff_ms = 50;
    if (asb_kube_client_create(&d, &kc, err) != ASB_OK) return NULL;
    return kc;
}

static asb_kube_client *connect_as(const char *which, asb_error *err) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.kubeconfig", cluster_dir(), which);
    return connect_file(path, err);
}

/* A number from cluster.json's "ports" object. */
static int cluster_port(const char *name) {
    char path[1100], key[64];
    char *text = NULL;
    size_t len = 0;
    asb_json_doc doc;
    int64_t v = 0;
    asb_allocator a;
    asb__allocator_resolve(NULL, &a);
    snprintf(path, sizeof path, "%s/../cluster.json", cluster_dir());
    if (asb__read_file(&a, path, &text, &len, 1 << 20) != ASB_OK) return 0;
    if (asb_json_doc_parse(&doc, text, len, NULL, NULL) == ASB_OK) {
        snprintf(key, sizeof key, "ports.%s", name);
        asb_json_get_int64(&doc, asb_json_find(&doc, 0, key), &v);
        asb_json_doc_free(&doc);
    }
    a.free_fn(text, a.user_data);
    return (int)v;
}

/* The claim options for this cluster's release: a template on v0.4.x, the
   warm pool from v0.5 on (cluster.json's "agent_sandbox"). Returns the
   template to pass (NULL with the pool). */
static const char *claim_source(asb_create_opts *o) {
    char path[1100], *text = NULL;
    size_t len = 0;
    asb_allocator a;
    int v04 = 0;
    asb__allocator_resolve(NULL, &a);
    snprintf(path, sizeof path, "%s/../cluster.json", cluster_dir());
    if (asb__read_file(&a, path, &text, &len, 1 << 20) == ASB_OK) {
        v04 = strstr(text, "\"agent_sandbox\": \"v0.4") != NULL;
        a.free_fn(text, a.user_data);
    }
    memset(o, 0, sizeof *o);
    if (v04) return "python-sandbox-template";
    o->warm_pool = "python-sandbox-warmpool";
    return NULL;
}

/* Writes all of s to a non-blocking socket. */
static int send_all(int fd, const char *s, size_t n) {
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w > 0) {
            s += w;
            n -= (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            struct pollfd p = {fd, POLLOUT, 0};
            poll(&p, 1, 1000);
        } else {
            return -1;
        }
    }
    return 0;
}

/* Reads one HTTP/1.1 response with a Content-Length into out (within
   10 s). Returns 1 complete, 0 EOF first, -1 timeout or error. */
static int read_response(int fd, asb_buf *out) {
    int64_t until = asb__now_ms() + 10000;
    out->len = 0;
    for (;;) {
        char buf[8192];
        ssize_t n;
        const char *end = out->ptr ? strstr(out->ptr, "\r\n\r\n") : NULL;
        if (end) {
            const char *cl = strstr(out->ptr, "Content-Length: ");
            size_t want = (size_t)(end - out->ptr) + 4 + (cl ? (size_t)atol(cl + 16) : 0);
            if (out->len >= want) return 1;
        }
        n = recv(fd, buf, sizeof buf, 0);
        if (n > 0) {
            asb_buf_append(out, buf, (size_t)n);
            continue;
        }
        if (n == 0) return 0;
        if (errno != EAGAIN && errno != EINTR) return -1;
        {
            struct pollfd p = {fd, POLLIN, 0};
            int64_t left = until - asb__now_ms();
            if (left <= 0) return -1;
            poll(&p, 1, (int)left);
        }
    }
}

/* The status line and the body of a response, without the headers that
   differ between two answers (Date). */
static void status_and_body(const asb_buf *resp, char *out, size_t cap) {
    const char *nl = strstr(resp->ptr, "\r\n");
    const char *body = strstr(resp->ptr, "\r\n\r\n");
    snprintf(out, cap, "%.*s|%s", nl ? (int)(nl - resp->ptr) : 0, resp->ptr,
             body ? body + 4 : "");
}

/* A forward to the router: to its pod by name when pod is not NULL, else
   through its Service; v4_only and log as the description's. NULL (err
   says why, when not NULL) when create refuses it. */
static asb_portforward *router_forward_to(asb_kube_client *kc, const char *pod, const char *port,
                                          int v4_only, const asb_logger *log, asb_error *err) {
    asb_portforward_desc d;
    asb_portforward *pf = NULL;
    memset(&d, 0, sizeof d);
    d.ns = "agent-sandbox-system";
    if (pod)
        d.pod = pod;
    else
        d.service = "sandbox-router-svc";
    d.port = port;
    d.v4_only = v4_only;
    d.log = log;
    if (asb_portforward_create(kc, &d, &pf, err) != ASB_OK) return NULL;
    return pf;
}

static asb_portforward *router_forward(asb_kube_client *kc, const char *port) {
    return router_forward_to(kc, NULL, port, 0, NULL, NULL);
}

static const char get_root[] = "GET / HTTP/1.1\r\nHost: router\r\n\r\n";

/* Services made for one test, in the router's namespace, deleted after. */
static void make_service(asb_kube_client *kc, const char *name, const char *selector_app,
                         const char *target) {
    char body[1024];
    asb_error err;
    static const asb_kube_resource svcs = {"", "v1", "services"};
    asb_kube_delete(kc, &svcs, "agent-sandbox-system", name, NULL);
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"%s\"},"
             "\"spec\":{\"clusterIP\":\"None\",%s%s%s\"ports\":[{\"name\":\"web\",\"port\":9999,"
             "\"targetPort\":%s}]}}",
             name, selector_app ? "\"selector\":{\"app\":\"" : "",
             selector_app ? selector_app : "", selector_app ? "\"}," : "", target);
    if (asb_kube_create(kc, &svcs, "agent-sandbox-system", body, strlen(body), NULL, &err) !=
        ASB_OK)
        fprintf(stderr, "    create service %s: %s\n", name, err.message);
}

static void drop_service(asb_kube_client *kc, const char *name) {
    static const asb_kube_resource svcs = {"", "v1", "services"};
    asb_kube_delete(kc, &svcs, "agent-sandbox-system", name, NULL);
}

/* A sandboxd process's output, gathered under its lock. */
typedef struct proc_out {
    pthread_mutex_t mu;
    char text[256];
    size_t len;
} proc_out;

static void proc_out_add(void *user, asb_process_output which, const char *data, size_t len) {
    proc_out *po = (proc_out *)user;
    (void)which;
    pthread_mutex_lock(&po->mu);
    if (len > sizeof po->text - 1 - po->len) len = sizeof po->text - 1 - po->len;
    memcpy(po->text + po->len, data, len);
    po->len += len;
    po->text[po->len] = '\0';
    pthread_mutex_unlock(&po->mu);
}

/* What a case made. A failed ASBT check leaves the function it is in at
   once, so each case's checks run in a body that records here what it
   makes as soon as it makes it, and the case frees all of it after the
   body returns, whichever check ended it: a failed check no longer
   leaks the kube clients, forwards, connections, descriptors and files
   made before it, nor leaves its Services, pod or claim in the cluster.
   A body may free a thing early (free_pf, free_kc, close_fd, close_log
   clear the field as they free). made_free frees users before what they use: the
   process and the connections before the forwards they dial through,
   the forwards before their kube client. */
typedef struct made {
    asb_client *client;
    asb_sandbox *sb;             /* terminated (idempotent) before the client goes */
    asb_process *proc;           /* its output goes to `out` */
    proc_out out;                /* its lock set up when out_init */
    int out_init;
    asb_h2_conn *h2;
    asb_http_client *http;
    asb_ws *ws;
    asb_portforward *pf[2];
    asb_kube_client *kc[3];      /* kc[0] is admin when it removes the below */
    const char *services[3];     /* in agent-sandbox-system */
    const char *pod;             /* in agent-sandbox-system */
    asb_buf buf[2];
    int fd[2];                   /* -1: none */
    asbt_log log;                /* set up when log_open */
    int log_open;
    char file[64];               /* unlinked unless "" */
    char saved_path[4096];       /* PATH to put back when restore_path */
    int restore_path;
} made;

static void free_pf(asb_portforward **pf) {
    asb_portforward_free(*pf);
    *pf = NULL;
}

static void free_kc(asb_kube_client **kc) {
    asb_kube_client_free(*kc);
    *kc = NULL;
}

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

static void close_log(made *m) {
    if (m->log_open) asbt_log_close(&m->log);
    m->log_open = 0;
}

static void made_free(made *m) {
    static const asb_kube_resource pods = {"", "v1", "pods"};
    int i;
    for (i = 0; i < 2; i++) close_fd(&m->fd[i]); /* a stream's relay ends with its socket */
    asb_process_free(m->proc);
    if (m->out_init) pthread_mutex_destroy(&m->out.mu);
    if (m->sb) asb_sandbox_terminate(m->sb, NULL);
    asb_client_free(m->client);
    asb_h2_conn_free(m->h2);
    asb_http_client_free(m->http);
    asb_ws_free(m->ws);
    for (i = 0; i < 2; i++) free_pf(&m->pf[i]);
    for (i = 0; i < 3; i++)
        if (m->services[i] && m->kc[0]) drop_service(m->kc[0], m->services[i]);
    if (m->pod && m->kc[0]) asb_kube_delete(m->kc[0], &pods, "agent-sandbox-system", m->pod, NULL);
    for (i = 0; i < 3; i++) free_kc(&m->kc[i]);
    for (i = 0; i < 2; i++) asb_buf_free(&m->buf[i]);
    close_log(m);
    if (m->file[0]) unlink(m->file);
    if (m->restore_path) setenv("PATH", m->saved_path, 1);
}

/* Runs a case's body with a fresh record and frees what it made. */
static void made_run(void (*body)(made *m)) {
    made m;
    memset(&m, 0, sizeof m);
    asb_buf_init(&m.buf[0], NULL);
    asb_buf_init(&m.buf[1], NULL);
    m.fd[0] = m.fd[1] = -1;
    body(&m);
    made_free(&m);
}

/* A case: its name runs `name_body` through made_run. */
#define MADE_TEST(name)                          \
    static void name##_body(made *m);           \
    ASBT_TEST(name) { made_run(name##_body); }  \
    static void name##_body(made *m)

MADE_TEST(service_resolves_to_the_ready_router_pod_by_port_number_or_name) {
    asb_error err;
    asb_kube_client *kc = m->kc[0] = connect_as("admin", &err);
    asb_portforward_target t;
    ASBT_CHECK(kc != NULL);
    ASBT_EQ_RES(asb_portforward_resolve(kc, "agent-sandbox-system", "sandbox-router-svc", "8080",
                                        &t, &err), ASB_OK);
    ASBT_EQ_STR(t.pod, "sandbox-router");
    ASBT_EQ_INT(t.port, 8080);
    ASBT_EQ_RES(asb_portforward_resolve(kc, "agent-sandbox-system", "sandbox-router-svc", "http",
                                        &t, &err), ASB_OK);
    ASBT_EQ_INT(t.port, 8080);
    ASBT_EQ_RES(asb_portforward_resolve(kc, "agent-sandbox-system", "sandbox-router-svc", "9090",
                                        &t, &err), ASB_ERR_PORT_FORWARD);
    ASBT_CONTAINS(err.message, "has no port 9090");
    ASBT_EQ_RES(asb_portforward_resolve(kc, "agent-sandbox-system", "no-such-svc", "80", &t, &err),
                ASB_ERR_NOT_FOUND);
}

MADE_TEST(named_target_port_is_looked_up_in_the_chosen_pod) {
    asb_error err;
    asb_kube_client *kc = m->kc[0] = connect_as("admin", &err);
    asb_portforward_target t;
    ASBT_CHECK(kc != NULL);
    make_service(kc, m->services[0] = "asb-pf-named", "sandbox-router", "\"http\"");
    make_service(kc, m->services[1] = "asb-pf-unnamed", "sandbox-router", "\"nope\"");
    ASBT_EQ_RES(asb_portforward_resolve(kc, "agent-sandbox-system", "asb-pf-named", "9999", &t,
                                        &err), ASB_OK);
    ASBT_EQ_INT(t.port, 8080); /* the container port named "http" */
    ASBT_EQ_RES(asb_portforward_resolve(kc, "agent-sandbox-system", "asb-pf-named", "web", &t,
                                        &err), ASB_OK);
    ASBT_EQ_INT(t.port, 8080);
    ASBT_EQ_RES(asb_portforward_resolve(kc, "agent-sandbox-system", "asb-pf-unnamed", "9999", &t,
                                        &err), ASB_ERR_PORT_FORWARD);
    ASBT_CONTAINS(err.message, "named port \"nope\"");
    ASBT_CONTAINS(err.message, "sandbox-router");
}

MADE_TEST(no_ready_pod_behind_the_service_is_a_clear_error) {
    asb_error err;
    asb_kube_client *kc = m->kc[0] = connect_as("admin", &err);
    asb_portforward_target t;
    static const asb_kube_resource pods = {"", "v1", "pods"};
    const char *pending =
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"asb-pf-pending\","
        "\"labels\":{\"app\":\"asb-pf-pending\"}},\"spec\":{\"nodeSelector\":{\"asb-pf\":"
        "\"no-such-node\"},\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}";
    ASBT_CHECK(kc != NULL);
    make_service(kc, m->services[0] = "asb-pf-empty", "asb-pf-nothing", "80");
    make_service(kc, m->services[1] = "asb-pf-noselector", NULL, "80");
    make_service(kc, m->services[2] = "asb-pf-pending", "asb-pf-pending", "80");
    asb_kube_delete(kc, &pods, "agent-sandbox-system", "asb-pf-pending", NULL);
    m->pod = "asb-pf-pending";
    ASBT_EQ_RES(asb_kube_create(kc, &pods, "agent-sandbox-system", pending, strlen(pending), NULL,
                                &err), ASB_OK);
    ASBT_EQ_RES(asb_portforward_resolve(kc, "agent-sandbox-system", "asb-pf-empty", "9999", &t,
                                        &err), ASB_ERR_PORT_FORWARD);
    ASBT_CONTAINS(err.message, "no Running and Ready pod behind service "
                               "agent-sandbox-system/asb-pf-empty");
    ASBT_CONTAINS(err.message, "app=asb-pf-nothing: 0 pods");
    ASBT_EQ_RES(asb_portforward_resolve(kc, "agent-sandbox-system", "asb-pf-noselector", "9999",
                                        &t, &err), ASB_ERR_PORT_FORWARD);
    ASBT_CONTAINS(err.message, "has no selector");
    ASBT_EQ_RES(asb_portforward_resolve(kc, "agent-sandbox-system", "asb-pf-pending", "9999", &t,
                                        &err), ASB_ERR_PORT_FORWARD);
    ASBT_CONTAINS(err.message, "1 pod; pod asb-pf-pending is Pending");
}

/* The same request through the tunnel and straight to the router's own
   port: the same status line and body, twice on one stream. */
MADE_TEST(stream_carries_http_both_ways_like_the_routers_own_port) {
    asb_error err;
    asb_kube_client *kc = m->kc[0] = connect_as("admin", &err);
    asb_portforward *pf;
    asb_buf *got = &m->buf[0], *direct = &m->buf[1];
    char a[512], b[512];
    int i;
    struct sockaddr_in sa;
    unsigned long opened = 0, live = 0;
    ASBT_CHECK(kc != NULL);
    pf = m->pf[0] = router_forward(kc, "8080");
    ASBT_CHECK(pf != NULL);
    ASBT_EQ_RES(asb_portforward_dial(pf, &m->fd[0], &err), ASB_OK);
    for (i = 0; i < 2; i++) {
        ASBT_EQ_INT(send_all(m->fd[0], get_root, sizeof get_root - 1), 0);
        ASBT_EQ_INT(read_response(m->fd[0], got), 1);
    }
    /* the router's own port */
    m->fd[1] = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)cluster_port("router"));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASBT_CHECK(connect(m->fd[1], (struct sockaddr *)&sa, sizeof sa) == 0);
    ASBT_EQ_INT(send_all(m->fd[1], get_root, sizeof get_root - 1), 0);
    ASBT_EQ_INT(read_response(m->fd[1], direct), 1);
    close_fd(&m->fd[1]);
    status_and_body(got, a, sizeof a);
    status_and_body(direct, b, sizeof b);
    ASBT_EQ_STR(a, b);
    ASBT_CONTAINS(a, "X-Sandbox-ID header is required");
    asb_portforward_counts(pf, &opened, &live);
    ASBT_EQ_INT((int)opened, 1);
    ASBT_EQ_INT((int)live, 1);
    ASBT_EQ_INT(asb_portforward_take_error(pf, &err), 0);
}

MADE_TEST(every_credential_kind_can_port_forward) {
    static const char *who[] = {"admin", "token", "exec"};
    size_t i;
    for (i = 0; i < 3; i++) {
        asb_error err;
        asb_kube_client *kc = m->kc[0] = connect_as(who[i], &err);
        asb_portforward *pf;
        asb_buf *got = &m->buf[0];
        ASBT_CHECK(kc != NULL);
        pf = m->pf[0] = router_forward(kc, "http");
        ASBT_CHECK(pf != NULL);
        if (asb_portforward_dial(pf, &m->fd[0], &err) != ASB_OK)
            fprintf(stderr, "    %s: %s\n", who[i], err.message);
        ASBT_CHECK(m->fd[0] >= 0);
        ASBT_EQ_INT(send_all(m->fd[0], get_root, sizeof get_root - 1), 0);
        ASBT_EQ_INT(read_response(m->fd[0], got), 1);
        ASBT_CONTAINS(got->ptr, "HTTP/1.1 400 Bad Request");
        close_fd(&m->fd[0]);
        asb_buf_free(got);
        free_pf(&m->pf[0]);
        free_kc(&m->kc[0]);
    }
}

/* A service account that may read services and pods but not
   pods/portforward; its token from the TokenRequest API; a kubeconfig
   for it written to `path`. */
static int make_noforward_user(asb_kube_client *admin, const char *path) {
    static const asb_kube_resource sas = {"", "v1", "serviceaccounts"};
    static const asb_kube_resource roles = {"rbac.authorization.k8s.io", "v1", "roles"};
    static const asb_kube_resource rbs = {"rbac.authorization.k8s.io", "v1", "rolebindings"};
    const char *ns = "agent-sandbox-system";
    const char *sa = "{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\",\"metadata\":{\"name\":"
                     "\"asb-pf-noforward\"}}";
    const char *role = "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"Role\","
                       "\"metadata\":{\"name\":\"asb-pf-noforward\"},\"rules\":[{\"apiGroups\":"
                       "[\"\"],\"resources\":[\"services\",\"pods\"],\"verbs\":[\"get\",\"list\"]}]}";
    const char *rb = "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"RoleBinding\","
                     "\"metadata\":{\"name\":\"asb-pf-noforward\"},\"roleRef\":{\"apiGroup\":"
                     "\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"asb-pf-noforward\"},"
                     "\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"asb-pf-noforward\","
                     "\"namespace\":\"agent-sandbox-system\"}]}";
    const char *treq = "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\","
                       "\"spec\":{\"expirationSeconds\":3600}}";
    asb_buf out;
    asb_json_doc doc;
    asb_error err;
    char token[4096], ca[1100];
    FILE *f;
    asb_kube_create(admin, &sas, ns, sa, strlen(sa), NULL, NULL);
    asb_kube_create(admin, &roles, ns, role, strlen(role), NULL, NULL);
    asb_kube_create(admin, &rbs, ns, rb, strlen(rb), NULL, NULL);
    asb_buf_init(&out, NULL);
    if (asb_kube_request(admin, "POST",
                         "/api/v1/namespaces/agent-sandbox-system/serviceaccounts/"
                         "asb-pf-noforward/token",
                         NULL, treq, strlen(treq), &out, &err) != ASB_OK) {
        fprintf(stderr, "    token request: %s\n", err.message);
        asb_buf_free(&out);
        return 0;
    }
    if (asb_json_doc_parse(&doc, out.ptr, out.len, NULL, NULL) != ASB_OK ||
        asb_json_get_string(&doc, asb_json_find(&doc, 0, "status.token"), token, sizeof token,
                            NULL) != ASB_OK) {
        asb_buf_free(&out);
        return 0;
    }
    asb_json_doc_free(&doc);
    asb_buf_free(&out);
    snprintf(ca, sizeof ca, "%s/../pki/ca.crt", cluster_dir());
    f = fopen(path, "w");
    if (!f) return 0;
    fprintf(f,
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n"
            "    server: %s\n    certificate-authority: %s\nusers:\n- name: u\n  user:\n"
            "    token: %s\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n",
            asb_kube_client_config(admin)->server, ca, token);
    fclose(f);
    return 1;
}

MADE_TEST(user_without_pods_portforward_gets_the_apiservers_403) {
    asb_error err;
    asb_kube_client *admin = m->kc[0] = connect_as("admin", &err), *kc, *restricted;
    asb_portforward *pf;
    asb_portforward_target t;
    int fd;
    snprintf(m->file, sizeof m->file, "/tmp/asb-pf-noforward-XXXXXX");
    fd = mkstemp(m->file);
    if (fd < 0) m->file[0] = '\0'; /* nothing to unlink */
    else close(fd);
    ASBT_CHECK(admin != NULL && fd >= 0);
    ASBT_CHECK(make_noforward_user(admin, m->file));
    kc = m->kc[1] = connect_file(m->file, &err);
    unlink(m->file);
    m->file[0] = '\0';
    ASBT_CHECK(kc != NULL);
    /* it may resolve (get/list services and pods) ... */
    ASBT_EQ_RES(asb_portforward_resolve(kc, "agent-sandbox-system", "sandbox-router-svc", "8080",
                                        &t, &err), ASB_OK);
    /* ... but not forward */
    pf = m->pf[0] = router_forward(kc, "8080");
    ASBT_CHECK(pf != NULL);
    ASBT_EQ_RES(asb_portforward_dial(pf, &m->fd[0], &err), ASB_ERR_KUBE_API);
    ASBT_EQ_INT(m->fd[0], -1);
    ASBT_EQ_INT(err.http_status, 403);
    ASBT_EQ_STR(err.reason, "Forbidden");
    ASBT_CONTAINS(err.message, "system:serviceaccount:agent-sandbox-system:asb-pf-noforward");
    ASBT_CONTAINS(err.message, "resource \"pods/portforward\"");
    free_pf(&m->pf[0]);
    free_kc(&m->kc[1]);
    /* a user who may read nothing fails at the Service, with its 403 */
    restricted = m->kc[2] = connect_as("restricted", &err);
    ASBT_CHECK(restricted != NULL);
    pf = m->pf[0] = router_forward(restricted, "8080");
    ASBT_EQ_RES(asb_portforward_dial(pf, &m->fd[0], &err), ASB_ERR_KUBE_API);
    ASBT_EQ_INT(err.http_status, 403);
    ASBT_CONTAINS(err.message, "cannot get resource \"services\"");
}

/* kwok has no rule for port 9 of the router pod: the dial succeeds (the
   server names the port first), then the error channel says why and the
   stream ends; that text becomes the forwarder's error, once. */
/* Both protocols: v4's error channel, and SPDY's error stream (which
   kwok writes after it has ended the data stream). */
MADE_TEST(error_channel_text_becomes_the_stream_error) {
    asb_error err;
    asb_kube_client *kc = m->kc[0] = connect_as("admin", &err);
    int v4;
    ASBT_CHECK(kc != NULL);
    for (v4 = 0; v4 < 2; v4++) {
        asb_portforward *pf = m->pf[0] =
            router_forward_to(kc, "sandbox-router", "9", v4, NULL, &err);
        asb_buf *got = &m->buf[0];
        if (!pf) fprintf(stderr, "    create: %s\n", err.message);
        ASBT_CHECK(pf != NULL);
        ASBT_EQ_RES(asb_portforward_dial(pf, &m->fd[0], &err), ASB_OK);
        send_all(m->fd[0], get_root, sizeof get_root - 1);
        ASBT_EQ_INT(read_response(m->fd[0], got), 0); /* EOF, no answer */
        ASBT_EQ_INT(asb_portforward_take_error(pf, &err), 1);
        ASBT_EQ_RES(err.code, ASB_ERR_PORT_FORWARD);
        ASBT_CONTAINS(err.message, "error forwarding port 9 to pod sandbox-router");
        ASBT_CONTAINS(err.message, "no forward found for port 9");
        ASBT_EQ_INT(asb_portforward_take_error(pf, &err), 0);
        close_fd(&m->fd[0]);
        asb_buf_free(got);
        free_pf(&m->pf[0]);
    }
}

/* The 1.33 apiserver tunnels SPDY (PortForwardWebsockets is on from
   1.31): a dial offers it first and gets it, the way kubectl's
   port-forward does; v4_only asks for the kubelet's v4 alone. Either
   way the router answers every request on the stream. */
MADE_TEST(dial_rides_the_apiservers_spdy_tunnel_or_v4_on_request) {
    static const char *want[2] = {"over SPDY/3.1+portforward.k8s.io",
                                  "over v4.channel.k8s.io"};
    asb_error err;
    asb_kube_client *kc = m->kc[0] = connect_as("admin", &err);
    int v4;
    ASBT_CHECK(kc != NULL);
    for (v4 = 0; v4 < 2; v4++) {
        asb_portforward *pf;
        asb_logger lgr;
        asb_buf *got = &m->buf[0];
        int i;
        asbt_log_open(&m->log, &lgr, ASB_LOG_DEBUG);
        m->log_open = 1;
        pf = m->pf[0] = router_forward_to(kc, NULL, "8080", v4, &lgr, &err);
        if (!pf) fprintf(stderr, "    create: %s\n", err.message);
        ASBT_CHECK(pf != NULL);
        ASBT_EQ_RES(asb_portforward_dial(pf, &m->fd[0], &err), ASB_OK);
        ASBT_CONTAINS(m->log.text.ptr, "portforward.stream.opened: pod sandbox-router port 8080");
        ASBT_CONTAINS(m->log.text.ptr, want[v4]);
        for (i = 0; i < 3; i++) { /* one stream, several requests */
            got->len = 0;
            ASBT_EQ_INT(send_all(m->fd[0], get_root, sizeof get_root - 1), 0);
            ASBT_EQ_INT(read_response(m->fd[0], got), 1);
            ASBT_CONTAINS(got->ptr, "X-Sandbox-ID header is required");
        }
        ASBT_EQ_INT(asb_portforward_take_error(pf, &err), 0);
        close_fd(&m->fd[0]);
        asb_buf_free(got);
        free_pf(&m->pf[0]);
        close_log(m);
    }
}

MADE_TEST(pod_that_does_not_exist_is_not_found) {
    asb_error err;
    asb_kube_client *kc = m->kc[0] = connect_as("admin", &err);
    asb_portforward_desc d;
    ASBT_CHECK(kc != NULL);
    memset(&d, 0, sizeof d);
    d.ns = "agent-sandbox-system";
    d.pod = "asb-pf-ghost";
    d.port = "8080";
    ASBT_EQ_RES(asb_portforward_create(kc, &d, &m->pf[0], &err), ASB_OK);
    ASBT_EQ_RES(asb_portforward_dial(m->pf[0], &m->fd[0], &err), ASB_ERR_NOT_FOUND);
    ASBT_EQ_INT(err.http_status, 404);
    ASBT_CONTAINS(err.message, "pods \"asb-pf-ghost\" not found");
}

/* The WebSocket alone: the protocol the server chose, the port on both
   channels, a request on channel 0 and its answer, a clean close. */
MADE_TEST(websocket_speaks_v4_channels_with_the_kubelet) {
    asb_error err;
    asb_kube_client *kc = m->kc[0] = connect_as("token", &err);
    asb_ws_desc d;
    asb_ws_message msg;
    asb_buf *all = &m->buf[0];
    ASBT_CHECK(kc != NULL);
    memset(&d, 0, sizeof d);
    d.path = "/api/v1/namespaces/agent-sandbox-system/pods/sandbox-router/portforward?ports=8080";
    d.protocol = "v4.channel.k8s.io";
    ASBT_EQ_RES(asb_kube_ws_connect(kc, &d, &m->ws, &err), ASB_OK);
    ASBT_EQ_STR(asb_ws_protocol(m->ws), "v4.channel.k8s.io");
    ASBT_EQ_RES(asb_ws_recv(m->ws, 10000, &msg, &err), ASB_OK);
    ASBT_EQ_MEM(msg.data.ptr, msg.data.len, "\x00\x90\x1f", 3); /* data channel: 8080 LE */
    ASBT_EQ_RES(asb_ws_recv(m->ws, 10000, &msg, &err), ASB_OK);
    ASBT_EQ_MEM(msg.data.ptr, msg.data.len, "\x01\x90\x1f", 3); /* error channel */
    ASBT_EQ_RES(asb_ws_send(m->ws, ASB_WS_BINARY, "\x00", 1, get_root, sizeof get_root - 1, &err),
                ASB_OK);
    while (!strstr(all->ptr ? all->ptr : "", "required")) {
        ASBT_EQ_RES(asb_ws_recv(m->ws, 10000, &msg, &err), ASB_OK);
        ASBT_EQ_INT(msg.opcode, ASB_WS_BINARY);
        ASBT_CHECK(msg.data.len >= 1 && msg.data.ptr[0] == 0);
        asb_buf_append(all, msg.data.ptr + 1, msg.data.len - 1);
    }
    ASBT_CONTAINS(all->ptr, "HTTP/1.1 400 Bad Request");
    ASBT_EQ_RES(asb_ws_close(m->ws, 1000, "done", &err), ASB_OK);
}

/* The master secret of a TLS 1.2 session (the field is private in
   mbedTLS 3; this test builds against the system's 2.28). */
#if ASB__MBEDTLS3
#define SESSION_MASTER(s) ((s).MBEDTLS_PRIVATE(master))
#else
#define SESSION_MASTER(s) ((s).master)
#endif

/* A WebSocket's connection resumes the TLS session the client's requests
   left with the apiserver: an abbreviated handshake, no certificates, no
   key agreement (tens of ms per stream under load, for both sides), so
   its master secret is that session's. Before, the upgrade's connection
   had a cache key of its own and made a full handshake every time. */
MADE_TEST(websocket_resumes_the_tls_session_of_the_clients_requests) {
    asb_error err;
    asb_kube_client *kc = m->kc[0] = connect_as("admin", &err);
    asb_ws_desc d;
    mbedtls_ssl_session on_ws, cached;
    asb__tls *t;
    int i, found = 0, zero = 1, got_session, same;
    size_t k;
    ASBT_CHECK(kc != NULL);
    ASBT_EQ_RES(asb_kube_request(kc, "GET", "/version", NULL, NULL, 0, &m->buf[0], &err), ASB_OK);
    asb_buf_free(&m->buf[0]);
    memset(&d, 0, sizeof d);
    d.path = "/api/v1/namespaces/agent-sandbox-system/pods/sandbox-router/portforward?ports=8080";
    d.protocol = "v4.channel.k8s.io";
    ASBT_EQ_RES(asb_kube_ws_connect(kc, &d, &m->ws, &err), ASB_OK);
    /* the sessions are read and freed before anything is checked: a
       failed check leaves the body */
    mbedtls_ssl_session_init(&on_ws);
    mbedtls_ssl_session_init(&cached);
    got_session = mbedtls_ssl_get_session(&m->ws->c->ssl, &on_ws);
    t = kc->http->http->tls;
    pthread_mutex_lock(&t->sess_lock);
    for (i = 0; i < ASB__TLS_SESSIONS; i++)
        if (strncmp(t->sess[i].key, "https://", 8) == 0) {
            found++;
            memcpy(SESSION_MASTER(cached), SESSION_MASTER(t->sess[i].s), 48);
        }
    pthread_mutex_unlock(&t->sess_lock);
    for (k = 0; k < 48; k++)
        if (SESSION_MASTER(cached)[k]) zero = 0;
    same = memcmp(SESSION_MASTER(on_ws), SESSION_MASTER(cached), 48) == 0;
    mbedtls_ssl_session_free(&on_ws);
    mbedtls_ssl_session_free(&cached);
    ASBT_EQ_INT(got_session, 0);
    ASBT_EQ_INT(found, 1); /* one endpoint, one session: the upgrade's went in the same slot */
    ASBT_EQ_INT(zero, 0);
    ASBT_CHECK(same);
}

/* An "apiserver" that is the router itself: a plain HTTP server that
   answers the upgrade with 400 and no Status. */
MADE_TEST(server_refusing_the_upgrade_suggests_the_kubectl_tunnel) {
    asb_error err;
    asb_kube_client *kc;
    asb_portforward_desc d;
    FILE *f = NULL;
    int fd;
    snprintf(m->file, sizeof m->file, "/tmp/asb-pf-plain-XXXXXX");
    fd = mkstemp(m->file);
    if (fd < 0) m->file[0] = '\0'; /* nothing to unlink */
    else if ((f = fdopen(fd, "w")) == NULL) close(fd);
    ASBT_CHECK(f != NULL);
    fprintf(f,
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n  cluster:\n"
            "    server: http://127.0.0.1:%d\nusers:\n- name: u\n  user: {}\ncontexts:\n"
            "- name: c\n  context: {cluster: k, user: u}\n",
            cluster_port("router"));
    fclose(f);
    kc = m->kc[0] = connect_file(m->file, &err);
    unlink(m->file);
    m->file[0] = '\0';
    ASBT_CHECK(kc != NULL);
    memset(&d, 0, sizeof d);
    d.ns = "agent-sandbox-system";
    d.pod = "sandbox-router";
    d.port = "8080";
    ASBT_EQ_RES(asb_portforward_create(kc, &d, &m->pf[0], &err), ASB_OK);
    ASBT_EQ_RES(asb_portforward_dial(m->pf[0], &m->fd[0], &err), ASB_ERR_PORT_FORWARD);
    ASBT_EQ_INT(err.http_status, 400);
    ASBT_CONTAINS(err.message, "ASB_CONNECT_LOCAL_TUNNEL");
}

static asb_result pf_dial(void *user, const char *host, int port, int *fd, asb_error *err) {
    (void)host;
    (void)port;
    return asb_portforward_dial((asb_portforward *)user, fd, err);
}

/* An HTTP client whose connections are port-forward streams (the dial
   hook): requests reuse one stream while it lives; a stream to a port
   with no listener fails its request and leaves the error channel's text
   behind; once the Service points somewhere that works, the next request
   resolves again and succeeds. */
MADE_TEST(http_client_dials_through_the_forward_and_re_resolves_after_a_failure) {
    static const asb_kube_resource svcs = {"", "v1", "services"};
    asb_error err;
    asb_kube_client *kc = m->kc[0] = connect_as("admin", &err);
    asb_http_client_desc hd;
    asb_http_request req;
    asb_http_response resp;
    asb_retry_policy once;
    asb_portforward_desc d;
    unsigned long opened = 0, live = 0;
    const char *to_http = "{\"spec\":{\"ports\":[{\"name\":\"web\",\"port\":9999,"
                          "\"targetPort\":\"http\"}]}}";
    int i, status;
    asb_result r;
    ASBT_CHECK(kc != NULL);
    /* no kwok rule for 9 */
    make_service(kc, m->services[0] = "asb-pf-flip", "sandbox-router", "9");
    memset(&d, 0, sizeof d);
    d.ns = "agent-sandbox-system";
    d.service = "asb-pf-flip";
    d.port = "web";
    ASBT_EQ_RES(asb_portforward_create(kc, &d, &m->pf[0], &err), ASB_OK);
    memset(&hd, 0, sizeof hd);
    hd.dial = pf_dial;
    hd.dial_user_data = m->pf[0];
    ASBT_EQ_RES(asb_http_client_create(&hd, &m->http, &err), ASB_OK);
    memset(&once, 0, sizeof once);
    once.max_attempts = 1;
    memset(&req, 0, sizeof req);
    req.url = "http://asb-pf-flip.agent-sandbox-system:9999/";
    req.retry = &once;
    r = asb_http_do(m->http, &req, &resp, &err);
    status = resp.status;
    asb_http_response_free(&resp);
    ASBT_CHECK(r != ASB_OK);
    ASBT_EQ_INT(status, 0);
    ASBT_EQ_INT(asb_portforward_take_error(m->pf[0], &err), 1);
    ASBT_CONTAINS(err.message, "error forwarding port 9 to pod sandbox-router");
    ASBT_EQ_RES(asb_kube_patch(kc, &svcs, "agent-sandbox-system", "asb-pf-flip", to_http,
                               strlen(to_http), NULL, &err), ASB_OK);
    for (i = 0; i < 3; i++) {
        char body[2048];
        /* the response is copied and freed before it is checked */
        r = asb_http_do(m->http, &req, &resp, &err);
        status = resp.status;
        snprintf(body, sizeof body, "%s", resp.body.ptr ? resp.body.ptr : "");
        asb_http_response_free(&resp);
        ASBT_EQ_RES(r, ASB_ERR_HTTP_STATUS);
        ASBT_EQ_INT(status, 400);
        ASBT_CONTAINS(body, "X-Sandbox-ID header is required");
    }
    asb_portforward_counts(m->pf[0], &opened, &live);
    ASBT_EQ_INT((int)opened, 2); /* the failed stream, then one kept alive */
    ASBT_EQ_INT((int)live, 1);
}

/* A Running pod of the sandboxd warm pool (v0.5.6 clusters), by name. */
static int sandboxd_pod(asb_kube_client *kc, char *out, size_t cap) {
    asb_buf b;
    asb_json_doc doc;
    asb_json_iter it;
    int v, found = 0;
    asb_buf_init(&b, NULL);
    if (asb_kube_request(kc, "GET", "/api/v1/namespaces/default/pods", NULL, NULL, 0, &b, NULL) !=
            ASB_OK ||
        asb_json_doc_parse(&doc, b.ptr, b.len, NULL, NULL) != ASB_OK) {
        asb_buf_free(&b);
        return 0;
    }
    it = asb_json_iter_begin(&doc, asb_json_find(&doc, 0, "items"));
    while (!found && asb_json_iter_next(&doc, &it, NULL, &v)) {
        char name[254];
        if (asb_json_get_string(&doc, asb_json_find(&doc, v, "metadata.name"), name, sizeof name,
                                NULL) == ASB_OK &&
            strncmp(name, "sandboxd-warmpool-", 18) == 0 &&
            asb_json_string_eq(&doc, asb_json_find(&doc, v, "status.phase"), "Running", 7)) {
            snprintf(out, cap, "%s", name);
            found = 1;
        }
    }
    asb_json_doc_free(&doc);
    asb_buf_free(&b);
    return found;
}

/* Both sandboxd ports of one pod through the forward: its REST port with
   the HTTP/1.1 client, its gRPC port with HTTP/2 (asb_h2_desc.dial), a
   call sandboxd does not implement answered UNIMPLEMENTED in trailers. */
MADE_TEST(sandboxd_pod_answers_http1_and_grpc_over_http2_through_the_forward) {
    asb_error err;
    asb_kube_client *kc = m->kc[0] = connect_as("admin", &err);
    asb_portforward_desc d;
    asb_http_client_desc hd;
    asb_http_request req;
    asb_http_response resp;
    asb_h2_desc h2d;
    asb_grpc_call_desc cd;
    char pod[254];
    int status;
    asb_result r;
    ASBT_CHECK(kc != NULL);
    ASBT_CHECK(sandboxd_pod(kc, pod, sizeof pod));
    memset(&d, 0, sizeof d);
    d.ns = "default";
    d.pod = pod;
    d.port = "8080";
    ASBT_EQ_RES(asb_portforward_create(kc, &d, &m->pf[0], &err), ASB_OK); /* REST */
    d.port = "9090";
    ASBT_EQ_RES(asb_portforward_create(kc, &d, &m->pf[1], &err), ASB_OK); /* gRPC */
    memset(&hd, 0, sizeof hd);
    hd.dial = pf_dial;
    hd.dial_user_data = m->pf[0];
    ASBT_EQ_RES(asb_http_client_create(&hd, &m->http, &err), ASB_OK);
    memset(&req, 0, sizeof req);
    req.url = "http://sandboxd:8080/v1/health";
    r = asb_http_do(m->http, &req, &resp, &err);
    status = resp.status;
    asb_http_response_free(&resp);
    ASBT_EQ_RES(r, ASB_OK);
    ASBT_EQ_INT(status, 200);
    memset(&h2d, 0, sizeof h2d);
    h2d.url = "http://sandboxd:9090";
    h2d.dial = pf_dial;
    h2d.dial_user_data = m->pf[1];
    ASBT_EQ_RES(asb_h2_connect(&h2d, &m->h2, &err), ASB_OK);
    memset(&cd, 0, sizeof cd);
    cd.method = "/process.v1.ProcessService/NoSuchMethod";
    cd.timeout_ms = 10000;
    ASBT_EQ_RES(asb_grpc_unary(m->h2, &cd, "", 0, &m->buf[0], &err), ASB_ERR_GRPC_STATUS);
    ASBT_EQ_STR(err.reason, "UNIMPLEMENTED");
}

/* Processes whose parent is this one, from /proc. */
static int child_processes(void) {
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL)
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9' &&
            proc_parent(atoi(e->d_name), NULL, 0) == (int)getpid())
            n++;
    if (d) closedir(d);
    return n;
}

/* The threads of this process, from /proc/self/status. */
static int thread_count(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "Threads:", 8) == 0) n = atoi(line + 8);
    if (f) fclose(f);
    return n;
}

/* A client in ASB_CONNECT_NATIVE_TUNNEL mode on the admin kubeconfig, and
   a new sandbox of it: from claim_source's template or pool, or with
   sandboxd_pool from that warm pool on the sandboxd runtime. NULL (what
   failed printed) when either fails; *c is the client to free, or NULL. */
static asb_sandbox *native_sandbox(const char *sandboxd_pool, asb_client **c) {
    asb_client_desc d;
    asb_create_opts o;
    asb_sandbox *sb = NULL;
    asb_error err;
    const char *tpl = claim_source(&o);
    char kc[1100];
    snprintf(kc, sizeof kc, "%s/admin.kubeconfig", cluster_dir());
    memset(&d, 0, sizeof d);
    d.mode = ASB_CONNECT_NATIVE_TUNNEL;
    d.kube.kubeconfig.path = kc;
    if (sandboxd_pool) {
        d.runtime = ASB_RUNTIME_SANDBOXD;
        memset(&o, 0, sizeof o);
        o.warm_pool = sandboxd_pool;
        tpl = NULL;
    }
    *c = NULL;
    if (asb_client_create(&d, c, &err) != ASB_OK) {
        fprintf(stderr, "    client: %s\n", err.message);
        return NULL;
    }
    if (asb_client_create_sandbox(*c, tpl, &o, &sb, &err) != ASB_OK)
        fprintf(stderr, "    create: %s\n", err.message);
    return sb;
}

/* text written to path in sb reads back the same: 1, else 0 (printed). */
static int file_comes_back(asb_sandbox *sb, const char *path, const char *text) {
    asb_buf back;
    asb_error err;
    int ok;
    asb_buf_init(&back, NULL);
    ok = asb_sandbox_write(sb, path, text, strlen(text), &err) == ASB_OK &&
         asb_sandbox_read(sb, path, &back, &err) == ASB_OK;
    if (!ok) {
        fprintf(stderr, "    %s: %s\n", path, err.message);
    } else if (back.len != strlen(text) || memcmp(back.ptr, text, back.len) != 0) {
        fprintf(stderr, "    %s: read back \"%.*s\"\n", path, (int)back.len, back.ptr);
        ok = 0;
    }
    asb_buf_free(&back);
    return ok;
}

/* The client in ASB_CONNECT_NATIVE_TUNNEL mode, with no kubectl on PATH:
   a claim from the warm pool, commands and a file, no child process at
   any point, and every relay thread gone after asb_client_free. */
MADE_TEST(native_mode_drives_a_sandbox_with_no_kubectl_and_no_child_process) {
    asb_error err;
    const char *old_path = getenv("PATH");
    int threads_before = thread_count(), i;
    snprintf(m->saved_path, sizeof m->saved_path, "%s", old_path ? old_path : "");
    m->restore_path = 1;
    setenv("PATH", "/nonexistent", 1); /* no kubectl to find */
    m->sb = native_sandbox(NULL, &m->client);
    ASBT_CHECK(m->sb != NULL);
    for (i = 0; i < 5; i++) ASBT_CHECK(echo_ok(m->sb, "native", 60000));
    ASBT_CHECK(file_comes_back(m->sb, "n.txt", "no kubectl\n"));
    ASBT_EQ_INT(child_processes(), 0);
    ASBT_EQ_RES(asb_sandbox_terminate(m->sb, &err), ASB_OK);
    asb_client_free(m->client);
    m->client = NULL;
    m->sb = NULL; /* the client's free took it */
    setenv("PATH", m->saved_path, 1);
    m->restore_path = 0;
    ASBT_EQ_INT(child_processes(), 0);
    ASBT_EQ_INT(thread_count(), threads_before);
}

/* tools/localcluster/lc.py stop-router or start-router on this cluster. */
static int lc_router(const char *what) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "LC_STATE_DIR='%s/..' python3 tools/localcluster/lc.py %s >&2",
             cluster_dir(), what);
    return system(cmd) == 0;
}

/* The router dies under the native tunnel (SIGKILL, as a crash): the next
   command fails, and its message carries the port-forward's own error;
   once the router runs again, the next command resolves the Service
   again and works, with the same client and handle. */
MADE_TEST(native_mode_fails_clearly_while_the_router_is_down_and_recovers) {
    asb_sandbox *sb = m->sb = native_sandbox(NULL, &m->client);
    asb_run_result rr;
    asb_error err;
    asb_error down_err;
    asb_result down;
    int i, ok = 0, stopped, started;
    ASBT_CHECK(sb != NULL);
    ASBT_EQ_RES(asb_sandbox_run(sb, "echo before", 60000, &rr, &err), ASB_OK);
    asb_run_result_free(&rr);
    /* the router is started again before anything is checked: a failed
       check leaves the test, and the cases after it need the router */
    stopped = lc_router("stop-router");
    down = asb_sandbox_run(sb, "echo during", 60000, &rr, &down_err);
    asb_run_result_free(&rr);
    started = lc_router("start-router");
    ASBT_CHECK(stopped && started);
    ASBT_CHECK(down != ASB_OK);
    fprintf(stderr, "    while down: %s\n", down_err.message);
    ASBT_CONTAINS(down_err.message, "error forwarding port 8080 to pod sandbox-router");
    ASBT_CONTAINS(down_err.message, "the next call resolves the router again");
    for (i = 0; i < 20 && !ok; i++) { /* the router's pod cache fills again */
        ok = asb_sandbox_run(sb, "echo after", 60000, &rr, &err) == ASB_OK && rr.exit_code == 0 &&
             rr.out.ptr && strcmp(rr.out.ptr, "after\n") == 0;
        if (!ok) fprintf(stderr, "    after restart, try %d: %s\n", i + 1, err.message);
        asb_run_result_free(&rr);
        if (!ok) asb__sleep_ms(500);
    }
    ASBT_CHECK(ok);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
}

/* The sandboxd runtime in native mode (v0.5.6 clusters): its REST port
   (HTTP/1.1) and gRPC port (HTTP/2) each forwarded to the sandboxd pod
   from inside the process; commands and files work, no child process. */
MADE_TEST(native_mode_drives_a_sandboxd_sandbox_over_both_ports) {
    asb_sandbox *sb = m->sb = native_sandbox("sandboxd-warmpool", &m->client);
    asb_error err;
    ASBT_CHECK(sb != NULL);
    ASBT_CHECK(echo_ok(sb, "sandboxd native", 60000));
    ASBT_CHECK(file_comes_back(sb, "sd.txt", "over REST\n"));
    ASBT_EQ_INT(child_processes(), 0);
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
}

/* Two handles to one claim in one client (sandboxd, native mode): an
   adopting create makes a second handle for the claim the client already
   tracks and frees it, keeping the first. Freeing it must not end the
   streams the first one uses through the client's forwards to that pod:
   a process started before goes on (stdin in, output out, its exit),
   then terminating the last handle of the pod does free the forwards. */
MADE_TEST(native_mode_a_second_handle_to_the_claim_going_leaves_the_first_ones_streams) {
    asb_client_desc d;
    asb_create_opts o;
    asb_client *c;
    asb_sandbox *sb = NULL, *again = NULL;
    asb_process_opts po;
    asb_run_result rr;
    asb_error err;
    char kc[1100], claim[64], out[256];
    int code = -2, pfs_left;
    asb_result r;
    snprintf(kc, sizeof kc, "%s/admin.kubeconfig", cluster_dir());
    snprintf(claim, sizeof claim, "pf-adopt-%08x", (unsigned)(asb__now_ms() ^ getpid()));
    memset(&d, 0, sizeof d);
    d.mode = ASB_CONNECT_NATIVE_TUNNEL;
    d.kube.kubeconfig.path = kc;
    d.runtime = ASB_RUNTIME_SANDBOXD;
    memset(&o, 0, sizeof o);
    o.warm_pool = "sandboxd-warmpool";
    o.claim_name = claim;
    ASBT_EQ_RES(asb_client_create(&d, &m->client, &err), ASB_OK);
    c = m->client;
    if (asb_client_create_sandbox(c, NULL, &o, &sb, &err) != ASB_OK)
        fprintf(stderr, "    create: %s\n", err.message);
    m->sb = sb;
    ASBT_CHECK(sb != NULL);
    pthread_mutex_init(&m->out.mu, NULL);
    m->out_init = 1;
    memset(&po, 0, sizeof po);
    po.shell = "read x; echo got:$x";
    po.on_output = proc_out_add;
    po.user_data = &m->out;
    if (asb_sandbox_process_start(sb, &po, &m->proc, &err) != ASB_OK)
        fprintf(stderr, "    process: %s\n", err.message);
    ASBT_CHECK(m->proc != NULL);
    /* the REST side has a pooled connection through the forward too */
    ASBT_EQ_RES(asb_sandbox_write(sb, "two.txt", "x", 1, &err), ASB_OK);
    o.adopt_existing = 1;
    if (asb_client_create_sandbox(c, NULL, &o, &again, &err) != ASB_OK)
        fprintf(stderr, "    adopt: %s\n", err.message);
    ASBT_CHECK(again == sb); /* one handle per claim: the second one went */
    if (asb_process_write_stdin(m->proc, "hello\n", 6, &err) != ASB_OK)
        fprintf(stderr, "    stdin: %s\n", err.message);
    if (asb_process_wait(m->proc, 60000, &code, &err) != ASB_OK)
        fprintf(stderr, "    wait: %s\n", err.message);
    ASBT_EQ_INT(code, 0);
    pthread_mutex_lock(&m->out.mu);
    snprintf(out, sizeof out, "%s", m->out.text);
    pthread_mutex_unlock(&m->out.mu);
    ASBT_EQ_STR(out, "got:hello\n");
    asb_process_free(m->proc);
    m->proc = NULL;
    r = asb_sandbox_run(sb, "echo still", 60000, &rr, &err);
    snprintf(out, sizeof out, "%s", r == ASB_OK && rr.out.ptr ? rr.out.ptr : "");
    asb_run_result_free(&rr);
    ASBT_EQ_RES(r, ASB_OK);
    ASBT_EQ_STR(out, "still\n");
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    /* read under the lock, checked after it: a failed check leaves the
       body, and the client's free takes that lock */
    pthread_mutex_lock(&c->conn_lock);
    pfs_left = c->pod_pfs != NULL;
    pthread_mutex_unlock(&c->conn_lock);
    ASBT_EQ_INT(pfs_left, 0); /* the pod's last handle took its forwards */
}

typedef struct many_arg {
    asb_portforward *pf;
    int ok;
} many_arg;

static void *one_stream(void *p) {
    many_arg *a = (many_arg *)p;
    asb_buf got;
    int fd = -1, i;
    asb_buf_init(&got, NULL);
    if (asb_portforward_dial(a->pf, &fd, NULL) == ASB_OK) {
        for (i = 0; i < 3; i++)
            if (send_all(fd, get_root, sizeof get_root - 1) == 0 && read_response(fd, &got) == 1 &&
                strstr(got.ptr, "X-Sandbox-ID header is required"))
                a->ok++;
        close(fd);
    }
    asb_buf_free(&got);
    return NULL;
}

MADE_TEST(eight_streams_at_once_each_with_its_own_websocket) {
    asb_error err;
    asb_kube_client *kc = m->kc[0] = connect_as("admin", &err);
    asb_portforward *pf;
    pthread_t th[8];
    many_arg a[8];
    unsigned long opened = 0, live = 1;
    int i, total = 0;
    int64_t until;
    ASBT_CHECK(kc != NULL);
    pf = m->pf[0] = router_forward(kc, "8080");
    ASBT_CHECK(pf != NULL);
    for (i = 0; i < 8; i++) {
        a[i].pf = pf;
        a[i].ok = 0;
        pthread_create(&th[i], NULL, one_stream, &a[i]);
    }
    for (i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        total += a[i].ok;
    }
    ASBT_EQ_INT(total, 24);
    /* every relay ends once its socket is closed */
    until = asb__now_ms() + 20000;
    do {
        asb_portforward_counts(pf, &opened, &live);
        if (live) usleep(20000);
    } while (live && asb__now_ms() < until);
    ASBT_EQ_INT((int)opened, 8);
    ASBT_EQ_INT((int)live, 0);
}

ASBT_LIST(ASBT_CASE(service_resolves_to_the_ready_router_pod_by_port_number_or_name)
          ASBT_CASE(named_target_port_is_looked_up_in_the_chosen_pod)
          ASBT_CASE(no_ready_pod_behind_the_service_is_a_clear_error)
          ASBT_CASE(stream_carries_http_both_ways_like_the_routers_own_port)
          ASBT_CASE(every_credential_kind_can_port_forward)
          ASBT_CASE(user_without_pods_portforward_gets_the_apiservers_403)
          ASBT_CASE(error_channel_text_becomes_the_stream_error)
          ASBT_CASE(dial_rides_the_apiservers_spdy_tunnel_or_v4_on_request)
          ASBT_CASE(pod_that_does_not_exist_is_not_found)
          ASBT_CASE(websocket_speaks_v4_channels_with_the_kubelet)
          ASBT_CASE(websocket_resumes_the_tls_session_of_the_clients_requests)
          ASBT_CASE(server_refusing_the_upgrade_suggests_the_kubectl_tunnel)
          ASBT_CASE(http_client_dials_through_the_forward_and_re_resolves_after_a_failure)
          ASBT_CASE(sandboxd_pod_answers_http1_and_grpc_over_http2_through_the_forward)
          ASBT_CASE(eight_streams_at_once_each_with_its_own_websocket)
          ASBT_CASE(native_mode_drives_a_sandbox_with_no_kubectl_and_no_child_process)
          ASBT_CASE(native_mode_fails_clearly_while_the_router_is_down_and_recovers)
          ASBT_CASE(native_mode_drives_a_sandboxd_sandbox_over_both_ports)
          ASBT_CASE(native_mode_a_second_handle_to_the_claim_going_leaves_the_first_ones_streams))
ASBT_MAIN()
