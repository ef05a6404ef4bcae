/* Fuzz target: what the Kubernetes layer reads from a plugin or a server.
   The first byte picks the entry point:

     0  asb__exec_cred_decode (an exec plugin's stdout): an accepted
        credential has a token without control bytes and/or a certificate
        with its key; a refusal is ASB_ERR_CREDENTIALS with a message that
        never holds the token
     1  asb__kube_status_error (a failure body): the code follows the
        status, reason and message are NUL-terminated, hold no control
        bytes (no forged log lines), and the body excerpt is the body's
     2  the claim watch (asb__claim_event behind asb__watch_line, one event
        per line; bit 2 of the first byte pins the wait to uid "u1"): an outcome is a known one, and a Ready claim names its
        sandbox with a usable object name, never a cut one
     3  the Gateway watch (asb__gw_event behind asb__watch_line): a chosen
        address validates again, fits, and makes a URL that reads back;
        every log record is free of control bytes */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include "fuzz_main.h"

static void require_printable(const char *s, size_t cap) {
    size_t i, n = strnlen(s, cap);
    FUZZ_REQUIRE(n < cap);
    for (i = 0; i < n; i++) FUZZ_REQUIRE((unsigned char)s[i] >= 0x20 && s[i] != 0x7f);
}

static char rotate_alnum(char ch) {
    if (ch >= 'a' && ch <= 'z') return ch == 'z' ? 'a' : (char)(ch + 1);
    if (ch >= 'A' && ch <= 'Z') return ch == 'Z' ? 'A' : (char)(ch + 1);
    if (ch >= '0' && ch <= '9') return ch == '9' ? '0' : (char)(ch + 1);
    return ch;
}

/* Decodes a copy of the input whose status.token letters and digits are
   rotated (escape sequences left whole, so the JSON stays valid) and
   requires the same error message as the original's. */
static void require_message_ignores_token(const uint8_t *p, size_t n, const char *want,
                                          const asb_error *orig) {
    asb_allocator a;
    asb__exec_cred c;
    asb_error err2;
    asb_json_doc d;
    char *copy;
    int t, i;
    if (asb_json_doc_parse(&d, (const char *)p, n, NULL, NULL) != ASB_OK) return;
    t = asb_json_find(&d, 0, "status.token");
    copy = (char *)malloc(n ? n : 1);
    FUZZ_REQUIRE(copy != NULL && t >= 0);
    memcpy(copy, p, n);
    for (i = d.toks[t].start; i < d.toks[t].end; i++) {
        if (copy[i] == '\\') {
            i += copy[i + 1] == 'u' ? 5 : 1; /* \uXXXX or \x: keep it */
            continue;
        }
        copy[i] = rotate_alnum(copy[i]);
    }
    asb_json_doc_free(&d);
    asb__allocator_resolve(NULL, &a);
    memset(&err2, 0, sizeof err2);
    FUZZ_REQUIRE(asb__exec_cred_decode(copy, n, "plugin", NULL, want, &a, &c, &err2) == orig->code);
    FUZZ_REQUIRE(strcmp(err2.message, orig->message) == 0);
    free(copy);
}

/* 0: ExecCredential */
static void fuzz_exec_cred(const uint8_t *p, size_t n) {
    asb_allocator a;
    asb__exec_cred c;
    asb_error err;
    asb_result r;
    const char *want = n && (p[0] & 1) ? "client.authentication.k8s.io/v1beta1"
                                       : "client.authentication.k8s.io/v1";
    asb_buf tok;
    asb_json_doc d;
    size_t i;
    if (n < 1) return;
    p++;
    n--;
    asb__allocator_resolve(NULL, &a);
    /* the token as an independent read sees it */
    asb_buf_init(&tok, NULL);
    if (asb_json_doc_parse(&d, (const char *)p, n, NULL, NULL) == ASB_OK) {
        asb_json_append_string(&d, asb_json_find(&d, 0, "status.token"), &tok);
        asb_json_doc_free(&d);
    }
    memset(&err, 0, sizeof err);
    r = asb__exec_cred_decode((const char *)p, n, "plugin", NULL, want, &a, &c, &err);
    if (r == ASB_OK) {
        FUZZ_REQUIRE(c.has_token || c.has_cert);
        if (c.has_token) {
            FUZZ_REQUIRE(c.token.ptr && c.token.ptr[c.token.len] == '\0');
            for (i = 0; i < c.token.len; i++)
                FUZZ_REQUIRE((unsigned char)c.token.ptr[i] >= 0x20 && c.token.ptr[i] != 0x7f);
            FUZZ_REQUIRE(c.token.len == tok.len && memcmp(c.token.ptr, tok.ptr, tok.len) == 0);
        }
        if (c.has_cert) FUZZ_REQUIRE(c.cert.ptr && c.key.ptr);
        asb__exec_cred_free(&c);
    } else {
        FUZZ_REQUIRE(r == ASB_ERR_CREDENTIALS && err.code == r && err.message[0]);
        require_printable(err.message, sizeof err.message);
        /* The token must not reach the message. A plain strstr is not the
           test: a token may happen to equal fixed text of the message (the
           wanted apiVersion, "ExecCredential"). The message must instead not
           depend on the token: the same input with every letter and digit
           of the token's raw text changed gives the same message. */
        if (tok.len >= 6 && strstr(err.message, tok.ptr)) require_message_ignores_token(p, n, want, &err);
    }
    asb_buf_free(&tok);
}

/* 1: Status errors */
static void fuzz_status(const uint8_t *p, size_t n) {
    asb_buf body;
    asb_error err;
    asb_result r;
    int status;
    if (n < 1) return;
    status = p[0] == 0 ? 404 : 300 + p[0]; /* 301..555, and 404 often */
    asb_buf_init(&body, NULL);
    asb_buf_append(&body, p + 1, n - 1);
    memset(&err, 0x5a, sizeof err);
    r = asb__kube_status_error("GET", "/api/v1/namespaces/x/pods/y?token=secret", status, &body,
                               &err);
    FUZZ_REQUIRE(r == (status == 404 ? ASB_ERR_NOT_FOUND : ASB_ERR_KUBE_API));
    FUZZ_REQUIRE(err.code == r && err.http_status == status);
    require_printable(err.message, sizeof err.message);
    require_printable(err.reason, sizeof err.reason);
    /* the query (it may carry a token) stays out: the message is the same
       with another query (a body may spell "secret" itself, escaped or not,
       so looking for the word would not be the test) */
    {
        asb_error err2;
        memset(&err2, 0x5a, sizeof err2);
        FUZZ_REQUIRE(asb__kube_status_error("GET", "/api/v1/namespaces/x/pods/y?token=hidden",
                                            status, &body, &err2) == r);
        FUZZ_REQUIRE(strcmp(err2.message, err.message) == 0);
    }
    FUZZ_REQUIRE(err.body_len == (body.len < sizeof err.body ? body.len : sizeof err.body));
    FUZZ_REQUIRE(err.body_len == 0 || memcmp(err.body, body.ptr, err.body_len) == 0);
    asb_buf_free(&body);
}

/* Feeds the lines of p to a watch context whose callback is fn. */
static void feed_watch(const uint8_t *p, size_t n, asb_watch_fn fn, void *user) {
    asb__watch_ctx w;
    size_t s = 0, k;
    memset(&w, 0, sizeof w);
    w.fn = fn;
    w.user = user;
    asb__allocator_resolve(NULL, &w.alloc);
    asb_buf_init(&w.rv, NULL);
    for (k = 0; k <= n; k++) {
        if (k == n || p[k] == '\n') {
            if (k > s && asb__watch_line(&w, (const char *)p + s, k - s) != 0) break;
            s = k + 1;
        }
    }
    asb_buf_free(&w.rv);
}

static int object_name_ok(const char *s) {
    size_t i, n = strlen(s);
    if (n == 0 || n > 253 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0) return 0;
    for (i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
              s[i] == '.'))
            return 0;
    return 1;
}

/* 2: the claim watch */
static void fuzz_claim(const uint8_t *p, size_t n, int with_uid) {
    asb__claim_wait cw;
    memset(&cw, 0, sizeof cw);
    cw.outcome = ASB_ERR_TIMEOUT;
    if (with_uid) snprintf(cw.uid, sizeof cw.uid, "u1"); /* waits pinned to a UID */
    feed_watch(p, n, asb__claim_event, &cw);
    FUZZ_REQUIRE(cw.outcome == ASB_OK || cw.outcome == ASB_ERR_TIMEOUT ||
                 cw.outcome == ASB_ERR_METADATA || cw.outcome == ASB_ERR_TEMPLATE_NOT_FOUND ||
                 cw.outcome == ASB_ERR_WARMPOOL_NOT_FOUND || cw.outcome == ASB_ERR_CLAIM_FAILED ||
                 cw.outcome == ASB_ERR_NOT_FOUND);
    require_printable(cw.reason, sizeof cw.reason);
    require_printable(cw.message, sizeof cw.message);
    FUZZ_REQUIRE(memchr(cw.sandbox, '\0', sizeof cw.sandbox) != NULL);
    if (cw.outcome == ASB_OK) FUZZ_REQUIRE(object_name_ok(cw.sandbox));
}

/* 3: the Gateway watch */
static void log_check(void *ud, const asb_log_record *rec) {
    (void)ud;
    require_printable(rec->message, ASB_ERROR_MESSAGE_SIZE);
}

static void fuzz_gateway_watch(const uint8_t *p, size_t n) {
    asb__gw_wait g;
    asb_logger lg;
    memset(&g, 0, sizeof g);
    memset(&lg, 0, sizeof lg);
    lg.fn = log_check;
    lg.min_level = ASB_LOG_DEBUG;
    g.log = &lg;
    feed_watch(p, n, asb__gw_event, &g);
    FUZZ_REQUIRE(memchr(g.addr, '\0', sizeof g.addr) != NULL);
    if (g.addr[0]) {
        char url[320];
        asb_url u;
        size_t len = strlen(g.addr);
        FUZZ_REQUIRE(asb_gateway_address_validate(g.addr, len, NULL) == ASB_OK);
        snprintf(url, sizeof url, strchr(g.addr, ':') ? "https://[%s]:443" : "https://%s:443",
                 g.addr);
        FUZZ_REQUIRE(asb_url_parse(url, strlen(url), &u, NULL) == ASB_OK);
        FUZZ_REQUIRE(u.host.len == len && memcmp(u.host.ptr, g.addr, len) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 65536) return 0;
    switch (data[0] % 4) {
    case 0: fuzz_exec_cred(data + 1, size - 1); break;
    case 1: fuzz_status(data + 1, size - 1); break;
    case 2: fuzz_claim(data + 1, size - 1, data[0] & 4); break;
    default: fuzz_gateway_watch(data + 1, size - 1); break;
    }
    return 0;
}
