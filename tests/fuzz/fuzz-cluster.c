/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the one cluster codec (src/cluster) and the picture `gpuslice inspect` reads from it
 * (the cluster model, src/sched/model.h): the input is a gpuslice.io/gpus value; it is decoded,
 * written back by the one writer and decoded again to the same GPUs and links; it is also dropped
 * into a node object and into pod annotations (gpuslice, gpushare, gpu-manager) of a snapshot, whose
 * model is read as inspect reads it (sched_node_records); and the decoded pod's placement is written
 * again as a scheduler's bind and as the agent's record, which must read back to the same GPUs; read as JSON,
 * it is also a pod's spec and a Node whose CPU and memory are counted (cluster_pod_requests, cluster_node_allocatable).
 * Whatever comes in: no crash; records only name the node's pods and GPUs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cluster/cluster.h"
#include "fuzz.h"
#include "sched/codec.h"
#include "util/util.h"

static void round_trip(const struct cluster_node_info *g) {
        /* a pair the annotation left without a link has no name to write back (the agent always
         * knows its links) */
        for (unsigned i = 0; i < g->n_gpus; i++)
                for (unsigned j = 0; j < g->n_gpus; j++)
                        if (i != j && !g->link[i][j].nvlinks && g->link[i][j].pcie == TOPO_LEVEL_UNKNOWN)
                                return;
        struct cluster_node_info *back = calloc(1, sizeof *back);
        char *s = NULL;
        struct gs_error err = { 0 };
        if (back && cluster_node_encode(g, &s) == 0) {
                CHECK(cluster_node_decode(s, strlen(s), back, &err) == 0);
                CHECK(back->n_gpus == g->n_gpus && back->cuda == g->cuda && back->nvswitch == g->nvswitch);
                CHECK(streq(back->driver, g->driver) && streq(back->mig_strategy, g->mig_strategy));
                CHECK(streq(back->replica_resource, g->replica_resource));
                for (unsigned i = 0; i < g->n_gpus; i++) {
                        CHECK(back->gpu[i].mem_mib == g->gpu[i].mem_mib);
                        CHECK(back->gpu[i].healthy == g->gpu[i].healthy);
                        CHECK(streq(back->gpu[i].uuid, g->gpu[i].uuid) && streq(back->gpu[i].cc, g->gpu[i].cc));
                        CHECK(!g->gpu[i].health[0] || streq(back->gpu[i].health, g->gpu[i].health));
                        CHECK(back->gpu[i].mig == g->gpu[i].mig && back->gpu[i].n_mig == g->gpu[i].n_mig);
                        /* a replicated GPU reads back as such (decode bounded replicas and held) */
                        CHECK(streq(back->gpu[i].sharing, g->gpu[i].sharing) &&
                              back->gpu[i].replicas == g->gpu[i].replicas && back->gpu[i].held == g->gpu[i].held);
                        /* its replica resource too (the node's read into it when not its own) */
                        CHECK(streq(back->gpu[i].replica_resource, g->gpu[i].replica_resource));
                        CHECK(!g->gpu[i].replica_resource[0] || g->gpu[i].sharing[0]);
                        CHECK(!g->gpu[i].sharing[0] ||
                              (g->gpu[i].replicas >= 1 && g->gpu[i].replicas <= CLUSTER_REPLICAS_MAX &&
                               g->gpu[i].held <= g->gpu[i].replicas));
                        for (unsigned k = 0; k < g->gpu[i].n_mig; k++) {
                                const struct cluster_mig_info *a = &g->gpu[i].mig_dev[k], *b = &back->gpu[i].mig_dev[k];
                                CHECK(a->index == b->index && a->mem_mib == b->mem_mib && a->healthy == b->healthy);
                                CHECK(streq(a->uuid, b->uuid) && streq(a->profile, b->profile) &&
                                      streq(a->holder, b->holder));
                        }
                        for (unsigned j = 0; j < g->n_gpus; j++)
                                if (i != j) {
                                        CHECK(back->link[i][j].nvlinks == g->link[i][j].nvlinks);
                                        /* an unknown PCIe level under NVLinks is not written */
                                        CHECK(back->link[i][j].pcie == g->link[i][j].pcie ||
                                              (g->link[i][j].nvlinks && back->link[i][j].pcie == TOPO_LEVEL_UNKNOWN));
                                }
                }
                free(s);
        }
        free(back);
}

/* A decoded pod's placement, written as a scheduler's bind and as the agent's record: both read back to
 * the same GPUs (the record as the agent's, confirmed). */
static void writers(const json_t *pod, const struct cluster_units *u) {
        struct cluster_pod *v = malloc(sizeof *v), *back = malloc(sizeof *back);
        if (!v || !back || cluster_pod_decode_json(pod, u, v, NULL) < 0 || !v->has_assignment)
                goto out;
        uint64_t held[CLUSTER_CONTAINERS_MAX] = { 0 };
        bool any = false;
        for (unsigned k = 0; k < v->req.n; k++)
                any |= (held[k] = v->assign.c[k].gpus) != 0;
        char *text = NULL;
        json_t *rec = json_object();
        CHECK(cluster_bind_annotations(&v->req, &v->assign, v->assigned_node, 5000000, NULL, 0, u, &text) == 0);
        int r = rec ? cluster_agent_record(&v->req, held, v->assigned_node, 5000000, NULL, 0, rec) : -ENOMEM;
        CHECK(r == 0 || (r == -ENODATA && !any));
        json_t *ann[2] = { json_loads(text, 0, NULL), r == 0 ? json_incref(rec) : NULL };
        for (int w = 0; w < 2; w++) {
                json_t *p = ann[w] ? json_deep_copy(pod) : NULL;
                if (!p)
                        continue;
                json_object_set(json_object_get(p, "metadata"), "annotations", ann[w]);
                CHECK(cluster_pod_decode_json(p, u, back, NULL) == 0 && back->has_assignment);
                CHECK(back->source == (w ? CLUSTER_SOURCE_AGENT : CLUSTER_SOURCE_GPUSLICE) && back->confirmed == w);
                for (unsigned k = 0; k < v->req.n; k++)
                        CHECK(back->assign.c[k].gpus == v->assign.c[k].gpus);
                json_decref(p);
        }
        json_decref(ann[0]);
        json_decref(ann[1]);
        json_decref(rec);
        free(text);
out:
        free(v);
        free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *buf = malloc(size + 1);
        struct cluster_node_info *g = calloc(1, sizeof *g);
        if (!buf || !g) {
                free(buf);
                free(g);
                return 0;
        }
        memcpy(buf, data, size);
        buf[size] = 0;
        struct gs_error err = { 0 };
        if (cluster_node_decode(buf, size, g, &err) == 0) {
                CHECK(g->n_gpus <= CLUSTER_GPUS_MAX);
                for (unsigned i = 0; i < g->n_gpus; i++)
                        CHECK(g->link[i][i].pcie == TOPO_LEVEL_SELF);
                round_trip(g);
        }
        free(g);
        /* the text as a pod's spec and as a Node: CPU and memory as kube-scheduler counts them, in range or an error */
        json_t *obj = json_loadb(buf, size, 0, NULL);
        if (obj) {
                uint64_t cpu, mem;
                int q = cluster_pod_requests(obj, &cpu, &mem, &err);
                CHECK(q == 0 || (q == -EINVAL && err.message[0]));
                CHECK(q < 0 || (cpu <= 2ULL << 40 && mem <= (1ULL << 43) + 1));
                q = cluster_node_allocatable(obj, &cpu, &mem, &err);
                CHECK(q == 0 || q == -EINVAL);
                CHECK(q < 0 || (cpu <= 1ULL << 40 && mem <= 1ULL << 44));
                json_decref(obj);
        }
        /* the same text as annotations of a node and of pods, read as inspect reads them */
        json_t *s = json_stringn(buf, size);
        json_t *snap =
                s ? json_pack("{s:[{s:{s:s,s:{s:O}}}],s:[{s:{s:s,s:s,s:s,s:{s:O,s:O,s:O}},"
                              "s:{s:s,s:[{s:s,s:{s:{s:s}}},{s:s,s:{s:{s:s}}}]}}]}",
                              "nodes", "metadata", "name", "n", "annotations", CLUSTER_ANN_GPUS, s, "pods", "metadata",
                              "name", "p", "namespace", "d", "uid", "u", "annotations", CLUSTER_ANN_ASSIGNMENT, s,
                              "ALIYUN_COM_GPU_MEM_IDX", s, "tencent.com/predicate-gpu-idx-0", s, "spec", "nodeName",
                              "n", "containers", "name", "c", "resources", "limits", "nvidia.com/gpu", "1", "name", "f",
                              "resources", "limits", "gpuslice.io/gpu-core", "30")
                  : NULL;
        char *text = snap ? json_dumps(snap, JSON_COMPACT) : NULL;
        struct sched_model *m = NULL;
        struct cluster_units u;
        cluster_units_default(&u);
        writers(json_array_get(json_object_get(snap, "pods"), 0), &u);
        if (text && sched_model_new(&m) == 0) {
                sched_model_keep_details(m, true);
                (void)sched_snapshot_load(m, text, strlen(text), &u, NULL, NULL, &err);
                size_t cur = 0;
                const struct sched_node *n;
                while ((n = sched_model_next_node(m, &cur))) {
                        struct sched_node_records r;
                        if (sched_node_records(n, &r) < 0)
                                continue;
                        CHECK(r.n_gpus == n->n_gpus && r.n_unplaced <= n->n_pods);
                        for (unsigned k = 0; k < r.n_gpus; k++)
                                for (unsigned q = 0; q < r.gpu[k].n_pods; q++)
                                        CHECK(r.gpu[k].pods[q]->node == n);
                        sched_node_records_free(&r);
                }
                sched_model_free(m);
        }
        free(text);
        json_decref(snap);
        json_decref(s);
        free(buf);
        return 0;
}
