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
 * The controller's window: the container's GPU time and launches of the periods not learnt from yet. A
 * period's busy time counts even when nothing was launched in it (a long kernel, a whole-step CUDA graph
 * keeps the GPU busy for many periods after its one launch); the cost of a launch is learnt once the window
 * holds GS_CTL_MIN_LAUNCHES launches, or GS_CTL_MAX_WINDOW_NS has passed with at least one, and the window
 * is then halved (older periods weigh less).
 */
struct gs_ctl_window {
        uint64_t busy_ns, launches, age_ns; /* launches in 1/2^GS_CTL_LAUNCH_SHIFT (halving keeps fractions) */
};
#define GS_CTL_LAUNCH_SHIFT 10u
#define GS_CTL_MIN_LAUNCHES 4u
#define GS_CTL_MAX_WINDOW_NS 5000000000ULL
#define GS_CTL_MAX_INTERVAL_NS 10000000000ULL /* never space launches more than 10 s apart */

/*
 * One controller step's arithmetic (pure, for tests): add the period (length dt_ns, launches made in it,
 * the container's utilization in it, 1/1000 percent) to the window, and when it holds enough, the launch
 * interval that gives the target (1/1000 percent) at the window's cost per launch — smoothed: half old, half
 * new, growing at most ×4 per step. Returns the next interval, 0 for "not throttled".
 */
uint64_t gs_throttle_step(struct gs_ctl_window *w, uint64_t interval_ns, uint64_t dt_ns, uint64_t launches,
                          uint64_t util_milli, uint64_t target_milli) __attribute__((visibility("hidden")));

/* One NVML utilization sample (nvmlProcessUtilizationSample_t's fields the controller reads). */
struct gs_util_sample {
        unsigned pid;
        uint64_t ts_us;
        unsigned sm; /* percent */
};
/*
 * The utilization of the samples newer than last_seen_us (pure, for tests): each PID's samples averaged (NVML
 * may return several per process), summed over the PIDs for which mine(pid) holds into *ret_mine and over all
 * into *ret_all, in 1/1000 percent. Returns the newest timestamp seen (last_seen_us when none is newer) and
 * in *ret_matched whether any sample was the container's.
 */
uint64_t gs_throttle_aggregate(const struct gs_util_sample *s, unsigned n, uint64_t last_seen_us,
                               bool (*mine)(unsigned pid), uint64_t *ret_mine, uint64_t *ret_all, bool *ret_matched)
        __attribute__((visibility("hidden")));
