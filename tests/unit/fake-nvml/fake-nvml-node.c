/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fake-nvml-node — a small, fixed NVML node for the binding's unit tests: every current symbol,
 * answers the tests can predict exactly, and faults on demand (fake-nvml.h).
 *
 *   GPU  bus id             topology              NVLinks
 *   0    00000000:1A:00.0   PIX with 1            links 0,1 → GPU1; link 2 down; links 3-5 → NVSwitch
 *   1    00000000:1B:00.0   SYS with 2,3          links 0,1 → GPU0 (remote given as "0000:1a:00.0");
 *                                                links 2,3 → GPU4 (lost: its bus id is unknown to
 *                                                the binding, yet it is a GPU, not a switch)
 *   2    00000000:3D:00.0   PXB with 3            40 links, only 38,39 up → NVSwitch (past 36!)
 *   3    00000000:3E:00.0                         NVLink not supported
 *   4    00000000:5A:00.0   every query: GPU_IS_LOST
 *   5    00000000:5B:00.0   handle: NO_PERMISSION
 *
 * NUMA: GPU0,1 node 0 by nvmlDeviceGetMemoryAffinity; GPU2 NOT_SUPPORTED (sysfs fallback);
 * GPU3 an empty node set (sysfs fallback). Test-only: never shipped.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "fake-nvml.h"
#include "nvml/nvml-abi.h"

#define N_GPUS 6u

struct nvmlDevice_st {
        unsigned index;
};
struct nvmlEventSet_st {
        unsigned long long registered[N_GPUS];
};

static struct nvmlDevice_st gpus[N_GPUS] = { { 0 }, { 1 }, { 2 }, { 3 }, { 4 }, { 5 } };
static const char *const bus_ids[N_GPUS] = {
        "00000000:1A:00.0", "00000000:1B:00.0", "00000000:3D:00.0",
        "00000000:3E:00.0", "00000000:5A:00.0", "00000000:5B:00.0",
};
#define SWITCH_BUS_ID "00000000:C1:00.0"
#define GPU_PCI_ID 0x20B010DEu    /* A100-SXM4 */
#define SWITCH_PCI_ID 0x1AF110DEu /* NVSwitch */
#define NPU_BUS_ID "00000000:04:00.0"
#define NPU_PCI_ID 0x04EA1014u /* IBM POWER9 NVLink processing unit */

static int refs;
static int handle_fault[N_GPUS];
static int query_fault[N_GPUS];

#define MAX_EVENTS 16
static struct {
        unsigned gpu;
        unsigned long long type, data;
} events[MAX_EVENTS];
static unsigned n_events;
static struct nvmlEventSet_st the_set;
static int set_live;

static nvmlComputeMode_t compute_mode[N_GPUS];

void fake_nvml_reset(void) {
        memset(compute_mode, 0, sizeof(compute_mode));
        memset(handle_fault, 0, sizeof(handle_fault));
        memset(query_fault, 0, sizeof(query_fault));
        query_fault[4] = NVML_ERROR_GPU_IS_LOST;
        handle_fault[5] = NVML_ERROR_NO_PERMISSION;
        n_events = 0;
}

int fake_nvml_init_count(void) {
        return refs;
}

void fake_nvml_set_fault(unsigned gpu, int handle_code, int query_code) {
        if (gpu < N_GPUS) {
                handle_fault[gpu] = handle_code;
                query_fault[gpu] = query_code;
        }
}

void fake_nvml_push_event(unsigned gpu, unsigned long long type, unsigned long long data) {
        if (n_events < MAX_EVENTS)
                events[n_events++] = (__typeof__(events[0])){ gpu, type, data };
}

__attribute__((constructor)) static void fake_init(void) {
        fake_nvml_reset();
}

/* Every device query starts here: uninitialized, bad handle, injected fault. */
#define CHECK_DEV(d)                                                  \
        do {                                                          \
                if (refs == 0)                                        \
                        return NVML_ERROR_UNINITIALIZED;              \
                if (!(d) || (d) < gpus || (d) >= gpus + N_GPUS)       \
                        return NVML_ERROR_INVALID_ARGUMENT;           \
                if (query_fault[(d)->index] != NVML_SUCCESS)          \
                        return (nvmlReturn_t)query_fault[(d)->index]; \
        } while (0)

nvmlReturn_t nvmlInit_v2(void) {
        refs++;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlInit(void) {
        return nvmlInit_v2();
}
nvmlReturn_t nvmlShutdown(void) {
        if (refs == 0)
                return NVML_ERROR_UNINITIALIZED;
        refs--;
        return NVML_SUCCESS;
}
const char *nvmlErrorString(nvmlReturn_t r) {
        switch (r) {
                case NVML_SUCCESS: return "Success";
                case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
                case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
                case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
                case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
                default: return "Unknown Error";
        }
}
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
        snprintf(version, length, "535.104.05");
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) {
        *v = 12020;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
        if (refs == 0)
                return NVML_ERROR_UNINITIALIZED;
        *count = N_GPUS;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
        if (refs == 0)
                return NVML_ERROR_UNINITIALIZED;
        if (index >= N_GPUS)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (handle_fault[index] != NVML_SUCCESS)
                return (nvmlReturn_t)handle_fault[index];
        *device = &gpus[index];
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
        for (unsigned i = 0; i < N_GPUS; i++) {
                char u[64];
                snprintf(u, sizeof(u), "GPU-fake-%u", i);
                if (strcmp(u, uuid) == 0) {
                        *device = &gpus[i];
                        return NVML_SUCCESS;
                }
        }
        return NVML_ERROR_NOT_FOUND;
}
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *index) {
        CHECK_DEV(d);
        *index = d->index;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length) {
        CHECK_DEV(d);
        snprintf(uuid, length, "GPU-fake-%u", d->index);
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length) {
        CHECK_DEV(d);
        snprintf(name, length, "Fake A100-SXM4-40GB");
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
        CHECK_DEV(d);
        if (m->version != nvmlMemory_v2)
                return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        m->total = 40ULL << 30;
        m->reserved = 1ULL << 28;
        m->used = (unsigned long long)(d->index + 1) << 30;
        m->free = m->total - m->reserved - m->used;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
        (void)d;
        (void)m;
        return NVML_ERROR_UNKNOWN; /* the binding must prefer _v2 */
}
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci) {
        CHECK_DEV(d);
        memset(pci, 0, sizeof(*pci));
        snprintf(pci->busId, sizeof(pci->busId), "%s", bus_ids[d->index]);
        snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%s", bus_ids[d->index] + 4);
        pci->pciDeviceId = GPU_PCI_ID;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int *minor) {
        CHECK_DEV(d);
        *minor = 10 + d->index;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, nvmlGpuTopologyLevel_t *l) {
        CHECK_DEV(a);
        CHECK_DEV(b);
        unsigned x = a->index < b->index ? a->index : b->index;
        unsigned y = a->index < b->index ? b->index : a->index;
        if (x == y)
                *l = NVML_TOPOLOGY_INTERNAL;
        else if (x == 0 && y == 1)
                *l = NVML_TOPOLOGY_SINGLE;
        else if (x == 2 && y == 3)
                *l = NVML_TOPOLOGY_MULTIPLE;
        else
                *l = NVML_TOPOLOGY_SYSTEM;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, nvmlEnableState_t *active) {
        CHECK_DEV(d);
        unsigned n_links = d->index == 0 ? 6 : d->index == 1 ? 6 : d->index == 2 ? 40 : 0;
        if (n_links == 0)
                return NVML_ERROR_NOT_SUPPORTED;
        if (link >= n_links)
                return NVML_ERROR_INVALID_ARGUMENT;
        bool up = (d->index == 0 && link != 2) || d->index == 1 || (d->index == 2 && link >= 38);
        *active = up ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned int link, nvmlPciInfo_t *pci) {
        CHECK_DEV(d);
        memset(pci, 0, sizeof(*pci));
        const char *remote;
        pci->pciDeviceId = GPU_PCI_ID;
        if (d->index == 0 && link < 2)
                remote = bus_ids[1];
        else if (d->index == 1 && link < 2)
                remote = "0000:1a:00.0"; /* legacy form, lower case: must still match GPU0 */
        else if (d->index == 1 && link < 4)
                remote = bus_ids[4];
        else if (d->index == 1) {
                remote = NPU_BUS_ID; /* links 4, 5: the CPU of a POWER9 host, neither GPU nor switch */
                pci->pciDeviceId = NPU_PCI_ID;
        } else {
                remote = SWITCH_BUS_ID;
                pci->pciDeviceId = SWITCH_PCI_ID;
        }
        snprintf(pci->busId, sizeof(pci->busId), "%s", remote);
        return NVML_SUCCESS;
}
#ifndef FAKE_NO_REMOTE_DEVICE_TYPE
/* Driver 460+. GPU 2's link 39 cannot tell (the binding then falls back to the bus id). */
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t d, unsigned int link, nvmlIntNvLinkDeviceType_t *type) {
        CHECK_DEV(d);
        if (d->index == 2 && link == 39)
                return NVML_ERROR_UNKNOWN;
        if (d->index == 0)
                *type = link < 2 ? NVML_NVLINK_DEVICE_TYPE_GPU : NVML_NVLINK_DEVICE_TYPE_SWITCH;
        else if (d->index == 1)
                *type = link < 4 ? NVML_NVLINK_DEVICE_TYPE_GPU : NVML_NVLINK_DEVICE_TYPE_IBMNPU;
        else
                *type = NVML_NVLINK_DEVICE_TYPE_SWITCH;
        return NVML_SUCCESS;
}
#endif

nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t d, unsigned int n, unsigned long *set, unsigned int scope) {
        CHECK_DEV(d);
        if (scope != NVML_AFFINITY_SCOPE_NODE || n == 0)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (d->index == 2)
                return NVML_ERROR_NOT_SUPPORTED;
        memset(set, 0, n * sizeof(*set));
        if (d->index < 2)
                set[0] = 1UL; /* node 0 */
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t d, unsigned int n, unsigned long *set) {
        CHECK_DEV(d);
        if (n < 2)
                return NVML_ERROR_INSUFFICIENT_SIZE;
        memset(set, 0, n * sizeof(*set));
        if (d->index < 2) {
                set[0] = 0x3FFUL | (0x3FFUL << 20); /* 0-9,20-29 */
        } else {
                set[0] = (0x3FFUL << 10) | (0x3FFUL << 30); /* 10-19,30-39 */
                if (d->index == 3)
                        set[1] = 0x3UL; /* 64-65 */
        }
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *cur, unsigned int *pending) {
        CHECK_DEV(d);
        if (d->index == 0)
                return NVML_ERROR_NOT_SUPPORTED;
        *cur = *pending = d->index == 1 ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor) {
        CHECK_DEV(d);
        *major = 8;
        *minor = 0;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *limit) {
        CHECK_DEV(d);
        *limit = 400000;
        return NVML_SUCCESS;
}

/* Processes: GPU0 has 3; GPU1 claims 2 at the size query, then 20 appear before the fetch;
 * the others none. */
static unsigned gpu1_calls;
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count, nvmlProcessInfo_t *infos) {
        CHECK_DEV(d);
        unsigned have = 0;
        if (d->index == 0)
                have = 3;
        else if (d->index == 1)
                have = gpu1_calls++ == 0 ? 2 : 20;
        if (have == 0) {
                *count = 0;
                return NVML_SUCCESS;
        }
        if (!infos || *count < have) {
                *count = have;
                return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        for (unsigned i = 0; i < have; i++)
                infos[i] = (nvmlProcessInfo_t){ .pid = 100 + i,
                                                .usedGpuMemory = (100ULL + i) << 20,
                                                .gpuInstanceId = NVML_INVALID_INSTANCE_ID,
                                                .computeInstanceId = NVML_INVALID_INSTANCE_ID };
        *count = have;
        if (d->index == 1)
                gpu1_calls = 0;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
        CHECK_DEV(d);
        u->gpu = 42;
        u->memory = 17;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d, nvmlProcessUtilizationSample_t *buf, unsigned int *count,
                                             unsigned long long last) {
        CHECK_DEV(d);
        static const nvmlProcessUtilizationSample_t samples[] = {
                { .pid = 100, .timeStamp = 1000, .smUtil = 30, .memUtil = 10, .encUtil = 0, .decUtil = 1 },
                { .pid = 101, .timeStamp = 2000, .smUtil = 60, .memUtil = 20, .encUtil = 2, .decUtil = 3 },
        };
        unsigned newer = 0;
        for (unsigned i = 0; i < 2; i++)
                if (samples[i].timeStamp > last)
                        newer++;
        if (newer == 0)
                return NVML_ERROR_NOT_FOUND;
        if (!buf || *count < newer) {
                *count = newer;
                return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        unsigned k = 0;
        for (unsigned i = 0; i < 2; i++)
                if (samples[i].timeStamp > last)
                        buf[k++] = samples[i];
        *count = k;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, unsigned int sensor, unsigned int *t) {
        CHECK_DEV(d);
        if (sensor != NVML_TEMPERATURE_GPU)
                return NVML_ERROR_INVALID_ARGUMENT;
        *t = 55;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw) {
        CHECK_DEV(d);
        *mw = 123456;
        return NVML_SUCCESS;
}

/* Compute mode: every GPU DEFAULT after a reset; setting GPU3's answers NO_PERMISSION (as to a caller that is
 * not root). */
nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t d, nvmlComputeMode_t *mode) {
        CHECK_DEV(d);
        *mode = compute_mode[d->index];
        return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceSetComputeMode(nvmlDevice_t d, nvmlComputeMode_t mode) {
        CHECK_DEV(d);
        if ((unsigned)mode >= NVML_COMPUTEMODE_COUNT)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (d->index == 3)
                return NVML_ERROR_NO_PERMISSION;
        compute_mode[d->index] = mode;
        return NVML_SUCCESS;
}

/* Events: GPU2 supports only PState, the others Xid and ECC. */
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t d, unsigned long long *types) {
        CHECK_DEV(d);
        *types = d->index == 2 ? nvmlEventTypePState
                               : nvmlEventTypeXidCriticalError | nvmlEventTypeDoubleBitEccError |
                                         nvmlEventTypeSingleBitEccError;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
        if (refs == 0)
                return NVML_ERROR_UNINITIALIZED;
        if (set_live)
                return NVML_ERROR_IN_USE; /* one set at a time is all the tests need */
        memset(&the_set, 0, sizeof(the_set));
        set_live = 1;
        *set = &the_set;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
        if (set != &the_set || !set_live)
                return NVML_ERROR_INVALID_ARGUMENT;
        set_live = 0;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t set) {
        CHECK_DEV(d);
        unsigned long long supported = 0;
        nvmlDeviceGetSupportedEventTypes(d, &supported);
        if (set != &the_set || (types & ~supported))
                return NVML_ERROR_NOT_SUPPORTED; /* real NVML refuses unsupported bits */
        set->registered[d->index] |= types;
        return NVML_SUCCESS;
}
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
        (void)timeoutms; /* never sleeps: tests must not depend on the clock */
        if (set != &the_set || !set_live)
                return NVML_ERROR_INVALID_ARGUMENT;
        while (n_events > 0) {
                __typeof__(events[0]) ev = events[0];
                memmove(events, events + 1, (n_events - 1) * sizeof(events[0]));
                n_events--;
                if (ev.gpu < N_GPUS && (set->registered[ev.gpu] & ev.type)) {
                        *data = (nvmlEventData_t){ .device = &gpus[ev.gpu],
                                                   .eventType = ev.type,
                                                   .eventData = ev.data,
                                                   .gpuInstanceId = NVML_INVALID_INSTANCE_ID,
                                                   .computeInstanceId = NVML_INVALID_INSTANCE_ID };
                        return NVML_SUCCESS;
                }
        }
        return NVML_ERROR_TIMEOUT;
}
