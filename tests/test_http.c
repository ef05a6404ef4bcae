/* HTTP: URLs, the response parser fed any way the network may cut it,
   request heads, multipart framing. (Talking to real servers is
   tests/test_http_peers.c.) */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include "asbtest.h"

ASBT_TEST(urls_parse_with_ports_ipv6_paths_and_queries) {
    asb_url u;
    ASBT_EQ_RES(asb_url_parse("https://127.0.0.1:6443/api?x=1#frag", 35, &u, NULL), ASB_OK);
    ASBT_EQ_INT(u.is_https, 1);
    ASBT_EQ_MEM(u.host.ptr, u.host.len, "127.0.0.1", 9);
    ASBT_EQ_INT(u.port, 6443);
    ASBT_EQ_INT(u.host_is_ip, 4);
    ASBT_EQ_MEM(u.target.ptr, u.target.len, "/api?x=1", 8);
    ASBT_EQ_RES(asb_url_parse("http://[::1]:8080", 17, &u, NULL), ASB_OK);
    ASBT_EQ_MEM(u.host.ptr, u.host.len, "::1", 3);
    ASBT_EQ_INT(u.host_is_ip, 6);
    ASBT_EQ_INT(u.target.len, 0);
    ASBT_EQ_RES(asb_url_parse("HTTP://Example.COM", 18, &u, NULL), ASB_OK);
    ASBT_EQ_INT(u.port, 80);
    ASBT_EQ_INT(u.host_is_ip, 0);
    ASBT_EQ_RES(asb_url_parse("https://h?q", 11, &u, NULL), ASB_OK);
    ASBT_EQ_INT(u.port, 443);
    ASBT_EQ_MEM(u.target.ptr, u.target.len, "?q", 2);
}

ASBT_TEST(bad_urls_are_refused_with_a_reason) {
    static const char *bad[][2] = {
        {"ftp://x/", "only http"},       {"http://", "host"},
        {"http://:80/", "host"},         {"http://h:0/", "port"},
        {"http://h:65536/", "port"},     {"http://h:8x/", "port"},
        {"http://u:p@h/", "user info"},  {"http://[::1/", "IPv6"},
        {"http://[zz]/", "IPv6"},        {"http://h/a b", "space"},
        {"http://h/\r\nX: y", "control"}, {"http://ho$t/", "host"},
        {"http://h:/", "port"},
    };
    size_t i;
    asb_url u;
    asb_error err;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASBT_EQ_RES(asb_url_parse(bad[i][0], strlen(bad[i][0]), &u, &err),
                    ASB_ERR_INVALID_ARGUMENT);
        ASBT_CONTAINS(err.message, bad[i][1]);
    }
}

/* Each URL is refused, and the message shows neither part of its
   password ("s3cr3t", "pw"), only "***@" in its place. */
static void refused_urls_hide_the_password(const char *const *bad, size_t n) {
    size_t i;
    asb_url u;
    asb_error err;
    for (i = 0; i < n; i++) {
        ASBT_EQ_RES(asb_url_parse(bad[i], strlen(bad[i]), &u, &err), ASB_ERR_INVALID_ARGUMENT);
        ASBT_CHECK(strstr(err.message, "s3cr3t") == NULL);
        ASBT_CHECK(strstr(err.message, "pw") == NULL);
        ASBT_CONTAINS(err.message, "***@");
    }
}

/* R24: a URL's user info is a password (in a direct_url, a kubeconfig's
   server); an error about the URL, whatever is wrong with it, never
   shows it. */
ASBT_TEST(url_errors_never_show_the_user_info) {
    static const char *bad[] = {
        "https://user:s3cr3t-pw@router.example:8443/",        /* user info */
        "ftp://user:s3cr3t-pw@host/",                          /* scheme */
        "http://user:s3cr3t-pw@host/a b",                      /* space */
        "http://user:s3cr3t-pw@host:99999/",                   /* port */
        "http://s3cr3t-pw@[::1/",                              /* IPv6 */
    };
    refused_urls_hide_the_password(bad, sizeof bad / sizeof bad[0]);
}

/* R28: a password holding '/', '?' or '#' (base64 does) ends what
   parses as the authority before its '@' (the URL is refused for a bad
   port, not for its user info); without "://" all before the '@' may be
   user info. Neither part of the password may show. */
ASBT_TEST(url_errors_hide_a_password_that_holds_a_slash_or_lacks_a_scheme) {
    static const char *bad[] = {
        "https://user:s3cr3t/pw+k==@router.example:8443/", /* '/' */
        "http://user:s3cr3t?pw@host/",                     /* '?' */
        "http://user:s3cr3t#pw@host/",                     /* '#' */
        "user:s3cr3t-pw@router.example:8443",              /* no scheme */
    };
    refused_urls_hide_the_password(bad, sizeof bad / sizeof bad[0]);
}

/* -- the parser ---------------------------------------------------------------- */

typedef struct parsed {
    asb_result r;
    int status, keep_alive, done;
    asb_buf body;
    const char *error;
} parsed;

static asb_result to_buf(void *ctx, const char *p, size_t n) {
    return asb_buf_append((asb_buf *)ctx, p, n);
}

/* Feeds text in pieces of `step` bytes (0: whole), then EOF if asked. */
static void parse(const char *text, size_t len, size_t step, int head, int eof, parsed *o) {
    asb__http_parser p;
    size_t i = 0;
    memset(o, 0, sizeof *o);
    asb_buf_init(&o->body, NULL);
    asb__hp_init(&p, head, 4096, 32, NULL);
    p.sink = to_buf;
    p.sink_ctx = &o->body;
    while (i < len && o->r == ASB_OK && p.state != ASB__HP_DONE) {
        size_t n = step && step < len - i ? step : len - i, used = 0;
        o->r = asb__hp_feed(&p, text + i, n, &used);
        i += used;
    }
    if (o->r == ASB_OK && eof) o->r = asb__hp_eof(&p);
    o->status = p.status;
    o->keep_alive = p.keep_alive;
    o->done = p.state == ASB__HP_DONE;
    o->error = p.error;
    asb__hp_free(&p);
}

ASBT_TEST(chunked_body_split_at_every_byte_boundary_is_the_same) {
    const char *resp = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                       "Content-Type: application/json\r\n\r\n"
                       "4;name=\"v\"\r\n{\"a\"\r\n3\r\n:1}\r\nA \r\n0123456789\r\n"
                       "0\r\nX-Trailer: yes\r\n\r\n";
    size_t step, len = strlen(resp);
    for (step = 0; step <= len; step++) {
        parsed o;
        parse(resp, len, step, 0, 0, &o);
        ASBT_EQ_RES(o.r, ASB_OK);
        ASBT_CHECK(o.done);
        ASBT_EQ_INT(o.status, 200);
        ASBT_EQ_INT(o.keep_alive, 1);
        ASBT_EQ_MEM(o.body.ptr, o.body.len, "{\"a\":1}0123456789", 17);
        asb_buf_free(&o.body);
    }
}

ASBT_TEST(content_length_and_until_close_bodies) {
    parsed o;
    const char *a = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA";
    const char *b = "HTTP/1.0 200 OK\r\n\r\nall of it";
    const char *c = "HTTP/1.1 200 OK\nContent-Length: 2\n\nok"; /* bare LF */
    parse(a, strlen(a), 0, 0, 0, &o);
    ASBT_EQ_RES(o.r, ASB_OK);
    ASBT_EQ_MEM(o.body.ptr, o.body.len, "hello", 5); /* stops at the length */
    asb_buf_free(&o.body);
    parse(b, strlen(b), 3, 0, 1, &o);
    ASBT_EQ_RES(o.r, ASB_OK);
    ASBT_EQ_INT(o.keep_alive, 0);
    ASBT_EQ_MEM(o.body.ptr, o.body.len, "all of it", 9);
    asb_buf_free(&o.body);
    parse(c, strlen(c), 1, 0, 0, &o);
    ASBT_EQ_RES(o.r, ASB_OK);
    ASBT_EQ_MEM(o.body.ptr, o.body.len, "ok", 2);
    asb_buf_free(&o.body);
}

ASBT_TEST(short_bodies_and_cut_chunks_are_errors_not_data) {
    parsed o;
    const char *a = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello";
    const char *b = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc";
    const char *c = "HTTP/1.1 200 OK\r\nContent-Le";
    parse(a, strlen(a), 0, 0, 1, &o);
    ASBT_EQ_RES(o.r, ASB_ERR_HTTP_SHORT_BODY);
    ASBT_CONTAINS(o.error, "Content-Length");
    asb_buf_free(&o.body);
    parse(b, strlen(b), 0, 0, 1, &o);
    ASBT_EQ_RES(o.r, ASB_ERR_HTTP_SHORT_BODY);
    asb_buf_free(&o.body);
    parse(c, strlen(c), 0, 0, 1, &o);
    ASBT_EQ_RES(o.r, ASB_ERR_RECV);
    asb_buf_free(&o.body);
}

ASBT_TEST(malformed_responses_are_protocol_errors) {
    static const char *bad[] = {
        "HTTP/2 200 OK\r\n\r\n",
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 600 Nope\r\n\r\n",
        "HTTP/1.1 200OK\r\n\r\n",
        "garbage\r\n\r\n",
        "HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n",
        "HTTP/1.1 200 OK\r\n: empty name\r\n\r\n",
        "HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX: a\x01b\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3 x\r\nabc\r\n",
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        parsed o;
        parse(bad[i], strlen(bad[i]), 0, 0, 1, &o);
        if (o.r == ASB_OK) fprintf(stderr, "    accepted #%zu\n", i);
        ASBT_CHECK(o.r == ASB_ERR_HTTP_PROTOCOL || o.r == ASB_ERR_TOO_LARGE);
        ASBT_CHECK(o.error != NULL);
        asb_buf_free(&o.body);
    }
}

/* A chunk-size line is judged to its end, however long: only the first
   80 bytes were before, so "1<79 spaces>garbage" passed as size 1. Long
   but valid extensions still pass; a line over the head limit is refused. */
ASBT_TEST(chunk_size_lines_are_validated_to_their_end) {
    static const char *good[] = {
        "1;name=value;flag\r\nx\r\n0\r\n\r\n",
        "1 ;q=\"a \\\"quoted\\\" ; value\"\r\nx\r\n0\r\n\r\n",
        "1\nx\r\n0\r\n\r\n", /* bare LF, as header lines */
    };
    static const char *bad[] = {
        "1;a=\x01\r\nx\r\n0\r\n\r\n",      /* control byte in an extension */
        "1;a\rb\r\nx\r\n0\r\n\r\n",        /* bare CR */
        "1;a=\"open\r\nx\r\n0\r\n\r\n",    /* unterminated quote */
        "1;a=(b)\r\nx\r\n0\r\n\r\n",       /* not a token */
        ";a\r\nx\r\n0\r\n\r\n",            /* no size */
    };
    const char *head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    asb_buf b;
    parsed o;
    size_t i, step;
    for (i = 0; i < sizeof good / sizeof good[0]; i++) {
        asb_buf_init(&b, NULL);
        asb_buf_append(&b, head, strlen(head));
        asb_buf_append(&b, good[i], strlen(good[i]));
        parse(b.ptr, b.len, 0, 0, 0, &o);
        if (o.r != ASB_OK) fprintf(stderr, "    refused good #%zu: %s\n", i, o.error);
        ASBT_EQ_RES(o.r, ASB_OK);
        ASBT_EQ_MEM(o.body.ptr, o.body.len, "x", 1);
        asb_buf_free(&o.body);
        asb_buf_free(&b);
    }
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        asb_buf_init(&b, NULL);
        asb_buf_append(&b, head, strlen(head));
        asb_buf_append(&b, bad[i], strlen(bad[i]));
        parse(b.ptr, b.len, 0, 0, 1, &o);
        if (o.r == ASB_OK) fprintf(stderr, "    accepted bad #%zu\n", i);
        ASBT_EQ_RES(o.r, ASB_ERR_HTTP_PROTOCOL);
        ASBT_EQ_STR(o.error, "invalid chunk size");
        ASBT_EQ_INT(o.body.len, 0);
        asb_buf_free(&o.body);
        asb_buf_free(&b);
    }
    /* the finding's case, past the old 80-byte window, cut at every byte */
    asb_buf_init(&b, NULL);
    asb_buf_append(&b, head, strlen(head));
    asb_buf_append(&b, "1", 1);
    for (i = 0; i < 79; i++) asb_buf_append(&b, " ", 1);
    asb_buf_append(&b, "garbage\r\nx\r\n0\r\n\r\n", 18);
    for (step = 0; step < 12; step++) {
        parse(b.ptr, b.len, step, 0, 1, &o);
        ASBT_EQ_RES(o.r, ASB_ERR_HTTP_PROTOCOL);
        ASBT_EQ_STR(o.error, "invalid chunk size");
        ASBT_EQ_INT(o.body.len, 0);
        asb_buf_free(&o.body);
    }
    asb_buf_free(&b);
    /* a valid extension longer than 80 bytes passes ... */
    asb_buf_init(&b, NULL);
    asb_buf_append(&b, head, strlen(head));
    asb_buf_append(&b, "1;k=", 4);
    for (i = 0; i < 300; i++) asb_buf_append(&b, "v", 1);
    asb_buf_append(&b, "\r\nx\r\n0\r\n\r\n", 10);
    parse(b.ptr, b.len, 7, 0, 0, &o);
    ASBT_EQ_RES(o.r, ASB_OK);
    ASBT_EQ_MEM(o.body.ptr, o.body.len, "x", 1);
    asb_buf_free(&o.body);
    asb_buf_free(&b);
    /* ... and one longer than the head limit (4096 here) is refused */
    asb_buf_init(&b, NULL);
    asb_buf_append(&b, head, strlen(head));
    asb_buf_append(&b, "1;k=", 4);
    for (i = 0; i < 5000; i++) asb_buf_append(&b, "v", 1);
    asb_buf_append(&b, "\r\nx\r\n0\r\n\r\n", 10);
    parse(b.ptr, b.len, 0, 0, 1, &o);
    ASBT_EQ_RES(o.r, ASB_ERR_HTTP_PROTOCOL);
    ASBT_EQ_STR(o.error, "chunk-size line too long");
    asb_buf_free(&o.body);
    asb_buf_free(&b);
}

ASBT_TEST(header_limits_are_enforced) {
    asb_buf big;
    parsed o;
    int i;
    asb_buf_init(&big, NULL);
    asb_buf_append(&big, "HTTP/1.1 200 OK\r\n", 17);
    for (i = 0; i < 40; i++) asb_buf_append(&big, "X-A: b\r\n", 8); /* limit is 32 */
    asb_buf_append(&big, "\r\n", 2);
    parse(big.ptr, big.len, 0, 0, 1, &o);
    ASBT_EQ_RES(o.r, ASB_ERR_TOO_LARGE);
    ASBT_CONTAINS(o.error, "too many header lines");
    asb_buf_free(&o.body);
    big.len = 0;
    asb_buf_append(&big, "HTTP/1.1 200 OK\r\nX-Big: ", 25);
    for (i = 0; i < 5000; i++) asb_buf_append(&big, "a", 1); /* limit 4096 */
    parse(big.ptr, big.len, 7, 0, 1, &o);
    ASBT_EQ_RES(o.r, ASB_ERR_TOO_LARGE);
    asb_buf_free(&o.body);
    asb_buf_free(&big);
}

ASBT_TEST(no_body_for_head_204_304_and_interim_responses_are_skipped) {
    parsed o;
    const char *h = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
    const char *n = "HTTP/1.1 204 No Content\r\n\r\n";
    const char *m = "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n";
    const char *i = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
    parse(h, strlen(h), 0, 1, 0, &o);
    ASBT_EQ_RES(o.r, ASB_OK);
    ASBT_CHECK(o.done);
    ASBT_EQ_INT(o.body.len, 0);
    asb_buf_free(&o.body);
    parse(n, strlen(n), 0, 0, 0, &o);
    ASBT_CHECK(o.done && o.status == 204);
    asb_buf_free(&o.body);
    parse(m, strlen(m), 0, 0, 0, &o);
    ASBT_CHECK(o.done && o.status == 304 && o.body.len == 0);
    asb_buf_free(&o.body);
    parse(i, strlen(i), 5, 0, 0, &o);
    ASBT_EQ_RES(o.r, ASB_OK);
    ASBT_EQ_INT(o.status, 201);
    ASBT_EQ_MEM(o.body.ptr, o.body.len, "ok", 2);
    asb_buf_free(&o.body);
}

ASBT_TEST(connection_close_and_chunked_with_length_end_keep_alive) {
    parsed o;
    const char *a = "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n";
    const char *b = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n";
    const char *c = "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n";
    parse(a, strlen(a), 0, 0, 0, &o);
    ASBT_CHECK(o.done && !o.keep_alive);
    asb_buf_free(&o.body);
    parse(b, strlen(b), 0, 0, 0, &o);
    ASBT_CHECK(o.done && !o.keep_alive);
    ASBT_EQ_MEM(o.body.ptr, o.body.len, "ab", 2); /* chunked wins */
    asb_buf_free(&o.body);
    parse(c, strlen(c), 0, 0, 0, &o);
    ASBT_CHECK(o.done && o.keep_alive);
    asb_buf_free(&o.body);
}

/* -- requests ------------------------------------------------------------------- */

ASBT_TEST(retry_after_is_read_as_seconds_or_an_http_date) {
    const int64_t date = 784111777; /* Sun, 06 Nov 1994 08:49:37 GMT */
    static const char *const bad[] = {
        "", "soon", "-1", "1.5", "12 s", "0x10",
        "Sun, 06 Nov 1994 08:49:37 UTC",   /* not GMT */
        "Sunday, 06-Nov-94 08:49:37 GMT",  /* RFC 850: obsolete, not read */
        "Sun Nov  6 08:49:37 1994",        /* asctime: obsolete, not read */
        "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 32 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMTx",
        "Sun, 6 Nov 1994 08:49:37 GMT"};
    size_t i;
    ASBT_EQ_INT(asb__retry_after_parse("120", 0), 120000);
    ASBT_EQ_INT(asb__retry_after_parse(" 7 ", 0), 7000);
    ASBT_EQ_INT(asb__retry_after_parse("0", 0), 0);
    /* a huge number is capped, never an overflow */
    ASBT_EQ_INT(asb__retry_after_parse("99999999999999999999999", 0), (int64_t)100000000 * 1000);
    ASBT_EQ_INT(asb__retry_after_parse("Sun, 06 Nov 1994 08:49:37 GMT", date - 10), 10000);
    ASBT_EQ_INT(asb__retry_after_parse("Sun, 06 Nov 1994 08:49:37 GMT", date + 5), 0);
    ASBT_EQ_INT(asb__retry_after_parse("Mon, 30 Nov 2026 00:00:01 GMT", 1795996800), 1000);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ASBT_EQ_INT(asb__retry_after_parse(bad[i], 0), -1);
}

ASBT_TEST(request_headers_with_cr_lf_are_never_sent) {
    asb_http_client *cl;
    asb_http_request req;
    asb_http_response resp;
    asb_http_header h[1];
    asb_error err;
    static const char *names[] = {"X-Ok", "Bad Name", "X:y", "", "Host", "content-length"};
    static const char *values[] = {"a\r\nX-Evil: 1", "v", "v", "v", "h", "1"};
    size_t i;
    ASBT_EQ_RES(asb_http_client_create(NULL, &cl, &err), ASB_OK);
    for (i = 0; i < 6; i++) {
        memset(&req, 0, sizeof req);
        /* port 9 (discard) on loopback: nothing may even be tried */
        req.url = "http://127.0.0.1:9/";
        h[0].name = names[i];
        h[0].value = values[i];
        req.headers = h;
        req.header_count = 1;
        ASBT_EQ_RES(asb_http_do(cl, &req, &resp, &err), ASB_ERR_INVALID_ARGUMENT);
        ASBT_EQ_INT(resp.attempts, 0);
        asb_http_response_free(&resp);
    }
    asb_http_client_free(cl);
}

ASBT_TEST(multipart_framing_escapes_quotes_and_backslashes_as_the_runtimes_decode) {
    asb_multipart mp;
    const char *ct;
    ASBT_EQ_RES(asb_multipart_init(&mp, "file", "dir/a \"b\"\\c\r\n.txt", NULL), ASB_OK);
    ct = strstr(mp.content_type, "boundary=");
    ASBT_CHECK(ct != NULL);
    ct += 9;
    ASBT_EQ_INT(strlen(ct), 28);
    ASBT_CHECK(strncmp(mp.head.ptr, "--", 2) == 0 && strncmp(mp.head.ptr + 2, ct, 28) == 0);
    ASBT_CONTAINS(mp.head.ptr,
                  "Content-Disposition: form-data; name=\"file\"; "
                  "filename=\"dir/a \\\"b\\\"\\\\c%0D%0A.txt\"\r\n");
    ASBT_CHECK(mp.head.len >= 4 &&
               memcmp(mp.head.ptr + mp.head.len - 4, "\r\n\r\n", 4) == 0);
    ASBT_EQ_INT(mp.tail.len, 4 + 28 + 4);
    ASBT_CHECK(memcmp(mp.tail.ptr + 4, ct, 28) == 0);
    asb_multipart_free(&mp);
}

/* tcp_keepalive_s reaches every connection's socket: the default 30 s
   (probes every 10 s, 3 of them; no TCP_USER_TIMEOUT, which would cut a
   live server that leaves an upload unread), a value of the caller's,
   and -1 for none. The client's socket is found among
   our descriptors by its peer, a listener that accepts and never answers,
   while the request waits. (That a vanished peer then fails the call is
   tests/test_sandboxd.c's case, with packets really dropped.) */
#if defined(__linux__) && defined(TCP_USER_TIMEOUT)
/* One request on a thread of its own (a POST when body is set), so the
   test can look at the connection while it waits. */
typedef struct ka_req {
    asb_http_client *cl;
    const char *url;
    const void *body;
    uint64_t body_len;
    int timeout_ms;
    asb_result r;
    asb_error err;
} ka_req;

static void *ka_req_run(void *arg) {
    ka_req *q = (ka_req *)arg;
    asb_http_request req;
    asb_http_response resp;
    memset(&req, 0, sizeof req);
    req.url = q->url;
    req.method = q->body ? "POST" : "GET";
    req.body = q->body;
    req.body_len = q->body_len;
    req.timeout_ms = q->timeout_ms;
    q->r = asb_http_do(q->cl, &req, &resp, &q->err);
    asb_http_response_free(&resp);
    return NULL;
}

static int ka_client_fd(int port) {
    int fd;
    for (fd = 3; fd < 1024; fd++) {
        struct sockaddr_in a;
        socklen_t al = sizeof a;
        if (getpeername(fd, (struct sockaddr *)&a, &al) == 0 && a.sin_family == AF_INET &&
            ntohs(a.sin_port) == port)
            return fd;
    }
    return -1;
}

static int ka_opt(int fd, int level, int name) {
    int v = -1;
    socklen_t vl = sizeof v;
    if (getsockopt(fd, level, name, &v, &vl) != 0) return -2;
    return v;
}
#endif

ASBT_TEST(tcp_keepalive_is_set_on_each_connection_as_configured) {
#if defined(__linux__) && defined(TCP_USER_TIMEOUT)
    static const int given[3] = {0, 7, -1};
    static const int idle[3] = {30, 7, 0}, intvl[3] = {10, 2, 0};
    int i;
    for (i = 0; i < 3; i++) {
        asb_http_client_desc d;
        ka_req q;
        pthread_t t;
        struct pollfd pf;
        char url[64];
        int port, l = asbt_listen_loopback(4, &port), s, fd;
        ASBT_CHECK(l >= 0);
        snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
        memset(&d, 0, sizeof d);
        d.retry.max_attempts = 1;
        d.tcp_keepalive_s = given[i];
        memset(&q, 0, sizeof q);
        ASBT_EQ_RES(asb_http_client_create(&d, &q.cl, &q.err), ASB_OK);
        q.url = url;
        q.timeout_ms = 20000;
        ASBT_CHECK(pthread_create(&t, NULL, ka_req_run, &q) == 0);
        pf.fd = l;
        pf.events = POLLIN;
        s = poll(&pf, 1, 20000) == 1 ? accept(l, NULL, NULL) : -1;
        fd = ka_client_fd(port);
        if (s >= 0 && fd >= 0) {
            ASBT_EQ_INT(ka_opt(fd, SOL_SOCKET, SO_KEEPALIVE), given[i] < 0 ? 0 : 1);
            if (given[i] >= 0) {
                ASBT_EQ_INT(ka_opt(fd, IPPROTO_TCP, TCP_KEEPIDLE), idle[i]);
                ASBT_EQ_INT(ka_opt(fd, IPPROTO_TCP, TCP_KEEPINTVL), intvl[i]);
                ASBT_EQ_INT(ka_opt(fd, IPPROTO_TCP, TCP_KEEPCNT), 3);
            }
            ASBT_EQ_INT(ka_opt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), 0);
        }
        if (s >= 0) close(s); /* the request ends: the peer closed */
        pthread_join(t, NULL);
        close(l);
        asb_http_client_free(q.cl);
        ASBT_CHECK(s >= 0 && fd >= 0);
        ASBT_CHECK(q.r != ASB_OK);
    }
#endif
}

/* Keepalive never cuts a live peer: one that reads the request and never
   answers (the kernel answers the probes) and one that stops reading a
   32 MiB upload (its window closes; the kernel answers the zero-window
   probes) both end at the call's own deadline, ASB_ERR_TIMEOUT, though
   the keepalive total (1 s + 3 x 1 s) is passed long before it. */
ASBT_TEST(keepalive_never_cuts_a_live_peer_that_is_silent_or_not_reading) {
#if defined(__linux__) && defined(TCP_USER_TIMEOUT)
    int upload;
    size_t big = (size_t)32 << 20;
    char *body = (char *)calloc(1, big);
    ASBT_CHECK(body != NULL);
    for (upload = 0; upload < 2; upload++) {
        asb_http_client_desc d;
        ka_req q;
        pthread_t t;
        struct pollfd pf;
        char url[64], buf[4096];
        int port, l = asbt_listen_loopback(4, &port), s;
        ASBT_CHECK(l >= 0);
        snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
        memset(&d, 0, sizeof d);
        d.retry.max_attempts = 1;
        d.tcp_keepalive_s = 1;
        memset(&q, 0, sizeof q);
        ASBT_EQ_RES(asb_http_client_create(&d, &q.cl, &q.err), ASB_OK);
        q.url = url;
        q.body = upload ? body : NULL;
        q.body_len = upload ? big : 0;
        q.timeout_ms = 7000;
        ASBT_CHECK(pthread_create(&t, NULL, ka_req_run, &q) == 0);
        pf.fd = l;
        pf.events = POLLIN;
        s = poll(&pf, 1, 20000) == 1 ? accept(l, NULL, NULL) : -1;
        /* the head (and, uploading, the first bytes of the body), then nothing */
        if (s >= 0 && read(s, buf, sizeof buf) <= 0) {}
        pthread_join(t, NULL);
        if (s >= 0) close(s);
        close(l);
        asb_http_client_free(q.cl);
        ASBT_CHECK(s >= 0);
        if (q.r != ASB_ERR_TIMEOUT) fprintf(stderr, "    %s: %s\n", asb_result_str(q.r), q.err.message);
        ASBT_EQ_RES(q.r, ASB_ERR_TIMEOUT);
    }
    free(body);
#endif
}

ASBT_LIST(
    ASBT_CASE(urls_parse_with_ports_ipv6_paths_and_queries)
    ASBT_CASE(bad_urls_are_refused_with_a_reason)
    ASBT_CASE(url_errors_never_show_the_user_info)
    ASBT_CASE(url_errors_hide_a_password_that_holds_a_slash_or_lacks_a_scheme)
    ASBT_CASE(chunked_body_split_at_every_byte_boundary_is_the_same)
    ASBT_CASE(content_length_and_until_close_bodies)
    ASBT_CASE(short_bodies_and_cut_chunks_are_errors_not_data)
    ASBT_CASE(chunk_size_lines_are_validated_to_their_end)
    ASBT_CASE(malformed_responses_are_protocol_errors)
    ASBT_CASE(header_limits_are_enforced)
    ASBT_CASE(no_body_for_head_204_304_and_interim_responses_are_skipped)
    ASBT_CASE(connection_close_and_chunked_with_length_end_keep_alive)
    ASBT_CASE(retry_after_is_read_as_seconds_or_an_http_date)
    ASBT_CASE(request_headers_with_cr_lf_are_never_sent)
    ASBT_CASE(multipart_framing_escapes_quotes_and_backslashes_as_the_runtimes_decode)
    ASBT_CASE(tcp_keepalive_is_set_on_each_connection_as_configured)
    ASBT_CASE(keepalive_never_cuts_a_live_peer_that_is_silent_or_not_reading)
)
ASBT_MAIN()
