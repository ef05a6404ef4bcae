/* Compiled three times with ORACLE_FN set and the jsmn mode macros
   (JSMN_PARENT_LINKS, JSMN_STRICT) chosen by the Makefile. */
#define JSMN_STATIC
#include <jsmn.h>
#include <stdlib.h>
#include "jsmn_oracle.h"

#define ORACLE_CAT2(a, b) a##b
#define ORACLE_CAT(a, b) ORACLE_CAT2(a, b)

int ORACLE_CAT(ORACLE_FN, _raw)(const char *js, size_t len, void *toks,
                                unsigned n) {
    jsmn_parser p;
    jsmn_init(&p);
    return jsmn_parse(&p, js, len, (jsmntok_t *)toks, n);
}

int ORACLE_FN(const char *js, size_t len, oracle_tok *out, unsigned n) {
    jsmntok_t *t = (jsmntok_t *)malloc((n ? n : 1) * sizeof *t);
    int r, i;
    if (!t) abort();
    r = ORACLE_CAT(ORACLE_FN, _raw)(js, len, t, n);
    for (i = 0; i < r && i < (int)n; i++) {
        out[i].type = (int)t[i].type;
        out[i].start = t[i].start;
        out[i].end = t[i].end;
        out[i].size = t[i].size;
#ifdef JSMN_PARENT_LINKS
        out[i].parent = t[i].parent;
#else
        out[i].parent = -2;
#endif
    }
    free(t);
    return r;
}

#ifdef ORACLE_DEFINE_SIZE
size_t oracle_jsmn_tok_size(void) { return sizeof(jsmntok_t); }
#endif
