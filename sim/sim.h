/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim — the pieces shared by the simulated driver libraries (libnvidia-ml.so.1, libcuda.so.1)
 * and the gpuslice-sim tool: loading the node description named by GPUSLICE_SIM_NODE, and the
 * shared node state (one shared-memory file per simulated node) through which separate
 * processes see one node: processes and their memory, utilization, injected faults and Xid events.
 *
 * Everything here is internal to sim/ (hidden visibility, linked statically into each artefact).
 * It must never hold the state lock across anything that can block, and never leave it held:
 * the lock is a robust process-shared mutex, so a process SIGKILLed while holding it hands it
 * on to the next locker (which marks it consistent) instead of hanging the node.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "topo/topo.h"
#include <unistd.h>

/*
 * A process-local lock that a fork cannot leave held. Fork handlers (pthread_atfork) reinitialise it in the
 * child, but glibc runs only the handlers registered when fork() began: a library loaded by another thread
 * while the fork is under way (the interposer loads the driver lazily, at its first call) misses them, and
 * its lock may be copied held. So a locker that finds it taken asks whether it is still the process that
 * made the lock (*pid, set by the owner's init and atfork child): in a forked child nobody will ever release
 * the copy, so it is made anew. The uncontended path is one trylock.
 */
struct sim_forksafe_lock {
        pthread_mutex_t m;
        pid_t pid; /* the process the lock belongs to; 0 = not yet known (the first locker's) */
};
#define SIM_FORKSAFE_LOCK_INIT \
        { PTHREAD_MUTEX_INITIALIZER, 0 }

static inline void sim_forksafe_lock(struct sim_forksafe_lock *l) {
        if (pthread_mutex_trylock(&l->m) == 0)
                return;
        pid_t self = getpid(), owner = __atomic_load_n(&l->pid, __ATOMIC_ACQUIRE);
        if (owner && owner != self &&
            __atomic_compare_exchange_n(&l->pid, &owner, self, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                pthread_mutex_init(&l->m, NULL); /* a copy from the parent, held by a thread that is not here */
        pthread_mutex_lock(&l->m);
}

static inline void sim_forksafe_unlock(struct sim_forksafe_lock *l) {
        pthread_mutex_unlock(&l->m);
}

/* The lock is this process's (a constructor, an atfork child handler): reinitialise it when forked. */
static inline void sim_forksafe_own(struct sim_forksafe_lock *l, bool reinit) {
        if (reinit)
                pthread_mutex_init(&l->m, NULL);
        __atomic_store_n(&l->pid, getpid(), __ATOMIC_RELEASE);
}

#define SIM_ENV_NODE "GPUSLICE_SIM_NODE"
#define SIM_ENV_STATE "GPUSLICE_SIM_STATE"

#define SIM_STATE_MAGIC 0x5453534d49534c47ULL /* "GLSIMSST" little-endian, arbitrary but fixed */
#define SIM_STATE_ABI 3u                      /* 3: exit teardown; 2: MIG state per GPU and per process */
#define SIM_MAX_PROCS 512u
#define SIM_XID_RING 64u

/* Per-GPU fault flags. */
#define SIM_GPU_LOST 0x1u          /* every device query answers GPU_IS_LOST */
#define SIM_GPU_NO_PERMISSION 0x2u /* handle and device queries answer NO_PERMISSION */

/* Process-table entry flags. */
#define SIM_PROC_CUDA 0x1u /* recorded by the simulated CUDA driver */
#define SIM_PROC_KEEP 0x2u /* added by hand with --keep: never pruned, even if the PID is dead */
#define SIM_PROC_MPS 0x4u  /* a client of a live MPS daemon (sim/mps.h) when its context was made */

/* Driver processes sampling period for per-process utilization (µs). */
#define SIM_SAMPLE_PERIOD_US 100000ULL

struct sim_xid {
        uint64_t seq;     /* global event sequence number (1-based), 0 = empty slot */
        uint64_t xid;     /* the Xid number */
        uint64_t time_us; /* CLOCK_REALTIME µs */
};

struct sim_gpu_state {
        uint32_t flags;         /* SIM_GPU_* (read without the lock: atomic loads) */
        uint32_t util_gpu;      /* percent set by `gpuslice-sim util`; 0 = derived from processes */
        uint32_t util_mem;      /* percent; 0 = derived from processes */
        uint32_t temperature_c; /* 0 = derived from utilization */
        uint32_t power_mw;      /* 0 = derived from utilization */
        uint32_t compute_mode;  /* nvmlComputeMode_t (nvmlDeviceSetComputeMode), 0 DEFAULT: a reset's, as a reboot's */
        uint64_t xid_posted;    /* events ever posted to this GPU; ring slot = n % SIM_XID_RING */
        struct sim_xid xid[SIM_XID_RING];
};

struct sim_proc {
        uint32_t pid;        /* PID as the host sees it (0 = free slot) */
        uint32_t gpu;        /* GPU index */
        uint32_t gi, ci;     /* the MIG device it runs on (GPU and compute instance ids), SIM_NO_INSTANCE if none */
        uint64_t used_bytes; /* device memory held on that GPU */
        uint32_t sm_util;    /* percent of the GPU's SMs this process keeps busy */
        uint32_t mem_util;   /* percent of memory bandwidth */
        uint64_t start_us;   /* when the entry was made (CLOCK_REALTIME µs) */
        uint64_t sample_us;  /* last explicit utilization update (CLOCK_REALTIME µs) */
        uint64_t pidns;      /* inode of the recording process's PID namespace, 0 = unknown */
        uint32_t ns_pid;     /* the PID inside that namespace (getpid() of the recorder) */
        uint32_t flags;      /* SIM_PROC_* */
        uint32_t down_ms;    /* its memory is freed this long after the process is gone (node's teardown-ms) */
        uint64_t dead_us;    /* when it was first found gone (CLOCK_REALTIME µs), 0 = alive */
};

/* ---- MIG: the instances of each GPU, in the shared state (profiles and rules: sim/mig.c) ---- */

#define SIM_NO_INSTANCE 0xFFFFFFFFu /* NVML_INVALID_INSTANCE_ID */
#define SIM_MIG_ENABLED 1u          /* NVML_DEVICE_MIG_ENABLE */
#define SIM_MIG_MAX_GI 8u           /* GPU instances per GPU (7 on every simulated model) */
#define SIM_MIG_MAX_CI 8u           /* compute instances per GPU instance */
#define SIM_MIG_MAX_DEVICES 7u      /* MIG devices per GPU (nvmlDeviceGetMaxMigDeviceCount) */

struct sim_mig_ci {
        uint32_t used;        /* 0 = free slot */
        uint32_t id;          /* compute instance id within its GPU instance */
        uint32_t profile;     /* NVML_COMPUTE_INSTANCE_PROFILE_* */
        uint32_t start, size; /* compute slices of the GPU instance it occupies */
        uint32_t index;       /* MIG device index (nvmlDeviceGetMigDeviceHandleByIndex) */
        uint64_t serial;      /* creation number on this node: the MIG UUID derives from it */
};

struct sim_mig_gi {
        uint32_t used;        /* 0 = free slot */
        uint32_t id;          /* GPU instance id, fixed by the placement (sim/mig.c) */
        uint32_t profile;     /* NVML_GPU_INSTANCE_PROFILE_* */
        uint32_t start, size; /* memory slices */
        struct sim_mig_ci ci[SIM_MIG_MAX_CI];
};

struct sim_mig_gpu {
        uint32_t current, pending; /* NVML_DEVICE_MIG_*; pending differs until a reset applies it */
        uint32_t reset_required;   /* a mode change waits for `gpuslice-sim gpu-reset` (node: mig N reset=required) */
        uint32_t reserved0;
        struct sim_mig_gi gi[SIM_MIG_MAX_GI];
};

/* A fault on the MIG changes made through NVML (gpuslice-sim mig-fault): the countdown-th change from now
 * on (create/destroy of a GPU or compute instance, a MIG mode change) ... */
#define SIM_MIG_FAULT_NONE 0u
#define SIM_MIG_FAULT_KILL 1u /* ... is made, then the calling process is SIGKILLed */
#define SIM_MIG_FAULT_FAIL 2u /* ... fails with NVML_ERROR_UNKNOWN and changes nothing */

struct sim_state {
        uint64_t magic;           /* SIM_STATE_MAGIC */
        uint32_t abi_version;     /* SIM_STATE_ABI */
        uint32_t size;            /* sizeof(struct sim_state) */
        uint32_t n_gpus;          /* GPUs of the node the file was made for */
        uint32_t event_futex;     /* bumped after every posted event; waiters sleep on it */
        uint64_t event_seq;       /* last global event sequence number handed out */
        uint64_t lock_recoveries; /* times a dead holder's lock was taken over */
        pthread_mutex_t lock;     /* robust, process-shared */
        char node[256];           /* node description path the file was made for (information only) */
        struct sim_gpu_state gpu[TOPO_MAX_GPUS];
        struct sim_proc proc[SIM_MAX_PROCS];
        uint64_t mig_serial;      /* last MIG device creation number handed out */
        uint32_t mig_fault;       /* SIM_MIG_FAULT_* */
        uint32_t mig_fault_after; /* changes left before the fault strikes (1 = the next one) */
        struct sim_mig_gpu mig[TOPO_MAX_GPUS];
};

/* ---- node description ---- */

/*
 * Load the node named by $GPUSLICE_SIM_NODE. -ENOENT when the variable is unset or empty (no
 * driver), -errno when the file cannot be read, -EINVAL when it does not parse; err gets a
 * message fit for a person in every failure case. ret_path (PATH_MAX) gets the absolute path.
 */
int sim_node_load(struct topo *ret, char *ret_path, size_t path_len, char *err, size_t err_len);

/* The state file path: $GPUSLICE_SIM_STATE, else /dev/shm/gpuslice-sim-<16 hex of FNV-1a(node path)>. */
int sim_state_path(const char *node_path, char *buf, size_t len);

/* ---- shared state ---- */

/*
 * Open the node's state file, creating it (fully initialised before it appears, so a reader
 * never sees a half-made file) when missing. A file with another magic, ABI version, size or
 * GPU count is refused with -EPROTO and a message in err.
 */
int sim_state_open(const struct topo *t, const char *node_path, struct sim_state **ret, char *err, size_t err_len);
/* Same, naming the state file directly. */
int sim_state_open_path(const char *path, const struct topo *t, const char *node_path, struct sim_state **ret,
                        char *err, size_t err_len);
/* Unmap. NULL is a no-op. */
void sim_state_close(struct sim_state *s);

/* Take the lock (0) — a dead holder's lock is recovered — or -errno (-ENOTRECOVERABLE). */
int sim_state_lock(struct sim_state *s);
void sim_state_unlock(struct sim_state *s);

/* Everything below needs the lock held. */

/* Back to a fresh node: no processes, no events (sequence numbers keep growing), no faults. */
void sim_state_reset_locked(struct sim_state *s, const struct topo *t);
/* Drop entries whose PID no longer exists (kill(pid, 0) == ESRCH), unless SIM_PROC_KEEP. */
void sim_state_prune_locked(struct sim_state *s);
/* Memory held by processes on gpu. */
uint64_t sim_state_used_locked(const struct sim_state *s, unsigned gpu);
/* Entry for (pid, gpu), or NULL. */
struct sim_proc *sim_proc_find_locked(struct sim_state *s, uint32_t pid, unsigned gpu);
/* Find or create the entry for (pid, gpu); -ENOSPC when the table is full. */
int sim_proc_get_locked(struct sim_state *s, uint32_t pid, unsigned gpu, struct sim_proc **ret);
/* Remove every entry of pid (any GPU); returns how many. */
unsigned sim_proc_del_locked(struct sim_state *s, uint32_t pid);
/* Append an Xid event to gpu's ring; wakes every waiter. Returns the sequence number. */
uint64_t sim_state_post_xid_locked(struct sim_state *s, unsigned gpu, uint64_t xid);

/* Sleep until event_futex differs from seen, or timeout_ms passes (spurious wakeups allowed). */
void sim_state_wait_event(struct sim_state *s, uint32_t seen, unsigned timeout_ms);

/* ---- helpers ---- */

/* The memory the simulated driver keeps for itself on a GPU of this size (documented). */
uint64_t sim_reserve_bytes(uint64_t total);
/* CLOCK_REALTIME in µs (NVML's timestamps). */
uint64_t sim_now_us(void);

/*
 * Who the calling process is, for the process table. NVML reports host PIDs; a process in a
 * container knows only its own namespace's PID. The seam (docs/simulator.md): pid is the first
 * (outermost) entry of the NSpid line of /proc/self/status — the host PID whenever the host's
 * PID namespace is visible through this /proc — ns_pid is getpid(), pidns the inode of
 * /proc/self/ns/pid. The monitoring work resolves container PIDs fully.
 */
struct sim_identity {
        uint32_t pid;
        uint32_t ns_pid;
        uint64_t pidns;
};
void sim_self_identity(struct sim_identity *ret);

/*
 * The PID of a process-table entry as the calling process's PID namespace sees it — what the real
 * driver reports. An entry recorded from inside another PID namespace that could only see its own
 * PID (pid == ns_pid, pidns not ours) is looked up in /proc by (namespace inode, PID there): the
 * process whose /proc/N/ns/pid is pid:[pidns] and whose last NSpid field is ns_pid. 0 when it is not
 * visible from here (gone, or in no namespace below ours).
 */
uint32_t sim_proc_visible_pid(const struct sim_proc *p);

/* ---- MIG (sim/mig.c: the device's rules; sim/mig-node.c: the node description's `mig` lines) ---- */

/* One GPU instance profile of a model. */
struct sim_mig_profile {
        unsigned profile;    /* NVML_GPU_INSTANCE_PROFILE_* */
        unsigned id;         /* info.id, nvidia-smi's "ID" (device specific) */
        const char *name;    /* "1g.10gb" */
        unsigned slices;     /* compute slices (of 7) */
        unsigned mem_slices; /* memory slices (of 8): the placement size */
        unsigned instances;  /* at most this many at once */
        unsigned sms, copy_engines, decoders, encoders, jpegs, ofas;
        unsigned memory_mib;
        unsigned starts; /* bit s: a placement may start at memory slice s */
};

struct sim_mig_model {
        const char *label;        /* "A100-40GB" */
        const char *match, *also; /* the GPU name contains match (and also, when set) */
        const struct sim_mig_profile *profiles;
        unsigned n_profiles;
};

/* A compute instance profile inside a GPU instance. */
struct sim_mig_ci_shape {
        unsigned profile;   /* NVML_COMPUTE_INSTANCE_PROFILE_* */
        unsigned slices;    /* compute slices */
        unsigned align;     /* placements start at multiples of this */
        unsigned instances; /* how many fit the GPU instance */
        unsigned sms;
};

/* The MIG state of every GPU when the node's state file is made (and at `gpuslice-sim reset`). */
struct sim_mig_node {
        struct sim_mig_gpu gpu[TOPO_MAX_GPUS];
        uint64_t serial;
};

/* The model's MIG table, NULL for a GPU without MIG (every MIG query then answers NOT_SUPPORTED). */
const struct sim_mig_model *sim_mig_model(const struct topo_gpu *g);
/* The simulated MIG models, for messages. */
const char *sim_mig_models(void);
const struct sim_mig_profile *sim_mig_profile(const struct sim_mig_model *m, unsigned nvml_profile);
const struct sim_mig_profile *sim_mig_profile_by_id(const struct sim_mig_model *m, unsigned id);
const struct sim_mig_profile *sim_mig_profile_by_name(const struct sim_mig_model *m, const char *name);
/* The starts of p's placements (size p->mem_slices), at most 8. Returns the count. */
unsigned sim_mig_placements(const struct sim_mig_profile *p, unsigned *ret_starts);
/* The id the driver gives a GPU instance at this placement (0..14). */
uint32_t sim_mig_gi_id(unsigned start, unsigned size);
struct sim_mig_gi *sim_mig_gi_find(struct sim_mig_gpu *g, uint32_t id);
struct sim_mig_ci *sim_mig_ci_find(struct sim_mig_gi *gi, uint32_t id);
/* Create a GPU instance (start -1: the lowest free placement). -EOPNOTSUPP profile not on this model,
 * -EINVAL not one of its placements, -ENOSPC does not fit next to the others. */
int sim_mig_gi_create(struct sim_mig_gpu *g, const struct sim_mig_model *m, unsigned nvml_profile, int start,
                      struct sim_mig_gi **ret);
/* How many more instances of the profile can be created now. */
unsigned sim_mig_gi_remaining(const struct sim_mig_gpu *g, const struct sim_mig_model *m, unsigned nvml_profile);
/* -EBUSY while it has compute instances. */
int sim_mig_gi_destroy(struct sim_mig_gi *gi);
int sim_mig_ci_shape(const struct sim_mig_model *m, const struct sim_mig_gi *gi, unsigned ci_profile,
                     struct sim_mig_ci_shape *ret);
/* The compute instance profile that covers the whole GPU instance (nvidia-smi's -C default). */
int sim_mig_ci_full_profile(const struct sim_mig_model *m, const struct sim_mig_gi *gi);
/* Create a compute instance; *serial is the node's creation counter (the MIG UUID derives from it). */
int sim_mig_ci_create(struct sim_mig_gpu *g, const struct sim_mig_model *m, struct sim_mig_gi *gi, unsigned ci_profile,
                      int start, uint64_t *serial, struct sim_mig_ci **ret);
unsigned sim_mig_ci_remaining(const struct sim_mig_gpu *g, const struct sim_mig_model *m, const struct sim_mig_gi *gi,
                              unsigned ci_profile);
/* "3g.40gb", or "1c.3g.40gb" for a compute instance smaller than its GPU instance (ci may be NULL). */
void sim_mig_device_name(const struct sim_mig_model *m, const struct sim_mig_gi *gi, const struct sim_mig_ci *ci,
                         char *buf, size_t len);
/* "MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" from the parent's UUID and the creation number. */
void sim_mig_uuid(const char *parent_uuid, uint64_t serial, char *buf, size_t len);
/* Lock held: memory held by the processes of a GPU instance; processes on a compute instance
 * (ci SIM_NO_INSTANCE: anywhere in the GPU instance). */
uint64_t sim_mig_gi_used_locked(const struct sim_state *s, unsigned gpu, uint32_t gi);
unsigned sim_mig_ci_procs_locked(const struct sim_state *s, unsigned gpu, uint32_t gi, uint32_t ci);
/* Lock held: the memory a process sees on a GPU (gi SIM_NO_INSTANCE) or on a GPU instance: its total, what
 * the driver leaves usable (total less its reserve) and what processes hold of it. */
void sim_mem_capacity_locked(struct sim_state *s, const struct topo *t, unsigned gpu, uint32_t gi, uint64_t *ret_total,
                             uint64_t *ret_usable, uint64_t *ret_used);
/* Capability minors (/proc/driver/nvidia-caps/mig-minors): every GPU minor 0..31, GPU instance id 0..14. */
#define SIM_MIG_CAP_GPUS 32u
#define SIM_MIG_CAP_GIS 15u
#define SIM_MIG_CAP_MAJOR 508u /* the nvidia-caps character major the simulated node uses (a real one: /proc/devices) */
/* The minor of gpu<gpu_minor>/gi<gi>/access (ci SIM_NO_INSTANCE) or gpu<gpu_minor>/gi<gi>/ci<ci>/access. */
unsigned sim_mig_cap_minor(unsigned gpu_minor, uint32_t gi, uint32_t ci);
/* The whole mig-minors file as the driver writes it. Returns its length, or -ENOBUFS (len < 64 KiB). */
int sim_mig_minors_text(char *buf, size_t len);
/* MIG modes from the node's `mig=` attributes, no instances. */
void sim_mig_initial(const struct topo *t, struct sim_mig_node *ret);
/* Parse the `mig` lines of a node description (docs/node-description.md) on top of sim_mig_initial:
 * 0, or -EINVAL with "line N: reason" in err. */
int sim_mig_node_parse(const char *text, size_t len, const struct topo *t, struct sim_mig_node *ret, char *err,
                       size_t err_len);
/* The MIG state the node description t was loaded from declares (sim_node_load of this process), NULL
 * when this process loaded no description of t. */
const struct sim_mig_node *sim_node_mig(const struct topo *t);

/* Per-GPU derived readings (lock held). */
unsigned sim_gpu_util_locked(const struct sim_state *s, unsigned gpu, unsigned *ret_mem_util);
unsigned sim_gpu_temperature_locked(const struct sim_state *s, unsigned gpu);
unsigned sim_gpu_power_mw_locked(const struct sim_state *s, unsigned gpu, unsigned limit_mw);

/* Enforced power limit of a GPU (the node's value, else a default by model). */
unsigned sim_power_limit_mw(const struct topo_gpu *g);
