/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml-sim — the seam between the files of the simulated libnvidia-ml.so.1: nvml.c (init, devices,
 * topology, processes, events) and nvml-mig.c (the MIG API). Hidden symbols only; never exported.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "nvml/nvml-abi.h"
#include "sim/sim.h"

#define NVML_SIM_HIDDEN __attribute__((visibility("hidden")))

/* A device handle: a GPU (mig 0) or one of its MIG devices (mig = MIG device index + 1), pointing into a
 * static per-process table. A MIG handle names the MIG device created as `serial`: once that one is
 * destroyed the handle is stale (INVALID_ARGUMENT), even if another takes its index. */
struct nvmlDevice_st {
        unsigned index; /* the GPU's NVML index */
        unsigned mig;
        uint64_t serial;
};

struct nvmlGpuInstance_st {
        unsigned gpu;
        uint32_t id;
};

struct nvmlComputeInstance_st {
        unsigned gpu;
        uint32_t gi, id;
};

#define CHECK(expr)                        \
        do {                               \
                nvmlReturn_t _r_ = (expr); \
                if (_r_ != NVML_SUCCESS)   \
                        return _r_;        \
        } while (0)

NVML_SIM_HIDDEN bool nvml_sim_initialized(void);
NVML_SIM_HIDDEN const struct topo *nvml_sim_node(void);
NVML_SIM_HIDDEN struct sim_state *nvml_sim_state(void);
/* The GPU handle of GPU i. */
NVML_SIM_HIDDEN nvmlDevice_t nvml_sim_gpu_handle(unsigned i);
/* A handle of ours (GPU or MIG), whatever it names now. */
NVML_SIM_HIDDEN bool nvml_sim_handle_valid(nvmlDevice_t d);
/* The GPU's fault flags as NVML answers them (GPU_IS_LOST, NO_PERMISSION), or SUCCESS. */
NVML_SIM_HIDDEN nvmlReturn_t nvml_sim_gpu_faults(unsigned gpu);
/* The checks a query on a GPU handle starts with: initialised, our handle, not a MIG handle
 * (NOT_SUPPORTED: the query needs the parent), the GPU's faults. */
NVML_SIM_HIDDEN nvmlReturn_t nvml_sim_dev_check(nvmlDevice_t d);
NVML_SIM_HIDDEN nvmlReturn_t nvml_sim_lock(void);
NVML_SIM_HIDDEN nvmlReturn_t nvml_sim_copy_string(const char *s, char *buf, unsigned len);

/* ---- provided by nvml-mig.c ---- */

/* The MIG device handle for index k of GPU gpu (serial: the device now at that index). */
NVML_SIM_HIDDEN nvmlDevice_t nvml_sim_mig_handle(unsigned gpu, unsigned k, uint64_t serial);
/* Lock held: the GPU and compute instance a live MIG handle names; NVML_ERROR_INVALID_ARGUMENT when stale. */
NVML_SIM_HIDDEN nvmlReturn_t nvml_sim_mig_resolve_locked(nvmlDevice_t d, struct sim_mig_gi **ret_gi,
                                                         struct sim_mig_ci **ret_ci);
/* Lock held: the MIG handle whose UUID is uuid, or NULL. */
NVML_SIM_HIDDEN nvmlDevice_t nvml_sim_mig_by_uuid_locked(const char *uuid);
/* The MIG device's UUID / name ("<GPU name> MIG 1g.10gb"). Lock held. */
NVML_SIM_HIDDEN void nvml_sim_mig_uuid_locked(nvmlDevice_t d, const struct sim_mig_ci *ci, char *buf, size_t len);
NVML_SIM_HIDDEN void nvml_sim_mig_name_locked(nvmlDevice_t d, const struct sim_mig_gi *gi, const struct sim_mig_ci *ci,
                                              char *buf, size_t len);
/* Whether the caller may change MIG and see every instance (root or CAP_SYS_ADMIN, the mig/config and
 * mig/monitor capabilities a real node grants through /dev/nvidia-caps). */
NVML_SIM_HIDDEN bool nvml_sim_privileged(void);
