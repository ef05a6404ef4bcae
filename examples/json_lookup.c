/* Reads a Kubernetes object from stdin (e.g. `kubectl get sandboxclaim X
   -o json`) and prints the fields the SDK cares about: the bound sandbox
   name and the Ready condition. Shows the JSON layer on its own. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"

#include <stdio.h>

int main(void) {
    asb_buf in;
    asb_json_doc doc;
    asb_error err;
    asb_json_iter it;
    char chunk[65536], name[256];
    size_t n;
    int conds, cond;

    asb_buf_init(&in, NULL);
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) {
        if (asb_buf_append(&in, chunk, n) != ASB_OK) return 1;
    }
    if (asb_json_doc_parse(&doc, in.ptr, in.len, NULL, &err) != ASB_OK) {
        fprintf(stderr, "json_lookup: %s\n", err.message);
        asb_buf_free(&in);
        return 1;
    }
    if (asb_json_get_string(&doc, asb_json_find(&doc, 0, "status.sandbox.name"),
                            name, sizeof name, NULL) == ASB_OK)
        printf("sandbox: %s\n", name);
    else
        printf("sandbox: (not bound yet)\n");

    conds = asb_json_find(&doc, 0, "status.conditions");
    it = asb_json_iter_begin(&doc, conds);
    while (asb_json_iter_next(&doc, &it, NULL, &cond)) {
        char type[64], status[16], reason[128];
        if (asb_json_get_string(&doc, asb_json_member(&doc, cond, "type", 4), type,
                                sizeof type, NULL) != ASB_OK)
            continue;
        if (asb_json_get_string(&doc, asb_json_member(&doc, cond, "status", 6),
                                status, sizeof status, NULL) != ASB_OK)
            status[0] = '\0';
        if (asb_json_get_string(&doc, asb_json_member(&doc, cond, "reason", 6),
                                reason, sizeof reason, NULL) != ASB_OK)
            reason[0] = '\0';
        printf("condition %s=%s (%s)\n", type, status, reason);
    }
    asb_json_doc_free(&doc);
    asb_buf_free(&in);
    return 0;
}
