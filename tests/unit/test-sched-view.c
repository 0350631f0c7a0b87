/* SPDX-License-Identifier: Apache-2.0 */
/* The operator page's pure side (src/sched/view.h): the query parser and its refusals, what filter
 * said of a pending pod, the cluster and topology documents read from a model loaded from a snapshot. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "sched/codec.h"
#include "sched/view.h"
#include "util/util.h"

static int parse(const char *s, struct sched_view_query *q, struct gs_error *err) {
        return sched_view_query_parse(s, strlen(s), q, err);
}

static void test_query_valid(void **state) {
        (void)state;
        struct sched_view_query q;
        struct gs_error err = { 0 };
        assert_int_equal(parse("", &q, &err), 0);
        assert_string_equal(q.node, "");
        assert_false(q.has_since);
        assert_int_equal(parse("node=gpu-a.b&namespace=ml-1&model=A100+SXM%34&since=42", &q, &err), 0);
        assert_string_equal(q.node, "gpu-a.b");
        assert_string_equal(q.ns, "ml-1");
        assert_string_equal(q.model, "A100 SXM4");
        assert_true(q.has_since);
        assert_int_equal(q.since, 42);
        /* empty values are no filter; empty parts and a trailing '&' are nothing */
        assert_int_equal(parse("&node=&&namespace&since=&", &q, &err), 0);
        assert_string_equal(q.node, "");
        assert_string_equal(q.ns, "");
        assert_false(q.has_since);
        assert_int_equal(parse("since=18446744073709551615&model=caf%C3%A9", &q, &err), 0);
        assert_int_equal(q.since, UINT64_MAX);
        assert_string_equal(q.model, "caf\xc3\xa9");
        assert_int_equal(parse("n%6Fde=x", &q, &err), 0); /* an escaped key is the key */
        assert_string_equal(q.node, "x");
        assert_int_equal(parse("offset=20&limit=100000", &q, &err), 0);
        assert_int_equal(q.offset, 20);
        assert_int_equal(q.limit, 100000);
}

static void refused(const char *query, const char *why) {
        struct sched_view_query q;
        struct gs_error err = { 0 };
        int r = sched_view_query_parse(query, strlen(query), &q, &err);
        if (r != -EINVAL || !strstr(err.message, why))
                fail_msg("'%s': %d '%s' (want '%s')", query, r, err.message, why);
}

static void test_query_refused(void **state) {
        (void)state;
        refused("colour=red", "unknown query parameter 'colour' (known: node, namespace, model, since, offset, limit)");
        refused("offset=-1", "'offset': not a number of nodes");
        refused("limit=100001", "'limit': not a number of nodes (0..100000)");
        refused("limit=1e3", "'limit'");
        refused("node=a&node=b", "'node' given twice");
        refused("node=a&n%6fde=b", "'node' given twice");
        refused("node=Gpu-A", "'node': not part of a node name");
        refused("node=gpu_a", "'node'");
        refused("node=a%2Fb", "'node'");
        refused("namespace=a.b", "'namespace': not a namespace");
        refused("namespace=abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcd", "'namespace'");
        refused("model=a%0Ab", "'model'");
        refused("model=%FF", "'model'");
        refused("model=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "'model'"); /* 65 */
        refused("since=12x", "'since': not a generation number");
        refused("since=-1", "'since'");
        refused("since=18446744073709551616", "'since'");
        refused("since=+1", "'since'"); /* '+' is a space */
        refused("node=%", "'node': bad %-escape");
        refused("node=%4", "'node': bad %-escape");
        refused("node=%g0", "'node': bad %-escape");
        refused("%zz=1", "bad %-escape in a query parameter's name");
        refused("node=%00", "NUL");
        refused("no%00de=a", "unknown query parameter");
        refused("averyveryveryveryveryverylongparametername1234=1", "unknown query parameter");
        refused("x%01=1", "unknown query parameter 'x?'");
        char big[SCHED_VIEW_MAX_QUERY + 10];
        memset(big, 'a', sizeof big - 1);
        big[sizeof big - 1] = '\0';
        refused(big, "longer than 2048 bytes");
}

static void test_summary(void **state) {
        (void)state;
        struct sched_filter_summary s = { 0 };
        struct sched_ext_node_result r[4] = {
                { SCHED_NO_ROOM, "largest free GPU has 6 GiB, container main needs 8 GiB" },
                { SCHED_UNRESOLVABLE, "node publishes no GPUs" },
                { SCHED_NO_ROOM, "largest free GPU has 6 GiB, container main needs 8 GiB" },
                { SCHED_NO_ROOM, "largest free GPU has 2 GiB, container main needs 8 GiB" },
        };
        char *names[] = { "a", "b", "c", "d" };
        assert_true(sched_filter_summary_note(&s, r, names, 4, 1000));
        assert_int_equal(s.first_ns, 1000);
        assert_int_equal(s.unfit_since_ns, 1000);
        assert_int_equal(s.nodes, 4);
        assert_int_equal(s.no_room, 3);
        assert_int_equal(s.unresolvable, 1);
        assert_int_equal(s.n_reasons, 3);
        assert_int_equal(s.reason[0].nodes, 2);
        assert_string_equal(s.reason[0].node, "a");
        assert_string_equal(s.reason[2].text, "largest free GPU has 2 GiB, container main needs 8 GiB");
        /* the same answer later: nothing shown changed, the clock keeps running from the first */
        assert_false(sched_filter_summary_note(&s, r, names, 4, 2000));
        assert_int_equal(s.unfit_since_ns, 1000);
        assert_int_equal(s.last_ns, 2000);
        /* a fourth distinct reason is counted apart */
        r[1] = (struct sched_ext_node_result){ SCHED_NO_ROOM, "most free compute on one GPU is 20 %" };
        r[2] = (struct sched_ext_node_result){ SCHED_NO_ROOM, "something else" };
        assert_true(sched_filter_summary_note(&s, r, names, 4, 3000));
        assert_int_equal(s.n_reasons, 3);
        assert_int_equal(s.other_nodes, 1);
        /* a node fits: no longer unschedulable */
        r[0] = (struct sched_ext_node_result){ SCHED_FIT, NULL };
        assert_true(sched_filter_summary_note(&s, r, names, 4, 4000));
        assert_int_equal(s.unfit_since_ns, 0);
        assert_int_equal(s.fit, 1);
        assert_int_equal(s.first_ns, 1000);
}

/* Two nodes: a (2 x 16 GiB, PIX; GPU 1 lost to Xid 79) and b (4 x 40 GiB, NV2 pairs); pods: two
 * shares on a/0, one whole on b/0-1 (gpu-manager's annotation), one on b without an assignment. */
static const char snapshot[] =
        "{\"nodes\":["
        "{\"metadata\":{\"name\":\"a\",\"annotations\":{\"gpuslice.io/gpus\":\"{\\\"v\\\":1,\\\"driver\\\":\\\"535\\\","
        "\\\"gpus\\\":[{\\\"i\\\":0,\\\"uuid\\\":\\\"GPU-a0\\\",\\\"model\\\":\\\"Tesla T4\\\",\\\"mem\\\":16384,"
        "\\\"health\\\":\\\"ok\\\"},{\\\"i\\\":1,\\\"uuid\\\":\\\"GPU-a1\\\",\\\"model\\\":\\\"Tesla T4\\\","
        "\\\"mem\\\":16384,\\\"health\\\":\\\"xid 79\\\"}],\\\"links\\\":\\\"PIX\\\"}\"}}},"
        "{\"metadata\":{\"name\":\"b\",\"annotations\":{\"gpuslice.io/gpus\":\"{\\\"v\\\":1,"
        "\\\"gpus\\\":[{\\\"i\\\":0,\\\"uuid\\\":\\\"GPU-b0\\\",\\\"model\\\":\\\"NVIDIA A100\\\",\\\"mem\\\":40960,"
        "\\\"health\\\":\\\"ok\\\"},{\\\"i\\\":1,\\\"uuid\\\":\\\"GPU-b1\\\",\\\"model\\\":\\\"NVIDIA A100\\\","
        "\\\"mem\\\":40960,\\\"health\\\":\\\"ok\\\"},{\\\"i\\\":2,\\\"uuid\\\":\\\"GPU-b2\\\",\\\"model\\\":"
        "\\\"NVIDIA A100\\\",\\\"mem\\\":40960,\\\"health\\\":\\\"ok\\\"},{\\\"i\\\":3,\\\"uuid\\\":\\\"GPU-b3\\\","
        "\\\"model\\\":\\\"NVIDIA A100\\\",\\\"mem\\\":40960,\\\"health\\\":\\\"ok\\\"}],"
        "\\\"links\\\":\\\"NV2,SYS,SYS;SYS,SYS;NV2\\\"}\"}}}],"
        "\"pods\":["
        "{\"metadata\":{\"namespace\":\"team\",\"name\":\"s1\",\"uid\":\"u1\",\"annotations\":{\"gpuslice.io/"
        "assignment\":\"{\\\"v\\\":1,\\\"node\\\":\\\"a\\\",\\\"time\\\":1,\\\"containers\\\":[{\\\"name\\\":"
        "\\\"main\\\",\\\"gpus\\\":[0],\\\"core\\\":30,\\\"mem\\\":4096}]}\",\"gpuslice.io/assigned\":\"true\"}},"
        "\"spec\":{\"nodeName\":\"a\",\"containers\":[{\"name\":\"main\",\"resources\":{\"limits\":{"
        "\"gpuslice.io/gpu-core\":\"30\",\"gpuslice.io/gpu-memory\":\"16\"}}}]}},"
        "{\"metadata\":{\"namespace\":\"team\",\"name\":\"s2\",\"uid\":\"u2\",\"annotations\":{\"gpuslice.io/"
        "assignment\":\"{\\\"v\\\":1,\\\"node\\\":\\\"a\\\",\\\"time\\\":2,\\\"containers\\\":[{\\\"name\\\":"
        "\\\"main\\\",\\\"gpus\\\":[0],\\\"core\\\":20,\\\"mem\\\":2048}]}\"}},"
        "\"spec\":{\"nodeName\":\"a\",\"containers\":[{\"name\":\"main\",\"resources\":{\"limits\":{"
        "\"gpuslice.io/gpu-core\":\"20\",\"gpuslice.io/gpu-memory\":\"8\"}}}]}},"
        "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"w\",\"uid\":\"u3\",\"annotations\":{"
        "\"tencent.com/predicate-gpu-idx-0\":\"0,1\"}},"
        "\"spec\":{\"nodeName\":\"b\",\"containers\":[{\"name\":\"main\",\"resources\":{\"limits\":{"
        "\"tencent.com/vcuda-core\":\"200\"}}}]}},"
        "{\"metadata\":{\"namespace\":\"ml\",\"name\":\"i\",\"uid\":\"u4\"},"
        "\"spec\":{\"nodeName\":\"b\",\"containers\":[{\"name\":\"main\",\"resources\":{\"limits\":{"
        "\"gpuslice.io/gpu-memory\":\"4\"}}}]}}]}";

static struct sched_model *load(void) {
        struct sched_model *m;
        assert_int_equal(sched_model_new(&m), 0);
        sched_model_keep_details(m, true);
        struct cluster_units u;
        cluster_units_default(&u);
        size_t nn, np;
        struct gs_error err = { 0 };
        int r = sched_snapshot_load(m, snapshot, strlen(snapshot), &u, &nn, &np, &err);
        if (r < 0)
                fail_msg("snapshot: %s", err.message);
        assert_int_equal(nn, 2);
        assert_int_equal(np, 4);
        return m;
}

static json_t *cluster(struct sched_model *m, const char *query, const struct sched_view_pending *p, size_t np) {
        struct sched_view_query q;
        struct gs_error err = { 0 };
        assert_int_equal(sched_view_query_parse(query, strlen(query), &q, &err), 0);
        struct sched_view_state st = { .generation = 7, .ready = true, .now_ns = 5000000000ull };
        char *text;
        size_t len;
        assert_int_equal(sched_view_cluster(m, p, np, &q, &st, &text, &len), 0);
        assert_int_equal(strlen(text), len);
        json_error_t je;
        json_t *j = json_loads(text, 0, &je);
        if (!j)
                fail_msg("not JSON (%s at %d): %s", je.text, je.position, text);
        free(text);
        return j;
}

static json_t *gpu(json_t *doc, const char *node, int index) {
        size_t i;
        json_t *n;
        json_array_foreach(json_object_get(doc, "nodes"), i, n) {
                if (!streq(json_string_value(json_object_get(n, "name")), node))
                        continue;
                size_t k;
                json_t *g;
                json_array_foreach(json_object_get(n, "gpus"), k,
                                   g) if (json_integer_value(json_object_get(g, "index")) == index) return g;
        }
        return NULL;
}

static const char *holder_field(json_t *g, size_t i, const char *key) {
        return json_string_value(json_object_get(json_array_get(json_object_get(g, "holders"), i), key));
}

static void test_cluster_document(void **state) {
        (void)state;
        struct sched_model *m = load();
        json_t *d = cluster(m, "", NULL, 0);
        assert_int_equal(json_integer_value(json_object_get(d, "generation")), 7);
        assert_true(json_is_true(json_object_get(d, "ready")));
        json_t *t = json_object_get(d, "totals");
        assert_int_equal(json_integer_value(json_object_get(t, "nodes")), 2);
        assert_int_equal(json_integer_value(json_object_get(t, "gpus")), 6);
        assert_int_equal(json_integer_value(json_object_get(t, "gpus_healthy")), 5);
        /* a/0: two shares, oldest first, with the line a person reads */
        json_t *a0 = gpu(d, "a", 0);
        assert_int_equal(json_integer_value(json_object_get(a0, "memory_allocated_mib")), 6144);
        assert_int_equal(json_integer_value(json_object_get(a0, "core_allocated_percent")), 50);
        assert_int_equal(json_array_size(json_object_get(a0, "holders")), 2);
        assert_string_equal(holder_field(a0, 0, "name"), "s1");
        assert_string_equal(holder_field(a0, 0, "kind"), "share");
        assert_string_equal(holder_field(a0, 0, "what"), "30 % \xc2\xb7 4 GiB");
        json_t *h1 = json_array_get(json_object_get(a0, "holders"), 1);
        assert_true(json_is_false(json_object_get(h1, "confirmed")));
        assert_true(json_is_true(json_object_get(h1, "bound")));
        assert_true(json_is_null(json_object_get(a0, "whole_holder")));
        /* a/1: health as published */
        json_t *a1 = gpu(d, "a", 1);
        assert_string_equal(json_string_value(json_object_get(a1, "health")), "xid 79");
        assert_true(json_is_false(json_object_get(a1, "healthy")));
        assert_string_equal(json_string_value(json_object_get(a1, "model")), "Tesla T4");
        /* b/0 and b/1: held whole by gpu-manager's pod */
        json_t *b1 = gpu(d, "b", 1);
        assert_string_equal(holder_field(b1, 0, "kind"), "whole");
        assert_string_equal(holder_field(b1, 0, "what"), "whole GPU");
        assert_string_equal(holder_field(b1, 0, "source"), "gpu-manager");
        assert_string_equal(json_string_value(json_object_get(json_object_get(b1, "whole_holder"), "name")), "w");
        assert_int_equal(json_integer_value(json_object_get(b1, "memory_allocated_mib")), 40960);
        /* the pod without an assignment: counted where the fit puts it, flagged */
        int inferred = 0;
        for (int g = 0; g < 4; g++) {
                json_t *x = gpu(d, "b", g);
                for (size_t k = 0; k < json_array_size(json_object_get(x, "holders")); k++)
                        inferred += streq(holder_field(x, k, "name"), "i") &&
                                    json_is_true(json_object_get(json_array_get(json_object_get(x, "holders"), k),
                                                                 "inferred"));
        }
        assert_int_equal(inferred, 1);
        json_decref(d);
        sched_model_free(m);
}

/* A pod asking CPU alone (the extender keeps it to count its node's CPU) holds no GPU and is on no page of it. */
static void test_cpu_only_pod_not_shown(void **state) {
        (void)state;
        struct sched_model *m = load();
        json_t *d = cluster(m, "", NULL, 0);
        json_int_t unplaced = json_integer_value(json_object_get(json_object_get(d, "totals"), "unplaced_pods"));
        json_decref(d);
        struct sched_pod_info p = {
                .uid = "cpu", .ns = "d", .name = "cpu", .node = "b", .bound = true, .cpu_milli = 4000
        };
        assert_int_equal(sched_model_set_pod(m, &p), 0);
        assert_int_equal(sched_model_node(m, "b")->cpu_used, 4000);
        d = cluster(m, "", NULL, 0);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(d, "totals"), "unplaced_pods")), unplaced);
        char *text = json_dumps(d, JSON_COMPACT);
        assert_null(strstr(text, "\"cpu\""));
        free(text);
        json_decref(d);
        sched_model_free(m);
}

static void test_cluster_filters(void **state) {
        (void)state;
        struct sched_model *m = load();
        json_t *d = cluster(m, "namespace=ml", NULL, 0);
        assert_int_equal(json_array_size(json_object_get(d, "nodes")), 1); /* only b holds ml pods */
        assert_null(gpu(d, "b", 3));                                       /* and only its GPUs that do */
        assert_non_null(gpu(d, "b", 0));
        json_decref(d);
        d = cluster(m, "model=t4", NULL, 0);
        assert_int_equal(json_array_size(json_object_get(d, "nodes")), 1);
        assert_non_null(gpu(d, "a", 1));
        json_decref(d);
        d = cluster(m, "node=b", NULL, 0);
        assert_int_equal(json_array_size(json_object_get(d, "nodes")), 1);
        json_decref(d);
        /* a window of the nodes that show; the totals count them all */
        d = cluster(m, "offset=1&limit=1", NULL, 0);
        assert_int_equal(json_array_size(json_object_get(d, "nodes")), 1);
        assert_non_null(gpu(d, "b", 0));
        assert_int_equal(json_integer_value(json_object_get(d, "offset")), 1);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(d, "totals"), "nodes")), 2);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(d, "totals"), "gpus")), 6);
        json_decref(d);
        d = cluster(m, "offset=2", NULL, 0);
        assert_int_equal(json_array_size(json_object_get(d, "nodes")), 0);
        json_decref(d);
        d = cluster(m, "namespace=ml&offset=0&limit=1", NULL, 0); /* the window is of the nodes that show */
        assert_non_null(gpu(d, "b", 0));
        json_decref(d);
        d = cluster(m, "node=zz", NULL, 0);
        assert_int_equal(json_array_size(json_object_get(d, "nodes")), 0);
        json_decref(d);
        /* the generation the caller has: nothing but that */
        d = cluster(m, "since=7", NULL, 0);
        assert_true(json_is_true(json_object_get(d, "unchanged")));
        assert_null(json_object_get(d, "nodes"));
        json_decref(d);
        d = cluster(m, "since=6", NULL, 0);
        assert_non_null(json_object_get(d, "nodes"));
        json_decref(d);
        sched_model_free(m);
}

static void test_cluster_pending(void **state) {
        (void)state;
        struct sched_model *m = load();
        struct cluster_pod v = { .uid = "p1", .ns = "ml", .name = "big" };
        v.req.n = 1;
        v.req.c[0] = (struct cluster_container_req){ .mem_mib = 8192, .core = 50 };
        struct sched_filter_summary s = { 0 };
        struct sched_ext_node_result r[2] = {
                { SCHED_NO_ROOM, "largest free GPU has 6 GiB, container main needs 8 GiB" },
                { SCHED_NO_ROOM, "largest free GPU has 6 GiB, container main needs 8 GiB" }
        };
        char *names[] = { "a", "b" };
        sched_filter_summary_note(&s, r, names, 2, 3000000000ull);
        struct sched_view_pending p = { &v, &s };
        json_t *d = cluster(m, "", &p, 1);
        json_t *jp = json_array_get(json_object_get(d, "pending_pods"), 0);
        assert_string_equal(json_string_value(json_object_get(jp, "name")), "big");
        assert_string_equal(json_string_value(json_object_get(jp, "what")), "50 % \xc2\xb7 8 GiB");
        assert_int_equal(json_integer_value(json_object_get(jp, "memory_mib")), 8192);
        assert_int_equal(json_integer_value(json_object_get(jp, "unschedulable_since_ms")), 3000);
        assert_int_equal(json_integer_value(json_object_get(jp, "no_room")), 2);
        json_t *r0 = json_array_get(json_object_get(jp, "reasons"), 0);
        assert_int_equal(json_integer_value(json_object_get(r0, "nodes")), 2);
        assert_string_equal(json_string_value(json_object_get(r0, "example_node")), "a");
        json_decref(d);
        d = cluster(m, "namespace=team", &p, 1); /* pending pods are filtered by namespace too */
        assert_int_equal(json_array_size(json_object_get(d, "pending_pods")), 0);
        json_decref(d);
        sched_model_free(m);
}

/* Names and texts that JSON must escape, in both documents of the one writer: quotes, backslashes, control
 * characters, non-ASCII (kept as UTF-8), and bytes that are not UTF-8 (a filter reason cut mid-character:
 * U+FFFD). The snapshot is written by jansson, so the odd strings arrive as the API server would send them. */
static const char odd_model[] = "Tesla \"T4\" \\ tab\there \x01\x1f caf\xc3\xa9 \xe2\x9c\x93";
static const char odd_health[] = "xid 79: \"fell off the bus\"\nretry";
static const char odd_driver[] = "535 \"beta\"\\";

static struct sched_model *load_odd(void) {
        json_t *ann =
                json_pack("{s:i,s:s,s:[{s:i,s:s,s:s,s:i,s:s}],s:s}", "v", 1, "driver", odd_driver, "gpus", "i", 0,
                          "uuid", "GPU-\"0\"", "model", odd_model, "mem", 16384, "health", odd_health, "links", "");
        char *ann_text = json_dumps(ann, JSON_COMPACT);
        json_t *assign = json_pack("{s:i,s:s,s:i,s:[{s:s,s:[i],s:i,s:i}]}", "v", 1, "node", "a", "time", 1,
                                   "containers", "name", "main", "gpus", 0, "core", 30, "mem", 4096);
        char *assign_text = json_dumps(assign, JSON_COMPACT);
        json_t *snap = json_pack(
                "{s:[{s:{s:s,s:{s:s}}}],s:[{s:{s:s,s:s,s:s,s:{s:s,s:s}},s:{s:s,s:[{s:s,s:{s:{s:s,s:s}}}]}}]}", "nodes",
                "metadata", "name", "a", "annotations", "gpuslice.io/gpus", ann_text, "pods", "metadata", "namespace",
                "t\xc3\xa9\"am", "name", "s\"1\\\x02", "uid", "u1", "annotations", "gpuslice.io/assignment",
                assign_text, "gpuslice.io/assigned", "true", "spec", "nodeName", "a", "containers", "name", "main",
                "resources", "limits", "gpuslice.io/gpu-core", "30", "gpuslice.io/gpu-memory", "16");
        assert_non_null(snap);
        char *text = json_dumps(snap, JSON_COMPACT);
        struct sched_model *m;
        assert_int_equal(sched_model_new(&m), 0);
        sched_model_keep_details(m, true);
        struct cluster_units u;
        cluster_units_default(&u);
        size_t nn, np;
        struct gs_error err = { 0 };
        if (sched_snapshot_load(m, text, strlen(text), &u, &nn, &np, &err) < 0)
                fail_msg("snapshot: %s", err.message);
        assert_int_equal(nn, 1);
        assert_int_equal(np, 1);
        free(text);
        free(ann_text);
        free(assign_text);
        json_decref(snap);
        json_decref(ann);
        json_decref(assign);
        return m;
}

/* Every string of the node's GPU 0 and its one holder read back as it went in. */
static void assert_odd_strings(json_t *doc, const char *list) {
        json_t *n = json_array_get(json_object_get(doc, "nodes"), 0);
        assert_string_equal(json_string_value(json_object_get(n, "driver")), odd_driver);
        json_t *g = json_array_get(json_object_get(n, "gpus"), 0);
        assert_string_equal(json_string_value(json_object_get(g, "model")), odd_model);
        assert_string_equal(json_string_value(json_object_get(g, "health")), odd_health);
        assert_string_equal(json_string_value(json_object_get(g, "uuid")), "GPU-\"0\"");
        json_t *h = json_array_get(json_object_get(g, list), 0);
        assert_string_equal(json_string_value(json_object_get(h, "namespace")), "t\xc3\xa9\"am");
        assert_string_equal(json_string_value(json_object_get(h, "name")), "s\"1\\\x02");
}

static json_t *parsed(char *text, size_t len) {
        assert_int_equal(strlen(text), len);
        json_error_t je;
        json_t *j = json_loads(text, 0, &je);
        if (!j)
                fail_msg("not JSON (%s at %d): %s", je.text, je.position, text);
        return j;
}

static void test_json_escaping(void **state) {
        (void)state;
        struct sched_model *m = load_odd();
        /* a pending pod whose filter reason was cut inside a character: 199 bytes of 'x' then "·" */
        char reason[256];
        memset(reason, 'x', 198);
        strscpy(reason + 198, "\xc2\xb7 more", sizeof reason - 198);
        struct sched_ext_node_result r[1] = { { SCHED_NO_ROOM, reason } };
        char *names[] = { "a" };
        struct sched_filter_summary f = { 0 };
        sched_filter_summary_note(&f, r, names, 1, 1000000000ull);
        assert_int_equal(strlen(f.reason[0].text), 199); /* cut after the first byte of the two */
        struct cluster_pod v = { .uid = "p\"1", .ns = "ml", .name = "w\x7f\x1b[0m" };
        struct sched_view_pending pend = { &v, &f };

        /* the page's document */
        struct sched_view_query q = { 0 };
        struct sched_view_state st = { .generation = 1, .ready = true };
        char *text;
        size_t len;
        assert_int_equal(sched_view_cluster(m, &pend, 1, &q, &st, &text, &len), 0);
        /* escaped as JSON wants: \" \\ \uXXXX for control characters; UTF-8 as it is */
        assert_non_null(strstr(text, "Tesla \\\"T4\\\" \\\\ tab\\u0009here \\u0001\\u001f caf\xc3\xa9 \xe2\x9c\x93"));
        assert_non_null(strstr(text, "\"w\x7f\\u001b[0m\""));
        json_t *d = parsed(text, len);
        free(text);
        assert_odd_strings(d, "holders");
        json_t *jp = json_array_get(json_object_get(d, "pending_pods"), 0);
        assert_string_equal(json_string_value(json_object_get(jp, "uid")), "p\"1");
        const char *got = json_string_value(json_object_get(json_array_get(json_object_get(jp, "reasons"), 0), "text"));
        assert_non_null(got);
        assert_int_equal(strlen(got), 198 + 3); /* the cut byte as U+FFFD */
        assert_string_equal(got + 198, "\xef\xbf\xbd");
        json_decref(d);

        /* inspect's document: the same strings, and its own shape (pods, pending pods without uid or what) */
        struct sched_view_listed nodes[] = { { "a", true, NULL }, { "b\"\n", false, "bad \"annotation\"\t\x01" } };
        assert_int_equal(sched_view_inspect(m, nodes, 2, &pend, 1, NULL, &text, &len), 0);
        d = parsed(text, len);
        free(text);
        assert_odd_strings(d, "pods");
        json_t *b = json_array_get(json_object_get(d, "nodes"), 1);
        assert_string_equal(json_string_value(json_object_get(b, "name")), "b\"\n");
        assert_false(json_is_true(json_object_get(b, "published")));
        assert_string_equal(json_string_value(json_object_get(b, "error")), "bad \"annotation\"\t\x01");
        assert_int_equal(json_array_size(json_object_get(b, "gpus")), 0);
        jp = json_array_get(json_object_get(d, "pending_pods"), 0);
        assert_string_equal(json_string_value(json_object_get(jp, "name")), "w\x7f\x1b[0m");
        assert_int_equal(json_object_size(jp),
                         6); /* namespace, name, memory_mib, core_percent, whole_gpus, mig_devices */
        assert_null(json_object_get(jp, "uid"));
        json_decref(d);
        sched_model_free(m);
}

/* inspect's document: each GPU as the assignments record it, the caller's fields added to each GPU. */
static void extra_fields(struct gs_buf *w, const char *node, unsigned g, void *userdata) {
        (*(unsigned *)userdata)++;
        gs_buf_printf(w, ",\"extra\":\"%s/%u\"", node, g);
}

static void test_inspect_document(void **state) {
        (void)state;
        struct sched_model *m = load();
        unsigned calls = 0;
        struct sched_view_extra x = { .gpu = extra_fields, .userdata = &calls };
        struct sched_view_listed nodes[] = { { "a", true, NULL }, { "b", true, NULL } };
        char *text;
        size_t len;
        assert_int_equal(sched_view_inspect(m, nodes, 2, NULL, 0, &x, &text, &len), 0);
        json_t *d = parsed(text, len);
        free(text);
        assert_int_equal(calls, 6); /* 2 + 4 GPUs */
        json_t *a0 = gpu(d, "a", 0), *b0 = gpu(d, "b", 0);
        assert_string_equal(json_string_value(json_object_get(a0, "extra")), "a/0");
        /* a/0: both shares, as recorded (s2 is not confirmed) */
        assert_int_equal(json_array_size(json_object_get(a0, "pods")), 2);
        assert_null(json_object_get(a0, "holders"));
        assert_int_equal(json_integer_value(json_object_get(a0, "memory_allocated_mib")), 4096 + 2048);
        json_t *s2 = json_array_get(json_object_get(a0, "pods"), 1);
        assert_string_equal(json_string_value(json_object_get(s2, "name")), "s2");
        assert_false(json_is_true(json_object_get(s2, "confirmed")));
        assert_false(json_is_true(json_object_get(s2, "whole")));
        /* b/0: the whole holder from gpu-manager's annotation */
        assert_string_equal(json_string_value(json_object_get(json_object_get(b0, "whole_holder"), "name")), "w");
        assert_true(json_is_true(json_object_get(json_array_get(json_object_get(b0, "pods"), 0), "whole")));
        /* b's pod without an assignment is unplaced, not on a GPU */
        json_t *un = json_object_get(json_array_get(json_object_get(d, "nodes"), 1), "unplaced_pods");
        assert_int_equal(json_array_size(un), 1);
        assert_string_equal(json_string_value(json_object_get(json_array_get(un, 0), "name")), "i");
        assert_int_equal(json_array_size(json_object_get(d, "pending_pods")), 0);
        json_decref(d);
        sched_model_free(m);
}

static void test_topology(void **state) {
        (void)state;
        struct sched_model *m = load();
        char *text;
        size_t len;
        assert_int_equal(sched_view_topology(m, "nope", &text, &len), -ENOENT);
        assert_int_equal(sched_view_topology(m, "b", &text, &len), 0);
        json_error_t je;
        json_t *t = json_loads(text, 0, &je);
        free(text);
        assert_non_null(t);
        json_t *links = json_object_get(t, "links");
        assert_string_equal(json_string_value(json_array_get(json_array_get(links, 0), 0)), "X");
        assert_string_equal(json_string_value(json_array_get(json_array_get(links, 0), 1)), "NV2");
        assert_string_equal(json_string_value(json_array_get(json_array_get(links, 2), 3)), "NV2");
        assert_string_equal(json_string_value(json_array_get(json_array_get(links, 1), 2)), "SYS");
        /* rings of 2 among all GPUs: an NV2 pair; none among the free ones: 0 and 1 are held whole, the
         * inferred share sits on 2 or 3 */
        json_t *r2 = json_array_get(json_object_get(t, "rings"), 0);
        assert_int_equal(json_integer_value(json_object_get(r2, "count")), 2);
        json_t *set = json_object_get(r2, "gpus");
        assert_int_equal(json_integer_value(json_array_get(set, 1)) - json_integer_value(json_array_get(set, 0)), 1);
        assert_int_equal(json_integer_value(json_array_get(set, 0)) % 2, 0);
        assert_int_equal(json_array_size(json_object_get(t, "rings")), 3); /* 2, 3 and 4 GPUs */
        assert_int_equal(json_array_size(json_object_get(t, "free_rings")), 0);
        json_t *g = json_object_get(t, "gpus");
        int free_whole = 0;
        for (size_t i = 0; i < json_array_size(g); i++)
                free_whole += json_is_true(json_object_get(json_array_get(g, i), "free_whole"));
        assert_int_equal(free_whole, 1);
        json_decref(t);
        sched_model_free(m);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_query_valid),      cmocka_unit_test(test_query_refused),
                cmocka_unit_test(test_summary),          cmocka_unit_test(test_cluster_document),
                cmocka_unit_test(test_cluster_filters),  cmocka_unit_test(test_cluster_pending),
                cmocka_unit_test(test_topology),         cmocka_unit_test(test_json_escaping),
                cmocka_unit_test(test_inspect_document), cmocka_unit_test(test_cpu_only_pod_not_shown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
