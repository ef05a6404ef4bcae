/* The differential contract between our tokenizer, jsmn and the reference
   validator, for one input. Shared by the differential test and the fuzz
   target so both check exactly the same thing. Needs agentsandbox.h (with
   its implementation), jsmn_oracle.h and json_ref.h included first. */
#ifndef JSON_CONTRACT_H
#define JSON_CONTRACT_H

static int ours(const char *js, size_t len, asb_json_tok *t, unsigned n) {
    asb_json_parser p;
    asb_json_init(&p);
    return asb_json_parse(&p, js, len, t, n);
}

static int top_level_primitive(const char *js, size_t len) {
    size_t i = 0;
    while (i < len && (js[i] == ' ' || js[i] == '\t' || js[i] == '\n' || js[i] == '\r'))
        i++;
    return i < len && js[i] != '{' && js[i] != '[' && js[i] != '"';
}

/* Compares our tokens with one jsmn mode's; returns a description of the
   first difference, or NULL. */
static const char *same_tokens(const asb_json_tok *a, int na, const oracle_tok *b,
                               int nb, int *at) {
    int i;
    if (na != nb) {
        *at = -1;
        return "token count";
    }
    for (i = 0; i < na; i++) {
        *at = i;
        if ((int)a[i].type != b[i].type) return "type";
        if (a[i].start != b[i].start) return "start";
        if (a[i].end != b[i].end) return "end";
        if (a[i].size != b[i].size) return "size";
        if (b[i].parent != -2 && a[i].parent != b[i].parent) return "parent";
    }
    return NULL;
}

typedef int (*oracle_fn)(const char *, size_t, oracle_tok *, unsigned);

/* The whole contract for one input; returns NULL when it holds. */
static const char *check_one(const char *js, size_t len, char *why, size_t cap) {
    unsigned n = (unsigned)len + 2;
    asb_json_tok *t = (asb_json_tok *)malloc(n * sizeof *t);
    oracle_tok *o = (oracle_tok *)malloc(n * sizeof *o);
    static const oracle_fn fns[3] = {oracle_jsmn_default, oracle_jsmn_parent,
                                     oracle_jsmn_strict};
    static const char *names[3] = {"jsmn default", "jsmn parent-links",
                                   "jsmn strict"};
    int r = ours(js, len, t, n), m;
    int ref = json_ref_valid(js, len, ASB_JSON_MAX_DEPTH);
    const char *res = NULL;
    why[0] = 0;
    if ((r >= 0) != (ref != 0)) {
        snprintf(why, cap, "ours=%d but the reference validator says %s", r,
                 ref ? "valid" : "invalid");
        res = why;
    }
    for (m = 0; m < 3 && !res; m++) {
        int jr;
        /* jsmn's default mode walks back over all tokens at each close:
           quadratic, so only small inputs go through it here */
        if (m == 0 && len > (1u << 20)) continue;
        jr = fns[m](js, len, o, n);
        if (r >= 0) {
            int at = 0;
            const char *d;
            if (m == 2 && top_level_primitive(js, len) && jr == -3) continue;
            if (jr < 0) {
                snprintf(why, cap, "ours accepts (%d tokens), %s rejects (%d)", r,
                         names[m], jr);
                res = why;
                break;
            }
            d = same_tokens(t, r, o, jr, &at);
            if (d) {
                snprintf(why, cap, "%s differs from %s at token %d (ours %d, "
                         "jsmn %d tokens)", d, names[m], at, r, jr);
                res = why;
            }
        }
        /* jsmn rejecting while we accept was caught above */
    }
    /* counting mode agrees with the tokenizing mode */
    if (!res) {
        int c = ours(js, len, NULL, 0);
        if (c != r) {
            snprintf(why, cap, "counting mode gives %d, token mode %d", c, r);
            res = why;
        }
    }
    free(t);
    free(o);
    return res;
}

#endif
