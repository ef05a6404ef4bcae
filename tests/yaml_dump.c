/* Prints a YAML file's tree as JSON with every scalar as its text (nulls
   as the text they were written with, "" for an empty value), the shape
   PyYAML's BaseLoader gives, for tests/yaml_oracle_test.py. Exit 1 with
   the error message on stderr when the file does not parse. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include <stdio.h>

static void dump(const asb_yaml_node *n, asb_json_writer *w) {
    const asb_yaml_node *c;
    switch (n->type) {
    case ASB_YAML_NULL:
    case ASB_YAML_SCALAR:
        asb_json_string_n(w, n->str, n->len);
        break;
    case ASB_YAML_MAP:
        asb_json_object_begin(w);
        for (c = n->first; c; c = c->next->next) {
            asb_json_key_n(w, c->str, c->len);
            dump(c->next, w);
        }
        asb_json_object_end(w);
        break;
    case ASB_YAML_SEQ:
        asb_json_array_begin(w);
        for (c = n->first; c; c = c->next) dump(c, w);
        asb_json_array_end(w);
        break;
    }
}

int main(int argc, char **argv) {
    FILE *f;
    asb_buf in, out;
    asb_yaml_doc d;
    asb_error err;
    asb_json_writer w;
    char chunk[65536];
    size_t n;
    if (argc != 2 || !(f = fopen(argv[1], "rb"))) return 2;
    asb_buf_init(&in, NULL);
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) asb_buf_append(&in, chunk, n);
    fclose(f);
    if (asb_yaml_parse(&d, in.ptr ? in.ptr : "", in.len, argv[1], NULL, &err) != ASB_OK) {
        fprintf(stderr, "%s\n", err.message);
        asb_buf_free(&in);
        return 1;
    }
    asb_buf_init(&out, NULL);
    asb_json_writer_init(&w, &out);
    dump(d.root, &w);
    if (asb_json_writer_finish(&w) != ASB_OK) {
        fprintf(stderr, "cannot write JSON (invalid UTF-8 or too deep)\n");
        return 3;
    }
    printf("%s\n", out.ptr);
    asb_buf_free(&out);
    asb_buf_free(&in);
    asb_yaml_free(&d);
    return 0;
}
