/* nocluster.h - a client with no cluster behind it, for the unit tests
   (after agentsandbox.h with its implementation, and asbtest.h).

       refused_port()            a loopback port bound but never listening:
                                 connects to it are refused at once
       write_token_kubeconfig()  unit_cfg: a kubeconfig whose server is a
                                 loopback port, with or without a token (the
                                 caller unlinks it)
       write_unit_kubeconfig()   the same, no token, whose server is that
                                 refused port
       handle_without_cluster()  a handle made by the library's own
                                 constructor, registered with the client as
                                 create/get do (asb_client_free frees it)

   Builds as C99 and as C++11. */
#ifndef ASBT_NOCLUSTER_H
#define ASBT_NOCLUSTER_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

ASBT_UNUSED static char unit_cfg[512];

ASBT_UNUSED static int refused_port(void) {
    static int fd = -1;
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    if (fd < 0) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0) return -1;
    }
    if (getsockname(fd, (struct sockaddr *)&a, &al) != 0) return -1;
    return ntohs(a.sin_port);
}

/* unit_cfg: a kubeconfig whose apiserver is http://127.0.0.1:port, whose
   user sends `token` (NULL: a user with no credentials) and whose
   context's namespace is ctx_ns (NULL: none). The token is quoted so a
   test's token reads back byte for byte. 0 when it cannot be written. */
ASBT_UNUSED static int write_token_kubeconfig(int port, const char *token, const char *ctx_ns) {
    FILE *f;
    int fd;
    /* mkstemp, not a name from the pid: another user could plant a link at
       a predictable /tmp path and have the token written through it. */
    snprintf(unit_cfg, sizeof unit_cfg, "/tmp/asb-unit-XXXXXX");
    fd = mkstemp(unit_cfg);
    if (fd < 0) return 0;
    f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        return 0;
    }
    fprintf(f,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
            "    server: http://127.0.0.1:%d\ncontexts:\n- name: c\n  context: {cluster: c, "
            "user: u%s%s}\ncurrent-context: c\nusers:\n- name: u\n  user: {%s%s%s}\n",
            port, ctx_ns ? ", namespace: " : "", ctx_ns ? ctx_ns : "", token ? "token: '" : "",
            token ? token : "", token ? "'" : "");
    return fclose(f) == 0;
}

ASBT_UNUSED static int write_unit_kubeconfig(void) {
    return write_token_kubeconfig(refused_port(), NULL, NULL);
}

ASBT_UNUSED static asb_sandbox *handle_without_cluster(asb_client *c, const char *name) {
    asb_sandbox *sb = asb__new_handle(c, "sandbox-claim-0000beef", name, "default", NULL);
    if (sb) {
        sb->next = c->handles;
        c->handles = sb;
    }
    return sb;
}

#endif
