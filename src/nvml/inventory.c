/* SPDX-License-Identifier: Apache-2.0 */
/*
 * inventory — the node as NVML sees it, as one struct topo: versions, every GPU's facts, and the
 * link (common-ancestor level, NVLink count) of every pair.
 *
 * Must never: fail the whole inventory because one GPU is lost, forbidden or odd (that GPU gets
 * a state and its text, the others are still read), assume a fixed number of NVLinks, or log.
 */
#include "nvml/nvml-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compat/compat.h"
#include "util/util.h"

/* Enough for 4096 CPUs / 256 NUMA nodes. */
#define CPUSET_WORDS 64
#define NODESET_WORDS 4

static enum topo_level level_from_nvml(nvmlGpuTopologyLevel_t l) {
        switch (l) {
                case NVML_TOPOLOGY_INTERNAL:
                case NVML_TOPOLOGY_SINGLE: return TOPO_LEVEL_PIX;
                case NVML_TOPOLOGY_MULTIPLE: return TOPO_LEVEL_PXB;
                case NVML_TOPOLOGY_HOSTBRIDGE: return TOPO_LEVEL_PHB;
                case NVML_TOPOLOGY_NODE: return TOPO_LEVEL_NODE;
                case NVML_TOPOLOGY_SYSTEM: return TOPO_LEVEL_SYS;
                default: return TOPO_LEVEL_UNKNOWN;
        }
}

/* Record a failed query in the GPU's state. Returns true when the GPU must not be asked further
 * (lost, forbidden, or a failure of a query without which the GPU is useless). */
static bool gpu_fault(struct nvml *n, struct topo_gpu *g, int rc, const char *func, bool essential) {
        enum topo_gpu_state s;
        if (rc == NVML_ERROR_GPU_IS_LOST)
                s = TOPO_GPU_LOST;
        else if (rc == NVML_ERROR_NO_PERMISSION)
                s = TOPO_GPU_NO_PERMISSION;
        else if (essential)
                s = TOPO_GPU_ERROR;
        else
                return false;
        struct nvml_error e;
        nvml_fail(n, rc, func, &e);
        g->state = s;
        nvml_error_string(&e, g->state_text, sizeof(g->state_text));
        return true;
}

static int read_sysfs_numa(struct nvml *n, const char *bus_id) {
        char dev[16], path[512];
        if (nvml_sysfs_bus_id(bus_id, dev, sizeof(dev)) < 0)
                return -1;
        snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/numa_node", n->sysfs_root, dev);
        _cleanup_(freep) char *text = NULL;
        if (read_file(path, 64, &text, NULL) < 0)
                return -1;
        char *end;
        errno = 0;
        long v = strtol(text, &end, 10);
        if (errno != 0 || end == text || (*end != '\0' && *end != '\n') || v < -1 || v > 4095)
                return -1;
        return (int)v;
}

/* Fill one GPU. Returns true when the GPU answered well enough to be asked about links.
 * *ret_pci_id gets its PCI device id (0 when unknown) to tell GPUs from NVSwitches. */
/* lint: long — one GPU's fields, one NVML query each, in the order of struct topo_gpu; gpu_fault decides for each
 * query whether its failure leaves the field unknown or ends the GPU. */
static bool gpu_inventory(struct nvml *n, unsigned index, struct topo_gpu *g, nvmlDevice_t *ret_handle,
                          unsigned *ret_pci_id) {
        struct nvml_error e;
        nvmlDevice_t h;
        int rc;

        g->index = (int)index;
        int r = nvml_handle_fresh(n, index, &h, &e);
        if (r < 0) {
                nvml_handle_forget(n, index);
                if (e.nvml_code == NVML_ERROR_GPU_IS_LOST)
                        g->state = TOPO_GPU_LOST;
                else if (e.nvml_code == NVML_ERROR_NO_PERMISSION)
                        g->state = TOPO_GPU_NO_PERMISSION;
                else
                        g->state = TOPO_GPU_ERROR;
                nvml_error_string(&e, g->state_text, sizeof(g->state_text));
                return false;
        }
        *ret_handle = h;

        char uuid[NVML_DEVICE_UUID_BUFFER_SIZE] = "";
        rc = NVCALL(n, nvmlDeviceGetUUID, h, uuid, sizeof(uuid));
        if (rc != NVML_SUCCESS) {
                gpu_fault(n, g, rc, "nvmlDeviceGetUUID", true);
                return false;
        }
        strnscpy(g->uuid, sizeof(g->uuid), uuid, strnlen(uuid, sizeof(uuid)));

        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "";
        rc = NVCALL(n, nvmlDeviceGetName, h, name, sizeof(name));
        if (rc == NVML_SUCCESS)
                strnscpy(g->name, sizeof(g->name), name, strnlen(name, sizeof(name)));
        else if (gpu_fault(n, g, rc, "nvmlDeviceGetName", false))
                return false;

        uint64_t total, used;
        r = nvml_memory(n, h, &total, &used, &e);
        if (r >= 0) {
                g->memory_total = total;
                g->memory_used = used;
        } else if (gpu_fault(n, g, e.nvml_code, e.func, false))
                return false;

        nvmlPciInfo_t pci;
        memset(&pci, 0, sizeof(pci));
        rc = NVCALL(n, nvmlDeviceGetPciInfo_v3, h, &pci);
        if (rc == NVML_SUCCESS) {
                strnscpy(g->bus_id, sizeof(g->bus_id), pci.busId, strnlen(pci.busId, sizeof(pci.busId)));
                *ret_pci_id = pci.pciDeviceId;
                g->pci_device_id = pci.pciDeviceId;
        } else if (gpu_fault(n, g, rc, "nvmlDeviceGetPciInfo_v3", false))
                return false;

        unsigned minor;
        rc = NVCALL(n, nvmlDeviceGetMinorNumber, h, &minor);
        if (rc == NVML_SUCCESS)
                g->minor = minor <= INT32_MAX ? (int)minor : -1;
        else if (gpu_fault(n, g, rc, "nvmlDeviceGetMinorNumber", false))
                return false;

        unsigned long nodes[NODESET_WORDS] = { 0 };
        rc = NVCALL(n, nvmlDeviceGetMemoryAffinity, h, NODESET_WORDS, nodes, NVML_AFFINITY_SCOPE_NODE);
        if (rc != NVML_SUCCESS && gpu_fault(n, g, rc, "nvmlDeviceGetMemoryAffinity", false))
                return false;
        g->numa_node = -1;
        if (rc == NVML_SUCCESS)
                for (unsigned b = 0; b < NODESET_WORDS * 64 && g->numa_node < 0; b++)
                        if (nodes[b / 64] & (1UL << (b % 64)))
                                g->numa_node = (int)b;
        if (g->numa_node < 0 && g->bus_id[0])
                g->numa_node = read_sysfs_numa(n, g->bus_id);

        unsigned long cpus[CPUSET_WORDS] = { 0 };
        rc = NVCALL(n, nvmlDeviceGetCpuAffinity, h, CPUSET_WORDS, cpus);
        if (rc == NVML_SUCCESS)
                (void)nvml_format_cpulist(cpus, CPUSET_WORDS, g->cpu_affinity, sizeof(g->cpu_affinity));
        else if (gpu_fault(n, g, rc, "nvmlDeviceGetCpuAffinity", false))
                return false;

        unsigned cur = 0, pending = 0;
        rc = NVCALL(n, nvmlDeviceGetMigMode, h, &cur, &pending);
        if (rc == NVML_SUCCESS)
                g->mig_mode = cur == NVML_DEVICE_MIG_ENABLE ? 1 : 0;
        else if (gpu_fault(n, g, rc, "nvmlDeviceGetMigMode", false))
                return false;
        else
                g->mig_mode = -1;

        int major = 0, minor_cc = 0;
        rc = NVCALL(n, nvmlDeviceGetCudaComputeCapability, h, &major, &minor_cc);
        if (rc == NVML_SUCCESS) {
                g->cc_major = major;
                g->cc_minor = minor_cc;
        } else if (gpu_fault(n, g, rc, "nvmlDeviceGetCudaComputeCapability", false))
                return false;

        nvmlBrandType_t brand = 0;
        rc = NVCALL(n, nvmlDeviceGetBrand, h, &brand);
        if (rc == NVML_SUCCESS)
                strscpy(g->brand, compat_brand_name(brand), sizeof g->brand);
        else if (gpu_fault(n, g, rc, "nvmlDeviceGetBrand", false))
                return false;

        unsigned limit = 0;
        rc = NVCALL(n, nvmlDeviceGetEnforcedPowerLimit, h, &limit);
        if (rc == NVML_SUCCESS)
                g->power_limit_mw = limit;
        else if (gpu_fault(n, g, rc, "nvmlDeviceGetEnforcedPowerLimit", false))
                return false;

        return true;
}

/*
 * Count active NVLinks of GPU i by remote: to another GPU of this node (peer[j]) or to an NVSwitch
 * (*ret_switch). What the far end is comes from nvmlDeviceGetNvLinkRemoteDeviceType (driver 460+):
 * a switch counts without looking at its bus id, an IBM NPU (a POWER CPU) is neither, a GPU is
 * matched by its bus id. Where the symbol is missing, or the call fails or answers UNKNOWN for a
 * link, the older heuristic decides: anything that is not one of our GPUs is a switch, except a
 * remote whose bus id we do not know but whose PCI device id is that of one of our GPUs — a GPU we
 * could not query (lost, forbidden): not a switch, and not counted. Links are probed 0, 1, 2, …
 * until NVML says the link does not exist; the bound only guards against a library that never
 * says so.
 */
static void probe_nvlinks(struct nvml *n, const struct topo *t, const unsigned *pci_id, unsigned i, nvmlDevice_t h,
                          unsigned *peer, unsigned *ret_switch) {
        unsigned sw = 0;
        for (unsigned l = 0; l < NVML_MAX_NVLINKS_PROBED; l++) {
                nvmlEnableState_t active = NVML_FEATURE_DISABLED;
                int rc = NVCALL(n, nvmlDeviceGetNvLinkState, h, l, &active);
                if (rc != NVML_SUCCESS)
                        break; /* INVALID_ARGUMENT / NOT_SUPPORTED: no such link; anything else: stop too */
                if (active != NVML_FEATURE_ENABLED)
                        continue;
                nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
                if (NVCALL(n, nvmlDeviceGetNvLinkRemoteDeviceType, h, l, &type) != NVML_SUCCESS ||
                    (type != NVML_NVLINK_DEVICE_TYPE_GPU && type != NVML_NVLINK_DEVICE_TYPE_IBMNPU &&
                     type != NVML_NVLINK_DEVICE_TYPE_SWITCH))
                        type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN; /* the heuristic below decides */
                if (type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
                        sw++;
                        continue;
                }
                if (type == NVML_NVLINK_DEVICE_TYPE_IBMNPU)
                        continue;
                nvmlPciInfo_t pci;
                memset(&pci, 0, sizeof(pci));
                if (NVCALL(n, nvmlDeviceGetNvLinkRemotePciInfo_v2, h, l, &pci) != NVML_SUCCESS)
                        continue;
                char remote[sizeof(pci.busId) + 1];
                strnscpy(remote, sizeof(remote), pci.busId, strnlen(pci.busId, sizeof(pci.busId)));
                bool is_gpu = false;
                for (unsigned j = 0; j < t->n_gpus; j++) {
                        if (j == i || !t->gpu[j].bus_id[0] || !nvml_bus_id_equal(remote, t->gpu[j].bus_id))
                                continue;
                        peer[j]++;
                        is_gpu = true;
                        break;
                }
                /* a GPU of ours we could not query (type GPU, bus id unknown) is not counted */
                if (is_gpu || type == NVML_NVLINK_DEVICE_TYPE_GPU || nvml_bus_id_equal(remote, t->gpu[i].bus_id))
                        continue;
                bool unknown_gpu = false;
                for (unsigned j = 0; j < t->n_gpus && !unknown_gpu; j++)
                        unknown_gpu = pci_id[j] != 0 && pci_id[j] == pci.pciDeviceId;
                if (!unknown_gpu)
                        sw++;
        }
        *ret_switch = sw;
}

int nvml_inventory(struct nvml *n, struct topo *ret, struct nvml_error *err) {
        if (!n || !ret)
                return -EINVAL;

        _cleanup_(freep) struct topo *t = malloc(sizeof(*t));
        _cleanup_(freep) unsigned(*peer)[TOPO_MAX_GPUS] = calloc(TOPO_MAX_GPUS, sizeof(*peer));
        if (!t || !peer)
                return -ENOMEM;
        topo_init(t);

        unsigned count;
        int r = nvml_device_count(n, &count, err);
        if (r < 0)
                return r;
        if (count > TOPO_MAX_GPUS) {
                char text[128];
                snprintf(text, sizeof(text), "%u GPUs, gpuslice handles at most %u", count, TOPO_MAX_GPUS);
                nvml_error_set(err, NVML_ERROR_INSUFFICIENT_SIZE, n->get_count_name, text);
                return -E2BIG;
        }

        char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = "";
        if (NVCALL(n, nvmlSystemGetDriverVersion, driver, sizeof(driver)) == NVML_SUCCESS)
                strnscpy(t->driver_version, sizeof(t->driver_version), driver, strnlen(driver, sizeof(driver)));
        int cuda = 0;
        if (n->cuda_version && n->cuda_version(&cuda) == NVML_SUCCESS && cuda > 0)
                t->cuda_version = cuda;

        nvmlDevice_t handle[TOPO_MAX_GPUS] = { 0 };
        bool ok[TOPO_MAX_GPUS] = { false };
        unsigned pci_id[TOPO_MAX_GPUS] = { 0 };
        t->n_gpus = count;
        for (unsigned i = 0; i < count; i++)
                ok[i] = gpu_inventory(n, i, &t->gpu[i], &handle[i], &pci_id[i]);

        unsigned sw[TOPO_MAX_GPUS] = { 0 };
        for (unsigned i = 0; i < count; i++)
                if (ok[i])
                        probe_nvlinks(n, t, pci_id, i, handle[i], peer[i], &sw[i]);

        for (unsigned i = 0; i < count; i++)
                for (unsigned j = i + 1; j < count; j++) {
                        if (!ok[i] || !ok[j])
                                continue; /* stays UNKNOWN: we cannot know */
                        struct topo_link l = { .pcie = TOPO_LEVEL_UNKNOWN, .nvlinks = 0 };
                        nvmlGpuTopologyLevel_t lvl;
                        if (NVCALL(n, nvmlDeviceGetTopologyCommonAncestor, handle[i], handle[j], &lvl) == NVML_SUCCESS)
                                l.pcie = (uint8_t)level_from_nvml(lvl);
                        /* Both ends should agree; if one could not see the link, trust the other. */
                        unsigned nv = MAX(peer[i][j], peer[j][i]);
                        if (sw[i] > 0 && sw[j] > 0) {
                                nv += MIN(sw[i], sw[j]);
                                t->nvswitch = true;
                        }
                        l.nvlinks = (uint8_t)MIN(nv, 255u);
                        topo_set_link(t, i, j, l);
                }

        memcpy(ret, t, sizeof(*t));
        return 0;
}
