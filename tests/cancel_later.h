/* cancel_later.h - a cancel token triggered from another thread after a
   delay, for the tests of a call that a cancel ends while it waits
   (after agentsandbox.h and asbtest.h).

       canceller k;
       k.token = token;
       k.after_ms = 1500;
       pthread_create(&th, NULL, cancel_later, &k);
       ... the call that waits ...
       pthread_join(th, NULL);
       ... k.at: when the token was triggered ...

   k.at is CLOCK_MONOTONIC in microseconds, taken just before the
   trigger, so a test can measure how soon after it the call returned.
   Builds as C99 and as C++11. */
#ifndef ASBT_CANCEL_LATER_H
#define ASBT_CANCEL_LATER_H

#include <stdint.h>
#include <time.h>

typedef struct canceller {
    asb_cancel *token;
    int after_ms;
    int64_t at; /* when it triggered (CLOCK_MONOTONIC, us) */
} canceller;

ASBT_UNUSED static void *cancel_later(void *arg) {
    canceller *k = (canceller *)arg;
    struct timespec ts;
    ts.tv_sec = k->after_ms / 1000;
    ts.tv_nsec = (long)(k->after_ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    k->at = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    asb_cancel_trigger(k->token);
    return NULL;
}

#endif
