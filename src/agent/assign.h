/* SPDX-License-Identifier: Apache-2.0 */
/*
 * assign — the node agent honours the GPU(s) the scheduler extender assigned (docs/scheduler.md,
 * "On the node"). The extender writes gpuslice.io/assignment (and gpu-manager's or gpushare's
 * annotations) on a pod before it binds it; kubelet's Allocate names only device IDs, never the
 * pod. This module matches each GetPreferredAllocation / Allocate call to the pod kubelet is
 * admitting, steers the call to the assigned GPU(s), refuses IDs that contradict the assignment,
 * and marks the pod assigned once every GPU resource of it was handed out.
 *
 * Two halves:
 *   assign.c        pure: a pod object → its candidate slots (assign_pod_parse), and the match of
 *                   one call against the candidates (assign_match). No I/O, no logging, no globals.
 *   assign-watch.c  the agent's side: an informer of the pods bound to this node (src/kube, on the
 *                   publisher's API client), kubelet's PodResources as evidence of which pod is
 *                   being admitted, the hooks the handlers call, the patcher thread, metrics.
 *
 * Must never: hand out a GPU other than the assigned one to a pod that has an assignment, block a
 * handler longer than a bounded timeout, or change anything for pods (or nodes) without one.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "agent/plugin.h"
#include "cluster/cluster.h"

#define ASSIGN_CONTAINERS_MAX CLUSTER_CONTAINERS_MAX /* GPU containers of one pod */
#define ASSIGN_GPUS_MAX CLUSTER_GPUS_MAX             /* GPUs of one container */
#define ASSIGN_PODS_MAX 256                          /* candidates considered per call (pending pods on one node) */
#define ASSIGN_OWNER_MAX 384                         /* "namespace/pod/container" */

/* The resource names this agent serves (plugin options); "" = none of that kind. */
struct assign_names {
        const char *name[_PLUGIN_KIND_MAX];
        uint32_t memory_mib; /* MiB per ID of the memory resource (sharing.memory-unit); 0 = the profile's */
};

struct assign_container {
        char name[64];
        uint8_t index;                  /* in the pod's cluster_request (cluster_pod_decode_json) */
        unsigned req[_PLUGIN_KIND_MAX]; /* device IDs kubelet asks of each resource (limits; 0 none) */
        uint64_t gpus;                  /* assigned NVML indices (bit i = index i) */
        bool done[_PLUGIN_KIND_MAX];    /* honoured by this agent (an Allocate answered) */
};

/* A pod bound to this node with an assignment for it. */
struct assign_pod {
        char ns[64], name[254], uid[64], rv[32];
        int64_t created;     /* metadata.creationTimestamp, Unix seconds (kubelet admits in this order) */
        uint64_t assumed_ms; /* when it was decided (the assignment's "time", the profiles' assume time) */
        unsigned flags;      /* CLUSTER_FLAG_*: the annotations to set to "true" */
        bool confirmed;      /* every one of them is "true" already: not a candidate any more */
        unsigned n;          /* the GPU containers that ask a resource of this agent, in spec order */
        struct assign_container c[ASSIGN_CONTAINERS_MAX];
};

/* The cluster codec's units as this agent serves them: its whole-GPU name when not nvidia.com/gpu, its
 * memory unit for its memory resource. */
/* Thread: any; lock: none (pure). */
void assign_units(const struct assign_names *names, struct cluster_units *ret);

/* From a (slim or full) pod object: a pod of node `node` with an assignment (confirmed or not), or
 * -ENODATA (no GPU resource of ours, no assignment for this node, finished), -EINVAL
 * (no name, a request or an assignment the cluster codec refuses). The pod is read by the one cluster
 * codec (cluster_pod_decode_json, src/cluster): gpuslice.io/assignment (by the extender or recorded
 * by an agent), else gpu-manager's tencent.com/predicate-gpu-idx-<container index> with
 * tencent.com/predicate-node, else gpushare's ALIYUN_COM_GPU_MEM_IDX (with spec.nodeName). A
 * container whose assignment does not name every GPU it needs (whole: as many as it asks, up to
 * CLUSTER_GPUS_MAX; fractional: exactly one) makes the pod -EINVAL: malformed assignments are never
 * honoured halfway. Every input is untrusted. */
/* Thread: any; lock: none (pure). */
int assign_pod_parse(const json_t *pod, const char *node, const struct assign_names *names, struct assign_pod *ret);
/* The same from the codec's view of the pod. */
/* Thread: any; lock: none (pure). */
int assign_pod_from_view(const struct cluster_pod *v, const char *node, const struct assign_names *names,
                         struct assign_pod *ret);
/* Only what the pod asks of this agent, assignment or not (no flags, no GPUs): 0, -ENODATA (finished,
 * on another node, nothing of ours), -EINVAL (no name, a container of ours without one). */
/* Thread: any; lock: none (pure). */
int assign_pod_requests(const struct cluster_pod *v, const char *node, const struct assign_names *names,
                        struct assign_pod *ret);

/* Which pod's containers kubelet lists, and what they hold (PodResources List): evidence of the pod
 * being admitted (kubelet adds a pod to its pod manager, which PodResources lists, right before it
 * admits it, and inserts a container's devices right after its Allocate answered). */
struct assign_seen_container {
        char ns[64], pod[254], container[64];
        bool holds[_PLUGIN_KIND_MAX]; /* devices of our resource of that kind */
};
struct assign_seen {
        size_t n;
        struct assign_seen_container *c;
};

struct assign_call {
        enum plugin_kind kind;
        unsigned size;     /* device IDs asked */
        bool allocate;     /* Allocate (ids_gpus known) or GetPreferredAllocation */
        uint64_t ids_gpus; /* Allocate: NVML indices the IDs are on */
};

enum assign_verdict {
        ASSIGN_NONE,   /* no pod with an assignment fits this call: node-local placement */
        ASSIGN_MATCH,  /* pod/container; hand out exactly `gpus` */
        ASSIGN_REFUSE, /* the IDs contradict the assignment of the pod kubelet is admitting */
};

struct assign_decision {
        enum assign_verdict verdict;
        int pod, container; /* indices into the candidates (MATCH, REFUSE) */
        uint64_t gpus;      /* NVML indices assigned to it */
        unsigned n_candidates;
        bool tie; /* several candidates fitted: the order chose (see assign_match) */
        char why[400];
};

/* Match one call. Candidate slot of a pod: its first container (spec order) that still has a GPU
 * resource of ours not held (done, or held per `seen`) — kubelet allocates containers in order —
 * when that container asks `kind` with exactly `size` IDs not yet held. With `seen` (may be NULL),
 * only pods kubelet lists count, and when it lists none of them the verdict is NONE. At Allocate,
 * candidates whose assigned GPUs the IDs are on win (whole: exactly that set; fractional: the one
 * GPU); none → REFUSE naming the first candidate. Several left → the order: creation time, assume
 * time, namespace/name, uid (the first wins; `tie`). At Allocate every survivor has the same GPUs
 * for this call, so the order can never hand out a GPU assigned to another pod. 0 or -EINVAL. */
/* Thread: any; lock: none (pure). */
int assign_match(const struct assign_pod *pods, size_t n, const struct assign_seen *seen,
                 const struct assign_call *call, struct assign_decision *ret);

/* Must a call that no cached candidate fits ask the API server (a LIST of the node's pods) before
 * it is taken as node-local? The informer's cache answers alone when it has completed its first
 * list and every pod kubelet's pod manager lists (seen: PodResources; the pod kubelet is admitting
 * is among them) is one the cache knows (`known`: cached, or found without an assignment by an
 * earlier LIST). A LIST is needed when the cache is not synced, when there is no PodResources answer
 * (seen NULL: nothing tells whether kubelet saw a pod before our watch did), or when kubelet lists a
 * pod the cache does not know (it did). *ret_unknown: the index in seen->c of the first unknown pod,
 * -1 when none (may be NULL). */
/* Thread: any; lock: none (pure). */
bool assign_need_list(bool synced, const struct assign_seen *seen,
                      bool (*known)(const char *ns, const char *pod, void *userdata), void *userdata,
                      long *ret_unknown);

/* "0,2" for a set of NVML indices ("-" when empty); returns buf. */
/* Thread: any; lock: none (pure). */
char *assign_format_gpus(uint64_t set, char *buf, size_t len);

/* Is every GPU resource of every container of pod held (done)? */
/* Thread: any; lock: none (pure). */
bool assign_pod_complete(const struct assign_pod *pod);

/* ---- the agent's side (assign-watch.c) ---------------------------------------------------- */

struct assign;
struct devices;
struct kube_client;
struct podres_service;

/* Start watching the pods bound to `node` through `client` (borrowed; must outlive the watcher), for
 * the devices of table d and the resources `names` (both borrowed). podres: the agent's PodResources service
 * (podres.h; borrowed, outlives the watcher; evidence and verification). NULL on failure (logged). */
/* Thread: the loop (agent.c, publish part); lock: none (starts the informer and the patcher). */
struct assign *assign_start(struct kube_client *client, const char *node, const struct devices *d,
                            const struct assign_names *names, struct podres_service *podres);
/* Thread: the loop, after every server stopped; lock: takes a->lock to stop the patcher, then joins it. */
struct assign *assign_stop(struct assign *a); /* NULL-safe; returns NULL */

/* One handler call's view, made by assign_call_begin and passed as a parameter to whatever decides
 * for the call. assign_call_begin runs before the handler takes the device lock (it may ask the API
 * server and PodResources, each bounded); check under the lock turns the verdict into an answer;
 * commit after a successful Allocate; end always. a == NULL: every step is a no-op and the handler
 * keeps its node-local behaviour. */
struct assign_ctx {
        struct assign *a;
        struct assign_call call;
        struct assign_decision d;
        bool active;           /* a decision was made (a pod with an assignment could be the one) */
        struct assign_pod pod; /* the matched pod (a copy) */
        uint64_t allowed;      /* MATCH: table indices the call may use */
        /* For fractional pairing (share.c), set on a MATCH made with kubelet's PodResources answer
         * (evidence): the container this call is for ("ns/pod/container"), whether it asks the other
         * fractional resource too, and whether that half was handed out already (kubelet lists it,
         * or this agent answered it) — then this call is that container's second half. */
        bool evidence;
        char owner[ASSIGN_OWNER_MAX];
        bool other_asked, other_held;
};
/* Thread: a gRPC handler, before the device lock; lock: a->lock briefly; waits on PodResources and a LIST, each bounded. */
void assign_call_begin(struct assign_ctx *ctx, struct assign *a, enum plugin_kind kind, bool allocate, unsigned size,
                       char *const *ids, size_t n_ids);
/* Under the device lock. RPC_OK, or the refusal (FAILED_PRECONDITION) written to st. */
/* Thread: a gRPC handler; lock: the device lock held. */
enum rpc_code assign_call_check(struct assign_ctx *ctx, const char *what, struct gs_error *st);
/* Thread: a gRPC handler, after its answer; lock: takes a->lock (alone, or under the device lock). */
void assign_call_commit(struct assign_ctx *ctx);
/* Thread: a gRPC handler; lock: none. */
void assign_call_end(struct assign_ctx *ctx);

/* Narrow a GetPreferredAllocation's available IDs to the assigned GPUs (in place: ids[0..*n) is
 * permuted, the kept ones first, *n lowered; the caller restores the count before freeing). A
 * must-include ID off the assignment is a refusal. d: the device table the IDs name. Under the device lock. */
/* Thread: a gRPC handler; lock: the device lock held. */
enum rpc_code assign_call_narrow(struct assign_ctx *ctx, const struct devices *d, char **avail, size_t *n_avail,
                                 char **must, size_t n_must, const char *what, struct gs_error *st);

/* For pairing (issue 14): the GPUs (NVML indices) the scheduler assigned to container `container`
 * of pod ns/name on this node, from the watched pods (confirmed ones too). Returns how many (≤ max)
 * or -ENOENT (unknown pod or container, no assignment), -ENODEV (no watcher). Any thread. */
/* Thread: any (share.c's handlers); lock: the informer's, inside kube_informer_get. */
int assign_lookup_container(struct assign *a, const char *ns, const char *pod, const char *container, int *ret_gpus,
                            unsigned max);
