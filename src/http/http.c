/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http — libmicrohttpd behind the small API of http.h. One internal polling thread (poll(2): see
 * http_server_start) accepts and dispatches; handlers get whole requests, and a handler that
 * waits defers its answer (http_defer: the connection is suspended meanwhile). Must never log or
 * block a request on another one.
 */
#include "http/http.h"

#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "util/util.h"

struct handler {
        char *path;
        http_handler_fn fn;
        void *userdata;
};

struct http_server {
        struct sockaddr_storage addr;
        socklen_t addr_len;
        char unix_path[108]; /* "unix:PATH" servers: the socket file ("" for TCP) */
        struct MHD_Daemon *daemon;
        unsigned port;
        struct handler handlers[HTTP_MAX_HANDLERS];
        size_t n_handlers;
        uint64_t requests, not_found, rejected; /* atomics */
        char *tls_cert, *tls_key, *tls_ca;      /* PEM text, NULL for plain HTTP / no client check */
        unsigned max_conn, max_conn_per_ip;
        /* deferred answers (http_defer): their state in each request_ctx, how many are outstanding */
        pthread_mutex_t defer_lock;
        pthread_cond_t defer_cond;
        unsigned n_deferred;
};

/* Per-request state: the query string (from the request line, before MHD splits it up), the body as
 * it arrives. Made by on_uri (MHD calls it for every request line it reads, and then always calls
 * on_completed), freed by on_completed. */
struct request_ctx {
        char *query;
        char *body;
        size_t len;
        bool started, too_big;
        /* http_defer: NONE (answered by the handler), WAITING (deferred, the handler still running),
         * SUSPENDED (the connection too), READY (http_reply gave resp; the connection resumed).
         * Guarded by the server's defer_lock. */
        enum {
                DEFER_NONE,
                DEFER_WAITING,
                DEFER_SUSPENDED,
                DEFER_READY
        } defer;
        struct http_server *server;
        struct MHD_Connection *conn;
        struct http_response resp;
};

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
        struct request_ctx *ctx = calloc(1, sizeof *ctx);
        if (!ctx)
                return NULL;
        ctx->server = cls;
        ctx->conn = c;
        const char *q = uri ? strchr(uri, '?') : NULL;
        ctx->query = strdup(q ? q + 1 : "");
        if (!ctx->query) {
                free(ctx);
                return NULL;
        }
        return ctx;
}

int http_parse_address(const char *address, struct sockaddr_storage *ret, socklen_t *ret_len) {
        if (!address)
                return -EINVAL;
        const char *colon = strrchr(address, ':');
        if (!colon)
                return -EINVAL;
        unsigned port;
        if (parse_uint(colon + 1, 65535, &port) < 0)
                return -EINVAL;
        char host[64];
        size_t hl = (size_t)(colon - address);
        if (hl >= sizeof host)
                return -EINVAL;
        strnscpy(host, sizeof host, address, hl);

        struct sockaddr_storage ss = { 0 };
        if (host[0] == '[') {
                if (hl < 2 || host[hl - 1] != ']')
                        return -EINVAL;
                host[hl - 1] = '\0';
                struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
                s6->sin6_family = AF_INET6;
                s6->sin6_port = htons((uint16_t)port);
                if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1)
                        return -EINVAL;
                *ret = ss;
                *ret_len = sizeof *s6;
                return 0;
        }
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        if (host[0] == '\0')
                s4->sin_addr.s_addr = htonl(INADDR_ANY);
        else if (streq(host, "localhost"))
                s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        else if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
                return -EINVAL;
        *ret = ss;
        *ret_len = sizeof *s4;
        return 0;
}

int http_server_new(const char *address, struct http_server **ret) {
        if (!address || !ret)
                return -EINVAL;
        if (startswith(address, "unix:")) {
                const char *path = address + 5;
                if (path[0] != '/' || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
                        return -EINVAL;
                struct http_server *s = calloc(1, sizeof *s);
                if (!s)
                        return -ENOMEM;
                s->max_conn = HTTP_MAX_CONNECTIONS;
                s->max_conn_per_ip = HTTP_MAX_CONNECTIONS_PER_IP;
                pthread_mutex_init(&s->defer_lock, NULL);
                pthread_cond_init(&s->defer_cond, NULL);
                strscpy(s->unix_path, path, sizeof s->unix_path);
                *ret = s;
                return 0;
        }
        struct http_server *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        int r = http_parse_address(address, &s->addr, &s->addr_len);
        if (r < 0) {
                free(s);
                return r;
        }
        s->max_conn = HTTP_MAX_CONNECTIONS;
        s->max_conn_per_ip = HTTP_MAX_CONNECTIONS_PER_IP;
        pthread_mutex_init(&s->defer_lock, NULL);
        pthread_cond_init(&s->defer_cond, NULL);
        *ret = s;
        return 0;
}

int http_server_tls_files(struct http_server *s, const char *cert_file, const char *key_file,
                          const char *client_ca_file) {
        if (!s || !cert_file || !key_file)
                return -EINVAL;
        if (s->daemon)
                return -EBUSY;
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
                return -EOPNOTSUPP;
        char *cert = NULL, *key = NULL, *ca = NULL;
        size_t len;
        int r = read_file(cert_file, 1u << 20, &cert, &len);
        if (r >= 0)
                r = read_file(key_file, 1u << 20, &key, &len);
        if (r >= 0 && client_ca_file)
                r = read_file(client_ca_file, 1u << 20, &ca, &len);
        if (r < 0) {
                free(cert);
                free(key);
                free(ca);
                return r;
        }
        free(s->tls_cert);
        free(s->tls_key);
        free(s->tls_ca);
        s->tls_cert = cert;
        s->tls_key = key;
        s->tls_ca = ca;
        return 0;
}

int http_server_max_connections(struct http_server *s, unsigned max_connections) {
        if (!s || max_connections <= HTTP_MAX_CONNECTIONS_PER_IP || max_connections > 4096)
                return -EINVAL;
        if (s->daemon)
                return -EBUSY;
        s->max_conn = max_connections;
        s->max_conn_per_ip = max_connections - HTTP_MAX_CONNECTIONS_PER_IP;
        return 0;
}

/* With a client CA: the peer's certificate must verify against it. */
static bool client_verified(struct MHD_Connection *c) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        if (!ci || !ci->tls_session)
                return false;
        gnutls_session_t session = (gnutls_session_t)ci->tls_session;
        unsigned status = 0;
        if (gnutls_certificate_type_get(session) != GNUTLS_CRT_X509 ||
            gnutls_certificate_verify_peers2(session, &status) != GNUTLS_E_SUCCESS)
                return false;
        unsigned n = 0;
        return status == 0 && gnutls_certificate_get_peers(session, &n) && n > 0;
}

int http_server_handle(struct http_server *s, const char *path, http_handler_fn fn, void *userdata) {
        if (!s || !path || path[0] != '/' || !fn)
                return -EINVAL;
        if (s->daemon)
                return -EBUSY;
        for (size_t i = 0; i < s->n_handlers; i++)
                if (streq(s->handlers[i].path, path))
                        return -EEXIST;
        if (s->n_handlers >= HTTP_MAX_HANDLERS)
                return -ENOSPC;
        char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        s->handlers[s->n_handlers++] = (struct handler){ p, fn, userdata };
        return 0;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type, char *body, size_t len,
                             const char *const *headers) {
        /* body is malloc'ed (or NULL) and handed to MHD, which frees it */
        struct MHD_Response *resp =
                MHD_create_response_from_buffer_with_free_callback(len, body ? body : (char *)"", body ? free : NULL);
        if (!resp) {
                free(body);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        for (size_t i = 0; headers && headers[i] && headers[i + 1]; i += 2)
                MHD_add_response_header(resp, headers[i], headers[i + 1]);
        enum MHD_Result r = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return r;
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *text) {
        char *b = strdup(text);
        return reply(c, status, "text/plain; charset=utf-8", b, b ? strlen(b) : 0, NULL);
}

static enum MHD_Result answer(struct MHD_Connection *c, struct http_response *resp);

/* lint: long — one request in MHD's order: the resumed answer of a deferred one, the body as it arrives, the
 * refusals (method, size, client certificate, path), then the handler and its answer, now or suspended. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
        struct http_server *s = cls;
        (void)version;
        struct request_ctx *ctx = *con_cls;
        if (!ctx)
                return MHD_NO; /* on_uri ran out of memory */
        if (!ctx->started) {
                ctx->started = true;
                return MHD_YES;
        }
        pthread_mutex_lock(&s->defer_lock);
        if (ctx->defer == DEFER_READY) { /* resumed by http_reply */
                struct http_response resp = ctx->resp;
                ctx->defer = DEFER_NONE;
                pthread_mutex_unlock(&s->defer_lock);
                return answer(c, &resp);
        }
        pthread_mutex_unlock(&s->defer_lock);
        if (*upload_data_size > 0) {
                size_t n = *upload_data_size;
                *upload_data_size = 0;
                if (ctx->too_big || ctx->len + n > HTTP_MAX_BODY) {
                        ctx->too_big = true;
                        return MHD_YES;
                }
                char *b = realloc(ctx->body, ctx->len + n + 1);
                if (!b)
                        return MHD_NO;
                memcpy(b + ctx->len, upload_data, n);
                ctx->len += n;
                b[ctx->len] = '\0';
                ctx->body = b;
                return MHD_YES;
        }

        __atomic_add_fetch(&s->requests, 1, __ATOMIC_RELAXED);
        if (!streq(method, "GET") && !streq(method, "HEAD") && !streq(method, "POST")) {
                __atomic_add_fetch(&s->rejected, 1, __ATOMIC_RELAXED);
                return reply_text(c, 405, "method not allowed\n");
        }
        if (ctx->too_big) {
                __atomic_add_fetch(&s->rejected, 1, __ATOMIC_RELAXED);
                return reply_text(c, 413, "request body too large\n");
        }
        if (s->tls_ca && !client_verified(c)) {
                __atomic_add_fetch(&s->rejected, 1, __ATOMIC_RELAXED);
                return reply_text(c, 403, "a client certificate signed by the configured CA is required\n");
        }
        const struct handler *h = NULL;
        for (size_t i = 0; i < s->n_handlers; i++)
                if (streq(s->handlers[i].path, url))
                        h = &s->handlers[i];
        if (!h) {
                __atomic_add_fetch(&s->not_found, 1, __ATOMIC_RELAXED);
                return reply_text(c, 404, "not found\n");
        }
        struct http_request req = {
                .method = method,
                .path = url,
                .query = ctx->query ? ctx->query : "",
                .body = ctx->body ? ctx->body : "",
                .body_len = ctx->len,
                .priv = ctx,
        };
        struct http_response resp = { .status = 200 };
        strscpy(resp.content_type, "text/plain; charset=utf-8", sizeof resp.content_type);
        h->fn(h->userdata, &req, &resp);
        pthread_mutex_lock(&s->defer_lock);
        if (ctx->defer == DEFER_WAITING) {
                /* not answered yet: wait without a thread; http_reply resumes us */
                ctx->defer = DEFER_SUSPENDED;
                MHD_suspend_connection(c);
                pthread_mutex_unlock(&s->defer_lock);
                free(resp.body);
                return MHD_YES;
        }
        if (ctx->defer == DEFER_READY) { /* answered already, before the handler returned */
                free(resp.body);
                resp = ctx->resp;
                ctx->defer = DEFER_NONE;
        }
        pthread_mutex_unlock(&s->defer_lock);
        return answer(c, &resp);
}

struct http_deferred *http_defer(const struct http_request *req) {
        struct request_ctx *ctx = req ? req->priv : NULL;
        if (!ctx)
                return NULL;
        struct http_server *s = ctx->server;
        pthread_mutex_lock(&s->defer_lock);
        ctx->defer = DEFER_WAITING;
        s->n_deferred++;
        pthread_mutex_unlock(&s->defer_lock);
        return (struct http_deferred *)ctx;
}

void http_reply(struct http_deferred *d, struct http_response *resp) {
        struct request_ctx *ctx = (struct request_ctx *)d;
        struct http_server *s = ctx->server;
        pthread_mutex_lock(&s->defer_lock);
        bool suspended = ctx->defer == DEFER_SUSPENDED;
        ctx->resp = *resp;
        resp->body = NULL;
        ctx->defer = DEFER_READY;
        if (suspended)
                MHD_resume_connection(ctx->conn); /* MHD calls on_request again: it answers ctx->resp */
        s->n_deferred--;
        pthread_cond_broadcast(&s->defer_cond);
        pthread_mutex_unlock(&s->defer_lock);
}

static enum MHD_Result answer(struct MHD_Connection *c, struct http_response *resp) {
        if (resp->status < 100 || resp->status > 599)
                resp->status = 500;
        return reply(c, resp->status, resp->content_type, resp->body, resp->body ? resp->body_len : 0, resp->headers);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
        (void)cls;
        (void)c;
        (void)toe;
        struct request_ctx *ctx = *con_cls;
        if (ctx) {
                free(ctx->query);
                free(ctx->body);
                free(ctx);
                *con_cls = NULL;
        }
}

/* A listening unix socket at s->unix_path (a stale file there is replaced), owner-only. */
static int listen_unix(struct http_server *s) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        strscpy(sa.sun_path, s->unix_path, sizeof sa.sun_path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        (void)unlink(s->unix_path);
        mode_t old = umask(0077); /* the file is for its owner (root) only */
        int r = bind(fd, (struct sockaddr *)&sa, sizeof sa);
        umask(old);
        if (r < 0 || listen(fd, 64) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

int http_server_start(struct http_server *s) {
        if (!s)
                return -EINVAL;
        if (s->daemon)
                return -EBUSY;
        /* poll(2), not the epoll mode MHD_USE_AUTO_INTERNAL_THREAD picks: with epoll (libmicrohttpd
         * 0.9.75) a client that sent half a request and closed was not noticed until the connection
         * timeout, so a few hundred such clients starved the server (agent-metrics-hostile). The
         * connection limit keeps poll's cost small. */
        unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME;
        if (s->unix_path[0]) {
                int fd = listen_unix(s);
                if (fd < 0)
                        return fd;
                /* MHD takes the socket over (closes it on stop); the per-IP limit does not
                 * apply to unix peers, the total one does. */
                s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_LISTEN_SOCKET, fd,
                                             MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_URI_LOG_CALLBACK,
                                             on_uri, s, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
                                             MHD_OPTION_CONNECTION_LIMIT, s->max_conn, MHD_OPTION_END);
                if (!s->daemon) {
                        close(fd);
                        (void)unlink(s->unix_path);
                        return -EIO;
                }
                return 0;
        }
        if (s->addr.ss_family == AF_INET6)
                flags |= MHD_USE_IPv6;
        struct MHD_OptionItem opts[4];
        size_t nt = 0;
        if (s->tls_cert) {
                flags |= MHD_USE_TLS;
                opts[nt++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, s->tls_cert };
                opts[nt++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls_key };
                if (s->tls_ca)
                        opts[nt++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_TRUST, 0, s->tls_ca };
        }
        opts[nt] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
        s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_ARRAY, opts, MHD_OPTION_SOCK_ADDR,
                                     (struct sockaddr *)&s->addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                     MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_CONNECTION_TIMEOUT,
                                     (unsigned)10, MHD_OPTION_CONNECTION_LIMIT, s->max_conn,
                                     /* one host holding half-sent requests (slowloris) must not take
                                      * every slot from the scraper */
                                     MHD_OPTION_PER_IP_CONNECTION_LIMIT, s->max_conn_per_ip, MHD_OPTION_END);
        if (!s->daemon) {
                /* MHD says nothing more; a bind failure is by far the likeliest cause */
                return -EADDRINUSE;
        }
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
        s->port = info ? info->port : 0;
        return 0;
}

unsigned http_server_port(const struct http_server *s) {
        return s ? s->port : 0;
}

struct http_server *http_server_free(struct http_server *s) {
        if (!s)
                return NULL;
        /* no connection may stay suspended at the daemon's stop: wait for every deferred answer */
        pthread_mutex_lock(&s->defer_lock);
        while (s->n_deferred)
                pthread_cond_wait(&s->defer_cond, &s->defer_lock);
        pthread_mutex_unlock(&s->defer_lock);
        if (s->daemon) {
                MHD_stop_daemon(s->daemon);
                if (s->unix_path[0])
                        (void)unlink(s->unix_path);
        }
        for (size_t i = 0; i < s->n_handlers; i++)
                free(s->handlers[i].path);
        free(s->tls_cert);
        free(s->tls_key);
        free(s->tls_ca);
        pthread_cond_destroy(&s->defer_cond);
        pthread_mutex_destroy(&s->defer_lock);
        free(s);
        return NULL;
}

void http_server_stats(const struct http_server *s, struct http_stats *ret) {
        *ret = (struct http_stats){
                .requests = __atomic_load_n(&s->requests, __ATOMIC_RELAXED),
                .not_found = __atomic_load_n(&s->not_found, __ATOMIC_RELAXED),
                .rejected = __atomic_load_n(&s->rejected, __ATOMIC_RELAXED),
        };
}
