/* logsink.h - collects the library's log records as text, for the tests
   that check what is logged (and what never is). Include it after
   agentsandbox.h and asbtest.h.

       asbt_log lg;
       asbt_log_open(&lg, &desc.log, ASB_LOG_DEBUG);
       ... use the client ...
       ASBT_CONTAINS(lg.text.ptr, "1 sandbox.create: claim");
       asbt_log_close(&lg);

   Each record becomes one line "<level> <id>: <message>\n". Records may
   come from several threads at once: appends are locked. */
#ifndef ASBT_LOGSINK_H
#define ASBT_LOGSINK_H

#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef struct asbt_log {
    pthread_mutex_t mu;
    asb_buf text; /* "" until the first record arrives */
} asbt_log;

ASBT_UNUSED static void asbt_log_record(void *ud, const asb_log_record *rec) {
    asbt_log *lg = (asbt_log *)ud;
    char line[700];
    int n = snprintf(line, sizeof line, "%d %s: %s\n", (int)rec->level, rec->id, rec->message);
    if (n < 0) return;
    if ((size_t)n >= sizeof line) n = (int)sizeof line - 1;
    pthread_mutex_lock(&lg->mu);
    asb_buf_append(&lg->text, line, (size_t)n);
    pthread_mutex_unlock(&lg->mu);
}

/* Points `logger` at lg, keeping records from min_level up. */
ASBT_UNUSED static void asbt_log_open(asbt_log *lg, asb_logger *logger, asb_log_level min_level) {
    pthread_mutex_init(&lg->mu, NULL);
    asb_buf_init(&lg->text, NULL);
    asb_buf_append(&lg->text, "", 0); /* text.ptr is a string from the start */
    memset(logger, 0, sizeof *logger);
    logger->fn = asbt_log_record;
    logger->user_data = lg;
    logger->min_level = min_level;
}

/* How many times `needle` occurs in what was logged. */
ASBT_UNUSED static int asbt_log_count(asbt_log *lg, const char *needle) {
    const char *p = lg->text.ptr;
    int n = 0;
    while (p && (p = strstr(p, needle)) != NULL) {
        n++;
        p++;
    }
    return n;
}

ASBT_UNUSED static void asbt_log_close(asbt_log *lg) {
    asb_buf_free(&lg->text);
    pthread_mutex_destroy(&lg->mu);
}

#endif
