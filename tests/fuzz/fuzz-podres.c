/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the node agent's PodResources path: kubelet's List answer (v1.ListPodResourcesResponse, from
 * a socket the agent does not control) decoded and turned into reports the way podresources_sync
 * (src/agent/node.c) does, then state_reconcile'd into a state that already holds allocations.
 * Whatever comes in: no crash, leak or read past the input; the state afterwards holds only valid,
 * distinct entries of owned resources (or of what it held before), within STATE_MAX_ENTRIES, and
 * encodes to a file that decodes again.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podresources.pb-c.h"
#include "state/state.h"

#define CHECK(x)                 \
        do {                     \
                if (!(x))        \
                        abort(); \
        } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool owned(const char *resource, void *userdata) {
        (void)userdata;
        return strcmp(resource, "nvidia.com/gpu") == 0 || strcmp(resource, "gpuslice.io/core") == 0;
}

static void prefill(struct gpuslice_state *s) {
        static const char *ids[] = { "GPU-0", "GPU-1", "GPU-x" };
        for (size_t i = 0; i < 3; i++) {
                struct state_alloc a = { .alloc_time = i == 2 ? 2000 : 10, .gpu_index = (int32_t)i };
                snprintf(a.resource, sizeof a.resource, "nvidia.com/gpu");
                snprintf(a.device_id, sizeof a.device_id, "%s", ids[i]);
                snprintf(a.pod_namespace, sizeof a.pod_namespace, "ns");
                snprintf(a.pod_name, sizeof a.pod_name, "pod-%zu", i);
                snprintf(a.container, sizeof a.container, "c");
                CHECK(state_add(s, &a) == 0);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uint8_t *copy = malloc(size ? size : 1); /* exact size */
        if (!copy)
                return 0;
        memcpy(copy, data, size);
        V1__ListPodResourcesResponse *lr = v1__list_pod_resources_response__unpack(NULL, size, copy);
        free(copy);
        if (!lr)
                return 0;
        size_t cap = 0, nr = 0;
        for (size_t i = 0; i < lr->n_pod_resources; i++)
                for (size_t j = 0; j < lr->pod_resources[i]->n_containers; j++)
                        for (size_t k = 0; k < lr->pod_resources[i]->containers[j]->n_devices; k++)
                                cap += lr->pod_resources[i]->containers[j]->devices[k]->n_device_ids;
        struct state_report *rep = calloc(cap ? cap : 1, sizeof *rep);
        CHECK(rep);
        for (size_t i = 0; i < lr->n_pod_resources; i++) {
                const V1__PodResources *pr = lr->pod_resources[i];
                for (size_t j = 0; j < pr->n_containers; j++) {
                        const V1__ContainerResources *cr = pr->containers[j];
                        for (size_t k = 0; k < cr->n_devices; k++) {
                                const V1__ContainerDevices *cd = cr->devices[k];
                                for (size_t m = 0; m < cd->n_device_ids; m++)
                                        rep[nr++] = (struct state_report){
                                                .resource = cd->resource_name,
                                                .device_id = cd->device_ids[m],
                                                .pod_namespace = pr->namespace_,
                                                .pod_name = pr->name,
                                                .container = cr->name,
                                        };
                        }
                }
        }
        struct gpuslice_state s;
        state_init(&s);
        prefill(&s);
        size_t added = 0, removed = 0, updated = 0, skipped = 0, before = s.n_allocs;
        int r = state_reconcile(&s, rep, nr, owned, NULL, 3000, 1000, &added, &removed, &updated, &skipped);
        if (r < 0)
                CHECK(r == -ENOMEM || r == -E2BIG);
        else {
                CHECK(s.n_allocs == before + added - removed && s.n_allocs <= STATE_MAX_ENTRIES);
                CHECK(added + skipped <= nr);
                for (size_t i = 0; i < s.n_allocs; i++) {
                        CHECK(state_alloc_validate(&s.allocs[i]) == 0);
                        CHECK(owned(s.allocs[i].resource, NULL));
                        for (size_t j = 0; j < i; j++)
                                CHECK(strcmp(s.allocs[i].resource, s.allocs[j].resource) != 0 ||
                                      strcmp(s.allocs[i].device_id, s.allocs[j].device_id) != 0);
                }
                /* the recent entry (alloc_time 2000 >= keep_since) survives even when unreported */
                CHECK(state_find(&s, "nvidia.com/gpu", "GPU-x") != NULL);
                char *out = NULL;
                size_t len = 0;
                CHECK(state_encode(&s, &out, &len) == 0);
                struct gpuslice_state t;
                CHECK(state_decode(out, len, &t) == 0 && t.n_allocs == s.n_allocs);
                state_done(&t);
                free(out);
        }
        state_done(&s);
        free(rep);
        v1__list_pod_resources_response__free_unpacked(lr, NULL);
        return 0;
}
