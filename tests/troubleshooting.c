/* Provokes one of the errors a new user meets first and prints what the
   library says about it, so tests/troubleshooting_test.py can check that
   the README's Troubleshooting section quotes the messages exactly.

       troubleshooting client                   asb_client_create alone
       troubleshooting create TEMPLATE [NS [V]] a client (router Service
                                                looked for in NS, claims of
                                                API version V), a sandbox
                                                from TEMPLATE, one command

   Prints "<code name>\t<err.message>" of the first failure and exits 0;
   exits 1 when every step succeeded (the error was not provoked). The
   environment (KUBECONFIG, HOME, PATH) is the caller's means of breaking
   things, as it is a user's. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"

#include <stdio.h>

static int report(asb_result r, const asb_error *err) {
    printf("%s\t%s\n", asb_result_str(r), err->message);
    return 0;
}

int main(int argc, char **argv) {
    asb_client_desc desc;
    asb_client *client;
    asb_sandbox *sb;
    asb_run_result run;
    asb_error err;
    asb_result r;
    int rc = 1;
    if (argc < 2 || (strcmp(argv[1], "create") == 0 && argc < 3)) {
        fprintf(stderr, "usage: troubleshooting client | create TEMPLATE [ROUTER_NAMESPACE "
                        "[CLAIM_API_VERSION]]\n");
        return 2;
    }
    memset(&desc, 0, sizeof desc);
    if (argc > 3 && argv[3][0]) desc.router_namespace = argv[3];
    if (argc > 4) desc.claim_api_version = argv[4];
    r = asb_client_create(&desc, &client, &err);
    if (r != ASB_OK) return report(r, &err);
    if (strcmp(argv[1], "create") == 0) {
        r = asb_client_create_sandbox(client, argv[2], NULL, &sb, &err);
        if (r != ASB_OK) {
            rc = report(r, &err);
        } else {
            r = asb_sandbox_run(sb, "true", 30000, &run, &err);
            asb_run_result_free(&run);
            if (r != ASB_OK) rc = report(r, &err);
            asb_sandbox_terminate(sb, NULL);
        }
    }
    asb_client_free(client);
    if (rc) fprintf(stderr, "troubleshooting: %s: nothing failed\n", argv[1]);
    return rc;
}
