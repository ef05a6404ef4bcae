/* Fuzz target: the small parsers of untrusted text in the rules layer
   (paths, base64, RFC 3339 times, labels, percent-encoding, W3C
   traceparent), each with a
   property that must hold on every input. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include "fuzz_main.h"
#include <ctype.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *s = (const char *)data;
    char out[512];
    size_t n = 0, i;
    asb_buf b, e;
    int64_t t;
    asb_error err;

    /* a normalised path is confined: no control bytes, no leading '/', no
       '.', '..' or empty segment, and normalising it again is a no-op */
    if (asb_path_normalize(s, size, out, sizeof out, &n, &err) == ASB_OK) {
        char again[512];
        size_t m = 0;
        FUZZ_REQUIRE(n > 0 && n == strlen(out) && out[0] != '/');
        for (i = 0; i < n; i++)
            FUZZ_REQUIRE((unsigned char)out[i] >= 0x20 && out[i] != 0x7f);
        FUZZ_REQUIRE(strcmp(out, "..") != 0 && strncmp(out, "../", 3) != 0 &&
                     !strstr(out, "/../") && !strstr(out, "//") &&
                     !strstr(out, "/./") && strncmp(out, "./", 2) != 0);
        FUZZ_REQUIRE(n < 3 || strcmp(out + n - 3, "/..") != 0);
        /* idempotent, except that the whitespace trim (done first, as the
           reference SDK does) can bite again when a segment after a leading
           '/' began with a space: "/ x" gives " x", then "x" */
        if (out[0] != ' ' && out[n - 1] != ' ') {
            FUZZ_REQUIRE(asb_path_normalize(out, n, again, sizeof again, &m,
                                            NULL) == ASB_OK);
            FUZZ_REQUIRE(m == n && memcmp(again, out, n) == 0);
        }
    } else {
        FUZZ_REQUIRE(err.message[0] != '\0');
    }

    /* base64: what decodes re-encodes to the input minus line breaks */
    asb_buf_init(&b, NULL);
    asb_buf_init(&e, NULL);
    if (asb_base64_decode(s, size, &b, NULL) == ASB_OK) {
        asb_buf stripped;
        asb_buf_init(&stripped, NULL);
        for (i = 0; i < size; i++)
            if (s[i] != '\r' && s[i] != '\n') asb_buf_append(&stripped, s + i, 1);
        FUZZ_REQUIRE(asb_base64_encode(b.ptr, b.len, &e) == ASB_OK);
        FUZZ_REQUIRE(e.len == stripped.len &&
                     (e.len == 0 || memcmp(e.ptr, stripped.ptr, e.len) == 0));
        asb_buf_free(&stripped);
    }
    asb_buf_free(&b);
    asb_buf_free(&e);

    /* times: a parsed time formats to a canonical form that parses back */
    if (asb_time_parse_rfc3339(s, size, &t, NULL) == ASB_OK) {
        char f[ASB_TIME_SIZE];
        int64_t t2 = 0;
        if (asb_time_format_rfc3339(t, f) == ASB_OK) {
            FUZZ_REQUIRE(asb_time_parse_rfc3339(f, 20, &t2, NULL) == ASB_OK);
            FUZZ_REQUIRE(t2 == t);
        }
    }

    /* labels: an accepted key or value is made of the allowed bytes only */
    if (asb_label_validate_value(s, size, NULL) == ASB_OK) {
        FUZZ_REQUIRE(size <= 63);
        for (i = 0; i < size; i++)
            FUZZ_REQUIRE(isalnum((unsigned char)s[i]) || s[i] == '-' ||
                         s[i] == '_' || s[i] == '.');
    }
    if (asb_label_validate_key(s, size, NULL) == ASB_OK) {
        FUZZ_REQUIRE(size > 0 && size <= 253 + 1 + 63);
        for (i = 0; i < size; i++)
            FUZZ_REQUIRE(isalnum((unsigned char)s[i]) || s[i] == '-' ||
                         s[i] == '_' || s[i] == '.' || s[i] == '/');
    }
    if (asb_dns_label_validate(s, size, NULL) == ASB_OK) FUZZ_REQUIRE(size <= 63);

    /* percent-encoding: only unreserved bytes and %XX remain */
    asb_buf_init(&b, NULL);
    FUZZ_REQUIRE(asb_percent_encode_segment(s, size, &b) == ASB_OK);
    for (i = 0; i < b.len; i++) {
        unsigned char c = (unsigned char)b.ptr[i];
        FUZZ_REQUIRE(isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
                     c == '%' || (i >= 1 && b.ptr[i - 1] == '%') ||
                     (i >= 2 && b.ptr[i - 2] == '%'));
    }
    FUZZ_REQUIRE(strcmp(b.ptr ? b.ptr : "", ".") != 0 &&
                 strcmp(b.ptr ? b.ptr : "", "..") != 0);
    asb_buf_free(&b);

    /* traceparent: an accepted value has non-zero ids, formats back to
       its own first 55 bytes (version 00 exactly them, no more) */
    {
        asb_trace_context ctx, again;
        char tp[ASB_TRACEPARENT_SIZE];
        if (asb_traceparent_parse(s, size, &ctx, &err) == ASB_OK) {
            FUZZ_REQUIRE(size >= 55);
            asb_traceparent_format(&ctx, tp);
            FUZZ_REQUIRE(memcmp(tp + 2, s + 2, 53) == 0);
            FUZZ_REQUIRE(s[0] != '0' || s[1] != '0' || size == 55);
            FUZZ_REQUIRE(asb_traceparent_parse(tp, 55, &again, NULL) == ASB_OK &&
                         memcmp(&again, &ctx, sizeof ctx) == 0);
        } else {
            FUZZ_REQUIRE(strncmp(err.message, "traceparent: ", 13) == 0);
        }
    }
    return 0;
}
