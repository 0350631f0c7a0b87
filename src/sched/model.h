/* SPDX-License-Identifier: Apache-2.0 */
/*
 * model — the scheduler extender's picture of the cluster's GPUs.
 *
 * Nodes with their GPUs (memory, health, UUID) and topology, their MIG devices (profile, health,
 * holder) from the node annotation, and every pod that holds or is assigned GPU resources (MIG devices
 * included), with what it uses on which GPU. From those: per GPU the compute and
 * memory handed out, the number of fractional sharers and whether it is held whole. Fed by the
 * API watch (or a JSON snapshot, src/sched/codec.h) through the upsert/remove calls below; the
 * extender's bind assumes a pod here at once, so a second bind sees the GPU as taken.
 *
 * Nodes with the same GPU count and link matrix share one interned topology class, which also
 * memoises whole-GPU picks (alloc_pick_gpus) by free set: a cluster of identical servers pays for
 * each distinct (free set, count) once.
 *
 * Pure: no I/O, no logging, no locks — the caller serialises every call on one model (decisions
 * read it and fill its caches). Must never keep a pointer the caller passed in.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alloc/alloc.h"
#include "cluster/cluster.h"
#include "topo/topo.h"

/* Per-GPU use, kept up to date as pods come and go. */
struct sched_gpu {
        uint32_t mem_total_mib;
        uint32_t mem_used_mib; /* may exceed total when pods were admitted around us */
        uint16_t core_used;    /* percent; may exceed 100 likewise */
        uint16_t sharers;      /* fractional containers on it */
        uint16_t whole;        /* containers holding it whole (1 normally; >1 = double-booked) */
        bool healthy;          /* and free for whole GPUs and shares: not in MIG mode, not replicated */
        uint8_t sharing;       /* enum sched_sharing: replicated by NVIDIA's sharing (kubelet places them) */
        char *uuid;            /* NULL when unknown */
};

/* A GPU the node agent advertises as replicas (the annotation's "sharing", docs/cluster.md). */
enum sched_sharing {
        SCHED_SHARING_NONE = 0,
        SCHED_SHARING_TIMESLICE, /* time-slicing, or a mode this extender does not know */
        SCHED_SHARING_MPS,
};

struct sched_topo_class; /* interned: n GPUs + link matrix + whole-pick memo */
struct sched_pod;
struct sched_fit; /* decide.h */

#define SCHED_NODE_INLINE_GPUS 8

/*
 * What the decisions' fast path (decide.c) reads instead of walking the GPUs, kept up to date by
 * the model with every change of the node's use or GPUs. `valid` only for published nodes of at
 * most SCHED_NODE_INLINE_GPUS GPUs (larger nodes always take the full path). Free compute and
 * memory are what a share sees: 0 on GPUs held whole or unhealthy.
 */
struct sched_node_sum {
        bool valid;
        uint8_t n_healthy;
        uint16_t max_share_core; /* most compute free on one GPU a share may use (percent) */
        uint32_t max_share_mem;  /* most memory free on one such GPU (MiB) */
        alloc_set_t whole_free;  /* healthy, no holder, no sharer */
        alloc_set_t share_ok;    /* healthy and not held whole */
        uint64_t healthy_mem;    /* memory of the healthy GPUs (MiB) */
        uint64_t share_mem_free; /* free memory summed over the share_ok GPUs (MiB) */
        uint8_t core_free[SCHED_NODE_INLINE_GPUS];
        uint32_t mem_free[SCHED_NODE_INLINE_GPUS];
};

/* What a person reads of a node beyond the numbers (kept only by a model told to:
 * sched_model_keep_details; `gpuslice inspect`). */
struct sched_node_details {
        char driver[80];
        struct {
                char model[64];
                char health[96];
                char sharing[16];        /* "time-slicing", "mps", "" not replicated */
                unsigned replicas, held; /* with sharing: advertised, held per the agent */
        } gpu[];                         /* n_gpus */
};

/* One MIG device of a GPU in MIG mode, as the node annotation lists it (docs/mig.md). */
struct sched_mig {
        unsigned gpu; /* its parent GPU's index */
        bool healthy;
        char profile[32];
        char holder[128]; /* "namespace/pod" per the node agent, "" free */
};

struct sched_node {
        char *name;                         /* points into this allocation */
        struct sched_node_details *details; /* NULL unless the model keeps them */
        bool published;                     /* has a GPU annotation (else a placeholder holding pods) */
        unsigned n_gpus;
        struct sched_gpu *gpu; /* n_gpus entries */
        struct sched_topo_class *topo;
        struct sched_pod *pods; /* list through sched_pod.next_on_node */
        unsigned n_pods;
        uint64_t generation; /* bumped on every change of use or GPUs */
        /* What kube-scheduler's own filters read, next to the summary that the
         * packing policies read with them (the replay, src/sched/replay.h, and the extender's feed from the Node
         * and Pod objects; 0 = not known, no limit):
         * allocatable CPU and memory, what the node's pods request of them, and the GPU model as an index
         * into the model's product names (sched_model_product; the GFD label nvidia.com/gpu.product). */
        uint64_t cpu_milli, mem_mib, cpu_used, mem_used;
        /* the same requests as kube-scheduler's scoring counts them (NodeInfo.NonZeroRequested): a pod asking
         * no CPU counts SCHED_NONZERO_CPU, one asking no memory SCHED_NONZERO_MEM (sched_nonzero_*) */
        uint64_t cpu_nonzero, mem_nonzero;
        int product; /* -1 unknown */
        struct sched_node_sum sum;
        unsigned n_mig;
        struct sched_mig *mig; /* n_mig entries (NULL none), parent by parent */
        /* the agent serves MIG devices as nvidia.com/gpu (strategy single, a GPU in MIG mode): whole-GPU
         * requests are counted against the MIG devices (decide.c), never placed on a GPU */
        bool mig_single;
        /* the agent serves some replicated GPUs' replicas as nvidia.com/gpu (the annotation's replica_resource of
         * each GPU): a whole-GPU request may be kubelet's replicas, counted (decide.c), never placed on a GPU;
         * replicas_free: the replicas not held on the healthy GPUs whose replicas are nvidia.com/gpu, per the
         * annotation (a node's other set, under its own name, not counted) */
        bool replicas_whole;
        uint32_t replicas_free;
        /* up to 8 GPUs live here, next to the rest (filter touches every node: fewer cache misses) */
        struct sched_gpu gpu_inline[SCHED_NODE_INLINE_GPUS];
};

/* kube-scheduler's defaults for a request of 0 in its scoring (pkg/scheduler/util: DefaultMilliCPURequest
 * 100, DefaultMemoryRequest 200 MB = 190.73 MiB, here rounded up; per pod, where kube-scheduler applies
 * them per container). */
#define SCHED_NONZERO_CPU 100u
#define SCHED_NONZERO_MEM 191u
static inline uint64_t sched_nonzero_cpu(uint64_t cpu_milli) {
        return cpu_milli ? cpu_milli : SCHED_NONZERO_CPU;
}
static inline uint64_t sched_nonzero_mem(uint64_t mem_mib) {
        return mem_mib ? mem_mib : SCHED_NONZERO_MEM;
}

/* One GPU container of a pod in the model: its request (without the name) and its placement. */
struct sched_pod_container {
        unsigned whole, core;
        uint32_t mem_mib;
        struct cluster_container_assign assign;
};

struct sched_pod {
        char *uid, *ns, *name;
        char resource_version[32];
        struct sched_node *node; /* NULL when not on a node */
        struct sched_pod *next_on_node;
        unsigned n;                    /* GPU containers */
        struct sched_pod_container *c; /* n entries: what each asks, and what is counted where */
        unsigned n_mig;                /* MIG devices asked per profile (no placement: the node agent picks) */
        struct cluster_mig_req mig[CLUSTER_MIG_REQ_MAX];
        bool inferred;               /* no assignment annotation: placed by our own fit */
        bool assumed;                /* placed by our bind, not yet confirmed by the watch */
        bool bound;                  /* the feed saw spec.nodeName */
        bool confirmed;              /* the node agent honoured the assignment (…assigned = "true") */
        uint8_t source;              /* enum cluster_source */
        uint64_t assumed_ns;         /* CLOCK_REALTIME of the assume */
        uint64_t cpu_milli, mem_mib; /* CPU and memory requested (counted on the node; 0 when not known) */
};

/* What the feed knows of a pod. */
struct sched_pod_info {
        const char *uid, *ns, *name;
        const char *resource_version; /* may be NULL */
        const char *node;             /* spec.nodeName or the assigned node; NULL/"" = pending */
        bool bound;                   /* node is spec.nodeName (else only our assignment's node) */
        struct cluster_request req;
        bool has_assignment; /* assign below is from the pod's annotations */
        struct cluster_assignment assign;
        bool terminated;            /* Succeeded/Failed: holds nothing */
        enum cluster_source source; /* of the assignment */
        bool confirmed;
        /* CPU (milli-cores) and memory (MiB) the pod requests: 0 when not known. A pod asking for no GPU is
         * kept (and counted on its node) when it asks for CPU or memory. */
        uint64_t cpu_milli, mem_mib;
};

struct sched_model;

/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
int sched_model_new(struct sched_model **ret);
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
struct sched_model *sched_model_free(struct sched_model *m);
/* Keep each node's driver and per-GPU model and health text (struct sched_node_details) from now
 * on; the extender does not need them. */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
void sched_model_keep_details(struct sched_model *m, bool keep);

/* Add or replace a node's GPUs and topology; its pods are re-counted on the new GPUs. 0, -EINVAL
 * (no name, more than CLUSTER_GPUS_MAX), -ENOMEM. */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
int sched_model_set_node(struct sched_model *m, const struct cluster_node_info *info);
/* What kube-scheduler's own filters read of node `name` (model.h, struct sched_node): allocatable CPU and
 * memory and its GPU model (product may be NULL or ""). 0, -ENOENT (no such node), -E2BIG (more than
 * SCHED_PRODUCTS_MAX distinct products), -EINVAL. */
#define SCHED_PRODUCTS_MAX 64
int sched_model_set_node_resources(struct sched_model *m, const char *name, uint64_t cpu_milli, uint64_t mem_mib,
                                   const char *product);
/* The index of a GPU product name among the nodes' (sched_node.product), -ENOENT when no node has it. */
int sched_model_product(const struct sched_model *m, const char *product);
/* The node is gone: its pods stay (as on a placeholder) until they are removed. 0 or -ENOENT. */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
int sched_model_remove_node(struct sched_model *m, const char *name);

/*
 * Add or replace a pod. A pod on a node without an assignment is placed by our own fit (binpack)
 * and flagged `inferred`. A pod the model had assumed keeps its assumed placement until the feed
 * brings one with an assignment (or the pod is removed). Terminated pods and pods that ask for no
 * GPU resource, CPU or memory are removed (a bound pod asking CPU or memory alone is counted on its node:
 * cpu_used, mem_used). 0, -EINVAL, -ENOMEM.
 */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
int sched_model_set_pod(struct sched_model *m, const struct sched_pod_info *info);
/* 0 or -ENOENT. */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
int sched_model_remove_pod(struct sched_model *m, const char *uid);

/* Count a pod at once on `node` with `assign` (the bind's choice), marked assumed. */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
int sched_model_assume_pod(struct sched_model *m, const struct sched_pod_info *info, const char *node,
                           const struct cluster_assignment *assign, uint64_t now_ns);
/* Undo an assume (bind failed): the pod goes away unless the feed had confirmed it. */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
int sched_model_forget_pod(struct sched_model *m, const char *uid);

/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
const struct sched_node *sched_model_node(const struct sched_model *m, const char *name);
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
const struct sched_pod *sched_model_pod(const struct sched_model *m, const char *uid);
/* Bumped on every change of the model's nodes or pods (decisions taken at one generation stay
 * valid while it does not move). */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
uint64_t sched_model_generation(const struct sched_model *m);
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
size_t sched_model_n_nodes(const struct sched_model *m);
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
size_t sched_model_n_pods(const struct sched_model *m);
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
size_t sched_model_n_topo_classes(const struct sched_model *m);
/* Bumped only when a node enters or leaves the model: node pointers resolved by name stay valid
 * (and absent names stay absent) while it does not move. */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
uint64_t sched_model_nodes_generation(const struct sched_model *m);
/* Iterate nodes: *cursor starts at 0; NULL at the end. */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
const struct sched_node *sched_model_next_node(const struct sched_model *m, size_t *cursor);
/* Iterate pods (on a node, or assigned to one): *cursor starts at 0; NULL at the end. */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
const struct sched_pod *sched_model_next_pod(const struct sched_model *m, size_t *cursor);

/*
 * Whole-GPU pick on a node, memoised in its topology class: the allocator's answer for `count`
 * GPUs out of `available`. 0 (ret filled), or alloc_pick_gpus's error.
 */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
int sched_model_pick_whole(struct sched_model *m, const struct sched_node *n, alloc_set_t available, unsigned count,
                           alloc_set_t *ret_set, unsigned *ret_ring_bw);

/*
 * What is recorded on a node's GPUs, as `gpuslice inspect` shows it: per GPU the pods bound to the
 * node whose placement an assignment annotation names (not inferred by our fit, not only assumed),
 * in the order they entered the model, with the compute and memory they hold there; and the pods
 * bound to the node that hold GPU resources on no recorded GPU (no assignment, or one naming GPUs
 * the node does not have). A pure reading of the model; *ret freed with sched_node_records_free.
 */
struct sched_gpu_record {
        uint64_t mem_mib; /* handed out (a whole GPU counts its memory) */
        unsigned core;    /* percent handed out (a whole GPU counts 100) */
        unsigned n_pods;
        const struct sched_pod **pods;
};
struct sched_node_records {
        unsigned n_gpus;
        struct sched_gpu_record *gpu;
        unsigned n_unplaced;
        const struct sched_pod **unplaced;
};
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
int sched_node_records(const struct sched_node *n, struct sched_node_records *ret);
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
void sched_node_records_free(struct sched_node_records *r);
/* Pod p's hold on GPU g of n, summed over its containers. */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
void sched_pod_share(const struct sched_pod *p, const struct sched_node *n, unsigned g, uint64_t *ret_mem_mib,
                     unsigned *ret_core, bool *ret_whole);
/* Does pod p ask n only for MIG devices (nvidia.com/mig-*, or whole GPUs of a `single` node)? Those have
 * no GPU placement: the node annotation names their holders. */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
bool sched_pod_mig_only(const struct sched_pod *p, const struct sched_node *n);
/* A pod's whole request, summed over its containers. */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
void sched_pod_request(const struct sched_pod *p, uint64_t *ret_mem_mib, unsigned *ret_core, unsigned *ret_whole);

/*
 * Would req fit on node `name` if the pods with these UIDs were gone (preemption)? The victims'
 * holdings on that node are taken out (MIG devices too: those the annotation shows them holding, and
 * those they still await), the full placement decides (sched_fit_node_full, into *ret),
 * and they are put back: the model is as before when it returns (pods the model does not hold, or
 * holds on another node, free nothing). The decision's result: 0 fit, -ENOSPC, -ENODEV (no such
 * node or it cannot ever fit), -EINVAL. Not const: it counts on the model meanwhile.
 */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
int sched_model_fit_without(struct sched_model *m, const char *name, const char *const *uids, size_t n_uids,
                            const struct cluster_request *req, int policy, struct sched_fit *ret);

/* Link between two GPUs of a node (SELF on the diagonal, UNKNOWN out of range). */
/* Thread: any; lock: the caller serialises calls on one model (the server's lock: sched_server_lock). */
struct topo_link sched_node_link(const struct sched_node *n, unsigned a, unsigned b);
