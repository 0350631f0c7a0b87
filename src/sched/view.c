/* SPDX-License-Identifier: Apache-2.0 */
/*
 * view.c — the cluster model's one JSON writer (the operator page's API and `gpuslice inspect --json`,
 * docs/cluster.md) and the page's query strings (see view.h, docs/ui.md). Reads the model, never changes it
 * (but for the topology's memoised picks); no I/O, no logging.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/view.h"
#include "util/util.h"

/* ---- query strings ---- */

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

enum query_key {
        Q_NODE,
        Q_NAMESPACE,
        Q_MODEL,
        Q_SINCE,
        Q_OFFSET,
        Q_LIMIT,
        Q_N
};
static const char *const query_keys[Q_N] = { "node", "namespace", "model", "since", "offset", "limit" };
#define KNOWN_KEYS "node, namespace, model, since, offset, limit"

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
                        if (n > SCHED_VIEW_MAX_MODEL || !utf8_printable(v, n))
                                return gs_error_set(err, -EINVAL,
                                                    "query parameter 'model': at most %d bytes of printable UTF-8",
                                                    SCHED_VIEW_MAX_MODEL);
                        memcpy(q->model, v, n + 1);
                        return 0;
                case Q_SINCE:
                        if (n == 0)
                                return 0;
                        if (n > 20 || strspn(v, "0123456789") != n || parse_u64(v, &q->since) < 0)
                                return gs_error_set(err, -EINVAL, "query parameter 'since': not a generation number");
                        q->has_since = true;
                        return 0;
                case Q_OFFSET:
                case Q_LIMIT: {
                        unsigned num = 0;
                        if (n > 0 && (strspn(v, "0123456789") != n || parse_uint(v, SCHED_VIEW_MAX_NODES, &num) < 0))
                                return gs_error_set(err, -EINVAL, "query parameter '%s': not a number of nodes (0..%d)",
                                                    key, SCHED_VIEW_MAX_NODES);
                        if (k == Q_OFFSET)
                                q->offset = num;
                        else
                                q->limit = num;
                        return 0;
                }
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
                        return gs_error_set(err, -EINVAL, "unknown query parameter (known: " KNOWN_KEYS ")");
                if (r < 0)
                        return gs_error_set(err, -EINVAL, "bad %%-escape in a query parameter's name");
                enum query_key k = Q_N;
                for (int j = 0; j < Q_N; j++)
                        if (streq(key, query_keys[j]))
                                k = (enum query_key)j;
                if (k == Q_N)
                        return gs_error_set(err, -EINVAL, "unknown query parameter '%s' (known: " KNOWN_KEYS ")",
                                            shown(key, sb));
                if (seen[k])
                        return gs_error_set(err, -EINVAL, "query parameter '%s' given twice", query_keys[k]);
                seen[k] = true;
                if (eq && url_decode(eq + 1, plen - klen - 1, val, sizeof val, &vn) < 0)
                        return gs_error_set(err, -EINVAL, "query parameter '%s': bad %%-escape", query_keys[k]);
                if (!eq)
                        val[0] = '\0';
                if (memchr(val, '\0', vn))
                        return gs_error_set(err, -EINVAL, "query parameter '%s': contains a NUL byte", query_keys[k]);
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
        if (sched_pod_mig_only(p, n))
                return true; /* MIG devices: the annotation names their holders */
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

/* ---- the cluster document is written straight into one buffer (at 1,000 nodes the document is MBs, and
 * it is written under the server's lock; a tree of jansson values took 10x as long). Strings go through
 * gs_buf_json_string: escaped as JSON wants, bytes that are not UTF-8 as U+FFFD. ---- */

static void jw_int(struct gs_buf *w, int64_t v) {
        char b[24];
        int n = snprintf(b, sizeof b, "%lld", (long long)v);
        gs_buf_append(w, b, (size_t)n);
}

static void jw_bool(struct gs_buf *w, bool v) {
        if (v)
                GS_BUF_LIT(w, "true");
        else
                GS_BUF_LIT(w, "false");
}

/* ,"key": then the value (keys are literals that need no escaping) */
#define JW_KEY(w, key) GS_BUF_LIT(w, ",\"" key "\":")

static void pod_flags(struct gs_buf *w, const struct sched_pod *p) {
        JW_KEY(w, "bound");
        jw_bool(w, p->bound);
        JW_KEY(w, "confirmed");
        jw_bool(w, p->confirmed);
        JW_KEY(w, "assumed");
        jw_bool(w, p->assumed);
        JW_KEY(w, "inferred");
        jw_bool(w, p->inferred);
        JW_KEY(w, "source");
        gs_buf_json_string(w, cluster_source_name(p->source));
}

static void ns_name(struct gs_buf *w, const char *ns, const char *name) {
        GS_BUF_LIT(w, "{\"namespace\":");
        gs_buf_json_string(w, ns);
        JW_KEY(w, "name");
        gs_buf_json_string(w, name);
}

static void holder_json(struct gs_buf *w, enum sched_view_doc doc, const struct sched_pod *p,
                        const struct sched_node *n, unsigned g) {
        uint64_t mem;
        unsigned core;
        bool whole;
        sched_pod_share(p, n, g, &mem, &core, &whole);
        char what[64];
        if (whole)
                strscpy(what, "whole GPU", sizeof what);
        else
                share_what(core, mem, what, sizeof what);
        ns_name(w, p->ns, p->name);
        JW_KEY(w, "kind");
        gs_buf_json_string(w, whole ? "whole" : "share");
        if (doc == SCHED_VIEW_DOC_INSPECT) { /* inspect's readers had it before kind; the page reads kind */
                JW_KEY(w, "whole");
                jw_bool(w, whole);
        }
        JW_KEY(w, "memory_mib");
        jw_int(w, (int64_t)mem);
        JW_KEY(w, "core_percent");
        jw_int(w, core);
        JW_KEY(w, "what");
        gs_buf_json_string(w, what);
        pod_flags(w, p);
        GS_BUF_LIT(w, "}");
}

struct totals {
        size_t nodes, gpus, healthy, holders, unplaced;
        uint64_t mem_total, mem_alloc, core_alloc;
};

/* What one node shows: its pods oldest first (the node's list is newest first). */
struct node_pods {
        size_t n;
        const struct sched_pod **p;
};

static int node_pods(const struct sched_node *n, struct node_pods *ret) {
        ret->n = 0;
        ret->p = calloc(n->n_pods ? n->n_pods : 1, sizeof *ret->p);
        if (!ret->p)
                return -ENOMEM;
        for (const struct sched_pod *p = n->pods; p && ret->n < n->n_pods; p = p->next_on_node)
                ret->p[ret->n++] = p;
        for (size_t i = 0; i < ret->n / 2; i++) {
                const struct sched_pod *x = ret->p[i];
                ret->p[i] = ret->p[ret->n - 1 - i];
                ret->p[ret->n - 1 - i] = x;
        }
        return 0;
}

/* Whether GPU g passes the model and namespace filters; *ret_holders: pods on it. */
static bool gpu_kept(const struct sched_node *n, unsigned g, const struct node_pods *np,
                     const struct sched_view_query *q, size_t *ret_holders) {
        size_t holders = 0;
        bool ns_hit = !q->ns[0];
        for (size_t i = 0; i < np->n; i++)
                if (pod_on_gpu(np->p[i], g)) {
                        holders++;
                        ns_hit |= streq(np->p[i]->ns, q->ns);
                }
        *ret_holders = holders;
        return ns_hit && (!q->model[0] || contains_ci(gpu_model(n, g), q->model));
}

static bool unplaced_kept(const struct sched_pod *p, const struct sched_node *n, const struct sched_view_query *q) {
        return !pod_placed(p, n) && (!q->ns[0] || streq(p->ns, q->ns));
}

/* The memory and compute handed out on a GPU (a whole GPU counts all of it). */
static void gpu_use(const struct sched_gpu *u, uint64_t *ret_mem, unsigned *ret_core) {
        *ret_mem = u->mem_used_mib + (uint64_t)u->whole * u->mem_total_mib;
        *ret_core = u->core_used + 100u * u->whole;
}

/* Whether node n shows under q (a filter on GPUs hides a node none of whose GPUs or unplaced pods
 * pass), its share of the totals added to t. */
static bool node_count(const struct sched_node *n, const struct node_pods *np, const struct sched_view_query *q,
                       struct totals *t) {
        size_t kept = 0, unplaced = 0;
        for (unsigned g = 0; g < n->n_gpus; g++) {
                size_t holders;
                if (!gpu_kept(n, g, np, q, &holders))
                        continue;
                const struct sched_gpu *u = &n->gpu[g];
                uint64_t mem;
                unsigned core;
                gpu_use(u, &mem, &core);
                kept++;
                t->gpus++;
                t->healthy += u->healthy;
                t->holders += holders;
                t->mem_total += u->mem_total_mib;
                t->mem_alloc += MIN(mem, (uint64_t)u->mem_total_mib);
                t->core_alloc += MIN(core, 100u);
        }
        for (size_t i = 0; i < np->n; i++)
                unplaced += unplaced_kept(np->p[i], n, q);
        if ((q->ns[0] || q->model[0]) && !kept && !unplaced)
                return false;
        t->nodes++;
        t->unplaced += unplaced;
        return true;
}

/* A GPU: its identity and health, what is handed out on it (mem, core: the page counts the model's, inspect what
 * the assignments record), its holders (those of pods[0..n_pods) on it, oldest first) under "holders" on
 * the page and "pods" in inspect's document, and the caller's fields (x). */
static void gpu_json(struct gs_buf *w, enum sched_view_doc doc, const struct sched_node *n, unsigned g,
                     const struct sched_pod *const *pods, size_t n_pods, uint64_t mem, unsigned core,
                     const struct sched_view_extra *x) {
        const struct sched_gpu *u = &n->gpu[g];
        GS_BUF_LIT(w, "{\"index\":");
        jw_int(w, g);
        JW_KEY(w, "uuid");
        gs_buf_json_string(w, u->uuid ? u->uuid : "");
        JW_KEY(w, "model");
        gs_buf_json_string(w, gpu_model(n, g));
        JW_KEY(w, "health");
        gs_buf_json_string(w, gpu_health(n, g));
        JW_KEY(w, "healthy");
        jw_bool(w, u->healthy);
        JW_KEY(w, "memory_total_mib");
        jw_int(w, u->mem_total_mib);
        JW_KEY(w, "memory_allocated_mib");
        jw_int(w, (int64_t)mem);
        JW_KEY(w, "core_allocated_percent");
        jw_int(w, core);
        JW_KEY(w, "sharers");
        jw_int(w, u->sharers);
        if (n->details && n->details->gpu[g].sharing[0]) { /* replicated (docs/cluster.md): kubelet places them */
                JW_KEY(w, "sharing");
                gs_buf_json_string(w, n->details->gpu[g].sharing);
                JW_KEY(w, "replicas");
                jw_int(w, n->details->gpu[g].replicas);
                JW_KEY(w, "replicas_held");
                jw_int(w, n->details->gpu[g].held);
        }
        const struct sched_pod *whole = NULL;
        if (doc == SCHED_VIEW_DOC_PAGE)
                JW_KEY(w, "holders");
        else
                JW_KEY(w, "pods");
        GS_BUF_LIT(w, "[");
        for (size_t i = 0, k = 0; i < n_pods; i++) {
                const struct sched_pod *p = pods[i];
                if (!pod_on_gpu(p, g))
                        continue;
                if (k++)
                        GS_BUF_LIT(w, ",");
                holder_json(w, doc, p, n, g);
                uint64_t m;
                unsigned c;
                bool is_whole;
                sched_pod_share(p, n, g, &m, &c, &is_whole);
                if (is_whole && !whole)
                        whole = p;
        }
        GS_BUF_LIT(w, "]");
        JW_KEY(w, "whole_holder");
        if (whole) {
                ns_name(w, whole->ns, whole->name);
                GS_BUF_LIT(w, "}");
        } else
                GS_BUF_LIT(w, "null");
        if (x && x->gpu)
                x->gpu(w, n->name, g, x->userdata);
        GS_BUF_LIT(w, "}");
}

/* What a pod asks: the sums of its GPU containers, its MIG devices per profile, and a line saying it. */
static void request_json(struct gs_buf *w, const struct cluster_container_req *c, unsigned n,
                         const struct cluster_mig_req *mig, unsigned n_mig, bool with_what) {
        uint64_t mem = 0;
        unsigned core = 0, whole = 0;
        for (unsigned k = 0; k < n; k++) {
                mem += c[k].mem_mib;
                core += c[k].core;
                whole += c[k].whole;
        }
        char what[96] = "";
        if (whole)
                snprintf(what, sizeof what, "%u whole GPU%s", whole, whole == 1 ? "" : "s");
        else if (n)
                share_what(core, mem, what, sizeof what);
        for (unsigned k = 0; k < n_mig; k++) {
                size_t at = strlen(what);
                snprintf(what + at, sizeof what - at, "%s%u MIG %s", at ? ", " : "", mig[k].count, mig[k].profile);
        }
        JW_KEY(w, "memory_mib");
        jw_int(w, (int64_t)mem);
        JW_KEY(w, "core_percent");
        jw_int(w, core);
        JW_KEY(w, "whole_gpus");
        jw_int(w, whole);
        JW_KEY(w, "mig_devices");
        GS_BUF_LIT(w, "{");
        for (unsigned k = 0; k < n_mig; k++) {
                if (k)
                        GS_BUF_LIT(w, ",");
                gs_buf_json_string(w, mig[k].profile);
                GS_BUF_LIT(w, ":");
                jw_int(w, mig[k].count);
        }
        GS_BUF_LIT(w, "}");
        if (with_what) {
                JW_KEY(w, "what");
                gs_buf_json_string(w, what);
        }
}

static void unplaced_json(struct gs_buf *w, const struct sched_pod *p) {
        struct cluster_container_req c[CLUSTER_CONTAINERS_MAX];
        unsigned n = MIN(p->n, (unsigned)CLUSTER_CONTAINERS_MAX);
        for (unsigned k = 0; k < n; k++)
                c[k] = (struct cluster_container_req){ .whole = p->c[k].whole,
                                                       .core = p->c[k].core,
                                                       .mem_mib = p->c[k].mem_mib };
        ns_name(w, p->ns, p->name);
        request_json(w, c, n, p->mig, MIN(p->n_mig, (unsigned)CLUSTER_MIG_REQ_MAX), true);
        pod_flags(w, p);
        GS_BUF_LIT(w, "}");
}

/* A node's object up to its GPUs: name, published, the caller's error text (inspect: why it publishes no
 * GPUs), gpu_count, driver; n NULL: a node the model does not hold. */
static void node_head(struct gs_buf *w, const char *name, bool published, const char *error,
                      const struct sched_node *n) {
        GS_BUF_LIT(w, "{\"name\":");
        gs_buf_json_string(w, name);
        JW_KEY(w, "published");
        jw_bool(w, published);
        if (error) {
                JW_KEY(w, "error");
                gs_buf_json_string(w, error);
        }
        JW_KEY(w, "gpu_count");
        jw_int(w, n && published ? n->n_gpus : 0);
        if (published && n && n->details && n->details->driver[0]) {
                JW_KEY(w, "driver");
                gs_buf_json_string(w, n->details->driver);
        }
}

/* A node that shows under q, with the GPUs and unplaced pods that pass its filters. */
static void node_json(struct gs_buf *w, const struct sched_node *n, const struct node_pods *np,
                      const struct sched_view_query *q) {
        node_head(w, n->name, n->published, NULL, n);
        JW_KEY(w, "gpus");
        GS_BUF_LIT(w, "[");
        for (unsigned g = 0, k = 0; g < n->n_gpus; g++) {
                size_t holders;
                if (!gpu_kept(n, g, np, q, &holders))
                        continue;
                if (k++)
                        GS_BUF_LIT(w, ",");
                uint64_t mem;
                unsigned core;
                gpu_use(&n->gpu[g], &mem, &core);
                gpu_json(w, SCHED_VIEW_DOC_PAGE, n, g, np->p, np->n, mem, core, NULL);
        }
        GS_BUF_LIT(w, "]");
        JW_KEY(w, "unplaced_pods");
        GS_BUF_LIT(w, "[");
        for (size_t i = 0, k = 0; i < np->n; i++) {
                if (!unplaced_kept(np->p[i], n, q))
                        continue;
                if (k++)
                        GS_BUF_LIT(w, ",");
                unplaced_json(w, np->p[i]);
        }
        GS_BUF_LIT(w, "]}");
}

/* A pending pod: who, what it asks; on the page also its uid, the line saying what it asks and what the last
 * filter said of it (v->filter). */
static void pending_json(struct gs_buf *w, enum sched_view_doc doc, const struct sched_view_pending *v) {
        const struct cluster_pod *p = v->pod;
        const struct sched_filter_summary *f = doc == SCHED_VIEW_DOC_PAGE ? v->filter : NULL;
        ns_name(w, p->ns, p->name);
        if (doc == SCHED_VIEW_DOC_PAGE) {
                JW_KEY(w, "uid");
                gs_buf_json_string(w, p->uid);
        }
        request_json(w, p->req.c, MIN(p->req.n, (unsigned)CLUSTER_CONTAINERS_MAX), p->req.mig,
                     MIN(p->req.n_mig, (unsigned)CLUSTER_MIG_REQ_MAX), doc == SCHED_VIEW_DOC_PAGE);
        if (f) {
                JW_KEY(w, "first_seen_ms");
                jw_int(w, (int64_t)(f->first_ns / 1000000));
                JW_KEY(w, "last_filter_ms");
                jw_int(w, (int64_t)(f->last_ns / 1000000));
                JW_KEY(w, "unschedulable_since_ms");
                if (f->unfit_since_ns)
                        jw_int(w, (int64_t)(f->unfit_since_ns / 1000000));
                else
                        GS_BUF_LIT(w, "null");
                JW_KEY(w, "nodes");
                jw_int(w, f->nodes);
                JW_KEY(w, "fit");
                jw_int(w, f->fit);
                JW_KEY(w, "no_room");
                jw_int(w, f->no_room);
                JW_KEY(w, "unresolvable");
                jw_int(w, f->unresolvable);
                JW_KEY(w, "reasons");
                GS_BUF_LIT(w, "[");
                for (unsigned k = 0; k < f->n_reasons; k++) {
                        if (k)
                                GS_BUF_LIT(w, ",");
                        GS_BUF_LIT(w, "{\"text\":");
                        gs_buf_json_string(w, f->reason[k].text);
                        JW_KEY(w, "nodes");
                        jw_int(w, f->reason[k].nodes);
                        JW_KEY(w, "example_node");
                        gs_buf_json_string(w, f->reason[k].node);
                        GS_BUF_LIT(w, "}");
                }
                GS_BUF_LIT(w, "]");
                JW_KEY(w, "other_nodes");
                jw_int(w, f->other_nodes);
        }
        GS_BUF_LIT(w, "}");
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

/* The nodes that show, sorted by name, counted into t; the window of them written to w. */
static int nodes_json(struct gs_buf *w, const struct sched_model *m, const struct sched_view_query *q,
                      struct totals *t) {
        size_t nn = 0, cur = 0;
        const struct sched_node **nodes = calloc(sched_model_n_nodes(m) + 1, sizeof *nodes);
        if (!nodes)
                return -ENOMEM;
        const struct sched_node *n;
        while ((n = sched_model_next_node(m, &cur)))
                if (!q->node[0] || strstr(n->name, q->node))
                        nodes[nn++] = n;
        qsort(nodes, nn, sizeof *nodes, node_name_cmp);
        uint64_t end = q->limit ? (uint64_t)q->offset + q->limit : UINT64_MAX;
        int r = 0;
        GS_BUF_LIT(w, "[");
        for (size_t i = 0, k = 0; i < nn; i++) {
                struct node_pods np;
                if ((r = node_pods(nodes[i], &np)) < 0)
                        break;
                size_t index = t->nodes;
                if (node_count(nodes[i], &np, q, t) && index >= q->offset && index < end) {
                        if (k++)
                                GS_BUF_LIT(w, ",");
                        node_json(w, nodes[i], &np, q);
                }
                free(np.p);
        }
        GS_BUF_LIT(w, "]");
        free(nodes);
        return r;
}

/* lint: long — the document in order: the unchanged answer, the nodes (sorted, filtered, the window), the pending
 * pods, the totals; each a call or a loop of plain writes. */
int sched_view_cluster(const struct sched_model *m, const struct sched_view_pending *pending, size_t n_pending,
                       const struct sched_view_query *q, const struct sched_view_state *st, char **ret,
                       size_t *ret_len) {
        struct gs_buf w = { 0 };
        GS_BUF_LIT(&w, "{\"generation\":");
        jw_int(&w, (int64_t)st->generation);
        if (q->has_since && q->since == st->generation) {
                GS_BUF_LIT(&w, ",\"unchanged\":true}");
                return gs_buf_finish(&w, ret, ret_len);
        }
        JW_KEY(&w, "ready");
        jw_bool(&w, st->ready);
        JW_KEY(&w, "time_ms");
        jw_int(&w, (int64_t)(st->now_ns / 1000000));
        GS_BUF_LIT(&w, ",\"filters\":{\"node\":");
        gs_buf_json_string(&w, q->node);
        JW_KEY(&w, "namespace");
        gs_buf_json_string(&w, q->ns);
        JW_KEY(&w, "model");
        gs_buf_json_string(&w, q->model);
        GS_BUF_LIT(&w, "},\"offset\":");
        jw_int(&w, q->offset);
        JW_KEY(&w, "nodes");
        struct totals t = { 0 };
        if (nodes_json(&w, m, q, &t) < 0)
                w.no_mem = true;
        JW_KEY(&w, "pending_pods");
        GS_BUF_LIT(&w, "[");
        size_t shown = 0, unschedulable = 0;
        for (size_t i = 0; i < n_pending; i++) {
                if (q->ns[0] && !streq(pending[i].pod->ns, q->ns))
                        continue;
                if (shown++)
                        GS_BUF_LIT(&w, ",");
                pending_json(&w, SCHED_VIEW_DOC_PAGE, &pending[i]);
                unschedulable += pending[i].filter && pending[i].filter->unfit_since_ns;
        }
        GS_BUF_LIT(&w, "]");
        static const char *const names[] = { "nodes",
                                             "gpus",
                                             "gpus_healthy",
                                             "holders",
                                             "unplaced_pods",
                                             "memory_total_mib",
                                             "memory_allocated_mib",
                                             "core_allocated_percent",
                                             "pending_pods",
                                             "unschedulable_pods" };
        const uint64_t vals[] = { t.nodes,     t.gpus,      t.healthy,    t.holders, t.unplaced,
                                  t.mem_total, t.mem_alloc, t.core_alloc, shown,     unschedulable };
        GS_BUF_LIT(&w, ",\"totals\":{");
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                if (i)
                        GS_BUF_LIT(&w, ",");
                gs_buf_json_string(&w, names[i]);
                GS_BUF_LIT(&w, ":");
                jw_int(&w, (int64_t)vals[i]);
        }
        GS_BUF_LIT(&w, "}}");
        return gs_buf_finish(&w, ret, ret_len);
}

/* lint: long — inspect's document in order: each listed node (its head, its GPUs as the assignments record them,
 * its unplaced pods), then the pending pods; each a call or a loop of plain writes. */
int sched_view_inspect(const struct sched_model *m, const struct sched_view_listed *nodes, size_t n_nodes,
                       const struct sched_view_pending *pending, size_t n_pending, const struct sched_view_extra *x,
                       char **ret, size_t *ret_len) {
        struct gs_buf w = { 0 };
        GS_BUF_LIT(&w, "{\"nodes\":[");
        for (size_t i = 0; i < n_nodes; i++) {
                const struct sched_view_listed *ln = &nodes[i];
                const struct sched_node *n = ln->published ? sched_model_node(m, ln->name) : NULL;
                struct sched_node_records rec = { 0 };
                if (n && sched_node_records(n, &rec) < 0) {
                        gs_buf_done(&w);
                        return -ENOMEM;
                }
                if (i)
                        GS_BUF_LIT(&w, ",");
                node_head(&w, ln->name, ln->published && n, ln->published ? NULL : ln->error, n);
                JW_KEY(&w, "gpus");
                GS_BUF_LIT(&w, "[");
                for (unsigned g = 0; n && g < n->n_gpus; g++) {
                        if (g)
                                GS_BUF_LIT(&w, ",");
                        gpu_json(&w, SCHED_VIEW_DOC_INSPECT, n, g, rec.gpu[g].pods, rec.gpu[g].n_pods,
                                 rec.gpu[g].mem_mib, rec.gpu[g].core, x);
                }
                GS_BUF_LIT(&w, "]");
                JW_KEY(&w, "unplaced_pods");
                GS_BUF_LIT(&w, "[");
                for (unsigned k = 0; k < rec.n_unplaced; k++) {
                        if (k)
                                GS_BUF_LIT(&w, ",");
                        unplaced_json(&w, rec.unplaced[k]);
                }
                GS_BUF_LIT(&w, "]}");
                sched_node_records_free(&rec);
        }
        GS_BUF_LIT(&w, "],\"pending_pods\":[");
        for (size_t i = 0; i < n_pending; i++) {
                if (i)
                        GS_BUF_LIT(&w, ",");
                pending_json(&w, SCHED_VIEW_DOC_INSPECT, &pending[i]);
        }
        GS_BUF_LIT(&w, "]}");
        return gs_buf_finish(&w, ret, ret_len);
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
