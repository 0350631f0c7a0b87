/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server — the scheduler extender's HTTP side: the verbs kube-scheduler calls (POST /filter,
 * /prioritize, /bind, /preempt) plus /healthz and /metrics, and the read-only operator page with its
 * JSON API (ui.h), on the project's one HTTP server (src/http), over a cluster model (model.h) it owns
 * and guards with one lock.
 *
 * The model is fed from outside (the API watch, or a snapshot) through sched_server_lock(), which
 * hands out the model under the lock. Bind talks to the API server through a binder (one call: the
 * pod's Binding carrying its assignment annotations, set in the same update as the node); without
 * one, bind answers an error and the scheduler configuration must not name a bindVerb.
 *
 * Must never: answer filter or prioritize with a node kube-scheduler did not send, hold the lock
 * across an API call, or leave an assumed pod in the model after its bind failed.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched/codec.h"
#include "sched/decide.h"
#include "sched/model.h"
#include "sched/view.h"

/* Errors a binder returns: -ESTALE when the API server refused the Binding as a conflict (409: the
 * pod is bound already or being deleted; or, on servers that honour them, its uid or resourceVersion
 * changed), -ENOENT when the pod is gone, other -errno for the rest; err says what the API said. */
typedef void (*sched_bound_fn)(void *cookie, int r, const struct gs_error *err);
struct sched_binder {
        /* Start POST /api/v1/namespaces/{ns}/pods/{name}/binding to node, with `annotations_json`
         * ({"k":"v"}) as the Binding's metadata.annotations (merged into the pod's by the same update),
         * uid and resource_version ("" none) as its preconditions; the strings are the caller's, valid
         * during the call only. Its end, success or not, is told once by done(cookie, r, err), on any
         * thread, possibly before bind returns; err may be NULL. */
        void (*bind)(void *userdata, const char *ns, const char *name, const char *uid, const char *resource_version,
                     const char *node, const char *annotations_json, sched_bound_fn done, void *cookie);
        void *userdata;
};

struct sched_server_options {
        const char *address;        /* HOST:PORT */
        enum cluster_policy policy; /* default policy; pods may override (gpuslice.io/scheduling-policy) */
        /* filter answers every node that fits (--filter-answer all); false: only the node the policy
         * picks when the pod has no soft preference for kube-scheduler's Score plugins (docs/scheduler.md) */
        bool filter_all;
        struct cluster_units units;
        const struct sched_binder *binder;                             /* NULL: bind answers an error */
        const char *tls_cert_file, *tls_key_file, *tls_client_ca_file; /* NULL: plain HTTP */
};

struct sched_server;

/* Create (model empty, not serving). 0, -EINVAL, -ENOMEM, or a TLS file error. */
/* Thread: main; lock: none. */
int sched_server_new(const struct sched_server_options *o, struct sched_server **ret);
/* Serve on the HTTP server's thread. 0 or -EADDRINUSE / -EIO. */
/* Thread: main; lock: none (starts the HTTP server's thread). */
int sched_server_start(struct sched_server *s);
/* Thread: any; lock: none. */
unsigned sched_server_port(const struct sched_server *s);
/* Thread: main, after the feed stopped; lock: none (joins the HTTP thread). */
struct sched_server *sched_server_free(struct sched_server *s);

/* The model, locked: feed it, then unlock. */
/* Thread: any (the feed's informer callbacks, tests); lock: takes the server's lock. */
struct sched_model *sched_server_lock(struct sched_server *s);
/* Thread: the one holding the lock; lock: releases it. */
void sched_server_unlock(struct sched_server *s);
/* Whether the feed has delivered a complete picture (until then /healthz says 503 and filter
 * answers an Error so no pod is placed on a half-known cluster). */
/* Thread: any (the feed's); lock: takes the server's lock. */
void sched_server_set_ready(struct sched_server *s, bool ready);
/* The feed saw pod `uid` bound to a node, finished or deleted: it is not pending any more (the page
 * and the unschedulable metric forget it; bind would not have it either). With the lock held
 * (between sched_server_lock and sched_server_unlock). */
/* Thread: any (the feed's); lock: the server's lock held (sched_server_lock). */
void sched_server_pod_settled(struct sched_server *s, const char *uid);
/* The feed listed pod v pending (no node yet) before the server was first ready: counted in the packing
 * policies' request mix, which is seeded at the first ready from these and the model's pods (docs/scheduler.md,
 * "The frag policy"). Ignored once ready: filter counts the pods it sees. With the lock held. */
/* Thread: any (the feed's); lock: the server's lock held (sched_server_lock). */
void sched_server_pod_pending(struct sched_server *s, const struct cluster_pod *v);

/*
 * The operator page's documents (view.h, docs/ui.md), built under the lock: /api/v1/cluster for
 * query q (the model with the pending pods filter has seen and what it said of them), and
 * /api/v1/topology for one node (-ENOENT when the model has no published node of that name).
 * *ret malloc'ed. 0 or -errno.
 */
/* Thread: the HTTP server's; lock: takes the server's lock (never across an API call). */
int sched_server_view(struct sched_server *s, const struct sched_view_query *q, char **ret, size_t *ret_len);
/* Thread: the HTTP server's; lock: takes the server's lock (never across an API call). */
int sched_server_topology(struct sched_server *s, const char *node, char **ret, size_t *ret_len);

/*
 * The verbs without HTTP (the handlers call these; tests and the bench call them directly).
 * Each takes the request body and returns a malloc'ed JSON reply in *ret (always a valid reply
 * of that verb, errors in its Error field) and the HTTP status (200, or 400 for a body that is
 * not the verb's JSON).
 */
/* Thread: the HTTP server's; lock: takes the server's lock (never across an API call). */
unsigned sched_server_filter(struct sched_server *s, const char *body, size_t len, char **ret, size_t *ret_len);
/* Thread: the HTTP server's; lock: takes the server's lock (never across an API call). */
unsigned sched_server_prioritize(struct sched_server *s, const char *body, size_t len, char **ret, size_t *ret_len);
/* Thread: the HTTP server's; lock: takes the server's lock (never across an API call). */
unsigned sched_server_bind(struct sched_server *s, const char *body, size_t len, char **ret, size_t *ret_len);
/* sched_server_bind without waiting for the API server: reply(cookie, status, body, len) is called once
 * (body is reply's to free), on the binder's thread or, when the answer is known at once, on this one
 * before it returns. Thread: the HTTP server's; lock: as sched_server_bind. */
typedef void (*sched_reply_fn)(void *cookie, unsigned status, char *body, size_t len);
void sched_server_bind_start(struct sched_server *s, const char *body, size_t len, sched_reply_fn reply, void *cookie);
/* Preemption (ExtenderPreemptionArgs → ExtenderPreemptionResult): of the candidate nodes, those
 * where evicting the given victims frees GPUs the pod fits on (the full placement, the victims' GPU
 * holdings taken out), each with its victims as given — victims are never dropped, since
 * kube-scheduler may need them for other resources. 503 with no node while not synced. */
/* Thread: the HTTP server's; lock: takes the server's lock (never across an API call). */
unsigned sched_server_preempt(struct sched_server *s, const char *body, size_t len, char **ret, size_t *ret_len);
