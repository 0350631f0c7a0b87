/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/writes — the typed writes of kube.h: pod annotations with a resourceVersion precondition,
 * Bindings (with the annotations they set in the same update), Events. Bodies are built with jansson (never by pasting strings); names go into paths
 * escaped. Never logs.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "kube/kube.h"
#include "util/util.h"

static int post_json(struct kube_client *c, enum kube_method m, const char *path, json_t *body, struct kube_error *e) {
        if (!body)
                return -ENOMEM;
        char *s = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        if (!s)
                return -ENOMEM;
        int r = kube_request(c, m, path, s, NULL, e);
        free(s);
        return r;
}

static int object_path(char *buf, size_t len, const char *ns, const char *res, const char *name, const char *sub) {
        char ens[256], ename[512];
        if (!kube_escape(ns, ens, sizeof ens) || !kube_escape(name, ename, sizeof ename))
                return -ENAMETOOLONG;
        int n = snprintf(buf, len, "/api/v1/namespaces/%s/%s/%s%s%s", ens, res, ename, sub ? "/" : "", sub ? sub : "");
        return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

int kube_pod_annotate(struct kube_client *c, const char *ns, const char *name, const char *resource_version,
                      const char *const *keys, const char *const *values, size_t n, struct kube_error *e) {
        char path[1024];
        int r = object_path(path, sizeof path, ns, "pods", name, NULL);
        if (r < 0)
                return r;
        json_t *ann = json_object(), *meta = json_object();
        if (!ann || !meta) {
                json_decref(ann);
                json_decref(meta);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                json_object_set_new(ann, keys[i], values[i] ? json_string(values[i]) : json_null());
        json_object_set_new(meta, "annotations", ann);
        if (resource_version)
                json_object_set_new(meta, "resourceVersion", json_string(resource_version));
        return post_json(c, KUBE_PATCH_MERGE, path, json_pack("{s:o}", "metadata", meta), e);
}

/* The Binding of kube_pod_bind: its path into path, its JSON text (malloc'ed) into *ret. */
static int binding(const char *ns, const char *name, const char *uid, const char *resource_version, const char *node,
                   const json_t *annotations, char *path, size_t path_len, char **ret) {
        int r = object_path(path, path_len, ns, "pods", name, "binding");
        if (r < 0)
                return r;
        if (annotations && !json_is_object(annotations))
                return -EINVAL;
        json_t *meta = json_pack("{s:s,s:s}", "name", name, "namespace", ns);
        if (meta && uid)
                json_object_set_new(meta, "uid", json_string(uid));
        if (meta && resource_version && resource_version[0])
                json_object_set_new(meta, "resourceVersion", json_string(resource_version));
        if (meta && annotations)
                json_object_set_new(meta, "annotations", json_deep_copy(annotations));
        json_t *body = json_pack("{s:s,s:s,s:o,s:{s:s,s:s,s:s}}", "apiVersion", "v1", "kind", "Binding", "metadata",
                                 meta, "target", "apiVersion", "v1", "kind", "Node", "name", node);
        *ret = body ? json_dumps(body, JSON_COMPACT) : NULL;
        json_decref(body);
        return *ret ? 0 : -ENOMEM;
}

int kube_pod_bind(struct kube_client *c, const char *ns, const char *name, const char *uid,
                  const char *resource_version, const char *node, const json_t *annotations, struct kube_error *e) {
        char path[1024], *body;
        int r = binding(ns, name, uid, resource_version, node, annotations, path, sizeof path, &body);
        if (r < 0)
                return r;
        r = kube_request(c, KUBE_POST, path, body, NULL, e);
        free(body);
        return r;
}

int kube_pod_bind_start(struct kube_client *c, const char *ns, const char *name, const char *uid,
                        const char *resource_version, const char *node, const json_t *annotations, kube_done_fn done,
                        void *userdata) {
        char path[1024], *body;
        int r = binding(ns, name, uid, resource_version, node, annotations, path, sizeof path, &body);
        if (r < 0)
                return r;
        r = kube_request_start(c, KUBE_POST, path, body, done, userdata);
        free(body);
        return r;
}

int kube_event_post(struct kube_client *c, const char *ns, const char *kind, const char *name, const char *uid,
                    const char *type, const char *reason, const char *message, const char *component,
                    struct kube_error *e) {
        const char *evns = ns && ns[0] ? ns : "default";
        char path[512], ens[256], ename[320], stamp[32];
        uint32_t rnd = 0;
        (void)!getrandom(&rnd, sizeof rnd, GRND_NONBLOCK);
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
        /* kubectl's naming: <object>.<unique hex> */
        snprintf(ename, sizeof ename, "%.200s.%" PRIx64 "%08" PRIx32, name, (uint64_t)now, rnd);
        if (!kube_escape(evns, ens, sizeof ens))
                return -ENAMETOOLONG;
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/events", ens);
        json_t *inv = json_pack("{s:s,s:s,s:s}", "apiVersion", "v1", "kind", kind, "name", name);
        if (inv && ns && ns[0])
                json_object_set_new(inv, "namespace", json_string(ns));
        if (inv && uid)
                json_object_set_new(inv, "uid", json_string(uid));
        return post_json(c, KUBE_POST, path,
                         json_pack("{s:s,s:s,s:{s:s,s:s},s:o,s:s,s:s,s:s,s:{s:s},s:s,s:s,s:i}", "apiVersion", "v1",
                                   "kind", "Event", "metadata", "name", ename, "namespace", evns, "involvedObject", inv,
                                   "type", type, "reason", reason, "message", message, "source", "component", component,
                                   "firstTimestamp", stamp, "lastTimestamp", stamp, "count", 1),
                         e);
}
