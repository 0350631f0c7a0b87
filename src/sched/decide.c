/* SPDX-License-Identifier: Apache-2.0 */
/*
 * decide.c — filter, prioritize and bind decisions on the cluster model (see decide.h and
 * docs/scheduler.md). Must never do I/O or keep state outside the model's memo.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/decide.h"
#include "util/util.h"

char *sched_format_mib(uint64_t mib, char *buf, size_t len) {
        if (mib >= 1024) {
                if (mib % 1024 == 0)
                        snprintf(buf, len, "%llu GiB", (unsigned long long)(mib / 1024));
                else
                        snprintf(buf, len, "%.1f GiB", (double)mib / 1024.0);
        } else {
                snprintf(buf, len, "%llu MiB", (unsigned long long)mib);
        }
        return buf;
}

/* What one GPU has left for shares. */
struct gpu_room {
        bool usable;        /* healthy and not held whole */
        unsigned core_free; /* percent, 0..100 */
        uint64_t mem_free_mib;
        uint64_t mem_total_mib;
};

/* The node's GPUs as the placement sees them while containers are added one by one. */
struct room {
        unsigned n;
        struct gpu_room share[CLUSTER_GPUS_MAX];
        alloc_set_t whole_free; /* healthy, no sharer, no holder */
        alloc_set_t healthy;
        unsigned n_shared, n_held, n_unhealthy; /* n_unhealthy: replicated GPUs not counted */
        unsigned n_replicated;                  /* advertised as replicas (time-slicing, MPS): never whole nor shared */
        int first_replicated;                   /* -1 none */
        uint8_t first_sharing;                  /* its enum sched_sharing */
};

static void room_from_node(const struct sched_node *n, bool empty, struct room *r) {
        r->n = n->n_gpus;
        r->whole_free = r->healthy = 0;
        r->n_shared = r->n_held = r->n_unhealthy = r->n_replicated = 0;
        r->first_replicated = -1;
        r->first_sharing = SCHED_SHARING_NONE;
        for (unsigned i = 0; i < n->n_gpus; i++) {
                const struct sched_gpu *g = &n->gpu[i];
                uint32_t mu = empty ? 0 : g->mem_used_mib;
                unsigned cu = empty ? 0 : g->core_used;
                bool held = !empty && g->whole > 0;
                bool shared = !empty && g->sharers > 0;
                r->share[i] = (struct gpu_room){
                        .usable = g->healthy && !held,
                        .core_free = cu >= 100 ? 0 : 100 - cu,
                        .mem_free_mib = g->mem_total_mib > mu ? g->mem_total_mib - mu : 0,
                        .mem_total_mib = g->mem_total_mib,
                };
                if (g->healthy)
                        r->healthy |= 1ULL << i;
                else if (g->sharing) {
                        if (!r->n_replicated++) {
                                r->first_replicated = (int)i;
                                r->first_sharing = g->sharing;
                        }
                } else
                        r->n_unhealthy++;
                if (held)
                        r->n_held++;
                else if (shared)
                        r->n_shared++;
                if (g->healthy && !held && !shared)
                        r->whole_free |= 1ULL << i;
        }
}

/* ", GPU 0 is time-sliced (replicas)" / ", GPU 0 and 2 more MPS-shared (replicas)"; "" with none. */
static void replicated_text(const struct room *r, char *buf, size_t len) {
        buf[0] = '\0';
        if (!r->n_replicated)
                return;
        const char *mode = r->first_sharing == SCHED_SHARING_MPS ? "MPS-shared" : "time-sliced";
        unsigned first = (unsigned)r->first_replicated & 63, more = (r->n_replicated - 1) & 63;
        if (!more)
                snprintf(buf, len, ", GPU %u is %s (replicas)", first, mode);
        else
                snprintf(buf, len, ", GPU %u and %u more %s (replicas)", first, more, mode);
}

static void share_reason(const struct room *r, const struct cluster_container_req *c, unsigned placed, char *buf,
                         size_t len) {
        uint64_t best_mem = 0, best_mem_any = 0;
        unsigned best_core = 0, usable = 0;
        for (unsigned i = 0; i < r->n; i++) {
                const struct gpu_room *g = &r->share[i];
                if (!g->usable)
                        continue;
                usable++;
                if (g->core_free >= c->core && g->mem_free_mib > best_mem)
                        best_mem = g->mem_free_mib;
                if (g->mem_free_mib > best_mem_any)
                        best_mem_any = g->mem_free_mib;
                if (g->core_free > best_core)
                        best_core = g->core_free;
        }
        char who[96], a[24], b[24], rep[48];
        replicated_text(r, rep, sizeof rep);
        if (placed)
                snprintf(who, sizeof who, "container %s (after placing %u other container%s)",
                         c->name[0] ? c->name : "?", placed, placed == 1 ? "" : "s");
        else
                snprintf(who, sizeof who, "container %s", c->name[0] ? c->name : "?");
        if (usable == 0 && rep[0]) /* the replicated GPU named: there is no room for the container's name too */
                snprintf(buf, len, "no GPU can take a share: all %u are held whole, unhealthy or replicated%s", r->n,
                         rep);
        else if (usable == 0)
                snprintf(buf, len, "no GPU can take a share: all %u are held whole or unhealthy; %s needs one", r->n,
                         who);
        else if (best_core < c->core)
                snprintf(buf, len, "most free compute on one GPU is %u %%, %s needs %u %%", best_core, who, c->core);
        else if (best_mem_any < c->mem_mib)
                snprintf(buf, len, "largest free GPU has %s, %s needs %s", sched_format_mib(best_mem_any, a, sizeof a),
                         who, sched_format_mib(c->mem_mib, b, sizeof b));
        else
                snprintf(buf, len, "no GPU has both %u %% compute and %s free (most memory with that compute: %s); %s",
                         c->core, sched_format_mib(c->mem_mib, a, sizeof a), sched_format_mib(best_mem, b, sizeof b),
                         who);
}

/* Text appended as snprintf(buf, len, ...) writes it: cut at len - 1 bytes, NUL-terminated (len > 0). */
struct text {
        char *p;
        size_t len, at;
};

static void text_puts(struct text *t, const char *s) {
        size_t l = strlen(s), room = t->at + 1 < t->len ? t->len - 1 - t->at : 0;
        memcpy(t->p + t->at, s, MIN(l, room));
        t->at += MIN(l, room);
}

static void text_uint(struct text *t, unsigned v) {
        char d[16];
        size_t i = sizeof d - 1;
        d[i] = '\0';
        do
                d[--i] = (char)('0' + v % 10);
        while ((v /= 10) > 0);
        text_puts(t, d + i);
}

static void text_end(struct text *t) {
        if (t->len)
                t->p[t->at] = '\0';
}

static void whole_reason(const struct room *r, const struct cluster_container_req *c, unsigned placed, int err,
                         char *buf, size_t len) {
        unsigned free_n = (unsigned)__builtin_popcountll(r->whole_free);
        const char *name = c->name[0] ? c->name : "?";
        char rep[48];
        replicated_text(r, rep, sizeof rep);
        if (err == -ENOSPC || free_n < c->whole) {
                /* "%u of %u GPUs free whole (%u shared, %u held, %u unhealthy%s%s), container %s needs %u", by hand:
                 * every node a whole request does not fit says it, and snprintf was a quarter of such a filter */
                struct text t = { buf, len, 0 };
                text_uint(&t, free_n);
                text_puts(&t, " of ");
                text_uint(&t, r->n);
                text_puts(&t, " GPUs free whole (");
                text_uint(&t, r->n_shared);
                text_puts(&t, " shared, ");
                text_uint(&t, r->n_held);
                text_puts(&t, " held, ");
                text_uint(&t, r->n_unhealthy);
                text_puts(&t, " unhealthy");
                text_puts(&t, rep);
                text_puts(&t, placed ? ", after placing other containers" : "");
                text_puts(&t, "), container ");
                text_puts(&t, name);
                text_puts(&t, " needs ");
                text_uint(&t, c->whole);
                text_end(&t);
        } else
                snprintf(buf, len, "the allocator found no set of %u GPUs for container %s (error %d)", c->whole, name,
                         err);
}

/*
 * The GPU for one share, by the project's fractional placement (alloc_pick_fraction): memory in MiB
 * is the kind placed (compute when the share asks no memory), and only GPUs where the other half
 * fits too are usable, so compute and memory always land on one GPU. -ENOSPC when none.
 */
static int pick_share(const struct room *r, const struct cluster_container_req *c, enum cluster_policy policy) {
        struct alloc_frac_request q; /* only the first n GPUs are read: no zeroing of the rest */
        q.kind = c->mem_mib ? ALLOC_FRAC_MEM : ALLOC_FRAC_CORE;
        q.policy = policy == CLUSTER_POLICY_SPREAD ? ALLOC_FRAC_SPREAD : ALLOC_FRAC_BINPACK;
        q.size = c->mem_mib ? c->mem_mib : c->core;
        q.partner = -1;
        q.pair = false;
        q.expect = 0;
        q.terse = true;
        q.has_prefer = false;
        q.n = r->n;
        for (unsigned i = 0; i < r->n; i++) {
                const struct gpu_room *g = &r->share[i];
                uint64_t mt = MIN(g->mem_total_mib, (uint64_t)UINT32_MAX), mf = MIN(g->mem_free_mib, mt);
                q.gpu[i] = (struct alloc_frac_gpu){
                        .usable = g->usable && g->core_free >= c->core && g->mem_free_mib >= c->mem_mib,
                        .total = { 100, (unsigned)mt },
                        .used = { 100 - MIN(g->core_free, 100u), (unsigned)(mt - mf) },
                        .avail = c->mem_mib ? (unsigned)mf : MIN(g->core_free, 100u),
                };
        }
        struct alloc_frac_decision d;
        int r2 = alloc_pick_fraction(&q, &d);
        return r2 < 0 ? -ENOSPC : d.gpu;
}

/* The order containers are placed in (both paths): whole requests first, largest first; then shares by
 * memory, then compute; equal ones in their order in the pod. */
static void placement_order(const struct cluster_request *req, unsigned *order) {
        for (unsigned k = 0; k < req->n; k++)
                order[k] = k;
        for (unsigned i = 1; i < req->n; i++) {
                unsigned x = order[i], j = i;
                while (j > 0) {
                        const struct cluster_container_req *a = &req->c[x], *b = &req->c[order[j - 1]];
                        bool before = a->whole != b->whole       ? a->whole > b->whole
                                      : a->mem_mib != b->mem_mib ? a->mem_mib > b->mem_mib
                                                                 : a->core > b->core;
                        if (!before)
                                break;
                        order[j] = order[j - 1];
                        j--;
                }
                order[j] = x;
        }
}

/* Place every container on r; 0 or -ENOSPC with the reason. */
static int place_all(struct sched_model *m, const struct sched_node *n, const struct cluster_request *req,
                     enum cluster_policy policy, struct room *r, struct sched_fit *ret) {
        unsigned order[CLUSTER_CONTAINERS_MAX];
        placement_order(req, order);
        ret->assign = (struct cluster_assignment){ .n = req->n };
        ret->ring_bw = 0;
        ret->whole_count = 0;
        for (unsigned i = 0; i < req->n; i++) {
                const struct cluster_container_req *c = &req->c[order[i]];
                struct cluster_container_assign *a = &ret->assign.c[order[i]];
                if (c->whole) {
                        alloc_set_t set = 0;
                        unsigned bw = 0;
                        int e = sched_model_pick_whole(m, n, r->whole_free, c->whole, &set, &bw);
                        if (e < 0) {
                                whole_reason(r, c, i, e, ret->reason, sizeof ret->reason);
                                return -ENOSPC;
                        }
                        *a = (struct cluster_container_assign){ .gpus = set, .whole = true };
                        if (c->whole > ret->whole_count) {
                                ret->whole_count = c->whole;
                                ret->ring_bw = bw;
                        }
                        r->whole_free &= ~set;
                        for (alloc_set_t s = set; s; s &= s - 1)
                                r->share[__builtin_ctzll(s)].usable = false;
                } else if (c->core || c->mem_mib) {
                        int g = pick_share(r, c, policy);
                        if (g < 0) {
                                share_reason(r, c, i, ret->reason, sizeof ret->reason);
                                return -ENOSPC;
                        }
                        *a = (struct cluster_container_assign){ .gpus = 1ULL << g,
                                                                .core = c->core,
                                                                .mem_mib = c->mem_mib };
                        r->share[g].core_free -= c->core;
                        r->share[g].mem_free_mib -= c->mem_mib;
                        r->whole_free &= ~(1ULL << g);
                }
        }
        return 0;
}

static bool request_valid(const struct cluster_request *req) {
        if (req->n > CLUSTER_CONTAINERS_MAX)
                return false;
        for (unsigned k = 0; k < req->n; k++) {
                const struct cluster_container_req *c = &req->c[k];
                if (c->core > 100 || c->whole > CLUSTER_GPUS_MAX || (c->whole && (c->core || c->mem_mib)))
                        return false;
        }
        return true;
}

/* The pack (0..1) from how full the node is and how full the GPUs the shares went to are after the
 * placement; free_of gives GPU g's free memory and compute then (from either path's room). */
static double pack_of(const struct sched_node *n, const struct sched_fit *f, double node_full, double mem_full,
                      const void *room, void (*free_of)(const void *room, unsigned g, uint64_t *mem, unsigned *core)) {
        double gpu_full = 0;
        unsigned shares = 0;
        for (unsigned k = 0; k < f->assign.n; k++) {
                const struct cluster_container_assign *a = &f->assign.c[k];
                if (a->whole || !a->gpus)
                        continue;
                unsigned g = (unsigned)__builtin_ctzll(a->gpus), core;
                uint64_t mem;
                free_of(room, g, &mem, &core);
                double tot = n->gpu[g].mem_total_mib;
                double mf = tot > 0 ? 1.0 - (double)mem / tot : 0;
                double cf = 1.0 - core / 100.0;
                gpu_full += mf > cf ? mf : cf;
                shares++;
        }
        if (!shares)
                return 0.5 * node_full + 0.5 * mem_full;
        return 0.5 * (gpu_full / shares) + 0.25 * node_full + 0.25 * mem_full;
}

static void room_free_of(const void *room, unsigned g, uint64_t *mem, unsigned *core) {
        const struct room *r = room;
        *mem = r->share[g].mem_free_mib;
        *core = r->share[g].core_free;
}

/* How full the node is after the placement (0..1) and how full the GPUs the shares went to are. */
static double pack_after(const struct sched_node *n, const struct room *after, const struct sched_fit *f) {
        double total = 0, free_mem = 0;
        unsigned healthy = 0, whole_free = (unsigned)__builtin_popcountll(after->whole_free);
        for (unsigned i = 0; i < n->n_gpus; i++) {
                if (!n->gpu[i].healthy)
                        continue;
                healthy++;
                total += n->gpu[i].mem_total_mib;
                free_mem += after->share[i].usable ? (double)after->share[i].mem_free_mib : 0;
        }
        if (healthy == 0)
                return 1;
        double node_full = 1.0 - (double)whole_free / healthy;
        double mem_full = total > 0 ? 1.0 - free_mem / total : node_full;
        return pack_of(n, f, node_full, mem_full, after, room_free_of);
}

/*
 * The fast path: a pod on a node of at most 8 GPUs, decided from the node's summary (model.h) without
 * the room, the fractional placement's request or the reasons: the containers are placed in the full
 * path's order on a copy of the summary's free compute, memory and free-whole set. It answers only
 * FIT — the same GPUs and the same numbers as the full path, which the unit test
 * test_fast_path_matches_full checks on random clusters, one- and two-container pods; anything else
 * (a failure, whose reason needs the full picture) returns false and the full path decides.
 */
struct fast_room {
        uint8_t core_free[SCHED_NODE_INLINE_GPUS];
        uint32_t mem_free[SCHED_NODE_INLINE_GPUS];
        alloc_set_t whole_free, share_ok;
        uint64_t share_mem_free;
};

/* One share on the fast room: alloc_pick_fraction without a partner or pair room — the policy's best GPU
 * among those with both halves free, by the placed kind's free IDs (memory, or compute when no memory is
 * asked); ties to the lowest index. -1 when none. */
static int fast_share(struct fast_room *r, const struct cluster_container_req *c, enum cluster_policy policy) {
        int best = -1;
        unsigned best_avail = 0;
        for (alloc_set_t x = r->share_ok; x; x &= x - 1) {
                unsigned i = (unsigned)__builtin_ctzll(x);
                if (r->core_free[i] < c->core || r->mem_free[i] < c->mem_mib)
                        continue;
                unsigned avail = c->mem_mib ? r->mem_free[i] : r->core_free[i];
                if (best < 0 || (policy == CLUSTER_POLICY_SPREAD ? avail > best_avail : avail < best_avail)) {
                        best = (int)i;
                        best_avail = avail;
                }
        }
        if (best >= 0) {
                r->core_free[best] = (uint8_t)(r->core_free[best] - c->core);
                r->mem_free[best] -= c->mem_mib;
                r->share_mem_free -= c->mem_mib;
                r->whole_free &= ~(1ULL << best);
        }
        return best;
}

/* k whole GPUs on the fast room (the memoised allocator pick). false when they do not fit. */
static bool fast_whole(struct sched_model *m, const struct sched_node *n, struct fast_room *r,
                       const struct cluster_container_req *c, struct cluster_container_assign *a, unsigned *bw) {
        alloc_set_t set;
        if ((unsigned)__builtin_popcountll(r->whole_free) < c->whole ||
            sched_model_pick_whole(m, n, r->whole_free, c->whole, &set, bw) < 0)
                return false;
        for (alloc_set_t x = set; x; x &= x - 1)
                r->share_mem_free -= r->mem_free[__builtin_ctzll(x)];
        r->whole_free &= ~set;
        r->share_ok &= ~set;
        *a = (struct cluster_container_assign){ .gpus = set, .whole = true };
        return true;
}

static void fast_free_of(const void *room, unsigned g, uint64_t *mem, unsigned *core) {
        const struct fast_room *r = room;
        *mem = r->mem_free[g];
        *core = r->core_free[g];
}

/* pack_after over the fast room: the same sums in the same order, so the same double. */
static double fast_pack(const struct sched_node *n, const struct fast_room *r, const struct sched_fit *f) {
        const struct sched_node_sum *u = &n->sum;
        double total = (double)u->healthy_mem, free_mem = (double)r->share_mem_free;
        double node_full = 1.0 - (double)(unsigned)__builtin_popcountll(r->whole_free) / u->n_healthy;
        double mem_full = total > 0 ? 1.0 - free_mem / total : node_full;
        return pack_of(n, f, node_full, mem_full, r, fast_free_of);
}

static bool fit_fast(struct sched_model *m, const struct sched_node *n, const struct cluster_request *req,
                     enum cluster_policy policy, struct sched_fit *ret) {
        const struct sched_node_sum *u = &n->sum;
        if (!u->valid || !u->n_healthy)
                return false;
        struct fast_room r = { .whole_free = u->whole_free,
                               .share_ok = u->share_ok,
                               .share_mem_free = u->share_mem_free };
        memcpy(r.core_free, u->core_free, sizeof r.core_free);
        memcpy(r.mem_free, u->mem_free, sizeof r.mem_free);
        unsigned order[CLUSTER_CONTAINERS_MAX];
        placement_order(req, order);
        ret->assign.n = req->n;
        for (unsigned i = 0; i < req->n; i++) {
                const struct cluster_container_req *c = &req->c[order[i]];
                struct cluster_container_assign *a = &ret->assign.c[order[i]];
                *a = (struct cluster_container_assign){ 0 };
                if (c->whole) {
                        unsigned bw = 0;
                        if (!fast_whole(m, n, &r, c, a, &bw))
                                return false;
                        if (c->whole > ret->whole_count) {
                                ret->whole_count = c->whole;
                                ret->ring_bw = bw;
                        }
                } else if (c->core || c->mem_mib) {
                        if (c->core > u->max_share_core || c->mem_mib > u->max_share_mem)
                                return false;
                        int g = fast_share(&r, c, policy);
                        if (g < 0)
                                return false;
                        *a = (struct cluster_container_assign){ .gpus = 1ULL << g,
                                                                .core = c->core,
                                                                .mem_mib = c->mem_mib };
                }
        }
        ret->pack = fast_pack(n, &r, ret);
        ret->verdict = SCHED_FIT;
        return true;
}

/* ---- MIG devices, by counts ---- */

/* Does MIG device d serve profile ("" = any: a `single` node's nvidia.com/gpu)? */
static bool mig_serves(const struct sched_mig *d, const char *profile) {
        return !profile[0] || streq(d->profile, profile);
}

/* What pod p on n still waits for of profile: what it asks, less the devices the annotation shows it
 * holding (a pod our bind placed a moment ago holds none yet). */
static unsigned mig_waiting(const struct sched_node *n, const struct sched_pod *p, const char *profile) {
        unsigned asked = 0;
        if (!profile[0]) /* `single`: its whole GPUs are MIG devices */
                for (unsigned k = 0; k < p->n; k++)
                        asked += p->c[k].whole;
        else
                for (unsigned k = 0; k < p->n_mig; k++)
                        asked += streq(p->mig[k].profile, profile) ? p->mig[k].count : 0;
        if (!asked)
                return 0;
        char who[128];
        cluster_mig_holder(p->ns, p->name, who, sizeof who);
        unsigned held = 0;
        for (unsigned i = 0; i < n->n_mig; i++)
                held += n->mig[i].holder[0] && mig_serves(&n->mig[i], profile) && streq(n->mig[i].holder, who);
        return asked > held ? asked - held : 0;
}

/*
 * k devices out of the free ones per parent GPU, taken as the node agent's preferred allocation does:
 * all from one parent that has them (the one with the fewest free), else from the parents with the
 * most free first. Returns whether one parent sufficed; takes what there is when there are fewer.
 */
static bool mig_take(unsigned *free_by_gpu, unsigned n_gpus, unsigned k) {
        int best = -1;
        for (unsigned g = 0; g < n_gpus; g++)
                if (free_by_gpu[g] >= k && (best < 0 || free_by_gpu[g] < free_by_gpu[best]))
                        best = (int)g;
        if (best >= 0) {
                free_by_gpu[best] -= k;
                return true;
        }
        while (k > 0) {
                unsigned most = 0;
                for (unsigned g = 1; g < n_gpus; g++)
                        if (free_by_gpu[g] > free_by_gpu[most])
                                most = g;
                if (!n_gpus || !free_by_gpu[most])
                        break;
                unsigned t = MIN(k, free_by_gpu[most]);
                free_by_gpu[most] -= t;
                k -= t;
        }
        return false;
}

/* The node's devices of one profile: healthy ones, free ones per parent after what the pods on the node
 * still wait for, held ones and the awaited count. */
struct mig_count {
        unsigned free_by_gpu[CLUSTER_GPUS_MAX];
        unsigned healthy, held, waiting, free;
};

static void mig_count(const struct sched_node *n, const char *profile, struct mig_count *c) {
        memset(c, 0, sizeof *c);
        unsigned n_gpus = MIN(n->n_gpus, (unsigned)CLUSTER_GPUS_MAX);
        for (unsigned i = 0; i < n->n_mig; i++) {
                const struct sched_mig *d = &n->mig[i];
                if (!mig_serves(d, profile) || !d->healthy || d->gpu >= n_gpus)
                        continue;
                c->healthy++;
                if (d->holder[0])
                        c->held++;
                else
                        c->free_by_gpu[d->gpu]++;
        }
        for (const struct sched_pod *p = n->pods; p; p = p->next_on_node) {
                unsigned w = mig_waiting(n, p, profile);
                c->waiting += w;
                if (w)
                        (void)mig_take(c->free_by_gpu, n_gpus, w);
        }
        for (unsigned g = 0; g < n_gpus; g++)
                c->free += c->free_by_gpu[g];
}

/*
 * The pod's MIG devices on n by counts: 0 (ret->mig_parents and *ret_pack, how full the asked profiles
 * are after it, set), -ENOSPC (taken: NO_ROOM) or -ENODEV (never: too few healthy devices, or a profile
 * a `single` node does not serve), with the reason.
 */
static int fit_mig(const struct sched_node *n, const struct cluster_request *req, struct sched_fit *ret,
                   double *ret_pack, char *reason, size_t len) {
        double full = 0;
        unsigned asked = 0;
        bool split = false;
        for (unsigned k = 0; k < req->n_mig && k < CLUSTER_MIG_REQ_MAX; k++) {
                const struct cluster_mig_req *q = &req->mig[k];
                if (!q->count)
                        continue;
                if (q->profile[0] && n->mig_single) {
                        snprintf(reason, len,
                                 "node serves its MIG devices as nvidia.com/gpu (MIG strategy single), "
                                 "not " CLUSTER_MIG_PREFIX "%.31s",
                                 q->profile);
                        return -ENODEV;
                }
                char what[64];
                snprintf(what, sizeof what, "MIG devices %.31s", q->profile[0] ? q->profile : "(nvidia.com/gpu)");
                struct mig_count c;
                mig_count(n, q->profile, &c);
                if (c.healthy < q->count) {
                        snprintf(reason, len, "%u healthy %s, pod needs %u", c.healthy, what, q->count);
                        return -ENODEV;
                }
                if (c.free < q->count) {
                        snprintf(reason, len,
                                 "%u free %s, pod needs %u (%u healthy: %u held, %u awaited by pods placed here)",
                                 c.free, what, q->count, c.healthy, c.held, c.waiting);
                        return -ENOSPC;
                }
                split |= !mig_take(c.free_by_gpu, MIN(n->n_gpus, (unsigned)CLUSTER_GPUS_MAX), q->count);
                full += 1.0 - (double)(c.free - q->count) / c.healthy;
                asked++;
        }
        ret->mig_parents = asked ? (split ? 2 : 1) : 0;
        *ret_pack = asked ? full / asked : 0;
        return 0;
}

/* On a `single` node the pod's whole GPUs are MIG devices: its request with them moved to a MIG request of
 * any profile (""); false (eff untouched) when nothing moves. */
static bool single_request(const struct sched_node *n, const struct cluster_request *req, struct cluster_request *eff) {
        unsigned whole = 0;
        for (unsigned k = 0; k < req->n && k < CLUSTER_CONTAINERS_MAX; k++)
                whole += req->c[k].whole;
        if (!n->mig_single || !whole)
                return false;
        *eff = *req;
        for (unsigned k = 0; k < eff->n && k < CLUSTER_CONTAINERS_MAX; k++)
                eff->c[k].whole = 0;
        unsigned at = MIN(eff->n_mig, (unsigned)CLUSTER_MIG_REQ_MAX - 1);
        eff->mig[at] = (struct cluster_mig_req){ .count = whole };
        eff->n_mig = at + 1;
        return true;
}

/* Does the pod ask only nvidia.com/gpu (whole GPUs by that name, no share, no MIG device)? */
static bool request_nvidia_only(const struct cluster_request *req) {
        if (!req->n || req->n_mig)
                return false;
        for (unsigned k = 0; k < req->n && k < CLUSTER_CONTAINERS_MAX; k++) {
                const struct cluster_container_req *c = &req->c[k];
                if (c->core || c->mem_mib || c->qty[CLUSTER_RES_CORE] || c->qty[CLUSTER_RES_MEM] ||
                    c->res[CLUSTER_RES_WHOLE] != CLUSTER_NAME_NVIDIA_GPU)
                        return false;
        }
        return true;
}

/* A node serving its replicas as nvidia.com/gpu (n->replicas_whole) beside its whole GPUs: an nvidia.com/gpu
 * request is whatever device IDs kubelet picks (the agent's preferred allocation), replicas or GPUs, so it is
 * counted against both, with no GPU assigned: 0 FIT, -ENOSPC (taken) or -ENODEV (never), with the reason. */
static int fit_replicas(const struct sched_node *n, const struct cluster_request *req, struct sched_fit *ret) {
        memset(ret, 0, offsetof(struct sched_fit, reason) + 1);
        ret->reason[0] = '\0';
        unsigned asked = 0;
        for (unsigned k = 0; k < req->n && k < CLUSTER_CONTAINERS_MAX; k++)
                asked += req->c[k].whole;
        struct room r;
        room_from_node(n, false, &r);
        unsigned whole_free = (unsigned)__builtin_popcountll(r.whole_free);
        unsigned healthy = (unsigned)__builtin_popcountll(r.healthy);
        uint64_t free_n = (uint64_t)n->replicas_free + whole_free;
        if (free_n >= asked) {
                ret->verdict = SCHED_FIT;
                uint64_t cap = (uint64_t)n->replicas_free + healthy + 1;
                ret->pack = 1.0 - (double)(free_n - asked) / (double)cap;
                return 0;
        }
        ret->verdict = n->replicas_free + (uint64_t)healthy >= asked ? SCHED_NO_ROOM : SCHED_UNRESOLVABLE;
        snprintf(ret->reason, sizeof ret->reason,
                 "%u free nvidia.com/gpu replicas (time-slicing or MPS) and %u GPUs free whole, pod needs %u",
                 n->replicas_free, whole_free, asked);
        return ret->verdict == SCHED_NO_ROOM ? -ENOSPC : -ENODEV;
}

/* Does any container ask for a GPU placed here (whole or a share)? */
static bool request_places_gpus(const struct cluster_request *req) {
        for (unsigned k = 0; k < req->n; k++)
                if (req->c[k].whole || req->c[k].core || req->c[k].mem_mib)
                        return true;
        return false;
}

/* lint: long — the decision in order: the fast path, the malformed and unpublished answers, the MIG counts, the
 * placement on the node as it is, then on the empty node (preemption or never); each one step. */
static int fit_node(struct sched_model *m, const struct sched_node *n, const struct cluster_request *req,
                    enum cluster_policy policy, struct sched_fit *ret, bool fast) {
        /* what the fast path leaves alone must read as zero: the header, the used assignments */
        ret->verdict = SCHED_FIT;
        ret->assign.n = 0;
        ret->ring_bw = ret->whole_count = 0;
        ret->pack = 0;
        ret->mig_parents = 0;
        ret->reason[0] = '\0';
        struct cluster_request eff;
        if (n && req && req->n <= CLUSTER_CONTAINERS_MAX && single_request(n, req, &eff))
                req = &eff;
        if (m && n && req && n->published && n->replicas_whole && req->n <= CLUSTER_CONTAINERS_MAX &&
            request_valid(req) && request_nvidia_only(req))
                return fit_replicas(n, req, ret);
        if (fast && m && n && req && req->n >= 1 && !req->n_mig && request_valid(req) && n->published &&
            fit_fast(m, n, req, policy, ret))
                return 0;
        memset(ret, 0, offsetof(struct sched_fit, reason) + 1);
        ret->reason[0] = '\0';
        if (!m || !n || !req || !request_valid(req)) {
                ret->verdict = SCHED_UNRESOLVABLE;
                snprintf(ret->reason, sizeof ret->reason, "malformed GPU request");
                return -EINVAL;
        }
        if (!n->published || n->n_gpus == 0) {
                ret->verdict = SCHED_UNRESOLVABLE;
                snprintf(ret->reason, sizeof ret->reason, "%s",
                         n->published ? "node has no GPUs"
                                      : "node publishes no GPUs (no " CLUSTER_ANN_GPUS " annotation)");
                return -ENODEV;
        }
        char mig_reason[sizeof ret->reason] = "";
        double mig_pack = 0;
        int mr = req->n_mig ? fit_mig(n, req, ret, &mig_pack, mig_reason, sizeof mig_reason) : 0;
        if (mr == -ENODEV) {
                ret->verdict = SCHED_UNRESOLVABLE;
                snprintf(ret->reason, sizeof ret->reason, "%s", mig_reason);
                return -ENODEV;
        }
        struct room r;
        room_from_node(n, false, &r);
        if (place_all(m, n, req, policy, &r, ret) == 0) {
                if (mr < 0) {
                        ret->verdict = SCHED_NO_ROOM;
                        ret->assign = (struct cluster_assignment){ 0 };
                        snprintf(ret->reason, sizeof ret->reason, "%s", mig_reason);
                        return -ENOSPC;
                }
                ret->verdict = SCHED_FIT;
                bool gpus = request_places_gpus(req);
                ret->pack = !req->n_mig ? pack_after(n, &r, ret)
                            : gpus      ? 0.5 * pack_after(n, &r, ret) + 0.5 * mig_pack
                                        : mig_pack;
                return 0;
        }
        /* Would the empty node do? Then freeing GPUs (preemption) could help. */
        struct sched_fit empty;
        memset(&empty, 0, sizeof empty);
        room_from_node(n, true, &r);
        if (place_all(m, n, req, policy, &r, &empty) == 0) {
                ret->verdict = SCHED_NO_ROOM;
                ret->assign = (struct cluster_assignment){ 0 };
                return -ENOSPC;
        }
        ret->verdict = SCHED_UNRESOLVABLE;
        ret->assign = (struct cluster_assignment){ 0 };
        snprintf(ret->reason, sizeof ret->reason, "even with every GPU free: %.170s", empty.reason);
        return -ENODEV;
}

int sched_fit_node(struct sched_model *m, const struct sched_node *n, const struct cluster_request *req,
                   enum cluster_policy policy, struct sched_fit *ret) {
        return fit_node(m, n, req, policy, ret, true);
}

int sched_fit_node_full(struct sched_model *m, const struct sched_node *n, const struct cluster_request *req,
                        enum cluster_policy policy, struct sched_fit *ret) {
        return fit_node(m, n, req, policy, ret, false);
}

static int score_one(const struct sched_score_in *f, unsigned best_ring, enum cluster_policy policy) {
        if (f->verdict != SCHED_FIT)
                return 0;
        double s = policy == CLUSTER_POLICY_SPREAD ? 1.0 - f->pack : f->pack;
        if (f->whole_count >= 2 && best_ring > 0)
                s = 0.6 * ((double)f->ring_bw / best_ring) + 0.4 * s;
        /* MIG devices: a node where each asked profile fits on one parent GPU (6..10) above one where it
         * must span parents (0..4); the pack orders nodes within each */
        if (f->mig_parents)
                s = f->mig_parents == 1 ? 0.6 + 0.4 * s : 0.4 * s;
        long v = lround(s * 10.0);
        return (int)(v < 0 ? 0 : v > 10 ? 10 : v);
}

void sched_score_in_from_fit(const struct sched_fit *f, struct sched_score_in *ret) {
        *ret = (struct sched_score_in){ f->verdict, f->ring_bw, f->whole_count, f->pack, f->mig_parents };
}

void sched_score_inp(const struct sched_score_in *const *in, size_t n, enum cluster_policy policy, int *ret_scores) {
        unsigned best_ring = 0;
        for (size_t i = 0; i < n; i++)
                if (in[i]->verdict == SCHED_FIT && in[i]->whole_count >= 2 && in[i]->ring_bw > best_ring)
                        best_ring = in[i]->ring_bw;
        for (size_t i = 0; i < n; i++)
                ret_scores[i] = score_one(in[i], best_ring, policy);
}

void sched_score_fitp(const struct sched_fit *const *fits, size_t n, enum cluster_policy policy, int *ret_scores) {
        unsigned best_ring = 0;
        for (size_t i = 0; i < n; i++)
                if (fits[i]->verdict == SCHED_FIT && fits[i]->whole_count >= 2 && fits[i]->ring_bw > best_ring)
                        best_ring = fits[i]->ring_bw;
        for (size_t i = 0; i < n; i++) {
                struct sched_score_in in;
                sched_score_in_from_fit(fits[i], &in);
                ret_scores[i] = score_one(&in, best_ring, policy);
        }
}

void sched_score_fits(const struct sched_fit *fits, size_t n, enum cluster_policy policy, int *ret_scores) {
        const struct sched_fit *stack[64] = { 0 };
        const struct sched_fit **p = n <= 64 ? stack : malloc(n * sizeof *p);
        if (!p) { /* out of memory: score one at a time (no ring normalisation across nodes) */
                for (size_t i = 0; i < n; i++) {
                        const struct sched_fit *one = &fits[i];
                        sched_score_fitp(&one, 1, policy, &ret_scores[i]);
                }
                return;
        }
        for (size_t i = 0; i < n; i++)
                p[i] = &fits[i];
        sched_score_fitp(p, n, policy, ret_scores);
        if (p != stack)
                free(p);
}
