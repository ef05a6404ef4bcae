/* Quick start: create a sandbox from a template, run a command, write a
   file, read it back, check it exists, and delete the sandbox.

       KUBECONFIG=... ./quickstart [template]

   Uses the local tunnel (kubectl port-forward to the sandbox router). */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"

#include <stdio.h>

int main(int argc, char **argv) {
    const char *tpl = argc > 1 ? argv[1] : "python-sandbox-template";
    asb_client_desc desc;
    asb_client *client;
    asb_sandbox *sb;
    asb_run_result run;
    asb_buf file;
    asb_error err;
    int exists = 0, rc = 1;

    memset(&desc, 0, sizeof desc); /* every default: kubeconfig, tunnel */
    if (asb_client_create(&desc, &client, &err) != ASB_OK) {
        fprintf(stderr, "client: %s\n", err.message);
        return 1;
    }
    if (asb_client_create_sandbox(client, tpl, NULL, &sb, &err) != ASB_OK) {
        fprintf(stderr, "create: %s\n", err.message);
        asb_client_free(client);
        return 1;
    }
    printf("sandbox %s (claim %s) is ready\n", asb_sandbox_name(sb), asb_sandbox_claim_name(sb));

    if (asb_sandbox_run(sb, "echo hello from inside the sandbox", 60000, &run, &err) != ASB_OK) {
        fprintf(stderr, "run: %s\n", err.message);
        goto out;
    }
    printf("run: exit %d, stdout: %s", run.exit_code, run.out.ptr);
    asb_run_result_free(&run);

    if (asb_sandbox_write(sb, "notes/hello.txt", "written from C\n", 15, &err) != ASB_OK) {
        fprintf(stderr, "write: %s\n", err.message);
        goto out;
    }
    asb_buf_init(&file, NULL);
    if (asb_sandbox_read(sb, "notes/hello.txt", &file, &err) != ASB_OK) {
        fprintf(stderr, "read: %s\n", err.message);
        asb_buf_free(&file);
        goto out;
    }
    printf("read back: %s", file.ptr);
    asb_buf_free(&file);
    if (asb_sandbox_exists(sb, "notes/hello.txt", &exists, &err) != ASB_OK) {
        fprintf(stderr, "exists: %s\n", err.message);
        goto out;
    }
    printf("exists: %s\n", exists ? "yes" : "no");
    rc = 0;
out:
    if (asb_sandbox_terminate(sb, &err) != ASB_OK)
        fprintf(stderr, "terminate: %s\n", err.message);
    else
        printf("sandbox deleted\n");
    asb_client_free(client);
    return rc;
}
