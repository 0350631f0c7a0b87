/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml-hook — the container's view of a limited GPU through NVML, exported by libgpuslice-cuda.so:
 * nvmlDeviceGetMemoryInfo and _v2 answer with the limited total and the container's own used/free (the
 * numbers cuMemGetInfo gives: never above the physical ones, never underflowing), and
 * nvmlDeviceGetComputeRunningProcesses (v1, _v2, _v3) list the container's own processes only (the other
 * containers' are not this one's memory, and their PIDs are not its business). Any device handle works
 * (nvmlDeviceGetHandleByIndex/_v2, ByUUID, ByPciBusId/_v2, BySerial): the GPU is recognised by its UUID.
 *
 * How programs reach these (docs/interposer.md, "NVML"): linked with -lnvidia-ml or looking up through
 * RTLD_DEFAULT, the preloaded interposer comes first in the global scope; dlopen("libnvidia-ml.so.1") +
 * dlsym on the handle (pynvml) finds them because the libnvidia-ml.so.1 of a limited container is
 * libgpuslice-nvml.so (nvml-shim.c), whose dependency list puts this library before the real NVML. The real
 * functions are looked up in the real NVML's own handle (gs_view_real_nvml), never through the shim.
 *
 * Must never call a NULL pointer (no NVML loaded: NVML_ERROR_UNINITIALIZED, as NVML answers before
 * nvmlInit), never allocate or lock.
 */
#include "interposer/compat.h" /* first: the glibc floor */
#include <dlfcn.h>
#include <string.h>
#include <strings.h>

#include "interposer/hooks.h"
#include "interposer/interposer.h"
#include "interposer/nvml-view.h"
#include "nvml/nvml-abi.h"

/* Typed pointers to the real definitions, resolved once NVML is loaded. */
static struct {
#define GS_NVML_NEXT(sym) __typeof__(&sym) sym;
        GS_NVML_HOOKS(GS_NVML_NEXT)
        GS_NVML_INTERNAL(GS_NVML_NEXT)
#undef GS_NVML_NEXT
        int resolved;
} next;

static void resolve(void) {
        if (__atomic_load_n(&next.resolved, __ATOMIC_ACQUIRE))
                return;
        /* Only once the program has loaded NVML: before that there is nothing to find, later there may be. */
        void *h = gs_view_real_nvml(false);
        if (!h)
                return;
#define GS_NVML_RESOLVE(sym) __atomic_store_n(&next.sym, (__typeof__(next.sym))dlsym(h, #sym), __ATOMIC_RELAXED);
        GS_NVML_HOOKS(GS_NVML_RESOLVE)
        GS_NVML_INTERNAL(GS_NVML_RESOLVE)
#undef GS_NVML_RESOLVE
        if (next.nvmlDeviceGetMemoryInfo || next.nvmlDeviceGetMemoryInfo_v2)
                __atomic_store_n(&next.resolved, 1, __ATOMIC_RELEASE);
}

/* The container's limit and usage on the device, or false when it is not limited. */
static bool limited(nvmlDevice_t dev, uint64_t *ret_limit, uint64_t *ret_used) {
        char uuid[96];
        if (!next.nvmlDeviceGetUUID || next.nvmlDeviceGetUUID(dev, uuid, sizeof uuid) != NVML_SUCCESS)
                return false;
        return gs_memory_view(uuid, ret_limit, ret_used);
}

static void view(uint64_t limit, uint64_t used_c, unsigned long long *total, unsigned long long *free,
                 unsigned long long *used) {
        uint64_t t = limit < *total ? limit : *total;
        uint64_t u = used_c < t ? used_c : t;
        uint64_t f = t - u;
        *free = f < *free ? f : *free;
        *used = u;
        *total = t;
}

#define GS_NVML_EXPORT __attribute__((visibility("default")))

GS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
        resolve();
        if (!next.nvmlDeviceGetMemoryInfo)
                return NVML_ERROR_UNINITIALIZED;
        nvmlReturn_t r = next.nvmlDeviceGetMemoryInfo(device, memory);
        uint64_t limit, used;
        if (r == NVML_SUCCESS && memory && limited(device, &limit, &used))
                view(limit, used, &memory->total, &memory->free, &memory->used);
        return r;
}

GS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
        resolve();
        if (!next.nvmlDeviceGetMemoryInfo_v2)
                return NVML_ERROR_UNINITIALIZED;
        nvmlReturn_t r = next.nvmlDeviceGetMemoryInfo_v2(device, memory);
        uint64_t limit, used;
        if (r == NVML_SUCCESS && memory && limited(device, &limit, &used)) {
                view(limit, used, &memory->total, &memory->free, &memory->used);
                memory->reserved = 0; /* inside the limit nothing is set aside */
        }
        return r;
}

/*
 * The process lists of a limited GPU: the entries whose PID is one of this container's processes (the host
 * PIDs its slots learnt), in NVML's order; *count says how many, as NVML would for that many processes
 * (NVML_ERROR_INSUFFICIENT_SIZE when the caller's array is too small, with the count needed). The real call
 * is asked with an array of its own (64 processes, more than a GPU serves in practice: beyond, the real
 * answer's INSUFFICIENT_SIZE is returned as it is).
 */
#define GS_NVML_PROCS(fn, type)                                                        \
        do {                                                                           \
                resolve();                                                             \
                if (!next.fn)                                                          \
                        return NVML_ERROR_UNINITIALIZED;                               \
                uint64_t limit_, used_;                                                \
                if (!infoCount || !limited(device, &limit_, &used_))                   \
                        return next.fn(device, infoCount, infos);                      \
                type all_[64];                                                         \
                unsigned n_ = 64;                                                      \
                nvmlReturn_t r_ = next.fn(device, &n_, all_);                          \
                if (r_ != NVML_SUCCESS) {                                              \
                        if (r_ == NVML_ERROR_INSUFFICIENT_SIZE)                        \
                                *infoCount = n_;                                       \
                        return r_;                                                     \
                }                                                                      \
                unsigned k_ = 0;                                                       \
                for (unsigned i_ = 0; i_ < n_ && i_ < 64; i_++)                        \
                        if (gs_container_host_pid(all_[i_].pid))                       \
                                all_[k_++] = all_[i_];                                 \
                bool fits_ = infos && *infoCount >= k_;                                \
                if (fits_)                                                             \
                        memcpy(infos, all_, k_ * sizeof *all_);                        \
                *infoCount = k_;                                                       \
                return fits_ || k_ == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE; \
        } while (0)

GS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                                 nvmlProcessInfo_v1_t *infos) {
        GS_NVML_PROCS(nvmlDeviceGetComputeRunningProcesses, nvmlProcessInfo_v1_t);
}

GS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                                    nvmlProcessInfo_t *infos) {
        GS_NVML_PROCS(nvmlDeviceGetComputeRunningProcesses_v2, nvmlProcessInfo_t);
}

GS_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                                    nvmlProcessInfo_t *infos) {
        GS_NVML_PROCS(nvmlDeviceGetComputeRunningProcesses_v3, nvmlProcessInfo_t);
}
