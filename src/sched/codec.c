/* SPDX-License-Identifier: Apache-2.0 */
/*
 * codec.c — JSON of the scheduler extender (see codec.h). Everything read here is untrusted:
 * bounded sizes, typed access only, and an error that names the field. Must never log or
 * trust a length or index it was given.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sched/codec.h"
#include "util/util.h"

void sched_units_default(struct sched_units *ret) {
        *ret = (struct sched_units){ .gpuslice_mib = 256, .tencent_mib = 256, .aliyun_mib = 1024 };
}

static json_t *load(const char *text, size_t len, size_t max, struct gs_error *err) {
        if (!text)
                return gs_error_set(err, -EINVAL, "no input"), NULL;
        if (len > max) {
                gs_error_set(err, -EINVAL, "input of %zu bytes exceeds the limit of %zu", len, max);
                return NULL;
        }
        json_error_t je;
        json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!j)
                gs_error_set(err, -EINVAL, "invalid JSON at line %d column %d: %s", je.line, je.column, je.text);
        return j;
}

/* A string member into buf; absent or null → "" (0); wrong type or too long → -EINVAL. */
static int get_str(json_t *obj, const char *key, char *buf, size_t len, const char *what, struct gs_error *err) {
        buf[0] = '\0';
        json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_string(v))
                return gs_error_set(err, -EINVAL, "%s%s is not a string", what, key);
        size_t l = json_string_length(v);
        if (l >= len || strlen(json_string_value(v)) != l)
                return gs_error_set(err, -EINVAL, "%s%s is too long or contains NUL", what, key);
        memcpy(buf, json_string_value(v), l + 1);
        return 0;
}

/* ---- quantities ---- */

/* A Kubernetes quantity of an extended resource: a whole number, optionally with a decimal (k M G T)
 * or binary (Ki Mi Gi Ti) suffix. */
static int parse_quantity(const char *s, uint64_t *ret) {
        uint64_t v = 0;
        size_t i = 0;
        if (!s || !s[0])
                return -EINVAL;
        for (; s[i] >= '0' && s[i] <= '9'; i++) {
                if (v > (UINT64_MAX - 9) / 10)
                        return -ERANGE;
                v = v * 10 + (uint64_t)(s[i] - '0');
        }
        if (i == 0)
                return -EINVAL;
        static const struct {
                const char *sfx;
                uint64_t mul;
        } sfx[] = { { "", 1 },
                    { "k", 1000ULL },
                    { "M", 1000000ULL },
                    { "G", 1000000000ULL },
                    { "T", 1000000000000ULL },
                    { "Ki", 1ULL << 10 },
                    { "Mi", 1ULL << 20 },
                    { "Gi", 1ULL << 30 },
                    { "Ti", 1ULL << 40 } };
        for (size_t k = 0; k < ELEMENTSOF(sfx); k++)
                if (streq(s + i, sfx[k].sfx)) {
                        if (v && sfx[k].mul > UINT64_MAX / v)
                                return -ERANGE;
                        *ret = v * sfx[k].mul;
                        return 0;
                }
        return -EINVAL;
}

enum res_kind {
        RES_NONE,
        RES_WHOLE,
        RES_CORE,
        RES_MEM
};

static enum res_kind classify(const char *name, const struct sched_units *u, uint32_t *unit, enum sched_profile *p) {
        if (streq(name, "nvidia.com/gpu"))
                return RES_WHOLE;
        if (streq(name, "gpuslice.io/gpu-core")) {
                *p = SCHED_PROFILE_GPUSLICE;
                return RES_CORE;
        }
        if (streq(name, "tencent.com/vcuda-core")) {
                *p = SCHED_PROFILE_TENCENT;
                return RES_CORE;
        }
        if (streq(name, "gpuslice.io/gpu-memory")) {
                *p = SCHED_PROFILE_GPUSLICE;
                *unit = u->gpuslice_mib;
                return RES_MEM;
        }
        if (streq(name, "tencent.com/vcuda-memory")) {
                *p = SCHED_PROFILE_TENCENT;
                *unit = u->tencent_mib;
                return RES_MEM;
        }
        if (streq(name, "aliyun.com/gpu-mem")) {
                *p = SCHED_PROFILE_ALIYUN;
                *unit = u->aliyun_mib;
                return RES_MEM;
        }
        return RES_NONE;
}

/* One container's GPU resources: limits (extended resources must have requests == limits; a
 * container that sets only requests is read from requests). 1 if it asks for any, 0 if none. */
/* lint: long — a strict parser: one check per field of the format, in the format's order, each with its own
 * message; split, the grammar would no longer read top to bottom (a container's GPU resources of every profile
 * gpuslice reads). */
static int container_req(json_t *c, const struct sched_units *u, struct sched_container_req *ret,
                         enum sched_profile *profile, unsigned idx, struct gs_error *err) {
        *ret = (struct sched_container_req){ 0 };
        char where[40];
        snprintf(where, sizeof where, "spec.containers[%u].", idx);
        if (get_str(c, "name", ret->name, sizeof ret->name, where, err) < 0)
                return -EINVAL;
        json_t *res = json_object_get(c, "resources");
        if (res && !json_is_null(res) && !json_is_object(res))
                return gs_error_set(err, -EINVAL, "%sresources is not an object", where);
        json_t *lim = json_is_object(res) ? json_object_get(res, "limits") : NULL;
        json_t *rq = json_is_object(res) ? json_object_get(res, "requests") : NULL;
        if ((lim && !json_is_null(lim) && !json_is_object(lim)) || (rq && !json_is_null(rq) && !json_is_object(rq)))
                return gs_error_set(err, -EINVAL, "%sresources.limits/requests is not an object", where);
        bool any = false, frac = false;
        uint64_t core = 0, whole = 0, mem = 0;
        for (int pass = 0; pass < 2; pass++) {
                json_t *set = pass == 0 ? lim : rq;
                if (!json_is_object(set))
                        continue;
                const char *key;
                json_t *val;
                json_object_foreach(set, key, val) {
                        uint32_t unit = 0;
                        enum sched_profile p = SCHED_PROFILE_NONE;
                        enum res_kind k = classify(key, u, &unit, &p);
                        if (k == RES_NONE)
                                continue;
                        /* requests only count where limits did not name the resource */
                        if (pass == 1 && json_is_object(lim) && json_object_get(lim, key))
                                continue;
                        uint64_t q;
                        if (!json_is_string(val) || parse_quantity(json_string_value(val), &q) < 0)
                                return gs_error_set(err, -EINVAL, "container %s: %s is not a whole number",
                                                    ret->name[0] ? ret->name : "?", key);
                        if (q == 0)
                                continue;
                        any = true;
                        if (p != SCHED_PROFILE_NONE)
                                *profile = p;
                        if (k == RES_WHOLE) {
                                whole = q;
                        } else if (k == RES_CORE) {
                                frac = true;
                                core = q;
                        } else {
                                frac = true;
                                if (q > UINT32_MAX / (unit ? unit : 1))
                                        return gs_error_set(err, -EINVAL, "container %s: %s is too large", ret->name,
                                                            key);
                                mem = q * unit;
                        }
                }
        }
        if (!any)
                return 0;
        if (core > 100) {
                if (core % 100 != 0)
                        return gs_error_set(
                                err, -EINVAL,
                                "container %s: compute %llu exceeds one GPU (100) and is not a multiple of 100",
                                ret->name, (unsigned long long)core);
                if (whole)
                        return gs_error_set(err, -EINVAL,
                                            "container %s asks for nvidia.com/gpu and whole GPUs by compute",
                                            ret->name);
                whole = core / 100;
                core = 0;
                mem = 0; /* a whole GPU brings all its memory */
                frac = false;
        }
        if (whole && frac)
                return gs_error_set(err, -EINVAL, "container %s asks for whole GPUs and a GPU share at once",
                                    ret->name);
        if (whole > SCHED_MAX_GPUS)
                return gs_error_set(err, -EINVAL, "container %s asks for %llu GPUs (at most %d)", ret->name,
                                    (unsigned long long)whole, SCHED_MAX_GPUS);
        ret->whole = (unsigned)whole;
        ret->core = (unsigned)core;
        ret->mem_mib = (uint32_t)mem;
        ret->spec_index = (uint8_t)MIN(idx, 255u);
        return 1;
}

/* "0,1,3" → set; -EINVAL on garbage. */
static int parse_idx_list(const char *s, alloc_set_t *ret) {
        return alloc_set_parse(s, SCHED_MAX_GPUS, ret);
}

static bool flag_true(json_t *annots, const char *key) {
        const char *v = json_string_value(json_object_get(annots, key));
        return v && streq(v, "true");
}

/* lint: long — a strict parser: one check per field of the format, in the format's order, each with its own
 * message; split, the grammar would no longer read top to bottom (our assignment annotation, then gpu-manager's
 * and gpushare's). */
static int decode_assignment(json_t *annots, struct sched_pod_view *v, struct gs_error *err) {
        json_t *a = json_object_get(annots, SCHED_ANNOT_ASSIGNMENT);
        if (a) {
                if (!json_is_string(a) || json_string_length(a) > SCHED_CODEC_MAX_ANNOT)
                        return gs_error_set(err, -EINVAL, "annotation %s is not a string of at most %u bytes",
                                            SCHED_ANNOT_ASSIGNMENT, SCHED_CODEC_MAX_ANNOT);
                json_error_t je;
                json_t *j = json_loadb(json_string_value(a), json_string_length(a), JSON_REJECT_DUPLICATES, &je);
                if (!j || !json_is_object(j)) {
                        json_decref(j);
                        return gs_error_set(err, -EINVAL, "annotation %s is not a JSON object", SCHED_ANNOT_ASSIGNMENT);
                }
                int r = -EINVAL;
                json_t *ver = json_object_get(j, "v");
                json_t *cs = json_object_get(j, "containers");
                if (!json_is_integer(ver) || json_integer_value(ver) != SCHED_ASSIGN_ANNOT_VERSION) {
                        gs_error_set(err, -EINVAL, "annotation %s: unknown version", SCHED_ANNOT_ASSIGNMENT);
                        goto out;
                }
                if (get_str(j, "node", v->assigned_node, sizeof v->assigned_node, "assignment.", err) < 0)
                        goto out;
                if (!v->assigned_node[0] || !json_is_array(cs)) {
                        gs_error_set(err, -EINVAL, "annotation %s: node and containers are required",
                                     SCHED_ANNOT_ASSIGNMENT);
                        goto out;
                }
                v->assign = (struct sched_assignment){ .n = v->req.n };
                size_t i;
                json_t *c;
                json_array_foreach(cs, i, c) {
                        char name[64];
                        if (get_str(c, "name", name, sizeof name, "assignment.containers[].", err) < 0)
                                goto out;
                        json_t *gpus = json_object_get(c, "gpus");
                        if (!json_is_array(gpus) || json_array_size(gpus) == 0 ||
                            json_array_size(gpus) > SCHED_MAX_GPUS) {
                                gs_error_set(err, -EINVAL,
                                             "annotation %s: container %s: gpus must be a non-empty array",
                                             SCHED_ANNOT_ASSIGNMENT, name);
                                goto out;
                        }
                        alloc_set_t set = 0;
                        size_t k;
                        json_t *g;
                        json_array_foreach(gpus, k, g) {
                                if (!json_is_integer(g) || json_integer_value(g) < 0 ||
                                    json_integer_value(g) >= SCHED_MAX_GPUS) {
                                        gs_error_set(err, -EINVAL, "annotation %s: container %s: bad GPU index",
                                                     SCHED_ANNOT_ASSIGNMENT, name);
                                        goto out;
                                }
                                set |= 1ULL << json_integer_value(g);
                        }
                        /* match by container name; unknown names are ignored */
                        for (unsigned x = 0; x < v->req.n; x++) {
                                const struct sched_container_req *rq = &v->req.c[x];
                                if (!streq(rq->name, name))
                                        continue;
                                v->assign.c[x] = (struct sched_container_assign){
                                        .gpus = set, .whole = rq->whole > 0, .core = rq->core, .mem_mib = rq->mem_mib
                                };
                        }
                }
                v->has_assignment = true;
                v->source = SCHED_SOURCE_GPUSLICE;
                v->confirmed = flag_true(annots, SCHED_ANNOT_ASSIGNED);
                r = 0;
out:
                json_decref(j);
                return r;
        }
        /* gpu-manager: tencent.com/predicate-gpu-idx-<i> for the container at position i of
         * spec.containers (as gpu-admission writes it and the node agent reads it), predicate-node */
        char key[64];
        bool any = false;
        struct sched_assignment asg = { .n = v->req.n };
        for (unsigned x = 0; x < v->req.n; x++) {
                snprintf(key, sizeof key, "tencent.com/predicate-gpu-idx-%u", (unsigned)v->req.c[x].spec_index);
                json_t *idx = json_object_get(annots, key);
                if (!json_is_string(idx))
                        continue;
                alloc_set_t set;
                if (parse_idx_list(json_string_value(idx), &set) < 0 || !set)
                        return gs_error_set(err, -EINVAL, "annotation %s is not a list of GPU indices", key);
                const struct sched_container_req *rq = &v->req.c[x];
                asg.c[x] = (struct sched_container_assign){
                        .gpus = set, .whole = rq->whole > 0, .core = rq->core, .mem_mib = rq->mem_mib
                };
                any = true;
        }
        if (any) {
                if (get_str(annots, "tencent.com/predicate-node", v->assigned_node, sizeof v->assigned_node,
                            "annotation ", err) < 0)
                        return -EINVAL;
                v->assign = asg;
                v->has_assignment = true;
                v->source = SCHED_SOURCE_GPU_MANAGER;
                v->confirmed = flag_true(annots, "tencent.com/gpu-assigned");
                return 0;
        }
        /* gpushare: ALIYUN_COM_GPU_MEM_IDX, one GPU for the pod's gpu-mem containers */
        json_t *idx = json_object_get(annots, "ALIYUN_COM_GPU_MEM_IDX");
        if (json_is_string(idx)) {
                unsigned g;
                if (parse_uint(json_string_value(idx), SCHED_MAX_GPUS - 1, &g) < 0)
                        return gs_error_set(err, -EINVAL, "annotation ALIYUN_COM_GPU_MEM_IDX is not a GPU index");
                v->assign = (struct sched_assignment){ .n = v->req.n };
                for (unsigned x = 0; x < v->req.n; x++) {
                        const struct sched_container_req *rq = &v->req.c[x];
                        if (sched_request_is_fractional(rq))
                                v->assign.c[x] = (struct sched_container_assign){ .gpus = 1ULL << g,
                                                                                  .core = rq->core,
                                                                                  .mem_mib = rq->mem_mib };
                }
                v->has_assignment = true;
                v->source = SCHED_SOURCE_GPUSHARE;
                v->confirmed = flag_true(annots, "ALIYUN_COM_GPU_MEM_ASSIGNED");
        }
        return 0;
}

/* lint: long — a strict parser: one check per field of the format, in the format's order, each with its own
 * message; split, the grammar would no longer read top to bottom (the Pod fields the scheduler reads). */
int sched_pod_decode_json(const void *pod_json, const struct sched_units *u, struct sched_pod_view *ret,
                          struct gs_error *err) {
        json_t *pod = (json_t *)pod_json;
        memset(ret, 0, sizeof *ret);
        if (!json_is_object(pod))
                return gs_error_set(err, -EINVAL, "pod is not an object");
        json_t *meta = json_object_get(pod, "metadata");
        json_t *spec = json_object_get(pod, "spec");
        json_t *status = json_object_get(pod, "status");
        if (!json_is_object(meta))
                return gs_error_set(err, -EINVAL, "pod has no metadata object");
        if (get_str(meta, "uid", ret->uid, sizeof ret->uid, "metadata.", err) < 0 ||
            get_str(meta, "namespace", ret->ns, sizeof ret->ns, "metadata.", err) < 0 ||
            get_str(meta, "name", ret->name, sizeof ret->name, "metadata.", err) < 0 ||
            get_str(meta, "resourceVersion", ret->resource_version, sizeof ret->resource_version, "metadata.", err) < 0)
                return -EINVAL;
        if (spec && !json_is_object(spec))
                return gs_error_set(err, -EINVAL, "pod spec is not an object");
        if (get_str(spec, "nodeName", ret->node_name, sizeof ret->node_name, "spec.", err) < 0)
                return -EINVAL;
        if (json_is_object(status)) {
                char phase[32];
                if (get_str(status, "phase", phase, sizeof phase, "status.", err) < 0)
                        return -EINVAL;
                ret->terminated = streq(phase, "Succeeded") || streq(phase, "Failed");
        }
        json_t *cs = json_is_object(spec) ? json_object_get(spec, "containers") : NULL;
        if (cs && !json_is_null(cs) && !json_is_array(cs))
                return gs_error_set(err, -EINVAL, "spec.containers is not an array");
        size_t i;
        json_t *c;
        json_array_foreach(cs, i, c) {
                if (!json_is_object(c))
                        return gs_error_set(err, -EINVAL, "spec.containers[%zu] is not an object", i);
                struct sched_container_req cr;
                int r = container_req(c, u, &cr, &ret->req.profile, (unsigned)i, err);
                if (r < 0)
                        return r;
                if (r == 0)
                        continue;
                if (ret->req.n >= SCHED_MAX_CONTAINERS)
                        return gs_error_set(err, -EINVAL, "more than %d containers ask for GPU resources",
                                            SCHED_MAX_CONTAINERS);
                ret->req.c[ret->req.n++] = cr;
        }
        json_t *annots = json_object_get(meta, "annotations");
        if (annots && !json_is_null(annots) && !json_is_object(annots))
                return gs_error_set(err, -EINVAL, "metadata.annotations is not an object");
        if (json_is_object(annots)) {
                json_t *pol = json_object_get(annots, SCHED_ANNOT_POLICY);
                if (pol) {
                        if (!json_is_string(pol) || sched_policy_from_name(json_string_value(pol), &ret->policy) < 0)
                                return gs_error_set(err, -EINVAL, "annotation %s must be binpack or spread",
                                                    SCHED_ANNOT_POLICY);
                        ret->has_policy = true;
                }
                /* a malformed assignment is ignored, never fatal: the pod then counts as placed
                 * without one (the extender infers where it is; inspect shows it on no recorded GPU) */
                struct gs_error ae = { 0 };
                int r = decode_assignment(annots, ret, &ae);
                if (r < 0) {
                        strscpy(ret->assignment_error, ae.message, sizeof ret->assignment_error);
                        ret->has_assignment = false;
                        ret->assign = (struct sched_assignment){ 0 };
                        ret->assigned_node[0] = '\0';
                        ret->source = SCHED_SOURCE_NONE;
                        ret->confirmed = false;
                }
                if (ret->has_assignment && !ret->assigned_node[0])
                        strscpy(ret->assigned_node, ret->node_name, sizeof ret->assigned_node);
                if (ret->has_assignment && !ret->assigned_node[0]) {
                        ret->has_assignment = false; /* gpushare idx without a node: nothing to count */
                        ret->source = SCHED_SOURCE_NONE;
                }
        }
        return 0;
}

int sched_pod_decode(const char *text, size_t len, const struct sched_units *u, struct sched_pod_view *ret,
                     struct gs_error *err) {
        json_t *j = load(text, len, SCHED_CODEC_MAX_BODY, err);
        if (!j)
                return -EINVAL;
        int r = sched_pod_decode_json(j, u, ret, err);
        json_decref(j);
        return r;
}

void sched_pod_view_info(const struct sched_pod_view *v, struct sched_pod_info *ret) {
        bool bound = v->node_name[0] != '\0';
        *ret = (struct sched_pod_info){
                .uid = v->uid,
                .ns = v->ns,
                .name = v->name,
                .resource_version = v->resource_version,
                .node = bound ? v->node_name : v->assigned_node,
                .bound = bound,
                .req = v->req,
                .has_assignment = v->has_assignment && (!bound || streq(v->assigned_node, v->node_name)),
                .assign = v->assign,
                .terminated = v->terminated,
                .source = v->source,
                .confirmed = v->confirmed,
        };
}

/* ---- node annotation ---- */

/* lint: long — a strict parser: one check per field of the format, in the format's order, each with its own
 * message; split, the grammar would no longer read top to bottom (the node annotation: GPUs, their order, the link
 * rows). */
int sched_node_annotation_decode(const char *value, size_t len, struct sched_node_info *ret, struct gs_error *err) {
        char name[SCHED_NAME_MAX];
        strscpy(name, ret->name, sizeof name);
        memset(ret, 0, sizeof *ret);
        strscpy(ret->name, name, sizeof ret->name);
        json_t *j = load(value, len, SCHED_CODEC_MAX_ANNOT, err);
        if (!j)
                return -EINVAL;
        int r = -EINVAL;
        json_t *ver = json_object_get(j, "v");
        json_t *gpus = json_object_get(j, "gpus");
        json_t *links = json_object_get(j, "links");
        if (!json_is_object(j) || !json_is_integer(ver) || json_integer_value(ver) != SCHED_NODE_ANNOT_VERSION) {
                gs_error_set(err, -EINVAL, "%s: not a version %d object", SCHED_ANNOT_NODE_GPUS,
                             SCHED_NODE_ANNOT_VERSION);
                goto out;
        }
        if (!json_is_array(gpus) || json_array_size(gpus) > SCHED_MAX_GPUS) {
                gs_error_set(err, -EINVAL, "%s: gpus must be an array of at most %d", SCHED_ANNOT_NODE_GPUS,
                             SCHED_MAX_GPUS);
                goto out;
        }
        if (get_str(j, "driver", ret->driver, sizeof ret->driver, "", err) < 0)
                goto out;
        ret->n_gpus = (unsigned)json_array_size(gpus);
        alloc_set_t seen = 0;
        size_t i;
        json_t *g;
        json_array_foreach(gpus, i, g) {
                json_t *idx = json_object_get(g, "i");
                json_t *mem = json_object_get(g, "mem");
                /* indices are a permutation of 0..n-1: GPU i goes to position i */
                if (!json_is_object(g) || !json_is_integer(idx) || json_integer_value(idx) < 0 ||
                    json_integer_value(idx) >= (json_int_t)ret->n_gpus || (seen >> json_integer_value(idx) & 1)) {
                        gs_error_set(err, -EINVAL, "%s: gpus[%zu].i must be a distinct index below %u",
                                     SCHED_ANNOT_NODE_GPUS, i, ret->n_gpus);
                        goto out;
                }
                unsigned at = (unsigned)json_integer_value(idx);
                seen |= 1ULL << at;
                if (!json_is_integer(mem) || json_integer_value(mem) < 0 || json_integer_value(mem) > UINT32_MAX) {
                        gs_error_set(err, -EINVAL, "%s: gpus[%zu].mem must be a MiB count", SCHED_ANNOT_NODE_GPUS, i);
                        goto out;
                }
                struct sched_gpu_info *gi = &ret->gpu[at];
                char health[96];
                gi->mem_mib = (uint32_t)json_integer_value(mem);
                if (get_str(g, "uuid", gi->uuid, sizeof gi->uuid, "gpus[].", err) < 0 ||
                    get_str(g, "model", gi->model, sizeof gi->model, "gpus[].", err) < 0 ||
                    get_str(g, "health", health, sizeof health, "gpus[].", err) < 0)
                        goto out;
                gi->healthy = streq(health, "ok");
                strscpy(gi->health, health, sizeof gi->health);
        }
        for (unsigned a = 0; a < ret->n_gpus; a++)
                for (unsigned b = 0; b < ret->n_gpus; b++)
                        ret->link[a][b] = a == b ? (struct topo_link){ TOPO_LEVEL_SELF, 0 }
                                                 : (struct topo_link){ TOPO_LEVEL_UNKNOWN, 0 };
        /* "links": rows i = 0..n-2 of the links from GPU i to GPUs i+1..n-1, entries split by ',',
         * rows by ';' (docs/cluster.md) */
        if (links && !json_is_null(links)) {
                if (!json_is_string(links)) {
                        gs_error_set(err, -EINVAL, "%s: links is not a string", SCHED_ANNOT_NODE_GPUS);
                        goto out;
                }
                const char *s = json_string_value(links), *end = s + json_string_length(links);
                unsigned a = 0, b = 1;
                while (s < end && ret->n_gpus > 1) {
                        size_t tok = strcspn(s, ",;");
                        if (s + tok > end)
                                tok = (size_t)(end - s);
                        struct topo_link l, lp;
                        const char *slash = memchr(s, '/', tok);
                        size_t first = slash ? (size_t)(slash - s) : tok;
                        bool bad = a + 1 >= ret->n_gpus || b >= ret->n_gpus || topo_link_from_name(s, first, &l) < 0 ||
                                   l.pcie == TOPO_LEVEL_SELF;
                        if (!bad && slash) {
                                /* "NV12/PIX" (what the node agent publishes): the PCIe level under the NVLinks */
                                bad = !l.nvlinks || topo_link_from_name(slash + 1, tok - first - 1, &lp) < 0 ||
                                      lp.nvlinks || lp.pcie == TOPO_LEVEL_SELF;
                                if (!bad)
                                        l.pcie = lp.pcie;
                        }
                        if (bad) {
                                gs_error_set(err, -EINVAL, "%s: links: bad entry at GPU %u to %u",
                                             SCHED_ANNOT_NODE_GPUS, a, b);
                                goto out;
                        }
                        ret->link[a][b] = ret->link[b][a] = l;
                        s += tok;
                        if (s < end && *s == ';') {
                                if (b != ret->n_gpus - 1) {
                                        gs_error_set(err, -EINVAL, "%s: links: row %u too short", SCHED_ANNOT_NODE_GPUS,
                                                     a);
                                        goto out;
                                }
                                a++;
                                b = a + 1;
                        } else {
                                b++;
                        }
                        if (s < end)
                                s++;
                }
        }
        r = 0;
out:
        json_decref(j);
        return r;
}

int sched_node_annotation_encode(const struct sched_node_info *info, char **ret) {
        json_t *j = json_object();
        json_t *gpus = json_array();
        char *links = malloc((size_t)SCHED_MAX_GPUS * SCHED_MAX_GPUS * 8 + 1);
        int r = -ENOMEM;
        if (!j || !gpus || !links)
                goto out;
        json_object_set_new(j, "v", json_integer(SCHED_NODE_ANNOT_VERSION));
        size_t off = 0;
        links[0] = '\0';
        for (unsigned i = 0; i < info->n_gpus && i < SCHED_MAX_GPUS; i++) {
                const struct sched_gpu_info *g = &info->gpu[i];
                json_array_append_new(gpus, json_pack("{s:i,s:s,s:s,s:I,s:s}", "i", (int)i, "uuid", g->uuid, "model",
                                                      g->model, "mem", (json_int_t)g->mem_mib, "health",
                                                      g->healthy ? "ok" : "unhealthy"));
                for (unsigned b = i + 1; b < info->n_gpus; b++) {
                        char nb[8];
                        off += (size_t)snprintf(links + off, 9, "%s%s", b > i + 1 ? "," : (i ? ";" : ""),
                                                topo_link_name(info->link[i][b], nb));
                }
        }
        json_object_set(j, "gpus", gpus);
        json_object_set_new(j, "links", json_string(links));
        *ret = json_dumps(j, JSON_COMPACT);
        r = *ret ? 0 : -ENOMEM;
out:
        free(links);
        json_decref(gpus);
        json_decref(j);
        return r;
}

/* ---- assignment annotations (bind) ---- */

static int set_str(json_t *o, const char *k, const char *v) {
        return json_object_set_new(o, k, json_string(v));
}

int sched_assignment_annotations(const struct sched_request *req, const struct sched_assignment *a,
                                 const struct sched_node *n, const char *node_name, uint64_t now_ns,
                                 const struct sched_units *u, char **ret) {
        json_t *ann = json_object();
        json_t *val = json_object();
        json_t *cs = json_array();
        char buf[256];
        int r = -ENOMEM;
        if (!ann || !val || !cs)
                goto out;
        json_object_set_new(val, "v", json_integer(SCHED_ASSIGN_ANNOT_VERSION));
        json_object_set_new(val, "node", json_string(node_name));
        json_object_set_new(val, "time", json_integer((json_int_t)(now_ns / 1000000))); /* ms */
        for (unsigned k = 0; k < a->n && k < req->n; k++) {
                const struct sched_container_assign *c = &a->c[k];
                json_t *gpus = json_array(), *uuids = json_array();
                for (alloc_set_t s = c->gpus; s; s &= s - 1) {
                        unsigned g = (unsigned)__builtin_ctzll(s);
                        json_array_append_new(gpus, json_integer(g));
                        const char *uu = n && g < n->n_gpus && n->gpu[g].uuid ? n->gpu[g].uuid : "";
                        json_array_append_new(uuids, json_string(uu));
                }
                json_t *o = json_pack("{s:s,s:o,s:o}", "name", req->c[k].name, "gpus", gpus, "uuids", uuids);
                if (!o)
                        goto out;
                /* whole GPUs: core 100 and mem 0 (all of each GPU), as docs/cluster.md defines */
                json_object_set_new(o, "core", json_integer(c->whole ? 100 : c->core));
                json_object_set_new(o, "mem", json_integer(c->whole ? 0 : c->mem_mib));
                json_array_append_new(cs, o);
        }
        json_object_set(val, "containers", cs);
        char *text = json_dumps(val, JSON_COMPACT);
        if (!text)
                goto out;
        set_str(ann, SCHED_ANNOT_ASSIGNMENT, text);
        set_str(ann, SCHED_ANNOT_ASSIGNED, "false");
        free(text);
        snprintf(buf, sizeof buf, "%llu", (unsigned long long)now_ns);
        if (req->profile == SCHED_PROFILE_TENCENT) {
                for (unsigned k = 0; k < a->n && k < req->n; k++) {
                        char key[64], idx[SCHED_MAX_GPUS * 3 + 1];
                        snprintf(key, sizeof key, "tencent.com/predicate-gpu-idx-%u", (unsigned)req->c[k].spec_index);
                        alloc_set_format(a->c[k].gpus, idx, sizeof idx);
                        set_str(ann, key, idx);
                }
                set_str(ann, "tencent.com/predicate-node", node_name);
                set_str(ann, "tencent.com/predicate-time", buf);
                set_str(ann, "tencent.com/gpu-assigned", "false");
        } else if (req->profile == SCHED_PROFILE_ALIYUN) {
                int gpu = -1;
                uint64_t mem = 0;
                for (unsigned k = 0; k < a->n && k < req->n; k++)
                        if (!a->c[k].whole && a->c[k].gpus) {
                                gpu = __builtin_ctzll(a->c[k].gpus);
                                mem += a->c[k].mem_mib;
                        }
                if (gpu >= 0) {
                        char s[32];
                        snprintf(s, sizeof s, "%d", gpu);
                        set_str(ann, "ALIYUN_COM_GPU_MEM_IDX", s);
                        snprintf(s, sizeof s, "%llu", (unsigned long long)(mem / (u->aliyun_mib ? u->aliyun_mib : 1)));
                        set_str(ann, "ALIYUN_COM_GPU_MEM_POD", s);
                        set_str(ann, "ALIYUN_COM_GPU_MEM_ASSUME_TIME", buf);
                        set_str(ann, "ALIYUN_COM_GPU_MEM_ASSIGNED", "false");
                }
        }
        *ret = json_dumps(ann, JSON_COMPACT | JSON_SORT_KEYS);
        r = *ret ? 0 : -ENOMEM;
out:
        json_decref(cs);
        json_decref(val);
        json_decref(ann);
        return r;
}

/* ---- extender protocol ---- */

void sched_ext_args_done(struct sched_ext_args *a) {
        if (!a)
                return;
        free(a->node_names);
        json_decref(a->root);
        a->node_names = NULL;
        a->root = NULL;
        a->nodes_items = NULL;
        a->n_nodes = 0;
}

/*
 * The start of every extender request (filter/prioritize and preempt): the size bound, the parse,
 * the outer object (`what` names it in messages) and its Pod. *ret_root is the parsed document
 * whenever the body parsed, also when a later check fails, so the caller's *_done frees it.
 * 0, or -E2BIG (body too large) / -EINVAL with err filled.
 */
static int ext_request_begin(const char *body, size_t len, const char *what, const struct sched_units *u,
                             void **ret_root, struct sched_pod_view *ret_pod, struct gs_error *err) {
        *ret_root = NULL;
        if (len > SCHED_CODEC_MAX_BODY) {
                gs_error_set(err, -EINVAL, "request of %zu bytes exceeds %u", len, SCHED_CODEC_MAX_BODY);
                return -E2BIG;
        }
        json_t *j = load(body, len, SCHED_CODEC_MAX_BODY, err);
        if (!j)
                return -EINVAL;
        *ret_root = j;
        if (!json_is_object(j))
                return gs_error_set(err, -EINVAL, "%s is not an object", what);
        json_t *pod = json_object_get(j, "Pod");
        if (!json_is_object(pod))
                return gs_error_set(err, -EINVAL, "%s.Pod is missing", what);
        if (sched_pod_decode_json(pod, u, ret_pod, err) < 0)
                return -EINVAL;
        return 0;
}

int sched_ext_args_decode(const char *body, size_t len, const struct sched_units *u, struct sched_ext_args *ret,
                          struct gs_error *err) {
        memset(ret, 0, sizeof *ret);
        int r = ext_request_begin(body, len, "ExtenderArgs", u, &ret->root, &ret->pod, err);
        if (r < 0) {
                sched_ext_args_done(ret);
                return r;
        }
        json_t *j = ret->root;
        json_t *names = json_object_get(j, "NodeNames");
        json_t *nodes = json_object_get(j, "Nodes");
        if (names && !json_is_null(names)) {
                if (!json_is_array(names)) {
                        gs_error_set(err, -EINVAL, "ExtenderArgs.NodeNames is not an array");
                        goto bad;
                }
                ret->node_cache = true;
                ret->n_nodes = json_array_size(names);
        } else if (nodes && !json_is_null(nodes)) {
                json_t *items = json_object_get(nodes, "items");
                if (!json_is_object(nodes) || (items && !json_is_null(items) && !json_is_array(items))) {
                        gs_error_set(err, -EINVAL, "ExtenderArgs.Nodes is not a NodeList");
                        goto bad;
                }
                ret->nodes_items = json_is_array(items) ? items : NULL;
                ret->n_nodes = ret->nodes_items ? json_array_size(items) : 0;
        } else {
                gs_error_set(err, -EINVAL, "ExtenderArgs has neither NodeNames nor Nodes");
                goto bad;
        }
        if (ret->n_nodes > SCHED_CODEC_MAX_NODES) {
                gs_error_set(err, -EINVAL, "%zu nodes exceed the limit of %d", ret->n_nodes, SCHED_CODEC_MAX_NODES);
                goto bad;
        }
        ret->node_names = calloc(ret->n_nodes ? ret->n_nodes : 1, sizeof *ret->node_names);
        if (!ret->node_names) {
                sched_ext_args_done(ret);
                return -ENOMEM;
        }
        for (size_t i = 0; i < ret->n_nodes; i++) {
                json_t *v;
                if (ret->node_cache)
                        v = json_array_get(names, i);
                else
                        v = json_object_get(json_object_get(json_array_get(ret->nodes_items, i), "metadata"), "name");
                if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= SCHED_NAME_MAX ||
                    strlen(json_string_value(v)) != json_string_length(v)) {
                        gs_error_set(err, -EINVAL, "node %zu has no valid name", i);
                        goto bad;
                }
                ret->node_names[i] = (char *)json_string_value(v);
        }
        return 0;
bad:
        sched_ext_args_done(ret);
        return -EINVAL;
}

static int finish(json_t *j, char **ret, size_t *ret_len) {
        if (!j)
                return -ENOMEM;
        char *t = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        if (!t)
                return -ENOMEM;
        *ret = t;
        *ret_len = strlen(t);
        return 0;
}

/* A growing text buffer for the replies that list every node: written by hand, since building
 * thousands of jansson values per call cost more than the decisions themselves. */
struct out {
        char *buf;
        size_t len, cap;
        bool failed;
};

static void out_reserve(struct out *o, size_t more) {
        if (o->failed || o->len + more + 1 <= o->cap)
                return;
        size_t cap = MAX(o->cap * 2, o->len + more + 1024);
        char *b = realloc(o->buf, cap);
        if (!b) {
                o->failed = true;
                return;
        }
        o->buf = b;
        o->cap = cap;
}

static void out_raw(struct out *o, const char *s, size_t l) {
        out_reserve(o, l);
        if (o->failed)
                return;
        memcpy(o->buf + o->len, s, l);
        o->len += l;
        o->buf[o->len] = '\0';
}

static void out_lit(struct out *o, const char *s) {
        out_raw(o, s, strlen(s));
}

/* A JSON string; s is UTF-8 (it came out of jansson or our own formatting). */
static void out_str(struct out *o, const char *s) {
        size_t l = strlen(s);
        out_reserve(o, l * 6 + 2);
        if (o->failed)
                return;
        char *p = o->buf + o->len;
        *p++ = '"';
        for (size_t i = 0; i < l; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c == '"' || c == '\\') {
                        *p++ = '\\';
                        *p++ = (char)c;
                } else if (c < 0x20) {
                        static const char hex[] = "0123456789abcdef";
                        memcpy(p, "\\u00", 4);
                        p[4] = hex[c >> 4];
                        p[5] = hex[c & 15];
                        p += 6;
                } else {
                        *p++ = (char)c;
                }
        }
        *p++ = '"';
        *p = '\0';
        o->len = (size_t)(p - o->buf);
}

static int out_finish(struct out *o, char **ret, size_t *ret_len) {
        if (o->failed || !o->buf) {
                free(o->buf);
                return -ENOMEM;
        }
        *ret = o->buf;
        *ret_len = o->len;
        return 0;
}

static void out_failures(struct out *o, const struct sched_ext_args *a, const struct sched_ext_node_result *res,
                         bool unresolvable_only) {
        bool first = true;
        out_lit(o, "{");
        for (size_t i = 0; res && i < a->n_nodes; i++) {
                if (res[i].verdict == SCHED_FIT || (unresolvable_only && res[i].verdict != SCHED_UNRESOLVABLE))
                        continue;
                if (!first)
                        out_lit(o, ",");
                first = false;
                out_str(o, a->node_names[i]);
                out_lit(o, ":");
                out_str(o, res[i].reason ? res[i].reason : "does not fit");
        }
        out_lit(o, "}");
}

int sched_ext_filter_encode(const struct sched_ext_args *a, const struct sched_ext_node_result *res, const char *error,
                            char **ret, size_t *ret_len) {
        struct out o = { 0 };
        if (error)
                res = NULL;
        out_lit(&o, "{\"Error\":");
        out_str(&o, error ? error : "");
        /* kube-scheduler 1.20 knows only FailedNodes; later ones let FailedAndUnresolvableNodes
         * win, so an unresolvable node goes in both */
        out_lit(&o, ",\"FailedNodes\":");
        out_failures(&o, a, res, false);
        out_lit(&o, ",\"FailedAndUnresolvableNodes\":");
        out_failures(&o, a, res, true);
        if (!error && a->node_cache) {
                out_lit(&o, ",\"NodeNames\":[");
                bool first = true;
                for (size_t i = 0; i < a->n_nodes; i++) {
                        if (res[i].verdict != SCHED_FIT)
                                continue;
                        if (!first)
                                out_lit(&o, ",");
                        first = false;
                        out_str(&o, a->node_names[i]);
                }
                out_lit(&o, "],\"Nodes\":null}");
        } else if (!error) {
                /* full Node objects come back as they were sent */
                out_lit(&o, ",\"NodeNames\":null,\"Nodes\":{\"metadata\":{},\"items\":[");
                bool first = true;
                for (size_t i = 0; i < a->n_nodes; i++) {
                        if (res[i].verdict != SCHED_FIT)
                                continue;
                        char *t = json_dumps(json_array_get(a->nodes_items, i), JSON_COMPACT);
                        if (!t) {
                                o.failed = true;
                                break;
                        }
                        if (!first)
                                out_lit(&o, ",");
                        first = false;
                        out_lit(&o, t);
                        free(t);
                }
                out_lit(&o, "]}}");
        } else {
                out_lit(&o, ",\"NodeNames\":null,\"Nodes\":null}");
        }
        return out_finish(&o, ret, ret_len);
}

int sched_ext_prioritize_encode(char *const *names, const int *scores, size_t n, char **ret, size_t *ret_len) {
        struct out o = { 0 };
        out_lit(&o, "[");
        for (size_t i = 0; i < n; i++) {
                /* scores are 0..10 (anything else is written with snprintf): 5,000 snprintf calls
                 * were a tenth of a prioritize call */
                char num[32];
                int l;
                if (scores[i] >= 0 && scores[i] <= 10) {
                        static const char head[] = ",\"Score\":";
                        memcpy(num, head, sizeof head - 1);
                        l = sizeof head - 1;
                        if (scores[i] == 10)
                                num[l++] = '1';
                        num[l++] = (char)('0' + scores[i] % 10);
                        num[l++] = '}';
                } else
                        l = snprintf(num, sizeof num, ",\"Score\":%d}", scores[i]);
                out_lit(&o, i ? ",{\"Host\":" : "{\"Host\":");
                out_str(&o, names[i]);
                out_raw(&o, num, (size_t)l);
        }
        out_lit(&o, "]");
        return out_finish(&o, ret, ret_len);
}

int sched_ext_bind_decode(const char *body, size_t len, struct sched_ext_bind_args *ret, struct gs_error *err) {
        memset(ret, 0, sizeof *ret);
        json_t *j = load(body, len, SCHED_CODEC_MAX_BODY, err);
        if (!j)
                return -EINVAL;
        int r = -EINVAL;
        if (!json_is_object(j)) {
                gs_error_set(err, -EINVAL, "ExtenderBindingArgs is not an object");
                goto out;
        }
        if (get_str(j, "PodName", ret->pod_name, sizeof ret->pod_name, "", err) < 0 ||
            get_str(j, "PodNamespace", ret->pod_namespace, sizeof ret->pod_namespace, "", err) < 0 ||
            get_str(j, "PodUID", ret->pod_uid, sizeof ret->pod_uid, "", err) < 0 ||
            get_str(j, "Node", ret->node, sizeof ret->node, "", err) < 0)
                goto out;
        if (!ret->pod_name[0] || !ret->pod_namespace[0] || !ret->pod_uid[0] || !ret->node[0]) {
                gs_error_set(err, -EINVAL, "ExtenderBindingArgs needs PodName, PodNamespace, PodUID and Node");
                goto out;
        }
        r = 0;
out:
        json_decref(j);
        return r;
}

int sched_ext_bind_encode(const char *error, char **ret, size_t *ret_len) {
        return finish(json_pack("{s:s}", "Error", error ? error : ""), ret, ret_len);
}

/* ---- preemption ---- */

void sched_ext_preempt_args_done(struct sched_ext_preempt_args *a) {
        if (!a)
                return;
        for (size_t i = 0; a->nodes && i < a->n_nodes; i++)
                free(a->nodes[i].uids);
        free(a->nodes);
        json_decref(a->root);
        memset(a, 0, sizeof *a);
}

/* One node's victims: {"Pods": [{"UID": "..."}] or [Pod...], "NumPDBViolations": n}. */
static int victims_decode(json_t *v, bool meta, struct sched_ext_victims *ret, size_t *budget, struct gs_error *err) {
        const char *where = meta ? "NodeNameToMetaVictims" : "NodeNameToVictims";
        if (json_is_null(v))
                return 0; /* no victims */
        if (!json_is_object(v))
                return gs_error_set(err, -EINVAL, "%s[%s] is not an object", where, ret->node);
        json_t *pods = json_object_get(v, "Pods"), *pdb = json_object_get(v, "NumPDBViolations");
        if (pdb && !json_is_null(pdb)) {
                if (!json_is_integer(pdb) || json_integer_value(pdb) < 0)
                        return gs_error_set(err, -EINVAL, "%s[%s].NumPDBViolations is not a count", where, ret->node);
                ret->pdb_violations = json_integer_value(pdb);
        }
        if (!pods || json_is_null(pods))
                return 0;
        if (!json_is_array(pods))
                return gs_error_set(err, -EINVAL, "%s[%s].Pods is not an array", where, ret->node);
        size_t n = json_array_size(pods);
        if (n > *budget) {
                gs_error_set(err, -EINVAL, "more than %u victims", SCHED_CODEC_MAX_VICTIMS);
                return -E2BIG;
        }
        *budget -= n;
        ret->uids = calloc(n ? n : 1, sizeof *ret->uids);
        if (!ret->uids)
                return -ENOMEM;
        size_t i;
        json_t *p;
        json_array_foreach(pods, i, p) {
                json_t *uid = meta ? json_object_get(p, "UID") : json_object_get(json_object_get(p, "metadata"), "uid");
                if (!json_is_object(p) || !json_is_string(uid) || json_string_length(uid) == 0 ||
                    json_string_length(uid) >= 128 || strlen(json_string_value(uid)) != json_string_length(uid))
                        return gs_error_set(err, -EINVAL, "%s[%s].Pods[%zu]: %s is not a pod UID", where, ret->node, i,
                                            meta ? "UID" : "metadata.uid");
                ret->uids[ret->n_uids++] = json_string_value(uid);
        }
        return 0;
}

int sched_ext_preempt_decode(const char *body, size_t len, const struct sched_units *u,
                             struct sched_ext_preempt_args *ret, struct gs_error *err) {
        memset(ret, 0, sizeof *ret);
        int r = ext_request_begin(body, len, "ExtenderPreemptionArgs", u, &ret->root, &ret->pod, err);
        if (r < 0) {
                sched_ext_preempt_args_done(ret);
                return r;
        }
        r = -EINVAL;
        json_t *j = ret->root;
        json_t *metav = json_object_get(j, "NodeNameToMetaVictims"), *full = json_object_get(j, "NodeNameToVictims");
        bool meta = metav && !json_is_null(metav);
        json_t *map = meta ? metav : full;
        if (!map || json_is_null(map)) {
                gs_error_set(err, -EINVAL,
                             "ExtenderPreemptionArgs has neither NodeNameToMetaVictims nor NodeNameToVictims");
                goto bad;
        }
        if (!json_is_object(map)) {
                gs_error_set(err, -EINVAL, "%s is not an object", meta ? "NodeNameToMetaVictims" : "NodeNameToVictims");
                goto bad;
        }
        if (json_object_size(map) > SCHED_CODEC_MAX_NODES) {
                gs_error_set(err, -EINVAL, "more than %u nodes", SCHED_CODEC_MAX_NODES);
                r = -E2BIG;
                goto bad;
        }
        ret->nodes = calloc(json_object_size(map) ? json_object_size(map) : 1, sizeof *ret->nodes);
        if (!ret->nodes) {
                r = -ENOMEM;
                goto bad;
        }
        size_t budget = SCHED_CODEC_MAX_VICTIMS;
        const char *key;
        json_t *v;
        json_object_foreach(map, key, v) {
                struct sched_ext_victims *x = &ret->nodes[ret->n_nodes++];
                x->node = key;
                if (!key[0] || strlen(key) >= SCHED_NAME_MAX) {
                        gs_error_set(err, -EINVAL, "a node name is empty or too long");
                        goto bad;
                }
                int q = victims_decode(v, meta, x, &budget, err);
                if (q < 0) {
                        r = q;
                        goto bad;
                }
        }
        return 0;
bad:
        sched_ext_preempt_args_done(ret);
        return r;
}

int sched_ext_preempt_encode(const struct sched_ext_preempt_args *a, const bool *keep, char **ret, size_t *ret_len) {
        struct out o = { 0 };
        out_lit(&o, "{\"NodeNameToMetaVictims\":{");
        bool first = true;
        for (size_t i = 0; i < a->n_nodes; i++) {
                const struct sched_ext_victims *x = &a->nodes[i];
                if (!keep[i])
                        continue;
                if (!first)
                        out_lit(&o, ",");
                first = false;
                out_str(&o, x->node);
                out_lit(&o, ":{\"Pods\":[");
                for (size_t k = 0; k < x->n_uids; k++) {
                        out_lit(&o, k ? ",{\"UID\":" : "{\"UID\":");
                        out_str(&o, x->uids[k]);
                        out_lit(&o, "}");
                }
                char num[48];
                int l = snprintf(num, sizeof num, "],\"NumPDBViolations\":%lld}", x->pdb_violations);
                out_raw(&o, num, (size_t)l);
        }
        out_lit(&o, "}}");
        return out_finish(&o, ret, ret_len);
}

/* ---- snapshot ---- */

int sched_node_decode_json(const void *node_json, struct sched_node_info *ret, struct gs_error *err) {
        json_t *node = (json_t *)node_json;
        json_t *meta = json_is_object(node) ? json_object_get(node, "metadata") : NULL;
        if (!json_is_object(meta))
                return gs_error_set(err, -EINVAL, "node has no metadata");
        char name[SCHED_NAME_MAX];
        if (get_str(meta, "name", name, sizeof name, "metadata.", err) < 0)
                return -EINVAL;
        if (!name[0])
                return gs_error_set(err, -EINVAL, "node has no name");
        json_t *ann = json_object_get(meta, "annotations");
        json_t *v = json_is_object(ann) ? json_object_get(ann, SCHED_ANNOT_NODE_GPUS) : NULL;
        if (!v)
                return -ENOENT;
        if (!json_is_string(v))
                return gs_error_set(err, -EINVAL, "node %s: %s is not a string", name, SCHED_ANNOT_NODE_GPUS);
        strscpy(ret->name, name, sizeof ret->name);
        struct gs_error e2 = { 0 };
        if (sched_node_annotation_decode(json_string_value(v), json_string_length(v), ret, &e2) < 0)
                return gs_error_set(err, -EINVAL, "node %s: %.159s", name, e2.message);
        return 0;
}

int sched_snapshot_load(struct sched_model *m, const char *text, size_t len, const struct sched_units *u,
                        size_t *ret_nodes, size_t *ret_pods, struct gs_error *err) {
        json_t *j = load(text, len, SCHED_CODEC_MAX_SNAPSHOT, err);
        if (!j)
                return -EINVAL;
        int r = -EINVAL;
        size_t nn = 0, np = 0;
        struct sched_node_info *info = malloc(sizeof *info);
        struct sched_pod_view *pv = malloc(sizeof *pv);
        if (!info || !pv) {
                r = -ENOMEM;
                goto out;
        }
        json_t *nodes = json_object_get(j, "nodes"), *pods = json_object_get(j, "pods");
        if (!json_is_object(j) || (nodes && !json_is_array(nodes)) || (pods && !json_is_array(pods))) {
                gs_error_set(err, -EINVAL, "snapshot must be {\"nodes\": [...], \"pods\": [...]}");
                goto out;
        }
        size_t i;
        json_t *o;
        json_array_foreach(nodes, i, o) {
                int q = sched_node_decode_json(o, info, err);
                if (q == -ENOENT)
                        continue;
                if (q < 0)
                        goto out;
                q = sched_model_set_node(m, info);
                if (q < 0) {
                        r = q;
                        goto out;
                }
                nn++;
        }
        json_array_foreach(pods, i, o) {
                struct gs_error e2 = { 0 };
                if (sched_pod_decode_json(o, u, pv, &e2) < 0) {
                        gs_error_set(err, -EINVAL, "pods[%zu]: %.199s", i, e2.message);
                        goto out;
                }
                struct sched_pod_info pi;
                sched_pod_view_info(pv, &pi);
                int q = sched_model_set_pod(m, &pi);
                if (q < 0) {
                        r = q;
                        gs_error_set(err, -EINVAL, "pods[%zu]: not accepted by the model", i);
                        goto out;
                }
                np++;
        }
        if (ret_nodes)
                *ret_nodes = nn;
        if (ret_pods)
                *ret_pods = np;
        r = 0;
out:
        free(info);
        free(pv);
        json_decref(j);
        return r;
}
