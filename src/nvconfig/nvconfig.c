/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvconfig — NVIDIA's device plugin config file (nvconfig.h): the YAML tree walked key by key, each key applied,
 * noted or refused by name. Must never accept a key it does not know, apply half a file, or log.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/yaml.h"
#include "nvconfig/nvconfig.h"
#include "util/util.h"

struct walk {
        struct gpuslice_config cfg; /* scratch: copied out on success */
        struct nvconfig nv;
        struct gs_error *err;
};

static const char *str_of(const json_t *v) {
        return json_is_string(v) ? json_string_value(v) : NULL;
}

static int get_bool(struct walk *w, const char *key, const json_t *v, bool *ret) {
        const char *s = str_of(v);
        if (s && (streq(s, "true") || streq(s, "True") || streq(s, "TRUE")))
                *ret = true;
        else if (s && (streq(s, "false") || streq(s, "False") || streq(s, "FALSE")))
                *ret = false;
        else
                return gs_error_set(w->err, -EINVAL, "%s: expected true or false", key);
        return 0;
}

static int refuse(struct walk *w, const char *key, const char *why) {
        return gs_error_set(w->err, -EOPNOTSUPP, "%s: not supported by gpuslice: %s", key, why);
}

static void note(struct walk *w, const char *key, const char *why) {
        if (w->nv.n_notes < NVCONFIG_NOTES_MAX)
                snprintf(w->nv.notes[w->nv.n_notes++], sizeof w->nv.notes[0], "%.60s: %.90s", key, why);
}

/* A boolean gpuslice has one fixed answer to: that answer is accepted, the other refused. */
static int fixed_bool(struct walk *w, const char *key, const json_t *v, bool supported, const char *why) {
        bool b;
        int r = get_bool(w, key, v, &b);
        if (r < 0)
                return r;
        return b == supported ? 0 : refuse(w, key, why);
}

static int set(struct walk *w, const char *key, const char *gkey, const char *value) {
        struct gs_error e = { 0 };
        int r = config_set(&w->cfg, gkey, value, &e);
        return r < 0 ? gs_error_set(w->err, -EINVAL, "%s: %s", key, e.message) : 0;
}

static int need_map(struct walk *w, const char *key, const json_t *v) {
        return json_is_object(v) ? 0 : gs_error_set(w->err, -EINVAL, "%s: expected a mapping", key);
}

static int unknown(struct walk *w, const char *where, const char *k) {
        return gs_error_set(w->err, -EINVAL, "%s%s%s: unknown key", where, where[0] ? "." : "", k);
}

/* flags.plugin.deviceListStrategy: one name or a list of them. */
static int list_strategy(struct walk *w, const char *key, const json_t *v) {
        char out[64] = "";
        const json_t *items = v;
        json_t *one = NULL;
        if (str_of(v)) {
                one = json_array();
                if (!one || json_array_append(one, (json_t *)v) < 0) {
                        json_decref(one);
                        return gs_error_set(w->err, -ENOMEM, "out of memory");
                }
                items = one;
        }
        int r = 0;
        if (!json_is_array(items) || json_array_size(items) == 0)
                r = gs_error_set(w->err, -EINVAL, "%s: expected a strategy name or a list of them", key);
        size_t i;
        const json_t *x;
        json_array_foreach(items, i, x) {
                const char *s = str_of(x);
                if (r < 0)
                        break;
                if (!s)
                        r = gs_error_set(w->err, -EINVAL, "%s: expected a strategy name", key);
                else if (streq(s, "envvar") || streq(s, "cdi-cri")) {
                        const char *g = streq(s, "envvar") ? "envvar" : "cdi";
                        if (!strstr(out, g))
                                snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", out[0] ? "," : "", g);
                } else if (streq(s, "volume-mounts") || streq(s, "cdi-annotations"))
                        r = refuse(w, key,
                                   streq(s, "volume-mounts")
                                           ? "volume-mounts (gpuslice passes devices as envvar or cdi-cri)"
                                           : "cdi-annotations (use cdi-cri: the CDIDevices CRI field)");
                else
                        r = gs_error_set(w->err, -EINVAL,
                                         "%s: '%.64s' is not envvar, volume-mounts, cdi-annotations or cdi-cri", key,
                                         s);
        }
        json_decref(one);
        return r < 0 ? r : set(w, key, "devices.list-strategy", out);
}

static int walk_plugin(struct walk *w, const json_t *m) {
        const char *k;
        const json_t *v;
        int r = need_map(w, "flags.plugin", m);
        json_object_foreach((json_t *)m, k, v) {
                char key[96];
                snprintf(key, sizeof key, "flags.plugin.%.60s", k);
                if (r < 0)
                        break;
                if (streq(k, "passDeviceSpecs")) {
                        r = get_bool(w, key, v, &w->nv.pass_device_specs);
                        if (r >= 0 && !w->nv.pass_device_specs)
                                note(w, key, "false: gpuslice passes the device specs with envvar all the same");
                } else if (streq(k, "deviceListStrategy"))
                        r = list_strategy(w, key, v);
                else if (streq(k, "deviceIDStrategy")) {
                        const char *s = str_of(v);
                        r = s && (streq(s, "uuid") || streq(s, "index"))
                                    ? set(w, key, "devices.id-strategy", s)
                                    : gs_error_set(w->err, -EINVAL, "%s: expected uuid or index", key);
                } else if (streq(k, "cdiAnnotationPrefix") || streq(k, "nvidiaCTKPath") ||
                           streq(k, "containerDriverRoot")) {
                        if (!str_of(v))
                                r = gs_error_set(w->err, -EINVAL, "%s: expected a string", key);
                        else
                                note(w, key,
                                     streq(k, "cdiAnnotationPrefix")
                                             ? "unused (cdi-annotations is not supported)"
                                             : "unused (gpuslice writes its own CDI spec and reads /dev from "
                                               "devices.dev-root)");
                } else
                        r = unknown(w, "flags.plugin", k);
        }
        return r;
}

static int walk_gfd(struct walk *w, const json_t *m) {
        const char *k;
        const json_t *v;
        int r = need_map(w, "flags.gfd", m);
        json_object_foreach((json_t *)m, k, v) {
                char key[96];
                snprintf(key, sizeof key, "flags.gfd.%.60s", k);
                if (r < 0)
                        break;
                if (streq(k, "oneshot"))
                        r = fixed_bool(w, key, v, false, "the agent publishes labels for as long as it runs");
                else if (streq(k, "noTimestamp") || streq(k, "sleepInterval") || streq(k, "outputFile") ||
                         streq(k, "machineTypeFile")) {
                        if (!str_of(v))
                                r = gs_error_set(w->err, -EINVAL, "%s: expected a scalar", key);
                        else
                                note(w, key, "unused (the agent writes GFD's labels on the Node itself)");
                } else
                        r = unknown(w, "flags.gfd", k);
        }
        return r;
}

/* lint: long — every key of `flags`, one branch each: applied, noted or refused by name. */
static int walk_flags(struct walk *w, const json_t *m) {
        const char *k;
        const json_t *v;
        int r = need_map(w, "flags", m);
        json_object_foreach((json_t *)m, k, v) {
                char key[96];
                snprintf(key, sizeof key, "flags.%.60s", k);
                if (r < 0)
                        break;
                if (streq(k, "migStrategy")) {
                        const char *s = str_of(v);
                        r = s && (streq(s, "none") || streq(s, "single") || streq(s, "mixed"))
                                    ? set(w, key, "resources.mig-strategy", s)
                                    : gs_error_set(w->err, -EINVAL, "%s: expected none, single or mixed", key);
                } else if (streq(k, "failOnInitError"))
                        r = fixed_bool(w, key, v, true, "the agent stops when NVML or the GPUs cannot be read");
                else if (streq(k, "restartOnDeviceUnhealthy"))
                        r = fixed_bool(w, key, v, false,
                                       "an unhealthy GPU is listed Unhealthy, the agent keeps running");
                else if (streq(k, "gdsEnabled") || streq(k, "mofedEnabled"))
                        r = fixed_bool(w, key, v, false, "GPUDirect Storage and MOFED devices are not passed");
                else if (streq(k, "useNodeFeatureAPI"))
                        r = fixed_bool(w, key, v, false, "labels are written on the Node object");
                else if (streq(k, "deviceDiscoveryStrategy")) {
                        const char *s = str_of(v);
                        r = s && (streq(s, "auto") || streq(s, "nvml")) ? 0
                                                                        : refuse(w, key, "GPUs are found through NVML");
                } else if (streq(k, "nvidiaDriverRoot") || streq(k, "nvidiaDevRoot")) {
                        const char *s = str_of(v);
                        r = s ? set(w, key, "devices.dev-root", s)
                              : gs_error_set(w->err, -EINVAL, "%s: expected a path", key);
                } else if (streq(k, "plugin"))
                        r = walk_plugin(w, v);
                else if (streq(k, "gfd"))
                        r = walk_gfd(w, v);
                else
                        r = unknown(w, "flags", k);
        }
        return r;
}

/* resources.gpus / resources.mig: [{pattern, name}]; gpuslice names GPUs by one pattern, "*". */
static int walk_resources(struct walk *w, const json_t *m) {
        const char *k;
        const json_t *v;
        int r = need_map(w, "resources", m);
        json_object_foreach((json_t *)m, k, v) {
                if (r < 0)
                        break;
                if (streq(k, "mig")) {
                        r = json_is_array(v) && json_array_size(v) == 0
                                    ? 0
                                    : refuse(w, "resources.mig", "MIG resources are named nvidia.com/mig-<profile>");
                        continue;
                }
                if (!streq(k, "gpus")) {
                        r = unknown(w, "resources", k);
                        continue;
                }
                if (!json_is_array(v) || json_array_size(v) > 1)
                        return json_is_array(v)
                                       ? refuse(w, "resources.gpus", "one entry at most: every GPU is one resource")
                                       : gs_error_set(w->err, -EINVAL, "resources.gpus: expected a list");
                const json_t *e = json_array_get(v, 0);
                if (!e)
                        continue;
                const char *pattern = str_of(json_object_get(e, "pattern"));
                const char *name = str_of(json_object_get(e, "name"));
                if (!json_is_object(e) || !pattern || !name || json_object_size(e) != 2)
                        return gs_error_set(w->err, -EINVAL, "resources.gpus[0]: expected exactly pattern and name");
                if (!streq(pattern, "*"))
                        return refuse(w, "resources.gpus[0].pattern", "only \"*\" (every GPU)");
                char full[CONFIG_NAME_MAX];
                snprintf(full, sizeof full, "%s%.250s", strchr(name, '/') ? "" : "nvidia.com/", name);
                r = set(w, "resources.gpus[0].name", "resources.whole-gpu-name", full);
        }
        return r;
}

/* A GPU index or a GPU UUID (GPU-<36>); MIG references are refused. */
static int device_ref(struct walk *w, const char *key, const char *s, char *out) {
        unsigned idx;
        if (parse_uint(s, 1u << 20, &idx) == 0 || (startswith(s, "GPU-") && strlen(s) == 40)) {
                snprintf(out, NVCONFIG_DEVICE_REF_MAX, "%s", s);
                return 0;
        }
        if (startswith(s, "MIG-") || strchr(s, ':'))
                return refuse(w, key, "MIG devices are not replicated (whole GPUs only)");
        return gs_error_set(w->err, -EINVAL, "%s: '%.64s' is not a GPU index or GPU UUID", key, s);
}

static int walk_devices(struct walk *w, const char *key, const json_t *v, struct nvconfig_replicas *rep) {
        const char *s = str_of(v);
        unsigned n;
        if (s && streq(s, "all"))
                return rep->all = true, 0;
        if (s && parse_uint(s, NVCONFIG_MAX_DEVICES, &n) == 0 && n > 0)
                return rep->count = n, 0;
        if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > NVCONFIG_MAX_DEVICES)
                return gs_error_set(w->err, -EINVAL, "%s: expected all, a count 1..%d or a list of GPUs", key,
                                    NVCONFIG_MAX_DEVICES);
        size_t i;
        const json_t *x;
        json_array_foreach(v, i, x) {
                char k2[160];
                snprintf(k2, sizeof k2, "%.120s[%zu]", key, i);
                if (!str_of(x))
                        return gs_error_set(w->err, -EINVAL, "%s: expected a GPU index or UUID", k2);
                int r = device_ref(w, k2, str_of(x), rep->devices[rep->n_devices]);
                if (r < 0)
                        return r;
                for (unsigned j = 0; j < rep->n_devices; j++)
                        if (streq(rep->devices[j], rep->devices[rep->n_devices]))
                                return gs_error_set(w->err, -EINVAL, "%s: '%s' given twice", k2, str_of(x));
                rep->n_devices++;
        }
        return 0;
}

/* lint: long — one sharing.<strategy>.resources[] entry: name, rename, replicas, devices, each checked. */
static int walk_replica(struct walk *w, const char *where, const json_t *e, bool rename_default,
                        struct nvconfig_replicas *rep) {
        const char *whole = config_whole_gpu_resource(&w->cfg);
        const char *k;
        const json_t *v;
        char key[128];
        const char *name = NULL, *rename = NULL;
        bool have_replicas = false, have_devices = false;
        if (!json_is_object(e))
                return gs_error_set(w->err, -EINVAL, "%s: expected a mapping", where);
        json_object_foreach((json_t *)e, k, v) {
                snprintf(key, sizeof key, "%s.%.40s", where, k);
                int r = 0;
                if (streq(k, "name") || streq(k, "rename")) {
                        if (!str_of(v) || !str_of(v)[0])
                                return gs_error_set(w->err, -EINVAL, "%s: expected a resource name", key);
                        *(streq(k, "name") ? &name : &rename) = str_of(v);
                } else if (streq(k, "replicas")) {
                        if (!str_of(v) || parse_uint(str_of(v), NVCONFIG_REPLICAS_MAX, &rep->replicas) < 0 ||
                            rep->replicas == 0)
                                return gs_error_set(w->err, -EINVAL, "%s: expected a number 1..%d", key,
                                                    NVCONFIG_REPLICAS_MAX);
                        have_replicas = true;
                } else if (streq(k, "devices")) {
                        r = walk_devices(w, key, v, rep);
                        have_devices = true;
                } else
                        r = unknown(w, where, k);
                if (r < 0)
                        return r;
        }
        if (!name)
                return gs_error_set(w->err, -EINVAL, "%s: no resource name specified (name)", where);
        if (!have_replicas)
                return gs_error_set(w->err, -EINVAL, "%s: no replicas specified (replicas)", where);
        if (!have_devices)
                rep->all = true;
        char full[CONFIG_NAME_MAX];
        snprintf(full, sizeof full, "%s%.250s", strchr(name, '/') ? "" : "nvidia.com/", name);
        snprintf(key, sizeof key, "%s.name", where);
        if (!streq(full, whole))
                return refuse(w, key,
                              startswith(full, "nvidia.com/mig-") ? "MIG resources are not replicated (whole GPUs only)"
                                                                  : "only the whole-GPU resource is replicated");
        if (rename)
                snprintf(rep->name, sizeof rep->name, "%s%.250s", strchr(rename, '/') ? "" : "nvidia.com/", rename);
        else if (rename_default)
                snprintf(rep->name, sizeof rep->name, "%.300s.shared", full);
        else
                snprintf(rep->name, sizeof rep->name, "%s", full);
        struct gs_error e2 = { 0 };
        struct gpuslice_config scratch = w->cfg; /* the name must be one config would take */
        if (config_set(&scratch, "resources.whole-gpu-name", rep->name, &e2) < 0)
                return gs_error_set(w->err, -EINVAL, "%s.rename: '%.100s' is not a resource name", where, rep->name);
        return 0;
}

/* sharing.timeSlicing / sharing.mps */
static int walk_strategy(struct walk *w, const char *where, const json_t *m, enum nvconfig_sharing kind) {
        const char *k;
        const json_t *v;
        struct nvconfig_replicas *rep = kind == NVCONFIG_SHARING_MPS ? &w->nv.mps : &w->nv.ts;
        bool rename_default = false, fail_gt_one_set = false;
        memset(rep, 0, sizeof *rep);
        const json_t *resources = NULL;
        int r = need_map(w, where, m);
        json_object_foreach((json_t *)m, k, v) {
                char key[96];
                snprintf(key, sizeof key, "%s.%.40s", where, k);
                if (r < 0)
                        break;
                if (streq(k, "renameByDefault"))
                        r = get_bool(w, key, v, &rename_default);
                else if (streq(k, "failRequestsGreaterThanOne")) {
                        r = get_bool(w, key, v, &rep->fail_requests_greater_than_one);
                        fail_gt_one_set = true;
                } else if (streq(k, "strategy") && kind == NVCONFIG_SHARING_TIME_SLICING)
                        r = str_of(v) && !str_of(v)[0]
                                    ? 0
                                    : gs_error_set(w->err, -EINVAL, "%s: unknown time-slicing strategy", key);
                else if (streq(k, "resources"))
                        resources = v;
                else
                        r = unknown(w, where, k);
        }
        if (r < 0)
                return r;
        char key[96];
        snprintf(key, sizeof key, "%s.resources", where);
        if (!json_is_array(resources) || json_array_size(resources) == 0)
                return gs_error_set(w->err, -EINVAL, "%s: no resources specified", key);
        if (json_array_size(resources) > 1)
                return refuse(w, key, "one resource (the whole-GPU one); per-GPU modes come from its devices list");
        snprintf(key, sizeof key, "%s.resources[0]", where);
        r = walk_replica(w, key, json_array_get(resources, 0), rename_default, rep);
        if (r < 0)
                return r;
        rep->sharing = kind;
        if (kind == NVCONFIG_SHARING_MPS && !fail_gt_one_set) /* NVIDIA keeps MPS's historical behaviour */
                rep->fail_requests_greater_than_one = true;
        return 0;
}

/* A GPU both sets name, decided from the file alone ("" none): all, two counts (both hold GPU 0), an index under a
 * count, the same entry in both lists. A UUID beside an index or a count is the agent's to decide (the GPUs). */
static bool overlap(const struct nvconfig_replicas *a, const struct nvconfig_replicas *b, char *ret, size_t len) {
        if (a->all || b->all)
                return snprintf(ret, len, "%s", a->all ? "all (in sharing.timeSlicing)" : "all (in sharing.mps)"), true;
        if (a->count && b->count)
                return snprintf(ret, len, "0 (both count from GPU 0)"), true;
        for (unsigned pass = 0; pass < 2; pass++) {
                const struct nvconfig_replicas *c = pass ? b : a, *l = pass ? a : b;
                for (unsigned k = 0; c->count && k < l->n_devices; k++) {
                        unsigned idx;
                        if (parse_uint(l->devices[k], 1u << 20, &idx) == 0 && idx < c->count)
                                return snprintf(ret, len, "%u", idx), true;
                }
        }
        for (unsigned i = 0; i < a->n_devices; i++)
                for (unsigned j = 0; j < b->n_devices; j++)
                        if (streq(a->devices[i], b->devices[j]))
                                return snprintf(ret, len, "%s", a->devices[i]), true;
        return false;
}

/* Both strategies in one file: gpuslice serves them side by side when their GPUs and names differ. */
static int both(struct walk *w) {
        const struct nvconfig_replicas *a = &w->nv.ts, *b = &w->nv.mps;
        if (!a->sharing || !b->sharing)
                return 0;
        if (streq(a->name, b->name))
                return gs_error_set(w->err, -EINVAL,
                                    "sharing.timeSlicing.resources[0] and sharing.mps.resources[0]: both advertise "
                                    "%.100s (rename one: rename or renameByDefault)",
                                    a->name);
        char gpu[NVCONFIG_DEVICE_REF_MAX + 32];
        if (overlap(a, b, gpu, sizeof gpu))
                return gs_error_set(w->err, -EINVAL,
                                    "sharing.timeSlicing.resources[0].devices and sharing.mps.resources[0].devices: "
                                    "GPU %s is in both (one GPU, one mode: the lists must be disjoint)",
                                    gpu);
        return 0;
}

static int walk_sharing(struct walk *w, const json_t *m) {
        const char *k;
        const json_t *v;
        int r = need_map(w, "sharing", m);
        json_object_foreach((json_t *)m, k, v) {
                if (r < 0)
                        break;
                if (streq(k, "timeSlicing"))
                        r = json_is_object(v) && json_object_size(v) == 0
                                    ? 0
                                    : walk_strategy(w, "sharing.timeSlicing", v, NVCONFIG_SHARING_TIME_SLICING);
                else if (streq(k, "mps"))
                        r = walk_strategy(w, "sharing.mps", v, NVCONFIG_SHARING_MPS);
                else
                        r = unknown(w, "sharing", k);
        }
        return r < 0 ? r : both(w);
}

static int walk_root(struct walk *w, const json_t *root) {
        if (!json_is_object(root))
                return gs_error_set(w->err, -EINVAL, "expected a mapping at the top");
        const char *version = str_of(json_object_get(root, "version"));
        if (!version)
                return gs_error_set(w->err, -EINVAL, "version: missing (expected v1)");
        if (!streq(version, "v1"))
                return gs_error_set(w->err, -EINVAL, "version: '%.32s' is not v1", version);
        const char *k;
        const json_t *v;
        int r = 0;
        /* flags first: they change the whole-GPU name the sharing section is checked against */
        if (json_object_get(root, "flags"))
                r = walk_flags(w, json_object_get(root, "flags"));
        if (r >= 0 && json_object_get(root, "resources"))
                r = walk_resources(w, json_object_get(root, "resources"));
        if (r >= 0 && json_object_get(root, "sharing"))
                r = walk_sharing(w, json_object_get(root, "sharing"));
        json_object_foreach((json_t *)root, k, v) {
                if (r < 0)
                        break;
                if (streq(k, "imex"))
                        r = json_is_object(v) && json_object_size(v) == 0
                                    ? 0
                                    : refuse(w, "imex", "IMEX channels are not passed to containers");
                else if (streq(k, "health"))
                        r = refuse(w, "health", "set health.xid-ignore in gpuslice's own config");
                else if (!streq(k, "version") && !streq(k, "flags") && !streq(k, "resources") && !streq(k, "sharing"))
                        r = unknown(w, "", k);
        }
        return r;
}

int nvconfig_parse(const char *text, size_t len, const char *path, struct gpuslice_config *cfg, struct nvconfig *ret,
                   struct gs_error *err) {
        if (!text || !path || !cfg || !ret)
                return -EINVAL;
        if (len > NVCONFIG_FILE_MAX)
                return gs_error_set(err, -EFBIG, "%s: larger than %u bytes", path, NVCONFIG_FILE_MAX);
        struct walk *w = calloc(1, sizeof *w);
        if (!w)
                return gs_error_set(err, -ENOMEM, "out of memory");
        json_t *root = NULL;
        int r = kube_yaml_to_json(text, len, path, &root, err);
        if (r >= 0) {
                w->cfg = *cfg;
                w->err = err;
                snprintf(w->nv.source, sizeof w->nv.source, "%s", path);
                r = walk_root(w, root);
                if (r < 0)
                        gs_error_prefix(err, "%s", path);
        }
        json_decref(root);
        if (r >= 0) {
                *cfg = w->cfg;
                *ret = w->nv;
        }
        free(w);
        return r < 0 ? r : 0;
}

int nvconfig_read(const char *path, char **ret_text, size_t *ret_len, struct gs_error *err) {
        int r = read_file(path, NVCONFIG_FILE_MAX, ret_text, ret_len);
        if (r < 0)
                return gs_error_set(err, r, "%s: %s", path, r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
        return 0;
}

int nvconfig_load(const char *path, struct gpuslice_config *cfg, struct nvconfig *ret, struct gs_error *err) {
        _cleanup_(freep) char *text = NULL;
        size_t len = 0;
        int r = nvconfig_read(path, &text, &len, err);
        if (r < 0)
                return r;
        return nvconfig_parse(text, len, path, cfg, ret, err);
}

static bool entry_name_ok(const char *s) {
        return s[0] && s[0] != '.' && !strchr(s, '/') && strlen(s) < 254;
}

int nvconfig_select(const char *dir, const char *label_value, const char *default_name, char *buf, size_t len,
                    struct gs_error *err) {
        const char *want = label_value && label_value[0]     ? label_value
                           : default_name && default_name[0] ? default_name
                                                             : NULL;
        if (want && !entry_name_ok(want))
                return gs_error_set(err, -EINVAL, "%s: '%.64s' is not a config name", dir, want);
        DIR *d = opendir(dir);
        if (!d)
                return gs_error_set(err, -errno, "%s: %s", dir, strerror(errno));
        char only[256] = "";
        unsigned n = 0;
        bool found = false, has_default = false;
        struct dirent *e;
        while ((e = readdir(d))) {
                if (!entry_name_ok(e->d_name))
                        continue; /* ., .., and a ConfigMap mount's ..data links */
                n++;
                snprintf(only, sizeof only, "%s", e->d_name);
                found = found || (want && streq(e->d_name, want));
                has_default = has_default || streq(e->d_name, "default");
        }
        closedir(d);
        const char *name = want;
        if (want && !found)
                return gs_error_set(err, -ENOENT, "%s: no config named '%s'%s", dir, want,
                                    label_value && label_value[0] ? " (the node label " NVCONFIG_LABEL ")" : "");
        if (!want && has_default)
                name = "default";
        else if (!want && n == 1)
                name = only;
        else if (!want)
                return gs_error_set(err, -EINVAL,
                                    "%s: %u configs and no choice: label the node " NVCONFIG_LABEL
                                    "=NAME or give a default",
                                    dir, n);
        if ((size_t)snprintf(buf, len, "%s/%s", dir, name) >= len)
                return gs_error_set(err, -ENAMETOOLONG, "%s: path too long", dir);
        return 0;
}

const char *nvconfig_sharing_name(enum nvconfig_sharing s) {
        return s == NVCONFIG_SHARING_TIME_SLICING ? "time-slicing" : s == NVCONFIG_SHARING_MPS ? "mps" : "none";
}

const char *nvconfig_sharing_key(enum nvconfig_sharing s) {
        return s == NVCONFIG_SHARING_TIME_SLICING ? "sharing.timeSlicing"
               : s == NVCONFIG_SHARING_MPS        ? "sharing.mps"
                                                  : "sharing";
}
