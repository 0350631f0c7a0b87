/* SPDX-License-Identifier: Apache-2.0 */
/*
 * monitor_format_metrics against the formatter it replaced (monitor-format-ref.c, frozen): byte for
 * byte the same text on the benchmark's snapshot (8 GPUs x 256 processes) and on random snapshots with
 * every kind of value the old one handled — unknown memory, SM or GPU readings, unattributed and host
 * processes, several processes per container across GPUs, limits, both compatibility sets, label
 * values that need escaping or are not UTF-8, non-integer, negative, huge and NaN values.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "config/config.h"
#include "monitor-format-ref.h"
#include "monitor/monitor.h"
#include "util/util.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next(void) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return rng;
}

static unsigned pick(unsigned n) {
        return n ? (unsigned)(next() % n) : 0;
}

/* Names that exercise the escaper: plain, quotes, backslashes, newlines, UTF-8, broken UTF-8. */
static const char *const names[] = { "python3.10",
                                     "",
                                     "trainer",
                                     "a\"quoted\"",
                                     "back\\slash",
                                     "new\nline",
                                     "caf\xc3\xa9",
                                     "\xe2\x82\xac uro",
                                     "bad\xff byte",
                                     "cut \xe2\x82",
                                     "\xf0\x9f\x98\x80",
                                     "tab\there",
                                     "resnet50-distributed-worker-7-7f9c8d6b5-x2k4q" };

static const char *name(struct monitor_names *n) {
        const char *s = names[pick(ELEMENTSOF(names))];
        return monitor_names_intern(n, s, 255);
}

static void compare(const struct monitor_snapshot *s, unsigned compat) {
        char *a = NULL, *b = NULL;
        size_t la = 0, lb = 0;
        assert_int_equal(monitor_format_metrics(s, compat, "node-\"7\"", &a, &la), 0);
        assert_int_equal(monitor_format_metrics_ref(s, compat, "node-\"7\"", &b, &lb), 0);
        if (la != lb || memcmp(a, b, la) != 0) {
                size_t i = 0;
                while (i < la && i < lb && a[i] == b[i])
                        i++;
                size_t from = i > 200 ? i - 200 : 0;
                print_error("first difference at byte %zu (new %zu bytes, old %zu)\nnew: %.300s\nold: %.300s\n", i, la,
                            lb, a + from, b + from);
                fail();
        }
        free(a);
        free(b);
}

static void snapshot_free(struct monitor_snapshot *s) {
        free(s->gpus);
        free(s->procs);
        free(s->limits);
        monitor_names_free(s->names);
        free(s);
}

static const double odd_values[] = { 0.5, -3, 1e15, 123456789012345678.0, 1e-7, -0.0, 0.1 + 0.2 };

static struct monitor_snapshot *random_snapshot(void) {
        struct monitor_snapshot *s = calloc(1, sizeof *s);
        s->refs = 1;
        s->names = monitor_names_new();
        s->n_gpus = pick(9);
        s->gpus = calloc(s->n_gpus + 1, sizeof *s->gpus);
        for (size_t g = 0; g < s->n_gpus; g++) {
                struct monitor_gpu *mg = &s->gpus[g];
                *mg = (struct monitor_gpu){ .index = (unsigned)g * (1 + pick(3)),
                                            .healthy = pick(4) != 0,
                                            .memory_used = next() % (80ull << 30),
                                            .memory_total = pick(5) ? (16ull + pick(64)) << 30 : 0,
                                            .utilization = (int)pick(102) - 1,
                                            .temperature = (int)pick(100) - 1,
                                            .power_mw = pick(5) ? (int64_t)pick(400000) : -1,
                                            .allocated = pick(3) ? pick(101) / 100.0 : -1 };
                snprintf(mg->uuid, sizeof mg->uuid, "GPU-%08x-%s", (unsigned)next(), pick(6) ? "" : "\"x\\");
                strscpy(mg->name, names[pick(ELEMENTSOF(names))], sizeof mg->name);
        }
        s->n_procs = s->n_gpus ? pick(300) : 0;
        s->procs = calloc(s->n_procs + 1, sizeof *s->procs);
        for (size_t i = 0; i < s->n_procs; i++) {
                struct monitor_process *p = &s->procs[i];
                *p = (struct monitor_process){ .pid = (unsigned)next(),
                                               .gpu = pick((unsigned)s->n_gpus),
                                               .memory = pick(6) ? next() % (40ull << 30) : UINT64_MAX,
                                               .sm = (int)pick(120) - 1,
                                               .attributed = pick(8) != 0 };
                p->comm = name(s->names);
                p->namespace = name(s->names);
                p->pod = name(s->names);
                p->container = name(s->names);
                if (pick(5)) /* few container ids: several processes share one, on one GPU or more */
                        snprintf(p->cg.container_id, sizeof p->cg.container_id, "%064x", pick(12));
        }
        s->n_limits = pick(20);
        s->limits = calloc(s->n_limits + 1, sizeof *s->limits);
        for (size_t i = 0; i < s->n_limits; i++) {
                struct monitor_limit *l = &s->limits[i];
                *l = (struct monitor_limit){ .gpu_index = pick(10),
                                             .whole = pick(4) == 0,
                                             .memory_bytes = pick(3) ? (uint64_t)pick(64) << 28 : 0,
                                             .core_percent = pick(3) ? pick(150) : 0 };
                strscpy(l->namespace, names[pick(4)], sizeof l->namespace);
                strscpy(l->pod, names[pick(ELEMENTSOF(names))], sizeof l->pod);
                strscpy(l->container, names[pick(3)], sizeof l->container);
        }
        s->time_us = next() % (2000000000ull * 1000000ull);
        s->duration_s = pick(4) ? pick(1000) / 997.0 : odd_values[pick(ELEMENTSOF(odd_values))];
        s->errors = pick(3);
        return s;
}

static void test_random_snapshots(void **state) {
        (void)state;
        for (int round = 0; round < 300; round++) {
                struct monitor_snapshot *s = random_snapshot();
                compare(s, (unsigned)round % 4 == 0 ? 0 : CONFIG_COMPAT_POD_GPU_MEM | CONFIG_COMPAT_GPU_MANAGER);
                compare(s, CONFIG_COMPAT_GPU_MANAGER);
                snapshot_free(s);
        }
}

static void test_no_snapshot(void **state) {
        (void)state;
        compare(NULL, 0);
}

/* The benchmark's snapshot (bench/monitor-bench.c): 8 GPUs x 256 processes, 2 per container. */
static void test_bench_snapshot(void **state) {
        (void)state;
        struct monitor_snapshot *s = calloc(1, sizeof *s);
        s->refs = 1;
        s->n_gpus = 8;
        s->gpus = calloc(8, sizeof *s->gpus);
        s->n_procs = 8 * 256;
        s->procs = calloc(s->n_procs, sizeof *s->procs);
        s->names = monitor_names_new();
        for (unsigned g = 0; g < 8; g++) {
                s->gpus[g] = (struct monitor_gpu){ .index = g,
                                                   .healthy = true,
                                                   .memory_used = 9ull << 30,
                                                   .memory_total = 12066ull << 20,
                                                   .utilization = 87,
                                                   .temperature = 61,
                                                   .power_mw = 212000,
                                                   .allocated = 1 };
                snprintf(s->gpus[g].uuid, sizeof s->gpus[g].uuid, "GPU-%08x-1b2c", 0xa871201cu + g);
                strscpy(s->gpus[g].name, "TITAN V", sizeof s->gpus[g].name);
        }
        for (size_t i = 0; i < s->n_procs; i++) {
                struct monitor_process *p = &s->procs[i];
                unsigned c = (unsigned)(i / 2);
                *p = (struct monitor_process){ .pid = 100000 + (unsigned)i,
                                               .gpu = (unsigned)(i / 256),
                                               .memory = (40ull + i % 7) << 20,
                                               .sm = (int)(i % 5),
                                               .attributed = true };
                char buf[128];
                p->comm = monitor_names_intern(s->names, "python3.10", 63);
                snprintf(p->cg.container_id, sizeof p->cg.container_id, "%064x", c + 1);
                snprintf(buf, sizeof buf, "team-%u-training", c % 13);
                p->namespace = monitor_names_intern(s->names, buf, 255);
                snprintf(buf, sizeof buf, "resnet50-distributed-worker-%u-7f9c8d6b5-x2k4q", c);
                p->pod = monitor_names_intern(s->names, buf, 255);
                p->container = monitor_names_intern(s->names, "trainer", 255);
        }
        compare(s, 0);
        compare(s, CONFIG_COMPAT_POD_GPU_MEM | CONFIG_COMPAT_GPU_MANAGER);
        snapshot_free(s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_bench_snapshot),
                cmocka_unit_test(test_random_snapshots),
                cmocka_unit_test(test_no_snapshot),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
