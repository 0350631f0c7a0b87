/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ui — the extender's read-only operator page (docs/ui.md): GET /ui (one HTML page whose script and
 * style sheet, /ui/app.js and /ui/app.css, are built into the binary from src/sched/ui/: no CDN,
 * works air-gapped), and its JSON API, GET /api/v1/cluster and /api/v1/topology (view.h), on the
 * extender's HTTP server, so behind the same TLS and client-certificate options as its verbs.
 *
 * Must never: change the model or the cluster (every route answers GET/HEAD only, 405 otherwise),
 * serve anything it did not embed, or answer a malformed query with anything but 400 and the reason.
 */
#pragma once

#include <stddef.h>

struct http_server;
struct sched_view_query;

/* Where the API's documents come from: the extender's server (sched_server_view, sched_server_topology,
 * under its lock). The page calls nothing else of the server, so the server can register the page
 * (no file cycle between server.c and ui.c). *ret malloc'ed; 0 or -errno (-ENOENT: no such node). */
struct sched_ui_source {
        int (*cluster)(void *userdata, const struct sched_view_query *q, char **ret, size_t *ret_len);
        int (*topology)(void *userdata, const char *node, char **ret, size_t *ret_len);
        void *userdata;
};

/* Register the page's routes on h, serving src's documents (src is kept: it outlives h). Before h starts.
 * 0 or http_server_handle's error. */
/* Thread: main, before the HTTP server serves; lock: none. */
int sched_ui_register(struct http_server *h, const struct sched_ui_source *src);
