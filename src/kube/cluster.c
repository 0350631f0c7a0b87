/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/cluster — the node GPU annotation's writer (cluster.h). Its reader, the pods' assignment
 * readers and the cluster model built from them are the scheduler extender's (src/sched/codec.h,
 * model.h): one model of the cluster's GPUs, also behind `gpuslice inspect`. Pure.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kube/cluster.h"
#include "kube/kube.h"
#include "util/util.h"

/* ---- node annotation ----------------------------------------------------------------------- */

int kube_node_gpus_format(const struct topo *t, const bool *healthy, const char *const *reason, char **ret) {
        if (t->n_gpus > KUBE_GPUS_MAX)
                return -E2BIG;
        json_t *o = json_object(), *gpus = json_array();
        if (!o || !gpus) {
                json_decref(o);
                json_decref(gpus);
                return -ENOMEM;
        }
        json_object_set_new(o, "v", json_integer(1));
        if (t->driver_version[0])
                json_object_set_new(o, "driver", json_string(t->driver_version));
        if (t->cuda_version)
                json_object_set_new(o, "cuda", json_integer(t->cuda_version));
        json_object_set_new(o, "nvswitch", json_boolean(t->nvswitch));
        for (unsigned i = 0; i < t->n_gpus; i++) {
                const struct topo_gpu *g = &t->gpu[i];
                json_t *j = json_object();
                json_object_set_new(j, "i", json_integer(g->index));
                json_object_set_new(j, "uuid", json_string(g->uuid));
                json_object_set_new(j, "model", json_string(g->name));
                json_object_set_new(j, "mem", json_integer((json_int_t)(g->memory_total >> 20)));
                if (g->cc_major) {
                        char cc[24];
                        snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
                        json_object_set_new(j, "cc", json_string(cc));
                }
                const char *h = healthy[i] ? "ok" : (reason && reason[i] && reason[i][0] ? reason[i] : "unhealthy");
                json_object_set_new(j, "health", json_string(h));
                json_array_append_new(gpus, j);
        }
        json_object_set_new(o, "gpus", gpus);
        /* upper triangle of the link matrix, one row per GPU */
        size_t cap = (size_t)t->n_gpus * t->n_gpus * 12 + 8, n = 0;
        char *links = malloc(cap);
        if (!links) {
                json_decref(o);
                return -ENOMEM;
        }
        links[0] = 0;
        for (unsigned i = 0; i + 1 < t->n_gpus; i++) {
                if (i)
                        links[n++] = ';';
                for (unsigned j = i + 1; j < t->n_gpus; j++) {
                        /* NVLink pairs keep their PCIe level too: "NV12/PIX" */
                        char b[8];
                        struct topo_link l = t->link[i][j];
                        const char *pcie = l.nvlinks && l.pcie >= TOPO_LEVEL_SYS && l.pcie <= TOPO_LEVEL_PIX
                                                   ? topo_level_name((enum topo_level)l.pcie)
                                                   : NULL;
                        int w = snprintf(links + n, cap - n, "%s%s%s%s", j > i + 1 ? "," : "", topo_link_name(l, b),
                                         pcie ? "/" : "", pcie ? pcie : "");
                        n += (size_t)w;
                }
                links[n] = 0;
        }
        json_object_set_new(o, "links", json_string(links));
        free(links);
        char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (!s)
                return -ENOMEM;
        if (strlen(s) > KUBE_ANNOTATION_MAX) {
                free(s);
                return -E2BIG;
        }
        *ret = s;
        return 0;
}
