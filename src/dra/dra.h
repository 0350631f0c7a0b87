/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dra — gpuslice's Dynamic Resource Allocation driver (structured parameters, resource.k8s.io/v1 with
 * v1beta2/v1beta1 where v1 is not served): everything of it below the daemon. The node agent
 * (`gpuslice node --dra`, src/agent) starts it with the node's inventory, its API client and two
 * callbacks into its device table, and tells it when a GPU's health or the device plugin's use of it
 * changes; this library then
 *
 *   - publishes the node's ResourceSlices (slices.h) and keeps them in step (health, the device
 *     plugin's use, a kubelet that wiped them, fields a server dropped);
 *   - serves kubelet: the registration socket <registry-dir>/<driver>-reg.sock (pluginregistration,
 *     type "DRAPlugin"), the DRA service <plugin-dir>/<driver>/dra.sock in both v1 and v1beta1, and the
 *     device health stream (dra-health v1 and v1alpha1);
 *   - prepares claims (reads the claim's allocation from the API, checks it names healthy devices of
 *     this node that nothing else holds, writes one CDI spec per claim with the limiter of its shared
 *     devices, answers the CDI IDs) and unprepares them, crash-safe through its journal (journal.h);
 *   - publishes and prepares the MIG devices of GPUs with MIG on (static layouts: the instances that
 *     exist, read through ops.mig_read) beside their whole GPUs, excluding each other by counters; on the
 *     GPUs of o.mig_dynamic one device per profile and placement instead, the instance made at prepare and
 *     destroyed at unprepare through ops.mig_create / ops.mig_destroy, journaled (migdyn.c).
 *
 * Docs: docs/dra.md. Threads: its own (the servers', the publisher's); every public function is
 * thread-safe. Must never: log (events go to the caller's log callback), hold its lock across a
 * network call, prepare a device twice, or leave a file behind that no record names.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "mig/mig.h"
#include "topo/topo.h"
#include "util/error.h"

#define DRA_DRIVER_DEFAULT "gpu.gpuslice.io"
#define DRA_REGISTRY_DIR_DEFAULT "/var/lib/kubelet/plugins_registry"
#define DRA_PLUGIN_DIR_DEFAULT "/var/lib/kubelet/plugins"
#define DRA_CDI_DIR_DEFAULT "/var/run/cdi"
#define DRA_SOCKET "dra.sock"
#define DRA_PLUGIN_TYPE "DRAPlugin"

struct kube_client;
struct dra;
struct dra_mig; /* dra/slices.h */

enum dra_log_level {
        DRA_LOG_ERROR = 0,
        DRA_LOG_WARN,
        DRA_LOG_INFO,
        DRA_LOG_DEBUG,
};

/* The device table of the agent, as the driver needs it (called with the driver's lock held unless said
 * otherwise: they must not call back into the driver). gpus: bit i = topology position i. */
struct dra_table_ops {
        /* Take these GPUs for DRA claims: all or none. -EBUSY (the device plugin holds one) or -EIO
         * (unhealthy), why filled, when it cannot; then nothing was taken. */
        int (*take)(void *userdata, uint64_t gpus, char *why, size_t why_len);
        /* The GPUs DRA holds now (the device plugin must not hand them out); called after an unprepare and
         * at start. */
        void (*set_held)(void *userdata, uint64_t gpus);
        /* Read the node's MIG side now (MIG devices, and each MIG GPU's memory and compute slices) into *ret
         * (zeroed by the caller). Called WITHOUT the driver's lock, at start, before each prepare and on each
         * publishing pass. 0 or -errno (the driver keeps what it had). NULL: the node has no MIG devices. */
        int (*mig_read)(void *userdata, struct dra_mig *ret);
        /* MPS (a claim whose sharing.strategy is MPS; docs/dra.md "Sharing modes"): start the control daemon of
         * claim `uid` with its pipe and log directories <dir>/pipe and <dir>/log (dir exists) and send it
         * `commands` (lines of nvidia-cuda-mps-control's client); a daemon an earlier agent left serving that
         * pipe directory is told to quit first. The caller supervises it (restarts it when it exits; while it
         * cannot, the claim's `gpus` are unhealthy) until mps_stop. 0 or -errno with why. NULL: MPS claims are refused. It
         * may wait for the daemon (seconds): called WITHOUT the driver's lock at prepare (the claim journaled as
         * preparing meanwhile), with it at start-up (no thread serves yet). The daemon's /dev/shm is <dir>/shm, a
         * tmpfs in its own mount namespace, which the claim's CDI spec mounts at its clients' /dev/shm. */
        int (*mps_start)(void *userdata, const char *uid, uint64_t gpus, const char *dir, const char *commands,
                         char *why, size_t why_len);
        /* Stop claim `uid`'s daemon, also one an earlier agent left serving <dir>/pipe, and unmount <dir>/shm (with the
         * driver's lock held: may wait for the daemon to exit, and for an mps_start in progress). */
        void (*mps_stop)(void *userdata, const char *uid, const char *dir);
        /* Dynamic MIG (docs/dra.md "Dynamic MIG"), through src/migctl: make a GPU instance of profile_id (info.id)
         * at placement `at` of GPU `index` with one compute instance covering it (0 and the ids, or -errno with why,
         * nothing left made); destroy the GPU instance of profile_id at exactly `at` (0, also when there is none).
         * Unlike the others, called WITHOUT the driver's lock at prepare and unprepare (NVML may take long); with it
         * at start-up (no thread serves yet) and when a failed prepare is rolled back. NULL: no dynamic MIG. */
        int (*mig_create)(void *userdata, unsigned index, unsigned profile_id, struct mig_placement at,
                          unsigned *ret_gi, unsigned *ret_ci, char *why, size_t why_len);
        int (*mig_destroy)(void *userdata, unsigned index, unsigned profile_id, struct mig_placement at, char *why,
                           size_t why_len);
        /* One line for the daemon's log: msg and key=value fields. */
        void (*log)(void *userdata, enum dra_log_level level, const char *msg, const char *fields);
        void *userdata;
};

struct dra_options {
        const char *driver;       /* DRA driver name, DRA_DRIVER_DEFAULT */
        const char *node;         /* node name: the pool's name, and where claims must be allocated */
        const char *registry_dir; /* kubelet's plugin registry dir */
        const char *plugin_dir;   /* <plugin_dir>/<driver>/dra.sock */
        const char *state_dir;    /* the journal in <state_dir>/dra */
        const char *limits_root;  /* the limits dirs of claims with shared devices */
        const char *cdi_dir;      /* where the per-claim CDI specs go */
        const char *dev_root;     /* host root holding /dev and /sys ("/" on a real node) */
        const char *driver_root;  /* the driver's files for the CDI specs ("/") */
        /* dev_root and driver_root are the agent's view; the specs name the host's (the runtime on the host reads
         * them): host_dev_root / host_driver_root (NULL or "": the same as the agent's), and hook_path is the
         * host's path of the gpuslice binary for the CDI createContainer hook (NULL or "": no hook). */
        const char *host_dev_root, *host_driver_root;
        const char *hook_path;    /* the gpuslice binary, for the CDI createContainer hook (NULL: none) */
        const char *interposer;   /* host path of libgpuslice-cuda.so, mounted for shared devices */
        bool sharing;             /* publish shared devices (needs Kubernetes 1.36's consumable capacity) */
        uint64_t memory_unit;     /* the step of a shared device's memory */
        bool limit_when_alone;    /* core-policy hard unless the claim's parameters say elastic */
        struct kube_client *kube; /* the agent's API client (must outlive the driver) */
        /* the GPUs partitioned dynamically (dra.mig-dynamic): "all", NVML indices "0,2", or NULL / "" none */
        const char *mig_dynamic;
};

/* What the device table says of one GPU (topology position). */
struct dra_gpu_state {
        bool healthy;
        bool busy; /* held by the device plugin (whole or fractions) */
        char reason[96];
};

/* Start: recover the journal, serve kubelet, start publishing. t is copied. 0 or -errno with err. */
/* Thread: the agent's loop (dra-link.c); lock: none (starts the servers' and the publisher's threads). */
int dra_start(const struct dra_options *o, const struct topo *t, const struct dra_table_ops *ops, struct dra **ret,
              struct gs_error *err);
/* The table changed (health, the device plugin's use): n states by topology position. Any thread; cheap
 * when nothing the driver publishes changed. */
/* Thread: any; lock: takes d->lock itself (every function thread-safe). */
void dra_update(struct dra *d, const struct dra_gpu_state *st, unsigned n);
/* Stop serving and publishing (the slices stay: kubelet wipes them if the driver does not come back).
 * NULL is a no-op; returns NULL. */
/* Thread: the starter's; lock: none (joins the driver's threads). */
struct dra *dra_stop(struct dra *d);

/* The driver's state for `gpuslice status`: {"driver", "registered", "api", "sharing", "generation",
 * "claims": [{"uid","namespace","name","state","devices":[...],"sharing"?}]}. A new reference or NULL. */
/* Thread: any; lock: takes d->lock itself (every function thread-safe). */
json_t *dra_status(struct dra *d);
