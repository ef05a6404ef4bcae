/* scanalloc.h - an asb_allocator for the tests that looks for secrets in
   memory the library gives back.

   Every block carries its size in a header. On free it is scanned for the
   secrets the test named; a block that still holds one is a hit (counted,
   and the first is shown with its size and the call stack that freed it).
   realloc_fn always moves the block (new block, copy, scan the old one,
   free it), as a real realloc may: a secret buffer grown with realloc_fn
   leaves its old copy behind, and this makes that visible every time.
   Live blocks are kept on a list, so a test can also check that the
   secret did pass through the allocator (scanalloc_live_has), which keeps
   a "no hits" result from being vacuous.

       scanalloc sa;
       scanalloc_init(&sa);
       scanalloc_secret(&sa, "my-token-value");
       desc.allocator = &sa.a;
       ... use the library, free everything ...
       ASBT_EQ_INT(sa.hits, 0);
       scanalloc_fini(&sa);

   Thread-safe (one mutex). Builds as C99 and as C++11. */
#ifndef ASBT_SCANALLOC_H
#define ASBT_SCANALLOC_H

#if defined(__GLIBC__)
#include <execinfo.h> /* glibc only: musl has no backtrace() */
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCANALLOC_SECRETS 8

typedef struct scanalloc_block {
    struct scanalloc_block *prev, *next;
    size_t size;
    size_t pad_; /* keeps the data 16-byte aligned after the header */
} scanalloc_block;

typedef struct scanalloc {
    asb_allocator a;
    pthread_mutex_t lock;
    const char *secret[SCANALLOC_SECRETS];
    size_t secret_len[SCANALLOC_SECRETS];
    int nsecrets;
    int hits;        /* freed blocks that still held a secret */
    int frees;       /* blocks scanned */
    scanalloc_block live;
} scanalloc;

/* Which secret block [p, p+n) holds, or -1. */
ASBT_UNUSED static int scanalloc_find(const scanalloc *sa, const char *p, size_t n) {
    int s;
    size_t i;
    for (s = 0; s < sa->nsecrets; s++) {
        size_t k = sa->secret_len[s];
        for (i = 0; k && i + k <= n; i++)
            if (p[i] == sa->secret[s][0] && memcmp(p + i, sa->secret[s], k) == 0) return s;
    }
    return -1;
}

ASBT_UNUSED static void scanalloc_scan(scanalloc *sa, scanalloc_block *b) {
    int s = scanalloc_find(sa, (const char *)(b + 1), b->size);
    sa->frees++;
    if (s >= 0) {
        if (sa->hits++ == 0) {
            fprintf(stderr, "    scanalloc: a freed block of %zu bytes still holds secret %d "
                    "(%zu bytes); freed from:\n", b->size, s, sa->secret_len[s]);
#if defined(__GLIBC__)
            {
                void *frames[24];
                int n = backtrace(frames, 24);
                backtrace_symbols_fd(frames, n, 2);
            }
#endif
        }
    }
}

ASBT_UNUSED static void *scanalloc_alloc(size_t size, void *user) {
    scanalloc *sa = (scanalloc *)user;
    scanalloc_block *b = (scanalloc_block *)malloc(sizeof *b + (size ? size : 1));
    if (!b) return NULL;
    b->size = size;
    /* fresh blocks hold a pattern, never what libc left there (a freed
       stdio buffer that held the test's own kubeconfig, say) */
    memset(b + 1, 0xa5, size);
    pthread_mutex_lock(&sa->lock);
    b->prev = &sa->live;
    b->next = sa->live.next;
    sa->live.next->prev = b;
    sa->live.next = b;
    pthread_mutex_unlock(&sa->lock);
    return b + 1;
}

ASBT_UNUSED static void scanalloc_free(void *ptr, void *user) {
    scanalloc *sa = (scanalloc *)user;
    scanalloc_block *b;
    if (!ptr) return;
    b = (scanalloc_block *)ptr - 1;
    pthread_mutex_lock(&sa->lock);
    b->prev->next = b->next;
    b->next->prev = b->prev;
    scanalloc_scan(sa, b);
    pthread_mutex_unlock(&sa->lock);
    free(b);
}

/* Always moves, as a real realloc may. */
ASBT_UNUSED static void *scanalloc_realloc(void *ptr, size_t size, void *user) {
    void *n = scanalloc_alloc(size, user);
    if (!n) return NULL;
    if (ptr) {
        scanalloc_block *b = (scanalloc_block *)ptr - 1;
        memcpy(n, ptr, b->size < size ? b->size : size);
        scanalloc_free(ptr, user);
    }
    return n;
}

ASBT_UNUSED static void scanalloc_init(scanalloc *sa) {
    memset(sa, 0, sizeof *sa);
    pthread_mutex_init(&sa->lock, NULL);
    sa->live.next = sa->live.prev = &sa->live;
    sa->a.alloc_fn = scanalloc_alloc;
    sa->a.realloc_fn = scanalloc_realloc;
    sa->a.free_fn = scanalloc_free;
    sa->a.user_data = sa;
}

/* Names a secret to look for (the string must outlive the allocator). */
ASBT_UNUSED static void scanalloc_secret(scanalloc *sa, const char *s) {
    if (sa->nsecrets < SCANALLOC_SECRETS) {
        sa->secret[sa->nsecrets] = s;
        sa->secret_len[sa->nsecrets++] = strlen(s);
    }
}

/* Does a live block hold secret number `which`? */
ASBT_UNUSED static int scanalloc_live_has(scanalloc *sa, int which) {
    scanalloc_block *b;
    int found = 0;
    pthread_mutex_lock(&sa->lock);
    for (b = sa->live.next; b != &sa->live && !found; b = b->next) {
        const char *p = (const char *)(b + 1);
        size_t k = sa->secret_len[which], i;
        for (i = 0; k && i + k <= b->size && !found; i++)
            if (memcmp(p + i, sa->secret[which], k) == 0) found = 1;
    }
    pthread_mutex_unlock(&sa->lock);
    return found;
}

/* Live blocks (0 once everything was freed). */
ASBT_UNUSED static int scanalloc_live_count(scanalloc *sa) {
    scanalloc_block *b;
    int n = 0;
    pthread_mutex_lock(&sa->lock);
    for (b = sa->live.next; b != &sa->live; b = b->next) n++;
    pthread_mutex_unlock(&sa->lock);
    return n;
}

ASBT_UNUSED static void scanalloc_fini(scanalloc *sa) { pthread_mutex_destroy(&sa->lock); }

#endif
