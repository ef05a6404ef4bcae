/* recorder.h - an HTTP/1.1 endpoint for the tests that records what
   arrives (request line, headers, the first bytes of the body) and answers
   every request with one reply the test sets.

   It stands in for a peer only where a test must see bytes a real peer
   does not show: the headers the client sent to the router (there is no
   way to ask the router what it received) or the headers the router
   forwarded to a sandbox (the runtime does not echo them). Everything
   else talks to the real thing. It binds loopback addresses only.

       recorder *r = recorder_start("127.0.0.1");
       ... point the client at http://127.0.0.1:<r->port> ...
       recorder_request q;
       if (recorder_get(r, 0, &q)) ... recorder_header(q.head, "X-Sandbox-Timeout", v, sizeof v)
       recorder_stop(r);

   One request per connection (it answers with Connection: close), one
   connection at a time. Builds as C99 and as C++11. */
#ifndef ASBT_RECORDER_H
#define ASBT_RECORDER_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define RECORDER_MAX 32      /* requests kept (later ones are only counted) */
#define RECORDER_HEAD 8192   /* request line and headers */
#define RECORDER_BODY 4096   /* first bytes of a body */

typedef struct recorder_request {
    char head[RECORDER_HEAD]; /* NUL-terminated, up to the blank line */
    char body[RECORDER_BODY];
    size_t body_len;          /* bytes kept in body */
} recorder_request;

typedef struct recorder {
    int fd, port, stop;
    pthread_t thread;
    pthread_mutex_t lock;
    int count;                         /* requests answered */
    recorder_request req[RECORDER_MAX];
    int status;                        /* reply status (default 200) */
    int delay_ms;                      /* the next request's answer waits
                                          this long (or until the client
                                          hangs up): a slow runtime */
    int delay_skip;                    /* ... after this many requests */
    int drop;                          /* the next `drop` requests are
                                          read, recorded and answered by a
                                          close: an answer lost on the way */
    char reply[2048];                  /* reply body, sent as JSON */
    char headers[256];                 /* extra reply header lines, each
                                          ending in CRLF ("" for none) */
} recorder;

/* Does hay[0, n) contain `needle` (exact bytes)? memmem is not POSIX. */
ASBT_UNUSED static int recorder_has(const char *hay, size_t n, const char *needle) {
    size_t k = strlen(needle), i;
    for (i = 0; k && i + k <= n; i++)
        if (memcmp(hay + i, needle, k) == 0) return 1;
    return 0;
}

/* Case-insensitive: does hay[0, n) contain `needle`? */
ASBT_UNUSED static int recorder_contains_nocase(const char *hay, size_t n, const char *needle) {
    size_t k = strlen(needle), i, j;
    for (i = 0; k && i + k <= n; i++) {
        for (j = 0; j < k; j++) {
            char a = hay[i + j], b = needle[j];
            if (a >= 'A' && a <= 'Z') a = (char)(a - 'A' + 'a');
            if (b >= 'A' && b <= 'Z') b = (char)(b - 'A' + 'a');
            if (a != b) break;
        }
        if (j == k) return 1;
    }
    return 0;
}

/* The value of header `name` in a recorded head (first one; names compare
   case-insensitively). 1 and the value in out, or 0 when absent. */
ASBT_UNUSED static int recorder_header(const char *head, const char *name, char *out, size_t cap) {
    const char *line = strstr(head, "\r\n");
    size_t nl = strlen(name);
    while (line && line[2] && !(line[2] == '\r' && line[3] == '\n')) {
        const char *start = line + 2, *end = strstr(start, "\r\n");
        if (!end) break;
        if ((size_t)(end - start) > nl && start[nl] == ':' &&
            recorder_contains_nocase(start, nl, name)) {
            const char *v = start + nl + 1;
            size_t len;
            while (v < end && (*v == ' ' || *v == '\t')) v++;
            len = (size_t)(end - v);
            if (len >= cap) len = cap - 1;
            memcpy(out, v, len);
            out[len] = '\0';
            return 1;
        }
        line = end;
    }
    if (cap) out[0] = '\0';
    return 0;
}

/* Reads one request from connection c, records it, answers it. */
static void recorder_serve(recorder *r, int c) {
    recorder_request *q = (recorder_request *)calloc(1, sizeof *q);
    char buf[16384], *eoh = NULL, resp[4096];
    size_t have = 0, head_len, body_have, want = 0;
    struct timeval tv;
    int status;
    if (!q) return;
    tv.tv_sec = 5;
    tv.tv_usec = 0;
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    while (!eoh && have < sizeof buf - 1) {
        ssize_t n = recv(c, buf + have, sizeof buf - 1 - have, 0);
        if (n <= 0) break;
        have += (size_t)n;
        buf[have] = '\0';
        eoh = strstr(buf, "\r\n\r\n");
    }
    if (!eoh) {
        free(q);
        return;
    }
    head_len = (size_t)(eoh - buf) + 4;
    if (head_len >= sizeof q->head) head_len = sizeof q->head - 1;
    memcpy(q->head, buf, head_len);
    q->head[head_len] = '\0';
    {
        char cl[32];
        if (recorder_header(q->head, "Content-Length", cl, sizeof cl))
            want = (size_t)strtoull(cl, NULL, 10);
    }
    body_have = have - ((size_t)(eoh - buf) + 4);
    q->body_len = body_have < RECORDER_BODY ? body_have : RECORDER_BODY;
    memcpy(q->body, eoh + 4, q->body_len);
    while (body_have < want) {
        ssize_t n = recv(c, buf, sizeof buf, 0);
        size_t room;
        if (n <= 0) break;
        room = RECORDER_BODY - q->body_len;
        if (room > (size_t)n) room = (size_t)n;
        memcpy(q->body + q->body_len, buf, room);
        q->body_len += room;
        body_have += (size_t)n;
    }
    pthread_mutex_lock(&r->lock);
    if (r->drop > 0) {
        r->drop--;
        if (r->count < RECORDER_MAX) r->req[r->count] = *q;
        r->count++;
        pthread_mutex_unlock(&r->lock);
        free(q);
        return;
    }
    if (r->delay_ms > 0 && r->delay_skip > 0) {
        r->delay_skip--;
    } else if (r->delay_ms > 0) {
        struct pollfd p;
        int ms = r->delay_ms;
        r->delay_ms = 0;
        pthread_mutex_unlock(&r->lock);
        p.fd = c;
        p.events = POLLIN; /* readable at the client's close */
        p.revents = 0;
        poll(&p, 1, ms);
        pthread_mutex_lock(&r->lock);
    }
    status = r->status;
    snprintf(resp, sizeof resp,
             "HTTP/1.1 %d Recorded\r\nContent-Type: application/json\r\n%s"
             "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
             status, r->headers, strlen(r->reply), r->reply);
    if (r->count < RECORDER_MAX) r->req[r->count] = *q;
    r->count++;
    pthread_mutex_unlock(&r->lock);
    {
        size_t off = 0, len = strlen(resp);
        while (off < len) {
            ssize_t n = send(c, resp + off, len - off, MSG_NOSIGNAL);
            if (n <= 0) break;
            off += (size_t)n;
        }
    }
    free(q);
}

static void *recorder_loop(void *arg) {
    recorder *r = (recorder *)arg;
    for (;;) {
        struct pollfd p;
        int stop, c;
        pthread_mutex_lock(&r->lock);
        stop = r->stop;
        pthread_mutex_unlock(&r->lock);
        if (stop) break;
        p.fd = r->fd;
        p.events = POLLIN;
        p.revents = 0;
        if (poll(&p, 1, 50) <= 0) continue;
        c = accept(r->fd, NULL, NULL);
        if (c < 0) continue;
        recorder_serve(r, c);
        close(c);
    }
    return NULL;
}

/* Listens on ip (a loopback literal, IPv4 or IPv6) at a free port.
   NULL when it cannot. */
ASBT_UNUSED static recorder *recorder_start(const char *ip) {
    recorder *r = (recorder *)calloc(1, sizeof *r);
    struct sockaddr_storage ss;
    socklen_t sl;
    int six = strchr(ip, ':') != NULL, one = 1;
    if (!r) return NULL;
    memset(&ss, 0, sizeof ss);
    if (six) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        if (inet_pton(AF_INET6, ip, &a->sin6_addr) != 1) goto fail;
        if (!IN6_IS_ADDR_LOOPBACK(&a->sin6_addr)) goto fail; /* loopback only */
        sl = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        if (inet_pton(AF_INET, ip, &a->sin_addr) != 1) goto fail;
        if ((ntohl(a->sin_addr.s_addr) >> 24) != 127) goto fail; /* loopback only */
        sl = sizeof *a;
    }
    r->fd = socket(six ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    if (r->fd < 0) goto fail;
    setsockopt(r->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(r->fd, (struct sockaddr *)&ss, sl) != 0 || listen(r->fd, 16) != 0 ||
        getsockname(r->fd, (struct sockaddr *)&ss, &sl) != 0) {
        close(r->fd);
        goto fail;
    }
    r->port = ntohs(six ? ((struct sockaddr_in6 *)&ss)->sin6_port
                        : ((struct sockaddr_in *)&ss)->sin_port);
    r->status = 200;
    snprintf(r->reply, sizeof r->reply, "{}");
    pthread_mutex_init(&r->lock, NULL);
    if (pthread_create(&r->thread, NULL, recorder_loop, r) != 0) {
        pthread_mutex_destroy(&r->lock);
        close(r->fd);
        goto fail;
    }
    return r;
fail:
    free(r);
    return NULL;
}

/* Extra header lines ("Name: value\r\n"...) on every later reply. */
ASBT_UNUSED static void recorder_headers(recorder *r, const char *lines) {
    pthread_mutex_lock(&r->lock);
    snprintf(r->headers, sizeof r->headers, "%s", lines);
    pthread_mutex_unlock(&r->lock);
}

/* What every later request gets. */
ASBT_UNUSED static void recorder_reply(recorder *r, int status, const char *body) {
    pthread_mutex_lock(&r->lock);
    r->status = status;
    snprintf(r->reply, sizeof r->reply, "%s", body);
    pthread_mutex_unlock(&r->lock);
}

/* The next request's answer waits ms (less if the client hangs up). */
ASBT_UNUSED static void recorder_delay(recorder *r, int ms) {
    pthread_mutex_lock(&r->lock);
    r->delay_ms = ms;
    r->delay_skip = 0;
    pthread_mutex_unlock(&r->lock);
}

/* The same for the request after the next `skip` ones. */
ASBT_UNUSED static void recorder_delay_after(recorder *r, int skip, int ms) {
    pthread_mutex_lock(&r->lock);
    r->delay_ms = ms;
    r->delay_skip = skip;
    pthread_mutex_unlock(&r->lock);
}

/* The next n requests get no answer: the connection closes once each
   is read (and recorded). */
ASBT_UNUSED static void recorder_drop(recorder *r, int n) {
    pthread_mutex_lock(&r->lock);
    r->drop = n;
    pthread_mutex_unlock(&r->lock);
}

ASBT_UNUSED static int recorder_count(recorder *r) {
    int n;
    pthread_mutex_lock(&r->lock);
    n = r->count;
    pthread_mutex_unlock(&r->lock);
    return n;
}

/* Copies request i (0 = first) into *out; 0 when there is no such one. */
ASBT_UNUSED static int recorder_get(recorder *r, int i, recorder_request *out) {
    int ok;
    pthread_mutex_lock(&r->lock);
    ok = i >= 0 && i < r->count && i < RECORDER_MAX;
    if (ok) *out = r->req[i];
    pthread_mutex_unlock(&r->lock);
    return ok;
}

ASBT_UNUSED static void recorder_stop(recorder *r) {
    if (!r) return;
    pthread_mutex_lock(&r->lock);
    r->stop = 1;
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
    close(r->fd);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

#endif
