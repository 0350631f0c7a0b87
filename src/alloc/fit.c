/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fit.c — the per-GPU fit of a fractional share (see fit.h). Must never allocate, log or keep state.
 */
#include <errno.h>

#include "alloc/fit.h"

int alloc_fit_share(const struct alloc_gpu_room *gpus, unsigned n, unsigned core, uint64_t mem_mib,
                    enum alloc_fit_policy policy) {
        if (core > 100 || (n > 0 && !gpus))
                return -EINVAL;
        int best = -ENOSPC;
        uint64_t best_mem = 0;
        unsigned best_core = 0;
        for (unsigned i = 0; i < n; i++) {
                const struct alloc_gpu_room *g = &gpus[i];
                if (!g->usable || g->core_free > 100 || g->core_free < core || g->mem_free_mib < mem_mib)
                        continue;
                uint64_t m = g->mem_free_mib - mem_mib;
                unsigned c = g->core_free - core;
                bool better;
                if (best < 0)
                        better = true;
                else if (policy == ALLOC_FIT_SPREAD)
                        better = m > best_mem || (m == best_mem && c > best_core);
                else
                        better = m < best_mem || (m == best_mem && c < best_core);
                if (better) {
                        best = (int)i;
                        best_mem = m;
                        best_core = c;
                }
        }
        return best;
}
