/* What a static binary in a minimal container relies on (issue 16): a
   bounded stack, no TLS setup for http://, SSL_CERT_FILE / SSL_CERT_DIR,
   name resolution that cannot outlast the connect timeout. Runs under
   tests/http/with-peers.sh against the real peers (nginx, the fault
   server); built with glibc + mbedTLS 2.28 and 3.6, and with musl
   (make test-static). Not under ASan: ASan's redzones would make the
   stack figure meaningless. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include "asbtest.h"
#include <pthread.h>

/* The documented figure (README "Use in your build"): no request path
   needs more than this much stack. */
#define STACK_BUDGET (32 * 1024)
/* The thread the paths run in: twice the budget, so a regression shows as
   a failed check on the measured figure, not only as a crash. */
#define THREAD_STACK (64 * 1024)

static const char *env(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) {
        fprintf(stderr, "test_static: %s is not set: run under tests/http/with-peers.sh\n",
                name);
        exit(2);
    }
    return v;
}

/* -- the stack budget ------------------------------------------------------- */

typedef struct stack_run {
    void (*fn)(struct stack_run *);
    asb_result r[4];
    int status[4];
    char msg[sizeof(((asb_error *)0)->message) + 1];
} stack_run;

static void *stack_thread(void *arg) {
    stack_run *s = (stack_run *)arg;
    s->fn(s);
    return NULL;
}

/* Runs fn on a fresh THREAD_STACK-byte stack painted with a pattern and
   returns how many bytes of it were ever written (the high-water mark). */
static size_t run_on_small_stack(stack_run *s) {
    pthread_attr_t at;
    pthread_t th;
    unsigned char *mem;
    size_t used, i;
    mem = (unsigned char *)malloc(THREAD_STACK);
    if (!mem) return (size_t)-1;
    memset(mem, 0xa5, THREAD_STACK);
    pthread_attr_init(&at);
    if (pthread_attr_setstack(&at, mem, THREAD_STACK) != 0 ||
        pthread_create(&th, &at, stack_thread, s) != 0) {
        pthread_attr_destroy(&at);
        free(mem);
        return (size_t)-1;
    }
    pthread_join(th, NULL);
    pthread_attr_destroy(&at);
    /* stacks grow down on every target we test: the untouched part is at
       the low end */
    for (i = 0; i < THREAD_STACK && mem[i] == 0xa5; i++) {
    }
    used = THREAD_STACK - i;
    free(mem);
    return used;
}

typedef struct body_src {
    size_t left;
} body_src;
static long body_read(void *user, char *buf, size_t cap) {
    body_src *b = (body_src *)user;
    size_t n = b->left < cap ? b->left : cap;
    memset(buf, 'x', n);
    b->left -= n;
    return (long)n;
}

/* An HTTPS GET (a full handshake, certificate verification), a streamed
   upload, and a kubeconfig load and Kubernetes call over TLS. */
static void http_paths(stack_run *s) {
    asb_http_client_desc d;
    asb_http_client *cl = NULL;
    asb_http_request req;
    asb_http_response resp;
    asb_error err;
    body_src src;
    char u[256];
    memset(&d, 0, sizeof d);
    memset(&resp, 0, sizeof resp);
    d.tls.ca_file = env("ASB_PEER_CERTS_CA");
    s->r[0] = asb_http_client_create(&d, &cl, &err);
    if (s->r[0] != ASB_OK) return;
    memset(&req, 0, sizeof req);
    snprintf(u, sizeof u, "https://localhost:%s/small.txt", env("ASB_PEER_NGINX_HTTPS"));
    req.url = u;
    s->r[1] = asb_http_do(cl, &req, &resp, &err);
    s->status[1] = resp.status;
    if (s->r[1] != ASB_OK) snprintf(s->msg, sizeof s->msg, "%s", err.message);
    asb_http_response_free(&resp);
    memset(&req, 0, sizeof req);
    snprintf(u, sizeof u, "http://127.0.0.1:%s/echo", env("ASB_PEER_FAULT_PORT"));
    req.url = u;
    req.method = "POST";
    src.left = 300000;
    req.body_read = body_read;
    req.body_read_user = &src;
    req.body_len = src.left;
    s->r[2] = asb_http_do(cl, &req, &resp, &err);
    s->status[2] = resp.status;
    if (s->r[2] != ASB_OK) snprintf(s->msg, sizeof s->msg, "%s", err.message);
    asb_http_response_free(&resp);
    asb_http_client_free(cl);
}

ASBT_TEST(https_and_a_streamed_upload_fit_in_32_kib_of_stack) {
    stack_run s;
    size_t used;
    memset(&s, 0, sizeof s);
    s.fn = http_paths;
    used = run_on_small_stack(&s);
    printf("    stack used: %zu bytes of %d (budget %d)\n", used, THREAD_STACK, STACK_BUDGET);
    if (s.msg[0]) printf("    %s\n", s.msg);
    ASBT_EQ_RES(s.r[0], ASB_OK);
    ASBT_EQ_RES(s.r[1], ASB_OK);
    ASBT_EQ_INT(s.status[1], 200);
    ASBT_EQ_RES(s.r[2], ASB_OK);
    ASBT_EQ_INT(s.status[2], 200);
    ASBT_CHECK(used <= STACK_BUDGET);
}

static void kube_paths(stack_run *s) {
    char path[] = "/tmp/asb-static-kc-XXXXXX";
    int fd = mkstemp(path);
    FILE *fp;
    asb_kube_client_desc d;
    asb_kube_client *kcl = NULL;
    asb_buf out;
    asb_error err;
    if (fd < 0) return;
    fp = fdopen(fd, "w");
    fprintf(fp,
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
            "clusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:%s\n"
            "    certificate-authority: %s\n"
            "users:\n- name: u\n  user:\n    token: not-a-real-token\n"
            "contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n",
            env("ASB_PEER_NGINX_HTTPS"), env("ASB_PEER_CERTS_CA"));
    fclose(fp);
    memset(&d, 0, sizeof d);
    d.kubeconfig.path = path;
    /* loading the kubeconfig (the YAML parser, the file read) and a GET
       through the Kubernetes layer; nginx answers 200 for a file it has */
    s->r[0] = asb_kube_client_create(&d, &kcl, &err);
    unlink(path);
    if (s->r[0] != ASB_OK) {
        snprintf(s->msg, sizeof s->msg, "%s", err.message);
        return;
    }
    asb_buf_init(&out, NULL);
    s->r[1] = asb_kube_request(kcl, "GET", "/small.txt", NULL, NULL, 0, &out, &err);
    if (s->r[1] != ASB_OK) snprintf(s->msg, sizeof s->msg, "%s", err.message);
    s->status[1] = out.len == 17 && memcmp(out.ptr, "hello from nginx\n", 17) == 0;
    asb_buf_free(&out);
    asb_kube_client_free(kcl);
}

ASBT_TEST(kubeconfig_load_and_a_kubernetes_call_over_tls_fit_in_32_kib_of_stack) {
    stack_run s;
    size_t used;
    memset(&s, 0, sizeof s);
    s.fn = kube_paths;
    used = run_on_small_stack(&s);
    printf("    stack used: %zu bytes of %d (budget %d)\n", used, THREAD_STACK, STACK_BUDGET);
    if (s.msg[0]) printf("    %s\n", s.msg);
    ASBT_EQ_RES(s.r[0], ASB_OK);
    ASBT_EQ_RES(s.r[1], ASB_OK);
    ASBT_EQ_INT(s.status[1], 1);
    ASBT_CHECK(used <= STACK_BUDGET);
}

/* -- TLS only when asked for ------------------------------------------------ */

static size_t tls_allocs;
static void *count_alloc(size_t n, void *u) {
    (void)u;
    if (n == sizeof(asb__tls)) tls_allocs++; /* the TLS context */
    return malloc(n);
}
static void *count_realloc(void *p, size_t n, void *u) {
    (void)u;
    return realloc(p, n);
}
static void count_free(void *p, void *u) {
    (void)u;
    free(p);
}

ASBT_TEST(an_http_only_client_sets_up_no_tls) {
    asb_allocator a;
    asb_http_client_desc d;
    asb_http_client *cl = NULL;
    asb_http_request req;
    asb_http_response resp;
    asb_error err;
    char u[256];
    memset(&d, 0, sizeof d);
    memset(&resp, 0, sizeof resp);
    a.alloc_fn = count_alloc;
    a.realloc_fn = count_realloc;
    a.free_fn = count_free;
    a.user_data = NULL;
    d.allocator = &a;
    tls_allocs = 0;
    ASBT_EQ_RES(asb_http_client_create(&d, &cl, &err), ASB_OK);
    memset(&req, 0, sizeof req);
    snprintf(u, sizeof u, "http://127.0.0.1:%s/small.txt", env("ASB_PEER_NGINX_HTTP"));
    req.url = u;
    ASBT_EQ_RES(asb_http_do(cl, &req, &resp, &err), ASB_OK);
    asb_http_response_free(&resp);
#if ASB_TLS
    ASBT_EQ_INT(cl->tls == NULL, 1); /* no PSA, no DRBG, no CA bundle read */
    ASBT_EQ_INT(tls_allocs, 0);
    /* the first https:// connection sets it up (and verifies) */
    snprintf(u, sizeof u, "https://localhost:%s/small.txt", env("ASB_PEER_NGINX_HTTPS"));
    req.url = u;
    setenv("SSL_CERT_FILE", env("ASB_PEER_CERTS_CA"), 1);
    ASBT_EQ_RES(asb_http_do(cl, &req, &resp, &err), ASB_OK);
    unsetenv("SSL_CERT_FILE");
    ASBT_EQ_INT(cl->tls != NULL, 1);
    asb_http_response_free(&resp);
#endif
    asb_http_client_free(cl);
}

/* -- SSL_CERT_FILE / SSL_CERT_DIR ------------------------------------------- */

static asb_result get_default_tls(const char *host, asb_error *err) {
    asb_http_client_desc d;
    asb_http_client *cl = NULL;
    asb_http_request req;
    asb_http_response resp;
    char u[256];
    asb_result r;
    memset(&d, 0, sizeof d);
    memset(&resp, 0, sizeof resp);
    r = asb_http_client_create(&d, &cl, err);
    if (r != ASB_OK) return r;
    memset(&req, 0, sizeof req);
    snprintf(u, sizeof u, "https://%s:%s/small.txt", host, env("ASB_PEER_NGINX_HTTPS"));
    req.url = u;
    r = asb_http_do(cl, &req, &resp, err);
    asb_http_response_free(&resp);
    asb_http_client_free(cl);
    return r;
}

ASBT_TEST(ssl_cert_file_and_dir_replace_the_system_bundle_and_are_named_when_empty) {
#if ASB_TLS
    asb_error err;
    char dirs[600];
    /* the test CA is in no system bundle: without the variables, refused */
    unsetenv("SSL_CERT_FILE");
    unsetenv("SSL_CERT_DIR");
    ASBT_CHECK(get_default_tls("localhost", &err) != ASB_OK);
    setenv("SSL_CERT_FILE", env("ASB_PEER_CERTS_CA"), 1);
    ASBT_EQ_RES(get_default_tls("localhost", &err), ASB_OK);
    ASBT_EQ_RES(get_default_tls("127.0.0.1", &err), ASB_OK);
    unsetenv("SSL_CERT_FILE");
    setenv("SSL_CERT_DIR", "/nonexistent-dir:" , 1);
    ASBT_EQ_RES(get_default_tls("localhost", &err), ASB_ERR_TLS_CONFIG);
    ASBT_CONTAINS(err.message, "SSL_CERT_FILE / SSL_CERT_DIR name no readable certificate");
    snprintf(dirs, sizeof dirs, "/nonexistent-dir:%s", env("ASB_PEER_CERTS_CADIR"));
    setenv("SSL_CERT_DIR", dirs, 1);
    ASBT_EQ_RES(get_default_tls("localhost", &err), ASB_OK);
    unsetenv("SSL_CERT_DIR");
    setenv("SSL_CERT_FILE", "/nonexistent/ca.pem", 1);
    ASBT_EQ_RES(get_default_tls("localhost", &err), ASB_ERR_TLS_CONFIG);
    ASBT_CONTAINS(err.message, "SSL_CERT_FILE");
    unsetenv("SSL_CERT_FILE");
#endif
}

ASBT_LIST(ASBT_CASE(https_and_a_streamed_upload_fit_in_32_kib_of_stack)
          ASBT_CASE(kubeconfig_load_and_a_kubernetes_call_over_tls_fit_in_32_kib_of_stack)
          ASBT_CASE(an_http_only_client_sets_up_no_tls)
          ASBT_CASE(ssl_cert_file_and_dir_replace_the_system_bundle_and_are_named_when_empty))
ASBT_MAIN()
