/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test-nvml-sim — the NVML binding against the simulated node (build/sim/libnvidia-ml.so.1,
 * loaded by explicit path; faults injected with build/sim/gpuslice-sim): the inventory of every
 * reference topology equals the parsed file link for link, lost and forbidden GPUs are reported
 * per GPU, Xid events arrive, processes and utilization come through.
 *
 * Run a second time by ctest with LD_LIBRARY_PATH=build/sim and GPUSLICE_TEST_DEFAULT_SONAME=1:
 * then every test loads NVML the way production does, nvml_open(NULL) → "libnvidia-ml.so.1"
 * found on the library search path.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "helpers.h"

#include "nvml/nvml.h"
#include "topo/topo.h"
#include "util/util.h"

#define SIM_NVML GPUSLICE_BUILD_DIR "/sim/libnvidia-ml.so.1"
#define SIM_CLI GPUSLICE_BUILD_DIR "/sim/gpuslice-sim"
#define TOPO_DIR GPUSLICE_TOPO_DIR
#define TOPO(name) TOPO_DIR "/" name

static char tmpdir[256];
static char state_file[PATH_MAX];
static unsigned state_counter;

struct fixture {
        struct nvml *n;
        struct topo want; /* the parsed node file */
        struct topo got;  /* the inventory */
};

static int group_setup(void **state) {
        (void)state;
        char *d = test_tmpdir_new("test-nvml-sim");
        int k = snprintf(tmpdir, sizeof tmpdir, "%s", d);
        free(d);
        return k > 0 && (size_t)k < sizeof tmpdir ? 0 : -1;
}

static int group_teardown(void **state) {
        (void)state;
        return test_rmtree(tmpdir) == 0 ? 0 : -1;
}

/* Point the simulator at a node file and a fresh private state file. */
static void select_node(const char *file) {
        setenv("GPUSLICE_SIM_NODE", file, 1);
        snprintf(state_file, sizeof(state_file), "%s/state-%u", tmpdir, state_counter++);
        setenv("GPUSLICE_SIM_STATE", state_file, 1);
}

static void parse_file(const char *file, struct topo *ret) {
        _cleanup_(freep) char *text = NULL;
        size_t len = 0;
        assert_int_equal(read_file(file, 1 << 20, &text, &len), 0);
        struct gs_error err = { 0 };
        int r = topo_parse(text, len, ret, &err);
        if (r < 0)
                print_error("%s: %s\n", file, err.message);
        assert_int_equal(r, 0);
}

/* The explicit simulator path, or NULL (the default soname) in the library-search-path run. */
static const char *library(void) {
        const char *e = getenv("GPUSLICE_TEST_DEFAULT_SONAME");
        return e && streq(e, "1") ? NULL : SIM_NVML;
}

/* Open the simulated NVML on `file`; the fixture is freed by teardown. */
static struct fixture *start(void **state, const char *file) {
        struct fixture *f = calloc(1, sizeof(*f));
        assert_non_null(f);
        *state = f;
        parse_file(file, &f->want);
        select_node(file);
        struct nvml_error err = { 0 };
        int r = nvml_open(library(), &f->n, &err);
        if (r < 0)
                print_error("nvml_open: %s: %s\n", err.func, err.text);
        assert_int_equal(r, 0);
        return f;
}

static int teardown(void **state) {
        struct fixture *f = *state;
        if (f) {
                nvml_close(f->n);
                free(f);
        }
        if (state_file[0])
                unlink(state_file);
        state_file[0] = '\0';
        return 0;
}

/* Run gpuslice-sim with these arguments (in our environment: same node, same state file). */
static int sim_cli(const char *a1, const char *a2, const char *a3) {
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
                if (devnull >= 0)
                        dup2(devnull, STDOUT_FILENO);
                execl(SIM_CLI, "gpuslice-sim", a1, a2, a3, (char *)NULL);
                _exit(127);
        }
        int status;
        if (waitpid(pid, &status, 0) < 0)
                return -errno;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void inventory(struct fixture *f) {
        struct nvml_error err = { 0 };
        int r = nvml_inventory(f->n, &f->got, &err);
        if (r < 0)
                print_error("nvml_inventory: %s: %s\n", err.func, err.text);
        assert_int_equal(r, 0);
}

static void check_gpu(const char *file, const struct topo_gpu *w, const struct topo_gpu *g) {
        (void)file;
        assert_int_equal(g->index, w->index);
        assert_int_equal(g->state, TOPO_GPU_OK);
        assert_string_equal(g->uuid, w->uuid);
        assert_string_equal(g->name, w->name);
        assert_int_equal(g->memory_total, w->memory_total);
        assert_true(nvml_bus_id_equal(g->bus_id, w->bus_id));
        assert_int_equal(g->minor, w->minor);
        assert_int_equal(g->numa_node, w->numa_node);
        assert_string_equal(g->cpu_affinity, w->cpu_affinity);
        assert_int_equal(g->mig_mode, w->mig_mode);
        assert_int_equal(g->cc_major, w->cc_major);
        assert_int_equal(g->cc_minor, w->cc_minor);
        assert_int_equal(g->power_limit_mw, w->power_limit_mw);
}

/* Every pair among the GPUs that answered: same PCIe level, same NVLink count. */
static void check_links(const char *file, const struct topo *want, const struct topo *got) {
        for (unsigned a = 0; a < want->n_gpus; a++)
                for (unsigned b = 0; b < want->n_gpus; b++) {
                        if (got->gpu[a].state != TOPO_GPU_OK || got->gpu[b].state != TOPO_GPU_OK)
                                continue;
                        struct topo_link w = topo_get_link(want, a, b), g = topo_get_link(got, a, b);
                        if (w.pcie != g.pcie || w.nvlinks != g.nvlinks) {
                                char wb[8], gb[8];
                                print_error("%s: GPU%u-GPU%u: file says %s (pcie %s), NVML %s (pcie %s)\n", file, a, b,
                                            topo_link_name(w, wb), topo_level_name((enum topo_level)w.pcie),
                                            topo_link_name(g, gb), topo_level_name((enum topo_level)g.pcie));
                        }
                        assert_int_equal(g.pcie, w.pcie);
                        assert_int_equal(g.nvlinks, w.nvlinks);
                }
}

static void check_node(const char *file, const struct topo *want, const struct topo *got) {
        assert_int_equal(got->n_gpus, want->n_gpus);
        assert_string_equal(got->driver_version, want->driver_version);
        assert_int_equal(got->cuda_version, want->cuda_version);
        for (unsigned i = 0; i < want->n_gpus; i++)
                check_gpu(file, &want->gpu[i], &got->gpu[i]);
        check_links(file, want, got);
        bool any_nvlink = false;
        for (unsigned a = 0; a < want->n_gpus; a++)
                for (unsigned b = 0; b < want->n_gpus; b++)
                        any_nvlink |= want->link[a][b].nvlinks > 0;
        if (want->nvswitch)
                assert_true(got->nvswitch);
        if (!any_nvlink)
                assert_false(got->nvswitch);
        struct gs_error err;
        assert_int_equal(topo_validate(got, &err), 0);
}

static void check_file(void **state, const char *file) {
        print_message("%s\n", file);
        struct fixture *f = start(state, file);
        inventory(f);
        check_node(file, &f->want, &f->got);
        teardown(state);
        *state = NULL;
}

/* ---- inventory equals the node file ---- */

static void test_inventory_pcie_2socket(void **state) {
        check_file(state, TOPO("pcie-8gpu-pix-phb-sys.topo"));
}

static void test_inventory_old_soc_names(void **state) {
        check_file(state, TOPO("seed000-8gpu-pcie-2socket.topo"));
}

static void test_inventory_7gpu_with_nic(void **state) {
        check_file(state, TOPO("seed004-7gpu-p40-mlx4.topo"));
}

static void test_inventory_dgx1_cube_mesh(void **state) {
        check_file(state, TOPO("dgx1-v100-hybrid-cube-mesh.topo"));
}

static void test_inventory_dgx_a100_nvswitch(void **state) {
        check_file(state, TOPO("dgx-a100-nvswitch.topo"));
}

/* The simulator is a driver 460+: switch links are known by their remote device type. */
static void test_inventory_nvswitch_by_link_type(void **state) {
        struct fixture *f = start(state, TOPO("dgx-a100-nvswitch.topo"));
        assert_true(nvml_has_symbol(f->n, "nvmlDeviceGetNvLinkRemoteDeviceType"));
        inventory(f);
        check_node(TOPO("dgx-a100-nvswitch.topo"), &f->want, &f->got);
        assert_true(f->got.nvswitch);
}

static void test_inventory_rich_demo_node(void **state) {
        check_file(state, GPUSLICE_SOURCE_DIR "/sim/nodes/demo-8gpu-2socket.node");
}

/* Every file in the shared topology folder, including ones added after this test was written. */
static void test_inventory_every_reference_topology(void **state) {
        DIR *d = opendir(TOPO_DIR);
        assert_non_null(d);
        unsigned files = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                size_t len = strlen(de->d_name);
                if (len < 6 || strcmp(de->d_name + len - 5, ".topo") != 0)
                        continue;
                char path[PATH_MAX];
                snprintf(path, sizeof(path), "%s/%s", TOPO_DIR, de->d_name);
                check_file(state, path);
                files++;
        }
        closedir(d);
        assert_true(files >= 5);
}

/* ---- faults ---- */

static void test_lost_gpu_reported(void **state) {
        struct fixture *f = start(state, TOPO("dgx1-v100-hybrid-cube-mesh.topo"));
        assert_int_equal(sim_cli("lose", "3", NULL), 0);
        inventory(f);
        assert_int_equal(f->got.n_gpus, 8);
        assert_int_equal(f->got.gpu[3].state, TOPO_GPU_LOST);
        assert_non_null(strstr(f->got.gpu[3].state_text, "GPU is lost"));
        assert_int_equal(topo_get_link(&f->got, 0, 3).pcie, TOPO_LEVEL_UNKNOWN);
        for (unsigned i = 0; i < 8; i++)
                if (i != 3)
                        assert_int_equal(f->got.gpu[i].state, TOPO_GPU_OK);
        check_links(TOPO("dgx1-v100-hybrid-cube-mesh.topo"), &f->want, &f->got);
}

static void test_lost_gpu_queries_enodev(void **state) {
        struct fixture *f = start(state, TOPO("pcie-8gpu-pix-phb-sys.topo"));
        inventory(f); /* handles cached before the GPU goes */
        assert_int_equal(sim_cli("lose", "5", NULL), 0);
        struct nvml_utilization u;
        struct nvml_error err = { 0 };
        assert_int_equal(nvml_device_utilization(f->n, 5, &u, &err), -ENODEV);
        assert_int_equal(err.nvml_code, NVML_ERROR_GPU_IS_LOST);
        assert_int_equal(nvml_device_probe(f->n, 5, NULL), -ENODEV);
        uint64_t total, used;
        assert_int_equal(nvml_device_memory(f->n, 5, &total, &used, NULL), -ENODEV);
        assert_int_equal(nvml_device_utilization(f->n, 4, &u, NULL), 0);
}

static void test_denied_gpu_reported(void **state) {
        struct fixture *f = start(state, TOPO("seed000-8gpu-pcie-2socket.topo"));
        assert_int_equal(sim_cli("deny", "6", NULL), 0);
        inventory(f);
        assert_int_equal(f->got.n_gpus, 8); /* _v2 counts it */
        assert_int_equal(f->got.gpu[6].state, TOPO_GPU_NO_PERMISSION);
        assert_non_null(strstr(f->got.gpu[6].state_text, "Insufficient Permissions"));
        assert_int_equal(f->got.gpu[7].state, TOPO_GPU_OK);
        assert_string_equal(f->got.gpu[7].uuid, f->want.gpu[7].uuid);
        check_links(TOPO("seed000-8gpu-pcie-2socket.topo"), &f->want, &f->got);
}

static void test_restored_gpu_recovers(void **state) {
        struct fixture *f = start(state, TOPO("dgx-a100-nvswitch.topo"));
        assert_int_equal(sim_cli("lose", "2", NULL), 0);
        assert_int_equal(nvml_device_probe(f->n, 2, NULL), -ENODEV);
        assert_int_equal(sim_cli("restore", "2", NULL), 0);
        assert_int_equal(nvml_device_probe(f->n, 2, NULL), 0);
        inventory(f);
        check_node(TOPO("dgx-a100-nvswitch.topo"), &f->want, &f->got);
}

/* ---- events ---- */

static void test_xid_event_delivered(void **state) {
        struct fixture *f = start(state, TOPO("dgx-a100-nvswitch.topo"));
        struct nvml_events *e = NULL;
        assert_int_equal(nvml_events_new(f->n, 0, &e, NULL), 0);
        for (unsigned i = 0; i < 8; i++)
                assert_true(nvml_events_registered(e, i));
        assert_int_equal(sim_cli("xid", "5", "48"), 0);
        struct nvml_event ev = { 0 };
        assert_int_equal(nvml_events_wait(e, 10000, &ev, NULL), 1);
        assert_int_equal(ev.gpu, 5);
        assert_int_equal(ev.type, nvmlEventTypeXidCriticalError);
        assert_int_equal(ev.xid, 48);
        nvml_events_free(e);
}

static void test_lost_gpu_posts_xid_79(void **state) {
        struct fixture *f = start(state, TOPO("pcie-8gpu-pix-phb-sys.topo"));
        struct nvml_events *e = NULL;
        assert_int_equal(nvml_events_new(f->n, 0, &e, NULL), 0);
        assert_int_equal(sim_cli("lose", "1", NULL), 0);
        struct nvml_event ev = { 0 };
        assert_int_equal(nvml_events_wait(e, 10000, &ev, NULL), 1);
        assert_int_equal(ev.gpu, 1);
        assert_int_equal(ev.xid, 79);
        nvml_events_free(e);
}

static void test_events_in_order(void **state) {
        struct fixture *f = start(state, TOPO("pcie-8gpu-pix-phb-sys.topo"));
        struct nvml_events *e = NULL;
        assert_int_equal(nvml_events_new(f->n, 0, &e, NULL), 0);
        assert_int_equal(sim_cli("xid", "7", "31"), 0);
        assert_int_equal(sim_cli("xid", "0", "94"), 0);
        struct nvml_event a = { 0 }, b = { 0 };
        assert_int_equal(nvml_events_wait(e, 10000, &a, NULL), 1);
        assert_int_equal(nvml_events_wait(e, 10000, &b, NULL), 1);
        assert_int_equal(a.gpu, 7);
        assert_int_equal(a.xid, 31);
        assert_int_equal(b.gpu, 0);
        assert_int_equal(b.xid, 94);
        nvml_events_free(e);
}

static void test_events_timeout(void **state) {
        struct fixture *f = start(state, TOPO("pcie-8gpu-pix-phb-sys.topo"));
        struct nvml_events *e = NULL;
        assert_int_equal(nvml_events_new(f->n, 0, &e, NULL), 0);
        struct nvml_event ev = { .gpu = 42 };
        assert_int_equal(nvml_events_wait(e, 1, &ev, NULL), 0);
        assert_int_equal(ev.gpu, 42);
        nvml_events_free(e);
}

static void test_events_skip_lost_gpu(void **state) {
        struct fixture *f = start(state, TOPO("pcie-8gpu-pix-phb-sys.topo"));
        assert_int_equal(sim_cli("lose", "4", NULL), 0);
        struct nvml_events *e = NULL;
        assert_int_equal(nvml_events_new(f->n, 0, &e, NULL), 0);
        assert_false(nvml_events_registered(e, 4));
        assert_true(nvml_events_registered(e, 3));
        assert_int_equal(sim_cli("restore", "4", NULL), 0);
        assert_int_equal(nvml_events_add_device(e, 4, NULL), 0);
        assert_int_equal(sim_cli("xid", "4", "63"), 0);
        struct nvml_event ev = { 0 };
        assert_int_equal(nvml_events_wait(e, 10000, &ev, NULL), 1);
        assert_int_equal(ev.gpu, 4);
        assert_int_equal(ev.xid, 63);
        nvml_events_free(e);
}

struct waiter {
        struct nvml_events *e;
        int r;
        struct nvml_event ev;
};

static void *wait_thread(void *arg) {
        struct waiter *w = arg;
        w->r = nvml_events_wait(w->e, 10000, &w->ev, NULL);
        return NULL;
}

/* The health thread waits on events while the main thread keeps querying the same struct nvml. */
static void test_events_wait_beside_queries(void **state) {
        struct fixture *f = start(state, TOPO("dgx1-v100-hybrid-cube-mesh.topo"));
        struct waiter w = { 0 };
        assert_int_equal(nvml_events_new(f->n, 0, &w.e, NULL), 0);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, wait_thread, &w), 0);
        for (unsigned k = 0; k < 3; k++) {
                inventory(f);
                check_links(TOPO("dgx1-v100-hybrid-cube-mesh.topo"), &f->want, &f->got);
                struct nvml_utilization u;
                assert_int_equal(nvml_device_utilization(f->n, k, &u, NULL), 0);
        }
        assert_int_equal(sim_cli("xid", "6", "62"), 0);
        assert_int_equal(pthread_join(th, NULL), 0);
        assert_int_equal(w.r, 1);
        assert_int_equal(w.ev.gpu, 6);
        assert_int_equal(w.ev.xid, 62);
        nvml_events_free(w.e);
}

/* ---- processes, utilization ---- */

static void test_processes(void **state) {
        struct fixture *f = start(state, TOPO("dgx1-v100-hybrid-cube-mesh.topo"));
        char pid[16];
        snprintf(pid, sizeof(pid), "%u", 4000000u);
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
                execl(SIM_CLI, "gpuslice-sim", "proc", "add", "--gpu", "2", "--pid", pid, "--mem", "512MiB", "--keep",
                      (char *)NULL);
                _exit(127);
        }
        int status;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

        _cleanup_(freep) struct nvml_process *p = NULL;
        size_t np = 0;
        assert_int_equal(nvml_device_processes(f->n, 2, &p, &np, NULL), 0);
        assert_int_equal(np, 1);
        assert_int_equal(p[0].pid, 4000000u);
        assert_int_equal(p[0].used_memory, 512ULL << 20);

        _cleanup_(freep) struct nvml_process *none = NULL;
        size_t nn = 1;
        assert_int_equal(nvml_device_processes(f->n, 3, &none, &nn, NULL), 0);
        assert_int_equal(nn, 0);

        inventory(f);
        assert_true(f->got.gpu[2].memory_used >= 512ULL << 20);

        /* the per-sample memory query agrees with the inventory */
        uint64_t total = 0, used = 0;
        assert_int_equal(nvml_device_memory(f->n, 2, &total, &used, NULL), 0);
        assert_int_equal(total, f->got.gpu[2].memory_total);
        assert_int_equal(used, f->got.gpu[2].memory_used);
        assert_int_equal(nvml_device_memory(f->n, 3, &total, &used, NULL), 0);
        assert_true(used < f->got.gpu[2].memory_used);
        assert_int_equal(nvml_device_memory(f->n, 99, &total, &used, NULL), -EINVAL);
}

static void test_utilization(void **state) {
        struct fixture *f = start(state, TOPO("seed004-7gpu-p40-mlx4.topo"));
        assert_int_equal(sim_cli("util", "6", "37"), 0);
        struct nvml_utilization u = { 0 };
        assert_int_equal(nvml_device_utilization(f->n, 6, &u, NULL), 0);
        assert_int_equal(u.gpu, 37);
}

static void test_sensors(void **state) {
        struct fixture *f = start(state, TOPO("seed004-7gpu-p40-mlx4.topo"));
        unsigned c = 0, mw = 0;
        assert_int_equal(nvml_device_temperature(f->n, 0, &c, NULL), 0);
        assert_true(c > 0 && c < 150);
        assert_int_equal(nvml_device_power(f->n, 0, &mw, NULL), 0);
        assert_true(mw > 0);
}

/* The compute mode through the binding: read, set (root's: -EPERM otherwise, NVML's NO_PERMISSION), refused
 * modes -EINVAL before NVML is asked. */
static void test_compute_mode(void **state) {
        struct fixture *f = start(state, TOPO("seed004-7gpu-p40-mlx4.topo"));
        int mode = -1;
        assert_int_equal(nvml_device_compute_mode(f->n, 1, &mode, NULL), 0);
        assert_int_equal(mode, NVML_COMPUTEMODE_DEFAULT);
        assert_int_equal(nvml_device_set_compute_mode(f->n, 1, NVML_COMPUTEMODE_COUNT, NULL), -EINVAL);
        struct nvml_error e = { 0 };
        int r = nvml_device_set_compute_mode(f->n, 1, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS, &e);
        if (geteuid() != 0) {
                assert_int_equal(r, -EPERM);
                assert_int_equal(e.nvml_code, NVML_ERROR_NO_PERMISSION);
                assert_string_equal(e.func, "nvmlDeviceSetComputeMode");
                return;
        }
        assert_int_equal(r, 0);
        assert_int_equal(nvml_device_compute_mode(f->n, 1, &mode, NULL), 0);
        assert_int_equal(mode, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS);
        assert_int_equal(nvml_device_compute_mode(f->n, 0, &mode, NULL), 0);
        assert_int_equal(mode, NVML_COMPUTEMODE_DEFAULT); /* per GPU */
        assert_int_equal(nvml_device_set_compute_mode(f->n, 1, NVML_COMPUTEMODE_EXCLUSIVE_THREAD, &e), -EINVAL);
        assert_int_equal(e.nvml_code, NVML_ERROR_INVALID_ARGUMENT);
}

static void test_index_by_uuid(void **state) {
        struct fixture *f = start(state, TOPO("dgx-a100-nvswitch.topo"));
        unsigned idx = 99;
        assert_int_equal(nvml_device_index_by_uuid(f->n, f->want.gpu[6].uuid, &idx, NULL), 0);
        assert_int_equal(idx, 6);
        assert_int_equal(nvml_device_index_by_uuid(f->n, "GPU-not-here", &idx, NULL), -ENOENT);
}

static void test_no_node_is_driver_not_loaded_or_similar(void **state) {
        (void)state;
        unsetenv("GPUSLICE_SIM_NODE");
        struct nvml *n = NULL;
        struct nvml_error err = { 0 };
        int r = nvml_open(library(), &n, &err);
        assert_true(r < 0);
        assert_null(n);
        assert_int_equal(r, nvml_errno(err.nvml_code));
        assert_true(err.text[0] != '\0');
        assert_non_null(strstr(err.func, "nvmlInit"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_teardown(test_inventory_pcie_2socket, teardown),
                cmocka_unit_test_teardown(test_inventory_old_soc_names, teardown),
                cmocka_unit_test_teardown(test_inventory_7gpu_with_nic, teardown),
                cmocka_unit_test_teardown(test_inventory_dgx1_cube_mesh, teardown),
                cmocka_unit_test_teardown(test_inventory_dgx_a100_nvswitch, teardown),
                cmocka_unit_test_teardown(test_inventory_nvswitch_by_link_type, teardown),
                cmocka_unit_test_teardown(test_inventory_rich_demo_node, teardown),
                cmocka_unit_test_teardown(test_inventory_every_reference_topology, teardown),
                cmocka_unit_test_teardown(test_lost_gpu_reported, teardown),
                cmocka_unit_test_teardown(test_lost_gpu_queries_enodev, teardown),
                cmocka_unit_test_teardown(test_denied_gpu_reported, teardown),
                cmocka_unit_test_teardown(test_restored_gpu_recovers, teardown),
                cmocka_unit_test_teardown(test_xid_event_delivered, teardown),
                cmocka_unit_test_teardown(test_lost_gpu_posts_xid_79, teardown),
                cmocka_unit_test_teardown(test_events_in_order, teardown),
                cmocka_unit_test_teardown(test_events_timeout, teardown),
                cmocka_unit_test_teardown(test_events_skip_lost_gpu, teardown),
                cmocka_unit_test_teardown(test_events_wait_beside_queries, teardown),
                cmocka_unit_test_teardown(test_processes, teardown),
                cmocka_unit_test_teardown(test_utilization, teardown),
                cmocka_unit_test_teardown(test_sensors, teardown),
                cmocka_unit_test_teardown(test_compute_mode, teardown),
                cmocka_unit_test_teardown(test_index_by_uuid, teardown),
                cmocka_unit_test(test_no_node_is_driver_not_loaded_or_similar),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
