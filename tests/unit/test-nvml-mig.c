/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test-nvml-mig — the NVML binding's MIG side (src/nvml/mig.c) against the simulator
 * (build/sim/libnvidia-ml.so.1, tests/data/mig/h100-mixed.node): modes, GPU and compute instances, MIG
 * devices with UUIDs, profiles, attributes and memory, what a GPU can hold, processes per MIG device, and
 * GPUs without MIG or lost left out of the MIG inventory without failing it.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "helpers.h"

#include "nvml/nvml.h"
#include "util/util.h"

#define SIM_NVML GPUSLICE_BUILD_DIR "/sim/libnvidia-ml.so.1"
#define SIM_CLI GPUSLICE_BUILD_DIR "/sim/gpuslice-sim"
#define MIG_NODE GPUSLICE_SOURCE_DIR "/tests/data/mig/h100-mixed.node"

static char tmpdir[256], sim_state[PATH_MAX];
static struct nvml *N;
static struct topo T;
static struct mig_node M;

static int setup(void **state) {
        (void)state;
        char *d = test_tmpdir_new("test-nvml-mig");
        snprintf(tmpdir, sizeof tmpdir, "%s", d);
        free(d);
        snprintf(sim_state, sizeof sim_state, "%s/sim", tmpdir);
        setenv("GPUSLICE_SIM_NODE", MIG_NODE, 1);
        setenv("GPUSLICE_SIM_STATE", sim_state, 1);
        if (nvml_open(SIM_NVML, &N, NULL) < 0 || nvml_inventory(N, &T, NULL) < 0)
                return -1;
        return nvml_mig_inventory(N, &T, &M, NULL);
}

static int teardown(void **state) {
        (void)state;
        N = nvml_close(N);
        return test_rmtree(tmpdir) == 0 ? 0 : -1;
}

static void test_modes(void **state) {
        (void)state;
        assert_int_equal(M.n_gpus, 5);
        assert_int_equal(M.gpu[0].mode, 1);
        assert_int_equal(M.gpu[3].mode, 0);
        assert_int_equal(M.gpu[3].pending, 1);
        assert_int_equal(M.gpu[4].mode, -1); /* a V100 */
        assert_int_equal(T.gpu[4].mig_mode, -1);
        assert_int_equal(T.gpu[0].pci_device_id, 0x233010DEu);
}

static void test_instances_and_devices(void **state) {
        (void)state;
        const struct mig_gpu *g = &M.gpu[0];
        assert_int_equal(g->n_gis, 7);
        assert_int_equal(g->n_devices, 7);
        for (unsigned k = 0; k < 7; k++) {
                const struct mig_device *d = &g->dev[k];
                assert_int_equal(d->index, k);
                assert_string_equal(d->profile, "1g.10gb");
                assert_true(startswith(d->uuid, "MIG-"));
                assert_int_equal(d->sms, 16);
                assert_int_equal(d->memory_mib, 9984);
                assert_int_equal(d->memory_total, 9984ULL << 20);
                assert_int_equal(d->gi_slices, 1);
                for (unsigned j = 0; j < k; j++)
                        assert_string_not_equal(d->uuid, g->dev[j].uuid);
        }
        /* GPU 1: a 3g.40gb split 2c + 1c, a 2g.20gb, a 1g.10gb without compute instance */
        g = &M.gpu[1];
        assert_int_equal(g->n_gis, 3);
        assert_int_equal(g->n_devices, 3);
        const struct mig_device *d = mig_device_by_ids(&M, 1, 1, 0);
        assert_non_null(d);
        assert_string_equal(d->profile, "2c.3g.40gb");
        assert_int_equal(d->ci_slices, 2);
        assert_int_equal(d->placement.start, 4);
        assert_int_equal(d->placement.size, 4);
        assert_string_equal(d->name, "NVIDIA H100 80GB HBM3 MIG 2c.3g.40gb");
        assert_non_null(mig_device_by_uuid(&M, d->uuid));
        bool bare = false;
        for (unsigned i = 0; i < g->n_gis; i++)
                if (g->gi[i].n_cis == 0) {
                        bare = true;
                        assert_string_equal(g->gi[i].profile, "1g.10gb");
                        assert_int_equal(g->gi[i].placement.start, 2);
                }
        assert_true(bare);
        assert_int_equal(M.gpu[2].n_devices, 0);
}

static void test_caps(void **state) {
        (void)state;
        struct mig_caps c;
        assert_int_equal(nvml_mig_caps(N, 2, &c, NULL), 0);
        assert_int_equal(c.n_profiles, 7);
        const struct mig_profile *p = mig_caps_profile_by_name(&c, "3g.40gb");
        assert_non_null(p);
        assert_int_equal(p->id, 9);
        assert_int_equal(p->nvml_profile, NVML_GPU_INSTANCE_PROFILE_3_SLICE);
        assert_int_equal(p->n_placements, 2);
        assert_int_equal(p->placement[1].start, 4);
        assert_int_equal(mig_caps_memory_slices(&c), 8);
        assert_int_equal(mig_caps_compute_slices(&c), 7);
        assert_non_null(mig_caps_profile_by_name(&c, "1g.10gb+me"));
        /* MIG off: NVML reports no profiles */
        struct nvml_error e;
        assert_int_equal(nvml_mig_caps(N, 3, &c, &e), -EOPNOTSUPP);
        assert_int_equal(nvml_mig_caps(N, 4, &c, &e), -EOPNOTSUPP);
}

static void test_device_processes(void **state) {
        (void)state;
        char cmd[PATH_MAX * 2];
        snprintf(cmd, sizeof cmd, "%s proc add --gpu 0 --pid 4242 --mem 100MiB --mig 12:0 --keep", SIM_CLI);
        assert_int_equal(system(cmd), 0);
        struct nvml_process *p = NULL;
        size_t n = 0;
        const struct mig_device *d = mig_device_by_ids(&M, 0, 12, 0);
        assert_non_null(d);
        assert_int_equal(nvml_mig_device_processes(N, 0, d->index, &p, &n, NULL), 0);
        assert_int_equal(n, 1);
        assert_int_equal(p[0].pid, 4242);
        assert_int_equal(p[0].gpu_instance, 12);
        assert_int_equal(p[0].compute_instance, 0);
        free(p);
        /* another MIG device of that GPU: nothing */
        assert_int_equal(nvml_mig_device_processes(N, 0, (d->index + 1) % 7, &p, &n, NULL), 0);
        assert_int_equal(n, 0);
        free(p);
        struct mig_gpu g;
        assert_int_equal(nvml_mig_gpu(N, 0, &g, NULL), 0);
        uint64_t used = 0;
        for (unsigned k = 0; k < g.n_devices; k++)
                if (g.dev[k].index == d->index)
                        used = g.dev[k].memory_used;
        assert_int_equal(used, 100ULL << 20);
}

static void test_lost_gpu_left_out(void **state) {
        (void)state;
        char cmd[PATH_MAX * 2];
        snprintf(cmd, sizeof cmd, "%s lose 1", SIM_CLI);
        assert_int_equal(system(cmd), 0);
        static struct topo t;
        static struct mig_node m;
        assert_int_equal(nvml_inventory(N, &t, NULL), 0);
        assert_int_equal(nvml_mig_inventory(N, &t, &m, NULL), 0);
        assert_int_equal(t.gpu[1].state, TOPO_GPU_LOST);
        assert_int_equal(m.gpu[1].mode, -1);
        assert_int_equal(m.gpu[1].n_devices, 0);
        assert_int_equal(m.gpu[0].n_devices, 7);
        snprintf(cmd, sizeof cmd, "%s restore 1", SIM_CLI);
        assert_int_equal(system(cmd), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_modes),
                cmocka_unit_test(test_instances_and_devices),
                cmocka_unit_test(test_caps),
                cmocka_unit_test(test_device_processes),
                cmocka_unit_test(test_lost_gpu_left_out),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
