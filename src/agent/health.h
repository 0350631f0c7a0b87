/* SPDX-License-Identifier: Apache-2.0 */
/*
 * health — keeps the device table's Healthy/Unhealthy marks true (devices.h), on a thread of its
 * own: it waits on NVML critical-Xid events (ignoring the configured Xids) with the next probe as
 * the wait's timeout, and probes every GPU every HEALTH_PROBE_MS (health_probe), so a lost or
 * refusing GPU turns Unhealthy within about 0.9 s. A GPU turns Healthy again once it has answered
 * normally for the quiet period, counted from its first normal answer after its last fault: a
 * probe's answer, or the probe the thread makes right after an Xid (the time an answer is taken
 * is when the probe returned, never before). Idle, that is one wake-up per probe period.
 * Must never: block the agent's loop on one GPU, or let one GPU's failure touch another's mark.
 */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/devices.h"
#include "nvml/nvml.h"

#define HEALTH_XID_MAX 64
/* Probe period: bounds the detection of faults NVML reports only as errors (lost GPU,
 * NO_PERMISSION, ...) to this plus one probe round — under the 1 s issue 14 asks for every fault
 * kind (agent-health-1s), with room for a probe round of a few ms and some scheduling delay.
 * It is also the idle node's biggest own wake-up rate (1 / period): 900 ms rather than 750 ms
 * keeps the idle agent at 4 wake-ups a second or fewer in all (docs/BENCHMARKS.md). */
#define HEALTH_PROBE_MS 900

struct health {
        struct nvml *nvml;
        struct devices *devices;
        pthread_t thread;
        bool running;        /* started */
        bool thread_running; /* the health thread exists */
        struct nvml_events *events;
        atomic_bool stop;
        pthread_mutex_t lock; /* guards the options below (SIGHUP changes them) */
        pthread_cond_t wake;  /* health_stop wakes a thread sleeping without an event set */
        unsigned ignore[HEALTH_XID_MAX];
        size_t n_ignore;
        uint64_t quiet_ms;
        uint64_t n_xids; /* critical Xids seen (status) */
};

/* Whether an Xid makes a GPU unhealthy (not in the ignore list). */
/* Thread: any; lock: none (pure). */
bool health_xid_is_critical(const unsigned *ignore, size_t n_ignore, unsigned xid);

/* Caller-owned struct; starts the health thread (a node without event support still gets
 * probing). 0 or -errno (thread creation). */
/* Thread: the loop, at start; lock: none (starts the health thread). */
int health_start(struct health *h, struct nvml *n, struct devices *d, const unsigned *ignore, size_t n_ignore,
                 uint64_t quiet_ms);
/* Thread: the loop (agent.c, reload.c); lock: takes h->lock for the options. */
void health_set_options(struct health *h, const unsigned *ignore, size_t n_ignore, uint64_t quiet_ms);
/* Probe every GPU once (the health thread, every HEALTH_PROBE_MS); a normal answer counts at the
 * time the probe returned. Returns when the next GPU counting its quiet period turns healthy if it
 * keeps answering (CLOCK_MONOTONIC ms), 0 none: the thread probes again then, so recovery is listed
 * right when the quiet period ends. */
/* Thread: the health thread; lock: takes the device lock to mark. */
uint64_t health_probe(struct health *h);
/* A critical Xid on table device i: Unhealthy at once (reason "xid N"), then probed: a normal
 * answer starts its quiet period then (a GPU that does not answer starts it at its first normal
 * probe). The health thread's, exposed for tests. */
/* Thread: the health thread; lock: takes the device lock to mark. */
void health_xid(struct health *h, unsigned i, unsigned xid);
/* Stop and join the thread. Safe on a never-started struct that was zeroed. */
/* Thread: the loop, at teardown; lock: takes h->lock to wake the thread, then joins it. */
void health_stop(struct health *h);
