/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/client — HTTP to the API server with libcurl: TLS (CA file or data, client certificate,
 * insecure-skip-tls-verify), bearer tokens (a token file is re-read when it changes, as projected
 * service account tokens rotate), one request, paged LIST, and WATCH streamed through the
 * incremental event decoder. Bodies are bounded; error answers are decoded from the API's
 * Status. Must never log, never trust a size or a type from the server.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <curl/curl.h>

#include "kube/kube.h"
#include "util/util.h"

#define TOKEN_RECHECK_SEC 10 /* stat the token file at most this often */
#define CONNECT_TIMEOUT_MS 10000
#define WATCH_IDLE_SLACK_SEC 30

struct kube_client {
        struct kube_config cfg; /* deep copy */
        unsigned timeout_ms;
        atomic_bool *cancel;  /* when set, every request in flight ends (-ECANCELED) */
        pthread_mutex_t lock; /* token below */
        char *token;
        struct timespec token_mtime;
        ino_t token_ino;
        off_t token_size;
        time_t token_checked;
        /* One-shot requests (kube_request, kube_list's pages) from any thread run on one thread of
         * the client's own, all in one curl multi handle: concurrent requests share one HTTP/2
         * connection (a stream each) instead of a TCP connection and TLS handshake each, on both
         * sides (the scheduler extender binds pods concurrently). Started by the first request. */
        struct mux {
                pthread_t thread;
                bool started;
                bool stop;
                int error; /* the thread could not start: requests fail with it */
                CURLM *multi;
                struct xfer *queue; /* submitted, not yet in the multi handle; guarded by lock */
        } mux;
        /* TLS sessions shared by every handle: a new connection resumes one (no certificate
         * signature or verification on either side) instead of a full handshake. NULL: none. */
        CURLSH *share;
        pthread_mutex_t share_lock;
};

static void mux_stop(struct kube_client *c);

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int sdup(const char *s, char **ret) {
        *ret = NULL;
        if (!s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *u) {
        (void)h, (void)data, (void)access;
        pthread_mutex_lock(&((struct kube_client *)u)->share_lock);
}

static void share_unlock(CURL *h, curl_lock_data data, void *u) {
        (void)h, (void)data;
        pthread_mutex_unlock(&((struct kube_client *)u)->share_lock);
}

/* The shared TLS session cache; without one (out of memory, an old curl) every connection makes a
 * full handshake, nothing else changes. */
static void share_init(struct kube_client *c) {
        pthread_mutex_init(&c->share_lock, NULL);
        c->share = curl_share_init();
        if (c->share && (curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock) != CURLSHE_OK ||
                         curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock) != CURLSHE_OK ||
                         curl_share_setopt(c->share, CURLSHOPT_USERDATA, c) != CURLSHE_OK ||
                         curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK)) {
                curl_share_cleanup(c->share);
                c->share = NULL;
        }
}

int kube_client_new(const struct kube_config *cfg, struct kube_client **ret) {
        if (!cfg || !cfg->server || !cfg->server[0])
                return -EINVAL;
        pthread_once(&curl_once, curl_init_once);
        struct kube_client *c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        c->timeout_ms = 30000;
        pthread_mutex_init(&c->lock, NULL);
        share_init(c);
        c->cfg.insecure = cfg->insecure;
        if (sdup(cfg->server, &c->cfg.server) < 0 || sdup(cfg->ca_file, &c->cfg.ca_file) < 0 ||
            sdup(cfg->ca_pem, &c->cfg.ca_pem) < 0 || sdup(cfg->cert_file, &c->cfg.cert_file) < 0 ||
            sdup(cfg->key_file, &c->cfg.key_file) < 0 || sdup(cfg->cert_pem, &c->cfg.cert_pem) < 0 ||
            sdup(cfg->key_pem, &c->cfg.key_pem) < 0 || sdup(cfg->token, &c->cfg.token) < 0 ||
            sdup(cfg->token_file, &c->cfg.token_file) < 0 || sdup(cfg->namespace_, &c->cfg.namespace_) < 0 ||
            sdup(cfg->source, &c->cfg.source) < 0) {
                kube_client_free(c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

struct kube_client *kube_client_free(struct kube_client *c) {
        if (!c)
                return NULL;
        kube_config_done(&c->cfg);
        if (c->token) {
                explicit_bzero(c->token, strlen(c->token));
                free(c->token);
        }
        mux_stop(c);
        if (c->share)
                curl_share_cleanup(c->share); /* after every handle using it */
        pthread_mutex_destroy(&c->share_lock);
        pthread_mutex_destroy(&c->lock);
        free(c);
        return NULL;
}

void kube_client_set_cancel(struct kube_client *c, atomic_bool *cancel) {
        c->cancel = cancel;
}

static int cancel_progress(void *u, curl_off_t a, curl_off_t b, curl_off_t c2, curl_off_t d) {
        (void)a, (void)b, (void)c2, (void)d;
        atomic_bool *cancel = u;
        return cancel && atomic_load(cancel) ? 1 : 0;
}

void kube_client_set_timeout(struct kube_client *c, unsigned ms) {
        c->timeout_ms = ms ? ms : 30000;
}

/* The bearer token for the next request, re-read from token_file when the file changed (stat at
 * most every TOKEN_RECHECK_SEC). Returns a malloc'ed copy or NULL (no token / unreadable file:
 * the request then goes without one and the server says 401). */
static char *token_get(struct kube_client *c) {
        if (!c->cfg.token_file)
                return c->cfg.token ? strdup(c->cfg.token) : NULL;
        pthread_mutex_lock(&c->lock);
        time_t now = time(NULL);
        if (!c->token || now - c->token_checked >= TOKEN_RECHECK_SEC || now < c->token_checked) {
                struct stat st;
                c->token_checked = now;
                if (stat(c->cfg.token_file, &st) == 0 &&
                    (!c->token || st.st_ino != c->token_ino || st.st_size != c->token_size ||
                     st.st_mtim.tv_sec != c->token_mtime.tv_sec || st.st_mtim.tv_nsec != c->token_mtime.tv_nsec)) {
                        char *t = NULL;
                        size_t n = 0;
                        if (read_file(c->cfg.token_file, 64 * 1024, &t, &n) >= 0) {
                                while (n && (t[n - 1] == '\n' || t[n - 1] == '\r' || t[n - 1] == ' '))
                                        t[--n] = 0;
                                if (c->token) {
                                        explicit_bzero(c->token, strlen(c->token));
                                        free(c->token);
                                }
                                c->token = t;
                                c->token_ino = st.st_ino;
                                c->token_size = st.st_size;
                                c->token_mtime = st.st_mtim;
                        }
                }
        }
        char *t = c->token ? strdup(c->token) : NULL;
        pthread_mutex_unlock(&c->lock);
        return t;
}

/* ---- errors -------------------------------------------------------------------------------- */

int kube_errno_from_http(long http, const char *reason) {
        if (http >= 200 && http < 300)
                return 0;
        switch (http) {
                case 401:
                case 403: return -EACCES;
                case 404: return -ENOENT;
                case 409: return reason && streq(reason, "AlreadyExists") ? -EEXIST : -ESTALE;
                case 410: return -EIDRM;
                case 422:
                case 400: return -EINVAL;
                case 413: return -E2BIG;
                case 429: return -EAGAIN;
                default: return http >= 500 ? -EAGAIN : -EPROTO;
        }
}

void kube_status_decode(const char *body, size_t len, long http, struct kube_error *e) {
        if (!e)
                return;
        memset(e, 0, sizeof *e);
        e->http = http;
        json_t *j = body && len ? json_loadb(body, len, 0, NULL) : NULL;
        json_t *msg = json_object_get(j, "message"), *reason = json_object_get(j, "reason");
        if (json_is_string(reason))
                strscpy(e->reason, json_string_value(reason), sizeof e->reason);
        if (json_is_string(msg))
                strscpy(e->message, json_string_value(msg), sizeof e->message);
        else if (body && len) {
                /* not a Status: keep the start of the text, printable bytes only */
                size_t n = 0;
                for (size_t i = 0; i < len && n + 1 < sizeof e->message; i++) {
                        unsigned char ch = (unsigned char)body[i];
                        e->message[n++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : ' ';
                }
                e->message[n] = 0;
        } else
                snprintf(e->message, sizeof e->message, "HTTP %ld", http);
        json_decref(j);
}

static int errno_from_curl(CURLcode cc) {
        switch (cc) {
                case CURLE_OPERATION_TIMEDOUT: return -ETIMEDOUT;
                case CURLE_COULDNT_RESOLVE_HOST:
                case CURLE_COULDNT_RESOLVE_PROXY: return -EHOSTUNREACH;
                case CURLE_COULDNT_CONNECT: return -ECONNREFUSED;
                case CURLE_PEER_FAILED_VERIFICATION:
                case CURLE_SSL_CONNECT_ERROR:
                case CURLE_SSL_CERTPROBLEM:
                case CURLE_SSL_CACERT_BADFILE:
                case CURLE_SSL_CIPHER: return -EKEYREJECTED;
                case CURLE_OUT_OF_MEMORY: return -ENOMEM;
                default: return -ECONNABORTED;
        }
}

unsigned kube_backoff_ms(unsigned attempt, unsigned first_ms, unsigned cap_ms, uint32_t rnd) {
        uint64_t base = first_ms ? first_ms : 1;
        for (unsigned i = 0; i < attempt && base < cap_ms; i++)
                base <<= 1;
        if (base > cap_ms)
                base = cap_ms;
        uint64_t half = base / 2;
        return (unsigned)(half + (half ? rnd % (base - half + 1) : 0));
}

char *kube_escape(const char *s, char *buf, size_t len) {
        static const char hex[] = "0123456789ABCDEF";
        size_t n = 0;
        for (; *s; s++) {
                unsigned char ch = (unsigned char)*s;
                bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                             ch == '-' || ch == '_' || ch == '.' || ch == '~';
                if (n + (plain ? 1 : 3) >= len)
                        return NULL;
                if (plain)
                        buf[n++] = (char)ch;
                else {
                        buf[n++] = '%';
                        buf[n++] = hex[ch >> 4];
                        buf[n++] = hex[ch & 15];
                }
        }
        if (n >= len)
                return NULL;
        buf[n] = 0;
        return buf;
}

/* ---- transport ----------------------------------------------------------------------------- */

struct handle {
        CURL *h;
        struct curl_slist *hdrs;
        char errbuf[CURL_ERROR_SIZE];
};

static void handle_done(struct handle *hd) {
        if (hd->h)
                curl_easy_cleanup(hd->h);
        curl_slist_free_all(hd->hdrs);
        memset(hd, 0, sizeof *hd);
}

/* ---- the one-shot requests' thread (struct mux) --------------------------------------------- */

/* One request in flight: its handle and answer buffer, its own copy of the body; cc set by the mux
 * thread at the end, then complete() is called there. A waiting caller's request (kube_request) sets
 * done and signals cond; a started one (kube_request_start) finishes and calls the user back. */
struct xfer {
        struct handle hd;
        struct gs_buf b;
        char *body;
        CURLcode cc;
        bool done;
        pthread_cond_t cond; /* waiting callers: signalled when done, with the client's lock */
        kube_done_fn user_done;
        void *user_data;
        struct xfer *next;
};

static void xfer_complete(struct kube_client *c, struct xfer *x);

/* Thread: the mux's. Moves submitted transfers into the multi handle, runs them, completes each at
 * its end. */
static void *mux_main(void *u) {
        struct kube_client *c = u;
        struct mux *m = &c->mux;
        for (;;) {
                pthread_mutex_lock(&c->lock);
                struct xfer *q = m->queue;
                m->queue = NULL;
                bool stop = m->stop;
                pthread_mutex_unlock(&c->lock);
                for (struct xfer *x = q, *next; x; x = next) {
                        next = x->next;
                        curl_easy_setopt(x->hd.h, CURLOPT_PRIVATE, x);
                        CURLMcode mc = curl_multi_add_handle(m->multi, x->hd.h);
                        if (mc != CURLM_OK) {
                                x->cc = mc == CURLM_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_FAILED_INIT;
                                xfer_complete(c, x);
                        }
                }
                int running = 0;
                curl_multi_perform(m->multi, &running);
                CURLMsg *msg;
                int left;
                while ((msg = curl_multi_info_read(m->multi, &left))) {
                        if (msg->msg != CURLMSG_DONE)
                                continue;
                        struct xfer *x = NULL;
                        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
                        x->cc = msg->data.result;
                        curl_multi_remove_handle(m->multi, msg->easy_handle);
                        xfer_complete(c, x);
                }
                /* the client is freed once its users are done (kube.h): nothing is queued then, and
                 * started requests end within their timeout */
                if (stop && running == 0)
                        return NULL;
                curl_multi_poll(m->multi, NULL, 0, 1000, NULL);
        }
}

/* Start the mux thread once. With c->lock held. */
static int mux_start_locked(struct kube_client *c) {
        struct mux *m = &c->mux;
        if (m->started || m->error)
                return m->error;
        m->multi = curl_multi_init();
        if (!m->multi)
                return m->error = -ENOMEM;
        curl_multi_setopt(m->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
        int r = pthread_create(&m->thread, NULL, mux_main, c);
        if (r) {
                curl_multi_cleanup(m->multi);
                m->multi = NULL;
                return m->error = -r;
        }
        m->started = true;
        return 0;
}

static void mux_stop(struct kube_client *c) {
        struct mux *m = &c->mux;
        if (!m->started)
                return;
        pthread_mutex_lock(&c->lock);
        m->stop = true;
        pthread_mutex_unlock(&c->lock);
        curl_multi_wakeup(m->multi);
        pthread_join(m->thread, NULL);
        curl_multi_cleanup(m->multi);
        m->started = false;
}

/* Hand the prepared x to the mux thread. Thread: any but the mux's. 0 or -errno (x untouched). */
static int mux_submit(struct kube_client *c, struct xfer *x) {
        /* wait for the one HTTP/2 connection rather than opening a second one beside it */
        curl_easy_setopt(x->hd.h, CURLOPT_PIPEWAIT, 1L);
        pthread_mutex_lock(&c->lock);
        int r = mux_start_locked(c);
        if (r == 0) {
                x->next = c->mux.queue;
                c->mux.queue = x;
        }
        pthread_mutex_unlock(&c->lock);
        if (r == 0)
                curl_multi_wakeup(c->mux.multi);
        return r;
}

/* lint: long — one curl handle for the API server: URL, timeouts, then one branch per TLS and credential source a
 * kubeconfig may give (inline data or a file for the CA, the client certificate and key; a token), in that order. */
static int handle_init(struct kube_client *c, struct handle *hd, const char *path, const char *content_type) {
        memset(hd, 0, sizeof *hd);
        char *url = NULL;
        if (asprintf(&url, "%s%s", c->cfg.server, path) < 0)
                return -ENOMEM;
        hd->h = curl_easy_init();
        if (!hd->h) {
                free(url);
                return -ENOMEM;
        }
        CURL *h = hd->h;
        curl_easy_setopt(h, CURLOPT_URL, url);
        free(url);
        if (c->share)
                curl_easy_setopt(h, CURLOPT_SHARE, c->share);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, hd->errbuf);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https,http");
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS);
        curl_easy_setopt(h, CURLOPT_USERAGENT, "gpuslice");
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
        if (c->cfg.insecure) {
                curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
                curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
        } else if (c->cfg.ca_pem) {
                struct curl_blob b = { .data = c->cfg.ca_pem, .len = strlen(c->cfg.ca_pem), .flags = CURL_BLOB_COPY };
                curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
        } else if (c->cfg.ca_file)
                curl_easy_setopt(h, CURLOPT_CAINFO, c->cfg.ca_file);
        if (c->cfg.cert_pem) {
                struct curl_blob b = { .data = c->cfg.cert_pem,
                                       .len = strlen(c->cfg.cert_pem),
                                       .flags = CURL_BLOB_COPY };
                curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &b);
                curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
        } else if (c->cfg.cert_file)
                curl_easy_setopt(h, CURLOPT_SSLCERT, c->cfg.cert_file);
        if (c->cfg.key_pem) {
                struct curl_blob b = { .data = c->cfg.key_pem, .len = strlen(c->cfg.key_pem), .flags = CURL_BLOB_COPY };
                curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &b);
                curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
        } else if (c->cfg.key_file)
                curl_easy_setopt(h, CURLOPT_SSLKEY, c->cfg.key_file);

        struct curl_slist *l = curl_slist_append(NULL, "Accept: application/json");
        if (l && content_type) {
                char ct[96];
                snprintf(ct, sizeof ct, "Content-Type: %s", content_type);
                struct curl_slist *n = curl_slist_append(l, ct);
                if (!n) {
                        curl_slist_free_all(l);
                        l = NULL;
                } else
                        l = n;
        }
        char *tok = token_get(c);
        if (l && tok) {
                char *hdr = NULL;
                if (asprintf(&hdr, "Authorization: Bearer %s", tok) >= 0) {
                        struct curl_slist *n = curl_slist_append(l, hdr);
                        explicit_bzero(hdr, strlen(hdr));
                        free(hdr);
                        if (!n) {
                                curl_slist_free_all(l);
                                l = NULL;
                        } else
                                l = n;
                }
        }
        if (tok) {
                explicit_bzero(tok, strlen(tok));
                free(tok);
        }
        if (!l) {
                handle_done(hd);
                return -ENOMEM;
        }
        hd->hdrs = l;
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
        if (c->cancel) {
                curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
                curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, cancel_progress);
                curl_easy_setopt(h, CURLOPT_XFERINFODATA, c->cancel);
        }
        return 0;
}

static int transport_error(struct handle *hd, CURLcode cc, struct kube_error *e) {
        if (e) {
                memset(e, 0, sizeof *e);
                snprintf(e->message, sizeof e->message, "%s", hd->errbuf[0] ? hd->errbuf : curl_easy_strerror(cc));
        }
        return errno_from_curl(cc);
}

/* A request's handle, method and body into x (its own copy of body). 0 or -errno (x cleared). */
static int request_prepare(struct kube_client *c, enum kube_method m, const char *path, const char *body,
                           unsigned timeout_ms, struct xfer *x) {
        static const char *const ctype[] = {
                [KUBE_GET] = NULL,
                [KUBE_POST] = "application/json",
                [KUBE_PATCH_MERGE] = "application/merge-patch+json",
                [KUBE_PATCH_JSON] = "application/json-patch+json",
                [KUBE_PATCH_STRATEGIC] = "application/strategic-merge-patch+json",
                [KUBE_PUT] = "application/json",
                [KUBE_DELETE] = "application/json",
                [KUBE_PATCH_APPLY] = "application/apply-patch+yaml",
        };
        static const char *const verb[] = {
                [KUBE_GET] = "GET",
                [KUBE_POST] = "POST",
                [KUBE_PATCH_MERGE] = "PATCH",
                [KUBE_PATCH_JSON] = "PATCH",
                [KUBE_PATCH_STRATEGIC] = "PATCH",
                [KUBE_PUT] = "PUT",
                [KUBE_DELETE] = "DELETE",
                [KUBE_PATCH_APPLY] = "PATCH",
        };
        memset(x, 0, sizeof *x);
        if (!c || !path || path[0] != '/' || (unsigned)m > KUBE_PATCH_APPLY)
                return -EINVAL;
        if (body && !(x->body = strdup(body)))
                return -ENOMEM;
        int r = handle_init(c, &x->hd, path, body ? ctype[m] : NULL);
        if (r < 0) {
                free(x->body);
                return r;
        }
        x->b = (struct gs_buf){ .max = KUBE_BODY_MAX };
        CURL *h = x->hd.h;
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, verb[m]);
        if (body) {
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, x->body);
                curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(x->body));
        }
        if (m == KUBE_GET)
                curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, gs_buf_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &x->b);
        return 0;
}

/* lint: long — a request's end: transport failure, status mapping and JSON decoding, each failure translated once
 * at this boundary; x's handle, buffer and body freed. */
static int request_finish(struct xfer *x, json_t **ret, struct kube_error *e) {
        CURLcode cc = x->cc;
        struct gs_buf *b = &x->b;
        long http = 0;
        int r;
        curl_easy_getinfo(x->hd.h, CURLINFO_RESPONSE_CODE, &http);
        if (cc != CURLE_OK) {
                if (b->overflow) {
                        if (e) {
                                memset(e, 0, sizeof *e);
                                e->http = http;
                                snprintf(e->message, sizeof e->message, "answer larger than %u bytes", KUBE_BODY_MAX);
                        }
                        r = -EPROTO;
                } else if (cc == CURLE_ABORTED_BY_CALLBACK)
                        r = -ECANCELED;
                else
                        r = transport_error(&x->hd, cc, e);
                goto out;
        }
        if (http < 200 || http >= 300) {
                kube_status_decode(b->p, b->len, http, e);
                r = kube_errno_from_http(http, e ? e->reason : NULL);
                if (!e) {
                        struct kube_error tmp;
                        kube_status_decode(b->p, b->len, http, &tmp);
                        r = kube_errno_from_http(http, tmp.reason);
                }
                goto out;
        }
        if (ret) {
                json_error_t je;
                json_t *j = b->len ? json_loadb(b->p, b->len, JSON_REJECT_DUPLICATES, &je) : json_object();
                if (!j) {
                        if (e) {
                                memset(e, 0, sizeof *e);
                                e->http = http;
                                snprintf(e->message, sizeof e->message, "answer is not JSON: %s", je.text);
                        }
                        r = -EPROTO;
                        goto out;
                }
                *ret = j;
        }
        r = 0;
out:
        gs_buf_done(b);
        handle_done(&x->hd); /* its connection stays in the multi handle */
        free(x->body);
        x->body = NULL;
        return r;
}

/* Thread: the mux's, at a transfer's end. */
static void xfer_complete(struct kube_client *c, struct xfer *x) {
        if (!x->user_done) {
                pthread_mutex_lock(&c->lock);
                x->done = true;
                pthread_cond_signal(&x->cond);
                pthread_mutex_unlock(&c->lock);
                return;
        }
        json_t *ret = NULL;
        struct kube_error e = { 0 };
        int r = request_finish(x, &ret, &e);
        x->user_done(x->user_data, r, ret, &e);
        free(x);
}

static int request_within(struct kube_client *c, enum kube_method m, const char *path, const char *body, json_t **ret,
                          struct kube_error *e, unsigned timeout_ms) {
        struct xfer x;
        int r = request_prepare(c, m, path, body, timeout_ms, &x);
        if (r < 0)
                return r;
        pthread_cond_init(&x.cond, NULL);
        if ((r = mux_submit(c, &x)) < 0) {
                x.cc = r == -ENOMEM ? CURLE_OUT_OF_MEMORY : CURLE_FAILED_INIT;
        } else {
                pthread_mutex_lock(&c->lock);
                while (!x.done)
                        pthread_cond_wait(&x.cond, &c->lock);
                pthread_mutex_unlock(&c->lock);
        }
        pthread_cond_destroy(&x.cond);
        return request_finish(&x, ret, e);
}

int kube_request(struct kube_client *c, enum kube_method m, const char *path, const char *body, json_t **ret,
                 struct kube_error *e) {
        return request_within(c, m, path, body, ret, e, c ? c->timeout_ms : 0);
}

int kube_request_start(struct kube_client *c, enum kube_method m, const char *path, const char *body, kube_done_fn done,
                       void *userdata) {
        if (!done)
                return -EINVAL;
        struct xfer *x = malloc(sizeof *x);
        if (!x)
                return -ENOMEM;
        int r = request_prepare(c, m, path, body, c ? c->timeout_ms : 0, x);
        if (r == 0) {
                x->user_done = done;
                x->user_data = userdata;
                r = mux_submit(c, x);
                if (r < 0)
                        request_finish(x, NULL, NULL);
        }
        if (r < 0)
                free(x);
        return r;
}

/* "?a=b&c=d" built piece by piece into a fixed buffer. */
struct query {
        char s[4096];
        size_t n;
        bool overflow;
};

static void query_add(struct query *q, const char *key, const char *value) {
        char esc[2048];
        if (!value)
                return;
        if (!kube_escape(value, esc, sizeof esc)) {
                q->overflow = true;
                return;
        }
        int w = snprintf(q->s + q->n, sizeof q->s - q->n, "%c%s=%s", q->n ? '&' : '?', key, esc);
        if (w < 0 || (size_t)w >= sizeof q->s - q->n)
                q->overflow = true;
        else
                q->n += (size_t)w;
}

/* lint: long — a paged LIST with its continue token, the expired-token restart and the item callback; the pages
 * share one handle and one query buffer. */
int kube_list(struct kube_client *c, const char *path, const struct kube_list_opts *o,
              int (*item)(json_t *obj, void *userdata), void *userdata, char **ret_rv, struct kube_error *e) {
        char *cont = NULL, *rv = NULL, *full = NULL;
        bool restarted = false;
        int r;
        uint64_t deadline = c && o && o->timeout_ms ? monotonic_ms() + o->timeout_ms : 0;
        for (;;) {
                struct query q = { .n = 0 };
                char lim[16];
                snprintf(lim, sizeof lim, "%u", o && o->limit ? o->limit : KUBE_LIST_PAGE);
                query_add(&q, "limit", lim);
                if (o) {
                        query_add(&q, "labelSelector", o->label_selector);
                        query_add(&q, "fieldSelector", o->field_selector);
                }
                query_add(&q, "continue", cont);
                if (q.overflow) {
                        r = -E2BIG;
                        break;
                }
                free(full);
                if (asprintf(&full, "%s%s", path, q.s) < 0) {
                        full = NULL;
                        r = -ENOMEM;
                        break;
                }
                json_t *page = NULL;
                uint64_t now = monotonic_ms();
                if (deadline && now >= deadline) {
                        if (e) {
                                memset(e, 0, sizeof *e);
                                snprintf(e->message, sizeof e->message, "%s: no answer within %u ms", path,
                                         o->timeout_ms);
                        }
                        r = -ETIMEDOUT;
                        break;
                }
                r = c ? request_within(c, KUBE_GET, full, NULL, &page, e,
                                       deadline ? (unsigned)MIN(deadline - now, (uint64_t)c->timeout_ms)
                                                : c->timeout_ms)
                      : -EINVAL;
                if (r == -EIDRM && cont && !restarted) {
                        /* the continue token expired: start over, once; the caller forgets
                         * what it saw (item(NULL)) */
                        restarted = true;
                        free(cont);
                        cont = NULL;
                        if (item && (r = item(NULL, userdata)) < 0)
                                break;
                        continue;
                }
                if (r < 0)
                        break;
                json_t *items = json_object_get(page, "items"), *meta = json_object_get(page, "metadata");
                json_t *jrv = json_object_get(meta, "resourceVersion"), *jc = json_object_get(meta, "continue");
                if (!json_is_object(page) || (items && !json_is_null(items) && !json_is_array(items)) ||
                    !json_is_string(jrv) || (jc && !json_is_string(jc))) {
                        if (e) {
                                memset(e, 0, sizeof *e);
                                e->http = 200;
                                snprintf(e->message, sizeof e->message, "%s: not a list", path);
                        }
                        json_decref(page);
                        r = -EPROTO;
                        break;
                }
                size_t i;
                json_t *it;
                r = 0;
                json_array_foreach(items, i, it) {
                        if (!json_is_object(it))
                                continue;
                        if (item && (r = item(it, userdata)) < 0)
                                break;
                }
                free(rv);
                rv = strdup(json_string_value(jrv));
                free(cont);
                cont = jc && json_string_value(jc)[0] ? strdup(json_string_value(jc)) : NULL;
                json_decref(page);
                if (r < 0)
                        break;
                if (!rv) {
                        r = -ENOMEM;
                        break;
                }
                if (!cont)
                        break;
        }
        free(full);
        free(cont);
        if (r >= 0 && ret_rv)
                *ret_rv = TAKE_PTR(rv);
        free(rv);
        return r < 0 ? r : 0;
}

/* ---- watch --------------------------------------------------------------------------------- */

struct watch_ctx {
        CURL *h;
        struct kube_watch_decoder dec;
        long http;
        int decode_error;
        struct gs_buf errbody; /* a non-200 answer */
        atomic_bool *stop;
        atomic_bool *cancel;
};

static size_t watch_write(char *data, size_t size, size_t nmemb, void *u) {
        struct watch_ctx *w = u;
        size_t n = size * nmemb;
        if (!w->http)
                curl_easy_getinfo(w->h, CURLINFO_RESPONSE_CODE, &w->http);
        if (w->http != 200)
                return gs_buf_write(data, size, nmemb, &w->errbody);
        int r = kube_watch_decoder_feed(&w->dec, data, n);
        if (r < 0) {
                w->decode_error = r;
                return 0;
        }
        if (w->stop && atomic_load(w->stop))
                return 0;
        return n;
}

static int watch_progress(void *u, curl_off_t a, curl_off_t b, curl_off_t c2, curl_off_t d) {
        (void)a, (void)b, (void)c2, (void)d;
        struct watch_ctx *w = u;
        return (w->stop && atomic_load(w->stop)) || (w->cancel && atomic_load(w->cancel)) ? 1 : 0;
}

/* lint: long — one WATCH stream: query, handle, the hung-stream timeout, the server ending the stream and the
 * event callback; the states share one handle. */
int kube_watch(struct kube_client *c, const char *path, const struct kube_watch_opts *o,
               int (*event)(const struct kube_event *ev, void *userdata), void *userdata, struct kube_error *e) {
        struct query q = { .n = 0 };
        char tmo[16];
        unsigned timeout = o && o->timeout_seconds ? o->timeout_seconds : 300;
        snprintf(tmo, sizeof tmo, "%u", timeout);
        query_add(&q, "watch", "1");
        query_add(&q, "timeoutSeconds", tmo);
        if (o) {
                if (o->bookmarks)
                        query_add(&q, "allowWatchBookmarks", "true");
                if (o->resource_version && o->resource_version[0])
                        query_add(&q, "resourceVersion", o->resource_version);
                query_add(&q, "labelSelector", o->label_selector);
                query_add(&q, "fieldSelector", o->field_selector);
        }
        if (q.overflow)
                return -E2BIG;
        char *full = NULL;
        if (asprintf(&full, "%s%s", path, q.s) < 0)
                return -ENOMEM;
        struct handle hd;
        int r = handle_init(c, &hd, full, NULL);
        free(full);
        if (r < 0)
                return r;
        struct watch_ctx w = {
                .h = hd.h, .errbody = { .max = 1 << 20 }, .stop = o ? o->stop : NULL, .cancel = c->cancel
        };
        kube_watch_decoder_init(&w.dec, KUBE_EVENT_MAX, event, userdata);
        curl_easy_setopt(hd.h, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(hd.h, CURLOPT_WRITEFUNCTION, watch_write);
        curl_easy_setopt(hd.h, CURLOPT_WRITEDATA, &w);
        curl_easy_setopt(hd.h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(hd.h, CURLOPT_XFERINFOFUNCTION, watch_progress);
        curl_easy_setopt(hd.h, CURLOPT_XFERINFODATA, &w);
        /* a stream silent past the server's own timeout is hung: give up and reconnect */
        unsigned idle = o && o->idle_timeout_seconds ? o->idle_timeout_seconds : timeout + WATCH_IDLE_SLACK_SEC;
        curl_easy_setopt(hd.h, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(hd.h, CURLOPT_LOW_SPEED_TIME, (long)idle);
        CURLcode cc = curl_easy_perform(hd.h);
        if (!w.http)
                curl_easy_getinfo(hd.h, CURLINFO_RESPONSE_CODE, &w.http);
        if (w.http && w.http != 200) {
                kube_status_decode(w.errbody.p, w.errbody.len, w.http, e);
                struct kube_error tmp;
                kube_status_decode(w.errbody.p, w.errbody.len, w.http, &tmp);
                r = kube_errno_from_http(w.http, tmp.reason);
                if (r == 0)
                        r = -EPROTO;
        } else if (w.decode_error) {
                r = w.decode_error;
                if (e && (r == -EPROTO || r == -E2BIG)) {
                        memset(e, 0, sizeof *e);
                        e->http = w.http;
                        snprintf(e->message, sizeof e->message, "bad watch event: %s", w.dec.error);
                }
        } else if (cc == CURLE_ABORTED_BY_CALLBACK || (cc == CURLE_WRITE_ERROR && w.stop && atomic_load(w.stop)))
                r = 0;
        else if (cc == CURLE_OK || cc == CURLE_PARTIAL_FILE)
                /* the server ended the stream (its timeout, or it went away cleanly); an event
                 * cut in the middle is dropped, the next watch resumes from the last whole one */
                r = 0;
        else
                r = transport_error(&hd, cc, e);
        gs_buf_done(&w.errbody);
        kube_watch_decoder_done(&w.dec);
        handle_done(&hd);
        return r;
}
