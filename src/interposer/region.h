/* SPDX-License-Identifier: Apache-2.0 */
/*
 * region — the container's shared region (layout in limits.h): opening/creating it, per-process
 * slots, exact memory admission, recovery from dead processes, and the shared launch throttle.
 *
 * Internal to libgpuslice-cuda.so (and its tests). Lock-free by construction: every cross-process
 * update is one atomic RMW or CAS, so no process can leave anything held. Syscalls happen only in
 * open/claim and on the slow paths (a reservation that does not fit, reclaiming dead slots).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "interposer/limits.h"

/*
 * Map the region named by l->region, creating it (fully initialised before it appears) when missing.
 * -EPROTO when the file is not a region of this ABI or belongs to another container; -errno otherwise.
 */
int gs_region_open(const struct gs_limits *l, struct gs_region **ret);
void gs_region_close(struct gs_region *r);

/* Claim a slot for the calling process (getpid(), its start time). -ENOSPC when all are taken by live processes. */
int gs_region_claim(struct gs_region *r, unsigned *ret_slot);
/* Drop any slot the calling process (getpid(), its start time) holds: one a previous image claimed before
 * execve(). No syscall beyond reading the own start time. */
void gs_region_drop_own(struct gs_region *r);
/* Give the slot back (normal exit); its memory stops counting. */
void gs_region_release(struct gs_region *r, unsigned slot);

/*
 * Whether the driver still holds device memory for the process of slot s, whose owner is dead (its contexts
 * still being torn down, memory another process keeps mapped): then its slot stays, and its memory keeps
 * counting, until the driver frees it. Installed once by the interposer (NVML's per-process figure); NULL:
 * nothing can say, a dead owner's slot goes at once.
 */
typedef bool (*gs_region_held_fn)(const struct gs_region_slot *s);
void gs_region_set_held(gs_region_held_fn fn);

/* Drop slots whose owner is dead (exited, zombie, or PID reused) and whose memory the driver no longer holds
 * (gs_region_set_held). Returns how many. Does syscalls. */
unsigned gs_region_reclaim_dead(struct gs_region *r);

/*
 * gs_region_reclaim_dead, rate-limited, for the memory queries (so that they stop counting a SIGKILLed
 * process's memory promptly): sweeps only when *last_ns (a timestamp owned by the caller, 0 = never) is
 * at least interval_ns before now_ns, and of the callers sharing one *last_ns only the one whose CAS
 * moves it to now_ns sweeps. Slot self (the caller's own, recognised without a syscall; GS_REGION_SLOTS
 * = none) is never dropped. No syscall when no sweep is due; a sweep reads /proc once per other occupied
 * slot. Returns how many slots were dropped.
 */
unsigned gs_region_sweep(struct gs_region *r, unsigned self, uint64_t *last_ns, uint64_t now_ns, uint64_t interval_ns);

/* Bytes used on dev by the container (sum over live slots). */
uint64_t gs_region_used(const struct gs_region *r, unsigned dev);

/*
 * Reserve bytes on dev for slot, so that the container's total never exceeds limit. 0, or -ENOMEM
 * (after one attempt to reclaim dead slots). Nothing is counted on failure.
 */
int gs_region_reserve(struct gs_region *r, unsigned slot, unsigned dev, uint64_t limit, uint64_t bytes);
/* Add bytes the process already holds (measured after the fact: lazily loaded code, a context's memory)
 * to slot on dev without a limit check: the container may go over its limit, and further reservations are
 * refused until it is back under. Bumps admit_seq, so no concurrent reservation commits on a sum without it. */
void gs_region_force(struct gs_region *r, unsigned slot, unsigned dev, uint64_t bytes);
/* Count one refusal on dev (gs_region_device.oom_count, read by the node agent's metrics): the caller's,
 * once per call it refuses, whatever it retried first. */
void gs_region_count_refusal(struct gs_region *r, unsigned dev);
/* Give back bytes reserved earlier by the same slot. */
void gs_region_unreserve(struct gs_region *r, unsigned slot, unsigned dev, uint64_t bytes);

/*
 * The shared launch throttle of dev: reserve the next launch time and return how long the caller must
 * wait first (ns, 0 = go now). now is CLOCK_MONOTONIC ns. Bursts of four intervals, and at least
 * GS_THROTTLE_MIN_BURST_NS, pass without waiting.
 */
#define GS_THROTTLE_MIN_BURST_NS 1000000ULL
uint64_t gs_region_throttle(struct gs_region *r, unsigned dev, uint64_t now);

/* Is the process (pid, start time in clock ticks) alive? Zombies count as dead; a process whose /proc entry
 * is hidden from the caller (hidepid) counts as alive while it exists (signal 0). */
int gs_process_alive(unsigned pid, uint64_t start);
/* Start time of a process in clock ticks since boot (/proc/PID/stat field 22); -errno. */
int gs_process_start(unsigned pid, uint64_t *ret);
