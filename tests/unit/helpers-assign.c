/* SPDX-License-Identifier: Apache-2.0 */
/*
 * helpers-assign — fixtures of test-assign.c (see helpers-assign.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "helpers-assign.h"

const struct assign_names TEST_ASSIGN_NAMES = { .name = { "nvidia.com/gpu", "gpuslice.io/gpu-core",
                                                          "gpuslice.io/gpu-memory" } };

json_t *test_assign_pod_json(const char *name, const char *created, const char *limits_a, const char *limits_b,
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

char *test_assign_annotation(char *buf, size_t len, const char *containers, long long t) {
        char inner[1024];
        snprintf(inner, sizeof inner, "{\"v\":1,\"node\":\"gpu-a\",\"time\":%lld,\"containers\":[%s]}", t, containers);
        json_t *s = json_string(inner);
        char *d = json_dumps(s, JSON_ENCODE_ANY);
        assert_non_null(d);
        snprintf(buf, len, "{\"gpuslice.io/assignment\":%s,\"gpuslice.io/assigned\":\"false\"}", d);
        free(d);
        json_decref(s);
        return buf;
}

int test_assign_parse(json_t *j, struct assign_pod *p) {
        int r = assign_pod_parse(j, "gpu-a", &TEST_ASSIGN_NAMES, p);
        json_decref(j);
        return r;
}

void test_assign_frac_pod(struct assign_pod *p, const char *name, const char *created, int gpu, long long t) {
        char a[2048], c[128];
        snprintf(c, sizeof c, "{\"name\":\"a\",\"gpus\":[%d],\"core\":40,\"mem\":10240}", gpu);
        json_t *j = test_assign_pod_json(name, created,
                                         "{\"gpuslice.io/gpu-core\":\"40\",\"gpuslice.io/gpu-memory\":\"40\"}", NULL,
                                         test_assign_annotation(a, sizeof a, c, t));
        assert_int_equal(test_assign_parse(j, p), 0);
}

struct assign_decision test_assign_expect(const struct assign_pod *pods, size_t n, const struct assign_seen *seen,
                                          enum plugin_kind kind, unsigned size, bool allocate, uint64_t ids,
                                          int verdict) {
        struct assign_call c = { .kind = kind, .size = size, .allocate = allocate, .ids_gpus = ids };
        struct assign_decision d;
        assert_int_equal(assign_match(pods, n, seen, &c, &d), 0);
        if (verdict >= 0 && (int)d.verdict != verdict)
                fail_msg("%s of %u IDs: verdict %d, wanted %d (%s)", allocate ? "Allocate" : "GetPreferredAllocation",
                         size, (int)d.verdict, verdict, d.why);
        return d;
}
