/* SPDX-License-Identifier: Apache-2.0 */
/*
 * timeslice — time-slicing as NVIDIA's device plugin does it (sharing.timeSlicing, docs/sharing.md): each GPU of
 * the replicated set advertised as N replicas, device IDs "<uuid>::<j>" (j = 0..N-1), under the whole-GPU name
 * (nvidia.com/gpu, beside the plain UUIDs of the GPUs that are not replicated) or under their own name
 * (nvidia.com/gpu.shared: PLUGIN_REPLICA). Allocate hands a container the GPUs of its replicas
 * (NVIDIA_VISIBLE_DEVICES=<uuid>, no limit: no isolation), refuses more than one replica with
 * failRequestsGreaterThanOne, and records every replica ID (state.h) so a restart and PodResources keep who holds
 * which. GetPreferredAllocation spreads: each pick is a replica of the GPU with the fewest replicas held.
 *
 * The ID codec (replica-id.c) is pure; the handlers (timeslice.c) run on the plugin core (plugin.h) and its lock.
 * Must never: hand out a replica of a GPU held whole, in fractions or by another driver, or an ID that does
 * not format back to itself.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/devices.h"
#include "agent/plugin.h"

#define TIMESLICE_REPLICAS_MAX 1024 /* per GPU (nvconfig.h's bound) */
#define TIMESLICE_ID_MAX 112        /* "<device id>::<j>" */
#define TIMESLICE_MPS_ROOT "/mps"   /* NVIDIA's: a client's pipe dir is /mps/<resource>/pipe in the container */

/* "<gpu>::<j>" into buf (always terminated). */
void timeslice_format_id(const char *gpu, unsigned j, char *buf, size_t len);
/* A replica ID of a GPU of table d (not in MIG mode) with j < n, canonical: 0 with its table index and j, or
 * -EINVAL. Pure. */
int timeslice_parse_id(const struct devices *d, const char *id, unsigned n, unsigned *ret_gpu, unsigned *ret_j);

/* The handlers (rpc_unary_fn; userdata: the struct plugin_service of PLUGIN_WHOLE or PLUGIN_REPLICA). */
enum rpc_code timeslice_get_preferred(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret,
                                      size_t *ret_len, struct gs_error *st);
enum rpc_code timeslice_allocate(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                                 struct gs_error *st);
/* Every GPU the whole-GPU resource would list is time-sliced under another name: that resource has nothing to
 * serve (NVIDIA's plugin then advertises only <name>.shared). */
bool timeslice_all_renamed(const struct plugin *p);
/* Serve svc's resource (PLUGIN_WHOLE when a replica set keeps the whole-GPU name, else a set's PLUGIN_REPLICA
 * service, plugin_replica_service) with these and plugin_serve_common's handlers. */
int timeslice_serve(struct plugin_service *svc, struct rpc_server *s);
