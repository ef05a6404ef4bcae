// Create a sandbox, run a command, write a file, read it back, delete it.
// Needs a cluster with agent-sandbox, kubectl on PATH and a kubeconfig
// ($KUBECONFIG, else ~/.kube/config).
// Usage: ./quickstart [template | pool:<warm pool> (agent-sandbox v0.5+)]
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
    asb_buf file;
    asb_error err;
    int rc = 1;

    memset(&desc, 0, sizeof desc); // defaults: kubeconfig, kubectl tunnel
    memset(&opts, 0, sizeof opts); // defaults: the context's namespace, ...
    if (strncmp(tpl, "pool:", 5) == 0) {
        opts.warm_pool = tpl + 5; // v1beta1 claims come from a warm pool
        tpl = NULL;
    }
    if (asb_client_create(&desc, &client, &err) != ASB_OK) {
        fprintf(stderr, "client: %s\n", err.message);
        return 1;
    }
    if (asb_client_create_sandbox(client, tpl, &opts, &sb, &err) != ASB_OK) {
        fprintf(stderr, "create: %s\n", err.message);
        asb_client_free(client);
        return 1;
    }
    printf("sandbox %s is ready\n", asb_sandbox_name(sb));

    asb_buf_init(&file, NULL);
    if (asb_sandbox_run(sb, "echo hello from the sandbox", 60000, &run,
                        &err) != ASB_OK) {
        fprintf(stderr, "run: %s\n", err.message);
        goto out;
    }
    printf("run: exit %d, stdout: %s", run.exit_code, run.out.ptr);
    if (asb_sandbox_write(sb, "notes/hello.txt", "written from C\n", 15,
                          &err) != ASB_OK) {
        fprintf(stderr, "write: %s\n", err.message);
        goto out;
    }
    if (asb_sandbox_read(sb, "notes/hello.txt", &file, &err) != ASB_OK) {
        fprintf(stderr, "read: %s\n", err.message);
        goto out;
    }
    printf("read back: %s", file.ptr);
    rc = 0;
out:
    asb_run_result_free(&run); // always: asb_sandbox_run set it up
    asb_buf_free(&file);
    if (asb_sandbox_terminate(sb, &err) != ASB_OK) { // deletes the claim
        fprintf(stderr, "delete: %s\n", err.message);
        rc = 1;
    } else {
        printf("sandbox deleted\n");
    }
    asb_client_free(client);
    return rc;
}
