/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml-hook — the container's view of device memory through NVML: nvmlDeviceGetMemoryInfo and
 * nvmlDeviceGetMemoryInfo_v2, exported by libgpuslice-cuda.so, answer with the limited total and the
 * container's own used/free (never above the physical numbers, never underflowing). They forward to the
 * next definition in the global scope (RTLD_NEXT): programs linked against libnvidia-ml.so.1
 * (nvidia-smi, monitoring agents) and lookups through RTLD_DEFAULT see the limit. A program that
 * dlopens NVML privately and dlsyms its handle is not caught (docs/interposer.md).
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
#include "nvml/nvml-abi.h"

/* Typed pointers to the next (real) definitions, resolved on first use. */
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
#define GS_NVML_RESOLVE(sym) \
        __atomic_store_n(&next.sym, (__typeof__(next.sym))dlsym(RTLD_NEXT, #sym), __ATOMIC_RELAXED);
        GS_NVML_HOOKS(GS_NVML_RESOLVE)
        GS_NVML_INTERNAL(GS_NVML_RESOLVE)
#undef GS_NVML_RESOLVE
        /* Only once NVML is loaded: before that there is nothing to find, later there may be. */
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
