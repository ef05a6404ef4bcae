/* LD_PRELOAD shim for tools/cli/tests/offline.sh: plays another local user
   who swaps an entry of a tree being uploaded (cp -r up) at the worst
   moment: just before the tool opens it. The first open of a path whose
   last component is "swapme" replaces that entry, then opens as asked:
   by default (SWAP_KIND unset) a file becomes a symlink to $SWAP_TARGET;
   SWAP_KIND=dir: a file becomes a directory holding a file "inner";
   SWAP_KIND=file: an empty directory becomes a file. The swapped-in
   file's body is "swapped-in-body". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static int swapped;

/* a new file "swapped-in-body" at path below dirfd (through the real
   openat: the wrapper below has swapped already and lets it pass) */
static void plant_file(int dirfd, const char *path) {
    int fd = openat(dirfd, path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) {
        if (write(fd, "swapped-in-body\n", 16) != 16) {
        }
        close(fd);
    }
}

static void swap_if_due(int dirfd, const char *path) {
    const char *base = strrchr(path, '/'), *target = getenv("SWAP_TARGET");
    const char *kind = getenv("SWAP_KIND");
    char inner[4096];
    base = base ? base + 1 : path;
    if (swapped || strcmp(base, "swapme") != 0) return;
    if (kind && strcmp(kind, "dir") == 0) {
        swapped = 1;
        if (unlinkat(dirfd, path, 0) == 0 && mkdirat(dirfd, path, 0755) == 0 &&
            snprintf(inner, sizeof inner, "%s/inner", path) < (int)sizeof inner)
            plant_file(dirfd, inner);
    } else if (kind && strcmp(kind, "file") == 0) {
        swapped = 1;
        if (unlinkat(dirfd, path, AT_REMOVEDIR) == 0) plant_file(dirfd, path);
    } else if (target) {
        swapped = 1;
        if (unlinkat(dirfd, path, 0) == 0 && symlinkat(target, dirfd, path) == 0) {
        }
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
