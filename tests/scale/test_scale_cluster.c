/* Many sandboxes from one client, on the real local control plane
   (tools/localcluster, agent-sandbox v0.5.6: claims from a warm pool).

   create_500_sandboxes_with_one_watch: ASB_SCALE_COUNT (default 500)
   creates at once (asb_client_create_sandboxes, as wide as the count),
   all Ready, then all deleted. Checked: every create succeeded; no claim
   of ours is left; the process has the descriptors and threads it had
   before the client; and the apiserver's namespaced WATCH requests on
   sandboxclaims (apiserver_longrunning_requests in its /metrics, read
   with the cluster admin's credentials every 100 ms during the creates)
   never exceed what they were before by more than one: the client's one
   shared watch, not one per create. Prints the time it took, the peak
   watch count and this process's peak RSS.

   gets_of_unbound_claims_share_one_watch: below.

   ASB_CLUSTER_KUBECONFIGS names the kubeconfig directory. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"
#include "../asbtest.h"
#include "../cluster.h"

#include <dirent.h>
#include <sys/resource.h>

static char kubeconfig_dir[1024];

/* WATCHes of sandboxclaims open on the apiserver now, of a namespace or
   of one claim: every client's (the controller's own are cluster-scoped).
   -1: unreadable. */
static int claim_watches(asb_kube_client *admin) {
    asb_buf m;
    asb_error err;
    const char *p;
    int total = 0;
    /* scope "namespace": a watch of the namespace; "resource": of one
       claim (a fieldSelector on metadata.name: one watch per create would
       show here); "cluster" is the controller's */
    static const char *const keys[] = {
        "resource=\"sandboxclaims\",scope=\"namespace\",subresource=\"\",verb=\"WATCH\"",
        "resource=\"sandboxclaims\",scope=\"resource\",subresource=\"\",verb=\"WATCH\""};
    asb_buf_init(&m, NULL);
    if (asb_kube_request(admin, "GET", "/metrics", NULL, NULL, 0, &m, &err) != ASB_OK) {
        fprintf(stderr, "    /metrics: %s\n", err.message);
        asb_buf_free(&m);
        return -1;
    }
    for (p = m.ptr; (p = strstr(p, "apiserver_longrunning_requests{")) != NULL; p++) {
        const char *eol = strchr(p, '\n'), *brace;
        size_t i;
        for (i = 0; eol && i < 2; i++) {
            const char *k = strstr(p, keys[i]);
            if (!k || k > eol) continue;
            brace = strchr(k, '}');
            if (brace && brace < eol) total += atoi(brace + 2);
        }
    }
    asb_buf_free(&m);
    return total;
}

typedef struct sampler {
    asb_kube_client *admin;
    pthread_mutex_t mu;
    int stop, peak, samples, failed;
} sampler;

static void *sample_watches(void *arg) {
    sampler *s = (sampler *)arg;
    for (;;) {
        int n = claim_watches(s->admin), stop;
        pthread_mutex_lock(&s->mu);
        if (n < 0) s->failed++;
        else if (n > s->peak) s->peak = n;
        s->samples++;
        stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (stop) return NULL;
        asb__sleep_ms(100);
    }
}

static asb_kube_client *admin_client(void) {
    char path[1100];
    asb_kube_client_desc d;
    asb_kube_client *kc = NULL;
    asb_error err;
    snprintf(path, sizeof path, "%s/admin.kubeconfig", kubeconfig_dir);
    memset(&d, 0, sizeof d);
    d.kubeconfig.path = path;
    if (asb_kube_client_create(&d, &kc, &err) != ASB_OK) {
        fprintf(stderr, "    admin: %s\n", err.message);
        return NULL;
    }
    return kc;
}

static double now_s(void) { return (double)asb__now_ms() / 1000.0; }

/* ASB_SCALE_LOG=1: the client's records on stderr, with a time stamp */
static void log_stderr(void *ud, const asb_log_record *rec) {
    (void)ud;
    fprintf(stderr, "%.3f %s %s\n", now_s(), rec->id, rec->message);
}

static void *nothing(void *arg) { return arg; }

/* The creates, the router runs and the deletes of
   create_500_sandboxes_with_one_watch; admin is its caller's, freed by it
   on every path. */
static void creates_with_one_watch(asb_kube_client *admin) {
    const char *cnt = getenv("ASB_SCALE_COUNT");
    size_t count = cnt && atoi(cnt) > 0 ? (size_t)atoi(cnt) : 500, i, ok = 0, active = 0;
    int base;
    char path[1100], sel[100];
    asb_client_desc desc;
    asb_create_opts opts;
    asb_client *client = NULL;
    asb_create_result *res;
    asb_label label;
    asb_name_list left;
    asb_error err;
    sampler smp;
    pthread_t th;
    asb_result r;
    double t0, t_ready, t_gone;
    struct rusage ru;
    base = claim_watches(admin);
    ASBT_CHECK(base >= 0);
    snprintf(path, sizeof path, "%s/token.kubeconfig", kubeconfig_dir); /* RBAC: agentsandbox-client */
    memset(&desc, 0, sizeof desc);
    desc.kube.kubeconfig.path = path;
    if (getenv("ASB_SCALE_LOG")) {
        desc.log.fn = log_stderr;
        desc.log.min_level = ASB_LOG_DEBUG;
    }
    ASBT_EQ_RES(asb_client_create(&desc, &client, &err), ASB_OK);
    if (!client) return;
    snprintf(sel, sizeof sel, "%d", (int)getpid());
    label.key = "asb-scale";
    label.value = sel;
    memset(&opts, 0, sizeof opts);
    opts.warm_pool = "python-sandbox-warmpool";
    opts.labels = &label;
    opts.label_count = 1;
    opts.ready_timeout_ms = 900000; /* a bound for a loaded machine, not a goal */
    res = (asb_create_result *)calloc(count, sizeof *res);
    ASBT_CHECK(res != NULL);
    memset(&smp, 0, sizeof smp);
    smp.admin = admin;
    smp.peak = base;
    pthread_mutex_init(&smp.mu, NULL);
    pthread_create(&th, NULL, sample_watches, &smp);
    t0 = now_s();
    r = asb_client_create_sandboxes(client, NULL, &opts, count, (int)count, res, &err);
    t_ready = now_s();
    pthread_mutex_lock(&smp.mu);
    smp.stop = 1;
    pthread_mutex_unlock(&smp.mu);
    pthread_join(th, NULL);
    for (i = 0; i < count; i++) {
        ok += res[i].error.code == ASB_OK && res[i].sandbox != NULL;
        active += res[i].sandbox && asb_sandbox_is_active(res[i].sandbox);
    }
    if (r != ASB_OK) fprintf(stderr, "    %s\n", err.message);
    ASBT_EQ_RES(r, ASB_OK);
    ASBT_EQ_INT((int)ok, (int)count);
    ASBT_EQ_INT((int)active, (int)count);
    /* one command through the router on the first and the last */
    for (i = 0; i < count; i += count - 1) {
        asb_run_result run;
        if (!res[i].sandbox) break;
        ASBT_EQ_RES(asb_sandbox_run(res[i].sandbox, "echo scale", 60000, &run, &err), ASB_OK);
        ASBT_EQ_STR(run.out.ptr, "scale\n");
        asb_run_result_free(&run);
        if (count == 1) break;
    }
    ASBT_EQ_RES(asb_client_delete_all(client, &err), ASB_OK);
    t_gone = now_s();
    asb_client_free(client);
    free(res);
    /* no claim of ours is left (a deleted claim with no finalizer goes at once) */
    memset(&left, 0, sizeof left);
    {
        char selector[120];
        asb_client *lister = NULL;
        snprintf(path, sizeof path, "%s/admin.kubeconfig", kubeconfig_dir);
        memset(&desc, 0, sizeof desc);
        desc.kube.kubeconfig.path = path;
        desc.mode = ASB_CONNECT_DIRECT;
        desc.direct_url = "http://127.0.0.1:1"; /* never dialled: only listing */
        ASBT_EQ_RES(asb_client_create(&desc, &lister, &err), ASB_OK);
        snprintf(selector, sizeof selector, "asb-scale=%s", sel);
        ASBT_EQ_RES(asb_client_list_all(lister, "default", selector, &left, &err), ASB_OK);
        ASBT_EQ_INT((int)left.count, 0);
        asb_name_list_free(&left);
        asb_client_free(lister);
    }
    getrusage(RUSAGE_SELF, &ru);
    fprintf(stderr,
            "    %zu sandboxes: create-to-ready %.1f s, deleted in %.1f s; namespaced claim "
            "watches on the apiserver: %d before, peak %d during (%d samples); peak RSS %ld KiB; "
            "CPU %.1f s, %ld voluntary context switches\n",
            count, t_ready - t0, t_gone - t_ready, base, smp.peak, smp.samples, ru.ru_maxrss,
            (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6,
            ru.ru_nvcsw);
    ASBT_EQ_INT(smp.failed, 0);
    ASBT_CHECK(smp.samples >= 2);
    ASBT_CHECK(smp.peak <= base + 1); /* O(1): the client's one shared watch */
    pthread_mutex_destroy(&smp.mu);
}

ASBT_TEST(create_500_sandboxes_with_one_watch) {
    asb_kube_client *admin = admin_client();
    pthread_t th;
    int fds0, tasks0;
    /* a thread started and joined first: ThreadSanitizer starts a thread
       of its own with the program's first, which must not count as ours */
    pthread_create(&th, NULL, nothing, NULL);
    pthread_join(th, NULL);
    fds0 = count_entries("/proc/self/fd");
    tasks0 = count_entries("/proc/self/task");
    ASBT_CHECK(admin != NULL);
    creates_with_one_watch(admin);
    asb_kube_client_free(admin);
    if (asbt_failed_now) return; /* what a failed case left open says nothing more */
    /* the shared watch's thread, the tunnel's pipes, the pools' sockets,
       the batch's threads: all gone with the client */
    ASBT_EQ_INT(count_entries("/proc/self/task"), tasks0);
    ASBT_EQ_INT(count_entries("/proc/self/fd"), fds0);
}

/* gets_of_unbound_claims_share_one_watch: GETSHARE_CLAIMS claims that
   stay unbound and unjudged (below: the controller cannot write their
   status), attached to at once from as many threads with
   asb_client_get_sandbox. Each waits out its resolve timeout (15 s: long
   enough for the sampler to look several times on a loaded machine) for
   a binding that never comes, on the client's shared watch of the
   namespace: the apiserver sees exactly one more claim watch during the
   waits, not one per get (which a watch of each claim would show, scope
   "resource"). Meanwhile a get of a claim the controller has judged
   (WarmPoolNotFound: its warm pool does not exist) fails at once with
   that reason, as the Python SDK 1.0.8's does, rather than waiting on the
   shared watch for an event that will not come. */
#define GETSHARE_CLAIMS 8
#define GETSHARE_WAIT_MS 15000

/* Claims the controller cannot judge: a ValidatingAdmissionPolicy (the
   apiserver's own CEL admission) refuses every status write to a claim
   labelled asb-test-frozen, so such a claim stays as it was made,
   unbound and without a condition, however long anyone waits. */
#define FROZEN_POLICY "asb-test-frozen-claims"
static const char frozen_policy[] =
    "{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":\"ValidatingAdmissionPolicy\","
    "\"metadata\":{\"name\":\"" FROZEN_POLICY "\"},\"spec\":{\"failurePolicy\":\"Fail\","
    "\"matchConstraints\":{\"resourceRules\":[{\"apiGroups\":[\"extensions.agents.x-k8s.io\"],"
    "\"apiVersions\":[\"*\"],\"operations\":[\"UPDATE\"],\"resources\":[\"sandboxclaims/status\"]}]},"
    "\"validations\":[{\"expression\":\"false\",\"message\":\"asb test: this claim's status is "
    "frozen\"}]}}";
static const char frozen_binding[] =
    "{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":"
    "\"ValidatingAdmissionPolicyBinding\",\"metadata\":{\"name\":\"" FROZEN_POLICY "\"},"
    "\"spec\":{\"policyName\":\"" FROZEN_POLICY "\",\"validationActions\":[\"Deny\"],"
    "\"matchResources\":{\"objectSelector\":{\"matchLabels\":{\"asb-test-frozen\":\"true\"}}}}}";
#define VAP_PATH "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
#define VAPB_PATH "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"

static const asb_kube_resource claims_res = {"extensions.agents.x-k8s.io", "v1beta1",
                                             "sandboxclaims"};

/* A claim of a warm pool that does not exist; frozen: labelled for the
   policy. */
static asb_result make_claim(asb_kube_client *admin, const char *name, int frozen) {
    char body[512];
    asb_error err;
    int n = snprintf(body, sizeof body,
                     "{\"apiVersion\":\"extensions.agents.x-k8s.io/v1beta1\",\"kind\":"
                     "\"SandboxClaim\",\"metadata\":{\"name\":\"%s\"%s},\"spec\":{"
                     "\"warmPoolRef\":{\"name\":\"no-such-pool-%d\"}}}",
                     name, frozen ? ",\"labels\":{\"asb-test-frozen\":\"true\"}" : "",
                     (int)getpid());
    asb_result r = asb_kube_create(admin, &claims_res, "default", body, (size_t)n, NULL, &err);
    if (r != ASB_OK) fprintf(stderr, "    create %s: %s\n", name, err.message);
    return r;
}

/* Installs the policy (one left by a killed run is fine) and returns once
   the apiserver enforces it: a status write to a frozen probe claim is
   refused with the policy's message (policies take effect a moment after
   they are made). 1: enforced. */
static int freeze_claims(asb_kube_client *admin, const char *probe) {
    static const char patch[] = "{\"status\":{\"conditions\":[{\"type\":\"AsbProbe\","
                                "\"status\":\"True\",\"reason\":\"Probe\",\"message\":\"probe\","
                                "\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]}}";
    char path[512];
    asb_error err;
    asb_result r;
    int64_t until = asb__now_ms() + 120000; /* a bound for a loaded machine */
    r = asb_kube_request(admin, "POST", VAP_PATH, "application/json", frozen_policy,
                         sizeof frozen_policy - 1, NULL, &err);
    if (r != ASB_OK && err.http_status != 409) {
        fprintf(stderr, "    policy: %s\n", err.message);
        return 0;
    }
    r = asb_kube_request(admin, "POST", VAPB_PATH, "application/json", frozen_binding,
                         sizeof frozen_binding - 1, NULL, &err);
    if (r != ASB_OK && err.http_status != 409) {
        fprintf(stderr, "    policy binding: %s\n", err.message);
        return 0;
    }
    if (make_claim(admin, probe, 1) != ASB_OK) return 0;
    snprintf(path, sizeof path,
             "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default/sandboxclaims/%s/status",
             probe);
    for (;;) {
        r = asb_kube_request(admin, "PATCH", path, "application/merge-patch+json", patch,
                             sizeof patch - 1, NULL, &err);
        if (r != ASB_OK && strstr(err.message, "frozen") != NULL) return 1;
        if (asb__now_ms() > until) {
            fprintf(stderr, "    the policy is not enforced: %s\n",
                    r == ASB_OK ? "the probe's status was written" : err.message);
            return 0;
        }
        asb__sleep_ms(200);
    }
}

static void unfreeze_claims(asb_kube_client *admin) {
    asb_error err;
    if (asb_kube_request(admin, "DELETE", VAPB_PATH "/" FROZEN_POLICY, NULL, NULL, 0, NULL,
                         &err) != ASB_OK)
        fprintf(stderr, "    policy binding delete: %s\n", err.message);
    if (asb_kube_request(admin, "DELETE", VAP_PATH "/" FROZEN_POLICY, NULL, NULL, 0, NULL,
                         &err) != ASB_OK)
        fprintf(stderr, "    policy delete: %s\n", err.message);
}

typedef struct get_job {
    asb_client *client;
    char claim[64];
    asb_result r;
    asb_error err;
} get_job;

static void *get_unbound(void *arg) {
    get_job *g = (get_job *)arg;
    asb_sandbox *sb = NULL;
    g->r = asb_client_get_sandbox(g->client, g->claim, "default", GETSHARE_WAIT_MS, &sb,
                                  &g->err);
    return NULL;
}

/* gets_of_unbound_claims_share_one_watch, once the policy is enforced;
   admin is its caller's. */
static void gets_share_one_watch(asb_kube_client *admin, const char *judged) {
    asb_client_desc desc;
    asb_client *client = NULL;
    asb_sandbox *sb = NULL;
    get_job jobs[GETSHARE_CLAIMS];
    pthread_t th[GETSHARE_CLAIMS], sth;
    sampler smp;
    asb_error err, jerr;
    asb_result jr;
    char path[1100];
    int i, base, seen = 0, made = 0;
    int64_t until;
    base = claim_watches(admin);
    ASBT_CHECK(base >= 0);
    snprintf(path, sizeof path, "%s/token.kubeconfig", kubeconfig_dir);
    memset(&desc, 0, sizeof desc);
    desc.kube.kubeconfig.path = path;
    ASBT_EQ_RES(asb_client_create(&desc, &client, &err), ASB_OK);
    if (!client) return;
    for (i = 0; i < GETSHARE_CLAIMS; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].client = client;
        snprintf(jobs[i].claim, sizeof jobs[i].claim, "getshare-%d-%d", (int)getpid(), i);
        if (make_claim(admin, jobs[i].claim, 1) == ASB_OK) made++;
    }
    ASBT_EQ_INT(made, GETSHARE_CLAIMS);
    memset(&smp, 0, sizeof smp);
    smp.admin = admin;
    smp.peak = base;
    pthread_mutex_init(&smp.mu, NULL);
    pthread_create(&sth, NULL, sample_watches, &smp);
    for (i = 0; i < GETSHARE_CLAIMS; i++) pthread_create(&th[i], NULL, get_unbound, &jobs[i]);
    /* the judged claim, once the shared watch is up (its list long done:
       waiting there, this get would see no event of its claim again) */
    until = asb__now_ms() + 60000;
    while (!seen && asb__now_ms() < until) {
        pthread_mutex_lock(&smp.mu);
        seen = smp.peak > base;
        pthread_mutex_unlock(&smp.mu);
        if (!seen) asb__sleep_ms(50);
    }
    memset(&jerr, 0, sizeof jerr);
    jr = asb_client_get_sandbox(client, judged, "default", GETSHARE_WAIT_MS, &sb, &jerr);
    for (i = 0; i < GETSHARE_CLAIMS; i++) pthread_join(th[i], NULL);
    pthread_mutex_lock(&smp.mu);
    smp.stop = 1;
    pthread_mutex_unlock(&smp.mu);
    pthread_join(sth, NULL);
    for (i = 0; i < GETSHARE_CLAIMS; i++) /* first, whatever the checks say */
        ASBT_CHECK(asb_kube_delete(admin, &claims_res, "default", jobs[i].claim, &err) == ASB_OK);
    asb_client_free(client);
    pthread_mutex_destroy(&smp.mu);
    fprintf(stderr, "    %d gets of unbound claims: claim watches on the apiserver %d before, "
            "peak %d during (%d samples)\n", GETSHARE_CLAIMS, base, smp.peak, smp.samples);
    ASBT_EQ_INT(smp.failed, 0);
    ASBT_CHECK(smp.samples >= 2);
    ASBT_CHECK(seen);
    ASBT_EQ_INT(smp.peak, base + 1); /* the shared watch, not one per get */
    for (i = 0; i < GETSHARE_CLAIMS; i++) {
        /* never bound: the resolve timeout, saying which claim */
        ASBT_EQ_RES(jobs[i].r, ASB_ERR_TIMEOUT);
        ASBT_CONTAINS(jobs[i].err.message, jobs[i].claim);
    }
    /* the judged one: its reason, at once (a wait would end in
       ASB_ERR_TIMEOUT) */
    ASBT_EQ_RES(jr, ASB_ERR_WARMPOOL_NOT_FOUND);
    ASBT_CHECK(sb == NULL);
    ASBT_CONTAINS(jerr.message, judged);
    ASBT_CONTAINS(jerr.message, "WarmPoolNotFound");
}

ASBT_TEST(gets_of_unbound_claims_share_one_watch) {
    asb_kube_client *admin = admin_client();
    char probe[64], judged[64];
    asb_error err;
    int judged_ok = 0;
    int64_t until = asb__now_ms() + 120000; /* a bound for a loaded machine */
    ASBT_CHECK(admin != NULL);
    if (!admin) return;
    snprintf(probe, sizeof probe, "getshare-probe-%d", (int)getpid());
    snprintf(judged, sizeof judged, "getshare-judged-%d", (int)getpid());
    /* the judged claim first, judged before the policy exists */
    ASBT_EQ_RES(make_claim(admin, judged, 0), ASB_OK);
    while (!judged_ok && asb__now_ms() < until) {
        asb_buf b;
        asb_buf_init(&b, NULL);
        judged_ok = asb_kube_get(admin, &claims_res, "default", judged, &b, &err) == ASB_OK &&
                    b.len && strstr(b.ptr, "WarmPoolNotFound") != NULL;
        asb_buf_free(&b);
        if (!judged_ok) asb__sleep_ms(200);
    }
    ASBT_CHECK(judged_ok);
    if (judged_ok) {
        int frozen = freeze_claims(admin, probe);
        ASBT_CHECK(frozen);
        if (frozen) gets_share_one_watch(admin, judged);
    }
    unfreeze_claims(admin);
    asb_kube_delete(admin, &claims_res, "default", probe, &err);
    asb_kube_delete(admin, &claims_res, "default", judged, &err);
    asb_kube_client_free(admin);
}

ASBT_LIST(
    ASBT_CASE(create_500_sandboxes_with_one_watch)
    ASBT_CASE(gets_of_unbound_claims_share_one_watch)
)

int main(int argc, char **argv);
#define main asbt_main
ASBT_MAIN()
#undef main
int main(int argc, char **argv) {
    snprintf(kubeconfig_dir, sizeof kubeconfig_dir, "%s", cluster_dir());
    return asbt_main(argc, argv);
}
