/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml-view — NVML's own accounting of this process and its devices (nvml-view.h), for the memory
 * accounting's measurements and the compute share's host PID.
 *
 * Must never: be called on a fast path, call a NULL pointer, keep NVML's answers beyond the call.
 */
#include "interposer/compat.h" /* first: the glibc floor */
#include <dlfcn.h>
#include <pthread.h>

#include "interposer/interposer.h"
#include "interposer/nvml-view.h"
#include "nvml/nvml-abi.h"

static struct {
        pthread_once_t once;
        __typeof__(&nvmlDeviceGetHandleByUUID) by_uuid;
        __typeof__(&nvmlDeviceGetComputeRunningProcesses_v3) procs;
        __typeof__(&nvmlDeviceGetMemoryInfo) memory;
} v = { .once = PTHREAD_ONCE_INIT };

void *gs_view_real_nvml(bool load) {
        void *h = gs_dlopen("libnvidia-ml.so.1", (load ? RTLD_NOW : RTLD_NOW | RTLD_NOLOAD) | RTLD_LOCAL);
        if (!h)
                return NULL;
        /* A function nobody hooks lives in the real library whichever object the name gave: open that one. */
        Dl_info info;
        void *fn = dlsym(h, "nvmlInit_v2");
        if (!fn || !dladdr(fn, &info) || !info.dli_fname)
                return h;
        void *real_h = gs_dlopen(info.dli_fname, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        return real_h ? real_h : h;
}

static void view_open(void) {
        void *dl = gs_view_real_nvml(true);
        if (!dl)
                return;
        __typeof__(&nvmlInit_v2) init = (__typeof__(init))dlsym(dl, "nvmlInit_v2");
        __typeof__(v.by_uuid) by_uuid = (__typeof__(by_uuid))dlsym(dl, "nvmlDeviceGetHandleByUUID");
        __typeof__(v.procs) procs = (__typeof__(procs))dlsym(dl, "nvmlDeviceGetComputeRunningProcesses_v3");
        if (!procs) /* same layout (nvmlProcessInfo_t) in _v2 */
                procs = (__typeof__(procs))dlsym(dl, "nvmlDeviceGetComputeRunningProcesses_v2");
        __typeof__(v.memory) memory = (__typeof__(memory))dlsym(dl, "nvmlDeviceGetMemoryInfo");
        if (!init || !by_uuid || init() != NVML_SUCCESS)
                return;
        v.by_uuid = by_uuid;
        v.procs = procs;
        v.memory = memory;
}

void gs_view_atfork_child(void) {
        v = (__typeof__(v)){ .once = PTHREAD_ONCE_INIT };
}

static bool device(const char *uuid, nvmlDevice_t *ret) {
        if (!uuid || !uuid[0])
                return false;
        pthread_once(&v.once, view_open);
        return v.by_uuid && gs_view_by_cuda_uuid(v.by_uuid, uuid, ret) == NVML_SUCCESS;
}

void gs_view_processes(const char *uuid, struct gs_pidset *ret) {
        ret->valid = false;
        ret->n = 0;
        nvmlDevice_t d;
        if (!device(uuid, &d) || !v.procs)
                return;
        nvmlProcessInfo_t info[64];
        unsigned count = 64;
        if (v.procs(d, &count, info) != NVML_SUCCESS)
                return;
        for (unsigned i = 0; i < count && i < 64; i++) {
                ret->pid[ret->n] = info[i].pid;
                /* NVML_VALUE_NOT_AVAILABLE (all ones) where the driver cannot say (Windows WDDM) */
                ret->used[ret->n++] = info[i].usedGpuMemory == ~0ULL ? 0 : info[i].usedGpuMemory;
        }
        ret->valid = true;
}

void gs_view_learn_host_pid(struct gs_region *r, unsigned slot, const struct gs_pidset *before,
                            const struct gs_pidset *now) {
        if (!before->valid || !now->valid || slot >= GS_REGION_SLOTS)
                return;
        unsigned found = 0, n_new = 0;
        for (unsigned i = 0; i < now->n; i++) {
                bool old = false;
                for (unsigned k = 0; k < before->n && !old; k++)
                        old = before->pid[k] == now->pid[i];
                if (!old) {
                        found = now->pid[i];
                        n_new++;
                }
        }
        if (n_new == 1) /* two processes starting at once: ambiguous, learn it at the next context */
                __atomic_store_n(&r->slot[slot].host_pid, found, __ATOMIC_RELAXED);
}

bool gs_view_process_used(const char *uuid, unsigned pid, uint64_t *ret) {
        struct gs_pidset s;
        if (!pid)
                return false;
        gs_view_processes(uuid, &s);
        for (unsigned i = 0; s.valid && i < s.n; i++)
                if (s.pid[i] == pid) {
                        *ret = s.used[i];
                        return true;
                }
        return false;
}

bool gs_view_device_used(const char *uuid, uint64_t *ret) {
        nvmlDevice_t d;
        nvmlMemory_t m;
        if (!device(uuid, &d) || !v.memory || v.memory(d, &m) != NVML_SUCCESS)
                return false;
        *ret = m.used;
        return true;
}
