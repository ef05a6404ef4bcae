/* Fuzz target: the HPACK decoder alone, several header blocks through one
   dynamic table (the input is split at 0xff 0x00 pairs). Properties: no
   crash or leak, the table's size never exceeds its limit, and a block
   that decodes is emitted within the header list cap. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include "fuzz_main.h"

static asb_result count_fields(void *ctx, const char *n, size_t nl, const char *v, size_t vl) {
    size_t *total = (size_t *)ctx;
    (void)n;
    (void)v;
    *total += nl + vl + 32;
    return ASB_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    asb__hpack_dec d;
    asb_allocator a;
    size_t start = 0, i;
    asb__allocator_resolve(NULL, &a);
    if (asb__hpack_dec_init(&d, &a, 256) != ASB_OK) return 0;
    for (i = 0; i <= size; i++) {
        if (i == size || (i + 1 < size && data[i] == 0xff && data[i + 1] == 0x00)) {
            const char *why;
            size_t total = 0;
            asb_result r = asb__hpack_decode(&d, data + start, i - start, 1024, count_fields,
                                             &total, &why);
            FUZZ_REQUIRE(d.size <= d.max_size && d.max_size <= 256);
            if (r == ASB_OK) FUZZ_REQUIRE(total <= 1024);
            if (r == ASB_ERR_HTTP_PROTOCOL) {
                FUZZ_REQUIRE(why != NULL);
                break; /* a compression error ends the connection */
            }
            start = i + 2;
            i++;
        }
    }
    asb__hpack_dec_free(&d);
    return 0;
}
