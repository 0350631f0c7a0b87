/* SPDX-License-Identifier: Apache-2.0 */
/*
 * assign — the pure half of honouring the scheduler's assignment (assign.h): what a pod asks of
 * this agent's resources and which GPUs it was assigned, and which pod one kubelet call belongs to.
 * No I/O, no logging, no globals; every input is untrusted (fuzz-assign).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/assign.h"
#include "kube/cluster.h"
#include "util/util.h"

static const char *ann(const json_t *annotations, const char *key) {
        return json_string_value(json_object_get(annotations, key));
}

static bool copy_field(const json_t *o, const char *k, char *buf, size_t len) {
        const char *s = json_string_value(json_object_get(o, k));
        if (!s || strlen(s) >= len)
                return false;
        strscpy(buf, s, len);
        return true;
}

/* A non-negative decimal integer that fits in max. */
static bool dec(const char *s, uint64_t max, uint64_t *ret) {
        uint64_t x = 0;
        if (!s || !*s)
                return false;
        for (; *s; s++) {
                if (*s < '0' || *s > '9')
                        return false;
                uint64_t d = (uint64_t)(*s - '0');
                if (x > (max - d) / 10)
                        return false;
                x = x * 10 + d;
        }
        *ret = x;
        return true;
}

/* "2026-11-23T23:40:16Z" → Unix seconds; 0 when absent or malformed (sorts first, deterministic). */
static int64_t rfc3339(const char *s) {
        struct tm tm = { 0 };
        char z = 0;
        if (!s ||
            sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                   &tm.tm_sec, &z) != 7 ||
            z != 'Z' || strlen(s) != 20)
                return 0;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        time_t t = timegm(&tm);
        return t < 0 ? 0 : (int64_t)t;
}

/* "0" or "0,1": NVML indices (< 1024), at most max; 0 when malformed. */
static unsigned indices(const char *s, int *out, unsigned max) {
        unsigned n = 0;
        if (!s || !*s)
                return 0;
        while (*s) {
                unsigned v = 0, digits = 0;
                while (*s >= '0' && *s <= '9' && digits < 5) {
                        v = v * 10 + (unsigned)(*s - '0');
                        s++;
                        digits++;
                }
                if (!digits || v >= 1024 || n >= max)
                        return 0;
                out[n++] = (int)v;
                if (*s == ',' && s[1])
                        s++;
                else if (*s)
                        return 0;
        }
        return n;
}

static bool gpus_known(const struct assign_container *c) {
        return c->n_gpus > 0;
}

/* GPUs the container must be assigned: whole count, core multiple of 100, else one. 0: asks none. */
static unsigned gpus_needed(const struct assign_container *c) {
        if (c->req[PLUGIN_WHOLE])
                return c->req[PLUGIN_WHOLE];
        if (c->req[PLUGIN_CORE] > 100)
                return c->req[PLUGIN_CORE] / 100;
        return c->req[PLUGIN_CORE] || c->req[PLUGIN_MEMORY] ? 1 : 0;
}

/* The containers' requests of our resources. false: a container asks something no assignment can
 * describe (whole GPUs and a share at once, more than 100 % not in whole GPUs, too many GPUs). */
static bool parse_requests(const json_t *spec, const struct assign_names *names, struct assign_pod *p, bool *any) {
        size_t ci;
        json_t *c;
        json_array_foreach(json_object_get(spec, "containers"), ci, c) {
                if (p->n >= ASSIGN_CONTAINERS_MAX)
                        return false;
                struct assign_container *k = &p->c[p->n++];
                if (!copy_field(c, "name", k->name, sizeof k->name))
                        return false;
                json_t *res = json_object_get(c, "resources");
                for (unsigned kind = 0; kind < _PLUGIN_KIND_MAX; kind++) {
                        const char *nm = names->name[kind];
                        if (!nm || !nm[0])
                                continue;
                        /* kubelet reads limits (extended resources: requests must equal them) */
                        json_t *q = json_object_get(json_object_get(res, "limits"), nm);
                        if (!q)
                                q = json_object_get(json_object_get(res, "requests"), nm);
                        uint64_t v;
                        if (!q)
                                continue;
                        if (!dec(json_string_value(q), 1u << 20, &v))
                                return false;
                        k->req[kind] = (unsigned)v;
                        *any |= v > 0;
                }
                if (k->req[PLUGIN_WHOLE] && (k->req[PLUGIN_CORE] || k->req[PLUGIN_MEMORY]))
                        return false;
                if (k->req[PLUGIN_CORE] > 100 && k->req[PLUGIN_CORE] % 100)
                        return false;
                if (gpus_needed(k) > ASSIGN_GPUS_MAX)
                        return false;
        }
        return true;
}

/* gpuslice.io/assignment: containers by name. 1 found, 0 absent/other node, -EINVAL malformed. */
static int parse_gpuslice(const char *a, const char *node, struct assign_pod *p) {
        if (!a)
                return 0;
        if (strlen(a) > KUBE_ANNOTATION_MAX)
                return -EINVAL;
        json_t *j = json_loads(a, JSON_REJECT_DUPLICATES, NULL);
        json_t *v = json_object_get(j, "v"), *cs = json_object_get(j, "containers"), *t = json_object_get(j, "time");
        const char *an = json_string_value(json_object_get(j, "node"));
        int r = -EINVAL;
        if (!json_is_integer(v) || json_integer_value(v) != 1 || !json_is_array(cs) || !an)
                goto out;
        if (!streq(an, node)) {
                r = 0;
                goto out;
        }
        if (json_is_integer(t) && json_integer_value(t) > 0)
                p->assumed_ms = (uint64_t)json_integer_value(t);
        size_t i;
        json_t *e;
        json_array_foreach(cs, i, e) {
                const char *nm = json_string_value(json_object_get(e, "name"));
                json_t *gs = json_object_get(e, "gpus");
                if (!nm || !json_is_array(gs) || json_array_size(gs) > ASSIGN_GPUS_MAX)
                        goto out;
                struct assign_container *c = NULL;
                for (unsigned k = 0; k < p->n && !c; k++)
                        if (streq(p->c[k].name, nm))
                                c = &p->c[k];
                if (!c || gpus_known(c))
                        goto out; /* a container the pod does not have, or named twice */
                size_t gi;
                json_t *gv;
                json_array_foreach(gs, gi, gv) {
                        if (!json_is_integer(gv) || json_integer_value(gv) < 0 || json_integer_value(gv) >= 64)
                                goto out;
                        c->gpus[c->n_gpus++] = (int)json_integer_value(gv);
                }
        }
        r = 1;
out:
        json_decref(j);
        return r;
}

/* tencent.com/predicate-gpu-idx-<i> (container index i) + predicate-node + predicate-time (ns). */
static int parse_gpu_manager(const json_t *an, const char *node, const char *bound, struct assign_pod *p) {
        const char *pn = ann(an, "tencent.com/predicate-node");
        bool any = false;
        for (unsigned k = 0; k < p->n; k++) {
                char key[64];
                snprintf(key, sizeof key, "tencent.com/predicate-gpu-idx-%u", k);
                const char *v = ann(an, key);
                if (!v)
                        continue;
                any = true;
                p->c[k].n_gpus = indices(v, p->c[k].gpus, ASSIGN_GPUS_MAX);
                if (!p->c[k].n_gpus)
                        return -EINVAL;
        }
        if (!any)
                return 0;
        if (!streq(pn ? pn : bound, node))
                return 0;
        uint64_t ns;
        if (dec(ann(an, "tencent.com/predicate-time"), UINT64_MAX, &ns))
                p->assumed_ms = ns / 1000000u;
        return 1;
}

/* ALIYUN_COM_GPU_MEM_IDX: the one GPU of every container asking the memory resource. */
static int parse_gpushare(const json_t *an, const char *node, const char *bound, struct assign_pod *p) {
        const char *v = ann(an, "ALIYUN_COM_GPU_MEM_IDX");
        if (!v)
                return 0;
        int g;
        if (indices(v, &g, 1) != 1)
                return -EINVAL;
        if (!streq(bound, node))
                return 0;
        for (unsigned k = 0; k < p->n; k++)
                if (p->c[k].req[PLUGIN_MEMORY] || p->c[k].req[PLUGIN_CORE]) {
                        p->c[k].gpus[0] = g;
                        p->c[k].n_gpus = 1;
                }
        uint64_t ns;
        if (dec(ann(an, "ALIYUN_COM_GPU_MEM_ASSUME_TIME"), UINT64_MAX, &ns))
                p->assumed_ms = ns / 1000000u;
        return 1;
}

/* The assignment in whichever profile's annotations the pod carries (gpuslice's first): 1 found (its
 * profile flag set), 0 none for this node, -EINVAL malformed. */
static int parse_profiles(const json_t *an, const char *node, const char *bound, struct assign_pod *p) {
        int g = parse_gpuslice(ann(an, KUBE_ANN_ASSIGNMENT), node, p);
        if (g > 0)
                p->flags |= ASSIGN_FLAG_GPUSLICE;
        else if (g == 0 && (g = parse_gpu_manager(an, node, bound, p)) > 0)
                p->flags |= ASSIGN_FLAG_GPU_MANAGER;
        else if (g == 0 && (g = parse_gpushare(an, node, bound, p)) > 0)
                p->flags |= ASSIGN_FLAG_GPUSHARE;
        return g;
}

/* Every container holds exactly the GPUs it asks, no GPU twice: an assignment is never honoured halfway. */
static bool assignment_whole(const struct assign_pod *p) {
        for (unsigned k = 0; k < p->n; k++) {
                const struct assign_container *c = &p->c[k];
                unsigned need = gpus_needed(c);
                if (need ? c->n_gpus != need : c->n_gpus != 0)
                        return false;
                for (unsigned i = 0; i < c->n_gpus; i++)
                        for (unsigned j = 0; j < i; j++)
                                if (c->gpus[i] == c->gpus[j])
                                        return false;
        }
        return true;
}

/* Whether every ASSIGNED flag of the profiles in flags is already "true" (the pod is confirmed). */
static bool flags_all_true(const json_t *an, unsigned flags) {
        static const char *const flag_key[] = { KUBE_ANN_ASSIGNED, "tencent.com/gpu-assigned",
                                                "ALIYUN_COM_GPU_MEM_ASSIGNED" };
        bool all = true;
        for (unsigned f = 0; f < ELEMENTSOF(flag_key); f++)
                if (flags & (1u << f)) {
                        const char *v = ann(an, flag_key[f]);
                        all &= v && streq(v, "true");
                }
        return all;
}

int assign_pod_parse(const json_t *pod, const char *node, const struct assign_names *names, struct assign_pod *ret) {
        struct assign_pod *p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        int r = -EINVAL;
        json_t *meta = json_object_get(pod, "metadata"), *spec = json_object_get(pod, "spec");
        json_t *an = json_object_get(meta, "annotations");
        const char *phase = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
        const char *bound = json_string_value(json_object_get(spec, "nodeName"));
        bool any = false;
        if (!node || !copy_field(meta, "name", p->name, sizeof p->name))
                goto out;
        if (!copy_field(meta, "namespace", p->ns, sizeof p->ns))
                strscpy(p->ns, "default", sizeof p->ns);
        if (!copy_field(meta, "uid", p->uid, sizeof p->uid))
                p->uid[0] = 0;
        if (!copy_field(meta, "resourceVersion", p->rv, sizeof p->rv))
                p->rv[0] = 0;
        p->created = rfc3339(json_string_value(json_object_get(meta, "creationTimestamp")));
        r = -ENODATA;
        if ((phase && (streq(phase, "Succeeded") || streq(phase, "Failed"))) || (bound && !streq(bound, node)))
                goto out;
        r = -EINVAL;
        if (!parse_requests(spec, names, p, &any))
                goto out;
        r = -ENODATA;
        if (!any)
                goto out;

        int g = parse_profiles(an, node, bound ? bound : "", p);
        if (g < 0) {
                r = -EINVAL;
                goto out;
        }
        if (!g)
                goto out; /* -ENODATA: nothing assigned here */
        /* the extender's profile annotations ride along with its own: flip them too */
        if (ann(an, "tencent.com/gpu-assigned"))
                p->flags |= ASSIGN_FLAG_GPU_MANAGER;
        if (ann(an, "ALIYUN_COM_GPU_MEM_ASSIGNED"))
                p->flags |= ASSIGN_FLAG_GPUSHARE;
        r = -EINVAL;
        if (!assignment_whole(p))
                goto out;
        p->confirmed = flags_all_true(an, p->flags);
        *ret = *p;
        r = 0;
out:
        free(p);
        return r;
}

bool assign_need_list(bool synced, const struct assign_seen *seen,
                      bool (*known)(const char *ns, const char *pod, void *userdata), void *userdata,
                      long *ret_unknown) {
        if (ret_unknown)
                *ret_unknown = -1;
        if (!synced || !seen || !known)
                return true;
        for (size_t i = 0; i < seen->n; i++)
                if (!known(seen->c[i].ns, seen->c[i].pod, userdata)) {
                        if (ret_unknown)
                                *ret_unknown = (long)i;
                        return true;
                }
        return false;
}

char *assign_format_gpus(uint64_t set, char *buf, size_t len) {
        size_t w = 0;
        if (len)
                buf[0] = 0;
        for (unsigned i = 0; i < 64 && len && w < len - 1; i++) {
                if (!(set >> i & 1))
                        continue;
                int r = snprintf(buf + w, len - w, "%s%u", w ? "," : "", i);
                if (r < 0 || (size_t)r >= len - w)
                        break;
                w += (size_t)r;
        }
        if (len && !buf[0])
                strscpy(buf, "-", len);
        return buf;
}

static uint64_t gpu_set(const struct assign_container *c) {
        uint64_t s = 0;
        for (unsigned i = 0; i < c->n_gpus; i++)
                s |= UINT64_C(1) << (c->gpus[i] & 63);
        return s;
}

static const struct assign_seen_container *seen_find(const struct assign_seen *seen, const struct assign_pod *p,
                                                     const char *container) {
        for (size_t i = 0; seen && i < seen->n; i++) {
                const struct assign_seen_container *s = &seen->c[i];
                if (streq(s->ns, p->ns) && streq(s->pod, p->name) && (!container || streq(s->container, container)))
                        return s;
        }
        return NULL;
}

static bool held(const struct assign_pod *p, unsigned k, unsigned kind, const struct assign_seen *seen) {
        if (p->c[k].done[kind])
                return true;
        const struct assign_seen_container *s = seen_find(seen, p, p->c[k].name);
        return s && s->holds[kind];
}

/* The container of p kubelet would allocate next, or -1 when every GPU resource is held. */
static int next_container(const struct assign_pod *p, const struct assign_seen *seen) {
        for (unsigned k = 0; k < p->n; k++)
                for (unsigned kind = 0; kind < _PLUGIN_KIND_MAX; kind++)
                        if (p->c[k].req[kind] && !held(p, k, kind, seen))
                                return (int)k;
        return -1;
}

bool assign_pod_complete(const struct assign_pod *pod) {
        return next_container(pod, NULL) < 0;
}

/* Kubelet's order, then a total order: creation, assume time, namespace/name, uid. */
static int pod_cmp(const struct assign_pod *a, const struct assign_pod *b) {
        if (a->created != b->created)
                return a->created < b->created ? -1 : 1;
        if (a->assumed_ms != b->assumed_ms)
                return a->assumed_ms < b->assumed_ms ? -1 : 1;
        int c = strcmp(a->ns, b->ns);
        if (!c)
                c = strcmp(a->name, b->name);
        return c ? c : strcmp(a->uid, b->uid);
}

/* Per pod, the container whose turn it is if it asks exactly this call (slot, -1 if none) and whether
 * kubelet lists the pod (listed); returns how many pods have a slot, *n_listed how many of them listed. */
static unsigned scan_candidates(const struct assign_pod *pods, size_t m, const struct assign_seen *seen,
                                const struct assign_call *call, int *slot, bool *listed, unsigned *n_listed) {
        unsigned n = 0;
        *n_listed = 0;
        for (size_t i = 0; i < m; i++) {
                const struct assign_pod *p = &pods[i];
                slot[i] = -1;
                listed[i] = false;
                if (p->confirmed)
                        continue;
                int k = next_container(p, seen);
                if (k < 0 || p->c[k].req[call->kind] != call->size || held(p, (unsigned)k, call->kind, seen))
                        continue;
                slot[i] = k;
                n++;
                listed[i] = seen_find(seen, p, NULL) != NULL;
                *n_listed += listed[i];
        }
        return n;
}

/* kubelet's IDs lie on other GPUs than the oldest candidate's assignment: refuse, naming both. */
static void refuse_other_gpus(struct assign_decision *d, const struct assign_pod *pods, int pod, int container,
                              const struct assign_call *call) {
        const struct assign_pod *p = &pods[pod];
        const struct assign_container *c = &p->c[container];
        char want[128], got[256];
        assign_format_gpus(gpu_set(c), want, sizeof want);
        assign_format_gpus(call->ids_gpus, got, sizeof got);
        d->verdict = ASSIGN_REFUSE;
        d->pod = pod;
        d->container = container;
        d->gpus = gpu_set(c);
        snprintf(d->why, sizeof d->why,
                 "pod %.63s/%.100s container %.40s was assigned GPU %.32s by the scheduler, kubelet's IDs "
                 "are on GPU %.32s",
                 p->ns, p->name, c->name, want, got[0] ? got : "-");
}

int assign_match(const struct assign_pod *pods, size_t n, const struct assign_seen *seen,
                 const struct assign_call *call, struct assign_decision *ret) {
        if (!call || !ret || (n && !pods) || call->kind >= _PLUGIN_KIND_MAX || !call->size)
                return -EINVAL;
        struct assign_decision d = { .verdict = ASSIGN_NONE, .pod = -1, .container = -1 };
        int slot[ASSIGN_PODS_MAX];
        bool listed[ASSIGN_PODS_MAX];
        size_t m = MIN(n, (size_t)ASSIGN_PODS_MAX);
        unsigned n_listed = 0;
        d.n_candidates = scan_candidates(pods, m, seen, call, slot, listed, &n_listed);
        if (!d.n_candidates) {
                snprintf(d.why, sizeof d.why, "no pod with an assignment asks %u IDs of this resource next",
                         call->size);
                *ret = d;
                return 0;
        }
        if (seen && !n_listed) {
                snprintf(d.why, sizeof d.why,
                         "kubelet lists none of the %u pods with an assignment that ask %u IDs (PodResources)",
                         d.n_candidates, call->size);
                d.n_candidates = 0;
                *ret = d;
                return 0;
        }
        /* the survivors: listed by kubelet (when it told), consistent with the IDs (Allocate) */
        int first = -1, best = -1;
        unsigned fits = 0;
        for (size_t i = 0; i < m; i++) {
                if (slot[i] < 0 || (seen && !listed[i]))
                        continue;
                if (first < 0 || pod_cmp(&pods[i], &pods[first]) < 0)
                        first = (int)i;
                if (call->allocate && gpu_set(&pods[i].c[slot[i]]) != call->ids_gpus)
                        continue;
                fits++;
                if (best < 0 || pod_cmp(&pods[i], &pods[best]) < 0)
                        best = (int)i;
        }
        d.n_candidates = seen ? n_listed : d.n_candidates;
        if (best < 0) {
                refuse_other_gpus(&d, pods, first, slot[first], call);
                *ret = d;
                return 0;
        }
        d.verdict = ASSIGN_MATCH;
        d.pod = best;
        d.container = slot[best];
        d.gpus = gpu_set(&pods[best].c[slot[best]]);
        d.tie = fits > 1;
        snprintf(d.why, sizeof d.why, "%s%s", seen ? "kubelet lists it being admitted" : "the only pod that fits",
                 d.tie ? (call->allocate ? "; tie among pods assigned the same GPUs, oldest first"
                                         : "; tie, oldest first")
                       : "");
        *ret = d;
        return 0;
}
