/* Fuzz target: the JSON tokenizer against jsmn and the reference validator
   (the same contract as tests/test_json_diff.c), plus resuming after
   partial text and after running out of tokens, and every getter on every
   token. Any broken property aborts, which libFuzzer reports. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include "../oracle/jsmn_oracle.h"
#include "../oracle/json_ref.h"
#include "../oracle/json_contract.h"
#include "fuzz_main.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *js = (const char *)data;
    char why[256];
    const char *bad;
    unsigned n = (unsigned)size + 2;
    asb_json_tok *whole, *part;
    asb_json_parser p;
    int r, r2;
    if (size > (1u << 20)) return 0;
    bad = check_one(js, size, why, sizeof why);
    if (bad) fprintf(stderr, "fuzz_json: %s\n", bad);
    FUZZ_REQUIRE(bad == NULL);

    whole = (asb_json_tok *)malloc(n * sizeof *whole);
    part = (asb_json_tok *)malloc(n * sizeof *part);
    r = ours(js, size, whole, n);

    /* Resuming: a prefix that is partial, continued with the whole text,
       gives exactly the one-shot result. */
    if (size > 1) {
        size_t cut = (size_t)data[0] % size;
        asb_json_init(&p);
        r2 = asb_json_parse(&p, js, cut, part, n);
        if (r2 == ASB_JSON_ERROR_PART) {
            r2 = asb_json_parse(&p, js, size, part, n);
            FUZZ_REQUIRE(r2 == r);
            if (r > 0)
                FUZZ_REQUIRE(memcmp(whole, part, (size_t)r * sizeof *part) == 0);
        } else if (r2 == ASB_JSON_ERROR_INVAL) {
            FUZZ_REQUIRE(r < 0); /* a bad prefix never becomes good */
        }
    }

    /* Running out of tokens and growing one at a time changes nothing. */
    if (r > 0) {
        unsigned cap = (unsigned)r / 2;
        asb_json_init(&p);
        while ((r2 = asb_json_parse(&p, js, size, part, cap)) ==
               ASB_JSON_ERROR_NOMEM)
            cap += 1 + cap / 4;
        FUZZ_REQUIRE(r2 == r);
        FUZZ_REQUIRE(memcmp(whole, part, (size_t)r * sizeof *part) == 0);
    }

    /* Every getter on every token: errors are fine, crashes are not; a
       decoded string written back out parses to the same bytes. */
    if (r > 0) {
        asb_json_doc doc;
        int i;
        FUZZ_REQUIRE(asb_json_doc_parse(&doc, js, size, NULL, NULL) == ASB_OK);
        FUZZ_REQUIRE(doc.count == r);
        for (i = 0; i < doc.count; i++) {
            int64_t iv;
            double dv;
            int bv, k, v;
            asb_buf s, w;
            asb_json_iter it;
            asb_json_get_int64(&doc, i, &iv);
            asb_json_get_double(&doc, i, &dv);
            asb_json_get_bool(&doc, i, &bv);
            asb_json_is_null(&doc, i);
            FUZZ_REQUIRE(asb_json_skip(&doc, i) > i);
            it = asb_json_iter_begin(&doc, i);
            while (asb_json_iter_next(&doc, &it, &k, &v)) FUZZ_REQUIRE(v > i);
            asb_buf_init(&s, NULL);
            asb_buf_init(&w, NULL);
            if (asb_json_append_string(&doc, i, &s) == ASB_OK) {
                asb_json_writer wr;
                asb_json_doc back;
                asb_buf again;
                asb_json_writer_init(&wr, &w);
                asb_json_string_n(&wr, s.ptr ? s.ptr : "", s.len);
                FUZZ_REQUIRE(asb_json_writer_finish(&wr) == ASB_OK);
                FUZZ_REQUIRE(asb_json_doc_parse(&back, w.ptr, w.len, NULL, NULL) ==
                             ASB_OK);
                asb_buf_init(&again, NULL);
                FUZZ_REQUIRE(asb_json_append_string(&back, 0, &again) == ASB_OK);
                FUZZ_REQUIRE(again.len == s.len &&
                             (s.len == 0 || memcmp(again.ptr, s.ptr, s.len) == 0));
                FUZZ_REQUIRE(asb_json_member(&doc, 0, s.ptr ? s.ptr : "", s.len) >= -1);
                asb_buf_free(&again);
                asb_json_doc_free(&back);
            }
            asb_buf_free(&s);
            asb_buf_free(&w);
        }
        /* paths made of the input's own bytes */
        {
            char path[64];
            size_t l = size < sizeof path - 1 ? size : sizeof path - 1;
            memcpy(path, js, l);
            path[l] = '\0';
            asb_json_find(&doc, 0, path);
        }
        asb_json_doc_free(&doc);
    }
    free(whole);
    free(part);
    return 0;
}
