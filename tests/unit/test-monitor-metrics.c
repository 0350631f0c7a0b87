/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus text builder (escaping, values, families) and the agent's counter registry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>

#include "metrics/metrics.h"

static char *finish(struct metrics_text *t) {
        char *s;
        size_t n;
        assert_int_equal(metrics_text_finish(t, &s, &n), 0);
        assert_int_equal(strlen(s), n);
        return s;
}

static void test_family_and_sample(void **state) {
        (void)state;
        struct metrics_text t = { 0 };
        metrics_text_family(&t, "x_bytes", "gauge", "Some bytes.");
        const char *labels[] = { "a", "1", "b", "two", NULL };
        metrics_text_sample(&t, "x_bytes", labels, 42);
        char *s = finish(&t);
        assert_string_equal(s, "# HELP x_bytes Some bytes.\n# TYPE x_bytes gauge\nx_bytes{a=\"1\",b=\"two\"} 42\n");
        free(s);
}

static void test_label_escaping(void **state) {
        (void)state;
        struct metrics_text t = { 0 };
        const char *labels[] = { "v", "a\"b\\c\nd", "e", NULL, NULL };
        metrics_text_sample(&t, "m", labels, 1);
        char *s = finish(&t);
        assert_string_equal(s, "m{v=\"a\\\"b\\\\c\\nd\",e=\"\"} 1\n");
        free(s);
}

/* Found in review: label values carry process names (/proc/PID/comm, any bytes a workload picks);
 * one byte that is not UTF-8 made Prometheus refuse the whole scrape. Invalid bytes become U+FFFD,
 * well-formed multi-byte characters pass untouched. */
static void test_label_invalid_utf8_replaced(void **state) {
        (void)state;
        struct metrics_text t = { 0 };
        const char *labels[] = { "process", "a\xff\xc3\xa9\xed\xa0\x80\xe2\x82", NULL };
        metrics_text_sample(&t, "m", labels, 1);
        metrics_text_family(&t, "n", "gauge", "h\xc0\xaf");
        char *s = finish(&t);
        assert_string_equal(s, "m{process=\"a\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                               "\xef\xbf\xbd\xef\xbf\xbd\"} 1\n"
                               "# HELP n h\xef\xbf\xbd\xef\xbf\xbd\n# TYPE n gauge\n");
        free(s);
}

static void test_help_escaping(void **state) {
        (void)state;
        struct metrics_text t = { 0 };
        metrics_text_family(&t, "m", "counter", "back\\slash\nnew \"quote\"");
        char *s = finish(&t);
        /* HELP escapes backslash and newline only */
        assert_string_equal(s, "# HELP m back\\\\slash\\nnew \"quote\"\n# TYPE m counter\n");
        free(s);
}

static void test_values(void **state) {
        (void)state;
        struct metrics_text t = { 0 };
        metrics_text_sample(&t, "a", NULL, 0.16);
        metrics_text_sample(&t, "b", NULL, 12652118016.0);
        metrics_text_sample(&t, "c", NULL, NAN);
        metrics_text_sample(&t, "d", NULL, INFINITY);
        metrics_text_sample(&t, "e", NULL, -INFINITY);
        metrics_text_sample(&t, "f", NULL, -3);
        char *s = finish(&t);
        assert_string_equal(s, "a 0.16\nb 12652118016\nc NaN\nd +Inf\ne -Inf\nf -3\n");
        free(s);
}

/* The pieces formatters write samples with (metrics_text_append, _escaped, _value, _uint) and a
 * label set copied from the text (metrics_text_sample_span). */
static void test_pieces_and_span(void **state) {
        (void)state;
        struct metrics_text t = { 0 };
        const char *labels[] = { "v", "q\"}", "w", "x", NULL };
        metrics_text_sample(&t, "a", labels, 1);
        struct metrics_span l = { 2, strlen("v=\"q\\\"}\",w=\"x\"") };
        metrics_text_sample_span(&t, "b", l, 0.25);
        metrics_text_sample_span(&t, "c", (struct metrics_span){ 0, 0 }, 2);       /* empty: no braces */
        metrics_text_sample_span(&t, "d", (struct metrics_span){ t.b.len, 5 }, 3); /* past the end: none either */
        metrics_text_append(&t, "e{k=\"", 5);
        metrics_text_escaped(&t, "\\\n\xff");
        metrics_text_append(&t, "\"} ", 3);
        metrics_text_uint(&t, UINT64_MAX);
        metrics_text_append(&t, " ", 1);
        metrics_text_value(&t, -0.0);
        metrics_text_append(&t, " ", 1);
        metrics_text_value(&t, 1e15);
        metrics_text_append(&t, " ", 1);
        metrics_text_value(&t, 999999999999999.0);
        char *s = finish(&t);
        assert_string_equal(s, "a{v=\"q\\\"}\",w=\"x\"} 1\nb{v=\"q\\\"}\",w=\"x\"} 0.25\nc 2\nd 3\n"
                               "e{k=\"\\\\\\n\xef\xbf\xbd\"} 18446744073709551615 -0 1e+15 999999999999999");
        free(s);
}

/* metrics_text_printf writes in one go when the text fits the room left, and grows the buffer for
 * longer text (the second vsnprintf) without losing what was there. */
static void test_printf_grows(void **state) {
        (void)state;
        struct metrics_text t = { 0 };
        char big[10000];
        memset(big, 'x', sizeof big - 1);
        big[sizeof big - 1] = '\0';
        metrics_text_printf(&t, "%s", "head ");
        metrics_text_printf(&t, "%s", big);
        metrics_text_printf(&t, " %d", 7);
        char *s = finish(&t);
        assert_int_equal(strlen(s), 5 + sizeof big - 1 + 2);
        assert_memory_equal(s, "head xxx", 8);
        assert_string_equal(s + strlen(s) - 3, "x 7");
        free(s);
}

static void test_escape_label_buffer(void **state) {
        (void)state;
        char buf[8];
        assert_int_equal(metrics_escape_label("a\"b", buf, sizeof buf), 0);
        assert_string_equal(buf, "a\\\"b");
        assert_int_equal(metrics_escape_label("0123456789", buf, sizeof buf), -ENOBUFS);
        assert_string_equal(buf, "0123456");
}

static void test_empty_finish(void **state) {
        (void)state;
        struct metrics_text t = { 0 };
        char *s = finish(&t);
        assert_string_equal(s, "");
        free(s);
}

static void test_valid_names(void **state) {
        (void)state;
        assert_true(metrics_valid_name("gpuslice_rpc_requests_total"));
        assert_true(metrics_valid_name("a:b_c"));
        assert_false(metrics_valid_name("9abc"));
        assert_false(metrics_valid_name("a-b"));
        assert_false(metrics_valid_name(""));
        assert_false(metrics_valid_name(NULL));
}

static void test_counter_registry(void **state) {
        (void)state;
        struct metrics_counter *a = metrics_counter_get("t_calls_total", "Calls.", "method", "Allocate");
        struct metrics_counter *b = metrics_counter_get("t_calls_total", "Calls.", "method", "Allocate");
        struct metrics_counter *c = metrics_counter_get("t_calls_total", "Calls.", "method", "List");
        assert_non_null(a);
        assert_ptr_equal(a, b);
        assert_ptr_not_equal(a, c);
        metrics_counter_add(a, 2);
        metrics_counter_add(b, 1);
        assert_int_equal(metrics_counter_value(a), 3);
        metrics_counter_add(NULL, 1); /* no-op */
        struct metrics_text t = { 0 };
        metrics_registry_format(&t);
        char *s = finish(&t);
        const char *fam = strstr(s, "# HELP t_calls_total Calls.\n# TYPE t_calls_total counter\n");
        assert_non_null(fam);
        assert_non_null(strstr(fam, "t_calls_total{method=\"Allocate\"} 3\nt_calls_total{method=\"List\"} 0\n"));
        /* the family's HELP is written once */
        assert_null(strstr(fam + 1, "# HELP t_calls_total"));
        free(s);
}

static void test_counter_invalid(void **state) {
        (void)state;
        assert_null(metrics_counter_get("bad name", "x", NULL, NULL));
        assert_null(metrics_counter_get("ok_total", NULL, NULL, NULL));
        assert_null(metrics_counter_get("ok_total", "x", "key", NULL));
        assert_null(metrics_counter_get("ok_total", "x", "bad-key", "v"));
}

/* Gauges: set from anywhere, the last value written as a gauge family; a counter's name is refused. */
static void test_gauge(void **state) {
        (void)state;
        assert_null(metrics_gauge_get("g_total", "x", NULL, NULL));
        assert_null(metrics_gauge_get("bad name", "x", NULL, NULL));
        struct metrics_gauge *a = metrics_gauge_get("t_registered", "Registered.", "resource", "nvidia.com/gpu");
        struct metrics_gauge *b = metrics_gauge_get("t_registered", "Registered.", "resource", "gpuslice.io/gpu-core");
        assert_non_null(a);
        assert_ptr_equal(a, metrics_gauge_get("t_registered", "Registered.", "resource", "nvidia.com/gpu"));
        metrics_gauge_set(a, 1);
        metrics_gauge_set(b, 0.5);
        metrics_gauge_set(b, 0);
        assert_true(metrics_gauge_value(a) == 1);
        struct metrics_text t = { 0 };
        metrics_registry_format(&t);
        char *s = finish(&t);
        assert_non_null(strstr(s, "# TYPE t_registered gauge\nt_registered{resource=\"nvidia.com/gpu\"} 1\n"
                                  "t_registered{resource=\"gpuslice.io/gpu-core\"} 0\n"));
        free(s);
}

static void test_histogram(void **state) {
        (void)state;
        struct metrics_histogram *h = metrics_histogram_get("t_seconds", "Latency.", NULL, NULL);
        assert_non_null(h);
        metrics_histogram_observe(h, 0.00005); /* first bucket */
        metrics_histogram_observe(h, 0.003);   /* le 0.005 */
        metrics_histogram_observe(h, 100);     /* above every bound: only +Inf */
        metrics_histogram_observe(h, -1);      /* ignored */
        metrics_histogram_observe(h, NAN);     /* ignored */
        struct metrics_text t = { 0 };
        metrics_registry_format(&t);
        char *s = finish(&t);
        assert_non_null(strstr(s, "# TYPE t_seconds histogram\n"));
        assert_non_null(strstr(s, "t_seconds_bucket{le=\"0.0001\"} 1\n"));
        assert_non_null(strstr(s, "t_seconds_bucket{le=\"0.0025\"} 1\n"));
        assert_non_null(strstr(s, "t_seconds_bucket{le=\"0.005\"} 2\n"));
        assert_non_null(strstr(s, "t_seconds_bucket{le=\"10\"} 2\n"));
        assert_non_null(strstr(s, "t_seconds_bucket{le=\"+Inf\"} 3\n"));
        assert_non_null(strstr(s, "t_seconds_count 3\n"));
        assert_non_null(strstr(s, "t_seconds_sum 100.00305\n"));
        free(s);
}

static void test_histogram_labelled(void **state) {
        (void)state;
        struct metrics_histogram *h = metrics_histogram_get("t2_seconds", "L.", "path", "/metrics");
        metrics_histogram_observe(h, 0.2);
        struct metrics_text t = { 0 };
        metrics_registry_format(&t);
        char *s = finish(&t);
        assert_non_null(strstr(s, "t2_seconds_bucket{path=\"/metrics\",le=\"0.25\"} 1\n"));
        assert_non_null(strstr(s, "t2_seconds_count{path=\"/metrics\"} 1\n"));
        free(s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_family_and_sample),
                cmocka_unit_test(test_label_escaping),
                cmocka_unit_test(test_label_invalid_utf8_replaced),
                cmocka_unit_test(test_help_escaping),
                cmocka_unit_test(test_values),
                cmocka_unit_test(test_pieces_and_span),
                cmocka_unit_test(test_printf_grows),
                cmocka_unit_test(test_escape_label_buffer),
                cmocka_unit_test(test_empty_finish),
                cmocka_unit_test(test_valid_names),
                cmocka_unit_test(test_counter_registry),
                cmocka_unit_test(test_counter_invalid),
                cmocka_unit_test(test_gauge),
                cmocka_unit_test(test_histogram),
                cmocka_unit_test(test_histogram_labelled),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
