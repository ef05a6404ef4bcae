/* YAML and kubeconfig details the kubectl oracle does not reach: scalar
   styles exactly, positions in errors, limits, memory. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include "asbtest.h"

static const asb_yaml_node *get(const asb_yaml_doc *d, const char *k) {
    return asb_yaml_get(d->root, k);
}

ASBT_TEST(block_scalars_keep_clip_and_strip_newlines) {
    const char *y = "lit: |\n  a\n   b\n\n  c\n\n\nkeep: |+\n  x\n\n\nstrip: >-\n  one\n  two\n\n"
                    "  three\nfold: >\n  f\n    indented\n  g\nind: |2\n    two-extra\nend: 1\n";
    asb_yaml_doc d;
    asb_error err;
    ASBT_EQ_RES(asb_yaml_parse(&d, y, strlen(y), "t.yaml", NULL, &err), ASB_OK);
    ASBT_EQ_STR(get(&d, "lit")->str, "a\n b\n\nc\n");
    ASBT_EQ_STR(get(&d, "keep")->str, "x\n\n\n");
    ASBT_EQ_STR(get(&d, "strip")->str, "one two\nthree");
    ASBT_EQ_STR(get(&d, "fold")->str, "f\n  indented\ng\n");
    ASBT_EQ_STR(get(&d, "ind")->str, "  two-extra\n");
    ASBT_EQ_STR(get(&d, "end")->str, "1");
    asb_yaml_free(&d);
}

ASBT_TEST(quoted_scalars_unescape_and_fold) {
    const char *y = "d: \"a\\tb\\\\c\\\"d\\u00e9\\x41\\U0001F600\"\n"
                    "s: 'it''s'\n"
                    "m: \"one\n  two\n\n  three\"\n"
                    "e: \"\"\n"
                    "p: plain text # comment\n"
                    "u: http://x:8080/a#frag\n";
    asb_yaml_doc d;
    asb_error err;
    ASBT_EQ_RES(asb_yaml_parse(&d, y, strlen(y), "t.yaml", NULL, &err), ASB_OK);
    ASBT_EQ_STR(get(&d, "d")->str, "a\tb\\c\"d\xc3\xa9" "A\xf0\x9f\x98\x80");
    ASBT_EQ_STR(get(&d, "s")->str, "it's");
    ASBT_EQ_STR(get(&d, "m")->str, "one two\nthree");
    ASBT_EQ_INT(get(&d, "e")->type, ASB_YAML_SCALAR); /* "" is a string, not null */
    ASBT_EQ_INT(get(&d, "e")->plain, 0);
    ASBT_EQ_STR(get(&d, "p")->str, "plain text");
    asb_yaml_free(&d);
}

ASBT_TEST(colon_without_space_is_part_of_a_value) {
    const char *y = "u: http://x:8080/a#frag\nq: a#b\n";
    asb_yaml_doc d;
    ASBT_EQ_RES(asb_yaml_parse(&d, y, strlen(y), "t.yaml", NULL, NULL), ASB_OK);
    ASBT_EQ_STR(get(&d, "u")->str, "http://x:8080/a#frag");
    ASBT_EQ_STR(get(&d, "q")->str, "a#b");
    asb_yaml_free(&d);
}

ASBT_TEST(nulls_and_booleans_follow_the_schema) {
    const char *y = "a:\nb: ~\nc: null\nd: 'null'\ne: true\nf: \"true\"\ng: No\nh: maybe\n";
    asb_yaml_doc d;
    int b = 2;
    ASBT_EQ_RES(asb_yaml_parse(&d, y, strlen(y), "t.yaml", NULL, NULL), ASB_OK);
    ASBT_CHECK(asb_yaml_is_null(get(&d, "a")));
    ASBT_CHECK(asb_yaml_is_null(get(&d, "b")));
    ASBT_CHECK(asb_yaml_is_null(get(&d, "c")));
    ASBT_CHECK(!asb_yaml_is_null(get(&d, "d")));
    ASBT_CHECK(asb_yaml_is_null(get(&d, "missing")));
    ASBT_EQ_RES(asb_yaml_bool(get(&d, "e"), &b), ASB_OK);
    ASBT_EQ_INT(b, 1);
    ASBT_EQ_RES(asb_yaml_bool(get(&d, "f"), &b), ASB_ERR_INVALID_ARGUMENT);
    ASBT_EQ_RES(asb_yaml_bool(get(&d, "g"), &b), ASB_OK);
    ASBT_EQ_INT(b, 0);
    ASBT_EQ_RES(asb_yaml_bool(get(&d, "h"), &b), ASB_ERR_INVALID_ARGUMENT);
    asb_yaml_free(&d);
}

ASBT_TEST(errors_name_file_line_and_column) {
    static const char *bad[][2] = {
        {"a: 1\n  b: 2\n", "t.yaml:2:3:"},
        {"a: [1, 2\n", "t.yaml:2:1:"},
        {"a: *ref\n", "t.yaml:1:4: alias to an anchor not defined before it"},
        {"a: !!str x\n", "t.yaml:1:4: tags are not supported"},
        {"a: 1\n---\nb: 2\n", "several documents"},
        {"a: \"x\\q\"\n", "t.yaml:1:6: unknown escape"},
        {"? a\n: b\n", "complex keys"},
        {"- a\nb: c\n", "t.yaml:2:1: unexpected content"},
        {"a:\n  - x\n  y: 1\n", "t.yaml:3:3:"},
        {"a: b: c\n", "t.yaml:1:5: a mapping value is not allowed here"},
        {"a: 'x\n", "unterminated single-quoted"},
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        asb_yaml_doc d;
        asb_error err;
        if (asb_yaml_parse(&d, bad[i][0], strlen(bad[i][0]), "t.yaml", NULL, &err) == ASB_OK) {
            fprintf(stderr, "    accepted: %s\n", bad[i][0]);
            asb_yaml_free(&d);
            ASBT_CHECK(0);
        }
        ASBT_EQ_RES(err.code, ASB_ERR_KUBECONFIG);
        ASBT_CONTAINS(err.message, bad[i][1]);
    }
}

ASBT_TEST(nesting_past_the_limit_is_an_error) {
    asb_buf b;
    asb_yaml_doc d;
    asb_error err;
    int i;
    asb_buf_init(&b, NULL);
    for (i = 0; i < ASB_YAML_MAX_DEPTH + 5; i++) asb_buf_append(&b, "[", 1);
    ASBT_EQ_RES(asb_yaml_parse(&d, b.ptr, b.len, "t.yaml", NULL, &err), ASB_ERR_KUBECONFIG);
    ASBT_CONTAINS(err.message, "too deep");
    asb_buf_free(&b);
}

ASBT_TEST(yaml_and_kubeconfig_free_everything_they_allocate) {
    asbt_heap h;
    asb_allocator a = asbt_heap_allocator(&h);
    asb_yaml_doc d;
    asb_kubeconfig_desc kd;
    asb_kube_config c;
    asb_error err;
    const char *y = "a: [1, {b: c}]\nd: |\n  text\n";
    ASBT_EQ_RES(asb_yaml_parse(&d, y, strlen(y), "t.yaml", &a, NULL), ASB_OK);
    asb_yaml_free(&d);
    ASBT_EQ_INT(h.live, 0);
    ASBT_EQ_RES(asb_yaml_parse(&d, "a: [", 4, "t.yaml", &a, &err), ASB_ERR_KUBECONFIG);
    ASBT_EQ_INT(h.live, 0);
    memset(&kd, 0, sizeof kd);
    kd.allocator = &a;
    kd.path = "tests/kubeconfig/valid/eks.yaml";
    ASBT_EQ_RES(asb_kubeconfig_load(&kd, &c, &err), ASB_OK);
    ASBT_CHECK(h.live > 0);
    ASBT_EQ_INT(c.exec->arg_count, 8);
    asb_kube_config_free(&c);
    ASBT_EQ_INT(h.live, 0);
    kd.path = "tests/kubeconfig/broken/bad-base64.yaml";
    ASBT_EQ_RES(asb_kubeconfig_load(&kd, &c, &err), ASB_ERR_KUBECONFIG);
    ASBT_EQ_INT(h.live, 0);
}

ASBT_TEST(kubeconfig_errors_say_what_is_missing_without_secrets) {
    asb_kubeconfig_desc kd;
    asb_kube_config c;
    asb_error err;
    memset(&kd, 0, sizeof kd);
    kd.path = "tests/kubeconfig/valid/odd-indent.yaml";
    kd.context = "nope";
    ASBT_EQ_RES(asb_kubeconfig_load(&kd, &c, &err), ASB_ERR_KUBECONFIG);
    ASBT_CONTAINS(err.message, "context \"nope\" (asked for by the caller) not found in "
                               "\"tests/kubeconfig/valid/odd-indent.yaml\"");
    kd.context = "second";
    ASBT_EQ_RES(asb_kubeconfig_load(&kd, &c, &err), ASB_OK);
    ASBT_EQ_STR(c.default_namespace, "team-b");
    ASBT_EQ_STR(c.password, "p@ss: \"word\"");
    asb_kube_config_free(&c);
    kd.path = "tests/kubeconfig/does-not-exist.yaml";
    kd.context = NULL;
    ASBT_EQ_RES(asb_kubeconfig_load(&kd, &c, &err), ASB_ERR_KUBECONFIG);
    ASBT_CONTAINS(err.message, "does-not-exist.yaml");
    ASBT_CONTAINS(err.message, "No such file");
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    ASBT_CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* asb_kubeconfig_desc.paths merges as KUBECONFIG does, without the
   environment; a name that is missing is reported with the file and
   context that named it. */
ASBT_TEST(kubeconfig_paths_merge_and_missing_names_point_at_who_named_them) {
    char dir[] = "/tmp/asb-kcpaths-XXXXXX", a[256], b[256], none[256];
    const char *paths[3];
    asb_kubeconfig_desc kd;
    asb_kube_config c;
    asb_error err;
    ASBT_CHECK(mkdtemp(dir) != NULL);
    snprintf(a, sizeof a, "%s/a.yaml", dir);
    snprintf(b, sizeof b, "%s/b.yaml", dir);
    snprintf(none, sizeof none, "%s/missing.yaml", dir);
    write_file(a, "apiVersion: v1\nkind: Config\ncurrent-context: main\ncontexts:\n"
                  "- name: main\n  context:\n    cluster: c1\n    user: u1\n"
                  "- name: lost\n  context:\n    cluster: c9\n    user: u1\n"
                  "- name: nouser\n  context:\n    cluster: c1\n    user: u9\n");
    write_file(b, "apiVersion: v1\nkind: Config\ncurrent-context: other\nclusters:\n"
                  "- name: c1\n  cluster:\n    server: https://127.0.0.1:6443\n"
                  "users:\n- name: u1\n  user:\n    token: sekret-token\n");
    unsetenv("KUBECONFIG");
    memset(&kd, 0, sizeof kd);
    paths[0] = none; /* skipped, as kubectl skips it */
    paths[1] = a;
    paths[2] = b;
    kd.paths = paths;
    kd.path_count = 3;
    ASBT_EQ_RES(asb_kubeconfig_load(&kd, &c, &err), ASB_OK);
    ASBT_EQ_STR(c.context, "main"); /* the first current-context wins */
    ASBT_EQ_STR(c.server, "https://127.0.0.1:6443");
    ASBT_EQ_STR(c.user_origin, b);
    asb_kube_config_free(&c);
    /* the cluster a context names is missing: its file, line and context */
    kd.context = "lost";
    ASBT_EQ_RES(asb_kubeconfig_load(&kd, &c, &err), ASB_ERR_KUBECONFIG);
    ASBT_CONTAINS(err.message, a);
    ASBT_CONTAINS(err.message, ":11:14: cluster \"c9\" of context \"lost\" is not defined");
    kd.context = "nouser";
    ASBT_EQ_RES(asb_kubeconfig_load(&kd, &c, &err), ASB_ERR_KUBECONFIG);
    ASBT_CONTAINS(err.message, ":16:11: user \"u9\" of context \"nouser\" is not defined");
    ASBT_CHECK(strstr(err.message, "sekret") == NULL);
    /* a current-context naming nothing: the file that set it, and the
       files searched */
    kd.context = NULL;
    paths[0] = b;
    paths[1] = a;
    kd.path_count = 2;
    ASBT_EQ_RES(asb_kubeconfig_load(&kd, &c, &err), ASB_ERR_KUBECONFIG);
    ASBT_CONTAINS(err.message, b);
    ASBT_CONTAINS(err.message, ":3:18: current-context \"other\" names a context that none of");
    /* path and paths together is a mistake */
    kd.path = a;
    ASBT_EQ_RES(asb_kubeconfig_load(&kd, &c, &err), ASB_ERR_INVALID_ARGUMENT);
    kd.path = NULL;
    paths[0] = none;
    kd.path_count = 1;
    ASBT_EQ_RES(asb_kubeconfig_load(&kd, &c, &err), ASB_ERR_KUBECONFIG);
    ASBT_CONTAINS(err.message, "none of the 1 files in paths exists");
    unlink(a);
    unlink(b);
    rmdir(dir);
}

/* Stanza names compare by length, as kubectl compares Go strings: an
   escaped NUL in a quoted name makes a different name, never a prefix
   match (here: a context that would send "ctx" to another server). */
ASBT_TEST(kubeconfig_names_with_an_escaped_nul_match_only_themselves) {
    char dir[] = "/tmp/asb-kcnul-XXXXXX", a[256];
    asb_kubeconfig_desc kd;
    asb_kube_config c;
    asb_error err;
    ASBT_CHECK(mkdtemp(dir) != NULL);
    snprintf(a, sizeof a, "%s/a.yaml", dir);
    write_file(a, "apiVersion: v1\nkind: Config\ncurrent-context: \"ctx\\0x\"\ncontexts:\n"
                  "- name: \"ctx\\0x\"\n  context: {cluster: evil, user: u1}\n"
                  "- name: ctx\n  context: {cluster: c1, user: u1}\n"
                  "- name: ref\n  context: {cluster: \"c1\\0y\", user: u1}\n"
                  "- name: refuser\n  context: {cluster: c1, user: \"u1\\0z\"}\n"
                  "clusters:\n"
                  "- name: evil\n  cluster: {server: \"https://127.0.0.9:1\"}\n"
                  "- name: c1\n  cluster: {server: \"https://127.0.0.1:6443\"}\n"
                  "users:\n- name: u1\n  user: {token: t}\n");
    memset(&kd, 0, sizeof kd);
    kd.path = a;
    kd.context = "ctx";
    ASBT_EQ_RES(asb_kubeconfig_load(&kd, &c, &err), ASB_OK);
    ASBT_EQ_STR(c.cluster, "c1");
    ASBT_EQ_STR(c.server, "https://127.0.0.1:6443");
    asb_kube_config_free(&c);
    /* the current-context with its NUL names the first context only */
    kd.context = NULL;
    ASBT_EQ_RES(asb_kubeconfig_load(&kd, &c, &err), ASB_OK);
    ASBT_EQ_STR(c.cluster, "evil");
    asb_kube_config_free(&c);
    /* a reference "c1\0y" / "u1\0z" is not the cluster c1 / user u1 */
    kd.context = "ref";
    ASBT_EQ_RES(asb_kubeconfig_load(&kd, &c, &err), ASB_ERR_KUBECONFIG);
    ASBT_CONTAINS(err.message, "of context \"ref\" is not defined in any file");
    kd.context = "refuser";
    ASBT_EQ_RES(asb_kubeconfig_load(&kd, &c, &err), ASB_ERR_KUBECONFIG);
    ASBT_CONTAINS(err.message, "of context \"refuser\" is not defined in any file");
    unlink(a);
    rmdir(dir);
}

/* Anchors and aliases as kubectl reads them; aliases share their
   anchor's nodes, and the nodes all aliases stand for are capped, so a
   "billion laughs" file fails fast instead of exhausting its reader. */
ASBT_TEST(anchors_aliases_and_merges_are_read_and_bounded) {
    asb_yaml_doc d;
    asb_error err;
    asb_buf b;
    const asb_yaml_node *u1, *u2, *m;
    const char *y = "u1: &u {token: abc, exec: {args: [a, b]}}\nu2: *u\n"
                    "m:\n  <<: *u\n  token: xyz\n";
    int i;
    ASBT_EQ_RES(asb_yaml_parse(&d, y, strlen(y), "t.yaml", NULL, &err), ASB_OK);
    u1 = get(&d, "u1");
    u2 = get(&d, "u2");
    ASBT_CHECK(u1 && u2 && u2->type == ASB_YAML_MAP);
    ASBT_CHECK(u2->first == u1->first); /* shared, not copied */
    ASBT_EQ_STR(asb_yaml_get(u2, "token")->str, "abc");
    m = get(&d, "m");
    ASBT_EQ_STR(asb_yaml_get(m, "token")->str, "xyz"); /* written after <<: wins */
    ASBT_EQ_INT(asb_yaml_get(asb_yaml_get(m, "exec"), "args")->count, 2);
    ASBT_EQ_INT(m->count, 4);
    asb_yaml_free(&d);
    /* nine levels of ten aliases each: 10^9 nodes to a reader */
    asb_buf_init(&b, NULL);
    asb_buf_append(&b, "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n", 39);
    for (i = 1; i < 9; i++) {
        char line[128];
        int n = snprintf(line, sizeof line, "l%d: &l%d [*l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, "
                         "*l%d, *l%d, *l%d]\n", i, i, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1,
                         i - 1, i - 1, i - 1, i - 1);
        asb_buf_append(&b, line, (size_t)n);
    }
    ASBT_EQ_RES(asb_yaml_parse(&d, b.ptr, b.len, "laughs.yaml", NULL, &err), ASB_ERR_KUBECONFIG);
    ASBT_CONTAINS(err.message, "too much aliasing");
    asb_buf_free(&b);
    /* a chain of aliases cannot nest past the depth limit */
    asb_buf_init(&b, NULL);
    asb_buf_append(&b, "a0: &a0 x\n", 10);
    for (i = 1; i < ASB_YAML_MAX_DEPTH + 5; i++) {
        char line[64];
        int n = snprintf(line, sizeof line, "a%d: &a%d [*a%d]\n", i, i, i - 1);
        asb_buf_append(&b, line, (size_t)n);
    }
    ASBT_EQ_RES(asb_yaml_parse(&d, b.ptr, b.len, "chain.yaml", NULL, &err), ASB_ERR_KUBECONFIG);
    ASBT_CONTAINS(err.message, "nesting too deep (through an alias)");
    asb_buf_free(&b);
    /* what is refused, and where */
    ASBT_EQ_RES(asb_yaml_parse(&d, "a: *b\n", 6, "t.yaml", NULL, &err), ASB_ERR_KUBECONFIG);
    ASBT_CONTAINS(err.message, "t.yaml:1:4: alias to an anchor not defined before it");
    ASBT_EQ_RES(asb_yaml_parse(&d, "a: &x &y 1\n", 11, "t.yaml", NULL, &err), ASB_ERR_KUBECONFIG);
    ASBT_CONTAINS(err.message, "one anchor at most");
    ASBT_EQ_RES(asb_yaml_parse(&d, "a: &x! 1\n", 9, "t.yaml", NULL, &err), ASB_ERR_KUBECONFIG);
    ASBT_CONTAINS(err.message, "letters, digits");
    ASBT_EQ_RES(asb_yaml_parse(&d, "a: !!str 1\n", 11, "t.yaml", NULL, &err), ASB_ERR_KUBECONFIG);
    ASBT_CONTAINS(err.message, "tags are not supported");
    ASBT_EQ_RES(asb_yaml_parse(&d, "a: 1\n<<: 2\n", 11, "t.yaml", NULL, &err), ASB_ERR_KUBECONFIG);
    ASBT_CONTAINS(err.message, "t.yaml:2:5: a merge (<<) needs a map");
    /* a redefined anchor: the newest wins, as in YAML */
    y = "a: &x 1\nb: &x 2\nc: *x\n";
    ASBT_EQ_RES(asb_yaml_parse(&d, y, strlen(y), "t.yaml", NULL, &err), ASB_OK);
    ASBT_EQ_STR(get(&d, "c")->str, "2");
    asb_yaml_free(&d);
}

/* The duplicate-key check of a map of n keys makes O(n log n) key
   comparisons, for block maps, flow maps and merges (a scan of the keys
   before each new one made n^2/2: 2e8 here, 5e9 for a kubeconfig of
   100k keys), and it still finds the one duplicate at the very end. The
   bound is 1.44 log2(n) + 2 comparisons per key, 24 for these n. */
static unsigned long parse_counting(const char *y, size_t len, asb_result *r, asb_error *err) {
    asb_yaml_doc d;
    unsigned long compares = 0;
    *r = asb__yaml_parse(&d, y, len, "many.yaml", NULL, err, &compares);
    if (*r == ASB_OK) asb_yaml_free(&d);
    return compares;
}

ASBT_TEST(duplicate_key_checks_of_a_huge_map_cost_n_log_n_comparisons) {
    enum { N = 20000, M = 10000 };
    asb_buf b;
    asb_error err;
    asb_result r;
    unsigned long c;
    char line[64];
    int i;
    asb_buf_init(&b, NULL);
    /* a block map; keys in an order no tree may rely on */
    for (i = 0; i < N; i++) {
        int len = snprintf(line, sizeof line, "k%05d: %d\n", (int)((i * 7919L) % N), i);
        asb_buf_append(&b, line, (size_t)len);
    }
    c = parse_counting(b.ptr, b.len, &r, &err);
    ASBT_EQ_RES(r, ASB_OK);
    ASBT_CHECK(c > 0 && c <= 24UL * N);
    /* the same key once more, last: found, where it is */
    asb_buf_append(&b, "k00000: dup\n", 12);
    c = parse_counting(b.ptr, b.len, &r, &err);
    ASBT_EQ_RES(r, ASB_ERR_KUBECONFIG);
    snprintf(line, sizeof line, "many.yaml:%d:1: duplicate key", N + 1);
    ASBT_CONTAINS(err.message, line);
    ASBT_CHECK(c <= 24UL * (N + 1));
    /* a flow map */
    b.len = 0;
    asb_buf_append(&b, "{", 1);
    for (i = 0; i < N; i++) {
        int len = snprintf(line, sizeof line, "%sk%05d: %d", i ? ", " : "", (int)((i * 7919L) % N), i);
        asb_buf_append(&b, line, (size_t)len);
    }
    asb_buf_append(&b, "}\n", 2);
    c = parse_counting(b.ptr, b.len, &r, &err);
    ASBT_EQ_RES(r, ASB_OK);
    ASBT_CHECK(c > 0 && c <= 24UL * N);
    /* a merge of M keys into a map of M keys of its own (half of them
       the same), then M written after it */
    b.len = 0;
    asb_buf_append(&b, "base: &b\n", 9);
    for (i = 0; i < M; i++) {
        int len = snprintf(line, sizeof line, "  m%05d: %d\n", i, i);
        asb_buf_append(&b, line, (size_t)len);
    }
    asb_buf_append(&b, "top:\n  <<: *b\n", 14);
    for (i = M / 2; i < M + M / 2; i++) {
        int len = snprintf(line, sizeof line, "  m%05d: %d\n", i, i);
        asb_buf_append(&b, line, (size_t)len);
    }
    c = parse_counting(b.ptr, b.len, &r, &err);
    ASBT_EQ_RES(r, ASB_OK);
    ASBT_CHECK(c > 0 && c <= 24UL * 4 * M);
    {
        /* and the merge is still right: each key once, the written value
           winning over the merged one */
        asb_yaml_doc d;
        const asb_yaml_node *top;
        ASBT_EQ_RES(asb_yaml_parse(&d, b.ptr, b.len, "many.yaml", NULL, &err), ASB_OK);
        top = get(&d, "top");
        ASBT_EQ_INT((long)top->count, 2L * (M + M / 2));
        ASBT_EQ_STR(asb_yaml_get(top, "m00000")->str, "0");
        snprintf(line, sizeof line, "m%05d", M + M / 2 - 1);
        ASBT_EQ_STR(asb_yaml_get(top, line)->str, "14999");
        asb_yaml_free(&d);
    }
    asb_buf_free(&b);
}

ASBT_LIST(
    ASBT_CASE(block_scalars_keep_clip_and_strip_newlines)
    ASBT_CASE(duplicate_key_checks_of_a_huge_map_cost_n_log_n_comparisons)
    ASBT_CASE(quoted_scalars_unescape_and_fold)
    ASBT_CASE(colon_without_space_is_part_of_a_value)
    ASBT_CASE(nulls_and_booleans_follow_the_schema)
    ASBT_CASE(errors_name_file_line_and_column)
    ASBT_CASE(nesting_past_the_limit_is_an_error)
    ASBT_CASE(yaml_and_kubeconfig_free_everything_they_allocate)
    ASBT_CASE(kubeconfig_errors_say_what_is_missing_without_secrets)
    ASBT_CASE(kubeconfig_paths_merge_and_missing_names_point_at_who_named_them)
    ASBT_CASE(kubeconfig_names_with_an_escaped_nul_match_only_themselves)
    ASBT_CASE(anchors_aliases_and_merges_are_read_and_bounded)
)
ASBT_MAIN()
