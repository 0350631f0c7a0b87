/* SPDX-License-Identifier: Apache-2.0 */
/*
 * assign-watch — the agent's side of honouring the scheduler's assignment (assign.h): an informer
 * of the pods bound to this node (src/kube, on the publisher's API client: fieldSelector
 * spec.nodeName=NODE, slim pods), the handler hooks (begin before the device lock: candidates, a LIST when
 * the informer may lag, kubelet's PodResources as evidence; check/narrow under the lock; commit
 * after an Allocate answered), and a patcher thread that confirms a pod once every GPU resource of
 * it was handed out: it checks with PodResources that the pod holds the assigned GPUs (and
 * rewrites the assignment to what it really holds if not), then patches gpuslice.io/assigned (and
 * the profile's flag) to "true" with a uid + resourceVersion precondition.
 *
 * Locks: a->lock (marks, queue) is taken alone or under the device lock, never the other way round.
 * PodResources is the agent's one service (podres.h): a handler waits at most PODRES_HANDLER_MS for an answer
 * asked after its call began, the patcher PODRES_CALL_MS; a handler's LIST at most ASSIGN_LIST_MS.
 * Must never: block a handler past PODRES_HANDLER_MS + ASSIGN_LIST_MS, or patch a pod whose
 * uid or assignment changed since it was matched.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/assign.h"
#include "agent/devices.h"
#include "agent/podres.h"
#include "agent/share.h"
#include "cluster/cluster.h"
#include "kube/kube.h"
#include "metrics/metrics.h"
#include "util/log.h"
#include "util/util.h"

#define ASSIGN_LIST_MS 1000        /* a handler's LIST of the node's pods: every page within this */
#define ASSIGN_MARKS_MAX 1024      /* (pod, container, kind) honoured, kept until the pod is confirmed */
#define ASSIGN_QUEUE_MAX 256       /* pods waiting for their patch */
#define ASSIGN_VERIFY_MS 15000     /* how long the patcher waits for PodResources to list the devices */
#define ASSIGN_PATCH_RETRIES 5     /* conflicts (the pod changed) re-read and retried */
#define ASSIGN_SYNC_WAIT_MS 2000   /* at start: how long to wait for the first list of the node's pods */
#define ASSIGN_LIST_SLOW_MS 1000   /* a handler's LIST slower than this ... */
#define ASSIGN_LIST_PAUSE_MS 30000 /* ... or failed: no LIST from handlers for this long */
#define ASSIGN_SWEEP_MS 30000      /* how often pods held per PodResources but not marked are looked for */
#define ASSIGN_KEY_MAX 320         /* "namespace/name" */
#define ASSIGN_MEMO_MAX 512        /* pods kubelet lists that a LIST found without an assignment */
#define ASSIGN_RECORD_MS 1000      /* after a node-local Allocate: sweep this soon (record the pod) */

struct mark {
        char uid[64];
        uint8_t container, kind;
};

struct queued {
        char ns[64], name[254], uid[64];
        uint64_t since_ms, next_ms;
};

struct assign {
        struct kube_client *client; /* borrowed (the publisher's) */
        struct kube_informer *inf;
        const struct devices *dev; /* borrowed: the table the IDs of kubelet's calls name */
        char node[256];
        struct podres_service *podres; /* borrowed: the agent's PodResources (podres.h) */
        struct assign_names names;

        /* the GPUs' UUIDs by NVML index (the assignments the agent records name them) */
        char uuid[CLUSTER_GPUS_MAX][CLUSTER_UUID_MAX];
        const char *uuid_ptr[CLUSTER_GPUS_MAX];

        pthread_mutex_t lock; /* marks, queue, sweep_at */
        pthread_cond_t cond;
        uint64_t sweep_at; /* the patcher's next sweep (now_ms) */
        struct mark marks[ASSIGN_MARKS_MAX];
        size_t n_marks, next_mark;
        struct queued queue[ASSIGN_QUEUE_MAX];
        size_t n_queue;
        /* Pods kubelet lists (PodResources) that the informer does not cache and a LIST found
         * without an assignment: pods without GPU resources (slimmed away), static pods. A call
         * asks the API server only for a pod kubelet lists that is in neither (assign_need_list).
         * Under lock; pruned to what kubelet still lists. */
        char (*memo)[ASSIGN_KEY_MAX];
        size_t n_memo;
        atomic_bool stop;
        pthread_t thread;
        bool started;
        _Atomic uint64_t list_again_ms; /* no LIST from a handler before this (the last was slow or failed) */
};

static void count(const char *family, const char *key, const char *value) {
        const char *help = streq(family, "gpuslice_assign_allocations_total")
                                   ? "Allocate calls by what the scheduler's assignment decided: honoured (the "
                                     "assigned GPUs handed out), refused (kubelet's IDs contradicted it), fallback "
                                     "(no pod with an assignment fits: node-local placement)."
                                   : "Pods the agent finished: confirmed (assigned=true), repaired (the assignment "
                                     "rewritten to the GPUs kubelet lists), unverified (PodResources never listed "
                                     "its devices), failed (the patch failed).";
        metrics_counter_add(metrics_counter_get(family, help, key, value), 1);
}

/* ---- candidates ---- */

static json_t *slim_pod(json_t *obj) {
        return kube_slim_pod(obj);
}

struct collect {
        struct assign *a;
        struct assign_pod *pods;
        size_t n;
        bool all; /* keep confirmed pods too (lookup) */
        /* every cached pod's key, sorted (informer only, when asked for: assign_need_list) */
        char (*keys)[ASSIGN_KEY_MAX];
        size_t n_keys, cap_keys;
        bool want_keys;
};

static void collect_key(struct collect *c, const char *key) {
        if (!c->want_keys || strlen(key) >= ASSIGN_KEY_MAX)
                return;
        if (array_reserve(&c->keys, &c->cap_keys, c->n_keys + 1, 64) < 0)
                return; /* a key missing only makes a LIST more likely */
        strscpy(c->keys[c->n_keys++], key, ASSIGN_KEY_MAX);
}

static void collect_one(struct collect *c, const json_t *obj) {
        if (c->n >= ASSIGN_PODS_MAX)
                return;
        struct assign_pod *p = &c->pods[c->n];
        if (assign_pod_parse(obj, c->a->node, &c->a->names, p) < 0 || (p->confirmed && !c->all))
                return;
        c->n++;
}

static void collect_cb(const char *key, const json_t *obj, void *u) {
        collect_key(u, key);
        collect_one(u, obj);
}

static int key_cmp(const void *x, const void *y) {
        return strcmp(x, y);
}

static int list_cb(json_t *obj, void *u) {
        struct collect *c = u;
        if (!obj) {
                c->n = 0; /* the list restarted */
                return 0;
        }
        json_t *s = kube_slim_pod(obj);
        if (s)
                collect_one(c, s);
        json_decref(s);
        return 0;
}

/* Apply the local marks (Allocates answered, not yet visible in the API). Caller holds a->lock. */
static void apply_marks(struct assign *a, struct assign_pod *pods, size_t n) {
        for (size_t m = 0; m < a->n_marks; m++)
                for (size_t i = 0; i < n; i++)
                        if (streq(pods[i].uid, a->marks[m].uid) && a->marks[m].container < pods[i].n)
                                pods[i].c[a->marks[m].container].done[a->marks[m].kind] = true;
}

/* The pods of this node with an assignment, from the informer, or (fresh) from a LIST. keys (may be
 * NULL; informer only): every cached pod's key, sorted (caller frees keys->keys). */
static int candidates(struct assign *a, bool fresh, struct assign_pod **ret, size_t *ret_n, struct collect *keys) {
        struct collect c = { .a = a,
                             .pods = calloc(ASSIGN_PODS_MAX, sizeof(struct assign_pod)),
                             .want_keys = keys && !fresh };
        if (!c.pods)
                return -ENOMEM;
        if (fresh) {
                char sel[320];
                snprintf(sel, sizeof sel, "spec.nodeName=%s", a->node);
                /* on kubelet's call: bounded well inside its deadline, and counted */
                struct kube_list_opts o = { .field_selector = sel, .timeout_ms = ASSIGN_LIST_MS };
                struct kube_error e;
                int r = kube_list(a->client, "/api/v1/pods", &o, list_cb, &c, NULL, &e);
                podres_handler_wait_count("pods-list", r);
                if (r < 0) {
                        free(c.pods);
                        return r;
                }
        } else
                kube_informer_foreach(a->inf, collect_cb, &c);
        if (c.want_keys) {
                if (c.n_keys) /* none: c.keys is NULL, which qsort must not get */
                        qsort(c.keys, c.n_keys, sizeof *c.keys, key_cmp);
                keys->keys = c.keys;
                keys->n_keys = c.n_keys;
        }
        pthread_mutex_lock(&a->lock);
        apply_marks(a, c.pods, c.n);
        pthread_mutex_unlock(&a->lock);
        *ret = c.pods;
        *ret_n = c.n;
        return 0;
}

/* ---- PodResources ---- */

static enum plugin_kind kind_of_resource(const struct assign *a, const char *res) {
        for (unsigned k = 0; k < _PLUGIN_KIND_MAX; k++)
                if (a->names.name[k] && a->names.name[k][0] && streq(a->names.name[k], res))
                        return (enum plugin_kind)k;
        return _PLUGIN_KIND_MAX;
}

/* Every container kubelet lists, with which of our resources it holds (from the one decoder, podres.h). */
static int seen_from(struct assign *a, const struct podres_reports *pr, struct assign_seen *ret) {
        ret->c = calloc(pr->n_containers ? pr->n_containers : 1, sizeof *ret->c);
        if (!ret->c)
                return -ENOMEM;
        ret->n = 0;
        for (size_t i = 0; i < pr->n_containers; i++) {
                const struct podres_container *pc = &pr->containers[i];
                struct assign_seen_container *s = &ret->c[ret->n++];
                strscpy(s->ns, pc->ns, sizeof s->ns);
                strscpy(s->pod, pc->pod, sizeof s->pod);
                strscpy(s->container, pc->name, sizeof s->container);
                for (size_t k = pc->first; k < pc->first + pc->n; k++) {
                        enum plugin_kind kind = kind_of_resource(a, pr->rep[k].resource);
                        if (kind < _PLUGIN_KIND_MAX)
                                s->holds[kind] = true;
                }
        }
        return 0;
}

/* NVML index of a device ID of ours, -1 if none. What a device is never changes after
 * devices_new, so no lock is needed. */
static int id_index(const struct devices *d, enum plugin_kind kind, const char *id) {
        if (!id || !d)
                return -1;
        if (kind == PLUGIN_WHOLE) {
                int i = devices_find(d, id);
                return i < 0 ? -1 : devices_info(d, (unsigned)i)->index;
        }
        enum plugin_kind k;
        unsigned g, n;
        if (share_parse_id(d, id, &k, &g, &n) < 0 || k != kind)
                return -1;
        return devices_info(d, g)->index;
}

/* ---- is the cache enough? (assign_need_list) ---- */

struct known_ctx {
        struct assign *a;
        const struct collect *keys; /* the informer's keys, sorted */
};

static bool memo_has(const struct assign *a, const char *key) {
        return a->n_memo && bsearch(key, a->memo, a->n_memo, sizeof *a->memo, key_cmp);
}

/* Under a->lock. */
static bool known_cb(const char *ns, const char *pod, void *u) {
        const struct known_ctx *k = u;
        char key[ASSIGN_KEY_MAX];
        if ((size_t)snprintf(key, sizeof key, "%s/%s", ns, pod) >= sizeof key)
                return false;
        return (k->keys->n_keys && bsearch(key, k->keys->keys, k->keys->n_keys, sizeof *k->keys->keys, key_cmp)) ||
               memo_has(k->a, key);
}

static bool seen_has(const struct assign_seen *seen, const char *key) {
        for (size_t i = 0; i < seen->n; i++) {
                size_t l = strlen(seen->c[i].ns);
                if (strncmp(key, seen->c[i].ns, l) == 0 && key[l] == '/' && streq(key + l + 1, seen->c[i].pod))
                        return true;
        }
        return false;
}

/* Forget the pods kubelet no longer lists (a later pod of that name is another pod). Under a->lock. */
static void memo_prune(struct assign *a, const struct assign_seen *seen) {
        size_t o = 0;
        for (size_t i = 0; i < a->n_memo; i++)
                if (seen_has(seen, a->memo[i]))
                        memmove(a->memo[o++], a->memo[i], ASSIGN_KEY_MAX);
        a->n_memo = o;
}

/* After a LIST: the pods kubelet lists that the cache does not know and the LIST did not return
 * as candidates need no LIST again while kubelet lists them. Under a->lock. */
static void memo_add(struct assign *a, const struct assign_seen *seen, const struct collect *keys,
                     const struct assign_pod *listed, size_t n_listed) {
        struct known_ctx k = { a, keys };
        for (size_t i = 0; i < seen->n && a->n_memo < ASSIGN_MEMO_MAX; i++) {
                bool candidate = false;
                for (size_t j = 0; j < n_listed && !candidate; j++)
                        candidate = streq(listed[j].ns, seen->c[i].ns) && streq(listed[j].name, seen->c[i].pod);
                if (candidate || known_cb(seen->c[i].ns, seen->c[i].pod, &k))
                        continue;
                if ((size_t)snprintf(a->memo[a->n_memo], ASSIGN_KEY_MAX, "%s/%s", seen->c[i].ns, seen->c[i].pod) >=
                    ASSIGN_KEY_MAX)
                        continue;
                a->n_memo++;
                qsort(a->memo, a->n_memo, sizeof *a->memo, key_cmp);
        }
}

/* ---- the hooks ---- */

static const char *kind_name(const struct assign *a, enum plugin_kind kind) {
        return a && a->names.name[kind] ? a->names.name[kind] : "?";
}

/* What fractional pairing may rely on (assign_ctx.evidence): the container this call is for, and
 * whether its other fractional half is asked and already handed out. */
static void pairing_evidence(struct assign_ctx *ctx, const struct assign_pod *pod, unsigned k,
                             const struct assign_seen *seen) {
        const struct assign_container *c = &pod->c[k];
        enum plugin_kind other = ctx->call.kind == PLUGIN_CORE ? PLUGIN_MEMORY : PLUGIN_CORE;
        if ((size_t)snprintf(ctx->owner, sizeof ctx->owner, "%s/%s/%s", pod->ns, pod->name, c->name) >=
            sizeof ctx->owner)
                return;
        ctx->evidence = true;
        ctx->other_asked = c->req[other] > 0;
        ctx->other_held = c->done[other];
        for (size_t i = 0; i < seen->n && !ctx->other_held; i++)
                ctx->other_held = seen->c[i].holds[other] && streq(seen->c[i].ns, pod->ns) &&
                                  streq(seen->c[i].pod, pod->name) && streq(seen->c[i].container, c->name);
}

/* With no candidate for the call: LIST the node's pods when the informer's cache may lag behind what
 * kubelet admits (assign_need_list), and take the fresh list as the candidates. True if it did. */
static bool list_if_lagging(struct assign *a, struct collect *keys, const struct assign_seen *seen, bool have_seen,
                            struct assign_pod **pods, size_t *n) {
        bool synced = kube_informer_synced(a->inf);
        struct kube_informer_stats ist;
        kube_informer_stats(a->inf, &ist);
        uint64_t t0 = monotonic_ms();
        if (!(synced || !ist.errors) || t0 < atomic_load(&a->list_again_ms))
                return false;
        /* The cache answers when it knows every pod kubelet lists; otherwise kubelet may have
         * seen the pod before our watch did: ask the API server itself. */
        long unknown = -1;
        pthread_mutex_lock(&a->lock);
        if (have_seen)
                memo_prune(a, seen);
        bool need =
                assign_need_list(synced, have_seen ? seen : NULL, known_cb, &(struct known_ctx){ a, keys }, &unknown);
        pthread_mutex_unlock(&a->lock);
        if (!need)
                return false;
        struct assign_pod *fp = NULL;
        size_t fn = 0;
        int r = candidates(a, true, &fp, &fn, NULL);
        if (r < 0 || monotonic_ms() - t0 > ASSIGN_LIST_SLOW_MS) {
                /* a slow or failing API server must not hold every kubelet call: the
                 * informer alone for a while (a pod missed meanwhile is found by the sweep) */
                atomic_store(&a->list_again_ms, monotonic_ms() + ASSIGN_LIST_PAUSE_MS);
                log_warn("listing the node's pods from a handler was slow or failed: relying on the watch",
                         "ms=%" PRIu64 " error=%d pause_ms=%u", monotonic_ms() - t0, r, ASSIGN_LIST_PAUSE_MS);
        }
        log_debug("listing the node's pods for a kubelet call", "reason=\"%s\" pod=%s%s%s",
                  !synced      ? "the watch has not listed them yet"
                  : !have_seen ? "no PodResources answer"
                               : "kubelet lists a pod the watch has not delivered",
                  unknown >= 0 ? seen->c[unknown].ns : "-", unknown >= 0 ? "/" : "",
                  unknown >= 0 ? seen->c[unknown].pod : "");
        if (r < 0) {
                free(fp);
                return false;
        }
        if (have_seen) {
                pthread_mutex_lock(&a->lock);
                memo_add(a, seen, keys, fp, fn);
                pthread_mutex_unlock(&a->lock);
        }
        free(*pods);
        *pods = fp;
        *n = fn;
        return true;
}

/* The call is bound to pod's assignment: the table's devices it may use, refused when the node lacks one. */
static void ctx_activate(struct assign_ctx *ctx, const struct devices *dev, const struct assign_pod *pod) {
        const struct assign_decision *d = &ctx->d;
        ctx->active = true;
        ctx->pod = *pod;
        for (unsigned i = 0; i < devices_count(dev); i++) {
                int x = devices_info(dev, i)->index;
                if (x >= 0 && x < 64 && (d->gpus >> x & 1))
                        ctx->allowed |= UINT64_C(1) << i;
        }
        if (d->verdict == ASSIGN_MATCH &&
            (unsigned)__builtin_popcountll(ctx->allowed) != (unsigned)__builtin_popcountll(d->gpus)) {
                char g[128];
                ctx->d.verdict = ASSIGN_REFUSE;
                snprintf(ctx->d.why, sizeof ctx->d.why,
                         "pod %.63s/%.120s was assigned GPU %s, which this node does not have", ctx->pod.ns,
                         ctx->pod.name, assign_format_gpus(d->gpus, g, sizeof g));
        }
}

static void log_decision(const struct assign_ctx *ctx, const char *resource, unsigned size,
                         const struct assign_decision *d, bool fresh) {
        char g[128];
        log_debug("assignment decision",
                  "call=%s resource=%s size=%u pod=%s%s%s container=%s gpus=%s verdict=%s "
                  "candidates=%u fresh=%d reason=\"%s\"",
                  ctx->call.allocate ? "allocate" : "preferred", resource, size, ctx->active ? ctx->pod.ns : "-",
                  ctx->active ? "/" : "", ctx->active ? ctx->pod.name : "",
                  ctx->active ? ctx->pod.c[d->container].name : "-", assign_format_gpus(ctx->d.gpus, g, sizeof g),
                  ctx->d.verdict == ASSIGN_MATCH    ? "honour"
                  : ctx->d.verdict == ASSIGN_REFUSE ? "refuse"
                                                    : "node-local",
                  d->n_candidates, fresh, ctx->d.why);
}

void assign_call_begin(struct assign_ctx *ctx, struct assign *a, enum plugin_kind kind, bool allocate, unsigned size,
                       char *const *ids, size_t n_ids) {
        uint64_t begin_ms = monotonic_ms();
        memset(ctx, 0, sizeof *ctx);
        if (!a || !size || kind >= _PLUGIN_KIND_MAX)
                return;
        ctx->a = a;
        ctx->call = (struct assign_call){ .kind = kind, .size = size, .allocate = allocate };
        for (size_t k = 0; allocate && k < n_ids; k++) {
                int x = id_index(a->dev, kind, ids[k]);
                if (x >= 0 && x < 64)
                        ctx->call.ids_gpus |= UINT64_C(1) << x;
        }
        struct assign_pod *pods = NULL;
        size_t n = 0;
        struct assign_decision d;
        bool fresh = false;
        struct collect keys = { 0 };
        if (candidates(a, false, &pods, &n, &keys) < 0)
                return;
        (void)assign_match(pods, n, NULL, &ctx->call, &d);
        /* kubelet's pod manager: the pods kubelet has, the one it is admitting among them (an answer asked after
         * this call began; waited for at most PODRES_HANDLER_MS, then decided without it) */
        struct podres_snapshot *snap = NULL;
        int pr = podres_service_get(a->podres, begin_ms, PODRES_HANDLER_MS, &snap, NULL);
        if (pr != -ENOENT)
                podres_handler_wait_count("podresources", pr);
        struct assign_seen seen = { 0 };
        bool have_seen = pr == 0 && seen_from(a, &snap->r, &seen) == 0;
        podres_snapshot_put(snap);
        if (d.verdict == ASSIGN_NONE && list_if_lagging(a, &keys, &seen, have_seen, &pods, &n)) {
                fresh = true;
                (void)assign_match(pods, n, NULL, &ctx->call, &d);
        }
        /* which of them kubelet is admitting: the one its pod manager lists without devices */
        if (d.verdict != ASSIGN_NONE && have_seen)
                (void)assign_match(pods, n, &seen, &ctx->call, &d);
        if (d.verdict == ASSIGN_MATCH && have_seen && (kind == PLUGIN_CORE || kind == PLUGIN_MEMORY))
                pairing_evidence(ctx, &pods[d.pod], (unsigned)d.container, &seen);
        free(seen.c);
        free(keys.keys);
        ctx->d = d;
        if (d.verdict != ASSIGN_NONE)
                ctx_activate(ctx, a->dev, &pods[d.pod]);
        log_decision(ctx, kind_name(a, kind), size, &d, fresh);
        if (allocate && !ctx->active)
                count("gpuslice_assign_allocations_total", "outcome", "fallback");
        free(pods);
}

enum rpc_code assign_call_check(struct assign_ctx *ctx, const char *what, struct gs_error *st) {
        if (!ctx->active || ctx->d.verdict != ASSIGN_REFUSE)
                return RPC_OK;
        if (ctx->call.allocate)
                count("gpuslice_assign_allocations_total", "outcome", "refused");
        return rpc_error(st, RPC_FAILED_PRECONDITION,
                         "%s: %s; refusing rather than hand out another GPU (" CLUSTER_ANN_ASSIGNMENT ")", what,
                         ctx->d.why);
}

enum rpc_code assign_call_narrow(struct assign_ctx *ctx, const struct devices *d, char **avail, size_t *n_avail,
                                 char **must, size_t n_must, const char *what, struct gs_error *st) {
        enum rpc_code c = assign_call_check(ctx, what, st);
        if (c != RPC_OK || !ctx->active)
                return c;
        enum plugin_kind kind = ctx->call.kind;
        char g[128];
        for (size_t k = 0; k < n_must; k++) {
                int x = id_index(d, kind, must[k]);
                if (x >= 0 && !(ctx->d.gpus >> x & 1))
                        return rpc_error(st, RPC_FAILED_PRECONDITION,
                                         "%s: must-include device %.96s is not on GPU %s, which the scheduler "
                                         "assigned to pod %.63s/%.120s",
                                         what, must[k], assign_format_gpus(ctx->d.gpus, g, sizeof g), ctx->pod.ns,
                                         ctx->pod.name);
        }
        size_t kept = 0;
        for (size_t k = 0; k < *n_avail; k++) {
                int x = id_index(d, kind, avail[k]);
                if (x >= 0 && x < 64 && (ctx->d.gpus >> x & 1)) {
                        char *t = avail[kept];
                        avail[kept++] = avail[k];
                        avail[k] = t;
                }
        }
        if (!kept)
                return rpc_error(st, RPC_FAILED_PRECONDITION,
                                 "%s: kubelet lists no available %s on GPU %s, which the scheduler assigned to pod "
                                 "%.63s/%.120s",
                                 what, kind_name(ctx->a, kind), assign_format_gpus(ctx->d.gpus, g, sizeof g),
                                 ctx->pod.ns, ctx->pod.name);
        *n_avail = kept;
        return RPC_OK;
}

static void enqueue(struct assign *a, const struct assign_pod *pod) {
        for (size_t i = 0; i < a->n_queue; i++)
                if (streq(a->queue[i].uid, pod->uid))
                        return;
        if (a->n_queue >= ASSIGN_QUEUE_MAX)
                return;
        struct queued *q = &a->queue[a->n_queue++];
        memset(q, 0, sizeof *q);
        strscpy(q->ns, pod->ns, sizeof q->ns);
        strscpy(q->name, pod->name, sizeof q->name);
        strscpy(q->uid, pod->uid, sizeof q->uid);
        q->since_ms = q->next_ms = monotonic_ms();
        pthread_cond_signal(&a->cond);
}

void assign_call_commit(struct assign_ctx *ctx) {
        struct assign *a = ctx->a;
        if (a && !ctx->active && ctx->call.allocate) {
                /* placed node-locally: record on the pod where, once kubelet lists what it holds */
                pthread_mutex_lock(&a->lock);
                a->sweep_at = MIN(a->sweep_at, monotonic_ms() + ASSIGN_RECORD_MS);
                pthread_cond_signal(&a->cond);
                pthread_mutex_unlock(&a->lock);
                return;
        }
        if (!a || !ctx->active || ctx->d.verdict != ASSIGN_MATCH || !ctx->call.allocate)
                return;
        count("gpuslice_assign_allocations_total", "outcome", "honoured");
        ctx->pod.c[ctx->d.container].done[ctx->call.kind] = true;
        pthread_mutex_lock(&a->lock);
        struct mark *m = &a->marks[a->next_mark];
        strscpy(m->uid, ctx->pod.uid, sizeof m->uid);
        m->container = (uint8_t)ctx->d.container;
        m->kind = (uint8_t)ctx->call.kind;
        a->next_mark = (a->next_mark + 1) % ASSIGN_MARKS_MAX;
        if (a->n_marks < ASSIGN_MARKS_MAX)
                a->n_marks++;
        apply_marks(a, &ctx->pod, 1);
        if (assign_pod_complete(&ctx->pod))
                enqueue(a, &ctx->pod);
        pthread_mutex_unlock(&a->lock);
        log_debug("assignment honoured", "pod=%s/%s container=%s resource=%s complete=%d", ctx->pod.ns, ctx->pod.name,
                  ctx->pod.c[ctx->d.container].name, kind_name(a, ctx->call.kind), assign_pod_complete(&ctx->pod));
}

void assign_call_end(struct assign_ctx *ctx) {
        memset(ctx, 0, sizeof *ctx);
}

/* ---- the patcher ---- */

/* The GPUs (NVML set) each container of ns/name holds per PodResources; false when the pod is not
 * listed or some GPU resource of it holds nothing yet. */
static bool held_gpus(struct assign *a, const struct podres_reports *pr, const struct assign_pod *pod, uint64_t *ret) {
        bool listed = false;
        for (size_t i = 0; i < pr->n_containers && !listed; i++)
                listed = streq(pr->containers[i].pod, pod->name) && streq(pr->containers[i].ns, pod->ns);
        if (!listed)
                return false;
        for (unsigned k = 0; k < pod->n; k++) {
                const struct assign_container *c = &pod->c[k];
                ret[k] = 0;
                for (unsigned kind = 0; kind < _PLUGIN_KIND_MAX; kind++) {
                        if (!c->req[kind])
                                continue;
                        bool got = false;
                        for (size_t j = 0; j < pr->n_containers; j++) {
                                const struct podres_container *pc = &pr->containers[j];
                                if (!streq(pc->ns, pod->ns) || !streq(pc->pod, pod->name) || !streq(pc->name, c->name))
                                        continue;
                                for (size_t x = pc->first; x < pc->first + pc->n; x++) {
                                        if (kind_of_resource(a, pr->rep[x].resource) != kind)
                                                continue;
                                        int i = id_index(a->dev, (enum plugin_kind)kind, pr->rep[x].device_id);
                                        if (i >= 0 && i < 64) {
                                                ret[k] |= UINT64_C(1) << i;
                                                got = true;
                                        }
                                }
                        }
                        if (!got)
                                return false;
                }
        }
        return true;
}

/* The patch: flags true, and (repair: held non-NULL, indexed like the view's containers) the
 * assignment rewritten to what the containers hold. */
static json_t *patch_body(const struct assign_pod *pod, const struct cluster_pod *view, const json_t *cur,
                          const uint64_t *held) {
        json_t *out = json_object();
        if (!out)
                return NULL;
        for (unsigned f = CLUSTER_FLAG_GPUSLICE; f <= CLUSTER_FLAG_GPUSHARE; f <<= 1)
                if (pod->flags & f)
                        json_object_set_new(out, cluster_flag_key(f), json_string("true"));
        if (held && cluster_repair_annotations(json_object_get(json_object_get(cur, "metadata"), "annotations"), view,
                                               held, out) < 0) {
                json_decref(out);
                return NULL;
        }
        return out;
}

static uint64_t realtime_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* What one read of a pod asks the patcher to send. */
struct patch_plan {
        json_t *annotations; /* NULL: nothing to send */
        char uid[64], rv[32];
        const char *result; /* confirmed, repaired, recorded */
};

/* The pod's GPUs per PodResources into held (indexed like the view's containers). 0, -EAGAIN (not
 * listed yet, or no answer, when one is needed), -ENODATA (never listed: give up). */
static int held_now(struct assign *a, const struct queued *q, const struct assign_pod *pod, bool need, uint64_t *held) {
        uint64_t mine[ASSIGN_CONTAINERS_MAX] = { 0 };
        struct podres_snapshot *snap = NULL;
        if (podres_service_get(a->podres, monotonic_ms(), PODRES_CALL_MS, &snap, NULL) < 0)
                return need ? -EAGAIN : -ENOENT; /* confirming: without an answer, as assigned */
        bool verified = held_gpus(a, &snap->r, pod, mine);
        podres_snapshot_put(snap);
        if (!verified) {
                if (monotonic_ms() - q->since_ms < ASSIGN_VERIFY_MS)
                        return -EAGAIN; /* kubelet has not recorded the devices yet */
                /* kubelet never listed them (its admission failed after our answer, or the call
                 * was another pod's): never mark a pod that holds nothing */
                log_warn("not marking the pod assigned: PodResources does not list its GPUs", "pod=%s/%s", q->ns,
                         q->name);
                count("gpuslice_assign_pods_total", "result", "unverified");
                return -ENODATA;
        }
        for (unsigned k = 0; k < pod->n; k++)
                held[pod->c[k].index] = mine[k];
        return 0;
}

/* A pod without any assignment that holds GPUs of ours (a node-local placement): its record. */
static int plan_record(struct assign *a, const struct queued *q, const struct cluster_pod *v,
                       const struct assign_pod *pod, struct patch_plan *ret) {
        uint64_t held[CLUSTER_CONTAINERS_MAX] = { 0 };
        int r = held_now(a, q, pod, true, held);
        if (r < 0)
                return r == -EAGAIN ? r : 0;
        ret->annotations = json_object();
        if (!ret->annotations)
                return -ENOMEM;
        r = cluster_agent_record(&v->req, held, a->node, realtime_ns(), (const char *const *)a->uuid_ptr,
                                 CLUSTER_GPUS_MAX, ret->annotations);
        ret->result = "recorded";
        return r == -ENODATA ? 0 : r;
}

/* A pod with an assignment of ours: confirmed, or repaired to what it holds. */
static int plan_confirm(struct assign *a, const struct queued *q, const struct cluster_pod *v, const json_t *cur,
                        const struct assign_pod *pod, struct patch_plan *ret) {
        uint64_t held[CLUSTER_CONTAINERS_MAX] = { 0 };
        int r = held_now(a, q, pod, false, held);
        if (r == -EAGAIN || r == -ENODATA)
                return r == -EAGAIN ? r : 0;
        bool repair = false;
        for (unsigned k = 0; r == 0 && k < pod->n; k++)
                repair |= held[pod->c[k].index] != pod->c[k].gpus;
        ret->annotations = patch_body(pod, v, cur, repair ? held : NULL);
        ret->result = repair ? "repaired" : "confirmed";
        return ret->annotations ? 0 : -ENOMEM;
}

/* What to send for the pod as read (cur). 0 (ret->annotations NULL: nothing to do any more),
 * -EAGAIN, -ENOMEM. */
static int plan(struct assign *a, const struct queued *q, const json_t *cur, struct patch_plan *ret) {
        struct cluster_pod *v = malloc(sizeof *v);
        struct assign_pod *pod = calloc(1, sizeof *pod);
        struct cluster_units u;
        int r = v && pod ? 0 : -ENOMEM;
        assign_units(&a->names, &u);
        if (r == 0 && cluster_pod_decode_json(cur, &u, v, NULL) == 0 && streq(v->uid, q->uid)) {
                int p = assign_pod_from_view(v, a->node, &a->names, pod);
                if (p == 0 && !pod->confirmed)
                        r = plan_confirm(a, q, v, cur, pod, ret);
                else if (p == -ENODATA && !v->has_assignment && !v->assignment_error[0] &&
                         assign_pod_requests(v, a->node, &a->names, pod) == 0)
                        r = plan_record(a, q, v, pod, ret);
                /* else: another incarnation, or its assignment changed or was confirmed meanwhile */
                strscpy(ret->uid, pod->uid, sizeof ret->uid);
                strscpy(ret->rv, pod->rv, sizeof ret->rv);
        }
        free(v);
        free(pod);
        return r;
}

/* 0 done (or nothing to do any more), -EAGAIN try later, other -errno failed for good. */
static int confirm(struct assign *a, struct queued *q) {
        char ens[256], ename[800], path[1200];
        if (!kube_escape(q->ns, ens, sizeof ens) || !kube_escape(q->name, ename, sizeof ename))
                return -ENAMETOOLONG;
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", ens, ename);
        for (unsigned attempt = 0; attempt < ASSIGN_PATCH_RETRIES; attempt++) {
                json_t *cur = NULL;
                struct kube_error e;
                int r = kube_request(a->client, KUBE_GET, path, NULL, &cur, &e);
                if (r == -ENOENT)
                        return 0; /* gone: nothing to confirm */
                if (r < 0)
                        return -EAGAIN;
                struct patch_plan pl = { 0 };
                r = plan(a, q, cur, &pl);
                json_decref(cur);
                if (r < 0 || !pl.annotations)
                        return r;
                /* uid and resourceVersion as preconditions: 409 when the pod changed since the read */
                json_t *body = json_pack("{s:{s:s,s:s,s:o}}", "metadata", "uid", pl.uid, "resourceVersion", pl.rv,
                                         "annotations", pl.annotations);
                char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
                json_decref(body);
                r = text ? kube_request(a->client, KUBE_PATCH_MERGE, path, text, NULL, &e) : -ENOMEM;
                free(text);
                if (r == 0) {
                        if (streq(pl.result, "repaired"))
                                log_warn("assignment repaired: the pod holds other GPUs than it was assigned",
                                         "pod=%s/%s", q->ns, q->name);
                        else
                                log_debug("assignment written", "pod=%s/%s result=%s", q->ns, q->name, pl.result);
                        count("gpuslice_assign_pods_total", "result", pl.result);
                        return 0;
                }
                if (r != -ESTALE) {
                        log_warn_errno(r, "cannot write the pod's assignment", "pod=%s/%s http=%ld error=\"%s\"", q->ns,
                                       q->name, e.http, e.message);
                        return -EAGAIN;
                }
                /* 409: the pod changed since the read (kubelet's status updates): read it again */
        }
        return -EAGAIN;
}

/* Does kubelet list every GPU resource of ours of pod as held (in any of its entries for a container)? */
static bool seen_holds_all(const struct assign_seen *seen, const struct assign_pod *pod) {
        for (unsigned k = 0; k < pod->n; k++) {
                bool holds[_PLUGIN_KIND_MAX] = { false };
                for (size_t j = 0; j < seen->n; j++)
                        if (streq(seen->c[j].ns, pod->ns) && streq(seen->c[j].pod, pod->name) &&
                            streq(seen->c[j].container, pod->c[k].name))
                                for (unsigned kind = 0; kind < _PLUGIN_KIND_MAX; kind++)
                                        holds[kind] |= seen->c[j].holds[kind];
                for (unsigned kind = 0; kind < _PLUGIN_KIND_MAX; kind++)
                        if (pod->c[k].req[kind] && !holds[kind])
                                return false;
        }
        return true;
}

struct unrecorded {
        struct assign *a;
        const struct assign_seen *seen;
        struct cluster_pod *view;
        struct assign_pod *pods; /* found */
        size_t n, cap;
};

/* A cached pod with no assignment of any system that kubelet lists holding our GPUs: placed here
 * node-locally; collected so the patcher records where (one truth about who holds which GPU). */
static void unrecorded_cb(const char *key, const json_t *obj, void *u) {
        (void)key;
        struct unrecorded *x = u;
        struct cluster_units un;
        assign_units(&x->a->names, &un);
        if (x->n >= ASSIGN_QUEUE_MAX || array_reserve(&x->pods, &x->cap, x->n + 1, 8) < 0)
                return; /* the next sweep finds it */
        if (cluster_pod_decode_json(obj, &un, x->view, NULL) == 0 && !x->view->has_assignment &&
            !x->view->assignment_error[0] &&
            assign_pod_requests(x->view, x->a->node, &x->a->names, &x->pods[x->n]) == 0 &&
            seen_holds_all(x->seen, &x->pods[x->n]))
                x->n++;
}

/* Pods with an assignment that PodResources shows holding every GPU resource, but not marked: the
 * agent died between an Allocate and the patch, or the call was matched to another pod; and pods
 * holding GPU resources of ours without any assignment (placed node-locally). Queue them (confirm
 * verifies and confirms, repairs or records). Takes a->lock itself. */
static void sweep(struct assign *a) {
        struct assign_pod *pods = NULL;
        size_t n = 0;
        struct unrecorded x = { .a = a, .view = malloc(sizeof *x.view) };
        struct podres_snapshot *snap = NULL;
        bool got = x.view && podres_service_get(a->podres, monotonic_ms(), PODRES_CALL_MS, &snap, NULL) == 0;
        struct assign_seen seen = { 0 };
        if (got && seen_from(a, &snap->r, &seen) == 0 && candidates(a, false, &pods, &n, NULL) == 0) {
                x.seen = &seen;
                if (seen.n)
                        kube_informer_foreach(a->inf, unrecorded_cb, &x);
                pthread_mutex_lock(&a->lock);
                for (size_t i = 0; i < n; i++)
                        if (seen_holds_all(&seen, &pods[i]))
                                enqueue(a, &pods[i]);
                for (size_t i = 0; i < x.n; i++)
                        enqueue(a, &x.pods[i]);
                pthread_mutex_unlock(&a->lock);
        }
        free(seen.c);
        podres_snapshot_put(snap);
        free(pods);
        free(x.view);
        free(x.pods);
}

static void *patcher_main(void *u) {
        struct assign *a = u;
        pthread_mutex_lock(&a->lock);
        a->sweep_at = monotonic_ms() + ASSIGN_SYNC_WAIT_MS;
        while (!atomic_load(&a->stop)) {
                uint64_t now = monotonic_ms(), next = a->sweep_at;
                if (now >= a->sweep_at) {
                        a->sweep_at = now + ASSIGN_SWEEP_MS;
                        pthread_mutex_unlock(&a->lock);
                        sweep(a);
                        pthread_mutex_lock(&a->lock);
                        continue;
                }
                struct queued q;
                bool have = false;
                for (size_t i = 0; i < a->n_queue && !have; i++)
                        if (a->queue[i].next_ms <= now) {
                                q = a->queue[i];
                                a->queue[i] = a->queue[--a->n_queue];
                                have = true;
                        } else
                                next = MIN(next, a->queue[i].next_ms);
                if (have) {
                        pthread_mutex_unlock(&a->lock);
                        int r = confirm(a, &q);
                        pthread_mutex_lock(&a->lock);
                        if (r == -EAGAIN && monotonic_ms() - q.since_ms < 10 * ASSIGN_VERIFY_MS &&
                            a->n_queue < ASSIGN_QUEUE_MAX) {
                                q.next_ms = monotonic_ms() + 500;
                                a->queue[a->n_queue++] = q;
                        } else if (r < 0)
                                count("gpuslice_assign_pods_total", "result", "failed");
                        continue;
                }
                struct timespec ts = timespec_after_ms(CLOCK_REALTIME, next - now);
                pthread_cond_timedwait(&a->cond, &a->lock, &ts);
        }
        pthread_mutex_unlock(&a->lock);
        return NULL;
}

/* ---- start, stop, lookup ---- */

struct assign *assign_start(struct kube_client *client, const char *node, const struct devices *d,
                            const struct assign_names *names, struct podres_service *podres) {
        if (!client || !node || !node[0] || !d || !names)
                return NULL;
        struct assign *a = calloc(1, sizeof *a);
        if (!a)
                return NULL;
        a->client = client;
        a->dev = d;
        strscpy(a->node, node, sizeof a->node);
        a->names = *names;
        /* the GPUs' UUIDs by NVML index: what a device is never changes after devices_new */
        for (unsigned i = 0; i < devices_count(d); i++) {
                const struct device_info *g = devices_info(d, i);
                if (g->kind == DEVICE_GPU && g->index >= 0 && g->index < CLUSTER_GPUS_MAX)
                        strscpy(a->uuid[g->index], g->id, sizeof a->uuid[0]);
        }
        for (unsigned i = 0; i < CLUSTER_GPUS_MAX; i++)
                a->uuid_ptr[i] = a->uuid[i];
        a->podres = podres;
        a->memo = calloc(ASSIGN_MEMO_MAX, sizeof *a->memo);
        if (!a->memo) {
                free(a);
                return NULL;
        }
        pthread_mutex_init(&a->lock, NULL);
        pthread_cond_init(&a->cond, NULL);
        char sel[320];
        snprintf(sel, sizeof sel, "spec.nodeName=%s", node);
        int r = kube_informer_new(client, "/api/v1/pods", NULL, sel, slim_pod, NULL, &a->inf);
        if (r >= 0)
                r = kube_informer_start(a->inf);
        /* a short wait, so the first Allocate after a restart already knows the node's pods (a call
         * before the first list asks the API server itself) */
        if (r >= 0 && kube_informer_wait_synced(a->inf, ASSIGN_SYNC_WAIT_MS) < 0)
                log_warn("the node's pods are not listed yet: Allocate calls ask the API server until they are",
                         "node=%s", node);
        if (r >= 0) {
                r = -pthread_create(&a->thread, NULL, patcher_main, a);
                a->started = r == 0;
        }
        if (r < 0) {
                log_error_errno(r, "cannot watch this node's pods: the scheduler's assignments are not honoured",
                                "node=%s", node);
                return assign_stop(a);
        }
        char sock[PATH_MAX];
        log_info("honouring the scheduler's GPU assignments", "node=%s pod_resources=%s", node,
                 a->podres ? podres_service_socket(a->podres, sock, sizeof sock) : "-");
        return a;
}

struct assign *assign_stop(struct assign *a) {
        if (!a)
                return NULL;
        if (a->started) {
                pthread_mutex_lock(&a->lock);
                atomic_store(&a->stop, true);
                pthread_cond_signal(&a->cond);
                pthread_mutex_unlock(&a->lock);
                pthread_join(a->thread, NULL);
        }
        kube_informer_free(a->inf);
        pthread_cond_destroy(&a->cond);
        pthread_mutex_destroy(&a->lock);
        free(a->memo);
        free(a);
        return NULL;
}

int assign_lookup_container(struct assign *a, const char *ns, const char *pod, const char *container, int *ret_gpus,
                            unsigned max) {
        if (!a)
                return -ENODEV;
        if (!ns || !pod || !container)
                return -EINVAL;
        char key[400];
        snprintf(key, sizeof key, "%s/%s", ns, pod);
        json_t *obj = kube_informer_get(a->inf, key);
        struct assign_pod *p = obj ? calloc(1, sizeof *p) : NULL;
        int r = -ENOENT;
        if (p && assign_pod_parse(obj, a->node, &a->names, p) == 0)
                for (unsigned k = 0; k < p->n; k++)
                        if (streq(p->c[k].name, container) && p->c[k].gpus) {
                                r = 0;
                                for (uint64_t s = p->c[k].gpus; s && (unsigned)r < max; s &= s - 1)
                                        ret_gpus[r++] = __builtin_ctzll(s);
                        }
        free(p);
        json_decref(obj);
        return r;
}
