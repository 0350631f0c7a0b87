/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cluster/pod — a Pod object → what it asks for and where it was placed (cluster.h): the request
 * classifier applied to its containers, its policy annotation, and its assignment in whichever of
 * gpuslice's, gpu-manager's or gpushare's annotations it carries. Everything read is untrusted:
 * bounded sizes, typed access only, errors naming the field. Must never log or trust a length or
 * an index it was given.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc/alloc.h"
#include "cluster/cluster.h"
#include "util/util.h"

json_t *cluster_json_load(const char *text, size_t len, size_t max, struct gs_error *err) {
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

int cluster_json_str(const json_t *obj, const char *key, char *buf, size_t len, const char *what,
                     struct gs_error *err) {
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

const char *cluster_json_get(const json_t *obj, const char *key) {
        return json_string_value(json_object_get(obj, key));
}

/* ---- quantities ---- */

/* A Kubernetes quantity of an extended resource: a whole number (cluster_quantity_milli's forms). */
static int parse_quantity(const char *s, uint64_t *ret) {
        uint64_t m;
        int r = cluster_quantity_milli(s, &m);
        if (r < 0)
                return r;
        if (m % 1000)
                return -EINVAL;
        *ret = m / 1000;
        return 0;
}

static uint32_t unit_mib(enum cluster_res_name n, const struct cluster_units *u) {
        switch (n) {
                case CLUSTER_NAME_GPUSLICE_MEMORY: return u->gpuslice_mib;
                case CLUSTER_NAME_TENCENT_MEMORY: return u->tencent_mib;
                case CLUSTER_NAME_ALIYUN_MEMORY: return u->aliyun_mib;
                default: return 1;
        }
}

/* One GPU resource of a container, quantity q: recorded per kind. */
static int container_add(struct cluster_container_req *c, enum cluster_res_name n, enum cluster_res kind, uint64_t q,
                         const struct cluster_units *u, const char *key, struct gs_error *err) {
        /* nothing one container asks of one resource exceeds 64 GPUs' worth */
        uint64_t max = kind == CLUSTER_RES_WHOLE  ? CLUSTER_GPUS_MAX
                       : kind == CLUSTER_RES_CORE ? 100u * CLUSTER_GPUS_MAX
                                                  : UINT32_MAX / (unit_mib(n, u) ? unit_mib(n, u) : 1);
        if (q > max) {
                if (kind == CLUSTER_RES_WHOLE)
                        return gs_error_set(err, -EINVAL, "container %s asks for %llu GPUs (at most %d)", c->name,
                                            (unsigned long long)q, CLUSTER_GPUS_MAX);
                return gs_error_set(err, -EINVAL, "container %s: %s is too large", c->name, key);
        }
        c->qty[kind] = (uint32_t)q;
        c->res[kind] = (uint8_t)n;
        return 0;
}

/* The normalised request of a container from what it asks per kind. */
static int container_normalise(struct cluster_container_req *c, const struct cluster_units *u, struct gs_error *err) {
        uint64_t whole = c->qty[CLUSTER_RES_WHOLE], core = c->qty[CLUSTER_RES_CORE];
        uint64_t mem = (uint64_t)c->qty[CLUSTER_RES_MEM] * unit_mib(c->res[CLUSTER_RES_MEM], u);
        bool frac = core || mem;
        if (core > 100) {
                if (core % 100 != 0)
                        return gs_error_set(
                                err, -EINVAL,
                                "container %s: compute %llu exceeds one GPU (100) and is not a multiple of 100",
                                c->name, (unsigned long long)core);
                if (whole)
                        return gs_error_set(err, -EINVAL,
                                            "container %s asks for nvidia.com/gpu and whole GPUs by compute", c->name);
                whole = core / 100;
                core = 0;
                mem = 0; /* a whole GPU brings all its memory */
                frac = false;
        }
        if (whole && frac)
                return gs_error_set(err, -EINVAL, "container %s asks for whole GPUs and a GPU share at once", c->name);
        c->whole = (unsigned)whole;
        c->core = (unsigned)core;
        c->mem_mib = (uint32_t)mem;
        return 0;
}

/* One resource of a container's limits (or requests): counted when it is a GPU resource. */
static int container_resource(struct cluster_container_req *c, const char *key, json_t *val,
                              const struct cluster_units *u, enum cluster_profile *profile, bool *any,
                              struct gs_error *err) {
        enum cluster_res kind;
        enum cluster_profile p;
        enum cluster_res_name n = cluster_resource_classify(key, u, &kind, &p);
        uint64_t q;
        if (!n)
                return 0;
        if (!json_is_string(val) || parse_quantity(json_string_value(val), &q) < 0)
                return gs_error_set(err, -EINVAL, "container %s: %s is not a whole number", c->name[0] ? c->name : "?",
                                    key);
        if (q == 0)
                return 0;
        *any = true;
        if (p != CLUSTER_PROFILE_NONE)
                *profile = p;
        return container_add(c, n, kind, q, u, key, err);
}

/* One container's GPU resources: limits (extended resources must have requests == limits; a
 * container that sets only requests is read from requests). 1 if it asks for any, 0 if none. */
static int container_req(json_t *c, const struct cluster_units *u, struct cluster_container_req *ret,
                         enum cluster_profile *profile, unsigned idx, struct gs_error *err) {
        *ret = (struct cluster_container_req){ .spec_index = (uint8_t)MIN(idx, 255u) };
        char where[40];
        snprintf(where, sizeof where, "spec.containers[%u].", idx);
        if (cluster_json_str(c, "name", ret->name, sizeof ret->name, where, err) < 0)
                return -EINVAL;
        json_t *res = json_object_get(c, "resources");
        if (res && !json_is_null(res) && !json_is_object(res))
                return gs_error_set(err, -EINVAL, "%sresources is not an object", where);
        json_t *lim = json_is_object(res) ? json_object_get(res, "limits") : NULL;
        json_t *rq = json_is_object(res) ? json_object_get(res, "requests") : NULL;
        if ((lim && !json_is_null(lim) && !json_is_object(lim)) || (rq && !json_is_null(rq) && !json_is_object(rq)))
                return gs_error_set(err, -EINVAL, "%sresources.limits/requests is not an object", where);
        bool any = false;
        const char *key;
        json_t *val;
        json_object_foreach(lim, key, val) {
                if (container_resource(ret, key, val, u, profile, &any, err) < 0)
                        return -EINVAL;
        }
        json_object_foreach(rq, key, val) {
                /* requests only count where limits did not name the resource */
                if (!json_object_get(lim, key) && container_resource(ret, key, val, u, profile, &any, err) < 0)
                        return -EINVAL;
        }
        if (!any)
                return 0;
        return container_normalise(ret, u, err) < 0 ? -EINVAL : 1;
}

/* ---- assignments ---- */

static bool flag_true(json_t *annots, const char *key) {
        const char *v = cluster_json_get(annots, key);
        return v && streq(v, "true");
}

/* A decimal count of nanoseconds → ms; 0 when absent or malformed. */
static uint64_t ns_to_ms(const char *s) {
        uint64_t v;
        return s && parse_u64(s, &v) == 0 ? v / 1000000u : 0;
}

/* The GPUs of one container of gpuslice.io/assignment: a non-empty array of distinct indices. */
static int assigned_gpus(json_t *gpus, const char *name, uint64_t *ret, struct gs_error *err) {
        if (!json_is_array(gpus) || json_array_size(gpus) == 0 || json_array_size(gpus) > CLUSTER_GPUS_MAX)
                return gs_error_set(err, -EINVAL, "annotation %s: container %s: gpus must be a non-empty array",
                                    CLUSTER_ANN_ASSIGNMENT, name);
        uint64_t set = 0;
        size_t k;
        json_t *g;
        json_array_foreach(gpus, k, g) {
                json_int_t i = json_is_integer(g) ? json_integer_value(g) : -1;
                if (i < 0 || i >= CLUSTER_GPUS_MAX || (set >> i & 1))
                        return gs_error_set(err, -EINVAL, "annotation %s: container %s: bad or repeated GPU index",
                                            CLUSTER_ANN_ASSIGNMENT, name);
                set |= 1ULL << i;
        }
        *ret = set;
        return 0;
}

static int decode_gpuslice_containers(json_t *cs, struct cluster_pod *v, struct gs_error *err) {
        bool named[CLUSTER_CONTAINERS_MAX] = { false };
        size_t i;
        json_t *c;
        json_array_foreach(cs, i, c) {
                char name[64];
                uint64_t set = 0;
                if (!json_is_object(c))
                        return gs_error_set(err, -EINVAL, "annotation %s: containers[%zu] is not an object",
                                            CLUSTER_ANN_ASSIGNMENT, i);
                if (cluster_json_str(c, "name", name, sizeof name, "assignment.containers[].", err) < 0 ||
                    assigned_gpus(json_object_get(c, "gpus"), name, &set, err) < 0)
                        return -EINVAL;
                /* by container name; names the pod does not have are ignored */
                for (unsigned x = 0; x < v->req.n; x++) {
                        const struct cluster_container_req *rq = &v->req.c[x];
                        if (!streq(rq->name, name))
                                continue;
                        if (named[x])
                                return gs_error_set(err, -EINVAL, "annotation %s: container %s named twice",
                                                    CLUSTER_ANN_ASSIGNMENT, name);
                        named[x] = true;
                        v->assign.c[x] = (struct cluster_container_assign){
                                .gpus = set, .whole = rq->whole > 0, .core = rq->core, .mem_mib = rq->mem_mib
                        };
                }
        }
        return 0;
}

/* gpuslice.io/assignment (a string holding a JSON object). */
static int decode_gpuslice(json_t *annots, json_t *a, struct cluster_pod *v, struct gs_error *err) {
        if (!json_is_string(a) || json_string_length(a) > CLUSTER_ANNOTATION_MAX)
                return gs_error_set(err, -EINVAL, "annotation %s is not a string of at most %u bytes",
                                    CLUSTER_ANN_ASSIGNMENT, CLUSTER_ANNOTATION_MAX);
        json_error_t je;
        json_t *j = json_loadb(json_string_value(a), json_string_length(a), JSON_REJECT_DUPLICATES, &je);
        int r = -EINVAL;
        json_t *ver = json_object_get(j, "v"), *t = json_object_get(j, "time");
        char by[32];
        if (!json_is_object(j))
                gs_error_set(err, -EINVAL, "annotation %s is not a JSON object", CLUSTER_ANN_ASSIGNMENT);
        else if (!json_is_integer(ver) || json_integer_value(ver) != CLUSTER_ASSIGNMENT_VERSION)
                gs_error_set(err, -EINVAL, "annotation %s: unknown version", CLUSTER_ANN_ASSIGNMENT);
        else if (cluster_json_str(j, "node", v->assigned_node, sizeof v->assigned_node, "assignment.", err) < 0 ||
                 cluster_json_str(j, "by", by, sizeof by, "assignment.", err) < 0)
                ;
        else if (!v->assigned_node[0] || !json_is_array(json_object_get(j, "containers")))
                gs_error_set(err, -EINVAL, "annotation %s: node and containers are required", CLUSTER_ANN_ASSIGNMENT);
        else {
                v->assign = (struct cluster_assignment){ .n = v->req.n };
                r = decode_gpuslice_containers(json_object_get(j, "containers"), v, err);
        }
        if (r == 0) {
                v->source = streq(by, "agent") ? CLUSTER_SOURCE_AGENT : CLUSTER_SOURCE_GPUSLICE;
                v->assumed_ms = json_is_integer(t) && json_integer_value(t) > 0 ? (uint64_t)json_integer_value(t) : 0;
                v->confirmed = flag_true(annots, CLUSTER_ANN_ASSIGNED);
        }
        json_decref(j);
        return r;
}

/* gpu-manager: predicate-gpu-idx-<i> for the container at position i of spec.containers (as
 * gpu-admission writes it and its node agent reads it), predicate-node. 1 found, 0 none. */
static int decode_gpu_manager(json_t *annots, struct cluster_pod *v, struct gs_error *err) {
        bool any = false;
        struct cluster_assignment asg = { .n = v->req.n };
        for (unsigned x = 0; x < v->req.n; x++) {
                char key[64];
                const struct cluster_container_req *rq = &v->req.c[x];
                snprintf(key, sizeof key, CLUSTER_ANN_TENCENT_IDX_PREFIX "%u", (unsigned)rq->spec_index);
                json_t *idx = json_object_get(annots, key);
                if (!idx)
                        continue;
                alloc_set_t set;
                if (!json_is_string(idx) || alloc_set_parse(json_string_value(idx), CLUSTER_GPUS_MAX, &set) < 0 || !set)
                        return gs_error_set(err, -EINVAL, "annotation %s is not a list of GPU indices", key);
                asg.c[x] = (struct cluster_container_assign){
                        .gpus = set, .whole = rq->whole > 0, .core = rq->core, .mem_mib = rq->mem_mib
                };
                any = true;
        }
        if (!any)
                return 0;
        if (cluster_json_str(annots, CLUSTER_ANN_TENCENT_NODE, v->assigned_node, sizeof v->assigned_node, "annotation ",
                             err) < 0)
                return -EINVAL;
        v->assign = asg;
        v->source = CLUSTER_SOURCE_GPU_MANAGER;
        v->assumed_ms = ns_to_ms(cluster_json_get(annots, CLUSTER_ANN_TENCENT_TIME));
        v->confirmed = flag_true(annots, CLUSTER_ANN_TENCENT_ASSIGNED);
        return 1;
}

/* gpushare: ALIYUN_COM_GPU_MEM_IDX, one GPU for every fractional container. 1 found, 0 none. */
static int decode_gpushare(json_t *annots, struct cluster_pod *v, struct gs_error *err) {
        json_t *idx = json_object_get(annots, CLUSTER_ANN_ALIYUN_IDX);
        if (!idx)
                return 0;
        unsigned g;
        if (!json_is_string(idx) || parse_uint(json_string_value(idx), CLUSTER_GPUS_MAX - 1, &g) < 0)
                return gs_error_set(err, -EINVAL, "annotation %s is not a GPU index", CLUSTER_ANN_ALIYUN_IDX);
        v->assign = (struct cluster_assignment){ .n = v->req.n };
        for (unsigned x = 0; x < v->req.n; x++) {
                const struct cluster_container_req *rq = &v->req.c[x];
                if (cluster_request_is_fractional(rq))
                        v->assign.c[x] = (struct cluster_container_assign){ .gpus = 1ULL << g,
                                                                            .core = rq->core,
                                                                            .mem_mib = rq->mem_mib };
        }
        v->source = CLUSTER_SOURCE_GPUSHARE;
        v->assumed_ms = ns_to_ms(cluster_json_get(annots, CLUSTER_ANN_ALIYUN_TIME));
        v->confirmed = flag_true(annots, CLUSTER_ANN_ALIYUN_ASSIGNED);
        return 1;
}

/* The assignment from the first system's annotations the pod carries. 0 (found or none), -EINVAL. */
static int decode_assignment(json_t *annots, struct cluster_pod *v, struct gs_error *err) {
        static const unsigned flags[] = { CLUSTER_FLAG_GPUSLICE, CLUSTER_FLAG_GPU_MANAGER, CLUSTER_FLAG_GPUSHARE };
        for (size_t f = 0; f < ELEMENTSOF(flags); f++)
                if (json_object_get(annots, cluster_flag_key(flags[f]))) {
                        v->flags |= flags[f];
                        if (flag_true(annots, cluster_flag_key(flags[f])))
                                v->flags_true |= flags[f];
                }
        json_t *a = json_object_get(annots, CLUSTER_ANN_ASSIGNMENT);
        int r = a ? decode_gpuslice(annots, a, v, err) : decode_gpu_manager(annots, v, err);
        if (r == 0 && !a)
                r = decode_gpushare(annots, v, err);
        if (r < 0)
                return r;
        v->has_assignment = v->source != CLUSTER_SOURCE_NONE;
        return 0;
}

/* "2026-11-23T23:40:16Z" → Unix seconds; 0 when absent or malformed (sorts first, deterministic). */
static int64_t rfc3339(const char *s) {
        struct tm tm = { 0 };
        char z = 0;
        if (!s || strlen(s) != 20 ||
            sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                   &tm.tm_sec, &z) != 7 ||
            z != 'Z')
                return 0;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        time_t t = timegm(&tm);
        return t < 0 ? 0 : (int64_t)t;
}

static int decode_meta(json_t *pod, struct cluster_pod *ret, struct gs_error *err) {
        json_t *meta = json_object_get(pod, "metadata");
        json_t *spec = json_object_get(pod, "spec");
        json_t *status = json_object_get(pod, "status");
        if (!json_is_object(meta))
                return gs_error_set(err, -EINVAL, "pod has no metadata object");
        if (cluster_json_str(meta, "uid", ret->uid, sizeof ret->uid, "metadata.", err) < 0 ||
            cluster_json_str(meta, "namespace", ret->ns, sizeof ret->ns, "metadata.", err) < 0 ||
            cluster_json_str(meta, "name", ret->name, sizeof ret->name, "metadata.", err) < 0 ||
            cluster_json_str(meta, "resourceVersion", ret->resource_version, sizeof ret->resource_version, "metadata.",
                             err) < 0)
                return -EINVAL;
        ret->created = rfc3339(cluster_json_get(meta, "creationTimestamp"));
        if (spec && !json_is_object(spec))
                return gs_error_set(err, -EINVAL, "pod spec is not an object");
        if (cluster_json_str(spec, "nodeName", ret->node_name, sizeof ret->node_name, "spec.", err) < 0)
                return -EINVAL;
        if (json_is_object(status)) {
                char phase[32];
                if (cluster_json_str(status, "phase", phase, sizeof phase, "status.", err) < 0)
                        return -EINVAL;
                ret->terminated = streq(phase, "Succeeded") || streq(phase, "Failed");
        }
        return 0;
}

/* One nvidia.com/mig-<profile> quantity q of a container, added to the pod's MIG request. */
static int mig_add(struct cluster_request *req, const char *key, json_t *val, unsigned idx, struct gs_error *err) {
        const char *profile = key + strlen(CLUSTER_MIG_PREFIX);
        uint64_t q;
        if (!profile[0] || strlen(profile) >= sizeof req->mig[0].profile)
                return gs_error_set(err, -EINVAL, "spec.containers[%u]: %.80s is not a MIG profile", idx, key);
        if (!json_is_string(val) || parse_quantity(json_string_value(val), &q) < 0)
                return gs_error_set(err, -EINVAL, "spec.containers[%u]: %.80s is not a whole number", idx, key);
        if (q == 0)
                return 0;
        unsigned k = 0;
        while (k < req->n_mig && !streq(req->mig[k].profile, profile))
                k++;
        if (k == req->n_mig) {
                if (req->n_mig >= CLUSTER_MIG_REQ_MAX)
                        return gs_error_set(err, -EINVAL, "the pod asks for more than %d MIG profiles",
                                            CLUSTER_MIG_REQ_MAX);
                req->mig[req->n_mig++] = (struct cluster_mig_req){ .count = 0 };
                strscpy(req->mig[k].profile, profile, sizeof req->mig[k].profile);
        }
        /* no node has more MIG devices than its GPUs can hold */
        if (q > (uint64_t)CLUSTER_GPUS_MAX * CLUSTER_MIG_MAX - req->mig[k].count)
                return gs_error_set(err, -EINVAL, "spec.containers[%u]: %.80s is too large", idx, key);
        req->mig[k].count += (unsigned)q;
        return 0;
}

/* A container's MIG devices (limits; requests where limits do not name the resource), summed into req. */
static int container_mig(json_t *c, struct cluster_request *req, unsigned idx, struct gs_error *err) {
        json_t *res = json_object_get(c, "resources");
        json_t *lim = json_is_object(res) ? json_object_get(res, "limits") : NULL;
        json_t *rq = json_is_object(res) ? json_object_get(res, "requests") : NULL;
        const char *key;
        json_t *val;
        json_object_foreach(lim, key, val) {
                if (startswith(key, CLUSTER_MIG_PREFIX) && mig_add(req, key, val, idx, err) < 0)
                        return -EINVAL;
        }
        json_object_foreach(rq, key, val) {
                if (startswith(key, CLUSTER_MIG_PREFIX) && !json_object_get(lim, key) &&
                    mig_add(req, key, val, idx, err) < 0)
                        return -EINVAL;
        }
        return 0;
}

static int decode_containers(json_t *spec, const struct cluster_units *u, struct cluster_pod *ret,
                             struct gs_error *err) {
        json_t *cs = json_is_object(spec) ? json_object_get(spec, "containers") : NULL;
        if (cs && !json_is_null(cs) && !json_is_array(cs))
                return gs_error_set(err, -EINVAL, "spec.containers is not an array");
        size_t i;
        json_t *c;
        json_array_foreach(cs, i, c) {
                if (!json_is_object(c))
                        return gs_error_set(err, -EINVAL, "spec.containers[%zu] is not an object", i);
                struct cluster_container_req cr;
                int r = container_req(c, u, &cr, &ret->req.profile, (unsigned)i, err);
                if (r >= 0)
                        r = container_mig(c, &ret->req, (unsigned)i, err) < 0 ? -EINVAL : r;
                if (r < 0)
                        return r;
                if (r == 0)
                        continue;
                if (ret->req.n >= CLUSTER_CONTAINERS_MAX)
                        return gs_error_set(err, -EINVAL, "more than %d containers ask for GPU resources",
                                            CLUSTER_CONTAINERS_MAX);
                ret->req.c[ret->req.n++] = cr;
        }
        return 0;
}

static int decode_annotations(json_t *annots, struct cluster_pod *ret, struct gs_error *err) {
        if (annots && !json_is_null(annots) && !json_is_object(annots))
                return gs_error_set(err, -EINVAL, "metadata.annotations is not an object");
        if (!json_is_object(annots))
                return 0;
        json_t *pol = json_object_get(annots, CLUSTER_ANN_POLICY);
        if (pol) {
                if (!json_is_string(pol) || cluster_policy_from_name(json_string_value(pol), &ret->policy) < 0)
                        return gs_error_set(err, -EINVAL, "annotation %s must be binpack or spread",
                                            CLUSTER_ANN_POLICY);
                ret->has_policy = true;
        }
        /* a malformed assignment is ignored, never fatal: the pod then counts as placed without
         * one (the extender infers where it is; inspect shows it on no recorded GPU; the agent
         * does not honour it) */
        struct gs_error ae = { 0 };
        if (decode_assignment(annots, ret, &ae) < 0) {
                strscpy(ret->assignment_error, ae.message, sizeof ret->assignment_error);
                ret->has_assignment = false;
                ret->assign = (struct cluster_assignment){ 0 };
                ret->assigned_node[0] = '\0';
                ret->source = CLUSTER_SOURCE_NONE;
                ret->confirmed = false;
                ret->assumed_ms = 0;
        }
        if (ret->has_assignment && !ret->assigned_node[0])
                strscpy(ret->assigned_node, ret->node_name, sizeof ret->assigned_node);
        if (ret->has_assignment && !ret->assigned_node[0]) {
                ret->has_assignment = false; /* an index without a node: nothing to count */
                ret->source = CLUSTER_SOURCE_NONE;
        }
        return 0;
}

int cluster_pod_decode_json(const json_t *pod_json, const struct cluster_units *u, struct cluster_pod *ret,
                            struct gs_error *err) {
        json_t *pod = (json_t *)pod_json;
        memset(ret, 0, sizeof *ret);
        if (!json_is_object(pod))
                return gs_error_set(err, -EINVAL, "pod is not an object");
        int r = decode_meta(pod, ret, err);
        if (r >= 0)
                r = decode_containers(json_object_get(pod, "spec"), u, ret, err);
        if (r >= 0)
                r = cluster_pod_requests(json_object_get(pod, "spec"), &ret->cpu_milli, &ret->mem_mib, err);
        if (r >= 0)
                r = decode_annotations(json_object_get(json_object_get(pod, "metadata"), "annotations"), ret, err);
        return r < 0 ? -EINVAL : 0;
}

int cluster_pod_decode(const char *text, size_t len, const struct cluster_units *u, struct cluster_pod *ret,
                       struct gs_error *err) {
        json_t *j = cluster_json_load(text, len, CLUSTER_POD_MAX, err);
        if (!j)
                return -EINVAL;
        int r = cluster_pod_decode_json(j, u, ret, err);
        json_decref(j);
        return r;
}
