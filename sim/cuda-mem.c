/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cuda-mem — the simulated driver's allocation families beyond cuMemAlloc (which cuda.c owns):
 * pitched, managed and stream-ordered allocations (device pointers freed with cuMemFree or
 * cuMemFreeAsync), virtual-memory-management handles (cuMemCreate/cuMemRelease), CUDA arrays and
 * mipmapped arrays. Every byte is charged to the calling process on its GPU in the shared node state,
 * so it shows in NVML and counts against the GPU's capacity, exactly like cuMemAlloc.
 *
 * Must never hand out memory past the GPU's capacity, never leave a handle's bytes charged after it
 * is released, never export anything but CUDA API names (cuda.map).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sim/cuda-sim.h"
#include "util/util.h"

#define PITCH_ALIGN 512u
#define VMM_GRANULARITY (2ULL << 20)

/* ---- charging bytes that are not cuda.c device pointers (handles, arrays) ---- */

static CUresult charge(unsigned gpu, uint64_t bytes) {
        struct sim_state *s = sim_cuda_state();
        const struct topo *t = sim_cuda_node();
        const struct sim_identity *self = sim_cuda_self();
        if (sim_state_lock(s) < 0)
                return CUDA_ERROR_UNKNOWN;
        sim_state_prune_locked(s);
        uint64_t total = t->gpu[gpu].memory_total, usable = total - sim_reserve_bytes(total);
        uint64_t used = sim_state_used_locked(s, gpu);
        struct sim_proc *p = NULL;
        CUresult r = CUDA_SUCCESS;
        if (used > usable || bytes > usable - used || sim_proc_get_locked(s, self->pid, gpu, &p) < 0)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        else {
                p->flags |= SIM_PROC_CUDA;
                p->ns_pid = self->ns_pid;
                p->pidns = self->pidns;
                p->used_bytes += bytes;
        }
        sim_state_unlock(s);
        return r;
}

static void uncharge(unsigned gpu, uint64_t bytes) {
        struct sim_state *s = sim_cuda_state();
        if (sim_state_lock(s) < 0)
                return;
        struct sim_proc *p = sim_proc_find_locked(s, sim_cuda_self()->pid, gpu);
        if (p)
                p->used_bytes -= MIN(p->used_bytes, bytes);
        sim_state_unlock(s);
}

/* A charged object behind an opaque handle (arrays, mipmapped arrays, VMM allocations). */
#define OBJ_MAGIC 0x4d424f53u /* "SOBM" */
enum obj_kind { OBJ_ARRAY = 1, OBJ_MIPMAP, OBJ_VMM };

struct obj {
        uint32_t magic;
        uint32_t kind;
        unsigned gpu;
        uint64_t bytes;
        struct obj *next;
};

static pthread_mutex_t obj_lock = PTHREAD_MUTEX_INITIALIZER;
static struct obj *objs;

static CUresult obj_new(enum obj_kind kind, unsigned gpu, uint64_t bytes, struct obj **ret) {
        struct obj *o = calloc(1, sizeof *o);
        if (!o)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = charge(gpu, bytes);
        if (r != CUDA_SUCCESS) {
                free(o);
                return r;
        }
        *o = (struct obj){ .magic = OBJ_MAGIC, .kind = kind, .gpu = gpu, .bytes = bytes };
        pthread_mutex_lock(&obj_lock);
        o->next = objs;
        objs = o;
        pthread_mutex_unlock(&obj_lock);
        *ret = o;
        return CUDA_SUCCESS;
}

/* Unlink and free the object if it is ours and of that kind. */
static CUresult obj_destroy(const void *handle, enum obj_kind kind) {
        pthread_mutex_lock(&obj_lock);
        struct obj **pp = &objs;
        while (*pp && (const void *)*pp != handle)
                pp = &(*pp)->next;
        struct obj *o = *pp;
        if (!o || o->kind != kind) {
                pthread_mutex_unlock(&obj_lock);
                return CUDA_ERROR_INVALID_HANDLE;
        }
        *pp = o->next;
        pthread_mutex_unlock(&obj_lock);
        uncharge(o->gpu, o->bytes);
        o->magic = 0;
        free(o);
        return CUDA_SUCCESS;
}

static CUresult current_gpu(unsigned *gpu) {
        int ord;
        return sim_cuda_current(&ord, gpu);
}

/* ---- device pointers: pitched, managed, stream-ordered ---- */

static CUresult pitch_alloc(CUdeviceptr *dptr, uint64_t *pitch, uint64_t w, uint64_t h, unsigned elem, bool legacy) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!dptr || !pitch || w == 0 || h == 0 || (elem != 4 && elem != 8 && elem != 16))
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t p = (w + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN, bytes;
        if (p < w || __builtin_mul_overflow(p, h, &bytes))
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = sim_cuda_mem_alloc(dptr, bytes, legacy);
        if (r == CUDA_SUCCESS)
                *pitch = p;
        return r;
}

_public_ CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                     unsigned int ElementSizeBytes) {
        uint64_t pitch = 0;
        CUresult r = pitch_alloc(dptr, &pitch, WidthInBytes, Height, ElementSizeBytes, false);
        if (r == CUDA_SUCCESS)
                *pPitch = (size_t)pitch;
        return r;
}

_public_ CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                                  unsigned int Height, unsigned int ElementSizeBytes) {
        CUdeviceptr p = 0;
        uint64_t pitch = 0;
        if (!dptr || !pPitch)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = pitch_alloc(&p, &pitch, WidthInBytes, Height, ElementSizeBytes, true);
        if (r == CUDA_SUCCESS) {
                *dptr = (CUdeviceptr_v1)p;
                *pPitch = (unsigned int)pitch;
        }
        return r;
}

_public_ CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
        if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
                return CUDA_ERROR_INVALID_VALUE;
        return sim_cuda_mem_alloc(dptr, bytesize, false);
}

/* Stream-ordered allocations complete at once: the simulated streams have no pending copies. */
_public_ CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
        (void)hStream;
        return sim_cuda_mem_alloc(dptr, bytesize, false);
}

_public_ CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
        (void)hStream;
        return sim_cuda_mem_alloc(dptr, bytesize, false);
}

_public_ CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
        (void)pool;
        (void)hStream;
        return sim_cuda_mem_alloc(dptr, bytesize, false);
}

_public_ CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                               CUstream hStream) {
        (void)pool;
        (void)hStream;
        return sim_cuda_mem_alloc(dptr, bytesize, false);
}

_public_ CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
        (void)hStream;
        return sim_cuda_mem_free(dptr);
}

_public_ CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
        (void)hStream;
        return sim_cuda_mem_free(dptr);
}

_public_ CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
        (void)pool;
        (void)minBytesToKeep;
        return CUDA_SUCCESS; /* freed pool memory goes back at once here */
}

/* ---- virtual memory management ---- */

_public_ CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                                CUmemAllocationGranularity_flags option) {
        (void)option;
        if (!granularity || !prop)
                return CUDA_ERROR_INVALID_VALUE;
        *granularity = VMM_GRANULARITY;
        return CUDA_SUCCESS;
}

_public_ CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                              unsigned long long flags) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!handle || !prop || flags || size == 0 || size % VMM_GRANULARITY ||
            prop->type != CU_MEM_ALLOCATION_TYPE_PINNED || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
                return CUDA_ERROR_INVALID_VALUE;
        unsigned gpu;
        CUresult r = sim_cuda_gpu_of((CUdevice)prop->location.id, &gpu);
        if (r != CUDA_SUCCESS)
                return r;
        struct obj *o;
        r = obj_new(OBJ_VMM, gpu, size, &o);
        if (r == CUDA_SUCCESS)
                *handle = (CUmemGenericAllocationHandle)(uintptr_t)o;
        return r;
}

_public_ CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        return obj_destroy((const void *)(uintptr_t)handle, OBJ_VMM);
}

/* ---- arrays ---- */

static uint64_t format_bytes(CUarray_format f) {
        switch ((int)f) {
        case CU_AD_FORMAT_UNSIGNED_INT8:
        case CU_AD_FORMAT_SIGNED_INT8: return 1;
        case CU_AD_FORMAT_UNSIGNED_INT16:
        case CU_AD_FORMAT_SIGNED_INT16:
        case CU_AD_FORMAT_HALF: return 2;
        default: return 4;
        }
}

static uint64_t mul_sat(uint64_t a, uint64_t b) {
        uint64_t r;
        return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* The documented size of an array: width × height × depth (0 counts as 1) × channels × element size. */
static uint64_t array_bytes(uint64_t w, uint64_t h, uint64_t d, unsigned channels, CUarray_format f) {
        return mul_sat(mul_sat(mul_sat(w ? w : 1, h ? h : 1), d ? d : 1), mul_sat(channels, format_bytes(f)));
}

static CUresult array_create(CUarray *pHandle, uint64_t w, uint64_t h, uint64_t d, unsigned channels,
                             CUarray_format f, enum obj_kind kind, unsigned levels) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pHandle || w == 0 || (channels != 1 && channels != 2 && channels != 4))
                return CUDA_ERROR_INVALID_VALUE;
        unsigned gpu;
        CUresult r = current_gpu(&gpu);
        if (r != CUDA_SUCCESS)
                return r;
        uint64_t bytes = 0;
        for (unsigned l = 0; l < (levels ? levels : 1) && l < 64; l++) {
                uint64_t b = array_bytes(MAX(w >> l, 1), h ? MAX(h >> l, 1) : 0, d ? MAX(d >> l, 1) : 0, channels, f);
                bytes = bytes + b < bytes ? UINT64_MAX : bytes + b;
        }
        struct obj *o;
        r = obj_new(kind, gpu, bytes, &o);
        if (r == CUDA_SUCCESS)
                *pHandle = (CUarray)(void *)o;
        return r;
}

_public_ CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d) {
        if (!d)
                return CUDA_ERROR_INVALID_VALUE;
        return array_create(pHandle, d->Width, d->Height, 0, d->NumChannels, d->Format, OBJ_ARRAY, 1);
}

_public_ CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *d) {
        if (!d)
                return CUDA_ERROR_INVALID_VALUE;
        return array_create(pHandle, d->Width, d->Height, 0, d->NumChannels, d->Format, OBJ_ARRAY, 1);
}

_public_ CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d) {
        if (!d)
                return CUDA_ERROR_INVALID_VALUE;
        return array_create(pHandle, d->Width, d->Height, d->Depth, d->NumChannels, d->Format, OBJ_ARRAY, 1);
}

_public_ CUresult cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d) {
        if (!d)
                return CUDA_ERROR_INVALID_VALUE;
        return array_create(pHandle, d->Width, d->Height, d->Depth, d->NumChannels, d->Format, OBJ_ARRAY, 1);
}

_public_ CUresult cuArrayDestroy(CUarray hArray) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        return obj_destroy((const void *)hArray, OBJ_ARRAY);
}

_public_ CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                         unsigned int numMipmapLevels) {
        if (!d || !pHandle || numMipmapLevels == 0)
                return CUDA_ERROR_INVALID_VALUE;
        CUarray a;
        CUresult r = array_create(&a, d->Width, d->Height, d->Depth, d->NumChannels, d->Format, OBJ_MIPMAP,
                                  numMipmapLevels);
        if (r == CUDA_SUCCESS)
                *pHandle = (CUmipmappedArray)(void *)a;
        return r;
}

_public_ CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        return obj_destroy((const void *)hMipmappedArray, OBJ_MIPMAP);
}

/* ---- cuGetProcAddress ---- */

void *sim_proc_lookup(const struct sim_proc_entry *t, size_t n, const char *symbol, int version, cuuint64_t flags,
                      bool *ret_named) {
        bool ptsz = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
        const struct sim_proc_entry *best = NULL;
        *ret_named = false;
        for (size_t i = 0; i < n; i++) {
                if (!streq(t[i].name, symbol))
                        continue;
                *ret_named = true;
                if (t[i].version > version || (t[i].ptsz && !ptsz))
                        continue;
                if (!best || t[i].version > best->version || (t[i].version == best->version && t[i].ptsz))
                        best = &t[i];
        }
        return best ? best->fn : NULL;
}

static const struct sim_proc_entry mem_procs[] = {
        { "cuMemAllocPitch", 2000, false, (void *)cuMemAllocPitch },
        { "cuMemAllocPitch", 3020, false, (void *)cuMemAllocPitch_v2 },
        { "cuMemAllocManaged", 6000, false, (void *)cuMemAllocManaged },
        { "cuMemAllocAsync", 11020, false, (void *)cuMemAllocAsync },
        { "cuMemAllocAsync", 11020, true, (void *)cuMemAllocAsync_ptsz },
        { "cuMemAllocFromPoolAsync", 11020, false, (void *)cuMemAllocFromPoolAsync },
        { "cuMemAllocFromPoolAsync", 11020, true, (void *)cuMemAllocFromPoolAsync_ptsz },
        { "cuMemFreeAsync", 11020, false, (void *)cuMemFreeAsync },
        { "cuMemFreeAsync", 11020, true, (void *)cuMemFreeAsync_ptsz },
        { "cuMemPoolTrimTo", 11020, false, (void *)cuMemPoolTrimTo },
        { "cuMemGetAllocationGranularity", 10020, false, (void *)cuMemGetAllocationGranularity },
        { "cuMemCreate", 10020, false, (void *)cuMemCreate },
        { "cuMemRelease", 10020, false, (void *)cuMemRelease },
        { "cuArrayCreate", 2000, false, (void *)cuArrayCreate },
        { "cuArrayCreate", 3020, false, (void *)cuArrayCreate_v2 },
        { "cuArray3DCreate", 2000, false, (void *)cuArray3DCreate },
        { "cuArray3DCreate", 3020, false, (void *)cuArray3DCreate_v2 },
        { "cuArrayDestroy", 2000, false, (void *)cuArrayDestroy },
        { "cuMipmappedArrayCreate", 5000, false, (void *)cuMipmappedArrayCreate },
        { "cuMipmappedArrayDestroy", 5000, false, (void *)cuMipmappedArrayDestroy },
};

void *sim_cuda_mem_proc(const char *symbol, int version, cuuint64_t flags, bool *ret_named) {
        return sim_proc_lookup(mem_procs, ELEMENTSOF(mem_procs), symbol, version, flags, ret_named);
}
