/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dra/publish — the DRA driver's ResourceSlice publisher, on a thread of its own with the agent's one API
 * client (src/kube). It finds the resource.k8s.io version the server serves (v1, else v1beta2, else
 * v1beta1), watches this node's slices of this driver (an informer: a kubelet that wiped them at its
 * start, someone's edit), and whenever what should be published (slices.h, from the device table's view)
 * differs from what is, writes the whole pool again under the next generation and deletes the slices it
 * no longer needs. A server that dropped the shared devices' fields (a feature gate off: KEP-5075
 * consumable capacity, KEP-4815 partitionable devices), or refused them, gets the pool without shared
 * devices from then on.
 *
 * What is published is what the publisher's own writes got back (the server's answers) and what others
 * changed since (the informer's events that are not the echo of an own write: a kubelet's wipe, an edit):
 * never the informer's cache itself, which lags the answers — comparing with it wrote the pool again at
 * starts (docs/dra.md, the real 1.36). An own write's event starts no pass; an event heard while a pass
 * writes is looked at when the pass ends, when it is known whether the pass wrote it.
 *
 * Must never: hold the driver's lock across a request, write while nothing differs (quantities are
 * compared by value: a server writes them in canonical form), or leave the pool with mixed generations
 * longer than one pass.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dra/dra-internal.h"
#include "kube/kube.h"
#include "metrics/metrics.h"
#include "util/util.h"

#define RESYNC_S 300     /* a pass even when nothing was heard of */
#define BACKOFF_MAX_S 30 /* between failed passes */
#define SETTLE_MS 100    /* after a kick, for the rest of a burst (a kubelet deletes the pool in one request) */
#define OWN_RVS_KEPT 256 /* own writes' resourceVersions remembered: many pools' worth of echoes */

static void count_write(const char *outcome) {
        metrics_counter_add(metrics_counter_get("gpuslice_dra_slice_writes_total",
                                                "ResourceSlice writes of the DRA driver, by outcome (created, updated, "
                                                "deleted, error).",
                                                "outcome", outcome),
                            1);
}

/* ---- comparing what is with what should be ---- */

/* Quantities by value: "85899345920" and "80Gi" are the same capacity. */
static void normalize(json_t *v) {
        static const char *const qkeys[] = { "value", "default", "min", "max", "step" };
        const char *key;
        json_t *c;
        size_t i;
        if (json_is_array(v)) {
                json_array_foreach(v, i, c) {
                        normalize(c);
                }
                return;
        }
        if (!json_is_object(v))
                return;
        json_object_foreach(v, key, c) {
                uint64_t q;
                bool qkey = false;
                for (size_t k = 0; k < ELEMENTSOF(qkeys); k++)
                        qkey |= streq(key, qkeys[k]);
                if (qkey && json_is_string(c) && dra_quantity_parse(json_string_value(c), &q) == 0) {
                        char s[32];
                        snprintf(s, sizeof s, "%" PRIu64, q);
                        json_object_set_new(v, key, json_string(s));
                } else if (streq(key, "validValues") && json_is_array(c)) {
                        json_array_foreach(c, i, c) {
                                if (json_is_string(c) && dra_quantity_parse(json_string_value(c), &q) == 0) {
                                        char s[32];
                                        snprintf(s, sizeof s, "%" PRIu64, q);
                                        json_string_set(c, s);
                                }
                        }
                } else
                        normalize(c);
        }
}

/* The spec without its generation, v1-shaped, quantities by value, taints without the timeAdded the server
 * adds. */
static json_t *comparable(const json_t *slice) {
        json_t *s = dra_slice_to_v1(slice);
        json_t *spec = s ? json_incref(json_object_get(s, "spec")) : NULL;
        json_decref(s);
        if (spec) {
                size_t i, k;
                json_t *dev, *t;
                json_object_del(json_object_get(spec, "pool"), "generation");
                json_array_foreach(json_object_get(spec, "devices"), i, dev) {
                        json_array_foreach(json_object_get(dev, "taints"), k, t) {
                                json_object_del(t, "timeAdded");
                        }
                }
                normalize(spec);
        }
        return spec;
}

/* ---- what is published ---- */

static const char *meta_str(const json_t *obj, const char *key) {
        return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

static bool own_rv_locked(const struct dra *d, const char *rv) {
        size_t i;
        json_t *v;
        if (!rv)
                return false;
        json_array_foreach(d->pub.own_rvs, i, v) {
                if (streq(json_string_value(v) ?: "", rv))
                        return true;
        }
        return false;
}

/* An own write's answer: what is published now; its event is an echo. */
static void wrote(struct dra *d, const char *name, const json_t *answer) {
        const char *rv = meta_str(answer, "resourceVersion");
        pthread_mutex_lock(&d->lock);
        json_object_set_new(d->pub.slices, name, json_deep_copy(answer));
        if (rv)
                json_array_append_new(d->pub.own_rvs, json_string(rv));
        while (json_array_size(d->pub.own_rvs) > OWN_RVS_KEPT)
                json_array_remove(d->pub.own_rvs, 0);
        pthread_mutex_unlock(&d->lock);
}

static void forget(struct dra *d, const char *name) {
        pthread_mutex_lock(&d->lock);
        json_object_del(d->pub.slices, name);
        pthread_mutex_unlock(&d->lock);
}

/* An informer event (old NULL: added; new NULL: deleted): others' changes are taken and start a pass. */
static void heard_locked(struct dra *d, const json_t *old_obj, const json_t *new_obj) {
        const char *name = meta_str(new_obj ?: old_obj, "name");
        if (!name)
                return;
        if (new_obj) {
                if (own_rv_locked(d, meta_str(new_obj, "resourceVersion")))
                        return; /* the echo of an own write, maybe an older one than what is published */
                json_object_set_new(d->pub.slices, name, json_deep_copy(new_obj));
        } else {
                /* a slice deleted by someone else; not one the publisher deleted (then it is not published
                 * any more) or an older one of the same name (another UID) */
                const json_t *have = json_object_get(d->pub.slices, name);
                const char *uid = meta_str(have, "uid"), *gone = meta_str(old_obj, "uid");
                if (!have || (uid && gone && !streq(uid, gone)))
                        return;
                json_object_del(d->pub.slices, name);
        }
        dra_publish_kick_locked(d);
}

/* The published view for a pass (a copy); the pass writes from now on. */
static json_t *pass_begin(struct dra *d) {
        pthread_mutex_lock(&d->lock);
        json_t *c = json_deep_copy(d->pub.slices);
        d->pub.passing = true;
        pthread_mutex_unlock(&d->lock);
        return c;
}

/* The events heard while the pass wrote, now that its answers are known. */
static void pass_end(struct dra *d) {
        size_t i;
        json_t *ev;
        pthread_mutex_lock(&d->lock);
        d->pub.passing = false;
        json_array_foreach(d->pub.heard, i, ev) {
                const json_t *o = json_array_get(ev, 0), *n = json_array_get(ev, 1);
                heard_locked(d, json_is_null(o) ? NULL : o, json_is_null(n) ? NULL : n);
        }
        json_array_clear(d->pub.heard);
        pthread_mutex_unlock(&d->lock);
}

struct existing {
        json_t *by_name; /* name → slice as the server has it */
        int64_t max_gen;
        bool mixed; /* generations differ */
};

static void collect(const char *key, const json_t *obj, struct existing *e) {
        json_int_t g = json_integer_value(
                json_object_get(json_object_get(json_object_get(obj, "spec"), "pool"), "generation"));
        if (json_object_size(e->by_name) > 0 && g != e->max_gen)
                e->mixed = true;
        e->max_gen = MAX(e->max_gen, (int64_t)g);
        json_object_set_new(e->by_name, key, json_deep_copy(obj));
}

static bool same_pool(const json_t *desired, const struct existing *e) {
        if (e->mixed || json_array_size(desired) != json_object_size(e->by_name))
                return false;
        size_t i;
        json_t *s;
        json_array_foreach(desired, i, s) {
                const char *name = json_string_value(json_object_get(json_object_get(s, "metadata"), "name"));
                json_t *have = json_object_get(e->by_name, name);
                json_t *a = comparable(s), *b = have ? comparable(have) : NULL;
                bool eq = a && b && json_equal(a, b);
                json_decref(a);
                json_decref(b);
                if (!eq)
                        return false;
        }
        return true;
}

/* Did the server keep the shared devices' fields? (A disabled feature gate drops them silently.) */
static bool kept_shared_fields(const json_t *sent_v1, const json_t *answer) {
        json_t *got = dra_slice_to_v1(answer);
        const json_t *sspec = json_object_get(sent_v1, "spec"), *gspec = json_object_get(got, "spec");
        bool ok = gspec && (!json_object_get(sspec, "sharedCounters") || json_object_get(gspec, "sharedCounters"));
        size_t i;
        json_t *dev;
        json_array_foreach(json_object_get(sspec, "devices"), i, dev) {
                const json_t *g = json_array_get(json_object_get(gspec, "devices"), i);
                if (json_is_true(json_object_get(dev, "allowMultipleAllocations")) &&
                    !json_is_true(json_object_get(g, "allowMultipleAllocations")))
                        ok = false;
                if (json_object_get(dev, "consumesCounters") && !json_object_get(g, "consumesCounters"))
                        ok = false;
        }
        json_decref(got);
        return ok;
}

/* Did the server keep the devices' taints? (1.34, 1.35 drop them: DRADeviceTaints off.) */
static bool kept_taints(const json_t *sent_v1, const json_t *answer) {
        json_t *got = dra_slice_to_v1(answer);
        size_t i;
        json_t *dev;
        bool ok = true;
        json_array_foreach(json_object_get(json_object_get(sent_v1, "spec"), "devices"), i, dev) {
                const json_t *g = json_array_get(json_object_get(json_object_get(got, "spec"), "devices"), i);
                if (json_array_size(json_object_get(dev, "taints")) > json_array_size(json_object_get(g, "taints")))
                        ok = false;
        }
        json_decref(got);
        return ok;
}

/* ---- one pass ---- */

struct pass {
        struct dra *d;
        char version[16];
        char node_uid[DRA_UID_MAX];
        struct dra_slice_input in;
        struct dra_mig *mig; /* the pass's copy of the MIG side (in.mig points here) */
        bool shared;         /* this pass publishes counters or shared devices */
};

static void base_path(const struct pass *p, char *buf, size_t len) {
        snprintf(buf, len, "/apis/resource.k8s.io/%s/resourceslices", p->version);
}

/* After a 409, the slice as the server has it now: the next pass compares with that. */
static void reread(struct pass *p, const char *name) {
        char path[DRA_MAX_POOL_NAME + 80];
        json_t *now = NULL;
        base_path(p, path, sizeof path);
        size_t l = strlen(path);
        snprintf(path + l, sizeof path - l, "/%s", name);
        int r = kube_request(p->d->kube, KUBE_GET, path, NULL, &now, NULL);
        if (r == 0 && json_is_object(now))
                wrote(p->d, name, now);
        else if (r == -ENOENT)
                forget(p->d, name);
        json_decref(now);
}

#define DROPPED_SHARED 1
#define DROPPED_TAINTS 2

/* Write one slice (create or replace); DROPPED_* bits for the fields the server dropped. */
static int write_slice(struct pass *p, const json_t *slice_v1, const json_t *have, struct gs_error *err) {
        char path[DRA_MAX_POOL_NAME + 80];
        const char *name = json_string_value(json_object_get(json_object_get(slice_v1, "metadata"), "name"));
        json_t *body = dra_slice_for_version(slice_v1, p->version);
        json_t *meta = json_object_get(body, "metadata");
        if (!body)
                return gs_error_set(err, -ENOMEM, "out of memory");
        if (p->node_uid[0])
                json_object_set_new(meta, "ownerReferences",
                                    json_pack("[{s:s, s:s, s:s, s:s, s:b}]", "apiVersion", "v1", "kind", "Node", "name",
                                              p->d->node, "uid", p->node_uid, "controller", true));
        if (have)
                json_object_set(meta, "resourceVersion",
                                json_object_get(json_object_get(have, "metadata"), "resourceVersion"));
        base_path(p, path, sizeof path);
        if (have) {
                size_t l = strlen(path);
                snprintf(path + l, sizeof path - l, "/%s", name);
        }
        char *text = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        json_t *answer = NULL;
        struct kube_error ke = { 0 };
        int r = text ? kube_request(p->d->kube, have ? KUBE_PUT : KUBE_POST, path, text, &answer, &ke) : -ENOMEM;
        free(text);
        if (r == -ENOENT && have) { /* deleted since it was published (a kubelet's wipe): created again */
                count_write("error");
                forget(p->d, name);
                json_decref(answer);
                return write_slice(p, slice_v1, NULL, err);
        }
        if (r < 0) {
                count_write("error");
                if (r == -EEXIST || r == -ESTALE)
                        reread(p, name);
                json_decref(answer);
                return gs_error_set(err, r, "%s ResourceSlice %s: %s", have ? "PUT" : "POST", name,
                                    ke.message[0] ? ke.message : strerror(-r));
        }
        count_write(have ? "updated" : "created");
        if (json_is_object(answer))
                wrote(p->d, name, answer);
        int dropped = (p->shared && !kept_shared_fields(slice_v1, answer) ? DROPPED_SHARED : 0) |
                      (!kept_taints(slice_v1, answer) ? DROPPED_TAINTS : 0);
        json_decref(answer);
        return dropped;
}

static int delete_slice(struct pass *p, const char *name, struct gs_error *err) {
        char path[DRA_MAX_POOL_NAME + 80];
        base_path(p, path, sizeof path);
        size_t l = strlen(path);
        snprintf(path + l, sizeof path - l, "/%s", name);
        struct kube_error ke = { 0 };
        int r = kube_request(p->d->kube, KUBE_DELETE, path, NULL, NULL, &ke);
        if (r < 0 && r != -ENOENT) {
                count_write("error");
                return gs_error_set(err, r, "DELETE ResourceSlice %s: %s", name,
                                    ke.message[0] ? ke.message : strerror(-r));
        }
        count_write("deleted");
        forget(p->d, name);
        return 0;
}

static void withdraw_taints(struct dra *d) {
        pthread_mutex_lock(&d->lock);
        bool was = d->taints_ok;
        d->taints_ok = false;
        dra_publish_kick_locked(d);
        pthread_mutex_unlock(&d->lock);
        if (was)
                dra_log(d, DRA_LOG_WARN, "the API server does not keep device taints: unhealthy GPUs are left out",
                        "needs=\"Kubernetes 1.36 (DRADeviceTaints)\"");
}

static void withdraw_sharing(struct dra *d, const char *why) {
        pthread_mutex_lock(&d->lock);
        bool was = d->sharing_ok;
        d->sharing_ok = false;
        dra_publish_kick_locked(d);
        pthread_mutex_unlock(&d->lock);
        if (was)
                dra_log(d, DRA_LOG_WARN, "the API server does not keep shared devices: publishing whole GPUs only",
                        "why=\"%s\" needs=\"Kubernetes 1.36 (DRAConsumableCapacity, DRAPartitionableDevices)\"", why);
}

/* lint: long — one pass in order: what should be, what is, nothing to do, the new generation written slice by
 * slice, the slices no longer wanted deleted; each write's failure ends the pass. */
static int sync_pool(struct pass *p, struct gs_error *err) {
        struct dra *d = p->d;
        struct existing e = { .by_name = json_object() };
        json_t *desired = NULL, *published = pass_begin(d);
        const char *key;
        json_t *obj;
        json_object_foreach(published, key, obj) {
                collect(key, obj, &e);
        }
        json_decref(published);
        if (!e.by_name) {
                pass_end(d);
                return gs_error_set(err, -ENOMEM, "out of memory");
        }
        int r = dra_slices_build(&p->in, &desired);
        if (r < 0) {
                json_decref(e.by_name);
                pass_end(d);
                return gs_error_set(err, r, "cannot build the slices: %s", strerror(-r));
        }
        if (same_pool(desired, &e)) {
                pthread_mutex_lock(&d->lock);
                d->generation = MAX(d->generation, e.max_gen);
                pthread_mutex_unlock(&d->lock);
                goto out;
        }
        p->in.generation = MAX(e.max_gen, p->in.generation) + 1;
        json_decref(desired);
        if ((r = dra_slices_build(&p->in, &desired)) < 0) {
                gs_error_set(err, r, "cannot build the slices: %s", strerror(-r));
                goto out;
        }
        size_t i, devices = 0;
        json_t *s;
        int dropped = 0;
        json_array_foreach(desired, i, s) {
                const char *name = json_string_value(json_object_get(json_object_get(s, "metadata"), "name"));
                devices += json_array_size(json_object_get(json_object_get(s, "spec"), "devices"));
                if ((r = write_slice(p, s, json_object_get(e.by_name, name), err)) < 0)
                        goto out;
                dropped |= r;
                json_object_del(e.by_name, name);
        }
        const char *name;
        json_t *old;
        json_object_foreach(e.by_name, name, old) {
                if ((r = delete_slice(p, name, err)) < 0)
                        goto out;
        }
        r = 0;
        pthread_mutex_lock(&d->lock);
        d->generation = p->in.generation;
        pthread_mutex_unlock(&d->lock);
        dra_log(d, DRA_LOG_INFO, "ResourceSlices published",
                "pool=%s generation=%" PRId64 " slices=%zu devices=%zu api=%s", d->node, p->in.generation,
                json_array_size(desired), devices, p->version);
        if (dropped & DROPPED_SHARED)
                withdraw_sharing(d, "the server dropped allowMultipleAllocations, consumesCounters or sharedCounters");
        if (dropped & DROPPED_TAINTS)
                withdraw_taints(d);
out:
        pass_end(d);
        json_decref(desired);
        json_decref(e.by_name);
        return r;
}

/* ---- the API ---- */

static int find_version(struct dra *d, char *buf, size_t len, struct gs_error *err);

int dra_api_version(struct dra *d, char *buf, size_t len, struct gs_error *err) {
        pthread_mutex_lock(&d->lock);
        strscpy(buf, d->api_version, len);
        pthread_mutex_unlock(&d->lock);
        if (buf[0])
                return 0;
        int r = find_version(d, buf, len, err);
        if (r == 0) {
                pthread_mutex_lock(&d->lock);
                if (!d->api_version[0])
                        strscpy(d->api_version, buf, sizeof d->api_version);
                pthread_mutex_unlock(&d->lock);
        }
        return r;
}

static int find_version(struct dra *d, char *buf, size_t len, struct gs_error *err) {
        json_t *group = NULL;
        struct kube_error ke = { 0 };
        int r = kube_request(d->kube, KUBE_GET, "/apis/resource.k8s.io", NULL, &group, &ke);
        if (r < 0)
                return gs_error_set(err, r, "GET /apis/resource.k8s.io: %s", ke.message[0] ? ke.message : strerror(-r));
        static const char *const prefer[] = { "v1", "v1beta2", "v1beta1" };
        r = gs_error_set(err, -ENOENT, "the server serves none of resource.k8s.io v1, v1beta2, v1beta1");
        for (size_t k = 0; k < ELEMENTSOF(prefer) && r < 0; k++) {
                size_t i;
                json_t *v;
                json_array_foreach(json_object_get(group, "versions"), i, v) {
                        const char *ver = json_string_value(json_object_get(v, "version"));
                        if (ver && streq(ver, prefer[k])) {
                                strscpy(buf, ver, len);
                                r = 0;
                        }
                }
        }
        json_decref(group);
        return r;
}

static void node_uid(struct dra *d, char *buf, size_t len) {
        char path[DRA_MAX_POOL_NAME + 20];
        json_t *node = NULL;
        buf[0] = '\0';
        snprintf(path, sizeof path, "/api/v1/nodes/%s", d->node);
        if (kube_request(d->kube, KUBE_GET, path, NULL, &node, NULL) == 0) {
                const char *uid = json_string_value(json_object_get(json_object_get(node, "metadata"), "uid"));
                if (uid && strlen(uid) < len)
                        strscpy(buf, uid, len);
        }
        json_decref(node);
}

static void on_slices_changed(const json_t *old_obj, const json_t *new_obj, void *userdata) {
        struct dra *d = userdata;
        pthread_mutex_lock(&d->lock);
        if (d->pub.passing) /* copies: the informer's objects are not this thread's */
                json_array_append_new(d->pub.heard, json_pack("[oo]", old_obj ? json_deep_copy(old_obj) : json_null(),
                                                              new_obj ? json_deep_copy(new_obj) : json_null()));
        else
                heard_locked(d, old_obj, new_obj);
        pthread_mutex_unlock(&d->lock);
}

static void on_synced(void *userdata) {
        struct dra *d = userdata;
        pthread_mutex_lock(&d->lock);
        dra_publish_kick_locked(d);
        pthread_mutex_unlock(&d->lock);
}

static int start_informer(struct dra *d, const char *version, struct gs_error *err) {
        char path[80], fs[DRA_MAX_POOL_NAME + DRA_MAX_DOMAIN + 40];
        snprintf(path, sizeof path, "/apis/resource.k8s.io/%s/resourceslices", version);
        snprintf(fs, sizeof fs, "spec.nodeName=%s,spec.driver=%s", d->node, d->driver);
        struct kube_informer_handlers h = { .changed = on_slices_changed, .synced = on_synced, .userdata = d };
        int r = kube_informer_new(d->kube, path, NULL, fs, NULL, &h, &d->informer);
        r = r ?: kube_informer_start(d->informer);
        if (r < 0)
                return gs_error_set(err, r, "cannot watch %s: %s", path, strerror(-r));
        if (kube_informer_wait_synced(d->informer, 30000) < 0)
                return gs_error_set(err, -ETIMEDOUT, "no list of %s within 30 s", path);
        return 0;
}

/* ---- the thread ---- */

/* Sleep until kicked, stopped or `seconds` passed (lock held). */
static void wait_kick(struct dra *d, unsigned seconds) {
        struct timespec until = timespec_after_ms(CLOCK_MONOTONIC, (uint64_t)seconds * 1000);
        while (!d->publish_dirty && !atomic_load(&d->stop))
                if (pthread_cond_timedwait(&d->publish_wake, &d->lock, &until) != 0)
                        break;
}

/* Let a burst of changes land before the pass (lock held). */
static void settle(struct dra *d, unsigned ms) {
        struct timespec until = timespec_after_ms(CLOCK_MONOTONIC, ms);
        while (!atomic_load(&d->stop))
                if (pthread_cond_timedwait(&d->publish_wake, &d->lock, &until) != 0)
                        break;
}

/* The API version, the node's UID and the informer, retried until they are there. */
static bool connect_api(struct dra *d, struct pass *p) {
        unsigned backoff = 1;
        for (;;) {
                struct gs_error err = { 0 };
                int r = find_version(d, p->version, sizeof p->version, &err);
                pthread_mutex_lock(&d->lock);
                json_object_clear(d->pub.slices); /* the new informer's list tells what is published */
                pthread_mutex_unlock(&d->lock);
                if (r == 0)
                        r = start_informer(d, p->version, &err);
                if (r == 0) {
                        node_uid(d, p->node_uid, sizeof p->node_uid);
                        pthread_mutex_lock(&d->lock);
                        strscpy(d->api_version, p->version, sizeof d->api_version);
                        pthread_mutex_unlock(&d->lock);
                        dra_log(d, DRA_LOG_INFO, "publishing ResourceSlices",
                                "api=resource.k8s.io/%s driver=%s pool=%s", p->version, d->driver, d->node);
                        return true;
                }
                d->informer = kube_informer_free(d->informer);
                dra_log(d, DRA_LOG_WARN, "the resource.k8s.io API is not usable yet", "error=\"%s\" retry_s=%u",
                        err.message, backoff);
                pthread_mutex_lock(&d->lock);
                d->publish_dirty = false;
                wait_kick(d, backoff);
                pthread_mutex_unlock(&d->lock);
                if (atomic_load(&d->stop))
                        return false;
                backoff = MIN(backoff * 2, (unsigned)BACKOFF_MAX_S);
        }
}

static void *publisher(void *userdata) {
        struct dra *d = userdata;
        struct pass p = { .d = d, .mig = malloc(sizeof *p.mig) };
        if (!p.mig || !connect_api(d, &p)) {
                free(p.mig);
                return NULL;
        }
        unsigned backoff = 0;
        pthread_mutex_lock(&d->lock);
        d->publish_dirty = true;
        for (;;) {
                wait_kick(d, backoff ? backoff : RESYNC_S);
                if (d->publish_dirty)
                        settle(d, SETTLE_MS);
                if (atomic_load(&d->stop))
                        break;
                pthread_mutex_unlock(&d->lock);
                dra_mig_refresh(d); /* a layout changed behind the driver's back is published at the next pass */
                pthread_mutex_lock(&d->lock);
                d->publish_dirty = false;
                dra_slice_input_locked(d, &p.in);
                if (p.in.mig) {
                        memcpy(p.mig, p.in.mig, sizeof *p.mig);
                        p.in.mig = p.mig;
                }
                p.shared = p.in.sharing || (p.in.mig && !p.in.counters_dropped);
                pthread_mutex_unlock(&d->lock);
                struct gs_error err = { 0 };
                int r = sync_pool(&p, &err);
                if (r == -EINVAL && p.shared) /* refused: a server whose rules for these fields differ */
                        withdraw_sharing(d, err.message);
                else if (r < 0)
                        dra_log(d, DRA_LOG_WARN, "cannot publish the ResourceSlices", "error=\"%s\"", err.message);
                pthread_mutex_lock(&d->lock);
                if (r < 0) {
                        backoff = MIN(MAX(backoff * 2, 1u), (unsigned)BACKOFF_MAX_S);
                        d->publish_dirty = r != -EINVAL || p.shared; /* retried at the backoff's end */
                } else
                        backoff = 0;
        }
        pthread_mutex_unlock(&d->lock);
        free(p.mig);
        return NULL;
}

static void pub_free(struct dra_published *pub) {
        json_decref(pub->slices);
        json_decref(pub->own_rvs);
        json_decref(pub->heard);
        *pub = (struct dra_published){ 0 };
}

int dra_publish_start(struct dra *d, struct gs_error *err) {
        d->pub = (struct dra_published){ .slices = json_object(), .own_rvs = json_array(), .heard = json_array() };
        if (!d->pub.slices || !d->pub.own_rvs || !d->pub.heard) {
                pub_free(&d->pub);
                return gs_error_set(err, -ENOMEM, "out of memory");
        }
        int r = pthread_create(&d->publisher, NULL, publisher, d);
        if (r != 0) {
                pub_free(&d->pub);
                return gs_error_set(err, -r, "cannot start the publisher: %s", strerror(r));
        }
        d->publisher_running = true;
        return 0;
}

void dra_publish_stop(struct dra *d) {
        if (!d->publisher_running)
                return;
        pthread_mutex_lock(&d->lock);
        atomic_store(&d->stop, true);
        pthread_cond_broadcast(&d->publish_wake);
        pthread_mutex_unlock(&d->lock);
        pthread_join(d->publisher, NULL);
        d->publisher_running = false;
        d->informer = kube_informer_free(d->informer);
        pub_free(&d->pub);
}
