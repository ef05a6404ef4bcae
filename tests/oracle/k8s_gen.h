/* Generates a Kubernetes-style list response (SandboxClaimList with
   realistic metadata, labels, annotations, conditions and managedFields)
   of about `target` bytes, deterministically, for the differential tests
   and the benchmarks. */
#ifndef K8S_GEN_H
#define K8S_GEN_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct k8s_gen_buf {
    char *p;
    size_t len, cap;
} k8s_gen_buf;

static void k8s_gen_put(k8s_gen_buf *b, const char *s) {
    size_t n = strlen(s);
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->p = (char *)realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->len, s, n + 1);
    b->len += n;
}

/* Returns a malloc'd NUL-terminated document; *len gets its length and
   *items the number of items. */
static char *k8s_gen_list(size_t target, size_t *len, int *items) {
    k8s_gen_buf b = {NULL, 0, 0};
    char tmp[2048];
    int i = 0;
    k8s_gen_put(&b, "{\"apiVersion\":\"extensions.agents.x-k8s.io/v1alpha1\","
                    "\"kind\":\"SandboxClaimList\",\"metadata\":{"
                    "\"resourceVersion\":\"987654\",\"continue\":\"\"},"
                    "\"items\":[");
    while (b.len < target) {
        snprintf(tmp, sizeof tmp,
                 "%s{\"apiVersion\":\"extensions.agents.x-k8s.io/v1alpha1\","
                 "\"kind\":\"SandboxClaim\",\"metadata\":{"
                 "\"name\":\"sandbox-claim-%08x\",\"namespace\":\"team-%d\","
                 "\"uid\":\"%08x-1f2e-4d3c-8b7a-%012d\","
                 "\"resourceVersion\":\"%d\",\"generation\":%d,"
                 "\"creationTimestamp\":\"2026-11-%02dT%02d:%02d:%02dZ\","
                 "\"labels\":{\"agents.x-k8s.io/created-by\":\"agentsandbox.h\","
                 "\"app\":\"coder-%d\",\"tier\":\"\\u00e9t\\u00e9\"},"
                 "\"annotations\":{\"agents.x-k8s.io/client-first-requested-at\":"
                 "\"2026-11-30T02:%02d:%02d.%06dZ\",\"note\":\"line\\nbreak "
                 "\\\"quoted\\\" \\\\ tab\\t caf\xc3\xa9 \xe2\x82\xac\"},"
                 "\"managedFields\":[{\"manager\":\"agentsandbox\",\"operation\":"
                 "\"Update\",\"apiVersion\":\"extensions.agents.x-k8s.io/v1alpha1\","
                 "\"time\":\"2026-11-30T02:00:00Z\",\"fieldsType\":\"FieldsV1\","
                 "\"fieldsV1\":{\"f:spec\":{\".\":{},\"f:sandboxTemplateRef\":{"
                 "\".\":{},\"f:name\":{}}}}}]},"
                 "\"spec\":{\"sandboxTemplateRef\":{\"name\":\"python-sandbox-"
                 "template\"},\"lifecycle\":{\"shutdownTime\":\"2026-12-01T00:00:"
                 "00Z\",\"shutdownPolicy\":\"Delete\"}},"
                 "\"status\":{\"sandbox\":{\"name\":\"sandbox-%08x\"},"
                 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\","
                 "\"observedGeneration\":%d,\"lastTransitionTime\":"
                 "\"2026-11-30T02:00:%02dZ\",\"reason\":\"%s\",\"message\":"
                 "\"Sandbox is %s\"}],\"replicas\":%d,\"ratio\":%d.%03de-%d}}",
                 i ? "," : "", ((unsigned)i * 2654435761u), i % 17,
                 ((unsigned)i * 40503u), i, 100000 + i, i % 5 + 1, i % 28 + 1,
                 i % 24, i % 60, (i * 7) % 60, i % 9, i % 60, (i * 7) % 60,
                 (i * 7919) % 1000000, ((unsigned)i * 2654435761u), i % 3 ? "True" : "False",
                 i % 5 + 1, i % 60, i % 3 ? "DependenciesReady" : "TemplateNotFound",
                 i % 3 ? "ready" : "not ready", i % 2, -(i % 7), i % 1000, i % 9 + 1);
        k8s_gen_put(&b, tmp);
        i++;
    }
    k8s_gen_put(&b, "]}\n");
    *len = b.len;
    *items = i;
    return b.p;
}
#endif
