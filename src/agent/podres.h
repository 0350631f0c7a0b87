/* SPDX-License-Identifier: Apache-2.0 */
/*
 * podres — kubelet's PodResources List in the agent, owned once:
 *   - the decoder (podres.c, pure: no I/O, no logging): the answer (v1.ListPodResourcesResponse, bytes from a
 *     socket the agent does not control) flattened into state reports, one per (resource, device ID) with the
 *     pod and container that hold it, and the containers kubelet lists (with or without devices);
 *   - the service (podres-service.c): the one connection to kubelet's socket, one call at a time, and the last
 *     answer decoded (a snapshot with the time it was asked). Every reader (podsync, assign-watch, share-restart
 *     through podsync) asks it for an answer no older than it needs, waiting no longer than it may; a SIGHUP that
 *     changes the socket (podres_service_set_socket) is followed by every reader at its next call.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podresources.pb-c.h"
#include "state/state.h"
#include "util/error.h"

/* A container kubelet lists; its devices are rep[first .. first + n) of the reports it came with. */
struct podres_container {
        const char *ns, *pod, *name; /* never NULL ("" when kubelet sent none) */
        size_t first, n;
};

struct podres_reports {
        V1__ListPodResourcesResponse *lr; /* owns the strings the reports point into */
        struct state_report *rep;
        size_t n;
        struct podres_container *containers;
        size_t n_containers;
};

/* 0, -EBADMSG (does not decode), -ENOMEM. *ret is written only on success. */
/* Thread: any; lock: none (pure). */
int podres_decode(const uint8_t *buf, size_t len, struct podres_reports *ret);
/* Frees what podres_decode returned; a zeroed struct is fine. */
/* Thread: any; lock: none (pure). */
void podres_reports_done(struct podres_reports *r);

/* ---- the service (podres-service.c) ---- */

/* How long one List may take: the periodic sync and the patcher wait this long; a kubelet call waits at most
 * PODRES_HANDLER_MS (well inside kubelet's own deadline). */
#define PODRES_CALL_MS 2000
#define PODRES_HANDLER_MS 1000

struct podres_service;

/* One decoded answer, read-only and shared: hold it with podres_service_get, let go with podres_snapshot_put. */
struct podres_snapshot {
        struct podres_reports r;
        uint64_t asked_ms; /* monotonic_ms() when the call that got it began */
        atomic_int refs;   /* the service's */
};

/* socket: kubelet's PodResources socket ("" or NULL: none). 0 or -ENOMEM. Start-up thread. */
/* Thread: the loop, at start; lock: none. */
int podres_service_new(const char *socket, struct podres_service **ret);
/* Any thread once no caller is left. NULL-safe; returns NULL. */
/* Thread: the loop, at teardown after every reader stopped; lock: none. */
struct podres_service *podres_service_free(struct podres_service *s);
/* The socket changed (reload, loop thread): the cached answer is dropped and the next call connects anew;
 * a call in flight to the old socket counts for nobody. Takes the service's lock briefly. */
/* Thread: any; lock: takes the service's lock briefly, never across the call. */
void podres_service_set_socket(struct podres_service *s, const char *socket);
/* An answer asked after since_ms (monotonic ms; 0: any cached one), waiting at most wait_ms for it: the
 * cached one, the one in flight, or a call made now (bounded by what is left of wait_ms and PODRES_CALL_MS).
 * No lock is held across the call: a caller never waits behind another caller's call past its own wait_ms.
 * 0 (*ret held), -ENOENT (no socket), -ETIMEDOUT (not within wait_ms), -EBADMSG (does not decode), -ENOMEM,
 * an rpc error (-ECONNREFUSED, -EREMOTEIO). st (may be NULL): the call's status on an rpc error. Any thread. */
/* Thread: any; lock: takes the service's lock briefly, never across the call. */
int podres_service_get(struct podres_service *s, uint64_t since_ms, int wait_ms, struct podres_snapshot **ret,
                       struct gs_error *st);
/* NULL-safe. Any thread. */
/* Thread: any; lock: takes the service's lock briefly, never across the call. */
void podres_snapshot_put(struct podres_snapshot *snap);
/* The socket asked now (for logs; copied into buf). Any thread. */
/* Thread: any; lock: takes the service's lock briefly, never across the call. */
const char *podres_service_socket(struct podres_service *s, char *buf, size_t len);
/* Count what a kubelet call waited for (peer "podresources" or "pods-list", r its result) in
 * gpuslice_agent_call_waits_total{wait} (docs/metrics.md). Any thread. */
/* Thread: a gRPC handler; lock: none (the metrics' own). */
void podres_handler_wait_count(const char *peer, int r);
