/* asbtest.h - the project's small C test runner.

   A test is a function; a file lists its tests once and ends with
   ASBT_MAIN(). Checks report file:line and both values, then leave the
   test (later checks would only repeat the damage). The run prints one line
   per test and ends with "N passed, M failed"; the exit status is non-zero
   when anything failed. Arguments filter tests by substring.

       ASBT_TEST(label_with_space_is_rejected) {
           ASBT_EQ_INT(asb_label_validate_key("a b", 3, NULL),
                       ASB_ERR_INVALID_ARGUMENT);
       }
       ASBT_LIST(ASBT_CASE(label_with_space_is_rejected))
       ASBT_MAIN()

   Builds as C99 and as C++11. */
#ifndef ASBTEST_H
#define ASBTEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#if defined(__GNUC__) || defined(__clang__)
#define ASBT_UNUSED __attribute__((unused))
#else
#define ASBT_UNUSED
#endif

/* A TCP listener on 127.0.0.1 at a port the kernel picks: its descriptor,
   the port in *port; -1 on failure. A backlog of 0 holds one connection,
   after which the kernel drops SYNs (a connect that never completes). */
static ASBT_UNUSED int asbt_listen_loopback(int backlog, int *port) {
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, backlog) != 0 ||
        getsockname(l, (struct sockaddr *)&a, &al) != 0) {
        if (l >= 0) close(l);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return l;
}

typedef struct asbt_case {
    const char *name;
    void (*fn)(void);
} asbt_case;

static int asbt_failed_now;

ASBT_UNUSED static void asbt_fail_begin(const char *file, int line) {
    asbt_failed_now = 1;
    fprintf(stderr, "    %s:%d: ", file, line);
}

/* Prints bytes with escapes, so a failure shows exactly what differed. */
ASBT_UNUSED static void asbt_print_bytes(const char *s, size_t n) {
    size_t i;
    if (!s) {
        fputs("(null)", stderr);
        return;
    }
    fputc('"', stderr);
    for (i = 0; i < n && i < 300; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            fputc(c, stderr);
        else
            fprintf(stderr, "\\x%02x", c);
    }
    if (n > 300) fprintf(stderr, "...(%zu bytes)", n);
    fputc('"', stderr);
}

#define ASBT_TEST(name) static void name(void)
#define ASBT_CASE(name) {#name, name},
#define ASBT_LIST(...) static const asbt_case asbt_cases[] = {__VA_ARGS__};

#define ASBT_CHECK(cond)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            asbt_fail_begin(__FILE__, __LINE__);                             \
            fprintf(stderr, "check failed: %s\n", #cond);                    \
            return;                                                          \
        }                                                                    \
    } while (0)

#define ASBT_EQ_INT(a, b)                                                    \
    do {                                                                     \
        long long asbt_a = (long long)(a), asbt_b = (long long)(b);          \
        if (asbt_a != asbt_b) {                                              \
            asbt_fail_begin(__FILE__, __LINE__);                             \
            fprintf(stderr, "%s == %s: got %lld, expected %lld\n", #a, #b,   \
                    asbt_a, asbt_b);                                         \
            return;                                                          \
        }                                                                    \
    } while (0)

/* asb_result comparison that prints the code names */
#define ASBT_EQ_RES(a, b)                                                    \
    do {                                                                     \
        asb_result asbt_a = (asb_result)(a), asbt_b = (asb_result)(b);       \
        if (asbt_a != asbt_b) {                                              \
            asbt_fail_begin(__FILE__, __LINE__);                             \
            fprintf(stderr, "%s: got %s (%d), expected %s (%d)\n", #a,       \
                    asb_result_str(asbt_a), (int)asbt_a,                     \
                    asb_result_str(asbt_b), (int)asbt_b);                    \
            return;                                                          \
        }                                                                    \
    } while (0)

#define ASBT_EQ_DBL(a, b)                                                    \
    do {                                                                     \
        double asbt_a = (a), asbt_b = (b);                                   \
        if (!(asbt_a == asbt_b)) {                                           \
            asbt_fail_begin(__FILE__, __LINE__);                             \
            fprintf(stderr, "%s == %s: got %.17g, expected %.17g\n", #a, #b, \
                    asbt_a, asbt_b);                                         \
            return;                                                          \
        }                                                                    \
    } while (0)

#define ASBT_EQ_MEM(a, alen, b, blen)                                        \
    do {                                                                     \
        const char *asbt_a = (const char *)(a), *asbt_b = (const char *)(b); \
        size_t asbt_al = (size_t)(alen), asbt_bl = (size_t)(blen);           \
        if (asbt_al != asbt_bl ||                                            \
            (asbt_al && memcmp(asbt_a, asbt_b, asbt_al) != 0)) {             \
            asbt_fail_begin(__FILE__, __LINE__);                             \
            fprintf(stderr, "%s == %s: got ", #a, #b);                       \
            asbt_print_bytes(asbt_a, asbt_al);                               \
            fputs(", expected ", stderr);                                    \
            asbt_print_bytes(asbt_b, asbt_bl);                               \
            fputc('\n', stderr);                                             \
            return;                                                          \
        }                                                                    \
    } while (0)

#define ASBT_EQ_STR(a, b)                                                    \
    do {                                                                     \
        const char *asbt_s1 = (a), *asbt_s2 = (b);                           \
        if (!asbt_s1 || !asbt_s2 || strcmp(asbt_s1, asbt_s2) != 0) {         \
            asbt_fail_begin(__FILE__, __LINE__);                             \
            fprintf(stderr, "%s == %s: got ", #a, #b);                       \
            asbt_print_bytes(asbt_s1, asbt_s1 ? strlen(asbt_s1) : 0);        \
            fputs(", expected ", stderr);                                    \
            asbt_print_bytes(asbt_s2, asbt_s2 ? strlen(asbt_s2) : 0);        \
            fputc('\n', stderr);                                             \
            return;                                                          \
        }                                                                    \
    } while (0)

/* The haystack contains the needle (for error messages). */
#define ASBT_CONTAINS(hay, needle)                                           \
    do {                                                                     \
        const char *asbt_h = (hay), *asbt_n = (needle);                      \
        if (!asbt_h || !strstr(asbt_h, asbt_n)) {                            \
            asbt_fail_begin(__FILE__, __LINE__);                             \
            fprintf(stderr, "%s contains \"%s\": got ", #hay, asbt_n);       \
            asbt_print_bytes(asbt_h, asbt_h ? strlen(asbt_h) : 0);           \
            fputc('\n', stderr);                                             \
            return;                                                          \
        }                                                                    \
    } while (0)

/* A counting allocator: tests pass it to the library and then check that
   every allocation was returned and that the library used no other heap. */
typedef struct asbt_heap {
    long live, total;
    long fail_after; /* > 0: the n-th allocation from now fails */
} asbt_heap;

ASBT_UNUSED static void *asbt_heap_alloc(size_t n, void *ud) {
    asbt_heap *h = (asbt_heap *)ud;
    if (h->fail_after > 0 && --h->fail_after == 0) return NULL;
    h->live++;
    h->total++;
    return malloc(n);
}
ASBT_UNUSED static void *asbt_heap_realloc(void *p, size_t n, void *ud) {
    asbt_heap *h = (asbt_heap *)ud;
    if (h->fail_after > 0 && --h->fail_after == 0) return NULL;
    if (!p) {
        h->live++;
        h->total++;
    }
    return realloc(p, n);
}
ASBT_UNUSED static void asbt_heap_free(void *p, void *ud) {
    asbt_heap *h = (asbt_heap *)ud;
    if (p) h->live--;
    free(p);
}
ASBT_UNUSED static asb_allocator asbt_heap_allocator(asbt_heap *h) {
    asb_allocator a;
    memset(h, 0, sizeof *h);
    a.alloc_fn = asbt_heap_alloc;
    a.realloc_fn = asbt_heap_realloc;
    a.free_fn = asbt_heap_free;
    a.user_data = h;
    return a;
}

/* A credential for the masking tests: n bytes of [A-Za-z0-9] from a
   32-bit LCG seeded with `seed` (no short period: each 16-byte window is
   one place of it), NUL-terminated (out holds n + 1). */
ASBT_UNUSED static void asbt_secret(char *out, size_t n, unsigned long seed) {
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned long x = (seed * 2654435761ul + 1) & 0xfffffffful;
    size_t i;
    for (i = 0; i < n; i++) {
        x = (x * 1664525ul + 1013904223ul) & 0xfffffffful;
        out[i] = abc[(x >> 24) % 62];
    }
    out[n] = '\0';
}

/* Does any text of the error (message, reason, body, the kept headers)
   hold w bytes in a row of `secret`, from anywhere in it? Names the
   field on stderr when one does. */
ASBT_UNUSED static int asbt_err_holds_window(const asb_error *e, const char *secret, size_t w) {
    static const char *const names[6] = {"message",     "reason",     "body",
                                         "retry_after", "request_id", "content_type"};
    const char *f[6];
    size_t len[6], i, j, k, n = strlen(secret);
    f[0] = e->message;
    f[1] = e->reason;
    f[2] = e->body;
    f[3] = e->retry_after;
    f[4] = e->request_id;
    f[5] = e->content_type;
    for (i = 0; i < 6; i++) len[i] = i == 2 ? e->body_len : strlen(f[i]);
    for (i = 0; i < 6; i++)
        for (j = 0; j + w <= n; j++)
            for (k = 0; k + w <= len[i]; k++)
                if (memcmp(f[i] + k, secret + j, w) == 0) {
                    fprintf(stderr, "    err.%s holds bytes %zu.. of the secret: %.*s\n",
                            names[i], j, (int)len[i], f[i]);
                    return 1;
                }
    return 0;
}

/* Optional, set by a test program before ASBT_MAIN runs the cases: called
   after each case with its name and whether it failed; nonzero fails it
   (a check of what every case must leave behind). */
static int (*asbt_after_each)(const char *name, int failed);

#define ASBT_MAIN()                                                          \
    int main(int argc, char **argv) {                                        \
        size_t i, n = sizeof asbt_cases / sizeof asbt_cases[0];              \
        int passed = 0, failed = 0, k;                                       \
        for (i = 0; i < n; i++) {                                            \
            int selected = argc < 2;                                         \
            for (k = 1; k < argc; k++)                                       \
                if (strstr(asbt_cases[i].name, argv[k])) selected = 1;       \
            if (!selected) continue;                                         \
            asbt_failed_now = 0;                                             \
            asbt_cases[i].fn();                                              \
            if (asbt_after_each &&                                           \
                asbt_after_each(asbt_cases[i].name, asbt_failed_now))        \
                asbt_failed_now = 1;                                         \
            if (asbt_failed_now) {                                           \
                failed++;                                                    \
                printf("FAIL %s\n", asbt_cases[i].name);                     \
            } else {                                                         \
                passed++;                                                    \
                printf("ok   %s\n", asbt_cases[i].name);                     \
            }                                                                \
            fflush(stdout);                                                  \
        }                                                                    \
        printf("%d passed, %d failed\n", passed, failed);                    \
        return failed ? 1 : 0;                                               \
    }

#endif
