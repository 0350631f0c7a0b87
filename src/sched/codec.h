/* SPDX-License-Identifier: Apache-2.0 */
/*
 * codec — JSON in and out of the scheduler extender: the kube-scheduler extender protocol
 * (ExtenderArgs, ExtenderFilterResult, HostPriorityList, ExtenderBindingArgs/Result,
 * ExtenderPreemptionArgs/Result, with the Go field names exactly as kube-scheduler 1.20 sends and
 * expects them, both nodeCacheCapable forms), and a JSON snapshot of nodes and pods that feeds the
 * model without an API server (tests, bench). Pods, nodes and their annotations are read with the
 * one cluster codec (src/cluster/cluster.h).
 *
 * Every input is untrusted: sizes are bounded (SCHED_CODEC_MAX_*), errors are one line naming the
 * field. Library code: no I/O, no logging.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/cluster.h"
#include "util/error.h"

#include "sched/decide.h"
#include "sched/model.h"

#define SCHED_CODEC_MAX_BODY (1u << 20)       /* = HTTP_MAX_BODY */
#define SCHED_CODEC_MAX_NODES 20000           /* node names in one ExtenderArgs */
#define SCHED_CODEC_MAX_SNAPSHOT (256u << 20) /* a snapshot file */

/* As model input (pointers into v). */
/* Thread: any; lock: none (pure). */
void sched_pod_view_info(const struct cluster_pod *v, struct sched_pod_info *ret);

/* ---- extender protocol ---- */

struct sched_ext_args {
        struct cluster_pod pod;
        bool node_cache; /* NodeNames given (Nodes null) */
        size_t n_nodes;
        char **node_names; /* n_nodes names */
        void *nodes_items; /* json_t array of Node objects when !node_cache (borrowed by replies) */
        void *root;        /* owning json_t */
        /* the Pod asks kube-scheduler for a soft preference that its Score plugins weigh: a preferred node
         * affinity, a preferred pod (anti-)affinity, or a ScheduleAnyway topology spread constraint */
        bool soft_preferences;
};

/* Decode ExtenderArgs (filter, prioritize). 0 or -EINVAL/-E2BIG with err. A NodeNames array of plain names
 * (printable ASCII without escapes) is read without building a JSON value per name; anything else is
 * decoded the full way (below), so the answer and any error are the same. */
/* Thread: any; lock: none (pure). */
int sched_ext_args_decode(const char *body, size_t len, const struct cluster_units *u, struct sched_ext_args *ret,
                          struct gs_error *err);
/* The same without the fast path (every name through jansson): for tests and the fuzz target, which compare
 * the two. */
/* Thread: any; lock: none (pure). */
int sched_ext_args_decode_full(const char *body, size_t len, const struct cluster_units *u, struct sched_ext_args *ret,
                               struct gs_error *err);
/* Thread: any; lock: none (pure). */
void sched_ext_args_done(struct sched_ext_args *a);

/* Filter outcome per node of the args (same order). */
struct sched_ext_node_result {
        enum sched_verdict verdict;
        const char *reason; /* for failures */
};

/* ExtenderFilterResult in the form the args came in (NodeNames or Nodes). error non-NULL: only
 * Error set (every node fails). Malloc'ed text. */
/* Thread: any; lock: none (pure). */
int sched_ext_filter_encode(const struct sched_ext_args *a, const struct sched_ext_node_result *res, const char *error,
                            char **ret, size_t *ret_len);
/* HostPriorityList: [{"Host","Score"}] for names[i] / scores[i]. */
/* Thread: any; lock: none (pure). */
int sched_ext_prioritize_encode(char *const *names, const int *scores, size_t n, char **ret, size_t *ret_len);

struct sched_ext_bind_args {
        char pod_name[254], pod_namespace[254], pod_uid[128], node[CLUSTER_NAME_MAX];
};
/* Thread: any; lock: none (pure). */
int sched_ext_bind_decode(const char *body, size_t len, struct sched_ext_bind_args *ret, struct gs_error *err);
/* ExtenderBindingResult {"Error": error or ""}. */
/* Thread: any; lock: none (pure). */
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
        struct cluster_pod pod;
        size_t n_nodes;
        struct sched_ext_victims *nodes;
        void *root; /* owning json_t */
};
/* 0, or -EINVAL/-E2BIG with err naming the field. */
/* Thread: any; lock: none (pure). */
int sched_ext_preempt_decode(const char *body, size_t len, const struct cluster_units *u,
                             struct sched_ext_preempt_args *ret, struct gs_error *err);
/* Thread: any; lock: none (pure). */
void sched_ext_preempt_args_done(struct sched_ext_preempt_args *a);
/* ExtenderPreemptionResult {"NodeNameToMetaVictims": {node: {"Pods": [{"UID"}], "NumPDBViolations"}}}
 * for the nodes of a with keep[i] (their victims as given). Malloc'ed text. */
/* Thread: any; lock: none (pure). */
int sched_ext_preempt_encode(const struct sched_ext_preempt_args *a, const bool *keep, char **ret, size_t *ret_len);

/* ---- snapshot: {"nodes": [Node...], "pods": [Pod...]} into a model ---- */

/* Loads every node with a gpuslice.io/gpus annotation and every pod; counts what it loaded.
 * 0 or -EINVAL with err (the first bad object named). */
/* Thread: any; lock: none (pure). */
int sched_snapshot_load(struct sched_model *m, const char *json, size_t len, const struct cluster_units *u,
                        size_t *ret_nodes, size_t *ret_pods, struct gs_error *err);
