/* SPDX-License-Identifier: Apache-2.0 */
/*
 * decide — the extender's decisions on the model (model.h): does a pod fit a node (filter), how
 * good is each node (prioritize), which GPUs exactly (bind).
 *
 * A pod fits a node when all its GPU containers fit together on real GPUs: a fractional
 * container's compute and memory on ONE healthy GPU not held whole, chosen by the fractional
 * placement (alloc_pick_fraction); k whole GPUs healthy, with no sharer and no holder, chosen by the
 * allocator (alloc_pick_gpus) by topology. Containers are
 * placed one after the other on a scratch copy of the node's use: whole requests first (largest
 * first), then shares by memory, largest first.
 *
 * MIG devices (nvidia.com/mig-<profile>, summed over the pod; and whole GPUs on a node whose agent
 * serves its MIG devices as nvidia.com/gpu, strategy `single`) are placed by counts: the node's healthy
 * devices of the profile with no holder in its annotation, less what pods the model holds on the node
 * still wait for (asked, but not yet shown as holders: e.g. our own binds in flight). No particular
 * device is chosen (the node agent's preferred allocation picks them); a GPU in MIG mode is never
 * placed whole or shared.
 *
 * Scores are 0..10 (what kube-scheduler 1.20 accepts). See docs/scheduler.md for the formula.
 *
 * Pure: no I/O, no logging; not thread-safe (it fills the model's memo), like the model.
 */
#pragma once

#include "alloc/fraction.h"
#include "sched/model.h"

enum sched_verdict {
        SCHED_FIT = 0,
        SCHED_NO_ROOM,      /* the node is big enough, but taken: preemption could help */
        SCHED_UNRESOLVABLE, /* not even the empty node would do (too few/small/unhealthy GPUs, no GPUs) */
};

struct sched_fit {
        enum sched_verdict verdict;
        struct cluster_assignment assign; /* SCHED_FIT: the GPUs chosen per container */
        char reason[200];                 /* otherwise: the GPU-level shortage, for a person */
        /* for scoring */
        unsigned ring_bw;     /* best ring of the largest whole request (GB/s), 0 if none */
        unsigned whole_count; /* GPUs of that request */
        double pack;          /* 0..1: how full the touched GPUs / node are after placing */
        /* MIG devices asked (nvidia.com/mig-*, or nvidia.com/gpu on a `single` node): 0 none, 1 each
         * profile's request fits on one parent GPU's free devices, 2 some request must span parents */
        uint8_t mig_parents;
};

/*
 * Fit req on node n. Always fills *ret (verdict, and assign or reason). Returns 0 on FIT,
 * -ENOSPC for NO_ROOM, -ENODEV for UNRESOLVABLE, -EINVAL for a malformed request.
 */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
int sched_fit_node(struct sched_model *m, const struct sched_node *n, const struct cluster_request *req,
                   enum cluster_policy policy, struct sched_fit *ret);
/* The same without the fast path (a one-container pod decided from the node's summary, model.h):
 * always the room, the allocator and the fractional placement. Answers exactly as sched_fit_node
 * (the unit test compares them on random clusters); for tests and the bench. */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
int sched_fit_node_full(struct sched_model *m, const struct sched_node *n, const struct cluster_request *req,
                        enum cluster_policy policy, struct sched_fit *ret);

/*
 * Scores for fits of one pod on several nodes (fits[i] must be SCHED_FIT), 0..10 each, into
 * ret_scores. binpack prefers fuller nodes and GPUs, spread emptier ones; for a multi-GPU whole
 * request the ring bandwidth weighs most (normalised to the best among these nodes).
 */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
void sched_score_fits(const struct sched_fit *fits, size_t n, enum cluster_policy policy, int *ret_scores);
/* The same over pointers (fits[i] may point anywhere, e.g. into an earlier filter's results). */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
void sched_score_fitp(const struct sched_fit *const *fits, size_t n, enum cluster_policy policy, int *ret_scores);

/* What scoring reads of a fit (the extender keeps only this per node between filter and
 * prioritize), and the same scores over it. */
struct sched_score_in {
        enum sched_verdict verdict;
        unsigned ring_bw, whole_count;
        double pack;
        uint8_t mig_parents;
};
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
void sched_score_in_from_fit(const struct sched_fit *f, struct sched_score_in *ret);
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
void sched_score_inp(const struct sched_score_in *const *in, size_t n, enum cluster_policy policy, int *ret_scores);

/* "8 GiB", "5.5 GiB", "512 MiB" */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
char *sched_format_mib(uint64_t mib, char *buf, size_t len);
