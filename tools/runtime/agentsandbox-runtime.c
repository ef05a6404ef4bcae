/* agentsandbox-runtime: the in-pod runtime server a sandbox image runs.

   It answers the calls the agentsandbox SDKs make (PROTOCOL.md section 5,
   compatible with the python-runtime of agent-sandbox v0.4.x):

     GET  /                   health: {"status":"ok","message":"Sandbox Runtime is active."}
     POST /execute            {"command": "...", "timeout_seconds": N} -> {"stdout","stderr","exit_code"}
                              (+ "timed_out": true when N ended it; N optional)
     POST /upload             multipart/form-data, part "file", filename = destination
     GET  /download/<path>    raw bytes
     GET  /list/<path>        [{"name","size","type","mod_time"}]
     GET  /exists/<path>      {"path","exists"}

   One static binary, no shell, no interpreter: a sandbox image needs nothing
   else. Build: cc -O2 -static -pthread agentsandbox-runtime.c (Linux only: it
   uses O_PATH, sendfile, accept4 and posix_spawn_file_actions_addchdir_np).

   Design, in the order a request flows:
     >>config    flags and environment, --help
     >>bytes     growable buffers, JSON string escaping (invalid UTF-8 -> U+FFFD)
     >>http      request-head parser, percent decoding, chunked decoder
     >>multipart streaming multipart/form-data parser
     >>json      strict JSON reader for the /execute body
     >>shlex     command splitting with Python shlex.split's POSIX rules
     >>paths     confinement: every path walked with O_NOFOLLOW from the base dir
     >>exec      posix_spawn, pipes drained with poll, timeout kills the group
     >>handlers  one function per endpoint
     >>server    one thread per connection, reaper/signal thread, shutdown

   The parsers (>>http, >>multipart, >>json, >>shlex) are pure functions over
   bytes so tests/fuzz_request.c can drive them under libFuzzer; define
   RT_NO_MAIN to include this file without main().

   Why threads and not an event loop: every request is short except /execute
   and large transfers, which block on a child or the disk anyway. A thread
   per connection keeps each handler straight-line code, and a 256 KiB stack
   per thread keeps 100 concurrent clients within a few MiB of RSS. The
   price is that a connection holds a thread while its client sends
   nothing, which is what load shedding in >>server answers: slots of
   connections waiting for their clients are given to new ones, so no
   number of idle or slow clients locks the others out. */

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define RT_VERSION "0.1.0"

/* >>config ================================================================ */

struct rt_config {
    const char *listen_addr;         /* --listen, default 0.0.0.0 */
    int port;                        /* --port, default 8888; 0 picks a free one */
    const char *base_dir;            /* --base-dir / SANDBOX_BASE_DIR, default /app */
    double exec_timeout_s;           /* --exec-timeout / SANDBOX_EXEC_TIMEOUT_SECONDS, default 300 */
    unsigned long long max_body;     /* --max-body-bytes: upload bodies, default 16 GiB */
    size_t max_json;                 /* --max-json-bytes: /execute bodies, default 4 MiB */
    size_t max_header;               /* --max-header-bytes: request line + headers, default 16 KiB */
    size_t max_output;               /* --max-output-bytes: per stream of /execute, default 256 MiB */
    int max_connections;             /* --max-connections, default 512 */
    int idle_timeout_s;              /* --idle-timeout: a read or write that stalls this long ends the connection, default 60 */
    int header_timeout_s;            /* --header-timeout: a whole request head, default 30 */
    int shutdown_grace_s;            /* --shutdown-grace: SIGTERM waits this long for requests, default 10 */
    int access_log;                  /* --access-log: one stderr line per request */
};

static struct rt_config g_cfg;

static void rt_usage(FILE *f)
{
    fprintf(f,
        "usage: agentsandbox-runtime [options]\n"
        "\n"
        "Serves the sandbox runtime API (/, /execute, /upload, /download, /list, /exists).\n"
        "\n"
        "  --listen ADDR            IPv4 or IPv6 literal to bind (default 0.0.0.0)\n"
        "  --port N                 TCP port (default 8888; 0 = any free port, printed at start)\n"
        "  --base-dir DIR           directory every path is confined to; commands run there\n"
        "                           (env SANDBOX_BASE_DIR, default /app)\n"
        "  --exec-timeout SECONDS   per-command limit; the command's process group is killed\n"
        "                           (env SANDBOX_EXEC_TIMEOUT_SECONDS, default 300)\n"
        "  --max-body-bytes N       largest upload body (default 17179869184 = 16 GiB) -> 413\n"
        "  --max-json-bytes N       largest /execute body (default 4194304) -> 413\n"
        "  --max-header-bytes N     largest request head (default 16384) -> 431\n"
        "  --max-output-bytes N     stdout and stderr are each cut after N bytes, with a note\n"
        "                           appended (default 268435456)\n"
        "  --max-connections N      connections served at once; past it, one waiting for its\n"
        "                           client is closed to make room (default 512)\n"
        "  --idle-timeout SECONDS   a stalled read or write ends the connection (default 60)\n"
        "  --header-timeout SECONDS a request head must arrive within this (default 30)\n"
        "  --shutdown-grace SECONDS on SIGTERM, wait this long for running requests (default 10)\n"
        "  --access-log             log one line per request to stderr\n"
        "  --help, --version\n"
        "\n"
        "Flags override the environment. Output that is not valid UTF-8 is returned with\n"
        "U+FFFD in place of each invalid byte.\n");
}

static int rt_parse_ull(const char *s, unsigned long long *out)
{
    char *end;
    unsigned long long v;
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

static int rt_parse_int_in(const char *s, long lo, long hi, int *out)
{
    unsigned long long v;
    if (rt_parse_ull(s, &v) || v < (unsigned long long)lo || v > (unsigned long long)hi)
        return -1;
    *out = (int)v;
    return 0;
}

/* --exec-timeout: a plain decimal number of seconds, finite and above 0
   (no upper bound: the reference takes any, and the waits clamp it). */
static int rt_parse_seconds(const char *s, double *out)
{
    char *end;
    double v;
    if (!s || !*s || !strchr("0123456789.", *s))
        return -1;
    errno = 0;
    v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v <= 0)
        return -1;
    *out = v;
    return 0;
}

static int rt_parse_py_float(const char *s, double *out);

/* The environment value as Python's %r would show it, enough to see what
   is wrong with it: printable ASCII as is, other bytes as \xNN. */
static void rt_quote_for_log(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    out[n++] = '\'';
    for (; *s && n + 8 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch >= 0x20 && ch < 0x7f && ch != '\\' && ch != '\'')
            out[n++] = (char)ch;
        else
            n += (size_t)snprintf(out + n, cap - n, "\\x%02x", ch);
    }
    if (*s && n + 4 < cap) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n++] = '\'';
    out[n] = 0;
}

/* Returns 0 to run, 1 to exit successfully (--help), -1 on a usage error. */
static int rt_config_load(int argc, char **argv, struct rt_config *cfg)
{
    const char *env;
    int i;
    cfg->listen_addr = "0.0.0.0";
    cfg->port = 8888;
    cfg->base_dir = "/app";
    cfg->exec_timeout_s = 300;
    cfg->max_body = 16ULL << 30;
    cfg->max_json = 4u << 20;
    cfg->max_header = 16u << 10;
    cfg->max_output = 256u << 20;
    cfg->max_connections = 512;
    cfg->idle_timeout_s = 60;
    cfg->header_timeout_s = 30;
    cfg->shutdown_grace_s = 10;
    cfg->access_log = 0;

    env = getenv("SANDBOX_BASE_DIR");
    if (env && *env)
        cfg->base_dir = env;
    /* As the reference does (see rt_parse_py_float): a value that is not
       a finite number above 0 is a warning and the default, not an exit;
       an empty value is such a value. */
    env = getenv("SANDBOX_EXEC_TIMEOUT_SECONDS");
    if (env) {
        double v;
        if (!rt_parse_py_float(env, &v) && isfinite(v) && v > 0) {
            cfg->exec_timeout_s = v;
        } else {
            char shown[200];
            rt_quote_for_log(env, shown, sizeof shown);
            fprintf(stderr, "agentsandbox-runtime: warning: ignoring invalid SANDBOX_EXEC_TIMEOUT_SECONDS=%s; "
                    "using the default of 300 seconds\n", shown);
        }
    }

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        unsigned long long n;
        int bad = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            rt_usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--version")) {
            printf("agentsandbox-runtime %s\n", RT_VERSION);
            return 1;
        }
        if (!strcmp(a, "--access-log")) {
            cfg->access_log = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "agentsandbox-runtime: unknown option or missing value: %s (see --help)\n", a);
            return -1;
        }
        if (!strcmp(a, "--listen"))
            cfg->listen_addr = v;
        else if (!strcmp(a, "--port"))
            bad = rt_parse_int_in(v, 0, 65535, &cfg->port);
        else if (!strcmp(a, "--base-dir"))
            cfg->base_dir = v;
        else if (!strcmp(a, "--exec-timeout"))
            bad = rt_parse_seconds(v, &cfg->exec_timeout_s);
        else if (!strcmp(a, "--max-body-bytes"))
            bad = rt_parse_ull(v, &cfg->max_body);
        else if (!strcmp(a, "--max-json-bytes")) {
            bad = rt_parse_ull(v, &n) || n == 0 || n > (1ULL << 30);
            cfg->max_json = (size_t)n;
        } else if (!strcmp(a, "--max-header-bytes")) {
            bad = rt_parse_ull(v, &n) || n < 256 || n > (1ULL << 20);
            cfg->max_header = (size_t)n;
        } else if (!strcmp(a, "--max-output-bytes")) {
            bad = rt_parse_ull(v, &n) || n > (1ULL << 34);
            cfg->max_output = (size_t)n;
        } else if (!strcmp(a, "--max-connections"))
            bad = rt_parse_int_in(v, 1, 100000, &cfg->max_connections);
        else if (!strcmp(a, "--idle-timeout"))
            bad = rt_parse_int_in(v, 1, 86400, &cfg->idle_timeout_s);
        else if (!strcmp(a, "--header-timeout"))
            bad = rt_parse_int_in(v, 1, 86400, &cfg->header_timeout_s);
        else if (!strcmp(a, "--shutdown-grace"))
            bad = rt_parse_int_in(v, 0, 86400, &cfg->shutdown_grace_s);
        else {
            fprintf(stderr, "agentsandbox-runtime: unknown option %s (see --help)\n", a);
            return -1;
        }
        if (bad) {
            fprintf(stderr, "agentsandbox-runtime: bad value for %s: %s (see --help)\n", a, v);
            return -1;
        }
        i++;
    }
    return 0;
}

static void rt_log(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int n = snprintf(line, sizeof line, "agentsandbox-runtime: ");
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    /* One write per line so lines from different threads do not interleave. */
    n = (int)strlen(line);
    line[n++] = '\n';
    if (write(2, line, (size_t)n) < 0) {
        /* Nowhere left to report a failing stderr. */
    }
}

static double rt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* >>bytes ================================================================= */

struct rt_buf {
    char *p;
    size_t len, cap;
};

/* Returns 0, or -1 when memory runs out (the buffer stays valid). */
static int rt_buf_reserve(struct rt_buf *b, size_t extra)
{
    size_t want, cap;
    char *np;
    if (extra > SIZE_MAX - b->len - 1)
        return -1;
    want = b->len + extra + 1;
    if (want <= b->cap)
        return 0;
    cap = b->cap ? b->cap : 256;
    while (cap < want)
        cap = cap > SIZE_MAX / 2 ? want : cap * 2;
    np = realloc(b->p, cap);
    if (!np)
        return -1;
    b->p = np;
    b->cap = cap;
    return 0;
}

static int rt_buf_add(struct rt_buf *b, const void *p, size_t n)
{
    if (rt_buf_reserve(b, n))
        return -1;
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

static int rt_buf_str(struct rt_buf *b, const char *s)
{
    return rt_buf_add(b, s, strlen(s));
}

static int rt_buf_printf(struct rt_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || rt_buf_reserve(b, (size_t)n))
        return -1;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

static void rt_buf_free(struct rt_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* Length of the well-formed UTF-8 sequence at p (1..4), or 0 if the bytes
   there are not one (overlong forms, surrogates and > U+10FFFF included). */
static size_t rt_utf8_len(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        return n >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        return n >= 3 && p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        return n >= 4 && p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 && (p[3] & 0xC0) == 0x80 ? 4 : 0;
    }
    return 0;
}

/* SANDBOX_EXEC_TIMEOUT_SECONDS is read the way the reference runtime reads
   it (agent-sandbox's examples/python-runtime-sandbox/main.py,
   _get_exec_timeout_seconds): whatever Python's float() accepts and is a
   finite number above 0 is the timeout; anything else gets a warning and
   300, so a misconfigured pod still serves instead of crash-looping.
   float() is more liberal than strtod, and the differences are all here:
   surrounding whitespace (ASCII " \t\n\v\f\r" and Unicode white space, but
   not \x1c-\x1f), decimal digits of any script (Unicode category Nd, as of
   Unicode 16.0, the version of Python 3.14 that upstream's image runs),
   "_" between two digits, "inf"/"infinity"/"nan" in any case; no hex, no
   trailing junk. */

/* The ZERO of every run of ten Nd digits (UnicodeData.txt 16.0). */
static const uint32_t rt_nd_zeros[] = {
    0x30, 0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6,
    0xD66, 0xDE6, 0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0,
    0x1A80, 0x1A90, 0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0,
    0xA9F0, 0xAA50, 0xABF0, 0xFF10, 0x104A0, 0x10D30, 0x10D40, 0x11066, 0x110F0,
    0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650, 0x116C0, 0x116D0, 0x116DA,
    0x11730, 0x118E0, 0x11950, 0x11BF0, 0x11C50, 0x11D50, 0x11DA0, 0x11F50, 0x16130,
    0x16A60, 0x16AC0, 0x16B50, 0x16D70, 0x1CCF0, 0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC,
    0x1D7F6, 0x1E140, 0x1E2F0, 0x1E4F0, 0x1E5F1, 0x1E950, 0x1FBF0,
};

/* Python's str.isspace() above ASCII (bidi class WS, B or S, or Zs). */
static int rt_unicode_space(uint32_t c)
{
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Next code point of strict UTF-8 (what Python's decoder accepts: no
   overlongs, no surrogates, nothing above U+10FFFF); -1 on a bad sequence. */
static long rt_utf8_next(const unsigned char **pp, const unsigned char *end)
{
    const unsigned char *p = *pp;
    size_t n = rt_utf8_len(p, (size_t)(end - p));
    uint32_t c;
    if (n == 0)
        return -1;
    if (n == 1)
        c = p[0];
    else if (n == 2)
        c = (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
    else if (n == 3)
        c = (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
    else
        c = (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 | (uint32_t)(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
    *pp = p + n;
    return (long)c;
}

/* 0 with *out set when Python's float(s) returns a value (which may be
   inf, nan, 0 or negative), -1 where it raises ValueError. */
static int rt_parse_py_float(const char *s, double *out)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + strlen(s);
    char *a = malloc((size_t)(end - p) + 1), *b, *e, *stop;
    size_t n = 0;
    int ok = 0;
    if (!a)
        return -1;
    /* Python first maps every code point to ASCII: white space to ' ',
       a decimal digit of any script to '0'-'9', ASCII below 127 kept;
       anything else cannot be part of a number. */
    while (p < end) {
        long c = rt_utf8_next(&p, end);
        if (c < 0)
            goto done;
        if (c < 127) {
            a[n++] = (char)c;
        } else if (rt_unicode_space((uint32_t)c)) {
            a[n++] = ' ';
        } else {
            size_t i, found = 0;
            for (i = 0; i < sizeof rt_nd_zeros / sizeof rt_nd_zeros[0]; i++)
                if ((uint32_t)c >= rt_nd_zeros[i] && (uint32_t)c - rt_nd_zeros[i] < 10) {
                    a[n++] = (char)('0' + ((uint32_t)c - rt_nd_zeros[i]));
                    found = 1;
                    break;
                }
            if (!found)
                goto done;
        }
    }
    a[n] = 0;
    /* "_" only between two ASCII digits, checked before the white space is
       stripped (as Python does), then dropped. */
    {
        char prev = 0;
        size_t w = 0;
        for (size_t i = 0; i < n; i++) {
            char ch = a[i];
            if (ch == '_') {
                if (!(prev >= '0' && prev <= '9'))
                    goto done;
            } else {
                if (prev == '_' && !(ch >= '0' && ch <= '9'))
                    goto done;
                a[w++] = ch;
            }
            prev = ch;
        }
        if (prev == '_')
            goto done;
        a[w] = 0;
        n = w;
    }
    b = a;
    e = a + n;
    while (b < e && strchr(" \t\n\v\f\r", *b) && *b)
        b++;
    while (e > b && strchr(" \t\n\v\f\r", e[-1]) && e[-1])
        e--;
    if (b == e)
        goto done;
    *e = 0;
    {
        /* strtod would also take hex, "nan(...)" and "infinit": only
           Python's grammar gets there. */
        const char *q = b + (*b == '+' || *b == '-');
        if (!strcasecmp(q, "inf") || !strcasecmp(q, "infinity") || !strcasecmp(q, "nan")) {
            ok = 1;
        } else {
            int digits = 0;
            while (*q >= '0' && *q <= '9')
                q++, digits++;
            if (*q == '.')
                for (q++; *q >= '0' && *q <= '9'; q++)
                    digits++;
            if (digits && (*q == 'e' || *q == 'E')) {
                q++;
                q += *q == '+' || *q == '-';
                if (*q >= '0' && *q <= '9')
                    while (*q >= '0' && *q <= '9')
                        q++;
                else
                    q = "x"; /* an exponent without digits */
            }
            ok = digits && !*q;
        }
    }
    if (ok) {
        /* The C locale's decimal point is '.', as Python's own parser;
           strtod gives inf on overflow and 0 on underflow, as float() does. */
        *out = strtod(b, &stop);
        ok = *stop == 0;
    }
done:
    free(a);
    return ok ? 0 : -1;
}

/* Escapes in[*pos..n) as JSON string content into out (cap >= 16) until out
   is nearly full; advances *pos and returns the bytes written. Escaping is
   what Python's json.dumps(ensure_ascii=False) does, so responses look like
   the reference's; each byte of invalid UTF-8 becomes U+FFFD so the JSON
   stays valid. */
static size_t rt_json_escape_step(const unsigned char *in, size_t n, size_t *pos, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t i = *pos, o = 0;
    while (i < n && o + 6 <= cap) {
        unsigned c = in[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            out[o++] = (char)c;
            i++;
        } else if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
            i++;
        } else if (c < 0x20) {
            const char *short_esc = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t"
                                  : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
            if (short_esc) {
                out[o++] = short_esc[0];
                out[o++] = short_esc[1];
            } else {
                memcpy(out + o, "\\u00", 4);
                out[o + 4] = hex[c >> 4];
                out[o + 5] = hex[c & 15];
                o += 6;
            }
            i++;
        } else {
            size_t k = rt_utf8_len(in + i, n - i);
            if (k) {
                memcpy(out + o, in + i, k);
                o += k;
                i += k;
            } else {
                memcpy(out + o, "\xEF\xBF\xBD", 3);
                o += 3;
                i++;
            }
        }
    }
    *pos = i;
    return o;
}

static int rt_buf_json_string(struct rt_buf *b, const void *s, size_t n)
{
    char tmp[4096];
    size_t pos = 0;
    if (rt_buf_add(b, "\"", 1))
        return -1;
    while (pos < n) {
        size_t w = rt_json_escape_step(s, n, &pos, tmp, sizeof tmp);
        if (rt_buf_add(b, tmp, w))
            return -1;
    }
    return rt_buf_add(b, "\"", 1);
}

static size_t rt_json_escaped_len(const void *s, size_t n)
{
    char tmp[4096];
    size_t pos = 0, total = 0;
    while (pos < n)
        total += rt_json_escape_step(s, n, &pos, tmp, sizeof tmp);
    return total;
}

/* >>http ================================================================== */

/* What the handlers need from a request head. Pointers are views into the
   head bytes and live as long as they do. */
struct rt_request {
    const char *method;
    size_t method_len;
    const char *target;
    size_t target_len;
    int minor_version;              /* HTTP/1.<minor>: 0 or 1 */
    int has_content_length;
    unsigned long long content_length;
    int chunked;                    /* Transfer-Encoding: chunked */
    int keep_alive;
    int expect_continue;
    const char *content_type;       /* NULL when absent */
    size_t content_type_len;
    const char *traceparent;        /* W3C trace context, for the access
                                       log (NULL when absent) */
    size_t traceparent_len;
    const char *error;              /* why rt_parse_head refused it */
};

static int rt_head_error(struct rt_request *req, int status, const char *why)
{
    req->error = why;
    return status;
}

static int rt_is_tchar(unsigned c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", (int)c) != NULL);
}

static int rt_ieq(const char *a, size_t alen, const char *lit)
{
    size_t n = strlen(lit), i;
    if (alen != n)
        return 0;
    for (i = 0; i < n; i++) {
        unsigned char x = (unsigned char)a[i], y = (unsigned char)lit[i];
        if (x >= 'A' && x <= 'Z')
            x = (unsigned char)(x + 32);
        if (x != y)
            return 0;
    }
    return 1;
}

/* Calls fn for each comma-separated, trimmed element of a header value. */
static int rt_each_token(const char *v, size_t n, int (*fn)(const char *, size_t, void *), void *ctx)
{
    size_t i = 0;
    while (i <= n) {
        size_t s = i, e;
        while (i < n && v[i] != ',')
            i++;
        e = i;
        while (s < e && (v[s] == ' ' || v[s] == '\t'))
            s++;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (e > s) {
            int r = fn(v + s, e - s, ctx);
            if (r)
                return r;
        }
        i++;
    }
    return 0;
}

static int rt_connection_token(const char *t, size_t n, void *ctx)
{
    struct rt_request *req = ctx;
    if (rt_ieq(t, n, "close"))
        req->keep_alive = 0;
    else if (rt_ieq(t, n, "keep-alive"))
        req->keep_alive = 1;
    return 0;
}

/* Parses a request head: the bytes from the request line through the blank
   line (CRLF CRLF). Returns 0, or the HTTP status to answer with: 400 for
   malformed syntax, 501 for a transfer coding we do not do, 505 for a
   version other than 1.0/1.1, 417 for an unknown expectation. Strict on
   purpose: every line ends in CRLF, no obsolete line folding, no control
   bytes, one unambiguous body length (RFC 9112 section 6.3). */
static int rt_parse_head(const char *head, size_t len, struct rt_request *req)
{
    const char *p = head, *end = head + len, *line_end;
    const char *sp1, *sp2;
    int saw_te = 0, saw_host = 0, seen_headers = 0;

    memset(req, 0, sizeof *req);
    if (len < 4 || memcmp(end - 4, "\r\n\r\n", 4))
        return rt_head_error(req, 400, "the head does not end with a blank line");
    line_end = memchr(p, '\r', len);
    if (!line_end || line_end[1] != '\n')
        return rt_head_error(req, 400, "the request line does not end with CRLF");

    /* request-line = method SP request-target SP HTTP-version */
    sp1 = memchr(p, ' ', (size_t)(line_end - p));
    if (!sp1 || sp1 == p)
        return rt_head_error(req, 400, "malformed request line");
    sp2 = memchr(sp1 + 1, ' ', (size_t)(line_end - sp1 - 1));
    if (!sp2 || sp2 == sp1 + 1)
        return rt_head_error(req, 400, "malformed request line");
    for (const char *q = p; q < sp1; q++)
        if (!rt_is_tchar((unsigned char)*q))
            return rt_head_error(req, 400, "bad character in the method");
    for (const char *q = sp1 + 1; q < sp2; q++)
        if ((unsigned char)*q <= 0x20 || (unsigned char)*q >= 0x7F)
            return rt_head_error(req, 400, "bad character in the request target");
    if (line_end - sp2 - 1 != 8 || memcmp(sp2 + 1, "HTTP/", 5) ||
        sp2[6] < '0' || sp2[6] > '9' || sp2[7] != '.' || sp2[8] < '0' || sp2[8] > '9')
        return rt_head_error(req, 400, "malformed HTTP version");
    if (sp2[6] != '1' || (sp2[8] != '0' && sp2[8] != '1'))
        return rt_head_error(req, 505, "HTTP version not supported (1.0 and 1.1 are)");
    req->method = p;
    req->method_len = (size_t)(sp1 - p);
    req->target = sp1 + 1;
    req->target_len = (size_t)(sp2 - sp1 - 1);
    req->minor_version = sp2[8] - '0';
    req->keep_alive = req->minor_version == 1;
    if (req->target[0] != '/')
        return rt_head_error(req, 400, "the request target must start with /"); /* we are no proxy */

    p = line_end + 2;
    while (p < end) {
        const char *colon, *v, *ve;
        size_t name_len;
        line_end = memchr(p, '\r', (size_t)(end - p));
        if (!line_end || line_end + 1 >= end || line_end[1] != '\n')
            return rt_head_error(req, 400, "a header line does not end with CRLF");
        if (line_end == p)
            break; /* the blank line */
        if (++seen_headers > 100)
            return rt_head_error(req, 431, "more than 100 header fields");
        colon = memchr(p, ':', (size_t)(line_end - p));
        if (!colon || colon == p)
            return rt_head_error(req, 400, "malformed header line (no name or colon)");
        for (const char *q = p; q < colon; q++)
            if (!rt_is_tchar((unsigned char)*q))
                return rt_head_error(req, 400, "bad character in a header name");
        name_len = (size_t)(colon - p);
        v = colon + 1;
        ve = line_end;
        for (const char *q = v; q < ve; q++) {
            unsigned c = (unsigned char)*q;
            if ((c < 0x20 && c != '\t') || c == 0x7F)
                return rt_head_error(req, 400, "control character in a header value"); /* or a bare LF */
        }
        while (v < ve && (*v == ' ' || *v == '\t'))
            v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;

        if (rt_ieq(p, name_len, "content-length")) {
            unsigned long long n = 0;
            if (v == ve)
                return rt_head_error(req, 400, "empty Content-Length");
            for (const char *q = v; q < ve; q++) {
                if (*q < '0' || *q > '9' || n > (ULLONG_MAX - 9) / 10)
                    return rt_head_error(req, 400, "invalid Content-Length");
                n = n * 10 + (unsigned)(*q - '0');
            }
            if (req->has_content_length && n != req->content_length)
                return rt_head_error(req, 400, "conflicting Content-Length headers");
            req->has_content_length = 1;
            req->content_length = n;
        } else if (rt_ieq(p, name_len, "traceparent")) {
            req->traceparent = v;
            req->traceparent_len = (size_t)(ve - v);
        } else if (rt_ieq(p, name_len, "transfer-encoding")) {
            /* Only a single "chunked" coding: anything else could mean the
               body length is not what we think it is. */
            if (saw_te || !rt_ieq(v, (size_t)(ve - v), "chunked"))
                return saw_te ? rt_head_error(req, 400, "repeated Transfer-Encoding header")
                              : rt_head_error(req, 501, "only Transfer-Encoding: chunked is supported");
            saw_te = 1;
            req->chunked = 1;
        } else if (rt_ieq(p, name_len, "connection")) {
            rt_each_token(v, (size_t)(ve - v), rt_connection_token, req);
        } else if (rt_ieq(p, name_len, "expect")) {
            if (!rt_ieq(v, (size_t)(ve - v), "100-continue"))
                return rt_head_error(req, 417, "only Expect: 100-continue is supported");
            req->expect_continue = req->minor_version == 1;
        } else if (rt_ieq(p, name_len, "host")) {
            if (saw_host)
                return rt_head_error(req, 400, "repeated Host header");
            saw_host = 1;
        } else if (rt_ieq(p, name_len, "content-type")) {
            if (req->content_type)
                return rt_head_error(req, 400, "repeated Content-Type header");
            req->content_type = v;
            req->content_type_len = (size_t)(ve - v);
        }
        p = line_end + 2;
    }
    if (req->minor_version == 1 && !saw_host)
        return rt_head_error(req, 400, "missing Host header (required in HTTP/1.1)");
    /* The request-smuggling shape: refuse rather than guess the length. */
    if (req->chunked && req->has_content_length)
        return rt_head_error(req, 400, "both Content-Length and Transfer-Encoding");
    if (req->chunked && req->minor_version == 0)
        return rt_head_error(req, 400, "chunked transfer coding needs HTTP/1.1");
    return 0;
}

static int rt_hexval(unsigned c)
{
    if (c >= '0' && c <= '9')
        return (int)(c - '0');
    if (c >= 'a' && c <= 'f')
        return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F')
        return (int)(c - 'A' + 10);
    return -1;
}

/* Decodes %XX escapes; out must hold n bytes. Returns the decoded length,
   or -1 for a malformed escape (answered with 400, not guessed at). */
static long rt_percent_decode(const char *in, size_t n, char *out)
{
    size_t i, o = 0;
    for (i = 0; i < n; i++) {
        if (in[i] == '%') {
            int hi, lo;
            if (i + 2 >= n)
                return -1;
            hi = rt_hexval((unsigned char)in[i + 1]);
            lo = rt_hexval((unsigned char)in[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            out[o++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[o++] = in[i];
        }
    }
    return (long)o;
}

/* Chunked transfer coding (RFC 9112 section 7.1) as a byte-wise state
   machine, so chunk framing may be split anywhere across reads. */
enum {
    RT_CH_SIZE, RT_CH_EXT, RT_CH_SIZE_LF, RT_CH_DATA, RT_CH_DATA_CR, RT_CH_DATA_LF,
    RT_CH_TRAILER_START, RT_CH_TRAILER_LINE, RT_CH_TRAILER_LF, RT_CH_END_LF, RT_CH_DONE
};
enum { RT_CHUNK_NEED, RT_CHUNK_DATA, RT_CHUNK_END, RT_CHUNK_BAD };

struct rt_chunked {
    int state;
    int digits;
    unsigned long long size;
    size_t aux;                     /* bytes of chunk extension or trailer seen */
};

/* Consumes framing from in[0..n). Returns RT_CHUNK_DATA with one span of
   body bytes at in[*data_off], *data_len long; RT_CHUNK_NEED when all of in
   was framing; RT_CHUNK_END after the last chunk and trailers; RT_CHUNK_BAD
   for malformed framing. *used is always how much of in was consumed. */
static int rt_chunked_step(struct rt_chunked *st, const unsigned char *in, size_t n,
                           size_t *used, size_t *data_off, size_t *data_len)
{
    size_t i = 0;
    *data_off = *data_len = 0;
    while (i < n) {
        unsigned c = in[i];
        switch (st->state) {
        case RT_CH_SIZE: {
            int h = rt_hexval(c);
            if (h >= 0) {
                if (st->size >> 56)
                    goto bad;
                st->size = st->size * 16 + (unsigned)h;
                st->digits++;
            } else if (st->digits && (c == ';' || c == ' ' || c == '\t')) {
                st->state = RT_CH_EXT;
                st->aux = 0;
            } else if (st->digits && c == '\r') {
                st->state = RT_CH_SIZE_LF;
            } else {
                goto bad;
            }
            i++;
            break;
        }
        case RT_CH_EXT:
            if (c == '\r')
                st->state = RT_CH_SIZE_LF;
            else if ((c < 0x20 && c != '\t') || c == 0x7F || ++st->aux > 1024)
                goto bad;
            i++;
            break;
        case RT_CH_SIZE_LF:
            if (c != '\n')
                goto bad;
            st->state = st->size ? RT_CH_DATA : RT_CH_TRAILER_START;
            st->aux = 0;
            i++;
            break;
        case RT_CH_DATA: {
            size_t take = n - i;
            if ((unsigned long long)take > st->size)
                take = (size_t)st->size;
            st->size -= take;
            if (!st->size)
                st->state = RT_CH_DATA_CR;
            *data_off = i;
            *data_len = take;
            *used = i + take;
            return RT_CHUNK_DATA;
        }
        case RT_CH_DATA_CR:
            if (c != '\r')
                goto bad;
            st->state = RT_CH_DATA_LF;
            i++;
            break;
        case RT_CH_DATA_LF:
            if (c != '\n')
                goto bad;
            st->state = RT_CH_SIZE;
            st->digits = 0;
            st->size = 0;
            i++;
            break;
        case RT_CH_TRAILER_START:
            if (c == '\r')
                st->state = RT_CH_END_LF;
            else if (c < 0x20 || c == 0x7F)
                goto bad;
            else
                st->state = RT_CH_TRAILER_LINE;
            i++;
            break;
        case RT_CH_TRAILER_LINE:
            if (++st->aux > 8192)
                goto bad;
            if (c == '\r')
                st->state = RT_CH_TRAILER_LF;
            else if ((c < 0x20 && c != '\t') || c == 0x7F)
                goto bad;
            i++;
            break;
        case RT_CH_TRAILER_LF:
            if (c != '\n')
                goto bad;
            st->state = RT_CH_TRAILER_START;
            i++;
            break;
        case RT_CH_END_LF:
            if (c != '\n')
                goto bad;
            st->state = RT_CH_DONE;
            *used = i + 1;
            return RT_CHUNK_END;
        default:
            goto bad;
        }
    }
    *used = i;
    return RT_CHUNK_NEED;
bad:
    *used = i;
    return RT_CHUNK_BAD;
}

/* >>multipart ============================================================= */

/* Parameters are parsed as in RFC 7578 / RFC 2183: token or quoted-string
   values; in quoted strings only \\ and \" are escapes (the reference
   runtime's decoding; agentsandbox.h sends `"` and `\` that way). filename*= is not supported; browsers and the SDKs
   send plain filename=. */
#define RT_MP_NAME_MAX 256
#define RT_MP_FILENAME_MAX 4096

struct rt_part_info {
    char name[RT_MP_NAME_MAX + 1];
    size_t name_len;
    char filename[RT_MP_FILENAME_MAX + 1];
    size_t filename_len;
    int has_name, has_filename;
};

struct rt_multipart_cb {
    int (*begin)(void *ctx, const struct rt_part_info *part); /* nonzero stops */
    int (*data)(void *ctx, const char *p, size_t n);
    int (*end)(void *ctx);
    void *ctx;
};

enum { RT_MP_PREAMBLE, RT_MP_AFTER_DELIM, RT_MP_HEADERS, RT_MP_BODY, RT_MP_EPILOGUE };

#define RT_MP_BUF (64u * 1024 + 256)
#define RT_MP_LINE_MAX 8192

struct rt_multipart {
    char delim[80];                 /* CRLF "--" boundary */
    size_t delim_len;
    int state;
    char buf[RT_MP_BUF];
    size_t len;
    size_t header_bytes;
    struct rt_part_info part;
    struct rt_multipart_cb cb;
    const char *error;              /* set when the body is malformed */
    int stopped;                    /* a callback said stop */
};

/* Reads one parameter value (token or quoted-string) from s[*i..n) into out;
   returns -1 if malformed or longer than cap. */
static int rt_param_value(const char *s, size_t n, size_t *i, char *out, size_t cap, size_t *out_len)
{
    size_t o = 0, k = *i;
    if (k < n && s[k] == '"') {
        k++;
        for (;;) {
            char c;
            if (k >= n)
                return -1;
            c = s[k++];
            if (c == '"')
                break;
            /* Only \\ and \" are escapes, as python-multipart (the
               reference runtime's parser, through email.utils.unquote)
               decodes them: any other backslash is a literal byte, so
               a bare `back\slash` keeps its backslash. */
            if (c == '\\' && k < n && (s[k] == '\\' || s[k] == '"'))
                c = s[k++];
            if (o >= cap)
                return -1;
            out[o++] = c;
        }
    } else {
        while (k < n && s[k] != ';' && s[k] != ' ' && s[k] != '\t') {
            if (o >= cap)
                return -1;
            out[o++] = s[k++];
        }
    }
    out[o] = 0;
    *out_len = o;
    *i = k;
    return 0;
}

/* Parses `type; key=value; ...`. For each parameter calls fn(key, keylen,
   value, valuelen, ctx). Returns -1 when malformed. The type is returned
   through *type / *type_len. */
static int rt_parse_params(const char *s, size_t n, const char **type, size_t *type_len,
                           int (*fn)(const char *, size_t, const char *, size_t, void *), void *ctx)
{
    size_t i = 0, ts;
    char value[RT_MP_FILENAME_MAX + 1];
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    ts = i;
    while (i < n && s[i] != ';' && s[i] != ' ' && s[i] != '\t')
        i++;
    *type = s + ts;
    *type_len = i - ts;
    for (;;) {
        size_t ks, ke, vlen;
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
        if (i >= n)
            return 0;
        if (s[i] != ';')
            return -1;
        i++;
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
        if (i >= n)
            return 0; /* a trailing ';' is common and harmless */
        ks = i;
        while (i < n && rt_is_tchar((unsigned char)s[i]))
            i++;
        ke = i;
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
        if (ke == ks || i >= n || s[i] != '=')
            return -1;
        i++;
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
        if (rt_param_value(s, n, &i, value, RT_MP_FILENAME_MAX, &vlen))
            return -1;
        if (fn(s + ks, ke - ks, value, vlen, ctx))
            return -1;
    }
}

static int rt_disposition_param(const char *k, size_t kn, const char *v, size_t vn, void *ctx)
{
    struct rt_part_info *part = ctx;
    if (rt_ieq(k, kn, "name")) {
        if (vn > RT_MP_NAME_MAX)
            return -1;
        memcpy(part->name, v, vn);
        part->name[vn] = 0;
        part->name_len = vn;
        part->has_name = 1;
    } else if (rt_ieq(k, kn, "filename")) {
        memcpy(part->filename, v, vn);
        part->filename[vn] = 0;
        part->filename_len = vn;
        part->has_filename = 1;
    }
    return 0;
}

struct rt_boundary_ctx {
    char *out;
    size_t len;
    int found;
};

static int rt_boundary_param(const char *k, size_t kn, const char *v, size_t vn, void *ctx)
{
    struct rt_boundary_ctx *b = ctx;
    if (rt_ieq(k, kn, "boundary")) {
        if (vn < 1 || vn > 70)
            return -1;
        memcpy(b->out, v, vn);
        b->len = vn;
        b->found = 1;
    }
    return 0;
}

/* Extracts the boundary from a Content-Type value. Returns 0 and the
   boundary (out holds >= 71 bytes), 1 when the type is not
   multipart/form-data, -1 when its boundary is missing or malformed. */
static int rt_multipart_boundary(const char *ct, size_t n, char *out, size_t *out_len)
{
    const char *type;
    size_t type_len;
    struct rt_boundary_ctx b = {out, 0, 0};
    if (rt_parse_params(ct, n, &type, &type_len, rt_boundary_param, &b))
        return rt_ieq(type, type_len, "multipart/form-data") ? -1 : 1;
    if (!rt_ieq(type, type_len, "multipart/form-data"))
        return 1;
    if (!b.found)
        return -1;
    *out_len = b.len;
    return 0;
}

static void rt_multipart_init(struct rt_multipart *mp, const char *boundary, size_t blen,
                              const struct rt_multipart_cb *cb)
{
    memset(&mp->part, 0, sizeof mp->part);
    memcpy(mp->delim, "\r\n--", 4);
    memcpy(mp->delim + 4, boundary, blen);
    mp->delim_len = blen + 4;
    mp->state = RT_MP_PREAMBLE;
    /* Pretend the body starts after a CRLF so the first boundary, which may
       open the body without one, is found by the same search. */
    memcpy(mp->buf, "\r\n", 2);
    mp->len = 2;
    mp->header_bytes = 0;
    mp->cb = *cb;
    mp->error = NULL;
    mp->stopped = 0;
}

static int rt_mp_header_line(struct rt_multipart *mp, const char *line, size_t n)
{
    const char *colon = memchr(line, ':', n);
    const char *type;
    size_t type_len, name_len;
    if (!colon || colon == line) {
        mp->error = "malformed part header";
        return -1;
    }
    name_len = (size_t)(colon - line);
    if (rt_ieq(line, name_len, "content-disposition")) {
        const char *v = colon + 1;
        if (rt_parse_params(v, n - name_len - 1, &type, &type_len, rt_disposition_param, &mp->part) ||
            !rt_ieq(type, type_len, "form-data")) {
            mp->error = "malformed Content-Disposition in a part";
            return -1;
        }
    }
    return 0;
}

/* Consumes as much of mp->buf as it can. Returns 0, or -1 on error/stop. */
static int rt_mp_process(struct rt_multipart *mp)
{
    size_t off = 0;
    int rc = 0;
    for (;;) {
        char *b = mp->buf + off;
        size_t n = mp->len - off;
        if (mp->state == RT_MP_PREAMBLE || mp->state == RT_MP_BODY) {
            char *hit = memmem(b, n, mp->delim, mp->delim_len);
            size_t data_len = hit ? (size_t)(hit - b) : (n >= mp->delim_len ? n - mp->delim_len + 1 : 0);
            if (mp->state == RT_MP_BODY && data_len && mp->cb.data(mp->cb.ctx, b, data_len)) {
                mp->stopped = 1;
                rc = -1;
                break;
            }
            off += data_len;
            if (!hit)
                break;
            off += mp->delim_len;
            if (mp->state == RT_MP_BODY && mp->cb.end(mp->cb.ctx)) {
                mp->stopped = 1;
                rc = -1;
                break;
            }
            mp->state = RT_MP_AFTER_DELIM;
        } else if (mp->state == RT_MP_AFTER_DELIM) {
            size_t i = 0;
            if (n >= 2 && b[0] == '-' && b[1] == '-') {
                off += 2;
                mp->state = RT_MP_EPILOGUE;
                continue;
            }
            while (i < n && (b[i] == ' ' || b[i] == '\t'))
                i++;
            if (i > 256) {
                mp->error = "malformed boundary line";
                rc = -1;
                break;
            }
            if (i + 1 >= n) {
                if (n == 1 && b[0] != '-' && b[0] != '\r' && b[0] != ' ' && b[0] != '\t') {
                    mp->error = "malformed boundary line";
                    rc = -1;
                }
                break;
            }
            if (b[i] != '\r' || b[i + 1] != '\n') {
                mp->error = "malformed boundary line";
                rc = -1;
                break;
            }
            off += i + 2;
            memset(&mp->part, 0, sizeof mp->part);
            mp->header_bytes = 0;
            mp->state = RT_MP_HEADERS;
        } else if (mp->state == RT_MP_HEADERS) {
            char *crlf = memmem(b, n, "\r\n", 2);
            size_t line_len;
            if (!crlf) {
                if (n > RT_MP_LINE_MAX) {
                    mp->error = "part header too long";
                    rc = -1;
                }
                break;
            }
            line_len = (size_t)(crlf - b);
            off += line_len + 2;
            if (!line_len) {
                mp->state = RT_MP_BODY;
                if (mp->cb.begin(mp->cb.ctx, &mp->part)) {
                    mp->stopped = 1;
                    rc = -1;
                    break;
                }
                continue;
            }
            mp->header_bytes += line_len + 2;
            if (mp->header_bytes > 2 * RT_MP_LINE_MAX) {
                mp->error = "part headers too long";
                rc = -1;
                break;
            }
            if (rt_mp_header_line(mp, b, line_len)) {
                rc = -1;
                break;
            }
        } else { /* epilogue: ignored */
            off = mp->len;
            break;
        }
    }
    memmove(mp->buf, mp->buf + off, mp->len - off);
    mp->len -= off;
    return rc;
}

/* Feeds body bytes. Returns 0, or -1 when the body is malformed
   (mp->error says why) or a callback stopped the parse (mp->stopped). */
static int rt_multipart_feed(struct rt_multipart *mp, const char *in, size_t n)
{
    while (n) {
        size_t k = sizeof mp->buf - mp->len;
        if (k > n)
            k = n;
        memcpy(mp->buf + mp->len, in, k);
        mp->len += k;
        in += k;
        n -= k;
        if (rt_mp_process(mp))
            return -1;
    }
    return 0;
}

/* Call at the end of the body: -1 unless the closing boundary was seen. */
static int rt_multipart_finish(struct rt_multipart *mp)
{
    if (mp->state != RT_MP_EPILOGUE) {
        if (!mp->error)
            mp->error = "multipart body ended before its closing boundary";
        return -1;
    }
    return 0;
}

/* >>json ================================================================== */

/* A strict RFC 8259 reader, just enough for {"command": "..."}: it validates
   the whole document (so garbage after a valid prefix is an error, as with
   Python's json.loads) and decodes the strings it is asked for. */
struct rt_json {
    const unsigned char *p, *end;
    int depth;
    const char *err;
};

#define RT_JSON_MAX_DEPTH 64

static void rt_json_ws(struct rt_json *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int rt_json_fail(struct rt_json *j, const char *why)
{
    if (!j->err)
        j->err = why;
    return -1;
}

static int rt_json_hex4(const unsigned char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = rt_hexval(p[i]);
        if (h < 0)
            return -1;
        v = v * 16 + (unsigned)h;
    }
    *out = v;
    return 0;
}

/* Reads a string at j->p (which is '"'); appends its decoded UTF-8 to out
   when out is not NULL. Lone surrogates are refused: they cannot be passed
   to a program as UTF-8. */
static int rt_json_string(struct rt_json *j, struct rt_buf *out)
{
    j->p++;
    for (;;) {
        const unsigned char *s = j->p;
        while (j->p < j->end && *j->p >= 0x20 && *j->p < 0x80 && *j->p != '"' && *j->p != '\\')
            j->p++;
        if (out && rt_buf_add(out, s, (size_t)(j->p - s)))
            return rt_json_fail(j, "out of memory");
        if (j->p >= j->end)
            return rt_json_fail(j, "unterminated string");
        if (*j->p == '"') {
            j->p++;
            return 0;
        }
        if (*j->p < 0x20)
            return rt_json_fail(j, "control character in string");
        if (*j->p >= 0x80) {
            size_t k = rt_utf8_len(j->p, (size_t)(j->end - j->p));
            if (!k)
                return rt_json_fail(j, "invalid UTF-8");
            if (out && rt_buf_add(out, j->p, k))
                return rt_json_fail(j, "out of memory");
            j->p += k;
            continue;
        }
        /* backslash escape */
        if (j->end - j->p < 2)
            return rt_json_fail(j, "unterminated escape");
        {
            unsigned char e = j->p[1];
            char c1;
            unsigned cp;
            unsigned char u[4];
            size_t ulen;
            j->p += 2;
            switch (e) {
            case '"': c1 = '"'; break;
            case '\\': c1 = '\\'; break;
            case '/': c1 = '/'; break;
            case 'b': c1 = '\b'; break;
            case 'f': c1 = '\f'; break;
            case 'n': c1 = '\n'; break;
            case 'r': c1 = '\r'; break;
            case 't': c1 = '\t'; break;
            case 'u':
                c1 = 0;
                if (j->end - j->p < 4 || rt_json_hex4(j->p, &cp))
                    return rt_json_fail(j, "bad \\u escape");
                j->p += 4;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    unsigned lo;
                    if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' ||
                        rt_json_hex4(j->p + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                        return rt_json_fail(j, "lone surrogate in \\u escape");
                    j->p += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return rt_json_fail(j, "lone surrogate in \\u escape");
                }
                if (cp < 0x80) {
                    u[0] = (unsigned char)cp;
                    ulen = 1;
                } else if (cp < 0x800) {
                    u[0] = (unsigned char)(0xC0 | (cp >> 6));
                    u[1] = (unsigned char)(0x80 | (cp & 0x3F));
                    ulen = 2;
                } else if (cp < 0x10000) {
                    u[0] = (unsigned char)(0xE0 | (cp >> 12));
                    u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
                    u[2] = (unsigned char)(0x80 | (cp & 0x3F));
                    ulen = 3;
                } else {
                    u[0] = (unsigned char)(0xF0 | (cp >> 18));
                    u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
                    u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
                    u[3] = (unsigned char)(0x80 | (cp & 0x3F));
                    ulen = 4;
                }
                if (out && rt_buf_add(out, u, ulen))
                    return rt_json_fail(j, "out of memory");
                continue;
            default:
                return rt_json_fail(j, "bad escape");
            }
            if (out && rt_buf_add(out, &c1, 1))
                return rt_json_fail(j, "out of memory");
        }
    }
}

static int rt_json_value(struct rt_json *j);

static int rt_json_number(struct rt_json *j)
{
    const unsigned char *p = j->p, *e = j->end;
    if (p < e && *p == '-')
        p++;
    if (p < e && *p == '0')
        p++;
    else if (p < e && *p >= '1' && *p <= '9')
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    else
        return rt_json_fail(j, "invalid value");
    if (p < e && *p == '.') {
        p++;
        if (p >= e || *p < '0' || *p > '9')
            return rt_json_fail(j, "invalid number");
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-'))
            p++;
        if (p >= e || *p < '0' || *p > '9')
            return rt_json_fail(j, "invalid number");
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    j->p = p;
    return 0;
}

static int rt_json_literal(struct rt_json *j, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, lit, n))
        return rt_json_fail(j, "invalid value");
    j->p += n;
    return 0;
}

static int rt_json_container(struct rt_json *j, unsigned char close)
{
    int first = 1;
    if (++j->depth > RT_JSON_MAX_DEPTH)
        return rt_json_fail(j, "nested too deeply");
    j->p++;
    for (;;) {
        rt_json_ws(j);
        if (j->p < j->end && *j->p == close && first) {
            j->p++;
            break;
        }
        if (!first) {
            if (j->p < j->end && *j->p == close) {
                j->p++;
                break;
            }
            if (j->p >= j->end || *j->p != ',')
                return rt_json_fail(j, "expected ',' or end of container");
            j->p++;
            rt_json_ws(j);
        }
        first = 0;
        if (close == '}') {
            if (j->p >= j->end || *j->p != '"')
                return rt_json_fail(j, "expected a key");
            if (rt_json_string(j, NULL))
                return -1;
            rt_json_ws(j);
            if (j->p >= j->end || *j->p != ':')
                return rt_json_fail(j, "expected ':'");
            j->p++;
        }
        if (rt_json_value(j))
            return -1;
    }
    j->depth--;
    return 0;
}

static int rt_json_value(struct rt_json *j)
{
    rt_json_ws(j);
    if (j->p >= j->end)
        return rt_json_fail(j, "unexpected end of input");
    switch (*j->p) {
    case '{': return rt_json_container(j, '}');
    case '[': return rt_json_container(j, ']');
    case '"': return rt_json_string(j, NULL);
    case 't': return rt_json_literal(j, "true");
    case 'f': return rt_json_literal(j, "false");
    case 'n': return rt_json_literal(j, "null");
    default: return rt_json_number(j);
    }
}

enum { RT_CMD_OK, RT_CMD_BAD_JSON, RT_CMD_NOT_OBJECT, RT_CMD_MISSING, RT_CMD_NOT_STRING, RT_CMD_NOMEM,
       RT_CMD_BAD_TIMEOUT };

/* Reads {"command": "<string>", "timeout_seconds": <number or null>, ...}
   (other keys ignored, the last of a key wins, as with json.loads). On
   RT_CMD_OK the decoded command is in *command and the command's own
   limit in *timeout_s (0: none; the Python SDK 1.0.8 sends it for
   run(command_timeout=...)); *why explains the other results. */
static int rt_parse_execute_body(const unsigned char *body, size_t n, struct rt_buf *command,
                                 double *timeout_s, const char **why)
{
    struct rt_json j = {body, body + n, 0, NULL};
    int found = 0, not_string = 0, first = 1, bad_timeout = 0;
    command->len = 0;
    *timeout_s = 0;
    *why = NULL;
    rt_json_ws(&j);
    if (j.p >= j.end) {
        *why = "empty body";
        return RT_CMD_BAD_JSON;
    }
    if (*j.p != '{') {
        if (rt_json_value(&j) == 0) {
            rt_json_ws(&j);
            if (j.p == j.end) {
                *why = "the body is not a JSON object";
                return RT_CMD_NOT_OBJECT;
            }
            j.err = "extra data after the JSON value";
        }
        *why = j.err;
        return RT_CMD_BAD_JSON;
    }
    j.p++;
    j.depth = 1;
    for (;;) {
        struct rt_buf key = {0};
        rt_json_ws(&j);
        if (j.p < j.end && *j.p == '}') { /* after a member, or "{}" */
            j.p++;
            break;
        }
        if (!first) {
            if (j.p >= j.end || *j.p != ',') {
                rt_json_fail(&j, "expected ',' or '}'");
                break;
            }
            j.p++;
            rt_json_ws(&j);
            if (j.p < j.end && *j.p == '}') {
                rt_json_fail(&j, "trailing comma");
                break;
            }
        }
        first = 0;
        if (j.p >= j.end || *j.p != '"') {
            rt_json_fail(&j, "expected a key");
            break;
        }
        if (rt_json_string(&j, &key)) {
            rt_buf_free(&key);
            break;
        }
        rt_json_ws(&j);
        if (j.p >= j.end || *j.p != ':') {
            rt_buf_free(&key);
            rt_json_fail(&j, "expected ':'");
            break;
        }
        j.p++;
        rt_json_ws(&j);
        if (key.len == 7 && !memcmp(key.p, "command", 7)) {
            found = 1;
            if (j.p < j.end && *j.p == '"') {
                command->len = 0;
                not_string = 0;
                if (rt_json_string(&j, command)) {
                    rt_buf_free(&key);
                    break;
                }
            } else {
                not_string = 1;
                if (rt_json_value(&j)) {
                    rt_buf_free(&key);
                    break;
                }
            }
        } else if (key.len == 15 && !memcmp(key.p, "timeout_seconds", 15)) {
            const unsigned char *v = j.p;
            if (rt_json_value(&j)) {
                rt_buf_free(&key);
                break;
            }
            *timeout_s = 0;
            bad_timeout = 0;
            if (j.p - v == 4 && !memcmp(v, "null", 4)) {
                /* no limit, as when absent */
            } else if (*v == '-' || (*v >= '0' && *v <= '9')) {
                size_t len = (size_t)(j.p - v);
                char *num = malloc(len + 1); /* whole: a cut number is another number */
                double t;
                if (!num) {
                    rt_buf_free(&key);
                    *why = "out of memory";
                    return RT_CMD_NOMEM;
                }
                /* a JSON number is plain ASCII: strtod reads it whole */
                memcpy(num, v, len);
                num[len] = 0;
                t = strtod(num, NULL);
                free(num);
                if (!(t > 0) || t > 1e9)
                    bad_timeout = 2; /* 0, negative, or past any useful limit */
                else
                    *timeout_s = t;
            } else {
                bad_timeout = 1;
            }
        } else if (rt_json_value(&j)) {
            rt_buf_free(&key);
            break;
        }
        rt_buf_free(&key);
    }
    if (!j.err) {
        rt_json_ws(&j);
        if (j.p != j.end)
            j.err = "extra data after the JSON value";
    }
    if (j.err) {
        *why = j.err;
        return strcmp(j.err, "out of memory") ? RT_CMD_BAD_JSON : RT_CMD_NOMEM;
    }
    if (!found) {
        *why = "Field required";
        return RT_CMD_MISSING;
    }
    if (not_string) {
        *why = "Input should be a valid string";
        return RT_CMD_NOT_STRING;
    }
    if (bad_timeout) {
        *why = bad_timeout == 1 ? "Input should be a valid number"
                                : "Input should be greater than 0 and at most 1e9";
        return RT_CMD_BAD_TIMEOUT;
    }
    if (rt_buf_reserve(command, 0))
        return RT_CMD_NOMEM;
    command->p[command->len] = 0;
    return RT_CMD_OK;
}

/* >>shlex ================================================================= */

/* Splits like Python's shlex.split(s) (posix=True, no comments): blanks are
   space, tab, CR and LF; '...' is literal; in "..." a backslash escapes only
   " and \; outside quotes a backslash escapes any byte; '' makes an empty
   word. No expansion of any kind: "$HOME && x" is three literal words.
   Returns 0 and a NULL-terminated argv in one allocation (free(*argv)), or
   -1 with *why set to the message shlex would raise. */
static int rt_shlex_split(const char *s, size_t n, char ***argv_out, size_t *argc_out, const char **why)
{
    size_t max_words = n / 2 + 2, argc = 0, o = 0, i;
    char **argv;
    char *out;
    int in_word = 0;
    char quote = 0;
    *argv_out = NULL;
    *argc_out = 0;
    *why = NULL;
    argv = malloc(max_words * sizeof *argv + n + 2);
    if (!argv) {
        *why = "out of memory";
        return -1;
    }
    out = (char *)(argv + max_words);
    for (i = 0; i < n; i++) {
        char c = s[i];
        if (quote == '\'') {
            if (c == '\'')
                quote = 0;
            else
                out[o++] = c;
        } else if (quote == '"') {
            if (c == '"') {
                quote = 0;
            } else if (c == '\\') {
                if (i + 1 >= n) {
                    *why = "No escaped character";
                    goto fail;
                }
                c = s[++i];
                if (c != '"' && c != '\\')
                    out[o++] = '\\';
                out[o++] = c;
            } else {
                out[o++] = c;
            }
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
            if (in_word) {
                out[o++] = 0;
                in_word = 0;
            }
        } else {
            if (!in_word) {
                argv[argc++] = out + o;
                in_word = 1;
            }
            if (c == '\'' || c == '"') {
                quote = c;
            } else if (c == '\\') {
                if (i + 1 >= n) {
                    *why = "No escaped character";
                    goto fail;
                }
                out[o++] = s[++i];
            } else {
                out[o++] = c;
            }
        }
    }
    if (quote) {
        *why = "No closing quotation";
        goto fail;
    }
    if (in_word)
        out[o++] = 0;
    argv[argc] = NULL;
    *argv_out = argv;
    *argc_out = argc;
    return 0;
fail:
    free(argv);
    return -1;
}

/* >>paths ================================================================= */

/* Confinement. A path is resolved the way Python's os.path.realpath does
   (symlinks followed, `..` applied after them, missing components kept
   lexically) but never as a string: it is walked one component at a time
   with openat(O_PATH|O_NOFOLLOW) from an fd of the base dir, and each
   symlink is read and re-walked by hand. So the file that is finally opened
   is the one that was checked, even if a sandboxed process swaps symlinks
   under us, and nothing outside the base is ever opened. A `..` above the
   base, or a symlink to an absolute path outside it, is a denial. */

static int g_base_fd = -1;              /* O_PATH, the base dir */
static char g_base_real[PATH_MAX];      /* realpath of the base, for absolute symlinks */
static size_t g_base_real_len;

enum { RT_PATH_FOUND, RT_PATH_MISSING, RT_PATH_DENIED, RT_PATH_ERROR };

#define RT_PATH_MAX_DEPTH 256
#define RT_PATH_MAX_LINKS 40

struct rt_resolved {
    int status;
    int err;                   /* RT_PATH_ERROR: errno */
    int dirfd;                 /* deepest existing directory reached: the target itself when
                                  target_is_dir, its parent for a found file, the place to
                                  create pending components when missing */
    int dirfd_owned;
    int target_is_dir;
    int fd;                    /* found non-directory: an O_PATH fd of it, else -1 */
    struct stat st;            /* found: the target's */
    char name[NAME_MAX + 1];   /* found non-directory: its name inside dirfd */
    struct rt_buf pending;     /* missing: names to create, each NUL-terminated */
    size_t pending_count;
};

static void rt_resolved_free(struct rt_resolved *r)
{
    if (r->fd >= 0)
        close(r->fd);
    if (r->dirfd_owned && r->dirfd >= 0)
        close(r->dirfd);
    rt_buf_free(&r->pending);
    r->fd = r->dirfd = -1;
}

static int rt_resolve(const char *path, size_t len, struct rt_resolved *r)
{
    int fds[RT_PATH_MAX_DEPTH + 1];
    size_t pend_off[RT_PATH_MAX_DEPTH + 1];
    int depth = 0, links = 0, cur_fd = -1;
    char cur_name[NAME_MAX + 1];
    struct stat cur_st;
    struct rt_buf todo = {0};
    size_t pos = 0;

    memset(r, 0, sizeof *r);
    r->fd = r->dirfd = -1;
    fds[0] = g_base_fd;
    if (memchr(path, 0, len)) {
        r->status = RT_PATH_DENIED; /* what the reference does with a NUL */
        return r->status;
    }
    if (rt_buf_add(&todo, path, len)) {
        r->status = RT_PATH_ERROR;
        r->err = ENOMEM;
        return r->status;
    }
    r->status = -1;
    while (pos < todo.len && r->status < 0) {
        size_t s = pos, clen;
        char name[NAME_MAX + 1];
        while (pos < todo.len && todo.p[pos] != '/')
            pos++;
        clen = pos - s;
        if (pos < todo.len)
            pos++;
        if (clen == 0 || (clen == 1 && todo.p[s] == '.'))
            continue;
        if (cur_fd >= 0) {
            /* A file followed by more components: `..` steps back off it,
               anything else is under a non-directory and cannot exist. */
            close(cur_fd);
            cur_fd = -1;
            if (clen == 2 && todo.p[s] == '.' && todo.p[s + 1] == '.')
                continue;
            pend_off[r->pending_count++] = r->pending.len;
            if (rt_buf_add(&r->pending, cur_name, strlen(cur_name) + 1)) {
                r->status = RT_PATH_ERROR;
                r->err = ENOMEM;
                break;
            }
        }
        if (clen == 2 && todo.p[s] == '.' && todo.p[s + 1] == '.') {
            if (r->pending_count) {
                r->pending.len = pend_off[--r->pending_count];
            } else if (depth == 0) {
                r->status = RT_PATH_DENIED;
            } else {
                close(fds[depth--]);
            }
            continue;
        }
        if (clen > NAME_MAX) {
            r->status = RT_PATH_ERROR;
            r->err = ENAMETOOLONG;
            break;
        }
        memcpy(name, todo.p + s, clen);
        name[clen] = 0;
        if (!r->pending_count) {
            struct stat st;
            int fd = openat(fds[depth], name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
            if (fd >= 0 && fstat(fd, &st)) {
                r->status = RT_PATH_ERROR;
                r->err = errno;
                close(fd);
                break;
            }
            if (fd >= 0 && S_ISLNK(st.st_mode)) {
                char target[PATH_MAX + 1];
                ssize_t tl = readlinkat(fd, "", target, PATH_MAX);
                struct rt_buf next = {0};
                const char *rel = target;
                close(fd);
                if (tl <= 0 || tl >= PATH_MAX || ++links > RT_PATH_MAX_LINKS) {
                    r->status = RT_PATH_ERROR;
                    r->err = tl < 0 ? errno : tl == 0 ? ENOENT : tl >= PATH_MAX ? ENAMETOOLONG : ELOOP;
                    break;
                }
                target[tl] = 0;
                if (target[0] == '/') {
                    if (strncmp(target, g_base_real, g_base_real_len) ||
                        (target[g_base_real_len] != '/' && target[g_base_real_len] != 0)) {
                        r->status = RT_PATH_DENIED;
                        break;
                    }
                    rel = target + g_base_real_len;
                    while (depth > 0)
                        close(fds[depth--]);
                }
                if (rt_buf_add(&next, rel, strlen(rel)) || rt_buf_add(&next, "/", 1) ||
                    rt_buf_add(&next, todo.p + pos, todo.len - pos)) {
                    rt_buf_free(&next);
                    r->status = RT_PATH_ERROR;
                    r->err = ENOMEM;
                    break;
                }
                rt_buf_free(&todo);
                todo = next;
                pos = 0;
                continue;
            }
            if (fd >= 0 && S_ISDIR(st.st_mode)) {
                if (depth >= RT_PATH_MAX_DEPTH) {
                    close(fd);
                    r->status = RT_PATH_ERROR;
                    r->err = ENAMETOOLONG;
                    break;
                }
                fds[++depth] = fd;
                continue;
            }
            if (fd >= 0) {
                cur_fd = fd;
                cur_st = st;
                memcpy(cur_name, name, clen + 1);
                continue;
            }
            if (errno != ENOENT) {
                r->status = RT_PATH_ERROR;
                r->err = errno;
                break;
            }
        }
        if (r->pending_count >= RT_PATH_MAX_DEPTH) {
            r->status = RT_PATH_ERROR;
            r->err = ENAMETOOLONG;
            break;
        }
        pend_off[r->pending_count++] = r->pending.len;
        if (rt_buf_add(&r->pending, name, clen + 1)) {
            r->status = RT_PATH_ERROR;
            r->err = ENOMEM;
            break;
        }
    }
    rt_buf_free(&todo);
    if (r->status < 0) {
        if (cur_fd >= 0) {
            r->status = RT_PATH_FOUND;
            r->fd = cur_fd;
            r->st = cur_st;
            memcpy(r->name, cur_name, strlen(cur_name) + 1);
            cur_fd = -1;
        } else if (r->pending_count) {
            r->status = RT_PATH_MISSING;
        } else {
            r->status = RT_PATH_FOUND;
            r->target_is_dir = 1;
            if (fstat(fds[depth], &r->st)) {
                r->status = RT_PATH_ERROR;
                r->err = errno;
            }
        }
    }
    if (cur_fd >= 0)
        close(cur_fd);
    /* Keep the deepest directory; close the rest of the walk. */
    r->dirfd = fds[depth];
    r->dirfd_owned = depth > 0;
    for (int k = 1; k < depth; k++)
        close(fds[k]);
    return r->status;
}

/* Opens a found regular file for reading, checking it is still the file
   the walk found (a swap between the walk and the open is refused). */
static int rt_open_found_file(const struct rt_resolved *r)
{
    struct stat st;
    int fd;
    if (r->status != RT_PATH_FOUND || r->target_is_dir || !S_ISREG(r->st.st_mode))
        return -1;
    fd = openat(r->dirfd, r->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) || st.st_dev != r->st.st_dev || st.st_ino != r->st.st_ino || !S_ISREG(st.st_mode)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* >>server (connections and responses) ===================================== */

struct rt_conn {
    struct rt_conn *handoff_next;   /* in g_handoff, until a worker takes it */
    int fd;
    char *buf;                      /* [0, head_len) the head; [body_pos, len) unread bytes */
    size_t cap, len, head_len, body_pos;
    struct rt_request req;
    int is_head;                    /* HEAD request: headers only */
    int body_mode;                  /* 0 none, 1 Content-Length, 2 chunked */
    unsigned long long body_remaining, body_total, body_limit;
    struct rt_chunked chunk;
    int body_done, continue_sent, body_error;
    int keep_alive, responded;
    int status;                     /* of the response, for the access log */
    unsigned long long sent;
    /* Under g_lock, for rt_shed: what the thread waits for from the client
       (RT_WAIT_*; the socket is open while this is set), since when, and
       whether the accept loop closed it to make room. */
    int waiting;
    double wait_since;
    int shed;
    int served;                     /* a request was answered on it (own thread only) */
    struct rt_conn *prev, *next;
};

/* What a connection's thread is blocked on. Only connections waiting for
   their client can be shed: one running a command or sending an answer is
   doing work somebody asked for. The order is the order of shedding (see
   rt_shed_victim): a connection that never sent a byte first, a client
   that has made requests on its connection last but for one stuck in a
   body. */
enum {
    RT_WAIT_NONE,
    RT_WAIT_NEW,    /* not one byte since the connect */
    RT_WAIT_HEAD,   /* part of a request head */
    RT_WAIT_IDLE,   /* keep-alive, between two requests */
    RT_WAIT_BODY    /* a request body, between two reads */
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond;          /* monotonic clock; signalled on child exit and connection end */
static struct rt_conn *g_conns;
static int g_active;                   /* listed connections, shed ones included */
static int g_shed_pending;             /* shed connections still listed */
static int g_threads;                  /* worker threads alive, idle ones included */
static int g_idle;                     /* idle workers, less the connections queued for them */
static struct rt_conn *g_handoff;      /* accepted connections queued for idle workers */
static pthread_cond_t g_work_cond;     /* monotonic clock; signalled when one is queued */

/* Worker threads past --max-connections: those of shed connections and
   those in a lingering close (up to 2 s) after their slot was freed. A
   flood makes both faster than a loaded machine may end them, so the
   accept loop waits while this many are busy: threads (256 KiB of stack
   each) stay under max_connections + this, however hard the flood.
   Workers are kept, not ended, after a connection (see rt_worker_main):
   a thread that has counted itself out is still the kernel's for a while,
   so a count of ending threads could never bound the real number. */
#define RT_CLOSING_THREADS() (g_cfg.max_connections / 16 > 16 ? g_cfg.max_connections / 16 : 16)
/* An idle worker ends after this long without a connection. */
#define RT_WORKER_IDLE_S 30
static atomic_int g_stopping;
static int g_stop_pipe[2] = {-1, -1};

#define RT_IO_CHUNK (64u * 1024)

static const char *rt_reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

static int rt_send_all(struct rt_conn *c, const void *p, size_t n, int more)
{
    const char *s = p;
    while (n) {
        ssize_t w = send(c->fd, s, n, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            c->keep_alive = 0;
            return -1;
        }
        s += w;
        n -= (size_t)w;
        c->sent += (unsigned long long)w;
    }
    return 0;
}

static int rt_writev_all(struct rt_conn *c, struct iovec *iov, int cnt)
{
    while (cnt > 0) {
        ssize_t w = writev(c->fd, iov, cnt);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            c->keep_alive = 0;
            return -1;
        }
        c->sent += (unsigned long long)w;
        while (cnt > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

/* The Date header (RFC 9110 6.6.1: an origin server with a clock sends
   one), formatted once a second per thread. */
static const char *rt_http_date(void)
{
    static _Thread_local time_t cached_at;
    static _Thread_local char cached[128];
    time_t now = time(NULL);
    if (now != cached_at) {
        /* By hand rather than gmtime_r+strftime: in a static glibc those
           pull in the time zone and locale machinery (~110 KB). Civil date
           from days since 1970-01-01, Gregorian calendar in 400-year eras. */
        static const char *const wday[] = {"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"};
        static const char *const mon[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
        long long days = (long long)now / 86400, secs = (long long)now % 86400;
        long long z = days + 719468, era = z / 146097;
        long long doe = z - era * 146097;
        long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
        long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        long long mp = (5 * doy + 2) / 153;
        long long d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
        long long y = yoe + era * 400 + (m <= 2);
        snprintf(cached, sizeof cached, "%s, %02lld %s %lld %02lld:%02lld:%02lld GMT", wday[days % 7], d,
                 mon[m - 1], y, secs / 3600, secs / 60 % 60, secs % 60);
        cached_at = now;
    }
    return cached;
}

/* Formats the status line and headers into out (>= 512 bytes). */
static size_t rt_format_head(struct rt_conn *c, char *out, size_t cap, int status, const char *ctype,
                             unsigned long long body_len, const char *extra)
{
    int n;
    const char *conn_hdr = "";
    if (atomic_load(&g_stopping))
        c->keep_alive = 0;
    if (!c->keep_alive)
        conn_hdr = "Connection: close\r\n";
    else if (c->req.minor_version == 0)
        conn_hdr = "Connection: keep-alive\r\n"; /* HTTP/1.0 closes unless told otherwise */
    n = snprintf(out, cap,
                 "HTTP/1.1 %d %s\r\nDate: %s\r\nContent-Type: %s\r\nContent-Length: %llu\r\n%s%s\r\n",
                 status, rt_reason(status), rt_http_date(), ctype, body_len, extra ? extra : "", conn_hdr);
    c->status = status;
    c->responded = 1;
    return n < 0 ? 0 : (size_t)n >= cap ? cap - 1 : (size_t)n;
}

static int rt_respond(struct rt_conn *c, int status, const char *ctype, const char *extra,
                      const void *body, size_t len)
{
    char head[1024];
    struct iovec iov[2];
    size_t hl = rt_format_head(c, head, sizeof head, status, ctype, len, extra);
    iov[0].iov_base = head;
    iov[0].iov_len = hl;
    iov[1].iov_base = (void *)body;
    iov[1].iov_len = c->is_head ? 0 : len;
    return rt_writev_all(c, iov, iov[1].iov_len ? 2 : 1);
}

static int rt_respond_json(struct rt_conn *c, int status, const struct rt_buf *b)
{
    return rt_respond(c, status, "application/json", NULL, b->p, b->len);
}

/* {"<key>": "<text>"}: the reference's error shape ("message") and
   FastAPI's ("detail"). */
static int rt_respond_text(struct rt_conn *c, int status, const char *key, const char *text)
{
    struct rt_buf b = {0};
    int rc;
    if (rt_buf_printf(&b, "{\"%s\":", key) || rt_buf_json_string(&b, text, strlen(text)) || rt_buf_add(&b, "}", 1)) {
        rt_buf_free(&b);
        c->keep_alive = 0;
        return rt_respond(c, 500, "application/json", NULL, "{\"message\":\"out of memory\"}", 27);
    }
    rc = rt_respond_json(c, status, &b);
    rt_buf_free(&b);
    return rc;
}

/* FastAPI's validation-error shape, so clients that parse 422s still can. */
static int rt_respond_422(struct rt_conn *c, const char *type, const char *loc, const char *msg)
{
    struct rt_buf b = {0};
    int rc;
    if (rt_buf_printf(&b, "{\"detail\":[{\"type\":\"%s\",\"loc\":%s,\"msg\":", type, loc) ||
        rt_buf_json_string(&b, msg, strlen(msg)) || rt_buf_add(&b, "}]}", 3)) {
        rt_buf_free(&b);
        return rt_respond_text(c, 500, "message", "out of memory");
    }
    rc = rt_respond_json(c, 422, &b);
    rt_buf_free(&b);
    return rc;
}

/* Next span of the request body (decoded from chunked if need be).
   Returns 1 with *p and *n set, 0 at the end of the body, -1 on error with
   c->body_error set to the status to answer (0 when the peer is gone). */
static int rt_body_next(struct rt_conn *c, const char **p, size_t *n)
{
    if (c->body_done)
        return 0;
    if (c->body_error)
        return -1;
    for (;;) {
        if (c->body_pos == c->len) {
            ssize_t r;
            int shed;
            c->body_pos = c->len = c->head_len;
            if (c->req.expect_continue && !c->continue_sent) {
                static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
                c->continue_sent = 1;
                if (rt_send_all(c, cont, sizeof cont - 1, 0)) {
                    c->body_error = 0;
                    return -1;
                }
            }
            /* Between two reads of a body the connection may be shed
               (rt_shed), ranked by how long the client has sent nothing;
               bytes already there are taken without that. */
            do
                r = recv(c->fd, c->buf + c->len, c->cap - c->len, MSG_DONTWAIT);
            while (r < 0 && errno == EINTR);
            shed = 0;
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                pthread_mutex_lock(&g_lock);
                shed = c->shed;
                c->waiting = RT_WAIT_BODY;
                c->wait_since = rt_now();
                pthread_mutex_unlock(&g_lock);
                r = 0;
                if (!shed)
                    do
                        r = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
                    while (r < 0 && errno == EINTR);
                pthread_mutex_lock(&g_lock);
                c->waiting = RT_WAIT_NONE;
                shed = c->shed;
                pthread_mutex_unlock(&g_lock);
            }
            /* r says all that is needed below; errno is not read */
            if (r <= 0 || shed) {
                /* Peer gone, stalled past the idle timeout, or shed: the
                   body is incomplete and the connection unusable. A shed
                   one's socket is shut, so it gets no answer. */
                c->keep_alive = 0;
                c->body_error = shed ? 0 : r == 0 ? 400 : 408;
                return -1;
            }
            c->len += (size_t)r;
        }
        if (c->body_mode == 1) {
            size_t avail = c->len - c->body_pos;
            if ((unsigned long long)avail > c->body_remaining)
                avail = (size_t)c->body_remaining;
            *p = c->buf + c->body_pos;
            *n = avail;
            c->body_pos += avail;
            c->body_remaining -= avail;
            c->body_total += avail;
            if (!c->body_remaining)
                c->body_done = 1;
            return 1;
        } else {
            size_t used, off, dlen;
            size_t base = c->body_pos;
            int rc = rt_chunked_step(&c->chunk, (const unsigned char *)c->buf + base, c->len - base, &used, &off, &dlen);
            c->body_pos += used;
            if (rc == RT_CHUNK_DATA) {
                c->body_total += dlen;
                if (c->body_total > c->body_limit) {
                    c->keep_alive = 0;
                    c->body_error = 413;
                    return -1;
                }
                *p = c->buf + base + off;
                *n = dlen;
                return 1;
            }
            if (rc == RT_CHUNK_END) {
                c->body_done = 1;
                return 0;
            }
            if (rc == RT_CHUNK_BAD) {
                c->keep_alive = 0;
                c->body_error = 400;
                return -1;
            }
        }
    }
}

/* Sets up body reading for the current request with a size limit; answers
   413 itself (and returns -1) when a declared length is over it. */
static int rt_body_begin(struct rt_conn *c, unsigned long long limit)
{
    c->body_limit = limit;
    if (c->req.chunked) {
        c->body_mode = 2;
        memset(&c->chunk, 0, sizeof c->chunk);
    } else if (c->req.has_content_length && c->req.content_length) {
        c->body_mode = 1;
        c->body_remaining = c->req.content_length;
        if (c->req.content_length > limit) {
            c->keep_alive = 0;
            rt_respond_text(c, 413, "message", "Request body too large");
            return -1;
        }
    } else {
        c->body_done = 1;
    }
    return 0;
}

static void rt_respond_body_error(struct rt_conn *c)
{
    c->keep_alive = 0;
    if (c->body_error == 413)
        rt_respond_text(c, 413, "message", "Request body too large");
    else if (c->body_error == 400)
        rt_respond_text(c, 400, "detail", "Malformed or incomplete request body");
    else if (c->body_error == 408)
        rt_respond_text(c, 408, "detail", "Request body timed out");
}

/* >>exec ================================================================== */

/* Children are reaped by one thread (rt_reaper_main) with waitpid(-1):
   that also reaps orphans re-parented to us when we run as PID 1 in a pod.
   A command's thread registers its child here and waits for the status. */
struct rt_child {
    pid_t pid;
    int done;
    int status;
    struct rt_child *next;
};

static struct rt_child *g_children;

struct rt_exec_result {
    struct rt_buf out, err;
    int exit_code;
    int timed_out; /* ended at its limit: "timed_out": true in the answer */
};

static void rt_exec_fail(struct rt_exec_result *res, const char *fmt, ...)
{
    va_list ap;
    char msg[1024];
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    res->out.len = 0;
    res->err.len = 0;
    if (rt_buf_str(&res->err, "Failed to execute command: ") || rt_buf_str(&res->err, msg))
        res->err.len = 0;
    res->exit_code = 1;
}

static void rt_drain_pipe(int *fd, struct rt_buf *b, int *cut)
{
    char scratch[16384];
    ssize_t r;
    if (b->len < g_cfg.max_output && !rt_buf_reserve(b, RT_IO_CHUNK)) {
        size_t room = b->cap - b->len - 1;
        if (room > g_cfg.max_output - b->len)
            room = g_cfg.max_output - b->len;
        r = read(*fd, b->p + b->len, room);
        if (r > 0)
            b->len += (size_t)r;
    } else {
        r = read(*fd, scratch, sizeof scratch);
        if (r > 0)
            *cut = 1;
    }
    if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
        close(*fd);
        *fd = -1;
    }
}

static struct timespec rt_abs_time(double at)
{
    struct timespec ts;
    /* An exec timeout may be any finite number (1e300 included): far
       enough is forever, and time_t must not overflow. */
    if (at > 1e15)
        at = 1e15;
    ts.tv_sec = (time_t)at;
    ts.tv_nsec = (long)((at - (double)ts.tv_sec) * 1e9);
    return ts;
}

/* Runs a command string without a shell, in the base dir, with the
   configured timeout, or the request's own limit (limit_s > 0) when that
   is shorter. Always fills res (failures as exit_code 1 plus the reason
   in stderr, as the reference does). A command that reaches the
   request's limit keeps its output so far and ends with exit_code 124
   (timeout(1)'s) and timed_out set, as the Python SDK 1.0.8 reports a
   command_timeout. */
/* A command still running after this long gets its response head sent
   (rt_exec_head) while it runs; quicker ones are answered whole, with a
   Content-Length. Not 0: a head sent at once races the Go router (see
   rt_exec_head). */
#define RT_EARLY_HEAD_AFTER_S 1.0

static int rt_exec_head(struct rt_conn *c);

static void rt_run_command(const char *cmd, size_t cmd_len, double limit_s, struct rt_exec_result *res,
                           struct rt_conn *c, int *head_sent)
{
    char **argv = NULL;
    size_t argc = 0;
    const char *why;
    int inp[2] = {-1, -1}, outp[2] = {-1, -1}, errp[2] = {-1, -1};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none, all;
    struct rt_child ch = {0, 0, 0, NULL};
    int rc, timed_out = 0, cut_out = 0, cut_err = 0, own_limit = 0;
    struct pollfd pf[2];
    double start = rt_now(), deadline, limit;

    res->exit_code = 0;
    if (rt_shlex_split(cmd, cmd_len, &argv, &argc, &why)) {
        rt_exec_fail(res, "%s", why);
        return;
    }
    if (argc == 0) {
        free(argv);
        rt_exec_fail(res, "empty command");
        return;
    }
    /* A NUL inside a word would silently cut it short in execve. */
    if (memchr(cmd, 0, cmd_len)) {
        free(argv);
        rt_exec_fail(res, "embedded null byte");
        return;
    }
    /* stdin: a pipe whose write end is closed at once, so the command
       reads end-of-file as from /dev/null, which a scratch image or an
       empty root may not have (posix_spawn would then fail with ENOENT,
       reported as if the command were missing). */
    if (pipe2(inp, O_CLOEXEC) || pipe2(outp, O_CLOEXEC) || pipe2(errp, O_CLOEXEC)) {
        int e = errno;
        if (inp[0] >= 0) {
            close(inp[0]);
            close(inp[1]);
        }
        if (outp[0] >= 0) {
            close(outp[0]);
            close(outp[1]);
        }
        free(argv);
        rt_exec_fail(res, "[Errno %d] %s", e, strerror(e));
        return;
    }
    close(inp[1]);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, inp[0], 0);
    posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
    posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
    posix_spawn_file_actions_addchdir_np(&fa, g_base_real);
    posix_spawnattr_init(&attr);
    sigemptyset(&none);
    sigfillset(&all);
    /* Own process group, so a timeout can kill everything the command
       started; default signal dispositions and an empty mask, because we
       ignore SIGPIPE and block SIGCHLD/SIGTERM and a child would inherit it. */
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);

    /* Spawn and register under the lock so the reaper cannot reap the child
       before we are listening for it. */
    pthread_mutex_lock(&g_lock);
    rc = posix_spawnp(&ch.pid, argv[0], &fa, &attr, argv, environ);
    if (rc == 0) {
        ch.next = g_children;
        g_children = &ch;
    }
    pthread_mutex_unlock(&g_lock);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(inp[0]);
    close(outp[1]);
    close(errp[1]);
    if (rc != 0) {
        close(outp[0]);
        close(errp[0]);
        rt_exec_fail(res, "[Errno %d] %s: '%s'", rc, strerror(rc), argv[0]);
        free(argv);
        return;
    }

    limit = g_cfg.exec_timeout_s;
    if (limit_s > 0 && limit_s < limit) {
        limit = limit_s;
        own_limit = 1;
    }
    deadline = start + limit;
    pf[0].fd = outp[0];
    pf[1].fd = errp[0];
    pf[0].events = pf[1].events = POLLIN;
    while (pf[0].fd >= 0 || pf[1].fd >= 0) {
        double left = deadline - rt_now();
        int pr;
        if (left <= 0) {
            if (timed_out)
                break; /* something outside the group holds the pipes: give up on them */
            kill(-ch.pid, SIGKILL);
            timed_out = 1;
            deadline = rt_now() + 2;
            continue;
        }
        if (c && !*head_sent) {
            double slow = start + RT_EARLY_HEAD_AFTER_S - rt_now();
            if (slow <= 0) {
                *head_sent = 1;
                if (rt_exec_head(c))
                    c->keep_alive = 0; /* the client is gone; the command runs to its end */
                continue;
            }
            if (slow < left)
                left = slow;
        }
        if (left > 3600)
            left = 3600; /* poll takes an int of ms; the loop waits again */
        pr = poll(pf, 2, (int)(left * 1000) + 1);
        if (pr < 0 && errno != EINTR)
            break;
        if (pr <= 0)
            continue;
        if (pf[0].fd >= 0 && pf[0].revents)
            rt_drain_pipe(&pf[0].fd, &res->out, &cut_out);
        if (pf[1].fd >= 0 && pf[1].revents)
            rt_drain_pipe(&pf[1].fd, &res->err, &cut_err);
    }
    if (pf[0].fd >= 0)
        close(pf[0].fd);
    if (pf[1].fd >= 0)
        close(pf[1].fd);

    pthread_mutex_lock(&g_lock);
    while (!ch.done) {
        struct timespec ts;
        if (rt_now() >= deadline) {
            if (timed_out)
                break;
            kill(-ch.pid, SIGKILL);
            timed_out = 1;
            deadline = rt_now() + 2;
        }
        ts = rt_abs_time(deadline);
        pthread_cond_timedwait(&g_cond, &g_lock, &ts);
    }
    for (struct rt_child **pp = &g_children; *pp; pp = &(*pp)->next)
        if (*pp == &ch) {
            *pp = ch.next;
            break;
        }
    pthread_mutex_unlock(&g_lock);

    if (timed_out && own_limit) {
        res->exit_code = 124;
        res->timed_out = 1;
        if (cut_out)
            rt_buf_printf(&res->out, "\n[agentsandbox-runtime: stdout cut after %zu bytes]\n", g_cfg.max_output);
        if (cut_err)
            rt_buf_printf(&res->err, "\n[agentsandbox-runtime: stderr cut after %zu bytes]\n", g_cfg.max_output);
        rt_buf_printf(&res->err, "%sCommand timed out after %g seconds\n",
                      res->err.len && res->err.p[res->err.len - 1] != '\n' ? "\n" : "", limit);
    } else if (timed_out) {
        rt_exec_fail(res, "Command '%s' timed out after %g seconds", cmd, g_cfg.exec_timeout_s);
    } else if (!ch.done) {
        rt_exec_fail(res, "lost track of the process");
    } else {
        res->exit_code = WIFEXITED(ch.status) ? WEXITSTATUS(ch.status)
                       : WIFSIGNALED(ch.status) ? -WTERMSIG(ch.status) : 1;
        if (cut_out)
            rt_buf_printf(&res->out, "\n[agentsandbox-runtime: stdout cut after %zu bytes]\n", g_cfg.max_output);
        if (cut_err)
            rt_buf_printf(&res->err, "\n[agentsandbox-runtime: stderr cut after %zu bytes]\n", g_cfg.max_output);
    }
    free(argv);
}

/* Reaps every child, ours or adopted, and hands statuses to the threads
   waiting for them. Peeks with WNOWAIT before taking the lock so a child
   spawned under the lock is always registered before it is reaped. */
static void rt_reap_all(void)
{
    for (int round = 0; round < 4096; round++) {
        siginfo_t si;
        int status;
        pid_t pid;
        memset(&si, 0, sizeof si);
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) || si.si_pid == 0)
            return;
        pthread_mutex_lock(&g_lock);
        pid = waitpid(si.si_pid, &status, WNOHANG);
        if (pid > 0) {
            for (struct rt_child *ch = g_children; ch; ch = ch->next)
                if (ch->pid == pid) {
                    ch->done = 1;
                    ch->status = status;
                    pthread_cond_broadcast(&g_cond);
                }
        }
        pthread_mutex_unlock(&g_lock);
    }
}

/* >>handlers ============================================================== */

/* Buffered writer for responses streamed after their head (execute). */
struct rt_out {
    struct rt_conn *c;
    char *b;
    size_t len, cap;
    int failed;
};

static void rt_out_flush(struct rt_out *o)
{
    if (!o->failed && o->len && rt_send_all(o->c, o->b, o->len, 0))
        o->failed = 1;
    o->len = 0;
}

static void rt_out_add(struct rt_out *o, const char *p, size_t n)
{
    while (n && !o->failed) {
        size_t k = o->cap - o->len;
        if (k > n)
            k = n;
        memcpy(o->b + o->len, p, k);
        o->len += k;
        p += k;
        n -= k;
        if (o->len == o->cap)
            rt_out_flush(o);
    }
}

static void rt_out_escaped(struct rt_out *o, const struct rt_buf *src)
{
    size_t pos = 0;
    while (pos < src->len && !o->failed) {
        if (o->cap - o->len < 64)
            rt_out_flush(o);
        o->len += rt_json_escape_step((const unsigned char *)src->p, src->len, &pos, o->b + o->len, o->cap - o->len);
    }
}

/* The head of an /execute answer, sent while a command still runs after
   RT_EARLY_HEAD_AFTER_S: a proxy that bounds its wait for a response head
   (the Go sandbox-router's --response-header-timeout, 30 s) then lets a
   long command through. Not at once, though: a head that comes back within
   moments of the request body races the Go router's own request handling
   (net/http, golang/go#40747). Its transport, having copied the body's
   Content-Length bytes to us, reads the inbound body once more to see it
   end; the router meanwhile forwards our head, and writing a head makes its
   HTTP server drain and close that inbound body. When the close wins, the
   transport's read fails ("invalid Read on closed Body"), it tears down
   its connection to us, our body lands on a closed socket (RST), the
   router aborts its answer after the head ("ReverseProxy read error during
   body copy: use of closed network connection"), and a client behind
   kubectl port-forward never sees that close: it waits for its deadline.
   Seen with every head sent at once: a_hundred_live_sandboxes_share_one_kubectl
   (tests/test_sdk_cluster.c) timed out on one echo in 6 of 7 runs, the
   wire showing the router's FIN 0.3-0.5 ms after our head. Our framing is not
   involved (one chunk and the 0-chunk, or the close on HTTP/1.0). The
   window is the router's scheduling delay, which nothing on the wire tells
   us about, so the head waits until the command has run 1 s: a quick
   command is answered whole, as the reference answers everything. The
   status is known already: whatever the command does, the answer is 200
   (a failure to start is exit_code 1). The same JSON body follows when the
   command ends, as one chunk (HTTP/1.1: requests, the Go router and
   agentsandbox.h parse chunked bodies), or closed at its end for HTTP/1.0,
   which has no chunks. */
static int rt_exec_head(struct rt_conn *c)
{
    char head[512];
    int n;
    const char *framing;
    if (atomic_load(&g_stopping))
        c->keep_alive = 0;
    if (c->req.minor_version == 0) {
        c->keep_alive = 0; /* the end of the body is the close */
        framing = "Connection: close\r\n";
    } else {
        framing = c->keep_alive ? "Transfer-Encoding: chunked\r\n"
                                : "Transfer-Encoding: chunked\r\nConnection: close\r\n";
    }
    n = snprintf(head, sizeof head, "HTTP/1.1 200 %s\r\nDate: %s\r\nContent-Type: application/json\r\n%s\r\n",
                 rt_reason(200), rt_http_date(), framing);
    c->status = 200;
    c->responded = 1;
    return rt_send_all(c, head, n < 0 ? 0 : (size_t)n, 0);
}

/* The whole answer of a quick command: head and body, Content-Length. */
static void rt_respond_exec(struct rt_conn *c, const struct rt_exec_result *res)
{
    static const char k_out[] = "{\"stdout\":\"", k_err[] = "\",\"stderr\":\"";
    char tail[64], head[512];
    int tl = snprintf(tail, sizeof tail, "\",\"exit_code\":%d%s}", res->exit_code,
                      res->timed_out ? ",\"timed_out\":true" : "");
    unsigned long long body_len = (sizeof k_out - 1) + rt_json_escaped_len(res->out.p, res->out.len) +
                                  (sizeof k_err - 1) + rt_json_escaped_len(res->err.p, res->err.len) + (size_t)tl;
    struct rt_out o = {c, NULL, 0, RT_IO_CHUNK, 0};
    size_t hl = rt_format_head(c, head, sizeof head, 200, "application/json", body_len, NULL);
    o.b = malloc(o.cap);
    if (!o.b) {
        c->keep_alive = 0;
        return; /* the head is not sent yet: the client sees a closed connection */
    }
    rt_out_add(&o, head, hl);
    rt_out_add(&o, k_out, sizeof k_out - 1);
    rt_out_escaped(&o, &res->out);
    rt_out_add(&o, k_err, sizeof k_err - 1);
    rt_out_escaped(&o, &res->err);
    rt_out_add(&o, tail, (size_t)tl);
    rt_out_flush(&o);
    free(o.b);
}

/* The body after an early head (rt_exec_head): one chunk, or the bytes
   up to the close on HTTP/1.0. */
static void rt_respond_exec_body(struct rt_conn *c, const struct rt_exec_result *res)
{
    static const char k_out[] = "{\"stdout\":\"", k_err[] = "\",\"stderr\":\"";
    char tail[64], size[32];
    int tl = snprintf(tail, sizeof tail, "\",\"exit_code\":%d%s}", res->exit_code,
                      res->timed_out ? ",\"timed_out\":true" : "");
    unsigned long long body_len = (sizeof k_out - 1) + rt_json_escaped_len(res->out.p, res->out.len) +
                                  (sizeof k_err - 1) + rt_json_escaped_len(res->err.p, res->err.len) + (size_t)tl;
    int chunked = c->req.minor_version != 0;
    struct rt_out o = {c, NULL, 0, RT_IO_CHUNK, 0};
    o.b = malloc(o.cap);
    if (!o.b) {
        c->keep_alive = 0;
        return; /* the body never completes: the client sees it cut off */
    }
    if (chunked) {
        int sl = snprintf(size, sizeof size, "%llx\r\n", body_len);
        rt_out_add(&o, size, (size_t)sl);
    }
    rt_out_add(&o, k_out, sizeof k_out - 1);
    rt_out_escaped(&o, &res->out);
    rt_out_add(&o, k_err, sizeof k_err - 1);
    rt_out_escaped(&o, &res->err);
    rt_out_add(&o, tail, (size_t)tl);
    if (chunked)
        rt_out_add(&o, "\r\n0\r\n\r\n", 7);
    rt_out_flush(&o);
    if (o.failed)
        c->keep_alive = 0;
    free(o.b);
}

static int rt_is_json_type(const char *ct, size_t n)
{
    size_t i = 0;
    while (i < n && ct[i] != ';' && ct[i] != ' ' && ct[i] != '\t')
        i++;
    if (rt_ieq(ct, i, "application/json"))
        return 1;
    /* application/<anything>+json, as FastAPI accepts */
    return i > 17 && rt_ieq(ct, 12, "application/") && rt_ieq(ct + i - 5, 5, "+json");
}

static void rt_handle_execute(struct rt_conn *c)
{
    int head_sent = 0;
    struct rt_buf body = {0}, command = {0};
    struct rt_exec_result res = {{0}, {0}, 0, 0};
    const char *p, *why;
    double timeout_s = 0;
    size_t n;
    int rc;

    if (rt_body_begin(c, g_cfg.max_json))
        return;
    while ((rc = rt_body_next(c, &p, &n)) > 0) {
        if (body.len + n > g_cfg.max_json) {
            c->body_error = 413;
            rc = -1;
            break;
        }
        if (rt_buf_add(&body, p, n)) {
            rt_buf_free(&body);
            c->keep_alive = 0;
            rt_respond_text(c, 500, "message", "out of memory");
            return;
        }
    }
    if (rc < 0) {
        rt_buf_free(&body);
        rt_respond_body_error(c);
        return;
    }
    if (c->req.content_type && !rt_is_json_type(c->req.content_type, c->req.content_type_len)) {
        rt_buf_free(&body);
        rt_respond_422(c, "model_attributes_type", "[\"body\"]",
                       "Input should be a valid dictionary or object to extract fields from (send Content-Type: application/json)");
        return;
    }
    rc = rt_parse_execute_body((const unsigned char *)(body.p ? body.p : ""), body.len, &command, &timeout_s,
                               &why);
    rt_buf_free(&body);
    switch (rc) {
    case RT_CMD_OK:
        rt_run_command(command.p, command.len, timeout_s, &res, c, &head_sent);
        if (head_sent)
            rt_respond_exec_body(c, &res);
        else
            rt_respond_exec(c, &res);
        break;
    case RT_CMD_BAD_JSON:
        rt_respond_422(c, "json_invalid", "[\"body\",0]", why ? why : "JSON decode error");
        break;
    case RT_CMD_NOT_OBJECT:
        rt_respond_422(c, "model_attributes_type", "[\"body\"]", "Input should be a valid dictionary or object to extract fields from");
        break;
    case RT_CMD_MISSING:
        rt_respond_422(c, "missing", "[\"body\",\"command\"]", "Field required");
        break;
    case RT_CMD_NOT_STRING:
        rt_respond_422(c, "string_type", "[\"body\",\"command\"]", "Input should be a valid string");
        break;
    case RT_CMD_BAD_TIMEOUT:
        rt_respond_422(c, "float_type", "[\"body\",\"timeout_seconds\"]", why);
        break;
    default:
        c->keep_alive = 0;
        rt_respond_text(c, 500, "message", "out of memory");
        break;
    }
    rt_buf_free(&command);
    rt_buf_free(&res.out);
    rt_buf_free(&res.err);
}

/* Upload: the "file" part is streamed into a temporary file next to the
   destination and renamed over it only once the whole body has arrived, so
   a cut-off upload never leaves a truncated file behind. */
struct rt_upload {
    struct rt_conn *c;
    int chosen, in_part, part_done;
    int fail_status;            /* decided inside a callback */
    int fail_errno;
    const char *fail_text;
    int dirfd, dirfd_owned;
    int tmp_fd;
    char tmp_name[64];
    char final_name[NAME_MAX + 1];
    int keep_mode;
    mode_t mode;
    char filename[RT_MP_FILENAME_MAX + 1];
    size_t filename_len;
};

static atomic_uint g_upload_seq;

static int rt_upload_fail(struct rt_upload *u, int status, int err, const char *text)
{
    u->fail_status = status;
    u->fail_errno = err;
    u->fail_text = text;
    return 1;
}

/* Creates the missing directories of r under r->dirfd; leaves the parent
   of the final name in u. */
static int rt_upload_make_parents(struct rt_upload *u, struct rt_resolved *r)
{
    const char *name = r->pending.p;
    int dir = r->dirfd, owned = 0;
    for (size_t i = 0; i + 1 < r->pending_count; i++) {
        int nd;
        if (mkdirat(dir, name, 0777) && errno != EEXIST) {
            int e = errno;
            if (owned)
                close(dir);
            return rt_upload_fail(u, 500, e, NULL);
        }
        nd = openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nd < 0) {
            int e = errno == ELOOP ? ENOTDIR : errno;
            if (owned)
                close(dir);
            return rt_upload_fail(u, 500, e, NULL);
        }
        if (owned)
            close(dir);
        dir = nd;
        owned = 1;
        name += strlen(name) + 1;
    }
    if (!owned) {
        /* keep the resolver's fd: take it over */
        u->dirfd = r->dirfd;
        u->dirfd_owned = r->dirfd_owned;
        r->dirfd_owned = 0;
    } else {
        u->dirfd = dir;
        u->dirfd_owned = 1;
    }
    memcpy(u->final_name, name, strlen(name) + 1);
    return 0;
}

static int rt_upload_begin(void *ctx, const struct rt_part_info *part)
{
    struct rt_upload *u = ctx;
    struct rt_resolved r;
    const char *rel;
    size_t rel_len;
    int rc = 0;

    u->in_part = 0;
    if (u->chosen || !part->has_name || strcmp(part->name, "file"))
        return 0;
    if (!part->has_filename)
        return rt_upload_fail(u, 422, 0, "the \"file\" part has no filename");
    u->chosen = 1;
    memcpy(u->filename, part->filename, part->filename_len + 1);
    u->filename_len = part->filename_len;
    rel = u->filename;
    rel_len = u->filename_len;
    while (rel_len && *rel == '/') {
        rel++;
        rel_len--;
    }
    rt_resolve(rel, rel_len, &r);
    switch (r.status) {
    case RT_PATH_DENIED:
        rc = rt_upload_fail(u, 403, 0, NULL);
        break;
    case RT_PATH_ERROR:
        rc = rt_upload_fail(u, 500, r.err, NULL);
        break;
    case RT_PATH_FOUND:
        if (r.target_is_dir) {
            rc = rt_upload_fail(u, 500, EISDIR, NULL);
        } else if (!S_ISREG(r.st.st_mode)) {
            rc = rt_upload_fail(u, 500, 0, "the destination exists and is not a regular file");
        } else {
            u->dirfd = r.dirfd;
            u->dirfd_owned = r.dirfd_owned;
            r.dirfd_owned = 0;
            memcpy(u->final_name, r.name, strlen(r.name) + 1);
            u->keep_mode = 1;
            u->mode = r.st.st_mode & 07777;
        }
        break;
    default:
        rc = rt_upload_make_parents(u, &r);
        break;
    }
    rt_resolved_free(&r);
    if (rc)
        return rc;
    for (int attempt = 0; attempt < 16; attempt++) {
        snprintf(u->tmp_name, sizeof u->tmp_name, ".agentsandbox-upload.%ld.%u",
                 (long)getpid(), atomic_fetch_add(&g_upload_seq, 1));
        u->tmp_fd = openat(u->dirfd, u->tmp_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (u->tmp_fd >= 0 || errno != EEXIST)
            break;
    }
    if (u->tmp_fd < 0) {
        u->tmp_name[0] = 0;
        return rt_upload_fail(u, 500, errno, NULL);
    }
    u->in_part = 1;
    return 0;
}

static int rt_upload_data(void *ctx, const char *p, size_t n)
{
    struct rt_upload *u = ctx;
    if (!u->in_part)
        return 0;
    while (n) {
        ssize_t w = write(u->tmp_fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return rt_upload_fail(u, 500, w < 0 ? errno : EIO, NULL);
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int rt_upload_end(void *ctx)
{
    struct rt_upload *u = ctx;
    if (u->in_part) {
        u->in_part = 0;
        u->part_done = 1;
    }
    return 0;
}

static void rt_upload_cleanup(struct rt_upload *u)
{
    if (u->tmp_fd >= 0)
        close(u->tmp_fd);
    if (u->tmp_name[0] && u->dirfd >= 0)
        unlinkat(u->dirfd, u->tmp_name, 0);
    if (u->dirfd_owned && u->dirfd >= 0)
        close(u->dirfd);
}

static void rt_upload_respond_fail(struct rt_conn *c, struct rt_upload *u)
{
    char msg[512];
    if (u->fail_status == 403) {
        rt_respond_text(c, 403, "message", "Access denied");
    } else if (u->fail_status == 422) {
        rt_respond_422(c, "missing", "[\"body\",\"file\"]", u->fail_text ? u->fail_text : "Field required");
    } else {
        snprintf(msg, sizeof msg, "File upload failed: %s",
                 u->fail_text ? u->fail_text : strerror(u->fail_errno));
        rt_respond_text(c, 500, "message", msg);
    }
}

static void rt_handle_upload(struct rt_conn *c)
{
    struct rt_multipart *mp;
    struct rt_upload u;
    struct rt_multipart_cb cb = {rt_upload_begin, rt_upload_data, rt_upload_end, NULL};
    char boundary[80];
    size_t blen = 0;
    const char *p;
    size_t n;
    int rc, kind;

    memset(&u, 0, sizeof u);
    u.c = c;
    u.dirfd = u.tmp_fd = -1;
    cb.ctx = &u;
    kind = c->req.content_type ? rt_multipart_boundary(c->req.content_type, c->req.content_type_len, boundary, &blen) : 1;
    if (kind == 1) {
        rt_respond_422(c, "missing", "[\"body\",\"file\"]", "Field required (send multipart/form-data with a \"file\" part)");
        return;
    }
    if (kind < 0) {
        rt_respond_text(c, 400, "detail", "There was an error parsing the body: bad multipart boundary");
        return;
    }
    if (rt_body_begin(c, g_cfg.max_body))
        return;
    mp = malloc(sizeof *mp);
    if (!mp) {
        c->keep_alive = 0;
        rt_respond_text(c, 500, "message", "File upload failed: out of memory");
        return;
    }
    rt_multipart_init(mp, boundary, blen, &cb);
    while ((rc = rt_body_next(c, &p, &n)) > 0) {
        if (rt_multipart_feed(mp, p, n)) {
            rc = -2;
            break;
        }
    }
    if (rc == 0 && rt_multipart_finish(mp))
        rc = -2;
    if (rc == -1) {
        rt_respond_body_error(c);
    } else if (rc == -2) {
        if (u.fail_status)
            rt_upload_respond_fail(c, &u);
        else {
            char msg[256];
            snprintf(msg, sizeof msg, "There was an error parsing the body: %s", mp->error ? mp->error : "malformed");
            rt_respond_text(c, 400, "detail", msg);
        }
    } else if (!u.chosen || !u.part_done) {
        rt_respond_422(c, "missing", "[\"body\",\"file\"]", "Field required");
    } else {
        int failed = 0;
        if (u.keep_mode && fchmod(u.tmp_fd, u.mode))
            failed = errno;
        if (!failed && close(u.tmp_fd))
            failed = errno;
        u.tmp_fd = -1;
        if (!failed && renameat(u.dirfd, u.tmp_name, u.dirfd, u.final_name))
            failed = errno;
        if (failed) {
            rt_upload_fail(&u, 500, failed, NULL);
            rt_upload_respond_fail(c, &u);
        } else {
            struct rt_buf msg = {0}, out = {0};
            u.tmp_name[0] = 0; /* renamed: nothing to remove */
            if (rt_buf_str(&msg, "File '") || rt_buf_add(&msg, u.filename, u.filename_len) ||
                rt_buf_str(&msg, "' uploaded successfully.") || rt_buf_str(&out, "{\"message\":") ||
                rt_buf_json_string(&out, msg.p, msg.len) || rt_buf_str(&out, "}"))
                rt_respond_text(c, 500, "message", "out of memory");
            else
                rt_respond_json(c, 200, &out);
            rt_buf_free(&msg);
            rt_buf_free(&out);
        }
    }
    rt_upload_cleanup(&u);
    free(mp);
}

/* Decodes the path part of /download/<enc> etc. Returns the decoded bytes
   (malloc'd, NUL-terminated) or NULL after answering 400. */
static char *rt_decode_path_param(struct rt_conn *c, const char *s, size_t n, size_t *out_len)
{
    char *out = malloc(n + 1);
    long k;
    if (!out) {
        c->keep_alive = 0;
        rt_respond_text(c, 500, "message", "out of memory");
        return NULL;
    }
    k = rt_percent_decode(s, n, out);
    if (k < 0) {
        free(out);
        rt_respond_text(c, 400, "detail", "Malformed percent-encoding in the path");
        return NULL;
    }
    out[k] = 0;
    *out_len = (size_t)k;
    return out;
}

static void rt_strip_leading_slashes(const char **p, size_t *n)
{
    while (*n && **p == '/') {
        (*p)++;
        (*n)--;
    }
}

/* Starlette's FileResponse header: filename="x" when the name needs no
   quoting, else RFC 5987 filename*=. */
static void rt_content_disposition(const char *name, size_t n, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0, i;
    int plain = 1;
    char enc[700];
    out[0] = 0;
    for (i = 0; i < n && o + 3 < sizeof enc; i++) {
        unsigned char ch = (unsigned char)name[i];
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || strchr("_.-~/", ch)) {
            enc[o++] = (char)ch;
        } else {
            plain = 0;
            enc[o++] = '%';
            enc[o++] = hex[ch >> 4];
            enc[o++] = hex[ch & 15];
        }
    }
    if (i < n)
        return; /* too long to be worth a header */
    enc[o] = 0;
    if (plain)
        snprintf(out, cap, "Content-Disposition: attachment; filename=\"%s\"\r\n", enc);
    else
        snprintf(out, cap, "Content-Disposition: attachment; filename*=utf-8''%s\r\n", enc);
}

static void rt_handle_download(struct rt_conn *c, const char *enc, size_t enc_len)
{
    size_t plen, rel_len;
    char *path = rt_decode_path_param(c, enc, enc_len, &plen);
    const char *rel;
    struct rt_resolved r;
    char disp[800], head[1200];
    int fd;

    if (!path)
        return;
    rel = path;
    rel_len = plen;
    rt_strip_leading_slashes(&rel, &rel_len);
    rt_resolve(rel, rel_len, &r);
    if (r.status == RT_PATH_DENIED) {
        rt_respond_text(c, 403, "message", "Access denied");
        goto out;
    }
    fd = rt_open_found_file(&r);
    if (fd < 0) {
        rt_respond_text(c, 404, "message", "File not found");
        goto out;
    }
    {
        struct stat st;
        unsigned long long size;
        size_t hl;
        fstat(fd, &st);
        size = (unsigned long long)st.st_size;
        rt_content_disposition(path, plen, disp, sizeof disp);
        hl = rt_format_head(c, head, sizeof head, 200, "application/octet-stream", size, disp);
        if (c->is_head) {
            rt_send_all(c, head, hl, 0);
        } else if (size <= RT_IO_CHUNK) {
            /* Small file: one writev for head and body, like nginx's
               sendfile+headers fast path. */
            /* Read into the free tail of the connection buffer: bytes
               before c->len may be the next pipelined request. */
            char *body = c->cap - c->len >= size ? c->buf + c->len : malloc(size ? (size_t)size : 1);
            ssize_t got = !body ? -1 : size ? pread(fd, body, (size_t)size, 0) : 0;
            struct iovec iov[2];
            if (got != (ssize_t)size) {
                c->keep_alive = 0; /* file changed under us: cut the response */
            } else {
                iov[0].iov_base = head;
                iov[0].iov_len = hl;
                iov[1].iov_base = body;
                iov[1].iov_len = (size_t)size;
                rt_writev_all(c, iov, size ? 2 : 1);
            }
            if (body && body != c->buf + c->len)
                free(body);
        } else if (!rt_send_all(c, head, hl, 1)) {
            off_t off = 0;
            while ((unsigned long long)off < size) {
                size_t want = size - (unsigned long long)off > (1u << 30) ? (1u << 30) : (size_t)(size - (unsigned long long)off);
                ssize_t w = sendfile(c->fd, fd, &off, want);
                if (w < 0 && errno == EINTR)
                    continue;
                if (w <= 0) {
                    c->keep_alive = 0; /* truncated file or gone client: the length is a lie now */
                    break;
                }
                c->sent += (unsigned long long)w;
            }
        }
        close(fd);
    }
out:
    rt_resolved_free(&r);
    free(path);
}

/* Python's repr() of a float: the shortest decimal that reads back exact. */
static void rt_format_double(double v, char *out, size_t cap)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, cap, "%.*g", prec, v);
        if (strtod(out, NULL) == v && !strchr(out, 'e'))
            break;
        if (prec == 17)
            snprintf(out, cap, "%.17g", v);
    }
    if (!strpbrk(out, ".en") && strlen(out) + 3 <= cap)
        strcat(out, ".0");
}

static void rt_handle_list(struct rt_conn *c, const char *enc, size_t enc_len)
{
    size_t plen, rel_len;
    char *path = rt_decode_path_param(c, enc, enc_len, &plen);
    const char *rel;
    struct rt_resolved r;
    struct rt_buf b = {0};
    DIR *d = NULL;
    struct dirent *e;
    int dfd, first = 1, oom = 0;

    if (!path)
        return;
    rel = path;
    rel_len = plen;
    rt_strip_leading_slashes(&rel, &rel_len);
    rt_resolve(rel, rel_len, &r);
    if (r.status == RT_PATH_DENIED) {
        rt_respond_text(c, 403, "message", "Access denied");
        goto out;
    }
    if (r.status != RT_PATH_FOUND || !r.target_is_dir ||
        (dfd = openat(r.dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        rt_respond_text(c, 404, "message", "Path is not a directory");
        goto out;
    }
    d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        rt_respond_text(c, 500, "message", strerror(errno));
        goto out;
    }
    oom |= rt_buf_add(&b, "[", 1);
    while (!oom && (e = readdir(d)) != NULL) {
        struct stat st;
        char mt[64];
        double mtime;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW))
            continue; /* vanished since readdir */
        if (S_ISLNK(st.st_mode)) {
            /* Describe what the link points at only when that is inside the
               base; otherwise the link itself, so nothing outside leaks. */
            struct rt_buf lp = {0};
            struct rt_resolved lr;
            if (!rt_buf_add(&lp, rel, rel_len) && !rt_buf_add(&lp, "/", 1) && !rt_buf_str(&lp, e->d_name)) {
                if (rt_resolve(lp.p, lp.len, &lr) == RT_PATH_FOUND)
                    st = lr.st;
                rt_resolved_free(&lr);
            }
            rt_buf_free(&lp);
        }
        mtime = (double)st.st_mtim.tv_sec + (double)st.st_mtim.tv_nsec * 1e-9;
        rt_format_double(mtime, mt, sizeof mt);
        oom |= rt_buf_str(&b, first ? "{\"name\":" : ",{\"name\":");
        oom |= rt_buf_json_string(&b, e->d_name, strlen(e->d_name));
        oom |= rt_buf_printf(&b, ",\"size\":%lld,\"type\":\"%s\",\"mod_time\":%s}", (long long)st.st_size,
                             S_ISDIR(st.st_mode) ? "directory" : "file", mt);
        first = 0;
    }
    oom |= rt_buf_add(&b, "]", 1);
    if (oom)
        rt_respond_text(c, 500, "message", "out of memory");
    else
        rt_respond_json(c, 200, &b);
out:
    if (d)
        closedir(d);
    rt_buf_free(&b);
    rt_resolved_free(&r);
    free(path);
}

static void rt_handle_exists(struct rt_conn *c, const char *enc, size_t enc_len)
{
    size_t plen, rel_len;
    char *path = rt_decode_path_param(c, enc, enc_len, &plen);
    const char *rel;
    struct rt_resolved r;
    struct rt_buf b = {0};

    if (!path)
        return;
    rel = path;
    rel_len = plen;
    rt_strip_leading_slashes(&rel, &rel_len);
    rt_resolve(rel, rel_len, &r);
    if (r.status == RT_PATH_DENIED) {
        rt_respond_text(c, 403, "message", "Access denied");
    } else if (rt_buf_str(&b, "{\"path\":") || rt_buf_json_string(&b, path, plen) ||
               rt_buf_printf(&b, ",\"exists\":%s}", r.status == RT_PATH_FOUND ? "true" : "false")) {
        rt_respond_text(c, 500, "message", "out of memory");
    } else {
        rt_respond_json(c, 200, &b);
    }
    rt_buf_free(&b);
    rt_resolved_free(&r);
    free(path);
}

static int rt_method_is(const struct rt_request *req, const char *m)
{
    return req->method_len == strlen(m) && !memcmp(req->method, m, req->method_len);
}

static void rt_dispatch(struct rt_conn *c)
{
    const struct rt_request *req = &c->req;
    const char *path = req->target;
    const char *q = memchr(path, '?', req->target_len);
    size_t n = q ? (size_t)(q - path) : req->target_len;
    int get = rt_method_is(req, "GET") || rt_method_is(req, "HEAD");
    int post = rt_method_is(req, "POST");
    static const struct { const char *prefix; int kind; } routes[] = {
        {"/download/", 1}, {"/list/", 2}, {"/exists/", 3},
    };

    c->is_head = rt_method_is(req, "HEAD");
    if (n == 1 && path[0] == '/') {
        if (!get)
            goto not_allowed_get;
        rt_respond(c, 200, "application/json", NULL, "{\"status\":\"ok\",\"message\":\"Sandbox Runtime is active.\"}", 54);
        return;
    }
    if (n == 8 && !memcmp(path, "/execute", 8)) {
        if (!post)
            goto not_allowed_post;
        rt_handle_execute(c);
        return;
    }
    if (n == 7 && !memcmp(path, "/upload", 7)) {
        if (!post)
            goto not_allowed_post;
        rt_handle_upload(c);
        return;
    }
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        size_t pl = strlen(routes[i].prefix);
        if (n >= pl && !memcmp(path, routes[i].prefix, pl)) {
            if (!get)
                goto not_allowed_get;
            if (routes[i].kind == 1)
                rt_handle_download(c, path + pl, n - pl);
            else if (routes[i].kind == 2)
                rt_handle_list(c, path + pl, n - pl);
            else
                rt_handle_exists(c, path + pl, n - pl);
            return;
        }
    }
    rt_respond_text(c, 404, "detail", "Not Found");
    return;
not_allowed_get:
    c->is_head = 0;
    rt_respond(c, 405, "application/json", "Allow: GET, HEAD\r\n", "{\"detail\":\"Method Not Allowed\"}", 31);
    return;
not_allowed_post:
    c->is_head = 0;
    rt_respond(c, 405, "application/json", "Allow: POST\r\n", "{\"detail\":\"Method Not Allowed\"}", 31);
}

/* >>server (connection threads, signals, main) ============================= */

/* Reads the next request head into c->buf. Returns 1 when a whole head is
   there (c->head_len), 0 to close quietly (peer closed, idle timeout,
   shutdown), or an HTTP status to answer before closing. */
static int rt_read_head(struct rt_conn *c)
{
    size_t scanned = 0;
    double start = 0;
    int saved_errno;
    for (;;) {
        ssize_t r;
        /* RFC 9112 2.2: ignore empty lines before a request line. */
        while (c->len >= 2 && c->buf[0] == '\r' && c->buf[1] == '\n') {
            memmove(c->buf, c->buf + 2, c->len - 2);
            c->len -= 2;
        }
        if (c->len) {
            size_t from = scanned > 3 ? scanned - 3 : 0;
            char *end = memmem(c->buf + from, c->len - from, "\r\n\r\n", 4);
            size_t stop = end ? (size_t)(end - c->buf) : c->len;
            for (size_t i = scanned; i < stop; i++)
                if (c->buf[i] == '\n' && (i == 0 || c->buf[i - 1] != '\r'))
                    return 400; /* bare LF: we only speak CRLF */
            if (end) {
                c->head_len = (size_t)(end - c->buf) + 4;
                if (c->head_len > g_cfg.max_header)
                    return 431;
                c->body_pos = c->head_len;
                return 1;
            }
            scanned = c->len;
            if (c->len >= g_cfg.max_header)
                return 431;
            if (start == 0)
                start = rt_now();
            else if (rt_now() - start > g_cfg.header_timeout_s)
                return 408;
        }
        /* Bytes already there are taken without a wait, so a client that
           sent its request is never shed for a slow thread of ours. */
        r = recv(c->fd, c->buf + c->len, c->cap - c->len, MSG_DONTWAIT);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            /* Announce the wait so rt_shed may end it; an idle connection
               is ranked by how long it has been idle, a partial head by
               when it began (a slowloris keeps sending, never finishes). */
            pthread_mutex_lock(&g_lock);
            if (c->shed || (!c->len && atomic_load(&g_stopping))) {
                pthread_mutex_unlock(&g_lock);
                return 0;
            }
            c->waiting = c->len ? RT_WAIT_HEAD : c->served ? RT_WAIT_IDLE : RT_WAIT_NEW;
            c->wait_since = c->len ? start : rt_now();
            pthread_mutex_unlock(&g_lock);
            r = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
            saved_errno = errno;
            pthread_mutex_lock(&g_lock);
            c->waiting = RT_WAIT_NONE;
            if (c->shed) {
                /* Bytes that came with the shutdown are dropped with the
                   connection: no request of it has been started. */
                pthread_mutex_unlock(&g_lock);
                return 0;
            }
            pthread_mutex_unlock(&g_lock);
            errno = saved_errno;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return c->len ? 408 : 0;
        if (r <= 0)
            return 0;
        c->len += (size_t)r;
    }
}

/* Answer first, then read and drop what the client is still sending for a
   while, so closing does not reset the connection before it reads the
   answer (what nginx calls lingering close). */
static void rt_linger_close(int fd)
{
    char scratch[16384];
    double end = rt_now() + 2;
    shutdown(fd, SHUT_WR);
    for (;;) {
        struct pollfd pf = {fd, POLLIN, 0};
        double left = end - rt_now();
        if (left <= 0 || poll(&pf, 1, (int)(left * 1000) + 1) <= 0)
            break;
        if (recv(fd, scratch, sizeof scratch, MSG_DONTWAIT) <= 0)
            break;
    }
    close(fd);
}

static void rt_serve_conn(struct rt_conn *c)
{
    int linger = 0, shed;
    /* The accept loop listed it as waiting (RT_WAIT_NEW) so that a thread
       slow to start is not a slot nobody can take; from here the waits are
       announced where they happen. */
    pthread_mutex_lock(&g_lock);
    c->waiting = RT_WAIT_NONE;
    shed = c->shed;
    pthread_mutex_unlock(&g_lock);
    while (!shed) {
        int st = rt_read_head(c);
        double t0;
        if (st == 0)
            break;
        c->keep_alive = 0;
        c->is_head = 0;
        c->sent = 0;
        c->responded = 0;
        c->body_mode = 0;
        c->body_done = 1;
        c->body_error = 0;
        c->continue_sent = 0;
        if (st == 1)
            st = rt_parse_head(c->buf, c->head_len, &c->req);
        else
            memset(&c->req, 0, sizeof c->req);
        if (st != 1 && st != 0) {
            const char *m = c->req.error ? c->req.error
                          : st == 431 ? "request head larger than --max-header-bytes"
                          : st == 408 ? "request head timed out"
                          : "malformed request head (lines must end with CRLF)";
            char msg[160];
            snprintf(msg, sizeof msg, "Bad request: %s", m);
            rt_respond_text(c, st, "detail", st == 400 ? msg : m);
            linger = 1;
            break;
        }
        t0 = rt_now();
        c->keep_alive = c->req.keep_alive;
        c->body_done = !c->req.chunked && !(c->req.has_content_length && c->req.content_length);
        rt_dispatch(c);
        c->served = 1;
        if (g_cfg.access_log) {
            /* with the caller's trace context, so a request is found
               in a trace (its value is printable: checked above) */
            rt_log("%.*s %.*s %d %llu %.1fms%s%.*s", (int)c->req.method_len, c->req.method,
                   (int)(c->req.target_len > 200 ? 200 : c->req.target_len), c->req.target,
                   c->status, c->sent, (rt_now() - t0) * 1000,
                   c->req.traceparent ? " traceparent=" : "",
                   (int)(c->req.traceparent_len > 64 ? 64 : c->req.traceparent_len),
                   c->req.traceparent ? c->req.traceparent : "");
        }
        if (!c->body_done) {
            c->keep_alive = 0;
            linger = 1;
        }
        if (!c->keep_alive)
            break;
        memmove(c->buf, c->buf + c->body_pos, c->len - c->body_pos);
        c->len -= c->body_pos;
        c->head_len = c->body_pos = 0;
    }
    /* Out of the list before the close: the slot is free at once (a
       lingering close takes up to 2 s), and rt_shed, which only sees
       listed connections, never shuts a descriptor number reused since. */
    pthread_mutex_lock(&g_lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        g_conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    g_active--;
    if (c->shed)
        g_shed_pending--;
    pthread_cond_broadcast(&g_cond);
    pthread_mutex_unlock(&g_lock);
    if (linger)
        rt_linger_close(c->fd);
    else
        close(c->fd);
    free(c->buf);
    free(c);
}

/* A worker serves one connection after another: the accept loop queues a
   new one for an idle worker and starts a thread only when none is idle.
   So the threads the kernel lists outnumber g_threads only by workers
   still ending after they counted themselves out, which happens only to
   a worker idle for RT_WORKER_IDLE_S: for microseconds, and only when a
   burst comes just as idle workers retire, never through a flood. */
static void *rt_worker_main(void *arg)
{
    struct rt_conn *c = arg;
    for (;;) {
        struct timespec ts;
        rt_serve_conn(c);
        ts = rt_abs_time(rt_now() + RT_WORKER_IDLE_S);
        pthread_mutex_lock(&g_lock);
        g_idle++;
        pthread_cond_broadcast(&g_cond);
        while (!g_handoff && !atomic_load(&g_stopping))
            if (pthread_cond_timedwait(&g_work_cond, &g_lock, &ts) == ETIMEDOUT)
                break;
        c = g_handoff;
        if (c) {
            /* The accept loop counted this one out of g_idle when it queued it. */
            g_handoff = c->handoff_next;
            pthread_mutex_unlock(&g_lock);
            continue;
        }
        g_idle--;
        g_threads--;
        pthread_cond_broadcast(&g_cond);
        pthread_mutex_unlock(&g_lock);
        return NULL;
    }
}

static void *rt_reaper_main(void *arg)
{
    sigset_t set;
    (void)arg;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    for (;;) {
        struct timespec ts = {1, 0};
        int sig;
        rt_reap_all();
        sig = sigtimedwait(&set, NULL, &ts);
        if ((sig == SIGTERM || sig == SIGINT) && !atomic_exchange(&g_stopping, 1)) {
            rt_log("received %s, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            if (write(g_stop_pipe[1], "x", 1) < 0) {
                /* the accept loop also polls g_stopping */
            }
        }
    }
    return NULL;
}

static int rt_listen(void)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    int fd, one = 1;
    char shown[INET6_ADDRSTRLEN], timeout[40];
    memset(&ss, 0, sizeof ss);
    if (inet_pton(AF_INET, g_cfg.listen_addr, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
        ((struct sockaddr_in *)&ss)->sin_family = AF_INET;
        ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)g_cfg.port);
        sl = sizeof(struct sockaddr_in);
    } else if (inet_pton(AF_INET6, g_cfg.listen_addr, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
        ((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)g_cfg.port);
        sl = sizeof(struct sockaddr_in6);
    } else {
        rt_log("--listen %s is not an IPv4 or IPv6 address (host names are not resolved)", g_cfg.listen_addr);
        return -1;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rt_log("socket: %s", strerror(errno));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) || listen(fd, 1024)) {
        rt_log("cannot listen on %s port %d: %s", g_cfg.listen_addr, g_cfg.port, strerror(errno));
        close(fd);
        return -1;
    }
    sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    if (ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, shown, sizeof shown);
    else
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, shown, sizeof shown);
    /* The timeout as the shortest decimal that reads back exact, so a
       test (or a person) sees the value in force, not a rounding of it. */
    for (int prec = 1; prec <= 17; prec++) {
        double v = g_cfg.exec_timeout_s;
        snprintf(timeout, sizeof timeout, "%.*g", prec, v);
        if (strtod(timeout, NULL) == v && (!strchr(timeout, 'e') || v < 1e-4 || v >= 1e16))
            break;
    }
    rt_log("listening on %s port %d, base dir %s, exec timeout %ss", shown,
           ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port : ((struct sockaddr_in6 *)&ss)->sin6_port),
           g_base_real, timeout);
    return fd;
}

static void rt_wait_connections(double until)
{
    pthread_mutex_lock(&g_lock);
    while (g_active > 0 && rt_now() < until) {
        struct timespec ts = rt_abs_time(until);
        pthread_cond_timedwait(&g_cond, &g_lock, &ts);
    }
    pthread_mutex_unlock(&g_lock);
}

/* Load shedding. A connection costs a thread and a slot whatever its
   client does, so without this, --max-connections clients that connect and
   send nothing (or trickle a head, or a body) would lock everyone else out
   for the idle timeout, and again each time they reconnect. Instead the
   accept loop never stops accepting: a new connection over the limit takes
   the slot of the one waiting for its client with the least to lose (see
   rt_shed_victim); when slots run short, connections that sent nothing for
   RT_PRESSURE_IDLE_S, or stalled in a request for RT_PRESSURE_STALL_S, are
   closed at once instead of after the idle or header timeout. Only when
   every slot is doing work (running a command, sending an answer) is a new
   connection answered 503 and closed. Counts are logged once a second. */
#define RT_PRESSURE_IDLE_S 5.0
#define RT_PRESSURE_STALL_S 10.0

static struct {
    unsigned long fresh, head, idle, body, refused; /* since the last log line */
    double last_log;
} g_shed_stats;                                 /* under g_lock */

/* The waiting connection to close first: one that never sent a byte
   (closing it loses nothing; HTTP lets a server close an idle connection
   at any time), then a partial head (slowloris), then a keep-alive
   connection between requests (a client that has shown itself one: an
   idle flood never sends a request), then a stalled body; the oldest wait
   first within each. Called with g_lock held. */
static struct rt_conn *rt_shed_victim(void)
{
    struct rt_conn *best = NULL;
    for (struct rt_conn *c = g_conns; c; c = c->next) {
        if (c->shed || c->waiting == RT_WAIT_NONE)
            continue;
        if (!best || c->waiting < best->waiting ||
            (c->waiting == best->waiting && c->wait_since < best->wait_since))
            best = c;
    }
    return best;
}

/* Ends a connection whose thread waits for its client (c->waiting set, so
   its socket is open): the thread's recv returns 0 and it finishes without
   starting a request. Called with g_lock held. */
static void rt_shed(struct rt_conn *c)
{
    if (c->waiting == RT_WAIT_NEW)
        g_shed_stats.fresh++;
    else if (c->waiting == RT_WAIT_HEAD)
        g_shed_stats.head++;
    else if (c->waiting == RT_WAIT_IDLE)
        g_shed_stats.idle++;
    else
        g_shed_stats.body++;
    c->shed = 1;
    g_shed_pending++;
    shutdown(c->fd, SHUT_RDWR);
}

/* When three quarters of the slots are taken: the shorter timeouts. */
static void rt_shed_under_pressure(double now)
{
    if ((g_active - g_shed_pending) * 4 < g_cfg.max_connections * 3)
        return;
    for (struct rt_conn *c = g_conns; c; c = c->next) {
        double waited = now - c->wait_since;
        if (c->shed || c->waiting == RT_WAIT_NONE)
            continue;
        if (waited >= (c->waiting == RT_WAIT_NEW || c->waiting == RT_WAIT_IDLE ? RT_PRESSURE_IDLE_S
                                                                               : RT_PRESSURE_STALL_S))
            rt_shed(c);
    }
}

/* Called with g_lock held, from the accept loop (at least once a second). */
static void rt_shed_log(double now)
{
    unsigned long shed = g_shed_stats.fresh + g_shed_stats.head + g_shed_stats.idle + g_shed_stats.body;
    if (!shed && !g_shed_stats.refused)
        return;
    if (now - g_shed_stats.last_log < 1)
        return;
    rt_log("load: closed %lu connections waiting for their clients (%lu that sent nothing, %lu in a "
           "request head, %lu idle between requests, %lu in a body) to keep accepting; %lu refused "
           "with 503 (every slot busy); %d of --max-connections %d in use",
           shed, g_shed_stats.fresh, g_shed_stats.head, g_shed_stats.idle, g_shed_stats.body,
           g_shed_stats.refused,
           g_active - g_shed_pending, g_cfg.max_connections);
    memset(&g_shed_stats, 0, sizeof g_shed_stats);
    g_shed_stats.last_log = now;
}

/* Most a refused connection's input is read before it is closed (see
   rt_refuse_busy): a request head and one chunk of body. */
#define RT_REFUSE_DRAIN_MAX() (g_cfg.max_header + RT_IO_CHUNK)

/* Every slot works for a client: say so and close, rather than leave the
   connection in the backlog where nobody answers it. */
static void rt_refuse_busy(int fd)
{
    static const char body[] = "{\"detail\":\"Server busy: every connection slot is serving a request\"}";
    char msg[512];
    int n = snprintf(msg, sizeof msg,
                     "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                     "Retry-After: 1\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
                     sizeof body - 1, body);
    char scratch[4096];
    if (send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
        /* nothing more to do for it */
    }
    size_t drained = 0;
    ssize_t got;
    /* A request that came already is read first: closing with unread bytes
       would reset the connection and lose the answer. Only so much, though:
       this runs on the accept loop, and a client that keeps sending would
       otherwise keep it here, accepting nobody. A polite client has sent at
       most a request head and the start of its body before it reads our
       answer; past RT_REFUSE_DRAIN_MAX it gets the reset it asked for. */
    shutdown(fd, SHUT_WR);
    while (drained < RT_REFUSE_DRAIN_MAX()) {
        size_t want = RT_REFUSE_DRAIN_MAX() - drained;
        got = recv(fd, scratch, want < sizeof scratch ? want : sizeof scratch, MSG_DONTWAIT);
        if (got <= 0)
            break;
        drained += (size_t)got;
    }
    close(fd);
}

static void rt_ignore_signal(int sig)
{
    (void)sig;
}

#ifndef RT_NO_MAIN
int main(int argc, char **argv)
{
    pthread_condattr_t ca;
    pthread_attr_t ta;
    pthread_t tid;
    sigset_t block;
    struct rlimit nofile;
    double last_sweep = 0;
    int lfd, rc;

    rc = rt_config_load(argc, argv, &g_cfg);
    if (rc)
        return rc > 0 ? 0 : 2;
    /* Pipes for children must not land on fds 0-2 or dup2 would be a no-op
       that leaves them close-on-exec. */
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) < 0)
            return 2;
    if (!realpath(g_cfg.base_dir, g_base_real)) {
        rt_log("base dir %s: %s", g_cfg.base_dir, strerror(errno));
        return 2;
    }
    /* A descriptor per connection and two per running command: raise the
       soft limit toward the hard one when the default would run out first
       (accept4's EMFILE is handled by shedding, but better not to get
       there). Commands inherit the raised limit. */
    if (!getrlimit(RLIMIT_NOFILE, &nofile)) {
        rlim_t want = (rlim_t)g_cfg.max_connections * 3 + 64;
        if (nofile.rlim_cur != RLIM_INFINITY && nofile.rlim_cur < want) {
            nofile.rlim_cur = nofile.rlim_max == RLIM_INFINITY || nofile.rlim_max > want ? want : nofile.rlim_max;
            setrlimit(RLIMIT_NOFILE, &nofile);
        }
    }
    g_base_real_len = strlen(g_base_real);
    if (g_base_real_len == 1)
        g_base_real_len = 0; /* base "/": every absolute link target is inside */
    g_base_fd = open(g_base_real, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (g_base_fd < 0) {
        rt_log("base dir %s: %s", g_base_real, strerror(errno));
        return 2;
    }
    /* Few malloc arenas: per-thread arenas would grow RSS with the number
       of connections for no gain at this request size. */
#ifdef M_ARENA_MAX /* glibc; musl has one small allocator anyway */
    mallopt(M_ARENA_MAX, 2);
#endif
    signal(SIGPIPE, SIG_IGN);
    /* As PID 1 (the usual case in a pod) the kernel drops signals whose
       action is the default; a handler that never runs (the signals stay
       blocked and rt_reaper_main takes them with sigtimedwait) keeps
       SIGTERM deliverable whatever the kernel version. */
    signal(SIGTERM, rt_ignore_signal);
    signal(SIGINT, rt_ignore_signal);
    sigemptyset(&block);
    sigaddset(&block, SIGCHLD);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g_cond, &ca);
    pthread_cond_init(&g_work_cond, &ca);
    if (pipe2(g_stop_pipe, O_CLOEXEC)) {
        rt_log("pipe: %s", strerror(errno));
        return 2;
    }
    lfd = rt_listen();
    if (lfd < 0)
        return 2;
    pthread_attr_init(&ta);
    pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&ta, 256 * 1024);
    if (pthread_create(&tid, &ta, rt_reaper_main, NULL)) {
        rt_log("cannot start the reaper thread");
        return 2;
    }

    while (!atomic_load(&g_stopping)) {
        struct pollfd pf[2] = {{lfd, POLLIN, 0}, {g_stop_pipe[0], POLLIN, 0}};
        struct rt_conn *c;
        struct timeval tv;
        int fd, one = 1, refuse = 0, ready;
        double now;
        ready = poll(pf, 2, 500);
        now = rt_now();
        pthread_mutex_lock(&g_lock);
        if (now - last_sweep >= 0.5) {
            rt_shed_under_pressure(now);
            last_sweep = now;
        }
        rt_shed_log(now);
        if (ready > 0 && (pf[0].revents & POLLIN) && !g_idle &&
            g_threads >= g_cfg.max_connections + RT_CLOSING_THREADS()) {
            /* No idle worker and too many busy with connections still
               ending: the next connection waits in the backlog until one is
               free (shed ones were shut down, closing ones take 2 s at most,
               so this is short). */
            struct timespec ts = rt_abs_time(rt_now() + 0.1);
            pthread_cond_timedwait(&g_cond, &g_lock, &ts);
            pthread_mutex_unlock(&g_lock);
            continue;
        }
        pthread_mutex_unlock(&g_lock);
        if (ready <= 0 || !(pf[0].revents & POLLIN))
            continue;
        fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Out of descriptors or memory: free some by shedding one
                   waiting connection (one at a time, so a slow thread end
                   does not make us shed more than needed). */
                pthread_mutex_lock(&g_lock);
                if (!g_shed_pending) {
                    struct rt_conn *victim = rt_shed_victim();
                    if (victim)
                        rt_shed(victim);
                }
                pthread_mutex_unlock(&g_lock);
                usleep(1000);
            }
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        tv.tv_sec = g_cfg.idle_timeout_s;
        tv.tv_usec = 0;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        c = calloc(1, sizeof *c);
        if (c) {
            c->cap = g_cfg.max_header + RT_IO_CHUNK;
            c->buf = malloc(c->cap);
        }
        if (!c || !c->buf) {
            if (c)
                free(c);
            close(fd);
            continue;
        }
        c->fd = fd;
        pthread_mutex_lock(&g_lock);
        if (g_active - g_shed_pending >= g_cfg.max_connections) {
            struct rt_conn *victim = rt_shed_victim();
            if (victim)
                rt_shed(victim);
            else
                refuse = 1;
        }
        if (refuse) {
            g_shed_stats.refused++;
            pthread_mutex_unlock(&g_lock);
            rt_refuse_busy(fd);
            free(c->buf);
            free(c);
            continue;
        }
        g_active++;
        c->waiting = RT_WAIT_NEW;
        c->wait_since = now;
        c->next = g_conns;
        if (g_conns)
            g_conns->prev = c;
        g_conns = c;
        /* An idle worker may have ended since the check above. */
        while (!g_idle && g_threads >= g_cfg.max_connections + RT_CLOSING_THREADS() &&
               !atomic_load(&g_stopping)) {
            struct timespec ts = rt_abs_time(rt_now() + 0.1);
            pthread_cond_timedwait(&g_cond, &g_lock, &ts);
        }
        if (!g_idle && atomic_load(&g_stopping) &&
            g_threads >= g_cfg.max_connections + RT_CLOSING_THREADS()) {
            /* stopping, and no thread for it: closed unanswered, like the
               backlog's at shutdown (still first in the list: only this
               loop adds; shed meanwhile, perhaps) */
            if (c->next)
                c->next->prev = NULL;
            g_conns = c->next;
            g_active--;
            if (c->shed)
                g_shed_pending--;
            pthread_mutex_unlock(&g_lock);
            close(fd);
            free(c->buf);
            free(c);
            continue;
        }
        if (g_idle) {
            /* A stack, not a queue: any idle worker will do, and each takes
               one at once. */
            g_idle--;
            c->handoff_next = g_handoff;
            g_handoff = c;
            pthread_cond_signal(&g_work_cond);
            pthread_mutex_unlock(&g_lock);
            continue;
        }
        g_threads++;
        pthread_mutex_unlock(&g_lock);
        if (pthread_create(&tid, &ta, rt_worker_main, c)) {
            pthread_mutex_lock(&g_lock);
            if (c->next)
                c->next->prev = NULL;
            g_conns = c->next;
            g_active--;
            g_threads--;
            pthread_mutex_unlock(&g_lock);
            close(fd);
            free(c->buf);
            free(c);
            usleep(10000);
        }
    }

    /* Shutdown: no new connections; idle keep-alive ones end now; running
       requests get the grace period, then their commands are killed and
       their sockets shut so their threads finish. */
    close(lfd);
    pthread_mutex_lock(&g_lock);
    for (struct rt_conn *c = g_conns; c; c = c->next)
        if (c->waiting == RT_WAIT_NEW || c->waiting == RT_WAIT_IDLE)
            shutdown(c->fd, SHUT_RD);
    pthread_mutex_unlock(&g_lock);
    rt_wait_connections(rt_now() + g_cfg.shutdown_grace_s);
    pthread_mutex_lock(&g_lock);
    for (struct rt_child *ch = g_children; ch; ch = ch->next)
        kill(-ch->pid, SIGKILL);
    for (struct rt_conn *c = g_conns; c; c = c->next)
        shutdown(c->fd, SHUT_RDWR);
    pthread_mutex_unlock(&g_lock);
    rt_wait_connections(rt_now() + 3);
    rt_log("stopped");
    return 0;
}
#endif
