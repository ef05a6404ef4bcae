/* The local tunnel (the default mode, as in quickstart.c) with its
   settings spelled out, for a router that is not where the defaults look.

       KUBECONFIG=... ./local_tunnel [router namespace] [kube context]

   The client starts one `kubectl port-forward svc/<router service>
   :<router port> -n <router namespace>` when the first sandbox call needs
   it (kubectl picks the local port and prints it), sends every sandbox of the client through it
   (the router picks the sandbox by header), rebuilds it if kubectl dies,
   and stops it in asb_client_free. Releases after agent-sandbox v0.4.x
   run the router in "agent-sandbox-system" (the default); v0.4.x
   installs often ran it in the sandboxes' own namespace. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"

#include <stdio.h>

int main(int argc, char **argv) {
    asb_client_desc desc;
    asb_client *client;
    asb_sandbox *sb[2] = {NULL, NULL};
    asb_error err;
    int i, rc = 0;

    memset(&desc, 0, sizeof desc);
    desc.mode = ASB_CONNECT_LOCAL_TUNNEL;         /* the default (0) */
    desc.router_namespace = argc > 1 ? argv[1] : "agent-sandbox-system";
    desc.router_service = "sandbox-router-svc";   /* the default */
    desc.router_port = 8080;                      /* the Service's port; the default */
    desc.kubectl_path = "kubectl";                /* searched on PATH; the default */
    desc.port_forward_ready_timeout_ms = 30000;   /* the default */
    /* kubectl is given the same kubeconfig and context as the client */
    desc.kube.kubeconfig.context = argc > 2 ? argv[2] : NULL; /* NULL: current */
    if (asb_client_create(&desc, &client, &err) != ASB_OK) {
        fprintf(stderr, "client: %s\n", err.message);
        return 1;
    }

    /* two sandboxes, one tunnel */
    for (i = 0; i < 2 && rc == 0; i++) {
        asb_run_result run;
        char cmd[64];
        if (asb_client_create_sandbox(client, "python-sandbox-template", NULL, &sb[i], &err) !=
            ASB_OK) {
            /* ASB_ERR_KUBECTL_MISSING or ASB_ERR_PORT_FORWARD (with
               kubectl's own words) when the tunnel cannot be built */
            fprintf(stderr, "create: %s (%s)\n", err.message, asb_result_str(err.code));
            rc = 1;
            break;
        }
        snprintf(cmd, sizeof cmd, "echo sandbox %d through the tunnel", i + 1);
        if (asb_sandbox_run(sb[i], cmd, 60000, &run, &err) != ASB_OK) {
            fprintf(stderr, "run: %s\n", err.message);
            rc = 1;
        } else {
            printf("%s: %s", asb_sandbox_name(sb[i]), run.out.ptr);
        }
        asb_run_result_free(&run);
    }

    /* deletes the claims of every handle the client still has */
    if (asb_client_delete_all(client, &err) != ASB_OK) {
        fprintf(stderr, "delete: %s\n", err.message);
        rc = 1;
    } else {
        printf("sandboxes deleted\n");
    }
    asb_client_free(client); /* stops kubectl (SIGTERM, then SIGKILL) */
    return rc;
}
