/* Every descriptor the library creates is close-on-exec from its first
   instant (review finding R5 of issue 12). Another thread of the program
   may fork and exec at any moment; a descriptor that gets FD_CLOEXEC only
   in a second call (pipe, then fcntl) is inherited by a child started in
   between, and a pipe's write end held by an unrelated child keeps its
   reader from ever seeing EOF.

   The race is made certain here: the implementation is compiled behind
   macros that wrap the calls creating descriptors (socket, socketpair,
   pipe, and syscall for pipe2), and right after each returns, the wrapper does what
   that other thread would do at that instant, a posix_spawn of a
   long-lived child, and looks at what the child inherited in
   /proc/PID/fd. Nothing of the library's may be there. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>

extern char **environ;

static int cx_armed;    /* only the library's calls, inside a test's window */
static int cx_created;  /* descriptors the library cx_created while cx_armed */
static int cx_spawned;  /* concurrent children started */
static int cx_leaked;   /* descriptors (>= 3) those children inherited */
static char cx_leak_what[300];

/* The other thread's fork+exec, at this very instant. glibc's posix_spawn
   returns once the child has exec'd, so its table is final when read. */
static void concurrent_spawn(void) {
    char *argv[] = {(char *)"sleep", (char *)"60", NULL};
    char d[64], p[400], target[256];
    DIR *dp;
    struct dirent *e;
    pid_t pid;
    int st;
    if (posix_spawnp(&pid, "sleep", NULL, NULL, argv, environ) != 0) return;
    cx_spawned++;
    snprintf(d, sizeof d, "/proc/%d/fd", (int)pid);
    dp = opendir(d);
    while (dp && (e = readdir(dp)) != NULL) {
        ssize_t n;
        if (e->d_name[0] == '.' || atoi(e->d_name) < 3) continue;
        snprintf(p, sizeof p, "%s/%s", d, e->d_name);
        n = readlink(p, target, sizeof target - 1);
        if (n <= 0) continue; /* gone already: the child's own, in passing */
        target[n] = 0;
        /* the library creates pipes and sockets only; a starting program
           opens (and closes) files of its own: its libraries, its locale */
        if (strncmp(target, "pipe:", 5) != 0 && strncmp(target, "socket:", 7) != 0) continue;
        if (!cx_leaked++) snprintf(cx_leak_what, sizeof cx_leak_what, "%s -> %s", e->d_name, target);
    }
    if (dp) closedir(dp);
    kill(pid, SIGKILL);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
}

static int asbt_socket(int domain, int type, int protocol) {
    int fd = socket(domain, type, protocol);
    if (fd >= 0 && cx_armed) {
        cx_created++;
        concurrent_spawn();
    }
    return fd;
}

static int asbt_pipe(int fds[2]) {
    int r = pipe(fds);
    if (r == 0 && cx_armed) {
        cx_created += 2;
        concurrent_spawn();
    }
    return r;
}

static int asbt_socketpair(int domain, int type, int protocol, int sv[2]) {
    int r = socketpair(domain, type, protocol, sv);
    if (r == 0 && cx_armed) {
        cx_created += 2;
        concurrent_spawn();
    }
    return r;
}

/* The two system calls the library makes directly. */
static long asbt_syscall(long n, ...) {
    va_list ap;
    long r;
    va_start(ap, n);
    if (n == SYS_pipe2) {
        int *fds = va_arg(ap, int *);
        int flags = va_arg(ap, int);
        r = syscall(n, fds, flags);
        if (r == 0 && cx_armed) {
            cx_created += 2;
            concurrent_spawn();
        }
    } else if (n == SYS_getrandom) {
        void *buf = va_arg(ap, void *);
        size_t len = va_arg(ap, size_t);
        int flags = va_arg(ap, int);
        r = syscall(n, buf, len, flags);
    } else {
        errno = ENOSYS;
        r = -1;
    }
    va_end(ap);
    return r;
}

#define socket asbt_socket
#define socketpair asbt_socketpair
#define pipe asbt_pipe
#define syscall asbt_syscall
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#undef socket
#undef socketpair
#undef pipe
#undef syscall
#include "asbtest.h"

static void arm(void) {
    cx_created = cx_spawned = cx_leaked = 0;
    cx_leak_what[0] = 0;
    cx_armed = 1;
}

ASBT_TEST(a_cancel_tokens_pipe_is_close_on_exec_from_its_first_instant) {
    asb_cancel *t = NULL;
    asb_error err;
    arm();
    ASBT_EQ_RES(asb_cancel_create(NULL, &t, &err), ASB_OK);
    cx_armed = 0;
    ASBT_EQ_INT(cx_created, 2);
    ASBT_EQ_INT(cx_spawned, 1);
    ASBT_EQ_STR(cx_leak_what, "");
    asb_cancel_free(t);
}

ASBT_TEST(a_connections_socket_is_close_on_exec_from_its_first_instant) {
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port;
    asb__conn c;
    asb_error err;
    ASBT_CHECK(lfd >= 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASBT_CHECK(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 4) == 0);
    ASBT_CHECK(getsockname(lfd, (struct sockaddr *)&a, &al) == 0);
    port = ntohs(a.sin_port);
    memset(&c, 0, sizeof c);
    c.fd = -1;
    arm();
    ASBT_EQ_RES(asb__tcp_connect(&c, "127.0.0.1", port, 5000, &err), ASB_OK);
    cx_armed = 0;
    ASBT_EQ_INT(cx_created, 1);
    ASBT_EQ_INT(cx_spawned, 1);
    ASBT_EQ_STR(cx_leak_what, "");
    close(c.fd);
    close(lfd);
}

ASBT_TEST(the_exec_plugins_pipes_are_close_on_exec_from_their_first_instant) {
    char dir[128], cfg[256], log[256], cwd[1024];
    asb_kube_client_desc d;
    asb_kube_client *kc = NULL;
    asb_error err;
    asb_buf out, eb;
    int status = -1;
    FILE *f;
    ASBT_CHECK(getcwd(cwd, sizeof cwd) != NULL);
    snprintf(dir, sizeof dir, "/tmp/asb-cloexec-XXXXXX"); /* not the pid: see nocluster.h */
    ASBT_CHECK(mkdtemp(dir) != NULL);
    snprintf(cfg, sizeof cfg, "%s/config", dir);
    snprintf(log, sizeof log, "%s/plugin.log", dir);
    f = fopen(cfg, "w");
    ASBT_CHECK(f != NULL);
    fprintf(f,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
            "    server: http://127.0.0.1:1\ncontexts:\n- name: c\n  context: {cluster: c, "
            "user: u}\ncurrent-context: c\nusers:\n- name: u\n  user:\n"
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
            "      command: %s/tests/kube/plugin.sh\n"
            "      env:\n      - {name: PLUGIN_MODE, value: token}\n"
            "      - {name: PLUGIN_LOG, value: %s}\n"
            "      - {name: API, value: client.authentication.k8s.io/v1}\n",
            cwd, log);
    fclose(f);
    memset(&d, 0, sizeof d);
    d.kubeconfig.path = cfg;
    ASBT_EQ_RES(asb_kube_client_create(&d, &kc, &err), ASB_OK);
    asb_buf_init(&out, NULL);
    asb_buf_init(&eb, NULL);
    arm();
    ASBT_EQ_RES(asb__exec_run(kc, &out, &eb, &status, &err), ASB_OK);
    cx_armed = 0;
    ASBT_EQ_INT(cx_created, 6); /* stdout, stderr, and the exec-error pipe */
    ASBT_EQ_INT(cx_spawned, 3);
    ASBT_EQ_STR(cx_leak_what, "");
    ASBT_EQ_INT(status, 0);
    ASBT_CHECK(out.ptr && strstr(out.ptr, "\"token\":\"tok-1\"") != NULL);
    asb_buf_free(&out);
    asb_buf_free(&eb);
    asb_kube_client_free(kc);
    unlink(cfg);
    snprintf(cfg, sizeof cfg, "rm -rf '%s'", dir);
    ASBT_CHECK(system(cfg) == 0);
}

ASBT_TEST(an_http2_connections_wake_pipe_is_close_on_exec_from_its_first_instant) {
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    char url[64];
    asb_h2_desc d;
    asb_h2_conn *h = NULL;
    asb_error err;
    ASBT_CHECK(lfd >= 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASBT_CHECK(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0); /* bound, never listening */
    ASBT_CHECK(getsockname(lfd, (struct sockaddr *)&a, &al) == 0);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(a.sin_port));
    memset(&d, 0, sizeof d);
    d.url = url;
    d.connect_timeout_ms = 5000;
    arm();
    ASBT_CHECK(asb_h2_connect(&d, &h, &err) != ASB_OK); /* refused: the pipe and socket exist */
    cx_armed = 0;
    ASBT_EQ_INT(cx_created, 3);
    ASBT_EQ_STR(cx_leak_what, "");
    close(lfd);
}

/* The kubectl tunnel's four pipes (kubectl's stderr and stdout, the
   supervisor's exec-error pipe and its lifeline). kubectl here is
   /bin/sleep, which refuses "port-forward" and ends: only the pipes
   matter, and they exist before the fork. */
ASBT_TEST(the_kubectl_tunnels_pipes_are_close_on_exec_from_their_first_instant) {
    char dir[128], cfg[256];
    asb_client_desc d;
    asb_client *c = NULL;
    asb__tunnel t;
    asb_error err;
    int port = 8080;
    FILE *f;
    snprintf(dir, sizeof dir, "/tmp/asb-cloexec-XXXXXX");
    ASBT_CHECK(mkdtemp(dir) != NULL);
    snprintf(cfg, sizeof cfg, "%s/config", dir);
    f = fopen(cfg, "w");
    ASBT_CHECK(f != NULL);
    fprintf(f, "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
               "    server: http://127.0.0.1:1\ncontexts:\n- name: c\n  context: {cluster: c, "
               "user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: t}\n");
    fclose(f);
    memset(&d, 0, sizeof d);
    d.kube.kubeconfig.path = cfg;
    d.kubectl_path = "/bin/sleep";
    ASBT_EQ_RES(asb_client_create(&d, &c, &err), ASB_OK);
    asb__tunnel_init(&t, c, "service", "sandbox-router-svc", "default", &port, 1, "");
    arm();
    ASBT_EQ_RES(asb__tunnel_spawn_locked(&t, &err), ASB_OK);
    cx_armed = 0;
    ASBT_EQ_INT(cx_created, 8);
    ASBT_EQ_INT(cx_spawned, 4);
    ASBT_EQ_STR(cx_leak_what, "");
    asb__tunnel_stop_locked(&t);
    asb_client_free(c);
    unlink(cfg);
    ASBT_CHECK(rmdir(dir) == 0);
}

/* The pair a port-forward stream hands the HTTP client (asb__pf_dial's
   one end each for the relay and the caller): SOCK_CLOEXEC, not a
   socketpair and then fcntl. */
ASBT_TEST(a_port_forward_streams_socketpair_is_close_on_exec_from_its_first_instant) {
    int sv[2] = {-1, -1};
    arm();
    ASBT_EQ_INT(asb__socketpair_cloexec(sv), 0);
    cx_armed = 0;
    ASBT_EQ_INT(cx_created, 2);
    ASBT_EQ_INT(cx_spawned, 1);
    ASBT_EQ_STR(cx_leak_what, "");
    close(sv[0]);
    close(sv[1]);
}

ASBT_LIST(
    ASBT_CASE(a_cancel_tokens_pipe_is_close_on_exec_from_its_first_instant)
    ASBT_CASE(a_port_forward_streams_socketpair_is_close_on_exec_from_its_first_instant)
    ASBT_CASE(a_connections_socket_is_close_on_exec_from_its_first_instant)
    ASBT_CASE(the_exec_plugins_pipes_are_close_on_exec_from_their_first_instant)
    ASBT_CASE(an_http2_connections_wake_pipe_is_close_on_exec_from_its_first_instant)
    ASBT_CASE(the_kubectl_tunnels_pipes_are_close_on_exec_from_their_first_instant)
)

int main(int argc, char **argv);
#define main asbt_main
ASBT_MAIN()
#undef main
int main(int argc, char **argv) {
    int fd;
    /* what this process inherited is not the library's: only the
       library's own descriptors are judged */
    for (fd = 3; fd < 1024; fd++) {
        int fl = fcntl(fd, F_GETFD);
        if (fl >= 0) fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
    }
    return asbt_main(argc, argv);
}
