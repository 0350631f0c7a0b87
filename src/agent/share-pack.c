/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share-pack — the node agent's GPU choice for a share it places without the scheduler extender, by the
 * extender's own packing policy (sharing.policy fgd or frag; docs/sharing.md, "Placement"): the first
 * half's candidates (alloc_frac_candidate) and their free share in milli-GPU go to sched_pack_share_gpu,
 * the one GPU choice within a node, and its answer becomes the request's `prefer`. Both in the requested
 * kind's share of the GPU (compute percent: as the extender measures; memory units for a memory half).
 * Pure.
 */
#include "agent/share-internal.h"
#include "alloc/fraction.h"
#include "sched/pack.h"
#include "util/util.h"

/* x IDs of kind k on GPU g in milli-GPU, rounded up. */
static unsigned milli_of(const struct alloc_frac_gpu *g, enum alloc_frac_kind k, unsigned x) {
        unsigned t = g->total[k];
        return t ? (unsigned)MIN(((uint64_t)x * 1000 + t - 1) / t, 1000u) : 0;
}

unsigned share_pack_milli(const struct alloc_frac_request *q) {
        unsigned best = 0;
        for (unsigned g = 0; g < q->n && g < ALLOC_FRAC_MAX_GPUS; g++)
                best = MAX(best, milli_of(&q->gpu[g], q->kind, q->size));
        return MAX(MIN(best, 999u), 1u);
}

void share_pack_prefer(struct alloc_frac_request *q, enum cluster_policy policy, const struct sched_workload *w) {
        q->has_prefer = false;
        if (q->partner >= 0 || !w)
                return;
        unsigned n = MIN(q->n, (unsigned)ALLOC_FRAC_MAX_GPUS), want = share_pack_milli(q);
        unsigned free_milli[ALLOC_FRAC_MAX_GPUS];
        for (unsigned g = 0; g < n; g++) {
                const struct alloc_frac_gpu *x = &q->gpu[g];
                unsigned t = x->total[q->kind], used = MIN(x->used[q->kind], t);
                /* a candidate's room, never below the share it takes (rounding) */
                free_milli[g] = alloc_frac_candidate(q, g) ? MAX(milli_of(x, q->kind, t - used), want) : 0;
        }
        struct sched_pack_ctx ctx = { .gpu_norm = 1000ULL * n, .w = w };
        struct sched_shape s = { .num_gpu = 1, .gpu_milli = want };
        int g = sched_pack_share_gpu(&ctx, free_milli, n, -1, &s, policy);
        if (g >= 0) {
                q->has_prefer = true;
                q->prefer = (unsigned)g;
        }
}
