/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server.c — the extender verbs over the cluster model (see server.h, docs/scheduler.md).
 *
 * One lock guards the model, the pending-pod cache and the scratch buffers: a verb decodes its
 * body outside the lock, decides under it, and encodes outside it again. Bind assumes the pod in
 * the model before it lets go of the lock, so a second bind already sees the GPU taken; the API
 * calls run without the lock, and a failed bind forgets the assumption. Must never log (the
 * command logs) or block on the API with the lock held.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "http/http.h"
#include "metrics/metrics.h"
#include "sched/map-internal.h"
#include "sched/pack.h"
#include "sched/server.h"
#include "sched/ui.h"
#include "sched/view.h"
#include "util/util.h"

/* Connections (each served on a thread of its own): kube-scheduler opens one per bind in flight, and
 * binds wait on the API server (up to its 4 s timeout), so a slow API server means many; a
 * connection refused fails the pod's scheduling attempt (kube-scheduler backs it off). Below the usual
 * soft limit of 1024 open files, with room for the API connections. */
#define SCHED_SERVER_CONNECTIONS 512

/* Pods seen by filter, kept for bind (whose arguments carry only names): at most this many. */
#define PENDING_MAX 4096

/* A pod seen by filter: what bind needs (first: the map's values are read as struct cluster_pod
 * too), and what the last filter call said about it (the operator page, the unschedulable metric). */
struct pending {
        struct cluster_pod v;
        struct sched_filter_summary filter;
};

enum verb {
        VERB_FILTER,
        VERB_PRIORITIZE,
        VERB_BIND,
        VERB_PREEMPT,
        VERB_N
};
static const char *const verb_names[VERB_N] = { "filter", "prioritize", "bind", "preempt" };

struct sched_server {
        struct sched_server_options o;
        struct sched_binder binder;
        bool has_binder;
        struct http_server *http;
        pthread_mutex_t lock;
        struct sched_model *model;
        bool ready;
        /* pending: uid -> struct pending (heap), FIFO eviction */
        struct sched_map pending;
        struct pending *ring[PENDING_MAX];
        size_t ring_head, ring_n;
        uint64_t view_gen; /* bumped when the pending pods, what filter said of them, or ready change */
        /* scratch, grown to the largest node list seen: this call's nodes and decisions (only what
         * scoring reads), the failing nodes' reasons in one pool, the filter reply's results */
        const struct sched_node **nodes;
        struct sched_score_in *dec;
        const struct sched_score_in **decp;
        uint32_t *reason_off;
        struct sched_ext_node_result *results;
        int *scores;
        size_t scratch_n;
        struct gs_buf reasons; /* NUL-separated; offsets below UINT32_MAX */
        /* the last filter's node list: names (NUL-separated, in order), the nodes they resolved to
         * while the model's node set stays (sched_model_nodes_generation), and the decisions, which
         * the prioritize call that follows for the same pod reuses while the model has not changed
         * at all (kube-scheduler sends the nodes that passed, in order). kube-scheduler sends the
         * same node list call after call, so the next filter resolves it without a lookup. */
        struct gs_buf fl_names; /* NUL-separated; offsets below UINT32_MAX */
        uint32_t *fl_off;
        const struct sched_node **fl_node;
        struct sched_score_in *fl_dec;
        size_t fl_n, fl_alloc;
        uint64_t fl_nodes_gen;
        uint64_t fl_epoch; /* bumped whenever the list is resolved anew */
        bool fl_resolved;
        char last_uid[128];
        uint64_t last_gen;
        enum cluster_policy last_policy;
        bool last_valid;
        /* the packing policies (pack.h): the mix of the GPU pods filtered so far (each filter call counts),
         * its typical shapes, and the shape of the pod being decided */
        struct sched_mix mix;
        bool mix_seeded; /* at the first ready (mix_seed) */
        struct sched_workload workload;
        uint64_t pack_scarce_gen; /* the model's node set the workload's scarcity weights were taken over */
        struct sched_pack_ctx pack;
        struct sched_shape shape;
        /* per position of the last filter's list: the node's last policy score (pack.h), kept while the
         * model's node set stays (cleared when a node comes or goes: a freed node's address may return);
         * the list (epoch, node set) the largest node was taken from */
        struct sched_pack_memo *pack_memo;
        size_t pack_memo_n;
        uint64_t pack_memo_nodes_gen, pack_norm_epoch, pack_norm_gen;
        bool pack_norm_valid;
        struct sched_ui_source ui; /* what the page's routes read (sched_ui_register) */
        /* metrics */
        struct metrics_counter *calls[VERB_N], *errors[VERB_N];
        struct metrics_histogram *latency[VERB_N];
        struct metrics_counter *verdicts[3];
        struct metrics_counter *bind_ok, *bind_refused, *bind_conflict, *bind_failed;
        struct metrics_counter *filter_one,
                *filter_every; /* filter answers: the policy's node alone (filter_pick), all */
};

static uint64_t now_realtime_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static double now_mono(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- pending pods ---- */

static void pending_put(struct sched_server *s, const struct cluster_pod *v) {
        struct pending *old = sched_map_get(&s->pending, v->uid, strlen(v->uid));
        if (old) {
                old->v = *v; /* same uid: the key (old->v.uid) keeps its content */
                return;
        }
        struct pending *c = malloc(sizeof *c);
        if (!c)
                return; /* bind will say it has not seen the pod */
        c->v = *v;
        c->filter = (struct sched_filter_summary){ 0 };
        s->view_gen++;
        if (s->ring_n == PENDING_MAX) {
                struct pending *ev = s->ring[s->ring_head];
                if (ev) {
                        sched_map_del(&s->pending, ev->v.uid, strlen(ev->v.uid));
                        free(ev);
                }
                s->ring[s->ring_head] = NULL;
                s->ring_head = (s->ring_head + 1) % PENDING_MAX;
                s->ring_n--;
        }
        if (sched_map_put(&s->pending, c->v.uid, strlen(c->v.uid), c) < 0) {
                free(c);
                return;
        }
        s->ring[(s->ring_head + s->ring_n) % PENDING_MAX] = c;
        s->ring_n++;
}

static void pending_drop(struct sched_server *s, const char *uid) {
        struct pending *v = sched_map_del(&s->pending, uid, strlen(uid));
        if (!v)
                return;
        s->view_gen++;
        for (size_t i = 0; i < s->ring_n; i++) {
                size_t k = (s->ring_head + i) % PENDING_MAX;
                if (s->ring[k] == v) {
                        s->ring[k] = NULL; /* a hole: evicting it later is a no-op */
                        break;
                }
        }
        free(v);
}

static int grow(void **p, size_t size) {
        void *q = realloc(*p, size);
        if (!q)
                return -ENOMEM;
        *p = q;
        return 0;
}

static int scratch_reserve(struct sched_server *s, size_t n) {
        if (n <= s->scratch_n)
                return 0;
        size_t cap = MAX(n, 64);
        if (grow((void **)&s->nodes, cap * sizeof *s->nodes) < 0 || grow((void **)&s->dec, cap * sizeof *s->dec) < 0 ||
            grow((void **)&s->decp, cap * sizeof *s->decp) < 0 ||
            grow((void **)&s->reason_off, cap * sizeof *s->reason_off) < 0 ||
            grow((void **)&s->results, cap * sizeof *s->results) < 0 ||
            grow((void **)&s->scores, cap * sizeof *s->scores) < 0 ||
            grow((void **)&s->fl_off, cap * sizeof *s->fl_off) < 0 ||
            grow((void **)&s->fl_node, cap * sizeof *s->fl_node) < 0 ||
            grow((void **)&s->fl_dec, cap * sizeof *s->fl_dec) < 0)
                return -ENOMEM;
        s->scratch_n = cap;
        return 0;
}

/* ---- filter / prioritize ---- */

/* A failing node's reason into the pool; UINT32_MAX when it cannot be kept. */
static uint32_t reason_keep(struct sched_server *s, const char *reason) {
        size_t at = s->reasons.len, l = strlen(reason) + 1;
        if (at + l >= UINT32_MAX || gs_buf_append(&s->reasons, reason, l) < 0)
                return UINT32_MAX;
        return (uint32_t)at;
}

/* The pod's shape for the packing policies (with its CPU and memory requests), counted in the mix; the
 * typical shapes re-read at 1, 2, 4, … 256 pods, then every 256; the largest node among a's (taken again
 * only when the list was resolved anew); the score memos sized to a's list. A re-read or a new largest
 * node bumps the context's version (every memo stale). */
static struct sched_shape request_shape(const struct cluster_pod *p) {
        return sched_pack_request_shape(&p->req, p->cpu_milli, p->mem_mib);
}

static void pack_prepare(struct sched_server *s, const struct sched_ext_args *a) {
        s->shape = request_shape(&a->pod);
        bool reread = sched_mix_observe(&s->mix, &s->shape, false, &s->workload);
        uint64_t nodes_gen = sched_model_nodes_generation(s->model);
        if (reread || s->pack_scarce_gen != nodes_gen) { /* frag's weights: of the shapes, over the nodes */
                sched_workload_scarcity(&s->workload, s->model);
                s->pack_scarce_gen = nodes_gen;
                s->pack.version++;
        }
        s->pack.w = &s->workload;
        if (!s->fl_resolved || !s->pack_norm_valid || s->pack_norm_epoch != s->fl_epoch ||
            s->pack_norm_gen != s->fl_nodes_gen) {
                uint64_t norm = 0;
                for (size_t i = 0; i < a->n_nodes; i++)
                        if (s->nodes[i])
                                norm = MAX(norm, 1000ULL * s->nodes[i]->n_gpus);
                if (norm != s->pack.gpu_norm)
                        s->pack.version++;
                s->pack.gpu_norm = norm;
                s->pack_norm_epoch = s->fl_epoch;
                s->pack_norm_gen = s->fl_nodes_gen;
                s->pack_norm_valid = s->fl_resolved;
        }
        uint64_t gen = sched_model_nodes_generation(s->model);
        if (s->pack_memo_nodes_gen != gen) {
                if (s->pack_memo_n)
                        memset(s->pack_memo, 0, s->pack_memo_n * sizeof *s->pack_memo);
                s->pack_memo_nodes_gen = gen;
        }
        if (a->n_nodes > s->pack_memo_n) {
                struct sched_pack_memo *p = realloc(s->pack_memo, a->n_nodes * sizeof *p);
                if (!p)
                        return; /* scored without the memo */
                memset(p + s->pack_memo_n, 0, (a->n_nodes - s->pack_memo_n) * sizeof *p);
                s->pack_memo = p;
                s->pack_memo_n = a->n_nodes;
        }
}

/* Decide one node into d (and its reason into the pool when reason_off is given). */
static void decide_one(struct sched_server *s, const struct sched_ext_args *a, const struct sched_node *n,
                       enum cluster_policy pol, struct sched_score_in *d, uint32_t *reason_off,
                       struct sched_pack_memo *memo) {
        struct sched_fit f;
        if (!cluster_request_any(&a->pod.req)) {
                /* asks for no GPU resource: not ours to judge */
                *d = (struct sched_score_in){ .verdict = SCHED_FIT, .pack = 0.5 };
                f.reason[0] = '\0';
        } else if (n) {
                (void)sched_fit_node(s->model, n, &a->pod.req, pol, &f);
                sched_score_in_from_fit(&f, d);
                if (d->verdict == SCHED_FIT && sched_pack_policy(pol)) {
                        /* the policy's score as the pack (0..1): the ring of a multi-GPU pod still weighs most */
                        int g;
                        double sc = memo ? sched_pack_score_memo(&s->pack, n, &s->shape, pol, memo, &g)
                                         : sched_pack_score(&s->pack, n, &s->shape, pol, &g);
                        d->pack = pol == CLUSTER_POLICY_FRAG     ? 1.0 / (1.0 + exp(-sc / 10.0))
                                  : pol == CLUSTER_POLICY_RANDOM ? 0.5
                                                                 : sc / 100.0;
                }
        } else {
                *d = (struct sched_score_in){ .verdict = SCHED_UNRESOLVABLE };
                snprintf(f.reason, sizeof f.reason, "node publishes no GPUs (no %s annotation)", CLUSTER_ANN_GPUS);
        }
        if (reason_off)
                *reason_off = d->verdict == SCHED_FIT ? UINT32_MAX : reason_keep(s, f.reason);
        metrics_counter_add(s->verdicts[d->verdict], 1);
}

/* The nodes of a's names into s->nodes: from the last filter's list when it is the same list and
 * no node came or went since, else looked up one by one (and kept as the new list). */
static void resolve_nodes(struct sched_server *s, const struct sched_ext_args *a) {
        uint64_t gen = sched_model_nodes_generation(s->model);
        bool same = s->fl_resolved && s->fl_nodes_gen == gen && s->fl_n == a->n_nodes;
        for (size_t i = 0; same && i < a->n_nodes; i++)
                same = streq(a->node_names[i], s->fl_names.p + s->fl_off[i]);
        if (same) {
                memcpy(s->nodes, s->fl_node, a->n_nodes * sizeof *s->nodes);
                return;
        }
        s->fl_resolved = false;
        s->fl_epoch++;
        gs_buf_clear(&s->fl_names);
        bool keep = true;
        for (size_t i = 0; i < a->n_nodes; i++) {
                const char *name = a->node_names[i];
                s->nodes[i] = sched_model_node(s->model, name);
                size_t l = strlen(name) + 1;
                size_t at = s->fl_names.len;
                keep = keep && at + l < UINT32_MAX && gs_buf_append(&s->fl_names, name, l) == 0;
                if (keep)
                        s->fl_off[i] = (uint32_t)at;
                s->fl_node[i] = s->nodes[i];
        }
        s->fl_n = keep ? a->n_nodes : 0;
        s->fl_nodes_gen = gen;
        s->fl_resolved = keep;
}

/* Decide every node of a; under the lock. err non-NULL: every node fails with it. */
static const char *decide_all(struct sched_server *s, const struct sched_ext_args *a) {
        s->last_valid = false;
        if (!s->ready)
                return "gpuslice scheduler: the cluster model is not synced with the API server yet";
        if (scratch_reserve(s, a->n_nodes) < 0)
                return "gpuslice scheduler: out of memory";
        /* A pod we hold but that is not bound is being scheduled again: its earlier placement (an
         * annotation left by a bind cut short, e.g. by our restart) is stale. Not while our own bind
         * of it is in flight (assumed): that bind may still succeed. */
        const struct sched_pod *held = a->pod.uid[0] ? sched_model_pod(s->model, a->pod.uid) : NULL;
        if (held && !held->bound && !held->assumed)
                sched_model_remove_pod(s->model, a->pod.uid);
        if (a->pod.uid[0])
                pending_put(s, &a->pod);
        enum cluster_policy pol = a->pod.has_policy ? a->pod.policy : s->o.policy;
        resolve_nodes(s, a);
        if (sched_pack_policy(pol) && cluster_request_any(&a->pod.req))
                pack_prepare(s, a);
        gs_buf_clear(&s->reasons);
        for (size_t i = 0; i < a->n_nodes; i++)
                decide_one(s, a, cluster_request_any(&a->pod.req) ? s->nodes[i] : NULL, pol, &s->dec[i],
                           &s->reason_off[i], i < s->pack_memo_n ? &s->pack_memo[i] : NULL);
        for (size_t i = 0; i < a->n_nodes; i++) {
                uint32_t o = s->reason_off[i];
                s->results[i] =
                        (struct sched_ext_node_result){ s->dec[i].verdict, o == UINT32_MAX ? NULL : s->reasons.p + o };
        }
        struct pending *pp = a->pod.uid[0] && cluster_request_any(&a->pod.req)
                                     ? sched_map_get(&s->pending, a->pod.uid, strlen(a->pod.uid))
                                     : NULL;
        if (pp && sched_filter_summary_note(&pp->filter, s->results, a->node_names, a->n_nodes, now_realtime_ns()))
                s->view_gen++;
        /* keep the decisions for prioritize (the list itself was kept by resolve_nodes) */
        if (s->fl_resolved && a->pod.uid[0]) {
                struct sched_score_in *t = s->fl_dec;
                s->fl_dec = s->dec;
                s->dec = t;
                strscpy(s->last_uid, a->pod.uid, sizeof s->last_uid);
                s->last_gen = sched_model_generation(s->model);
                s->last_policy = pol;
                s->last_valid = true;
        }
        return NULL;
}

/* Scores for every node of a into s->scores; under the lock. */
static const char *prioritize_all(struct sched_server *s, const struct sched_ext_args *a) {
        if (!s->ready)
                return "gpuslice scheduler: the cluster model is not synced with the API server yet";
        if (scratch_reserve(s, a->n_nodes) < 0)
                return "gpuslice scheduler: out of memory";
        enum cluster_policy pol = a->pod.has_policy ? a->pod.policy : s->o.policy;
        bool reuse = s->last_valid && a->pod.uid[0] && streq(a->pod.uid, s->last_uid) &&
                     s->last_gen == sched_model_generation(s->model) && s->last_policy == pol;
        size_t j = 0;
        for (size_t i = 0; i < a->n_nodes; i++) {
                const char *name = a->node_names[i];
                if (reuse) {
                        /* the nodes that passed filter, in filter's order: skip the ones that failed */
                        size_t k = j;
                        while (k < s->fl_n && s->fl_dec[k].verdict != SCHED_FIT &&
                               !streq(name, s->fl_names.p + s->fl_off[k]))
                                k++;
                        if (k < s->fl_n && streq(name, s->fl_names.p + s->fl_off[k])) {
                                s->decp[i] = &s->fl_dec[k];
                                j = k + 1;
                                continue;
                        }
                }
                decide_one(s, a, cluster_request_any(&a->pod.req) ? sched_model_node(s->model, name) : NULL, pol,
                           &s->dec[i], NULL, NULL);
                s->decp[i] = &s->dec[i];
        }
        sched_score_inp(s->decp, a->n_nodes, pol, s->scores);
        return NULL;
}

/*
 * The one node filter answers, as prioritize would rank it (its score, then the policy's finer pack: higher
 * for binpack and the packing policies, lower for spread), or SIZE_MAX to answer every node that fits:
 * --filter-answer all, Node objects instead of names (an answer of one would need its index), a pod that
 * asks for no GPU resource (kube-scheduler's to place) or for a soft preference only kube-scheduler's Score
 * plugins weigh, or no node fits (the full FailedNodes, which preemption reads). Under the lock, after
 * decide_all (the decisions are in fl_dec when it kept them for prioritize, else in dec).
 */
static size_t filter_pick(struct sched_server *s, const struct sched_ext_args *a) {
        if (s->o.filter_all || !a->node_cache || a->soft_preferences || !cluster_request_any(&a->pod.req))
                return SIZE_MAX;
        enum cluster_policy pol = a->pod.has_policy ? a->pod.policy : s->o.policy;
        const struct sched_score_in *d = s->last_valid ? s->fl_dec : s->dec;
        for (size_t i = 0; i < a->n_nodes; i++)
                s->decp[i] = &d[i];
        sched_score_inp(s->decp, a->n_nodes, pol, s->scores);
        size_t best = SIZE_MAX;
        double best_pack = 0;
        for (size_t i = 0; i < a->n_nodes; i++) {
                if (d[i].verdict != SCHED_FIT)
                        continue;
                double pack = pol == CLUSTER_POLICY_SPREAD ? -d[i].pack : d[i].pack;
                if (best == SIZE_MAX || s->scores[i] > s->scores[best] ||
                    (s->scores[i] == s->scores[best] && pack > best_pack)) {
                        best = i;
                        best_pack = pack;
                }
        }
        return best;
}

static void observe(struct sched_server *s, enum verb v, double t0, bool error) {
        metrics_counter_add(s->calls[v], 1);
        if (error)
                metrics_counter_add(s->errors[v], 1);
        metrics_histogram_observe(s->latency[v], now_mono() - t0);
}

unsigned sched_server_filter(struct sched_server *s, const char *body, size_t len, char **ret, size_t *ret_len) {
        double t0 = now_mono();
        struct sched_ext_args a;
        struct gs_error err = { 0 };
        int r = sched_ext_args_decode(body, len, &s->o.units, &a, &err);
        if (r < 0) {
                sched_ext_args_done(&a);
                char msg[360];
                snprintf(msg, sizeof msg, "gpuslice scheduler: bad ExtenderArgs: %s", err.message);
                if (sched_ext_filter_encode(&a, NULL, msg, ret, ret_len) < 0)
                        *ret = NULL, *ret_len = 0;
                observe(s, VERB_FILTER, t0, true);
                return 400;
        }
        pthread_mutex_lock(&s->lock);
        const char *e = decide_all(s, &a);
        size_t pick = e ? SIZE_MAX : filter_pick(s, &a);
        if (pick != SIZE_MAX) {
                /* only the policy's node: kube-scheduler then skips its scoring and prioritize */
                struct sched_ext_args one = a;
                one.n_nodes = 1;
                one.node_names = &a.node_names[pick];
                r = sched_ext_filter_encode(&one, &s->results[pick], NULL, ret, ret_len);
                metrics_counter_add(s->filter_one, 1);
        } else {
                r = sched_ext_filter_encode(&a, s->results, e, ret, ret_len);
                if (!e)
                        metrics_counter_add(s->filter_every, 1);
        }
        pthread_mutex_unlock(&s->lock);
        sched_ext_args_done(&a);
        observe(s, VERB_FILTER, t0, e || r < 0);
        if (r < 0) {
                *ret = NULL;
                *ret_len = 0;
                return 500;
        }
        return 200;
}

unsigned sched_server_prioritize(struct sched_server *s, const char *body, size_t len, char **ret, size_t *ret_len) {
        double t0 = now_mono();
        struct sched_ext_args a;
        struct gs_error err = { 0 };
        int r = sched_ext_args_decode(body, len, &s->o.units, &a, &err);
        if (r < 0) {
                /* HostPriorityList has no error field: the status tells the scheduler */
                *ret = strdup("[]");
                *ret_len = *ret ? 2 : 0;
                observe(s, VERB_PRIORITIZE, t0, true);
                return 400;
        }
        pthread_mutex_lock(&s->lock);
        const char *e = prioritize_all(s, &a);
        if (!e)
                r = sched_ext_prioritize_encode(a.node_names, s->scores, a.n_nodes, ret, ret_len);
        pthread_mutex_unlock(&s->lock);
        sched_ext_args_done(&a);
        observe(s, VERB_PRIORITIZE, t0, e || r < 0);
        if (e || r < 0) {
                *ret = strdup("[]");
                *ret_len = *ret ? 2 : 0;
                return e ? 503 : 500;
        }
        return 200;
}

/* ---- bind ---- */

/* A pod of one share under a packing policy: the policy's GPU for it (sched_pack_share_gpu, as the replay
 * and the node agent choose) instead of the fit's best fit, when the policy names one. */
static void pack_share_gpu(struct sched_server *s, const struct sched_node *n, const struct cluster_pod *pod,
                           enum cluster_policy pol, struct sched_fit *fit) {
        const struct cluster_request *req = &pod->req;
        if (!sched_pack_policy(pol) || !s->pack.w || req->n != 1 || fit->assign.n != 1 ||
            !cluster_request_is_fractional(&req->c[0]))
                return;
        struct sched_shape sh = request_shape(pod);
        unsigned free_milli[CLUSTER_GPUS_MAX];
        unsigned k = sched_pack_share_free(n, req->c[0].core, req->c[0].mem_mib, free_milli);
        int g = sched_pack_share_gpu(&s->pack, free_milli, k, n->product, &sh, pol);
        if (g >= 0)
                fit->assign.c[0].gpus = 1ULL << g;
}

static unsigned bind_reply(struct sched_server *s, double t0, const char *error, char **ret, size_t *ret_len) {
        observe(s, VERB_BIND, t0, error != NULL);
        if (sched_ext_bind_encode(error, ret, ret_len) < 0) {
                *ret = NULL;
                *ret_len = 0;
                return 500;
        }
        return 200;
}

/* A bind between its start and the binder's answer. */
struct bind_call {
        struct sched_server *s;
        double t0;
        struct cluster_pod pod;
        char node[CLUSTER_NAME_MAX];
        sched_reply_fn reply;
        void *cookie;
};

static void bind_done(void *u, int r, const struct gs_error *err);

/* Answer a bind with error (NULL: bound) through reply. */
static void bind_answer(struct sched_server *s, double t0, const char *error, sched_reply_fn reply, void *cookie) {
        char *b;
        size_t l;
        unsigned st = bind_reply(s, t0, error, &b, &l);
        reply(cookie, st, b, l);
}

/* lint: long — the bind verb in order: decode, choose again against the current model, assume, bind (with the
 * assignment) through the binder, answer; each failure has its own answer and metric. */
void sched_server_bind_start(struct sched_server *s, const char *body, size_t len, sched_reply_fn reply, void *cookie) {
        double t0 = now_mono();
        struct sched_ext_bind_args b;
        struct gs_error err = { 0 };
        char msg[2048];
        if (sched_ext_bind_decode(body, len, &b, &err) < 0) {
                snprintf(msg, sizeof msg, "gpuslice scheduler: bad ExtenderBindingArgs: %s", err.message);
                char *ret;
                size_t ret_len;
                unsigned st = bind_reply(s, t0, msg, &ret, &ret_len);
                reply(cookie, st == 200 ? 400 : st, ret, ret_len);
                return;
        }
        pthread_mutex_lock(&s->lock);
        struct cluster_pod *v = sched_map_get(&s->pending, b.pod_uid, strlen(b.pod_uid));
        if (!v) {
                pthread_mutex_unlock(&s->lock);
                metrics_counter_add(s->bind_refused, 1);
                snprintf(msg, sizeof msg,
                         "gpuslice scheduler: pod %s/%s (uid %s) was not seen by filter; cannot choose its GPUs",
                         b.pod_namespace, b.pod_name, b.pod_uid);
                bind_answer(s, t0, msg, reply, cookie);
                return;
        }
        struct cluster_pod pod = *v;
        const struct sched_node *n = sched_model_node(s->model, b.node);
        struct sched_fit fit;
        enum cluster_policy pol = pod.has_policy ? pod.policy : s->o.policy;
        char *annotations = NULL;
        if (cluster_request_any(&pod.req)) {
                /* choose again against the model as it is now: other binds may have taken GPUs */
                if (!n)
                        snprintf(fit.reason, sizeof fit.reason, "node publishes no GPUs");
                if (!n || sched_fit_node(s->model, n, &pod.req, pol, &fit) < 0) {
                        pthread_mutex_unlock(&s->lock);
                        metrics_counter_add(s->bind_refused, 1);
                        snprintf(msg, sizeof msg, "gpuslice scheduler: node %s no longer fits pod %s/%s: %s", b.node,
                                 pod.ns, pod.name, fit.reason);
                        bind_answer(s, t0, msg, reply, cookie);
                        return;
                }
                pack_share_gpu(s, n, &pod, pol, &fit);
                struct sched_pod_info info;
                sched_pod_view_info(&pod, &info);
                uint64_t now = now_realtime_ns();
                int r = sched_model_assume_pod(s->model, &info, b.node, &fit.assign, now);
                /* MIG devices (and a `single` node's nvidia.com/gpu) have no assignment: the agent picks them */
                bool gpus = false;
                for (unsigned k = 0; k < fit.assign.n; k++)
                        gpus |= fit.assign.c[k].gpus != 0;
                if (r >= 0 && gpus) {
                        const char *uuids[CLUSTER_GPUS_MAX];
                        for (unsigned g = 0; g < n->n_gpus && g < CLUSTER_GPUS_MAX; g++)
                                uuids[g] = n->gpu[g].uuid;
                        r = cluster_bind_annotations(&pod.req, &fit.assign, b.node, now, uuids,
                                                     MIN(n->n_gpus, CLUSTER_GPUS_MAX), &s->o.units, &annotations);
                }
                if (r < 0) {
                        sched_model_forget_pod(s->model, pod.uid);
                        pthread_mutex_unlock(&s->lock);
                        metrics_counter_add(s->bind_failed, 1);
                        snprintf(msg, sizeof msg, "gpuslice scheduler: cannot record the placement: %s", strerror(-r));
                        bind_answer(s, t0, msg, reply, cookie);
                        return;
                }
        }
        pthread_mutex_unlock(&s->lock);

        struct bind_call *bc = calloc(1, sizeof *bc);
        if (!bc) {
                free(annotations);
                pthread_mutex_lock(&s->lock);
                sched_model_forget_pod(s->model, pod.uid);
                pthread_mutex_unlock(&s->lock);
                metrics_counter_add(s->bind_failed, 1);
                bind_answer(s, t0, "gpuslice scheduler: out of memory", reply, cookie);
                return;
        }
        *bc = (struct bind_call){ .s = s, .t0 = t0, .pod = pod, .reply = reply, .cookie = cookie };
        strscpy(bc->node, b.node, sizeof bc->node);
        if (!s->has_binder) {
                gs_error_set(&err, -ENOTCONN, "no API server configured (--kubeconfig or in-cluster)");
                bind_done(bc, -ENOTCONN, &err);
        } else /* one call: the node and the assignment land in the same update of the pod, or neither */
                s->binder.bind(s->binder.userdata, pod.ns, pod.name, pod.uid, pod.resource_version, b.node, annotations,
                               bind_done, bc);
        free(annotations);
}

/* The binder's answer to a bind_call: forget the assumed pod or drop it from the pending ones, answer.
 * Thread: the binder's (the API client's request thread), or the bind's own when the binder answered
 * at once. */
static void bind_done(void *u, int r, const struct gs_error *err) {
        struct bind_call *bc = u;
        struct sched_server *s = bc->s;
        const struct cluster_pod *pod = &bc->pod;
        char msg[2048];
        pthread_mutex_lock(&s->lock);
        if (r < 0)
                sched_model_forget_pod(s->model, pod->uid);
        else
                pending_drop(s, pod->uid);
        pthread_mutex_unlock(&s->lock);
        const char *error = NULL;
        if (r == -ESTALE) {
                metrics_counter_add(s->bind_conflict, 1);
                snprintf(msg, sizeof msg,
                         "gpuslice scheduler: the API server refused binding pod %s/%s (resourceVersion %s) "
                         "to %s as a conflict (bound already, being deleted, or changed since it was "
                         "filtered); nothing was written: %s",
                         pod->ns, pod->name, pod->resource_version, bc->node, err ? err->message : "");
                error = msg;
        } else if (r < 0) {
                metrics_counter_add(s->bind_failed, 1);
                snprintf(msg, sizeof msg, "gpuslice scheduler: bind of pod %s/%s to %s failed%s: %s", pod->ns,
                         pod->name, bc->node, r == -ENOENT ? " (the pod is gone)" : "",
                         err && err->message[0] ? err->message : strerror(-r));
                error = msg;
        } else
                metrics_counter_add(s->bind_ok, 1);
        bind_answer(s, bc->t0, error, bc->reply, bc->cookie);
        free(bc);
}

/* sched_server_bind_start, waiting for its answer. */
struct bind_wait {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool done;
        unsigned status;
        char *body;
        size_t len;
};

static void bind_waited(void *u, unsigned status, char *body, size_t len) {
        struct bind_wait *w = u;
        pthread_mutex_lock(&w->lock);
        w->status = status; /* field by field: the lock and cond are in use, never copied */
        w->body = body;
        w->len = len;
        w->done = true;
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->lock);
}

unsigned sched_server_bind(struct sched_server *s, const char *body, size_t len, char **ret, size_t *ret_len) {
        struct bind_wait w = { .done = false };
        pthread_mutex_init(&w.lock, NULL);
        pthread_cond_init(&w.cond, NULL);
        sched_server_bind_start(s, body, len, bind_waited, &w);
        pthread_mutex_lock(&w.lock);
        while (!w.done)
                pthread_cond_wait(&w.cond, &w.lock);
        pthread_mutex_unlock(&w.lock);
        pthread_cond_destroy(&w.cond);
        pthread_mutex_destroy(&w.lock);
        *ret = w.body;
        *ret_len = w.len;
        return w.status;
}

/* ---- preempt ---- */

unsigned sched_server_preempt(struct sched_server *s, const char *body, size_t len, char **ret, size_t *ret_len) {
        double t0 = now_mono();
        struct sched_ext_preempt_args a;
        struct gs_error err = { 0 };
        int r = sched_ext_preempt_decode(body, len, &s->o.units, &a, &err);
        if (r < 0) {
                /* ExtenderPreemptionResult has no error field: the status tells the scheduler */
                *ret = strdup("{\"NodeNameToMetaVictims\":{}}");
                *ret_len = *ret ? strlen(*ret) : 0;
                observe(s, VERB_PREEMPT, t0, true);
                return 400;
        }
        bool *keep = calloc(a.n_nodes ? a.n_nodes : 1, sizeof *keep);
        unsigned status = 200;
        pthread_mutex_lock(&s->lock);
        if (!s->ready || !keep)
                status = !keep ? 500 : 503; /* no node kept: no victim is evicted on a half-known cluster */
        else {
                enum cluster_policy pol = a.pod.has_policy ? a.pod.policy : s->o.policy;
                for (size_t i = 0; i < a.n_nodes; i++) {
                        if (!cluster_request_any(&a.pod.req)) {
                                keep[i] = true; /* asks for no GPU resource: not ours to judge */
                                continue;
                        }
                        /* kept only where evicting these victims frees GPUs the pod fits on */
                        struct sched_fit f;
                        keep[i] = sched_model_fit_without(s->model, a.nodes[i].node, a.nodes[i].uids, a.nodes[i].n_uids,
                                                          &a.pod.req, (int)pol, &f) == 0;
                        metrics_counter_add(s->verdicts[keep[i] ? SCHED_FIT : SCHED_NO_ROOM], 1);
                }
        }
        pthread_mutex_unlock(&s->lock);
        if (status == 200)
                r = sched_ext_preempt_encode(&a, keep, ret, ret_len);
        if (status != 200 || r < 0) {
                if (status == 200)
                        status = 500;
                *ret = strdup("{\"NodeNameToMetaVictims\":{}}");
                *ret_len = *ret ? strlen(*ret) : 0;
        }
        free(keep);
        sched_ext_preempt_args_done(&a);
        observe(s, VERB_PREEMPT, t0, status != 200);
        return status;
}

/* ---- HTTP ---- */

static void json_reply(struct http_response *resp, unsigned status, char *body, size_t len) {
        resp->status = status;
        resp->body = body;
        resp->body_len = body ? len : 0;
        strscpy(resp->content_type, "application/json", sizeof resp->content_type);
}

static bool post_only(const struct http_request *req, struct http_response *resp) {
        if (streq(req->method, "POST"))
                return true;
        resp->status = 405;
        resp->body = strdup("POST only\n");
        resp->body_len = resp->body ? strlen(resp->body) : 0;
        return false;
}

static void serve_filter(void *ud, const struct http_request *req, struct http_response *resp) {
        char *b;
        size_t l;
        if (post_only(req, resp)) {
                unsigned st = sched_server_filter(ud, req->body, req->body_len, &b, &l);
                json_reply(resp, st, b, l);
        }
}
static void serve_prioritize(void *ud, const struct http_request *req, struct http_response *resp) {
        char *b;
        size_t l;
        if (post_only(req, resp)) {
                unsigned st = sched_server_prioritize(ud, req->body, req->body_len, &b, &l);
                json_reply(resp, st, b, l);
        }
}
/* The deferred answer of serve_bind. Thread: the binder's, or the HTTP server's. */
static void bind_replied(void *cookie, unsigned status, char *body, size_t len) {
        struct http_response resp = { 0 };
        json_reply(&resp, status, body, len);
        http_reply(cookie, &resp);
}

/* A bind waits on the API server: its answer is deferred, so the connection holds no thread meanwhile. */
static void serve_bind(void *ud, const struct http_request *req, struct http_response *resp) {
        char *b;
        size_t l;
        if (!post_only(req, resp))
                return;
        struct http_deferred *d = http_defer(req);
        if (d)
                sched_server_bind_start(ud, req->body, req->body_len, bind_replied, d);
        else {
                unsigned st = sched_server_bind(ud, req->body, req->body_len, &b, &l);
                json_reply(resp, st, b, l);
        }
}

static void serve_preempt(void *ud, const struct http_request *req, struct http_response *resp) {
        char *b;
        size_t l;
        if (post_only(req, resp)) {
                unsigned st = sched_server_preempt(ud, req->body, req->body_len, &b, &l);
                json_reply(resp, st, b, l);
        }
}

static void serve_healthz(void *ud, const struct http_request *req, struct http_response *resp) {
        struct sched_server *s = ud;
        (void)req;
        pthread_mutex_lock(&s->lock);
        bool ready = s->ready;
        pthread_mutex_unlock(&s->lock);
        resp->status = ready ? 200 : 503;
        resp->body = strdup(ready ? "ok\n" : "not synced with the API server yet\n");
        resp->body_len = resp->body ? strlen(resp->body) : 0;
}

/* Per pending GPU pod that the last filter call found no node for: seconds since that began. */
static void format_unschedulable(struct sched_server *s, struct metrics_text *t, uint64_t now_ns) {
        static const char name[] = "gpuslice_scheduler_unschedulable_pod_seconds";
        bool any = false;
        size_t cur = 0;
        const struct pending *p;
        while ((p = sched_map_next(&s->pending, &cur))) {
                if (!cluster_request_any(&p->v.req) || !p->filter.unfit_since_ns)
                        continue;
                if (!any)
                        metrics_text_family(t, name, "gauge",
                                            "Seconds since the extender's filter first found no node whose GPUs fit "
                                            "the pod, while that lasts (pending GPU pods; docs/ui.md).");
                any = true;
                const char *labels[] = { "namespace", p->v.ns, "pod", p->v.name, NULL };
                uint64_t since = p->filter.unfit_since_ns;
                metrics_text_sample(t, name, labels, now_ns > since ? (double)(now_ns - since) / 1e9 : 0);
        }
}

static void serve_metrics(void *ud, const struct http_request *req, struct http_response *resp) {
        struct sched_server *s = ud;
        (void)req;
        struct metrics_text t = { 0 };
        metrics_registry_format(&t);
        pthread_mutex_lock(&s->lock);
        double nodes = (double)sched_model_n_nodes(s->model), pods = (double)sched_model_n_pods(s->model);
        double classes = (double)sched_model_n_topo_classes(s->model), pending = (double)s->pending.n;
        bool ready = s->ready;
        format_unschedulable(s, &t, now_realtime_ns());
        pthread_mutex_unlock(&s->lock);
        static const struct {
                const char *name, *help;
        } g[] = {
                { "gpuslice_scheduler_model_nodes",
                  "Nodes in the extender's cluster model (with GPUs or holding GPU pods)." },
                { "gpuslice_scheduler_model_pods", "Pods holding or assigned GPU resources in the model." },
                { "gpuslice_scheduler_model_topology_classes", "Distinct node topologies (GPU count and links)." },
                { "gpuslice_scheduler_pending_pods", "Pods seen by filter and kept for bind." },
                { "gpuslice_scheduler_ready", "1 when the model is synced with the API server." },
        };
        double val[] = { nodes, pods, classes, pending, ready ? 1 : 0 };
        for (size_t i = 0; i < ELEMENTSOF(g); i++) {
                metrics_text_family(&t, g[i].name, "gauge", g[i].help);
                const char *const none[] = { NULL };
                metrics_text_sample(&t, g[i].name, none, val[i]);
        }
        if (metrics_text_finish(&t, &resp->body, &resp->body_len) < 0) {
                resp->status = 500;
                resp->body = NULL;
                return;
        }
        strscpy(resp->content_type, "text/plain; version=0.0.4; charset=utf-8", sizeof resp->content_type);
}

/* the page's source of documents (ui.h) */
static int ui_cluster(void *userdata, const struct sched_view_query *q, char **ret, size_t *ret_len) {
        return sched_server_view(userdata, q, ret, ret_len);
}

static int ui_topology(void *userdata, const char *node, char **ret, size_t *ret_len) {
        return sched_server_topology(userdata, node, ret, ret_len);
}

int sched_server_new(const struct sched_server_options *o, struct sched_server **ret) {
        if (!o || !o->address)
                return -EINVAL;
        struct sched_server *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->o = *o;
        s->ui = (struct sched_ui_source){ .cluster = ui_cluster, .topology = ui_topology, .userdata = s };
        if (o->binder && o->binder->bind) {
                s->binder = *o->binder;
                s->has_binder = true;
        }
        s->o.binder = NULL;
        pthread_mutex_init(&s->lock, NULL);
        int r = sched_model_new(&s->model);
        if (r < 0) {
                sched_server_free(s);
                return r;
        }
        sched_model_keep_details(s->model, true); /* GPU models and health text: the operator page shows them */
        for (int v = 0; v < VERB_N; v++) {
                s->calls[v] = metrics_counter_get("gpuslice_scheduler_requests_total",
                                                  "Extender calls served, by verb.", "verb", verb_names[v]);
                s->errors[v] =
                        metrics_counter_get("gpuslice_scheduler_request_errors_total",
                                            "Extender calls answered with an error, by verb.", "verb", verb_names[v]);
                s->latency[v] =
                        metrics_histogram_get("gpuslice_scheduler_request_duration_seconds",
                                              "Time to answer an extender call, by verb.", "verb", verb_names[v]);
        }
        static const char *const vn[3] = { "fit", "no_room", "unresolvable" };
        for (int v = 0; v < 3; v++)
                s->verdicts[v] =
                        metrics_counter_get("gpuslice_scheduler_decisions_total",
                                            "Node decisions of filter and prioritize, by verdict.", "verdict", vn[v]);
        const char *bh = "Bind calls, by result (ok, refused: the node no longer fits, conflict: the pod changed, "
                         "failed: the API call failed).";
        s->bind_ok = metrics_counter_get("gpuslice_scheduler_binds_total", bh, "result", "ok");
        s->bind_refused = metrics_counter_get("gpuslice_scheduler_binds_total", bh, "result", "refused");
        s->bind_conflict = metrics_counter_get("gpuslice_scheduler_binds_total", bh, "result", "conflict");
        s->bind_failed = metrics_counter_get("gpuslice_scheduler_binds_total", bh, "result", "failed");
        s->filter_one = metrics_counter_get("gpuslice_scheduler_filter_answers_total",
                                            "Filter answers without an error, by form (one: the policy's node alone, "
                                            "kube-scheduler skips its scoring; all: every node that fits).",
                                            "form", "one");
        s->filter_every = metrics_counter_get("gpuslice_scheduler_filter_answers_total",
                                              "Filter answers without an error, by form (one: the policy's node alone, "
                                              "kube-scheduler skips its scoring; all: every node that fits).",
                                              "form", "all");
        r = http_server_new(o->address, &s->http);
        if (r < 0) {
                sched_server_free(s);
                return r;
        }
        if (o->tls_cert_file || o->tls_key_file || o->tls_client_ca_file) {
                r = http_server_tls_files(s->http, o->tls_cert_file, o->tls_key_file, o->tls_client_ca_file);
                if (r < 0) {
                        sched_server_free(s);
                        return r;
                }
        }
        /* bind waits on the API server: kube-scheduler binds pods concurrently, each on a connection
         * of its own, while filter and prioritize for the next pods go on on others. With a pool of
         * polling threads a filter whose kept-alive connection shared a thread with a bind waited for
         * the bind (docs/scheduler.md, "Performance"). */
        if ((r = http_server_max_connections(s->http, SCHED_SERVER_CONNECTIONS)) < 0 ||
            (r = http_server_handle(s->http, "/filter", serve_filter, s)) < 0 ||
            (r = http_server_handle(s->http, "/prioritize", serve_prioritize, s)) < 0 ||
            (r = http_server_handle(s->http, "/bind", serve_bind, s)) < 0 ||
            (r = http_server_handle(s->http, "/preempt", serve_preempt, s)) < 0 ||
            (r = http_server_handle(s->http, "/healthz", serve_healthz, s)) < 0 ||
            (r = http_server_handle(s->http, "/metrics", serve_metrics, s)) < 0 ||
            (r = sched_ui_register(s->http, &s->ui)) < 0) {
                sched_server_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

int sched_server_start(struct sched_server *s) {
        return http_server_start(s->http);
}

unsigned sched_server_port(const struct sched_server *s) {
        return http_server_port(s->http);
}

struct sched_server *sched_server_free(struct sched_server *s) {
        if (s)
                sched_mix_free(&s->mix);
        if (!s)
                return NULL;
        s->http = http_server_free(s->http);
        size_t cur = 0;
        struct cluster_pod *v;
        while ((v = sched_map_next(&s->pending, &cur)))
                free(v); /* a struct pending (v is its first member) */
        sched_map_done(&s->pending);
        sched_model_free(s->model);
        free(s->nodes);
        free(s->dec);
        free(s->decp);
        free(s->reason_off);
        free(s->results);
        free(s->scores);
        free(s->pack_memo);
        gs_buf_done(&s->reasons);
        gs_buf_done(&s->fl_names);
        free(s->fl_off);
        free(s->fl_node);
        free(s->fl_dec);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return NULL;
}

struct sched_model *sched_server_lock(struct sched_server *s) {
        pthread_mutex_lock(&s->lock);
        return s->model;
}

void sched_server_unlock(struct sched_server *s) {
        pthread_mutex_unlock(&s->lock);
}

/* The packing policies' mix at the first ready: the GPU pods the model holds (bound or assigned) are counted
 * with the pending ones the feed listed (sched_server_pod_pending), so a restarted extender decides from the
 * cluster's mix, not from an empty one. The workload is re-read from it at once. */
static void mix_seed(struct sched_server *s) {
        size_t cur = 0;
        const struct sched_pod *p;
        while ((p = sched_model_next_pod(s->model, &cur))) {
                if (!p->n)
                        continue; /* CPU only: the extender's mix is the GPU pods' */
                struct cluster_request req = { .n = MIN(p->n, (unsigned)CLUSTER_CONTAINERS_MAX) };
                for (unsigned k = 0; k < req.n; k++)
                        req.c[k] = (struct cluster_container_req){ .whole = p->c[k].whole,
                                                                   .core = p->c[k].core,
                                                                   .mem_mib = p->c[k].mem_mib };
                struct sched_shape sh = sched_pack_request_shape(&req, p->cpu_milli, p->mem_mib);
                (void)sched_mix_add(&s->mix, &sh);
        }
        sched_mix_workload(&s->mix, 0.95, false, &s->workload);
        sched_workload_scarcity(&s->workload, s->model);
        s->pack_scarce_gen = sched_model_nodes_generation(s->model);
        s->pack.version++;
        s->mix_seeded = true;
}

void sched_server_pod_pending(struct sched_server *s, const struct cluster_pod *v) {
        if (s->mix_seeded || !v || !cluster_request_any(&v->req))
                return;
        struct sched_shape sh = request_shape(v);
        (void)sched_mix_add(&s->mix, &sh);
}

void sched_server_set_ready(struct sched_server *s, bool ready) {
        pthread_mutex_lock(&s->lock);
        if (s->ready != ready)
                s->view_gen++;
        if (ready && !s->mix_seeded)
                mix_seed(s);
        s->ready = ready;
        pthread_mutex_unlock(&s->lock);
}

void sched_server_pod_settled(struct sched_server *s, const char *uid) {
        if (uid)
                pending_drop(s, uid);
}

/* ---- the operator page's data (src/sched/ui.c serves it) ---- */

int sched_server_view(struct sched_server *s, const struct sched_view_query *q, char **ret, size_t *ret_len) {
        pthread_mutex_lock(&s->lock);
        struct sched_view_pending *pv = calloc(s->ring_n + 1, sizeof *pv);
        size_t n = 0;
        /* in the ring's order: the order filter first saw them, the oldest first */
        for (size_t i = 0; pv && i < s->ring_n; i++) {
                const struct pending *p = s->ring[(s->ring_head + i) % PENDING_MAX];
                if (p && cluster_request_any(
                                 &p->v.req)) /* pods asking no GPU resource pass every node: not pending on GPUs */
                        pv[n++] = (struct sched_view_pending){ &p->v, &p->filter };
        }
        struct sched_view_state st = { .generation = sched_model_generation(s->model) + s->view_gen,
                                       .ready = s->ready,
                                       .now_ns = now_realtime_ns() };
        int r = pv ? sched_view_cluster(s->model, pv, n, q, &st, ret, ret_len) : -ENOMEM;
        pthread_mutex_unlock(&s->lock);
        free(pv);
        return r;
}

int sched_server_topology(struct sched_server *s, const char *node, char **ret, size_t *ret_len) {
        pthread_mutex_lock(&s->lock);
        int r = sched_view_topology(s->model, node, ret, ret_len);
        pthread_mutex_unlock(&s->lock);
        return r;
}
