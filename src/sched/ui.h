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

/* Where the page's JSON comes from: the extender (server.c) registers its own documents here, so
 * this file never names the server's (docs/style.md, no file cycle). Each returns 0 with a
 * malloc'ed body, -ENOENT for "no such node", or another -errno. */
struct sched_ui_source {
        int (*view)(void *ud, const struct sched_view_query *q, char **ret, size_t *ret_len);
        int (*topology)(void *ud, const char *node, char **ret, size_t *ret_len);
        void *ud;
};

/* Register the page's routes on h, serving src's documents (src must outlive h). Before h starts.
 * 0 or http_server_handle's error. */
/* Thread: main, before the HTTP server serves; lock: none. */
int sched_ui_register(struct http_server *h, const struct sched_ui_source *src);
