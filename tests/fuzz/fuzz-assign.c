/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the node agent's reading of a pod's assignment and the call matching
 * (src/agent/assign.c). The input is a pod object (JSON); it is also dropped as the value of each
 * assignment annotation of a fixed pod. Whatever comes in: no crash; a parsed pod stays within
 * bounds (containers, GPUs per container, every whole/fractional container assigned as many GPUs as
 * it asks); matching it against every kind of call returns a pod and container that exist, and an
 * Allocate matched only on the GPUs it was assigned. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/assign.h"
#include "fuzz.h"
#include "util/util.h"

static const struct assign_names NAMES = { .name = { "nvidia.com/gpu", "gpuslice.io/gpu-core",
                                                     "gpuslice.io/gpu-memory" } };

static void check_pod(const struct assign_pod *p) {
        CHECK(p->n <= ASSIGN_CONTAINERS_MAX);
        /* every container kept asks a resource of ours, and a parsed assignment is complete */
        for (unsigned k = 0; k < p->n; k++) {
                unsigned asks = p->c[k].req[PLUGIN_WHOLE] + p->c[k].req[PLUGIN_CORE] + p->c[k].req[PLUGIN_MEMORY];
                CHECK(asks > 0 && p->c[k].gpus != 0);
                CHECK((unsigned)__builtin_popcountll(p->c[k].gpus) <= ASSIGN_GPUS_MAX);
        }
        struct assign_seen_container sc = { .ns = "default", .container = "main" };
        strscpy(sc.pod, p->name, sizeof sc.pod);
        struct assign_seen seen = { .n = 1, .c = &sc };
        for (unsigned kind = 0; kind < _PLUGIN_KIND_MAX; kind++)
                for (unsigned size = 1; size <= 200; size = size * 3 + 1)
                        for (int alloc = 0; alloc < 2; alloc++) {
                                struct assign_call c = { .kind = (enum plugin_kind)kind,
                                                         .size = size,
                                                         .allocate = alloc,
                                                         .ids_gpus = alloc ? 5 : 0 };
                                struct assign_decision d;
                                CHECK(assign_match(p, 1, alloc ? &seen : NULL, &c, &d) == 0);
                                if (d.verdict != ASSIGN_NONE) {
                                        CHECK(d.pod == 0 && d.container >= 0 && (unsigned)d.container < p->n);
                                        CHECK(p->c[d.container].req[kind] == size);
                                }
                                if (d.verdict == ASSIGN_MATCH && alloc)
                                        CHECK(d.gpus == 5);
                        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct assign_pod *p = malloc(sizeof *p);
        if (!p)
                return 0;
        json_t *j = json_loadb((const char *)data, size, 0, NULL);
        if (j && assign_pod_parse(j, "n", &NAMES, p) == 0)
                check_pod(p);
        json_decref(j);
        json_t *s = json_stringn((const char *)data, size);
        static const char *const keys[] = { "gpuslice.io/assignment", "tencent.com/predicate-gpu-idx-0",
                                            "ALIYUN_COM_GPU_MEM_IDX" };
        for (size_t k = 0; s && k < ELEMENTSOF(keys); k++) {
                j = json_pack("{s:{s:s,s:s,s:s,s:{s:O}},s:{s:s,s:[{s:s,s:{s:{s:s,s:s}}}]}}", "metadata", "name", "p",
                              "namespace", "default", "creationTimestamp", "2026-01-01T00:00:00Z", "annotations",
                              keys[k], s, "spec", "nodeName", "n", "containers", "name", "main", "resources", "limits",
                              "gpuslice.io/gpu-core", "30", "gpuslice.io/gpu-memory", "4");
                if (j && assign_pod_parse(j, "n", &NAMES, p) == 0)
                        check_pod(p);
                json_decref(j);
        }
        json_decref(s);
        free(p);
        return 0;
}
