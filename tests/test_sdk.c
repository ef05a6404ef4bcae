/* Sandbox SDK rules that need no cluster: pod IP choice (upstream's S10,
   S11, S19), option validation before anything runs (S18, ports), what a
   log may say about a command (S14), and what the client puts on the wire
   to the router (S1, S2, S6, S12, S15, S16, S20), seen by a recording
   endpoint used as the DIRECT-mode router URL. tests/SECURITY.md maps
   every upstream security case to its tests. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include <sys/prctl.h>
#include "asbtest.h"
#include "recorder.h"
#include "logsink.h"
#include "scanalloc.h"
#include "nocluster.h"
#include "cancel_later.h"

/* The router's base URL, from the client's connector as a call gets it
   (starting the tunnel when the connector has one). */
static asb_result router_base(asb_client *c, char *out, size_t cap, asb_error *err) {
    asb__endpoint ep;
    asb_result r = c->conn->endpoint(c, NULL, c->server_port, &ep, err);
    size_t n = strlen(ep.base);
    if (r == ASB_OK && n < cap) memcpy(out, ep.base, n + 1);
    return r;
}

static int choose(const char *json, char *out) {
    asb_json_doc d;
    int r;
    if (asb_json_doc_parse(&d, json, strlen(json), NULL, NULL) != ASB_OK) return -1;
    r = asb__choose_pod_ip(&d, 0, out);
    asb_json_doc_free(&d);
    return r;
}

ASBT_TEST(pod_ip_prefers_ipv4_unmaps_and_skips_invalid_entries) {
    char ip[ASB_IP_SIZE];
    ASBT_EQ_INT(choose("[\" bad\", \"::ffff:10.0.0.1\", \"fd00::2\"]", ip), 4);
    ASBT_EQ_STR(ip, "10.0.0.1");
    ASBT_EQ_INT(choose("[\"fd00::2\", \"10.1.2.3\"]", ip), 4);
    ASBT_EQ_STR(ip, "10.1.2.3");
    ASBT_EQ_INT(choose("[\"fd00::1\"]", ip), 6);
    ASBT_EQ_STR(ip, "fd00::1");
    ASBT_EQ_INT(choose("[{\"ip\": \"127.1.0.9\"}]", ip), 4);
    ASBT_EQ_STR(ip, "127.1.0.9");
    ASBT_EQ_INT(choose("[\"10.0.0.1\\r\\nX-Evil: 1\", \"0x7f.0.0.1\", \"2130706433\", 7, null]", ip),
                0);
    ASBT_EQ_INT(choose("[]", ip), 0);
    ASBT_EQ_INT(choose("{}", ip), 0);
}

static const char *exe(const char *cmd) {
    static char out[64];
    memset(out, 'x', sizeof out);
    asb__command_executable(cmd, out, sizeof out);
    return out;
}

/* S14: a log names a command by its executable alone: never its arguments,
   never the VAR=secret assignments in front of it. */
ASBT_TEST(a_logged_command_is_its_executable_base_name_only) {
    ASBT_EQ_STR(exe("API_KEY=secret TOKEN=x ./run.sh --arg"), "run.sh");
    ASBT_EQ_STR(exe("/usr/bin/python3 -c 'import os; print(os.environ)'"), "python3");
    ASBT_EQ_STR(exe(""), "");
    ASBT_EQ_STR(exe("   \t "), "");
    ASBT_EQ_STR(exe("A=1 B='two words' C=\"x y\""), ""); /* assignments only */
    ASBT_EQ_STR(exe("'/opt/my tools/run me' --token=abc"), "run me");
    ASBT_EQ_STR(exe("ls"), "ls");
    ASBT_EQ_STR(exe("  echo   hi"), "echo");
    ASBT_EQ_STR(exe("dir/=weird arg"), "");    /* not NAME=: a path; cut at '=' */
    ASBT_EQ_STR(exe("9X=1 prog"), "9X");        /* not a name: the word, cut */
    ASBT_EQ_STR(exe("\"API_KEY=secret\" prog"), "API_KEY"); /* quoted: never the value */
    ASBT_EQ_STR(exe("API-KEY=secret prog"), "API-KEY");
    ASBT_EQ_STR(exe("bin/"), "");
    /* a value with a '/' in a word that is not an assignment: the cut at
       '=' comes before the base name, so no tail of it shows */
    ASBT_EQ_STR(exe("\"API_KEY=s3cr/etTAIL\" prog"), "API_KEY");
    ASBT_EQ_STR(exe("(TOKEN=ghp_x/SECRETTAIL exec prog)"), "(TOKEN");
    ASBT_EQ_STR(exe("'DB_URL=postgres://u:pw@h/prod' psql"), "DB_URL");
    ASBT_EQ_STR(exe("API-KEY=a/b/SECRET prog"), "API-KEY");
    ASBT_EQ_STR(exe("9X=ab/cd/SECRET prog"), "9X");
    ASBT_EQ_STR(exe("KEY\\=ab/SECRET prog"), "KEY\\");
    {
        char small[4];
        asb__command_executable("/usr/bin/python3", small, sizeof small);
        ASBT_EQ_STR(small, "pyt"); /* cut, still terminated */
    }
}

ASBT_TEST(client_options_are_checked_before_anything_runs) {
    asb_client_desc d;
    asb_client *c;
    asb_error err;
    memset(&d, 0, sizeof d);
    d.router_namespace = "Foo_Bar";
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "Foo_Bar");
    memset(&d, 0, sizeof d);
    d.mode = ASB_CONNECT_DIRECT;
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "direct_url");
    d.direct_url = "ftp://router";
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_INVALID_ARGUMENT);
    {
        /* a call copies the URL into a 600-byte buffer: one that would
           not fit is refused here, never cut into a shorter URL there */
        static char longurl[800];
        memset(longurl, 'a', sizeof longurl - 1);
        memcpy(longurl, "http://router.example/", 22);
        d.direct_url = longurl;
        ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_INVALID_ARGUMENT);
        ASBT_CONTAINS(err.message, "direct_url is longer than 512 bytes");
    }
#if !ASB_TLS
    /* a TLS-less build says so when the client is made, not at a call */
    d.direct_url = "https://router.example";
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_TLS_UNAVAILABLE);
    ASBT_CONTAINS(err.message, "ASB_TLS 0");
#endif
    memset(&d, 0, sizeof d);
    d.server_port = 65536;
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_INVALID_ARGUMENT);
    memset(&d, 0, sizeof d);
    d.mode = (asb_connection_mode)3; /* not a mode (and within the enum's range) */
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_INVALID_ARGUMENT);
    {
        /* header injection through options is refused up front */
        asb_http_header h;
        memset(&d, 0, sizeof d);
        d.router_token = "abc\r\nX-Evil: 1";
        ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_INVALID_ARGUMENT);
        ASBT_CONTAINS(err.message, "router_token");
        memset(&d, 0, sizeof d);
        h.name = "X-Team";
        h.value = "a\nb";
        d.extra_headers = &h;
        d.extra_header_count = 1;
        ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_INVALID_ARGUMENT);
        ASBT_CONTAINS(err.message, "extra header 0");
        {
            /* nor may an extra header shadow one the client sets itself */
            static const char *reserved[] = {"x-sandbox-id", "X-Sandbox-Pod-IP",
                                             "authorization", "Content-Length",
                                             "Transfer-Encoding", "HOST", "X-Request-Id",
                                             "Connection"};
            size_t i;
            h.value = "v";
            for (i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
                h.name = reserved[i];
                ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_INVALID_ARGUMENT);
                ASBT_CONTAINS(err.message, "one the library sets itself");
            }
            /* names that only start alike are fine: they fail later, at the
               missing kubeconfig, not at the header check */
            h.name = "X-Sandboxed";
            d.kube.kubeconfig.path = "/nonexistent/kubeconfig";
            ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_KUBECONFIG);
        }
    }
    /* no kubeconfig at all: a clear error, nothing leaked */
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = "/nonexistent/kubeconfig";
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_KUBECONFIG);
    ASBT_CONTAINS(err.message, "/nonexistent/kubeconfig");
}

ASBT_TEST(pod_ip_never_picks_addresses_the_router_refuses) {
    /* the router answers 400 for these (and in-cluster mode would dial
       them itself): unspecified, link-local (cloud metadata), multicast */
    char ip[ASB_IP_SIZE];
    ASBT_EQ_INT(choose("[\"169.254.169.254\", \"0.0.0.0\", \"::\", \"224.0.0.1\", "
                       "\"239.255.255.250\", \"ff02::1\", \"ff05::2\", \"fe80::1\", "
                       "\"::ffff:169.254.169.254\", \"::ffff:0.0.0.0\", \"127.1.0.9\"]",
                       ip),
                4);
    ASBT_EQ_STR(ip, "127.1.0.9");
    ASBT_EQ_INT(choose("[\"fe80::1\", \"ff02::1\", \"fd00::7\"]", ip), 6);
    ASBT_EQ_STR(ip, "fd00::7");
    ASBT_EQ_INT(choose("[\"169.254.169.254\", \"::\", \"ff02::1\"]", ip), 0);
    /* loopback stays: the router decides (--allow-loopback-pod-ip), and
       local clusters and sidecars use it */
    ASBT_EQ_INT(choose("[\"::1\"]", ip), 6);
    ASBT_EQ_STR(ip, "::1");
}

/* Gateway status entries as the watch sees them: only a string value
   that passes asb_gateway_address_validate is taken (S8, S9). */
ASBT_TEST(gateway_status_skips_integers_non_objects_and_numeric_hosts) {
    static const char *js =
        "{\"status\":{\"addresses\":[7, \"127.0.0.1\", {\"value\":2130706433}, "
        "{\"type\":\"IPAddress\"}, {\"value\":\"2130706433\"}, {\"value\":\"evil.com/admin\"}, "
        "{\"value\":\"0x7f.0x0.0x0.0x1\"}, {\"value\":\"fd00::1\"}, {\"value\":\"10.0.0.9\"}]}}";
    asb_json_doc d;
    asb_watch_event ev;
    asb__gw_wait g;
    ASBT_EQ_RES(asb_json_doc_parse(&d, js, strlen(js), NULL, NULL), ASB_OK);
    memset(&ev, 0, sizeof ev);
    memset(&g, 0, sizeof g);
    ev.type = ASB_WATCH_MODIFIED;
    ev.doc = &d;
    ev.object = 0;
    ASBT_EQ_INT(asb__gw_event(&g, &ev), 1);
    ASBT_EQ_STR(g.addr, "fd00::1");
    ASBT_EQ_INT(g.skipped, 7);
    asb_json_doc_free(&d);
}

/* --- clients of the kubeconfig at unit_cfg ----------------------------------
   unit_desc: a desc that reads the kubeconfig just written to unit_cfg,
   tries each request once (a refused or recorded answer is final) and
   names the claim API version, so no discovery request reaches a
   recorder ahead of the requests a test counts. A test sets the rest.
   client_from_unit_cfg: asb_client_create, then the kubeconfig goes,
   whatever the result: it has been read by then, and a failed test
   leaves no file behind. The test checks the result. */
static void unit_desc(asb_client_desc *d) {
    memset(d, 0, sizeof *d);
    d->kube.kubeconfig.path = unit_cfg;
    d->kube.http.retry.max_attempts = 1;
    d->claim_api_version = "v1alpha1";
}

static asb_result client_from_unit_cfg(const asb_client_desc *d, asb_client **c, asb_error *err) {
    asb_result r = asb_client_create(d, c, err);
    unlink(unit_cfg);
    return r;
}

/* --- what reaches the router ------------------------------------------------
   A DIRECT-mode client whose router URL is a recorder on 127.0.0.1 and
   whose API server is a loopback port that refuses connections (only
   calls to the router are under test; the handle's own Sandbox lookup
   fails at once and its defaults stand). */

static asb_client *router_client(const char *router_url, const char *token, const asb_logger *log,
                                 asb_error *err) {
    asb_client_desc d;
    asb_client *c = NULL;
    if (!write_unit_kubeconfig()) return NULL;
    unit_desc(&d);
    d.mode = ASB_CONNECT_DIRECT;
    d.direct_url = router_url;
    d.router_token = token;
    if (log) d.log = *log;
    if (client_from_unit_cfg(&d, &c, err) != ASB_OK) c = NULL;
    return c;
}

static void recorder_url(recorder *r, char *url, size_t cap) {
    snprintf(url, cap, "http://127.0.0.1:%d", r->port);
}

/* The recorder as the router of a router_client, and a handle "sb-1" on
   it: the setup of most router tests. The caller checks both, so a
   failure still points at the test that needed them; no client, no
   handle (NULL). */
static asb_sandbox *router_handle(recorder *rec, const char *token, const asb_logger *log,
                                  asb_client **c, asb_error *err) {
    char url[64];
    recorder_url(rec, url, sizeof url);
    *c = router_client(url, token, log, err);
    return *c ? handle_without_cluster(*c, "sb-1") : NULL;
}

static const char run_ok[] = "{\"stdout\":\"\",\"stderr\":\"\",\"exit_code\":0}";

/* A command's deadline goes to the router in whole seconds, rounded up;
   none given (0 or less) is the default, 60 s, as the reference's
   run(timeout=60) sends. File calls send one only when given a deadline. */
ASBT_TEST(router_timeout_header_is_whole_seconds_rounded_up_with_a_60_s_default) {
    static const struct {
        int ms;
        const char *header; /* NULL: not sent */
    } cases[] = {
        {0, "60"},      {-1, "60"},    {-5000, "60"}, {INT_MIN, "60"},
        {999, "1"},     {1000, "1"},   {1001, "2"},   {2500, "3"},
        {60000, "60"},  {INT_MAX, "2147484"},
    };
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c;
    asb_sandbox *sb;
    asb_error err;
    char v[64];
    size_t i;
    ASBT_CHECK(rec != NULL);
    recorder_reply(rec, 200, run_ok);
    sb = router_handle(rec, NULL, NULL, &c, &err);
    if (!c) fprintf(stderr, "    %s\n", err.message);
    ASBT_CHECK(c != NULL);
    ASBT_CHECK(sb != NULL);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        asb_run_result rr;
        recorder_request q;
        asb_result r = asb_sandbox_run(sb, "true", cases[i].ms, &rr, &err);
        asb_run_result_free(&rr);
        if (r != ASB_OK) fprintf(stderr, "    %d ms: %s\n", cases[i].ms, err.message);
        ASBT_EQ_RES(r, ASB_OK);
        ASBT_EQ_INT(recorder_count(rec), (int)i + 1);
        ASBT_CHECK(recorder_get(rec, (int)i, &q));
        if (cases[i].header) {
            if (!recorder_header(q.head, "X-Sandbox-Timeout", v, sizeof v))
                fprintf(stderr, "    %d ms: no X-Sandbox-Timeout in\n%s", cases[i].ms, q.head);
            ASBT_EQ_STR(v, cases[i].header);
        } else {
            if (recorder_header(q.head, "X-Sandbox-Timeout", v, sizeof v))
                fprintf(stderr, "    %d ms: sent X-Sandbox-Timeout: %s\n", cases[i].ms, v);
            ASBT_CHECK(!recorder_header(q.head, "X-Sandbox-Timeout", v, sizeof v));
        }
        /* the routing headers go with every call */
        ASBT_CHECK(recorder_header(q.head, "X-Sandbox-ID", v, sizeof v));
        ASBT_EQ_STR(v, "sb-1");
        ASBT_CHECK(recorder_header(q.head, "X-Sandbox-Namespace", v, sizeof v));
        ASBT_EQ_STR(v, "default");
        ASBT_CHECK(recorder_header(q.head, "X-Sandbox-Port", v, sizeof v));
        ASBT_EQ_STR(v, "8888");
    }
    {
        asb_call_opts o;
        recorder_request q;
        int ex = 0;
        memset(&o, 0, sizeof o);
        recorder_reply(rec, 200, "{\"exists\":true}");
        ASBT_EQ_RES(asb_sandbox_exists(sb, "f", &ex, &err), ASB_OK);
        ASBT_CHECK(recorder_get(rec, recorder_count(rec) - 1, &q));
        ASBT_CHECK(!recorder_header(q.head, "X-Sandbox-Timeout", v, sizeof v));
        o.timeout_ms = 2500;
        ASBT_EQ_RES(asb_sandbox_exists_opts(sb, "f", &ex, &o, &err), ASB_OK);
        ASBT_CHECK(recorder_get(rec, recorder_count(rec) - 1, &q));
        ASBT_CHECK(recorder_header(q.head, "X-Sandbox-Timeout", v, sizeof v));
        ASBT_EQ_STR(v, "3");
    }
    asb_client_free(c);
    recorder_stop(rec);
}

ASBT_TEST(unsafe_paths_and_names_never_reach_the_router) {
    static const char *bad[] = {"../etc/passwd", "dir/../../etc/passwd", "..", "", "   ", ".",
                                "/", "../", "foo\n.txt", "a\tb", "a\rb", "x\x7fy"};
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c;
    asb_sandbox *sb, *evil;
    asb_error err;
    asb_buf out;
    asb_run_result rr;
    size_t i;
    ASBT_CHECK(rec != NULL);
    sb = router_handle(rec, NULL, NULL, &c, &err);
    ASBT_CHECK(c != NULL);
    ASBT_CHECK(sb != NULL);
    asb_buf_init(&out, NULL);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASBT_EQ_RES(asb_sandbox_write(sb, bad[i], "x", 1, &err), ASB_ERR_INVALID_ARGUMENT);
        ASBT_EQ_RES(asb_sandbox_read(sb, bad[i], &out, &err), ASB_ERR_INVALID_ARGUMENT);
    }
    /* control: a safe path does reach the recorder */
    ASBT_EQ_RES(asb_sandbox_write(sb, "foo", "x", 1, &err), ASB_OK);
    ASBT_EQ_INT(recorder_count(rec), 1);
    /* names from the API go into headers: a bad one stops the call (S12) */
    evil = handle_without_cluster(c, "Evil.Name");
    ASBT_CHECK(evil != NULL);
    ASBT_EQ_RES(asb_sandbox_run(evil, "true", 0, &rr, &err), ASB_ERR_INVALID_ARGUMENT);
    asb_run_result_free(&rr);
    evil = handle_without_cluster(c, "sb\r\nX-Evil: 1");
    ASBT_CHECK(evil != NULL);
    ASBT_EQ_RES(asb_sandbox_run(evil, "true", 0, &rr, &err), ASB_ERR_INVALID_ARGUMENT);
    asb_run_result_free(&rr);
    ASBT_EQ_INT(recorder_count(rec), 1);
    asb_buf_free(&out);
    asb_client_free(c);
    recorder_stop(rec);
}

/* R9: an object name "." or ".." would become a path segment naming the
   collection or its parent (DELETE .../sandboxclaims/..). Refused before
   any request, as client-go does; the recorder (the kubeconfig's API
   server here) sees nothing until a valid name is used. */
ASBT_TEST(dot_and_dot_dot_object_names_never_reach_the_api_server) {
    static const char *bad[] = {".", "..", "a/b", "a%2e", ""};
    recorder *rec = recorder_start("127.0.0.1");
    asb_kube_client_desc d;
    asb_kube_client *kc = NULL;
    asb_kube_resource res;
    asb_error err;
    asb_buf out;
    size_t i;
    ASBT_CHECK(rec != NULL);
    ASBT_CHECK(write_token_kubeconfig(rec->port, NULL, NULL));
    memset(&d, 0, sizeof d);
    d.kubeconfig.path = unit_cfg;
    d.http.retry.max_attempts = 1;
    ASBT_EQ_RES(asb_kube_client_create(&d, &kc, &err), ASB_OK);
    unlink(unit_cfg);
    memset(&res, 0, sizeof res);
    res.group = "extensions.agents.x-k8s.io";
    res.version = "v1alpha1";
    res.plural = "sandboxclaims";
    asb_buf_init(&out, NULL);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASBT_EQ_RES(asb_kube_delete(kc, &res, "default", bad[i], &err), ASB_ERR_INVALID_ARGUMENT);
        ASBT_EQ_RES(asb_kube_get(kc, &res, "default", bad[i], &out, &err),
                    ASB_ERR_INVALID_ARGUMENT);
        ASBT_EQ_RES(asb_kube_patch(kc, &res, "default", bad[i], "{}", 2, &out, &err),
                    ASB_ERR_INVALID_ARGUMENT);
    }
    ASBT_EQ_INT(recorder_count(rec), 0);
    /* control: a name with dots in it is a valid name, and is sent */
    recorder_reply(rec, 200, "{}");
    ASBT_EQ_RES(asb_kube_delete(kc, &res, "default", "a.b", &err), ASB_OK);
    ASBT_EQ_INT(recorder_count(rec), 1);
    asb_buf_free(&out);
    asb_kube_client_free(kc);
    recorder_stop(rec);
}

/* R6 for the router path: the router token and a key in an extra header
   are wiped before their memory is freed (the client's copies, every
   request head that carried them, growth included: the 1 KB token makes
   the head outgrow its first blocks). The scanning allocator of
   tests/scanalloc.h checks every block given back. */
ASBT_TEST(router_token_and_header_keys_are_wiped_before_their_memory_is_freed) {
    static char token[1100];
    static const char key[] = "scan-api-key-91ff03c2d7";
    recorder *rec = recorder_start("127.0.0.1");
    scanalloc sa;
    asb_client_desc d;
    asb_client *c = NULL;
    asb_sandbox *sb;
    asb_http_header extra;
    asb_run_result rr;
    asb_error err;
    char url[64];
    size_t i;
    int k;
    ASBT_CHECK(rec != NULL);
    snprintf(token, sizeof token, "scan-router-token-4b9e-");
    for (i = strlen(token); i < sizeof token - 1; i++) token[i] = (char)('a' + (i * 3) % 26);
    token[sizeof token - 1] = 0;
    scanalloc_init(&sa);
    scanalloc_secret(&sa, "scan-router-token-4b9e");
    scanalloc_secret(&sa, key);
    recorder_url(rec, url, sizeof url);
    ASBT_CHECK(write_unit_kubeconfig());
    unit_desc(&d);
    d.kube.http.allocator = &sa.a;
    d.mode = ASB_CONNECT_DIRECT;
    d.direct_url = url;
    d.router_token = token;
    extra.name = "X-Api-Key";
    extra.value = key;
    d.extra_headers = &extra;
    d.extra_header_count = 1;
    ASBT_EQ_RES(client_from_unit_cfg(&d, &c, &err), ASB_OK);
    sb = handle_without_cluster(c, "sb-1");
    ASBT_CHECK(sb != NULL);
    recorder_reply(rec, 200, run_ok);
    for (k = 0; k < 3; k++) {
        ASBT_EQ_RES(asb_sandbox_run(sb, "true", 0, &rr, &err), ASB_OK);
        asb_run_result_free(&rr);
    }
    recorder_reply(rec, 401, "{\"detail\":\"Unauthorized\"}");
    ASBT_EQ_RES(asb_sandbox_run(sb, "true", 0, &rr, &err), ASB_ERR_HTTP_STATUS);
    asb_run_result_free(&rr);
    ASBT_EQ_INT(recorder_count(rec), 4);
    ASBT_CHECK(scanalloc_live_has(&sa, 0) && scanalloc_live_has(&sa, 1));
    asb_client_free(c);
    recorder_stop(rec);
    ASBT_EQ_INT(sa.hits, 0);
    ASBT_EQ_INT(scanalloc_live_count(&sa), 0);
    scanalloc_fini(&sa);
}

ASBT_TEST(file_paths_are_normalised_and_percent_encoded_on_the_wire) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c;
    asb_sandbox *sb;
    asb_error err;
    asb_buf out;
    asb_file_list fl;
    recorder_request q;
    int ex = -1;
    ASBT_CHECK(rec != NULL);
    sb = router_handle(rec, NULL, NULL, &c, &err);
    ASBT_CHECK(c != NULL);
    ASBT_CHECK(sb != NULL);
    /* S2: the upload names the normalised path */
    recorder_reply(rec, 200, "{\"message\":\"ok\"}");
    ASBT_EQ_RES(asb_sandbox_write(sb, "/dir//f.txt", "data", 4, &err), ASB_OK);
    ASBT_CHECK(recorder_get(rec, 0, &q));
    ASBT_CHECK(strncmp(q.head, "POST /upload HTTP/1.1\r\n", 23) == 0);
    ASBT_CHECK(recorder_has(q.body, q.body_len, "filename=\"dir/f.txt\""));
    /* S6: every byte outside A-Za-z0-9-_.~ is escaped, '/' included */
    recorder_reply(rec, 200, "bytes");
    asb_buf_init(&out, NULL);
    ASBT_EQ_RES(asb_sandbox_read(sb, "/dir//x y.txt", &out, &err), ASB_OK);
    asb_buf_free(&out);
    ASBT_CHECK(recorder_get(rec, 1, &q));
    ASBT_CHECK(strncmp(q.head, "GET /download/dir%2Fx%20y.txt HTTP/1.1\r\n", 40) == 0);
    /* "." and ".." as whole segments: %2E, %2E%2E (no dot-segment
       removal anywhere on the way, no 301 to /list/) */
    recorder_reply(rec, 200, "[]");
    ASBT_EQ_RES(asb_sandbox_list(sb, ".", &fl, &err), ASB_OK);
    asb_file_list_free(&fl);
    ASBT_CHECK(recorder_get(rec, 2, &q));
    ASBT_CHECK(strncmp(q.head, "GET /list/%2E HTTP/1.1\r\n", 24) == 0);
    recorder_reply(rec, 200, "{\"exists\":false}");
    ASBT_EQ_RES(asb_sandbox_exists(sb, "..", &ex, &err), ASB_OK);
    ASBT_EQ_INT(ex, 0);
    ASBT_CHECK(recorder_get(rec, 3, &q));
    ASBT_CHECK(strncmp(q.head, "GET /exists/%2E%2E HTTP/1.1\r\n", 29) == 0);
    ASBT_EQ_RES(asb_sandbox_exists(sb, "a/b?c#d", &ex, &err), ASB_OK);
    ASBT_CHECK(recorder_get(rec, 4, &q));
    ASBT_CHECK(strncmp(q.head, "GET /exists/a%2Fb%3Fc%23d HTTP/1.1\r\n", 36) == 0);
    asb_client_free(c);
    recorder_stop(rec);
}

/* A sandboxd REST call over the native tunnel whose dial the apiserver
   refused (the pod gone: 404 with its Status, reason "NotFound") keeps
   the apiserver's error: it used to be relabelled "sandboxd answered 404
   NOT_FOUND" with sandboxd's code, so a caller (agentsandbox cp -r)
   took a gone pod for one missing file and went on through the tree.
   sandboxd's own 404 is still read as sandboxd's. */
ASBT_TEST(a_sandboxd_call_keeps_the_apiservers_404_as_the_apiservers) {
    static const char body[] = "{\"code\":\"NOT_FOUND\",\"message\":\"no such file\"}";
    asb_error e;
    memset(&e, 0, sizeof e);
    e.code = ASB_ERR_NOT_FOUND;
    e.http_status = 404;
    snprintf(e.reason, sizeof e.reason, "NotFound");
    snprintf(e.message, sizeof e.message, "GET pods/sb-0/portforward: 404 NotFound: pods \"sb-0\" not found");
    ASBT_EQ_RES(asb__sd_rest_error(ASB_ERR_NOT_FOUND, "read", "a.txt", &e), ASB_ERR_NOT_FOUND);
    ASBT_EQ_STR(e.reason, "NotFound");
    ASBT_CONTAINS(e.message, "pods \"sb-0\" not found");
    ASBT_CHECK(strstr(e.message, "sandboxd answered") == NULL);
    /* sandboxd's own answer: its code and message */
    memset(&e, 0, sizeof e);
    e.code = ASB_ERR_HTTP_STATUS;
    e.http_status = 404;
    memcpy(e.body, body, sizeof body - 1);
    e.body_len = sizeof body - 1;
    ASBT_EQ_RES(asb__sd_rest_error(ASB_ERR_HTTP_STATUS, "read", "a.txt", &e), ASB_ERR_NOT_FOUND);
    ASBT_EQ_STR(e.reason, "NOT_FOUND");
    ASBT_CONTAINS(e.message, "sandboxd answered 404 NOT_FOUND: no such file");
}

/* The recorder as the apiserver answers every request with claim c1,
   Ready, its Sandbox sb-1 on the pod pod_json (as the name stands in
   JSON, escapes and all): where the pod tunnel tests start. */
static void reply_claim_c1_on_pod(recorder *rec, const char *pod_json) {
    char reply[1024];
    snprintf(reply, sizeof reply,
             "{\"metadata\":{\"name\":\"c1\",\"uid\":\"u1\",\"annotations\":{"
             "\"agents.x-k8s.io/pod-name\":\"%s\"}},"
             "\"status\":{\"sandbox\":{\"name\":\"sb-1\"},\"conditions\":[{\"type\":"
             "\"Ready\",\"status\":\"True\"}]}}",
             pod_json);
    recorder_reply(rec, 200, reply);
}

/* R72: stat and exists read sandboxd's 404 as "nothing there"; a 404
   from the apiserver (the native pod tunnel's dial: the pod is gone) is
   not an answer about the file and stays an error. It used to read as
   exists 0 with ASB_OK: a caller checking that the agent wrote its output
   was told the file was missing while the sandbox could not be reached.
   The recorder plays the apiserver: the claim, then 404 NotFound. */
ASBT_TEST(a_gone_pod_is_an_error_for_stat_not_a_missing_file) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client_desc d;
    asb_client *c = NULL;
    asb_sandbox *sb = NULL;
    asb_file_stat st;
    asb_error err;
    int exists = -1;
    ASBT_CHECK(rec != NULL);
    reply_claim_c1_on_pod(rec, "sb-1-pod");
    ASBT_CHECK(write_token_kubeconfig(rec->port, NULL, NULL));
    unit_desc(&d);
    d.mode = ASB_CONNECT_NATIVE_TUNNEL;
    d.runtime = ASB_RUNTIME_SANDBOXD;
    ASBT_EQ_RES(client_from_unit_cfg(&d, &c, &err), ASB_OK);
    ASBT_EQ_RES(asb_client_get_sandbox(c, "c1", "default", 5000, &sb, &err), ASB_OK);
    recorder_reply(rec, 404,
                   "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                   "\"message\":\"pods \\\"sb-1-pod\\\" not found\",\"reason\":\"NotFound\","
                   "\"code\":404}");
    memset(&st, 0, sizeof st);
    ASBT_EQ_RES(asb_sandbox_stat(sb, "out.txt", &st, NULL, &err), ASB_ERR_NOT_FOUND);
    ASBT_EQ_STR(err.reason, "NotFound");
    ASBT_CONTAINS(err.message, "pods \"sb-1-pod\" not found");
    ASBT_EQ_RES(asb_sandbox_exists(sb, "out.txt", &exists, &err), ASB_ERR_NOT_FOUND);
    ASBT_EQ_INT(exists, 0);
    asb_client_free(c);
    recorder_stop(rec);
}

/* R69: a listed name with a NUL in it ("\u0000" in the JSON) was cut
   there by the entry's char *: "a\u0000/../../x" read as "a", another
   file than the one the runtime listed, and "..\u0000" as "..". Such an
   entry is skipped, as one without a name; on both runtimes. */
ASBT_TEST(a_listed_name_with_a_nul_is_skipped_not_cut) {
    static const char legacy[] =
        "[{\"name\":\"ok\",\"type\":\"file\",\"size\":1},"
        "{\"name\":\"a\\u0000/../../x\",\"type\":\"file\",\"size\":2},"
        "{\"name\":\"..\\u0000\",\"type\":\"directory\"},"
        "{\"name\":\"\\u0000\",\"type\":\"file\"},"
        "{\"name\":\"sub\",\"type\":\"directory\"}]";
    static const char sandboxd[] =
        "{\"path\":\"d\",\"entries\":[{\"name\":\"ok\",\"type\":\"file\",\"size\":1},"
        "{\"name\":\"a\\u0000/../../x\",\"type\":\"file\",\"size\":2},"
        "{\"name\":\"..\\u0000\",\"type\":\"directory\"},"
        "{\"name\":\"sub\",\"type\":\"directory\"}]}";
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c;
    asb_sandbox *sb;
    asb_client_desc d;
    asb_error err;
    asb_file_list fl;
    char url[64], addr[64];
    int round;
    ASBT_CHECK(rec != NULL);
    for (round = 0; round < 2; round++) {
        if (round == 0) { /* the legacy runtime, behind a router */
            recorder_url(rec, url, sizeof url);
            c = router_client(url, NULL, NULL, &err);
            ASBT_CHECK(c != NULL);
            sb = handle_without_cluster(c, "sb-1");
            recorder_reply(rec, 200, legacy);
        } else { /* sandboxd's REST port, in the pod */
            memset(&d, 0, sizeof d);
            snprintf(addr, sizeof addr, "127.0.0.1:%d", rec->port);
            d.mode = ASB_CONNECT_IN_POD;
            d.sandboxd_rest_addr = addr;
            d.sandboxd_grpc_addr = addr;
            d.kube.http.retry.max_attempts = 1;
            c = NULL;
            sb = NULL;
            ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_OK);
            ASBT_EQ_RES(asb_client_sandbox_in_pod(c, &sb, &err), ASB_OK);
            recorder_reply(rec, 200, sandboxd);
        }
        ASBT_CHECK(sb != NULL);
        memset(&fl, 0, sizeof fl);
        ASBT_EQ_RES(asb_sandbox_list(sb, "d", &fl, &err), ASB_OK);
        ASBT_EQ_INT((int)fl.count, 2);
        if (fl.count == 2) {
            ASBT_EQ_STR(fl.entries[0].name, "ok");
            ASBT_EQ_INT((int)fl.entries[0].size, 1);
            ASBT_EQ_STR(fl.entries[1].name, "sub");
            ASBT_EQ_INT(fl.entries[1].is_dir, 1);
        }
        asb_file_list_free(&fl);
        asb_client_free(c);
    }
    ASBT_EQ_INT(recorder_count(rec), 2);
    recorder_stop(rec);
}

/* R51: list and exists send their path as given (the runtime confines
   it), through a 4096-byte buffer: a longer path was cut to its first
   4095 bytes, another path, and that one was listed. Refused instead,
   with nothing sent; a path one byte under the cap still goes. */
ASBT_TEST(a_list_or_exists_path_longer_than_the_cap_is_refused_not_cut) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c;
    asb_sandbox *sb;
    asb_error err;
    asb_file_list fl;
    recorder_request q;
    int ex = -1;
    char *path = (char *)malloc(4101);
    ASBT_CHECK(rec != NULL && path != NULL);
    memset(path, 'a', 4100);
    memcpy(path + 4100 - 23, "/secret-dir-that-is-cut", 23);
    path[4100] = '\0';
    sb = router_handle(rec, NULL, NULL, &c, &err);
    ASBT_CHECK(c != NULL);
    ASBT_CHECK(sb != NULL);
    memset(&fl, 0, sizeof fl);
    ASBT_EQ_RES(asb_sandbox_list(sb, path, &fl, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "4100 bytes");
    ASBT_CONTAINS(err.message, "at most 4095");
    ASBT_EQ_RES(asb_sandbox_exists(sb, path, &ex, &err), ASB_ERR_INVALID_ARGUMENT);
    path[4096] = '\0'; /* 4096 bytes: one too many */
    ASBT_EQ_RES(asb_sandbox_list(sb, path, &fl, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_EQ_INT(recorder_count(rec), 0);
    memset(path, 'a', 4095); /* 4095 bytes: sent whole */
    path[4095] = '\0';
    recorder_reply(rec, 200, "[]");
    ASBT_EQ_RES(asb_sandbox_list(sb, path, &fl, &err), ASB_OK);
    asb_file_list_free(&fl);
    ASBT_EQ_INT(recorder_count(rec), 1);
    ASBT_CHECK(recorder_get(rec, 0, &q));
    ASBT_CHECK(strncmp(q.head, "GET /list/aaaa", 14) == 0);
    ASBT_CHECK(strstr(q.head, " HTTP/1.1\r\n") - q.head == 10 + 4095);
    asb_client_free(c);
    recorder_stop(rec);
    free(path);
}

ASBT_TEST(router_token_goes_to_the_router_and_never_into_errors_or_the_log) {
    static const char token[] = "s20-router-token-5c1a9e";
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c;
    asb_sandbox *sb;
    asb_error err;
    asb_run_result rr;
    recorder_request q;
    asbt_log logged;
    asb_logger log;
    char url[64], v[128];
    asbt_log_open(&logged, &log, ASB_LOG_DEBUG);
    ASBT_CHECK(rec != NULL);
    sb = router_handle(rec, token, &log, &c, &err);
    ASBT_CHECK(c != NULL);
    ASBT_CHECK(sb != NULL);
    /* the router gets it, as a bearer token */
    recorder_reply(rec, 200, run_ok);
    ASBT_EQ_RES(asb_sandbox_run(sb, "true", 0, &rr, &err), ASB_OK);
    asb_run_result_free(&rr);
    ASBT_CHECK(recorder_get(rec, 0, &q));
    ASBT_CHECK(recorder_header(q.head, "Authorization", v, sizeof v));
    ASBT_EQ_STR(v, "Bearer s20-router-token-5c1a9e");
    /* a router that refuses: status and body kept, the token nowhere */
    recorder_reply(rec, 401, "{\"detail\":\"Unauthorized\"}");
    ASBT_EQ_RES(asb_sandbox_run(sb, "true", 0, &rr, &err), ASB_ERR_HTTP_STATUS);
    asb_run_result_free(&rr);
    ASBT_EQ_INT(err.http_status, 401);
    ASBT_CHECK(recorder_has(err.body, err.body_len, "Unauthorized"));
    ASBT_CHECK(strstr(err.message, token) == NULL);
    ASBT_CHECK(!recorder_has(err.body, err.body_len, token));
    /* a peer that echoes the request's headers into its error body: the
       token is masked in err, the rest of the body kept */
    recorder_reply(rec, 400,
                   "{\"error\":\"bad request\",\"got\":\"Authorization: Bearer "
                   "s20-router-token-5c1a9e\"}");
    ASBT_EQ_RES(asb_sandbox_run(sb, "true", 0, &rr, &err), ASB_ERR_HTTP_STATUS);
    asb_run_result_free(&rr);
    ASBT_CHECK(!recorder_has(err.body, err.body_len, token));
    ASBT_CHECK(recorder_has(err.body, err.body_len, "\"got\":\"Authorization: Bearer ****"));
    ASBT_CHECK(recorder_has(err.body, err.body_len, "bad request"));
    /* the same echo in a 200 that is no run result (R8's sibling): the
       body kept in err is masked as well */
    recorder_reply(rec, 200, "{\"echo\":\"Authorization: Bearer s20-router-token-5c1a9e\"}");
    ASBT_EQ_RES(asb_sandbox_run(sb, "true", 0, &rr, &err), ASB_ERR_HTTP_PROTOCOL);
    asb_run_result_free(&rr);
    ASBT_CHECK(!recorder_has(err.body, err.body_len, token));
    ASBT_CHECK(recorder_has(err.body, err.body_len, "Authorization: Bearer ****"));
    asb_client_free(c);
    recorder_stop(rec);
    /* a router that is not there: the transport error names no token */
    snprintf(url, sizeof url, "http://127.0.0.1:%d", refused_port());
    c = router_client(url, token, &log, &err);
    ASBT_CHECK(c != NULL);
    sb = handle_without_cluster(c, "sb-1");
    ASBT_CHECK(sb != NULL);
    ASBT_EQ_RES(asb_sandbox_run(sb, "true", 0, &rr, &err), ASB_ERR_CONNECT);
    asb_run_result_free(&rr);
    ASBT_CHECK(err.message[0] != '\0');
    ASBT_CHECK(strstr(err.message, token) == NULL);
    ASBT_CHECK(!recorder_has(err.body, err.body_len, token));
    asb_client_free(c);
    /* the calls, the 401 and the connect error were logged; the token not */
    ASBT_CHECK(asbt_log_count(&logged, "sandbox.call") > 0);
    ASBT_CHECK(asbt_log_count(&logged, "401") > 0);
    ASBT_CHECK(asbt_log_count(&logged, token) == 0);
    ASBT_CHECK(asbt_log_count(&logged, "Bearer") == 0);
    asbt_log_close(&logged);
}

/* Extra router headers are how some routers take an API key: a value of
   8 bytes or more is masked where an error echoes it, like the token; a
   shorter one is no key and stays readable. */
ASBT_TEST(keys_in_extra_headers_are_masked_in_echoed_error_bodies) {
    static const char key[] = "k-7f3e9a1c5b2d";
    recorder *rec = recorder_start("127.0.0.1");
    asb_client_desc d;
    asb_client *c = NULL;
    asb_sandbox *sb;
    asb_error err;
    asb_run_result rr;
    asb_http_header extra[2];
    recorder_request q;
    char url[64], v[64];
    ASBT_CHECK(rec != NULL && write_unit_kubeconfig());
    recorder_url(rec, url, sizeof url);
    extra[0].name = "X-Api-Key";
    extra[0].value = key;
    extra[1].name = "X-Team";
    extra[1].value = "blue";
    unit_desc(&d);
    d.mode = ASB_CONNECT_DIRECT;
    d.direct_url = url;
    d.extra_headers = extra;
    d.extra_header_count = 2;
    ASBT_EQ_RES(client_from_unit_cfg(&d, &c, &err), ASB_OK);
    sb = handle_without_cluster(c, "sb-1");
    ASBT_CHECK(sb != NULL);
    recorder_reply(rec, 403,
                   "{\"error\":\"key k-7f3e9a1c5b2d of team blue is not allowed\","
                   "\"key\":\"k-7f3e9a1c5b2d\"}");
    ASBT_EQ_RES(asb_sandbox_run(sb, "true", 0, &rr, &err), ASB_ERR_HTTP_STATUS);
    asb_run_result_free(&rr);
    ASBT_CHECK(recorder_get(rec, 0, &q));
    ASBT_CHECK(recorder_header(q.head, "X-Api-Key", v, sizeof v));
    ASBT_EQ_STR(v, key); /* the router got it as given */
    ASBT_CHECK(!recorder_has(err.body, err.body_len, key));
    ASBT_CHECK(recorder_has(err.body, err.body_len,
                            "key ************** of team blue is not allowed"));
    ASBT_CHECK(strstr(err.message, key) == NULL);
    asb_client_free(c);
    recorder_stop(rec);
}

/* S15, error bodies: err keeps the first ASB_ERROR_BODY_SIZE (512) bytes
   of a long one, and err.message is not the body. */
ASBT_TEST(a_long_error_body_keeps_its_first_512_bytes_in_err) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c;
    asb_sandbox *sb;
    asb_error err;
    asb_run_result rr;
    char big[2001];
    ASBT_CHECK(rec != NULL);
    memset(big, 'e', 2000);
    big[0] = '<';
    big[2000] = '\0';
    recorder_reply(rec, 500, big);
    sb = router_handle(rec, NULL, NULL, &c, &err);
    ASBT_CHECK(c != NULL);
    ASBT_CHECK(sb != NULL);
    ASBT_EQ_RES(asb_sandbox_run(sb, "true", 0, &rr, &err), ASB_ERR_HTTP_STATUS);
    asb_run_result_free(&rr);
    ASBT_EQ_INT(err.http_status, 500);
    ASBT_EQ_INT(err.body_len, ASB_ERROR_BODY_SIZE);
    ASBT_EQ_MEM(err.body, err.body_len, big, ASB_ERROR_BODY_SIZE);
    ASBT_CHECK(strlen(err.message) < 300);
    ASBT_EQ_INT(recorder_count(rec), 1); /* a POST that reached the runtime: not retried */
    asb_client_free(c);
    recorder_stop(rec);
}

static int64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
static int64_t now_ms(void) { return now_us() / 1000; }

/* The one deadline rule: a call with a deadline waits for its answer until
   the deadline, never less. The client's read timeout (300 ms here, 30 s
   by default) used to cut a command that printed nothing for longer. */
/* The legacy /execute answer: "timed_out" is optional (runtimes before
   1.0.8's command_timeout do not send it), a bool or null; anything else
   there is a malformed answer. */
ASBT_TEST(a_run_answer_says_timed_out_only_when_the_runtime_does) {
    static const struct {
        const char *body;
        asb_result r;
        int timed_out;
    } cases[] = {
        {"{\"stdout\":\"a\",\"stderr\":\"\",\"exit_code\":0}", ASB_OK, 0},
        {"{\"stdout\":\"\",\"stderr\":\"t\",\"exit_code\":124,\"timed_out\":true}", ASB_OK, 1},
        {"{\"stdout\":\"\",\"stderr\":\"\",\"exit_code\":0,\"timed_out\":false}", ASB_OK, 0},
        {"{\"stdout\":\"\",\"stderr\":\"\",\"exit_code\":0,\"timed_out\":null}", ASB_OK, 0},
        {"{\"stdout\":\"\",\"stderr\":\"\",\"exit_code\":0,\"timed_out\":\"yes\"}",
         ASB_ERR_HTTP_PROTOCOL, 0},
        {"{\"stdout\":\"\",\"stderr\":\"\",\"exit_code\":0,\"timed_out\":1}",
         ASB_ERR_HTTP_PROTOCOL, 0},
    };
    asb_allocator a;
    size_t i;
    asb__allocator_resolve(NULL, &a);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        asb_run_result rr;
        memset(&rr, 0, sizeof rr);
        asb_buf_init(&rr.out, NULL);
        asb_buf_init(&rr.err, NULL);
        ASBT_EQ_RES(asb__run_answer_decode(cases[i].body, strlen(cases[i].body), &a, &rr),
                    cases[i].r);
        if (cases[i].r == ASB_OK) ASBT_EQ_INT(rr.timed_out, cases[i].timed_out);
        asb_run_result_free(&rr);
    }
}

ASBT_TEST(a_deadline_longer_than_the_read_timeout_waits_for_the_answer) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client_desc d;
    asb_client *c = NULL;
    asb_sandbox *sb;
    asb_error err;
    asb_run_result rr;
    asb_call_opts o;
    asb_buf out;
    char url[64];
    int64_t t0;
    ASBT_CHECK(rec != NULL);
    recorder_url(rec, url, sizeof url);
    ASBT_CHECK(write_unit_kubeconfig());
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = unit_cfg;
    d.kube.http.retry.max_attempts = 1;
    d.kube.http.read_timeout_ms = 300;
    d.mode = ASB_CONNECT_DIRECT;
    d.direct_url = url;
    ASBT_EQ_RES(client_from_unit_cfg(&d, &c, &err), ASB_OK);
    sb = handle_without_cluster(c, "sb-1");
    ASBT_CHECK(sb != NULL);
    recorder_reply(rec, 200, run_ok);
    recorder_delay(rec, 1000);
    t0 = now_ms();
    ASBT_EQ_RES(asb_sandbox_run(sb, "sleep 1", 5000, &rr, &err), ASB_OK);
    asb_run_result_free(&rr);
    ASBT_CHECK(now_ms() - t0 >= 1000);
    recorder_delay(rec, 1000);
    t0 = now_ms();
    ASBT_EQ_RES(asb_sandbox_run(sb, "sleep 1", 0, &rr, &err), ASB_OK); /* the default: 60 s */
    asb_run_result_free(&rr);
    ASBT_CHECK(now_ms() - t0 >= 1000);
    /* a file call with a deadline too */
    recorder_reply(rec, 200, "bytes");
    recorder_delay(rec, 1000);
    memset(&o, 0, sizeof o);
    o.timeout_ms = 5000;
    asb_buf_init(&out, NULL);
    ASBT_EQ_RES(asb_sandbox_read_opts(sb, "f", &out, &o, &err), ASB_OK);
    ASBT_EQ_MEM(out.ptr, out.len, "bytes", 5);
    asb_buf_free(&out);
    /* without one, a file call keeps the client's read timeout */
    recorder_delay(rec, 1000);
    ASBT_EQ_RES(asb_sandbox_exists(sb, "f", &o.timeout_ms, &err), ASB_ERR_TIMEOUT);
    asb_client_free(c);
    recorder_stop(rec);
}

/* A command that outlives its deadline: ASB_ERR_TIMEOUT at the deadline,
   not before, with a message that names it and says the command may
   still be running. */
ASBT_TEST(a_command_past_its_deadline_is_a_timeout_that_names_it) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c;
    asb_sandbox *sb;
    asb_error err;
    asb_run_result rr;
    int64_t t0, took;
    ASBT_CHECK(rec != NULL);
    sb = router_handle(rec, NULL, NULL, &c, &err);
    ASBT_CHECK(c != NULL);
    ASBT_CHECK(sb != NULL);
    recorder_reply(rec, 200, run_ok);
    recorder_delay(rec, 20000);
    t0 = now_ms();
    ASBT_EQ_RES(asb_sandbox_run(sb, "sleep 20", 1500, &rr, &err), ASB_ERR_TIMEOUT);
    took = now_ms() - t0;
    asb_run_result_free(&rr);
    ASBT_CHECK(took >= 1500);
    ASBT_CHECK(took < 20000); /* before the recorder's answer: an order, not a speed */
    ASBT_EQ_INT(err.code, ASB_ERR_TIMEOUT);
    ASBT_CONTAINS(err.message, "1500 ms deadline");
    ASBT_CONTAINS(err.message, "may still be running");
    /* the handle works on */
    ASBT_EQ_RES(asb_sandbox_run(sb, "true", 5000, &rr, &err), ASB_OK);
    asb_run_result_free(&rr);
    asb_client_free(c);
    recorder_stop(rec);
}

/* A cancel from another thread ends a call waiting on a silent runtime at
   once (the token's pipe is polled beside the socket); the handle serves
   the next call. A token triggered before a call stops it before anything
   is sent. */
ASBT_TEST(cancel_from_another_thread_ends_a_waiting_call_at_once) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c;
    asb_sandbox *sb;
    asb_error err;
    asb_run_result rr;
    asb_call_opts o;
    canceller k;
    pthread_t th;
    int64_t latency;
    int i, n;
    ASBT_CHECK(rec != NULL);
    sb = router_handle(rec, NULL, NULL, &c, &err);
    ASBT_CHECK(c != NULL);
    ASBT_CHECK(sb != NULL);
    memset(&o, 0, sizeof o);
    memset(&k, 0, sizeof k);
    ASBT_EQ_RES(asb_cancel_create(NULL, &k.token, &err), ASB_OK);
    ASBT_EQ_INT(asb_cancel_is_triggered(k.token), 0);
    o.cancel = k.token;
    o.timeout_ms = 60000;
    recorder_reply(rec, 200, run_ok);
    for (i = 0; i < 3; i++) { /* run, read, write: every call honours it */
        asb_buf out;
        asb_result r;
        recorder_delay(rec, 30000);
        k.after_ms = 300;
        ASBT_CHECK(pthread_create(&th, NULL, cancel_later, &k) == 0);
        asb_buf_init(&out, NULL);
        if (i == 0) r = asb_sandbox_run_opts(sb, "sleep 60", &o, &rr, &err);
        else if (i == 1) r = asb_sandbox_read_opts(sb, "f", &out, &o, &err);
        else r = asb_sandbox_write_opts(sb, "f", "data", 4, &o, &err);
        latency = now_us() - k.at;
        pthread_join(th, NULL);
        if (i == 0) asb_run_result_free(&rr);
        asb_buf_free(&out);
        ASBT_EQ_RES(r, ASB_ERR_CANCELLED);
        ASBT_CONTAINS(err.message, "cancelled");
        if (i == 0) ASBT_CONTAINS(err.message, "may still be running");
        fprintf(stderr, "    cancel latency (%s): %lld us\n", i == 0 ? "run" : i == 1 ? "read" : "write",
                (long long)latency);
        /* before the recorder's answer (30 s): the token ended the wait;
           an order, not a speed (measured well under 1 ms, printed above) */
        ASBT_CHECK(latency < 30000000);
        ASBT_EQ_INT(asb_cancel_is_triggered(k.token), 1);
        asb_cancel_reset(k.token);
        ASBT_EQ_INT(asb_cancel_is_triggered(k.token), 0);
        /* the handle serves the next call (on a new connection) */
        ASBT_EQ_RES(asb_sandbox_run_opts(sb, "true", &o, &rr, &err), ASB_OK);
        asb_run_result_free(&rr);
    }
    /* triggered before the call: nothing is sent */
    n = recorder_count(rec);
    asb_cancel_trigger(k.token);
    asb_cancel_trigger(k.token); /* idempotent */
    ASBT_EQ_RES(asb_sandbox_run_opts(sb, "true", &o, &rr, &err), ASB_ERR_CANCELLED);
    asb_run_result_free(&rr);
    ASBT_EQ_INT(recorder_count(rec), n);
    asb_cancel_free(k.token);
    asb_client_free(c);
    recorder_stop(rec);
}

/* The token ends any wait of the HTTP layer, a TLS handshake too: the
   recorder takes the connection and never answers the ClientHello. */
ASBT_TEST(cancel_ends_a_tls_handshake_that_gets_no_answer) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_http_client *cl = NULL;
    asb_http_client_desc d;
    asb_http_request req;
    asb_http_response resp;
    asb_error err;
    canceller k;
    pthread_t th;
    char url[80];
    int64_t latency;
    asb_result r;
    ASBT_CHECK(rec != NULL);
    memset(&d, 0, sizeof d);
    d.retry.max_attempts = 1;
    ASBT_EQ_RES(asb_http_client_create(&d, &cl, &err), ASB_OK);
    memset(&k, 0, sizeof k);
    ASBT_EQ_RES(asb_cancel_create(NULL, &k.token, &err), ASB_OK);
    snprintf(url, sizeof url, "https://127.0.0.1:%d/", rec->port);
    memset(&req, 0, sizeof req);
    req.url = url;
    req.cancel = k.token;
    k.after_ms = 300;
    ASBT_CHECK(pthread_create(&th, NULL, cancel_later, &k) == 0);
    r = asb_http_do(cl, &req, &resp, &err);
    latency = now_us() - k.at;
    pthread_join(th, NULL);
    asb_http_response_free(&resp);
#if ASB_TLS
    ASBT_EQ_RES(r, ASB_ERR_CANCELLED);
    ASBT_CONTAINS(err.message, "cancelled");
    ASBT_CHECK(latency < 10000000); /* before the 10 s handshake timeout: an order */
#else
    ASBT_EQ_RES(r, ASB_ERR_TLS_UNAVAILABLE);
    (void)latency;
#endif
    asb_cancel_free(k.token);
    asb_http_client_free(cl);
    recorder_stop(rec);
}

/* A client whose API server is the recorder (plain http, no retries), in
   DIRECT mode so no kubectl starts. */
static asb_client *apiserver_client_traced(recorder *rec, const asb_tracer_desc *tracer,
                                           asb_error *err);
static asb_client *apiserver_client(recorder *rec, asb_error *err) {
    return apiserver_client_traced(rec, NULL, err);
}

static asb_client *apiserver_client_traced(recorder *rec, const asb_tracer_desc *tracer,
                                           asb_error *err) {
    asb_client_desc d;
    asb_client *c = NULL;
    if (!write_token_kubeconfig(rec->port, NULL, NULL)) return NULL;
    unit_desc(&d);
    d.mode = ASB_CONNECT_DIRECT;
    d.direct_url = "http://127.0.0.1:1";
    if (tracer) d.tracer = *tracer;
    if (client_from_unit_cfg(&d, &c, err) != ASB_OK) c = NULL;
    return c;
}

/* The claim name a recorded create POST carried ("" if none). */
static void posted_claim_name(const recorder_request *q, char *out, size_t cap) {
    const char *p = strstr(q->body, "\"name\":\"sandbox-claim-");
    size_t n = 0;
    out[0] = '\0';
    if (!p) return;
    p += 8;
    while (p[n] && p[n] != '"' && n + 1 < cap) n++;
    memcpy(out, p, n);
    out[n] = '\0';
}

/* The claim is named client-side, so a create whose POST went out and
   whose answer was lost may have left a claim behind: the client deletes
   it by that name. A refusal (409: maybe someone else's claim) deletes
   nothing. The answer-less close is the recorder's: a real apiserver
   does not drop answers on demand. */
ASBT_TEST(a_create_whose_answer_was_lost_deletes_its_claim_by_name) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c;
    asb_sandbox *sb = NULL;
    asb_error err;
    recorder_request q;
    char name[64], want[200];
    static const int statuses[] = {0, 500, 503};
    size_t i;
    int n = 0;
    ASBT_CHECK(rec != NULL);
    c = apiserver_client(rec, &err);
    ASBT_CHECK(c != NULL);
    for (i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
        asb_result r;
        if (statuses[i] == 0) recorder_drop(rec, 1);
        else recorder_reply(rec, statuses[i], "{\"kind\":\"Status\",\"code\":500}");
        r = asb_client_create_sandbox(c, "tpl", NULL, &sb, &err);
        ASBT_CHECK(r != ASB_OK);
        ASBT_CHECK(sb == NULL);
        ASBT_EQ_INT(recorder_count(rec), n + 2);
        ASBT_CHECK(recorder_get(rec, n, &q));
        {
            static const char post[] = "POST /apis/extensions.agents.x-k8s.io/v1alpha1/"
                                       "namespaces/default/sandboxclaims ";
            if (strncmp(q.head, post, sizeof post - 1) != 0)
                fprintf(stderr, "    first request:\n%.200s\n", q.head);
            ASBT_CHECK(strncmp(q.head, post, sizeof post - 1) == 0);
        }
        posted_claim_name(&q, name, sizeof name);
        ASBT_EQ_INT(strlen(name), 22);
        ASBT_CHECK(recorder_get(rec, n + 1, &q));
        snprintf(want, sizeof want,
                 "DELETE /apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/default/"
                 "sandboxclaims/%s HTTP/1.1\r\n", name);
        if (strncmp(q.head, want, strlen(want)) != 0)
            fprintf(stderr, "    status %d: second request:\n%.200s\n", statuses[i], q.head);
        ASBT_CHECK(strncmp(q.head, want, strlen(want)) == 0);
        n += 2;
    }
    /* 409 AlreadyExists: the name is taken by a claim that is not ours */
    recorder_reply(rec, 409, "{\"kind\":\"Status\",\"reason\":\"AlreadyExists\",\"code\":409}");
    ASBT_CHECK(asb_client_create_sandbox(c, "tpl", NULL, &sb, &err) != ASB_OK);
    ASBT_EQ_INT(recorder_count(rec), n + 1);
    asb_client_free(c);
    recorder_stop(rec);
}

/* A create waiting for Ready is cancelled from another thread: it returns
   ASB_ERR_CANCELLED at once and deletes the claim it made (that delete is
   not cancelled). The recorder stands in for the apiserver: it takes the
   POST and holds the shared watch's list, as a slow apiserver would. */
ASBT_TEST(a_create_waiting_for_ready_is_cancelled_and_deletes_its_claim) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c;
    asb_sandbox *sb = NULL;
    asb_create_opts o;
    asb_error err;
    canceller k;
    pthread_t th;
    recorder_request q;
    int64_t latency;
    char name[64], want[200];
    asb_result r;
    ASBT_CHECK(rec != NULL);
    c = apiserver_client(rec, &err);
    ASBT_CHECK(c != NULL);
    recorder_reply(rec, 200, "{\"metadata\":{\"resourceVersion\":\"7\",\"uid\":\"u-1\"}}");
    recorder_delay_after(rec, 1, 30000); /* the POST answers; the watch waits */
    memset(&o, 0, sizeof o);
    memset(&k, 0, sizeof k);
    ASBT_EQ_RES(asb_cancel_create(NULL, &k.token, &err), ASB_OK);
    o.cancel = k.token;
    o.ready_timeout_ms = 60000;
    k.after_ms = 500;
    ASBT_CHECK(pthread_create(&th, NULL, cancel_later, &k) == 0);
    r = asb_client_create_sandbox(c, "tpl", &o, &sb, &err);
    latency = now_us() - k.at;
    pthread_join(th, NULL);
    ASBT_EQ_RES(r, ASB_ERR_CANCELLED);
    ASBT_CHECK(sb == NULL);
    ASBT_CONTAINS(err.message, "cancelled while waiting for Ready");
    fprintf(stderr, "    create cancelled %lld us after the trigger\n", (long long)latency);
    ASBT_CHECK(latency < 30000000); /* before the recorder's 30 s: an order, not a speed */
    /* POST, the list that starts the client's shared watch of the
       namespace (held by the recorder, cancelled when its last waiter
       left), the DELETE of the claim it named */
    ASBT_EQ_INT(recorder_count(rec), 3);
    ASBT_CHECK(recorder_get(rec, 0, &q));
    posted_claim_name(&q, name, sizeof name);
    ASBT_CHECK(recorder_get(rec, 1, &q));
    ASBT_CHECK(strncmp(q.head, "GET /apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/default/"
                               "sandboxclaims?limit=500 ", 89) == 0);
    ASBT_CHECK(recorder_get(rec, 2, &q));
    snprintf(want, sizeof want,
             "DELETE /apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/default/"
             "sandboxclaims/%s HTTP/1.1\r\n", name);
    if (strncmp(q.head, want, strlen(want)) != 0) fprintf(stderr, "    third:\n%.200s\n", q.head);
    ASBT_CHECK(strncmp(q.head, want, strlen(want)) == 0);
    asb_cancel_free(k.token);
    asb_client_free(c);
    recorder_stop(rec);
}

/* R70: a create whose connector could not start (here the local tunnel's
   kubectl is missing) after its claim was made deletes that claim as
   every other failed create does: the caller's cleanup_cancel stops the
   delete, and the error and the log say whether the claim went. That
   path used to delete without the token, say nothing in the error, and
   log "claim ... deleted" whatever the delete did. The recorder plays the
   apiserver: it takes the POST and holds the shared watch's list. */
ASBT_TEST(a_create_whose_tunnel_cannot_start_says_whether_its_claim_went) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client_desc d;
    asb_client *c = NULL;
    asb_sandbox *sb = NULL;
    asb_create_opts o;
    asb_cancel *stop = NULL;
    asb_error err;
    asbt_log lg;
    recorder_request q;
    int i, n, deletes;
    ASBT_CHECK(rec != NULL);
    recorder_reply(rec, 200, "{\"metadata\":{\"resourceVersion\":\"7\",\"uid\":\"u-1\"}}");
    recorder_delay_after(rec, 1, 30000); /* the POST answers; the watch waits */
    ASBT_CHECK(write_token_kubeconfig(rec->port, NULL, NULL));
    unit_desc(&d);
    asbt_log_open(&lg, &d.log, ASB_LOG_DEBUG);
    d.kubectl_path = "/nonexistent/asb-kubectl"; /* the tunnel's start fails */
    ASBT_EQ_RES(client_from_unit_cfg(&d, &c, &err), ASB_OK);
    ASBT_EQ_RES(asb_cancel_create(NULL, &stop, &err), ASB_OK);
    asb_cancel_trigger(stop); /* the caller stopped waiting for cleanups */
    memset(&o, 0, sizeof o);
    o.cleanup_cancel = stop;
    ASBT_EQ_RES(asb_client_create_sandbox(c, "tpl", &o, &sb, &err), ASB_ERR_KUBECTL_MISSING);
    ASBT_CHECK(sb == NULL);
    ASBT_CONTAINS(err.message, "cannot run \"/nonexistent/asb-kubectl\"");
    ASBT_CONTAINS(err.message, "was stopped: it may be left behind");
    /* without the token the claim is deleted, and the error says so (the
       README's no-kubectl quote) */
    ASBT_EQ_RES(asb_client_create_sandbox(c, "tpl", NULL, &sb, &err), ASB_ERR_KUBECTL_MISSING);
    {
        static const char tail[] = "or use ASB_CONNECT_DIRECT with the router's URL; the claim "
                                   "is deleted";
        size_t l = strlen(err.message);
        if (l < sizeof tail - 1 || strcmp(err.message + l - (sizeof tail - 1), tail) != 0)
            fprintf(stderr, "    got: %s\n", err.message);
        ASBT_CHECK(l >= sizeof tail - 1 && strcmp(err.message + l - (sizeof tail - 1), tail) == 0);
    }
    asb_client_free(c);
    n = recorder_count(rec);
    for (i = 0, deletes = 0; i < n; i++) {
        ASBT_CHECK(recorder_get(rec, i, &q));
        deletes += strncmp(q.head, "DELETE ", 7) == 0;
    }
    ASBT_EQ_INT(deletes, 1); /* the second create's: the first was stopped before it went out */
    ASBT_CONTAINS(lg.text.ptr, "may be left behind");
    ASBT_EQ_INT(asbt_log_count(&lg, "; the claim is deleted"), 1);
    ASBT_EQ_INT(asbt_log_count(&lg, " deleted:"), 0);
    asbt_log_close(&lg);
    asb_cancel_free(stop);
    recorder_stop(rec);
}

/* close_connection ends a handle's use of the connection, not its claim:
   delete_all deletes the claims of closed handles too. */
ASBT_TEST(delete_all_deletes_the_claims_of_closed_handles_too) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c;
    asb_sandbox *a, *b;
    asb_error err;
    int i, base, deletes = 0, saw_a = 0, saw_b = 0;
    ASBT_CHECK(rec != NULL);
    c = apiserver_client(rec, &err);
    ASBT_CHECK(c != NULL);
    a = asb__new_handle(c, "sandbox-claim-0000000a", "sb-a", "default", NULL);
    b = asb__new_handle(c, "sandbox-claim-0000000b", "sb-b", "default", NULL);
    ASBT_CHECK(a != NULL && b != NULL);
    a->next = b;
    b->next = c->handles;
    c->handles = a;
    asb_sandbox_close_connection(b);
    ASBT_EQ_INT(asb_client_list_active(c, NULL, 0), 1);
    base = recorder_count(rec); /* the handles' Sandbox reads */
    ASBT_EQ_RES(asb_client_delete_all(c, &err), ASB_OK);
    for (i = base; i < recorder_count(rec); i++) {
        recorder_request q;
        ASBT_CHECK(recorder_get(rec, i, &q));
        if (strncmp(q.head, "DELETE ", 7) != 0) continue;
        deletes++;
        saw_a |= strstr(q.head, "/sandboxclaims/sandbox-claim-0000000a ") != NULL;
        saw_b |= strstr(q.head, "/sandboxclaims/sandbox-claim-0000000b ") != NULL;
    }
    ASBT_EQ_INT(deletes, 2);
    ASBT_CHECK(saw_a && saw_b);
    ASBT_EQ_INT(asb_sandbox_is_active(a), 0);
    asb_client_free(c);
    recorder_stop(rec);
}

/* sandbox_tls belongs to the calls to sandboxes and is read when the
   client is made: a CA file that cannot be read, or a key without its
   certificate, fails asb_client_create (the kubeconfig's TLS is not
   involved: its server is plain http here). Built without TLS, there is
   nothing to read. gateway_https moves the Gateway's default port to 443. */
ASBT_TEST(sandbox_tls_is_read_by_client_create_and_gateway_https_defaults_to_443) {
    asb_client_desc d;
    asb_client *c = NULL;
    asb_error err;
    ASBT_CHECK(write_unit_kubeconfig());
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = unit_cfg;
    d.mode = ASB_CONNECT_DIRECT;
    d.direct_url = "https://127.0.0.1:1";
    d.sandbox_tls.ca_file = "/nonexistent/router-ca.crt";
#if ASB_TLS
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_TLS_CONFIG);
    ASBT_CHECK(c == NULL);
    ASBT_CONTAINS(err.message, "sandbox_tls: tls: cannot read the CA certificates");
    /* the message names the file that could not be read */
    ASBT_CONTAINS(err.message, "/nonexistent/router-ca.crt");
    d.sandbox_tls.ca_file = NULL;
    d.sandbox_tls.client_key_file = "/nonexistent/client.key";
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_TLS_CONFIG);
    ASBT_CONTAINS(err.message, "client certificate");
    d.sandbox_tls.client_key_file = NULL;
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_OK);
    asb_client_free(c);
#else
    /* an https router in a TLS-less build: refused up front */
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_TLS_UNAVAILABLE);
#endif
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = unit_cfg;
    d.mode = ASB_CONNECT_GATEWAY;
    d.gateway_name = "gw";
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_OK);
    ASBT_EQ_INT(c->gw_port, 80);
    ASBT_EQ_INT(c->gw_https, 0);
    asb_client_free(c);
    d.gateway_https = 1;
#if ASB_TLS
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_OK);
    ASBT_EQ_INT(c->gw_port, 443);
    asb_client_free(c);
    d.gateway_port = 8443;
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_OK);
    ASBT_EQ_INT(c->gw_port, 8443);
    asb_client_free(c);
#else
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_TLS_UNAVAILABLE);
#endif
    unlink(unit_cfg);
}

/* A whole manifest as a doc whatever ASB_JSON_MAX_DOC_TOKENS is (the
   tiny build's 64 is smaller than a claim): tokens of our own. */
static asb_json_tok manifest_toks[1024];
static asb_result parse_manifest(asb_json_doc *d, const asb_buf *b) {
    asb_json_parser p;
    int n;
    asb_json_init(&p);
    n = asb_json_parse(&p, b->ptr, b->len, manifest_toks, 1024);
    if (n < 0) return ASB_ERR_JSON_INVALID;
    memset(d, 0, sizeof *d);
    d->js = b->ptr;
    d->len = b->len;
    d->toks = manifest_toks;
    d->count = n;
    return ASB_OK;
}

/* The claim the client POSTs for the v1beta1 options, checked as JSON. */
ASBT_TEST(v1beta1_options_become_the_claim_spec_and_are_checked_first) {
    asb_client c;
    asb_create_opts o;
    asb_buf b;
    asb_error err;
    asb_json_doc d;
    asb_env_var env[2];
    asb_label pl[1], pa[1];
    const char *vct[1];
    char v[128];
    memset(&c, 0, sizeof c);
    c.api_version = (char *)"v1beta1";
    memset(&o, 0, sizeof o);
    o.warm_pool = "pool";
    env[0].name = "MODE";
    env[0].value = "fast \"quoted\"";
    env[0].container_name = NULL;
    env[1].name = "EMPTY";
    env[1].value = NULL;
    env[1].container_name = "side";
    o.env = env;
    o.env_count = 2;
    pl[0].key = "team.example.com/owner";
    pl[0].value = "c-sdk";
    o.pod_labels = pl;
    o.pod_label_count = 1;
    pa[0].key = "note";
    pa[0].value = "any text: even spaces";
    o.pod_annotations = pa;
    o.pod_annotation_count = 1;
    vct[0] = "{\"metadata\":{\"name\":\"data\"},\"spec\":{\"accessModes\":[\"ReadWriteOnce\"],"
             "\"resources\":{\"requests\":{\"storage\":\"1Gi\"}}}}";
    o.volume_claim_templates = vct;
    o.volume_claim_template_count = 1;
    ASBT_EQ_RES(asb__create_opts_check(&o, &err), ASB_OK);
    asb_buf_init(&b, NULL);
    ASBT_EQ_RES(asb__claim_manifest(&c, "named.claim", NULL, &o, "default", &b, NULL, &err), ASB_OK);
    ASBT_EQ_RES(parse_manifest(&d, &b), ASB_OK);
    ASBT_CHECK(asb_json_string_eq(&d, asb_json_find(&d, 0, "metadata.name"), "named.claim", 11));
    ASBT_CHECK(asb_json_string_eq(&d, asb_json_find(&d, 0, "spec.warmPoolRef.name"), "pool", 4));
    ASBT_EQ_RES(asb_json_get_string(&d, asb_json_find(&d, 0, "spec.env.0.value"), v, sizeof v, NULL),
                ASB_OK);
    ASBT_EQ_STR(v, "fast \"quoted\"");
    ASBT_CHECK(asb_json_find(&d, 0, "spec.env.0.containerName") < 0);
    ASBT_CHECK(asb_json_string_eq(&d, asb_json_find(&d, 0, "spec.env.1.value"), "", 0));
    ASBT_CHECK(asb_json_string_eq(&d, asb_json_find(&d, 0, "spec.env.1.containerName"), "side", 4));
    ASBT_CHECK(asb_json_string_eq(
        &d, asb_json_find(&d, 0, "spec.additionalPodMetadata.labels.team\\.example\\.com/owner"),
        "c-sdk", 5));
    ASBT_CHECK(asb_json_string_eq(&d, asb_json_find(&d, 0, "spec.additionalPodMetadata.annotations.note"),
                                  "any text: even spaces", 21));
    ASBT_CHECK(asb_json_string_eq(&d, asb_json_find(&d, 0, "spec.volumeClaimTemplates.0.spec.resources.requests.storage"),
                                  "1Gi", 3));
    /* empty sections are left out, as the reference does */
    memset(&o, 0, sizeof o);
    o.warm_pool = "pool";
    b.len = 0;
    ASBT_EQ_RES(asb__claim_manifest(&c, "x", NULL, &o, "default", &b, NULL, &err), ASB_OK);
    ASBT_EQ_RES(parse_manifest(&d, &b), ASB_OK);
    ASBT_CHECK(asb_json_find(&d, 0, "spec.env") < 0);
    ASBT_CHECK(asb_json_find(&d, 0, "spec.additionalPodMetadata") < 0);
    ASBT_CHECK(asb_json_find(&d, 0, "spec.volumeClaimTemplates") < 0);
    asb_buf_free(&b);
    /* bad options fail with the rule, before any API call */
    env[0].name = "9LIVES";
    o.env = env;
    o.env_count = 1;
    ASBT_EQ_RES(asb__create_opts_check(&o, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "9LIVES");
    memset(&o, 0, sizeof o);
    pl[0].key = "bad key";
    o.pod_labels = pl;
    o.pod_label_count = 1;
    ASBT_EQ_RES(asb__create_opts_check(&o, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "pod_labels");
    memset(&o, 0, sizeof o);
    vct[0] = "[1]";
    o.volume_claim_templates = vct;
    o.volume_claim_template_count = 1;
    ASBT_EQ_RES(asb__create_opts_check(&o, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "JSON object");
    vct[0] = "{\"metadata\":";
    ASBT_EQ_RES(asb__create_opts_check(&o, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "not JSON");
    memset(&o, 0, sizeof o);
    o.adopt_existing = 1;
    ASBT_EQ_RES(asb__create_opts_check(&o, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "adopt_existing needs a claim_name");
    o.claim_name = "Not_A_Name";
    ASBT_EQ_RES(asb__create_opts_check(&o, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "DNS-1123 subdomain");
}

static int feed_claim(asb__claim_wait *w, asb_watch_type type, const char *json) {
    asb_json_doc d;
    asb_watch_event ev;
    int r;
    if (asb_json_doc_parse(&d, json, strlen(json), NULL, NULL) != ASB_OK) return -99;
    memset(&ev, 0, sizeof ev);
    ev.type = type;
    ev.doc = &d;
    ev.object = 0;
    r = asb__claim_event(w, &ev);
    asb_json_doc_free(&d);
    return r;
}

/* The wait is pinned to the claim's UID; the terminal reasons end it. */
ASBT_TEST(the_claim_wait_is_pinned_to_its_uid_and_stops_at_terminal_reasons) {
    asb__claim_wait w;
    static const char *terminal[] = {"InvalidMetadata", "EnvVarsInjectionRejected",
                                     "VolumeClaimTemplatesError", "ClaimExpired", "SandboxExpired",
                                     "InvalidConfiguration", "PodFailed", "PodSucceeded"};
    static const char *transient[] = {"SandboxNotReady", "AdoptionPending", "ReconcilerError",
                                      "SandboxMissing", "SandboxCreatePending"};
    char js[512];
    size_t i;
    memset(&w, 0, sizeof w);
    snprintf(w.uid, sizeof w.uid, "uid-ours");
    /* another claim's end is not ours */
    ASBT_EQ_INT(feed_claim(&w, ASB_WATCH_DELETED, "{\"metadata\":{\"uid\":\"uid-other\"}}"), 0);
    /* a Ready claim of the same name but another UID is never taken */
    ASBT_EQ_INT(feed_claim(&w, ASB_WATCH_ADDED,
                           "{\"metadata\":{\"uid\":\"uid-other\"},\"status\":{\"sandbox\":{\"name\":"
                           "\"sb\"},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}"),
                1);
    ASBT_EQ_RES(w.outcome, ASB_ERR_NOT_FOUND);
    ASBT_CONTAINS(w.message, "replaced");
    ASBT_CHECK(w.sandbox[0] == '\0');
    /* ours going away: deleted, or being deleted */
    memset(&w, 0, sizeof w);
    snprintf(w.uid, sizeof w.uid, "uid-ours");
    ASBT_EQ_INT(feed_claim(&w, ASB_WATCH_DELETED, "{\"metadata\":{\"uid\":\"uid-ours\"}}"), 1);
    ASBT_EQ_RES(w.outcome, ASB_ERR_METADATA);
    memset(&w, 0, sizeof w);
    snprintf(w.uid, sizeof w.uid, "uid-ours");
    ASBT_EQ_INT(feed_claim(&w, ASB_WATCH_MODIFIED,
                           "{\"metadata\":{\"uid\":\"uid-ours\",\"deletionTimestamp\":"
                           "\"2026-01-01T00:00:00Z\"}}"),
                1);
    ASBT_EQ_RES(w.outcome, ASB_ERR_METADATA);
    ASBT_CONTAINS(w.message, "being deleted");
    /* ours, Ready */
    memset(&w, 0, sizeof w);
    snprintf(w.uid, sizeof w.uid, "uid-ours");
    ASBT_EQ_INT(feed_claim(&w, ASB_WATCH_MODIFIED,
                           "{\"metadata\":{\"uid\":\"uid-ours\"},\"status\":{\"sandbox\":{\"name\":"
                           "\"sb\"},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}"),
                1);
    ASBT_EQ_RES(w.outcome, ASB_OK);
    ASBT_EQ_STR(w.sandbox, "sb");
    for (i = 0; i < sizeof terminal / sizeof terminal[0]; i++) {
        memset(&w, 0, sizeof w);
        snprintf(js, sizeof js,
                 "{\"metadata\":{\"uid\":\"u\"},\"status\":{\"conditions\":[{\"type\":\"Ready\","
                 "\"status\":\"False\",\"reason\":\"%s\",\"message\":\"said the controller\"}]}}",
                 terminal[i]);
        ASBT_EQ_INT(feed_claim(&w, ASB_WATCH_MODIFIED, js), 1);
        ASBT_EQ_RES(w.outcome, ASB_ERR_CLAIM_FAILED);
        ASBT_EQ_STR(w.reason, terminal[i]);
        ASBT_EQ_STR(w.message, "said the controller");
    }
    for (i = 0; i < sizeof transient / sizeof transient[0]; i++) {
        memset(&w, 0, sizeof w);
        snprintf(js, sizeof js,
                 "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\","
                 "\"reason\":\"%s\"}]}}",
                 transient[i]);
        ASBT_EQ_INT(feed_claim(&w, ASB_WATCH_MODIFIED, js), 0);
    }
}

static void put_file(const char *dir, const char *name, const char *text) {
    char path[512];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "w");
    ASBT_CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* In a pod with no kubeconfig, the service account is used without being
   asked; any kubeconfig (a path, KUBECONFIG, ~/.kube/config) wins. */
ASBT_TEST(a_pod_without_a_kubeconfig_uses_its_service_account_unasked) {
    char sa[] = "/tmp/asb-sa-XXXXXX", home[] = "/tmp/asb-home-XXXXXX", path[600];
    asb_kube_client_desc d;
    const char *old_home = getenv("HOME"), *old_kc = getenv("KUBECONFIG");
    char saved_home[512] = "", saved_kc[1024] = "";
    FILE *ca_in;
    char ca[8192];
    size_t ca_len;
    if (old_home) snprintf(saved_home, sizeof saved_home, "%s", old_home);
    if (old_kc) snprintf(saved_kc, sizeof saved_kc, "%s", old_kc);
    ASBT_CHECK(mkdtemp(sa) != NULL && mkdtemp(home) != NULL);
    ca_in = fopen("tests/kubeconfig/files/sa-ca.crt", "r"); /* a real certificate, key discarded */
    ASBT_CHECK(ca_in != NULL);
    if (!ca_in) return;
    ca_len = fread(ca, 1, sizeof ca - 1, ca_in);
    fclose(ca_in);
    ca[ca_len] = '\0';
    put_file(sa, "token", "sa-token\n");
    put_file(sa, "ca.crt", ca);
    put_file(sa, "namespace", "team-ns\n");
    memset(&d, 0, sizeof d);
    d.service_account_dir = sa;
    setenv("HOME", home, 1);
    unsetenv("KUBECONFIG");
    setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
    ASBT_CHECK(asb__in_cluster_auto(&d));
#if ASB_TLS
    {
        asb_kube_client *kc = NULL;
        asb_error err;
        ASBT_EQ_RES(asb_kube_client_create(&d, &kc, &err), ASB_OK);
        if (kc) {
            ASBT_EQ_STR(asb_kube_client_config(kc)->server, "https://127.0.0.1:6443");
            ASBT_EQ_STR(asb_kube_client_config(kc)->default_namespace, "team-ns");
            ASBT_EQ_STR(asb_kube_client_config(kc)->context, "in-cluster");
        }
        asb_kube_client_free(kc);
    }
#endif
    /* KUBECONFIG, an explicit file, or ~/.kube/config: the kubeconfig */
    setenv("KUBECONFIG", "/nonexistent/config", 1);
    ASBT_CHECK(!asb__in_cluster_auto(&d));
    setenv("KUBECONFIG", "", 1);
    ASBT_CHECK(asb__in_cluster_auto(&d));
    d.kubeconfig.path = "/some/file";
    ASBT_CHECK(!asb__in_cluster_auto(&d));
    d.kubeconfig.path = NULL;
    snprintf(path, sizeof path, "%s/.kube", home);
    mkdir(path, 0700);
    put_file(path, "config", "apiVersion: v1\n");
    ASBT_CHECK(!asb__in_cluster_auto(&d));
    snprintf(path, sizeof path, "%s/.kube/config", home);
    unlink(path);
    snprintf(path, sizeof path, "%s/.kube", home);
    rmdir(path);
    /* not in a pod: no variables, or no token */
    unsetenv("KUBERNETES_SERVICE_HOST");
    ASBT_CHECK(!asb__in_cluster_auto(&d));
    setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
    snprintf(path, sizeof path, "%s/token", sa);
    unlink(path);
    ASBT_CHECK(!asb__in_cluster_auto(&d));
    snprintf(path, sizeof path, "%s/ca.crt", sa);
    unlink(path);
    snprintf(path, sizeof path, "%s/namespace", sa);
    unlink(path);
    rmdir(sa);
    rmdir(home);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    if (saved_home[0]) setenv("HOME", saved_home, 1);
    if (saved_kc[0]) setenv("KUBECONFIG", saved_kc, 1);
    else unsetenv("KUBECONFIG");
}

/* Beside the first 512 bytes of the body, err keeps the answer's
   Retry-After, X-Request-ID and Content-Type: from the router, and from
   the API server. With no X-Request-ID in the answer, a sandbox call's
   err holds the one the request carried. */
ASBT_TEST(errors_keep_retry_after_request_id_and_content_type) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c;
    asb_sandbox *sb;
    asb_error err;
    asb_run_result rr;
    recorder_request q;
    asb_kube_resource res = {"agents.x-k8s.io", "v1alpha1", "sandboxes"};
    char sent[128];
    ASBT_CHECK(rec != NULL);
    recorder_reply(rec, 500, "{\"detail\":\"busy\"}");
    recorder_headers(rec, "Retry-After: 7\r\nX-Request-ID: rid-from-server\r\n");
    sb = router_handle(rec, NULL, NULL, &c, &err);
    ASBT_CHECK(c != NULL);
    ASBT_CHECK(sb != NULL);
    ASBT_EQ_RES(asb_sandbox_run(sb, "true", 0, &rr, &err), ASB_ERR_HTTP_STATUS);
    asb_run_result_free(&rr);
    ASBT_EQ_INT(err.http_status, 500);
    ASBT_EQ_STR(err.retry_after, "7");
    ASBT_EQ_STR(err.request_id, "rid-from-server");
    ASBT_EQ_STR(err.content_type, "application/json");
    recorder_headers(rec, "");
    ASBT_EQ_RES(asb_sandbox_run(sb, "true", 0, &rr, &err), ASB_ERR_HTTP_STATUS);
    asb_run_result_free(&rr);
    ASBT_EQ_STR(err.retry_after, "");
    ASBT_CHECK(recorder_get(rec, recorder_count(rec) - 1, &q));
    ASBT_CHECK(recorder_header(q.head, "X-Request-ID", sent, sizeof sent));
    ASBT_EQ_STR(err.request_id, sent);
    asb_client_free(c);
    /* the API server's answer */
    c = apiserver_client(rec, &err);
    ASBT_CHECK(c != NULL);
    recorder_reply(rec, 403, "{\"kind\":\"Status\",\"reason\":\"Forbidden\",\"message\":\"no\",\"code\":403}");
    recorder_headers(rec, "Retry-After: Wed, 21 Oct 2026 07:28:00 GMT\r\nX-Request-ID: kube-1\r\n");
    ASBT_EQ_RES(asb_kube_get(c->kube, &res, "default", "x", NULL, &err), ASB_ERR_KUBE_API);
    ASBT_EQ_INT(err.http_status, 403);
    ASBT_EQ_STR(err.reason, "Forbidden");
    ASBT_EQ_STR(err.retry_after, "Wed, 21 Oct 2026 07:28:00 GMT");
    ASBT_EQ_STR(err.content_type, "application/json");
    ASBT_EQ_STR(err.request_id, "kube-1");
    asb_client_free(c);
    recorder_stop(rec);
}

/* A name the caller chose may be a claim that was there before: when the
   create's answer is lost, nothing is deleted blind (a generated name is
   ours and is deleted: the case above). A 409 says how to attach. */
ASBT_TEST(a_named_claim_whose_answer_was_lost_is_never_deleted_blind) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c;
    asb_sandbox *sb = NULL;
    asb_error err;
    asb_create_opts o;
    recorder_request q;
    ASBT_CHECK(rec != NULL);
    c = apiserver_client(rec, &err);
    ASBT_CHECK(c != NULL);
    memset(&o, 0, sizeof o);
    o.claim_name = "team-my-claim"; /* v1alpha1 (the recorder): a DNS label */
    recorder_drop(rec, 1);
    ASBT_CHECK(asb_client_create_sandbox(c, "tpl", &o, &sb, &err) != ASB_OK);
    ASBT_CHECK(sb == NULL);
    ASBT_EQ_INT(recorder_count(rec), 1);
    ASBT_CHECK(recorder_get(rec, 0, &q));
    ASBT_CHECK(strstr(q.body, "\"name\":\"team-my-claim\"") != NULL);
    ASBT_CONTAINS(err.message, "team-my-claim may exist now; it was left as it is");
    recorder_reply(rec, 409, "{\"kind\":\"Status\",\"reason\":\"AlreadyExists\",\"code\":409}");
    ASBT_EQ_RES(asb_client_create_sandbox(c, "tpl", &o, &sb, &err), ASB_ERR_KUBE_API);
    ASBT_EQ_INT(err.http_status, 409);
    ASBT_CONTAINS(err.message, "set adopt_existing");
    ASBT_EQ_INT(recorder_count(rec), 2); /* no DELETE, no GET */
    /* passing no err at all must not turn a 409 into anything else */
    ASBT_EQ_RES(asb_client_create_sandbox(c, "tpl", &o, &sb, NULL), ASB_ERR_KUBE_API);
    /* v1alpha1 names the sandbox after the claim: a dotted name is
       refused before anything is sent */
    o.claim_name = "team.my-claim";
    ASBT_EQ_RES(asb_client_create_sandbox(c, "tpl", &o, &sb, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "must be a DNS-1123 label");
    ASBT_EQ_INT(recorder_count(rec), 3);
    asb_client_free(c);
    recorder_stop(rec);
}

/* A handle's delete carries its claim's UID as a precondition; the
   apiserver's 409 for another UID means ours is gone already. */
ASBT_TEST(terminate_is_pinned_to_the_claims_uid) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c;
    asb_sandbox *sb;
    asb_error err;
    recorder_request q;
    int base;
    ASBT_CHECK(rec != NULL);
    c = apiserver_client(rec, &err);
    ASBT_CHECK(c != NULL);
    sb = asb__new_handle(c, "named.claim", "sb-x", "default", NULL);
    ASBT_CHECK(sb != NULL);
    snprintf(sb->uid, sizeof sb->uid, "0b7e0c2e-uid");
    sb->next = c->handles;
    c->handles = sb;
    base = recorder_count(rec);
    recorder_reply(rec, 409,
                   "{\"kind\":\"Status\",\"reason\":\"Conflict\",\"message\":\"Precondition failed: "
                   "UID in precondition: 0b7e0c2e-uid, UID in object meta: other\",\"code\":409}");
    ASBT_EQ_RES(asb_sandbox_terminate(sb, &err), ASB_OK);
    ASBT_EQ_INT(asb_sandbox_is_active(sb), 0);
    ASBT_EQ_INT(recorder_count(rec), base + 1);
    ASBT_CHECK(recorder_get(rec, base, &q));
    ASBT_CHECK(strncmp(q.head, "DELETE /apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/default/"
                               "sandboxclaims/named.claim ", 85) == 0);
    ASBT_CHECK(strstr(q.body, "\"preconditions\":{\"uid\":\"0b7e0c2e-uid\"}") != NULL);
    asb_client_free(c);
    recorder_stop(rec);
}

/* A sibling of review finding R2: kubectl for the tunnel is found as the
   exec plugin is, in PATH's absolute entries only. execvp took an empty
   PATH entry (a leading or trailing ':', or '::') as the working
   directory, so a `kubectl` planted there ran with the router's service
   name and the user's kubeconfig. */
ASBT_TEST(kubectl_is_never_run_from_the_working_directory) {
    static const char *const paths[] = {":/usr/bin:/bin", "/usr/bin:/bin:", "/usr/bin::/bin",
                                        ".:/usr/bin:/bin"};
    char cwd[1024], work[256], planted[300], marker[300], base[300];
    char *saved = getenv("PATH") ? strdup(getenv("PATH")) : NULL;
    asb_client_desc d;
    asb_client *c = NULL;
    asb_error err;
    asb_result r;
    FILE *f;
    size_t i;
    ASBT_CHECK(getcwd(cwd, sizeof cwd) != NULL);
    snprintf(work, sizeof work, "/tmp/asb-test-sdk-kubectl-XXXXXX");
    ASBT_CHECK(mkdtemp(work) != NULL);
    snprintf(planted, sizeof planted, "%s/asb-kubectl-planted", work);
    snprintf(marker, sizeof marker, "%s/planted-ran", work);
    f = fopen(planted, "w");
    ASBT_CHECK(f != NULL);
    fprintf(f, "#!/bin/sh\ntouch %s\n", marker);
    fclose(f);
    chmod(planted, 0755);
    ASBT_CHECK(write_unit_kubeconfig());
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = unit_cfg;
    d.kubectl_path = "asb-kubectl-planted";
    d.port_forward_ready_timeout_ms = 3000;
    ASBT_EQ_RES(client_from_unit_cfg(&d, &c, &err), ASB_OK);
    ASBT_CHECK(chdir(work) == 0);
    for (i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        setenv("PATH", paths[i], 1);
        r = router_base(c, base, sizeof base, &err);
        if (r != ASB_ERR_KUBECTL_MISSING || access(marker, F_OK) == 0) break;
    }
    if (saved) setenv("PATH", saved, 1);
    free(saved);
    if (chdir(cwd) != 0) r = ASB_ERR_IO;
    asb_client_free(c);
    ASBT_EQ_RES(r, ASB_ERR_KUBECTL_MISSING);
    ASBT_CONTAINS(err.message, "No such file or directory (looked up in PATH only)");
    ASBT_CHECK(access(marker, F_OK) != 0);
    unlink(marker);
    unlink(planted);
    rmdir(work);
}

/* Review finding R11: the claim API version is discovered once and
   cached; two threads that need it at the same moment used to read it
   unlocked while the other wrote it under the lock. The recorder plays
   the API server (discovery, then the DELETEs). The threads race for
   real in every build; the ThreadSanitizer build (make test-tsan) is the
   one that sees the unlocked read. */
typedef struct discovery_thread {
    pthread_t thread;
    asb_client *c;
    const char *claim;
    asb_result r;
} discovery_thread;

static void *delete_claim_main(void *arg) {
    discovery_thread *t = (discovery_thread *)arg;
    asb_error err;
    t->r = asb_client_delete_sandbox(t->c, t->claim, "default", &err);
    return NULL;
}

ASBT_TEST(the_claim_api_version_is_discovered_safely_from_many_threads) {
    static const char *const claims[] = {"sandbox-claim-a", "sandbox-claim-b",
                                         "sandbox-claim-c", "sandbox-claim-d"};
    recorder *rec = recorder_start("127.0.0.1");
    discovery_thread t[4];
    asb_client_desc d;
    asb_client *c = NULL;
    asb_error err;
    int i, deletes = 0, discoveries = 0;
    ASBT_CHECK(rec != NULL);
    recorder_reply(rec, 200,
                   "{\"kind\":\"APIGroup\",\"preferredVersion\":{\"groupVersion\":"
                   "\"extensions.agents.x-k8s.io/v1beta1\",\"version\":\"v1beta1\"}}");
    ASBT_CHECK(write_token_kubeconfig(rec->port, NULL, NULL));
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = unit_cfg;
    d.kube.http.retry.max_attempts = 1;
    d.mode = ASB_CONNECT_DIRECT;
    d.direct_url = "http://127.0.0.1:1"; /* no sandbox call is made */
    ASBT_EQ_RES(client_from_unit_cfg(&d, &c, &err), ASB_OK);
    for (i = 0; i < 4; i++) {
        t[i].c = c;
        t[i].claim = claims[i];
        ASBT_CHECK(pthread_create(&t[i].thread, NULL, delete_claim_main, &t[i]) == 0);
    }
    for (i = 0; i < 4; i++) pthread_join(t[i].thread, NULL);
    for (i = 0; i < 4; i++) ASBT_EQ_RES(t[i].r, ASB_OK);
    ASBT_EQ_STR(c->api_version, "v1beta1");
    for (i = 0; i < recorder_count(rec) && i < RECORDER_MAX; i++) {
        recorder_request q;
        if (!recorder_get(rec, i, &q)) continue;
        if (strncmp(q.head, "GET /apis/extensions.agents.x-k8s.io ", 37) == 0) discoveries++;
        if (strncmp(q.head,
                    "DELETE /apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default/"
                    "sandboxclaims/sandbox-claim-", 95) == 0)
            deletes++;
    }
    ASBT_EQ_INT(deletes, 4);
    ASBT_CHECK(discoveries >= 1 && discoveries <= 4);
    asb_client_free(c);
    recorder_stop(rec);
}

/* Found by make test under load (issue 20): threads that each terminate
   or close their own handle wrote its active/closed flags without the
   client's lock, while another thread walked the client's handles under
   it (asb__find_handle in a create, list_active, delete_all): a data race
   ThreadSanitizer reported in test-kube-cluster's threaded case. Here
   four threads end their handles (two close theirs first) while a fifth
   lists the active ones until none is left; the recorder answers the
   DELETEs. make test-tsan runs it under ThreadSanitizer. */
typedef struct ending_thread {
    pthread_t thread;
    asb_sandbox *sb;
    int close_first;
    asb_result r;
} ending_thread;

static void *end_handle_main(void *arg) {
    ending_thread *t = (ending_thread *)arg;
    asb_error err;
    if (t->close_first) asb_sandbox_close_connection(t->sb);
    t->r = asb_sandbox_terminate(t->sb, &err);
    return NULL;
}

typedef struct lister_thread {
    pthread_t thread;
    asb_client *c;
    size_t last;
    long rounds;
} lister_thread;

static void *list_handles_main(void *arg) {
    lister_thread *t = (lister_thread *)arg;
    int64_t deadline = asb__now_ms() + 60000; /* a hang bound, never reached when it passes */
    do {
        t->last = asb_client_list_active(t->c, NULL, 0);
        t->rounds++;
    } while (t->last > 0 && asb__now_ms() < deadline);
    return NULL;
}

ASBT_TEST(handles_end_under_the_client_lock_from_many_threads) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c;
    asb_error err;
    ending_thread t[4];
    lister_thread l;
    int i, base, deletes = 0;
    ASBT_CHECK(rec != NULL);
    c = apiserver_client(rec, &err);
    ASBT_CHECK(c != NULL);
    recorder_reply(rec, 200, "{\"kind\":\"Status\",\"status\":\"Success\"}");
    for (i = 0; i < 4; i++) {
        char claim[32], name[32];
        snprintf(claim, sizeof claim, "sandbox-claim-%d", i);
        snprintf(name, sizeof name, "sb-%d", i);
        t[i].sb = asb__new_handle(c, claim, name, "default", NULL);
        ASBT_CHECK(t[i].sb != NULL);
        t[i].sb->next = c->handles;
        c->handles = t[i].sb;
        t[i].close_first = i % 2;
    }
    ASBT_EQ_INT(asb_client_list_active(c, NULL, 0), 4);
    base = recorder_count(rec);
    memset(&l, 0, sizeof l);
    l.c = c;
    l.last = 4;
    ASBT_CHECK(pthread_create(&l.thread, NULL, list_handles_main, &l) == 0);
    for (i = 0; i < 4; i++)
        ASBT_CHECK(pthread_create(&t[i].thread, NULL, end_handle_main, &t[i]) == 0);
    for (i = 0; i < 4; i++) pthread_join(t[i].thread, NULL);
    pthread_join(l.thread, NULL);
    for (i = 0; i < 4; i++) ASBT_EQ_RES(t[i].r, ASB_OK);
    ASBT_EQ_INT(l.last, 0); /* the lister saw every handle end */
    ASBT_CHECK(l.rounds > 0);
    for (i = 0; i < 4; i++) ASBT_EQ_INT(asb_sandbox_is_active(t[i].sb), 0);
    for (i = base; i < recorder_count(rec) && i < RECORDER_MAX; i++) {
        recorder_request q;
        if (recorder_get(rec, i, &q) &&
            strncmp(q.head, "DELETE /apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/default/"
                            "sandboxclaims/sandbox-claim-", 95) == 0)
            deletes++;
    }
    ASBT_EQ_INT(deletes, 4); /* closed or not, each claim was deleted once */
    asb_client_free(c);
    recorder_stop(rec);
}

/* The client calls the agentsandbox tool needed (issue 18): the context's
   namespace for a NULL namespace, a list with details in one namespace or
   all, and a delete that tells "not there" apart. The recorder plays the
   apiserver (its one reply is a claim list, then a 404 Status). */
static asb_client *client_for_recorder(recorder *rec, const char *ctx_ns) {
    asb_client_desc d;
    asb_client *c = NULL;
    asb_error err;
    if (!write_token_kubeconfig(rec->port, NULL, ctx_ns)) return NULL;
    unit_desc(&d);
    d.mode = ASB_CONNECT_DIRECT;
    d.direct_url = "http://127.0.0.1:1"; /* no sandbox call is made */
    if (client_from_unit_cfg(&d, &c, &err) != ASB_OK) c = NULL;
    return c;
}

static int recorded_head_starts(recorder *rec, int i, const char *prefix) {
    recorder_request q;
    return recorder_get(rec, i, &q) && strncmp(q.head, prefix, strlen(prefix)) == 0;
}

ASBT_TEST(a_null_namespace_is_the_context_s_and_claims_list_with_details) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c, *plain;
    asb_claim_list l;
    asb_claim_list_opts lo;
    asb_name_list names;
    asb_kube_resource res;
    asb_error err;
    int next = 5; /* the index of the request after the lists */
    ASBT_CHECK(rec != NULL);
    recorder_reply(rec, 200,
                   "{\"kind\":\"SandboxClaimList\",\"metadata\":{},\"items\":["
                   "{\"metadata\":{\"name\":\"one\",\"namespace\":\"team-a\","
                   "\"creationTimestamp\":\"2026-01-02T03:04:05Z\"},"
                   "\"spec\":{\"sandboxTemplateRef\":{\"name\":\"tpl\"}},"
                   "\"status\":{\"sandbox\":{\"Name\":\"one\"},\"conditions\":[{\"type\":"
                   "\"Other\",\"status\":\"True\"},{\"type\":\"Ready\",\"status\":\"True\","
                   "\"reason\":\"DependenciesReady\",\"message\":\"ok\"}]}},"
                   "{\"metadata\":{\"name\":\"two\",\"namespace\":\"team-b\"},"
                   "\"spec\":{\"warmPoolRef\":{\"name\":\"pool\"}},"
                   "\"status\":{\"sandbox\":{\"name\":\"two-sb\"},\"conditions\":[{\"type\":"
                   "\"Ready\",\"status\":\"False\",\"reason\":\"Pending\"}]}},"
                   "{\"metadata\":{\"name\":\"three\",\"namespace\":\"team-a\"}}]}");
    c = client_for_recorder(rec, "team-a");
    plain = client_for_recorder(rec, NULL);
    ASBT_CHECK(c != NULL && plain != NULL);
    ASBT_EQ_STR(asb_client_namespace(c), "team-a");
    ASBT_EQ_STR(asb_client_namespace(plain), "default");
    ASBT_CHECK(asb_client_kube(c) != NULL);
    ASBT_EQ_RES(asb_client_claim_resource(c, &res, &err), ASB_OK);
    ASBT_EQ_STR(res.group, "extensions.agents.x-k8s.io");
    ASBT_EQ_STR(res.version, "v1alpha1");
    ASBT_EQ_STR(res.plural, "sandboxclaims");

#if ASB_JSON_MAX_DOC_TOKENS < 4096
    /* the tiny build's doc holds 64 tokens: this page of three claims
       does not fit, and says so (the list calls below are not run) */
    ASBT_CHECK(asb_client_list_claims(c, NULL, &l, &err) != ASB_OK);
    ASBT_CHECK(err.message[0] != '\0');
    ASBT_CHECK(l.count == 0);
    (void)lo;
    (void)names;
    next = 1;
#else
    ASBT_EQ_RES(asb_client_list_claims(c, NULL, &l, &err), ASB_OK);
    ASBT_CHECK(recorded_head_starts(
        rec, 0, "GET /apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/team-a/sandboxclaims?"));
    ASBT_EQ_INT(l.count, 3);
    ASBT_EQ_STR(l.items[0].name, "one");
    ASBT_EQ_STR(l.items[0].namespace_name, "team-a");
    ASBT_EQ_STR(l.items[0].template_name, "tpl");
    ASBT_EQ_STR(l.items[0].warm_pool, "");
    ASBT_EQ_STR(l.items[0].sandbox_name, "one");
    ASBT_EQ_INT(l.items[0].ready, 1);
    ASBT_EQ_STR(l.items[0].reason, "DependenciesReady");
    ASBT_EQ_STR(l.items[0].message, "ok");
    ASBT_CHECK(l.items[0].created_unix == 1767323045);
    ASBT_EQ_STR(l.items[1].template_name, "");
    ASBT_EQ_STR(l.items[1].warm_pool, "pool");
    ASBT_EQ_STR(l.items[1].sandbox_name, "two-sb");
    ASBT_EQ_INT(l.items[1].ready, 0);
    ASBT_EQ_STR(l.items[1].reason, "Pending");
    ASBT_EQ_STR(l.items[1].message, "");
    ASBT_CHECK(l.items[1].created_unix == 0);
    ASBT_EQ_STR(l.items[2].sandbox_name, "");
    ASBT_EQ_STR(l.items[2].reason, "");
    asb_claim_list_free(&l);
    asb_claim_list_free(&l); /* twice is harmless */

    memset(&lo, 0, sizeof lo);
    lo.all_namespaces = 1;
    lo.label_selector = "team=x";
    ASBT_EQ_RES(asb_client_list_claims(c, &lo, &l, &err), ASB_OK);
    ASBT_CHECK(recorded_head_starts(
        rec, 1, "GET /apis/extensions.agents.x-k8s.io/v1alpha1/sandboxclaims?labelSelector=team%3Dx"));
    ASBT_EQ_INT(l.count, 3);
    asb_claim_list_free(&l);
    lo.all_namespaces = 0;
    lo.namespace_name = "team-c";
    ASBT_EQ_RES(asb_client_list_claims(c, &lo, &l, &err), ASB_OK);
    ASBT_CHECK(recorded_head_starts(
        rec, 2, "GET /apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/team-c/sandboxclaims?"));
    asb_claim_list_free(&l);

    ASBT_EQ_RES(asb_client_list_all(c, NULL, NULL, &names, &err), ASB_OK);
    ASBT_CHECK(recorded_head_starts(
        rec, 3, "GET /apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/team-a/sandboxclaims?"));
    ASBT_EQ_INT(names.count, 3);
    asb_name_list_free(&names);
    ASBT_EQ_RES(asb_client_list_all(plain, NULL, NULL, &names, &err), ASB_OK);
    ASBT_CHECK(recorded_head_starts(
        rec, 4, "GET /apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/default/sandboxclaims?"));
    asb_name_list_free(&names);
#endif

    /* a claim that is not there: ASB_ERR_NOT_FOUND, in the context's
       namespace; one that is: ASB_OK */
    recorder_reply(rec, 404,
                   "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"NotFound\","
                   "\"code\":404,\"message\":\"sandboxclaims \\\"gone\\\" not found\"}");
    ASBT_EQ_RES(asb_client_delete_sandbox(c, "gone", NULL, &err), ASB_ERR_NOT_FOUND);
    ASBT_CHECK(recorded_head_starts(
        rec, next, "DELETE /apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/team-a/sandboxclaims/gone "));
    recorder_reply(rec, 200, "{\"kind\":\"Status\",\"status\":\"Success\"}");
    ASBT_EQ_RES(asb_client_delete_sandbox(c, "there", NULL, &err), ASB_OK);
    asb_client_free(c);
    asb_client_free(plain);
    recorder_stop(rec);
}

/* -- the kubectl tunnel, with a stand-in kubectl -------------------------------
   The real kubectl (test_sdk_cluster.c) never lies; these scripts print
   what a broken, wrapped or hostile kubectl might, so the tunnel's reading
   of kubectl's output is seen to hold. The script's behaviour comes from
   ASB_FAKE_KUBECTL (the supervisor passes the environment on). */

static const char fake_kubectl_script[] =
    "#!/bin/sh\n"
    "printf '%s\\n' \"$@\" > \"$ASB_FAKE_KUBECTL_ARGS\"\n"
    "case \"$ASB_FAKE_KUBECTL\" in\n"
    "lie) echo 'Forwarding from 127.0.0.1:99999 -> 8080' ;;\n"
    "remote) echo 'Forwarding from 127.0.0.1:4242 -> 9999' ;;\n"
    "v6) echo 'Forwarding from [::1]:4242 -> 8080' ;;\n"
    "junk) echo 'Forwarding from 127.0.0.1:4242 -> 8080 and more' ;;\n"
    "long) head -c 5000 /dev/zero | tr '\\000' x ;;\n"
    "silent) echo 'a wrapper says hello'; echo 'Handling connection for 8080' ;;\n"
    "exit) echo 'error: services \"sandbox-router-svc\" not found' >&2; exit 1 ;;\n"
    "token) echo \"error: Unauthorized (sent Bearer $ASB_FAKE_KUBECTL_TOKEN)\" >&2; exit 1 ;;\n"
    "fds) ls /proc/$$/fd > \"$ASB_FAKE_KUBECTL_ARGS.fds\"; echo 'error: listed' >&2; exit 1 ;;\n"
    "foreign) echo \"Forwarding from 127.0.0.1:$ASB_FAKE_KUBECTL_PORT -> 8080\" ;;\n"
    "listen) exec python3 -c '\n"
    "import socket, sys\n"
    "s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(8)\n"
    "print(\"a wrapper says hello\")\n"
    "print(\"Forwarding from 127.0.0.1:%d -> 8080\" % s.getsockname()[1], flush=True)\n"
    "while True:\n"
    "    c, _ = s.accept(); c.close()\n"
    "' ;;\n"
    "esac\n"
    "exec sleep 30\n";

typedef struct fake_kubectl {
    char dir[64], path[128], args[128];
} fake_kubectl;

/* In a directory of its own (mkdtemp): a program at a name from the pid
   could be planted by another user and run. fake_kubectl_remove undoes it. */
static int fake_kubectl_write(fake_kubectl *k) {
    FILE *f;
    snprintf(k->dir, sizeof k->dir, "/tmp/asb-fake-kubectl-XXXXXX");
    if (!mkdtemp(k->dir)) return 0;
    snprintf(k->path, sizeof k->path, "%s/kubectl", k->dir);
    snprintf(k->args, sizeof k->args, "%s/args", k->dir);
    f = fopen(k->path, "w");
    if (!f) return 0;
    fputs(fake_kubectl_script, f);
    if (fclose(f) != 0 || chmod(k->path, 0700) != 0) return 0;
    setenv("ASB_FAKE_KUBECTL_ARGS", k->args, 1);
    return 1;
}

static void fake_kubectl_remove(fake_kubectl *k) {
    unlink(k->args);
    unlink(k->path);
    rmdir(k->dir);
}

/* A tunnel client (the default mode) whose kubectl is the script. */
static asb_client *fake_tunnel_client(const fake_kubectl *k, int ready_ms, asb_error *err) {
    asb_client_desc d;
    asb_client *c = NULL;
    if (!write_unit_kubeconfig()) return NULL;
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = unit_cfg;
    d.kubectl_path = k->path;
    d.port_forward_ready_timeout_ms = ready_ms;
    d.claim_api_version = "v1alpha1";
    if (client_from_unit_cfg(&d, &c, err) != ASB_OK) c = NULL;
    return c;
}

/* The tunnel is where kubectl's own "Forwarding from" line says, and only
   there: kubectl is given no local port (`:8080`), so none is written
   into an argv any local user can read for someone to bind first, and no
   listener counts as the tunnel because it accepts connections. Lines
   that do not add up are clear errors, never a port. */
ASBT_TEST(the_tunnel_port_is_the_one_kubectl_announces_and_odd_output_is_refused) {
    static const struct {
        const char *mode, *want;
    } bad[] = {
        {"lie", "\"Forwarding from 127.0.0.1:99999 -> 8080\" is not \"Forwarding from "
                "127.0.0.1:<port> -> 8080\""},
        {"remote", "\"Forwarding from 127.0.0.1:4242 -> 9999\" is not"},
        {"v6", "\"Forwarding from [::1]:4242 -> 8080\" is not"},
        {"junk", "\"Forwarding from 127.0.0.1:4242 -> 8080 and more\" is not"},
        {"long", "kubectl printed a line longer than 127 bytes on stdout"},
        {"silent", "not ready within 1500 ms (no \"Forwarding from\" line from kubectl)"},
        {"exit", "exited (status 1): error: services \"sandbox-router-svc\" not found"},
    };
    fake_kubectl k;
    asb_client *c;
    asb_error err;
    char base[128], want[64], args[512] = "";
    size_t i;
    int port = 0;
    FILE *f;
    ASBT_CHECK(fake_kubectl_write(&k));
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("ASB_FAKE_KUBECTL", bad[i].mode, 1);
        c = fake_tunnel_client(&k, 1500, &err);
        ASBT_CHECK(c != NULL);
        base[0] = '\0';
        ASBT_EQ_RES(router_base(c, base, sizeof base, &err), ASB_ERR_PORT_FORWARD);
        if (!strstr(err.message, bad[i].want)) fprintf(stderr, "    mode %s\n", bad[i].mode);
        ASBT_CONTAINS(err.message, bad[i].want);
        ASBT_EQ_STR(base, "");
        ASBT_EQ_INT(c->tunnel.pid, 0); /* stopped and reaped */
        asb_client_free(c);
    }
    /* a kubectl that listens: its port, after a line of someone else's */
    setenv("ASB_FAKE_KUBECTL", "listen", 1);
    c = fake_tunnel_client(&k, 30000, &err);
    ASBT_CHECK(c != NULL);
    ASBT_EQ_RES(router_base(c, base, sizeof base, &err), ASB_OK);
    ASBT_CHECK(sscanf(base, "http://127.0.0.1:%d", &port) == 1 && port > 0);
    ASBT_EQ_INT(port, c->tunnel.local[0]);
    ASBT_EQ_RES(router_base(c, base, sizeof base, &err), ASB_OK); /* the same one */
    snprintf(want, sizeof want, "http://127.0.0.1:%d", port);
    ASBT_EQ_STR(base, want);
    f = fopen(k.args, "r");
    ASBT_CHECK(f != NULL);
    if (f) {
        size_t n = fread(args, 1, sizeof args - 1, f);
        args[n] = '\0';
        fclose(f);
    }
    /* argv: no local port anywhere, only the router's */
    ASBT_CONTAINS(args, "port-forward\nsvc/sandbox-router-svc\n:8080\n");
    snprintf(want, sizeof want, "%d", port);
    ASBT_CHECK(strstr(args, want) == NULL);
    asb_client_free(c);
    fake_kubectl_remove(&k);
    unsetenv("ASB_FAKE_KUBECTL");
}

/* A listener on 127.0.0.1 of another local user (nobody: the tests run
   as root), as one who bound a tunnel's port after its kubectl ended.
   Each connection it takes: the bytes it got reported on *rep ("GOT n"),
   then a 200 answer with "pwned". */
static pid_t foreign_listener(int *port, int *rep) {
    int p[2];
    pid_t pid;
    char line[32];
    ssize_t n;
    *port = 0;
    if (pipe(p) != 0) return -1;
    pid = fork();
    if (pid == 0) {
        struct sockaddr_in a;
        socklen_t al = sizeof a;
        int l;
        close(p[0]);
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
        /* after the uid change, which clears it: a test that fails and
           returns must not leave this listener holding its output open */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() == 1) _exit(3);
        l = socket(AF_INET, SOCK_STREAM, 0);
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 8) != 0 ||
            getsockname(l, (struct sockaddr *)&a, &al) != 0)
            _exit(3);
        n = snprintf(line, sizeof line, "PORT %d\n", ntohs(a.sin_port));
        if (write(p[1], line, (size_t)n) != n) _exit(3);
        for (;;) {
            static const char ans[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\npwned";
            char buf[4096];
            struct pollfd pf;
            int cfd = accept(l, NULL, NULL);
            if (cfd < 0) _exit(3);
            pf.fd = cfd;
            pf.events = POLLIN;
            n = poll(&pf, 1, 2000) == 1 ? read(cfd, buf, sizeof buf) : 0;
            if (n > 0 && write(cfd, ans, sizeof ans - 1) < 0) {}
            n = snprintf(line, sizeof line, "GOT %d\n", (int)(n > 0 ? n : 0));
            if (write(p[1], line, (size_t)n) != n) _exit(3);
            close(cfd);
        }
    }
    close(p[1]);
    *rep = p[0];
    if (pid > 0) {
        n = read(p[0], line, sizeof line - 1);
        line[n > 0 ? n : 0] = '\0';
        if (sscanf(line, "PORT %d", port) != 1) *port = 0;
    }
    return pid;
}

/* One "GOT n" line from the foreign listener: n, or -1 within 5 s none. */
static int foreign_got(int rep) {
    char line[32];
    size_t n = 0;
    int got = -1;
    struct pollfd pf;
    pf.fd = rep;
    pf.events = POLLIN;
    while (n < sizeof line - 1 && poll(&pf, 1, 5000) == 1 && read(rep, line + n, 1) == 1)
        if (line[n++] == '\n') break;
    line[n] = '\0';
    return sscanf(line, "GOT %d", &got) == 1 ? got : -1;
}

/* Runs fn in a forked child (which may change its user or namespace; the
   test process keeps its own) and returns the line it wrote to `line`
   (cap bytes, NUL-terminated; empty when it wrote none). */
static void child_says(void (*fn)(void *arg, char *line, size_t cap), void *arg, char *line,
                       size_t cap) {
    int p[2], st;
    ssize_t n;
    pid_t kid;
    line[0] = '\0';
    if (pipe(p) != 0) return;
    kid = fork();
    if (kid == 0) {
        close(p[0]);
        fn(arg, line, cap);
        if (write(p[1], line, strlen(line)) < 0) {}
        _exit(0);
    }
    close(p[1]);
    n = kid > 0 ? read(p[0], line, cap - 1) : 0;
    line[n > 0 ? n : 0] = '\0';
    close(p[0]);
    if (kid > 0) waitpid(kid, &st, 0);
}

/* A checking client and the request to make with it, for a child. */
typedef struct child_call {
    asb_http_client *on;
    const asb_http_request *rq;
} child_call;

/* In a new user namespace with no map: the call's code and message. */
static void call_unmapped(void *arg, char *line, size_t cap) {
    asb_http_client *on = ((child_call *)arg)->on;
    const asb_http_request *rq = ((child_call *)arg)->rq;
    asb_http_response r2;
    asb_error e2;
    asb_result res;
    if (syscall(SYS_unshare, 0x10000000 /* CLONE_NEWUSER */) != 0) {
        snprintf(line, cap, "unshare: %s", strerror(errno));
        return;
    }
    res = asb_http_do(on, rq, &r2, &e2);
    asb_http_response_free(&r2);
    snprintf(line, cap, "%d %s", (int)res, e2.message);
}

/* As the real user nobody: a call to root's listener, then to its own. */
static void call_as_nobody(void *arg, char *line, size_t cap) {
    asb_http_client *on = ((child_call *)arg)->on;
    asb_http_request q2 = *((child_call *)arg)->rq;
    asb_http_response r2;
    asb_error e2;
    char u2[64];
    int port, res, res_root;
    /* root's listener first, then become nobody */
    if (asbt_listen_loopback(4, &port) < 0) return;
    snprintf(u2, sizeof u2, "http://127.0.0.1:%d/", port);
    if (setgid(65534) != 0 || setuid(65534) != 0) return;
    q2.url = u2;
    q2.timeout_ms = 300;
    res_root = asb_http_do(on, &q2, &r2, &e2);
    asb_http_response_free(&r2);
    if (asbt_listen_loopback(4, &port) < 0) return;
    snprintf(u2, sizeof u2, "http://127.0.0.1:%d/", port);
    res = asb_http_do(on, &q2, &r2, &e2);
    asb_http_response_free(&r2);
    snprintf(line, cap, "own %d root %d %s", (int)res, (int)res_root, e2.message);
}

/* asb_http_client_desc.loopback_same_user (and asb_h2_desc's): a loopback
   port held by another user's socket gets the connection closed before a
   byte is sent, through sock_diag and through /proc/net alike (where the
   netlink socket is refused, and where the query is); our own
   listener is used as always. Without the option the same listener gets
   the request and answers it, so the setup can show a leak. */
ASBT_TEST(a_loopback_port_another_user_holds_gets_no_byte_from_a_checking_client) {
    int pass;
    if (geteuid() != 0) fprintf(stderr, "    needs root: the listener runs as user 65534\n");
    ASBT_CHECK(geteuid() == 0);
    for (pass = 0; pass < 3; pass++) {
        asb_http_client_desc hd;
        asb_http_client *on = NULL, *off = NULL;
        asb_http_request rq;
        asb_http_response rs;
        asb_h2_desc d2;
        asb_h2_conn *h2 = NULL;
        asb_error err;
        char url[64];
        int port, rep = -1, own, got, st;
        pid_t pid = foreign_listener(&port, &rep);
        asb__diag_use_proc = pass;
        ASBT_CHECK(pid > 0 && port > 0);
        snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
        memset(&hd, 0, sizeof hd);
        hd.retry.max_attempts = 1;
        hd.loopback_same_user = 1;
        ASBT_EQ_RES(asb_http_client_create(&hd, &on, &err), ASB_OK);
        hd.loopback_same_user = 0;
        ASBT_EQ_RES(asb_http_client_create(&hd, &off, &err), ASB_OK);
        memset(&rq, 0, sizeof rq);
        rq.url = url;
        ASBT_EQ_RES(asb_http_do(on, &rq, &rs, &err), ASB_ERR_CONNECT);
        asb_http_response_free(&rs);
        ASBT_CONTAINS(err.message, "the socket listening there belongs to user 65534, not to "
                                   "this process's user 0; nothing was sent to it");
        ASBT_EQ_INT(foreign_got(rep), 0); /* it accepted, and got nothing */
        memset(&d2, 0, sizeof d2);
        d2.url = url;
        d2.loopback_same_user = 1;
        ASBT_EQ_RES(asb_h2_connect(&d2, &h2, &err), ASB_ERR_CONNECT);
        ASBT_CONTAINS(err.message, "belongs to user 65534");
        ASBT_EQ_INT(foreign_got(rep), 0); /* not even the preface */
        /* the same listener as an IPv4-mapped address: looked up as IPv4
           (it read "nobody listens there") */
        {
            char mapped[80];
            asb_http_request mq = rq;
            snprintf(mapped, sizeof mapped, "http://[::ffff:127.0.0.1]:%d/", port);
            mq.url = mapped;
            ASBT_EQ_RES(asb_http_do(on, &mq, &rs, &err), ASB_ERR_CONNECT);
            asb_http_response_free(&rs);
            ASBT_CONTAINS(err.message, "belongs to user 65534");
            ASBT_EQ_INT(foreign_got(rep), 0);
        }
        /* in a user namespace with no map we are the overflow uid, as is
           every user outside it: refused, the listener got nothing (the
           uid comparison passed it the request) */
        {
            char line[300];
            child_call cc;
            cc.on = on;
            cc.rq = &rq;
            child_says(call_unmapped, &cc, line, sizeof line);
            if (getenv("ASB_UNDER_QEMU") && *getenv("ASB_UNDER_QEMU") && strncmp(line, "unshare:", 8) == 0) {
                /* the kernel makes no user namespace for a threaded process,
                   and qemu-user has threads of its own: the case runs
                   natively in every other build (c, cxx, notls, asan, tiny) */
                fprintf(stderr, "    under qemu-user: %s\n", line);
            } else {
                ASBT_CONTAINS(line, "-101 ");
                ASBT_CONTAINS(line, "runs as the overflow user 65534");
                ASBT_EQ_INT(foreign_got(rep), 0);
            }
        }
        /* the real user nobody (65534 in the host's namespace, which maps
           every uid, so nobody else reads as it): its own listener is
           used as anyone's (sent, then no answer: TIMEOUT), and the
           listener of another user (root's, here) is refused */
        {
            char line[300];
            child_call cc;
            cc.on = on;
            cc.rq = &rq;
            child_says(call_as_nobody, &cc, line, sizeof line);
            if (asb__uid_map_full())
                ASBT_CONTAINS(line, "own -4 root -101 "); /* ASB_ERR_TIMEOUT, ASB_ERR_CONNECT */
            else /* a partial map (a rootless container): outsiders read as 65534 too */
                ASBT_CONTAINS(line, "own -101 root -101 ");
        }
        /* unchecked, it gets the request and its answer is taken */
        ASBT_EQ_RES(asb_http_do(off, &rq, &rs, &err), ASB_OK);
        ASBT_EQ_INT(rs.body.len, 5);
        asb_http_response_free(&rs);
        got = foreign_got(rep);
        ASBT_CHECK(got > 0);
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        close(rep);
        /* our own listener: connected and sent as always (nobody answers) */
        own = socket(AF_INET, SOCK_STREAM, 0);
        {
            struct sockaddr_in a;
            socklen_t al = sizeof a;
            memset(&a, 0, sizeof a);
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            ASBT_CHECK(bind(own, (struct sockaddr *)&a, sizeof a) == 0 && listen(own, 4) == 0 &&
                       getsockname(own, (struct sockaddr *)&a, &al) == 0);
            snprintf(url, sizeof url, "http://127.0.0.1:%d/", ntohs(a.sin_port));
        }
        rq.timeout_ms = 300;
        ASBT_EQ_RES(asb_http_do(on, &rq, &rs, &err), ASB_ERR_TIMEOUT);
        asb_http_response_free(&rs);
        {
            char buf[256];
            int cfd = accept(own, NULL, NULL);
            ssize_t n = cfd >= 0 ? recv(cfd, buf, sizeof buf, MSG_DONTWAIT) : -1;
            ASBT_CHECK(n > 0 && memcmp(buf, "GET / HTTP/1.1", 14) == 0);
            if (cfd >= 0) close(cfd);
        }
        close(own);
        asb_http_client_free(on);
        asb_http_client_free(off);
    }
    asb__diag_use_proc = 0;
}

/* The local tunnel's port held by another user (kubectl ended and someone
   bound its port first; here a kubectl that announces a port another
   user's listener holds): the router token, the command and the answer
   never cross. The call fails with the owner named, after one rebuild of
   the tunnel; the listener got no byte on any connection. */
ASBT_TEST(a_tunnel_port_another_user_holds_never_gets_the_call) {
    fake_kubectl k;
    asb_client *c;
    asb_sandbox *sb;
    asb_run_result rr;
    asb_error err;
    char num[16];
    int port, rep = -1, st, got, conns = 0;
    pid_t pid;
    ASBT_CHECK(geteuid() == 0);
    pid = foreign_listener(&port, &rep);
    ASBT_CHECK(pid > 0 && port > 0);
    snprintf(num, sizeof num, "%d", port);
    ASBT_CHECK(fake_kubectl_write(&k));
    setenv("ASB_FAKE_KUBECTL", "foreign", 1);
    setenv("ASB_FAKE_KUBECTL_PORT", num, 1);
    c = fake_tunnel_client(&k, 30000, &err);
    ASBT_CHECK(c != NULL);
    sb = c ? handle_without_cluster(c, "sb-foreign") : NULL;
    ASBT_CHECK(sb != NULL);
    memset(&rr, 0, sizeof rr);
    if (asb_sandbox_run(sb, "echo hello", 30000, &rr, &err) != ASB_ERR_CONNECT)
        fprintf(stderr, "    %s\n", err.message);
    ASBT_EQ_INT(err.code, ASB_ERR_CONNECT);
    ASBT_EQ_INT(rr.out.len, 0); /* nothing of the listener's answer */
    asb_run_result_free(&rr);
    ASBT_CONTAINS(err.message, "belongs to user 65534");
    ASBT_CHECK(c->tunnel.spawns >= 2); /* rebuilt once on the refusal */
    asb_client_free(c);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    while ((got = foreign_got(rep)) >= 0) {
        conns++;
        ASBT_EQ_INT(got, 0);
    }
    ASBT_CHECK(conns >= 1); /* it was reached, and got nothing */
    close(rep);
    fake_kubectl_remove(&k);
    unsetenv("ASB_FAKE_KUBECTL");
    unsetenv("ASB_FAKE_KUBECTL_PORT");
}

/* kubectl gets none of the program's descriptors, whatever their number:
   the tunnel's supervisor closed them one by one up to the soft limit on
   descriptors (at most 65536), so one above it reached kubectl, and a
   connection the program held stayed open in it. Above 65536 needs a
   hard limit this machine may not allow; a soft limit lowered after the
   descriptor was made (allowed: it stays open) shows the same bound. A
   descriptor without close-on-exec, as a program may hold (the library's
   own are close-on-exec from the start). */
ASBT_TEST(kubectl_inherits_no_descriptor_of_the_program_above_the_fd_limit) {
    fake_kubectl k;
    asb_client *c;
    asb_error err;
    struct rlimit old, low;
    char base[128], path[160], fds[512] = "", num[16];
    int high = -1, want;
    FILE *f;
    ASBT_CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0);
    want = old.rlim_cur == RLIM_INFINITY || old.rlim_cur > 65536 ? 65536 : (int)old.rlim_cur;
    ASBT_CHECK(want >= 2048);
    high = fcntl(0, F_DUPFD, want - 10); /* no FD_CLOEXEC */
    ASBT_CHECK(high >= want - 10);
    snprintf(num, sizeof num, "\n%d\n", high);
    ASBT_CHECK(fake_kubectl_write(&k));
    setenv("ASB_FAKE_KUBECTL", "fds", 1);
    c = fake_tunnel_client(&k, 30000, &err);
    ASBT_CHECK(c != NULL);
    low = old;
    low.rlim_cur = 1024;
    ASBT_CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
    ASBT_EQ_RES(router_base(c, base, sizeof base, &err), ASB_ERR_PORT_FORWARD);
    setrlimit(RLIMIT_NOFILE, &old);
    ASBT_CONTAINS(err.message, "error: listed");
    asb_client_free(c);
    snprintf(path, sizeof path, "%s.fds", k.args);
    f = fopen(path, "r");
    ASBT_CHECK(f != NULL);
    if (f) {
        fds[0] = '\n';
        fds[fread(fds + 1, 1, sizeof fds - 2, f) + 1] = '\0';
        fclose(f);
    }
    unlink(path);
    close(high);
    fake_kubectl_remove(&k);
    unsetenv("ASB_FAKE_KUBECTL");
    ASBT_CONTAINS(fds, "\n0\n"); /* the shell's own (ls sorts as text), never ours */
    ASBT_CONTAINS(fds, "\n1\n");
    ASBT_CONTAINS(fds, "\n2\n");
    if (strstr(fds, num)) fprintf(stderr, "    kubectl's descriptors:%s", fds);
    ASBT_CHECK(strstr(fds, num) == NULL);
}

/* R66: a kubectl that fails with the kube credential in its stderr (a
   wrapper that echoes its arguments, a verbose mode) left it in the call's
   error and the log: a connector's failure before the request returned
   without the masking every other failure of the call gets. */
ASBT_TEST(a_token_in_kubectl_output_is_masked_in_the_calls_error_and_log) {
    static const char tok[] = "r66-kubectl-0123456789abcdefghijklmnopq";
    fake_kubectl k;
    asb_client_desc d;
    asb_client *c = NULL;
    asb_sandbox *sb;
    asb_run_result rr;
    asb_error err;
    asbt_log lg;
    ASBT_CHECK(fake_kubectl_write(&k));
    setenv("ASB_FAKE_KUBECTL", "token", 1);
    setenv("ASB_FAKE_KUBECTL_TOKEN", tok, 1);
    ASBT_CHECK(write_token_kubeconfig(refused_port(), tok, NULL));
    memset(&d, 0, sizeof d);
    asbt_log_open(&lg, &d.log, ASB_LOG_DEBUG);
    d.kube.kubeconfig.path = unit_cfg;
    d.kubectl_path = k.path;
    d.port_forward_ready_timeout_ms = 30000;
    d.claim_api_version = "v1alpha1";
    ASBT_EQ_RES(client_from_unit_cfg(&d, &c, &err), ASB_OK);
    sb = c ? handle_without_cluster(c, "sb-r66") : NULL;
    ASBT_CHECK(sb != NULL);
    memset(&rr, 0, sizeof rr);
    ASBT_EQ_RES(asb_sandbox_run(sb, "true", 30000, &rr, &err), ASB_ERR_PORT_FORWARD);
    asb_run_result_free(&rr);
    ASBT_CONTAINS(err.message, "exited (status 1): error: Unauthorized (sent Bearer ****");
    ASBT_CHECK(strstr(err.message, tok + 4) == NULL);
    asb_client_free(c);
    ASBT_CONTAINS(lg.text.ptr, "Unauthorized");
    ASBT_CHECK(strstr(lg.text.ptr, tok + 4) == NULL);
    asbt_log_close(&lg);
    fake_kubectl_remove(&k);
    unsetenv("ASB_FAKE_KUBECTL");
    unsetenv("ASB_FAKE_KUBECTL_TOKEN");
}

/* A kubeconfig server with a fragment sent every call to its base path
   (the URL parser cuts at '#'), with the token, and the errors named
   paths never sent; a query would take every path into it. Both are
   refused when the client is made, before anything is sent. */
ASBT_TEST(a_kubeconfig_server_with_a_query_or_fragment_is_refused) {
    static const char *servers[] = {"http://127.0.0.1:1/base#frag", "http://127.0.0.1:1/?x=1",
                                    "https://127.0.0.1:1#"};
    size_t i;
    for (i = 0; i < sizeof servers / sizeof servers[0]; i++) {
        asb_kube_client_desc d;
        asb_kube_client *kc = NULL;
        asb_error err;
        FILE *f;
        int fd;
        snprintf(unit_cfg, sizeof unit_cfg, "/tmp/asb-test-sdk-XXXXXX");
        fd = mkstemp(unit_cfg); /* not the pid: see nocluster.h */
        ASBT_CHECK(fd >= 0);
        f = fdopen(fd, "w");
        ASBT_CHECK(f != NULL);
        fprintf(f,
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                "    server: \"%s\"\ncontexts:\n- name: c\n  context: {cluster: c, "
                "user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: abcd}\n",
                servers[i]);
        ASBT_CHECK(fclose(f) == 0);
        memset(&d, 0, sizeof d);
        d.kubeconfig.path = unit_cfg;
        ASBT_EQ_RES(asb_kube_client_create(&d, &kc, &err), ASB_ERR_INVALID_ARGUMENT);
        unlink(unit_cfg);
        ASBT_CHECK(kc == NULL);
        ASBT_CONTAINS(err.message, "has a query or fragment");
    }
}

/* A handle on claim/sandbox in "default", tracked by c as a create would
   leave it (freed with c); NULL when out of memory. */
static asb_sandbox *tracked_handle(asb_client *c, const char *claim, const char *sandbox) {
    asb_sandbox *sb = asb__new_handle(c, claim, sandbox, "default", NULL);
    if (!sb) return NULL;
    sb->next = c->handles;
    c->handles = sb;
    return sb;
}

/* A Sandbox the controller has not given a Ready condition yet reads as
   the reference reads it: not ready, "Unknown message". */
ASBT_TEST(status_without_a_ready_condition_is_not_ready_unknown_message) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c;
    asb_sandbox *sb;
    asb_error err;
    asb_sandbox_state st = (asb_sandbox_state)0;
    char msg[64];
    ASBT_CHECK(rec != NULL);
    c = apiserver_client(rec, &err);
    ASBT_CHECK(c != NULL);
    sb = tracked_handle(c, "sandbox-claim-00000001", "sb-1");
    ASBT_CHECK(sb != NULL);
    recorder_reply(rec, 200, "{\"kind\":\"Sandbox\",\"status\":{\"conditions\":[{\"type\":\"Other\","
                             "\"status\":\"True\",\"message\":\"not this one\"}]}}");
    ASBT_EQ_RES(asb_sandbox_status(sb, &st, msg, sizeof msg, &err), ASB_OK);
    ASBT_EQ_INT(st, ASB_SANDBOX_NOT_READY);
    ASBT_EQ_STR(msg, "Unknown message");
    recorder_reply(rec, 200, "{\"kind\":\"Sandbox\",\"status\":{\"conditions\":[{\"type\":\"Ready\","
                             "\"status\":\"False\",\"message\":\"pod pending\"}]}}");
    ASBT_EQ_RES(asb_sandbox_status(sb, &st, msg, sizeof msg, &err), ASB_OK);
    ASBT_EQ_INT(st, ASB_SANDBOX_NOT_READY);
    ASBT_EQ_STR(msg, "pod pending");
    asb_client_free(c);
    recorder_stop(rec);
}

/* status and pod_ip take a deadline and a cancel token for their GET of
   the Sandbox: an apiserver that holds the answer no longer holds the
   caller for the client's whole read timeout. */
ASBT_TEST(status_and_pod_ip_end_at_their_deadline_or_cancel) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c;
    asb_sandbox *sb;
    asb_error err;
    asb_sandbox_state st = (asb_sandbox_state)0;
    asb_call_opts o;
    canceller k;
    pthread_t th;
    char ip[ASB_IP_SIZE];
    ASBT_CHECK(rec != NULL);
    c = apiserver_client(rec, &err);
    ASBT_CHECK(c != NULL);
    sb = tracked_handle(c, "sandbox-claim-00000002", "sb-2");
    ASBT_CHECK(sb != NULL);
    recorder_reply(rec, 200, "{\"kind\":\"Sandbox\",\"status\":{\"podIPs\":[{\"ip\":\"10.0.0.9\"}],"
                             "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
    /* answered at once: the same as the plain calls */
    memset(&o, 0, sizeof o);
    o.timeout_ms = 5000;
    ASBT_EQ_RES(asb_sandbox_status_opts(sb, &st, NULL, 0, &o, &err), ASB_OK);
    ASBT_EQ_INT(st, ASB_SANDBOX_READY);
    ASBT_EQ_RES(asb_sandbox_pod_ip_opts(sb, ip, &o, &err), ASB_OK);
    ASBT_EQ_STR(ip, "10.0.0.9");
    /* held for 20 s (more than either bound): the deadline ends status */
    recorder_delay(rec, 20000);
    o.timeout_ms = 300;
    ASBT_EQ_RES(asb_sandbox_status_opts(sb, &st, NULL, 0, &o, &err), ASB_ERR_TIMEOUT);
    /* and the token ends pod_ip, whose deadline is far */
    recorder_delay(rec, 20000);
    ASBT_EQ_RES(asb_cancel_create(NULL, &k.token, &err), ASB_OK);
    k.after_ms = 300;
    o.timeout_ms = 60000;
    o.cancel = k.token;
    ASBT_CHECK(pthread_create(&th, NULL, cancel_later, &k) == 0);
    ASBT_EQ_RES(asb_sandbox_pod_ip_opts(sb, ip, &o, &err), ASB_ERR_CANCELLED);
    pthread_join(th, NULL);
    asb_cancel_free(k.token);
    asb_client_free(c);
    recorder_stop(rec);
}

/* R27: the shared watch of a namespace handed each event to one waiter
   per name, the one that registered last: a create waiting for its claim
   to bind and a get of that claim from another thread (or two gets) are
   two waiters for one name, and the earlier one never saw the binding
   (its call timed out; after a relist it was even told the claim was
   deleted). Two armed waiters for one name, the informer's callback
   as the watch calls it: both see the event. */
static int count_informer_event(void *ud, const asb_watch_event *ev) {
    (void)ev;
    (*(int *)ud)++;
    return 0;
}

static void informer_test_waiter(asb__waiter *w, asb__informer *inf, int *count) {
    memset(w, 0, sizeof *w);
    w->inf = inf;
    snprintf(w->name, sizeof w->name, "claim-x");
    snprintf(w->uid, sizeof w->uid, "u-1");
    w->armed = 1;
    w->fn = count_informer_event;
    w->user = count;
    asb_buf_init(&w->pending, NULL);
    pthread_cond_init(&w->cond, NULL);
}

ASBT_TEST(every_waiter_on_one_name_sees_the_shared_watchs_events) {
    static const char line[] = "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":"
                               "\"claim-x\",\"uid\":\"u-1\",\"resourceVersion\":\"7\"}}}";
    asb__informer inf;
    asb__waiter first, second;
    int n_first = 0, n_second = 0;
    unsigned h = asb__name_hash("claim-x");
    asb_json_doc d;
    asb_watch_event ev;
    char rv[64];
    memset(&inf, 0, sizeof inf);
    pthread_mutex_init(&inf.lock, NULL);
    informer_test_waiter(&first, &inf, &n_first);
    informer_test_waiter(&second, &inf, &n_second);
    /* registered as join does: at the head of the bucket */
    first.next = inf.buckets[h];
    inf.buckets[h] = &first;
    second.next = inf.buckets[h];
    inf.buckets[h] = &second;
    inf.waiters = 2;
    ASBT_EQ_RES(asb_json_doc_parse(&d, line, sizeof line - 1, NULL, NULL), ASB_OK);
    ASBT_CHECK(asb__event_decode(&d, &ev, rv, sizeof rv));
    asb__informer_event(&inf, &ev);
    asb_json_doc_free(&d);
    ASBT_EQ_INT(n_second, 1);
    ASBT_EQ_INT(n_first, 1);
    pthread_cond_destroy(&first.cond);
    pthread_cond_destroy(&second.cond);
    pthread_mutex_destroy(&inf.lock);
}

/* R27, the relist half: the informer's list (its first one, or the one
   after a 410) handed each listed object to one waiter per name as well,
   and after the list a waiter it skipped was judged missing: told its
   claim was deleted though the list had it. Three waiters for one name,
   all armed before the list (one of them done already), and a list the
   apiserver (the recorder, one page) answers with that object among
   others: each waiter that is not done sees it once, as ADDED with the
   listed UID, the done one sees nothing, and none is told it is gone. */
typedef struct listed_seen {
    int calls;
    asb_watch_type type;
    char uid[64];
} listed_seen;

static int record_listed_event(void *ud, const asb_watch_event *ev) {
    listed_seen *s = (listed_seen *)ud;
    s->calls++;
    s->type = ev->type;
    asb_json_get_string(ev->doc, asb_json_find(ev->doc, ev->object, "metadata.uid"), s->uid,
                        sizeof s->uid, NULL);
    return 0;
}

/* The informer's list (the recorder answers it) against three waiters
   for claim-x registered as join does, at the head of the bucket: the
   list meets second, then the done one, then first. The checks run in
   here so that a failed one returns to the caller, which frees. */
static void list_for_three_waiters_of_one_name(recorder *rec, asb_kube_client *kc) {
    recorder_request q;
    asb_error err;
    asb__informer inf;
    asb__waiter first, finished, second;
    listed_seen s_first, s_finished, s_second;
    int n_unused = 0;
    unsigned h = asb__name_hash("claim-x");
    asb_result r;
    memset(&s_first, 0, sizeof s_first);
    memset(&s_finished, 0, sizeof s_finished);
    memset(&s_second, 0, sizeof s_second);
    memset(&inf, 0, sizeof inf);
    inf.kc = kc;
    snprintf(inf.group, sizeof inf.group, "extensions.agents.x-k8s.io");
    snprintf(inf.version, sizeof inf.version, "v1alpha1");
    snprintf(inf.plural, sizeof inf.plural, "sandboxclaims");
    snprintf(inf.ns, sizeof inf.ns, "default");
    inf.res.group = inf.group;
    inf.res.version = inf.version;
    inf.res.plural = inf.plural;
    pthread_mutex_init(&inf.lock, NULL);
    informer_test_waiter(&first, &inf, &n_unused);
    informer_test_waiter(&finished, &inf, &n_unused);
    informer_test_waiter(&second, &inf, &n_unused);
    first.fn = finished.fn = second.fn = record_listed_event;
    first.user = &s_first;
    finished.user = &s_finished;
    second.user = &s_second;
    finished.done = 1; /* its fn ended its wait already */
    first.next = inf.buckets[h];
    inf.buckets[h] = &first;
    finished.next = inf.buckets[h];
    inf.buckets[h] = &finished;
    second.next = inf.buckets[h];
    inf.buckets[h] = &second;
    inf.waiters = 3;
    recorder_reply(rec, 200,
                   "{\"kind\":\"SandboxClaimList\",\"metadata\":{\"resourceVersion\":\"42\"},"
                   "\"items\":[{\"metadata\":{\"name\":\"claim-other\",\"uid\":\"u-9\"}},"
                   "{\"metadata\":{\"name\":\"claim-x\",\"uid\":\"u-1\","
                   "\"resourceVersion\":\"41\"}}]}");
    r = asb__informer_list(&inf, &err);
    pthread_cond_destroy(&first.cond);
    pthread_cond_destroy(&finished.cond);
    pthread_cond_destroy(&second.cond);
    pthread_mutex_destroy(&inf.lock);
    ASBT_EQ_RES(r, ASB_OK);
    /* one GET of the namespace's claims */
    ASBT_EQ_INT(recorder_count(rec), 1);
    ASBT_CHECK(recorder_get(rec, 0, &q));
    ASBT_CONTAINS(q.head, "GET /apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/default/"
                          "sandboxclaims?limit=500 ");
    ASBT_EQ_INT(s_first.calls, 1);
    ASBT_EQ_INT(s_first.type, ASB_WATCH_ADDED);
    ASBT_EQ_STR(s_first.uid, "u-1");
    ASBT_EQ_INT(s_second.calls, 1);
    ASBT_EQ_INT(s_second.type, ASB_WATCH_ADDED);
    ASBT_EQ_STR(s_second.uid, "u-1");
    ASBT_EQ_INT(s_finished.calls, 0);
    /* both were found by the list: neither is taken for deleted */
    ASBT_EQ_INT(first.done, 0);
    ASBT_EQ_INT(second.done, 0);
    ASBT_EQ_INT(first.gap, 0);
    ASBT_EQ_INT(second.gap, 0);
    ASBT_EQ_INT((int)inf.gap_deletes, 0);
    ASBT_EQ_STR(inf.rv, "42"); /* the watch resumes from the list */
}

ASBT_TEST(every_waiter_on_one_name_gets_the_object_from_the_shared_watchs_list) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client *c;
    asb_error err;
    int made;
    ASBT_CHECK(rec != NULL);
    c = apiserver_client(rec, &err);
    made = c != NULL;
    if (c) {
        list_for_three_waiters_of_one_name(rec, c->kube);
        asb_client_free(c);
    }
    recorder_stop(rec);
    ASBT_CHECK(made);
}

/* R30: a handle's lifecycle span was read and ended without the client's
   lock, though asb_client_delete_sandbox ends it from any thread (and two
   threads' asb_client_get_sandbox of one claim, which share one handle,
   both started it): the handle's own close and another thread's delete
   of its claim both ended it, a data race on the span (ThreadSanitizer)
   that could also export it twice. Here one thread closes the handle
   while another deletes its claim (the recorder answers the DELETE),
   many rounds: each handle's lifecycle ends exactly once. make test-tsan
   runs it under ThreadSanitizer. */
typedef struct life_count {
    pthread_mutex_t mu;
    int lifecycles;
} life_count;

static void count_lifecycles(void *user, const asb_span_data *span) {
    life_count *lc = (life_count *)user;
    size_t n = strlen(span->name);
    if (n >= 10 && strcmp(span->name + n - 10, ".lifecycle") == 0) {
        pthread_mutex_lock(&lc->mu);
        lc->lifecycles++;
        pthread_mutex_unlock(&lc->mu);
    }
}

typedef struct life_thread {
    pthread_t thread;
    asb_client *c;
    asb_sandbox *sb;
    asb_result r;
} life_thread;

static void *close_handle_main(void *arg) {
    life_thread *t = (life_thread *)arg;
    asb_sandbox_close_connection(t->sb);
    return NULL;
}

static void *delete_its_claim_main(void *arg) {
    life_thread *t = (life_thread *)arg;
    asb_error err;
    t->r = asb_client_delete_sandbox(t->c, asb_sandbox_claim_name(t->sb), "default", &err);
    return NULL;
}

ASBT_TEST(a_lifecycle_span_ends_once_from_many_threads) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_tracer_desc td;
    life_count lc;
    asb_client *c;
    asb_error err;
    int i, rounds = 20;
    ASBT_CHECK(rec != NULL);
    memset(&lc, 0, sizeof lc);
    pthread_mutex_init(&lc.mu, NULL);
    memset(&td, 0, sizeof td);
    td.enable = 1;
    td.otlp = -1;
    td.on_span_end = count_lifecycles;
    td.user_data = &lc;
    c = apiserver_client_traced(rec, &td, &err);
    ASBT_CHECK(c != NULL);
    recorder_reply(rec, 200, "{\"kind\":\"Status\",\"status\":\"Success\"}");
    for (i = 0; i < rounds; i++) {
        life_thread a, b;
        char claim[32], name[32];
        asb_sandbox *sb;
        snprintf(claim, sizeof claim, "sandbox-claim-l%d", i);
        snprintf(name, sizeof name, "sb-l%d", i);
        sb = asb__new_handle(c, claim, name, "default", NULL);
        ASBT_CHECK(sb != NULL);
        asb__span_start(c->tracer, &sb->life, "lifecycle", ASB_LATENCY_KIND_COUNT, NULL);
        pthread_mutex_lock(&c->lock);
        sb->next = c->handles;
        c->handles = sb;
        pthread_mutex_unlock(&c->lock);
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        a.c = b.c = c;
        a.sb = b.sb = sb;
        ASBT_CHECK(pthread_create(&a.thread, NULL, close_handle_main, &a) == 0);
        ASBT_CHECK(pthread_create(&b.thread, NULL, delete_its_claim_main, &b) == 0);
        pthread_join(a.thread, NULL);
        pthread_join(b.thread, NULL);
        ASBT_EQ_RES(b.r, ASB_OK);
    }
    pthread_mutex_lock(&lc.mu);
    ASBT_EQ_INT(lc.lifecycles, rounds);
    pthread_mutex_unlock(&lc.mu);
    asb_client_free(c); /* ends no lifecycle again */
    ASBT_EQ_INT(lc.lifecycles, rounds);
    recorder_stop(rec);
    pthread_mutex_destroy(&lc.mu);
}

/* A sandboxd handle closed on one thread while another makes calls on
   it: the call's check of the handle's active/closed flags (asb__sd_h2,
   where every gRPC call starts) read them without the client's lock the
   writers hold, a data race ThreadSanitizer reports. The sandboxd
   address is a closed loopback port: each call fails to connect, and the
   first after the close says the handle is closed. make test-tsan runs it
   under ThreadSanitizer. */
typedef struct sd_caller {
    asb_sandbox *sb;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long attempts;
    asb_result last;
} sd_caller;

static void *sd_call_until_closed(void *arg) {
    sd_caller *t = (sd_caller *)arg;
    int64_t deadline = asb__now_ms() + 60000; /* a hang bound, never reached when it passes */
    asb_result r;
    do {
        asb_h2_conn *h2 = NULL;
        asb_error e;
        r = asb__sd_h2(t->sb, 0, NULL, &h2, &e);
        if (r == ASB_OK) asb__sd_h2_put(t->sb, h2);
        pthread_mutex_lock(&t->mu);
        t->attempts++;
        t->last = r;
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->mu);
    } while (r != ASB_ERR_CLOSED && asb__now_ms() < deadline);
    return NULL;
}

/* An in-pod client whose sandboxd addresses refuse every connection
   (port 1), and its handle in *sb: calls fail at once. NULL on failure. */
static asb_client *in_pod_client_nowhere(asb_sandbox **sb) {
    asb_client_desc d;
    asb_client *c = NULL;
    asb_error err;
    memset(&d, 0, sizeof d);
    d.mode = ASB_CONNECT_IN_POD;
    d.sandboxd_rest_addr = "127.0.0.1:1";
    d.sandboxd_grpc_addr = "127.0.0.1:1";
    d.kube.http.retry.max_attempts = 1; /* a refused call fails at once, no backoff */
    *sb = NULL;
    if (asb_client_create(&d, &c, &err) != ASB_OK) return NULL;
    if (asb_client_sandbox_in_pod(c, sb, &err) != ASB_OK) {
        asb_client_free(c);
        return NULL;
    }
    return c;
}

/* A program's poll of the handle from another thread, with no lock of
   its own: until the handle reads as ended. */
static void *poll_until_inactive(void *arg) {
    const asb_sandbox *sb = (const asb_sandbox *)arg;
    int64_t deadline = asb__now_ms() + 60000; /* a hang bound */
    while (asb_sandbox_is_active(sb) && asb__now_ms() < deadline) {}
    return NULL;
}

ASBT_TEST(a_sandboxd_handle_closes_while_calls_run_from_many_threads) {
    asb_client *c = NULL;
    asb_sandbox *sb = NULL;
    sd_caller t;
    pthread_t th, poller;
    c = in_pod_client_nowhere(&sb);
    ASBT_CHECK(c != NULL && sb != NULL);
    memset(&t, 0, sizeof t);
    t.sb = sb;
    pthread_mutex_init(&t.mu, NULL);
    pthread_cond_init(&t.cv, NULL);
    ASBT_CHECK(pthread_create(&th, NULL, sd_call_until_closed, &t) == 0);
    ASBT_CHECK(pthread_create(&poller, NULL, poll_until_inactive, sb) == 0);
    pthread_mutex_lock(&t.mu);
    while (t.attempts < 2) pthread_cond_wait(&t.cv, &t.mu); /* it runs */
    pthread_mutex_unlock(&t.mu);
    asb_sandbox_close_connection(sb);
    pthread_join(th, NULL);
    pthread_join(poller, NULL);
    ASBT_EQ_RES(t.last, ASB_ERR_CLOSED);
    ASBT_EQ_INT(asb_sandbox_is_active(sb), 0);
    pthread_mutex_destroy(&t.mu);
    pthread_cond_destroy(&t.cv);
    asb_client_free(c);
}

/* R53: every REST or legacy call, and terminate, read the handle's
   active and closed flags without the client's lock, while another
   thread closed the handle or attached it again (R32's sibling): a data
   race ThreadSanitizer reports. Nothing listens on the addresses: each
   call fails at once, as ASB_ERR_CLOSED or a refused connection. */
typedef struct flag_reader {
    asb_sandbox *sb;
    int terminate; /* 0: stat calls */
    int bad;       /* results other than the expected ones */
} flag_reader;

static void *read_flags_in_calls(void *arg) {
    flag_reader *f = (flag_reader *)arg;
    int i;
    for (i = 0; i < 300; i++) {
        asb_file_stat st;
        asb_error err;
        asb_result r;
        if (f->terminate) {
            r = asb_sandbox_terminate(f->sb, &err);
            f->bad += r != ASB_OK;
        } else {
            r = asb_sandbox_stat(f->sb, "x", &st, NULL, &err);
            f->bad += r != ASB_ERR_CLOSED && r != ASB_ERR_CONNECT;
        }
    }
    return NULL;
}

ASBT_TEST(handle_flags_are_read_under_the_lock_by_calls_from_many_threads) {
    asb_client *c = NULL;
    asb_sandbox *sb = NULL;
    asb_error err;
    flag_reader fr[2];
    pthread_t th[2];
    int i;
    c = in_pod_client_nowhere(&sb);
    ASBT_CHECK(c != NULL && sb != NULL);
    for (i = 0; i < 2; i++) {
        fr[i].sb = sb;
        fr[i].terminate = i;
        fr[i].bad = 0;
        ASBT_CHECK(pthread_create(&th[i], NULL, read_flags_in_calls, &fr[i]) == 0);
    }
    for (i = 0; i < 300; i++) { /* closed, attached again, over and over */
        asb_sandbox *again = NULL;
        asb_sandbox_close_connection(sb);
        ASBT_EQ_RES(asb_client_sandbox_in_pod(c, &again, &err), ASB_OK);
        ASBT_CHECK(again == sb);
    }
    for (i = 0; i < 2; i++) pthread_join(th[i], NULL);
    ASBT_EQ_INT(fr[0].bad, 0);
    ASBT_EQ_INT(fr[1].bad, 0);
    asb_client_free(c);
}

/* `true` run on sb (1 s deadline) for the error it ends in; its output,
   if any, is freed. */
static asb_result run_true(asb_sandbox *sb, asb_error *err) {
    asb_run_result rr;
    asb_result r;
    memset(&rr, 0, sizeof rr);
    r = asb_sandbox_run(sb, "true", 1000, &rr, err);
    asb_run_result_free(&rr);
    return r;
}

/* R57: the pod name comes from the Sandbox's annotation (the apiserver's
   text); one that is no object name was refused with the raw bytes in
   err.message: terminal escapes for whatever prints it. One reply serves
   as the claim (bound, Ready) and as its Sandbox. */
ASBT_TEST(a_hostile_pod_name_is_quoted_in_the_error_that_refuses_it) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client_desc d;
    asb_client *c = NULL;
    asb_sandbox *sb = NULL;
    asb_error err;
    const char *m;
    ASBT_CHECK(rec != NULL);
    reply_claim_c1_on_pod(rec, "x\\u001b]0;pwned\\u0007");
    ASBT_CHECK(write_token_kubeconfig(rec->port, NULL, NULL));
    unit_desc(&d);
    d.mode = ASB_CONNECT_LOCAL_TUNNEL; /* the pod tunnel: the pod name goes to kubectl */
    d.runtime = ASB_RUNTIME_SANDBOXD;
    d.kubectl_path = "/nonexistent/kubectl"; /* never reached */
    ASBT_EQ_RES(client_from_unit_cfg(&d, &c, &err), ASB_OK);
    if (!c) {
        recorder_stop(rec);
        return;
    }
    ASBT_EQ_RES(asb_client_get_sandbox(c, "c1", "default", 5000, &sb, &err), ASB_OK);
    memset(&err, 0, sizeof err); /* the run's message alone */
    if (sb) ASBT_EQ_RES(run_true(sb, &err), ASB_ERR_INVALID_ARGUMENT);
    asb_client_free(c);
    recorder_stop(rec);
    ASBT_CHECK(strstr(err.message, "pod name") != NULL);
    for (m = err.message; *m; m++) ASBT_CHECK((unsigned char)*m >= 0x20);
}

/* Where in tok the first 16-byte run of it that text still holds starts
   (-1: none): a masking that lets part of a token through fails as
   surely as one that lets all of it through. */
static int token_run_at(const char *text, const char *tok, size_t tok_len) {
    size_t i;
    for (i = 0; i + 16 <= tok_len; i++) {
        char run[17];
        memcpy(run, tok + i, 16);
        run[16] = '\0';
        if (strstr(text, run) != NULL) return (int)i;
    }
    return -1;
}

/* R59: a claim's Ready condition message is the server's text, put into
   the error of a get (or a create) after the kube layer's masking: one
   echoing the kubeconfig's token handed it on. Masked now, with the
   client's other credentials. */
ASBT_TEST(a_token_in_a_claim_condition_message_is_masked_in_the_error) {
    static const char tok[] = "r59-cond-0123456789abcdefghijklmnopqrstu";
    recorder *rec = recorder_start("127.0.0.1");
    asb_client_desc d;
    asb_client *c = NULL;
    asb_sandbox *sb = NULL;
    asb_error err;
    char reply[1024];
    ASBT_CHECK(rec != NULL);
    snprintf(reply, sizeof reply,
             "{\"metadata\":{\"name\":\"c1\",\"uid\":\"u1\"},\"status\":{\"conditions\":[{"
             "\"type\":\"Ready\",\"status\":\"False\",\"reason\":\"TemplateNotFound\","
             "\"message\":\"no template for Bearer %s\"}]}}",
             tok);
    recorder_reply(rec, 200, reply);
    ASBT_CHECK(write_token_kubeconfig(rec->port, tok, NULL));
    unit_desc(&d);
    d.mode = ASB_CONNECT_DIRECT;
    d.direct_url = "http://127.0.0.1:1"; /* no sandbox call is made */
    ASBT_EQ_RES(client_from_unit_cfg(&d, &c, &err), ASB_OK);
    if (!c) {
        recorder_stop(rec);
        return;
    }
    ASBT_EQ_RES(asb_client_get_sandbox(c, "c1", "default", 5000, &sb, &err),
                ASB_ERR_TEMPLATE_NOT_FOUND);
    asb_client_free(c);
    recorder_stop(rec);
    ASBT_CONTAINS(err.message, "no template for Bearer ****");
    ASBT_EQ_INT(token_run_at(err.message, tok, sizeof tok - 1), -1);
}

/* R59: a Gateway's address that is refused is logged, quoted, as the
   server's text: one echoing the kubeconfig's token put it into the
   gateway.address_rejected line. The recorder as the apiserver answers
   every watch of the Gateway with such an address. */
ASBT_TEST(a_token_in_a_refused_gateway_address_is_masked_in_the_log) {
    static const char tok[] = "r59-gw-0123456789abcdefghijklmnopqrstuvw";
    recorder *rec = recorder_start("127.0.0.1");
    asb_client_desc d;
    asb_client *c = NULL;
    asb_error err;
    asbt_log lg;
    char reply[512];
    ASBT_CHECK(rec != NULL);
    snprintf(reply, sizeof reply,
             "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"gw\"},\"status\":{"
             "\"addresses\":[{\"value\":\"x/%s\\u001b[2J\"}]}}}\n",
             tok);
    recorder_reply(rec, 200, reply);
    ASBT_CHECK(write_token_kubeconfig(rec->port, tok, NULL));
    unit_desc(&d);
    asbt_log_open(&lg, &d.log, ASB_LOG_DEBUG);
    d.mode = ASB_CONNECT_GATEWAY;
    d.gateway_name = "gw";
    d.gateway_ready_timeout_ms = 300;
    ASBT_EQ_RES(client_from_unit_cfg(&d, &c, &err), ASB_OK);
    if (c) {
        ASBT_EQ_RES(asb__gateway_base(c, &err), ASB_ERR_TIMEOUT);
        asb_client_free(c);
    }
    recorder_stop(rec);
    ASBT_CONTAINS(lg.text.ptr, "gateway address \"x/****");
    ASBT_EQ_INT(token_run_at(lg.text.ptr, tok, sizeof tok - 1), -1);
    asbt_log_close(&lg);
}

/* R62: the native pod tunnel names a sandboxd pod "<pod>.<ns>.asb-pod"
   in its URLs, whose host has at most 253 bytes: a valid pod name of 239
   bytes in "default" made one of 255, and every call failed with an
   "overlong host" of a URL the caller never gave. The error now says
   what is too long and what the limit is; 244 bytes together make the
   longest host a URL may have. */
ASBT_TEST(a_pod_name_too_long_for_the_native_pod_tunnel_says_so) {
    recorder *rec = recorder_start("127.0.0.1");
    asb_client_desc d;
    asb_client *c = NULL;
    asb_sandbox *sb = NULL;
    asb_error err;
    char pod[240];
    size_t i;
    ASBT_CHECK(rec != NULL);
    /* four labels of 59 and three dots: 239 bytes, a valid object name */
    for (i = 0; i < 239; i++) pod[i] = i % 60 == 59 ? '.' : 'p';
    pod[239] = '\0';
    ASBT_EQ_RES(asb_claim_name_validate(pod, strlen(pod), &err), ASB_OK);
    reply_claim_c1_on_pod(rec, pod);
    ASBT_CHECK(write_token_kubeconfig(rec->port, NULL, NULL));
    unit_desc(&d);
    d.mode = ASB_CONNECT_NATIVE_TUNNEL;
    d.runtime = ASB_RUNTIME_SANDBOXD;
    ASBT_EQ_RES(client_from_unit_cfg(&d, &c, &err), ASB_OK);
    if (!c) {
        recorder_stop(rec);
        return;
    }
    ASBT_EQ_RES(asb_client_get_sandbox(c, "c1", "default", 5000, &sb, &err), ASB_OK);
    memset(&err, 0, sizeof err); /* the run's message alone */
    if (sb) ASBT_EQ_RES(run_true(sb, &err), ASB_ERR_UNSUPPORTED);
    if (sb) { /* 237 + 7: the longest host there is, a URL's */
        asb__endpoint ep;
        asb_url u;
        asb_error e2;
        sb->pod[237] = '\0';
        ASBT_EQ_RES(asb__npt_endpoint(c, sb, 8080, &ep, &e2), ASB_OK);
        ASBT_EQ_RES(asb_url_parse(ep.base, strlen(ep.base), &u, &e2), ASB_OK);
        ASBT_EQ_INT((int)u.host.len, 253);
    }
    asb_client_free(c);
    recorder_stop(rec);
    ASBT_CONTAINS(err.message, "native pod tunnel");
    ASBT_CONTAINS(err.message, "pod name (239 bytes) and namespace (7)");
    ASBT_CONTAINS(err.message, "(255 bytes; a host name has at most 253, so the two together at most 244)");
}

/* R56: a claim's env values (spec.env: API keys, often) were built into
   the create's body in a buffer freed without being wiped. The recorder
   stands in for the apiserver (a real one takes the same POST); the wait
   after it fails: only the memory given back is looked at. */
ASBT_TEST(claim_env_values_are_wiped_before_their_memory_is_freed) {
    static char secret[8200];
    recorder *rec = recorder_start("127.0.0.1");
    scanalloc sa;
    asb_client_desc d;
    asb_client *c = NULL;
    asb_create_opts o;
    asb_env_var ev;
    asb_sandbox *sb = NULL;
    asb_error err;
    size_t i;
    int posted = 0, k;
    ASBT_CHECK(rec != NULL);
    snprintf(secret, sizeof secret, "scan-env-secret-5c1d-");
    for (i = strlen(secret); i < sizeof secret - 1; i++) secret[i] = (char)('a' + (i * 7) % 26);
    secret[sizeof secret - 1] = 0;
    scanalloc_init(&sa);
    scanalloc_secret(&sa, "scan-env-secret-5c1d");
    ASBT_CHECK(write_token_kubeconfig(rec->port, NULL, NULL));
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = unit_cfg;
    d.kube.http.retry.max_attempts = 1;
    d.kube.http.allocator = &sa.a;
    d.mode = ASB_CONNECT_DIRECT;
    d.direct_url = "http://127.0.0.1:1"; /* no sandbox call is made */
    d.claim_api_version = "v1beta1";
    ASBT_EQ_RES(client_from_unit_cfg(&d, &c, &err), ASB_OK);
    if (!c) {
        recorder_stop(rec);
        scanalloc_fini(&sa);
        return;
    }
    /* the answer leaves the value out: a real apiserver's echo, and its
       way through the read buffer and the claim watch (R63), are
       test_sdk_cluster.c's
       v1beta1_claim_env_values_in_apiserver_answers_are_wiped_before_their_memory_is_freed */
    recorder_reply(rec, 201, "{\"metadata\":{\"name\":\"x\",\"uid\":\"u1\"}}");
    memset(&o, 0, sizeof o);
    memset(&ev, 0, sizeof ev);
    ev.name = "KEY";
    ev.value = secret;
    o.env = &ev;
    o.env_count = 1;
    o.ready_timeout_ms = 300;
    o.warm_pool = "pool";
    (void)asb_client_create_sandbox(c, NULL, &o, &sb, &err); /* the wait fails: no watch */
    for (k = 0; k < recorder_count(rec) && k < RECORDER_MAX; k++)
        posted |= strncmp(rec->req[k].head, "POST ", 5) == 0 &&
                  recorder_has(rec->req[k].body, rec->req[k].body_len, "scan-env-secret-5c1d");
    asb_client_free(c);
    recorder_stop(rec);
    ASBT_CHECK(posted); /* the value did pass through the library */
    ASBT_EQ_INT(sa.hits, 0);
    ASBT_EQ_INT(scanalloc_live_count(&sa), 0);
    scanalloc_fini(&sa);
}

ASBT_LIST(
    ASBT_CASE(pod_ip_prefers_ipv4_unmaps_and_skips_invalid_entries)
    ASBT_CASE(every_waiter_on_one_name_sees_the_shared_watchs_events)
    ASBT_CASE(every_waiter_on_one_name_gets_the_object_from_the_shared_watchs_list)
    ASBT_CASE(a_lifecycle_span_ends_once_from_many_threads)
    ASBT_CASE(a_create_whose_answer_was_lost_deletes_its_claim_by_name)
    ASBT_CASE(a_run_answer_says_timed_out_only_when_the_runtime_does)
    ASBT_CASE(a_deadline_longer_than_the_read_timeout_waits_for_the_answer)
    ASBT_CASE(a_command_past_its_deadline_is_a_timeout_that_names_it)
    ASBT_CASE(cancel_from_another_thread_ends_a_waiting_call_at_once)
    ASBT_CASE(cancel_ends_a_tls_handshake_that_gets_no_answer)
    ASBT_CASE(a_create_waiting_for_ready_is_cancelled_and_deletes_its_claim)
    ASBT_CASE(a_create_whose_tunnel_cannot_start_says_whether_its_claim_went)
    ASBT_CASE(delete_all_deletes_the_claims_of_closed_handles_too)
    ASBT_CASE(the_claim_api_version_is_discovered_safely_from_many_threads)
    ASBT_CASE(handles_end_under_the_client_lock_from_many_threads)
    ASBT_CASE(a_sandboxd_handle_closes_while_calls_run_from_many_threads)
    ASBT_CASE(handle_flags_are_read_under_the_lock_by_calls_from_many_threads)
    ASBT_CASE(a_hostile_pod_name_is_quoted_in_the_error_that_refuses_it)
    ASBT_CASE(a_token_in_a_claim_condition_message_is_masked_in_the_error)
    ASBT_CASE(a_token_in_a_refused_gateway_address_is_masked_in_the_log)
    ASBT_CASE(a_token_in_kubectl_output_is_masked_in_the_calls_error_and_log)
    ASBT_CASE(a_kubeconfig_server_with_a_query_or_fragment_is_refused)
    ASBT_CASE(a_pod_name_too_long_for_the_native_pod_tunnel_says_so)
    ASBT_CASE(claim_env_values_are_wiped_before_their_memory_is_freed)
    ASBT_CASE(a_null_namespace_is_the_context_s_and_claims_list_with_details)
    ASBT_CASE(kubectl_is_never_run_from_the_working_directory)
    ASBT_CASE(client_options_are_checked_before_anything_runs)
    ASBT_CASE(a_logged_command_is_its_executable_base_name_only)
    ASBT_CASE(pod_ip_never_picks_addresses_the_router_refuses)
    ASBT_CASE(gateway_status_skips_integers_non_objects_and_numeric_hosts)
    ASBT_CASE(router_timeout_header_is_whole_seconds_rounded_up_with_a_60_s_default)
    ASBT_CASE(unsafe_paths_and_names_never_reach_the_router)
    ASBT_CASE(dot_and_dot_dot_object_names_never_reach_the_api_server)
    ASBT_CASE(router_token_and_header_keys_are_wiped_before_their_memory_is_freed)
    ASBT_CASE(file_paths_are_normalised_and_percent_encoded_on_the_wire)
    ASBT_CASE(a_list_or_exists_path_longer_than_the_cap_is_refused_not_cut)
    ASBT_CASE(a_listed_name_with_a_nul_is_skipped_not_cut)
    ASBT_CASE(a_sandboxd_call_keeps_the_apiservers_404_as_the_apiservers)
    ASBT_CASE(a_gone_pod_is_an_error_for_stat_not_a_missing_file)
    ASBT_CASE(router_token_goes_to_the_router_and_never_into_errors_or_the_log)
    ASBT_CASE(keys_in_extra_headers_are_masked_in_echoed_error_bodies)
    ASBT_CASE(a_long_error_body_keeps_its_first_512_bytes_in_err)
    ASBT_CASE(sandbox_tls_is_read_by_client_create_and_gateway_https_defaults_to_443)
    ASBT_CASE(v1beta1_options_become_the_claim_spec_and_are_checked_first)
    ASBT_CASE(the_claim_wait_is_pinned_to_its_uid_and_stops_at_terminal_reasons)
    ASBT_CASE(a_pod_without_a_kubeconfig_uses_its_service_account_unasked)
    ASBT_CASE(errors_keep_retry_after_request_id_and_content_type)
    ASBT_CASE(a_named_claim_whose_answer_was_lost_is_never_deleted_blind)
    ASBT_CASE(terminate_is_pinned_to_the_claims_uid)
    ASBT_CASE(the_tunnel_port_is_the_one_kubectl_announces_and_odd_output_is_refused)
    ASBT_CASE(a_loopback_port_another_user_holds_gets_no_byte_from_a_checking_client)
    ASBT_CASE(a_tunnel_port_another_user_holds_never_gets_the_call)
    ASBT_CASE(kubectl_inherits_no_descriptor_of_the_program_above_the_fd_limit)
    ASBT_CASE(status_without_a_ready_condition_is_not_ready_unknown_message)
    ASBT_CASE(status_and_pod_ip_end_at_their_deadline_or_cancel)
)
ASBT_MAIN()
