/* SPDX-License-Identifier: Apache-2.0 */
/* Node labels: value sanitizing, GPU families, the NFD features text, the atomic write. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <sys/stat.h>

#include "labels/labels.h"
#include "util/util.h"

static struct topo *titanv(void) {
        static struct topo t;
        memset(&t, 0, sizeof t);
        t.n_gpus = 8;
        for (int i = 0; i < 8; i++) {
                t.gpu[i].index = i;
                strscpy(t.gpu[i].name, "TITAN V", sizeof t.gpu[i].name);
                t.gpu[i].memory_total = 12066ull << 20;
                t.gpu[i].cc_major = 7;
        }
        strscpy(t.driver_version, "450.57", sizeof t.driver_version);
        t.cuda_version = 11000;
        return &t;
}

static void test_sanitize(void **state) {
        (void)state;
        char b[64];
        assert_string_equal(labels_sanitize("Tesla P100-PCIE-16GB", b, sizeof b), "Tesla-P100-PCIE-16GB");
        assert_string_equal(labels_sanitize("  (NVIDIA A100) ", b, sizeof b), "NVIDIA-A100");
        assert_string_equal(labels_sanitize("***", b, sizeof b), "");
        assert_string_equal(labels_sanitize("", b, sizeof b), "");
        char longname[100];
        memset(longname, 'x', sizeof longname - 1);
        longname[99] = '\0';
        assert_int_equal(strlen(labels_sanitize(longname, b, sizeof b)), 63);
}

static void test_family(void **state) {
        (void)state;
        assert_string_equal(labels_gpu_family(7, 0), "volta");
        assert_string_equal(labels_gpu_family(7, 5), "turing");
        assert_string_equal(labels_gpu_family(8, 0), "ampere");
        assert_string_equal(labels_gpu_family(8, 9), "ada-lovelace");
        assert_string_equal(labels_gpu_family(9, 0), "hopper");
        assert_string_equal(labels_gpu_family(3, 7), "kepler");
        assert_null(labels_gpu_family(0, 0));
        assert_null(labels_gpu_family(42, 0));
}

static void test_format_seed(void **state) {
        (void)state;
        char *s;
        size_t n;
        assert_int_equal(labels_format(titanv(), &s, &n), 0);
        assert_string_equal(s, "nvidia-gpu-name=TITAN-V\n"
                               "nvidia.com/gpu.product=TITAN-V\n"
                               "nvidia.com/gpu.memory=12066\n"
                               "nvidia.com/gpu.count=8\n"
                               "nvidia.com/gpu.family=volta\n"
                               "nvidia.com/gpu.compute.major=7\n"
                               "nvidia.com/gpu.compute.minor=0\n"
                               "nvidia.com/cuda.driver-version.major=450\n"
                               "nvidia.com/cuda.driver-version.minor=57\n"
                               "nvidia.com/cuda.driver-version.full=450.57\n"
                               "nvidia.com/cuda.runtime-version.major=11\n"
                               "nvidia.com/cuda.runtime-version.minor=0\n"
                               "nvidia.com/cuda.runtime-version.full=11.0\n");
        free(s);
}

static void test_format_unknowns_left_out(void **state) {
        (void)state;
        struct topo *t = titanv();
        t->gpu[0].state = TOPO_GPU_LOST; /* the first queryable GPU speaks for the node */
        strscpy(t->gpu[1].name, "Tesla K80", sizeof t->gpu[1].name);
        t->gpu[1].cc_major = 0;
        t->gpu[1].memory_total = 0;
        strscpy(t->driver_version, "550.54.15", sizeof t->driver_version);
        t->cuda_version = 12040;
        char *s;
        size_t n;
        assert_int_equal(labels_format(t, &s, &n), 0);
        assert_non_null(strstr(s, "nvidia.com/gpu.product=Tesla-K80\n"));
        assert_null(strstr(s, "gpu.memory"));
        assert_null(strstr(s, "gpu.family"));
        assert_non_null(strstr(s, "nvidia.com/cuda.driver-version.revision=15\n"));
        assert_non_null(strstr(s, "nvidia.com/cuda.runtime-version.full=12.4\n"));
        free(s);
}

static void test_format_no_gpu(void **state) {
        (void)state;
        struct topo t;
        memset(&t, 0, sizeof t);
        char *s = NULL;
        size_t n;
        assert_int_equal(labels_format(&t, &s, &n), -ENODEV);
        assert_null(s);
}

static void test_write_atomic(void **state) {
        (void)state;
        char dir[] = "/tmp/gpuslice-labels-XXXXXX";
        assert_non_null(mkdtemp(dir));
        char path[256];
        snprintf(path, sizeof path, "%s/features", dir);
        assert_int_equal(labels_write_atomic(path, "a=1\n", 4), 0);
        assert_int_equal(labels_write_atomic(path, "b=2\n", 4), 0); /* replaces */
        char *text;
        size_t n;
        assert_int_equal(read_file(path, 100, &text, &n), 0);
        assert_string_equal(text, "b=2\n");
        free(text);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0644);
        unlink(path);
        assert_int_equal(rmdir(dir), 0); /* nothing else left behind */
}

static void test_write_missing_dir(void **state) {
        (void)state;
        assert_int_equal(labels_write_atomic("/nonexistent-dir/features", "a=1\n", 4), -ENOENT);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sanitize),          cmocka_unit_test(test_family),
                cmocka_unit_test(test_format_seed),       cmocka_unit_test(test_format_unknowns_left_out),
                cmocka_unit_test(test_format_no_gpu),     cmocka_unit_test(test_write_atomic),
                cmocka_unit_test(test_write_missing_dir),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
