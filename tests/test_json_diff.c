/* Differential tests of the JSON tokenizer against Debian's jsmn (the
   oracle for the token model) and an independent RFC 8259 validator (the
   oracle for strictness).

   The contract, per input:
     - valid JSON: ours accepts and its tokens equal jsmn's, token for token
       (type, start, end, size, and parent where jsmn keeps links), in every
       jsmn mode. One documented exception: jsmn's strict mode answers
       JSMN_ERROR_PART for a top-level number or literal; ours accepts it.
     - jsmn rejects (negative result): ours rejects.
     - jsmn accepts but RFC 8259 forbids (tests/json/forbidden/, the
       documented list): ours rejects. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include "asbtest.h"
#include "oracle/jsmn_oracle.h"
#include "oracle/json_ref.h"
#include "oracle/k8s_gen.h"
#include "oracle/json_contract.h"
#include <dirent.h>

#ifndef CORPUS_DIR
#define CORPUS_DIR "tests/json"
#endif

typedef struct file_list {
    char names[128][256];
    char *data[128];
    size_t len[128];
    int count;
} file_list;

static void load_dir(const char *sub, file_list *fl) {
    char path[512];
    DIR *d;
    struct dirent *e;
    fl->count = 0;
    snprintf(path, sizeof path, "%s/%s", CORPUS_DIR, sub);
    d = opendir(path);
    if (!d) return;
    while ((e = readdir(d)) != NULL && fl->count < 128) {
        FILE *f;
        long n;
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s/%s", CORPUS_DIR, sub, e->d_name);
        f = fopen(path, "rb");
        if (!f) continue;
        fseek(f, 0, SEEK_END);
        n = ftell(f);
        fseek(f, 0, SEEK_SET);
        fl->data[fl->count] = (char *)malloc((size_t)n + 1);
        fl->len[fl->count] = fread(fl->data[fl->count], 1, (size_t)n, f);
        fclose(f);
        snprintf(fl->names[fl->count], sizeof fl->names[0], "%.200s", e->d_name);
        fl->count++;
    }
    closedir(d);
}

static void free_list(file_list *fl) {
    int i;
    for (i = 0; i < fl->count; i++) free(fl->data[i]);
    fl->count = 0;
}

ASBT_TEST(valid_corpus_matches_jsmn_token_for_token) {
    file_list *fl = (file_list *)malloc(sizeof *fl);
    int i;
    char why[256];
    load_dir("valid", fl);
    ASBT_CHECK(fl->count >= 15);
    for (i = 0; i < fl->count; i++) {
        const char *bad = check_one(fl->data[i], fl->len[i], why, sizeof why);
        if (bad) fprintf(stderr, "    %s: %s\n", fl->names[i], bad);
        ASBT_CHECK(bad == NULL);
        ASBT_CHECK(ours(fl->data[i], fl->len[i], NULL, 0) > 0);
    }
    free_list(fl);
    free(fl);
}

ASBT_TEST(invalid_corpus_is_rejected_by_jsmn_and_by_us) {
    file_list *fl = (file_list *)malloc(sizeof *fl);
    oracle_tok o[64];
    int i;
    load_dir("invalid", fl);
    ASBT_CHECK(fl->count >= 10);
    for (i = 0; i < fl->count; i++) {
        int j = oracle_jsmn_strict(fl->data[i], fl->len[i], o, 64);
        int r = ours(fl->data[i], fl->len[i], NULL, 0);
        if (j >= 0 || r >= 0)
            fprintf(stderr, "    %s: jsmn %d ours %d\n", fl->names[i], j, r);
        ASBT_CHECK(j < 0); /* else it belongs in forbidden/ */
        ASBT_CHECK(r < 0);
        ASBT_CHECK(!json_ref_valid(fl->data[i], fl->len[i], ASB_JSON_MAX_DEPTH));
    }
    free_list(fl);
    free(fl);
}

ASBT_TEST(forbidden_corpus_is_accepted_by_jsmn_but_rejected_by_us) {
    file_list *fl = (file_list *)malloc(sizeof *fl);
    oracle_tok o[64];
    int i;
    load_dir("forbidden", fl);
    ASBT_CHECK(fl->count >= 20);
    for (i = 0; i < fl->count; i++) {
        int js = oracle_jsmn_strict(fl->data[i], fl->len[i], o, 64);
        int jd = oracle_jsmn_parent(fl->data[i], fl->len[i], o, 64);
        int r = ours(fl->data[i], fl->len[i], NULL, 0);
        if (!(js >= 0 || jd >= 0) || r >= 0)
            fprintf(stderr, "    %s: jsmn strict %d, non-strict %d, ours %d\n",
                    fl->names[i], js, jd, r);
        ASBT_CHECK(js >= 0 || jd >= 0); /* else it belongs in invalid/ */
        ASBT_CHECK(r < 0);
        ASBT_CHECK(!json_ref_valid(fl->data[i], fl->len[i], ASB_JSON_MAX_DEPTH));
    }
    free_list(fl);
    free(fl);
}

ASBT_TEST(large_kubernetes_list_matches_jsmn) {
    size_t len = 0;
    int items = 0;
    char why[256];
    char *doc = k8s_gen_list(10u << 20, &len, &items);
    const char *bad = check_one(doc, len, why, sizeof why);
    if (bad) fprintf(stderr, "    10 MB list: %s\n", bad);
    ASBT_CHECK(bad == NULL);
    free(doc);
    doc = k8s_gen_list(300u << 10, &len, &items); /* small enough for jsmn default */
    bad = check_one(doc, len, why, sizeof why);
    if (bad) fprintf(stderr, "    300 KB list: %s\n", bad);
    ASBT_CHECK(bad == NULL);
    free(doc);
}

/* -- random documents -------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static unsigned rnd(unsigned n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (unsigned)(rng_state % n);
}

static void random_value(asb_json_writer *w, int depth) {
    static const char *strs[] = {"", "a", "caf\xc3\xa9", "\xf0\x9f\x98\x80", "q\"b\\s",
                                 "ctl\x01\x1f\n\t", "sandbox-claim-00ff", "/path/x"};
    unsigned k = rnd(depth > 5 ? 5 : 8), i, n;
    switch (k) {
    case 0: asb_json_int64(w, (int64_t)rnd(2000000) - 1000000); break;
    case 1: asb_json_double(w, (double)rnd(100000) / 7.0 - 5000.0); break;
    case 2: asb_json_string(w, strs[rnd(8)]); break;
    case 3: asb_json_bool(w, (int)rnd(2)); break;
    case 4: asb_json_null(w); break;
    case 5:
    case 6:
        asb_json_array_begin(w);
        n = rnd(5);
        for (i = 0; i < n; i++) random_value(w, depth + 1);
        asb_json_array_end(w);
        break;
    default:
        asb_json_object_begin(w);
        n = rnd(5);
        for (i = 0; i < n; i++) {
            asb_json_key(w, strs[rnd(8)]);
            random_value(w, depth + 1);
        }
        asb_json_object_end(w);
    }
}

/* Re-spaces a compact document with random JSON whitespace between tokens,
   so offsets differ from the writer's layout. */
static void respace(const asb_buf *in, asb_buf *out) {
    static const char ws[] = " \t\r\n";
    size_t i;
    int in_str = 0;
    out->len = 0;
    for (i = 0; i < in->len; i++) {
        char c = in->ptr[i];
        asb_buf_append(out, &c, 1);
        if (in_str) {
            if (c == '\\') {
                asb_buf_append(out, &in->ptr[++i], 1);
            } else if (c == '"') {
                in_str = 0;
            }
            continue;
        }
        if (c == '"') in_str = 1;
        if ((c == ',' || c == ':' || c == '[' || c == '{') && rnd(3) == 0)
            asb_buf_append(out, &ws[rnd(4)], 1);
    }
}

ASBT_TEST(random_documents_match_jsmn) {
    asb_buf b, s;
    int i;
    char why[256];
    asb_buf_init(&b, NULL);
    asb_buf_init(&s, NULL);
    for (i = 0; i < 3000; i++) {
        asb_json_writer w;
        const char *bad;
        b.len = 0;
        asb_json_writer_init(&w, &b);
        random_value(&w, 0);
        ASBT_EQ_RES(asb_json_writer_finish(&w), ASB_OK);
        respace(&b, &s);
        bad = check_one(s.ptr, s.len, why, sizeof why);
        if (bad) {
            fprintf(stderr, "    document: ");
            asbt_print_bytes(s.ptr, s.len);
            fprintf(stderr, "\n    %s\n", bad);
        }
        ASBT_CHECK(bad == NULL);
        ASBT_CHECK(ours(s.ptr, s.len, NULL, 0) > 0);
    }
    asb_buf_free(&b);
    asb_buf_free(&s);
}

ASBT_TEST(mutated_documents_agree_with_both_oracles) {
    static const char pick[] = "{}[]\":,.-+eE0123456789tfnul \\\x01\x7f\xc3\xa9\xff";
    asb_buf b, m;
    int i, accepted = 0, rejected = 0;
    char why[256];
    asb_buf_init(&b, NULL);
    asb_buf_init(&m, NULL);
    for (i = 0; i < 40000; i++) {
        asb_json_writer w;
        const char *bad;
        unsigned edits, e;
        b.len = 0;
        asb_json_writer_init(&w, &b);
        random_value(&w, 2);
        ASBT_EQ_RES(asb_json_writer_finish(&w), ASB_OK);
        m.len = 0;
        asb_buf_append(&m, b.ptr, b.len);
        edits = 1 + rnd(3);
        for (e = 0; e < edits && m.len > 0; e++) {
            size_t at = rnd((unsigned)m.len);
            char c = pick[rnd(sizeof pick - 1)];
            switch (rnd(4)) {
            case 0: m.ptr[at] = c; break;
            case 1: memmove(m.ptr + at, m.ptr + at + 1, m.len - at - 1); m.len--; break;
            case 2:
                asb_buf_append(&m, " ", 1);
                memmove(m.ptr + at + 1, m.ptr + at, m.len - at - 1);
                m.ptr[at] = c;
                break;
            default: m.len = at; break;
            }
        }
        bad = check_one(m.ptr, m.len, why, sizeof why);
        if (bad) {
            fprintf(stderr, "    document: ");
            asbt_print_bytes(m.ptr, m.len);
            fprintf(stderr, "\n    %s\n", bad);
        }
        ASBT_CHECK(bad == NULL);
        if (ours(m.ptr, m.len, NULL, 0) >= 0) accepted++; else rejected++;
    }
    /* the mutations must exercise both sides of the contract */
    ASBT_CHECK(accepted > 1000 && rejected > 1000);
    asb_buf_free(&b);
    asb_buf_free(&m);
}

ASBT_LIST(
    ASBT_CASE(valid_corpus_matches_jsmn_token_for_token)
    ASBT_CASE(invalid_corpus_is_rejected_by_jsmn_and_by_us)
    ASBT_CASE(forbidden_corpus_is_accepted_by_jsmn_but_rejected_by_us)
    ASBT_CASE(large_kubernetes_list_matches_jsmn)
    ASBT_CASE(random_documents_match_jsmn)
    ASBT_CASE(mutated_documents_agree_with_both_oracles)
)
ASBT_MAIN()
