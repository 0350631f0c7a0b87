/* SPDX-License-Identifier: Apache-2.0 */
/*
 * view — the cluster as JSON (docs/cluster.md, "The cluster JSON"): the one writer of the cluster model's
 * documents, the extender's /api/v1/cluster and `gpuslice inspect --json`; /api/v1/topology, the parser of
 * the page's query strings, and what the page says about a pending pod (the outcome of the extender's last
 * filter call for it).
 *
 * The JSON reads the model (model.h) as the extender decides on it: per GPU the compute and memory
 * handed out, health as the node published it, and its holders — every pod the model counts on it,
 * flagged as the model knows it (bound, confirmed by the node agent, assumed by our own bind, inferred
 * by our fit). A GPU's holders are one list whatever holds them (kind "whole" or "share"; MIG
 * instances add their own kind), each with a line for a person (`what`), so the page renders any
 * kind without knowing it.
 *
 * Pure: no I/O, no logging, no locks; the caller holds the model still while it is read. Every query
 * string is untrusted: bounded, percent-decoded once, unknown or repeated keys refused.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#include "sched/codec.h"
#include "sched/model.h"

#define SCHED_VIEW_MAX_QUERY 2048   /* bytes of a query string */
#define SCHED_VIEW_MAX_MODEL 64     /* bytes of the model filter */
#define SCHED_VIEW_MAX_NODES 100000 /* the largest offset or limit */

/* What a query string may say. Filters: "" = no filter. */
struct sched_view_query {
        char node[CLUSTER_NAME_MAX];          /* cluster: nodes whose name contains it; topology: the node (exact) */
        char ns[64];                          /* only GPUs holding a pod of this namespace, pending pods of it */
        char model[SCHED_VIEW_MAX_MODEL + 1]; /* only GPUs whose model contains it (ASCII case ignored) */
        bool has_since;
        uint64_t since;         /* the generation the page has: an unchanged view answers {"unchanged":true} */
        unsigned offset, limit; /* write only the nodes [offset, offset+limit) of those that show (limit 0: all);
                                   the totals count them all */
};

/*
 * Parse "node=gpu-a&namespace=ml&model=A100&since=42&offset=0&limit=100" (percent-encoded, '+' is a
 * space; an empty value is no filter). 0, or -EINVAL with err saying which parameter and why: an
 * unknown or repeated key, a bad %-escape, a value too long or with characters its field cannot hold
 * (node: DNS subdomain characters; namespace: a DNS label; model: printable UTF-8; since: a decimal
 * number; offset, limit: 0..SCHED_VIEW_MAX_NODES).
 */
/* Thread: any; lock: the caller holds the model still (the server's lock). */
int sched_view_query_parse(const char *query, size_t len, struct sched_view_query *ret, struct gs_error *err);

/* ---- what the extender's filter said about a pending pod ---- */

#define SCHED_VIEW_REASONS 3

struct sched_filter_summary {
        uint64_t first_ns, last_ns; /* first and last filter call for the pod (CLOCK_REALTIME) */
        uint64_t unfit_since_ns;    /* since when no node of the calls fitted (0: the last one found one) */
        uint32_t nodes, fit, no_room, unresolvable; /* the last call's nodes by verdict */
        unsigned n_reasons;
        struct {
                uint32_t nodes;              /* nodes that failed with exactly this text */
                char node[CLUSTER_NAME_MAX]; /* the first of them */
                char text[200];              /* the GPU-level shortage (decide.h) */
        } reason[SCHED_VIEW_REASONS];        /* the first distinct reasons of the last call */
        uint32_t other_nodes;                /* failed nodes whose reason is not kept above */
};

/* Fold one filter call (res[i] for node names[i]) into s at now_ns. true when what the page shows
 * changed (the counts or the reasons; not the times). */
/* Thread: any; lock: the caller holds the model still (the server's lock). */
bool sched_filter_summary_note(struct sched_filter_summary *s, const struct sched_ext_node_result *res,
                               char *const *names, size_t n, uint64_t now_ns);

/* A pending pod as the page lists it. */
struct sched_view_pending {
        const struct cluster_pod *pod;
        const struct sched_filter_summary *filter;
};

/* ---- the documents ----
 *
 * The one writer of the cluster model's JSON: the page's /api/v1/cluster and `gpuslice inspect --json` are
 * written here, by the same function per object (node, GPU, holder, unplaced pod, pending pod), under one
 * schema (docs/cluster.md, "The cluster JSON"). Written straight into one buffer, never a tree of jansson
 * values; strings through gs_buf_json_string (always valid JSON, whatever bytes a name holds). */

/* Which document an object goes into: a few fields are one document's only (docs/cluster.md says which). */
enum sched_view_doc {
        SCHED_VIEW_DOC_PAGE,    /* the extender's /api/v1/cluster */
        SCHED_VIEW_DOC_INSPECT, /* gpuslice inspect --json */
};

/* What a caller knows beside the model (inspect: its LISTs of DRA claims and MIG devices): more fields of
 * GPU g of node `node`'s object, each written as ,"key":value into w. */
struct gs_buf;
struct sched_view_extra {
        void (*gpu)(struct gs_buf *w, const char *node, unsigned g, void *userdata);
        void *userdata;
};

struct sched_view_state {
        uint64_t generation; /* changes whenever anything the document shows may have changed */
        bool ready;          /* the model is synced with the API server */
        uint64_t now_ns;     /* CLOCK_REALTIME */
};

/*
 * /api/v1/cluster: {"generation","ready","time_ms","filters","totals":{…},"offset","nodes":[…],
 * "pending_pods":[…]} (docs/ui.md): the nodes that show under q's filters sorted by name (the window
 * q->offset, q->limit of them; the totals count all), the pending pods of q's namespace. With
 * q->has_since and q->since equal to the generation: only {"generation":N,"unchanged":true}.
 * *ret malloc'ed. 0 or -ENOMEM.
 */
/* Thread: any; lock: the caller holds the model still (the server's lock). */
int sched_view_cluster(const struct sched_model *m, const struct sched_view_pending *pending, size_t n_pending,
                       const struct sched_view_query *q, const struct sched_view_state *st, char **ret,
                       size_t *ret_len);

/* A node as inspect listed it: published (in the model, with its GPUs) or why not. */
struct sched_view_listed {
        const char *name;
        bool published;
        const char *error; /* when not published */
};

/*
 * `gpuslice inspect --json`: {"nodes":[…],"pending_pods":[…]} (docs/cluster.md): the listed nodes in their
 * order, each published one's GPUs as the assignments record them (sched_node_records: bound pods, what they
 * hand out) with x's fields, its unplaced pods; the pending pods (their filter summaries are not written).
 * *ret malloc'ed. 0 or -ENOMEM.
 */
int sched_view_inspect(const struct sched_model *m, const struct sched_view_listed *nodes, size_t n_nodes,
                       const struct sched_view_pending *pending, size_t n_pending, const struct sched_view_extra *x,
                       char **ret, size_t *ret_len);

/*
 * /api/v1/topology?node=NAME: the node's link matrix (names as `gpuslice topo` writes them, and the
 * bandwidth the allocator reckons with), and the best ring of k GPUs the allocator picks among all
 * of them and among the ones free whole now, for k = 2…min(n, 8) and the powers of two above.
 * Not const: the picks fill the model's memo. 0, -ENOENT (no such node, or it publishes no GPUs),
 * -ENOMEM.
 */
/* Thread: any; lock: the caller holds the model still (the server's lock). */
int sched_view_topology(struct sched_model *m, const char *node, char **ret, size_t *ret_len);
