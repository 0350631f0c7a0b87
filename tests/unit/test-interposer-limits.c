/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test-interposer-limits — the limits file parser and writer (src/interposer/limits.c): every
 * accepted form, a table of malformed files that must be refused, the writer's round trip.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "interposer/limits.h"

static int parse(const char *text, struct gs_limits *l) {
        char err[256];
        return gs_limits_parse(text, strlen(text), l, err, sizeof err);
}

static void test_minimal(void **state) {
        (void)state;
        struct gs_limits l;
        assert_int_equal(parse("gpuslice-limits 1\ncontainer abc\nregion /run/r\ndevice 0\n", &l), 0);
        assert_string_equal(l.container, "abc");
        assert_string_equal(l.region, "/run/r");
        assert_int_equal(l.core_policy, GS_CORE_HARD);
        assert_int_equal(l.n_devices, 1);
        assert_int_equal(l.dev[0].index, 0);
        assert_int_equal(l.dev[0].memory_bytes, 0);
        assert_int_equal(l.dev[0].core_percent, 100);
        assert_string_equal(l.dev[0].uuid, "");
}

static void test_full(void **state) {
        (void)state;
        struct gs_limits l;
        const char *text = "# written by the agent\n\n"
                           "gpuslice-limits 1\n"
                           "container\tcri:0123abcd\n"
                           "region /var/run/gpuslice/c1/region\n"
                           "core-policy elastic\n"
                           "device 0 uuid=GPU-11111111-2222-3333-4444-555555555555 memory=4294967296 core=30 "
                           "context=314572800\n"
                           "  device   3   core=100 memory=18446744073709551615  \n"
                           "# end";
        assert_int_equal(parse(text, &l), 0);
        assert_string_equal(l.container, "cri:0123abcd");
        assert_int_equal(l.core_policy, GS_CORE_ELASTIC);
        assert_int_equal(l.n_devices, 2);
        assert_string_equal(l.dev[0].uuid, "GPU-11111111-2222-3333-4444-555555555555");
        assert_int_equal(l.dev[0].memory_bytes, 4294967296ULL);
        assert_int_equal(l.dev[0].core_percent, 30);
        assert_int_equal(l.dev[0].context_bytes, 314572800);
        assert_int_equal(l.dev[1].index, 3);
        assert_int_equal(l.dev[1].context_bytes, 0);
        assert_true(l.dev[1].memory_bytes == UINT64_MAX);
}

static void test_not_nul_terminated(void **state) {
        (void)state;
        char buf[128];
        const char *text = "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 1";
        size_t n = strlen(text);
        memcpy(buf, text, n);
        memset(buf + n, 'x', sizeof buf - n); /* garbage after the end must not be read */
        struct gs_limits l;
        assert_int_equal(gs_limits_parse(buf, n, &l, NULL, 0), 0);
        assert_int_equal(l.dev[0].index, 1);
}

static void test_malformed(void **state) {
        (void)state;
        static const char *const bad[] = {
                "",
                "# only a comment\n",
                "gpuslice-limits 2\ncontainer a\nregion /r\ndevice 0\n",  /* future version */
                "gpuslice-limits 01\ncontainer a\nregion /r\ndevice 0\n", /* leading zero */
                "gpuslice-limits\ncontainer a\nregion /r\ndevice 0\n",
                "container a\ngpuslice-limits 1\nregion /r\ndevice 0\n", /* header not first */
                "gpuslice-limits 1\nregion /r\ndevice 0\n",              /* no container */
                "gpuslice-limits 1\ncontainer a\ndevice 0\n",            /* no region */
                "gpuslice-limits 1\ncontainer a\nregion /r\n",           /* no device */
                "gpuslice-limits 1\ncontainer a\ncontainer b\nregion /r\ndevice 0\n",
                "gpuslice-limits 1\ncontainer a b\nregion /r\ndevice 0\n",
                "gpuslice-limits 1\ncontainer a/b\nregion /r\ndevice 0\n", /* bad character */
                "gpuslice-limits 1\ncontainer a\nregion r\ndevice 0\n",    /* relative */
                "gpuslice-limits 1\ncontainer a\nregion /r\nregion /s\ndevice 0\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ncore-policy soft\ndevice 0\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice -1\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice x\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0 core=0\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0 core=101\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0 core=50%\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0 memory=0\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0 memory=1G\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0 memory=18446744073709551616\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0 memory=+5\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0 memory=1 memory=2\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0 context=-1\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0 context=1 context=1\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0 color=red\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0 uuid=\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0 uuid=GPU-1 uuid=GPU-2\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0 core\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0\ndevice 0\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0 uuid=GPU-1\ndevice 1 uuid=GPU-1\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0\nfrobnicate\n",
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0\r\n", /* CR */
                "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0 a b c d e f g h\n",
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                struct gs_limits l;
                char err[256] = "";
                int r = gs_limits_parse(bad[i], strlen(bad[i]), &l, err, sizeof err);
                if (r != -EINVAL)
                        fail_msg("case %zu accepted (%d): %s", i, r, bad[i]);
                assert_true(err[0] != '\0');
        }
}

static void test_embedded_nul(void **state) {
        (void)state;
        const char text[] = "gpuslice-limits 1\ncontainer a\0b\nregion /r\ndevice 0\n";
        struct gs_limits l;
        assert_int_equal(gs_limits_parse(text, sizeof text - 1, &l, NULL, 0), -EINVAL);
}

static void test_too_many_devices(void **state) {
        (void)state;
        char text[4096];
        size_t off = (size_t)snprintf(text, sizeof text, "gpuslice-limits 1\ncontainer a\nregion /r\n");
        for (unsigned i = 0; i <= GS_MAX_DEVICES; i++)
                off += (size_t)snprintf(text + off, sizeof text - off, "device %u\n", i);
        struct gs_limits l;
        assert_int_equal(gs_limits_parse(text, off, &l, NULL, 0), -EINVAL);
}

static void test_too_long(void **state) {
        (void)state;
        static char text[GS_LIMITS_MAX_FILE + 2];
        memset(text, '#', sizeof text);
        struct gs_limits l;
        assert_int_equal(gs_limits_parse(text, sizeof text, &l, NULL, 0), -E2BIG);
}

static void test_unchanged_on_error(void **state) {
        (void)state;
        struct gs_limits l;
        memset(&l, 0x5a, sizeof l);
        const char *text = "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0 core=0\n";
        assert_int_equal(gs_limits_parse(text, strlen(text), &l, NULL, 0), -EINVAL);
        assert_int_equal(l.n_devices, 0x5a5a5a5a);
}

static void test_format_round_trip(void **state) {
        (void)state;
        struct gs_limits l = { .version = 1, .core_policy = GS_CORE_ELASTIC, .n_devices = 2 };
        strcpy(l.container, "pod-x_1"); /* lint: allow (test) */
        strcpy(l.region, "/tmp/r");     /* lint: allow (test) */
        l.dev[0] = (struct gs_limits_device){ .index = 2, .memory_bytes = 123, .core_percent = 40, .context_bytes = 7 };
        strcpy(l.dev[0].uuid, "GPU-abc"); /* lint: allow (test) */
        l.dev[1] = (struct gs_limits_device){ .index = 5, .core_percent = 100 };
        char buf[1024];
        int n = gs_limits_format(&l, buf, sizeof buf);
        assert_true(n > 0);
        struct gs_limits back;
        assert_int_equal(gs_limits_parse(buf, (size_t)n, &back, NULL, 0), 0);
        assert_string_equal(back.container, l.container);
        assert_string_equal(back.region, l.region);
        assert_int_equal(back.core_policy, GS_CORE_ELASTIC);
        assert_int_equal(back.n_devices, 2);
        assert_string_equal(back.dev[0].uuid, "GPU-abc");
        assert_int_equal(back.dev[0].memory_bytes, 123);
        assert_int_equal(back.dev[0].core_percent, 40);
        assert_int_equal(back.dev[0].context_bytes, 7);
        assert_int_equal(back.dev[1].index, 5);
        assert_int_equal(back.dev[1].memory_bytes, 0);
}

static void test_format_errors(void **state) {
        (void)state;
        struct gs_limits l = { .version = 1, .n_devices = 1 };
        strcpy(l.container, "a"); /* lint: allow (test) */
        strcpy(l.region, "/r");   /* lint: allow (test) */
        l.dev[0].core_percent = 100;
        char small[16];
        assert_int_equal(gs_limits_format(&l, small, sizeof small), -ENOBUFS);
        char buf[512];
        l.dev[0].core_percent = 0; /* would not parse back */
        assert_int_equal(gs_limits_format(&l, buf, sizeof buf), -EINVAL);
        l.dev[0].core_percent = 100;
        strcpy(l.container, "has space"); /* lint: allow (test) */
        assert_int_equal(gs_limits_format(&l, buf, sizeof buf), -EINVAL);
        l.n_devices = 0;
        assert_int_equal(gs_limits_format(&l, buf, sizeof buf), -EINVAL);
}

/* Found by fuzz-limits-format: a value with leading or trailing blanks was written, parsed, and
 * read back as another value (container "\tc" → "c", uuid "GPU-1 " → "GPU-1"). */
static void test_format_refuses_values_that_read_back_different(void **state) {
        (void)state;
        struct gs_limits l = { .version = 1, .n_devices = 1 };
        strcpy(l.region, "/r"); /* lint: allow (test) */
        l.dev[0].core_percent = 100;
        char buf[512];
        strcpy(l.container, "\tc"); /* lint: allow (test) */
        assert_int_equal(gs_limits_format(&l, buf, sizeof buf), -EINVAL);
        strcpy(l.container, "c "); /* lint: allow (test) */
        assert_int_equal(gs_limits_format(&l, buf, sizeof buf), -EINVAL);
        strcpy(l.container, "c"); /* lint: allow (test) */
        strcpy(l.region, "/r\t"); /* lint: allow (test) */
        assert_int_equal(gs_limits_format(&l, buf, sizeof buf), -EINVAL);
        strcpy(l.region, "/r");          /* lint: allow (test) */
        strcpy(l.dev[0].uuid, "GPU-1 "); /* lint: allow (test) */
        assert_int_equal(gs_limits_format(&l, buf, sizeof buf), -EINVAL);
        strcpy(l.dev[0].uuid, "GPU-1"); /* lint: allow (test) */
        assert_true(gs_limits_format(&l, buf, sizeof buf) > 0);
}

static void test_match(void **state) {
        (void)state;
        struct gs_limits l;
        const char *text = "gpuslice-limits 1\ncontainer a\nregion /r\ndevice 0 uuid=GPU-aa\ndevice 1\n";
        assert_int_equal(parse(text, &l), 0);
        assert_int_equal(gs_limits_match(&l, 7, "GPU-aa"), 0);  /* by uuid, whatever the ordinal */
        assert_int_equal(gs_limits_match(&l, 0, "GPU-bb"), -1); /* uuid given and different */
        assert_int_equal(gs_limits_match(&l, 1, "GPU-cc"), 1);  /* no uuid: by index */
        assert_int_equal(gs_limits_match(&l, 2, NULL), -1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_minimal),
                cmocka_unit_test(test_full),
                cmocka_unit_test(test_not_nul_terminated),
                cmocka_unit_test(test_malformed),
                cmocka_unit_test(test_embedded_nul),
                cmocka_unit_test(test_too_many_devices),
                cmocka_unit_test(test_too_long),
                cmocka_unit_test(test_unchanged_on_error),
                cmocka_unit_test(test_format_round_trip),
                cmocka_unit_test(test_format_errors),
                cmocka_unit_test(test_format_refuses_values_that_read_back_different),
                cmocka_unit_test(test_match),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
