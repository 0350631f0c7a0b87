/* SPDX-License-Identifier: Apache-2.0 */
/*
 * devices — the node agent's device table: the devices it serves (today one per GPU NVML lists with
 * a UUID), each one's health, the table's generation, and the agent's lock. devices.c is the only
 * file that reads or writes a table field; everything else goes through these functions.
 *
 * The table is keyed by device ID. A device has a kind and may have a parent (another device of the
 * table it is part of): whole GPUs have none. MIG instances will be devices of their own, children
 * of their GPU, whose health follows the parent's (a fault of the GPU marks its instances); shares
 * of a device (core percent, memory units) are not devices of the table but IDs of the resources
 * that serve it (share-id.h). A DRA driver prepares its claims on the same table and lock.
 *
 * The lock (devices_lock) guards the health kept here and, by rule, the data other files keep about
 * these devices and must decide on together with their health: the allocation record and options of
 * plugin.c, the fractional book of share.c. A decision reads health and holders under this one lock.
 * What a device is (devices_info: ID, kind, parent, NVML index, memory) never changes after
 * devices_new and is read without it. A reservation (devices_reserve: a GPU whose MIG layout is about to
 * change) makes a device unusable like a fault, until released.
 *
 * Every change a kubelet must see (health here, holders elsewhere) bumps the generation;
 * devices_changed also tells: it wakes the ListAndWatch streams (rpc_streams_wake) and writes the
 * change fd (the agent's loop: its "devices changed" hooks).
 * Must never: let one device's fault mark another (but its children), or block: no NVML, no peer.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "mig/mig.h"
#include "topo/topo.h"

struct rpc_stream;

#define DEVICES_MAX TOPO_MAX_GPUS

enum device_kind {
        DEVICE_GPU = 0, /* a whole GPU (an NVML device) */
        DEVICE_MIG,     /* a MIG device (a compute instance) of its parent GPU: devices_add_mig */
};

/* What a device is: fixed from devices_new on; read without the lock. */
struct device_info {
        char id[96]; /* device ID: the GPU UUID */
        enum device_kind kind;
        int parent;            /* table index of the device this one is part of; -1: none */
        int index;             /* NVML index */
        int minor;             /* /dev/nvidia<minor>, -1 unknown */
        int numa;              /* -1 unknown */
        uint64_t memory_total; /* bytes (NVML) */
        unsigned n_mem;        /* memory IDs the memory resource advertises: min(memory / unit, max); a
                                * MIG device's from its own memory, a GPU in MIG mode's are never used */
        /* MIG (devices_add_mig): a GPU in MIG mode is served as its MIG devices, never whole */
        bool mig_mode;                      /* DEVICE_GPU: MIG on, with its MIG devices in the table */
        int mig_index;                      /* DEVICE_MIG: MIG index on its parent (-1 for a GPU) */
        unsigned gi, ci;                    /* DEVICE_MIG: GPU and compute instance ids */
        char profile[MIG_PROFILE_NAME_MAX]; /* DEVICE_MIG: "1g.10gb" */
        unsigned sms;                       /* DEVICE_MIG: multiprocessors */
};

/* A device's health as one copy (devices_health). */
struct device_health {
        bool healthy;
        char reason[96]; /* why unhealthy ("xid 79", "GPU_IS_LOST"); "" when healthy */
};

struct devices;

/* The table of an inventory: one device per GPU with a UUID (at most DEVICES_MAX); GPUs NVML could
 * not read start Unhealthy. memory_unit: bytes one memory ID stands for (0: none), at most max_units
 * IDs per device. 0 or -ENOMEM. */
/* Thread: the loop, at start; lock: none. */
int devices_new(const struct topo *t, uint64_t memory_unit, unsigned max_units, struct devices **ret);
/* Thread: the loop, at teardown; lock: none. */
struct devices *devices_free(struct devices *d); /* NULL-safe; returns NULL */
/* Add the MIG devices of every GPU of the table with MIG on in m (m->gpu[i] belongs to the inventory's
 * gpu[i]) as DEVICE_MIG children of their GPU, which is marked mig_mode. Before the table is shared
 * (no lock). Returns how many were added, or -ENOSPC when the table could not hold them all (those
 * that fit are added). A child's health follows its parent's: devices_healthy is false while the
 * parent is unhealthy, with the parent's reason. */
/* Thread: the loop, at start (before any thread reads the table); lock: none. */
int devices_add_mig(struct devices *d, const struct mig_node *m);

/* ---- what the devices are (any thread, no lock) ---- */
/* Thread: any; lock: none (what a device is never changes). */
unsigned devices_count(const struct devices *d);
/* Thread: any; lock: none (fixed). */
const struct device_info *devices_info(const struct devices *d, unsigned i); /* i < devices_count */
/* Thread: any; lock: none (fixed). */
int devices_find(const struct devices *d, const char *id); /* table index or -1 */
/* Thread: any; lock: none (fixed). */
int devices_find_nvml(const struct devices *d, int index); /* by NVML index, or -1 */
/* The mask of device i and its parent (a MIG device's GPU): a claim of either keeps i from use. */
/* Thread: any; lock: none (fixed). */
uint64_t devices_mask_up(const struct devices *d, unsigned i);
/* Thread: any; lock: none (fixed). */
const struct topo *devices_topo(const struct devices *d); /* the inventory */

/* ---- the lock ---- */
/* Thread: any; lock: takes the device lock (never while calling NVML or a peer). */
void devices_lock(struct devices *d);
/* Thread: the holder; lock: releases the device lock. */
void devices_unlock(struct devices *d);

/* ---- health ---- */
/* Caller holds the lock. */
/* Thread: any; lock: the device lock held (devices_lock). */
bool devices_healthy(const struct devices *d, unsigned i);
/* Thread: any; lock: the device lock held (devices_lock). */
const char *devices_reason(const struct devices *d, unsigned i);
/* Take the lock. */
/* Thread: any; lock: takes the device lock. */
void devices_health(struct devices *d, unsigned i, struct device_health *ret);
/* A fault (an Xid, a failed probe): Unhealthy with `reason`; its quiet period starts only with a
 * normal answer after this. Returns whether it was healthy (then the change is told). */
/* Thread: the health thread; lock: takes the device lock. */
bool devices_fault(struct devices *d, unsigned i, const char *reason);
/* A normal answer at now_ms from a device that had a fault: its quiet period starts then, unless it
 * runs already. Never turns it healthy (the next probe does). */
/* Thread: the health thread; lock: takes the device lock. */
void devices_answered(struct devices *d, unsigned i, uint64_t now_ms);
/* A probe's normal answer at now_ms: starts the quiet period if none runs; after quiet_ms of
 * normal answers (0: at once) the device is Healthy again. Returns true when it turned healthy. */
/* Thread: the health thread; lock: takes the device lock. */
bool devices_probe_ok(struct devices *d, unsigned i, uint64_t now_ms, uint64_t quiet_ms);
/* When an unhealthy device counting its quiet period turns healthy if it keeps answering (ms),
 * 0 when it counts none. */
/* Thread: the health thread; lock: takes the device lock. */
uint64_t devices_quiet_due(struct devices *d, unsigned i, uint64_t quiet_ms);

/* ---- reservation: a GPU whose MIG layout is about to change (miglayout.c) ---- */
/* Caller holds the lock (the same hold that found the GPU idle), and calls devices_changed after unlocking.
 * A reserved device and its children are not healthy (devices_healthy false, devices_reason the reservation's
 * `reason`), so no Allocate, preferred allocation, share or DRA prepare takes them; a health probe does not
 * clear it: only devices_release, or the agent starting again on a new table. */
/* Thread: any (miglayout.c, mps.c from the loop; dra-link.c also from the DRA driver's); lock: the device lock held. */
void devices_reserve(struct devices *d, unsigned i, const char *reason);
/* Thread: any (as devices_reserve); lock: the device lock held. */
void devices_release(struct devices *d, unsigned i);

/* ---- changes ---- */
/* Thread: any; lock: none (atomic). */
uint64_t devices_generation(const struct devices *d); /* any thread */
/* A change kubelet must see: bump the generation and tell (streams, change fd). Any thread, lock
 * held or not. */
/* Thread: any; lock: held or not. */
void devices_changed(struct devices *d);
/* Bump the generation without telling: devices_notify tells later (the agent calls it after every
 * RPC, so a handler's change is never missed). */
/* Thread: any; lock: held or not. */
void devices_touch(struct devices *d);
/* Tell of a generation bumped since the last telling; cheap when nothing changed. */
/* Thread: the RPC observer (a gRPC thread); lock: none. */
void devices_notify(struct devices *d);
/* The eventfd written on each change (the agent's loop), -1: none. */
/* Thread: the loop (start, teardown); lock: none. */
void devices_set_change_fd(struct devices *d, int fd);
/* A ListAndWatch stream sleeps until the generation differs from `seen` (rpc_stream_wait_change):
 * 1 changed, 0 timed out, -errno the stream ended. */
/* Thread: a ListAndWatch stream's thread; lock: none held (waits on the table's condition). */
int devices_wait_change(const struct devices *d, struct rpc_stream *s, uint64_t seen, int timeout_ms);
