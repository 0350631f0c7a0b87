/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay-snap.c — a snapshot of a real cluster as `gpuslice replay`'s input (replay.h,
 * sched_trace_parse_snapshot; docs/scheduler.md, "Replaying one's own cluster"): the Node and Pod objects
 * of `kubectl get nodes,pods -o json` or of the extender's `--snapshot` file, read through the one codec of
 * the GPU picture (src/cluster: the node annotation, the pod's GPU resources and assignment) plus what
 * kube-scheduler itself reads (allocatable, requests, the GPU model's node affinity). Every object is
 * untrusted: an error names the item, the object and the field.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"
#include "sched/codec.h"
#include "sched/pack.h"
#include "sched/replay.h"
#include "util/util.h"

#define PRODUCT_LABEL "nvidia.com/gpu.product"

struct snap {
        struct sched_trace *t;
        const struct cluster_units *u;
        struct cluster_node_info *info;
        struct cluster_pod *pod;
};

/* obj[key] as a quantity in thousandths (absent or null: 0). */
static int quantity(const json_t *obj, const char *key, const char *where, const char *field, uint64_t *ret,
                    struct gs_error *err) {
        *ret = 0;
        json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
        if (!v || json_is_null(v))
                return 0;
        const char *s = json_string_value(v);
        if (!s || cluster_quantity_milli(s, ret) < 0)
                return gs_error_set(err, -EINVAL, "%s: %s%s: %s%.40s%s is not a quantity", where, field, key,
                                    s ? "'" : "", s ? s : "a non-string", s ? "'" : "");
        return 0;
}

/* ---- nodes ---- */

/* lint: long — one Node: its name, allocatable, model label and annotation, each checked and named. */
static int snap_node(struct snap *s, const json_t *o, const char *where, struct gs_error *err) {
        const json_t *meta = json_object_get(o, "metadata"), *status = json_object_get(o, "status");
        char name[CLUSTER_NAME_MAX];
        if (!json_is_object(meta))
                return gs_error_set(err, -EINVAL, "%s: a Node without metadata", where);
        if (cluster_json_str(meta, "name", name, sizeof name, "metadata.", err) < 0) {
                char m[sizeof err->message];
                strscpy(m, err->message, sizeof m);
                return gs_error_set(err, -EINVAL, "%s: %s", where, m);
        }
        if (!name[0])
                return gs_error_set(err, -EINVAL, "%s: a Node without metadata.name", where);
        char w[320];
        snprintf(w, sizeof w, "%s (Node %s)", where, name);
        const json_t *alloc = json_is_object(status) ? json_object_get(status, "allocatable") : NULL;
        uint64_t cpu, mem, gpu;
        struct gs_error e1 = { 0 };
        if (cluster_node_allocatable(o, &cpu, &mem, &e1) < 0)
                return gs_error_set(err, -EINVAL, "%s: %.200s", w, e1.message);
        int r = quantity(alloc, "nvidia.com/gpu", w, "status.allocatable.", &gpu, err);
        if (r < 0)
                return r;
        if (gpu % 1000 || gpu / 1000 > CLUSTER_GPUS_MAX)
                return gs_error_set(err, -EINVAL,
                                    "%s: status.allocatable: nvidia.com/gpu out of range (at most %d whole GPUs)", w,
                                    CLUSTER_GPUS_MAX);
        const json_t *labels = json_object_get(meta, "labels");
        const char *product = json_is_object(labels) ? cluster_json_get(labels, PRODUCT_LABEL) : NULL;
        struct gs_error e2 = { 0 };
        int a = cluster_node_decode_json(o, s->info, &e2);
        if (a < 0 && a != -ENOENT)
                return gs_error_set(err, -EINVAL, "%s: %.200s", where, e2.message);
        if (!product && a == 0 && s->info->n_gpus)
                product = s->info->gpu[0].model;
        if (product && strlen(product) >= sizeof s->t->nodes[0].model)
                return gs_error_set(err, -EINVAL, "%s: label %s: longer than %zu characters", w, PRODUCT_LABEL,
                                    sizeof s->t->nodes[0].model - 1);
        if (array_reserve(&s->t->nodes, &s->t->cap_nodes, s->t->n_nodes + 1, 64) < 0)
                return -ENOMEM;
        struct sched_trace_node *n = &s->t->nodes[s->t->n_nodes];
        *n = (struct sched_trace_node){ .cpu_milli = cpu, .mem_mib = mem, .gpus = (unsigned)(gpu / 1000) };
        strscpy(n->name, name, sizeof n->name);
        strscpy(n->model, product ? product : "", sizeof n->model);
        if (a == 0) {
                const char *v = cluster_json_get(json_object_get(meta, "annotations"), CLUSTER_ANN_GPUS);
                n->gpus_ann = strdup(v);
                if (!n->gpus_ann)
                        return -ENOMEM;
                n->gpus = s->info->n_gpus;
        }
        s->t->n_nodes++;
        return 0;
}

/* ---- pods ---- */

/* Append the strings of a `values` array to buf ('|'-separated). */
static int append_values(const json_t *values, char *buf, size_t len, const char *where, struct gs_error *err) {
        size_t i;
        const json_t *v;
        json_array_foreach(values, i, v) {
                const char *s = json_string_value(v);
                if (!s)
                        return gs_error_set(err, -EINVAL, "%s: node affinity on %s: a value is not a string", where,
                                            PRODUCT_LABEL);
                size_t have = strlen(buf);
                if (have + !!have + strlen(s) >= len)
                        return gs_error_set(err, -EINVAL, "%s: node affinity on %s: over %zu characters of models",
                                            where, PRODUCT_LABEL, len - 1);
                snprintf(buf + have, len - have, "%s%s", have ? "|" : "", s);
        }
        return 0;
}

/* The GPU models a pod accepts ('|'-separated, "" any): its nodeSelector on the product label, else the
 * `In` expressions on it of its required node affinity's terms (ORed; a term without one accepts any). */
static int pod_models(const json_t *spec, const char *where, char *buf, size_t len, struct gs_error *err) {
        buf[0] = '\0';
        const char *sel = cluster_json_get(json_object_get(spec, "nodeSelector"), PRODUCT_LABEL);
        if (sel) {
                if (strlen(sel) >= len)
                        return gs_error_set(err, -EINVAL, "%s: spec.nodeSelector %s: longer than %zu characters", where,
                                            PRODUCT_LABEL, len - 1);
                strscpy(buf, sel, len);
                return 0;
        }
        const json_t *na = json_object_get(json_object_get(spec, "affinity"), "nodeAffinity");
        const json_t *req = json_object_get(na, "requiredDuringSchedulingIgnoredDuringExecution");
        const json_t *terms = json_object_get(req, "nodeSelectorTerms");
        size_t i, k;
        const json_t *term, *ex;
        bool any = false;
        json_array_foreach(terms, i, term) {
                bool constrained = false;
                json_array_foreach(json_object_get(term, "matchExpressions"), k, ex) {
                        const char *key = cluster_json_get(ex, "key"), *op = cluster_json_get(ex, "operator");
                        if (constrained || !key || !streq(key, PRODUCT_LABEL) || !op || !streq(op, "In"))
                                continue;
                        constrained = true;
                        if (append_values(json_object_get(ex, "values"), buf, len, where, err) < 0)
                                return -EINVAL;
                }
                any |= !constrained;
        }
        if (any)
                buf[0] = '\0';
        return 0;
}

/* The pod's GPU request as the extender decoded it (p->req), with its shape as the trace's (num_gpu,
 * gpu_milli): sched_pack_request_shape, the extender's own. */
static int pod_gpu(const struct cluster_pod *pv, const char *where, struct sched_trace_pod *p, struct gs_error *err) {
        unsigned whole = 0, shares = 0;
        const struct cluster_container_req *share = NULL;
        for (unsigned k = 0; k < pv->req.n; k++) {
                whole += pv->req.c[k].whole;
                if (cluster_request_is_fractional(&pv->req.c[k])) {
                        shares++;
                        share = &pv->req.c[k];
                }
        }
        if (pv->req.n_mig)
                return gs_error_set(err, -EINVAL, "%s: asks for MIG devices, which the replay does not place", where);
        if (shares > 1 || (shares && whole))
                return gs_error_set(err, -EINVAL,
                                    "%s: %u GPU containers with shares: the replay places one GPU share or whole GPUs "
                                    "per pod",
                                    where, pv->req.n);
        if (whole > CLUSTER_GPUS_MAX)
                return gs_error_set(err, -EINVAL, "%s: asks for %u GPUs (at most %d)", where, whole, CLUSTER_GPUS_MAX);
        if (!whole && !share)
                return 0;
        struct sched_shape sh = sched_pack_request_shape(&pv->req, p->cpu_milli, p->mem_mib);
        p->num_gpu = sh.num_gpu;
        p->gpu_milli = sh.gpu_milli;
        p->req = malloc(sizeof *p->req);
        if (!p->req)
                return -ENOMEM;
        *p->req = pv->req;
        return 0;
}

static int snap_pod(struct snap *s, const json_t *o, const char *where, struct gs_error *err) {
        const json_t *meta = json_object_get(o, "metadata"), *spec = json_object_get(o, "spec");
        const char *ns = cluster_json_get(meta, "namespace"), *nm = cluster_json_get(meta, "name");
        char w[320];
        snprintf(w, sizeof w, "%s (Pod %.63s/%.200s)", where, ns ? ns : "", nm ? nm : "?");
        struct cluster_pod *pv = s->pod;
        struct gs_error e2 = { 0 };
        if (cluster_pod_decode_json(o, s->u, pv, &e2) < 0)
                return gs_error_set(err, -EINVAL, "%s: %.200s", w, e2.message);
        if (!pv->name[0])
                return gs_error_set(err, -EINVAL, "%s: a Pod without metadata.name", w);
        if (pv->terminated)
                return 0; /* Succeeded or Failed: holds nothing */
        if (array_reserve(&s->t->pods, &s->t->cap_pods, s->t->n_pods + 1, 256) < 0)
                return -ENOMEM;
        struct sched_trace_pod *p = &s->t->pods[s->t->n_pods];
        *p = (struct sched_trace_pod){ .created = pv->created };
        snprintf(p->name, sizeof p->name, "%.63s/%.189s", pv->ns, pv->name);
        p->cpu_milli = pv->cpu_milli; /* cluster_pod_requests, as kube-scheduler counts them */
        p->mem_mib = pv->mem_mib;
        int r = pod_models(spec, w, p->spec, sizeof p->spec, err);
        if (r == 0)
                r = pod_gpu(pv, w, p, err);
        if (r < 0)
                return r;
        strscpy(p->node, pv->node_name, sizeof p->node);
        if (p->node[0] && pv->has_assignment && streq(pv->assigned_node, pv->node_name))
                for (unsigned k = 0; k < pv->assign.n; k++)
                        p->gpus |= pv->assign.c[k].gpus;
        s->t->n_pods++;
        return 0;
}

/* ---- the file ---- */

/* An item's kind: its own "kind", else the list's (NodeList, PodList); NULL neither. */
static const char *item_kind(const json_t *o, const char *list_kind) {
        const char *k = cluster_json_get(o, "kind");
        return k ? k : list_kind;
}

/* One pass over an array: the Nodes (pods false) or the Pods. */
static int snap_pass(struct snap *s, const json_t *a, const char *what, const char *list_kind, bool pods,
                     struct gs_error *err) {
        size_t i;
        const json_t *o;
        json_array_foreach(a, i, o) {
                char where[64];
                snprintf(where, sizeof where, "%s[%zu]", what, i);
                if (!json_is_object(o))
                        return gs_error_set(err, -EINVAL, "%s: not an object", where);
                const char *kind = item_kind(o, list_kind);
                if (!kind)
                        return gs_error_set(err, -EINVAL, "%s: no kind (expected Node or Pod)", where);
                int r = 0;
                if (!pods && streq(kind, "Node"))
                        r = snap_node(s, o, where, err);
                else if (pods && streq(kind, "Pod"))
                        r = snap_pod(s, o, where, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

int sched_trace_parse_snapshot(struct sched_trace *t, const char *buf, size_t len, const struct cluster_units *u,
                               struct gs_error *err) {
        json_t *j = cluster_json_load(buf, len, SCHED_CODEC_MAX_SNAPSHOT, err);
        if (!j)
                return -EINVAL;
        struct snap s = { .t = t, .u = u, .info = malloc(sizeof *s.info), .pod = malloc(sizeof *s.pod) };
        int r = s.info && s.pod ? 0 : -ENOMEM;
        const json_t *items = json_object_get(j, "items"), *nodes = json_object_get(j, "nodes"),
                     *pods = json_object_get(j, "pods");
        const char *kind = cluster_json_get(j, "kind");
        const char *list_kind = !kind ? NULL : streq(kind, "NodeList") ? "Node" : streq(kind, "PodList") ? "Pod" : NULL;
        t->snapshot = true;
        if (r < 0) {
        } else if (json_is_array(items)) {
                r = snap_pass(&s, items, "items", list_kind, false, err);
                if (r == 0)
                        r = snap_pass(&s, items, "items", list_kind, true, err);
        } else if (!items && (json_is_array(nodes) || json_is_array(pods)) && (!nodes || json_is_array(nodes)) &&
                   (!pods || json_is_array(pods))) {
                r = snap_pass(&s, nodes, "nodes", "Node", false, err);
                if (r == 0)
                        r = snap_pass(&s, pods, "pods", "Pod", true, err);
        } else {
                r = gs_error_set(err, -EINVAL,
                                 "a snapshot is a v1 List (kubectl get nodes,pods -o json: {\"items\": [...]}) or "
                                 "the extender's {\"nodes\": [...], \"pods\": [...]}");
        }
        if (r == -ENOMEM)
                gs_error_set(err, r, "out of memory");
        free(s.info);
        free(s.pod);
        json_decref(j);
        return r;
}
