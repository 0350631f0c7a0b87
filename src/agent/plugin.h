/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plugin — what the kubelet DevicePlugins (API v1beta1) of one node share: their options, the
 * allocation record (who holds which device ID: Allocate answers, PodResources), the call counters,
 * the scheduler's assignment watcher (assign.h), and the handlers every resource serves alike
 * (GetDevicePluginOptions, ListAndWatch, PreStartContainer) over the device table (devices.h).
 * The resources' own handlers are whole.c (nvidia.com/gpu) and share.c (core percent and memory
 * units, on the same table and lock: whole and fractional use of one GPU exclude each other).
 *
 * struct plugin is plugin.c's: no other file reads a field of it. Its data is guarded by the device
 * table's lock (devices_lock(plugin_devices(p))); a function that needs the lock held says so.
 * Must never: trust a request (every ID is checked against the table), offer or hand out an
 * unhealthy GPU, block on NVML or the network while holding the lock.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/devices.h"
#include "cluster/cluster.h"
#include "rpc/rpc.h"
#include "state/state.h"

#define PLUGIN_API_VERSION "v1beta1"
/* A stream sends up to PLUGIN_WATCH_BURST lists at once, then at most one per PLUGIN_WATCH_MIN_MS
 * (each carries every change made meanwhile). */
#define PLUGIN_WATCH_MIN_MS 100
#define PLUGIN_WATCH_BURST 4
/* A stream re-reads the generation at least this often even if nobody woke it. */
#define PLUGIN_WATCH_SAFETY_MS 60000

/* Which resource a service speaks for. */
enum plugin_kind {
        PLUGIN_WHOLE = 0, /* nvidia.com/gpu: one ID per GPU (its UUID) */
        PLUGIN_CORE,      /* gpuslice.io/gpu-core: 100 IDs per GPU, 1 % each */
        PLUGIN_MEMORY,    /* gpuslice.io/gpu-memory: one ID per memory unit of a GPU */
        _PLUGIN_KIND_MAX,
        /* A MIG resource (migdev.h): not one of the fixed kinds above, any number of them, each its
         * service in plugin_mig_service (nvidia.com/mig-<profile>, or nvidia.com/gpu under `single`). */
        PLUGIN_MIG = _PLUGIN_KIND_MAX,
        /* Time-slicing replicas under their own name (timeslice.h: nvidia.com/gpu.shared): one service, not one of
         * the fixed kinds either. Replicas under the whole-GPU name are that resource's IDs. */
        PLUGIN_REPLICA,
};

#define PLUGIN_MIG_MAX MIG_MAX_PROFILES /* MIG resources: one per profile at most */
#define PLUGIN_REPLICA_SETS 2           /* replica sets: sharing.timeSlicing and sharing.mps */

struct plugin_options {
        char resource[320];        /* "nvidia.com/gpu" */
        char core_resource[320];   /* "" = no core resource (profile) */
        char memory_resource[320]; /* "" = no memory resource */
        uint64_t memory_unit;      /* bytes one memory ID stands for */
        bool spread;               /* fractional placement: emptiest GPU first (else fullest: binpack) */
        /* a packing policy's GPU choice for a share (CLUSTER_POLICY_FGD, _FRAG: the extender's own,
         * sched_pack_share_gpu); CLUSTER_POLICY_BINPACK: none, the placement order above alone */
        enum cluster_policy pack;
        bool limit_when_alone;   /* limits file core-policy hard (else elastic) */
        char interposer[4096];   /* host path of libgpuslice-cuda.so */
        char nvml_standin[4096]; /* host path of libgpuslice-nvml.so next to it; "" = not mounted (node_nvml_libs) */
        char nvml_real[4096];    /* host path of the driver's libnvidia-ml.so.<version>; "" = unknown */
        char limits_root[4096];  /* host dir of the per-container dirs (<state-dir>/containers) */
        char journal_dir[4096];  /* dir of the fractional journal (the state dir); "" = none */
        bool ids_by_index;       /* NVIDIA_VISIBLE_DEVICES / CDI names by NVML index instead of UUID */
        bool list_envvar;        /* NVIDIA_VISIBLE_DEVICES + device specs */
        bool list_cdi;           /* cdi_devices */
        char cdi_kind[640];      /* "vendor/class" */
        char dev_root[4096];     /* host root holding /dev ("/" on a real node) */
};

/* Use per device according to the allocation record (table indices). */
struct plugin_usage {
        uint16_t core[DEVICES_MAX]; /* core IDs held */
        uint16_t mem[DEVICES_MAX];  /* memory IDs held */
        uint64_t whole;             /* devices held whole (the whole-GPU resource), replicated GPUs included */
        uint64_t plain;             /* GPUs held whole by their own ID (not a replica) */
        uint64_t replica;           /* GPUs with any replica held (time-slicing) */
        uint16_t rep[DEVICES_MAX];  /* replicas held per GPU */
        uint64_t frac;              /* devices with any core or memory ID held */
};

/* Kubelet's calls, counted for `gpuslice status`. */
enum plugin_call {
        PLUGIN_CALL_PREFERRED,
        PLUGIN_CALL_ALLOCATE
};
struct plugin_counters {
        uint64_t allocate, preferred, errors;
};

struct plugin;
/* Thread: any; lock: the device lock held. */
struct assign; /* assign.h: the scheduler's assignments (NULL: node-local only) */

/* The userdata of a resource's shared handlers (options, ListAndWatch, PreStartContainer). */
struct plugin_service {
        struct plugin *p;
        enum plugin_kind kind;
        unsigned mig; /* PLUGIN_MIG: which MIG resource (plugin_mig_*) */
        unsigned set; /* PLUGIN_REPLICA: which replica set (plugin_replica_*) */
};

/* The services' core on table d (borrowed: it outlives the plugin). 0 or -ENOMEM. */
/* Thread: the loop, at start; lock: none. */
int plugin_new(struct devices *d, const struct plugin_options *opt, struct plugin **ret);
/* Thread: the loop, at teardown; lock: none. */
struct plugin *plugin_free(struct plugin *p); /* NULL-safe; returns NULL */

/* Thread: any; lock: none (fixed). */
struct devices *plugin_devices(const struct plugin *p);
/* Thread: any; lock: none (fixed). */
struct plugin_service *plugin_service(struct plugin *p, enum plugin_kind kind);
/* The resource name a kind speaks for ("" when the profile has none). Fixed for the plugin's life:
 * any thread. */
/* Thread: any; lock: none (fixed for the plugin's life). */
const char *plugin_resource(const struct plugin *p, enum plugin_kind kind);

/* ---- MIG resources (migdev.c decides them before serving; fixed for the plugin's life) ---- */
/* A MIG resource serving the table's MIG devices of `profile` (NULL: every MIG device, the `single`
 * strategy; `nothing`: it lists no device — a node that does not fit its strategy). Before serving.
 * Its index, or -ENOSPC / -EINVAL. */
/* Thread: the loop, at start; lock: none (nothing served yet). */
int plugin_add_mig(struct plugin *p, const char *resource, const char *profile, bool nothing);
/* Thread: any; lock: none (fixed after start). */
unsigned plugin_mig_count(const struct plugin *p);
/* Thread: any; lock: none (fixed after start). */
const char *plugin_mig_resource(const struct plugin *p, unsigned k);
/* Thread: any; lock: none (fixed after start). */
struct plugin_service *plugin_mig_service(struct plugin *p, unsigned k);
/* Whether service svc lists device i: whole GPUs not in MIG mode for the whole kind (and the
 * fractional ones), the MIG devices of its profile for a MIG resource. Any thread. */
/* Thread: any; lock: none (fixed). */
bool plugin_serves(const struct plugin *p, const struct plugin_service *svc, unsigned i);
/* The resource that hands device i out ("" none): the record's key for it. Any thread. */
/* Thread: any; lock: none (fixed). */
const char *plugin_device_resource(const struct plugin *p, unsigned i);

/* ---- replica sets (timeslice.h: time-slicing, MPS; fixed for the plugin's life, set before serving) ---- */
/* A set of replicated GPUs: the GPUs of mask `gpus` (whole GPUs, not in MIG mode) are advertised as n replicas each
 * (IDs <uuid>::<j>) under `resource`: the whole-GPU resource's own name, or another one served by PLUGIN_REPLICA
 * (the set's service, plugin_replica_service); nothing else hands them out (no fraction, no whole ID, no DRA claim).
 * fail_gt_one: a request of more than one replica is refused (NVIDIA's failRequestsGreaterThanOne). At most
 * PLUGIN_REPLICA_SETS sets, their GPUs and names disjoint (one GPU, one mode). The set's index (0, 1, in the order
 * added), or -EINVAL (n 0 or too many, a MIG device in the mask), -ENOSPC (sets full), -EEXIST (a GPU or the name
 * already in another set). */
/* Thread: the loop (start); lock: none (before serving). */
int plugin_set_replicas(struct plugin *p, const char *resource, unsigned n, bool fail_gt_one, uint64_t gpus);
/* Thread: any; lock: none (fixed once serving) — every accessor below. */
uint64_t plugin_replicated(const struct plugin *p);                    /* every set's GPUs (0: off) */
unsigned plugin_replica_sets(const struct plugin *p);                  /* how many sets */
int plugin_replica_set_of(const struct plugin *p, unsigned gpu);       /* table index gpu's set, -1 none */
int plugin_replica_find(const struct plugin *p, const char *resource); /* the set of that name, -1 none */
unsigned plugin_replicas_of(const struct plugin *p, unsigned gpu);     /* replicas of GPU gpu (0: not replicated) */
uint64_t plugin_replica_gpus(const struct plugin *p, unsigned set);
unsigned plugin_replica_count(const struct plugin *p, unsigned set); /* replicas per GPU (0: no such set) */
bool plugin_replica_fail_gt_one(const struct plugin *p, unsigned set);
const char *plugin_replica_resource(const struct plugin *p, unsigned set); /* the replicas' name ("" none) */
/* The set's name when it is served on its own (renamed: not the whole-GPU name), else "". */
const char *plugin_replica_served(const struct plugin *p, unsigned set);
struct plugin_service *plugin_replica_service(struct plugin *p, unsigned set);
/* MPS (mps.c): set `set`'s replicas are MPS clients of the daemon whose pipe directory on the host is `pipe_dir` and
 * whose /dev/shm is `shm_dir` (Allocate mounts both as NVIDIA's plugin does and sets CUDA_MPS_PIPE_DIRECTORY); ""
 * time-slicing. Before serving. 0, -EINVAL (no such set) or -ENAMETOOLONG. */
/* Thread: the loop (start); lock: none (before serving). */
int plugin_set_replica_mps(struct plugin *p, unsigned set, const char *pipe_dir, const char *shm_dir);
const char *plugin_replica_mps(const struct plugin *p, unsigned set); /* "" time-slicing */
const char *plugin_replica_mps_shm(const struct plugin *p, unsigned set);

/* The options (caller holds the lock: a reload replaces them). */
/* Thread: any; lock: the device lock held. */
const struct plugin_options *plugin_options(const struct plugin *p);
/* A reload: the new options, but the resource names, memory unit, limits root and journal dir are
 * fixed for the plugin's life (kept). Takes the lock. */
/* Thread: the loop (reload); lock: takes the device lock. */
void plugin_set_options(struct plugin *p, const struct plugin_options *o);

/* The allocation record (caller holds the lock; changed only through state.h's functions). */
/* Thread: any; lock: the device lock held. */
struct gpuslice_state *plugin_record(struct plugin *p);
/* Use per device from the record (caller holds the lock); devices another driver holds count as held
 * whole and in fractions. */
/* Thread: any; lock: the device lock held. */
void plugin_usage(const struct plugin *p, struct plugin_usage *ret);
/* The devices the device plugin's own record holds, whole or in fractions (a mask of table indices;
 * caller holds the lock). */
/* Thread: any; lock: the device lock held. */
uint64_t plugin_own_use(const struct plugin *p);
/* The devices another driver on this node holds (the DRA driver's prepared claims, dra-link.c; a mask
 * of table indices): no kind hands them out, ListAndWatch lists them Unhealthy. Caller holds the lock
 * and calls devices_changed when it returns true (the set changed). */
/* Thread: the DRA driver's (dra-link.c); lock: the device lock held. */
bool plugin_set_held_elsewhere(struct plugin *p, uint64_t devices);
/* Thread: any; lock: the device lock held. */
uint64_t plugin_held_elsewhere(const struct plugin *p); /* caller holds the lock */
/* After a PodResources reconcile or a state file load: entries of our fractional resources without
 * a GPU get their GPU index and the share one ID stands for. Returns how many were filled in.
 * Caller holds the lock. */
/* Thread: any; lock: the device lock held. */
size_t plugin_record_fixup(struct plugin *p);

/* Count a call (caller holds the lock); the counters (caller holds the lock). */
/* Thread: any; lock: the device lock held. */
void plugin_count(struct plugin *p, enum plugin_call call, bool ok);
/* Thread: any; lock: the device lock held. */
struct plugin_counters plugin_counters(const struct plugin *p);

/* Kubelet called (GetPreferredAllocation or Allocate, any resource): it has recorded every Allocate
 * answered before (one goroutine admits pods, resource by resource), so the record's entries are
 * settled (state_mark_settled): the next PodResources sync frees those it does not list, without
 * the grace of a fresh answer. Called first by each of those handlers; takes the lock. */
/* Thread: a gRPC handler, first; lock: takes the device lock. */
void plugin_kubelet_called(struct plugin *p);

/* The scheduler's assignments (set before serving, cleared after; the old one is returned). */
/* Thread: the loop (start, teardown); lock: none (no handler runs then). */
struct assign *plugin_set_assign(struct plugin *p, struct assign *a);

/* A whole-GPU Allocate was answered (whole.c, lock held): fn(userdata) runs then (share.c closes
 * its open fractional record: another container came). One observer. */
/* Thread: the loop, at start; lock: none. */
void plugin_on_whole_allocate(struct plugin *p, void (*fn)(void *userdata), void *userdata);
/* Thread: a gRPC handler (whole.c); lock: the device lock held. */
void plugin_whole_allocated(struct plugin *p);

/* Stop: ListAndWatch streams end (teardown). */
/* Thread: the loop, at teardown; lock: none (atomic). */
void plugin_stop(struct plugin *p);

/* Handlers every resource shares (rpc_unary_fn / rpc_stream_fn; userdata: struct plugin_service). */
/* Thread: a gRPC handler; lock: none. */
enum rpc_code plugin_get_options(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                                 struct gs_error *st);
/* Thread: a ListAndWatch stream's thread; lock: takes the device lock per list. */
enum rpc_code plugin_list_and_watch(void *userdata, const uint8_t *req, size_t req_len, struct rpc_stream *s,
                                    struct gs_error *st);
/* Thread: a gRPC handler; lock: none. */
enum rpc_code plugin_pre_start(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                               struct gs_error *st);
/* Add those three of `kind`'s service to a server. */
/* Thread: the loop (register.c); lock: none. */
int plugin_serve_common(struct plugin *p, enum plugin_kind kind, struct rpc_server *s);
/* As plugin_serve_common for one service (a replica set's). */
int plugin_serve_common_svc(struct plugin_service *svc, struct rpc_server *s);

/* The current ListAndWatchResponse of whole GPUs / of one kind, packed. 0 or -ENOMEM. */
/* Thread: a ListAndWatch stream's thread; lock: the device lock held. */
int plugin_pack_devices(struct plugin *p, uint8_t **ret, size_t *ret_len, uint64_t *ret_generation);
/* Thread: a ListAndWatch stream's thread; lock: the device lock held. */
int plugin_pack_devices_kind(struct plugin *p, enum plugin_kind kind, uint8_t **ret, size_t *ret_len,
                             uint64_t *ret_generation);
/* The same for one service (a MIG resource's included). */
/* Thread: a ListAndWatch stream's thread; lock: the device lock held. */
int plugin_pack_devices_svc(struct plugin *p, const struct plugin_service *svc, uint8_t **ret, size_t *ret_len,
                            uint64_t *ret_generation);
