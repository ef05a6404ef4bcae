/* Kubernetes credentials end to end, without a cluster: the server in the
   kubeconfig is the fault server's /echo, which shows exactly which
   Authorization header arrived. Exec plugins are tests/kube/plugin.sh in
   every mode (token, expiry, garbage, failure, hang, missing). The same
   server plays a throttling API server for the 429 retry. Runs under
   tests/http/with-peers.sh. */
#define AGENTSANDBOX_IMPLEMENTATION
#define ASB_MAX_LIST_PAGES 40 /* small, so a list that never ends ends soon */
#include "../agentsandbox.h"
#include "asbtest.h"
#include <dirent.h>
#include <spawn.h>
#include "scanalloc.h"

static char dir[256];
static char cfgpath[512];
static char logpath[512];
static char start_path[8192], start_cwd[1024];

static void setup(void) {
    /* mkdtemp: a name from the pid could be planted by another user */
    snprintf(dir, sizeof dir, "/tmp/asb-kube-creds-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(cfgpath, sizeof cfgpath, "%s/config", dir);
    snprintf(logpath, sizeof logpath, "%s/plugin.log", dir);
}

/* Writes cfgpath: a kubeconfig whose server is the fault server with
   `path` after its port ("" or "/<scenario>/<key>...": every request goes
   under it) and whose user is `user_yaml` (indented 4). 0 when it cannot
   be written. */
static int write_cfg_under(const char *path, const char *user_yaml) {
    FILE *f = fopen(cfgpath, "w");
    if (!f) return 0;
    fprintf(f,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
            "    server: http://127.0.0.1:%s%s\ncontexts:\n- name: c\n  context: {cluster: c, "
            "user: u}\ncurrent-context: c\nusers:\n- name: u\n  user:\n%s",
            getenv("ASB_PEER_FAULT_PORT"), path, user_yaml);
    return fclose(f) == 0;
}

/* Writes a kubeconfig for the fault server's root whose user is `user_yaml`.
   A file that cannot be written ends the run: every check after it would
   read the previous case's kubeconfig and pass or fail for that reason. */
static void write_cfg(const char *user_yaml) {
    if (!write_cfg_under("", user_yaml)) {
        perror(cfgpath);
        exit(1);
    }
}

/* cfgpath for the fault server's scenario `mode` under `key` (so each
   case's counters are its own), the user a static token. */
static int write_scenario_cfg(const char *mode, const char *key) {
    char path[256];
    snprintf(path, sizeof path, "/%s/%s", mode, key);
    return write_cfg_under(path, "    token: t\n");
}

static void write_plugin_cfg(const char *mode, const char *api, const char *extra) {
    char user[2048], cwd[1024];
    if (!getcwd(cwd, sizeof cwd)) {
        perror("getcwd");
        exit(1);
    }
    snprintf(user, sizeof user,
             "    exec:\n      apiVersion: %s\n      command: %s/tests/kube/plugin.sh\n"
             "      installHint: install the test plugin\n%s"
             "      env:\n      - {name: PLUGIN_MODE, value: %s}\n"
             "      - {name: PLUGIN_LOG, value: %s}\n      - {name: API, value: %s}\n",
             api, cwd, extra, mode, logpath, api);
    write_cfg(user);
    unlink(logpath);
}

static int plugin_runs(void) {
    FILE *f = fopen(logpath, "r");
    int n = 0, c;
    if (!f) return 0;
    while ((c = fgetc(f)) != EOF)
        if (c == '\n') n++;
    fclose(f);
    return n;
}

/* GET /echo and return the Authorization the server saw ("" if none). */
static asb_result echo_auth(asb_kube_client *kc, char *auth, size_t cap, asb_error *err) {
    asb_buf out;
    asb_json_doc doc;
    asb_json_iter it;
    int h;
    asb_result r;
    auth[0] = 0;
    asb_buf_init(&out, NULL);
    r = asb_kube_request(kc, "GET", "/echo", NULL, NULL, 0, &out, err);
    if (r == ASB_OK && asb_json_doc_parse(&doc, out.ptr, out.len, NULL, NULL) == ASB_OK) {
        it = asb_json_iter_begin(&doc, asb_json_find(&doc, 0, "headers"));
        while (asb_json_iter_next(&doc, &it, NULL, &h)) {
            int name = asb_json_find(&doc, h, "0"), value = asb_json_find(&doc, h, "1");
            char n[64];
            if (asb_json_get_string(&doc, name, n, sizeof n, NULL) == ASB_OK &&
                strcmp(n, "Authorization") == 0)
                asb_json_get_string(&doc, value, auth, cap, NULL);
        }
        asb_json_doc_free(&doc);
    }
    asb_buf_free(&out);
    return r;
}

static asb_kube_client *client(asb_error *err) {
    asb_kube_client_desc d;
    asb_kube_client *kc = NULL;
    memset(&d, 0, sizeof d);
    d.kubeconfig.path = cfgpath;
    d.exec_timeout_ms = 2000;
    d.http.retry.max_attempts = 1;
    if (asb_kube_client_create(&d, &kc, err) != ASB_OK) return NULL;
    return kc;
}

ASBT_TEST(static_token_and_basic_auth_are_sent) {
    asb_error err;
    asb_kube_client *kc;
    char auth[256];
    write_cfg("    token: static-abc\n");
    kc = client(&err);
    ASBT_CHECK(kc != NULL);
    ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_OK);
    ASBT_EQ_STR(auth, "Bearer static-abc");
    asb_kube_client_free(kc);
    write_cfg("    username: admin\n    password: 's3cret:x'\n");
    kc = client(&err);
    ASBT_CHECK(kc != NULL);
    ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_OK);
    ASBT_EQ_STR(auth, "Basic YWRtaW46czNjcmV0Ong=");
    asb_kube_client_free(kc);
}

ASBT_TEST(token_file_is_reread_when_it_rotates) {
    asb_error err;
    asb_kube_client *kc;
    char auth[256], tf[600], user[700];
    FILE *f;
    snprintf(tf, sizeof tf, "%s/token", dir);
    f = fopen(tf, "w");
    fputs("first-token\n", f);
    fclose(f);
    snprintf(user, sizeof user, "    tokenFile: %s\n", tf);
    write_cfg(user);
    kc = client(&err);
    ASBT_CHECK(kc != NULL);
    ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_OK);
    ASBT_EQ_STR(auth, "Bearer first-token");
    f = fopen(tf, "w");
    fputs("second-token-longer\n", f);
    fclose(f);
    ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_OK);
    ASBT_EQ_STR(auth, "Bearer second-token-longer");
    asb_kube_client_free(kc);
}

ASBT_TEST(exec_plugin_token_is_cached_and_gets_exec_info) {
    static const char *apis[] = {"client.authentication.k8s.io/v1",
                                 "client.authentication.k8s.io/v1beta1"};
    int i;
    for (i = 0; i < 2; i++) {
        asb_error err;
        asb_kube_client *kc;
        char auth[256], info[600];
        FILE *f;
        size_t n;
        write_plugin_cfg("token", apis[i], "      interactiveMode: Never\n");
        kc = client(&err);
        ASBT_CHECK(kc != NULL);
        ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_OK);
        ASBT_EQ_STR(auth, "Bearer tok-1");
        ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_OK);
        ASBT_EQ_STR(auth, "Bearer tok-1"); /* cached: no expiry given */
        ASBT_EQ_INT(plugin_runs(), 1);
        snprintf(info, sizeof info, "%s.info", logpath);
        f = fopen(info, "r");
        ASBT_CHECK(f != NULL);
        n = fread(info, 1, sizeof info - 1, f);
        info[n] = 0;
        fclose(f);
        ASBT_CONTAINS(info, "\"kind\":\"ExecCredential\"");
        ASBT_CONTAINS(info, apis[i]);
        ASBT_CONTAINS(info, "\"interactive\":false");
        asb_kube_client_free(kc);
    }
}

ASBT_TEST(expired_credentials_run_the_plugin_again) {
    asb_error err;
    asb_kube_client *kc;
    char auth[256];
    write_plugin_cfg("expired", "client.authentication.k8s.io/v1beta1", "");
    kc = client(&err);
    ASBT_CHECK(kc != NULL);
    ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_OK);
    ASBT_EQ_STR(auth, "Bearer tok-1");
    ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_OK);
    ASBT_EQ_STR(auth, "Bearer tok-2");
    asb_kube_client_free(kc);
    write_plugin_cfg("future", "client.authentication.k8s.io/v1beta1", "");
    kc = client(&err);
    ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_OK);
    ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_OK);
    ASBT_EQ_INT(plugin_runs(), 1);
    asb_kube_client_free(kc);
}

ASBT_TEST(a_401_runs_the_plugin_once_more) {
    asb_error err;
    asb_kube_client *kc;
    write_plugin_cfg("future", "client.authentication.k8s.io/v1beta1", "");
    kc = client(&err);
    ASBT_CHECK(kc != NULL);
    ASBT_EQ_RES(asb_kube_request(kc, "GET", "/status/401", NULL, NULL, 0, NULL, &err),
                ASB_ERR_KUBE_API);
    ASBT_EQ_INT(err.http_status, 401);
    ASBT_EQ_INT(plugin_runs(), 2); /* first credential, then one refresh */
    asb_kube_client_free(kc);
}

ASBT_TEST(broken_plugins_fail_clearly) {
    static const struct {
        const char *mode, *why;
    } cases[] = {
        {"garbage", "not an ExecCredential"},
        {"wrongapi", "apiVersion is not"},
        {"onlycert", "only a certificate or only a key"},
        {"fail", "exit code 3: login required"},
        {"hang", "did not finish within 2000 ms"},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        asb_error err;
        asb_kube_client *kc;
        char auth[64];
        int64_t t0 = asb__now_ms();
        write_plugin_cfg(cases[i].mode, "client.authentication.k8s.io/v1beta1", "");
        kc = client(&err);
        ASBT_CHECK(kc != NULL);
        ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_ERR_CREDENTIALS);
        ASBT_CONTAINS(err.message, cases[i].why);
        /* "hang" sleeps 30 s: its message names the 2 s exec timeout, and
           the failure came before the plugin would have ended (an order;
           the others fail as soon as the plugin exits) */
        ASBT_CHECK(asb__now_ms() - t0 < 30000);
        asb_kube_client_free(kc);
    }
}

ASBT_TEST(missing_plugin_shows_its_install_hint) {
    asb_error err;
    asb_kube_client *kc;
    char auth[64];
    write_cfg("    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n"
              "      command: asb-no-such-plugin\n      installHint: brew install it\n");
    kc = client(&err);
    ASBT_CHECK(kc != NULL);
    ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_ERR_CREDENTIALS);
    ASBT_CONTAINS(err.message, "cannot run: No such file or directory");
    ASBT_CONTAINS(err.message, "brew install it");
    asb_kube_client_free(kc);
}

ASBT_TEST(legacy_auth_provider_is_refused_with_advice) {
    asb_error err;
    asb_kube_client *kc;
    write_cfg("    auth-provider:\n      name: oidc\n      config: {id-token: x}\n");
    kc = client(&err);
    ASBT_CHECK(kc == NULL);
    ASBT_EQ_RES(err.code, ASB_ERR_CREDENTIALS);
    ASBT_CONTAINS(err.message, "auth-provider \"oidc\"");
    ASBT_CONTAINS(err.message, "exec credential plugin");
}

ASBT_TEST(in_cluster_config_reads_the_service_account) {
    char sa[600], p[700];
    FILE *f;
    asb_kube_config c;
    asb_error err;
    snprintf(sa, sizeof sa, "%s/sa", dir);
    mkdir(sa, 0700);
    snprintf(p, sizeof p, "%s/token", sa);
    f = fopen(p, "w");
    fputs("sa-token", f);
    fclose(f);
    snprintf(p, sizeof p, "%s/ca.crt", sa);
    f = fopen(p, "w");
    fputs("-----BEGIN CERTIFICATE-----\n", f);
    fclose(f);
    snprintf(p, sizeof p, "%s/namespace", sa);
    f = fopen(p, "w");
    fputs("team-x\n", f);
    fclose(f);
    unsetenv("KUBERNETES_SERVICE_HOST");
    ASBT_EQ_RES(asb_kube_config_in_cluster(sa, NULL, &c, &err), ASB_ERR_KUBECONFIG);
    ASBT_CONTAINS(err.message, "not in a cluster");
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    unsetenv("POD_NAMESPACE");
    ASBT_EQ_RES(asb_kube_config_in_cluster(sa, NULL, &c, &err), ASB_OK);
    ASBT_EQ_STR(c.server, "https://[fd00::1]:443");
    ASBT_EQ_STR(c.default_namespace, "team-x");
    ASBT_CONTAINS(c.token_file, "/sa/token");
    ASBT_EQ_INT(c.ca_len, 28);
    asb_kube_config_free(&c);
    setenv("POD_NAMESPACE", "from-env", 1);
    ASBT_EQ_RES(asb_kube_config_in_cluster(sa, NULL, &c, &err), ASB_OK);
    ASBT_EQ_STR(c.default_namespace, "from-env");
    asb_kube_config_free(&c);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unsetenv("POD_NAMESPACE");
}

ASBT_TEST(secrets_never_reach_error_messages) {
    asb_error err;
    asb_kube_client *kc;
    write_cfg("    token: supersecret-token-value\n");
    kc = client(&err);
    ASBT_CHECK(kc != NULL);
    ASBT_CHECK(asb_kube_request(kc, "GET", "/status/403", NULL, NULL, 0, NULL, &err) != ASB_OK);
    ASBT_CHECK(strstr(err.message, "supersecret") == NULL);
    ASBT_CHECK(memmem(err.body, err.body_len, "supersecret", 11) == NULL);
    asb_kube_client_free(kc);
}

/* R8: a server whose Status echoes the request's headers (message and
   body) must not put the credential we sent into err: masked as the
   router path masks its token. Bearer tokens and basic credentials. */
ASBT_TEST(credentials_echoed_in_a_status_are_masked_in_err) {
    static const char *users[] = {"    token: echoed-bearer-token-0123456789abcdef\n",
                                  "    username: admin\n    password: echoed-password-42\n"};
    static const char *secrets[] = {"echoed-bearer-token-0123456789abcdef",
                                    "YWRtaW46ZWNob2VkLXBhc3N3b3JkLTQy"}; /* admin:echoed-password-42 */
    static const char *shown[] = {"Authorization: Bearer ****", "Authorization: Basic ****"};
    size_t i;
    for (i = 0; i < 2; i++) {
        asb_error err;
        asb_kube_client *kc;
        write_cfg(users[i]);
        kc = client(&err);
        ASBT_CHECK(kc != NULL);
        ASBT_EQ_RES(asb_kube_request(kc, "GET", "/status-echo/400", NULL, NULL, 0, NULL, &err),
                    ASB_ERR_KUBE_API);
        ASBT_EQ_INT(err.http_status, 400);
        /* the echo did arrive, masked, in both places */
        ASBT_CONTAINS(err.message, shown[i]);
        ASBT_CHECK(memmem(err.body, err.body_len, shown[i], strlen(shown[i])) != NULL);
        ASBT_CHECK(strstr(err.message, secrets[i]) == NULL);
        ASBT_CHECK(memmem(err.body, err.body_len, secrets[i], strlen(secrets[i])) == NULL);
        ASBT_CHECK(memmem(err.body, err.body_len, secrets[i], 8) == NULL);
        asb_kube_client_free(kc);
    }
}

/* R44: a server whose Status puts the bearer token into `reason` and
   whose headers echo it (X-Request-ID, Retry-After, Content-Type): the
   token is masked in err.reason, in the message that quotes the reason
   (cut at 63 bytes and followed by ": denied") and in the kept headers;
   no run of 16 of its bytes in any field. A kubeconfig's short static
   token (whole in each field) and a long one (cut in each). */
ASBT_TEST(a_token_echoed_in_a_status_reason_and_headers_is_masked_in_every_err_field) {
    static const size_t lens[] = {30, 300};
    size_t i;
    for (i = 0; i < 2; i++) {
        char tok[301], user[400];
        asb_error err;
        asb_kube_client *kc;
        size_t shown = lens[i] < ASB_ERROR_REASON_SIZE ? lens[i] : ASB_ERROR_REASON_SIZE - 1;
        asbt_secret(tok, lens[i], 45 + i);
        snprintf(user, sizeof user, "    token: %s\n", tok);
        write_cfg(user);
        kc = client(&err);
        ASBT_CHECK(kc != NULL);
        ASBT_EQ_RES(asb_kube_request(kc, "GET", "/header-echo/403", NULL, NULL, 0, NULL, &err),
                    ASB_ERR_KUBE_API);
        ASBT_EQ_INT(err.http_status, 403);
        /* the echo arrived, masked, in each place */
        ASBT_EQ_INT(strlen(err.reason), shown);
        ASBT_EQ_INT(strspn(err.reason, "*"), shown);
        ASBT_CONTAINS(err.message, ": 403 ********");
        ASBT_CONTAINS(err.message, "*: denied");
        ASBT_CHECK(err.request_id[0] == '*' && strspn(err.request_id, "*") == strlen(err.request_id));
        ASBT_CHECK(err.retry_after[0] == '*' && strspn(err.retry_after, "*") == strlen(err.retry_after));
        ASBT_CHECK(err.content_type[0] == '*' &&
                   strspn(err.content_type, "*") == strlen(err.content_type));
        ASBT_CHECK(!asbt_err_holds_window(&err, tok, 16));
        asb_kube_client_free(kc);
    }
}

/* An API server's 429 comes from its admission of requests, before any
   handler: the Kubernetes layer retries it whatever the method, after
   the server's Retry-After. (The fault server stands in for a throttling
   API server; a real one throttles only under load.) */
ASBT_TEST(an_api_servers_429_is_retried_even_for_a_post) {
    asb_kube_client_desc d;
    asb_kube_client *kc = NULL;
    asb_error err;
    asb_buf out;
    asb_json_doc doc;
    int64_t n = -1, t0;
    write_cfg("    token: t\n");
    memset(&d, 0, sizeof d);
    d.kubeconfig.path = cfgpath;
    d.http.retry.backoff_ms = 10;
    ASBT_EQ_RES(asb_kube_client_create(&d, &kc, &err), ASB_OK);
    t0 = asb__now_ms();
    ASBT_EQ_RES(asb_kube_request(kc, "POST", "/flaky-503/kube429/1?status=429&retry_after=1",
                                 "application/json", "{}", 2, NULL, &err),
                ASB_OK);
    ASBT_CHECK(asb__now_ms() - t0 >= 1000); /* the server's wait, not the 10 ms backoff */
    asb_buf_init(&out, NULL);
    ASBT_EQ_RES(asb_kube_request(kc, "GET", "/count/kube429", NULL, NULL, 0, &out, &err), ASB_OK);
    if (asb_json_doc_parse(&doc, out.ptr, out.len, NULL, NULL) == ASB_OK) {
        asb_json_get_int64(&doc, asb_json_find(&doc, 0, "count"), &n);
        asb_json_doc_free(&doc);
    }
    ASBT_EQ_INT(n, 2);
    /* a 503 to a POST may have run: never sent twice */
    ASBT_CHECK(asb_kube_request(kc, "POST", "/flaky-503/kube503/1", "application/json", "{}", 2,
                                NULL, &err) != ASB_OK);
    ASBT_EQ_INT(err.http_status, 503);
    out.len = 0;
    n = -1;
    ASBT_EQ_RES(asb_kube_request(kc, "GET", "/count/kube503", NULL, NULL, 0, &out, &err), ASB_OK);
    if (asb_json_doc_parse(&doc, out.ptr, out.len, NULL, NULL) == ASB_OK) {
        asb_json_get_int64(&doc, asb_json_find(&doc, 0, "count"), &n);
        asb_json_doc_free(&doc);
    }
    ASBT_EQ_INT(n, 1);
    asb_buf_free(&out);
    asb_kube_client_free(kc);
}

static int watch_event_seen(void *user, const asb_watch_event *ev) {
    (void)ev;
    ++*(int *)user;
    return 0;
}

/* Requests the fault server counted under key. */
static int64_t fault_count(const char *key) {
    asb_kube_client *kc;
    asb_error err;
    asb_buf out;
    asb_json_doc doc;
    char path[128];
    int64_t n = -1;
    write_cfg("    token: t\n");
    kc = client(&err);
    if (!kc) return -1;
    asb_buf_init(&out, NULL);
    snprintf(path, sizeof path, "/count/%s", key);
    if (asb_kube_request(kc, "GET", path, NULL, NULL, 0, &out, &err) == ASB_OK &&
        asb_json_doc_parse(&doc, out.ptr, out.len, NULL, NULL) == ASB_OK) {
        asb_json_get_int64(&doc, asb_json_find(&doc, 0, "count"), &n);
        asb_json_doc_free(&doc);
    }
    asb_buf_free(&out);
    asb_kube_client_free(kc);
    return n;
}

/* Watches through a server whose every answer is scenario `mode` of the
   fault server, for deadline_ms; returns how many requests it got. */
static int64_t watch_against(const char *mode, const char *key, int deadline_ms, int *events,
                             asb_result *res) {
    asb_kube_client_desc d;
    asb_kube_client *kc = NULL;
    asb_kube_resource r;
    asb_watch_opts wo;
    asb_error err;
    if (!write_scenario_cfg(mode, key)) return -1;
    memset(&d, 0, sizeof d);
    d.kubeconfig.path = cfgpath;
    if (asb_kube_client_create(&d, &kc, &err) != ASB_OK) return -1;
    memset(&r, 0, sizeof r);
    r.group = "agents.x-k8s.io";
    r.version = "v1alpha1";
    r.plural = "sandboxes";
    memset(&wo, 0, sizeof wo);
    wo.deadline_ms = deadline_ms;
    *events = 0;
    *res = asb_kube_watch(kc, &r, "default", &wo, watch_event_seen, events, &err);
    asb_kube_client_free(kc);
    return fault_count(key);
}

/* R10: a server that answers every watch with 410 Gone (as a status or as
   an ERROR event) used to get a new request at once, hundreds a second.
   The restarts back off: in 2.5 s, at most a handful (the pauses, 50-100,
   100-200, 200-400, 400-800, 800-1600 ms, allow 7; the bound leaves room).
   Events between the 410s reset the pause, so that server gets more
   requests than one that never sends any, but still a bounded number. */
ASBT_TEST(a_watch_backs_off_from_a_server_that_keeps_answering_410) {
    static const char *modes[] = {"gone", "gone-event"};
    char key[64];
    int64_t n, quiet = 0;
    int events, i;
    asb_result r;
    for (i = 0; i < 2; i++) {
        snprintf(key, sizeof key, "w410-%d-%s", (int)getpid(), modes[i]);
        n = watch_against(modes[i], key, 2500, &events, &r);
        fprintf(stderr, "    %s: %lld requests in 2.5 s\n", modes[i], (long long)n);
        ASBT_EQ_RES(r, ASB_ERR_TIMEOUT);
        ASBT_EQ_INT(events, 0);
        ASBT_CHECK(n >= 2);  /* it did restart */
        ASBT_CHECK(n <= 12); /* ...but not in a loop */
        quiet = n;
    }
    /* a sibling: a watch the server ends at once, with no event, every
       time (client-go calls it a very short watch) pauses the same way */
    snprintf(key, sizeof key, "w410-%d-empty", (int)getpid());
    n = watch_against("empty-watch", key, 2500, &events, &r);
    fprintf(stderr, "    empty-watch: %lld requests in 2.5 s\n", (long long)n);
    ASBT_EQ_RES(r, ASB_ERR_TIMEOUT);
    ASBT_CHECK(n >= 2 && n <= 12);
    snprintf(key, sizeof key, "w410-%d-after-event", (int)getpid());
    n = watch_against("gone-after-event", key, 2500, &events, &r);
    fprintf(stderr, "    gone-after-event: %lld requests, %d events in 2.5 s\n", (long long)n,
            events);
    ASBT_EQ_RES(r, ASB_ERR_TIMEOUT);
    /* one event per watch, but the last watch may reach the server just
       before the deadline and end before its event is read */
    ASBT_CHECK(events == n || events == n - 1);
    ASBT_CHECK(n > quiet);  /* progress started the pauses over */
    ASBT_CHECK(n <= 60);    /* each restart still waits at least 50 ms */
}

/* A kube client whose API server is the fault server's /<mode>/<key>
   (R48: "gone", every request 410; "list-then/gone", lists answer and
   every watch is 410; "list-then/empty-watch", every watch ends at once). */
static asb_kube_client *client_at(const char *mode, const char *key) {
    asb_kube_client_desc d;
    asb_kube_client *kc = NULL;
    asb_error err;
    if (!write_scenario_cfg(mode, key)) return NULL;
    memset(&d, 0, sizeof d);
    d.kubeconfig.path = cfgpath;
    if (asb_kube_client_create(&d, &kc, &err) != ASB_OK) return NULL;
    return kc;
}

/* A waiter's callback: counts the events it is given; 1 ends the wait
   when *user was set to -1 beforehand (the object was found). */
static int informer_event_counted(void *user, const asb_watch_event *ev) {
    int *n = (int *)user;
    (void)ev;
    if (*n < 0) return 1;
    ++*n;
    return 0;
}

/* R48: the shared watch (informer) relisted at once after a 410 Gone, its
   watch's or its list's: a server answering every watch (or everything)
   with 410 got a list and a watch as fast as it answered (47 lists and
   46 watches in 2 s). The relists back off as R10's watch restarts do:
   pauses of at least 50, 100, 200, 400, 800 and 1600 ms put a seventh
   round of list and watch at 3.15 s or later, so a waiter of 2 s (left
   more than a second late on a loaded machine still) sees at most six
   rounds: 12 requests. The waiters are still served: one whose object a
   list shows ends found, one that is never satisfied gets the object
   once per list and ends at its deadline. */
ASBT_TEST(the_shared_watch_backs_off_from_a_server_that_keeps_answering_410) {
    static const char *modes[] = {"list-then/gone", "gone"};
    asb_kube_resource res;
    int i;
    memset(&res, 0, sizeof res);
    res.group = "agents.x-k8s.io";
    res.version = "v1alpha1";
    res.plural = "sandboxes";
    for (i = 0; i < 2; i++) {
        char key[64], lkey[80];
        asb_kube_client *kc;
        asb__waiter *never = NULL, *found = NULL;
        asb_error err;
        int seen = 0, hit = -1, gap = 0;
        int64_t n, lists;
        snprintf(key, sizeof key, "i410-%d-%d", (int)getpid(), i);
        kc = client_at(modes[i], key);
        ASBT_CHECK(kc != NULL);
        if (!kc) return;
        memset(&err, 0, sizeof err);
        ASBT_EQ_RES(asb__informer_join(kc, &res, "default", "s", NULL, informer_event_counted,
                                       &seen, &never, &err),
                    ASB_OK);
        if (i == 0)
            ASBT_EQ_RES(asb__informer_join(kc, &res, "default", "s", NULL,
                                           informer_event_counted, &hit, &found, &err),
                        ASB_OK);
        asb__informer_arm(never, "u-s", "5");
        if (found) {
            asb__informer_arm(found, "u-s", "5");
            ASBT_EQ_RES(asb__informer_wait(found, asb__now_ms() + 30000, NULL, &gap, &err),
                        ASB_OK);
            asb__informer_leave(found);
        }
        ASBT_EQ_RES(asb__informer_wait(never, asb__now_ms() + 2000, NULL, &gap, &err),
                    ASB_ERR_TIMEOUT);
        ASBT_EQ_INT(gap, 0);
        asb__informer_leave(never);
        asb_kube_client_free(kc);
        n = fault_count(key);
        snprintf(lkey, sizeof lkey, "%s-lists", key);
        lists = i == 0 ? fault_count(lkey) : n;
        fprintf(stderr, "    %s: %lld requests (%lld lists) in 2 s, %d events to the waiter\n",
                modes[i], (long long)n, (long long)lists, seen);
        ASBT_CHECK(lists >= 2);  /* it did list again */
        ASBT_CHECK(n <= 12);     /* ...but not in a loop */
        if (i == 0) {
            /* one watch per list, and the object once per list (R27) */
            ASBT_CHECK(n == 2 * lists || n == 2 * lists - 1);
            ASBT_CHECK(seen <= lists && seen + 1 >= lists && seen >= 1);
        } else {
            ASBT_EQ_INT(seen, 0);
        }
    }
}

/* R48: the shared watch's pauses (after 410, and asb_kube_watch's after a
   watch that ends at once, which was a plain sleep) end when the last
   waiter leaves or the client is freed. The pause is allowed to grow to
   2.5-5 s first (14 requests: seven rounds of list and 410; or a list and
   seven watches that end at once); then leaving and freeing must take far
   less than that pause (2 s: a hang guard, not a timing). */
ASBT_TEST(freeing_the_client_during_a_shared_watch_pause_returns_promptly) {
    static const char *modes[] = {"list-then/gone", "list-then/empty-watch"};
    static const int64_t reach[] = {14, 8};
    asb_kube_resource res;
    int i;
    memset(&res, 0, sizeof res);
    res.group = "agents.x-k8s.io";
    res.version = "v1alpha1";
    res.plural = "sandboxes";
    for (i = 0; i < 2; i++) {
        char key[64];
        asb_kube_client *kc;
        asb__waiter *w = NULL;
        asb_error err;
        int seen = 0;
        int64_t n = 0, t0, until, took;
        snprintf(key, sizeof key, "ifree-%d-%d", (int)getpid(), i);
        kc = client_at(modes[i], key);
        ASBT_CHECK(kc != NULL);
        if (!kc) return;
        ASBT_EQ_RES(asb__informer_join(kc, &res, "default", "s", "u-s",
                                       informer_event_counted, &seen, &w, &err),
                    ASB_OK);
        until = asb__now_ms() + 60000; /* the pauses add up to 6.3 s at most */
        while ((n = fault_count(key)) < reach[i] && asb__now_ms() < until) asb__sleep_ms(20);
        fprintf(stderr, "    %s: %lld requests before the free\n", modes[i], (long long)n);
        ASBT_CHECK(n >= reach[i]);
        t0 = asb__now_ms();
        asb__informer_leave(w);
        asb_kube_client_free(kc);
        took = asb__now_ms() - t0;
        fprintf(stderr, "    %s: leave and free took %lld ms\n", modes[i], (long long)took);
        ASBT_CHECK(took < 2000);
        ASBT_CHECK(fault_count(key) <= reach[i] + 1); /* nothing after the free */
    }
}

/* The whole of a small file, NUL-terminated (libc memory; free it). */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    char *p;
    long n;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    rewind(f);
    p = (char *)malloc((size_t)n + 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    if (p) p[n] = 0;
    fclose(f);
    return p;
}

/* A kube client on the scanning allocator makes a few calls (a success,
   a refusal) and is freed. The secret `live` (unless -1) must have been in
   the allocator's blocks meanwhile (else the check proves nothing); no block
   may go back to free_fn still holding a secret; nothing may leak. */
static int scan_client_session(scanalloc *sa, int live, int *leaked) {
    asb_kube_client_desc d;
    asb_kube_client *kc = NULL;
    asb_error err;
    int i, ok = 1, was_live;
    memset(&d, 0, sizeof d);
    d.kubeconfig.path = cfgpath;
    d.exec_timeout_ms = 5000;
    d.http.retry.max_attempts = 1;
    d.http.allocator = &sa->a;
    if (asb_kube_client_create(&d, &kc, &err) != ASB_OK) {
        fprintf(stderr, "    client: %s\n", err.message);
        return 0;
    }
    for (i = 0; i < 3; i++)
        if (asb_kube_request(kc, "GET", "/status/200", NULL, NULL, 0, NULL, &err) != ASB_OK) {
            fprintf(stderr, "    request: %s\n", err.message);
            ok = 0;
        }
    if (asb_kube_request(kc, "GET", "/status/403", NULL, NULL, 0, NULL, &err) != ASB_ERR_KUBE_API)
        ok = 0;
    was_live = live < 0 || scanalloc_live_has(sa, live);
    asb_kube_client_free(kc);
    *leaked = scanalloc_live_count(sa);
    return ok && was_live;
}

/* R6: secrets are wiped before their memory goes back to the allocator,
   growth included. The scanning allocator (tests/scanalloc.h) checks every
   block freed, and makes realloc_fn always move, for: a kubeconfig with a
   token, client-key-data and a password (loaded alone, then through a
   client that parses the key and sends the 1.5 KB token on every
   request, so the request head grows past its first blocks); a token file
   that rotates to a longer token; an exec plugin's token and its client
   key. Before the fix each of these left copies behind. */
ASBT_TEST(secrets_are_wiped_before_their_memory_is_freed) {
    static char token[1600], tf_token[1200], key_line[40], key_b64[40], basic_b64[64];
    static const char password[] = "scan-password-3e1d0c55";
    char *key_pem, *cert_pem, user[16384], path[600], tf[600], *pos;
    const char *certs = getenv("ASB_PEER_CERTS_DIR");
    asb_buf b64, cert_b64;
    asb_kubeconfig_desc kd;
    asb_kube_config cfg;
    asb_error err;
    scanalloc sa;
    size_t i;
    int leaked = 0;
    FILE *f;
    ASBT_CHECK(certs != NULL);
    /* the secrets and the needles that find their copies */
    snprintf(token, sizeof token, "scan-token-Q7b2xK9pLm-");
    for (i = strlen(token); i < sizeof token - 1; i++) token[i] = (char)('a' + (i * 7) % 26);
    token[sizeof token - 1] = 0;
    snprintf(path, sizeof path, "%s/client-rsa.key", certs);
    key_pem = slurp(path);
    snprintf(path, sizeof path, "%s/client-rsa.crt", certs);
    cert_pem = slurp(path);
    ASBT_CHECK(key_pem != NULL && cert_pem != NULL);
    pos = strchr(key_pem, '\n'); /* the PEM body's first line */
    ASBT_CHECK(pos != NULL && strlen(pos + 1) > 40);
    memcpy(key_line, pos + 1, 32);
    key_line[32] = 0;
    asb_buf_init(&b64, NULL);
    asb_buf_init(&cert_b64, NULL);
    asb_base64_encode(key_pem, strlen(key_pem), &b64);
    asb_base64_encode(cert_pem, strlen(cert_pem), &cert_b64);
    ASBT_CHECK(b64.len > 300);
    memcpy(key_b64, b64.ptr + 200, 32);
    key_b64[32] = 0;
    {
        asb_buf bb;
        asb_buf_init(&bb, NULL);
        asb_base64_encode("admin:scan-password-3e1d0c55", 28, &bb);
        snprintf(basic_b64, sizeof basic_b64, "%s", bb.ptr);
        asb_buf_free(&bb);
    }

    /* 1. the kubeconfig: token, key, password */
    scanalloc_init(&sa);
    scanalloc_secret(&sa, "scan-token-Q7b2xK9pLm");
    scanalloc_secret(&sa, key_line);
    scanalloc_secret(&sa, key_b64);
    scanalloc_secret(&sa, password);
    scanalloc_secret(&sa, basic_b64);
    snprintf(user, sizeof user,
             "    token: %s\n    username: admin\n    password: %s\n"
             "    client-certificate-data: %s\n    client-key-data: %s\n",
             token, password, cert_b64.ptr, b64.ptr);
    write_cfg(user);
    memset(&kd, 0, sizeof kd);
    kd.path = cfgpath;
    kd.allocator = &sa.a;
    ASBT_EQ_RES(asb_kubeconfig_load(&kd, &cfg, &err), ASB_OK);
    ASBT_CHECK(scanalloc_live_has(&sa, 0) && scanalloc_live_has(&sa, 1) &&
               scanalloc_live_has(&sa, 3));
    asb_kube_config_free(&cfg);
    ASBT_EQ_INT(sa.hits, 0);
    ASBT_EQ_INT(scanalloc_live_count(&sa), 0);
    /* ...and through a client: requests with the token, the key parsed */
    ASBT_CHECK(scan_client_session(&sa, 0, &leaked));
    ASBT_CHECK(scanalloc_live_has(&sa, 4) == 0);
    ASBT_EQ_INT(sa.hits, 0);
    ASBT_EQ_INT(leaked, 0);
    scanalloc_fini(&sa);

    /* 2. a token file, rotated to a longer token while the client lives */
    snprintf(tf_token, sizeof tf_token, "scan-tokenfile-Zx81");
    for (i = strlen(tf_token); i < 300; i++) tf_token[i] = (char)('A' + (i * 11) % 26);
    tf_token[300] = 0;
    snprintf(tf, sizeof tf, "%s/scan-token", dir);
    f = fopen(tf, "w");
    ASBT_CHECK(f != NULL);
    fprintf(f, "%s\n", tf_token);
    fclose(f);
    snprintf(user, sizeof user, "    tokenFile: %s\n", tf);
    write_cfg(user);
    scanalloc_init(&sa);
    scanalloc_secret(&sa, "scan-tokenfile-Zx81");
    {
        asb_kube_client_desc d;
        asb_kube_client *kc = NULL;
        memset(&d, 0, sizeof d);
        d.kubeconfig.path = cfgpath;
        d.http.retry.max_attempts = 1;
        d.http.allocator = &sa.a;
        ASBT_EQ_RES(asb_kube_client_create(&d, &kc, &err), ASB_OK);
        ASBT_EQ_RES(asb_kube_request(kc, "GET", "/status/200", NULL, NULL, 0, NULL, &err),
                    ASB_OK);
        for (i = 300; i < sizeof tf_token - 1; i++) tf_token[i] = (char)('A' + (i * 5) % 26);
        tf_token[sizeof tf_token - 1] = 0;
        f = fopen(tf, "w");
        ASBT_CHECK(f != NULL);
        fprintf(f, "%s\n", tf_token);
        fclose(f);
        ASBT_EQ_RES(asb_kube_request(kc, "GET", "/status/200", NULL, NULL, 0, NULL, &err),
                    ASB_OK);
        ASBT_CHECK(scanalloc_live_has(&sa, 0));
        asb_kube_client_free(kc);
    }
    ASBT_EQ_INT(sa.hits, 0);
    ASBT_EQ_INT(scanalloc_live_count(&sa), 0);
    scanalloc_fini(&sa);

    /* 3. an exec plugin's token, then its client certificate and key */
    snprintf(user, sizeof user,
             "      - {name: PLUGIN_TOKEN, value: scan-exectoken-%.1000s}\n", token + 22);
    write_plugin_cfg("given", "client.authentication.k8s.io/v1", "");
    {
        /* the token goes into the plugin's env list */
        char cwd[1024], u2[4096];
        if (!getcwd(cwd, sizeof cwd)) cwd[0] = 0;
        snprintf(u2, sizeof u2,
                 "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                 "      command: %s/tests/kube/plugin.sh\n"
                 "      env:\n      - {name: PLUGIN_MODE, value: given}\n"
                 "      - {name: PLUGIN_LOG, value: %s}\n"
                 "      - {name: API, value: client.authentication.k8s.io/v1}\n%s",
                 cwd, logpath, user);
        write_cfg(u2);
        scanalloc_init(&sa);
        scanalloc_secret(&sa, "scan-exectoken-");
        ASBT_CHECK(scan_client_session(&sa, 0, &leaked));
        ASBT_EQ_INT(sa.hits, 0);
        ASBT_EQ_INT(leaked, 0);
        scanalloc_fini(&sa);
        snprintf(path, sizeof path, "%s/client-rsa.key", certs);
        snprintf(tf, sizeof tf, "%s/client-rsa.crt", certs);
        snprintf(u2, sizeof u2,
                 "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                 "      command: %s/tests/kube/plugin.sh\n"
                 "      env:\n      - {name: PLUGIN_MODE, value: certkey}\n"
                 "      - {name: PLUGIN_LOG, value: %s}\n"
                 "      - {name: API, value: client.authentication.k8s.io/v1}\n"
                 "      - {name: PLUGIN_CERT, value: %s}\n      - {name: PLUGIN_KEY, value: %s}\n",
                 cwd, logpath, tf, path);
        write_cfg(u2);
        unlink(logpath);
        scanalloc_init(&sa);
        scanalloc_secret(&sa, key_line);
        /* the parsed key lives in mbedTLS's memory, not in ours: that the
           plugin ran is what shows the key went through */
        ASBT_CHECK(scan_client_session(&sa, -1, &leaked));
        ASBT_EQ_INT(plugin_runs(), 1);
        ASBT_EQ_INT(sa.hits, 0);
        ASBT_EQ_INT(leaked, 0);
        scanalloc_fini(&sa);
    }
    asb_buf_free(&b64);
    asb_buf_free(&cert_b64);
    free(key_pem);
    free(cert_pem);
}

/* Upstream S21: exec plugins run from an argv array, never through a
   shell (kubernetes-client/c joins the command into one string). Words
   with spaces, ';', $(...), backquotes, globs and quotes reach the plugin
   as they are, one argv entry each, and nothing they spell runs. */
ASBT_TEST(exec_plugin_args_reach_it_verbatim_and_no_shell_runs) {
    char marks[5][600], extra[4096], want[4096], got[4096], path[700], user[2048], cwd[1024];
    asb_error err;
    asb_kube_client *kc;
    char auth[256];
    FILE *f;
    size_t n;
    int i;
    for (i = 0; i < 5; i++) {
        snprintf(marks[i], sizeof marks[i], "%s/shell-ran-%d", dir, i);
        unlink(marks[i]);
    }
    snprintf(extra, sizeof extra,
             "      args:\n"
             "      - 'a b'\n"
             "      - 'x; touch %s'\n"
             "      - '$(touch %s)'\n"
             "      - '`touch %s`'\n"
             "      - '*'\n"
             "      - ''\n"
             "      - '--flag=\"quoted value\"'\n"
             "      - '''single'''\n"
             "      - '| touch %s &'\n",
             marks[0], marks[1], marks[2], marks[3]);
    snprintf(want, sizeof want,
             "9\n[a b]\n[x; touch %s]\n[$(touch %s)]\n[`touch %s`]\n[*]\n[]\n"
             "[--flag=\"quoted value\"]\n['single']\n[| touch %s &]\n",
             marks[0], marks[1], marks[2], marks[3]);
    write_plugin_cfg("token", "client.authentication.k8s.io/v1", extra);
    kc = client(&err);
    ASBT_CHECK(kc != NULL);
    ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_OK);
    ASBT_EQ_STR(auth, "Bearer tok-1");
    asb_kube_client_free(kc);
    snprintf(path, sizeof path, "%s.args", logpath);
    f = fopen(path, "r");
    ASBT_CHECK(f != NULL);
    n = fread(got, 1, sizeof got - 1, f);
    got[n] = 0;
    fclose(f);
    ASBT_EQ_STR(got, want);
    for (i = 0; i < 4; i++) ASBT_CHECK(access(marks[i], F_OK) != 0);
    /* the command itself is a path, never a command line */
    if (!getcwd(cwd, sizeof cwd)) cwd[0] = 0;
    snprintf(user, sizeof user,
             "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
             "      command: '%s/tests/kube/plugin.sh; touch %s'\n"
             "      env:\n      - {name: PLUGIN_MODE, value: token}\n"
             "      - {name: PLUGIN_LOG, value: %s}\n",
             cwd, marks[4], logpath);
    write_cfg(user);
    unlink(logpath);
    kc = client(&err);
    ASBT_CHECK(kc != NULL);
    ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_ERR_CREDENTIALS);
    ASBT_CONTAINS(err.message, "cannot run: No such file or directory");
    ASBT_EQ_INT(plugin_runs(), 0);
    ASBT_CHECK(access(marks[4], F_OK) != 0);
    asb_kube_client_free(kc);
}

/* The headers of a JSON answer's "headers" list ([name, value] pairs):
   how many are called `name`, and the first one's value in val. */
static int header_in_echo(const char *json, size_t len, const char *name, char *val, size_t cap) {
    asb_json_doc doc;
    asb_json_iter it;
    int h, n = 0;
    if (val && cap) val[0] = 0;
    if (asb_json_doc_parse(&doc, json, len, NULL, NULL) != ASB_OK) return -1;
    it = asb_json_iter_begin(&doc, asb_json_find(&doc, 0, "headers"));
    while (asb_json_iter_next(&doc, &it, NULL, &h)) {
        char nm[64];
        if (asb_json_get_string(&doc, asb_json_find(&doc, h, "0"), nm, sizeof nm, NULL) ==
                ASB_OK &&
            strcasecmp(nm, name) == 0) {
            if (n++ == 0 && val)
                asb_json_get_string(&doc, asb_json_find(&doc, h, "1"), val, cap, NULL);
        }
    }
    asb_json_doc_free(&doc);
    return n;
}

/* Review finding R13: after a 401 the plugin runs again and the request
   goes out once more; its Content-Type must go with it (the retry used
   to send the Accept header twice instead). Seen on the wire: the fault
   server answers 401 first, then echoes the retry's headers. */
ASBT_TEST(a_request_retried_after_a_401_keeps_its_content_type) {
    static const struct {
        const char *method, *type;
    } cases[] = {{"POST", "application/json"}, {"PATCH", "application/merge-patch+json"}};
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        asb_error err;
        asb_kube_client *kc;
        asb_buf out;
        char path[128], ct[128];
        write_plugin_cfg("future", "client.authentication.k8s.io/v1", "");
        kc = client(&err);
        ASBT_CHECK(kc != NULL);
        snprintf(path, sizeof path, "/flaky-503/r13-%s-%d/1?status=401", cases[i].method,
                 (int)getpid());
        asb_buf_init(&out, NULL);
        ASBT_EQ_RES(asb_kube_request(kc, cases[i].method, path, cases[i].type, "{\"a\":1}", 7,
                                     &out, &err),
                    ASB_OK);
        ASBT_EQ_INT(plugin_runs(), 2); /* the 401 minted a new credential */
        ASBT_CONTAINS(out.ptr, "\"attempt\": 2");
        ASBT_EQ_INT(header_in_echo(out.ptr, out.len, "Content-Type", ct, sizeof ct), 1);
        ASBT_EQ_STR(ct, cases[i].type);
        ASBT_EQ_INT(header_in_echo(out.ptr, out.len, "Accept", NULL, 0), 1);
        ASBT_EQ_INT(header_in_echo(out.ptr, out.len, "Authorization", ct, sizeof ct), 1);
        ASBT_EQ_STR(ct, "Bearer tok-2");
        asb_buf_free(&out);
        asb_kube_client_free(kc);
    }
}

static void write_file(const char *path, const char *text, int mode) {
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
    chmod(path, (mode_t)mode);
}

/* Review finding R2: a bare command name is looked up in PATH only, as
   kubectl (Go's exec.LookPath) does; never in the working directory,
   where anyone could have planted a file of that name, not even through
   an empty or "." entry of PATH. A command with a '/' is a path, relative
   to the kubeconfig's directory. */
ASBT_TEST(a_bare_plugin_name_never_runs_a_file_in_the_working_directory) {
    char cwd[1024], work[600], bin[600], cfgdir[600], p[800], marker[600], user[2048], auth[256];
    asb_error err;
    asb_kube_client *kc;
    /* PATH with the current directory in it, every way it can be said */
    static const char *const path_with_dot[] = {"%s:/usr/bin:/bin", ":%s:/usr/bin:/bin",
                                                "%s:/usr/bin:/bin:", ".:%s:/usr/bin:/bin",
                                                "%s::/usr/bin:/bin", "./:%s:/usr/bin:/bin"};
    size_t i;
    ASBT_CHECK(getcwd(cwd, sizeof cwd) != NULL);
    snprintf(work, sizeof work, "%s/r2-work", dir);
    snprintf(bin, sizeof bin, "%s/r2-bin", dir);
    snprintf(cfgdir, sizeof cfgdir, "%s/r2-cfg", dir);
    snprintf(marker, sizeof marker, "%s/r2-planted-ran", dir);
    mkdir(work, 0700);
    mkdir(bin, 0700);
    mkdir(cfgdir, 0700);
    snprintf(p, sizeof p, "%s/bin", work);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/bin", cfgdir);
    mkdir(p, 0700);
    /* the planted file: in the working directory and in its bin/ */
    snprintf(user, sizeof user, "#!/bin/sh\ntouch %s\n"
             "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
             "\"status\":{\"token\":\"planted\"}}'\n", marker);
    snprintf(p, sizeof p, "%s/asb-r2-plugin", work);
    write_file(p, user, 0755);
    snprintf(p, sizeof p, "%s/bin/asb-r2-plugin", work);
    write_file(p, user, 0755);
    /* the real one: on PATH, and in the kubeconfig's bin/ */
    snprintf(user, sizeof user, "#!/bin/sh\nexec %s/tests/kube/plugin.sh \"$@\"\n", cwd);
    snprintf(p, sizeof p, "%s/asb-r2-plugin", bin);
    write_file(p, user, 0755);
    snprintf(p, sizeof p, "%s/bin/asb-r2-plugin", cfgdir);
    write_file(p, user, 0755);
    ASBT_CHECK(chdir(work) == 0);
    for (i = 0; i < sizeof path_with_dot / sizeof path_with_dot[0]; i++) {
        char pathv[1400];
        unlink(marker);
        snprintf(pathv, sizeof pathv, path_with_dot[i], bin);
        setenv("PATH", pathv, 1);
        snprintf(user, sizeof user,
                 "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                 "      command: asb-r2-plugin\n"
                 "      env:\n      - {name: PLUGIN_MODE, value: token}\n"
                 "      - {name: PLUGIN_LOG, value: %s}\n"
                 "      - {name: API, value: client.authentication.k8s.io/v1}\n",
                 logpath);
        write_cfg(user);
        unlink(logpath);
        kc = client(&err);
        ASBT_CHECK(kc != NULL);
        ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_OK);
        ASBT_EQ_STR(auth, "Bearer tok-1"); /* PATH's, whatever PATH holds */
        ASBT_CHECK(access(marker, F_OK) != 0);
        asb_kube_client_free(kc);
    }
    /* not on PATH at all: an error, still not the planted file */
    setenv("PATH", ".:/usr/bin:/bin", 1);
    kc = client(&err);
    ASBT_CHECK(kc != NULL);
    ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_ERR_CREDENTIALS);
    ASBT_CONTAINS(err.message, "cannot run: No such file or directory (looked up in PATH only)");
    ASBT_CHECK(access(marker, F_OK) != 0);
    asb_kube_client_free(kc);
    setenv("PATH", start_path, 1);
    /* bin/asb-r2-plugin: the one next to the kubeconfig, as kubectl has it */
    snprintf(user, sizeof user,
             "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
             "    server: http://127.0.0.1:%s\ncontexts:\n- name: c\n  context: {cluster: c, "
             "user: u}\ncurrent-context: c\nusers:\n- name: u\n  user:\n"
             "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
             "      command: bin/asb-r2-plugin\n"
             "      env:\n      - {name: PLUGIN_MODE, value: token}\n"
             "      - {name: PLUGIN_LOG, value: %s}\n"
             "      - {name: API, value: client.authentication.k8s.io/v1}\n",
             getenv("ASB_PEER_FAULT_PORT"), logpath);
    snprintf(p, sizeof p, "%s/config", cfgdir);
    write_file(p, user, 0600);
    unlink(logpath);
    {
        asb_kube_client_desc d;
        memset(&d, 0, sizeof d);
        d.kubeconfig.path = p;
        d.exec_timeout_ms = 2000;
        kc = NULL;
        ASBT_EQ_RES(asb_kube_client_create(&d, &kc, &err), ASB_OK);
    }
    ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_OK);
    ASBT_EQ_STR(auth, "Bearer tok-1");
    ASBT_CHECK(access(marker, F_OK) != 0);
    asb_kube_client_free(kc);
}

/* Review finding R5. pthread_atfork hooks stand in for another thread of
   the program at the worst moment: just before the plugin's fork (its
   pipes exist), posix_spawn starts a long-lived child, as a concurrent
   subprocess call would; just after it, in the plugin's child, a signal
   arrives whose handler is the program's. */
static volatile int spawn_before_fork, signal_in_child;
static pid_t spawned = -1, test_pid;
static char winch_marker[600];

static void before_fork(void) {
    if (spawn_before_fork) {
        char *const argv[] = {(char *)"sleep", (char *)"120", NULL};
        spawn_before_fork = 0;
        if (posix_spawnp(&spawned, "sleep", NULL, NULL, argv, environ) != 0) spawned = -1;
    }
}

static void in_child_after_fork(void) {
    if (signal_in_child) kill(getpid(), SIGWINCH);
}

static void on_winch(int sig) {
    (void)sig;
    if (getpid() != test_pid) { /* the program's code, in a copy of it */
        int fd = open(winch_marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0) close(fd);
    }
}

/* The descriptors >= 3 of a process ("N target" lines, or /proc's
   listing) whose target does not end in `allowed`: how many. */
static int foreign_fds(const char *listing, const char *allowed, char *first, size_t cap) {
    const char *line = listing;
    int n = 0;
    first[0] = 0;
    while (*line) {
        const char *end = strchr(line, '\n'), *sp = strchr(line, ' ');
        size_t len = end ? (size_t)(end - line) : strlen(line), al = strlen(allowed);
        if (sp && sp < line + len && atoi(line) >= 3) {
            size_t tl = (size_t)(line + len - (sp + 1));
            if (!(tl >= al && memcmp(line + len - al, allowed, al) == 0)) {
                if (!n++) snprintf(first, cap, "%.*s", (int)len, line);
            }
        }
        line += len + (end ? 1 : 0);
    }
    return n;
}

static void proc_fds(pid_t pid, char *out, size_t cap) {
    char d[64], p[400], target[300];
    DIR *dp;
    struct dirent *e;
    size_t used = 0;
    out[0] = 0;
    snprintf(d, sizeof d, "/proc/%d/fd", (int)pid);
    dp = opendir(d);
    if (!dp) return;
    while ((e = readdir(dp)) != NULL) {
        ssize_t n;
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", d, e->d_name);
        n = readlink(p, target, sizeof target - 1);
        if (n < 0) continue;
        target[n] = 0;
        used += (size_t)snprintf(out + used, cap - used, "%s %s\n", e->d_name, target);
        if (used >= cap) break;
    }
    closedir(dp);
}

ASBT_TEST(plugin_descriptors_never_leak_and_a_concurrent_spawn_cannot_stall_it) {
    static int hooked;
    asb_error err;
    asb_kube_client *kc;
    char auth[256], fds[4096], first[400], p[700];
    FILE *f;
    size_t n;
    int st;
    if (!hooked++) pthread_atfork(before_fork, NULL, in_child_after_fork);
    write_plugin_cfg("fds", "client.authentication.k8s.io/v1", "");
    kc = client(&err);
    ASBT_CHECK(kc != NULL);
    spawned = -1;
    spawn_before_fork = 1;
    /* the plugin exits at once; the sleeper lives on: had it inherited a
       write end, no EOF would come and the refresh would wait out the
       exec timeout (2 s here) and fail */
    ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_OK);
    ASBT_EQ_STR(auth, "Bearer tok-1");
    ASBT_CHECK(spawned > 0);
    proc_fds(spawned, fds, sizeof fds);
    kill(spawned, SIGKILL);
    while (waitpid(spawned, &st, 0) < 0 && errno == EINTR) {}
    foreign_fds(fds, "\x01", first, sizeof first);
    ASBT_EQ_STR(first, ""); /* nothing >= 3 */
    /* the plugin itself: 0, 1, 2 and its shell's own script, nothing else
       (once, the /dev/null of its stdin stayed open beside it) */
    snprintf(p, sizeof p, "%s.fds", logpath);
    f = fopen(p, "r");
    ASBT_CHECK(f != NULL);
    n = fread(fds, 1, sizeof fds - 1, f);
    fds[n] = 0;
    fclose(f);
    ASBT_CONTAINS(fds, "0 /dev/null\n");
    ASBT_CONTAINS(fds, "1 pipe:");
    ASBT_CONTAINS(fds, "2 pipe:");
    foreign_fds(fds, "/tests/kube/plugin.sh", first, sizeof first);
    ASBT_EQ_STR(first, ""); /* else the first descriptor it should not have */
    asb_kube_client_free(kc);
}

ASBT_TEST(a_signal_between_fork_and_exec_never_runs_the_programs_handler) {
    static int hooked;
    struct sigaction sa, old;
    asb_error err;
    asb_kube_client *kc;
    char auth[256];
    if (!hooked++) pthread_atfork(before_fork, NULL, in_child_after_fork);
    test_pid = getpid();
    snprintf(winch_marker, sizeof winch_marker, "%s/handler-ran-in-child", dir);
    unlink(winch_marker);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_winch;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGWINCH, &sa, &old);
    write_plugin_cfg("token", "client.authentication.k8s.io/v1", "");
    kc = client(&err);
    ASBT_CHECK(kc != NULL);
    signal_in_child = 1;
    ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_OK);
    signal_in_child = 0;
    sigaction(SIGWINCH, &old, NULL);
    ASBT_EQ_STR(auth, "Bearer tok-1"); /* the plugin ran all the same */
    ASBT_CHECK(access(winch_marker, F_OK) != 0);
    asb_kube_client_free(kc);
}

/* A sibling of R1 (something kept per rotation): the plugin's env strings
   came from the kubeconfig's arena on every run, so a plugin whose
   credential keeps expiring grew the client's memory by its env on every
   call, for as long as the program ran. An 8 KiB env value makes each
   run's share a new arena block, counted by the test allocator. */
ASBT_TEST(running_the_plugin_again_and_again_keeps_memory_flat) {
    asbt_heap heap;
    asb_allocator a = asbt_heap_allocator(&heap);
    asb_kube_client_desc d;
    asb_kube_client *kc = NULL;
    asb_error err;
    char auth[256], want[64], big[8193];
    long live_after_two = 0;
    int i;
    FILE *f;
    memset(big, 'v', sizeof big - 1);
    big[sizeof big - 1] = 0;
    write_plugin_cfg("expired", "client.authentication.k8s.io/v1", "");
    f = fopen(cfgpath, "a"); /* one more entry at the end of its env list */
    ASBT_CHECK(f != NULL);
    fprintf(f, "      - {name: BIG, value: %s}\n", big);
    fclose(f);
    memset(&d, 0, sizeof d);
    d.kubeconfig.path = cfgpath;
    d.exec_timeout_ms = 20000;
    d.http.retry.max_attempts = 1;
    d.http.allocator = &a;
    ASBT_EQ_RES(asb_kube_client_create(&d, &kc, &err), ASB_OK);
    for (i = 1; i <= 12; i++) {
        ASBT_EQ_RES(echo_auth(kc, auth, sizeof auth, &err), ASB_OK);
        snprintf(want, sizeof want, "Bearer tok-%d", i);
        ASBT_EQ_STR(auth, want); /* a new run every call */
        if (i == 2) live_after_two = heap.live;
    }
    ASBT_EQ_INT(heap.live, live_after_two);
    asb_kube_client_free(kc);
    ASBT_EQ_INT(heap.live, 0);
}

/* Review finding R1: an exec plugin that returns client certificates
   makes a new HTTP client on every rotation, while watches on other
   threads are inside calls on older ones. 20 rotations, each while three
   watches stream over mutual TLS (the mtls peer checks the certificate;
   each watch resumes every second, so watches start on clients of late
   rotations too); every call and every event must stay valid (ASan and
   TSan builds run this). Each rotation alternates the certificate and
   the server sees the one just minted. */
typedef struct rot_watch {
    pthread_t thread;
    asb_kube_client *kc;
    pthread_mutex_t lock;
    int events, bad, stop;
    asb_result result;
    char why[256];
} rot_watch;

static int rot_event(void *user, const asb_watch_event *ev) {
    rot_watch *w = (rot_watch *)user;
    char subject[200] = "";
    int stop;
    asb_json_get_string(ev->doc, asb_json_find(ev->doc, ev->object, "client_cert_subject"),
                        subject, sizeof subject, NULL);
    pthread_mutex_lock(&w->lock);
    w->events++;
    if (!strstr(subject, "CN=client-rsa") && !strstr(subject, "CN=client-ec")) w->bad++;
    stop = w->stop;
    pthread_mutex_unlock(&w->lock);
    return stop ? 1 : 0;
}

static void *rot_watch_main(void *arg) {
    rot_watch *w = (rot_watch *)arg;
    asb_kube_resource res = {"", "v1", "configmaps"};
    asb_watch_opts o;
    asb_error err;
    memset(&o, 0, sizeof o);
    o.timeout_seconds = 1;
    w->result = asb_kube_watch(w->kc, &res, "default", &o, rot_event, w, &err);
    if (w->result != ASB_OK) snprintf(w->why, sizeof w->why, "%s", err.message);
    return NULL;
}

static int rot_events(rot_watch *w) {
    int n;
    pthread_mutex_lock(&w->lock);
    n = w->events;
    pthread_mutex_unlock(&w->lock);
    return n;
}

/* Waits until every watch has `more` events beyond base[] (generous: a
   loaded machine, a sanitizer). 0 when one never got there. */
static int rot_wait(rot_watch *w, int nw, const int *base, int more) {
    int i, tries;
    for (tries = 0; tries < 6000; tries++) {
        for (i = 0; i < nw; i++)
            if (rot_events(&w[i]) < base[i] + more) break;
        if (i == nw) return 1;
        asb__sleep_ms(10);
    }
    return 0;
}

/* cfgpath: a kubeconfig whose server is the TLS peer named by port_env
   (its port) and whose user is tests/kube/plugin.sh in "cert" mode,
   logging to logpath and giving the certificate write_cert_choice names.
   0 when the peers' environment is missing or the file cannot be made. */
static int write_cert_plugin_kubeconfig(const char *port_env) {
    char cwd[1024];
    FILE *f;
    if (!getenv(port_env) || !getenv("ASB_PEER_CERTS_DIR") || !getcwd(cwd, sizeof cwd)) return 0;
    f = fopen(cfgpath, "w");
    if (!f) return 0;
    fprintf(f,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
            "    server: https://127.0.0.1:%s\n    certificate-authority: %s/ca.crt\n"
            "contexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n"
            "users:\n- name: u\n  user:\n"
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
            "      command: %s/tests/kube/plugin.sh\n"
            "      env:\n      - {name: PLUGIN_MODE, value: cert}\n"
            "      - {name: PLUGIN_LOG, value: %s}\n"
            "      - {name: API, value: client.authentication.k8s.io/v1}\n"
            "      - {name: CERTS, value: %s}\n",
            getenv(port_env), getenv("ASB_PEER_CERTS_DIR"), cwd, logpath,
            getenv("ASB_PEER_CERTS_DIR"));
    return fclose(f) == 0;
}

static void write_cert_choice(const char *name) {
    char p[600], tmp[600];
    snprintf(p, sizeof p, "%s.cert", logpath);
    snprintf(tmp, sizeof tmp, "%s.cert.tmp", logpath);
    write_file(tmp, name, 0600);
    rename(tmp, p); /* whole, for a plugin run on a watch thread */
}

ASBT_TEST(client_certificates_rotate_20_times_under_concurrent_watches) {
    enum { NW = 3, ROTATIONS = 20 };
    rot_watch w[NW];
    int base[NW], i, runs;
    asb_kube_client_desc d;
    asb_kube_client *kc = NULL;
    asb_error err;
    ASBT_CHECK(write_cert_plugin_kubeconfig("ASB_PEER_TLS_MTLS"));
    unlink(logpath);
    write_cert_choice("client-rsa");
    memset(&d, 0, sizeof d);
    d.kubeconfig.path = cfgpath;
    d.exec_timeout_ms = 60000; /* sanitizers and a loaded machine */
    d.http.retry.max_attempts = 1;
    ASBT_EQ_RES(asb_kube_client_create(&d, &kc, &err), ASB_OK);
    memset(w, 0, sizeof w);
    for (i = 0; i < NW; i++) {
        w[i].kc = kc;
        pthread_mutex_init(&w[i].lock, NULL);
        base[i] = 0;
        ASBT_CHECK(pthread_create(&w[i].thread, NULL, rot_watch_main, &w[i]) == 0);
    }
    ASBT_CHECK(rot_wait(w, NW, base, 1));
    for (i = 0; i < ROTATIONS; i++) {
        const char *name = i % 2 ? "client-rsa" : "client-ec";
        char want[64];
        asb_buf out;
        int k;
        write_cert_choice(name);
        asb_buf_init(&out, NULL);
        ASBT_EQ_RES(asb_kube_request(kc, "GET", "/who-am-i", NULL, NULL, 0, &out, &err), ASB_OK);
        snprintf(want, sizeof want, "CN=%s\"", name);
        ASBT_CONTAINS(out.ptr, want); /* this call's own, new certificate */
        asb_buf_free(&out);
        /* the watches go on reading across the rotation */
        for (k = 0; k < NW; k++) base[k] = rot_events(&w[k]);
        ASBT_CHECK(rot_wait(w, NW, base, 2));
    }
    for (i = 0; i < NW; i++) {
        pthread_mutex_lock(&w[i].lock);
        w[i].stop = 1;
        pthread_mutex_unlock(&w[i].lock);
    }
    for (i = 0; i < NW; i++) {
        pthread_join(w[i].thread, NULL);
        if (w[i].result != ASB_OK) fprintf(stderr, "watch %d: %s\n", i, w[i].why);
        ASBT_EQ_RES(w[i].result, ASB_OK);
        ASBT_EQ_INT(w[i].bad, 0);
        ASBT_CHECK(w[i].events >= 2 * ROTATIONS);
        pthread_mutex_destroy(&w[i].lock);
    }
    runs = plugin_runs();
    ASBT_CHECK(runs >= ROTATIONS + NW);
    asb_kube_client_free(kc);
}

/* An apiserver (or a proxy in front of one) whose list pages never end,
   by giving back the continue token that asked for the page or a new one
   every time: a real apiserver will not do it on demand, the fault
   server's /list-continue does. Each paged list (claims, names, the
   shared watch's list) stops with ASB_ERR_KUBE_API instead of looping. */
static void write_list_cfg(const char *key, const char *mode) {
    char tail[256];
    snprintf(tail, sizeof tail, "%s/%s", key, mode);
    write_scenario_cfg("list-continue", tail);
}

static int informer_event_ignored(void *user, const asb_watch_event *ev) {
    (void)user;
    (void)ev;
    return 0;
}

ASBT_TEST(a_list_whose_pages_never_end_is_an_error_not_a_loop) {
    /* "long": a continue token too long to send back ends the list with an
       error after its first page, not silently as if it were complete */
    static const char *modes[] = {"same", "endless", "long"};
    static const char *says[] = {"same continue token", "ASB_MAX_LIST_PAGES", "continue token is not"};
    static const int lists[] = {2, ASB_MAX_LIST_PAGES, 1}; /* requests per list */
    int i;
    for (i = 0; i < 3; i++) {
        char key[64];
        asb_client_desc d;
        asb_client *c = NULL;
        asb_claim_list cl;
        asb_name_list nl;
        asb_kube_client *kc;
        asb_kube_resource res;
        asb__waiter *w = NULL;
        asb_error err;
        int64_t n;
        /* the claim listings */
        snprintf(key, sizeof key, "lc-%d-%s", (int)getpid(), modes[i]);
        write_list_cfg(key, modes[i]);
        memset(&d, 0, sizeof d);
        d.kube.kubeconfig.path = cfgpath;
        d.kube.http.retry.max_attempts = 1;
        d.mode = ASB_CONNECT_DIRECT;
        d.direct_url = "http://127.0.0.1:1";
        d.claim_api_version = "v1alpha1";
        ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_OK);
        if (!c) return;
        ASBT_EQ_RES(asb_client_list_claims(c, NULL, &cl, &err), ASB_ERR_KUBE_API);
        ASBT_CONTAINS(err.message, says[i]);
        ASBT_EQ_INT(cl.count, 0);
        ASBT_EQ_RES(asb_client_list_all(c, "default", NULL, &nl, &err), ASB_ERR_KUBE_API);
        ASBT_CONTAINS(err.message, says[i]);
        asb_client_free(c);
        n = fault_count(key);
        fprintf(stderr, "    %s: %lld requests for two lists\n", modes[i], (long long)n);
        ASBT_CHECK(n == 2 * lists[i]);
        /* the shared watch's list: its waiters get the error */
        snprintf(key, sizeof key, "lci-%d-%s", (int)getpid(), modes[i]);
        write_list_cfg(key, modes[i]);
        ASBT_EQ_RES(asb_kube_client_create(&d.kube, &kc, &err), ASB_OK);
        memset(&res, 0, sizeof res);
        res.group = "agents.x-k8s.io";
        res.version = "v1alpha1";
        res.plural = "sandboxes";
        ASBT_EQ_RES(asb__informer_join(kc, &res, "default", "never-there", "uid-1",
                                       informer_event_ignored, NULL, &w, &err),
                    ASB_OK);
        ASBT_EQ_RES(asb__informer_wait(w, asb__now_ms() + 30000, NULL, NULL, &err),
                    ASB_ERR_KUBE_API);
        ASBT_CONTAINS(err.message, says[i]);
        asb__informer_leave(w);
        asb_kube_client_free(kc);
        n = fault_count(key);
        ASBT_CHECK(n == lists[i]);
    }
}

/* R43: a batch (asb_client_create_sandboxes) grows the HTTP pool under the
   client's lock while other threads' calls end; a call ending on a
   keep-alive answer read the pool's size without the lock: a data race
   ThreadSanitizer reports. The keep-alive peer is nginx. */
typedef struct pool_caller {
    asb_http_client *cl;
    const char *url;
    int ok;
} pool_caller;

static void *pool_call_loop(void *arg) {
    pool_caller *pc = (pool_caller *)arg;
    int i;
    for (i = 0; i < 200; i++) {
        asb_http_request req;
        asb_http_response resp;
        asb_error err;
        memset(&req, 0, sizeof req);
        memset(&resp, 0, sizeof resp);
        req.url = pc->url;
        if (asb_http_do(pc->cl, &req, &resp, &err) == ASB_OK && resp.status == 200) pc->ok++;
        asb_http_response_free(&resp);
    }
    return NULL;
}

ASBT_TEST(pool_grows_while_keep_alive_calls_end_on_other_threads) {
    asb_http_client_desc d;
    asb_http_client *cl = NULL;
    asb_error err;
    pool_caller pc[2];
    pthread_t t[2];
    char url[128];
    int i;
    ASBT_CHECK(getenv("ASB_PEER_NGINX_HTTP") != NULL);
    snprintf(url, sizeof url, "http://127.0.0.1:%s/small.txt", getenv("ASB_PEER_NGINX_HTTP"));
    memset(&d, 0, sizeof d);
    d.max_idle_connections = 1;
    ASBT_EQ_RES(asb_http_client_create(&d, &cl, &err), ASB_OK);
    for (i = 0; i < 2; i++) {
        pc[i].cl = cl;
        pc[i].url = url;
        pc[i].ok = 0;
        ASBT_CHECK(pthread_create(&t[i], NULL, pool_call_loop, &pc[i]) == 0);
    }
    for (i = 2; i <= 256; i++) { /* a batch's growth, spread over the calls */
        asb__http_pool_grow(cl, i);
        usleep(500);
    }
    for (i = 0; i < 2; i++) pthread_join(t[i], NULL);
    ASBT_EQ_INT(pc[0].ok + pc[1].ok, 400);
    asb_http_client_free(cl);
}

/* A kube client made from cfgpath and one GET /echo, on a thread of its
   own, for the hang guards below. */
typedef struct guarded_call {
    pthread_t thread;
    pthread_mutex_t mu;
    int exec_timeout_ms;
    int done;
    asb_result r;
    asb_error err;
    char auth[256];
} guarded_call;

static void *guarded_main(void *arg) {
    guarded_call *g = (guarded_call *)arg;
    asb_kube_client_desc d;
    asb_kube_client *kc = NULL;
    asb_result r;
    memset(&d, 0, sizeof d);
    d.kubeconfig.path = cfgpath;
    d.exec_timeout_ms = g->exec_timeout_ms;
    d.http.retry.max_attempts = 1;
    r = asb_kube_client_create(&d, &kc, &g->err);
    if (r == ASB_OK) r = echo_auth(kc, g->auth, sizeof g->auth, &g->err);
    asb_kube_client_free(kc);
    pthread_mutex_lock(&g->mu);
    g->r = r;
    g->done = 1;
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

static int guarded_done(guarded_call *g) {
    int d;
    pthread_mutex_lock(&g->mu);
    d = g->done;
    pthread_mutex_unlock(&g->mu);
    return d;
}

/* Runs the call and waits up to guard_ms for it (a hang guard, not a
   speed check). If it has not returned by then, unstick() is called
   (again and again) until it does, so the thread can be joined and the
   run goes on to the next case. Whether it returned within the guard. */
static int guarded_run(guarded_call *g, int guard_ms, void (*unstick)(void)) {
    int i, done = 0;
    pthread_mutex_init(&g->mu, NULL);
    if (pthread_create(&g->thread, NULL, guarded_main, g) != 0) return 0;
    for (i = 0; i < guard_ms / 10 && !(done = guarded_done(g)); i++) asb__sleep_ms(10);
    for (i = 0; i < 600 && !guarded_done(g); i++) {
        unstick();
        asb__sleep_ms(50);
    }
    pthread_join(g->thread, NULL);
    pthread_mutex_destroy(&g->mu);
    return done;
}

/* The process group id plugin.sh's mode closed wrote (0: none yet). */
static pid_t closed_plugin_group(void) {
    char p[600], text[32] = "";
    FILE *f;
    snprintf(p, sizeof p, "%s.pgid", logpath);
    f = fopen(p, "r");
    if (!f) return 0;
    if (!fgets(text, sizeof text, f)) text[0] = 0;
    fclose(f);
    return (pid_t)atoi(text);
}

static void kill_closed_plugin(void) {
    pid_t g = closed_plugin_group();
    if (g > 1) kill(-g, SIGKILL);
}

/* Whether a process of group pgid still runs (a zombie, killed and
   waiting for init to reap it, does not). */
static int group_alive(pid_t pgid) {
    DIR *d = opendir("/proc");
    struct dirent *e;
    int alive = 0;
    if (!d) return 1;
    while ((e = readdir(d)) != NULL && !alive) {
        char p[300], st[512], state = 0;
        const char *rp;
        int pgrp = 0;
        FILE *f;
        size_t n;
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        snprintf(p, sizeof p, "/proc/%s/stat", e->d_name);
        f = fopen(p, "r");
        if (!f) continue;
        n = fread(st, 1, sizeof st - 1, f);
        fclose(f);
        st[n] = 0;
        rp = strrchr(st, ')'); /* the command name may hold spaces */
        if (rp && sscanf(rp + 1, " %c %*d %d", &state, &pgrp) == 2 && pgrp == (int)pgid &&
            state != 'Z' && state != 'X')
            alive = 1;
    }
    closedir(d);
    return alive;
}

/* Review finding R46: the exec timeout held only while the plugin's
   stdout or stderr was open. A plugin that closes both and goes on (a
   login flow waiting on a browser) was waited for without a deadline,
   under the kube client's lock. Mode closed does that, with a child
   sleeping 300 s in its process group; exec_timeout_ms is 1000. The call
   must fail with the timeout's message and the whole group be gone. */
ASBT_TEST(a_plugin_that_closes_its_output_and_sleeps_is_killed_at_the_timeout) {
    guarded_call g;
    char p[600];
    pid_t pgid;
    int i;
    snprintf(p, sizeof p, "%s.pgid", logpath);
    unlink(p);
    write_plugin_cfg("closed", "client.authentication.k8s.io/v1", "");
    memset(&g, 0, sizeof g);
    g.exec_timeout_ms = 1000;
    /* before the fix the call waited for the 300 s sleep (the guard
       then kills the plugin's group so the run can go on) */
    ASBT_CHECK(guarded_run(&g, 30000, kill_closed_plugin));
    ASBT_EQ_RES(g.r, ASB_ERR_CREDENTIALS);
    ASBT_CONTAINS(g.err.message, "did not finish within 1000 ms (killed)");
    pgid = closed_plugin_group();
    ASBT_CHECK(pgid > 1);
    /* the sleeping child went with the plugin (killed as a group); a
       reparented zombie waits for init, hence the wait */
    for (i = 0; i < 1000 && group_alive(pgid); i++) asb__sleep_ms(10);
    ASBT_CHECK(!group_alive(pgid));
}

/* Review finding R47: a refresh replaced only the parts of the cached
   credential the new one had. A plugin switching from a token to a
   client certificate left the old (expired) token in every request; one
   switching back left its old certificate on the connection. The server
   is the mtls-optional peer (it asks for a client certificate and shows
   the one it got, or null); plugin.sh mode cert returns, already expired
   (a plugin run per call), a token only or a certificate only. */
ASBT_TEST(a_plugin_switching_between_token_and_certificate_sends_only_the_new_one) {
    static const struct {
        const char *kind, *auth, *subject;
    } steps[] = {
        {"token", "Bearer tok-1", NULL},
        {"client-rsa", NULL, "CN=client-rsa\""}, /* before the fix: Bearer tok-1 too */
        {"token", "Bearer tok-3", NULL},         /* before the fix: client-rsa too */
        {"client-ec", NULL, "CN=client-ec\""},
        {"client-rsa", NULL, "CN=client-rsa\""},
        {"token", "Bearer tok-6", NULL},
    };
    asb_kube_client_desc d;
    asb_kube_client *kc = NULL;
    asb_error err;
    size_t i;
    ASBT_CHECK(write_cert_plugin_kubeconfig("ASB_PEER_TLS_MTLS_OPTIONAL"));
    unlink(logpath);
    memset(&d, 0, sizeof d);
    d.kubeconfig.path = cfgpath;
    d.exec_timeout_ms = 60000; /* sanitizers and a loaded machine */
    d.http.retry.max_attempts = 1;
    ASBT_EQ_RES(asb_kube_client_create(&d, &kc, &err), ASB_OK);
    for (i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        asb_buf out;
        char auth[256];
        int n;
        write_cert_choice(steps[i].kind);
        asb_buf_init(&out, NULL);
        ASBT_EQ_RES(asb_kube_request(kc, "GET", "/who-am-i", NULL, NULL, 0, &out, &err), ASB_OK);
        n = header_in_echo(out.ptr, out.len, "Authorization", auth, sizeof auth);
        if (steps[i].auth) {
            ASBT_EQ_INT(n, 1);
            ASBT_EQ_STR(auth, steps[i].auth);
            ASBT_CONTAINS(out.ptr, "\"client_cert_subject\": null");
        } else {
            if (n != 0) fprintf(stderr, "step %d (%s): sent %s\n", (int)i, steps[i].kind, auth);
            ASBT_EQ_INT(n, 0);
            ASBT_CONTAINS(out.ptr, steps[i].subject);
        }
        asb_buf_free(&out);
    }
    ASBT_EQ_INT(plugin_runs(), (int)(sizeof steps / sizeof steps[0]));
    asb_kube_client_free(kc);
}

/* A FIFO (or a device) named as a token, CA, certificate or key file
   blocked the read for good; the token file is read under the kube
   client's lock, so every thread of the client waited with it. Now
   such a file is refused as not a regular file. Nobody writes to the
   FIFOs here: before the change the open waited for a writer (the guard
   then opens one so the run can go on). */
static char fifo_path[600];

static void open_fifo_for_writing(void) {
    int fd = open(fifo_path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) close(fd);
}

ASBT_TEST(a_fifo_as_token_or_certificate_file_fails_clearly_instead_of_hanging) {
    static const struct {
        const char *user_fmt, *why;
        asb_result code;
    } cases[] = {
        {"    tokenFile: %s\n", "not a regular file", ASB_ERR_CREDENTIALS},
        {"    client-certificate: %s\n    client-key: %s\n", "not a regular file",
         ASB_ERR_KUBECONFIG},
    };
    size_t i;
    snprintf(fifo_path, sizeof fifo_path, "%s/fifo", dir);
    unlink(fifo_path);
    ASBT_CHECK(mkfifo(fifo_path, 0600) == 0);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        guarded_call g;
        char user[1600];
        snprintf(user, sizeof user, cases[i].user_fmt, fifo_path, fifo_path);
        write_cfg(user);
        memset(&g, 0, sizeof g);
        g.exec_timeout_ms = 2000;
        ASBT_CHECK(guarded_run(&g, 30000, open_fifo_for_writing));
        ASBT_EQ_RES(g.r, cases[i].code);
        ASBT_CONTAINS(g.err.message, cases[i].why);
        ASBT_CONTAINS(g.err.message, fifo_path);
    }
    unlink(fifo_path);
}

ASBT_LIST(
    ASBT_CASE(static_token_and_basic_auth_are_sent)
    ASBT_CASE(a_list_whose_pages_never_end_is_an_error_not_a_loop)
    ASBT_CASE(token_file_is_reread_when_it_rotates)
    ASBT_CASE(exec_plugin_token_is_cached_and_gets_exec_info)
    ASBT_CASE(expired_credentials_run_the_plugin_again)
    ASBT_CASE(a_401_runs_the_plugin_once_more)
    ASBT_CASE(broken_plugins_fail_clearly)
    ASBT_CASE(missing_plugin_shows_its_install_hint)
    ASBT_CASE(legacy_auth_provider_is_refused_with_advice)
    ASBT_CASE(in_cluster_config_reads_the_service_account)
    ASBT_CASE(secrets_never_reach_error_messages)
    ASBT_CASE(credentials_echoed_in_a_status_are_masked_in_err)
    ASBT_CASE(a_token_echoed_in_a_status_reason_and_headers_is_masked_in_every_err_field)
    ASBT_CASE(secrets_are_wiped_before_their_memory_is_freed)
    ASBT_CASE(an_api_servers_429_is_retried_even_for_a_post)
    ASBT_CASE(a_watch_backs_off_from_a_server_that_keeps_answering_410)
    ASBT_CASE(the_shared_watch_backs_off_from_a_server_that_keeps_answering_410)
    ASBT_CASE(freeing_the_client_during_a_shared_watch_pause_returns_promptly)
    ASBT_CASE(exec_plugin_args_reach_it_verbatim_and_no_shell_runs)
    ASBT_CASE(a_request_retried_after_a_401_keeps_its_content_type)
    ASBT_CASE(a_bare_plugin_name_never_runs_a_file_in_the_working_directory)
    ASBT_CASE(plugin_descriptors_never_leak_and_a_concurrent_spawn_cannot_stall_it)
    ASBT_CASE(a_signal_between_fork_and_exec_never_runs_the_programs_handler)
    ASBT_CASE(client_certificates_rotate_20_times_under_concurrent_watches)
    ASBT_CASE(running_the_plugin_again_and_again_keeps_memory_flat)
    ASBT_CASE(pool_grows_while_keep_alive_calls_end_on_other_threads)
    ASBT_CASE(a_plugin_that_closes_its_output_and_sleeps_is_killed_at_the_timeout)
    ASBT_CASE(a_plugin_switching_between_token_and_certificate_sends_only_the_new_one)
    ASBT_CASE(a_fifo_as_token_or_certificate_file_fails_clearly_instead_of_hanging)
)

int main(int argc, char **argv);
#define main asbt_main
ASBT_MAIN()
#undef main
/* A case that fails half-way still leaves PATH and the working
   directory as they were for the next. */
static int restore_process_state(const char *name, int failed) {
    (void)name;
    (void)failed;
    setenv("PATH", start_path, 1);
    return chdir(start_cwd) != 0;
}

int main(int argc, char **argv) {
    int r, fd;
    snprintf(start_path, sizeof start_path, "%s", getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    if (!getcwd(start_cwd, sizeof start_cwd)) return 1;
    asbt_after_each = restore_process_state;
    /* what this process inherited is not the library's to leak: the
       descriptor tests look for the library's own */
    for (fd = 3; fd < 1024; fd++) {
        int fl = fcntl(fd, F_GETFD);
        if (fl >= 0) fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
    }
    setup();
    r = asbt_main(argc, argv);
    {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) r = 1;
    }
    return r;
}
