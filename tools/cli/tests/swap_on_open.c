/* LD_PRELOAD shim for tools/cli/tests/offline.sh: plays another local user
   who swaps an entry of a tree being uploaded (cp -r up) at the worst
   moment: just before the tool opens it. The first open of a path whose
   last component is "swapme" replaces that entry, then opens as asked:
   by default (SWAP_KIND unset) a file becomes a symlink to $SWAP_TARGET;
   SWAP_KIND=dir: a file becomes a directory holding a file "inner";
   SWAP_KIND=file: an empty directory becomes a file; SWAP_KIND=gone: the
   file is removed (deleted between the listing and the open). The
   swapped-in file's body is "swapped-in-body". */
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
    } else if (kind && strcmp(kind, "gone") == 0) {
        swapped = 1;
        if (unlinkat(dirfd, path, 0) != 0) {
        }
    } else if (kind && strcmp(kind, "file") == 0) {
        swapped = 1;
        if (unlinkat(dirfd, path, AT_REMOVEDIR) == 0) plant_file(dirfd, path);
    } else if (target) {
        swapped = 1;
        if (unlinkat(dirfd, path, 0) == 0 && symlinkat(target, dirfd, path) == 0) {
        }
    }
}

/* What every entry point below does before it opens: swap if due, and
   find (once) the definition of name that ours hides, libc's, into *real
   (a function pointer: stored through void ** as POSIX has dlsym's
   result kept). */
static void before_open(void *real, const char *name, int dirfd, const char *path) {
    if (!*(void **)real) *(void **)real = dlsym(RTLD_NEXT, name);
    swap_if_due(dirfd, path);
}

/* The mode after flags is there only when the call creates a file, as
   libc reads it (O_CREAT, or O_TMPFILE): read it then, else pass 0. */
#define READ_MODE(m, flags)                                                         \
    do {                                                                            \
        va_list ap_;                                                                \
        va_start(ap_, flags);                                                       \
        m = ((flags) & O_CREAT) || ((flags) & O_TMPFILE) == O_TMPFILE               \
                ? (mode_t)va_arg(ap_, int) : 0;                                     \
        va_end(ap_);                                                                \
    } while (0)

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*open_2_fn)(const char *, int);
typedef int (*openat_2_fn)(int, const char *, int);

int open(const char *path, int flags, ...) {
    static open_fn real;
    mode_t m;
    READ_MODE(m, flags);
    before_open(&real, "open", AT_FDCWD, path);
    return real(path, flags, m);
}

int open64(const char *path, int flags, ...) {
    static open_fn real;
    mode_t m;
    READ_MODE(m, flags);
    before_open(&real, "open64", AT_FDCWD, path);
    return real(path, flags, m);
}

int openat(int dirfd, const char *path, int flags, ...) {
    static openat_fn real;
    mode_t m;
    READ_MODE(m, flags);
    before_open(&real, "openat", dirfd, path);
    return real(dirfd, path, flags, m);
}

int openat64(int dirfd, const char *path, int flags, ...) {
    static openat_fn real;
    mode_t m;
    READ_MODE(m, flags);
    before_open(&real, "openat64", dirfd, path);
    return real(dirfd, path, flags, m);
}

/* _FORTIFY_SOURCE builds (Ubuntu's default at -O2) call these instead
   when the flags are not a constant: the swap must happen there too */
int __open_2(const char *path, int flags) {
    static open_2_fn real;
    before_open(&real, "__open_2", AT_FDCWD, path);
    return real(path, flags);
}

int __open64_2(const char *path, int flags) {
    static open_2_fn real;
    before_open(&real, "__open64_2", AT_FDCWD, path);
    return real(path, flags);
}

int __openat_2(int dirfd, const char *path, int flags) {
    static openat_2_fn real;
    before_open(&real, "__openat_2", dirfd, path);
    return real(dirfd, path, flags);
}

int __openat64_2(int dirfd, const char *path, int flags) {
    static openat_2_fn real;
    before_open(&real, "__openat64_2", dirfd, path);
    return real(dirfd, path, flags);
}
