/* Kubernetes credentials end to end, without a cluster: the server in the
   kubeconfig is the fault server's /echo, which shows exactly which
   Authorization header arrived. Exec plugins are tests/kube/plugin.sh in
   every mode (token, expiry, garbage, failure, hang, missing). The same
   server plays a throttling API server for the 429 retry. Runs under
   tests/http/with-peers.sh. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include "asbtest.h"

static char dir[256];
static char cfgpath[512];
static char logpath[512];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/asb-kube-creds-%d", (int)getpid());
    mkdir(dir, 0700);
    snprintf(cfgpath, sizeof cfgpath, "%s/config", dir);
    snprintf(logpath, sizeof logpath, "%s/plugin.log", dir);
}

/* Writes a kubeconfig whose user is `user_yaml` (indented 4). */
static void write_cfg(const char *user_yaml) {
    FILE *f = fopen(cfgpath, "w");
    fprintf(f,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
            "    server: http://127.0.0.1:%s\ncontexts:\n- name: c\n  context: {cluster: c, "
            "user: u}\ncurrent-context: c\nusers:\n- name: u\n  user:\n%s",
            getenv("ASB_PEER_FAULT_PORT"), user_yaml);
    fclose(f);
}

static void write_plugin_cfg(const char *mode, const char *api, const char *extra) {
    char user[2048], cwd[1024];
    if (!getcwd(cwd, sizeof cwd)) cwd[0] = 0;
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
        ASBT_CHECK(asb__now_ms() - t0 < 5000);
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
    FILE *f = fopen(cfgpath, "w");
    if (!f) return -1;
    fprintf(f,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
            "    server: http://127.0.0.1:%s/%s/%s\ncontexts:\n- name: c\n  context: "
            "{cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: t}\n",
            getenv("ASB_PEER_FAULT_PORT"), mode, key);
    fclose(f);
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
    snprintf(key, sizeof key, "w410-%d-after-event", (int)getpid());
    n = watch_against("gone-after-event", key, 2500, &events, &r);
    fprintf(stderr, "    gone-after-event: %lld requests, %d events in 2.5 s\n", (long long)n,
            events);
    ASBT_EQ_RES(r, ASB_ERR_TIMEOUT);
    ASBT_EQ_INT(events, n);
    ASBT_CHECK(n > quiet);  /* progress started the pauses over */
    ASBT_CHECK(n <= 60);    /* each restart still waits at least 50 ms */
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

ASBT_LIST(
    ASBT_CASE(static_token_and_basic_auth_are_sent)
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
    ASBT_CASE(an_api_servers_429_is_retried_even_for_a_post)
    ASBT_CASE(a_watch_backs_off_from_a_server_that_keeps_answering_410)
    ASBT_CASE(exec_plugin_args_reach_it_verbatim_and_no_shell_runs)
)

int main(int argc, char **argv);
#define main asbt_main
ASBT_MAIN()
#undef main
int main(int argc, char **argv) {
    int r;
    setup();
    r = asbt_main(argc, argv);
    {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) r = 1;
    }
    return r;
}
