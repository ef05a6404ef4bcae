/* Fuzz target: the HTTP response parser (status line, headers, Content-
   Length, chunked with extensions and trailers, body until close). The
   same bytes fed whole, byte by byte and in input-chosen pieces must give
   the same outcome: result, status, framing and body bytes. Tiny limits
   make the limit paths reachable. The same bytes also go to the URL
   parser and, as a header value, to the Retry-After reader.
   A head that parsed is then split into the response's headers
   (asb__resp_take_head, what asb_http_response_header reads): as many as
   the parser counted, each name a token, each value without control bytes
   or surrounding blanks, and a lookup by any name (in any case) finds the
   first header of that name. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include "fuzz_main.h"
#include <ctype.h>

typedef struct outcome {
    asb_result r;
    int state, status, keep_alive;
    asb_buf body;
    size_t consumed;
} outcome;

static asb_result collect(void *ctx, const char *p, size_t n) {
    return asb_buf_append((asb_buf *)ctx, p, n);
}

static int is_tchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int ieq(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
    return *a == *b;
}

/* The header split of a parsed head. */
static void check_headers(asb__http_parser *p) {
    asb_http_response resp;
    size_t i, k;
    memset(&resp, 0, sizeof resp);
    asb__allocator_resolve(NULL, &resp.alloc_);
    FUZZ_REQUIRE(asb__resp_take_head(&resp, p) == ASB_OK);
    FUZZ_REQUIRE(resp.header_count == (size_t)p->header_count);
    for (i = 0; i < resp.header_count; i++) {
        const char *nm = resp.headers[i].name, *v = resp.headers[i].value, *c;
        size_t vl = strlen(v);
        FUZZ_REQUIRE(nm[0] != '\0');
        for (c = nm; *c; c++) FUZZ_REQUIRE(is_tchar((unsigned char)*c));
        for (c = v; *c; c++)
            FUZZ_REQUIRE(((unsigned char)*c >= 0x20 || *c == '\t') && *c != 0x7f);
        FUZZ_REQUIRE(vl == 0 || (v[0] != ' ' && v[0] != '\t' && v[vl - 1] != ' ' &&
                                 v[vl - 1] != '\t'));
        /* the first of that name, whatever the case asked in */
        {
            char up[256];
            const char *got;
            size_t n = strlen(nm) < sizeof up - 1 ? strlen(nm) : sizeof up - 1;
            for (k = 0; k < n; k++) up[k] = (char)toupper((unsigned char)nm[k]);
            up[n] = '\0';
            got = asb_http_response_header(&resp, up);
            if (n == strlen(nm)) {
                for (k = 0; k < resp.header_count && !ieq(resp.headers[k].name, nm); k++) {}
                FUZZ_REQUIRE(got == resp.headers[k].value);
            }
        }
    }
    asb_http_response_free(&resp);
}

/* mode 0: whole; 1: byte by byte; 2: pieces sized by the input */
static void run(const uint8_t *data, size_t size, int mode, int head, outcome *o) {
    asb__http_parser p;
    size_t i = 0;
    memset(o, 0, sizeof *o);
    asb_buf_init(&o->body, NULL);
    asb__hp_init(&p, head, 512, 16, NULL);
    p.sink = collect;
    p.sink_ctx = &o->body;
    while (i < size && o->r == ASB_OK && p.state != ASB__HP_DONE) {
        size_t n = mode == 0 ? size - i : mode == 1 ? 1 : 1 + data[i] % 7;
        size_t used = 0;
        if (n > size - i) n = size - i;
        o->r = asb__hp_feed(&p, (const char *)data + i, n, &used);
        FUZZ_REQUIRE(used <= n);
        FUZZ_REQUIRE(o->r != ASB_OK || used == n || p.state == ASB__HP_DONE);
        i += used;
        if (used < n) break;
    }
    if (o->r == ASB_OK && p.state != ASB__HP_DONE) o->r = asb__hp_eof(&p);
    o->state = p.state;
    o->status = p.status;
    o->keep_alive = p.keep_alive;
    o->consumed = i;
    if (o->r == ASB_OK) {
        FUZZ_REQUIRE(p.state == ASB__HP_DONE);
        if (mode == 0) check_headers(&p);
        FUZZ_REQUIRE(p.status >= 100 && p.status <= 599);
        if (p.has_length && !p.chunked && !head && p.status != 204 && p.status != 304 &&
            p.status >= 200)
            FUZZ_REQUIRE(o->body.len == p.length);
    } else {
        FUZZ_REQUIRE(p.error != NULL || o->r == ASB_ERR_RECV ||
                     o->r == ASB_ERR_OUT_OF_MEMORY);
    }
    asb__hp_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    outcome a, b;
    int mode, head = size > 0 && (data[0] & 0x80);
    if (size > 65536) return 0;
    run(data, size, 0, head, &a);
    for (mode = 1; mode <= 2; mode++) {
        run(data, size, mode, head, &b);
        FUZZ_REQUIRE(a.r == b.r);
        FUZZ_REQUIRE(a.status == b.status && a.state == b.state);
        if (a.r == ASB_OK) {
            FUZZ_REQUIRE(a.keep_alive == b.keep_alive && a.consumed == b.consumed);
            FUZZ_REQUIRE(a.body.len == b.body.len &&
                         (a.body.len == 0 || memcmp(a.body.ptr, b.body.ptr, a.body.len) == 0));
        }
        asb_buf_free(&b.body);
    }
    asb_buf_free(&a.body);
    /* the same bytes as a Retry-After value: -1 or a wait; a date's wait
       shrinks by exactly the time that passed, a number's does not move */
    {
        char v[64];
        size_t n = size < sizeof v - 1 ? size : sizeof v - 1;
        int64_t a, b;
        memcpy(v, data, n);
        v[n] = '\0';
        a = asb__retry_after_parse(v, 0);
        b = asb__retry_after_parse(v, 1000);
        FUZZ_REQUIRE(a >= -1 && b >= -1);
        FUZZ_REQUIRE(a == b || a - b == 1000000 || (b == 0 && a > 0 && a < 1000000));
    }
    /* URLs made of the same bytes: never a crash; a parse is consistent */
    {
        asb_url u;
        if (asb_url_parse((const char *)data, size, &u, NULL) == ASB_OK) {
            FUZZ_REQUIRE(u.port >= 1 && u.port <= 65535 && u.host.len > 0);
            FUZZ_REQUIRE(u.host.ptr >= (const char *)data &&
                         u.host.ptr + u.host.len <= (const char *)data + size);
        }
    }
    return 0;
}
