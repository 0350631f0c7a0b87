/* SPDX-License-Identifier: Apache-2.0 */
/*
 * class.c — whole-GPU picks on a node, memoised in its topology class (model.h,
 * sched_model_pick_whole; class-internal.h). Below the model and the decisions: it calls only the
 * allocator, so the decisions (decide.c) and the operator page (view.c) use it without using the
 * model's file, which uses the decisions to infer placements.
 */
#include <errno.h>
#include <stdlib.h>

#include "sched/class-internal.h"
#include "sched/model.h"

int sched_model_pick_whole(struct sched_model *m, const struct sched_node *n, alloc_set_t available, unsigned count,
                           alloc_set_t *ret_set, unsigned *ret_ring_bw) {
        (void)m;
        struct sched_topo_class *c = n->topo;
        if (!c || count == 0 || count > c->n)
                return count == 0 ? -EINVAL : -ENOSPC;
        if ((unsigned)__builtin_popcountll(available) < count)
                return -ENOSPC;
        if (!c->memo) {
                c->memo = calloc(MEMO_SLOTS, sizeof *c->memo);
                if (!c->memo)
                        return -ENOMEM;
        }
        uint64_t h = available * 0x9e3779b97f4a7c15ULL ^ (uint64_t)count * 0xc2b2ae3d27d4eb4fULL;
        struct memo_slot *slot = &c->memo[(h >> 20) % MEMO_SLOTS];
        if (slot->count == count && slot->available == available) {
                if (slot->err)
                        return slot->err;
                *ret_set = slot->set;
                *ret_ring_bw = slot->ring_bw;
                return 0;
        }
        if (!c->scratch) {
                c->scratch = malloc(sizeof *c->scratch);
                if (!c->scratch)
                        return -ENOMEM;
                topo_init(c->scratch);
                c->scratch->n_gpus = c->n;
                for (unsigned i = 0; i < c->n; i++) {
                        c->scratch->gpu[i].index = (int)i;
                        for (unsigned j = 0; j < c->n; j++)
                                c->scratch->link[i][j] = c->link[i * c->n + j];
                }
        }
        struct alloc_request req = { .count = count, .available = available };
        struct alloc_result res;
        struct gs_error err;
        int r = alloc_pick_gpus(c->scratch, &req, &res, &err);
        *slot = (struct memo_slot){ .available = available, .count = (uint8_t)count, .err = (int8_t)(r < 0 ? r : 0) };
        if (r < 0)
                return r;
        slot->set = res.set;
        slot->ring_bw = res.ring_bw;
        *ret_set = res.set;
        *ret_ring_bw = res.ring_bw;
        return 0;
}
