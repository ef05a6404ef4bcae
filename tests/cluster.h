/* cluster.h - what the tests on the local control plane share (after
   agentsandbox.h with its implementation, and asbtest.h).

       cluster_dir()           the kubeconfig directory, ASB_CLUSTER_KUBECONFIGS
                               (exits 2 when it is not set: no cluster, no run)
       proc_parent(pid, ...)   a process's parent and name, from /proc
       count_entries(path)     the entries of a directory (/proc/self/fd,
                               /proc/self/task: what a case leaves behind)
       echo_ok(sb, words, ms)  `echo <words>` in a sandbox came back whole
       fd_round_trip_ok(sb, p) 5 MiB up from one file descriptor and back
                               into another, byte for byte
       enter_pod_env(state)    (with _GNU_SOURCE) make this process look
                               like a pod's: the apiserver as the service
                               host and port, the cluster DNS in its own
                               /etc/resolv.conf
       dns_account_client(state, runtime, ls)
                               then an in-cluster client as the account
                               tests/kube/dns-fallback-setup.sh made, which
                               may not read Sandboxes, logging into ls
       pod_ip_refused_ok(sb)   that account's pod IP lookup is refused (403)
       service_name_logged_once_ok(ls)
                               ... and the client said once that its calls
                               go to Service names from then on
       terminated_ok(sb)       sb (when not NULL) terminated

   Each check prints what went wrong before it returns 0, so the case that
   calls it only says which check failed. Builds as C99 and as C++11. */
#ifndef ASBT_CLUSTER_H
#define ASBT_CLUSTER_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logsink.h"

ASBT_UNUSED static const char *cluster_dir(void) {
    const char *dir = getenv("ASB_CLUSTER_KUBECONFIGS");
    if (!dir) {
        fprintf(stderr, "ASB_CLUSTER_KUBECONFIGS is not set (make cluster-up first)\n");
        exit(2);
    }
    return dir;
}

/* The parent of a process, from /proc (0 when it is gone); its name
   (comm) into name[cap] when name is not NULL. */
ASBT_UNUSED static int proc_parent(int pid, char *name, size_t cap) {
    char path[64], buf[512];
    FILE *f;
    int ppid = 0;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    f = fopen(path, "r");
    if (!f) return 0;
    if (fgets(buf, sizeof buf, f)) {
        char *lp = strchr(buf, '('), *rp = strrchr(buf, ')');
        if (lp && rp && sscanf(rp + 2, "%*c %d", &ppid) != 1) ppid = 0;
        if (name && lp && rp) snprintf(name, cap, "%.*s", (int)(rp - lp - 1), lp + 1);
    }
    fclose(f);
    return ppid;
}

/* The entries of a directory but . and .. (-1 when it cannot be read);
   for /proc/self/fd, without the one opendir holds while it counts. */
ASBT_UNUSED static int count_entries(const char *path) {
    DIR *d = opendir(path);
    struct dirent *e;
    int n = 0;
    if (!d) return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - (strcmp(path, "/proc/self/fd") == 0); /* opendir's own */
}

/* Runs `echo <words>` in sb (timeout_ms 0: the library's default): 1 when
   it exits 0 with the words back, else 0 with the error or what came back
   printed. */
ASBT_UNUSED static int echo_ok(asb_sandbox *sb, const char *words, int timeout_ms) {
    char cmd[256], want[256];
    asb_run_result rr;
    asb_error err;
    int ok;
    snprintf(cmd, sizeof cmd, "echo %s", words);
    snprintf(want, sizeof want, "%s\n", words);
    if (asb_sandbox_run(sb, cmd, timeout_ms, &rr, &err) != ASB_OK) {
        fprintf(stderr, "    %s: %s\n", cmd, err.message);
        return 0;
    }
    ok = rr.exit_code == 0 && rr.out.ptr && strcmp(rr.out.ptr, want) == 0;
    if (!ok)
        fprintf(stderr, "    %s: exit %d, stdout \"%s\"\n", cmd, rr.exit_code,
                rr.out.ptr ? rr.out.ptr : "");
    asb_run_result_free(&rr);
    return ok;
}

/* 5 MiB of a pattern in a temporary file goes up from offset 100 with
   asb_sandbox_write_from_fd to `path` in sb, and comes back with
   asb_sandbox_read_to_fd into another temporary file: 1 when every byte
   from offset 100 on came back, in order and no more. Both files are
   removed. */
ASBT_UNUSED static int fd_round_trip_ok(asb_sandbox *sb, const char *path) {
    char src[] = "/tmp/asb-fd-src-XXXXXX", dst[] = "/tmp/asb-fd-dst-XXXXXX";
    int in = mkstemp(src), out = mkstemp(dst), i, ok = in >= 0 && out >= 0;
    static char block[65536];
    char got[65536], want[65536];
    size_t total = 0;
    ssize_t n = 0;
    asb_error err;
    for (i = 0; i < (int)sizeof block; i++) block[i] = (char)(i * 7 + 3);
    for (i = 0; ok && i < 80; i++) /* 5 MiB, then skip the first 100 bytes */
        ok = write(in, block, sizeof block) == (ssize_t)sizeof block;
    ok = ok && lseek(in, 100, SEEK_SET) == 100;
    if (!ok) fprintf(stderr, "    the temporary files could not be made\n");
    if (ok && (asb_sandbox_write_from_fd(sb, path, in, &err) != ASB_OK ||
               asb_sandbox_read_to_fd(sb, path, out, &err) != ASB_OK)) {
        fprintf(stderr, "    %s: %s\n", path, err.message);
        ok = 0;
    }
    ok = ok && lseek(out, 0, SEEK_SET) == 0 && lseek(in, 100, SEEK_SET) == 100;
    while (ok && (n = read(out, got, sizeof got)) > 0) {
        ssize_t m = read(in, want, (size_t)n);
        if (m != n || memcmp(got, want, (size_t)n) != 0) {
            fprintf(stderr, "    %s: the bytes from %zu on differ\n", path, total);
            ok = 0;
        }
        total += (size_t)n;
    }
    if (ok && (n < 0 || total != 80 * sizeof block - 100)) {
        fprintf(stderr, "    %s: %zu bytes came back, %zu went up\n", path, total,
                80 * sizeof block - 100);
        ok = 0;
    }
    if (in >= 0) close(in);
    if (out >= 0) close(out);
    unlink(src);
    unlink(dst);
    return ok;
}

#ifdef _GNU_SOURCE /* unshare() */
#include <errno.h>
#include <sched.h>
#include <sys/mount.h>
/* For the child process of an in-cluster case: KUBERNETES_SERVICE_HOST and
   _PORT name the apiserver (its port from the cluster's STATE/cluster.json),
   and /etc/resolv.conf is STATE/resolv.conf, bind-mounted in a mount
   namespace of the child's own, so *.svc.cluster.local is answered by the
   cluster's DNS and no lookup leaves loopback. 0 when done; otherwise says
   why and returns -1. */
ASBT_UNUSED static int enter_pod_env(const char *state) {
    char path[1200], resolv[1200], port[16];
    FILE *f;
    snprintf(path, sizeof path, "%s/cluster.json", state);
    snprintf(resolv, sizeof resolv, "%s/resolv.conf", state);
    f = fopen(path, "r");
    {
        char buf[4096];
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        asb_json_doc doc;
        asb_error err;
        int64_t p = 0;
        buf[n] = '\0';
        if (f) fclose(f);
        if (asb_json_doc_parse(&doc, buf, n, NULL, &err) != ASB_OK) {
            fprintf(stderr, "    %s: %s\n", path, err.message);
            return -1;
        }
        asb_json_get_int64(&doc, asb_json_find(&doc, 0, "ports.apiserver"), &p);
        asb_json_doc_free(&doc);
        snprintf(port, sizeof port, "%d", (int)p);
    }
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount(resolv, "/etc/resolv.conf", NULL, MS_BIND, NULL) != 0) {
        fprintf(stderr, "    private resolv.conf (%s): %s\n", resolv, strerror(errno));
        return -1;
    }
    setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", port, 1);
    return 0;
}
#endif

/* After enter_pod_env(state): a client in in-cluster mode as the service
   account tests/kube/dns-fallback-setup.sh made in STATE/serviceaccount-dns
   (it may not read Sandboxes, nor templates), on runtime, its records from
   debug up in ls, opened here first (the caller closes it whatever this
   returns). NULL after saying why. */
ASBT_UNUSED static asb_client *dns_account_client(const char *state, asb_runtime_kind runtime,
                                                  asbt_log *ls) {
    char path[1200];
    asb_client_desc d;
    asb_client *c = NULL;
    asb_error err;
    memset(&d, 0, sizeof d);
    asbt_log_open(ls, &d.log, ASB_LOG_DEBUG);
    snprintf(path, sizeof path, "%s/serviceaccount-dns", state);
    d.kube.in_cluster = 1;
    d.kube.service_account_dir = path;
    d.mode = ASB_CONNECT_IN_CLUSTER;
    d.runtime = runtime;
    if (asb_client_create(&d, &c, &err) != ASB_OK) {
        fprintf(stderr, "    client: %s\n", err.message);
        return NULL;
    }
    return c;
}

/* The account of dns_account_client may not read the Sandbox: the pod IP
   lookup is refused with the apiserver's 403. */
ASBT_UNUSED static int pod_ip_refused_ok(asb_sandbox *sb) {
    char ip[ASB_IP_SIZE];
    asb_error err;
    if (asb_sandbox_pod_ip(sb, ip, &err) == ASB_OK || err.http_status != 403) {
        fprintf(stderr, "    the account was meant to be refused the Sandbox (got %d)\n",
                err.http_status);
        return 0;
    }
    return 1;
}

/* ... and after the refusal, the client said once (not per call) that
   in-cluster calls go to each sandbox's Service name. */
ASBT_UNUSED static int service_name_logged_once_ok(asbt_log *ls) {
    if (asbt_log_count(ls, "pod IP lookup refused (403): in-cluster calls go to each sandbox's "
                           "Service name from now on") != 1) {
        fprintf(stderr, "    the refusal was not logged once:\n%s\n", ls->text.ptr);
        return 0;
    }
    return 1;
}

/* sb terminated when it is not NULL (a case's last step, whatever went
   before). */
ASBT_UNUSED static int terminated_ok(asb_sandbox *sb) {
    asb_error err;
    if (sb && asb_sandbox_terminate(sb, &err) != ASB_OK) {
        fprintf(stderr, "    terminate: %s\n", err.message);
        return 0;
    }
    return 1;
}

#endif
