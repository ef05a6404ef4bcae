/* File names that need escaping, written and read back by agentsandbox.h
   against a runtime at ASB_RUNTIME_URL (no router, no cluster: the client
   in DIRECT mode, whose router headers a runtime ignores). names.sh runs
   it against agentsandbox-runtime and against the reference runtime,
   agent-sandbox's Python app (FastAPI + python-multipart), so both decode
   the multipart filename the way the client encodes it: quotes and
   backslashes as \" and \\ (issue 13). */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include "../asbtest.h"

static const char *runtime_url;
/* The reference runtime unquotes the already decoded path of /download,
   /list and /exists once more (main.py: urllib.parse.unquote on a path
   Starlette decoded), so a name holding %XX is read back as another name:
   with the Python SDK 1.0.8 as with this client. Set for it by names.sh. */
static int double_decodes;
static asb_client *client;
static asb_sandbox *sb;

static int setup(void) {
    static char cfg[128];
    asb_client_desc d;
    asb_error err;
    FILE *f;
    int fd;
    snprintf(cfg, sizeof cfg, "/tmp/asb-names-XXXXXX");
    fd = mkstemp(cfg); /* not the pid: another user could plant the name */
    if (fd < 0) return 0;
    f = fdopen(fd, "w");
    if (!f) return 0;
    /* never dialled: the handle is made here, not looked up */
    fprintf(f, "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
               "    server: http://127.0.0.1:9\ncontexts:\n- name: c\n  context: {cluster: c, "
               "user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n");
    if (fclose(f) != 0) return 0;
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = cfg;
    d.kube.http.retry.max_attempts = 1;
    d.mode = ASB_CONNECT_DIRECT;
    d.direct_url = runtime_url;
    d.claim_api_version = "v1alpha1";
    if (asb_client_create(&d, &client, &err) != ASB_OK) {
        fprintf(stderr, "client: %s\n", err.message);
        unlink(cfg);
        return 0;
    }
    unlink(cfg);
    sb = (asb_sandbox *)client->alloc.alloc_fn(sizeof *sb, client->alloc.user_data);
    if (!sb) return 0;
    memset(sb, 0, sizeof *sb);
    sb->client = client;
    snprintf(sb->claim, sizeof sb->claim, "sandbox-claim-00000000");
    snprintf(sb->name, sizeof sb->name, "sb-names");
    snprintf(sb->ns, sizeof sb->ns, "default");
    snprintf(sb->pod, sizeof sb->pod, "sb-names");
    sb->active = 1;
    sb->rt = &asb__runtime_legacy; /* what asb__sandbox_new would choose */
    sb->conn = client->conn;
    sb->next = client->handles;
    client->handles = sb;
    return 1;
}

ASBT_TEST(names_with_quotes_backslashes_spaces_percent_and_unicode_round_trip) {
    static const char *names[] = {
        "quo\"te.txt",     "back\\slash.txt", "both\\\"mix.txt", "\"\".txt",
        "with space.txt",  "100%.txt",        "%22literal.txt", "a%5Cb.txt",
        "\303\274nic\303\270de \342\202\254.txt", "dir with \"q\"/and\\back/f.txt",
    };
    size_t i;
    asb_error err;
    asb_run_result rr;
    /* the reference's upload creates no parent directory: make it */
    ASBT_EQ_RES(asb_sandbox_run(sb, "mkdir -p 'dir with \"q\"/and\\back'", 30000, &rr, &err),
                ASB_OK);
    ASBT_EQ_INT(rr.exit_code, 0);
    asb_run_result_free(&rr);
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (double_decodes && (strstr(names[i], "%22") || strstr(names[i], "%5C"))) {
            /* written under its name, read back as another (see above) */
            asb_buf back;
            asb_buf_init(&back, NULL);
            ASBT_EQ_RES(asb_sandbox_write(sb, names[i], "x", 1, &err), ASB_OK);
            ASBT_EQ_RES(asb_sandbox_read(sb, names[i], &back, &err), ASB_ERR_NOT_FOUND);
            asb_buf_free(&back);
            continue;
        }
        asb_buf back;
        int ex = 0;
        asb_result r = asb_sandbox_write(sb, names[i], names[i], strlen(names[i]), &err);
        if (r != ASB_OK) fprintf(stderr, "    write %s: %s\n", names[i], err.message);
        ASBT_EQ_RES(r, ASB_OK);
        asb_buf_init(&back, NULL);
        r = asb_sandbox_read(sb, names[i], &back, &err);
        if (r != ASB_OK) fprintf(stderr, "    read %s: %s\n", names[i], err.message);
        ASBT_EQ_RES(r, ASB_OK);
        ASBT_EQ_MEM(back.ptr, back.len, names[i], strlen(names[i]));
        asb_buf_free(&back);
        ASBT_EQ_RES(asb_sandbox_exists(sb, names[i], &ex, &err), ASB_OK);
        ASBT_EQ_INT(ex, 1);
    }
}

ASBT_TEST(a_trailing_slash_names_the_file_and_lists_the_directory) {
    asb_error err;
    asb_buf back;
    asb_file_list fl;
    asb_run_result rr;
    asb_buf_init(&back, NULL);
    ASBT_EQ_RES(asb_sandbox_run(sb, "mkdir -p slashdir", 30000, &rr, &err), ASB_OK);
    asb_run_result_free(&rr);
    ASBT_EQ_RES(asb_sandbox_write(sb, "slashdir/f.txt", "f", 1, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_write(sb, "trail.txt/", "t", 1, &err), ASB_OK);
    ASBT_EQ_RES(asb_sandbox_read(sb, "trail.txt", &back, &err), ASB_OK);
    ASBT_EQ_MEM(back.ptr, back.len, "t", 1);
    asb_buf_free(&back);
    ASBT_EQ_RES(asb_sandbox_list(sb, "slashdir/", &fl, &err), ASB_OK);
    ASBT_EQ_INT(fl.count, 1);
    if (fl.count == 1) ASBT_EQ_STR(fl.entries[0].name, "f.txt");
    asb_file_list_free(&fl);
}

ASBT_LIST(
    ASBT_CASE(names_with_quotes_backslashes_spaces_percent_and_unicode_round_trip)
    ASBT_CASE(a_trailing_slash_names_the_file_and_lists_the_directory)
)

int main(int argc, char **argv);
#define main asbt_main
ASBT_MAIN()
#undef main
int main(int argc, char **argv) {
    int rc;
    runtime_url = getenv("ASB_RUNTIME_URL");
    double_decodes = getenv("ASB_RUNTIME_DOUBLE_DECODES") != NULL;
    if (!runtime_url) {
        fprintf(stderr, "ASB_RUNTIME_URL is not set\n");
        return 2;
    }
    if (!setup()) return 2;
    rc = asbt_main(argc, argv);
    asb_client_free(client);
    return rc;
}
