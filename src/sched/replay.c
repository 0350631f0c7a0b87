/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replay.c — the openb trace's protocol on the extender's own decisions (see replay.h and
 * docs/scheduler.md). The filter's verdict and the policy's score of each (pod shape, node) are kept
 * until the node changes (its generation moves) or the target workload does: a pod touches one node,
 * so the next pod of the same shape re-decides only that one.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/decide.h"
#include "sched/model.h"
#include "sched/pack.h"
#include "sched/replay.h"
#include "util/util.h"

/* ---- the random stream ---- */

static uint64_t splitmix64(uint64_t *x) {
        uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
}

void sched_rng_seed(struct sched_rng *r, uint64_t seed) {
        for (unsigned i = 0; i < 4; i++)
                r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) {
        return (x << k) | (x >> (64 - k));
}

uint64_t sched_rng_next(struct sched_rng *r) {
        uint64_t *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = rotl(s[3], 45);
        return out;
}

uint64_t sched_rng_below(struct sched_rng *r, uint64_t n) {
        __uint128_t m = (__uint128_t)sched_rng_next(r) * n;
        uint64_t low = (uint64_t)m;
        if (low < n) {
                uint64_t floor_ = -n % n;
                while (low < floor_) {
                        m = (__uint128_t)sched_rng_next(r) * n;
                        low = (uint64_t)m;
                }
        }
        return (uint64_t)(m >> 64);
}

/* ---- the CSV lists ---- */

#define CSV_FIELDS_MAX 32

/* One line split at commas (in place: buf is a copy of the line). */
struct csv_line {
        unsigned n;
        char *f[CSV_FIELDS_MAX];
};

static int csv_split(char *s, unsigned line, struct csv_line *ret, struct gs_error *err) {
        ret->n = 0;
        for (;;) {
                if (ret->n == CSV_FIELDS_MAX)
                        return gs_error_set(err, -EINVAL, "line %u: more than %d fields", line, CSV_FIELDS_MAX);
                ret->f[ret->n++] = s;
                char *c = strchr(s, ',');
                if (!c)
                        break;
                *c = '\0';
                s = c + 1;
        }
        for (unsigned i = 0; i < ret->n; i++)
                if (strchr(ret->f[i], '"'))
                        return gs_error_set(err, -EINVAL,
                                            "line %u: field %u is quoted (quoted fields are not supported)", line,
                                            i + 1);
        return 0;
}

/* The columns a list needs, found by name in its header; -1 when absent. */
struct csv_cols {
        unsigned n;
        const char *const *names;
        int at[CSV_FIELDS_MAX];
};

static int csv_header(const struct csv_line *h, struct csv_cols *c, unsigned required, struct gs_error *err) {
        for (unsigned k = 0; k < c->n; k++) {
                c->at[k] = -1;
                for (unsigned i = 0; i < h->n; i++)
                        if (streq(h->f[i], c->names[k])) {
                                c->at[k] = (int)i;
                                break;
                        }
                if (k < required && c->at[k] < 0)
                        return gs_error_set(err, -EINVAL, "line 1: no column '%s' in the header", c->names[k]);
        }
        return 0;
}

static int csv_u64(const struct csv_line *l, const struct csv_cols *c, unsigned k, uint64_t max, unsigned line,
                   uint64_t *ret, struct gs_error *err) {
        const char *s = l->f[c->at[k]];
        if (parse_u64(s, ret) < 0 || *ret > max)
                return gs_error_set(err, -EINVAL, "line %u: %s: expected a number 0..%llu, got '%.40s'", line,
                                    c->names[k], (unsigned long long)max, s);
        return 0;
}

static int csv_name(const struct csv_line *l, const struct csv_cols *c, unsigned k, unsigned line, char *buf,
                    size_t len, struct gs_error *err) {
        const char *s = l->f[c->at[k]];
        if (!s[0] || strlen(s) >= len)
                return gs_error_set(err, -EINVAL, "line %u: %s: expected 1..%zu characters, got %zu", line, c->names[k],
                                    len - 1, strlen(s));
        memcpy(buf, s, strlen(s) + 1);
        return 0;
}

typedef int (*row_fn)(struct sched_trace *t, const struct csv_line *l, const struct csv_cols *c, unsigned line,
                      struct gs_error *err);

/* Every line of buf after the header through fn; blank lines are skipped. */
static int csv_parse(struct sched_trace *t, const char *buf, size_t len, struct csv_cols *cols, unsigned required,
                     row_fn fn, struct gs_error *err) {
        if (!len)
                return gs_error_set(err, -EINVAL, "line 1: empty input (expected a header line)");
        char *copy = malloc(len + 1);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, buf, len);
        copy[len] = '\0';
        int r = 0;
        unsigned line = 0, width = 0;
        bool header = false;
        for (char *s = copy, *next; s && r == 0; s = next) {
                line++;
                char *nl = memchr(s, '\n', (size_t)(copy + len - s));
                next = nl ? nl + 1 : NULL;
                if (nl)
                        *nl = '\0';
                size_t l = strlen(s);
                if ((size_t)(nl ? nl - s : copy + len - s) != l) {
                        r = gs_error_set(err, -EINVAL, "line %u: a NUL byte", line);
                        break;
                }
                if (l && s[l - 1] == '\r')
                        s[--l] = '\0';
                if (!l) {
                        if (!header)
                                r = gs_error_set(err, -EINVAL, "line %u: expected the header line, got a blank line",
                                                 line);
                        continue;
                }
                struct csv_line f;
                r = csv_split(s, line, &f, err);
                if (r < 0)
                        break;
                if (!header) {
                        header = true;
                        width = f.n;
                        r = csv_header(&f, cols, required, err);
                        continue;
                }
                if (f.n != width) {
                        r = gs_error_set(err, -EINVAL, "line %u: %u fields, the header has %u", line, f.n, width);
                        break;
                }
                r = fn(t, &f, cols, line, err);
        }
        if (r == 0 && !header)
                r = gs_error_set(err, -EINVAL, "line 1: empty input (expected a header line)");
        free(copy);
        return r;
}

static const char *const node_cols[] = { "sn", "cpu_milli", "memory_mib", "gpu", "model" };
static const char *const pod_cols[] = { "name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec" };

#define CPU_MAX (1ULL << 40)
#define MEM_MAX (1ULL << 44)

static int node_row(struct sched_trace *t, const struct csv_line *l, const struct csv_cols *c, unsigned line,
                    struct gs_error *err) {
        if (array_reserve(&t->nodes, &t->cap_nodes, t->n_nodes + 1, 256) < 0)
                return -ENOMEM;
        struct sched_trace_node *n = &t->nodes[t->n_nodes];
        *n = (struct sched_trace_node){ 0 };
        uint64_t gpus = 0;
        int r = csv_name(l, c, 0, line, n->name, sizeof n->name, err);
        if (r == 0)
                r = csv_u64(l, c, 1, CPU_MAX, line, &n->cpu_milli, err);
        if (r == 0)
                r = csv_u64(l, c, 2, MEM_MAX, line, &n->mem_mib, err);
        if (r == 0)
                r = csv_u64(l, c, 3, CLUSTER_GPUS_MAX, line, &gpus, err);
        if (r == 0 && strlen(l->f[c->at[4]]) >= sizeof n->model)
                r = gs_error_set(err, -EINVAL, "line %u: model: longer than %zu characters", line, sizeof n->model - 1);
        if (r < 0)
                return r;
        strscpy(n->model, l->f[c->at[4]], sizeof n->model);
        n->gpus = (unsigned)gpus;
        t->n_nodes++;
        return 0;
}

static int pod_row(struct sched_trace *t, const struct csv_line *l, const struct csv_cols *c, unsigned line,
                   struct gs_error *err) {
        if (array_reserve(&t->pods, &t->cap_pods, t->n_pods + 1, 1024) < 0)
                return -ENOMEM;
        struct sched_trace_pod *p = &t->pods[t->n_pods];
        *p = (struct sched_trace_pod){ 0 };
        uint64_t num = 0, milli = 0;
        int r = csv_name(l, c, 0, line, p->name, sizeof p->name, err);
        if (r == 0)
                r = csv_u64(l, c, 1, CPU_MAX, line, &p->cpu_milli, err);
        if (r == 0)
                r = csv_u64(l, c, 2, MEM_MAX, line, &p->mem_mib, err);
        if (r == 0)
                r = csv_u64(l, c, 3, CLUSTER_GPUS_MAX, line, &num, err);
        if (r == 0)
                r = csv_u64(l, c, 4, UINT32_MAX, line, &milli, err);
        if (r < 0)
                return r;
        milli = MIN(milli, 1000u); /* the converter's clamp */
        if (!num != !milli)
                return gs_error_set(err, -EINVAL, "line %u: num_gpu %llu with gpu_milli %llu (both or neither)", line,
                                    (unsigned long long)num, (unsigned long long)milli);
        if (num >= 2 && milli < 1000)
                return gs_error_set(err, -EINVAL,
                                    "line %u: num_gpu %llu with gpu_milli %llu: several GPUs are whole (1000)", line,
                                    (unsigned long long)num, (unsigned long long)milli);
        if (c->at[5] >= 0) {
                const char *s = l->f[c->at[5]];
                if (strlen(s) >= sizeof p->spec)
                        return gs_error_set(err, -EINVAL, "line %u: gpu_spec: longer than %zu characters", line,
                                            sizeof p->spec - 1);
                strscpy(p->spec, s, sizeof p->spec);
        }
        p->num_gpu = (unsigned)num;
        p->gpu_milli = (unsigned)milli;
        t->n_pods++;
        return 0;
}

int sched_trace_parse_nodes(struct sched_trace *t, const char *buf, size_t len, struct gs_error *err) {
        struct csv_cols c = { .n = 5, .names = node_cols };
        return csv_parse(t, buf, len, &c, 5, node_row, err);
}

int sched_trace_parse_pods(struct sched_trace *t, const char *buf, size_t len, struct gs_error *err) {
        struct csv_cols c = { .n = 6, .names = pod_cols };
        return csv_parse(t, buf, len, &c, 5, pod_row, err);
}

void sched_trace_free(struct sched_trace *t) {
        for (size_t i = 0; i < t->n_nodes; i++)
                free(t->nodes[i].gpus_ann);
        free(t->nodes);
        for (size_t i = 0; i < t->n_pods; i++)
                free(t->pods[i].req);
        free(t->pods);
        *t = (struct sched_trace){ 0 };
}

/* ---- the run ---- */

const char *sched_fail_reason_name(enum sched_fail_reason r) {
        static const char *const names[_SCHED_FAIL_MAX] = {
                [SCHED_FAIL_CPU] = "insufficient CPU",
                [SCHED_FAIL_MEMORY] = "insufficient memory",
                [SCHED_FAIL_MODEL] = "no node of an accepted GPU model with the CPU and memory",
                [SCHED_FAIL_GPU] = "no GPU room on the nodes with the CPU, memory and model",
                [SCHED_FAIL_BOUND] = "bound to a node not in the snapshot or without the GPU room for it",
        };
        return (unsigned)r < _SCHED_FAIL_MAX ? names[r] : "?";
}

/* The filter's verdict and the policy's score of one (shape, node), valid at a node generation and a
 * workload epoch. */
struct memo {
        uint64_t gen;
        uint32_t epoch; /* 0 = never decided */
        bool fit;
        int16_t gpu; /* the share's GPU, -1 the filter's */
        double score;
};

/* One distinct pod shape of the run: what the policies, the filter and the model are given. */
struct shape {
        struct sched_shape s;
        struct cluster_request req;
        struct memo *memo; /* per node (by name order), allocated on first use */
};

struct run {
        struct sched_model *m;
        size_t n_nodes;
        const struct sched_node **node; /* by name order */
        uint32_t *rank;
        struct shape *shapes;
        size_t n_shapes, cap_shapes;
        size_t *pod_shape; /* per pod of the trace */
        struct sched_pack_ctx ctx;
        struct sched_workload fixed, live;
        struct sched_mix mix;
        uint32_t epoch;
        struct sched_rng rng;
        size_t *feasible;   /* scratch: Random's candidates */
        bool kube_cpu_pods; /* CPU-only pods by kube-scheduler's scoring (gpu_pods_only) */
        /* a share's GPU as the extender's bind chooses it (share_gpu; a snapshot), else as the score chose it
         * (the trace's protocol, cluster-trace.md §3.6: they differ for FGD, the bind's seeing no CPU limit) */
        bool bind_gpu;
        size_t *trace_node; /* per node (name order): its index in the trace */
        size_t last_node;   /* the last pod's node (name order; SIZE_MAX none) and GPUs, by assume */
        uint64_t last_gpus;
};

static int name_cmp(const void *a, const void *b) {
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static uint64_t models_of(const struct sched_model *m, const char *spec) {
        if (!spec[0])
                return 0;
        uint64_t bits = 0;
        char buf[128];
        strscpy(buf, spec, sizeof buf);
        for (char *save = NULL, *t = strtok_r(buf, "|", &save); t; t = strtok_r(NULL, "|", &save)) {
                int id = sched_model_product(m, t);
                if (id >= 0 && id < 63)
                        bits |= 1ULL << id;
        }
        return bits ? bits : 1ULL << 63; /* no node has any of them: a bit no node has */
}

/* A node's GPUs: the agent's annotation when the snapshot has it, else `gpus` healthy GPUs of its model. */
static int node_info(const struct sched_trace_node *tn, struct cluster_node_info *info, struct gs_error *err) {
        memset(info, 0, sizeof *info);
        strscpy(info->name, tn->name, sizeof info->name);
        if (tn->gpus_ann) {
                struct gs_error e2 = { 0 };
                if (cluster_node_decode(tn->gpus_ann, strlen(tn->gpus_ann), info, &e2) < 0)
                        return gs_error_set(err, -EINVAL, "node %s: %.200s", tn->name, e2.message);
                return 0;
        }
        info->n_gpus = tn->gpus;
        for (unsigned g = 0; g < tn->gpus; g++) {
                info->gpu[g].healthy = true;
                strscpy(info->gpu[g].model, tn->model, sizeof info->gpu[g].model);
                for (unsigned h = 0; h < tn->gpus; h++)
                        info->link[g][h].pcie = g == h ? TOPO_LEVEL_SELF : TOPO_LEVEL_SYS;
        }
        return 0;
}

static int build_nodes(struct run *r, const struct sched_trace *t, struct gs_error *err) {
        struct cluster_node_info *info = calloc(1, sizeof *info);
        const char **names = calloc(t->n_nodes, sizeof *names);
        int e = info && names ? 0 : -ENOMEM;
        for (size_t i = 0; i < t->n_nodes && e == 0; i++) {
                const struct sched_trace_node *tn = &t->nodes[i];
                if (sched_model_node(r->m, tn->name)) {
                        e = gs_error_set(err, -EINVAL, "node %s is listed twice", tn->name);
                        break;
                }
                e = node_info(tn, info, err);
                if (e == 0)
                        e = sched_model_set_node(r->m, info);
                if (e == 0)
                        e = sched_model_set_node_resources(r->m, tn->name, tn->cpu_milli, tn->mem_mib, tn->model);
                if (e == -E2BIG)
                        gs_error_set(err, e, "more than %d GPU models", SCHED_PRODUCTS_MAX);
                else if (e < 0 && !err->message[0])
                        gs_error_set(err, e, "node %s: the model refused it", tn->name);
                names[i] = tn->name;
                r->ctx.cpu_norm = MAX(r->ctx.cpu_norm, tn->cpu_milli);
                r->ctx.gpu_norm = MAX(r->ctx.gpu_norm, 1000ULL * tn->gpus);
        }
        if (e == 0) {
                qsort(names, t->n_nodes, sizeof *names, name_cmp);
                r->node = calloc(t->n_nodes, sizeof *r->node);
                r->trace_node = calloc(t->n_nodes, sizeof *r->trace_node);
                e = r->node && r->trace_node ? 0 : -ENOMEM;
                for (size_t i = 0; e == 0 && i < t->n_nodes; i++) {
                        r->node[i] = sched_model_node(r->m, names[i]);
                        /* names point at the trace's nodes' first member */
                        r->trace_node[i] = (size_t)((const struct sched_trace_node *)(const void *)names[i] - t->nodes);
                }
                r->n_nodes = t->n_nodes;
        }
        free(names);
        free(info);
        return e;
}

static bool shape_same(const struct sched_shape *a, const struct sched_shape *b) {
        return a->cpu_milli == b->cpu_milli && a->mem_mib == b->mem_mib && a->num_gpu == b->num_gpu &&
               a->gpu_milli == b->gpu_milli && a->models == b->models;
}

/* Do two requests ask the filter the same (containers' whole GPUs, compute and memory)? */
static bool request_same(const struct cluster_request *a, const struct cluster_request *b) {
        if (a->n != b->n || a->profile != b->profile)
                return false;
        for (unsigned k = 0; k < a->n && k < CLUSTER_CONTAINERS_MAX; k++)
                if (a->c[k].whole != b->c[k].whole || a->c[k].core != b->c[k].core ||
                    a->c[k].mem_mib != b->c[k].mem_mib)
                        return false;
        return true;
}

/* Each pod's shape, interned: the model sees the pod's request — a snapshot's as the extender decoded it, a
 * trace pod's as one container (whole GPUs, or a share of compute in percent rounded up) — and the policies
 * its shape (sched_pack_request_shape, as the extender's) with the GPU models it accepts. */
static int build_shapes(struct run *r, const struct sched_trace *t) {
        r->pod_shape = calloc(t->n_pods ? t->n_pods : 1, sizeof *r->pod_shape);
        if (!r->pod_shape)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_pods; i++) {
                const struct sched_trace_pod *p = &t->pods[i];
                struct cluster_request req = { .profile = CLUSTER_PROFILE_NONE };
                if (p->req) {
                        req = *p->req;
                } else if (p->num_gpu) {
                        req.n = 1;
                        if (p->gpu_milli >= 1000)
                                req.c[0].whole = p->num_gpu;
                        else
                                req.c[0].core = (p->gpu_milli + 9) / 10;
                }
                struct sched_shape s = sched_pack_request_shape(&req, p->cpu_milli, p->mem_mib);
                s.models = models_of(r->m, p->spec);
                size_t k = 0;
                while (k < r->n_shapes && !(shape_same(&r->shapes[k].s, &s) && request_same(&r->shapes[k].req, &req)))
                        k++;
                if (k == r->n_shapes) {
                        if (array_reserve(&r->shapes, &r->cap_shapes, k + 1, 64) < 0)
                                return -ENOMEM;
                        struct shape *x = &r->shapes[k];
                        *x = (struct shape){ .s = s, .req = req };
                        r->n_shapes++;
                }
                r->pod_shape[i] = k;
        }
        return 0;
}

static int pod_order_cmp(const void *a, const void *b, void *arg) {
        const struct sched_trace *t = arg;
        return strcmp(t->pods[*(const size_t *)a].name, t->pods[*(const size_t *)b].name);
}

/* A snapshot's order: the bound pods first, then by creation time, then name. */
static int snapshot_order_cmp(const void *a, const void *b, void *arg) {
        const struct sched_trace *t = arg;
        const struct sched_trace_pod *x = &t->pods[*(const size_t *)a], *y = &t->pods[*(const size_t *)b];
        if (!x->node[0] != !y->node[0])
                return x->node[0] ? -1 : 1;
        if (x->created != y->created)
                return x->created < y->created ? -1 : 1;
        return strcmp(x->name, y->name);
}

static uint64_t pod_request(const struct sched_trace *t, size_t i) {
        return (uint64_t)t->pods[i].num_gpu * t->pods[i].gpu_milli;
}

/* §2.1: shuffle the name-sorted pods, tune to o->tune × capacity, rank the nodes. *ret: the arrival order. */
static int arrival(struct run *r, const struct sched_trace *t, const struct sched_replay_options *o, uint64_t capacity,
                   size_t **ret, size_t *ret_n) {
        size_t n = t->n_pods, cap = n ? n : 1;
        size_t *a = malloc(cap * sizeof *a), *sorted = malloc(cap * sizeof *sorted);
        if (!a || !sorted) {
                free(a);
                free(sorted);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                sorted[i] = i;
        qsort_r(sorted, n, sizeof *sorted, t->snapshot ? snapshot_order_cmp : pod_order_cmp, (void *)t);
        memcpy(a, sorted, n * sizeof *a);
        for (size_t i = t->snapshot ? 0 : n; i > 1; i--) {
                size_t j = (size_t)sched_rng_below(&r->rng, i);
                size_t x = a[i - 1];
                a[i - 1] = a[j];
                a[j] = x;
        }
        uint64_t sum = 0, target = (uint64_t)llround(o->tune * (double)capacity);
        for (size_t i = 0; i < n; i++)
                sum += pod_request(t, sorted[i]);
        if (o->tune > 0 && !t->snapshot && sum > 0 && sum < target) {
                for (;;) {
                        size_t d = sorted[sched_rng_below(&r->rng, t->n_pods)];
                        if (sum + t->pods[d].gpu_milli > target)
                                break;
                        if (array_reserve(&a, &cap, n + 1, 1024) < 0) {
                                free(a);
                                free(sorted);
                                return -ENOMEM;
                        }
                        a[n++] = d;
                        sum += pod_request(t, d);
                }
        } else if (o->tune > 0 && !t->snapshot) {
                while (sum > target && n > 0) {
                        size_t k = (size_t)sched_rng_below(&r->rng, n);
                        sum -= pod_request(t, a[k]);
                        memmove(&a[k], &a[k + 1], (n - k - 1) * sizeof *a);
                        n--;
                }
        }
        free(sorted);
        for (size_t i = 0; i < r->n_nodes; i++)
                r->rank[i] = (uint32_t)i;
        for (size_t i = r->n_nodes; i > 1; i--) {
                size_t j = (size_t)sched_rng_below(&r->rng, i);
                uint32_t x = r->rank[i - 1];
                r->rank[i - 1] = r->rank[j];
                r->rank[j] = x;
        }
        *ret = a;
        *ret_n = n;
        return 0;
}

/* The filter and score of shape x on node i, through the memo. */
static const struct memo *decide(struct run *r, struct shape *x, size_t i, enum cluster_policy policy) {
        struct memo *e = &x->memo[i];
        const struct sched_node *n = r->node[i];
        if (e->epoch == r->epoch && e->gen == n->generation)
                return e;
        e->epoch = r->epoch;
        e->gen = n->generation;
        e->gpu = -1;
        e->score = 0;
        e->fit = true;
        if (x->s.num_gpu) {
                struct sched_fit f;
                e->fit = sched_fit_node(r->m, n, &x->req, CLUSTER_POLICY_BINPACK, &f) == 0;
        }
        if (e->fit && !x->s.num_gpu && r->kube_cpu_pods) {
                e->score = sched_pack_kube_score(n, &x->s);
        } else if (e->fit && policy != CLUSTER_POLICY_RANDOM) {
                int g;
                e->score = sched_pack_score(&r->ctx, n, &x->s, policy, &g);
                e->gpu = (int16_t)g;
        }
        return e;
}

/* A uniformly random GPU of n that takes the share c (Random's GPU choice), of those the extender's bind
 * chooses among (sched_pack_share_free: the compute and the memory for it). */
static int random_gpu(struct run *r, const struct sched_node *n, const struct cluster_container_req *c) {
        unsigned free_milli[CLUSTER_GPUS_MAX], ok[CLUSTER_GPUS_MAX], k = 0;
        unsigned n_gpus = sched_pack_share_free(n, c->core, c->mem_mib, free_milli);
        for (unsigned g = 0; g < n_gpus; g++)
                if (free_milli[g])
                        ok[k++] = g;
        return k ? (int)ok[sched_rng_below(&r->rng, k)] : -1;
}

/* The policy's GPU for the share of shape x on node n, as the extender's bind chooses it (pack_share_gpu in
 * server.c): among the GPUs with the compute and the memory for it; -1: the fit's own pick. */
static int share_gpu(const struct run *r, const struct shape *x, const struct sched_node *n,
                     enum cluster_policy policy) {
        unsigned free_milli[CLUSTER_GPUS_MAX];
        unsigned k = sched_pack_share_free(n, x->req.c[0].core, x->req.c[0].mem_mib, free_milli);
        return sched_pack_share_gpu(&r->ctx, free_milli, k, n->product, &x->s, policy);
}

static int node_key_cmp(const void *key, const void *elem) {
        return strcmp(key, (*(const struct sched_node *const *)elem)->name);
}

/* Count the pod of shape x on node n at f's GPUs. */
static int assume(struct run *r, const struct shape *x, const struct sched_node *n, struct sched_fit *f, size_t seq) {
        char uid[32];
        snprintf(uid, sizeof uid, "replay-%zu", seq);
        struct sched_pod_info info = { .uid = uid,
                                       .ns = "replay",
                                       .name = uid,
                                       .node = n->name,
                                       .bound = true,
                                       .req = x->req,
                                       .cpu_milli = x->s.cpu_milli,
                                       .mem_mib = x->s.mem_mib };
        f->assign.n = x->req.n;
        r->last_gpus = 0;
        for (unsigned k = 0; k < f->assign.n; k++)
                r->last_gpus |= f->assign.c[k].gpus;
        const struct sched_node *const *at = bsearch(n->name, r->node, r->n_nodes, sizeof *r->node, node_key_cmp);
        r->last_node = at ? (size_t)(at - r->node) : SIZE_MAX;
        return sched_model_assume_pod(r->m, &info, n->name, &f->assign, 0);
}

/* Place the pod of shape x on node i: the filter's GPUs, or the policy's GPU for a share. */
static int place(struct run *r, struct shape *x, size_t i, int gpu, size_t seq) {
        const struct sched_node *n = r->node[i];
        struct sched_fit f = { 0 };
        if (x->s.num_gpu && sched_fit_node(r->m, n, &x->req, CLUSTER_POLICY_BINPACK, &f) != 0)
                return -EIO; /* the memo said it fits */
        if (x->s.num_gpu && x->s.gpu_milli < 1000 && gpu >= 0)
                f.assign.c[0].gpus = 1ULL << gpu; /* the fit's share (compute and memory) on the policy's GPU */
        return assume(r, x, n, &f, seq);
}

static void count_fail(struct sched_replay_result *res, enum sched_fail_reason why, const struct sched_shape *s);

/* Do the GPUs of a bound pod's assignment take its request now (a share: the one GPU; whole: as many
 * GPUs, each free)? */
static bool assignment_fits(const struct sched_node *n, const struct shape *x, uint64_t gpus) {
        unsigned k = 0;
        for (unsigned g = 0; g < n->n_gpus && g < 64; g++) {
                if (!(gpus >> g & 1))
                        continue;
                const struct sched_gpu *u = &n->gpu[g];
                uint64_t mem_free = u->mem_total_mib > u->mem_used_mib ? u->mem_total_mib - u->mem_used_mib : 0;
                bool ok = u->healthy && !u->whole &&
                          (x->s.gpu_milli < 1000 ? u->core_used + x->req.c[0].core <= 100 &&
                                                           (!x->req.c[0].mem_mib || mem_free >= x->req.c[0].mem_mib)
                                                 : !u->sharers);
                if (!ok)
                        return false;
                k++;
        }
        return x->s.gpu_milli < 1000 ? k == 1 : k == x->s.num_gpu;
}

/* A snapshot's bound pod, where it runs: on its assignment's GPUs when they take it, else on the
 * filter's pick; no kube-scheduler filter (kubelet admitted it). Failed when the node is not in the
 * snapshot or its GPUs have no room for the pod. */
static int place_bound(struct run *r, struct shape *x, const struct sched_trace_pod *p, size_t seq,
                       struct sched_replay_result *res, bool *ret_placed) {
        *ret_placed = false;
        const struct sched_node *const *at = bsearch(p->node, r->node, r->n_nodes, sizeof *r->node, node_key_cmp);
        struct sched_fit f = { 0 };
        if (!at || (x->s.num_gpu && sched_fit_node(r->m, *at, &x->req, CLUSTER_POLICY_BINPACK, &f) != 0)) {
                count_fail(res, SCHED_FAIL_BOUND, &x->s);
                return 0;
        }
        if (x->s.num_gpu && x->req.n == 1 && p->gpus && assignment_fits(*at, x, p->gpus))
                f.assign.c[0] = x->s.gpu_milli < 1000
                                        ? (struct cluster_container_assign){ .gpus = p->gpus & -p->gpus,
                                                                             .core = x->req.c[0].core,
                                                                             .mem_mib = x->req.c[0].mem_mib }
                                        : (struct cluster_container_assign){ .gpus = p->gpus, .whole = true };
        int e = assume(r, x, *at, &f, seq);
        *ret_placed = e == 0;
        return e;
}

static void count_fail(struct sched_replay_result *res, enum sched_fail_reason why, const struct sched_shape *s) {
        res->failed++;
        res->fail_by_reason[why]++;
        for (size_t k = 0; k < res->n_fail; k++) {
                struct sched_replay_fail *f = &res->fail[k];
                if (f->reason == why && f->num_gpu == s->num_gpu && f->gpu_milli == s->gpu_milli) {
                        f->count++;
                        return;
                }
        }
        size_t cap = res->n_fail; /* grows by one: few distinct groups */
        struct sched_replay_fail *g = realloc(res->fail, (cap + 1) * sizeof *g);
        if (!g)
                return; /* the totals above stay right */
        res->fail = g;
        res->fail[res->n_fail++] = (struct sched_replay_fail){ why, s->num_gpu, s->gpu_milli, s->cpu_milli, 1 };
}

/* The frag policy's target: the mix of the pods seen so far, re-read at 1, 2, 4, … 256 pods, then every 256. */
static void live_update(struct run *r, const struct shape *x) {
        if (sched_mix_observe(&r->mix, &x->s, true, &r->live)) {
                sched_workload_scarcity(&r->live, r->m);
                r->epoch++;
        }
}

/* lint: long — one pod: the best feasible node (score, then rank), placed; or why none. One pass over the nodes
 * with each filter of the protocol (CPU, memory, GPU model, GPU fit) and the policy's score in order. */
static int schedule(struct run *r, struct shape *x, size_t seq, enum cluster_policy policy,
                    struct sched_replay_result *res, bool *ret_placed) {
        if (!x->memo) {
                x->memo = calloc(r->n_nodes, sizeof *x->memo);
                if (!x->memo)
                        return -ENOMEM;
        }
        size_t best = SIZE_MAX, n_feasible = 0;
        double best_score = 0;
        bool random = policy == CLUSTER_POLICY_RANDOM && !(r->kube_cpu_pods && !x->s.num_gpu);
        unsigned cpu_ok = 0, mem_ok = 0, model_ok = 0;
        for (size_t i = 0; i < r->n_nodes; i++) {
                int k = sched_pack_kube_fit(r->node[i], &x->s);
                if (k == -ENOSPC)
                        continue;
                cpu_ok++;
                if (k == -EMSGSIZE)
                        continue;
                mem_ok++;
                if (k < 0)
                        continue;
                model_ok++;
                const struct memo *e = decide(r, x, i, policy);
                if (!e->fit)
                        continue;
                if (random) {
                        r->feasible[n_feasible++] = i;
                        continue;
                }
                n_feasible++;
                if (best == SIZE_MAX || e->score > best_score ||
                    (e->score == best_score && r->rank[i] < r->rank[best])) {
                        best = i;
                        best_score = e->score;
                }
        }
        *ret_placed = false;
        if (!n_feasible) {
                count_fail(res,
                           !cpu_ok     ? SCHED_FAIL_CPU
                           : !mem_ok   ? SCHED_FAIL_MEMORY
                           : !model_ok ? SCHED_FAIL_MODEL
                                       : SCHED_FAIL_GPU,
                           &x->s);
                return 0;
        }
        int gpu = -1;
        if (random) {
                best = r->feasible[sched_rng_below(&r->rng, n_feasible)];
                if (x->s.num_gpu && x->s.gpu_milli < 1000)
                        gpu = random_gpu(r, r->node[best], &x->req.c[0]);
        } else if (r->bind_gpu && x->s.num_gpu && x->s.gpu_milli < 1000 && sched_pack_policy(policy) && r->ctx.w) {
                gpu = share_gpu(r, x, r->node[best], policy);
        } else {
                gpu = decide(r, x, best, policy)->gpu;
        }
        int e = place(r, x, best, gpu, seq);
        *ret_placed = e == 0;
        return e;
}

/* §4: per integer arrived percent, the mean allocation of its samples (else of the samples within one
 * percent; else the previous point), each rounded to 2 decimals. */
static int curve(struct sched_replay_result *res, const double *sum, const size_t *cnt, unsigned n_bins,
                 unsigned n_points) {
        res->curve = calloc(n_points ? n_points : 1, sizeof *res->curve);
        if (!res->curve)
                return -ENOMEM;
        res->n_curve = n_points;
        double last = 0;
        for (unsigned x = 0; x < n_points; x++) {
                double s = 0;
                size_t c = 0;
                if (x < n_bins && cnt[x]) {
                        s = sum[x];
                        c = cnt[x];
                } else {
                        for (unsigned y = x ? x - 1 : 0; y <= x + 1 && y < n_bins; y++) {
                                s += sum[y];
                                c += cnt[y];
                        }
                }
                last = c ? nearbyint(s / (double)c * 100.0) / 100.0 : last;
                res->curve[x] = last;
        }
        return 0;
}

static void run_free(struct run *r) {
        for (size_t k = 0; k < r->n_shapes; k++)
                free(r->shapes[k].memo);
        free(r->shapes);
        free(r->pod_shape);
        free(r->node);
        free(r->trace_node);
        free(r->rank);
        free(r->feasible);
        sched_mix_free(&r->mix);
        sched_model_free(r->m);
}

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* lint: long — the protocol in its order: the cluster, the shapes, the target workloads, the arrival order,
 * then the pods one by one with their samples, then the curve; each step a call. */
int sched_replay_run(const struct sched_trace *t, const struct sched_replay_options *o, struct sched_replay_result *ret,
                     struct gs_error *err) {
        *ret = (struct sched_replay_result){ 0 };
        if (!t->n_nodes)
                return gs_error_set(err, -EINVAL, "no nodes");
        if (t->snapshot && o->tune > 0)
                return gs_error_set(err, -EINVAL, "a snapshot replays as it is: no tuning (tune 0)");
        struct run r = { .epoch = 1, .kube_cpu_pods = o->gpu_pods_only, .bind_gpu = t->snapshot };
        int e = sched_model_new(&r.m);
        if (e < 0)
                return e;
        r.rank = calloc(t->n_nodes, sizeof *r.rank);
        r.feasible = calloc(t->n_nodes, sizeof *r.feasible);
        e = r.rank && r.feasible ? build_nodes(&r, t, err) : -ENOMEM;
        if (e == 0)
                e = build_shapes(&r, t);
        uint64_t capacity = 0;
        for (size_t i = 0; i < t->n_nodes; i++)
                capacity += 1000ULL * t->nodes[i].gpus;
        ret->gpus = capacity / 1000;
        /* FGD's target: the pod list as given (§3.6); frag's: the pods seen (live_update) */
        struct sched_mix file = { 0 };
        for (size_t i = 0; e == 0 && i < t->n_pods; i++)
                e = sched_mix_add(&file, &r.shapes[r.pod_shape[i]].s);
        sched_mix_workload(&file, 0.95, false, &r.fixed);
        sched_workload_scarcity(&r.fixed, r.m);
        sched_mix_free(&file);
        r.ctx.w = o->live ? &r.live : &r.fixed;
        sched_rng_seed(&r.rng, o->seed);
        size_t *order = NULL, n = 0;
        if (e == 0)
                e = arrival(&r, t, o, capacity, &order, &n);
        unsigned n_bins = 0, n_points = 0;
        double *sum = NULL;
        size_t *cnt = NULL;
        if (e == 0) {
                uint64_t total = 0;
                for (size_t i = 0; i < n; i++)
                        total += pod_request(t, order[i]);
                double top = capacity ? (double)total / (double)capacity * 100.0 : 0;
                n_bins = (unsigned)top + 3;
                n_points = o->tune > 0 ? (unsigned)floor(o->tune * 100.0 + 1e-9) + 1 : (unsigned)nearbyint(top) + 1;
                sum = calloc(n_bins, sizeof *sum);
                cnt = calloc(n_bins, sizeof *cnt);
                if (!sum || !cnt)
                        e = -ENOMEM;
        }
        if (e == 0 && t->snapshot) {
                ret->place = calloc(n ? n : 1, sizeof *ret->place);
                e = ret->place ? 0 : -ENOMEM;
        }
        double t0 = now_s();
        ret->pods = n;
        for (size_t i = 0; e == 0 && i < n; i++) {
                struct shape *x = &r.shapes[r.pod_shape[order[i]]];
                if (r.ctx.w == &r.live)
                        live_update(&r, x);
                bool placed = false;
                const struct sched_trace_pod *tp = &t->pods[order[i]];
                size_t fails[_SCHED_FAIL_MAX];
                memcpy(fails, ret->fail_by_reason, sizeof fails);
                r.last_node = SIZE_MAX;
                e = tp->node[0] ? place_bound(&r, x, tp, i, ret, &placed) : schedule(&r, x, i, o->policy, ret, &placed);
                if (ret->place) {
                        struct sched_replay_place *pl = &ret->place[ret->n_place++];
                        *pl = (struct sched_replay_place){ .pod = order[i], .node = -1, .reason = -1 };
                        if (placed && r.last_node != SIZE_MAX) {
                                pl->node = (long)r.trace_node[r.last_node];
                                pl->gpus = r.last_gpus;
                        }
                        for (int k = 0; !placed && k < _SCHED_FAIL_MAX; k++)
                                if (ret->fail_by_reason[k] != fails[k])
                                        pl->reason = k;
                }
                uint64_t req = pod_request(t, order[i]);
                ret->gpu_milli_arrived += req;
                ret->gpu_milli_placed += placed ? req : 0;
                double arrived = (double)ret->gpu_milli_arrived / (double)(capacity ? capacity : 1) * 100.0;
                double alloc = (double)ret->gpu_milli_placed / (double)(capacity ? capacity : 1) * 100.0;
                unsigned bin = (unsigned)nearbyint(arrived);
                if (bin < n_bins) {
                        sum[bin] += nearbyint(alloc * 100.0) / 100.0;
                        cnt[bin]++;
                }
                if (o->progress && (i % 512 == 0 || i + 1 == n))
                        o->progress(o->arg, i + 1, n);
        }
        ret->seconds = now_s() - t0;
        if (e == 0)
                e = curve(ret, sum, cnt, n_bins, n_points);
        if (e == -ENOMEM)
                gs_error_set(err, e, "out of memory");
        else if (e < 0 && err && !err->message[0])
                gs_error_set(err, e, "placing a pod failed (error %d)", e);
        free(sum);
        free(cnt);
        free(order);
        run_free(&r);
        if (e < 0)
                sched_replay_result_free(ret);
        return e;
}

void sched_replay_result_free(struct sched_replay_result *r) {
        free(r->curve);
        free(r->fail);
        free(r->place);
        r->place = NULL;
        r->n_place = 0;
        r->curve = NULL;
        r->fail = NULL;
        r->n_curve = 0;
        r->n_fail = 0;
}
