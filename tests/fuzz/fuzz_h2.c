/* Fuzz target: the HTTP/2 frame reader with its HPACK decoder and stream
   state, fed from a connection without a socket. The first byte chooses
   the chunk size (frames must survive any split); two streams are open
   and read as data arrives, so windows, resets, GOAWAY and header blocks
   all meet arbitrary input. Properties: no crash or leak, a dead
   connection has queued GOAWAY or nothing, a stream never buffers more
   than its window. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include "fuzz_main.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    asb_h2_desc d;
    asb_allocator a;
    asb_h2_conn *h;
    asb_h2_stream *s[2];
    size_t chunk, i, k;
    char buf[4096];
    if (size < 1) return 0;
    chunk = (size_t)data[0] % 64 + 1;
    data++;
    size--;
    memset(&d, 0, sizeof d);
    d.stream_window = 65535;
    d.max_header_list_bytes = 2048;
    asb__allocator_resolve(NULL, &a);
    if (asb__h2_conn_new(&d, &a, &h) != ASB_OK) return 0;
    s[0] = asb__h2_stream_new(h, 1);
    s[1] = asb__h2_stream_new(h, 3);
    h->next_id = 5;
    for (i = 0; i < size; i += chunk) {
        size_t n = size - i < chunk ? size - i : chunk;
        asb__h2_on_bytes(h, data + i, n);
        for (k = 0; k < 2; k++) {
            size_t got = 0;
            asb_str v;
            FUZZ_REQUIRE(s[k]->data.len - s[k]->data_pos <= 65535);
            asb_h2_stream_header(s[k], "content-type", &v);
            asb_h2_stream_trailer(s[k], "grpc-status", &v);
            if (s[k]->data.len > s[k]->data_pos)
                asb_h2_stream_read(s[k], buf, sizeof buf, &got, NULL);
        }
        h->out.len = h->out_pos = 0;
    }
    if (h->dead == ASB_ERR_HTTP_PROTOCOL) FUZZ_REQUIRE(h->dead_msg[0] != '\0');
    asb_h2_stream_free(s[0]);
    asb_h2_stream_free(s[1]);
    asb_h2_conn_free(h);
    return 0;
}
