/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/config: defaults, the file format, every error path, flags over file, the dump
 * round trip, and that the docs name every option. Must never depend on files outside its temp dir
 * (except docs/configuration.md, read to check it is complete). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "helpers.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "config/config.h"
#include "util/util.h"

/* The example file of docs/configuration.md, every key set away from its default. */
static const char full_example[] = "# gpuslice node agent\n"
                                   "[agent]\n"
                                   "state-dir = /srv/gpuslice/state\n"
                                   "log-level = debug\n"
                                   "\n"
                                   "[kubelet]\n"
                                   "plugin-dir = /tmp/dp\n"
                                   "pod-resources-socket = /tmp/pr/kubelet.sock\n"
                                   "[nvml]\n"
                                   "library = /opt/sim/libnvidia-ml.so.1\n"
                                   "[resources]\n"
                                   "profile = tencent\n"
                                   "whole-gpu-name = example.com/gpu\n"
                                   "mig-strategy = mixed\n"
                                   "mig-layouts = /etc/gpuslice/mig.yaml\n"
                                   "nvidia-config = /etc/nvidia-device-plugin\n"
                                   "nvidia-config-default = time-sliced\n"
                                   "mps-control = /opt/nvidia/bin/nvidia-cuda-mps-control\n"
                                   "[devices]\n"
                                   "id-strategy = index\n"
                                   "list-strategy = envvar, cdi\n"
                                   "cdi-kind = example.com/accel\n"
                                   "dev-root = /host\n"
                                   "host-dev-root = /\n"
                                   "driver-root = /driver-root\n"
                                   "host-driver-root = /run/nvidia/driver\n"
                                   "hook-path = /usr/local/lib/gpuslice/gpuslice\n"
                                   "[health]\n"
                                   "disabled = yes\n"
                                   "xid-ignore = 13, 31,  79\n"
                                   "quiet-period = 2m\n"
                                   "[metrics]\n"
                                   "address = \"[::1]:9500\"\n"
                                   "compat = pod-used-gpu-mem,gpu-manager\n"
                                   "[monitor]\n"
                                   "proc-root = /host/proc\n"
                                   "cri-socket = \"\"\n"
                                   "engine = unix:///run/podman/podman.sock\n"
                                   "sample-interval = 10s\n"
                                   "nfd-features-file = /etc/kubernetes/node-feature-discovery/features.d/gpuslice\n"
                                   "[sharing]\n"
                                   "policy = spread\n"
                                   "memory-unit = 1GiB\n"
                                   "interposer = /opt/gpuslice/libgpuslice-cuda.so\n"
                                   "limit-when-alone = off\n"
                                   "[kube]\n"
                                   "kubeconfig = /etc/gpuslice/kubeconfig\n"
                                   "node-name = gpu-node-7.example.org\n"
                                   "[dra]\n"
                                   "enabled = true\n"
                                   "device-plugin = true\n"
                                   "driver-name = gpu.example.com\n"
                                   "registry-dir = /tmp/reg\n"
                                   "plugin-dir = /tmp/plugins\n"
                                   "cdi-dir = /etc/cdi\n"
                                   "sharing = false\n"
                                   "mig-dynamic = 0,2\n";

static int parse(const char *text, struct gpuslice_config *cfg, struct gs_error *err) {
        return config_parse_text(text, strlen(text), cfg, err);
}

/* Parse text onto defaults; expect failure r with exactly this message. */
static void expect_error(const char *text, int r, const char *msg) {
        struct gpuslice_config cfg;
        struct gs_error gerr = { 0 };
        char *err = gerr.message;
        config_init_defaults(&cfg);
        assert_int_equal(parse(text, &cfg, &gerr), r);
        assert_string_equal(err, msg);
}

/* The dump of cfg, malloc'ed. */
static char *dump(const struct gpuslice_config *cfg) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        assert_non_null(f);
        assert_int_equal(config_dump(cfg, f), 0);
        fclose(f);
        return buf;
}

static bool same_config(const struct gpuslice_config *a, const struct gpuslice_config *b) {
        _cleanup_(freep) char *da = dump(a);
        _cleanup_(freep) char *db = dump(b);
        return streq(da, db);
}

static char tmpdir[256];

static int setup_dir(void **state) {
        (void)state;
        char *d = test_tmpdir_new("test-config");
        strscpy(tmpdir, d, sizeof tmpdir);
        free(d);
        return 0;
}

static int teardown_dir(void **state) {
        (void)state;
        return test_rmtree(tmpdir) == 0 ? 0 : -1;
}

static void write_text(const char *path, const char *text) {
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        assert_int_equal(fputs(text, f) >= 0, 1);
        assert_int_equal(fclose(f), 0);
}

/* ---- defaults and valid files ---- */

static void test_defaults_documented_values(void **state) {
        (void)state;
        struct gpuslice_config c;
        config_init_defaults(&c);
        assert_string_equal(c.plugin_dir, "/var/lib/kubelet/device-plugins");
        assert_string_equal(c.state_dir, "/var/lib/gpuslice");
        assert_string_equal(c.pod_resources_socket, "/var/lib/kubelet/pod-resources/kubelet.sock");
        assert_string_equal(c.nvml_library, "libnvidia-ml.so.1");
        assert_int_equal(c.profile, CONFIG_PROFILE_DEFAULT);
        assert_string_equal(config_whole_gpu_resource(&c), "nvidia.com/gpu");
        assert_int_equal(c.device_id_strategy, CONFIG_DEVICE_ID_UUID);
        assert_int_equal(c.device_list_strategy, CONFIG_DEVICE_LIST_ENVVAR);
        assert_string_equal(c.cdi_vendor, "gpuslice.io");
        assert_string_equal(c.cdi_class, "gpu");
        assert_string_equal(c.dev_root, "/");
        static const unsigned xids[] = { 13, 31, 43, 45, 68, 109 };
        assert_int_equal(c.n_xid_ignore, ELEMENTSOF(xids));
        assert_memory_equal(c.xid_ignore, xids, sizeof xids);
        assert_int_equal(c.health_quiet_period_sec, 60);
        assert_false(c.health_disabled);
        assert_int_equal(c.log_level, CONFIG_LOG_INFO);
        assert_string_equal(c.metrics_address, "127.0.0.1:9400");
        assert_string_equal(c.proc_root, "/proc");
        assert_int_equal(c.alloc_policy, CONFIG_POLICY_FRAG);
        assert_true(c.limit_when_alone);
}

static void test_dra_driver_name(void **state) {
        (void)state;
        struct gpuslice_config c;
        struct gs_error err = { 0 };
        config_init_defaults(&c);
        assert_string_equal(c.dra_driver, "gpu.gpuslice.io");
        assert_int_equal(config_set(&c, "dra.driver-name", "dra.example.com", &err), 0);
        assert_string_equal(c.dra_driver, "dra.example.com");
        static const char *const bad[] = {
                "Gpu.Example.com", "gpu_example",  "",
                "-gpu.example",    "gpu..example", "a-driver-name-that-is-far-too-long-to-be-any-dra-driver.example.com"
        };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                assert_int_equal(config_set(&c, "dra.driver-name", bad[i], &err), -EINVAL);
                assert_non_null(strstr(err.message, "dra.driver-name"));
        }
        assert_string_equal(c.dra_driver, "dra.example.com");
        static const char *const good[] = { "", "all", "0", "0,2", "7,10,3" };
        for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
                assert_int_equal(config_set(&c, "dra.mig-dynamic", good[i], &err), 0);
                assert_string_equal(c.dra_mig_dynamic, good[i]);
        }
        static const char *const bad_gpus[] = { "All", "0,", ",0", "0,,1", "01", "-1", "0 1", "x", "1234567" };
        for (size_t i = 0; i < sizeof bad_gpus / sizeof *bad_gpus; i++) {
                assert_int_equal(config_set(&c, "dra.mig-dynamic", bad_gpus[i], &err), -EINVAL);
                assert_non_null(strstr(err.message, "dra.mig-dynamic"));
        }
}

static void test_full_file_sets_every_key(void **state) {
        (void)state;
        struct gpuslice_config c, d;
        struct gs_error gerr = { 0 };
        config_init_defaults(&c);
        config_init_defaults(&d);
        assert_int_equal(parse(full_example, &c, &gerr), 0);
        assert_string_equal(c.state_dir, "/srv/gpuslice/state");
        assert_int_equal(c.log_level, CONFIG_LOG_DEBUG);
        assert_string_equal(c.plugin_dir, "/tmp/dp");
        assert_string_equal(c.pod_resources_socket, "/tmp/pr/kubelet.sock");
        assert_string_equal(c.nvml_library, "/opt/sim/libnvidia-ml.so.1");
        assert_int_equal(c.profile, CONFIG_PROFILE_TENCENT);
        assert_string_equal(config_whole_gpu_resource(&c), "example.com/gpu");
        assert_int_equal(c.mig_strategy, CONFIG_MIG_MIXED);
        assert_string_equal(c.mig_layouts, "/etc/gpuslice/mig.yaml");
        assert_string_equal(c.nvidia_config, "/etc/nvidia-device-plugin");
        assert_string_equal(c.nvidia_config_default, "time-sliced");
        assert_string_equal(c.mps_control, "/opt/nvidia/bin/nvidia-cuda-mps-control");
        assert_int_equal(c.device_id_strategy, CONFIG_DEVICE_ID_INDEX);
        assert_int_equal(c.device_list_strategy, CONFIG_DEVICE_LIST_ENVVAR | CONFIG_DEVICE_LIST_CDI);
        assert_string_equal(c.cdi_vendor, "example.com");
        assert_string_equal(c.cdi_class, "accel");
        assert_string_equal(c.dev_root, "/host");
        assert_string_equal(c.host_dev_root, "/");
        assert_string_equal(c.driver_root, "/driver-root");
        assert_string_equal(c.host_driver_root, "/run/nvidia/driver");
        assert_string_equal(c.hook_path, "/usr/local/lib/gpuslice/gpuslice");
        assert_true(c.health_disabled);
        assert_int_equal(c.n_xid_ignore, 3);
        assert_int_equal(c.xid_ignore[2], 79);
        assert_int_equal(c.health_quiet_period_sec, 120);
        assert_string_equal(c.metrics_address, "[::1]:9500");
        assert_int_equal(c.metrics_compat, CONFIG_COMPAT_POD_GPU_MEM | CONFIG_COMPAT_GPU_MANAGER);
        assert_string_equal(c.proc_root, "/host/proc");
        assert_string_equal(c.cri_socket, "");
        assert_string_equal(c.engine_url, "unix:///run/podman/podman.sock");
        assert_int_equal(c.sample_interval_sec, 10);
        assert_string_equal(c.nfd_features_file, "/etc/kubernetes/node-feature-discovery/features.d/gpuslice");
        assert_int_equal(c.alloc_policy, CONFIG_POLICY_SPREAD);
        assert_int_equal(c.memory_unit_bytes, 1ULL << 30);
        assert_string_equal(c.interposer_library, "/opt/gpuslice/libgpuslice-cuda.so");
        assert_false(c.limit_when_alone);
        assert_string_equal(c.kubeconfig, "/etc/gpuslice/kubeconfig");
        assert_string_equal(c.node_name, "gpu-node-7.example.org");
        assert_true(c.dra_enabled && c.dra_device_plugin && !c.dra_sharing);
        assert_string_equal(c.dra_mig_dynamic, "0,2");
        assert_string_equal(c.dra_driver, "gpu.example.com");
        assert_string_equal(c.dra_registry_dir, "/tmp/reg");
        assert_string_equal(c.dra_plugin_dir, "/tmp/plugins");
        assert_string_equal(c.dra_cdi_dir, "/etc/cdi");
        /* every line of the dump differs from the defaults' dump (every key was changed) */
        _cleanup_(freep) char *dc = dump(&c);
        _cleanup_(freep) char *dd = dump(&d);
        size_t n_opts;
        config_options(&n_opts);
        size_t differing = 0;
        char *sc = NULL, *sd = NULL;
        for (char *lc = strtok_r(dc, "\n", &sc), *ld = strtok_r(dd, "\n", &sd); lc && ld;
             lc = strtok_r(NULL, "\n", &sc), ld = strtok_r(NULL, "\n", &sd))
                differing += !streq(lc, ld);
        assert_int_equal(differing, n_opts);
}

static void test_mig_strategy(void **state) {
        (void)state;
        struct gpuslice_config c;
        struct gs_error err = { 0 };
        config_init_defaults(&c);
        assert_int_equal(c.mig_strategy, CONFIG_MIG_NONE);
        assert_int_equal(config_set(&c, "resources.mig-strategy", "single", &err), 0);
        assert_int_equal(c.mig_strategy, CONFIG_MIG_SINGLE);
        assert_string_equal(config_mig_strategy_name(c.mig_strategy), "single");
        assert_int_equal(config_set(&c, "resources.mig-strategy", "MIXED", &err), -EINVAL);
        assert_int_equal(config_set(&c, "resources.mig-strategy", "", &err), -EINVAL);
        assert_non_null(strstr(err.message, "one of none, single, mixed"));
        /* a sharing profile with a MIG strategy: MIG devices are shared like small GPUs (docs/mig.md) */
        struct config_args args = { 0 };
        char mixed[] = "mixed", gpuslice[] = "gpuslice";
        struct config_override ov[] = { { "resources.mig-strategy", mixed }, { "resources.profile", gpuslice } };
        args.overrides = ov;
        args.n_overrides = 2;
        assert_int_equal(config_build(&args, NULL, &c, &err), 0);
        assert_int_equal(c.mig_strategy, CONFIG_MIG_MIXED);
        assert_int_equal(c.profile, CONFIG_PROFILE_GPUSLICE);
}

static void test_empty_text_keeps_defaults(void **state) {
        (void)state;
        struct gpuslice_config c, d;
        struct gs_error gerr = { 0 };
        config_init_defaults(&c);
        config_init_defaults(&d);
        assert_int_equal(config_parse_text("", 0, &c, &gerr), 0);
        assert_true(same_config(&c, &d));
}

static void test_comments_crlf_bom_and_blanks(void **state) {
        (void)state;
        struct gpuslice_config c;
        struct gs_error gerr = { 0 };
        config_init_defaults(&c);
        assert_int_equal(parse("\xef\xbb\xbf# comment\r\n; also a comment\r\n\r\n  [ health ]  # trailing\r\n"
                               "\tquiet-period\t=\t45s   # inline comment\r\n"
                               "xid-ignore = 1,2 ;other style\r\n",
                               &c, &gerr),
                         0);
        assert_int_equal(c.health_quiet_period_sec, 45);
        assert_int_equal(c.n_xid_ignore, 2);
        assert_int_equal(c.xid_ignore[1], 2);
}

static void test_quoted_values_keep_specials(void **state) {
        (void)state;
        struct gpuslice_config c;
        struct gs_error gerr = { 0 };
        config_init_defaults(&c);
        assert_int_equal(parse("[agent]\nstate-dir = \"/var/lib/a #b; \\\"c\\\" \\\\d \"  # comment\n", &c, &gerr), 0);
        assert_string_equal(c.state_dir, "/var/lib/a #b; \"c\" \\d ");
}

static void test_hash_inside_unquoted_value_is_kept(void **state) {
        (void)state;
        struct gpuslice_config c;
        struct gs_error gerr = { 0 };
        config_init_defaults(&c);
        assert_int_equal(parse("[agent]\nstate-dir = /var/lib/a#b\n", &c, &gerr), 0);
        assert_string_equal(c.state_dir, "/var/lib/a#b");
}

static void test_comment_right_after_equals_gives_empty_value(void **state) {
        (void)state;
        struct gpuslice_config c;
        struct gs_error gerr = { 0 };
        char *err = gerr.message;
        config_init_defaults(&c);
        assert_int_equal(parse("[metrics]\naddress = # none\n[health]\nxid-ignore =#1\n", &c, &gerr), -EINVAL);
        assert_string_equal(err, "line 4: health.xid-ignore: expected a comma-separated list of Xid numbers, got '#1'");
        assert_int_equal(parse("[metrics]\naddress = # none\n", &c, &gerr), 0);
        assert_string_equal(c.metrics_address, "");
}

static void test_empty_list_and_empty_address(void **state) {
        (void)state;
        struct gpuslice_config c;
        struct gs_error gerr = { 0 };
        config_init_defaults(&c);
        assert_int_equal(parse("[health]\nxid-ignore =\n[metrics]\naddress =\n", &c, &gerr), 0);
        assert_int_equal(c.n_xid_ignore, 0);
        assert_string_equal(c.metrics_address, "");
}

/* kube.node-name: a Kubernetes object name (DNS subdomain) or empty; anything else is refused and
 * leaves the old value. */
static void test_node_name(void **state) {
        (void)state;
        struct gpuslice_config c;
        struct gs_error gerr = { 0 };
        config_init_defaults(&c);
        assert_string_equal(c.node_name, "");
        assert_int_equal(config_set(&c, "kube.node-name", "gpu-7.rack-2", &gerr), 0);
        assert_string_equal(c.node_name, "gpu-7.rack-2");
        static const char *const bad[] = { "Gpu-7", "gpu_7", "-gpu", "gpu-", "a..b", ".a", "gpu 7" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                gs_error_clear(&gerr);
                assert_int_equal(config_set(&c, "kube.node-name", bad[i], &gerr), -EINVAL);
                assert_non_null(strstr(gerr.message, "a node name like"));
                assert_string_equal(c.node_name, "gpu-7.rack-2");
        }
        char long_name[300];
        memset(long_name, 'a', sizeof long_name - 1);
        long_name[sizeof long_name - 1] = 0;
        assert_int_equal(config_set(&c, "kube.node-name", long_name, &gerr), -EINVAL);
        assert_int_equal(config_set(&c, "kube.node-name", "", &gerr), 0);
        assert_string_equal(c.node_name, "");
}

static void test_durations(void **state) {
        (void)state;
        static const struct {
                const char *text;
                uint64_t sec;
        } ok[] = { { "0", 0 },        { "90", 90 },    { "30s", 30 },  { "2m", 120 },
                   { "1h30m", 5400 }, { "1d", 86400 }, { "1m30s", 90 } };
        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                struct gpuslice_config c;
                config_init_defaults(&c);
                assert_int_equal(config_set(&c, "health.quiet-period", ok[i].text, NULL), 0);
                assert_int_equal(c.health_quiet_period_sec, ok[i].sec);
        }
        static const char *const bad[] = { "",    "abc",  "1x", "m",   "1m30",
                                           "-5s", "1.5m", "2d", " 5s", "99999999999999999999s" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct gpuslice_config c;
                config_init_defaults(&c);
                assert_int_equal(config_set(&c, "health.quiet-period", bad[i], NULL), -EINVAL);
                assert_int_equal(c.health_quiet_period_sec, 60);
        }
}

static void test_sample_interval_bounds(void **state) {
        (void)state;
        struct gpuslice_config c;
        config_init_defaults(&c);
        assert_int_equal(config_set(&c, "monitor.sample-interval", "0s", NULL), -EINVAL);
        assert_int_equal(config_set(&c, "monitor.sample-interval", "2h", NULL), -EINVAL);
        assert_int_equal(config_set(&c, "monitor.sample-interval", "1h", NULL), 0);
        assert_int_equal(c.sample_interval_sec, 3600);
}

static void test_list_strategy_both_and_empty(void **state) {
        (void)state;
        struct gpuslice_config c;
        config_init_defaults(&c);
        assert_int_equal(config_set(&c, "devices.list-strategy", "both", NULL), 0);
        assert_int_equal(c.device_list_strategy, CONFIG_DEVICE_LIST_ENVVAR | CONFIG_DEVICE_LIST_CDI);
        assert_int_equal(config_set(&c, "devices.list-strategy", "cdi", NULL), 0);
        assert_int_equal(c.device_list_strategy, CONFIG_DEVICE_LIST_CDI);
        assert_int_equal(config_set(&c, "devices.list-strategy", "", NULL), -EINVAL);
        assert_int_equal(config_set(&c, "devices.list-strategy", "envvar,,cdi", NULL), -EINVAL);
        assert_int_equal(c.device_list_strategy, CONFIG_DEVICE_LIST_CDI);
}

static void test_profiles(void **state) {
        (void)state;
        struct gpuslice_config c;
        config_init_defaults(&c);
        assert_int_equal(config_memory_unit(&c), 0);
        assert_int_equal(config_set(&c, "resources.profile", "gpuslice", NULL), 0);
        assert_string_equal(config_profile_info(c.profile)->core_resource, "gpuslice.io/gpu-core");
        assert_string_equal(config_profile_info(c.profile)->memory_resource, "gpuslice.io/gpu-memory");
        assert_int_equal(config_set(&c, "resources.profile", "aliyun", NULL), 0);
        assert_null(config_profile_info(c.profile)->core_resource);
        assert_string_equal(config_profile_info(c.profile)->memory_resource, "aliyun.com/gpu-mem");
        assert_int_equal(config_memory_unit(&c), 1ULL << 30);
        assert_int_equal(config_set(&c, "sharing.memory-unit", "512MiB", NULL), 0);
        assert_int_equal(config_memory_unit(&c), 512ULL << 20);
        assert_int_equal(config_set(&c, "resources.profile", "tencent", NULL), 0);
        assert_string_equal(config_profile_info(c.profile)->memory_resource, "tencent.com/vcuda-memory");
        assert_null(config_profile_info((enum config_profile)99));
        assert_string_equal(config_profile_name(CONFIG_PROFILE_TENCENT), "tencent");
        assert_string_equal(config_log_level_name(CONFIG_LOG_WARN), "warn");
}

/* ---- errors: exact messages ---- */

static void test_error_bad_duration_message(void **state) {
        (void)state;
        expect_error("# x\n\n[health]\nxid-ignore = 13\n\n\nquiet-period = abc\n", -EINVAL,
                     "line 7: health.quiet-period: expected a duration like 30s or 2m, got 'abc'");
}

static void test_error_unknown_key(void **state) {
        (void)state;
        expect_error("[health]\nquiet-perod = 30s\n", -ENOKEY,
                     "line 2: unknown key 'health.quiet-perod' (did you mean 'health.quiet-period'?)");
}

static void test_error_key_in_wrong_section(void **state) {
        (void)state;
        expect_error("[kubelet]\nstate-dir = /x\n", -ENOKEY,
                     "line 2: unknown key 'kubelet.state-dir' (did you mean 'agent.state-dir'?)");
}

static void test_error_unknown_section_far_from_any(void **state) {
        (void)state;
        expect_error("[gpu]\n", -ENOKEY, "line 1: unknown section [gpu]");
}

static void test_error_unknown_section(void **state) {
        (void)state;
        expect_error("[helth]\n", -ENOKEY, "line 1: unknown section [helth] (did you mean [health]?)");
}

static void test_error_duplicate_section(void **state) {
        (void)state;
        expect_error("[health]\nquiet-period = 1s\n[agent]\n[health]\n", -EINVAL,
                     "line 4: section [health] already appeared on line 1");
}

static void test_error_duplicate_key(void **state) {
        (void)state;
        expect_error("[health]\nquiet-period = 1s\nquiet-period = 2s\n", -EINVAL,
                     "line 3: health.quiet-period: already set on line 2");
}

static void test_error_key_outside_section(void **state) {
        (void)state;
        expect_error("state-dir = /x\n", -EINVAL, "line 1: state-dir: key outside of any [section]");
}

static void test_error_missing_equals(void **state) {
        (void)state;
        expect_error("[agent]\nstate-dir /x\n", -EINVAL,
                     "line 2: expected 'key = value' or '[section]', got 'state-dir /x'");
}

static void test_error_bad_key_name(void **state) {
        (void)state;
        expect_error("[agent]\nState Dir = /x\n", -EINVAL,
                     "line 2: expected a key name (lowercase letters, digits, '-'), got 'State Dir'");
}

static void test_error_unclosed_section(void **state) {
        (void)state;
        expect_error("[agent\n", -EINVAL, "line 1: expected ']' to close the section header");
}

static void test_error_text_after_section(void **state) {
        (void)state;
        expect_error("[agent] x\n", -EINVAL, "line 1: unexpected text after the section header");
}

static void test_error_unterminated_quote(void **state) {
        (void)state;
        expect_error("[agent]\nstate-dir = \"/x\n", -EINVAL, "line 2: agent.state-dir: unterminated quoted string");
}

static void test_error_bad_escape(void **state) {
        (void)state;
        expect_error("[agent]\nstate-dir = \"/x\\n\"\n", -EINVAL,
                     "line 2: agent.state-dir: unknown escape in quoted string (only \\\\ and \\\")");
}

static void test_error_text_after_quote(void **state) {
        (void)state;
        expect_error("[agent]\nstate-dir = \"/x\" y\n", -EINVAL,
                     "line 2: agent.state-dir: unexpected text after the closing quote");
}

static void test_error_overlong_line(void **state) {
        (void)state;
        size_t n = CONFIG_LINE_MAX + 10;
        _cleanup_(freep) char *text = malloc(n + 32);
        assert_non_null(text);
        int h = snprintf(text, 32, "[agent]\n# ");
        memset(text + h, 'x', n);
        text[h + n] = '\0';
        char msg[64];
        snprintf(msg, sizeof msg, "line 2: line longer than %d bytes", CONFIG_LINE_MAX);
        expect_error(text, -EINVAL, msg);
}

static void test_longest_line_accepted(void **state) {
        (void)state;
        /* a comment line of exactly CONFIG_LINE_MAX bytes is fine */
        _cleanup_(freep) char *text = malloc(CONFIG_LINE_MAX + 2);
        assert_non_null(text);
        text[0] = '#';
        memset(text + 1, 'x', CONFIG_LINE_MAX - 1);
        text[CONFIG_LINE_MAX] = '\n';
        struct gpuslice_config c;
        struct gs_error gerr = { 0 };
        config_init_defaults(&c);
        assert_int_equal(config_parse_text(text, CONFIG_LINE_MAX + 1, &c, &gerr), 0);
}

static void test_error_path_too_long(void **state) {
        (void)state;
        _cleanup_(freep) char *text = malloc(CONFIG_PATH_MAX + 64);
        assert_non_null(text);
        int h = snprintf(text, 64, "[agent]\nstate-dir = /");
        memset(text + h, 'a', CONFIG_PATH_MAX);
        text[h + CONFIG_PATH_MAX] = '\0';
        struct gpuslice_config c;
        struct gs_error gerr = { 0 };
        char *err = gerr.message;
        config_init_defaults(&c);
        assert_int_equal(parse(text, &c, &gerr), -EINVAL);
        assert_true(startswith(err, "line 2: agent.state-dir: expected an absolute path, got '/aaa"));
}

static void test_error_embedded_nul(void **state) {
        (void)state;
        static const char text[] = "[agent]\nstate-dir = /x\0y\n";
        struct gpuslice_config c;
        struct gs_error gerr = { 0 };
        char *err = gerr.message;
        config_init_defaults(&c);
        assert_int_equal(config_parse_text(text, sizeof text - 1, &c, &gerr), -EINVAL);
        assert_string_equal(err, "line 2: NUL byte in the file");
        assert_string_equal(c.state_dir, "/var/lib/gpuslice");
}

static void test_error_control_character(void **state) {
        (void)state;
        expect_error("[agent]\nstate-dir = /x\x1b[0m\n", -EINVAL, "line 2: control character 0x1b in the file");
}

/* A value that fails checks for each type, with the message the user sees. */
static void test_error_bad_values_per_type(void **state) {
        (void)state;
        static const struct {
                const char *key, *value, *msg;
        } cases[] = {
                { "agent.state-dir", "relative/dir", "agent.state-dir: expected an absolute path, got 'relative/dir'" },
                { "agent.state-dir", "", "agent.state-dir: expected an absolute path, got ''" },
                { "agent.log-level", "verbose",
                  "agent.log-level: expected one of error, warn, info, debug, got 'verbose'" },
                { "nvml.library", "lib/libnvidia-ml.so.1",
                  "nvml.library: expected a library soname like libnvidia-ml.so.1 or an absolute path, got "
                  "'lib/libnvidia-ml.so.1'" },
                { "resources.profile", "hami",
                  "resources.profile: expected one of default, gpuslice, tencent, aliyun, got 'hami'" },
                { "resources.whole-gpu-name", "gpu",
                  "resources.whole-gpu-name: expected a resource name like nvidia.com/gpu, got 'gpu'" },
                { "resources.whole-gpu-name", "Nvidia.com/gpu",
                  "resources.whole-gpu-name: expected a resource name like nvidia.com/gpu, got 'Nvidia.com/gpu'" },
                { "resources.whole-gpu-name", "kubernetes.io/gpu",
                  "resources.whole-gpu-name: expected a resource name like nvidia.com/gpu, got 'kubernetes.io/gpu'" },
                { "devices.id-strategy", "UUID", "devices.id-strategy: expected one of uuid, index, got 'UUID'" },
                { "devices.list-strategy", "envvar,volume",
                  "devices.list-strategy: expected a comma-separated list of envvar, cdi (or both), got "
                  "'envvar,volume'" },
                { "devices.cdi-kind", "gpuslice.io",
                  "devices.cdi-kind: expected a CDI kind like gpuslice.io/gpu, got 'gpuslice.io'" },
                { "devices.cdi-kind", "1vendor/gpu",
                  "devices.cdi-kind: expected a CDI kind like gpuslice.io/gpu, got '1vendor/gpu'" },
                { "devices.cdi-kind", "vendor/g.pu",
                  "devices.cdi-kind: expected a CDI kind like gpuslice.io/gpu, got 'vendor/g.pu'" },
                { "health.disabled", "maybe", "health.disabled: expected true or false, got 'maybe'" },
                { "health.xid-ignore", "13,abc",
                  "health.xid-ignore: expected a comma-separated list of Xid numbers, got '13,abc'" },
                { "health.xid-ignore", "13,13",
                  "health.xid-ignore: expected a comma-separated list of Xid numbers, got '13,13'" },
                { "health.xid-ignore", "-1",
                  "health.xid-ignore: expected a comma-separated list of Xid numbers, got '-1'" },
                { "metrics.address", "localhost",
                  "metrics.address: expected HOST:PORT like 127.0.0.1:9400, or empty, got 'localhost'" },
                { "metrics.address", "127.0.0.1:0",
                  "metrics.address: expected HOST:PORT like 127.0.0.1:9400, or empty, got '127.0.0.1:0'" },
                { "metrics.address", "127.0.0.1:65536",
                  "metrics.address: expected HOST:PORT like 127.0.0.1:9400, or empty, got '127.0.0.1:65536'" },
                { "metrics.address", "[::1:9400",
                  "metrics.address: expected HOST:PORT like 127.0.0.1:9400, or empty, got '[::1:9400'" },
                { "metrics.compat", "dcgm",
                  "metrics.compat: expected a comma-separated list of pod-used-gpu-mem, gpu-manager, or empty, got "
                  "'dcgm'" },
                { "monitor.cri-socket", "run/containerd.sock",
                  "monitor.cri-socket: expected an absolute path or empty, got 'run/containerd.sock'" },
                { "monitor.engine", "unix://run/podman.sock",
                  "monitor.engine: expected a URL like unix:///run/podman/podman.sock or http://127.0.0.1:2375, or "
                  "empty, got 'unix://run/podman.sock'" },
                { "monitor.engine", "ftp://host:21",
                  "monitor.engine: expected a URL like unix:///run/podman/podman.sock or http://127.0.0.1:2375, or "
                  "empty, got 'ftp://host:21'" },
                { "sharing.policy", "pack", "sharing.policy: expected one of binpack, spread, fgd, frag, got 'pack'" },
                { "sharing.memory-unit", "100KiB",
                  "sharing.memory-unit: expected a size like 256MiB or 1GiB (1MiB to 1TiB), or 0, got '100KiB'" },
                { "sharing.memory-unit", "lots",
                  "sharing.memory-unit: expected a size like 256MiB or 1GiB (1MiB to 1TiB), or 0, got 'lots'" },
                { "sharing.limit-when-alone", "2", "sharing.limit-when-alone: expected true or false, got '2'" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct gpuslice_config c, d;
                struct gs_error gerr = { 0 };
                char *err = gerr.message;
                config_init_defaults(&c);
                config_init_defaults(&d);
                int r = config_set(&c, cases[i].key, cases[i].value, &gerr);
                if (r != -EINVAL || !streq(err, cases[i].msg))
                        fail_msg("case %zu (%s = '%s'): r=%d err='%s'", i, cases[i].key, cases[i].value, r, err);
                assert_true(same_config(&c, &d));
        }
}

static void test_error_too_many_xids(void **state) {
        (void)state;
        char list[CONFIG_XID_MAX * 8] = "";
        size_t n = 0;
        for (unsigned i = 0; i <= CONFIG_XID_MAX; i++)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%u", i ? "," : "", i + 1);
        struct gpuslice_config c;
        struct gs_error gerr = { 0 };
        char *err = gerr.message;
        config_init_defaults(&c);
        assert_int_equal(config_set(&c, "health.xid-ignore", list, &gerr), -EINVAL);
        char msg[64];
        snprintf(msg, sizeof msg, "health.xid-ignore: at most %d Xids, got more", CONFIG_XID_MAX);
        assert_string_equal(err, msg);
}

static void test_error_message_escapes_value(void **state) {
        (void)state;
        struct gpuslice_config c;
        struct gs_error gerr = { 0 };
        char *err = gerr.message;
        config_init_defaults(&c);
        assert_int_equal(config_set(&c, "agent.log-level", "a'b\n", &gerr), -EINVAL);
        assert_string_equal(err, "agent.log-level: expected one of error, warn, info, debug, got 'a\\x27b\\x0a'");
}

static void test_failed_parse_leaves_config_unchanged(void **state) {
        (void)state;
        struct gpuslice_config c, d;
        struct gs_error gerr = { 0 };
        config_init_defaults(&c);
        config_init_defaults(&d);
        assert_int_equal(parse("[agent]\nstate-dir = /new\nlog-level = debug\n[health]\nquiet-period = x\n", &c, &gerr),
                         -EINVAL);
        assert_true(same_config(&c, &d));
        assert_string_equal(c.state_dir, "/var/lib/gpuslice");
}

static void test_parse_applies_on_top_of_given_config(void **state) {
        (void)state;
        struct gpuslice_config c;
        struct gs_error gerr = { 0 };
        config_init_defaults(&c);
        assert_int_equal(config_set(&c, "agent.log-level", "warn", &gerr), 0);
        assert_int_equal(parse("[agent]\nstate-dir = /new\n", &c, &gerr), 0);
        assert_int_equal(c.log_level, CONFIG_LOG_WARN);
        assert_string_equal(c.state_dir, "/new");
}

static void test_set_unknown_key(void **state) {
        (void)state;
        struct gpuslice_config c;
        struct gs_error gerr = { 0 };
        char *err = gerr.message;
        config_init_defaults(&c);
        assert_int_equal(config_set(&c, "health.quietperiod", "1s", &gerr), -ENOKEY);
        assert_string_equal(err, "unknown key 'health.quietperiod' (did you mean 'health.quiet-period'?)");
        assert_int_equal(config_set(&c, "zzz", "1s", &gerr), -ENOKEY);
        assert_string_equal(err, "unknown key 'zzz'"); /* nothing close: no suggestion */
        assert_int_equal(config_set(&c, "health.quiet-period", NULL, &gerr), -EINVAL);
}

/* ---- files ---- */

static void test_load_file(void **state) {
        (void)state;
        char path[300];
        snprintf(path, sizeof path, "%s/node.conf", tmpdir);
        write_text(path, full_example);
        struct gpuslice_config c, d;
        struct gs_error gerr = { 0 };
        config_init_defaults(&c);
        config_init_defaults(&d);
        assert_int_equal(config_load_file(path, &c, &gerr), 0);
        assert_int_equal(parse(full_example, &d, &gerr), 0);
        assert_true(same_config(&c, &d));
}

static void test_load_missing_file(void **state) {
        (void)state;
        char path[300], msg[400];
        snprintf(path, sizeof path, "%s/absent.conf", tmpdir);
        struct gpuslice_config c;
        struct gs_error gerr = { 0 };
        char *err = gerr.message;
        config_init_defaults(&c);
        assert_int_equal(config_load_file(path, &c, &gerr), -ENOENT);
        snprintf(msg, sizeof msg, "%s: %s", path, strerror(ENOENT));
        assert_string_equal(err, msg);
}

static void test_load_directory(void **state) {
        (void)state;
        struct gpuslice_config c;
        struct gs_error gerr = { 0 };
        char *err = gerr.message, msg[400];
        config_init_defaults(&c);
        assert_int_equal(config_load_file(tmpdir, &c, &gerr), -EISDIR);
        assert_int_equal(gerr.code, -EISDIR); /* the code returned, with the message */
        snprintf(msg, sizeof msg, "%s: not a regular file", tmpdir);
        assert_string_equal(err, msg);
}

static int load_in_child(void *path) {
        struct gpuslice_config c;
        config_init_defaults(&c);
        return config_load_file(path, &c, NULL);
}

static void test_load_unreadable_file(void **state) {
        (void)state;
        char dir[300], path[400];
        snprintf(dir, sizeof dir, "%s/unreadable", tmpdir);
        assert_int_equal(mkdir(dir, 0755), 0);
        assert_int_equal(chmod(tmpdir, 0755), 0); /* let an unprivileged child reach dir */
        snprintf(path, sizeof path, "%s/secret.conf", dir);
        write_text(path, "[agent]\n");
        assert_int_equal(chmod(path, 0), 0);
        assert_int_equal(test_without_root(load_in_child, path), -EACCES);
        assert_int_equal(chmod(path, 0644), 0);
        assert_int_equal(test_without_root(load_in_child, path), 0); /* the child can read it otherwise */
}

static void test_load_too_large_file(void **state) {
        (void)state;
        char path[300];
        snprintf(path, sizeof path, "%s/huge.conf", tmpdir);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, CONFIG_FILE_MAX + 1), 0);
        close(fd);
        struct gpuslice_config c;
        struct gs_error gerr = { 0 };
        config_init_defaults(&c);
        assert_int_equal(config_load_file(path, &c, &gerr), -EFBIG);
}

static void test_load_error_names_file_and_line(void **state) {
        (void)state;
        char path[300], msg[600];
        snprintf(path, sizeof path, "%s/bad.conf", tmpdir);
        write_text(path, "[health]\ndisabled = perhaps\n");
        struct gpuslice_config c;
        struct gs_error gerr = { 0 };
        char *err = gerr.message;
        config_init_defaults(&c);
        assert_int_equal(config_load_file(path, &c, &gerr), -EINVAL);
        snprintf(msg, sizeof msg, "%s: line 2: health.disabled: expected true or false, got 'perhaps'", path);
        assert_string_equal(err, msg);
}

/* ---- dump ---- */

static void test_dump_round_trips_defaults(void **state) {
        (void)state;
        struct gpuslice_config c, d;
        struct gs_error gerr = { 0 };
        config_init_defaults(&c);
        _cleanup_(freep) char *text = dump(&c);
        /* parse onto a config that differs everywhere, to prove the dump sets every key */
        config_init_defaults(&d);
        assert_int_equal(parse(full_example, &d, &gerr), 0);
        assert_false(same_config(&c, &d));
        assert_int_equal(parse(text, &d, &gerr), 0);
        assert_true(same_config(&c, &d));
}

static void test_dump_round_trips_tricky_values(void **state) {
        (void)state;
        struct gpuslice_config c, d;
        struct gs_error gerr = { 0 };
        config_init_defaults(&c);
        assert_int_equal(parse(full_example, &c, &gerr), 0);
        assert_int_equal(config_set(&c, "agent.state-dir", "/a dir/with #hash; \"quotes\" \\ ", &gerr), 0);
        assert_int_equal(config_set(&c, "kubelet.plugin-dir", "/ leading", &gerr), 0);
        assert_int_equal(config_set(&c, "health.quiet-period", "1h30m", &gerr), 0);
        assert_int_equal(config_set(&c, "health.xid-ignore", "", &gerr), 0);
        assert_int_equal(config_set(&c, "sharing.memory-unit", "1536MiB", &gerr), 0);
        _cleanup_(freep) char *text = dump(&c);
        config_init_defaults(&d);
        assert_int_equal(parse(text, &d, &gerr), 0);
        assert_string_equal(d.state_dir, "/a dir/with #hash; \"quotes\" \\ ");
        assert_string_equal(d.plugin_dir, "/ leading");
        assert_int_equal(d.health_quiet_period_sec, 5400);
        assert_int_equal(d.n_xid_ignore, 0);
        assert_int_equal(d.memory_unit_bytes, 1536ULL << 20);
        assert_true(same_config(&c, &d));
}

static void test_dump_format(void **state) {
        (void)state;
        struct gpuslice_config c;
        config_init_defaults(&c);
        _cleanup_(freep) char *text = dump(&c);
        assert_non_null(strstr(text, "\n[health]\ndisabled = false\nxid-ignore = 13, 31, 43, 45, 68, 109\n"
                                     "quiet-period = 1m\n"));
        assert_non_null(strstr(text, "\n[monitor]\n"));
        assert_non_null(strstr(text, "list-strategy = envvar\n"));
        assert_non_null(strstr(text, "whole-gpu-name = \"\"\n"));
}

/* ---- option table and docs ---- */

static void test_option_table_consistent(void **state) {
        (void)state;
        size_t n;
        const struct config_option *o = config_options(&n);
        struct gpuslice_config c;
        config_init_defaults(&c);
        assert_true(n > 20);
        for (size_t i = 0; i < n; i++) {
                assert_ptr_equal(config_option_by_key(o[i].key), &o[i]);
                assert_ptr_equal(config_option_by_flag(o[i].flag), &o[i]);
                char flag[100];
                snprintf(flag, sizeof flag, "--%s", o[i].flag);
                assert_ptr_equal(config_option_by_flag(flag), &o[i]);
                assert_non_null(o[i].help);
        }
        assert_null(config_option_by_key("nope"));
        assert_null(config_option_by_flag("--nope"));
}

/* The next `...` span in [p, end) copied to out (truncated to n); the position after it, or NULL. */
static const char *doc_span(const char *p, const char *end, char *out, size_t n) {
        const char *a = memchr(p, '`', (size_t)(end - p));
        if (!a)
                return NULL;
        const char *b = memchr(a + 1, '`', (size_t)(end - a - 1));
        if (!b)
                return NULL;
        size_t len = MIN((size_t)(b - a - 1), n - 1);
        memcpy(out, a + 1, len);
        out[len] = 0;
        return b + 1;
}

/* Parse "[section]\nname = value" onto the defaults; is the result the defaults? */
static bool default_is(const char *key, const char *value) {
        char text[512];
        const char *dot = strchr(key, '.');
        assert_non_null(dot);
        snprintf(text, sizeof text, "[%.*s]\n%s = %s\n", (int)(dot - key), key, dot + 1, value);
        struct gpuslice_config d, c;
        struct gs_error gerr = { 0 };
        config_init_defaults(&d);
        config_init_defaults(&c);
        if (config_parse_text(text, strlen(text), &c, &gerr) < 0)
                fail_msg("docs/configuration.md: default '%s' of %s does not parse: %s", value, key, gerr.message);
        return same_config(&c, &d);
}

/* Every row `| \`section.key\` | \`--flag\` | \`default\` | …` of docs/configuration.md names an option
 * that exists, with its flag and its real default; every option has exactly one row. */
static void test_docs_name_every_option(void **state) {
        (void)state;
        _cleanup_(freep) char *doc = NULL;
        assert_int_equal(read_file(GPUSLICE_SOURCE_DIR "/docs/configuration.md", 1 << 20, &doc, NULL), 0);
        size_t n;
        const struct config_option *o = config_options(&n);
        unsigned rows[128] = { 0 };
        assert_true(n <= ELEMENTSOF(rows));
        for (const char *line = doc; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                const char *eol = strchrnul(line, '\n');
                char key[128], flag[128], def[256];
                if (!startswith(line, "| `"))
                        continue;
                const char *p = doc_span(line, eol, key, sizeof key);
                if (!p || !strchr(key, '.') || !startswith(p, " | `--"))
                        continue; /* another table */
                p = doc_span(p, eol, flag, sizeof flag);
                const char *cell = p ? strstr(p, " | ") : NULL;
                if (!cell || !doc_span(cell, eol, def, sizeof def))
                        fail_msg("docs/configuration.md: the row of %s has no `default` cell", key);
                const struct config_option *opt = config_option_by_key(key);
                if (!opt)
                        fail_msg("docs/configuration.md documents %s, which is not a config key", key);
                if (!streq(flag + 2, opt->flag))
                        fail_msg("docs/configuration.md: %s has flag %s, the code --%s", key, flag, opt->flag);
                if (!default_is(key, def))
                        fail_msg("docs/configuration.md: %s default `%s` is not the code's default", key, def);
                rows[opt - o]++;
        }
        for (size_t i = 0; i < n; i++)
                if (rows[i] != 1)
                        fail_msg("docs/configuration.md has %u table rows for %s / --%s (want 1)", rows[i], o[i].key,
                                 o[i].flag);
}

/* The example in the docs, "every key with its default value", is exactly that. */
static void test_docs_example_parses(void **state) {
        (void)state;
        _cleanup_(freep) char *doc = NULL;
        assert_int_equal(read_file(GPUSLICE_SOURCE_DIR "/docs/configuration.md", 1 << 20, &doc, NULL), 0);
        const char *start = strstr(doc, "```ini\n");
        assert_non_null(start);
        start += 7;
        const char *end = strstr(start, "```");
        assert_non_null(end);
        struct gpuslice_config c, d;
        struct gs_error gerr = { 0 };
        char *err = gerr.message;
        config_init_defaults(&c);
        config_init_defaults(&d);
        int r = config_parse_text(start, (size_t)(end - start), &c, &gerr);
        if (r < 0)
                fail_msg("docs example: %s", err);
        if (!same_config(&c, &d))
                fail_msg("docs/configuration.md: the example of every default sets something else than the defaults");
        _cleanup_(freep) char *example = strndup(start, (size_t)(end - start));
        assert_non_null(example);
        size_t n;
        const struct config_option *o = config_options(&n);
        for (size_t i = 0; i < n; i++) {
                const char *dot = strchr(o[i].key, '.');
                char sec[64], kv[96];
                snprintf(sec, sizeof sec, "[%.*s]\n", (int)(dot - o[i].key), o[i].key);
                snprintf(kv, sizeof kv, "\n%s = ", dot + 1);
                const char *s = strstr(example, sec);
                const char *next = s ? strstr(s + 1, "\n[") : NULL;
                const char *k = s ? strstr(s, kv) : NULL;
                if (!k || (next && k > next))
                        fail_msg("docs/configuration.md: the example of every default lacks %s", o[i].key);
        }
}

/* ---- command line ---- */

static void test_args_forms(void **state) {
        (void)state;
        char *argv[] = { "gpuslice",
                         "node",
                         "--plugin-dir",
                         "/p",
                         "--state-dir=/s",
                         "--health-disabled",
                         "--health-quiet-period",
                         "5m",
                         "-c",
                         "/etc/x.conf",
                         "--device-list-strategy=both" };
        struct config_args a;
        struct gs_error gerr = { 0 };
        assert_int_equal(config_args_parse(ELEMENTSOF(argv), argv, 2, &a, &gerr), 0);
        assert_string_equal(a.config_path, "/etc/x.conf");
        assert_true(a.config_path_given);
        assert_false(a.help);
        assert_int_equal(a.n_overrides, 5);
        assert_string_equal(a.overrides[0].key, "kubelet.plugin-dir");
        assert_string_equal(a.overrides[0].value, "/p");
        assert_string_equal(a.overrides[1].key, "agent.state-dir");
        assert_string_equal(a.overrides[2].key, "health.disabled");
        assert_string_equal(a.overrides[2].value, "true");
        assert_string_equal(a.overrides[3].value, "5m");
        config_args_done(&a);
        config_args_done(NULL);
}

static void test_args_help_and_version(void **state) {
        (void)state;
        char *argv[] = { "x", "--help", "--version" };
        struct config_args a;
        assert_int_equal(config_args_parse(ELEMENTSOF(argv), argv, 1, &a, NULL), 0);
        assert_true(a.help);
        assert_true(a.version);
        assert_null(a.config_path);
        config_args_done(&a);
}

static void expect_args_error(int argc, char **argv, const char *msg) {
        struct config_args a = { .help = true };
        struct gs_error gerr = { 0 };
        char *err = gerr.message;
        assert_int_equal(config_args_parse(argc, argv, 1, &a, &gerr), -EINVAL);
        assert_string_equal(err, msg);
        assert_true(a.help); /* untouched */
}

static void test_args_errors(void **state) {
        (void)state;
        char *a1[] = { "x", "--plugin-dri", "/p" };
        expect_args_error(ELEMENTSOF(a1), a1, "unknown option '--plugin-dri' (did you mean '--plugin-dir'?)");
        char *a8[] = { "x", "--frobnicate" };
        expect_args_error(ELEMENTSOF(a8), a8, "unknown option '--frobnicate'");
        char *a2[] = { "x", "--plugin-dir" };
        expect_args_error(ELEMENTSOF(a2), a2, "--plugin-dir: needs a value");
        char *a3[] = { "x", "stray" };
        expect_args_error(ELEMENTSOF(a3), a3, "unexpected argument 'stray'");
        char *a4[] = { "x", "--health-quiet-period", "soon" };
        expect_args_error(ELEMENTSOF(a4), a4, "--health-quiet-period: expected a duration like 30s or 2m, got 'soon'");
        char *a5[] = { "x", "--health-disabled", "false" };
        expect_args_error(ELEMENTSOF(a5), a5, "unexpected argument 'false'");
        char *a6[] = { "x", "--config=" };
        expect_args_error(ELEMENTSOF(a6), a6, "--config: needs a file name");
        char *a7[] = { "x", "-x" };
        expect_args_error(ELEMENTSOF(a7), a7, "unexpected argument '-x'");
}

static void test_flags_override_file(void **state) {
        (void)state;
        char path[300];
        snprintf(path, sizeof path, "%s/prec.conf", tmpdir);
        write_text(path, "[agent]\nstate-dir = /from-file\nlog-level = debug\n[kubelet]\nplugin-dir = /file-dp\n");
        char cfgflag[320];
        snprintf(cfgflag, sizeof cfgflag, "--config=%s", path);
        char *argv[] = { "x", "--state-dir", "/from-flag", cfgflag, "--state-dir", "/last-flag" };
        struct config_args a;
        struct gs_error gerr = { 0 };
        assert_int_equal(config_args_parse(ELEMENTSOF(argv), argv, 1, &a, &gerr), 0);
        struct gpuslice_config c;
        assert_int_equal(config_build(&a, NULL, &c, &gerr), 0);
        assert_string_equal(c.state_dir, "/last-flag"); /* flag beats file; last flag wins */
        assert_string_equal(c.plugin_dir, "/file-dp");  /* file beats default */
        assert_int_equal(c.log_level, CONFIG_LOG_DEBUG);
        assert_string_equal(c.proc_root, "/proc"); /* default */
        /* a reload with a changed file keeps the flags on top */
        write_text(path, "[agent]\nstate-dir = /changed\nlog-level = warn\n");
        assert_int_equal(config_build(&a, NULL, &c, &gerr), 0);
        assert_string_equal(c.state_dir, "/last-flag");
        assert_int_equal(c.log_level, CONFIG_LOG_WARN);
        assert_string_equal(c.plugin_dir, "/var/lib/kubelet/device-plugins");
        config_args_done(&a);
}

static void test_build_failed_reload_keeps_old(void **state) {
        (void)state;
        char path[300];
        snprintf(path, sizeof path, "%s/reload.conf", tmpdir);
        write_text(path, "[agent]\nlog-level = debug\n");
        struct config_args a = { 0 };
        a.config_path = strdup(path);
        assert_non_null(a.config_path);
        struct gpuslice_config live, before;
        struct gs_error gerr = { 0 };
        assert_int_equal(config_build(&a, NULL, &live, &gerr), 0);
        before = live;
        write_text(path, "[agent]\nlog-level = debug\nstate-dir = oops\n");
        assert_int_equal(config_build(&a, NULL, &live, &gerr), -EINVAL);
        assert_memory_equal(&live, &before, sizeof live);
        config_args_done(&a);
}

static void test_build_missing_given_file_fails(void **state) {
        (void)state;
        struct config_args a = { 0 };
        a.config_path = strdup("/nonexistent/gpuslice.conf");
        assert_non_null(a.config_path);
        struct gpuslice_config c;
        struct gs_error gerr = { 0 };
        assert_int_equal(config_build(&a, NULL, &c, &gerr), -ENOENT);
        config_args_done(&a);
}

static void test_build_missing_default_file_is_fine(void **state) {
        (void)state;
        struct gpuslice_config c, d;
        struct gs_error gerr = { 0 };
        assert_int_equal(config_build(NULL, "/nonexistent/gpuslice.conf", &c, &gerr), 0);
        config_init_defaults(&d);
        assert_true(same_config(&c, &d));
}

static void test_build_uses_default_file(void **state) {
        (void)state;
        char path[300];
        snprintf(path, sizeof path, "%s/default.conf", tmpdir);
        write_text(path, "[agent]\nlog-level = error\n");
        struct gpuslice_config c;
        struct gs_error gerr = { 0 };
        assert_int_equal(config_build(NULL, path, &c, &gerr), 0);
        assert_int_equal(c.log_level, CONFIG_LOG_ERROR);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults_documented_values),
                cmocka_unit_test(test_full_file_sets_every_key),
                cmocka_unit_test(test_mig_strategy),
                cmocka_unit_test(test_dra_driver_name),
                cmocka_unit_test(test_empty_text_keeps_defaults),
                cmocka_unit_test(test_comments_crlf_bom_and_blanks),
                cmocka_unit_test(test_quoted_values_keep_specials),
                cmocka_unit_test(test_hash_inside_unquoted_value_is_kept),
                cmocka_unit_test(test_comment_right_after_equals_gives_empty_value),
                cmocka_unit_test(test_empty_list_and_empty_address),
                cmocka_unit_test(test_node_name),
                cmocka_unit_test(test_durations),
                cmocka_unit_test(test_sample_interval_bounds),
                cmocka_unit_test(test_list_strategy_both_and_empty),
                cmocka_unit_test(test_profiles),
                cmocka_unit_test(test_error_bad_duration_message),
                cmocka_unit_test(test_error_unknown_key),
                cmocka_unit_test(test_error_key_in_wrong_section),
                cmocka_unit_test(test_error_unknown_section),
                cmocka_unit_test(test_error_unknown_section_far_from_any),
                cmocka_unit_test(test_error_duplicate_section),
                cmocka_unit_test(test_error_duplicate_key),
                cmocka_unit_test(test_error_key_outside_section),
                cmocka_unit_test(test_error_missing_equals),
                cmocka_unit_test(test_error_bad_key_name),
                cmocka_unit_test(test_error_unclosed_section),
                cmocka_unit_test(test_error_text_after_section),
                cmocka_unit_test(test_error_unterminated_quote),
                cmocka_unit_test(test_error_bad_escape),
                cmocka_unit_test(test_error_text_after_quote),
                cmocka_unit_test(test_error_overlong_line),
                cmocka_unit_test(test_longest_line_accepted),
                cmocka_unit_test(test_error_path_too_long),
                cmocka_unit_test(test_error_embedded_nul),
                cmocka_unit_test(test_error_control_character),
                cmocka_unit_test(test_error_bad_values_per_type),
                cmocka_unit_test(test_error_too_many_xids),
                cmocka_unit_test(test_error_message_escapes_value),
                cmocka_unit_test(test_failed_parse_leaves_config_unchanged),
                cmocka_unit_test(test_parse_applies_on_top_of_given_config),
                cmocka_unit_test(test_set_unknown_key),
                cmocka_unit_test(test_load_file),
                cmocka_unit_test(test_load_missing_file),
                cmocka_unit_test(test_load_directory),
                cmocka_unit_test(test_load_unreadable_file),
                cmocka_unit_test(test_load_too_large_file),
                cmocka_unit_test(test_load_error_names_file_and_line),
                cmocka_unit_test(test_dump_round_trips_defaults),
                cmocka_unit_test(test_dump_round_trips_tricky_values),
                cmocka_unit_test(test_dump_format),
                cmocka_unit_test(test_option_table_consistent),
                cmocka_unit_test(test_docs_name_every_option),
                cmocka_unit_test(test_docs_example_parses),
                cmocka_unit_test(test_args_forms),
                cmocka_unit_test(test_args_help_and_version),
                cmocka_unit_test(test_args_errors),
                cmocka_unit_test(test_flags_override_file),
                cmocka_unit_test(test_build_failed_reload_keeps_old),
                cmocka_unit_test(test_build_missing_given_file_fails),
                cmocka_unit_test(test_build_missing_default_file_is_fine),
                cmocka_unit_test(test_build_uses_default_file),
        };
        return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
