/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml — gpuslice's binding to NVIDIA's management library.
 *
 * Loads libnvidia-ml.so.1 with dlopen (never the unversioned .so, never linked), resolves a typed
 * function table generated from NVML_ABI_FUNCTIONS (nvml-abi.h), falls back to older symbol
 * versions where a driver lacks the newer one, and translates NVML's return codes to -errno once,
 * here, keeping NVML's own text for the caller's log. Builds the node inventory (struct topo) and
 * offers the per-device queries the agent needs (processes, utilization, temperature, power) and
 * an event API for health (critical Xids).
 *
 * Must never: call a NULL function pointer, crash or fail a whole inventory because one GPU is
 * lost or forbidden, log (callers log once, with the struct nvml_error they get back), or link
 * against NVML at build time.
 *
 * Errors. Every function returns >= 0 on success or -errno. Functions that talk to NVML take a
 * last argument `struct nvml_error *err` (may be NULL) that is filled ONLY on failure: the NVML
 * return code, the NVML function that failed and NVML's text (nvmlErrorString). It is a
 * parameter rather than per-handle state so that threads (e.g. the health event thread and the
 * main loop) can share one struct nvml. Failures that do not come from an NVML call use the
 * closest NVML code: dlopen failing → NVML_ERROR_LIBRARY_NOT_FOUND with dlerror()'s text and
 * func "dlopen"; a missing required symbol → NVML_ERROR_FUNCTION_NOT_FOUND with func = the symbol.
 *
 * The nvmlReturn_t → errno mapping (nvml_errno()):
 *   SUCCESS 0                     INVALID_ARGUMENT -EINVAL       NOT_SUPPORTED -EOPNOTSUPP
 *   NO_PERMISSION -EPERM          ALREADY_INITIALIZED -EALREADY  NOT_FOUND -ENOENT
 *   INSUFFICIENT_SIZE -ENOBUFS    DRIVER_NOT_LOADED -ENXIO       TIMEOUT -ETIMEDOUT
 *   LIBRARY_NOT_FOUND -ELIBACC    FUNCTION_NOT_FOUND -ENOSYS     GPU_IS_LOST -ENODEV
 *   RESET_REQUIRED -ENOTRECOVERABLE  LIB_RM_VERSION_MISMATCH -ELIBBAD  IN_USE -EBUSY
 *   MEMORY -ENOMEM                NO_DATA -ENODATA               INSUFFICIENT_RESOURCES -ENOSPC
 *   ARGUMENT_VERSION_MISMATCH -EPROTO  NOT_READY -EAGAIN         GPU_NOT_FOUND -ENOENT
 *   UNINITIALIZED, INVALID_STATE -EBADFD
 *   VGPU_ECC_NOT_SUPPORTED, FREQ_NOT_SUPPORTED, DEPRECATED, RESET_TYPE_NOT_SUPPORTED -EOPNOTSUPP
 *   INSUFFICIENT_POWER, IRQ_ISSUE, CORRUPTED_INFOROM, OPERATING_SYSTEM, UNKNOWN, anything else -EIO
 * So -ENODEV always means "this GPU is lost" and -EPERM "not allowed to query it".
 *
 * Threads: NVML is thread-safe and so is this binding: one struct nvml may be used from several
 * threads at once (the device table is guarded by a mutex, NVML calls run outside it).
 * nvml_close() must not race with any other call on the same handle.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mig/mig.h"
#include "nvml/nvml-abi.h"
#include "topo/topo.h"

/* What nvml_open(NULL, …) loads: the versioned soname the driver installs. */
#define NVML_DEFAULT_LIBRARY "libnvidia-ml.so.1"

/* Upper bound on NVLinks probed per GPU (NVML_NVLINK_MAX_LINKS was 12, 18, then 36). */
#define NVML_MAX_NVLINKS_PROBED 64

struct nvml;

struct nvml_error {
        int nvml_code;  /* nvmlReturn_t of the failed call (see above for non-NVML failures) */
        char func[64];  /* NVML function that failed, e.g. "nvmlDeviceGetUUID", or "dlopen" */
        char text[128]; /* NVML's own text (nvmlErrorString) or dlerror() */
};

/* "func: text" (e.g. "nvmlDeviceGetUUID: GPU is lost") into buf, cut short if need be. Returns buf. */
const char *nvml_error_string(const struct nvml_error *e, char *buf, size_t len);

/* nvmlReturn_t → 0 or -errno, as in the table above. */
int nvml_errno(int nvml_code);
/* "GPU_IS_LOST", "NO_PERMISSION", … ("UNKNOWN" for codes outside the enum). Never NULL. */
const char *nvml_code_name(int nvml_code);

/*
 * Load NVML from `library` (NULL → NVML_DEFAULT_LIBRARY, resolved through the normal library
 * search path; a path with a '/' is used as is), resolve its symbols and initialize it
 * (nvmlInit_v2, falling back to nvmlInit). Required symbols: an init function, nvmlShutdown,
 * nvmlDeviceGetCount[_v2], nvmlDeviceGetHandleByIndex[_v2]; everything else is optional and its
 * absence makes only the queries that need it fail with -ENOSYS (or leaves inventory fields
 * unknown). Errors: -ELIBACC (cannot load), -ENOSYS (required symbol missing), the mapped init
 * failure (e.g. -ENXIO for DRIVER_NOT_LOADED), -ENOMEM. Each successful open is one NVML init
 * reference; nvml_close() gives it back.
 */
int nvml_open(const char *library, struct nvml **ret, struct nvml_error *err);
/* Shut NVML down (one reference) and unload it. NULL is fine. Returns NULL. Free event sets first. */
struct nvml *nvml_close(struct nvml *n);

/* Root of sysfs for the NUMA-node fallback (default "/sys"; tests point it at a fake tree). */
int nvml_set_sysfs_root(struct nvml *n, const char *root);

/* Whether the loaded library exports `symbol` (one of NVML_ABI_FUNCTIONS): for tests and
 * diagnostics ("which fallback is in use"). */
bool nvml_has_symbol(const struct nvml *n, const char *symbol);

/* Number of GPUs NVML counts (including those it will not let us query). */
int nvml_device_count(struct nvml *n, unsigned *ret, struct nvml_error *err);

/*
 * The whole node: driver and CUDA versions, every GPU NVML counts (index, state, UUID, name,
 * memory total/used, PCI bus id, minor, NUMA node, CPU affinity, MIG mode, compute capability,
 * power limit) and every pair's link (common-ancestor level, NVLink count; GPUs that both have
 * links to NVSwitches are joined by min(their switch link counts) and ->nvswitch is set; a link's
 * far end is known by nvmlDeviceGetNvLinkRemoteDeviceType where the driver has it (460+), else
 * by its PCI bus and device id: anything that is not a GPU is then taken for a switch).
 * A GPU whose handle or queries answer NO_PERMISSION / GPU_IS_LOST (or fail otherwise) gets
 * state TOPO_GPU_NO_PERMISSION / TOPO_GPU_LOST / TOPO_GPU_ERROR with "func: NVML text" in
 * state_text and its links stay UNKNOWN; the rest of the node is still inventoried. Fields NVML
 * does not support stay "unknown" as topo.h documents. NICs are not reported (n_nics = 0).
 * Also refreshes the device handles used by the per-device queries below.
 * Fails only when the node as a whole cannot be read (device count, -E2BIG past TOPO_MAX_GPUS).
 */
int nvml_inventory(struct nvml *n, struct topo *ret, struct nvml_error *err);

/*
 * Ask GPU `index` afresh (new handle, then UUID and memory): 0 when it answers normally,
 * -ENODEV when lost, -EPERM when forbidden, … For health: a GPU whose fault cleared answers
 * again. On success the fresh handle replaces the cached one.
 */
int nvml_device_probe(struct nvml *n, unsigned index, struct nvml_error *err);

/* UUID of GPU `index` ("GPU-…") into buf. -ENOBUFS when it does not fit. */
int nvml_device_uuid(struct nvml *n, unsigned index, char *buf, size_t len, struct nvml_error *err);

/* Index of the GPU with this UUID (NVML's nvmlDeviceGetHandleByUUID + nvmlDeviceGetIndex). */
int nvml_device_index_by_uuid(struct nvml *n, const char *uuid, unsigned *ret, struct nvml_error *err);

struct nvml_process {
        unsigned pid;
        uint64_t used_memory;      /* bytes; UINT64_MAX when NVML cannot tell (e.g. no permission) */
        unsigned gpu_instance;     /* MIG GPU instance, UINT32_MAX when not MIG or unknown */
        unsigned compute_instance; /* UINT32_MAX when not MIG or unknown */
};

/*
 * Compute processes running on GPU `index` (nvmlDeviceGetComputeRunningProcesses_v3, falling back
 * to _v2 and the unversioned call with its 16-byte layout), following NVML's INSUFFICIENT_SIZE
 * protocol (retried when processes appear between calls). *ret is a malloc'ed array the caller
 * frees (NULL when there are none), *ret_n its length.
 */
int nvml_device_processes(struct nvml *n, unsigned index, struct nvml_process **ret, size_t *ret_n,
                          struct nvml_error *err);

struct nvml_utilization {
        unsigned gpu;    /* percent of the last sample period a kernel ran */
        unsigned memory; /* percent of the period device memory was read or written */
};
int nvml_device_utilization(struct nvml *n, unsigned index, struct nvml_utilization *ret, struct nvml_error *err);

struct nvml_process_sample {
        unsigned pid;
        uint64_t timestamp_us;                 /* CPU timestamp of the sample, µs */
        unsigned sm, memory, encoder, decoder; /* percent */
};
/*
 * Per-process utilization samples newer than `last_seen_us` (0 = all NVML keeps). No newer
 * sample (NVML's NOT_FOUND) is success with *ret_n = 0. *ret is malloc'ed, caller frees.
 */
int nvml_device_process_utilization(struct nvml *n, unsigned index, uint64_t last_seen_us,
                                    struct nvml_process_sample **ret, size_t *ret_n, struct nvml_error *err);

/* GPU core temperature in °C. */
int nvml_device_temperature(struct nvml *n, unsigned index, unsigned *ret_celsius, struct nvml_error *err);
/* Memory total and used of GPU `index` in bytes (nvmlDeviceGetMemoryInfo_v2, falling back to v1):
 * the per-sample query that spares a whole nvml_inventory. */
int nvml_device_memory(struct nvml *n, unsigned index, uint64_t *ret_total, uint64_t *ret_used, struct nvml_error *err);
/* Power draw in milliwatts. */
int nvml_device_power(struct nvml *n, unsigned index, unsigned *ret_milliwatts, struct nvml_error *err);
/* Compute mode (nvmlComputeMode_t: NVML_COMPUTEMODE_DEFAULT, _PROHIBITED, _EXCLUSIVE_PROCESS) of GPU `index`, and
 * setting it (NVML wants root: -EPERM otherwise; in effect at once for new contexts, lost at reboot). */
int nvml_device_compute_mode(struct nvml *n, unsigned index, int *ret_mode, struct nvml_error *err);
int nvml_device_set_compute_mode(struct nvml *n, unsigned index, int mode, struct nvml_error *err);

/*
 * Events (health). An event set registers, per GPU, the bits of `mask` that the GPU reports in
 * nvmlDeviceGetSupportedEventTypes (mask 0 = nvmlEventTypeXidCriticalError). GPUs that cannot be
 * registered (lost, forbidden, no supported bit) are skipped, not an error: see
 * nvml_events_registered(), and nvml_events_add_device() once such a GPU recovers.
 * The set must be freed before its struct nvml is closed. Waiting on one set from one thread
 * at a time; other threads may keep using the struct nvml meanwhile.
 */
struct nvml_events;

struct nvml_event {
        int gpu;               /* NVML index of the GPU, -1 if NVML gave an unknown device */
        uint64_t type;         /* nvmlEventType* bit */
        uint64_t data;         /* NVML eventData */
        unsigned xid;          /* for nvmlEventTypeXidCriticalError: the Xid (999 = unknown); else 0 */
        unsigned gpu_instance; /* MIG instance ids, UINT32_MAX when not MIG */
        unsigned compute_instance;
};

int nvml_events_new(struct nvml *n, uint64_t mask, struct nvml_events **ret, struct nvml_error *err);
struct nvml_events *nvml_events_free(struct nvml_events *e);
/* Register GPU `index` (again): 0, or -errno if it cannot be (-EOPNOTSUPP: no bit of the mask). */
int nvml_events_add_device(struct nvml_events *e, unsigned index, struct nvml_error *err);
bool nvml_events_registered(const struct nvml_events *e, unsigned index);
/* Wait up to timeout_ms: 1 with *ret filled when an event arrived, 0 on timeout, or -errno. */
int nvml_events_wait(struct nvml_events *e, unsigned timeout_ms, struct nvml_event *ret, struct nvml_error *err);

/*
 * MIG (Multi-Instance GPU), filling the model of mig/mig.h. What a MIG device handle answers is asked
 * through it (UUID, name, attributes, memory, processes); the rest through the parent GPU's handle.
 */

/* MIG mode, current and pending (0 off, 1 on); -EOPNOTSUPP when the GPU has no MIG. */
int nvml_mig_mode(struct nvml *n, unsigned index, int *ret_current, int *ret_pending, struct nvml_error *err);
/* One GPU's MIG side: mode, GPU instances with their compute instances, MIG devices (by MIG index, holes
 * skipped) with UUID, name, profile name, attributes and memory. -EOPNOTSUPP: no MIG. */
int nvml_mig_gpu(struct nvml *n, unsigned index, struct mig_gpu *ret, struct nvml_error *err);
/* Every GPU of t that answers (lost, forbidden and MIG-less GPUs stay mode -1). Fails only on an
 * unexpected NVML error. */
int nvml_mig_inventory(struct nvml *n, const struct topo *t, struct mig_node *ret, struct nvml_error *err);
/* What the GPU can hold: every GPU instance profile it reports, with its placements (MIG must be on;
 * NVML wants privilege for placements: -EPERM otherwise). */
int nvml_mig_caps(struct nvml *n, unsigned index, struct mig_caps *ret, struct nvml_error *err);
/* Processes on MIG device mig_index of GPU index, through the MIG device's handle. */
int nvml_mig_device_processes(struct nvml *n, unsigned index, unsigned mig_index, struct nvml_process **ret,
                              size_t *ret_n, struct nvml_error *err);
/* Set the MIG mode; *ret_activation is NVML's activation status (NVML_SUCCESS: in effect now;
 * NVML_ERROR_RESET_REQUIRED or NVML_ERROR_IN_USE: pending until a GPU reset). */
int nvml_mig_set_mode(struct nvml *n, unsigned index, int mode, int *ret_activation, struct nvml_error *err);
/* Create a GPU instance of profile_id (info.id) at a placement; its id in *ret_gi. -ENOSPC: no room. */
int nvml_mig_create_gi(struct nvml *n, unsigned index, unsigned profile_id, struct mig_placement at, unsigned *ret_gi,
                       struct nvml_error *err);
/* Create a compute instance at a placement (compute slices) in GPU instance gi; its id in *ret_ci. */
int nvml_mig_create_ci(struct nvml *n, unsigned index, unsigned gi, struct mig_placement at, unsigned *ret_ci,
                       struct nvml_error *err);
/* Destroy; -EBUSY (NVML's IN_USE) while processes run on it / while a GPU instance has compute instances. */
int nvml_mig_destroy_ci(struct nvml *n, unsigned index, unsigned gi, unsigned ci, struct nvml_error *err);
int nvml_mig_destroy_gi(struct nvml *n, unsigned index, unsigned gi, struct nvml_error *err);

/*
 * Helpers, public for the CLI and for tests.
 */

/* CPU bitmask (words of 64 CPUs, as nvmlDeviceGetCpuAffinity returns) → cpulist "0-9,20-29".
 * Returns 0, or -ENOBUFS when it does not fit in len (buf then holds ""). */
int nvml_format_cpulist(const unsigned long *mask, size_t n_words, char *buf, size_t len);

/* NVML bus id ("00000000:1A:00.0", or legacy "0000:1a:00.0") → sysfs device name "0000:1a:00.0".
 * 0 or -EINVAL. len >= 13. */
int nvml_sysfs_bus_id(const char *bus_id, char *buf, size_t len);

/* Whether two NVML bus ids name one PCI function (case and domain width ignored). */
bool nvml_bus_id_equal(const char *a, const char *b);
