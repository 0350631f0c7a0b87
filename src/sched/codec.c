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

void sched_pod_view_info(const struct cluster_pod *v, struct sched_pod_info *ret) {
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
                .cpu_milli = v->cpu_milli,
                .mem_mib = v->mem_mib,
        };
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

/* Whether pod (a Pod object) asks for a preference only kube-scheduler's Score plugins honour. */
static bool pod_soft_preferences(const json_t *pod) {
        const json_t *spec = json_object_get(pod, "spec");
        const json_t *aff = json_object_get(spec, "affinity");
        static const char *const kinds[] = { "nodeAffinity", "podAffinity", "podAntiAffinity" };
        for (size_t i = 0; i < ELEMENTSOF(kinds); i++) {
                const json_t *pref = json_object_get(json_object_get(aff, kinds[i]),
                                                     "preferredDuringSchedulingIgnoredDuringExecution");
                if (json_is_array(pref) && json_array_size(pref) > 0)
                        return true;
        }
        const json_t *tsc = json_object_get(spec, "topologySpreadConstraints");
        size_t i;
        const json_t *c;
        json_array_foreach(tsc, i, c) {
                const char *w = json_string_value(json_object_get(c, "whenUnsatisfiable"));
                if (w && streq(w, "ScheduleAnyway"))
                        return true;
        }
        return false;
}

/*
 * The start of every extender request (filter/prioritize and preempt): the size bound, the parse,
 * the outer object (`what` names it in messages) and its Pod. *ret_root is the parsed document
 * whenever the body parsed, also when a later check fails, so the caller's *_done frees it.
 * 0, or -E2BIG (body too large) / -EINVAL with err filled.
 */
static int ext_request_begin(const char *body, size_t len, const char *what, const struct cluster_units *u,
                             void **ret_root, struct cluster_pod *ret_pod, struct gs_error *err) {
        *ret_root = NULL;
        if (len > SCHED_CODEC_MAX_BODY) {
                gs_error_set(err, -EINVAL, "request of %zu bytes exceeds %u", len, SCHED_CODEC_MAX_BODY);
                return -E2BIG;
        }
        json_t *j = cluster_json_load(body, len, SCHED_CODEC_MAX_BODY, err);
        if (!j)
                return -EINVAL;
        *ret_root = j;
        if (!json_is_object(j))
                return gs_error_set(err, -EINVAL, "%s is not an object", what);
        json_t *pod = json_object_get(j, "Pod");
        if (!json_is_object(pod))
                return gs_error_set(err, -EINVAL, "%s.Pod is missing", what);
        if (cluster_pod_decode_json(pod, u, ret_pod, err) < 0)
                return -EINVAL;
        return 0;
}

/* ExtenderArgs the full way, or, with plain (n_plain names read by args_decode_fast, owned by the caller
 * until this succeeds), the document whose NodeNames array was replaced by null. */
static int args_decode(const char *body, size_t len, const struct cluster_units *u, struct sched_ext_args *ret,
                       struct gs_error *err, char **plain, size_t n_plain) {
        memset(ret, 0, sizeof *ret);
        int r = ext_request_begin(body, len, "ExtenderArgs", u, &ret->root, &ret->pod, err);
        if (r < 0) {
                sched_ext_args_done(ret);
                return r;
        }
        json_t *j = ret->root;
        ret->soft_preferences = pod_soft_preferences(json_object_get(j, "Pod"));
        json_t *names = json_object_get(j, "NodeNames");
        json_t *nodes = json_object_get(j, "Nodes");
        if (plain) {
                ret->node_cache = true;
                ret->n_nodes = n_plain; /* each checked as below, by args_decode_fast */
                ret->node_names = plain;
                return 0;
        }
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
                if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= CLUSTER_NAME_MAX ||
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

/*
 * The fast path of sched_ext_args_decode: kube-scheduler sends every node's name (5,000 names are ~70 KB),
 * and building a jansson string per name cost more than deciding the nodes. The top-level NodeNames
 * array, when it holds only plain names (printable ASCII, no escape: every Kubernetes node name), is read
 * here into one block; the rest of the document, with that array replaced by null, goes through jansson
 * as before (it checks everything outside the array, duplicate keys included). Anything else (no such
 * array, an escape, a name too long or empty, too many, a document jansson refuses) returns false and the
 * caller decodes the original body the full way, so answers and error messages are the full path's.
 */
static bool json_ws(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static const char *skip_ws(const char *p, const char *end) {
        while (p < end && json_ws(*p))
                p++;
        return p;
}

/* p at '"': past the closing quote, or NULL (unterminated). Escapes are skipped, not checked (jansson
 * checks every string outside NodeNames). */
static const char *skip_string(const char *p, const char *end) {
        for (p++; p < end; p++) {
                if (*p == '\\')
                        p++;
                else if (*p == '"')
                        return p + 1;
        }
        return NULL;
}

/* Past one value at p (strings and brackets tracked, not validated), or NULL. */
static const char *skip_value(const char *p, const char *end) {
        if (p >= end)
                return NULL;
        if (*p == '"')
                return skip_string(p, end);
        if (*p == '{' || *p == '[') {
                unsigned depth = 0;
                while (p < end) {
                        if (*p == '"') {
                                p = skip_string(p, end);
                                if (!p)
                                        return NULL;
                                continue;
                        }
                        if (*p == '{' || *p == '[')
                                depth++;
                        else if ((*p == '}' || *p == ']') && --depth == 0)
                                return p + 1;
                        p++;
                }
                return NULL;
        }
        const char *v = p;
        while (p < end && !json_ws(*p) && *p != ',' && *p != '}' && *p != ']')
                p++;
        return p > v ? p : NULL;
}

/* The names of the array at p ('['): counted (ret_names NULL) or copied into pool, one NUL-terminated
 * name each. Past the array, or NULL when a name is not plain (or the array not of strings). */
static const char *plain_names(const char *p, const char *end, size_t *ret_n, char **ret_names, char *pool) {
        size_t n = 0;
        p = skip_ws(p + 1, end);
        if (p < end && *p == ']') {
                *ret_n = 0;
                return p + 1;
        }
        for (;;) {
                if (p >= end || *p != '"')
                        return NULL;
                const char *s = ++p;
                while (p < end && (unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f && *p != '"' && *p != '\\')
                        p++;
                if (p >= end || *p != '"' || p == s || (size_t)(p - s) >= CLUSTER_NAME_MAX)
                        return NULL;
                if (ret_names) {
                        memcpy(pool, s, (size_t)(p - s));
                        ret_names[n] = pool;
                        pool += p - s;
                        *pool++ = '\0';
                }
                if (++n > SCHED_CODEC_MAX_NODES)
                        return NULL;
                p = skip_ws(p + 1, end);
                if (p < end && *p == ']') {
                        *ret_n = n;
                        return p + 1;
                }
                if (p >= end || *p != ',')
                        return NULL;
                p = skip_ws(p + 1, end);
        }
}

static bool args_decode_fast(const char *body, size_t len, const struct cluster_units *u, struct sched_ext_args *ret) {
        const char *end = body + len, *p = skip_ws(body, end), *at = NULL, *past = NULL;
        size_t n = 0;
        if (p >= end || *p != '{')
                return false;
        p = skip_ws(p + 1, end);
        while (p < end && *p == '"') {
                const char *k = p;
                p = skip_string(p, end);
                if (!p)
                        return false;
                bool names = p - k == sizeof "\"NodeNames\"" - 1 && !memcmp(k, "\"NodeNames\"", (size_t)(p - k));
                p = skip_ws(p, end);
                if (p >= end || *p != ':')
                        return false;
                p = skip_ws(p + 1, end);
                if (names) {
                        if (at || p >= end || *p != '[')
                                return false; /* twice (jansson refuses it), or not an array */
                        at = p;
                        past = p = plain_names(p, end, &n, NULL, NULL);
                } else
                        p = skip_value(p, end);
                if (!p)
                        return false;
                p = skip_ws(p, end);
                if (p < end && *p == ',')
                        p = skip_ws(p + 1, end);
                else
                        break;
        }
        if (!at)
                return false;
        /* the names: pointers, then the bytes (each name and its NUL fit in its quotes) */
        size_t span = (size_t)(past - at);
        char **names = malloc((n ? n : 1) * sizeof *names + span);
        /* the rest, with null for the array */
        char *rest = malloc(len - span + 4);
        if (!names || !rest) {
                free(names);
                free(rest);
                return false;
        }
        (void)plain_names(at, end, &n, names, (char *)(names + (n ? n : 1)));
        size_t head = (size_t)(at - body);
        memcpy(rest, body, head);
        static const char null_value[4] = { 'n', 'u', 'l', 'l' }; /* no NUL: the text goes on */
        memcpy(rest + head, null_value, sizeof null_value);
        memcpy(rest + head + 4, past, (size_t)(end - past));
        struct gs_error err = { 0 };
        int r = args_decode(rest, len - span + 4, u, ret, &err, names, n);
        free(rest);
        if (r < 0) { /* the full path says what it makes of the original */
                free(names);
                return false;
        }
        return true;
}

int sched_ext_args_decode(const char *body, size_t len, const struct cluster_units *u, struct sched_ext_args *ret,
                          struct gs_error *err) {
        if (body && len <= SCHED_CODEC_MAX_BODY && args_decode_fast(body, len, u, ret))
                return 0;
        return args_decode(body, len, u, ret, err, NULL, 0);
}

int sched_ext_args_decode_full(const char *body, size_t len, const struct cluster_units *u, struct sched_ext_args *ret,
                               struct gs_error *err) {
        return args_decode(body, len, u, ret, err, NULL, 0);
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

/* The replies that list every node are written by hand into util's buffer, since building thousands of
 * jansson values per call cost more than the decisions themselves. */

static void out_failures(struct gs_buf *o, const struct sched_ext_args *a, const struct sched_ext_node_result *res,
                         bool unresolvable_only) {
        bool first = true;
        GS_BUF_LIT(o, "{");
        for (size_t i = 0; res && i < a->n_nodes; i++) {
                if (res[i].verdict == SCHED_FIT || (unresolvable_only && res[i].verdict != SCHED_UNRESOLVABLE))
                        continue;
                if (!first)
                        GS_BUF_LIT(o, ",");
                first = false;
                gs_buf_json_string(o, a->node_names[i]);
                GS_BUF_LIT(o, ":");
                gs_buf_json_string(o, res[i].reason ? res[i].reason : "does not fit");
        }
        GS_BUF_LIT(o, "}");
}

int sched_ext_filter_encode(const struct sched_ext_args *a, const struct sched_ext_node_result *res, const char *error,
                            char **ret, size_t *ret_len) {
        struct gs_buf o = { 0 };
        if (error)
                res = NULL;
        GS_BUF_LIT(&o, "{\"Error\":");
        gs_buf_json_string(&o, error ? error : "");
        /* kube-scheduler 1.20 knows only FailedNodes; later ones let FailedAndUnresolvableNodes
         * win, so an unresolvable node goes in both */
        GS_BUF_LIT(&o, ",\"FailedNodes\":");
        out_failures(&o, a, res, false);
        GS_BUF_LIT(&o, ",\"FailedAndUnresolvableNodes\":");
        out_failures(&o, a, res, true);
        if (!error && a->node_cache) {
                GS_BUF_LIT(&o, ",\"NodeNames\":[");
                bool first = true;
                for (size_t i = 0; i < a->n_nodes; i++) {
                        if (res[i].verdict != SCHED_FIT)
                                continue;
                        if (!first)
                                GS_BUF_LIT(&o, ",");
                        first = false;
                        gs_buf_json_string(&o, a->node_names[i]);
                }
                GS_BUF_LIT(&o, "],\"Nodes\":null}");
        } else if (!error) {
                /* full Node objects come back as they were sent */
                GS_BUF_LIT(&o, ",\"NodeNames\":null,\"Nodes\":{\"metadata\":{},\"items\":[");
                bool first = true;
                for (size_t i = 0; i < a->n_nodes; i++) {
                        if (res[i].verdict != SCHED_FIT)
                                continue;
                        char *t = json_dumps(json_array_get(a->nodes_items, i), JSON_COMPACT);
                        if (!t) {
                                o.no_mem = true;
                                break;
                        }
                        if (!first)
                                GS_BUF_LIT(&o, ",");
                        first = false;
                        gs_buf_puts(&o, t);
                        free(t);
                }
                GS_BUF_LIT(&o, "]}}");
        } else {
                GS_BUF_LIT(&o, ",\"NodeNames\":null,\"Nodes\":null}");
        }
        return gs_buf_finish(&o, ret, ret_len);
}

int sched_ext_prioritize_encode(char *const *names, const int *scores, size_t n, char **ret, size_t *ret_len) {
        struct gs_buf o = { 0 };
        GS_BUF_LIT(&o, "[");
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
                gs_buf_puts(&o, i ? ",{\"Host\":" : "{\"Host\":");
                gs_buf_json_string(&o, names[i]);
                gs_buf_append(&o, num, (size_t)l);
        }
        GS_BUF_LIT(&o, "]");
        return gs_buf_finish(&o, ret, ret_len);
}

int sched_ext_bind_decode(const char *body, size_t len, struct sched_ext_bind_args *ret, struct gs_error *err) {
        memset(ret, 0, sizeof *ret);
        json_t *j = cluster_json_load(body, len, SCHED_CODEC_MAX_BODY, err);
        if (!j)
                return -EINVAL;
        int r = -EINVAL;
        if (!json_is_object(j)) {
                gs_error_set(err, -EINVAL, "ExtenderBindingArgs is not an object");
                goto out;
        }
        if (cluster_json_str(j, "PodName", ret->pod_name, sizeof ret->pod_name, "", err) < 0 ||
            cluster_json_str(j, "PodNamespace", ret->pod_namespace, sizeof ret->pod_namespace, "", err) < 0 ||
            cluster_json_str(j, "PodUID", ret->pod_uid, sizeof ret->pod_uid, "", err) < 0 ||
            cluster_json_str(j, "Node", ret->node, sizeof ret->node, "", err) < 0)
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

int sched_ext_preempt_decode(const char *body, size_t len, const struct cluster_units *u,
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
                if (!key[0] || strlen(key) >= CLUSTER_NAME_MAX) {
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
        struct gs_buf o = { 0 };
        GS_BUF_LIT(&o, "{\"NodeNameToMetaVictims\":{");
        bool first = true;
        for (size_t i = 0; i < a->n_nodes; i++) {
                const struct sched_ext_victims *x = &a->nodes[i];
                if (!keep[i])
                        continue;
                if (!first)
                        GS_BUF_LIT(&o, ",");
                first = false;
                gs_buf_json_string(&o, x->node);
                GS_BUF_LIT(&o, ":{\"Pods\":[");
                for (size_t k = 0; k < x->n_uids; k++) {
                        gs_buf_puts(&o, k ? ",{\"UID\":" : "{\"UID\":");
                        gs_buf_json_string(&o, x->uids[k]);
                        GS_BUF_LIT(&o, "}");
                }
                char num[48];
                int l = snprintf(num, sizeof num, "],\"NumPDBViolations\":%lld}", x->pdb_violations);
                gs_buf_append(&o, num, (size_t)l);
        }
        GS_BUF_LIT(&o, "}}");
        return gs_buf_finish(&o, ret, ret_len);
}

/* ---- snapshot ---- */

int sched_snapshot_load(struct sched_model *m, const char *text, size_t len, const struct cluster_units *u,
                        size_t *ret_nodes, size_t *ret_pods, struct gs_error *err) {
        json_t *j = cluster_json_load(text, len, SCHED_CODEC_MAX_SNAPSHOT, err);
        if (!j)
                return -EINVAL;
        int r = -EINVAL;
        size_t nn = 0, np = 0;
        struct cluster_node_info *info = malloc(sizeof *info);
        struct cluster_pod *pv = malloc(sizeof *pv);
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
                int q = cluster_node_decode_json(o, info, err);
                if (q == -ENOENT)
                        continue;
                if (q < 0)
                        goto out;
                uint64_t cpu, mem;
                struct gs_error e2 = { 0 };
                if (cluster_node_allocatable(o, &cpu, &mem, &e2) < 0) {
                        gs_error_set(err, -EINVAL, "nodes[%zu]: %.199s", i, e2.message);
                        goto out;
                }
                q = sched_model_set_node(m, info);
                if (q == 0) /* what kube-scheduler's own filter reads: the packing policies' CPU and memory */
                        q = sched_model_set_node_resources(m, info->name, cpu, mem, NULL);
                if (q < 0) {
                        r = q;
                        goto out;
                }
                nn++;
        }
        json_array_foreach(pods, i, o) {
                struct gs_error e2 = { 0 };
                if (cluster_pod_decode_json(o, u, pv, &e2) < 0) {
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
