/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvidia — NVIDIA's device plugin config in the agent (--nvidia-config, nvconfig.h): the file, or the entry of a
 * mounted ConfigMap directory the node label nvidia.com/device-plugin.config names (read once at start from the
 * API server, as NVIDIA's config-manager reads it; a change of the label takes effect when the agent starts
 * again), applied over gpuslice's own config; its replicated GPUs handed to the plugin (timeslice.h).
 * Must never: start with a file that had a key it refused, or replicate a GPU the file did not name.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/node-internal.h"
#include "kube/kube.h"
#include "nvconfig/nvconfig.h"
#include "util/log.h"
#include "util/util.h"

/* The node label's value from the API server into buf ("" when it has none or there is no API server). */
static void node_label(const struct gpuslice_config *cfg, char *buf, size_t len) {
        struct kube_config kc;
        struct gs_error err = { 0 };
        buf[0] = 0;
        int r = cfg->kubeconfig[0] ? kube_config_load(cfg->kubeconfig, NULL, &kc, &err)
                                   : kube_config_in_cluster(NULL, &kc, &err);
        if (r < 0) {
                log_info("no API server: the NVIDIA config entry is the default one", "error=\"%s\"", err.message);
                return;
        }
        char node[CONFIG_NODE_NAME_MAX] = "", esc[800], path[900];
        const char *nn = cfg->node_name[0] ? cfg->node_name : secure_getenv("NODE_NAME");
        if (nn && nn[0])
                strscpy(node, nn, sizeof node);
        else if (gethostname(node, sizeof node - 1) < 0)
                node[0] = 0;
        struct kube_client *c = NULL;
        json_t *obj = NULL;
        struct kube_error ke = { 0 };
        if (node[0] && kube_escape(node, esc, sizeof esc) && kube_client_new(&kc, &c) >= 0) {
                kube_client_set_timeout(c, 10000);
                snprintf(path, sizeof path, "/api/v1/nodes/%.700s", esc);
                r = kube_request(c, KUBE_GET, path, NULL, &obj, &ke);
                if (r < 0)
                        log_warn_errno(r, "cannot read the Node: the NVIDIA config entry is the default one", "node=%s",
                                       node);
        }
        const json_t *v = json_object_get(json_object_get(json_object_get(obj, "metadata"), "labels"), NVCONFIG_LABEL);
        if (json_is_string(v))
                strscpy(buf, json_string_value(v), len);
        json_decref(obj);
        kube_client_free(c);
        kube_config_done(&kc);
}

int node_nvidia_config(struct node *n) {
        if (!n->cfg.nvidia_config[0])
                return 0;
        char path[CONFIG_PATH_MAX + 256], label[256] = "";
        struct gs_error err = { 0 };
        struct stat st;
        int r = stat(n->cfg.nvidia_config, &st) < 0 ? -errno : 0;
        if (r < 0)
                return log_error_errno(r, "cannot read the NVIDIA config", "path=%s", n->cfg.nvidia_config);
        if (S_ISDIR(st.st_mode)) {
                node_label(&n->cfg, label, sizeof label);
                r = nvconfig_select(n->cfg.nvidia_config, label, n->cfg.nvidia_config_default, path, sizeof path, &err);
                if (r < 0)
                        return log_error_errno(r, "no NVIDIA config for this node", "error=\"%s\"", err.message);
        } else
                snprintf(path, sizeof path, "%s", n->cfg.nvidia_config);
        struct nvconfig *nv = calloc(1, sizeof *nv);
        if (!nv)
                return log_error_errno(-ENOMEM, "out of memory");
        r = nvconfig_load(path, &n->cfg, nv, &err);
        if (r < 0) {
                free(nv);
                return log_error_errno(r, "NVIDIA config refused", "error=\"%s\"", err.message);
        }
        for (unsigned i = 0; i < nv->n_notes; i++)
                log_warn("NVIDIA config: key without an effect in gpuslice", "note=\"%s\"", nv->notes[i]);
        log_info("NVIDIA config applied",
                 "path=%s label=%s time_slicing=%s time_slicing_replicas=%u mps=%s mps_replicas=%u", path,
                 label[0] ? label : "-", nv->ts.sharing ? nv->ts.name : "-", nv->ts.replicas,
                 nv->mps.sharing ? nv->mps.name : "-", nv->mps.replicas);
        n->nvidia = nv;
        return 0;
}

/* Is GPU i (table index) named by the replicated resource's devices? */
static bool named(const struct nvconfig_replicas *rep, const struct devices *d, unsigned i, unsigned rank) {
        const struct device_info *x = devices_info(d, i);
        if (rep->all)
                return true;
        if (rep->count)
                return rank < rep->count;
        for (unsigned k = 0; k < rep->n_devices; k++) {
                unsigned idx;
                if (streq(rep->devices[k], x->id) ||
                    (parse_uint(rep->devices[k], 1u << 20, &idx) == 0 && (int)idx == x->index))
                        return true;
        }
        return false;
}

/* The GPUs (table mask) one strategy's devices name; -ENODEV for a GPU named that this node does not have. */
static int set_mask(const struct nvconfig_replicas *rep, const struct devices *d, uint64_t *ret, unsigned *ret_n) {
        uint64_t mask = 0;
        unsigned rank = 0, matched = 0;
        /* the table lists GPUs in NVML index order: rank is the GPU's place for `devices: N` */
        for (unsigned i = 0; i < devices_count(d); i++) {
                const struct device_info *x = devices_info(d, i);
                if (x->kind != DEVICE_GPU)
                        continue;
                bool want = named(rep, d, i, rank++);
                if (want && x->mig_mode) {
                        log_warn("a GPU in MIG mode is not replicated (whole GPUs only): served as its MIG devices",
                                 "id=%s key=%s", x->id, nvconfig_sharing_key(rep->sharing));
                        continue;
                }
                if (want) {
                        mask |= UINT64_C(1) << i;
                        matched++;
                }
        }
        for (unsigned k = 0; k < rep->n_devices; k++) { /* a GPU named that this node does not have */
                bool found = false;
                for (unsigned i = 0; i < devices_count(d) && !found; i++) {
                        struct nvconfig_replicas one = { .n_devices = 1 };
                        strscpy(one.devices[0], rep->devices[k], sizeof one.devices[0]);
                        found = devices_info(d, i)->kind == DEVICE_GPU && named(&one, d, i, 0);
                }
                if (!found)
                        return log_error_errno(-ENODEV, "the NVIDIA config names a GPU this node does not have",
                                               "key=%s.resources[0].devices device=%s",
                                               nvconfig_sharing_key(rep->sharing), rep->devices[k]);
        }
        *ret = mask;
        *ret_n = matched;
        return 0;
}

int node_nvidia_replicas(struct node *n) {
        const struct nvconfig *nv = n->nvidia;
        if (!nv)
                return 0;
        const struct nvconfig_replicas *sets[2] = { &nv->ts, &nv->mps };
        uint64_t mask[2] = { 0, 0 };
        unsigned matched[2] = { 0, 0 };
        for (unsigned k = 0; k < 2; k++) {
                int r = sets[k]->sharing ? set_mask(sets[k], n->devices, &mask[k], &matched[k]) : 0;
                if (r < 0)
                        return r;
        }
        if (mask[0] & mask[1]) { /* a UUID in one list, its index in the other: the file could not tell */
                unsigned i = (unsigned)__builtin_ctzll(mask[0] & mask[1]);
                return log_error_errno(-EINVAL,
                                       "the NVIDIA config names a GPU in both sharing.timeSlicing.resources[0].devices "
                                       "and sharing.mps.resources[0].devices (one GPU, one mode)",
                                       "id=%s index=%d", devices_info(n->devices, i)->id,
                                       devices_info(n->devices, i)->index);
        }
        for (unsigned k = 0; k < 2; k++) {
                const struct nvconfig_replicas *rep = sets[k];
                if (!rep->sharing)
                        continue;
                int r = plugin_set_replicas(n->plugin, rep->name, rep->replicas, rep->fail_requests_greater_than_one,
                                            mask[k]);
                if (r < 0)
                        return log_error_errno(r, "cannot replicate the GPUs", "key=%s resource=%s",
                                               nvconfig_sharing_key(rep->sharing), rep->name);
                log_info("replicated GPUs",
                         "sharing=%s resource=%s replicas=%u gpus=%u fail_requests_greater_than_one=%s",
                         nvconfig_sharing_name(rep->sharing), rep->name, rep->replicas, matched[k],
                         rep->fail_requests_greater_than_one ? "true" : "false");
        }
        return 0;
}

int node_nvidia_reload(struct node *n, struct gpuslice_config *c) {
        if (!n->nvidia)
                return 0;
        struct nvconfig *scratch = calloc(1, sizeof *scratch);
        struct gs_error err = { 0 };
        int r = scratch ? nvconfig_load(n->nvidia->source, c, scratch, &err) : -ENOMEM;
        if (r >= 0 &&
            (scratch->ts.sharing != n->nvidia->ts.sharing || scratch->ts.replicas != n->nvidia->ts.replicas ||
             !streq(scratch->ts.name, n->nvidia->ts.name) || scratch->mps.sharing != n->nvidia->mps.sharing ||
             scratch->mps.replicas != n->nvidia->mps.replicas || !streq(scratch->mps.name, n->nvidia->mps.name)))
                log_warn("NVIDIA config: sharing changes only on restart", "path=%s", n->nvidia->source);
        free(scratch);
        if (r < 0)
                return log_error_errno(r, "NVIDIA config reload failed", "error=\"%s\"", err.message);
        return 0;
}

void node_nvidia_free(struct node *n) {
        free(n->nvidia);
        n->nvidia = NULL;
}
