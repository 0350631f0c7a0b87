/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fraction — the placement policy for fractional GPUs (a share of one GPU's compute or memory):
 * given what each GPU has granted and what kubelet lists as available, the request and the
 * policy, choose one GPU and say why. The node agent's GetPreferredAllocation (src/agent/share.c)
 * is decode → alloc_pick_fraction → encode; tests and the fuzz target call it directly.
 *
 * A container's compute and memory arrive as two separate requests (kubelet asks resource by
 * resource). The policy therefore places a container's first half on a GPU where the *other*
 * resource keeps room for its partner (docs/sharing.md, "Placement"), and its second half on the
 * GPU of its first: a second half that cannot go there is refused (-EXDEV), never split.
 *
 * Pure: no I/O, no allocation, no global state. Must never choose an unusable GPU, a GPU with
 * fewer available IDs than the request, or another GPU than the partner's.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define ALLOC_FRAC_MAX_GPUS 64

enum alloc_frac_kind {
        ALLOC_FRAC_CORE = 0, /* percent of compute: 100 IDs per GPU */
        ALLOC_FRAC_MEM = 1,  /* memory units */
};

enum alloc_frac_policy {
        ALLOC_FRAC_BINPACK = 0, /* fullest GPU that fits (keeps whole GPUs free) */
        ALLOC_FRAC_SPREAD = 1,  /* emptiest GPU (least interference) */
};

/* Why a GPU was chosen. */
enum alloc_frac_reason {
        ALLOC_FRAC_PARTNER = 0, /* second half: the GPU of the container's first half */
        ALLOC_FRAC_MUST,        /* kubelet's must-include IDs fix the GPU */
        ALLOC_FRAC_PAIR_ROOM,   /* first half: policy order among GPUs with room for the partner */
        ALLOC_FRAC_MOST_ROOM,   /* first half: no GPU keeps the proportional room; the most room */
        ALLOC_FRAC_ALONE,       /* the profile has no other resource: policy order */
        ALLOC_FRAC_NO_ROOM,     /* refused (-ENOSPC): no GPU that fits keeps `need` for the partner */
        ALLOC_FRAC_PACKING,     /* first half: the cluster-packing policy's GPU among the candidates (prefer) */
};

struct alloc_frac_gpu {
        bool usable;       /* healthy, not held whole */
        bool must;         /* kubelet's must-include IDs are on this GPU */
        unsigned total[2]; /* IDs per kind on this GPU (core: 100; memory: units); 0 = not served */
        unsigned used[2];  /* IDs of each kind granted on this GPU */
        unsigned avail;    /* IDs of the requested kind kubelet lists as available on this GPU */
};

struct alloc_frac_request {
        enum alloc_frac_kind kind;
        enum alloc_frac_policy policy;
        unsigned size;   /* IDs wanted, >= 1, on one GPU */
        int partner;     /* GPU of this container's other half, -1 = this is a first half */
        bool pair;       /* the profile serves the other resource: keep room for a partner */
        unsigned expect; /* first half: the partner size the caller expects (IDs of the other kind,
                            * e.g. learned from earlier containers of this shape); 0 = proportional:
                            * the same share of the GPU as this half */
        unsigned need;   /* first half: the smallest partner the caller is sure of (IDs of the other
                            * kind, e.g. the smallest partner every earlier container with a half of this
                            * size had); when no GPU that fits keeps that many, the request is refused
                            * (-ENOSPC) instead of placed where its partner cannot follow. 0 = unknown:
                            * the GPU keeping the most room */
        unsigned n;      /* GPUs, <= ALLOC_FRAC_MAX_GPUS */
        bool terse;      /* leave ret->why empty on success (callers deciding thousands of nodes a call
                          * never show it; errors still say why) */
        /* first half: the GPU a cluster-packing policy chose among the candidates (alloc_frac_candidate; the
         * scheduler extender's own GPU choice, sched_pack_share_gpu), taken before the policy order when it
         * is one. Callers that do not set it leave has_prefer false. */
        bool has_prefer;
        unsigned prefer;
        struct alloc_frac_gpu gpu[ALLOC_FRAC_MAX_GPUS];
};

struct alloc_frac_decision {
        int gpu;
        enum alloc_frac_reason reason;
        unsigned reserve; /* first half: IDs of the other kind kept free for the partner (0: none) */
        char why[160];    /* one line for a person */
};

/*
 * Choose the GPU. Deterministic; ties go to the lowest index. 0 and *ret, or (err in ret->why
 * too, ret->gpu = -1):
 *   -EINVAL  size 0, n too large, partner out of range, must-include on more than one GPU or on
 *            another GPU than the partner's
 *   -E2BIG   size larger than every GPU's total of that kind
 *   -ENOSPC  no usable GPU lists size available IDs, or (first half with need) none of those keeps
 *            need IDs of the other kind free for the partner
 *   -EXDEV   the partner's GPU cannot take this half (unusable or too few available IDs): the
 *            container would be split across GPUs
 */
int alloc_pick_fraction(const struct alloc_frac_request *req, struct alloc_frac_decision *ret);

/* Is GPU g a candidate for a first half: usable, with `size` IDs available and the room its partner is
 * kept (what alloc_pick_fraction's policy order chooses among)? */
bool alloc_frac_candidate(const struct alloc_frac_request *req, unsigned g);

/* "partner", "must-include", "pair-room", "most-room", "alone", "no-room", "packing". */
const char *alloc_frac_reason_name(enum alloc_frac_reason r);
