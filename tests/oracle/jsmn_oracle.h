/* The oracle side of the differential JSON tests: Debian's jsmn, compiled
   once per mode (jsmn's modes are compile-time), behind one token shape. */
#ifndef JSMN_ORACLE_H
#define JSMN_ORACLE_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef struct oracle_tok {
    int type, start, end, size, parent; /* parent -2: mode has no links */
} oracle_tok;
/* Each returns jsmn_parse's result; tokens converted into out[0, n). */
int oracle_jsmn_default(const char *js, size_t len, oracle_tok *out, unsigned n);
int oracle_jsmn_parent(const char *js, size_t len, oracle_tok *out, unsigned n);
int oracle_jsmn_strict(const char *js, size_t len, oracle_tok *out, unsigned n);
/* Parse only, into a caller-kept jsmn token array (for the benchmark). */
int oracle_jsmn_default_raw(const char *js, size_t len, void *toks, unsigned n);
int oracle_jsmn_parent_raw(const char *js, size_t len, void *toks, unsigned n);
int oracle_jsmn_strict_raw(const char *js, size_t len, void *toks, unsigned n);
size_t oracle_jsmn_tok_size(void);
#ifdef __cplusplus
}
#endif
#endif
