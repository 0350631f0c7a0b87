/* SPDX-License-Identifier: Apache-2.0 */
/* podres — PodResources List answer → state reports and containers (see podres.h). */
#include "agent/podres.h"

#include <errno.h>
#include <stdlib.h>

static const char *str(const char *s) {
        return s ? s : "";
}

int podres_decode(const uint8_t *buf, size_t len, struct podres_reports *ret) {
        V1__ListPodResourcesResponse *lr = v1__list_pod_resources_response__unpack(NULL, len, buf);
        if (!lr)
                return -EBADMSG;
        size_t cap = 0, n = 0, n_ctr = 0, cap_ctr = 0;
        for (size_t i = 0; i < lr->n_pod_resources; i++)
                for (size_t j = 0; j < lr->pod_resources[i]->n_containers; j++) {
                        cap_ctr++;
                        for (size_t k = 0; k < lr->pod_resources[i]->containers[j]->n_devices; k++)
                                cap += lr->pod_resources[i]->containers[j]->devices[k]->n_device_ids;
                }
        struct state_report *rep = calloc(cap ? cap : 1, sizeof *rep);
        struct podres_container *ctr = calloc(cap_ctr ? cap_ctr : 1, sizeof *ctr);
        if (!rep || !ctr) {
                free(rep);
                free(ctr);
                v1__list_pod_resources_response__free_unpacked(lr, NULL);
                return -ENOMEM;
        }
        for (size_t i = 0; i < lr->n_pod_resources; i++) {
                const V1__PodResources *pr = lr->pod_resources[i];
                for (size_t j = 0; j < pr->n_containers; j++) {
                        const V1__ContainerResources *cr = pr->containers[j];
                        ctr[n_ctr] = (struct podres_container){
                                .ns = str(pr->namespace_), .pod = str(pr->name), .name = str(cr->name), .first = n
                        };
                        for (size_t k = 0; k < cr->n_devices; k++) {
                                const V1__ContainerDevices *cd = cr->devices[k];
                                for (size_t m = 0; m < cd->n_device_ids; m++)
                                        rep[n++] = (struct state_report){
                                                .resource = str(cd->resource_name),
                                                .device_id = cd->device_ids[m],
                                                .pod_namespace = pr->namespace_,
                                                .pod_name = pr->name,
                                                .container = cr->name,
                                        };
                        }
                        ctr[n_ctr].n = n - ctr[n_ctr].first;
                        n_ctr++;
                }
        }
        *ret = (struct podres_reports){ .lr = lr, .rep = rep, .n = n, .containers = ctr, .n_containers = n_ctr };
        return 0;
}

void podres_reports_done(struct podres_reports *r) {
        free(r->rep);
        free(r->containers);
        if (r->lr)
                v1__list_pod_resources_response__free_unpacked(r->lr, NULL);
        *r = (struct podres_reports){ 0 };
}
