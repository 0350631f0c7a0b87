/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dra — the DRA driver's lifecycle (dra.h, dra-internal.h): options copied and checked, the PCIe roots
 * read from sysfs, the parts started and stopped in order, status. The state the parts share is
 * state.c's (they use it, and this file starts them: no file cycle). Must never log (the caller's
 * callback does).
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
        if (snprintf(d->mps_root, sizeof d->mps_root, "%s/" DRA_MPS_DIR, o->state_dir) >= (int)sizeof d->mps_root)
                return gs_error_set(err, -EINVAL, "state dir: too long");
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
        pthread_mutex_init(&d->mig_refresh_lock, NULL);
        cond_init_monotonic(&d->publish_wake);
        if (ops)
                d->ops = *ops;
        int r = copy_options(d, o, err);
        if (r < 0) {
                dra_free(d);
                return r;
        }
        d->topo = *t;
        if ((r = dra_dyn_parse(d, o->mig_dynamic, err)) < 0) {
                dra_free(d);
                return r;
        }
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
        pthread_mutex_destroy(&d->mig_refresh_lock);
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
                json_array_append_new(claims, json_pack("{s:s, s:s, s:s, s:s, s:o*, s:s*}", "uid", r->uid, "namespace",
                                                        r->namespace_, "name", r->name, "state",
                                                        dra_record_state_name(r->state), "devices", devs, "sharing",
                                                        r->sharing ? dra_sharing_name(r->sharing) : NULL));
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
