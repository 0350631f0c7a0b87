/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plugin-internal — what plugin.c gives the resources' handlers (whole.c, share.c) and nobody else
 * uses: the response arena, the device part of an Allocate answer, the GetPreferredAllocation frame
 * and the scheduler's decision for a call. Never include it outside src/agent.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/assign.h"
#include "agent/plugin.h"
#include "deviceplugin.pb-c.h"

/* A bump allocator for building one response; everything is freed in one go by arena_free. */
struct arena_block;
struct arena {
        struct arena_block *head;
        bool failed;
};
/* Thread: a gRPC handler; lock: none (the call's own arena). */
void *arena_alloc(struct arena *a, size_t n);
/* Thread: a gRPC handler; lock: none (the call's own arena). */
char *arena_printf(struct arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Thread: a gRPC handler; lock: none. */
void arena_free(struct arena *a);

/* Record a hand-out of the devices in `set` (table indices) under `resource`; PodResources later names the
 * pod and container. A device kubelet hands out again was released by its previous holder: replaced.
 * Caller holds the lock. */
/* Thread: a gRPC handler; lock: the device lock held. */
void plugin_record_handout(struct plugin *p, const char *resource, uint64_t set);
/* A whole hand-out (a GPU or a MIG device) answered: recorded (plugin_record_handout) and, with a sharing
 * profile, told at once (the fractional IDs of these devices turn Unhealthy) and to the fractional
 * service (another container came: no pairing across it). Caller holds the lock. */
/* Thread: a gRPC handler; lock: the device lock held. */
void plugin_record_whole(struct plugin *p, const char *resource, uint64_t set);

/* The container_responses array of a Preferred/Allocate answer, after the bounds every handler
 * applies to the request's container count (1..1024); `what` names the request in errors. */
/* Thread: a gRPC handler; lock: none (the call's own arena). */
enum rpc_code plugin_responses_new(size_t n, const char *what, struct arena *a, void ***ret, struct gs_error *st);

/* Fill the device part of one container's answer for the devices in `set` (table indices):
 * NVIDIA_VISIBLE_DEVICES and device specs (envvar strategy), CDI names (cdi strategy). out->envs
 * gets room for env_room more entries after what this adds. Caller holds the lock. */
/* Thread: a gRPC handler; lock: the device lock held. */
enum rpc_code plugin_fill_devices(struct plugin *p, struct arena *a, uint64_t set, unsigned env_room,
                                  V1beta1__ContainerAllocateResponse *out, struct gs_error *st);

/* The scheduler's decision for this call (assign.h: assign_call_begin on the plugin's watcher; a
 * zeroed ctx when there is none). kubelet sends one container per call: the first container
 * request says the size and (Allocate) the IDs. Before the lock; end with assign_call_end. */
/* Thread: a gRPC handler, before the device lock; lock: none held (assign_call_begin). */
void plugin_assign_preferred(struct plugin *p, enum plugin_kind kind, const V1beta1__PreferredAllocationRequest *in,
                             struct assign_ctx *ax);
/* Thread: a gRPC handler, before the device lock; lock: none held (assign_call_begin). */
void plugin_assign_allocate(struct plugin *p, enum plugin_kind kind, const V1beta1__AllocateRequest *in,
                            struct assign_ctx *ax);

/* One container request of a GetPreferredAllocation: fill `out`, or return an error status. ax:
 * the scheduler's decision for the call (never NULL; inactive when none). */
typedef enum rpc_code (*plugin_prefer_fn)(void *ctx, const struct assign_ctx *ax,
                                          const V1beta1__ContainerPreferredAllocationRequest *cr, unsigned k,
                                          struct arena *a, V1beta1__ContainerPreferredAllocationResponse *out,
                                          struct gs_error *st);
/* The GetPreferredAllocation call around `prefer` for every resource, on a decoded request with the
 * decision made (ax): bounds on the container requests, the lock, a pod the scheduler assigned GPUs
 * to narrows kubelet's available IDs to those GPUs (in place; restored before returning), one answer
 * per container request in order, encode. */
/* Thread: a gRPC handler; lock: takes the device lock per container. */
enum rpc_code plugin_preferred_each(struct plugin *p, V1beta1__PreferredAllocationRequest *in, struct assign_ctx *ax,
                                    plugin_prefer_fn prefer, void *ctx, uint8_t **ret, size_t *ret_len,
                                    struct gs_error *st);
