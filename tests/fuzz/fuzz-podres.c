/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the node agent's PodResources path: kubelet's List answer (v1.ListPodResourcesResponse, from
 * a socket the agent does not control) decoded into reports by podres_decode (src/agent/podres.c,
 * what the agent runs), then state_reconcile'd into a state that already holds allocations.
 * Whatever comes in: no crash, leak or read past the input; the state afterwards holds only valid,
 * distinct entries of owned resources (or of what it held before), within STATE_MAX_ENTRIES, and
 * encodes to a file that decodes again.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "agent/podres.h"
#include "state/state.h"

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
        struct podres_reports pr;
        int d = podres_decode(copy, size, &pr);
        free(copy);
        if (d < 0) {
                CHECK(d == -EBADMSG || d == -ENOMEM);
                return 0;
        }
        const struct state_report *rep = pr.rep;
        size_t nr = pr.n;
        /* the containers partition the reports, in order (podres.h) */
        size_t at = 0;
        for (size_t i = 0; i < pr.n_containers; i++) {
                CHECK(pr.containers[i].first == at && pr.containers[i].ns && pr.containers[i].pod &&
                      pr.containers[i].name);
                at += pr.containers[i].n;
        }
        CHECK(at == nr);
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
        podres_reports_done(&pr);
        return 0;
}
