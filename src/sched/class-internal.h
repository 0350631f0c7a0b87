/* SPDX-License-Identifier: Apache-2.0 */
/*
 * class-internal — a topology class: the nodes whose GPUs have the same link matrix share one (the
 * model keeps them in its class table, model.c), with the memo of whole-GPU picks on it (class.c,
 * sched_model_pick_whole). Internal to src/sched. Must never: be changed while a node points to it,
 * except its memo and scratch.
 */
#pragma once

#include <stdint.h>

#include "alloc/alloc.h"
#include "topo/topo.h"

/* Direct-mapped memo of whole-GPU picks per topology class. */
#define MEMO_SLOTS 1024

struct memo_slot {
        alloc_set_t available;
        alloc_set_t set;
        uint32_t ring_bw;
        uint8_t count; /* 0 = empty slot */
        int8_t err;    /* 0 or -errno of the pick */
};

struct sched_topo_class {
        unsigned n;
        unsigned refs;
        struct topo_link *link; /* n*n */
        struct memo_slot *memo; /* MEMO_SLOTS, allocated on first pick */
        struct topo *scratch;   /* the allocator's input, built on first pick */
};
