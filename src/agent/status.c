/* SPDX-License-Identifier: Apache-2.0 */
/*
 * status — the agent's status server: `GET /v1/status` over HTTP on the unix socket
 * <state-dir>/gpuslice.sock (src/http, libmicrohttpd, its own thread), answering the devices,
 * their health and who holds them as one line of JSON (agent.h). A request first reconciles with
 * PodResources (at most every 250 ms, podsync.c) so holders are current.
 * Must never: hold the device lock while talking to a peer, or let a slow client hold up the loop
 * (the server has its own thread, connection limits and a 10 s idle timeout).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "agent/agent.h"
#include "agent/node-internal.h"
#include "agent/timeslice.h"
#include "dra/dra.h"
#include "http/http.h"
#include "util/log.h"
#include "util/util.h"

static json_t *holder_json(const struct state_alloc *a) {
        json_t *h = json_object();
        json_object_set_new(h, "namespace", json_string(a->pod_namespace));
        json_object_set_new(h, "pod", json_string(a->pod_name));
        json_object_set_new(h, "container", json_string(a->container));
        json_object_set_new(h, "since", json_integer((json_int_t)a->alloc_time));
        return h;
}

/* A time-sliced (or MPS) GPU's held replicas: [{"id": "<uuid>::<j>", "holder": {...}}]. Caller holds the lock. */
static json_t *replicas_json(struct plugin *p, const struct device_info *g) {
        json_t *arr = json_array();
        int gi = devices_find(plugin_devices(p), g->id);
        unsigned set = gi >= 0 && plugin_replica_set_of(p, (unsigned)gi) >= 0
                               ? (unsigned)plugin_replica_set_of(p, (unsigned)gi)
                               : 0;
        for (unsigned j = 0; gi >= 0 && j < plugin_replicas_of(p, (unsigned)gi); j++) {
                char id[TIMESLICE_ID_MAX];
                timeslice_format_id(g->id, j, id, sizeof id);
                const struct state_alloc *a = state_find(plugin_record(p), plugin_replica_resource(p, set), id);
                if (!a)
                        continue;
                json_t *r = json_object();
                json_object_set_new(r, "id", json_string(id));
                json_object_set_new(r, "holder", holder_json(a));
                json_array_append_new(arr, r);
        }
        return arr;
}

static json_t *status_json(struct node *n) {
        json_t *root = json_object();
        json_t *devs = json_array();
        struct plugin *p = n->plugin;

        pthread_mutex_lock(&n->status_lock);
        json_object_set_new(root, "resource", json_string(plugin_resource(p, PLUGIN_WHOLE)));
        json_object_set_new(root, "endpoint", json_string(n->ep[0].socket_path));
        json_object_set_new(root, "registered", json_boolean(n->ep[0].registered));
        json_object_set_new(root, "registrations", json_integer((json_int_t)n->ep[0].n_registrations));
        json_t *res = json_array();
        for (unsigned k = 0; k < n->n_ep; k++) {
                json_t *e = json_object();
                json_object_set_new(e, "resource", json_string(n->ep[k].resource));
                json_object_set_new(e, "endpoint", json_string(n->ep[k].socket_path));
                json_object_set_new(e, "registered", json_boolean(n->ep[k].registered));
                json_object_set_new(e, "registrations", json_integer((json_int_t)n->ep[k].n_registrations));
                json_array_append_new(res, e);
        }
        pthread_mutex_unlock(&n->status_lock);
        json_object_set_new(root, "resources", res);
        json_object_set_new(root, "mig_strategy", json_string(config_mig_strategy_name(n->cfg.mig_strategy)));
        if (n->mig_error[0]) /* the node does not fit `single`: nothing is served */
                json_object_set_new(root, "mig_error", json_string(n->mig_error));

        struct devices *dev = n->devices;
        devices_lock(dev);
        struct plugin_usage use;
        plugin_usage(p, &use);
        struct plugin_counters c = plugin_counters(p);
        json_object_set_new(root, "allocate_calls", json_integer((json_int_t)c.allocate));
        json_object_set_new(root, "preferred_calls", json_integer((json_int_t)c.preferred));
        json_object_set_new(root, "rejected_calls", json_integer((json_int_t)c.errors));
        json_object_set_new(root, "driver_version", json_string(devices_topo(dev)->driver_version));
        for (unsigned i = 0; i < devices_count(dev); i++) {
                const struct device_info *g = devices_info(dev, i);
                bool healthy = devices_healthy(dev, i);
                json_t *d = json_object();
                json_object_set_new(d, "id", json_string(g->id));
                json_object_set_new(d, "index", json_integer(g->index));
                json_object_set_new(d, "minor", json_integer(g->minor));
                json_object_set_new(d, "numa", json_integer(g->numa));
                json_object_set_new(d, "health", json_string(healthy ? "Healthy" : "Unhealthy"));
                if (g->kind == DEVICE_MIG) {
                        json_object_set_new(d, "kind", json_string("mig"));
                        json_object_set_new(d, "parent", json_string(devices_info(dev, (unsigned)g->parent)->id));
                        json_object_set_new(d, "mig_index", json_integer(g->mig_index));
                        json_object_set_new(d, "profile", json_string(g->profile));
                        json_object_set_new(d, "gpu_instance", json_integer(g->gi));
                        json_object_set_new(d, "compute_instance", json_integer(g->ci));
                } else if (g->mig_mode)
                        json_object_set_new(d, "mig_mode", json_true());
                if (!healthy)
                        json_object_set_new(d, "reason", json_string(devices_reason(dev, i)));
                if (plugin_options(p)->core_resource[0] || plugin_options(p)->memory_resource[0]) {
                        json_object_set_new(d, "core_used", json_integer(use.core[i]));
                        json_object_set_new(
                                d, "memory_used_bytes",
                                json_integer((json_int_t)((uint64_t)use.mem[i] * plugin_options(p)->memory_unit)));
                        json_object_set_new(d, "memory_ids", json_integer(g->n_mem));
                }
                const struct state_alloc *a = state_find(plugin_record(p), plugin_device_resource(p, i), g->id);
                json_object_set_new(d, "holder", a ? holder_json(a) : json_null());
                if ((plugin_replicated(p) >> i) & 1) /* time-sliced / MPS: who holds which replica */
                        json_object_set_new(d, "replicas", replicas_json(p, g));
                json_array_append_new(devs, d);
        }
        devices_unlock(dev);
        json_object_set_new(root, "devices", devs);
        if (n->dra) /* --dra: the driver's registration and prepared claims */
                json_object_set_new(root, "dra", dra_status(n->dra));
        return root;
}

/* On the status server's thread. */
static void serve_status(void *userdata, const struct http_request *req, struct http_response *resp) {
        struct node *n = userdata;
        if (!streq(req->method, "GET") && !streq(req->method, "HEAD")) {
                resp->status = 405;
                return;
        }
        podsync_status_request(n);
        json_t *j = status_json(n);
        char *s = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        if (!s) {
                resp->status = 500;
                return;
        }
        size_t len = strlen(s);
        char *body = realloc(s, len + 2);
        if (!body) {
                free(s);
                resp->status = 500;
                return;
        }
        body[len++] = '\n';
        body[len] = 0;
        resp->body = body;
        resp->body_len = len;
        strscpy(resp->content_type, "application/json", sizeof resp->content_type);
}

int status_start(struct node *n) {
        char addr[PATH_MAX + 8];
        if ((size_t)snprintf(addr, sizeof addr, "unix:%s", n->status_path) >= sizeof addr)
                return log_error_errno(-ENAMETOOLONG, "status socket path too long", "path=%s", n->status_path);
        int r = http_server_new(addr, &n->status);
        if (r == -EINVAL)
                return log_error_errno(-ENAMETOOLONG, "status socket path too long", "path=%s", n->status_path);
        if (r >= 0)
                r = http_server_handle(n->status, AGENT_STATUS_URL_PATH, serve_status, n);
        if (r >= 0)
                r = http_server_start(n->status);
        if (r < 0) {
                n->status = http_server_free(n->status);
                return log_error_errno(r, "cannot listen on the status socket", "path=%s", n->status_path);
        }
        return 0;
}

void status_stop(struct node *n) {
        n->status = http_server_free(n->status);
}
