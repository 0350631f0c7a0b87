/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml — the simulated libnvidia-ml.so.1: every function of NVML_ABI_FUNCTIONS (src/nvml/nvml-abi.h)
 * with NVML's documented semantics, answering from the node description ($GPUSLICE_SIM_NODE) and
 * the shared node state (processes, utilization, faults, Xid events).
 *
 * It must never crash on a caller's bad argument (NVML answers INVALID_ARGUMENT), never block
 * except in nvmlEventSetWait_v2, and never export anything but the NVML API (nvml.map).
 * Handles are pointers into a static per-process table, stable for the life of the process.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "compat/compat.h"
#include "nvml/nvml-abi.h"
#include "sim/nvml-sim.h"
#include "sim/sim.h"
#include "util/util.h"

#define NVML_INIT_FLAG_NO_GPUS 1u
#define NVML_INIT_FLAG_NO_ATTACH 2u

/* nvmlGpuP2PStatus_t */
#define P2P_STATUS_OK 0
#define P2P_STATUS_CHIPSET_NOT_SUPPORTED 1
#define P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED 3
#define P2P_STATUS_NOT_SUPPORTED 5

#define NVSWITCH_PCI_DEVICE_ID 0x1af110deu /* NVIDIA NVSwitch (GA100 generation) */

struct nvmlEventSet_st {
        uint64_t types[TOPO_MAX_GPUS];    /* registered event types per GPU (0 = not registered) */
        uint64_t last_seq[TOPO_MAX_GPUS]; /* last delivered global sequence per GPU */
};

static struct sim_forksafe_lock init_lock = SIM_FORKSAFE_LOCK_INIT;
static unsigned init_count; /* written under init_lock, read with atomics */
static struct topo node;
static char node_path[PATH_MAX];
static struct sim_state *state;
static dev_t state_dev;
static ino_t state_ino;
static struct nvmlDevice_st devices[TOPO_MAX_GPUS];
static struct nvmlDevice_st mig_devices[TOPO_MAX_GPUS][SIM_MIG_MAX_DEVICES];

/* ---- init ---- */

static bool initialized(void) {
        return __atomic_load_n(&init_count, __ATOMIC_ACQUIRE) > 0;
}

/*
 * The state stays mapped after the last nvmlShutdown: a thread still inside a query or in
 * nvmlEventSetWait_v2 must never touch an unmapped page. A later init reuses the mapping when the
 * state path still names the same file, and only otherwise replaces it.
 */
static int state_map(void) {
        char path[PATH_MAX], err[512];
        int r = sim_state_path(node_path, path, sizeof path);
        if (r < 0)
                return r;
        struct stat st;
        if (state && stat(path, &st) == 0 && st.st_dev == state_dev && st.st_ino == state_ino) {
                if (state->n_gpus == node.n_gpus)
                        return 0;
                fprintf(stderr,
                        "gpuslice-sim: %s was made for a node with %u GPUs, this node has %u; "
                        "remove it or run `gpuslice-sim reset`\n",
                        path, state->n_gpus, node.n_gpus);
                return -EPROTO;
        }
        struct sim_state *s = NULL;
        r = sim_state_open_path(path, &node, node_path, &s, err, sizeof err);
        if (r < 0) {
                fprintf(stderr, "gpuslice-sim: %s\n", err);
                return r;
        }
        if (stat(path, &st) < 0) {
                sim_state_close(s);
                return -errno;
        }
        sim_state_close(state);
        state = s;
        state_dev = st.st_dev;
        state_ino = st.st_ino;
        return 0;
}

static nvmlReturn_t init_locked(void) {
        const char *env = secure_getenv(SIM_ENV_NODE);
        if (!env || !*env)
                return NVML_ERROR_DRIVER_NOT_LOADED; /* like a machine without the driver */
        char err[512];
        int r = sim_node_load(&node, node_path, sizeof node_path, err, sizeof err);
        if (r < 0) {
                /* The one place the simulator speaks: a broken setup must say why. */
                fprintf(stderr, "gpuslice-sim: %s\n", err);
                return NVML_ERROR_DRIVER_NOT_LOADED;
        }
        r = state_map();
        if (r < 0)
                return r == -EPROTO ? NVML_ERROR_LIB_RM_VERSION_MISMATCH : NVML_ERROR_UNKNOWN;
        for (unsigned i = 0; i < TOPO_MAX_GPUS; i++) {
                devices[i].index = i;
                for (unsigned k = 0; k < SIM_MIG_MAX_DEVICES; k++)
                        mig_devices[i][k] = (struct nvmlDevice_st){ .index = i, .mig = k + 1 };
        }
        return NVML_SUCCESS;
}

/* A fork while another thread is inside nvmlInit (init_lock held across mapping the state) waits for it,
 * and the child gets a lock of its own: it is a process with the parent's initialised NVML. */
static void nvml_atfork_prepare(void) {
        sim_forksafe_lock(&init_lock);
}
static void nvml_atfork_parent(void) {
        sim_forksafe_unlock(&init_lock);
}
static void nvml_atfork_child(void) {
        sim_forksafe_own(&init_lock, true);
}
__attribute__((constructor)) static void nvml_atfork(void) {
        sim_forksafe_own(&init_lock, false);
        pthread_atfork(nvml_atfork_prepare, nvml_atfork_parent, nvml_atfork_child);
}

static nvmlReturn_t init_ref(void) {
        sim_forksafe_lock(&init_lock);
        nvmlReturn_t ret = NVML_SUCCESS;
        if (init_count == 0)
                ret = init_locked();
        if (ret == NVML_SUCCESS)
                __atomic_store_n(&init_count, init_count + 1, __ATOMIC_RELEASE);
        sim_forksafe_unlock(&init_lock);
        return ret;
}

_public_ nvmlReturn_t nvmlInit_v2(void) {
        return init_ref();
}

_public_ nvmlReturn_t nvmlInit(void) {
        return init_ref();
}

_public_ nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
        if (flags & ~(NVML_INIT_FLAG_NO_GPUS | NVML_INIT_FLAG_NO_ATTACH))
                return NVML_ERROR_INVALID_ARGUMENT;
        return init_ref();
}

_public_ nvmlReturn_t nvmlShutdown(void) {
        sim_forksafe_lock(&init_lock);
        nvmlReturn_t ret = NVML_SUCCESS;
        if (init_count == 0)
                ret = NVML_ERROR_UNINITIALIZED;
        else {
                /* Handles stay valid pointers and the state stays mapped (see state_map). */
                __atomic_store_n(&init_count, init_count - 1, __ATOMIC_RELEASE);
        }
        sim_forksafe_unlock(&init_lock);
        return ret;
}

/* lint: long — a table written as a switch: one case per nvmlReturn_t, with NVML's own text for it (the compiler
 * checks every value is named); split up, the table would no longer read as one. */
_public_ const char *nvmlErrorString(nvmlReturn_t result) {
        switch (result) {
                case NVML_SUCCESS: return "Success";
                case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
                case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
                case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
                case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
                case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
                case NVML_ERROR_NOT_FOUND: return "Not Found";
                case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
                case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
                case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
                case NVML_ERROR_TIMEOUT: return "Timeout";
                case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
                case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
                case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
                case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
                case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
                case NVML_ERROR_RESET_REQUIRED: return "GPU requires reset";
                case NVML_ERROR_OPERATING_SYSTEM: return "GPU access blocked by the operating system";
                case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "Driver/library version mismatch";
                case NVML_ERROR_IN_USE: return "In use by another client";
                case NVML_ERROR_MEMORY: return "Insufficient Memory";
                case NVML_ERROR_NO_DATA: return "No data";
                case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
                        return "The requested vgpu operation is not available on target device, becasue ECC is enabled";
                case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient Resources";
                case NVML_ERROR_FREQ_NOT_SUPPORTED: return "Frequency not supported";
                case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
                case NVML_ERROR_DEPRECATED: return "Deprecated";
                case NVML_ERROR_NOT_READY: return "Not ready";
                case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
                case NVML_ERROR_INVALID_STATE: return "Invalid state";
                case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED: return "Reset type not supported";
                case NVML_ERROR_UNKNOWN: return "Unknown Error";
        }
        return "Unknown Error";
}

/* ---- helpers ---- */

static nvmlReturn_t copy_string(const char *s, char *buf, unsigned len) {
        if (!buf)
                return NVML_ERROR_INVALID_ARGUMENT;
        size_t n = strlen(s);
        if (len < n + 1)
                return NVML_ERROR_INSUFFICIENT_SIZE;
        memcpy(buf, s, n + 1);
        return NVML_SUCCESS;
}

static uint32_t gpu_flags(unsigned i) {
        return __atomic_load_n(&state->gpu[i].flags, __ATOMIC_ACQUIRE);
}

static bool handle_valid(nvmlDevice_t d) {
        uintptr_t p = (uintptr_t)d, lo = (uintptr_t)devices, hi = (uintptr_t)(devices + node.n_gpus);
        uintptr_t mlo = (uintptr_t)mig_devices, mhi = (uintptr_t)(mig_devices + node.n_gpus);
        return d && ((p >= lo && p < hi && (p - lo) % sizeof devices[0] == 0) ||
                     (p >= mlo && p < mhi && (p - mlo) % sizeof mig_devices[0][0] == 0));
}

nvmlReturn_t nvml_sim_gpu_faults(unsigned gpu) {
        uint32_t f = gpu_flags(gpu);
        if (f & SIM_GPU_LOST)
                return NVML_ERROR_GPU_IS_LOST;
        if (f & SIM_GPU_NO_PERMISSION)
                return NVML_ERROR_NO_PERMISSION;
        return NVML_SUCCESS;
}

/* The checks every device query starts with, in NVML's order. Queries that also take a MIG device
 * handle use dev_check_any; every other one needs the GPU's own handle. */
static nvmlReturn_t dev_check(nvmlDevice_t d) {
        if (!initialized())
                return NVML_ERROR_UNINITIALIZED;
        if (!handle_valid(d))
                return NVML_ERROR_INVALID_ARGUMENT;
        if (d->mig)
                return NVML_ERROR_NOT_SUPPORTED;
        return nvml_sim_gpu_faults(d->index);
}

static nvmlReturn_t lock_state(void);

/* A GPU or a live MIG device handle. For a MIG handle, *ret_gi / *ret_ci (may be NULL) name its
 * instances as ids (SIM_NO_INSTANCE for a GPU handle). */
static nvmlReturn_t dev_check_any(nvmlDevice_t d, uint32_t *ret_gi, uint32_t *ret_ci) {
        if (!initialized())
                return NVML_ERROR_UNINITIALIZED;
        if (!handle_valid(d))
                return NVML_ERROR_INVALID_ARGUMENT;
        CHECK(nvml_sim_gpu_faults(d->index));
        uint32_t gi = SIM_NO_INSTANCE, ci = SIM_NO_INSTANCE;
        if (d->mig) {
                CHECK(lock_state());
                struct sim_mig_gi *g = NULL;
                struct sim_mig_ci *c = NULL;
                nvmlReturn_t r = nvml_sim_mig_resolve_locked(d, &g, &c);
                if (r == NVML_SUCCESS) {
                        gi = g->id;
                        ci = c->id;
                }
                sim_state_unlock(state);
                CHECK(r);
        }
        if (ret_gi)
                *ret_gi = gi;
        if (ret_ci)
                *ret_ci = ci;
        return NVML_SUCCESS;
}

nvmlDevice_t nvml_sim_mig_handle(unsigned gpu, unsigned k, uint64_t serial) {
        struct nvmlDevice_st *h = &mig_devices[gpu][k];
        __atomic_store_n(&h->serial, serial, __ATOMIC_RELEASE);
        return h;
}

bool nvml_sim_initialized(void) {
        return initialized();
}

const struct topo *nvml_sim_node(void) {
        return &node;
}

struct sim_state *nvml_sim_state(void) {
        return state;
}

nvmlDevice_t nvml_sim_gpu_handle(unsigned i) {
        return &devices[i];
}

bool nvml_sim_handle_valid(nvmlDevice_t d) {
        return handle_valid(d);
}

nvmlReturn_t nvml_sim_dev_check(nvmlDevice_t d) {
        return dev_check(d);
}

nvmlReturn_t nvml_sim_copy_string(const char *s, char *buf, unsigned len) {
        return copy_string(s, buf, len);
}

static const struct topo_gpu *gpu_of(nvmlDevice_t d) {
        return &node.gpu[d->index];
}

static nvmlReturn_t lock_state(void) {
        return sim_state_lock(state) < 0 ? NVML_ERROR_UNKNOWN : NVML_SUCCESS;
}

nvmlReturn_t nvml_sim_lock(void) {
        return lock_state();
}

/* With MIG on, the processes of all instances together through the parent handle need the mig/monitor
 * capability (here: privilege); a MIG device's own handle answers for it without. */
static nvmlReturn_t parent_aggregate_check(unsigned gpu) {
        CHECK(lock_state());
        bool mig = state->mig[gpu].current == NVML_DEVICE_MIG_ENABLE;
        sim_state_unlock(state);
        return mig && !nvml_sim_privileged() ? NVML_ERROR_NO_PERMISSION : NVML_SUCCESS;
}

/* ---- system ---- */

_public_ nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
        if (!initialized())
                return NVML_ERROR_UNINITIALIZED;
        return copy_string(node.driver_version, version, length);
}

_public_ nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion) {
        if (!initialized())
                return NVML_ERROR_UNINITIALIZED;
        if (!cudaDriverVersion)
                return NVML_ERROR_INVALID_ARGUMENT;
        *cudaDriverVersion = node.cuda_version;
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion) {
        return nvmlSystemGetCudaDriverVersion_v2(cudaDriverVersion);
}

/* ---- devices ---- */

_public_ nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount) {
        if (!initialized())
                return NVML_ERROR_UNINITIALIZED;
        if (!deviceCount)
                return NVML_ERROR_INVALID_ARGUMENT;
        *deviceCount = node.n_gpus;
        return NVML_SUCCESS;
}

/* The v1 count and index skip devices the caller may not use (why _v2 exists). */
_public_ nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount) {
        if (!initialized())
                return NVML_ERROR_UNINITIALIZED;
        if (!deviceCount)
                return NVML_ERROR_INVALID_ARGUMENT;
        unsigned n = 0;
        for (unsigned i = 0; i < node.n_gpus; i++)
                if (!(gpu_flags(i) & SIM_GPU_NO_PERMISSION))
                        n++;
        *deviceCount = n;
        return NVML_SUCCESS;
}

static nvmlReturn_t handle_of(unsigned i, nvmlDevice_t *device) {
        uint32_t f = gpu_flags(i);
        if (f & SIM_GPU_LOST)
                return NVML_ERROR_GPU_IS_LOST;
        if (f & SIM_GPU_NO_PERMISSION)
                return NVML_ERROR_NO_PERMISSION;
        *device = &devices[i];
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
        if (!initialized())
                return NVML_ERROR_UNINITIALIZED;
        if (!device || index >= node.n_gpus)
                return NVML_ERROR_INVALID_ARGUMENT;
        return handle_of(index, device);
}

_public_ nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
        if (!initialized())
                return NVML_ERROR_UNINITIALIZED;
        if (!device)
                return NVML_ERROR_INVALID_ARGUMENT;
        for (unsigned i = 0, n = 0; i < node.n_gpus; i++) {
                if (gpu_flags(i) & SIM_GPU_NO_PERMISSION)
                        continue;
                if (n++ == index)
                        return handle_of(i, device);
        }
        return NVML_ERROR_INVALID_ARGUMENT;
}

_public_ nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
        if (!initialized())
                return NVML_ERROR_UNINITIALIZED;
        if (!uuid || !device)
                return NVML_ERROR_INVALID_ARGUMENT;
        for (unsigned i = 0; i < node.n_gpus; i++)
                if (streq(node.gpu[i].uuid, uuid))
                        return handle_of(i, device);
        if (!startswith(uuid, "MIG-"))
                return NVML_ERROR_NOT_FOUND;
        CHECK(lock_state());
        nvmlDevice_t d = nvml_sim_mig_by_uuid_locked(uuid);
        sim_state_unlock(state);
        if (!d)
                return NVML_ERROR_NOT_FOUND;
        CHECK(nvml_sim_gpu_faults(d->index));
        *device = d;
        return NVML_SUCCESS;
}

/* A MIG device's UUID (name) into buf, under the lock; stale handles answer INVALID_ARGUMENT. */
static nvmlReturn_t mig_string(nvmlDevice_t device, bool name, char *buf, size_t len) {
        CHECK(lock_state());
        struct sim_mig_gi *gi = NULL;
        struct sim_mig_ci *ci = NULL;
        nvmlReturn_t r = nvml_sim_mig_resolve_locked(device, &gi, &ci);
        if (r == NVML_SUCCESS) {
                if (name)
                        nvml_sim_mig_name_locked(device, gi, ci, buf, len);
                else
                        nvml_sim_mig_uuid_locked(device, ci, buf, len);
        }
        sim_state_unlock(state);
        return r;
}

_public_ nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
        CHECK(dev_check_any(device, NULL, NULL));
        if (!device->mig)
                return copy_string(gpu_of(device)->uuid, uuid, length);
        char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        CHECK(mig_string(device, false, buf, sizeof buf));
        return copy_string(buf, uuid, length);
}

_public_ nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
        CHECK(dev_check_any(device, NULL, NULL));
        if (!device->mig)
                return copy_string(gpu_of(device)->name, name, length);
        char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
        CHECK(mig_string(device, true, buf, sizeof buf));
        return copy_string(buf, name, length);
}

_public_ nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length) {
        CHECK(dev_check(device));
        /* A stable 13-digit board serial derived from the UUID. */
        uint64_t h = 0xcbf29ce484222325ULL;
        for (const char *p = gpu_of(device)->uuid; *p; p++) {
                h ^= (unsigned char)*p;
                h *= 0x100000001b3ULL;
        }
        char buf[NVML_DEVICE_SERIAL_BUFFER_SIZE];
        snprintf(buf, sizeof buf, "13%011llu", (unsigned long long)(h % 100000000000ULL));
        return copy_string(buf, serial, length);
}

static void gpu_pci(unsigned i, nvmlPciInfo_t *pci);

/* By PCI bus id ("domain:bus:device.function", as nvmlPciInfo_t.busId or busIdLegacy give it; hex digits
 * in either case) and by board serial, as NVML finds a GPU. */
_public_ nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device) {
        if (!initialized())
                return NVML_ERROR_UNINITIALIZED;
        if (!pciBusId || !device)
                return NVML_ERROR_INVALID_ARGUMENT;
        for (unsigned i = 0; i < node.n_gpus; i++) {
                nvmlPciInfo_t pci;
                gpu_pci(i, &pci);
                if (strcasecmp(pci.busId, pciBusId) == 0 || strcasecmp(pci.busIdLegacy, pciBusId) == 0)
                        return handle_of(i, device);
        }
        return NVML_ERROR_NOT_FOUND;
}

_public_ nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device) {
        return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

_public_ nvmlReturn_t nvmlDeviceGetHandleBySerial(const char *serial, nvmlDevice_t *device) {
        if (!initialized())
                return NVML_ERROR_UNINITIALIZED;
        if (!serial || !device)
                return NVML_ERROR_INVALID_ARGUMENT;
        for (unsigned i = 0; i < node.n_gpus; i++) {
                char buf[NVML_DEVICE_SERIAL_BUFFER_SIZE];
                if (nvmlDeviceGetSerial(&devices[i], buf, sizeof buf) == NVML_SUCCESS && strcmp(buf, serial) == 0)
                        return handle_of(i, device);
        }
        return NVML_ERROR_NOT_FOUND;
}

/* The memory of a GPU, or of a MIG device's GPU instance (gi): what its compute instances share. */
static nvmlReturn_t memory_numbers(nvmlDevice_t device, uint64_t *total, uint64_t *reserved, uint64_t *used) {
        uint32_t gi;
        CHECK(dev_check_any(device, &gi, NULL));
        uint64_t usable;
        CHECK(lock_state());
        sim_state_prune_locked(state);
        sim_mem_capacity_locked(state, &node, device->index, gi, total, &usable, used);
        sim_state_unlock(state);
        *reserved = *total - usable;
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
        CHECK(dev_check_any(device, NULL, NULL));
        if (!memory)
                return NVML_ERROR_INVALID_ARGUMENT;
        uint64_t total, reserved, used;
        CHECK(memory_numbers(device, &total, &reserved, &used));
        /* The v1 struct has no reserved field: the driver's share counts as used. */
        memory->total = total;
        memory->used = used + reserved;
        memory->free = total - reserved - used;
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
        CHECK(dev_check_any(device, NULL, NULL));
        if (!memory)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (memory->version != nvmlMemory_v2)
                return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        uint64_t total, reserved, used;
        CHECK(memory_numbers(device, &total, &reserved, &used));
        memory->total = total;
        memory->reserved = reserved;
        memory->used = used;
        memory->free = total - reserved - used;
        return NVML_SUCCESS;
}

static int parse_bus_id(const char *s, unsigned *domain, unsigned *bus, unsigned *dev, unsigned *fn) {
        if (sscanf(s, "%x:%x:%x.%x", domain, bus, dev, fn) == 4)
                return 0;
        *domain = 0;
        if (sscanf(s, "%x:%x.%x", bus, dev, fn) == 3)
                return 0;
        return -EINVAL;
}

static unsigned pci_device_id(const char *model) {
        static const struct {
                const char *model;
                unsigned id;
        } table[] = {
                { "A100-SXM4-80GB", 0x20b2 }, { "A100-SXM4", 0x20b0 }, { "A100-PCIE", 0x20f1 },
                { "H100", 0x2330 },           { "V100-SXM2", 0x1db1 }, { "V100-PCIE", 0x1db4 },
                { "P100", 0x15f8 },           { "P40", 0x1b38 },       { "T4", 0x1eb8 },
                { "TITAN V", 0x1d81 },        { "H200", 0x2335 },
        };
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (strstr(model, table[i].model))
                        return table[i].id;
        return 0x20b0;
}

static void fill_pci(nvmlPciInfo_t *pci, unsigned domain, unsigned bus, unsigned dev, unsigned device_id) {
        memset(pci, 0, sizeof *pci);
        pci->domain = domain;
        pci->bus = bus;
        pci->device = dev;
        pci->pciDeviceId = device_id;
        pci->pciSubSystemId = (device_id & 0xffff0000u) | 0x10de;
        snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", domain, bus, dev);
        snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", domain & 0xffff, bus & 0xff,
                 dev & 0xff);
}

static void gpu_pci(unsigned i, nvmlPciInfo_t *pci) {
        unsigned domain = 0, bus = 0, dev = 0, fn = 0;
        if (parse_bus_id(node.gpu[i].bus_id, &domain, &bus, &dev, &fn) < 0)
                bus = 0x10 + i; /* the parser fills bus ids; this only guards a hand-made node */
        fill_pci(pci, domain, bus, dev, (pci_device_id(node.gpu[i].name) << 16) | 0x10de);
}

_public_ nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
        CHECK(dev_check(device));
        if (!pci)
                return NVML_ERROR_INVALID_ARGUMENT;
        gpu_pci(device->index, pci);
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber) {
        CHECK(dev_check(device));
        if (!minorNumber)
                return NVML_ERROR_INVALID_ARGUMENT;
        int m = gpu_of(device)->minor;
        *minorNumber = m >= 0 ? (unsigned)m : device->index;
        return NVML_SUCCESS;
}

/* A MIG device's index is its MIG index (what nvmlDeviceGetMigDeviceHandleByIndex takes). */
_public_ nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
        CHECK(dev_check_any(device, NULL, NULL));
        if (!index)
                return NVML_ERROR_INVALID_ARGUMENT;
        *index = device->mig ? device->mig - 1 : device->index;
        return NVML_SUCCESS;
}

/* ---- topology ---- */

/* The PCIe level of a pair. A matrix that gives NV# for a pair hides its PCIe path; then the
 * pair counts as NODE when both GPUs sit on one known NUMA node, else SYS. */
static enum topo_level pair_pcie(unsigned a, unsigned b) {
        struct topo_link l = topo_get_link(&node, a, b);
        if (l.pcie != TOPO_LEVEL_UNKNOWN)
                return (enum topo_level)l.pcie;
        int na = node.gpu[a].numa_node, nb = node.gpu[b].numa_node;
        return na >= 0 && na == nb ? TOPO_LEVEL_NODE : TOPO_LEVEL_SYS;
}

_public_ nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                          nvmlGpuTopologyLevel_t *pathInfo) {
        CHECK(dev_check(device1));
        CHECK(dev_check(device2));
        if (!pathInfo)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (device1 == device2) {
                *pathInfo = NVML_TOPOLOGY_INTERNAL;
                return NVML_SUCCESS;
        }
        switch (pair_pcie(device1->index, device2->index)) {
                case TOPO_LEVEL_PIX: *pathInfo = NVML_TOPOLOGY_SINGLE; break;
                case TOPO_LEVEL_PXB: *pathInfo = NVML_TOPOLOGY_MULTIPLE; break;
                case TOPO_LEVEL_PHB: *pathInfo = NVML_TOPOLOGY_HOSTBRIDGE; break;
                case TOPO_LEVEL_NODE: *pathInfo = NVML_TOPOLOGY_NODE; break;
                case TOPO_LEVEL_SELF: *pathInfo = NVML_TOPOLOGY_INTERNAL; break;
                default: *pathInfo = NVML_TOPOLOGY_SYSTEM; break;
        }
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2, int p2pIndex, int *p2pStatus) {
        CHECK(dev_check(device1));
        CHECK(dev_check(device2));
        if (!p2pStatus || p2pIndex < NVML_P2P_CAPS_INDEX_READ || p2pIndex > NVML_P2P_CAPS_INDEX_PCI ||
            device1 == device2)
                return NVML_ERROR_INVALID_ARGUMENT;
        struct topo_link l = topo_get_link(&node, device1->index, device2->index);
        if (p2pIndex == NVML_P2P_CAPS_INDEX_NVLINK) {
                *p2pStatus = l.nvlinks ? P2P_STATUS_OK : P2P_STATUS_NOT_SUPPORTED;
                return NVML_SUCCESS;
        }
        if (l.nvlinks && p2pIndex != NVML_P2P_CAPS_INDEX_PCI) {
                *p2pStatus = P2P_STATUS_OK;
                return NVML_SUCCESS;
        }
        /* Over PCIe, peer traffic works below the host bridge and through one root complex;
         * across root complexes or sockets the chipset does not route it. */
        enum topo_level lv = pair_pcie(device1->index, device2->index);
        *p2pStatus = lv >= TOPO_LEVEL_PHB ? P2P_STATUS_OK : P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED;
        return NVML_SUCCESS;
}

/* NVLink enumeration. Direct links: for each peer in index order, one link per bonded NVLink,
 * whose remote is that peer. With an NVSwitch fabric: as many links as the GPU's largest NV#
 * count, each to an NVSwitch (two links per switch), never to a GPU. */
/* More links than any GPU has ever had (18 on Hopper and Blackwell) can only be a switch fabric:
 * a DGX A100 prints NV12 for all 7 peers although each GPU has 12 links, all to NVSwitches. */
#define SIM_MAX_DIRECT_NVLINKS 18u

static bool nvswitch_fabric(void) {
        if (node.nvswitch)
                return true;
        for (unsigned g = 0; g < node.n_gpus; g++) {
                unsigned n = 0;
                for (unsigned p = 0; p < node.n_gpus; p++)
                        if (p != g)
                                n += topo_get_link(&node, g, p).nvlinks;
                if (n > SIM_MAX_DIRECT_NVLINKS)
                        return true;
        }
        return false;
}

static unsigned nvlink_count(unsigned g) {
        unsigned n = 0, most = 0;
        for (unsigned p = 0; p < node.n_gpus; p++) {
                if (p == g)
                        continue;
                unsigned nv = topo_get_link(&node, g, p).nvlinks;
                n += nv;
                most = MAX(most, nv);
        }
        return nvswitch_fabric() ? most : n;
}

static int nvlink_peer(unsigned g, unsigned link) {
        for (unsigned p = 0; p < node.n_gpus; p++) {
                if (p == g)
                        continue;
                unsigned nv = topo_get_link(&node, g, p).nvlinks;
                if (link < nv)
                        return (int)p;
                link -= nv;
        }
        return -1;
}

static bool bus_is_gpu(unsigned domain, unsigned bus) {
        for (unsigned i = 0; i < node.n_gpus; i++) {
                unsigned d = 0, b = 0, dev = 0, fn = 0;
                if (parse_bus_id(node.gpu[i].bus_id, &d, &b, &dev, &fn) == 0 && d == domain && b == bus)
                        return true;
        }
        return false;
}

static void nvswitch_pci(unsigned link, nvmlPciInfo_t *pci) {
        /* Switch k lives on the k-th free bus counting down from 0xff: never a GPU's bus. */
        unsigned k = link / 2, bus = 0xff;
        for (;; bus--) {
                if (bus_is_gpu(0, bus))
                        continue;
                if (k == 0)
                        break;
                k--;
        }
        fill_pci(pci, 0, bus, 0, NVSWITCH_PCI_DEVICE_ID);
}

static nvmlReturn_t nvlink_check(nvmlDevice_t device, unsigned link) {
        CHECK(dev_check(device));
        unsigned n = nvlink_count(device->index);
        if (n == 0)
                return NVML_ERROR_NOT_SUPPORTED; /* a PCIe-only GPU has no NVLink at all */
        if (link >= n)
                return NVML_ERROR_INVALID_ARGUMENT;
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *isActive) {
        CHECK(nvlink_check(device, link));
        if (!isActive)
                return NVML_ERROR_INVALID_ARGUMENT;
        *isActive = NVML_FEATURE_ENABLED;
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci) {
        CHECK(nvlink_check(device, link));
        if (!pci)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (nvswitch_fabric()) {
                nvswitch_pci(link, pci);
                return NVML_SUCCESS;
        }
        int peer = nvlink_peer(device->index, link);
        if (peer < 0)
                return NVML_ERROR_INVALID_ARGUMENT;
        gpu_pci((unsigned)peer, pci);
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                          nvmlIntNvLinkDeviceType_t *type) {
        CHECK(nvlink_check(device, link));
        if (!type)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!nvswitch_fabric() && nvlink_peer(device->index, link) < 0)
                return NVML_ERROR_INVALID_ARGUMENT;
        *type = nvswitch_fabric() ? NVML_NVLINK_DEVICE_TYPE_SWITCH : NVML_NVLINK_DEVICE_TYPE_GPU;
        return NVML_SUCCESS;
}

/* ---- processes ---- */

struct proc_view {
        uint32_t pid;
        uint64_t used;
        uint32_t sm, mem;
        uint64_t start_us, sample_us;
        uint32_t gi, ci;
};

/* Snapshot of the GPU's live processes (pruned), or of one MIG device's (gi, ci; SIM_NO_INSTANCE for
 * all). Returns the count (<= SIM_MAX_PROCS). */
static nvmlReturn_t procs_of(unsigned gpu, uint32_t gi, uint32_t ci, struct proc_view *out, unsigned *ret_n) {
        CHECK(lock_state());
        sim_state_prune_locked(state);
        unsigned n = 0;
        for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
                const struct sim_proc *p = &state->proc[i];
                if (!p->pid || p->gpu != gpu || (gi != SIM_NO_INSTANCE && (p->gi != gi || p->ci != ci)))
                        continue;
                /* host PIDs, as the driver reports them, also for processes in containers */
                uint32_t pid = sim_proc_visible_pid(p);
                if (!pid)
                        continue;
                out[n++] = (struct proc_view){ .pid = pid,
                                               .used = p->used_bytes,
                                               .sm = p->sm_util,
                                               .mem = p->mem_util,
                                               .start_us = p->start_us,
                                               .sample_us = p->sample_us,
                                               .gi = p->gi,
                                               .ci = p->ci };
        }
        sim_state_unlock(state);
        *ret_n = n;
        return NVML_SUCCESS;
}

/* The size protocol shared by the three process calls: returns SUCCESS when infos may be
 * filled with *infoCount entries. */
static nvmlReturn_t procs_protocol(nvmlDevice_t device, unsigned int *infoCount, const void *infos,
                                   struct proc_view *views, unsigned *ret_n) {
        uint32_t gi, ci;
        CHECK(dev_check_any(device, &gi, &ci));
        if (!infoCount)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!device->mig)
                CHECK(parent_aggregate_check(device->index));
        unsigned n;
        CHECK(procs_of(device->index, gi, ci, views, &n));
        if (*infoCount < n || (!infos && n > 0)) {
                *infoCount = n;
                return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        *infoCount = n;
        *ret_n = n;
        return NVML_SUCCESS;
}

static nvmlReturn_t running_processes(nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos) {
        struct proc_view views[SIM_MAX_PROCS];
        unsigned n;
        CHECK(procs_protocol(device, infoCount, infos, views, &n));
        for (unsigned i = 0; i < n; i++)
                infos[i] = (nvmlProcessInfo_t){ .pid = views[i].pid,
                                                .usedGpuMemory = views[i].used,
                                                .gpuInstanceId = views[i].gi,
                                                .computeInstanceId = views[i].ci };
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                              nvmlProcessInfo_t *infos) {
        return running_processes(device, infoCount, infos);
}

_public_ nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                              nvmlProcessInfo_t *infos) {
        return running_processes(device, infoCount, infos);
}

_public_ nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                           nvmlProcessInfo_v1_t *infos) {
        struct proc_view views[SIM_MAX_PROCS];
        unsigned n;
        CHECK(procs_protocol(device, infoCount, infos, views, &n));
        for (unsigned i = 0; i < n; i++)
                infos[i] = (nvmlProcessInfo_v1_t){ .pid = views[i].pid, .usedGpuMemory = views[i].used };
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization) {
        CHECK(dev_check(device));
        if (!utilization)
                return NVML_ERROR_INVALID_ARGUMENT;
        CHECK(lock_state());
        if (state->mig[device->index].current == NVML_DEVICE_MIG_ENABLE) {
                sim_state_unlock(state);
                return NVML_ERROR_NOT_SUPPORTED; /* not available per GPU or per instance with MIG on */
        }
        sim_state_prune_locked(state);
        unsigned mem;
        unsigned gpu = sim_gpu_util_locked(state, device->index, &mem);
        sim_state_unlock(state);
        utilization->gpu = gpu;
        utilization->memory = mem;
        return NVML_SUCCESS;
}

/* The driver samples every process each SIM_SAMPLE_PERIOD_US; a sample's timestamp is the
 * latest period boundary, or the process's start or last explicit update if later. As NVML documents it, one
 * sample per process "that had some non-zero utilization during the last sample period": a process that keeps
 * a context but ran nothing has none (NOT_FOUND when no process has one). Per GPU: only this GPU's work. */
_public_ nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t *utilization,
                                                      unsigned int *processSamplesCount,
                                                      unsigned long long lastSeenTimeStamp) {
        CHECK(dev_check(device));
        if (!processSamplesCount)
                return NVML_ERROR_INVALID_ARGUMENT;
        CHECK(lock_state());
        bool mig = state->mig[device->index].current == NVML_DEVICE_MIG_ENABLE;
        sim_state_unlock(state);
        if (mig || (node.unsupported & TOPO_UNSUPPORTED_PROCESS_UTIL)) /* the node description says so */
                return NVML_ERROR_NOT_SUPPORTED;
        struct proc_view views[SIM_MAX_PROCS];
        unsigned n, m = 0;
        CHECK(procs_of(device->index, SIM_NO_INSTANCE, SIM_NO_INSTANCE, views, &n));
        uint64_t tick = sim_now_us() / SIM_SAMPLE_PERIOD_US * SIM_SAMPLE_PERIOD_US;
        for (unsigned i = 0; i < n; i++) {
                uint64_t ts = MAX(tick, MAX(views[i].start_us, views[i].sample_us));
                if (ts <= lastSeenTimeStamp || (views[i].sm == 0 && views[i].mem == 0))
                        continue;
                views[m] = views[i];
                views[m].sample_us = ts;
                m++;
        }
        if (m == 0)
                return NVML_ERROR_NOT_FOUND;
        if (!utilization || *processSamplesCount < m) {
                *processSamplesCount = m;
                return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        for (unsigned i = 0; i < m; i++)
                utilization[i] = (nvmlProcessUtilizationSample_t){ .pid = views[i].pid,
                                                                   .timeStamp = views[i].sample_us,
                                                                   .smUtil = views[i].sm,
                                                                   .memUtil = views[i].mem };
        *processSamplesCount = m;
        return NVML_SUCCESS;
}

/* ---- affinity, capabilities ---- */

_public_ nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int cpuSetSize, unsigned long *cpuSet) {
        CHECK(dev_check(device));
        if (!cpuSet || cpuSetSize == 0)
                return NVML_ERROR_INVALID_ARGUMENT;
        const char *s = gpu_of(device)->cpu_affinity;
        if (!*s)
                return NVML_ERROR_NOT_SUPPORTED;
        const unsigned bits = sizeof(unsigned long) * CHAR_BIT;
        memset(cpuSet, 0, cpuSetSize * sizeof *cpuSet);
        while (*s) {
                char *end;
                unsigned long lo = strtoul(s, &end, 10), hi = lo;
                if (end == s)
                        break;
                if (*end == '-') {
                        s = end + 1;
                        hi = strtoul(s, &end, 10);
                        if (end == s)
                                break;
                }
                for (unsigned long c = lo; c <= hi && c / bits < cpuSetSize; c++)
                        cpuSet[c / bits] |= 1UL << (c % bits);
                s = *end == ',' ? end + 1 : end;
                if (*end != ',')
                        break;
        }
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int nodeSetSize, unsigned long *nodeSet,
                                                  unsigned int scope) {
        CHECK(dev_check(device));
        if (!nodeSet || nodeSetSize == 0 || scope > 1 /* NODE 0, SOCKET 1 */)
                return NVML_ERROR_INVALID_ARGUMENT;
        int numa = gpu_of(device)->numa_node;
        if (numa < 0)
                return NVML_ERROR_NOT_SUPPORTED;
        const unsigned bits = sizeof(unsigned long) * CHAR_BIT;
        memset(nodeSet, 0, nodeSetSize * sizeof *nodeSet);
        if ((unsigned)numa / bits < nodeSetSize)
                nodeSet[(unsigned)numa / bits] |= 1UL << ((unsigned)numa % bits);
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
        CHECK(dev_check(device));
        if (!major || !minor)
                return NVML_ERROR_INVALID_ARGUMENT;
        *major = gpu_of(device)->cc_major;
        *minor = gpu_of(device)->cc_minor;
        return NVML_SUCCESS;
}

/* The node description's brand (default: from the model name, topo_apply_defaults). */
_public_ nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type) {
        CHECK(dev_check(device));
        if (!type)
                return NVML_ERROR_INVALID_ARGUMENT;
        *type = 0;
        for (int b = 1; b <= 16; b++)
                if (streq(compat_brand_name(b), gpu_of(device)->brand))
                        *type = b;
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode) {
        CHECK(dev_check(device));
        if (!currentMode || !pendingMode)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!sim_mig_model(gpu_of(device)))
                return NVML_ERROR_NOT_SUPPORTED;
        CHECK(lock_state());
        *currentMode = state->mig[device->index].current;
        *pendingMode = state->mig[device->index].pending;
        sim_state_unlock(state);
        return NVML_SUCCESS;
}

/* ---- sensors ---- */

_public_ nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, unsigned int sensorType, unsigned int *temp) {
        CHECK(dev_check(device));
        if (!temp || sensorType != NVML_TEMPERATURE_GPU)
                return NVML_ERROR_INVALID_ARGUMENT;
        CHECK(lock_state());
        sim_state_prune_locked(state);
        *temp = sim_gpu_temperature_locked(state, device->index);
        sim_state_unlock(state);
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power) {
        CHECK(dev_check(device));
        if (!power)
                return NVML_ERROR_INVALID_ARGUMENT;
        unsigned limit = sim_power_limit_mw(gpu_of(device));
        CHECK(lock_state());
        sim_state_prune_locked(state);
        *power = sim_gpu_power_mw_locked(state, device->index, limit);
        sim_state_unlock(state);
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit) {
        CHECK(dev_check(device));
        if (!limit)
                return NVML_ERROR_INVALID_ARGUMENT;
        *limit = sim_power_limit_mw(gpu_of(device));
        return NVML_SUCCESS;
}

/* ---- compute mode (shared state: libcuda.so.1 honours it, sim/cuda.c) ---- */

_public_ nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode) {
        CHECK(dev_check(device));
        if (!mode)
                return NVML_ERROR_INVALID_ARGUMENT;
        *mode = (nvmlComputeMode_t)__atomic_load_n(&state->gpu[device->index].compute_mode, __ATOMIC_ACQUIRE);
        return NVML_SUCCESS;
}

/* Root or CAP_SYS_ADMIN, as NVML's "requires root/admin permissions"; EXCLUSIVE_THREAD, whose support NVML has
 * removed, is refused as an invalid mode (the simulator's choice). Running contexts stay: a mode rules new ones. */
_public_ nvmlReturn_t nvmlDeviceSetComputeMode(nvmlDevice_t device, nvmlComputeMode_t mode) {
        CHECK(dev_check(device));
        if ((unsigned)mode >= NVML_COMPUTEMODE_COUNT || mode == NVML_COMPUTEMODE_EXCLUSIVE_THREAD)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!nvml_sim_privileged())
                return NVML_ERROR_NO_PERMISSION;
        CHECK(lock_state());
        __atomic_store_n(&state->gpu[device->index].compute_mode, (uint32_t)mode, __ATOMIC_RELEASE);
        sim_state_unlock(state);
        return NVML_SUCCESS;
}

/* ---- events ---- */

#define SIM_SUPPORTED_EVENTS \
        (nvmlEventTypeXidCriticalError | nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError)

_public_ nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes) {
        CHECK(dev_check(device));
        if (!eventTypes)
                return NVML_ERROR_INVALID_ARGUMENT;
        *eventTypes = SIM_SUPPORTED_EVENTS;
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
        if (!initialized())
                return NVML_ERROR_UNINITIALIZED;
        if (!set)
                return NVML_ERROR_INVALID_ARGUMENT;
        struct nvmlEventSet_st *s = calloc(1, sizeof *s);
        if (!s)
                return NVML_ERROR_MEMORY;
        *set = s;
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
        if (!initialized())
                return NVML_ERROR_UNINITIALIZED;
        if (!set)
                return NVML_ERROR_INVALID_ARGUMENT;
        free(set);
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set) {
        CHECK(dev_check(device));
        if (!set)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (eventTypes & ~SIM_SUPPORTED_EVENTS)
                return NVML_ERROR_NOT_SUPPORTED;
        unsigned g = device->index;
        CHECK(lock_state());
        if (!set->types[g])
                set->last_seq[g] = state->event_seq; /* only events from now on */
        sim_state_unlock(state);
        set->types[g] |= eventTypes;
        return NVML_SUCCESS;
}

/* The oldest undelivered event of the set, or false. Lock held. */
static bool next_event_locked(nvmlEventSet_t set, unsigned *ret_gpu, struct sim_xid *ret) {
        bool found = false;
        for (unsigned g = 0; g < node.n_gpus; g++) {
                if (!(set->types[g] & nvmlEventTypeXidCriticalError))
                        continue;
                const struct sim_gpu_state *gs = &state->gpu[g];
                uint64_t first = gs->xid_posted > SIM_XID_RING ? gs->xid_posted - SIM_XID_RING : 0;
                for (uint64_t k = first; k < gs->xid_posted; k++) {
                        const struct sim_xid *e = &gs->xid[k % SIM_XID_RING];
                        if (e->seq <= set->last_seq[g])
                                continue;
                        if (!found || e->seq < ret->seq) {
                                *ret = *e;
                                *ret_gpu = g;
                                found = true;
                        }
                        break; /* ring entries are in sequence order */
                }
        }
        return found;
}

_public_ nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
        if (!initialized())
                return NVML_ERROR_UNINITIALIZED;
        if (!set || !data)
                return NVML_ERROR_INVALID_ARGUMENT;
        uint64_t deadline = sim_now_us() + (uint64_t)timeoutms * 1000ULL;
        for (;;) {
                uint32_t seen = __atomic_load_n(&state->event_futex, __ATOMIC_ACQUIRE);
                CHECK(lock_state());
                unsigned g = 0;
                struct sim_xid e = { 0 };
                bool found = next_event_locked(set, &g, &e);
                if (found)
                        set->last_seq[g] = e.seq;
                sim_state_unlock(state);
                if (found) {
                        *data = (nvmlEventData_t){ .device = &devices[g],
                                                   .eventType = nvmlEventTypeXidCriticalError,
                                                   .eventData = e.xid,
                                                   .gpuInstanceId = NVML_INVALID_INSTANCE_ID,
                                                   .computeInstanceId = NVML_INVALID_INSTANCE_ID };
                        return NVML_SUCCESS;
                }
                uint64_t now = sim_now_us();
                if (now >= deadline)
                        return NVML_ERROR_TIMEOUT;
                uint64_t left_ms = (deadline - now + 999) / 1000;
                sim_state_wait_event(state, seen, (unsigned)MIN(left_ms, 1000u));
        }
}
