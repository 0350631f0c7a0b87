/* SPDX-License-Identifier: Apache-2.0 */
/*
 * podres — kubelet's PodResources List answer (v1.ListPodResourcesResponse, bytes from a socket
 * the agent does not control) decoded and flattened into state reports: one per (resource,
 * device ID) with the pod and container that hold it. Pure: no I/O, no logging.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "podresources.pb-c.h"
#include "state/state.h"

struct podres_reports {
        V1__ListPodResourcesResponse *lr; /* owns the strings the reports point into */
        struct state_report *rep;
        size_t n;
};

/* 0, -EBADMSG (does not decode), -ENOMEM. *ret is written only on success. */
int podres_decode(const uint8_t *buf, size_t len, struct podres_reports *ret);
/* Frees what podres_decode returned; a zeroed struct is fine. */
void podres_reports_done(struct podres_reports *r);
