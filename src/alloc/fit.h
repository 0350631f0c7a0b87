/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fit — place one fractional share (a percent of compute and/or MiB of memory) on one GPU.
 *
 * The per-GPU half of the one allocator (alloc.h chooses whole GPUs by topology): given what
 * each GPU of a node has left, choose the GPU that takes the share, binpack (fullest GPU that
 * fits) or spread (emptiest). Used by the scheduler extender (src/sched) for every fractional
 * container; meant to be merged with the node agent's placement into one function.
 *
 * Pure: no I/O, no heap, no global state, no logging.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum alloc_fit_policy {
        ALLOC_FIT_BINPACK = 0, /* fullest GPU that fits: keeps whole GPUs free for large requests */
        ALLOC_FIT_SPREAD,      /* emptiest GPU: least interference between sharers */
};

struct alloc_gpu_room {
        bool usable;           /* healthy and not held whole */
        unsigned core_free;    /* percent of compute not handed out, 0..100 */
        uint64_t mem_free_mib; /* memory not handed out */
};

/*
 * Choose the GPU for a share of `core` percent (0 = no compute share asked) and `mem_mib` MiB
 * (0 = none). Order: binpack — least memory left after the share, then least compute left;
 * spread — most memory left, then most compute left; ties to the lowest index. Returns the
 * chosen index, -ENOSPC when no usable GPU has room, -EINVAL for core > 100 or n == 0 with
 * nothing asked.
 */
int alloc_fit_share(const struct alloc_gpu_room *gpus, unsigned n, unsigned core, uint64_t mem_mib,
                    enum alloc_fit_policy policy);
