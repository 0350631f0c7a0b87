/* SPDX-License-Identifier: Apache-2.0 */
/*
 * alloc — the one allocator of gpuslice: choose k whole GPUs from a free set by topology.
 *
 * Pure functions over struct topo: no I/O, no logging, no global state, no heap allocation.
 * It serves kubelet's GetPreferredAllocation, the CLI and the scheduler extender (its whole-GPU and
 * fractional picks: src/sched).
 *
 * Quality is judged by estimated bandwidth (topo_link_bw): a set's *ring bandwidth* is the
 * slowest link of its best Hamiltonian ring (for 2 GPUs, their link; for 1 GPU, 0), its
 * *pair total* the sum of the bandwidths of all its pairs.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "topo/topo.h"

typedef uint64_t alloc_set_t; /* bit i = GPU index i */

struct alloc_request {
        unsigned count;            /* GPUs wanted, >= 1 */
        alloc_set_t available;     /* GPUs free to pick (must be < 1 << t->n_gpus) */
        alloc_set_t must_include;  /* must be part of the answer (kubelet's must_include_deviceIDs) */
        struct topo_link min_link; /* refuse sets whose worst pair is below this; {0,0} = no floor */
};

struct alloc_result {
        alloc_set_t set;
        unsigned n;              /* == count */
        int gpus[TOPO_MAX_GPUS]; /* the chosen indices, ascending */
        unsigned ring_bw;        /* GB/s; 0 for a single GPU */
        unsigned pair_total;     /* GB/s summed over all pairs */
        struct topo_link worst;  /* the worst pairwise link (SELF for a single GPU) */
        char why[256];           /* one line for a person: why this set */
};

/*
 * Pick req->count GPUs. Deterministic. Never fails when enough GPUs are available and the
 * floor allows a set. Errors (0 on success, *ret written only then; err gets a message):
 *   -EINVAL  count 0, must_include not a subset of available, a bit past n_gpus, more
 *            must-include GPUs than count
 *   -ENOSPC  fewer available GPUs than count
 *   -ERANGE  no set of that size meets req->min_link
 */
int alloc_pick_gpus(const struct topo *t, const struct alloc_request *req, struct alloc_result *ret,
                    struct gs_error *err);

/* Exact ring bandwidth (best Hamiltonian ring's slowest link) of a set; 0 for |set| < 2. */
unsigned alloc_ring_bw(const struct topo *t, alloc_set_t set);
/* Sum of pairwise link bandwidths of a set. */
unsigned alloc_pair_total(const struct topo *t, alloc_set_t set);
/* Worst pairwise link of a set (SELF for |set| < 2). */
struct topo_link alloc_worst_link(const struct topo *t, alloc_set_t set);

/* Parse "0,1,3-5" into a set; -EINVAL on garbage or an index >= max. "" is the empty set. */
int alloc_set_parse(const char *s, unsigned max, alloc_set_t *ret);
/* Format a set as "0,1,3,4,5" into buf; returns buf. */
char *alloc_set_format(alloc_set_t set, char *buf, size_t len);
