/* Direct mode: the sandbox router is already reachable at a URL you know
   (an internal load balancer, an ingress, a port you forwarded yourself),
   so no kubectl is needed.

       KUBECONFIG=... ./direct_url http://sandbox-router.internal:8080 [template]

   The kubeconfig is still what creates and deletes the claim; only the
   calls to the sandbox (run, files) go to the URL, carrying the router's
   X-Sandbox-ID / -Namespace / -Port headers so it knows which sandbox is
   meant. If the router wants a bearer token, put it in
   SANDBOX_ROUTER_TOKEN; if it serves https with a certificate from a
   private CA, put that CA's PEM file in SANDBOX_ROUTER_CA. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    const char *tpl = argc > 2 ? argv[2] : "python-sandbox-template";
    asb_client_desc desc;
    asb_client *client;
    asb_sandbox *sb;
    asb_run_result run;
    asb_error err;
    asb_create_opts opts;
    int rc = 1;

    if (argc < 2) {
        fprintf(stderr, "usage: direct_url <router URL> [template]\n");
        return 2;
    }
    memset(&desc, 0, sizeof desc);
    desc.mode = ASB_CONNECT_DIRECT;
    desc.direct_url = argv[1];                          /* http:// or https:// */
    desc.router_token = getenv("SANDBOX_ROUTER_TOKEN"); /* NULL: none sent */
    desc.sandbox_tls.ca_file = getenv("SANDBOX_ROUTER_CA"); /* NULL: system CAs */
    /* The URL is checked here; nothing is dialed until the first call. */
    if (asb_client_create(&desc, &client, &err) != ASB_OK) {
        fprintf(stderr, "client: %s\n", err.message);
        return 1;
    }
    /* create waits for the claim to be Ready; probe_runtime also waits for
       the runtime to answer through the router, so a wrong URL fails
       here, not at the first call */
    memset(&opts, 0, sizeof opts);
    opts.probe_runtime = 1;
    if (asb_client_create_sandbox(client, tpl, &opts, &sb, &err) != ASB_OK) {
        fprintf(stderr, "create: %s\n", err.message);
        asb_client_free(client);
        return 1;
    }
    printf("sandbox %s, reached through %s\n", asb_sandbox_name(sb), argv[1]);

    if (asb_sandbox_run(sb, "echo hello through the router URL", 60000, &run, &err) == ASB_OK) {
        printf("run: exit %d, stdout: %s", run.exit_code, run.out.ptr);
        rc = run.exit_code;
    } else if (err.http_status) {
        /* the router (or something in front of it) answered with an error:
           its status and the start of its body say why */
        fprintf(stderr, "run: HTTP %d: %.*s\n", err.http_status, (int)err.body_len, err.body);
    } else {
        fprintf(stderr, "run: %s\n", err.message); /* could not reach the URL */
    }
    asb_run_result_free(&run);
    if (rc == 0) { /* files go the same way */
        asb_buf file;
        asb_buf_init(&file, NULL);
        if (asb_sandbox_write(sb, "direct.txt", "by URL\n", 7, &err) != ASB_OK ||
            asb_sandbox_read(sb, "direct.txt", &file, &err) != ASB_OK) {
            fprintf(stderr, "files: %s\n", err.message);
            rc = 1;
        } else {
            printf("read back: %s", file.ptr);
        }
        asb_buf_free(&file);
    }

    if (asb_sandbox_terminate(sb, &err) != ASB_OK) {
        fprintf(stderr, "terminate: %s\n", err.message);
        rc = 1;
    } else {
        printf("sandbox deleted\n");
    }
    asb_client_free(client);
    return rc;
}
