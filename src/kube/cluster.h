/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/cluster — the GPU picture of a cluster, built from what the API server holds: the node
 * annotation the agent publishes (per GPU index, UUID, model, memory, health, and the pair links),
 * and per pod its GPU requests and which GPU(s) it was assigned (gpuslice's annotation, or
 * gpushare's / gpu-manager's for pods coming from those systems). Used by `gpuslice inspect`, and
 * meant for the scheduler extender. Pure: no I/O, no logging; every input is untrusted.
 *
 * Node annotation  gpuslice.io/gpus  (compact JSON, version 1; docs/cluster.md):
 *   {"v":1,"driver":"535.104.05","cuda":12020,"nvswitch":false,
 *    "gpus":[{"i":0,"uuid":"GPU-…","model":"NVIDIA A100-SXM4-80GB","mem":81920,"cc":"8.0","health":"ok"}],
 *    "links":"NV12/PIX,NV12/SYS,SYS;NV12/PIX,SYS;SYS"}
 *   mem in MiB; health "ok" or the reason it is not; links: for i = 0..n-2 the links from GPU i to
 *   GPUs i+1..n-1 (topo link names: NV<k>, PIX, PXB, PHB, NODE, SYS, ?; an NVLink pair also
 *   carries its PCIe level: NV12/PIX), rows split by ';'.
 *   At most KUBE_GPUS_MAX GPUs, KUBE_ANNOTATION_MAX bytes.
 *
 * Pod assignment annotation  gpuslice.io/assignment  (compact JSON, version 1), written by the
 * scheduler extender at bind (or by whoever decides the GPU), read by the agent at Allocate and by
 * inspect:
 *   {"v":1,"node":"gpu-a","time":1700000000123,
 *    "containers":[{"name":"main","gpus":[2],"core":30,"mem":4096}]}
 *   gpus: GPU indices on that node; core: percent of each GPU (100 for whole GPUs); mem: MiB on
 *   each GPU (0 = whole GPU's memory for whole GPUs, no memory limit for core-only shares).
 *   gpuslice.io/assigned = "false" until the agent has honoured it at Allocate, then "true".
 * Also read: ALIYUN_COM_GPU_MEM_IDX (GPU index) + ALIYUN_COM_GPU_MEM_POD (GiB, the pod's total),
 * tencent.com/predicate-gpu-idx-<container index> ("0" or "0,1") + tencent.com/gpu-assigned.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "topo/topo.h"

#define KUBE_GPUS_MAX 64
#define KUBE_ANNOTATION_MAX (64u << 10)
#define KUBE_ANN_GPUS "gpuslice.io/gpus"
#define KUBE_ANN_ASSIGNMENT "gpuslice.io/assignment"
#define KUBE_ANN_ASSIGNED "gpuslice.io/assigned"
#define KUBE_CONTAINERS_MAX 16 /* GPU containers kept per pod (more are ignored) */

struct kube_gpu {
        int index;
        char uuid[96];
        char model[96];
        uint64_t memory_mib;
        int cc_major, cc_minor; /* 0 unknown */
        bool healthy;
        char health[96]; /* "ok" or the reason */
};

/* One node's published GPUs. gpu and link are malloc'ed (kube_node_gpus_done). */
struct kube_node_gpus {
        int version;
        char driver[80];
        int cuda_version; /* 1000*major + 10*minor, 0 unknown */
        bool nvswitch;
        unsigned n;
        struct kube_gpu *gpu;
        struct topo_link *link; /* n*n, link[i*n+j] */
};

/* The annotation for a node: t's GPUs, healthy[i]/reason[i] per GPU of t (reason may be NULL).
 * *ret malloc'ed compact JSON. 0, -E2BIG (too many GPUs or too long), -ENOMEM. */
int kube_node_gpus_format(const struct topo *t, const bool *healthy, const char *const *reason, char **ret);
/* Parse it. -EINVAL with err naming the field; -E2BIG over the bounds; -ENOTSUP for v != 1. */
int kube_node_gpus_parse(const char *text, size_t len, struct kube_node_gpus *ret, char *err, size_t errlen);
void kube_node_gpus_done(struct kube_node_gpus *g);

/* A pod's GPU need and placement. */
struct kube_pod_container {
        char name[64];
        unsigned whole;        /* whole GPUs (nvidia.com/gpu, or core requests >= 100 as 100s) */
        unsigned core_percent; /* fractional compute share of one GPU, 0 none */
        uint64_t memory_mib;   /* fractional memory on one GPU, 0 none */
        unsigned n_assigned;   /* GPU indices assigned (0: not assigned) */
        int assigned[8];
};

struct kube_pod {
        char namespace_[64], name[256], node[256];
        char phase[16];
        bool assigned_known; /* an assignment annotation names its GPUs */
        bool confirmed;      /* the agent confirmed the assignment (…/assigned = "true") */
        char source[16];     /* "gpuslice", "gpushare", "gpu-manager", "" */
        unsigned n;
        struct kube_pod_container c[KUBE_CONTAINERS_MAX];
};

/* From a (slim or full) pod object. 0, -EINVAL (no name), -ENODATA (no GPU request at all).
 * Malformed annotations are ignored (the pod is then unassigned), never fatal. */
int kube_pod_parse(const json_t *pod, struct kube_pod *ret);

/* Format an assignment annotation value. *ret malloc'ed. */
int kube_assignment_format(const char *node, uint64_t time_ms, const struct kube_pod *p, char **ret);

/* ---- the cluster table -------------------------------------------------------------------- */

struct kube_gpu_use {
        uint64_t memory_alloc_mib;
        unsigned core_alloc_percent;
        bool whole; /* held whole by one pod */
        unsigned n_pods;
        unsigned *pods; /* indices into kube_cluster.pods */
};

struct kube_cluster_node {
        char name[256];
        struct kube_node_gpus g;
        bool published;           /* has a valid annotation */
        char error[128];          /* why the annotation was refused */
        struct kube_gpu_use *use; /* g.n entries */
        unsigned n_unplaced;      /* pods on this node holding GPU resources with no known GPU */
        unsigned *unplaced;
};

struct kube_cluster {
        unsigned n_nodes;
        struct kube_cluster_node *nodes;
        unsigned n_pods;
        struct kube_pod *pods;
        unsigned n_pending; /* pods with GPU requests not bound to a node */
        unsigned *pending;
};

/* Build from arrays of node and pod objects (borrowed). Pods in phase Succeeded/Failed are left
 * out. Nodes sorted by name. 0 or -ENOMEM. */
int kube_cluster_build(const json_t *nodes, const json_t *pods, struct kube_cluster *ret);
/* The same from pods already parsed (kube_pod_parse): pods is a malloc'ed array of np that the
 * cluster takes over (freed by kube_cluster_done, also on failure). */
int kube_cluster_build_pods(const json_t *nodes, struct kube_pod *pods, size_t np, struct kube_cluster *ret);
void kube_cluster_done(struct kube_cluster *c);
