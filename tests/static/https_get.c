/* One HTTPS GET, for the peak-RSS figure of make test-static (a full
   handshake and certificate verification; the body to stdout). Without a
   CA file the client has no TLS settings: an http:// URL then needs no TLS
   set up (tests/static/entropy-test.sh).
       https_get URL [CA_FILE] */
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
    if (argc != 2 && argc != 3) return 2;
    memset(&d, 0, sizeof d);
    memset(&req, 0, sizeof req);
    memset(&resp, 0, sizeof resp);
    if (argc == 3) d.tls.ca_file = argv[2];
    if (asb_http_client_create(&d, &cl, &err) != ASB_OK) {
        fprintf(stderr, "https_get: %s\n", err.message);
        return 1;
    }
    req.url = argv[1];
    r = asb_http_do(cl, &req, &resp, &err);
    if (r == ASB_OK) fwrite(resp.body.ptr, 1, resp.body.len, stdout);
    else fprintf(stderr, "https_get: %s\n", err.message);
    asb_http_response_free(&resp);
    asb_http_client_free(cl);
    return r == ASB_OK ? 0 : 1;
}
