/* rt_refuse_busy runs on the accept loop: whatever it does for a refused
   connection, nobody else is accepted meanwhile. It reads what the client
   already sent (so closing does not reset the connection and lose the 503),
   but only a bounded amount: a client that keeps sending must not keep the
   accept loop reading for it.

   Built with the ASan+UBSan flags by make runtime-test. Prints one line per
   case and exits non-zero on a failure. */
#define RT_NO_MAIN
#include "../agentsandbox-runtime.c"

#include <sys/ioctl.h>

#define TR_CHECK(cond)                                                                         \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "FAIL %s (line %d)\n", #cond, __LINE__);                           \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

/* The client end of a connection the server refuses, the server end, and a
   second descriptor of the server end that outlives rt_refuse_busy's close
   so the test can see how much it left unread. */
struct tr_pair {
    int client, server, server_view;
};

static struct tr_pair tr_pair_open(void)
{
    struct tr_pair p;
    int sv[2];
    TR_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    p.client = sv[0];
    p.server = sv[1];
    p.server_view = dup(sv[1]);
    TR_CHECK(p.server_view >= 0);
    return p;
}

/* Queues as much as the socket takes without blocking; returns the count. */
static size_t tr_fill(int fd)
{
    static char junk[4096];
    size_t total = 0;
    ssize_t n;
    memset(junk, 'x', sizeof junk);
    while ((n = send(fd, junk, sizeof junk, MSG_DONTWAIT | MSG_NOSIGNAL)) > 0)
        total += (size_t)n;
    return total;
}

static int tr_unread(int fd)
{
    int n = -1;
    TR_CHECK(ioctl(fd, FIONREAD, &n) == 0);
    return n;
}

static void tr_expect_503(int client)
{
    char buf[512];
    ssize_t n = recv(client, buf, sizeof buf - 1, MSG_DONTWAIT);
    TR_CHECK(n > 0);
    buf[n] = 0;
    TR_CHECK(strncmp(buf, "HTTP/1.1 503 ", 13) == 0);
}

static void refusing_reads_a_polite_request_whole(void)
{
    static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    struct tr_pair p = tr_pair_open();
    TR_CHECK(send(p.client, req, sizeof req - 1, 0) == (ssize_t)(sizeof req - 1));
    rt_refuse_busy(p.server);
    TR_CHECK(tr_unread(p.server_view) == 0);
    tr_expect_503(p.client);
    close(p.server_view);
    close(p.client);
    printf("ok   refusing_reads_a_polite_request_whole\n");
}

static void refusing_stops_reading_a_client_that_sent_too_much(void)
{
    struct tr_pair p = tr_pair_open();
    size_t queued = tr_fill(p.client);
    int unread;
    TR_CHECK(queued > RT_REFUSE_DRAIN_MAX());
    rt_refuse_busy(p.server);
    unread = tr_unread(p.server_view);
    TR_CHECK(unread > 0);
    TR_CHECK(queued - (size_t)unread <= RT_REFUSE_DRAIN_MAX());
    tr_expect_503(p.client);
    close(p.server_view);
    close(p.client);
    printf("ok   refusing_stops_reading_a_client_that_sent_too_much (%zu queued, %d left unread)\n",
           queued, unread);
}

static atomic_int tr_stop;

static void *tr_stream(void *arg)
{
    int fd = *(int *)arg;
    static char junk[65536];
    while (!atomic_load(&tr_stop)) {
        if (send(fd, junk, sizeof junk, MSG_NOSIGNAL) < 0 && errno != EINTR)
            break;
    }
    return NULL;
}

static void refusing_returns_while_the_client_keeps_sending(void)
{
    struct tr_pair p = tr_pair_open();
    pthread_t t;
    tr_fill(p.client);
    TR_CHECK(pthread_create(&t, NULL, tr_stream, &p.client) == 0);
    rt_refuse_busy(p.server); /* the alarm below fails the test if this never returns */
    atomic_store(&tr_stop, 1);
    close(p.server_view); /* wakes the streamer with EPIPE */
    TR_CHECK(pthread_join(t, NULL) == 0);
    close(p.client);
    printf("ok   refusing_returns_while_the_client_keeps_sending\n");
}

int main(void)
{
    alarm(120);
    g_cfg.max_header = 1024;
    refusing_reads_a_polite_request_whole();
    refusing_stops_reading_a_client_that_sent_too_much();
    refusing_returns_while_the_client_keeps_sending();
    return 0;
}
