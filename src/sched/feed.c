/* SPDX-License-Identifier: Apache-2.0 */
/*
 * feed.c — informers → the extender's model, and the binder over the API (see feed.h). Built only
 * when src/kube (the Kubernetes API client) is part of the tree.
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kube/kube.h"
#include "sched/feed.h"
#include "util/util.h"

struct sched_feed {
        struct kube_config cfg;
        struct kube_client *client;
        struct kube_informer *nodes, *pods;
        struct sched_server *server;
        struct cluster_units units;
        struct sched_binder binder;
        bool nodes_synced, pods_synced;      /* under the server lock */
        struct cluster_node_info *node_info; /* scratch, used with the server lock held */
        struct cluster_pod *pod_view;
};

static bool dns_name(const char *s) {
        if (!s[0] || strlen(s) > 253)
                return false;
        for (const char *p = s; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
                        return false;
        return true;
}

static const char *meta_str(const json_t *obj, const char *key) {
        return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

static void node_changed(const json_t *old_obj, const json_t *new_obj, void *userdata) {
        struct sched_feed *f = userdata;
        struct sched_model *m = sched_server_lock(f->server);
        struct gs_error err = { 0 };
        int r = new_obj ? cluster_node_decode_json(new_obj, f->node_info, &err) : -ENOENT;
        if (r == 0 && sched_model_set_node(m, f->node_info) == 0) {
                /* what kube-scheduler's NodeResourcesFit reads of it (the packing policies' CPU and memory
                 * stranding); not a quantity: not known (0) */
                uint64_t cpu, mem;
                if (cluster_node_allocatable(new_obj, &cpu, &mem, &err) < 0)
                        cpu = mem = 0;
                (void)sched_model_set_node_resources(m, f->node_info->name, cpu, mem, NULL);
        } else if (r < 0) {
                /* gone, or its annotation is gone or invalid: no GPUs for the extender */
                const char *name = meta_str(new_obj ? new_obj : old_obj, "name");
                if (name)
                        (void)sched_model_remove_node(m, name);
        }
        sched_server_unlock(f->server);
}

static void pod_changed(const json_t *old_obj, const json_t *new_obj, void *userdata) {
        struct sched_feed *f = userdata;
        struct sched_model *m = sched_server_lock(f->server);
        struct gs_error err = { 0 };
        if (new_obj && cluster_pod_decode_json(new_obj, &f->units, f->pod_view, &err) == 0) {
                struct sched_pod_info info;
                sched_pod_view_info(f->pod_view, &info);
                (void)sched_model_set_pod(m, &info);
                if (f->pod_view->node_name[0] || f->pod_view->terminated)
                        sched_server_pod_settled(f->server, f->pod_view->uid); /* no longer pending */
                else
                        sched_server_pod_pending(f->server, f->pod_view); /* the policies' mix at start */
        } else {
                /* deleted, slimmed away (finished), or malformed: holds nothing we can count */
                const char *uid = meta_str(new_obj ? new_obj : old_obj, "uid");
                if (uid) {
                        (void)sched_model_remove_pod(m, uid);
                        sched_server_pod_settled(f->server, uid);
                }
        }
        sched_server_unlock(f->server);
}

static void update_ready(struct sched_feed *f, bool *flag) {
        struct sched_model *m = sched_server_lock(f->server);
        (void)m;
        *flag = true;
        bool ready = f->nodes_synced && f->pods_synced;
        sched_server_unlock(f->server);
        if (ready)
                sched_server_set_ready(f->server, true);
}

static void nodes_synced(void *userdata) {
        struct sched_feed *f = userdata;
        update_ready(f, &f->nodes_synced);
}

static void pods_synced(void *userdata) {
        struct sched_feed *f = userdata;
        update_ready(f, &f->pods_synced);
}

static int api_error(int r, const struct kube_error *e, struct gs_error *err) {
        return gs_error_set(err, r, "%s%s%s (HTTP %ld)", e->reason[0] ? e->reason : "", e->reason[0] ? ": " : "",
                            e->message[0] ? e->message : strerror(-r), e->http);
}

/* For the e2e restart case only: GPUSLICE_CRASH_AT=bind-written in the extender's environment (read
 * with secure_getenv) makes it SIGKILL itself right after a Binding was accepted, before kube-scheduler
 * hears the answer: "killed after the bind" (docs/scheduler.md). */
static void crash_point(const char *point) {
        if (crash_point_due(point))
                (void)kill(getpid(), SIGKILL);
}

/* A Binding in flight: whom to tell its end. */
struct feed_bind_call {
        sched_bound_fn done;
        void *cookie;
};

/* Thread: the API client's request thread. */
static void feed_bound(void *u, int r, json_t *ret, const struct kube_error *e) {
        struct feed_bind_call *fc = u;
        struct gs_error err = { 0 };
        json_decref(ret);
        if (r < 0)
                api_error(r, e, &err);
        else
                crash_point("bind-written");
        fc->done(fc->cookie, r, &err);
        free(fc);
}

static void feed_bind(void *userdata, const char *ns, const char *name, const char *uid, const char *rv,
                      const char *node, const char *annotations_json, sched_bound_fn done, void *cookie) {
        struct sched_feed *f = userdata;
        struct gs_error err = { 0 };
        if (!dns_name(ns) || !dns_name(name)) {
                done(cookie, gs_error_set(&err, -EINVAL, "not a valid pod name"), &err);
                return;
        }
        json_t *ann = annotations_json ? json_loads(annotations_json, 0, NULL) : NULL;
        if (annotations_json && !json_is_object(ann)) {
                json_decref(ann);
                done(cookie, gs_error_set(&err, -EINVAL, "the assignment annotations are not a JSON object"), &err);
                return;
        }
        struct feed_bind_call *fc = malloc(sizeof *fc);
        int r = fc ? 0 : -ENOMEM;
        if (fc) {
                *fc = (struct feed_bind_call){ done, cookie };
                r = kube_pod_bind_start(f->client, ns, name, uid, rv, node, ann, feed_bound, fc);
        }
        json_decref(ann);
        if (r < 0) {
                free(fc);
                done(cookie, gs_error_set(&err, r, "cannot start the Binding: %s", strerror(-r)), &err);
        }
}

int sched_feed_new(const char *kubeconfig, const char *context, struct sched_feed **ret, struct gs_error *err) {
        struct sched_feed *f = calloc(1, sizeof *f);
        if (!f)
                return -ENOMEM;
        f->node_info = malloc(sizeof *f->node_info);
        f->pod_view = malloc(sizeof *f->pod_view);
        if (!f->node_info || !f->pod_view) {
                sched_feed_free(f);
                return -ENOMEM;
        }
        int r = kube_config_load(kubeconfig, context, &f->cfg, err);
        if (r < 0) {
                sched_feed_free(f);
                return r;
        }
        r = kube_client_new(&f->cfg, &f->client);
        if (r < 0) {
                gs_error_set(err, r, "cannot create the API client for %s", f->cfg.server ? f->cfg.server : "?");
                sched_feed_free(f);
                return r;
        }
        kube_client_set_timeout(f->client, 4000); /* bind must answer within kube-scheduler's 5 s */
        f->binder = (struct sched_binder){ feed_bind, f };
        *ret = f;
        return 0;
}

const struct sched_binder *sched_feed_binder(struct sched_feed *f) {
        return &f->binder;
}

int sched_feed_run(struct sched_feed *f, struct sched_server *s, const struct cluster_units *u, struct gs_error *err) {
        f->server = s;
        f->units = *u;
        struct kube_informer_handlers hn = { node_changed, nodes_synced, f };
        struct kube_informer_handlers hp = { pod_changed, pods_synced, f };
        int r = kube_informer_new(f->client, "/api/v1/nodes", NULL, NULL, kube_slim_node, &hn, &f->nodes);
        if (r >= 0)
                r = kube_informer_new(f->client, "/api/v1/pods", NULL, NULL, kube_slim_pod_requests, &hp, &f->pods);
        if (r >= 0)
                r = kube_informer_start(f->nodes);
        if (r >= 0)
                r = kube_informer_start(f->pods);
        if (r < 0)
                gs_error_set(err, r, "cannot start the node and pod watches: %s", strerror(-r));
        return r;
}

struct sched_feed *sched_feed_free(struct sched_feed *f) {
        if (!f)
                return NULL;
        f->pods = kube_informer_free(f->pods);
        f->nodes = kube_informer_free(f->nodes);
        f->client = kube_client_free(f->client);
        kube_config_done(&f->cfg);
        free(f->node_info);
        free(f->pod_view);
        free(f);
        return NULL;
}
