/* SPDX-License-Identifier: Apache-2.0 */
/*
 * devices — the node agent's device table (devices.h): the only file that touches its fields.
 * Must never: take another lock while holding the table's, or call out (NVML, a peer) under it.
 */
#include "agent/devices.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rpc/rpc.h"
#include "util/util.h"

struct device {
        struct device_info info;
        bool healthy;
        char reason[96];
        uint64_t ok_since_ms; /* first normal answer since the last fault; 0: none yet */
        bool reserved;        /* devices_reserve: a MIG layout change is about to change it */
        char reserved_reason[96];
};

struct devices {
        pthread_mutex_t lock;
        atomic_uint_fast64_t generation; /* bumped on every change ListAndWatch must push */
        atomic_uint_fast64_t notified;   /* the generation streams and change_fd were last told of */
        atomic_int change_fd;            /* eventfd written on each change, -1 none */
        struct topo topo;                /* the inventory the table was built from */
        uint64_t memory_unit;            /* bytes per memory ID (devices_new), 0: none */
        unsigned max_units;              /* memory IDs per device at most */
        unsigned n;
        struct device dev[DEVICES_MAX];
};

/* The memory IDs a device of `bytes` advertises: min(bytes / unit, max), 0 without a unit. */
static unsigned mem_ids(const struct devices *d, uint64_t bytes) {
        return d->memory_unit ? (unsigned)MIN(bytes / d->memory_unit, (uint64_t)d->max_units) : 0;
}

int devices_new(const struct topo *t, uint64_t memory_unit, unsigned max_units, struct devices **ret) {
        struct devices *d = calloc(1, sizeof *d);
        if (!d)
                return -ENOMEM;
        pthread_mutex_init(&d->lock, NULL);
        d->topo = *t;
        d->memory_unit = memory_unit;
        d->max_units = max_units;
        for (unsigned i = 0; i < t->n_gpus && d->n < DEVICES_MAX; i++) {
                const struct topo_gpu *g = &t->gpu[i];
                if (!g->uuid[0])
                        continue; /* no ID to advertise */
                struct device *x = &d->dev[d->n++];
                strscpy(x->info.id, g->uuid, sizeof x->info.id);
                x->info.kind = DEVICE_GPU;
                x->info.parent = -1;
                x->info.index = g->index;
                x->info.minor = g->minor;
                x->info.numa = g->numa_node;
                x->info.memory_total = g->memory_total;
                x->info.mig_index = -1;
                x->info.n_mem = mem_ids(d, g->memory_total);
                x->healthy = g->state == TOPO_GPU_OK;
                if (!x->healthy)
                        strscpy(x->reason, g->state_text[0] ? g->state_text : "not readable", sizeof x->reason);
        }
        atomic_store(&d->change_fd, -1);
        atomic_store(&d->generation, 1);
        atomic_store(&d->notified, 1);
        *ret = d;
        return 0;
}

struct devices *devices_free(struct devices *d) {
        if (!d)
                return NULL;
        pthread_mutex_destroy(&d->lock);
        free(d);
        return NULL;
}

unsigned devices_count(const struct devices *d) {
        return d->n;
}

const struct device_info *devices_info(const struct devices *d, unsigned i) {
        return &d->dev[i].info;
}

int devices_find(const struct devices *d, const char *id) {
        for (unsigned i = 0; id && i < d->n; i++)
                if (streq(d->dev[i].info.id, id))
                        return (int)i;
        return -1;
}

uint64_t devices_mask_up(const struct devices *d, unsigned i) {
        int parent = d->dev[i].info.parent;
        return (UINT64_C(1) << i) | (parent >= 0 ? UINT64_C(1) << parent : 0);
}

int devices_find_nvml(const struct devices *d, int index) {
        for (unsigned i = 0; i < d->n; i++)
                if (d->dev[i].info.index == index)
                        return (int)i;
        return -1;
}

const struct topo *devices_topo(const struct devices *d) {
        return &d->topo;
}

void devices_lock(struct devices *d) {
        pthread_mutex_lock(&d->lock);
}

void devices_unlock(struct devices *d) {
        pthread_mutex_unlock(&d->lock);
}

/* A MIG device is as healthy as its parent: the parent's fault (an Xid, lost) marks every child. */
static int parent_of(const struct devices *d, unsigned i) {
        int p = d->dev[i].info.parent;
        return p >= 0 && (unsigned)p < d->n ? p : -1;
}

/* Usable: healthy and not reserved (devices_reserve); why not, when it is not. */
static bool usable(const struct device *x) {
        return x->healthy && !x->reserved;
}

static const char *unusable_reason(const struct device *x) {
        return x->reserved ? x->reserved_reason : x->reason;
}

bool devices_healthy(const struct devices *d, unsigned i) {
        if (i >= d->n || !usable(&d->dev[i]))
                return false;
        int p = parent_of(d, i);
        return p < 0 || usable(&d->dev[p]);
}

const char *devices_reason(const struct devices *d, unsigned i) {
        if (i >= d->n)
                return "";
        int p = parent_of(d, i);
        return p >= 0 && !usable(&d->dev[p]) ? unusable_reason(&d->dev[p]) : unusable_reason(&d->dev[i]);
}

void devices_reserve(struct devices *d, unsigned i, const char *reason) {
        if (i >= d->n)
                return;
        d->dev[i].reserved = true;
        strscpy(d->dev[i].reserved_reason, reason, sizeof d->dev[i].reserved_reason);
        devices_touch(d);
}

void devices_release(struct devices *d, unsigned i) {
        if (i >= d->n || !d->dev[i].reserved)
                return;
        d->dev[i].reserved = false;
        d->dev[i].reserved_reason[0] = 0;
        devices_touch(d);
}

/* ---- MIG devices (devices_add_mig) ---- */

static void add_mig_device(struct devices *d, unsigned parent, const struct mig_device *m) {
        const struct device_info *g = &d->dev[parent].info;
        struct device *x = &d->dev[d->n++];
        strscpy(x->info.id, m->uuid, sizeof x->info.id);
        x->info.kind = DEVICE_MIG;
        x->info.parent = (int)parent;
        x->info.index = g->index;
        x->info.minor = g->minor;
        x->info.numa = g->numa;
        x->info.memory_total = m->memory_total;
        x->info.n_mem = mem_ids(d, m->memory_total); /* shared like a small GPU (docs/mig.md) */
        x->info.mig_index = (int)m->index;
        x->info.gi = m->gi;
        x->info.ci = m->ci;
        strscpy(x->info.profile, m->profile, sizeof x->info.profile);
        x->info.sms = m->sms;
        x->healthy = true;
}

int devices_add_mig(struct devices *d, const struct mig_node *m) {
        unsigned n_gpus = d->n, added = 0;
        int r = 0;
        for (unsigned i = 0; i < n_gpus; i++) {
                if (d->dev[i].info.kind != DEVICE_GPU)
                        continue;
                /* the inventory position of this GPU: its MIG side is m->gpu[position] */
                for (unsigned t = 0; t < d->topo.n_gpus && t < m->n_gpus; t++) {
                        const struct mig_gpu *mg = &m->gpu[t];
                        if (!streq(d->topo.gpu[t].uuid, d->dev[i].info.id) || mg->mode != 1)
                                continue;
                        d->dev[i].info.mig_mode = true;
                        for (unsigned k = 0; k < mg->n_devices; k++) {
                                if (!mg->dev[k].uuid[0])
                                        continue; /* no ID to advertise */
                                if (d->n >= DEVICES_MAX) {
                                        r = -ENOSPC;
                                        continue;
                                }
                                add_mig_device(d, i, &mg->dev[k]);
                                added++;
                        }
                }
        }
        return r < 0 ? r : (int)added;
}

void devices_health(struct devices *d, unsigned i, struct device_health *ret) {
        pthread_mutex_lock(&d->lock);
        ret->healthy = devices_healthy(d, i);
        strscpy(ret->reason, devices_reason(d, i), sizeof ret->reason);
        pthread_mutex_unlock(&d->lock);
}

bool devices_fault(struct devices *d, unsigned i, const char *reason) {
        bool was = false;
        pthread_mutex_lock(&d->lock);
        if (i < d->n) {
                struct device *x = &d->dev[i];
                was = x->healthy;
                x->healthy = false;
                strscpy(x->reason, reason, sizeof x->reason);
                x->ok_since_ms = 0; /* the quiet period starts at the next normal answer */
                if (was)
                        devices_changed(d);
        }
        pthread_mutex_unlock(&d->lock);
        return was;
}

void devices_answered(struct devices *d, unsigned i, uint64_t now_ms) {
        pthread_mutex_lock(&d->lock);
        if (i < d->n && !d->dev[i].healthy && d->dev[i].ok_since_ms == 0)
                d->dev[i].ok_since_ms = MAX(now_ms, (uint64_t)1);
        pthread_mutex_unlock(&d->lock);
}

bool devices_probe_ok(struct devices *d, unsigned i, uint64_t now_ms, uint64_t quiet_ms) {
        bool turned = false;
        pthread_mutex_lock(&d->lock);
        if (i < d->n && !d->dev[i].healthy) {
                struct device *x = &d->dev[i];
                if (x->ok_since_ms == 0)
                        x->ok_since_ms = MAX(now_ms, (uint64_t)1);
                /* a quiet period of 0 turns healthy on the first normal answer */
                if (now_ms >= x->ok_since_ms + quiet_ms) {
                        x->healthy = true;
                        x->reason[0] = 0;
                        x->ok_since_ms = 0;
                        turned = true;
                        devices_changed(d);
                }
        }
        pthread_mutex_unlock(&d->lock);
        return turned;
}

uint64_t devices_quiet_due(struct devices *d, unsigned i, uint64_t quiet_ms) {
        uint64_t due = 0;
        pthread_mutex_lock(&d->lock);
        if (i < d->n && !d->dev[i].healthy && d->dev[i].ok_since_ms)
                due = d->dev[i].ok_since_ms + quiet_ms;
        pthread_mutex_unlock(&d->lock);
        return due;
}

uint64_t devices_generation(const struct devices *d) {
        return atomic_load(&d->generation);
}

void devices_notify(struct devices *d) {
        uint64_t g = atomic_load(&d->generation);
        if (atomic_exchange(&d->notified, g) == g)
                return;
        rpc_streams_wake();
        int fd = atomic_load(&d->change_fd);
        if (fd >= 0) {
                uint64_t one = 1;
                (void)!write(fd, &one, sizeof one); /* EAGAIN: a wake-up is pending anyway */
        }
}

void devices_touch(struct devices *d) {
        atomic_fetch_add(&d->generation, 1);
}

void devices_changed(struct devices *d) {
        devices_touch(d);
        devices_notify(d);
}

void devices_set_change_fd(struct devices *d, int fd) {
        atomic_store(&d->change_fd, fd);
}

int devices_wait_change(const struct devices *d, struct rpc_stream *s, uint64_t seen, int timeout_ms) {
        return rpc_stream_wait_change(s, &d->generation, seen, timeout_ms);
}
