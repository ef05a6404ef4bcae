/* Fuzz target: the YAML reader. Every input either parses into a
   consistent tree (children counted right, positions inside the text,
   maps with an even number of children and unique keys, a tree that
   converts to valid JSON) or fails with "name:line:col: why". */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include "fuzz_main.h"

static int lines_in;

static void walk(const asb_yaml_node *n, asb_json_writer *w, int depth) {
    const asb_yaml_node *c, *d;
    int count = 0;
    FUZZ_REQUIRE(depth <= ASB_YAML_MAX_DEPTH + 1);
    FUZZ_REQUIRE(n->line >= 1 && n->line <= lines_in && n->col >= 1);
    for (c = n->first; c; c = c->next) count++;
    FUZZ_REQUIRE(count == n->count);
    switch (n->type) {
    case ASB_YAML_NULL:
        asb_json_null(w);
        break;
    case ASB_YAML_SCALAR:
        FUZZ_REQUIRE(n->str && n->str[n->len] == '\0');
        asb_json_string_n(w, n->str, n->len);
        break;
    case ASB_YAML_MAP:
        FUZZ_REQUIRE(count % 2 == 0);
        asb_json_object_begin(w);
        for (c = n->first; c; c = c->next->next) {
            FUZZ_REQUIRE(c->type == ASB_YAML_SCALAR || c->type == ASB_YAML_NULL);
            for (d = n->first; d != c; d = d->next->next)
                FUZZ_REQUIRE(!(d->len == c->len && memcmp(d->str, c->str, c->len) == 0));
            asb_json_key_n(w, c->str, c->len);
            walk(c->next, w, depth + 1);
        }
        asb_json_object_end(w);
        break;
    case ASB_YAML_SEQ:
        asb_json_array_begin(w);
        for (c = n->first; c; c = c->next) walk(c, w, depth + 1);
        asb_json_array_end(w);
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    asb_yaml_doc doc;
    asb_error err;
    size_t i;
    if (size > 65536) return 0;
    lines_in = 1;
    for (i = 0; i < size; i++)
        if (data[i] == '\n') lines_in++;
    if (asb_yaml_parse(&doc, (const char *)data, size, "f.yaml", NULL, &err) == ASB_OK) {
        asb_buf b;
        asb_json_writer w;
        asb_json_doc jd;
        asb_buf_init(&b, NULL);
        asb_json_writer_init(&w, &b);
        w.replace_invalid_utf8 = 1;
        walk(doc.root, &w, 0);
        /* the writer nests at most 63 deep, YAML up to ASB_YAML_MAX_DEPTH */
        if (asb_json_writer_finish(&w) != ASB_ERR_TOO_LARGE) {
            FUZZ_REQUIRE(asb_json_writer_finish(&w) == ASB_OK);
            FUZZ_REQUIRE(asb_json_doc_parse(&jd, b.ptr, b.len, NULL, NULL) == ASB_OK);
            asb_json_doc_free(&jd);
        }
        asb_buf_free(&b);
        asb_yaml_free(&doc);
    } else {
        FUZZ_REQUIRE(err.code == ASB_ERR_KUBECONFIG || err.code == ASB_ERR_OUT_OF_MEMORY);
        FUZZ_REQUIRE(strncmp(err.message, "f.yaml:", 7) == 0 ||
                     err.code == ASB_ERR_OUT_OF_MEMORY);
    }
    return 0;
}
