/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the scheduler extender's JSON codec (src/sched/codec.c): the bodies a real
 * kube-scheduler 1.20 sent (tests/data/extender/, both nodeCacheCapable forms), pod requests of
 * every resource profile, the node and assignment annotations, snapshots, and malformed input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "helpers.h"
#include <jansson.h>

#include "sched/codec.h"
#include "util/util.h"

static struct cluster_units U;

/* tests/data/extender/NAME */
static char *sample(const char *name, size_t *len) {
        return test_read_source(test_path("tests/data/extender", name), len);
}

static json_t *parse(const char *s, size_t len) {
        json_error_t e;
        json_t *j = json_loadb(s, len, 0, &e);
        assert_non_null(j);
        return j;
}

static void test_filter_nodecache_sample(void **state) {
        (void)state;
        size_t len;
        char *body = sample("filter.request.nodecache.json", &len);
        struct sched_ext_args a;
        struct gs_error err = { 0 };
        assert_int_equal(sched_ext_args_decode(body, len, &U, &a, &err), 0);
        assert_true(a.node_cache);
        assert_int_equal(a.n_nodes, 2);
        assert_string_equal(a.node_names[0], "gpunode");
        assert_string_equal(a.node_names[1], "gpunode-fake");
        assert_string_equal(a.pod.name, "ext-c");
        assert_string_equal(a.pod.ns, "default");
        assert_string_equal(a.pod.uid, "e981bc86-1140-480f-8584-8551befe9a66");
        assert_string_equal(a.pod.resource_version, "579");
        assert_int_equal(a.pod.req.n, 1);
        assert_int_equal(a.pod.req.c[0].whole, 2);
        assert_string_equal(a.pod.req.c[0].name, "main");
        assert_false(a.pod.has_assignment);
        /* both pass: the reply is the sample reply (compared as JSON, plus the 1.21 field) */
        struct sched_ext_node_result res[2] = { { SCHED_FIT, NULL }, { SCHED_FIT, NULL } };
        char *out;
        size_t out_len;
        assert_int_equal(sched_ext_filter_encode(&a, res, NULL, &out, &out_len), 0);
        json_t *got = parse(out, out_len);
        size_t rl;
        char *reply = sample("filter.reply.nodecache.json", &rl);
        json_t *want = parse(reply, rl);
        json_t *empty = json_object();
        assert_true(json_equal(json_object_get(got, "FailedAndUnresolvableNodes"), empty));
        json_decref(empty);
        json_object_del(got, "FailedAndUnresolvableNodes");
        assert_true(json_equal(got, want));
        json_decref(got);
        json_decref(want);
        free(out);
        free(reply);
        /* one fails, unresolvable: named in both failure maps, not in NodeNames */
        res[1] = (struct sched_ext_node_result){ SCHED_UNRESOLVABLE, "largest free GPU has 6 GiB" };
        assert_int_equal(sched_ext_filter_encode(&a, res, NULL, &out, &out_len), 0);
        got = parse(out, out_len);
        assert_int_equal(json_array_size(json_object_get(got, "NodeNames")), 1);
        assert_string_equal(json_string_value(json_object_get(json_object_get(got, "FailedNodes"), "gpunode-fake")),
                            "largest free GPU has 6 GiB");
        assert_non_null(json_object_get(json_object_get(got, "FailedAndUnresolvableNodes"), "gpunode-fake"));
        json_decref(got);
        free(out);
        /* an error fails the call */
        assert_int_equal(sched_ext_filter_encode(&a, res, "model not ready", &out, &out_len), 0);
        got = parse(out, out_len);
        assert_string_equal(json_string_value(json_object_get(got, "Error")), "model not ready");
        assert_true(json_is_null(json_object_get(got, "NodeNames")));
        json_decref(got);
        free(out);
        sched_ext_args_done(&a);
        free(body);
}

static void test_filter_nodes_sample(void **state) {
        (void)state;
        size_t len, rl;
        char *body = sample("filter.request.nodes.json", &len);
        char *reply = sample("filter.reply.nodes.json", &rl);
        struct sched_ext_args a;
        struct gs_error err = { 0 };
        assert_int_equal(sched_ext_args_decode(body, len, &U, &a, &err), 0);
        assert_false(a.node_cache);
        assert_int_equal(a.n_nodes, 2);
        assert_string_equal(a.node_names[1], "gpunode-fake");
        struct sched_ext_node_result res[2] = { { SCHED_FIT, NULL }, { SCHED_FIT, NULL } };
        char *out;
        size_t out_len;
        assert_int_equal(sched_ext_filter_encode(&a, res, NULL, &out, &out_len), 0);
        json_t *got = parse(out, out_len), *want = parse(reply, rl);
        /* full Node objects come back unchanged */
        assert_true(json_equal(json_object_get(json_object_get(got, "Nodes"), "items"),
                               json_object_get(json_object_get(want, "Nodes"), "items")));
        assert_true(json_is_null(json_object_get(got, "NodeNames")));
        assert_string_equal(json_string_value(json_object_get(got, "Error")), "");
        json_decref(got);
        json_decref(want);
        free(out);
        free(reply);
        sched_ext_args_done(&a);
        free(body);
}

static void test_prioritize_and_bind_samples(void **state) {
        (void)state;
        size_t len;
        char *body = sample("prioritize.request.nodecache.json", &len);
        struct sched_ext_args a;
        struct gs_error err = { 0 };
        assert_int_equal(sched_ext_args_decode(body, len, &U, &a, &err), 0);
        int scores[2] = { 10, 1 };
        char *out;
        size_t out_len;
        assert_int_equal(sched_ext_prioritize_encode(a.node_names, scores, a.n_nodes, &out, &out_len), 0);
        size_t rl;
        char *reply = sample("prioritize.reply.nodecache.json", &rl);
        json_t *got = parse(out, out_len), *want = parse(reply, rl);
        assert_true(json_equal(got, want));
        json_decref(got);
        json_decref(want);
        free(out);
        free(reply);
        sched_ext_args_done(&a);
        free(body);

        body = sample("bind.request.nodecache.json", &len);
        struct sched_ext_bind_args b;
        assert_int_equal(sched_ext_bind_decode(body, len, &b, &err), 0);
        assert_string_equal(b.pod_name, "ext-c");
        assert_string_equal(b.pod_namespace, "default");
        assert_string_equal(b.pod_uid, "e981bc86-1140-480f-8584-8551befe9a66");
        assert_string_equal(b.node, "gpunode");
        free(body);
        assert_int_equal(sched_ext_bind_encode(NULL, &out, &out_len), 0);
        reply = sample("bind.reply.nodecache.json", &rl);
        got = parse(out, out_len);
        want = parse(reply, rl);
        assert_true(json_equal(got, want));
        json_decref(got);
        json_decref(want);
        free(out);
        free(reply);
}

static void test_malformed_args(void **state) {
        (void)state;
        const char *bad[] = {
                "",
                "not json",
                "[]",
                "{}",
                "{\"Pod\":{}}",
                "{\"Pod\":{\"metadata\":{}},\"NodeNames\":null,\"Nodes\":null}",
                "{\"Pod\":{\"metadata\":{}},\"NodeNames\":{}}",
                "{\"Pod\":{\"metadata\":{}},\"NodeNames\":[1]}",
                "{\"Pod\":{\"metadata\":{}},\"NodeNames\":[\"\"]}",
                "{\"Pod\":{\"metadata\":{}},\"Nodes\":[]}",
                "{\"Pod\":{\"metadata\":{}},\"Nodes\":{\"items\":[{\"metadata\":{}}]}}",
                "{\"Pod\":{\"metadata\":{\"name\":1}},\"NodeNames\":[]}",
                "{\"Pod\":{\"metadata\":{},\"spec\":{\"containers\":{}}},\"NodeNames\":[]}",
                "{\"Pod\":{\"metadata\":{}},\"NodeNames\":[],\"NodeNames\":[]}",
        };
        struct sched_ext_args a;
        struct gs_error err = { 0 };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                gs_error_clear(&err);
                assert_int_equal(sched_ext_args_decode(bad[i], strlen(bad[i]), &U, &a, &err), -EINVAL);
                assert_true(err.message[0] != '\0');
                assert_null(a.root);
        }
        const char *ok = "{\"Pod\":{\"metadata\":{}},\"NodeNames\":[]}";
        assert_int_equal(sched_ext_args_decode(ok, strlen(ok), &U, &a, &err), 0);
        assert_int_equal(a.n_nodes, 0);
        sched_ext_args_done(&a);
        assert_int_equal(sched_ext_args_decode(ok, SCHED_CODEC_MAX_BODY + 1, &U, &a, &err), -E2BIG);
        struct sched_ext_bind_args b;
        const char *bb[] = { "{}", "{\"PodName\":\"a\",\"PodNamespace\":\"b\",\"PodUID\":\"c\"}", "{\"PodName\":1}",
                             "x" };
        for (size_t i = 0; i < ELEMENTSOF(bb); i++)
                assert_int_equal(sched_ext_bind_decode(bb[i], strlen(bb[i]), &b, &err), -EINVAL);
}

/* The fast path of the node names (plain names read without jansson) answers exactly as the full decoder:
 * the same result, names, pod and error message, for plain names, names it leaves to jansson, and
 * malformed bodies around or inside the array. */
static void expect_same_decode(const char *body, size_t len) {
        struct sched_ext_args a, b;
        struct gs_error ea = { 0 }, eb = { 0 };
        int ra = sched_ext_args_decode(body, len, &U, &a, &ea);
        int rb = sched_ext_args_decode_full(body, len, &U, &b, &eb);
        assert_int_equal(ra, rb);
        assert_string_equal(ea.message, eb.message);
        if (ra == 0) {
                assert_int_equal(a.node_cache, b.node_cache);
                assert_int_equal(a.n_nodes, b.n_nodes);
                for (size_t i = 0; i < a.n_nodes; i++)
                        assert_string_equal(a.node_names[i], b.node_names[i]);
                assert_string_equal(a.pod.uid, b.pod.uid);
                assert_int_equal(a.pod.req.n, b.pod.req.n);
                assert_int_equal(a.soft_preferences, b.soft_preferences);
                assert_true((a.nodes_items == NULL) == (b.nodes_items == NULL));
        }
        sched_ext_args_done(&a);
        sched_ext_args_done(&b);
}

static void test_node_names_fast_path_same(void **state) {
        (void)state;
#define POD "\"Pod\":{\"metadata\":{\"uid\":\"u1\"}}"
        static const char *const bodies[] = {
                "{" POD ",\"NodeNames\":[\"n0\",\"n1\",\"node-2.example.com\"]}",
                " {\n" POD " ,\n \"NodeNames\" : [ \"a\" ,\t\"b\" ] \r\n}\n",
                "{\"NodeNames\":[\"b\",\"a\"]," POD "}",
                "{" POD ",\"NodeNames\":[]}",
                "{" POD ",\"NodeNames\":[\"n\\u0030\",\"n1\"]}",         /* an escape: jansson's */
                "{" POD ",\"NodeNames\":[\"caf\xc3\xa9\"]}",             /* not ASCII */
                "{" POD ",\"NodeNames\":[\"a\\u0000b\"]}",               /* NUL inside */
                "{" POD ",\"NodeNames\":[\"\"]}",                        /* empty name */
                "{" POD ",\"NodeNames\":[\"a\",]}",                      /* trailing comma */
                "{" POD ",\"NodeNames\":[\"a\" \"b\"]}",                 /* no comma */
                "{" POD ",\"NodeNames\":[\"a\",1]}",                     /* not a string */
                "{" POD ",\"NodeNames\":[\"a\"",                         /* cut */
                "{" POD ",\"NodeNames\":[\"a\"]",                        /* cut after the array */
                "{" POD ",\"NodeNames\":[\"a\"]} x",                     /* trailing garbage */
                "{" POD ",\"NodeNames\":[\"a\"],\"NodeNames\":[\"b\"]}", /* twice */
                "{" POD ",\"NodeNames\":[\"a\"],\"Node\\u004eames\":[\"b\"]}",
                "{" POD ",\"NodeNames\":null,\"Nodes\":{\"items\":[{\"metadata\":{\"name\":\"x\"}}]}}",
                "{" POD ",\"NodeNames\":[\"a\"],\"Nodes\":{\"items\":[{\"metadata\":{\"name\":\"x\"}}]}}",
                "{" POD ",\"NodeNames\":[\"a\"],\"Nodes\":7}",
                "{" POD ",\"NodeNames\":\"a\"}",
                "{\"Pod\":{\"metadata\":{\"uid\":\"]\\\"NodeNames\\\":[\"}},\"NodeNames\":[\"a\"]}",
                "{\"Pod\":{\"metadata\":{},\"x\":{\"NodeNames\":[\"z\"]}},\"NodeNames\":[\"a\"]}",
                "{\"Pod\":{\"metadata\":{]},\"NodeNames\":[\"a\"]}", /* mismatched brackets before */
                "{\"Pod\":{\"metadata\":{\"name\":1}},\"NodeNames\":[\"a\"]}",
                "{\"Pod\":1,\"NodeNames\":[\"a\"]}",
                "{\"NodeNames\":[\"a\"]}",
                "[\"NodeNames\",[\"a\"]]",
                "{" POD ",\"NodeNames\":[\"a\"],}",
                "{" POD ",tru,\"NodeNames\":[\"a\"]}",
        };
#undef POD
        for (size_t i = 0; i < ELEMENTSOF(bodies); i++)
                expect_same_decode(bodies[i], strlen(bodies[i]));
        /* names at the length limit and past it, and past the node count limit */
        struct gs_buf b = { 0 };
        for (size_t l = CLUSTER_NAME_MAX - 2; l <= CLUSTER_NAME_MAX; l++) {
                gs_buf_clear(&b);
                GS_BUF_LIT(&b, "{\"Pod\":{\"metadata\":{}},\"NodeNames\":[\"");
                for (size_t k = 0; k < l; k++)
                        GS_BUF_LIT(&b, "x");
                GS_BUF_LIT(&b, "\"]}");
                expect_same_decode(b.p, b.len);
        }
        for (unsigned n = SCHED_CODEC_MAX_NODES; n <= SCHED_CODEC_MAX_NODES + 1; n++) {
                gs_buf_clear(&b);
                GS_BUF_LIT(&b, "{\"Pod\":{\"metadata\":{}},\"NodeNames\":[");
                for (unsigned k = 0; k < n; k++)
                        gs_buf_printf(&b, "%s\"n%u\"", k ? "," : "", k);
                GS_BUF_LIT(&b, "]}");
                expect_same_decode(b.p, b.len);
        }
        gs_buf_done(&b);
}

/* Both extender decoders start alike (ext_request_begin): the same checks, messages naming each one's object. */
static void test_request_preamble_both_decoders(void **state) {
        (void)state;
        static const struct {
                const char *body, *msg;
        } cases[] = {
                { "[]", " is not an object" },
                { "{}", ".Pod is missing" },
                { "{\"Pod\":1}", ".Pod is missing" },
        };
        struct gs_error err = { 0 };
        char want[sizeof err.message];
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct sched_ext_args a;
                struct sched_ext_preempt_args pa;
                gs_error_clear(&err);
                assert_int_equal(sched_ext_args_decode(cases[i].body, strlen(cases[i].body), &U, &a, &err), -EINVAL);
                snprintf(want, sizeof want, "ExtenderArgs%s", cases[i].msg);
                assert_string_equal(err.message, want);
                assert_null(a.root);
                gs_error_clear(&err);
                assert_int_equal(sched_ext_preempt_decode(cases[i].body, strlen(cases[i].body), &U, &pa, &err),
                                 -EINVAL);
                snprintf(want, sizeof want, "ExtenderPreemptionArgs%s", cases[i].msg);
                assert_string_equal(err.message, want);
                assert_null(pa.root);
        }
        /* a Pod the pod decoder refuses: its message, for both */
        const char *badpod = "{\"Pod\":{\"metadata\":{\"name\":1}}}";
        struct sched_ext_args a;
        struct sched_ext_preempt_args pa;
        gs_error_clear(&err);
        assert_int_equal(sched_ext_args_decode(badpod, strlen(badpod), &U, &a, &err), -EINVAL);
        strscpy(want, err.message, sizeof want);
        assert_true(want[0] != '\0');
        gs_error_clear(&err);
        assert_int_equal(sched_ext_preempt_decode(badpod, strlen(badpod), &U, &pa, &err), -EINVAL);
        assert_string_equal(err.message, want);
        const char *ok = "{\"Pod\":{\"metadata\":{}},\"NodeNameToMetaVictims\":{}}";
        assert_int_equal(sched_ext_preempt_decode(ok, SCHED_CODEC_MAX_BODY + 1, &U, &pa, &err), -E2BIG);
        assert_int_equal(sched_ext_preempt_decode(ok, strlen(ok), &U, &pa, &err), 0);
        assert_int_equal(pa.n_nodes, 0);
        sched_ext_preempt_args_done(&pa);
}

static void test_snapshot(void **state) {
        (void)state;
        const char *snap = "{\"nodes\":[{\"metadata\":{\"name\":\"a\",\"annotations\":{\"gpuslice.io/gpus\":"
                           "\"{\\\"v\\\":1,\\\"gpus\\\":[{\\\"i\\\":0,\\\"mem\\\":6144,\\\"health\\\":\\\"ok\\\"},"
                           "{\\\"i\\\":1,\\\"mem\\\":6144,\\\"health\\\":\\\"ok\\\"}],\\\"links\\\":\\\"PIX\\\"}\"}}},"
                           "{\"metadata\":{\"name\":\"cpu-only\"}}],"
                           "\"pods\":[{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\",\"uid\":\"u1\"},"
                           "\"spec\":{\"nodeName\":\"a\",\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
                           "{\"gpuslice.io/gpu-memory\":\"8\"}}}]}}]}";
        struct sched_model *m;
        assert_int_equal(sched_model_new(&m), 0);
        size_t nn, np;
        struct gs_error err = { 0 };
        assert_int_equal(sched_snapshot_load(m, snap, strlen(snap), &U, &nn, &np, &err), 0);
        assert_int_equal(nn, 1);
        assert_int_equal(np, 1);
        const struct sched_node *n = sched_model_node(m, "a");
        assert_non_null(n);
        assert_int_equal(n->gpu[0].mem_used_mib + n->gpu[1].mem_used_mib, 2048);
        assert_true(sched_model_pod(m, "u1")->inferred);
        const char *bad = "{\"nodes\":[{\"metadata\":{\"name\":\"b\",\"annotations\":{\"gpuslice.io/gpus\":\"{}\"}}}]}";
        assert_int_equal(sched_snapshot_load(m, bad, strlen(bad), &U, NULL, NULL, &err), -EINVAL);
        assert_non_null(strstr(err.message, "node b"));
        sched_model_free(m);
}

/* A node + pod snapshot (JSON objects as the API returns them) for the inspect reading below. */
static json_t *k8s_pod(const char *name, const char *node, const char *limits, const char *annotations,
                       const char *phase) {
        char buf[2048];
        snprintf(buf, sizeof buf,
                 "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"%s\",\"uid\":\"uid-%s\",\"annotations\":%s},"
                 "\"spec\":{\"nodeName\":\"%s\",\"containers\":[{\"name\":\"main\",\"image\":\"x\","
                 "\"resources\":{\"limits\":%s}}]},\"status\":{\"phase\":\"%s\"}}",
                 name, name, annotations, node, limits, phase);
        return parse(buf, strlen(buf));
}

/* What inspect shows of a node (sched_node_records): the pods an assignment places on each GPU,
 * in arrival order, what they hold, whole holders, and the pods holding GPU resources on no
 * recorded GPU; with the GPU details the model keeps when told to (the former kube cluster table's
 * test, on the one model). */
static void test_inspect_records(void **state) {
        (void)state;
        const char *ann = "{\"v\":1,\"driver\":\"535.104.05\",\"gpus\":["
                          "{\"i\":0,\"uuid\":\"GPU-0\",\"model\":\"A100\",\"mem\":40960,\"health\":\"ok\"},"
                          "{\"i\":1,\"uuid\":\"GPU-1\",\"model\":\"A100\",\"mem\":40960,\"health\":\"xid 79\"},"
                          "{\"i\":2,\"uuid\":\"GPU-2\",\"model\":\"A100\",\"mem\":40960,\"health\":\"ok\"}],"
                          "\"links\":\"NV12/PIX,SYS;NODE\"}";
        json_t *snap = json_object(), *nodes = json_array(), *pods = json_array();
        json_array_append_new(
                nodes, json_pack("{s:{s:s,s:{s:s}}}", "metadata", "name", "n1", "annotations", CLUSTER_ANN_GPUS, ann));
        json_array_append_new(nodes, json_pack("{s:{s:s}}", "metadata", "name", "n0")); /* not published */
        json_array_append_new(
                pods,
                k8s_pod("frac1", "n1", "{\"gpuslice.io/gpu-core\":\"30\",\"gpuslice.io/gpu-memory\":\"16\"}",
                        "{\"ALIYUN_COM_GPU_MEM_IDX\":\"2\",\"ALIYUN_COM_GPU_MEM_ASSIGNED\":\"true\"}", "Running"));
        json_array_append_new(pods, k8s_pod("frac2", "n1", "{\"aliyun.com/gpu-mem\":\"2\"}",
                                            "{\"ALIYUN_COM_GPU_MEM_IDX\":\"2\"}", "Running"));
        json_array_append_new(pods, k8s_pod("whole", "n1", "{\"nvidia.com/gpu\":\"1\"}",
                                            "{\"tencent.com/predicate-gpu-idx-0\":\"0\"}", "Running"));
        json_array_append_new(pods, k8s_pod("nowhere", "n1", "{\"nvidia.com/gpu\":\"1\"}", "{}", "Running"));
        json_array_append_new(pods, k8s_pod("done", "n1", "{\"nvidia.com/gpu\":\"1\"}",
                                            "{\"tencent.com/predicate-gpu-idx-0\":\"1\"}", "Succeeded"));
        json_object_set_new(snap, "nodes", nodes);
        json_object_set_new(snap, "pods", pods);
        char *text = json_dumps(snap, JSON_COMPACT);
        json_decref(snap);
        struct sched_model *m;
        assert_int_equal(sched_model_new(&m), 0);
        sched_model_keep_details(m, true);
        struct gs_error err = { 0 };
        assert_int_equal(sched_snapshot_load(m, text, strlen(text), &U, NULL, NULL, &err), 0);
        free(text);
        assert_null(sched_model_node(m, "n0"));
        const struct sched_node *n = sched_model_node(m, "n1");
        assert_non_null(n);
        assert_non_null(n->details);
        assert_string_equal(n->details->driver, "535.104.05");
        assert_string_equal(n->details->gpu[1].health, "xid 79");
        assert_string_equal(n->details->gpu[2].model, "A100");
        assert_int_equal(sched_node_link(n, 0, 1).nvlinks, 12);
        assert_int_equal(sched_node_link(n, 0, 1).pcie, TOPO_LEVEL_PIX);
        struct sched_node_records r;
        assert_int_equal(sched_node_records(n, &r), 0);
        assert_int_equal(r.n_gpus, 3);
        assert_int_equal(r.gpu[2].n_pods, 2);
        assert_string_equal(r.gpu[2].pods[0]->name, "frac1"); /* in arrival order */
        assert_string_equal(r.gpu[2].pods[1]->name, "frac2");
        assert_int_equal(r.gpu[2].mem_mib, 4096 + 2048);
        assert_int_equal(r.gpu[2].core, 30);
        assert_true(r.gpu[2].pods[0]->confirmed);
        assert_false(r.gpu[2].pods[1]->confirmed);
        assert_string_equal(cluster_source_name(r.gpu[2].pods[0]->source), "gpushare");
        uint64_t mem;
        unsigned core;
        bool whole;
        assert_int_equal(r.gpu[0].n_pods, 1);
        sched_pod_share(r.gpu[0].pods[0], n, 0, &mem, &core, &whole);
        assert_true(whole);
        assert_int_equal(mem, 40960);
        assert_int_equal(r.gpu[0].mem_mib, 40960);
        assert_string_equal(cluster_source_name(r.gpu[0].pods[0]->source), "gpu-manager");
        assert_int_equal(r.gpu[1].n_pods, 0); /* the Succeeded pod holds nothing */
        assert_int_equal(r.n_unplaced, 1);    /* placed by our fit for the extender, not recorded */
        assert_string_equal(r.unplaced[0]->name, "nowhere");
        assert_true(r.unplaced[0]->inferred);
        unsigned wh;
        sched_pod_request(r.unplaced[0], &mem, &core, &wh);
        assert_int_equal(wh, 1);
        sched_node_records_free(&r);
        sched_model_free(m);
}

/* A placement the node agent recorded (no extender involved, "by":"agent") is a holder like any other:
 * the extender's fit treats its GPUs as taken, and inspect shows it on them as the agent's. */
static void test_agent_recorded_taken(void **state) {
        (void)state;
        const char *ann = "{\"v\":1,\"gpus\":[{\"i\":0,\"mem\":16384,\"health\":\"ok\"},"
                          "{\"i\":1,\"mem\":16384,\"health\":\"ok\"}],\"links\":\"PIX\"}";
        const char *rec = "{\"v\":1,\"node\":\"n1\",\"time\":5,\"by\":\"agent\",\"containers\":[{\"name\":\"main\","
                          "\"gpus\":[0],\"core\":100,\"mem\":0}]}";
        json_t *snap = json_object(), *nodes = json_array(), *pods = json_array();
        json_array_append_new(
                nodes, json_pack("{s:{s:s,s:{s:s}}}", "metadata", "name", "n1", "annotations", CLUSTER_ANN_GPUS, ann));
        json_t *p = k8s_pod("local", "n1", "{\"nvidia.com/gpu\":\"1\"}", "{}", "Running");
        json_object_set_new(json_object_get(p, "metadata"), "annotations",
                            json_pack("{s:s,s:s}", CLUSTER_ANN_ASSIGNMENT, rec, CLUSTER_ANN_ASSIGNED, "true"));
        json_array_append_new(pods, p);
        json_object_set_new(snap, "nodes", nodes);
        json_object_set_new(snap, "pods", pods);
        char *text = json_dumps(snap, JSON_COMPACT);
        json_decref(snap);
        struct sched_model *m;
        assert_int_equal(sched_model_new(&m), 0);
        struct gs_error err = { 0 };
        assert_int_equal(sched_snapshot_load(m, text, strlen(text), &U, NULL, NULL, &err), 0);
        free(text);
        const struct sched_node *n = sched_model_node(m, "n1");
        const struct sched_pod *lp = sched_model_pod(m, "uid-local");
        assert_non_null(lp);
        assert_false(lp->inferred);
        assert_true(lp->confirmed);
        assert_string_equal(cluster_source_name(lp->source), "agent");
        assert_int_equal(n->gpu[0].whole, 1);
        struct cluster_request req = { .n = 1 };
        req.c[0].whole = 1;
        struct sched_fit f;
        assert_int_equal(sched_fit_node(m, n, &req, CLUSTER_POLICY_BINPACK, &f), 0);
        assert_int_equal(f.assign.c[0].gpus, 2); /* GPU 0 is the agent's pod's */
        req.c[0].whole = 2;
        assert_int_equal(sched_fit_node(m, n, &req, CLUSTER_POLICY_BINPACK, &f), -ENOSPC);
        struct sched_node_records r;
        assert_int_equal(sched_node_records(n, &r), 0);
        assert_int_equal(r.gpu[0].n_pods, 1);
        assert_int_equal(r.n_unplaced, 0);
        sched_node_records_free(&r);
        sched_model_free(m);
}

int main(void) {
        cluster_units_default(&U);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_filter_nodecache_sample),
                cmocka_unit_test(test_filter_nodes_sample),
                cmocka_unit_test(test_prioritize_and_bind_samples),
                cmocka_unit_test(test_malformed_args),
                cmocka_unit_test(test_node_names_fast_path_same),
                cmocka_unit_test(test_request_preamble_both_decoders),
                cmocka_unit_test(test_snapshot),
                cmocka_unit_test(test_inspect_records),
                cmocka_unit_test(test_agent_recorded_taken),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
