/* The WebSocket layer without a network: the handshake digest against
   RFC 6455's example, the frame reader (fragments, control frames between
   them, every rule a server frame can break, the size limit) and what
   the client writes (masked, lengths minimally encoded). The real peer,
   the apiserver with kwok behind it, is in test_portforward_cluster.c. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include "asbtest.h"
#include "recorder.h"
#include "scanalloc.h"
#include "logsink.h"
#include "nocluster.h"

#include <poll.h>

/* Feeds bytes to a fresh reader; returns the reader for inspection. */
static void reader_with(asb__ws_reader *r, const void *bytes, size_t n, size_t max) {
    asb__ws_reader_init(r, NULL, max);
    asb_buf_append(&r->in, bytes, n);
}

/* ws speaking over fd (one end of a socketpair) through c, as the
   handshake leaves it: 5 s writes, the mask source empty (refilled at the
   first frame), messages up to 1 MiB; buffers from alloc (NULL: the
   default). ws_free frees them. */
static void ws_on_fd(asb_ws *ws, asb__conn *c, int fd, const asb_allocator *alloc) {
    memset(ws, 0, sizeof *ws);
    memset(c, 0, sizeof *c);
    c->fd = fd;
    ws->c = c;
    ws->write_timeout_ms = 5000;
    ws->rnd_pos = sizeof ws->rnd;
    asb__ws_reader_init(&ws->rd, alloc, 1u << 20);
    asb_buf_init(&ws->out, alloc);
}

static void ws_free(asb_ws *ws) {
    asb__ws_reader_free(&ws->rd);
    asb_buf_free(&ws->out);
}

ASBT_TEST(accept_key_matches_the_rfc_example) {
    char acc[29];
    asb__ws_accept_for("dGhlIHNhbXBsZSBub25jZQ==", acc);
    ASBT_EQ_STR(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

ASBT_TEST(sha1_matches_fips_vectors_across_block_boundaries) {
    static const char *const in[] = {"abc", "",
        "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"};
    static const char *const want[] = {"a9993e364706816aba3e25717850c26c9cd0d89d",
                                       "da39a3ee5e6b4b0d3255bfef95601890afd80709",
                                       "84983e441c3bd26ebaae4aa1f95129e5e54670f1"};
    size_t i, k;
    for (i = 0; i < 3; i++) {
        unsigned char d[20];
        char hex[41];
        asb__sha1(in[i], strlen(in[i]), d);
        for (k = 0; k < 20; k++) snprintf(hex + 2 * k, 3, "%02x", d[k]);
        ASBT_EQ_STR(hex, want[i]);
    }
}

ASBT_TEST(single_frame_message_is_handed_over_whole) {
    static const unsigned char f[] = {0x82, 0x03, 0x00, 'h', 'i'};
    asb__ws_reader r;
    int op = 0;
    asb_str pl;
    reader_with(&r, f, sizeof f, 1024);
    ASBT_EQ_INT(asb__ws_next(&r, &op, &pl), 1);
    ASBT_EQ_INT(op, ASB_WS_BINARY);
    ASBT_EQ_MEM(pl.ptr, pl.len, "\0hi", 3);
    ASBT_EQ_INT(asb__ws_next(&r, &op, &pl), 0);
    asb__ws_reader_free(&r);
}

ASBT_TEST(fragments_reassemble_around_a_ping) {
    static const unsigned char f[] = {0x01, 0x02, 'h', 'e',        /* text, not fin */
                                      0x89, 0x01, 'p',             /* ping between */
                                      0x00, 0x02, 'l', 'l',        /* continuation */
                                      0x80, 0x01, 'o'};            /* final */
    asb__ws_reader r;
    int op = 0;
    asb_str pl;
    size_t cut;
    /* every split point: bytes arrive in two pieces */
    for (cut = 0; cut <= sizeof f; cut++) {
        int got_ping = 0, got_text = 0, k = 0, part;
        asb__ws_reader_init(&r, NULL, 1024);
        for (part = 0; part < 2; part++) {
            if (part == 0) asb_buf_append(&r.in, f, cut);
            else asb_buf_append(&r.in, f + cut, sizeof f - cut);
            while ((k = asb__ws_next(&r, &op, &pl)) > 0) {
                if (op == ASB_WS_PING) {
                    got_ping++;
                    ASBT_EQ_MEM(pl.ptr, pl.len, "p", 1);
                } else {
                    ASBT_EQ_INT(op, ASB_WS_TEXT);
                    ASBT_EQ_MEM(pl.ptr, pl.len, "hello", 5);
                    got_text++;
                }
            }
            ASBT_EQ_INT(k, 0);
        }
        ASBT_EQ_INT(got_ping, 1);
        ASBT_EQ_INT(got_text, 1);
        asb__ws_reader_free(&r);
    }
}

typedef struct bad_case {
    const char *what;
    unsigned char bytes[16];
    size_t n;
    int code;
} bad_case;

ASBT_TEST(each_broken_server_frame_is_refused_with_its_close_code) {
    static const bad_case bad[] = {
        {"masked", {0x82, 0x81, 1, 2, 3, 4, 0}, 7, 1002},
        {"reserved bits", {0xC2, 0x00}, 2, 1002},
        {"unknown opcode", {0x83, 0x00}, 2, 1002},
        {"fragmented ping", {0x09, 0x00}, 2, 1002},
        {"long ping", {0x89, 0x7E, 0x00, 0x7E}, 4, 1002},
        {"non-minimal 16-bit length", {0x82, 0x7E, 0x00, 0x05}, 4, 1002},
        {"non-minimal 64-bit length", {0x82, 0x7F, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF}, 10, 1002},
        {"top bit of the 64-bit length", {0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 0}, 10, 1002},
        {"continuation first", {0x80, 0x01, 'x'}, 3, 1002},
        {"new message inside one", {0x02, 0x01, 'x', 0x82, 0x01, 'y'}, 6, 1002},
        {"text not UTF-8", {0x81, 0x02, 0xC3, 0x28}, 4, 1007},
        {"close with 1 byte", {0x88, 0x01, 0x03}, 3, 1002},
        {"close code 1005", {0x88, 0x02, 0x03, 0xED}, 4, 1002},
        {"close code 999", {0x88, 0x02, 0x03, 0xE7}, 4, 1002},
        {"close reason not UTF-8", {0x88, 0x03, 0x03, 0xE8, 0xFF}, 5, 1007},
        {"over the size limit", {0x82, 0x7E, 0x01, 0x00}, 4, 1009},
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        asb__ws_reader r;
        int op = 0, k;
        asb_str pl;
        reader_with(&r, bad[i].bytes, bad[i].n, 200);
        while ((k = asb__ws_next(&r, &op, &pl)) > 0) {
        }
        if (k != -1 || r.close_code != bad[i].code)
            fprintf(stderr, "    case \"%s\": k %d, code %d\n", bad[i].what, k, r.close_code);
        ASBT_EQ_INT(k, -1);
        ASBT_EQ_INT(r.close_code, bad[i].code);
        ASBT_CHECK(r.why != NULL);
        asb__ws_reader_free(&r);
    }
}

ASBT_TEST(fragments_together_over_the_limit_are_refused) {
    unsigned char f[2 * (2 + 120)];
    asb__ws_reader r;
    int op = 0;
    asb_str pl;
    memset(f, 'a', sizeof f);
    f[0] = 0x02; /* binary, more to come: 120 bytes */
    f[1] = 120;
    f[122] = 0x80; /* continuation, final: 120 more, 240 > 200 */
    f[123] = 120;
    reader_with(&r, f, sizeof f, 200);
    ASBT_EQ_INT(asb__ws_next(&r, &op, &pl), -1);
    ASBT_EQ_INT(r.close_code, 1009);
    asb__ws_reader_free(&r);
}

ASBT_TEST(valid_close_frames_and_empty_messages_pass) {
    static const unsigned char f[] = {0x82, 0x00,                         /* empty binary */
                                      0x8A, 0x00,                         /* empty pong */
                                      0x88, 0x04, 0x0F, 0xA0, 'o', 'k'};  /* close 4000 "ok" */
    asb__ws_reader r;
    int op = 0;
    asb_str pl;
    reader_with(&r, f, sizeof f, 16);
    ASBT_EQ_INT(asb__ws_next(&r, &op, &pl), 1);
    ASBT_EQ_INT(op, ASB_WS_BINARY);
    ASBT_EQ_INT((int)pl.len, 0);
    ASBT_EQ_INT(asb__ws_next(&r, &op, &pl), 1);
    ASBT_EQ_INT(op, ASB_WS_PONG);
    ASBT_EQ_INT(asb__ws_next(&r, &op, &pl), 1);
    ASBT_EQ_INT(op, ASB_WS_CLOSE);
    ASBT_EQ_MEM(pl.ptr, pl.len, "\x0f\xa0ok", 4);
    asb__ws_reader_free(&r);
}

/* What asb__ws_send_frame writes, read back over a socketpair: the mask
   bit, the length forms, and masked bytes that unmask to the message. */
ASBT_TEST(client_frames_are_masked_with_minimal_lengths) {
    static const size_t sizes[] = {0, 1, 125, 126, 65535, 65536, 70000};
    asb_ws ws;
    asb__conn c;
    int sv[2];
    size_t i;
    char *data = (char *)malloc(70000);
    unsigned char *got = (unsigned char *)malloc(70100);
    unsigned char prev_mask[4] = {0, 0, 0, 0};
    for (i = 0; i < 70000; i++) data[i] = (char)(i * 7);
    ASBT_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    ws_on_fd(&ws, &c, sv[0], NULL);
    {
        int sz = 1 << 20;
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
        setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    }
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i], want_head = n < 126 ? 6 : n < 65536 ? 8 : 14, have = 0, k;
        uint64_t len = 0;
        const unsigned char *m;
        ASBT_EQ_RES(asb__ws_send_frame(&ws, ASB_WS_BINARY, "\x00", 1, data, n ? n - 1 : 0),
                    ASB_OK);
        if (n == 0) n = 1; /* the channel byte alone */
        want_head = n < 126 ? 6 : n < 65536 ? 8 : 14;
        while (have < want_head + n) {
            ssize_t r = recv(sv[1], got + have, want_head + n - have, 0);
            ASBT_CHECK(r > 0);
            have += (size_t)r;
        }
        ASBT_EQ_INT(got[0], 0x82);
        ASBT_CHECK(got[1] & 0x80);
        if (want_head == 6) len = got[1] & 0x7f;
        else if (want_head == 8) {
            ASBT_EQ_INT(got[1] & 0x7f, 126);
            len = (uint64_t)got[2] << 8 | got[3];
        } else {
            ASBT_EQ_INT(got[1] & 0x7f, 127);
            for (k = 2; k < 10; k++) len = len << 8 | got[k];
        }
        ASBT_EQ_INT((int)len, (int)n);
        m = got + want_head - 4;
        ASBT_CHECK(memcmp(m, prev_mask, 4) != 0); /* a fresh key per frame */
        memcpy(prev_mask, m, 4);
        ASBT_EQ_INT(got[want_head] ^ m[0], 0);
        for (k = 1; k < n; k++)
            if ((unsigned char)(got[want_head + k] ^ m[k & 3]) != (unsigned char)data[k - 1]) break;
        ASBT_EQ_INT((int)k, (int)n);
    }
    ws_free(&ws);
    close(sv[0]);
    close(sv[1]);
    free(data);
    free(got);
}

ASBT_TEST(send_refuses_what_a_client_may_not_send) {
    asb_ws ws;
    asb_error err;
    char big[126];
    memset(&ws, 0, sizeof ws);
    memset(big, 'x', sizeof big);
    ASBT_EQ_RES(asb_ws_send(&ws, ASB_WS_PING, NULL, 0, big, sizeof big, &err),
                ASB_ERR_INVALID_ARGUMENT);
    ASBT_EQ_RES(asb_ws_send(&ws, ASB_WS_CLOSE, NULL, 0, "", 0, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_EQ_RES(asb_ws_send(&ws, ASB_WS_CONTINUATION, NULL, 0, "", 0, &err),
                ASB_ERR_INVALID_ARGUMENT);
    ws.close_code = 1000;
    ASBT_EQ_RES(asb_ws_send(&ws, ASB_WS_BINARY, NULL, 0, "x", 1, &err), ASB_ERR_CLOSED);
    ASBT_EQ_RES(asb_ws_close(&ws, 1005, NULL, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_EQ_RES(asb_ws_close(&ws, 1000, "\xff", &err), ASB_ERR_INVALID_ARGUMENT);
}

/* A kube client for http://127.0.0.1:port whose kubeconfig user sends
   `token` (from a file gone once the client has read it), logging to log
   (NULL: nowhere); *out stays NULL when a step fails (the check says
   which). */
static void kube_client_at(int port, const char *token, const asb_logger *log,
                           asb_kube_client **out) {
    asb_kube_client_desc kd;
    asb_error err;
    *out = NULL;
    ASBT_CHECK(write_token_kubeconfig(port, token, NULL));
    memset(&kd, 0, sizeof kd);
    kd.kubeconfig.path = unit_cfg;
    if (log) kd.http.log = *log;
    ASBT_EQ_RES(asb_kube_client_create(&kd, out, &err), ASB_OK);
    unlink(unit_cfg);
}

/* A lying apiserver's target port outside 1-65535 (2^32 + 8080 would wrap
   to 8080 in an int) is refused, not forwarded to. */
ASBT_TEST(a_service_target_port_outside_the_port_range_is_refused) {
    static const char *const bad[] = {"4294975376", "0", "65536", "-1"};
    asb_kube_client *kc = NULL;
    asb_portforward_target t;
    asb_error err;
    size_t i;
    recorder *r = recorder_start("127.0.0.1");
    ASBT_CHECK(r != NULL);
    kube_client_at(r->port, "abcd", NULL, &kc);
    ASBT_CHECK(kc != NULL);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pthread_mutex_lock(&r->lock);
        snprintf(r->reply, sizeof r->reply,
                 "{\"kind\":\"Service\",\"spec\":{\"selector\":{\"app\":\"x\"},"
                 "\"ports\":[{\"port\":80,\"targetPort\":%s}]}}",
                 bad[i]);
        pthread_mutex_unlock(&r->lock);
        memset(&t, 0, sizeof t);
        ASBT_EQ_RES(asb_portforward_resolve(kc, "default", "svc", "80", &t, &err),
                    ASB_ERR_PORT_FORWARD);
        ASBT_CONTAINS(err.message, "no target port in 1-65535");
    }
    asb_kube_client_free(kc);
    recorder_stop(r);
}

ASBT_TEST(portforward_create_checks_its_description) {
    asb_kube_client *kc = NULL;
    asb_portforward_desc d;
    asb_portforward *pf = NULL;
    asb_error err;
    asb_kube_client_desc kd;
    ASBT_CHECK(write_token_kubeconfig(1, "abcd", "team")); /* never dialled */
    memset(&kd, 0, sizeof kd);
    kd.kubeconfig.path = unit_cfg;
    ASBT_EQ_RES(asb_kube_client_create(&kd, &kc, &err), ASB_OK);
    unlink(unit_cfg);
    memset(&d, 0, sizeof d);
    d.port = "8080";
    ASBT_EQ_RES(asb_portforward_create(kc, &d, &pf, &err), ASB_ERR_INVALID_ARGUMENT);
    d.service = "svc";
    d.pod = "pod";
    ASBT_EQ_RES(asb_portforward_create(kc, &d, &pf, &err), ASB_ERR_INVALID_ARGUMENT);
    d.service = NULL;
    d.port = "http"; /* a pod's port is a number */
    ASBT_EQ_RES(asb_portforward_create(kc, &d, &pf, &err), ASB_ERR_INVALID_ARGUMENT);
    d.port = "70000";
    ASBT_EQ_RES(asb_portforward_create(kc, &d, &pf, &err), ASB_ERR_INVALID_ARGUMENT);
    d.port = "8080";
    d.pod = "Bad/Name";
    ASBT_EQ_RES(asb_portforward_create(kc, &d, &pf, &err), ASB_ERR_INVALID_ARGUMENT);
    { /* not DNS-1123 subdomains: ".." would make the path .../pods/../portforward */
        const char *bad[] = {".", "..", "-pod", "pod-", "a..b", ".pod", "pod."};
        size_t k;
        for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            d.pod = bad[k];
            ASBT_EQ_RES(asb_portforward_create(kc, &d, &pf, &err), ASB_ERR_INVALID_ARGUMENT);
            ASBT_CHECK(strstr(err.message, "DNS-1123") != NULL);
        }
    }
    d.pod = "pod";
    ASBT_EQ_RES(asb_portforward_create(kc, &d, &pf, &err), ASB_OK);
    ASBT_EQ_STR(pf->ns, "team"); /* the context's namespace */
    asb_portforward_free(pf);
    asb_kube_client_free(kc);
}

/* R60: the upgrade copied its request target into 4096 bytes: a longer
   one was cut to its first 4095, another request, and sent. Refused
   now, naming the limit, before anything is sent; 4095 goes whole. So
   is a '#', where the URL parser would have cut it. */
ASBT_TEST(a_websocket_target_over_the_limit_is_refused_not_cut) {
    static const size_t lens[] = {4096, 5000, 4095};
    recorder *r = recorder_start("127.0.0.1");
    asb_kube_client *kc = NULL;
    asb_ws_desc d;
    asb_ws *ws = NULL;
    asb_error err;
    recorder_request *q = (recorder_request *)calloc(1, sizeof *q);
    char *path = (char *)malloc(5001), want[40];
    size_t i;
    ASBT_CHECK(r != NULL && q != NULL && path != NULL);
    kube_client_at(r->port, "abcd", NULL, &kc);
    ASBT_CHECK(kc != NULL);
    memset(&d, 0, sizeof d);
    d.path = path;
    for (i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        size_t n = lens[i];
        snprintf(path, 5001, "/api/v1/namespaces/default/pods/p/portforward?ports=8080&pad=");
        memset(path + strlen(path), 'a', n - strlen(path));
        path[n] = '\0';
        if (n > 4095) {
            ASBT_EQ_RES(asb_kube_ws_connect(kc, &d, &ws, &err), ASB_ERR_INVALID_ARGUMENT);
            ASBT_CONTAINS(err.message, "at most 4095");
            ASBT_EQ_INT(recorder_count(r), 0); /* nothing sent */
        } else {
            /* the recorder answers 200, not 101 */
            ASBT_EQ_RES(asb_kube_ws_connect(kc, &d, &ws, &err), ASB_ERR_WEBSOCKET);
            ASBT_EQ_INT(recorder_count(r), 1);
            ASBT_CHECK(recorder_get(r, 0, q));
            ASBT_CHECK(strncmp(q->head, "GET ", 4) == 0);
            ASBT_CHECK(strncmp(q->head + 4, path, n) == 0);
            ASBT_CHECK(strncmp(q->head + 4 + n, " HTTP/1.1\r\n", 11) == 0);
        }
        ASBT_CHECK(ws == NULL);
    }
    snprintf(want, sizeof want, "%s", "/api/v1/pods#x");
    d.path = want;
    ASBT_EQ_RES(asb_kube_ws_connect(kc, &d, &ws, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "'#'");
    ASBT_EQ_INT(recorder_count(r), 1);
    asb_kube_client_free(kc);
    recorder_stop(r);
    free(path);
    free(q);
}

typedef struct relay_job {
    asb__pf_stream *st;
} relay_job;

static void *relay_run(void *arg) {
    return asb__pf_relay(((relay_job *)arg)->st);
}

/* A forward's stream to pod-x:8080 as the forwarder hands it to its relay
   thread, with no network: the WebSocket to the "apiserver" is one
   socketpair (wsp[1] plays the apiserver), the program's local end is
   another (lsp[1] plays the program). The forward's buffers come from
   alloc, or from kc's allocator when alloc is NULL (the WebSocket's then
   from the default). Nothing in it may move once made; 0 when a socket
   could not be made. relay_rig_free undoes it. */
typedef struct relay_rig {
    asb_portforward pf;
    asb__pf_stream st;
    asb_ws ws;
    asb__conn c;
    relay_job j;
    int wsp[2], lsp[2];
} relay_rig;

static int relay_rig_init(relay_rig *g, asb_kube_client *kc, const asb_allocator *alloc) {
    g->wsp[0] = g->wsp[1] = g->lsp[0] = g->lsp[1] = -1;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, g->wsp) != 0 ||
        socketpair(AF_UNIX, SOCK_STREAM, 0, g->lsp) != 0 ||
        asb__set_cloexec_nonblock(g->wsp[0]) != 0 || asb__set_cloexec_nonblock(g->lsp[0]) != 0)
        return 0;
    memset(&g->pf, 0, sizeof g->pf);
    g->pf.kc = kc;
    if (alloc) g->pf.alloc = *alloc;
    else if (kc) g->pf.alloc = kc->alloc;
    pthread_mutex_init(&g->pf.lock, NULL);
    g->pf.live = 1;
    ws_on_fd(&g->ws, &g->c, g->wsp[0], alloc);
    memset(&g->st, 0, sizeof g->st);
    g->st.pf = &g->pf;
    g->st.ws = &g->ws;
    g->st.sp = g->lsp[0];
    snprintf(g->st.pod, sizeof g->st.pod, "pod-x");
    g->st.port = 8080;
    g->j.st = &g->st;
    return 1;
}

static void relay_rig_free(relay_rig *g) {
    int i;
    ws_free(&g->ws);
    asb_buf_free(&g->st.sin); /* SPDY's input, as asb__pf_reap frees it */
    for (i = 0; i < 2; i++) {
        if (g->lsp[i] >= 0) close(g->lsp[i]);
        if (g->wsp[i] >= 0) close(g->wsp[i]);
    }
    pthread_mutex_destroy(&g->pf.lock);
}

static int watch_count_event(void *user, const asb_watch_event *ev) {
    (void)user;
    (void)ev;
    return 0;
}

/* R59: the kube client's token, 40 bytes, and whether s holds 16 bytes
   in a row of it (asb__mask leaves no run of 8 of its first bytes). */
static const char r59_token[] = "r59-tok-0123456789abcdefghijklmnopqrstuv";

static int holds_token_run(const char *s) {
    size_t n = strlen(s), t = sizeof r59_token - 1, i, k;
    for (i = 0; i + 16 <= n; i++)
        for (k = 0; k + 16 <= t; k++)
            if (memcmp(s + i, r59_token + k, 16) == 0) return 1;
    return 0;
}

static int holds_control(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return 1;
    return 0;
}

/* R59: a WebSocket's close reason is the server's text, put into the
   error of asb_ws_recv after the upgrade's masking: a reason echoing the
   kube client's token handed it on. Masked (and quoted) now. */
ASBT_TEST(a_token_in_a_websocket_close_reason_is_masked) {
    asb_kube_client *kc = NULL;
    asb_ws ws;
    asb__conn c;
    asb_ws_message m;
    asb_error err;
    unsigned char f[128];
    char reason[100];
    size_t rl;
    int sv[2];
    kube_client_at(1, r59_token, NULL, &kc); /* never dialled */
    ASBT_CHECK(kc != NULL);
    rl = (size_t)snprintf(reason, sizeof reason, "refused Bearer %s\x1b]0;x\x07", r59_token);
    f[0] = 0x88; /* FIN, CLOSE, unmasked */
    f[1] = (unsigned char)(2 + rl);
    f[2] = 0x03; /* 1008 */
    f[3] = 0xf0;
    memcpy(f + 4, reason, rl);
    ASBT_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    ASBT_CHECK(asb__set_cloexec_nonblock(sv[0]) == 0);
    ws_on_fd(&ws, &c, sv[0], NULL);
    ws.kc = kc;
    ASBT_CHECK(write(sv[1], f, 4 + rl) == (ssize_t)(4 + rl));
    ASBT_EQ_RES(asb_ws_recv(&ws, 5000, &m, &err), ASB_ERR_CLOSED);
    ASBT_CONTAINS(err.message, "code 1008: refused Bearer ****");
    ASBT_CHECK(!holds_token_run(err.message));
    ASBT_CHECK(!holds_control(err.message));
    ws_free(&ws);
    close(sv[0]);
    close(sv[1]);
    asb_kube_client_free(kc);
}

/* R59: the text of a v4 port-forward's error channel (the kubelet's) was
   quoted but not masked, into the forward's last error and the log. The
   relay thread as the forwarder runs it (see the test above). */
ASBT_TEST(a_token_in_a_port_forward_error_channel_is_masked_in_the_error_and_the_log) {
    asb_kube_client *kc = NULL;
    relay_rig g;
    pthread_t t;
    asbt_log lg;
    asb_error err;
    unsigned char f[160];
    char text[140];
    size_t tl;
    kube_client_at(1, r59_token, NULL, &kc); /* never dialled */
    ASBT_CHECK(kc != NULL);
    tl = (size_t)snprintf(text, sizeof text,
                          "\x01" "error forwarding port 8080 to pod pod-x: %s\x1b[2J", r59_token);
    f[0] = 0x82; /* FIN, BINARY: channel 1, the error channel */
    f[1] = (unsigned char)tl;
    memcpy(f + 2, text, tl);
    f[2 + tl] = 0x88; /* then the server closes */
    f[3 + tl] = 2;
    f[4 + tl] = 0x03;
    f[5 + tl] = 0xe8;
    ASBT_CHECK(relay_rig_init(&g, kc, NULL));
    asbt_log_open(&lg, &g.pf.log, ASB_LOG_DEBUG);
    ASBT_CHECK(write(g.wsp[1], f, 6 + tl) == (ssize_t)(6 + tl));
    ASBT_CHECK(pthread_create(&t, NULL, relay_run, &g.j) == 0);
    pthread_join(t, NULL); /* the server's close ends it */
    ASBT_EQ_INT(asb_portforward_take_error(&g.pf, &err), 1);
    ASBT_EQ_RES(err.code, ASB_ERR_PORT_FORWARD);
    ASBT_CONTAINS(err.message, "to pod pod-x: ****");
    ASBT_CHECK(!holds_token_run(err.message));
    ASBT_CHECK(!holds_control(err.message));
    ASBT_CONTAINS(lg.text.ptr, "portforward.stream.failed");
    ASBT_CHECK(!holds_token_run(lg.text.ptr));
    asbt_log_close(&lg);
    relay_rig_free(&g);
    asb_kube_client_free(kc);
}

/* One server WebSocket frame (FIN, BINARY, unmasked) holding one SPDY
   DATA frame on `stream` with `flags`, appended at f; its length. */
static size_t spdy_ws_data(unsigned char *f, unsigned stream, int flags, const char *p, size_t n) {
    f[0] = 0x82;
    f[1] = (unsigned char)(8 + n); /* under 126 here */
    f[2] = (unsigned char)(stream >> 24);
    f[3] = (unsigned char)(stream >> 16);
    f[4] = (unsigned char)(stream >> 8);
    f[5] = (unsigned char)stream;
    f[6] = (unsigned char)flags;
    f[7] = (unsigned char)(n >> 16);
    f[8] = (unsigned char)(n >> 8);
    f[9] = (unsigned char)n;
    memcpy(f + 10, p, n);
    return 10 + n;
}

/* The SPDY tunnel's normal end: the kubelet ends the data stream (FIN)
   and then the error stream with no text. The program gets the bytes
   and the end, and nothing is an error: no last error, no WARN (the
   relay took it for "the connection to the apiserver dropped", and so
   dropped the cached pod). With error text, the text is the error. */
ASBT_TEST(a_spdy_stream_ended_by_the_kubelet_is_a_clean_end_unless_it_says_why) {
    int with_text;
    for (with_text = 0; with_text < 2; with_text++) {
        asb_kube_client *kc = NULL;
        relay_rig g;
        pthread_t t;
        asbt_log lg;
        asb_error err;
        unsigned char f[256];
        char got[16];
        size_t n = 0, k = 0;
        static const char why[] = "error forwarding port 8080: connection refused";
        kube_client_at(1, "abcd", NULL, &kc); /* never dialled */
        ASBT_CHECK(kc != NULL);
        n += spdy_ws_data(f + n, ASB__SPDY_DATA_STREAM, 1, "hello", 5);
        if (with_text) n += spdy_ws_data(f + n, ASB__SPDY_ERROR_STREAM, 0, why, sizeof why - 1);
        n += spdy_ws_data(f + n, ASB__SPDY_ERROR_STREAM, 1, "", 0);
        ASBT_CHECK(relay_rig_init(&g, kc, NULL));
        g.st.spdy = 1;
        snprintf(g.pf.service, sizeof g.pf.service, "svc");
        snprintf(g.pf.cached.pod, sizeof g.pf.cached.pod, "pod-x");
        asbt_log_open(&lg, &g.pf.log, ASB_LOG_DEBUG);
        ASBT_CHECK(write(g.wsp[1], f, n) == (ssize_t)n);
        ASBT_CHECK(pthread_create(&t, NULL, relay_run, &g.j) == 0);
        for (;;) { /* the program's side: the bytes, then the end */
            ssize_t r = read(g.lsp[1], got + k, sizeof got - 1 - k);
            if (r <= 0) break;
            k += (size_t)r;
        }
        pthread_join(t, NULL);
        ASBT_EQ_MEM(got, k, "hello", 5);
        if (!with_text) {
            ASBT_EQ_INT(asb_portforward_take_error(&g.pf, &err), 0);
            ASBT_CHECK(strstr(lg.text.ptr ? lg.text.ptr : "", "portforward.stream.failed") == NULL);
            ASBT_EQ_STR(g.pf.cached.pod, "pod-x"); /* the next dial needs no new lookup */
        } else {
            ASBT_EQ_INT(asb_portforward_take_error(&g.pf, &err), 1);
            ASBT_CONTAINS(err.message, "connection refused");
            ASBT_CONTAINS(lg.text.ptr, "portforward.stream.failed");
        }
        asbt_log_close(&lg);
        relay_rig_free(&g);
        asb_kube_client_free(kc);
    }
}

/* R59: a watch event's resourceVersion is the server's text: after a 410
   it went, quoted but not masked, into the error (gone_ends_watch, as the
   shared informer asks) and the kube.watch.gone log line. The recorder
   as the apiserver answers every watch with an event whose
   resourceVersion is the token, then an ERROR 410. */
ASBT_TEST(a_token_in_a_watch_resource_version_is_masked_after_410) {
    static const asb_kube_resource res = {"", "v1", "configmaps"};
    recorder *r = recorder_start("127.0.0.1");
    asb_kube_client *kc = NULL;
    asb_watch_opts wo;
    asbt_log lg;
    asb_logger log;
    asb_error err;
    char reply[512];
    ASBT_CHECK(r != NULL);
    snprintf(reply, sizeof reply,
             "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\","
             "\"resourceVersion\":\"%s\\u001b[2J\"}}}\n"
             "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}\n",
             r59_token);
    recorder_reply(r, 200, reply);
    asbt_log_open(&lg, &log, ASB_LOG_DEBUG);
    kube_client_at(r->port, r59_token, &log, &kc);
    ASBT_CHECK(kc != NULL);
    memset(&wo, 0, sizeof wo);
    wo.gone_ends_watch = 1;
    ASBT_EQ_RES(asb_kube_watch(kc, &res, "default", &wo, watch_count_event, NULL, &err),
                ASB_ERR_KUBE_API);
    ASBT_EQ_INT(err.http_status, 410);
    ASBT_CONTAINS(err.message, "resourceVersion ****");
    ASBT_CHECK(!holds_token_run(err.message));
    ASBT_CHECK(!holds_control(err.message));
    /* restarting from "0" instead: the log line, until the deadline */
    wo.gone_ends_watch = 0;
    wo.deadline_ms = 1500;
    ASBT_EQ_RES(asb_kube_watch(kc, &res, "default", &wo, watch_count_event, NULL, &err),
                ASB_ERR_TIMEOUT);
    ASBT_CONTAINS(lg.text.ptr, "kube.watch.gone");
    ASBT_CONTAINS(lg.text.ptr, "resourceVersion ****");
    ASBT_CHECK(!holds_token_run(lg.text.ptr));
    asb_kube_client_free(kc);
    recorder_stop(r);
    asbt_log_close(&lg);
}

/* A DIRECT client (v1alpha1 claims, a router URL never dialled here)
   whose kubeconfig names http://127.0.0.1:apiserver_port as the
   apiserver, from a file gone once the client has read it; *out stays
   NULL when a step fails (the check says which). */
static void direct_client(int apiserver_port, asb_client **out) {
    asb_client_desc cd;
    asb_error err;
    asb_result r;
    *out = NULL;
    ASBT_CHECK(write_token_kubeconfig(apiserver_port, NULL, NULL));
    memset(&cd, 0, sizeof cd);
    cd.kube.kubeconfig.path = unit_cfg;
    cd.mode = ASB_CONNECT_DIRECT;
    cd.direct_url = "http://127.0.0.1:1";
    cd.claim_api_version = "v1alpha1";
    r = asb_client_create(&cd, out, &err);
    unlink(unit_cfg);
    ASBT_EQ_RES(r, ASB_OK);
}

typedef struct pod_dial {
    asb_client *c;
    asb_result r;
    int fd;
    asb_error err;
} pod_dial;

static void *dial_pod(void *arg) {
    pod_dial *d = (pod_dial *)arg;
    d->r = asb__nt_dial(d->c, "pod-x.default" ASB__NPT_HOST_SUFFIX, 8080, &d->fd, &d->err);
    return NULL;
}

/* Native mode with sandboxd: two handles of one pod on two threads. One
   is released (its pod's forwards go) while the other's dial through the
   same forward waits for the apiserver's upgrade answer: that dial ends
   with an error, never on freed memory (ASan), and the forward is freed
   by it, once. */
ASBT_TEST(a_pod_forward_released_during_another_handles_dial_is_freed_after_it) {
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    int lfd = socket(AF_INET, SOCK_STREAM, 0), cfd = -1;
    asb_client *c = NULL;
    asb_sandbox *sb;
    pod_dial d;
    pthread_t th;
    struct pollfd p;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASBT_CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 8) == 0 &&
               getsockname(lfd, (struct sockaddr *)&a, &al) == 0);
    /* the apiserver: takes the upgrade request and says nothing */
    direct_client(ntohs(a.sin_port), &c);
    ASBT_CHECK(c != NULL);
    memset(&d, 0, sizeof d);
    d.c = c;
    d.fd = -1;
    ASBT_CHECK(pthread_create(&th, NULL, dial_pod, &d) == 0);
    p.fd = lfd;
    p.events = POLLIN;
    p.revents = 0;
    if (poll(&p, 1, 20000) == 1) cfd = accept(lfd, NULL, NULL);
    if (cfd >= 0) {
        /* the dial waits for its answer: the other handle goes */
        sb = asb__new_handle(c, "claim-a", "pod-x", "default", NULL);
        if (sb) {
            snprintf(sb->pod, sizeof sb->pod, "pod-x");
            asb__npt_release(sb);
            asb__handle_free(sb);
        }
        close(cfd);
    }
    close(lfd); /* no second try gets an answer either */
    pthread_join(th, NULL);
    ASBT_CHECK(cfd >= 0);
    ASBT_CHECK(d.r != ASB_OK);
    ASBT_CHECK(d.fd == -1);
    ASBT_CHECK(c->pod_pfs == NULL);
    asb_client_free(c);
}

/* R22: what a program sends through a forward (the router's bearer token
   in native-tunnel mode, in an Authorization header) passes through the
   relay's buffers; none may be left in memory the library frees. The
   relay thread as the forwarder runs it, over two socketpairs: the local
   end, and the WebSocket to the "apiserver". */
ASBT_TEST(bytes_relayed_to_a_forward_are_wiped_from_freed_memory) {
    static const char req[] = "GET / HTTP/1.1\r\nAuthorization: Bearer scan-pf-token-3f9a1c\r\n\r\n";
    scanalloc sa;
    relay_rig g;
    pthread_t t;
    unsigned char got[256];
    size_t have = 0, want = 2 + 4 + 1 + (sizeof req - 1);
    scanalloc_init(&sa);
    scanalloc_secret(&sa, "scan-pf-token-3f9a1c");
    ASBT_CHECK(relay_rig_init(&g, NULL, &sa.a));
    ASBT_CHECK(pthread_create(&t, NULL, relay_run, &g.j) == 0);
    /* after a pause the relay sends the first byte alone: either way the
       request arrives as channel-0 frames; wait for all of its bytes */
    ASBT_CHECK(write(g.lsp[1], req, sizeof req - 1) == (ssize_t)(sizeof req - 1));
    while (have < want) {
        struct pollfd p;
        ssize_t n;
        p.fd = g.wsp[1];
        p.events = POLLIN;
        p.revents = 0;
        if (poll(&p, 1, 10000) != 1) break;
        n = recv(g.wsp[1], got + have, sizeof got - have, 0);
        if (n <= 0) break;
        have += (size_t)n;
        if (have >= want || have == sizeof got) break;
    }
    ASBT_CHECK(have >= want - 7); /* (one or two frames' headers) */
    close(g.lsp[1]); /* the program is done: the relay ends */
    g.lsp[1] = -1;
    pthread_join(t, NULL);
    ASBT_EQ_INT((int)g.pf.live, 0);
    relay_rig_free(&g);
    ASBT_CHECK(sa.frees > 0);
    ASBT_EQ_INT(sa.hits, 0);
    scanalloc_fini(&sa);
}

typedef struct pong_feeder {
    int fd;
} pong_feeder;

/* Unsolicited PONG frames (2 bytes each, empty), as fast as the socket
   takes them, until it is shut down. */
static void *feed_pongs(void *arg) {
    pong_feeder *f = (pong_feeder *)arg;
    static unsigned char frames[65536];
    size_t i;
    for (i = 0; i < sizeof frames; i += 2) {
        frames[i] = 0x8a;
        frames[i + 1] = 0;
    }
    while (send(f->fd, frames, sizeof frames, MSG_NOSIGNAL) > 0) {
    }
    return NULL;
}

/* A call against a WebSocket that a peer floods: the call's result, and
   whether it returned before the hang guard gave up. */
typedef struct flood_job {
    asb_ws *ws;
    pthread_mutex_t mu;
    int done;
    asb_result r;
    asb_error err;
} flood_job;

static void flood_job_done(flood_job *j, asb_result r) {
    pthread_mutex_lock(&j->mu);
    j->r = r;
    j->done = 1;
    pthread_mutex_unlock(&j->mu);
}

/* The WebSocket on one end of a socketpair (4 MiB buffers) whose other end
   feed keeps full, from before the call starts until it is shut down; call
   runs on a thread of its own. Waits up to 10 s for the call to return (a
   hang guard, not a speed check), then shuts both ends down (which ends
   the feeder, and the call had it hung) and frees it all. *done: whether
   the call had returned; j->r and j->err say how. */
static void call_under_flood(void *(*feed)(void *), void *(*call)(void *), flood_job *j,
                             int *done) {
    asb_ws ws;
    asb__conn c;
    pong_feeder f;
    pthread_t ft, rt;
    int sv[2], i, big = 4 << 20;
    *done = 0;
    memset(j, 0, sizeof *j);
    ASBT_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    ASBT_CHECK(asb__set_cloexec_nonblock(sv[0]) == 0);
    ws_on_fd(&ws, &c, sv[0], NULL);
    f.fd = sv[1];
    ASBT_CHECK(pthread_create(&ft, NULL, feed, &f) == 0);
    asb__sleep_ms(200); /* the socket is full before the wait begins */
    j->ws = &ws;
    pthread_mutex_init(&j->mu, NULL);
    ASBT_CHECK(pthread_create(&rt, NULL, call, j) == 0);
    for (i = 0; i < 1000 && !*done; i++) {
        usleep(10000);
        pthread_mutex_lock(&j->mu);
        *done = j->done;
        pthread_mutex_unlock(&j->mu);
    }
    shutdown(sv[1], SHUT_RDWR);
    shutdown(sv[0], SHUT_RDWR);
    pthread_join(ft, NULL);
    pthread_join(rt, NULL);
    j->ws = NULL;
    ws_free(&ws);
    close(sv[0]);
    close(sv[1]);
    pthread_mutex_destroy(&j->mu);
}

static void *recv_run(void *arg) {
    flood_job *j = (flood_job *)arg;
    asb_ws_message m;
    flood_job_done(j, asb_ws_recv(j->ws, 300, &m, &j->err));
    return NULL;
}

/* R23: asb_ws_recv's timeout held only while the socket was ever empty:
   a peer that keeps it full of control frames (unsolicited pongs need no
   answer, so it need not read) kept the call, a port-forward dial
   waiting for its port messages among them, from ever returning. */
ASBT_TEST(recv_timeout_holds_under_a_flood_of_control_frames) {
    flood_job j;
    int done;
    call_under_flood(feed_pongs, recv_run, &j, &done);
    ASBT_CHECK(done);
    ASBT_EQ_RES(j.r, ASB_ERR_TIMEOUT);
}

/* WebSocket messages, each one SPDY DATA frame on stream 5 (no stream of
   ours), as fast as the socket takes them, until it is shut down. */
static void *feed_spdy_noise(void *arg) {
    pong_feeder *f = (pong_feeder *)arg;
    static unsigned char frames[65530];
    size_t i;
    memset(frames, 0, sizeof frames);
    for (i = 0; i + 10 <= sizeof frames; i += 10) {
        frames[i] = 0x82; /* FIN, BINARY, unmasked */
        frames[i + 1] = 8;
        frames[i + 5] = 5; /* DATA, stream 5, no flags, empty */
    }
    while (send(f->fd, frames, sizeof frames, MSG_NOSIGNAL) > 0) {
    }
    return NULL;
}

static void *spdy_open_run(void *arg) {
    flood_job *j = (flood_job *)arg;
    asb_buf in;
    size_t pos = 0;
    asb_result r;
    asb_buf_init(&in, NULL);
    r = asb__pf_spdy_open(j->ws, &in, &pos, 8080, "pod-x", 300, &j->err);
    asb_buf_free(&in);
    flood_job_done(j, r);
    return NULL;
}

/* R26: the SPDY tunnel's open waited for the data stream's SYN_REPLY
   with asb_ws_recv, whose timeout only covers the wait for a message: a
   server that keeps sending messages which are not the reply (DATA on
   another stream, PINGs) held a port-forward dial forever. */
ASBT_TEST(spdy_open_times_out_under_a_flood_of_frames_that_are_not_its_reply) {
    flood_job j;
    int done;
    call_under_flood(feed_spdy_noise, spdy_open_run, &j, &done);
    ASBT_CHECK(done);
    ASBT_EQ_RES(j.r, ASB_ERR_PORT_FORWARD);
    ASBT_CHECK(strstr(j.err.message, "within 300 ms") != NULL);
}

/* Native mode with sandboxd: "<pod>.<ns>.asb-pod" names the forward's pod; a pod
   name may hold dots (a claim "my.claim" makes a pod of that name). */
ASBT_TEST(a_pod_forward_of_a_dotted_pod_name_forwards_to_that_pod) {
    asb_client *c = NULL;
    asb__pod_forward *f = NULL;
    asb_error err;
    direct_client(1, &c);
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(asb__nt_pod_forward(c, "my.claim.team-a" ASB__NPT_HOST_SUFFIX, 8080, &f, &err), ASB_OK);
    ASBT_CHECK(f != NULL);
    ASBT_EQ_STR(f->pf->pod, "my.claim");
    ASBT_EQ_STR(f->pf->ns, "team-a");
    asb__nt_pod_forward_done(c, f);
    c->pod_pfs = f->next; /* (a DIRECT client does not free native forwards) */
    asb__pod_forward_free(c, f);
    asb_client_free(c);
}

/* The SPDY tunnel (SPDY/3.1+portforward.k8s.io): what we send is read by
   the apiserver's kubelet (moby/spdystream): a SYN_STREAM per stream whose
   header block is one zlib stream of stored deflate blocks, each ended
   as a sync flush ends (an empty stored block), the zlib header only on
   the connection's first block. test_portforward_cluster has the real
   server read them. */
static size_t spdy_expect_block(const unsigned char *p, const char *type, const char *port) {
    const char *kv[6];
    size_t n = 4, i;
    kv[0] = "streamtype";
    kv[1] = type;
    kv[2] = "port";
    kv[3] = port;
    kv[4] = "requestid";
    kv[5] = "0";
    if (asb__get32(p) != 3) return 0;
    for (i = 0; i < 6; i++) {
        size_t l = strlen(kv[i]);
        if (asb__get32(p + n) != l || memcmp(p + n + 4, kv[i], l) != 0) return 0;
        n += 4 + l;
    }
    return n;
}

ASBT_TEST(spdy_syn_stream_sends_the_port_forward_headers_in_stored_zlib_blocks) {
    unsigned char o[400];
    size_t n1 = asb__spdy_syn_stream(o, 1, "error", 8080, 1), n2, blk, at;
    ASBT_CHECK(n1 < 160);
    ASBT_EQ_MEM(o, 4, "\x80\x03\x00\x01", 4); /* control, version 3, SYN_STREAM */
    ASBT_EQ_INT(o[4], 0);                      /* no flags: both sides stay open */
    ASBT_EQ_INT((int)(asb__get32(o + 4) & 0xffffff), (int)(n1 - 8));
    ASBT_EQ_INT((int)asb__get32(o + 8), 1);
    ASBT_EQ_INT((int)asb__get32(o + 12), 0);
    ASBT_EQ_INT(o[18], 0x78); /* zlib: deflate, no preset dictionary, */
    ASBT_EQ_INT(((o[18] << 8) | o[19]) % 31, 0); /* a valid check */
    ASBT_EQ_INT(o[19] & 0x20, 0);
    ASBT_EQ_INT(o[20], 0x00); /* a stored block, not the last */
    blk = (size_t)(o[21] | o[22] << 8);
    ASBT_EQ_INT((int)(blk ^ 0xffffu), (int)(o[23] | o[24] << 8)); /* NLEN */
    ASBT_EQ_INT((int)spdy_expect_block(o + 25, "error", "8080"), (int)blk);
    at = 25 + blk;
    ASBT_EQ_MEM(o + at, 5, "\x00\x00\x00\xff\xff", 5); /* the sync flush */
    ASBT_EQ_INT((int)(at + 5), (int)n1);
    /* the next stream continues the zlib stream: no header again */
    n2 = asb__spdy_syn_stream(o, 3, "data", 443, 0);
    ASBT_EQ_INT((int)asb__get32(o + 8), 3);
    ASBT_EQ_INT(o[18], 0x00);
    blk = (size_t)(o[19] | o[20] << 8);
    ASBT_EQ_INT((int)spdy_expect_block(o + 23, "data", "443"), (int)blk);
    ASBT_EQ_INT((int)(23 + blk + 5), (int)n2);
    asb__spdy_data_head(o, 3, 1, 70000);
    ASBT_EQ_MEM(o, 8, "\x00\x00\x00\x03\x01\x01\x11\x70", 8); /* FIN, 24-bit length */
}

ASBT_TEST(spdy_server_frames_are_parsed_and_broken_ones_refused) {
    static const unsigned char data[] = "\x00\x00\x00\x03\x01\x00\x00\x02hi";
    static const unsigned char reply[] = "\x80\x03\x00\x02\x00\x00\x00\x0a\x00\x00\x00\x03"
                                         "\x78\x01\x00\x00\x00\xff\xff";
    static const unsigned char rst[] = "\x80\x03\x00\x03\x00\x00\x00\x08\x00\x00\x00\x01"
                                       "\x00\x00\x00\x05";
    static const unsigned char ping[] = "\x80\x03\x00\x06\x00\x00\x00\x04\x00\x00\x00\x02";
    static const unsigned char v2[] = "\x80\x02\x00\x06\x00\x00\x00\x04\x00\x00\x00\x02";
    static const unsigned char huge[] = "\x00\x00\x00\x03\x00\xff\xff\xff";
    static const unsigned char short_rst[] = "\x80\x03\x00\x03\x00\x00\x00\x04\x00\x00\x00\x01";
    asb__spdy_frame f;
    ASBT_EQ_INT(asb__spdy_next(data, sizeof data - 1, &f), 1);
    ASBT_EQ_INT(f.control, 0);
    ASBT_EQ_INT((int)f.stream, 3);
    ASBT_EQ_INT((int)(f.flags & 1), 1);
    ASBT_EQ_MEM(f.data, f.len, "hi", 2);
    ASBT_EQ_INT((int)f.total, 10);
    ASBT_EQ_INT(asb__spdy_next(data, sizeof data - 2, &f), 0); /* one byte short */
    ASBT_EQ_INT(asb__spdy_next(data, 7, &f), 0);
    ASBT_EQ_INT(asb__spdy_next(reply, sizeof reply - 1, &f), 1);
    ASBT_EQ_INT(f.control, 1);
    ASBT_EQ_INT((int)f.type, 2);
    ASBT_EQ_INT((int)f.stream, 3);
    ASBT_EQ_INT(asb__spdy_next(rst, sizeof rst - 1, &f), 1);
    ASBT_EQ_INT((int)f.type, 3);
    ASBT_EQ_INT((int)f.stream, 1);
    ASBT_EQ_INT((int)f.status, 5);
    ASBT_EQ_INT(asb__spdy_next(ping, sizeof ping - 1, &f), 1);
    ASBT_EQ_INT((int)f.type, 6);
    ASBT_EQ_INT((int)f.len, 4);
    ASBT_EQ_INT(asb__spdy_next(v2, sizeof v2 - 1, &f), -1);
    ASBT_EQ_INT(asb__spdy_next(huge, sizeof huge - 1, &f), -1); /* over 1 MiB: not buffered */
    ASBT_EQ_INT(asb__spdy_next(short_rst, sizeof short_rst - 1, &f), -1);
}

/* -- a scripted apiserver for a forward's deadlines ----------------------------
   Accepts one connection, answers the WebSocket upgrade (v4), then plays
   `mode`: the faults a real apiserver does not produce on demand. */

typedef struct slow_api {
    int lfd, port, mode; /* 0: the ports 700 ms apart; 1: a flood of pings,
                            never reading; 2: the ports, then never reads */
    volatile int stop;
    pthread_t th;
} slow_api;

static int slow_api_send(int fd, const void *p, size_t n) {
    const char *c = (const char *)p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static void *slow_api_run(void *arg) {
    slow_api *a = (slow_api *)arg;
    char req[8192], key[64] = "", acc[29], resp[400];
    static const unsigned char port0[] = {0x82, 3, 0, 8080 & 255, 8080 >> 8};
    static const unsigned char port1[] = {0x82, 3, 1, 8080 & 255, 8080 >> 8};
    size_t n = 0;
    int cfd = accept(a->lfd, NULL, NULL), small = 4096;
    char *k;
    req[0] = 0;
    if (cfd < 0) return NULL;
    setsockopt(cfd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    while (n < sizeof req - 1 && !strstr(req, "\r\n\r\n")) {
        ssize_t r = recv(cfd, req + n, sizeof req - 1 - n, 0);
        if (r <= 0) break;
        n += (size_t)r;
        req[n] = 0;
    }
    k = strstr(req, "Sec-WebSocket-Key: ");
    if (k) sscanf(k + 19, "%63[^\r]", key);
    asb__ws_accept_for(key, acc);
    snprintf(resp, sizeof resp,
             "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Accept: %s\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n",
             acc);
    slow_api_send(cfd, resp, strlen(resp));
    if (a->mode == 0) {
        usleep(700000);
        slow_api_send(cfd, port0, sizeof port0);
        usleep(700000);
        slow_api_send(cfd, port1, sizeof port1);
    } else if (a->mode == 1) {
        static const unsigned char ping[] = {0x89, 4, 'p', 'i', 'n', 'g'};
        fcntl(cfd, F_SETFL, O_NONBLOCK);
        while (!a->stop) /* as fast as the client takes them; it never reads again */
            if (send(cfd, ping, sizeof ping, MSG_NOSIGNAL) < 0 && errno != EAGAIN) break;
    } else {
        slow_api_send(cfd, port0, sizeof port0);
        slow_api_send(cfd, port1, sizeof port1);
    }
    while (!a->stop) usleep(20000); /* and never reads */
    close(cfd);
    return NULL;
}

static int slow_api_start(slow_api *a, int mode) {
    struct sockaddr_in sa;
    socklen_t al = sizeof sa;
    memset(a, 0, sizeof *a);
    a->mode = mode;
    a->lfd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (a->lfd < 0 || bind(a->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(a->lfd, 4) != 0 || getsockname(a->lfd, (struct sockaddr *)&sa, &al) != 0)
        return 0;
    a->port = ntohs(sa.sin_port);
    return pthread_create(&a->th, NULL, slow_api_run, a) == 0;
}

static void slow_api_stop(slow_api *a) {
    a->stop = 1;
    shutdown(a->lfd, SHUT_RDWR);
    pthread_join(a->th, NULL);
    close(a->lfd);
}

static asb_portforward *slow_forward(slow_api *a, int timeout_ms, asb_kube_client **kc) {
    asb_portforward_desc d;
    asb_portforward *pf = NULL;
    asb_error err;
    kube_client_at(a->port, "abcd", NULL, kc);
    if (!*kc) return NULL;
    memset(&d, 0, sizeof d);
    d.ns = "default";
    d.pod = "pod-x";
    d.port = "8080";
    d.timeout_ms = timeout_ms;
    d.v4_only = 1;
    if (asb_portforward_create(*kc, &d, &pf, &err) != ASB_OK) return NULL;
    return pf;
}

/* timeout_ms is the dial's one deadline: a server that sends each port
   message 700 ms after the last misses a 1000 ms dial (each step got the
   whole timeout_ms: the dial succeeded after 1.4 s). */
ASBT_TEST(a_forward_dial_keeps_one_deadline_across_its_steps) {
    slow_api a;
    asb_kube_client *kc = NULL;
    asb_portforward *pf;
    asb_error err;
    int fd = -1;
    ASBT_CHECK(slow_api_start(&a, 0));
    pf = slow_forward(&a, 1000, &kc);
    ASBT_CHECK(pf != NULL);
    ASBT_EQ_RES(asb_portforward_dial(pf, &fd, &err), ASB_ERR_PORT_FORWARD);
    ASBT_EQ_INT(fd, -1);
    asb_portforward_free(pf);
    slow_api_stop(&a);
    asb_kube_client_free(kc);
}

/* A server that floods pings and never reads: the pongs' writes block,
   and the dial ends near its deadline (2000 ms), not after the
   WebSocket's 30 s write timeout (the old dial: 31 s). The bound checked
   is loose: a loaded machine must not fail it. */
ASBT_TEST(a_forward_dial_under_a_ping_flood_from_a_server_that_never_reads_keeps_its_deadline) {
    slow_api a;
    asb_kube_client *kc = NULL;
    asb_portforward *pf;
    asb_error err;
    int fd = -1;
    int64_t t0, took;
    ASBT_CHECK(slow_api_start(&a, 1));
    pf = slow_forward(&a, 2000, &kc);
    ASBT_CHECK(pf != NULL);
    t0 = asb__now_ms();
    ASBT_CHECK(asb_portforward_dial(pf, &fd, &err) != ASB_OK);
    took = asb__now_ms() - t0;
    if (took >= 12000) fprintf(stderr, "    the dial took %lld ms\n", (long long)took);
    ASBT_CHECK(took < 12000);
    asb_portforward_free(pf);
    slow_api_stop(&a);
    asb_kube_client_free(kc);
}

/* A forward whose apiserver stops reading while the program writes: the
   relay blocks in a WebSocket send (30 s timeout); free shuts that
   connection down after 2 s instead of waiting it out (the old free:
   28 s). Loose bound, as above. */
ASBT_TEST(freeing_a_forward_whose_server_stopped_reading_does_not_wait_out_the_write) {
    slow_api a;
    asb_kube_client *kc = NULL;
    asb_portforward *pf;
    asb_error err;
    int fd = -1, i;
    static char chunk[65536];
    int64_t t0, took;
    ASBT_CHECK(slow_api_start(&a, 2));
    pf = slow_forward(&a, 10000, &kc);
    ASBT_CHECK(pf != NULL);
    if (asb_portforward_dial(pf, &fd, &err) != ASB_OK) fprintf(stderr, "    dial: %s\n", err.message);
    ASBT_CHECK(fd >= 0);
    for (i = 0; i < 400; i++) { /* until the relay is stuck and the pair is full */
        struct pollfd p;
        p.fd = fd;
        p.events = POLLOUT;
        p.revents = 0;
        if (poll(&p, 1, 1000) != 1) break;
        if (send(fd, chunk, sizeof chunk, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN)
            break;
    }
    t0 = asb__now_ms();
    asb_portforward_free(pf);
    took = asb__now_ms() - t0;
    if (took >= 12000) fprintf(stderr, "    free took %lld ms\n", (long long)took);
    ASBT_CHECK(took < 12000);
    close(fd);
    slow_api_stop(&a);
    asb_kube_client_free(kc);
}

ASBT_LIST(ASBT_CASE(accept_key_matches_the_rfc_example)
          ASBT_CASE(sha1_matches_fips_vectors_across_block_boundaries)
          ASBT_CASE(single_frame_message_is_handed_over_whole)
          ASBT_CASE(fragments_reassemble_around_a_ping)
          ASBT_CASE(each_broken_server_frame_is_refused_with_its_close_code)
          ASBT_CASE(fragments_together_over_the_limit_are_refused)
          ASBT_CASE(valid_close_frames_and_empty_messages_pass)
          ASBT_CASE(client_frames_are_masked_with_minimal_lengths)
          ASBT_CASE(send_refuses_what_a_client_may_not_send)
          ASBT_CASE(portforward_create_checks_its_description)
          ASBT_CASE(a_websocket_target_over_the_limit_is_refused_not_cut)
          ASBT_CASE(a_token_in_a_websocket_close_reason_is_masked)
          ASBT_CASE(a_token_in_a_port_forward_error_channel_is_masked_in_the_error_and_the_log)
          ASBT_CASE(a_token_in_a_watch_resource_version_is_masked_after_410)
          ASBT_CASE(a_service_target_port_outside_the_port_range_is_refused)
          ASBT_CASE(a_pod_forward_released_during_another_handles_dial_is_freed_after_it)
          ASBT_CASE(bytes_relayed_to_a_forward_are_wiped_from_freed_memory)
          ASBT_CASE(recv_timeout_holds_under_a_flood_of_control_frames)
          ASBT_CASE(spdy_open_times_out_under_a_flood_of_frames_that_are_not_its_reply)
          ASBT_CASE(a_pod_forward_of_a_dotted_pod_name_forwards_to_that_pod)
          ASBT_CASE(spdy_syn_stream_sends_the_port_forward_headers_in_stored_zlib_blocks)
          ASBT_CASE(spdy_server_frames_are_parsed_and_broken_ones_refused)
          ASBT_CASE(a_spdy_stream_ended_by_the_kubelet_is_a_clean_end_unless_it_says_why)
          ASBT_CASE(a_forward_dial_keeps_one_deadline_across_its_steps)
          ASBT_CASE(a_forward_dial_under_a_ping_flood_from_a_server_that_never_reads_keeps_its_deadline)
          ASBT_CASE(freeing_a_forward_whose_server_stopped_reading_does_not_wait_out_the_write))
ASBT_MAIN()
