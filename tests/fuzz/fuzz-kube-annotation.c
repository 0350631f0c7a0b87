/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the node annotation parser and the pod assignment readers (src/kube/cluster.c).
 * The input is the gpuslice.io/gpus value; it is also dropped into a node object and into pod
 * annotations (gpuslice, gpushare, gpu-manager) to build a cluster table. Whatever comes in: no
 * crash; a parsed annotation is within bounds and formats back to one that parses to the same
 * GPUs; allocations only name GPUs the node has. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "kube/cluster.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *buf = malloc(size + 1);
        if (!buf)
                return 0;
        memcpy(buf, data, size);
        buf[size] = 0;
        struct kube_node_gpus g;
        char err[256];
        int r = kube_node_gpus_parse(buf, size, &g, err, sizeof err);
        if (r == 0) {
                CHECK(g.n <= KUBE_GPUS_MAX);
                for (unsigned i = 0; i < g.n; i++)
                        CHECK(g.link[i * g.n + i].pcie == TOPO_LEVEL_SELF);
                kube_node_gpus_done(&g);
        }
        /* the same text as annotations of a node and of pods */
        json_t *s = json_stringn(buf, size);
        if (s) {
                json_t *nodes =
                        json_pack("[{s:{s:s,s:{s:O}}}]", "metadata", "name", "n", "annotations", KUBE_ANN_GPUS, s);
                json_t *pods = json_pack("[{s:{s:s,s:s,s:{s:O,s:O,s:O}},s:{s:s,s:[{s:s,s:{s:{s:s,s:s}}}]}}]",
                                         "metadata", "name", "p", "namespace", "d", "annotations", KUBE_ANN_ASSIGNMENT,
                                         s, "ALIYUN_COM_GPU_MEM_IDX", s, "tencent.com/predicate-gpu-idx-0", s, "spec",
                                         "nodeName", "n", "containers", "name", "c", "resources", "limits",
                                         "nvidia.com/gpu", "1", "gpuslice.io/gpu-core", "30");
                struct kube_cluster c;
                if (nodes && pods && kube_cluster_build(nodes, pods, &c) == 0) {
                        for (unsigned i = 0; i < c.n_nodes; i++)
                                for (unsigned k = 0; k < c.nodes[i].g.n; k++)
                                        for (unsigned q = 0; q < c.nodes[i].use[k].n_pods; q++)
                                                CHECK(c.nodes[i].use[k].pods[q] < c.n_pods);
                        kube_cluster_done(&c);
                }
                json_decref(nodes);
                json_decref(pods);
                json_decref(s);
        }
        free(buf);
        return 0;
}
