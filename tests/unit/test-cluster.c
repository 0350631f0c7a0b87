/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test-cluster — the one cluster codec (src/cluster): the request classifier on pods of every
 * resource profile, the pod assignment annotation (gpuslice's, gpu-manager's, gpushare's; written at
 * bind, recorded by the agent, repaired) read back, the node annotation written from a topology and
 * read back, and their malformed forms.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "helpers.h"
#include <jansson.h>

#include "cluster/cluster.h"
#include "topo/topo.h"
#include "util/util.h"

static struct cluster_units U;

static json_t *parse(const char *s, size_t len) {
        json_error_t e;
        json_t *j = json_loadb(s, len, 0, &e);
        assert_non_null(j);
        return j;
}

static int pod_with(const char *resources, const char *annotations, struct cluster_pod *v, struct gs_error *err) {
        char buf[4096];
        snprintf(buf, sizeof buf,
                 "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u\",\"annotations\":%s},"
                 "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c0\",\"resources\":%s},"
                 "{\"name\":\"nogpu\",\"resources\":{\"limits\":{\"cpu\":\"1\"}}}]}}",
                 annotations ? annotations : "{}", resources);
        return cluster_pod_decode(buf, strlen(buf), &U, v, err);
}

static void test_pod_requests_every_profile(void **state) {
        (void)state;
        struct cluster_pod v;
        struct gs_error err = { 0 };
        assert_int_equal(pod_with("{\"limits\":{\"gpuslice.io/gpu-core\":\"30\",\"gpuslice.io/gpu-memory\":\"16\"}}",
                                  NULL, &v, &err),
                         0);
        assert_int_equal(v.req.n, 1); /* the container without GPUs is not counted */
        assert_int_equal(v.req.c[0].core, 30);
        assert_int_equal(v.req.c[0].mem_mib, 16 * 256);
        assert_int_equal(v.req.profile, CLUSTER_PROFILE_GPUSLICE);
        assert_string_equal(v.node_name, "n1");
        assert_int_equal(
                pod_with("{\"limits\":{\"tencent.com/vcuda-core\":\"200\",\"tencent.com/vcuda-memory\":\"8\"}}", NULL,
                         &v, &err),
                0);
        assert_int_equal(v.req.c[0].whole, 2);
        assert_int_equal(v.req.c[0].core, 0);
        assert_int_equal(v.req.c[0].mem_mib, 0);
        assert_int_equal(v.req.profile, CLUSTER_PROFILE_TENCENT);
        assert_int_equal(pod_with("{\"limits\":{\"aliyun.com/gpu-mem\":\"8\"}}", NULL, &v, &err), 0);
        assert_int_equal(v.req.c[0].mem_mib, 8192);
        assert_int_equal(v.req.c[0].core, 0);
        assert_int_equal(v.req.profile, CLUSTER_PROFILE_ALIYUN);
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
        assert_int_equal(v.policy, CLUSTER_POLICY_SPREAD);
        assert_int_equal(pod_with("{\"limits\":{\"aliyun.com/gpu-mem\":\"1\"}}",
                                  "{\"gpuslice.io/scheduling-policy\":\"fast\"}", &v, &err),
                         -EINVAL);
}

/* CPU and memory as kube-scheduler counts a pod (cluster_pod_requests): containers summed (a limit standing in for
 * a missing request), the largest init container per resource when larger, plus overhead; none: 0; and the errors. */
static void test_pod_cpu_memory(void **state) {
        (void)state;
        struct cluster_pod v;
        struct gs_error err = { 0 };
        /* c0 asks 1 GPU and 2.5 cores / 1Gi; "nogpu" 1 core by its limit */
        assert_int_equal(pod_with("{\"limits\":{\"nvidia.com/gpu\":\"1\",\"memory\":\"2Gi\"},\"requests\":"
                                  "{\"cpu\":\"2500m\",\"memory\":\"1Gi\"}}",
                                  NULL, &v, &err),
                         0);
        assert_int_equal(v.cpu_milli, 3500);
        assert_int_equal(v.mem_mib, 1024);
        static const char *const ok[][3] = {
                /* spec, cpu, MiB */
                { "{\"containers\":[]}", "0", "0" },
                { "{\"containers\":[{\"name\":\"a\"}]}", "0", "0" },
                { "{\"containers\":[{\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"100\"}}}],"
                  "\"initContainers\":[{\"resources\":{\"requests\":{\"cpu\":\"3\"}}},"
                  "{\"resources\":{\"limits\":{\"cpu\":\"2\",\"memory\":\"1Mi\"}}}],"
                  "\"overhead\":{\"cpu\":\"100m\",\"memory\":\"1Mi\"}}",
                  "3100", "2" }, /* max(1, 3, 2) + 0.1 cores; max(100 B, 1Mi) + 1Mi */
                { "{\"containers\":[{\"resources\":{\"requests\":{\"memory\":\"1M\"}}}]}", "0", "1" }, /* up */
        };
        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                json_t *j = parse(ok[i][0], strlen(ok[i][0]));
                uint64_t cpu = 9, mem = 9;
                assert_int_equal(cluster_pod_requests(j, &cpu, &mem, &err), 0);
                assert_int_equal(cpu, strtoull(ok[i][1], NULL, 10));
                assert_int_equal(mem, strtoull(ok[i][2], NULL, 10));
                json_decref(j);
        }
        static const char *const bad[][2] = {
                { "{\"containers\":{}}", "spec.containers is not an array" },
                { "{\"containers\":[{\"resources\":{\"requests\":{\"cpu\":\"1x\"}}}]}",
                  "spec.containers[0].resources.requests.cpu: '1x' is not a quantity" },
                { "{\"containers\":[],\"initContainers\":[{\"resources\":{\"limits\":{\"memory\":4}}}]}",
                  "spec.initContainers[0].resources.limits.memory: a non-string is not a quantity" },
                { "{\"containers\":[],\"overhead\":{\"cpu\":\"-1\"}}", "spec.overhead.cpu: '-1' is not a quantity" },
                { "{\"containers\":[{\"resources\":{\"requests\":{\"cpu\":\"2P\"}}}]}",
                  "spec.containers[0].resources: cpu or memory out of range" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                json_t *j = parse(bad[i][0], strlen(bad[i][0]));
                uint64_t cpu, mem;
                assert_int_equal(cluster_pod_requests(j, &cpu, &mem, &err), -EINVAL);
                assert_string_equal(err.message, bad[i][1]);
                json_decref(j);
        }
        static const char alloc[] = "{\"status\":{\"allocatable\":{\"cpu\":\"7900m\",\"memory\":\"1048575Ki\"}}}";
        json_t *node = parse(alloc, strlen(alloc));
        uint64_t cpu, mem;
        assert_int_equal(cluster_node_allocatable(node, &cpu, &mem, &err), 0);
        assert_int_equal(cpu, 7900);
        assert_int_equal(mem, 1023); /* rounded down */
        json_decref(node);
        node = parse("{\"metadata\":{}}", strlen("{\"metadata\":{}}"));
        assert_int_equal(cluster_node_allocatable(node, &cpu, &mem, &err), 0);
        assert_int_equal(cpu + mem, 0);
        json_decref(node);
}

static void test_assignment_roundtrip_and_foreign(void **state) {
        (void)state;
        struct cluster_request req = { .n = 1, .profile = CLUSTER_PROFILE_TENCENT };
        strscpy(req.c[0].name, "c0", sizeof req.c[0].name);
        req.c[0].core = 30;
        req.c[0].mem_mib = 4096;
        struct cluster_assignment a = { .n = 1 };
        a.c[0] = (struct cluster_container_assign){ .gpus = 1ULL << 3, .core = 30, .mem_mib = 4096 };
        char *ann;
        assert_int_equal(cluster_bind_annotations(&req, &a, "n1", 1234, NULL, 0, &U, &ann), 0);
        json_t *j = parse(ann, strlen(ann));
        assert_string_equal(json_string_value(json_object_get(j, "tencent.com/predicate-gpu-idx-0")), "3");
        assert_string_equal(json_string_value(json_object_get(j, "tencent.com/predicate-node")), "n1");
        assert_string_equal(json_string_value(json_object_get(j, "tencent.com/predicate-time")), "1234");
        assert_string_equal(json_string_value(json_object_get(j, "tencent.com/gpu-assigned")), "false");
        /* our annotation decodes back to the same assignment on a pod with that request */
        char *annots = json_dumps(j, JSON_COMPACT);
        struct cluster_pod v;
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
        assert_int_equal(v.source, CLUSTER_SOURCE_GPU_MANAGER);
        assert_false(v.confirmed);
        /* gpushare's */
        req.profile = CLUSTER_PROFILE_ALIYUN;
        assert_int_equal(cluster_bind_annotations(&req, &a, "n1", 5, NULL, 0, &U, &ann), 0);
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
        assert_int_equal(v.source, CLUSTER_SOURCE_GPUSHARE);
        /* gpu-manager indexes by position in spec.containers, a sidecar first included: read and
         * written that way (the node agent reads it so too) */
        static const char side[] =
                "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u\",\"annotations\":{"
                "\"tencent.com/predicate-gpu-idx-1\":\"2\",\"tencent.com/predicate-node\":\"n1\"}},"
                "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"side\"},{\"name\":\"gpu\","
                "\"resources\":{\"limits\":{\"tencent.com/vcuda-core\":\"20\"}}}]}}";
        assert_int_equal(cluster_pod_decode(side, strlen(side), &U, &v, &err), 0);
        assert_int_equal(v.req.n, 1);
        assert_int_equal(v.req.c[0].spec_index, 1);
        assert_true(v.has_assignment);
        assert_int_equal(v.assign.c[0].gpus, 4);
        assert_int_equal(cluster_bind_annotations(&v.req, &v.assign, "n1", 5, NULL, 0, &U, &ann), 0);
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
                assert_int_equal(v.source, CLUSTER_SOURCE_NONE);
                assert_int_equal(v.req.n, 1); /* the request still counts */
                if (!strstr(v.assignment_error, "annotation"))
                        fail_msg("case %zu: '%s'", i, v.assignment_error);
        }
}

/* A replicated GPU (time-slicing, MPS): its mode, replicas and replicas held, within version 1 (an older agent's
 * annotation has none: not replicated); malformed fields refused with the field named. */
static void test_node_annotation_sharing(void **state) {
        (void)state;
        struct cluster_node_info *in = calloc(1, sizeof *in), *out = calloc(1, sizeof *out);
        in->n_gpus = 3;
        for (unsigned g = 0; g < 3; g++) {
                snprintf(in->gpu[g].uuid, sizeof in->gpu[g].uuid, "GPU-%u", g);
                in->gpu[g].mem_mib = 16384;
                in->gpu[g].healthy = true;
                for (unsigned h = 0; h < 3; h++)
                        in->link[g][h] = (struct topo_link){ g == h ? TOPO_LEVEL_SELF : TOPO_LEVEL_PIX, 0 };
        }
        snprintf(in->gpu[0].sharing, sizeof in->gpu[0].sharing, "%s", CLUSTER_SHARING_TIMESLICE);
        in->gpu[0].replicas = 4;
        in->gpu[0].held = 2;
        snprintf(in->gpu[2].sharing, sizeof in->gpu[2].sharing, "%s", CLUSTER_SHARING_MPS);
        in->gpu[2].replicas = 10;
        strscpy(in->replica_resource, "nvidia.com/gpu.shared", sizeof in->replica_resource);
        /* GPU 0's set is the node's (not written per GPU), GPU 2's has a name of its own */
        strscpy(in->gpu[0].replica_resource, "nvidia.com/gpu.shared", sizeof in->gpu[0].replica_resource);
        strscpy(in->gpu[2].replica_resource, "nvidia.com/gpu.mps", sizeof in->gpu[2].replica_resource);
        char *text;
        assert_int_equal(cluster_node_encode(in, &text), 0);
        assert_non_null(strstr(text, "\"replica_resource\":\"nvidia.com/gpu.shared\""));
        assert_non_null(strstr(text, "\"held\":0,\"replica_resource\":\"nvidia.com/gpu.mps\""));
        assert_null(strstr(text, "\"held\":2,\"replica_resource\""));
        assert_non_null(strstr(text, "\"health\":\"ok\",\"sharing\":\"time-slicing\",\"replicas\":4,\"held\":2"));
        assert_non_null(strstr(text, "\"sharing\":\"mps\",\"replicas\":10,\"held\":0"));
        struct gs_error err = { 0 };
        assert_int_equal(cluster_node_decode(text, strlen(text), out, &err), 0);
        free(text);
        assert_string_equal(out->replica_resource, "nvidia.com/gpu.shared");
        assert_string_equal(out->gpu[0].sharing, "time-slicing");
        assert_int_equal(out->gpu[0].replicas, 4);
        assert_int_equal(out->gpu[0].held, 2);
        assert_string_equal(out->gpu[1].sharing, "");
        assert_int_equal(out->gpu[1].replicas, 0);
        assert_string_equal(out->gpu[2].sharing, "mps");
        assert_int_equal(out->gpu[2].replicas, 10);
        assert_string_equal(out->gpu[0].replica_resource, "nvidia.com/gpu.shared"); /* the node's */
        assert_string_equal(out->gpu[1].replica_resource, "");                      /* not replicated */
        assert_string_equal(out->gpu[2].replica_resource, "nvidia.com/gpu.mps");
        assert_true(out->gpu[0].healthy && out->gpu[2].healthy); /* replicated is not unhealthy */
        /* the writer never writes what its reader refuses: replicas 0 or over the bound, held over replicas */
        in->gpu[0].replicas = 0;
        in->gpu[0].held = 3;
        in->gpu[2].replicas = 5000;
        in->gpu[2].held = 5000;
        assert_int_equal(cluster_node_encode(in, &text), 0);
        assert_int_equal(cluster_node_decode(text, strlen(text), out, &err), 0);
        free(text);
        assert_true(out->gpu[0].replicas == 1 && out->gpu[0].held == 1);
        assert_true(out->gpu[2].replicas == CLUSTER_REPLICAS_MAX && out->gpu[2].held == CLUSTER_REPLICAS_MAX);
        /* an older agent's GPU (no fields): not replicated; held may be left out */
        static const char old[] = "{\"v\":1,\"gpus\":[{\"i\":0,\"uuid\":\"GPU-a\",\"mem\":1,\"health\":\"ok\"},"
                                  "{\"i\":1,\"uuid\":\"GPU-b\",\"mem\":1,\"health\":\"ok\",\"sharing\":\"mps\","
                                  "\"replicas\":2}]}";
        assert_int_equal(cluster_node_decode(old, strlen(old), out, &err), 0);
        assert_string_equal(out->gpu[0].sharing, "");
        assert_string_equal(out->gpu[1].sharing, "mps");
        assert_int_equal(out->gpu[1].replicas, 2);
        assert_int_equal(out->gpu[1].held, 0);
        /* malformed: every one refused with the field named */
        static const char *const bad[] = {
                "\"sharing\":7,\"replicas\":2",
                "\"sharing\":\"time-slicing\"",
                "\"sharing\":\"time-slicing\",\"replicas\":0",
                "\"sharing\":\"time-slicing\",\"replicas\":1025",
                "\"sharing\":\"time-slicing\",\"replicas\":\"4\"",
                "\"sharing\":\"time-slicing\",\"replicas\":4,\"held\":5",
                "\"sharing\":\"time-slicing\",\"replicas\":4,\"held\":-1",
                "\"sharing\":\"time-slicing\",\"replicas\":4,\"held\":true",
                "\"replicas\":4",
                "\"held\":1",
                "\"sharing\":\"a-sharing-mode-name-far-too-long\",\"replicas\":4",
                "\"replica_resource\":\"nvidia.com/gpu\"",
                "\"sharing\":\"mps\",\"replicas\":4,\"replica_resource\":3",
        };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                char doc[512];
                snprintf(doc, sizeof doc,
                         "{\"v\":1,\"gpus\":[{\"i\":0,\"uuid\":\"GPU-a\",\"model\":\"T4\",\"mem\":16384,"
                         "\"health\":\"ok\",%s}]}",
                         bad[i]);
                err.message[0] = 0;
                if (cluster_node_decode(doc, strlen(doc), out, &err) != -EINVAL ||
                    !(strstr(err.message, "replica") || strstr(err.message, "held") || strstr(err.message, "sharing")))
                        fail_msg("case %zu accepted or unexplained: %s", i, err.message);
        }
        free(in);
        free(out);
}

static void test_node_annotation_mig(void **state) {
        (void)state;
        struct cluster_node_info *in = calloc(1, sizeof *in), *out = calloc(1, sizeof *out);
        in->n_gpus = 2;
        for (unsigned g = 0; g < 2; g++) {
                snprintf(in->gpu[g].uuid, sizeof in->gpu[g].uuid, "GPU-%u", g);
                in->gpu[g].mem_mib = 81920;
                in->gpu[g].healthy = true;
                in->link[g][g] = (struct topo_link){ TOPO_LEVEL_SELF, 0 };
        }
        in->link[0][1] = in->link[1][0] = (struct topo_link){ TOPO_LEVEL_SYS, 12 };
        in->gpu[0].mig = true;
        in->gpu[0].n_mig = 2;
        in->gpu[0].mig_dev[0] = (struct cluster_mig_info){ .index = 0,
                                                           .uuid = "MIG-a",
                                                           .profile = "3g.40gb",
                                                           .mem_mib = 40192,
                                                           .healthy = true,
                                                           .holder = "ml/train" };
        in->gpu[0].mig_dev[1] = (struct cluster_mig_info){
                .index = 2, .uuid = "MIG-b", .profile = "1g.10gb", .mem_mib = 9856, .healthy = false
        };
        char *text;
        assert_int_equal(cluster_node_encode(in, &text), 0);
        assert_non_null(strstr(text, "\"mig\":[{\"i\":0,\"uuid\":\"MIG-a\",\"profile\":\"3g.40gb\",\"mem\":40192,"
                                     "\"health\":\"ok\",\"pod\":\"ml/train\"}"));
        struct gs_error err = { 0 };
        assert_int_equal(cluster_node_decode(text, strlen(text), out, &err), 0);
        free(text);
        assert_true(out->gpu[0].mig && !out->gpu[1].mig);
        assert_int_equal(out->gpu[0].n_mig, 2);
        assert_string_equal(out->gpu[0].mig_dev[0].holder, "ml/train");
        assert_string_equal(out->gpu[0].mig_dev[1].profile, "1g.10gb");
        assert_int_equal(out->gpu[0].mig_dev[1].index, 2);
        assert_false(out->gpu[0].mig_dev[1].healthy);
        /* MIG on, no instances: an empty list, still MIG mode */
        in->gpu[0].n_mig = 0;
        assert_int_equal(cluster_node_encode(in, &text), 0);
        assert_int_equal(cluster_node_decode(text, strlen(text), out, &err), 0);
        free(text);
        assert_true(out->gpu[0].mig && out->gpu[0].n_mig == 0);
        /* malformed: every one refused with a message */
        static const char *const bad[] = {
                "\"mig\":{}",
                "\"mig\":[1]",
                "\"mig\":[{\"uuid\":\"MIG-a\",\"profile\":\"1g.10gb\",\"mem\":1}]",
                "\"mig\":[{\"i\":-1,\"uuid\":\"MIG-a\",\"profile\":\"1g.10gb\",\"mem\":1}]",
                "\"mig\":[{\"i\":0,\"uuid\":\"MIG-a\",\"profile\":\"1g.10gb\"}]",
                "\"mig\":[{\"i\":0,\"uuid\":\"\",\"profile\":\"1g.10gb\",\"mem\":1}]",
                "\"mig\":[{\"i\":0,\"uuid\":\"MIG-a\",\"profile\":7,\"mem\":1}]",
                "\"mig\":[{\"i\":0,\"uuid\":\"MIG-a\",\"profile\":\"1g.10gb\",\"mem\":1,\"pod\":[]}]",
                "\"mig\":[{\"i\":0,\"uuid\":\"M\",\"profile\":\"p\",\"mem\":1},{\"i\":1,\"uuid\":\"M\",\"profile\":"
                "\"p\",\"mem\":1},{\"i\":2,\"uuid\":\"M\",\"profile\":\"p\",\"mem\":1},{\"i\":3,\"uuid\":\"M\","
                "\"profile\":"
                "\"p\",\"mem\":1},{\"i\":4,\"uuid\":\"M\",\"profile\":\"p\",\"mem\":1},{\"i\":5,\"uuid\":\"M\","
                "\"profile\":"
                "\"p\",\"mem\":1},{\"i\":6,\"uuid\":\"M\",\"profile\":\"p\",\"mem\":1},{\"i\":7,\"uuid\":\"M\","
                "\"profile\":"
                "\"p\",\"mem\":1},{\"i\":8,\"uuid\":\"M\",\"profile\":\"p\",\"mem\":1}]",
        };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                char doc[2048];
                snprintf(doc, sizeof doc,
                         "{\"v\":1,\"gpus\":[{\"i\":0,\"uuid\":\"GPU-a\",\"model\":\"A100\",\"mem\":81920,"
                         "\"health\":\"ok\",%s}]}",
                         bad[i]);
                err.message[0] = 0;
                if (cluster_node_decode(doc, strlen(doc), out, &err) != -EINVAL || !strstr(err.message, "mig"))
                        fail_msg("case %zu accepted or unexplained: %s", i, err.message);
        }
        /* the agent's MIG strategy: optional within version 1, written only when known */
        in->gpu[0].n_mig = 1;
        assert_int_equal(cluster_node_encode(in, &text), 0);
        assert_null(strstr(text, "mig_strategy"));
        assert_int_equal(cluster_node_decode(text, strlen(text), out, &err), 0);
        free(text);
        assert_string_equal(out->mig_strategy, "");
        strscpy(in->mig_strategy, "single", sizeof in->mig_strategy);
        assert_int_equal(cluster_node_encode(in, &text), 0);
        assert_non_null(strstr(text, "\"mig_strategy\":\"single\""));
        assert_int_equal(cluster_node_decode(text, strlen(text), out, &err), 0);
        free(text);
        assert_string_equal(out->mig_strategy, "single");
        static const char *const bad_strategy[] = {
                "\"mig_strategy\":1",
                "\"mig_strategy\":[\"single\"]",
                "\"mig_strategy\":\"a-strategy-name-far-too-long\"",
        };
        for (size_t i = 0; i < sizeof bad_strategy / sizeof *bad_strategy; i++) {
                char doc[512];
                snprintf(doc, sizeof doc, "{\"v\":1,%s,\"gpus\":[]}", bad_strategy[i]);
                err.message[0] = 0;
                if (cluster_node_decode(doc, strlen(doc), out, &err) != -EINVAL || !strstr(err.message, "mig_strategy"))
                        fail_msg("strategy case %zu accepted or unexplained: %s", i, err.message);
        }
        free(in);
        free(out);
}

/* nvidia.com/mig-<profile>: summed per profile over the pod's containers, apart from c[] (not in n). */
static void test_pod_mig_requests(void **state) {
        (void)state;
        struct cluster_pod v;
        struct gs_error err = { 0 };
        char buf[4096];
        snprintf(buf, sizeof buf,
                 "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u\"},\"spec\":{\"containers\":["
                 "{\"name\":\"a\",\"resources\":{\"limits\":{\"nvidia.com/mig-1g.10gb\":\"2\"}}},"
                 "{\"name\":\"b\",\"resources\":{\"requests\":{\"nvidia.com/mig-1g.10gb\":\"1\","
                 "\"nvidia.com/mig-3g.40gb\":\"1\"}}},"
                 "{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\",\"nvidia.com/"
                 "mig-2g.20gb\":\"0\"}}}]}}");
        assert_int_equal(cluster_pod_decode(buf, strlen(buf), &U, &v, &err), 0);
        assert_int_equal(v.req.n, 1); /* only c asks for a GPU placed by index */
        assert_string_equal(v.req.c[0].name, "c");
        assert_int_equal(v.req.n_mig, 2);
        assert_string_equal(v.req.mig[0].profile, "1g.10gb");
        assert_int_equal(v.req.mig[0].count, 3);
        assert_string_equal(v.req.mig[1].profile, "3g.40gb");
        assert_int_equal(v.req.mig[1].count, 1);
        assert_true(cluster_request_any(&v.req));
        assert_true(cluster_resource_is_gpu("nvidia.com/mig-1g.10gb"));
        /* malformed: refused with the resource named */
        static const char *const bad[] = {
                "{\"limits\":{\"nvidia.com/mig-\":\"1\"}}",
                "{\"limits\":{\"nvidia.com/mig-1g.10gb\":\"1.5\"}}",
                "{\"limits\":{\"nvidia.com/mig-1g.10gb\":1}}",
                "{\"limits\":{\"nvidia.com/mig-1g.10gb\":\"513\"}}",
                "{\"limits\":{\"nvidia.com/mig-a-profile-name-longer-than-31-bytes\":\"1\"}}",
                ("{\"limits\":{\"nvidia.com/mig-a\":\"1\",\"nvidia.com/mig-b\":\"1\",\"nvidia.com/mig-c\":\"1\","
                 "\"nvidia.com/mig-d\":\"1\",\"nvidia.com/mig-e\":\"1\"}}"),
        };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                err.message[0] = 0;
                if (pod_with(bad[i], NULL, &v, &err) != -EINVAL || !strcasestr(err.message, "mig"))
                        fail_msg("case %zu accepted or unexplained: %s", i, err.message);
        }
        /* summed over containers beyond one node's devices */
        snprintf(buf, sizeof buf,
                 "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":\"u\"},\"spec\":{\"containers\":["
                 "{\"name\":\"a\",\"resources\":{\"limits\":{\"nvidia.com/mig-1g.10gb\":\"300\"}}},"
                 "{\"name\":\"b\",\"resources\":{\"limits\":{\"nvidia.com/mig-1g.10gb\":\"300\"}}}]}}");
        assert_int_equal(cluster_pod_decode(buf, strlen(buf), &U, &v, &err), -EINVAL);
        assert_non_null(strstr(err.message, "too large"));
}

static void test_node_annotation(void **state) {
        (void)state;
        struct cluster_node_info *in = calloc(1, sizeof *in), *out = calloc(1, sizeof *out);
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
        assert_int_equal(cluster_node_encode(in, &text), 0);
        struct gs_error err = { 0 };
        assert_int_equal(cluster_node_decode(text, strlen(text), out, &err), 0);
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
        assert_int_equal(cluster_node_decode(doc, strlen(doc), out, &err), 0);
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
        assert_int_equal(cluster_node_decode(agent, strlen(agent), out, &err), 0);
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
                assert_int_equal(cluster_node_decode(bad[i], strlen(bad[i]), out, &err), -EINVAL);
        free(in);
        free(out);
}

/* What the agent publishes, the extender (and inspect) reads back: one writer, one reader. */
static void test_annotation_round_trip(void **state) {
        (void)state;
        struct topo *t = malloc(sizeof *t);
        struct cluster_node_info *g = calloc(1, sizeof *g);
        assert_non_null(t);
        assert_non_null(g);
        test_topo_a100x3(t);
        bool healthy[3] = { true, false, true };
        const char *reason[3] = { "", "xid 79", "" };
        char *s = NULL;
        assert_int_equal(cluster_node_encode_topo(t, healthy, reason, &s), 0);
        assert_non_null(strstr(s, "\"links\":\"NV12/PIX,SYS;NODE\""));
        assert_non_null(strstr(s, "\"cuda\":12020"));
        assert_non_null(strstr(s, "\"cc\":\"8.0\""));
        struct gs_error err = { 0 };
        assert_int_equal(cluster_node_decode(s, strlen(s), g, &err), 0);
        assert_int_equal(g->n_gpus, 3);
        assert_string_equal(g->driver, "535.104.05");
        assert_string_equal(g->gpu[1].uuid, "GPU-1");
        assert_int_equal(g->gpu[1].mem_mib, 40960);
        assert_false(g->gpu[1].healthy);
        assert_string_equal(g->gpu[1].health, "xid 79");
        assert_true(g->gpu[0].healthy);
        for (unsigned i = 0; i < 3; i++)
                for (unsigned j = 0; j < 3; j++)
                        assert_memory_equal(&g->link[i][j], &t->link[i][j], sizeof(struct topo_link));
        free(s);

        /* 64 GPUs on NVSwitch fit the bound */
        topo_init(t);
        t->n_gpus = 64;
        for (unsigned i = 0; i < 64; i++) {
                t->gpu[i].index = (int)i;
                snprintf(t->gpu[i].uuid, sizeof t->gpu[i].uuid, "GPU-%08x-aaaa-bbbb-cccc-%012u", i, i);
                strscpy(t->gpu[i].name, "NVIDIA H100 80GB HBM3", sizeof t->gpu[i].name);
                for (unsigned j = i + 1; j < 64; j++)
                        topo_set_link(t, i, j, (struct topo_link){ .pcie = TOPO_LEVEL_SYS, .nvlinks = 18 });
        }
        bool h64[64];
        for (unsigned i = 0; i < 64; i++)
                h64[i] = true;
        assert_int_equal(cluster_node_encode_topo(t, h64, NULL, &s), 0);
        assert_true(strlen(s) <= CLUSTER_ANNOTATION_MAX);
        assert_int_equal(cluster_node_decode(s, strlen(s), g, &err), 0);
        assert_int_equal(g->n_gpus, 64);
        assert_int_equal(g->link[5][63].nvlinks, 18);
        free(s);
        /* too many GPUs for the annotation */
        t->n_gpus = 65;
        assert_int_equal(cluster_node_encode_topo(t, h64, NULL, &s), -E2BIG);
        free(g);
        free(t);
}

/* A pod with one container "c0" asking `resources` and those annotations, bound to n1. */
static int pod1(const char *resources, const char *assignment, struct cluster_pod *v) {
        json_t *an = json_object();
        if (assignment)
                json_object_set_new(an, CLUSTER_ANN_ASSIGNMENT, json_string(assignment));
        char *a = json_dumps(an, JSON_COMPACT);
        json_decref(an);
        struct gs_error err = { 0 };
        int r = pod_with(resources, a, v, &err);
        free(a);
        return r;
}

/* Containers by name: names the pod does not have are ignored, a name twice or a GPU twice is
 * malformed; a container may hold up to 64 GPUs (a 16-GPU node's whole set, issue 19). */
static void test_assignment_containers(void **state) {
        (void)state;
        struct cluster_pod v;
        const char *w16 = "{\"limits\":{\"nvidia.com/gpu\":\"16\"}}";
        assert_int_equal(pod1(w16,
                              "{\"v\":1,\"node\":\"n1\",\"containers\":[{\"name\":\"c0\",\"gpus\":[0,1,2,3,4,5,6,7,"
                              "8,9,10,11,12,13,14,15]},{\"name\":\"gone\",\"gpus\":[3]}],\"later\":{\"mig\":[]}}",
                              &v),
                         0);
        assert_true(v.has_assignment);
        assert_int_equal(v.req.c[0].whole, 16);
        assert_int_equal(v.assign.c[0].gpus, 0xffff);
        assert_true(v.assign.c[0].whole);
        /* clang-format off */ /* one literal per case: clang warns on split ones in an array */
        static const char *const bad[] = {
                "{\"v\":1,\"node\":\"n1\",\"containers\":[{\"name\":\"c0\",\"gpus\":[1]},{\"name\":\"c0\",\"gpus\":[2]}]}",
                "{\"v\":1,\"node\":\"n1\",\"containers\":[{\"name\":\"c0\",\"gpus\":[1,1]}]}",
                "{\"v\":1,\"node\":\"n1\",\"containers\":[7]}",
                "{\"v\":1,\"node\":\"n1\",\"containers\":[{\"name\":\"c0\",\"gpus\":[1]}],\"by\":7}",
        };
        /* clang-format on */
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(pod1(w16, bad[i], &v), 0);
                if (v.has_assignment || !v.assignment_error[0])
                        fail_msg("case %zu read as an assignment", i);
        }
        /* 65 GPUs are more than a container can ask */
        assert_int_equal(pod1("{\"limits\":{\"nvidia.com/gpu\":\"65\"}}", NULL, &v), -EINVAL);
}

/* The agent's record of a node-local placement reads back as the agent's, confirmed, with the GPUs
 * it holds; a scheduler's assignment is not the agent's. */
static void test_agent_record(void **state) {
        (void)state;
        struct cluster_pod v;
        assert_int_equal(
                pod1("{\"limits\":{\"gpuslice.io/gpu-core\":\"30\",\"gpuslice.io/gpu-memory\":\"8\"}}", NULL, &v), 0);
        assert_false(v.has_assignment);
        uint64_t held[CLUSTER_CONTAINERS_MAX] = { 1u << 2 };
        const char *uuids[3] = { "GPU-a", "GPU-b", "GPU-c" };
        json_t *out = json_object();
        assert_int_equal(cluster_agent_record(&v.req, held, "n1", 7000000000ULL, uuids, 3, out), 0);
        assert_string_equal(json_string_value(json_object_get(out, CLUSTER_ANN_ASSIGNED)), "true");
        const char *val = json_string_value(json_object_get(out, CLUSTER_ANN_ASSIGNMENT));
        assert_non_null(strstr(val, "\"by\":\"agent\""));
        assert_non_null(strstr(val, "\"uuids\":[\"GPU-c\"]"));
        assert_non_null(strstr(val, "\"time\":7000"));
        char *ann = json_dumps(out, JSON_COMPACT);
        struct gs_error err = { 0 };
        assert_int_equal(pod_with("{\"limits\":{\"gpuslice.io/gpu-core\":\"30\",\"gpuslice.io/gpu-memory\":\"8\"}}",
                                  ann, &v, &err),
                         0);
        assert_true(v.has_assignment);
        assert_int_equal(v.source, CLUSTER_SOURCE_AGENT);
        assert_string_equal(cluster_source_name(v.source), "agent");
        assert_true(v.confirmed);
        assert_int_equal(v.assign.c[0].gpus, 1u << 2);
        assert_int_equal(v.assign.c[0].core, 30);
        assert_int_equal(v.assumed_ms, 7000);
        free(ann);
        /* nothing held: nothing to record */
        held[0] = 0;
        assert_int_equal(cluster_agent_record(&v.req, held, "n1", 1, NULL, 0, out), -ENODATA);
        json_decref(out);
        /* the extender's is the scheduler's */
        assert_int_equal(pod1("{\"limits\":{\"nvidia.com/gpu\":\"1\"}}",
                              "{\"v\":1,\"node\":\"n1\",\"containers\":[{\"name\":\"c0\",\"gpus\":[1]}]}", &v),
                         0);
        assert_int_equal(v.source, CLUSTER_SOURCE_GPUSLICE);
}

/* The agent's repair rewrites the GPUs and keeps every field it does not know (a newer writer's). */
static void test_repair_keeps_fields(void **state) {
        (void)state;
        json_t *an = json_pack(
                "{s:s,s:s,s:s}", CLUSTER_ANN_ASSIGNMENT,
                "{\"v\":1,\"node\":\"n1\",\"containers\":[{\"name\":\"c0\",\"gpus\":[1],\"uuids\":[\"GPU-b\"],"
                "\"mig\":\"1g.10gb\"}],\"claim\":\"x\"}",
                CLUSTER_ANN_TENCENT_IDX_PREFIX "0", "1", CLUSTER_ANN_ASSIGNED, "false");
        json_t *pod = json_pack("{s:{s:s,s:s,s:s,s:O},s:{s:s,s:[{s:s,s:{s:{s:s}}}]}}", "metadata", "name", "p",
                                "namespace", "ns", "uid", "u", "annotations", an, "spec", "nodeName", "n1",
                                "containers", "name", "c0", "resources", "limits", "tencent.com/vcuda-core", "20");
        struct cluster_pod v;
        assert_int_equal(cluster_pod_decode_json(pod, &U, &v, NULL), 0);
        assert_int_equal(v.assign.c[0].gpus, 2);
        uint64_t held[CLUSTER_CONTAINERS_MAX] = { 1u << 3 };
        json_t *out = json_object();
        assert_int_equal(cluster_repair_annotations(an, &v, held, out), 0);
        assert_string_equal(json_string_value(json_object_get(out, CLUSTER_ANN_TENCENT_IDX_PREFIX "0")), "3");
        json_t *a = parse(json_string_value(json_object_get(out, CLUSTER_ANN_ASSIGNMENT)),
                          strlen(json_string_value(json_object_get(out, CLUSTER_ANN_ASSIGNMENT))));
        json_t *c0 = json_array_get(json_object_get(a, "containers"), 0);
        assert_int_equal(json_integer_value(json_array_get(json_object_get(c0, "gpus"), 0)), 3);
        assert_null(json_object_get(c0, "uuids")); /* they named the GPU it was assigned */
        assert_string_equal(json_string_value(json_object_get(c0, "mig")), "1g.10gb");
        assert_string_equal(json_string_value(json_object_get(a, "claim")), "x");
        json_decref(a);
        json_decref(out);
        json_decref(pod);
        json_decref(an);
}

/* Which names ask for GPUs: the fixed table, and the agent's whole-GPU name override. */
static void test_classifier(void **state) {
        (void)state;
        enum cluster_res kind;
        enum cluster_profile prof;
        assert_int_equal(cluster_resource_classify("tencent.com/vcuda-memory", &U, &kind, &prof),
                         CLUSTER_NAME_TENCENT_MEMORY);
        assert_int_equal(kind, CLUSTER_RES_MEM);
        assert_int_equal(prof, CLUSTER_PROFILE_TENCENT);
        assert_int_equal(cluster_resource_classify("example.com/gpu", &U, &kind, &prof), CLUSTER_NAME_NONE);
        struct cluster_units u = U;
        u.whole_name = "example.com/gpu";
        assert_int_equal(cluster_resource_classify("example.com/gpu", &u, &kind, &prof), CLUSTER_NAME_WHOLE_OVERRIDE);
        assert_int_equal(kind, CLUSTER_RES_WHOLE);
        assert_string_equal(cluster_resource_name(CLUSTER_NAME_WHOLE_OVERRIDE, &u), "example.com/gpu");
        assert_string_equal(cluster_resource_name(CLUSTER_NAME_NONE, &u), "");
        assert_int_equal(cluster_resource_classify(NULL, &U, NULL, NULL), CLUSTER_NAME_NONE);
        assert_true(cluster_resource_is_gpu("aliyun.com/gpu-mem"));
        assert_false(cluster_resource_is_gpu("cpu"));
        assert_true(cluster_annotation_is_gpu("ALIYUN_COM_GPU_MEM_IDX"));
        assert_false(cluster_annotation_is_gpu("kubectl.kubernetes.io/last-applied-configuration"));
        /* a pod asks what each name says, and which name asked it */
        struct cluster_pod v;
        struct gs_error err = { 0 };
        static const char p[] = "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"a\","
                                "\"resources\":{\"limits\":{\"example.com/gpu\":\"2\"}}}]}}";
        assert_int_equal(cluster_pod_decode(p, strlen(p), &u, &v, &err), 0);
        assert_int_equal(v.req.n, 1);
        assert_int_equal(v.req.c[0].whole, 2);
        assert_int_equal(v.req.c[0].qty[CLUSTER_RES_WHOLE], 2);
        assert_int_equal(v.req.c[0].res[CLUSTER_RES_WHOLE], CLUSTER_NAME_WHOLE_OVERRIDE);
        assert_int_equal(cluster_pod_decode(p, strlen(p), &U, &v, &err), 0);
        assert_int_equal(v.req.n, 0); /* not a GPU resource without the override */
        assert_int_equal(cluster_policy_from_name("spread", &(enum cluster_policy){ 0 }), 0);
        assert_int_equal(cluster_policy_from_name(NULL, &(enum cluster_policy){ 0 }), -EINVAL);
        assert_string_equal(cluster_policy_name(CLUSTER_POLICY_SPREAD), "spread");
        assert_string_equal(cluster_flag_key(CLUSTER_FLAG_GPUSHARE), CLUSTER_ANN_ALIYUN_ASSIGNED);
        assert_string_equal(cluster_flag_key(3), "");
}

/* GPUs are placed by NVML index, wherever the topology lists them; indices must be 0..n-1. */
static void test_node_from_topo_by_index(void **state) {
        (void)state;
        struct topo *t = malloc(sizeof *t);
        struct cluster_node_info *g = calloc(1, sizeof *g);
        test_topo_a100x3(t);
        t->gpu[0].index = 1;
        t->gpu[1].index = 0;
        bool healthy[3] = { true, false, true };
        assert_int_equal(cluster_node_from_topo(t, healthy, NULL, g), 0);
        assert_string_equal(g->gpu[1].uuid, "GPU-0");
        assert_string_equal(g->gpu[0].uuid, "GPU-1");
        assert_false(g->gpu[0].healthy);
        assert_string_equal(g->gpu[0].health, "unhealthy");
        assert_string_equal(g->gpu[1].cc, "8.0");
        assert_int_equal(g->link[1][0].nvlinks, 12); /* the pair 0-1 either way */
        assert_int_equal(g->link[1][2].pcie, TOPO_LEVEL_SYS);
        assert_int_equal(g->link[0][2].pcie, TOPO_LEVEL_NODE);
        t->gpu[1].index = 1;
        assert_int_equal(cluster_node_from_topo(t, healthy, NULL, g), -EINVAL);
        free(g);
        free(t);
}

int main(void) {
        cluster_units_default(&U);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_pod_requests_every_profile),
                cmocka_unit_test(test_pod_cpu_memory),
                cmocka_unit_test(test_assignment_roundtrip_and_foreign),
                cmocka_unit_test(test_assignment_containers),
                cmocka_unit_test(test_agent_record),
                cmocka_unit_test(test_repair_keeps_fields),
                cmocka_unit_test(test_classifier),
                cmocka_unit_test(test_node_annotation),
                cmocka_unit_test(test_node_annotation_mig),
                cmocka_unit_test(test_node_annotation_sharing),
                cmocka_unit_test(test_pod_mig_requests),
                cmocka_unit_test(test_annotation_round_trip),
                cmocka_unit_test(test_node_from_topo_by_index),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
