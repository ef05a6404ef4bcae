/* Fuzz target: kubeconfig semantics (asb_kubeconfig_load) on top of the
   YAML reader fuzz_yaml covers: the merge of several files (KUBECONFIG),
   `*-data` against file paths, paths relative to each file, the exec
   stanza, and the errors.

   Input: byte 0 says how many files (1 + b % 3) and whether to ask for
   context "ctx" (b & 4); the rest is the files' text, separated by NUL
   bytes. The files are written to a private directory, the second one in
   a subdirectory, so "../ca.crt" and "ca.crt" resolve differently; that
   directory holds ca.crt, client.crt, client.key and token to point at.

   Properties of a load that succeeds: the context, cluster and server
   are the ones kubectl's merge picks (first file to name a stanza wins,
   whole; current-context from the first file that sets one), checked
   against a plain reference walk over the same YAML trees; a certificate
   comes with its key; tokenFile and an exec command with a '/' are
   absolute; every exec argument and env entry is there, NUL-terminated.
   A load that fails says ASB_ERR_KUBECONFIG with a message that holds no
   token or password from the files.

   Inputs naming /dev, /proc, /sys or /run are skipped (as are backslash
   escapes, which could spell them): a FIFO or a terminal there would
   block the read, which is kubectl's behaviour too and not a finding. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include "fuzz_main.h"
#include <sys/stat.h>

static char dir[256];

static void put(const char *name, const char *text, size_t n) {
    char path[512];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "wb");
    FUZZ_REQUIRE(f != NULL);
    if (n) FUZZ_REQUIRE(fwrite(text, 1, n, f) == n);
    fclose(f);
}

/* The directory goes when the run ends (libFuzzer and the replay main
   both leave through exit). */
static void cleanup(void) {
    static const char *files[] = {"config", "sub/config", "config3", "ca.crt", "client.crt",
                                  "client.key", "token", "sub/ca.crt"};
    char path[512];
    size_t i;
    for (i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/sub", dir);
    rmdir(path);
    rmdir(dir);
}

static void setup(void) {
    char sub[300];
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    if (dir[0]) return;
    snprintf(dir, sizeof dir, "%s/asb-fuzz-kubeconfig-XXXXXX", base);
    FUZZ_REQUIRE(mkdtemp(dir) != NULL);
    atexit(cleanup);
    snprintf(sub, sizeof sub, "%s/sub", dir);
    mkdir(sub, 0700);
    put("ca.crt", "-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n", 55);
    put("client.crt", "-----BEGIN CERTIFICATE-----\nc\n-----END CERTIFICATE-----\n", 54);
    put("client.key", "-----BEGIN EC PRIVATE KEY-----\nk\n-----END EC PRIVATE KEY-----\n", 60);
    put("token", "file-token-value\n", 17);
    put("sub/ca.crt", "sub ca\n", 7);
}

static int blocked(const uint8_t *p, size_t n) {
    static const char *bad[] = {"dev", "proc", "sys", "run", "\\"};
    size_t i, k;
    for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        size_t l = strlen(bad[k]);
        for (i = 0; i + l <= n; i++)
            if (memcmp(p + i, bad[k], l) == 0) return 1;
    }
    return 0;
}

/* -- the reference walk ------------------------------------------------------ */

static const asb_yaml_node *ref_find(asb_yaml_doc *docs, int nf, const char *list,
                                     const char *item, const char *name, int *file) {
    int f;
    for (f = 0; f < nf; f++) {
        const asb_yaml_node *seq = asb_yaml_get(docs[f].root, list), *it;
        if (!seq || seq->type != ASB_YAML_SEQ) continue;
        for (it = seq->first; it; it = it->next) {
            const asb_yaml_node *nm = asb_yaml_get(it, "name");
            if (nm && nm->type == ASB_YAML_SCALAR && strcmp(nm->str, name) == 0) {
                const asb_yaml_node *body = asb_yaml_get(it, item);
                *file = f;
                return body ? body : it;
            }
        }
    }
    return NULL;
}

static const char *ref_str(const asb_yaml_node *map, const char *key) {
    const asb_yaml_node *v = asb_yaml_get(map, key);
    return v && v->type == ASB_YAML_SCALAR ? v->str : NULL;
}

/* Every token and password any file holds, to look for in errors. */
static int secret_in(const char *msg, asb_yaml_doc *docs, int nf) {
    int f;
    for (f = 0; f < nf; f++) {
        const asb_yaml_node *seq = asb_yaml_get(docs[f].root, "users"), *it;
        if (!seq || seq->type != ASB_YAML_SEQ) continue;
        for (it = seq->first; it; it = it->next) {
            const asb_yaml_node *u = asb_yaml_get(it, "user");
            const char *keys[2] = {"token", "password"};
            int k;
            for (k = 0; k < 2; k++) {
                const char *s = ref_str(u, keys[k]);
                /* short values can appear by chance (a line number) */
                if (s && strlen(s) >= 8 && strstr(msg, s)) return 1;
            }
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *names[3] = {"config", "sub/config", "config3"};
    char env[1600];
    const uint8_t *p;
    size_t left, i;
    int nf, f, ask;
    asb_yaml_doc docs[3];
    int parsed[3] = {0, 0, 0};
    asb_kubeconfig_desc desc;
    asb_kube_config cfg;
    asb_error err;
    asb_result r;
    if (size < 1 || size > 32768 || blocked(data, size)) return 0;
    setup();
    nf = 1 + data[0] % 3;
    ask = data[0] & 4;
    p = data + 1;
    left = size - 1;
    env[0] = '\0';
    for (f = 0; f < nf; f++) {
        const uint8_t *z = (const uint8_t *)memchr(p, 0, left);
        size_t n = z ? (size_t)(z - p) : left;
        char path[512];
        put(names[f], (const char *)p, n);
        p += n;
        left -= n;
        if (z) {
            p++;
            left--;
        }
        snprintf(path, sizeof path, "%s%s/%s", f ? ":" : "", dir, names[f]);
        strncat(env, path, sizeof env - strlen(env) - 1);
    }
    setenv("KUBECONFIG", env, 1);
    memset(&desc, 0, sizeof desc);
    if (ask) desc.context = "ctx";
    memset(&err, 0, sizeof err);
    r = asb_kubeconfig_load(&desc, &cfg, &err);

    /* the same files through the YAML reader, for the reference walk */
    for (f = 0; f < nf; f++) {
        char path[512], *text = NULL;
        size_t len = 0;
        asb_allocator a;
        asb__allocator_resolve(NULL, &a);
        snprintf(path, sizeof path, "%s/%s", dir, names[f]);
        FUZZ_REQUIRE(asb__read_file(&a, path, &text, &len, (size_t)1 << 20) == ASB_OK);
        /* the doc keeps pointers into text: keep it until the end */
        parsed[f] = asb_yaml_parse(&docs[f], text, len, path, NULL, NULL) == ASB_OK;
        if (!parsed[f]) memset(&docs[f], 0, sizeof docs[f]);
        free(text); /* asb_yaml copies what it keeps */
    }

    if (r == ASB_OK) {
        const asb_yaml_node *ctx, *cl;
        const char *want_ctx = desc.context;
        int cf = -1, clf = -1;
        for (f = 0; f < nf; f++) FUZZ_REQUIRE(parsed[f]);
        for (f = 0; !want_ctx && f < nf; f++) {
            const char *cc = ref_str(docs[f].root, "current-context");
            if (cc && *cc) want_ctx = cc;
        }
        FUZZ_REQUIRE(want_ctx && cfg.context && strcmp(cfg.context, want_ctx) == 0);
        ctx = ref_find(docs, nf, "contexts", "context", want_ctx, &cf);
        FUZZ_REQUIRE(ctx != NULL);
        FUZZ_REQUIRE(cfg.cluster && *cfg.cluster && ref_str(ctx, "cluster") &&
                     strcmp(cfg.cluster, ref_str(ctx, "cluster")) == 0);
        cl = ref_find(docs, nf, "clusters", "cluster", cfg.cluster, &clf);
        FUZZ_REQUIRE(cl != NULL);
        FUZZ_REQUIRE(cfg.server && *cfg.server && ref_str(cl, "server") &&
                     strcmp(cfg.server, ref_str(cl, "server")) == 0);
        FUZZ_REQUIRE(cfg.default_namespace && *cfg.default_namespace);
        FUZZ_REQUIRE((cfg.client_cert != NULL) == (cfg.client_key != NULL));
        FUZZ_REQUIRE(!cfg.token_file || cfg.token_file[0] == '/');
        FUZZ_REQUIRE(!cfg.token || *cfg.token);
        if (cfg.ca) FUZZ_REQUIRE(cfg.ca[cfg.ca_len] == '\0');
        if (cfg.client_key) FUZZ_REQUIRE(cfg.client_key[cfg.client_key_len] == '\0');
        if (cfg.exec) {
            const asb_kube_exec *e = cfg.exec;
            FUZZ_REQUIRE(e->command && *e->command);
            FUZZ_REQUIRE(!strchr(e->command, '/') || e->command[0] == '/');
            for (i = 0; i < e->arg_count; i++) FUZZ_REQUIRE(e->args[i] != NULL);
            if (e->args) FUZZ_REQUIRE(e->args[e->arg_count] == NULL);
            for (i = 0; i < e->env_count; i++)
                FUZZ_REQUIRE(e->env_names[i] && *e->env_names[i] && e->env_values[i]);
        }
        if (cfg.user && *cfg.user) {
            int uf = -1;
            FUZZ_REQUIRE(ref_find(docs, nf, "users", "user", cfg.user, &uf) != NULL);
            FUZZ_REQUIRE(cfg.user_origin && strstr(cfg.user_origin, names[uf]) != NULL);
        }
        asb_kube_config_free(&cfg);
    } else {
        FUZZ_REQUIRE(err.code == ASB_ERR_KUBECONFIG || err.code == ASB_ERR_OUT_OF_MEMORY);
        FUZZ_REQUIRE(err.message[0] != '\0');
        FUZZ_REQUIRE(!secret_in(err.message, docs, nf));
    }
    for (f = 0; f < nf; f++)
        if (parsed[f]) asb_yaml_free(&docs[f]);
    return 0;
}
