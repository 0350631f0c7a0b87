/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state — the DRA driver's shared state as its parts reach it (dra-internal.h): the log callback, the
 * device table's view of each GPU, the slice input, the node's MIG side, the publisher's wake-up.
 * prepare.c, publish.c and kubelet.c use these; dra.c, which starts those parts, uses them too, so they
 * live below all of them (no file cycle: scripts/lint-cycles.py). Must never log but through the
 * caller's callback, or block a caller of dra_update on I/O.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra/dra.h"
#include "dra/dra-internal.h"
#include "rpc/rpc.h"
#include "util/util.h"

void dra_log(struct dra *d, enum dra_log_level level, const char *msg, const char *fmt, ...) {
        if (!d->ops.log)
                return;
        char fields[768];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(fields, sizeof fields, fmt, ap);
        va_end(ap);
        d->ops.log(d->ops.userdata, level, msg, fields);
}

int dra_gpu_position(const struct dra *d, unsigned index) {
        for (unsigned g = 0; g < d->topo.n_gpus; g++)
                if (d->topo.gpu[g].index >= 0 && (unsigned)d->topo.gpu[g].index == index)
                        return (int)g;
        return -1;
}

/* Crash points of the kill tests (tests/integration/test_dra.py): $GPUSLICE_CRASH_AT=<point>[:n]. */
void dra_crash_point(struct dra *d, const char *point) {
        if (crash_point_due(point)) {
                dra_log(d, DRA_LOG_WARN, "crash point reached: killing myself", "point=%s", point);
                raise(SIGKILL);
        }
}

void dra_slice_input_locked(struct dra *d, struct dra_slice_input *ret) {
        memset(ret, 0, sizeof *ret);
        ret->t = &d->topo;
        ret->driver = d->driver;
        ret->node = d->node;
        ret->sharing = d->sharing_wanted && d->sharing_ok;
        ret->memory_unit = d->memory_unit;
        ret->generation = d->generation;
        ret->mig = d->mig_error[0] ? NULL : d->mig; /* what cannot be prepared is not published */
        ret->counters_dropped = !d->sharing_ok;
        for (unsigned g = 0; g < d->topo.n_gpus; g++) {
                /* an unhealthy GPU: tainted where the server keeps taints, else left out; a held one left out */
                ret->offered[g] = (d->gpu[g].healthy || d->taints_ok) && !d->gpu[g].busy;
                ret->tainted[g] = !d->gpu[g].healthy && d->taints_ok;
                if (ret->tainted[g])
                        dra_taint_value(d->gpu[g].reason, ret->taint_value[g], sizeof ret->taint_value[g]);
                strscpy(ret->pcie_root[g], d->pcie_root[g], sizeof ret->pcie_root[g]);
        }
        ret->mig_dynamic = d->mig_dynamic;
        for (size_t i = 0; i < d->n_recs; i++) /* the GPU instances made for claims */
                for (unsigned k = 0; k < d->recs[i].n; k++) {
                        const struct dra_record_device *dv = &d->recs[i].dev[k];
                        int g = dra_gpu_position(d, dv->index);
                        if (dv->kind == DRA_DEVICE_MIG_DYNAMIC && dv->made && g >= 0 && dv->gi < 16)
                                ret->mig_owned[g] |= (uint16_t)(1u << dv->gi);
                }
}

/* ---- MIG ---- */

/* Whether two reads of a GPU's profiles publish the same dynamic MIG devices. */
static bool caps_same(const struct mig_caps *a, const struct mig_caps *b) {
        if (a->n_profiles != b->n_profiles)
                return false;
        for (unsigned i = 0; i < a->n_profiles; i++) {
                const struct mig_profile *p = &a->profile[i], *q = &b->profile[i];
                if (p->id != q->id || !streq(p->name, q->name) || p->slices != q->slices || p->sms != q->sms ||
                    p->memory_mib != q->memory_mib || p->n_placements != q->n_placements)
                        return false;
                for (unsigned k = 0; k < p->n_placements; k++)
                        if (p->placement[k].start != q->placement[k].start ||
                            p->placement[k].size != q->placement[k].size)
                                return false;
        }
        return true;
}

/* Whether two reads of the MIG side publish and prepare the same (memory in use and the like aside). */
static bool mig_same(const struct dra_mig *a, const struct dra_mig *b) {
        if (a->node.n_gpus != b->node.n_gpus)
                return false;
        for (unsigned g = 0; g < a->node.n_gpus; g++) {
                const struct mig_gpu *x = &a->node.gpu[g], *y = &b->node.gpu[g];
                if (x->mode != y->mode || x->n_devices != y->n_devices || x->n_gis != y->n_gis ||
                    a->memory_slices[g] != b->memory_slices[g] || a->compute_slices[g] != b->compute_slices[g] ||
                    !caps_same(&a->caps[g], &b->caps[g]))
                        return false;
                for (unsigned k = 0; k < x->n_gis; k++)
                        if (x->gi[k].id != y->gi[k].id || x->gi[k].n_cis != y->gi[k].n_cis ||
                            x->gi[k].placement.start != y->gi[k].placement.start ||
                            x->gi[k].profile_id != y->gi[k].profile_id)
                                return false;
                for (unsigned k = 0; k < x->n_devices; k++) {
                        const struct mig_device *m = &x->dev[k], *n = &y->dev[k];
                        if (m->gi != n->gi || m->ci != n->ci || !streq(m->uuid, n->uuid) ||
                            !streq(m->profile, n->profile) || m->memory_total != n->memory_total ||
                            m->placement.start != n->placement.start || m->placement.size != n->placement.size ||
                            m->ci_slices != n->ci_slices || m->sms != n->sms)
                                return false;
                }
        }
        return true;
}

/* The MIG devices' capability nodes, from <dev-root>/proc/driver/nvidia-caps/mig-minors (lock held). */
static void mig_discover_locked(struct dra *d) {
        char minors[DRA_PATH_MAX + 64];
        snprintf(minors, sizeof minors, "%s%s", streq(d->dev_root, "/") ? "" : d->dev_root, CDI_MIG_MINORS);
        struct cdi_roots roots = { .dev_root = d->dev_root, .driver_root = d->driver_root };
        struct gs_error e = { 0 };
        d->mig_error[0] = '\0';
        if (cdi_discover_mig(&d->topo, &d->mig->node, &roots, minors, &d->disc, &e) < 0) {
                snprintf(d->mig_error, sizeof d->mig_error, "%s", e.message[0] ? e.message : "MIG discovery failed");
                dra_log(d, DRA_LOG_WARN, "the MIG devices' capability nodes are not found: MIG devices not published",
                        "error=\"%s\"", d->mig_error);
        }
}

void dra_mig_refresh(struct dra *d) {
        if (!d->ops.mig_read)
                return;
        struct dra_mig *m = calloc(1, sizeof *m);
        if (!m)
                return;
        pthread_mutex_lock(&d->mig_refresh_lock);
        int r = d->ops.mig_read(d->ops.userdata, m);
        if (r < 0)
                dra_log(d, DRA_LOG_WARN, "cannot read the MIG devices: keeping what was read before", "error=\"%s\"",
                        strerror(-r));
        pthread_mutex_lock(&d->lock);
        if (r >= 0 && (!d->mig || !mig_same(d->mig, m))) {
                bool first = !d->mig;
                free(d->mig);
                d->mig = TAKE_PTR(m);
                mig_discover_locked(d);
                dra_publish_kick_locked(d);
                if (!first)
                        dra_log(d, DRA_LOG_INFO, "the MIG devices changed: publishing them again", "%s", "");
        } else if (r >= 0 && d->mig_error[0]) {
                /* the same instances, but their capability nodes were missing: a dynamic instance's are made
                 * just after NVML lists it (migdyn.c, make_nodes), so look again */
                mig_discover_locked(d);
                if (!d->mig_error[0]) {
                        dra_publish_kick_locked(d);
                        dra_log(d, DRA_LOG_INFO, "the MIG devices' capability nodes are there now: publishing them",
                                "%s", "");
                }
        }
        pthread_mutex_unlock(&d->lock);
        pthread_mutex_unlock(&d->mig_refresh_lock);
        free(m);
}

const struct mig_device *dra_mig_device_locked(const struct dra *d, unsigned g, unsigned gi, unsigned ci) {
        return d->mig && dra_mig_gpu(d->mig, g) ? mig_device_by_ids(&d->mig->node, g, gi, ci) : NULL;
}

void dra_publish_kick_locked(struct dra *d) {
        d->publish_dirty = true;
        pthread_cond_broadcast(&d->publish_wake);
}

void dra_update(struct dra *d, const struct dra_gpu_state *st, unsigned n) {
        if (!d || !st)
                return;
        bool offered = false, health = false;
        pthread_mutex_lock(&d->lock);
        for (unsigned g = 0; g < n && g < d->topo.n_gpus; g++) {
                struct dra_gpu_state *o = &d->gpu[g];
                offered |= (o->healthy && !o->busy) != (st[g].healthy && !st[g].busy);
                health |= o->healthy != st[g].healthy || !streq(o->reason, st[g].reason);
                *o = st[g];
        }
        if (offered || health) /* health: a taint and its value */
                dra_publish_kick_locked(d);
        pthread_mutex_unlock(&d->lock);
        if (health) {
                atomic_fetch_add(&d->health_gen, 1);
                rpc_streams_wake();
        }
}
