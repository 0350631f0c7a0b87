/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test-nvml — the NVML binding against fake NVML libraries (tests/unit/fake-nvml/): the error
 * translation, loading failures, old-driver fallbacks, a small node with NVLinks, an NVSwitch,
 * a lost and a forbidden GPU, the per-device queries and events. The simulator-based tests are
 * in test-nvml-sim.c.
 */
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "helpers.h"

#include "fake-nvml.h"
#include "nvml/nvml.h"
#include "util/util.h"

/* The fake's control knobs, reached in the library instance the binding loaded. */
static struct {
        void *dl;
        __typeof__(&fake_nvml_reset) reset;
        __typeof__(&fake_nvml_init_count) init_count;
        __typeof__(&fake_nvml_set_fault) set_fault;
        __typeof__(&fake_nvml_push_event) push_event;
} fake;

struct node_fixture {
        struct nvml *n;
        struct topo t;
};

static int fake_load(void) {
        fake.dl = dlopen(FAKE_NVML_NODE, RTLD_NOW | RTLD_LOCAL);
        if (!fake.dl)
                return -1;
        fake.reset = (__typeof__(fake.reset))dlsym(fake.dl, "fake_nvml_reset");
        fake.init_count = (__typeof__(fake.init_count))dlsym(fake.dl, "fake_nvml_init_count");
        fake.set_fault = (__typeof__(fake.set_fault))dlsym(fake.dl, "fake_nvml_set_fault");
        fake.push_event = (__typeof__(fake.push_event))dlsym(fake.dl, "fake_nvml_push_event");
        if (!fake.reset || !fake.init_count || !fake.set_fault || !fake.push_event)
                return -1;
        fake.reset();
        return 0;
}

static int node_setup(void **state) {
        if (fake_load() < 0)
                return -1;
        struct node_fixture *f = calloc(1, sizeof(*f));
        if (!f)
                return -1;
        struct nvml_error err;
        if (nvml_open(FAKE_NVML_NODE, &f->n, &err) < 0) {
                free(f);
                return -1;
        }
        *state = f;
        return 0;
}

static int node_setup_inventory(void **state) {
        if (node_setup(state) < 0)
                return -1;
        struct node_fixture *f = *state;
        return nvml_inventory(f->n, &f->t, NULL) < 0 ? -1 : 0;
}

static int node_teardown(void **state) {
        struct node_fixture *f = *state;
        if (f) {
                nvml_close(f->n);
                free(f);
        }
        if (fake.dl) {
                fake.reset();
                dlclose(fake.dl);
                fake.dl = NULL;
        }
        return 0;
}

/* ---- error translation ---- */

static void test_errno_mapping(void **state) {
        (void)state;
        assert_int_equal(nvml_errno(NVML_SUCCESS), 0);
        assert_int_equal(nvml_errno(NVML_ERROR_INVALID_ARGUMENT), -EINVAL);
        assert_int_equal(nvml_errno(NVML_ERROR_NOT_SUPPORTED), -EOPNOTSUPP);
        assert_int_equal(nvml_errno(NVML_ERROR_NO_PERMISSION), -EPERM);
        assert_int_equal(nvml_errno(NVML_ERROR_INSUFFICIENT_SIZE), -ENOBUFS);
        assert_int_equal(nvml_errno(NVML_ERROR_DRIVER_NOT_LOADED), -ENXIO);
        assert_int_equal(nvml_errno(NVML_ERROR_TIMEOUT), -ETIMEDOUT);
        assert_int_equal(nvml_errno(NVML_ERROR_FUNCTION_NOT_FOUND), -ENOSYS);
        assert_int_equal(nvml_errno(NVML_ERROR_GPU_IS_LOST), -ENODEV);
        assert_int_equal(nvml_errno(NVML_ERROR_UNKNOWN), -EIO);
}

static void test_errno_unknown_code_is_eio(void **state) {
        (void)state;
        assert_int_equal(nvml_errno(12345), -EIO);
        assert_int_equal(nvml_errno(-7), -EIO);
}

static void test_errno_lost_is_unique(void **state) {
        (void)state;
        /* Health relies on -ENODEV meaning "lost" and nothing else. */
        for (int code = 0; code <= 1000; code++)
                if (code != NVML_ERROR_GPU_IS_LOST)
                        assert_int_not_equal(nvml_errno(code), -ENODEV);
}

static void test_code_names(void **state) {
        (void)state;
        assert_string_equal(nvml_code_name(NVML_ERROR_GPU_IS_LOST), "GPU_IS_LOST");
        assert_string_equal(nvml_code_name(NVML_ERROR_NO_PERMISSION), "NO_PERMISSION");
        assert_string_equal(nvml_code_name(4242), "UNKNOWN");
}

/* ---- loading ---- */

static void test_open_nonexistent_path(void **state) {
        (void)state;
        struct nvml *n = NULL;
        struct nvml_error err = { 0 };
        assert_int_equal(nvml_open("/nonexistent/libnvidia-ml.so.1", &n, &err), -ELIBACC);
        assert_null(n);
        assert_int_equal(err.nvml_code, NVML_ERROR_LIBRARY_NOT_FOUND);
        assert_string_equal(err.func, "dlopen");
        assert_non_null(strstr(err.text, "/nonexistent/libnvidia-ml.so.1"));
}

static void test_open_default_is_versioned_soname(void **state) {
        (void)state;
        struct nvml *n = NULL;
        struct nvml_error err = { 0 };
        int r = nvml_open(NULL, &n, &err);
        if (r == 0) { /* a machine with a driver (or the simulator on the library path) */
                nvml_close(n);
                return;
        }
        assert_null(n);
        if (r == -ELIBACC)
                assert_non_null(strstr(err.text, "libnvidia-ml.so.1"));
}

static void test_open_missing_init(void **state) {
        (void)state;
        struct nvml *n = NULL;
        struct nvml_error err = { 0 };
        assert_int_equal(nvml_open(FAKE_NVML_NOINIT, &n, &err), -ENOSYS);
        assert_null(n);
        assert_int_equal(err.nvml_code, NVML_ERROR_FUNCTION_NOT_FOUND);
        assert_string_equal(err.func, "nvmlInit_v2");
        assert_non_null(strstr(err.text, "nvmlInit_v2"));
}

static void test_open_missing_shutdown(void **state) {
        (void)state;
        struct nvml *n = NULL;
        struct nvml_error err = { 0 };
        assert_int_equal(nvml_open(FAKE_NVML_NOSHUTDOWN, &n, &err), -ENOSYS);
        assert_null(n);
        assert_string_equal(err.func, "nvmlShutdown");
}

static void test_open_init_fails_keeps_text(void **state) {
        (void)state;
        struct nvml *n = NULL;
        struct nvml_error err = { 0 };
        assert_int_equal(nvml_open(FAKE_NVML_INITFAIL, &n, &err), -ENXIO);
        assert_null(n);
        assert_int_equal(err.nvml_code, NVML_ERROR_DRIVER_NOT_LOADED);
        assert_string_equal(err.func, "nvmlInit_v2");
        assert_string_equal(err.text, "Driver Not Loaded");
}

static void test_open_error_out_may_be_null(void **state) {
        (void)state;
        struct nvml *n = NULL;
        assert_int_equal(nvml_open("/nonexistent/libnvidia-ml.so.1", &n, NULL), -ELIBACC);
        assert_int_equal(nvml_open(FAKE_NVML_INITFAIL, &n, NULL), -ENXIO);
        assert_null(n);
}

static void test_open_bad_arguments(void **state) {
        (void)state;
        struct nvml *n = NULL;
        struct nvml_error err;
        assert_int_equal(nvml_open(FAKE_NVML_NODE, NULL, &err), -EINVAL);
        assert_int_equal(nvml_open("", &n, &err), -EINVAL);
        assert_null(n);
}

static void test_close_null(void **state) {
        (void)state;
        assert_null(nvml_close(NULL));
}

static void test_open_close_balances_init(void **state) {
        (void)state;
        assert_int_equal(fake_load(), 0);
        struct nvml *a, *b;
        assert_int_equal(nvml_open(FAKE_NVML_NODE, &a, NULL), 0);
        assert_int_equal(fake.init_count(), 1);
        assert_int_equal(nvml_open(FAKE_NVML_NODE, &b, NULL), 0);
        assert_int_equal(fake.init_count(), 2);
        assert_null(nvml_close(a));
        assert_int_equal(fake.init_count(), 1);
        assert_null(nvml_close(b));
        assert_int_equal(fake.init_count(), 0);
        dlclose(fake.dl);
        fake.dl = NULL;
}

/* ---- an old driver: unversioned symbols only, no nvmlErrorString ---- */

static void test_old_symbols_fall_back(void **state) {
        (void)state;
        struct nvml *n;
        assert_int_equal(nvml_open(FAKE_NVML_OLD, &n, NULL), 0);
        assert_false(nvml_has_symbol(n, "nvmlInit_v2"));
        assert_true(nvml_has_symbol(n, "nvmlInit"));
        assert_false(nvml_has_symbol(n, "no_such_symbol"));
        unsigned count;
        assert_int_equal(nvml_device_count(n, &count, NULL), 0);
        assert_int_equal(count, 2);
        nvml_close(n);
}

static void test_old_inventory(void **state) {
        (void)state;
        struct nvml *n;
        struct topo t;
        assert_int_equal(nvml_open(FAKE_NVML_OLD, &n, NULL), 0);
        assert_int_equal(nvml_inventory(n, &t, NULL), 0);
        assert_int_equal(t.n_gpus, 2);
        assert_int_equal(t.cuda_version, 11040);   /* unversioned CUDA version call */
        assert_string_equal(t.driver_version, ""); /* not exported: unknown */
        assert_int_equal(t.gpu[0].state, TOPO_GPU_OK);
        assert_string_equal(t.gpu[0].uuid, "GPU-00000000-0000-0000-0000-00000000old0");
        assert_int_equal(t.gpu[0].memory_total, 12ULL << 30); /* nvmlDeviceGetMemoryInfo (v1) */
        assert_int_equal(t.gpu[0].memory_used, 3ULL << 30);
        assert_string_equal(t.gpu[0].bus_id, "");
        assert_int_equal(t.gpu[0].minor, -1);
        assert_int_equal(t.gpu[0].numa_node, -1);
        assert_int_equal(t.gpu[0].mig_mode, -1);
        nvml_close(n);
}

static void test_old_error_text_without_errorstring(void **state) {
        (void)state;
        struct nvml *n;
        struct topo t;
        assert_int_equal(nvml_open(FAKE_NVML_OLD, &n, NULL), 0);
        assert_int_equal(nvml_inventory(n, &t, NULL), 0);
        assert_int_equal(t.gpu[1].state, TOPO_GPU_NO_PERMISSION);
        assert_non_null(strstr(t.gpu[1].state_text, "nvmlDeviceGetHandleByIndex"));
        assert_non_null(strstr(t.gpu[1].state_text, "NO_PERMISSION"));
        nvml_close(n);
}

static void test_old_processes_v1_layout(void **state) {
        (void)state;
        struct nvml *n;
        assert_int_equal(nvml_open(FAKE_NVML_OLD, &n, NULL), 0);
        _cleanup_(freep) struct nvml_process *p = NULL;
        size_t np = 0;
        assert_int_equal(nvml_device_processes(n, 0, &p, &np, NULL), 0);
        assert_int_equal(np, 2);
        assert_int_equal(p[0].pid, 7);
        assert_int_equal(p[0].used_memory, 7ULL << 20);
        assert_int_equal(p[1].pid, 8);
        assert_int_equal(p[1].used_memory, 8ULL << 20);
        assert_int_equal(p[1].gpu_instance, UINT32_MAX);
        nvml_close(n);
}

static void test_old_missing_optional_is_enosys(void **state) {
        (void)state;
        struct nvml *n;
        assert_int_equal(nvml_open(FAKE_NVML_OLD, &n, NULL), 0);
        struct nvml_utilization u;
        struct nvml_error err = { 0 };
        assert_int_equal(nvml_device_utilization(n, 0, &u, &err), -ENOSYS);
        assert_int_equal(err.nvml_code, NVML_ERROR_FUNCTION_NOT_FOUND);
        assert_string_equal(err.func, "nvmlDeviceGetUtilizationRates");
        struct nvml_events *e = NULL;
        assert_int_equal(nvml_events_new(n, 0, &e, &err), -ENOSYS);
        assert_null(e);
        int mode; /* a driver without the compute mode calls */
        assert_int_equal(nvml_device_compute_mode(n, 0, &mode, &err), -ENOSYS);
        assert_int_equal(nvml_device_set_compute_mode(n, 0, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS, &err), -ENOSYS);
        assert_string_equal(err.func, "nvmlDeviceSetComputeMode");
        nvml_close(n);
}

/* ---- the fake node: inventory ---- */

static void test_inventory_versions(void **state) {
        struct node_fixture *f = *state;
        assert_string_equal(f->t.driver_version, "535.104.05");
        assert_int_equal(f->t.cuda_version, 12020);
        assert_int_equal(f->t.n_gpus, 6);
        assert_int_equal(f->t.n_nics, 0);
}

static void test_inventory_gpu_fields(void **state) {
        struct node_fixture *f = *state;
        const struct topo_gpu *g = &f->t.gpu[2];
        assert_int_equal(g->index, 2);
        assert_int_equal(g->state, TOPO_GPU_OK);
        assert_string_equal(g->uuid, "GPU-fake-2");
        assert_string_equal(g->name, "Fake A100-SXM4-40GB");
        assert_int_equal(g->memory_total, 40ULL << 30); /* from _v2, not the unversioned call */
        assert_int_equal(g->memory_used, 3ULL << 30);
        assert_string_equal(g->bus_id, "00000000:3D:00.0");
        assert_int_equal(g->minor, 12);
        assert_int_equal(g->cc_major, 8);
        assert_int_equal(g->cc_minor, 0);
        assert_int_equal(g->power_limit_mw, 400000);
}

static void test_inventory_mig_mode(void **state) {
        struct node_fixture *f = *state;
        assert_int_equal(f->t.gpu[0].mig_mode, -1); /* NOT_SUPPORTED */
        assert_int_equal(f->t.gpu[1].mig_mode, 1);
        assert_int_equal(f->t.gpu[2].mig_mode, 0);
}

static void test_inventory_cpu_affinity(void **state) {
        struct node_fixture *f = *state;
        assert_string_equal(f->t.gpu[0].cpu_affinity, "0-9,20-29");
        assert_string_equal(f->t.gpu[3].cpu_affinity, "10-19,30-39,64-65");
}

static void test_inventory_numa_from_nvml(void **state) {
        struct node_fixture *f = *state;
        assert_int_equal(f->t.gpu[0].numa_node, 0);
        assert_int_equal(f->t.gpu[1].numa_node, 0);
}

static int write_text(const char *path, const char *text) {
        FILE *fp = fopen(path, "we");
        if (!fp)
                return -1;
        fputs(text, fp);
        return fclose(fp);
}

static void test_inventory_numa_sysfs_fallback(void **state) {
        struct node_fixture *f = *state;
        char *root = test_tmpdir_new("test-nvml");
        char path[512];
        const char *parts[] = { "/bus", "/bus/pci", "/bus/pci/devices", "/bus/pci/devices/0000:3d:00.0",
                                "/bus/pci/devices/0000:3e:00.0" };
        for (size_t i = 0; i < ELEMENTSOF(parts); i++) {
                snprintf(path, sizeof(path), "%s%s", root, parts[i]);
                assert_int_equal(mkdir(path, 0755), 0);
        }
        snprintf(path, sizeof(path), "%s/bus/pci/devices/0000:3d:00.0/numa_node", root);
        assert_int_equal(write_text(path, "1\n"), 0);
        char path3[512];
        snprintf(path3, sizeof(path3), "%s/bus/pci/devices/0000:3e:00.0/numa_node", root);
        assert_int_equal(write_text(path3, "-1\n"), 0);

        assert_int_equal(nvml_set_sysfs_root(f->n, root), 0);
        struct topo t;
        assert_int_equal(nvml_inventory(f->n, &t, NULL), 0);
        assert_int_equal(t.gpu[2].numa_node, 1);  /* NVML: NOT_SUPPORTED → sysfs */
        assert_int_equal(t.gpu[3].numa_node, -1); /* NVML: empty set → sysfs says none */
        assert_int_equal(t.gpu[0].numa_node, 0);  /* NVML wins where it answers */

        assert_int_equal(test_tmpdir_free(root), 0);
}

static void test_inventory_numa_no_sysfs(void **state) {
        struct node_fixture *f = *state;
        assert_int_equal(nvml_set_sysfs_root(f->n, "/nonexistent-sysfs"), 0);
        struct topo t;
        assert_int_equal(nvml_inventory(f->n, &t, NULL), 0);
        assert_int_equal(t.gpu[2].numa_node, -1);
}

static void test_set_sysfs_root_bad(void **state) {
        struct node_fixture *f = *state;
        assert_int_equal(nvml_set_sysfs_root(f->n, ""), -EINVAL);
        assert_int_equal(nvml_set_sysfs_root(f->n, NULL), -EINVAL);
        char longpath[600];
        memset(longpath, 'a', sizeof(longpath) - 1);
        longpath[sizeof(longpath) - 1] = '\0';
        assert_int_equal(nvml_set_sysfs_root(f->n, longpath), -ENAMETOOLONG);
}

static void test_inventory_pcie_levels(void **state) {
        struct node_fixture *f = *state;
        assert_int_equal(topo_get_link(&f->t, 0, 1).pcie, TOPO_LEVEL_PIX);
        assert_int_equal(topo_get_link(&f->t, 2, 3).pcie, TOPO_LEVEL_PXB);
        assert_int_equal(topo_get_link(&f->t, 0, 2).pcie, TOPO_LEVEL_SYS);
        assert_int_equal(topo_get_link(&f->t, 3, 1).pcie, TOPO_LEVEL_SYS);
        assert_int_equal(topo_get_link(&f->t, 2, 2).pcie, TOPO_LEVEL_SELF);
}

static void test_inventory_direct_nvlinks(void **state) {
        struct node_fixture *f = *state;
        /* GPU1 names GPU0 in the legacy lower-case form; both ends agree on 2 links. */
        assert_int_equal(topo_get_link(&f->t, 0, 1).nvlinks, 2);
        assert_int_equal(topo_get_link(&f->t, 1, 0).nvlinks, 2);
        assert_int_equal(topo_get_link(&f->t, 1, 3).nvlinks, 0);
}

static void test_inventory_nvswitch_links(void **state) {
        struct node_fixture *f = *state;
        /* GPU0 has 3 switch links, GPU2 2 (on links 38 and 39: probing went past 36; the remote
         * type of link 39 is not known, the bus id says switch). */
        assert_true(f->t.nvswitch);
        assert_int_equal(topo_get_link(&f->t, 0, 2).nvlinks, 2);
        assert_int_equal(topo_get_link(&f->t, 1, 2).nvlinks, 0); /* GPU1 has no switch link */
        assert_int_equal(topo_get_link(&f->t, 0, 3).nvlinks, 0); /* GPU3: NVLink not supported */
}

static void test_inventory_npu_link_not_a_switch(void **state) {
        struct node_fixture *f = *state;
        /* GPU1's links 4,5 end at an IBM NPU: its bus id is no GPU's and its device id no GPU's,
         * so the bus-id heuristic would take it for a switch; the remote device type says NPU. */
        assert_true(nvml_has_symbol(f->n, "nvmlDeviceGetNvLinkRemoteDeviceType"));
        assert_int_equal(topo_get_link(&f->t, 1, 2).nvlinks, 0);
        assert_int_equal(topo_get_link(&f->t, 0, 1).nvlinks, 2);
}

/* A driver before 460: no remote device type, the bus-id heuristic for every link. */
static int nolinktype_setup(void **state) {
        struct node_fixture *f = calloc(1, sizeof(*f));
        if (!f)
                return -1;
        *state = f;
        if (nvml_open(FAKE_NVML_NOLINKTYPE, &f->n, NULL) < 0)
                return -1;
        return nvml_inventory(f->n, &f->t, NULL) < 0 ? -1 : 0;
}

static void test_inventory_without_link_type_heuristic(void **state) {
        struct node_fixture *f = *state;
        assert_false(nvml_has_symbol(f->n, "nvmlDeviceGetNvLinkRemoteDeviceType"));
        /* switches are still found by their bus ids, unqueried GPUs still not taken for switches */
        assert_true(f->t.nvswitch);
        assert_int_equal(topo_get_link(&f->t, 0, 2).nvlinks, 2);
        assert_int_equal(topo_get_link(&f->t, 0, 3).nvlinks, 0);
        /* the heuristic's known limit: GPU1's two NPU links count as switch links, joining GPU1 to
         * GPU0 (2 direct + 2) and GPU2 (2) through a fabric that is not there */
        assert_int_equal(topo_get_link(&f->t, 0, 1).nvlinks, 4);
        assert_int_equal(topo_get_link(&f->t, 1, 2).nvlinks, 2);
}

static void test_inventory_link_to_unqueried_gpu_not_a_switch(void **state) {
        struct node_fixture *f = *state;
        /* GPU1's links 2,3 end at lost GPU4 (bus id unknown to us, a GPU's PCI device id): if they
         * were taken for switch links, GPU1 would join GPU0 and GPU2 through the "fabric". */
        assert_int_equal(topo_get_link(&f->t, 0, 1).nvlinks, 2);
        assert_int_equal(topo_get_link(&f->t, 1, 2).nvlinks, 0);
}

static void test_inventory_lost_gpu(void **state) {
        struct node_fixture *f = *state;
        const struct topo_gpu *g = &f->t.gpu[4];
        assert_int_equal(g->state, TOPO_GPU_LOST);
        assert_string_equal(g->state_text, "nvmlDeviceGetUUID: GPU is lost");
        assert_int_equal(topo_get_link(&f->t, 0, 4).pcie, TOPO_LEVEL_UNKNOWN);
        assert_int_equal(f->t.gpu[3].state, TOPO_GPU_OK);
}

static void test_inventory_forbidden_gpu(void **state) {
        struct node_fixture *f = *state;
        const struct topo_gpu *g = &f->t.gpu[5];
        assert_int_equal(g->index, 5);
        assert_int_equal(g->state, TOPO_GPU_NO_PERMISSION);
        assert_string_equal(g->state_text, "nvmlDeviceGetHandleByIndex_v2: Insufficient Permissions");
        assert_string_equal(g->uuid, "");
        assert_int_equal(topo_get_link(&f->t, 5, 0).pcie, TOPO_LEVEL_UNKNOWN);
}

static void test_inventory_lost_midway(void **state) {
        struct node_fixture *f = *state;
        /* GPU 1 answers its handle but is lost for queries: LOST, the rest of the node read. */
        fake.set_fault(1, NVML_SUCCESS, NVML_ERROR_GPU_IS_LOST);
        struct topo t;
        assert_int_equal(nvml_inventory(f->n, &t, NULL), 0);
        assert_int_equal(t.gpu[1].state, TOPO_GPU_LOST);
        assert_int_equal(t.gpu[0].state, TOPO_GPU_OK);
        assert_int_equal(topo_get_link(&t, 0, 1).pcie, TOPO_LEVEL_UNKNOWN);
        assert_int_equal(topo_get_link(&t, 0, 2).nvlinks, 2);
}

static void test_inventory_other_error_is_error_state(void **state) {
        struct node_fixture *f = *state;
        fake.set_fault(3, NVML_ERROR_UNKNOWN, NVML_SUCCESS);
        struct topo t;
        assert_int_equal(nvml_inventory(f->n, &t, NULL), 0);
        assert_int_equal(t.gpu[3].state, TOPO_GPU_ERROR);
        assert_non_null(strstr(t.gpu[3].state_text, "Unknown Error"));
}

static void test_inventory_recovers(void **state) {
        struct node_fixture *f = *state;
        fake.set_fault(4, NVML_SUCCESS, NVML_SUCCESS);
        fake.set_fault(5, NVML_SUCCESS, NVML_SUCCESS);
        struct topo t;
        assert_int_equal(nvml_inventory(f->n, &t, NULL), 0);
        assert_int_equal(t.gpu[4].state, TOPO_GPU_OK);
        assert_int_equal(t.gpu[5].state, TOPO_GPU_OK);
        assert_string_equal(t.gpu[5].uuid, "GPU-fake-5");
        assert_int_equal(topo_get_link(&t, 4, 5).pcie, TOPO_LEVEL_SYS);
}

static void test_inventory_bad_arguments(void **state) {
        struct node_fixture *f = *state;
        struct topo t;
        assert_int_equal(nvml_inventory(NULL, &t, NULL), -EINVAL);
        assert_int_equal(nvml_inventory(f->n, NULL, NULL), -EINVAL);
}

/* ---- per-device queries ---- */

static void test_processes_insufficient_size(void **state) {
        struct node_fixture *f = *state;
        _cleanup_(freep) struct nvml_process *p = NULL;
        size_t np = 0;
        assert_int_equal(nvml_device_processes(f->n, 0, &p, &np, NULL), 0);
        assert_int_equal(np, 3);
        assert_int_equal(p[2].pid, 102);
        assert_int_equal(p[2].used_memory, 102ULL << 20);
        assert_int_equal(p[2].compute_instance, UINT32_MAX);
}

static void test_processes_grow_between_calls(void **state) {
        struct node_fixture *f = *state;
        _cleanup_(freep) struct nvml_process *p = NULL;
        size_t np = 0;
        assert_int_equal(nvml_device_processes(f->n, 1, &p, &np, NULL), 0);
        assert_int_equal(np, 20);
        assert_int_equal(p[19].pid, 119);
}

static void test_processes_none(void **state) {
        struct node_fixture *f = *state;
        struct nvml_process *p = (void *)1;
        size_t np = 99;
        assert_int_equal(nvml_device_processes(f->n, 2, &p, &np, NULL), 0);
        assert_null(p);
        assert_int_equal(np, 0);
}

static void test_query_lost_gpu(void **state) {
        struct node_fixture *f = *state;
        fake.set_fault(0, NVML_SUCCESS, NVML_ERROR_GPU_IS_LOST);
        struct nvml_process *p = NULL;
        size_t np = 0;
        struct nvml_error err = { 0 };
        assert_int_equal(nvml_device_processes(f->n, 0, &p, &np, &err), -ENODEV);
        assert_null(p);
        assert_int_equal(err.nvml_code, NVML_ERROR_GPU_IS_LOST);
        assert_string_equal(err.func, "nvmlDeviceGetComputeRunningProcesses_v3");
        assert_string_equal(err.text, "GPU is lost");
}

static void test_query_forbidden_gpu(void **state) {
        struct node_fixture *f = *state;
        unsigned t;
        struct nvml_error err = { 0 };
        assert_int_equal(nvml_device_temperature(f->n, 5, &t, &err), -EPERM);
        assert_string_equal(err.func, "nvmlDeviceGetHandleByIndex_v2");
}

static void test_query_bad_index(void **state) {
        struct node_fixture *f = *state;
        unsigned t;
        struct nvml_error err = { 0 };
        assert_int_equal(nvml_device_temperature(f->n, TOPO_MAX_GPUS, &t, &err), -EINVAL);
        assert_int_equal(err.nvml_code, NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(nvml_device_temperature(f->n, 6, &t, &err), -EINVAL); /* NVML says so */
}

static void test_utilization(void **state) {
        struct node_fixture *f = *state;
        struct nvml_utilization u;
        assert_int_equal(nvml_device_utilization(f->n, 0, &u, NULL), 0);
        assert_int_equal(u.gpu, 42);
        assert_int_equal(u.memory, 17);
}

static void test_process_utilization_all(void **state) {
        struct node_fixture *f = *state;
        _cleanup_(freep) struct nvml_process_sample *s = NULL;
        size_t ns = 0;
        assert_int_equal(nvml_device_process_utilization(f->n, 0, 0, &s, &ns, NULL), 0);
        assert_int_equal(ns, 2);
        assert_int_equal(s[1].pid, 101);
        assert_int_equal(s[1].timestamp_us, 2000);
        assert_int_equal(s[1].sm, 60);
        assert_int_equal(s[1].memory, 20);
        assert_int_equal(s[1].encoder, 2);
        assert_int_equal(s[1].decoder, 3);
}

static void test_process_utilization_since(void **state) {
        struct node_fixture *f = *state;
        _cleanup_(freep) struct nvml_process_sample *s = NULL;
        size_t ns = 0;
        assert_int_equal(nvml_device_process_utilization(f->n, 0, 1000, &s, &ns, NULL), 0);
        assert_int_equal(ns, 1);
        assert_int_equal(s[0].pid, 101);
}

static void test_process_utilization_nothing_newer(void **state) {
        struct node_fixture *f = *state;
        struct nvml_process_sample *s = NULL;
        size_t ns = 7;
        assert_int_equal(nvml_device_process_utilization(f->n, 0, 5000, &s, &ns, NULL), 0);
        assert_null(s);
        assert_int_equal(ns, 0);
}

static void test_temperature_and_power(void **state) {
        struct node_fixture *f = *state;
        unsigned c = 0, mw = 0;
        assert_int_equal(nvml_device_temperature(f->n, 1, &c, NULL), 0);
        assert_int_equal(c, 55);
        assert_int_equal(nvml_device_power(f->n, 1, &mw, NULL), 0);
        assert_int_equal(mw, 123456);
}

/* The compute mode read and set; NVML's refusal (NO_PERMISSION: not root) is -EPERM with NVML's function and text. */
static void test_compute_mode(void **state) {
        struct node_fixture *f = *state;
        int mode = -1;
        assert_int_equal(nvml_device_set_compute_mode(f->n, 1, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS, NULL), 0);
        assert_int_equal(nvml_device_compute_mode(f->n, 1, &mode, NULL), 0);
        assert_int_equal(mode, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS);
        struct nvml_error err = { 0 };
        assert_int_equal(nvml_device_set_compute_mode(f->n, 3, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS, &err), -EPERM);
        assert_int_equal(err.nvml_code, NVML_ERROR_NO_PERMISSION);
        assert_string_equal(err.func, "nvmlDeviceSetComputeMode");
        assert_string_equal(err.text, "Insufficient Permissions");
        assert_int_equal(nvml_device_compute_mode(f->n, 4, &mode, &err), -ENODEV); /* lost */
        assert_int_equal(nvml_device_set_compute_mode(f->n, 1, -1, NULL), -EINVAL);
        assert_int_equal(nvml_device_compute_mode(f->n, 1, NULL, NULL), -EINVAL);
}

static void test_index_by_uuid(void **state) {
        struct node_fixture *f = *state;
        unsigned idx = 99;
        assert_int_equal(nvml_device_index_by_uuid(f->n, "GPU-fake-3", &idx, NULL), 0);
        assert_int_equal(idx, 3);
        struct nvml_error err;
        assert_int_equal(nvml_device_index_by_uuid(f->n, "GPU-nope", &idx, &err), -ENOENT);
        assert_int_equal(err.nvml_code, NVML_ERROR_NOT_FOUND);
}

static void test_probe(void **state) {
        struct node_fixture *f = *state;
        struct nvml_error err;
        assert_int_equal(nvml_device_probe(f->n, 0, NULL), 0);
        assert_int_equal(nvml_device_probe(f->n, 4, &err), -ENODEV);
        assert_string_equal(err.func, "nvmlDeviceGetUUID");
        assert_int_equal(nvml_device_probe(f->n, 5, &err), -EPERM);
}

static void test_probe_recovery(void **state) {
        struct node_fixture *f = *state;
        assert_int_equal(nvml_device_probe(f->n, 4, NULL), -ENODEV);
        fake.set_fault(4, NVML_SUCCESS, NVML_SUCCESS);
        assert_int_equal(nvml_device_probe(f->n, 4, NULL), 0);
        unsigned c;
        assert_int_equal(nvml_device_temperature(f->n, 4, &c, NULL), 0);
}

/* ---- events ---- */

static void test_events_register_supported_only(void **state) {
        struct node_fixture *f = *state;
        struct nvml_events *e = NULL;
        assert_int_equal(nvml_events_new(f->n, 0, &e, NULL), 0);
        assert_true(nvml_events_registered(e, 0));
        assert_true(nvml_events_registered(e, 1));
        assert_false(nvml_events_registered(e, 2)); /* no Xid support */
        assert_true(nvml_events_registered(e, 3));
        assert_false(nvml_events_registered(e, 4)); /* lost */
        assert_false(nvml_events_registered(e, 5)); /* forbidden */
        assert_false(nvml_events_registered(e, TOPO_MAX_GPUS));
        nvml_events_free(e);
}

static void test_events_xid_delivered(void **state) {
        struct node_fixture *f = *state;
        struct nvml_events *e = NULL;
        assert_int_equal(nvml_events_new(f->n, 0, &e, NULL), 0);
        fake.push_event(2, nvmlEventTypeXidCriticalError, 48); /* GPU2 not registered: dropped */
        fake.push_event(3, nvmlEventTypeXidCriticalError, 79);
        struct nvml_event ev;
        assert_int_equal(nvml_events_wait(e, 100, &ev, NULL), 1);
        assert_int_equal(ev.gpu, 3);
        assert_int_equal(ev.type, nvmlEventTypeXidCriticalError);
        assert_int_equal(ev.xid, 79);
        assert_int_equal(ev.data, 79);
        nvml_events_free(e);
}

static void test_events_timeout(void **state) {
        struct node_fixture *f = *state;
        struct nvml_events *e = NULL;
        assert_int_equal(nvml_events_new(f->n, 0, &e, NULL), 0);
        struct nvml_event ev = { .gpu = 77 };
        assert_int_equal(nvml_events_wait(e, 0, &ev, NULL), 0);
        assert_int_equal(ev.gpu, 77); /* untouched */
        nvml_events_free(e);
}

static void test_events_add_recovered_device(void **state) {
        struct node_fixture *f = *state;
        struct nvml_events *e = NULL;
        assert_int_equal(nvml_events_new(f->n, 0, &e, NULL), 0);
        struct nvml_error err;
        assert_int_equal(nvml_events_add_device(e, 4, &err), -ENODEV);
        fake.set_fault(4, NVML_SUCCESS, NVML_SUCCESS);
        assert_int_equal(nvml_events_add_device(e, 4, NULL), 0);
        assert_true(nvml_events_registered(e, 4));
        fake.push_event(4, nvmlEventTypeXidCriticalError, 31);
        struct nvml_event ev;
        assert_int_equal(nvml_events_wait(e, 0, &ev, NULL), 1);
        assert_int_equal(ev.gpu, 4);
        assert_int_equal(ev.xid, 31);
        nvml_events_free(e);
}

static void test_events_unsupported_mask(void **state) {
        struct node_fixture *f = *state;
        struct nvml_events *e = NULL;
        assert_int_equal(nvml_events_new(f->n, nvmlEventTypeClock, &e, NULL), 0);
        for (unsigned i = 0; i < 6; i++)
                assert_false(nvml_events_registered(e, i));
        struct nvml_error err;
        assert_int_equal(nvml_events_add_device(e, 0, &err), -EOPNOTSUPP);
        assert_int_equal(err.nvml_code, NVML_ERROR_NOT_SUPPORTED);
        nvml_events_free(e);
}

static void test_events_free_null(void **state) {
        (void)state;
        assert_null(nvml_events_free(NULL));
}

/* ---- helpers ---- */

static void test_cpulist(void **state) {
        (void)state;
        char buf[128];
        unsigned long m[2] = { 0 };
        assert_int_equal(nvml_format_cpulist(m, 2, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "");
        m[0] = 1UL;
        assert_int_equal(nvml_format_cpulist(m, 2, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "0");
        m[0] = 0x5UL | (1UL << 63);
        m[1] = 0x1UL;
        assert_int_equal(nvml_format_cpulist(m, 2, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "0,2,63-64");
        m[0] = ~0UL;
        m[1] = ~0UL;
        assert_int_equal(nvml_format_cpulist(m, 2, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "0-127");
}

static void test_cpulist_overflow(void **state) {
        (void)state;
        unsigned long m[2] = { 0x5555555555555555UL, 0x5555555555555555UL }; /* every other CPU */
        char buf[32];
        assert_int_equal(nvml_format_cpulist(m, 2, buf, sizeof(buf)), -ENOBUFS);
        assert_string_equal(buf, "");
}

static void test_sysfs_bus_id(void **state) {
        (void)state;
        char buf[16];
        assert_int_equal(nvml_sysfs_bus_id("00000000:1A:00.0", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "0000:1a:00.0");
        assert_int_equal(nvml_sysfs_bus_id("0001:B3:1f.7", buf, sizeof(buf)), 0);
        assert_string_equal(buf, "0001:b3:1f.7");
}

static void test_sysfs_bus_id_malformed(void **state) {
        (void)state;
        char buf[16];
        const char *bad[] = { "", "1A:00.0", "00000000:1A:00", "00000000:1A:00.0x", "00000000:1A:00.8",
                              "00000000:1A:20.0", "0000000000:1A:00.0", "-1:1A:00.0", "0000: 1A:00.0",
                              "0000:1A:00.0/../../x", "000g:1A:00.0",
                              /* a field longer than its width once wrapped around in sscanf's %x */
                              "00000000:1000000001A:00.0", "00000000:1A:100000000.0", "0:1A:00.100000000",
                              "00000000:01A:00.0", "00000000:1A:000.0", "00000000:1A:00.00", "00000000::00.0" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(nvml_sysfs_bus_id(bad[i], buf, sizeof(buf)), -EINVAL);
        assert_int_equal(nvml_sysfs_bus_id(NULL, buf, sizeof(buf)), -EINVAL);
        assert_int_equal(nvml_sysfs_bus_id("0000:1a:00.0", buf, 12), -EINVAL);
}

static void test_bus_id_equal(void **state) {
        (void)state;
        assert_true(nvml_bus_id_equal("00000000:1A:00.0", "0000:1a:00.0"));
        assert_false(nvml_bus_id_equal("00000000:1A:00.0", "00000000:1B:00.0"));
        assert_false(nvml_bus_id_equal("00000000:1A:00.0", "garbage"));
        assert_false(nvml_bus_id_equal("", ""));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_errno_mapping),
                cmocka_unit_test(test_errno_unknown_code_is_eio),
                cmocka_unit_test(test_errno_lost_is_unique),
                cmocka_unit_test(test_code_names),
                cmocka_unit_test(test_open_nonexistent_path),
                cmocka_unit_test(test_open_default_is_versioned_soname),
                cmocka_unit_test(test_open_missing_init),
                cmocka_unit_test(test_open_missing_shutdown),
                cmocka_unit_test(test_open_init_fails_keeps_text),
                cmocka_unit_test(test_open_error_out_may_be_null),
                cmocka_unit_test(test_open_bad_arguments),
                cmocka_unit_test(test_close_null),
                cmocka_unit_test(test_open_close_balances_init),
                cmocka_unit_test(test_old_symbols_fall_back),
                cmocka_unit_test(test_old_inventory),
                cmocka_unit_test(test_old_error_text_without_errorstring),
                cmocka_unit_test(test_old_processes_v1_layout),
                cmocka_unit_test(test_old_missing_optional_is_enosys),
                cmocka_unit_test_setup_teardown(test_inventory_versions, node_setup_inventory, node_teardown),
                cmocka_unit_test_setup_teardown(test_inventory_gpu_fields, node_setup_inventory, node_teardown),
                cmocka_unit_test_setup_teardown(test_inventory_mig_mode, node_setup_inventory, node_teardown),
                cmocka_unit_test_setup_teardown(test_inventory_cpu_affinity, node_setup_inventory, node_teardown),
                cmocka_unit_test_setup_teardown(test_inventory_numa_from_nvml, node_setup_inventory, node_teardown),
                cmocka_unit_test_setup_teardown(test_inventory_numa_sysfs_fallback, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_inventory_numa_no_sysfs, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_set_sysfs_root_bad, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_inventory_pcie_levels, node_setup_inventory, node_teardown),
                cmocka_unit_test_setup_teardown(test_inventory_direct_nvlinks, node_setup_inventory, node_teardown),
                cmocka_unit_test_setup_teardown(test_inventory_nvswitch_links, node_setup_inventory, node_teardown),
                cmocka_unit_test_setup_teardown(test_inventory_npu_link_not_a_switch, node_setup_inventory,
                                                node_teardown),
                cmocka_unit_test_setup_teardown(test_inventory_without_link_type_heuristic, nolinktype_setup,
                                                node_teardown),
                cmocka_unit_test_setup_teardown(test_inventory_link_to_unqueried_gpu_not_a_switch, node_setup_inventory,
                                                node_teardown),
                cmocka_unit_test_setup_teardown(test_inventory_lost_gpu, node_setup_inventory, node_teardown),
                cmocka_unit_test_setup_teardown(test_inventory_forbidden_gpu, node_setup_inventory, node_teardown),
                cmocka_unit_test_setup_teardown(test_inventory_lost_midway, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_inventory_other_error_is_error_state, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_inventory_recovers, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_inventory_bad_arguments, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_processes_insufficient_size, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_processes_grow_between_calls, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_processes_none, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_query_lost_gpu, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_query_forbidden_gpu, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_query_bad_index, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_utilization, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_process_utilization_all, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_process_utilization_since, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_process_utilization_nothing_newer, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_temperature_and_power, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_compute_mode, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_index_by_uuid, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_probe, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_probe_recovery, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_events_register_supported_only, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_events_xid_delivered, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_events_timeout, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_events_add_recovered_device, node_setup, node_teardown),
                cmocka_unit_test_setup_teardown(test_events_unsupported_mask, node_setup, node_teardown),
                cmocka_unit_test(test_events_free_null),
                cmocka_unit_test(test_cpulist),
                cmocka_unit_test(test_cpulist_overflow),
                cmocka_unit_test(test_sysfs_bus_id),
                cmocka_unit_test(test_sysfs_bus_id_malformed),
                cmocka_unit_test(test_bus_id_equal),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
