/* JSON: tokenizer, documents, lookup, getters and writer. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include "asbtest.h"

#define N_TOK 256

static int parse_all(const char *js, asb_json_tok *t, unsigned n) {
    asb_json_parser p;
    asb_json_init(&p);
    return asb_json_parse(&p, js, strlen(js), t, n);
}

ASBT_TEST(object_tokens_match_jsmn_model) {
    asb_json_tok t[N_TOK];
    const char *js = "{\"a\": [1, \"x\", {}], \"b\": null}";
    ASBT_EQ_INT(parse_all(js, t, N_TOK), 8);
    ASBT_EQ_INT(t[0].type, ASB_JSON_OBJECT);
    ASBT_EQ_INT(t[0].start, 0);
    ASBT_EQ_INT(t[0].end, (int)strlen(js));
    ASBT_EQ_INT(t[0].size, 2);
    ASBT_EQ_INT(t[0].parent, -1);
    ASBT_EQ_INT(t[1].type, ASB_JSON_STRING); /* "a": quotes excluded */
    ASBT_EQ_INT(t[1].start, 2);
    ASBT_EQ_INT(t[1].end, 3);
    ASBT_EQ_INT(t[1].size, 1);
    ASBT_EQ_INT(t[1].parent, 0);
    ASBT_EQ_INT(t[2].type, ASB_JSON_ARRAY);
    ASBT_EQ_INT(t[2].size, 3);
    ASBT_EQ_INT(t[2].parent, 1); /* a member's value hangs off its key */
    ASBT_EQ_INT(t[3].type, ASB_JSON_PRIMITIVE);
    ASBT_EQ_INT(t[3].parent, 2);
    ASBT_EQ_INT(t[5].type, ASB_JSON_OBJECT);
    ASBT_EQ_INT(t[5].size, 0);
    ASBT_EQ_INT(t[5].end - t[5].start, 2);
    ASBT_EQ_INT(t[6].parent, 0);
    ASBT_EQ_INT(t[7].start, (int)(strstr(js, "null") - js));
    ASBT_EQ_INT(t[7].end, t[7].start + 4);
}

ASBT_TEST(valid_rfc8259_documents_are_accepted) {
    static const char *ok[] = {
        "{}", "[]", "0", "-0", "1.5e+10", "-0.0E-0", "\"\"", "true", "false",
        "null", " \t\r\n[ 1 , 2 ]\n", "\"\\u00e9\\ud83d\\ude00\\/\\b\\f\"",
        "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"", "[[[[[]]]]]",
        "{\"\":\"\"}", "{\"a\":{\"b\":{\"c\":[true,false,null]}}}",
        "\"\\ud800\"", /* the grammar allows an unpaired surrogate escape */
        "\"\x7f\"", "123456789012345678901234567890", "1E400",
    };
    size_t i;
    asb_json_tok t[N_TOK];
    for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int r = parse_all(ok[i], t, N_TOK);
        if (r <= 0) fprintf(stderr, "    input: %s\n", ok[i]);
        ASBT_CHECK(r > 0);
    }
}

ASBT_TEST(everything_rfc8259_forbids_is_rejected) {
    static const char *bad[] = {
        "[1,]", "{\"a\":1,}", "[,1]", "[1,,2]", "{,}", "[1 2]",
        "{\"a\" 1}", "{\"a\":}", "{a:1}", "{'a':1}", "{1:1}", "{true:1}",
        "{\"a\":1 \"b\":2}", "01", "-01", "[1.]", ".5", "+1", "[1e]", "[1e+]",
        "[-]", "--1", "0x10", "1.2.3", "NaN", "Infinity", "-Infinity", "[tru]",
        "[nul]", "truex", "nulll", "True", "[1]]", "{}}", "]", "}", ":", ",",
        "\"\\x41\"", "\"\\u12G4\"", "\"\\U0041\"", "\"\\'\"",
        "\"a\tb\"", "\"a\nb\"", "\"\x01\"", "\"\xff\"", "\"\xc0\xaf\"",
        "\"\xe0\x80\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
        "\"\xc3\"x", "1 2", "{} {}", "[] x", "\"a\" \"b\"", "[\x0c]",
        "[1]\x00", "\xef\xbb\xbf{}", "[\"a\":1]", "{\"a\":1:2}",
        "[1,{\"a\":[}]]", "{\"a\"}", "/*c*/1", "[1]//",
    };
    size_t i;
    asb_json_tok t[N_TOK];
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        asb_json_parser p;
        int r;
        size_t len = strlen(bad[i]);
        if (strcmp(bad[i], "[1]") == 0) len = 4; /* "[1]\0": NUL after */
        asb_json_init(&p);
        r = asb_json_parse(&p, bad[i], len, t, N_TOK);
        if (r != ASB_JSON_ERROR_INVAL) fprintf(stderr, "    input #%zu: %s\n", i, bad[i]);
        ASBT_EQ_INT(r, ASB_JSON_ERROR_INVAL);
    }
}

ASBT_TEST(truncated_documents_are_partial) {
    static const char *part[] = {"", "  ", "{", "[1,", "{\"a\"", "{\"a\":",
                                 "\"abc", "\"a\\", "\"\\u12", "[tr", "[1",
                                 "-", "1.", "1e", "\"\xe2\x82", "[[[]]"};
    size_t i;
    asb_json_tok t[N_TOK];
    for (i = 0; i < sizeof part / sizeof part[0]; i++) {
        int r = parse_all(part[i], t, N_TOK);
        if (r != ASB_JSON_ERROR_PART) fprintf(stderr, "    input: %s\n", part[i]);
        ASBT_EQ_INT(r, ASB_JSON_ERROR_PART);
    }
}

ASBT_TEST(parse_resumes_after_more_text_arrives) {
    const char *js = "{\"items\": [{\"n\": 12345, \"s\": \"h\\u00e9llo\"}, true]}";
    size_t len = strlen(js), cut;
    asb_json_tok whole[N_TOK], part[N_TOK];
    int n = parse_all(js, whole, N_TOK);
    ASBT_CHECK(n > 0);
    for (cut = 0; cut < len; cut++) {
        asb_json_parser p;
        int r;
        asb_json_init(&p);
        r = asb_json_parse(&p, js, cut, part, N_TOK);
        ASBT_EQ_INT(r, ASB_JSON_ERROR_PART);
        r = asb_json_parse(&p, js, len, part, N_TOK);
        ASBT_EQ_INT(r, n);
        ASBT_CHECK(memcmp(whole, part, (size_t)n * sizeof whole[0]) == 0);
    }
}

ASBT_TEST(parse_resumes_after_tokens_grow) {
    const char *js = "[{\"a\":[1,2,3]},\"x\",{\"b\":{\"c\":null}},[[]]]";
    asb_json_tok whole[N_TOK], grown[N_TOK];
    int n = parse_all(js, whole, N_TOK);
    unsigned cap = 1;
    asb_json_parser p;
    int r;
    asb_json_init(&p);
    while ((r = asb_json_parse(&p, js, strlen(js), grown, cap)) ==
           ASB_JSON_ERROR_NOMEM)
        cap++;
    ASBT_EQ_INT(r, n);
    ASBT_EQ_INT(cap, (unsigned)n);
    ASBT_CHECK(memcmp(whole, grown, (size_t)n * sizeof whole[0]) == 0);
}

ASBT_TEST(counting_mode_validates_and_counts) {
    asb_json_parser p;
    const char *js = "{\"a\":[1,{\"b\":2}],\"c\":\"d\"}";
    asb_json_init(&p);
    ASBT_EQ_INT(asb_json_parse(&p, js, strlen(js), NULL, 0), 9);
    asb_json_init(&p);
    ASBT_EQ_INT(asb_json_parse(&p, "[1,]", 4, NULL, 0), ASB_JSON_ERROR_INVAL);
    asb_json_init(&p);
    ASBT_EQ_INT(asb_json_parse(&p, "{\"a\":[1}", 8, NULL, 0),
                ASB_JSON_ERROR_INVAL);
}

ASBT_TEST(nesting_deeper_than_the_limit_is_rejected) {
    char *deep = (char *)malloc(2 * ASB_JSON_MAX_DEPTH + 4);
    asb_json_parser p;
    int i;
    for (i = 0; i < ASB_JSON_MAX_DEPTH; i++) {
        deep[i] = '[';
        deep[ASB_JSON_MAX_DEPTH + i] = ']';
    }
    asb_json_init(&p);
    ASBT_EQ_INT(asb_json_parse(&p, deep, 2 * ASB_JSON_MAX_DEPTH, NULL, 0),
                ASB_JSON_MAX_DEPTH);
    memmove(deep + 1, deep, 2 * ASB_JSON_MAX_DEPTH);
    deep[2 * ASB_JSON_MAX_DEPTH + 1] = ']';
    asb_json_init(&p);
    ASBT_EQ_INT(asb_json_parse(&p, deep, 2 * ASB_JSON_MAX_DEPTH + 2, NULL, 0),
                ASB_JSON_ERROR_INVAL);
    free(deep);
}

ASBT_TEST(doc_parse_reports_line_and_column) {
    asb_json_doc doc;
    asb_error err;
    const char *js = "{\n  \"a\": 1,\n  \"b\": 01\n}";
    ASBT_EQ_RES(asb_json_doc_parse(&doc, js, strlen(js), NULL, &err),
                ASB_ERR_JSON_INVALID);
    ASBT_EQ_RES(err.code, ASB_ERR_JSON_INVALID);
    ASBT_CONTAINS(err.message, "line 3, column 8");
    ASBT_EQ_RES(asb_json_doc_parse(&doc, "[1", 2, NULL, &err),
                ASB_ERR_JSON_INVALID);
    ASBT_CONTAINS(err.message, "unexpected end");
}

ASBT_TEST(doc_parse_uses_only_the_given_allocator) {
    asbt_heap h;
    asb_allocator a = asbt_heap_allocator(&h);
    asb_json_doc doc;
    asb_buf big;
    int i;
    ASBT_EQ_RES(asb_buf_init(&big, &a), ASB_OK);
    ASBT_EQ_RES(asb_buf_append(&big, "[", 1), ASB_OK);
    for (i = 0; i < 5000; i++)
        ASBT_EQ_RES(asb_buf_append(&big, i ? ",{\"k\":[1,2]}" : "{\"k\":[1,2]}",
                                   i ? 12u : 11u),
                    ASB_OK);
    ASBT_EQ_RES(asb_buf_append(&big, "]", 1), ASB_OK);
    if (1 + 5000 * 5 > ASB_JSON_MAX_DOC_TOKENS) {
        /* built with a tiny token limit: the limit is an error, not a leak */
        asb_error err;
        asb_result r = asb_json_doc_parse(&doc, big.ptr, big.len, &a, &err);
        asb_buf_free(&big);
        ASBT_EQ_RES(r, ASB_ERR_TOO_LARGE);
        ASBT_CONTAINS(err.message, "more than");
        ASBT_EQ_INT(h.live, 0);
        return;
    }
    ASBT_EQ_RES(asb_json_doc_parse(&doc, big.ptr, big.len, &a, NULL), ASB_OK);
    ASBT_EQ_INT(doc.count, 1 + 5000 * 5);
    ASBT_CHECK(h.total >= 2);
    asb_json_doc_free(&doc);
    asb_buf_free(&big);
    ASBT_EQ_INT(h.live, 0);
}

ASBT_TEST(half_an_allocator_is_refused) {
    asb_allocator a;
    asb_buf b;
    asb_json_doc doc;
    asb_error err;
    memset(&a, 0, sizeof a);
    a.alloc_fn = asbt_heap_alloc;
    ASBT_EQ_RES(asb_buf_init(&b, &a), ASB_ERR_INVALID_ARGUMENT);
    ASBT_EQ_RES(asb_json_doc_parse(&doc, "1", 1, &a, &err),
                ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "allocator");
}

ASBT_TEST(doc_parse_survives_allocation_failure) {
    asbt_heap h;
    asb_allocator a = asbt_heap_allocator(&h);
    asb_json_doc doc;
    h.fail_after = 1;
    ASBT_EQ_RES(asb_json_doc_parse(&doc, "[1,2]", 5, &a, NULL),
                ASB_ERR_OUT_OF_MEMORY);
    ASBT_EQ_INT(h.live, 0);
}

static const char *k8s_doc =
    "{\"kind\":\"SandboxClaimList\",\"items\":["
    "{\"metadata\":{\"name\":\"c1\",\"annotations\":{\"agents.x-k8s.io/"
    "pod-name\":\"pod-1\"}},\"status\":{\"sandbox\":{\"name\":\"sb-1\"}}},"
    "{\"metadata\":{\"name\":\"c2\"},\"status\":{\"conditions\":[{\"type\":"
    "\"Ready\",\"status\":\"False\",\"reason\":\"TemplateNotFound\"}]}}],"
    "\"metadata\":{\"continue\":\"\",\"resourceVersion\":\"42\"}}";

ASBT_TEST(find_follows_dotted_and_bracket_paths) {
    asb_json_doc doc;
    char s[64];
    int t;
    ASBT_EQ_RES(asb_json_doc_parse(&doc, k8s_doc, strlen(k8s_doc), NULL, NULL),
                ASB_OK);
    t = asb_json_find(&doc, 0, "items.0.status.sandbox.name");
    ASBT_CHECK(t > 0);
    ASBT_EQ_RES(asb_json_get_string(&doc, t, s, sizeof s, NULL), ASB_OK);
    ASBT_EQ_STR(s, "sb-1");
    ASBT_EQ_INT(asb_json_find(&doc, 0, "items[1].status.conditions[0].reason"),
                asb_json_find(&doc, 0, "items.1.status.conditions.0.reason"));
    t = asb_json_find(&doc, 0, "items[1].status.conditions[0].reason");
    ASBT_CHECK(asb_json_string_eq(&doc, t, "TemplateNotFound", 16));
    t = asb_json_find(&doc, 0,
                      "items.0.metadata.annotations.agents\\.x-k8s\\.io/pod-name");
    ASBT_CHECK(asb_json_string_eq(&doc, t, "pod-1", 5));
    t = asb_json_find(&doc, 0, "metadata.resourceVersion");
    ASBT_CHECK(asb_json_string_eq(&doc, t, "42", 2));
    ASBT_EQ_INT(asb_json_find(&doc, 0, ""), 0);
    ASBT_EQ_INT(asb_json_find(&doc, 0, "items.2"), -1);
    ASBT_EQ_INT(asb_json_find(&doc, 0, "items.x"), -1);
    ASBT_EQ_INT(asb_json_find(&doc, 0, "items.-1"), -1);
    ASBT_EQ_INT(asb_json_find(&doc, 0, "kind.x"), -1);
    ASBT_EQ_INT(asb_json_find(&doc, 0, "nope"), -1);
    ASBT_EQ_INT(asb_json_find(&doc, 0, "items."), -1);
    ASBT_EQ_INT(asb_json_find(&doc, 0, "items[0"), -1);
    ASBT_EQ_INT(asb_json_find(&doc, 0, "[0]"), -1);
    /* relative lookups from a subtree */
    t = asb_json_find(&doc, 0, "items.1");
    ASBT_EQ_INT(asb_json_find(&doc, t, "metadata.name"),
                asb_json_find(&doc, 0, "items.1.metadata.name"));
    asb_json_doc_free(&doc);
}

ASBT_TEST(member_compares_keys_after_unescaping) {
    const char *js = "{\"a\\u0062c\":1,\"a\\\"q\":2,\"\\ud83d\\ude00\":3}";
    asb_json_doc doc;
    int64_t v = 0;
    ASBT_EQ_RES(asb_json_doc_parse(&doc, js, strlen(js), NULL, NULL), ASB_OK);
    ASBT_EQ_RES(asb_json_get_int64(&doc, asb_json_member(&doc, 0, "abc", 3), &v),
                ASB_OK);
    ASBT_EQ_INT(v, 1);
    ASBT_EQ_RES(asb_json_get_int64(&doc, asb_json_member(&doc, 0, "a\"q", 3), &v),
                ASB_OK);
    ASBT_EQ_INT(v, 2);
    ASBT_EQ_RES(asb_json_get_int64(
                    &doc, asb_json_member(&doc, 0, "\xf0\x9f\x98\x80", 4), &v),
                ASB_OK);
    ASBT_EQ_INT(v, 3);
    ASBT_EQ_INT(asb_json_member(&doc, 0, "ab", 2), -1);
    ASBT_EQ_INT(asb_json_member(&doc, 1, "abc", 3), -1); /* not an object */
    asb_json_doc_free(&doc);
}

ASBT_TEST(iteration_visits_members_and_elements_in_order) {
    const char *js = "{\"a\":[1,[2,3],{\"x\":4}],\"b\":{},\"c\":\"s\"}";
    asb_json_doc doc;
    asb_json_iter it;
    int k, v, n = 0;
    ASBT_EQ_RES(asb_json_doc_parse(&doc, js, strlen(js), NULL, NULL), ASB_OK);
    it = asb_json_iter_begin(&doc, 0);
    while (asb_json_iter_next(&doc, &it, &k, &v)) {
        static const char *keys[] = {"a", "b", "c"};
        ASBT_CHECK(n < 3);
        ASBT_CHECK(asb_json_string_eq(&doc, k, keys[n], 1));
        ASBT_EQ_INT(doc.toks[v].parent, k);
        n++;
    }
    ASBT_EQ_INT(n, 3);
    n = 0;
    it = asb_json_iter_begin(&doc, asb_json_find(&doc, 0, "a"));
    while (asb_json_iter_next(&doc, &it, &k, &v)) {
        static const asb_json_type types[] = {ASB_JSON_PRIMITIVE, ASB_JSON_ARRAY,
                                              ASB_JSON_OBJECT};
        ASBT_EQ_INT(k, -1);
        ASBT_EQ_INT(doc.toks[v].type, types[n]);
        n++;
    }
    ASBT_EQ_INT(n, 3);
    it = asb_json_iter_begin(&doc, asb_json_find(&doc, 0, "c"));
    ASBT_EQ_INT(asb_json_iter_next(&doc, &it, &k, &v), 0);
    asb_json_doc_free(&doc);
}

ASBT_TEST(get_string_unescapes_everything) {
    const char *js = "[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\", \"\\u00e9\\u20ac\", "
                     "\"\\ud83d\\ude00\", \"a\\u0000b\", \"\\ud800x\", "
                     "\"\\udc00\", \"long enough to not fit\"]";
    asb_json_doc doc;
    char s[16];
    size_t n = 0;
    asb_buf b;
    ASBT_EQ_RES(asb_json_doc_parse(&doc, js, strlen(js), NULL, NULL), ASB_OK);
    ASBT_EQ_RES(asb_json_get_string(&doc, 1, s, sizeof s, &n), ASB_OK);
    ASBT_EQ_MEM(s, n, "\"\\/\b\f\n\r\t", 8);
    ASBT_EQ_RES(asb_json_get_string(&doc, 2, s, sizeof s, &n), ASB_OK);
    ASBT_EQ_MEM(s, n, "\xc3\xa9\xe2\x82\xac", 5);
    ASBT_EQ_RES(asb_json_get_string(&doc, 3, s, sizeof s, &n), ASB_OK);
    ASBT_EQ_MEM(s, n, "\xf0\x9f\x98\x80", 4);
    ASBT_EQ_RES(asb_json_get_string(&doc, 4, s, sizeof s, &n), ASB_OK);
    ASBT_EQ_MEM(s, n, "a\0b", 3); /* binary-safe: the length tells */
    ASBT_EQ_RES(asb_json_get_string(&doc, 5, s, sizeof s, &n),
                ASB_ERR_JSON_INVALID);
    ASBT_EQ_RES(asb_json_get_string(&doc, 6, s, sizeof s, &n),
                ASB_ERR_JSON_INVALID);
    ASBT_EQ_RES(asb_json_get_string(&doc, 7, s, sizeof s, &n), ASB_ERR_TOO_LARGE);
    ASBT_EQ_INT(n, 22);
    ASBT_EQ_INT(s[15], 0);
    ASBT_EQ_RES(asb_json_get_string(&doc, 0, s, sizeof s, &n), ASB_ERR_JSON_TYPE);
    ASBT_EQ_RES(asb_json_get_string(&doc, 99, s, sizeof s, &n),
                ASB_ERR_INVALID_ARGUMENT);
    asb_buf_init(&b, NULL);
    ASBT_EQ_RES(asb_json_append_string(&doc, 7, &b), ASB_OK);
    ASBT_EQ_STR(b.ptr, "long enough to not fit");
    ASBT_EQ_RES(asb_json_append_string(&doc, 5, &b), ASB_ERR_JSON_INVALID);
    ASBT_EQ_INT(b.len, 22); /* nothing half-appended */
    asb_buf_free(&b);
    asb_json_doc_free(&doc);
}

ASBT_TEST(get_int64_detects_overflow_and_fractions) {
    const char *js = "[9223372036854775807, -9223372036854775808, "
                     "9223372036854775808, -9223372036854775809, 1.0, 1e3, "
                     "\"7\", -0, 99999999999999999999999]";
    asb_json_doc doc;
    int64_t v = 0;
    ASBT_EQ_RES(asb_json_doc_parse(&doc, js, strlen(js), NULL, NULL), ASB_OK);
    ASBT_EQ_RES(asb_json_get_int64(&doc, 1, &v), ASB_OK);
    ASBT_EQ_INT(v, INT64_MAX);
    ASBT_EQ_RES(asb_json_get_int64(&doc, 2, &v), ASB_OK);
    ASBT_CHECK(v == INT64_MIN);
    ASBT_EQ_RES(asb_json_get_int64(&doc, 3, &v), ASB_ERR_JSON_RANGE);
    ASBT_EQ_RES(asb_json_get_int64(&doc, 4, &v), ASB_ERR_JSON_RANGE);
    ASBT_EQ_RES(asb_json_get_int64(&doc, 5, &v), ASB_ERR_JSON_TYPE);
    ASBT_EQ_RES(asb_json_get_int64(&doc, 6, &v), ASB_ERR_JSON_TYPE);
    ASBT_EQ_RES(asb_json_get_int64(&doc, 7, &v), ASB_ERR_JSON_TYPE);
    ASBT_EQ_RES(asb_json_get_int64(&doc, 8, &v), ASB_OK);
    ASBT_EQ_INT(v, 0);
    ASBT_EQ_RES(asb_json_get_int64(&doc, 9, &v), ASB_ERR_JSON_RANGE);
    asb_json_doc_free(&doc);
}

ASBT_TEST(get_double_reads_numbers_in_any_locale) {
    const char *js = "[1.5, -2.25e-3, 1E400, 4.9e-324, 17, true]";
    asb_json_doc doc;
    double d = 0;
    int b = 0;
    /* A locale with a decimal comma, when the machine has one: the parse
       must not change. The Makefile generates de_DE for this test. */
    const char *loc = setlocale(LC_NUMERIC, "de_DE.UTF-8");
#if defined(__GLIBC__)
    /* musl accepts the name but always formats with '.': no comma there */
    if (loc) ASBT_EQ_STR(localeconv()->decimal_point, ",");
#endif
    ASBT_EQ_RES(asb_json_doc_parse(&doc, js, strlen(js), NULL, NULL), ASB_OK);
    ASBT_EQ_RES(asb_json_get_double(&doc, 1, &d), ASB_OK);
    ASBT_EQ_DBL(d, 1.5);
    ASBT_EQ_RES(asb_json_get_double(&doc, 2, &d), ASB_OK);
    ASBT_EQ_DBL(d, -2.25e-3);
    ASBT_EQ_RES(asb_json_get_double(&doc, 3, &d), ASB_ERR_JSON_RANGE);
    ASBT_EQ_RES(asb_json_get_double(&doc, 4, &d), ASB_OK);
    ASBT_CHECK(d > 0);
    ASBT_EQ_RES(asb_json_get_double(&doc, 5, &d), ASB_OK);
    ASBT_EQ_DBL(d, 17.0);
    ASBT_EQ_RES(asb_json_get_double(&doc, 6, &d), ASB_ERR_JSON_TYPE);
    ASBT_EQ_RES(asb_json_get_bool(&doc, 6, &b), ASB_OK);
    ASBT_EQ_INT(b, 1);
    ASBT_EQ_RES(asb_json_get_bool(&doc, 5, &b), ASB_ERR_JSON_TYPE);
    setlocale(LC_NUMERIC, "C");
    asb_json_doc_free(&doc);
    ASBT_CHECK(getenv("ASBT_REQUIRE_LOCALE") == NULL || loc != NULL);
}

ASBT_TEST(null_is_told_apart_from_other_primitives) {
    asb_json_doc doc;
    ASBT_EQ_RES(asb_json_doc_parse(&doc, "[null,0,\"null\"]", 15, NULL, NULL),
                ASB_OK);
    ASBT_CHECK(asb_json_is_null(&doc, 1));
    ASBT_CHECK(!asb_json_is_null(&doc, 2));
    ASBT_CHECK(!asb_json_is_null(&doc, 3));
    asb_json_doc_free(&doc);
}

ASBT_TEST(writer_builds_a_claim_manifest) {
    asb_buf b;
    asb_json_writer w;
    asb_buf_init(&b, NULL);
    asb_json_writer_init(&w, &b);
    asb_json_object_begin(&w);
    asb_json_key(&w, "apiVersion");
    asb_json_string(&w, "extensions.agents.x-k8s.io/v1alpha1");
    asb_json_key(&w, "metadata");
    asb_json_object_begin(&w);
    asb_json_key(&w, "labels");
    asb_json_object_begin(&w);
    asb_json_object_end(&w);
    asb_json_object_end(&w);
    asb_json_key(&w, "n");
    asb_json_array_begin(&w);
    asb_json_int64(&w, INT64_MIN);
    asb_json_double(&w, 0.1);
    asb_json_bool(&w, 0);
    asb_json_null(&w);
    asb_json_array_end(&w);
    asb_json_object_end(&w);
    ASBT_EQ_RES(asb_json_writer_finish(&w), ASB_OK);
    ASBT_EQ_STR(b.ptr, "{\"apiVersion\":\"extensions.agents.x-k8s.io/v1alpha1\","
                       "\"metadata\":{\"labels\":{}},\"n\":[-9223372036854775808,"
                       "0.1,false,null]}");
    asb_buf_free(&b);
}

ASBT_TEST(writer_escapes_controls_and_round_trips_every_byte) {
    char all[256];
    asb_buf b;
    asb_json_writer w;
    asb_json_doc doc;
    char back[512];
    size_t n = 0;
    int i;
    for (i = 0; i < 128; i++) all[i] = (char)i;
    asb_buf_init(&b, NULL);
    asb_json_writer_init(&w, &b);
    asb_json_string_n(&w, all, 128);
    ASBT_EQ_RES(asb_json_writer_finish(&w), ASB_OK);
    ASBT_CHECK(strstr(b.ptr, "\\u001f") && strstr(b.ptr, "\\n") &&
               strstr(b.ptr, "\\\"") && strstr(b.ptr, "\\\\"));
    ASBT_EQ_RES(asb_json_doc_parse(&doc, b.ptr, b.len, NULL, NULL), ASB_OK);
    ASBT_EQ_RES(asb_json_get_string(&doc, 0, back, sizeof back, &n), ASB_OK);
    ASBT_EQ_MEM(back, n, all, 128);
    asb_json_doc_free(&doc);
    asb_buf_free(&b);
}

ASBT_TEST(writer_refuses_or_replaces_invalid_utf8) {
    asb_buf b;
    asb_json_writer w;
    asb_buf_init(&b, NULL);
    asb_json_writer_init(&w, &b);
    asb_json_string(&w, "ok \xc3\xa9 bad \xff \xed\xa0\x80");
    ASBT_EQ_RES(asb_json_writer_finish(&w), ASB_ERR_INVALID_ARGUMENT);
    b.len = 0;
    asb_json_writer_init(&w, &b);
    w.replace_invalid_utf8 = 1;
    asb_json_string(&w, "ok \xc3\xa9 bad \xff!");
    ASBT_EQ_RES(asb_json_writer_finish(&w), ASB_OK);
    ASBT_EQ_STR(b.ptr, "\"ok \xc3\xa9 bad \xef\xbf\xbd!\"");
    asb_buf_free(&b);
}

ASBT_TEST(writer_misuse_is_a_sticky_error) {
    asb_buf b;
    asb_json_writer w;
    asb_buf_init(&b, NULL);
    asb_json_writer_init(&w, &b);
    asb_json_object_begin(&w);
    asb_json_string(&w, "value without key");
    asb_json_key(&w, "k");
    asb_json_int64(&w, 1);
    asb_json_object_end(&w);
    ASBT_EQ_RES(asb_json_writer_finish(&w), ASB_ERR_INVALID_ARGUMENT);
    b.len = 0;
    asb_json_writer_init(&w, &b);
    asb_json_array_begin(&w);
    ASBT_EQ_RES(asb_json_writer_finish(&w), ASB_ERR_INVALID_ARGUMENT); /* open */
    asb_json_object_end(&w);
    ASBT_EQ_RES(asb_json_writer_finish(&w), ASB_ERR_INVALID_ARGUMENT);
    b.len = 0;
    asb_json_writer_init(&w, &b);
    asb_json_int64(&w, 1);
    asb_json_int64(&w, 2); /* two top-level values */
    ASBT_EQ_RES(asb_json_writer_finish(&w), ASB_ERR_INVALID_ARGUMENT);
    b.len = 0;
    asb_json_writer_init(&w, &b);
    asb_json_double(&w, HUGE_VAL);
    ASBT_EQ_RES(asb_json_writer_finish(&w), ASB_ERR_INVALID_ARGUMENT);
    b.len = 0;
    asb_json_writer_init(&w, &b);
    asb_json_double(&w, strtod("nan", NULL));
    ASBT_EQ_RES(asb_json_writer_finish(&w), ASB_ERR_INVALID_ARGUMENT);
    asb_buf_free(&b);
}

ASBT_TEST(writer_doubles_read_back_exactly_in_any_locale) {
    static const double vals[] = {0.1, 1.0 / 3.0, -1e-300, 1e300, 123456789.125,
                                  5e-324, -0.0};
    size_t i;
    setlocale(LC_NUMERIC, "de_DE.UTF-8");
    for (i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        asb_buf b;
        asb_json_writer w;
        asb_json_doc doc;
        double back = 1;
        asb_buf_init(&b, NULL);
        asb_json_writer_init(&w, &b);
        asb_json_double(&w, vals[i]);
        ASBT_EQ_RES(asb_json_writer_finish(&w), ASB_OK);
        ASBT_CHECK(strchr(b.ptr, ',') == NULL);
        ASBT_EQ_RES(asb_json_doc_parse(&doc, b.ptr, b.len, NULL, NULL), ASB_OK);
        ASBT_EQ_RES(asb_json_get_double(&doc, 0, &back), ASB_OK);
        ASBT_EQ_DBL(back, vals[i]);
        asb_json_doc_free(&doc);
        asb_buf_free(&b);
    }
    setlocale(LC_NUMERIC, "C");
}

ASBT_TEST(writer_reports_out_of_memory) {
    asbt_heap h;
    asb_allocator a = asbt_heap_allocator(&h);
    asb_buf b;
    asb_json_writer w;
    asb_buf_init(&b, &a);
    h.fail_after = 1;
    asb_json_writer_init(&w, &b);
    asb_json_string(&w, "x");
    ASBT_EQ_RES(asb_json_writer_finish(&w), ASB_ERR_OUT_OF_MEMORY);
    asb_buf_free(&b);
    ASBT_EQ_INT(h.live, 0);
}

ASBT_LIST(
    ASBT_CASE(object_tokens_match_jsmn_model)
    ASBT_CASE(valid_rfc8259_documents_are_accepted)
    ASBT_CASE(everything_rfc8259_forbids_is_rejected)
    ASBT_CASE(truncated_documents_are_partial)
    ASBT_CASE(parse_resumes_after_more_text_arrives)
    ASBT_CASE(parse_resumes_after_tokens_grow)
    ASBT_CASE(counting_mode_validates_and_counts)
    ASBT_CASE(nesting_deeper_than_the_limit_is_rejected)
    ASBT_CASE(doc_parse_reports_line_and_column)
    ASBT_CASE(doc_parse_uses_only_the_given_allocator)
    ASBT_CASE(half_an_allocator_is_refused)
    ASBT_CASE(doc_parse_survives_allocation_failure)
    ASBT_CASE(find_follows_dotted_and_bracket_paths)
    ASBT_CASE(member_compares_keys_after_unescaping)
    ASBT_CASE(iteration_visits_members_and_elements_in_order)
    ASBT_CASE(get_string_unescapes_everything)
    ASBT_CASE(get_int64_detects_overflow_and_fractions)
    ASBT_CASE(get_double_reads_numbers_in_any_locale)
    ASBT_CASE(null_is_told_apart_from_other_primitives)
    ASBT_CASE(writer_builds_a_claim_manifest)
    ASBT_CASE(writer_escapes_controls_and_round_trips_every_byte)
    ASBT_CASE(writer_refuses_or_replaces_invalid_utf8)
    ASBT_CASE(writer_misuse_is_a_sticky_error)
    ASBT_CASE(writer_doubles_read_back_exactly_in_any_locale)
    ASBT_CASE(writer_reports_out_of_memory)
)
ASBT_MAIN()
