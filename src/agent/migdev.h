/* SPDX-License-Identifier: Apache-2.0 */
/*
 * migdev — the MIG resources of the device plugin (docs/mig.md): which resources a node serves under
 * each strategy (NVIDIA's names: `none` ignores MIG, `single` serves nvidia.com/gpu with one device per
 * MIG device when every GPU is in MIG mode with one profile, `mixed` serves nvidia.com/mig-<profile>
 * per profile), and their GetPreferredAllocation (a multi-instance request kept on one parent GPU where
 * it can) and Allocate (the parent's /dev/nvidiaN, the control nodes, the instance's two capability
 * nodes, NVIDIA_VISIBLE_DEVICES=MIG-…, CDI names) on the shared plugin core (plugin.h).
 * Must never: hand out a MIG device of another resource, an unhealthy one (its parent's fault makes it
 * so) or one another driver holds; offer a GPU in MIG mode whole; serve a `single` node that does not
 * fit it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/plugin.h"
#include "config/config.h"

#define MIGDEV_RESOURCE_PREFIX "nvidia.com/mig-"

/* "nvidia.com/mig-1g.10gb" for the profile "1g.10gb" ('+' becomes '.': "1g.10gb+me" → "mig-1g.10gb.me",
 * a resource name has no '+'). 0, or -EINVAL for an empty or malformed profile, -ENAMETOOLONG. */
/* Thread: any; lock: none (pure). */
int migdev_resource_name(const char *profile, char *buf, size_t len);

/* Whether the table fits `single`: every GPU in MIG mode, at least one MIG device, all of one profile
 * (its name in profile). false with the reason in why. Any thread (what devices are never changes). */
/* Thread: the loop, at start; lock: none (the table is not served yet). */
bool migdev_single_fits(const struct devices *d, char *profile, size_t profile_len, char *why, size_t why_len);

/*
 * Add the MIG resources of strategy s to p (before serving), on a table devices_add_mig filled:
 * `mixed`: one per profile present, in first-seen order; `single`: the whole-GPU resource name (plugin
 * option `resource`) for every MIG device — or, when the node does not fit, that resource listing nothing
 * and why in why (the caller says so: log, status); with no GPU in MIG mode at all nothing (the GPUs are
 * served whole, as NVIDIA's plugin does). `none`: nothing. Returns how many were added, or -ENOSPC.
 */
/* Thread: the loop, at start; lock: none (nothing served yet). */
int migdev_setup(struct plugin *p, enum config_mig_strategy s, char *why, size_t why_len);

/* The handlers (rpc_unary_fn; userdata: the MIG resource's struct plugin_service). */
/* Thread: a gRPC handler; lock: the device lock held. */
enum rpc_code migdev_get_preferred(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                                   struct gs_error *st);
/* Thread: a gRPC handler; lock: the device lock held. */
enum rpc_code migdev_allocate(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                              struct gs_error *st);

/* Add MIG resource k's methods (with the shared ones) to a server. */
/* Thread: the loop (register.c); lock: none. */
int migdev_serve(struct plugin *p, unsigned k, struct rpc_server *s);
