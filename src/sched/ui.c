/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ui.c — the operator page's routes (see ui.h, docs/ui.md): the embedded page, script and style
 * sheet, and the JSON API over the documents the extender registers (struct sched_ui_source). Must never log, and never
 * serve a route that changes anything.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "sched/ui.h"
#include "sched/view.h"
#include "util/util.h"

/* src/sched/ui/, built in by src/sched/ui/embed.cmake */
extern const unsigned char sched_ui_index_html[], sched_ui_app_js[], sched_ui_app_css[];
extern const unsigned long sched_ui_index_html_len, sched_ui_app_js_len, sched_ui_app_css_len;

/* Everything the page loads comes from here: no inline script or style, nothing from elsewhere. */
static const char page_csp[] = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";
static const char *const page_headers[] = {
        "Content-Security-Policy",
        page_csp,
        "X-Content-Type-Options",
        "nosniff",
        "Referrer-Policy",
        "no-referrer",
        "Cache-Control",
        "no-cache",
        NULL,
};
static const char *const api_headers[] = {
        "Cache-Control", "no-store", "X-Content-Type-Options", "nosniff", NULL,
};

static void text(struct http_response *resp, unsigned status, const char *msg) {
        resp->status = status;
        resp->body = strdup(msg);
        resp->body_len = resp->body ? strlen(resp->body) : 0;
        resp->headers = api_headers;
}

/* GET and HEAD only: nothing here changes anything. */
static bool read_only(const struct http_request *req, struct http_response *resp) {
        if (streq(req->method, "GET") || streq(req->method, "HEAD"))
                return true;
        text(resp, 405, "the operator page and its API are read-only: GET or HEAD\n");
        return false;
}

static void asset(struct http_response *resp, const unsigned char *data, unsigned long len, const char *type) {
        resp->body = malloc(len ? len : 1);
        if (!resp->body) {
                resp->status = 500;
                return;
        }
        memcpy(resp->body, data, len);
        resp->body_len = len;
        resp->headers = page_headers;
        strscpy(resp->content_type, type, sizeof resp->content_type);
}

static void serve_page(void *ud, const struct http_request *req, struct http_response *resp) {
        (void)ud;
        if (read_only(req, resp))
                asset(resp, sched_ui_index_html, sched_ui_index_html_len, "text/html; charset=utf-8");
}

static void serve_js(void *ud, const struct http_request *req, struct http_response *resp) {
        (void)ud;
        if (read_only(req, resp))
                asset(resp, sched_ui_app_js, sched_ui_app_js_len, "text/javascript; charset=utf-8");
}

static void serve_css(void *ud, const struct http_request *req, struct http_response *resp) {
        (void)ud;
        if (read_only(req, resp))
                asset(resp, sched_ui_app_css, sched_ui_app_css_len, "text/css; charset=utf-8");
}

/* The query of req, parsed; a 400 with the reason when it is not one the API takes. */
static bool query(const struct http_request *req, struct http_response *resp, struct sched_view_query *q) {
        struct gs_error err = { 0 };
        if (sched_view_query_parse(req->query, strlen(req->query), q, &err) == 0)
                return true;
        char msg[GS_ERROR_MESSAGE_MAX + 2];
        snprintf(msg, sizeof msg, "%s\n", err.message);
        text(resp, 400, msg);
        return false;
}

static void json(struct http_response *resp, int r, char *body, size_t len, const char *not_found) {
        if (r == -ENOENT) {
                text(resp, 404, not_found);
                return;
        }
        if (r < 0) {
                text(resp, 500, "out of memory\n");
                return;
        }
        resp->body = body;
        resp->body_len = len;
        resp->headers = api_headers;
        strscpy(resp->content_type, "application/json", sizeof resp->content_type);
}

static void serve_cluster(void *ud, const struct http_request *req, struct http_response *resp) {
        struct sched_view_query q;
        if (!read_only(req, resp) || !query(req, resp, &q))
                return;
        char *body = NULL;
        size_t len = 0;
        const struct sched_ui_source *src = ud;
        int r = src->view(src->ud, &q, &body, &len);
        json(resp, r, body, len, "not found\n");
}

static void serve_topology(void *ud, const struct http_request *req, struct http_response *resp) {
        struct sched_view_query q;
        if (!read_only(req, resp) || !query(req, resp, &q))
                return;
        if (!q.node[0]) {
                text(resp, 400, "query parameter 'node' is required: the node whose topology to show\n");
                return;
        }
        char *body = NULL;
        size_t len = 0;
        const struct sched_ui_source *src = ud;
        int r = src->topology(src->ud, q.node, &body, &len);
        json(resp, r, body, len, "no node of that name publishes GPUs\n");
}

int sched_ui_register(struct http_server *h, const struct sched_ui_source *src) {
        void *s = (void *)src; /* the routes' user data; only read */
        int r;
        if ((r = http_server_handle(h, "/ui", serve_page, s)) < 0 ||
            (r = http_server_handle(h, "/ui/app.js", serve_js, s)) < 0 ||
            (r = http_server_handle(h, "/ui/app.css", serve_css, s)) < 0 ||
            (r = http_server_handle(h, "/api/v1/cluster", serve_cluster, s)) < 0 ||
            (r = http_server_handle(h, "/api/v1/topology", serve_topology, s)) < 0)
                return r;
        return 0;
}
