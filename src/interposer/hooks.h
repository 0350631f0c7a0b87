/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hooks — THE list of CUDA driver entry points libgpuslice-cuda.so intercepts. Everything else is
 * generated from it: the enum, the name table, the typed pointers to the real driver (prototypes from
 * cuda-abi.h, one per exported ABI variant), the wrapper table and the cuGetProcAddress mapping.
 *
 * X(symbol, base, version, flags):
 *   symbol  — the exported symbol (each ABI variant is its own entry with its own prototype)
 *   base    — the name cuGetProcAddress is asked for
 *   version — the CUDA version (1000·major + 10·minor) that introduced this variant (cudaTypedefs.h)
 *   flags   — GS_PTSZ for per-thread-default-stream variants, else 0
 *
 * Adding an entry: add it to the group of the file that will hold its wrapper (gs_w_<symbol>, exported by
 * GS_EXPORT at the end of that file; the build fails until both exist).
 * Every exported driver symbol not listed here is passed through unchanged (passthrough.h).
 * Every symbol here (and in GS_INTERNAL) needs its prototype in cuda-abi.h, which declares every variant.
 */
#pragma once

#define GS_PTSZ 1u

/* interposer.c: initialisation and cuGetProcAddress */
#define GS_HOOKS_INIT(X)                                \
        X(cuInit, cuInit, 2000, 0)                      \
        X(cuGetProcAddress, cuGetProcAddress, 11030, 0) \
        X(cuGetProcAddress_v2, cuGetProcAddress, 12000, 0)

/* memory.c: every way device memory is taken, given back or queried */
#define GS_HOOKS_MEMORY(X)                                                                           \
        /* memory: allocation families */                                                            \
        X(cuMemAlloc, cuMemAlloc, 2000, 0)                                                           \
        X(cuMemAlloc_v2, cuMemAlloc, 3020, 0)                                                        \
        X(cuMemAllocPitch, cuMemAllocPitch, 2000, 0)                                                 \
        X(cuMemAllocPitch_v2, cuMemAllocPitch, 3020, 0)                                              \
        X(cuMemAllocManaged, cuMemAllocManaged, 6000, 0)                                             \
        X(cuMemAllocAsync, cuMemAllocAsync, 11020, 0)                                                \
        X(cuMemAllocAsync_ptsz, cuMemAllocAsync, 11020, GS_PTSZ)                                     \
        X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, 0)                                \
        X(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, 11020, GS_PTSZ)                     \
        X(cuMemCreate, cuMemCreate, 10020, 0)                                                        \
        X(cuArrayCreate, cuArrayCreate, 2000, 0)                                                     \
        X(cuArrayCreate_v2, cuArrayCreate, 3020, 0)                                                  \
        X(cuArray3DCreate, cuArray3DCreate, 2000, 0)                                                 \
        X(cuArray3DCreate_v2, cuArray3DCreate, 3020, 0)                                              \
        X(cuMipmappedArrayCreate, cuMipmappedArrayCreate, 5000, 0)                                   \
        /* memory: VMM mappings (of tracked handles) and external memory; imports are not charged */ \
        X(cuMemMap, cuMemMap, 10020, 0)                                                              \
        X(cuMemUnmap, cuMemUnmap, 10020, 0)                                                          \
        X(cuImportExternalMemory, cuImportExternalMemory, 10000, 0)                                  \
        X(cuDestroyExternalMemory, cuDestroyExternalMemory, 10000, 0)                                \
        /* memory: stream-ordered pools (what a pool keeps cached counts) */                         \
        X(cuMemPoolCreate, cuMemPoolCreate, 11020, 0)                                                \
        X(cuMemPoolDestroy, cuMemPoolDestroy, 11020, 0)                                              \
        X(cuMemPoolTrimTo, cuMemPoolTrimTo, 11020, 0)                                                \
        /* memory the driver takes for a context's limits and for loaded code */                     \
        X(cuCtxSetLimit, cuCtxSetLimit, 3010, 0)                                                     \
        X(cuModuleLoad, cuModuleLoad, 2000, 0)                                                       \
        X(cuModuleLoadData, cuModuleLoadData, 2000, 0)                                               \
        X(cuModuleLoadDataEx, cuModuleLoadDataEx, 2010, 0)                                           \
        X(cuModuleLoadFatBinary, cuModuleLoadFatBinary, 2000, 0)                                     \
        X(cuModuleUnload, cuModuleUnload, 2000, 0)                                                   \
        X(cuLibraryLoadData, cuLibraryLoadData, 12000, 0)                                            \
        X(cuLibraryLoadFromFile, cuLibraryLoadFromFile, 12000, 0)                                    \
        X(cuLibraryUnload, cuLibraryUnload, 12000, 0)                                                \
        /* memory: graph memory nodes (charged at instantiation, kept until trimmed) */              \
        X(cuGraphInstantiate, cuGraphInstantiate, 10000, 0)                                          \
        X(cuGraphInstantiate_v2, cuGraphInstantiate, 11000, 0)                                       \
        X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040, 0)                        \
        X(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams, 12000, 0)                      \
        X(cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams, 12000, GS_PTSZ)           \
        X(cuGraphExecDestroy, cuGraphExecDestroy, 10000, 0)                                          \
        X(cuDeviceGraphMemTrim, cuDeviceGraphMemTrim, 11040, 0)                                      \
        /* memory: frees */                                                                          \
        X(cuMemFree, cuMemFree, 2000, 0)                                                             \
        X(cuMemFree_v2, cuMemFree, 3020, 0)                                                          \
        X(cuMemFreeAsync, cuMemFreeAsync, 11020, 0)                                                  \
        X(cuMemFreeAsync_ptsz, cuMemFreeAsync, 11020, GS_PTSZ)                                       \
        X(cuMemRelease, cuMemRelease, 10020, 0)                                                      \
        X(cuArrayDestroy, cuArrayDestroy, 2000, 0)                                                   \
        X(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 5000, 0)                                 \
        /* memory: queries */                                                                        \
        X(cuMemGetInfo, cuMemGetInfo, 2000, 0)                                                       \
        X(cuMemGetInfo_v2, cuMemGetInfo, 3020, 0)                                                    \
        X(cuDeviceTotalMem, cuDeviceTotalMem, 2000, 0)                                               \
        X(cuDeviceTotalMem_v2, cuDeviceTotalMem, 3020, 0)

/* context.c: contexts (each costs context= bytes of the limit) */
#define GS_HOOKS_CONTEXT(X)                                                  \
        X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, 0)       \
        X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 7000, 0)     \
        X(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease, 11000, 0) \
        X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000, 0)         \
        X(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset, 11000, 0)     \
        X(cuCtxCreate, cuCtxCreate, 2000, 0)                                 \
        X(cuCtxCreate_v2, cuCtxCreate, 3020, 0)                              \
        X(cuCtxCreate_v3, cuCtxCreate, 11040, 0)                             \
        X(cuCtxCreate_v4, cuCtxCreate, 12050, 0)                             \
        X(cuCtxDestroy, cuCtxDestroy, 2000, 0)                               \
        X(cuCtxDestroy_v2, cuCtxDestroy, 4000, 0)                            \
        X(cuGreenCtxCreate, cuGreenCtxCreate, 12040, 0)                      \
        X(cuGreenCtxDestroy, cuGreenCtxDestroy, 12040, 0)

/* launch.c: launches (the compute share) */
#define GS_HOOKS_LAUNCH(X)                                                          \
        /* compute: launches */                                                     \
        X(cuLaunchKernel, cuLaunchKernel, 4000, 0)                                  \
        X(cuLaunchKernel_ptsz, cuLaunchKernel, 7000, GS_PTSZ)                       \
        X(cuLaunchKernelEx, cuLaunchKernelEx, 11060, 0)                             \
        X(cuLaunchKernelEx_ptsz, cuLaunchKernelEx, 11060, GS_PTSZ)                  \
        X(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 9000, 0)            \
        X(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel, 9000, GS_PTSZ) \
        X(cuGraphLaunch, cuGraphLaunch, 10000, 0)                                   \
        X(cuGraphLaunch_ptsz, cuGraphLaunch, 10000, GS_PTSZ)                        \
        X(cuLaunch, cuLaunch, 2000, 0)                                              \
        X(cuLaunchGrid, cuLaunchGrid, 2000, 0)                                      \
        X(cuLaunchGridAsync, cuLaunchGridAsync, 2000, 0)

#define GS_HOOKS(X) GS_HOOKS_INIT(X) GS_HOOKS_MEMORY(X) GS_HOOKS_CONTEXT(X) GS_HOOKS_LAUNCH(X)

/*
 * Names cuGetProcAddress answers with another entry point from some version on: X(name, version, symbol).
 * cuda.h 12.0 `#define cuGraphInstantiate cuGraphInstantiateWithFlags`, cudaTypedefs.h 12.0
 * `#define PFN_cuGraphInstantiate PFN_cuGraphInstantiateWithFlags_v11040`: a caller asking for
 * "cuGraphInstantiate" at 12000 or later gets the 3-argument form, not cuGraphInstantiate_v2's 5 arguments.
 * (tests/interposer/cuda-13.0-variants.txt lists every hooked name at every version boundary.)
 */
#define GS_PROC_RENAMES(X) X(cuGraphInstantiate, 12000, cuGraphInstantiateWithFlags)

/* Driver functions the interposer itself calls (never wrapped, never exported from here). */
#define GS_INTERNAL(X)                   \
        X(cuDeviceGetCount)              \
        X(cuDeviceGetUuid)               \
        X(cuDeviceGetUuid_v2)            \
        X(cuCtxGetDevice)                \
        X(cuCtxGetCurrent)               \
        X(cuStreamGetCtx)                \
        X(cuStreamGetDevice)             \
        X(cuCtxPushCurrent_v2)           \
        X(cuCtxPopCurrent_v2)            \
        X(cuMemPoolGetAttribute)         \
        X(cuDeviceGetMemPool)            \
        X(cuDeviceGetDefaultMemPool)     \
        X(cuDeviceGetGraphMemAttribute)  \
        X(cuGraphGetNodes)               \
        X(cuGraphNodeGetType)            \
        X(cuGraphMemAllocNodeGetParams)  \
        X(cuGraphChildGraphNodeGetGraph) \
        X(cuCtxFromGreenCtx)             \
        X(cuCtxGetLimit)                 \
        X(cuDeviceGetAttribute)

/* NVML entry points libgpuslice-cuda.so exports (nvml-hook.c): memory queries answer with the limit, the
 * process lists of a limited GPU name the container's own processes. */
#define GS_NVML_HOOKS(X)                           \
        X(nvmlDeviceGetMemoryInfo)                 \
        X(nvmlDeviceGetMemoryInfo_v2)              \
        X(nvmlDeviceGetComputeRunningProcesses)    \
        X(nvmlDeviceGetComputeRunningProcesses_v2) \
        X(nvmlDeviceGetComputeRunningProcesses_v3)

/* NVML functions the hooks call (resolved in the real NVML, never exported from here). */
#define GS_NVML_INTERNAL(X) X(nvmlDeviceGetUUID)
