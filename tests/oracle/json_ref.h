/* An independent RFC 8259 validator, written straight from the grammar as
   recursive descent (nothing shared with the library's state machine), so
   the tokenizer's strictness is checked against a second reading of the
   RFC. Test code only. */
#ifndef JSON_REF_H
#define JSON_REF_H
#include <stddef.h>

typedef struct json_ref {
    const unsigned char *s;
    size_t n, i;
    int depth, max_depth;
} json_ref;

static int json_ref_value(json_ref *r);

static void json_ref_ws(json_ref *r) {
    while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t' ||
                           r->s[r->i] == '\n' || r->s[r->i] == '\r'))
        r->i++;
}

static int json_ref_lit(json_ref *r, const char *w) {
    size_t k = 0;
    while (w[k]) {
        if (r->i + k >= r->n || r->s[r->i + k] != (unsigned char)w[k]) return 0;
        k++;
    }
    r->i += k;
    return 1;
}

static int json_ref_digits(json_ref *r) {
    size_t start = r->i;
    while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') r->i++;
    return r->i > start;
}

static int json_ref_number(json_ref *r) {
    if (r->i < r->n && r->s[r->i] == '-') r->i++;
    if (r->i >= r->n) return 0;
    if (r->s[r->i] == '0') {
        r->i++;
    } else if (r->s[r->i] >= '1' && r->s[r->i] <= '9') {
        json_ref_digits(r);
    } else {
        return 0;
    }
    if (r->i < r->n && r->s[r->i] == '.') {
        r->i++;
        if (!json_ref_digits(r)) return 0;
    }
    if (r->i < r->n && (r->s[r->i] == 'e' || r->s[r->i] == 'E')) {
        r->i++;
        if (r->i < r->n && (r->s[r->i] == '+' || r->s[r->i] == '-')) r->i++;
        if (!json_ref_digits(r)) return 0;
    }
    return 1;
}

/* Decodes one UTF-8 scalar value by arithmetic (not by table) and checks
   it is the shortest form, not a surrogate, and at most U+10FFFF. */
static int json_ref_utf8(json_ref *r) {
    unsigned c = r->s[r->i], cp, need, k;
    if (c < 0x80) { r->i++; return 1; }
    if ((c & 0xE0) == 0xC0) { need = 1; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { need = 2; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { need = 3; cp = c & 0x07; }
    else return 0;
    for (k = 1; k <= need; k++) {
        if (r->i + k >= r->n || (r->s[r->i + k] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (r->s[r->i + k] & 0x3F);
    }
    if ((need == 1 && cp < 0x80) || (need == 2 && cp < 0x800) ||
        (need == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    r->i += need + 1;
    return 1;
}

static int json_ref_string(json_ref *r) {
    r->i++; /* opening quote */
    for (;;) {
        unsigned char c;
        if (r->i >= r->n) return 0;
        c = r->s[r->i];
        if (c == '"') { r->i++; return 1; }
        if (c < 0x20) return 0;
        if (c == '\\') {
            const char *ok = "\"\\/bfnrt";
            unsigned char e;
            if (r->i + 1 >= r->n) return 0;
            e = r->s[r->i + 1];
            if (e == 'u') {
                int k;
                for (k = 0; k < 4; k++) {
                    unsigned char h;
                    if (r->i + 2 + (size_t)k >= r->n) return 0;
                    h = r->s[r->i + 2 + (size_t)k];
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') ||
                          (h >= 'A' && h <= 'F')))
                        return 0;
                }
                r->i += 6;
                continue;
            }
            while (*ok && (unsigned char)*ok != e) ok++;
            if (!*ok) return 0;
            r->i += 2;
            continue;
        }
        if (!json_ref_utf8(r)) return 0;
    }
}

static int json_ref_container(json_ref *r, int object) {
    if (++r->depth > r->max_depth) return 0;
    r->i++;
    json_ref_ws(r);
    if (r->i < r->n && r->s[r->i] == (object ? '}' : ']')) {
        r->i++;
        r->depth--;
        return 1;
    }
    for (;;) {
        if (object) {
            json_ref_ws(r);
            if (r->i >= r->n || r->s[r->i] != '"' || !json_ref_string(r)) return 0;
            json_ref_ws(r);
            if (r->i >= r->n || r->s[r->i] != ':') return 0;
            r->i++;
        }
        if (!json_ref_value(r)) return 0;
        json_ref_ws(r);
        if (r->i >= r->n) return 0;
        if (r->s[r->i] == ',') { r->i++; continue; }
        if (r->s[r->i] == (object ? '}' : ']')) {
            r->i++;
            r->depth--;
            return 1;
        }
        return 0;
    }
}

static int json_ref_value(json_ref *r) {
    json_ref_ws(r);
    if (r->i >= r->n) return 0;
    switch (r->s[r->i]) {
    case '{': return json_ref_container(r, 1);
    case '[': return json_ref_container(r, 0);
    case '"': return json_ref_string(r);
    case 't': return json_ref_lit(r, "true");
    case 'f': return json_ref_lit(r, "false");
    case 'n': return json_ref_lit(r, "null");
    default: return json_ref_number(r);
    }
}

/* 1 when s[0, n) is exactly one RFC 8259 JSON text. */
static int json_ref_valid(const char *s, size_t n, int max_depth) {
    json_ref r;
    r.s = (const unsigned char *)s;
    r.n = n;
    r.i = 0;
    r.depth = 0;
    r.max_depth = max_depth;
    if (!json_ref_value(&r)) return 0;
    json_ref_ws(&r);
    return r.i == n;
}
#endif
