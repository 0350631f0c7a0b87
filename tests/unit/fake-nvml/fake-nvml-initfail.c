/* SPDX-License-Identifier: Apache-2.0 */
/* fake-nvml-initfail — the driver is not loaded: nvmlInit_v2 says so, and NVML's text must reach
 * the caller. With FAKE_NO_SHUTDOWN it also lacks nvmlShutdown (a required symbol). */
#include "nvml/nvml-abi.h"

nvmlReturn_t nvmlInit_v2(void) {
        return NVML_ERROR_DRIVER_NOT_LOADED;
}
#ifndef FAKE_NO_SHUTDOWN
nvmlReturn_t nvmlShutdown(void) {
        return NVML_ERROR_UNINITIALIZED;
}
#endif
const char *nvmlErrorString(nvmlReturn_t result) {
        switch (result) {
                case NVML_SUCCESS: return "Success";
                case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
                default: return "Unknown Error";
        }
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount) {
        (void)deviceCount;
        return NVML_ERROR_UNINITIALIZED;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
        (void)index;
        (void)device;
        return NVML_ERROR_UNINITIALIZED;
}
