/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pack — the cluster-packing policies' scores of a node for a pod (docs/scheduler.md, "Packing
 * policies"): the published baselines of the openb trace (Random, DotProd, GpuClustering, GpuPacking,
 * BestFit, FGD: ../shared/specs/cluster-trace.md §3, scores 0..100) and our own fragmentation-aware
 * `frag`. They score a node the filter (decide.h) and kube-scheduler's resource and GPU-model filters
 * (sched_pack_kube_fit) passed; the highest score wins. For a fractional pod the policy also names the
 * GPU (FGD and frag by fragmentation; the others by decide.c's best fit, the fewest free that fits).
 *
 * A GPU's free share is read from the model in milli-GPU: 10 × the compute percent free (0 when held
 * whole or unhealthy).
 *
 * The target workload (which pods are likely next) is a request mix: counted from the pods the caller
 * has seen (sched_mix_add, e.g. every pod that arrived) and reduced to its typical shapes
 * (sched_mix_workload, FGD's 95 % rule).
 *
 * Pure: no I/O; reads the model only.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/cluster.h"
#include "sched/model.h"

/* What a pod asks in the terms of the packing policies. models: the GPU products it accepts, as bits
 * of sched_model_product's indices; 0 = any. */
struct sched_shape {
        uint64_t cpu_milli, mem_mib;
        unsigned num_gpu;   /* 0 = CPU only */
        unsigned gpu_milli; /* of each GPU: 1..999 a share of one, 1000 whole GPUs */
        uint64_t models;
};

/* The shape of a pod asking req (GPU containers) and cpu_milli / mem_mib: whole GPUs (their sum), or one GPU
 * of its largest share's compute (a memory-only share: 1 %, 10 milli), or CPU only; models 0. The one
 * translation of a request into a shape: the extender's filter, its mix seeded at start, and the replay's
 * pods (which add models) all call it. */
struct sched_shape sched_pack_request_shape(const struct cluster_request *req, uint64_t cpu_milli, uint64_t mem_mib);

/* The request mix: distinct shapes and how many pods had each. */
struct sched_mix {
        size_t n, cap;
        struct sched_mix_entry {
                struct sched_shape shape;
                uint64_t count;
        } * e;
        uint64_t total;
};

#define SCHED_WORKLOAD_MAX 128
/* The typical shapes with their probabilities (summing to 1). */
struct sched_workload {
        unsigned n;
        struct sched_shape shape[SCHED_WORKLOAD_MAX];
        double p[SCHED_WORKLOAD_MAX];
        /* frag's weight of each shape's fragment (sched_workload_scarcity; 1 until it is called) */
        double k[SCHED_WORKLOAD_MAX];
        /* What the GPU pods of the mix ask per milli-GPU they take: CPU (milli) and memory (MiB) per milli-GPU,
         * the whole mix's (memory counted even when the shapes drop it). 0 when the mix asks none. */
        double cpu_per_milli, mem_per_milli;
};

/* Count one pod's shape. 0 or -ENOMEM. */
int sched_mix_add(struct sched_mix *mix, const struct sched_shape *s);
void sched_mix_free(struct sched_mix *mix);
/* The shortest prefix of the shapes by count (descending; on equal counts the larger CPU, share, GPU
 * count, models first) reaching `coverage` (0..1] of the pods, renormalised. with_mem: shapes differ
 * by memory too (else memory is dropped: FGD's spec). An empty mix gives an empty workload. */
void sched_mix_workload(const struct sched_mix *mix, double coverage, bool with_mem, struct sched_workload *ret);
/* frag's scarcity weights of w's shapes (w->k) from the model's nodes, by their capacity (not what is free): a
 * GPU shape that less than half of the cluster's GPUs could host (nodes of an accepted model with the GPUs,
 * CPU and memory for it when empty), a fraction h, weighs 1 / h, so a node that is one of the few homes of a
 * shape keeps it; every other shape weighs 1 (CPU-only ones, and those no node can host). Called whenever w
 * is re-read or the node set changes (the replay; the extender's pack_prepare). */
void sched_workload_scarcity(struct sched_workload *w, const struct sched_model *m);
/* The live mix (the node agent's, the replay's --live-mix, the extender's pack_prepare: one
 * rule): count s, and re-read the workload into *w (coverage 0.95) at 1, 2, 4, … 256 pods, then every
 * 256. True when *w was re-read. */
bool sched_mix_observe(struct sched_mix *mix, const struct sched_shape *s, bool with_mem, struct sched_workload *w);

/* What a policy's score is relative to: the largest node (CPU, GPU milli), for the normalised ones, and
 * the target workload (FGD and frag). */
struct sched_pack_ctx {
        uint64_t cpu_norm; /* largest node's CPU (milli) */
        uint64_t gpu_norm; /* largest node's GPUs (milli) */
        const struct sched_workload *w;
        /* bumped by the caller whenever w, or a norm, changes: the memos of the scores taken before (below)
         * are stale then */
        uint64_t version;
};

/* kube-scheduler's own filters for s on n: allocatable CPU and memory (a node that does not say has no
 * limit) and, for a GPU pod, the GPU model (node affinity on nvidia.com/gpu.product). 0 fits, or the first
 * that fails: -ENOSPC CPU, -EMSGSIZE memory, -ENXIO the model. */
int sched_pack_kube_fit(const struct sched_node *n, const struct sched_shape *s);

/*
 * The policy's score of node n for s (a feasible node: it passed the filters). Integer-valued 0..100
 * for the published policies (random: always 0, the caller draws), any real for frag; higher is better.
 * *ret_gpu: for a fractional pod the GPU the policy places it on (-1: the filter's own pick).
 */
double sched_pack_score(const struct sched_pack_ctx *ctx, const struct sched_node *n, const struct sched_shape *s,
                        enum cluster_policy policy, int *ret_gpu);

/* One node's last packing score, kept by the caller for the node (one per node) and reused by
 * sched_pack_score_memo while the node (its generation), the context (its version), the shape and the
 * policy stay the same: between two binds only the bound node's score changes. Zeroed = empty. */
struct sched_pack_memo {
        const struct sched_node *node; /* the node it was taken for (NULL: empty) */
        uint64_t gen, version;
        struct sched_shape shape;
        enum cluster_policy policy;
        double score;
        int gpu;
};

/* sched_pack_score through memo: the score kept there when it still holds, else taken and kept. */
/* Thread: any; lock: the caller serialises calls on one memo and its model (the server's lock). */
double sched_pack_score_memo(const struct sched_pack_ctx *ctx, const struct sched_node *n, const struct sched_shape *s,
                             enum cluster_policy policy, struct sched_pack_memo *memo, int *ret_gpu);

/* kube-scheduler's own default scoring of n for s (1.20: NodeResourcesLeastAllocated plus
 * NodeResourcesBalancedAllocation over CPU and memory, 0..200), for the pods the extender does not see
 * (CPU-only pods when it is registered for GPU resources only). A node without known capacity scores 0. */
double sched_pack_kube_score(const struct sched_node *n, const struct sched_shape *s);

/* The fragmentation of n under workload w (FGD's F_n, milli-GPU): the free GPU milli a pod drawn from w
 * could not use. */
double sched_pack_frag(const struct sched_workload *w, const struct sched_node *n);

/* Is this one of the packing policies (scored here, not by decide.c's pack)? */
bool sched_pack_policy(enum cluster_policy policy);

/*
 * The policy's GPU for a share s (num_gpu 1, gpu_milli < 1000) among one node's n GPUs, given per GPU the
 * compute free in milli-GPU (free_milli[i]; 0: GPU i cannot take the share — held whole, unhealthy, or
 * without the memory or the room for the request's other half, as the caller judges), the node's GPU
 * product (-1 unknown) and no CPU or memory limit: FGD's and frag's choice by fragmentation under ctx->w,
 * by the very code sched_pack_score chooses with. -1 for the other policies (their share goes where the
 * fractional placement's best fit puts it, alloc_pick_fraction), without a workload, or when no GPU takes
 * it. The one GPU choice within a node: the extender's bind and the node agent placing a share on its own
 * (src/agent/share.c) both ask it.
 */
int sched_pack_share_gpu(const struct sched_pack_ctx *ctx, const unsigned *free_milli, unsigned n, int product,
                         const struct sched_shape *s, enum cluster_policy policy);
/* free_milli for sched_pack_share_gpu from the model's node n, for a share of `core` percent and `mem_mib`
 * MiB: a GPU without the compute or the memory for it 0. Returns n's GPU count (at most CLUSTER_GPUS_MAX). */
unsigned sched_pack_share_free(const struct sched_node *n, unsigned core, uint64_t mem_mib, unsigned *free_milli);
