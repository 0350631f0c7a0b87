/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plugin-internal — what plugin.c (whole GPUs) and share.c (fractions) share and nobody else uses:
 * the response arena and the device part of an Allocate answer. Never include it outside src/agent.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/plugin.h"
#include "deviceplugin.pb-c.h"

/* A bump allocator for building one response; everything is freed in one go by arena_free. */
struct arena_block;
struct arena {
        struct arena_block *head;
        bool failed;
};
void *arena_alloc(struct arena *a, size_t n);
char *arena_printf(struct arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void arena_free(struct arena *a);

/* Fill the device part of one container's answer for the GPUs in `set` (table indices):
 * NVIDIA_VISIBLE_DEVICES and device specs (envvar strategy), CDI names (cdi strategy). out->envs
 * gets room for env_room more entries after what this adds. Caller holds the lock. */
/* The container_responses array of a Preferred/Allocate answer, after the bounds every handler
 * applies to the request's container count (1..1024); `what` names the request in errors. */
enum rpc_code plugin_responses_new(size_t n, const char *what, struct arena *a, void ***ret, struct gs_error *st);

/* One container request of a GetPreferredAllocation: fill `out`, or return an error status. */
typedef enum rpc_code (*plugin_prefer_fn)(void *ctx, const V1beta1__ContainerPreferredAllocationRequest *cr, unsigned k,
                                          struct arena *a, V1beta1__ContainerPreferredAllocationResponse *out,
                                          struct gs_error *st);
/* The GetPreferredAllocation call around `prefer` for every resource: decode, bounds on the
 * container requests, the plugin lock, one answer per container request in order, encode. A pod
 * the scheduler assigned GPUs to narrows kubelet's available IDs to those GPUs (assign.h). */
enum rpc_code plugin_preferred_each(struct plugin *p, enum plugin_kind kind, const uint8_t *req, size_t req_len,
                                    plugin_prefer_fn prefer, void *ctx, uint8_t **ret, size_t *ret_len,
                                    struct gs_error *st);

enum rpc_code plugin_fill_devices(struct plugin *p, struct arena *a, uint64_t set, unsigned env_room,
                                  V1beta1__ContainerAllocateResponse *out, struct gs_error *st);
