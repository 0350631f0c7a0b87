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
#include "util/util.h"

static const struct assign_names NAMES = { .name = { "nvidia.com/gpu", "gpuslice.io/gpu-core",
                                                     "gpuslice.io/gpu-memory" } };

/* A pod object: containers "a" (and "b" when limits_b) with limits; annotations from a JSON text. */
static json_t *pod_json(const char *name, const char *created, const char *limits_a, const char *limits_b,
                        const char *annotations) {
        char text[4096];
        snprintf(text, sizeof text,
                 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\",\"uid\":\"uid-%s\",\"resourceVersion\":\"7\","
                 "\"creationTimestamp\":\"%s\",\"annotations\":%s},"
                 "\"spec\":{\"nodeName\":\"gpu-a\",\"containers\":[{\"name\":\"a\",\"resources\":{\"limits\":%s}}%s%s%"
                 "s]}}",
                 name, name, created, annotations, limits_a,
                 limits_b ? ",{\"name\":\"b\",\"resources\":{\"limits\":" : "", limits_b ? limits_b : "",
                 limits_b ? "}}" : "");
        json_error_t e;
        json_t *j = json_loads(text, 0, &e);
        if (!j)
                fail_msg("bad test JSON: %s: %s", e.text, text);
        return j;
}

static char *asg(char *buf, size_t len, const char *containers, long long t) {
        char inner[1024];
        snprintf(inner, sizeof inner, "{\"v\":1,\"node\":\"gpu-a\",\"time\":%lld,\"containers\":[%s]}", t, containers);
        json_t *s = json_string(inner);
        char *d = json_dumps(s, JSON_ENCODE_ANY);
        snprintf(buf, len, "{\"gpuslice.io/assignment\":%s,\"gpuslice.io/assigned\":\"false\"}", d);
        free(d);
        json_decref(s);
        return buf;
}

static int parse(json_t *j, struct assign_pod *p) {
        int r = assign_pod_parse(j, "gpu-a", &NAMES, p);
        json_decref(j);
        return r;
}

/* A fractional pod: 40 % + 40 memory units on one GPU. */
static void frac_pod(struct assign_pod *p, const char *name, const char *created, int gpu, long long t) {
        char a[2048], c[128];
        snprintf(c, sizeof c, "{\"name\":\"a\",\"gpus\":[%d],\"core\":40,\"mem\":10240}", gpu);
        assert_int_equal(
                parse(pod_json(name, created, "{\"gpuslice.io/gpu-core\":\"40\",\"gpuslice.io/gpu-memory\":\"40\"}",
                               NULL, asg(a, sizeof a, c, t)),
                      p),
                0);
}

static void test_parse_gpuslice(void **state) {
        (void)state;
        struct assign_pod p;
        char a[2048];
        assert_int_equal(parse(pod_json("w", "2026-11-23T10:00:00Z", "{\"nvidia.com/gpu\":\"2\"}", NULL,
                                        asg(a, sizeof a, "{\"name\":\"a\",\"gpus\":[4,5],\"core\":100,\"mem\":0}", 42)),
                               &p),
                         0);
        assert_string_equal(p.name, "w");
        assert_string_equal(p.uid, "uid-w");
        assert_string_equal(p.rv, "7");
        assert_int_equal(p.created, 1795428000); /* 2026-11-23T10:00:00Z */
        assert_int_equal(p.assumed_ms, 42);
        assert_int_equal(p.flags, ASSIGN_FLAG_GPUSLICE);
        assert_false(p.confirmed);
        assert_int_equal(p.n, 1);
        assert_int_equal(p.c[0].req[PLUGIN_WHOLE], 2);
        assert_int_equal(p.c[0].n_gpus, 2);
        assert_int_equal(p.c[0].gpus[0], 4);
        assert_int_equal(p.c[0].gpus[1], 5);
        /* 200 % of core = two whole GPUs through the core resource */
        assert_int_equal(parse(pod_json("c", "2026-11-23T10:00:00Z", "{\"gpuslice.io/gpu-core\":\"200\"}", NULL,
                                        asg(a, sizeof a, "{\"name\":\"a\",\"gpus\":[0,1],\"core\":100,\"mem\":0}", 1)),
                               &p),
                         0);
        assert_int_equal(p.c[0].req[PLUGIN_CORE], 200);
        /* confirmed */
        assert_int_equal(parse(pod_json("k", "2026-11-23T10:00:00Z", "{\"nvidia.com/gpu\":\"1\"}", NULL,
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
        json_t *j = pod_json("t", "2026-11-23T10:00:00Z",
                             "{\"tencent.com/vcuda-core\":\"20\",\"tencent.com/vcuda-memory\":\"8\"}", NULL,
                             "{\"tencent.com/predicate-gpu-idx-0\":\"1\",\"tencent.com/predicate-node\":\"gpu-a\","
                             "\"tencent.com/predicate-time\":\"5000000\",\"tencent.com/gpu-assigned\":\"false\"}");
        assert_int_equal(assign_pod_parse(j, "gpu-a", &tn, &p), 0);
        assert_int_equal(p.flags, ASSIGN_FLAG_GPU_MANAGER);
        assert_int_equal(p.c[0].gpus[0], 1);
        assert_int_equal(p.assumed_ms, 5);
        assert_int_equal(p.c[0].req[PLUGIN_CORE], 20);
        /* another node's prediction is not ours */
        assert_int_equal(assign_pod_parse(j, "gpu-b", &tn, &p), -ENODATA);
        json_decref(j);

        struct assign_names an = { .name = { "nvidia.com/gpu", "", "aliyun.com/gpu-mem" } };
        j = pod_json("y", "2026-11-23T10:00:00Z", "{\"aliyun.com/gpu-mem\":\"2\"}", NULL,
                     "{\"ALIYUN_COM_GPU_MEM_IDX\":\"3\",\"ALIYUN_COM_GPU_MEM_POD\":\"2\","
                     "\"ALIYUN_COM_GPU_MEM_ASSIGNED\":\"false\",\"ALIYUN_COM_GPU_MEM_ASSUME_TIME\":\"9000000\"}");
        assert_int_equal(assign_pod_parse(j, "gpu-a", &an, &p), 0);
        assert_int_equal(p.flags, ASSIGN_FLAG_GPUSHARE);
        assert_int_equal(p.c[0].gpus[0], 3);
        assert_int_equal(p.c[0].req[PLUGIN_MEMORY], 2);
        assert_int_equal(p.assumed_ms, 9);
        json_decref(j);

        /* the extender's own annotation with the profile's: both flags get set */
        char a[2048];
        asg(a, sizeof a, "{\"name\":\"a\",\"gpus\":[1],\"core\":20,\"mem\":2048}", 3);
        a[strlen(a) - 1] = 0;
        strncat(a, ",\"tencent.com/gpu-assigned\":\"false\",\"tencent.com/predicate-gpu-idx-0\":\"1\"}",
                sizeof a - strlen(a) - 1);
        j = pod_json("tt", "2026-11-23T10:00:00Z",
                     "{\"tencent.com/vcuda-core\":\"20\",\"tencent.com/vcuda-memory\":\"8\"}", NULL, a);
        assert_int_equal(assign_pod_parse(j, "gpu-a", &tn, &p), 0);
        assert_int_equal(p.flags, ASSIGN_FLAG_GPUSLICE | ASSIGN_FLAG_GPU_MANAGER);
        json_decref(j);
}

static void test_parse_malformed(void **state) {
        (void)state;
        struct assign_pod p;
        char a[2048];
        const char *lim1 = "{\"nvidia.com/gpu\":\"1\"}";
        /* not ours / nothing assigned */
        assert_int_equal(parse(pod_json("n", "x", "{\"cpu\":\"1\"}", NULL, "{}"), &p), -ENODATA);
        assert_int_equal(parse(pod_json("n", "x", lim1, NULL, "{}"), &p), -ENODATA);
        /* an assignment for another node */
        snprintf(a, sizeof a,
                 "{\"gpuslice.io/assignment\":\"{\\\"v\\\":1,\\\"node\\\":\\\"gpu-b\\\","
                 "\\\"containers\\\":[{\\\"name\\\":\\\"a\\\",\\\"gpus\\\":[3]}]}\"}");
        assert_int_equal(parse(pod_json("n", "x", lim1, NULL, a), &p), -ENODATA);
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
                int r = parse(pod_json("m", "x", lim1, NULL, d), &p);
                free(d);
                if (r != -EINVAL)
                        fail_msg("case %zu (%s): %d", i, bad[i], r);
        }
        /* a whole-GPU assignment that names fewer GPUs than asked */
        assert_int_equal(parse(pod_json("m", "x", "{\"nvidia.com/gpu\":\"2\"}", NULL,
                                        asg(a, sizeof a, "{\"name\":\"a\",\"gpus\":[1]}", 1)),
                               &p),
                         -EINVAL);
        /* whole and fractional in one container; 150 %; a bad quantity */
        assert_int_equal(parse(pod_json("m", "x", "{\"nvidia.com/gpu\":\"1\",\"gpuslice.io/gpu-core\":\"10\"}", NULL,
                                        asg(a, sizeof a, "{\"name\":\"a\",\"gpus\":[1]}", 1)),
                               &p),
                         -EINVAL);
        assert_int_equal(parse(pod_json("m", "x", "{\"gpuslice.io/gpu-core\":\"150\"}", NULL,
                                        asg(a, sizeof a, "{\"name\":\"a\",\"gpus\":[1]}", 1)),
                               &p),
                         -EINVAL);
        assert_int_equal(parse(pod_json("m", "x", "{\"nvidia.com/gpu\":\"1k\"}", NULL,
                                        asg(a, sizeof a, "{\"name\":\"a\",\"gpus\":[1]}", 1)),
                               &p),
                         -EINVAL);
        /* gpu-manager / gpushare indices */
        assert_int_equal(parse(pod_json("m", "x", lim1, NULL, "{\"tencent.com/predicate-gpu-idx-0\":\"1,\"}"), &p),
                         -EINVAL);
        assert_int_equal(parse(pod_json("m", "x", "{\"gpuslice.io/gpu-memory\":\"4\"}", NULL,
                                        "{\"ALIYUN_COM_GPU_MEM_IDX\":\"x\"}"),
                               &p),
                         -EINVAL);
        /* no name */
        json_t *j = json_loads("{\"metadata\":{}}", 0, NULL);
        assert_int_equal(assign_pod_parse(j, "gpu-a", &NAMES, &p), -EINVAL);
        json_decref(j);
        /* finished pods hold nothing */
        j = pod_json("f", "x", lim1, NULL, asg(a, sizeof a, "{\"name\":\"a\",\"gpus\":[1]}", 1));
        json_object_set_new(j, "status", json_pack("{s:s}", "phase", "Succeeded"));
        assert_int_equal(assign_pod_parse(j, "gpu-a", &NAMES, &p), -ENODATA);
        json_decref(j);
}

static struct assign_call call(enum plugin_kind kind, unsigned size, bool allocate, uint64_t ids) {
        return (struct assign_call){ .kind = kind, .size = size, .allocate = allocate, .ids_gpus = ids };
}

static void test_match_single(void **state) {
        (void)state;
        struct assign_pod p[1];
        struct assign_decision d;
        frac_pod(&p[0], "one", "2026-11-23T10:00:00Z", 1, 1);
        struct assign_call c = call(PLUGIN_CORE, 40, false, 0);
        assert_int_equal(assign_match(p, 1, NULL, &c, &d), 0);
        assert_int_equal(d.verdict, ASSIGN_MATCH);
        assert_int_equal(d.pod, 0);
        assert_int_equal(d.gpus, 1u << 1);
        assert_false(d.tie);
        /* another size: not this pod → node-local */
        c = call(PLUGIN_CORE, 30, false, 0);
        assert_int_equal(assign_match(p, 1, NULL, &c, &d), 0);
        assert_int_equal(d.verdict, ASSIGN_NONE);
        /* Allocate on the assigned GPU: honoured; on another: refused, naming both */
        c = call(PLUGIN_MEMORY, 40, true, 1u << 1);
        assert_int_equal(assign_match(p, 1, NULL, &c, &d), 0);
        assert_int_equal(d.verdict, ASSIGN_MATCH);
        c = call(PLUGIN_MEMORY, 40, true, 1u << 0);
        assert_int_equal(assign_match(p, 1, NULL, &c, &d), 0);
        assert_int_equal(d.verdict, ASSIGN_REFUSE);
        assert_non_null(strstr(d.why, "assigned GPU 1"));
        assert_non_null(strstr(d.why, "IDs are on GPU 0"));
        /* IDs spanning two GPUs contradict a one-GPU assignment */
        c = call(PLUGIN_MEMORY, 40, true, 3);
        assert_int_equal(assign_match(p, 1, NULL, &c, &d), 0);
        assert_int_equal(d.verdict, ASSIGN_REFUSE);
        /* once both halves were handed out, the pod is no candidate any more */
        p[0].c[0].done[PLUGIN_CORE] = p[0].c[0].done[PLUGIN_MEMORY] = true;
        assert_true(assign_pod_complete(&p[0]));
        c = call(PLUGIN_CORE, 40, true, 1u << 1);
        assert_int_equal(assign_match(p, 1, NULL, &c, &d), 0);
        assert_int_equal(d.verdict, ASSIGN_NONE);
        /* confirmed pods are never candidates */
        frac_pod(&p[0], "one", "2026-11-23T10:00:00Z", 1, 1);
        p[0].confirmed = true;
        assert_int_equal(assign_match(p, 1, NULL, &c, &d), 0);
        assert_int_equal(d.verdict, ASSIGN_NONE);
        /* bad calls */
        c = call(PLUGIN_CORE, 0, false, 0);
        assert_int_equal(assign_match(p, 1, NULL, &c, &d), -EINVAL);
        c = call(_PLUGIN_KIND_MAX, 1, false, 0);
        assert_int_equal(assign_match(p, 1, NULL, &c, &d), -EINVAL);
        assert_int_equal(assign_match(NULL, 1, NULL, &c, &d), -EINVAL);
}

/* The race of issue 11: two identical fractional pods, assigned GPU 0 and GPU 1. */
static void test_match_identical_pods(void **state) {
        (void)state;
        struct assign_pod p[2];
        struct assign_decision d;
        /* b was created first (kubelet admits it first) though listed second */
        frac_pod(&p[0], "twin-a", "2026-11-23T10:00:01Z", 0, 100);
        frac_pod(&p[1], "twin-b", "2026-11-23T10:00:00Z", 1, 200);

        /* no evidence: the order picks twin-b (older), and its GPU */
        struct assign_call c = call(PLUGIN_CORE, 40, false, 0);
        assert_int_equal(assign_match(p, 2, NULL, &c, &d), 0);
        assert_int_equal(d.verdict, ASSIGN_MATCH);
        assert_int_equal(d.pod, 1);
        assert_int_equal(d.gpus, 1u << 1);
        assert_true(d.tie);
        assert_int_equal(d.n_candidates, 2);

        /* Allocate: the IDs decide, whatever the order says — never the other pod's GPU */
        c = call(PLUGIN_CORE, 40, true, 1u << 0);
        assert_int_equal(assign_match(p, 2, NULL, &c, &d), 0);
        assert_int_equal(d.verdict, ASSIGN_MATCH);
        assert_int_equal(d.pod, 0);
        assert_int_equal(d.gpus, 1u << 0);
        assert_false(d.tie);
        c = call(PLUGIN_CORE, 40, true, 1u << 2); /* neither twin's GPU */
        assert_int_equal(assign_match(p, 2, NULL, &c, &d), 0);
        assert_int_equal(d.verdict, ASSIGN_REFUSE);
        assert_int_equal(d.pod, 1); /* names the first in order */

        /* PodResources: kubelet's pod manager lists twin-a only (it is being admitted; twin-b not
         * added yet): twin-a it is, although twin-b is older */
        struct assign_seen_container sc[2] = { { .ns = "ns", .pod = "twin-a", .container = "a" },
                                               { .ns = "ns", .pod = "other", .container = "x" } };
        struct assign_seen seen = { .n = 2, .c = sc };
        c = call(PLUGIN_MEMORY, 40, false, 0);
        assert_int_equal(assign_match(p, 2, &seen, &c, &d), 0);
        assert_int_equal(d.verdict, ASSIGN_MATCH);
        assert_int_equal(d.pod, 0);
        assert_int_equal(d.gpus, 1u << 0);
        assert_false(d.tie);
        /* kubelet then lists twin-a holding core: the memory call is still twin-a's (same container) */
        sc[0].holds[PLUGIN_CORE] = true;
        assert_int_equal(assign_match(p, 2, &seen, &c, &d), 0);
        assert_int_equal(d.pod, 0);
        /* and its core call is over: a second 40 % core call is nobody's (twin-b not listed yet) */
        c = call(PLUGIN_CORE, 40, false, 0);
        assert_int_equal(assign_match(p, 2, &seen, &c, &d), 0);
        assert_int_equal(d.verdict, ASSIGN_NONE);
        /* twin-a complete, twin-b listed: twin-b, on its own GPU */
        sc[0].holds[PLUGIN_MEMORY] = true;
        strscpy(sc[1].pod, "twin-b", sizeof sc[1].pod);
        strscpy(sc[1].container, "a", sizeof sc[1].container);
        assert_int_equal(assign_match(p, 2, &seen, &c, &d), 0);
        assert_int_equal(d.verdict, ASSIGN_MATCH);
        assert_int_equal(d.pod, 1);
        assert_int_equal(d.gpus, 1u << 1);
        /* kubelet lists neither: the call is another pod's (node-local) */
        seen.n = 0;
        assert_int_equal(assign_match(p, 2, &seen, &c, &d), 0);
        assert_int_equal(d.verdict, ASSIGN_NONE);
}

/* Tie-break: creation time, then assume time, then namespace/name, then uid. */
static void test_match_order(void **state) {
        (void)state;
        struct assign_pod p[3];
        struct assign_decision d;
        struct assign_call c = call(PLUGIN_CORE, 40, false, 0);
        frac_pod(&p[0], "c", "2026-11-23T10:00:00Z", 0, 300);
        frac_pod(&p[1], "b", "2026-11-23T10:00:00Z", 1, 200);
        frac_pod(&p[2], "a", "2026-11-23T10:00:00Z", 2, 200);
        assert_int_equal(assign_match(p, 3, NULL, &c, &d), 0);
        assert_int_equal(d.pod, 2); /* same time, same assume time: name a */
        p[2].assumed_ms = 250;
        assert_int_equal(assign_match(p, 3, NULL, &c, &d), 0);
        assert_int_equal(d.pod, 1); /* assume time */
        p[0].created--;
        assert_int_equal(assign_match(p, 3, NULL, &c, &d), 0);
        assert_int_equal(d.pod, 0); /* creation time first */
        /* the same, whatever order the candidates come in */
        struct assign_pod q[3] = { p[2], p[0], p[1] };
        assert_int_equal(assign_match(q, 3, NULL, &c, &d), 0);
        assert_string_equal(q[d.pod].name, "c");
        /* two pods on the same GPU: the Allocate ties, and either way the GPU is the assigned one */
        frac_pod(&p[0], "x", "2026-11-23T10:00:00Z", 3, 1);
        frac_pod(&p[1], "y", "2026-11-23T10:00:00Z", 3, 1);
        c = call(PLUGIN_CORE, 40, true, 1u << 3);
        assert_int_equal(assign_match(p, 2, NULL, &c, &d), 0);
        assert_int_equal(d.verdict, ASSIGN_MATCH);
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
                parse(pod_json("two", "2026-11-23T10:00:00Z", "{\"nvidia.com/gpu\":\"1\"}",
                               "{\"nvidia.com/gpu\":\"2\"}",
                               asg(a, sizeof a, "{\"name\":\"a\",\"gpus\":[0]},{\"name\":\"b\",\"gpus\":[2,3]}", 1)),
                      &p),
                0);
        struct assign_call c = call(PLUGIN_WHOLE, 2, false, 0);
        assert_int_equal(assign_match(&p, 1, NULL, &c, &d), 0);
        assert_int_equal(d.verdict, ASSIGN_NONE); /* container a first */
        c = call(PLUGIN_WHOLE, 1, true, 1u << 0);
        assert_int_equal(assign_match(&p, 1, NULL, &c, &d), 0);
        assert_int_equal(d.verdict, ASSIGN_MATCH);
        assert_int_equal(d.container, 0);
        p.c[0].done[PLUGIN_WHOLE] = true;
        c = call(PLUGIN_WHOLE, 2, true, (1u << 2) | (1u << 3));
        assert_int_equal(assign_match(&p, 1, NULL, &c, &d), 0);
        assert_int_equal(d.verdict, ASSIGN_MATCH);
        assert_int_equal(d.container, 1);
        /* whole GPUs: exactly the set, not a subset or another */
        c = call(PLUGIN_WHOLE, 2, true, (1u << 2) | (1u << 4));
        assert_int_equal(assign_match(&p, 1, NULL, &c, &d), 0);
        assert_int_equal(d.verdict, ASSIGN_REFUSE);
        char g[16];
        assert_string_equal(assign_format_gpus((1u << 2) | (1u << 4), g, sizeof g), "2,4");
        assert_string_equal(assign_format_gpus(0, g, sizeof g), "-");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_gpuslice),        cmocka_unit_test(test_parse_profiles),
                cmocka_unit_test(test_parse_malformed),       cmocka_unit_test(test_match_single),
                cmocka_unit_test(test_match_identical_pods),  cmocka_unit_test(test_match_order),
                cmocka_unit_test(test_match_container_order),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
