/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cuda-sim — the seams between the files of the simulated libcuda.so.1: cuda.c (init, devices,
 * contexts, cuMemAlloc/Free, cuGetProcAddress), cuda-mem.c (the other allocation families) and
 * cuda-launch.c (modules, kernel and graph launches on a simulated per-SM clock, streams,
 * utilization published to the node state). Hidden symbols only; never exported.
 */
#pragma once

#include "interposer/cuda-abi.h" /* the driver API as gpuslice declares it: no CUDA toolkit needed */

#include <stdbool.h>
#include <stdint.h>

#include "sim/cupti-table.h"
#include "sim/sim.h"

#define SIM_HIDDEN __attribute__((visibility("hidden")))

/* Threads each simulated SM keeps resident (CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR). */
#define SIM_THREADS_PER_SM 2048u

/* ---- provided by cuda.c ---- */

/* cuInit succeeded in this process. */
SIM_HIDDEN bool sim_cuda_ready(void);
/* The calling thread's current context: its CUDA ordinal and node GPU index. */
SIM_HIDDEN CUresult sim_cuda_current(int *ret_ordinal, unsigned *ret_gpu);
/* Node GPU index of a CUDA ordinal; CUDA_ERROR_INVALID_DEVICE. */
SIM_HIDDEN CUresult sim_cuda_gpu_of(CUdevice dev, unsigned *ret_gpu);
/* cuMemAlloc(_v2) on the current context (legacy: a 32-bit pointer), without going through the
 * exported (interposable) symbol. Freed with sim_cuda_mem_free or cuMemFree. */
SIM_HIDDEN CUresult sim_cuda_mem_alloc(CUdeviceptr *dptr, uint64_t bytes, bool legacy);
SIM_HIDDEN CUresult sim_cuda_mem_free(CUdeviceptr dptr);
SIM_HIDDEN const struct topo *sim_cuda_node(void);
SIM_HIDDEN const char *sim_cuda_node_path(void);
SIM_HIDDEN struct sim_state *sim_cuda_state(void);
SIM_HIDDEN const struct sim_identity *sim_cuda_self(void);

/* The GPU instance this process's MIG device on node GPU gpu belongs to (SIM_NO_INSTANCE: the whole GPU). */
SIM_HIDDEN uint32_t sim_cuda_instance(unsigned gpu);
/* Lock held: mark p (this process on node GPU gpu) as the CUDA driver's: identity, its MIG device. */
SIM_HIDDEN void sim_cuda_tag_locked(struct sim_proc *p, unsigned gpu);

/* The allocation of this process that contains dptr (cuMemAlloc family): base, size, node GPU. */
SIM_HIDDEN CUresult sim_cuda_range(CUdeviceptr dptr, CUdeviceptr *ret_base, uint64_t *ret_size, unsigned *ret_gpu);

/* A traced driver API call at one site (the simulated CUPTI's callback, when one is subscribed; sim/cupti-table.h):
 * on the calling thread, inside the call. */
SIM_HIDDEN void sim_cupti_api(uint32_t cbid, int site, const char *name, const void *params, CUresult *ret,
                              uint64_t *correlation);
/* Trace the call `body` (a CUresult expression) as cbid `name` with its CUPTI parameter struct `params`. */
#define SIM_TRACED(cbid, name, params, body)                                           \
        do {                                                                           \
                uint64_t corr_ = 0;                                                    \
                CUresult r_ = CUDA_SUCCESS;                                            \
                sim_cupti_api((cbid), CUPTI_API_ENTER, (name), (params), &r_, &corr_); \
                r_ = (body);                                                           \
                sim_cupti_api((cbid), CUPTI_API_EXIT, (name), (params), &r_, &corr_);  \
                return r_;                                                             \
        } while (0)

/* ---- provided by cuda-mem.c ---- */

/* Charge / give back bytes of the calling process on node GPU gpu (checked against capacity). */
SIM_HIDDEN CUresult sim_mem_charge(unsigned gpu, uint64_t bytes);
SIM_HIDDEN void sim_mem_uncharge(unsigned gpu, uint64_t bytes);
/* cuMemFree of a pointer that is not cuda.c's: pool allocations (back to their pool) and graph
 * allocations (back to the graph pool). CUDA_ERROR_INVALID_VALUE when it is neither. */
SIM_HIDDEN CUresult sim_mem_free_other(CUdeviceptr dptr);
/* cuMemGetAddressRange for those pointers and imported IPC mappings. */
SIM_HIDDEN CUresult sim_mem_range_other(CUdeviceptr dptr, CUdeviceptr *ret_base, uint64_t *ret_size);
/* A context is gone: the arrays made in it go with it (VMM handles and pools outlive contexts). */
SIM_HIDDEN void sim_mem_ctx_gone(CUcontext ctx);
/* A synchronisation on node GPU gpu: pools release what exceeds their release threshold. */
SIM_HIDDEN void sim_mem_sync(unsigned gpu);
/* Graph memory nodes: an address for a node's allocation (at node creation), and its allocation from
 * the GPU's graph pool at launch (CUDA_ERROR_INVALID_VALUE while the last launch's is not freed). */
SIM_HIDDEN CUresult sim_graph_mem_reserve(unsigned gpu, uint64_t bytes, CUdeviceptr *ret);
SIM_HIDDEN CUresult sim_graph_mem_alloc(CUdeviceptr ptr);

/* ---- provided by cuda-mem.c and cuda-launch.c ---- */

/* cuGetProcAddress for the entry points of those files: the variant of `symbol` introduced at or
 * before `version`, per-thread-stream variants when flags ask for them. NULL when none; *ret_named
 * says whether the name exists at all. */
SIM_HIDDEN void *sim_cuda_mem_proc(const char *symbol, int version, cuuint64_t flags, bool *ret_named);
SIM_HIDDEN void *sim_cuda_launch_proc(const char *symbol, int version, cuuint64_t flags, bool *ret_named);
/* A context is gone (destroyed, or its primary released for the last time): its modules go with it. */
SIM_HIDDEN void sim_launch_ctx_gone(CUcontext ctx);
/* A stream's device (ordinal, node GPU; NULL and the special handles: the current context's) and the graph
 * it is capturing into (NULL when not capturing). */
SIM_HIDDEN CUresult sim_stream_info(CUstream s, int *ret_ordinal, unsigned *ret_gpu, CUgraph *ret_capture);
/* Record a memory node into a graph being captured: MEM_ALLOC of bytes on (ordinal, gpu), its address in
 * *ptr; MEM_FREE of *ptr. */
SIM_HIDDEN CUresult sim_capture_mem_node(CUgraph gr, CUgraphNodeType type, int ordinal, unsigned gpu, uint64_t bytes,
                                         CUdeviceptr *ptr);
/* Block until the work this process launched on node GPU `gpu` has finished (cuCtxSynchronize). */
SIM_HIDDEN void sim_launch_sync(unsigned gpu);

/* Lookup shared by both: entries {name, version, ptsz, fn}. */
struct sim_proc_entry {
        const char *name;
        int version;
        bool ptsz;
        void *fn;
};
SIM_HIDDEN void *sim_proc_lookup(const struct sim_proc_entry *t, size_t n, const char *symbol, int version,
                                 cuuint64_t flags, bool *ret_named);
