/* SPDX-License-Identifier: Apache-2.0 */
/*
 * view.c — the operator page's JSON and query strings (see view.h, docs/ui.md). Reads the model,
 * never changes it (but for the topology's memoised picks); no I/O, no logging.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/view.h"
#include "util/util.h"

/* ---- query strings ---- */

static int hex_digit(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* Percent-decode s[0..n) into out (cap bytes, NUL-terminated); '+' is a space. -EINVAL for a bad
 * escape, -E2BIG when it does not fit. */
static int url_decode(const char *s, size_t n, char *out, size_t cap, size_t *ret_len) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (c == '%') {
                        if (i + 2 >= n)
                                return -EINVAL;
                        int hi = hex_digit(s[i + 1]), lo = hex_digit(s[i + 2]);
                        if (hi < 0 || lo < 0)
                                return -EINVAL;
                        c = (char)(hi << 4 | lo);
                        i += 2;
                } else if (c == '+')
                        c = ' ';
                if (k + 1 >= cap)
                        return -E2BIG;
                out[k++] = c;
        }
        out[k] = '\0';
        *ret_len = k;
        return 0;
}

/* A key as an error message may show it: printable ASCII, at most 32 bytes. */
static const char *shown(const char *s, char buf[static 40]) {
        size_t k = 0;
        for (; s[k] && k < 32; k++)
                buf[k] = s[k] >= 0x20 && s[k] < 0x7f ? s[k] : '?';
        buf[k] = '\0';
        if (s[k])
                strscpy(buf + k, "...", 4);
        return buf;
}

static bool only_chars(const char *s, size_t n, const char *extra) {
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c && strchr(extra, c))))
                        return false;
        }
        return true;
}

static bool printable_utf8(const char *s, size_t n) {
        for (size_t i = 0; i < n;) {
                unsigned char c = (unsigned char)s[i];
                if (c < 0x20 || c == 0x7f)
                        return false;
                size_t k = utf8_seq_len(s + i, n - i);
                if (k == 0)
                        return false;
                i += k;
        }
        return true;
}

enum query_key {
        Q_NODE,
        Q_NAMESPACE,
        Q_MODEL,
        Q_SINCE,
        Q_N
};
static const char *const query_keys[Q_N] = { "node", "namespace", "model", "since" };

static int query_value(struct sched_view_query *q, enum query_key k, const char *v, size_t n, struct gs_error *err) {
        const char *key = query_keys[k];
        switch (k) {
                case Q_NODE:
                        if (n >= sizeof q->node || !only_chars(v, n, "-."))
                                return gs_error_set(err, -EINVAL,
                                                    "query parameter 'node': not part of a node name (at most 253 of "
                                                    "a-z, 0-9, '-', '.')");
                        memcpy(q->node, v, n + 1);
                        return 0;
                case Q_NAMESPACE:
                        if (n >= sizeof q->ns || !only_chars(v, n, "-"))
                                return gs_error_set(err, -EINVAL,
                                                    "query parameter 'namespace': not a namespace (at most 63 of a-z, "
                                                    "0-9, '-')");
                        memcpy(q->ns, v, n + 1);
                        return 0;
                case Q_MODEL:
                        if (n > SCHED_VIEW_MAX_MODEL || !printable_utf8(v, n))
                                return gs_error_set(err, -EINVAL,
                                                    "query parameter 'model': at most %d bytes of printable UTF-8",
                                                    SCHED_VIEW_MAX_MODEL);
                        memcpy(q->model, v, n + 1);
                        return 0;
                case Q_SINCE:
                        if (n == 0)
                                return 0;
                        if (n > 20 || strspn(v, "0123456789") != n ||
                            parse_u64(v, &q->since) < 0)
                                return gs_error_set(err, -EINVAL, "query parameter 'since': not a generation number");
                        q->has_since = true;
                        return 0;
                default: return gs_error_set(err, -EINVAL, "query parameter '%s' not handled", key);
        }
}

int sched_view_query_parse(const char *query, size_t len, struct sched_view_query *ret, struct gs_error *err) {
        struct sched_view_query q = { 0 };
        bool seen[Q_N] = { false };
        if (!query)
                len = 0;
        if (len > SCHED_VIEW_MAX_QUERY)
                return gs_error_set(err, -EINVAL, "query string longer than %d bytes", SCHED_VIEW_MAX_QUERY);
        for (size_t i = 0; i < len;) {
                const char *amp = memchr(query + i, '&', len - i);
                size_t end = amp ? (size_t)(amp - query) : len;
                const char *part = query + i;
                size_t plen = end - i;
                i = end + 1;
                if (plen == 0)
                        continue; /* "a=1&&b=2", a trailing '&' */
                const char *eq = memchr(part, '=', plen);
                size_t klen = eq ? (size_t)(eq - part) : plen;
                char key[40], val[SCHED_VIEW_MAX_QUERY + 1], sb[40];
                size_t kn, vn = 0;
                int r = url_decode(part, klen, key, sizeof key, &kn);
                if (r == -E2BIG || (r == 0 && memchr(key, '\0', kn)))
                        return gs_error_set(err, -EINVAL, "unknown query parameter (known: node, namespace, model, "
                                                          "since)");
                if (r < 0)
                        return gs_error_set(err, -EINVAL, "bad %%-escape in a query parameter's name");
                enum query_key k = Q_N;
                for (int j = 0; j < Q_N; j++)
                        if (streq(key, query_keys[j]))
                                k = (enum query_key)j;
                if (k == Q_N)
                        return gs_error_set(err, -EINVAL,
                                            "unknown query parameter '%s' (known: node, namespace, model, since)",
                                            shown(key, sb));
                if (seen[k])
                        return gs_error_set(err, -EINVAL, "query parameter '%s' given twice", query_keys[k]);
                seen[k] = true;
                if (eq && url_decode(eq + 1, plen - klen - 1, val, sizeof val, &vn) < 0)
                        return gs_error_set(err, -EINVAL, "query parameter '%s': bad %%-escape", query_keys[k]);
                if (!eq)
                        val[0] = '\0';
                if (memchr(val, '\0', vn))
                        return gs_error_set(err, -EINVAL, "query parameter '%s': contains a NUL byte",
                                            query_keys[k]);
                r = query_value(&q, k, val, vn, err);
                if (r < 0)
                        return r;
        }
        *ret = q;
        return 0;
}

/* ---- pending pods: the last filter call ---- */

/* lint: long — the fold of one call in order: counts, the distinct reasons, the unfit clock, and the
 * comparison that says whether anything shown changed. */
bool sched_filter_summary_note(struct sched_filter_summary *s, const struct sched_ext_node_result *res,
                               char *const *names, size_t n, uint64_t now_ns) {
        struct sched_filter_summary was = *s;
        if (!s->first_ns)
                s->first_ns = now_ns;
        s->last_ns = now_ns;
        s->nodes = (uint32_t)n;
        s->fit = s->no_room = s->unresolvable = 0;
        s->n_reasons = 0;
        s->other_nodes = 0;
        for (size_t i = 0; i < n; i++) {
                switch (res[i].verdict) {
                        case SCHED_FIT: s->fit++; continue;
                        case SCHED_NO_ROOM: s->no_room++; break;
                        default: s->unresolvable++; break;
                }
                const char *text = res[i].reason ? res[i].reason : "";
                unsigned k = 0;
                while (k < s->n_reasons && strncmp(s->reason[k].text, text, sizeof s->reason[k].text - 1) != 0)
                        k++;
                if (k < s->n_reasons) {
                        s->reason[k].nodes++;
                } else if (s->n_reasons < SCHED_VIEW_REASONS) {
                        s->reason[k].nodes = 1;
                        strscpy(s->reason[k].text, text, sizeof s->reason[k].text);
                        strscpy(s->reason[k].node, names && names[i] ? names[i] : "", sizeof s->reason[k].node);
                        s->n_reasons++;
                } else
                        s->other_nodes++;
        }
        if (s->fit == 0 && n > 0) {
                if (!s->unfit_since_ns)
                        s->unfit_since_ns = now_ns;
        } else
                s->unfit_since_ns = 0;
        bool changed = was.nodes != s->nodes || was.fit != s->fit || was.no_room != s->no_room ||
                       was.unresolvable != s->unresolvable || was.n_reasons != s->n_reasons ||
                       was.other_nodes != s->other_nodes || !was.unfit_since_ns != !s->unfit_since_ns;
        for (unsigned k = 0; !changed && k < s->n_reasons; k++)
                changed = was.reason[k].nodes != s->reason[k].nodes || !streq(was.reason[k].text, s->reason[k].text) ||
                          !streq(was.reason[k].node, s->reason[k].node);
        return changed;
}

/* ---- the cluster document ---- */

static char ascii_lower(char c) {
        return c >= 'A' && c <= 'Z' ? (char)(c + ('a' - 'A')) : c;
}

/* needle in hay, ASCII letters compared without case */
static bool contains_ci(const char *hay, const char *needle) {
        size_t n = strlen(needle);
        if (n == 0)
                return true;
        for (const char *p = hay; *p; p++) {
                size_t i = 0;
                while (i < n && p[i] && ascii_lower(p[i]) == ascii_lower(needle[i]))
                        i++;
                if (i == n)
                        return true;
        }
        return false;
}

static const char *gpu_model(const struct sched_node *n, unsigned g) {
        return n->details ? n->details->gpu[g].model : "";
}

static const char *gpu_health(const struct sched_node *n, unsigned g) {
        return n->details && n->details->gpu[g].health[0] ? n->details->gpu[g].health
                                                           : (n->gpu[g].healthy ? "ok" : "unhealthy");
}

static bool pod_on_gpu(const struct sched_pod *p, unsigned g) {
        for (unsigned k = 0; k < p->n; k++)
                if (g < 64 && (p->c[k].assign.gpus >> g & 1))
                        return true;
        return false;
}

/* Every GPU container of p placed on a GPU n has. */
static bool pod_placed(const struct sched_pod *p, const struct sched_node *n) {
        alloc_set_t have = n->n_gpus >= 64 ? ~0ULL : (1ULL << n->n_gpus) - 1;
        for (unsigned k = 0; k < p->n; k++)
                if (!p->c[k].assign.gpus || (p->c[k].assign.gpus & ~have))
                        return false;
        return true;
}

/* "30 % · 4 GiB", "4 GiB", "30 %" */
static void share_what(unsigned core, uint64_t mem, char *buf, size_t len) {
        char m[32];
        sched_format_mib(mem, m, sizeof m);
        if (core && mem)
                snprintf(buf, len, "%u %% \xc2\xb7 %s", core, m);
        else if (core)
                snprintf(buf, len, "%u %%", core);
        else
                snprintf(buf, len, "%s", m);
}

static void set_pod_flags(json_t *o, const struct sched_pod *p) {
        json_object_set_new(o, "bound", json_boolean(p->bound));
        json_object_set_new(o, "confirmed", json_boolean(p->confirmed));
        json_object_set_new(o, "assumed", json_boolean(p->assumed));
        json_object_set_new(o, "inferred", json_boolean(p->inferred));
        json_object_set_new(o, "source", json_string(sched_source_name(p->source)));
}

static json_t *holder_json(const struct sched_pod *p, const struct sched_node *n, unsigned g) {
        uint64_t mem;
        unsigned core;
        bool whole;
        sched_pod_share(p, n, g, &mem, &core, &whole);
        char what[64];
        if (whole)
                strscpy(what, "whole GPU", sizeof what);
        else
                share_what(core, mem, what, sizeof what);
        json_t *h = json_pack("{s:s,s:s,s:s,s:I,s:i,s:s}", "kind", whole ? "whole" : "share", "namespace", p->ns,
                              "name", p->name, "memory_mib", (json_int_t)mem, "core_percent", (int)core, "what", what);
        if (h)
                set_pod_flags(h, p);
        return h;
}

struct totals {
        size_t nodes, gpus, healthy, holders, unplaced;
        uint64_t mem_total, mem_alloc, core_alloc;
};

/* The GPUs of n the filters keep, as JSON; NULL when none is kept and a filter asked for GPUs. */
static json_t *gpus_json(const struct sched_node *n, const struct sched_pod *const *pods, size_t np,
                         const struct sched_view_query *q, struct totals *t) {
        json_t *gpus = json_array();
        for (unsigned g = 0; gpus && g < n->n_gpus; g++) {
                const struct sched_gpu *u = &n->gpu[g];
                if (q->model[0] && !contains_ci(gpu_model(n, g), q->model))
                        continue;
                bool ns_hit = !q->ns[0];
                json_t *holders = json_array(), *holder = json_null();
                for (size_t i = 0; holders && i < np; i++) {
                        if (!pod_on_gpu(pods[i], g))
                                continue;
                        ns_hit |= streq(pods[i]->ns, q->ns);
                        json_t *h = holder_json(pods[i], n, g);
                        if (h && json_is_null(holder) && streq(json_string_value(json_object_get(h, "kind")), "whole"))
                                holder = json_pack("{s:s,s:s}", "namespace", pods[i]->ns, "name", pods[i]->name);
                        json_array_append_new(holders, h);
                }
                if (!ns_hit) {
                        json_decref(holders);
                        json_decref(holder);
                        continue;
                }
                uint64_t mem = u->mem_used_mib + (uint64_t)u->whole * u->mem_total_mib;
                unsigned core = u->core_used + 100u * u->whole;
                json_t *o = json_pack("{s:i,s:s,s:s,s:s,s:b,s:I,s:I,s:i,s:i,s:o,s:o}", "index", (int)g, "uuid",
                                      u->uuid ? u->uuid : "", "model", gpu_model(n, g), "health", gpu_health(n, g),
                                      "healthy", u->healthy, "memory_total_mib", (json_int_t)u->mem_total_mib,
                                      "memory_allocated_mib", (json_int_t)mem, "core_allocated_percent", (int)core,
                                      "sharers", (int)u->sharers, "whole_holder", holder, "holders", holders);
                if (!o || json_array_append_new(gpus, o) < 0) {
                        json_decref(gpus);
                        return NULL;
                }
                t->gpus++;
                t->healthy += u->healthy;
                t->holders += json_array_size(holders);
                t->mem_total += u->mem_total_mib;
                t->mem_alloc += MIN(mem, (uint64_t)u->mem_total_mib);
                t->core_alloc += MIN(core, 100u);
        }
        return gpus;
}

static json_t *request_json(json_t *o, const struct sched_container_req *c, unsigned n) {
        uint64_t mem = 0;
        unsigned core = 0, whole = 0;
        for (unsigned k = 0; k < n; k++) {
                mem += c[k].mem_mib;
                core += c[k].core;
                whole += c[k].whole;
        }
        char what[96];
        if (whole)
                snprintf(what, sizeof what, "%u whole GPU%s", whole, whole == 1 ? "" : "s");
        else
                share_what(core, mem, what, sizeof what);
        json_object_set_new(o, "memory_mib", json_integer((json_int_t)mem));
        json_object_set_new(o, "core_percent", json_integer(core));
        json_object_set_new(o, "whole_gpus", json_integer(whole));
        json_object_set_new(o, "what", json_string(what));
        return o;
}

static json_t *node_json(const struct sched_node *n, const struct sched_view_query *q, struct totals *t) {
        /* the node's list is newest first: oldest first reads better */
        size_t np = 0;
        const struct sched_pod **pods = calloc(n->n_pods ? n->n_pods : 1, sizeof *pods);
        if (!pods)
                return NULL;
        for (const struct sched_pod *p = n->pods; p && np < n->n_pods; p = p->next_on_node)
                pods[np++] = p;
        for (size_t i = 0; i < np / 2; i++) {
                const struct sched_pod *x = pods[i];
                pods[i] = pods[np - 1 - i];
                pods[np - 1 - i] = x;
        }
        json_t *gpus = gpus_json(n, pods, np, q, t), *unplaced = json_array();
        for (size_t i = 0; gpus && unplaced && i < np; i++) {
                const struct sched_pod *p = pods[i];
                if (pod_placed(p, n) || (q->ns[0] && !streq(p->ns, q->ns)))
                        continue;
                struct sched_container_req c[SCHED_MAX_CONTAINERS];
                for (unsigned k = 0; k < p->n && k < SCHED_MAX_CONTAINERS; k++)
                        c[k] = (struct sched_container_req){ .whole = p->c[k].whole,
                                                             .core = p->c[k].core,
                                                             .mem_mib = p->c[k].mem_mib };
                json_t *o = json_pack("{s:s,s:s}", "namespace", p->ns, "name", p->name);
                if (o)
                        set_pod_flags(request_json(o, c, MIN(p->n, (unsigned)SCHED_MAX_CONTAINERS)), p);
                json_array_append_new(unplaced, o);
        }
        free(pods);
        if (!gpus || !unplaced) {
                json_decref(gpus);
                json_decref(unplaced);
                return NULL;
        }
        bool filtered = q->ns[0] || q->model[0];
        if (filtered && json_array_size(gpus) == 0 && json_array_size(unplaced) == 0) {
                json_decref(gpus);
                json_decref(unplaced);
                return json_null(); /* nothing of it passes the filters */
        }
        t->nodes++;
        t->unplaced += json_array_size(unplaced);
        json_t *o = json_pack("{s:s,s:b,s:i,s:o,s:o}", "name", n->name, "published", n->published, "gpu_count",
                              (int)n->n_gpus, "gpus", gpus, "unplaced_pods", unplaced);
        if (o && n->details && n->details->driver[0])
                json_object_set_new(o, "driver", json_string(n->details->driver));
        return o;
}

static json_t *pending_json(const struct sched_view_pending *v) {
        const struct sched_pod_view *p = v->pod;
        const struct sched_filter_summary *f = v->filter;
        json_t *o = json_pack("{s:s,s:s,s:s}", "namespace", p->ns, "name", p->name, "uid", p->uid);
        if (!o)
                return NULL;
        request_json(o, p->req.c, MIN(p->req.n, (unsigned)SCHED_MAX_CONTAINERS));
        if (!f)
                return o;
        json_t *reasons = json_array();
        for (unsigned k = 0; k < f->n_reasons; k++)
                json_array_append_new(reasons, json_pack("{s:s,s:i,s:s}", "text", f->reason[k].text, "nodes",
                                                         (int)f->reason[k].nodes, "example_node", f->reason[k].node));
        json_object_set_new(o, "first_seen_ms", json_integer((json_int_t)(f->first_ns / 1000000)));
        json_object_set_new(o, "last_filter_ms", json_integer((json_int_t)(f->last_ns / 1000000)));
        json_object_set_new(o, "unschedulable_since_ms",
                            f->unfit_since_ns ? json_integer((json_int_t)(f->unfit_since_ns / 1000000)) : json_null());
        json_object_set_new(o, "nodes", json_integer(f->nodes));
        json_object_set_new(o, "fit", json_integer(f->fit));
        json_object_set_new(o, "no_room", json_integer(f->no_room));
        json_object_set_new(o, "unresolvable", json_integer(f->unresolvable));
        json_object_set_new(o, "reasons", reasons);
        json_object_set_new(o, "other_nodes", json_integer(f->other_nodes));
        return o;
}

static int node_name_cmp(const void *a, const void *b) {
        return strcmp((*(const struct sched_node *const *)a)->name, (*(const struct sched_node *const *)b)->name);
}

static int dump(json_t *root, char **ret, size_t *ret_len) {
        if (!root)
                return -ENOMEM;
        char *s = json_dumps(root, JSON_COMPACT);
        json_decref(root);
        if (!s)
                return -ENOMEM;
        *ret = s;
        *ret_len = strlen(s);
        return 0;
}

/* lint: long — the document in order: the unchanged answer, the nodes (sorted, filtered), the pending pods,
 * the totals; each step one loop. */
int sched_view_cluster(const struct sched_model *m, const struct sched_view_pending *pending, size_t n_pending,
                       const struct sched_view_query *q, const struct sched_view_state *st, char **ret,
                       size_t *ret_len) {
        if (q->has_since && q->since == st->generation)
                return dump(json_pack("{s:I,s:b}", "generation", (json_int_t)st->generation, "unchanged", 1), ret,
                            ret_len);
        size_t nn = 0, cur = 0;
        const struct sched_node **nodes = calloc(sched_model_n_nodes(m) + 1, sizeof *nodes);
        if (!nodes)
                return -ENOMEM;
        const struct sched_node *n;
        while ((n = sched_model_next_node(m, &cur)))
                if (!q->node[0] || strstr(n->name, q->node))
                        nodes[nn++] = n;
        qsort(nodes, nn, sizeof *nodes, node_name_cmp);
        struct totals t = { 0 };
        json_t *jn = json_array(), *jp = json_array();
        for (size_t i = 0; jn && i < nn; i++) {
                json_t *o = node_json(nodes[i], q, &t);
                if (!o) {
                        json_decref(jn);
                        jn = NULL;
                } else if (json_is_null(o))
                        json_decref(o);
                else
                        json_array_append_new(jn, o);
        }
        free(nodes);
        size_t shown_pending = 0;
        for (size_t i = 0; jn && jp && i < n_pending; i++) {
                if (q->ns[0] && !streq(pending[i].pod->ns, q->ns))
                        continue;
                json_t *o = pending_json(&pending[i]);
                if (!o || json_array_append_new(jp, o) < 0) {
                        json_decref(jp);
                        jp = NULL;
                }
                shown_pending++;
        }
        if (!jn || !jp) {
                json_decref(jn);
                json_decref(jp);
                return -ENOMEM;
        }
        json_t *totals = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "nodes", (json_int_t)t.nodes, "gpus",
                                   (json_int_t)t.gpus, "gpus_healthy", (json_int_t)t.healthy, "holders",
                                   (json_int_t)t.holders, "unplaced_pods", (json_int_t)t.unplaced, "memory_total_mib",
                                   (json_int_t)t.mem_total, "memory_allocated_mib", (json_int_t)t.mem_alloc,
                                   "core_allocated_percent", (json_int_t)t.core_alloc, "pending_pods",
                                   (json_int_t)shown_pending);
        json_t *filters = json_pack("{s:s,s:s,s:s}", "node", q->node, "namespace", q->ns, "model", q->model);
        return dump(json_pack("{s:I,s:b,s:I,s:o,s:o,s:o,s:o}", "generation", (json_int_t)st->generation, "ready",
                              st->ready, "time_ms", (json_int_t)(st->now_ns / 1000000), "filters", filters, "totals",
                              totals, "nodes", jn, "pending_pods", jp),
                    ret, ret_len);
}

/* ---- the topology document ---- */

static json_t *set_json(alloc_set_t set) {
        json_t *a = json_array();
        for (; a && set; set &= set - 1)
                json_array_append_new(a, json_integer(__builtin_ctzll(set)));
        return a;
}

/* The best ring of k GPUs out of `available`, for the k the page shows. */
static json_t *rings_json(struct sched_model *m, const struct sched_node *n, alloc_set_t available) {
        json_t *rings = json_array();
        unsigned have = (unsigned)__builtin_popcountll(available);
        for (unsigned k = 2; rings && k <= have; k = k < 8 ? k + 1 : k * 2) {
                alloc_set_t set;
                unsigned bw;
                if (sched_model_pick_whole(m, n, available, k, &set, &bw) < 0)
                        continue;
                json_array_append_new(rings, json_pack("{s:i,s:o,s:i}", "count", (int)k, "gpus", set_json(set),
                                                       "ring_gbps", (int)bw));
        }
        return rings;
}

int sched_view_topology(struct sched_model *m, const char *node, char **ret, size_t *ret_len) {
        const struct sched_node *n = sched_model_node(m, node);
        if (!n || !n->published || !n->topo)
                return -ENOENT;
        json_t *gpus = json_array(), *links = json_array(), *bw = json_array();
        alloc_set_t all = 0, free_whole = 0;
        for (unsigned a = 0; a < n->n_gpus; a++) {
                const struct sched_gpu *u = &n->gpu[a];
                bool free_now = u->healthy && u->whole == 0 && u->sharers == 0;
                all |= 1ULL << a;
                if (free_now)
                        free_whole |= 1ULL << a;
                json_array_append_new(gpus, json_pack("{s:i,s:s,s:b,s:b}", "index", (int)a, "model", gpu_model(n, a),
                                                      "healthy", u->healthy, "free_whole", free_now));
                json_t *row = json_array(), *brow = json_array();
                for (unsigned b = 0; b < n->n_gpus; b++) {
                        struct topo_link l = sched_node_link(n, a, b);
                        char name[8];
                        json_array_append_new(row, json_string(topo_link_name(l, name)));
                        json_array_append_new(brow, json_integer(a == b ? 0 : topo_link_bw(l)));
                }
                json_array_append_new(links, row);
                json_array_append_new(bw, brow);
        }
        return dump(json_pack("{s:s,s:o,s:o,s:o,s:o,s:o}", "node", n->name, "gpus", gpus, "links", links,
                              "bandwidth_gbps", bw, "rings", rings_json(m, n, all), "free_rings",
                              rings_json(m, n, free_whole)),
                    ret, ret_len);
}
