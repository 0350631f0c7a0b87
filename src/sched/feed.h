/* SPDX-License-Identifier: Apache-2.0 */
/*
 * feed — the extender's link to the API server (built only with src/kube): two informers (nodes,
 * and pods with GPU resources or annotations) that keep the server's model up to date, and the
 * binder bind uses (one POST of the pod's Binding carrying its assignment annotations).
 *
 * The model is marked ready once both informers have listed everything. Must never call the
 * informers while holding the server's lock (the informers call us with theirs held: the order is
 * always informer lock, then server lock).
 */
#pragma once

#include <stddef.h>

#include "sched/server.h"

struct sched_feed;

/* Load the configuration (kubeconfig path, or NULL for --kubeconfig/$KUBECONFIG/in-cluster/
 * ~/.kube/config; context NULL = current) and make the client. 0 or -errno with err. */
/* Thread: main; lock: none. */
int sched_feed_new(const char *kubeconfig, const char *context, struct sched_feed **ret, struct gs_error *err);
/* The binder to put in sched_server_options (valid while the feed lives). */
/* Thread: any (the bind handler's); lock: none (the binder is fixed once made). */
const struct sched_binder *sched_feed_binder(struct sched_feed *f);
/* Start the informers feeding s's model; s becomes ready when both have listed. 0 or -errno. */
/* Thread: main, until stopped (the informers' threads call back); lock: takes the server's after the informer's. */
int sched_feed_run(struct sched_feed *f, struct sched_server *s, const struct cluster_units *u, struct gs_error *err);
/* Thread: main, after sched_feed_run returned; lock: none. */
struct sched_feed *sched_feed_free(struct sched_feed *f);
