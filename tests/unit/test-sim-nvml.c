/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test-sim-nvml — the simulated libnvidia-ml.so.1 (loaded by path with dlopen, never linked):
 * init reference counting, error codes, the size protocols, inventory and topology answered
 * from the node file, NVLink enumeration, memory struct versions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "compat/compat.h"
#include "test-sim-common.h"

static void start(const char *node_file) {
        sim_select(node_file);
        assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
}

/* ---- init ---- */

static void test_no_node_is_no_driver(void **state) {
        (void)state;
        unsetenv("GPUSLICE_SIM_NODE");
        assert_int_equal(N.nvmlInit_v2(), NVML_ERROR_DRIVER_NOT_LOADED);
        unsigned n;
        assert_int_equal(N.nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
}

static void test_bad_node_file_is_no_driver(void **state) {
        (void)state;
        char path[PATH_MAX];
        assert_int_equal(sim_write_node("garbage.topo", "this is not a topology\n", path, sizeof path), 0);
        sim_select(path);
        assert_int_equal(N.nvmlInit_v2(), NVML_ERROR_DRIVER_NOT_LOADED);
        unlink(path);
        sim_select(GPUSLICE_TOPO_DIR "/does-not-exist.topo");
        assert_int_equal(N.nvmlInit_v2(), NVML_ERROR_DRIVER_NOT_LOADED);
}

static void test_calls_before_init_are_uninitialized(void **state) {
        (void)state;
        unsigned n = 0;
        char buf[80];
        int v;
        nvmlDevice_t d;
        nvmlEventSet_t set;
        assert_int_equal(N.nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
        assert_int_equal(N.nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
        assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(0, &d), NVML_ERROR_UNINITIALIZED);
        assert_int_equal(N.nvmlSystemGetDriverVersion(buf, sizeof buf), NVML_ERROR_UNINITIALIZED);
        assert_int_equal(N.nvmlSystemGetCudaDriverVersion_v2(&v), NVML_ERROR_UNINITIALIZED);
        assert_int_equal(N.nvmlEventSetCreate(&set), NVML_ERROR_UNINITIALIZED);
}

static void test_init_is_reference_counted(void **state) {
        (void)state;
        start(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        assert_int_equal(N.nvmlInit(), NVML_SUCCESS);
        assert_int_equal(N.nvmlInitWithFlags(0), NVML_SUCCESS);
        unsigned n = 0;
        assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
        assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS); /* one reference left */
        assert_int_equal(n, 8);
        assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
        assert_int_equal(N.nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
}

static void test_handles_are_stable_across_reinit(void **state) {
        (void)state;
        start(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        nvmlDevice_t a = sim_dev(3);
        assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
        assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
        assert_ptr_equal(sim_dev(3), a);
        unsigned idx = 99;
        assert_int_equal(N.nvmlDeviceGetIndex(a, &idx), NVML_SUCCESS);
        assert_int_equal(idx, 3);
}

static void test_init_flags_unknown_rejected(void **state) {
        (void)state;
        sim_select(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        assert_int_equal(N.nvmlInitWithFlags(0x100), NVML_ERROR_INVALID_ARGUMENT);
        unsigned n;
        assert_int_equal(N.nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
}

static void test_error_strings(void **state) {
        (void)state;
        assert_string_equal(N.nvmlErrorString(NVML_SUCCESS), "Success");
        assert_string_equal(N.nvmlErrorString(NVML_ERROR_UNINITIALIZED), "Uninitialized");
        assert_string_equal(N.nvmlErrorString(NVML_ERROR_INVALID_ARGUMENT), "Invalid Argument");
        assert_string_equal(N.nvmlErrorString(NVML_ERROR_NOT_SUPPORTED), "Not Supported");
        assert_string_equal(N.nvmlErrorString(NVML_ERROR_NO_PERMISSION), "Insufficient Permissions");
        assert_string_equal(N.nvmlErrorString(NVML_ERROR_ALREADY_INITIALIZED), "Already Initialized");
        assert_string_equal(N.nvmlErrorString(NVML_ERROR_NOT_FOUND), "Not Found");
        assert_string_equal(N.nvmlErrorString(NVML_ERROR_INSUFFICIENT_SIZE), "Insufficient Size");
        assert_string_equal(N.nvmlErrorString(NVML_ERROR_DRIVER_NOT_LOADED), "Driver Not Loaded");
        assert_string_equal(N.nvmlErrorString(NVML_ERROR_TIMEOUT), "Timeout");
        assert_string_equal(N.nvmlErrorString(NVML_ERROR_GPU_IS_LOST), "GPU is lost");
        assert_string_equal(N.nvmlErrorString(NVML_ERROR_UNKNOWN), "Unknown Error");
        assert_string_equal(N.nvmlErrorString((nvmlReturn_t)12345), "Unknown Error");
        /* works without init, like NVML's */
        assert_non_null(N.nvmlErrorString(NVML_ERROR_ARGUMENT_VERSION_MISMATCH));
}

/* Only the NVML API leaves the library: the parser and the state code linked inside stay hidden. */
static void test_exports_only_nvml(void **state) {
        (void)state;
        static const char *const internal[] = { "topo_parse", "topo_init",  "sim_state_open", "sim_node_load",
                                                "read_file",  "parse_size", "strscpy" };
        for (size_t i = 0; i < ELEMENTSOF(internal); i++)
                assert_null(dlsym(N.dl, internal[i]));
        assert_non_null(dlsym(N.dl, "nvmlInit_v2"));
}

/* ---- inventory ---- */

static void test_count_and_bad_index(void **state) {
        (void)state;
        start(SIM_TOPO("seed004-7gpu-p40-mlx4.topo"));
        unsigned n = 0;
        assert_int_equal(N.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
        assert_int_equal(n, 7);
        assert_int_equal(N.nvmlDeviceGetCount_v2(NULL), NVML_ERROR_INVALID_ARGUMENT);
        nvmlDevice_t d;
        assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(7, &d), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(0, NULL), NVML_ERROR_INVALID_ARGUMENT);
        unsigned idx;
        assert_int_equal(N.nvmlDeviceGetIndex(NULL, &idx), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N.nvmlDeviceGetIndex((nvmlDevice_t)&n, &idx), NVML_ERROR_INVALID_ARGUMENT);
}

static void test_inventory_matches_node_file(void **state) {
        (void)state;
        const char *file = SIM_TOPO("dgx-a100-nvswitch.topo");
        static struct topo t;
        assert_int_equal(sim_parse_file(file, &t), 0);
        start(file);
        char buf[96];
        assert_int_equal(N.nvmlSystemGetDriverVersion(buf, sizeof buf), NVML_SUCCESS);
        assert_string_equal(buf, t.driver_version);
        int cuda = 0;
        assert_int_equal(N.nvmlSystemGetCudaDriverVersion_v2(&cuda), NVML_SUCCESS);
        assert_int_equal(cuda, t.cuda_version);
        for (unsigned i = 0; i < t.n_gpus; i++) {
                nvmlDevice_t d = sim_dev(i);
                assert_int_equal(N.nvmlDeviceGetUUID(d, buf, NVML_DEVICE_UUID_BUFFER_SIZE), NVML_SUCCESS);
                assert_string_equal(buf, t.gpu[i].uuid);
                nvmlDevice_t by_uuid = NULL;
                assert_int_equal(N.nvmlDeviceGetHandleByUUID(buf, &by_uuid), NVML_SUCCESS);
                assert_ptr_equal(by_uuid, d);
                assert_int_equal(N.nvmlDeviceGetName(d, buf, NVML_DEVICE_NAME_V2_BUFFER_SIZE), NVML_SUCCESS);
                assert_string_equal(buf, t.gpu[i].name);
                unsigned minor = 99, idx = 99;
                assert_int_equal(N.nvmlDeviceGetMinorNumber(d, &minor), NVML_SUCCESS);
                assert_int_equal(minor, t.gpu[i].minor);
                assert_int_equal(N.nvmlDeviceGetIndex(d, &idx), NVML_SUCCESS);
                assert_int_equal(idx, i);
                nvmlPciInfo_t pci;
                assert_int_equal(N.nvmlDeviceGetPciInfo_v3(d, &pci), NVML_SUCCESS);
                assert_string_equal(pci.busId, t.gpu[i].bus_id);
                assert_int_equal(pci.pciDeviceId & 0xffff, 0x10de);
                int ma = 0, mi = 0;
                assert_int_equal(N.nvmlDeviceGetCudaComputeCapability(d, &ma, &mi), NVML_SUCCESS);
                assert_int_equal(ma, t.gpu[i].cc_major);
                assert_int_equal(mi, t.gpu[i].cc_minor);
                nvmlBrandType_t brand = -1;
                assert_int_equal(N.nvmlDeviceGetBrand(d, &brand), NVML_SUCCESS);
                assert_string_equal(compat_brand_name(brand), t.gpu[i].brand);
                assert_int_equal(N.nvmlDeviceGetBrand(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
        }
        nvmlDevice_t d;
        assert_int_equal(N.nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000", &d),
                         NVML_ERROR_NOT_FOUND);
}

static void test_string_buffers_too_small(void **state) {
        (void)state;
        start(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        nvmlDevice_t d = sim_dev(0);
        char buf[128];
        assert_int_equal(N.nvmlDeviceGetUUID(d, buf, sizeof buf), NVML_SUCCESS);
        size_t uuid_len = strlen(buf);
        assert_int_equal(N.nvmlDeviceGetUUID(d, buf, (unsigned)uuid_len), NVML_ERROR_INSUFFICIENT_SIZE);
        assert_int_equal(N.nvmlDeviceGetUUID(d, buf, (unsigned)uuid_len + 1), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetName(d, buf, 4), NVML_ERROR_INSUFFICIENT_SIZE);
        assert_int_equal(N.nvmlDeviceGetSerial(d, buf, 4), NVML_ERROR_INSUFFICIENT_SIZE);
        assert_int_equal(N.nvmlDeviceGetSerial(d, buf, NVML_DEVICE_SERIAL_BUFFER_SIZE), NVML_SUCCESS);
        assert_int_equal(N.nvmlSystemGetDriverVersion(buf, 2), NVML_ERROR_INSUFFICIENT_SIZE);
        assert_int_equal(N.nvmlDeviceGetName(d, NULL, 64), NVML_ERROR_INVALID_ARGUMENT);
}

static void test_memory_v1_and_v2(void **state) {
        (void)state;
        const char *file = SIM_TOPO("seed000-8gpu-pcie-2socket.topo");
        static struct topo t;
        assert_int_equal(sim_parse_file(file, &t), 0);
        start(file);
        nvmlDevice_t d = sim_dev(2);
        nvmlMemory_t m1;
        assert_int_equal(N.nvmlDeviceGetMemoryInfo(d, &m1), NVML_SUCCESS);
        assert_int_equal(m1.total, t.gpu[2].memory_total);
        assert_int_equal(m1.free + m1.used, m1.total);
        assert_true(m1.used > 0); /* the driver's reserve */
        nvmlMemory_v2_t m2 = { .version = nvmlMemory_v2 };
        assert_int_equal(N.nvmlDeviceGetMemoryInfo_v2(d, &m2), NVML_SUCCESS);
        assert_int_equal(m2.total, m1.total);
        assert_int_equal(m2.reserved, m1.used); /* nothing runs yet */
        assert_int_equal(m2.used, 0);
        assert_int_equal(m2.free + m2.reserved + m2.used, m2.total);
        assert_int_equal(N.nvmlDeviceGetMemoryInfo(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
}

static void test_memory_v2_version_mismatch(void **state) {
        (void)state;
        start(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        nvmlMemory_v2_t m2 = { .version = (unsigned)(sizeof(nvmlMemory_v2_t) | (1u << 24)) };
        assert_int_equal(N.nvmlDeviceGetMemoryInfo_v2(sim_dev(0), &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
        m2.version = 0;
        assert_int_equal(N.nvmlDeviceGetMemoryInfo_v2(sim_dev(0), &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
}

/* ---- topology ---- */

static nvmlGpuTopologyLevel_t expected_level(enum topo_level l) {
        switch (l) {
                case TOPO_LEVEL_PIX: return NVML_TOPOLOGY_SINGLE;
                case TOPO_LEVEL_PXB: return NVML_TOPOLOGY_MULTIPLE;
                case TOPO_LEVEL_PHB: return NVML_TOPOLOGY_HOSTBRIDGE;
                case TOPO_LEVEL_NODE: return NVML_TOPOLOGY_NODE;
                default: return NVML_TOPOLOGY_SYSTEM;
        }
}

static void check_levels(const char *file) {
        static struct topo t;
        assert_int_equal(sim_parse_file(file, &t), 0);
        start(file);
        for (unsigned a = 0; a < t.n_gpus; a++)
                for (unsigned b = 0; b < t.n_gpus; b++) {
                        nvmlGpuTopologyLevel_t lv = 99;
                        assert_int_equal(N.nvmlDeviceGetTopologyCommonAncestor(sim_dev(a), sim_dev(b), &lv),
                                         NVML_SUCCESS);
                        if (a == b)
                                assert_int_equal(lv, NVML_TOPOLOGY_INTERNAL);
                        else
                                assert_int_equal(lv, expected_level((enum topo_level)t.link[a][b].pcie));
                }
}

static void test_levels_pcie_file(void **state) {
        (void)state;
        check_levels(SIM_TOPO("pcie-8gpu-pix-phb-sys.topo"));
        /* spot checks straight from the file's text */
        nvmlGpuTopologyLevel_t lv;
        assert_int_equal(N.nvmlDeviceGetTopologyCommonAncestor(sim_dev(0), sim_dev(1), &lv), NVML_SUCCESS);
        assert_int_equal(lv, NVML_TOPOLOGY_SINGLE);
        assert_int_equal(N.nvmlDeviceGetTopologyCommonAncestor(sim_dev(0), sim_dev(2), &lv), NVML_SUCCESS);
        assert_int_equal(lv, NVML_TOPOLOGY_HOSTBRIDGE);
        assert_int_equal(N.nvmlDeviceGetTopologyCommonAncestor(sim_dev(3), sim_dev(4), &lv), NVML_SUCCESS);
        assert_int_equal(lv, NVML_TOPOLOGY_SYSTEM);
        assert_int_equal(N.nvmlDeviceGetTopologyCommonAncestor(sim_dev(3), sim_dev(4), NULL),
                         NVML_ERROR_INVALID_ARGUMENT);
}

static void test_levels_old_soc_file(void **state) {
        (void)state;
        check_levels(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        nvmlGpuTopologyLevel_t lv;
        assert_int_equal(N.nvmlDeviceGetTopologyCommonAncestor(sim_dev(2), sim_dev(7), &lv), NVML_SUCCESS);
        assert_int_equal(lv, NVML_TOPOLOGY_SYSTEM); /* SOC */
}

static void test_levels_nvlink_files(void **state) {
        (void)state;
        check_levels(SIM_TOPO("dgx1-v100-hybrid-cube-mesh.topo"));
        sim_shutdown_all();
        check_levels(SIM_TOPO("dgx-a100-nvswitch.topo"));
}

static void test_p2p_status(void **state) {
        (void)state;
        start(SIM_TOPO("dgx1-v100-hybrid-cube-mesh.topo"));
        int st = -1;
        assert_int_equal(N.nvmlDeviceGetP2PStatus(sim_dev(0), sim_dev(3), NVML_P2P_CAPS_INDEX_NVLINK, &st),
                         NVML_SUCCESS);
        assert_int_equal(st, NVML_P2P_STATUS_OK);
        assert_int_equal(N.nvmlDeviceGetP2PStatus(sim_dev(0), sim_dev(5), NVML_P2P_CAPS_INDEX_NVLINK, &st),
                         NVML_SUCCESS);
        assert_int_not_equal(st, NVML_P2P_STATUS_OK); /* SYS, no NVLink */
        assert_int_equal(N.nvmlDeviceGetP2PStatus(sim_dev(0), sim_dev(5), NVML_P2P_CAPS_INDEX_READ, &st), NVML_SUCCESS);
        assert_int_not_equal(st, NVML_P2P_STATUS_OK);
        assert_int_equal(N.nvmlDeviceGetP2PStatus(sim_dev(0), sim_dev(1), 17, &st), NVML_ERROR_INVALID_ARGUMENT);
}

/* Count, per GPU, the links whose remote is each peer; compare with the matrix's NV#. */
static void test_nvlinks_dgx1_direct(void **state) {
        (void)state;
        const char *file = SIM_TOPO("dgx1-v100-hybrid-cube-mesh.topo");
        static struct topo t;
        assert_int_equal(sim_parse_file(file, &t), 0);
        start(file);
        char bus[TOPO_MAX_GPUS][32];
        for (unsigned i = 0; i < t.n_gpus; i++) {
                nvmlPciInfo_t pci;
                assert_int_equal(N.nvmlDeviceGetPciInfo_v3(sim_dev(i), &pci), NVML_SUCCESS);
                strscpy(bus[i], pci.busId, sizeof bus[i]);
        }
        for (unsigned g = 0; g < t.n_gpus; g++) {
                unsigned per_peer[TOPO_MAX_GPUS] = { 0 }, links = 0;
                for (unsigned l = 0;; l++) {
                        nvmlEnableState_t on;
                        nvmlReturn_t r = N.nvmlDeviceGetNvLinkState(sim_dev(g), l, &on);
                        if (r == NVML_ERROR_INVALID_ARGUMENT)
                                break;
                        assert_int_equal(r, NVML_SUCCESS);
                        assert_int_equal(on, NVML_FEATURE_ENABLED);
                        nvmlPciInfo_t remote;
                        assert_int_equal(N.nvmlDeviceGetNvLinkRemotePciInfo_v2(sim_dev(g), l, &remote), NVML_SUCCESS);
                        nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
                        assert_int_equal(N.nvmlDeviceGetNvLinkRemoteDeviceType(sim_dev(g), l, &type), NVML_SUCCESS);
                        assert_int_equal(type, NVML_NVLINK_DEVICE_TYPE_GPU);
                        bool matched = false;
                        for (unsigned p = 0; p < t.n_gpus; p++)
                                if (streq(remote.busId, bus[p])) {
                                        assert_int_not_equal(p, g);
                                        per_peer[p]++;
                                        matched = true;
                                }
                        assert_true(matched);
                        links++;
                        assert_true(links <= 64);
                }
                assert_int_equal(links, 6); /* every V100 of a DGX-1 has 6 NVLinks */
                for (unsigned p = 0; p < t.n_gpus; p++)
                        if (p != g)
                                assert_int_equal(per_peer[p], t.link[g][p].nvlinks);
        }
        nvmlPciInfo_t remote;
        assert_int_equal(N.nvmlDeviceGetNvLinkRemotePciInfo_v2(sim_dev(0), 6, &remote), NVML_ERROR_INVALID_ARGUMENT);
        nvmlIntNvLinkDeviceType_t type;
        assert_int_equal(N.nvmlDeviceGetNvLinkRemoteDeviceType(sim_dev(0), 6, &type), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N.nvmlDeviceGetNvLinkRemoteDeviceType(sim_dev(0), 0, NULL), NVML_ERROR_INVALID_ARGUMENT);
}

static void check_nvswitch_links(unsigned n_gpus, unsigned want_links) {
        char bus[TOPO_MAX_GPUS][32];
        for (unsigned i = 0; i < n_gpus; i++) {
                nvmlPciInfo_t pci;
                assert_int_equal(N.nvmlDeviceGetPciInfo_v3(sim_dev(i), &pci), NVML_SUCCESS);
                strscpy(bus[i], pci.busId, sizeof bus[i]);
        }
        for (unsigned g = 0; g < n_gpus; g++) {
                unsigned links = 0;
                for (unsigned l = 0;; l++) {
                        nvmlPciInfo_t remote;
                        nvmlReturn_t r = N.nvmlDeviceGetNvLinkRemotePciInfo_v2(sim_dev(g), l, &remote);
                        if (r == NVML_ERROR_INVALID_ARGUMENT)
                                break;
                        assert_int_equal(r, NVML_SUCCESS);
                        for (unsigned p = 0; p < n_gpus; p++)
                                assert_string_not_equal(remote.busId, bus[p]);
                        assert_int_equal(remote.pciDeviceId, 0x1af110deu);
                        nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
                        assert_int_equal(N.nvmlDeviceGetNvLinkRemoteDeviceType(sim_dev(g), l, &type), NVML_SUCCESS);
                        assert_int_equal(type, NVML_NVLINK_DEVICE_TYPE_SWITCH);
                        links++;
                        assert_true(links <= 64);
                }
                assert_int_equal(links, want_links);
        }
}

static void test_nvlinks_dgx_a100_switch(void **state) {
        (void)state;
        /* The plain matrix: NV12 to all 7 peers can only be a switch fabric (12 links per GPU). */
        start(SIM_TOPO("dgx-a100-nvswitch.topo"));
        check_nvswitch_links(8, 12);
}

static void test_nvlinks_nvswitch_directive(void **state) {
        (void)state;
        _cleanup_(freep) char *text = NULL;
        size_t len;
        assert_int_equal(read_file(SIM_TOPO("dgx1-v100-hybrid-cube-mesh.topo"), 1 << 20, &text, &len), 0);
        char buf[8192], path[PATH_MAX];
        snprintf(buf, sizeof buf, "%s\nnvswitch\n", text);
        assert_int_equal(sim_write_node("switched.topo", buf, path, sizeof path), 0);
        start(path);
        check_nvswitch_links(8, 2); /* the largest NV# of each GPU */
        unlink(path);
}

static void test_pcie_gpu_has_no_nvlink(void **state) {
        (void)state;
        start(SIM_TOPO("pcie-8gpu-pix-phb-sys.topo"));
        nvmlEnableState_t on;
        assert_int_equal(N.nvmlDeviceGetNvLinkState(sim_dev(0), 0, &on), NVML_ERROR_NOT_SUPPORTED);
        nvmlIntNvLinkDeviceType_t type;
        assert_int_equal(N.nvmlDeviceGetNvLinkRemoteDeviceType(sim_dev(0), 0, &type), NVML_ERROR_NOT_SUPPORTED);
}

/* ---- affinity, capabilities, sensors ---- */

static void test_cpu_affinity_from_cpulist(void **state) {
        (void)state;
        start(SIM_TOPO("dgx-a100-nvswitch.topo")); /* GPU4: 112-127,240-255 */
        unsigned long set[4];
        assert_int_equal(N.nvmlDeviceGetCpuAffinity(sim_dev(4), 4, set), NVML_SUCCESS);
        assert_int_equal(set[0], 0);
        assert_int_equal(set[1], 0xffff000000000000UL); /* 112..127 */
        assert_int_equal(set[2], 0);
        assert_int_equal(set[3], 0xffff000000000000UL); /* 240..255 */
        unsigned long one;
        assert_int_equal(N.nvmlDeviceGetCpuAffinity(sim_dev(4), 1, &one), NVML_SUCCESS);
        assert_int_equal(one, 0);
        assert_int_equal(N.nvmlDeviceGetCpuAffinity(sim_dev(4), 0, set), NVML_ERROR_INVALID_ARGUMENT);
}

static void test_cpu_affinity_unknown(void **state) {
        (void)state;
        start(SIM_TOPO("seed000-8gpu-pcie-2socket.topo")); /* no CPU Affinity column */
        unsigned long set[2];
        assert_int_equal(N.nvmlDeviceGetCpuAffinity(sim_dev(0), 2, set), NVML_ERROR_NOT_SUPPORTED);
}

static void test_memory_affinity_from_numa(void **state) {
        (void)state;
        const char *file = SIM_TOPO("dgx-a100-nvswitch.topo");
        static struct topo t;
        assert_int_equal(sim_parse_file(file, &t), 0);
        start(file);
        for (unsigned i = 0; i < t.n_gpus; i++) {
                unsigned long set[2] = { ~0UL, ~0UL };
                assert_int_equal(N.nvmlDeviceGetMemoryAffinity(sim_dev(i), 2, set, NVML_AFFINITY_SCOPE_NODE),
                                 NVML_SUCCESS);
                assert_int_equal(set[0], 1UL << t.gpu[i].numa_node);
                assert_int_equal(set[1], 0);
        }
        unsigned long s;
        assert_int_equal(N.nvmlDeviceGetMemoryAffinity(sim_dev(0), 1, &s, 7), NVML_ERROR_INVALID_ARGUMENT);
}

static void test_mig_not_supported_by_default(void **state) {
        (void)state;
        start(SIM_TOPO("dgx-a100-nvswitch.topo"));
        unsigned cur, pend;
        assert_int_equal(N.nvmlDeviceGetMigMode(sim_dev(0), &cur, &pend), NVML_ERROR_NOT_SUPPORTED);
}

static void test_mig_mode_from_node(void **state) {
        (void)state;
        _cleanup_(freep) char *text = NULL;
        size_t len;
        assert_int_equal(read_file(SIM_TOPO("dgx-a100-nvswitch.topo"), 1 << 20, &text, &len), 0);
        char buf[8192], path[PATH_MAX];
        snprintf(buf, sizeof buf, "%s\ndefault name=\"NVIDIA A100-SXM4-40GB\"\ngpu 1 mig=on\ngpu 2 mig=off\n", text);
        assert_int_equal(sim_write_node("mig.topo", buf, path, sizeof path), 0);
        start(path);
        unsigned cur = 9, pend = 9;
        assert_int_equal(N.nvmlDeviceGetMigMode(sim_dev(1), &cur, &pend), NVML_SUCCESS);
        assert_int_equal(cur, NVML_DEVICE_MIG_ENABLE);
        assert_int_equal(pend, NVML_DEVICE_MIG_ENABLE);
        assert_int_equal(N.nvmlDeviceGetMigMode(sim_dev(2), &cur, &pend), NVML_SUCCESS);
        assert_int_equal(cur, NVML_DEVICE_MIG_DISABLE);
        unlink(path);
}

static void test_sensors(void **state) {
        (void)state;
        start(SIM_TOPO("seed004-7gpu-p40-mlx4.topo"));
        unsigned temp = 0, power = 0, limit = 0;
        assert_int_equal(N.nvmlDeviceGetTemperature(sim_dev(0), NVML_TEMPERATURE_GPU, &temp), NVML_SUCCESS);
        assert_in_range(temp, 20, 100);
        assert_int_equal(N.nvmlDeviceGetTemperature(sim_dev(0), 5, &temp), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N.nvmlDeviceGetEnforcedPowerLimit(sim_dev(0), &limit), NVML_SUCCESS);
        assert_true(limit > 0);
        assert_int_equal(N.nvmlDeviceGetPowerUsage(sim_dev(0), &power), NVML_SUCCESS);
        assert_true(power > 0 && power <= limit);
        nvmlUtilization_t u = { 7, 7 };
        assert_int_equal(N.nvmlDeviceGetUtilizationRates(sim_dev(0), &u), NVML_SUCCESS);
        assert_int_equal(u.gpu, 0); /* idle node */
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_teardown(test_no_node_is_no_driver, sim_test_teardown),
                cmocka_unit_test_teardown(test_bad_node_file_is_no_driver, sim_test_teardown),
                cmocka_unit_test_teardown(test_calls_before_init_are_uninitialized, sim_test_teardown),
                cmocka_unit_test_teardown(test_init_is_reference_counted, sim_test_teardown),
                cmocka_unit_test_teardown(test_handles_are_stable_across_reinit, sim_test_teardown),
                cmocka_unit_test_teardown(test_init_flags_unknown_rejected, sim_test_teardown),
                cmocka_unit_test_teardown(test_error_strings, sim_test_teardown),
                cmocka_unit_test_teardown(test_exports_only_nvml, sim_test_teardown),
                cmocka_unit_test_teardown(test_count_and_bad_index, sim_test_teardown),
                cmocka_unit_test_teardown(test_inventory_matches_node_file, sim_test_teardown),
                cmocka_unit_test_teardown(test_string_buffers_too_small, sim_test_teardown),
                cmocka_unit_test_teardown(test_memory_v1_and_v2, sim_test_teardown),
                cmocka_unit_test_teardown(test_memory_v2_version_mismatch, sim_test_teardown),
                cmocka_unit_test_teardown(test_levels_pcie_file, sim_test_teardown),
                cmocka_unit_test_teardown(test_levels_old_soc_file, sim_test_teardown),
                cmocka_unit_test_teardown(test_levels_nvlink_files, sim_test_teardown),
                cmocka_unit_test_teardown(test_p2p_status, sim_test_teardown),
                cmocka_unit_test_teardown(test_nvlinks_dgx1_direct, sim_test_teardown),
                cmocka_unit_test_teardown(test_nvlinks_dgx_a100_switch, sim_test_teardown),
                cmocka_unit_test_teardown(test_nvlinks_nvswitch_directive, sim_test_teardown),
                cmocka_unit_test_teardown(test_pcie_gpu_has_no_nvlink, sim_test_teardown),
                cmocka_unit_test_teardown(test_cpu_affinity_from_cpulist, sim_test_teardown),
                cmocka_unit_test_teardown(test_cpu_affinity_unknown, sim_test_teardown),
                cmocka_unit_test_teardown(test_memory_affinity_from_numa, sim_test_teardown),
                cmocka_unit_test_teardown(test_mig_not_supported_by_default, sim_test_teardown),
                cmocka_unit_test_teardown(test_mig_mode_from_node, sim_test_teardown),
                cmocka_unit_test_teardown(test_sensors, sim_test_teardown),
        };
        return cmocka_run_group_tests(tests, sim_test_setup, sim_test_group_teardown);
}
