/* SPDX-License-Identifier: Apache-2.0 */
/*
 * throttle — the compute share: launches pass through a shared rate limiter (region.c,
 * gs_region_throttle), whose rate a feedback controller sets from the container's measured SM
 * utilization (NVML per-process samples of the container's processes) and its launch count:
 *
 *     cost per launch  c = u / n            (utilization points per launch over the last period)
 *     allowed launches n* = share / c       → interval = period · u / (share · n), smoothed
 *
 * The controller learns what a launch costs from what the GPU reports, so its gain does not depend on
 * the GPU's SM count or the kernels' grid sizes. One process per container steps it each period
 * (elected with a CAS in the region); all processes of the container obey the same limiter.
 *
 * Internal to libgpuslice-cuda.so.
 */
#pragma once

#include <stdbool.h>

#include "interposer/limits.h"

#define GS_CTL_PERIOD_NS 100000000ULL /* one controller step per 100 ms (NVML's sampling scale) */

/* Remember the device map for the controller (called once, after cuInit mapped the devices). */
void gs_throttle_setup(struct gs_region *r, const struct gs_limits *l, const int *dev_li,
                       const char (*uuid)[GS_UUID_MAX], unsigned n_ordinals) __attribute__((visibility("hidden")));

/* Before a launch on limited device li: count it, start the controller on first use, wait if over the rate. */
void gs_throttle_launch(struct gs_region *r, unsigned slot, unsigned li) __attribute__((visibility("hidden")));

/* In a forked child: the controller thread did not survive the fork. */
void gs_throttle_atfork_child(void) __attribute__((visibility("hidden")));

/*
 * One controller step's arithmetic (pure, for tests): the new launch interval from the current one,
 * the period length dt_ns, the launches made in it, the measured utilization and the target (both in
 * 1/1000 percent). Returns 0 for "not throttled".
 */
uint64_t gs_throttle_next_interval(uint64_t interval_ns, uint64_t dt_ns, uint64_t launches, uint64_t util_milli,
                                   uint64_t target_milli) __attribute__((visibility("hidden")));
