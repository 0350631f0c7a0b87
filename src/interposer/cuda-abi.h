/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cuda-abi — the part of the CUDA driver API (CUDA 13.0 ABI, x86-64 Linux) that libgpuslice-cuda.so
 * uses, declared here so the interposer builds without the CUDA toolkit (as src/nvml/nvml-abi.h does for
 * NVML): the handle and integer types, the enum values it names, the structures whose fields it reads
 * (with their exact layout), and one prototype per hooked or called ABI variant (legacy, _v2…, _ptsz
 * each under its own name, as cuda.h declares them with __CUDA_API_VERSION_INTERNAL).
 *
 * Checked against cuda.h wherever a toolkit is present (cuda-abi-check.c, compiled into the library):
 * there cuda.h comes first, this file skips its type definitions, re-declares every prototype (the
 * compiler rejects any that differs from cuda.h's) and the layout and value assertions at the end
 * hold for cuda.h's own types. Adding a hooked or called entry point: add its prototype here.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifndef __cuda_cuda_h__ /* cuda.h not included: the types and values, as CUDA 13.0 defines them */

#define CUDA_VERSION 13000

typedef enum cudaError_enum {
        CUDA_SUCCESS = 0,
        CUDA_ERROR_INVALID_VALUE = 1,
        CUDA_ERROR_OUT_OF_MEMORY = 2,
        CUDA_ERROR_NOT_INITIALIZED = 3,
        CUDA_ERROR_NO_DEVICE = 100,
        CUDA_ERROR_NOT_FOUND = 500,
        CUDA_ERROR_UNKNOWN = 999,
} CUresult;

typedef uint64_t cuuint64_t;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned int CUdeviceptr_v1;
typedef unsigned long long CUmemGenericAllocationHandle;

/* Opaque handles. */
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUlib_st *CUlibrary;
typedef struct CUarray_st *CUarray;
typedef struct CUmipmappedArray_st *CUmipmappedArray;
typedef struct CUstream_st *CUstream;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUextMemory_st *CUexternalMemory;
typedef struct CUgreenCtx_st *CUgreenCtx;
typedef struct CUdevResourceDesc_st *CUdevResourceDesc;
/* Structures passed by pointer whose fields the interposer never reads. */
typedef struct CUlaunchConfig_st CUlaunchConfig;
typedef struct CUctxCreateParams_st CUctxCreateParams;
typedef struct CUexecAffinityParam_st CUexecAffinityParam;
typedef struct CUDA_GRAPH_INSTANTIATE_PARAMS_st CUDA_GRAPH_INSTANTIATE_PARAMS;
typedef struct CUmemPoolPtrExportData_st CUmemPoolPtrExportData;
typedef struct CUmemAccessDesc_st CUmemAccessDesc;

typedef enum CUdevice_attribute_enum {
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
        CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
} CUdevice_attribute;

typedef enum CUlimit_enum {
        CU_LIMIT_STACK_SIZE = 0x00,
        CU_LIMIT_PRINTF_FIFO_SIZE = 0x01,
        CU_LIMIT_MALLOC_HEAP_SIZE = 0x02,
} CUlimit;

typedef enum CUarray_format_enum {
        CU_AD_FORMAT_UNSIGNED_INT8 = 0x01,
        CU_AD_FORMAT_UNSIGNED_INT16 = 0x02,
        CU_AD_FORMAT_SIGNED_INT8 = 0x08,
        CU_AD_FORMAT_SIGNED_INT16 = 0x09,
        CU_AD_FORMAT_HALF = 0x10,
        CU_AD_FORMAT_MAX = 0x7FFFFFFF,
} CUarray_format;

typedef enum CUmemLocationType_enum {
        CU_MEM_LOCATION_TYPE_INVALID = 0x0,
        CU_MEM_LOCATION_TYPE_DEVICE = 0x1,
        CU_MEM_LOCATION_TYPE_MAX = 0x7FFFFFFF,
} CUmemLocationType;

typedef enum CUmemAllocationType_enum {
        CU_MEM_ALLOCATION_TYPE_INVALID = 0x0,
        CU_MEM_ALLOCATION_TYPE_PINNED = 0x1,
        CU_MEM_ALLOCATION_TYPE_MAX = 0x7FFFFFFF,
} CUmemAllocationType;

typedef enum CUmemAllocationHandleType_enum {
        CU_MEM_HANDLE_TYPE_NONE = 0x0,
        CU_MEM_HANDLE_TYPE_MAX = 0x7FFFFFFF,
} CUmemAllocationHandleType;

typedef enum CUmemPool_attribute_enum {
        CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,
        CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,
} CUmemPool_attribute;

typedef enum CUgraphMem_attribute_enum {
        CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT = 2,
} CUgraphMem_attribute;

typedef enum CUgraphNodeType_enum {
        CU_GRAPH_NODE_TYPE_GRAPH = 4,
        CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10,
} CUgraphNodeType;

typedef enum CUdriverProcAddress_flags_enum {
        CU_GET_PROC_ADDRESS_DEFAULT = 0,
        CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1 << 0,
        CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1 << 1,
} CUdriverProcAddress_flags;

typedef enum CUdriverProcAddressQueryResult_enum {
        CU_GET_PROC_ADDRESS_SUCCESS = 0,
        CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
        CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
} CUdriverProcAddressQueryResult;

typedef enum CUjit_option_enum {
        CU_JIT_MAX_REGISTERS = 0
} CUjit_option;
typedef enum CUlibraryOption_enum {
        CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE = 0
} CUlibraryOption;
typedef enum CUexternalMemoryHandleType_enum {
        CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD = 1
} CUexternalMemoryHandleType;

typedef struct CUuuid_st {
        char bytes[16];
} CUuuid;

typedef struct CUipcMemHandle_st {
        char reserved[64];
} CUipcMemHandle;

typedef struct CUDA_ARRAY_DESCRIPTOR_st {
        size_t Width;
        size_t Height;
        CUarray_format Format;
        unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;

typedef struct CUDA_ARRAY_DESCRIPTOR_v1_st {
        unsigned int Width;
        unsigned int Height;
        CUarray_format Format;
        unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR_v1;

typedef struct CUDA_ARRAY3D_DESCRIPTOR_st {
        size_t Width;
        size_t Height;
        size_t Depth;
        CUarray_format Format;
        unsigned int NumChannels;
        unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

typedef struct CUDA_ARRAY3D_DESCRIPTOR_v1_st {
        unsigned int Width;
        unsigned int Height;
        unsigned int Depth;
        CUarray_format Format;
        unsigned int NumChannels;
        unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR_v1;

typedef struct CUmemLocation_st {
        CUmemLocationType type;
        int id;
} CUmemLocation;

typedef struct CUmemAllocationProp_st {
        CUmemAllocationType type;
        CUmemAllocationHandleType requestedHandleTypes;
        CUmemLocation location;
        void *win32HandleMetaData;
        struct {
                unsigned char compressionType;
                unsigned char gpuDirectRDMACapable;
                unsigned short usage;
                unsigned char reserved[4];
        } allocFlags;
} CUmemAllocationProp;

typedef struct CUmemPoolProps_st {
        CUmemAllocationType allocType;
        CUmemAllocationHandleType handleTypes;
        CUmemLocation location;
        void *win32SecurityAttributes;
        size_t maxSize;
        unsigned short usage;
        unsigned char reserved[54];
} CUmemPoolProps;

typedef struct CUDA_MEM_ALLOC_NODE_PARAMS_v1_st {
        CUmemPoolProps poolProps;
        const CUmemAccessDesc *accessDescs;
        size_t accessDescCount;
        size_t bytesize;
        CUdeviceptr dptr;
} CUDA_MEM_ALLOC_NODE_PARAMS;

typedef struct CUDA_EXTERNAL_MEMORY_HANDLE_DESC_st {
        CUexternalMemoryHandleType type;
        union {
                int fd;
                struct {
                        void *handle;
                        const void *name;
                } win32;
                const void *nvSciBufObject;
        } handle;
        unsigned long long size;
        unsigned int flags;
        unsigned int reserved[16];
} CUDA_EXTERNAL_MEMORY_HANDLE_DESC;

#endif /* !__cuda_cuda_h__ */

/* ---- the entry points (each ABI variant under its exported name) ---- */

CUresult cuArray3DCreate(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR_v1 *);
CUresult cuArray3DCreate_v2(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
CUresult cuArrayCreate(CUarray *, const CUDA_ARRAY_DESCRIPTOR_v1 *);
CUresult cuArrayCreate_v2(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
CUresult cuArrayDestroy(CUarray);
CUresult cuCtxCreate(CUcontext *, unsigned int, CUdevice);
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);
CUresult cuCtxCreate_v3(CUcontext *, CUexecAffinityParam *, int, unsigned int, CUdevice);
CUresult cuCtxCreate_v4(CUcontext *, CUctxCreateParams *, unsigned int, CUdevice);
CUresult cuCtxDestroy(CUcontext);
CUresult cuCtxDestroy_v2(CUcontext);
CUresult cuCtxFromGreenCtx(CUcontext *, CUgreenCtx);
CUresult cuCtxGetCurrent(CUcontext *);
CUresult cuCtxGetDevice(CUdevice *);
CUresult cuCtxGetLimit(size_t *, CUlimit);
CUresult cuCtxPopCurrent_v2(CUcontext *);
CUresult cuCtxPushCurrent_v2(CUcontext);
CUresult cuCtxSetLimit(CUlimit, size_t);
CUresult cuCtxSynchronize(void);
CUresult cuDestroyExternalMemory(CUexternalMemory);
CUresult cuDeviceGetAttribute(int *, CUdevice_attribute, CUdevice);
CUresult cuDeviceGetCount(int *);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *, CUdevice);
CUresult cuDeviceGetGraphMemAttribute(CUdevice, CUgraphMem_attribute, void *);
CUresult cuDeviceGetMemPool(CUmemoryPool *, CUdevice);
CUresult cuDeviceGetUuid(CUuuid *, CUdevice);
CUresult cuDeviceGetUuid_v2(CUuuid *, CUdevice);
CUresult cuDeviceGraphMemTrim(CUdevice);
CUresult cuDevicePrimaryCtxRelease(CUdevice);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice);
CUresult cuDevicePrimaryCtxReset(CUdevice);
CUresult cuDevicePrimaryCtxReset_v2(CUdevice);
CUresult cuDevicePrimaryCtxRetain(CUcontext *, CUdevice);
CUresult cuDeviceTotalMem(unsigned int *, CUdevice);
CUresult cuDeviceTotalMem_v2(size_t *, CUdevice);
CUresult cuGetProcAddress(const char *, void **, int, cuuint64_t);
CUresult cuGetProcAddress_v2(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode, CUgraph *);
CUresult cuGraphExecDestroy(CUgraphExec);
CUresult cuGraphGetNodes(CUgraph, CUgraphNode *, size_t *);
CUresult cuGraphInstantiate(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
CUresult cuGraphInstantiateWithFlags(CUgraphExec *, CUgraph, long long unsigned int);
CUresult cuGraphInstantiateWithParams(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *);
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *);
CUresult cuGraphInstantiate_v2(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
CUresult cuGraphLaunch(CUgraphExec, CUstream);
CUresult cuGraphLaunch_ptsz(CUgraphExec, CUstream);
CUresult cuGraphMemAllocNodeGetParams(CUgraphNode, CUDA_MEM_ALLOC_NODE_PARAMS *);
CUresult cuGraphNodeGetType(CUgraphNode, CUgraphNodeType *);
CUresult cuGreenCtxCreate(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned int);
CUresult cuGreenCtxDestroy(CUgreenCtx);
CUresult cuImportExternalMemory(CUexternalMemory *, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *);
CUresult cuInit(unsigned int);
CUresult cuIpcCloseMemHandle(CUdeviceptr);
CUresult cuIpcOpenMemHandle(CUdeviceptr *, CUipcMemHandle, unsigned int);
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *, CUipcMemHandle, unsigned int);
CUresult cuLaunch(CUfunction);
CUresult cuLaunchCooperativeKernel(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
                                   unsigned int, unsigned int, CUstream, void **);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                                        unsigned int, unsigned int, unsigned int, CUstream, void **);
CUresult cuLaunchGrid(CUfunction, int, int);
CUresult cuLaunchGridAsync(CUfunction, int, int, CUstream);
CUresult cuLaunchKernel(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
                        unsigned int, CUstream, void **, void **);
CUresult cuLaunchKernelEx(const CUlaunchConfig *, CUfunction, void **, void **);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *, CUfunction, void **, void **);
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,
                             unsigned int, unsigned int, CUstream, void **, void **);
CUresult cuLibraryLoadData(CUlibrary *, const void *, CUjit_option *, void **, unsigned int, CUlibraryOption *, void **,
                           unsigned int);
CUresult cuLibraryLoadFromFile(CUlibrary *, const char *, CUjit_option *, void **, unsigned int, CUlibraryOption *,
                               void **, unsigned int);
CUresult cuLibraryUnload(CUlibrary);
CUresult cuMemAlloc(CUdeviceptr_v1 *, unsigned int);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, CUstream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *, size_t, CUstream);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned int);
CUresult cuMemAllocPitch(CUdeviceptr_v1 *, unsigned int *, unsigned int, unsigned int, unsigned int);
CUresult cuMemAllocPitch_v2(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemCreate(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, long long unsigned int);
CUresult cuMemFree(CUdeviceptr_v1);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemGetAddressRange_v2(CUdeviceptr *, size_t *, CUdeviceptr);
CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *, CUmemGenericAllocationHandle);
CUresult cuMemGetInfo(unsigned int *, unsigned int *);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
CUresult cuMemMap(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, long long unsigned int);
CUresult cuMemPoolCreate(CUmemoryPool *, const CUmemPoolProps *);
CUresult cuMemPoolDestroy(CUmemoryPool);
CUresult cuMemPoolGetAttribute(CUmemoryPool, CUmemPool_attribute, void *);
CUresult cuMemPoolImportPointer(CUdeviceptr *, CUmemoryPool, CUmemPoolPtrExportData *);
CUresult cuMemPoolTrimTo(CUmemoryPool, size_t);
CUresult cuMemRelease(CUmemGenericAllocationHandle);
CUresult cuMemUnmap(CUdeviceptr, size_t);
CUresult cuMipmappedArrayCreate(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned int);
CUresult cuMipmappedArrayDestroy(CUmipmappedArray);
CUresult cuModuleLoad(CUmodule *, const char *);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleLoadDataEx(CUmodule *, const void *, unsigned int, CUjit_option *, void **);
CUresult cuModuleLoadFatBinary(CUmodule *, const void *);
CUresult cuModuleUnload(CUmodule);
CUresult cuStreamGetCtx(CUstream, CUcontext *);

/* ---- layout and values: hold for these definitions and, in cuda-abi-check.c, for cuda.h's ---- */

#define GS_ABI_LAYOUT(type, field, off) _Static_assert(offsetof(type, field) == (off), #type "." #field)
_Static_assert(sizeof(CUresult) == 4 && sizeof(CUdevice) == 4 && sizeof(CUdeviceptr) == 8 &&
                       sizeof(CUdeviceptr_v1) == 4 && sizeof(CUmemGenericAllocationHandle) == 8 &&
                       sizeof(cuuint64_t) == 8 && sizeof(CUlimit) == 4 && sizeof(CUarray_format) == 4,
               "CUDA scalar types");
_Static_assert(sizeof(CUuuid) == 16 && sizeof(CUipcMemHandle) == 64, "CUDA by-value structures");
_Static_assert(sizeof(CUDA_ARRAY_DESCRIPTOR) == 24 && sizeof(CUDA_ARRAY_DESCRIPTOR_v1) == 16, "array descriptors");
GS_ABI_LAYOUT(CUDA_ARRAY_DESCRIPTOR, Height, 8);
GS_ABI_LAYOUT(CUDA_ARRAY_DESCRIPTOR, Format, 16);
GS_ABI_LAYOUT(CUDA_ARRAY_DESCRIPTOR, NumChannels, 20);
GS_ABI_LAYOUT(CUDA_ARRAY_DESCRIPTOR_v1, Format, 8);
GS_ABI_LAYOUT(CUDA_ARRAY_DESCRIPTOR_v1, NumChannels, 12);
_Static_assert(sizeof(CUDA_ARRAY3D_DESCRIPTOR) == 40 && sizeof(CUDA_ARRAY3D_DESCRIPTOR_v1) == 24, "3D descriptors");
GS_ABI_LAYOUT(CUDA_ARRAY3D_DESCRIPTOR, Depth, 16);
GS_ABI_LAYOUT(CUDA_ARRAY3D_DESCRIPTOR, Format, 24);
GS_ABI_LAYOUT(CUDA_ARRAY3D_DESCRIPTOR, NumChannels, 28);
GS_ABI_LAYOUT(CUDA_ARRAY3D_DESCRIPTOR_v1, Depth, 8);
GS_ABI_LAYOUT(CUDA_ARRAY3D_DESCRIPTOR_v1, Format, 12);
GS_ABI_LAYOUT(CUDA_ARRAY3D_DESCRIPTOR_v1, NumChannels, 16);
_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp");
GS_ABI_LAYOUT(CUmemAllocationProp, location.type, 8);
GS_ABI_LAYOUT(CUmemAllocationProp, location.id, 12);
_Static_assert(sizeof(CUmemPoolProps) == 88, "CUmemPoolProps");
GS_ABI_LAYOUT(CUmemPoolProps, location.type, 8);
GS_ABI_LAYOUT(CUmemPoolProps, location.id, 12);
_Static_assert(sizeof(CUDA_MEM_ALLOC_NODE_PARAMS) == 120, "CUDA_MEM_ALLOC_NODE_PARAMS");
GS_ABI_LAYOUT(CUDA_MEM_ALLOC_NODE_PARAMS, poolProps.location.type, 8);
GS_ABI_LAYOUT(CUDA_MEM_ALLOC_NODE_PARAMS, poolProps.location.id, 12);
GS_ABI_LAYOUT(CUDA_MEM_ALLOC_NODE_PARAMS, bytesize, 104);
_Static_assert(sizeof(CUDA_EXTERNAL_MEMORY_HANDLE_DESC) == 104, "CUDA_EXTERNAL_MEMORY_HANDLE_DESC");
GS_ABI_LAYOUT(CUDA_EXTERNAL_MEMORY_HANDLE_DESC, size, 24);
_Static_assert(CUDA_SUCCESS == 0 && CUDA_ERROR_INVALID_VALUE == 1 && CUDA_ERROR_OUT_OF_MEMORY == 2 &&
                       CUDA_ERROR_NOT_INITIALIZED == 3 && CUDA_ERROR_NO_DEVICE == 100 && CUDA_ERROR_NOT_FOUND == 500,
               "CUresult values");
_Static_assert(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT == 16 &&
                       CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR == 39,
               "device attributes");
_Static_assert(CU_LIMIT_STACK_SIZE == 0 && CU_LIMIT_PRINTF_FIFO_SIZE == 1 && CU_LIMIT_MALLOC_HEAP_SIZE == 2, "limits");
_Static_assert(CU_AD_FORMAT_UNSIGNED_INT8 == 1 && CU_AD_FORMAT_UNSIGNED_INT16 == 2 && CU_AD_FORMAT_SIGNED_INT8 == 8 &&
                       CU_AD_FORMAT_SIGNED_INT16 == 9 && CU_AD_FORMAT_HALF == 0x10,
               "array formats");
_Static_assert(CU_MEM_LOCATION_TYPE_DEVICE == 1 && CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT == 5 &&
                       CU_MEMPOOL_ATTR_USED_MEM_CURRENT == 7 && CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT == 2,
               "memory attributes");
_Static_assert(CU_GRAPH_NODE_TYPE_GRAPH == 4 && CU_GRAPH_NODE_TYPE_MEM_ALLOC == 10, "graph node types");
_Static_assert(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM == 2 && CU_GET_PROC_ADDRESS_SUCCESS == 0,
               "cuGetProcAddress flags and results");
