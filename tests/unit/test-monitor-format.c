/* SPDX-License-Identifier: Apache-2.0 */
/* A monitor snapshot as Prometheus text (monitor_format_metrics) and process naming. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "config/config.h"
#include "engine/engine.h"
#include "monitor/monitor.h"
#include "util/util.h"

#define CID "3f1c2a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a"
#define UID "8c6e4f1a-2b3d-4c5e-9f7a-1b2c3d4e5f6a"

static struct monitor_gpu gpus[2];
static struct monitor_process procs[4];
static struct monitor_snapshot snap;

static struct monitor_process proc(unsigned pid, unsigned gpu, uint64_t mib, int sm, bool in_pod) {
        struct monitor_process p = { .pid = pid,
                                     .gpu = gpu,
                                     .memory = mib << 20,
                                     .sm = sm,
                                     .attributed = true,
                                     .comm = "python",
                                     .namespace = "",
                                     .pod = "",
                                     .container = "" };
        if (in_pod) {
                strscpy(p.cg.container_id, CID, sizeof p.cg.container_id);
                strscpy(p.cg.pod_uid, UID, sizeof p.cg.pod_uid);
                p.cg.qos = CGROUP_QOS_BURSTABLE;
                p.cg.runtime = CGROUP_RUNTIME_CONTAINERD;
                p.namespace = "ml";
                p.pod = "trainer-0";
                p.container = "worker";
        }
        return p;
}

static int setup(void **state) {
        (void)state;
        for (unsigned g = 0; g < 2; g++) {
                gpus[g] = (struct monitor_gpu){ .index = g,
                                                .healthy = true,
                                                .memory_used = (g + 1) << 30,
                                                .memory_total = 12066ull << 20,
                                                .utilization = 16,
                                                .temperature = 48,
                                                .power_mw = 43500,
                                                .allocated = -1 };
                snprintf(gpus[g].uuid, sizeof gpus[g].uuid, "GPU-%u", g);
                strscpy(gpus[g].name, "TITAN V", sizeof gpus[g].name);
        }
        gpus[1].healthy = false;
        gpus[1].utilization = gpus[1].temperature = -1;
        gpus[1].power_mw = -1;
        procs[0] = proc(3148, 0, 3887, 8, true);
        procs[1] = proc(11020, 0, 3887, 8, true);
        procs[2] = proc(41728, 0, 5133, -1, false); /* a host process, SM unknown */
        procs[3] = proc(999, 0, 100, 0, false);
        procs[3].memory = UINT64_MAX; /* memory unknown */
        procs[3].attributed = false;  /* vanished */
        snap = (struct monitor_snapshot){ .refs = 1,
                                          .n_gpus = 2,
                                          .gpus = gpus,
                                          .n_procs = 4,
                                          .procs = procs,
                                          .time_us = 1700000000000000ull,
                                          .duration_s = 0.002 };
        return 0;
}

static char *format(unsigned compat) {
        char *s;
        size_t n;
        assert_int_equal(monitor_format_metrics(&snap, compat, "node-7", &s, &n), 0);
        assert_int_equal(strlen(s), n);
        return s;
}

#define G0 "gpu_index=\"0\",gpu_uuid=\"GPU-0\",gpu_model=\"TITAN V\""

static void test_gpu_series(void **state) {
        (void)state;
        char *s = format(0);
        assert_non_null(strstr(s, "# TYPE gpuslice_gpu_memory_used_bytes gauge\ngpuslice_gpu_memory_used_bytes{" G0
                                  "} 1073741824\n"));
        assert_non_null(strstr(s, "gpuslice_gpu_memory_total_bytes{" G0 "} 12652118016\n"));
        assert_non_null(strstr(s, "gpuslice_gpu_utilization_ratio{" G0 "} 0.16\n"));
        assert_non_null(strstr(s, "gpuslice_gpu_temperature_celsius{" G0 "} 48\n"));
        assert_non_null(strstr(s, "gpuslice_gpu_power_watts{" G0 "} 43.5\n"));
        assert_non_null(strstr(s, "gpuslice_gpu_healthy{" G0 "} 1\n"));
        assert_non_null(
                strstr(s, "gpuslice_gpu_healthy{gpu_index=\"1\",gpu_uuid=\"GPU-1\",gpu_model=\"TITAN V\"} 0\n"));
        free(s);
}

static void test_unknowns_omitted(void **state) {
        (void)state;
        char *s = format(0);
        /* GPU 1's utilization, temperature, power are unknown; allocation is unknown for both */
        assert_null(strstr(s, "gpuslice_gpu_utilization_ratio{gpu_index=\"1\""));
        assert_null(strstr(s, "gpuslice_gpu_power_watts{gpu_index=\"1\""));
        assert_null(strstr(s, "gpuslice_gpu_allocated_ratio"));
        assert_null(strstr(s, "gpuslice_process_gpu_memory_used_bytes{pid=\"999\""));
        assert_null(strstr(s, "gpuslice_process_sm_utilization_ratio{pid=\"41728\""));
        free(s);
}

static void test_process_series(void **state) {
        (void)state;
        char *s = format(0);
        assert_non_null(
                strstr(s, "gpuslice_process_gpu_memory_used_bytes{pid=\"3148\",process=\"python\",namespace=\"ml\","
                          "pod=\"trainer-0\",container=\"worker\"," G0 "} 4075814912\n"));
        assert_non_null(strstr(s,
                               "gpuslice_process_gpu_memory_used_bytes{pid=\"41728\",process=\"python\",namespace=\"\","
                               "pod=\"\",container=\"\"," G0 "} 5382340608\n"));
        assert_non_null(strstr(s, "gpuslice_process_sm_utilization_ratio{pid=\"999\","));
        free(s);
}

static void test_container_sums(void **state) {
        (void)state;
        char *s = format(0);
        assert_non_null(strstr(
                s, "gpuslice_container_gpu_memory_used_bytes{namespace=\"ml\",pod=\"trainer-0\",container=\"worker\","
                   "container_id=\"" CID "\"," G0 "} 8151629824\n"));
        assert_non_null(strstr(
                s, "gpuslice_container_sm_utilization_ratio{namespace=\"ml\",pod=\"trainer-0\",container=\"worker\","
                   "container_id=\"" CID "\"," G0 "} 0.16\n"));
        /* one container series: host and vanished processes have none */
        const char *first = strstr(s, "gpuslice_container_gpu_memory_used_bytes{");
        assert_null(strstr(first + 1, "gpuslice_container_gpu_memory_used_bytes{"));
        free(s);
}

static void test_compat_off_by_default(void **state) {
        (void)state;
        char *s = format(0);
        assert_null(strstr(s, "pod_used_gpu_mem_MB"));
        assert_null(strstr(s, "container_gpu_utilization"));
        free(s);
}

static void test_compat_pod_mem(void **state) {
        (void)state;
        char *s = format(CONFIG_COMPAT_POD_GPU_MEM);
        assert_non_null(strstr(s, "# TYPE pod_used_gpu_mem_MB gauge\n"));
        assert_non_null(strstr(s, "pod_used_gpu_mem_MB{pod_name=\"trainer-0\",pod_namespace=\"ml\",gpu_uuid=\"GPU-0\","
                                  "gpu_name=\"TITAN V\",app_pid=\"11020\"} 3887\n"));
        assert_null(strstr(s, "app_pid=\"41728\"")); /* not in a pod */
        assert_null(strstr(s, "container_gpu_utilization"));
        free(s);
}

static void test_compat_gpu_manager(void **state) {
        (void)state;
        char *s = format(CONFIG_COMPAT_GPU_MANAGER);
        assert_non_null(strstr(s, "container_gpu_utilization{pod_name=\"trainer-0\",namespace=\"ml\",node=\"node-7\","
                                  "container_name=\"worker\"} 16\n"));
        assert_non_null(strstr(s, "container_gpu_memory_total{pod_name=\"trainer-0\",namespace=\"ml\",node=\"node-7\","
                                  "container_name=\"worker\"} 7774\n"));
        free(s);
}

static void test_compat_gpu_manager_sums_gpus(void **state) {
        (void)state;
        procs[2] = proc(41728, 1, 5133, 30, true); /* the same container, on the other GPU */
        char *s = format(CONFIG_COMPAT_GPU_MANAGER);
        assert_non_null(strstr(s, "container_gpu_memory_total{pod_name=\"trainer-0\",namespace=\"ml\",node=\"node-7\","
                                  "container_name=\"worker\"} 12907\n"));
        assert_non_null(strstr(s, "container_gpu_utilization{pod_name=\"trainer-0\",namespace=\"ml\",node=\"node-7\","
                                  "container_name=\"worker\"} 46\n"));
        /* still one series per container, and one HELP per family */
        const char *first = strstr(s, "container_gpu_memory_total{");
        assert_null(strstr(first + 1, "container_gpu_memory_total{"));
        assert_non_null(strstr(s, "# HELP container_gpu_utilization "));
        free(s);
}

/* Sorted as the sampler leaves them: namespace, pod, container, GPU. */
static struct monitor_limit limits[3];

static void set_limits(void) {
        limits[0] = (struct monitor_limit){ .gpu_index = 0, .memory_bytes = 2ull << 30, .core_percent = 30 };
        strscpy(limits[0].namespace, "ml", sizeof limits[0].namespace);
        strscpy(limits[0].pod, "infer", sizeof limits[0].pod);
        strscpy(limits[0].container, "main", sizeof limits[0].container);
        limits[1] = limits[0];
        limits[1].gpu_index = 1;
        limits[1].memory_bytes = 0; /* compute only on GPU 1 */
        limits[1].core_percent = 50;
        limits[2] = (struct monitor_limit){ .gpu_index = 1, .memory_bytes = 1ull << 30 }; /* memory only */
        strscpy(limits[2].namespace, "web", sizeof limits[2].namespace);
        strscpy(limits[2].pod, "cache", sizeof limits[2].pod);
        strscpy(limits[2].container, "redis", sizeof limits[2].container);
        snap.limits = limits;
        snap.n_limits = 3;
}

static void test_limits(void **state) {
        (void)state;
        set_limits();
        char *s = format(0);
        assert_non_null(strstr(s, "# TYPE gpuslice_container_gpu_memory_limit_bytes gauge\n"));
        assert_non_null(strstr(s, "gpuslice_container_gpu_memory_limit_bytes{namespace=\"ml\",pod=\"infer\","
                                  "container=\"main\",gpu_index=\"0\",gpu_uuid=\"GPU-0\",gpu_model=\"TITAN V\"} "
                                  "2147483648\n"));
        assert_non_null(strstr(s,
                               "gpuslice_container_gpu_core_share_ratio{namespace=\"ml\",pod=\"infer\","
                               "container=\"main\",gpu_index=\"1\",gpu_uuid=\"GPU-1\",gpu_model=\"TITAN V\"} 0.5\n"));
        /* no memory granted on GPU 1 to infer, no compute granted to cache: no series */
        assert_null(strstr(s, "gpuslice_container_gpu_memory_limit_bytes{namespace=\"ml\",pod=\"infer\","
                              "container=\"main\",gpu_index=\"1\""));
        assert_null(strstr(s, "gpuslice_container_gpu_core_share_ratio{namespace=\"web\""));
        assert_non_null(strstr(s, "gpuslice_container_gpu_memory_limit_bytes{namespace=\"web\",pod=\"cache\","
                                  "container=\"redis\",gpu_index=\"1\",gpu_uuid=\"GPU-1\",gpu_model=\"TITAN V\"} "
                                  "1073741824\n"));
        assert_null(strstr(s, "container_request_gpu")); /* compatibility off */
        free(s);
}

static void test_limits_none(void **state) {
        (void)state;
        char *s = format(CONFIG_COMPAT_GPU_MANAGER);
        assert_null(strstr(s, "gpuslice_container_gpu_memory_limit_bytes"));
        assert_null(strstr(s, "gpuslice_container_gpu_core_share_ratio"));
        assert_null(strstr(s, "container_request_gpu"));
        free(s);
}

static void test_compat_gpu_manager_requests(void **state) {
        (void)state;
        set_limits();
        char *s = format(CONFIG_COMPAT_GPU_MANAGER);
        /* summed over the container's GPUs: 30 + 50 percent, 2 GiB */
        assert_non_null(strstr(s,
                               "container_request_gpu_utilization{pod_name=\"infer\",namespace=\"ml\",node=\"node-7\","
                               "container_name=\"main\"} 80\n"));
        assert_non_null(strstr(s, "container_request_gpu_memory{pod_name=\"infer\",namespace=\"ml\",node=\"node-7\","
                                  "container_name=\"main\"} 2048\n"));
        assert_non_null(strstr(s,
                               "container_request_gpu_utilization{pod_name=\"cache\",namespace=\"web\",node=\"node-7\","
                               "container_name=\"redis\"} 0\n"));
        assert_non_null(strstr(s, "container_request_gpu_memory{pod_name=\"cache\",namespace=\"web\",node=\"node-7\","
                                  "container_name=\"redis\"} 1024\n"));
        const char *first = strstr(s, "container_request_gpu_memory{pod_name=\"infer\"");
        assert_null(strstr(first + 1, "container_request_gpu_memory{pod_name=\"infer\""));
        free(s);
}

static void test_own_gauges(void **state) {
        (void)state;
        char *s = format(0);
        assert_non_null(strstr(s, "gpuslice_monitor_last_sample_timestamp_seconds 1700000000\n"));
        assert_non_null(strstr(s, "gpuslice_monitor_sample_duration_seconds 0.002\n"));
        free(s);
}

static void test_no_snapshot(void **state) {
        (void)state;
        char *s;
        size_t n;
        assert_int_equal(monitor_format_metrics(NULL, 0, NULL, &s, &n), 0);
        assert_null(strstr(s, "gpuslice_gpu_"));
        free(s);
}

static void test_name_from_engine(void **state) {
        (void)state;
        struct monitor_names *nm = monitor_names_new();
        assert_non_null(nm);
        struct monitor_process p = proc(1, 0, 1, 0, true);
        struct engine_container c[2] = { 0 };
        strscpy(c[1].id, CID, sizeof c[1].id);
        strscpy(c[1].name, "trainer", sizeof c[1].name);
        assert_int_equal(monitor_name_process(nm, &p, c, 2), 0);
        assert_string_equal(p.container, "trainer");
        assert_string_equal(p.pod, UID); /* no pod name known: the uid */
        strscpy(c[1].pod_name, "p", sizeof c[1].pod_name);
        strscpy(c[1].pod_namespace, "ns", sizeof c[1].pod_namespace);
        strscpy(c[1].container_name, "main", sizeof c[1].container_name);
        assert_int_equal(monitor_name_process(nm, &p, c, 2), 0);
        assert_string_equal(p.namespace, "ns");
        assert_string_equal(p.pod, "p");
        assert_string_equal(p.container, "main");
        /* a second process of the same container shares the pool's strings */
        struct monitor_process q = proc(2, 1, 1, 0, true);
        assert_int_equal(monitor_name_process(nm, &q, c, 2), 0);
        assert_ptr_equal(q.pod, p.pod);
        assert_ptr_equal(q.container, p.container);
        monitor_names_free(nm);
}

static void test_name_fallback_ids(void **state) {
        (void)state;
        struct monitor_names *nm = monitor_names_new();
        assert_non_null(nm);
        struct monitor_process p = proc(1, 0, 1, 0, true);
        assert_int_equal(monitor_name_process(nm, &p, NULL, 0), 0);
        assert_string_equal(p.namespace, "");
        assert_string_equal(p.pod, UID);
        assert_string_equal(p.container, "3f1c2a9b8d7e");
        p.attributed = false;
        assert_int_equal(monitor_name_process(nm, &p, NULL, 0), 0);
        assert_string_equal(p.pod, "");
        assert_string_equal(p.container, "");
        monitor_names_free(nm);
}

static void test_names_intern(void **state) {
        (void)state;
        struct monitor_names *nm = monitor_names_new();
        assert_non_null(nm);
        char a[16], b[16];
        strscpy(a, "trainer", sizeof a);
        strscpy(b, "trainer", sizeof b);
        const char *x = monitor_names_intern(nm, a, 255), *y = monitor_names_intern(nm, b, 255);
        assert_ptr_equal(x, y);
        assert_ptr_not_equal(x, a);
        assert_string_equal(x, "trainer");
        /* max_len cuts, and the cut string is its own entry */
        const char *cut = monitor_names_intern(nm, "trainer", 5);
        assert_string_equal(cut, "train");
        assert_ptr_not_equal(cut, x);
        assert_ptr_equal(monitor_names_intern(nm, "train", 255), cut);
        assert_string_equal(monitor_names_intern(nm, "", 255), "");
        assert_null(monitor_names_intern(nm, NULL, 255));
        assert_null(monitor_names_intern(NULL, "x", 255));
        monitor_names_free(nm);
        assert_null(monitor_names_free(NULL));
}

static void test_names_grow_and_big(void **state) {
        (void)state;
        struct monitor_names *nm = monitor_names_new();
        assert_non_null(nm);
        /* past the first table (64) and the first chunk (4 KiB); earlier pointers stay valid */
        const char *first = monitor_names_intern(nm, "pod-0", 255);
        const char *p[1000];
        for (unsigned i = 0; i < 1000; i++) {
                char buf[64];
                snprintf(buf, sizeof buf, "resnet50-distributed-worker-%u", i);
                p[i] = monitor_names_intern(nm, buf, 255);
                assert_non_null(p[i]);
        }
        char *big = malloc(10000);
        assert_non_null(big);
        memset(big, 'x', 9999);
        big[9999] = '\0';
        const char *bp = monitor_names_intern(nm, big, SIZE_MAX);
        assert_non_null(bp);
        assert_int_equal(strlen(bp), 9999);
        const char *after = monitor_names_intern(nm, "after-the-big-one", 255);
        for (unsigned i = 0; i < 1000; i++) {
                char buf[64];
                snprintf(buf, sizeof buf, "resnet50-distributed-worker-%u", i);
                assert_string_equal(p[i], buf);
                assert_ptr_equal(monitor_names_intern(nm, buf, 255), p[i]);
        }
        assert_string_equal(first, "pod-0");
        assert_ptr_equal(monitor_names_intern(nm, big, SIZE_MAX), bp);
        assert_ptr_equal(monitor_names_intern(nm, "after-the-big-one", 255), after);
        assert_true(monitor_names_size(nm) > 10000 + 1000 * 30);
        free(big);
        monitor_names_free(nm);
}

static void test_sort(void **state) {
        (void)state;
        struct monitor_process ps[3] = { proc(5, 1, 10, 0, false), proc(7, 0, 1, 0, false), proc(6, 0, 20, 0, false) };
        struct monitor_snapshot s = { .n_procs = 3, .procs = ps };
        monitor_sort_processes(&s);
        assert_int_equal(ps[0].pid, 6);
        assert_int_equal(ps[1].pid, 7);
        assert_int_equal(ps[2].pid, 5);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup(test_gpu_series, setup),
                cmocka_unit_test_setup(test_unknowns_omitted, setup),
                cmocka_unit_test_setup(test_process_series, setup),
                cmocka_unit_test_setup(test_container_sums, setup),
                cmocka_unit_test_setup(test_compat_off_by_default, setup),
                cmocka_unit_test_setup(test_compat_pod_mem, setup),
                cmocka_unit_test_setup(test_compat_gpu_manager, setup),
                cmocka_unit_test_setup(test_compat_gpu_manager_sums_gpus, setup),
                cmocka_unit_test_setup(test_limits, setup),
                cmocka_unit_test_setup(test_limits_none, setup),
                cmocka_unit_test_setup(test_compat_gpu_manager_requests, setup),
                cmocka_unit_test_setup(test_own_gauges, setup),
                cmocka_unit_test(test_no_snapshot),
                cmocka_unit_test(test_name_from_engine),
                cmocka_unit_test(test_name_fallback_ids),
                cmocka_unit_test(test_sort),
                cmocka_unit_test(test_names_intern),
                cmocka_unit_test(test_names_grow_and_big),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
