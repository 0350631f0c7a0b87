/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml-view — what NVML, the driver's own accounting, says about this process: the PID NVML shows for it
 * (its host PID, learnt around its first context), the device memory the driver holds for it, and a
 * device's memory in use. The memory accounting measures what no hooked call names with these (a
 * context's own memory, loaded code, lazily loaded kernels) rather than guessing.
 *
 * Internal to libgpuslice-cuda.so. NVML is loaded privately (dlopen RTLD_LOCAL) on first use; every call
 * here is a slow path (context creation, code loads, memory queries), never a launch or an allocation's
 * fast path. Without NVML each answers "unknown" (false / valid = false).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "interposer/limits.h"
#include "nvml/nvml-abi.h"

/* A handle of the real NVML library, never of this library's NVML stand-in (libgpuslice-nvml.so, installed
 * as libnvidia-ml.so.1, whose lookups give the hooked queries first): the object that defines nvmlInit_v2.
 * load: dlopen it if the process has not; else NULL when no NVML is loaded. */
void *gs_view_real_nvml(bool load) __attribute__((visibility("hidden")));

/* NVML's handle of the CUDA device with this UUID (uuid "GPU-…", as the interposer writes cuDeviceGetUuid's
 * bytes): a MIG device's UUID has the same bytes, but NVML names it "MIG-…" — asked that way when the GPU-
 * form names no device. */
static inline nvmlReturn_t gs_view_by_cuda_uuid(__typeof__(&nvmlDeviceGetHandleByUUID) by_uuid, const char *uuid,
                                                nvmlDevice_t *ret) {
        nvmlReturn_t r = by_uuid(uuid, ret);
        if (r != NVML_SUCCESS && strncmp(uuid, "GPU-", 4) == 0) {
                char mig[96];
                snprintf(mig, sizeof mig, "MIG-%.88s", uuid + 4); /* UUIDs are 40 characters */
                r = by_uuid(mig, ret);
        }
        return r;
}

/* The compute processes NVML lists on a device. */
struct gs_pidset {
        unsigned n;
        unsigned pid[64];
        uint64_t used[64]; /* the driver's per-process used memory, bytes */
        bool valid;
};

/* List the device's compute processes (uuid "GPU-…"); ret->valid is false when NVML cannot say. */
void gs_view_processes(const char *uuid, struct gs_pidset *ret) __attribute__((visibility("hidden")));

/* After this process made its first context on the device: store in the slot the one PID that is in
 * `now` and not in `before` (two processes starting at once: ambiguous, nothing stored). */
void gs_view_learn_host_pid(struct gs_region *r, unsigned slot, const struct gs_pidset *before,
                            const struct gs_pidset *now) __attribute__((visibility("hidden")));

/* Device memory the driver holds for host PID pid on the device (NVML's per-process used memory): true and
 * *ret, or false (no NVML, PID 0, not listed). */
bool gs_view_process_used(const char *uuid, unsigned pid, uint64_t *ret) __attribute__((visibility("hidden")));

/* Device memory in use on the whole device (NVML's used, every process's and the driver's): true, or false. */
bool gs_view_device_used(const char *uuid, uint64_t *ret) __attribute__((visibility("hidden")));

/* In a forked child: forget the NVML opened by the parent (its pthread_once may have been cut short by the
 * fork); the child opens it again on first use. */
void gs_view_atfork_child(void) __attribute__((visibility("hidden")));
