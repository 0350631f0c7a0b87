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

#define SIM_ENV_NODE "GPUSLICE_SIM_NODE"
#define SIM_ENV_STATE "GPUSLICE_SIM_STATE"

#define SIM_STATE_MAGIC 0x5453534d49534c47ULL /* "GLSIMSST" little-endian, arbitrary but fixed */
#define SIM_STATE_ABI 1u
#define SIM_MAX_PROCS 512u
#define SIM_XID_RING 64u

/* Per-GPU fault flags. */
#define SIM_GPU_LOST 0x1u          /* every device query answers GPU_IS_LOST */
#define SIM_GPU_NO_PERMISSION 0x2u /* handle and device queries answer NO_PERMISSION */

/* Process-table entry flags. */
#define SIM_PROC_CUDA 0x1u /* recorded by the simulated CUDA driver */
#define SIM_PROC_KEEP 0x2u /* added by hand with --keep: never pruned, even if the PID is dead */

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
        uint32_t reserved0;
        uint64_t xid_posted; /* events ever posted to this GPU; ring slot = n % SIM_XID_RING */
        struct sim_xid xid[SIM_XID_RING];
};

struct sim_proc {
        uint32_t pid;        /* PID as the host sees it (0 = free slot) */
        uint32_t gpu;        /* GPU index */
        uint64_t used_bytes; /* device memory held on that GPU */
        uint32_t sm_util;    /* percent of the GPU's SMs this process keeps busy */
        uint32_t mem_util;   /* percent of memory bandwidth */
        uint64_t start_us;   /* when the entry was made (CLOCK_REALTIME µs) */
        uint64_t sample_us;  /* last explicit utilization update (CLOCK_REALTIME µs) */
        uint64_t pidns;      /* inode of the recording process's PID namespace, 0 = unknown */
        uint32_t ns_pid;     /* the PID inside that namespace (getpid() of the recorder) */
        uint32_t flags;      /* SIM_PROC_* */
};

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

/* Per-GPU derived readings (lock held). */
unsigned sim_gpu_util_locked(const struct sim_state *s, unsigned gpu, unsigned *ret_mem_util);
unsigned sim_gpu_temperature_locked(const struct sim_state *s, unsigned gpu);
unsigned sim_gpu_power_mw_locked(const struct sim_state *s, unsigned gpu, unsigned limit_mw);

/* Enforced power limit of a GPU (the node's value, else a default by model). */
unsigned sim_power_limit_mw(const struct topo_gpu *g);
