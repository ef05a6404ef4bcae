/* Fuzz target: proxy URLs (asb_http_client_create with proxy_url) and
   NO_PROXY matching (asb__no_proxy_match).

   Input: up to three lines: the proxy URL, a NO_PROXY list, a request
   URL. Properties:
   - a proxy URL that is refused fails with ASB_ERR_PROXY and a message
     that never holds the password of its user info, nor any of it: the
     URL with every byte of its user info changed gives the same outcome
     and the same message;
   - an accepted one keeps "host:port" equal to what asb_url_parse reads
     from the URL once the user info (up to the authority's last '@', as
     RFC 3986 reads it) is taken out, and the Basic credentials are
     exactly that user info;
   - NO_PROXY matching agrees with a plain reference (entries split on
     ',', blanks and leading dots trimmed, "*" matches all, else the host
     or a domain suffix at a label boundary, case-insensitive), and does
     not change when the list's letters change case.

   The client's fields `proxy` and `proxy_auth` are read directly: a
   change of their form changes this file too. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include "fuzz_main.h"
#include <ctype.h>

/* The outcome of a client create with this proxy URL. */
static asb_result create(const char *url, asb_http_client **cl, asb_error *err) {
    asb_http_client_desc d;
    memset(&d, 0, sizeof d);
    d.proxy_url = url;
    d.tls.insecure_skip_verify = 1; /* no CA bundle to load per input */
    memset(err, 0, sizeof *err);
    *cl = NULL;
    return asb_http_client_create(&d, cl, err);
}

static void fuzz_proxy_url(const char *url) {
    asb_http_client *cl = NULL;
    asb_error err;
    asb_result r;
    const char *hs = strstr(url, "://"), *ae, *at = NULL, *k;
    char userinfo[1024] = "", rest[2048];
    hs = hs ? hs + 3 : url;
    /* the authority ends at the first '/', '?' or '#'; its user info at
       its last '@' */
    for (ae = hs; *ae && *ae != '/' && *ae != '?' && *ae != '#'; ae++) {}
    for (k = hs; k < ae; k++)
        if (*k == '@') at = k;
    if (at) {
        snprintf(userinfo, sizeof userinfo, "%.*s", (int)(at - hs), hs);
    }
    snprintf(rest, sizeof rest, "%.*s%s", (int)(hs - url), url, at ? at + 1 : hs);

    r = create(url, &cl, &err);
    if (at) {
        /* the same URL with every byte of its user info changed to a
           different letter (the user info is opaque: only its last '@'
           is read, and no letter is '/', '?', '#' or '@'): the same
           outcome and the same message, else the message showed some of
           the credentials. (A check that the password's text is absent
           from the message gave false alarms: a password "http:" is in
           the fixed text "only http:// ...".) */
        char *url2 = strdup(url);
        asb_http_client *cl2 = NULL;
        asb_error err2;
        size_t i;
        for (i = (size_t)(hs - url); i < (size_t)(at - url); i++) {
            char c = (char)('a' + (unsigned char)url2[i] % 26);
            if (c == url2[i]) c = c == 'z' ? 'a' : (char)(c + 1);
            url2[i] = c;
        }
        FUZZ_REQUIRE(create(url2, &cl2, &err2) == r);
        if (r != ASB_OK) FUZZ_REQUIRE(strcmp(err.message, err2.message) == 0);
        else FUZZ_REQUIRE(strcmp(cl->proxy, cl2->proxy) == 0);
        asb_http_client_free(cl2);
        free(url2);
    }
    if (r != ASB_OK) {
        FUZZ_REQUIRE(r == ASB_ERR_PROXY && err.code == r && err.message[0]);
        FUZZ_REQUIRE(cl == NULL);
        return;
    }
    {
        asb_url u;
        char want[600];
        FUZZ_REQUIRE(cl->proxy != NULL);
        FUZZ_REQUIRE(asb_url_parse(rest, strlen(rest), &u, NULL) == ASB_OK);
        snprintf(want, sizeof want, "%.*s:%d", (int)u.host.len, u.host.ptr, u.port);
        FUZZ_REQUIRE(strcmp(cl->proxy, want) == 0);
        if (at) {
            asb_buf b;
            asb_buf_init(&b, NULL);
            FUZZ_REQUIRE(cl->proxy_auth != NULL);
            FUZZ_REQUIRE(asb_base64_decode(cl->proxy_auth, strlen(cl->proxy_auth), &b, NULL) ==
                         ASB_OK);
            FUZZ_REQUIRE(b.len == strlen(userinfo) &&
                         (b.len == 0 || memcmp(b.ptr, userinfo, b.len) == 0));
            asb_buf_free(&b);
        } else {
            FUZZ_REQUIRE(cl->proxy_auth == NULL);
        }
    }
    asb_http_client_free(cl);
}

static int ref_no_proxy(const char *list, const asb_url *u) {
    const char *p = list;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p), i;
        const char *s = p;
        while (n && (*s == ' ' || *s == '.')) {
            s++;
            n--;
        }
        while (n && s[n - 1] == ' ') n--;
        if (n == 1 && *s == '*') return 1;
        if (n && n <= u->host.len) {
            const char *tail = u->host.ptr + u->host.len - n;
            int same = 1;
            for (i = 0; i < n; i++)
                if (tolower((unsigned char)tail[i]) != tolower((unsigned char)s[i])) same = 0;
            if (same && (n == u->host.len || tail[-1] == '.')) return 1;
        }
        if (!e) return 0;
        p = e + 1;
    }
}

static void fuzz_no_proxy(const char *list, const char *target) {
    asb_url u;
    char *flip;
    size_t i, n = strlen(list);
    int m;
    if (asb_url_parse(target, strlen(target), &u, NULL) != ASB_OK) return;
    m = asb__no_proxy_match(list, &u);
    FUZZ_REQUIRE(m == 0 || m == 1);
    FUZZ_REQUIRE(m == ref_no_proxy(list, &u));
    flip = (char *)malloc(n + 1);
    for (i = 0; i <= n; i++) {
        unsigned char c = (unsigned char)list[i];
        flip[i] = (char)(isupper(c) ? tolower(c) : islower(c) ? toupper(c) : c);
    }
    FUZZ_REQUIRE(asb__no_proxy_match(flip, &u) == m);
    free(flip);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s, *parts[3] = {NULL, NULL, NULL};
    int i, np = 0;
    char *p;
    if (size > 1000) return 0;
    s = (char *)malloc(size + 1);
    if (size) memcpy(s, data, size);
    s[size] = '\0';
    /* NULs end the C strings the API takes, as they would for a caller */
    for (p = s, np = 0; np < 3; np++) {
        char *nl = strchr(p, '\n');
        parts[np] = p;
        if (!nl) {
            np++;
            break;
        }
        *nl = '\0';
        p = nl + 1;
    }
    for (i = np; i < 3; i++) parts[i] = (char *)"";
    if (parts[0][0]) fuzz_proxy_url(parts[0]);
    fuzz_no_proxy(parts[1], parts[2][0] ? parts[2] : parts[0]);
    free(s);
    return 0;
}
