/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cluster/node — the node annotation gpuslice.io/gpus (cluster.h, docs/cluster.md): built from a
 * node's topology and health, written as compact JSON, read back strictly. The one writer (the
 * agent's publisher calls it) and the one reader (the extender, inspect). Pure. Must never write a
 * value its own reader would refuse.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/cluster.h"
#include "util/util.h"

int cluster_node_from_topo(const struct topo *t, const bool *healthy, const char *const *reason,
                           struct cluster_node_info *ret) {
        if (t->n_gpus > CLUSTER_GPUS_MAX)
                return -E2BIG;
        uint64_t seen = 0;
        for (unsigned i = 0; i < t->n_gpus; i++) {
                int x = t->gpu[i].index;
                if (x < 0 || (unsigned)x >= t->n_gpus || (seen >> x & 1))
                        return -EINVAL;
                seen |= 1ULL << x;
        }
        memset(ret, 0, sizeof *ret);
        strscpy(ret->driver, t->driver_version, sizeof ret->driver);
        ret->cuda = t->cuda_version > 0 ? (unsigned)t->cuda_version : 0;
        ret->nvswitch = t->nvswitch;
        ret->n_gpus = t->n_gpus;
        /* by NVML index: the index is what assignments name */
        for (unsigned i = 0; i < t->n_gpus; i++) {
                const struct topo_gpu *g = &t->gpu[i];
                struct cluster_gpu_info *o = &ret->gpu[g->index];
                strscpy(o->uuid, g->uuid, sizeof o->uuid);
                strscpy(o->model, g->name, sizeof o->model);
                o->mem_mib = (uint32_t)MIN(g->memory_total >> 20, (uint64_t)UINT32_MAX);
                if (g->cc_major > 0 && g->cc_major < 100 && g->cc_minor >= 0 && g->cc_minor < 100)
                        snprintf(o->cc, sizeof o->cc, "%d.%d", g->cc_major, g->cc_minor);
                o->healthy = healthy[i];
                strscpy(o->health, healthy[i] ? "ok" : (reason && reason[i] && reason[i][0] ? reason[i] : "unhealthy"),
                        sizeof o->health);
                for (unsigned j = 0; j < t->n_gpus; j++)
                        ret->link[g->index][t->gpu[j].index] = t->link[i][j];
        }
        return 0;
}

/* The links, upper triangle: row i = the links from GPU i to GPUs i+1..n-1, entries split by ',',
 * rows by ';'; an NVLink pair carries its PCIe level too: "NV12/PIX". */
static char *links_text(const struct cluster_node_info *info) {
        size_t cap = (size_t)info->n_gpus * info->n_gpus * 12 + 8, n = 0;
        char *links = malloc(cap);
        if (!links)
                return NULL;
        links[0] = 0;
        for (unsigned i = 0; i + 1 < info->n_gpus; i++) {
                if (i)
                        links[n++] = ';';
                for (unsigned j = i + 1; j < info->n_gpus; j++) {
                        char b[8];
                        struct topo_link l = info->link[i][j];
                        const char *pcie = l.nvlinks && l.pcie >= TOPO_LEVEL_SYS && l.pcie <= TOPO_LEVEL_PIX
                                                   ? topo_level_name((enum topo_level)l.pcie)
                                                   : NULL;
                        int w = snprintf(links + n, cap - n, "%s%s%s%s", j > i + 1 ? "," : "", topo_link_name(l, b),
                                         pcie ? "/" : "", pcie ? pcie : "");
                        n += (size_t)w;
                }
                links[n] = 0;
        }
        return links;
}

void cluster_mig_holder(const char *ns, const char *name, char *buf, size_t len) {
        snprintf(buf, len, "%.60s/%.60s", ns ? ns : "", name ? name : "");
}

/* "mig":[{"i":0,"uuid":"MIG-…","profile":"1g.10gb","mem":9856,"health":"ok","pod":"ns/name"},…] on a GPU in
 * MIG mode (an empty list: MIG on, no instances); no "mig" key: MIG off. */
static int encode_mig(json_t *j, const struct cluster_gpu_info *g) {
        json_t *a = json_array();
        if (!a)
                return -ENOMEM;
        for (unsigned k = 0; k < g->n_mig && k < CLUSTER_MIG_MAX; k++) {
                const struct cluster_mig_info *m = &g->mig_dev[k];
                json_t *o =
                        json_pack("{s:i,s:s,s:s,s:I,s:s}", "i", (int)m->index, "uuid", m->uuid, "profile", m->profile,
                                  "mem", (json_int_t)m->mem_mib, "health", m->healthy ? "ok" : "unhealthy");
                if (!o || (m->holder[0] && json_object_set_new(o, "pod", json_string(m->holder)) < 0)) {
                        json_decref(o);
                        json_decref(a);
                        return -ENOMEM;
                }
                json_array_append_new(a, o);
        }
        return json_object_set_new(j, "mig", a) < 0 ? -ENOMEM : 0;
}

/* "sharing", "replicas" (1..max) and "held" (0..replicas: what the reader takes) of a replicated GPU, and its own
 * "replica_resource" only where it is not the node's (which then applies, for older readers too). */
static int encode_sharing(json_t *j, const struct cluster_gpu_info *g, const char *node_resource) {
        if (!g->sharing[0])
                return 0;
        unsigned reps = MAX(1u, MIN(g->replicas, (unsigned)CLUSTER_REPLICAS_MAX));
        bool own = g->replica_resource[0] && !streq(g->replica_resource, node_resource);
        if (json_object_set_new(j, "sharing", json_string(g->sharing)) < 0 ||
            json_object_set_new(j, "replicas", json_integer(reps)) < 0 ||
            json_object_set_new(j, "held", json_integer(MIN(g->held, reps))) < 0 ||
            (own && json_object_set_new(j, "replica_resource", json_string(g->replica_resource)) < 0))
                return -ENOMEM;
        return 0;
}

int cluster_node_encode(const struct cluster_node_info *info, char **ret) {
        if (info->n_gpus > CLUSTER_GPUS_MAX)
                return -E2BIG;
        json_t *o = json_object(), *gpus = json_array();
        char *links = links_text(info);
        int r = -ENOMEM;
        if (!o || !gpus || !links)
                goto out;
        json_object_set_new(o, "v", json_integer(CLUSTER_NODE_VERSION));
        if (info->driver[0])
                json_object_set_new(o, "driver", json_string(info->driver));
        if (info->cuda)
                json_object_set_new(o, "cuda", json_integer(info->cuda));
        json_object_set_new(o, "nvswitch", json_boolean(info->nvswitch));
        if (info->mig_strategy[0])
                json_object_set_new(o, "mig_strategy", json_string(info->mig_strategy));
        if (info->replica_resource[0])
                json_object_set_new(o, "replica_resource", json_string(info->replica_resource));
        for (unsigned i = 0; i < info->n_gpus; i++) {
                const struct cluster_gpu_info *g = &info->gpu[i];
                json_t *j = json_pack("{s:i,s:s,s:s,s:I}", "i", (int)i, "uuid", g->uuid, "model", g->model, "mem",
                                      (json_int_t)g->mem_mib);
                if (!j)
                        goto out;
                if (g->cc[0])
                        json_object_set_new(j, "cc", json_string(g->cc));
                json_object_set_new(j, "health",
                                    json_string(g->healthy     ? "ok"
                                                : g->health[0] ? g->health
                                                               : "unhealthy"));
                if (encode_sharing(j, g, info->replica_resource) < 0) {
                        json_decref(j);
                        goto out;
                }
                if (g->mig && encode_mig(j, g) < 0) {
                        json_decref(j);
                        goto out;
                }
                json_array_append_new(gpus, j);
        }
        json_object_set(o, "gpus", gpus);
        json_object_set_new(o, "links", json_string(links));
        char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (s && strlen(s) > CLUSTER_ANNOTATION_MAX) {
                free(s);
                r = -E2BIG;
                goto out;
        }
        *ret = s;
        r = s ? 0 : -ENOMEM;
out:
        free(links);
        json_decref(gpus);
        json_decref(o);
        return r;
}

int cluster_node_encode_topo(const struct topo *t, const bool *healthy, const char *const *reason, char **ret) {
        struct cluster_node_info *info = malloc(sizeof *info);
        if (!info)
                return -ENOMEM;
        int r = cluster_node_from_topo(t, healthy, reason, info);
        if (r >= 0)
                r = cluster_node_encode(info, ret);
        free(info);
        return r;
}

/* One entry of "links" (s[0..len)): "PIX", "NV12", "NV12/PIX". */
static int link_entry(const char *s, size_t len, struct topo_link *ret) {
        struct topo_link l, lp;
        const char *slash = memchr(s, '/', len);
        size_t first = slash ? (size_t)(slash - s) : len;
        if (topo_link_from_name(s, first, &l) < 0 || l.pcie == TOPO_LEVEL_SELF)
                return -EINVAL;
        if (slash) {
                /* the PCIe level under the NVLinks */
                if (!l.nvlinks || topo_link_from_name(slash + 1, len - first - 1, &lp) < 0 || lp.nvlinks ||
                    lp.pcie == TOPO_LEVEL_SELF)
                        return -EINVAL;
                l.pcie = lp.pcie;
        }
        *ret = l;
        return 0;
}

static int decode_links(json_t *links, struct cluster_node_info *ret, struct gs_error *err) {
        for (unsigned a = 0; a < ret->n_gpus; a++)
                for (unsigned b = 0; b < ret->n_gpus; b++)
                        ret->link[a][b] = a == b ? (struct topo_link){ TOPO_LEVEL_SELF, 0 }
                                                 : (struct topo_link){ TOPO_LEVEL_UNKNOWN, 0 };
        if (!links || json_is_null(links))
                return 0;
        if (!json_is_string(links))
                return gs_error_set(err, -EINVAL, "%s: links is not a string", CLUSTER_ANN_GPUS);
        const char *s = json_string_value(links), *end = s + json_string_length(links);
        unsigned a = 0, b = 1;
        while (s < end && ret->n_gpus > 1) {
                size_t tok = strcspn(s, ",;");
                if (s + tok > end)
                        tok = (size_t)(end - s);
                struct topo_link l;
                if (a + 1 >= ret->n_gpus || b >= ret->n_gpus || link_entry(s, tok, &l) < 0)
                        return gs_error_set(err, -EINVAL, "%s: links: bad entry at GPU %u to %u", CLUSTER_ANN_GPUS, a,
                                            b);
                ret->link[a][b] = ret->link[b][a] = l;
                s += tok;
                if (s < end && *s == ';') {
                        if (b != ret->n_gpus - 1)
                                return gs_error_set(err, -EINVAL, "%s: links: row %u too short", CLUSTER_ANN_GPUS, a);
                        a++;
                        b = a + 1;
                } else {
                        b++;
                }
                if (s < end)
                        s++;
        }
        return 0;
}

/* gpus[i].mig (absent: MIG off). */
static int decode_mig(json_t *a, size_t i, struct cluster_gpu_info *gi, struct gs_error *err) {
        if (!a)
                return 0;
        if (!json_is_array(a) || json_array_size(a) > CLUSTER_MIG_MAX)
                return gs_error_set(err, -EINVAL, "%s: gpus[%zu].mig must be an array of at most %d", CLUSTER_ANN_GPUS,
                                    i, CLUSTER_MIG_MAX);
        gi->mig = true;
        size_t k;
        json_t *o;
        json_array_foreach(a, k, o) {
                struct cluster_mig_info *m = &gi->mig_dev[gi->n_mig++];
                json_t *idx = json_object_get(o, "i"), *mem = json_object_get(o, "mem");
                char health[16];
                if (!json_is_object(o) || !json_is_integer(idx) || json_integer_value(idx) < 0 ||
                    json_integer_value(idx) > 64 || !json_is_integer(mem) || json_integer_value(mem) < 0 ||
                    json_integer_value(mem) > UINT32_MAX)
                        return gs_error_set(err, -EINVAL, "%s: gpus[%zu].mig[%zu] needs an index i and mem in MiB",
                                            CLUSTER_ANN_GPUS, i, k);
                m->index = (unsigned)json_integer_value(idx);
                m->mem_mib = (uint32_t)json_integer_value(mem);
                if (cluster_json_str(o, "uuid", m->uuid, sizeof m->uuid, "gpus[].mig[].", err) < 0 ||
                    cluster_json_str(o, "profile", m->profile, sizeof m->profile, "gpus[].mig[].", err) < 0 ||
                    cluster_json_str(o, "health", health, sizeof health, "gpus[].mig[].", err) < 0 ||
                    cluster_json_str(o, "pod", m->holder, sizeof m->holder, "gpus[].mig[].", err) < 0)
                        return -EINVAL;
                if (!m->uuid[0] || !m->profile[0])
                        return gs_error_set(err, -EINVAL, "%s: gpus[%zu].mig[%zu] needs a uuid and a profile",
                                            CLUSTER_ANN_GPUS, i, k);
                m->healthy = streq(health, "ok");
        }
        return 0;
}

/* gpus[i].sharing, .replicas, .held (absent: not replicated; an older agent), .replica_resource (absent: the node's,
 * node_resource). */
static int decode_sharing(json_t *g, size_t i, const char *node_resource, struct cluster_gpu_info *gi,
                          struct gs_error *err) {
        if (cluster_json_str(g, "sharing", gi->sharing, sizeof gi->sharing, "gpus[].", err) < 0 ||
            cluster_json_str(g, "replica_resource", gi->replica_resource, sizeof gi->replica_resource, "gpus[].", err) <
                    0)
                return -EINVAL;
        json_t *rep = json_object_get(g, "replicas"), *held = json_object_get(g, "held");
        if (!gi->sharing[0]) {
                if (rep || held || gi->replica_resource[0])
                        return gs_error_set(err, -EINVAL, "%s: gpus[%zu] has replicas without sharing",
                                            CLUSTER_ANN_GPUS, i);
                return 0;
        }
        if (!gi->replica_resource[0])
                strscpy(gi->replica_resource, node_resource, sizeof gi->replica_resource);
        if (!json_is_integer(rep) || json_integer_value(rep) < 1 || json_integer_value(rep) > CLUSTER_REPLICAS_MAX)
                return gs_error_set(err, -EINVAL, "%s: gpus[%zu].replicas must be 1..%d with sharing", CLUSTER_ANN_GPUS,
                                    i, CLUSTER_REPLICAS_MAX);
        gi->replicas = (unsigned)json_integer_value(rep);
        if (held && (!json_is_integer(held) || json_integer_value(held) < 0 ||
                     json_integer_value(held) > (json_int_t)gi->replicas))
                return gs_error_set(err, -EINVAL, "%s: gpus[%zu].held must be 0..replicas", CLUSTER_ANN_GPUS, i);
        gi->held = held ? (unsigned)json_integer_value(held) : 0;
        return 0;
}

static int decode_gpu(json_t *g, size_t i, uint64_t *seen, struct cluster_node_info *ret, struct gs_error *err) {
        json_t *idx = json_object_get(g, "i");
        json_t *mem = json_object_get(g, "mem");
        /* indices are a permutation of 0..n-1: GPU i goes to position i */
        if (!json_is_object(g) || !json_is_integer(idx) || json_integer_value(idx) < 0 ||
            json_integer_value(idx) >= (json_int_t)ret->n_gpus || (*seen >> json_integer_value(idx) & 1))
                return gs_error_set(err, -EINVAL, "%s: gpus[%zu].i must be a distinct index below %u", CLUSTER_ANN_GPUS,
                                    i, ret->n_gpus);
        unsigned at = (unsigned)json_integer_value(idx);
        *seen |= 1ULL << at;
        if (!json_is_integer(mem) || json_integer_value(mem) < 0 || json_integer_value(mem) > UINT32_MAX)
                return gs_error_set(err, -EINVAL, "%s: gpus[%zu].mem must be a MiB count", CLUSTER_ANN_GPUS, i);
        struct cluster_gpu_info *gi = &ret->gpu[at];
        gi->mem_mib = (uint32_t)json_integer_value(mem);
        if (cluster_json_str(g, "uuid", gi->uuid, sizeof gi->uuid, "gpus[].", err) < 0 ||
            cluster_json_str(g, "model", gi->model, sizeof gi->model, "gpus[].", err) < 0 ||
            cluster_json_str(g, "health", gi->health, sizeof gi->health, "gpus[].", err) < 0 ||
            cluster_json_str(g, "cc", gi->cc, sizeof gi->cc, "gpus[].", err) < 0)
                return -EINVAL;
        gi->healthy = streq(gi->health, "ok");
        if (decode_sharing(g, i, ret->replica_resource, gi, err) < 0)
                return -EINVAL;
        return decode_mig(json_object_get(g, "mig"), i, gi, err);
}

int cluster_node_decode(const char *value, size_t len, struct cluster_node_info *ret, struct gs_error *err) {
        char name[CLUSTER_NAME_MAX];
        strscpy(name, ret->name, sizeof name);
        memset(ret, 0, sizeof *ret);
        strscpy(ret->name, name, sizeof ret->name);
        json_t *j = cluster_json_load(value, len, CLUSTER_ANNOTATION_MAX, err);
        if (!j)
                return -EINVAL;
        int r = -EINVAL;
        json_t *ver = json_object_get(j, "v"), *gpus = json_object_get(j, "gpus"), *cuda = json_object_get(j, "cuda");
        json_t *nvs = json_object_get(j, "nvswitch");
        if (!json_is_object(j) || !json_is_integer(ver) || json_integer_value(ver) != CLUSTER_NODE_VERSION) {
                gs_error_set(err, -EINVAL, "%s: not a version %d object", CLUSTER_ANN_GPUS, CLUSTER_NODE_VERSION);
                goto out;
        }
        if (!json_is_array(gpus) || json_array_size(gpus) > CLUSTER_GPUS_MAX) {
                gs_error_set(err, -EINVAL, "%s: gpus must be an array of at most %d", CLUSTER_ANN_GPUS,
                             CLUSTER_GPUS_MAX);
                goto out;
        }
        if ((cuda && !(json_is_integer(cuda) && json_integer_value(cuda) >= 0 && json_integer_value(cuda) < 1000000)) ||
            (nvs && !json_is_boolean(nvs))) {
                gs_error_set(err, -EINVAL, "%s: cuda must be a version number, nvswitch a boolean", CLUSTER_ANN_GPUS);
                goto out;
        }
        if (cluster_json_str(j, "driver", ret->driver, sizeof ret->driver, "", err) < 0 ||
            cluster_json_str(j, "mig_strategy", ret->mig_strategy, sizeof ret->mig_strategy, "", err) < 0 ||
            cluster_json_str(j, "replica_resource", ret->replica_resource, sizeof ret->replica_resource, "", err) < 0)
                goto out;
        ret->cuda = cuda ? (unsigned)json_integer_value(cuda) : 0;
        ret->nvswitch = json_is_true(nvs);
        ret->n_gpus = (unsigned)json_array_size(gpus);
        uint64_t seen = 0;
        size_t i;
        json_t *g;
        json_array_foreach(gpus, i, g) {
                if (decode_gpu(g, i, &seen, ret, err) < 0)
                        goto out;
        }
        r = decode_links(json_object_get(j, "links"), ret, err);
out:
        json_decref(j);
        return r;
}

int cluster_node_decode_json(const json_t *node_json, struct cluster_node_info *ret, struct gs_error *err) {
        json_t *node = (json_t *)node_json;
        json_t *meta = json_is_object(node) ? json_object_get(node, "metadata") : NULL;
        if (!json_is_object(meta))
                return gs_error_set(err, -EINVAL, "node has no metadata");
        char name[CLUSTER_NAME_MAX];
        if (cluster_json_str(meta, "name", name, sizeof name, "metadata.", err) < 0)
                return -EINVAL;
        if (!name[0])
                return gs_error_set(err, -EINVAL, "node has no name");
        json_t *ann = json_object_get(meta, "annotations");
        json_t *v = json_is_object(ann) ? json_object_get(ann, CLUSTER_ANN_GPUS) : NULL;
        if (!v)
                return -ENOENT;
        if (!json_is_string(v))
                return gs_error_set(err, -EINVAL, "node %s: %s is not a string", name, CLUSTER_ANN_GPUS);
        strscpy(ret->name, name, sizeof ret->name);
        struct gs_error e2 = { 0 };
        if (cluster_node_decode(json_string_value(v), json_string_length(v), ret, &e2) < 0)
                return gs_error_set(err, -EINVAL, "node %s: %.159s", name, e2.message);
        return 0;
}
