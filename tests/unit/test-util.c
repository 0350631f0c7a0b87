/* SPDX-License-Identifier: Apache-2.0 */
/* test-util — the checked number parsers (src/util/util.c) that the config, topology and CLI
 * parsers build on: exact values, and clear refusals of everything else. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "util/error.h"
#include "util/util.h"

/* The deadline is now + ms on the clock asked for, with the nanoseconds carried into the seconds. */
static void test_timespec_after_ms(void **state) {
        (void)state;
        const uint64_t steps[] = { 0, 1, 999, 1000, 1500, 61999 };
        for (size_t i = 0; i < ELEMENTSOF(steps); i++) {
                struct timespec before, after;
                clock_gettime(CLOCK_MONOTONIC, &before);
                struct timespec d = timespec_after_ms(CLOCK_MONOTONIC, steps[i]);
                clock_gettime(CLOCK_MONOTONIC, &after);
                assert_true(d.tv_nsec >= 0 && d.tv_nsec < 1000000000L);
                int64_t dn = (int64_t)d.tv_sec * 1000000000 + d.tv_nsec;
                int64_t lo = (int64_t)before.tv_sec * 1000000000 + before.tv_nsec + (int64_t)steps[i] * 1000000;
                int64_t hi = (int64_t)after.tv_sec * 1000000000 + after.tv_nsec + (int64_t)steps[i] * 1000000;
                assert_true(dn >= lo && dn <= hi);
        }
}

static void test_parse_u64(void **state) {
        (void)state;
        uint64_t v;
        assert_int_equal(parse_u64("0", &v), 0);
        assert_int_equal(v, 0);
        assert_int_equal(parse_u64("18446744073709551615", &v), 0);
        assert_true(v == UINT64_MAX);
        assert_int_equal(parse_u64("18446744073709551616", &v), -ERANGE);
        const char *bad[] = { "", "-1", "+1", " 1", "1 ", "0x10", "1e3", "12a" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(parse_u64(bad[i], &v), -EINVAL);
}

static void test_parse_size_units(void **state) {
        (void)state;
        uint64_t v;
        assert_int_equal(parse_size("24GiB", &v), 0);
        assert_true(v == 24ULL << 30);
        assert_int_equal(parse_size("512 M", &v), 0);
        assert_true(v == 512ULL << 20);
        assert_int_equal(parse_size("1.5GiB", &v), 0);
        assert_true(v == 3ULL << 29);
        assert_int_equal(parse_size("2TB", &v), 0);
        assert_true(v == 2000000000000ULL);
}

/* Found in review: sizes went through a double and llround, so a byte count past 2^53 lost its
 * low bits and one past 2^63 overflowed llround (9.22e18 came back for 1.1e19). */
static void test_parse_size_exact_past_double_precision(void **state) {
        (void)state;
        uint64_t v;
        assert_int_equal(parse_size("9007199254740993", &v), 0);
        assert_true(v == 9007199254740993ULL);
        assert_int_equal(parse_size("10000000T", &v), 0);
        assert_true(v == 10000000ULL << 40);
        assert_int_equal(parse_size("18446744073709551615", &v), 0);
        assert_true(v == UINT64_MAX);
        assert_int_equal(parse_size("16777216T", &v), -ERANGE); /* 2^64 */
        assert_int_equal(parse_size("18446744073709551616", &v), -ERANGE);
        assert_int_equal(parse_size("16777215.9999999T", &v), 0);
        assert_true(v > (16777215ULL << 40));
        assert_int_equal(parse_size("16777216.5T", &v), -ERANGE);
}

static void test_parse_size_malformed(void **state) {
        (void)state;
        uint64_t v = 7;
        const char *bad[] = { "",     "G",   "-1G", "1.G", "1..5G", "0x10",  "0x1p4",  "1e3",
                              "1E3G", "inf", "1 2", "1m",  "1b",    "1GiBx", "1 GiB ", ".5G" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(parse_size(bad[i], &v), -EINVAL);
        assert_int_equal(v, 7); /* untouched on failure */
}

static void test_error_set_and_prefix(void **state) {
        (void)state;
        struct gs_error e;
        gs_error_clear(&e);
        assert_int_equal(e.code, 0);
        assert_string_equal(e.message, "");
        assert_int_equal(gs_error_set(&e, -EINVAL, "line %u: bad %s", 3u, "word"), -EINVAL);
        assert_int_equal(e.code, -EINVAL);
        assert_string_equal(e.message, "line 3: bad word");
        assert_int_equal(gs_error_prefix(&e, "%s", "node.topo"), -EINVAL);
        assert_string_equal(e.message, "node.topo: line 3: bad word");
        gs_error_set(&e, -ENOENT, "%s", "");
        gs_error_prefix(&e, "/etc/x");
        assert_string_equal(e.message, "/etc/x");
        /* NULL: only the code comes back */
        assert_int_equal(gs_error_set(NULL, -EIO, "x"), -EIO);
        assert_int_equal(gs_error_prefix(NULL, "x"), 0);
        gs_error_clear(NULL);
        /* too long: cut, NUL-terminated */
        char big[600];
        memset(big, 'a', sizeof big - 1);
        big[sizeof big - 1] = 0;
        gs_error_set(&e, -E2BIG, "%s", big);
        assert_int_equal(strlen(e.message), GS_ERROR_MESSAGE_MAX - 1);
        gs_error_prefix(&e, "p");
        assert_int_equal(strlen(e.message), GS_ERROR_MESSAGE_MAX - 1);
        assert_memory_equal(e.message, "p: aaa", 6);
}

static void test_utf8_printable(void **state) {
        (void)state;
        assert_true(utf8_printable("", 0));
        assert_true(utf8_printable("gpu-a \xc3\xa9\xe2\x82\xac", 11)); /* é, € */
        assert_false(utf8_printable("a\tb", 3));                       /* control */
        assert_false(utf8_printable("a\x7f", 2));                      /* DEL */
        assert_false(utf8_printable("\xc0\xaf", 2));                   /* overlong */
        assert_false(utf8_printable("\xed\xa0\x80", 3));               /* surrogate */
        assert_false(utf8_printable("\xe2\x82", 2));                   /* cut short */
        assert_true(utf8_printable("ab\0cd", 2));                      /* only n bytes read */
}

static void test_hex_digit(void **state) {
        (void)state;
        assert_int_equal(hex_digit('0'), 0);
        assert_int_equal(hex_digit('9'), 9);
        assert_int_equal(hex_digit('a'), 10);
        assert_int_equal(hex_digit('F'), 15);
        assert_int_equal(hex_digit('g'), -1);
        assert_int_equal(hex_digit('/'), -1);
        assert_int_equal(hex_digit('\0'), -1);
}

struct pair {
        uint64_t a, b;
};

static void test_array_reserve(void **state) {
        (void)state;
        struct pair *v = NULL;
        size_t cap = 0;
        assert_int_equal(array_reserve(&v, &cap, 0, 8), 0); /* nothing needed: nothing allocated */
        assert_null(v);
        assert_int_equal(array_reserve(&v, &cap, 1, 8), 0);
        assert_int_equal(cap, 8);
        for (size_t i = 0; i < 100; i++) {
                assert_int_equal(array_reserve(&v, &cap, i + 1, 8), 0);
                v[i] = (struct pair){ i, ~i }; /* ASan sees a write past the room made */
        }
        assert_int_equal(cap, 128); /* doubled from 8 */
        for (size_t i = 0; i < 100; i++)
                assert_true(v[i].a == i && v[i].b == ~i);
        /* elements * size past SIZE_MAX: refused, the array as it was */
        struct pair *was = v;
        assert_int_equal(array_reserve(&v, &cap, SIZE_MAX / 8, 8), -ENOMEM);
        assert_ptr_equal(v, was);
        assert_int_equal(cap, 128);
        free(v);

        struct gs_buf b = { 0 };
        assert_int_equal(gs_buf_reserve(&b, 4999), 0); /* 4999 bytes and the NUL */
        assert_int_equal(b.cap, 8192);                 /* bytes double from 4096 */
        b.p[4999] = 'x';
        gs_buf_done(&b);
}

/* util's buffer: appends, printf, the bound, the sticky failure, finish. */
static void test_gs_buf(void **state) {
        (void)state;
        struct gs_buf b = { .max = 16 };
        assert_int_equal(GS_BUF_LIT(&b, "ab"), 0);
        assert_int_equal(gs_buf_puts(&b, "cd"), 0);
        assert_int_equal(gs_buf_printf(&b, "%d-%s", 42, "x"), 0);
        assert_string_equal(b.p, "abcd42-x");
        assert_int_equal(b.len, 8);
        assert_false(gs_buf_failed(&b));
        /* past max: refused whole, flagged, the text as it was */
        assert_int_equal(gs_buf_printf(&b, "%s", "0123456789"), -EFBIG);
        assert_string_equal(b.p, "abcd42-x");
        assert_true(b.overflow && gs_buf_failed(&b));
        char *text = NULL;
        size_t len = 0;
        assert_int_equal(gs_buf_finish(&b, &text, &len), -EFBIG);
        assert_null(text);
        assert_null(b.p);
        /* cleared: usable again */
        b.max = 0;
        gs_buf_clear(&b);
        assert_int_equal(gs_buf_finish(&b, &text, &len), 0);
        assert_string_equal(text, "");
        assert_int_equal(len, 0);
        free(text);
        /* printf that does not fit the room left grows once and writes it whole */
        char big[6000];
        memset(big, 'y', sizeof big - 1);
        big[sizeof big - 1] = '\0';
        assert_int_equal(GS_BUF_LIT(&b, "<"), 0);
        assert_int_equal(gs_buf_printf(&b, "%s>", big), 0);
        assert_int_equal(b.len, sizeof big + 1);
        assert_int_equal(b.p[0], '<');
        assert_int_equal(b.p[b.len - 1], '>');
        assert_int_equal(b.p[b.len], '\0');
        gs_buf_clear(&b);
        assert_int_equal(b.len, 0);
        assert_string_equal(b.p, "");
        gs_buf_done(&b);
}

static char *json_of(const char *s) {
        struct gs_buf b = { 0 };
        assert_int_equal(gs_buf_json_string(&b, s), 0);
        char *text;
        assert_int_equal(gs_buf_finish(&b, &text, NULL), 0);
        return text;
}

/* JSON strings: quotes, backslashes and control characters escaped, UTF-8 kept, bytes that are not
 * UTF-8 (a cut sequence, an overlong form, a lone continuation byte, a surrogate) as U+FFFD. */
static void test_gs_buf_json_string(void **state) {
        (void)state;
        static const struct {
                const char *in, *want;
        } cases[] = {
                { "", "\"\"" },
                { "gpu-a", "\"gpu-a\"" },
                { "a\"b\\c", "\"a\\\"b\\\\c\"" },
                { "tab\tnl\n\x01\x1f", "\"tab\\u0009nl\\u000a\\u0001\\u001f\"" },
                { "\x7f", "\"\x7f\"" },
                { "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"" },
                { "cut\xe2\x82", "\"cut\xef\xbf\xbd\xef\xbf\xbd\"" },
                { "\xc0\xaf", "\"\xef\xbf\xbd\xef\xbf\xbd\"" },
                { "\x80x", "\"\xef\xbf\xbdx\"" },
                { "\xed\xa0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *got = json_of(cases[i].in);
                assert_string_equal(got, cases[i].want);
                free(got);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_timespec_after_ms),
                cmocka_unit_test(test_parse_u64),
                cmocka_unit_test(test_parse_size_units),
                cmocka_unit_test(test_parse_size_exact_past_double_precision),
                cmocka_unit_test(test_parse_size_malformed),
                cmocka_unit_test(test_error_set_and_prefix),
                cmocka_unit_test(test_utf8_printable),
                cmocka_unit_test(test_hex_digit),
                cmocka_unit_test(test_array_reserve),
                cmocka_unit_test(test_gs_buf),
                cmocka_unit_test(test_gs_buf_json_string),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
