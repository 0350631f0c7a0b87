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

#include "agent/assign.h"
#include "util/util.h"

_Static_assert((int)PLUGIN_WHOLE == (int)CLUSTER_RES_WHOLE && (int)PLUGIN_CORE == (int)CLUSTER_RES_CORE &&
                       (int)PLUGIN_MEMORY == (int)CLUSTER_RES_MEM && (int)_PLUGIN_KIND_MAX == (int)_CLUSTER_RES_MAX,
               "a plugin kind is the cluster codec's resource kind");

void assign_units(const struct assign_names *names, struct cluster_units *ret) {
        cluster_units_default(ret);
        const char *w = names->name[PLUGIN_WHOLE];
        if (w && w[0] && !streq(w, cluster_resource_name(CLUSTER_NAME_NVIDIA_GPU, NULL)))
                ret->whole_name = w;
        uint32_t *unit[_CLUSTER_NAME_MAX] = { [CLUSTER_NAME_GPUSLICE_MEMORY] = &ret->gpuslice_mib,
                                              [CLUSTER_NAME_TENCENT_MEMORY] = &ret->tencent_mib,
                                              [CLUSTER_NAME_ALIYUN_MEMORY] = &ret->aliyun_mib };
        enum cluster_res_name m = cluster_resource_classify(names->name[PLUGIN_MEMORY], ret, NULL, NULL);
        if (names->memory_mib && unit[m])
                *unit[m] = names->memory_mib;
}

/* GPUs the container must be assigned: whole count, core multiple of 100, else one. 0: asks none. */
static unsigned gpus_needed(const struct assign_container *c) {
        if (c->req[PLUGIN_WHOLE])
                return c->req[PLUGIN_WHOLE];
        if (c->req[PLUGIN_CORE] > 100)
                return c->req[PLUGIN_CORE] / 100;
        return c->req[PLUGIN_CORE] || c->req[PLUGIN_MEMORY] ? 1 : 0;
}

/* The containers that ask a resource this agent serves, with what they ask of each. 0 or -EINVAL
 * (such a container without a name: it could not be matched to an assignment). */
static int our_containers(const struct cluster_pod *v, const struct assign_names *names, const struct cluster_units *u,
                          struct assign_pod *p) {
        for (unsigned x = 0; x < v->req.n; x++) {
                const struct cluster_container_req *c = &v->req.c[x];
                struct assign_container *k = &p->c[p->n];
                *k = (struct assign_container){ .index = (uint8_t)x, .gpus = v->assign.c[x].gpus };
                bool any = false;
                for (unsigned kind = 0; kind < _PLUGIN_KIND_MAX; kind++) {
                        const char *nm = names->name[kind];
                        if (nm && nm[0] && c->qty[kind] &&
                            streq(cluster_resource_name((enum cluster_res_name)c->res[kind], u), nm)) {
                                k->req[kind] = c->qty[kind];
                                any = true;
                        }
                }
                if (!any)
                        continue;
                if (!c->name[0])
                        return -EINVAL;
                strscpy(k->name, c->name, sizeof k->name);
                p->n++;
        }
        return 0;
}

/* Every container holds exactly as many GPUs as it asks: an assignment is never honoured halfway. */
static bool assignment_whole(const struct assign_pod *p) {
        for (unsigned k = 0; k < p->n; k++)
                if ((unsigned)__builtin_popcountll(p->c[k].gpus) != gpus_needed(&p->c[k]))
                        return false;
        return true;
}

static unsigned source_flag(enum cluster_source s) {
        switch (s) {
                case CLUSTER_SOURCE_GPUSLICE:
                case CLUSTER_SOURCE_AGENT: return CLUSTER_FLAG_GPUSLICE;
                case CLUSTER_SOURCE_GPU_MANAGER: return CLUSTER_FLAG_GPU_MANAGER;
                case CLUSTER_SOURCE_GPUSHARE: return CLUSTER_FLAG_GPUSHARE;
                case CLUSTER_SOURCE_NONE: break;
        }
        return 0;
}

static int requests(const struct cluster_pod *v, const char *node, const struct assign_names *names,
                    struct assign_pod *p) {
        struct cluster_units u;
        assign_units(names, &u);
        if (!node || !v->name[0] || strlen(v->ns) >= sizeof p->ns)
                return -EINVAL;
        strscpy(p->ns, v->ns[0] ? v->ns : "default", sizeof p->ns);
        strscpy(p->name, v->name, sizeof p->name);
        if (strlen(v->uid) < sizeof p->uid)
                strscpy(p->uid, v->uid, sizeof p->uid);
        strscpy(p->rv, v->resource_version, sizeof p->rv);
        p->created = v->created;
        if (v->terminated || (v->node_name[0] && !streq(v->node_name, node)))
                return -ENODATA;
        if (our_containers(v, names, &u, p) < 0)
                return -EINVAL;
        return p->n ? 0 : -ENODATA;
}

static int from_view(const struct cluster_pod *v, const char *node, const struct assign_names *names,
                     struct assign_pod *p) {
        int r = requests(v, node, names, p);
        if (r < 0)
                return r;
        if (v->assignment_error[0])
                return -EINVAL;
        if (!v->has_assignment || !streq(v->assigned_node, node))
                return -ENODATA; /* nothing assigned here */
        p->assumed_ms = v->assumed_ms;
        /* the extender's profile annotations ride along with its own: flip them too */
        p->flags = source_flag(v->source) | (v->flags & (CLUSTER_FLAG_GPU_MANAGER | CLUSTER_FLAG_GPUSHARE));
        if (!assignment_whole(p))
                return -EINVAL;
        p->confirmed = (p->flags & ~v->flags_true) == 0;
        return 0;
}

/* One of the two above into a scratch pod, copied out on success. */
static int
view_into(int (*fn)(const struct cluster_pod *, const char *, const struct assign_names *, struct assign_pod *),
          const struct cluster_pod *v, const char *node, const struct assign_names *names, struct assign_pod *ret) {
        struct assign_pod *p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        int r = fn(v, node, names, p);
        if (r == 0)
                *ret = *p;
        free(p);
        return r;
}

int assign_pod_from_view(const struct cluster_pod *v, const char *node, const struct assign_names *names,
                         struct assign_pod *ret) {
        return view_into(from_view, v, node, names, ret);
}

int assign_pod_requests(const struct cluster_pod *v, const char *node, const struct assign_names *names,
                        struct assign_pod *ret) {
        return view_into(requests, v, node, names, ret);
}

int assign_pod_parse(const json_t *pod, const char *node, const struct assign_names *names, struct assign_pod *ret) {
        struct cluster_pod *v = malloc(sizeof *v);
        if (!v)
                return -ENOMEM;
        struct cluster_units u;
        assign_units(names, &u);
        int r = cluster_pod_decode_json(pod, &u, v, NULL);
        if (r == 0)
                r = assign_pod_from_view(v, node, names, ret);
        free(v);
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
        return c->gpus;
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
