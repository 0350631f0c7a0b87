/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http — the one HTTP server of gpuslice (libmicrohttpd): the node agent's /metrics, /healthz and
 * status server, and the scheduler extender's verbs and page. A caller-owned server: create it on
 * HOST:PORT, register a handler per exact path, start, stop.
 *
 *   struct http_server *s;
 *   http_server_new("127.0.0.1:9400", &s);
 *   http_server_handle(s, "/metrics", serve_metrics, ctx);
 *   http_server_start(s);            // serves on a thread of its own
 *   ...
 *   s = http_server_free(s);         // stops, waits for running handlers
 *
 * Handlers run on the server's thread(s), possibly several at once: they must be thread-safe
 * and should be quick (the metrics handler formats a prepared snapshot, never samples).
 * Requests with a body (POST) get it whole, up to HTTP_MAX_BODY bytes (more → 413, handler not
 * called). Unknown paths → 404, methods other than GET/HEAD/POST → 405.
 *
 * Must never: log (it counts instead, see http_server_stats), block a handler on another
 * request, or serve on an address the caller did not name.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define HTTP_MAX_BODY (1u << 20)
#define HTTP_MAX_HANDLERS 16
/* Open connections in all, and from one IP address; an idle or half-sent request is dropped after
 * 10 s. More are refused at accept. */
#define HTTP_MAX_CONNECTIONS 128
#define HTTP_MAX_CONNECTIONS_PER_IP 64

struct http_request {
        const char *method; /* "GET", "HEAD", "POST" */
        const char *path;   /* "/metrics" (without the query string) */
        const char *query;  /* what followed the first '?' of the request target, as sent (still
                               percent-encoded; "" when none): the handler parses it */
        const char *body;   /* NUL-terminated copy of the body ("" when none) */
        size_t body_len;
        void *priv; /* the server's (http_defer) */
};

struct http_response {
        unsigned status;       /* 200 unless the handler sets it */
        char content_type[96]; /* "text/plain; charset=utf-8" unless the handler sets it */
        char *body;            /* malloc'ed by the handler; the server frees it */
        size_t body_len;
        /* more headers: name, value, name, value, ..., NULL (strings that outlive the server, e.g.
         * literals); NULL for none */
        const char *const *headers;
};

typedef void (*http_handler_fn)(void *userdata, const struct http_request *req, struct http_response *resp);

/*
 * A handler that waits on something else (the extender's bind waits on the API server) defers its
 * answer instead of blocking a server thread: it calls http_defer(req), returns (its resp is then
 * ignored), and the answer is given later, exactly once, by http_reply from any thread — possibly
 * before the handler returns. Meanwhile the connection is suspended: it holds no thread and does not
 * time out. http_server_free waits for every deferred answer, so whoever answers must not wait for the
 * server's end. Thread: http_defer in the handler only; http_reply any. http_defer: NULL only for a
 * request that did not come from a server (answer at once then).
 */
struct http_deferred;
struct http_deferred *http_defer(const struct http_request *req);
/* resp as a handler fills it (resp->body is taken over; headers must outlive the server). */
void http_reply(struct http_deferred *d, struct http_response *resp);

struct http_server;

/*
 * Parse "HOST:PORT": an IPv4 address, "[IPv6]", "localhost" (→ 127.0.0.1) or an empty host
 * (":9400", all IPv4 interfaces); PORT 0..65535 (0 = any free port). 0 or -EINVAL.
 */
int http_parse_address(const char *address, struct sockaddr_storage *ret, socklen_t *ret_len);

/* A server for `address` (see http_parse_address), or for "unix:/PATH", a unix socket created at
 * start (owner only, a stale file replaced) and removed at free. 0, -EINVAL, -ENOMEM. */
int http_server_new(const char *address, struct http_server **ret);
/* Serve `path` (exact match; the string is copied) with fn. Before start only: -EBUSY after,
 * -ENOSPC past HTTP_MAX_HANDLERS, -EEXIST for a path registered twice. */
int http_server_handle(struct http_server *s, const char *path, http_handler_fn fn, void *userdata);
/*
 * Serve HTTPS with the PEM certificate chain and key in these files (read now). With client_ca_file
 * (may be NULL), every request must come with a client certificate that verifies against it, or it
 * is answered 403. Before start only. 0, -EBUSY, -EOPNOTSUPP (libmicrohttpd without TLS), or the
 * error reading a file.
 */
int http_server_tls_files(struct http_server *s, const char *cert_file, const char *key_file,
                          const char *client_ca_file);
/* Up to max_connections open connections instead of HTTP_MAX_CONNECTIONS, all but
 * HTTP_MAX_CONNECTIONS_PER_IP of them from one address (a client with many requests in flight,
 * kube-scheduler binding pods, opens a connection for each: HTTP/1.1, no pipelining; the others keep
 * theirs). A connection waiting on a deferred answer holds no thread. Before start only: 0, -EBUSY,
 * -EINVAL for max_connections not above HTTP_MAX_CONNECTIONS_PER_IP or above 4096. */
int http_server_max_connections(struct http_server *s, unsigned max_connections);
/* Bind and serve. 0, -EADDRINUSE (or -EIO) when the address cannot be bound, -EBUSY if started. */
int http_server_start(struct http_server *s);
/* The bound port (useful with port 0), 0 before start. */
unsigned http_server_port(const struct http_server *s);
/* Stop serving, wait for running handlers, free. NULL is fine. Returns NULL. */
struct http_server *http_server_free(struct http_server *s);

struct http_stats {
        uint64_t requests;  /* answered requests, any status */
        uint64_t not_found; /* 404 */
        uint64_t rejected;  /* 405 and 413 */
};
void http_server_stats(const struct http_server *s, struct http_stats *ret);
