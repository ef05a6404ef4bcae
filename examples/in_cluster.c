/* In-cluster mode: a program running in a pod of the same cluster talks
   straight to the sandbox pod, with no router, no Gateway and no kubectl.

       ./in_cluster [template] [service account directory]

   Run it in a pod. Kubernetes calls use the pod's service account (the
   token and CA the kubelet mounts, default
   /var/run/secrets/kubernetes.io/serviceaccount, and the
   KUBERNETES_SERVICE_HOST/_PORT variables every pod gets); the account
   needs create/get/watch/delete on sandboxclaims and get on sandboxes.
   Sandbox calls go to http://<pod IP>:8888, the IP read from the
   Sandbox's status once per handle (and again when it stops answering:
   a recreated pod gets a new one). An account that may not read
   Sandboxes makes the client use the sandbox's Service name instead,
   <sandbox>.<namespace>.svc.cluster.local, which exists when the
   template says `service: true`. */
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
    char ip[ASB_IP_SIZE];
    int rc = 1;

    memset(&desc, 0, sizeof desc);
    desc.kube.in_cluster = 1;                             /* the pod's service account */
    desc.kube.service_account_dir = argc > 2 ? argv[2] : NULL; /* NULL: the standard mount */
    desc.mode = ASB_CONNECT_IN_CLUSTER;
    /* desc.server_port = 8888;  the runtime's port, if your image differs */
    if (asb_client_create(&desc, &client, &err) != ASB_OK) {
        fprintf(stderr, "client: %s\n", err.message); /* e.g. not in a pod */
        return 1;
    }
    if (asb_client_create_sandbox(client, tpl, NULL, &sb, &err) != ASB_OK) {
        fprintf(stderr, "create: %s\n", err.message);
        asb_client_free(client);
        return 1;
    }
    if (asb_sandbox_pod_ip(sb, ip, &err) != ASB_OK) {
        /* without an IP the client falls back to the sandbox's Service
           name, <sandbox>.<namespace>.svc.cluster.local */
        fprintf(stderr, "pod ip: %s\n", err.message);
        goto out;
    }
    printf("sandbox %s at pod IP %s, no router\n", asb_sandbox_name(sb), ip);

    if (asb_sandbox_run(sb, "echo hello from the pod next door", 60000, &run, &err) != ASB_OK) {
        fprintf(stderr, "run: %s\n", err.message);
        goto out;
    }
    printf("run: exit %d, stdout: %s", run.exit_code, run.out.ptr);
    asb_run_result_free(&run);

    if (asb_sandbox_write(sb, "in-cluster.txt", "no hops\n", 8, &err) != ASB_OK) {
        fprintf(stderr, "write: %s\n", err.message);
        goto out;
    }
    asb_buf_init(&file, NULL);
    if (asb_sandbox_read(sb, "in-cluster.txt", &file, &err) != ASB_OK) {
        fprintf(stderr, "read: %s\n", err.message);
        asb_buf_free(&file);
        goto out;
    }
    printf("read back: %s", file.ptr);
    asb_buf_free(&file);
    rc = 0;
out:
    if (asb_sandbox_terminate(sb, &err) != ASB_OK) {
        fprintf(stderr, "terminate: %s\n", err.message);
        rc = 1;
    } else {
        printf("sandbox deleted\n");
    }
    asb_client_free(client);
    return rc;
}
