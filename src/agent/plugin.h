/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plugin — the kubelet DevicePlugins (API v1beta1) of one node: the device table (health, NUMA
 * node, who holds what) shared by every resource the agent serves, and the protocol handlers
 * (GetDevicePluginOptions, ListAndWatch, GetPreferredAllocation, Allocate, PreStartContainer) over
 * protobuf-c messages. This file's handlers serve whole GPUs; share.h adds the fractional
 * resources (core percent and memory units) on the same table, so whole and fractional use of one
 * GPU exclude each other under one lock.
 *
 * The table is shared by the gRPC call threads, the health thread and the main loop: every access
 * goes through plugin->lock, and every change a kubelet must see goes through plugin_changed:
 * it bumps plugin->generation and wakes the ListAndWatch streams (rpc_streams_wake), which push
 * the full list again, and the agent's loop (change_fd: its "devices changed" hooks).
 * Must never: trust a request (every ID is checked against the table), offer or hand out an
 * unhealthy GPU, block on NVML or the network while holding the lock.
 */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "rpc/rpc.h"
#include "state/state.h"
#include "topo/topo.h"

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
};

struct plugin_options {
        char resource[320];        /* "nvidia.com/gpu" */
        char core_resource[320];   /* "" = no core resource (profile) */
        char memory_resource[320]; /* "" = no memory resource */
        uint64_t memory_unit;      /* bytes one memory ID stands for */
        bool spread;               /* fractional placement: emptiest GPU first (else fullest: binpack) */
        bool limit_when_alone;     /* limits file core-policy hard (else elastic) */
        char interposer[4096];     /* host path of libgpuslice-cuda.so */
        char limits_root[4096];    /* host dir of the per-container dirs (<state-dir>/containers) */
        char journal_dir[4096];    /* dir of the fractional journal (the state dir); "" = none */
        bool ids_by_index;         /* NVIDIA_VISIBLE_DEVICES / CDI names by NVML index instead of UUID */
        bool list_envvar;          /* NVIDIA_VISIBLE_DEVICES + device specs */
        bool list_cdi;             /* cdi_devices */
        char cdi_kind[640];        /* "vendor/class" */
        char dev_root[4096];       /* host root holding /dev ("/" on a real node) */
};

struct plugin_gpu {
        char id[96]; /* device ID = GPU UUID */
        int index;   /* NVML index */
        int minor;   /* /dev/nvidia<minor>, -1 unknown */
        int numa;    /* -1 unknown */
        bool healthy;
        char reason[96];       /* why unhealthy ("xid 79", "GPU_IS_LOST") */
        uint64_t ok_since_ms;  /* health: first normal answer since the last fault; 0 none yet */
        uint64_t memory_total; /* bytes (NVML) */
        unsigned n_mem;        /* memory IDs advertised: min(memory_total / unit, SHARE_MEM_IDS_MAX) */
};

/* A service: the userdata of one resource's handlers. */
struct plugin_service {
        struct plugin *p;
        enum plugin_kind kind;
};

struct share_book; /* share-internal.h: the records of fractional grants */
struct assign;     /* assign.h: the scheduler's assignments (NULL: node-local only) */
struct assign_ctx; /* assign.h: one handler call's view of them */

struct plugin {
        pthread_mutex_t lock;
        atomic_uint_fast64_t generation; /* bumped on every change ListAndWatch must push */
        atomic_uint_fast64_t notified;   /* the generation streams and change_fd were last told of */
        atomic_int change_fd;            /* eventfd written on each change (the agent's loop), -1 none */
        atomic_bool stopping;
        struct plugin_options opt;
        struct topo topo; /* the inventory the table was built from */
        unsigned n;
        struct plugin_gpu gpu[TOPO_MAX_GPUS];
        struct gpuslice_state state; /* who holds which device (Allocate + PodResources) */
        struct plugin_service svc[_PLUGIN_KIND_MAX];
        struct share_book *book; /* share.c: fractional grants per container, pairing, journal */
        /* A fixed GPU for the next fractional allocation (table index, -1 none): the seam for a
         * choice made by the cluster scheduler (see share.h, share_set_explicit_gpu). */
        int explicit_gpu;
        /* Ask kubelet's PodResources now and reconcile the state with it (the agent sets it; NULL:
         * no PodResources). Called without the lock by a fractional handler about to pair a call
         * with a record restored from the journal (share.c). 0 or -errno. */
        int (*podres_sync)(void *userdata);
        void *podres_userdata;
        /* The scheduler's assignments (assign.h), set before serving; NULL: node-local only. */
        struct assign *assign;
        /* The running GetPreferredAllocation's view of the assignment (under the lock, for share.c's
         * pairing); NULL outside one. */
        const struct assign_ctx *call_assign;
        /* counters for status */
        uint64_t n_allocate, n_preferred, n_errors;
};

/* Build the table from an inventory: one device per GPU with a UUID; GPUs NVML could not read
 * start Unhealthy. The plugin is caller-owned memory (it is large: allocate it). */
void plugin_init(struct plugin *p, const struct plugin_options *opt, const struct topo *t);
void plugin_done(struct plugin *p);

/* The resource name a kind speaks for ("" when the profile has none). */
const char *plugin_resource(const struct plugin *p, enum plugin_kind kind);

/* Table index of device `id`, or -1. Caller holds the lock (or owns p alone). */
int plugin_find(const struct plugin *p, const char *id);

/* A change kubelet must see: bump the generation, wake the ListAndWatch streams and write
 * change_fd. Any thread, lock held or not (it takes no lock of the plugin's). */
void plugin_changed(struct plugin *p);
/* Tell streams and change_fd of a generation bumped without plugin_changed (a plain
 * atomic_fetch_add on generation); cheap when nothing changed. The agent calls it after every
 * RPC, so a handler's change is never missed. */
void plugin_notify(struct plugin *p);

/* Kubelet called (GetPreferredAllocation or Allocate, any resource): it has recorded every Allocate
 * answered before (one goroutine admits pods, resource by resource), so the allocation record's
 * entries are settled (state_mark_settled): the next PodResources sync frees those it does not
 * list, without the grace of a fresh answer. Called first by each of those handlers; takes the lock. */
void plugin_kubelet_called(struct plugin *p);

/* Health transitions (take the lock; plugin_changed when the health changes). */
void plugin_set_unhealthy(struct plugin *p, unsigned i, const char *reason, uint64_t now_ms, bool fault_cleared);
/* A normal NVML answer for GPU i at now_ms: becomes healthy after quiet_ms of normal answers. */
void plugin_probe_ok(struct plugin *p, unsigned i, uint64_t now_ms, uint64_t quiet_ms);

/* Every handler below is an rpc_unary_fn / rpc_stream_fn with the plugin as userdata. */
enum rpc_code plugin_get_options(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                                 struct gs_error *st);
enum rpc_code plugin_list_and_watch(void *userdata, const uint8_t *req, size_t req_len, struct rpc_stream *s,
                                    struct gs_error *st);
enum rpc_code plugin_get_preferred(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                                   struct gs_error *st);
enum rpc_code plugin_allocate(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                              struct gs_error *st);
enum rpc_code plugin_pre_start(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                               struct gs_error *st);

/* ListAndWatch of a fractional resource; userdata is a struct plugin_service. */
enum rpc_code plugin_service_list_and_watch(void *userdata, const uint8_t *req, size_t req_len, struct rpc_stream *s,
                                            struct gs_error *st);

/* The current ListAndWatchResponse of whole GPUs / of one kind, packed. 0 or -ENOMEM. */
int plugin_pack_devices(struct plugin *p, uint8_t **ret, size_t *ret_len, uint64_t *ret_generation);
int plugin_pack_devices_kind(struct plugin *p, enum plugin_kind kind, uint8_t **ret, size_t *ret_len,
                             uint64_t *ret_generation);

/* Add the whole-GPU plugin's methods to a server. */
int plugin_serve(struct plugin *p, struct rpc_server *s);
/* Add the methods of one kind's service (whole: as plugin_serve) to a server. */
int plugin_serve_kind(struct plugin *p, enum plugin_kind kind, struct rpc_server *s);
