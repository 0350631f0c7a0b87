/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dra/status — the claim's status.devices (KEP-4817 ResourceClaimDeviceStatus, beta and on in 1.36): per
 * device the driver prepared, its driver, pool, device (and shareID for a share) and in `data` what an
 * operator needs to tell which GPU the claim got (`kubectl get resourceclaim -o yaml`): the GPU's UUID
 * (a MIG device: its MIG UUID and its parent's), the PCI bus id, the share's limits. Written with
 * server-side apply under the driver's field manager, so only this driver's entries change (another
 * driver's entries of the same claim stay); cleared at unprepare by applying none.
 *
 * Informational: a server that refuses it (the gate off, RBAC without resourceclaims/status) is logged and
 * the claim stays prepared. Never with the lock held (requests).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra/dra-internal.h"
#include "kube/kube.h"
#include "util/util.h"

/* The `data` of one prepared device. */
static json_t *device_data(struct dra *d, const struct dra_record *r, const struct dra_record_device *dv) {
        pthread_mutex_lock(&d->lock);
        int g = dra_gpu_position(d, dv->index);
        char bus[32] = "", parent[96] = "";
        if (g >= 0) {
                if (dra_pci_bus_id(d->topo.gpu[g].bus_id, bus, sizeof bus) < 0)
                        bus[0] = '\0';
                strscpy(parent, d->topo.gpu[g].uuid, sizeof parent);
        }
        pthread_mutex_unlock(&d->lock);
        json_t *o = json_object();
        if (!o)
                return NULL;
        json_object_set_new(o, "uuid", json_string(dv->uuid));
        json_object_set_new(o, "index", json_integer(dv->index));
        if (dra_kind_mig(dv->kind) && parent[0])
                json_object_set_new(o, "parentUUID", json_string(parent));
        if (bus[0])
                json_object_set_new(o, "pciBusID", json_string(bus));
        if (dv->shared) {
                char mem[32];
                snprintf(mem, sizeof mem, "%llu", (unsigned long long)dv->memory);
                json_object_set_new(o, "memory", json_string(mem));
                json_object_set_new(o, "cores", json_integer(dv->cores));
                json_object_set_new(o, "corePolicy", json_string(r->elastic ? "elastic" : "hard"));
        }
        return o;
}

/* The apply configuration: the claim's identity and this driver's entries (none: r NULL). */
static json_t *apply_body(struct dra *d, const char *version, const char *ns, const char *name, const char *uid,
                          const struct dra_record *r) {
        char av[48];
        snprintf(av, sizeof av, "resource.k8s.io/%s", version);
        json_t *devices = json_array();
        for (unsigned i = 0; r && devices && i < r->n; i++) {
                const struct dra_record_device *dv = &r->dev[i];
                json_t *e = json_pack("{s:s, s:s, s:s, s:o*}", "driver", d->driver, "pool", d->node, "device",
                                      dv->device, "data", device_data(d, r, dv));
                if (e && dv->share_id[0])
                        json_object_set_new(e, "shareID", json_string(dv->share_id));
                if (!e || json_array_append_new(devices, e) < 0) {
                        json_decref(devices);
                        return NULL;
                }
        }
        if (!devices)
                return NULL;
        return json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:{s:o}}", "apiVersion", av, "kind", "ResourceClaim",
                         "metadata", "name", name, "namespace", ns, "uid", uid, "status", "devices", devices);
}

int dra_claim_status_apply(struct dra *d, const char *ns, const char *name, const char *uid, const struct dra_record *r,
                           struct gs_error *err) {
        char version[16], path[600];
        int e = dra_api_version(d, version, sizeof version, err);
        if (e < 0)
                return e;
        if (!dra_dns_label_valid(ns) || !dra_dns_subdomain_valid(name) || !dra_uid_valid(uid))
                return gs_error_set(err, -EINVAL, "not a valid claim namespace/name/uid");
        snprintf(path, sizeof path,
                 "/apis/resource.k8s.io/%s/namespaces/%s/resourceclaims/%s/status?fieldManager=%s&force=true", version,
                 ns, name, d->driver);
        json_t *body = apply_body(d, version, ns, name, uid, r);
        char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        json_decref(body);
        if (!text)
                return gs_error_set(err, -ENOMEM, "out of memory");
        struct kube_error ke = { 0 };
        e = kube_request(d->kube, KUBE_PATCH_APPLY, path, text, NULL, &ke);
        free(text);
        if (e == -ENOENT && !r)
                return 0; /* the claim is gone: nothing to clear */
        if (e < 0)
                return gs_error_set(err, e, "cannot %s the status of claim %s/%s: %s", r ? "write" : "clear", ns, name,
                                    ke.message[0] ? ke.message : strerror(-e));
        return 0;
}
