/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cluster/assignment — the writers of a pod's assignment (cluster.h): what a scheduler writes at
 * bind (gpuslice.io/assignment and the migrating systems' annotations), what the node agent records
 * for a pod it placed itself ("by":"agent"), and the agent's repair to what kubelet says the pod
 * holds. Read back by cluster_pod_decode_json (pod.c). Pure. Must never write a value its reader
 * would refuse, or drop a field of an annotation it rewrites that it does not know.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc.h"
#include "cluster/cluster.h"
#include "util/util.h"

static int set_str(json_t *o, const char *k, const char *v) {
        return json_object_set_new(o, k, json_string(v));
}

/* {"name","gpus":[i...],"uuids":[...] ("" unknown),"core","mem"}: core 100 and mem 0 for whole GPUs
 * (all of each GPU), as docs/cluster.md defines. */
static json_t *container_json(const char *name, uint64_t gpus, bool whole, unsigned core, uint32_t mem,
                              const char *const *uuids, unsigned n_uuids) {
        json_t *g = json_array(), *u = json_array();
        for (uint64_t s = gpus; s; s &= s - 1) {
                unsigned i = (unsigned)__builtin_ctzll(s);
                json_array_append_new(g, json_integer(i));
                json_array_append_new(u, json_string(uuids && i < n_uuids && uuids[i] ? uuids[i] : ""));
        }
        json_t *o = json_pack("{s:s,s:o,s:o}", "name", name, "gpus", g, "uuids", u);
        if (o) {
                json_object_set_new(o, "core", json_integer(whole ? 100 : core));
                json_object_set_new(o, "mem", json_integer(whole ? 0 : mem));
        }
        return o;
}

/* The gpuslice.io/assignment value for req's containers with gpus[i] where non-zero. */
static char *assignment_value(const struct cluster_request *req, const uint64_t *gpus, const char *node,
                              uint64_t now_ns, const char *by, const char *const *uuids, unsigned n_uuids) {
        json_t *val = json_object(), *cs = json_array();
        char *text = NULL;
        if (!val || !cs)
                goto out;
        json_object_set_new(val, "v", json_integer(CLUSTER_ASSIGNMENT_VERSION));
        json_object_set_new(val, "node", json_string(node));
        json_object_set_new(val, "time", json_integer((json_int_t)(now_ns / 1000000))); /* ms */
        if (by)
                json_object_set_new(val, "by", json_string(by));
        for (unsigned k = 0; k < req->n; k++) {
                const struct cluster_container_req *c = &req->c[k];
                if (!gpus[k])
                        continue;
                json_t *o = container_json(c->name, gpus[k], c->whole > 0, c->core, c->mem_mib, uuids, n_uuids);
                if (!o)
                        goto out;
                json_array_append_new(cs, o);
        }
        json_object_set(val, "containers", cs);
        text = json_dumps(val, JSON_COMPACT);
out:
        json_decref(cs);
        json_decref(val);
        return text;
}

/* gpu-manager's (tencent) and gpushare's (aliyun) annotations for the same placement. */
static void profile_annotations(json_t *ann, const struct cluster_request *req, const struct cluster_assignment *a,
                                const char *node, uint64_t now_ns, const struct cluster_units *u) {
        char ns[32];
        snprintf(ns, sizeof ns, "%llu", (unsigned long long)now_ns);
        if (req->profile == CLUSTER_PROFILE_TENCENT) {
                for (unsigned k = 0; k < a->n && k < req->n; k++) {
                        char key[64], idx[CLUSTER_GPUS_MAX * 3 + 1];
                        snprintf(key, sizeof key, CLUSTER_ANN_TENCENT_IDX_PREFIX "%u", (unsigned)req->c[k].spec_index);
                        set_str(ann, key, alloc_set_format(a->c[k].gpus, idx, sizeof idx));
                }
                set_str(ann, CLUSTER_ANN_TENCENT_NODE, node);
                set_str(ann, CLUSTER_ANN_TENCENT_TIME, ns);
                set_str(ann, CLUSTER_ANN_TENCENT_ASSIGNED, "false");
        } else if (req->profile == CLUSTER_PROFILE_ALIYUN) {
                int gpu = -1;
                uint64_t mem = 0;
                for (unsigned k = 0; k < a->n && k < req->n; k++)
                        if (!a->c[k].whole && a->c[k].gpus) {
                                gpu = __builtin_ctzll(a->c[k].gpus);
                                mem += a->c[k].mem_mib;
                        }
                if (gpu < 0)
                        return;
                char s[32];
                snprintf(s, sizeof s, "%d", gpu);
                set_str(ann, CLUSTER_ANN_ALIYUN_IDX, s);
                snprintf(s, sizeof s, "%llu", (unsigned long long)(mem / (u->aliyun_mib ? u->aliyun_mib : 1)));
                set_str(ann, CLUSTER_ANN_ALIYUN_POD, s);
                set_str(ann, CLUSTER_ANN_ALIYUN_TIME, ns);
                set_str(ann, CLUSTER_ANN_ALIYUN_ASSIGNED, "false");
        }
}

int cluster_bind_annotations(const struct cluster_request *req, const struct cluster_assignment *a, const char *node,
                             uint64_t now_ns, const char *const *uuids, unsigned n_uuids, const struct cluster_units *u,
                             char **ret) {
        uint64_t gpus[CLUSTER_CONTAINERS_MAX] = { 0 };
        for (unsigned k = 0; k < a->n && k < req->n && k < CLUSTER_CONTAINERS_MAX; k++)
                gpus[k] = a->c[k].gpus;
        struct cluster_request r = *req;
        r.n = MIN(req->n, a->n);
        /* a scheduler's placement carries the assigned share (the request's, normally) */
        for (unsigned k = 0; k < r.n; k++)
                if (!a->c[k].whole) {
                        r.c[k].core = a->c[k].core;
                        r.c[k].mem_mib = a->c[k].mem_mib;
                }
        char *text = assignment_value(&r, gpus, node, now_ns, NULL, uuids, n_uuids);
        json_t *ann = json_object();
        if (!text || !ann) {
                free(text);
                json_decref(ann);
                return -ENOMEM;
        }
        set_str(ann, CLUSTER_ANN_ASSIGNMENT, text);
        set_str(ann, CLUSTER_ANN_ASSIGNED, "false");
        free(text);
        profile_annotations(ann, req, a, node, now_ns, u);
        *ret = json_dumps(ann, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(ann);
        return *ret ? 0 : -ENOMEM;
}

int cluster_agent_record(const struct cluster_request *req, const uint64_t *held, const char *node, uint64_t now_ns,
                         const char *const *uuids, unsigned n_uuids, json_t *out) {
        bool any = false;
        for (unsigned k = 0; k < req->n; k++)
                any |= held[k] != 0;
        if (!any)
                return -ENODATA;
        char *text = assignment_value(req, held, node, now_ns, "agent", uuids, n_uuids);
        if (!text)
                return -ENOMEM;
        int r = set_str(out, CLUSTER_ANN_ASSIGNMENT, text);
        free(text);
        if (r == 0)
                r = set_str(out, CLUSTER_ANN_ASSIGNED, "true");
        return r < 0 ? -ENOMEM : 0;
}

/* gpuslice.io/assignment with container k's GPUs set to held[k] (other fields kept). */
static int repair_gpuslice(const char *s, const struct cluster_pod *pod, const uint64_t *held, json_t *out) {
        json_t *j = s ? json_loads(s, JSON_REJECT_DUPLICATES, NULL) : NULL;
        if (!json_is_object(j)) {
                json_decref(j);
                return -EINVAL;
        }
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(j, "containers"), i, e) {
                const char *nm = cluster_json_get(e, "name");
                for (unsigned k = 0; nm && k < pod->req.n; k++) {
                        if (!held[k] || !streq(pod->req.c[k].name, nm))
                                continue;
                        json_t *g = json_array();
                        for (uint64_t x = held[k]; x; x &= x - 1)
                                json_array_append_new(g, json_integer(__builtin_ctzll(x)));
                        json_object_set_new(e, "gpus", g);
                        json_object_del(e, "uuids"); /* they named the GPUs it was assigned */
                }
        }
        char *dump = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(j);
        if (!dump)
                return -ENOMEM;
        set_str(out, CLUSTER_ANN_ASSIGNMENT, dump);
        free(dump);
        return 0;
}

int cluster_repair_annotations(const json_t *an, const struct cluster_pod *pod, const uint64_t *held, json_t *out) {
        const char *s = cluster_json_get(an, CLUSTER_ANN_ASSIGNMENT);
        if (s) {
                int r = repair_gpuslice(s, pod, held, out);
                if (r < 0)
                        return r;
        }
        for (unsigned k = 0; k < pod->req.n; k++) {
                char key[64], v[CLUSTER_GPUS_MAX * 3 + 1];
                const struct cluster_container_req *c = &pod->req.c[k];
                if (!held[k])
                        continue;
                alloc_set_format(held[k], v, sizeof v);
                snprintf(key, sizeof key, CLUSTER_ANN_TENCENT_IDX_PREFIX "%u", (unsigned)c->spec_index);
                if (json_object_get(an, key))
                        set_str(out, key, v);
                if (json_object_get(an, CLUSTER_ANN_ALIYUN_IDX) && cluster_request_is_fractional(c))
                        set_str(out, CLUSTER_ANN_ALIYUN_IDX, v);
        }
        return 0;
}
