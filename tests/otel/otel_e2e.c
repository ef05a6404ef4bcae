/* Drives the SDK with tracing on against the local control plane
   (agent-sandbox v0.5.6, warm pool) and a real OpenTelemetry Collector;
   tests/otel/check_collector.py then reads what the collector wrote.
   KUBECONFIG and OTEL_EXPORTER_OTLP_ENDPOINT come from the environment
   (tests/otel/run-e2e.sh).

     otel_e2e traced  FACTS   sandbox life with every call traced; writes
                              what the checker compares (claim, span ids,
                              the claim's annotation) to FACTS
     otel_e2e stalled N       N runs while the collector is stopped
     otel_e2e down N          N runs with the collector gone
     otel_e2e gateway PORT    a sandbox life through the Gateway "asb-gw"
                              (tests/kube/gateway-setup.sh; PORT: where it
                              points), service sandbox-client-gw; then one
                              through a Gateway that never gets an address
                              (service sandbox-client-gw-none): its run
                              times out. The discovery histogram of each,
                              mode=gateway, is what the checker looks for
     otel_e2e native          a sandbox life through the native tunnel
                              (WebSocket port-forward from this process),
                              service sandbox-client-native: its
                              discovery histogram, mode=native_port_forward
   The last two print "calls=N failures=0 max_ms=... export_logs=1" and
   exit 0 only when every call succeeded and the export failure was
   logged exactly once. Under ASan: nothing may leak. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include "../asbtest.h"
#include "../logsink.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tokens a careless tracer would leak: checked absent from everything the
   collector received. */
#define SECRET_ENV "otelsecretENV7f3a"
#define SECRET_ARG "otelsecretARG91c2"
#define SECRET_FILE "otelsecretFILE44d1"

static FILE *facts;

static void on_span(void *ud, const asb_span_data *d) {
    char tp[ASB_TRACEPARENT_SIZE], par[17];
    size_t i;
    (void)ud;
    asb_traceparent_format(&d->ctx, tp);
    for (i = 0; i < 8; i++) snprintf(par + 2 * i, 3, "%02x", d->parent_span_id[i]);
    fprintf(facts, "span %s %s %s %d\n", d->name, tp, par, (int)d->status);
}

static asb_client *client(int traced, const asbt_log *lg, asb_logger *logger, int timeout_ms) {
    asb_client_desc d;
    asb_client *c;
    asb_error err;
    memset(&d, 0, sizeof d);
    d.tracer.enable = traced;
    d.tracer.otlp_timeout_ms = timeout_ms;
    d.tracer.export_interval_ms = 200;
    if (facts) {
        d.tracer.on_span_end = on_span;
    }
    if (lg) d.log = *logger;
    if (asb_client_create(&d, &c, &err) != ASB_OK) {
        fprintf(stderr, "client: %s\n", err.message);
        exit(1);
    }
    return c;
}

static asb_sandbox *create(asb_client *c) {
    asb_create_opts o;
    asb_sandbox *sb;
    asb_error err;
    memset(&o, 0, sizeof o);
    o.warm_pool = "python-sandbox-warmpool";
    o.shutdown_after_seconds = 3600;
    if (asb_client_create_sandbox(c, NULL, &o, &sb, &err) != ASB_OK) {
        fprintf(stderr, "create: %s\n", err.message);
        exit(1);
    }
    return sb;
}

static int traced(const char *path) {
    asb_client *c;
    asb_sandbox *sb;
    asb_run_result rr;
    asb_error err;
    asb_buf out, claim;
    asb_file_list fl;
    asb_kube_resource res = {"extensions.agents.x-k8s.io", "v1beta1", "sandboxclaims"};
    int ex = 0, rc = 0;
    char tp[ASB_TRACEPARENT_SIZE];
    static const char body[] = "contents " SECRET_FILE "\n";
    facts = fopen(path, "w");
    if (!facts) return 1;
    c = client(1, NULL, NULL, 10000);
    sb = create(c);
    fprintf(facts, "claim %s\n", asb_sandbox_claim_name(sb));
    asb_sandbox_traceparent(sb, tp);
    fprintf(facts, "lifecycle %s\n", tp);
    /* the claim as the apiserver stored it: its annotation */
    asb_buf_init(&claim, NULL);
    if (asb_kube_get(c->kube, &res, "default", asb_sandbox_claim_name(sb), &claim, &err) == ASB_OK) {
        asb_json_doc d;
        char ann[512] = "";
        if (asb_json_doc_parse(&d, claim.ptr, claim.len, NULL, NULL) == ASB_OK) {
            asb_json_get_string(&d,
                                asb_json_find(&d, 0,
                                              "metadata.annotations.opentelemetry\\.io/"
                                              "trace-context"),
                                ann, sizeof ann, NULL);
            asb_json_doc_free(&d);
        }
        fprintf(facts, "annotation %s\n", ann);
    } else {
        fprintf(stderr, "get claim: %s\n", err.message);
        rc = 1;
    }
    asb_buf_free(&claim);
    if (asb_sandbox_run(sb, "API_KEY=" SECRET_ENV " TOKEN=x ./run.sh --token " SECRET_ARG, 30000,
                        &rr, &err) != ASB_OK) {
        fprintf(stderr, "run: %s\n", err.message);
        rc = 1;
    }
    fprintf(facts, "exit_code %d\n", rr.exit_code); /* no run.sh there: 127 */
    asb_run_result_free(&rr);
    if (asb_sandbox_run(sb, "echo " SECRET_ARG, 30000, &rr, &err) != ASB_OK) rc = 1;
    asb_run_result_free(&rr);
    if (asb_sandbox_write(sb, "otel/f.txt", body, sizeof body - 1, &err) != ASB_OK) rc = 1;
    asb_buf_init(&out, NULL);
    if (asb_sandbox_read(sb, "otel/f.txt", &out, &err) != ASB_OK) rc = 1;
    asb_buf_free(&out);
    asb_buf_init(&out, NULL);
    if (asb_sandbox_read(sb, "otel/missing.txt", &out, &err) != ASB_ERR_NOT_FOUND) rc = 1;
    asb_buf_free(&out);
    if (asb_sandbox_exists(sb, "otel/f.txt", &ex, &err) != ASB_OK || !ex) rc = 1;
    if (asb_sandbox_list(sb, "otel", &fl, &err) != ASB_OK || fl.count != 1) rc = 1;
    asb_file_list_free(&fl);
    if (asb_sandbox_terminate(sb, &err) != ASB_OK) {
        fprintf(stderr, "terminate: %s\n", err.message);
        rc = 1;
    }
    asb_client_free(c); /* flushes the exporter */
    fclose(facts);
    return rc;
}

/* Runs with a collector that is stopped or gone. */
static int faulty(int n) {
    asbt_log lg;
    asb_logger logger;
    asb_client *c;
    asb_sandbox *sb;
    asb_error err;
    int i, failures = 0, logs;
    int64_t worst = 0;
    asbt_log_open(&lg, &logger, ASB_LOG_WARN);
    c = client(1, &lg, &logger, 3000);
    sb = create(c);
    for (i = 0; i < n; i++) {
        asb_run_result rr;
        int64_t t0 = asb__now_ms(), took;
        if (asb_sandbox_run(sb, "true", 30000, &rr, &err) != ASB_OK) failures++;
        took = asb__now_ms() - t0;
        if (took > worst) worst = took;
        asb_run_result_free(&rr);
    }
    if (asb_sandbox_terminate(sb, &err) != ASB_OK) failures++;
    asb_client_free(c);
    logs = asbt_log_count(&lg, "otel.export");
    printf("calls=%d failures=%d max_ms=%lld export_logs=%d\n", n, failures, (long long)worst,
           logs);
    if (logs != 1) fprintf(stderr, "%s", lg.text.ptr);
    asbt_log_close(&lg);
    /* a call never waits for the exporter: its timeout is 3 s, so one that
       did would take that long at least */
    return failures == 0 && logs == 1 && worst < 2500 ? 0 : 1;
}

/* One sandbox life on a client of its own, connected as d says (tracing
   is set here), under its own service name: `echo <said>` ends as want
   says, printing said when it answers; how names the way in for the
   errors. 0 when it does. */
static int one_life(asb_client_desc *d, const char *service, const char *how, const char *said,
                    asb_result want) {
    asb_client *c;
    asb_sandbox *sb;
    asb_run_result rr;
    asb_error err;
    asb_result r;
    char cmd[128], out[128];
    int rc = 0;
    d->tracer.enable = 1;
    d->tracer.service_name = service;
    d->tracer.export_interval_ms = 200;
    if (asb_client_create(d, &c, &err) != ASB_OK) {
        fprintf(stderr, "client: %s\n", err.message);
        return 1;
    }
    snprintf(cmd, sizeof cmd, "echo %s", said);
    snprintf(out, sizeof out, "%s\n", said);
    memset(&rr, 0, sizeof rr);
    sb = create(c);
    r = asb_sandbox_run(sb, cmd, 30000, &rr, &err);
    if (r != want) {
        fprintf(stderr, "run through %s: %s (%s), want %s\n", how, asb_result_str(r),
                r == ASB_OK ? "" : err.message, asb_result_str(want));
        rc = 1;
    } else if (r == ASB_OK && (!rr.out.ptr || strcmp(rr.out.ptr, out) != 0)) {
        fprintf(stderr, "run through %s: stdout \"%s\"\n", how, rr.out.ptr ? rr.out.ptr : "");
        rc = 1;
    }
    asb_run_result_free(&rr);
    if (asb_sandbox_terminate(sb, &err) != ASB_OK) {
        fprintf(stderr, "terminate: %s\n", err.message);
        rc = 1;
    }
    asb_client_free(c); /* flushes the exporter */
    return rc;
}

/* One client through a Gateway, its own service name; 0 when the run
   ends as want says. */
static int through_gateway(const char *service, const char *gateway, int port, int wait_ms,
                           asb_result want) {
    asb_client_desc d;
    char how[160];
    memset(&d, 0, sizeof d);
    d.mode = ASB_CONNECT_GATEWAY;
    d.gateway_name = gateway;
    d.gateway_port = port;
    d.gateway_ready_timeout_ms = wait_ms;
    snprintf(how, sizeof how, "Gateway %s", gateway);
    return one_life(&d, service, how, "through the gateway", want);
}

/* One client through the native tunnel, its own service name; 0 when its
   run answered. */
static int through_native(void) {
    asb_client_desc d;
    memset(&d, 0, sizeof d);
    d.mode = ASB_CONNECT_NATIVE_TUNNEL;
    return one_life(&d, "sandbox-client-native", "the native tunnel", "through the native tunnel",
                    ASB_OK);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "traced") == 0) return traced(argv[2]);
    if (argc == 3 && (strcmp(argv[1], "stalled") == 0 || strcmp(argv[1], "down") == 0))
        return faulty(atoi(argv[2]));
    if (argc == 3 && strcmp(argv[1], "gateway") == 0)
        return through_gateway("sandbox-client-gw", "asb-gw", atoi(argv[2]), 60000, ASB_OK) |
               through_gateway("sandbox-client-gw-none", "no-such-gateway", atoi(argv[2]), 1500,
                               ASB_ERR_TIMEOUT);
    if (argc == 2 && strcmp(argv[1], "native") == 0) return through_native();
    fprintf(stderr, "usage: otel_e2e traced FACTS | stalled N | down N | gateway PORT | native\n");
    return 2;
}
