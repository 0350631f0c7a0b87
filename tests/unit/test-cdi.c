/* SPDX-License-Identifier: Apache-2.0 */
/* test-cdi — the ld.so.cache reader on caches built in memory (new format, old+new, and every kind
 * of damage), capability names, CDI kinds and file names, the cdiVersion choice, the YAML writer,
 * and the OCI state / config.json readers on good and malformed input. Discovery and the hook run
 * for real in tests/integration/test-cdi.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/share.h"
#include "cdi/cdi.h"
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

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ldcache_new_and_old),
                cmocka_unit_test(test_ldcache_malformed),
                cmocka_unit_test(test_caps),
                cmocka_unit_test(test_kinds),
                cmocka_unit_test(test_min_version),
                cmocka_unit_test(test_yaml),
                cmocka_unit_test(test_share_path_agrees),
                cmocka_unit_test(test_oci_state),
                cmocka_unit_test(test_oci_config),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
