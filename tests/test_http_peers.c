/* HTTP/TLS against real peers: nginx (Debian), Python ssl servers
   (OpenSSL), and the scripted fault server for what real servers will not
   do on demand. Run under tests/http/with-peers.sh, which exports the
   ASB_PEER_* variables; built against mbedTLS 2.28 and 3.6. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include "asbtest.h"
#include "logsink.h"
#include <dirent.h>
#include <sys/resource.h>
#include <pthread.h>
#include <sys/prctl.h>

static const char *env(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) {
        fprintf(stderr, "test_http_peers: %s is not set: run under tests/http/with-peers.sh\n",
                name);
        exit(2);
    }
    return v;
}

static char urlbuf[8][512];
static int urlnext;
/* A URL in a rotating static buffer, so tests read naturally. */
static const char *url(const char *fmt, ...) ASB__PRINTF(1, 2);
static const char *url(const char *fmt, ...) {
    va_list ap;
    char *u = urlbuf[urlnext++ % 8];
    va_start(ap, fmt);
    vsnprintf(u, sizeof urlbuf[0], fmt, ap);
    va_end(ap);
    return u;
}
#define FAULT(path) url("http://127.0.0.1:%s%s", env("ASB_PEER_FAULT_PORT"), path)

static int count_fds(void) {
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    if (d) closedir(d);
    return n;
}

typedef struct fixture {
    asb_http_client *cl;
    asb_http_client_desc d;
    asb_http_request req;
    asb_http_response resp;
    asb_error err;
    int fds;
} fixture;

static asb_result fx_open(fixture *f) {
    f->fds = count_fds();
    f->d.retry.backoff_ms = f->d.retry.backoff_ms ? f->d.retry.backoff_ms : 10;
    return asb_http_client_create(&f->d, &f->cl, &f->err);
}
static asb_result fx_get(fixture *f, const char *u) {
    asb_http_response_free(&f->resp);
    memset(&f->req, 0, sizeof f->req);
    f->req.url = u;
    return asb_http_do(f->cl, &f->req, &f->resp, &f->err);
}
static asb_result fx_do(fixture *f) {
    asb_http_response_free(&f->resp);
    return asb_http_do(f->cl, &f->req, &f->resp, &f->err);
}
/* Frees everything; returns the number of fds leaked. */
static int fx_close(fixture *f) {
    asb_http_response_free(&f->resp);
    asb_http_client_free(f->cl);
    f->cl = NULL;
    return count_fds() - f->fds;
}
static fixture *fx_new(void) {
    fixture *f = (fixture *)calloc(1, sizeof(fixture));
    return f;
}

static int64_t counter(const char *key) {
    fixture f;
    int64_t n = -1;
    asb_json_doc doc;
    memset(&f, 0, sizeof f);
    if (fx_open(&f) != ASB_OK) return -1;
    if (fx_get(&f, FAULT(url("/count/%s", key))) == ASB_OK &&
        asb_json_doc_parse(&doc, f.resp.body.ptr, f.resp.body.len, NULL, NULL) == ASB_OK) {
        asb_json_get_int64(&doc, asb_json_find(&doc, 0, "count"), &n);
        asb_json_doc_free(&doc);
    }
    fx_close(&f);
    return n;
}

/* -- nginx -------------------------------------------------------------------- */

ASBT_TEST(nginx_serves_small_files_over_one_kept_alive_connection) {
    fixture *f = fx_new();
    int i;
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    for (i = 0; i < 20; i++) {
        ASBT_EQ_RES(fx_get(f, url("http://127.0.0.1:%s/small.txt", env("ASB_PEER_NGINX_HTTP"))),
                    ASB_OK);
        ASBT_EQ_INT(f->resp.status, 200);
        ASBT_EQ_STR(f->resp.body.ptr, "hello from nginx\n");
        ASBT_EQ_STR(asb_http_response_header(&f->resp, "content-length"), "17");
        ASBT_EQ_INT(f->cl->idle_count, 1); /* the same connection, back in the pool */
    }
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

ASBT_TEST(nginx_chunked_response_is_reassembled) {
    fixture *f = fx_new();
    asb_buf want;
    int i;
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(fx_get(f, url("http://127.0.0.1:%s/4k.bin", env("ASB_PEER_NGINX_HTTP"))), ASB_OK);
    asb_buf_init(&want, NULL);
    for (i = 0; i < 16; i++) asb_buf_append(&want, f->resp.body.ptr, f->resp.body.len);
    ASBT_EQ_RES(fx_get(f, url("http://127.0.0.1:%s/chunked/64k.html", env("ASB_PEER_NGINX_HTTP"))),
                ASB_OK);
    ASBT_CHECK(asb_http_response_header(&f->resp, "content-length") == NULL);
    ASBT_EQ_STR(asb_http_response_header(&f->resp, "transfer-encoding"), "chunked");
    ASBT_EQ_MEM(f->resp.body.ptr, f->resp.body.len, want.ptr, want.len);
    asb_buf_free(&want);
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

typedef struct counting {
    uint64_t bytes;
    uint32_t sum;
} counting;
static asb_result count_bytes(void *ud, const char *p, size_t n) {
    counting *c = (counting *)ud;
    size_t i;
    for (i = 0; i < n; i++) c->sum = c->sum * 31u + (unsigned char)p[i];
    c->bytes += n;
    return ASB_OK;
}

ASBT_TEST(large_download_streams_with_flat_memory) {
    fixture *f = fx_new();
    counting c;
    struct rusage before, after;
    memset(&c, 0, sizeof c);
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    getrusage(RUSAGE_SELF, &before);
    memset(&f->req, 0, sizeof f->req);
    f->req.url = url("http://127.0.0.1:%s/big.bin", env("ASB_PEER_NGINX_HTTP"));
    f->req.on_body = count_bytes;
    f->req.on_body_user = &c;
    ASBT_EQ_RES(fx_do(f), ASB_OK);
    getrusage(RUSAGE_SELF, &after);
    ASBT_EQ_INT(c.bytes, 256u << 20);
    ASBT_EQ_INT(f->resp.body.len, 0);
    /* the body never sits in memory: growth well under its size */
    ASBT_CHECK(after.ru_maxrss - before.ru_maxrss < 16 * 1024);
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

ASBT_TEST(buffered_body_cap_is_exact) {
    fixture *f = fx_new();
    f->d.max_body_bytes = 1000;
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(fx_get(f, FAULT("/bytes/1000")), ASB_OK);
    ASBT_EQ_INT(f->resp.body.len, 1000);
    ASBT_EQ_RES(fx_get(f, FAULT("/bytes/1001")), ASB_ERR_TOO_LARGE);
    ASBT_CONTAINS(f->err.message, "1000-byte cap");
    ASBT_EQ_RES(fx_get(f, FAULT("/chunked-multi/5000")), ASB_ERR_TOO_LARGE);
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

/* -- TLS ------------------------------------------------------------------------ */

static asb_result tls_get(fixture *f, const char *host, const char *port_var) {
    return fx_get(f, url("https://%s:%s/small.txt", host, env(port_var)));
}

ASBT_TEST(https_verifies_against_ca_file_dir_pem_and_der) {
    fixture *f = fx_new();
    asb_buf pem, der;
    FILE *fp;
    char chunk[4096];
    size_t n;
    ASBT_EQ_RES((f->d.tls.ca_file = env("ASB_PEER_CERTS_CA"), fx_open(f)), ASB_OK);
    ASBT_EQ_RES(tls_get(f, "localhost", "ASB_PEER_NGINX_HTTPS"), ASB_OK);
    ASBT_EQ_RES(tls_get(f, "127.0.0.1", "ASB_PEER_NGINX_HTTPS"), ASB_OK); /* IP SAN */
    if (atoi(env("ASB_PEER_IPV6")))
        ASBT_EQ_RES(tls_get(f, "[::1]", "ASB_PEER_NGINX_HTTPS"), ASB_OK);
    ASBT_EQ_RES(tls_get(f, "localhost", "ASB_PEER_NGINX_HTTPS_EC"), ASB_OK);
    ASBT_EQ_INT(fx_close(f), 0);

    memset(&f->d, 0, sizeof f->d);
    f->d.tls.ca_dir = env("ASB_PEER_CERTS_CADIR");
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(tls_get(f, "localhost", "ASB_PEER_TLS_OK"), ASB_OK);
    ASBT_EQ_RES(tls_get(f, "localhost", "ASB_PEER_TLS_OTHERCA"), ASB_ERR_TLS_VERIFY);
    ASBT_EQ_INT(fx_close(f), 0);

    asb_buf_init(&pem, NULL);
    asb_buf_init(&der, NULL);
    fp = fopen(env("ASB_PEER_CERTS_BUNDLE"), "rb");
    ASBT_CHECK(fp != NULL);
    while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0) asb_buf_append(&pem, chunk, n);
    fclose(fp);
    fp = fopen(env("ASB_PEER_CERTS_CA_DER"), "rb");
    ASBT_CHECK(fp != NULL);
    while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0) asb_buf_append(&der, chunk, n);
    fclose(fp);
    memset(&f->d, 0, sizeof f->d);
    f->d.tls.ca_data = pem.ptr; /* two CAs in one PEM bundle, no NUL */
    f->d.tls.ca_data_len = pem.len;
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(tls_get(f, "localhost", "ASB_PEER_TLS_OTHERCA"), ASB_OK);
    ASBT_EQ_INT(fx_close(f), 0);
    memset(&f->d, 0, sizeof f->d);
    f->d.tls.ca_data = der.ptr;
    f->d.tls.ca_data_len = der.len;
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(tls_get(f, "localhost", "ASB_PEER_TLS_OK"), ASB_OK);
    ASBT_EQ_INT(fx_close(f), 0);
    asb_buf_free(&pem);
    asb_buf_free(&der);
    free(f);
}

ASBT_TEST(certificate_failures_say_why) {
    static const struct {
        const char *host, *port, *why;
    } cases[] = {
        {"localhost", "ASB_PEER_TLS_WRONGNAME", "name mismatch"},
        {"localhost", "ASB_PEER_TLS_EXPIRED", "expired"},
        {"localhost", "ASB_PEER_TLS_FUTURE", "not yet valid"},
        {"localhost", "ASB_PEER_TLS_OTHERCA", "unknown CA"},
        {"127.0.0.1", "ASB_PEER_TLS_DNSONLY", "no IP-address SAN"},
        {"localhost", "ASB_PEER_TLS_IPONLY", "name mismatch"},
    };
    size_t i;
    fixture *f = fx_new();
    f->d.tls.ca_file = env("ASB_PEER_CERTS_CA");
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ASBT_EQ_RES(tls_get(f, cases[i].host, cases[i].port), ASB_ERR_TLS_VERIFY);
        ASBT_CONTAINS(f->err.message, cases[i].why);
        ASBT_CONTAINS(f->err.message, "mbedTLS -0x");
        { /* the endpoint is named with its port */
            char at[64];
            snprintf(at, sizeof at, "certificate of %s:%s is", cases[i].host,
                     env(cases[i].port));
            ASBT_CONTAINS(f->err.message, at);
        }
        ASBT_EQ_INT(f->resp.attempts, 1); /* a bad certificate is not retried */
    }
    ASBT_EQ_RES(tls_get(f, "127.0.0.1", "ASB_PEER_TLS_IPONLY"), ASB_OK);
    ASBT_CONTAINS(f->resp.body.ptr, "\"sni\": null"); /* no SNI for an address */
    ASBT_EQ_RES(tls_get(f, "localhost", "ASB_PEER_TLS_DNSONLY"), ASB_OK);
    ASBT_CONTAINS(f->resp.body.ptr, "\"sni\": \"localhost\"");
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

ASBT_TEST(server_name_override_and_insecure_mode) {
    fixture *f = fx_new();
    asb_json_doc doc;
    f->d.tls.ca_file = env("ASB_PEER_CERTS_CA");
    f->d.tls.server_name = "other.example";
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(tls_get(f, "127.0.0.1", "ASB_PEER_TLS_WRONGNAME"), ASB_OK);
    ASBT_EQ_RES(asb_json_doc_parse(&doc, f->resp.body.ptr, f->resp.body.len, NULL, NULL), ASB_OK);
    ASBT_CHECK(asb_json_string_eq(&doc, asb_json_find(&doc, 0, "sni"), "other.example", 13));
    ASBT_CHECK(asb_json_string_eq(&doc, asb_json_find(&doc, 0, "alpn"), "http/1.1", 8));
    asb_json_doc_free(&doc);
    ASBT_EQ_RES(tls_get(f, "localhost", "ASB_PEER_TLS_OK"), ASB_ERR_TLS_VERIFY);
    ASBT_EQ_INT(fx_close(f), 0);
    memset(&f->d, 0, sizeof f->d);
    f->d.tls.insecure_skip_verify = 1;
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(tls_get(f, "localhost", "ASB_PEER_TLS_EXPIRED"), ASB_OK);
    ASBT_EQ_RES(tls_get(f, "127.0.0.1", "ASB_PEER_TLS_WRONGNAME"), ASB_OK);
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

ASBT_TEST(mutual_tls_with_rsa_and_ec_client_certificates) {
    static const char *names[] = {"client-rsa", "client-ec"};
    char cert[512], key[512];
    size_t i;
    fixture *f = fx_new();
    for (i = 0; i < 2; i++) {
        asb_json_doc doc;
        snprintf(cert, sizeof cert, "%s/%s.crt", env("ASB_PEER_CERTS_DIR"), names[i]);
        snprintf(key, sizeof key, "%s/%s.key", env("ASB_PEER_CERTS_DIR"), names[i]);
        memset(&f->d, 0, sizeof f->d);
        f->d.tls.ca_file = env("ASB_PEER_CERTS_CA");
        f->d.tls.client_cert_file = cert;
        f->d.tls.client_key_file = key;
        ASBT_EQ_RES(fx_open(f), ASB_OK);
        ASBT_EQ_RES(tls_get(f, "localhost", "ASB_PEER_TLS_MTLS"), ASB_OK);
        ASBT_EQ_RES(asb_json_doc_parse(&doc, f->resp.body.ptr, f->resp.body.len, NULL, NULL),
                    ASB_OK);
        {
            char subj[200];
            ASBT_EQ_RES(asb_json_get_string(&doc, asb_json_find(&doc, 0, "client_cert_subject"),
                                            subj, sizeof subj, NULL),
                        ASB_OK);
            ASBT_CONTAINS(subj, names[i]);
        }
        asb_json_doc_free(&doc);
        ASBT_EQ_INT(fx_close(f), 0);
    }
    /* the same from memory, as kubeconfig's *-data fields give it */
    {
        asb_buf c, k;
        FILE *fp;
        char chunk[4096];
        size_t n;
        asb_buf_init(&c, NULL);
        asb_buf_init(&k, NULL);
        snprintf(cert, sizeof cert, "%s/client-ec.crt", env("ASB_PEER_CERTS_DIR"));
        snprintf(key, sizeof key, "%s/client-ec.key", env("ASB_PEER_CERTS_DIR"));
        fp = fopen(cert, "rb");
        while (fp && (n = fread(chunk, 1, sizeof chunk, fp)) > 0) asb_buf_append(&c, chunk, n);
        if (fp) fclose(fp);
        fp = fopen(key, "rb");
        while (fp && (n = fread(chunk, 1, sizeof chunk, fp)) > 0) asb_buf_append(&k, chunk, n);
        if (fp) fclose(fp);
        memset(&f->d, 0, sizeof f->d);
        f->d.tls.ca_file = env("ASB_PEER_CERTS_CA");
        f->d.tls.client_cert_data = c.ptr;
        f->d.tls.client_cert_data_len = c.len;
        f->d.tls.client_key_data = k.ptr;
        f->d.tls.client_key_data_len = k.len;
        ASBT_EQ_RES(fx_open(f), ASB_OK);
        ASBT_EQ_RES(tls_get(f, "localhost", "ASB_PEER_TLS_MTLS"), ASB_OK);
        ASBT_EQ_INT(fx_close(f), 0);
        asb_buf_free(&c);
        asb_buf_free(&k);
    }
    /* without a certificate the server refuses the handshake */
    memset(&f->d, 0, sizeof f->d);
    f->d.tls.ca_file = env("ASB_PEER_CERTS_CA");
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_CHECK(tls_get(f, "localhost", "ASB_PEER_TLS_MTLS") != ASB_OK);
    ASBT_EQ_INT(fx_close(f), 0);
    /* half a client identity is a configuration error */
    memset(&f->d, 0, sizeof f->d);
    f->d.tls.client_cert_file = cert;
    ASBT_EQ_RES(fx_open(f), ASB_ERR_TLS_CONFIG);
    ASBT_CONTAINS(f->err.message, "needs its key");
    free(f);
}

ASBT_TEST(tls12_and_tls13_servers) {
    fixture *f = fx_new();
    asb_result r13;
    f->d.tls.ca_file = env("ASB_PEER_CERTS_CA");
    ASBT_EQ_RES(fx_open(f), ASB_OK);
#if MBEDTLS_VERSION_NUMBER >= 0x03000000
    {
        /* mbedTLS 3.6.6 cannot verify a TLS 1.2 RSA-PSS ServerKeyExchange
           (its bug, see asb__sig_algs): a server that insists on PSS fails
           cleanly; one that follows our order works */
        asb_result r12 = tls_get(f, "localhost", "ASB_PEER_TLS_TLS12");
        ASBT_CHECK(r12 == ASB_OK || r12 == ASB_ERR_TLS_HANDSHAKE);
    }
#else
    ASBT_EQ_RES(tls_get(f, "localhost", "ASB_PEER_TLS_TLS12"), ASB_OK);
#endif
    ASBT_EQ_RES(tls_get(f, "localhost", "ASB_PEER_TLS_TLS12_CLIENTORDER"), ASB_OK);
    ASBT_CONTAINS(f->resp.body.ptr, "TLSv1.2");
    ASBT_EQ_RES(tls_get(f, "localhost", "ASB_PEER_TLS_TLS12_EC"), ASB_OK);
    r13 = tls_get(f, "localhost", "ASB_PEER_TLS_TLS13");
#if defined(MBEDTLS_SSL_PROTO_TLS1_3)
    ASBT_EQ_RES(r13, ASB_OK);
    ASBT_CONTAINS(f->resp.body.ptr, "TLSv1.3");
#else
    /* mbedTLS 2.28 speaks no TLS 1.3: a clear handshake error */
    ASBT_EQ_RES(r13, ASB_ERR_TLS_HANDSHAKE);
    ASBT_CONTAINS(f->err.message, "tls handshake");
#endif
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

/* openssl s_server speaking only `version` (-tls1, -tls1_1), with the
   ciphers OpenSSL 3 keeps for them (SECLEVEL=0), on a port it picks (its
   "ACCEPT 127.0.0.1:N" line says which); -www answers a GET with a page
   naming the protocol. Returns the port, or -1. */
static int tls_server_start(const char *version, const char *extra, const char *extra_arg,
                            pid_t *pid);
static int old_tls_server_start(const char *version, pid_t *pid) {
    return tls_server_start(version, NULL, NULL, pid);
}

/* The same, with one more option and its argument (NULL: none). */
static int tls_server_start(const char *version, const char *extra, const char *extra_arg,
                            pid_t *pid) {
    int out[2], port = -1;
    char line[128];
    size_t n = 0;
    char crt[600], key[600];
    pid_t parent = getpid();
    snprintf(crt, sizeof crt, "%s/server.crt", env("ASB_PEER_CERTS_DIR"));
    snprintf(key, sizeof key, "%s/server.key", env("ASB_PEER_CERTS_DIR"));
    if (pipe(out) != 0) return -1;
    *pid = fork();
    if (*pid == 0) {
        int null = open("/dev/null", O_RDWR);
        /* gone with the test, even one that fails before it stops it */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(1);
        dup2(out[1], 1);
        if (null >= 0) dup2(null, 2);
        close(out[0]);
        close(out[1]);
        execlp("openssl", "openssl", "s_server", "-accept", "127.0.0.1:0", "-cert", crt, "-key",
               key, version, "-cipher", "DEFAULT@SECLEVEL=0", "-www", extra, extra_arg,
               (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    while (*pid > 0 && n < sizeof line - 1) { /* the first lines, up to ACCEPT */
        char ch;
        struct pollfd pf;
        pf.fd = out[0];
        pf.events = POLLIN;
        if (poll(&pf, 1, 20000) != 1 || read(out[0], &ch, 1) != 1) break;
        if (ch != '\n') {
            line[n++] = ch;
            continue;
        }
        line[n] = '\0';
        n = 0;
        if (sscanf(line, "ACCEPT 127.0.0.1:%d", &port) == 1) break;
    }
    close(out[0]);
    return port;
}

static void old_tls_server_stop(pid_t pid) {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

/* What `openssl s_client`, offering everything up to TLS 1.3, negotiates
   with the server: proof that the server offers nothing newer, so the
   client's refusal below is the client's doing. */
static int s_client_protocol(int port, char *proto, size_t cap) {
    char cmd[256], line[256];
    FILE *p;
    int found = 0;
    snprintf(cmd, sizeof cmd,
             "openssl s_client -connect 127.0.0.1:%d -cipher DEFAULT@SECLEVEL=0 "
             "</dev/null 2>&1",
             port);
    p = popen(cmd, "r");
    if (!p) return 0;
    while (fgets(line, sizeof line, p))
        if (!found && cap >= 32 && sscanf(line, " Protocol : %31s", proto) == 1) found = 1;
    pclose(p);
    return found;
}

ASBT_TEST(tls_1_0_and_1_1_servers_are_refused) {
    static const char *const versions[][2] = {{"-tls1", "TLSv1"}, {"-tls1_1", "TLSv1.1"}};
    size_t i;
    for (i = 0; i < 2; i++) {
        fixture *f = fx_new();
        pid_t pid = 0;
        char proto[64] = "";
        int port = old_tls_server_start(versions[i][0], &pid);
        ASBT_CHECK(port > 0);
        ASBT_CHECK(s_client_protocol(port, proto, sizeof proto));
        ASBT_EQ_STR(proto, versions[i][1]); /* the server speaks this and only this */
        f->d.tls.ca_file = env("ASB_PEER_CERTS_CA");
        f->d.retry.max_attempts = 1;
        ASBT_EQ_RES(fx_open(f), ASB_OK);
        if (fx_get(f, url("https://localhost:%d/", port)) == ASB_OK)
            fprintf(stderr, "    %s: the client spoke it: %.60s\n", versions[i][1],
                    f->resp.body.ptr ? f->resp.body.ptr : "");
        ASBT_EQ_RES(f->err.code, ASB_ERR_TLS_HANDSHAKE);
#if MBEDTLS_VERSION_NUMBER < 0x03000000
        /* 2.28 can speak both: its refusal is ours, and says why */
        ASBT_CONTAINS(f->err.message, "older than TLS 1.2");
#else
        /* 3.x has neither version (and offers supported_versions, so the
           server ends the handshake with a protocol_version alert) */
        ASBT_CONTAINS(f->err.message, "tls handshake with localhost:");
        ASBT_CONTAINS(f->err.message, " failed");
#endif
        ASBT_EQ_INT(fx_close(f), 0);
        /* the server is still there and still speaks its version: the
           client refused it, the server did not give up */
        proto[0] = '\0';
        ASBT_CHECK(s_client_protocol(port, proto, sizeof proto));
        ASBT_EQ_STR(proto, versions[i][1]);
        old_tls_server_stop(pid);
        free(f);
    }
}

/* openssl s_server with TLS 1.3 sends its session tickets right after
   the handshake, ahead of the response: with mbedTLS 3.6 each one is
   MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET from a read or a write,
   which is news, not a lost connection. The next connection resumes with
   one of them (the page says "Reused"). */
ASBT_TEST(tls_1_3_session_tickets_from_openssl_are_not_errors) {
#if defined(MBEDTLS_SSL_PROTO_TLS1_3)
    fixture *f = fx_new();
    pid_t pid = 0;
    int i, port = tls_server_start("-tls1_3", "-num_tickets", "8", &pid);
    ASBT_CHECK(port > 0);
    f->d.tls.ca_file = env("ASB_PEER_CERTS_CA");
    f->d.retry.max_attempts = 1;
    f->d.max_idle_connections = -1; /* -www closes: a new connection each time */
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    for (i = 0; i < 3; i++) {
        asb_result r = fx_get(f, url("https://localhost:%d/", port));
        if (r != ASB_OK) fprintf(stderr, "    request %d: %s\n", i, f->err.message);
        ASBT_EQ_RES(r, ASB_OK);
        ASBT_CONTAINS(f->resp.body.ptr, "TLSv1.3");
        if (i > 0) ASBT_CONTAINS(f->resp.body.ptr, "Reused");
    }
    ASBT_EQ_INT(fx_close(f), 0);
    old_tls_server_stop(pid);
    free(f);
#endif
}

/* A new connection to an endpoint resumes the last verified session:
   the server reports session_reused. Sessions stay within one client. */
ASBT_TEST(new_connections_resume_the_tls_session) {
    static const char *peers[] = {"ASB_PEER_TLS_TLS12_EC", "ASB_PEER_TLS_TLS13",
                                  "ASB_PEER_TLS_IPONLY"};
    size_t i;
    for (i = 0; i < sizeof peers / sizeof peers[0]; i++) {
        fixture *f = fx_new();
        const char *host = i == 2 ? "127.0.0.1" : "localhost";
#if !defined(MBEDTLS_SSL_PROTO_TLS1_3)
        if (i == 1) { /* 2.28 speaks no TLS 1.3 (tls12_and_tls13_servers) */
            free(f);
            continue;
        }
#endif
        f->d.tls.ca_file = env("ASB_PEER_CERTS_CA");
        f->d.max_idle_connections = -1; /* every request on a new connection */
        ASBT_EQ_RES(fx_open(f), ASB_OK);
        ASBT_EQ_RES(tls_get(f, host, peers[i]), ASB_OK);
        ASBT_CONTAINS(f->resp.body.ptr, "\"session_reused\": false");
        ASBT_EQ_RES(tls_get(f, host, peers[i]), ASB_OK);
        ASBT_CONTAINS(f->resp.body.ptr, "\"session_reused\": true");
        ASBT_EQ_RES(tls_get(f, host, peers[i]), ASB_OK); /* and again */
        ASBT_CONTAINS(f->resp.body.ptr, "\"session_reused\": true");
        ASBT_EQ_INT(fx_close(f), 0);
        /* another client starts from nothing */
        ASBT_EQ_RES(fx_open(f), ASB_OK);
        ASBT_EQ_RES(tls_get(f, host, peers[i]), ASB_OK);
        ASBT_CONTAINS(f->resp.body.ptr, "\"session_reused\": false");
        ASBT_EQ_INT(fx_close(f), 0);
        free(f);
    }
}

/* -- faults ----------------------------------------------------------------------- */

ASBT_TEST(chunked_body_sent_byte_by_byte_with_extensions_and_trailers) {
    fixture *f = fx_new();
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(fx_get(f, FAULT("/chunked-bytewise")), ASB_OK);
    ASBT_EQ_STR(f->resp.body.ptr, "hello, bytewise world\n");
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

ASBT_TEST(broken_framing_is_an_error_never_partial_data) {
    static const struct {
        const char *path;
        asb_result r;
    } cases[] = {
        {"/chunked-bad-size", ASB_ERR_HTTP_PROTOCOL},
        {"/chunked-huge-size", ASB_ERR_HTTP_PROTOCOL},
        {"/chunked-overflow-64", ASB_ERR_HTTP_PROTOCOL},
        {"/chunked-negative-size", ASB_ERR_HTTP_PROTOCOL},
        {"/chunked-missing-crlf", ASB_ERR_HTTP_PROTOCOL},
        {"/headers-over-limit", ASB_ERR_TOO_LARGE},
        {"/header-huge-line", ASB_ERR_TOO_LARGE},
        {"/many-headers", ASB_ERR_TOO_LARGE},
        {"/short-body", ASB_ERR_HTTP_SHORT_BODY},
        {"/close-mid-body", ASB_ERR_HTTP_SHORT_BODY},
        {"/garbage", ASB_ERR_HTTP_PROTOCOL},
    };
    size_t i;
    fixture *f = fx_new();
    f->d.retry.max_attempts = 1;
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        asb_result r = fx_get(f, FAULT(cases[i].path));
        if (r != cases[i].r) fprintf(stderr, "    %s: %s\n", cases[i].path, f->err.message);
        ASBT_EQ_RES(r, cases[i].r);
        ASBT_CHECK(f->err.message[0] != '\0');
    }
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

ASBT_TEST(bodies_until_close_and_bodiless_statuses) {
    fixture *f = fx_new();
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(fx_get(f, FAULT("/http10")), ASB_OK);
    ASBT_EQ_INT(f->resp.body.len, 2600);
    ASBT_EQ_RES(fx_get(f, FAULT("/no-length")), ASB_OK);
    ASBT_EQ_INT(f->resp.body.len, 2600);
    ASBT_EQ_RES(fx_get(f, FAULT("/no-body-304")), ASB_OK);
    ASBT_EQ_INT(f->resp.status, 304);
    ASBT_EQ_INT(f->resp.body.len, 0);
    ASBT_EQ_RES(fx_get(f, FAULT("/no-body-204")), ASB_OK);
    ASBT_EQ_INT(f->resp.status, 204);
    memset(&f->req, 0, sizeof f->req);
    f->req.method = "HEAD";
    f->req.url = FAULT("/head");
    ASBT_EQ_RES(fx_do(f), ASB_OK);
    ASBT_EQ_STR(asb_http_response_header(&f->resp, "Content-Length"), "1000");
    ASBT_EQ_INT(f->resp.body.len, 0);
    ASBT_EQ_RES(fx_get(f, FAULT("/head")), ASB_OK); /* the connection survived */
    ASBT_EQ_INT(f->resp.body.len, 1000);
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

ASBT_TEST(stalls_hit_the_read_timeout_and_trickles_the_deadline) {
    fixture *f = fx_new();
    int64_t t0;
    f->d.read_timeout_ms = 300;
    f->d.retry.max_attempts = 1;
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    t0 = asb__now_ms();
    /* Order, not speed (a loaded machine may take seconds): the peer
       closes after its 20 s stall, which would be ASB_ERR_RECV, so the
       timeout is ours, and it came before the peer's close. */
    ASBT_EQ_RES(fx_get(f, FAULT("/stall?s=20")), ASB_ERR_TIMEOUT);
    ASBT_CHECK(asb__now_ms() - t0 < 20000);
    t0 = asb__now_ms();
    ASBT_EQ_RES(fx_get(f, FAULT("/stall-headers?s=20")), ASB_ERR_TIMEOUT);
    ASBT_CHECK(asb__now_ms() - t0 < 20000);
    ASBT_CONTAINS(f->err.message, "timed out");
    memset(&f->req, 0, sizeof f->req);
    /* 100 bytes 100 ms apart: the read timeout (300 ms) never fires and
       the answer would be whole after 10 s; the 700 ms deadline ends it
       before that */
    f->req.url = FAULT("/trickle?ms=100&n=100");
    f->req.timeout_ms = 700;
    t0 = asb__now_ms();
    ASBT_EQ_RES(fx_do(f), ASB_ERR_TIMEOUT);
    ASBT_CHECK(asb__now_ms() - t0 < 10000);
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

ASBT_TEST(connect_failures_are_retried_and_connect_timeouts_fire) {
    fixture *f = fx_new();
    int64_t t0;
    f->d.connect_timeout_ms = 300;
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    memset(&f->req, 0, sizeof f->req);
    f->req.method = "POST"; /* never reached the server: safe to retry */
    f->req.url = url("http://127.0.0.1:%s/", env("ASB_PEER_CLOSED_PORT"));
    ASBT_EQ_RES(fx_do(f), ASB_ERR_CONNECT);
    ASBT_EQ_INT(f->resp.attempts, 5);
    ASBT_CONTAINS(f->err.message, "refused");
    t0 = asb__now_ms();
    ASBT_EQ_RES(fx_get(f, url("http://127.0.0.1:%s/", env("ASB_PEER_HANG_PORT"))),
                ASB_ERR_TIMEOUT);
    ASBT_EQ_INT(f->resp.attempts, 1); /* a timeout spent its budget */
    /* The connect timeout (300 ms), not the kernel's SYN retries (over
       a minute, and ASB_ERR_CONNECT "Connection timed out") ended it;
       the bound is the order of the two, not a speed. */
    ASBT_CONTAINS(f->err.message, ": timed out");
    ASBT_CHECK(asb__now_ms() - t0 < 60000);
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

ASBT_TEST(retries_503_four_times_then_succeeds) {
    fixture *f = fx_new();
    asbt_log log;
    asbt_log_open(&log, &f->d.log, ASB_LOG_WARN);
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(fx_get(f, FAULT("/reset")), ASB_OK);
    ASBT_EQ_RES(fx_get(f, FAULT("/flaky-503/four/4")), ASB_OK);
    ASBT_EQ_INT(f->resp.status, 200);
    ASBT_EQ_INT(f->resp.attempts, 5);
    ASBT_EQ_INT(counter("four"), 5);
    /* one WARN per retry, with the status, and no query string */
    ASBT_CONTAINS(log.text.ptr, "2 http.retry: GET http://127.0.0.1:");
    ASBT_CONTAINS(log.text.ptr, "/flaky-503/four/4: status 503, attempt 1 of 5; retrying in");
    ASBT_CONTAINS(log.text.ptr, "attempt 4 of 5");
    ASBT_CHECK(asbt_log_count(&log, "attempt 5 of 5") == 0);
    ASBT_CHECK(asbt_log_count(&log, "/reset") == 0); /* 200 at once: nothing */
    asbt_log_close(&log);
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

ASBT_TEST(gives_up_after_five_503s_with_the_status) {
    fixture *f = fx_new();
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(fx_get(f, FAULT("/flaky-503/six/6")), ASB_ERR_HTTP_STATUS);
    ASBT_EQ_INT(f->resp.status, 503);
    ASBT_EQ_INT(f->err.http_status, 503);
    ASBT_EQ_INT(f->resp.attempts, 5);
    ASBT_EQ_MEM(f->err.body, f->err.body_len, "try again\n", 10);
    ASBT_EQ_INT(counter("six"), 5);
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

/* Does hay[0, n) hold needle[0, k)? (memmem is not in C99.) */
static int bytes_have(const char *hay, size_t n, const char *needle, size_t k) {
    size_t i;
    for (i = 0; k && i + k <= n; i++)
        if (memcmp(hay + i, needle, k) == 0) return 1;
    return 0;
}

/* R8 at the HTTP layer: a server that echoes the request's headers into
   its error answer gets the credential of an Authorization header masked
   in err (message and body), whatever the layer above. */
ASBT_TEST(an_echoed_authorization_header_is_masked_in_err) {
    static const char secret[] = "http-layer-secret-6d2e91";
    fixture *f = fx_new();
    asb_http_header h;
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    memset(&f->req, 0, sizeof f->req);
    f->req.url = FAULT("/status-echo/403");
    h.name = "Authorization";
    h.value = "Bearer http-layer-secret-6d2e91";
    f->req.headers = &h;
    f->req.header_count = 1;
    ASBT_EQ_RES(fx_do(f), ASB_ERR_HTTP_STATUS);
    ASBT_EQ_INT(f->err.http_status, 403);
    ASBT_CHECK(bytes_have(f->err.body, f->err.body_len, "Authorization: Bearer ****", 26));
    ASBT_CHECK(!bytes_have(f->err.body, f->err.body_len, secret, 8));
    ASBT_CHECK(strstr(f->err.message, secret) == NULL);
    /* the response itself is the caller's, untouched */
    ASBT_CHECK(bytes_have(f->resp.body.ptr, f->resp.body.len, secret, strlen(secret)));
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

/* R44: a server that echoes the credential into the headers an error
   keeps (X-Request-ID, Retry-After, Content-Type, each cut at 127 bytes),
   into a Status reason (cut at 63, then ": denied" in the message) and
   into a Location (quoted, cut at 120 bytes and `..."`): no run of 16 of
   its bytes in any field of err, whatever the cut. */
ASBT_TEST(a_credential_echoed_into_headers_and_a_location_is_masked_in_every_err_field) {
    char tok[301], auth[320];
    fixture *f = fx_new();
    asb_http_header h;
    asbt_secret(tok, 300, 44);
    snprintf(auth, sizeof auth, "Bearer %s", tok);
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    memset(&f->req, 0, sizeof f->req);
    h.name = "Authorization";
    h.value = auth;
    f->req.headers = &h;
    f->req.header_count = 1;
    f->req.url = FAULT("/header-echo/403");
    ASBT_EQ_RES(fx_do(f), ASB_ERR_HTTP_STATUS);
    ASBT_EQ_INT(f->err.http_status, 403);
    /* the echo arrived, cut to the field, and is stars only */
    ASBT_EQ_INT(strlen(f->err.request_id), ASB_ERROR_HEADER_SIZE - 1);
    ASBT_EQ_INT(strspn(f->err.request_id, "*"), ASB_ERROR_HEADER_SIZE - 1);
    ASBT_EQ_INT(strspn(f->err.retry_after, "*"), ASB_ERROR_HEADER_SIZE - 1);
    ASBT_EQ_INT(strspn(f->err.content_type, "*"), ASB_ERROR_HEADER_SIZE - 1);
    ASBT_CHECK(bytes_have(f->err.body, f->err.body_len, "\"reason\": \"****", 15));
    ASBT_CHECK(!asbt_err_holds_window(&f->err, tok, 16));
    /* the response itself is the caller's, untouched */
    ASBT_CHECK(asb_http_response_header(&f->resp, "X-Request-ID") != NULL &&
               strcmp(asb_http_response_header(&f->resp, "X-Request-ID"), tok) == 0);
    f->req.url = FAULT("/header-echo/302");
    ASBT_EQ_RES(fx_do(f), ASB_ERR_HTTP_REDIRECT);
    ASBT_CONTAINS(f->err.message, "/login?t=********");
    ASBT_CONTAINS(f->err.message, "*...\" not followed");
    ASBT_CHECK(!asbt_err_holds_window(&f->err, tok, 16));
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

ASBT_TEST(post_is_never_retried_after_reaching_the_server) {
    fixture *f = fx_new();
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    memset(&f->req, 0, sizeof f->req);
    f->req.method = "POST";
    f->req.url = FAULT("/flaky-503/post/3");
    f->req.body = "{\"command\":\"rm -rf x\"}";
    f->req.body_len = 22;
    ASBT_EQ_RES(fx_do(f), ASB_ERR_HTTP_STATUS);
    ASBT_EQ_INT(f->resp.attempts, 1);
    ASBT_EQ_INT(counter("post"), 1);
    f->req.url = FAULT("/flaky-close/postclose/3");
    ASBT_EQ_RES(fx_do(f), ASB_ERR_RECV);
    ASBT_EQ_INT(counter("postclose"), 1);
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

/* The wait the client logged before retrying a 503 to /flaky-503/<key>/...:
   -1 when it logged no retry; *theirs says the wait was the server's
   Retry-After. What it chose, not how long the machine took to do it. */
static long logged_wait(const char *log, const char *key, int *theirs) {
    char pat[160];
    const char *p;
    char *end;
    long w;
    snprintf(pat, sizeof pat, "/flaky-503/%s/1: status 503, attempt 1 of 5; retrying in ", key);
    *theirs = 0;
    if (!(p = strstr(log, pat))) return -1;
    w = strtol(p + strlen(pat), &end, 10);
    *theirs = strncmp(end, " ms (its Retry-After)", 21) == 0;
    return w;
}

ASBT_TEST(retry_after_sets_the_wait_and_429_is_retried) {
    fixture *f = fx_new();
    asbt_log log;
    int64_t t0, ms;
    char date[64], path[200];
    time_t when;
    struct tm tm;
    int theirs;
    long w;
    asbt_log_open(&log, &f->d.log, ASB_LOG_WARN);
    ASBT_EQ_RES(fx_open(f), ASB_OK); /* backoff 10 ms: any longer wait is the server's */
    /* delay-seconds */
    t0 = asb__now_ms();
    ASBT_EQ_RES(fx_get(f, FAULT("/flaky-503/ra-secs/1?retry_after=1")), ASB_OK);
    ms = asb__now_ms() - t0;
    ASBT_EQ_INT(f->resp.attempts, 2);
    ASBT_CHECK(ms >= 1000); /* the logged wait below says whose it was */
    ASBT_CONTAINS(log.text.ptr, "status 503, attempt 1 of 5; retrying in 1000 ms (its Retry-After)");
    /* an HTTP date 5 s ahead, taken just before the request (the case above
       took a second or more of the clock): whole seconds, so the client
       waits up to 5 s, less by how far the clock ran before the 503 came
       back (a machine stalled 4 s there still passes) */
    when = time(NULL) + 5;
    gmtime_r(&when, &tm);
    strftime(date, sizeof date, "%a,%%20%d%%20%b%%20%Y%%20%H:%M:%S%%20GMT", &tm);
    snprintf(path, sizeof path, "/flaky-503/ra-date/1?retry_after=%s", date);
    t0 = asb__now_ms();
    ASBT_EQ_RES(fx_get(f, FAULT(path)), ASB_OK);
    ms = asb__now_ms() - t0;
    ASBT_EQ_INT(f->resp.attempts, 2);
    w = logged_wait(log.text.ptr, "ra-date", &theirs);
    ASBT_CHECK(w >= 1 && w <= 5000 && theirs);
    ASBT_CHECK(ms >= w); /* it waited what it said */
    /* a date gone by, or a value that is neither: the backoff alone */
    ASBT_EQ_RES(fx_get(f, FAULT("/flaky-503/ra-past/1?retry_after=Sun,%2006%20Nov%201994%2008:49:37%20GMT")),
                ASB_OK);
    ASBT_EQ_RES(fx_get(f, FAULT("/flaky-503/ra-bad/1?retry_after=soon")), ASB_OK);
    ASBT_EQ_INT(f->resp.attempts, 2);
    w = logged_wait(log.text.ptr, "ra-past", &theirs);
    ASBT_CHECK(w >= 0 && w <= 10 && !theirs);
    w = logged_wait(log.text.ptr, "ra-bad", &theirs);
    ASBT_CHECK(w >= 0 && w <= 10 && !theirs);
    /* 429 is retried like 503 for a GET */
    ASBT_EQ_RES(fx_get(f, FAULT("/flaky-503/r429/2?status=429")), ASB_OK);
    ASBT_EQ_INT(f->resp.attempts, 3);
    ASBT_EQ_INT(counter("r429"), 3);
    /* a server asking for longer than the policy allows (60 s): no retry,
       its answer is the error, at once (no retry logged; the bound is far
       below the 120 s a wrong wait would take, and far above a slow machine) */
    t0 = asb__now_ms();
    ASBT_EQ_RES(fx_get(f, FAULT("/flaky-503/ra-long/3?retry_after=120")), ASB_ERR_HTTP_STATUS);
    ASBT_CHECK(asb__now_ms() - t0 < 120000);
    ASBT_CHECK(strstr(log.text.ptr, "/flaky-503/ra-long/") == NULL);
    ASBT_EQ_INT(f->resp.attempts, 1);
    ASBT_EQ_INT(f->err.http_status, 503);
    ASBT_CONTAINS(f->err.message, "Retry-After 120 s (longer than 60000 ms)");
    ASBT_EQ_INT(counter("ra-long"), 1);
    asbt_log_close(&log);
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

ASBT_TEST(post_after_429_is_retried_only_when_the_policy_says_429_ran_nothing) {
    fixture *f = fx_new();
    asb_retry_policy pol;
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    memset(&f->req, 0, sizeof f->req);
    f->req.method = "POST";
    f->req.body = "{}";
    f->req.body_len = 2;
    f->req.url = FAULT("/flaky-503/p429/1?status=429");
    ASBT_EQ_RES(fx_do(f), ASB_ERR_HTTP_STATUS);
    ASBT_EQ_INT(f->err.http_status, 429);
    ASBT_EQ_INT(counter("p429"), 1);
    /* what asb_kube_client sets for its API server */
    memset(&pol, 0, sizeof pol);
    pol.backoff_ms = 10;
    pol.retry_429_any_method = 1;
    f->req.retry = &pol;
    f->req.url = FAULT("/flaky-503/p429-kube/2?status=429");
    ASBT_EQ_RES(fx_do(f), ASB_OK);
    ASBT_EQ_INT(f->resp.attempts, 3);
    ASBT_EQ_INT(counter("p429-kube"), 3);
    /* ... and a 503 to a POST is still never retried */
    f->req.url = FAULT("/flaky-503/p503-kube/1");
    ASBT_EQ_RES(fx_do(f), ASB_ERR_HTTP_STATUS);
    ASBT_EQ_INT(counter("p503-kube"), 1);
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

ASBT_TEST(redirects_are_errors_and_never_followed) {
    static const char *codes[] = {"/redirect", "/redirect/301", "/redirect/303",
                                  "/redirect/307", "/redirect/308"};
    size_t i;
    fixture *f = fx_new();
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(fx_get(f, FAULT("/reset")), ASB_OK);
    for (i = 0; i < 5; i++) {
        ASBT_EQ_RES(fx_get(f, FAULT(codes[i])), ASB_ERR_HTTP_REDIRECT);
        ASBT_CHECK(f->err.http_status >= 301 && f->err.http_status <= 308);
        ASBT_CONTAINS(f->err.message, "not followed");
        ASBT_CONTAINS(f->err.message, "/target");
    }
    /* 304 is no redirect: a bodiless answer, its Location ignored, and the
       kept-alive connection still in step */
    ASBT_EQ_RES(fx_get(f, FAULT("/redirect/304")), ASB_OK);
    ASBT_EQ_INT(f->resp.status, 304);
    ASBT_EQ_INT(f->resp.body.len, 0);
    ASBT_EQ_RES(fx_get(f, FAULT("/contacted")), ASB_OK);
    ASBT_CONTAINS(f->resp.body.ptr, "\"contacted\": false");
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

ASBT_TEST(stale_pooled_connections_are_replaced_safely) {
    fixture *f = fx_new();
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    /* the server closes right after answering: the next GET must not fail */
    ASBT_EQ_RES(fx_get(f, FAULT("/keepalive-then-close/kc")), ASB_OK);
    ASBT_EQ_RES(fx_get(f, FAULT("/keepalive-then-close/kc")), ASB_OK);
    ASBT_EQ_INT(f->resp.attempts, 1);
    ASBT_EQ_INT(counter("kc"), 2);
    /* the server reads the next request, then drops it: a GET is re-sent */
    ASBT_EQ_RES(fx_get(f, FAULT("/keepalive-then-drop/kd")), ASB_OK);
    ASBT_EQ_RES(fx_get(f, FAULT("/echo")), ASB_OK);
    ASBT_EQ_INT(counter("kd-dropped"), 1);
    /* ... but a POST that reached the server is not */
    ASBT_EQ_RES(fx_get(f, FAULT("/keepalive-then-drop/kp")), ASB_OK);
    memset(&f->req, 0, sizeof f->req);
    f->req.method = "POST";
    f->req.url = FAULT("/echo");
    f->req.body = "x";
    f->req.body_len = 1;
    ASBT_CHECK(fx_do(f) != ASB_OK);
    ASBT_EQ_INT(counter("kp-dropped"), 1);
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

/* A server closed an idle pooled connection behind a tunnel that did not
   pass the close on (kwok's port-forward: seen as a POST through kubectl
   never answered, the router never logging it): the connection looks
   alive and swallows what is sent. One idle past max_idle_ms is not
   reused; and a GET that meets such a connection anyway gets no byte
   within the read timeout and is sent again on a new one (a POST is not:
   it may be running; it waits for its deadline). */
ASBT_TEST(pooled_connections_idle_too_long_are_not_reused) {
    fixture *f = fx_new();
    asbt_log log;
    f->d.max_idle_ms = 300;
    f->d.read_timeout_ms = 1000;
    f->d.retry.max_attempts = 1;
    asbt_log_open(&log, &f->d.log, ASB_LOG_DEBUG);
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(fx_get(f, FAULT("/keepalive-then-swallow/sw-idle")), ASB_OK);
    asb__sleep_ms(600); /* past max_idle_ms: that connection is not used again */
    memset(&f->req, 0, sizeof f->req);
    f->req.method = "POST";
    f->req.url = FAULT("/echo");
    f->req.body = "x";
    f->req.body_len = 1;
    f->req.timeout_ms = 20000;
    ASBT_EQ_RES(fx_do(f), ASB_OK);
    ASBT_EQ_INT(f->resp.attempts, 1);
    ASBT_EQ_INT(counter("sw-idle-swallowed"), 0);
    ASBT_EQ_INT(fx_close(f), 0);
    /* within max_idle_ms the connection is reused: a GET that gets no byte
       within the read timeout is sent once more on a new connection */
    f->d.max_idle_ms = 60000;
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(fx_get(f, FAULT("/keepalive-then-swallow/sw-get")), ASB_OK);
    ASBT_EQ_RES(fx_get(f, FAULT("/echo")), ASB_OK);
    ASBT_EQ_INT(f->resp.status, 200);
    ASBT_EQ_INT(counter("sw-get-swallowed"), 1);
    ASBT_CONTAINS(log.text.ptr, "no answer on a pooled connection within the read timeout");
    /* ... a POST is not sent twice: it ends at its read timeout */
    ASBT_EQ_RES(fx_get(f, FAULT("/keepalive-then-swallow/sw-post")), ASB_OK);
    memset(&f->req, 0, sizeof f->req);
    f->req.method = "POST";
    f->req.url = FAULT("/echo");
    f->req.body = "x";
    f->req.body_len = 1;
    ASBT_EQ_RES(fx_do(f), ASB_ERR_TIMEOUT);
    ASBT_EQ_INT(counter("sw-post-swallowed"), 1);
    asbt_log_close(&log);
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

ASBT_TEST(connection_close_is_honoured) {
    fixture *f = fx_new();
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(fx_get(f, FAULT("/connection-close/cc")), ASB_OK);
    ASBT_EQ_INT(f->cl->idle_count, 0);
    ASBT_EQ_RES(fx_get(f, FAULT("/connection-close/cc")), ASB_OK);
    ASBT_EQ_INT(f->resp.attempts, 1);
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

/* -- what goes on the wire ----------------------------------------------------------- */

ASBT_TEST(request_bytes_are_exact) {
    fixture *f = fx_new();
    asb_http_header h[2];
    asb_json_doc doc;
    char raw[2048];
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    memset(&f->req, 0, sizeof f->req);
    h[0].name = "X-Sandbox-ID";
    h[0].value = "sb-1";
    h[1].name = "Content-Type";
    h[1].value = "application/json";
    f->req.method = "PUT";
    f->req.url = FAULT("/echo?q=1");
    f->req.headers = h;
    f->req.header_count = 2;
    f->req.body = "{\"a\":1}";
    f->req.body_len = 7;
    ASBT_EQ_RES(fx_do(f), ASB_OK);
    ASBT_EQ_RES(asb_json_doc_parse(&doc, f->resp.body.ptr, f->resp.body.len, NULL, NULL), ASB_OK);
    ASBT_EQ_RES(asb_json_get_string(&doc, asb_json_find(&doc, 0, "raw_head"), raw, sizeof raw,
                                    NULL),
                ASB_OK);
    ASBT_CONTAINS(raw, "PUT /echo?q=1 HTTP/1.1\r\nHost: 127.0.0.1:");
    ASBT_CONTAINS(raw, "\r\nContent-Length: 7\r\n");
    ASBT_CONTAINS(raw, "\r\nX-Sandbox-ID: sb-1\r\nContent-Type: application/json\r\n\r\n");
    ASBT_CHECK(asb_json_string_eq(&doc, asb_json_find(&doc, 0, "body_b64"), "eyJhIjoxfQ==", 12));
    asb_json_doc_free(&doc);
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

typedef struct upload {
    const asb_multipart *mp;
    uint64_t file_size, pos;
    int phase;
    size_t off;
} upload;

/* A multipart body streamed from a generated 20 MiB "file". */
static long upload_read(void *ud, char *buf, size_t cap) {
    upload *u = (upload *)ud;
    if (u->phase == 0) {
        size_t n = u->mp->head.len - u->off < cap ? u->mp->head.len - u->off : cap;
        memcpy(buf, u->mp->head.ptr + u->off, n);
        u->off += n;
        if (u->off == u->mp->head.len) {
            u->phase = 1;
            u->off = 0;
        }
        return (long)n;
    }
    if (u->phase == 1) {
        size_t n = 0;
        while (n < cap && u->pos < u->file_size) buf[n++] = (char)(u->pos++ % 251);
        if (u->pos == u->file_size) u->phase = 2;
        if (n) return (long)n;
    }
    if (u->phase == 2) {
        size_t n = u->mp->tail.len - u->off < cap ? u->mp->tail.len - u->off : cap;
        memcpy(buf, u->mp->tail.ptr + u->off, n);
        u->off += n;
        return (long)n;
    }
    return 0;
}

ASBT_TEST(streamed_multipart_upload_has_an_exact_length) {
    fixture *f = fx_new();
    asb_multipart mp;
    upload u;
    asb_http_header h[1];
    asb_json_doc doc;
    int64_t bytes = 0;
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(asb_multipart_init(&mp, "file", "dir/data.bin", NULL), ASB_OK);
    memset(&u, 0, sizeof u);
    u.mp = &mp;
    u.file_size = 20u << 20;
    memset(&f->req, 0, sizeof f->req);
    h[0].name = "Content-Type";
    h[0].value = mp.content_type;
    f->req.method = "POST";
    f->req.url = FAULT("/slow-upload-sink?rate=100000000");
    f->req.headers = h;
    f->req.header_count = 1;
    f->req.body_read = upload_read;
    f->req.body_read_user = &u;
    f->req.body_len = mp.head.len + u.file_size + mp.tail.len;
    ASBT_EQ_RES(fx_do(f), ASB_OK);
    ASBT_EQ_RES(asb_json_doc_parse(&doc, f->resp.body.ptr, f->resp.body.len, NULL, NULL), ASB_OK);
    ASBT_EQ_RES(asb_json_get_int64(&doc, asb_json_find(&doc, 0, "bytes"), &bytes), ASB_OK);
    ASBT_EQ_INT((uint64_t)bytes, f->req.body_len);
    asb_json_doc_free(&doc);
    /* a callback that comes up short is an error, never a wrong length */
    memset(&u, 0, sizeof u);
    u.mp = &mp;
    u.file_size = 1000;
    f->req.body_len = mp.head.len + 2000 + mp.tail.len;
    ASBT_EQ_RES(fx_do(f), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(f->err.message, "fewer bytes than body_len");
    asb_multipart_free(&mp);
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

/* -- proxies ------------------------------------------------------------------------- */

ASBT_TEST(https_through_a_connect_proxy_with_credentials) {
    fixture *f = fx_new();
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(fx_get(f, url("http://127.0.0.1:%s/reset", env("ASB_PEER_PROXY_PORT"))), ASB_OK);
    ASBT_EQ_INT(fx_close(f), 0);
    memset(&f->d, 0, sizeof f->d);
    f->d.tls.ca_file = env("ASB_PEER_CERTS_CA");
    f->d.proxy_url = url("http://user:pw@127.0.0.1:%s", env("ASB_PEER_PROXY_PORT"));
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(tls_get(f, "localhost", "ASB_PEER_NGINX_HTTPS"), ASB_OK);
    ASBT_EQ_INT(fx_close(f), 0);
    memset(&f->d, 0, sizeof f->d);
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(fx_get(f, url("http://127.0.0.1:%s/log", env("ASB_PEER_PROXY_PORT"))), ASB_OK);
    ASBT_CONTAINS(f->resp.body.ptr, url("localhost:%s", env("ASB_PEER_NGINX_HTTPS")));
    ASBT_CONTAINS(f->resp.body.ptr, "Basic dXNlcjpwdw==");
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

ASBT_TEST(proxy_from_environment_respects_no_proxy) {
    fixture *f = fx_new();
    setenv("HTTPS_PROXY", url("http://127.0.0.1:%s", env("ASB_PEER_CLOSED_PORT")), 1);
    setenv("NO_PROXY", "example.com,localhost", 1);
    f->d.proxy_from_environment = 1;
    f->d.tls.ca_file = env("ASB_PEER_CERTS_CA");
    f->d.retry.max_attempts = 1;
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(tls_get(f, "localhost", "ASB_PEER_NGINX_HTTPS"), ASB_OK); /* NO_PROXY */
    ASBT_EQ_RES(tls_get(f, "127.0.0.1", "ASB_PEER_NGINX_HTTPS"), ASB_ERR_PROXY);
    ASBT_EQ_INT(fx_close(f), 0);
    unsetenv("HTTPS_PROXY");
    unsetenv("NO_PROXY");
    free(f);
}

/* The CONNECT proxy's log (JSON lines of what it was asked), emptied by
   proxy_log_reset. */
static void proxy_log_reset(void) {
    fixture f;
    memset(&f, 0, sizeof f);
    if (fx_open(&f) == ASB_OK)
        fx_get(&f, url("http://127.0.0.1:%s/reset", env("ASB_PEER_PROXY_PORT")));
    fx_close(&f);
}

static char *proxy_log(void) {
    fixture f;
    char *out = NULL;
    memset(&f, 0, sizeof f);
    if (fx_open(&f) == ASB_OK &&
        fx_get(&f, url("http://127.0.0.1:%s/log", env("ASB_PEER_PROXY_PORT"))) == ASB_OK)
        out = strdup(f.resp.body.ptr ? f.resp.body.ptr : "");
    fx_close(&f);
    return out;
}

/* An https:// proxy is refused, from every place a proxy URL comes from,
   before anything is sent: the library speaks no TLS to a proxy, and in
   clear the CONNECT target and the credentials would be readable on the
   way. The real CONNECT proxy behind the https:// URL logs no request
   (before the fix it got the CONNECT and the credentials in clear, and
   the request went through). */
ASBT_TEST(https_proxies_are_refused_and_get_nothing) {
    fixture *f = fx_new();
    asb_kube_client_desc kd;
    asb_kube_client *kc = NULL;
    char *log;
    char path[] = "/tmp/asb-proxy-kubeconfig-XXXXXX";
    int fd;
    FILE *kf;
    proxy_log_reset();
    f->d.tls.ca_file = env("ASB_PEER_CERTS_CA");
    f->d.retry.max_attempts = 1;
    f->d.proxy_url = url("https://user:s3cret@127.0.0.1:%s", env("ASB_PEER_PROXY_PORT"));
    if (fx_open(f) == ASB_OK) {
        tls_get(f, "localhost", "ASB_PEER_NGINX_HTTPS");
        fx_close(f);
        f->err.code = ASB_OK;
    }
    ASBT_EQ_RES(f->err.code, ASB_ERR_PROXY);
    ASBT_CONTAINS(f->err.message, url("proxy https://127.0.0.1:%s: TLS to a proxy is not supported",
                                      env("ASB_PEER_PROXY_PORT")));
    ASBT_CHECK(strstr(f->err.message, "s3cret") == NULL);
    /* HTTPS_PROXY */
    memset(&f->d, 0, sizeof f->d);
    f->d.tls.ca_file = env("ASB_PEER_CERTS_CA");
    f->d.retry.max_attempts = 1;
    f->d.proxy_from_environment = 1;
    setenv("HTTPS_PROXY", url("https://127.0.0.1:%s", env("ASB_PEER_PROXY_PORT")), 1);
    if (fx_open(f) == ASB_OK) {
        tls_get(f, "localhost", "ASB_PEER_NGINX_HTTPS");
        fx_close(f);
        f->err.code = ASB_OK;
    }
    unsetenv("HTTPS_PROXY");
    ASBT_EQ_RES(f->err.code, ASB_ERR_PROXY);
    ASBT_CONTAINS(f->err.message, "TLS to a proxy is not supported");
    /* a kubeconfig's proxy-url */
    fd = mkstemp(path);
    ASBT_CHECK(fd >= 0);
    kf = fdopen(fd, "w");
    fprintf(kf,
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
            "clusters:\n- name: k\n  cluster:\n    server: https://localhost:%s\n"
            "    certificate-authority: %s\n    proxy-url: https://127.0.0.1:%s\n"
            "users:\n- name: u\n  user:\n    token: tok\n"
            "contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n",
            env("ASB_PEER_NGINX_HTTPS"), env("ASB_PEER_CERTS_CA"), env("ASB_PEER_PROXY_PORT"));
    fclose(kf);
    memset(&kd, 0, sizeof kd);
    kd.kubeconfig.path = path;
    kd.http.retry.max_attempts = 1;
    if (asb_kube_client_create(&kd, &kc, &f->err) == ASB_OK) {
        asb_buf out;
        asb_buf_init(&out, NULL);
        asb_kube_request(kc, "GET", "/small.txt", NULL, NULL, 0, &out, &f->err);
        asb_buf_free(&out);
        asb_kube_client_free(kc);
        f->err.code = ASB_OK;
    }
    unlink(path);
    ASBT_EQ_RES(f->err.code, ASB_ERR_PROXY);
    ASBT_CONTAINS(f->err.message, "TLS to a proxy is not supported");
    log = proxy_log();
    ASBT_CHECK(log != NULL);
    ASBT_EQ_STR(log, "[]\n"); /* the proxy was asked nothing */
    free(log);
    free(f);
}

/* Proxy credentials of any length up to the limit reach the proxy whole
   (a fixed 700-byte buffer cut the CONNECT before: the proxy waited for
   the rest until the read timeout), the authority's last '@' ends them,
   an '@' in the URL's path is no credential, and credentials over the
   limit are refused when the client is made. */
ASBT_TEST(long_proxy_credentials_reach_the_proxy_whole) {
    static const struct {
        const char *userinfo, *plain;
    } cases[] = {
        {"u:@@:x", "u:@@:x"}, /* the last '@' of the authority ends them */
    };
    fixture *f = fx_new();
    char *longpw = (char *)malloc(5001), *userinfo, *log;
    asb_buf want;
    size_t i;
    for (i = 0; i < 3 + 1; i++) {
        const char *ui, *plain;
        if (i >= 3) {
            ui = cases[i - 3].userinfo;
            plain = cases[i - 3].plain;
        } else {
            /* "u:" and a password of 1000, 3000 and 4094 bytes: the last
               is exactly the 4096-byte limit */
            size_t n = i == 0 ? 1000 : i == 1 ? 3000 : 4094;
            memcpy(longpw, "u:", 2);
            memset(longpw + 2, 'p', n);
            longpw[2 + n] = '\0';
            ui = plain = longpw;
        }
        proxy_log_reset();
        memset(&f->d, 0, sizeof f->d);
        f->d.tls.ca_file = env("ASB_PEER_CERTS_CA");
        f->d.read_timeout_ms = 5000;
        f->d.retry.max_attempts = 1;
        userinfo = (char *)malloc(strlen(ui) + 64);
        sprintf(userinfo, "http://%s@127.0.0.1:%s", ui, env("ASB_PEER_PROXY_PORT"));
        f->d.proxy_url = userinfo;
        ASBT_EQ_RES(fx_open(f), ASB_OK);
        ASBT_EQ_RES(tls_get(f, "localhost", "ASB_PEER_NGINX_HTTPS"), ASB_OK);
        ASBT_EQ_INT(fx_close(f), 0);
        free(userinfo);
        asb_buf_init(&want, NULL);
        asb_buf_append(&want, "\"Basic ", 7);
        asb_base64_encode(plain, strlen(plain), &want);
        asb_buf_append(&want, "\"", 1);
        log = proxy_log();
        ASBT_CHECK(log != NULL);
        if (!strstr(log, want.ptr)) fprintf(stderr, "    case %zu: not in the log\n", i);
        ASBT_CONTAINS(log, want.ptr);
        free(log);
        asb_buf_free(&want);
    }
    /* an '@' after the authority is part of the path: no credentials */
    proxy_log_reset();
    memset(&f->d, 0, sizeof f->d);
    f->d.tls.ca_file = env("ASB_PEER_CERTS_CA");
    f->d.retry.max_attempts = 1;
    f->d.proxy_url = url("http://127.0.0.1:%s/x@y", env("ASB_PEER_PROXY_PORT"));
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    ASBT_EQ_RES(tls_get(f, "localhost", "ASB_PEER_NGINX_HTTPS"), ASB_OK);
    ASBT_EQ_INT(fx_close(f), 0);
    log = proxy_log();
    ASBT_CHECK(log != NULL);
    ASBT_CONTAINS(log, "\"proxy_authorization\": null");
    free(log);
    /* over the limit: refused, nothing sent */
    memset(longpw, 'p', 4097);
    memcpy(longpw, "u:", 2);
    longpw[4097] = '\0';
    userinfo = (char *)malloc(5000 + 64);
    sprintf(userinfo, "http://%s@127.0.0.1:%s", longpw, env("ASB_PEER_PROXY_PORT"));
    memset(&f->d, 0, sizeof f->d);
    f->d.proxy_url = userinfo;
    ASBT_EQ_RES(fx_open(f), ASB_ERR_PROXY);
    ASBT_CONTAINS(f->err.message, "credentials longer than 4096 bytes");
    free(userinfo);
    free(longpw);
    free(f);
}

typedef struct worker {
    asb_http_client *cl;
    const char *u;
    int ok;
} worker;

static void *worker_run(void *arg) {
    worker *w = (worker *)arg;
    int i;
    for (i = 0; i < 200; i++) {
        asb_http_request req;
        asb_http_response resp;
        memset(&req, 0, sizeof req);
        req.url = w->u;
        if (asb_http_do(w->cl, &req, &resp, NULL) == ASB_OK && resp.body.len == 17) w->ok++;
        asb_http_response_free(&resp);
    }
    return NULL;
}

ASBT_TEST(one_client_serves_several_threads_at_once) {
    fixture *f = fx_new();
    worker w[4];
    pthread_t th[4];
    int i;
    f->d.tls.ca_file = env("ASB_PEER_CERTS_CA");
    ASBT_EQ_RES(fx_open(f), ASB_OK);
    for (i = 0; i < 4; i++) {
        w[i].cl = f->cl;
        w[i].u = i % 2 ? url("https://localhost:%s/small.txt", env("ASB_PEER_NGINX_HTTPS"))
                       : url("http://127.0.0.1:%s/small.txt", env("ASB_PEER_NGINX_HTTP"));
        w[i].ok = 0;
        pthread_create(&th[i], NULL, worker_run, &w[i]);
    }
    for (i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (i = 0; i < 4; i++) ASBT_EQ_INT(w[i].ok, 200);
    ASBT_CHECK(f->cl->idle_count <= 4);
    ASBT_EQ_INT(fx_close(f), 0);
    free(f);
}

ASBT_LIST(
    ASBT_CASE(nginx_serves_small_files_over_one_kept_alive_connection)
    ASBT_CASE(nginx_chunked_response_is_reassembled)
    ASBT_CASE(large_download_streams_with_flat_memory)
    ASBT_CASE(buffered_body_cap_is_exact)
    ASBT_CASE(https_verifies_against_ca_file_dir_pem_and_der)
    ASBT_CASE(certificate_failures_say_why)
    ASBT_CASE(server_name_override_and_insecure_mode)
    ASBT_CASE(mutual_tls_with_rsa_and_ec_client_certificates)
    ASBT_CASE(tls12_and_tls13_servers)
    ASBT_CASE(tls_1_0_and_1_1_servers_are_refused)
    ASBT_CASE(tls_1_3_session_tickets_from_openssl_are_not_errors)
    ASBT_CASE(new_connections_resume_the_tls_session)
    ASBT_CASE(chunked_body_sent_byte_by_byte_with_extensions_and_trailers)
    ASBT_CASE(broken_framing_is_an_error_never_partial_data)
    ASBT_CASE(bodies_until_close_and_bodiless_statuses)
    ASBT_CASE(stalls_hit_the_read_timeout_and_trickles_the_deadline)
    ASBT_CASE(connect_failures_are_retried_and_connect_timeouts_fire)
    ASBT_CASE(retries_503_four_times_then_succeeds)
    ASBT_CASE(gives_up_after_five_503s_with_the_status)
    ASBT_CASE(retry_after_sets_the_wait_and_429_is_retried)
    ASBT_CASE(post_after_429_is_retried_only_when_the_policy_says_429_ran_nothing)
    ASBT_CASE(an_echoed_authorization_header_is_masked_in_err)
    ASBT_CASE(a_credential_echoed_into_headers_and_a_location_is_masked_in_every_err_field)
    ASBT_CASE(post_is_never_retried_after_reaching_the_server)
    ASBT_CASE(redirects_are_errors_and_never_followed)
    ASBT_CASE(stale_pooled_connections_are_replaced_safely)
    ASBT_CASE(pooled_connections_idle_too_long_are_not_reused)
    ASBT_CASE(connection_close_is_honoured)
    ASBT_CASE(request_bytes_are_exact)
    ASBT_CASE(streamed_multipart_upload_has_an_exact_length)
    ASBT_CASE(https_through_a_connect_proxy_with_credentials)
    ASBT_CASE(proxy_from_environment_respects_no_proxy)
    ASBT_CASE(https_proxies_are_refused_and_get_nothing)
    ASBT_CASE(long_proxy_credentials_reach_the_proxy_whole)
    ASBT_CASE(one_client_serves_several_threads_at_once)
)
ASBT_MAIN()
