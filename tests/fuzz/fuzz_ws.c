/* Fuzz target: the WebSocket frame reader (RFC 6455 server-to-client
   frames: lengths, fragments, control frames between them, close codes,
   UTF-8), fed in chunks whose size the first byte chooses (frames must
   survive any split). Properties: no crash or leak; every message handed
   out is within the limit (control payloads within 125 bytes), a text
   message and a close reason are UTF-8, a close code is one a peer may
   send; a refusal names its reason and one of the close codes 1002,
   1007, 1009, and the reader hands out nothing after it. The same bytes,
   in the same chunks, go to the SPDY frame parser of the port-forward
   tunnel (what the apiserver relays from the kubelet): each frame it
   hands out lies within what was buffered, its length within the 24-bit
   field and the 1 MiB limit, a control frame's stream-scoped fields
   inside its payload. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include "fuzz_main.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    asb__ws_reader r;
    size_t chunk, i;
    int failed = 0;
    if (size < 1) return 0;
    chunk = (size_t)data[0] % 64 + 1;
    data++;
    size--;
    asb__ws_reader_init(&r, NULL, 4096);
    for (i = 0; i < size && !failed; i += chunk) {
        size_t n = size - i < chunk ? size - i : chunk;
        int k, op = 0;
        asb_str pl;
        asb_buf_append(&r.in, data + i, n);
        while ((k = asb__ws_next(&r, &op, &pl)) > 0) {
            if (op == ASB_WS_TEXT || op == ASB_WS_BINARY) {
                FUZZ_REQUIRE(pl.len <= 4096);
                if (op == ASB_WS_TEXT)
                    FUZZ_REQUIRE(asb__ws_utf8_ok((const unsigned char *)pl.ptr, pl.len));
            } else {
                FUZZ_REQUIRE(op == ASB_WS_CLOSE || op == ASB_WS_PING || op == ASB_WS_PONG);
                FUZZ_REQUIRE(pl.len <= 125);
                if (op == ASB_WS_CLOSE && pl.len >= 2) {
                    FUZZ_REQUIRE(asb__ws_close_code_ok((unsigned)(unsigned char)pl.ptr[0] << 8 |
                                                       (unsigned char)pl.ptr[1]));
                    FUZZ_REQUIRE(asb__ws_utf8_ok((const unsigned char *)pl.ptr + 2, pl.len - 2));
                }
                FUZZ_REQUIRE(!(op == ASB_WS_CLOSE && pl.len == 1));
            }
        }
        if (k < 0) {
            FUZZ_REQUIRE(r.why != NULL);
            FUZZ_REQUIRE(r.close_code == 1002 || r.close_code == 1007 || r.close_code == 1009);
            failed = 1;
        }
        /* bounded buffering: a frame header plus the limit, plus a chunk */
        FUZZ_REQUIRE(r.in.len - r.pos <= 4096 + 14 + 64 || failed);
    }
    asb__ws_reader_free(&r);
    {
        asb_buf in;
        size_t pos = 0;
        int bad = 0;
        asb_buf_init(&in, NULL);
        for (i = 0; i < size && !bad; i += chunk) {
            size_t n = size - i < chunk ? size - i : chunk;
            asb__spdy_frame f;
            int k;
            FUZZ_REQUIRE(asb__spdy_feed(&in, &pos, (const char *)data + i, n) == ASB_OK);
            while ((k = asb__spdy_next_in(&in, pos, &f)) > 0) {
                FUZZ_REQUIRE(f.total == 8 + f.len);
                FUZZ_REQUIRE(f.len <= ((size_t)1 << 20));
                FUZZ_REQUIRE(pos + f.total <= in.len);
                FUZZ_REQUIRE(f.data == (const unsigned char *)in.ptr + pos + 8);
                FUZZ_REQUIRE(f.stream <= 0x7fffffffu);
                if (f.control && f.type == 3) FUZZ_REQUIRE(f.len >= 8);
                pos += f.total;
            }
            if (k < 0) bad = 1;
        }
        asb_buf_free(&in);
    }
    return 0;
}
