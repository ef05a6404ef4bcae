/* Gateway mode: the sandbox router is published through a Gateway
   (gateway.networking.k8s.io), and the client finds the way in by reading
   the Gateway's status, so nothing about the address is configured here.

       KUBECONFIG=... ./gateway <gateway name> [namespace] [port] [template]

   The client waits (one watch, up to gateway_ready_timeout_ms) until the
   Gateway lists an address, takes the first valid one (an IP or a DNS
   name; anything else is skipped) and sends every sandbox call to
   http://<address>:<port> with the router's X-Sandbox-* headers. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    const char *tpl = argc > 4 ? argv[4] : "python-sandbox-template";
    asb_client_desc desc;
    asb_client *client;
    asb_sandbox *sb;
    asb_run_result run;
    asb_error err;
    asb_create_opts opts;
    int rc = 1;

    if (argc < 2) {
        fprintf(stderr, "usage: gateway <gateway name> [namespace] [port] [template]\n");
        return 2;
    }
    memset(&desc, 0, sizeof desc);
    desc.mode = ASB_CONNECT_GATEWAY;
    desc.gateway_name = argv[1];
    desc.gateway_namespace = argc > 2 ? argv[2] : NULL; /* NULL: "default" */
    desc.gateway_port = argc > 3 ? atoi(argv[3]) : 0;   /* 0: 80, the listener's port */
    desc.gateway_ready_timeout_ms = 60000;              /* default 180000 */
    if (asb_client_create(&desc, &client, &err) != ASB_OK) {
        fprintf(stderr, "client: %s\n", err.message);
        return 1;
    }
    /* The Gateway is looked up on the first call that needs the router:
       here, create's check that the new sandbox's runtime answers
       (probe_runtime). A Gateway that never gets an address is
       ASB_ERR_TIMEOUT, and the claim is deleted again. */
    memset(&opts, 0, sizeof opts);
    opts.probe_runtime = 1;
    if (asb_client_create_sandbox(client, tpl, &opts, &sb, &err) != ASB_OK) {
        fprintf(stderr, "create: %s\n", err.message);
        asb_client_free(client);
        return 1;
    }
    printf("sandbox %s, reached through gateway %s\n", asb_sandbox_name(sb), argv[1]);

    if (asb_sandbox_run(sb, "echo hello through the gateway", 60000, &run, &err) == ASB_OK) {
        printf("run: exit %d, stdout: %s", run.exit_code, run.out.ptr);
        rc = run.exit_code;
    } else {
        fprintf(stderr, "run: %s\n", err.message);
    }
    asb_run_result_free(&run);

    if (asb_sandbox_terminate(sb, &err) != ASB_OK) {
        fprintf(stderr, "terminate: %s\n", err.message);
        rc = 1;
    } else {
        printf("sandbox deleted\n");
    }
    asb_client_free(client);
    return rc;
}
