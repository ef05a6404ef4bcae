/* Name resolution ends with the connect timeout, and a missing resolver is
   named (issue 16). Run by tests/static/resolver-test.sh inside a network
   and mount namespace of its own, where /etc/resolv.conf names a
   nameserver on 127.0.0.1 that never answers (and, for the second case,
   where /etc is empty). Built with glibc and with musl.

       test_resolve blackhole|noresolver */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    asb_http_client_desc d;
    asb_http_client *cl;
    asb_http_request req;
    asb_http_response resp;
    asb_error err;
    asb_result r;
    int64_t t0, ms;
    int noresolver = argc > 1 && strcmp(argv[1], "noresolver") == 0;
    memset(&d, 0, sizeof d);
    memset(&req, 0, sizeof req);
    memset(&resp, 0, sizeof resp);
    d.connect_timeout_ms = 400;
    d.retry.max_attempts = 1;
    if (asb_http_client_create(&d, &cl, &err) != ASB_OK) return 2;
    req.url = "http://sandbox-router.test:8080/";
    t0 = asb__now_ms();
    r = asb_http_do(cl, &req, &resp, &err);
    ms = asb__now_ms() - t0;
    printf("resolve (%s): %s after %lld ms: %s\n", noresolver ? "no resolver" : "silent nameserver",
           asb_result_str(r), (long long)ms, err.message);
    asb_http_response_free(&resp);
    asb_http_client_free(cl);
    /* glibc alone waits 5 s per try, musl 30 s in all: 3 s is generous */
    if (r != ASB_ERR_TIMEOUT && r != ASB_ERR_DNS) return 1;
    if (ms > 3000) return 1;
    if (noresolver && !strstr(err.message, "no /etc/resolv.conf")) return 1;
    return 0;
}
