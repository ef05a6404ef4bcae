/* HTTP/2 and gRPC against real peers on loopback (tests/h2/with-peers.sh
   starts them): nghttpd for HTTP/2 framing, Huffman-coded headers and
   flow control both ways; a grpcio server implementing a test
   process.v1.ProcessService from sandboxd's .proto for gRPC. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include "asbtest.h"
#include "scanalloc.h"
#include <dirent.h>

static char url_buf[64];

static const char *peer_url(const char *env) {
    const char *p = getenv(env);
    if (!p) {
        fprintf(stderr, "%s is not set: run under tests/h2/with-peers.sh\n", env);
        exit(2);
    }
    snprintf(url_buf, sizeof url_buf, "http://127.0.0.1:%s", p);
    return url_buf;
}

static asb_h2_conn *connect_to(const char *env, uint32_t window) {
    asb_h2_desc d;
    asb_h2_conn *h = NULL;
    asb_error err;
    memset(&d, 0, sizeof d);
    d.url = peer_url(env);
    d.stream_window = window;
    if (asb_h2_connect(&d, &h, &err) != ASB_OK) fprintf(stderr, "connect: %s\n", err.message);
    return h;
}

/* -- nghttpd ----------------------------------------------------------------------- */

static int check_pattern(const unsigned char *p, size_t n, size_t at) {
    size_t i;
    for (i = 0; i < n; i++)
        if (p[i] != (unsigned char)((at + i) % 251)) return 0;
    return 1;
}

ASBT_TEST(nghttpd_big_download_through_a_small_window_arrives_intact) {
    asb_h2_conn *h = connect_to("ASB_NGHTTPD_PORT", 65535);
    asb_h2_request rq;
    asb_h2_stream *s;
    asb_error err;
    asb_str v;
    unsigned char buf[7000];
    size_t n, total = 0, held;
    int reads = 0;
    ASBT_CHECK(h != NULL);
    memset(&rq, 0, sizeof rq);
    rq.path = "/big.bin";
    rq.end_stream = 1;
    rq.timeout_ms = 60000;
    ASBT_EQ_RES(asb_h2_stream_open(h, &rq, &s, &err), ASB_OK);
    ASBT_EQ_RES(asb_h2_stream_wait_headers(s, &err), ASB_OK);
    ASBT_EQ_INT(asb_h2_stream_status(s), 200);
    /* nghttpd sends its header values Huffman-coded */
    ASBT_CHECK(asb_h2_stream_header(s, "server", &v));
    ASBT_CHECK(v.len > 7 && memcmp(v.ptr, "nghttpd", 7) == 0);
    ASBT_CHECK(asb_h2_stream_header(s, "content-length", &v));
    ASBT_EQ_MEM(v.ptr, v.len, "8388608", 7);
    for (;;) {
        ASBT_EQ_RES(asb_h2_stream_read(s, buf, sizeof buf, &n, &err), ASB_OK);
        if (n == 0) break;
        ASBT_CHECK(check_pattern(buf, n, total));
        /* a slow reader: the server must wait for our WINDOW_UPDATEs,
           and what we hold never exceeds the window */
        pthread_mutex_lock(&h->mu);
        held = s->data.len - s->data_pos;
        pthread_mutex_unlock(&h->mu);
        ASBT_CHECK(held <= 65535);
        if (++reads % 64 == 0) asb__sleep_ms(1);
        total += n;
    }
    ASBT_EQ_INT(total, 8 << 20);
    asb_h2_stream_free(s);
    ASBT_CHECK(asb_h2_conn_usable(h));
    asb_h2_conn_free(h);
}

ASBT_TEST(nghttpd_upload_larger_than_its_windows_waits_for_window_updates) {
    /* this nghttpd grants 64 KiB windows: 4 MiB only fits by waiting */
    asb_h2_conn *h = connect_to("ASB_NGHTTPD_SMALL_PORT", 0);
    asb_h2_request rq;
    asb_h2_stream *s;
    asb_error err;
    static char body[4 << 20];
    char buf[256];
    size_t n;
    ASBT_CHECK(h != NULL);
    memset(body, 'u', sizeof body);
    memset(&rq, 0, sizeof rq);
    rq.method = "POST";
    rq.path = "/hello.txt";
    rq.timeout_ms = 60000;
    ASBT_EQ_RES(asb_h2_stream_open(h, &rq, &s, &err), ASB_OK);
    ASBT_EQ_RES(asb_h2_stream_write(s, body, sizeof body, 1, &err), ASB_OK);
    ASBT_EQ_RES(asb_h2_stream_wait_headers(s, &err), ASB_OK);
    ASBT_EQ_INT(asb_h2_stream_status(s), 200);
    ASBT_EQ_RES(asb_h2_stream_read(s, buf, sizeof buf, &n, &err), ASB_OK);
    ASBT_EQ_MEM(buf, n, "hello from nghttpd\n", 19);
    asb_h2_stream_free(s);
    /* a flow-control violation would have been a GOAWAY */
    ASBT_CHECK(asb_h2_conn_usable(h));
    asb_h2_conn_free(h);
}

typedef struct dl_job {
    asb_h2_conn *h;
    int ok;
} dl_job;

static void *download(void *arg) {
    dl_job *j = (dl_job *)arg;
    asb_h2_request rq;
    asb_h2_stream *s;
    static __thread unsigned char buf[32768];
    size_t n, total = 0;
    memset(&rq, 0, sizeof rq);
    rq.path = "/big.bin";
    rq.end_stream = 1;
    rq.timeout_ms = 60000;
    if (asb_h2_stream_open(j->h, &rq, &s, NULL) != ASB_OK) return NULL;
    while (asb_h2_stream_read(s, buf, sizeof buf, &n, NULL) == ASB_OK && n > 0) {
        if (!check_pattern(buf, n, total)) break;
        total += n;
    }
    j->ok = total == (8u << 20) && asb_h2_stream_status(s) == 200;
    asb_h2_stream_free(s);
    return NULL;
}

ASBT_TEST(nghttpd_six_concurrent_streams_on_one_connection_each_arrive_whole) {
    asb_h2_conn *h = connect_to("ASB_NGHTTPD_PORT", 0);
    pthread_t t[6];
    dl_job j[6];
    int i, ok = 0;
    ASBT_CHECK(h != NULL);
    for (i = 0; i < 6; i++) {
        j[i].h = h;
        j[i].ok = 0;
        pthread_create(&t[i], NULL, download, &j[i]);
    }
    for (i = 0; i < 6; i++) {
        pthread_join(t[i], NULL);
        ok += j[i].ok;
    }
    ASBT_EQ_INT(ok, 6);
    ASBT_EQ_INT(h->highest_id, 11); /* six streams, one connection */
    asb_h2_conn_free(h);
}

ASBT_TEST(nghttpd_missing_file_is_a_404_with_a_body) {
    asb_h2_conn *h = connect_to("ASB_NGHTTPD_PORT", 0);
    asb_h2_request rq;
    asb_h2_stream *s;
    char buf[4096];
    size_t n, total = 0;
    ASBT_CHECK(h != NULL);
    memset(&rq, 0, sizeof rq);
    rq.path = "/missing";
    rq.end_stream = 1;
    rq.timeout_ms = 30000;
    ASBT_EQ_RES(asb_h2_stream_open(h, &rq, &s, NULL), ASB_OK);
    ASBT_EQ_RES(asb_h2_stream_wait_headers(s, NULL), ASB_OK);
    ASBT_EQ_INT(asb_h2_stream_status(s), 404);
    while (asb_h2_stream_read(s, buf, sizeof buf, &n, NULL) == ASB_OK && n > 0) total += n;
    ASBT_CHECK(total > 0);
    asb_h2_stream_free(s);
    asb_h2_conn_free(h);
}

/* R6 for HTTP/2: an authorization header's value is wiped from the header
   block and the connection's output queue before their memory is freed
   (the 1 KB value makes both outgrow their first blocks), as the scanning
   allocator of tests/scanalloc.h checks for every block given back. */
ASBT_TEST(an_authorization_header_is_wiped_from_http2_buffers) {
    static char value[1100];
    scanalloc sa;
    asb_h2_desc d;
    asb_h2_conn *h = NULL;
    asb_h2_request rq;
    asb_h2_header hd;
    asb_h2_stream *s;
    asb_error err;
    char buf[4096];
    size_t n, i;
    int k;
    snprintf(value, sizeof value, "Bearer scan-h2-token-5e0c1a-");
    for (i = strlen(value); i < sizeof value - 1; i++) value[i] = (char)('a' + (i * 13) % 26);
    value[sizeof value - 1] = 0;
    scanalloc_init(&sa);
    scanalloc_secret(&sa, "scan-h2-token-5e0c1a");
    memset(&d, 0, sizeof d);
    d.url = peer_url("ASB_NGHTTPD_PORT");
    d.allocator = &sa.a;
    ASBT_EQ_RES(asb_h2_connect(&d, &h, &err), ASB_OK);
    for (k = 0; k < 3; k++) {
        memset(&rq, 0, sizeof rq);
        rq.path = "/missing";
        rq.end_stream = 1;
        rq.timeout_ms = 30000;
        hd.name = "authorization";
        hd.value = value;
        rq.headers = &hd;
        rq.header_count = 1;
        ASBT_EQ_RES(asb_h2_stream_open(h, &rq, &s, &err), ASB_OK);
        ASBT_EQ_RES(asb_h2_stream_wait_headers(s, &err), ASB_OK);
        ASBT_EQ_INT(asb_h2_stream_status(s), 404);
        while (asb_h2_stream_read(s, buf, sizeof buf, &n, NULL) == ASB_OK && n > 0) {}
        asb_h2_stream_free(s);
    }
    /* sent bytes are wiped from the output queue as they go (R15) */
    ASBT_CHECK(!scanalloc_live_has(&sa, 0));
    asb_h2_conn_free(h);
    ASBT_EQ_INT(sa.hits, 0);
    ASBT_EQ_INT(scanalloc_live_count(&sa), 0);
    scanalloc_fini(&sa);
}

/* -- gRPC ------------------------------------------------------------------------------ */

#define START "/process.v1.ProcessService/Start"
#define EXECUTE "/process.v1.ProcessService/Execute"

/* A StartRequest / ExecuteRequest: config (field 1) with the command. */
static void command_req(asb_buf *b, const char *const *argv, int argc) {
    size_t m;
    int i;
    asb_buf_init(b, NULL);
    asb_pb_begin(b, 1, &m);
    for (i = 0; i < argc; i++) asb_pb_put_string(b, 1, argv[i]);
    asb_pb_end(b, m);
}

typedef struct events {
    int inits, exits, done;
    int32_t pid, exit_code;
    asb_buf out;      /* stdout bytes joined */
    int chunks;
    int order_ok;     /* init first, exit last */
    asb_result result;
    asb_error err;
    int cancel_after; /* on_message returns 1 after this many (0: never) */
    int seen;
    asb_grpc_call *cancel_call; /* cancel this from on_message instead */
} events;

static int on_event(void *ud, const char *msg, size_t len) {
    events *e = (events *)ud;
    asb_pb_reader r, sub;
    asb_pb_field f, g;
    e->seen++;
    asb_pb_reader_init(&r, msg, len);
    while (asb_pb_next(&r, &f, NULL) == ASB_OK && f.number) {
        if (e->exits) e->order_ok = 0;
        if (f.number == 1 || f.number == 4) {
            *(f.number == 1 ? &e->pid : &e->exit_code) = 0; /* proto3: absent is 0 */
            asb_pb_reader_init(&sub, f.bytes.ptr, f.bytes.len);
            while (asb_pb_next(&sub, &g, NULL) == ASB_OK && g.number)
                if (g.number == 1) asb_pb_int32(&g, f.number == 1 ? &e->pid : &e->exit_code);
            if (f.number == 1) {
                if (e->seen != 1) e->order_ok = 0;
                __atomic_add_fetch(&e->inits, 1, __ATOMIC_SEQ_CST); /* polled by threads */
            } else {
                e->exits++;
            }
        } else if (f.number == 2) {
            asb_buf_append(&e->out, f.bytes.ptr, f.bytes.len);
            e->chunks++;
        }
    }
    return e->cancel_after && e->seen >= e->cancel_after;
}

static void on_done(void *ud, asb_result r, const asb_error *err) {
    events *e = (events *)ud;
    e->done++;
    e->result = r;
    e->err = *err;
}

static asb_result run_start(asb_h2_conn *h, const char *const *argv, int argc, int timeout_ms,
                            size_t max_msg, events *e) {
    asb_grpc_call_desc cd;
    asb_grpc_call *call;
    asb_grpc_handlers hd;
    asb_buf req;
    asb_result r;
    memset(&cd, 0, sizeof cd);
    cd.method = START;
    cd.timeout_ms = timeout_ms;
    cd.max_message_bytes = max_msg;
    asb_buf_init(&e->out, NULL);
    e->order_ok = 1;
    command_req(&req, argv, argc);
    r = asb_grpc_call_start(h, &cd, req.ptr, req.len, &call, &e->err);
    asb_buf_free(&req);
    if (r != ASB_OK) return r;
    hd.on_message = on_event;
    hd.on_done = on_done;
    hd.user_data = e;
    r = asb_grpc_call_run(call, &hd, NULL);
    asb_grpc_call_free(call);
    return r;
}

ASBT_TEST(grpc_server_stream_delivers_each_message_in_order_then_one_done) {
    asb_h2_conn *h = connect_to("ASB_GRPC_PORT", 0);
    static const char *const argv[] = {"echo", "one", "two", "three"};
    events e;
    memset(&e, 0, sizeof e);
    ASBT_CHECK(h != NULL);
    ASBT_EQ_RES(run_start(h, argv, 4, 10000, 0, &e), ASB_OK);
    ASBT_EQ_INT(e.done, 1);
    ASBT_EQ_RES(e.result, ASB_OK);
    ASBT_EQ_INT(e.inits, 1);
    ASBT_EQ_INT(e.pid, 42);
    ASBT_EQ_INT(e.chunks, 3);
    ASBT_EQ_MEM(e.out.ptr, e.out.len, "onetwothree", 11);
    ASBT_EQ_INT(e.exits, 1);
    ASBT_CHECK(e.order_ok);
    asb_buf_free(&e.out);
    asb_h2_conn_free(h);
}

ASBT_TEST(grpc_unary_execute_round_trip_and_status_zero) {
    asb_h2_conn *h = connect_to("ASB_GRPC_PORT", 0);
    static const char *const argv[] = {"hello", "world!"};
    asb_grpc_call_desc cd;
    asb_buf req, resp;
    asb_error err;
    asb_pb_reader r;
    asb_pb_field f;
    int32_t code = -1;
    asb_str out = {NULL, 0};
    ASBT_CHECK(h != NULL);
    memset(&cd, 0, sizeof cd);
    cd.method = EXECUTE;
    cd.timeout_ms = 10000;
    command_req(&req, argv, 2);
    asb_buf_init(&resp, NULL);
    ASBT_EQ_RES(asb_grpc_unary(h, &cd, req.ptr, req.len, &resp, &err), ASB_OK);
    asb_pb_reader_init(&r, resp.ptr, resp.len);
    while (asb_pb_next(&r, &f, NULL) == ASB_OK && f.number) {
        if (f.number == 1) asb_pb_int32(&f, &code);
        if (f.number == 2) asb_pb_bytes(&f, &out);
    }
    ASBT_EQ_INT(code, 11);
    ASBT_EQ_MEM(out.ptr, out.len, "hello", 5);
    asb_buf_free(&req);
    asb_buf_free(&resp);
    asb_h2_conn_free(h);
}

ASBT_TEST(grpc_sixteen_mib_messages_cross_both_ways_over_the_windows) {
    asb_h2_conn *h = connect_to("ASB_GRPC_PORT", 65535);
    char big_n[16];
    const char *argv[2];
    events e;
    asb_grpc_call_desc cd;
    asb_buf req, resp;
    asb_pb_reader r;
    asb_pb_field f;
    int32_t code = -1;
    char *arg;
    const char *args1[1];
    size_t i;
    ASBT_CHECK(h != NULL);
    /* download: one 16 MiB message through a 64 KiB stream window */
    snprintf(big_n, sizeof big_n, "%d", 16 << 20);
    argv[0] = "big";
    argv[1] = big_n;
    memset(&e, 0, sizeof e);
    ASBT_EQ_RES(run_start(h, argv, 2, 60000, (size_t)32 << 20, &e), ASB_OK);
    ASBT_EQ_INT(e.out.len, 16 << 20);
    for (i = 0; i < e.out.len; i++)
        if ((unsigned char)e.out.ptr[i] != i % 251) break;
    ASBT_EQ_INT(i, 16 << 20);
    asb_buf_free(&e.out);
    /* upload: a 16 MiB command string through the server's windows */
    arg = (char *)malloc((16 << 20) + 1);
    memset(arg, 'x', 16 << 20);
    arg[16 << 20] = '\0';
    args1[0] = arg;
    command_req(&req, args1, 1);
    free(arg);
    memset(&cd, 0, sizeof cd);
    cd.method = EXECUTE;
    cd.timeout_ms = 60000;
    asb_buf_init(&resp, NULL);
    ASBT_EQ_RES(asb_grpc_unary(h, &cd, req.ptr, req.len, &resp, NULL), ASB_OK);
    asb_pb_reader_init(&r, resp.ptr, resp.len);
    while (asb_pb_next(&r, &f, NULL) == ASB_OK && f.number)
        if (f.number == 1) asb_pb_int32(&f, &code);
    ASBT_EQ_INT(code, 16 << 20);
    asb_buf_free(&req);
    asb_buf_free(&resp);
    asb_h2_conn_free(h);
}

ASBT_TEST(grpc_trailers_only_error_keeps_code_and_unicode_message) {
    asb_h2_conn *h = connect_to("ASB_GRPC_PORT", 0);
    static const char *const argv[] = {"fail"};
    events e;
    memset(&e, 0, sizeof e);
    ASBT_CHECK(h != NULL);
    ASBT_EQ_RES(run_start(h, argv, 1, 10000, 0, &e), ASB_ERR_GRPC_STATUS);
    ASBT_EQ_INT(e.done, 1);
    ASBT_EQ_INT(e.seen, 0);
    ASBT_EQ_STR(e.err.reason, "NOT_FOUND");
    ASBT_CONTAINS(e.err.message,
                  "no such process: pid 7 \xc3\xbcn\xc3\xaf" "c\xc3\xb8" "d\xc3\xa9 \xe2\x9c\x93 100%");
    asb_buf_free(&e.out);
    ASBT_CHECK(asb_h2_conn_usable(h));
    asb_h2_conn_free(h);
}

ASBT_TEST(grpc_error_after_a_message_comes_from_the_trailers) {
    asb_h2_conn *h = connect_to("ASB_GRPC_PORT", 0);
    static const char *const argv[] = {"fail-after"};
    events e;
    memset(&e, 0, sizeof e);
    ASBT_CHECK(h != NULL);
    ASBT_EQ_RES(run_start(h, argv, 1, 10000, 0, &e), ASB_ERR_GRPC_STATUS);
    ASBT_EQ_INT(e.seen, 1);
    ASBT_EQ_MEM(e.out.ptr, e.out.len, "partial", 7);
    ASBT_EQ_STR(e.err.reason, "ABORTED");
    ASBT_CONTAINS(e.err.message, "stopped after one message");
    asb_buf_free(&e.out);
    asb_h2_conn_free(h);
}

ASBT_TEST(grpc_deadline_passing_is_a_timeout_named_deadline_exceeded) {
    asb_h2_conn *h = connect_to("ASB_GRPC_PORT", 0);
    static const char *const argv[] = {"sleep", "5000"};
    events e;
    memset(&e, 0, sizeof e);
    ASBT_CHECK(h != NULL);
    ASBT_EQ_RES(run_start(h, argv, 2, 300, 0, &e), ASB_ERR_TIMEOUT);
    ASBT_EQ_INT(e.done, 1);
    ASBT_EQ_STR(e.err.reason, "DEADLINE_EXCEEDED");
    /* the connection carries on */
    {
        static const char *const ok[] = {"echo", "x"};
        events e2;
        memset(&e2, 0, sizeof e2);
        ASBT_EQ_RES(run_start(h, ok, 2, 10000, 0, &e2), ASB_OK);
        asb_buf_free(&e2.out);
    }
    asb_buf_free(&e.out);
    asb_h2_conn_free(h);
}

static int server_cancelled(asb_h2_conn *h) {
    static const char *const argv[] = {"stats"};
    asb_grpc_call_desc cd;
    asb_buf req, resp;
    int n = -1;
    memset(&cd, 0, sizeof cd);
    cd.method = EXECUTE;
    cd.timeout_ms = 10000;
    command_req(&req, argv, 1);
    asb_buf_init(&resp, NULL);
    if (asb_grpc_unary(h, &cd, req.ptr, req.len, &resp, NULL) == ASB_OK) {
        const char *p = (const char *)memchr(resp.ptr, '=', resp.len);
        if (p) n = atoi(p + 1);
    }
    asb_buf_free(&req);
    asb_buf_free(&resp);
    return n;
}

typedef struct canceller {
    asb_grpc_call *call;
    events *e;
} canceller;

static void *cancel_when_started(void *arg) {
    canceller *c = (canceller *)arg;
    int i;
    for (i = 0; i < 10000 && !__atomic_load_n(&c->e->inits, __ATOMIC_SEQ_CST); i++)
        asb__sleep_ms(1);
    asb_grpc_call_cancel(c->call);
    return NULL;
}

ASBT_TEST(grpc_cancel_from_another_thread_resets_the_stream_at_the_server) {
    asb_h2_conn *h = connect_to("ASB_GRPC_PORT", 0);
    static const char *const argv[] = {"slow"};
    asb_grpc_call_desc cd;
    asb_grpc_call *call;
    asb_grpc_handlers hd;
    asb_buf req;
    events e;
    canceller c;
    pthread_t t;
    int before, after = -1, i;
    ASBT_CHECK(h != NULL);
    before = server_cancelled(h);
    ASBT_CHECK(before >= 0);
    memset(&e, 0, sizeof e);
    asb_buf_init(&e.out, NULL);
    memset(&cd, 0, sizeof cd);
    cd.method = START;
    command_req(&req, argv, 1);
    ASBT_EQ_RES(asb_grpc_call_start(h, &cd, req.ptr, req.len, &call, NULL), ASB_OK);
    asb_buf_free(&req);
    c.call = call;
    c.e = &e;
    pthread_create(&t, NULL, cancel_when_started, &c);
    hd.on_message = on_event;
    hd.on_done = on_done;
    hd.user_data = &e;
    ASBT_EQ_RES(asb_grpc_call_run(call, &hd, NULL), ASB_ERR_CANCELLED);
    pthread_join(t, NULL);
    asb_grpc_call_free(call);
    ASBT_EQ_INT(e.done, 1);
    ASBT_EQ_INT(e.inits, 1);
    ASBT_EQ_STR(e.err.reason, "CANCELLED");
    /* the server saw the RST_STREAM (its stream's callback ran) */
    for (i = 0; i < 200; i++) {
        after = server_cancelled(h);
        if (after == before + 1) break;
        asb__sleep_ms(50);
    }
    ASBT_EQ_INT(after, before + 1);
    asb_buf_free(&e.out);
    asb_h2_conn_free(h);
}

ASBT_TEST(grpc_on_message_returning_nonzero_cancels_the_call) {
    asb_h2_conn *h = connect_to("ASB_GRPC_PORT", 0);
    static const char *const argv[] = {"many", "50", "1000"};
    events e;
    memset(&e, 0, sizeof e);
    e.cancel_after = 2;
    ASBT_CHECK(h != NULL);
    ASBT_EQ_RES(run_start(h, argv, 3, 10000, 0, &e), ASB_ERR_CANCELLED);
    ASBT_EQ_INT(e.seen, 2);
    ASBT_EQ_INT(e.done, 1);
    asb_buf_free(&e.out);
    asb_h2_conn_free(h);
}

ASBT_TEST(grpc_message_above_the_cap_fails_too_large) {
    asb_h2_conn *h = connect_to("ASB_GRPC_PORT", 0);
    static const char *const argv[] = {"big", "2000000"};
    events e;
    memset(&e, 0, sizeof e);
    ASBT_CHECK(h != NULL);
    ASBT_EQ_RES(run_start(h, argv, 2, 10000, 1 << 20, &e), ASB_ERR_TOO_LARGE);
    ASBT_EQ_INT(e.seen, 1); /* the init event, then the big one refused */
    ASBT_EQ_INT(e.done, 1);
    asb_buf_free(&e.out);
    asb_h2_conn_free(h);
}

typedef struct stdin_job {
    asb_h2_conn *h;
    events *e;
    int ok;
} stdin_job;

static asb_result unary(asb_h2_conn *h, const char *method, asb_buf *req, asb_error *err) {
    asb_grpc_call_desc cd;
    asb_buf resp;
    asb_result r;
    memset(&cd, 0, sizeof cd);
    cd.method = method;
    cd.timeout_ms = 10000;
    asb_buf_init(&resp, NULL);
    r = asb_grpc_unary(h, &cd, req->ptr, req->len, &resp, err);
    asb_buf_free(&resp);
    return r;
}

/* Runs a START call for req (30 s) on j->h into j->e, made empty first
   (no exit seen: -1), while `beside` runs with j on a thread of its own:
   what a client does to a process while its stream is open. The thread
   is joined before this returns the call's result. */
static asb_result run_start_beside(stdin_job *j, const asb_buf *req, void *(*beside)(void *)) {
    asb_grpc_call_desc cd;
    asb_grpc_call *call;
    asb_grpc_handlers hd;
    asb_result r;
    pthread_t t;
    int started;
    memset(j->e, 0, sizeof *j->e);
    asb_buf_init(&j->e->out, NULL);
    j->e->order_ok = 1;
    j->e->exit_code = -1;
    j->ok = 0;
    memset(&cd, 0, sizeof cd);
    cd.method = START;
    cd.timeout_ms = 30000;
    r = asb_grpc_call_start(j->h, &cd, req->ptr, req->len, &call, NULL);
    if (r != ASB_OK) return r;
    started = pthread_create(&t, NULL, beside, j) == 0; /* if not, j->ok stays 0 */
    hd.on_message = on_event;
    hd.on_done = on_done;
    hd.user_data = j->e;
    r = asb_grpc_call_run(call, &hd, NULL);
    if (started) pthread_join(t, NULL);
    asb_grpc_call_free(call);
    return r;
}

static void *write_stdin(void *arg) {
    stdin_job *j = (stdin_job *)arg;
    asb_buf req;
    size_t m;
    int i, ok = 1;
    for (i = 0; i < 10000 && !__atomic_load_n(&j->e->inits, __ATOMIC_SEQ_CST); i++)
        asb__sleep_ms(1);
    for (i = 0; i < 3; i++) {
        char word[8];
        snprintf(word, sizeof word, "w%d;", i);
        asb_buf_init(&req, NULL);
        asb_pb_put_int32(&req, 1, 43);
        asb_pb_put_bytes(&req, 2, word, strlen(word));
        ok &= unary(j->h, "/process.v1.ProcessService/WriteStdin", &req, NULL) == ASB_OK;
        asb_buf_free(&req);
    }
    /* a pid that does not exist: NOT_FOUND */
    asb_buf_init(&req, NULL);
    asb_pb_put_int32(&req, 1, 999);
    asb_pb_put_bytes(&req, 2, "x", 1);
    ok &= unary(j->h, "/process.v1.ProcessService/WriteStdin", &req, NULL) == ASB_ERR_GRPC_STATUS;
    asb_buf_free(&req);
    /* then SendSignal(43, SIGTERM): the stream ends with exit 143 */
    asb_buf_init(&req, NULL);
    asb_pb_put_int32(&req, 1, 43);
    asb_pb_put_int32(&req, 2, 15);
    ok &= unary(j->h, "/process.v1.ProcessService/SendSignal", &req, NULL) == ASB_OK;
    asb_buf_free(&req);
    (void)m;
    j->ok = ok;
    return NULL;
}

ASBT_TEST(grpc_start_stream_stays_open_while_stdin_and_signal_calls_run_beside_it) {
    asb_h2_conn *h = connect_to("ASB_GRPC_PORT", 0);
    static const char *const argv[] = {"cat"};
    stdin_job j;
    events e;
    asb_buf req;
    asb_result r;
    ASBT_CHECK(h != NULL);
    command_req(&req, argv, 1);
    j.h = h;
    j.e = &e;
    r = run_start_beside(&j, &req, write_stdin);
    asb_buf_free(&req);
    ASBT_EQ_RES(r, ASB_OK);
    ASBT_CHECK(j.ok);
    ASBT_EQ_MEM(e.out.ptr, e.out.len, "w0;w1;w2;", 9);
    ASBT_EQ_INT(e.exit_code, 143);
    ASBT_CHECK(e.order_ok);
    ASBT_EQ_INT(e.done, 1);
    asb_buf_free(&e.out);
    asb_h2_conn_free(h);
}

/* -- the sandboxd runtime's trace context, as a gRPC server receives it ------------ */

/* Spans as the tracer hands them out (on_span_end): name and context. */
typedef struct md_spans {
    int n;
    char name[8][64];
    asb_trace_context ctx[8];
} md_spans;

static void md_on_span(void *u, const asb_span_data *d) {
    md_spans *t = (md_spans *)u;
    if (t->n < 8) {
        snprintf(t->name[t->n], sizeof t->name[t->n], "%s", d->name);
        t->ctx[t->n++] = d->ctx;
    }
}

static const asb_trace_context *md_span(const md_spans *t, const char *name) {
    int i;
    for (i = 0; i < t->n; i++)
        if (strcmp(t->name[i], name) == 0) return &t->ctx[i];
    return NULL;
}

static void md_collect(void *u, asb_process_output which, const char *p, size_t n) {
    if (which == ASB_PROCESS_STDOUT) asb_buf_append((asb_buf *)u, p, n);
}

/* An in-pod sandboxd handle on the grpcio ProcessService (its REST side is
   never called here); tracing on with a parent and a tracestate, or off. */
static asb_client *md_client(int traced, md_spans *t, asb_sandbox **sb) {
    static char grpc_addr[64];
    asb_client_desc d;
    asb_client *c = NULL;
    asb_error err;
    const char *port = getenv("ASB_GRPC_PORT");
    snprintf(grpc_addr, sizeof grpc_addr, "127.0.0.1:%s", port ? port : "0");
    memset(&d, 0, sizeof d);
    d.mode = ASB_CONNECT_IN_POD;
    d.sandboxd_grpc_addr = grpc_addr;
    d.sandboxd_rest_addr = grpc_addr;
    if (traced) {
        d.tracer.enable = 1;
        d.tracer.otlp = -1;
        d.tracer.service_name = "mdsvc";
        d.tracer.parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        d.tracer.parent_state = "vendor=opaque-value";
        d.tracer.on_span_end = md_on_span;
        d.tracer.user_data = t;
    }
    if (asb_client_create(&d, &c, &err) != ASB_OK) {
        fprintf(stderr, "    client: %s\n", err.message);
        return NULL;
    }
    if (asb_client_sandbox_in_pod(c, sb, &err) != ASB_OK) {
        fprintf(stderr, "    in_pod: %s\n", err.message);
        asb_client_free(c);
        return NULL;
    }
    return c;
}

/* The metadata line "key=value\n" for key in what the server printed, or
   "" when it has none; NUL-terminated in out. */
static const char *md_line(const char *text, const char *key, char *out, size_t cap) {
    size_t kl = strlen(key);
    const char *p = text;
    out[0] = '\0';
    while (p && *p) {
        const char *e = strchr(p, '\n');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
            snprintf(out, cap, "%.*s", (int)(l - kl - 1), p + kl + 1);
            break;
        }
        p = e ? e + 1 : NULL;
    }
    return out;
}

/* What the server printed for a run ("/bin/sh -c metadata": Execute) and
   for a streaming process ("metadata": Start), NUL-terminated. */
static int md_calls(asb_sandbox *sb, asb_buf *exec_out, asb_buf *start_out) {
    const char *argv[1] = {"metadata"};
    asb_run_result rr;
    asb_process_opts po;
    asb_process *p = NULL;
    asb_error err;
    int code = -1, ok = 1;
    if (asb_sandbox_run(sb, "metadata", 30000, &rr, &err) != ASB_OK) {
        fprintf(stderr, "    run: %s\n", err.message);
        ok = 0;
    } else {
        asb_buf_append(exec_out, rr.out.ptr, rr.out.len);
    }
    asb_run_result_free(&rr);
    memset(&po, 0, sizeof po);
    po.argv = argv;
    po.argc = 1;
    po.on_output = md_collect;
    po.user_data = start_out;
    if (asb_sandbox_process_start(sb, &po, &p, &err) != ASB_OK ||
        asb_process_wait(p, 30000, &code, &err) != ASB_OK || code != 0) {
        fprintf(stderr, "    process: %s (exit %d)\n", err.message, code);
        ok = 0;
    }
    asb_process_free(p);
    asb_buf_append(exec_out, "", 1);
    asb_buf_append(start_out, "", 1);
    return ok;
}

/* A server that lies: two answers to the unary Execute fail the run with a
   message that says so (not a stale one from an earlier read), and an
   error whose grpc-message carries C1 controls (CSI, OSC, ST to a UTF-8
   terminal) and an ESC reaches err.message with each of their bytes as
   '?', its other UTF-8 kept. The handle works on after both. */
ASBT_TEST(sandboxd_run_refuses_two_answers_and_scrubs_the_servers_message) {
    asb_sandbox *sb = NULL;
    asb_client *c = md_client(0, NULL, &sb);
    asb_run_result rr;
    asb_error err;
    size_t i;
    ASBT_CHECK(c != NULL);
    memset(&rr, 0, sizeof rr);
    ASBT_EQ_RES(asb_sandbox_run(sb, "two-answers", 30000, &rr, &err), ASB_ERR_HTTP_PROTOCOL);
    ASBT_EQ_INT(err.code, ASB_ERR_HTTP_PROTOCOL);
    ASBT_CONTAINS(err.message, "Execute: more than one response message to a unary call");
    asb_run_result_free(&rr);
    memset(&rr, 0, sizeof rr);
    ASBT_CHECK(asb_sandbox_run(sb, "c1-error", 30000, &rr, &err) != ASB_OK);
    ASBT_CONTAINS(err.message, "boom ??2J ??0;owned?? ?[31m red \xc3\xa9\xe2\x82\xac");
    for (i = 0; err.message[i]; i++) {
        unsigned char ch = (unsigned char)err.message[i];
        ASBT_CHECK(ch >= 0x20 && ch != 0x7f);
        ASBT_CHECK(!(ch == 0xc2 && (unsigned char)err.message[i + 1] <= 0x9f));
    }
    asb_run_result_free(&rr);
    memset(&rr, 0, sizeof rr);
    ASBT_EQ_RES(asb_sandbox_run(sb, "echo", 30000, &rr, &err), ASB_OK);
    ASBT_EQ_INT(rr.exit_code, 13); /* the server's answer: "/bin/sh" "-c" "echo", 7 + 2 + 4 bytes */
    ASBT_EQ_MEM(rr.out.ptr, rr.out.len, "/bin/sh", 7);
    asb_run_result_free(&rr);
    asb_client_free(c);
}

/* The traceparent sent as the Execute and Start calls' metadata is the
   context of the span each call ran in (run, process_start), as the
   tracer exported it, child of the parent's trace; the tracestate goes
   with it. Tracing off: neither key reaches the server. */
ASBT_TEST(sandboxd_runtime_sends_each_calls_span_as_traceparent_metadata) {
    static md_spans t;
    asb_sandbox *sb = NULL;
    asb_client *c;
    asb_buf ex, st;
    char v[256], want[ASB_TRACEPARENT_SIZE];
    const asb_trace_context *run, *start;
    asb_trace_context parent;
    memset(&t, 0, sizeof t);
    ASBT_EQ_RES(asb_traceparent_parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                                      55, &parent, NULL),
                ASB_OK);
    c = md_client(1, &t, &sb);
    ASBT_CHECK(c != NULL);
    asb_buf_init(&ex, NULL);
    asb_buf_init(&st, NULL);
    ASBT_CHECK(md_calls(sb, &ex, &st));
    run = md_span(&t, "mdsvc.run");
    start = md_span(&t, "mdsvc.process_start");
    ASBT_CHECK(run != NULL && start != NULL);
    /* the spans are in the parent's trace, and are not the parent */
    ASBT_CHECK(memcmp(run->trace_id, parent.trace_id, 16) == 0);
    ASBT_CHECK(memcmp(start->trace_id, parent.trace_id, 16) == 0);
    ASBT_CHECK(memcmp(run->span_id, parent.span_id, 8) != 0);
    ASBT_CHECK(memcmp(run->span_id, start->span_id, 8) != 0);
    asb_traceparent_format(run, want);
    ASBT_EQ_STR(md_line(ex.ptr, "traceparent", v, sizeof v), want);
    ASBT_EQ_STR(md_line(ex.ptr, "tracestate", v, sizeof v), "vendor=opaque-value");
    asb_traceparent_format(start, want);
    ASBT_EQ_STR(md_line(st.ptr, "traceparent", v, sizeof v), want);
    ASBT_EQ_STR(md_line(st.ptr, "tracestate", v, sizeof v), "vendor=opaque-value");
    asb_client_free(c);
    asb_buf_free(&ex);
    asb_buf_free(&st);

    /* off: the same calls, no trace keys (the server did print the rest) */
    c = md_client(0, NULL, &sb);
    ASBT_CHECK(c != NULL);
    asb_buf_init(&ex, NULL);
    asb_buf_init(&st, NULL);
    ASBT_CHECK(md_calls(sb, &ex, &st));
    ASBT_CONTAINS(ex.ptr, "user-agent=");
    ASBT_CONTAINS(st.ptr, "user-agent=");
    ASBT_CHECK(strstr(ex.ptr, "traceparent") == NULL && strstr(ex.ptr, "tracestate") == NULL);
    ASBT_CHECK(strstr(st.ptr, "traceparent") == NULL && strstr(st.ptr, "tracestate") == NULL);
    asb_client_free(c);
    asb_buf_free(&ex);
    asb_buf_free(&st);
}

ASBT_TEST(grpc_unknown_method_is_unimplemented) {
    asb_h2_conn *h = connect_to("ASB_GRPC_PORT", 0);
    asb_buf req;
    asb_error err;
    ASBT_CHECK(h != NULL);
    asb_buf_init(&req, NULL);
    if (unary(h, "/process.v1.ProcessService/Nope", &req, &err) != ASB_ERR_GRPC_STATUS)
        fprintf(stderr, "    %s\n", err.message);
    ASBT_EQ_RES(err.code, ASB_ERR_GRPC_STATUS);
    ASBT_EQ_STR(err.reason, "UNIMPLEMENTED");
    asb_buf_free(&req);
    asb_h2_conn_free(h);
}

ASBT_TEST(h2_connect_to_a_closed_port_is_a_connect_error) {
    asb_h2_desc d;
    asb_h2_conn *h = NULL;
    asb_error err;
    memset(&d, 0, sizeof d);
    d.url = "http://127.0.0.1:1";
    ASBT_EQ_RES(asb_h2_connect(&d, &h, &err), ASB_ERR_CONNECT);
    ASBT_CHECK(h == NULL);
}

/* -- TLS with ALPN h2 ------------------------------------------------------------------ */

static asb_result connect_tls(const char *port_env, const char *ca, uint32_t window,
                              asb_h2_conn **h, asb_error *err) {
    asb_h2_desc d;
    const char *p = getenv(port_env);
    memset(&d, 0, sizeof d);
    if (!p) {
        fprintf(stderr, "%s is not set: run under tests/h2/with-peers.sh\n", port_env);
        exit(2);
    }
    snprintf(url_buf, sizeof url_buf, "https://127.0.0.1:%s", p);
    d.url = url_buf;
    d.tls.ca_file = ca;
    d.stream_window = window;
    return asb_h2_connect(&d, h, err);
}

ASBT_TEST(tls_alpn_h2_big_download_through_a_small_window_arrives_intact) {
    asb_h2_conn *h = NULL;
    asb_h2_request rq;
    asb_h2_stream *s;
    asb_error err;
    static unsigned char buf[10000];
    size_t n, total = 0;
#if !ASB_TLS
    return;
#endif
    ASBT_EQ_RES(connect_tls("ASB_NGHTTPD_TLS_PORT", getenv("ASB_H2_CA"), 65535, &h, &err), ASB_OK);
    memset(&rq, 0, sizeof rq);
    rq.path = "/big.bin";
    rq.end_stream = 1;
    rq.timeout_ms = 60000;
    ASBT_EQ_RES(asb_h2_stream_open(h, &rq, &s, &err), ASB_OK);
    {   /* the call's result, not err.code: err is only written on failure */
        asb_result r = asb_h2_stream_wait_headers(s, &err);
        if (r != ASB_OK) fprintf(stderr, "    %s\n", err.message);
        ASBT_EQ_RES(r, ASB_OK);
    }
    ASBT_EQ_INT(asb_h2_stream_status(s), 200);
    for (;;) {
        ASBT_EQ_RES(asb_h2_stream_read(s, buf, sizeof buf, &n, &err), ASB_OK);
        if (n == 0) break;
        ASBT_CHECK(check_pattern(buf, n, total));
        total += n;
    }
    ASBT_EQ_INT(total, 8 << 20);
    asb_h2_stream_free(s);
    asb_h2_conn_free(h);
}

ASBT_TEST(tls_server_that_does_not_choose_h2_is_refused_clearly) {
    asb_h2_conn *h = NULL;
    asb_error err;
    asb_result r = connect_tls("ASB_H1_ONLY_TLS_PORT", getenv("ASB_H2_CA"), 0, &h, &err);
    ASBT_EQ_RES(r, ASB_ERR_HTTP_PROTOCOL);
    ASBT_CONTAINS(err.message, "did not choose h2");
    ASBT_CHECK(h == NULL);
}

ASBT_TEST(tls_certificate_from_an_unknown_ca_is_refused) {
    asb_h2_conn *h = NULL;
    asb_error err;
    ASBT_EQ_RES(connect_tls("ASB_NGHTTPD_TLS_PORT", NULL, 0, &h, &err), ASB_ERR_TLS_VERIFY);
    ASBT_CHECK(h == NULL);
}

/* -- GOAWAY from a real server ------------------------------------------------------------ */

typedef struct inflight {
    asb_h2_conn *h;
    events e;
    asb_result r;
} inflight;

static void *run_sleep(void *arg) {
    inflight *f = (inflight *)arg;
    static const char *const argv[] = {"sleep", "8000"};
    f->r = run_start(f->h, argv, 2, 60000, 0, &f->e);
    return NULL;
}

ASBT_TEST(grpc_goaway_stops_new_streams_while_the_call_in_flight_finishes) {
    /* this server sends GOAWAY 1.5 s into each connection, 20 s of grace */
    asb_h2_conn *h = connect_to("ASB_GRPC_AGED_PORT", 0);
    inflight f;
    pthread_t t;
    asb_h2_request rq;
    asb_h2_stream *s = NULL;
    asb_error err;
    int i;
    ASBT_CHECK(h != NULL);
    memset(&f, 0, sizeof f);
    f.h = h;
    pthread_create(&t, NULL, run_sleep, &f);
    for (i = 0; i < 1500 && asb_h2_conn_usable(h); i++) asb__sleep_ms(10);
    ASBT_CHECK(!asb_h2_conn_usable(h));
    memset(&rq, 0, sizeof rq);
    rq.path = "/process.v1.ProcessService/Execute";
    ASBT_EQ_RES(asb_h2_stream_open(h, &rq, &s, &err), ASB_ERR_CLOSED);
    ASBT_CONTAINS(err.message, "GOAWAY");
    pthread_join(t, NULL);
    ASBT_EQ_RES(f.r, ASB_OK); /* below the last stream id: it finished */
    ASBT_EQ_INT(f.e.exits, 1);
    ASBT_EQ_INT(f.e.done, 1);
    asb_buf_free(&f.e.out);
    asb_h2_conn_free(h);
}

typedef struct slow_reader {
    asb_grpc_call *call;
    int n;
    size_t max_held;
    uint64_t bytes;
} slow_reader;

static int slow_msg(void *ud, const char *msg, size_t len) {
    slow_reader *r = (slow_reader *)ud;
    asb_h2_stream *s = r->call->s;
    size_t held;
    asb_pb_reader pr;
    asb_pb_field f;
    asb_pb_reader_init(&pr, msg, len);
    while (asb_pb_next(&pr, &f, NULL) == ASB_OK && f.number)
        if (f.number == 2) r->bytes += f.bytes.len;
    if (++r->n <= 20) asb__sleep_ms(20); /* the server runs far ahead of us */
    pthread_mutex_lock(&s->conn->mu);
    held = s->data.len - s->data_pos;
    pthread_mutex_unlock(&s->conn->mu);
    if (held > r->max_held) r->max_held = held;
    return 0;
}

ASBT_TEST(grpc_slow_consumer_holds_at_most_one_stream_window) {
    asb_h2_conn *h = connect_to("ASB_GRPC_PORT", 65535);
    static const char *const argv[] = {"many", "128", "16384"};
    asb_grpc_call_desc cd;
    asb_grpc_handlers hd;
    asb_buf req;
    slow_reader r;
    ASBT_CHECK(h != NULL);
    memset(&r, 0, sizeof r);
    memset(&cd, 0, sizeof cd);
    cd.method = START;
    cd.timeout_ms = 60000;
    command_req(&req, argv, 3);
    ASBT_EQ_RES(asb_grpc_call_start(h, &cd, req.ptr, req.len, &r.call, NULL), ASB_OK);
    asb_buf_free(&req);
    memset(&hd, 0, sizeof hd);
    hd.on_message = slow_msg;
    hd.user_data = &r;
    ASBT_EQ_RES(asb_grpc_call_run(r.call, &hd, NULL), ASB_OK);
    asb_grpc_call_free(r.call);
    ASBT_EQ_INT(r.bytes, 128 * 16384);
    ASBT_CHECK(r.max_held > 0);      /* it did read ahead */
    ASBT_CHECK(r.max_held <= 65535); /* never past our window */
    asb_h2_conn_free(h);
}

ASBT_TEST(h2_response_headers_over_the_cap_fail_the_stream_not_the_connection) {
    asb_h2_desc d;
    asb_h2_conn *h = NULL;
    asb_h2_request rq;
    asb_h2_stream *s;
    asb_error err;
    memset(&d, 0, sizeof d);
    /* nghttpd does not hold back what our SETTINGS call too large (grpcio
       resets the stream itself), so the cap is ours to enforce */
    d.url = peer_url("ASB_NGHTTPD_PORT");
    d.max_header_list_bytes = 100;
    ASBT_EQ_RES(asb_h2_connect(&d, &h, &err), ASB_OK);
    memset(&rq, 0, sizeof rq);
    rq.path = "/hello.txt";
    rq.end_stream = 1;
    rq.timeout_ms = 10000;
    ASBT_EQ_RES(asb_h2_stream_open(h, &rq, &s, &err), ASB_OK);
    {
        asb_result r = asb_h2_stream_wait_headers(s, &err);
        if (r != ASB_ERR_TOO_LARGE) fprintf(stderr, "    %s\n", err.message);
        ASBT_EQ_RES(r, ASB_ERR_TOO_LARGE);
    }
    asb_h2_stream_free(s);
    ASBT_CHECK(asb_h2_conn_usable(h));
    asb_h2_conn_free(h);
}

/* -- process.v1 messages, read and written by Python's protobuf ----------------------- */

typedef struct described {
    asb__pv1_event ev[4];
    asb_buf text;
    int n;
    asb_result bad;
} described;

static int on_described(void *ud, const char *msg, size_t len) {
    described *d = (described *)ud;
    asb__pv1_event ev;
    asb_result r = asb__pv1_start_response(msg, len, &ev, NULL);
    if (r != ASB_OK || d->n >= 4) {
        d->bad = r != ASB_OK ? r : ASB_ERR_TOO_LARGE;
        return 1;
    }
    if (ev.kind == ASB__PV1_STDOUT) asb_buf_append(&d->text, ev.data.ptr, ev.data.len);
    ev.data.ptr = NULL; /* borrowed: gone after the return */
    d->ev[d->n++] = ev;
    return 0;
}

ASBT_TEST(process_v1_requests_read_by_python_and_its_responses_read_by_us) {
    asb_h2_conn *h = connect_to("ASB_GRPC_PORT", 0);
    static const char *const argv[] = {"describe", "a b", "\xc3\xa9"};
    static const char *const names[] = {"HOME", "LANG"}, *const values[] = {"/root", "C.UTF-8"};
    asb__pv1_config c;
    asb_grpc_call_desc cd;
    asb_grpc_call *call;
    asb_grpc_handlers hd;
    asb_buf req, resp;
    described d;
    asb__pv1_exec_result x;
    ASBT_CHECK(h != NULL);
    memset(&c, 0, sizeof c);
    c.argv = argv;
    c.argc = 3;
    c.env_names = names;
    c.env_values = values;
    c.env_count = 2;
    c.cwd = "";
    /* Start with a PTY (and an empty but present cwd) */
    asb_buf_init(&req, NULL);
    ASBT_EQ_RES(asb__pv1_start_request(&req, &c, 1, 80, 24), ASB_OK);
    memset(&cd, 0, sizeof cd);
    cd.method = START;
    cd.timeout_ms = 10000;
    ASBT_EQ_RES(asb_grpc_call_start(h, &cd, req.ptr, req.len, &call, NULL), ASB_OK);
    memset(&d, 0, sizeof d);
    asb_buf_init(&d.text, NULL);
    memset(&hd, 0, sizeof hd);
    hd.on_message = on_described;
    hd.user_data = &d;
    ASBT_EQ_RES(asb_grpc_call_run(call, &hd, NULL), ASB_OK);
    asb_grpc_call_free(call);
    ASBT_EQ_RES(d.bad, ASB_OK);
    ASBT_EQ_STR(d.text.ptr, "cmd=describe|a b|\xc3\xa9 env=HOME=/root,LANG=C.UTF-8 cwd= pty=80x24");
    ASBT_EQ_INT(d.n, 4);
    ASBT_EQ_INT(d.ev[1].kind, ASB__PV1_STDERR);
    ASBT_EQ_INT(d.ev[2].kind, ASB__PV1_EXIT);
    ASBT_EQ_INT(d.ev[2].value, -7); /* a ten-byte varint from Python */
    ASBT_EQ_INT(d.ev[3].kind, ASB__PV1_INIT);
    ASBT_EQ_INT(d.ev[3].value, 2147483647);
    /* Execute without env, cwd unset */
    c.env_count = 0;
    c.cwd = NULL;
    req.len = 0;
    ASBT_EQ_RES(asb__pv1_execute_request(&req, &c), ASB_OK);
    cd.method = EXECUTE;
    asb_buf_init(&resp, NULL);
    ASBT_EQ_RES(asb_grpc_unary(h, &cd, req.ptr, req.len, &resp, NULL), ASB_OK);
    ASBT_EQ_RES(asb__pv1_execute_response(resp.ptr, resp.len, &x, NULL), ASB_OK);
    ASBT_EQ_INT(x.exit_code, -3);
    ASBT_EQ_MEM(x.out.ptr, x.out.len, "cmd=describe|a b|\xc3\xa9 env= cwd=<unset>", 36);
    ASBT_EQ_MEM(x.errout.ptr, x.errout.len, "e", 1);
    asb_buf_free(&req);
    asb_buf_free(&resp);
    asb_buf_free(&d.text);
    asb_h2_conn_free(h);
}

static void *write_then_eof(void *arg) {
    stdin_job *j = (stdin_job *)arg;
    asb_buf req;
    int i, ok = 1;
    for (i = 0; i < 10000 && !__atomic_load_n(&j->e->inits, __ATOMIC_SEQ_CST); i++)
        asb__sleep_ms(1);
    asb_buf_init(&req, NULL);
    asb__pv1_write_stdin_request(&req, 43, "line\n", 5, 0);
    ok &= unary(j->h, "/process.v1.ProcessService/WriteStdin", &req, NULL) == ASB_OK;
    req.len = 0;
    asb__pv1_resize_tty_request(&req, 43, 120, 40);
    ok &= unary(j->h, "/process.v1.ProcessService/ResizeTTY", &req, NULL) == ASB_OK;
    req.len = 0;
    asb__pv1_write_stdin_request(&req, 43, NULL, 0, 1);
    ok &= unary(j->h, "/process.v1.ProcessService/WriteStdin", &req, NULL) == ASB_OK;
    asb_buf_free(&req);
    j->ok = ok;
    return NULL;
}

ASBT_TEST(process_v1_stdin_eof_ends_the_start_stream_with_exit_zero) {
    asb_h2_conn *h = connect_to("ASB_GRPC_PORT", 0);
    static const char *const argv[] = {"cat"};
    stdin_job j;
    events e;
    asb__pv1_config c;
    asb_buf req;
    asb_result r;
    ASBT_CHECK(h != NULL);
    memset(&c, 0, sizeof c);
    c.argv = argv;
    c.argc = 1;
    asb_buf_init(&req, NULL);
    asb__pv1_start_request(&req, &c, 0, 0, 0);
    j.h = h;
    j.e = &e;
    r = run_start_beside(&j, &req, write_then_eof);
    asb_buf_free(&req);
    ASBT_EQ_RES(r, ASB_OK);
    ASBT_CHECK(j.ok);
    ASBT_EQ_MEM(e.out.ptr, e.out.len, "line\n", 5);
    ASBT_EQ_INT(e.exits, 1);
    ASBT_EQ_INT(e.exit_code, 0);
    asb_buf_free(&e.out);
    asb_h2_conn_free(h);
}

/* -- a hostile peer: control-frame floods (scripted: no real server floods) ------- */

/* Counts the library's heap in bytes and refuses past a ceiling, so a
   flood the client does not stop fails here instead of eating the machine. */
typedef struct flood_heap {
    pthread_mutex_t mu;
    size_t live, peak, ceiling;
} flood_heap;

static void *flood_alloc(size_t n, void *ud) {
    flood_heap *fh = (flood_heap *)ud;
    size_t *p = NULL;
    pthread_mutex_lock(&fh->mu);
    if (fh->live + n <= fh->ceiling) {
        p = (size_t *)malloc(n + sizeof(size_t) * 2);
        if (p) {
            p[0] = n;
            fh->live += n;
            if (fh->live > fh->peak) fh->peak = fh->live;
        }
    }
    pthread_mutex_unlock(&fh->mu);
    return p ? p + 2 : NULL;
}
static void flood_free(void *q, void *ud) {
    flood_heap *fh = (flood_heap *)ud;
    size_t *p;
    if (!q) return;
    p = (size_t *)q - 2;
    pthread_mutex_lock(&fh->mu);
    fh->live -= p[0];
    pthread_mutex_unlock(&fh->mu);
    free(p);
}
static void *flood_realloc(void *q, size_t n, void *ud) {
    void *r;
    size_t old;
    if (!q) return flood_alloc(n, ud);
    old = ((size_t *)q - 2)[0];
    r = flood_alloc(n, ud);
    if (!r) return NULL;
    memcpy(r, q, old < n ? old : n);
    flood_free(q, ud);
    return r;
}

typedef struct flood_peer {
    int lfd, fd;
    int type;  /* the frame type it floods (0x20: one of no known type) */
    int drain; /* 1: it reads all we send (a flood of the CPU, not memory) */
} flood_peer;

/* Reads and drops what the client sends until the socket closes. */
static void *flood_drain(void *arg) {
    flood_peer *fp = (flood_peer *)arg;
    char junk[65536];
    while (recv(fp->fd, junk, sizeof junk, 0) > 0) {
    }
    return NULL;
}

/* On the accepted connection: its SETTINGS (a response's HEADERS on
   stream 1 first, for DATA and CONTINUATION), then frames of one type
   until shutdown() ends the sending; reading what the client sends back
   only with `drain`. Every frame is valid on its own: only their number
   is hostile. */
static void *flood_serve(void *arg) {
    flood_peer *fp = (flood_peer *)arg;
    static unsigned char frames[17 * 1000];
    unsigned char settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
    /* :status 200 (HPACK static index 8); END_HEADERS unless a
       CONTINUATION flood follows */
    unsigned char headers[10] = {0, 0, 1, 1, 4, 0, 0, 0, 1, 0x88};
    size_t i, plen = 0, len;
    int small = 1 << 16;
    pthread_t drainer;
    switch (fp->type) {
    case ASB__H2_PING: plen = 8; break;
    case ASB__H2_WINDOW_UPDATE: plen = 4; break;
    case ASB__H2_PRIORITY: plen = 5; break;
    default: plen = 0; break;
    }
    len = 9 + plen;
    if (!fp->drain) setsockopt(fp->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    for (i = 0; i < 1000; i++) {
        unsigned char *f = frames + len * i;
        memset(f, 0, len);
        f[2] = (unsigned char)plen;
        f[3] = (unsigned char)fp->type;
        if (fp->type == ASB__H2_DATA || fp->type == ASB__H2_PRIORITY ||
            fp->type == ASB__H2_CONTINUATION)
            f[8] = 1; /* stream 1, which the client opened */
        if (fp->type == ASB__H2_WINDOW_UPDATE) f[12] = 1; /* +1 on the connection */
        if (fp->type == ASB__H2_PRIORITY) f[13] = 16;      /* depends on 0, weight 17 */
    }
    if (fp->type == ASB__H2_CONTINUATION) headers[4] = 0;
    if (fp->drain && pthread_create(&drainer, NULL, flood_drain, fp) != 0) return NULL;
    if (send(fp->fd, settings, 9, MSG_NOSIGNAL) == 9 &&
        ((fp->type != ASB__H2_DATA && fp->type != ASB__H2_CONTINUATION) ||
         send(fp->fd, headers, 10, MSG_NOSIGNAL) == 10)) {
        while (send(fp->fd, frames, len * 1000, MSG_NOSIGNAL) >= 0) {
        }
    }
    if (fp->drain) {
        shutdown(fp->fd, SHUT_RDWR);
        pthread_join(drainer, NULL);
    }
    return NULL;
}

/* A hang guard, not a speed check: waits up to tries x 10 ms for the flag
   another thread sets under mu when the call under test returned; says
   whether it did. */
static int returned_within(pthread_mutex_t *mu, const int *done, int tries) {
    int i, d = 0;
    for (i = 0; i < tries && !d; i++) {
        usleep(10000);
        pthread_mutex_lock(mu);
        d = *done;
        pthread_mutex_unlock(mu);
    }
    return d;
}

typedef struct flood_watch {
    asb_h2_conn *h;
    pthread_mutex_t mu;
    int done;
    asb_result open_res;
    asb_error err;
} flood_watch;

/* Another caller of the connection: it must get the lock and learn the
   connection is over, then opening a stream says why. */
static void *flood_watch_run(void *arg) {
    flood_watch *w = (flood_watch *)arg;
    asb_h2_request rq;
    asb_h2_stream *s = NULL;
    while (asb_h2_conn_usable(w->h)) usleep(10000);
    memset(&rq, 0, sizeof rq);
    rq.end_stream = 1;
    w->open_res = asb_h2_stream_open(w->h, &rq, &s, &w->err);
    if (s) asb_h2_stream_free(s);
    pthread_mutex_lock(&w->mu);
    w->done = 1;
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void flood_case(int type, int drain) {
    asb_h2_stream *first = NULL;
    flood_heap fh;
    flood_peer fp;
    flood_watch w;
    asb_allocator a;
    asb_h2_desc d;
    asb_h2_conn *h = NULL;
    asb_error err;
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    pthread_t srv, watcher;
    int done;
    memset(&fh, 0, sizeof fh);
    pthread_mutex_init(&fh.mu, NULL);
    fh.ceiling = (size_t)64 << 20;
    a.alloc_fn = flood_alloc;
    a.realloc_fn = flood_realloc;
    a.free_fn = flood_free;
    a.user_data = &fh;
    memset(&fp, 0, sizeof fp);
    fp.type = type;
    fp.drain = drain;
    fp.fd = -1;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(0x7f000001);
    fp.lfd = socket(AF_INET, SOCK_STREAM, 0);
    ASBT_CHECK(fp.lfd >= 0);
    ASBT_CHECK(bind(fp.lfd, (struct sockaddr *)&sa, sizeof sa) == 0);
    ASBT_CHECK(listen(fp.lfd, 1) == 0);
    ASBT_CHECK(getsockname(fp.lfd, (struct sockaddr *)&sa, &sl) == 0);
    snprintf(url_buf, sizeof url_buf, "http://127.0.0.1:%d", ntohs(sa.sin_port));
    memset(&d, 0, sizeof d);
    d.url = url_buf;
    d.allocator = &a;
    ASBT_EQ_RES(asb_h2_connect(&d, &h, &err), ASB_OK); /* (the backlog took it) */
    if (type == ASB__H2_DATA || type == ASB__H2_PRIORITY || type == ASB__H2_CONTINUATION) {
        asb_h2_request rq;
        memset(&rq, 0, sizeof rq);
        rq.end_stream = 1;
        ASBT_EQ_RES(asb_h2_stream_open(h, &rq, &first, &err), ASB_OK); /* stream 1 */
    }
    fp.fd = accept(fp.lfd, NULL, NULL);
    ASBT_CHECK(fp.fd >= 0);
    ASBT_CHECK(pthread_create(&srv, NULL, flood_serve, &fp) == 0);
    memset(&w, 0, sizeof w);
    w.h = h;
    pthread_mutex_init(&w.mu, NULL);
    ASBT_CHECK(pthread_create(&watcher, NULL, flood_watch_run, &w) == 0);
    done = returned_within(&w.mu, &w.done, 1000); /* before the fix it never did */
    shutdown(fp.fd, SHUT_RDWR);
    ASBT_CHECK(done); /* (on failure the threads stay stuck: the run ends) */
    pthread_join(watcher, NULL);
    pthread_join(srv, NULL);
    ASBT_EQ_RES(w.open_res, ASB_ERR_HTTP_PROTOCOL);
    ASBT_CONTAINS(w.err.message, "ENHANCE_YOUR_CALM");
    ASBT_CONTAINS(w.err.message, "flood");
    /* bounded: the replies queued, the input buffer and the connection;
       before the fix this reached the 64 MiB ceiling */
    ASBT_CHECK(fh.peak < ((size_t)4 << 20));
    if (first) asb_h2_stream_free(first);
    asb_h2_conn_free(h);
    ASBT_EQ_INT((long)fh.live, 0);
    close(fp.fd);
    close(fp.lfd);
    pthread_mutex_destroy(&w.mu);
    pthread_mutex_destroy(&fh.mu);
}

/* -- the sandboxd runtime's connections (R18) --------------------------------------- */

static int open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    int n = 0;
    if (!d) return -1;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.') n++;
    closedir(d);
    return n - 1; /* opendir's own */
}

/* A handle's gRPC connection that the server ended (here by age: GOAWAY
   1.5 s into each, as a sandboxd behind MAX_CONNECTION_AGE does; a
   hostile one may do it after every call) is replaced at the next call;
   the one replaced, with no stream left on it, must be freed then, not
   kept with its socket and wake pipe until the handle goes. */
/* An in-pod client whose sandboxd, REST and gRPC, is 127.0.0.1 on the
   port named by the environment variable port_env, its HTTP buffers from
   alloc (NULL: libc), and its handle; *sb stays NULL when a step fails
   (the check says which). */
static void in_pod_client(const char *port_env, const asb_allocator *alloc, asb_client **c,
                          asb_sandbox **sb) {
    const char *port = getenv(port_env);
    asb_client_desc cd;
    asb_error err;
    char addr[64];
    *c = NULL;
    *sb = NULL;
    ASBT_CHECK(port != NULL);
    snprintf(addr, sizeof addr, "127.0.0.1:%s", port);
    memset(&cd, 0, sizeof cd);
    cd.mode = ASB_CONNECT_IN_POD;
    cd.sandboxd_rest_addr = addr; /* the peer serves gRPC only: no case here calls REST */
    cd.sandboxd_grpc_addr = addr;
    cd.kube.http.allocator = alloc;
    ASBT_EQ_RES(asb_client_create(&cd, c, &err), ASB_OK);
    ASBT_EQ_RES(asb_client_sandbox_in_pod(*c, sb, &err), ASB_OK);
}

ASBT_TEST(sandboxd_handle_frees_the_grpc_connections_the_server_ended) {
    asb_client *c = NULL;
    asb_sandbox *sb = NULL;
    asb_run_result rr;
    asb_error err;
    int i, before, after;
    in_pod_client("ASB_GRPC_AGED_PORT", NULL, &c, &sb);
    ASBT_CHECK(sb != NULL);
    ASBT_EQ_RES(asb_sandbox_run(sb, "echo", 20000, &rr, &err), ASB_OK);
    asb_run_result_free(&rr);
    before = open_fds(); /* one connection: its socket and wake pipe */
    for (i = 0; i < 4; i++) {
        asb__sleep_ms(1900); /* past the age (and its jitter): GOAWAY came */
        ASBT_EQ_RES(asb_sandbox_run(sb, "echo", 20000, &rr, &err), ASB_OK);
        asb_run_result_free(&rr);
    }
    after = open_fds();
    /* still one connection; before the fix each of the four replaced
       stayed open (3 descriptors each: +12) */
    if (after - before >= 3) fprintf(stderr, "    %d descriptors before, %d after\n", before, after);
    ASBT_CHECK(after - before < 3);
    asb_client_free(c);
}

/* A sandboxd that takes every stream and never answers (wedged, or
   hostile): scripted, no real server does it on demand. Sends its
   SETTINGS, then reads and drops what comes until shut down. */
typedef struct silent_peer {
    int lfd, fd;
    int setting;            /* 0: an empty SETTINGS; else this id set to 0 */
} silent_peer;

static void *silent_serve(void *arg) {
    silent_peer *sp = (silent_peer *)arg;
    unsigned char settings[15] = {0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    size_t n = 9;
    char junk[4096];
    if (sp->setting) { /* one entry: the id, value 0 */
        settings[2] = 6;
        settings[10] = (unsigned char)sp->setting;
        n = 15;
    }
    sp->fd = accept(sp->lfd, NULL, NULL);
    if (sp->fd < 0) return NULL;
    if (send(sp->fd, settings, n, MSG_NOSIGNAL) != (ssize_t)n)
        return NULL;
    while (recv(sp->fd, junk, sizeof junk, 0) > 0) {
    }
    return NULL;
}

typedef struct start_job {
    asb_sandbox *sb;
    const asb_cancel *cancel; /* the process's opts */
    int timeout_ms;
    pthread_mutex_t mu;
    int done;
    asb_result r;
    asb_error err;
} start_job;

static void *start_run(void *arg) {
    start_job *j = (start_job *)arg;
    asb_process_opts po;
    asb_process *p = NULL;
    asb_result r;
    memset(&po, 0, sizeof po);
    po.shell = "sleep 1000"; /* no timeout_ms: a long process, the usual case */
    po.cancel = j->cancel;
    po.timeout_ms = j->timeout_ms;
    r = asb_sandbox_process_start(j->sb, &po, &p, &j->err);
    asb_process_free(p);
    pthread_mutex_lock(&j->mu);
    j->r = r;
    j->done = 1;
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

/* A sandbox reached in the pod at a silent_peer (its SETTINGS empty, or
   with the id setting at 0), read_timeout_ms the client's bound on
   waiting for an answer. */
typedef struct silent_sandbox {
    silent_peer sp;
    pthread_t srv;
    char addr[64];
    asb_client *c;
    asb_sandbox *sb;
} silent_sandbox;

static void silent_sandbox_open(silent_sandbox *s, int setting, int read_timeout_ms) {
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    asb_client_desc cd;
    asb_error err;
    memset(s, 0, sizeof *s);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(0x7f000001);
    s->sp.fd = -1;
    s->sp.setting = setting;
    s->sp.lfd = socket(AF_INET, SOCK_STREAM, 0);
    ASBT_CHECK(s->sp.lfd >= 0);
    ASBT_CHECK(bind(s->sp.lfd, (struct sockaddr *)&sa, sizeof sa) == 0);
    ASBT_CHECK(listen(s->sp.lfd, 4) == 0);
    ASBT_CHECK(getsockname(s->sp.lfd, (struct sockaddr *)&sa, &sl) == 0);
    snprintf(s->addr, sizeof s->addr, "127.0.0.1:%d", ntohs(sa.sin_port));
    ASBT_CHECK(pthread_create(&s->srv, NULL, silent_serve, &s->sp) == 0);
    memset(&cd, 0, sizeof cd);
    cd.mode = ASB_CONNECT_IN_POD;
    cd.sandboxd_rest_addr = s->addr;
    cd.sandboxd_grpc_addr = s->addr;
    cd.kube.http.read_timeout_ms = read_timeout_ms;
    ASBT_EQ_RES(asb_client_create(&cd, &s->c, &err), ASB_OK);
    ASBT_EQ_RES(asb_client_sandbox_in_pod(s->c, &s->sb, &err), ASB_OK);
}

/* Starts a process on s's sandbox in another thread, as j asks (its
   cancel token and timeout_ms; the rest zero), and waits up to 30 s for
   the call to return (before the fixes it never did); cancel_midway, when
   given, is triggered 300 ms in: the start waits under the peer's limit
   (or for window) by then, or soon. Then shuts the peer's connection,
   which unsticks a call that hung, and joins both threads. Says whether
   the start returned by itself; its result is in j. */
static int start_returns(silent_sandbox *s, start_job *j, asb_cancel *cancel_midway) {
    pthread_t t;
    int done;
    j->sb = s->sb;
    pthread_mutex_init(&j->mu, NULL);
    if (pthread_create(&t, NULL, start_run, j) != 0) return 0;
    if (cancel_midway) {
        usleep(300000);
        asb_cancel_trigger(cancel_midway);
    }
    done = returned_within(&j->mu, &j->done, 3000);
    if (s->sp.fd >= 0) shutdown(s->sp.fd, SHUT_RDWR);
    pthread_join(t, NULL);
    pthread_join(s->srv, NULL);
    pthread_mutex_destroy(&j->mu);
    return done;
}

static void silent_sandbox_close(silent_sandbox *s) {
    asb_client_free(s->c);
    if (s->sp.fd >= 0) close(s->sp.fd);
    close(s->sp.lfd);
}

/* R19: process_start waited for sandboxd's init event with no bound. */
ASBT_TEST(sandboxd_process_start_against_a_silent_server_times_out) {
    silent_sandbox s;
    start_job j;
    silent_sandbox_open(&s, 0, 1000);
    ASBT_CHECK(s.sb != NULL);
    memset(&j, 0, sizeof j);
    ASBT_CHECK(start_returns(&s, &j, NULL));
    ASBT_EQ_RES(j.r, ASB_ERR_TIMEOUT);
    ASBT_CONTAINS(j.err.message, "init event");
    silent_sandbox_close(&s);
}

/* R33: a sandboxd that allows no stream (SETTINGS_MAX_CONCURRENT_STREAMS
   0, or a limit a long process already fills) or gives a new stream no
   window (SETTINGS_INITIAL_WINDOW_SIZE 0) held a process start forever
   before it sent its request: R19 bounded only the wait for the init
   event. Scripted: no real server does either on demand.
   how 0: bounded by the read timeout; 1: the process's cancel token ends
   the wait; 2: the process's own timeout_ms, shorter than the read
   timeout, ends it. For 1 and 2 the read timeout is a minute: the hang
   guard ends a wait that only it would end. */
static void start_blocked_case(int setting, int how) {
    silent_sandbox s;
    start_job j;
    asb_sandbox *sb;
    asb_cancel *tok = NULL;
    asb_run_result rr;
    asb_error err;
    int i, applied = 0;
    silent_sandbox_open(&s, setting, how ? 60000 : 1000);
    ASBT_CHECK(s.sb != NULL);
    sb = s.sb;
    ASBT_EQ_RES(asb_cancel_create(NULL, &tok, &err), ASB_OK);
    /* a run makes the connection (and times out: nobody answers) */
    memset(&rr, 0, sizeof rr);
    ASBT_EQ_RES(asb_sandbox_run(sb, "true", 1000, &rr, &err), ASB_ERR_TIMEOUT);
    asb_run_result_free(&rr);
    /* then the peer's SETTINGS is in force before the start */
    for (i = 0; i < 3000 && !applied; i++) {
        pthread_mutex_lock(&sb->h2_lock);
        if (sb->h2) {
            pthread_mutex_lock(&sb->h2->mu);
            applied = setting == 3 ? sb->h2->peer_max_streams == 0
                                   : sb->h2->peer_initial_window == 0;
            pthread_mutex_unlock(&sb->h2->mu);
        }
        pthread_mutex_unlock(&sb->h2_lock);
        if (!applied) usleep(10000);
    }
    ASBT_CHECK(applied);
    memset(&j, 0, sizeof j);
    if (how == 1) j.cancel = tok;
    if (how == 2) j.timeout_ms = 300;
    ASBT_CHECK(start_returns(&s, &j, how == 1 ? tok : NULL));
    ASBT_EQ_RES(j.r, how == 1 ? ASB_ERR_CANCELLED : ASB_ERR_TIMEOUT);
    if (how == 2) ASBT_CHECK(strstr(j.err.message, "timeout_ms") != NULL);
    silent_sandbox_close(&s);
    asb_cancel_free(tok);
}

ASBT_TEST(sandboxd_process_start_under_a_stream_limit_of_zero_times_out) {
    start_blocked_case(3, 0); /* SETTINGS_MAX_CONCURRENT_STREAMS */
}

ASBT_TEST(sandboxd_process_start_without_a_stream_window_times_out) {
    start_blocked_case(4, 0); /* SETTINGS_INITIAL_WINDOW_SIZE */
}

/* R42: the bound above was the read timeout alone: the process's cancel
   token and a shorter timeout_ms were not looked at until the request
   was out. */
ASBT_TEST(sandboxd_process_start_under_a_stream_limit_of_zero_is_cancelled) {
    start_blocked_case(3, 1);
}

ASBT_TEST(sandboxd_process_start_without_a_stream_window_is_cancelled) {
    start_blocked_case(4, 1);
}

ASBT_TEST(sandboxd_process_start_under_a_stream_limit_of_zero_ends_at_its_timeout_ms) {
    start_blocked_case(3, 2);
}

ASBT_TEST(sandboxd_process_start_without_a_stream_window_ends_at_its_timeout_ms) {
    start_blocked_case(4, 2);
}

/* R21: the values of a process's env (where API keys go) and what is
   typed into its stdin (a password at a prompt) pass through request
   buffers of the sandboxd runtime; none may be left in memory the
   library frees. Against the grpcio ProcessService (its Execute echoes
   only command[0], "/bin/sh"; "slow" answers init and waits). */
ASBT_TEST(sandboxd_env_values_and_stdin_are_wiped_from_freed_memory) {
    static const char *const slow[] = {"slow"};
    scanalloc sa;
    asb_client *c = NULL;
    asb_sandbox *sb = NULL;
    asb_run_result rr;
    asb_call_opts co;
    asb_process_opts po;
    asb_process *p = NULL;
    asb_env_var env[1];
    asb_error err;
    scanalloc_init(&sa);
    scanalloc_secret(&sa, "scan-sd-env-9d41e7");
    scanalloc_secret(&sa, "scan-sd-stdin-52b0aa");
    in_pod_client("ASB_GRPC_PORT", &sa.a, &c, &sb);
    ASBT_CHECK(sb != NULL);
    env[0].name = "API_KEY";
    env[0].value = "scan-sd-env-9d41e7";
    env[0].container_name = NULL;
    memset(&co, 0, sizeof co);
    co.env = env;
    co.env_count = 1;
    co.timeout_ms = 20000;
    ASBT_EQ_RES(asb_sandbox_run_opts(sb, "true", &co, &rr, &err), ASB_OK);
    asb_run_result_free(&rr);
    memset(&po, 0, sizeof po);
    po.argv = slow;
    po.argc = 1;
    po.env = env;
    po.env_count = 1;
    ASBT_EQ_RES(asb_sandbox_process_start(sb, &po, &p, &err), ASB_OK);
    /* the server has no stdin for it (NOT_FOUND): the request was made */
    asb_process_write_stdin(p, "scan-sd-stdin-52b0aa\n", 21, &err);
    asb_process_free(p);
    asb_client_free(c);
    ASBT_CHECK(sa.frees > 0);
    ASBT_EQ_INT(sa.hits, 0);
    ASBT_EQ_INT(scanalloc_live_count(&sa), 0);
    scanalloc_fini(&sa);
}

/* R36: a second init event (here from the grpcio ProcessService's
   "reinit", once the process's stdin was written to) rewrote the process
   id while asb_process_wait read the stream, under the threads that read
   it to address stdin, signals and resizes. It is refused: the wait
   fails clearly, the id stays the first. Resizes run beside the wait so
   the ThreadSanitizer build watches the id's readers too. */
typedef struct wait_job {
    asb_process *p;
    pthread_mutex_t mu;
    int done;
    asb_result r;
    asb_error err;
} wait_job;

static void *wait_run(void *arg) {
    wait_job *j = (wait_job *)arg;
    asb_error err;
    int code = 0;
    asb_result r = asb_process_wait(j->p, 20000, &code, &err);
    pthread_mutex_lock(&j->mu);
    j->r = r;
    j->err = err;
    j->done = 1;
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

ASBT_TEST(sandboxd_second_init_event_fails_the_process_and_keeps_the_first_id) {
    static const char *const reinit[] = {"reinit"};
    asb_client *c = NULL;
    asb_sandbox *sb = NULL;
    asb_process_opts po;
    asb_process *p = NULL;
    asb_error err;
    wait_job j;
    pthread_t t;
    int i, done = 0, moved = 0;
    in_pod_client("ASB_GRPC_PORT", NULL, &c, &sb);
    ASBT_CHECK(sb != NULL);
    memset(&po, 0, sizeof po);
    po.argv = reinit;
    po.argc = 1;
    ASBT_EQ_RES(asb_sandbox_process_start(sb, &po, &p, &err), ASB_OK);
    ASBT_EQ_INT(asb_process_id(p), 46);
    memset(&j, 0, sizeof j);
    j.p = p;
    pthread_mutex_init(&j.mu, NULL);
    ASBT_CHECK(pthread_create(&t, NULL, wait_run, &j) == 0);
    /* the write makes the server send its second init event, beside its
       answer: the waiting thread may judge the process over before the
       answer is read, and then the write ends as NOT_FOUND (R64) */
    {
        asb_result wr = asb_process_write_stdin(p, "x", 1, &err);
        if (wr != ASB_OK && wr != ASB_ERR_NOT_FOUND) fprintf(stderr, "    %s\n", err.message);
        ASBT_CHECK(wr == ASB_OK || wr == ASB_ERR_NOT_FOUND);
    }
    for (i = 0; i < 2000 && !done; i++) {
        asb_process_resize(p, 24, 80, &err); /* reads the id beside the wait */
        if (asb_process_id(p) != 46) moved = 1;
        pthread_mutex_lock(&j.mu);
        done = j.done;
        pthread_mutex_unlock(&j.mu);
        if (!done) usleep(10000);
    }
    pthread_join(t, NULL);
    pthread_mutex_destroy(&j.mu);
    /* before the fix: the wait returned exit 0 and the id was 47 */
    ASBT_EQ_INT(moved, 0);
    ASBT_EQ_INT(asb_process_id(p), 46);
    ASBT_EQ_RES(j.r, ASB_ERR_PROTOBUF_INVALID);
    ASBT_CONTAINS(j.err.message, "second init event (process 47 after 46)");
    asb_process_free(p);
    asb_client_free(c);
}

/* R61: an init event naming process 0 or below (a lying sandboxd) was
   taken: -1 became the id that stdin, signals and resizes address (to
   kill(2), every process), and 0 left the start waiting for another
   init. The start fails clearly; no handle is given out. */
ASBT_TEST(sandboxd_init_event_without_a_process_id_fails_the_start) {
    static const char *const ids[] = {"0", "-1", "-2147483648"};
    asb_client *c = NULL;
    asb_sandbox *sb = NULL;
    asb_process_opts po;
    asb_error err;
    size_t i;
    in_pod_client("ASB_GRPC_PORT", NULL, &c, &sb);
    ASBT_CHECK(sb != NULL);
    for (i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        const char *argv[2];
        asb_process *p = NULL;
        char want[96];
        argv[0] = "badpid";
        argv[1] = ids[i];
        memset(&po, 0, sizeof po);
        po.argv = argv;
        po.argc = 2;
        ASBT_EQ_RES(asb_sandbox_process_start(sb, &po, &p, &err), ASB_ERR_PROTOBUF_INVALID);
        ASBT_CHECK(p == NULL);
        snprintf(want, sizeof want, "an init event with process id %s (not a process)", ids[i]);
        ASBT_CONTAINS(err.message, want);
        asb_process_free(p);
    }
    asb_client_free(c);
}

ASBT_TEST(h2_ping_flood_without_reading_ends_the_connection_enhance_your_calm) {
    flood_case(ASB__H2_PING, 0);
}

ASBT_TEST(h2_settings_flood_without_reading_ends_the_connection_enhance_your_calm) {
    flood_case(ASB__H2_SETTINGS, 0);
}

/* Floods of frames that need no answer, from a peer that reads all we
   send: nothing piles up in memory, but without a budget the I/O thread
   would work for it forever. (PING and SETTINGS this fast already trip the
   queued-replies cap: a read burst queues more answers than it allows.) */
ASBT_TEST(h2_window_update_flood_from_a_reading_peer_ends_the_connection_enhance_your_calm) {
    flood_case(ASB__H2_WINDOW_UPDATE, 1);
}

ASBT_TEST(h2_priority_flood_ends_the_connection_enhance_your_calm) {
    flood_case(ASB__H2_PRIORITY, 1);
}

ASBT_TEST(h2_empty_data_flood_ends_the_connection_enhance_your_calm) {
    flood_case(ASB__H2_DATA, 1);
}

ASBT_TEST(h2_empty_continuation_flood_ends_the_connection_enhance_your_calm) {
    flood_case(ASB__H2_CONTINUATION, 1);
}

ASBT_TEST(h2_unknown_frame_type_flood_ends_the_connection_enhance_your_calm) {
    flood_case(0x20, 1);
}

ASBT_LIST(ASBT_CASE(nghttpd_big_download_through_a_small_window_arrives_intact)
          ASBT_CASE(nghttpd_upload_larger_than_its_windows_waits_for_window_updates)
          ASBT_CASE(nghttpd_six_concurrent_streams_on_one_connection_each_arrive_whole)
          ASBT_CASE(nghttpd_missing_file_is_a_404_with_a_body)
          ASBT_CASE(an_authorization_header_is_wiped_from_http2_buffers)
          ASBT_CASE(grpc_server_stream_delivers_each_message_in_order_then_one_done)
          ASBT_CASE(grpc_unary_execute_round_trip_and_status_zero)
          ASBT_CASE(grpc_sixteen_mib_messages_cross_both_ways_over_the_windows)
          ASBT_CASE(grpc_trailers_only_error_keeps_code_and_unicode_message)
          ASBT_CASE(grpc_error_after_a_message_comes_from_the_trailers)
          ASBT_CASE(grpc_deadline_passing_is_a_timeout_named_deadline_exceeded)
          ASBT_CASE(grpc_cancel_from_another_thread_resets_the_stream_at_the_server)
          ASBT_CASE(grpc_on_message_returning_nonzero_cancels_the_call)
          ASBT_CASE(grpc_message_above_the_cap_fails_too_large)
          ASBT_CASE(grpc_start_stream_stays_open_while_stdin_and_signal_calls_run_beside_it)
          ASBT_CASE(sandboxd_runtime_sends_each_calls_span_as_traceparent_metadata)
          ASBT_CASE(sandboxd_run_refuses_two_answers_and_scrubs_the_servers_message)
          ASBT_CASE(grpc_unknown_method_is_unimplemented)
          ASBT_CASE(h2_connect_to_a_closed_port_is_a_connect_error)
          ASBT_CASE(grpc_slow_consumer_holds_at_most_one_stream_window)
          ASBT_CASE(process_v1_requests_read_by_python_and_its_responses_read_by_us)
          ASBT_CASE(process_v1_stdin_eof_ends_the_start_stream_with_exit_zero)
          ASBT_CASE(h2_response_headers_over_the_cap_fail_the_stream_not_the_connection)
          ASBT_CASE(tls_alpn_h2_big_download_through_a_small_window_arrives_intact)
          ASBT_CASE(tls_server_that_does_not_choose_h2_is_refused_clearly)
          ASBT_CASE(tls_certificate_from_an_unknown_ca_is_refused)
          ASBT_CASE(grpc_goaway_stops_new_streams_while_the_call_in_flight_finishes)
          ASBT_CASE(h2_ping_flood_without_reading_ends_the_connection_enhance_your_calm)
          ASBT_CASE(h2_settings_flood_without_reading_ends_the_connection_enhance_your_calm)
          ASBT_CASE(h2_window_update_flood_from_a_reading_peer_ends_the_connection_enhance_your_calm)
          ASBT_CASE(h2_priority_flood_ends_the_connection_enhance_your_calm)
          ASBT_CASE(h2_empty_data_flood_ends_the_connection_enhance_your_calm)
          ASBT_CASE(h2_empty_continuation_flood_ends_the_connection_enhance_your_calm)
          ASBT_CASE(h2_unknown_frame_type_flood_ends_the_connection_enhance_your_calm)
          ASBT_CASE(sandboxd_handle_frees_the_grpc_connections_the_server_ended)
          ASBT_CASE(sandboxd_process_start_against_a_silent_server_times_out)
          ASBT_CASE(sandboxd_process_start_under_a_stream_limit_of_zero_times_out)
          ASBT_CASE(sandboxd_process_start_without_a_stream_window_times_out)
          ASBT_CASE(sandboxd_process_start_under_a_stream_limit_of_zero_is_cancelled)
          ASBT_CASE(sandboxd_process_start_without_a_stream_window_is_cancelled)
          ASBT_CASE(sandboxd_process_start_under_a_stream_limit_of_zero_ends_at_its_timeout_ms)
          ASBT_CASE(sandboxd_process_start_without_a_stream_window_ends_at_its_timeout_ms)
          ASBT_CASE(sandboxd_env_values_and_stdin_are_wiped_from_freed_memory)
          ASBT_CASE(sandboxd_second_init_event_fails_the_process_and_keeps_the_first_id)
          ASBT_CASE(sandboxd_init_event_without_a_process_id_fails_the_start))
ASBT_MAIN()
