/* SPDX-License-Identifier: Apache-2.0 */
/*
 * model.c — the cluster GPU model (see model.h). Per-GPU use is kept incrementally: a pod's
 * assignment is added to its node's GPUs when it arrives and subtracted when it leaves or
 * changes; a node whose GPUs change is re-counted from its pod list.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched/class-internal.h"
#include "sched/decide.h"
#include "sched/map-internal.h"
#include "sched/model.h"
#include "util/util.h"

struct sched_model {
        struct sched_map nodes;   /* name -> struct sched_node */
        struct sched_map pods;    /* uid -> struct sched_pod */
        struct sched_map classes; /* n + links -> struct sched_topo_class */
        uint64_t generation;
        uint64_t nodes_generation; /* node added or freed */
        bool keep_details;
        unsigned n_products;
        char *products[SCHED_PRODUCTS_MAX];
};

void sched_model_keep_details(struct sched_model *m, bool keep) {
        m->keep_details = keep;
}

int sched_model_new(struct sched_model **ret) {
        struct sched_model *m = calloc(1, sizeof *m);
        if (!m)
                return -ENOMEM;
        *ret = m;
        return 0;
}

static void class_unref(struct sched_model *m, struct sched_topo_class *c) {
        if (!c || --c->refs > 0)
                return;
        sched_map_del(&m->classes, c->link, (size_t)c->n * c->n * sizeof *c->link);
        free(c->link);
        free(c->memo);
        free(c->scratch);
        free(c);
}

static void node_free_gpus(struct sched_node *n) {
        free(n->details);
        n->details = NULL;
        free(n->mig);
        n->mig = NULL;
        n->n_mig = 0;
        n->mig_single = false;
        for (unsigned i = 0; i < n->n_gpus; i++)
                free(n->gpu[i].uuid);
        if (n->gpu != n->gpu_inline)
                free(n->gpu);
        n->gpu = NULL;
        n->n_gpus = 0;
}

static void pod_free(struct sched_pod *p) {
        if (!p)
                return;
        free(p->uid);
        free(p->ns);
        free(p->name);
        free(p->c);
        free(p);
}

struct sched_model *sched_model_free(struct sched_model *m) {
        if (!m)
                return NULL;
        size_t cur = 0;
        struct sched_pod *p;
        while ((p = sched_map_next(&m->pods, &cur)))
                pod_free(p);
        cur = 0;
        struct sched_node *n;
        while ((n = sched_map_next(&m->nodes, &cur))) {
                node_free_gpus(n);
                struct sched_topo_class *c = n->topo;
                n->topo = NULL;
                if (c && --c->refs == 0) {
                        free(c->link);
                        free(c->memo);
                        free(c->scratch);
                        free(c);
                }
                free(n);
        }
        for (unsigned i = 0; i < m->n_products; i++)
                free(m->products[i]);
        sched_map_done(&m->pods);
        sched_map_done(&m->nodes);
        sched_map_done(&m->classes);
        free(m);
        return NULL;
}

/* ---- usage accounting ---- */

/* The node's summary from its GPUs (model.h, struct sched_node_sum). */
static void summarize(struct sched_node *n) {
        struct sched_node_sum *u = &n->sum;
        *u = (struct sched_node_sum){ 0 };
        if (!n->published || n->n_gpus == 0 || n->n_gpus > SCHED_NODE_INLINE_GPUS)
                return;
        u->valid = true;
        for (unsigned i = 0; i < n->n_gpus; i++) {
                const struct sched_gpu *g = &n->gpu[i];
                if (!g->healthy)
                        continue;
                u->n_healthy++;
                u->healthy_mem += g->mem_total_mib;
                if (g->whole > 0)
                        continue;
                u->share_ok |= 1ULL << i;
                if (g->sharers == 0)
                        u->whole_free |= 1ULL << i;
                u->core_free[i] = (uint8_t)(g->core_used >= 100 ? 0 : 100 - g->core_used);
                u->mem_free[i] = g->mem_total_mib > g->mem_used_mib ? g->mem_total_mib - g->mem_used_mib : 0;
                u->share_mem_free += u->mem_free[i];
                u->max_share_core = MAX(u->max_share_core, (uint16_t)u->core_free[i]);
                u->max_share_mem = MAX(u->max_share_mem, u->mem_free[i]);
        }
}

static void apply(struct sched_node *n, const struct sched_pod *p, int sign) {
        n->cpu_used = (uint64_t)((int64_t)n->cpu_used + sign * (int64_t)p->cpu_milli);
        n->mem_used = (uint64_t)((int64_t)n->mem_used + sign * (int64_t)p->mem_mib);
        n->cpu_nonzero = (uint64_t)((int64_t)n->cpu_nonzero + sign * (int64_t)sched_nonzero_cpu(p->cpu_milli));
        n->mem_nonzero = (uint64_t)((int64_t)n->mem_nonzero + sign * (int64_t)sched_nonzero_mem(p->mem_mib));
        for (unsigned k = 0; k < p->n; k++) {
                const struct cluster_container_assign *c = &p->c[k].assign;
                for (alloc_set_t s = c->gpus; s; s &= s - 1) {
                        unsigned i = (unsigned)__builtin_ctzll(s);
                        if (i >= n->n_gpus)
                                continue; /* names a GPU the node no longer has */
                        struct sched_gpu *g = &n->gpu[i];
                        if (c->whole) {
                                g->whole = (uint16_t)(g->whole + sign);
                        } else {
                                g->core_used = (uint16_t)(g->core_used + sign * (int)c->core);
                                g->mem_used_mib = (uint32_t)((int64_t)g->mem_used_mib + sign * (int64_t)c->mem_mib);
                                g->sharers = (uint16_t)(g->sharers + sign);
                        }
                }
        }
        n->generation++;
        summarize(n);
}

/* A pod on a published node without an assignment: where our own fit would have put it. */
static void infer(struct sched_model *m, struct sched_pod *p) {
        struct sched_fit fit;
        struct cluster_request req = { .n = p->n };
        for (unsigned k = 0; k < p->n; k++) {
                p->c[k].assign = (struct cluster_container_assign){ 0 };
                req.c[k] = (struct cluster_container_req){ .whole = p->c[k].whole,
                                                           .core = p->c[k].core,
                                                           .mem_mib = p->c[k].mem_mib };
        }
        p->inferred = true;
        if (!p->node || !p->node->published)
                return;
        if (sched_fit_node(m, p->node, &req, CLUSTER_POLICY_BINPACK, &fit) == 0)
                for (unsigned k = 0; k < p->n; k++)
                        p->c[k].assign = fit.assign.c[k];
        /* else: it uses something we cannot place; nothing is counted (docs/scheduler.md) */
}

static void link_pod(struct sched_node *n, struct sched_pod *p) {
        p->node = n;
        p->next_on_node = n->pods;
        n->pods = p;
        n->n_pods++;
        apply(n, p, +1);
}

static void unlink_pod(struct sched_model *m, struct sched_pod *p);

static void node_maybe_delete(struct sched_model *m, struct sched_node *n) {
        if (n->published || n->pods)
                return;
        sched_map_del(&m->nodes, n->name, strlen(n->name));
        m->nodes_generation++;
        class_unref(m, n->topo);
        node_free_gpus(n);
        free(n);
}

static void unlink_pod(struct sched_model *m, struct sched_pod *p) {
        struct sched_node *n = p->node;
        if (!n)
                return;
        apply(n, p, -1);
        for (struct sched_pod **pp = &n->pods; *pp; pp = &(*pp)->next_on_node)
                if (*pp == p) {
                        *pp = p->next_on_node;
                        break;
                }
        n->n_pods--;
        p->node = NULL;
        p->next_on_node = NULL;
        node_maybe_delete(m, n);
}

static void recount(struct sched_model *m, struct sched_node *n) {
        /* every pod is applied again below (the Node object's every update comes here: nothing may count twice) */
        n->cpu_used = n->mem_used = n->cpu_nonzero = n->mem_nonzero = 0;
        for (unsigned i = 0; i < n->n_gpus; i++) {
                struct sched_gpu *g = &n->gpu[i];
                g->mem_used_mib = 0;
                g->core_used = 0;
                g->sharers = 0;
                g->whole = 0;
        }
        summarize(n); /* infer() below decides on it */
        /* pods with a known placement first, then the inferred ones fitted around them */
        for (struct sched_pod *p = n->pods; p; p = p->next_on_node)
                if (!p->inferred)
                        apply(n, p, +1);
        for (struct sched_pod *p = n->pods; p; p = p->next_on_node)
                if (p->inferred) {
                        infer(m, p);
                        apply(n, p, +1);
                }
        n->generation++;
        summarize(n);
}

static struct sched_node *node_get_or_add(struct sched_model *m, const char *name) {
        struct sched_node *n = sched_map_get(&m->nodes, name, strlen(name));
        if (n)
                return n;
        size_t l = strlen(name);
        n = calloc(1, sizeof *n + l + 1);
        if (!n)
                return NULL;
        n->name = (char *)(n + 1);
        memcpy(n->name, name, l + 1);
        if (sched_map_put(&m->nodes, n->name, l, n) < 0) {
                free(n);
                return NULL;
        }
        n->product = -1;
        m->nodes_generation++;
        return n;
}

static struct sched_topo_class *class_get(struct sched_model *m, const struct cluster_node_info *info) {
        unsigned nn = info->n_gpus;
        size_t sz = (size_t)nn * nn * sizeof(struct topo_link);
        struct topo_link *link = malloc(sz ? sz : 1);
        if (!link)
                return NULL;
        for (unsigned i = 0; i < nn; i++)
                for (unsigned j = 0; j < nn; j++)
                        link[i * nn + j] = i == j ? (struct topo_link){ TOPO_LEVEL_SELF, 0 } : info->link[i][j];
        /* the key must tell n apart too: n*n entries of a given n are only comparable among that n,
         * and sizes differ for different n, so the byte length already encodes it */
        struct sched_topo_class *c = sched_map_get(&m->classes, link, sz);
        if (c) {
                free(link);
                c->refs++;
                return c;
        }
        c = calloc(1, sizeof *c);
        if (!c) {
                free(link);
                return NULL;
        }
        c->n = nn;
        c->refs = 1;
        c->link = link;
        if (sched_map_put(&m->classes, c->link, sz, c) < 0) {
                free(link);
                free(c);
                return NULL;
        }
        return c;
}

/* The MIG devices of the annotation's GPUs in MIG mode, parent by parent (*ret NULL when none). 0 or
 * -ENOMEM. */
static int node_mig_list(const struct cluster_node_info *info, struct sched_mig **ret, unsigned *ret_n) {
        unsigned n_mig = 0;
        for (unsigned i = 0; i < info->n_gpus; i++)
                n_mig += MIN(info->gpu[i].n_mig, (unsigned)CLUSTER_MIG_MAX);
        *ret = NULL;
        *ret_n = 0;
        if (!n_mig)
                return 0;
        struct sched_mig *mig = calloc(n_mig, sizeof *mig);
        if (!mig)
                return -ENOMEM;
        for (unsigned i = 0, k = 0; i < info->n_gpus; i++)
                for (unsigned j = 0; j < info->gpu[i].n_mig && j < CLUSTER_MIG_MAX; j++, k++) {
                        const struct cluster_mig_info *x = &info->gpu[i].mig_dev[j];
                        mig[k] = (struct sched_mig){ .gpu = i, .healthy = x->healthy };
                        strscpy(mig[k].profile, x->profile, sizeof mig[k].profile);
                        strscpy(mig[k].holder, x->holder, sizeof mig[k].holder);
                }
        *ret = mig;
        *ret_n = n_mig;
        return 0;
}

/* A GPU's replication (the annotation's "sharing"; a mode this extender does not know counts as time-slicing). */
static uint8_t gpu_sharing(const struct cluster_gpu_info *x) {
        return !x->sharing[0]                           ? SCHED_SHARING_NONE
               : streq(x->sharing, CLUSTER_SHARING_MPS) ? SCHED_SHARING_MPS
                                                        : SCHED_SHARING_TIMESLICE;
}

/* GPU i's details from the annotation: the health a person reads, with its MIG mode or replicas beside it. */
static void gpu_details(struct sched_node_details *d, unsigned i, const struct cluster_gpu_info *x) {
        strscpy(d->gpu[i].model, x->model, sizeof d->gpu[i].model);
        char rep[64] = "";
        if (x->sharing[0]) /* replicated: inspect and the page say so beside the health */
                snprintf(rep, sizeof rep, " (%.15s: %u of %u replicas held)", x->sharing, x->held, x->replicas);
        snprintf(d->gpu[i].health, sizeof d->gpu[i].health, "%.40s%s%s", x->health, x->mig ? " (MIG)" : "", rep);
        strscpy(d->gpu[i].sharing, x->sharing, sizeof d->gpu[i].sharing);
        d->gpu[i].replicas = x->replicas;
        d->gpu[i].held = x->held;
}

/* The node's replicas served as nvidia.com/gpu and how many are not held: those of the GPUs whose own replica resource
 * (the annotation's, per GPU; the node's for an older agent's) is nvidia.com/gpu. A node with both strategies has
 * the other set's replicas under another name: kubelet never gives them for an nvidia.com/gpu request. */
static void node_replicas(struct sched_node *n, const struct cluster_node_info *info) {
        n->replicas_free = 0;
        n->replicas_whole = false;
        for (unsigned i = 0; i < info->n_gpus; i++) {
                const struct cluster_gpu_info *g = &info->gpu[i];
                if (!g->sharing[0] || !streq(g->replica_resource, cluster_resource_name(CLUSTER_NAME_NVIDIA_GPU, NULL)))
                        continue;
                n->replicas_whole = true;
                if (g->healthy && g->replicas > g->held)
                        n->replicas_free += g->replicas - g->held;
        }
}

/* Does the agent serve the node's MIG devices as nvidia.com/gpu (strategy single, a GPU in MIG mode)? */
static bool node_mig_single(const struct cluster_node_info *info) {
        bool any = false;
        for (unsigned i = 0; i < info->n_gpus; i++)
                any |= info->gpu[i].mig;
        return any && streq(info->mig_strategy, "single");
}

int sched_model_set_node(struct sched_model *m, const struct cluster_node_info *info) {
        if (!m || !info || !info->name[0] || info->n_gpus > CLUSTER_GPUS_MAX)
                return -EINVAL;
        m->generation++;
        struct sched_gpu *gpus = calloc(info->n_gpus ? info->n_gpus : 1, sizeof *gpus);
        if (!gpus)
                return -ENOMEM; /* built aside, moved inline below when it fits */
        for (unsigned i = 0; i < info->n_gpus; i++) {
                gpus[i].mem_total_mib = info->gpu[i].mem_mib;
                /* a GPU in MIG mode is its MIG devices' (n->mig, placed by counts, decide.c): never free as a
                 * whole GPU or for a share */
                gpus[i].healthy = info->gpu[i].healthy && !info->gpu[i].mig && !info->gpu[i].sharing[0];
                /* a replicated GPU is its replicas' (kubelet places them, docs/scheduler.md): likewise */
                gpus[i].sharing = gpu_sharing(&info->gpu[i]);
                if (info->gpu[i].uuid[0]) {
                        gpus[i].uuid = strndup(info->gpu[i].uuid, CLUSTER_UUID_MAX);
                        if (!gpus[i].uuid)
                                goto nomem;
                }
        }
        struct sched_node_details *d = NULL;
        if (m->keep_details) {
                d = calloc(1, sizeof *d + info->n_gpus * sizeof d->gpu[0]);
                if (!d)
                        goto nomem;
                strscpy(d->driver, info->driver, sizeof d->driver);
                for (unsigned i = 0; i < info->n_gpus; i++)
                        gpu_details(d, i, &info->gpu[i]);
        }
        unsigned n_mig = 0;
        struct sched_mig *mig = NULL;
        if (node_mig_list(info, &mig, &n_mig) < 0) {
                free(d);
                goto nomem;
        }
        struct sched_topo_class *c = class_get(m, info);
        if (!c) {
                free(mig);
                free(d);
                goto nomem;
        }
        struct sched_node *n = node_get_or_add(m, info->name);
        if (!n) {
                class_unref(m, c);
                free(mig);
                free(d);
                goto nomem;
        }
        node_free_gpus(n);
        n->details = d;
        n->mig = mig;
        n->n_mig = n_mig;
        n->mig_single = node_mig_single(info);
        node_replicas(n, info);
        class_unref(m, n->topo);
        if (info->n_gpus <= SCHED_NODE_INLINE_GPUS) {
                memcpy(n->gpu_inline, gpus, info->n_gpus * sizeof *gpus);
                free(gpus);
                gpus = n->gpu_inline;
        }
        n->gpu = gpus;
        n->n_gpus = info->n_gpus;
        n->topo = c;
        n->published = true;
        recount(m, n);
        return 0;
nomem:
        for (unsigned i = 0; i < info->n_gpus; i++)
                free(gpus[i].uuid);
        free(gpus);
        return -ENOMEM;
}

int sched_model_remove_node(struct sched_model *m, const char *name) {
        m->generation++;
        struct sched_node *n = name ? sched_map_get(&m->nodes, name, strlen(name)) : NULL;
        if (!n || !n->published)
                return -ENOENT;
        n->published = false;
        node_free_gpus(n);
        class_unref(m, n->topo);
        n->topo = NULL;
        recount(m, n);
        node_maybe_delete(m, n);
        return 0;
}

static bool request_empty(const struct cluster_request *r) {
        for (unsigned k = 0; k < r->n_mig && k < CLUSTER_MIG_REQ_MAX; k++)
                if (r->mig[k].count)
                        return false;
        for (unsigned k = 0; k < r->n && k < CLUSTER_CONTAINERS_MAX; k++)
                if (r->c[k].whole || r->c[k].core || r->c[k].mem_mib)
                        return false;
        return true;
}

static int pod_update_names(struct sched_pod *p, const struct sched_pod_info *info) {
        char *ns = strdup(info->ns ? info->ns : "");
        char *name = strdup(info->name ? info->name : "");
        if (!ns || !name) {
                free(ns);
                free(name);
                return -ENOMEM;
        }
        free(p->ns);
        free(p->name);
        p->ns = ns;
        p->name = name;
        strscpy(p->resource_version, info->resource_version ? info->resource_version : "", sizeof p->resource_version);
        return 0;
}

static int pod_set_req(struct sched_pod *p, const struct cluster_request *req) {
        if (req->n != p->n) {
                struct sched_pod_container *c = calloc(req->n ? req->n : 1, sizeof *c);
                if (!c)
                        return -ENOMEM;
                free(p->c);
                p->c = c;
                p->n = req->n;
        }
        for (unsigned k = 0; k < req->n; k++)
                p->c[k] = (struct sched_pod_container){ .whole = req->c[k].whole,
                                                        .core = req->c[k].core,
                                                        .mem_mib = req->c[k].mem_mib };
        p->n_mig = MIN(req->n_mig, (unsigned)CLUSTER_MIG_REQ_MAX);
        memcpy(p->mig, req->mig, p->n_mig * sizeof *p->mig);
        return 0;
}

static struct sched_pod *pod_get_or_add(struct sched_model *m, const char *uid) {
        struct sched_pod *p = sched_map_get(&m->pods, uid, strlen(uid));
        if (p)
                return p;
        p = calloc(1, sizeof *p);
        if (!p)
                return NULL;
        p->uid = strdup(uid);
        if (!p->uid || sched_map_put(&m->pods, p->uid, strlen(p->uid), p) < 0) {
                free(p->uid);
                free(p);
                return NULL;
        }
        return p;
}

/* p must be unlinked (its old use subtracted) before its request changes. */
static int place(struct sched_model *m, struct sched_pod *p, const char *node_name,
                 const struct cluster_assignment *assign) {
        p->inferred = assign == NULL;
        for (unsigned k = 0; k < p->n; k++)
                p->c[k].assign = assign && k < assign->n ? assign->c[k] : (struct cluster_container_assign){ 0 };
        if (!node_name || !node_name[0])
                return 0;
        struct sched_node *n = node_get_or_add(m, node_name);
        if (!n)
                return -ENOMEM;
        p->node = n;
        if (!assign)
                infer(m, p);
        p->node = NULL;
        link_pod(n, p);
        return 0;
}

/* The model's pod for INFO (added when new) with INFO's names and bound flag. */
static int pod_refresh(struct sched_model *m, const struct sched_pod_info *info, struct sched_pod **ret) {
        struct sched_pod *p = pod_get_or_add(m, info->uid);
        if (!p)
                return -ENOMEM;
        int r = pod_update_names(p, info);
        if (r < 0)
                return r;
        p->bound = info->bound;
        *ret = p;
        return 0;
}

/* Does the pod's placement name GPUs (a pod asking only MIG devices, or whole GPUs of a `single` node, has
 * none: the node agent picks its devices and no assignment will come to wait for)? */
static bool pod_has_gpus(const struct sched_pod *p) {
        for (unsigned k = 0; k < p->n; k++)
                if (p->c[k].assign.gpus)
                        return true;
        return false;
}

/* lint: long — its complexity is the argument checks and the rules of when a watched pod may replace an assumed
 * one, each one condition; 37 lines. */
int sched_model_set_pod(struct sched_model *m, const struct sched_pod_info *info) {
        if (!m || !info || !info->uid || !info->uid[0] || info->req.n > CLUSTER_CONTAINERS_MAX ||
            info->req.n_mig > CLUSTER_MIG_REQ_MAX || (info->has_assignment && info->assign.n > CLUSTER_CONTAINERS_MAX))
                return -EINVAL;
        m->generation++;
        bool on_node = info->node && info->node[0];
        if (info->has_assignment && !on_node)
                return -EINVAL; /* the caller gives the assignment's node as node */
        /* Our own bind is ahead of the watch: an older view of the pod (pending, no assignment yet)
         * must not undo the assumption, or a second bind could take the same GPU. */
        const struct sched_pod *known = sched_map_get(&m->pods, info->uid, strlen(info->uid));
        if (known && known->assumed && !info->terminated && !info->has_assignment &&
            (!on_node || (known->node && streq(known->node->name, info->node) && pod_has_gpus(known))))
                return 0;
        if (info->terminated || (request_empty(&info->req) && !info->cpu_milli && !info->mem_mib) ||
            (!on_node && !info->has_assignment)) {
                (void)sched_model_remove_pod(m, info->uid);
                return 0;
        }
        struct sched_pod *p;
        int r = pod_refresh(m, info, &p);
        if (r < 0)
                return r;
        p->confirmed = info->confirmed;
        p->source = (uint8_t)info->source;
        /* Our own bind is ahead of the watch: keep the assumed placement until the feed shows an
         * assignment (or the pod on another node). */
        if (p->assumed && !info->has_assignment &&
            (!on_node || (p->node && streq(p->node->name, info->node) && pod_has_gpus(p))))
                return 0;
        p->assumed = false;
        unlink_pod(m, p);
        p->cpu_milli = info->cpu_milli;
        p->mem_mib = info->mem_mib;
        r = pod_set_req(p, &info->req);
        if (r < 0) {
                sched_model_remove_pod(m, info->uid);
                return r;
        }
        return place(m, p, info->node, info->has_assignment ? &info->assign : NULL);
}

int sched_model_remove_pod(struct sched_model *m, const char *uid) {
        if (!m || !uid)
                return -EINVAL;
        struct sched_pod *p = sched_map_get(&m->pods, uid, strlen(uid));
        if (!p)
                return -ENOENT;
        m->generation++;
        unlink_pod(m, p);
        sched_map_del(&m->pods, p->uid, strlen(p->uid));
        pod_free(p);
        return 0;
}

int sched_model_assume_pod(struct sched_model *m, const struct sched_pod_info *info, const char *node,
                           const struct cluster_assignment *assign, uint64_t now_ns) {
        if (!m || !info || !info->uid || !info->uid[0] || !node || !node[0] || !assign ||
            assign->n > CLUSTER_CONTAINERS_MAX)
                return -EINVAL;
        m->generation++;
        struct sched_pod *p;
        int r = pod_refresh(m, info, &p);
        if (r < 0)
                return r;
        p->confirmed = false;
        p->source = CLUSTER_SOURCE_GPUSLICE;
        unlink_pod(m, p);
        p->cpu_milli = info->cpu_milli;
        p->mem_mib = info->mem_mib;
        r = pod_set_req(p, &info->req);
        if (r >= 0)
                r = place(m, p, node, assign);
        if (r < 0) {
                sched_model_remove_pod(m, info->uid);
                return r;
        }
        p->assumed = true;
        p->assumed_ns = now_ns;
        return 0;
}

int sched_model_forget_pod(struct sched_model *m, const char *uid) {
        if (!m || !uid)
                return -EINVAL;
        struct sched_pod *p = sched_map_get(&m->pods, uid, strlen(uid));
        if (!p)
                return -ENOENT;
        if (!p->assumed)
                return 0; /* the feed confirmed it meanwhile: the feed is the truth */
        return sched_model_remove_pod(m, uid);
}

int sched_model_product(const struct sched_model *m, const char *product) {
        for (unsigned i = 0; product && i < m->n_products; i++)
                if (streq(m->products[i], product))
                        return (int)i;
        return -ENOENT;
}

int sched_model_set_node_resources(struct sched_model *m, const char *name, uint64_t cpu_milli, uint64_t mem_mib,
                                   const char *product) {
        if (!m || !name)
                return -EINVAL;
        struct sched_node *n = sched_map_get(&m->nodes, name, strlen(name));
        if (!n)
                return -ENOENT;
        int id = -1;
        if (product && product[0]) {
                id = sched_model_product(m, product);
                if (id < 0) {
                        if (m->n_products >= SCHED_PRODUCTS_MAX)
                                return -E2BIG;
                        char *s = strdup(product);
                        if (!s)
                                return -ENOMEM;
                        id = (int)m->n_products;
                        m->products[m->n_products++] = s;
                }
        }
        m->generation++;
        n->cpu_milli = cpu_milli;
        n->mem_mib = mem_mib;
        n->product = id;
        n->generation++;
        return 0;
}

const struct sched_node *sched_model_node(const struct sched_model *m, const char *name) {
        return name ? sched_map_get(&m->nodes, name, strlen(name)) : NULL;
}
const struct sched_pod *sched_model_pod(const struct sched_model *m, const char *uid) {
        return uid ? sched_map_get(&m->pods, uid, strlen(uid)) : NULL;
}
uint64_t sched_model_generation(const struct sched_model *m) {
        return m->generation;
}
size_t sched_model_n_nodes(const struct sched_model *m) {
        return m->nodes.n;
}
size_t sched_model_n_pods(const struct sched_model *m) {
        return m->pods.n;
}
uint64_t sched_model_nodes_generation(const struct sched_model *m) {
        return m->nodes_generation;
}
size_t sched_model_n_topo_classes(const struct sched_model *m) {
        return m->classes.n;
}
const struct sched_node *sched_model_next_node(const struct sched_model *m, size_t *cursor) {
        return sched_map_next(&m->nodes, cursor);
}

const struct sched_pod *sched_model_next_pod(const struct sched_model *m, size_t *cursor) {
        return sched_map_next(&m->pods, cursor);
}

/* ---- preemption ---- */

/* A victim's MIG side, taken out for a preemption check and put back: its devices' holders in the
 * annotation and what it asks (so it is neither held nor awaited meanwhile). */
struct mig_victim {
        unsigned n_mig;
        unsigned whole[CLUSTER_CONTAINERS_MAX];
};

static void mig_out(struct sched_node *n, struct sched_pod *p, struct mig_victim *v, int *owner, int j) {
        char who[128];
        cluster_mig_holder(p->ns, p->name, who, sizeof who);
        for (unsigned i = 0; i < n->n_mig; i++)
                if (n->mig[i].holder[0] && streq(n->mig[i].holder, who)) {
                        owner[i] = j;
                        n->mig[i].holder[0] = '\0';
                }
        v->n_mig = p->n_mig;
        p->n_mig = 0;
        for (unsigned k = 0; k < p->n && k < CLUSTER_CONTAINERS_MAX; k++) {
                v->whole[k] = p->c[k].whole;
                if (n->mig_single && !p->c[k].assign.gpus)
                        p->c[k].whole = 0; /* counted against the MIG devices, not on a GPU */
        }
}

static void mig_back(struct sched_node *n, struct sched_pod *p, const struct mig_victim *v, const int *owner, int j) {
        for (unsigned i = 0; i < n->n_mig; i++)
                if (owner[i] == j)
                        cluster_mig_holder(p->ns, p->name, n->mig[i].holder, sizeof n->mig[i].holder);
        p->n_mig = v->n_mig;
        for (unsigned k = 0; k < p->n && k < CLUSTER_CONTAINERS_MAX; k++)
                p->c[k].whole = v->whole[k];
}

int sched_model_fit_without(struct sched_model *m, const char *name, const char *const *uids, size_t n_uids,
                            const struct cluster_request *req, int policy, struct sched_fit *ret) {
        struct sched_node *n = name ? sched_map_get(&m->nodes, name, strlen(name)) : NULL;
        if (!n || !n->published)
                return -ENODEV;
        /* take the victims out (each once: a UID may be listed twice) */
        struct sched_pod **out = calloc(n_uids ? n_uids : 1, sizeof *out);
        struct mig_victim *mv = calloc(n_uids ? n_uids : 1, sizeof *mv);
        int *owner = malloc((n->n_mig ? n->n_mig : 1) * sizeof *owner);
        if (!out || !mv || !owner) {
                free(out);
                free(mv);
                free(owner);
                return -ENOMEM;
        }
        for (unsigned i = 0; i < n->n_mig; i++)
                owner[i] = -1;
        size_t k = 0;
        for (size_t i = 0; i < n_uids; i++) {
                struct sched_pod *p = uids[i] ? sched_map_get(&m->pods, uids[i], strlen(uids[i])) : NULL;
                if (!p || p->node != n)
                        continue;
                bool dup = false;
                for (size_t j = 0; j < k; j++)
                        dup |= out[j] == p;
                if (dup)
                        continue;
                apply(n, p, -1);
                mig_out(n, p, &mv[k], owner, (int)k);
                out[k++] = p;
        }
        int r = sched_fit_node_full(m, n, req, (enum cluster_policy)policy, ret);
        for (size_t j = 0; j < k; j++) {
                mig_back(n, out[j], &mv[j], owner, (int)j);
                apply(n, out[j], +1);
        }
        free(out);
        free(mv);
        free(owner);
        return r;
}

/* ---- what is recorded where (inspect) ---- */

void sched_pod_share(const struct sched_pod *p, const struct sched_node *n, unsigned g, uint64_t *ret_mem_mib,
                     unsigned *ret_core, bool *ret_whole) {
        uint64_t mem = 0;
        unsigned core = 0;
        bool whole = false;
        for (unsigned k = 0; k < p->n; k++) {
                const struct cluster_container_assign *a = &p->c[k].assign;
                if (g >= 64 || !(a->gpus >> g & 1))
                        continue;
                if (a->whole) {
                        whole = true;
                        core += 100;
                        mem += g < n->n_gpus ? n->gpu[g].mem_total_mib : 0;
                } else {
                        core += a->core;
                        mem += a->mem_mib;
                }
        }
        *ret_mem_mib = mem;
        *ret_core = core;
        *ret_whole = whole;
}

void sched_pod_request(const struct sched_pod *p, uint64_t *ret_mem_mib, unsigned *ret_core, unsigned *ret_whole) {
        uint64_t mem = 0;
        unsigned core = 0, whole = 0;
        for (unsigned k = 0; k < p->n; k++) {
                mem += p->c[k].mem_mib;
                core += p->c[k].core;
                whole += p->c[k].whole;
        }
        *ret_mem_mib = mem;
        *ret_core = core;
        *ret_whole = whole;
}

bool sched_pod_mig_only(const struct sched_pod *p, const struct sched_node *n) {
        for (unsigned k = 0; k < p->n; k++)
                if (p->c[k].core || p->c[k].mem_mib || (p->c[k].whole && !n->mig_single))
                        return false;
        return true;
}

/* Placed by an assignment on GPUs this node has, for every GPU container (or holding only MIG devices,
 * which the annotation records). */
static bool pod_recorded(const struct sched_pod *p, const struct sched_node *n) {
        if (sched_pod_mig_only(p, n))
                return true;
        if (p->inferred)
                return false;
        alloc_set_t have = n->n_gpus >= 64 ? ~0ULL : (1ULL << n->n_gpus) - 1;
        for (unsigned k = 0; k < p->n; k++) {
                const struct cluster_container_assign *a = &p->c[k].assign;
                if (!a->gpus || (a->gpus & ~have))
                        return false;
        }
        return true;
}

void sched_node_records_free(struct sched_node_records *r) {
        if (!r)
                return;
        for (unsigned g = 0; r->gpu && g < r->n_gpus; g++)
                free(r->gpu[g].pods);
        free(r->gpu);
        free(r->unplaced);
        *r = (struct sched_node_records){ 0 };
}

int sched_node_records(const struct sched_node *n, struct sched_node_records *ret) {
        struct sched_node_records r = { .n_gpus = n->n_gpus };
        /* the node's list is newest first: walk it into an array, oldest first */
        const struct sched_pod **order = calloc(n->n_pods ? n->n_pods : 1, sizeof *order);
        r.gpu = calloc(n->n_gpus ? n->n_gpus : 1, sizeof *r.gpu);
        r.unplaced = calloc(n->n_pods ? n->n_pods : 1, sizeof *r.unplaced);
        if (!order || !r.gpu || !r.unplaced)
                goto nomem;
        unsigned np = 0;
        for (const struct sched_pod *p = n->pods; p && np < n->n_pods; p = p->next_on_node)
                order[np++] = p;
        for (unsigned i = 0; i < np / 2; i++) {
                const struct sched_pod *t = order[i];
                order[i] = order[np - 1 - i];
                order[np - 1 - i] = t;
        }
        for (unsigned g = 0; g < n->n_gpus; g++) {
                r.gpu[g].pods = calloc(np ? np : 1, sizeof *r.gpu[g].pods);
                if (!r.gpu[g].pods)
                        goto nomem;
        }
        for (unsigned i = 0; i < np; i++) {
                const struct sched_pod *p = order[i];
                if (!p->bound)
                        continue; /* assigned to this node but not bound to it: pending */
                /* containers placed by an assignment count where it says, even when another
                 * container of the pod has no recorded GPU (the pod is then also unplaced) */
                if (!p->inferred)
                        for (unsigned g = 0; g < n->n_gpus; g++) {
                                uint64_t mem;
                                unsigned core;
                                bool whole;
                                bool on = false;
                                for (unsigned k = 0; k < p->n; k++)
                                        on |= (p->c[k].assign.gpus >> g & 1) != 0;
                                if (!on)
                                        continue;
                                sched_pod_share(p, n, g, &mem, &core, &whole);
                                r.gpu[g].mem_mib += mem;
                                r.gpu[g].core += core;
                                r.gpu[g].pods[r.gpu[g].n_pods++] = p;
                        }
                if (!pod_recorded(p, n))
                        r.unplaced[r.n_unplaced++] = p;
        }
        free(order);
        *ret = r;
        return 0;
nomem:
        free(order);
        sched_node_records_free(&r);
        return -ENOMEM;
}

struct topo_link sched_node_link(const struct sched_node *n, unsigned a, unsigned b) {
        if (!n->topo || a >= n->n_gpus || b >= n->n_gpus)
                return (struct topo_link){ TOPO_LEVEL_UNKNOWN, 0 };
        return n->topo->link[a * n->topo->n + b];
}
