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

static struct sched_units U;

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

static int pod_with(const char *resources, const char *annotations, struct sched_pod_view *v, struct gs_error *err) {
        char buf[4096];
        snprintf(buf, sizeof buf,
                 "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u\",\"annotations\":%s},"
                 "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c0\",\"resources\":%s},"
                 "{\"name\":\"nogpu\",\"resources\":{\"limits\":{\"cpu\":\"1\"}}}]}}",
                 annotations ? annotations : "{}", resources);
        return sched_pod_decode(buf, strlen(buf), &U, v, err);
}

static void test_pod_requests_every_profile(void **state) {
        (void)state;
        struct sched_pod_view v;
        struct gs_error err = { 0 };
        assert_int_equal(pod_with("{\"limits\":{\"gpuslice.io/gpu-core\":\"30\",\"gpuslice.io/gpu-memory\":\"16\"}}",
                                  NULL, &v, &err),
                         0);
        assert_int_equal(v.req.n, 1); /* the container without GPUs is not counted */
        assert_int_equal(v.req.c[0].core, 30);
        assert_int_equal(v.req.c[0].mem_mib, 16 * 256);
        assert_int_equal(v.req.profile, SCHED_PROFILE_GPUSLICE);
        assert_string_equal(v.node_name, "n1");
        assert_int_equal(
                pod_with("{\"limits\":{\"tencent.com/vcuda-core\":\"200\",\"tencent.com/vcuda-memory\":\"8\"}}", NULL,
                         &v, &err),
                0);
        assert_int_equal(v.req.c[0].whole, 2);
        assert_int_equal(v.req.c[0].core, 0);
        assert_int_equal(v.req.c[0].mem_mib, 0);
        assert_int_equal(v.req.profile, SCHED_PROFILE_TENCENT);
        assert_int_equal(pod_with("{\"limits\":{\"aliyun.com/gpu-mem\":\"8\"}}", NULL, &v, &err), 0);
        assert_int_equal(v.req.c[0].mem_mib, 8192);
        assert_int_equal(v.req.c[0].core, 0);
        assert_int_equal(v.req.profile, SCHED_PROFILE_ALIYUN);
        assert_int_equal(pod_with("{\"requests\":{\"nvidia.com/gpu\":\"1\"}}", NULL, &v, &err), 0);
        assert_int_equal(v.req.c[0].whole, 1);
        assert_int_equal(pod_with("{\"limits\":{\"nvidia.com/gpu\":\"1k\"}}", NULL, &v, &err), -EINVAL);
        assert_int_equal(pod_with("{\"limits\":{\"cpu\":\"1\"}}", NULL, &v, &err), 0);
        assert_int_equal(v.req.n, 0);
        /* errors name the container and the resource */
        assert_int_equal(pod_with("{\"limits\":{\"gpuslice.io/gpu-core\":\"150\"}}", NULL, &v, &err), -EINVAL);
        assert_non_null(strstr(err.message, "container c0: compute 150 exceeds one GPU"));
        assert_int_equal(pod_with("{\"limits\":{\"gpuslice.io/gpu-core\":\"1.5\"}}", NULL, &v, &err), -EINVAL);
        assert_non_null(strstr(err.message, "gpuslice.io/gpu-core is not a whole number"));
        assert_int_equal(
                pod_with("{\"limits\":{\"nvidia.com/gpu\":\"1\",\"gpuslice.io/gpu-memory\":\"4\"}}", NULL, &v, &err),
                -EINVAL);
        assert_non_null(strstr(err.message, "whole GPUs and a GPU share"));
        assert_int_equal(pod_with("{\"limits\":{\"nvidia.com/gpu\":\"65\"}}", NULL, &v, &err), -EINVAL);
        assert_int_equal(pod_with("{\"limits\":{\"nvidia.com/gpu\":2}}", NULL, &v, &err), -EINVAL);
        assert_int_equal(pod_with("{\"limits\":{\"aliyun.com/gpu-mem\":\"99999999999\"}}", NULL, &v, &err), -EINVAL);
        assert_int_equal(pod_with("[]", NULL, &v, &err), -EINVAL);
        /* policy override */
        assert_int_equal(pod_with("{\"limits\":{\"aliyun.com/gpu-mem\":\"1\"}}",
                                  "{\"gpuslice.io/scheduling-policy\":\"spread\"}", &v, &err),
                         0);
        assert_true(v.has_policy);
        assert_int_equal(v.policy, SCHED_POLICY_SPREAD);
        assert_int_equal(pod_with("{\"limits\":{\"aliyun.com/gpu-mem\":\"1\"}}",
                                  "{\"gpuslice.io/scheduling-policy\":\"fast\"}", &v, &err),
                         -EINVAL);
}

static void test_assignment_roundtrip_and_foreign(void **state) {
        (void)state;
        struct sched_request req = { .n = 1, .profile = SCHED_PROFILE_TENCENT };
        strscpy(req.c[0].name, "c0", sizeof req.c[0].name);
        req.c[0].core = 30;
        req.c[0].mem_mib = 4096;
        struct sched_assignment a = { .n = 1 };
        a.c[0] = (struct sched_container_assign){ .gpus = 1ULL << 3, .core = 30, .mem_mib = 4096 };
        char *ann;
        assert_int_equal(sched_assignment_annotations(&req, &a, NULL, "n1", 1234, &U, &ann), 0);
        json_t *j = parse(ann, strlen(ann));
        assert_string_equal(json_string_value(json_object_get(j, "tencent.com/predicate-gpu-idx-0")), "3");
        assert_string_equal(json_string_value(json_object_get(j, "tencent.com/predicate-node")), "n1");
        assert_string_equal(json_string_value(json_object_get(j, "tencent.com/predicate-time")), "1234");
        assert_string_equal(json_string_value(json_object_get(j, "tencent.com/gpu-assigned")), "false");
        /* our annotation decodes back to the same assignment on a pod with that request */
        char *annots = json_dumps(j, JSON_COMPACT);
        struct sched_pod_view v;
        struct gs_error err = { 0 };
        assert_int_equal(
                pod_with("{\"limits\":{\"tencent.com/vcuda-core\":\"30\",\"tencent.com/vcuda-memory\":\"16\"}}", annots,
                         &v, &err),
                0);
        assert_true(v.has_assignment);
        assert_string_equal(v.assigned_node, "n1");
        assert_int_equal(v.assign.c[0].gpus, 1ULL << 3);
        assert_int_equal(v.assign.c[0].mem_mib, 4096);
        free(annots);
        json_decref(j);
        free(ann);
        /* gpu-manager's annotations alone (a pod from a migrating cluster) */
        assert_int_equal(pod_with("{\"limits\":{\"tencent.com/vcuda-core\":\"200\"}}",
                                  "{\"tencent.com/predicate-gpu-idx-0\":\"1,2\",\"tencent.com/predicate-node\":\"n1\"}",
                                  &v, &err),
                         0);
        assert_true(v.has_assignment);
        assert_int_equal(v.assign.c[0].gpus, 6);
        assert_true(v.assign.c[0].whole);
        assert_int_equal(v.source, SCHED_SOURCE_GPU_MANAGER);
        assert_false(v.confirmed);
        /* gpushare's */
        req.profile = SCHED_PROFILE_ALIYUN;
        assert_int_equal(sched_assignment_annotations(&req, &a, NULL, "n1", 5, &U, &ann), 0);
        assert_non_null(strstr(ann, "\"ALIYUN_COM_GPU_MEM_IDX\":\"3\""));
        assert_non_null(strstr(ann, "\"ALIYUN_COM_GPU_MEM_POD\":\"4\""));
        assert_non_null(strstr(ann, "\"ALIYUN_COM_GPU_MEM_ASSIGNED\":\"false\""));
        free(ann);
        assert_int_equal(
                pod_with("{\"limits\":{\"aliyun.com/gpu-mem\":\"2\"}}", "{\"ALIYUN_COM_GPU_MEM_IDX\":\"1\"}", &v, &err),
                0);
        assert_true(v.has_assignment);
        assert_string_equal(v.assigned_node, "n1"); /* from spec.nodeName */
        assert_int_equal(v.assign.c[0].gpus, 2);
        assert_int_equal(v.source, SCHED_SOURCE_GPUSHARE);
        /* gpu-manager indexes by position in spec.containers, a sidecar first included: read and
         * written that way (the node agent reads it so too) */
        static const char side[] =
                "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u\",\"annotations\":{"
                "\"tencent.com/predicate-gpu-idx-1\":\"2\",\"tencent.com/predicate-node\":\"n1\"}},"
                "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"side\"},{\"name\":\"gpu\","
                "\"resources\":{\"limits\":{\"tencent.com/vcuda-core\":\"20\"}}}]}}";
        assert_int_equal(sched_pod_decode(side, strlen(side), &U, &v, &err), 0);
        assert_int_equal(v.req.n, 1);
        assert_int_equal(v.req.c[0].spec_index, 1);
        assert_true(v.has_assignment);
        assert_int_equal(v.assign.c[0].gpus, 4);
        assert_int_equal(sched_assignment_annotations(&v.req, &v.assign, NULL, "n1", 5, &U, &ann), 0);
        assert_non_null(strstr(ann, "\"tencent.com/predicate-gpu-idx-1\":\"2\""));
        assert_null(strstr(ann, "predicate-gpu-idx-0"));
        free(ann);
        /* malformed assignments are ignored (the pod reads as unassigned), the annotation named */
        const char *bad[] = {
                "{\"gpuslice.io/assignment\":\"{\\\"v\\\":2}\"}",
                "{\"gpuslice.io/assignment\":\"nope\"}",
                "{\"gpuslice.io/assignment\":7}",
                ("{\"gpuslice.io/"
                 "assignment\":\"{\\\"v\\\":1,\\\"node\\\":\\\"n\\\",\\\"containers\\\":[{\\\"name\\\":\\\"c0\\\","
                 "\\\"gpus\\\":[64]}]}\"}"),
                "{\"gpuslice.io/assignment\":\"{\\\"v\\\":1,\\\"containers\\\":[]}\"}",
                "{\"tencent.com/predicate-gpu-idx-0\":\"x\"}",
                "{\"ALIYUN_COM_GPU_MEM_IDX\":\"-1\"}",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(pod_with("{\"limits\":{\"aliyun.com/gpu-mem\":\"2\"}}", bad[i], &v, &err), 0);
                assert_false(v.has_assignment);
                assert_int_equal(v.source, SCHED_SOURCE_NONE);
                assert_int_equal(v.req.n, 1); /* the request still counts */
                if (!strstr(v.assignment_error, "annotation"))
                        fail_msg("case %zu: '%s'", i, v.assignment_error);
        }
}

static void test_node_annotation(void **state) {
        (void)state;
        struct sched_node_info *in = calloc(1, sizeof *in), *out = calloc(1, sizeof *out);
        in->n_gpus = 3;
        for (unsigned g = 0; g < 3; g++) {
                snprintf(in->gpu[g].uuid, sizeof in->gpu[g].uuid, "GPU-%u", g);
                strscpy(in->gpu[g].model, "Tesla V100", sizeof in->gpu[g].model);
                in->gpu[g].mem_mib = 16384;
                in->gpu[g].healthy = g != 2;
                for (unsigned h = 0; h < 3; h++)
                        in->link[g][h] = g == h ? (struct topo_link){ TOPO_LEVEL_SELF, 0 }
                                                : (struct topo_link){ TOPO_LEVEL_PIX, 0 };
        }
        in->link[0][1] = in->link[1][0] = (struct topo_link){ TOPO_LEVEL_SYS, 2 };
        char *text;
        assert_int_equal(sched_node_annotation_encode(in, &text), 0);
        struct gs_error err = { 0 };
        assert_int_equal(sched_node_annotation_decode(text, strlen(text), out, &err), 0);
        assert_int_equal(out->n_gpus, 3);
        assert_string_equal(out->gpu[1].uuid, "GPU-1");
        assert_false(out->gpu[2].healthy);
        assert_int_equal(out->link[1][0].nvlinks, 2);
        assert_int_equal(out->link[2][0].pcie, TOPO_LEVEL_PIX);
        free(text);
        /* the documented example (docs/cluster.md), fields we do not use included */
        const char *doc =
                "{\"v\":1,\"driver\":\"535.104.05\",\"cuda\":12020,\"nvswitch\":false,\"gpus\":["
                "{\"i\":1,\"uuid\":\"GPU-b\",\"model\":\"A100\",\"mem\":81920,\"cc\":\"8.0\",\"health\":\"ok\"},"
                "{\"i\":0,\"uuid\":\"GPU-a\",\"model\":\"A100\",\"mem\":81920,\"cc\":\"8.0\",\"health\":\"Xid 79\"},"
                "{\"i\":2,\"uuid\":\"GPU-c\",\"model\":\"A100\",\"mem\":40960,\"health\":\"ok\"}],"
                "\"links\":\"NV12,SYS;PIX\"}";
        assert_int_equal(sched_node_annotation_decode(doc, strlen(doc), out, &err), 0);
        assert_string_equal(out->gpu[0].uuid, "GPU-a"); /* by index, not by position */
        assert_false(out->gpu[0].healthy);
        assert_true(out->gpu[1].healthy);
        assert_int_equal(out->gpu[2].mem_mib, 40960);
        assert_int_equal(out->link[0][1].nvlinks, 12);
        assert_int_equal(out->link[2][0].pcie, TOPO_LEVEL_SYS);
        assert_int_equal(out->link[2][1].pcie, TOPO_LEVEL_PIX);
        assert_string_equal(out->driver, "535.104.05");
        assert_string_equal(out->gpu[0].health, "Xid 79");
        /* what the node agent publishes for NVLink pairs: the PCIe level under the links */
        const char *agent =
                "{\"v\":1,\"gpus\":[{\"i\":0,\"mem\":1,\"health\":\"ok\"},{\"i\":1,\"mem\":1,"
                "\"health\":\"ok\"},{\"i\":2,\"mem\":1,\"health\":\"ok\"}],\"links\":\"NV12/PIX,SYS;NV2/NODE\"}";
        assert_int_equal(sched_node_annotation_decode(agent, strlen(agent), out, &err), 0);
        assert_int_equal(out->link[0][1].nvlinks, 12);
        assert_int_equal(out->link[1][0].pcie, TOPO_LEVEL_PIX);
        assert_int_equal(out->link[2][1].nvlinks, 2);
        assert_int_equal(out->link[1][2].pcie, TOPO_LEVEL_NODE);
        const char *bad[] = {
                "{\"v\":1,\"gpus\":[{\"i\":0,\"mem\":1},{\"i\":1,\"mem\":1}],\"links\":\"PIX/SYS\"}",
                "{\"v\":1,\"gpus\":[{\"i\":0,\"mem\":1},{\"i\":1,\"mem\":1}],\"links\":\"NV2/NV1\"}",
                "{\"v\":1,\"gpus\":[{\"i\":0,\"mem\":1},{\"i\":1,\"mem\":1}],\"links\":\"NV2/\"}",
                "{\"v\":1,\"gpus\":[{\"i\":0,\"mem\":1},{\"i\":1,\"mem\":1}],\"links\":\"NV2/X\"}",
                "{\"v\":1,\"driver\":7,\"gpus\":[]}",
                "{\"v\":2,\"gpus\":[]}",
                "{\"v\":1}",
                "{\"v\":1,\"gpus\":[{\"i\":1,\"mem\":1,\"health\":\"ok\"}]}",
                "{\"v\":1,\"gpus\":[{\"i\":0,\"mem\":-1,\"health\":\"ok\"}]}",
                "{\"v\":1,\"gpus\":[{\"i\":0,\"mem\":1,\"health\":1}]}",
                "{\"v\":1,\"gpus\":[{\"i\":0,\"mem\":1},{\"i\":0,\"mem\":1}]}",
                "{\"v\":1,\"gpus\":[{\"i\":0,\"mem\":1},{\"i\":1,\"mem\":1}],\"links\":\"PIX,PIX\"}",
                "{\"v\":1,\"gpus\":[{\"i\":0,\"mem\":1},{\"i\":1,\"mem\":1}],\"links\":\"X\"}",
                /* clang-format off */ /* one literal: clang warns on split ones in an array */
                "{\"v\":1,\"gpus\":[{\"i\":0,\"mem\":1},{\"i\":1,\"mem\":1},{\"i\":2,\"mem\":1}],\"links\":\"PIX;PIX\"}",
                /* clang-format on */
                "{\"v\":1,\"gpus\":[{\"i\":0,\"mem\":1},{\"i\":1,\"mem\":1}],\"links\":[\"PIX\"]}",
                "[1]",
                "{",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(sched_node_annotation_decode(bad[i], strlen(bad[i]), out, &err), -EINVAL);
        free(in);
        free(out);
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
        json_array_append_new(nodes, json_pack("{s:{s:s,s:{s:s}}}", "metadata", "name", "n1", "annotations",
                                               SCHED_ANNOT_NODE_GPUS, ann));
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
        assert_string_equal(sched_source_name(r.gpu[2].pods[0]->source), "gpushare");
        uint64_t mem;
        unsigned core;
        bool whole;
        assert_int_equal(r.gpu[0].n_pods, 1);
        sched_pod_share(r.gpu[0].pods[0], n, 0, &mem, &core, &whole);
        assert_true(whole);
        assert_int_equal(mem, 40960);
        assert_int_equal(r.gpu[0].mem_mib, 40960);
        assert_string_equal(sched_source_name(r.gpu[0].pods[0]->source), "gpu-manager");
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

int main(void) {
        sched_units_default(&U);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_filter_nodecache_sample),
                cmocka_unit_test(test_filter_nodes_sample),
                cmocka_unit_test(test_prioritize_and_bind_samples),
                cmocka_unit_test(test_pod_requests_every_profile),
                cmocka_unit_test(test_assignment_roundtrip_and_foreign),
                cmocka_unit_test(test_node_annotation),
                cmocka_unit_test(test_malformed_args),
                cmocka_unit_test(test_request_preamble_both_decoders),
                cmocka_unit_test(test_snapshot),
                cmocka_unit_test(test_inspect_records),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
