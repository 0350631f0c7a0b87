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

/* Two A100-SXM4-80GB: GPU 0 in MIG mode with a 3g.40gb and two 1g.10gb(+me), GPU 1 without MIG. */
static struct mig_node *a100_mig(struct topo *t, bool one_profile) {
        static struct mig_node m;
        memset(&m, 0, sizeof m);
        memset(t, 0, sizeof *t);
        t->n_gpus = m.n_gpus = 2;
        for (int i = 0; i < 2; i++)
                strscpy(t->gpu[i].name, "NVIDIA A100-SXM4-80GB", sizeof t->gpu[i].name);
        m.gpu[0].mode = 1;
        m.gpu[1].mode = one_profile ? 1 : 0;
        const char *prof[] = { "3g.40gb", "1g.10gb", "1g.10gb+me" };
        const unsigned sms[] = { 42, 14, 14 }, mib[] = { 40192, 9856, 9856 }, slices[] = { 3, 1, 1 };
        for (unsigned k = 0; k < 3; k++) {
                struct mig_device *d = &m.gpu[0].dev[m.gpu[0].n_devices++];
                strscpy(d->profile, one_profile ? "1g.10gb" : prof[k], sizeof d->profile);
                d->sms = one_profile ? 14 : sms[k];
                d->memory_mib = one_profile ? 9856 : mib[k];
                d->gi_slices = d->ci_slices = one_profile ? 1 : slices[k];
                d->copy_engines = d->gi_slices;
                d->jpegs = k == 2;
        }
        return &m;
}

static void test_format_mig(void **state) {
        (void)state;
        struct topo t;
        struct mig_node *m = a100_mig(&t, false);
        char *s;
        size_t n;
        assert_int_equal(labels_format_mig(&t, m, "mixed", NULL, &s, &n), 0);
        assert_string_equal(s, "nvidia.com/mig.capable=true\n"
                               "nvidia.com/mig.strategy=mixed\n"
                               "nvidia.com/mig-3g.40gb.count=1\n"
                               "nvidia.com/mig-3g.40gb.replicas=1\n"
                               "nvidia.com/mig-3g.40gb.product=NVIDIA-A100-SXM4-80GB-MIG-3g.40gb\n"
                               "nvidia.com/mig-3g.40gb.memory=40192\n"
                               "nvidia.com/mig-3g.40gb.multiprocessors=42\n"
                               "nvidia.com/mig-3g.40gb.slices.gi=3\n"
                               "nvidia.com/mig-3g.40gb.slices.ci=3\n"
                               "nvidia.com/mig-3g.40gb.engines.copy=3\n"
                               "nvidia.com/mig-3g.40gb.engines.decoder=0\n"
                               "nvidia.com/mig-3g.40gb.engines.encoder=0\n"
                               "nvidia.com/mig-3g.40gb.engines.jpeg=0\n"
                               "nvidia.com/mig-3g.40gb.engines.ofa=0\n"
                               "nvidia.com/mig-1g.10gb.count=1\n"
                               "nvidia.com/mig-1g.10gb.replicas=1\n"
                               "nvidia.com/mig-1g.10gb.product=NVIDIA-A100-SXM4-80GB-MIG-1g.10gb\n"
                               "nvidia.com/mig-1g.10gb.memory=9856\n"
                               "nvidia.com/mig-1g.10gb.multiprocessors=14\n"
                               "nvidia.com/mig-1g.10gb.slices.gi=1\n"
                               "nvidia.com/mig-1g.10gb.slices.ci=1\n"
                               "nvidia.com/mig-1g.10gb.engines.copy=1\n"
                               "nvidia.com/mig-1g.10gb.engines.decoder=0\n"
                               "nvidia.com/mig-1g.10gb.engines.encoder=0\n"
                               "nvidia.com/mig-1g.10gb.engines.jpeg=0\n"
                               "nvidia.com/mig-1g.10gb.engines.ofa=0\n"
                               "nvidia.com/mig-1g.10gb.me.count=1\n"
                               "nvidia.com/mig-1g.10gb.me.replicas=1\n"
                               "nvidia.com/mig-1g.10gb.me.product=NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-me\n"
                               "nvidia.com/mig-1g.10gb.me.memory=9856\n"
                               "nvidia.com/mig-1g.10gb.me.multiprocessors=14\n"
                               "nvidia.com/mig-1g.10gb.me.slices.gi=1\n"
                               "nvidia.com/mig-1g.10gb.me.slices.ci=1\n"
                               "nvidia.com/mig-1g.10gb.me.engines.copy=1\n"
                               "nvidia.com/mig-1g.10gb.me.engines.decoder=0\n"
                               "nvidia.com/mig-1g.10gb.me.engines.encoder=0\n"
                               "nvidia.com/mig-1g.10gb.me.engines.jpeg=1\n"
                               "nvidia.com/mig-1g.10gb.me.engines.ofa=0\n");
        free(s);
        /* single on a node that does not fit it: GFD's INVALID set */
        assert_int_equal(labels_format_mig(&t, m, "single", "", &s, &n), 0);
        assert_non_null(strstr(s, "nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB-MIG-INVALID\n"
                                  "nvidia.com/gpu.count=0\nnvidia.com/gpu.memory=0\n"));
        free(s);
        /* single that fits: the GPU labels are the MIG devices' */
        m = a100_mig(&t, true);
        assert_int_equal(labels_format_mig(&t, m, "single", "1g.10gb", &s, &n), 0);
        assert_non_null(strstr(s, "nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB-MIG-1g.10gb\n"
                                  "nvidia.com/gpu.count=3\nnvidia.com/gpu.memory=9856\n"
                                  "nvidia.com/gpu.multiprocessors=14\n"));
        assert_non_null(strstr(s, "nvidia.com/mig-1g.10gb.count=3\n"));
        free(s);
        /* no MIG side read: the strategy alone; no strategy (none): nothing */
        assert_int_equal(labels_format_mig(&t, NULL, "mixed", NULL, &s, &n), 0);
        assert_string_equal(s, "nvidia.com/mig.strategy=mixed\n");
        free(s);
        m->gpu[0].mode = m->gpu[1].mode = -1;
        assert_int_equal(labels_format_mig(&t, m, NULL, NULL, &s, &n), 0);
        assert_string_equal(s, "nvidia.com/mig.capable=false\n");
        free(s);
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
                cmocka_unit_test(test_write_missing_dir), cmocka_unit_test(test_format_mig),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
