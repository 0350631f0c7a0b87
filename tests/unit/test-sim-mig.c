/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test-sim-mig — the simulator's MIG, through the real NVML ABI (build/sim/libnvidia-ml.so.1 loaded by
 * path) and the CUDA one (libcuda.so.1 in child processes): modes and pending modes, profiles by the
 * NVML shape constants with device-specific ids, placements, remaining capacity, create/destroy with
 * their error codes, MIG device handles, UUIDs, attributes, per-instance memory and processes, the state
 * shared between processes, the injected faults, the node description's `mig` lines, CUDA on a MIG
 * device. One behaviour per test; docs/simulator.md ("MIG") is the table these tests hold the simulator to.
 */
#include "interposer/cuda-abi.h"

#include <fcntl.h>
#include <regex.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "sim/sim.h"
#include "test-sim-common.h"

#define MIG_NODE GPUSLICE_SOURCE_DIR "/tests/data/mig/h100-mixed.node"
#define A100_NODE GPUSLICE_SOURCE_DIR "/tests/data/mig/a100-80gb-2gpu.node"

/* A100-SXM4-40GB x2, both MIG on and empty, GPU 1 needs a reset to change mode. */
static const char a100_40[] = "        GPU0    GPU1\n"
                              "GPU0     X      NV12\n"
                              "GPU1    NV12     X\n"
                              "default name=\"NVIDIA A100-SXM4-40GB\" memory=40GiB sms=108 cc=8.0\n"
                              "gpu 0 mig=on\n"
                              "gpu 1 mig=on\n"
                              "mig 1 reset=required\n";

static char a100_40_path[PATH_MAX];

static void start(const char *node) {
        sim_select(node);
        assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
}

static void start_a100_40(void) {
        if (!a100_40_path[0])
                assert_int_equal(sim_write_node("a100-40.node", a100_40, a100_40_path, sizeof a100_40_path), 0);
        start(a100_40_path);
}

static unsigned gi_profile_id(nvmlDevice_t d, unsigned shape) {
        nvmlGpuInstanceProfileInfo_t info;
        assert_int_equal(N.nvmlDeviceGetGpuInstanceProfileInfo(d, shape, &info), NVML_SUCCESS);
        return info.id;
}

/* The process's own handles, in a child: fork and run fn there; returns its exit status (128+sig). */
static int in_child(int (*fn)(void)) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                _exit(fn());
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Processes on the node state directly (the simulated driver's table). */
static struct sim_state *state_open(void) {
        struct topo t;
        char node_path[PATH_MAX], err[256];
        assert_int_equal(sim_node_load(&t, node_path, sizeof node_path, err, sizeof err), 0);
        struct sim_state *s = NULL;
        assert_int_equal(sim_state_open(&t, node_path, &s, err, sizeof err), 0);
        return s;
}

static void add_process(unsigned gpu, uint32_t pid, uint32_t gi, uint32_t ci, uint64_t bytes) {
        struct sim_state *s = state_open();
        assert_int_equal(sim_state_lock(s), 0);
        struct sim_proc *p;
        assert_int_equal(sim_proc_get_locked(s, pid, gpu, &p), 0);
        p->gi = gi;
        p->ci = ci;
        p->used_bytes = bytes;
        p->flags = SIM_PROC_KEEP;
        sim_state_unlock(s);
        sim_state_close(s);
}

static void set_fault(uint32_t fault, uint32_t after) {
        struct sim_state *s = state_open();
        assert_int_equal(sim_state_lock(s), 0);
        s->mig_fault = fault;
        s->mig_fault_after = after;
        sim_state_unlock(s);
        sim_state_close(s);
}

/* ---- modes ---- */

static void test_modes_from_node(void **state) {
        (void)state;
        start(MIG_NODE);
        unsigned cur = 9, pend = 9;
        assert_int_equal(N.nvmlDeviceGetMigMode(sim_dev(0), &cur, &pend), NVML_SUCCESS);
        assert_int_equal(cur, NVML_DEVICE_MIG_ENABLE);
        assert_int_equal(pend, NVML_DEVICE_MIG_ENABLE);
        assert_int_equal(N.nvmlDeviceGetMigMode(sim_dev(3), &cur, &pend), NVML_SUCCESS);
        assert_int_equal(cur, NVML_DEVICE_MIG_DISABLE);
        assert_int_equal(pend, NVML_DEVICE_MIG_ENABLE); /* mig 3 pending=on */
}

static void test_gpu_without_mig_not_supported(void **state) {
        (void)state;
        start(MIG_NODE); /* GPU 4 is a V100 */
        nvmlDevice_t v100 = sim_dev(4);
        unsigned cur, pend, count = 9, id;
        nvmlReturn_t act;
        nvmlGpuInstanceProfileInfo_t info;
        nvmlGpuInstancePlacement_t pl[8];
        assert_int_equal(N.nvmlDeviceGetMigMode(v100, &cur, &pend), NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N.nvmlDeviceSetMigMode(v100, 1, &act), NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N.nvmlDeviceGetGpuInstanceProfileInfo(v100, NVML_GPU_INSTANCE_PROFILE_1_SLICE, &info),
                         NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N.nvmlDeviceGetGpuInstancePossiblePlacements_v2(v100, 19, pl, &count),
                         NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N.nvmlDeviceGetMaxMigDeviceCount(v100, &count), NVML_SUCCESS);
        assert_int_equal(count, 0);
        assert_int_equal(N.nvmlDeviceIsMigDeviceHandle(v100, &id), NVML_SUCCESS);
        assert_int_equal(id, 0);
        nvmlDeviceAttributes_t a;
        assert_int_equal(N.nvmlDeviceGetAttributes_v2(v100, &a), NVML_ERROR_NOT_SUPPORTED); /* MIG handles only */
}

static void test_mig_off_queries_not_supported(void **state) {
        (void)state;
        start(MIG_NODE); /* GPU 3: MIG off (on pending) */
        nvmlDevice_t d = sim_dev(3);
        unsigned count = 9;
        nvmlGpuInstanceProfileInfo_t info;
        nvmlGpuInstance_t gi;
        nvmlDevice_t mig;
        assert_int_equal(N.nvmlDeviceGetMaxMigDeviceCount(d, &count), NVML_SUCCESS);
        assert_int_equal(count, 0);
        assert_int_equal(N.nvmlDeviceGetGpuInstanceProfileInfo(d, NVML_GPU_INSTANCE_PROFILE_1_SLICE, &info),
                         NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N.nvmlDeviceCreateGpuInstance(d, 19, &gi), NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N.nvmlDeviceGetGpuInstanceById(d, 0, &gi), NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(d, 0, &mig), NVML_ERROR_NOT_SUPPORTED);
        /* placements are static: answered whether MIG is on or not */
        nvmlGpuInstancePlacement_t pl[8];
        count = 8;
        assert_int_equal(N.nvmlDeviceGetGpuInstancePossiblePlacements_v2(d, 9, pl, &count), NVML_SUCCESS);
        assert_int_equal(count, 2);
}

static void test_set_mode_pending_until_reset(void **state) {
        (void)state;
        start(MIG_NODE); /* GPU 3: off, reset=required */
        nvmlReturn_t act = NVML_SUCCESS;
        unsigned cur, pend;
        assert_int_equal(N.nvmlDeviceSetMigMode(sim_dev(3), NVML_DEVICE_MIG_ENABLE, &act), NVML_SUCCESS);
        assert_int_equal(act, NVML_ERROR_RESET_REQUIRED);
        assert_int_equal(N.nvmlDeviceGetMigMode(sim_dev(3), &cur, &pend), NVML_SUCCESS);
        assert_int_equal(cur, 0);
        assert_int_equal(pend, 1);
        /* gpuslice-sim gpu-reset applies it */
        char cmd[PATH_MAX * 2];
        snprintf(cmd, sizeof cmd, "%s/sim/gpuslice-sim gpu-reset 3", GPUSLICE_BUILD_DIR);
        assert_int_equal(system(cmd), 0);
        assert_int_equal(N.nvmlDeviceGetMigMode(sim_dev(3), &cur, &pend), NVML_SUCCESS);
        assert_int_equal(cur, 1);
        assert_int_equal(pend, 1);
}

static void test_set_mode_immediate_busy_and_refused(void **state) {
        (void)state;
        start(MIG_NODE);
        nvmlReturn_t act = NVML_ERROR_UNKNOWN;
        unsigned cur, pend;
        /* GPU 2: on, empty, no reset needed → off at once */
        assert_int_equal(N.nvmlDeviceSetMigMode(sim_dev(2), NVML_DEVICE_MIG_DISABLE, &act), NVML_SUCCESS);
        assert_int_equal(act, NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetMigMode(sim_dev(2), &cur, &pend), NVML_SUCCESS);
        assert_int_equal(cur, 0);
        /* a process on it: the change stays pending (IN_USE) */
        add_process(2, (uint32_t)getpid(), SIM_NO_INSTANCE, SIM_NO_INSTANCE, 1 << 20);
        assert_int_equal(N.nvmlDeviceSetMigMode(sim_dev(2), NVML_DEVICE_MIG_ENABLE, &act), NVML_SUCCESS);
        assert_int_equal(act, NVML_ERROR_IN_USE);
        assert_int_equal(N.nvmlDeviceGetMigMode(sim_dev(2), &cur, &pend), NVML_SUCCESS);
        assert_int_equal(cur, 0);
        assert_int_equal(pend, 1);
        /* GPU 0 has GPU instances: MIG cannot be turned off (nothing changes) */
        assert_int_equal(N.nvmlDeviceSetMigMode(sim_dev(0), NVML_DEVICE_MIG_DISABLE, &act), NVML_ERROR_IN_USE);
        assert_int_equal(N.nvmlDeviceGetMigMode(sim_dev(0), &cur, &pend), NVML_SUCCESS);
        assert_int_equal(pend, 1);
        assert_int_equal(N.nvmlDeviceSetMigMode(sim_dev(0), 2, &act), NVML_ERROR_INVALID_ARGUMENT);
}

/* ---- profiles and placements ---- */

static void test_profiles_walk_a100_40(void **state) {
        (void)state;
        start_a100_40();
        static const struct {
                unsigned shape, id, slices, count, sms;
                unsigned long long mib;
                const char *name;
        } want[] = {
                { NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, 1, 7, 14, 4864, "MIG 1g.5gb" },
                { NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, 1, 1, 14, 4864, "MIG 1g.5gb+me" },
                { NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, 1, 4, 14, 9856, "MIG 1g.10gb" },
                { NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, 2, 3, 28, 9856, "MIG 2g.10gb" },
                { NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, 3, 2, 42, 19968, "MIG 3g.20gb" },
                { NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, 4, 1, 56, 19968, "MIG 4g.20gb" },
                { NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, 7, 1, 98, 40192, "MIG 7g.40gb" },
        };
        for (size_t i = 0; i < ELEMENTSOF(want); i++) {
                nvmlGpuInstanceProfileInfo_v2_t v = { .version = nvmlGpuInstanceProfileInfo_v2 };
                assert_int_equal(N.nvmlDeviceGetGpuInstanceProfileInfoV(sim_dev(0), want[i].shape, &v), NVML_SUCCESS);
                assert_int_equal(v.id, want[i].id);
                assert_int_equal(v.sliceCount, want[i].slices);
                assert_int_equal(v.instanceCount, want[i].count);
                assert_int_equal(v.multiprocessorCount, want[i].sms);
                assert_int_equal(v.memorySizeMB, want[i].mib);
                assert_string_equal(v.name, want[i].name);
        }
        nvmlGpuInstanceProfileInfo_t info;
        assert_int_equal(
                N.nvmlDeviceGetGpuInstanceProfileInfo(sim_dev(0), NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1, &info),
                NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N.nvmlDeviceGetGpuInstanceProfileInfo(sim_dev(0), NVML_GPU_INSTANCE_PROFILE_COUNT, &info),
                         NVML_ERROR_INVALID_ARGUMENT);
        nvmlGpuInstanceProfileInfo_v2_t bad = { .version = 1 };
        assert_int_equal(N.nvmlDeviceGetGpuInstanceProfileInfoV(sim_dev(0), 0, &bad),
                         NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
}

static void test_profiles_h100_measured(void **state) {
        (void)state;
        start(MIG_NODE);
        nvmlGpuInstanceProfileInfo_v2_t v = { .version = nvmlGpuInstanceProfileInfo_v2 };
        assert_int_equal(N.nvmlDeviceGetGpuInstanceProfileInfoV(sim_dev(2), NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, &v),
                         NVML_SUCCESS);
        assert_string_equal(v.name, "MIG 1g.20gb");
        assert_int_equal(v.multiprocessorCount, 26);
        assert_int_equal(v.memorySizeMB, 20096);
        assert_int_equal(N.nvmlDeviceGetGpuInstanceProfileInfoV(sim_dev(2), NVML_GPU_INSTANCE_PROFILE_7_SLICE, &v),
                         NVML_SUCCESS);
        assert_int_equal(v.copyEngineCount, 8);
        assert_int_equal(v.ofaCount, 1);
}

static void test_placements_and_count_protocol(void **state) {
        (void)state;
        start_a100_40();
        nvmlGpuInstancePlacement_t pl[8];
        unsigned count = 0;
        assert_int_equal(N.nvmlDeviceGetGpuInstancePossiblePlacements_v2(sim_dev(0), 15, NULL, &count), NVML_SUCCESS);
        assert_int_equal(count, 4); /* 1g.10gb: 0, 2, 4, 6 */
        count = 2;
        assert_int_equal(N.nvmlDeviceGetGpuInstancePossiblePlacements_v2(sim_dev(0), 15, pl, &count),
                         NVML_ERROR_INSUFFICIENT_SIZE);
        assert_int_equal(count, 4);
        count = 8;
        assert_int_equal(N.nvmlDeviceGetGpuInstancePossiblePlacements_v2(sim_dev(0), 15, pl, &count), NVML_SUCCESS);
        for (unsigned i = 0; i < 4; i++) {
                assert_int_equal(pl[i].start, 2 * i);
                assert_int_equal(pl[i].size, 2);
        }
        count = 8;
        assert_int_equal(N.nvmlDeviceGetGpuInstancePossiblePlacements_v2(sim_dev(0), 0, pl, &count), NVML_SUCCESS);
        assert_int_equal(count, 1);
        assert_int_equal(pl[0].size, 8); /* 7g.40gb takes all 8 memory slices */
        assert_int_equal(N.nvmlDeviceGetGpuInstancePossiblePlacements_v2(sim_dev(0), 77, pl, &count),
                         NVML_ERROR_INVALID_ARGUMENT);
}

/* ---- GPU instances ---- */

static void test_gi_ids_follow_placement(void **state) {
        (void)state;
        start_a100_40();
        nvmlDevice_t d = sim_dev(0);
        unsigned p3 = gi_profile_id(d, NVML_GPU_INSTANCE_PROFILE_3_SLICE);
        nvmlGpuInstance_t a, b;
        nvmlGpuInstanceInfo_t ia, ib;
        assert_int_equal(N.nvmlDeviceCreateGpuInstance(d, p3, &a), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceCreateGpuInstance(d, p3, &b), NVML_SUCCESS);
        assert_int_equal(N.nvmlGpuInstanceGetInfo(a, &ia), NVML_SUCCESS);
        assert_int_equal(N.nvmlGpuInstanceGetInfo(b, &ib), NVML_SUCCESS);
        /* the lowest free placement first; ids as nvidia-smi shows them: 0:4 is GI 2, 4:4 is GI 1 */
        assert_int_equal(ia.placement.start, 0);
        assert_int_equal(ia.id, 2);
        assert_int_equal(ib.placement.start, 4);
        assert_int_equal(ib.id, 1);
        assert_int_equal(ia.profileId, 9);
        assert_ptr_equal(ia.device, d);
}

static void test_gi_capacity_and_insufficient_resources(void **state) {
        (void)state;
        start_a100_40();
        nvmlDevice_t d = sim_dev(0);
        unsigned p1 = gi_profile_id(d, NVML_GPU_INSTANCE_PROFILE_1_SLICE), count = 0;
        assert_int_equal(N.nvmlDeviceGetGpuInstanceRemainingCapacity(d, p1, &count), NVML_SUCCESS);
        assert_int_equal(count, 7);
        nvmlGpuInstance_t gi;
        for (unsigned i = 0; i < 7; i++)
                assert_int_equal(N.nvmlDeviceCreateGpuInstance(d, p1, &gi), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetGpuInstanceRemainingCapacity(d, p1, &count), NVML_SUCCESS);
        assert_int_equal(count, 0);
        assert_int_equal(N.nvmlDeviceCreateGpuInstance(d, p1, &gi), NVML_ERROR_INSUFFICIENT_RESOURCES);
        nvmlGpuInstance_t list[7];
        assert_int_equal(N.nvmlDeviceGetGpuInstances(d, p1, list, &count), NVML_SUCCESS);
        assert_int_equal(count, 7);
}

static void test_gi_placement_rules(void **state) {
        (void)state;
        start_a100_40();
        nvmlDevice_t d = sim_dev(0);
        unsigned p3 = gi_profile_id(d, NVML_GPU_INSTANCE_PROFILE_3_SLICE);
        unsigned p4 = gi_profile_id(d, NVML_GPU_INSTANCE_PROFILE_4_SLICE);
        unsigned p2 = gi_profile_id(d, NVML_GPU_INSTANCE_PROFILE_2_SLICE);
        nvmlGpuInstance_t gi;
        nvmlGpuInstancePlacement_t at = { .start = 2, .size = 4 };
        assert_int_equal(N.nvmlDeviceCreateGpuInstanceWithPlacement(d, p3, &at, &gi), NVML_ERROR_INVALID_ARGUMENT);
        at = (nvmlGpuInstancePlacement_t){ .start = 4, .size = 2 };
        assert_int_equal(N.nvmlDeviceCreateGpuInstanceWithPlacement(d, p3, &at, &gi), NVML_ERROR_INVALID_ARGUMENT);
        at = (nvmlGpuInstancePlacement_t){ .start = 4, .size = 4 };
        assert_int_equal(N.nvmlDeviceCreateGpuInstanceWithPlacement(d, p3, &at, &gi), NVML_SUCCESS);
        /* 4g.20gb only starts at 0 and fits with the 3g at 4 (7 compute slices) */
        at = (nvmlGpuInstancePlacement_t){ .start = 0, .size = 4 };
        assert_int_equal(N.nvmlDeviceCreateGpuInstanceWithPlacement(d, p4, &at, &gi), NVML_SUCCESS);
        /* no memory slice left for a 2g */
        at = (nvmlGpuInstancePlacement_t){ .start = 4, .size = 2 };
        assert_int_equal(N.nvmlDeviceCreateGpuInstanceWithPlacement(d, p2, &at, &gi),
                         NVML_ERROR_INSUFFICIENT_RESOURCES);
        assert_int_equal(N.nvmlDeviceCreateGpuInstance(d, 12345, &gi), NVML_ERROR_INVALID_ARGUMENT);
}

static void test_gi_destroy_in_use_and_stale_handle(void **state) {
        (void)state;
        start_a100_40();
        nvmlDevice_t d = sim_dev(0);
        nvmlGpuInstance_t gi;
        nvmlComputeInstance_t ci;
        assert_int_equal(N.nvmlDeviceCreateGpuInstance(d, gi_profile_id(d, NVML_GPU_INSTANCE_PROFILE_2_SLICE), &gi),
                         NVML_SUCCESS);
        assert_int_equal(N.nvmlGpuInstanceCreateComputeInstance(gi, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, &ci),
                         NVML_SUCCESS);
        assert_int_equal(N.nvmlGpuInstanceDestroy(gi), NVML_ERROR_IN_USE); /* it has a compute instance */
        assert_int_equal(N.nvmlComputeInstanceDestroy(ci), NVML_SUCCESS);
        assert_int_equal(N.nvmlGpuInstanceDestroy(gi), NVML_SUCCESS);
        nvmlGpuInstanceInfo_t info;
        assert_int_equal(N.nvmlGpuInstanceGetInfo(gi, &info), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N.nvmlGpuInstanceDestroy(gi), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N.nvmlDeviceGetGpuInstanceById(d, 3, &gi), NVML_ERROR_NOT_FOUND);
}

/* ---- compute instances ---- */

static void test_ci_profiles_in_a_3g(void **state) {
        (void)state;
        start(MIG_NODE); /* GPU 1: 3g.40gb at 4:4 (GI 1) with a 2c and a 1c */
        nvmlGpuInstance_t gi;
        assert_int_equal(N.nvmlDeviceGetGpuInstanceById(sim_dev(1), 1, &gi), NVML_SUCCESS);
        nvmlComputeInstanceProfileInfo_v2_t v = { .version = nvmlComputeInstanceProfileInfo_v2 };
        assert_int_equal(N.nvmlGpuInstanceGetComputeInstanceProfileInfoV(gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE,
                                                                         NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                                                                         &v),
                         NVML_SUCCESS);
        assert_string_equal(v.name, "MIG 1c.3g.40gb");
        assert_int_equal(v.instanceCount, 3);
        assert_int_equal(v.multiprocessorCount, 20);
        assert_int_equal(N.nvmlGpuInstanceGetComputeInstanceProfileInfoV(gi, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE,
                                                                         NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                                                                         &v),
                         NVML_SUCCESS);
        assert_string_equal(v.name, "MIG 3g.40gb");
        nvmlComputeInstanceProfileInfo_t info;
        assert_int_equal(N.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE,
                                                                        NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                                                                        &info),
                         NVML_ERROR_NOT_SUPPORTED);
        unsigned count = 9;
        /* 2c at 0 and 1c at 2 take all three compute slices */
        assert_int_equal(
                N.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &count),
                NVML_SUCCESS);
        assert_int_equal(count, 0);
        nvmlComputeInstance_t ci;
        assert_int_equal(N.nvmlGpuInstanceCreateComputeInstance(gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &ci),
                         NVML_ERROR_INSUFFICIENT_RESOURCES);
        nvmlComputeInstance_t list[3];
        assert_int_equal(N.nvmlGpuInstanceGetComputeInstances(gi, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, list, &count),
                         NVML_SUCCESS);
        assert_int_equal(count, 1);
        nvmlComputeInstanceInfo_t ci_info;
        assert_int_equal(N.nvmlComputeInstanceGetInfo_v2(list[0], &ci_info), NVML_SUCCESS);
        assert_int_equal(ci_info.placement.start, 0);
        assert_int_equal(ci_info.placement.size, 2);
        assert_int_equal(ci_info.profileId, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE);
}

static void test_ci_destroy_in_use(void **state) {
        (void)state;
        start(MIG_NODE); /* GPU 0: seven 1g.10gb */
        nvmlDevice_t mig;
        unsigned gi_id, ci_id;
        assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(sim_dev(0), 3, &mig), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetGpuInstanceId(mig, &gi_id), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetComputeInstanceId(mig, &ci_id), NVML_SUCCESS);
        add_process(0, (uint32_t)getpid(), gi_id, ci_id, 64 << 20);
        nvmlGpuInstance_t gi;
        nvmlComputeInstance_t ci;
        assert_int_equal(N.nvmlDeviceGetGpuInstanceById(sim_dev(0), gi_id, &gi), NVML_SUCCESS);
        assert_int_equal(N.nvmlGpuInstanceGetComputeInstanceById(gi, ci_id, &ci), NVML_SUCCESS);
        assert_int_equal(N.nvmlComputeInstanceDestroy(ci), NVML_ERROR_IN_USE);
        assert_int_equal(N.nvmlGpuInstanceDestroy(gi), NVML_ERROR_IN_USE);
}

/* ---- MIG devices ---- */

static void test_mig_device_handles(void **state) {
        (void)state;
        start(MIG_NODE);
        unsigned max = 0, is = 9, idx = 9;
        assert_int_equal(N.nvmlDeviceGetMaxMigDeviceCount(sim_dev(0), &max), NVML_SUCCESS);
        assert_int_equal(max, 7);
        nvmlDevice_t mig, parent, again;
        assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(sim_dev(0), 2, &mig), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceIsMigDeviceHandle(mig, &is), NVML_SUCCESS);
        assert_int_equal(is, 1);
        assert_int_equal(N.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig, &parent), NVML_SUCCESS);
        assert_ptr_equal(parent, sim_dev(0));
        assert_int_equal(N.nvmlDeviceGetIndex(mig, &idx), NVML_SUCCESS);
        assert_int_equal(idx, 2);
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE], name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
        assert_int_equal(N.nvmlDeviceGetUUID(mig, uuid, sizeof uuid), NVML_SUCCESS);
        regex_t re;
        assert_int_equal(regcomp(&re, "^MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
                                 REG_EXTENDED | REG_NOSUB),
                         0);
        assert_int_equal(regexec(&re, uuid, 0, NULL, 0), 0);
        regfree(&re);
        assert_int_equal(N.nvmlDeviceGetHandleByUUID(uuid, &again), NVML_SUCCESS);
        assert_ptr_equal(again, mig);
        assert_int_equal(N.nvmlDeviceGetName(mig, name, sizeof name), NVML_SUCCESS);
        assert_string_equal(name, "NVIDIA H100 80GB HBM3 MIG 1g.10gb");
        /* GPU handles: no instance ids, no parent */
        assert_int_equal(N.nvmlDeviceGetGpuInstanceId(sim_dev(0), &idx), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(sim_dev(0), &parent),
                         NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(sim_dev(0), 7, &mig), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(sim_dev(2), 0, &mig), NVML_ERROR_NOT_FOUND);
}

static void test_mig_device_parent_queries_not_supported(void **state) {
        (void)state;
        start(MIG_NODE);
        nvmlDevice_t mig;
        assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(sim_dev(0), 0, &mig), NVML_SUCCESS);
        nvmlPciInfo_t pci;
        unsigned minor;
        nvmlUtilization_t u;
        assert_int_equal(N.nvmlDeviceGetPciInfo_v3(mig, &pci), NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N.nvmlDeviceGetMinorNumber(mig, &minor), NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N.nvmlDeviceGetUtilizationRates(mig, &u), NVML_ERROR_NOT_SUPPORTED);
        /* nor does the parent report utilization with MIG on */
        assert_int_equal(N.nvmlDeviceGetUtilizationRates(sim_dev(0), &u), NVML_ERROR_NOT_SUPPORTED);
        unsigned n = 4;
        nvmlProcessUtilizationSample_t s[4];
        assert_int_equal(N.nvmlDeviceGetProcessUtilization(sim_dev(0), s, &n, 0), NVML_ERROR_NOT_SUPPORTED);
}

static void test_mig_device_attributes_and_memory(void **state) {
        (void)state;
        start(MIG_NODE);
        nvmlDevice_t mig;
        /* GPU 1, MIG index 0: the 2c of the 3g.40gb */
        assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(sim_dev(1), 0, &mig), NVML_SUCCESS);
        nvmlDeviceAttributes_t a;
        assert_int_equal(N.nvmlDeviceGetAttributes_v2(mig, &a), NVML_SUCCESS);
        assert_int_equal(a.gpuInstanceSliceCount, 3);
        assert_int_equal(a.computeInstanceSliceCount, 2);
        assert_int_equal(a.multiprocessorCount, 40);
        assert_int_equal(a.sharedCopyEngineCount, 3);
        assert_int_equal(a.memorySizeMB, 40448);
        nvmlMemory_v2_t m = { .version = nvmlMemory_v2 };
        assert_int_equal(N.nvmlDeviceGetMemoryInfo_v2(mig, &m), NVML_SUCCESS);
        assert_int_equal(m.total, 40448ULL << 20);
        assert_int_equal(m.used, 0);
        /* memory of a compute instance's process counts for its whole GPU instance (they share it) */
        add_process(1, (uint32_t)getpid(), 1, 1, 1ULL << 30);
        assert_int_equal(N.nvmlDeviceGetMemoryInfo_v2(mig, &m), NVML_SUCCESS);
        assert_int_equal(m.used, 1ULL << 30);
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
        assert_int_equal(N.nvmlDeviceGetName(mig, name, sizeof name), NVML_SUCCESS);
        assert_string_equal(name, "NVIDIA H100 80GB HBM3 MIG 2c.3g.40gb");
}

static void test_mig_indices_have_holes_and_handles_go_stale(void **state) {
        (void)state;
        start(MIG_NODE);
        nvmlDevice_t d = sim_dev(0), mig;
        unsigned gi_id, ci_id;
        assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(d, 1, &mig), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetGpuInstanceId(mig, &gi_id), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetComputeInstanceId(mig, &ci_id), NVML_SUCCESS);
        nvmlGpuInstance_t gi;
        nvmlComputeInstance_t ci;
        assert_int_equal(N.nvmlDeviceGetGpuInstanceById(d, gi_id, &gi), NVML_SUCCESS);
        assert_int_equal(N.nvmlGpuInstanceGetComputeInstanceById(gi, ci_id, &ci), NVML_SUCCESS);
        assert_int_equal(N.nvmlComputeInstanceDestroy(ci), NVML_SUCCESS);
        char uuid[96];
        assert_int_equal(N.nvmlDeviceGetUUID(mig, uuid, sizeof uuid), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(d, 1, &mig), NVML_ERROR_NOT_FOUND);
        assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(d, 2, &mig), NVML_SUCCESS);
        /* a new compute instance takes the free index, with a new UUID */
        assert_int_equal(N.nvmlGpuInstanceCreateComputeInstance(gi, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, &ci),
                         NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(d, 1, &mig), NVML_SUCCESS);
}

static void test_processes_per_instance(void **state) {
        (void)state;
        start(MIG_NODE);
        nvmlDevice_t a, b;
        unsigned ga, ca, gb, cb;
        assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(sim_dev(0), 0, &a), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(sim_dev(0), 5, &b), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetGpuInstanceId(a, &ga), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetComputeInstanceId(a, &ca), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetGpuInstanceId(b, &gb), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetComputeInstanceId(b, &cb), NVML_SUCCESS);
        add_process(0, 100001, ga, ca, 10 << 20);
        add_process(0, 100002, gb, cb, 20 << 20);
        nvmlProcessInfo_t infos[8];
        unsigned count = 8;
        assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(a, &count, infos), NVML_SUCCESS);
        assert_int_equal(count, 1);
        assert_int_equal(infos[0].pid, 100001);
        assert_int_equal(infos[0].gpuInstanceId, ga);
        assert_int_equal(infos[0].computeInstanceId, ca);
        count = 8; /* the parent (privileged) lists both, each with its instance */
        assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(sim_dev(0), &count, infos), NVML_SUCCESS);
        assert_int_equal(count, 2);
        for (unsigned i = 0; i < 2; i++)
                assert_int_equal(infos[i].gpuInstanceId, infos[i].pid == 100001 ? ga : gb);
        /* MIG off: no instance ids */
        add_process(4, 100003, SIM_NO_INSTANCE, SIM_NO_INSTANCE, 1 << 20);
        count = 8;
        assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(sim_dev(4), &count, infos), NVML_SUCCESS);
        assert_int_equal(infos[0].gpuInstanceId, NVML_INVALID_INSTANCE_ID);
}

/* ---- privilege, processes, faults ---- */

/* Run as nobody (from root) or as whoever runs the tests: either way without CAP_SYS_ADMIN. */
static int child_unprivileged(void) {
        if (geteuid() == 0 && (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0))
                return 10;
        nvmlDevice_t d;
        nvmlGpuInstance_t gi;
        nvmlReturn_t act;
        unsigned count = 8;
        nvmlGpuInstancePlacement_t pl[8];
        nvmlProcessInfo_t infos[8];
        if (N.nvmlDeviceGetHandleByIndex_v2(2, &d) != NVML_SUCCESS)
                return 11;
        if (N.nvmlDeviceCreateGpuInstance(d, 19, &gi) != NVML_ERROR_NO_PERMISSION)
                return 12;
        if (N.nvmlDeviceSetMigMode(d, 0, &act) != NVML_ERROR_NO_PERMISSION)
                return 13;
        if (N.nvmlDeviceGetGpuInstancePossiblePlacements_v2(d, 19, pl, &count) != NVML_ERROR_NO_PERMISSION)
                return 14;
        count = 8; /* all instances' processes through the parent: the mig/monitor capability */
        if (N.nvmlDeviceGetComputeRunningProcesses_v3(d, &count, infos) != NVML_ERROR_NO_PERMISSION)
                return 15;
        nvmlGpuInstanceProfileInfo_t info; /* reading profiles needs nothing */
        if (N.nvmlDeviceGetGpuInstanceProfileInfo(d, NVML_GPU_INSTANCE_PROFILE_1_SLICE, &info) != NVML_SUCCESS)
                return 16;
        return 0;
}

static void test_changes_need_privilege(void **state) {
        (void)state;
        start(MIG_NODE);
        assert_int_equal(in_child(child_unprivileged), 0);
}

static int child_create_gi(void) {
        nvmlDevice_t d;
        nvmlGpuInstance_t gi;
        if (N.nvmlDeviceGetHandleByIndex_v2(2, &d) != NVML_SUCCESS)
                return 11;
        return N.nvmlDeviceCreateGpuInstance(d, 9, &gi) == NVML_SUCCESS ? 0 : 12;
}

static void test_state_shared_between_processes(void **state) {
        (void)state;
        start(MIG_NODE);
        assert_int_equal(in_child(child_create_gi), 0);
        nvmlGpuInstance_t list[2];
        unsigned count = 0;
        assert_int_equal(N.nvmlDeviceGetGpuInstances(sim_dev(2), 9, list, &count), NVML_SUCCESS);
        assert_int_equal(count, 1);
        /* and across a fresh init in this process */
        sim_shutdown_all();
}

static void test_fault_kill_after_change(void **state) {
        (void)state;
        start(MIG_NODE);
        set_fault(SIM_MIG_FAULT_KILL, 1);
        assert_int_equal(in_child(child_create_gi), 128 + SIGKILL);
        nvmlGpuInstance_t list[2];
        unsigned count = 0;
        assert_int_equal(N.nvmlDeviceGetGpuInstances(sim_dev(2), 9, list, &count), NVML_SUCCESS);
        assert_int_equal(count, 1);                     /* made, then the caller died */
        assert_int_equal(in_child(child_create_gi), 0); /* the fault struck once */
}

static void test_fault_fail_changes_nothing(void **state) {
        (void)state;
        start(MIG_NODE);
        set_fault(SIM_MIG_FAULT_FAIL, 2);
        nvmlGpuInstance_t gi;
        assert_int_equal(N.nvmlDeviceCreateGpuInstance(sim_dev(2), 19, &gi), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceCreateGpuInstance(sim_dev(2), 19, &gi), NVML_ERROR_UNKNOWN);
        unsigned count = 0;
        nvmlGpuInstance_t list[7];
        assert_int_equal(N.nvmlDeviceGetGpuInstances(sim_dev(2), 19, list, &count), NVML_SUCCESS);
        assert_int_equal(count, 1);
        assert_int_equal(N.nvmlDeviceCreateGpuInstance(sim_dev(2), 19, &gi), NVML_SUCCESS);
}

/* ---- the node description ---- */

static int parse_mig(const char *directives, char *err, size_t err_len) {
        char text[4096];
        snprintf(text, sizeof text,
                 "        GPU0    GPU1\nGPU0     X      PIX\nGPU1    PIX      X\n"
                 "default name=\"NVIDIA A100-SXM4-80GB\" memory=80GiB\ngpu 0 mig=on\ngpu 1 mig=off\n%s",
                 directives);
        struct topo t;
        struct gs_error e;
        if (topo_parse(text, strlen(text), &t, &e) < 0) {
                strscpy(err, e.message, err_len);
                return -1;
        }
        static struct sim_mig_node m;
        return sim_mig_node_parse(text, strlen(text), &t, &m, err, err_len);
}

static void test_node_mig_lines_refused(void **state) {
        (void)state;
        static const struct {
                const char *line, *why;
        } bad[] = {
                { "mig 0 gi=1g.5gb\n", "no profile '1g.5gb'" },
                { "mig 0 gi=3g.40gb@2\n", "cannot start at memory slice 2" },
                { "mig 0 gi=7g.80gb\nmig 0 gi=1g.10gb\n", "does not fit" },
                { "mig 1 gi=1g.10gb\n", "instances need MIG on" },
                { "mig 0 gi=3g.40gb ci=4c\n", "larger than its GPU instance" },
                { "mig 0 gi=3g.40gb ci=2c,2c\n", "does not fit its GPU instance" },
                { "mig 0 ci=1c\n", "ci= belongs to a gi=" },
                { "mig 0 colour=blue\n", "unknown mig attribute 'colour'" },
                { "mig 0 layout=all-wrong\n", "no profile 'wrong'" },
                { "mig 0 layout=balanced\n", "unknown layout" },
                { "mig 0 devices=1g.10gb:9\n", "count '9'" },
                { "mig 0 devices=1g.10gb:8\n", "do not fit" },
                { "mig 0 devices=4g.40gb:1,3g.40gb:2\n", "do not fit" },
                { "mig 2 gi=1g.10gb\n", "the matrix has 2 GPUs" },
                { "mig 0 pending=maybe\n", "pending: expected on or off" },
                { "mig x\n", "expected 'mig GPU" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                char err[256] = "";
                assert_int_equal(parse_mig(bad[i].line, err, sizeof err), -EINVAL);
                if (!strstr(err, bad[i].why) || !strstr(err, "line "))
                        fail_msg("'%s': got '%s', want '%s'", bad[i].line, err, bad[i].why);
        }
}

static void test_node_mig_on_gpu_without_mig_refused(void **state) {
        (void)state;
        const char text[] = "        GPU0\nGPU0     X\ngpu 0 name=\"Tesla V100-SXM2-32GB\" mig=off\n";
        struct topo t;
        struct gs_error e;
        assert_int_equal(topo_parse(text, strlen(text), &t, &e), 0);
        static struct sim_mig_node m;
        char err[256];
        assert_int_equal(sim_mig_node_parse(text, strlen(text), &t, &m, err, sizeof err), -EINVAL);
        assert_non_null(strstr(err, "has no MIG in the simulator"));
}

static void test_node_all_balanced_on_a100_80(void **state) {
        (void)state;
        start(A100_NODE);
        unsigned max = 0, n = 0;
        assert_int_equal(N.nvmlDeviceGetMaxMigDeviceCount(sim_dev(0), &max), NVML_SUCCESS);
        for (unsigned k = 0; k < max; k++) {
                nvmlDevice_t mig;
                n += N.nvmlDeviceGetMigDeviceHandleByIndex(sim_dev(0), k, &mig) == NVML_SUCCESS;
        }
        assert_int_equal(n, 4); /* 2 x 1g.10gb, 1 x 2g.20gb, 1 x 3g.40gb */
        nvmlGpuInstance_t list[7];
        unsigned count = 0;
        assert_int_equal(N.nvmlDeviceGetGpuInstances(sim_dev(0), 19, list, &count), NVML_SUCCESS);
        assert_int_equal(count, 2);
}

static void test_node_layouts(void **state) {
        (void)state;
        char err[256] = "";
        assert_int_equal(parse_mig("mig 0 layout=all-balanced\n", err, sizeof err), 0);
        assert_int_equal(parse_mig("mig 0 layout=all-1g.10gb.me\n", err, sizeof err), 0);
        assert_int_equal(parse_mig("mig 0 devices=2g.20gb:3,1g.10gb\n", err, sizeof err), 0);
        assert_int_equal(parse_mig("mig 0 gi=3g.40gb@4 ci=1c@0,1c@1,1c@2\nmig 0 gi=4g.40gb\n", err, sizeof err), 0);
        assert_int_equal(parse_mig("mig 1 pending=on reset=required\n", err, sizeof err), 0);
}

/* ---- CUDA on a MIG device (child processes: cuInit once per process) ---- */

static int child_cuda_mig(const char *want_uuid) {
        void *dl = dlopen(SIM_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
        if (!dl)
                return 10;
        PFN_cuInit_v2000 init = (PFN_cuInit_v2000)dlsym(dl, "cuInit");
        PFN_cuDeviceGetCount_v2000 count = (PFN_cuDeviceGetCount_v2000)dlsym(dl, "cuDeviceGetCount");
        PFN_cuDeviceTotalMem_v3020 total = (PFN_cuDeviceTotalMem_v3020)dlsym(dl, "cuDeviceTotalMem_v2");
        PFN_cuDeviceGetAttribute_v2000 attr = (PFN_cuDeviceGetAttribute_v2000)dlsym(dl, "cuDeviceGetAttribute");
        PFN_cuDeviceGetName_v2000 name = (PFN_cuDeviceGetName_v2000)dlsym(dl, "cuDeviceGetName");
        PFN_cuDevicePrimaryCtxRetain_v7000 retain =
                (PFN_cuDevicePrimaryCtxRetain_v7000)dlsym(dl, "cuDevicePrimaryCtxRetain");
        PFN_cuCtxSetCurrent_v4000 set = (PFN_cuCtxSetCurrent_v4000)dlsym(dl, "cuCtxSetCurrent");
        PFN_cuMemAlloc_v3020 alloc = (PFN_cuMemAlloc_v3020)dlsym(dl, "cuMemAlloc_v2");
        if (!init || !count || !total || !attr || !name || !retain || !set || !alloc || init(0) != CUDA_SUCCESS)
                return 11;
        int n = 0, sms = 0;
        size_t bytes = 0;
        char nm[128];
        if (count(&n) != CUDA_SUCCESS || n != 1)
                return 12; /* one MIG device per process */
        if (total(&bytes, 0) != CUDA_SUCCESS || bytes != 9984ULL << 20)
                return 13; /* a 1g.10gb of an H100 */
        if (attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0) != CUDA_SUCCESS || sms != 16)
                return 14;
        if (name(nm, sizeof nm, 0) != CUDA_SUCCESS || !strstr(nm, "MIG 1g.10gb"))
                return 15;
        CUcontext ctx;
        CUdeviceptr p;
        if (retain(&ctx, 0) != CUDA_SUCCESS || set(ctx) != CUDA_SUCCESS)
                return 16;
        if (alloc(&p, 10000ULL << 20) != CUDA_ERROR_OUT_OF_MEMORY)
                return 17; /* more than the instance, though the GPU has 80 GB */
        if (alloc(&p, 1ULL << 30) != CUDA_SUCCESS)
                return 18;
        (void)want_uuid;
        printf("ready\n");
        fflush(stdout);
        char c;
        while (read(STDIN_FILENO, &c, 1) > 0)
                ;
        return 0;
}

static void test_cuda_on_a_mig_device(void **state) {
        (void)state;
        start(MIG_NODE);
        nvmlDevice_t mig;
        char uuid[96];
        assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(sim_dev(0), 4, &mig), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetUUID(mig, uuid, sizeof uuid), NVML_SUCCESS);
        setenv("CUDA_VISIBLE_DEVICES", uuid, 1);
        int in[2], out[2];
        assert_int_equal(pipe2(in, O_CLOEXEC), 0);
        assert_int_equal(pipe2(out, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                dup2(in[0], STDIN_FILENO);
                dup2(out[1], STDOUT_FILENO);
                char *argv[] = { (char *)"test-sim-mig", (char *)"child-cuda-mig", uuid, NULL };
                execv("/proc/self/exe", argv);
                _exit(127);
        }
        close(in[0]);
        close(out[1]);
        unsetenv("CUDA_VISIBLE_DEVICES");
        char line[16] = "";
        ssize_t k = read(out[0], line, sizeof line - 1);
        line[k > 0 ? k : 0] = '\0';
        /* NVML sees the process on that MIG device, with its GPU and compute instance */
        nvmlProcessInfo_t infos[4];
        unsigned count = 4, gi, ci;
        assert_int_equal(N.nvmlDeviceGetGpuInstanceId(mig, &gi), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetComputeInstanceId(mig, &ci), NVML_SUCCESS);
        if (streq(line, "ready\n")) {
                assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(mig, &count, infos), NVML_SUCCESS);
                assert_int_equal(count, 1);
                assert_int_equal(infos[0].pid, (unsigned)pid);
                assert_int_equal(infos[0].gpuInstanceId, gi);
                assert_int_equal(infos[0].computeInstanceId, ci);
                assert_int_equal(infos[0].usedGpuMemory, 1ULL << 30);
        }
        close(in[1]);
        close(out[0]);
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
        assert_string_equal(line, "ready\n");
}

/* ---- caps ---- */

static void test_minors_text_matches_the_guide(void **state) {
        (void)state;
        static char text[1 << 20];
        int n = sim_mig_minors_text(text, sizeof text);
        assert_true(n > 0);
        assert_non_null(strstr(text, "config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access 4\n"));
        assert_non_null(strstr(text, "\ngpu31/gi14/ci7/access 4322\n"));
        assert_int_equal(sim_mig_cap_minor(1, 2, 0), 3 + 135 + 18 + 1);
}

int main(int argc, char **argv) {
        if (argc >= 3 && streq(argv[1], "child-cuda-mig"))
                return child_cuda_mig(argv[2]);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_teardown(test_modes_from_node, sim_test_teardown),
                cmocka_unit_test_teardown(test_gpu_without_mig_not_supported, sim_test_teardown),
                cmocka_unit_test_teardown(test_mig_off_queries_not_supported, sim_test_teardown),
                cmocka_unit_test_teardown(test_set_mode_pending_until_reset, sim_test_teardown),
                cmocka_unit_test_teardown(test_set_mode_immediate_busy_and_refused, sim_test_teardown),
                cmocka_unit_test_teardown(test_profiles_walk_a100_40, sim_test_teardown),
                cmocka_unit_test_teardown(test_profiles_h100_measured, sim_test_teardown),
                cmocka_unit_test_teardown(test_placements_and_count_protocol, sim_test_teardown),
                cmocka_unit_test_teardown(test_gi_ids_follow_placement, sim_test_teardown),
                cmocka_unit_test_teardown(test_gi_capacity_and_insufficient_resources, sim_test_teardown),
                cmocka_unit_test_teardown(test_gi_placement_rules, sim_test_teardown),
                cmocka_unit_test_teardown(test_gi_destroy_in_use_and_stale_handle, sim_test_teardown),
                cmocka_unit_test_teardown(test_ci_profiles_in_a_3g, sim_test_teardown),
                cmocka_unit_test_teardown(test_ci_destroy_in_use, sim_test_teardown),
                cmocka_unit_test_teardown(test_mig_device_handles, sim_test_teardown),
                cmocka_unit_test_teardown(test_mig_device_parent_queries_not_supported, sim_test_teardown),
                cmocka_unit_test_teardown(test_mig_device_attributes_and_memory, sim_test_teardown),
                cmocka_unit_test_teardown(test_mig_indices_have_holes_and_handles_go_stale, sim_test_teardown),
                cmocka_unit_test_teardown(test_processes_per_instance, sim_test_teardown),
                cmocka_unit_test_teardown(test_changes_need_privilege, sim_test_teardown),
                cmocka_unit_test_teardown(test_state_shared_between_processes, sim_test_teardown),
                cmocka_unit_test_teardown(test_fault_kill_after_change, sim_test_teardown),
                cmocka_unit_test_teardown(test_fault_fail_changes_nothing, sim_test_teardown),
                cmocka_unit_test(test_node_mig_lines_refused),
                cmocka_unit_test(test_node_mig_on_gpu_without_mig_refused),
                cmocka_unit_test(test_node_layouts),
                cmocka_unit_test_teardown(test_node_all_balanced_on_a100_80, sim_test_teardown),
                cmocka_unit_test_teardown(test_cuda_on_a_mig_device, sim_test_teardown),
                cmocka_unit_test(test_minors_text_matches_the_guide),
        };
        return cmocka_run_group_tests(tests, sim_test_setup, sim_test_group_teardown);
}
