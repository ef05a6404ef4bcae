/* The router reached without kubectl: the apiserver's port-forward spoken
   from inside this process (WebSocket, v4.channel.k8s.io), one stream per
   connection, with the kubeconfig's own credentials. Nothing is spawned,
   so it works where there is no kubectl (a minimal container, a static
   binary).

       KUBECONFIG=... ./native_tunnel [template | pool:<warm pool>]

   The user needs RBAC get (newer servers: create) on pods/portforward
   and get/list on services and pods in the router's namespace; a 403
   says which. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *tpl = argc > 1 ? argv[1] : "python-sandbox-template";
    asb_client_desc desc;
    asb_create_opts opts;
    asb_client *client;
    asb_sandbox *sb;
    asb_run_result run;
    asb_error err;
    int rc = 0;

    memset(&desc, 0, sizeof desc);
    desc.mode = ASB_CONNECT_NATIVE_TUNNEL;
    desc.router_namespace = "agent-sandbox-system"; /* the defaults, spelled out */
    desc.router_service = "sandbox-router-svc";
    desc.router_port = 8080;
    memset(&opts, 0, sizeof opts);
    if (strncmp(tpl, "pool:", 5) == 0) {
        opts.warm_pool = tpl + 5;
        tpl = NULL;
    }
    if (asb_client_create(&desc, &client, &err) != ASB_OK) {
        fprintf(stderr, "client: %s\n", err.message);
        return 1;
    }
    if (asb_client_create_sandbox(client, tpl, &opts, &sb, &err) != ASB_OK) {
        /* RBAC on pods/portforward, no Ready router pod, ...: err.message */
        fprintf(stderr, "create: %s (%s)\n", err.message, asb_result_str(err.code));
        asb_client_free(client);
        return 1;
    }
    if (asb_sandbox_run(sb, "echo hello without kubectl", 60000, &run, &err) != ASB_OK) {
        fprintf(stderr, "run: %s\n", err.message);
        rc = 1;
    } else {
        printf("run: exit %d, stdout: %s", run.exit_code, run.out.ptr);
    }
    asb_run_result_free(&run);
    if (asb_sandbox_terminate(sb, &err) != ASB_OK) {
        fprintf(stderr, "delete: %s\n", err.message);
        rc = 1;
    }
    asb_client_free(client);
    return rc;
}
