/* Fuzz target: the watch stream's line splitter and event decoding. The
   bytes, cut into input-chosen chunks, must give exactly the lines a
   whole-buffer split gives (partial lines kept across chunks, CRs
   stripped, empty lines skipped), and a line over the cap must be an error,
   never a truncated event. Each line then goes through the event decoder. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include "fuzz_main.h"

typedef struct got {
    asb_buf all; /* lines joined by '\n' */
    int n;
} got;

static int collect(void *ctx, const char *line, size_t len) {
    got *g = (got *)ctx;
    asb_buf_append(&g->all, line, len);
    asb_buf_append(&g->all, "\n", 1);
    g->n++;
    return 0;
}

static int on_ev(void *ud, const asb_watch_event *ev) {
    (void)ud;
    FUZZ_REQUIRE(ev->type >= ASB_WATCH_ADDED && ev->type <= ASB_WATCH_ERROR);
    FUZZ_REQUIRE(ev->object > 0 && ev->object < ev->doc->count);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const size_t cap = 256;
    asb__lines ls;
    got g;
    asb_buf want;
    size_t i = 0, start = 0;
    int too_long = 0;
    asb_result r = ASB_OK;
    if (size > 65536) return 0;
    /* reference: split the whole buffer */
    asb_buf_init(&want, NULL);
    for (i = 0; i <= size; i++) {
        if (i == size || data[i] == '\n') {
            size_t len = i - start;
            if (len > cap) too_long = 1;
            if (i < size) {
                while (len && data[start + len - 1] == '\r') len--;
                if (len && !too_long) {
                    asb_buf_append(&want, data + start, len);
                    asb_buf_append(&want, "\n", 1);
                }
            }
            start = i + 1;
        }
    }
    memset(&ls, 0, sizeof ls);
    memset(&g, 0, sizeof g);
    asb_buf_init(&ls.line, NULL);
    asb_buf_init(&g.all, NULL);
    ls.max = cap;
    ls.emit = collect;
    ls.ctx = &g;
    i = 0;
    while (i < size && r == ASB_OK) {
        size_t n = 1 + data[i] % 13;
        if (n > size - i) n = size - i;
        r = asb__lines_push(&ls, (const char *)data + i, n);
        i += n;
    }
    /* an over-long line (even an unfinished last one) fails, and the lines
       before it were delivered intact; otherwise every line arrives */
    FUZZ_REQUIRE(r == (too_long ? ASB_ERR_TOO_LARGE : ASB_OK));
    FUZZ_REQUIRE(g.all.len == want.len &&
                 (want.len == 0 || memcmp(g.all.ptr, want.ptr, want.len) == 0));
    /* every delivered line through the event decoder: no crash */
    {
        asb__watch_ctx w;
        size_t s = 0, k;
        memset(&w, 0, sizeof w);
        w.fn = on_ev;
        asb__allocator_resolve(NULL, &w.alloc);
        asb_buf_init(&w.rv, NULL);
        for (k = 0; k < g.all.len; k++) {
            if (g.all.ptr[k] == '\n') {
                asb__watch_line(&w, g.all.ptr + s, k - s);
                s = k + 1;
            }
        }
        asb_buf_free(&w.rv);
    }
    asb_buf_free(&ls.line);
    asb_buf_free(&g.all);
    asb_buf_free(&want);
    return 0;
}
