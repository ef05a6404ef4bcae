/* HTTP/2, HPACK, gRPC framing and protobuf without a network: RFC 7541
   Appendix C as test vectors, malformed input of every kind, and frames
   fed to a connection object that has no socket. (tests/test_h2_peers.c
   runs the same code against nghttpd and a grpcio server.) */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include "asbtest.h"

static asb_allocator libc_alloc(void) {
    asb_allocator a;
    asb__allocator_resolve(NULL, &a);
    return a;
}

static size_t unhex(const char *h, unsigned char *out) {
    size_t n = 0;
    while (h[0] && h[1]) {
        out[n++] = (unsigned char)(asb__hexval((unsigned char)h[0]) * 16 +
                                   asb__hexval((unsigned char)h[1]));
        h += 2;
    }
    return n;
}

typedef struct fields {
    char text[2048]; /* "name: value\n" per field */
    size_t len;
} fields;

static asb_result collect(void *ctx, const char *n, size_t nl, const char *v, size_t vl) {
    fields *f = (fields *)ctx;
    f->len += (size_t)snprintf(f->text + f->len, sizeof f->text - f->len, "%.*s: %.*s\n",
                               (int)nl, n, (int)vl, v);
    return ASB_OK;
}

static asb_result decode_hex(asb__hpack_dec *d, const char *hex, fields *f) {
    unsigned char b[512];
    size_t n = unhex(hex, b);
    const char *why;
    memset(f, 0, sizeof *f);
    return asb__hpack_decode(d, b, n, 65536, collect, f, &why);
}

static const char *const req_hex[2][3] = {
    {"828684410f7777772e6578616d706c652e636f6d", "828684be58086e6f2d6361636865",
     "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565"},
    {"828684418cf1e3c2e5f23a6ba0ab90f4ff", "828684be5886a8eb10649cbf",
     "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf"}};
static const char *const req_text[3] = {
    ":method: GET\n:scheme: http\n:path: /\n:authority: www.example.com\n",
    ":method: GET\n:scheme: http\n:path: /\n:authority: www.example.com\ncache-control: no-cache\n",
    (":method: GET\n:scheme: https\n:path: /index.html\n:authority: www.example.com\n"
     "custom-key: custom-value\n")};

static void requests(int huffman) {
    asb_allocator la = libc_alloc();
    asb__hpack_dec d;
    fields f;
    int i;
    ASBT_EQ_RES(asb__hpack_dec_init(&d, &la, 4096), ASB_OK);
    for (i = 0; i < 3; i++) {
        asb_result r = decode_hex(&d, req_hex[huffman][i], &f);
        if (r != ASB_OK || strcmp(f.text, req_text[i]) != 0) {
            asb__hpack_dec_free(&d);
            ASBT_EQ_RES(r, ASB_OK);
            ASBT_EQ_STR(f.text, req_text[i]);
        }
    }
    /* RFC 7541 C.3.3 / C.4.3: three entries, 164 bytes */
    ASBT_EQ_INT(d.count, 3);
    ASBT_EQ_INT(d.size, 164);
    asb__hpack_dec_free(&d);
}

ASBT_TEST(hpack_decodes_rfc7541_c3_requests_without_huffman) { requests(0); }
ASBT_TEST(hpack_decodes_rfc7541_c4_requests_with_huffman) { requests(1); }

static const char *const resp_hex[2][3] = {
    {"4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a32312047"
     "4d546e1768747470733a2f2f7777772e6578616d706c652e636f6d",
     "4803333037c1c0bf",
     "88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69707738666f"
     "6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d333630303b"
     "2076657273696f6e3d31"},
    {"488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c7"
     "8f0b97c8e9ae82ae43d3",
     "4883640effc1c0bf",
     "88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335"
     "dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007"}};
static const char *const resp_text[3] = {
    ":status: 302\ncache-control: private\ndate: Mon, 21 Oct 2013 20:13:21 GMT\n"
    "location: https://www.example.com\n",
    ":status: 307\ncache-control: private\ndate: Mon, 21 Oct 2013 20:13:21 GMT\n"
    "location: https://www.example.com\n",
    ":status: 200\ncache-control: private\ndate: Mon, 21 Oct 2013 20:13:22 GMT\n"
    "location: https://www.example.com\ncontent-encoding: gzip\n"
    "set-cookie: foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1\n"};

static void responses(int huffman) {
    asb_allocator la = libc_alloc();
    asb__hpack_dec d;
    fields f;
    int i;
    /* C.5 and C.6 use a 256-byte table: entries are evicted */
    ASBT_EQ_RES(asb__hpack_dec_init(&d, &la, 256), ASB_OK);
    for (i = 0; i < 3; i++) {
        asb_result r = decode_hex(&d, resp_hex[huffman][i], &f);
        if (r != ASB_OK || strcmp(f.text, resp_text[i]) != 0) {
            asb__hpack_dec_free(&d);
            ASBT_EQ_RES(r, ASB_OK);
            ASBT_EQ_STR(f.text, resp_text[i]);
        }
    }
    ASBT_EQ_INT(d.count, 3);
    ASBT_EQ_INT(d.size, 215);
    asb__hpack_dec_free(&d);
}

ASBT_TEST(hpack_decodes_rfc7541_c5_responses_with_eviction) { responses(0); }
ASBT_TEST(hpack_decodes_rfc7541_c6_huffman_responses_with_eviction) { responses(1); }

ASBT_TEST(hpack_refuses_malformed_blocks) {
    asb_allocator la = libc_alloc();
    static const char *const bad[] = {
        "80",               /* index 0 */
        "be",               /* index 62: empty dynamic table */
        "ff80808080808001", /* an integer far beyond 2^32 */
        "41",               /* a name index, then no value */
        "4005616263",       /* literal name longer than the block */
        "0081ff",           /* Huffman: 8 bits of padding */
        "008100",           /* Huffman: padding not all ones */
        "0084ffffffff",     /* Huffman: EOS (30 ones) inside a string */
        "3fe21f",           /* size update 4096+1 > settings */
        "8220",             /* size update after a field */
        "0f",               /* literal with a truncated index */
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        asb__hpack_dec d;
        fields f;
        asb_result r;
        asb__hpack_dec_init(&d, &la, 4096);
        r = decode_hex(&d, bad[i], &f);
        asb__hpack_dec_free(&d);
        if (r != ASB_ERR_HTTP_PROTOCOL) fprintf(stderr, "    case %s\n", bad[i]);
        ASBT_EQ_RES(r, ASB_ERR_HTTP_PROTOCOL);
    }
}

ASBT_TEST(hpack_size_update_to_zero_empties_the_table) {
    asb_allocator la = libc_alloc();
    asb__hpack_dec d;
    fields f;
    asb__hpack_dec_init(&d, &la, 4096);
    ASBT_EQ_RES(decode_hex(&d, req_hex[0][0], &f), ASB_OK);
    ASBT_EQ_INT(d.count, 1);
    ASBT_EQ_RES(decode_hex(&d, "20", &f), ASB_OK);
    ASBT_EQ_INT(d.count, 0);
    ASBT_EQ_RES(decode_hex(&d, "be", &f), ASB_ERR_HTTP_PROTOCOL);
    asb__hpack_dec_free(&d);
}

ASBT_TEST(hpack_header_list_over_the_cap_is_too_large_and_keeps_the_table) {
    asb_allocator la = libc_alloc();
    asb__hpack_dec d;
    fields f;
    unsigned char b[256];
    size_t n = unhex(req_hex[0][2], b);
    const char *why;
    asb__hpack_dec_init(&d, &la, 4096);
    ASBT_EQ_RES(decode_hex(&d, req_hex[0][0], &f), ASB_OK);
    ASBT_EQ_RES(decode_hex(&d, req_hex[0][1], &f), ASB_OK);
    memset(&f, 0, sizeof f);
    ASBT_EQ_RES(asb__hpack_decode(&d, b, n, 100, collect, &f, &why), ASB_ERR_TOO_LARGE);
    /* decoding went on: the third entry was added all the same */
    ASBT_EQ_INT(d.count, 3);
    ASBT_EQ_INT(d.size, 164);
    asb__hpack_dec_free(&d);
}

ASBT_TEST(hpack_encoder_output_decodes_to_the_same_fields) {
    asb_allocator la = libc_alloc();
    asb_buf b;
    asb__hpack_dec d;
    fields f;
    const char *why;
    char longv[300];
    memset(longv, 'x', sizeof longv - 1);
    longv[sizeof longv - 1] = '\0';
    asb_buf_init(&b, NULL);
    asb__hpack_encode(&b, ":method", "POST");
    asb__hpack_encode(&b, ":path", "/process.v1.ProcessService/Start");
    asb__hpack_encode(&b, "te", "trailers");
    asb__hpack_encode(&b, "x-long", longv);
    ASBT_EQ_INT((unsigned char)b.ptr[0], 0x83); /* exact static match */
    asb__hpack_dec_init(&d, &la, 4096);
    memset(&f, 0, sizeof f);
    ASBT_EQ_RES(asb__hpack_decode(&d, (const unsigned char *)b.ptr, b.len, 65536, collect, &f,
                                  &why),
                ASB_OK);
    ASBT_CONTAINS(f.text, ":method: POST\n:path: /process.v1.ProcessService/Start\nte: trailers\n");
    ASBT_CONTAINS(f.text, longv);
    ASBT_EQ_INT(d.count, 0); /* nothing indexed */
    asb__hpack_dec_free(&d);
    asb_buf_free(&b);
}

/* Credentials go out as "literal never indexed" (RFC 7541 6.2.3 and
   7.1.3), so no intermediary keeps them in a compression table; other
   fields as "literal without indexing". authorization is static index 23:
   0x10 | 15, then 8. */
ASBT_TEST(hpack_encoder_never_indexes_authorization) {
    asb_allocator la = libc_alloc();
    asb_buf b;
    asb__hpack_dec d;
    fields f;
    const char *why;
    asb_buf_init(&b, NULL);
    asb__hpack_encode(&b, "authorization", "Bearer t0k");
    ASBT_EQ_INT((unsigned char)b.ptr[0], 0x1f);
    ASBT_EQ_INT((unsigned char)b.ptr[1], 0x08);
    b.len = 0;
    asb__hpack_encode(&b, "proxy-authorization", "Basic eA==");
    ASBT_EQ_INT((unsigned char)b.ptr[0] & 0xf0, 0x10);
    b.len = 0;
    asb__hpack_encode(&b, "user-agent", "x");
    ASBT_EQ_INT((unsigned char)b.ptr[0] & 0xf0, 0x00);
    b.len = 0;
    asb__hpack_encode(&b, "authorization", "Bearer t0k");
    asb__hpack_dec_init(&d, &la, 4096);
    memset(&f, 0, sizeof f);
    ASBT_EQ_RES(asb__hpack_decode(&d, (const unsigned char *)b.ptr, b.len, 65536, collect, &f,
                                  &why),
                ASB_OK);
    ASBT_CONTAINS(f.text, "authorization: Bearer t0k\n");
    ASBT_EQ_INT(d.count, 0);
    asb__hpack_dec_free(&d);
    asb_buf_free(&b);
}

/* -- protobuf ------------------------------------------------------------------ */

ASBT_TEST(protobuf_writes_and_reads_a_start_request) {
    asb_buf b;
    size_t m1, m2;
    asb_pb_reader r, cr;
    asb_pb_field f;
    int cmds = 0, envs = 0;
    asb_buf_init(&b, NULL);
    /* StartRequest{config: {command: [sh, -c, echo], env_vars: {A: 1}}} */
    ASBT_EQ_RES(asb_pb_begin(&b, 1, &m1), ASB_OK);
    asb_pb_put_string(&b, 1, "sh");
    asb_pb_put_string(&b, 1, "-c");
    asb_pb_put_string(&b, 1, "echo");
    asb_pb_begin(&b, 2, &m2);
    asb_pb_put_string(&b, 1, "A");
    asb_pb_put_string(&b, 2, "1");
    asb_pb_end(&b, m2);
    ASBT_EQ_RES(asb_pb_end(&b, m1), ASB_OK);
    asb_pb_put_int32(&b, 7, -1);
    asb_pb_reader_init(&r, b.ptr, b.len);
    ASBT_EQ_RES(asb_pb_next(&r, &f, NULL), ASB_OK);
    ASBT_EQ_INT(f.number, 1);
    ASBT_EQ_INT(f.wire_type, ASB_PB_LEN);
    asb_pb_reader_init(&cr, f.bytes.ptr, f.bytes.len);
    for (;;) {
        ASBT_EQ_RES(asb_pb_next(&cr, &f, NULL), ASB_OK);
        if (f.number == 0) break;
        if (f.number == 1) cmds++;
        if (f.number == 2) {
            ASBT_EQ_MEM(f.bytes.ptr, f.bytes.len, "\x0a\x01" "A\x12\x01" "1", 6);
            envs++;
        }
    }
    ASBT_EQ_INT(cmds, 3);
    ASBT_EQ_INT(envs, 1);
    ASBT_EQ_RES(asb_pb_next(&r, &f, NULL), ASB_OK);
    {
        int32_t v;
        ASBT_EQ_INT(f.number, 7);
        ASBT_EQ_RES(asb_pb_int32(&f, &v), ASB_OK);
        ASBT_EQ_INT(v, -1);
    }
    ASBT_EQ_INT(b.len, 2 + 4 + 4 + 6 + 2 + 6 + 1 + 10); /* -1 takes ten bytes */
    ASBT_EQ_RES(asb_pb_next(&r, &f, NULL), ASB_OK);
    ASBT_EQ_INT(f.number, 0);
    asb_buf_free(&b);
}

ASBT_TEST(protobuf_skips_unknown_fields_of_every_wire_type) {
    /* fixed64 f1, fixed32 f2, group f3 {varint f4, group f5 {}}, varint f6 = 150 */
    static const unsigned char m[] = {0x09, 1, 2, 3, 4, 5, 6, 7, 8, 0x15, 1, 2, 3, 4,
                                      0x1b, 0x20, 0x05, 0x2b, 0x2c, 0x1c, 0x30, 0x96, 0x01};
    asb_pb_reader r;
    asb_pb_field f;
    int seen[8] = {0};
    asb_pb_reader_init(&r, m, sizeof m);
    for (;;) {
        ASBT_EQ_RES(asb_pb_next(&r, &f, NULL), ASB_OK);
        if (!f.number) break;
        seen[f.number]++;
        if (f.number == 1) ASBT_EQ_INT(f.value, 0x0807060504030201ULL);
        if (f.number == 2) ASBT_EQ_INT(f.value, 0x04030201);
        if (f.number == 6) ASBT_EQ_INT(f.value, 150);
    }
    ASBT_EQ_INT(seen[1] + seen[2] + seen[3] + seen[6], 4);
    ASBT_EQ_INT(seen[4] + seen[5], 0);
}

ASBT_TEST(protobuf_refuses_malformed_messages) {
    static const struct {
        const char *bytes;
        size_t len;
    } bad[] = {
        {"\x08", 1},                                         /* varint missing */
        {"\x08\x80", 2},                                     /* truncated varint */
        {"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 11}, /* 70 bits */
        {"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 11}, /* 65 bits */
        {"\x12\x05" "abc", 5},                               /* length past the end */
        {"\x12\xff\xff\xff\xff\x0f", 6},                     /* 4 GiB length */
        {"\x00\x01", 2},                                     /* field 0 */
        {"\x0e", 1},                                         /* wire type 6 */
        {"\x0f", 1},                                         /* wire type 7 */
        {"\x0c", 1},                                         /* group end alone */
        {"\x0b\x14", 2},                                     /* group 1 ended as 2 */
        {"\x0b", 1},                                         /* group never ended */
        {"\x0d\x01\x02", 3},                                 /* short fixed32 */
        {"\x80\x80\x80\x80\x80\x01", 6},                     /* tag above 32 bits */
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        asb_pb_reader r;
        asb_pb_field f;
        asb_result res = ASB_OK;
        asb_error err;
        int guard = 0;
        asb_pb_reader_init(&r, bad[i].bytes, bad[i].len);
        do {
            res = asb_pb_next(&r, &f, &err);
        } while (res == ASB_OK && f.number && ++guard < 10);
        if (res != ASB_ERR_PROTOBUF_INVALID) fprintf(stderr, "    case %lu\n", (unsigned long)i);
        ASBT_EQ_RES(res, ASB_ERR_PROTOBUF_INVALID);
        ASBT_CONTAINS(err.message, "protobuf:");
        /* and it stays failed */
        ASBT_EQ_RES(asb_pb_next(&r, &f, NULL), ASB_ERR_PROTOBUF_INVALID);
    }
}

/* -- gRPC message framing ----------------------------------------------------- */

typedef struct msgs {
    asb_buf all;
    int n;
} msgs;

static int on_msg(void *ctx, const char *m, size_t len) {
    msgs *x = (msgs *)ctx;
    x->n++;
    asb_buf_append(&x->all, m, len);
    asb_buf_append(&x->all, "|", 1);
    return 0;
}

ASBT_TEST(grpc_messages_come_whole_whatever_the_chunking) {
    static const char wire[] = "\0\0\0\0\3abc\0\0\0\0\0\0\0\0\0\5hello";
    size_t cut;
    for (cut = 1; cut <= sizeof wire - 1; cut++) {
        asb__grpc_deframer d;
        msgs x;
        size_t i;
        memset(&d, 0, sizeof d);
        d.max = 100;
        asb_buf_init(&d.msg, NULL);
        asb_buf_init(&x.all, NULL);
        x.n = 0;
        for (i = 0; i < sizeof wire - 1; i += cut) {
            size_t k = sizeof wire - 1 - i < cut ? sizeof wire - 1 - i : cut;
            ASBT_EQ_RES(asb__grpc_feed(&d, wire + i, k, on_msg, &x), ASB_OK);
        }
        ASBT_EQ_INT(x.n, 3);
        ASBT_EQ_STR(x.all.ptr, "abc||hello|");
        ASBT_EQ_INT(d.in_msg || d.hdr_have, 0);
        asb_buf_free(&d.msg);
        asb_buf_free(&x.all);
    }
}

ASBT_TEST(grpc_compressed_or_oversized_messages_are_refused) {
    asb__grpc_deframer d;
    msgs x;
    memset(&d, 0, sizeof d);
    d.max = 4;
    asb_buf_init(&d.msg, NULL);
    asb_buf_init(&x.all, NULL);
    x.n = 0;
    ASBT_EQ_RES(asb__grpc_feed(&d, "\1\0\0\0\1x", 6, on_msg, &x), ASB_ERR_HTTP_PROTOCOL);
    memset(&d.hdr, 0, sizeof d.hdr);
    d.hdr_have = 0;
    ASBT_EQ_RES(asb__grpc_feed(&d, "\0\0\0\0\5", 5, on_msg, &x), ASB_ERR_TOO_LARGE);
    ASBT_EQ_INT(x.n, 0);
    asb_buf_free(&d.msg);
    asb_buf_free(&x.all);
}

/* Counts what the deframer asks of its allocator: the largest block. */
typedef struct sized_alloc {
    size_t largest;
} sized_alloc;

static void *sized_alloc_fn(size_t size, void *ud) {
    sized_alloc *a = (sized_alloc *)ud;
    if (size > a->largest) a->largest = size;
    return malloc(size);
}

static void *sized_realloc_fn(void *ptr, size_t size, void *ud) {
    sized_alloc *a = (sized_alloc *)ud;
    if (size > a->largest) a->largest = size;
    return realloc(ptr, size);
}

static void sized_free_fn(void *ptr, void *ud) {
    (void)ud;
    free(ptr);
}

typedef struct big_msg {
    int n;
    size_t len;
    int intact;
} big_msg;

static int on_big_msg(void *ctx, const char *m, size_t len) {
    big_msg *x = (big_msg *)ctx;
    size_t i;
    x->n++;
    x->len = len;
    x->intact = 1;
    for (i = 0; i < len; i++)
        if (m[i] != (char)(i * 7 % 251)) x->intact = 0;
    return 0;
}

ASBT_TEST(grpc_declared_length_is_not_allocated_before_its_bytes_arrive) {
    /* A server's 5-byte prefix may declare up to max_message_bytes; the
       buffer grows with the bytes that come, not with the promise. */
    static const size_t BIG = (size_t)16 << 20, PIECE = 65536;
    static char piece[65536];
    unsigned char pfx[5] = {0, 1, 0, 0, 0}; /* 16 MiB, big-endian */
    sized_alloc counted = {0};
    asb_allocator a;
    asb__grpc_deframer d;
    big_msg x = {0, 0, 0};
    size_t off, i;
    a.alloc_fn = sized_alloc_fn;
    a.realloc_fn = sized_realloc_fn;
    a.free_fn = sized_free_fn;
    a.user_data = &counted;
    memset(&d, 0, sizeof d);
    d.max = 2 * BIG;
    ASBT_EQ_RES(asb_buf_init(&d.msg, &a), ASB_OK);
    ASBT_EQ_RES(asb__grpc_feed(&d, (const char *)pfx, 5, on_big_msg, &x), ASB_OK);
    for (i = 0; i < 3; i++) piece[i] = (char)(i * 7 % 251);
    ASBT_EQ_RES(asb__grpc_feed(&d, piece, 3, on_big_msg, &x), ASB_OK);
    if (counted.largest > 4096) fprintf(stderr, "    largest block %lu\n", (unsigned long)counted.largest);
    ASBT_CHECK(counted.largest <= 4096);
    ASBT_EQ_INT(x.n, 0);
    /* and the whole message, when it does come, arrives intact */
    for (off = 3; off < BIG; off += PIECE) {
        size_t k = BIG - off < PIECE ? BIG - off : PIECE;
        for (i = 0; i < k; i++) piece[i] = (char)((off + i) * 7 % 251);
        ASBT_EQ_RES(asb__grpc_feed(&d, piece, k, on_big_msg, &x), ASB_OK);
    }
    ASBT_EQ_INT(x.n, 1);
    ASBT_CHECK(x.len == BIG);
    ASBT_CHECK(x.intact);
    ASBT_CHECK(counted.largest <= 2 * BIG + 64);
    asb_buf_free(&d.msg);
}

ASBT_TEST(grpc_message_is_percent_decoded_and_bad_escapes_kept) {
    char out[64];
    asb__grpc_message(out, sizeof out, "caf%C3%A9 50%25 %zz %4", 22);
    ASBT_EQ_STR(out, "caf\xc3\xa9 50% %zz %4");
    asb__grpc_message(out, sizeof out, "a%0Ab", 5);
    ASBT_EQ_STR(out, "a?b"); /* control characters never reach a message */
    /* nor C1 controls, escaped or not: U+009B is CSI to a UTF-8 terminal */
    {
        static const char c1[] = "x%C2%9B2J\xc2\x9d" "0;t\xc2\x9c%1B[m";
        asb__grpc_message(out, sizeof out, c1, sizeof c1 - 1);
    }
    ASBT_EQ_STR(out, "x??2J??0;t???[m");
}

/* Server text on its way into a message: C0, DEL, C1 and every byte
   outside well-formed UTF-8 become '?', one for one; UTF-8 stays. */
ASBT_TEST(scrub_text_keeps_utf8_and_replaces_controls_and_malformed_bytes) {
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"plain text", "plain text"},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0"},
        {"a\nb\tc\x1b[2Jd\x7f", "a?b?c?[2Jd?"},
        {"\xc2\x80\xc2\x9f", "????"},                  /* C1, first and last */
        {"\x9b" "31m", "?31m"},                             /* a lone C1 byte (Latin-1 CSI) */
        {"\xc0\x80 \xc1\xbf", "?? ??"},                /* overlong */
        {"\xe0\x80\x80", "???"},                        /* overlong, 3 bytes */
        {"\xed\xa0\x80", "???"},                        /* a surrogate */
        {"\xf4\x90\x80\x80 \xf5\x80", "???? ??"},    /* above U+10FFFF */
        {"ok\xe2\x82", "ok??"},                          /* cut short at the end */
        {"\xe2(\xa1", "?(?"},                            /* a lead without its tail */
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[32];
        size_t n = strlen(cases[i].in);
        memcpy(buf, cases[i].in, n + 1);
        asb__scrub_text(buf, n);
        ASBT_EQ_STR(buf, cases[i].want);
    }
}

/* -- frames into a connection without a socket --------------------------------- */

static asb_h2_conn *offline_conn(uint32_t stream_window) {
    asb_h2_desc d;
    asb_h2_conn *h = NULL;
    asb_allocator la = libc_alloc();
    memset(&d, 0, sizeof d);
    d.stream_window = stream_window;
    asb__h2_conn_new(&d, &la, &h);
    return h;
}

static void frame(asb_buf *b, int type, int flags, uint32_t sid, const void *p, size_t n) {
    unsigned char hd[9];
    hd[0] = (unsigned char)(n >> 16);
    hd[1] = (unsigned char)(n >> 8);
    hd[2] = (unsigned char)n;
    hd[3] = (unsigned char)type;
    hd[4] = (unsigned char)flags;
    asb__h2_put_u32(hd + 5, sid);
    asb_buf_append(b, hd, 9);
    asb_buf_append(b, p, n);
}

/* The frame types queued for the peer, as letters, from the out buffer. */
static void sent(asb_h2_conn *h, char *out, size_t cap) {
    size_t i = h->out_pos, o = 0;
    while (i + 9 <= h->out.len && o + 1 < cap) {
        const unsigned char *f = (const unsigned char *)h->out.ptr + i;
        size_t len = (size_t)f[0] << 16 | (size_t)f[1] << 8 | f[2];
        out[o++] = "DHPRSUIGWC"[f[3] < 10 ? f[3] : 0];
        i += 9 + len;
    }
    out[o] = '\0';
    h->out.len = h->out_pos = 0;
}

ASBT_TEST(h2_settings_and_ping_are_acknowledged) {
    asb_h2_conn *h = offline_conn(0);
    asb_buf b;
    char s[32];
    static const unsigned char settings[] = {0, 4, 0, 0, 0x10, 0, 0, 5, 0, 0, 0x80, 0};
    asb_buf_init(&b, NULL);
    frame(&b, ASB__H2_SETTINGS, 0, 0, settings, sizeof settings);
    frame(&b, ASB__H2_PING, 0, 0, "12345678", 8);
    frame(&b, ASB__H2_PING, ASB__H2_ACK, 0, "12345678", 8); /* not answered */
    frame(&b, 0x42, 0, 0, "x", 1);                          /* unknown: ignored */
    asb__h2_on_bytes(h, b.ptr, b.len);
    ASBT_EQ_INT(h->dead, ASB_OK);
    ASBT_EQ_INT(h->peer_initial_window, 4096);
    ASBT_EQ_INT(h->peer_max_frame, 32768);
    ASBT_EQ_MEM(h->out.ptr + 9 + 9, 8, "12345678", 8); /* the PING payload echoed */
    sent(h, s, sizeof s);
    ASBT_EQ_STR(s, "SI");
    asb_buf_free(&b);
    asb_h2_conn_free(h);
}

ASBT_TEST(h2_headers_across_continuation_with_padding_then_padded_data) {
    asb_h2_conn *h = offline_conn(0);
    asb_h2_stream *st;
    asb_buf b, blk;
    unsigned char pl[64];
    char body[16];
    size_t n;
    asb_str v;
    asb_buf_init(&b, NULL);
    asb_buf_init(&blk, NULL);
    st = asb__h2_stream_new(h, 1);
    st->local_closed = 1;
    asb__hpack_encode(&blk, ":status", "200");
    asb__hpack_encode(&blk, "content-type", "text/plain");
    /* HEADERS padded with 3 bytes, carrying 2 bytes of the block */
    pl[0] = 3;
    memcpy(pl + 1, blk.ptr, 2);
    memset(pl + 3, 0, 3);
    frame(&b, ASB__H2_HEADERS, ASB__H2_PADDED, 1, pl, 6);
    frame(&b, ASB__H2_CONTINUATION, ASB__H2_END_HEADERS, 1, blk.ptr + 2, blk.len - 2);
    pl[0] = 2;
    memcpy(pl + 1, "hello", 5);
    memset(pl + 6, 0, 2);
    frame(&b, ASB__H2_DATA, ASB__H2_PADDED | ASB__H2_END_STREAM, 1, pl, 8);
    /* fed one byte at a time: frames are reassembled */
    for (n = 0; n < b.len; n++) asb__h2_on_bytes(h, b.ptr + n, 1);
    ASBT_EQ_INT(h->dead, ASB_OK);
    ASBT_EQ_INT(asb_h2_stream_status(st), 200);
    ASBT_CHECK(asb_h2_stream_header(st, "content-type", &v));
    ASBT_EQ_MEM(v.ptr, v.len, "text/plain", 10);
    ASBT_EQ_RES(asb_h2_stream_read(st, body, sizeof body, &n, NULL), ASB_OK);
    ASBT_EQ_MEM(body, n, "hello", 5);
    ASBT_EQ_RES(asb_h2_stream_read(st, body, sizeof body, &n, NULL), ASB_OK);
    ASBT_EQ_INT(n, 0);
    asb_h2_stream_free(st);
    asb_buf_free(&b);
    asb_buf_free(&blk);
    asb_h2_conn_free(h);
}

ASBT_TEST(h2_reading_gives_the_stream_window_back_in_halves) {
    asb_h2_conn *h = offline_conn(65536);
    asb_h2_stream *st;
    asb_buf b, blk;
    static char chunk[16384];
    char s[64], sink[40000];
    size_t n;
    int i;
    asb_buf_init(&b, NULL);
    asb_buf_init(&blk, NULL);
    st = asb__h2_stream_new(h, 1);
    asb__hpack_encode(&blk, ":status", "200");
    frame(&b, ASB__H2_HEADERS, ASB__H2_END_HEADERS, 1, blk.ptr, blk.len);
    for (i = 0; i < 4; i++) frame(&b, ASB__H2_DATA, 0, 1, chunk, sizeof chunk);
    asb__h2_on_bytes(h, b.ptr, b.len);
    ASBT_EQ_INT(h->dead, ASB_OK);
    ASBT_EQ_INT(st->recv_window, 0);
    sent(h, s, sizeof s);
    ASBT_EQ_STR(s, ""); /* nothing given back before it is read */
    /* one more byte is beyond the window: the stream fails, not the connection */
    b.len = 0;
    frame(&b, ASB__H2_DATA, 0, 1, "x", 1);
    asb__h2_on_bytes(h, b.ptr, b.len);
    ASBT_EQ_INT(h->dead, ASB_OK);
    ASBT_EQ_RES(st->failed, ASB_ERR_HTTP_PROTOCOL);
    sent(h, s, sizeof s);
    ASBT_EQ_STR(s, "R");
    asb_h2_stream_free(st);
    /* a fresh stream: reading half the window sends one WINDOW_UPDATE */
    st = asb__h2_stream_new(h, 3);
    b.len = 0;
    frame(&b, ASB__H2_HEADERS, ASB__H2_END_HEADERS, 3, blk.ptr, blk.len);
    for (i = 0; i < 4; i++) frame(&b, ASB__H2_DATA, 0, 3, chunk, sizeof chunk);
    asb__h2_on_bytes(h, b.ptr, b.len);
    ASBT_EQ_RES(asb_h2_stream_read(st, sink, 30000, &n, NULL), ASB_OK);
    sent(h, s, sizeof s);
    ASBT_EQ_STR(s, "");
    ASBT_EQ_RES(asb_h2_stream_read(st, sink, 3000, &n, NULL), ASB_OK);
    sent(h, s, sizeof s);
    ASBT_EQ_STR(s, "W");
    ASBT_EQ_INT(st->recv_window, 33000);
    asb_h2_stream_free(st);
    asb_buf_free(&b);
    asb_buf_free(&blk);
    asb_h2_conn_free(h);
}

typedef struct bad_frame {
    const char *what;
    int type, flags;
    uint32_t sid;
    const char *payload;
    size_t len;
    int code; /* the GOAWAY error code expected */
} bad_frame;

ASBT_TEST(h2_connection_errors_send_goaway_with_the_right_code) {
    static const bad_frame bad[] = {
        {"PUSH_PROMISE", ASB__H2_PUSH_PROMISE, ASB__H2_END_HEADERS, 1, "\0\0\0\2", 4, 1},
        {"DATA on stream 0", ASB__H2_DATA, 0, 0, "x", 1, 1},
        {"HEADERS on a stream never opened", ASB__H2_HEADERS, ASB__H2_END_HEADERS, 5, "\x88", 1, 1},
        {"HEADERS on an even stream", ASB__H2_HEADERS, ASB__H2_END_HEADERS, 2, "\x88", 1, 1},
        {"SETTINGS of 5 bytes", ASB__H2_SETTINGS, 0, 0, "\0\4\0\0\0", 5, 6},
        {"SETTINGS on a stream", ASB__H2_SETTINGS, 0, 1, "", 0, 1},
        {"SETTINGS ACK with payload", ASB__H2_SETTINGS, ASB__H2_ACK, 0, "\0\4\0\0\0\0", 6, 6},
        {"window above 2^31-1", ASB__H2_SETTINGS, 0, 0, "\0\4\x80\0\0\0", 6, 3},
        {"max frame below 16384", ASB__H2_SETTINGS, 0, 0, "\0\5\0\0\0\1", 6, 1},
        {"enable push 2", ASB__H2_SETTINGS, 0, 0, "\0\2\0\0\0\2", 6, 1},
        {"PING of 7 bytes", ASB__H2_PING, 0, 0, "1234567", 7, 6},
        {"WINDOW_UPDATE of 0", ASB__H2_WINDOW_UPDATE, 0, 0, "\0\0\0\0", 4, 1},
        {"connection window overflow", ASB__H2_WINDOW_UPDATE, 0, 0, "\x7f\xff\xff\xff", 4, 3},
        {"CONTINUATION alone", ASB__H2_CONTINUATION, ASB__H2_END_HEADERS, 1, "\x88", 1, 1},
        {"padding longer than the frame", ASB__H2_DATA, ASB__H2_PADDED, 1, "\5ab", 3, 1},
        {"RST_STREAM on stream 0", ASB__H2_RST_STREAM, 0, 0, "\0\0\0\0", 4, 1},
        {"GOAWAY of 4 bytes", ASB__H2_GOAWAY, 0, 0, "\0\0\0\0", 4, 6},
        {"HPACK index 0", ASB__H2_HEADERS, ASB__H2_END_HEADERS, 1, "\x80", 1, 9},
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        asb_h2_conn *h = offline_conn(0);
        asb_h2_stream *st = asb__h2_stream_new(h, 1);
        asb_buf b;
        const unsigned char *g;
        asb_buf_init(&b, NULL);
        frame(&b, bad[i].type, bad[i].flags, bad[i].sid, bad[i].payload, bad[i].len);
        asb__h2_on_bytes(h, b.ptr, b.len);
        if (h->dead != ASB_ERR_HTTP_PROTOCOL || h->out.len < 17 || h->out.ptr[3] != ASB__H2_GOAWAY)
            fprintf(stderr, "    case: %s\n", bad[i].what);
        ASBT_EQ_RES(h->dead, ASB_ERR_HTTP_PROTOCOL);
        g = (const unsigned char *)h->out.ptr;
        ASBT_EQ_INT(g[3], ASB__H2_GOAWAY);
        if ((int)asb__h2_u32(g + 13) != bad[i].code) fprintf(stderr, "    case: %s\n", bad[i].what);
        ASBT_EQ_INT(asb__h2_u32(g + 13), bad[i].code);
        /* the stream learns it */
        ASBT_EQ_RES(asb_h2_stream_wait_headers(st, NULL), ASB_ERR_HTTP_PROTOCOL);
        asb_h2_stream_free(st);
        asb_buf_free(&b);
        asb_h2_conn_free(h);
    }
}

ASBT_TEST(h2_frame_over_our_max_frame_size_is_a_frame_size_error) {
    asb_h2_conn *h = offline_conn(0);
    unsigned char hd[9] = {0, 0x40, 0x01, 0, 0, 0, 0, 0, 1}; /* 16385 bytes of DATA */
    asb__h2_on_bytes(h, hd, 9);
    ASBT_EQ_RES(h->dead, ASB_ERR_HTTP_PROTOCOL);
    ASBT_EQ_INT(asb__h2_u32((const unsigned char *)h->out.ptr + 13), 6);
    asb_h2_conn_free(h);
}

ASBT_TEST(h2_goaway_fails_streams_above_its_last_id_only) {
    asb_h2_conn *h = offline_conn(0);
    asb_h2_stream *s1 = asb__h2_stream_new(h, 1), *s3 = asb__h2_stream_new(h, 3);
    asb_buf b;
    asb_error err;
    asb_h2_request rq;
    asb_h2_stream *s5 = NULL;
    asb_buf_init(&b, NULL);
    frame(&b, ASB__H2_GOAWAY, 0, 0, "\0\0\0\1\0\0\0\0bye", 11);
    asb__h2_on_bytes(h, b.ptr, b.len);
    ASBT_EQ_INT(h->dead, ASB_OK);
    ASBT_EQ_RES(s3->failed, ASB_ERR_CLOSED);
    ASBT_EQ_RES(s1->failed, ASB_OK);
    ASBT_CHECK(!asb_h2_conn_usable(h));
    memset(&rq, 0, sizeof rq);
    ASBT_EQ_RES(asb_h2_stream_open(h, &rq, &s5, &err), ASB_ERR_CLOSED);
    ASBT_CONTAINS(err.message, "GOAWAY");
    asb_h2_stream_free(s1);
    asb_h2_stream_free(s3);
    asb_buf_free(&b);
    asb_h2_conn_free(h);
}

ASBT_TEST(h2_peer_reset_fails_the_stream_with_its_code) {
    asb_h2_conn *h = offline_conn(0);
    asb_h2_stream *s1 = asb__h2_stream_new(h, 1);
    asb_buf b;
    asb_error err;
    asb_buf_init(&b, NULL);
    frame(&b, ASB__H2_RST_STREAM, 0, 1, "\0\0\0\x07", 4);
    asb__h2_on_bytes(h, b.ptr, b.len);
    ASBT_EQ_RES(asb_h2_stream_wait_headers(s1, &err), ASB_ERR_HTTP_PROTOCOL);
    ASBT_CONTAINS(err.message, "REFUSED_STREAM");
    asb_h2_stream_free(s1);
    asb_buf_free(&b);
    asb_h2_conn_free(h);
}

ASBT_TEST(h2_request_headers_with_uppercase_or_crlf_are_refused) {
    asb_h2_conn *h = offline_conn(0);
    asb_h2_request rq;
    asb_h2_header bad1 = {"X-Upper", "v"}, bad2 = {"x-ok", "a\r\nb"};
    asb_h2_stream *s = NULL;
    memset(&rq, 0, sizeof rq);
    rq.headers = &bad1;
    rq.header_count = 1;
    ASBT_EQ_RES(asb_h2_stream_open(h, &rq, &s, NULL), ASB_ERR_INVALID_ARGUMENT);
    rq.headers = &bad2;
    ASBT_EQ_RES(asb_h2_stream_open(h, &rq, &s, NULL), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CHECK(s == NULL);
    asb_h2_conn_free(h);
}

ASBT_TEST(process_v1_start_response_is_strict_and_its_oneof_keeps_the_last) {
    asb__pv1_event ev;
    asb_error err;
    /* stdout "hi", then exit{exit_code: 3}: the exit wins */
    ASBT_EQ_RES(asb__pv1_start_response("\x12\x02hi\x22\x02\x08\x03", 8, &ev, NULL), ASB_OK);
    ASBT_EQ_INT(ev.kind, ASB__PV1_EXIT);
    ASBT_EQ_INT(ev.value, 3);
    /* an empty ExitEvent is exit code 0; an unknown field 9 is skipped */
    ASBT_EQ_RES(asb__pv1_start_response("\x22\x00\x48\x01", 4, &ev, NULL), ASB_OK);
    ASBT_EQ_INT(ev.kind, ASB__PV1_EXIT);
    ASBT_EQ_INT(ev.value, 0);
    /* stdout as a varint, init as a varint, exit_code as bytes: refused */
    ASBT_EQ_RES(asb__pv1_start_response("\x10\x01", 2, &ev, &err), ASB_ERR_PROTOBUF_INVALID);
    ASBT_EQ_RES(asb__pv1_start_response("\x08\x01", 2, &ev, &err), ASB_ERR_PROTOBUF_INVALID);
    ASBT_EQ_RES(asb__pv1_start_response("\x22\x03\x0a\x01x", 5, &ev, &err),
                ASB_ERR_PROTOBUF_INVALID);
    /* a truncated nested message */
    ASBT_EQ_RES(asb__pv1_start_response("\x0a\x02\x08", 3, &ev, &err), ASB_ERR_PROTOBUF_INVALID);
}

ASBT_TEST(process_v1_write_stdin_eof_and_empty_input_are_both_present) {
    asb_buf b;
    asb_buf_init(&b, NULL);
    ASBT_EQ_RES(asb__pv1_write_stdin_request(&b, 7, NULL, 0, 1), ASB_OK);
    ASBT_EQ_MEM(b.ptr, b.len, "\x08\x07\x1a\x00", 4);
    b.len = 0;
    ASBT_EQ_RES(asb__pv1_write_stdin_request(&b, 7, NULL, 0, 0), ASB_OK);
    ASBT_EQ_MEM(b.ptr, b.len, "\x08\x07\x12\x00", 4);
    b.len = 0;
    ASBT_EQ_RES(asb__pv1_send_signal_request(&b, 7, 15), ASB_OK);
    ASBT_EQ_MEM(b.ptr, b.len, "\x08\x07\x10\x0f", 4);
    asb_buf_free(&b);
}

ASBT_TEST(h2_a_reader_that_never_drains_fully_keeps_the_buffer_bounded) {
    /* 16 MiB through a stream whose buffer is never empty when data
       arrives: what was read must be reclaimed, or memory grows with
       the whole transfer */
    asb_h2_conn *h = offline_conn(65536);
    asb_h2_stream *st = asb__h2_stream_new(h, 1);
    asb_buf b, blk;
    static char chunk[16384], sink[16384];
    size_t n;
    int i;
    asb_buf_init(&b, NULL);
    asb_buf_init(&blk, NULL);
    asb__hpack_encode(&blk, ":status", "200");
    frame(&b, ASB__H2_HEADERS, ASB__H2_END_HEADERS, 1, blk.ptr, blk.len);
    frame(&b, ASB__H2_DATA, 0, 1, chunk, sizeof chunk);
    asb__h2_on_bytes(h, b.ptr, b.len);
    for (i = 0; i < 1024; i++) {
        b.len = 0;
        frame(&b, ASB__H2_DATA, 0, 1, chunk, sizeof chunk);
        asb__h2_on_bytes(h, b.ptr, b.len);
        ASBT_EQ_RES(asb_h2_stream_read(st, sink, sizeof sink, &n, NULL), ASB_OK);
        ASBT_EQ_INT(n, sizeof sink);
        h->out.len = h->out_pos = 0; /* the WINDOW_UPDATEs, as if sent */
    }
    ASBT_EQ_INT(h->dead, ASB_OK);
    ASBT_CHECK(st->data.cap <= 4 * 65536);
    asb_h2_stream_free(st);
    asb_buf_free(&b);
    asb_buf_free(&blk);
    asb_h2_conn_free(h);
}

/* An HTTP/2 connection bounds unacknowledged bytes at keepalive's total
   (TCP_USER_TIMEOUT), but only once it is made: Linux applies it to the
   SYNs too, which cut a connect to a port that drops them (a full
   backlog) at 4 s, ASB_ERR_CONNECT, under a 6 s connect timeout. */
ASBT_TEST(h2_connect_waits_its_own_timeout_whatever_the_keepalive) {
#if defined(__linux__) && defined(TCP_USER_TIMEOUT)
    struct sockaddr_in a;
    char url[64];
    asb_h2_desc d;
    asb_h2_conn *h = NULL;
    asb_error err;
    int port, l = asbt_listen_loopback(0, &port), q = socket(AF_INET, SOCK_STREAM, 0);
    ASBT_CHECK(l >= 0 && q >= 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    ASBT_CHECK(connect(q, (struct sockaddr *)&a, sizeof a) == 0); /* the one the backlog takes */
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    memset(&d, 0, sizeof d);
    d.url = url;
    d.connect_timeout_ms = 6000;
    d.tcp_keepalive_s = 1; /* 1 s + 3 x 1 s */
    ASBT_EQ_RES(asb_h2_connect(&d, &h, &err), ASB_ERR_TIMEOUT);
    ASBT_CHECK(h == NULL);
    close(q);
    close(l);
#endif
}

ASBT_LIST(ASBT_CASE(hpack_decodes_rfc7541_c3_requests_without_huffman)
          ASBT_CASE(hpack_decodes_rfc7541_c4_requests_with_huffman)
          ASBT_CASE(hpack_decodes_rfc7541_c5_responses_with_eviction)
          ASBT_CASE(hpack_decodes_rfc7541_c6_huffman_responses_with_eviction)
          ASBT_CASE(hpack_refuses_malformed_blocks)
          ASBT_CASE(hpack_size_update_to_zero_empties_the_table)
          ASBT_CASE(hpack_header_list_over_the_cap_is_too_large_and_keeps_the_table)
          ASBT_CASE(hpack_encoder_output_decodes_to_the_same_fields)
    ASBT_CASE(hpack_encoder_never_indexes_authorization)
          ASBT_CASE(protobuf_writes_and_reads_a_start_request)
          ASBT_CASE(protobuf_skips_unknown_fields_of_every_wire_type)
          ASBT_CASE(protobuf_refuses_malformed_messages)
          ASBT_CASE(process_v1_start_response_is_strict_and_its_oneof_keeps_the_last)
          ASBT_CASE(process_v1_write_stdin_eof_and_empty_input_are_both_present)
          ASBT_CASE(grpc_messages_come_whole_whatever_the_chunking)
          ASBT_CASE(grpc_compressed_or_oversized_messages_are_refused)
          ASBT_CASE(grpc_declared_length_is_not_allocated_before_its_bytes_arrive)
          ASBT_CASE(grpc_message_is_percent_decoded_and_bad_escapes_kept)
          ASBT_CASE(scrub_text_keeps_utf8_and_replaces_controls_and_malformed_bytes)
          ASBT_CASE(h2_settings_and_ping_are_acknowledged)
          ASBT_CASE(h2_headers_across_continuation_with_padding_then_padded_data)
          ASBT_CASE(h2_reading_gives_the_stream_window_back_in_halves)
          ASBT_CASE(h2_a_reader_that_never_drains_fully_keeps_the_buffer_bounded)
          ASBT_CASE(h2_connection_errors_send_goaway_with_the_right_code)
          ASBT_CASE(h2_frame_over_our_max_frame_size_is_a_frame_size_error)
          ASBT_CASE(h2_goaway_fails_streams_above_its_last_id_only)
          ASBT_CASE(h2_peer_reset_fails_the_stream_with_its_code)
          ASBT_CASE(h2_request_headers_with_uppercase_or_crlf_are_refused)
          ASBT_CASE(h2_connect_waits_its_own_timeout_whatever_the_keepalive))
ASBT_MAIN()
