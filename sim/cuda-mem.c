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
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "sim/cuda-sim.h"
#include "util/util.h"

#define PITCH_ALIGN 512u
#define VMM_GRANULARITY (2ULL << 20)

/* ---- charging bytes that are not cuda.c device pointers (handles, arrays) ---- */

CUresult sim_mem_charge(unsigned gpu, uint64_t bytes) {
        struct sim_state *s = sim_cuda_state();
        const struct topo *t = sim_cuda_node();
        const struct sim_identity *self = sim_cuda_self();
        if (sim_state_lock(s) < 0)
                return CUDA_ERROR_UNKNOWN;
        sim_state_prune_locked(s);
        uint64_t total, usable, used;
        sim_mem_capacity_locked(s, t, gpu, sim_cuda_instance(gpu), &total, &usable, &used);
        struct sim_proc *p = NULL;
        CUresult r = CUDA_SUCCESS;
        if (used > usable || bytes > usable - used || sim_proc_get_locked(s, self->pid, gpu, &p) < 0)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        else {
                sim_cuda_tag_locked(p, gpu);
                p->used_bytes += bytes;
        }
        sim_state_unlock(s);
        return r;
}

void sim_mem_uncharge(unsigned gpu, uint64_t bytes) {
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
enum obj_kind {
        OBJ_ARRAY = 1,
        OBJ_MIPMAP,
        OBJ_VMM,
        OBJ_VMM_IMPORT,
        OBJ_EXT
};

struct obj {
        uint32_t magic;
        uint32_t kind;
        unsigned gpu;
        uint64_t bytes;
        unsigned maps; /* VMM: live mappings (cuMemMap) */
        bool released; /* VMM: cuMemRelease'd while mapped — the memory goes at the last cuMemUnmap */
        CUcontext ctx; /* arrays: the context they live in (freed with it); NULL for the others */
        struct obj *next;
};

static pthread_mutex_t obj_lock = PTHREAD_MUTEX_INITIALIZER;
static struct obj *objs;

static CUresult obj_new(enum obj_kind kind, unsigned gpu, uint64_t bytes, struct obj **ret) {
        struct obj *o = calloc(1, sizeof *o);
        if (!o)
                return CUDA_ERROR_OUT_OF_MEMORY;
        bool charged = kind == OBJ_ARRAY || kind == OBJ_MIPMAP || kind == OBJ_VMM;
        CUresult r = charged ? sim_mem_charge(gpu, bytes) : CUDA_SUCCESS;
        if (r != CUDA_SUCCESS) {
                free(o);
                return r;
        }
        *o = (struct obj){ .magic = OBJ_MAGIC, .kind = kind, .gpu = gpu, .bytes = bytes };
        if (kind == OBJ_ARRAY || kind == OBJ_MIPMAP)
                (void)cuCtxGetCurrent(&o->ctx);
        pthread_mutex_lock(&obj_lock);
        o->next = objs;
        objs = o;
        pthread_mutex_unlock(&obj_lock);
        *ret = o;
        return CUDA_SUCCESS;
}

/* Unlink and free the object if it is ours and of that kind. */
static void obj_free(struct obj *o) {
        if (o->kind == OBJ_ARRAY || o->kind == OBJ_MIPMAP || o->kind == OBJ_VMM)
                sim_mem_uncharge(o->gpu, o->bytes); /* imported objects are someone else's memory */
        o->magic = 0;
        free(o);
}

void sim_mem_ctx_gone(CUcontext ctx) {
        struct obj *gone = NULL;
        pthread_mutex_lock(&obj_lock);
        for (struct obj **pp = &objs; *pp;) {
                struct obj *o = *pp;
                if (ctx && o->ctx == ctx) {
                        *pp = o->next;
                        o->next = gone;
                        gone = o;
                } else
                        pp = &o->next;
        }
        pthread_mutex_unlock(&obj_lock);
        while (gone) {
                struct obj *next = gone->next;
                obj_free(gone);
                gone = next;
        }
}

/* Unlink and free the object if it is ours and of that kind (a mapped VMM handle: once unmapped). */
static CUresult obj_destroy(const void *handle, enum obj_kind kind) {
        pthread_mutex_lock(&obj_lock);
        struct obj **pp = &objs;
        while (*pp && (const void *)*pp != handle)
                pp = &(*pp)->next;
        struct obj *o = *pp;
        if (!o || o->released || (o->kind != kind && !(kind == OBJ_VMM && o->kind == OBJ_VMM_IMPORT))) {
                pthread_mutex_unlock(&obj_lock);
                return CUDA_ERROR_INVALID_HANDLE;
        }
        if (o->maps) {
                o->released = true;
                pthread_mutex_unlock(&obj_lock);
                return CUDA_SUCCESS;
        }
        *pp = o->next;
        pthread_mutex_unlock(&obj_lock);
        obj_free(o);
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
        CUresult r;
        /* GPUSLICE_SIM_SELF_CALLS=global: like a driver that reaches its own entry points through the loader,
         * the pitched allocation calls the cuMemAlloc_v2 of whatever answers to libcuda.so.1 (an interposer's) */
        const char *self_calls = legacy ? NULL : secure_getenv("GPUSLICE_SIM_SELF_CALLS");
        void *self = self_calls && streq(self_calls, "global") ? dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) : NULL;
        __typeof__(&cuMemAlloc_v2) global = self ? (__typeof__(&cuMemAlloc_v2))dlsym(self, "cuMemAlloc_v2") : NULL;
        r = global ? global(dptr, bytes) : sim_cuda_mem_alloc(dptr, bytes, legacy);
        if (self)
                dlclose(self);
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

/*
 * Stream-ordered pools. Each process has one default pool per GPU (cuDeviceGetDefaultMemPool, also the
 * current pool). A pool charges the node state for what it RESERVES, not per allocation: an allocation
 * is served from the pool's idle memory when there is enough (no fragmentation is simulated), else the
 * pool grows. cuMemFreeAsync gives the bytes back to the pool, which keeps them reserved until a
 * synchronisation (cuCtxSynchronize, cuStreamSynchronize) releases what exceeds its release threshold
 * (default 0), or cuMemPoolTrimTo. Allocations complete at once: the simulated streams have no copies.
 *
 * Graph memory (the memory nodes of cuda-launch.c) works the same way with one graph pool per GPU,
 * filled at launch and released only by cuDeviceGraphMemTrim.
 */
#define POOL_MAGIC 0x4c4f4f50u /* "POOL" */
#define POOL_VA_BASE 0x500000000000ULL
#define POOL_VA_END 0x600000000000ULL

struct CUmemPoolHandle_st {
        uint32_t magic;
        unsigned gpu;
        int ordinal; /* the CUDA device it is located on (a memory node's location when captured) */
        uint64_t reserved, used, threshold;
        bool dead;                       /* created pool destroyed with allocations outstanding */
        bool imported;                   /* another process's pool (cuMemPoolImportFromShareableHandle) */
        uint32_t owner_pid;              /* imported: the exporting process */
        struct CUmemPoolHandle_st *next; /* created pools */
};

/* Device pointers that are not cuda.c's: pool allocations, graph allocations, imported IPC mappings. */
enum ptr_kind {
        PTR_POOL = 1,
        PTR_GRAPH,
        PTR_IPC,
        PTR_POOL_IMPORT
};

struct ptr_rec {
        CUdeviceptr ptr;
        uint64_t bytes;
        unsigned gpu;
        enum ptr_kind kind;
        bool live;                       /* graph allocations: allocated by a launch, not freed yet */
        struct CUmemPoolHandle_st *pool; /* PTR_POOL */
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER; /* pools, graph pools, ptr records */
static struct CUmemPoolHandle_st default_pool[TOPO_MAX_GPUS];
static struct CUmemPoolHandle_st *created_pools; /* cuMemPoolCreate */
static struct { uint64_t reserved, used; } graph_pool[TOPO_MAX_GPUS];
static struct ptr_rec *recs;
static size_t n_recs, cap_recs;
static uint64_t va_next = POOL_VA_BASE;

/* After fork the child owns none of its parent's pools, graph memory or mappings of other processes. */
static void mem_atfork_child(void) {
        pthread_mutex_init(&pool_lock, NULL);
        memset(default_pool, 0, sizeof default_pool);
        memset(graph_pool, 0, sizeof graph_pool);
        n_recs = 0;
        created_pools = NULL; /* the parent's */
}

__attribute__((constructor)) static void mem_init(void) {
        pthread_atfork(NULL, NULL, mem_atfork_child);
}

static struct CUmemPoolHandle_st *pool_of_gpu(unsigned gpu) {
        struct CUmemPoolHandle_st *p = &default_pool[gpu];
        if (p->magic != POOL_MAGIC)
                *p = (struct CUmemPoolHandle_st){ .magic = POOL_MAGIC, .gpu = gpu };
        return p;
}

/* pool_lock held. */
static bool pool_valid(CUmemoryPool p) {
        uintptr_t a = (uintptr_t)p, lo = (uintptr_t)default_pool, hi = (uintptr_t)(default_pool + TOPO_MAX_GPUS);
        if (a >= lo && a < hi)
                return (a - lo) % sizeof default_pool[0] == 0 && p->magic == POOL_MAGIC;
        for (struct CUmemPoolHandle_st *c = created_pools; c; c = c->next)
                if (c == p)
                        return !c->dead;
        return false;
}

/* Unlink and free a created pool, giving back what it reserves; pool_lock held. */
static void pool_free_locked(struct CUmemPoolHandle_st *p) {
        for (struct CUmemPoolHandle_st **pp = &created_pools; *pp; pp = &(*pp)->next)
                if (*pp == p) {
                        *pp = p->next;
                        break;
                }
        if (p->reserved)
                sim_mem_uncharge(p->gpu, p->reserved);
        p->magic = 0;
        free(p);
}

/* A fresh range of simulated address space and its record; pool_lock held. */
static CUresult rec_add_locked(enum ptr_kind kind, unsigned gpu, uint64_t bytes, struct ptr_rec **ret) {
        uint64_t span = (bytes + 511) & ~511ULL;
        if (span < bytes || span > POOL_VA_END - va_next)
                return CUDA_ERROR_OUT_OF_MEMORY;
        if (n_recs == cap_recs) {
                size_t cap = cap_recs ? cap_recs * 2 : 64;
                struct ptr_rec *r = realloc(recs, cap * sizeof *r);
                if (!r)
                        return CUDA_ERROR_OUT_OF_MEMORY;
                recs = r;
                cap_recs = cap;
        }
        struct ptr_rec *r = &recs[n_recs++];
        *r = (struct ptr_rec){ .ptr = va_next, .bytes = bytes, .gpu = gpu, .kind = kind };
        va_next += span;
        *ret = r;
        return CUDA_SUCCESS;
}

static struct ptr_rec *rec_find_locked(CUdeviceptr p, bool inside) {
        for (size_t i = 0; i < n_recs; i++)
                if (recs[i].ptr == p || (inside && p > recs[i].ptr && p < recs[i].ptr + recs[i].bytes))
                        return &recs[i];
        return NULL;
}

static void rec_del_locked(struct ptr_rec *r) {
        *r = recs[--n_recs];
}

/* Serve `bytes` from a pool's idle memory or grow it (charging the node); pool_lock held. */
static CUresult pool_take_locked(unsigned gpu, uint64_t *reserved, uint64_t *used, uint64_t bytes) {
        uint64_t idle = *reserved - *used;
        if (idle < bytes) {
                CUresult r = sim_mem_charge(gpu, bytes - idle);
                if (r != CUDA_SUCCESS)
                        return r;
                *reserved += bytes - idle;
        }
        *used += bytes;
        return CUDA_SUCCESS;
}

/* Give back to the device what a pool reserves beyond max(used, keep); pool_lock held. */
static void pool_release_locked(unsigned gpu, uint64_t *reserved, uint64_t used, uint64_t keep) {
        uint64_t floor = MAX(used, keep);
        if (*reserved > floor) {
                sim_mem_uncharge(gpu, *reserved - floor);
                *reserved = floor;
        }
}

/* cuMemAllocAsync allocates from the current pool of the stream's device, cuMemAllocFromPoolAsync from
 * the pool (on the device it was created for) — whatever the calling thread's current context. Into a
 * capturing stream it records a memory allocation node instead (its address now, the memory at launch). */
static CUresult pool_alloc(CUdeviceptr *dptr, uint64_t bytes, CUmemoryPool pool, CUstream stream) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!dptr || bytes == 0)
                return CUDA_ERROR_INVALID_VALUE;
        unsigned gpu;
        int ord;
        CUgraph capture;
        CUresult r = sim_stream_info(stream, &ord, &gpu, &capture);
        if (r != CUDA_SUCCESS)
                return r;
        if (capture) {
                if (pool && (!pool_valid(pool) || pool->imported))
                        return CUDA_ERROR_INVALID_VALUE;
                if (pool) {
                        gpu = pool->gpu;
                        ord = pool->ordinal;
                }
                return sim_capture_mem_node(capture, CU_GRAPH_NODE_TYPE_MEM_ALLOC, ord, gpu, bytes, dptr);
        }
        pthread_mutex_lock(&pool_lock);
        struct CUmemPoolHandle_st *p = pool ? pool : pool_of_gpu(gpu);
        if (pool && (!pool_valid(pool) || pool->imported)) /* an imported pool only maps the exporter's pointers */
                r = CUDA_ERROR_INVALID_VALUE;
        struct ptr_rec *rec = NULL;
        if (r == CUDA_SUCCESS)
                r = pool_take_locked(p->gpu, &p->reserved, &p->used, bytes);
        if (r == CUDA_SUCCESS) {
                r = rec_add_locked(PTR_POOL, p->gpu, bytes, &rec);
                if (r == CUDA_SUCCESS) {
                        rec->pool = p;
                        *dptr = rec->ptr;
                } else
                        p->used -= bytes;
        }
        pthread_mutex_unlock(&pool_lock);
        return r;
}

CUresult sim_mem_free_other(CUdeviceptr dptr) {
        pthread_mutex_lock(&pool_lock);
        struct ptr_rec *r = rec_find_locked(dptr, false);
        CUresult res = CUDA_ERROR_INVALID_VALUE;
        if (r && r->kind == PTR_POOL) {
                struct CUmemPoolHandle_st *p = r->pool;
                p->used -= MIN(p->used, r->bytes); /* stays reserved: cached by the pool */
                rec_del_locked(r);
                if (p->dead && p->used == 0)
                        pool_free_locked(p); /* destroyed earlier: goes with its last allocation */
                res = CUDA_SUCCESS;
        } else if (r && r->kind == PTR_POOL_IMPORT) {
                rec_del_locked(r); /* the mapping goes; the memory is the exporter's */
                res = CUDA_SUCCESS;
        } else if (r && r->kind == PTR_GRAPH && r->live) {
                graph_pool[r->gpu].used -= MIN(graph_pool[r->gpu].used, r->bytes);
                r->live = false;
                res = CUDA_SUCCESS;
        }
        pthread_mutex_unlock(&pool_lock);
        return res;
}

CUresult sim_mem_range_other(CUdeviceptr dptr, CUdeviceptr *ret_base, uint64_t *ret_size) {
        pthread_mutex_lock(&pool_lock);
        struct ptr_rec *r = rec_find_locked(dptr, true);
        if (r) {
                *ret_base = r->ptr;
                *ret_size = r->bytes;
        }
        pthread_mutex_unlock(&pool_lock);
        return r ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

void sim_mem_sync(unsigned gpu) {
        pthread_mutex_lock(&pool_lock);
        struct CUmemPoolHandle_st *p = pool_of_gpu(gpu);
        pool_release_locked(gpu, &p->reserved, p->used, p->threshold);
        for (p = created_pools; p; p = p->next)
                if (p->gpu == gpu)
                        pool_release_locked(gpu, &p->reserved, p->used, p->threshold);
        pthread_mutex_unlock(&pool_lock);
}

_public_ CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
            poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
                return CUDA_ERROR_INVALID_VALUE;
        unsigned gpu;
        CUresult r = sim_cuda_gpu_of(poolProps->location.id, &gpu);
        if (r != CUDA_SUCCESS)
                return r;
        struct CUmemPoolHandle_st *p = calloc(1, sizeof *p);
        if (!p)
                return CUDA_ERROR_OUT_OF_MEMORY;
        pthread_mutex_lock(&pool_lock);
        *p = (struct CUmemPoolHandle_st){
                .magic = POOL_MAGIC, .gpu = gpu, .ordinal = poolProps->location.id, .next = created_pools
        };
        created_pools = p;
        pthread_mutex_unlock(&pool_lock);
        *pool = p;
        return CUDA_SUCCESS;
}

/* Its memory goes back now, or with its last outstanding allocation (as the driver defers it). */
_public_ CUresult cuMemPoolDestroy(CUmemoryPool pool) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        pthread_mutex_lock(&pool_lock);
        bool is_default = (uintptr_t)pool >= (uintptr_t)default_pool &&
                          (uintptr_t)pool < (uintptr_t)(default_pool + TOPO_MAX_GPUS);
        CUresult r = !is_default && pool_valid(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
        if (r == CUDA_SUCCESS) {
                if (pool->used == 0)
                        pool_free_locked(pool);
                else {
                        pool_release_locked(pool->gpu, &pool->reserved, pool->used, 0);
                        pool->dead = true;
                }
        }
        pthread_mutex_unlock(&pool_lock);
        return r;
}

/*
 * Pools shared between processes (fabric handles): the exporter's pool and each exported pointer are
 * described by (pid, GPU, address, size); the importer maps the pointer into its address space. The memory
 * stays the exporter's: nothing is charged to the importer (as with IPC handles).
 */
#define POOL_SHARE_MAGIC 0x48535053u /* "SPSH" */
#define PTR_SHARE_MAGIC 0x52545050u  /* "PPTR" */
struct pool_share {
        uint32_t magic;
        uint32_t pid;
        uint32_t gpu;
        uint32_t pad;
        uint64_t pool;  /* the exporter's handle */
        uint64_t bytes; /* PTR_SHARE: the allocation's size */
};
_Static_assert(sizeof(struct pool_share) <= 32, "fits the first half of a fabric handle / export data");

_public_ CUresult cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
                                                   CUmemAllocationHandleType handleType, unsigned long long flags) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!handle_out || flags || handleType != CU_MEM_HANDLE_TYPE_FABRIC)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&pool_lock);
        CUresult r = pool_valid(pool) && !pool->imported ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
        if (r == CUDA_SUCCESS) {
                struct pool_share sh = {
                        POOL_SHARE_MAGIC, sim_cuda_self()->pid, pool->gpu, 0, (uint64_t)(uintptr_t)pool, 0
                };
                memset(handle_out, 0, sizeof(CUmemFabricHandle));
                memcpy(handle_out, &sh, sizeof sh);
        }
        pthread_mutex_unlock(&pool_lock);
        return r;
}

_public_ CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
                                                     CUmemAllocationHandleType handleType, unsigned long long flags) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pool_out || !handle || flags || handleType != CU_MEM_HANDLE_TYPE_FABRIC)
                return CUDA_ERROR_INVALID_VALUE;
        struct pool_share sh;
        memcpy(&sh, handle, sizeof sh);
        if (sh.magic != POOL_SHARE_MAGIC || sh.gpu >= TOPO_MAX_GPUS || (kill((pid_t)sh.pid, 0) < 0 && errno == ESRCH))
                return CUDA_ERROR_INVALID_VALUE;
        if (sh.pid == sim_cuda_self()->pid)
                return CUDA_ERROR_INVALID_VALUE; /* a process does not import its own pool */
        struct CUmemPoolHandle_st *p = calloc(1, sizeof *p);
        if (!p)
                return CUDA_ERROR_OUT_OF_MEMORY;
        pthread_mutex_lock(&pool_lock);
        *p = (struct CUmemPoolHandle_st){
                .magic = POOL_MAGIC, .gpu = sh.gpu, .imported = true, .owner_pid = sh.pid, .next = created_pools
        };
        created_pools = p;
        pthread_mutex_unlock(&pool_lock);
        *pool_out = p;
        return CUDA_SUCCESS;
}

_public_ CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!shareData_out)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&pool_lock);
        struct ptr_rec *r = rec_find_locked(ptr, false);
        CUresult res = r && r->kind == PTR_POOL && !r->pool->imported ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
        if (res == CUDA_SUCCESS) {
                struct pool_share sh = { PTR_SHARE_MAGIC, sim_cuda_self()->pid, r->gpu, 0, r->ptr, r->bytes };
                memset(shareData_out, 0, sizeof *shareData_out);
                memcpy(shareData_out->reserved, &sh, sizeof sh);
        }
        pthread_mutex_unlock(&pool_lock);
        return res;
}

_public_ CUresult cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool, CUmemPoolPtrExportData *shareData) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!ptr_out || !shareData)
                return CUDA_ERROR_INVALID_VALUE;
        struct pool_share sh;
        memcpy(&sh, shareData->reserved, sizeof sh);
        pthread_mutex_lock(&pool_lock);
        CUresult r = CUDA_ERROR_INVALID_VALUE;
        if (sh.magic == PTR_SHARE_MAGIC && sh.bytes && pool_valid(pool) && pool->imported &&
            pool->owner_pid == sh.pid && pool->gpu == sh.gpu) {
                struct ptr_rec *rec = NULL;
                r = rec_add_locked(PTR_POOL_IMPORT, sh.gpu, sh.bytes, &rec);
                if (r == CUDA_SUCCESS)
                        *ptr_out = rec->ptr;
        }
        pthread_mutex_unlock(&pool_lock);
        return r;
}

CUresult sim_graph_mem_reserve(unsigned gpu, uint64_t bytes, CUdeviceptr *ret) {
        pthread_mutex_lock(&pool_lock);
        struct ptr_rec *r = NULL;
        CUresult res = rec_add_locked(PTR_GRAPH, gpu, bytes, &r);
        if (res == CUDA_SUCCESS)
                *ret = r->ptr;
        pthread_mutex_unlock(&pool_lock);
        return res;
}

CUresult sim_graph_mem_alloc(CUdeviceptr ptr) {
        pthread_mutex_lock(&pool_lock);
        struct ptr_rec *r = rec_find_locked(ptr, false);
        CUresult res = CUDA_ERROR_INVALID_VALUE; /* also: relaunch before the last launch's allocation was freed */
        if (r && r->kind == PTR_GRAPH && !r->live) {
                res = pool_take_locked(r->gpu, &graph_pool[r->gpu].reserved, &graph_pool[r->gpu].used, r->bytes);
                r->live = res == CUDA_SUCCESS;
        }
        pthread_mutex_unlock(&pool_lock);
        return res;
}

_public_ CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
        return pool_alloc(dptr, bytesize, NULL, hStream);
}

_public_ CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
        return pool_alloc(dptr, bytesize, NULL, hStream);
}

_public_ CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
        return pool_alloc(dptr, bytesize, pool, hStream);
}

_public_ CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                               CUstream hStream) {
        return pool_alloc(dptr, bytesize, pool, hStream);
}

/* Into a capturing stream: a memory free node (the memory goes back when the graph runs). */
static CUresult free_async(CUdeviceptr dptr, CUstream stream) {
        int ord;
        unsigned gpu;
        CUgraph capture;
        CUresult r = sim_stream_info(stream, &ord, &gpu, &capture);
        if (r != CUDA_SUCCESS)
                return r;
        if (capture)
                return dptr ? sim_capture_mem_node(capture, CU_GRAPH_NODE_TYPE_MEM_FREE, ord, gpu, 0, &dptr)
                            : CUDA_ERROR_INVALID_VALUE;
        return sim_cuda_mem_free(dptr);
}

_public_ CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
        return free_async(dptr, hStream);
}

_public_ CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
        return free_async(dptr, hStream);
}

_public_ CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        pthread_mutex_lock(&pool_lock);
        CUresult r = pool_valid(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
        if (r == CUDA_SUCCESS)
                pool_release_locked(pool->gpu, &pool->reserved, pool->used, minBytesToKeep);
        pthread_mutex_unlock(&pool_lock);
        return r;
}

_public_ CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!value)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&pool_lock);
        CUresult r = pool_valid(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
        if (r == CUDA_SUCCESS) {
                switch (attr) {
                        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = pool->threshold; break;
                        case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
                        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = pool->reserved; break;
                        case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
                        case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = pool->used; break;
                        default: r = CUDA_ERROR_NOT_SUPPORTED; break;
                }
        }
        pthread_mutex_unlock(&pool_lock);
        return r;
}

_public_ CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!value)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&pool_lock);
        CUresult r = pool_valid(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
        if (r == CUDA_SUCCESS) {
                if (attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
                        pool->threshold = *(cuuint64_t *)value;
                else
                        r = CUDA_ERROR_NOT_SUPPORTED;
        }
        pthread_mutex_unlock(&pool_lock);
        return r;
}

static CUresult device_pool(CUmemoryPool *pool_out, CUdevice dev) {
        if (!pool_out)
                return CUDA_ERROR_INVALID_VALUE;
        unsigned gpu;
        CUresult r = sim_cuda_gpu_of(dev, &gpu);
        if (r != CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&pool_lock);
        *pool_out = pool_of_gpu(gpu);
        (*pool_out)->ordinal = dev;
        pthread_mutex_unlock(&pool_lock);
        return CUDA_SUCCESS;
}

_public_ CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev) {
        return device_pool(pool_out, dev);
}

_public_ CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
        return device_pool(pool, dev);
}

/* ---- graph memory (the per-GPU graph pool; nodes live in cuda-launch.c) ---- */

_public_ CUresult cuDeviceGraphMemTrim(CUdevice device) {
        unsigned gpu;
        CUresult r = sim_cuda_gpu_of(device, &gpu);
        if (r != CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&pool_lock);
        pool_release_locked(gpu, &graph_pool[gpu].reserved, graph_pool[gpu].used, 0);
        pthread_mutex_unlock(&pool_lock);
        return CUDA_SUCCESS;
}

_public_ CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value) {
        unsigned gpu;
        CUresult r = sim_cuda_gpu_of(device, &gpu);
        if (r != CUDA_SUCCESS)
                return r;
        if (!value)
                return CUDA_ERROR_INVALID_VALUE;
        pthread_mutex_lock(&pool_lock);
        switch (attr) {
                case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
                case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = graph_pool[gpu].used; break;
                case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
                case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = graph_pool[gpu].reserved; break;
                default: r = CUDA_ERROR_INVALID_VALUE; break;
        }
        pthread_mutex_unlock(&pool_lock);
        return r;
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

/* Ordinal of a node GPU in this process (CUDA_VISIBLE_DEVICES may reorder), -1 when not visible. */
static int ordinal_of(unsigned gpu) {
        unsigned g;
        for (int d = 0; d < TOPO_MAX_GPUS; d++)
                if (sim_cuda_gpu_of(d, &g) == CUDA_SUCCESS && g == gpu)
                        return d;
        return -1;
}

/* A VMM handle shared as a fabric handle (a 64-byte value: no file descriptor to pass). */
#define SHARE_MAGIC 0x45524853u /* "SHRE" */
struct share {
        uint32_t magic;
        uint32_t pid;
        uint32_t gpu;
        uint32_t pad;
        uint64_t bytes;
};
_Static_assert(sizeof(struct share) <= sizeof(CUmemFabricHandle), "fits a fabric handle");

static struct obj *obj_find(const void *handle) {
        pthread_mutex_lock(&obj_lock);
        struct obj *o = objs;
        while (o && (const void *)o != handle)
                o = o->next;
        pthread_mutex_unlock(&obj_lock);
        return o && !o->released ? o : NULL;
}

/* A POSIX file descriptor handle (what NCCL passes between processes over a Unix socket): a sealed memfd
 * holding the same record, which the importer reads through the descriptor it was given. */
static CUresult share_fd(const struct share *sh, int *ret_fd) {
        int fd = memfd_create("gpuslice-sim-vmm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
        if (pwrite(fd, sh, sizeof *sh, 0) != (ssize_t)sizeof *sh ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
                close(fd);
                return CUDA_ERROR_OPERATING_SYSTEM;
        }
        *ret_fd = fd;
        return CUDA_SUCCESS;
}

_public_ CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                               CUmemAllocationHandleType handleType, unsigned long long flags) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!shareableHandle || flags ||
            (handleType != CU_MEM_HANDLE_TYPE_FABRIC && handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
                return CUDA_ERROR_INVALID_VALUE; /* no Win32 handles on Linux */
        struct obj *o = obj_find((const void *)(uintptr_t)handle);
        if (!o || o->kind != OBJ_VMM)
                return CUDA_ERROR_INVALID_HANDLE;
        struct share sh = { SHARE_MAGIC, sim_cuda_self()->pid, o->gpu, 0, o->bytes };
        if (handleType == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
                return share_fd(&sh, (int *)shareableHandle);
        CUmemFabricHandle fh;
        memset(&fh, 0, sizeof fh);
        memcpy(fh.data, &sh, sizeof sh);
        memcpy(shareableHandle, &fh, sizeof fh);
        return CUDA_SUCCESS;
}

/* The imported handle refers to the exporter's memory: nothing more is charged on the GPU. */
_public_ CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                 CUmemAllocationHandleType shHandleType) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!handle ||
            (shHandleType != CU_MEM_HANDLE_TYPE_FABRIC && shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ||
            (shHandleType == CU_MEM_HANDLE_TYPE_FABRIC && !osHandle))
                return CUDA_ERROR_INVALID_VALUE;
        struct share sh;
        if (shHandleType == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
                /* osHandle is the descriptor itself, (void *)(uintptr_t)fd; the caller keeps (and closes) it */
                uintptr_t fd = (uintptr_t)osHandle;
                if (fd > INT_MAX || pread((int)fd, &sh, sizeof sh, 0) != (ssize_t)sizeof sh)
                        return CUDA_ERROR_INVALID_VALUE;
        } else
                memcpy(&sh, osHandle, sizeof sh);
        if (sh.magic != SHARE_MAGIC || sh.gpu >= TOPO_MAX_GPUS || sh.bytes == 0)
                return CUDA_ERROR_INVALID_VALUE;
        if (kill((pid_t)sh.pid, 0) < 0 && errno == ESRCH)
                return CUDA_ERROR_INVALID_VALUE; /* the exporter is gone, and its memory with it */
        struct obj *o;
        CUresult r = obj_new(OBJ_VMM_IMPORT, sh.gpu, sh.bytes, &o);
        if (r == CUDA_SUCCESS)
                *handle = (CUmemGenericAllocationHandle)(uintptr_t)o;
        return r;
}

_public_ CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                         CUmemGenericAllocationHandle handle) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!prop)
                return CUDA_ERROR_INVALID_VALUE;
        struct obj *o = obj_find((const void *)(uintptr_t)handle);
        if (!o || (o->kind != OBJ_VMM && o->kind != OBJ_VMM_IMPORT))
                return CUDA_ERROR_INVALID_HANDLE;
        memset(prop, 0, sizeof *prop);
        prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop->location.id = ordinal_of(o->gpu);
        return CUDA_SUCCESS;
}

#define VMM_VA_BASE 0x600000000000ULL
static uint64_t vmm_va_next = VMM_VA_BASE;

_public_ CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                      unsigned long long flags) {
        (void)alignment, (void)addr;
        if (!ptr || size == 0 || size % VMM_GRANULARITY || flags)
                return CUDA_ERROR_INVALID_VALUE;
        *ptr = __atomic_fetch_add(&vmm_va_next, size, __ATOMIC_RELAXED); /* address space only */
        return CUDA_SUCCESS;
}

_public_ CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
        return ptr && size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Mapping costs no memory of its own (the handle's bytes are charged, or are the exporter's), but keeps
 * the handle's memory alive past cuMemRelease until the last mapping goes. */
struct vmap {
        CUdeviceptr va;
        uint64_t size;
        struct obj *o;
};
static struct vmap *vmaps; /* under obj_lock */
static size_t n_vmaps, cap_vmaps;

_public_ CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                           unsigned long long flags) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        struct obj *o = obj_find((const void *)(uintptr_t)handle);
        if (!o || (o->kind != OBJ_VMM && o->kind != OBJ_VMM_IMPORT))
                return CUDA_ERROR_INVALID_HANDLE;
        if (!ptr || size == 0 || offset || flags || size > o->bytes)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = CUDA_SUCCESS;
        pthread_mutex_lock(&obj_lock);
        if (n_vmaps == cap_vmaps) {
                size_t cap = cap_vmaps ? cap_vmaps * 2 : 16;
                struct vmap *v = realloc(vmaps, cap * sizeof *v);
                if (v) {
                        vmaps = v;
                        cap_vmaps = cap;
                }
        }
        if (n_vmaps == cap_vmaps)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        else {
                vmaps[n_vmaps++] = (struct vmap){ ptr, size, o };
                o->maps++;
        }
        pthread_mutex_unlock(&obj_lock);
        return r;
}

_public_ CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
        if (!ptr || size == 0)
                return CUDA_ERROR_INVALID_VALUE;
        struct obj *gone[16];
        unsigned n_gone = 0;
        bool found = false;
        pthread_mutex_lock(&obj_lock);
        for (size_t i = 0; i < n_vmaps;) {
                struct vmap m = vmaps[i];
                if (m.va < ptr || m.va >= ptr + size || n_gone == ELEMENTSOF(gone)) {
                        i++;
                        continue;
                }
                found = true;
                vmaps[i] = vmaps[--n_vmaps];
                if (--m.o->maps == 0 && m.o->released) { /* released earlier: its memory goes now */
                        struct obj **pp = &objs;
                        while (*pp && *pp != m.o)
                                pp = &(*pp)->next;
                        if (*pp)
                                *pp = m.o->next;
                        gone[n_gone++] = m.o;
                }
        }
        pthread_mutex_unlock(&obj_lock);
        for (unsigned k = 0; k < n_gone; k++)
                obj_free(gone[k]);
        return found ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Access to a mapped range for the devices named: every byte must be mapped, every descriptor a visible device
 * with valid flags. The simulator keeps no per-device protection (nothing is ever read or written). */
_public_ CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!ptr || !size || !desc || !count)
                return CUDA_ERROR_INVALID_VALUE;
        for (size_t i = 0; i < count; i++) {
                unsigned gpu;
                if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
                    sim_cuda_gpu_of((CUdevice)desc[i].location.id, &gpu) != CUDA_SUCCESS ||
                    (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
                     desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
                        return CUDA_ERROR_INVALID_VALUE;
        }
        uint64_t covered = 0;
        pthread_mutex_lock(&obj_lock);
        for (size_t i = 0; i < n_vmaps; i++)
                if (vmaps[i].va >= ptr && vmaps[i].va + vmaps[i].size <= ptr + size)
                        covered += vmaps[i].size;
        pthread_mutex_unlock(&obj_lock);
        return covered == size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
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

static CUresult array_create(CUarray *pHandle, uint64_t w, uint64_t h, uint64_t d, unsigned channels, CUarray_format f,
                             enum obj_kind kind, unsigned levels) {
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
        CUresult r =
                array_create(&a, d->Width, d->Height, d->Depth, d->NumChannels, d->Format, OBJ_MIPMAP, numMipmapLevels);
        if (r == CUDA_SUCCESS)
                *pHandle = (CUmipmappedArray)(void *)a;
        return r;
}

_public_ CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        return obj_destroy((const void *)hMipmappedArray, OBJ_MIPMAP);
}

/* ---- IPC memory handles ---- */

#define IPC_MAGIC 0x43504953u /* "SIPC" */
struct ipc {
        uint32_t magic;
        uint32_t pid;
        uint32_t gpu;
        uint32_t pad;
        uint64_t base;
        uint64_t bytes;
};
_Static_assert(sizeof(struct ipc) <= sizeof(CUipcMemHandle), "fits an IPC handle");

_public_ CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pHandle)
                return CUDA_ERROR_INVALID_VALUE;
        CUdeviceptr base;
        uint64_t bytes;
        unsigned gpu;
        CUresult r = sim_cuda_range(dptr, &base, &bytes, &gpu); /* cuMemAlloc memory only, as in CUDA */
        if (r != CUDA_SUCCESS)
                return r;
        struct ipc h = { IPC_MAGIC, sim_cuda_self()->pid, gpu, 0, base, bytes };
        memset(pHandle, 0, sizeof *pHandle);
        memcpy(pHandle->reserved, &h, sizeof h);
        return CUDA_SUCCESS;
}

/* Map another process's allocation: address space here, the memory stays the exporter's. */
static CUresult ipc_open(CUdeviceptr *pdptr, const CUipcMemHandle *handle, unsigned int flags) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!pdptr || (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
                return CUDA_ERROR_INVALID_VALUE;
        struct ipc h;
        memcpy(&h, handle->reserved, sizeof h);
        if (h.magic != IPC_MAGIC || h.bytes == 0 || h.gpu >= TOPO_MAX_GPUS)
                return CUDA_ERROR_INVALID_VALUE;
        if (h.pid == sim_cuda_self()->pid)
                return CUDA_ERROR_INVALID_CONTEXT; /* a process cannot open its own handle */
        if (kill((pid_t)h.pid, 0) < 0 && errno == ESRCH)
                return CUDA_ERROR_INVALID_VALUE;
        unsigned gpu;
        CUresult r = current_gpu(&gpu);
        if (r != CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&pool_lock);
        struct ptr_rec *rec = NULL;
        r = rec_add_locked(PTR_IPC, h.gpu, h.bytes, &rec);
        if (r == CUDA_SUCCESS)
                *pdptr = rec->ptr;
        pthread_mutex_unlock(&pool_lock);
        return r;
}

_public_ CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags) {
        return ipc_open(pdptr, &handle, Flags);
}

_public_ CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags) {
        return ipc_open(pdptr, &handle, Flags);
}

_public_ CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        pthread_mutex_lock(&pool_lock);
        struct ptr_rec *r = rec_find_locked(dptr, false);
        CUresult res = r && r->kind == PTR_IPC ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
        if (res == CUDA_SUCCESS)
                rec_del_locked(r);
        pthread_mutex_unlock(&pool_lock);
        return res;
}

/* ---- external memory: another API's allocation, mapped here (nothing more charged on the GPU) ---- */

_public_ CUresult cuImportExternalMemory(CUexternalMemory *extMem_out, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *desc) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!extMem_out || !desc || desc->size == 0 || desc->flags & ~(unsigned)CUDA_EXTERNAL_MEMORY_DEDICATED ||
            desc->type != CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD || desc->handle.fd < 0)
                return CUDA_ERROR_INVALID_VALUE;
        unsigned gpu;
        CUresult r = current_gpu(&gpu);
        if (r != CUDA_SUCCESS)
                return r;
        struct obj *o;
        r = obj_new(OBJ_EXT, gpu, desc->size, &o);
        if (r != CUDA_SUCCESS)
                return r;
        close(desc->handle.fd); /* on success the driver owns the descriptor */
        *extMem_out = (CUexternalMemory)(void *)o;
        return CUDA_SUCCESS;
}

_public_ CUresult cuDestroyExternalMemory(CUexternalMemory extMem) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        return obj_destroy((const void *)extMem, OBJ_EXT);
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
        { "cuMemPoolGetAttribute", 11020, false, (void *)cuMemPoolGetAttribute },
        { "cuMemPoolCreate", 11020, false, (void *)cuMemPoolCreate },
        { "cuMemPoolDestroy", 11020, false, (void *)cuMemPoolDestroy },
        { "cuMemPoolExportToShareableHandle", 11020, false, (void *)cuMemPoolExportToShareableHandle },
        { "cuMemPoolImportFromShareableHandle", 11020, false, (void *)cuMemPoolImportFromShareableHandle },
        { "cuMemPoolExportPointer", 11020, false, (void *)cuMemPoolExportPointer },
        { "cuMemPoolImportPointer", 11020, false, (void *)cuMemPoolImportPointer },
        { "cuMemPoolSetAttribute", 11020, false, (void *)cuMemPoolSetAttribute },
        { "cuDeviceGetDefaultMemPool", 11020, false, (void *)cuDeviceGetDefaultMemPool },
        { "cuDeviceGetMemPool", 11020, false, (void *)cuDeviceGetMemPool },
        { "cuDeviceGraphMemTrim", 11040, false, (void *)cuDeviceGraphMemTrim },
        { "cuDeviceGetGraphMemAttribute", 11040, false, (void *)cuDeviceGetGraphMemAttribute },
        { "cuIpcGetMemHandle", 4010, false, (void *)cuIpcGetMemHandle },
        { "cuIpcOpenMemHandle", 4010, false, (void *)cuIpcOpenMemHandle },
        { "cuIpcOpenMemHandle", 11000, false, (void *)cuIpcOpenMemHandle_v2 },
        { "cuIpcCloseMemHandle", 4010, false, (void *)cuIpcCloseMemHandle },
        { "cuMemExportToShareableHandle", 10020, false, (void *)cuMemExportToShareableHandle },
        { "cuMemImportFromShareableHandle", 10020, false, (void *)cuMemImportFromShareableHandle },
        { "cuMemGetAllocationPropertiesFromHandle", 10020, false, (void *)cuMemGetAllocationPropertiesFromHandle },
        { "cuMemAddressReserve", 10020, false, (void *)cuMemAddressReserve },
        { "cuMemAddressFree", 10020, false, (void *)cuMemAddressFree },
        { "cuMemMap", 10020, false, (void *)cuMemMap },
        { "cuMemSetAccess", 10020, false, (void *)cuMemSetAccess },
        { "cuMemUnmap", 10020, false, (void *)cuMemUnmap },
        { "cuImportExternalMemory", 10000, false, (void *)cuImportExternalMemory },
        { "cuDestroyExternalMemory", 10000, false, (void *)cuDestroyExternalMemory },
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
