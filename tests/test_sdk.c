/* Sandbox SDK rules that need no cluster: pod IP choice (upstream's S10,
   S11), option validation before anything runs (S18, ports), what a log
   may say about a command (S14). */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include "asbtest.h"

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
    ASBT_EQ_STR(exe("dir/=weird arg"), "=weird"); /* not NAME=: a path */
    ASBT_EQ_STR(exe("9X=1 prog"), "9X=1");       /* not a name either */
    ASBT_EQ_STR(exe("bin/"), "");
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
    }
    /* no kubeconfig at all: a clear error, nothing leaked */
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = "/nonexistent/kubeconfig";
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_ERR_KUBECONFIG);
    ASBT_CONTAINS(err.message, "/nonexistent/kubeconfig");
}

ASBT_LIST(
    ASBT_CASE(pod_ip_prefers_ipv4_unmaps_and_skips_invalid_entries)
    ASBT_CASE(client_options_are_checked_before_anything_runs)
    ASBT_CASE(a_logged_command_is_its_executable_base_name_only)
)
ASBT_MAIN()
