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

/* CUresult: every code of CUDA 13.0 (the simulated driver names each one). */
typedef enum cudaError_enum {
        CUDA_SUCCESS = 0,
        CUDA_ERROR_INVALID_VALUE = 1,
        CUDA_ERROR_OUT_OF_MEMORY = 2,
        CUDA_ERROR_NOT_INITIALIZED = 3,
        CUDA_ERROR_DEINITIALIZED = 4,
        CUDA_ERROR_PROFILER_DISABLED = 5,
        CUDA_ERROR_PROFILER_NOT_INITIALIZED = 6,
        CUDA_ERROR_PROFILER_ALREADY_STARTED = 7,
        CUDA_ERROR_PROFILER_ALREADY_STOPPED = 8,
        CUDA_ERROR_STUB_LIBRARY = 34,
        CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER = 36,
        CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
        CUDA_ERROR_NO_DEVICE = 100,
        CUDA_ERROR_INVALID_DEVICE = 101,
        CUDA_ERROR_DEVICE_NOT_LICENSED = 102,
        CUDA_ERROR_INVALID_IMAGE = 200,
        CUDA_ERROR_INVALID_CONTEXT = 201,
        CUDA_ERROR_CONTEXT_ALREADY_CURRENT = 202,
        CUDA_ERROR_MAP_FAILED = 205,
        CUDA_ERROR_UNMAP_FAILED = 206,
        CUDA_ERROR_ARRAY_IS_MAPPED = 207,
        CUDA_ERROR_ALREADY_MAPPED = 208,
        CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
        CUDA_ERROR_ALREADY_ACQUIRED = 210,
        CUDA_ERROR_NOT_MAPPED = 211,
        CUDA_ERROR_NOT_MAPPED_AS_ARRAY = 212,
        CUDA_ERROR_NOT_MAPPED_AS_POINTER = 213,
        CUDA_ERROR_ECC_UNCORRECTABLE = 214,
        CUDA_ERROR_UNSUPPORTED_LIMIT = 215,
        CUDA_ERROR_CONTEXT_ALREADY_IN_USE = 216,
        CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
        CUDA_ERROR_INVALID_PTX = 218,
        CUDA_ERROR_INVALID_GRAPHICS_CONTEXT = 219,
        CUDA_ERROR_NVLINK_UNCORRECTABLE = 220,
        CUDA_ERROR_JIT_COMPILER_NOT_FOUND = 221,
        CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
        CUDA_ERROR_JIT_COMPILATION_DISABLED = 223,
        CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY = 224,
        CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC = 225,
        CUDA_ERROR_CONTAINED = 226,
        CUDA_ERROR_INVALID_SOURCE = 300,
        CUDA_ERROR_FILE_NOT_FOUND = 301,
        CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND = 302,
        CUDA_ERROR_SHARED_OBJECT_INIT_FAILED = 303,
        CUDA_ERROR_OPERATING_SYSTEM = 304,
        CUDA_ERROR_INVALID_HANDLE = 400,
        CUDA_ERROR_ILLEGAL_STATE = 401,
        CUDA_ERROR_LOSSY_QUERY = 402,
        CUDA_ERROR_NOT_FOUND = 500,
        CUDA_ERROR_NOT_READY = 600,
        CUDA_ERROR_ILLEGAL_ADDRESS = 700,
        CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
        CUDA_ERROR_LAUNCH_TIMEOUT = 702,
        CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING = 703,
        CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
        CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705,
        CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE = 708,
        CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
        CUDA_ERROR_ASSERT = 710,
        CUDA_ERROR_TOO_MANY_PEERS = 711,
        CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
        CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
        CUDA_ERROR_HARDWARE_STACK_ERROR = 714,
        CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
        CUDA_ERROR_MISALIGNED_ADDRESS = 716,
        CUDA_ERROR_INVALID_ADDRESS_SPACE = 717,
        CUDA_ERROR_INVALID_PC = 718,
        CUDA_ERROR_LAUNCH_FAILED = 719,
        CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720,
        CUDA_ERROR_TENSOR_MEMORY_LEAK = 721,
        CUDA_ERROR_NOT_PERMITTED = 800,
        CUDA_ERROR_NOT_SUPPORTED = 801,
        CUDA_ERROR_SYSTEM_NOT_READY = 802,
        CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
        CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804,
        CUDA_ERROR_MPS_CONNECTION_FAILED = 805,
        CUDA_ERROR_MPS_RPC_FAILURE = 806,
        CUDA_ERROR_MPS_SERVER_NOT_READY = 807,
        CUDA_ERROR_MPS_MAX_CLIENTS_REACHED = 808,
        CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED = 809,
        CUDA_ERROR_MPS_CLIENT_TERMINATED = 810,
        CUDA_ERROR_CDP_NOT_SUPPORTED = 811,
        CUDA_ERROR_CDP_VERSION_MISMATCH = 812,
        CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
        CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
        CUDA_ERROR_STREAM_CAPTURE_MERGE = 902,
        CUDA_ERROR_STREAM_CAPTURE_UNMATCHED = 903,
        CUDA_ERROR_STREAM_CAPTURE_UNJOINED = 904,
        CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905,
        CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
        CUDA_ERROR_CAPTURED_EVENT = 907,
        CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908,
        CUDA_ERROR_TIMEOUT = 909,
        CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 910,
        CUDA_ERROR_EXTERNAL_DEVICE = 911,
        CUDA_ERROR_INVALID_CLUSTER_SIZE = 912,
        CUDA_ERROR_FUNCTION_NOT_LOADED = 913,
        CUDA_ERROR_INVALID_RESOURCE_TYPE = 914,
        CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION = 915,
        CUDA_ERROR_KEY_ROTATION = 916,
        CUDA_ERROR_UNKNOWN = 999,
} CUresult;

typedef uint64_t cuuint64_t;
typedef int CUdevice_v1;
typedef CUdevice_v1 CUdevice;
typedef unsigned long long CUdeviceptr_v2;
typedef CUdeviceptr_v2 CUdeviceptr;
typedef unsigned int CUdeviceptr_v1;
typedef unsigned long long CUmemGenericAllocationHandle;

/* Opaque handles. */
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUkern_st *CUkernel;
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
typedef struct CUctxCreateParams_st CUctxCreateParams;
typedef struct CUexecAffinityParam_st CUexecAffinityParam;
typedef struct CUDA_GRAPH_INSTANTIATE_PARAMS_st CUDA_GRAPH_INSTANTIATE_PARAMS;

typedef enum CUarray_format_enum {
        CU_AD_FORMAT_UNSIGNED_INT8 = 1,
        CU_AD_FORMAT_UNSIGNED_INT16 = 2,
        CU_AD_FORMAT_SIGNED_INT8 = 8,
        CU_AD_FORMAT_SIGNED_INT16 = 9,
        CU_AD_FORMAT_HALF = 16,
        CU_AD_FORMAT_FLOAT = 32,
        CU_AD_FORMAT_MAX = 0x7fffffff,
} CUarray_format;

typedef enum CUdevice_attribute_enum {
        CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
        CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
        CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
        CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
        CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
        CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
        CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
        CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY = 9,
        CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
        CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
        CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
        CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
        CU_DEVICE_ATTRIBUTE_COMPUTE_MODE = 20, /* a CUcomputemode */
        CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS = 31,
        CU_DEVICE_ATTRIBUTE_ECC_ENABLED = 32,
        CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
        CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
        CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
        CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
        CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
        CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
        CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT = 40,
        CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
        CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
        CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 83,
        CU_DEVICE_ATTRIBUTE_MAX = 148,
} CUdevice_attribute;

/* What contexts a device takes (NVML's nvmlComputeMode_t, the same values; 1, exclusive-thread, is gone). */
typedef enum CUcomputemode_enum {
        CU_COMPUTEMODE_DEFAULT = 0,           /* any number of contexts */
        CU_COMPUTEMODE_PROHIBITED = 2,        /* none */
        CU_COMPUTEMODE_EXCLUSIVE_PROCESS = 3, /* only one context used by a single process at a time */
} CUcomputemode;

typedef enum CUdriverProcAddressQueryResult_enum {
        CU_GET_PROC_ADDRESS_SUCCESS = 0,
        CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
        CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
} CUdriverProcAddressQueryResult;

typedef enum CUdriverProcAddress_flags_enum {
        CU_GET_PROC_ADDRESS_DEFAULT = 0,
        CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1,
        CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2,
} CUdriverProcAddress_flags;

typedef enum CUexternalMemoryHandleType_enum {
        CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD = 1,
} CUexternalMemoryHandleType;

typedef enum CUgraphMem_attribute_enum {
        CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT = 0,
        CU_GRAPH_MEM_ATTR_USED_MEM_HIGH = 1,
        CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT = 2,
        CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH = 3,
} CUgraphMem_attribute;

typedef enum CUgraphNodeType_enum {
        CU_GRAPH_NODE_TYPE_KERNEL = 0,
        CU_GRAPH_NODE_TYPE_GRAPH = 4,
        CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10,
        CU_GRAPH_NODE_TYPE_MEM_FREE = 11,
} CUgraphNodeType;

typedef enum CUipcMem_flags_enum {
        CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1,
} CUipcMem_flags;

typedef enum CUjit_option_enum {
        CU_JIT_MAX_REGISTERS = 0,
} CUjit_option;

typedef enum CUlaunchAttributeID_enum {
        CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
} CUlaunchAttributeID;

typedef enum CUlibraryOption_enum {
        CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE = 0,
} CUlibraryOption;

typedef enum CUlimit_enum {
        CU_LIMIT_STACK_SIZE = 0,
        CU_LIMIT_PRINTF_FIFO_SIZE = 1,
        CU_LIMIT_MALLOC_HEAP_SIZE = 2,
        CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT = 4,
        CU_LIMIT_MAX_L2_FETCH_GRANULARITY = 5,
        CU_LIMIT_MAX = 10,
} CUlimit;

typedef enum CUmemAllocationHandleType_enum {
        CU_MEM_HANDLE_TYPE_NONE = 0,
        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1,
        CU_MEM_HANDLE_TYPE_FABRIC = 8,
        CU_MEM_HANDLE_TYPE_MAX = 0x7fffffff,
} CUmemAllocationHandleType;

typedef enum CUmemAllocationType_enum {
        CU_MEM_ALLOCATION_TYPE_INVALID = 0,
        CU_MEM_ALLOCATION_TYPE_PINNED = 1,
        CU_MEM_ALLOCATION_TYPE_MAX = 0x7fffffff,
} CUmemAllocationType;

typedef enum CUmemAttach_flags_enum {
        CU_MEM_ATTACH_GLOBAL = 1,
        CU_MEM_ATTACH_HOST = 2,
} CUmemAttach_flags;

typedef enum CUmemLocationType_enum {
        CU_MEM_LOCATION_TYPE_INVALID = 0,
        CU_MEM_LOCATION_TYPE_DEVICE = 1,
        CU_MEM_LOCATION_TYPE_MAX = 0x7fffffff,
} CUmemLocationType;

typedef enum CUmemPool_attribute_enum {
        CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
        CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,
        CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,
        CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,
        CU_MEMPOOL_ATTR_USED_MEM_HIGH = 8,
} CUmemPool_attribute;

/* Stream capture (cuStreamBeginCapture_v2 / cuStreamIsCapturing) and the special stream handles. */
typedef enum CUstreamCaptureMode_enum {
        CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
        CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
        CU_STREAM_CAPTURE_MODE_RELAXED = 2,
} CUstreamCaptureMode;

typedef enum CUstreamCaptureStatus_enum {
        CU_STREAM_CAPTURE_STATUS_NONE = 0,
        CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
        CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
} CUstreamCaptureStatus;

#define CU_STREAM_LEGACY ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)

typedef enum CUmemAllocationGranularity_flags_enum {
        CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
        CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1,
} CUmemAllocationGranularity_flags;

typedef enum {
        CU_GREEN_CTX_DEFAULT_STREAM = 0x1,
} CUgreenCtxCreate_flags;

typedef enum {
        CU_DEV_RESOURCE_TYPE_INVALID = 0,
        CU_DEV_RESOURCE_TYPE_SM = 1,
} CUdevResourceType;

#define CUDA_EXTERNAL_MEMORY_DEDICATED 0x1
#define CU_IPC_HANDLE_SIZE 64

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

typedef enum CUmemAccess_flags_enum {
        CU_MEM_ACCESS_FLAGS_PROT_NONE = 0x0,
        CU_MEM_ACCESS_FLAGS_PROT_READ = 0x1,
        CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3,
        CU_MEM_ACCESS_FLAGS_PROT_MAX = 0x7FFFFFFF
} CUmemAccess_flags;

typedef struct CUmemAccessDesc_st {
        CUmemLocation location;
        CUmemAccess_flags flags;
} CUmemAccessDesc;

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

typedef struct CUmemFabricHandle_st {
        unsigned char data[CU_IPC_HANDLE_SIZE];
} CUmemFabricHandle;

typedef struct CUmemPoolPtrExportData_st {
        unsigned char reserved[64];
} CUmemPoolPtrExportData;

/* Of the launch attribute values only the one read here; the union is 64 bytes as in cuda.h. */
typedef union CUlaunchAttributeValue_union {
        char pad[64];
        int cooperative;
} CUlaunchAttributeValue;

typedef struct CUlaunchAttribute_st {
        CUlaunchAttributeID id;
        char pad[8 - sizeof(CUlaunchAttributeID)];
        CUlaunchAttributeValue value;
} CUlaunchAttribute;

typedef struct CUlaunchConfig_st {
        unsigned int gridDimX;
        unsigned int gridDimY;
        unsigned int gridDimZ;
        unsigned int blockDimX;
        unsigned int blockDimY;
        unsigned int blockDimZ;
        unsigned int sharedMemBytes;
        CUstream hStream;
        CUlaunchAttribute *attrs;
        unsigned int numAttrs;
} CUlaunchConfig;

typedef struct CUDA_KERNEL_NODE_PARAMS_st {
        CUfunction func;
        unsigned int gridDimX;
        unsigned int gridDimY;
        unsigned int gridDimZ;
        unsigned int blockDimX;
        unsigned int blockDimY;
        unsigned int blockDimZ;
        unsigned int sharedMemBytes;
        void **kernelParams;
        void **extra;
} CUDA_KERNEL_NODE_PARAMS_v1;

typedef struct CUDA_KERNEL_NODE_PARAMS_v2_st {
        CUfunction func;
        unsigned int gridDimX;
        unsigned int gridDimY;
        unsigned int gridDimZ;
        unsigned int blockDimX;
        unsigned int blockDimY;
        unsigned int blockDimZ;
        unsigned int sharedMemBytes;
        void **kernelParams;
        void **extra;
        CUkernel kern;
        CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS;

typedef struct CUdevSmResource_st {
        unsigned int smCount;
        unsigned int minSmPartitionSize;
        unsigned int smCoscheduledAlignment;
} CUdevSmResource;

typedef struct CUdevResource_st {
        CUdevResourceType type;
        unsigned char _internal_padding[92];
        union {
                CUdevSmResource sm;
                unsigned char _oversize[48];
        };
} CUdevResource;

#endif /* !__cuda_cuda_h__ */

/* ---- the entry points (each ABI variant under its exported name) ---- */

CUresult cuArray3DCreate(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR_v1 *);
CUresult cuArray3DCreate_v2(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
CUresult cuArrayCreate(CUarray *, const CUDA_ARRAY_DESCRIPTOR_v1 *);
CUresult cuArrayCreate_v2(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
CUresult cuArrayDestroy(CUarray);
CUresult cuCtxCreate(CUcontext *, unsigned int, CUdevice);
CUresult cuCtxDisablePeerAccess(CUcontext);
CUresult cuCtxEnablePeerAccess(CUcontext, unsigned int);
CUresult cuDeviceCanAccessPeer(int *, CUdevice, CUdevice);
CUresult cuMemSetAccess(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
CUresult cuCtxCreate_v2(CUcontext *, unsigned int, CUdevice);
CUresult cuCtxCreate_v3(CUcontext *, CUexecAffinityParam *, int, unsigned int, CUdevice);
CUresult cuCtxCreate_v4(CUcontext *, CUctxCreateParams *, unsigned int, CUdevice);
CUresult cuCtxDestroy(CUcontext);
CUresult cuCtxDestroy_v2(CUcontext);
CUresult cuCtxFromGreenCtx(CUcontext *, CUgreenCtx);
CUresult cuCtxGetCurrent(CUcontext *);
CUresult cuCtxGetDevice(CUdevice *);
CUresult cuCtxGetDevice_v2(CUdevice *, CUcontext);
CUresult cuCtxGetLimit(size_t *, CUlimit);
CUresult cuCtxPopCurrent_v2(CUcontext *);
CUresult cuCtxPushCurrent_v2(CUcontext);
CUresult cuCtxSetCurrent(CUcontext);
CUresult cuCtxSetLimit(CUlimit, size_t);
CUresult cuCtxSynchronize(void);
CUresult cuCtxSynchronize_v2(CUcontext);
CUresult cuDestroyExternalMemory(CUexternalMemory);
CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *, CUdevResource *, unsigned int);
CUresult cuDeviceGet(CUdevice *, int);
CUresult cuDeviceGetAttribute(int *, CUdevice_attribute, CUdevice);
CUresult cuDeviceGetCount(int *);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *, CUdevice);
CUresult cuDeviceGetDevResource(CUdevice, CUdevResource *, CUdevResourceType);
CUresult cuDeviceGetGraphMemAttribute(CUdevice, CUgraphMem_attribute, void *);
CUresult cuDeviceGetMemPool(CUmemoryPool *, CUdevice);
CUresult cuDeviceGetName(char *, int, CUdevice);
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
CUresult cuDriverGetVersion(int *);
CUresult cuGetErrorName(CUresult, const char **);
CUresult cuGetErrorString(CUresult, const char **);
CUresult cuGetExportTable(const void **, const CUuuid *);
CUresult cuGetProcAddress(const char *, void **, int, cuuint64_t);
CUresult cuGetProcAddress_v2(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
CUresult cuGraphAddKernelNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_KERNEL_NODE_PARAMS_v1 *);
CUresult cuGraphAddKernelNode_v2(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, const CUDA_KERNEL_NODE_PARAMS *);
CUresult cuGraphAddMemAllocNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUDA_MEM_ALLOC_NODE_PARAMS *);
CUresult cuGraphAddMemFreeNode(CUgraphNode *, CUgraph, const CUgraphNode *, size_t, CUdeviceptr);
CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode, CUgraph *);
CUresult cuGraphCreate(CUgraph *, unsigned int);
CUresult cuGraphDestroy(CUgraph);
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
CUresult cuGraphMemFreeNodeGetParams(CUgraphNode, CUdeviceptr *);
CUresult cuGraphNodeGetType(CUgraphNode, CUgraphNodeType *);
CUresult cuGreenCtxCreate(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned int);
CUresult cuGreenCtxDestroy(CUgreenCtx);
CUresult cuImportExternalMemory(CUexternalMemory *, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *);
CUresult cuInit(unsigned int);
CUresult cuIpcCloseMemHandle(CUdeviceptr);
CUresult cuIpcGetMemHandle(CUipcMemHandle *, CUdeviceptr);
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
CUresult cuMemAddressFree(CUdeviceptr, size_t);
CUresult cuMemAddressReserve(CUdeviceptr *, size_t, size_t, CUdeviceptr, long long unsigned int);
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
CUresult cuMemExportToShareableHandle(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                                      long long unsigned int);
CUresult cuMemFree(CUdeviceptr_v1);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemGetAddressRange(CUdeviceptr_v1 *, unsigned int *, CUdeviceptr_v1);
CUresult cuMemGetAddressRange_v2(CUdeviceptr *, size_t *, CUdeviceptr);
CUresult cuMemGetAllocationGranularity(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *, CUmemGenericAllocationHandle);
CUresult cuMemGetInfo(unsigned int *, unsigned int *);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
CUresult cuMemMap(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, long long unsigned int);
CUresult cuMemPoolCreate(CUmemoryPool *, const CUmemPoolProps *);
CUresult cuMemPoolDestroy(CUmemoryPool);
CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData *, CUdeviceptr);
CUresult cuMemPoolExportToShareableHandle(void *, CUmemoryPool, CUmemAllocationHandleType, long long unsigned int);
CUresult cuMemPoolGetAttribute(CUmemoryPool, CUmemPool_attribute, void *);
CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *, void *, CUmemAllocationHandleType, long long unsigned int);
CUresult cuMemPoolImportPointer(CUdeviceptr *, CUmemoryPool, CUmemPoolPtrExportData *);
CUresult cuMemPoolSetAttribute(CUmemoryPool, CUmemPool_attribute, void *);
CUresult cuMemPoolTrimTo(CUmemoryPool, size_t);
CUresult cuMemRelease(CUmemGenericAllocationHandle);
CUresult cuMemUnmap(CUdeviceptr, size_t);
CUresult cuMipmappedArrayCreate(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned int);
CUresult cuMipmappedArrayDestroy(CUmipmappedArray);
CUresult cuModuleGetFunction(CUfunction *, CUmodule, const char *);
CUresult cuModuleLoad(CUmodule *, const char *);
CUresult cuModuleLoadData(CUmodule *, const void *);
CUresult cuModuleLoadDataEx(CUmodule *, const void *, unsigned int, CUjit_option *, void **);
CUresult cuModuleLoadFatBinary(CUmodule *, const void *);
CUresult cuModuleUnload(CUmodule);
CUresult cuStreamCreate(CUstream *, unsigned int);
CUresult cuStreamDestroy(CUstream);
CUresult cuStreamDestroy_v2(CUstream);
CUresult cuStreamGetCtx(CUstream, CUcontext *);
CUresult cuStreamGetDevice(CUstream, CUdevice *);
CUresult cuStreamBeginCapture_v2(CUstream, CUstreamCaptureMode);
CUresult cuStreamEndCapture(CUstream, CUgraph *);
CUresult cuStreamIsCapturing(CUstream, CUstreamCaptureStatus *);
CUresult cuStreamSynchronize(CUstream);
CUresult cuStreamSynchronize_ptsz(CUstream);

/* ---- the PFN types of cudaTypedefs.h that the simulator and the test programs use (a typedef may be
 * repeated with the same type: where cudaTypedefs.h is included first, a different one does not compile) */

typedef CUresult (*PFN_cuCtxCreate_v3020)(CUcontext *pctx, unsigned int flags, CUdevice_v1 dev);
typedef CUresult (*PFN_cuCtxDestroy_v4000)(CUcontext ctx);
typedef CUresult (*PFN_cuCtxGetCurrent_v4000)(CUcontext *pctx);
typedef CUresult (*PFN_cuCtxGetLimit_v3010)(size_t *pvalue, CUlimit limit);
typedef CUresult (*PFN_cuCtxSetCurrent_v4000)(CUcontext ctx);
typedef CUresult (*PFN_cuCtxSetLimit_v3010)(CUlimit limit, size_t value);
typedef CUresult (*PFN_cuDeviceGetAttribute_v2000)(int *pi, CUdevice_attribute attrib, CUdevice_v1 dev);
typedef CUresult (*PFN_cuDeviceGetCount_v2000)(int *count);
typedef CUresult (*PFN_cuDeviceGetName_v2000)(char *name, int len, CUdevice_v1 dev);
typedef CUresult (*PFN_cuDeviceGetUuid_v11040)(CUuuid *uuid, CUdevice_v1 dev);
typedef CUresult (*PFN_cuDeviceGet_v2000)(CUdevice_v1 *device, int ordinal);
typedef CUresult (*PFN_cuDevicePrimaryCtxRelease_v11000)(CUdevice_v1 dev);
typedef CUresult (*PFN_cuDevicePrimaryCtxRetain_v7000)(CUcontext *pctx, CUdevice_v1 dev);
typedef CUresult (*PFN_cuDeviceTotalMem_v2000)(unsigned int *bytes, CUdevice_v1 dev);
typedef CUresult (*PFN_cuDeviceTotalMem_v3020)(size_t *bytes, CUdevice_v1 dev);
typedef CUresult (*PFN_cuDriverGetVersion_v2020)(int *driverVersion);
typedef CUresult (*PFN_cuGetErrorName_v6000)(CUresult error, const char **pStr);
typedef CUresult (*PFN_cuGetErrorString_v6000)(CUresult error, const char **pStr);
typedef CUresult (*PFN_cuGetProcAddress_v11030)(const char *symbol, void **pfn, int driverVersion, cuuint64_t flags);
typedef CUresult (*PFN_cuGetProcAddress_v12000)(const char *symbol, void **pfn, int driverVersion, cuuint64_t flags,
                                                CUdriverProcAddressQueryResult *symbolFound);
typedef CUresult (*PFN_cuInit_v2000)(unsigned int Flags);
typedef CUresult (*PFN_cuLibraryLoadData_v12000)(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                                 void **jitOptionsValues, unsigned int numJitOptions,
                                                 CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                                 unsigned int numLibraryOptions);
typedef CUresult (*PFN_cuLibraryUnload_v12000)(CUlibrary library);
typedef CUresult (*PFN_cuMemAlloc_v2000)(CUdeviceptr_v1 *dptr, unsigned int bytesize);
typedef CUresult (*PFN_cuMemAlloc_v3020)(CUdeviceptr_v2 *dptr, size_t bytesize);
typedef CUresult (*PFN_cuMemFree_v2000)(CUdeviceptr_v1 dptr);
typedef CUresult (*PFN_cuMemFree_v3020)(CUdeviceptr_v2 dptr);
typedef CUresult (*PFN_cuMemGetInfo_v3020)(size_t *free, size_t *total);
typedef CUresult (*PFN_cuModuleLoadData_v2000)(CUmodule *module, const void *image);
typedef CUresult (*PFN_cuModuleUnload_v2000)(CUmodule hmod);

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
GS_ABI_LAYOUT(CUmemAccessDesc, flags, 8);
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
_Static_assert(sizeof(CUlaunchAttribute) == 72 && sizeof(CUlaunchAttributeValue) == 64, "launch attributes");
GS_ABI_LAYOUT(CUlaunchAttribute, value, 8);
_Static_assert(sizeof(CUlaunchConfig) == 56, "CUlaunchConfig");
GS_ABI_LAYOUT(CUlaunchConfig, hStream, 32);
GS_ABI_LAYOUT(CUlaunchConfig, attrs, 40);
GS_ABI_LAYOUT(CUlaunchConfig, numAttrs, 48);
_Static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS) == 72 && sizeof(CUDA_KERNEL_NODE_PARAMS_v1) == 56, "kernel node params");
GS_ABI_LAYOUT(CUDA_KERNEL_NODE_PARAMS, kernelParams, 40);
GS_ABI_LAYOUT(CUDA_KERNEL_NODE_PARAMS, extra, 48);
GS_ABI_LAYOUT(CUDA_KERNEL_NODE_PARAMS, kern, 56);
GS_ABI_LAYOUT(CUDA_KERNEL_NODE_PARAMS, ctx, 64);
_Static_assert(sizeof(CUdevResource) == 144 && sizeof(CUdevSmResource) == 12, "CUdevResource");
GS_ABI_LAYOUT(CUdevResource, sm, 96);
_Static_assert(sizeof(CUmemFabricHandle) == 64 && sizeof(CUmemPoolPtrExportData) == 64, "export handles");
