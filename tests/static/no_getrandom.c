/* Runs a program with the getrandom system call failing with ENOSYS, as on
   a kernel older than 3.17 or under a container seccomp profile that lacks
   it: a seccomp filter (no privileges needed beyond no_new_privs), kept
   across execve by the program and its children. With no /dev/urandom
   either (an empty root), the library has no random source left, and
   make test-static checks the error says so.
       no_getrandom PROGRAM [ARGS...] */
#define _DEFAULT_SOURCE 1
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#elif defined(__i386__)
#define NATIVE_ARCH AUDIT_ARCH_I386
#else
#error "no_getrandom: add this architecture's AUDIT_ARCH_ value"
#endif

int main(int argc, char **argv) {
    /* Another architecture's system calls (i386 ones on x86_64) have other
       numbers: rather than letting one through unfiltered, kill. */
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getrandom, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog;
    unsigned char b[1];
    if (argc < 2) {
        fprintf(stderr, "usage: no_getrandom PROGRAM [ARGS...]\n");
        return 2;
    }
    prog.len = (unsigned short)(sizeof f / sizeof f[0]);
    prog.filter = f;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) {
        fprintf(stderr, "no_getrandom: seccomp filter: %s\n", strerror(errno));
        return 2;
    }
    /* The filter must bite, or a test using it would prove nothing. */
    if (syscall(SYS_getrandom, b, sizeof b, 0) != -1 || errno != ENOSYS) {
        fprintf(stderr, "no_getrandom: getrandom still works under the filter\n");
        return 2;
    }
    execvp(argv[1], argv + 1);
    fprintf(stderr, "no_getrandom: %s: %s\n", argv[1], strerror(errno));
    return 127;
}
