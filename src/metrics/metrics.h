/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics — Prometheus text exposition (format 0.0.4) of gpuslice's data, and the agent's own
 * counters, gauges and histograms that any module can set.
 *
 * Two parts:
 *  1. A text builder (struct metrics_text) that writes families with HELP and TYPE lines and
 *     escapes label values (\\, \", \n) and HELP text (\\, \n) as the format requires; the
 *     monitor formats its snapshots with it (monitor/monitor.h: monitor_format_metrics).
 *  2. A process-wide registry of counters and latency histograms for the agent's own work
 *     (RPC calls, allocations, errors). Register once (thread-safe; the same name and label
 *     give back the same object), then bump from any thread without locks:
 *
 *       static struct metrics_counter *calls;
 *       calls = metrics_counter_get("gpuslice_rpc_requests_total", "RPC calls served.",
 *                                   "method", "Allocate");
 *       metrics_counter_add(calls, 1);
 *       struct metrics_histogram *lat = metrics_histogram_get("gpuslice_rpc_duration_seconds",
 *                                   "Time to serve an RPC call.", "method", "Allocate");
 *       metrics_histogram_observe(lat, 0.00042);
 *
 *     Registered objects live until the process exits (never freed: handles stay valid).
 *
 * Must never: emit a sample without its family's HELP/TYPE, emit a family twice, or emit an
 * unescaped label value.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/util.h"

/* ---- text builder ---- */

struct metrics_text {
        struct gs_buf b; /* the text so far (util's buffer); b.no_mem: it is incomplete, report -ENOMEM */
};

/* Append printf-style; on allocation failure sets ->failed and does nothing more. */
void metrics_text_printf(struct metrics_text *t, const char *fmt, ...) _printf_(2, 3);
/* "# HELP name help\n# TYPE name type\n" with the help text escaped. */
void metrics_text_family(struct metrics_text *t, const char *name, const char *type, const char *help);
/*
 * One sample: name{k1="v1",k2="v2"} value\n. labels is a NULL-terminated list of key, value
 * pairs (values escaped here; a NULL value is written as ""). value is written with %.12g
 * (integers exactly), NaN/Inf as the format spells them.
 */
void metrics_text_sample(struct metrics_text *t, const char *name, const char *const *labels, double value);
/*
 * The pieces of a sample, for formatters that write many (src/monitor/format.c; 8 GPUs x 256
 * processes are 1.8 MB of text per scrape): raw bytes, an escaped label value, a value as
 * metrics_text_sample writes it, a whole number. metrics_text_reserve makes room for n more bytes at
 * once (false when that failed; t->failed is then set).
 */
void metrics_text_append(struct metrics_text *t, const char *s, size_t n);
void metrics_text_escaped(struct metrics_text *t, const char *value);
void metrics_text_value(struct metrics_text *t, double value);
void metrics_text_uint(struct metrics_text *t, uint64_t value);
bool metrics_text_reserve(struct metrics_text *t, size_t n);

/*
 * A label set already in the text (the bytes between a sample's braces, escaped), to go out again
 * under another family without escaping it twice: name{<text[off, off+len)>} value\n. An empty span,
 * or one past the end of the text, writes no braces.
 */
struct metrics_span {
        size_t off, len;
};
void metrics_text_sample_span(struct metrics_text *t, const char *name, struct metrics_span labels, double value);
/* Escape a label value into buf (always terminated; -ENOBUFS when cut short). */
int metrics_escape_label(const char *value, char *buf, size_t len);
/* Take the text (NUL-terminated, caller frees) or -ENOMEM if anything failed; resets t. */
int metrics_text_finish(struct metrics_text *t, char **ret, size_t *ret_len);
void metrics_text_done(struct metrics_text *t);

/* ---- the agent's own counters ---- */

struct metrics_counter;
struct metrics_histogram;

/* name must be a valid metric name ending in _total; label_key/label_value may both be NULL.
 * Returns NULL only on allocation failure or invalid arguments (then bumping it is a no-op). */
struct metrics_counter *metrics_counter_get(const char *name, const char *help, const char *label_key,
                                            const char *label_value);
void metrics_counter_add(struct metrics_counter *c, uint64_t n);
uint64_t metrics_counter_value(const struct metrics_counter *c);

/* A value that goes up and down (a state: 1/0, a count now). Same rules as counters, but for the name:
 * not ending in _total. Set from any thread. */
struct metrics_gauge;
struct metrics_gauge *metrics_gauge_get(const char *name, const char *help, const char *label_key,
                                        const char *label_value);
void metrics_gauge_set(struct metrics_gauge *g, double value);
double metrics_gauge_value(const struct metrics_gauge *g);

/* Latency histogram in seconds with fixed buckets 100µs … 10s. Same rules as counters. */
struct metrics_histogram *metrics_histogram_get(const char *name, const char *help, const char *label_key,
                                                const char *label_value);
void metrics_histogram_observe(struct metrics_histogram *h, double seconds);

/* Write every registered counter and histogram (families grouped, HELP/TYPE once each). */
void metrics_registry_format(struct metrics_text *t);

/* Whether s is a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*). */
bool metrics_valid_name(const char *s);
