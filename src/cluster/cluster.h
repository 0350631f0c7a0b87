/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cluster — the one codec of the GPU picture gpuslice keeps in the API server (docs/cluster.md):
 * the annotation keys, the node annotation gpuslice.io/gpus (the agent writes it, the extender and
 * `inspect` read it), the pod assignment annotation gpuslice.io/assignment (the extender writes it at
 * bind, the agent writes it for a pod it placed itself, both read it; gpu-manager's and gpushare's
 * annotations are read and written here too), and the request classifier (which resource names ask
 * for GPUs, whole or shared, in which units). The node agent (src/agent), the scheduler extender
 * (src/sched), the node publisher and `gpuslice inspect` all call these functions: a key, a field or
 * a limit exists once.
 *
 * Evolution: both annotations carry "v":1; readers ignore fields they do not know and writers only
 * ever add optional fields within a version (the agent's "by", the extender's "uuids"), so MIG
 * instances and DRA claims can be added to them later without breaking a reader of today. A change
 * an old reader would misread gets a new version, and readers refuse versions they do not know.
 *
 * Every input is untrusted: sizes are bounded (CLUSTER_*_MAX), errors are one line naming the field.
 * Library code (layer 2, jansson): no I/O, no logging, no global state. Must never trust a length or
 * an index it was given.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "topo/topo.h"
#include "util/error.h"

/* ---- keys ---- */

#define CLUSTER_ANN_GPUS "gpuslice.io/gpus"             /* node: its GPUs (below) */
#define CLUSTER_ANN_ASSIGNMENT "gpuslice.io/assignment" /* pod: where its containers are */
#define CLUSTER_ANN_ASSIGNED "gpuslice.io/assigned"     /* pod: "false" until the agent honoured it */
#define CLUSTER_ANN_POLICY "gpuslice.io/scheduling-policy"
/* gpu-manager (TKEStack): per container at position i of spec.containers, "0" or "0,1" */
#define CLUSTER_ANN_TENCENT_IDX_PREFIX "tencent.com/predicate-gpu-idx-"
#define CLUSTER_ANN_TENCENT_NODE "tencent.com/predicate-node"
#define CLUSTER_ANN_TENCENT_TIME "tencent.com/predicate-time" /* ns */
#define CLUSTER_ANN_TENCENT_ASSIGNED "tencent.com/gpu-assigned"
/* gpushare (Aliyun): one GPU for the pod's gpu-mem containers */
#define CLUSTER_ANN_ALIYUN_IDX "ALIYUN_COM_GPU_MEM_IDX"
#define CLUSTER_ANN_ALIYUN_POD "ALIYUN_COM_GPU_MEM_POD"          /* GiB, the pod's total */
#define CLUSTER_ANN_ALIYUN_TIME "ALIYUN_COM_GPU_MEM_ASSUME_TIME" /* ns */
#define CLUSTER_ANN_ALIYUN_ASSIGNED "ALIYUN_COM_GPU_MEM_ASSIGNED"

#define CLUSTER_NODE_VERSION 1
#define CLUSTER_ASSIGNMENT_VERSION 1

/* ---- limits ---- */

#define CLUSTER_GPUS_MAX 64       /* per node, and per container (the allocator's set) */
#define CLUSTER_CONTAINERS_MAX 16 /* GPU-using containers per pod */
#define CLUSTER_NAME_MAX 254      /* node and pod names (DNS subdomain 253) */
#define CLUSTER_UUID_MAX 96
#define CLUSTER_ANNOTATION_MAX (64u << 10) /* one annotation value */
#define CLUSTER_POD_MAX (1u << 20)         /* one Pod object as text (= an extender request body) */

/* ---- bounded JSON reading (also the extender protocol's, src/sched/codec.c) ---- */

/* Parse at most max bytes of JSON text (duplicate keys refused); NULL with err filled. */
json_t *cluster_json_load(const char *text, size_t len, size_t max, struct gs_error *err);
/* A string member into buf; absent or null → "" (0); wrong type, too long or containing NUL → -EINVAL
 * naming what + key. */
int cluster_json_str(const json_t *obj, const char *key, char *buf, size_t len, const char *what, struct gs_error *err);
/* The string value of obj[key], NULL when absent or not a string. */
const char *cluster_json_get(const json_t *obj, const char *key);

/* ---- the request classifier ---- */

/* What a resource asks for. */
enum cluster_res {
        CLUSTER_RES_WHOLE = 0, /* whole GPUs: one per unit */
        CLUSTER_RES_CORE,      /* percent of one GPU; k × 100: k whole GPUs */
        CLUSTER_RES_MEM,       /* memory units on one GPU */
        _CLUSTER_RES_MAX,
};

/* The fractional family a pod's resource names come from. */
enum cluster_profile {
        CLUSTER_PROFILE_NONE = 0, /* only whole GPUs */
        CLUSTER_PROFILE_GPUSLICE, /* gpuslice.io/gpu-core, gpuslice.io/gpu-memory */
        CLUSTER_PROFILE_TENCENT,  /* tencent.com/vcuda-core, tencent.com/vcuda-memory */
        CLUSTER_PROFILE_ALIYUN,   /* aliyun.com/gpu-mem */
};

/* How a cluster names and sizes its GPU resources; defaults in cluster_units_default. */
struct cluster_units {
        uint32_t gpuslice_mib; /* gpuslice.io/gpu-memory, 256 */
        uint32_t tencent_mib;  /* tencent.com/vcuda-memory, 256 */
        uint32_t aliyun_mib;   /* aliyun.com/gpu-mem, 1024 */
        /* a whole-GPU resource name besides nvidia.com/gpu (the agent's resources.whole-gpu-name);
         * NULL or "" none. Borrowed: must outlive every decode that uses it. */
        const char *whole_name;
};
void cluster_units_default(struct cluster_units *ret);
/* "RESOURCE=MIB" (a command line's --memory-unit): the MiB per unit of one memory resource the classifier
 * knows (gpuslice.io/gpu-memory, tencent.com/vcuda-memory, aliyun.com/gpu-mem), 1..2^20. 0 or -EINVAL. */
int cluster_units_set(struct cluster_units *u, const char *arg);

/* The resource names the classifier knows, as indices (0 = not a GPU resource). */
enum cluster_res_name {
        CLUSTER_NAME_NONE = 0,
        CLUSTER_NAME_NVIDIA_GPU,      /* nvidia.com/gpu */
        CLUSTER_NAME_WHOLE_OVERRIDE,  /* cluster_units.whole_name */
        CLUSTER_NAME_GPUSLICE_CORE,   /* gpuslice.io/gpu-core */
        CLUSTER_NAME_GPUSLICE_MEMORY, /* gpuslice.io/gpu-memory */
        CLUSTER_NAME_TENCENT_CORE,    /* tencent.com/vcuda-core */
        CLUSTER_NAME_TENCENT_MEMORY,  /* tencent.com/vcuda-memory */
        CLUSTER_NAME_ALIYUN_MEMORY,   /* aliyun.com/gpu-mem */
        _CLUSTER_NAME_MAX,
};

/* Classify a resource name: its index (CLUSTER_NAME_NONE when not a GPU resource), with what it asks
 * and the family it belongs to (both may be NULL). */
enum cluster_res_name cluster_resource_classify(const char *name, const struct cluster_units *u,
                                                enum cluster_res *ret_kind, enum cluster_profile *ret_profile);
/* The name of an index ("" for NONE; u's whole_name for the override). */
const char *cluster_resource_name(enum cluster_res_name n, const struct cluster_units *u);
/* Could the resource be one of any GPU system's (kept when slimming objects): nvidia.com/gpu,
 * nvidia.com/mig-, gpuslice.io/, tencent.com/vcuda-, aliyun.com/gpu-? */
bool cluster_resource_is_gpu(const char *name);
/* Is an annotation key one of the GPU systems' (gpuslice.io/, tencent.com/, ALIYUN_COM_GPU_MEM_)? */
bool cluster_annotation_is_gpu(const char *key);

/* What one container asks, read from its limits (requests where limits do not name a resource). */
struct cluster_container_req {
        char name[64];      /* container name ("" when unknown) */
        unsigned whole;     /* whole GPUs (nvidia.com/gpu, or core in multiples of 100) */
        unsigned core;      /* percent of one GPU, 1..100; 0 = no compute share asked */
        uint32_t mem_mib;   /* MiB on one GPU; 0 = none asked */
        uint8_t spec_index; /* position in spec.containers (gpu-manager's predicate-gpu-idx-<i>) */
        /* As asked, per kind: the quantity (device IDs kubelet asks of that resource) and which
         * resource name asked it (a device plugin serves one name per kind). */
        uint32_t qty[_CLUSTER_RES_MAX];
        uint8_t res[_CLUSTER_RES_MAX]; /* enum cluster_res_name */
};

/* MIG devices of one profile a pod asks for: nvidia.com/mig-<profile>, summed over its containers. */
#define CLUSTER_MIG_PREFIX "nvidia.com/mig-"
#define CLUSTER_MIG_REQ_MAX 4 /* distinct MIG profiles one pod may ask for */
struct cluster_mig_req {
        char profile[32]; /* "1g.10gb" */
        unsigned count;
};

struct cluster_request {
        unsigned n; /* containers that ask for GPU resources (only those: others are skipped) */
        struct cluster_container_req c[CLUSTER_CONTAINERS_MAX];
        enum cluster_profile profile; /* the fractional family the pod used (NONE for whole only) */
        /* MIG devices asked (nvidia.com/mig-*; kept apart from c[]: a container asking only MIG devices
         * is not counted in n, the agent assigns them by its own preferred allocation) */
        unsigned n_mig;
        struct cluster_mig_req mig[CLUSTER_MIG_REQ_MAX];
};

/* Does the pod ask for any GPU resource (whole, share or MIG device)? */
static inline bool cluster_request_any(const struct cluster_request *r) {
        return r->n > 0 || r->n_mig > 0;
}

static inline bool cluster_request_is_fractional(const struct cluster_container_req *c) {
        return c->whole == 0 && (c->core > 0 || c->mem_mib > 0);
}

/* ---- quantities ---- */

/*
 * A Kubernetes resource quantity ("500m", "1.5", "2Gi", "1e3", "128974848") in thousandths of its unit,
 * rounded up (as the API server rounds a request): "500m" → 500, "2" → 2000, "1Ki" → 1024000. Suffixes:
 * n u m k M G T P E, Ki Mi Gi Ti Pi Ei, or a decimal exponent e/E±N. 0, -EINVAL (not a quantity,
 * negative), -ERANGE (over UINT64_MAX thousandths).
 */
int cluster_quantity_milli(const char *s, uint64_t *ret);

/*
 * What kube-scheduler counts of a pod's CPU and memory (NodeResourcesFit): the containers' requests summed (a
 * limit where a container sets no request, as the API server's defaulting does) or the largest init
 * container's, whichever is more, per resource, plus spec.overhead. CPU in milli-cores, memory in MiB rounded
 * up; a pod asking none: 0. 0, or -EINVAL with err naming the field (not a quantity, out of range).
 */
int cluster_pod_requests(const json_t *spec, uint64_t *ret_cpu_milli, uint64_t *ret_mem_mib, struct gs_error *err);
/* A Node object's status.allocatable CPU (milli-cores) and memory (MiB, rounded down); absent: 0. 0 or -EINVAL. */
int cluster_node_allocatable(const json_t *node_json, uint64_t *ret_cpu_milli, uint64_t *ret_mem_mib,
                             struct gs_error *err);

/* ---- scheduling policy (the pod's gpuslice.io/scheduling-policy) ---- */

enum cluster_policy {
        CLUSTER_POLICY_BINPACK = 0,
        CLUSTER_POLICY_SPREAD,
        /* the cluster-packing policies (src/sched/pack.h, docs/scheduler.md): the published baselines of the
         * openb trace, FGD, and our own fragmentation-aware one */
        CLUSTER_POLICY_RANDOM,
        CLUSTER_POLICY_DOTPROD,
        CLUSTER_POLICY_GPUCLUSTERING,
        CLUSTER_POLICY_GPUPACKING,
        CLUSTER_POLICY_BESTFIT,
        CLUSTER_POLICY_FGD,
        CLUSTER_POLICY_FRAG,
        _CLUSTER_POLICY_MAX,
};
/* "binpack" / "spread": 0 or -EINVAL. */
int cluster_policy_from_name(const char *s, enum cluster_policy *ret);
const char *cluster_policy_name(enum cluster_policy p);

/* ---- where a pod's containers are ---- */

struct cluster_container_assign {
        uint64_t gpus;    /* GPU indices on the node (bit i = NVML index i): one for a share, k for k whole */
        unsigned core;    /* the share's compute percent (0 for whole GPUs) */
        uint32_t mem_mib; /* the share's memory (0 for whole GPUs) */
        bool whole;
};

/* Indexed like the pod's cluster_request. */
struct cluster_assignment {
        unsigned n;
        struct cluster_container_assign c[CLUSTER_CONTAINERS_MAX];
};

/* Who recorded a pod's placement: the annotation it was read from. */
enum cluster_source {
        CLUSTER_SOURCE_NONE = 0,    /* no assignment */
        CLUSTER_SOURCE_GPUSLICE,    /* gpuslice.io/assignment, written by a scheduler (the extender) */
        CLUSTER_SOURCE_GPUSHARE,    /* ALIYUN_COM_GPU_MEM_IDX */
        CLUSTER_SOURCE_GPU_MANAGER, /* tencent.com/predicate-gpu-idx-<i> */
        CLUSTER_SOURCE_AGENT,       /* gpuslice.io/assignment with "by":"agent": the node agent placed it */
};
/* "gpuslice", "gpushare", "gpu-manager", "agent", "" */
const char *cluster_source_name(enum cluster_source s);

/* The "assigned" flag annotations of each system (which a pod carries, which say "true"). */
enum {
        CLUSTER_FLAG_GPUSLICE = 1 << 0,    /* gpuslice.io/assigned */
        CLUSTER_FLAG_GPU_MANAGER = 1 << 1, /* tencent.com/gpu-assigned */
        CLUSTER_FLAG_GPUSHARE = 1 << 2,    /* ALIYUN_COM_GPU_MEM_ASSIGNED */
};
/* The flag annotation's key ("" for anything but one flag). */
const char *cluster_flag_key(unsigned flag);

/* ---- a Pod object ---- */

struct cluster_pod {
        char uid[128], ns[254], name[254];
        char resource_version[32];
        char node_name[CLUSTER_NAME_MAX]; /* spec.nodeName, "" when pending */
        int64_t created;                  /* metadata.creationTimestamp, Unix seconds; 0 absent/malformed */
        bool terminated;                  /* status.phase Succeeded or Failed */
        struct cluster_request req;
        uint64_t cpu_milli, mem_mib; /* CPU and memory requested as kube-scheduler counts them (cluster_pod_requests) */
        bool has_policy;
        enum cluster_policy policy;
        /* The assignment: gpuslice.io/assignment, else gpu-manager's, else gpushare's — the first the
         * pod carries; a malformed one is ignored whole (assignment_error says why). */
        bool has_assignment;
        char assigned_node[CLUSTER_NAME_MAX]; /* the assignment's node (gpushare: spec.nodeName) */
        struct cluster_assignment assign;     /* indexed like req; containers it does not name: no GPUs */
        enum cluster_source source;
        uint64_t assumed_ms;        /* when decided (Unix ms; 0 unknown) */
        unsigned flags;             /* CLUSTER_FLAG_*: the "assigned" annotations the pod carries */
        unsigned flags_true;        /* ... and those that say "true" */
        bool confirmed;             /* its source's flag is "true" (the node agent honoured it) */
        char assignment_error[160]; /* why a malformed assignment annotation was ignored ("" none) */
};

/*
 * Decode a Pod object. Containers without GPU resources are skipped (req.n counts the
 * GPU ones; spec_index says where each is); nvidia.com/mig-<profile> is summed per profile into
 * req.mig. 0, or -EINVAL with err filled: quantities that are not
 * whole numbers, a compute above 100 not a multiple of 100, whole and fractional resources in one
 * container, more than CLUSTER_GPUS_MAX GPUs or CLUSTER_CONTAINERS_MAX GPU containers, a bad policy,
 * an empty or over-long MIG profile, more than CLUSTER_MIG_REQ_MAX MIG profiles or more MIG devices
 * of one profile than CLUSTER_GPUS_MAX × CLUSTER_MIG_MAX.
 * A malformed assignment is not an error (see assignment_error).
 *
 * The assignment annotation: containers are matched by name; a name the pod does not have is
 * ignored (a reader of an older spec may find fields or containers it does not know), a name given
 * twice, an empty or oversized GPU list, an index out of range or repeated, an unknown version or
 * a missing node make the annotation malformed. Whether it names every GPU a container asks is for
 * the reader to judge (the agent honours only complete ones; the extender counts what is there).
 */
int cluster_pod_decode_json(const json_t *pod_json, const struct cluster_units *u, struct cluster_pod *ret,
                            struct gs_error *err);
/* The same from text (at most CLUSTER_POD_MAX bytes). */
int cluster_pod_decode(const char *text, size_t len, const struct cluster_units *u, struct cluster_pod *ret,
                       struct gs_error *err);

/* ---- the assignment annotation: writers ---- */

/*
 * The annotations a scheduler writes for a placement, as a JSON object text {"key":"value",...}
 * (malloc'ed): gpuslice.io/assignment (req's containers with a's GPUs, node, now in ms, per GPU its
 * UUID from uuids[index] when given (n_uuids entries; NULL none)) and gpuslice.io/assigned = "false";
 * plus gpu-manager's (predicate-gpu-idx-<spec index>, predicate-node, predicate-time, gpu-assigned
 * = "false") for the tencent profile and gpushare's (IDX, POD in GiB, ASSUME_TIME, ASSIGNED =
 * "false") for the aliyun profile, so those systems' node agents keep working. 0 or -ENOMEM.
 */
int cluster_bind_annotations(const struct cluster_request *req, const struct cluster_assignment *a, const char *node,
                             uint64_t now_ns, const char *const *uuids, unsigned n_uuids, const struct cluster_units *u,
                             char **ret);

/*
 * What the node agent records for a pod it placed itself (no scheduler's assignment):
 * gpuslice.io/assignment with "by":"agent" (req's containers with held[i] (GPU indices) where
 * non-zero, node, now in ms, the GPUs' UUIDs from uuids[index] when given) and gpuslice.io/assigned
 * = "true" (it holds them already), added to the object out. 0, -ENODATA (nothing held), -ENOMEM.
 */
int cluster_agent_record(const struct cluster_request *req, const uint64_t *held, const char *node, uint64_t now_ns,
                         const char *const *uuids, unsigned n_uuids, json_t *out);

/*
 * The assignment rewritten to what a pod's containers really hold (the agent's repair): for every
 * container i of pod->req with held[i] non-zero, its GPUs in the pod's assignment annotation (other
 * fields, and fields this reader does not know, kept; its stale "uuids" dropped) and, when the pod
 * carries them, gpu-manager's predicate-gpu-idx-<spec index> and gpushare's IDX. annotations: the
 * pod's metadata.annotations. Adds the rewritten keys to the object out.
 * 0, -EINVAL (the pod's assignment annotation is not readable), -ENOMEM.
 */
int cluster_repair_annotations(const json_t *annotations, const struct cluster_pod *pod, const uint64_t *held,
                               json_t *out);

/* ---- the node annotation ---- */

#define CLUSTER_MIG_MAX 8 /* MIG devices per GPU in the node annotation */

/* One MIG device of a GPU in MIG mode, as the node agent serves it (docs/mig.md). */
struct cluster_mig_info {
        unsigned index; /* MIG index on its GPU */
        char uuid[CLUSTER_UUID_MAX];
        char profile[32]; /* "1g.10gb" */
        uint32_t mem_mib;
        bool healthy;     /* its GPU's health */
        char holder[128]; /* "namespace/pod" holding it per the node agent, CLUSTER_MIG_SHARED, "" none */
};

/* The holder of a MIG device shared in fractions (docs/mig.md): held, by no one pod. */
#define CLUSTER_MIG_SHARED "(shared)"

/* A MIG device's holder as the annotation names it ("namespace/pod", each cut to 60 bytes): the agent
 * writes it, the extender compares pods against it. */
void cluster_mig_holder(const char *ns, const char *name, char *buf, size_t len);

struct cluster_gpu_info {
        char uuid[CLUSTER_UUID_MAX];
        char model[64];
        uint32_t mem_mib;
        bool healthy;
        char health[96]; /* "ok" or why not */
        char cc[8];      /* compute capability "8.0", "" unknown */
        bool mig;        /* in MIG mode, served as its MIG devices: never a whole GPU nor shared */
        unsigned n_mig;
        struct cluster_mig_info mig_dev[CLUSTER_MIG_MAX];
        /* Replicated by NVIDIA's sharing (docs/sharing.md; optional fields "sharing", "replicas", "held"
         * within version 1): sharing CLUSTER_SHARING_TIMESLICE or CLUSTER_SHARING_MPS ("" not replicated;
         * another text from a newer agent reads as replicated too), replicas advertised 1..CLUSTER_REPLICAS_MAX,
         * held 0..replicas. Such a GPU is its replicas' (kubelet places them): never a whole GPU nor shared. */
        char sharing[16];
        unsigned replicas, held;
        /* the resource its replicas are advertised as ("nvidia.com/gpu", "nvidia.com/gpu.mps"; a node with both
         * strategies has two): optional field "replica_resource" of a replicated GPU, within version 1, written
         * when it differs from the node's replica_resource; absent (an older agent, or the same), the node's is
         * read into it. "" when not replicated. */
        char replica_resource[64];
};

#define CLUSTER_SHARING_TIMESLICE "time-slicing"
#define CLUSTER_SHARING_MPS "mps"
#define CLUSTER_REPLICAS_MAX 1024 /* = NVCONFIG_REPLICAS_MAX */

/* A node as published: GPUs in NVML index order and the link matrix. */
struct cluster_node_info {
        char name[CLUSTER_NAME_MAX];
        char driver[80]; /* "" unknown */
        unsigned cuda;   /* 1000 × major + 10 × minor, 0 unknown */
        bool nvswitch;
        /* the agent's MIG strategy ("none", "single", "mixed"; "" unknown): under "single" its MIG devices
         * are served as nvidia.com/gpu (optional field "mig_strategy", within version 1) */
        char mig_strategy[16];
        /* the resource the replicated GPUs' replicas are advertised as ("nvidia.com/gpu", "nvidia.com/gpu.shared";
         * "" none or unknown: optional field "replica_resource", within version 1, written with any "sharing"); with
         * both strategies on the node, the set keeping nvidia.com/gpu, else the time-slicing set: a GPU of the other
         * set names its own (cluster_gpu_info.replica_resource), which readers go by */
        char replica_resource[64];
        unsigned n_gpus;
        struct cluster_gpu_info gpu[CLUSTER_GPUS_MAX];
        struct topo_link link[CLUSTER_GPUS_MAX][CLUSTER_GPUS_MAX]; /* symmetric, SELF on the diagonal */
};

/* A node's published info from its topology and health: healthy[i] / reason[i] (may be NULL, or
 * NULL entries: "unhealthy") per GPU of t, placed by NVML index. 0, -E2BIG (more than
 * CLUSTER_GPUS_MAX GPUs), -EINVAL (indices not 0..n-1). The name is left "". */
int cluster_node_from_topo(const struct topo *t, const bool *healthy, const char *const *reason,
                           struct cluster_node_info *ret);
/* The annotation's value (compact JSON, malloc'ed). 0, -E2BIG (over CLUSTER_ANNOTATION_MAX), -ENOMEM. */
int cluster_node_encode(const struct cluster_node_info *info, char **ret);
/* Both at once: what the node agent publishes. 0, -E2BIG, -EINVAL, -ENOMEM. */
int cluster_node_encode_topo(const struct topo *t, const bool *healthy, const char *const *reason, char **ret);
/* The annotation's value → info (ret->name is kept). 0 or -EINVAL with err. */
int cluster_node_decode(const char *value, size_t len, struct cluster_node_info *ret, struct gs_error *err);
/* A Node object's name and annotation; -ENOENT when it has no annotation. */
int cluster_node_decode_json(const json_t *node_json, struct cluster_node_info *ret, struct gs_error *err);
