/* Fuzz target: the protobuf reader, walking every length-delimited field
   as a nested message (depth-capped), and the gRPC message deframer over
   the same bytes in input-chosen chunks. Properties: the reader never
   reads outside its input, a field's bytes lie inside it, a failed
   reader stays failed; the deframer delivers only whole messages within
   the cap. The process.v1 decoders (sandboxd's StartResponse and
   ExecuteResponse) read the same bytes; borrowed views stay inside. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include "fuzz_main.h"

static void walk(const uint8_t *p, size_t n, int depth) {
    asb_pb_reader r;
    asb_pb_field f;
    asb_pb_reader_init(&r, p, n);
    for (;;) {
        asb_result res = asb_pb_next(&r, &f, NULL);
        if (res != ASB_OK) {
            FUZZ_REQUIRE(asb_pb_next(&r, &f, NULL) == ASB_ERR_PROTOBUF_INVALID);
            return;
        }
        if (f.number == 0) return;
        FUZZ_REQUIRE(f.number <= 0x1fffffffu);
        if (f.wire_type == ASB_PB_LEN) {
            FUZZ_REQUIRE((const uint8_t *)f.bytes.ptr >= p &&
                         (const uint8_t *)f.bytes.ptr + f.bytes.len <= p + n);
            if (depth < 16) walk((const uint8_t *)f.bytes.ptr, f.bytes.len, depth + 1);
        } else {
            int32_t v;
            FUZZ_REQUIRE(asb_pb_int32(&f, &v) ==
                         (f.wire_type == ASB_PB_VARINT ? ASB_OK : ASB_ERR_PROTOBUF_INVALID));
        }
    }
}

static int on_msg(void *ctx, const char *m, size_t len) {
    (void)m;
    FUZZ_REQUIRE(len <= 1024);
    (*(int *)ctx)++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    asb__grpc_deframer d;
    asb_allocator a;
    size_t i, chunk;
    int count = 0;
    asb__pv1_event ev;
    asb__pv1_exec_result x;
    walk(data, size, 0);
    if (asb__pv1_start_response((const char *)data, size, &ev, NULL) == ASB_OK && ev.data.ptr)
        FUZZ_REQUIRE((const uint8_t *)ev.data.ptr >= data &&
                     (const uint8_t *)ev.data.ptr + ev.data.len <= data + size);
    if (asb__pv1_execute_response((const char *)data, size, &x, NULL) == ASB_OK && x.out.ptr)
        FUZZ_REQUIRE((const uint8_t *)x.out.ptr >= data &&
                     (const uint8_t *)x.out.ptr + x.out.len <= data + size);
    if (size < 1) return 0;
    chunk = (size_t)data[0] % 32 + 1;
    asb__allocator_resolve(NULL, &a);
    memset(&d, 0, sizeof d);
    d.max = 1024;
    asb_buf_init(&d.msg, &a);
    for (i = 1; i < size; i += chunk) {
        size_t n = size - i < chunk ? size - i : chunk;
        if (asb__grpc_feed(&d, (const char *)data + i, n, on_msg, &count) != ASB_OK) break;
    }
    asb_buf_free(&d.msg);
    return 0;
}
