/* The Kubernetes layer against the real local control plane
   (tools/localcluster): every credential kind, CRUD, selectors,
   pagination, RBAC denial, watches (events, resume, 410 recovery, an
   apiserver restart mid-stream).
   ASB_CLUSTER_KUBECONFIGS names the directory of its kubeconfigs. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include "asbtest.h"
#include "cluster.h"
#include "logsink.h"

#include <dirent.h>

static const asb_kube_resource templates = {"extensions.agents.x-k8s.io", "v1alpha1",
                                            "sandboxtemplates"};
static char prefix[64];

/* A client for the kubeconfig `which`; with `lg`, its log goes there. */
static asb_kube_client *connect_logged(const char *which, asbt_log *lg, asb_error *err) {
    char path[1024];
    asb_kube_client_desc d;
    asb_kube_client *kc = NULL;
    snprintf(path, sizeof path, "%s/%s.kubeconfig", cluster_dir(), which);
    memset(&d, 0, sizeof d);
    d.kubeconfig.path = path;
    d.http.retry.backoff_ms = 50;
    if (lg) asbt_log_open(lg, &d.http.log, ASB_LOG_DEBUG);
    if (asb_kube_client_create(&d, &kc, err) != ASB_OK) return NULL;
    return kc;
}

static asb_kube_client *connect_as(const char *which, asb_error *err) {
    return connect_logged(which, NULL, err);
}

static void template_json(asb_buf *b, const char *name, const char *team) {
    asb_json_writer w;
    b->len = 0;
    asb_json_writer_init(&w, b);
    asb_json_object_begin(&w);
    asb_json_key(&w, "apiVersion");
    asb_json_string(&w, "extensions.agents.x-k8s.io/v1alpha1");
    asb_json_key(&w, "kind");
    asb_json_string(&w, "SandboxTemplate");
    asb_json_key(&w, "metadata");
    asb_json_object_begin(&w);
    asb_json_key(&w, "name");
    asb_json_string(&w, name);
    asb_json_key(&w, "labels");
    asb_json_object_begin(&w);
    asb_json_key(&w, "asb-test");
    asb_json_string(&w, prefix);
    asb_json_key(&w, "team");
    asb_json_string(&w, team);
    asb_json_object_end(&w);
    asb_json_object_end(&w);
    asb_json_key(&w, "spec");
    asb_json_object_begin(&w);
    asb_json_key(&w, "podTemplate");
    asb_json_object_begin(&w);
    asb_json_key(&w, "spec");
    asb_json_object_begin(&w);
    asb_json_key(&w, "containers");
    asb_json_array_begin(&w);
    asb_json_object_begin(&w);
    asb_json_key(&w, "name");
    asb_json_string(&w, "c");
    asb_json_key(&w, "image");
    asb_json_string(&w, "x");
    asb_json_object_end(&w);
    asb_json_array_end(&w);
    asb_json_object_end(&w);
    asb_json_object_end(&w);
    asb_json_object_end(&w);
    asb_json_object_end(&w);
    if (asb_json_writer_finish(&w) != ASB_OK) abort();
}

/* What a case made. A failed ASBT check leaves the function it is in at
   once, so each case's checks run in a body that records here what it
   makes as soon as it makes it, and the case frees all of it after the
   body returns, whichever check ended it: a failed check no longer leaks
   the kube clients, buffers, documents, logs, waiters and tokens made
   before it, nor leaves its objects in the cluster (nor a thread using
   them: a body joins its threads before it checks what they did). A body
   may free a thing early (free_kc, close_log, made_forget clear what they
   free). made_free frees users before what they use: the waiters before
   their client, the objects deleted (by kc[0]) before the clients go,
   the clients before the logs they write to. */
#define MADE_OBJS 48
typedef struct restart_state restart_state;
typedef struct made {
    asb_kube_client *kc[3];      /* kc[0] deletes the objects below */
    struct {
        const asb_kube_resource *res;
        const char *ns;          /* NULL: cluster-scoped */
        char name[128];
    } obj[MADE_OBJS];            /* deleted last made first; NotFound is fine */
    int nobj;
    asb__waiter *w[3];           /* left before the clients go */
    asb_cancel *cancel;
    asb_json_doc doc;
    asb_buf buf[2];
    asbt_log log[2];             /* set up when log_open */
    int log_open[2];
    restart_state *restart;      /* its lock and condition destroyed */
} made;

/* Records an object the case is about to create, to be deleted after. */
static void made_obj(made *m, const asb_kube_resource *res, const char *ns, const char *name) {
    if (m->nobj == MADE_OBJS) abort(); /* a case makes more than it said */
    m->obj[m->nobj].res = res;
    m->obj[m->nobj].ns = ns;
    snprintf(m->obj[m->nobj].name, sizeof m->obj[m->nobj].name, "%s", name);
    m->nobj++;
}

/* The case deleted its objects itself (checking how): nothing is left. */
static void made_forget(made *m) { m->nobj = 0; }

static void free_kc(asb_kube_client **kc) {
    asb_kube_client_free(*kc);
    *kc = NULL;
}

static void close_log(made *m, int i) {
    if (m->log_open[i]) asbt_log_close(&m->log[i]);
    m->log_open[i] = 0;
}

static void restart_state_destroy(restart_state *s);

static void made_free(made *m) {
    int i;
    for (i = 0; i < 3; i++) asb__informer_leave(m->w[i]);
    asb_cancel_free(m->cancel);
    for (i = m->nobj - 1; i >= 0 && m->kc[0]; i--)
        asb_kube_delete(m->kc[0], m->obj[i].res, m->obj[i].ns, m->obj[i].name, NULL);
    for (i = 0; i < 3; i++) free_kc(&m->kc[i]);
    for (i = 0; i < 2; i++) asb_buf_free(&m->buf[i]);
    asb_json_doc_free(&m->doc);
    for (i = 0; i < 2; i++) close_log(m, i);
    if (m->restart) restart_state_destroy(m->restart);
}

/* Runs a case's body with a fresh record and frees what it made. */
static void made_run(void (*body)(made *m)) {
    made m;
    memset(&m, 0, sizeof m);
    asb_buf_init(&m.buf[0], NULL);
    asb_buf_init(&m.buf[1], NULL);
    body(&m);
    made_free(&m);
}

/* A case: its name runs `name_body` through made_run. */
#define MADE_TEST(name)                          \
    static void name##_body(made *m);           \
    ASBT_TEST(name) { made_run(name##_body); }  \
    static void name##_body(made *m)

MADE_TEST(every_credential_kind_authenticates) {
    static const char *who[] = {"admin", "token", "exec"};
    size_t i;
    for (i = 0; i < 3; i++) {
        asb_error err;
        asb_kube_client *kc = m->kc[0] = connect_as(who[i], &err);
        asb_buf *out = &m->buf[0];
        if (!kc) fprintf(stderr, "    %s: %s\n", who[i], err.message);
        ASBT_CHECK(kc != NULL);
        ASBT_EQ_RES(asb_kube_list(kc, &templates, "default", NULL, out, &err), ASB_OK);
        ASBT_CONTAINS(out->ptr, "SandboxTemplateList");
        asb_buf_free(out);
        free_kc(&m->kc[0]);
    }
}

MADE_TEST(rbac_denial_is_a_403_with_the_apiservers_message) {
    asb_error err;
    asb_kube_client *kc = m->kc[0] = connect_as("restricted", &err);
    ASBT_CHECK(kc != NULL);
    ASBT_EQ_RES(asb_kube_list(kc, &templates, "default", NULL, NULL, &err), ASB_ERR_KUBE_API);
    ASBT_EQ_INT(err.http_status, 403);
    ASBT_EQ_STR(err.reason, "Forbidden");
    ASBT_CONTAINS(err.message, "lc-restricted-user");
    ASBT_CONTAINS(err.message, "cannot list resource \"sandboxtemplates\"");
}

MADE_TEST(create_get_patch_list_page_and_delete_custom_objects) {
    asb_error err;
    asb_kube_client *kc = m->kc[0] = connect_as("token", &err);
    asb_buf *b = &m->buf[0], *out = &m->buf[1];
    char name[128], sel[128];
    int i, pages = 0, seen = 0;
    asb_kube_list_opts lo;
    ASBT_CHECK(kc != NULL);
    for (i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "%s-t%d", prefix, i);
        template_json(b, name, i % 2 ? "odd" : "even");
        out->len = 0;
        made_obj(m, &templates, "default", name);
        ASBT_EQ_RES(asb_kube_create(kc, &templates, "default", b->ptr, b->len, out, &err), ASB_OK);
        ASBT_CONTAINS(out->ptr, name);
    }
    /* creating it again: 409 AlreadyExists, decoded */
    ASBT_EQ_RES(asb_kube_create(kc, &templates, "default", b->ptr, b->len, NULL, &err),
                ASB_ERR_KUBE_API);
    ASBT_EQ_INT(err.http_status, 409);
    ASBT_EQ_STR(err.reason, "AlreadyExists");
    snprintf(name, sizeof name, "%s-t1", prefix);
    out->len = 0;
    ASBT_EQ_RES(asb_kube_get(kc, &templates, "default", name, out, &err), ASB_OK);
    ASBT_CONTAINS(out->ptr, "\"team\":\"odd\"");
    out->len = 0;
    ASBT_EQ_RES(asb_kube_patch(kc, &templates, "default", name,
                               "{\"metadata\":{\"labels\":{\"team\":\"patched\"}}}",
                               strlen("{\"metadata\":{\"labels\":{\"team\":\"patched\"}}}"), out, &err),
                ASB_OK);
    ASBT_CONTAINS(out->ptr, "\"team\":\"patched\"");
    /* label selector */
    snprintf(sel, sizeof sel, "asb-test=%s,team=even", prefix);
    memset(&lo, 0, sizeof lo);
    lo.label_selector = sel;
    out->len = 0;
    ASBT_EQ_RES(asb_kube_list(kc, &templates, "default", &lo, out, &err), ASB_OK);
    {
        /* read and freed before the count is checked: a failed check
           leaves the body */
        asb_json_doc *doc = &m->doc;
        int items;
        ASBT_EQ_RES(asb_json_doc_parse(doc, out->ptr, out->len, NULL, NULL), ASB_OK);
        items = doc->toks[asb_json_find(doc, 0, "items")].size;
        asb_json_doc_free(doc);
        ASBT_EQ_INT(items, 3);
    }
    /* field selector */
    snprintf(sel, sizeof sel, "metadata.name=%s", name);
    memset(&lo, 0, sizeof lo);
    lo.field_selector = sel;
    out->len = 0;
    ASBT_EQ_RES(asb_kube_list(kc, &templates, "default", &lo, out, &err), ASB_OK);
    ASBT_CONTAINS(out->ptr, name);
    /* pagination: 2 per page over 5 objects */
    snprintf(sel, sizeof sel, "asb-test=%s", prefix);
    memset(&lo, 0, sizeof lo);
    lo.label_selector = sel;
    lo.limit = 2;
    {
        char cont[1024] = "";
        do {
            asb_json_doc *doc = &m->doc;
            out->len = 0;
            lo.continue_token = cont;
            ASBT_EQ_RES(asb_kube_list(kc, &templates, "default", &lo, out, &err), ASB_OK);
            ASBT_EQ_RES(asb_json_doc_parse(doc, out->ptr, out->len, NULL, NULL), ASB_OK);
            seen += doc->toks[asb_json_find(doc, 0, "items")].size;
            cont[0] = 0;
            asb_json_get_string(doc, asb_json_find(doc, 0, "metadata.continue"), cont,
                                sizeof cont, NULL);
            asb_json_doc_free(doc);
            pages++;
        } while (cont[0] && pages < 10);
    }
    ASBT_EQ_INT(seen, 5);
    ASBT_EQ_INT(pages, 3);
    for (i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "%s-t%d", prefix, i);
        ASBT_EQ_RES(asb_kube_delete(kc, &templates, "default", name, &err), ASB_OK);
    }
    made_forget(m);
    ASBT_EQ_RES(asb_kube_delete(kc, &templates, "default", name, &err), ASB_ERR_NOT_FOUND);
    ASBT_EQ_STR(err.reason, "NotFound");
    ASBT_EQ_RES(asb_kube_get(kc, &templates, "default", name, NULL, &err), ASB_ERR_NOT_FOUND);
}

typedef struct seen_events {
    int added, modified, deleted;
    char name[128];
} seen_events;

static int on_event(void *ud, const asb_watch_event *ev) {
    seen_events *s = (seen_events *)ud;
    if (!asb_json_string_eq(ev->doc, asb_json_find(ev->doc, ev->object, "metadata.name"), s->name,
                            strlen(s->name)))
        return 0;
    if (ev->type == ASB_WATCH_ADDED) s->added++;
    if (ev->type == ASB_WATCH_MODIFIED) s->modified++;
    if (ev->type == ASB_WATCH_DELETED) {
        s->deleted++;
        return 1; /* done */
    }
    return 0;
}

typedef struct mutator {
    asb_kube_client *kc;
    char name[128];
} mutator;

static void *mutate(void *arg) {
    mutator *m = (mutator *)arg;
    asb_buf b;
    asb_error err;
    asb__sleep_ms(300);
    asb_buf_init(&b, NULL);
    template_json(&b, m->name, "w");
    asb_kube_create(m->kc, &templates, "default", b.ptr, b.len, NULL, &err);
    asb__sleep_ms(200);
    asb_kube_patch(m->kc, &templates, "default", m->name,
                   "{\"metadata\":{\"labels\":{\"team\":\"w2\"}}}",
                   strlen("{\"metadata\":{\"labels\":{\"team\":\"w2\"}}}"), NULL, &err);
    asb__sleep_ms(200);
    asb_kube_delete(m->kc, &templates, "default", m->name, &err);
    asb_buf_free(&b);
    return NULL;
}

MADE_TEST(watch_sees_added_modified_deleted) {
    asb_error err;
    asb_kube_client *kc = m->kc[0] = connect_as("admin", &err);
    seen_events s;
    mutator mu;
    pthread_t th;
    asb_watch_opts wo;
    asb_result r;
    ASBT_CHECK(kc != NULL);
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "%s-w", prefix);
    mu.kc = kc;
    memcpy(mu.name, s.name, sizeof mu.name);
    memset(&wo, 0, sizeof wo);
    wo.deadline_ms = 20000;
    wo.timeout_seconds = 2; /* several server-side ends: the watch resumes */
    made_obj(m, &templates, "default", s.name); /* the mutator deletes it, unless it failed */
    pthread_create(&th, NULL, mutate, &mu);
    r = asb_kube_watch(kc, &templates, "default", &wo, on_event, &s, &err);
    pthread_join(th, NULL); /* before any check: the thread uses kc */
    ASBT_EQ_RES(r, ASB_OK);
    ASBT_EQ_INT(s.added, 1);
    ASBT_CHECK(s.modified >= 1);
    ASBT_EQ_INT(s.deleted, 1);
}

/* Counts the first event and stops the watch there. */
static int count_any(void *ud, const asb_watch_event *ev) {
    int *n = (int *)ud;
    (void)ev;
    (*n)++;
    return 1;
}

MADE_TEST(watch_from_a_compacted_version_recovers_from_410) {
    asb_error err;
    asb_kube_client *kc = m->kc[0] = connect_as("admin", &err);
    asb_watch_opts wo;
    int n = 0;
    ASBT_CHECK(kc != NULL);
    memset(&wo, 0, sizeof wo);
    wo.resource_version = "1"; /* long gone: 410, then from "0" */
    wo.deadline_ms = 15000;
    /* the template python-sandbox-template exists: it arrives as ADDED */
    ASBT_EQ_RES(asb_kube_watch(kc, &templates, "default", &wo, count_any, &n, &err), ASB_OK);
    ASBT_EQ_INT(n, 1);
}

MADE_TEST(watch_ends_at_its_deadline_without_spinning) {
    asb_error err;
    asb_kube_client *kc = m->kc[0] = connect_as("admin", &err);
    asb_watch_opts wo;
    seen_events s;
    clock_t c0;
    int64_t t0;
    ASBT_CHECK(kc != NULL);
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "%s-never", prefix);
    memset(&wo, 0, sizeof wo);
    wo.field_selector = "metadata.name=does-not-exist";
    wo.deadline_ms = 3000;
    wo.timeout_seconds = 1;
    c0 = clock();
    t0 = asb__now_ms();
    ASBT_EQ_RES(asb_kube_watch(kc, &templates, "default", &wo, on_event, &s, &err), ASB_ERR_TIMEOUT);
    ASBT_CHECK(asb__now_ms() - t0 >= 2900);
    /* A watch whose deadline failed would reconnect forever (each lasts
       1 s): ten times the deadline is a generous bound, not a speed. */
    ASBT_CHECK(asb__now_ms() - t0 < 30000);
    /* 3 s of waiting: the CPU used is a few handshakes, not a loop */
    ASBT_CHECK((double)(clock() - c0) / CLOCKS_PER_SEC < 0.5);
}

/* -- the shared watch (informer): one watch for many waiters ------------------ */

static asb__informer *informer_of(asb_kube_client *kc) {
    asb__informer *inf;
    pthread_mutex_lock(&kc->lock);
    inf = kc->informers;
    pthread_mutex_unlock(&kc->lock);
    return inf;
}

/* The waiter's callback: Ready once labelled team=ready; its object
   deleted ends the wait with ASB_ERR_METADATA. */
static int until_team_ready(void *ud, const asb_watch_event *ev) {
    int *deleted = (int *)ud;
    if (ev->type == ASB_WATCH_DELETED) {
        *deleted = 1;
        return ASB_ERR_METADATA;
    }
    return asb_json_string_eq(ev->doc, asb_json_find(ev->doc, ev->object, "metadata.labels.team"),
                              "ready", 5)
               ? 1
               : 0;
}

/* WATCHes of a resource open on the apiserver now, of a namespace or of
   one object (every client's: the controller's are cluster-scoped), from
   its /metrics. */
static int namespaced_watches(asb_kube_client *kc, const char *resource) {
    asb_buf m;
    asb_error err;
    const char *p;
    int total = 0;
    char key[200];
    asb_buf_init(&m, NULL);
    if (asb_kube_request(kc, "GET", "/metrics", NULL, NULL, 0, &m, &err) != ASB_OK) {
        fprintf(stderr, "    /metrics: %s\n", err.message);
        asb_buf_free(&m);
        return -1;
    }
    /* scope "namespace": a watch of the namespace; "resource": of one
       object (a fieldSelector on metadata.name, as a watch per waiter
       would be) */
    for (p = m.ptr; (p = strstr(p, "apiserver_longrunning_requests{")) != NULL; p++) {
        const char *eol = strchr(p, '\n'), *k, *sp;
        int i;
        for (i = 0; eol && i < 2; i++) {
            snprintf(key, sizeof key,
                     "resource=\"%s\",scope=\"%s\",subresource=\"\",verb=\"WATCH\"", resource,
                     i ? "resource" : "namespace");
            k = strstr(p, key);
            if (!k || k > eol) continue;
            sp = strchr(k, '}');
            if (sp && sp < eol) total += atoi(sp + 2);
        }
    }
    asb_buf_free(&m);
    return total;
}

typedef struct shared_waiter {
    asb_kube_client *kc;
    int i;
    asb_result created, waited;
    int deleted;
} shared_waiter;

/* One "create": register, create the object, arm with its UID, wait. */
static void *shared_wait_one(void *arg) {
    shared_waiter *sw = (shared_waiter *)arg;
    asb__waiter *w = NULL;
    asb_buf b, out;
    asb_error err;
    asb_json_doc d;
    char name[128], uid[64] = "", rv[32] = "";
    snprintf(name, sizeof name, "%s-sh%d", prefix, sw->i);
    asb_buf_init(&b, NULL);
    asb_buf_init(&out, NULL);
    template_json(&b, name, "new");
    sw->created = asb__informer_join(sw->kc, &templates, "default", name, NULL, until_team_ready,
                                     &sw->deleted, &w, &err);
    if (sw->created == ASB_OK)
        sw->created = asb_kube_create(sw->kc, &templates, "default", b.ptr, b.len, &out, &err);
    if (sw->created == ASB_OK && asb_json_doc_parse(&d, out.ptr, out.len, NULL, NULL) == ASB_OK) {
        asb_json_get_string(&d, asb_json_find(&d, 0, "metadata.uid"), uid, sizeof uid, NULL);
        asb_json_get_string(&d, asb_json_find(&d, 0, "metadata.resourceVersion"), rv, sizeof rv,
                            NULL);
        asb_json_doc_free(&d);
    }
    if (sw->created == ASB_OK) {
        asb__informer_arm(w, uid, rv);
        sw->waited = asb__informer_wait(w, asb__now_ms() + 60000, NULL, NULL, &err);
    }
    asb__informer_leave(w);
    asb_buf_free(&b);
    asb_buf_free(&out);
    return NULL;
}

#define SHARED_WAITERS 40

MADE_TEST(shared_watch_serves_many_waiters_with_one_watch) {
    asb_error err;
    asb_kube_client *kc, *admin = m->kc[0] = connect_as("admin", &err);
    shared_waiter sw[SHARED_WAITERS];
    pthread_t th[SHARED_WAITERS];
    int i, ready = 0, before, during = -1, fds0 = count_entries("/proc/self/fd"),
           tasks0 = count_entries("/proc/self/task");
    asb__informer *inf;
    const char *patch = "{\"metadata\":{\"labels\":{\"team\":\"ready\"}}}";
    ASBT_CHECK(admin != NULL);
    kc = m->kc[1] = connect_as("token", &err);
    ASBT_CHECK(kc != NULL);
    before = namespaced_watches(admin, "sandboxtemplates");
    for (i = 0; i < SHARED_WAITERS; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s-sh%d", prefix, i);
        made_obj(m, &templates, "default", name); /* shared_wait_one makes it */
        memset(&sw[i], 0, sizeof sw[i]);
        sw[i].kc = kc;
        sw[i].i = i;
        sw[i].waited = ASB_ERR_TIMEOUT;
        pthread_create(&th[i], NULL, shared_wait_one, &sw[i]);
    }
    /* once all exist, mark them ready one by one; the waiters are parked */
    for (i = 0; i < SHARED_WAITERS; i++) {
        char name[128];
        int tries;
        snprintf(name, sizeof name, "%s-sh%d", prefix, i);
        for (tries = 0; tries < 200; tries++) {
            if (asb_kube_patch(admin, &templates, "default", name, patch, strlen(patch), NULL,
                               &err) == ASB_OK)
                break;
            asb__sleep_ms(50);
        }
        if (i == SHARED_WAITERS / 2) during = namespaced_watches(admin, "sandboxtemplates");
    }
    for (i = 0; i < SHARED_WAITERS; i++) {
        pthread_join(th[i], NULL);
        ready += sw[i].created == ASB_OK && sw[i].waited == ASB_OK;
    }
    ASBT_EQ_INT(ready, SHARED_WAITERS);
    inf = informer_of(kc);
    ASBT_CHECK(inf != NULL);
    /* one list and one watch for all of them, on our side and the server's */
    ASBT_EQ_INT((int)inf->lists, 1);
    ASBT_EQ_INT((int)inf->watches, 1);
    ASBT_EQ_INT((int)inf->threads, 1);
    fprintf(stderr, "    namespaced template watches on the apiserver: %d before, %d with %d "
                    "waiters\n", before, during, SHARED_WAITERS);
    ASBT_CHECK(before >= 0 && during == before + 1);
    for (i = 0; i < SHARED_WAITERS; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s-sh%d", prefix, i);
        asb_kube_delete(admin, &templates, "default", name, &err);
    }
    made_forget(m);
    free_kc(&m->kc[1]);
    /* its thread joined and its descriptors closed */
    ASBT_EQ_INT(count_entries("/proc/self/task"), tasks0);
    free_kc(&m->kc[0]);
    ASBT_EQ_INT(count_entries("/proc/self/fd"), fds0);
}

/* A watch gap with a 410: the informer resumes from a resourceVersion the
   server no longer has, lists afresh, and the waiter whose object was
   deleted meanwhile fails at once (not at its 60 s deadline); a waiter
   whose object lives on is still served by the watch after the list. */
MADE_TEST(shared_watch_lists_again_after_410_and_fails_a_waiter_deleted_in_the_gap) {
    asb_error err;
    asb_kube_client *kc = m->kc[0] = connect_as("admin", &err);
    asb__waiter **w0 = &m->w[0], **wa = &m->w[1], **wb = &m->w[2];
    asb__informer *inf;
    asb_buf *b = &m->buf[0], *out = &m->buf[1];
    asb_json_doc *d = &m->doc;
    char a[128], bname[128], uida[64] = "", uidb[64] = "";
    static int dead_a, dead_b; /* the informer's thread writes them */
    int gap = 0;
    int64_t t0;
    const char *patch = "{\"metadata\":{\"labels\":{\"team\":\"ready\"}}}";
    ASBT_CHECK(kc != NULL);
    snprintf(a, sizeof a, "%s-gap-a", prefix);
    snprintf(bname, sizeof bname, "%s-gap-b", prefix);
    /* an informer that ran once and lingers with its watch stopped */
    ASBT_EQ_RES(asb__informer_join(kc, &templates, "default", "never-there", NULL,
                                   until_team_ready, &dead_a, w0, &err), ASB_OK);
    asb__sleep_ms(300);
    asb__informer_leave(*w0);
    *w0 = NULL;
    inf = informer_of(kc);
    ASBT_CHECK(inf != NULL);
    /* both objects made, then A deleted, while no watch runs */
    template_json(b, a, "new");
    made_obj(m, &templates, "default", a);
    ASBT_EQ_RES(asb_kube_create(kc, &templates, "default", b->ptr, b->len, out, &err), ASB_OK);
    ASBT_EQ_RES(asb_json_doc_parse(d, out->ptr, out->len, NULL, NULL), ASB_OK);
    asb_json_get_string(d, asb_json_find(d, 0, "metadata.uid"), uida, sizeof uida, NULL);
    asb_json_doc_free(d);
    out->len = 0;
    template_json(b, bname, "new");
    made_obj(m, &templates, "default", bname);
    ASBT_EQ_RES(asb_kube_create(kc, &templates, "default", b->ptr, b->len, out, &err), ASB_OK);
    ASBT_EQ_RES(asb_json_doc_parse(d, out->ptr, out->len, NULL, NULL), ASB_OK);
    asb_json_get_string(d, asb_json_find(d, 0, "metadata.uid"), uidb, sizeof uidb, NULL);
    asb_json_doc_free(d);
    ASBT_EQ_RES(asb_kube_delete(kc, &templates, "default", a, &err), ASB_OK);
    /* the resume point is long compacted: the next watch meets 410 */
    pthread_mutex_lock(&inf->lock);
    snprintf(inf->rv, sizeof inf->rv, "1");
    pthread_mutex_unlock(&inf->lock);
    t0 = asb__now_ms();
    ASBT_EQ_RES(asb__informer_join(kc, &templates, "default", a, uida, until_team_ready, &dead_a,
                                   wa, &err), ASB_OK);
    ASBT_EQ_RES(asb__informer_join(kc, &templates, "default", bname, uidb, until_team_ready,
                                   &dead_b, wb, &err), ASB_OK);
    ASBT_EQ_RES(asb__informer_wait(*wa, t0 + 60000, NULL, &gap, &err), ASB_ERR_METADATA);
    ASBT_CHECK(gap && dead_a);
    ASBT_CHECK(asb__now_ms() - t0 < 60000); /* before the deadline: the gap ended the wait */
    ASBT_EQ_RES(asb_kube_patch(kc, &templates, "default", bname, patch, strlen(patch), NULL, &err),
                ASB_OK);
    ASBT_EQ_RES(asb__informer_wait(*wb, t0 + 60000, NULL, &gap, &err), ASB_OK);
    ASBT_CHECK(!gap && !dead_b);
    ASBT_CHECK(inf->relists >= 1);
    ASBT_EQ_INT((int)inf->gap_deletes, 1);
}

/* A waiter whose object is deleted while the watch runs gets the DELETED
   event; one whose deadline passes gets ASB_ERR_TIMEOUT; one whose token
   is triggered, ASB_ERR_CANCELLED. */
MADE_TEST(shared_watch_reports_deletes_deadlines_and_cancels) {
    asb_error err;
    asb_kube_client *kc = m->kc[0] = connect_as("admin", &err);
    asb__waiter **w = &m->w[0], **wt = &m->w[1];
    asb_buf *b = &m->buf[0], *out = &m->buf[1];
    asb_json_doc *d = &m->doc;
    char name[128], uid[64] = "", rv[32] = "";
    static int dead, dead2; /* the informer's thread writes them */
    ASBT_CHECK(kc != NULL);
    snprintf(name, sizeof name, "%s-del", prefix);
    template_json(b, name, "new");
    ASBT_EQ_RES(asb__informer_join(kc, &templates, "default", name, NULL, until_team_ready, &dead,
                                   w, &err), ASB_OK);
    made_obj(m, &templates, "default", name);
    ASBT_EQ_RES(asb_kube_create(kc, &templates, "default", b->ptr, b->len, out, &err), ASB_OK);
    ASBT_EQ_RES(asb_json_doc_parse(d, out->ptr, out->len, NULL, NULL), ASB_OK);
    asb_json_get_string(d, asb_json_find(d, 0, "metadata.uid"), uid, sizeof uid, NULL);
    asb_json_get_string(d, asb_json_find(d, 0, "metadata.resourceVersion"), rv, sizeof rv, NULL);
    asb_json_doc_free(d);
    asb__informer_arm(*w, uid, rv);
    ASBT_EQ_RES(asb_kube_delete(kc, &templates, "default", name, &err), ASB_OK);
    made_forget(m);
    ASBT_EQ_RES(asb__informer_wait(*w, asb__now_ms() + 60000, NULL, NULL, &err), ASB_ERR_METADATA);
    ASBT_CHECK(dead);
    asb__informer_leave(*w);
    *w = NULL;
    ASBT_EQ_RES(asb__informer_join(kc, &templates, "default", "never-made", NULL,
                                   until_team_ready, &dead2, wt, &err), ASB_OK);
    asb__informer_arm(*wt, NULL, NULL);
    ASBT_EQ_RES(asb__informer_wait(*wt, asb__now_ms() + 300, NULL, NULL, &err), ASB_ERR_TIMEOUT);
    ASBT_EQ_RES(asb_cancel_create(NULL, &m->cancel, &err), ASB_OK);
    asb_cancel_trigger(m->cancel);
    ASBT_EQ_RES(asb__informer_wait(*wt, asb__now_ms() + 60000, m->cancel, NULL, &err),
                ASB_ERR_CANCELLED);
}

/* -- back-pressure: API Priority and Fairness answers 429 --------------------- */

typedef struct apf_thread {
    asb_kube_client *kc;
    int ok;
} apf_thread;

static void *apf_lists(void *arg) {
    apf_thread *t = (apf_thread *)arg;
    asb_error err;
    int i;
    for (i = 0; i < 5; i++)
        t->ok += asb_kube_list(t->kc, &templates, "default", NULL, NULL, &err) == ASB_OK;
    return NULL;
}

#define APF_THREADS 40

/* The apiserver's own load shedding, on demand: a FlowSchema sends the
   token user's lists of sandboxtemplates to a priority level with the
   smallest share of seats, none borrowed, and no queue (Reject), so 40 threads listing
   at once meet 429s with Retry-After. The client holds its other
   requests too (not only the refused one) until then, and spreads the
   comeback over half the wait more, so every one of the 200 lists
   succeeds within the default 5 attempts (its log shows the holds). */
MADE_TEST(a_429_from_priority_and_fairness_holds_and_spreads_the_clients_requests) {
    asb_error err;
    asb_kube_client *admin = m->kc[0] = connect_as("admin", &err);
    asbt_log *lg = &m->log[0];
    asb_kube_client *kc = m->kc[1] = connect_logged("token", lg, &err);
    static const asb_kube_resource pls = {"flowcontrol.apiserver.k8s.io", "v1",
                                          "prioritylevelconfigurations"};
    static const asb_kube_resource fss = {"flowcontrol.apiserver.k8s.io", "v1", "flowschemas"};
    apf_thread t[APF_THREADS];
    pthread_t th[APF_THREADS];
    char name[96], body[1400], path[300];
    int i, ok = 0, refused = 0, held = 0;
    const char *p;
    m->log_open[0] = 1;
    ASBT_CHECK(admin != NULL && kc != NULL);
    snprintf(name, sizeof name, "%s-tiny", prefix);
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"flowcontrol.apiserver.k8s.io/v1\",\"kind\":"
             "\"PriorityLevelConfiguration\",\"metadata\":{\"name\":\"%s\"},\"spec\":{\"type\":"
             "\"Limited\",\"limited\":{\"nominalConcurrencyShares\":1,\"lendablePercent\":0,"
             "\"borrowingLimitPercent\":0,"
             "\"limitResponse\":{\"type\":\"Reject\"}}}}",
             name);
    snprintf(path, sizeof path, "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations");
    made_obj(m, &pls, NULL, name);
    ASBT_EQ_RES(asb_kube_request(admin, "POST", path, NULL, body, strlen(body), NULL, &err), ASB_OK);
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"flowcontrol.apiserver.k8s.io/v1\",\"kind\":\"FlowSchema\","
             "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"priorityLevelConfiguration\":{\"name\":"
             "\"%s\"},\"matchingPrecedence\":100,\"distinguisherMethod\":{\"type\":\"ByUser\"},"
             "\"rules\":[{\"subjects\":[{\"kind\":\"User\",\"user\":{\"name\":"
             "\"lc-token-user\"}}],\"resourceRules\":[{\"verbs\":[\"list\"],\"apiGroups\":["
             "\"extensions.agents.x-k8s.io\"],\"resources\":[\"sandboxtemplates\"],"
             "\"namespaces\":[\"*\"]}]}]}}",
             name, name);
    snprintf(path, sizeof path, "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas");
    made_obj(m, &fss, NULL, name);
    ASBT_EQ_RES(asb_kube_request(admin, "POST", path, NULL, body, strlen(body), NULL, &err), ASB_OK);
    asb__sleep_ms(3000); /* the apiserver's APF configuration controller takes it up */
    for (i = 0; i < APF_THREADS; i++) {
        t[i].kc = kc;
        t[i].ok = 0;
        pthread_create(&th[i], NULL, apf_lists, &t[i]);
    }
    for (i = 0; i < APF_THREADS; i++) {
        pthread_join(th[i], NULL);
        ok += t[i].ok;
    }
    for (p = lg->text.ptr; p && (p = strstr(p, "status 429")) != NULL; p++) refused++;
    for (p = lg->text.ptr; p && (p = strstr(p, "the server answered 429 to this client")) != NULL;
         p++)
        held++;
    fprintf(stderr, "    %d of %d lists succeeded; %d answers were 429; %d requests held\n", ok,
            APF_THREADS * 5, refused, held);
    asb_kube_delete(admin, &fss, NULL, name, &err);
    asb_kube_delete(admin, &pls, NULL, name, &err);
    made_forget(m);
    ASBT_CHECK(refused > 0); /* the apiserver did shed load: the test meant something */
    ASBT_CHECK(held > 0);    /* other requests waited for it, not only the refused one */
    ASBT_EQ_INT(ok, APF_THREADS * 5);
}

/* The apiserver goes away mid-stream and comes back (lc.py restart-apiserver
   stops it with SIGTERM and starts it again on the same port): the watch
   reconnects on its own, waits as long as the restarting server's
   Retry-After asks, resumes from the last resourceVersion (or lists again
   from 0 after a 410), and still sees a change made after the restart. */
struct restart_state { /* typedef'd above, for made */
    asb_kube_client *kc;
    char name[128];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int watching;      /* the first event arrived: the stream is open */
    int restarted;     /* lc.py's exit status, -1 until it ran */
    int modified_after;
};

static void restart_state_destroy(restart_state *s) {
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

static int on_restart_event(void *ud, const asb_watch_event *ev) {
    restart_state *s = (restart_state *)ud;
    int label = asb_json_find(ev->doc, ev->object, "metadata.labels.team");
    pthread_mutex_lock(&s->mu);
    if (!s->watching) {
        s->watching = 1;
        pthread_cond_signal(&s->cv);
    }
    /* MODIFIED when the watch resumed in time; ADDED when the new server
       found the old resourceVersion too old (410) and the watch listed
       again from 0: the restarting server asks for a 5 s pause
       (503, Retry-After: 5), during which the patch usually lands */
    if ((ev->type == ASB_WATCH_MODIFIED || ev->type == ASB_WATCH_ADDED) && s->restarted == 0 &&
        asb_json_string_eq(ev->doc, label, "after", 5))
        s->modified_after = 1;
    pthread_mutex_unlock(&s->mu);
    return s->modified_after ? 1 : 0;
}

static void *restart_then_patch(void *arg) {
    restart_state *s = (restart_state *)arg;
    char cmd[2048];
    const char *dir = cluster_dir();
    const char *lc = getenv("ASB_LC_PY");
    const char *patch = "{\"metadata\":{\"labels\":{\"team\":\"after\"}}}";
    asb_error err;
    int rc, i;
    pthread_mutex_lock(&s->mu);
    while (!s->watching) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    /* the state directory is the kubeconfig directory's parent */
    snprintf(cmd, sizeof cmd, "LC_STATE_DIR=\"%s/..\" %s restart-apiserver >&2",
             dir, lc ? lc : "tools/localcluster/lc.py");
    rc = system(cmd);
    pthread_mutex_lock(&s->mu);
    s->restarted = rc;
    pthread_mutex_unlock(&s->mu);
    /* /readyz is green; give the patch a few tries in case a request still
       lands on a listener that is finishing its start */
    for (i = 0; i < 20; i++) {
        if (asb_kube_patch(s->kc, &templates, "default", s->name, patch, strlen(patch), NULL,
                           &err) == ASB_OK)
            break;
        asb__sleep_ms(250);
    }
    return NULL;
}

static int until_team_after(void *ud, const asb_watch_event *ev) {
    (void)ud;
    if (ev->type == ASB_WATCH_DELETED) return ASB_ERR_METADATA;
    return asb_json_string_eq(ev->doc, asb_json_find(ev->doc, ev->object, "metadata.labels.team"),
                              "after", 5)
               ? 1
               : 0;
}

MADE_TEST(watch_survives_an_apiserver_restart) {
    asb_error err;
    asbt_log *wlog = &m->log[0], *plog = &m->log[1];
    asb_kube_client *kc = m->kc[0] = connect_logged("admin", wlog, &err);
    asb_kube_client *writer = m->kc[1] = connect_logged("admin", plog, &err);
    asb_kube_client *shared = m->kc[2] = connect_as("admin", &err);
    asb__waiter **w = &m->w[0];
    asb_buf *out = &m->buf[1];
    char uid[64] = "";
    restart_state *s = (restart_state *)calloc(1, sizeof *s);
    pthread_t th;
    asb_watch_opts wo;
    asb_buf *b = &m->buf[0];
    char sel[200];
    asb_result r;
    m->log_open[0] = m->log_open[1] = 1;
    if (!s) abort();
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    m->restart = s; /* outlives the body, as made_free needs */
    ASBT_CHECK(kc != NULL && writer != NULL);
    s->kc = writer;
    s->restarted = -1;
    snprintf(s->name, sizeof s->name, "%s-restart", prefix);
    template_json(b, s->name, "before");
    made_obj(m, &templates, "default", s->name);
    ASBT_EQ_RES(asb_kube_create(writer, &templates, "default", b->ptr, b->len, out, &err), ASB_OK);
    {
        asb_json_doc *d = &m->doc;
        ASBT_EQ_RES(asb_json_doc_parse(d, out->ptr, out->len, NULL, NULL), ASB_OK);
        asb_json_get_string(d, asb_json_find(d, 0, "metadata.uid"), uid, sizeof uid, NULL);
        asb_json_doc_free(d);
    }
    /* the shared watch (informer) waits through the same restart */
    ASBT_EQ_RES(asb__informer_join(shared, &templates, "default", s->name, uid, until_team_after,
                                   NULL, w, &err), ASB_OK);
    memset(&wo, 0, sizeof wo);
    snprintf(sel, sizeof sel, "metadata.name=%s", s->name);
    wo.field_selector = sel;
    wo.timeout_seconds = 300; /* no server-side end: only the restart ends it */
    wo.deadline_ms = 120000;
    pthread_create(&th, NULL, restart_then_patch, s);
    r = asb_kube_watch(kc, &templates, "default", &wo, on_restart_event, s, &err);
    pthread_join(th, NULL);
    if (r != ASB_OK || !s->modified_after)
        fprintf(stderr, "    watch: %s\n    the watch's log:\n%s    the writer's log:\n%s",
                r != ASB_OK ? err.message : "ended", wlog->text.ptr, plog->text.ptr);
    ASBT_EQ_RES(r, ASB_OK);
    ASBT_EQ_INT(s->restarted, 0);
    ASBT_CHECK(s->modified_after);
    r = asb__informer_wait(*w, asb__now_ms() + 120000, NULL, NULL, &err);
    if (r != ASB_OK) fprintf(stderr, "    shared watch: %s\n", err.message);
    ASBT_EQ_RES(r, ASB_OK);
    asb__informer_leave(*w);
    *w = NULL;
    free_kc(&m->kc[2]);
    ASBT_EQ_RES(asb_kube_delete(writer, &templates, "default", s->name, &err), ASB_OK);
    made_forget(m);
}

ASBT_LIST(
    ASBT_CASE(every_credential_kind_authenticates)
    ASBT_CASE(rbac_denial_is_a_403_with_the_apiservers_message)
    ASBT_CASE(create_get_patch_list_page_and_delete_custom_objects)
    ASBT_CASE(watch_sees_added_modified_deleted)
    ASBT_CASE(watch_from_a_compacted_version_recovers_from_410)
    ASBT_CASE(watch_ends_at_its_deadline_without_spinning)
    ASBT_CASE(shared_watch_serves_many_waiters_with_one_watch)
    ASBT_CASE(shared_watch_lists_again_after_410_and_fails_a_waiter_deleted_in_the_gap)
    ASBT_CASE(shared_watch_reports_deletes_deadlines_and_cancels)
    ASBT_CASE(a_429_from_priority_and_fairness_holds_and_spreads_the_clients_requests)
    ASBT_CASE(watch_survives_an_apiserver_restart)
)

int main(int argc, char **argv);
#define main asbt_main
ASBT_MAIN()
#undef main
int main(int argc, char **argv) {
    snprintf(prefix, sizeof prefix, "asb-test-%d", (int)getpid());
    return asbt_main(argc, argv);
}
