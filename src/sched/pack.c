/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pack.c — the packing policies' node scores and GPU choice (see pack.h, docs/scheduler.md and
 * ../shared/specs/cluster-trace.md §3 for the published ones). Must never do I/O.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched/pack.h"
#include "util/util.h"

static bool model_ok(uint64_t models, int product);

/* ---- the request mix ---- */

static bool shape_eq(const struct sched_shape *a, const struct sched_shape *b, bool with_mem) {
        return a->cpu_milli == b->cpu_milli && a->num_gpu == b->num_gpu && a->gpu_milli == b->gpu_milli &&
               a->models == b->models && (!with_mem || a->mem_mib == b->mem_mib);
}

int sched_mix_add(struct sched_mix *mix, const struct sched_shape *s) {
        mix->total++;
        for (size_t i = 0; i < mix->n; i++)
                if (shape_eq(&mix->e[i].shape, s, true)) {
                        mix->e[i].count++;
                        return 0;
                }
        if (array_reserve(&mix->e, &mix->cap, mix->n + 1, 64) < 0) {
                mix->total--;
                return -ENOMEM;
        }
        mix->e[mix->n++] = (struct sched_mix_entry){ .shape = *s, .count = 1 };
        return 0;
}

void sched_mix_free(struct sched_mix *mix) {
        free(mix->e);
        *mix = (struct sched_mix){ 0 };
}

static int cmp_u64(uint64_t a, uint64_t b) {
        return a < b ? -1 : a > b;
}

/* By count, descending; then the larger (CPU, share, GPUs, models, memory) first. */
static int entry_cmp(const void *x, const void *y) {
        const struct sched_mix_entry *a = x, *b = y;
        int c = cmp_u64(b->count, a->count);
        if (!c)
                c = cmp_u64(b->shape.cpu_milli, a->shape.cpu_milli);
        if (!c)
                c = cmp_u64(b->shape.gpu_milli, a->shape.gpu_milli);
        if (!c)
                c = cmp_u64(b->shape.num_gpu, a->shape.num_gpu);
        if (!c)
                c = cmp_u64(b->shape.models, a->shape.models);
        if (!c)
                c = cmp_u64(b->shape.mem_mib, a->shape.mem_mib);
        return c;
}

void sched_mix_workload(const struct sched_mix *mix, double coverage, bool with_mem, struct sched_workload *ret) {
        ret->n = 0;
        ret->cpu_per_milli = ret->mem_per_milli = 0;
        if (!mix->n)
                return;
        double gpu = 0, cpu = 0, mem = 0;
        for (size_t i = 0; i < mix->n; i++) {
                const struct sched_mix_entry *x = &mix->e[i];
                if (!x->shape.num_gpu)
                        continue;
                gpu += (double)x->count * x->shape.num_gpu * x->shape.gpu_milli;
                cpu += (double)x->count * (double)x->shape.cpu_milli;
                mem += (double)x->count * (double)x->shape.mem_mib;
        }
        if (gpu > 0) {
                ret->cpu_per_milli = cpu / gpu;
                ret->mem_per_milli = mem / gpu;
        }
        struct sched_mix_entry *e = malloc(mix->n * sizeof *e);
        if (!e)
                return;
        size_t n = 0;
        for (size_t i = 0; i < mix->n; i++) { /* merged by the shape without memory unless with_mem */
                struct sched_mix_entry x = mix->e[i];
                if (!with_mem)
                        x.shape.mem_mib = 0;
                size_t j = 0;
                while (j < n && !shape_eq(&e[j].shape, &x.shape, true))
                        j++;
                if (j < n)
                        e[j].count += x.count;
                else
                        e[n++] = x;
        }
        qsort(e, n, sizeof *e, entry_cmp);
        uint64_t sum = 0, need = (uint64_t)ceil(coverage * (double)mix->total);
        for (size_t i = 0; i < n && ret->n < SCHED_WORKLOAD_MAX; i++) {
                ret->shape[ret->n] = e[i].shape;
                ret->p[ret->n++] = (double)e[i].count;
                sum += e[i].count;
                if (sum >= need)
                        break;
        }
        for (unsigned i = 0; i < ret->n; i++) {
                ret->p[i] /= (double)sum;
                ret->k[i] = 1;
        }
        free(e);
}

/* Below this fraction of the cluster's GPUs able to host it, a shape is scarce (frag's weight 1 / h; chosen on
 * seeds 42-44 of the twelve workloads among 0.25, 0.5, 0.75 and 1, docs/scheduler.md). */
#define FRAG_SCARCE_BELOW 0.5

void sched_workload_scarcity(struct sched_workload *w, const struct sched_model *m) {
        uint64_t all = 0, host[SCHED_WORKLOAD_MAX] = { 0 };
        size_t cur = 0;
        const struct sched_node *x;
        while ((x = sched_model_next_node(m, &cur))) {
                all += x->n_gpus;
                for (unsigned i = 0; i < w->n; i++) {
                        const struct sched_shape *s = &w->shape[i];
                        if (s->num_gpu && x->n_gpus >= s->num_gpu && model_ok(s->models, x->product) &&
                            (!x->cpu_milli || x->cpu_milli >= s->cpu_milli) &&
                            (!x->mem_mib || x->mem_mib >= s->mem_mib))
                                host[i] += x->n_gpus;
                }
        }
        for (unsigned i = 0; i < w->n; i++) {
                double h = all ? (double)host[i] / (double)all : 1;
                w->k[i] = w->shape[i].num_gpu && host[i] && h < FRAG_SCARCE_BELOW ? 1.0 / h : 1;
        }
}

struct sched_shape sched_pack_request_shape(const struct cluster_request *req, uint64_t cpu_milli, uint64_t mem_mib) {
        unsigned whole = 0, core = 0;
        for (unsigned k = 0; k < req->n && k < CLUSTER_CONTAINERS_MAX; k++) {
                whole += req->c[k].whole;
                core = MAX(core, req->c[k].core ? req->c[k].core : req->c[k].mem_mib ? 1u : 0u);
        }
        return (struct sched_shape){ .cpu_milli = cpu_milli,
                                     .mem_mib = mem_mib,
                                     .num_gpu = whole  ? whole
                                                : core ? 1
                                                       : 0,
                                     .gpu_milli = whole  ? 1000
                                                  : core ? MIN(core * 10, 1000u)
                                                         : 0 };
}

bool sched_mix_observe(struct sched_mix *mix, const struct sched_shape *s, bool with_mem, struct sched_workload *w) {
        (void)sched_mix_add(mix, s);
        uint64_t seen = mix->total;
        if (seen && (seen & (seen - 1)) != 0 && seen % 256 != 0)
                return false;
        sched_mix_workload(mix, 0.95, with_mem, w);
        return true;
}

/* ---- a node as the packing policies see it ---- */

struct view {
        uint64_t cpu_free, mem_free; /* UINT64_MAX: no limit known */
        unsigned n;
        int product;
        unsigned free[CLUSTER_GPUS_MAX]; /* milli */
};

static void view_of(const struct sched_node *n, struct view *v) {
        v->cpu_free = !n->cpu_milli ? UINT64_MAX : n->cpu_milli > n->cpu_used ? n->cpu_milli - n->cpu_used : 0;
        v->mem_free = !n->mem_mib ? UINT64_MAX : n->mem_mib > n->mem_used ? n->mem_mib - n->mem_used : 0;
        v->n = MIN(n->n_gpus, (unsigned)CLUSTER_GPUS_MAX);
        v->product = n->product;
        if (n->sum.valid) { /* the model's summary says the same (0 when held whole or unhealthy), nearer */
                for (unsigned i = 0; i < v->n; i++)
                        v->free[i] = 10u * n->sum.core_free[i];
                return;
        }
        for (unsigned i = 0; i < v->n; i++) {
                const struct sched_gpu *g = &n->gpu[i];
                v->free[i] = !g->healthy || g->whole ? 0 : g->core_used >= 100 ? 0 : 10u * (100u - g->core_used);
        }
}

static unsigned view_gpu_free(const struct view *v) {
        unsigned t = 0;
        for (unsigned i = 0; i < v->n; i++)
                t += v->free[i];
        return t;
}

static bool model_ok(uint64_t models, int product) {
        return !models || (product >= 0 && product < 64 && (models >> product & 1));
}

/*
 * The free GPU milli of a node that its free CPU and memory cannot feed: the GPU pods of w ask
 * cpu_per_milli CPU and mem_per_milli memory per milli-GPU, so free CPU cpu feeds at most cpu / cpu_per_milli
 * milli-GPU; what is free beyond what both feed is stranded (0 where a limit is not known). Only frag's F′ (strict)
 * counts it, FRAG_STRAND times.
 */
static double strand_of(const struct sched_workload *w, unsigned total, uint64_t cpu, uint64_t mem) {
        double feed = INFINITY;
        if (cpu != UINT64_MAX && w->cpu_per_milli > 0)
                feed = MIN(feed, (double)cpu / w->cpu_per_milli);
        if (mem != UINT64_MAX && w->mem_per_milli > 0)
                feed = MIN(feed, (double)mem / w->mem_per_milli);
        return (double)total > feed ? (double)total - feed : 0;
}

/* The weight of the GPU milli that a node's free CPU or memory cannot feed (strand_of) in frag's fragment:
 * chosen on seeds 42-44 among 0.1, 0.25, 0.5, 1, 2 and 4 (docs/scheduler.md; 0.5-4 within 0.05 point). */
#define FRAG_STRAND 2.0

/* F_n under w: per typical shape, the free GPU milli it cannot use (all of it when it cannot land here;
 * the GPUs too small for it when it can). strict (frag's F′): memory counts for landing too, and the free GPU
 * that the free CPU and memory cannot feed counts FRAG_STRAND times over (strand_of). */
static double frag_of(const struct sched_workload *w, const struct view *v, bool strict) {
        unsigned total = view_gpu_free(v);
        double f = 0;
        for (unsigned m = 0; m < w->n; m++) {
                const struct sched_shape *s = &w->shape[m];
                unsigned lost = total;
                if (s->num_gpu && model_ok(s->models, v->product) && v->cpu_free >= s->cpu_milli &&
                    (!strict || v->mem_free >= s->mem_mib)) {
                        unsigned fit = 0, small = 0;
                        for (unsigned i = 0; i < v->n; i++)
                                if (v->free[i] >= s->gpu_milli)
                                        fit++;
                                else
                                        small += v->free[i];
                        if (fit >= s->num_gpu)
                                lost = small;
                }
                f += (strict ? w->p[m] * w->k[m] : w->p[m]) * lost;
        }
        if (strict)
                f += FRAG_STRAND * strand_of(w, total, v->cpu_free, v->mem_free);
        return f;
}

/*
 * F_n before and after one placement without copying the view: per typical shape the node's count of GPUs
 * large enough and the free milli of the smaller ones (frag_base), which a placement changes by what it
 * does to the GPUs it takes (frag_after). Exactly frag_of's sum (the same integers, added in the same
 * order): the scores see the same numbers, at a fraction of the cost per node.
 */
struct frag_base {
        unsigned total;
        unsigned fit[SCHED_WORKLOAD_MAX], small[SCHED_WORKLOAD_MAX];
};

static double frag_base_of(const struct sched_workload *w, const struct view *v, bool strict, struct frag_base *b) {
        b->total = view_gpu_free(v);
        double f = 0;
        for (unsigned m = 0; m < w->n; m++) {
                const struct sched_shape *s = &w->shape[m];
                unsigned fit = 0, small = 0;
                if (s->num_gpu && model_ok(s->models, v->product)) {
                        for (unsigned i = 0; i < v->n; i++)
                                if (v->free[i] >= s->gpu_milli)
                                        fit++;
                                else
                                        small += v->free[i];
                }
                b->fit[m] = fit;
                b->small[m] = small;
                unsigned lost = b->total;
                if (s->num_gpu && model_ok(s->models, v->product) && v->cpu_free >= s->cpu_milli &&
                    (!strict || v->mem_free >= s->mem_mib) && fit >= s->num_gpu)
                        lost = small;
                f += (strict ? w->p[m] * w->k[m] : w->p[m]) * lost;
        }
        if (strict)
                f += FRAG_STRAND * strand_of(w, b->total, v->cpu_free, v->mem_free);
        return f;
}

/* F_n once s has landed (a share on GPU g; whole GPUs on the lowest fully free ones), from the base of v. */
static double frag_after(const struct sched_workload *w, const struct view *v, const struct frag_base *b,
                         const struct sched_shape *s, int g, bool strict) {
        uint64_t cpu = v->cpu_free == UINT64_MAX ? UINT64_MAX : v->cpu_free - MIN(v->cpu_free, s->cpu_milli);
        uint64_t mem = v->mem_free == UINT64_MAX ? UINT64_MAX : v->mem_free - MIN(v->mem_free, s->mem_mib);
        unsigned from = 0, to = 0, taken = 0; /* a share: GPU g goes from `from` to `to`; whole: `taken` GPUs */
        unsigned total = b->total;
        if (s->num_gpu && s->gpu_milli < 1000 && g >= 0) {
                from = v->free[g];
                to = from - MIN(from, s->gpu_milli);
                total -= from - to;
        } else if (s->num_gpu) {
                for (unsigned i = 0; i < v->n && taken < s->num_gpu; i++)
                        taken += v->free[i] == 1000;
                total -= 1000 * taken;
        }
        double f = 0;
        for (unsigned m = 0; m < w->n; m++) {
                const struct sched_shape *t = &w->shape[m];
                unsigned lost = total;
                if (t->num_gpu && model_ok(t->models, v->product) && cpu >= t->cpu_milli &&
                    (!strict || mem >= t->mem_mib)) {
                        unsigned gm = t->gpu_milli;
                        /* a whole GPU taken was large enough (gm <= 1000) and leaves 0, never counted small */
                        unsigned fit = b->fit[m] - taken - (from >= gm) + (to >= gm);
                        unsigned small = b->small[m] - (from < gm ? from : 0) + (to < gm ? to : 0);
                        if (fit >= t->num_gpu)
                                lost = small;
                }
                f += (strict ? w->p[m] * w->k[m] : w->p[m]) * lost;
        }
        if (strict)
                f += FRAG_STRAND * strand_of(w, total, cpu, mem);
        return f;
}

double sched_pack_frag(const struct sched_workload *w, const struct sched_node *n) {
        struct view v;
        view_of(n, &v);
        return frag_of(w, &v, false);
}

int sched_pack_kube_fit(const struct sched_node *n, const struct sched_shape *s) {
        if (n->cpu_milli && n->cpu_used + s->cpu_milli > n->cpu_milli)
                return -ENOSPC;
        if (n->mem_mib && n->mem_used + s->mem_mib > n->mem_mib)
                return -EMSGSIZE;
        if (s->num_gpu && !model_ok(s->models, n->product))
                return -ENXIO;
        return 0;
}

/* kube-scheduler 1.20's leastRequestedScore: 0 when over capacity (or none), integers. */
static int64_t least_requested(uint64_t requested, uint64_t capacity) {
        if (!capacity || requested > capacity)
                return 0;
        return (int64_t)((capacity - requested) * 100 / capacity);
}

double sched_pack_kube_score(const struct sched_node *n, const struct sched_shape *s) {
        if (!n->cpu_milli || !n->mem_mib)
                return 0;
        /* what the scoring counts: the node's non-zero requests plus the pod's (resource_allocation.go) */
        uint64_t cpu = n->cpu_nonzero + sched_nonzero_cpu(s->cpu_milli);
        uint64_t mem = n->mem_nonzero + sched_nonzero_mem(s->mem_mib);
        /* NodeResourcesLeastAllocated: per resource (capacity - requested) * 100 / capacity, weights 1 */
        int64_t least = (least_requested(cpu, n->cpu_milli) + least_requested(mem, n->mem_mib)) / 2;
        /* NodeResourcesBalancedAllocation: 0 when a fraction reaches 1, else (1 - |cpu − memory|) * 100 truncated */
        double cf = (double)cpu / (double)n->cpu_milli, mf = (double)mem / (double)n->mem_mib;
        int64_t balanced = cf >= 1 || mf >= 1 ? 0 : (int64_t)((1.0 - fabs(cf - mf)) * 100.0);
        return (double)(least + balanced);
}

bool sched_pack_policy(enum cluster_policy policy) {
        return policy >= CLUSTER_POLICY_RANDOM && policy < _CLUSTER_POLICY_MAX;
}

/* Was a GPU with g's free share tried before g? F depends on the free shares as a multiset, so a share on
 * either gives the same fragmentation: the first (the lowest index) stands for both. */
static bool tried_before(const struct view *v, unsigned g) {
        for (unsigned i = 0; i < g; i++)
                if (v->free[i] == v->free[g])
                        return true;
        return false;
}

/* ---- the published scores (cluster-trace.md §3) ---- */

static double norm_of(uint64_t v) {
        return v ? (double)v : 1.0;
}

static double score_bestfit(const struct sched_pack_ctx *c, const struct view *v, const struct sched_shape *s) {
        double cpu = v->cpu_free == UINT64_MAX ? (double)c->cpu_norm : (double)v->cpu_free;
        double r = (double)s->num_gpu * s->gpu_milli;
        double left = 0.5 * (cpu - (double)s->cpu_milli) / norm_of(c->cpu_norm) +
                      0.5 * ((double)view_gpu_free(v) - r) / norm_of(c->gpu_norm);
        return floor(100.0 * (1.0 - left));
}

static double score_dotprod(const struct sched_pack_ctx *c, const struct view *v, const struct sched_shape *s) {
        double cpu = v->cpu_free == UINT64_MAX ? (double)c->cpu_norm : (double)v->cpu_free;
        double cn = norm_of(c->cpu_norm), gn = norm_of(c->gpu_norm);
        double dot = cpu / cn * ((double)s->cpu_milli / cn) +
                     (double)view_gpu_free(v) / gn * ((double)s->num_gpu * s->gpu_milli / gn);
        return floor(100.0 * (1.0 - dot / 2.0));
}

/* The class of a GPU request: 0 CPU only, 1 a share, 2 + k whole GPUs. */
static unsigned class_of(unsigned whole, bool share) {
        return whole ? 2 + whole : share ? 1 : 0;
}

static double score_clustering(const struct sched_pack_ctx *c, const struct sched_node *n, const struct view *v,
                               const struct sched_shape *s) {
        if (!s->num_gpu)
                return 0;
        unsigned mine = class_of(s->gpu_milli >= 1000 ? s->num_gpu : 0, s->gpu_milli < 1000);
        bool any = false, same = false, other = false;
        for (const struct sched_pod *p = n->pods; p; p = p->next_on_node) {
                unsigned whole = 0;
                bool share = false;
                for (unsigned k = 0; k < p->n; k++) {
                        whole += p->c[k].whole;
                        share |= !p->c[k].whole && p->c[k].core;
                }
                unsigned cl = class_of(whole, share);
                if (!cl)
                        continue;
                any = true;
                same |= cl == mine;
                other |= cl != mine;
        }
        uint64_t gn = c->gpu_norm ? c->gpu_norm : 1;
        uint64_t gl = MIN((uint64_t)view_gpu_free(v), gn);
        uint64_t q = 25 * (gn - gl) / gn; /* integer arithmetic, as the published score */
        double u = (double)q;
        return !any ? 25 + u : same && !other ? 75 + u : same ? 50 + u : u;
}

static double score_packing(const struct view *v, const struct sched_shape *s) {
        if (!s->num_gpu)
                return 0;
        unsigned f = 0;
        for (unsigned i = 0; i < v->n; i++)
                f += v->free[i] == 1000;
        if (f == v->n)
                return (double)MAX(33 - (int)f, (int)f);
        if (s->gpu_milli >= 1000) /* whole GPUs take fully free ones */
                return (double)MAX(50 - (int)s->num_gpu, 33);
        int best = -1;
        for (unsigned i = 0; i < v->n; i++)
                if (v->free[i] >= s->gpu_milli && (best < 0 || v->free[i] < v->free[best]))
                        best = (int)i;
        if (best < 0)
                return 0;
        if (v->free[best] == 1000)
                return 49;
        return (double)MAX(100 - (int)(v->free[best] * 100 / 1000) / 10, 50);
}

/* FGD (§3.6): the decrease of F_n through a sigmoid, as an integer; for a share the best GPU. */
static double score_fgd(const struct sched_pack_ctx *c, const struct view *v, const struct sched_shape *s,
                        int *ret_gpu) {
        struct frag_base b;
        double before = frag_base_of(c->w, v, false, &b);
        if (!s->num_gpu || s->gpu_milli >= 1000)
                return floor(100.0 / (1.0 + exp(-(before - frag_after(c->w, v, &b, s, -1, false)) / 1000.0)));
        double best = -1;
        for (unsigned g = 0; g < v->n; g++) {
                if (v->free[g] < s->gpu_milli || tried_before(v, g))
                        continue;
                double sc = floor(100.0 / (1.0 + exp(-(before - frag_after(c->w, v, &b, s, (int)g, false)) / 1000.0)));
                if (sc > best) {
                        best = sc;
                        *ret_gpu = (int)g;
                }
        }
        return best < 0 ? 0 : best;
}

/* ---- frag: our own (docs/scheduler.md) ---- */

/* frag's fragment step (milli-GPU): increases of F_n within one step tie, and the node rank decides. */
#define FRAG_STEP 40.0
/* What a share gains for landing on a GPU already shared (in steps): fresh GPUs stay whole for whole pods. */
#define FRAG_SHARED_BONUS 5.0
/* What a CPU-only pod loses (in steps) on a node whose GPUs are all free: an untouched node is the only place
 * for the pods that need a whole node's GPUs, or its CPU (chosen on seeds 42-44 among 5, 20, 50 and 1000). */
#define FRAG_UNTOUCHED 50.0
/* The most a CPU-only pod's tie-break adds (below one step). */
#define FRAG_CPU_TIE 0.99

/*
 * The fragment increase in FRAG_STEP steps (negated: higher is better), not through FGD's sigmoid, whose
 * steps widen away from 0; within the node the exact increase picks the GPU, the fullest on a tie; a share
 * on an already shared GPU gains FRAG_SHARED_BONUS. A CPU-only pod loses FRAG_UNTOUCHED on a node whose GPUs
 * are all free, and breaks ties within its step (less than one step: the fragment still decides) towards the
 * node with the least free GPU: the CPU it takes there strands no GPU, where on a node with free GPUs it may
 * leave too little CPU for the next GPU pod.
 */
static double score_frag(const struct sched_pack_ctx *c, const struct view *v, const struct sched_shape *s,
                         int *ret_gpu) {
        struct frag_base b; /* memory counted for landing: a GPU on a node without the memory for the next pod
                             * is as stranded as one without the CPU */
        double before = frag_base_of(c->w, v, true, &b);
        if (!s->num_gpu)
                return -floor((frag_after(c->w, v, &b, s, -1, true) - before) / FRAG_STEP) -
                       (v->n && b.total == 1000u * v->n ? FRAG_UNTOUCHED : 0) +
                       FRAG_CPU_TIE * (1.0 - (double)b.total / norm_of(c->gpu_norm));
        if (s->gpu_milli >= 1000)
                return -floor((frag_after(c->w, v, &b, s, -1, true) - before) / FRAG_STEP);
        double best = INFINITY;
        for (unsigned g = 0; g < v->n; g++) {
                if (v->free[g] < s->gpu_milli || tried_before(v, g))
                        continue;
                double inc = frag_after(c->w, v, &b, s, (int)g, true) - before;
                if (inc < best - 1e-9 || (inc < best + 1e-9 && *ret_gpu >= 0 && v->free[g] < v->free[*ret_gpu])) {
                        best = inc;
                        *ret_gpu = (int)g;
                }
        }
        if (*ret_gpu < 0)
                return 0;
        return -floor(best / FRAG_STEP) + (v->free[*ret_gpu] < 1000 ? FRAG_SHARED_BONUS : 0);
}

int sched_pack_share_gpu(const struct sched_pack_ctx *ctx, const unsigned *free_milli, unsigned n, int product,
                         const struct sched_shape *s, enum cluster_policy policy) {
        if (!ctx->w || s->num_gpu != 1 || s->gpu_milli >= 1000 ||
            (policy != CLUSTER_POLICY_FGD && policy != CLUSTER_POLICY_FRAG))
                return -1;
        struct view v = { .cpu_free = UINT64_MAX,
                          .mem_free = UINT64_MAX,
                          .n = MIN(n, (unsigned)CLUSTER_GPUS_MAX),
                          .product = product };
        for (unsigned i = 0; i < v.n; i++)
                v.free[i] = MIN(free_milli[i], 1000u);
        struct sched_shape one = { .num_gpu = 1, .gpu_milli = MAX(s->gpu_milli, 1u), .models = s->models };
        int g = -1;
        (void)(policy == CLUSTER_POLICY_FGD ? score_fgd(ctx, &v, &one, &g) : score_frag(ctx, &v, &one, &g));
        return g;
}

unsigned sched_pack_share_free(const struct sched_node *n, unsigned core, uint64_t mem_mib, unsigned *free_milli) {
        unsigned k = MIN(n->n_gpus, (unsigned)CLUSTER_GPUS_MAX);
        for (unsigned i = 0; i < k; i++) {
                const struct sched_gpu *g = &n->gpu[i];
                unsigned cf = g->core_used >= 100 ? 0 : 100u - g->core_used;
                uint64_t mf = g->mem_total_mib > g->mem_used_mib ? g->mem_total_mib - g->mem_used_mib : 0;
                bool ok = g->healthy && !g->whole && cf >= core && (!mem_mib || mf >= mem_mib);
                free_milli[i] = ok ? 10u * cf : 0;
        }
        return k;
}

double sched_pack_score(const struct sched_pack_ctx *ctx, const struct sched_node *n, const struct sched_shape *s,
                        enum cluster_policy policy, int *ret_gpu) {
        *ret_gpu = -1;
        struct view v;
        view_of(n, &v);
        switch (policy) {
                case CLUSTER_POLICY_DOTPROD: return score_dotprod(ctx, &v, s);
                case CLUSTER_POLICY_GPUCLUSTERING: return score_clustering(ctx, n, &v, s);
                case CLUSTER_POLICY_GPUPACKING: return score_packing(&v, s);
                case CLUSTER_POLICY_BESTFIT: return score_bestfit(ctx, &v, s);
                case CLUSTER_POLICY_FGD: return ctx->w ? score_fgd(ctx, &v, s, ret_gpu) : 0;
                case CLUSTER_POLICY_FRAG: return ctx->w ? score_frag(ctx, &v, s, ret_gpu) : 0;
                default: return 0;
        }
}

double sched_pack_score_memo(const struct sched_pack_ctx *ctx, const struct sched_node *n, const struct sched_shape *s,
                             enum cluster_policy policy, struct sched_pack_memo *memo, int *ret_gpu) {
        if (memo->node == n && memo->gen == n->generation && memo->version == ctx->version && memo->policy == policy &&
            shape_eq(&memo->shape, s, true)) {
                *ret_gpu = memo->gpu;
                return memo->score;
        }
        double sc = sched_pack_score(ctx, n, s, policy, ret_gpu);
        *memo = (struct sched_pack_memo){ .node = n,
                                          .gen = n->generation,
                                          .version = ctx->version,
                                          .shape = *s,
                                          .policy = policy,
                                          .score = sc,
                                          .gpu = *ret_gpu };
        return sc;
}
