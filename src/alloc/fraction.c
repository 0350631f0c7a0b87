/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fraction — fractional placement policy (see fraction.h, docs/sharing.md "Placement").
 *
 * Three steps: check the request, narrow the candidates (usable, enough available IDs, the
 * must-include GPU, the partner's GPU), then order them. Must never index past req->n or choose a
 * GPU outside the candidates.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "alloc/fraction.h"

const char *alloc_frac_reason_name(enum alloc_frac_reason r) {
        switch (r) {
                case ALLOC_FRAC_PARTNER: return "partner";
                case ALLOC_FRAC_MUST: return "must-include";
                case ALLOC_FRAC_PAIR_ROOM: return "pair-room";
                case ALLOC_FRAC_MOST_ROOM: return "most-room";
                case ALLOC_FRAC_ALONE: return "alone";
                case ALLOC_FRAC_NO_ROOM: return "no-room";
                case ALLOC_FRAC_PACKING: return "packing";
        }
        return "?";
}

__attribute__((format(printf, 3, 4))) static int fail(struct alloc_frac_decision *d, int err, const char *fmt, ...) {
        va_list ap;
        d->gpu = -1;
        d->reserve = 0;
        va_start(ap, fmt);
        vsnprintf(d->why, sizeof d->why, fmt, ap);
        va_end(ap);
        return err;
}

static unsigned other(enum alloc_frac_kind k) {
        return k == ALLOC_FRAC_CORE ? ALLOC_FRAC_MEM : ALLOC_FRAC_CORE;
}

/* Step 1: the request itself. Also finds the must-include GPU (-1 none). */
static int frac_validate(const struct alloc_frac_request *q, int *ret_must, struct alloc_frac_decision *d) {
        if (q->n > ALLOC_FRAC_MAX_GPUS || (q->kind != ALLOC_FRAC_CORE && q->kind != ALLOC_FRAC_MEM))
                return fail(d, -EINVAL, "bad request (%u GPUs, kind %u)", q->n, (unsigned)q->kind);
        if (q->size == 0)
                return fail(d, -EINVAL, "size 0");
        if (q->partner >= (int)q->n || q->partner < -1)
                return fail(d, -EINVAL, "partner GPU %d of %u", q->partner, q->n);
        unsigned largest = 0;
        int must = -1;
        for (unsigned g = 0; g < q->n; g++) {
                if (q->gpu[g].total[q->kind] > largest)
                        largest = q->gpu[g].total[q->kind];
                if (!q->gpu[g].must)
                        continue;
                if (must >= 0)
                        return fail(d, -EINVAL, "must-include IDs on GPUs %d and %u", must, g);
                must = (int)g;
        }
        if (q->size > largest)
                return fail(d, -E2BIG, "exceeds one GPU (%u at most)", largest);
        if (must >= 0 && q->partner >= 0 && must != q->partner)
                return fail(d, -EINVAL, "must-include IDs on GPU %d, the partner is on GPU %d", must, q->partner);
        *ret_must = must;
        return 0;
}

static bool fits(const struct alloc_frac_request *q, unsigned g) {
        return q->gpu[g].usable && q->gpu[g].avail >= q->size;
}

/* The partner size a first half keeps room for on GPU g (IDs of the other kind). */
static unsigned reserve_on(const struct alloc_frac_request *q, unsigned g) {
        unsigned o = other(q->kind);
        if (!q->pair || q->gpu[g].total[o] == 0)
                return 0;
        if (q->expect)
                return q->expect;
        unsigned t = q->gpu[g].total[q->kind] ? q->gpu[g].total[q->kind] : 1;
        uint64_t r = ((uint64_t)q->size * q->gpu[g].total[o] + t - 1) / t; /* the same share, rounded up */
        return (unsigned)r;
}

static unsigned other_free(const struct alloc_frac_request *q, unsigned g) {
        unsigned o = other(q->kind);
        const struct alloc_frac_gpu *x = &q->gpu[g];
        return x->total[o] > x->used[o] ? x->total[o] - x->used[o] : 0;
}

/* Is a better than b by the policy (fewer available IDs for binpack, more for spread)? */
static bool policy_better(const struct alloc_frac_request *q, unsigned a, unsigned b) {
        unsigned fa = q->gpu[a].avail, fb = q->gpu[b].avail;
        return q->policy == ALLOC_FRAC_SPREAD ? fa > fb : fa < fb;
}

/* Step 2 and 3 for a first half: among the GPUs that fit, the policy's best one that keeps the
 * partner's room; when none does, the one that keeps the most room. */
static int frac_search(const struct alloc_frac_request *q, struct alloc_frac_decision *d) {
        int best = -1, roomiest = -1;
        for (unsigned g = 0; g < q->n; g++) {
                if (!fits(q, g))
                        continue;
                if (other_free(q, g) >= reserve_on(q, g) && (best < 0 || policy_better(q, g, (unsigned)best)))
                        best = (int)g;
                if (roomiest < 0 || other_free(q, g) > other_free(q, (unsigned)roomiest) ||
                    (other_free(q, g) == other_free(q, (unsigned)roomiest) && policy_better(q, g, (unsigned)roomiest)))
                        roomiest = (int)g;
        }
        if (best < 0 && roomiest < 0)
                return fail(d, -ENOSPC, "no usable GPU has %u IDs available", q->size);
        if (q->has_prefer && q->prefer < q->n && alloc_frac_candidate(q, q->prefer)) {
                d->gpu = (int)q->prefer;
                d->reason = ALLOC_FRAC_PACKING;
                d->reserve = reserve_on(q, q->prefer);
                return 0;
        }
        if (best < 0 && q->pair && q->need && other_free(q, (unsigned)roomiest) < q->need) {
                d->reason = ALLOC_FRAC_NO_ROOM;
                return fail(d, -ENOSPC,
                            "no GPU with %u IDs available keeps %u %s IDs for the partner (the smallest partner "
                            "seen with this size); GPU %d keeps the most (%u)",
                            q->size, q->need, q->kind == ALLOC_FRAC_CORE ? "memory" : "core", roomiest,
                            other_free(q, (unsigned)roomiest));
        }
        bool alone = !q->pair || reserve_on(q, (unsigned)(best >= 0 ? best : roomiest)) == 0;
        d->gpu = best >= 0 ? best : roomiest;
        d->reason = alone ? ALLOC_FRAC_ALONE : best >= 0 ? ALLOC_FRAC_PAIR_ROOM : ALLOC_FRAC_MOST_ROOM;
        d->reserve = reserve_on(q, (unsigned)d->gpu);
        return 0;
}

bool alloc_frac_candidate(const struct alloc_frac_request *q, unsigned g) {
        return g < q->n && g < ALLOC_FRAC_MAX_GPUS && fits(q, g) && other_free(q, g) >= reserve_on(q, g);
}

/* Step 3: one line for a person. */
static void frac_explain(const struct alloc_frac_request *q, struct alloc_frac_decision *d) {
        const struct alloc_frac_gpu *x = &q->gpu[d->gpu];
        const char *kw = q->kind == ALLOC_FRAC_CORE ? "core" : "memory";
        const char *ow = q->kind == ALLOC_FRAC_CORE ? "memory" : "core";
        const char *pol = q->policy == ALLOC_FRAC_SPREAD ? "spread" : "binpack";
        switch (d->reason) {
                case ALLOC_FRAC_PARTNER:
                        snprintf(d->why, sizeof d->why,
                                 "GPU %d holds this container's %s; %u of %u %s IDs available there", d->gpu, ow,
                                 x->avail, x->total[q->kind], kw);
                        break;
                case ALLOC_FRAC_MUST: snprintf(d->why, sizeof d->why, "must-include IDs are on GPU %d", d->gpu); break;
                case ALLOC_FRAC_PAIR_ROOM:
                        snprintf(d->why, sizeof d->why,
                                 "%s: %u %s IDs available, %u %s IDs free for the partner (%u kept)", pol, x->avail, kw,
                                 other_free(q, (unsigned)d->gpu), ow, d->reserve);
                        break;
                case ALLOC_FRAC_MOST_ROOM:
                        snprintf(d->why, sizeof d->why,
                                 "no GPU keeps %u %s IDs for the partner; GPU %d keeps the most (%u)", d->reserve, ow,
                                 d->gpu, other_free(q, (unsigned)d->gpu));
                        break;
                case ALLOC_FRAC_ALONE:
                        snprintf(d->why, sizeof d->why, "%s: %u %s IDs available", pol, x->avail, kw);
                        break;
                case ALLOC_FRAC_PACKING:
                        snprintf(d->why, sizeof d->why,
                                 "the packing policy's GPU: %u %s IDs available, %u %s IDs free for the partner",
                                 x->avail, kw, other_free(q, (unsigned)d->gpu), ow);
                        break;
                case ALLOC_FRAC_NO_ROOM: break; /* never chosen */
        }
}

int alloc_pick_fraction(const struct alloc_frac_request *q, struct alloc_frac_decision *ret) {
        struct alloc_frac_decision d = { .gpu = -1 };
        int must = -1;
        int r = frac_validate(q, &must, &d);
        if (r == 0 && q->partner >= 0) {
                if (!fits(q, (unsigned)q->partner))
                        r = fail(&d, -EXDEV,
                                 "the container's other half is on GPU %d, which has %u IDs of this kind available",
                                 q->partner, q->gpu[q->partner].usable ? q->gpu[q->partner].avail : 0);
                else {
                        d.gpu = q->partner;
                        d.reason = ALLOC_FRAC_PARTNER;
                }
        } else if (r == 0 && must >= 0) {
                if (!fits(q, (unsigned)must))
                        r = fail(&d, -ENOSPC, "must-include GPU %d has %u IDs available", must,
                                 q->gpu[must].usable ? q->gpu[must].avail : 0);
                else {
                        d.gpu = must;
                        d.reason = ALLOC_FRAC_MUST;
                        d.reserve = reserve_on(q, (unsigned)must);
                }
        } else if (r == 0)
                r = frac_search(q, &d);
        if (r == 0 && !q->terse)
                frac_explain(q, &d);
        *ret = d;
        return r;
}
