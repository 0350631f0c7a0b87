/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml-abi — the subset of NVML's C ABI gpuslice uses, declared from docs/specs/nvml.md
 * (there is no nvml.h on the build machines). The simulator (sim/) implements exactly these
 * prototypes; the binding (src/nvml) resolves them with dlsym and keeps them type-checked with
 * __typeof__. One declaration of the ABI for both: if this is wrong, both are wrong together,
 * so the struct layouts are pinned with static assertions against the spec's byte offsets.
 */
#pragma once

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
        NVML_SUCCESS = 0,
        NVML_ERROR_UNINITIALIZED = 1,
        NVML_ERROR_INVALID_ARGUMENT = 2,
        NVML_ERROR_NOT_SUPPORTED = 3,
        NVML_ERROR_NO_PERMISSION = 4,
        NVML_ERROR_ALREADY_INITIALIZED = 5,
        NVML_ERROR_NOT_FOUND = 6,
        NVML_ERROR_INSUFFICIENT_SIZE = 7,
        NVML_ERROR_INSUFFICIENT_POWER = 8,
        NVML_ERROR_DRIVER_NOT_LOADED = 9,
        NVML_ERROR_TIMEOUT = 10,
        NVML_ERROR_IRQ_ISSUE = 11,
        NVML_ERROR_LIBRARY_NOT_FOUND = 12,
        NVML_ERROR_FUNCTION_NOT_FOUND = 13,
        NVML_ERROR_CORRUPTED_INFOROM = 14,
        NVML_ERROR_GPU_IS_LOST = 15,
        NVML_ERROR_RESET_REQUIRED = 16,
        NVML_ERROR_OPERATING_SYSTEM = 17,
        NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
        NVML_ERROR_IN_USE = 19,
        NVML_ERROR_MEMORY = 20,
        NVML_ERROR_NO_DATA = 21,
        NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
        NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
        NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
        NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
        NVML_ERROR_DEPRECATED = 26,
        NVML_ERROR_NOT_READY = 27,
        NVML_ERROR_GPU_NOT_FOUND = 28,
        NVML_ERROR_INVALID_STATE = 29,
        NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30,
        NVML_ERROR_UNKNOWN = 999,
} nvmlReturn_t;

typedef struct nvmlDevice_st *nvmlDevice_t;
/* nvmlBrandType_t: NVML_BRAND_UNKNOWN 0, QUADRO 1, TESLA 2, NVS 3, GRID 4, GEFORCE 5, TITAN 6,
 * NVIDIA_VAPPS 7, VPC 8, VCS 9, VWS 10, CLOUD_GAMING 11, QUADRO_RTX 12, NVIDIA_RTX 13, NVIDIA 14,
 * GEFORCE_RTX 15, TITAN_RTX 16 (names in src/compat: compat_brand_name). */
typedef int nvmlBrandType_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

typedef enum {
        NVML_TOPOLOGY_INTERNAL = 0,
        NVML_TOPOLOGY_SINGLE = 10,     /* PIX */
        NVML_TOPOLOGY_MULTIPLE = 20,   /* PXB */
        NVML_TOPOLOGY_HOSTBRIDGE = 30, /* PHB */
        NVML_TOPOLOGY_NODE = 40,
        NVML_TOPOLOGY_SYSTEM = 50, /* SYS */
} nvmlGpuTopologyLevel_t;

typedef enum {
        NVML_FEATURE_DISABLED = 0,
        NVML_FEATURE_ENABLED = 1,
} nvmlEnableState_t;

/* What is at the far end of an NVLink (nvmlDeviceGetNvLinkRemoteDeviceType, driver 460+). */
typedef enum {
        NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
        NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
        NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
        NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF,
} nvmlIntNvLinkDeviceType_t;

/* nvmlComputeMode_t: which contexts a GPU takes (nvmlDeviceSetComputeMode; CUDA's CUcomputemode, same values). */
typedef enum {
        NVML_COMPUTEMODE_DEFAULT = 0,           /* any number of contexts, of any processes */
        NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,  /* support removed */
        NVML_COMPUTEMODE_PROHIBITED = 2,        /* no context */
        NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3, /* one process's context at a time (MPS: the MPS server's) */
        NVML_COMPUTEMODE_COUNT = 4,
} nvmlComputeMode_t;

#define NVML_DEVICE_MIG_DISABLE 0
#define NVML_DEVICE_MIG_ENABLE 1

#define NVML_DEVICE_UUID_BUFFER_SIZE 80
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_BUFFER_SIZE 64
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_DEVICE_SERIAL_BUFFER_SIZE 30

#define nvmlEventTypeSingleBitEccError 0x0000000000000001ULL
#define nvmlEventTypeDoubleBitEccError 0x0000000000000002ULL
#define nvmlEventTypePState 0x0000000000000004ULL
#define nvmlEventTypeXidCriticalError 0x0000000000000008ULL
#define nvmlEventTypeClock 0x0000000000000010ULL

#define NVML_VALUE_NOT_AVAILABLE_ULL 0xFFFFFFFFFFFFFFFFULL
#define NVML_INVALID_INSTANCE_ID 0xFFFFFFFFu

/* P2P capability indices for nvmlDeviceGetP2PStatus */
#define NVML_P2P_CAPS_INDEX_READ 0
#define NVML_P2P_CAPS_INDEX_WRITE 1
#define NVML_P2P_CAPS_INDEX_NVLINK 2
#define NVML_P2P_CAPS_INDEX_ATOMICS 3
#define NVML_P2P_CAPS_INDEX_PCI 4
#define NVML_P2P_STATUS_OK 0

#define NVML_TEMPERATURE_GPU 0
#define NVML_AFFINITY_SCOPE_NODE 0

typedef struct {
        char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
        unsigned int domain;
        unsigned int bus;
        unsigned int device;
        unsigned int pciDeviceId;
        unsigned int pciSubSystemId;
        char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

typedef struct {
        unsigned long long total;
        unsigned long long free;
        unsigned long long used;
} nvmlMemory_t;

typedef struct {
        unsigned int version;
        unsigned long long total;
        unsigned long long reserved;
        unsigned long long free;
        unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

/* Layout used by the _v2 and _v3 process calls. */
typedef struct {
        unsigned int pid;
        unsigned long long usedGpuMemory;
        unsigned int gpuInstanceId;
        unsigned int computeInstanceId;
} nvmlProcessInfo_t;

/* Layout of the unversioned nvmlDeviceGetComputeRunningProcesses. */
typedef struct {
        unsigned int pid;
        unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct {
        unsigned int gpu;
        unsigned int memory;
} nvmlUtilization_t;

typedef struct {
        unsigned int pid;
        unsigned long long timeStamp;
        unsigned int smUtil;
        unsigned int memUtil;
        unsigned int encUtil;
        unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

typedef struct {
        nvmlDevice_t device;
        unsigned long long eventType;
        unsigned long long eventData;
        unsigned int gpuInstanceId;
        unsigned int computeInstanceId;
} nvmlEventData_t;

/* ---- MIG (Multi-Instance GPU): handles, profiles, placements, instances ---- */

typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st *nvmlComputeInstance_t;

/* nvmlDeviceGetGpuInstanceProfileInfo*'s `profile` argument: a slice shape, not the profile's id
 * (info.id, what nvidia-smi prints as "ID", is device specific: 19 for 1g.5gb on an A100). */
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE 0x0
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE 0x1
#define NVML_GPU_INSTANCE_PROFILE_3_SLICE 0x2
#define NVML_GPU_INSTANCE_PROFILE_4_SLICE 0x3
#define NVML_GPU_INSTANCE_PROFILE_7_SLICE 0x4
#define NVML_GPU_INSTANCE_PROFILE_8_SLICE 0x5
#define NVML_GPU_INSTANCE_PROFILE_6_SLICE 0x6
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 0x7 /* with a media engine: 1g.5gb+me */
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 0x8
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 0x9 /* twice the memory: 1g.10gb on an A100-40GB */
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX 0xA
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX 0xB
#define NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX 0xC
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME 0xD
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME 0xE
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME 0xF
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME 0x10
#define NVML_GPU_INSTANCE_PROFILE_COUNT 0x11

#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE 0x0
#define NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE 0x1
#define NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE 0x2
#define NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE 0x3
#define NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE 0x4
#define NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE 0x5
#define NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE 0x6
#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1 0x7
#define NVML_COMPUTE_INSTANCE_PROFILE_COUNT 0x8

#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED 0x0

/* The memory slices a GPU instance occupies: [start, start + size). */
typedef struct {
        unsigned int start;
        unsigned int size;
} nvmlGpuInstancePlacement_t;

/* The compute slices a compute instance occupies inside its GPU instance. */
typedef struct {
        unsigned int start;
        unsigned int size;
} nvmlComputeInstancePlacement_t;

typedef struct {
        unsigned int id; /* device-specific profile id (nvidia-smi's "ID") */
        unsigned int isP2pSupported;
        unsigned int sliceCount; /* compute slices */
        unsigned int instanceCount;
        unsigned int multiprocessorCount;
        unsigned int copyEngineCount;
        unsigned int decoderCount;
        unsigned int encoderCount;
        unsigned int jpegCount;
        unsigned int ofaCount;
        unsigned long long memorySizeMB; /* MiB */
} nvmlGpuInstanceProfileInfo_t;

typedef struct {
        unsigned int version; /* nvmlGpuInstanceProfileInfo_v2 */
        unsigned int id;
        unsigned int isP2pSupported;
        unsigned int sliceCount;
        unsigned int instanceCount;
        unsigned int multiprocessorCount;
        unsigned int copyEngineCount;
        unsigned int decoderCount;
        unsigned int encoderCount;
        unsigned int jpegCount;
        unsigned int ofaCount;
        unsigned long long memorySizeMB;
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE]; /* "MIG 1g.5gb" */
} nvmlGpuInstanceProfileInfo_v2_t;
#define nvmlGpuInstanceProfileInfo_v2 ((unsigned int)(sizeof(nvmlGpuInstanceProfileInfo_v2_t) | (2u << 24)))

typedef struct {
        nvmlDevice_t device; /* the parent GPU */
        unsigned int id;     /* GPU instance id */
        unsigned int profileId;
        nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct {
        unsigned int id;
        unsigned int sliceCount;
        unsigned int instanceCount;
        unsigned int multiprocessorCount;
        unsigned int sharedCopyEngineCount;
        unsigned int sharedDecoderCount;
        unsigned int sharedEncoderCount;
        unsigned int sharedJpegCount;
        unsigned int sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct {
        unsigned int version; /* nvmlComputeInstanceProfileInfo_v2 */
        unsigned int id;
        unsigned int sliceCount;
        unsigned int instanceCount;
        unsigned int multiprocessorCount;
        unsigned int sharedCopyEngineCount;
        unsigned int sharedDecoderCount;
        unsigned int sharedEncoderCount;
        unsigned int sharedJpegCount;
        unsigned int sharedOfaCount;
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE]; /* "MIG 1c.3g.20gb" */
} nvmlComputeInstanceProfileInfo_v2_t;
#define nvmlComputeInstanceProfileInfo_v2 ((unsigned int)(sizeof(nvmlComputeInstanceProfileInfo_v2_t) | (2u << 24)))

typedef struct {
        nvmlDevice_t device;
        nvmlGpuInstance_t gpuInstance;
        unsigned int id; /* compute instance id, unique within its GPU instance */
        unsigned int profileId;
        nvmlComputeInstancePlacement_t placement;
} nvmlComputeInstanceInfo_t;

/* What a MIG device handle offers (nvmlDeviceGetAttributes_v2 accepts MIG handles only). */
typedef struct {
        unsigned int multiprocessorCount;
        unsigned int sharedCopyEngineCount;
        unsigned int sharedDecoderCount;
        unsigned int sharedEncoderCount;
        unsigned int sharedJpegCount;
        unsigned int sharedOfaCount;
        unsigned int gpuInstanceSliceCount;
        unsigned int computeInstanceSliceCount;
        unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t is 68 bytes");
static_assert(offsetof(nvmlPciInfo_t, busId) == 36, "nvmlPciInfo_t.busId at 36");
static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t is 24 bytes");
static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t is 40 bytes");
static_assert(offsetof(nvmlMemory_v2_t, used) == 32, "nvmlMemory_v2_t.used at 32");
static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t is 24 bytes");
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "v1 process info is 16 bytes");
static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t is 8 bytes");
static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32, "process sample is 32 bytes");
static_assert(offsetof(nvmlProcessUtilizationSample_t, smUtil) == 16, "smUtil at 16");
static_assert(sizeof(nvmlEventData_t) == 32, "nvmlEventData_t is 32 bytes");
static_assert(sizeof(nvmlGpuInstancePlacement_t) == 8, "GI placement is 8 bytes");
static_assert(sizeof(nvmlGpuInstanceProfileInfo_t) == 48, "GI profile info v1 is 48 bytes");
static_assert(offsetof(nvmlGpuInstanceProfileInfo_t, memorySizeMB) == 40, "v1 memorySizeMB at 40");
static_assert(sizeof(nvmlGpuInstanceProfileInfo_v2_t) == 152, "GI profile info v2 is 152 bytes (0x02000098)");
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, memorySizeMB) == 48, "v2 memorySizeMB at 48");
static_assert(offsetof(nvmlGpuInstanceProfileInfo_v2_t, name) == 56, "v2 name at 56");
static_assert(nvmlGpuInstanceProfileInfo_v2 == 0x02000098u, "nvmlGpuInstanceProfileInfo_v2");
static_assert(sizeof(nvmlGpuInstanceInfo_t) == 24, "GI info is 24 bytes");
static_assert(sizeof(nvmlComputeInstanceProfileInfo_t) == 36, "CI profile info v1 is 36 bytes");
static_assert(sizeof(nvmlComputeInstanceProfileInfo_v2_t) == 136, "CI profile info v2 is 136 bytes (0x02000088)");
static_assert(nvmlComputeInstanceProfileInfo_v2 == 0x02000088u, "nvmlComputeInstanceProfileInfo_v2");
static_assert(sizeof(nvmlComputeInstanceInfo_t) == 32, "CI info (with placement, _v2 call) is 32 bytes");
static_assert(sizeof(nvmlDeviceAttributes_t) == 40, "device attributes are 40 bytes");
static_assert(offsetof(nvmlDeviceAttributes_t, memorySizeMB) == 32, "attributes memorySizeMB at 32");

/* X-macro: every NVML function gpuslice uses, once. X(name, return type, (parameters)).
 * The binding builds its typed function table from this list; the simulator implements it. */
#define NVML_ABI_FUNCTIONS(X)                                                                                          \
        X(nvmlInit_v2, nvmlReturn_t, (void))                                                                           \
        X(nvmlInitWithFlags, nvmlReturn_t, (unsigned int flags))                                                       \
        X(nvmlInit, nvmlReturn_t, (void))                                                                              \
        X(nvmlShutdown, nvmlReturn_t, (void))                                                                          \
        X(nvmlErrorString, const char *, (nvmlReturn_t result))                                                        \
        X(nvmlSystemGetDriverVersion, nvmlReturn_t, (char *version, unsigned int length))                              \
        X(nvmlSystemGetCudaDriverVersion_v2, nvmlReturn_t, (int *cudaDriverVersion))                                   \
        X(nvmlSystemGetCudaDriverVersion, nvmlReturn_t, (int *cudaDriverVersion))                                      \
        X(nvmlDeviceGetCount_v2, nvmlReturn_t, (unsigned int *deviceCount))                                            \
        X(nvmlDeviceGetCount, nvmlReturn_t, (unsigned int *deviceCount))                                               \
        X(nvmlDeviceGetHandleByIndex_v2, nvmlReturn_t, (unsigned int index, nvmlDevice_t *device))                     \
        X(nvmlDeviceGetHandleByIndex, nvmlReturn_t, (unsigned int index, nvmlDevice_t *device))                        \
        X(nvmlDeviceGetHandleByUUID, nvmlReturn_t, (const char *uuid, nvmlDevice_t *device))                           \
        X(nvmlDeviceGetHandleByPciBusId_v2, nvmlReturn_t, (const char *pciBusId, nvmlDevice_t *device))                \
        X(nvmlDeviceGetHandleByPciBusId, nvmlReturn_t, (const char *pciBusId, nvmlDevice_t *device))                   \
        X(nvmlDeviceGetHandleBySerial, nvmlReturn_t, (const char *serial, nvmlDevice_t *device))                       \
        X(nvmlDeviceGetUUID, nvmlReturn_t, (nvmlDevice_t device, char *uuid, unsigned int length))                     \
        X(nvmlDeviceGetName, nvmlReturn_t, (nvmlDevice_t device, char *name, unsigned int length))                     \
        X(nvmlDeviceGetSerial, nvmlReturn_t, (nvmlDevice_t device, char *serial, unsigned int length))                 \
        X(nvmlDeviceGetMemoryInfo, nvmlReturn_t, (nvmlDevice_t device, nvmlMemory_t * memory))                         \
        X(nvmlDeviceGetMemoryInfo_v2, nvmlReturn_t, (nvmlDevice_t device, nvmlMemory_v2_t * memory))                   \
        X(nvmlDeviceGetPciInfo_v3, nvmlReturn_t, (nvmlDevice_t device, nvmlPciInfo_t * pci))                           \
        X(nvmlDeviceGetMinorNumber, nvmlReturn_t, (nvmlDevice_t device, unsigned int *minorNumber))                    \
        X(nvmlDeviceGetIndex, nvmlReturn_t, (nvmlDevice_t device, unsigned int *index))                                \
        X(nvmlDeviceGetTopologyCommonAncestor, nvmlReturn_t,                                                           \
          (nvmlDevice_t device1, nvmlDevice_t device2, nvmlGpuTopologyLevel_t * pathInfo))                             \
        X(nvmlDeviceGetP2PStatus, nvmlReturn_t,                                                                        \
          (nvmlDevice_t device1, nvmlDevice_t device2, int p2pIndex, int *p2pStatus))                                  \
        X(nvmlDeviceGetNvLinkState, nvmlReturn_t,                                                                      \
          (nvmlDevice_t device, unsigned int link, nvmlEnableState_t *isActive))                                       \
        X(nvmlDeviceGetNvLinkRemotePciInfo_v2, nvmlReturn_t,                                                           \
          (nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci))                                                \
        X(nvmlDeviceGetNvLinkRemoteDeviceType, nvmlReturn_t,                                                           \
          (nvmlDevice_t device, unsigned int link, nvmlIntNvLinkDeviceType_t *pNvLinkDeviceType))                      \
        X(nvmlDeviceGetComputeRunningProcesses_v3, nvmlReturn_t,                                                       \
          (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos))                                    \
        X(nvmlDeviceGetComputeRunningProcesses_v2, nvmlReturn_t,                                                       \
          (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos))                                    \
        X(nvmlDeviceGetComputeRunningProcesses, nvmlReturn_t,                                                          \
          (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_v1_t *infos))                                 \
        X(nvmlDeviceGetUtilizationRates, nvmlReturn_t, (nvmlDevice_t device, nvmlUtilization_t * utilization))         \
        X(nvmlDeviceGetProcessUtilization, nvmlReturn_t,                                                               \
          (nvmlDevice_t device, nvmlProcessUtilizationSample_t * utilization, unsigned int *processSamplesCount,       \
           unsigned long long lastSeenTimeStamp))                                                                      \
        X(nvmlDeviceGetCpuAffinity, nvmlReturn_t,                                                                      \
          (nvmlDevice_t device, unsigned int cpuSetSize, unsigned long *cpuSet))                                       \
        X(nvmlDeviceGetMemoryAffinity, nvmlReturn_t,                                                                   \
          (nvmlDevice_t device, unsigned int nodeSetSize, unsigned long *nodeSet, unsigned int scope))                 \
        X(nvmlDeviceGetCudaComputeCapability, nvmlReturn_t, (nvmlDevice_t device, int *major, int *minor))             \
        X(nvmlDeviceGetBrand, nvmlReturn_t, (nvmlDevice_t device, nvmlBrandType_t * type))                             \
        X(nvmlDeviceGetMigMode, nvmlReturn_t,                                                                          \
          (nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode))                                 \
        X(nvmlDeviceSetMigMode, nvmlReturn_t,                                                                          \
          (nvmlDevice_t device, unsigned int mode, nvmlReturn_t *activationStatus))                                    \
        X(nvmlDeviceGetMaxMigDeviceCount, nvmlReturn_t, (nvmlDevice_t device, unsigned int *count))                    \
        X(nvmlDeviceGetMigDeviceHandleByIndex, nvmlReturn_t,                                                           \
          (nvmlDevice_t device, unsigned int index, nvmlDevice_t *migDevice))                                          \
        X(nvmlDeviceIsMigDeviceHandle, nvmlReturn_t, (nvmlDevice_t device, unsigned int *isMigDevice))                 \
        X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, nvmlReturn_t, (nvmlDevice_t migDevice, nvmlDevice_t * device)) \
        X(nvmlDeviceGetGpuInstanceId, nvmlReturn_t, (nvmlDevice_t device, unsigned int *id))                           \
        X(nvmlDeviceGetComputeInstanceId, nvmlReturn_t, (nvmlDevice_t device, unsigned int *id))                       \
        X(nvmlDeviceGetAttributes_v2, nvmlReturn_t, (nvmlDevice_t device, nvmlDeviceAttributes_t * attributes))        \
        X(nvmlDeviceGetGpuInstanceProfileInfo, nvmlReturn_t,                                                           \
          (nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_t *info))                             \
        X(nvmlDeviceGetGpuInstanceProfileInfoV, nvmlReturn_t,                                                          \
          (nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_v2_t *info))                          \
        X(nvmlDeviceGetGpuInstancePossiblePlacements_v2, nvmlReturn_t,                                                 \
          (nvmlDevice_t device, unsigned int profileId, nvmlGpuInstancePlacement_t *placements, unsigned int *count))  \
        X(nvmlDeviceGetGpuInstanceRemainingCapacity, nvmlReturn_t,                                                     \
          (nvmlDevice_t device, unsigned int profileId, unsigned int *count))                                          \
        X(nvmlDeviceCreateGpuInstance, nvmlReturn_t,                                                                   \
          (nvmlDevice_t device, unsigned int profileId, nvmlGpuInstance_t *gpuInstance))                               \
        X(nvmlDeviceCreateGpuInstanceWithPlacement, nvmlReturn_t,                                                      \
          (nvmlDevice_t device, unsigned int profileId, const nvmlGpuInstancePlacement_t *placement,                   \
           nvmlGpuInstance_t *gpuInstance))                                                                            \
        X(nvmlGpuInstanceDestroy, nvmlReturn_t, (nvmlGpuInstance_t gpuInstance))                                       \
        X(nvmlDeviceGetGpuInstances, nvmlReturn_t,                                                                     \
          (nvmlDevice_t device, unsigned int profileId, nvmlGpuInstance_t *gpuInstances, unsigned int *count))         \
        X(nvmlDeviceGetGpuInstanceById, nvmlReturn_t,                                                                  \
          (nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gpuInstance))                                      \
        X(nvmlGpuInstanceGetInfo, nvmlReturn_t, (nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t * info))         \
        X(nvmlGpuInstanceGetComputeInstanceProfileInfo, nvmlReturn_t,                                                  \
          (nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,                               \
           nvmlComputeInstanceProfileInfo_t *info))                                                                    \
        X(nvmlGpuInstanceGetComputeInstanceProfileInfoV, nvmlReturn_t,                                                 \
          (nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,                               \
           nvmlComputeInstanceProfileInfo_v2_t *info))                                                                 \
        X(nvmlGpuInstanceGetComputeInstanceRemainingCapacity, nvmlReturn_t,                                            \
          (nvmlGpuInstance_t gpuInstance, unsigned int profileId, unsigned int *count))                                \
        X(nvmlGpuInstanceGetComputeInstancePossiblePlacements, nvmlReturn_t,                                           \
          (nvmlGpuInstance_t gpuInstance, unsigned int profileId, nvmlComputeInstancePlacement_t *placements,          \
           unsigned int *count))                                                                                       \
        X(nvmlGpuInstanceCreateComputeInstance, nvmlReturn_t,                                                          \
          (nvmlGpuInstance_t gpuInstance, unsigned int profileId, nvmlComputeInstance_t *computeInstance))             \
        X(nvmlGpuInstanceCreateComputeInstanceWithPlacement, nvmlReturn_t,                                             \
          (nvmlGpuInstance_t gpuInstance, unsigned int profileId, const nvmlComputeInstancePlacement_t *placement,     \
           nvmlComputeInstance_t *computeInstance))                                                                    \
        X(nvmlComputeInstanceDestroy, nvmlReturn_t, (nvmlComputeInstance_t computeInstance))                           \
        X(nvmlGpuInstanceGetComputeInstances, nvmlReturn_t,                                                            \
          (nvmlGpuInstance_t gpuInstance, unsigned int profileId, nvmlComputeInstance_t *computeInstances,             \
           unsigned int *count))                                                                                       \
        X(nvmlGpuInstanceGetComputeInstanceById, nvmlReturn_t,                                                         \
          (nvmlGpuInstance_t gpuInstance, unsigned int id, nvmlComputeInstance_t *computeInstance))                    \
        X(nvmlComputeInstanceGetInfo_v2, nvmlReturn_t,                                                                 \
          (nvmlComputeInstance_t computeInstance, nvmlComputeInstanceInfo_t * info))                                   \
        X(nvmlDeviceGetSupportedEventTypes, nvmlReturn_t, (nvmlDevice_t device, unsigned long long *eventTypes))       \
        X(nvmlEventSetCreate, nvmlReturn_t, (nvmlEventSet_t * set))                                                    \
        X(nvmlEventSetFree, nvmlReturn_t, (nvmlEventSet_t set))                                                        \
        X(nvmlDeviceRegisterEvents, nvmlReturn_t,                                                                      \
          (nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set))                                    \
        X(nvmlEventSetWait_v2, nvmlReturn_t, (nvmlEventSet_t set, nvmlEventData_t * data, unsigned int timeoutms))     \
        X(nvmlDeviceGetTemperature, nvmlReturn_t, (nvmlDevice_t device, unsigned int sensorType, unsigned int *temp))  \
        X(nvmlDeviceGetPowerUsage, nvmlReturn_t, (nvmlDevice_t device, unsigned int *power))                           \
        X(nvmlDeviceGetEnforcedPowerLimit, nvmlReturn_t, (nvmlDevice_t device, unsigned int *limit))                   \
        X(nvmlDeviceGetComputeMode, nvmlReturn_t, (nvmlDevice_t device, nvmlComputeMode_t * mode))                     \
        X(nvmlDeviceSetComputeMode, nvmlReturn_t, (nvmlDevice_t device, nvmlComputeMode_t mode))

#define NVML_ABI_DECLARE(name, ret, params) ret name params;
NVML_ABI_FUNCTIONS(NVML_ABI_DECLARE)
#undef NVML_ABI_DECLARE
