/* Prints what asb_kubeconfig_load resolves, as JSON, for the kubectl
   oracle test (tests/kubeconfig/oracle_test.py). Usage:
     kubeconfig_dump [--kubeconfig FILE] [--context NAME]
   With ASB_DUMP_PATHS set, a KUBECONFIG list goes through
   asb_kubeconfig_desc.paths instead (and KUBECONFIG is unset).
   Exit 0 with {"ok":true,...}, or 1 with {"ok":false,"error":"..."}. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include <stdio.h>

static void str(asb_json_writer *w, const char *k, const char *v) {
    asb_json_key(w, k);
    if (v)
        asb_json_string(w, v);
    else
        asb_json_null(w);
}

static void b64(asb_json_writer *w, const char *k, const char *v, size_t n) {
    asb_buf b;
    asb_json_key(w, k);
    if (!v) {
        asb_json_null(w);
        return;
    }
    asb_buf_init(&b, NULL);
    asb_base64_encode(v, n, &b);
    asb_json_string_n(w, b.ptr ? b.ptr : "", b.len);
    asb_buf_free(&b);
}

int main(int argc, char **argv) {
    asb_kubeconfig_desc d;
    asb_kube_config c;
    asb_error err;
    asb_buf out;
    asb_json_writer w;
    int i;
    const char *paths[32];
    char list[8192];
    memset(&d, 0, sizeof d);
    for (i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--kubeconfig") == 0) d.path = argv[i + 1];
        if (strcmp(argv[i], "--context") == 0) d.context = argv[i + 1];
    }
    if (getenv("ASB_DUMP_PATHS") && getenv("KUBECONFIG")) {
        /* the same list through asb_kubeconfig_desc.paths, with KUBECONFIG
           gone: both must resolve as kubectl does */
        char *p, *save = NULL;
        snprintf(list, sizeof list, "%s", getenv("KUBECONFIG"));
        unsetenv("KUBECONFIG");
        for (p = strtok_r(list, ":", &save); p && d.path_count < 32; p = strtok_r(NULL, ":", &save))
            paths[d.path_count++] = p;
        d.paths = paths;
    }
    asb_buf_init(&out, NULL);
    asb_json_writer_init(&w, &out);
    w.replace_invalid_utf8 = 1;
    asb_json_object_begin(&w);
    if (asb_kubeconfig_load(&d, &c, &err) != ASB_OK) {
        asb_json_key(&w, "ok");
        asb_json_bool(&w, 0);
        str(&w, "error", err.message);
        asb_json_object_end(&w);
        asb_json_writer_finish(&w);
        printf("%s\n", out.ptr);
        asb_buf_free(&out);
        return 1;
    }
    asb_json_key(&w, "ok");
    asb_json_bool(&w, 1);
    str(&w, "context", c.context);
    str(&w, "cluster", c.cluster);
    str(&w, "user", c.user);
    str(&w, "server", c.server);
    str(&w, "namespace", c.default_namespace);
    str(&w, "tls_server_name", c.tls_server_name);
    str(&w, "proxy_url", c.proxy_url);
    asb_json_key(&w, "insecure");
    asb_json_bool(&w, c.insecure_skip_tls_verify);
    b64(&w, "ca", c.ca, c.ca_len);
    b64(&w, "client_cert", c.client_cert, c.client_cert_len);
    b64(&w, "client_key", c.client_key, c.client_key_len);
    str(&w, "token", c.token);
    str(&w, "token_file", c.token_file);
    str(&w, "username", c.username);
    str(&w, "password", c.password);
    str(&w, "auth_provider", c.auth_provider);
    asb_json_key(&w, "exec");
    if (!c.exec) {
        asb_json_null(&w);
    } else {
        size_t k;
        asb_json_object_begin(&w);
        str(&w, "command", c.exec->command);
        str(&w, "apiVersion", c.exec->api_version);
        str(&w, "installHint", c.exec->install_hint);
        str(&w, "interactiveMode", c.exec->interactive_mode);
        asb_json_key(&w, "provideClusterInfo");
        asb_json_bool(&w, c.exec->provide_cluster_info);
        asb_json_key(&w, "args");
        asb_json_array_begin(&w);
        for (k = 0; k < c.exec->arg_count; k++) asb_json_string(&w, c.exec->args[k]);
        asb_json_array_end(&w);
        asb_json_key(&w, "env");
        asb_json_array_begin(&w);
        for (k = 0; k < c.exec->env_count; k++) {
            asb_json_object_begin(&w);
            str(&w, "name", c.exec->env_names[k]);
            str(&w, "value", c.exec->env_values[k]);
            asb_json_object_end(&w);
        }
        asb_json_array_end(&w);
        asb_json_object_end(&w);
    }
    asb_json_object_end(&w);
    if (asb_json_writer_finish(&w) != ASB_OK) return 3;
    printf("%s\n", out.ptr);
    asb_buf_free(&out);
    asb_kube_config_free(&c);
    return 0;
}
