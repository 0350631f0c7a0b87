/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the cluster picture `gpuslice inspect` reads (the one cluster model,
 * src/sched/model.h, fed by src/sched/codec.c's readers): the input is a gpuslice.io/gpus value;
 * it is decoded, written back by the node agent's writer (src/kube/cluster.c) and decoded again to
 * the same GPUs and links; it is also dropped into a node object and into pod annotations
 * (gpuslice, gpushare, gpu-manager) of a snapshot, whose model is read as inspect reads it
 * (sched_node_records). Whatever comes in: no crash; records only name the node's pods and GPUs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fuzz.h"
#include "kube/cluster.h"
#include "sched/codec.h"
#include "util/util.h"

static void round_trip(const struct sched_node_info *g) {
        /* a pair the annotation left without a link has no name to write back (the agent always
         * knows its links) */
        for (unsigned i = 0; i < g->n_gpus; i++)
                for (unsigned j = 0; j < g->n_gpus; j++)
                        if (i != j && !g->link[i][j].nvlinks && g->link[i][j].pcie == TOPO_LEVEL_UNKNOWN)
                                return;
        struct topo *t = malloc(sizeof *t);
        struct sched_node_info *back = calloc(1, sizeof *back);
        bool healthy[SCHED_MAX_GPUS];
        const char *reason[SCHED_MAX_GPUS];
        if (!t || !back)
                goto out;
        topo_init(t);
        t->n_gpus = g->n_gpus;
        strscpy(t->driver_version, g->driver, sizeof t->driver_version);
        for (unsigned i = 0; i < g->n_gpus; i++) {
                t->gpu[i].index = (int)i;
                strscpy(t->gpu[i].uuid, g->gpu[i].uuid, sizeof t->gpu[i].uuid);
                strscpy(t->gpu[i].name, g->gpu[i].model, sizeof t->gpu[i].name);
                t->gpu[i].memory_total = (uint64_t)g->gpu[i].mem_mib << 20;
                healthy[i] = g->gpu[i].healthy;
                reason[i] = g->gpu[i].health;
                for (unsigned j = 0; j < g->n_gpus; j++)
                        t->link[i][j] = g->link[i][j];
        }
        char *s = NULL;
        struct gs_error err = { 0 };
        if (kube_node_gpus_format(t, healthy, reason, &s) == 0) {
                int r = sched_node_annotation_decode(s, strlen(s), back, &err);
                CHECK(r == 0);
                CHECK(back->n_gpus == g->n_gpus);
                for (unsigned i = 0; i < g->n_gpus; i++) {
                        CHECK(back->gpu[i].mem_mib == g->gpu[i].mem_mib);
                        CHECK(back->gpu[i].healthy == g->gpu[i].healthy);
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
out:
        free(back);
        free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *buf = malloc(size + 1);
        struct sched_node_info *g = calloc(1, sizeof *g);
        if (!buf || !g) {
                free(buf);
                free(g);
                return 0;
        }
        memcpy(buf, data, size);
        buf[size] = 0;
        struct gs_error err = { 0 };
        if (sched_node_annotation_decode(buf, size, g, &err) == 0) {
                CHECK(g->n_gpus <= SCHED_MAX_GPUS);
                for (unsigned i = 0; i < g->n_gpus; i++)
                        CHECK(g->link[i][i].pcie == TOPO_LEVEL_SELF);
                round_trip(g);
        }
        free(g);
        /* the same text as annotations of a node and of pods, read as inspect reads them */
        json_t *s = json_stringn(buf, size);
        json_t *snap =
                s ? json_pack("{s:[{s:{s:s,s:{s:O}}}],s:[{s:{s:s,s:s,s:s,s:{s:O,s:O,s:O}},"
                              "s:{s:s,s:[{s:s,s:{s:{s:s,s:s}}}]}}]}",
                              "nodes", "metadata", "name", "n", "annotations", KUBE_ANN_GPUS, s, "pods", "metadata",
                              "name", "p", "namespace", "d", "uid", "u", "annotations", KUBE_ANN_ASSIGNMENT, s,
                              "ALIYUN_COM_GPU_MEM_IDX", s, "tencent.com/predicate-gpu-idx-0", s, "spec", "nodeName",
                              "n", "containers", "name", "c", "resources", "limits", "nvidia.com/gpu", "1",
                              "gpuslice.io/gpu-core", "30")
                  : NULL;
        char *text = snap ? json_dumps(snap, JSON_COMPACT) : NULL;
        struct sched_model *m = NULL;
        struct sched_units u;
        sched_units_default(&u);
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
