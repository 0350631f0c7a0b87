/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cuda-workload — a scripted CUDA driver API program for the interposer's tests and benchmarks.
 * It is written against cuda.h and reaches the driver in one of the ways real programs do:
 *
 *   --load=link      calls the driver's symbols directly (only in the -linked build, DT_NEEDED libcuda.so.1)
 *   --load=dlsym     dlopen("libcuda.so.1") and dlsym of every versioned symbol
 *   --load=procaddr  dlopen("libcuda.so.1"), dlsym("cuGetProcAddress_v2") only, every other entry point
 *                    fetched through it BEFORE cuInit, as the CUDA 12+ runtime does (default)
 *   --load=procaddr-ptsz    the same asking for per-thread-default-stream variants (flag 1<<1)
 *   --load=procaddr-legacy  the 4-argument cuGetProcAddress of CUDA 11.3-11.8 runtimes
 *
 * then runs the steps on its command line, in order:
 *
 *   init [ORD]        cuInit, retain ORD's primary context (default 0), make it current
 *   init!             cuInit, then retaining device 0's primary context must fail with OUT_OF_MEMORY
 *   ctx-create ORD / ctx-create! ORD   cuCtxCreate must succeed (it becomes current) / fail with OOM
 *   ctx-destroy       destroy the newest created context     release ORD   cuDevicePrimaryCtxRelease
 *   alloc SIZE        cuMemAlloc must succeed          alloc! SIZE   must fail with OUT_OF_MEMORY
 *   alloc32 SIZE      legacy 32-bit cuMemAlloc          free          free the newest allocation
 *   fam F SIZE / fam! F SIZE   the same through another family F: pitch managed async pool vmm array
 *                     array3d mipmap upool (freed by free/freeall with the family's own call)
 *   freeall           free every allocation             info          print "info FREE TOTAL" (cuMemGetInfo)
 *   info32            legacy cuMemGetInfo               total         print "total BYTES" (cuDeviceTotalMem)
 *   expect-free N / expect-total N   the last info/total/nvml-info must have printed exactly N
 *   allocn N SIZE     N allocations of SIZE kept      infoloop N   N cuMemGetInfo (for instruction counts)
 *   limitloop N       N cuCtxSetLimit (heap 16/24 MiB)  moduleloop N  N module load + unload (the same)
 *   ctxloop N         N cuCtxCreate + cuCtxDestroy on device 0 (the same)
 *   nvml-info IDX     NVML memory of NVML device IDX, looked up as a program linked with -lnvidia-ml would
 *   fill SIZE         allocate SIZE chunks until OUT_OF_MEMORY; print "filled BYTES"
 *   ready             print "ready" and flush (a parent waits for it)
 *   bg N ARGS…        run this program with the next N arguments as a background child (same
 *                     environment: another process of the same container), wait for its "ready";
 *                     background children are SIGKILLed when this program exits
 *   wait-bg           wait for the background children, copying their output; fail if one failed
 *   kill-bg           SIGKILL the background children and reap them
 *   fork-idle N       fork N children that never use CUDA (data-loader workers) and keep them until exit
 *   await-free N      repeat cuMemGetInfo (every 5 ms) until it reports N free; fail after 10 s
 *   await-nvml-free IDX N   the same through NVML device IDX (nvmlDeviceGetMemoryInfo_v2)
 *   symbols           print "symbol WHAT -> EXPORTED-NAME FILE" for a few fetched pointers
 *   exec ARGS…        execve this program with ARGS (same PID, new image), holding what it holds
 *   hold              sleep until killed (60 s at most)             sleep MS        sleep MS milliseconds
 *   threads T N SIZE  T threads each alloc+free N times SIZE bytes; fails on any error
 *   launch N [BLOCKS [US]]  N launches of a kernel (BLOCKS blocks of US µs each, simulated), then sync
 *   graph N [BLOCKS [US]]       N cuGraphLaunch of a one-kernel graph, then sync
 *   spin S [BLOCKS [US]]        launch kernels back to back for S seconds, sync, print
 *                               "launched N late M" (M: launches in the second half)
 *   spin-graph S [BLOCKS [US]]  the same with graph launches
 *   sync              cuCtxSynchronize (stream-ordered pools release what exceeds their threshold)
 *   pool-keep / pool-trim KEEP   default pool of device 0: keep everything freed / cuMemPoolTrimTo KEEP
 *   pool-create / pool-destroy   cuMemPoolCreate on device 0 (family upool allocates from it) / destroy it
 *   ipc-export / vmm-export      print "share HEX": the newest allocation's IPC handle (alloc) / fabric
 *                     handle (fam vmm)
 *   ipc-open[!] HEX   cuIpcOpenMemHandle (kept until free)   vmm-import[!] HEX SIZE  import + map SIZE
 *   vmm-map-release   map the newest vmm handle, release it at once (free/freeall unmap it)
 *   ext[!] SIZE       cuImportExternalMemory of SIZE bytes (an opaque fd); freed by free/freeall
 *   green[!] / green-destroy     cuGreenCtxCreate on device 0 / destroy the newest
 *   graph-mem[!] SIZE / graph-keep SIZE   instantiate a graph allocating SIZE (freed in the graph / not)
 *   graph-run / graph-destroy / graph-trim   launch+sync, destroy the newest exec, cuDeviceGraphMemTrim(0)
 *   unhooked          print "unhooked RC": what cuDriverGetVersion (passed through, not hooked) returns
 *   limit[!] heap|stack|printf VALUE   cuCtxSetLimit (MALLOC_HEAP_SIZE, STACK_SIZE, PRINTF_FIFO_SIZE)
 *   module[!] GLOBALS / library[!] GLOBALS   cuModuleLoadData / cuLibraryLoadData of a simulated image
 *                     declaring GLOBALS bytes of __device__ globals (unloaded by free/freeall)
 *   module-image TEXT cuModuleLoadData of the image TEXT (the simulator's "gpuslice-sim-module lazy=… delay=…")
 *   module-global SIZE  a module with SIZE bytes of __device__ globals (PTX on a real driver, the simulator's
 *                     image on the simulator), kept until free/freeall
 *   cycles N SIZE     N × (cuMemAlloc SIZE + cuMemFree); print "cycles N NS-PER-PAIR"
 *   asyncloop N SIZE  N × (cuMemAllocAsync SIZE + cuMemFreeAsync) on the default stream, then sync; print
 *                     "asyncloop N NS-PER-PAIR"
 *   launchtime N      N launches of an empty kernel (0 µs), then sync; print "launchtime N NS-PER-LAUNCH"
 *   devices           cuInit and cuDeviceGetCount only (no context); print "devices N"
 *   watch S SIZE      for S seconds: allocate SIZE, launch an empty kernel, synchronise, free; print
 *                     "watch OPS MAX-US" (the slowest of those rounds: a stall would show here)
 *   module-func NAME  cuModuleGetFunction NAME in the newest module (a lazily loaded module's code arrives)
 *   pool-export SIZE  a pool with fabric handles, SIZE allocated from it; print "share HEX" (the pool's
 *                     handle and the pointer's export data, 32 bytes each: the simulator's fit)
 *   pool-import[!] HEX  cuMemPoolImportFromShareableHandle + cuMemPoolImportPointer (freed by free/freeall)
 *   async-on[!] ORD SIZE  cuMemAllocAsync of SIZE on a stream of device ORD, the current context staying
 *                     device 0's (freed by free/freeall)
 *   pool-on[!] ORD SIZE   cuMemAllocFromPoolAsync of SIZE from a pool created on device ORD (likewise)
 *   capture-keep SIZE / capture-mem SIZE   capture cuMemAllocAsync SIZE into a graph on a stream of the
 *                     current device (capture-mem also frees it inside the capture), then instantiate it:
 *                     must succeed (graph-run launches it, graph-destroy destroys it)
 *   nvml-private IDX  NVML as pynvml reaches it: dlopen("libnvidia-ml.so.1") privately, every symbol looked up
 *                     on that handle; NVML device IDX by index, UUID and PCI bus id must agree; prints
 *                     "nvmlp TOTAL FREE USED" (v1 and _v2 must agree) and "nvmlprocs N USED-SUM" (_v3)
 *   cupti-alloc SIZE  subscribe a CUPTI callback (libcupti.so.13) that allocates SIZE with cuMemAlloc_v2 at each
 *                     cuLaunchKernel's CUPTI_API_ENTER, inside the launch (a profiler's buffer); a second
 *                     subscriber must be refused
 *   cupti-expect RC   the callback ran and its last cuMemAlloc_v2 returned RC   cupti-free  free what it took
 *   nccl-rank R N DIR SIZE  rank R of N, as NCCL initialises (one GPU per rank, device R current): a VMM
 *                     allocation of SIZE (cuMemCreate, mapped, cuMemSetAccess) exported as a POSIX fd and a
 *                     cuMemAlloc of SIZE with its IPC handle, both handed to rank R-1 over DIR/rankR.sock
 *                     (SCM_RIGHTS); rank R+1's imported (cuMemImportFromShareableHandle, cuIpcOpenMemHandle)
 *                     and peer access to its device enabled; prints "nccl R free FREE"
 *   forkstorm N       N times: fork a process whose thread makes its first CUDA calls (cuInit, the devices)
 *                     while it forks a child that makes its own; a child not done within 5 s (the process
 *                     forking it within 10 s) is hung; prints
 *                     "forkstorm N hung H" and fails when H > 0
 *
 * Exit status: 0 when every step behaved as required, 1 otherwise (with a message on stderr),
 * 2 for a bad command line, 4 when the driver cannot be loaded.
 */
#include "interposer/cuda-abi.h"  /* the driver API as gpuslice declares it: no CUDA toolkit needed */
#include "interposer/cupti-abi.h" /* CUPTI's callback API (the simulated libcupti.so.13, or NVIDIA's) */

#include <dlfcn.h>

#include "nvml/nvml-abi.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_ALLOCS 65536
#define MAX_BG 16

/* name in the table, exported symbol, base name for cuGetProcAddress */
#define API(X)                                                                                       \
        X(cuInit, "cuInit", "cuInit")                                                                \
        X(cuDeviceGet, "cuDeviceGet", "cuDeviceGet")                                                 \
        X(cuDeviceGetCount, "cuDeviceGetCount", "cuDeviceGetCount")                                  \
        X(cuDriverGetVersion, "cuDriverGetVersion", "cuDriverGetVersion")                            \
        X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain")          \
        X(cuCtxSetCurrent, "cuCtxSetCurrent", "cuCtxSetCurrent")                                     \
        X(cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease") \
        X(cuCtxSynchronize, "cuCtxSynchronize", "cuCtxSynchronize")                                  \
        X(cuMemAlloc_v2, "cuMemAlloc_v2", "cuMemAlloc")                                              \
        X(cuMemFree_v2, "cuMemFree_v2", "cuMemFree")                                                 \
        X(cuMemGetInfo_v2, "cuMemGetInfo_v2", "cuMemGetInfo")                                        \
        X(cuDeviceTotalMem_v2, "cuDeviceTotalMem_v2", "cuDeviceTotalMem")

/* Launch entry points: looked up in the global scope in the linked build (a program linked with -lcuda
 * that resolves some entry points at run time), through the chosen way otherwise. */
#define API_LAUNCH(X)                                                                                \
        X(cuModuleLoadData, "cuModuleLoadData", "cuModuleLoadData")                                  \
        X(cuModuleGetFunction, "cuModuleGetFunction", "cuModuleGetFunction")                         \
        X(cuLaunchKernel, "cuLaunchKernel", "cuLaunchKernel")                                        \
        X(cuGraphCreate, "cuGraphCreate", "cuGraphCreate")                                           \
        X(cuGraphAddKernelNode_v2, "cuGraphAddKernelNode_v2", "cuGraphAddKernelNode")                \
        X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags") \
        X(cuGraphLaunch, "cuGraphLaunch", "cuGraphLaunch")

/* The other allocation families. */
#define API_FAMILIES(X)                                                                                             \
        X(cuMemAllocPitch_v2, "cuMemAllocPitch_v2", "cuMemAllocPitch")                                              \
        X(cuMemAllocManaged, "cuMemAllocManaged", "cuMemAllocManaged")                                              \
        X(cuMemAllocAsync, "cuMemAllocAsync", "cuMemAllocAsync")                                                    \
        X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync")                            \
        X(cuMemFreeAsync, "cuMemFreeAsync", "cuMemFreeAsync")                                                       \
        X(cuMemCreate, "cuMemCreate", "cuMemCreate")                                                                \
        X(cuMemRelease, "cuMemRelease", "cuMemRelease")                                                             \
        X(cuArrayCreate_v2, "cuArrayCreate_v2", "cuArrayCreate")                                                    \
        X(cuArray3DCreate_v2, "cuArray3DCreate_v2", "cuArray3DCreate")                                              \
        X(cuArrayDestroy, "cuArrayDestroy", "cuArrayDestroy")                                                       \
        X(cuMipmappedArrayCreate, "cuMipmappedArrayCreate", "cuMipmappedArrayCreate")                               \
        X(cuMipmappedArrayDestroy, "cuMipmappedArrayDestroy", "cuMipmappedArrayDestroy")                            \
        X(cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", "cuDeviceGetDefaultMemPool")                      \
        X(cuMemPoolSetAttribute, "cuMemPoolSetAttribute", "cuMemPoolSetAttribute")                                  \
        X(cuMemPoolTrimTo, "cuMemPoolTrimTo", "cuMemPoolTrimTo")                                                    \
        X(cuMemPoolCreate, "cuMemPoolCreate", "cuMemPoolCreate")                                                    \
        X(cuMemPoolDestroy, "cuMemPoolDestroy", "cuMemPoolDestroy")                                                 \
        X(cuIpcGetMemHandle, "cuIpcGetMemHandle", "cuIpcGetMemHandle")                                              \
        X(cuIpcOpenMemHandle_v2, "cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle")                                     \
        X(cuIpcCloseMemHandle, "cuIpcCloseMemHandle", "cuIpcCloseMemHandle")                                        \
        X(cuMemExportToShareableHandle, "cuMemExportToShareableHandle", "cuMemExportToShareableHandle")             \
        X(cuMemImportFromShareableHandle, "cuMemImportFromShareableHandle", "cuMemImportFromShareableHandle")       \
        X(cuMemAddressReserve, "cuMemAddressReserve", "cuMemAddressReserve")                                        \
        X(cuMemAddressFree, "cuMemAddressFree", "cuMemAddressFree")                                                 \
        X(cuMemMap, "cuMemMap", "cuMemMap")                                                                         \
        X(cuMemUnmap, "cuMemUnmap", "cuMemUnmap")                                                                   \
        X(cuMemSetAccess, "cuMemSetAccess", "cuMemSetAccess")                                                       \
        X(cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer", "cuDeviceCanAccessPeer")                                  \
        X(cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess", "cuCtxEnablePeerAccess")                                  \
        X(cuImportExternalMemory, "cuImportExternalMemory", "cuImportExternalMemory")                               \
        X(cuDestroyExternalMemory, "cuDestroyExternalMemory", "cuDestroyExternalMemory")                            \
        X(cuDeviceGetDevResource, "cuDeviceGetDevResource", "cuDeviceGetDevResource")                               \
        X(cuDevResourceGenerateDesc, "cuDevResourceGenerateDesc", "cuDevResourceGenerateDesc")                      \
        X(cuGreenCtxCreate, "cuGreenCtxCreate", "cuGreenCtxCreate")                                                 \
        X(cuGreenCtxDestroy, "cuGreenCtxDestroy", "cuGreenCtxDestroy")                                              \
        X(cuGraphAddMemAllocNode, "cuGraphAddMemAllocNode", "cuGraphAddMemAllocNode")                               \
        X(cuGraphAddMemFreeNode, "cuGraphAddMemFreeNode", "cuGraphAddMemFreeNode")                                  \
        X(cuGraphExecDestroy, "cuGraphExecDestroy", "cuGraphExecDestroy")                                           \
        X(cuDeviceGraphMemTrim, "cuDeviceGraphMemTrim", "cuDeviceGraphMemTrim")                                     \
        X(cuCtxSetLimit, "cuCtxSetLimit", "cuCtxSetLimit")                                                          \
        X(cuModuleUnload, "cuModuleUnload", "cuModuleUnload")                                                       \
        X(cuLibraryLoadData, "cuLibraryLoadData", "cuLibraryLoadData")                                              \
        X(cuLibraryUnload, "cuLibraryUnload", "cuLibraryUnload")                                                    \
        X(cuMemPoolExportToShareableHandle, "cuMemPoolExportToShareableHandle", "cuMemPoolExportToShareableHandle") \
        X(cuMemPoolImportFromShareableHandle, "cuMemPoolImportFromShareableHandle",                                 \
          "cuMemPoolImportFromShareableHandle")                                                                     \
        X(cuMemPoolExportPointer, "cuMemPoolExportPointer", "cuMemPoolExportPointer")                               \
        X(cuMemPoolImportPointer, "cuMemPoolImportPointer", "cuMemPoolImportPointer")                               \
        X(cuCtxGetCurrent, "cuCtxGetCurrent", "cuCtxGetCurrent")                                                    \
        X(cuStreamCreate, "cuStreamCreate", "cuStreamCreate")                                                       \
        X(cuStreamBeginCapture_v2, "cuStreamBeginCapture_v2", "cuStreamBeginCapture")                               \
        X(cuStreamEndCapture, "cuStreamEndCapture", "cuStreamEndCapture")                                           \
        X(cuGraphDestroy, "cuGraphDestroy", "cuGraphDestroy")

/* Legacy variants are fetched with an old cudaVersion through cuGetProcAddress. */
#define API_LEGACY(X)                                         \
        X(cuCtxCreate_v2, "cuCtxCreate_v2", "cuCtxCreate")    \
        X(cuCtxDestroy_v2, "cuCtxDestroy_v2", "cuCtxDestroy") \
        X(cuMemAlloc, "cuMemAlloc", "cuMemAlloc")             \
        X(cuMemFree, "cuMemFree", "cuMemFree")                \
        X(cuMemGetInfo, "cuMemGetInfo", "cuMemGetInfo")

static struct {
#define MEMBER(f, sym, base) __typeof__(&f) f;
        API(MEMBER)
        API_LAUNCH(MEMBER)
        API_FAMILIES(MEMBER)
        API_LEGACY(MEMBER)
#undef MEMBER
} cu;

enum kind {
        K_PTR,
        K_PTR32,
        K_ASYNC,
        K_VMM,
        K_ARRAY,
        K_MIPMAP,
        K_IPC,
        K_IMPORT,
        K_EXT,
        K_MAPPED,
        K_MODULE,
        K_LIBRARY
};
static CUcontext created_ctx[16];
static unsigned n_created;
static void *gpa_self;                 /* what cuGetProcAddress answered for "cuGetProcAddress" */
static CUdeviceptr allocs[MAX_ALLOCS]; /* device pointer, or the handle of the other kinds */
static enum kind alloc_kind[MAX_ALLOCS];
static unsigned n_allocs;
static CUdeviceptr alloc_va[MAX_ALLOCS]; /* K_IMPORT: where it is mapped */
static unsigned long long alloc_size[MAX_ALLOCS];
static CUmemoryPool upool; /* pool-create */
static CUgreenCtx greens[16];
static unsigned n_greens;
static CUgraphExec gexecs[16];
static unsigned n_gexecs;
static unsigned long long last_value, last_total;
static CUfunction kernel;
static unsigned long long kernel_ns; /* the PTX kernel's parameter: how long each block spins (real GPUs) */
static void *kernel_args[] = { &kernel_ns };
static bool real_gpu; /* the driver refused the simulator's image: kernels are PTX, timed on the GPU's clock */

/* A real driver runs this (PTX, JIT-compiled for whatever GPU it is): each block spins for its parameter's
 * nanoseconds on %globaltimer, as the simulator's spin_<µs> kernels do. */
static const char spin_ptx[] = ".version 6.0\n"
                               ".target sm_52\n"
                               ".address_size 64\n"
                               ".visible .entry spin(.param .u64 spin_ns)\n"
                               "{\n"
                               "  .reg .pred %p;\n"
                               "  .reg .b64 %rd<5>;\n"
                               "  ld.param.u64 %rd1, [spin_ns];\n"
                               "  mov.u64 %rd2, %globaltimer;\n"
                               "SPIN:\n"
                               "  mov.u64 %rd3, %globaltimer;\n"
                               "  sub.s64 %rd4, %rd3, %rd2;\n"
                               "  setp.lt.u64 %p, %rd4, %rd1;\n"
                               "  @%p bra SPIN;\n"
                               "  ret;\n"
                               "}\n";

#define CALL(f, ...) (cu.f ? cu.f(__VA_ARGS__) : CUDA_ERROR_NOT_FOUND)

static CUresult free_one(CUdeviceptr p, enum kind k) {
        switch (k) {
                case K_PTR32: return CALL(cuMemFree, (CUdeviceptr_v1)p);
                case K_ASYNC: return CALL(cuMemFreeAsync, p, NULL);
                case K_VMM: return CALL(cuMemRelease, (CUmemGenericAllocationHandle)p);
                case K_ARRAY: return CALL(cuArrayDestroy, (CUarray)(uintptr_t)p);
                case K_MIPMAP: return CALL(cuMipmappedArrayDestroy, (CUmipmappedArray)(uintptr_t)p);
                case K_IPC: return CALL(cuIpcCloseMemHandle, p);
                case K_EXT: return CALL(cuDestroyExternalMemory, (CUexternalMemory)(uintptr_t)p);
                case K_MODULE: return CALL(cuModuleUnload, (CUmodule)(uintptr_t)p);
                case K_LIBRARY: return CALL(cuLibraryUnload, (CUlibrary)(uintptr_t)p);
                case K_IMPORT:
                case K_MAPPED: break; /* unmapped by the free step itself */
                case K_PTR: break;
        }
        return CALL(cuMemFree_v2, p);
}

/* One allocation of `bytes` through family `fam`; its handle and kind in ret and kind. */
static CUresult alloc_family(const char *fam, unsigned long long bytes, CUdeviceptr *ret, enum kind *kind) {
        CUresult r = CUDA_ERROR_INVALID_VALUE;
        *kind = K_PTR;
        if (strcmp(fam, "pitch") == 0) { /* rows of 4 KiB: pitch = width, bytes = 4 KiB x rows */
                size_t pitch;
                r = CALL(cuMemAllocPitch_v2, ret, &pitch, 4096, bytes / 4096, 4);
        } else if (strcmp(fam, "managed") == 0) {
                r = CALL(cuMemAllocManaged, ret, bytes, CU_MEM_ATTACH_GLOBAL);
        } else if (strcmp(fam, "async") == 0) {
                r = CALL(cuMemAllocAsync, ret, bytes, NULL);
                *kind = K_ASYNC;
        } else if (strcmp(fam, "pool") == 0) {
                r = CALL(cuMemAllocFromPoolAsync, ret, bytes, NULL, NULL);
                *kind = K_ASYNC;
        } else if (strcmp(fam, "upool") == 0) { /* from the pool made by pool-create */
                r = CALL(cuMemAllocFromPoolAsync, ret, bytes, upool, NULL);
                *kind = K_ASYNC;
        } else if (strcmp(fam, "vmm") == 0) {
                CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                             .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
                CUmemGenericAllocationHandle h = 0;
                r = CALL(cuMemCreate, &h, bytes, &prop, 0);
                *ret = (CUdeviceptr)h;
                *kind = K_VMM;
        } else if (strcmp(fam, "array") == 0) { /* 1 channel of float: 4 bytes per element */
                CUDA_ARRAY_DESCRIPTOR d = {
                        .Width = bytes / 4, .Height = 1, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1
                };
                CUarray a = NULL;
                r = CALL(cuArrayCreate_v2, &a, &d);
                *ret = (CUdeviceptr)(uintptr_t)a;
                *kind = K_ARRAY;
        } else if (strcmp(fam, "array3d") == 0) { /* 16 layers of 4 channels of 8-bit */
                CUDA_ARRAY3D_DESCRIPTOR d = { .Width = bytes / 64,
                                              .Height = 1,
                                              .Depth = 16,
                                              .Format = CU_AD_FORMAT_UNSIGNED_INT8,
                                              .NumChannels = 4 };
                CUarray a = NULL;
                r = CALL(cuArray3DCreate_v2, &a, &d);
                *ret = (CUdeviceptr)(uintptr_t)a;
                *kind = K_ARRAY;
        } else if (strcmp(fam, "mipmap") == 0) { /* 1 level: the base only */
                CUDA_ARRAY3D_DESCRIPTOR d = { .Width = bytes / 4, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 };
                CUmipmappedArray m = NULL;
                r = CALL(cuMipmappedArrayCreate, &m, &d, 1);
                *ret = (CUdeviceptr)(uintptr_t)m;
                *kind = K_MIPMAP;
        }
        return r;
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        fputs("cuda-workload: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        return 1;
}

static int load(const char *how) {
        if (strcmp(how, "link") == 0) {
#ifdef WORKLOAD_LINKED
#define DIRECT(f, sym, base) cu.f = f;
                API(DIRECT)
                API_LEGACY(DIRECT)
#undef DIRECT
#define GLOBAL(f, sym, base) cu.f = (__typeof__(cu.f))dlsym(RTLD_DEFAULT, sym);
                API_LAUNCH(GLOBAL)
                API_FAMILIES(GLOBAL)
#undef GLOBAL
                return 0;
#else
                fprintf(stderr, "cuda-workload: this build is not linked against libcuda\n");
                return 2;
#endif
        }
        void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!dl) {
                fprintf(stderr, "cuda-workload: dlopen libcuda.so.1: %s\n", dlerror());
                return 4;
        }
        if (strcmp(how, "dlsym") == 0) {
#define BY_DLSYM(f, sym, base) cu.f = (__typeof__(cu.f))dlsym(dl, sym);
                API(BY_DLSYM)
                API_LAUNCH(BY_DLSYM)
                API_FAMILIES(BY_DLSYM)
                API_LEGACY(BY_DLSYM)
#undef BY_DLSYM
                return cu.cuInit ? 0 : 4;
        }
        bool ptsz = strcmp(how, "procaddr-ptsz") == 0, legacy = strcmp(how, "procaddr-legacy") == 0;
        if (strcmp(how, "procaddr") != 0 && !ptsz && !legacy)
                return 2;
        cuuint64_t flags = ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
        CUdriverProcAddressQueryResult st;
        if (legacy) {
                /* CUDA 11.3-11.8 runtimes: the 4-argument cuGetProcAddress. */
                __typeof__(&cuGetProcAddress) gpa1 = (__typeof__(gpa1))dlsym(dl, "cuGetProcAddress");
                if (!gpa1)
                        return 4;
                void *self = NULL;
                if (gpa1("cuGetProcAddress", &self, 11030, 0) != CUDA_SUCCESS || !self)
                        return fail("cuGetProcAddress(\"cuGetProcAddress\", 11030) failed"), 4;
                gpa_self = self;
#define BY_PROC1(f, sym, base) (void)gpa1(base, (void **)&cu.f, 11080, 0);
                API(BY_PROC1)
                API_LAUNCH(BY_PROC1)
                API_FAMILIES(BY_PROC1)
#undef BY_PROC1
#define BY_PROC1_OLD(f, sym, base) (void)gpa1(base, (void **)&cu.f, 3000, 0);
                API_LEGACY(BY_PROC1_OLD)
#undef BY_PROC1_OLD
                return cu.cuInit ? 0 : 4;
        }
        __typeof__(&cuGetProcAddress_v2) gpa = (__typeof__(gpa))dlsym(dl, "cuGetProcAddress_v2");
        if (!gpa)
                return 4;
        /* As the runtime does: ask for cuGetProcAddress itself through itself, then use that. */
        void *self = NULL;
        if (gpa("cuGetProcAddress", &self, 12000, 0, &st) != CUDA_SUCCESS || !self)
                return fail("cuGetProcAddress(\"cuGetProcAddress\") failed"), 4;
        gpa_self = self;
        gpa = (__typeof__(gpa))self;
#define BY_PROC(f, sym, base) (void)gpa(base, (void **)&cu.f, 12080, flags, &st); /* a CUDA 12.8 runtime */
        API(BY_PROC)
        API_LAUNCH(BY_PROC)
        API_FAMILIES(BY_PROC)
#undef BY_PROC
#define BY_PROC_OLD(f, sym, base) (void)gpa(base, (void **)&cu.f, 3000, 0, &st);
        API_LEGACY(BY_PROC_OLD)
#undef BY_PROC_OLD
        return cu.cuInit ? 0 : 4;
}

static int parse_size(const char *s, unsigned long long *ret) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || end == s)
                return -1;
        unsigned long long mul = 1;
        if (*end == 'K')
                mul = 1ULL << 10;
        else if (*end == 'M')
                mul = 1ULL << 20;
        else if (*end == 'G')
                mul = 1ULL << 30;
        else if (*end)
                return -1;
        *ret = v * mul;
        return 0;
}

struct thread_job {
        unsigned n;
        unsigned long long size;
        CUcontext ctx;
        int failed;
};

static void *thread_main(void *arg) {
        struct thread_job *j = arg;
        CALL(cuCtxSetCurrent, j->ctx);
        for (unsigned i = 0; i < j->n; i++) {
                CUdeviceptr p;
                CUresult r = CALL(cuMemAlloc_v2, &p, j->size);
                if (r == CUDA_ERROR_OUT_OF_MEMORY)
                        continue; /* others hold the rest: allowed, counted by the caller's checks */
                if (r != CUDA_SUCCESS || CALL(cuMemFree_v2, p) != CUDA_SUCCESS) {
                        j->failed = 1;
                        break;
                }
        }
        return NULL;
}

static CUcontext ctx;

/* The kernel of the launch steps: the simulator's spin_<µs> where the driver is the simulator, else the PTX
 * spin kernel with us as its parameter. */
static int load_kernel(unsigned us) {
        if (kernel)
                return 0;
        CUmodule m;
        char name[64];
        snprintf(name, sizeof name, "spin_%u", us);
        if (CALL(cuModuleLoadData, &m, "gpuslice-sim-module") == CUDA_SUCCESS &&
            CALL(cuModuleGetFunction, &kernel, m, name) == CUDA_SUCCESS)
                return 0;
        CUresult r = CALL(cuModuleLoadData, &m, spin_ptx);
        if (r != CUDA_SUCCESS || (r = CALL(cuModuleGetFunction, &kernel, m, "spin")) != CUDA_SUCCESS)
                return fail("cannot load the kernel: %d", r);
        real_gpu = true;
        kernel_ns = (unsigned long long)us * 1000ULL;
        return 0;
}

static CUresult launch_one(unsigned blocks) {
        return CALL(cuLaunchKernel, kernel, blocks, 1, 1, 128, 1, 1, 0, NULL, real_gpu ? kernel_args : NULL, NULL);
}

static int step_launch(unsigned long long n, unsigned blocks, unsigned us) {
        if (load_kernel(us))
                return 1;
        for (unsigned long long i = 0; i < n; i++) {
                CUresult r = launch_one(blocks);
                if (r != CUDA_SUCCESS)
                        return fail("cuLaunchKernel: %d", r);
        }
        return CALL(cuCtxSynchronize) == CUDA_SUCCESS ? 0 : fail("cuCtxSynchronize failed");
}

/* ---- a profiler's callback (CUPTI) that allocates inside the driver's API call ---- */

static unsigned long long cupti_bytes; /* what the callback allocates at each cuLaunchKernel's ENTER */
static CUdeviceptr cupti_ptrs[64];
static CUresult cupti_last = CUDA_ERROR_NOT_READY; /* the callback's last cuMemAlloc_v2, NOT_READY = none yet */
static unsigned cupti_n, cupti_calls;

/* As a CUPTI client writes it (cupti_callbacks.h): driver domain, on the calling thread inside the call. */
static void CUPTIAPI on_cupti(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *cbdata) {
        const CUpti_CallbackData *d = cbdata;
        (void)userdata;
        if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cbid != CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel ||
            d->callbackSite != CUPTI_API_ENTER)
                return;
        CUdeviceptr p = 0;
        CUresult r = CALL(cuMemAlloc_v2, &p, cupti_bytes);
        cupti_last = r;
        if (r == CUDA_SUCCESS && cupti_n < 64)
                cupti_ptrs[cupti_n++] = p;
        cupti_calls++; /* after the call: no tail call, the callback's own code calls the driver */
}

/* cupti-alloc SIZE: subscribe through libcupti.so.13, enable cuLaunchKernel (and the driver domain's others). */
static int step_cupti(unsigned long long bytes) {
        void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
        if (!h)
                return fail("cannot load libcupti.so.13: %s", dlerror());
        __typeof__(&cuptiSubscribe) sub = (__typeof__(&cuptiSubscribe))dlsym(h, "cuptiSubscribe");
        __typeof__(&cuptiEnableCallback) en = (__typeof__(&cuptiEnableCallback))dlsym(h, "cuptiEnableCallback");
        __typeof__(&cuptiEnableDomain) dom = (__typeof__(&cuptiEnableDomain))dlsym(h, "cuptiEnableDomain");
        CUpti_SubscriberHandle s = NULL;
        if (!sub || !en || !dom || sub(&s, on_cupti, NULL) != CUPTI_SUCCESS)
                return fail("cuptiSubscribe failed");
        CUpti_SubscriberHandle s2 = NULL;
        if (sub(&s2, on_cupti, NULL) != CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
                return fail("a second CUPTI subscriber was not refused");
        if (dom(1, s, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS ||
            en(1, s, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) != CUPTI_SUCCESS)
                return fail("cuptiEnableDomain/Callback failed");
        cupti_bytes = bytes;
        return 0;
}

/* cupti-expect RC: the callback ran and its last allocation returned RC (0 success, 2 out of memory). */
static int step_cupti_expect(unsigned long long rc) {
        if (!cupti_calls)
                return fail("the CUPTI callback never ran");
        if ((unsigned long long)cupti_last != rc)
                return fail("the callback's cuMemAlloc_v2 returned %d, expected %llu", cupti_last, rc);
        return 0;
}

/* ---- NCCL-like initialisation: one rank per GPU, handles exchanged over Unix sockets ---- */

#define NCCL_WAIT_MS 10000 /* a peer not reachable within this long: fail (a hang would show here) */

/* What one rank hands its ring neighbour: a VMM allocation (as a POSIX fd, passed with SCM_RIGHTS) and a
 * cuMemAlloc buffer (as a legacy IPC handle). */
struct nccl_msg {
        CUipcMemHandle ipc;
        uint64_t bytes;
        int32_t dev;
};

static int nccl_send(int sock, const struct nccl_msg *m, int fd) {
        char ctl[CMSG_SPACE(sizeof(int))];
        struct iovec iov = { (void *)m, sizeof *m };
        struct msghdr h = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl };
        memset(ctl, 0, sizeof ctl);
        struct cmsghdr *c = CMSG_FIRSTHDR(&h);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
        return sendmsg(sock, &h, MSG_NOSIGNAL) == (ssize_t)sizeof *m ? 0 : -1;
}

static int nccl_recv(int sock, struct nccl_msg *m, int *ret_fd) {
        char ctl[CMSG_SPACE(sizeof(int))];
        struct iovec iov = { m, sizeof *m };
        struct msghdr h = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl };
        if (recvmsg(sock, &h, MSG_WAITALL | MSG_CMSG_CLOEXEC) != (ssize_t)sizeof *m)
                return -1;
        struct cmsghdr *c = CMSG_FIRSTHDR(&h);
        if (!c || c->cmsg_type != SCM_RIGHTS)
                return -1;
        memcpy(ret_fd, CMSG_DATA(c), sizeof *ret_fd);
        return 0;
}

static int nccl_listen(const char *dir, unsigned rank, struct sockaddr_un *a) {
        memset(a, 0, sizeof *a);
        a->sun_family = AF_UNIX;
        snprintf(a->sun_path, sizeof a->sun_path, "%s/rank%u.sock", dir, rank);
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        unlink(a->sun_path);
        if (s < 0 || bind(s, (struct sockaddr *)a, sizeof *a) < 0 || listen(s, 4) < 0)
                return -1;
        return s;
}

static int nccl_connect(const char *dir, unsigned rank) {
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        snprintf(a.sun_path, sizeof a.sun_path, "%s/rank%u.sock", dir, rank);
        for (unsigned ms = 0; ms < NCCL_WAIT_MS; ms += 5) {
                int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0)
                        return s;
                if (s >= 0)
                        close(s);
                usleep(5000);
        }
        return -1;
}

/* This rank's own memory on its device: a VMM allocation (mapped, access set) exported as a POSIX fd, and a
 * cuMemAlloc buffer with its IPC handle. */
static int nccl_own(CUdevice dev, uint64_t bytes, struct nccl_msg *m, int *ret_fd) {
        CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                     .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                     .location = { CU_MEM_LOCATION_TYPE_DEVICE, dev } };
        CUmemGenericAllocationHandle h;
        CUdeviceptr va = 0, buf = 0;
        CUmemAccessDesc acc = { { CU_MEM_LOCATION_TYPE_DEVICE, dev }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        CUresult r;
        if ((r = CALL(cuMemCreate, &h, bytes, &prop, 0)) != CUDA_SUCCESS ||
            (r = CALL(cuMemAddressReserve, &va, bytes, 0, 0, 0)) != CUDA_SUCCESS ||
            (r = CALL(cuMemMap, va, bytes, 0, h, 0)) != CUDA_SUCCESS ||
            (r = CALL(cuMemSetAccess, va, bytes, &acc, 1)) != CUDA_SUCCESS ||
            (r = CALL(cuMemExportToShareableHandle, ret_fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)) !=
                    CUDA_SUCCESS)
                return fail("nccl: own VMM memory: %d", r);
        if ((r = CALL(cuMemAlloc_v2, &buf, bytes)) != CUDA_SUCCESS ||
            (r = CALL(cuIpcGetMemHandle, &m->ipc, buf)) != CUDA_SUCCESS)
                return fail("nccl: own IPC buffer: %d", r);
        m->bytes = bytes;
        m->dev = dev;
        return 0;
}

/* Map a peer's memory here (VMM import + map + access for this device, IPC open) and enable peer access from
 * this rank's context to the peer device's. */
static int nccl_import(CUdevice dev, const struct nccl_msg *m, int fd) {
        CUmemGenericAllocationHandle h;
        CUdeviceptr va = 0, ipc = 0;
        CUmemAccessDesc acc = { { CU_MEM_LOCATION_TYPE_DEVICE, dev }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        CUresult r;
        if ((r = CALL(cuMemImportFromShareableHandle, &h, (void *)(uintptr_t)fd,
                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) != CUDA_SUCCESS ||
            (r = CALL(cuMemAddressReserve, &va, m->bytes, 0, 0, 0)) != CUDA_SUCCESS ||
            (r = CALL(cuMemMap, va, m->bytes, 0, h, 0)) != CUDA_SUCCESS ||
            (r = CALL(cuMemSetAccess, va, m->bytes, &acc, 1)) != CUDA_SUCCESS)
                return fail("nccl: import the peer's VMM memory: %d", r);
        close(fd); /* the imported handle keeps the memory; the descriptor is the caller's to close */
        if ((r = CALL(cuIpcOpenMemHandle_v2, &ipc, m->ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) != CUDA_SUCCESS)
                return fail("nccl: open the peer's IPC handle: %d", r);
        int can = 0;
        CUcontext mine = NULL, peer = NULL;
        if ((r = CALL(cuDeviceCanAccessPeer, &can, dev, m->dev)) != CUDA_SUCCESS || !can)
                return fail("nccl: device %d cannot reach device %d (%d)", dev, m->dev, r);
        if ((r = CALL(cuCtxGetCurrent, &mine)) != CUDA_SUCCESS ||
            (r = CALL(cuDevicePrimaryCtxRetain, &peer, m->dev)) != CUDA_SUCCESS ||
            (r = CALL(cuCtxEnablePeerAccess, peer, 0)) != CUDA_SUCCESS)
                return fail("nccl: peer access to device %d: %d", m->dev, r);
        if ((r = CALL(cuCtxEnablePeerAccess, peer, 0)) != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
                return fail("nccl: enabling peer access twice: %d", r);
        return 0;
}

/* nccl-rank RANK N DIR SIZE: rank RANK of N on device RANK (current context). Its neighbour RANK+1 gets its
 * memory, RANK-1's it maps; an acknowledgement back keeps each exporter alive until its memory is mapped.
 * Prints "nccl RANK free FREE" (cuMemGetInfo on its device, after everything). */
static int step_nccl(unsigned rank, unsigned n, const char *dir, uint64_t bytes) {
        struct sockaddr_un a;
        struct nccl_msg mine, theirs;
        int own_fd = -1, peer_fd = -1, ack = 1;
        CUdevice dev = (CUdevice)rank;
        int ls = nccl_listen(dir, rank, &a);
        if (ls < 0)
                return fail("nccl: listen %s: %s", a.sun_path, strerror(errno));
        if (nccl_own(dev, bytes, &mine, &own_fd))
                return 1;
        int next = nccl_connect(dir, (rank + 1) % n); /* the rank whose memory this one maps */
        struct pollfd p = { ls, POLLIN, 0 };
        int prev = next >= 0 && poll(&p, 1, NCCL_WAIT_MS) == 1 ? accept4(ls, NULL, NULL, SOCK_CLOEXEC) : -1;
        if (next < 0 || prev < 0)
                return fail("nccl: rank %u cannot reach its ring neighbours", rank);
        if (nccl_send(prev, &mine, own_fd) < 0 || nccl_recv(next, &theirs, &peer_fd) < 0)
                return fail("nccl: rank %u: handle exchange failed", rank);
        if (nccl_import(dev, &theirs, peer_fd))
                return 1;
        p = (struct pollfd){ prev, POLLIN, 0 };
        if (write(next, &ack, sizeof ack) != (ssize_t)sizeof ack || poll(&p, 1, NCCL_WAIT_MS) != 1 ||
            read(prev, &ack, sizeof ack) != (ssize_t)sizeof ack)
                return fail("nccl: rank %u: no acknowledgement", rank);
        size_t f = 0, t = 0;
        CUresult r = CALL(cuMemGetInfo_v2, &f, &t);
        if (r != CUDA_SUCCESS)
                return fail("nccl: cuMemGetInfo: %d", r);
        printf("nccl %u free %zu\n", rank, f);
        fflush(stdout);
        close(own_fd);
        close(prev);
        close(next);
        close(ls);
        unlink(a.sun_path);
        return 0;
}

static pid_t bg[MAX_BG];
static int bg_out[MAX_BG]; /* read end of each child's stdout */
static unsigned n_bg;

#define MAX_IDLE 1024
static pid_t idle_kids[MAX_IDLE];
static unsigned n_idle;

static void kill_bg(void) {
        for (unsigned k = 0; k < n_idle; k++) {
                kill(idle_kids[k], SIGKILL);
                waitpid(idle_kids[k], NULL, 0);
        }
        n_idle = 0;
        for (unsigned k = 0; k < n_bg; k++) {
                kill(bg[k], SIGKILL);
                waitpid(bg[k], NULL, 0);
                close(bg_out[k]);
        }
        n_bg = 0;
}

/* Wait for every background child, copying the rest of its output to ours; fails if one failed. */
static int step_wait_bg(void) {
        int bad = 0;
        for (unsigned k = 0; k < n_bg; k++) {
                char buf[512];
                ssize_t n;
                while ((n = read(bg_out[k], buf, sizeof buf)) > 0)
                        fwrite(buf, 1, (size_t)n, stdout);
                close(bg_out[k]);
                int st;
                waitpid(bg[k], &st, 0);
                bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
        }
        n_bg = 0;
        return bad ? fail("a background child failed") : 0;
}

/* Start /proc/self/exe with args[0..n) in the background; return once it printed "ready". */
static int step_bg(char **args, unsigned n) {
        if (n_bg == MAX_BG || n > 60)
                return fail("too many background children");
        int p[2];
        if (pipe(p) < 0)
                return fail("pipe");
        char *argv[64] = { "cuda-workload" };
        for (unsigned k = 0; k < n; k++)
                argv[k + 1] = args[k];
        argv[n + 1] = NULL;
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0)
                return fail("fork");
        if (pid == 0) {
                dup2(p[1], STDOUT_FILENO);
                close(p[0]);
                close(p[1]);
                execv("/proc/self/exe", argv);
                _exit(127);
        }
        close(p[1]);
        bg[n_bg] = pid;
        bg_out[n_bg++] = p[0];
        char buf[256];
        size_t len = 0;
        for (;;) {
                ssize_t k = read(p[0], buf + len, sizeof buf - 1 - len);
                if (k <= 0)
                        return fail("background child ended before it was ready");
                len += (size_t)k;
                buf[len] = '\0';
                if (strstr(buf, "ready\n"))
                        break;
                if (len == sizeof buf - 1)
                        len = 0;
        }
        return 0; /* the rest of its output is read by wait-bg */
}

/* NVML as a program linked against it sees it: loaded into the global scope, looked up with RTLD_DEFAULT.
 * Prints "nvml TOTAL FREE USED" (nvmlDeviceGetMemoryInfo) and "nvml2 …" (_v2) for NVML device idx. */
static int nvml_query(unsigned idx, bool print) {
        if (!dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL))
                return fail("dlopen libnvidia-ml.so.1: %s", dlerror());
        __typeof__(&nvmlInit_v2) init = (__typeof__(init))dlsym(RTLD_DEFAULT, "nvmlInit_v2");
        __typeof__(&nvmlDeviceGetHandleByIndex_v2) by_index =
                (__typeof__(by_index))dlsym(RTLD_DEFAULT, "nvmlDeviceGetHandleByIndex_v2");
        __typeof__(&nvmlDeviceGetMemoryInfo) info = (__typeof__(info))dlsym(RTLD_DEFAULT, "nvmlDeviceGetMemoryInfo");
        __typeof__(&nvmlDeviceGetMemoryInfo_v2) info2 =
                (__typeof__(info2))dlsym(RTLD_DEFAULT, "nvmlDeviceGetMemoryInfo_v2");
        nvmlDevice_t d;
        nvmlMemory_t m;
        nvmlMemory_v2_t m2 = { .version = nvmlMemory_v2 };
        if (!init || !by_index || !info || !info2 || init() != NVML_SUCCESS || by_index(idx, &d) != NVML_SUCCESS ||
            info(d, &m) != NVML_SUCCESS || info2(d, &m2) != NVML_SUCCESS)
                return fail("NVML memory query failed");
        if (print) {
                printf("nvml %llu %llu %llu\n", m.total, m.free, m.used);
                printf("nvml2 %llu %llu %llu\n", m2.total, m2.free, m2.used);
        }
        last_value = m2.free;
        last_total = m2.total;
        return m.total == m2.total && m.free == m2.free ? 0 : fail("nvml and nvml_v2 disagree");
}

static int step_nvml(unsigned idx) {
        return nvml_query(idx, true);
}

/* Query (cuMemGetInfo, or NVML device nvml_idx when >= 0) every 5 ms until it reports want bytes free;
 * fails after 10 s. Prints the last answer ("info FREE TOTAL" / "nvml2 TOTAL FREE USED"). */
static int step_await_free(int nvml_idx, unsigned long long want) {
        for (unsigned k = 0;; k++) {
                bool last = k == 2000;
                if (nvml_idx >= 0) {
                        if (nvml_query((unsigned)nvml_idx, last))
                                return 1;
                } else {
                        size_t f = 0, t = 0;
                        CUresult cr = CALL(cuMemGetInfo_v2, &f, &t);
                        if (cr != CUDA_SUCCESS)
                                return fail("cuMemGetInfo: %d", cr);
                        last_value = f;
                        last_total = t;
                        if (last || f == want)
                                printf("info %zu %zu\n", f, t);
                }
                if (last_value == want)
                        return nvml_idx >= 0 ? nvml_query((unsigned)nvml_idx, true) : 0;
                if (last)
                        return fail("await-free %llu: still %llu free after 10 s", want, last_value);
                struct timespec ts = { 0, 5000000L };
                nanosleep(&ts, NULL);
        }
}

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int step_graph_or_spin(const char *what, unsigned long long n, unsigned blocks, unsigned us) {
        if (step_launch(0, blocks, us)) /* loads the kernel */
                return 1;
        CUgraphExec ex = NULL;
        if (strcmp(what, "spin") != 0) {
                CUgraph gr;
                CUgraphNode node;
                CUDA_KERNEL_NODE_PARAMS p = { .func = kernel,
                                              .gridDimX = blocks,
                                              .gridDimY = 1,
                                              .gridDimZ = 1,
                                              .blockDimX = 128,
                                              .blockDimY = 1,
                                              .blockDimZ = 1,
                                              .kernelParams = real_gpu ? kernel_args : NULL };
                if (CALL(cuGraphCreate, &gr, 0) != CUDA_SUCCESS ||
                    CALL(cuGraphAddKernelNode_v2, &node, gr, NULL, 0, &p) != CUDA_SUCCESS ||
                    CALL(cuGraphInstantiateWithFlags, &ex, gr, 0) != CUDA_SUCCESS)
                        return fail("cannot make a graph");
        }
        bool timed = strcmp(what, "graph") != 0;
        uint64_t begin = now_ns(), end = begin + (uint64_t)n * 1000000000ULL, half = begin + (end - begin) / 2;
        uint64_t count = 0, late = 0;
        for (;;) {
                uint64_t t = now_ns();
                if (timed ? t >= end : count >= n)
                        break;
                late += t >= half;
                CUresult r = ex ? CALL(cuGraphLaunch, ex, NULL) : launch_one(blocks);
                if (r != CUDA_SUCCESS)
                        return fail("launch: %d", r);
                count++;
        }
        if (CALL(cuCtxSynchronize) != CUDA_SUCCESS)
                return fail("cuCtxSynchronize failed");
        /* late: launches in the second half, after the throttle has settled */
        printf("launched %llu late %llu\n", (unsigned long long)count, (unsigned long long)late);
        return 0;
}

/* async-on / pool-on: a stream-ordered allocation on device ord while the current context is another's. */
static int step_async_on(bool pool, bool want_oom, int ord, unsigned long long v) {
        CUcontext cur = NULL, other = NULL;
        CUdevice d;
        CUstream st = NULL;
        CUmemoryPool mp = NULL;
        if (n_allocs == MAX_ALLOCS || CALL(cuCtxGetCurrent, &cur) != CUDA_SUCCESS || !cur ||
            CALL(cuDeviceGet, &d, ord) != CUDA_SUCCESS)
                return fail("async-on: no current context or no device %d", ord);
        if (pool) {
                CUmemPoolProps pp = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                      .location = { CU_MEM_LOCATION_TYPE_DEVICE, ord } };
                if (CALL(cuMemPoolCreate, &mp, &pp) != CUDA_SUCCESS)
                        return fail("pool-on: cuMemPoolCreate on device %d", ord);
        } else if (CALL(cuDevicePrimaryCtxRetain, &other, d) != CUDA_SUCCESS ||
                   CALL(cuCtxSetCurrent, other) != CUDA_SUCCESS || CALL(cuStreamCreate, &st, 0) != CUDA_SUCCESS ||
                   CALL(cuCtxSetCurrent, cur) != CUDA_SUCCESS)
                return fail("async-on: no stream on device %d", ord);
        CUdeviceptr p = 0;
        CUresult cr = pool ? CALL(cuMemAllocFromPoolAsync, &p, v, mp, NULL) : CALL(cuMemAllocAsync, &p, v, st);
        if (want_oom ? cr != CUDA_ERROR_OUT_OF_MEMORY : cr != CUDA_SUCCESS)
                return fail("%s on device %d of %llu: %d", pool ? "pool-on" : "async-on", ord, v, cr);
        if (cr == CUDA_SUCCESS) {
                alloc_kind[n_allocs] = K_ASYNC;
                allocs[n_allocs++] = p;
        }
        return 0;
}

/* capture-keep / capture-mem: a stream capture of cuMemAllocAsync (and cuMemFreeAsync), instantiated. */
static int step_capture(bool free_inside, unsigned long long v) {
        CUstream st;
        CUgraph gr;
        CUdeviceptr p = 0;
        CUresult cr;
        if (n_gexecs == 16 || CALL(cuStreamCreate, &st, 0) != CUDA_SUCCESS ||
            CALL(cuStreamBeginCapture_v2, st, CU_STREAM_CAPTURE_MODE_GLOBAL) != CUDA_SUCCESS)
                return fail("capture: cannot begin a capture");
        if ((cr = CALL(cuMemAllocAsync, &p, v, st)) != CUDA_SUCCESS)
                return fail("capture: cuMemAllocAsync %llu while capturing: %d", v, cr);
        if (free_inside && (cr = CALL(cuMemFreeAsync, p, st)) != CUDA_SUCCESS)
                return fail("capture: cuMemFreeAsync while capturing: %d", cr);
        if (CALL(cuStreamEndCapture, st, &gr) != CUDA_SUCCESS)
                return fail("capture: cuStreamEndCapture failed");
        CUgraphExec ex = NULL;
        if ((cr = CALL(cuGraphInstantiateWithFlags, &ex, gr, 0)) != CUDA_SUCCESS)
                return fail("capture: instantiating the captured graph of %llu: %d", v, cr);
        gexecs[n_gexecs++] = ex;
        (void)CALL(cuGraphDestroy, gr);
        return 0;
}

/* nvml-private: NVML looked up on its own handle, as pynvml does (every handle variant must agree). */
static int step_nvml_private(unsigned idx) {
        void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h)
                return fail("dlopen libnvidia-ml.so.1: %s", dlerror());
#define NVSYM(f) __typeof__(&f) p_##f = (__typeof__(p_##f))dlsym(h, #f)
        NVSYM(nvmlInit_v2);
        NVSYM(nvmlDeviceGetHandleByIndex_v2);
        NVSYM(nvmlDeviceGetHandleByUUID);
        NVSYM(nvmlDeviceGetHandleByPciBusId_v2);
        NVSYM(nvmlDeviceGetUUID);
        NVSYM(nvmlDeviceGetPciInfo_v3);
        NVSYM(nvmlDeviceGetMemoryInfo);
        NVSYM(nvmlDeviceGetMemoryInfo_v2);
        NVSYM(nvmlDeviceGetComputeRunningProcesses_v3);
#undef NVSYM
        nvmlDevice_t d[3];
        char uuid[96];
        nvmlPciInfo_t pci;
        if (!p_nvmlInit_v2 || !p_nvmlDeviceGetHandleByIndex_v2 || !p_nvmlDeviceGetHandleByUUID ||
            !p_nvmlDeviceGetHandleByPciBusId_v2 || !p_nvmlDeviceGetUUID || !p_nvmlDeviceGetPciInfo_v3 ||
            !p_nvmlDeviceGetMemoryInfo || !p_nvmlDeviceGetMemoryInfo_v2 || !p_nvmlDeviceGetComputeRunningProcesses_v3)
                return fail("NVML symbol missing on the private handle");
        if (p_nvmlInit_v2() != NVML_SUCCESS || p_nvmlDeviceGetHandleByIndex_v2(idx, &d[0]) != NVML_SUCCESS ||
            p_nvmlDeviceGetUUID(d[0], uuid, sizeof uuid) != NVML_SUCCESS ||
            p_nvmlDeviceGetHandleByUUID(uuid, &d[1]) != NVML_SUCCESS ||
            p_nvmlDeviceGetPciInfo_v3(d[0], &pci) != NVML_SUCCESS ||
            p_nvmlDeviceGetHandleByPciBusId_v2(pci.busId, &d[2]) != NVML_SUCCESS)
                return fail("NVML device %u: handles", idx);
        nvmlMemory_t m[3];
        nvmlMemory_v2_t m2 = { .version = nvmlMemory_v2 };
        for (unsigned k = 0; k < 3; k++)
                if (p_nvmlDeviceGetMemoryInfo(d[k], &m[k]) != NVML_SUCCESS || m[k].total != m[0].total ||
                    m[k].free != m[0].free || m[k].used != m[0].used)
                        return fail("NVML memory through handle %u differs", k);
        if (p_nvmlDeviceGetMemoryInfo_v2(d[0], &m2) != NVML_SUCCESS || m2.total != m[0].total || m2.free != m[0].free)
                return fail("nvmlDeviceGetMemoryInfo and _v2 disagree");
        printf("nvmlp %llu %llu %llu\n", m[0].total, m[0].free, m[0].used);
        nvmlProcessInfo_t procs[64];
        unsigned n = 64;
        if (p_nvmlDeviceGetComputeRunningProcesses_v3(d[0], &n, procs) != NVML_SUCCESS)
                return fail("NVML process list");
        unsigned long long sum = 0;
        for (unsigned k = 0; k < n && k < 64; k++)
                sum += procs[k].usedGpuMemory;
        printf("nvmlprocs %u %llu\n", n, sum);
        last_value = m[0].free;
        last_total = m[0].total;
        return 0;
}

static void *first_cuda_calls(void *arg) {
        (void)arg;
        int n = 0;
        CUdevice d;
        if (CALL(cuInit, 0) == CUDA_SUCCESS && CALL(cuDeviceGetCount, &n) == CUDA_SUCCESS && n > 0)
                (void)CALL(cuDeviceGet, &d, 0);
        return NULL;
}

/* The child of one round: its first CUDA calls must return (whatever they say: CUDA does not promise a
 * forked child a working driver, only that it is not left hanging). */
static int fork_round(unsigned k) {
        pthread_t t;
        if (pthread_create(&t, NULL, first_cuda_calls, NULL) != 0)
                return 2;
        struct timespec ts = { 0, (long)(k % 8) * 20000 }; /* fork at different instants of the first calls */
        nanosleep(&ts, NULL);
        pid_t c = fork();
        if (c == 0) {
                alarm(5);
                (void)first_cuda_calls(NULL);
                _exit(0);
        }
        pthread_join(t, NULL);
        int st = 0;
        if (c < 0 || waitpid(c, &st, 0) != c)
                return 2;
        return WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ? 1 : WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 2;
}

static int step_forkstorm(unsigned long long n) {
        unsigned hung = 0, broken = 0;
        signal(SIGALRM, SIG_DFL); /* the bounds below must kill, whatever this process inherited */
        for (unsigned long long k = 0; k < n; k++) {
                pid_t p = fork(); /* a fresh process: its first CUDA calls are still to come */
                if (p < 0)
                        return fail("fork: %s", strerror(errno));
                if (p == 0) {
                        alarm(10); /* the forking process itself must not hang either */
                        _exit(fork_round((unsigned)k));
                }
                int st = 0;
                if (waitpid(p, &st, 0) != p)
                        broken++;
                else if ((WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) || (WIFEXITED(st) && WEXITSTATUS(st) == 1))
                        hung++;
                else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                        broken++;
        }
        printf("forkstorm %llu hung %u broken %u\n", n, hung, broken);
        return hung || broken ? fail("forkstorm: %u children hung, %u rounds broken", hung, broken) : 0;
}

/* The steps main's chain does not name: 0 done, -1 not a step, else the exit status. */
static int step_more(int argc, char **argv, int *i) {
        const char *s = argv[*i];
        const char *a1 = *i + 1 < argc ? argv[*i + 1] : NULL, *a2 = *i + 2 < argc ? argv[*i + 2] : NULL;
        unsigned long long v, w;
        if (strcmp(s, "async-on") == 0 || strcmp(s, "async-on!") == 0 || strcmp(s, "pool-on") == 0 ||
            strcmp(s, "pool-on!") == 0) {
                if (!a1 || !a2 || parse_size(a1, &v) < 0 || parse_size(a2, &w) < 0)
                        return 2;
                *i += 2;
                return step_async_on(s[0] == 'p', s[strlen(s) - 1] == '!', (int)v, w);
        }
        if (strcmp(s, "capture-keep") == 0 || strcmp(s, "capture-mem") == 0) {
                if (!a1 || parse_size(a1, &v) < 0)
                        return 2;
                *i += 1;
                return step_capture(strcmp(s, "capture-mem") == 0, v);
        }
        if (strcmp(s, "nvml-private") == 0 || strcmp(s, "forkstorm") == 0) {
                if (!a1 || parse_size(a1, &v) < 0)
                        return 2;
                *i += 1;
                return s[0] == 'n' ? step_nvml_private((unsigned)v) : step_forkstorm(v);
        }
        return -1;
}

int main(int argc, char **argv) {
        int i = 1;
        const char *how = "procaddr";
        if (i < argc && strncmp(argv[i], "--load=", 7) == 0)
                how = argv[i++] + 7;
        int r = load(how);
        if (r)
                return r;
        setvbuf(stdout, NULL, _IOLBF, 0);
        atexit(kill_bg);
        for (; i < argc; i++) {
                const char *s = argv[i];
                const char *arg = i + 1 < argc ? argv[i + 1] : NULL;
                unsigned long long v = 0;
                CUresult cr;
                if (strcmp(s, "ctx-create") == 0 || strcmp(s, "ctx-create!") == 0 || strcmp(s, "release") == 0) {
                        if (!arg || parse_size(arg, &v) < 0)
                                return 2;
                        i++;
                        CUdevice d;
                        if (CALL(cuDeviceGet, &d, (int)v) != CUDA_SUCCESS)
                                return fail("no device %llu", v);
                        if (strcmp(s, "release") == 0) {
                                if ((cr = CALL(cuDevicePrimaryCtxRelease_v2, d)) != CUDA_SUCCESS)
                                        return fail("release: %d", cr);
                                continue;
                        }
                        CUcontext c = NULL;
                        cr = CALL(cuCtxCreate_v2, &c, 0, d);
                        if (strcmp(s, "ctx-create!") == 0) {
                                if (cr != CUDA_ERROR_OUT_OF_MEMORY)
                                        return fail("ctx-create: expected OUT_OF_MEMORY, got %d", cr);
                        } else if (cr != CUDA_SUCCESS || n_created == 16)
                                return fail("ctx-create: %d", cr);
                        else
                                created_ctx[n_created++] = c;
                } else if (strcmp(s, "ctx-destroy") == 0) {
                        if (!n_created || (cr = CALL(cuCtxDestroy_v2, created_ctx[--n_created])) != CUDA_SUCCESS)
                                return fail("ctx-destroy failed");
                } else if (strcmp(s, "init!") == 0) {
                        /* cuInit works, retaining device 0's primary context is refused for memory */
                        CUdevice d;
                        CUcontext c;
                        if (CALL(cuInit, 0) != CUDA_SUCCESS || CALL(cuDeviceGet, &d, 0) != CUDA_SUCCESS)
                                return fail("cuInit failed");
                        if ((cr = CALL(cuDevicePrimaryCtxRetain, &c, d)) != CUDA_ERROR_OUT_OF_MEMORY)
                                return fail("retain: expected OUT_OF_MEMORY, got %d", cr);
                } else if (strcmp(s, "init") == 0) {
                        int ord = 0;
                        if (arg && arg[0] >= '0' && arg[0] <= '9') {
                                ord = atoi(arg); /* lint: allow (test program, digits checked) */
                                i++;
                        }
                        CUdevice d;
                        if ((cr = CALL(cuInit, 0)) != CUDA_SUCCESS)
                                return fail("cuInit: %d", cr);
                        if (CALL(cuDeviceGet, &d, ord) != CUDA_SUCCESS ||
                            CALL(cuDevicePrimaryCtxRetain, &ctx, d) != CUDA_SUCCESS ||
                            CALL(cuCtxSetCurrent, ctx) != CUDA_SUCCESS)
                                return fail("cannot make a context on device %d", ord);
                } else if (strcmp(s, "alloc") == 0 || strcmp(s, "alloc!") == 0 || strcmp(s, "alloc32") == 0) {
                        if (!arg || parse_size(arg, &v) < 0)
                                return 2;
                        i++;
                        if (n_allocs == MAX_ALLOCS)
                                return fail("too many allocations");
                        CUdeviceptr p = 0;
                        bool legacy = strcmp(s, "alloc32") == 0;
                        if (legacy) {
                                CUdeviceptr_v1 p1 = 0;
                                cr = CALL(cuMemAlloc, &p1, (unsigned)v);
                                p = p1;
                        } else
                                cr = CALL(cuMemAlloc_v2, &p, v);
                        bool want_oom = strcmp(s, "alloc!") == 0;
                        if (want_oom && cr != CUDA_ERROR_OUT_OF_MEMORY)
                                return fail("alloc %llu: expected OUT_OF_MEMORY, got %d", v, cr);
                        if (!want_oom && cr != CUDA_SUCCESS)
                                return fail("alloc %llu: %d", v, cr);
                        if (cr == CUDA_SUCCESS) {
                                alloc_kind[n_allocs] = legacy ? K_PTR32 : K_PTR;
                                allocs[n_allocs++] = p;
                        }
                } else if (strcmp(s, "fam") == 0 || strcmp(s, "fam!") == 0) {
                        if (i + 2 >= argc || parse_size(argv[i + 2], &v) < 0)
                                return 2;
                        const char *fam = argv[i + 1];
                        i += 2;
                        if (n_allocs == MAX_ALLOCS)
                                return fail("too many allocations");
                        CUdeviceptr h = 0;
                        enum kind k;
                        cr = alloc_family(fam, v, &h, &k);
                        bool want_oom = strcmp(s, "fam!") == 0;
                        if (want_oom && cr != CUDA_ERROR_OUT_OF_MEMORY)
                                return fail("%s %llu: expected OUT_OF_MEMORY, got %d", fam, v, cr);
                        if (!want_oom && cr != CUDA_SUCCESS)
                                return fail("%s %llu: %d", fam, v, cr);
                        if (cr == CUDA_SUCCESS) {
                                alloc_kind[n_allocs] = k;
                                alloc_size[n_allocs] = v;
                                allocs[n_allocs++] = h;
                        }
                } else if (strcmp(s, "free") == 0 || strcmp(s, "freeall") == 0) {
                        bool all = strcmp(s, "freeall") == 0;
                        do {
                                if (!n_allocs)
                                        break;
                                n_allocs--;
                                if (alloc_kind[n_allocs] == K_MAPPED) { /* released already: unmap */
                                        cr = CALL(cuMemUnmap, alloc_va[n_allocs], alloc_size[n_allocs]);
                                        if (cr == CUDA_SUCCESS)
                                                cr = CALL(cuMemAddressFree, alloc_va[n_allocs], alloc_size[n_allocs]);
                                } else if (alloc_kind[n_allocs] == K_IMPORT) {
                                        cr = CALL(cuMemUnmap, alloc_va[n_allocs], alloc_size[n_allocs]);
                                        if (cr == CUDA_SUCCESS)
                                                cr = CALL(cuMemRelease, (CUmemGenericAllocationHandle)allocs[n_allocs]);
                                        if (cr == CUDA_SUCCESS)
                                                cr = CALL(cuMemAddressFree, alloc_va[n_allocs], alloc_size[n_allocs]);
                                } else
                                        cr = free_one(allocs[n_allocs], alloc_kind[n_allocs]);
                                if (cr != CUDA_SUCCESS)
                                        return fail("free: %d", cr);
                        } while (all);
                } else if (strcmp(s, "info") == 0 || strcmp(s, "info32") == 0) {
                        unsigned long long f, t;
                        if (strcmp(s, "info32") == 0) {
                                unsigned int f32 = 0, t32 = 0;
                                cr = CALL(cuMemGetInfo, &f32, &t32);
                                f = f32;
                                t = t32;
                        } else {
                                size_t fs = 0, ts = 0;
                                cr = CALL(cuMemGetInfo_v2, &fs, &ts);
                                f = fs;
                                t = ts;
                        }
                        if (cr != CUDA_SUCCESS)
                                return fail("cuMemGetInfo: %d", cr);
                        printf("info %llu %llu\n", f, t);
                        last_value = f;
                        last_total = t;
                } else if (strcmp(s, "total") == 0) {
                        size_t t;
                        if ((cr = CALL(cuDeviceTotalMem_v2, &t, 0)) != CUDA_SUCCESS)
                                return fail("cuDeviceTotalMem: %d", cr);
                        printf("total %zu\n", t);
                        last_value = t;
                        last_total = t;
                } else if (strcmp(s, "expect-free") == 0 || strcmp(s, "expect-total") == 0) {
                        if (!arg || parse_size(arg, &v) < 0)
                                return 2;
                        i++;
                        unsigned long long got = strcmp(s, "expect-total") == 0 ? last_total : last_value;
                        if (got != v)
                                return fail("%s %llu: got %llu", s, v, got);
                } else if (strcmp(s, "fill") == 0) {
                        if (!arg || parse_size(arg, &v) < 0 || !v)
                                return 2;
                        i++;
                        unsigned long long filled = 0;
                        while (n_allocs < MAX_ALLOCS) {
                                CUdeviceptr p;
                                cr = CALL(cuMemAlloc_v2, &p, v);
                                if (cr == CUDA_ERROR_OUT_OF_MEMORY)
                                        break;
                                if (cr != CUDA_SUCCESS)
                                        return fail("fill: %d", cr);
                                alloc_kind[n_allocs] = K_PTR;
                                allocs[n_allocs++] = p;
                                filled += v;
                        }
                        printf("filled %llu\n", filled);
                        last_value = filled;
                } else if (strcmp(s, "bg") == 0) {
                        unsigned long long n;
                        if (!arg || parse_size(arg, &n) < 0 || i + 1 + (int)n >= argc + 1 || n == 0)
                                return 2;
                        if (step_bg(argv + i + 2, (unsigned)n))
                                return 1;
                        i += 1 + (int)n;
                } else if (strcmp(s, "nvml-info") == 0) {
                        if (!arg || parse_size(arg, &v) < 0)
                                return 2;
                        i++;
                        if (step_nvml((unsigned)v))
                                return 1;
                } else if (strcmp(s, "allocn") == 0 || strcmp(s, "infoloop") == 0) {
                        /* allocn N SIZE: N allocations kept (freed at exit); infoloop N: N cuMemGetInfo */
                        unsigned long long n, size = 0;
                        if (!arg || parse_size(arg, &n) < 0)
                                return 2;
                        i++;
                        if (strcmp(s, "allocn") == 0) {
                                if (i + 1 >= argc || parse_size(argv[i + 1], &size) < 0)
                                        return 2;
                                i++;
                        }
                        for (unsigned long long k = 0; k < n; k++) {
                                if (size) {
                                        if (n_allocs == MAX_ALLOCS)
                                                return fail("too many allocations");
                                        if (CALL(cuMemAlloc_v2, &allocs[n_allocs], size) != CUDA_SUCCESS)
                                                return fail("allocn: alloc failed");
                                        alloc_kind[n_allocs++] = K_PTR;
                                } else {
                                        size_t f, t;
                                        if (CALL(cuMemGetInfo_v2, &f, &t) != CUDA_SUCCESS)
                                                return fail("infoloop: cuMemGetInfo failed");
                                }
                        }
                } else if (strcmp(s, "ctxloop") == 0) {
                        /* ctxloop N: N cuCtxCreate + cuCtxDestroy on device 0 (for instruction counts) */
                        unsigned long long n;
                        CUdevice d;
                        if (!arg || parse_size(arg, &n) < 0)
                                return 2;
                        i++;
                        if (CALL(cuDeviceGet, &d, 0) != CUDA_SUCCESS)
                                return fail("ctxloop: no device 0");
                        for (unsigned long long k = 0; k < n; k++) {
                                CUcontext c = NULL;
                                if (CALL(cuCtxCreate_v2, &c, 0, d) != CUDA_SUCCESS ||
                                    CALL(cuCtxDestroy_v2, c) != CUDA_SUCCESS)
                                        return fail("ctxloop: create/destroy failed");
                        }
                        if (ctx && CALL(cuCtxSetCurrent, ctx) != CUDA_SUCCESS)
                                return fail("ctxloop: cannot make the primary context current again");
                } else if (strcmp(s, "limitloop") == 0 || strcmp(s, "moduleloop") == 0) {
                        /* limitloop N: N cuCtxSetLimit of the malloc heap, 16 and 24 MiB in turn;
                         * moduleloop N: N cuModuleLoadData + cuModuleUnload of a 1 MiB-globals module */
                        unsigned long long n;
                        if (!arg || parse_size(arg, &n) < 0)
                                return 2;
                        i++;
                        for (unsigned long long k = 0; k < n; k++) {
                                if (s[0] == 'l') {
                                        if (CALL(cuCtxSetLimit, CU_LIMIT_MALLOC_HEAP_SIZE, (k & 1 ? 24u : 16u) << 20) !=
                                            CUDA_SUCCESS)
                                                return fail("limitloop: cuCtxSetLimit failed");
                                } else {
                                        CUmodule m = NULL;
                                        if (CALL(cuModuleLoadData, &m, "gpuslice-sim-module globals=1M") !=
                                                    CUDA_SUCCESS ||
                                            CALL(cuModuleUnload, m) != CUDA_SUCCESS)
                                                return fail("moduleloop: load/unload failed");
                                }
                        }
                } else if (strcmp(s, "exec") == 0) {
                        /* exec ARGS…: replace this process image with the workload running ARGS (same PID) */
                        char *nargv[64] = { "cuda-workload" };
                        int k = 1;
                        for (int j = i + 1; j < argc && k < 63; j++)
                                nargv[k++] = argv[j];
                        nargv[k] = NULL;
                        fflush(stdout);
                        execv("/proc/self/exe", nargv);
                        return fail("exec: %s", strerror(errno));
                } else if (strcmp(s, "symbols") == 0) {
                        /* which exported symbol of which file each fetched pointer is */
                        const struct {
                                const char *what;
                                void *p;
                        } w[] = { { "cuGetProcAddress", gpa_self },
                                  { "cuLaunchKernel", (void *)cu.cuLaunchKernel },
                                  { "cuMemAlloc", (void *)cu.cuMemAlloc_v2 },
                                  { "cuMemAlloc@3000", (void *)cu.cuMemAlloc },
                                  { "cuMemAllocAsync", (void *)cu.cuMemAllocAsync },
                                  { "cuGraphLaunch", (void *)cu.cuGraphLaunch },
                                  { "cuIpcOpenMemHandle", (void *)cu.cuIpcOpenMemHandle_v2 },
                                  { "cuMemMap", (void *)cu.cuMemMap },
                                  { "cuMemUnmap", (void *)cu.cuMemUnmap },
                                  { "cuImportExternalMemory", (void *)cu.cuImportExternalMemory },
                                  { "cuGreenCtxCreate", (void *)cu.cuGreenCtxCreate },
                                  { "cuGraphInstantiateWithFlags", (void *)cu.cuGraphInstantiateWithFlags },
                                  { "cuGraphExecDestroy", (void *)cu.cuGraphExecDestroy },
                                  { "cuDeviceGraphMemTrim", (void *)cu.cuDeviceGraphMemTrim },
                                  { "cuMemPoolTrimTo", (void *)cu.cuMemPoolTrimTo } };
                        for (size_t k = 0; k < sizeof w / sizeof w[0]; k++) {
                                Dl_info info;
                                if (!w[k].p || !dladdr(w[k].p, &info) || !info.dli_sname || !info.dli_fname) {
                                        printf("symbol %s -> ? ?\n", w[k].what);
                                        continue;
                                }
                                const char *base = strrchr(info.dli_fname, '/');
                                printf("symbol %s -> %s %s\n", w[k].what, info.dli_sname,
                                       base ? base + 1 : info.dli_fname);
                        }
                } else if (strcmp(s, "kill-bg") == 0) {
                        kill_bg();
                } else if (strcmp(s, "await-free") == 0) {
                        if (!arg || parse_size(arg, &v) < 0)
                                return 2;
                        i++;
                        if (step_await_free(-1, v))
                                return 1;
                } else if (strcmp(s, "await-nvml-free") == 0) {
                        unsigned long long idx;
                        if (i + 2 >= argc || parse_size(argv[i + 1], &idx) < 0 || parse_size(argv[i + 2], &v) < 0 ||
                            idx > 64)
                                return 2;
                        i += 2;
                        if (step_await_free((int)idx, v))
                                return 1;
                } else if (strcmp(s, "fork-idle") == 0) {
                        if (!arg || parse_size(arg, &v) < 0 || v > MAX_IDLE - n_idle)
                                return 2;
                        i++;
                        for (unsigned long long k = 0; k < v; k++) {
                                pid_t c = fork();
                                if (c < 0)
                                        return fail("fork: %s", strerror(errno));
                                if (c == 0) { /* a worker that never touches CUDA, until killed (60 s at most) */
                                        struct timespec ts = { 60, 0 };
                                        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                                                ;
                                        _exit(0);
                                }
                                idle_kids[n_idle++] = c;
                        }
                } else if (strcmp(s, "wait-bg") == 0) {
                        if (step_wait_bg())
                                return 1;
                } else if (strcmp(s, "ready") == 0) {
                        printf("ready\n");
                        fflush(stdout);
                } else if (strcmp(s, "hold") == 0) {
                        /* Until killed — but never forever, whatever a broken test forgets. */
                        struct timespec ts = { 60, 0 };
                        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                                ;
                        return fail("hold: nobody killed me in 60 s");
                } else if (strcmp(s, "sleep") == 0) {
                        if (!arg || parse_size(arg, &v) < 0)
                                return 2;
                        i++;
                        struct timespec ts = { (time_t)(v / 1000), (long)(v % 1000) * 1000000L };
                        nanosleep(&ts, NULL);
                } else if (strcmp(s, "threads") == 0) {
                        unsigned long long t, n, size;
                        if (i + 3 >= argc || parse_size(argv[i + 1], &t) < 0 || parse_size(argv[i + 2], &n) < 0 ||
                            parse_size(argv[i + 3], &size) < 0 || t == 0 || t > 64)
                                return 2;
                        i += 3;
                        pthread_t th[64];
                        struct thread_job jobs[64];
                        for (unsigned k = 0; k < t; k++) {
                                jobs[k] = (struct thread_job){ (unsigned)n, size, ctx, 0 };
                                if (pthread_create(&th[k], NULL, thread_main, &jobs[k]) != 0)
                                        return fail("pthread_create");
                        }
                        int bad = 0;
                        for (unsigned k = 0; k < t; k++) {
                                pthread_join(th[k], NULL);
                                bad |= jobs[k].failed;
                        }
                        if (bad)
                                return fail("a thread's alloc/free failed");
                } else if (strcmp(s, "cupti-alloc") == 0 || strcmp(s, "cupti-expect") == 0) {
                        if (!arg || parse_size(arg, &v) < 0)
                                return 2;
                        i++;
                        if (strcmp(s, "cupti-alloc") == 0 ? step_cupti(v) : step_cupti_expect(v))
                                return 1;
                } else if (strcmp(s, "nccl-rank") == 0) {
                        unsigned long long rank, n, size;
                        if (i + 4 >= argc || parse_size(argv[i + 1], &rank) < 0 || parse_size(argv[i + 2], &n) < 0 ||
                            parse_size(argv[i + 4], &size) < 0 || !n || rank >= n)
                                return 2;
                        const char *dir = argv[i + 3];
                        i += 4;
                        if (step_nccl((unsigned)rank, (unsigned)n, dir, size))
                                return 1;
                } else if (strcmp(s, "cupti-free") == 0) {
                        while (cupti_n)
                                if (CALL(cuMemFree_v2, cupti_ptrs[--cupti_n]) != CUDA_SUCCESS)
                                        return fail("cuMemFree_v2 of the callback's allocation failed");
                } else if (strcmp(s, "launch") == 0) {
                        unsigned long long n = 0, blocks = 1, us = 100;
                        if (!arg || parse_size(arg, &n) < 0)
                                return 2;
                        i++;
                        if (i + 1 < argc && parse_size(argv[i + 1], &blocks) == 0) {
                                i++;
                                if (i + 1 < argc && parse_size(argv[i + 1], &us) == 0)
                                        i++;
                        }
                        if (step_launch(n, (unsigned)blocks, (unsigned)us))
                                return 1;
                } else if (strcmp(s, "graph") == 0 || strcmp(s, "spin") == 0 || strcmp(s, "spin-graph") == 0) {
                        /* graph N [BLOCKS [US]]: N graph launches of a one-kernel graph.
                         * spin SECONDS [BLOCKS [US]] / spin-graph …: launch back to back for that long. */
                        unsigned long long n = 0, blocks = 1, us = 100;
                        if (!arg || parse_size(arg, &n) < 0)
                                return 2;
                        i++;
                        if (i + 1 < argc && parse_size(argv[i + 1], &blocks) == 0) {
                                i++;
                                if (i + 1 < argc && parse_size(argv[i + 1], &us) == 0)
                                        i++;
                        }
                        if (step_graph_or_spin(s, n, (unsigned)blocks, (unsigned)us))
                                return 1;
                } else if (strcmp(s, "sync") == 0) {
                        if ((cr = CALL(cuCtxSynchronize)) != CUDA_SUCCESS)
                                return fail("cuCtxSynchronize: %d", cr);
                } else if (strcmp(s, "pool-keep") == 0 || strcmp(s, "pool-trim") == 0) {
                        /* pool-keep: the default pool keeps what is freed (release threshold: max);
                         * pool-trim KEEP: cuMemPoolTrimTo(default pool, KEEP) */
                        CUmemoryPool pool;
                        if (CALL(cuDeviceGetDefaultMemPool, &pool, 0) != CUDA_SUCCESS)
                                return fail("cuDeviceGetDefaultMemPool failed");
                        if (strcmp(s, "pool-keep") == 0) {
                                cuuint64_t max = UINT64_MAX;
                                cr = CALL(cuMemPoolSetAttribute, pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max);
                        } else {
                                if (!arg || parse_size(arg, &v) < 0)
                                        return 2;
                                i++;
                                cr = CALL(cuMemPoolTrimTo, pool, v);
                        }
                        if (cr != CUDA_SUCCESS)
                                return fail("%s: %d", s, cr);
                } else if (strcmp(s, "pool-create") == 0 || strcmp(s, "pool-destroy") == 0) {
                        CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
                        cr = strcmp(s, "pool-create") == 0 ? CALL(cuMemPoolCreate, &upool, &props)
                                                           : CALL(cuMemPoolDestroy, upool);
                        if (cr != CUDA_SUCCESS)
                                return fail("%s: %d", s, cr);
                } else if (strcmp(s, "unhooked") == 0) {
                        /* an entry point the interposer passes through (answers before cuInit): its result */
                        int dv = 0;
                        printf("unhooked %d\n", (int)CALL(cuDriverGetVersion, &dv));
                } else if (strcmp(s, "limit") == 0 || strcmp(s, "limit!") == 0) {
                        if (!arg || i + 2 >= argc || parse_size(argv[i + 2], &v) < 0)
                                return 2;
                        CUlimit l = strcmp(arg, "heap") == 0     ? CU_LIMIT_MALLOC_HEAP_SIZE
                                    : strcmp(arg, "stack") == 0  ? CU_LIMIT_STACK_SIZE
                                    : strcmp(arg, "printf") == 0 ? CU_LIMIT_PRINTF_FIFO_SIZE
                                                                 : CU_LIMIT_MAX;
                        if (l == CU_LIMIT_MAX)
                                return 2;
                        i += 2;
                        cr = CALL(cuCtxSetLimit, l, (size_t)v);
                        if (strcmp(s, "limit!") == 0 ? cr != CUDA_ERROR_OUT_OF_MEMORY : cr != CUDA_SUCCESS)
                                return fail("%s %s %llu: %d", s, arg, v, cr);
                } else if (strcmp(s, "module") == 0 || strcmp(s, "module!") == 0 || strcmp(s, "library") == 0 ||
                           strcmp(s, "library!") == 0) {
                        if (!arg || parse_size(arg, &v) < 0)
                                return 2;
                        i++;
                        if (n_allocs == MAX_ALLOCS)
                                return fail("too many allocations");
                        char image[96];
                        snprintf(image, sizeof image, "gpuslice-sim-module globals=%llu", v);
                        bool lib = s[0] == 'l', want_oom = s[strlen(s) - 1] == '!';
                        CUmodule m = NULL;
                        CUlibrary lb = NULL;
                        cr = lib ? CALL(cuLibraryLoadData, &lb, image, NULL, NULL, 0, NULL, NULL, 0)
                                 : CALL(cuModuleLoadData, &m, image);
                        if (want_oom ? cr != CUDA_ERROR_OUT_OF_MEMORY : cr != CUDA_SUCCESS)
                                return fail("%s %llu: %d", s, v, cr);
                        if (cr == CUDA_SUCCESS) {
                                alloc_kind[n_allocs] = lib ? K_LIBRARY : K_MODULE;
                                allocs[n_allocs++] = lib ? (CUdeviceptr)(uintptr_t)lb : (CUdeviceptr)(uintptr_t)m;
                        }
                } else if (strcmp(s, "module-image") == 0 || strcmp(s, "module-func") == 0) {
                        if (!arg)
                                return 2;
                        i++;
                        if (strcmp(s, "module-func") == 0) {
                                CUfunction fn;
                                unsigned k = n_allocs;
                                while (k > 0 && alloc_kind[k - 1] != K_MODULE)
                                        k--;
                                if (!k || (cr = CALL(cuModuleGetFunction, &fn, (CUmodule)(uintptr_t)allocs[k - 1],
                                                     arg)) != CUDA_SUCCESS)
                                        return fail("module-func %s failed", arg);
                                continue;
                        }
                        CUmodule m = NULL;
                        cr = CUDA_ERROR_OUT_OF_MEMORY;
                        if (n_allocs == MAX_ALLOCS || (cr = CALL(cuModuleLoadData, &m, arg)) != CUDA_SUCCESS)
                                return fail("module-image: %d", cr);
                        alloc_kind[n_allocs] = K_MODULE;
                        allocs[n_allocs++] = (CUdeviceptr)(uintptr_t)m;
                } else if (strcmp(s, "module-global") == 0) {
                        if (!arg || parse_size(arg, &v) < 0 || n_allocs == MAX_ALLOCS)
                                return 2;
                        i++;
                        char image[512];
                        CUmodule m = NULL;
                        snprintf(image, sizeof image, "gpuslice-sim-module globals=%llu", v);
                        cr = CALL(cuModuleLoadData, &m, image);
                        if (cr != CUDA_SUCCESS) { /* a real driver: PTX declaring the global */
                                snprintf(image, sizeof image,
                                         ".version 6.0\n.target sm_52\n.address_size 64\n"
                                         ".visible .global .align 8 .b8 kit_global[%llu];\n"
                                         ".visible .entry touch() { .reg .b64 %%rd1; mov.u64 %%rd1, kit_global; ret; "
                                         "}\n",
                                         v);
                                cr = CALL(cuModuleLoadData, &m, image);
                        }
                        if (cr != CUDA_SUCCESS)
                                return fail("module-global %llu: %d", v, cr);
                        alloc_kind[n_allocs] = K_MODULE;
                        allocs[n_allocs++] = (CUdeviceptr)(uintptr_t)m;
                } else if (strcmp(s, "cycles") == 0 || strcmp(s, "asyncloop") == 0) {
                        unsigned long long size;
                        if (!arg || i + 2 >= argc || parse_size(arg, &v) < 0 || parse_size(argv[i + 2], &size) < 0)
                                return 2;
                        i += 2;
                        bool async = strcmp(s, "asyncloop") == 0;
                        uint64_t t0 = now_ns();
                        for (unsigned long long k = 0; k < v; k++) {
                                CUdeviceptr p;
                                cr = async ? CALL(cuMemAllocAsync, &p, size, NULL) : CALL(cuMemAlloc_v2, &p, size);
                                if (cr != CUDA_SUCCESS || (cr = async ? CALL(cuMemFreeAsync, p, NULL)
                                                                      : CALL(cuMemFree_v2, p)) != CUDA_SUCCESS)
                                        return fail("%s: %d", s, cr);
                        }
                        if (async && CALL(cuCtxSynchronize) != CUDA_SUCCESS)
                                return fail("%s: sync failed", s);
                        printf("%s %llu %llu\n", s, v, v ? (unsigned long long)((now_ns() - t0) / v) : 0ULL);
                } else if (strcmp(s, "devices") == 0) {
                        int n = 0;
                        if ((cr = CALL(cuInit, 0)) != CUDA_SUCCESS || (cr = CALL(cuDeviceGetCount, &n)) != CUDA_SUCCESS)
                                return fail("devices: %d", cr);
                        printf("devices %d\n", n);
                } else if (strcmp(s, "watch") == 0) {
                        unsigned long long size;
                        if (!arg || i + 2 >= argc || parse_size(arg, &v) < 0 || parse_size(argv[i + 2], &size) < 0)
                                return 2;
                        i += 2;
                        if (load_kernel(0))
                                return 1;
                        kernel_ns = 0;
                        uint64_t end = now_ns() + v * 1000000000ULL, worst = 0, ops = 0;
                        while (now_ns() < end) {
                                uint64_t t0 = now_ns();
                                CUdeviceptr p;
                                cr = CALL(cuMemAlloc_v2, &p, size);
                                if (cr != CUDA_SUCCESS && cr != CUDA_ERROR_OUT_OF_MEMORY)
                                        return fail("watch: alloc %d", cr);
                                if (launch_one(1) != CUDA_SUCCESS || CALL(cuCtxSynchronize) != CUDA_SUCCESS)
                                        return fail("watch: launch failed");
                                if (cr == CUDA_SUCCESS && CALL(cuMemFree_v2, p) != CUDA_SUCCESS)
                                        return fail("watch: free failed");
                                uint64_t d = now_ns() - t0;
                                worst = d > worst ? d : worst;
                                ops++;
                        }
                        printf("watch %llu %llu\n", (unsigned long long)ops, (unsigned long long)(worst / 1000));
                } else if (strcmp(s, "launchtime") == 0) {
                        if (!arg || parse_size(arg, &v) < 0)
                                return 2;
                        i++;
                        if (load_kernel(0))
                                return 1;
                        kernel_ns = 0;
                        uint64_t t0 = now_ns();
                        for (unsigned long long k = 0; k < v; k++)
                                if ((cr = launch_one(1)) != CUDA_SUCCESS)
                                        return fail("launchtime: %d", cr);
                        if (CALL(cuCtxSynchronize) != CUDA_SUCCESS)
                                return fail("launchtime: sync failed");
                        printf("launchtime %llu %llu\n", v, v ? (unsigned long long)((now_ns() - t0) / v) : 0ULL);
                } else if (strcmp(s, "pool-export") == 0) {
                        if (!arg || parse_size(arg, &v) < 0)
                                return 2;
                        i++;
                        CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                                 .handleTypes = CU_MEM_HANDLE_TYPE_FABRIC,
                                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
                        CUmemoryPool xp = NULL;
                        CUdeviceptr p = 0;
                        CUmemFabricHandle fh;
                        CUmemPoolPtrExportData pd;
                        if ((cr = CALL(cuMemPoolCreate, &xp, &props)) != CUDA_SUCCESS ||
                            (cr = CALL(cuMemAllocFromPoolAsync, &p, v, xp, NULL)) != CUDA_SUCCESS ||
                            (cr = CALL(cuMemPoolExportToShareableHandle, &fh, xp, CU_MEM_HANDLE_TYPE_FABRIC, 0)) !=
                                    CUDA_SUCCESS ||
                            (cr = CALL(cuMemPoolExportPointer, &pd, p)) != CUDA_SUCCESS)
                                return fail("pool-export: %d", cr);
                        printf("share ");
                        for (size_t k = 0; k < 32; k++)
                                printf("%02x", fh.data[k]);
                        for (size_t k = 0; k < 32; k++)
                                printf("%02x", pd.reserved[k]);
                        printf("\n");
                } else if (strcmp(s, "pool-import") == 0 || strcmp(s, "pool-import!") == 0) {
                        unsigned char h[64];
                        if (!arg || strlen(arg) != 128)
                                return 2;
                        for (size_t k = 0; k < sizeof h; k++) {
                                unsigned b;
                                if (sscanf(arg + 2 * k, "%2x", &b) != 1)
                                        return 2;
                                h[k] = (unsigned char)b;
                        }
                        i++;
                        if (n_allocs == MAX_ALLOCS)
                                return fail("too many allocations");
                        CUmemFabricHandle fh;
                        CUmemPoolPtrExportData pd;
                        memset(&fh, 0, sizeof fh);
                        memset(&pd, 0, sizeof pd);
                        memcpy(fh.data, h, 32);
                        memcpy(pd.reserved, h + 32, 32);
                        CUmemoryPool ip = NULL;
                        CUdeviceptr p = 0;
                        if ((cr = CALL(cuMemPoolImportFromShareableHandle, &ip, &fh, CU_MEM_HANDLE_TYPE_FABRIC, 0)) !=
                            CUDA_SUCCESS)
                                return fail("pool import: %d", cr);
                        cr = CALL(cuMemPoolImportPointer, &p, ip, &pd);
                        if (strcmp(s, "pool-import!") == 0 ? cr != CUDA_ERROR_OUT_OF_MEMORY : cr != CUDA_SUCCESS)
                                return fail("%s: %d", s, cr);
                        if (cr == CUDA_SUCCESS) {
                                alloc_kind[n_allocs] = K_PTR;
                                allocs[n_allocs++] = p;
                        }
                } else if (strcmp(s, "ipc-export") == 0 || strcmp(s, "vmm-export") == 0) {
                        /* print the newest allocation's IPC handle ("share HEX"): cuMemAlloc memory for
                         * ipc-export, a cuMemCreate handle (fam vmm) as a fabric handle for vmm-export */
                        unsigned char h[64];
                        if (!n_allocs)
                                return fail("%s: nothing allocated", s);
                        if (strcmp(s, "ipc-export") == 0) {
                                CUipcMemHandle ih;
                                cr = CALL(cuIpcGetMemHandle, &ih, allocs[n_allocs - 1]);
                                memcpy(h, ih.reserved, sizeof h);
                        } else {
                                CUmemFabricHandle fh;
                                cr = CALL(cuMemExportToShareableHandle, &fh,
                                          (CUmemGenericAllocationHandle)allocs[n_allocs - 1], CU_MEM_HANDLE_TYPE_FABRIC,
                                          0);
                                memcpy(h, fh.data, sizeof h);
                        }
                        if (cr != CUDA_SUCCESS)
                                return fail("%s: %d", s, cr);
                        printf("share ");
                        for (size_t k = 0; k < sizeof h; k++)
                                printf("%02x", h[k]);
                        printf("\n");
                } else if (strcmp(s, "ipc-open") == 0 || strcmp(s, "ipc-open!") == 0 || strcmp(s, "vmm-import") == 0 ||
                           strcmp(s, "vmm-import!") == 0) {
                        /* ipc-open HEX: cuIpcOpenMemHandle; vmm-import HEX SIZE: import the fabric handle, reserve
                         * SIZE of address space and cuMemMap it. With '!': must fail with OUT_OF_MEMORY. */
                        unsigned char h[64];
                        bool vmm = strncmp(s, "vmm", 3) == 0, want_oom = s[strlen(s) - 1] == '!';
                        unsigned long long size = 0;
                        if (!arg || strlen(arg) != 128 ||
                            (vmm && (i + 2 >= argc || parse_size(argv[i + 2], &size) < 0)))
                                return 2;
                        for (size_t k = 0; k < sizeof h; k++) {
                                unsigned b;
                                if (sscanf(arg + 2 * k, "%2x", &b) != 1)
                                        return 2;
                                h[k] = (unsigned char)b;
                        }
                        i += vmm ? 2 : 1;
                        if (n_allocs == MAX_ALLOCS)
                                return fail("too many allocations");
                        CUdeviceptr p = 0, va = 0;
                        if (!vmm) {
                                CUipcMemHandle ih;
                                memcpy(ih.reserved, h, sizeof h);
                                cr = CALL(cuIpcOpenMemHandle_v2, &p, ih, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
                        } else {
                                CUmemFabricHandle fh;
                                CUmemGenericAllocationHandle gh = 0;
                                memcpy(fh.data, h, sizeof h);
                                if ((cr = CALL(cuMemImportFromShareableHandle, &gh, &fh, CU_MEM_HANDLE_TYPE_FABRIC)) !=
                                    CUDA_SUCCESS)
                                        return fail("import: %d", cr);
                                if (CALL(cuMemAddressReserve, &va, size, 0, 0, 0) != CUDA_SUCCESS)
                                        return fail("cuMemAddressReserve failed");
                                cr = CALL(cuMemMap, va, size, 0, gh, 0);
                                if (cr != CUDA_SUCCESS) {
                                        CALL(cuMemRelease, gh);
                                        CALL(cuMemAddressFree, va, size);
                                }
                                p = (CUdeviceptr)gh;
                        }
                        if (want_oom && cr != CUDA_ERROR_OUT_OF_MEMORY)
                                return fail("%s: expected OUT_OF_MEMORY, got %d", s, cr);
                        if (!want_oom && cr != CUDA_SUCCESS)
                                return fail("%s: %d", s, cr);
                        if (cr == CUDA_SUCCESS) {
                                alloc_kind[n_allocs] = vmm ? K_IMPORT : K_IPC;
                                alloc_va[n_allocs] = va;
                                alloc_size[n_allocs] = size;
                                allocs[n_allocs++] = p;
                        }
                } else if (strcmp(s, "vmm-map-release") == 0) {
                        /* map the newest cuMemCreate handle and release it at once (the usual pattern): the
                         * memory lives until free/freeall unmaps it */
                        unsigned k = n_allocs - 1;
                        CUdeviceptr va = 0;
                        if (!n_allocs || alloc_kind[k] != K_VMM)
                                return fail("vmm-map-release: the newest allocation is not a vmm handle");
                        if (CALL(cuMemAddressReserve, &va, alloc_size[k], 0, 0, 0) != CUDA_SUCCESS ||
                            (cr = CALL(cuMemMap, va, alloc_size[k], 0, (CUmemGenericAllocationHandle)allocs[k], 0)) !=
                                    CUDA_SUCCESS ||
                            (cr = CALL(cuMemRelease, (CUmemGenericAllocationHandle)allocs[k])) != CUDA_SUCCESS)
                                return fail("vmm-map-release failed");
                        alloc_kind[k] = K_MAPPED;
                        alloc_va[k] = va;
                } else if (strcmp(s, "ext") == 0 || strcmp(s, "ext!") == 0) {
                        /* ext SIZE: import SIZE bytes of external memory (an opaque fd) */
                        if (!arg || parse_size(arg, &v) < 0)
                                return 2;
                        i++;
                        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                        CUDA_EXTERNAL_MEMORY_HANDLE_DESC d = { .type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
                                                               .handle.fd = fd,
                                                               .size = v };
                        CUexternalMemory em = NULL;
                        cr = CALL(cuImportExternalMemory, &em, &d);
                        if (cr != CUDA_SUCCESS)
                                close(fd);
                        if (strcmp(s, "ext!") == 0 ? cr != CUDA_ERROR_OUT_OF_MEMORY : cr != CUDA_SUCCESS)
                                return fail("%s %llu: %d", s, v, cr);
                        if (cr == CUDA_SUCCESS) {
                                alloc_kind[n_allocs] = K_EXT;
                                allocs[n_allocs++] = (CUdeviceptr)(uintptr_t)em;
                        }
                } else if (strcmp(s, "green") == 0 || strcmp(s, "green!") == 0) {
                        /* a green context on device 0 with all its SMs */
                        CUdevResource res;
                        CUdevResourceDesc desc;
                        CUgreenCtx gc = NULL;
                        if (CALL(cuDeviceGetDevResource, 0, &res, CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS ||
                            CALL(cuDevResourceGenerateDesc, &desc, &res, 1) != CUDA_SUCCESS)
                                return fail("cannot describe device 0's SMs");
                        cr = CALL(cuGreenCtxCreate, &gc, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM);
                        if (strcmp(s, "green!") == 0 ? cr != CUDA_ERROR_OUT_OF_MEMORY
                                                     : cr != CUDA_SUCCESS || n_greens == 16)
                                return fail("%s: %d", s, cr);
                        if (cr == CUDA_SUCCESS)
                                greens[n_greens++] = gc;
                } else if (strcmp(s, "green-destroy") == 0) {
                        if (!n_greens || (cr = CALL(cuGreenCtxDestroy, greens[--n_greens])) != CUDA_SUCCESS)
                                return fail("green-destroy failed");
                } else if (strcmp(s, "graph-mem") == 0 || strcmp(s, "graph-mem!") == 0 ||
                           strcmp(s, "graph-keep") == 0) {
                        /* graph-mem SIZE: instantiate a graph that allocates SIZE on device 0 and frees it;
                         * graph-keep SIZE: one whose allocation outlives the launch (never freed). */
                        if (!arg || parse_size(arg, &v) < 0)
                                return 2;
                        i++;
                        CUgraph gr;
                        CUgraphNode an, fn;
                        CUDA_MEM_ALLOC_NODE_PARAMS ap = { .poolProps = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                                                         .location = { CU_MEM_LOCATION_TYPE_DEVICE,
                                                                                       0 } },
                                                          .bytesize = v };
                        if (CALL(cuGraphCreate, &gr, 0) != CUDA_SUCCESS ||
                            CALL(cuGraphAddMemAllocNode, &an, gr, NULL, 0, &ap) != CUDA_SUCCESS ||
                            (strcmp(s, "graph-keep") != 0 &&
                             CALL(cuGraphAddMemFreeNode, &fn, gr, &an, 1, ap.dptr) != CUDA_SUCCESS))
                                return fail("cannot make a graph with memory nodes");
                        CUgraphExec ex = NULL;
                        cr = CALL(cuGraphInstantiateWithFlags, &ex, gr, 0);
                        if (strcmp(s, "graph-mem!") == 0 ? cr != CUDA_ERROR_OUT_OF_MEMORY
                                                         : cr != CUDA_SUCCESS || n_gexecs == 16)
                                return fail("%s %llu: instantiate %d", s, v, cr);
                        if (cr == CUDA_SUCCESS)
                                gexecs[n_gexecs++] = ex;
                } else if (strcmp(s, "graph-run") == 0) {
                        if (!n_gexecs || (cr = CALL(cuGraphLaunch, gexecs[n_gexecs - 1], NULL)) != CUDA_SUCCESS ||
                            CALL(cuCtxSynchronize) != CUDA_SUCCESS)
                                return fail("graph-run failed");
                } else if (strcmp(s, "graph-destroy") == 0) {
                        if (!n_gexecs || (cr = CALL(cuGraphExecDestroy, gexecs[--n_gexecs])) != CUDA_SUCCESS)
                                return fail("graph-destroy failed");
                } else if (strcmp(s, "graph-trim") == 0) {
                        if ((cr = CALL(cuDeviceGraphMemTrim, 0)) != CUDA_SUCCESS)
                                return fail("cuDeviceGraphMemTrim: %d", cr);
                } else {
                        int rr = step_more(argc, argv, &i);
                        if (rr == -1) {
                                fprintf(stderr, "cuda-workload: unknown step '%s'\n", s);
                                return 2;
                        }
                        if (rr)
                                return rr;
                }
        }
        return 0;
}
