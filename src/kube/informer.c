/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/informer — list + watch into an in-memory cache, on a thread of its own: list (paged),
 * hand every difference with the previous cache to the change handler, watch from the list's
 * resourceVersion, apply events, and when the watch ends resume from the last version seen;
 * 410 Gone (as an HTTP answer or an ERROR event) means the version is too old: list again.
 * Failures back off exponentially with jitter, capped. Objects are slimmed on the way in (only
 * the fields callers use), which bounds memory per object. Never logs: the caller reads
 * kube_informer_last_error / stats.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "kube/kube.h"
#include "util/util.h"

struct kube_informer {
        struct kube_client *client;
        char *path, *label_selector, *field_selector;
        kube_slim_fn slim;
        struct kube_informer_handlers h;

        pthread_t thread;
        bool started;
        atomic_bool stop;
        pthread_mutex_t lock; /* everything below */
        pthread_cond_t cond;  /* synced, stop */
        json_t *cache;        /* key → slim object */
        char *rv;             /* last resourceVersion seen */
        bool synced;
        struct kube_informer_stats st;
        char last_error[KUBE_ERR_MAX + 256];
        unsigned backoff_first_ms, backoff_cap_ms, watch_timeout_s, idle_timeout_s;
};

static int object_key(const json_t *obj, char *buf, size_t len) {
        json_t *meta = json_object_get(obj, "metadata");
        json_t *name = json_object_get(meta, "name"), *ns = json_object_get(meta, "namespace");
        if (!json_is_string(name) || !json_string_value(name)[0])
                return -EINVAL;
        int n = json_is_string(ns) && json_string_value(ns)[0]
                        ? snprintf(buf, len, "%s/%s", json_string_value(ns), json_string_value(name))
                        : snprintf(buf, len, "%s", json_string_value(name));
        return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

static const char *object_rv(const json_t *obj) {
        return json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
}

int kube_informer_new(struct kube_client *c, const char *path, const char *label_selector, const char *field_selector,
                      kube_slim_fn slim, const struct kube_informer_handlers *h, struct kube_informer **ret) {
        if (!c || !path || path[0] != '/')
                return -EINVAL;
        struct kube_informer *inf = calloc(1, sizeof *inf);
        if (!inf)
                return -ENOMEM;
        pthread_mutex_init(&inf->lock, NULL);
        pthread_cond_init(&inf->cond, NULL);
        inf->client = c;
        inf->slim = slim;
        if (h)
                inf->h = *h;
        inf->backoff_first_ms = 500;
        inf->backoff_cap_ms = 30000;
        inf->watch_timeout_s = 300;
        inf->path = strdup(path);
        inf->label_selector = label_selector ? strdup(label_selector) : NULL;
        inf->field_selector = field_selector ? strdup(field_selector) : NULL;
        inf->cache = json_object();
        if (!inf->path || (label_selector && !inf->label_selector) || (field_selector && !inf->field_selector) ||
            !inf->cache) {
                kube_informer_free(inf);
                return -ENOMEM;
        }
        *ret = inf;
        return 0;
}

void kube_informer_set_backoff(struct kube_informer *inf, unsigned first_ms, unsigned cap_ms) {
        inf->backoff_first_ms = first_ms ? first_ms : 1;
        inf->backoff_cap_ms = cap_ms > first_ms ? cap_ms : inf->backoff_first_ms;
}

void kube_informer_set_watch_timeout(struct kube_informer *inf, unsigned seconds, unsigned idle_seconds) {
        inf->watch_timeout_s = seconds ? seconds : 300;
        inf->idle_timeout_s = idle_seconds;
}

static void set_error(struct kube_informer *inf, const char *what, int r, const struct kube_error *e) {
        pthread_mutex_lock(&inf->lock);
        inf->st.errors++;
        if (e && (e->http || e->message[0]))
                snprintf(inf->last_error, sizeof inf->last_error, "%.16s: %.64s (HTTP %ld%s%.64s): %.300s", what,
                         strerror(-r), e->http, e->reason[0] ? " " : "", e->reason, e->message);
        else
                snprintf(inf->last_error, sizeof inf->last_error, "%s: %s", what, strerror(-r));
        pthread_mutex_unlock(&inf->lock);
}

/* Sleep ms unless stopped. true when stopped. */
static bool pause_ms(struct kube_informer *inf, unsigned ms) {
        struct timespec ts = timespec_after_ms(CLOCK_REALTIME, ms);
        pthread_mutex_lock(&inf->lock);
        while (!atomic_load(&inf->stop))
                if (pthread_cond_timedwait(&inf->cond, &inf->lock, &ts) == ETIMEDOUT)
                        break;
        pthread_mutex_unlock(&inf->lock);
        return atomic_load(&inf->stop);
}

static unsigned backoff(struct kube_informer *inf, unsigned *attempt) {
        uint32_t rnd = 0;
        if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
                rnd = (uint32_t)time(NULL) * 2654435761u;
        unsigned ms = kube_backoff_ms(*attempt, inf->backoff_first_ms, inf->backoff_cap_ms, rnd);
        if (*attempt < 30)
                (*attempt)++;
        return ms;
}

/* ---- list ---------------------------------------------------------------------------------- */

struct list_ctx {
        struct kube_informer *inf;
        json_t *fresh;
};

static int list_item(json_t *obj, void *u) {
        struct list_ctx *l = u;
        if (!obj) { /* the list restarted */
                json_object_clear(l->fresh);
                return 0;
        }
        char key[512];
        if (object_key(obj, key, sizeof key) < 0)
                return 0;
        json_t *slim = l->inf->slim ? l->inf->slim(obj) : json_incref(obj);
        if (!slim)
                return 0;
        return json_object_set_new(l->fresh, key, slim) < 0 ? -ENOMEM : 0;
}

static int do_list(struct kube_informer *inf) {
        struct list_ctx l = { .inf = inf, .fresh = json_object() };
        struct kube_list_opts o = { .label_selector = inf->label_selector, .field_selector = inf->field_selector };
        struct kube_error e;
        char *rv = NULL;
        if (!l.fresh)
                return -ENOMEM;
        int r = kube_list(inf->client, inf->path, &o, list_item, &l, &rv, &e);
        if (r < 0) {
                json_decref(l.fresh);
                set_error(inf, "list", r, &e);
                return r;
        }
        pthread_mutex_lock(&inf->lock);
        const char *key;
        json_t *nv, *ov;
        if (inf->h.changed) {
                json_object_foreach(l.fresh, key, nv) {
                        ov = json_object_get(inf->cache, key);
                        const char *a = ov ? object_rv(ov) : NULL, *b = object_rv(nv);
                        if (!ov || !a || !b || !streq(a, b) || !json_equal(ov, nv))
                                inf->h.changed(ov, nv, inf->h.userdata);
                }
                json_object_foreach(inf->cache, key, ov) if (!json_object_get(l.fresh, key))
                        inf->h.changed(ov, NULL, inf->h.userdata);
        }
        json_decref(inf->cache);
        inf->cache = l.fresh;
        free(inf->rv);
        inf->rv = rv;
        inf->st.lists++;
        inf->st.objects = json_object_size(inf->cache);
        inf->synced = true;
        pthread_cond_broadcast(&inf->cond);
        pthread_mutex_unlock(&inf->lock);
        if (inf->h.synced)
                inf->h.synced(inf->h.userdata);
        return 0;
}

/* ---- watch --------------------------------------------------------------------------------- */

static int watch_event(const struct kube_event *ev, void *u) {
        struct kube_informer *inf = u;
        if (ev->type == KUBE_EVENT_ERROR)
                return ev->code == 410 ? -EIDRM : -EPROTO;
        pthread_mutex_lock(&inf->lock);
        inf->st.events++;
        if (ev->resource_version) {
                char *rv = strdup(ev->resource_version);
                if (rv) {
                        free(inf->rv);
                        inf->rv = rv;
                }
        }
        if (ev->type != KUBE_EVENT_BOOKMARK) {
                char key[512];
                if (object_key(ev->object, key, sizeof key) == 0) {
                        json_t *old = json_incref(json_object_get(inf->cache, key));
                        json_t *nv = ev->type == KUBE_EVENT_DELETED ? NULL
                                     : inf->slim                    ? inf->slim(ev->object)
                                                                    : json_incref(ev->object);
                        if (nv)
                                json_object_set(inf->cache, key, nv);
                        else
                                json_object_del(inf->cache, key);
                        if (inf->h.changed && (old || nv))
                                inf->h.changed(old, nv, inf->h.userdata);
                        json_decref(old);
                        json_decref(nv);
                        inf->st.objects = json_object_size(inf->cache);
                }
        }
        pthread_mutex_unlock(&inf->lock);
        return 0;
}

static void *informer_main(void *u) {
        struct kube_informer *inf = u;
        unsigned attempt = 0;
        bool need_list = true;
        while (!atomic_load(&inf->stop)) {
                if (need_list) {
                        if (do_list(inf) < 0) {
                                if (pause_ms(inf, backoff(inf, &attempt)))
                                        break;
                                continue;
                        }
                        need_list = false;
                        attempt = 0;
                }
                pthread_mutex_lock(&inf->lock);
                char *rv = inf->rv ? strdup(inf->rv) : NULL;
                inf->st.watches++;
                pthread_mutex_unlock(&inf->lock);
                struct kube_watch_opts o = {
                        .label_selector = inf->label_selector,
                        .field_selector = inf->field_selector,
                        .resource_version = rv,
                        .timeout_seconds = inf->watch_timeout_s,
                        .idle_timeout_seconds = inf->idle_timeout_s,
                        .bookmarks = true,
                        .stop = &inf->stop,
                };
                struct kube_error e;
                uint64_t before = inf->st.events;
                struct timespec t0, t1;
                clock_gettime(CLOCK_MONOTONIC, &t0);
                int r = kube_watch(inf->client, inf->path, &o, watch_event, inf, &e);
                clock_gettime(CLOCK_MONOTONIC, &t1);
                bool lasted = t1.tv_sec - t0.tv_sec >= 5;
                free(rv);
                if (atomic_load(&inf->stop))
                        break;
                if (r == -EIDRM) {
                        pthread_mutex_lock(&inf->lock);
                        inf->st.relists_410++;
                        pthread_mutex_unlock(&inf->lock);
                        need_list = true;
                        continue;
                }
                if (r == 0) {
                        /* the server closed the stream (timeout, shutdown, cut): resume at once if it
                         * delivered something or lasted, else after a growing pause (a server
                         * ending every watch at once must not make us spin) */
                        if (inf->st.events != before || lasted)
                                attempt = 0; /* a healthy stream (events, or a quiet one the server
                                                ended at its timeout): watch again at once */
                        else if (pause_ms(inf, backoff(inf, &attempt)))
                                break;
                        continue;
                }
                set_error(inf, "watch", r, &e);
                if (pause_ms(inf, backoff(inf, &attempt)))
                        break;
        }
        return NULL;
}

int kube_informer_start(struct kube_informer *inf) {
        if (inf->started)
                return -EALREADY;
        int r = pthread_create(&inf->thread, NULL, informer_main, inf);
        if (r)
                return -r;
        inf->started = true;
        return 0;
}

struct kube_informer *kube_informer_free(struct kube_informer *inf) {
        if (!inf)
                return NULL;
        if (inf->started) {
                pthread_mutex_lock(&inf->lock);
                atomic_store(&inf->stop, true);
                pthread_cond_broadcast(&inf->cond);
                pthread_mutex_unlock(&inf->lock);
                pthread_join(inf->thread, NULL);
        }
        json_decref(inf->cache);
        free(inf->rv);
        free(inf->path);
        free(inf->label_selector);
        free(inf->field_selector);
        pthread_cond_destroy(&inf->cond);
        pthread_mutex_destroy(&inf->lock);
        free(inf);
        return NULL;
}

bool kube_informer_synced(struct kube_informer *inf) {
        pthread_mutex_lock(&inf->lock);
        bool s = inf->synced;
        pthread_mutex_unlock(&inf->lock);
        return s;
}

int kube_informer_wait_synced(struct kube_informer *inf, unsigned ms) {
        struct timespec ts = timespec_after_ms(CLOCK_REALTIME, ms);
        pthread_mutex_lock(&inf->lock);
        while (!inf->synced)
                if (pthread_cond_timedwait(&inf->cond, &inf->lock, &ts) == ETIMEDOUT)
                        break;
        bool s = inf->synced;
        pthread_mutex_unlock(&inf->lock);
        return s ? 0 : -ETIMEDOUT;
}

json_t *kube_informer_get(struct kube_informer *inf, const char *key) {
        pthread_mutex_lock(&inf->lock);
        json_t *o = json_deep_copy(json_object_get(inf->cache, key));
        pthread_mutex_unlock(&inf->lock);
        return o;
}

void kube_informer_foreach(struct kube_informer *inf, void (*fn)(const char *key, const json_t *obj, void *u),
                           void *u) {
        pthread_mutex_lock(&inf->lock);
        const char *key;
        json_t *v;
        json_object_foreach(inf->cache, key, v) fn(key, v, u);
        pthread_mutex_unlock(&inf->lock);
}

void kube_informer_stats(struct kube_informer *inf, struct kube_informer_stats *ret) {
        pthread_mutex_lock(&inf->lock);
        *ret = inf->st;
        pthread_mutex_unlock(&inf->lock);
}

void kube_informer_last_error(struct kube_informer *inf, char *buf, size_t len) {
        pthread_mutex_lock(&inf->lock);
        strscpy(buf, inf->last_error, len);
        pthread_mutex_unlock(&inf->lock);
}
