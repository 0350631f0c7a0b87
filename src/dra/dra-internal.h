/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dra-internal — what the DRA driver's files share (never included outside src/dra; tests may): the
 * driver's state and the entry points of its parts. dra.c owns the lifecycle, state.c the state below; the
 * other files reach it through these functions:
 *
 *   prepare.c   the prepare/unprepare engine: checks, the journal's steps, CDI specs and limits dirs,
 *               recovery at start
 *   kubelet.c   the registration server, the DRA service (v1, v1beta1) and the health stream
 *   publish.c   the ResourceSlice publisher (its own thread)
 *   status.c    the claims' status.devices
 *   migdyn.c    dynamic MIG devices: the checks, making and destroying their instances, their recovery
 *
 * Locking: d->lock guards every field marked (lock). The engine does local file I/O under it (the
 * journal must change with the in-memory records), never network I/O: a claim is read from the API
 * before the lock is taken. NVML's making and destroying of dynamic MIG instances happens without it
 * (migdyn.c, prepare.c's make_instances / destroy_instances), and so does the start of an MPS claim's control daemon
 * (prepare.c's start_daemon): the claim's record is in memory meanwhile.
 */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "cdi/cdi.h"
#include "dra/claim.h"
#include "dra/dra.h"
#include "dra/journal.h"
#include "dra/slices.h"

#define DRA_JOURNAL_DIR "dra"
#define DRA_CDI_CLASS "claim"
#define DRA_MPS_PIPE_CONTAINER "/tmp/nvidia-mps" /* an MPS client's pipe dir in the container (NVIDIA's DRA driver's) */
#define DRA_MPS_DIR "dra-mps" /* <state>/dra-mps/<uid>: an MPS claim's control daemon's dirs (util/mps-client.h) */

struct rpc_server;
struct kube_informer;

/* The pool as the server has it, from the publisher's own writes (the server's answers) and the changes
 * others made (the informer's events that are not the echo of an own write): what a pass compares with. */
struct dra_published {
        json_t *slices;  /* slice name → the slice as the server stored it */
        json_t *own_rvs; /* the resourceVersions the publisher's writes got (newest last, bounded) */
        json_t *heard;   /* [old, new] events heard while a pass writes, looked at when it ends */
        bool passing;    /* a pass is writing */
};

struct dra {
        /* options (copied at start, then read-only) */
        char driver[DRA_MAX_DOMAIN + 1];
        char node[DRA_MAX_POOL_NAME + 1];
        char registry_dir[DRA_PATH_MAX], plugin_dir[DRA_PATH_MAX], journal_dir[DRA_PATH_MAX], mps_root[DRA_PATH_MAX];
        char limits_root[DRA_PATH_MAX], cdi_dir[DRA_PATH_MAX], dev_root[DRA_PATH_MAX], driver_root[DRA_PATH_MAX];
        char host_dev_root[DRA_PATH_MAX], host_driver_root[DRA_PATH_MAX]; /* "" = dev_root / driver_root */
        char hook_path[DRA_PATH_MAX], interposer[DRA_PATH_MAX];
        char cdi_kind[DRA_MAX_DOMAIN + 8];
        bool sharing_wanted, limit_when_alone;
        uint64_t memory_unit;
        uint64_t mig_dynamic; /* GPU positions partitioned dynamically */
        struct kube_client *kube;
        struct dra_table_ops ops;
        struct topo topo;
        char pcie_root[TOPO_MAX_GPUS][32];
        struct cdi_discovery disc; /* the driver's files for the CDI specs (device nodes only when unreadable) */
        int journal_fd;

        pthread_mutex_t lock;
        /* one dra_mig_refresh at a time, its NVML read and what it applies together (taken before lock): a read
         * made before another's is never applied after it */
        pthread_mutex_t mig_refresh_lock;
        struct dra_gpu_state gpu[TOPO_MAX_GPUS]; /* (lock) */
        struct dra_record *recs;                 /* (lock) the journal's records in memory */
        size_t n_recs, cap_recs;                 /* (lock) */
        uint64_t held;                           /* (lock) GPUs prepared claims hold */
        bool registered;                         /* (lock) kubelet's last NotifyRegistrationStatus */
        char reg_error[256];                     /* (lock) */
        char api_version[16];                    /* (lock) the resource.k8s.io version in use, "" unknown */
        bool sharing_ok;                         /* (lock) false once a server dropped the shared fields */
        bool taints_ok;              /* (lock) false once a server dropped device taints: unhealthy GPUs are left out */
        int64_t generation;          /* (lock) the pool generation last written */
        struct dra_mig *mig;         /* (lock) the node's MIG side (NULL: none read) */
        char mig_error[256];         /* (lock) why MIG devices cannot be given ("" they can) */
        bool publish_dirty;          /* (lock) the slices may differ from what was written */
        struct dra_published pub;    /* (lock) the publisher's view of the pool (publish.c) */
        pthread_cond_t publish_wake; /* signalled with publish_dirty or stop */

        atomic_bool stop;
        atomic_uint_fast64_t health_gen; /* bumped on every health change the stream must send */
        pthread_t publisher;
        bool publisher_running;
        struct kube_informer *informer; /* the publisher's: this node's slices */
        struct rpc_server *reg_server, *dra_server;
        char reg_socket[DRA_PATH_MAX], dra_socket[DRA_PATH_MAX];
};

/* state.c: dra_log, dra_crash_point, dra_gpu_position, dra_slice_input_locked, dra_publish_kick_locked, the MIG side;
 * dra.c: dra_new, dra_free */
/* Thread: any; lock: none (the caller's log callback must be thread-safe). */
void dra_log(struct dra *d, enum dra_log_level level, const char *msg, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* The driver without its servers and publisher: options copied, the engine opened and recovered (for
 * dra_start and the unit tests). */
/* Thread: dra_start's; lock: none. */
int dra_new(const struct dra_options *o, const struct topo *t, const struct dra_table_ops *ops, struct dra **ret,
            struct gs_error *err);
/* Thread: dra_stop's, after the threads ended; lock: none. */
void dra_free(struct dra *d);
/* Topology position of the GPU with NVML index `index`, or -1. */
/* Thread: any; lock: none (the topology is fixed). */
int dra_gpu_position(const struct dra *d, unsigned index);
/* The slice input for the current state (lock held). */
/* Thread: the driver's (servers', publisher's); lock: d->lock held. */
void dra_slice_input_locked(struct dra *d, struct dra_slice_input *ret);
/* Something the slices show changed: wake the publisher (lock held). */
/* Thread: the driver's (servers', publisher's); lock: d->lock held. */
void dra_publish_kick_locked(struct dra *d);
/* Read the node's MIG side (ops.mig_read, without the lock) and take it when it changed: the MIG devices'
 * CDI discovery redone, the publisher woken. Never with the lock held. */
/* Thread: any of the driver's; lock: never held (takes d->lock after ops.mig_read). */
void dra_mig_refresh(struct dra *d);
/* The MIG device of GPU position g with these instance ids, or NULL (lock held). */
/* Thread: the driver's (servers', publisher's); lock: d->lock held. */
const struct mig_device *dra_mig_device_locked(const struct dra *d, unsigned g, unsigned gi, unsigned ci);

/* Crash points of the kill tests: SIGKILL when $GPUSLICE_CRASH_AT names this point. */
/* Thread: any; lock: any (tests only). */
void dra_crash_point(struct dra *d, const char *point);

/* migdyn.c: dynamic MIG devices (gpu-<i>-mig-<label>-<start>) at prepare, unprepare and recovery */
/* A claim's dynamic MIG device checked against the GPU now (lock held): its profile and placement (*ret_memory: the
 * instance's bytes) or -errno with the reason (not marked, MIG off, an unknown profile, no such placement, taken). */
/* Thread: the kubelet servers'; lock: d->lock held. */
int dra_dyn_check(struct dra *d, unsigned g, const struct dra_device_ref *ref, const char *name, uint64_t *ret_memory,
                  struct gs_error *err);
/* Whether the record has a dynamic MIG device. */
/* Thread: any; lock: none (pure). */
bool dra_dyn_any(const struct dra_record *r);
/* One dynamic MIG device's instance to make or destroy: the device's position in its record, its GPU (topology
 * position), profile and placement (resolved with the lock held, used without it). */
struct dra_dyn_op {
        unsigned dev, g, profile_id;
        struct mig_placement at;
};
/* The record's dynamic MIG devices whose instance is made (made true) or not yet: how many ops (<= r->n). */
/* Thread: the kubelet servers', start-up; lock: d->lock held. */
unsigned dra_dyn_plan_locked(const struct dra *d, const struct dra_record *r, bool made, struct dra_dyn_op *ret);
/* Make one instance through ops.mig_create: 1 and its ids, or -errno with err (nothing made). */
/* Thread: the kubelet servers'; lock: none (NVML's calls, without the driver's lock). */
int dra_dyn_make_one(struct dra *d, const struct dra_record *r, const struct dra_dyn_op *op, unsigned *ret_gi,
                     unsigned *ret_ci, struct gs_error *err);
/* The capability nodes of a made instance (/dev/nvidia-caps, as nvidia-modprobe -f makes them). 0 or -errno. */
/* Thread: the kubelet servers', start-up; lock: any (local file I/O). */
int dra_dyn_nodes(struct dra *d, unsigned g, unsigned gi, unsigned ci, struct gs_error *err);
/* Destroy one instance through ops.mig_destroy (0 also when it is not there; an error is logged). */
/* Thread: the kubelet servers', start-up; lock: none on the unprepare path, held at start-up and roll back. */
int dra_dyn_unmake_one(struct dra *d, const struct dra_record *r, const struct dra_dyn_op *op);
/* Destroy the instances of the record's dynamic MIG devices, by profile and placement: those made, and with
 * unrecorded (recovery of a record not prepared) also those a killed prepare may have made before journaling
 * them. 0 or the first -errno (logged). */
/* Thread: the kubelet servers', start-up; lock: d->lock held. */
int dra_dyn_unmake(struct dra *d, const struct dra_record *r, bool unrecorded);
/* The MIG UUIDs of the record's made instances from the MIG side read since (-ENODEV with err when one is not
 * there). */
/* Thread: the kubelet servers', start-up; lock: d->lock held. */
int dra_dyn_fill(struct dra *d, struct dra_record *r, struct gs_error *err);
/* Recovery of a prepared record: every dynamic MIG device's instance there (ids taken from NVML's view), made
 * again where it went missing. 1 when something was made or an id changed (journaled), 0, or -errno with err. */
/* Thread: start-up; lock: d->lock held. */
int dra_dyn_ensure(struct dra *d, struct dra_record *r, struct gs_error *err);
/* Parse dra.mig-dynamic ("all", "0,2", "" none) into GPU positions of d's topology. 0 or -EINVAL with err. */
/* Thread: dra_new's; lock: none. */
int dra_dyn_parse(struct dra *d, const char *spec, struct gs_error *err);

/* prepare.c */
/* Thread: dra_start's, before serving; lock: none. */
int dra_engine_open(struct dra *d, struct gs_error *err);
/* Thread: dra_start's, before serving; lock: takes d->lock. */
void dra_engine_recover(struct dra *d);
/* A prepared claim's record (lock taken): 1 and *ret, or 0 when the claim is not prepared. Its files
 * are written again first when they went missing. */
/* Thread: the kubelet servers'; lock: takes d->lock. */
int dra_engine_lookup(struct dra *d, const char *uid, struct dra_record *ret);
/* Prepare a decoded claim (lock taken): 0 and the prepared record, or -errno with err for the
 * claim's error. Idempotent. */
/* Thread: the kubelet servers'; lock: takes d->lock (file I/O under it, API reads before it). */
int dra_engine_prepare(struct dra *d, const struct dra_claim *c, struct dra_record *ret, struct gs_error *err);
/* Unprepare by UID (lock taken): 0 (also when not prepared) or -errno with err. */
/* Thread: the kubelet servers'; lock: takes d->lock. */
int dra_engine_unprepare(struct dra *d, const char *uid, struct gs_error *err);
/* "gpu.gpuslice.io/claim=<uid>-<device>". */
/* Thread: any; lock: none (pure). */
int dra_cdi_id(const struct dra *d, const char *uid, const char *device, char *buf, size_t len);
/* Prepared claims (lock held). */
/* Thread: the driver's (servers', publisher's); lock: d->lock held. */
size_t dra_engine_prepared_locked(const struct dra *d);

/* status.c */
/* The claim's status.devices for this driver: the prepared devices of r, or none (r NULL: cleared; a claim
 * that is gone is cleared). A request: never with the lock held. 0 or -errno with err. */
int dra_claim_status_apply(struct dra *d, const char *ns, const char *name, const char *uid, const struct dra_record *r,
                           struct gs_error *err);

/* kubelet.c */
/* Thread: dra_start's; lock: none (starts the servers' threads). */
int dra_kubelet_start(struct dra *d, struct gs_error *err);
/* Thread: dra_stop's; lock: none (joins the servers). */
void dra_kubelet_stop(struct dra *d);

/* publish.c */
/* The resource.k8s.io version to use ("v1", "v1beta2", "v1beta1"): the one found, else asked of the server
 * now (a request: never with the lock held). 0 or -errno with err. */
/* Thread: the publisher's; lock: takes d->lock to record it (the API call without it). */
int dra_api_version(struct dra *d, char *buf, size_t len, struct gs_error *err);
/* Thread: dra_start's; lock: none (starts the publisher's thread). */
int dra_publish_start(struct dra *d, struct gs_error *err);
/* Thread: dra_stop's; lock: takes d->lock to wake the publisher, then joins it. */
void dra_publish_stop(struct dra *d);
