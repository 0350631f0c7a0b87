/* SPDX-License-Identifier: Apache-2.0 */
/*
 * whole — the whole-GPU resource (nvidia.com/gpu, one device ID per GPU: its UUID) on the shared
 * plugin core (plugin.h): GetPreferredAllocation picks with the topology-aware allocator (avoiding
 * GPUs held per our records, never offering unhealthy or shared ones), Allocate answers the devices,
 * their environment and CDI names, and records the hand-out. A pod the scheduler assigned GPUs to
 * gets exactly those (assign.h).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "agent/plugin.h"

/* The handlers (rpc_unary_fn; userdata: the struct plugin). */
/* Thread: a gRPC handler; lock: takes the device lock itself. */
enum rpc_code whole_get_preferred(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                                  struct gs_error *st);
/* Thread: a gRPC handler; lock: takes the device lock itself. */
enum rpc_code whole_allocate(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                             struct gs_error *st);

/* Add the whole-GPU resource's methods (these and plugin_serve_common's) to a server. */
/* Thread: the loop (register.c); lock: none. */
int whole_serve(struct plugin *p, struct rpc_server *s);
