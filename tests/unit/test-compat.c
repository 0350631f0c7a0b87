/* SPDX-License-Identifier: Apache-2.0 */
/* test-compat — NVIDIA_REQUIRE_* expressions (src/compat) on the real strings of CUDA 11.0–13.0
 * images (tests/data/compat/cuda-X.Y.env, copied from the images' environment), the environment
 * rules (NVIDIA_DISABLE_REQUIRE, legacy CUDA_VERSION), malformed input, and the CUDA ↔ driver table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "compat/compat.h"
#include "util/util.h"

static char *image_require(const char *cuda) {
        char path[512], *text = NULL;
        size_t len;
        snprintf(path, sizeof path, "%s/tests/data/compat/cuda-%s.env", GPUSLICE_SOURCE_DIR, cuda);
        assert_int_equal(read_file(path, 1 << 16, &text, &len), 0);
        while (len && text[len - 1] == '\n')
                text[--len] = '\0';
        return text;
}

static struct compat_gpu gpu(int index, const char *brand, int ma, int mi) {
        struct compat_gpu g = { .index = index, .cc_major = ma, .cc_minor = mi };
        strscpy(g.brand, brand, sizeof g.brand);
        return g;
}

static struct compat_node node(const char *driver, int cuda, const struct compat_gpu *gpus, size_t n) {
        struct compat_node nd = { .cuda = cuda, .gpus = gpus, .n_gpus = n };
        strscpy(nd.driver, driver, sizeof nd.driver);
        return nd;
}

/* The library's calls with the message copied into msg (NULL: no struct gs_error at all); the code that
 * travels with the message is the one returned. */
static int copy_out(int r, const struct gs_error *e, char *msg, size_t len) {
        if (msg)
                strscpy(msg, e->message, MIN(len, sizeof e->message));
        assert_int_equal(r < 0 && msg ? e->code : r, r);
        return r;
}

static int require_check(const char *expr, size_t n, const struct compat_node *nd, char *msg, size_t len) {
        struct gs_error e = { 0 };
        return copy_out(compat_require_check(expr, n, nd, msg ? &e : NULL), &e, msg, len);
}

static int env_check(const char *const *env, size_t n_env, const struct compat_node *nd, char *msg, size_t len) {
        struct gs_error e = { 0 };
        return copy_out(compat_env_check(env, n_env, nd, msg ? &e : NULL), &e, msg, len);
}

static int check(const char *expr, const struct compat_node *nd, char *msg, size_t len) {
        msg[0] = '\0';
        return require_check(expr, strlen(expr), nd, msg, len);
}

/* req against a node with one GPU g, driver and CUDA version: check's result, the message in msg. */
static int check_on(const char *req, const char *driver, int cuda, const struct compat_gpu *g, char *msg, size_t len) {
        struct compat_node nd = node(driver, cuda, g, 1);
        return check(req, &nd, msg, len);
}

static void test_versions(void **state) {
        (void)state;
        struct compat_version a, b;
        char buf[32];
        assert_int_equal(compat_version_parse("535.104.05", 10, &a), 0);
        assert_int_equal(a.n, 3);
        assert_int_equal(a.part[2], 5);
        assert_string_equal(compat_version_format(&a, buf, sizeof buf), "535.104.05");
        assert_int_equal(compat_version_parse("470", 3, &b), 0);
        assert_true(compat_version_cmp(&b, &a) < 0);
        assert_int_equal(compat_version_parse("470.57.02", 9, &a), 0);
        assert_true(compat_version_cmp(&a, &b) > 0); /* 470.57.02 > 470 */
        assert_int_equal(compat_version_parse("471", 3, &b), 0);
        assert_true(compat_version_cmp(&a, &b) < 0);
        assert_int_equal(compat_version_parse("12", 2, &a), 0);
        assert_int_equal(compat_version_parse("12.0", 4, &b), 0);
        assert_int_equal(compat_version_cmp(&a, &b), 0);
        a = compat_version_from_cuda(12020);
        assert_string_equal(compat_version_format(&a, buf, sizeof buf), "12.2");
        const char *bad[] = { "", ".", "1.", ".1", "1..2", "1.2.3.4.5", "a", "1a", "-1", "1234567890", " 1" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(compat_version_parse(bad[i], strlen(bad[i]), &a), -EINVAL);
}

/* CUDA 12.4 image: native on a 550 driver; on 535 only for Tesla (forward compatibility branch);
 * a GeForce on 535 is refused with the one clear line. */
static void test_image_12_4(void **state) {
        (void)state;
        char msg[512];
        char *req = image_require("12.4");
        assert_string_equal(req, "cuda>=12.4 brand=tesla,driver>=470,driver<471 brand=tesla,driver>=535,driver<536");
        struct compat_gpu tesla = gpu(0, "tesla", 8, 0), geforce = gpu(0, "geforce", 8, 6);
        assert_int_equal(check_on(req, "550.54.15", 12040, &tesla, msg, sizeof msg), 0);
        assert_int_equal(check_on(req, "535.104.05", 12020, &tesla, msg, sizeof msg), 0);
        assert_int_equal(check_on(req, "535.104.05", 12020, &geforce, msg, sizeof msg), -EPERM);
        assert_string_equal(msg, "cuda>=12.4: needs driver ≥ 550.54.14 for CUDA 12.4, node has 535.104.05 (CUDA 12.2)"
                                 " (and none of the 2 other alternatives holds)");
        assert_null(strchr(msg, '\n'));
        /* Tesla on 545 (CUDA 12.3): neither native nor a listed branch */
        assert_int_equal(check_on(req, "545.23.06", 12030, &tesla, msg, sizeof msg), -EPERM);
        free(req);
}

static void test_image_11_0(void **state) {
        (void)state;
        char msg[512];
        char *req = image_require("11.0");
        struct compat_gpu tesla = gpu(0, "tesla", 7, 0), quadro = gpu(1, "quadro", 7, 5);
        /* R418 Tesla: forward compatibility */
        assert_int_equal(check_on(req, "418.87.01", 10010, &tesla, msg, sizeof msg), 0);
        assert_int_equal(check_on(req, "450.80.02", 11000, &quadro, msg, sizeof msg), 0);
        assert_int_equal(check_on(req, "440.33.01", 10020, &quadro, msg, sizeof msg), -EPERM);
        assert_non_null(strstr(msg, "needs driver ≥ 450.36.06 for CUDA 11.0, node has 440.33.01 (CUDA 10.2)"));
        free(req);
}

static void test_image_12_2_every_brand(void **state) {
        (void)state;
        char msg[512];
        char *req = image_require("12.2");
        struct compat_gpu g = gpu(0, "geforce", 8, 6);
        assert_int_equal(check_on(req, "470.57.02", 11040, &g, msg, sizeof msg), 0); /* 12.2 lists geforce on 470 */
        assert_int_equal(check_on(req, "510.47.03", 11060, &g, msg, sizeof msg), -EPERM);
        free(req);
}

/* CUDA 13.0 images list no geforce alternative: a GeForce on 535 is refused, a Tesla accepted;
 * 580 runs everything natively. */
static void test_image_13_0(void **state) {
        (void)state;
        char msg[512];
        char *req = image_require("13.0");
        struct compat_gpu geforce = gpu(0, "geforce", 8, 9), tesla = gpu(0, "tesla", 9, 0);
        assert_int_equal(check_on(req, "535.104.05", 12020, &geforce, msg, sizeof msg), -EPERM);
        assert_non_null(
                strstr(msg, "cuda>=13.0: needs driver ≥ 580.65.06 for CUDA 13.0, node has 535.104.05 (CUDA 12.2)"));
        assert_int_equal(check_on(req, "535.104.05", 12020, &tesla, msg, sizeof msg), 0);
        assert_int_equal(check_on(req, "580.65.06", 13000, &geforce, msg, sizeof msg), 0);
        free(req);
}

static void test_every_gpu_must_hold(void **state) {
        (void)state;
        char msg[512];
        struct compat_gpu two[] = { gpu(0, "tesla", 8, 0), gpu(1, "geforce", 7, 5) };
        struct compat_node nd = node("535.104.05", 12020, two, 2);
        assert_int_equal(check("brand=tesla", &nd, msg, sizeof msg), -EPERM);
        assert_string_equal(msg, "brand=tesla: needs a GPU of brand tesla, GPU 1 is geforce");
        assert_int_equal(check("arch>=8.0", &nd, msg, sizeof msg), -EPERM);
        assert_string_equal(msg, "arch>=8.0: needs compute capability ≥ 8.0, GPU 1 has 7.5");
        assert_int_equal(check("arch>=7.5,brand!=quadro", &nd, msg, sizeof msg), 0);
        /* no GPU: brand and arch are skipped, cuda and driver still count */
        struct compat_node none = node("535.104.05", 12020, NULL, 0);
        assert_int_equal(check("brand=tesla,arch>=9.0", &none, msg, sizeof msg), 0);
        assert_int_equal(check("driver<535", &none, msg, sizeof msg), -EPERM);
        assert_string_equal(msg, "driver<535: needs driver < 535, node has 535.104.05");
}

static void test_operators_and_unknown_keys(void **state) {
        (void)state;
        char msg[512];
        struct compat_node nd = node("535.104.05", 12020, NULL, 0);
        const char *yes[] = { "cuda=12.2",
                              "cuda!=12.1",
                              "cuda<12.3",
                              "cuda<=12.2",
                              "cuda>12.1",
                              "cuda>=12",
                              "driver=535.104.05",
                              "driver>535",
                              "foo=bar",
                              "foo>=1,cuda>=12",
                              "  cuda>=13.0   cuda>=12.0 ",
                              "",
                              "   ",
                              "CUDA>=12.2",
                              "vendor!=x,driver<536" };
        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (check(yes[i], &nd, msg, sizeof msg) != 0)
                        fail_msg("'%s' should hold: %s", yes[i], msg);
        }
        const char *no[] = { "cuda=12.1",  "cuda!=12.2",           "cuda<12.2",           "cuda>12.2", "cuda>=12.3",
                             "driver<535", "cuda>=12,driver>=536", "cuda>=13 driver>=600" };
        for (size_t i = 0; i < ELEMENTSOF(no); i++) {
                if (check(no[i], &nd, msg, sizeof msg) != -EPERM)
                        fail_msg("'%s' should fail", no[i]);
                assert_true(msg[0] != '\0');
        }
}

static void test_unknown_node_facts_refuse(void **state) {
        (void)state;
        char msg[512];
        struct compat_node nd = node("", 0, NULL, 0);
        assert_int_equal(check("cuda>=12.0", &nd, msg, sizeof msg), -EPERM);
        assert_non_null(strstr(msg, "unknown"));
        assert_int_equal(check("driver>=470", &nd, msg, sizeof msg), -EPERM);
}

static void test_malformed(void **state) {
        (void)state;
        char msg[512];
        struct compat_node nd = node("535.104.05", 12020, NULL, 0);
        const char *bad[] = { "cuda",
                              "cuda>=",
                              "cuda>=x",
                              "cuda>=12.",
                              "cuda>>12",
                              ">=12",
                              "cuda>=12,",
                              ",cuda>=12",
                              "cuda>=12,,driver>=1",
                              "brand>=tesla",
                              "brand<tesla",
                              "cuda=>12",
                              "driver>=1.2.3.4.5",
                              "cuda>=12=1",
                              "arch>=sm_80",
                              "cuda>=9999999999" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                msg[0] = '\0';
                if (check(bad[i], &nd, msg, sizeof msg) != -EINVAL)
                        fail_msg("'%s' should be malformed", bad[i]);
                assert_non_null(strstr(msg, "malformed"));
                assert_int_equal(compat_require_validate(bad[i], strlen(bad[i]), NULL), -EINVAL);
        }
        /* a NUL inside, and a tiny or absent message buffer */
        assert_int_equal(require_check("cuda>=1\0x", 9, &nd, msg, sizeof msg), -EINVAL);
        char tiny[4];
        assert_int_equal(require_check("cuda>=13", 8, &nd, tiny, sizeof tiny), -EPERM);
        assert_int_equal(strlen(tiny), 3);
        assert_int_equal(require_check("cuda>=13", 8, &nd, NULL, 0), -EPERM);
        /* long input refused, not walked */
        size_t big = COMPAT_EXPR_MAX + 10;
        char *s = malloc(big);
        assert_non_null(s);
        memset(s, 'a', big);
        assert_int_equal(require_check(s, big, &nd, msg, sizeof msg), -EINVAL);
        free(s);
}

static void test_env_rules(void **state) {
        (void)state;
        char msg[512];
        struct compat_gpu g = gpu(0, "geforce", 8, 6);
        struct compat_node nd = node("535.104.05", 12020, &g, 1);
        const char *refuse[] = { "PATH=/bin", "NVIDIA_REQUIRE_CUDA=cuda>=13.0" };
        assert_int_equal(env_check(refuse, 2, &nd, msg, sizeof msg), -EPERM);
        assert_string_equal(msg, "NVIDIA_REQUIRE_CUDA: cuda>=13.0: needs driver ≥ 580.65.06 for CUDA 13.0, node has "
                                 "535.104.05 (CUDA 12.2)");
        const char *ok[] = { "NVIDIA_REQUIRE_CUDA=cuda>=12.2" };
        assert_int_equal(env_check(ok, 1, &nd, msg, sizeof msg), 0);
        const char *disabled[] = { "NVIDIA_REQUIRE_CUDA=cuda>=13.0", "NVIDIA_DISABLE_REQUIRE=true" };
        assert_int_equal(env_check(disabled, 2, &nd, msg, sizeof msg), 0);
        const char *not_disabled[] = { "NVIDIA_REQUIRE_CUDA=cuda>=13.0", "NVIDIA_DISABLE_REQUIRE=yes" };
        assert_int_equal(env_check(not_disabled, 2, &nd, msg, sizeof msg), -EPERM);
        /* a later definition wins */
        const char *later[] = { "NVIDIA_REQUIRE_CUDA=cuda>=13.0", "NVIDIA_REQUIRE_CUDA=cuda>=12.0" };
        assert_int_equal(env_check(later, 2, &nd, msg, sizeof msg), 0);
        /* other NVIDIA_REQUIRE_* variables count too */
        const char *other[] = { "NVIDIA_REQUIRE_CUDA=cuda>=12.0", "NVIDIA_REQUIRE_ARCH=arch>=9.0" };
        assert_int_equal(env_check(other, 2, &nd, msg, sizeof msg), -EPERM);
        assert_string_equal(msg, "NVIDIA_REQUIRE_ARCH: arch>=9.0: needs compute capability ≥ 9.0, GPU 0 has 8.6");
        /* legacy CUDA_VERSION: only when NVIDIA_REQUIRE_CUDA is absent */
        const char *legacy[] = { "CUDA_VERSION=13.0.2" };
        assert_int_equal(env_check(legacy, 1, &nd, msg, sizeof msg), -EPERM);
        assert_non_null(strstr(msg, "CUDA_VERSION=13.0.2: cuda>=13.0: needs driver ≥ 580.65.06"));
        const char *legacy_ok[] = { "CUDA_VERSION=9.0.176" };
        assert_int_equal(env_check(legacy_ok, 1, &nd, msg, sizeof msg), 0);
        const char *legacy_overridden[] = { "CUDA_VERSION=13.0.2", "NVIDIA_REQUIRE_CUDA=cuda>=12.0" };
        assert_int_equal(env_check(legacy_overridden, 2, &nd, msg, sizeof msg), 0);
        const char *legacy_bad[] = { "CUDA_VERSION=twelve" };
        assert_int_equal(env_check(legacy_bad, 1, &nd, msg, sizeof msg), -EINVAL);
        char longname[300];
        memset(longname, 'X', sizeof longname);
        memcpy(longname, "NVIDIA_REQUIRE_", 15);
        memcpy(longname + 200, "=cuda>=1", 9);
        const char *too_long[] = { longname };
        assert_int_equal(env_check(too_long, 1, &nd, msg, sizeof msg), -EINVAL);
        const char *malformed[] = { "NVIDIA_REQUIRE_CUDA=cuda>>1" };
        assert_int_equal(env_check(malformed, 1, &nd, msg, sizeof msg), -EINVAL);
        assert_true(startswith(msg, "NVIDIA_REQUIRE_CUDA: malformed"));
        assert_true(compat_parse_bool("1") && compat_parse_bool("True") && !compat_parse_bool("on") &&
                    !compat_parse_bool(NULL) && !compat_parse_bool(""));
}

static void test_table_and_classify(void **state) {
        (void)state;
        assert_string_equal(compat_min_driver(13000), "580.65.06");
        assert_string_equal(compat_min_driver(12020), "535.54.03");
        assert_null(compat_min_driver(12070)); /* there was no CUDA 12.7 */
        assert_string_equal(compat_minor_compat_driver(11), "450.80.02");
        assert_null(compat_minor_compat_driver(10));
        size_t n;
        const struct compat_cuda_row *t = compat_cuda_table(&n);
        for (size_t i = 1; i < n; i++) { /* ordered, drivers rising with CUDA */
                struct compat_version a, b;
                assert_true(t[i - 1].cuda < t[i].cuda);
                assert_int_equal(compat_version_parse(t[i - 1].min_driver, strlen(t[i - 1].min_driver), &a), 0);
                assert_int_equal(compat_version_parse(t[i].min_driver, strlen(t[i].min_driver), &b), 0);
                assert_true(compat_version_cmp(&a, &b) < 0);
        }
        /* a 535 driver (CUDA 12.2) */
        assert_int_equal(compat_classify(12020, 12020, "535.104.05", false), COMPAT_NATIVE);
        assert_int_equal(compat_classify(11080, 12020, "535.104.05", false), COMPAT_NATIVE);
        assert_int_equal(compat_classify(12080, 12020, "535.104.05", false), COMPAT_MINOR_VERSION);
        assert_int_equal(compat_classify(13000, 12020, "535.104.05", true), COMPAT_FORWARD);
        assert_int_equal(compat_classify(13000, 12020, "535.104.05", false), COMPAT_FORWARD_NEEDS_DATACENTER);
        /* 11.x below its minor-compat floor */
        assert_int_equal(compat_classify(11040, 11000, "450.51.06", false), COMPAT_NONE);
        assert_int_equal(compat_classify(11040, 11000, "450.80.02", false), COMPAT_MINOR_VERSION);
        assert_int_equal(compat_classify(10020, 10010, "418.87.01", false), COMPAT_NONE);
        assert_int_equal(compat_classify(12000, 0, "", false), COMPAT_NONE);
}

static void test_brands(void **state) {
        (void)state;
        assert_string_equal(compat_brand_name(2), "tesla");
        assert_string_equal(compat_brand_name(5), "geforce");
        assert_string_equal(compat_brand_name(13), "nvidiartx");
        assert_string_equal(compat_brand_name(99), "unknown");
        assert_string_equal(compat_brand_name(-1), "unknown");
        assert_string_equal(compat_brand_from_name("NVIDIA GeForce RTX 3090"), "geforce");
        assert_string_equal(compat_brand_from_name("Tesla P40"), "tesla");
        assert_string_equal(compat_brand_from_name("NVIDIA RTX A6000"), "nvidiartx");
        assert_true(compat_gpu_datacenter("tesla", "whatever"));
        assert_false(compat_gpu_datacenter("geforce", "Tesla"));
        assert_true(compat_gpu_datacenter("", "NVIDIA H100 80GB HBM3"));
        assert_false(compat_gpu_datacenter(NULL, "NVIDIA GeForce RTX 4090"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_versions),
                cmocka_unit_test(test_image_12_4),
                cmocka_unit_test(test_image_11_0),
                cmocka_unit_test(test_image_12_2_every_brand),
                cmocka_unit_test(test_image_13_0),
                cmocka_unit_test(test_every_gpu_must_hold),
                cmocka_unit_test(test_operators_and_unknown_keys),
                cmocka_unit_test(test_unknown_node_facts_refuse),
                cmocka_unit_test(test_malformed),
                cmocka_unit_test(test_env_rules),
                cmocka_unit_test(test_table_and_classify),
                cmocka_unit_test(test_brands),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
