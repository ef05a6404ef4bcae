/* LD_PRELOAD shim for tools/cli/tests/offline.sh: plays another local user
   who swaps a file of a tree being uploaded (cp -r up) for a symlink to a
   file of the victim's, at the worst moment: just before the tool opens
   it. The first open of a path whose last component is "swapme" replaces
   that entry with a symlink to $SWAP_TARGET, then opens as asked. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static int swapped;

static void swap_if_due(int dirfd, const char *path) {
    const char *base = strrchr(path, '/'), *target = getenv("SWAP_TARGET");
    base = base ? base + 1 : path;
    if (swapped || !target || strcmp(base, "swapme") != 0) return;
    swapped = 1;
    if (unlinkat(dirfd, path, 0) == 0 && symlinkat(target, dirfd, path) == 0) {
    }
}

static mode_t mode_of(int flags, va_list ap) {
    return (flags & O_CREAT) ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char *path, int flags, ...) {
    static int (*real)(const char *, int, ...);
    va_list ap;
    mode_t m;
    va_start(ap, flags);
    m = mode_of(flags, ap);
    va_end(ap);
    if (!real) real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
    swap_if_due(AT_FDCWD, path);
    return real(path, flags, m);
}

int open64(const char *path, int flags, ...) {
    static int (*real)(const char *, int, ...);
    va_list ap;
    mode_t m;
    va_start(ap, flags);
    m = mode_of(flags, ap);
    va_end(ap);
    if (!real) real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open64");
    swap_if_due(AT_FDCWD, path);
    return real(path, flags, m);
}

int openat(int dirfd, const char *path, int flags, ...) {
    static int (*real)(int, const char *, int, ...);
    va_list ap;
    mode_t m;
    va_start(ap, flags);
    m = mode_of(flags, ap);
    va_end(ap);
    if (!real) real = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
    swap_if_due(dirfd, path);
    return real(dirfd, path, flags, m);
}

int openat64(int dirfd, const char *path, int flags, ...) {
    static int (*real)(int, const char *, int, ...);
    va_list ap;
    mode_t m;
    va_start(ap, flags);
    m = mode_of(flags, ap);
    va_end(ap);
    if (!real) real = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat64");
    swap_if_due(dirfd, path);
    return real(dirfd, path, flags, m);
}

/* _FORTIFY_SOURCE builds (Ubuntu's default at -O2) call these instead
   when the flags are not a constant: the swap must happen there too */
int __open_2(const char *path, int flags) {
    static int (*real)(const char *, int);
    if (!real) real = (int (*)(const char *, int))dlsym(RTLD_NEXT, "__open_2");
    swap_if_due(AT_FDCWD, path);
    return real(path, flags);
}

int __open64_2(const char *path, int flags) {
    static int (*real)(const char *, int);
    if (!real) real = (int (*)(const char *, int))dlsym(RTLD_NEXT, "__open64_2");
    swap_if_due(AT_FDCWD, path);
    return real(path, flags);
}

int __openat_2(int dirfd, const char *path, int flags) {
    static int (*real)(int, const char *, int);
    if (!real) real = (int (*)(int, const char *, int))dlsym(RTLD_NEXT, "__openat_2");
    swap_if_due(dirfd, path);
    return real(dirfd, path, flags);
}

int __openat64_2(int dirfd, const char *path, int flags) {
    static int (*real)(int, const char *, int);
    if (!real) real = (int (*)(int, const char *, int))dlsym(RTLD_NEXT, "__openat64_2");
    swap_if_due(dirfd, path);
    return real(dirfd, path, flags);
}
