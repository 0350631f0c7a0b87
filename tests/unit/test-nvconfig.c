/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/nvconfig: NVIDIA's own documented example configs load as they are and mean what NVIDIA's
 * plugin makes of them; every key gpuslice does not support is refused by name; malformed files get a clear error
 * and change nothing; the ConfigMap entry is chosen as NVIDIA's config-manager chooses it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "helpers.h"

#include <errno.h>
#include <string.h>

#include "config/config.h"
#include "nvconfig/nvconfig.h"
#include "util/util.h"

static int load_example(const char *name, struct gpuslice_config *cfg, struct nvconfig *nv, struct gs_error *err) {
        char rel[128];
        size_t len;
        snprintf(rel, sizeof rel, "tests/data/nvidia-config/%s", name);
        char *text = test_read_source(rel, &len);
        config_init_defaults(cfg);
        int r = nvconfig_parse(text, len, name, cfg, nv, err);
        free(text);
        return r;
}

static int parse(const char *text, struct gpuslice_config *cfg, struct nvconfig *nv, struct gs_error *err) {
        config_init_defaults(cfg);
        memset(err, 0, sizeof *err);
        return nvconfig_parse(text, strlen(text), "t.yaml", cfg, nv, err);
}

static void test_example_time_slicing(void **state) {
        (void)state;
        struct gpuslice_config cfg;
        struct nvconfig nv;
        struct gs_error err = { 0 };
        assert_int_equal(load_example("time-slicing.yaml", &cfg, &nv, &err), 0);
        assert_int_equal(nv.ts.sharing, NVCONFIG_SHARING_TIME_SLICING);
        assert_string_equal(nv.ts.name, "nvidia.com/gpu"); /* not renamed: 80 nvidia.com/gpu on 8 GPUs */
        assert_int_equal(nv.ts.replicas, 10);
        assert_true(nv.ts.all);
        assert_false(nv.ts.fail_requests_greater_than_one); /* NVIDIA's default for time-slicing */
        assert_string_equal(nvconfig_sharing_name(nv.ts.sharing), "time-slicing");
        assert_int_equal(nv.mps.sharing, NVCONFIG_SHARING_NONE);

        assert_int_equal(load_example("time-slicing-rename.yaml", &cfg, &nv, &err), 0);
        assert_string_equal(nv.ts.name, "nvidia.com/gpu.shared");
        assert_int_equal(nv.ts.replicas, 10);
}

static void test_example_mps(void **state) {
        (void)state;
        struct gpuslice_config cfg;
        struct nvconfig nv;
        struct gs_error err = { 0 };
        assert_int_equal(load_example("mps.yaml", &cfg, &nv, &err), 0);
        assert_int_equal(nv.mps.sharing, NVCONFIG_SHARING_MPS);
        assert_string_equal(nv.mps.name, "nvidia.com/gpu");
        assert_true(nv.mps.fail_requests_greater_than_one); /* MPS: true when unset, as NVIDIA's */
        assert_int_equal(load_example("mps-rename.yaml", &cfg, &nv, &err), 0);
        assert_string_equal(nv.mps.name, "nvidia.com/gpu.shared");
        assert_string_equal(nvconfig_sharing_name(nv.mps.sharing), "mps");
        assert_int_equal(nv.ts.sharing, NVCONFIG_SHARING_NONE);
}

static void test_example_flags(void **state) {
        (void)state;
        struct gpuslice_config cfg;
        struct nvconfig nv;
        struct gs_error err = { 0 };
        assert_int_equal(load_example("config0.yaml", &cfg, &nv, &err), 0);
        assert_int_equal(nv.ts.sharing, NVCONFIG_SHARING_NONE);
        assert_int_equal(nv.mps.sharing, NVCONFIG_SHARING_NONE);
        assert_int_equal(cfg.mig_strategy, CONFIG_MIG_NONE);
        assert_int_equal(cfg.device_list_strategy, CONFIG_DEVICE_LIST_ENVVAR);
        assert_int_equal(cfg.device_id_strategy, CONFIG_DEVICE_ID_UUID);
        assert_string_equal(cfg.dev_root, "/");
        assert_false(nv.pass_device_specs);
        assert_int_equal(nv.n_notes, 1); /* passDeviceSpecs false: said, not silent */
        assert_non_null(strstr(nv.notes[0], "flags.plugin.passDeviceSpecs"));
        assert_int_equal(load_example("config1.yaml", &cfg, &nv, &err), 0);
        assert_int_equal(cfg.mig_strategy, CONFIG_MIG_MIXED);

        assert_int_equal(parse("version: v1\nflags:\n  nvidiaDriverRoot: /run/nvidia/driver\n  plugin:\n"
                               "    deviceListStrategy: [envvar, cdi-cri]\n    deviceIDStrategy: index\n"
                               "    passDeviceSpecs: true\n    nvidiaCTKPath: /usr/bin/nvidia-ctk\n",
                               &cfg, &nv, &err),
                         0);
        assert_int_equal(cfg.device_list_strategy, CONFIG_DEVICE_LIST_ENVVAR | CONFIG_DEVICE_LIST_CDI);
        assert_int_equal(cfg.device_id_strategy, CONFIG_DEVICE_ID_INDEX);
        assert_string_equal(cfg.dev_root, "/run/nvidia/driver");
        assert_true(nv.pass_device_specs);
        assert_int_equal(nv.n_notes, 1); /* accepted without an effect: said, not silent */
        assert_non_null(strstr(nv.notes[0], "flags.plugin.nvidiaCTKPath"));
}

static void test_mixed_devices(void **state) {
        (void)state;
        struct gpuslice_config cfg;
        struct nvconfig nv;
        struct gs_error err = { 0 };
        assert_int_equal(load_example("mixed-gpus.yaml", &cfg, &nv, &err), 0);
        assert_false(nv.ts.all);
        assert_int_equal(nv.ts.n_devices, 2);
        assert_string_equal(nv.ts.devices[0], "0");
        assert_string_equal(nv.ts.devices[1], "1");
        assert_true(nv.ts.fail_requests_greater_than_one);
        assert_int_equal(parse("version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n"
                               "      replicas: 2\n      devices: 3\n",
                               &cfg, &nv, &err),
                         0);
        assert_int_equal(nv.ts.count, 3);
        assert_int_equal(parse("version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                               "      rename: example.com/sliced\n      replicas: 2\n"
                               "      devices: [GPU-00000000-0000-0000-0000-000000000001]\n",
                               &cfg, &nv, &err),
                         0);
        assert_string_equal(nv.ts.name, "example.com/sliced");
        assert_string_equal(nv.ts.devices[0], "GPU-00000000-0000-0000-0000-000000000001");
}

/* Time-slicing and MPS in one file (beyond NVIDIA's plugin, which then takes MPS alone): disjoint GPUs, two names,
 * each strategy its own replicas and failRequestsGreaterThanOne default. */
static void test_both_strategies(void **state) {
        (void)state;
        struct gpuslice_config cfg;
        struct nvconfig nv;
        struct gs_error err = { 0 };
        assert_int_equal(load_example("mixed-modes.yaml", &cfg, &nv, &err), 0);
        assert_int_equal(nv.ts.sharing, NVCONFIG_SHARING_TIME_SLICING);
        assert_int_equal(nv.mps.sharing, NVCONFIG_SHARING_MPS);
        assert_string_equal(nv.ts.name, "nvidia.com/gpu.shared");
        assert_string_equal(nv.mps.name, "nvidia.com/gpu.mps");
        assert_int_equal(nv.ts.replicas, 4);
        assert_int_equal(nv.mps.replicas, 2);
        assert_false(nv.ts.fail_requests_greater_than_one);
        assert_true(nv.mps.fail_requests_greater_than_one); /* MPS's default, not time-slicing's */
        assert_int_equal(nv.ts.n_devices, 2);
        assert_string_equal(nv.ts.devices[1], "1");
        assert_int_equal(nv.mps.n_devices, 2);
        assert_string_equal(nv.mps.devices[0], "2");
        /* a count beside indices above it; the time-sliced set keeping nvidia.com/gpu */
        assert_int_equal(parse("version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                               "      replicas: 3\n      devices: 2\n  mps:\n    renameByDefault: true\n"
                               "    failRequestsGreaterThanOne: false\n    resources:\n    - name: nvidia.com/gpu\n"
                               "      replicas: 2\n      devices: [2, GPU-00000000-0000-0000-0000-000000000001]\n",
                               &cfg, &nv, &err),
                         0);
        assert_string_equal(nv.ts.name, "nvidia.com/gpu");
        assert_int_equal(nv.ts.count, 2);
        assert_string_equal(nv.mps.name, "nvidia.com/gpu.shared");
        assert_false(nv.mps.fail_requests_greater_than_one);
        assert_string_equal(nvconfig_sharing_key(NVCONFIG_SHARING_MPS), "sharing.mps");
}

/* What gpuslice does not support: refused with the key named (-EOPNOTSUPP), the config untouched. */
static void test_refused_by_name(void **state) {
        (void)state;
        static const struct {
                const char *text, *key;
        } cases[] = {
                { "version: v1\nflags:\n  plugin:\n    deviceListStrategy: volume-mounts\n",
                  "flags.plugin.deviceListStrategy" },
                { "version: v1\nflags:\n  plugin:\n    deviceListStrategy: [envvar, cdi-annotations]\n",
                  "flags.plugin.deviceListStrategy" },
                { "version: v1\nflags:\n  failOnInitError: false\n", "flags.failOnInitError" },
                { "version: v1\nflags:\n  gdsEnabled: true\n", "flags.gdsEnabled" },
                { "version: v1\nflags:\n  mofedEnabled: true\n", "flags.mofedEnabled" },
                { "version: v1\nflags:\n  restartOnDeviceUnhealthy: true\n", "flags.restartOnDeviceUnhealthy" },
                { "version: v1\nflags:\n  gfd:\n    oneshot: true\n", "flags.gfd.oneshot" },
                { "version: v1\nresources:\n  gpus:\n  - pattern: \"A100*\"\n    name: a100\n",
                  "resources.gpus[0].pattern" },
                { "version: v1\nresources:\n  mig:\n  - pattern: \"1g.5gb\"\n    name: small\n", "resources.mig" },
                { "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/mig-1g.5gb\n"
                  "      replicas: 2\n",
                  "sharing.timeSlicing.resources[0].name" },
                { "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                  "      replicas: 2\n      devices: [\"0:1\"]\n",
                  "sharing.timeSlicing.resources[0].devices[0]" },
                { "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                  "      replicas: 2\n    - name: nvidia.com/gpu\n      replicas: 3\n",
                  "sharing.timeSlicing.resources" },
                { "version: v1\nimex:\n  channelIDs: [0]\n", "imex" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct gpuslice_config cfg, before;
                struct nvconfig nv;
                struct gs_error err;
                int r = parse(cases[i].text, &cfg, &nv, &err);
                config_init_defaults(&before);
                if (r != -EOPNOTSUPP || !strstr(err.message, cases[i].key) || !strstr(err.message, "t.yaml"))
                        fail_msg("case %zu: r=%d err=%s", i, r, err.message);
                assert_memory_equal(&cfg, &before, sizeof cfg);
        }
}

static void test_malformed(void **state) {
        (void)state;
        static const struct {
                const char *text, *says;
        } cases[] = {
                { "", "empty" },
                { "- a\n- b\n", "expected a mapping" },
                { "flags: {}\n", "version: missing" },
                { "version: v2\n", "is not v1" },
                { "version: v1\nflagz: {}\n", "flagz: unknown key" },
                { "version: v1\nflags:\n  migStrategy: some\n", "flags.migStrategy: expected none" },
                { "version: v1\nflags:\n  migStrategy: [none]\n", "flags.migStrategy" },
                { "version: v1\nflags:\n  plugin:\n    deviceIDStrategy: serial\n", "flags.plugin.deviceIDStrategy" },
                { "version: v1\nflags:\n  plugin:\n    passDeviceSpecs: maybe\n", "expected true or false" },
                { "version: v1\nflags:\n  plugin:\n    deviceListStrategy: []\n", "deviceListStrategy" },
                { "version: v1\nflags:\n  plugin:\n    deviceListStrategy: fax\n", "fax" },
                { "version: v1\nflags:\n  plugin:\n    pasDeviceSpecs: true\n",
                  "flags.plugin.pasDeviceSpecs: unknown" },
                { "version: v1\nflags: [1]\n", "flags: expected a mapping" },
                { "version: v1\nsharing:\n  timeSlicing:\n    resources: []\n", "no resources specified" },
                { "version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n", "no resources specified" },
                { "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - replicas: 2\n", "no resource name" },
                { "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n",
                  "no replicas specified" },
                { "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                  "      replicas: 0\n",
                  "replicas: expected a number" },
                { "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                  "      replicas: -3\n",
                  "replicas: expected a number" },
                { "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                  "      replicas: 5000\n",
                  "replicas: expected a number" },
                { "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                  "      replicas: 2\n      devices: some\n",
                  "devices: expected all" },
                { "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                  "      replicas: 2\n      devices: [0, 0]\n",
                  "given twice" },
                { "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                  "      replicas: 2\n      devices: [GPU-x]\n",
                  "is not a GPU index or GPU UUID" },
                { "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                  "      replicas: 2\n      rename: \"bad name!\"\n",
                  "is not a resource name" },
                { "version: v1\nsharing:\n  timeSlicing:\n    strategy: packed\n    resources:\n"
                  "    - name: nvidia.com/gpu\n      replicas: 2\n",
                  "unknown time-slicing strategy" },
                /* both strategies: the same name, or a GPU in both (all, two counts, an entry, an index in a count) */
                { "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                  "      replicas: 2\n      devices: [0]\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n"
                  "      replicas: 2\n      devices: [1]\n",
                  "sharing.timeSlicing.resources[0] and sharing.mps.resources[0]: both advertise nvidia.com/gpu" },
                { "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                  "      replicas: 2\n  mps:\n    renameByDefault: true\n    resources:\n    - name: nvidia.com/gpu\n"
                  "      replicas: 2\n      devices: [1]\n",
                  "sharing.timeSlicing.resources[0].devices and sharing.mps.resources[0].devices: GPU all" },
                { "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                  "      replicas: 2\n      devices: 2\n  mps:\n    renameByDefault: true\n    resources:\n"
                  "    - name: nvidia.com/gpu\n      replicas: 2\n      devices: 1\n",
                  "GPU 0 (both count from GPU 0) is in both" },
                { "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                  "      replicas: 2\n      devices: [3, 1]\n  mps:\n    renameByDefault: true\n    resources:\n"
                  "    - name: nvidia.com/gpu\n      replicas: 2\n      devices: [2, 1]\n",
                  "GPU 1 is in both" },
                { "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                  "      replicas: 2\n      devices: [5, 2]\n  mps:\n    renameByDefault: true\n    resources:\n"
                  "    - name: nvidia.com/gpu\n      replicas: 2\n      devices: 3\n",
                  "GPU 2 is in both" },
                { "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                  "      replicas: 2\n      colour: red\n",
                  "colour: unknown key" },
                { "version: v1\nflags: &a {}\nsharing: *a\n", "t.yaml" },
                { "version: v1\n  bad: [indent\n", "t.yaml" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct gpuslice_config cfg, before;
                struct nvconfig nv;
                struct gs_error err;
                int r = parse(cases[i].text, &cfg, &nv, &err);
                config_init_defaults(&before);
                if (r != -EINVAL || !strstr(err.message, cases[i].says))
                        fail_msg("case %zu: r=%d err=%s", i, r, err.message);
                assert_memory_equal(&cfg, &before, sizeof cfg);
        }
}

static void test_select(void **state) {
        (void)state;
        char *dir = test_tmpdir_new("nvconfig");
        char buf[4096];
        struct gs_error err = { 0 };
        assert_int_equal(nvconfig_select(dir, NULL, NULL, buf, sizeof buf, &err), -EINVAL); /* empty */
        test_write_file(test_path(dir, "config0"), "version: v1\n", 12, 0644);
        assert_int_equal(nvconfig_select(dir, NULL, NULL, buf, sizeof buf, &err), 0); /* the only one */
        assert_string_equal(buf, test_path(dir, "config0"));
        test_write_file(test_path(dir, "time-sliced"), "version: v1\n", 12, 0644);
        test_touch(test_path(dir, "..data")); /* a ConfigMap mount's own entries are not configs */
        assert_int_equal(nvconfig_select(dir, NULL, NULL, buf, sizeof buf, &err), -EINVAL);
        assert_non_null(strstr(err.message, NVCONFIG_LABEL));
        assert_int_equal(nvconfig_select(dir, NULL, "config0", buf, sizeof buf, &err), 0);
        assert_string_equal(buf, test_path(dir, "config0"));
        assert_int_equal(nvconfig_select(dir, "time-sliced", "config0", buf, sizeof buf, &err), 0); /* label wins */
        assert_string_equal(buf, test_path(dir, "time-sliced"));
        assert_int_equal(nvconfig_select(dir, "mps", "config0", buf, sizeof buf, &err), -ENOENT);
        assert_non_null(strstr(err.message, "mps"));
        assert_int_equal(nvconfig_select(dir, "../etc", NULL, buf, sizeof buf, &err), -EINVAL);
        test_write_file(test_path(dir, "default"), "version: v1\n", 12, 0644);
        assert_int_equal(nvconfig_select(dir, "", NULL, buf, sizeof buf, &err), 0);
        assert_string_equal(buf, test_path(dir, "default"));
        assert_int_equal(nvconfig_select(test_path(dir, "none"), NULL, NULL, buf, sizeof buf, &err), -ENOENT);
        test_tmpdir_free(dir);
}

/* The one reader: the bytes as they are, or why not, the path named; nothing written on failure. */
static void test_read(void **state) {
        (void)state;
        char *dir = test_tmpdir_new("nvconfig");
        char *text = NULL;
        size_t len = 7;
        struct gs_error err = { 0 };
        test_write_file(test_path(dir, "config0"), "version: v1\n", 12, 0644);
        assert_int_equal(nvconfig_read(test_path(dir, "config0"), &text, &len, &err), 0);
        assert_int_equal(len, 12);
        assert_string_equal(text, "version: v1\n");
        free(text);
        text = NULL;
        len = 7;
        assert_int_equal(nvconfig_read(test_path(dir, "none"), &text, &len, &err), -ENOENT);
        assert_null(text);
        assert_int_equal(len, 7);
        assert_non_null(strstr(err.message, test_path(dir, "none")));
        char *big = malloc(NVCONFIG_FILE_MAX + 1);
        assert_non_null(big);
        memset(big, '#', NVCONFIG_FILE_MAX + 1);
        test_write_file(test_path(dir, "big"), big, NVCONFIG_FILE_MAX + 1, 0644);
        free(big);
        assert_int_equal(nvconfig_read(test_path(dir, "big"), &text, &len, &err), -EFBIG);
        assert_null(text);
        assert_non_null(strstr(err.message, "larger than 1 MiB"));
        test_tmpdir_free(dir);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_example_time_slicing),
                cmocka_unit_test(test_example_mps),
                cmocka_unit_test(test_example_flags),
                cmocka_unit_test(test_mixed_devices),
                cmocka_unit_test(test_both_strategies),
                cmocka_unit_test(test_refused_by_name),
                cmocka_unit_test(test_malformed),
                cmocka_unit_test(test_select),
                cmocka_unit_test(test_read),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
