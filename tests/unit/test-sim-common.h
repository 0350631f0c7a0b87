/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test-sim-common — helpers shared by the simulator's unit tests: load build/sim/libnvidia-ml.so.1 by path
 * (tests never link against it) into a typed table generated from NVML_ABI_FUNCTIONS, and point
 * the simulator at a node file and a private state file before the first nvmlInit.
 * Also the cmocka fixtures they share (include <cmocka.h> first).
 * Header-only (static functions): each test program includes it once.
 */
#pragma once

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "nvml/nvml-abi.h"
#include "topo/topo.h"
#include "util/util.h"

#define SIM_NVML_PATH GPUSLICE_BUILD_DIR "/sim/libnvidia-ml.so.1"
#define SIM_CUDA_PATH GPUSLICE_BUILD_DIR "/sim/libcuda.so.1"
#define SIM_TOPO(name) GPUSLICE_TOPO_DIR "/" name

struct sim_nvml {
        void *dl;
#define SIM_NVML_MEMBER(name, ret, params) __typeof__(&name) name;
        NVML_ABI_FUNCTIONS(SIM_NVML_MEMBER)
#undef SIM_NVML_MEMBER
};

static struct sim_nvml N;
static char sim_tmpdir[64];
static char sim_state_file[PATH_MAX];
static unsigned sim_state_counter;

/* Load the library and resolve every symbol (the test fails if one is missing). */
static int sim_nvml_load(void) {
        if (N.dl)
                return 0;
        N.dl = dlopen(SIM_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
        if (!N.dl) {
                fprintf(stderr, "dlopen %s: %s\n", SIM_NVML_PATH, dlerror());
                return -1;
        }
#define SIM_NVML_RESOLVE(name, ret, params)                    \
        N.name = (__typeof__(&name))dlsym(N.dl, #name);        \
        if (!N.name) {                                         \
                fprintf(stderr, "missing symbol %s\n", #name); \
                return -1;                                     \
        }
        NVML_ABI_FUNCTIONS(SIM_NVML_RESOLVE)
#undef SIM_NVML_RESOLVE
        char tmpl[] = "/tmp/gpuslice-sim-test-XXXXXX";
        if (!mkdtemp(tmpl))
                return -1;
        snprintf(sim_tmpdir, sizeof sim_tmpdir, "%s", tmpl);
        return 0;
}

/* Select a node file and a fresh private state file (takes effect at the next first init). */
static void sim_select(const char *node_file) {
        setenv("GPUSLICE_SIM_NODE", node_file, 1);
        snprintf(sim_state_file, sizeof sim_state_file, "%s/state-%u-%u", sim_tmpdir, (unsigned)getpid(),
                 sim_state_counter++);
        setenv("GPUSLICE_SIM_STATE", sim_state_file, 1);
}

/* Drop every init reference and the state file. */
static void sim_shutdown_all(void) {
        while (N.nvmlShutdown && N.nvmlShutdown() == NVML_SUCCESS)
                ;
        if (sim_state_file[0])
                unlink(sim_state_file);
        sim_state_file[0] = '\0';
}

_unused_ static void sim_remove_tmpdir(void) {
        if (sim_tmpdir[0])
                rmdir(sim_tmpdir);
}

/* Parse a node file with the same parser the simulator uses, to compare answers with the file. */
_unused_ static int sim_parse_file(const char *path, struct topo *t) {
        _cleanup_(freep) char *text = NULL;
        size_t len;
        int r = read_file(path, 1 << 22, &text, &len);
        if (r < 0)
                return r;
        struct gs_error err;
        return topo_parse(text, len, t, &err);
}

/* Write text to a file in the temp dir; returns its path in buf. */
_unused_ static int sim_write_node(const char *name, const char *text, char *buf, size_t len) {
        int n = snprintf(buf, len, "%s/%s", sim_tmpdir, name);
        if (n < 0 || (size_t)n >= len)
                return -1;
        FILE *f = fopen(buf, "we");
        if (!f)
                return -1;
        fputs(text, f);
        return fclose(f) == 0 ? 0 : -1;
}

/* ---- cmocka fixtures shared by the simulator tests ---- */

/* Before each test: the library is loaded (once). */
_unused_ static int sim_test_setup(void **state) {
        (void)state;
        return sim_nvml_load();
}

/* After each test: every nvmlInit of the test undone. */
_unused_ static int sim_test_teardown(void **state) {
        (void)state;
        sim_shutdown_all();
        return 0;
}

/* After the group: the private state directory removed. */
_unused_ static int sim_test_group_teardown(void **state) {
        (void)state;
        sim_remove_tmpdir();
        return 0;
}

/* The handle of simulated GPU I (the test fails if there is none). */
_unused_ static nvmlDevice_t sim_dev(unsigned i) {
        nvmlDevice_t d = NULL;
        assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(i, &d), NVML_SUCCESS);
        assert_non_null(d);
        return d;
}
