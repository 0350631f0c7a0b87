/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the pure half of honouring the scheduler's assignment (src/agent/assign.c): reading a
 * pod's requests and assignment (gpuslice's annotation, gpu-manager's, gpushare's) and their
 * malformed forms; matching a kubelet call to its pod — one candidate, two identical pods (with
 * and without PodResources evidence), the tie-break order, IDs that contradict the assignment,
 * containers in order, a pod kubelet does not list, confirmed pods ignored.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/assign.h"
#include "helpers-assign.h"
#include "util/util.h"

static void test_parse_gpuslice(void **state) {
        (void)state;
        struct assign_pod p;
        char a[2048];
        assert_int_equal(
                test_assign_parse(
                        test_assign_pod_json(
                                "w", "2026-11-23T10:00:00Z", "{\"nvidia.com/gpu\":\"2\"}", NULL,
                                test_assign_annotation(a, sizeof a,
                                                       "{\"name\":\"a\",\"gpus\":[4,5],\"core\":100,\"mem\":0}", 42)),
                        &p),
                0);
        assert_string_equal(p.name, "w");
        assert_string_equal(p.uid, "uid-w");
        assert_string_equal(p.rv, "7");
        assert_int_equal(p.created, 1795428000); /* 2026-11-23T10:00:00Z */
        assert_int_equal(p.assumed_ms, 42);
        assert_int_equal(p.flags, CLUSTER_FLAG_GPUSLICE);
        assert_false(p.confirmed);
        assert_int_equal(p.n, 1);
        assert_int_equal(p.c[0].req[PLUGIN_WHOLE], 2);
        assert_int_equal(p.c[0].gpus, (1u << 4) | (1u << 5));
        /* 200 % of core = two whole GPUs through the core resource */
        assert_int_equal(
                test_assign_parse(
                        test_assign_pod_json(
                                "c", "2026-11-23T10:00:00Z", "{\"gpuslice.io/gpu-core\":\"200\"}", NULL,
                                test_assign_annotation(a, sizeof a,
                                                       "{\"name\":\"a\",\"gpus\":[0,1],\"core\":100,\"mem\":0}", 1)),
                        &p),
                0);
        assert_int_equal(p.c[0].req[PLUGIN_CORE], 200);
        /* confirmed */
        assert_int_equal(
                test_assign_parse(
                        test_assign_pod_json("k", "2026-11-23T10:00:00Z", "{\"nvidia.com/gpu\":\"1\"}", NULL,
                                             "{\"gpuslice.io/assignment\":\"{\\\"v\\\":1,\\\"node\\\":\\\"gpu-a\\\","
                                             "\\\"containers\\\":[{\\\"name\\\":\\\"a\\\",\\\"gpus\\\":[3]}]}\","
                                             "\"gpuslice.io/assigned\":\"true\"}"),
                        &p),
                0);
        assert_true(p.confirmed);
}

static void test_parse_profiles(void **state) {
        (void)state;
        struct assign_pod p;
        struct assign_names tn = { .name = { "nvidia.com/gpu", "tencent.com/vcuda-core", "tencent.com/vcuda-memory" } };
        json_t *j = test_assign_pod_json(
                "t", "2026-11-23T10:00:00Z", "{\"tencent.com/vcuda-core\":\"20\",\"tencent.com/vcuda-memory\":\"8\"}",
                NULL,
                "{\"tencent.com/predicate-gpu-idx-0\":\"1\",\"tencent.com/predicate-node\":\"gpu-a\","
                "\"tencent.com/predicate-time\":\"5000000\",\"tencent.com/gpu-assigned\":\"false\"}");
        assert_int_equal(assign_pod_parse(j, "gpu-a", &tn, &p), 0);
        assert_int_equal(p.flags, CLUSTER_FLAG_GPU_MANAGER);
        assert_int_equal(p.c[0].gpus, 1u << 1);
        assert_int_equal(p.assumed_ms, 5);
        assert_int_equal(p.c[0].req[PLUGIN_CORE], 20);
        /* another node's prediction is not ours */
        assert_int_equal(assign_pod_parse(j, "gpu-b", &tn, &p), -ENODATA);
        json_decref(j);

        struct assign_names an = { .name = { "nvidia.com/gpu", "", "aliyun.com/gpu-mem" } };
        j = test_assign_pod_json(
                "y", "2026-11-23T10:00:00Z", "{\"aliyun.com/gpu-mem\":\"2\"}", NULL,
                "{\"ALIYUN_COM_GPU_MEM_IDX\":\"3\",\"ALIYUN_COM_GPU_MEM_POD\":\"2\","
                "\"ALIYUN_COM_GPU_MEM_ASSIGNED\":\"false\",\"ALIYUN_COM_GPU_MEM_ASSUME_TIME\":\"9000000\"}");
        assert_int_equal(assign_pod_parse(j, "gpu-a", &an, &p), 0);
        assert_int_equal(p.flags, CLUSTER_FLAG_GPUSHARE);
        assert_int_equal(p.c[0].gpus, 1u << 3);
        assert_int_equal(p.c[0].req[PLUGIN_MEMORY], 2);
        assert_int_equal(p.assumed_ms, 9);
        json_decref(j);

        /* the extender's own annotation with the profile's: both flags get set */
        char a[2048];
        test_assign_annotation(a, sizeof a, "{\"name\":\"a\",\"gpus\":[1],\"core\":20,\"mem\":2048}", 3);
        a[strlen(a) - 1] = 0;
        strncat(a, ",\"tencent.com/gpu-assigned\":\"false\",\"tencent.com/predicate-gpu-idx-0\":\"1\"}",
                sizeof a - strlen(a) - 1);
        j = test_assign_pod_json("tt", "2026-11-23T10:00:00Z",
                                 "{\"tencent.com/vcuda-core\":\"20\",\"tencent.com/vcuda-memory\":\"8\"}", NULL, a);
        assert_int_equal(assign_pod_parse(j, "gpu-a", &tn, &p), 0);
        assert_int_equal(p.flags, CLUSTER_FLAG_GPUSLICE | CLUSTER_FLAG_GPU_MANAGER);
        json_decref(j);
}

static void test_parse_malformed(void **state) {
        (void)state;
        struct assign_pod p;
        char a[2048];
        const char *lim1 = "{\"nvidia.com/gpu\":\"1\"}";
        /* not ours / nothing assigned */
        assert_int_equal(test_assign_parse(test_assign_pod_json("n", "x", "{\"cpu\":\"1\"}", NULL, "{}"), &p),
                         -ENODATA);
        assert_int_equal(test_assign_parse(test_assign_pod_json("n", "x", lim1, NULL, "{}"), &p), -ENODATA);
        /* an assignment for another node */
        snprintf(a, sizeof a,
                 "{\"gpuslice.io/assignment\":\"{\\\"v\\\":1,\\\"node\\\":\\\"gpu-b\\\","
                 "\\\"containers\\\":[{\\\"name\\\":\\\"a\\\",\\\"gpus\\\":[3]}]}\"}");
        assert_int_equal(test_assign_parse(test_assign_pod_json("n", "x", lim1, NULL, a), &p), -ENODATA);
        /* clang-format off */
        static const char *const bad[] = {
                "not json",
                "{\"v\":2,\"node\":\"gpu-a\",\"containers\":[]}",
                "{\"v\":1,\"containers\":[]}",
                "{\"v\":1,\"node\":\"gpu-a\",\"containers\":[{\"name\":\"zz\",\"gpus\":[1]}]}",
                "{\"v\":1,\"node\":\"gpu-a\",\"containers\":[{\"name\":\"a\",\"gpus\":[1,2]}]}",
                "{\"v\":1,\"node\":\"gpu-a\",\"containers\":[{\"name\":\"a\",\"gpus\":[]}]}",
                "{\"v\":1,\"node\":\"gpu-a\",\"containers\":[{\"name\":\"a\",\"gpus\":[-1]}]}",
                "{\"v\":1,\"node\":\"gpu-a\",\"containers\":[{\"name\":\"a\",\"gpus\":[64]}]}",
                "{\"v\":1,\"node\":\"gpu-a\",\"containers\":[{\"name\":\"a\",\"gpus\":[\"1\"]}]}",
                "{\"v\":1,\"node\":\"gpu-a\",\"containers\":[{\"name\":\"a\",\"gpus\":[1]},{\"name\":\"a\",\"gpus\":[1]}]}",
                "{\"v\":1,\"node\":\"gpu-a\",\"v\":1,\"containers\":[]}",
        };
        /* clang-format on */
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                json_t *s = json_string(bad[i]);
                json_t *an = json_pack("{s:o}", "gpuslice.io/assignment", s);
                char *d = json_dumps(an, 0);
                json_decref(an);
                int r = test_assign_parse(test_assign_pod_json("m", "x", lim1, NULL, d), &p);
                free(d);
                if (r != -EINVAL)
                        fail_msg("case %zu (%s): %d", i, bad[i], r);
        }
        /* a whole-GPU assignment that names fewer GPUs than asked */
        assert_int_equal(
                test_assign_parse(
                        test_assign_pod_json("m", "x", "{\"nvidia.com/gpu\":\"2\"}", NULL,
                                             test_assign_annotation(a, sizeof a, "{\"name\":\"a\",\"gpus\":[1]}", 1)),
                        &p),
                -EINVAL);
        /* whole and fractional in one container; 150 %; a bad quantity */
        assert_int_equal(
                test_assign_parse(test_assign_pod_json(
                                          "m", "x", "{\"nvidia.com/gpu\":\"1\",\"gpuslice.io/gpu-core\":\"10\"}", NULL,
                                          test_assign_annotation(a, sizeof a, "{\"name\":\"a\",\"gpus\":[1]}", 1)),
                                  &p),
                -EINVAL);
        assert_int_equal(
                test_assign_parse(
                        test_assign_pod_json("m", "x", "{\"gpuslice.io/gpu-core\":\"150\"}", NULL,
                                             test_assign_annotation(a, sizeof a, "{\"name\":\"a\",\"gpus\":[1]}", 1)),
                        &p),
                -EINVAL);
        assert_int_equal(
                test_assign_parse(
                        test_assign_pod_json("m", "x", "{\"nvidia.com/gpu\":\"1k\"}", NULL,
                                             test_assign_annotation(a, sizeof a, "{\"name\":\"a\",\"gpus\":[1]}", 1)),
                        &p),
                -EINVAL);
        /* gpu-manager / gpushare indices */
        assert_int_equal(
                test_assign_parse(
                        test_assign_pod_json("m", "x", lim1, NULL, "{\"tencent.com/predicate-gpu-idx-0\":\"1,\"}"), &p),
                -EINVAL);
        assert_int_equal(test_assign_parse(test_assign_pod_json("m", "x", "{\"gpuslice.io/gpu-memory\":\"4\"}", NULL,
                                                                "{\"ALIYUN_COM_GPU_MEM_IDX\":\"x\"}"),
                                           &p),
                         -EINVAL);
        /* no name */
        json_t *j = json_loads("{\"metadata\":{}}", 0, NULL);
        assert_int_equal(assign_pod_parse(j, "gpu-a", &TEST_ASSIGN_NAMES, &p), -EINVAL);
        json_decref(j);
        /* finished pods hold nothing */
        j = test_assign_pod_json("f", "x", lim1, NULL,
                                 test_assign_annotation(a, sizeof a, "{\"name\":\"a\",\"gpus\":[1]}", 1));
        json_object_set_new(j, "status", json_pack("{s:s}", "phase", "Succeeded"));
        assert_int_equal(assign_pod_parse(j, "gpu-a", &TEST_ASSIGN_NAMES, &p), -ENODATA);
        json_decref(j);
}

static void test_match_single(void **state) {
        (void)state;
        struct assign_pod p[1];
        struct assign_decision d;
        test_assign_frac_pod(&p[0], "one", "2026-11-23T10:00:00Z", 1, 1);
        d = test_assign_expect(p, 1, NULL, PLUGIN_CORE, 40, false, 0, ASSIGN_MATCH);
        assert_int_equal(d.pod, 0);
        assert_int_equal(d.gpus, 1u << 1);
        assert_false(d.tie);
        /* another size: not this pod → node-local */
        d = test_assign_expect(p, 1, NULL, PLUGIN_CORE, 30, false, 0, ASSIGN_NONE);
        /* Allocate on the assigned GPU: honoured; on another: refused, naming both */
        d = test_assign_expect(p, 1, NULL, PLUGIN_MEMORY, 40, true, 1u << 1, ASSIGN_MATCH);
        d = test_assign_expect(p, 1, NULL, PLUGIN_MEMORY, 40, true, 1u << 0, ASSIGN_REFUSE);
        assert_non_null(strstr(d.why, "assigned GPU 1"));
        assert_non_null(strstr(d.why, "IDs are on GPU 0"));
        /* IDs spanning two GPUs contradict a one-GPU assignment */
        d = test_assign_expect(p, 1, NULL, PLUGIN_MEMORY, 40, true, 3, ASSIGN_REFUSE);
        /* once both halves were handed out, the pod is no candidate any more */
        p[0].c[0].done[PLUGIN_CORE] = p[0].c[0].done[PLUGIN_MEMORY] = true;
        assert_true(assign_pod_complete(&p[0]));
        d = test_assign_expect(p, 1, NULL, PLUGIN_CORE, 40, true, 1u << 1, ASSIGN_NONE);
        /* confirmed pods are never candidates */
        test_assign_frac_pod(&p[0], "one", "2026-11-23T10:00:00Z", 1, 1);
        p[0].confirmed = true;
        d = test_assign_expect(p, 1, NULL, PLUGIN_CORE, 40, true, 1u << 1, ASSIGN_NONE);
        /* bad calls */
        struct assign_call c = { .kind = PLUGIN_CORE, .size = 0 };
        assert_int_equal(assign_match(p, 1, NULL, &c, &d), -EINVAL);
        c = (struct assign_call){ .kind = _PLUGIN_KIND_MAX, .size = 1 };
        assert_int_equal(assign_match(p, 1, NULL, &c, &d), -EINVAL);
        assert_int_equal(assign_match(NULL, 1, NULL, &c, &d), -EINVAL);
}

/* The race of issue 11: two identical fractional pods, assigned GPU 0 and GPU 1. */
static void test_match_identical_pods(void **state) {
        (void)state;
        struct assign_pod p[2];
        struct assign_decision d;
        /* b was created first (kubelet admits it first) though listed second */
        test_assign_frac_pod(&p[0], "twin-a", "2026-11-23T10:00:01Z", 0, 100);
        test_assign_frac_pod(&p[1], "twin-b", "2026-11-23T10:00:00Z", 1, 200);

        /* no evidence: the order picks twin-b (older), and its GPU */
        d = test_assign_expect(p, 2, NULL, PLUGIN_CORE, 40, false, 0, ASSIGN_MATCH);
        assert_int_equal(d.pod, 1);
        assert_int_equal(d.gpus, 1u << 1);
        assert_true(d.tie);
        assert_int_equal(d.n_candidates, 2);

        /* Allocate: the IDs decide, whatever the order says — never the other pod's GPU */
        d = test_assign_expect(p, 2, NULL, PLUGIN_CORE, 40, true, 1u << 0, ASSIGN_MATCH);
        assert_int_equal(d.pod, 0);
        assert_int_equal(d.gpus, 1u << 0);
        assert_false(d.tie);
        d = test_assign_expect(p, 2, NULL, PLUGIN_CORE, 40, true, 1u << 2, ASSIGN_REFUSE); /* neither twin's GPU */
        assert_int_equal(d.pod, 1); /* names the first in order */

        /* PodResources: kubelet's pod manager lists twin-a only (it is being admitted; twin-b not
         * added yet): twin-a it is, although twin-b is older */
        struct assign_seen_container sc[2] = { { .ns = "ns", .pod = "twin-a", .container = "a" },
                                               { .ns = "ns", .pod = "other", .container = "x" } };
        struct assign_seen seen = { .n = 2, .c = sc };
        d = test_assign_expect(p, 2, &seen, PLUGIN_MEMORY, 40, false, 0, ASSIGN_MATCH);
        assert_int_equal(d.pod, 0);
        assert_int_equal(d.gpus, 1u << 0);
        assert_false(d.tie);
        /* kubelet then lists twin-a holding core: the memory call is still twin-a's (same container) */
        sc[0].holds[PLUGIN_CORE] = true;
        d = test_assign_expect(p, 2, &seen, PLUGIN_MEMORY, 40, false, 0, ASSIGN_MATCH);
        assert_int_equal(d.pod, 0);
        /* and its core call is over: a second 40 % core call is nobody's (twin-b not listed yet) */
        d = test_assign_expect(p, 2, &seen, PLUGIN_CORE, 40, false, 0, ASSIGN_NONE);
        /* twin-a complete, twin-b listed: twin-b, on its own GPU */
        sc[0].holds[PLUGIN_MEMORY] = true;
        strscpy(sc[1].pod, "twin-b", sizeof sc[1].pod);
        strscpy(sc[1].container, "a", sizeof sc[1].container);
        d = test_assign_expect(p, 2, &seen, PLUGIN_CORE, 40, false, 0, ASSIGN_MATCH);
        assert_int_equal(d.pod, 1);
        assert_int_equal(d.gpus, 1u << 1);
        /* kubelet lists neither: the call is another pod's (node-local) */
        seen.n = 0;
        (void)test_assign_expect(p, 2, &seen, PLUGIN_CORE, 40, false, 0, ASSIGN_NONE);
}

/* Tie-break: creation time, then assume time, then namespace/name, then uid. */
static void test_match_order(void **state) {
        (void)state;
        struct assign_pod p[3];
        struct assign_decision d;
        test_assign_frac_pod(&p[0], "c", "2026-11-23T10:00:00Z", 0, 300);
        test_assign_frac_pod(&p[1], "b", "2026-11-23T10:00:00Z", 1, 200);
        test_assign_frac_pod(&p[2], "a", "2026-11-23T10:00:00Z", 2, 200);
        d = test_assign_expect(p, 3, NULL, PLUGIN_CORE, 40, false, 0, ASSIGN_MATCH);
        assert_int_equal(d.pod, 2); /* same time, same assume time: name a */
        p[2].assumed_ms = 250;
        d = test_assign_expect(p, 3, NULL, PLUGIN_CORE, 40, false, 0, ASSIGN_MATCH);
        assert_int_equal(d.pod, 1); /* assume time */
        p[0].created--;
        d = test_assign_expect(p, 3, NULL, PLUGIN_CORE, 40, false, 0, ASSIGN_MATCH);
        assert_int_equal(d.pod, 0); /* creation time first */
        /* the same, whatever order the candidates come in */
        struct assign_pod q[3] = { p[2], p[0], p[1] };
        d = test_assign_expect(q, 3, NULL, PLUGIN_CORE, 40, false, 0, ASSIGN_MATCH);
        assert_string_equal(q[d.pod].name, "c");
        /* two pods on the same GPU: the Allocate ties, and either way the GPU is the assigned one */
        test_assign_frac_pod(&p[0], "x", "2026-11-23T10:00:00Z", 3, 1);
        test_assign_frac_pod(&p[1], "y", "2026-11-23T10:00:00Z", 3, 1);
        d = test_assign_expect(p, 2, NULL, PLUGIN_CORE, 40, true, 1u << 3, ASSIGN_MATCH);
        assert_true(d.tie);
        assert_int_equal(d.gpus, 1u << 3);
}

/* Containers are allocated in order: the second container's call matches only after the first's. */
static void test_match_container_order(void **state) {
        (void)state;
        struct assign_pod p;
        struct assign_decision d;
        char a[2048];
        assert_int_equal(
                test_assign_parse(test_assign_pod_json(
                                          "two", "2026-11-23T10:00:00Z", "{\"nvidia.com/gpu\":\"1\"}",
                                          "{\"nvidia.com/gpu\":\"2\"}",
                                          test_assign_annotation(
                                                  a, sizeof a,
                                                  "{\"name\":\"a\",\"gpus\":[0]},{\"name\":\"b\",\"gpus\":[2,3]}", 1)),
                                  &p),
                0);
        d = test_assign_expect(&p, 1, NULL, PLUGIN_WHOLE, 2, false, 0, -1);
        assert_int_equal(d.verdict, ASSIGN_NONE); /* container a first */
        d = test_assign_expect(&p, 1, NULL, PLUGIN_WHOLE, 1, true, 1u << 0, ASSIGN_MATCH);
        assert_int_equal(d.container, 0);
        p.c[0].done[PLUGIN_WHOLE] = true;
        d = test_assign_expect(&p, 1, NULL, PLUGIN_WHOLE, 2, true, (1u << 2) | (1u << 3), ASSIGN_MATCH);
        assert_int_equal(d.container, 1);
        /* whole GPUs: exactly the set, not a subset or another */
        d = test_assign_expect(&p, 1, NULL, PLUGIN_WHOLE, 2, true, (1u << 2) | (1u << 4), ASSIGN_REFUSE);
        char g[16];
        assert_string_equal(assign_format_gpus((1u << 2) | (1u << 4), g, sizeof g), "2,4");
        assert_string_equal(assign_format_gpus(0, g, sizeof g), "-");
}

/* Is the informer's cache enough for a call no cached candidate fits (assign_need_list)? */
static bool known_ab(const char *ns, const char *pod, void *u) {
        (*(unsigned *)u)++;
        return streq(ns, "ns") && (streq(pod, "a") || streq(pod, "b"));
}

static void test_need_list(void **state) {
        (void)state;
        unsigned asked = 0;
        long unknown = 7;
        struct assign_seen_container sc[3] = { { .ns = "ns", .pod = "a", .container = "x" },
                                               { .ns = "ns", .pod = "b", .container = "y" },
                                               { .ns = "ns", .pod = "c", .container = "z" } };
        struct assign_seen seen = { .n = 2, .c = sc };
        /* synced, and every pod kubelet lists is known: the cache answers */
        assert_false(assign_need_list(true, &seen, known_ab, &asked, &unknown));
        assert_int_equal(unknown, -1);
        assert_int_equal(asked, 2);
        /* kubelet lists nothing (or only known pods): no LIST either */
        seen.n = 0;
        assert_false(assign_need_list(true, &seen, known_ab, &asked, NULL));
        /* kubelet lists a pod the watch has not delivered: LIST, naming it */
        seen.n = 3;
        assert_true(assign_need_list(true, &seen, known_ab, &asked, &unknown));
        assert_int_equal(unknown, 2);
        /* not synced, or no PodResources answer: LIST (nothing tells the cache is complete) */
        seen.n = 2;
        asked = 0;
        assert_true(assign_need_list(false, &seen, known_ab, &asked, &unknown));
        assert_int_equal(unknown, -1);
        assert_true(assign_need_list(true, NULL, known_ab, &asked, &unknown));
        assert_true(assign_need_list(true, &seen, NULL, NULL, &unknown));
        assert_int_equal(asked, 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_gpuslice),        cmocka_unit_test(test_parse_profiles),
                cmocka_unit_test(test_parse_malformed),       cmocka_unit_test(test_match_single),
                cmocka_unit_test(test_match_identical_pods),  cmocka_unit_test(test_match_order),
                cmocka_unit_test(test_match_container_order), cmocka_unit_test(test_need_list),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
