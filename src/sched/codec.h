/* SPDX-License-Identifier: Apache-2.0 */
/*
 * codec — JSON in and out of the scheduler extender: the kube-scheduler extender protocol
 * (ExtenderArgs, ExtenderFilterResult, HostPriorityList, ExtenderBindingArgs/Result, with the Go
 * field names exactly as kube-scheduler 1.20 sends and expects them, both nodeCacheCapable forms),
 * a pod's GPU request (every profile's resource names), the node GPU annotation, the pod
 * assignment annotation (ours, and gpu-manager's / gpushare's read for migrating clusters), and a
 * JSON snapshot of nodes and pods that feeds the model without an API server (tests, bench).
 *
 * Every input is untrusted: sizes are bounded (SCHED_CODEC_MAX_*), errors are one line naming the
 * field. Library code: no I/O, no logging.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#include "sched/decide.h"
#include "sched/model.h"

/* Annotations, as docs/cluster.md defines them (the cluster view, src/kube/cluster.h). Node: the GPUs
 * a node publishes: {"v":1,"gpus":[{"i","uuid","model","mem" (MiB),"health" ("ok" or why not)}],
 * "links":"row;row" (row i: links from GPU i to i+1..n-1, comma-separated topo link names)}.
 * Pod: where the extender put it: {"v":1,"node","time" (ms),"containers":[{"name","gpus":[i...],
 * "core" (percent; 100 for whole GPUs),"mem" (MiB; 0 for whole GPUs)}]}. */
#define SCHED_ANNOT_NODE_GPUS "gpuslice.io/gpus"
#define SCHED_ANNOT_ASSIGNMENT "gpuslice.io/assignment"
#define SCHED_ANNOT_ASSIGNED "gpuslice.io/assigned" /* "false" until the agent honoured it */
#define SCHED_ANNOT_POLICY "gpuslice.io/scheduling-policy"
#define SCHED_NODE_ANNOT_VERSION 1
#define SCHED_ASSIGN_ANNOT_VERSION 1

#define SCHED_CODEC_MAX_BODY (1u << 20)       /* = HTTP_MAX_BODY */
#define SCHED_CODEC_MAX_NODES 20000           /* node names in one ExtenderArgs */
#define SCHED_CODEC_MAX_ANNOT (64u << 10)     /* one annotation value */
#define SCHED_CODEC_MAX_SNAPSHOT (256u << 20) /* a snapshot file */

/* Memory units of the fractional resources (MiB per unit); defaults in sched_units_default. */
struct sched_units {
        uint32_t gpuslice_mib; /* gpuslice.io/gpu-memory, 256 */
        uint32_t tencent_mib;  /* tencent.com/vcuda-memory, 256 */
        uint32_t aliyun_mib;   /* aliyun.com/gpu-mem, 1024 */
};
void sched_units_default(struct sched_units *ret);

/* Everything the extender needs of a Pod object. */
struct sched_pod_view {
        char uid[128], ns[254], name[254];
        char resource_version[32];
        char node_name[SCHED_NAME_MAX]; /* spec.nodeName, "" when pending */
        bool terminated;                /* status.phase Succeeded or Failed */
        struct sched_request req;
        bool has_policy;
        enum sched_policy policy; /* the pod's gpuslice.io/scheduling-policy */
        bool has_assignment;      /* from gpuslice.io/assignment, or gpu-manager / gpushare */
        char assigned_node[SCHED_NAME_MAX];
        struct sched_assignment assign;
        enum sched_source source;   /* which of those */
        bool confirmed;             /* its "assigned" annotation says "true" (the node agent honoured it) */
        char assignment_error[160]; /* why a malformed assignment annotation was ignored ("" none) */
};

/*
 * Decode a Pod (json text of the object). Containers without GPU resources are skipped (req.n
 * counts the GPU ones; an assignment is indexed like req). 0, or -EINVAL with err filled:
 * quantities that are not whole numbers, a fractional compute above 100 not a multiple of 100,
 * whole and fractional resources in one container, too many GPU containers. A malformed
 * assignment annotation (ours, gpu-manager's, gpushare's) is not an error: the pod reads as
 * unassigned and ret->assignment_error says why.
 */
int sched_pod_decode(const char *json, size_t len, const struct sched_units *u, struct sched_pod_view *ret,
                     struct gs_error *err);
/* The same from a parsed jansson object (json_t *), for callers holding one. */
int sched_pod_decode_json(const void *pod_json, const struct sched_units *u, struct sched_pod_view *ret,
                          struct gs_error *err);
/* As model input (pointers into v). */
void sched_pod_view_info(const struct sched_pod_view *v, struct sched_pod_info *ret);

/* Node annotation value → node info (name set by the caller). 0 or -EINVAL with err. */
int sched_node_annotation_decode(const char *value, size_t len, struct sched_node_info *ret, struct gs_error *err);
/* The same annotation from node info (malloc'ed, caller frees). 0 or -ENOMEM. */
int sched_node_annotation_encode(const struct sched_node_info *info, char **ret);

/*
 * The annotations bind writes, as a JSON object {"key": "value", ...} (malloc'ed): always
 * gpuslice.io/assignment and gpuslice.io/assigned="false"; plus gpu-manager's (tencent.com/predicate-gpu-idx-<i>, predicate-node,
 * predicate-time, gpu-assigned=false) for the tencent profile and gpushare's
 * (ALIYUN_COM_GPU_MEM_IDX/_POD/_ASSUME_TIME/_ASSIGNED=false) for the aliyun profile.
 */
int sched_assignment_annotations(const struct sched_request *req, const struct sched_assignment *a,
                                 const struct sched_node *n, const char *node_name, uint64_t now_ns,
                                 const struct sched_units *u, char **ret);

/* ---- extender protocol ---- */

struct sched_ext_args {
        struct sched_pod_view pod;
        bool node_cache; /* NodeNames given (Nodes null) */
        size_t n_nodes;
        char **node_names; /* n_nodes names */
        void *nodes_items; /* json_t array of Node objects when !node_cache (borrowed by replies) */
        void *root;        /* owning json_t */
};

/* Decode ExtenderArgs (filter, prioritize). 0 or -EINVAL/-E2BIG with err. */
int sched_ext_args_decode(const char *body, size_t len, const struct sched_units *u, struct sched_ext_args *ret,
                          struct gs_error *err);
void sched_ext_args_done(struct sched_ext_args *a);

/* Filter outcome per node of the args (same order). */
struct sched_ext_node_result {
        enum sched_verdict verdict;
        const char *reason; /* for failures */
};

/* ExtenderFilterResult in the form the args came in (NodeNames or Nodes). error non-NULL: only
 * Error set (every node fails). Malloc'ed text. */
int sched_ext_filter_encode(const struct sched_ext_args *a, const struct sched_ext_node_result *res, const char *error,
                            char **ret, size_t *ret_len);
/* HostPriorityList: [{"Host","Score"}] for names[i] / scores[i]. */
int sched_ext_prioritize_encode(char *const *names, const int *scores, size_t n, char **ret, size_t *ret_len);

struct sched_ext_bind_args {
        char pod_name[254], pod_namespace[254], pod_uid[128], node[SCHED_NAME_MAX];
};
int sched_ext_bind_decode(const char *body, size_t len, struct sched_ext_bind_args *ret, struct gs_error *err);
/* ExtenderBindingResult {"Error": error or ""}. */
int sched_ext_bind_encode(const char *error, char **ret, size_t *ret_len);

/* ExtenderPreemptionArgs: the pod and, per candidate node, the victims kube-scheduler would evict
 * there (NodeNameToMetaVictims: pod UIDs, with nodeCacheCapable; NodeNameToVictims: full pods
 * otherwise) and its PodDisruptionBudget violation count. Strings point into root. */
#define SCHED_CODEC_MAX_VICTIMS 100000 /* victims in one request, all nodes together */
struct sched_ext_victims {
        const char *node;
        size_t n_uids;
        const char **uids;
        long long pdb_violations;
};
struct sched_ext_preempt_args {
        struct sched_pod_view pod;
        size_t n_nodes;
        struct sched_ext_victims *nodes;
        void *root; /* owning json_t */
};
/* 0, or -EINVAL/-E2BIG with err naming the field. */
int sched_ext_preempt_decode(const char *body, size_t len, const struct sched_units *u,
                             struct sched_ext_preempt_args *ret, struct gs_error *err);
void sched_ext_preempt_args_done(struct sched_ext_preempt_args *a);
/* ExtenderPreemptionResult {"NodeNameToMetaVictims": {node: {"Pods": [{"UID"}], "NumPDBViolations"}}}
 * for the nodes of a with keep[i] (their victims as given). Malloc'ed text. */
int sched_ext_preempt_encode(const struct sched_ext_preempt_args *a, const bool *keep, char **ret, size_t *ret_len);

/* ---- snapshot: {"nodes": [Node...], "pods": [Pod...]} into a model ---- */

/* Loads every node with a gpuslice.io/gpus annotation and every pod; counts what it loaded.
 * 0 or -EINVAL with err (the first bad object named). */
int sched_snapshot_load(struct sched_model *m, const char *json, size_t len, const struct sched_units *u,
                        size_t *ret_nodes, size_t *ret_pods, struct gs_error *err);
/* A Node object's GPU annotation into node info; -ENOENT when it has none. */
int sched_node_decode_json(const void *node_json, struct sched_node_info *ret, struct gs_error *err);
