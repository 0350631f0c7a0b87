/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test-sim-state — the simulator's shared node state seen through the simulated NVML (loaded by
 * path): faults (lost, no permission), process lists and their size protocol in the three
 * layouts, pruning of dead PIDs, Xid events delivered once per event set, per-process
 * utilization samples, a SIGKILLed lock holder, refusing a foreign state file. Faults are
 * injected with the simulator's own state code (linked here), as gpuslice-sim does.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "sim/sim.h"
#include "test-sim-common.h"

static struct topo T;
static struct sim_state *S;

static int teardown(void **state) {
        (void)state;
        sim_state_close(S);
        S = NULL;
        sim_shutdown_all();
        return 0;
}

/* Init NVML on a node file and map the same state file for injecting. */
static void start(const char *file) {
        sim_select(file);
        assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
        assert_int_equal(sim_parse_file(file, &T), 0);
        char err[512];
        assert_int_equal(sim_state_open_path(sim_state_file, &T, file, &S, err, sizeof err), 0);
}

static void set_flags(unsigned gpu, uint32_t flags) {
        assert_int_equal(sim_state_lock(S), 0);
        S->gpu[gpu].flags = flags;
        sim_state_unlock(S);
}

static void add_proc(unsigned gpu, uint32_t pid, uint64_t bytes, unsigned sm, uint32_t flags) {
        assert_int_equal(sim_state_lock(S), 0);
        struct sim_proc *p = NULL;
        assert_int_equal(sim_proc_get_locked(S, pid, gpu, &p), 0);
        p->used_bytes = bytes;
        p->sm_util = sm;
        p->flags = flags;
        sim_state_unlock(S);
}

static void post_xid(unsigned gpu, uint64_t xid) {
        assert_int_equal(sim_state_lock(S), 0);
        sim_state_post_xid_locked(S, gpu, xid);
        sim_state_unlock(S);
}

/* ---- faults ---- */

static void test_lost_gpu(void **state) {
        (void)state;
        start(SIM_TOPO("pcie-8gpu-pix-phb-sys.topo"));
        nvmlDevice_t d2 = sim_dev(2);
        set_flags(2, SIM_GPU_LOST);
        unsigned n = 0;
        assert_int_equal(N.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
        assert_int_equal(n, 8); /* still counted */
        nvmlDevice_t d;
        assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(2, &d), NVML_ERROR_GPU_IS_LOST);
        char buf[96];
        assert_int_equal(N.nvmlDeviceGetUUID(d2, buf, sizeof buf), NVML_ERROR_GPU_IS_LOST);
        nvmlMemory_t m;
        assert_int_equal(N.nvmlDeviceGetMemoryInfo(d2, &m), NVML_ERROR_GPU_IS_LOST);
        nvmlGpuTopologyLevel_t lv;
        assert_int_equal(N.nvmlDeviceGetTopologyCommonAncestor(sim_dev(0), d2, &lv), NVML_ERROR_GPU_IS_LOST);
        assert_int_equal(N.nvmlDeviceGetUUID(sim_dev(3), buf, sizeof buf), NVML_SUCCESS); /* others fine */
        /* recovery: the same handle works again */
        set_flags(2, 0);
        assert_int_equal(N.nvmlDeviceGetUUID(d2, buf, sizeof buf), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(2, &d), NVML_SUCCESS);
        assert_ptr_equal(d, d2);
}

static void test_no_permission_gpu(void **state) {
        (void)state;
        start(SIM_TOPO("pcie-8gpu-pix-phb-sys.topo"));
        set_flags(1, SIM_GPU_NO_PERMISSION);
        unsigned n = 0;
        assert_int_equal(N.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
        assert_int_equal(n, 8);
        nvmlDevice_t d;
        assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(1, &d), NVML_ERROR_NO_PERMISSION);
        char uuid[96];
        assert_int_equal(N.nvmlDeviceGetUUID(sim_dev(0), uuid, sizeof uuid), NVML_SUCCESS);
        /* the v1 calls only see devices the caller may use */
        assert_int_equal(N.nvmlDeviceGetCount(&n), NVML_SUCCESS);
        assert_int_equal(n, 7);
        unsigned idx = 99;
        assert_int_equal(N.nvmlDeviceGetHandleByIndex(1, &d), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetIndex(d, &idx), NVML_SUCCESS);
        assert_int_equal(idx, 2);
        assert_int_equal(N.nvmlDeviceGetHandleByIndex(7, &d), NVML_ERROR_INVALID_ARGUMENT);
}

static void test_no_permission_by_uuid(void **state) {
        (void)state;
        start(SIM_TOPO("pcie-8gpu-pix-phb-sys.topo"));
        char uuid[96];
        assert_int_equal(N.nvmlDeviceGetUUID(sim_dev(5), uuid, sizeof uuid), NVML_SUCCESS);
        set_flags(5, SIM_GPU_NO_PERMISSION);
        nvmlDevice_t d;
        assert_int_equal(N.nvmlDeviceGetHandleByUUID(uuid, &d), NVML_ERROR_NO_PERMISSION);
}

/* ---- processes ---- */

static void test_process_list_empty(void **state) {
        (void)state;
        start(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        unsigned count = 0;
        assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(sim_dev(0), &count, NULL), NVML_SUCCESS);
        assert_int_equal(count, 0);
        assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(sim_dev(0), NULL, NULL),
                         NVML_ERROR_INVALID_ARGUMENT);
}

static void test_process_list_size_protocol(void **state) {
        (void)state;
        start(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        add_proc(1, 4001, 100u << 20, 0, SIM_PROC_KEEP);
        add_proc(1, 4002, 200u << 20, 0, SIM_PROC_KEEP);
        add_proc(1, 4003, 300u << 20, 0, SIM_PROC_KEEP);
        add_proc(2, 4004, 400u << 20, 0, SIM_PROC_KEEP); /* another GPU */
        unsigned count = 0;
        assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(sim_dev(1), &count, NULL),
                         NVML_ERROR_INSUFFICIENT_SIZE);
        assert_int_equal(count, 3);
        nvmlProcessInfo_t infos[8];
        count = 2;
        assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(sim_dev(1), &count, infos),
                         NVML_ERROR_INSUFFICIENT_SIZE);
        assert_int_equal(count, 3);
        count = 8;
        assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(sim_dev(1), &count, infos), NVML_SUCCESS);
        assert_int_equal(count, 3);
        uint64_t sum = 0;
        for (unsigned i = 0; i < count; i++) {
                assert_in_range(infos[i].pid, 4001, 4003);
                assert_int_equal(infos[i].usedGpuMemory, (uint64_t)(infos[i].pid - 4000) * (100u << 20));
                assert_int_equal(infos[i].gpuInstanceId, NVML_INVALID_INSTANCE_ID);
                assert_int_equal(infos[i].computeInstanceId, NVML_INVALID_INSTANCE_ID);
                sum += infos[i].usedGpuMemory;
        }
        nvmlMemory_v2_t m = { .version = nvmlMemory_v2 };
        assert_int_equal(N.nvmlDeviceGetMemoryInfo_v2(sim_dev(1), &m), NVML_SUCCESS);
        assert_int_equal(m.used, sum);
        assert_int_equal(m.free, m.total - m.reserved - sum);
}

/* The layouts: v1 is 16 bytes per entry, v2/v3 24 bytes; nothing is written past *count entries. */
static void test_process_list_layouts(void **state) {
        (void)state;
        start(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        add_proc(0, 5001, 1u << 20, 0, SIM_PROC_KEEP);
        add_proc(0, 5002, 2u << 20, 0, SIM_PROC_KEEP);
        unsigned char buf[128];
        memset(buf, 0xAA, sizeof buf);
        unsigned count = 2;
        assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses(sim_dev(0), &count, (nvmlProcessInfo_v1_t *)buf),
                         NVML_SUCCESS);
        assert_int_equal(count, 2);
        for (unsigned i = 0; i < 2; i++) {
                uint32_t pid;
                uint64_t used;
                memcpy(&pid, buf + 16 * i, 4);
                memcpy(&used, buf + 16 * i + 8, 8);
                assert_int_equal(used, (uint64_t)(pid - 5000) << 20);
        }
        for (unsigned i = 32; i < sizeof buf; i++)
                assert_int_equal(buf[i], 0xAA);

        const __typeof__(N.nvmlDeviceGetComputeRunningProcesses_v3) calls[] = {
                N.nvmlDeviceGetComputeRunningProcesses_v2, N.nvmlDeviceGetComputeRunningProcesses_v3
        };
        for (unsigned c = 0; c < ELEMENTSOF(calls); c++) {
                memset(buf, 0xAA, sizeof buf);
                count = 2;
                assert_int_equal(calls[c](sim_dev(0), &count, (nvmlProcessInfo_t *)buf), NVML_SUCCESS);
                for (unsigned i = 0; i < 2; i++) {
                        uint32_t pid, gi, ci;
                        uint64_t used;
                        memcpy(&pid, buf + 24 * i, 4);
                        memcpy(&used, buf + 24 * i + 8, 8);
                        memcpy(&gi, buf + 24 * i + 16, 4);
                        memcpy(&ci, buf + 24 * i + 20, 4);
                        assert_int_equal(used, (uint64_t)(pid - 5000) << 20);
                        assert_int_equal(gi, 0xFFFFFFFFu);
                        assert_int_equal(ci, 0xFFFFFFFFu);
                }
                for (unsigned i = 48; i < sizeof buf; i++)
                        assert_int_equal(buf[i], 0xAA);
        }
}

static void test_dead_pids_are_pruned(void **state) {
        (void)state;
        start(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0)
                _exit(0);
        assert_int_equal(waitpid(child, NULL, 0), child);
        add_proc(3, (uint32_t)child, 1u << 30, 0, 0);                       /* gone */
        add_proc(3, (uint32_t)getpid(), 2u << 20, 0, 0);                    /* alive */
        add_proc(3, (uint32_t)child + 1000000, 3u << 20, 0, SIM_PROC_KEEP); /* kept by hand */
        nvmlProcessInfo_t infos[4];
        unsigned count = 4;
        assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(sim_dev(3), &count, infos), NVML_SUCCESS);
        assert_int_equal(count, 2);
        for (unsigned i = 0; i < count; i++)
                assert_int_not_equal(infos[i].pid, (unsigned)child);
        nvmlMemory_v2_t m = { .version = nvmlMemory_v2 };
        assert_int_equal(N.nvmlDeviceGetMemoryInfo_v2(sim_dev(3), &m), NVML_SUCCESS);
        assert_int_equal(m.used, (2u << 20) + (3u << 20));
}

static void test_utilization_from_processes(void **state) {
        (void)state;
        start(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        add_proc(4, 6001, 1u << 20, 30, SIM_PROC_KEEP);
        add_proc(4, 6002, 1u << 20, 25, SIM_PROC_KEEP);
        nvmlUtilization_t u;
        assert_int_equal(N.nvmlDeviceGetUtilizationRates(sim_dev(4), &u), NVML_SUCCESS);
        assert_int_equal(u.gpu, 55);
        assert_int_equal(sim_state_lock(S), 0);
        S->gpu[4].util_gpu = 80; /* `gpuslice-sim util 4 80` */
        sim_state_unlock(S);
        assert_int_equal(N.nvmlDeviceGetUtilizationRates(sim_dev(4), &u), NVML_SUCCESS);
        assert_int_equal(u.gpu, 80);
}

static void test_process_utilization_samples(void **state) {
        (void)state;
        start(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        unsigned count = 0;
        assert_int_equal(N.nvmlDeviceGetProcessUtilization(sim_dev(5), NULL, &count, 0), NVML_ERROR_NOT_FOUND);
        add_proc(5, 7001, 1u << 20, 40, SIM_PROC_KEEP);
        add_proc(5, 7002, 1u << 20, 10, SIM_PROC_KEEP);
        add_proc(5, 7003, 1u << 20, 0, SIM_PROC_KEEP);  /* holds a context, ran nothing: no sample (NVML) */
        add_proc(4, 7004, 1u << 20, 70, SIM_PROC_KEEP); /* another GPU's work: not GPU 5's */
        count = 0;
        assert_int_equal(N.nvmlDeviceGetProcessUtilization(sim_dev(5), NULL, &count, 0), NVML_ERROR_INSUFFICIENT_SIZE);
        assert_int_equal(count, 2);
        nvmlProcessUtilizationSample_t s[4];
        count = 4;
        assert_int_equal(N.nvmlDeviceGetProcessUtilization(sim_dev(5), s, &count, 0), NVML_SUCCESS);
        assert_int_equal(count, 2);
        unsigned long long newest = 0;
        for (unsigned i = 0; i < count; i++) {
                assert_true(s[i].pid == 7001 || s[i].pid == 7002);
                assert_int_equal(s[i].smUtil, s[i].pid == 7001 ? 40 : 10);
                assert_true(s[i].timeStamp > 0);
                newest = MAX(newest, s[i].timeStamp);
        }
        /* nothing newer than a timestamp an hour ahead */
        count = 4;
        assert_int_equal(N.nvmlDeviceGetProcessUtilization(sim_dev(5), s, &count, newest + 3600ULL * 1000000ULL),
                         NVML_ERROR_NOT_FOUND);
        assert_int_equal(N.nvmlDeviceGetProcessUtilization(sim_dev(5), s, NULL, 0), NVML_ERROR_INVALID_ARGUMENT);
        count = 4;
        assert_int_equal(N.nvmlDeviceGetProcessUtilization(sim_dev(4), s, &count, 0), NVML_SUCCESS);
        assert_int_equal(count, 1);
        assert_int_equal(s[0].pid, 7004);
        assert_int_equal(s[0].smUtil, 70);
        nvmlUtilization_t u;
        assert_int_equal(N.nvmlDeviceGetUtilizationRates(sim_dev(5), &u), NVML_SUCCESS);
        assert_int_equal(u.gpu, 50); /* GPU 5's processes only */
}

/* ---- events ---- */

static nvmlEventSet_t new_set(unsigned gpu, unsigned long long types) {
        nvmlEventSet_t set = NULL;
        assert_int_equal(N.nvmlEventSetCreate(&set), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceRegisterEvents(sim_dev(gpu), types, set), NVML_SUCCESS);
        return set;
}

static void test_supported_event_types(void **state) {
        (void)state;
        start(SIM_TOPO("dgx1-v100-hybrid-cube-mesh.topo"));
        unsigned long long types = 0;
        assert_int_equal(N.nvmlDeviceGetSupportedEventTypes(sim_dev(0), &types), NVML_SUCCESS);
        assert_true(types & nvmlEventTypeXidCriticalError);
        assert_true(types & nvmlEventTypeDoubleBitEccError);
        nvmlEventSet_t set = NULL;
        assert_int_equal(N.nvmlEventSetCreate(&set), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceRegisterEvents(sim_dev(0), nvmlEventTypeClock, set), NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(N.nvmlDeviceRegisterEvents(sim_dev(0), types, NULL), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N.nvmlEventSetFree(set), NVML_SUCCESS);
}

static void test_xid_delivered_once_per_set(void **state) {
        (void)state;
        start(SIM_TOPO("dgx1-v100-hybrid-cube-mesh.topo"));
        nvmlEventSet_t a = new_set(2, nvmlEventTypeXidCriticalError);
        nvmlEventSet_t b = new_set(2, nvmlEventTypeXidCriticalError);
        post_xid(2, 48);
        post_xid(2, 63);
        nvmlEventSet_t late = new_set(2, nvmlEventTypeXidCriticalError);
        nvmlEventSet_t sets[] = { a, b };
        for (unsigned i = 0; i < ELEMENTSOF(sets); i++) {
                nvmlEventData_t e;
                assert_int_equal(N.nvmlEventSetWait_v2(sets[i], &e, 0), NVML_SUCCESS);
                assert_ptr_equal(e.device, sim_dev(2));
                assert_int_equal(e.eventType, nvmlEventTypeXidCriticalError);
                assert_int_equal(e.eventData, 48);
                assert_int_equal(N.nvmlEventSetWait_v2(sets[i], &e, 0), NVML_SUCCESS);
                assert_int_equal(e.eventData, 63);
                assert_int_equal(N.nvmlEventSetWait_v2(sets[i], &e, 10), NVML_ERROR_TIMEOUT);
        }
        nvmlEventData_t e;
        assert_int_equal(N.nvmlEventSetWait_v2(late, &e, 0), NVML_ERROR_TIMEOUT);
        N.nvmlEventSetFree(a);
        N.nvmlEventSetFree(b);
        N.nvmlEventSetFree(late);
}

static void test_xid_only_for_registered_gpus(void **state) {
        (void)state;
        start(SIM_TOPO("dgx1-v100-hybrid-cube-mesh.topo"));
        nvmlEventSet_t set = new_set(1, nvmlEventTypeXidCriticalError);
        nvmlEventSet_t ecc = new_set(3, nvmlEventTypeDoubleBitEccError);
        post_xid(0, 31);
        post_xid(3, 31);
        nvmlEventData_t e;
        assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 0), NVML_ERROR_TIMEOUT);
        assert_int_equal(N.nvmlEventSetWait_v2(ecc, &e, 0), NVML_ERROR_TIMEOUT); /* Xid not asked for */
        assert_int_equal(N.nvmlDeviceRegisterEvents(sim_dev(0), nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);
        post_xid(0, 79);
        assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 0), NVML_SUCCESS);
        assert_ptr_equal(e.device, sim_dev(0));
        assert_int_equal(e.eventData, 79);
        N.nvmlEventSetFree(set);
        N.nvmlEventSetFree(ecc);
}

/* A waiter blocks until another process posts. */
static void test_wait_wakes_on_event_from_other_process(void **state) {
        (void)state;
        start(SIM_TOPO("dgx1-v100-hybrid-cube-mesh.topo"));
        nvmlEventSet_t set = new_set(6, nvmlEventTypeXidCriticalError);
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
                usleep(50 * 1000);
                if (sim_state_lock(S) < 0)
                        _exit(1);
                sim_state_post_xid_locked(S, 6, 94);
                sim_state_unlock(S);
                _exit(0);
        }
        nvmlEventData_t e;
        assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 10000), NVML_SUCCESS);
        assert_int_equal(e.eventData, 94);
        int st;
        assert_int_equal(waitpid(child, &st, 0), child);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        N.nvmlEventSetFree(set);
}

static void test_event_ring_overflow_skips_lost_events(void **state) {
        (void)state;
        start(SIM_TOPO("dgx1-v100-hybrid-cube-mesh.topo"));
        nvmlEventSet_t set = new_set(0, nvmlEventTypeXidCriticalError);
        for (unsigned i = 0; i < SIM_XID_RING + 5; i++)
                post_xid(0, 1000 + i);
        nvmlEventData_t e;
        unsigned got = 0;
        unsigned long long prev = 0;
        while (N.nvmlEventSetWait_v2(set, &e, 0) == NVML_SUCCESS) {
                assert_true(e.eventData > prev);
                prev = e.eventData;
                got++;
        }
        assert_int_equal(got, SIM_XID_RING);
        assert_int_equal(prev, 1000 + SIM_XID_RING + 4);
        N.nvmlEventSetFree(set);
}

/* ---- robustness ---- */

static void *waiter(void *arg) {
        nvmlEventData_t e;
        return (void *)(intptr_t)N.nvmlEventSetWait_v2((nvmlEventSet_t)arg, &e, 300);
}

/* The last nvmlShutdown while another thread waits for events must not pull the state away. */
static void test_shutdown_while_waiting(void **state) {
        (void)state;
        start(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        nvmlEventSet_t set = new_set(0, nvmlEventTypeXidCriticalError);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, waiter, set), 0);
        usleep(50 * 1000);
        assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
        void *ret = NULL;
        assert_int_equal(pthread_join(t, &ret), 0);
        assert_int_equal((intptr_t)ret, NVML_ERROR_TIMEOUT);
        assert_int_equal(N.nvmlEventSetFree(set), NVML_ERROR_UNINITIALIZED);
        assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS); /* same file: the mapping is reused */
        assert_int_equal(N.nvmlEventSetFree(set), NVML_SUCCESS);
        unsigned count = 0;
        add_proc(1, 9001, 1u << 20, 0, SIM_PROC_KEEP);
        assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(sim_dev(1), &count, NULL),
                         NVML_ERROR_INSUFFICIENT_SIZE);
        assert_int_equal(count, 1);
}

static void test_sigkilled_lock_holder_does_not_block(void **state) {
        (void)state;
        start(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
                if (sim_state_lock(S) < 0)
                        _exit(1);
                raise(SIGKILL); /* dies holding the lock */
                _exit(2);
        }
        int st;
        assert_int_equal(waitpid(child, &st, 0), child);
        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        unsigned count = 0;
        assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(sim_dev(0), &count, NULL), NVML_SUCCESS);
        assert_int_equal(S->lock_recoveries, 1);
        /* and the lock keeps working afterwards */
        add_proc(0, 8001, 1u << 20, 0, SIM_PROC_KEEP);
        count = 0;
        assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(sim_dev(0), &count, NULL),
                         NVML_ERROR_INSUFFICIENT_SIZE);
        assert_int_equal(count, 1);
}

static void test_foreign_state_file_refused(void **state) {
        (void)state;
        sim_select(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        FILE *f = fopen(sim_state_file, "we");
        assert_non_null(f);
        static const char junk[8192] = "not a state file";
        assert_int_equal(fwrite(junk, 1, sizeof junk, f), sizeof junk);
        fclose(f);
        assert_int_equal(N.nvmlInit_v2(), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
        unsigned n;
        assert_int_equal(N.nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
}

static void test_state_for_other_node_refused(void **state) {
        (void)state;
        start(SIM_TOPO("seed004-7gpu-p40-mlx4.topo")); /* 7 GPUs */
        sim_state_close(S);
        S = NULL;
        assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
        /* same state file, an 8-GPU node */
        setenv("GPUSLICE_SIM_NODE", SIM_TOPO("seed000-8gpu-pcie-2socket.topo"), 1);
        assert_int_equal(N.nvmlInit_v2(), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
}

/* A file with our header whose node path field is not terminated (and that names another GPU
 * count, so the message would print the path) is refused without reading past the field. */
static void test_state_with_unterminated_node_refused(void **state) {
        (void)state;
        sim_select(SIM_TOPO("seed004-7gpu-p40-mlx4.topo"));
        assert_int_equal(sim_parse_file(SIM_TOPO("seed004-7gpu-p40-mlx4.topo"), &T), 0);
        char err[512];
        assert_int_equal(sim_state_open_path(sim_state_file, &T, "node", &S, err, sizeof err), 0);
        assert_int_equal(sim_state_lock(S), 0);
        memset(S->node, 'x', sizeof S->node);
        memset(&S->gpu[0], 'y', sizeof S->gpu[0]); /* no terminator right after the field either */
        S->n_gpus = 3;
        sim_state_unlock(S);
        sim_state_close(S);
        S = NULL;
        struct sim_state *s = NULL;
        assert_int_equal(sim_state_open_path(sim_state_file, &T, "node", &s, err, sizeof err), -EPROTO);
        assert_null(s);
        assert_non_null(strstr(err, "not a gpuslice simulator state file"));
        assert_null(strstr(err, "xxxx"));
        unlink(sim_state_file);
}

/* Outside a container the recorded host PID is our PID, and the namespace is ours. */
static void test_self_identity(void **state) {
        (void)state;
        struct sim_identity id;
        sim_self_identity(&id);
        assert_int_equal(id.ns_pid, (uint32_t)getpid());
        assert_int_equal(id.pid, (uint32_t)getpid());
        struct stat st;
        assert_int_equal(stat("/proc/self/ns/pid", &st), 0);
        assert_int_equal(id.pidns, (uint64_t)st.st_ino);
}

static void test_default_state_path_is_per_node(void **state) {
        (void)state;
        char a[PATH_MAX], b[PATH_MAX];
        unsetenv("GPUSLICE_SIM_STATE");
        assert_int_equal(sim_state_path("/x/one.topo", a, sizeof a), 0);
        assert_int_equal(sim_state_path("/x/two.topo", b, sizeof b), 0);
        assert_true(startswith(a, "/dev/shm/gpuslice-sim-"));
        assert_string_not_equal(a, b);
        setenv("GPUSLICE_SIM_STATE", "/tmp/explicit", 1);
        assert_int_equal(sim_state_path("/x/one.topo", a, sizeof a), 0);
        assert_string_equal(a, "/tmp/explicit");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_teardown(test_lost_gpu, teardown),
                cmocka_unit_test_teardown(test_no_permission_gpu, teardown),
                cmocka_unit_test_teardown(test_no_permission_by_uuid, teardown),
                cmocka_unit_test_teardown(test_process_list_empty, teardown),
                cmocka_unit_test_teardown(test_process_list_size_protocol, teardown),
                cmocka_unit_test_teardown(test_process_list_layouts, teardown),
                cmocka_unit_test_teardown(test_dead_pids_are_pruned, teardown),
                cmocka_unit_test_teardown(test_utilization_from_processes, teardown),
                cmocka_unit_test_teardown(test_process_utilization_samples, teardown),
                cmocka_unit_test_teardown(test_supported_event_types, teardown),
                cmocka_unit_test_teardown(test_xid_delivered_once_per_set, teardown),
                cmocka_unit_test_teardown(test_xid_only_for_registered_gpus, teardown),
                cmocka_unit_test_teardown(test_wait_wakes_on_event_from_other_process, teardown),
                cmocka_unit_test_teardown(test_event_ring_overflow_skips_lost_events, teardown),
                cmocka_unit_test_teardown(test_shutdown_while_waiting, teardown),
                cmocka_unit_test_teardown(test_sigkilled_lock_holder_does_not_block, teardown),
                cmocka_unit_test_teardown(test_foreign_state_file_refused, teardown),
                cmocka_unit_test_teardown(test_state_for_other_node_refused, teardown),
                cmocka_unit_test_teardown(test_state_with_unterminated_node_refused, teardown),
                cmocka_unit_test_teardown(test_self_identity, teardown),
                cmocka_unit_test_teardown(test_default_state_path_is_per_node, teardown),
        };
        return cmocka_run_group_tests(tests, sim_test_setup, sim_test_group_teardown);
}
