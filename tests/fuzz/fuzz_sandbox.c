/* Fuzz target: what the sandbox layer reads from untrusted peers, and the
   command redaction of its log. The first byte picks the entry point:

     0  asb_gateway_address_validate: an accepted address is re-validated
        by a second path (inet_pton, inet_aton, label rules) and goes into
        a URL that asb_url_parse reads back with the same host
     1  asb__choose_pod_ip over a JSON list: the same answer as a plain
        reference walk (first usable IPv4, mapped IPv6 unmapped, else the
        first usable IPv6); the choice is always usable and a literal
     2  asb_json_get_string into a buffer of exactly `cap` bytes (ASan sees
        one byte past it): NUL-terminated, within bounds, a prefix of the
        whole string, the length reported right
     3  the runtime's run / exists / list answers: all or nothing, an exit
        code never cut, every listed name a NUL-terminated string
     4  asb__command_executable: the name a log may show never holds '='
        or '/', is part of the command, and fits the buffer (a quoted name
        may hold blanks: "'/opt/my tools/run me'" logs "run me") */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include "fuzz_main.h"
#include <arpa/inet.h>
#include <ctype.h>

static char *fuzz_cstr(const uint8_t *p, size_t n) {
    char *s = (char *)malloc(n + 1);
    if (n) memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

/* 0: Gateway addresses */
static void fuzz_gateway(const uint8_t *p, size_t n) {
    asb_error err;
    char *a = fuzz_cstr(p, n);
    unsigned char bin[16];
    struct in_addr ia;
    size_t i, ls = 0;
    if (asb_gateway_address_validate(a, n, &err) != ASB_OK) {
        FUZZ_REQUIRE(err.code == ASB_ERR_INVALID_ARGUMENT && err.message[0]);
        for (i = 0; err.message[i]; i++)
            FUZZ_REQUIRE((unsigned char)err.message[i] >= 0x20 && err.message[i] != 0x7f);
        free(a);
        return;
    }
    FUZZ_REQUIRE(n >= 1 && n <= 253 && strlen(a) == n);
    if (memchr(a, ':', n)) {
        FUZZ_REQUIRE(inet_pton(AF_INET6, a, bin) == 1);
    } else if (inet_pton(AF_INET, a, bin) != 1) {
        /* a host name: nothing libc would read as a number, plain labels */
        FUZZ_REQUIRE(inet_aton(a, &ia) == 0);
        for (i = 0; i <= n; i++) {
            if (i < n && a[i] != '.') {
                FUZZ_REQUIRE(isalnum((unsigned char)a[i]) || a[i] == '-');
                continue;
            }
            FUZZ_REQUIRE(i > ls && i - ls <= 63 && a[ls] != '-' && a[i - 1] != '-');
            ls = i + 1;
        }
    }
    /* the URL the client builds from it (asb__gateway_base) reads back */
    {
        char url[300];
        asb_url u;
        snprintf(url, sizeof url, strchr(a, ':') ? "http://[%s]:8080/x" : "http://%s:8080/x", a);
        FUZZ_REQUIRE(asb_url_parse(url, strlen(url), &u, NULL) == ASB_OK);
        FUZZ_REQUIRE(u.port == 8080 && u.host.len == n && memcmp(u.host.ptr, a, n) == 0);
    }
    free(a);
}

/* 1: pod IP choice, against a plain reference walk */
static int ref_usable(const unsigned char *b, int kind) {
    static const unsigned char zero[16] = {0};
    if (kind == 4)
        return memcmp(b, zero, 4) != 0 && !(b[0] == 169 && b[1] == 254) && !(b[0] >= 224 && b[0] <= 239);
    return memcmp(b, zero, 16) != 0 && !(b[0] == 0xfe && (b[1] & 0xc0) == 0x80) && b[0] != 0xff;
}

static int ref_choose(const asb_json_doc *d, int list, char *out) {
    asb_json_iter it;
    int item;
    char first6[64] = "";
    it = asb_json_iter_begin(d, list);
    while (asb_json_iter_next(d, &it, NULL, &item)) {
        asb_buf s;
        unsigned char b[16];
        int tok = d->toks[item].type == ASB_JSON_OBJECT ? asb_json_member(d, item, "ip", 2) : item;
        asb_buf_init(&s, NULL);
        if (asb_json_append_string(d, tok, &s) == ASB_OK && s.len < 64 && strlen(s.ptr) == s.len) {
            if (inet_pton(AF_INET, s.ptr, b) == 1) {
                if (ref_usable(b, 4)) {
                    snprintf(out, 64, "%s", s.ptr);
                    asb_buf_free(&s);
                    return 4;
                }
            } else if (inet_pton(AF_INET6, s.ptr, b) == 1) {
                static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
                if (memcmp(b, mapped, 12) == 0) {
                    if (ref_usable(b + 12, 4)) {
                        snprintf(out, 64, "%u.%u.%u.%u", b[12], b[13], b[14], b[15]);
                        asb_buf_free(&s);
                        return 4;
                    }
                } else if (ref_usable(b, 6) && !first6[0]) {
                    snprintf(first6, sizeof first6, "%s", s.ptr);
                }
            }
        }
        asb_buf_free(&s);
    }
    if (first6[0]) {
        snprintf(out, 64, "%s", first6);
        return 6;
    }
    return 0;
}

static void fuzz_pod_ip(const uint8_t *p, size_t n) {
    asb_json_doc d;
    char got[ASB_IP_SIZE + 1], want[64];
    int list, k, rk;
    if (asb_json_doc_parse(&d, (const char *)p, n, NULL, NULL) != ASB_OK) return;
    list = d.toks[0].type == ASB_JSON_OBJECT ? asb_json_find(&d, 0, "status.podIPs") : 0;
    memset(got, 0x5a, sizeof got); /* the byte past ASB_IP_SIZE stays */
    k = asb__choose_pod_ip(&d, list, got);
    FUZZ_REQUIRE(got[ASB_IP_SIZE] == 0x5a);
    rk = ref_choose(&d, list, want);
    FUZZ_REQUIRE(k == rk);
    if (k) {
        unsigned char b[16];
        FUZZ_REQUIRE(memchr(got, '\0', ASB_IP_SIZE) != NULL);
        FUZZ_REQUIRE(strcmp(got, want) == 0);
        FUZZ_REQUIRE(inet_pton(k == 4 ? AF_INET : AF_INET6, got, b) == 1);
        FUZZ_REQUIRE(ref_usable(b, k));
    }
    asb_json_doc_free(&d);
}

/* 2: strings into a fixed buffer */
static void fuzz_get_string(const uint8_t *p, size_t n) {
    asb_json_doc d;
    size_t cap;
    int t;
    if (n < 1) return;
    cap = p[0];
    p++;
    n--;
    if (asb_json_doc_parse(&d, (const char *)p, n, NULL, NULL) != ASB_OK) return;
    for (t = -1; t <= d.count; t++) {
        char *out = (char *)malloc(cap ? cap : 1);
        size_t len = (size_t)-1, qlen = (size_t)-1;
        asb_buf whole;
        asb_result r, rw, rq;
        asb_buf_init(&whole, NULL);
        rw = asb_json_append_string(&d, t, &whole);
        r = asb_json_get_string(&d, t, cap ? out : NULL, cap, &len);
        rq = asb_json_get_string(&d, t, NULL, 0, &qlen);
        if (rw != ASB_OK) {
            FUZZ_REQUIRE(r == rw && rq == rw);
            if (cap) FUZZ_REQUIRE(out[0] == '\0');
        } else {
            /* asking with no buffer says how much is needed */
            FUZZ_REQUIRE(rq == ASB_ERR_TOO_LARGE && qlen == whole.len);
            FUZZ_REQUIRE(len == whole.len);
            if (cap > whole.len) {
                FUZZ_REQUIRE(r == ASB_OK);
                FUZZ_REQUIRE(out[len] == '\0' && memcmp(out, whole.ptr, len) == 0);
            } else {
                FUZZ_REQUIRE(r == ASB_ERR_TOO_LARGE);
                if (cap) {
                    FUZZ_REQUIRE(out[cap - 1] == '\0');
                    FUZZ_REQUIRE(memcmp(out, whole.ptr, cap - 1) == 0);
                }
            }
        }
        asb_buf_free(&whole);
        free(out);
    }
    asb_json_doc_free(&d);
}

/* 3: run, exists and list answers */
static void fuzz_answers(const uint8_t *p, size_t n) {
    const char *body = (const char *)p;
    asb_allocator a;
    asb_run_result rr;
    asb_file_list fl;
    asb_json_doc d;
    int parsed, exists = 7;
    asb_result r;
    size_t i;
    asb__allocator_resolve(NULL, &a);
    parsed = asb_json_doc_parse(&d, body, n, NULL, NULL) == ASB_OK;

    memset(&rr, 0, sizeof rr);
    asb_buf_init(&rr.out, NULL);
    asb_buf_init(&rr.err, NULL);
    r = asb__run_answer_decode(body, n, &a, &rr);
    FUZZ_REQUIRE(r == ASB_OK || r == ASB_ERR_HTTP_PROTOCOL);
    if (r == ASB_OK) {
        int64_t code = 0;
        FUZZ_REQUIRE(parsed);
        FUZZ_REQUIRE(rr.out.ptr && rr.out.ptr[rr.out.len] == '\0');
        FUZZ_REQUIRE(rr.err.ptr && rr.err.ptr[rr.err.len] == '\0');
        /* the exit code is the answer's, never a truncation of it */
        FUZZ_REQUIRE(asb_json_get_int64(&d, asb_json_find(&d, 0, "exit_code"), &code) == ASB_OK);
        FUZZ_REQUIRE(code == (int64_t)rr.exit_code);
        /* timed_out only from a true "timed_out" */
        FUZZ_REQUIRE(rr.timed_out == 0 || rr.timed_out == 1);
        if (rr.timed_out) {
            int b = 0;
            FUZZ_REQUIRE(asb_json_get_bool(&d, asb_json_find(&d, 0, "timed_out"), &b) == ASB_OK && b);
        }
    }
    asb_run_result_free(&rr);

    r = asb__exists_answer_decode(body, n, &a, &exists);
    FUZZ_REQUIRE(r == ASB_OK || r == ASB_ERR_HTTP_PROTOCOL);
    FUZZ_REQUIRE(exists == 0 || exists == 1);
    if (r != ASB_OK) FUZZ_REQUIRE(exists == 0);

    memset(&fl, 0, sizeof fl);
    fl.alloc_ = a;
    r = asb__list_answer_decode(body, n, &fl);
    FUZZ_REQUIRE(r == ASB_OK || r == ASB_ERR_HTTP_PROTOCOL);
    if (r == ASB_OK) {
        FUZZ_REQUIRE(parsed && d.toks[0].type == ASB_JSON_ARRAY);
        FUZZ_REQUIRE(fl.count <= (size_t)d.toks[0].size);
        for (i = 0; i < fl.count; i++) {
            FUZZ_REQUIRE(fl.entries[i].name != NULL);
            FUZZ_REQUIRE(fl.entries[i].is_dir == 0 || fl.entries[i].is_dir == 1);
            (void)strlen(fl.entries[i].name);
        }
    } else {
        FUZZ_REQUIRE(fl.count == 0 || fl.entries != NULL);
    }
    asb_file_list_free(&fl);
    if (parsed) asb_json_doc_free(&d);
}

/* 4: command-name redaction */
static void fuzz_command(const uint8_t *p, size_t n) {
    size_t cap, i, len;
    char *cmd, *out;
    if (n < 1) return;
    cap = (size_t)p[0] % 100 + 1;
    cmd = fuzz_cstr(p + 1, n - 1);
    out = (char *)malloc(cap);
    memset(out, 0x5a, cap);
    asb__command_executable(cmd, out, cap);
    len = strnlen(out, cap);
    FUZZ_REQUIRE(len < cap);
    for (i = 0; i < len; i++)
        FUZZ_REQUIRE(out[i] != '=' && out[i] != '/');
    FUZZ_REQUIRE(len == 0 || strstr(cmd, out) != NULL);
    free(out);
    free(cmd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 65536) return 0;
    switch (data[0] % 5) {
    case 0: fuzz_gateway(data + 1, size - 1); break;
    case 1: fuzz_pod_ip(data + 1, size - 1); break;
    case 2: fuzz_get_string(data + 1, size - 1); break;
    case 3: fuzz_answers(data + 1, size - 1); break;
    default: fuzz_command(data + 1, size - 1); break;
    }
    return 0;
}
