/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dra — the DRA driver's lifecycle and shared state (dra.h, dra-internal.h): options copied and checked,
 * the PCIe roots read from sysfs, the device table's view of each GPU, status. Must never log (the
 * caller's callback does) or block a caller of dra_update on I/O.
 */
#include "dra/dra.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* The PCIe root complex of a GPU as Kubernetes' deviceattribute package finds it: the first component
 * after /sys/devices/ of the link /sys/bus/pci/devices/<bus id>, "pci<domain>:<bus>". "" when unknown. */
static void pcie_root(const char *dev_root, const char *nvml_bus_id, char *buf, size_t len) {
        char bdf[16], path[DRA_PATH_MAX + 64], target[PATH_MAX];
        buf[0] = '\0';
        if (dra_pci_bus_id(nvml_bus_id, bdf, sizeof bdf) < 0)
                return;
        snprintf(path, sizeof path, "%s/sys/bus/pci/devices/%s", streq(dev_root, "/") ? "" : dev_root, bdf);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n <= 0)
                return;
        target[n] = '\0';
        const char *p = strstr(target, "devices/pci");
        const char *base = strrchr(target, '/');
        if (!p || !base || !streq(base + 1, bdf))
                return;
        p += strlen("devices/");
        size_t l = strcspn(p, "/");
        /* "pci" + 4 hex + ":" + 2 hex */
        if (l != 10 || strspn(p + 3, "0123456789abcdef") != 4 || p[7] != ':' || strspn(p + 8, "0123456789abcdef") < 2 ||
            l >= len)
                return;
        memcpy(buf, p, l);
        buf[l] = '\0';
}

static int copy_opt(char *dst, size_t len, const char *src, const char *dflt, const char *what, struct gs_error *err) {
        const char *v = src && src[0] ? src : dflt;
        if (!v || strlen(v) >= len)
                return gs_error_set(err, -EINVAL, "%s: missing or too long", what);
        strscpy(dst, v, len);
        return 0;
}

/* lint: long — every option copied with its default and checked, one line each. */
static int copy_options(struct dra *d, const struct dra_options *o, struct gs_error *err) {
        int r = copy_opt(d->driver, sizeof d->driver, o->driver, DRA_DRIVER_DEFAULT, "driver name", err);
        r = r ?: copy_opt(d->node, sizeof d->node, o->node, NULL, "node name", err);
        r = r
                    ?: copy_opt(d->registry_dir, sizeof d->registry_dir, o->registry_dir, DRA_REGISTRY_DIR_DEFAULT,
                                "registry dir", err);
        r = r
                    ?: copy_opt(d->plugin_dir, sizeof d->plugin_dir, o->plugin_dir, DRA_PLUGIN_DIR_DEFAULT,
                                "plugin dir", err);
        r = r ?: copy_opt(d->cdi_dir, sizeof d->cdi_dir, o->cdi_dir, DRA_CDI_DIR_DEFAULT, "CDI dir", err);
        r = r ?: copy_opt(d->limits_root, sizeof d->limits_root, o->limits_root, NULL, "limits root", err);
        r = r ?: copy_opt(d->dev_root, sizeof d->dev_root, o->dev_root, "/", "dev root", err);
        r = r ?: copy_opt(d->driver_root, sizeof d->driver_root, o->driver_root, "/", "driver root", err);
        r = r ?: copy_opt(d->interposer, sizeof d->interposer, o->interposer, "", "interposer", err);
        r = r ?: copy_opt(d->hook_path, sizeof d->hook_path, o->hook_path, "", "hook path", err);
        r = r ?: copy_opt(d->host_dev_root, sizeof d->host_dev_root, o->host_dev_root, "", "host dev root", err);
        r = r
                    ?: copy_opt(d->host_driver_root, sizeof d->host_driver_root, o->host_driver_root, "",
                                "host driver root", err);
        if (r < 0)
                return r;
        if (!o->state_dir || snprintf(d->journal_dir, sizeof d->journal_dir, "%s/" DRA_JOURNAL_DIR, o->state_dir) >=
                                     (int)sizeof d->journal_dir)
                return gs_error_set(err, -EINVAL, "state dir: missing or too long");
        if (!dra_dns_subdomain_valid(d->driver) || strlen(d->driver) > DRA_MAX_DOMAIN)
                return gs_error_set(err, -EINVAL,
                                    "driver name '%s': not a lowercase DNS subdomain of at most %d characters",
                                    d->driver, DRA_MAX_DOMAIN);
        if (!dra_dns_subdomain_valid(d->node))
                return gs_error_set(err, -EINVAL, "node name '%.200s' is not a valid pool name", d->node);
        snprintf(d->cdi_kind, sizeof d->cdi_kind, "%s/" DRA_CDI_CLASS, d->driver);
        if (o->sharing && (!o->memory_unit || !d->interposer[0]))
                return gs_error_set(err, -EINVAL, "shared devices need a memory unit and the interposer's path");
        d->sharing_wanted = o->sharing;
        d->memory_unit = o->memory_unit;
        d->limit_when_alone = o->limit_when_alone;
        d->kube = o->kube;
        return 0;
}

int dra_new(const struct dra_options *o, const struct topo *t, const struct dra_table_ops *ops, struct dra **ret,
            struct gs_error *err) {
        if (!o || !t || !ret)
                return gs_error_set(err, -EINVAL, "missing argument");
        struct dra *d = calloc(1, sizeof *d);
        if (!d)
                return gs_error_set(err, -ENOMEM, "out of memory");
        d->journal_fd = -1;
        pthread_mutex_init(&d->lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the publisher's waits are on CLOCK_MONOTONIC */
        pthread_cond_init(&d->publish_wake, &ca);
        pthread_condattr_destroy(&ca);
        if (ops)
                d->ops = *ops;
        int r = copy_options(d, o, err);
        if (r < 0) {
                dra_free(d);
                return r;
        }
        d->topo = *t;
        d->sharing_ok = true;
        d->taints_ok = true; /* until a server drops them (1.34, 1.35: DRADeviceTaints off) */
        for (unsigned g = 0; g < t->n_gpus; g++) {
                d->gpu[g].healthy = t->gpu[g].state == TOPO_GPU_OK;
                strscpy(d->gpu[g].reason, t->gpu[g].state_text, sizeof d->gpu[g].reason);
                pcie_root(d->dev_root, t->gpu[g].bus_id, d->pcie_root[g], sizeof d->pcie_root[g]);
        }
        if ((r = dra_engine_open(d, err)) < 0) {
                dra_free(d);
                return r;
        }
        dra_mig_refresh(d); /* before recovery: a prepared MIG claim's spec needs its capability nodes */
        dra_engine_recover(d);
        *ret = d;
        return 0;
}

void dra_free(struct dra *d) {
        if (!d)
                return;
        if (d->journal_fd >= 0)
                close(d->journal_fd);
        cdi_discovery_done(&d->disc);
        free(d->mig);
        free(d->recs);
        pthread_cond_destroy(&d->publish_wake);
        pthread_mutex_destroy(&d->lock);
        free(d);
}

int dra_start(const struct dra_options *o, const struct topo *t, const struct dra_table_ops *ops, struct dra **ret,
              struct gs_error *err) {
        struct dra *d;
        int r = dra_new(o, t, ops, &d, err);
        if (r < 0)
                return r;
        if (!d->kube) {
                dra_free(d);
                return gs_error_set(err, -EINVAL,
                                    "the DRA driver needs the API server (kube.kubeconfig or in-cluster)");
        }
        r = dra_publish_start(d, err);
        if (r == 0)
                r = dra_kubelet_start(d, err);
        if (r < 0) {
                dra_stop(d);
                return r;
        }
        *ret = d;
        return 0;
}

struct dra *dra_stop(struct dra *d) {
        if (!d)
                return NULL;
        atomic_store(&d->stop, true);
        dra_kubelet_stop(d);
        dra_publish_stop(d);
        dra_free(d);
        return NULL;
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
}

/* ---- MIG ---- */

/* Whether two reads of the MIG side publish and prepare the same (memory in use and the like aside). */
static bool mig_same(const struct dra_mig *a, const struct dra_mig *b) {
        if (a->node.n_gpus != b->node.n_gpus)
                return false;
        for (unsigned g = 0; g < a->node.n_gpus; g++) {
                const struct mig_gpu *x = &a->node.gpu[g], *y = &b->node.gpu[g];
                if (x->mode != y->mode || x->n_devices != y->n_devices || x->n_gis != y->n_gis ||
                    a->memory_slices[g] != b->memory_slices[g] || a->compute_slices[g] != b->compute_slices[g])
                        return false;
                for (unsigned k = 0; k < x->n_gis; k++)
                        if (x->gi[k].id != y->gi[k].id || x->gi[k].n_cis != y->gi[k].n_cis)
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
        }
        pthread_mutex_unlock(&d->lock);
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

json_t *dra_status(struct dra *d) {
        if (!d)
                return NULL;
        json_t *claims = json_array();
        pthread_mutex_lock(&d->lock);
        for (size_t i = 0; claims && i < d->n_recs; i++) {
                const struct dra_record *r = &d->recs[i];
                json_t *devs = json_array();
                for (unsigned k = 0; devs && k < r->n; k++)
                        json_array_append_new(devs,
                                              json_pack("{s:s, s:s, s:s, s:I, s:i}", "request", r->dev[k].request,
                                                        "device", r->dev[k].device, "uuid", r->dev[k].uuid, "memory",
                                                        (json_int_t)r->dev[k].memory, "cores", (int)r->dev[k].cores));
                json_array_append_new(claims, json_pack("{s:s, s:s, s:s, s:s, s:o*}", "uid", r->uid, "namespace",
                                                        r->namespace_, "name", r->name, "state",
                                                        dra_record_state_name(r->state), "devices", devs));
        }
        json_t *o = claims ? json_pack("{s:s, s:s, s:b, s:s*, s:s, s:b, s:b, s:s*, s:I, s:o}", "driver", d->driver,
                                       "pool", d->node, "registered", d->registered, "registrationError",
                                       d->reg_error[0] ? d->reg_error : NULL, "api",
                                       d->api_version[0] ? d->api_version : "", "sharing",
                                       d->sharing_wanted && d->sharing_ok, "taints", d->taints_ok, "migError",
                                       d->mig_error[0] ? d->mig_error : NULL, "generation", (json_int_t)d->generation,
                                       "claims", claims)
                           : NULL;
        pthread_mutex_unlock(&d->lock);
        return o;
}
