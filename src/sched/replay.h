/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay — a what-if run of a cluster: every pod of a pod list placed in arrival order on a node list
 * through the extender's own decisions (the model, decide.h's filter and GPU choice, pack.h's policy
 * scores) plus kube-scheduler's own filters (CPU, memory, GPU model), as the openb trace's protocol
 * defines it (../shared/specs/cluster-trace.md §2, §4; docs/scheduler.md). Pods never leave; a pod no
 * node takes has failed and places nothing.
 *
 * The input is the openb CSV format: a node list `sn,cpu_milli,memory_mib,gpu,model` and a pod list
 * `name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,…]` (columns found by their header names; the
 * others ignored); or a snapshot of a real cluster (replay-snap.c): `kubectl get nodes,pods -o json` or
 * the extender's own `--snapshot` file, whose bound pods are placed first where they run and whose
 * pending pods then arrive in creation order.
 *
 * Pure but for the clock (the run's seconds): no I/O.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "cluster/cluster.h"
#include "util/error.h"

struct sched_trace_node {
        char name[CLUSTER_NAME_MAX];
        uint64_t cpu_milli, mem_mib;
        unsigned gpus;
        char model[64];
        /* a snapshot's node with the agent's gpuslice.io/gpus annotation: its value (malloc'ed; GPUs, health,
         * links as the agent published them); NULL: `gpus` healthy GPUs of `model`, no links */
        char *gpus_ann;
};

struct sched_trace_pod {
        char name[CLUSTER_NAME_MAX];
        uint64_t cpu_milli, mem_mib;
        unsigned num_gpu, gpu_milli; /* gpu_milli clamped to 1000; 0 with num_gpu 0 */
        char spec[128];              /* acceptable GPU models, '|'-separated; "" any */
        /* a snapshot's pod: the node it is bound to ("" pending), the GPUs its assignment names there (bit i =
         * GPU i; 0 none: the extender's fit places it) and its creation time (Unix s; the pending pods' order) */
        char node[CLUSTER_NAME_MAX];
        uint64_t gpus;
        int64_t created;
        /* a snapshot's pod: its GPU request as the extender decodes it (cluster_pod_decode; owned, freed by
         * sched_trace_free), which the replay's filter and policies are given as the extender's are, and of
         * which num_gpu and gpu_milli are the shape (sched_pack_request_shape); NULL for a trace's pod (its
         * request is num_gpu × gpu_milli) */
        struct cluster_request *req;
};

struct sched_trace {
        size_t n_nodes, n_pods;
        size_t cap_nodes, cap_pods;
        struct sched_trace_node *nodes;
        struct sched_trace_pod *pods;
        /* a snapshot: no shuffle and no tuning; the bound pods first (where they are), then the pending ones
         * by creation time, then name */
        bool snapshot;
};

/* Parse a node list / pod list (CSV with a header line) into t (appending). 0, -EINVAL with err naming
 * the line and the column, -ENOMEM. */
int sched_trace_parse_nodes(struct sched_trace *t, const char *buf, size_t len, struct gs_error *err);
int sched_trace_parse_pods(struct sched_trace *t, const char *buf, size_t len, struct gs_error *err);
void sched_trace_free(struct sched_trace *t);

/*
 * Parse a snapshot of a cluster into t (appending; t->snapshot set): a v1 List (`kubectl get nodes,pods -o
 * json`: items of kind Node and Pod, others skipped; a NodeList or PodList too) or the extender's
 * `--snapshot` object {"nodes": [Node...], "pods": [Pod...]}. A node: allocatable cpu and memory,
 * nvidia.com/gpu, the GFD label nvidia.com/gpu.product (its model; else the annotation's), the agent's
 * gpuslice.io/gpus annotation (cluster_node_decode). A pod (cluster_pod_decode for its GPU resources, u
 * their units): CPU and memory requests (a container's limit where it sets no request; init containers
 * as kube-scheduler counts them), the accepted models from nodeSelector or required node affinity on
 * nvidia.com/gpu.product (`In`), spec.nodeName (bound), the GPUs of its assignment; Succeeded and Failed
 * pods are skipped. A pod's GPU request is kept as the extender reads it (p->req); its num_gpu and
 * gpu_milli are the extender's shape of it (sched_pack_request_shape: a share's compute, a memory-only
 * share 10 milli). 0, -EINVAL with err naming the item and the field, -ENOMEM.
 */
int sched_trace_parse_snapshot(struct sched_trace *t, const char *buf, size_t len, const struct cluster_units *u,
                               struct gs_error *err);

struct sched_replay_options {
        enum cluster_policy policy;
        uint64_t seed;
        /* FGD's and frag's target workload: the mix of the pods seen so far (as the extender would keep it)
         * instead of the pod list as given (the protocol's, §3.6) */
        bool live;
        /* the extender sees GPU pods only (registered for the GPU resources): CPU-only pods are placed by
         * kube-scheduler's own default scoring (sched_pack_kube_score), not by the policy */
        bool gpu_pods_only;
        double tune; /* the workload is tuned to tune × the cluster's GPU capacity (1.3); 0: as it is */
        /* called every few hundred pods (may be NULL) */
        void (*progress)(void *arg, size_t done, size_t total);
        void *arg;
};

enum sched_fail_reason {
        SCHED_FAIL_CPU,    /* no node has the CPU free */
        SCHED_FAIL_MEMORY, /* the CPU, but not the memory */
        SCHED_FAIL_MODEL,  /* the CPU and memory, but not on a node of an accepted GPU model */
        SCHED_FAIL_GPU,    /* no node with the CPU, memory and model has the GPU room */
        SCHED_FAIL_BOUND,  /* a snapshot's bound pod: its node is not in the snapshot or has no GPU room for it */
        _SCHED_FAIL_MAX,
};
const char *sched_fail_reason_name(enum sched_fail_reason r);

/* Failed pods grouped by reason and request. */
struct sched_replay_fail {
        enum sched_fail_reason reason;
        unsigned num_gpu, gpu_milli;
        uint64_t cpu_milli;
        size_t count;
};

/* Where one pod of a snapshot went (sched_replay_result.place). */
struct sched_replay_place {
        size_t pod;    /* index into the trace's pods */
        long node;     /* index into the trace's nodes; -1: failed */
        uint64_t gpus; /* its GPUs there (bit i = GPU i; 0 none) */
        int reason;    /* failed: enum sched_fail_reason */
};

struct sched_replay_result {
        uint64_t gpus;       /* the cluster's GPUs */
        size_t pods, failed; /* pods replayed (after tuning), of which failed */
        uint64_t gpu_milli_arrived, gpu_milli_placed;
        double seconds;   /* the placement's wall time */
        unsigned n_curve; /* points 0..n_curve-1: arrived percent */
        double *curve;    /* allocation ratio (%) at each integer arrived percent (§4) */
        size_t n_fail;
        struct sched_replay_fail *fail;
        size_t fail_by_reason[_SCHED_FAIL_MAX];
        /* a snapshot's run: every pod in the order replayed (the bound ones first); NULL for a trace */
        size_t n_place;
        struct sched_replay_place *place;
};

/* Replay t. 0, -EINVAL (no nodes, a node the model refuses) with err, -ENOMEM. */
int sched_replay_run(const struct sched_trace *t, const struct sched_replay_options *o, struct sched_replay_result *ret,
                     struct gs_error *err);
void sched_replay_result_free(struct sched_replay_result *r);

/* The replay's random stream (documented in docs/scheduler.md: xoshiro256** seeded by splitmix64;
 * bounded draws by Lemire's multiply-shift with rejection). */
struct sched_rng {
        uint64_t s[4];
};
void sched_rng_seed(struct sched_rng *r, uint64_t seed);
uint64_t sched_rng_next(struct sched_rng *r);
/* Uniform in [0, n), n ≥ 1. */
uint64_t sched_rng_below(struct sched_rng *r, uint64_t n);
