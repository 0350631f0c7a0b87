/* SPDX-License-Identifier: Apache-2.0 */
/* test-cdi — the ld.so.cache reader on caches built in memory (new format, old+new, and every kind
 * of damage), capability names, CDI kinds and file names, the cdiVersion choice, the YAML writer, the
 * specs naming the host's paths when gpuslice reads the host's trees elsewhere,
 * the OCI state / config.json readers on good and malformed input, and the OCI hook's library
 * (src/cdi/hook.c) failing closed: unreadable inputs, unknown stages, every refusal of the legacy
 * checks (GPU list, capabilities, requirements, node, driver files, device nodes), and the injection
 * refusing a missing root or namespace and staying inside the root whatever its symlinks say. The hook
 * runs for real (device nodes, bind mounts, ldconfig, Podman) in tests/integration/test-cdi.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/share.h"
#include "cdi/cdi.h"
#include "helpers.h"
#include "topo/topo.h"
#include "util/util.h"

/* ---- ld cache built by hand ---- */

struct cache {
        unsigned char buf[4096];
        size_t len;
};

static void put32(unsigned char *p, uint32_t v) {
        memcpy(p, &v, 4);
}

/* new-format cache with n entries (soname[i], path[i]), flags 0x0303; old_entries > 0 prefixes an
 * old-format table of that many entries */
static void build(struct cache *c, unsigned n, const char *const *sonames, const char *const *paths,
                  unsigned old_entries) {
        memset(c, 0, sizeof *c);
        size_t start = 0;
        if (old_entries) {
                memcpy(c->buf, "ld.so-1.7.0", 11);
                put32(c->buf + 12, old_entries);
                start = (16 + old_entries * 12 + 7) & ~(size_t)7;
        }
        unsigned char *h = c->buf + start;
        memcpy(h, "glibc-ld.so.cache1.1", 20);
        put32(h + 20, n);
        size_t strings = 48 + (size_t)n * 24, o = strings;
        for (unsigned i = 0; i < n; i++) {
                unsigned char *e = h + 48 + (size_t)i * 24;
                put32(e, 0x0303);
                put32(e + 4, (uint32_t)o);
                memcpy(h + o, sonames[i], strlen(sonames[i]) + 1);
                o += strlen(sonames[i]) + 1;
                put32(e + 8, (uint32_t)o);
                memcpy(h + o, paths[i], strlen(paths[i]) + 1);
                o += strlen(paths[i]) + 1;
        }
        put32(h + 24, (uint32_t)(o - strings));
        c->len = start + o;
}

struct seen {
        unsigned n;
        char names[8][64];
        int stop_after;
};

static int collect(const struct gs_ldcache_entry *e, void *userdata) {
        struct seen *s = userdata;
        if (s->n < 8)
                strscpy(s->names[s->n], e->soname, sizeof s->names[0]);
        s->n++;
        assert_true(gs_ldcache_native(e->flags));
        return s->stop_after && (int)s->n == s->stop_after ? -ECANCELED : 0;
}

static const char *const sonames[] = { "libcuda.so.1", "libnvidia-ml.so.1" };
static const char *const paths[] = { "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                                     "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1" };

static void test_ldcache_new_and_old(void **state) {
        (void)state;
        struct cache c;
        struct seen s = { 0 };
        build(&c, 2, sonames, paths, 0);
        assert_int_equal(gs_ldcache_parse(c.buf, c.len, collect, &s), 0);
        assert_int_equal(s.n, 2);
        assert_string_equal(s.names[1], "libnvidia-ml.so.1");
        memset(&s, 0, sizeof s);
        build(&c, 2, sonames, paths, 3); /* glibc < 2.32 layout: the old table first */
        assert_int_equal(gs_ldcache_parse(c.buf, c.len, collect, &s), 0);
        assert_int_equal(s.n, 2);
        memset(&s, 0, sizeof s);
        s.stop_after = 1; /* the callback's error stops the walk and comes back */
        assert_int_equal(gs_ldcache_parse(c.buf, c.len, collect, &s), -ECANCELED);
        assert_int_equal(s.n, 1);
        build(&c, 0, NULL, NULL, 0);
        assert_int_equal(gs_ldcache_parse(c.buf, c.len, collect, &s), 0);
}

static void test_ldcache_malformed(void **state) {
        (void)state;
        struct cache c;
        struct seen s = { 0 };
        build(&c, 2, sonames, paths, 0);
        /* every truncation short of the whole cache is refused (the strings end the file) */
        for (size_t l = 0; l < c.len; l++)
                if (gs_ldcache_parse(c.buf, l, collect, &s) != -EBADMSG)
                        fail_msg("truncated to %zu bytes: accepted", l);
        struct cache bad = c;
        put32(bad.buf + 20, 1000000); /* nlibs past the end */
        assert_int_equal(gs_ldcache_parse(bad.buf, bad.len, collect, &s), -EBADMSG);
        bad = c;
        put32(bad.buf + 20, UINT32_MAX);
        assert_int_equal(gs_ldcache_parse(bad.buf, bad.len, collect, &s), -EBADMSG);
        bad = c;
        put32(bad.buf + 48 + 4, (uint32_t)bad.len + 10); /* key offset past the end */
        assert_int_equal(gs_ldcache_parse(bad.buf, bad.len, collect, &s), -EBADMSG);
        bad = c;
        bad.buf[bad.len - 1] = 'x'; /* last string not terminated */
        assert_int_equal(gs_ldcache_parse(bad.buf, bad.len, collect, &s), -EBADMSG);
        bad = c;
        memcpy(bad.buf, "glibc-ld.so.cache1.0", 20);
        assert_int_equal(gs_ldcache_parse(bad.buf, bad.len, collect, &s), -EBADMSG);
        build(&bad, 2, sonames, paths, 3);
        put32(bad.buf + 12, 400000000); /* old table count past the end */
        assert_int_equal(gs_ldcache_parse(bad.buf, bad.len, collect, &s), -EBADMSG);
        assert_int_equal(gs_ldcache_parse(NULL, 0, collect, &s), -EBADMSG);
        assert_false(gs_ldcache_native(0x0003 | 0x0800)); /* another architecture */
        assert_false(gs_ldcache_native(0x0001));          /* libc5 */
}

static void test_caps(void **state) {
        (void)state;
        unsigned c = 99;
        const char *bad = NULL;
        assert_int_equal(cdi_caps_parse("compute,utility", &c, &bad), 0);
        assert_int_equal(c, CDI_CAP_COMPUTE | CDI_CAP_UTILITY);
        assert_int_equal(cdi_caps_parse("all", &c, &bad), 0);
        assert_int_equal(c, CDI_CAP_ALL);
        assert_int_equal(cdi_caps_parse("", &c, &bad), 0);
        assert_int_equal(c, 0);
        assert_int_equal(cdi_caps_parse("video,display,compat32", &c, &bad), 0);
        assert_int_equal(c, CDI_CAP_VIDEO | CDI_CAP_GRAPHICS);
        assert_int_equal(cdi_caps_parse("compute,sound", &c, &bad), -EINVAL);
        assert_string_equal(bad, "sound");
        assert_int_equal(cdi_caps_parse("computer", &c, &bad), -EINVAL);
}

static void test_kinds(void **state) {
        (void)state;
        char buf[128];
        assert_true(cdi_kind_valid("nvidia.com/gpu"));
        assert_true(cdi_kind_valid("gpuslice.io/gpu-shared"));
        const char *bad[] = { "nvidia.com",  "/gpu",        "nvidia.com/",
                              "1vendor/gpu", "vendor/gp.u", "vendor/gpu/x",
                              "vendor-/gpu", "ven dor/gpu", "" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (cdi_kind_valid(bad[i]))
                        fail_msg("'%s' accepted", bad[i]);
        assert_int_equal(cdi_spec_file_name("nvidia.com/gpu", "yaml", buf, sizeof buf), 0);
        assert_string_equal(buf, "nvidia.com-gpu.yaml");
        assert_int_equal(cdi_spec_file_name("nope", "yaml", buf, sizeof buf), -EINVAL);
        assert_int_equal(cdi_spec_file_name("nvidia.com/gpu", "yaml", buf, 8), -ENAMETOOLONG);
}

static void test_min_version(void **state) {
        (void)state;
        json_t *s = json_pack("{s:[{s:s, s:{}}], s:{}}", "devices", "name", "gpu0", "containerEdits", "containerEdits");
        assert_string_equal(cdi_spec_min_version(s), "0.3.0");
        json_object_set_new(json_object_get(s, "containerEdits"), "mounts",
                            json_pack("[{s:s, s:s, s:s}]", "hostPath", "/a", "containerPath", "/a", "type", "bind"));
        assert_string_equal(cdi_spec_min_version(s), "0.4.0");
        json_object_set_new(json_array_get(json_object_get(s, "devices"), 0), "name", json_string("0"));
        assert_string_equal(cdi_spec_min_version(s), "0.5.0");
        json_object_set_new(s, "annotations", json_object());
        assert_string_equal(cdi_spec_min_version(s), "0.6.0");
        json_decref(s);
        s = json_pack("{s:[], s:{s:[{s:s, s:s}]}}", "devices", "containerEdits", "deviceNodes", "path", "/dev/x",
                      "hostPath", "/host/dev/x");
        assert_string_equal(cdi_spec_min_version(s), "0.5.0");
        json_decref(s);
}

static void test_yaml(void **state) {
        (void)state;
        json_t *v = json_pack("{s:s, s:[{s:s, s:{s:[s,s], s:I}}, s], s:[], s:{}, s:b, s:s}", "kind", "nvidia.com/gpu",
                              "devices", "name", "0", "edits", "env", "A=\"x\"", "B=\\\n", "major", (json_int_t)195,
                              "plain", "empty", "obj", "flag", 1, "odd key", "é");
        char *text = NULL;
        assert_int_equal(cdi_format_yaml(v, &text), 0);
        assert_string_equal(text, "kind: \"nvidia.com/gpu\"\n"
                                  "devices:\n"
                                  "  - name: \"0\"\n"
                                  "    edits:\n"
                                  "      env:\n"
                                  "        - \"A=\\\"x\\\"\"\n"
                                  "        - \"B=\\\\\\u000a\"\n"
                                  "      major: 195\n"
                                  "  - \"plain\"\n"
                                  "empty: []\n"
                                  "obj: {}\n"
                                  "flag: true\n"
                                  "\"odd key\": \"é\"\n");
        free(text);
        assert_int_equal(cdi_format_json(v, &text), 0);
        json_t *back = json_loads(text, 0, NULL);
        assert_true(json_equal(back, v));
        json_decref(back);
        free(text);
        json_decref(v);
}

static void test_share_path_agrees(void **state) {
        (void)state;
        /* the <id>-shared devices mount the interposer where the agent's Allocate points LD_PRELOAD */
        struct topo t;
        topo_init(&t);
        t.n_gpus = 1;
        t.gpu[0].index = 0;
        strscpy(t.gpu[0].uuid, "GPU-1", sizeof t.gpu[0].uuid);
        struct cdi_discovery d;
        memset(&d, 0, sizeof d);
        d.gpu[0] = (struct cdi_devnode){ "/dev/nvidia0", 195, 0, 'c' };
        struct cdi_spec_options o = { .kind = "gpuslice.io/gpu", .interposer = "/opt/lib.so" };
        json_t *spec = NULL;
        assert_int_equal(cdi_spec_build(&t, &d, NULL, &o, &spec), 0);
        char *text = NULL;
        assert_int_equal(cdi_format_json(spec, &text), 0);
        assert_non_null(strstr(text, "\"containerPath\": \"" SHARE_LIB_PATH "\""));
        assert_non_null(strstr(text, "\"name\": \"GPU-1-shared\""));
        assert_null(strstr(text, "hooks")); /* no library, no hook */
        free(text);
        json_decref(spec);
        o.kind = "bad kind";
        assert_int_equal(cdi_spec_build(&t, &d, NULL, &o, &spec), -EINVAL);
}

/* Every hostPath (device nodes, mounts) and hook path of a spec's edits: count those under want_dev (device nodes),
 * want_drv (mounts; the limiter's own paths excepted) and hooks equal to want_hook; any other is a failure. */
static void host_paths_in(const json_t *edits, const char *want_dev, const char *want_drv, const char *want_hook,
                          unsigned *ret_n) {
        size_t i;
        const json_t *v;
        json_array_foreach(json_object_get(edits, "deviceNodes"), i, v) {
                const char *h = json_string_value(json_object_get(v, "hostPath"));
                assert_non_null(h);
                if (!startswith(h, want_dev))
                        fail_msg("device node hostPath %s is not under the host's %s", h, want_dev);
                (*ret_n)++;
        }
        json_array_foreach(json_object_get(edits, "mounts"), i, v) {
                const char *h = json_string_value(json_object_get(v, "hostPath"));
                assert_non_null(h);
                if (startswith(h, "/opt/") || startswith(h, "/var/lib/gpuslice/")) /* interposer, limits: as given */
                        continue;
                if (!startswith(h, want_drv))
                        fail_msg("mount hostPath %s is not under the host's %s", h, want_drv);
                (*ret_n)++;
        }
        json_array_foreach(json_object_get(edits, "hooks"), i, v) {
                assert_string_equal(json_string_value(json_object_get(v, "path")), want_hook);
                (*ret_n)++;
        }
}

static unsigned host_paths(const json_t *spec, const char *want_dev, const char *want_drv, const char *want_hook) {
        unsigned n = 0;
        size_t i;
        const json_t *dev;
        host_paths_in(json_object_get(spec, "containerEdits"), want_dev, want_drv, want_hook, &n);
        json_array_foreach(json_object_get(spec, "devices"), i, dev) {
                host_paths_in(json_object_get(dev, "containerEdits"), want_dev, want_drv, want_hook, &n);
        }
        return n;
}

/* A node with one GPU (and a MIG device on it), a control node, a library with its soname link and a binary, as
 * discovery finds them under the agent's roots. */
static void host_view_node(struct topo *t, struct cdi_discovery *d, struct cdi_mig *m, struct cdi_file *f) {
        topo_init(t);
        t->n_gpus = 1;
        t->gpu[0].index = 0;
        strscpy(t->gpu[0].uuid, "GPU-1", sizeof t->gpu[0].uuid);
        memset(d, 0, sizeof *d);
        d->gpu[0] = (struct cdi_devnode){ "/dev/nvidia0", 195, 0, 'c' };
        d->control[0] = (struct cdi_devnode){ "/dev/nvidiactl", 195, 255, 'c' };
        d->n_control = 1;
        *m = (struct cdi_mig){ .gpu = 0, .index = 0, .uuid = "MIG-1" };
        m->gi = (struct cdi_devnode){ "/dev/nvidia-caps/nvidia-cap30", 238, 30, 'c' };
        m->ci = (struct cdi_devnode){ "/dev/nvidia-caps/nvidia-cap31", 238, 31, 'c' };
        d->mig = m;
        d->n_mig = 1;
        memset(f, 0, 2 * sizeof *f);
        f[0] = (struct cdi_file){ .kind = CDI_FILE_LIBRARY, .cap = CDI_CAP_COMPUTE };
        strscpy(f[0].path, "/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05", sizeof f[0].path);
        strscpy(f[0].source, f[0].path, sizeof f[0].source);
        strscpy(f[0].soname, "libcuda.so.1", sizeof f[0].soname);
        f[1] = (struct cdi_file){ .kind = CDI_FILE_BINARY, .cap = CDI_CAP_UTILITY };
        strscpy(f[1].path, "/usr/bin/nvidia-smi", sizeof f[1].path);
        strscpy(f[1].source, f[1].path, sizeof f[1].source);
        d->files = f;
        d->n_files = 2;
        strscpy(d->lib_dirs[0], "/usr/lib/x86_64-linux-gnu", sizeof d->lib_dirs[0]);
        d->n_lib_dirs = 1;
}

/* The agent in a container reads the host's trees under its own mounts; every spec it writes (the node's and a
 * claim's) names the host's paths: device nodes under the host dev root, driver files under the host driver root,
 * the hook binary at its host path. Without a host view, the agent's roots (it runs on the host). */
static void test_specs_name_host_paths(void **state) {
        (void)state;
        struct topo t;
        struct cdi_discovery d;
        struct cdi_mig m;
        struct cdi_file f[2];
        host_view_node(&t, &d, &m, f);
        struct cdi_roots roots = { .dev_root = "/host", .driver_root = "/driver-root" };
        struct cdi_spec_options o = { .kind = "gpuslice.io/gpu",
                                      .host_dev_root = "/",
                                      .host_driver_root = "/run/nvidia/driver",
                                      .hook_path = "/usr/local/lib/gpuslice/gpuslice",
                                      .interposer = "/opt/lib.so" };
        json_t *spec = NULL;
        assert_int_equal(cdi_spec_build(&t, &d, &roots, &o, &spec), 0);
        /* nvidia0 by index, UUID, all, 2 shared; the MIG device twice (3 nodes) and in all (2); ctl, 2 files, hook */
        assert_int_equal(host_paths(spec, "/dev/", "/run/nvidia/driver/", o.hook_path), 5 + 6 + 2 + 1 + 2 + 1);
        json_decref(spec);
        struct cdi_claim_device dev[2] = { { .name = "uid-gpu-0", .gpu = 0 }, { .name = "uid-mig-0", .mig = &m } };
        struct cdi_claim_limits lim = { .dir = "/var/lib/gpuslice/dra-containers/x", .interposer = "/opt/lib.so" };
        o.kind = "gpu.gpuslice.io/claim";
        assert_int_equal(cdi_claim_spec_build(&t, &d, &roots, &o, dev, 2, &lim, &spec), 0);
        assert_int_equal(host_paths(spec, "/dev/", "/run/nvidia/driver/", o.hook_path), 1 + 3 + 1 + 2 + 1);
        json_decref(spec);
        /* no host view ("" as the configuration's default): the agent's own roots; no hook path, no hook */
        o.host_dev_root = "";
        o.host_driver_root = NULL;
        o.hook_path = "";
        assert_int_equal(cdi_claim_spec_build(&t, &d, &roots, &o, dev, 1, NULL, &spec), 0);
        assert_int_equal(host_paths(spec, "/host/dev/", "/driver-root/", "-"), 1 + 1 + 2);
        assert_null(json_object_get(json_object_get(spec, "containerEdits"), "hooks"));
        json_decref(spec);
}

/* The edits' mount of CONTAINER (its hostPath), or NULL. */
static const char *mount_of(const json_t *edits, const char *container) {
        size_t i;
        const json_t *v;
        json_array_foreach(json_object_get(edits, "mounts"), i, v) {
                if (streq(json_string_value(json_object_get(v, "containerPath")), container))
                        return json_string_value(json_object_get(v, "hostPath"));
        }
        return NULL;
}

static const char *env_of(const json_t *edits, const char *key) {
        size_t i;
        const json_t *v;
        json_array_foreach(json_object_get(edits, "env"), i, v) {
                const char *e = json_string_value(v);
                if (startswith(e, key) && e[strlen(key)] == '=')
                        return e + strlen(key) + 1;
        }
        return NULL;
}

/* The shared devices and a shared claim bring the NVML stand-in next to the interposer and the discovery's real NVML
 * under the host's driver root, preloaded after the interposer; without the real NVML, neither (a stand-in that
 * cannot load). */
static void test_shared_mount_nvml_standin(void **state) {
        (void)state;
        struct topo t;
        struct cdi_discovery d;
        struct cdi_mig m;
        struct cdi_file f[3];
        host_view_node(&t, &d, &m, f);
        f[2] = (struct cdi_file){ .kind = CDI_FILE_LIBRARY, .cap = CDI_CAP_UTILITY };
        strscpy(f[2].path, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.104.05", sizeof f[2].path);
        strscpy(f[2].source, f[2].path, sizeof f[2].source);
        strscpy(f[2].soname, "libnvidia-ml.so.1", sizeof f[2].soname);
        d.n_files = 3;
        struct cdi_roots roots = { .dev_root = "/host", .driver_root = "/driver-root" };
        struct cdi_spec_options o = { .kind = "gpuslice.io/gpu",
                                      .host_driver_root = "/run/nvidia/driver",
                                      .interposer = "/opt/libgpuslice-cuda.so",
                                      .nvml_standin = "/opt/libgpuslice-nvml.so" };
        const char *real = "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.104.05";
        const char *preload = LIMITS_DIR_CONTAINER_LIB " " LIMITS_DIR_CONTAINER_NVML;
        char buf[CDI_PATH_MAX];
        assert_int_equal(cdi_real_nvml(&d, &roots, &o, buf, sizeof buf), 0);
        assert_string_equal(buf, real);
        json_t *spec = NULL;
        assert_int_equal(cdi_spec_build(&t, &d, &roots, &o, &spec), 0);
        size_t i;
        const json_t *dev;
        unsigned shared = 0;
        json_array_foreach(json_object_get(spec, "devices"), i, dev) {
                const json_t *e = json_object_get(dev, "containerEdits");
                if (!strstr(json_string_value(json_object_get(dev, "name")), "-shared")) {
                        assert_null(mount_of(e, LIMITS_DIR_CONTAINER_NVML));
                        continue;
                }
                shared++;
                assert_string_equal(mount_of(e, LIMITS_DIR_CONTAINER_LIB), o.interposer);
                assert_string_equal(mount_of(e, LIMITS_DIR_CONTAINER_NVML), o.nvml_standin);
                assert_string_equal(mount_of(e, LIMITS_DIR_CONTAINER_REAL_NVML), real);
                assert_string_equal(env_of(e, "LD_PRELOAD"), preload);
        }
        assert_int_equal(shared, 2);
        json_decref(spec);
        struct cdi_claim_device cd = { .name = "uid-gpu-0", .gpu = 0 };
        struct cdi_claim_limits lim = { .dir = "/var/lib/gpuslice/dra-containers/x",
                                        .interposer = o.interposer,
                                        .nvml_standin = o.nvml_standin };
        o.kind = "gpu.gpuslice.io/claim";
        assert_int_equal(cdi_claim_spec_build(&t, &d, &roots, &o, &cd, 1, &lim, &spec), 0);
        const json_t *common = json_object_get(spec, "containerEdits");
        assert_string_equal(mount_of(common, LIMITS_DIR_CONTAINER_NVML), o.nvml_standin);
        assert_string_equal(mount_of(common, LIMITS_DIR_CONTAINER_REAL_NVML), real);
        assert_string_equal(env_of(common, "LD_PRELOAD"), preload);
        json_decref(spec);
        /* the driver's NVML not found: the interposer alone */
        d.n_files = 2;
        assert_int_equal(cdi_real_nvml(&d, &roots, &o, buf, sizeof buf), -ENOENT);
        assert_int_equal(cdi_claim_spec_build(&t, &d, &roots, &o, &cd, 1, &lim, &spec), 0);
        common = json_object_get(spec, "containerEdits");
        assert_null(mount_of(common, LIMITS_DIR_CONTAINER_NVML));
        assert_null(mount_of(common, LIMITS_DIR_CONTAINER_REAL_NVML));
        assert_string_equal(env_of(common, "LD_PRELOAD"), LIMITS_DIR_CONTAINER_LIB);
        json_decref(spec);
}

static void test_oci_state(void **state) {
        (void)state;
        struct cdi_oci o = { 0 };
        struct gs_error gerr = { 0 };
        char *err = gerr.message;
        const char *good =
                "{\"ociVersion\":\"1.0.2\",\"id\":\"c1\",\"status\":\"creating\",\"pid\":42,\"bundle\":\"/b\"}";
        assert_int_equal(cdi_oci_parse_state(good, strlen(good), &o, &gerr), 0);
        assert_int_equal(o.pid, 42);
        assert_string_equal(o.bundle, "/b");
        const char *bad[] = {
                "",
                "[]",
                "{",
                "null",
                "{\"bundle\":\"relative\"}",
                "{\"bundle\":7}",
                "{\"pid\":1}",
                "{\"bundle\":\"/b\",\"pid\":-1}",
                "{\"bundle\":\"/b\",\"pid\":\"1\"}",
                "{\"bundle\":\"/b\",\"pid\":99999999999}",
                "{\"bundle\":\"/b\",\"bundle\":\"/c\"}",
                "{\"bundle\":\"/b\\u0000x\"}",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                err[0] = '\0';
                if (cdi_oci_parse_state(bad[i], strlen(bad[i]), &o, &gerr) != -EINVAL)
                        fail_msg("state '%s' accepted", bad[i]);
                assert_true(startswith(err, "OCI state: "));
                assert_int_equal(gerr.code, -EINVAL); /* the code returned travels with the message */
        }
}

static void test_oci_config(void **state) {
        (void)state;
        struct cdi_oci o = { 0 };
        struct gs_error gerr = { 0 };
        char *err = gerr.message;
        strscpy(o.bundle, "/run/b", sizeof o.bundle);
        const char *good =
                "{\"root\":{\"path\":\"rootfs\"},\"process\":{\"env\":[\"A=1\",\"NVIDIA_VISIBLE_DEVICES=all\"]}}";
        assert_int_equal(cdi_oci_parse_config(good, strlen(good), &o, &gerr), 0);
        assert_string_equal(o.rootfs, "/run/b/rootfs");
        assert_int_equal(o.n_env, 2);
        assert_string_equal(o.env[1], "NVIDIA_VISIBLE_DEVICES=all");
        assert_null(o.env[2]);
        const char *abs = "{\"root\":{\"path\":\"/var/lib/x/merged\"}}";
        assert_int_equal(cdi_oci_parse_config(abs, strlen(abs), &o, &gerr), 0);
        assert_string_equal(o.rootfs, "/var/lib/x/merged");
        assert_int_equal(o.n_env, 0);
        const char *bad[] = {
                "{}",
                "{\"root\":{}}",
                "{\"root\":{\"path\":\"\"}}",
                "{\"root\":{\"path\":1}}",
                "{\"root\":{\"path\":\"r\"},\"process\":7}",
                "{\"root\":{\"path\":\"r\"},\"process\":{\"env\":\"A=1\"}}",
                "{\"root\":{\"path\":\"r\"},\"process\":{\"env\":[\"A=1\",null]}}",
                "not json",
                "{\"root\":{\"path\":\"r\"}} x",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                err[0] = '\0';
                if (cdi_oci_parse_config(bad[i], strlen(bad[i]), &o, &gerr) != -EINVAL)
                        fail_msg("config '%s' accepted", bad[i]);
                assert_true(err[0] != '\0');
        }
        /* a root path too long for the buffer is refused, not cut */
        char *big = malloc(2 * CDI_PATH_MAX + 64);
        assert_non_null(big);
        int w = snprintf(big, 2 * CDI_PATH_MAX + 64, "{\"root\":{\"path\":\"%0*d\"}}", CDI_PATH_MAX, 0);
        assert_int_equal(cdi_oci_parse_config(big, (size_t)w, &o, &gerr), -EINVAL);
        free(big);
        cdi_oci_done(&o);
        cdi_oci_done(&o); /* twice is fine */
}

/* ---- the OCI hook (hook.c) ---- */

/* A bundle (config.json with ENV, rootfs/), a driver root (an ld cache naming libcuda.so.1 →
 * libcuda.so.535.104.05) and a dev root (nvidiactl and nvidia0: links to /dev/null, character devices
 * stat() follows) under one temporary directory. */
struct hook_fx {
        char *dir;
        char state[CDI_PATH_MAX + 64];
        struct cdi_oci oci;
        int node_calls;
        bool node_fails;
        bool gpu_lost;
};

static const char *fx_path(struct hook_fx *f, const char *rel) {
        return test_path(f->dir, rel);
}

static void fx_config(struct hook_fx *f, const char *env_json) {
        char cfg[1024];
        int n = snprintf(cfg, sizeof cfg, "{\"root\":{\"path\":\"rootfs\"},\"process\":{\"env\":%s}}", env_json);
        test_write_file(fx_path(f, "bundle/config.json"), cfg, (size_t)n, 0644);
}

static void fx_init(struct hook_fx *f) {
        memset(f, 0, sizeof *f);
        f->dir = test_tmpdir_new("hook");
        static const char *const dirs[] = { "bundle",
                                            "bundle/rootfs",
                                            "drv",
                                            "drv/etc",
                                            "drv/usr",
                                            "drv/usr/lib",
                                            "drv/usr/lib/x86_64-linux-gnu",
                                            "dev",
                                            "dev/dev",
                                            "outside" };
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
                assert_int_equal(mkdir(fx_path(f, dirs[i]), 0755), 0);
        const char *so[] = { "libcuda.so.1" };
        const char *pa[] = { "/usr/lib/x86_64-linux-gnu/libcuda.so.1" };
        struct cache c;
        build(&c, 1, so, pa, 0);
        test_write_file(fx_path(f, "drv/etc/ld.so.cache"), (const char *)c.buf, c.len, 0644);
        test_write_file(fx_path(f, "drv/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05"), "elf", 3, 0755);
        assert_int_equal(symlink("libcuda.so.535.104.05", fx_path(f, "drv/usr/lib/x86_64-linux-gnu/libcuda.so.1")), 0);
        assert_int_equal(symlink("/dev/null", fx_path(f, "dev/dev/nvidiactl")), 0);
        assert_int_equal(symlink("/dev/null", fx_path(f, "dev/dev/nvidia0")), 0);
        int n = snprintf(f->state, sizeof f->state,
                         "{\"ociVersion\":\"1.0.2\",\"id\":\"c\",\"pid\":%d,\"bundle\":\"%s\"}", (int)getpid(),
                         fx_path(f, "bundle"));
        test_write_file(fx_path(f, "state.json"), f->state, (size_t)n, 0644);
}

static void fx_done(struct hook_fx *f) {
        cdi_oci_done(&f->oci);
        test_tmpdir_free(f->dir);
}

/* cdi_hook_read_oci on the file at REL (as the hook's stdin). */
static int fx_read_oci(struct hook_fx *f, const char *rel, struct gs_error *err) {
        int fd = open(fx_path(f, rel), O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        cdi_oci_done(&f->oci);
        int r = cdi_hook_read_oci(fd, &f->oci, err);
        close(fd);
        return r;
}

/* The node for the legacy planner: the 3-GPU A100 node with nvidia0..2, GPU 2 lost when asked. */
static int fx_node(void *userdata, struct topo *ret, struct gs_error *err) {
        struct hook_fx *f = userdata;
        f->node_calls++;
        if (f->node_fails)
                return gs_error_set(err, -EIO, "NVML said no");
        test_topo_a100x3(ret);
        for (unsigned i = 0; i < ret->n_gpus; i++)
                ret->gpu[i].minor = (int)i;
        if (f->gpu_lost) {
                ret->gpu[2].state = TOPO_GPU_LOST;
                strscpy(ret->gpu[2].state_text, "GPU is lost", sizeof ret->gpu[2].state_text);
        }
        return 0;
}

/* The legacy planner for config ENV; its plan and discovery are freed. 0, 1 or the refusal. */
static int fx_plan(struct hook_fx *f, const char *env, struct gs_error *err) {
        fx_config(f, env);
        assert_int_equal(fx_read_oci(f, "state.json", err), 0);
        struct cdi_hook_legacy in = { .oci = &f->oci,
                                      .stage = CDI_HOOK_STAGE_RUNTIME_NS,
                                      .roots = { fx_path(f, "dev"), fx_path(f, "drv") },
                                      .load_node = fx_node,
                                      .userdata = f };
        struct cdi_discovery d = { 0 };
        struct cdi_hook_plan p = { 0 };
        gs_error_clear(err);
        int r = cdi_hook_plan_legacy(&in, &d, &p, err);
        cdi_hook_plan_done(&p);
        cdi_discovery_done(&d);
        return r;
}

static void test_hook_inputs_fail_closed(void **state) {
        (void)state;
        struct hook_fx f;
        fx_init(&f);
        struct gs_error err = { 0 };
        /* no config.json in the bundle */
        assert_int_equal(fx_read_oci(&f, "state.json", &err), -ENOENT);
        assert_non_null(strstr(err.message, "config.json"));
        /* a config.json that is not one: named with its path */
        test_write_file(fx_path(&f, "bundle/config.json"), "{", 1, 0644);
        assert_int_equal(fx_read_oci(&f, "state.json", &err), -EINVAL);
        assert_true(startswith(err.message, fx_path(&f, "bundle/config.json")));
        /* a state that is not JSON, or too large */
        test_write_file(fx_path(&f, "bad.json"), "not json", 8, 0644);
        assert_int_equal(fx_read_oci(&f, "bad.json", &err), -EINVAL);
        assert_true(startswith(err.message, "OCI state: "));
        char *big = calloc(1, CDI_OCI_MAX + 2);
        assert_non_null(big);
        memset(big, ' ', CDI_OCI_MAX + 1);
        test_write_file(fx_path(&f, "big.json"), big, CDI_OCI_MAX + 1, 0644);
        free(big);
        assert_int_equal(fx_read_oci(&f, "big.json", &err), -EFBIG);
        assert_non_null(strstr(err.message, "too large"));
        /* stages */
        enum cdi_hook_stage st;
        assert_int_equal(cdi_hook_stage("createContainer", &st), 0);
        assert_int_equal(st, CDI_HOOK_STAGE_CONTAINER_NS);
        assert_int_equal(cdi_hook_stage("prestart", &st), 0);
        assert_int_equal(st, CDI_HOOK_STAGE_RUNTIME_NS);
        assert_int_equal(cdi_hook_stage("poststop", &st), 0);
        assert_int_equal(st, CDI_HOOK_STAGE_NOTHING);
        assert_int_equal(cdi_hook_stage("prestrat", &st), -EINVAL);
        assert_int_equal(cdi_hook_stage(NULL, &st), -EINVAL);
        /* plan building refuses what it cannot place */
        struct cdi_hook_plan p = { 0 };
        assert_int_equal(cdi_hook_plan_link(&p, "a/b", "/usr/lib/x"), -EINVAL);
        assert_int_equal(cdi_hook_plan_link(&p, "x", "relative"), -EINVAL);
        assert_int_equal(cdi_hook_plan_ldconfig(&p, "lib"), -EINVAL);
        for (unsigned i = 0; i < CDI_HOOK_LINKS_MAX; i++)
                assert_int_equal(cdi_hook_plan_link(&p, "t", "/l"), 0);
        assert_int_equal(cdi_hook_plan_link(&p, "t", "/l"), -E2BIG);
        cdi_hook_plan_done(&p);
        fx_done(&f);
}

static void test_hook_legacy_refusals(void **state) {
        (void)state;
        struct hook_fx f;
        fx_init(&f);
        struct gs_error err = { 0 };
        static const struct {
                const char *env;
                int want;
                const char *msg;
        } cases[] = {
                { "[\"A=1\"]", 1, NULL }, /* not a GPU container */
                { "[\"NVIDIA_VISIBLE_DEVICES=void\"]", 1, NULL },
                { "[\"NVIDIA_VISIBLE_DEVICES=7\"]", -ENODEV, "no GPU '7' on this node" },
                { "[\"NVIDIA_VISIBLE_DEVICES=0,,1\"]", -EINVAL, "malformed list" },
                { "[\"NVIDIA_VISIBLE_DEVICES=0\",\"NVIDIA_DRIVER_CAPABILITIES=compute,warp\"]", -EINVAL,
                  "unknown capability" },
                { "[\"NVIDIA_VISIBLE_DEVICES=all\",\"NVIDIA_REQUIRE_CUDA=cuda>=13.0\"]", -EPERM,
                  "NVIDIA_REQUIRE_CUDA: cuda>=13.0: needs driver" },
                { "[\"NVIDIA_VISIBLE_DEVICES=1\"]", -ENODEV, "GPU 1: no device node /dev/nvidia1" },
                { "[\"NVIDIA_VISIBLE_DEVICES=GPU-0\"]", 0, NULL },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                int r = fx_plan(&f, cases[i].env, &err);
                if (r != cases[i].want || (cases[i].msg && !strstr(err.message, cases[i].msg)))
                        fail_msg("case %zu (%s): %d '%s'", i, cases[i].env, r, err.message);
                if (r < 0)
                        assert_int_equal(err.code, r);
        }
        /* the node is asked only for a GPU container, and the capabilities are checked first */
        f.node_calls = 0;
        assert_int_equal(fx_plan(&f, "[\"NVIDIA_VISIBLE_DEVICES=none\",\"NVIDIA_DRIVER_CAPABILITIES=x\"]", &err),
                         -EINVAL);
        assert_int_equal(fx_plan(&f, "[]", &err), 1);
        assert_int_equal(f.node_calls, 0);
        /* a node that cannot be read, a GPU that is lost */
        f.node_fails = true;
        assert_int_equal(fx_plan(&f, "[\"NVIDIA_VISIBLE_DEVICES=all\"]", &err), -EIO);
        assert_string_equal(err.message, "cannot read the node's GPUs and driver: NVML said no");
        f.node_fails = false;
        f.gpu_lost = true;
        assert_int_equal(fx_plan(&f, "[\"NVIDIA_VISIBLE_DEVICES=2\"]", &err), -ENODEV);
        assert_non_null(strstr(err.message, "GPU 2 is not usable (GPU is lost)"));
        f.gpu_lost = false;
        /* no ld cache under the driver root: refused, not injected without its libraries */
        assert_int_equal(rename(fx_path(&f, "drv/etc/ld.so.cache"), fx_path(&f, "ld.so.cache")), 0);
        assert_int_equal(fx_plan(&f, "[\"NVIDIA_VISIBLE_DEVICES=0\"]", &err), -ENOENT);
        assert_non_null(strstr(err.message, "ld cache"));
        assert_int_equal(rename(fx_path(&f, "ld.so.cache"), fx_path(&f, "drv/etc/ld.so.cache")), 0);
        fx_done(&f);
}

static void test_hook_legacy_plan(void **state) {
        (void)state;
        struct hook_fx f;
        fx_init(&f);
        struct gs_error err = { 0 };
        fx_config(&f, "[\"NVIDIA_VISIBLE_DEVICES=0\"]");
        assert_int_equal(fx_read_oci(&f, "state.json", &err), 0);
        struct cdi_hook_legacy in = { .oci = &f.oci,
                                      .stage = CDI_HOOK_STAGE_CONTAINER_NS,
                                      .roots = { fx_path(&f, "dev"), fx_path(&f, "drv") },
                                      .load_node = fx_node,
                                      .userdata = &f };
        struct cdi_discovery d = { 0 };
        struct cdi_hook_plan p = { 0 };
        assert_int_equal(cdi_hook_plan_legacy(&in, &d, &p, &err), 0);
        assert_string_equal(p.rootfs, fx_path(&f, "bundle/rootfs"));
        assert_int_equal(p.pid, 0);     /* createContainer: in the container's namespace already */
        assert_int_equal(p.n_nodes, 2); /* nvidia0 and nvidiactl */
        assert_string_equal(p.nodes[0]->path, "/dev/nvidia0");
        assert_int_equal(p.n_links, 2);
        assert_string_equal(p.links[0].target, "libcuda.so.535.104.05");
        assert_string_equal(p.links[0].path, "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
        assert_string_equal(p.links[1].target, "libcuda.so.1");
        assert_string_equal(p.links[1].path, "/usr/lib/x86_64-linux-gnu/libcuda.so");
        assert_int_equal(p.n_ldconfig, 1);
        assert_string_equal(p.ldconfig[0], "/usr/lib/x86_64-linux-gnu");
        cdi_hook_plan_done(&p);
        cdi_discovery_done(&d);
        in.stage = CDI_HOOK_STAGE_RUNTIME_NS;
        assert_int_equal(cdi_hook_plan_legacy(&in, &d, &p, &err), 0);
        assert_int_equal(p.pid, getpid()); /* prestart: join the container's namespace */
        cdi_hook_plan_done(&p);
        cdi_discovery_done(&d);
        fx_done(&f);
}

/* The injection: a missing root or namespace is refused; symlinks in the image (absolute, or ".."
 * past its root) never lead a link or a device node out of the root. */
static void test_hook_apply_stays_in_root(void **state) {
        (void)state;
        struct hook_fx f;
        fx_init(&f);
        struct gs_error err = { 0 };
        struct cdi_hook_plan p = { 0 };
        strscpy(p.rootfs, fx_path(&f, "no-such-root"), sizeof p.rootfs);
        assert_int_equal(cdi_hook_apply(&p, &err), -ENOENT);
        assert_non_null(strstr(err.message, "cannot open the root filesystem"));
        strscpy(p.rootfs, fx_path(&f, "bundle/rootfs"), sizeof p.rootfs);
        p.pid = 0x3ffffff0; /* no such process */
        assert_true(cdi_hook_apply(&p, &err) < 0);
        assert_non_null(strstr(err.message, "cannot enter the container's mount namespace"));
        p.pid = 0;
        /* the image's /usr/lib and /dev point at the host's directory `outside` */
        char escape[CDI_PATH_MAX + 16];
        snprintf(escape, sizeof escape, "/../../../../..%s", fx_path(&f, "outside"));
        assert_int_equal(mkdir(fx_path(&f, "bundle/rootfs/usr"), 0755), 0);
        assert_int_equal(symlink(escape, fx_path(&f, "bundle/rootfs/usr/lib")), 0);
        assert_int_equal(symlink(fx_path(&f, "outside"), fx_path(&f, "bundle/rootfs/dev")), 0);
        assert_int_equal(cdi_hook_plan_link(&p, "libcuda.so.1", "/usr/lib/libcuda.so"), 0);
        /* inside the root the directory the symlink names does not exist: refused, nothing made */
        assert_int_equal(cdi_hook_apply(&p, &err), -ENOENT);
        assert_non_null(strstr(err.message, "cannot link /usr/lib/libcuda.so"));
        assert_int_equal(test_count_entries(fx_path(&f, "outside")), 0);
        /* once it exists inside the root, the link is made there */
        char dir[CDI_PATH_MAX * 2];
        int dl = snprintf(dir, sizeof dir, "%s%s", fx_path(&f, "bundle/rootfs"), fx_path(&f, "outside"));
        for (int i = (int)strlen(fx_path(&f, "bundle/rootfs")) + 1; i <= dl; i++)
                if (dir[i] == '/' || dir[i] == '\0') {
                        char c = dir[i];
                        dir[i] = '\0';
                        assert_true(mkdir(dir, 0755) == 0 || errno == EEXIST);
                        dir[i] = c;
                }
        assert_int_equal(cdi_hook_apply(&p, &err), 0);
        assert_int_equal(test_count_entries(fx_path(&f, "outside")), 0);
        char inside[CDI_PATH_MAX * 2];
        snprintf(inside, sizeof inside, "%s%s/libcuda.so", fx_path(&f, "bundle/rootfs"), fx_path(&f, "outside"));
        struct stat st;
        assert_int_equal(lstat(inside, &st), 0); /* resolved inside the root */
        assert_true(S_ISLNK(st.st_mode));
        /* a device node: made inside the root (as root), or refused (without CAP_MKNOD); never outside */
        struct cdi_devnode null = { .path = "/dev/nvidia0", .major = 1, .minor = 3, .type = 'c' };
        cdi_hook_plan_done(&p);
        p.nodes[p.n_nodes++] = &null;
        int r = cdi_hook_apply(&p, &err);
        assert_int_equal(test_count_entries(fx_path(&f, "outside")), 0);
        snprintf(inside, sizeof inside, "%s%s/nvidia0", fx_path(&f, "bundle/rootfs"), fx_path(&f, "outside"));
        if (r == 0) {
                assert_int_equal(stat(inside, &st), 0);
                assert_true(S_ISCHR(st.st_mode));
        } else {
                assert_non_null(strstr(err.message, "cannot create /dev/nvidia0 in the container"));
        }
        /* a link name with a '/' in its target is refused by the plan, before anything is touched */
        assert_int_equal(cdi_hook_plan_link(&p, "../../etc/passwd", "/usr/lib/x"), -EINVAL);
        cdi_hook_plan_done(&p);
        fx_done(&f);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ldcache_new_and_old),
                cmocka_unit_test(test_ldcache_malformed),
                cmocka_unit_test(test_caps),
                cmocka_unit_test(test_kinds),
                cmocka_unit_test(test_min_version),
                cmocka_unit_test(test_yaml),
                cmocka_unit_test(test_share_path_agrees),
                cmocka_unit_test(test_specs_name_host_paths),
                cmocka_unit_test(test_shared_mount_nvml_standin),
                cmocka_unit_test(test_oci_state),
                cmocka_unit_test(test_oci_config),
                cmocka_unit_test(test_hook_inputs_fail_closed),
                cmocka_unit_test(test_hook_legacy_refusals),
                cmocka_unit_test(test_hook_legacy_plan),
                cmocka_unit_test(test_hook_apply_stays_in_root),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
