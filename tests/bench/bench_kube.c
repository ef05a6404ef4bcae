/* make bench (Kubernetes layer):
     - CPU time to load a 200-context kubeconfig and resolve one context,
       vs `kubectl config view --minify` on the same file (both in child
       processes, CPU from wait4);
     - with ASB_CLUSTER_KUBECONFIGS set (a running local cluster): CPU used
       by a watch that waits 60 s for nothing (goal: under 10 ms). */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include <sys/resource.h>
#include <sys/wait.h>

static double cpu_of(struct rusage *ru) {
    return (double)ru->ru_utime.tv_sec + (double)ru->ru_utime.tv_usec / 1e6 +
           (double)ru->ru_stime.tv_sec + (double)ru->ru_stime.tv_usec / 1e6;
}

static double child_cpu(int (*fn)(const char *), const char *arg, char **argv) {
    struct rusage ru;
    int st = 0;
    pid_t pid = fork();
    if (pid == 0) {
        if (argv) {
            int fd = open("/dev/null", O_WRONLY);
            dup2(fd, 1);
            dup2(fd, 2);
            execvp(argv[0], argv);
            _exit(127);
        }
        _exit(fn(arg));
    }
    wait4(pid, &st, 0, &ru);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return -1;
    return cpu_of(&ru);
}

static int load_once(const char *path) {
    asb_kubeconfig_desc d;
    asb_kube_config c;
    memset(&d, 0, sizeof d);
    d.path = path;
    d.context = "ctx-150";
    if (asb_kubeconfig_load(&d, &c, NULL) != ASB_OK) return 1;
    asb_kube_config_free(&c);
    return 0;
}

static int never(void *ud, const asb_watch_event *ev) {
    (void)ud;
    (void)ev;
    return 0;
}

int main(void) {
    char path[] = "/tmp/asb-bench-kubeconfig-XXXXXX";
    int fd = mkstemp(path), i, k;
    FILE *f = fdopen(fd, "w");
    double ours = 1e9, theirs = 1e9;
    char *argv[] = {(char *)"kubectl", (char *)"config", (char *)"view", (char *)"--minify",
                    (char *)"--context", (char *)"ctx-150", (char *)"--kubeconfig", path, NULL};
    const char *dir = getenv("ASB_CLUSTER_KUBECONFIGS");
    fprintf(f, "apiVersion: v1\nkind: Config\ncurrent-context: ctx-0\nclusters:\n");
    for (i = 0; i < 200; i++)
        fprintf(f, "- name: cluster-%d\n  cluster:\n    server: https://10.0.%d.%d:6443\n"
                   "    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM=\n",
                i, i / 250, i % 250);
    fprintf(f, "users:\n");
    for (i = 0; i < 200; i++)
        fprintf(f, "- name: user-%d\n  user:\n    exec:\n      apiVersion: "
                   "client.authentication.k8s.io/v1beta1\n      command: aws\n      args: [eks, "
                   "get-token, --cluster-name, c%d]\n",
                i, i);
    fprintf(f, "contexts:\n");
    for (i = 0; i < 200; i++)
        fprintf(f, "- name: ctx-%d\n  context: {cluster: cluster-%d, user: user-%d, namespace: "
                   "ns-%d}\n",
                i, i, i, i);
    fclose(f);
    for (k = 0; k < 5; k++) {
        double a = child_cpu(load_once, path, NULL), b = child_cpu(NULL, NULL, argv);
        if (a >= 0 && a < ours) ours = a;
        if (b >= 0 && b < theirs) theirs = b;
    }
    /* CPU time of the whole child, so both pay process start-up */
    printf("bench: kubeconfig load, 200 contexts (process CPU): %.2f ms vs kubectl-config-view "
           "%.2f ms = %.3fx (goal <= 0.05x)\n",
           ours * 1e3, theirs * 1e3, ours / theirs);
    unlink(path);
    if (dir) {
        asb_kube_client_desc d;
        asb_kube_client *kc;
        asb_watch_opts wo;
        asb_error err;
        char kp[1024];
        struct rusage r0, r1;
        static const asb_kube_resource tpl = {"extensions.agents.x-k8s.io", "v1alpha1",
                                              "sandboxtemplates"};
        snprintf(kp, sizeof kp, "%s/admin.kubeconfig", dir);
        memset(&d, 0, sizeof d);
        d.kubeconfig.path = kp;
        if (asb_kube_client_create(&d, &kc, &err) != ASB_OK) {
            fprintf(stderr, "bench_kube: %s\n", err.message);
            return 1;
        }
        memset(&wo, 0, sizeof wo);
        wo.field_selector = "metadata.name=nothing-ever";
        wo.resource_version = "0";
        wo.deadline_ms = 60000;
        wo.timeout_seconds = 60;
        getrusage(RUSAGE_SELF, &r0);
        asb_kube_watch(kc, &tpl, "default", &wo, never, NULL, &err);
        getrusage(RUSAGE_SELF, &r1);
        printf("bench: idle 60 s watch CPU: %.2f ms vs budget 10.00 ms = %.2fx (goal <= 1.0x)\n",
               (cpu_of(&r1) - cpu_of(&r0)) * 1e3, (cpu_of(&r1) - cpu_of(&r0)) * 1e3 / 10.0);
        asb_kube_client_free(kc);
    }
    return 0;
}
