/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake-nvml-old — an old driver's NVML: only unversioned symbols (nvmlInit, nvmlDeviceGetCount,
 * nvmlDeviceGetHandleByIndex, nvmlDeviceGetMemoryInfo, nvmlSystemGetCudaDriverVersion, the
 * 16-byte-layout nvmlDeviceGetComputeRunningProcesses) and no nvmlErrorString, so the binding's
 * fallbacks are the only way through. Two GPUs; GPU 1 answers NO_PERMISSION.
 */
#include <string.h>

#include "nvml/nvml-abi.h"

struct nvmlDevice_st {
        unsigned index;
};
static struct nvmlDevice_st gpus[2] = { { 0 }, { 1 } };
static int refs;

nvmlReturn_t nvmlInit(void) {
        refs++;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlShutdown(void) {
        if (refs == 0)
                return NVML_ERROR_UNINITIALIZED;
        refs--;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) {
        *v = 11040;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) {
        if (refs == 0)
                return NVML_ERROR_UNINITIALIZED;
        *count = 2;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
        if (index >= 2)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (index == 1)
                return NVML_ERROR_NO_PERMISSION;
        *device = &gpus[index];
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
        if (length < 41)
                return NVML_ERROR_INSUFFICIENT_SIZE;
        memcpy(uuid, "GPU-00000000-0000-0000-0000-00000000old", 40);
        uuid[39] = (char)('0' + device->index);
        uuid[40] = '\0';
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
        (void)device;
        memory->total = 12ULL << 30;
        memory->used = 3ULL << 30;
        memory->free = memory->total - memory->used;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                  nvmlProcessInfo_v1_t *infos) {
        (void)device;
        if (*infoCount < 2) {
                *infoCount = 2;
                return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        *infoCount = 2;
        infos[0] = (nvmlProcessInfo_v1_t){ .pid = 7, .usedGpuMemory = 7ULL << 20 };
        infos[1] = (nvmlProcessInfo_v1_t){ .pid = 8, .usedGpuMemory = 8ULL << 20 };
        return NVML_SUCCESS;
}
