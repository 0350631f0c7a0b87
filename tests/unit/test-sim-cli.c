/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test-sim-cli — build/sim/gpuslice-sim run as a separate process against the same simulated
 * node as the simulated NVML loaded here: every change it makes is visible through NVML, and
 * bad command lines fail with the documented exit codes.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "test-sim-common.h"

#define SIM_CLI GPUSLICE_BUILD_DIR "/sim/gpuslice-sim"

/* Run gpuslice-sim with the arguments (NULL-terminated), output discarded; returns the exit code. */
static int run(const char *arg, ...) {
        const char *argv[16] = { "gpuslice-sim" };
        unsigned n = 1;
        va_list ap;
        va_start(ap, arg);
        for (const char *a = arg; a && n < ELEMENTSOF(argv) - 1; a = va_arg(ap, const char *))
                argv[n++] = a;
        va_end(ap);
        argv[n] = NULL;
        pid_t pid = fork();
        if (pid == 0) {
                int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
                if (null >= 0) {
                        dup2(null, STDOUT_FILENO);
                        dup2(null, STDERR_FILENO);
                }
                execv(SIM_CLI, (char **)argv);
                _exit(127);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
                return -1;
        return WEXITSTATUS(st);
}

static void start(const char *file) {
        sim_select(file);
        assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
}

static void test_help_and_usage(void **state) {
        (void)state;
        start(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        assert_int_equal(run("--help", NULL), 0);
        assert_int_equal(run("proc", "add", "--help", NULL), 0);
        assert_int_equal(run(NULL), 2);
        assert_int_equal(run("frobnicate", NULL), 2);
        assert_int_equal(run("xid", "0", NULL), 2);
        assert_int_equal(run("xid", "zero", "48", NULL), 2);
        assert_int_equal(run("lose", "8", NULL), 2); /* the node has GPUs 0-7 */
        assert_int_equal(run("util", "0", "101", NULL), 2);
        assert_int_equal(run("proc", "add", "--gpu", "0", "--pid", "1", NULL), 2); /* no --mem */
        assert_int_equal(run("proc", "add", "--gpu", "0", "--pid", "1", "--mem", "lots", NULL), 2);
        assert_int_equal(run("proc", "add", "--gpu", "0", "--pid", "1", "--mem", "1TiB", NULL), 4);
        assert_int_equal(run("proc", "del", "--pid", "4242", NULL), 4);
}

static void test_bad_node(void **state) {
        (void)state;
        char path[PATH_MAX];
        assert_int_equal(sim_write_node("bad.topo", "GPU0 GPU1\nnonsense\n", path, sizeof path), 0);
        sim_select(path);
        assert_int_equal(run("show", NULL), 3);
        unlink(path);
        unsetenv("GPUSLICE_SIM_NODE");
        assert_int_equal(run("show", NULL), 1);
}

static void test_lose_deny_restore(void **state) {
        (void)state;
        start(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        nvmlDevice_t d;
        assert_int_equal(run("lose", "3", NULL), 0);
        assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(3, &d), NVML_ERROR_GPU_IS_LOST);
        assert_int_equal(run("deny", "4", NULL), 0);
        assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(4, &d), NVML_ERROR_NO_PERMISSION);
        assert_int_equal(run("restore", "3", NULL), 0);
        assert_int_equal(run("restore", "4", NULL), 0);
        assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(3, &d), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(4, &d), NVML_SUCCESS);
}

static void test_xid_and_lose_post_events(void **state) {
        (void)state;
        start(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        nvmlEventSet_t set;
        assert_int_equal(N.nvmlEventSetCreate(&set), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceRegisterEvents(sim_dev(1), nvmlEventTypeXidCriticalError, set), NVML_SUCCESS);
        assert_int_equal(run("xid", "1", "48", NULL), 0);
        assert_int_equal(run("lose", "1", NULL), 0);
        nvmlEventData_t e;
        assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 1000), NVML_SUCCESS);
        assert_int_equal(e.eventData, 48);
        assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 1000), NVML_SUCCESS);
        assert_int_equal(e.eventData, 79); /* fallen off the bus */
        assert_int_equal(N.nvmlEventSetWait_v2(set, &e, 0), NVML_ERROR_TIMEOUT);
        N.nvmlEventSetFree(set);
}

static void test_proc_add_del(void **state) {
        (void)state;
        start(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        char pid[16];
        snprintf(pid, sizeof pid, "%d", (int)getpid());
        assert_int_equal(run("proc", "add", "--gpu", "2", "--pid", pid, "--mem", "512MiB", "--sm", "35", NULL), 0);
        assert_int_equal(run("proc", "add", "--gpu", "2", "--pid", "999999", "--mem", "1GiB", "--keep", NULL), 0);
        nvmlProcessInfo_t infos[4];
        unsigned count = 4;
        assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(sim_dev(2), &count, infos), NVML_SUCCESS);
        assert_int_equal(count, 2);
        uint64_t sum = infos[0].usedGpuMemory + infos[1].usedGpuMemory;
        assert_int_equal(sum, (512ULL << 20) + (1ULL << 30));
        nvmlUtilization_t u;
        assert_int_equal(N.nvmlDeviceGetUtilizationRates(sim_dev(2), &u), NVML_SUCCESS);
        assert_int_equal(u.gpu, 35);
        assert_int_equal(run("show", NULL), 0);
        assert_int_equal(run("proc", "del", "--pid", pid, NULL), 0);
        count = 4;
        assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(sim_dev(2), &count, infos), NVML_SUCCESS);
        assert_int_equal(count, 1);
        assert_int_equal(infos[0].pid, 999999);
}

static void test_util_and_reset(void **state) {
        (void)state;
        start(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        assert_int_equal(run("util", "6", "70", NULL), 0);
        nvmlUtilization_t u;
        assert_int_equal(N.nvmlDeviceGetUtilizationRates(sim_dev(6), &u), NVML_SUCCESS);
        assert_int_equal(u.gpu, 70);
        assert_int_equal(run("lose", "5", NULL), 0);
        assert_int_equal(run("proc", "add", "--gpu", "6", "--pid", "999999", "--mem", "1GiB", "--keep", NULL), 0);
        assert_int_equal(run("reset", NULL), 0);
        assert_int_equal(N.nvmlDeviceGetUtilizationRates(sim_dev(6), &u), NVML_SUCCESS);
        assert_int_equal(u.gpu, 0);
        nvmlDevice_t d;
        assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(5, &d), NVML_SUCCESS);
        unsigned count = 0;
        assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(sim_dev(6), &count, NULL), NVML_SUCCESS);
        assert_int_equal(count, 0);
}

static void test_reset_replaces_stale_file(void **state) {
        (void)state;
        sim_select(SIM_TOPO("seed000-8gpu-pcie-2socket.topo"));
        FILE *f = fopen(sim_state_file, "we");
        assert_non_null(f);
        fputs("stale", f);
        fclose(f);
        assert_int_equal(run("show", NULL), 1);
        assert_int_equal(run("reset", NULL), 0);
        assert_int_equal(run("show", NULL), 0);
        assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_teardown(test_help_and_usage, sim_test_teardown),
                cmocka_unit_test_teardown(test_bad_node, sim_test_teardown),
                cmocka_unit_test_teardown(test_lose_deny_restore, sim_test_teardown),
                cmocka_unit_test_teardown(test_xid_and_lose_post_events, sim_test_teardown),
                cmocka_unit_test_teardown(test_proc_add_del, sim_test_teardown),
                cmocka_unit_test_teardown(test_util_and_reset, sim_test_teardown),
                cmocka_unit_test_teardown(test_reset_replaces_stale_file, sim_test_teardown),
        };
        return cmocka_run_group_tests(tests, sim_test_setup, sim_test_group_teardown);
}
