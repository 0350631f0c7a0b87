/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/cluster — the node GPU annotation (format and parse), pod GPU requests and assignments
 * (gpuslice's annotation, gpushare's and gpu-manager's), and the per-GPU allocation table built
 * from them (cluster.h). Pure; every input is untrusted (fuzzed: fuzz-kube-annotation).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/cluster.h"
#include "kube/kube.h"
#include "util/util.h"

static int errf(char *err, size_t errlen, int r, const char *fmt, ...) _printf_(4, 5);
static int errf(char *err, size_t errlen, int r, const char *fmt, ...) {
        if (err && errlen) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(err, errlen, fmt, ap);
                va_end(ap);
        }
        return r;
}

/* ---- node annotation ----------------------------------------------------------------------- */

int kube_node_gpus_format(const struct topo *t, const bool *healthy, const char *const *reason, char **ret) {
        if (t->n_gpus > KUBE_GPUS_MAX)
                return -E2BIG;
        json_t *o = json_object(), *gpus = json_array();
        if (!o || !gpus) {
                json_decref(o);
                json_decref(gpus);
                return -ENOMEM;
        }
        json_object_set_new(o, "v", json_integer(1));
        if (t->driver_version[0])
                json_object_set_new(o, "driver", json_string(t->driver_version));
        if (t->cuda_version)
                json_object_set_new(o, "cuda", json_integer(t->cuda_version));
        json_object_set_new(o, "nvswitch", json_boolean(t->nvswitch));
        for (unsigned i = 0; i < t->n_gpus; i++) {
                const struct topo_gpu *g = &t->gpu[i];
                json_t *j = json_object();
                json_object_set_new(j, "i", json_integer(g->index));
                json_object_set_new(j, "uuid", json_string(g->uuid));
                json_object_set_new(j, "model", json_string(g->name));
                json_object_set_new(j, "mem", json_integer((json_int_t)(g->memory_total >> 20)));
                if (g->cc_major) {
                        char cc[24];
                        snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
                        json_object_set_new(j, "cc", json_string(cc));
                }
                const char *h = healthy[i] ? "ok" : (reason && reason[i] && reason[i][0] ? reason[i] : "unhealthy");
                json_object_set_new(j, "health", json_string(h));
                json_array_append_new(gpus, j);
        }
        json_object_set_new(o, "gpus", gpus);
        /* upper triangle of the link matrix, one row per GPU */
        size_t cap = (size_t)t->n_gpus * t->n_gpus * 12 + 8, n = 0;
        char *links = malloc(cap);
        if (!links) {
                json_decref(o);
                return -ENOMEM;
        }
        links[0] = 0;
        for (unsigned i = 0; i + 1 < t->n_gpus; i++) {
                if (i)
                        links[n++] = ';';
                for (unsigned j = i + 1; j < t->n_gpus; j++) {
                        /* NVLink pairs keep their PCIe level too: "NV12/PIX" */
                        char b[8];
                        struct topo_link l = t->link[i][j];
                        const char *pcie = l.nvlinks && l.pcie >= TOPO_LEVEL_SYS && l.pcie <= TOPO_LEVEL_PIX
                                                   ? topo_level_name((enum topo_level)l.pcie)
                                                   : NULL;
                        int w = snprintf(links + n, cap - n, "%s%s%s%s", j > i + 1 ? "," : "", topo_link_name(l, b),
                                         pcie ? "/" : "", pcie ? pcie : "");
                        n += (size_t)w;
                }
                links[n] = 0;
        }
        json_object_set_new(o, "links", json_string(links));
        free(links);
        char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (!s)
                return -ENOMEM;
        if (strlen(s) > KUBE_ANNOTATION_MAX) {
                free(s);
                return -E2BIG;
        }
        *ret = s;
        return 0;
}

void kube_node_gpus_done(struct kube_node_gpus *g) {
        if (!g)
                return;
        free(g->gpu);
        free(g->link);
        memset(g, 0, sizeof *g);
}

static bool str_field(json_t *o, const char *k, char *buf, size_t len, bool required) {
        json_t *v = json_object_get(o, k);
        if (!v)
                return !required;
        if (!json_is_string(v) || json_string_length(v) >= len)
                return false;
        strscpy(buf, json_string_value(v), len);
        return true;
}

int kube_node_gpus_parse(const char *text, size_t len, struct kube_node_gpus *ret, char *err, size_t errlen) {
        struct kube_node_gpus g = { 0 };
        int r = -EINVAL;
        if (len > KUBE_ANNOTATION_MAX)
                return errf(err, errlen, -E2BIG, "annotation longer than %u bytes", KUBE_ANNOTATION_MAX);
        json_error_t je;
        json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!json_is_object(o)) {
                r = errf(err, errlen, -EINVAL, "not a JSON object%s%s", o ? "" : ": ", o ? "" : je.text);
                goto fail;
        }
        json_t *v = json_object_get(o, "v");
        if (!json_is_integer(v)) {
                r = errf(err, errlen, -EINVAL, "v: missing");
                goto fail;
        }
        if (json_integer_value(v) != 1) {
                r = errf(err, errlen, -ENOTSUP, "v: version %" JSON_INTEGER_FORMAT " not supported (1)",
                         json_integer_value(v));
                goto fail;
        }
        g.version = 1;
        if (!str_field(o, "driver", g.driver, sizeof g.driver, false)) {
                r = errf(err, errlen, -EINVAL, "driver: not a short string");
                goto fail;
        }
        v = json_object_get(o, "cuda");
        if (v && (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1000000)) {
                r = errf(err, errlen, -EINVAL, "cuda: not a version number");
                goto fail;
        }
        g.cuda_version = v ? (int)json_integer_value(v) : 0;
        g.nvswitch = json_is_true(json_object_get(o, "nvswitch"));
        json_t *gpus = json_object_get(o, "gpus");
        if (!json_is_array(gpus)) {
                r = errf(err, errlen, -EINVAL, "gpus: missing");
                goto fail;
        }
        if (json_array_size(gpus) > KUBE_GPUS_MAX) {
                r = errf(err, errlen, -E2BIG, "gpus: more than %d", KUBE_GPUS_MAX);
                goto fail;
        }
        g.n = (unsigned)json_array_size(gpus);
        g.gpu = calloc(g.n ? g.n : 1, sizeof *g.gpu);
        g.link = calloc((size_t)(g.n ? g.n : 1) * (g.n ? g.n : 1), sizeof *g.link);
        if (!g.gpu || !g.link) {
                r = -ENOMEM;
                goto fail;
        }
        for (unsigned i = 0; i < g.n; i++) {
                json_t *j = json_array_get(gpus, i);
                struct kube_gpu *k = &g.gpu[i];
                json_t *ix = json_object_get(j, "i"), *mem = json_object_get(j, "mem");
                if (!json_is_object(j) || !json_is_integer(ix) || json_integer_value(ix) < 0 ||
                    json_integer_value(ix) >= 1024) {
                        r = errf(err, errlen, -EINVAL, "gpus[%u].i: missing or out of range", i);
                        goto fail;
                }
                k->index = (int)json_integer_value(ix);
                for (unsigned p = 0; p < i; p++)
                        if (g.gpu[p].index == k->index) {
                                r = errf(err, errlen, -EINVAL, "gpus[%u].i: index %d twice", i, k->index);
                                goto fail;
                        }
                if (!json_is_integer(mem) || json_integer_value(mem) < 0 ||
                    json_integer_value(mem) > (json_int_t)1 << 40) {
                        r = errf(err, errlen, -EINVAL, "gpus[%u].mem: missing or out of range", i);
                        goto fail;
                }
                k->memory_mib = (uint64_t)json_integer_value(mem);
                if (!str_field(j, "uuid", k->uuid, sizeof k->uuid, true) ||
                    !str_field(j, "model", k->model, sizeof k->model, true) ||
                    !str_field(j, "health", k->health, sizeof k->health, true)) {
                        r = errf(err, errlen, -EINVAL, "gpus[%u]: uuid, model and health must be short strings", i);
                        goto fail;
                }
                k->healthy = streq(k->health, "ok");
                char cc[24] = "";
                if (!str_field(j, "cc", cc, sizeof cc, false)) {
                        r = errf(err, errlen, -EINVAL, "gpus[%u].cc: not a string", i);
                        goto fail;
                }
                if (cc[0] && sscanf(cc, "%2d.%2d", &k->cc_major, &k->cc_minor) != 2) {
                        r = errf(err, errlen, -EINVAL, "gpus[%u].cc: expected MAJOR.MINOR", i);
                        goto fail;
                }
        }
        for (unsigned i = 0; i < g.n; i++)
                for (unsigned j = 0; j < g.n; j++)
                        g.link[i * g.n + j] =
                                (struct topo_link){ .pcie = i == j ? TOPO_LEVEL_SELF : TOPO_LEVEL_UNKNOWN };
        json_t *links = json_object_get(o, "links");
        if (links) {
                if (!json_is_string(links)) {
                        r = errf(err, errlen, -EINVAL, "links: not a string");
                        goto fail;
                }
                const char *s = json_string_value(links), *end = s + json_string_length(links);
                unsigned i = 0, j = 1;
                while (s < end && g.n > 1) {
                        size_t tok = strcspn(s, ",;");
                        if (s + tok > end)
                                tok = (size_t)(end - s);
                        struct topo_link l, lp;
                        const char *slash = memchr(s, '/', tok);
                        size_t first = slash ? (size_t)(slash - s) : tok;
                        bool bad = i + 1 >= g.n || j >= g.n || topo_link_from_name(s, first, &l) < 0;
                        if (!bad && slash) {
                                /* "NV12/PIX": the PCIe level under the NVLinks */
                                bad = !l.nvlinks || topo_link_from_name(slash + 1, tok - first - 1, &lp) < 0 ||
                                      lp.nvlinks || lp.pcie == TOPO_LEVEL_SELF;
                                if (!bad)
                                        l.pcie = lp.pcie;
                        }
                        if (bad) {
                                r = errf(err, errlen, -EINVAL, "links: bad entry at GPU %u → %u", i, j);
                                goto fail;
                        }
                        g.link[i * g.n + j] = g.link[j * g.n + i] = l;
                        s += tok;
                        if (s < end && *s == ';') {
                                if (j != g.n - 1) {
                                        r = errf(err, errlen, -EINVAL, "links: row %u too short", i);
                                        goto fail;
                                }
                                i++;
                                j = i + 1;
                        } else
                                j++;
                        if (s < end)
                                s++;
                }
        }
        json_decref(o);
        *ret = g;
        return 0;
fail:
        json_decref(o);
        kube_node_gpus_done(&g);
        return r;
}

/* ---- pods ---------------------------------------------------------------------------------- */

static bool quantity(json_t *v, uint64_t *ret) {
        if (!json_is_string(v))
                return false;
        const char *s = json_string_value(v);
        uint64_t x = 0;
        if (!*s)
                return false;
        for (; *s; s++) {
                if (*s < '0' || *s > '9' || x > UINT32_MAX)
                        return false;
                x = x * 10 + (uint64_t)(*s - '0');
        }
        *ret = x;
        return true;
}

/* indices "0" or "0,1" */
static unsigned parse_indices(const char *s, int *out, unsigned max) {
        unsigned n = 0;
        while (*s && n < max) {
                unsigned v = 0, digits = 0;
                while (*s >= '0' && *s <= '9' && digits < 5) {
                        v = v * 10 + (unsigned)(*s - '0');
                        s++;
                        digits++;
                }
                if (!digits)
                        return 0;
                out[n++] = (int)v;
                if (*s == ',')
                        s++;
                else if (*s)
                        return 0;
        }
        return *s ? 0 : n;
}

static const char *ann(const json_t *annotations, const char *key) {
        return json_string_value(json_object_get(annotations, key));
}

int kube_pod_parse(const json_t *pod, struct kube_pod *ret) {
        struct kube_pod p;
        memset(&p, 0, sizeof p);
        json_t *meta = json_object_get(pod, "metadata"), *spec = json_object_get(pod, "spec");
        json_t *an = json_object_get(meta, "annotations");
        if (!str_field(meta, "name", p.name, sizeof p.name, true) ||
            !str_field(meta, "namespace", p.namespace_, sizeof p.namespace_, false))
                return -EINVAL;
        if (!str_field(spec, "nodeName", p.node, sizeof p.node, false))
                p.node[0] = 0;
        if (!str_field(json_object_get(pod, "status"), "phase", p.phase, sizeof p.phase, false))
                p.phase[0] = 0;
        json_t *cs = json_object_get(spec, "containers");
        size_t ci;
        json_t *c;
        bool any = false;
        json_array_foreach(cs, ci, c) {
                if (p.n >= KUBE_CONTAINERS_MAX)
                        break;
                struct kube_pod_container *k = &p.c[p.n++];
                if (!str_field(c, "name", k->name, sizeof k->name, false))
                        k->name[0] = 0;
                json_t *res = json_object_get(c, "resources");
                json_t *lim = json_object_get(res, "limits");
                if (!json_is_object(lim) || !json_object_size(lim))
                        lim = json_object_get(res, "requests");
                const char *key;
                json_t *q;
                json_object_foreach(lim, key, q) {
                        uint64_t v;
                        if (!quantity(q, &v) || !v)
                                continue;
                        if (streq(key, "nvidia.com/gpu"))
                                k->whole += (unsigned)MIN(v, 64);
                        else if (streq(key, "gpuslice.io/gpu-core") || streq(key, "tencent.com/vcuda-core")) {
                                if (v >= 100 && v % 100 == 0)
                                        k->whole += (unsigned)MIN(v / 100, 64);
                                else if (v < 100)
                                        k->core_percent = (unsigned)v;
                        } else if (streq(key, "gpuslice.io/gpu-memory") || streq(key, "tencent.com/vcuda-memory"))
                                k->memory_mib = v * 256;
                        else if (streq(key, "aliyun.com/gpu-mem"))
                                k->memory_mib = v * 1024;
                        else
                                continue;
                        any = true;
                }
                if (k->whole) {
                        k->core_percent = 0;
                        k->memory_mib = 0;
                }
        }
        if (!any)
                return -ENODATA;

        /* where: gpuslice's own annotation first, then the compatible ones */
        const char *a = ann(an, KUBE_ANN_ASSIGNMENT);
        if (a && strlen(a) <= KUBE_ANNOTATION_MAX) {
                json_t *j = json_loads(a, JSON_REJECT_DUPLICATES, NULL);
                json_t *jc = json_object_get(j, "containers");
                if (json_is_integer(json_object_get(j, "v")) && json_integer_value(json_object_get(j, "v")) == 1 &&
                    json_is_array(jc)) {
                        size_t i;
                        json_t *e;
                        json_array_foreach(jc, i, e) {
                                const char *nm = json_string_value(json_object_get(e, "name"));
                                json_t *gs = json_object_get(e, "gpus");
                                if (!nm || !json_is_array(gs))
                                        continue;
                                for (unsigned k = 0; k < p.n; k++) {
                                        if (!streq(p.c[k].name, nm))
                                                continue;
                                        size_t gi;
                                        json_t *gv;
                                        p.c[k].n_assigned = 0;
                                        json_array_foreach(gs, gi, gv) {
                                                if (p.c[k].n_assigned >= ELEMENTSOF(p.c[k].assigned) ||
                                                    !json_is_integer(gv) || json_integer_value(gv) < 0 ||
                                                    json_integer_value(gv) >= 1024)
                                                        break;
                                                p.c[k].assigned[p.c[k].n_assigned++] = (int)json_integer_value(gv);
                                        }
                                        if (p.c[k].n_assigned)
                                                p.assigned_known = true;
                                }
                        }
                }
                json_decref(j);
                if (p.assigned_known) {
                        strscpy(p.source, "gpuslice", sizeof p.source);
                        const char *ok = ann(an, KUBE_ANN_ASSIGNED);
                        p.confirmed = ok && streq(ok, "true");
                }
        }
        if (!p.assigned_known && (a = ann(an, "ALIYUN_COM_GPU_MEM_IDX"))) {
                int idx[8];
                if (parse_indices(a, idx, 1) == 1) {
                        for (unsigned k = 0; k < p.n; k++)
                                if (p.c[k].memory_mib || p.c[k].core_percent) {
                                        p.c[k].assigned[0] = idx[0];
                                        p.c[k].n_assigned = 1;
                                        p.assigned_known = true;
                                }
                        /* gpushare's _POD is the pod's total GiB: trust the per-container
                         * requests, which sum to it, unless no container said */
                        const char *tot = ann(an, "ALIYUN_COM_GPU_MEM_POD");
                        uint64_t gib;
                        json_t *q = tot ? json_string(tot) : NULL;
                        if (q && quantity(q, &gib) && p.n && !p.c[0].memory_mib && !p.c[0].whole)
                                p.c[0].memory_mib = gib * 1024;
                        json_decref(q);
                        strscpy(p.source, "gpushare", sizeof p.source);
                        const char *ok = ann(an, "ALIYUN_COM_GPU_MEM_ASSIGNED");
                        p.confirmed = ok && streq(ok, "true");
                }
        }
        if (!p.assigned_known) {
                for (unsigned k = 0; k < p.n; k++) {
                        char key[64];
                        snprintf(key, sizeof key, "tencent.com/predicate-gpu-idx-%u", k);
                        if ((a = ann(an, key))) {
                                unsigned n = parse_indices(a, p.c[k].assigned, ELEMENTSOF(p.c[k].assigned));
                                p.c[k].n_assigned = n;
                                if (n)
                                        p.assigned_known = true;
                        }
                }
                if (p.assigned_known) {
                        strscpy(p.source, "gpu-manager", sizeof p.source);
                        const char *ok = ann(an, "tencent.com/gpu-assigned");
                        p.confirmed = ok && streq(ok, "true");
                }
        }
        *ret = p;
        return 0;
}

int kube_assignment_format(const char *node, uint64_t time_ms, const struct kube_pod *p, char **ret) {
        json_t *o = json_object(), *cs = json_array();
        if (!o || !cs) {
                json_decref(o);
                json_decref(cs);
                return -ENOMEM;
        }
        json_object_set_new(o, "v", json_integer(1));
        json_object_set_new(o, "node", json_string(node));
        json_object_set_new(o, "time", json_integer((json_int_t)time_ms));
        for (unsigned k = 0; k < p->n; k++) {
                const struct kube_pod_container *c = &p->c[k];
                if (!c->n_assigned)
                        continue;
                json_t *e = json_object(), *g = json_array();
                for (unsigned i = 0; i < c->n_assigned; i++)
                        json_array_append_new(g, json_integer(c->assigned[i]));
                json_object_set_new(e, "name", json_string(c->name));
                json_object_set_new(e, "gpus", g);
                json_object_set_new(e, "core", json_integer(c->whole ? 100 : c->core_percent));
                json_object_set_new(e, "mem", json_integer((json_int_t)c->memory_mib));
                json_array_append_new(cs, e);
        }
        json_object_set_new(o, "containers", cs);
        char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

/* ---- cluster ------------------------------------------------------------------------------- */

static int node_cmp(const void *a, const void *b) {
        return strcmp(((const struct kube_cluster_node *)a)->name, ((const struct kube_cluster_node *)b)->name);
}

static int push(unsigned **arr, unsigned *n, unsigned v) {
        if ((*n & (*n - 1)) == 0 || *n == 0) { /* grow at powers of two */
                unsigned cap = *n ? *n * 2 : 2;
                unsigned *a = realloc(*arr, cap * sizeof **arr);
                if (!a)
                        return -ENOMEM;
                *arr = a;
        }
        (*arr)[(*n)++] = v;
        return 0;
}

void kube_cluster_done(struct kube_cluster *c) {
        if (!c)
                return;
        for (unsigned i = 0; i < c->n_nodes; i++) {
                struct kube_cluster_node *n = &c->nodes[i];
                for (unsigned g = 0; n->use && g < n->g.n; g++)
                        free(n->use[g].pods);
                free(n->use);
                free(n->unplaced);
                kube_node_gpus_done(&n->g);
        }
        free(c->nodes);
        free(c->pods);
        free(c->pending);
        memset(c, 0, sizeof *c);
}

int kube_cluster_build(const json_t *nodes, const json_t *pods, struct kube_cluster *ret) {
        size_t np = json_array_size(pods), n = 0;
        struct kube_pod *arr = malloc((np ? np : 1) * sizeof *arr);
        if (!arr)
                return -ENOMEM;
        for (size_t i = 0; i < np; i++)
                if (kube_pod_parse(json_array_get(pods, i), &arr[n]) == 0)
                        n++;
        return kube_cluster_build_pods(nodes, arr, n, ret);
}

int kube_cluster_build_pods(const json_t *nodes, struct kube_pod *pods, size_t np, struct kube_cluster *ret) {
        struct kube_cluster c = { 0 };
        size_t nn = json_array_size(nodes);
        c.nodes = calloc(nn ? nn : 1, sizeof *c.nodes);
        c.pods = pods;
        if (!c.nodes)
                goto oom;
        for (size_t i = 0; i < nn; i++) {
                json_t *o = json_array_get(nodes, i), *meta = json_object_get(o, "metadata");
                struct kube_cluster_node *n = &c.nodes[c.n_nodes];
                if (!str_field(meta, "name", n->name, sizeof n->name, true))
                        continue;
                const char *a = json_string_value(json_object_get(json_object_get(meta, "annotations"), KUBE_ANN_GPUS));
                if (a) {
                        int r = kube_node_gpus_parse(a, strlen(a), &n->g, n->error, sizeof n->error);
                        if (r == -ENOMEM)
                                goto oom;
                        n->published = r == 0;
                } else
                        strscpy(n->error, "no " KUBE_ANN_GPUS " annotation", sizeof n->error);
                n->use = calloc(n->g.n ? n->g.n : 1, sizeof *n->use);
                if (!n->use)
                        goto oom;
                c.n_nodes++;
        }
        qsort(c.nodes, c.n_nodes, sizeof *c.nodes, node_cmp);
        for (size_t i = 0; i < np; i++) {
                struct kube_pod *p = &c.pods[c.n_pods];
                if (i != c.n_pods)
                        *p = pods[i];
                if (streq(p->phase, "Succeeded") || streq(p->phase, "Failed"))
                        continue;
                unsigned pi = c.n_pods++;
                if (!p->node[0]) {
                        if (push(&c.pending, &c.n_pending, pi) < 0)
                                goto oom;
                        continue;
                }
                struct kube_cluster_node key;
                strscpy(key.name, p->node, sizeof key.name);
                struct kube_cluster_node *n = bsearch(&key, c.nodes, c.n_nodes, sizeof *c.nodes, node_cmp);
                if (!n)
                        continue;
                bool unplaced = false;
                for (unsigned k = 0; k < p->n; k++) {
                        const struct kube_pod_container *ct = &p->c[k];
                        if (!ct->whole && !ct->core_percent && !ct->memory_mib)
                                continue;
                        if (!ct->n_assigned) {
                                unplaced = true;
                                continue;
                        }
                        for (unsigned a = 0; a < ct->n_assigned; a++) {
                                unsigned g;
                                for (g = 0; g < n->g.n; g++)
                                        if (n->g.gpu[g].index == ct->assigned[a])
                                                break;
                                if (g == n->g.n) {
                                        unplaced = true;
                                        continue;
                                }
                                struct kube_gpu_use *u = &n->use[g];
                                if (ct->whole) {
                                        u->whole = true;
                                        u->core_alloc_percent += 100;
                                        u->memory_alloc_mib += n->g.gpu[g].memory_mib;
                                } else {
                                        u->core_alloc_percent += ct->core_percent;
                                        u->memory_alloc_mib += ct->memory_mib;
                                }
                                if ((!u->n_pods || u->pods[u->n_pods - 1] != pi) && push(&u->pods, &u->n_pods, pi) < 0)
                                        goto oom;
                        }
                }
                if (unplaced && push(&n->unplaced, &n->n_unplaced, pi) < 0)
                        goto oom;
        }
        *ret = c;
        return 0;
oom:
        kube_cluster_done(&c);
        return -ENOMEM;
}
