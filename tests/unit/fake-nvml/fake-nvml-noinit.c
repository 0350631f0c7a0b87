/* SPDX-License-Identifier: Apache-2.0 */
/* fake-nvml-noinit — an "NVML" without any init function: loading it must fail cleanly (-ENOSYS). */
#include "nvml/nvml-abi.h"

nvmlReturn_t nvmlShutdown(void) {
        return NVML_SUCCESS;
}
const char *nvmlErrorString(nvmlReturn_t result) {
        return result == NVML_SUCCESS ? "Success" : "Unknown Error";
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount) {
        *deviceCount = 0;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
        (void)index;
        (void)device;
        return NVML_ERROR_INVALID_ARGUMENT;
}
