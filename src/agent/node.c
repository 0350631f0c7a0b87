/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node — `gpuslice node`, the kubelet device plugin daemon: loads NVML, serves the DevicePlugin
 * on a unix socket in the plugin dir, registers with kubelet, follows kubelet restarts (inotify),
 * keeps health (health.c), keeps the allocation record in the state file reconciled with
 * kubelet's PodResources, answers `gpuslice status` on <state-dir>/gpuslice.sock, and exits
 * cleanly on SIGTERM (sockets removed, exit 0), reloading its config on SIGHUP.
 *
 * One main thread runs the loop (signals, inotify, status socket, timers); gRPC calls run on the
 * rpc server's threads, health events on their own, each Register call on a thread of its own
 * (rpc_call_start; the loop learns of its end through an eventfd). Must never: block the loop on
 * kubelet's Register, block it on another peer for longer than a bounded timeout, or serve before
 * the plugin table is complete.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "agent/agent.h"
#include "agent/health.h"
#include "agent/plugin.h"
#include "agent/podres.h"
#include "agent/publish.h"
#include "agent/share.h"
#include "cdi/cdi.h"
#include "cli/commands.h"
#include "config/config.h"
#include "deviceplugin.pb-c.h"
#include "metrics/metrics.h"
#include "monitor/monitor.h"
#include "nvml/nvml.h"
#include "podresources.pb-c.h"
#include "rpc/rpc.h"
#include "state/state.h"
#include "util/log.h"
#include "util/util.h"

#define KUBELET_SOCKET "kubelet.sock"
#define REGISTER_TIMEOUT_MS 10000
#define REGISTER_BACKOFF_MIN_MS 1000
#define REGISTER_BACKOFF_MAX_MS 16000
#define PODRES_TIMEOUT_MS 2000
#define PODRES_SYNC_MS 10000
#define PROBE_MS 500
#define TICK_MS 100
#define STATE_GRACE_SEC 120 /* a fresh Allocate may not be listed by PodResources yet */

/* One resource name: its own socket, server and registration. */
struct endpoint {
        enum plugin_kind kind;
        const char *resource;       /* points into plugin->opt */
        char name[352];             /* socket file name in the plugin dir */
        char socket_path[PATH_MAX];
        struct rpc_server *server;
        bool registered;
        uint64_t n_registrations;
        uint64_t retry_register_ms; /* 0 = no retry pending */
        /* Register runs asynchronously (rpc_call_start): the loop never waits on kubelet. */
        struct rpc_client_call *reg_call; /* in flight, or NULL */
        uint64_t reg_started_ms;
        bool reg_again;      /* the call in flight was cancelled: register anew when it ends */
        uint64_t backoff_ms; /* next retry delay after a failed Register */
};

struct node {
        struct config_args args;
        struct gpuslice_config cfg;
        struct nvml *nvml;
        struct plugin *plugin;
        struct health health;
        struct endpoint ep[_PLUGIN_KIND_MAX];
        unsigned n_ep;
        char kubelet_target[PATH_MAX + 8];
        char kubelet_path[PATH_MAX];
        char status_path[PATH_MAX];
        int sigfd, inofd, statusfd;
        int regfd; /* eventfd: a Register call has ended */
        uint64_t next_probe_ms, next_sync_ms;
        bool cleanup_pending; /* limits dirs not checked yet: no trusted record at start */
        struct monitor_service *monitor; /* /metrics and /healthz; NULL when off or not started */
        uint64_t saved_generation;
        struct publish *publish; /* NULL: node-local only (publish.c) */
};

static void plugin_options_from_config(const struct gpuslice_config *cfg, struct plugin_options *o) {
        memset(o, 0, sizeof *o);
        strscpy(o->resource, config_whole_gpu_resource(cfg), sizeof o->resource);
        o->ids_by_index = cfg->device_id_strategy == CONFIG_DEVICE_ID_INDEX;
        o->list_envvar = cfg->device_list_strategy & CONFIG_DEVICE_LIST_ENVVAR;
        o->list_cdi = cfg->device_list_strategy & CONFIG_DEVICE_LIST_CDI;
        snprintf(o->cdi_kind, sizeof o->cdi_kind, "%s/%s", cfg->cdi_vendor, cfg->cdi_class);
        strscpy(o->dev_root, cfg->dev_root, sizeof o->dev_root);
        const struct config_profile_info *pi = config_profile_info(cfg->profile);
        if (pi && pi->core_resource)
                strscpy(o->core_resource, pi->core_resource, sizeof o->core_resource);
        if (pi && pi->memory_resource)
                strscpy(o->memory_resource, pi->memory_resource, sizeof o->memory_resource);
        o->memory_unit = o->memory_resource[0] ? config_memory_unit(cfg) : 0;
        o->spread = cfg->alloc_policy == CONFIG_POLICY_SPREAD;
        o->limit_when_alone = cfg->limit_when_alone;
        strscpy(o->interposer, cfg->interposer_library, sizeof o->interposer);
        if ((size_t)snprintf(o->limits_root, sizeof o->limits_root, "%.4080s/containers", cfg->state_dir) >=
            sizeof o->limits_root)
                o->limits_root[0] = 0; /* refused at Allocate: the state dir path is too long */
        strscpy(o->journal_dir, cfg->state_dir, sizeof o->journal_dir);
}

static void endpoint_name(const char *resource, char *buf, size_t len) {
        snprintf(buf, len, "gpuslice-%s.sock", resource);
        for (char *c = buf; *c; c++)
                if (*c == '/')
                        *c = '-';
}

/* ---- kubelet: serve and register ---- */

/* Start Register on kubelet.sock without waiting for it: kubelet calls GetDevicePluginOptions
 * back on our socket during the call (our server is serving already), and a hung kubelet must not
 * hold up signals, health probes or the status socket. The result arrives in register_finish.
 * A call already in flight is cancelled and started anew once it has ended. */
static void register_start(struct node *n, struct endpoint *ep) {
        if (ep->reg_call) {
                ep->reg_again = true;
                rpc_call_cancel(ep->reg_call);
                return;
        }
        V1beta1__DevicePluginOptions opts = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
        V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
        opts.get_preferred_allocation_available = 1;
        req.version = PLUGIN_API_VERSION;
        req.endpoint = ep->name;
        req.resource_name = (char *)ep->resource;
        req.options = &opts;

        _cleanup_(freep) uint8_t *buf = NULL;
        size_t len = 0;
        ep->registered = false;
        int r = rpc_pack(&req.base, &buf, &len);
        if (r >= 0)
                r = rpc_call_start(n->kubelet_target, "/v1beta1.Registration/Register", buf, len, REGISTER_TIMEOUT_MS,
                                   n->regfd, &ep->reg_call);
        if (r < 0) {
                log_error_errno(r, "cannot start the registration", "resource=%s", ep->resource);
                ep->retry_register_ms = health_now_ms() + ep->backoff_ms;
                return;
        }
        ep->reg_started_ms = health_now_ms();
        log_debug("registering with kubelet", "resource=%s socket=%s", ep->resource, n->kubelet_path);
}

static void serve_and_register(struct node *n, struct endpoint *ep, bool restart_server);

/* A Register call has ended: registered, or retried with backoff (1 s doubling to 16 s). */
static void register_finish(struct node *n, struct endpoint *ep) {
        struct rpc_status st;
        int r = rpc_call_finish(TAKE_PTR(ep->reg_call), NULL, NULL, &st);
        uint64_t now = health_now_ms();
        if (ep->reg_again) {
                ep->reg_again = false;
                log_debug("registration superseded, registering again", "resource=%s", ep->resource);
                serve_and_register(n, ep, false);
                return;
        }
        if (ep->backoff_ms < REGISTER_BACKOFF_MIN_MS)
                ep->backoff_ms = REGISTER_BACKOFF_MIN_MS;
        if (r < 0) {
                ep->registered = false;
                log_warn_errno(r, "registration with kubelet failed",
                               "resource=%s socket=%s code=%s detail=\"%s\" ms=%" PRIu64 " retry_ms=%" PRIu64,
                               ep->resource, n->kubelet_path, rpc_code_name(st.code), st.message,
                               now - ep->reg_started_ms, ep->backoff_ms);
                ep->retry_register_ms = now + ep->backoff_ms;
                ep->backoff_ms = MIN(ep->backoff_ms * 2, (uint64_t)REGISTER_BACKOFF_MAX_MS);
                return;
        }
        ep->registered = true;
        ep->n_registrations++;
        ep->backoff_ms = REGISTER_BACKOFF_MIN_MS;
        log_info("registered with kubelet", "resource=%s endpoint=%s ms=%" PRIu64, ep->resource, ep->name,
                 now - ep->reg_started_ms);
}

/* RPC counts, errors and latencies per method, for /metrics (metrics.h). The method is the full
 * gRPC path; the label keeps its last part ("Allocate"). */
static void observe_rpc(void *userdata, const char *method, enum rpc_code code, double seconds) {
        (void)userdata;
        const char *m = strrchr(method, '/');
        m = m ? m + 1 : method;
        metrics_counter_add(metrics_counter_get("gpuslice_rpc_requests_total",
                                                "Device plugin RPCs answered, by method.", "method", m),
                            1);
        if (code != RPC_OK)
                metrics_counter_add(metrics_counter_get("gpuslice_rpc_errors_total",
                                                        "Device plugin RPCs answered with an error status, by method.",
                                                        "method", m),
                                    1);
        if (!streq(m, "ListAndWatch"))
                metrics_histogram_observe(metrics_histogram_get("gpuslice_rpc_duration_seconds",
                                                                "Time to answer a unary device plugin RPC.", "method", m),
                                          seconds);
}

/* How much of GPU `index` the agent's records hand out: 1 when held whole, else the larger of
 * its core and memory shares. Called on the monitor's sampler thread. */
static int gpu_allocated(void *userdata, unsigned index, double *ret) {
        struct plugin *p = userdata;
        struct share_usage u;
        int r = -ENOENT;
        pthread_mutex_lock(&p->lock);
        share_usage(p, &u);
        for (unsigned i = 0; i < p->n; i++) {
                if (p->gpu[i].index != (int)index)
                        continue;
                double core = u.core[i] / 100.0;
                double mem = p->gpu[i].n_mem ? (double)u.mem[i] / p->gpu[i].n_mem : 0.0;
                *ret = (u.whole >> i) & 1 ? 1.0 : MIN(1.0, MAX(core, mem));
                r = 0;
                break;
        }
        pthread_mutex_unlock(&p->lock);
        return r;
}

/* Every named container's shares from the records: whole GPUs of the whole-GPU resource, core
 * and memory IDs of the fractional ones, summed per (container, GPU). Entries PodResources has not
 * named yet are left out. Called on the monitor's sampler thread. */
static int container_limits(void *userdata, struct monitor_limit **ret, size_t *ret_n) {
        struct plugin *p = userdata;
        struct monitor_limit *out = NULL;
        size_t n = 0, cap = 0;
        int r = 0;
        pthread_mutex_lock(&p->lock);
        for (size_t i = 0; i < p->state.n_allocs; i++) {
                const struct state_alloc *a = &p->state.allocs[i];
                bool whole = streq(a->resource, p->opt.resource);
                bool frac = (p->opt.core_resource[0] && streq(a->resource, p->opt.core_resource)) ||
                            (p->opt.memory_resource[0] && streq(a->resource, p->opt.memory_resource));
                if ((!whole && !frac) || !a->pod_name[0])
                        continue;
                int gpu = -1;
                if (whole) {
                        for (unsigned g = 0; g < p->n; g++)
                                if (streq(p->gpu[g].id, a->device_id))
                                        gpu = p->gpu[g].index;
                } else
                        gpu = a->gpu_index;
                if (gpu < 0)
                        continue;
                size_t k = 0;
                for (; k < n; k++)
                        if (out[k].gpu_index == (unsigned)gpu && streq(out[k].namespace, a->pod_namespace) &&
                            streq(out[k].pod, a->pod_name) && streq(out[k].container, a->container))
                                break;
                if (k == n) {
                        if (n == cap) {
                                size_t ncap = cap ? cap * 2 : 16;
                                struct monitor_limit *m = realloc(out, ncap * sizeof *m);
                                if (!m) {
                                        r = -ENOMEM;
                                        break;
                                }
                                out = m;
                                cap = ncap;
                        }
                        out[n] = (struct monitor_limit){ .gpu_index = (unsigned)gpu };
                        strscpy(out[n].namespace, a->pod_namespace, sizeof out[n].namespace);
                        strscpy(out[n].pod, a->pod_name, sizeof out[n].pod);
                        strscpy(out[n].container, a->container, sizeof out[n].container);
                        n++;
                }
                if (whole)
                        out[k].whole = true;
                out[k].memory_bytes += a->memory_bytes;
                out[k].core_percent += a->core_percent;
        }
        pthread_mutex_unlock(&p->lock);
        if (r < 0) {
                free(out);
                return r;
        }
        *ret = out;
        *ret_n = n;
        return 0;
}

/* Metrics are a side service: a node that cannot serve them still serves kubelet. */
static void monitor_start(struct node *n) {
        if (!n->cfg.metrics_address[0])
                return;
        struct monitor_options o;
        monitor_options_init(&o);
        o.proc_root = n->cfg.proc_root;
        o.engine_url = n->cfg.engine_url;
        o.cri_socket = n->cfg.cri_socket;
        o.compat = n->cfg.metrics_compat;
        o.interval_ms = n->cfg.sample_interval_sec * 1000;
        o.nfd_features_file = n->cfg.nfd_features_file;
        o.gpu_allocated = gpu_allocated;
        o.container_limits = container_limits;
        o.userdata = n->plugin;
        int r = monitor_service_start(&o, n->nvml, n->cfg.metrics_address, &n->monitor);
        if (r < 0) {
                log_error_errno(r, "cannot serve metrics; the device plugin goes on without them", "address=%s",
                                n->cfg.metrics_address);
                return;
        }
        log_info("serving metrics", "address=%s", n->cfg.metrics_address);
}

static int serve(struct node *n, struct endpoint *ep) {
        ep->server = rpc_server_free(ep->server);
        int r = rpc_server_new(ep->socket_path, 0, &ep->server);
        if (r < 0)
                return log_error_errno(r, "cannot create the plugin server", "socket=%s", ep->socket_path);
        r = plugin_serve_kind(n->plugin, ep->kind, ep->server);
        rpc_server_set_observer(ep->server, observe_rpc, NULL);
        if (r >= 0)
                r = rpc_server_start(ep->server);
        if (r < 0) {
                ep->server = rpc_server_free(ep->server);
                return log_error_errno(r, "cannot serve the device plugin", "socket=%s", ep->socket_path);
        }
        log_info("serving device plugin", "resource=%s socket=%s", ep->resource, ep->socket_path);
        return 0;
}

static bool file_exists(const char *p) {
        struct stat st;
        return stat(p, &st) == 0;
}

/* (Re)start serving and start registering if kubelet is there; on failure retry from the loop. */
static void serve_and_register(struct node *n, struct endpoint *ep, bool restart_server) {
        ep->retry_register_ms = 0;
        if (ep->backoff_ms < REGISTER_BACKOFF_MIN_MS)
                ep->backoff_ms = REGISTER_BACKOFF_MIN_MS;
        if (restart_server || !ep->server || !file_exists(ep->socket_path)) {
                if (serve(n, ep) < 0) {
                        ep->retry_register_ms = health_now_ms() + REGISTER_BACKOFF_MIN_MS;
                        return;
                }
        }
        if (!file_exists(n->kubelet_path)) {
                ep->registered = false;
                if (ep->reg_call)
                        rpc_call_cancel(ep->reg_call); /* kubelet is gone; inotify tells when it is back */
                log_info("waiting for kubelet", "resource=%s socket=%s", ep->resource, n->kubelet_path);
                return;
        }
        register_start(n, ep);
}

/* ---- PodResources and the state file ---- */

static bool owned_resource(const char *resource, void *userdata) {
        const struct node *n = userdata;
        for (unsigned k = 0; k < n->n_ep; k++)
                if (streq(resource, n->ep[k].resource))
                        return true;
        return false;
}

/* Per-container limits dirs of allocations the state no longer holds. */
static void limits_cleanup(struct node *n) {
        if (n->n_ep < 2)
                return;
        int r = share_cleanup_dirs(n->plugin);
        if (r > 0)
                log_info("removed limits dirs of ended allocations", "count=%d dir=%s", r, n->plugin->opt.limits_root);
        else if (r < 0 && r != -ENOENT)
                log_warn_errno(r, "cannot clean the limits dirs", "dir=%s", n->plugin->opt.limits_root);
}

static int podresources_sync(struct node *n) {
        V1__ListPodResourcesRequest req = V1__LIST_POD_RESOURCES_REQUEST__INIT;
        _cleanup_(freep) uint8_t *buf = NULL;
        _cleanup_(freep) uint8_t *resp = NULL;
        size_t len = 0, resp_len = 0;
        char target[PATH_MAX + 8];
        struct rpc_status st;

        if (!n->cfg.pod_resources_socket[0] || !file_exists(n->cfg.pod_resources_socket))
                return -ENOENT;
        int r = rpc_pack(&req.base, &buf, &len);
        if (r < 0)
                return r;
        snprintf(target, sizeof target, "unix:%s", n->cfg.pod_resources_socket);
        r = rpc_call_unary(target, "/v1.PodResourcesLister/List", buf, len, PODRES_TIMEOUT_MS, &resp, &resp_len, &st);
        if (r < 0)
                return log_warn_errno(r, "PodResources List failed", "socket=%s code=%s detail=\"%s\"",
                                      n->cfg.pod_resources_socket, rpc_code_name(st.code), st.message);
        struct podres_reports pr;
        r = podres_decode(resp, resp_len, &pr);
        if (r == -EBADMSG)
                return log_warn_errno(r, "cannot decode the PodResources List answer", "%s", "");
        if (r < 0)
                return log_error_errno(r, "out of memory", "%s", "");
        size_t added = 0, removed = 0, updated = 0, skipped = 0;
        uint64_t now = (uint64_t)time(NULL);
        pthread_mutex_lock(&n->plugin->lock);
        r = state_reconcile(&n->plugin->state, pr.rep, pr.n, owned_resource, n, now, now - STATE_GRACE_SEC, &added,
                            &removed, &updated, &skipped);
        if (r >= 0 && (added || removed)) {
                (void)share_fixup_state(n->plugin);
                atomic_fetch_add(&n->plugin->generation, 1); /* whole/fraction exclusion may change */
        }
        if (r >= 0)
                (void)share_after_sync(n->plugin); /* the container admitted when the agent died */
        pthread_mutex_unlock(&n->plugin->lock);
        podres_reports_done(&pr);
        if (r < 0)
                return log_warn_errno(r, "cannot reconcile with PodResources", "%s", "");
        if (added || removed || updated)
                log_info("reconciled with PodResources", "added=%zu removed=%zu updated=%zu skipped=%zu", added,
                         removed, updated, skipped);
        if (removed || n->cleanup_pending) {
                n->cleanup_pending = false;
                limits_cleanup(n);
        }
        return 0;
}

static void state_persist(struct node *n) {
        struct gpuslice_state copy;
        state_init(&copy);
        pthread_mutex_lock(&n->plugin->lock);
        uint64_t gen = n->plugin->state.generation;
        int r = gen == n->saved_generation ? 1 : state_copy(&n->plugin->state, &copy);
        pthread_mutex_unlock(&n->plugin->lock);
        if (r == 1)
                return;
        if (r >= 0)
                r = state_save(n->cfg.state_dir, &copy);
        state_done(&copy);
        if (r < 0) {
                log_error_errno(r, "cannot write the state file", "dir=%s", n->cfg.state_dir);
                return;
        }
        n->saved_generation = gen;
        log_debug("state file written", "dir=%s generation=%" PRIu64, n->cfg.state_dir, gen);
}

/* Returns whether a state file was loaded. */
static bool state_restore(struct node *n) {
        struct gpuslice_state s;
        int r = state_load(n->cfg.state_dir, &s);
        if (r == -ENOENT) {
                log_info("no state file yet", "dir=%s", n->cfg.state_dir);
                return false;
        }
        if (r < 0) {
                /* Never trust a damaged record: start empty, rebuild from PodResources, rewrite. */
                log_warn_errno(r, "state file unusable, rebuilding it", "dir=%s", n->cfg.state_dir);
                n->saved_generation = UINT64_MAX;
                return false;
        }
        size_t kept = 0;
        pthread_mutex_lock(&n->plugin->lock);
        for (size_t i = 0; i < s.n_allocs; i++) {
                const struct state_alloc *a = &s.allocs[i];
                /* Keep other resources' entries too: they are not ours to drop. */
                if (state_add(&n->plugin->state, a) >= 0)
                        kept++;
        }
        (void)share_fixup_state(n->plugin);
        n->saved_generation = n->plugin->state.generation;
        pthread_mutex_unlock(&n->plugin->lock);
        state_done(&s);
        log_info("state file loaded", "dir=%s allocations=%zu", n->cfg.state_dir, kept);
        return true;
}

/* ---- status socket ---- */

static json_t *status_json(struct node *n) {
        json_t *root = json_object();
        json_t *devs = json_array();
        struct plugin *p = n->plugin;

        pthread_mutex_lock(&p->lock);
        json_object_set_new(root, "resource", json_string(p->opt.resource));
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
        json_object_set_new(root, "resources", res);
        struct share_usage use;
        share_usage(p, &use);
        json_object_set_new(root, "allocate_calls", json_integer((json_int_t)p->n_allocate));
        json_object_set_new(root, "preferred_calls", json_integer((json_int_t)p->n_preferred));
        json_object_set_new(root, "rejected_calls", json_integer((json_int_t)p->n_errors));
        json_object_set_new(root, "driver_version", json_string(p->topo.driver_version));
        for (unsigned i = 0; i < p->n; i++) {
                const struct plugin_gpu *g = &p->gpu[i];
                json_t *d = json_object();
                json_object_set_new(d, "id", json_string(g->id));
                json_object_set_new(d, "index", json_integer(g->index));
                json_object_set_new(d, "minor", json_integer(g->minor));
                json_object_set_new(d, "numa", json_integer(g->numa));
                json_object_set_new(d, "health", json_string(g->healthy ? "Healthy" : "Unhealthy"));
                if (!g->healthy)
                        json_object_set_new(d, "reason", json_string(g->reason));
                if (n->n_ep > 1) {
                        json_object_set_new(d, "core_used", json_integer(use.core[i]));
                        json_object_set_new(d, "memory_used_bytes",
                                            json_integer((json_int_t)((uint64_t)use.mem[i] * p->opt.memory_unit)));
                        json_object_set_new(d, "memory_ids", json_integer(g->n_mem));
                }
                const struct state_alloc *a = state_find(&p->state, p->opt.resource, g->id);
                if (a) {
                        json_t *h = json_object();
                        json_object_set_new(h, "namespace", json_string(a->pod_namespace));
                        json_object_set_new(h, "pod", json_string(a->pod_name));
                        json_object_set_new(h, "container", json_string(a->container));
                        json_object_set_new(h, "since", json_integer((json_int_t)a->alloc_time));
                        json_object_set_new(d, "holder", h);
                } else
                        json_object_set_new(d, "holder", json_null());
                json_array_append_new(devs, d);
        }
        pthread_mutex_unlock(&p->lock);
        json_object_set_new(root, "devices", devs);
        return root;
}

static int status_listen(struct node *n) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(n->status_path) >= sizeof sa.sun_path)
                return log_error_errno(-ENAMETOOLONG, "status socket path too long", "path=%s", n->status_path);
        strscpy(sa.sun_path, n->status_path, sizeof sa.sun_path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return log_error_errno(-errno, "cannot create the status socket", "%s", "");
        (void)unlink(n->status_path);
        mode_t old = umask(0077); /* status is for root (and the node admin) only */
        int r = bind(fd, (struct sockaddr *)&sa, sizeof sa);
        umask(old);
        if (r < 0 || listen(fd, 8) < 0) {
                r = -errno;
                close(fd);
                return log_error_errno(r, "cannot listen on the status socket", "path=%s", n->status_path);
        }
        n->statusfd = fd;
        return 0;
}

/* A status client says what it wants as soon as it connects. Every client waiting to be accepted
 * is taken at once (up to STATUS_BATCH) and given STATUS_REQUEST_MS in all to send its request
 * line, so clients that connect and say nothing (or dribble) cost the loop that much per turn, not
 * a second each, and an honest client queued behind them is still answered. */
#define STATUS_BATCH 16
#define STATUS_REQUEST_MS 200
#define STATUS_SYNC_MS 250 /* at most one PodResources call per this, however many ask */

static void status_answer(struct node *n, int fd, const char *req) {
        /* the answer is written blocking, bounded by the send timeout */
        (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        struct timeval tv = { .tv_sec = 1 };
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (!startswith(req, "status")) {
                (void)send(fd, "{\"error\":\"unknown request\"}\n", 28, MSG_NOSIGNAL);
                return;
        }
        static uint64_t last_sync_ms;
        uint64_t now = health_now_ms();
        if (!last_sync_ms || now - last_sync_ms >= STATUS_SYNC_MS) {
                (void)podresources_sync(n);
                last_sync_ms = health_now_ms();
        }
        json_t *j = status_json(n);
        char *s = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        if (!s)
                return;
        size_t len = strlen(s), off = 0;
        while (off < len) {
                ssize_t w = send(fd, s + off, len - off, MSG_NOSIGNAL);
                if (w <= 0)
                        break;
                off += (size_t)w;
        }
        (void)send(fd, "\n", 1, MSG_NOSIGNAL);
        free(s);
}

static void status_serve_one(struct node *n) {
        struct pollfd c[STATUS_BATCH];
        char req[STATUS_BATCH][64];
        size_t got[STATUS_BATCH];
        unsigned nc = 0, open = 0;
        while (nc < STATUS_BATCH) {
                int fd = accept4(n->statusfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0)
                        break;
                c[nc] = (struct pollfd){ .fd = fd, .events = POLLIN };
                got[nc++] = 0;
                open++;
        }
        uint64_t deadline = health_now_ms() + STATUS_REQUEST_MS;
        while (open > 0) {
                uint64_t now = health_now_ms();
                if (now >= deadline || poll(c, nc, (int)(deadline - now)) <= 0)
                        break;
                for (unsigned i = 0; i < nc; i++) {
                        if (c[i].fd < 0 || !c[i].revents)
                                continue;
                        ssize_t k = recv(c[i].fd, req[i] + got[i], sizeof req[i] - 1 - got[i], 0);
                        if (k < 0 && (errno == EAGAIN || errno == EINTR))
                                continue;
                        if (k > 0)
                                got[i] += (size_t)k;
                        req[i][got[i]] = 0;
                        if (k > 0 && got[i] < sizeof req[i] - 1 && !memchr(req[i], '\n', got[i]))
                                continue; /* the rest of the line is still coming */
                        if (got[i] > 0)
                                status_answer(n, c[i].fd, req[i]);
                        close(c[i].fd);
                        c[i].fd = -1; /* poll skips it */
                        open--;
                }
        }
        for (unsigned i = 0; i < nc; i++)
                if (c[i].fd >= 0)
                        close(c[i].fd); /* silent past the deadline: dropped */
}

/* ---- configuration ---- */

/* The CDI spec defining the names Allocate hands out (src/cdi, docs/runtime.md): at start and
 * after a reload (the kind or id strategy may have changed). */
static void cdi_refresh(struct node *n, const struct plugin_options *o) {
        char path[1024], err[512];
        if (!o->list_cdi)
                return;
        int r = cdi_agent_refresh(&n->plugin->topo, o->cdi_kind, o->dev_root,
                                  o->core_resource[0] || o->memory_resource[0] ? o->interposer : NULL, path, sizeof path,
                                  err, sizeof err);
        if (r < 0)
                log_warn("cannot write the CDI spec: engines will not know the CDI names", "error=\"%s\"", err);
        else if (r == 0)
                log_info("CDI spec written", "path=%s", path);
        if (!o->list_envvar)
                log_warn("device list strategy is cdi only: kubelets before 1.28 drop cdi_devices silently", "%s", "");
}

static void apply_runtime_config(struct node *n) {
        log_set_level((enum log_level)n->cfg.log_level);
        struct plugin_options o;
        plugin_options_from_config(&n->cfg, &o);
        pthread_mutex_lock(&n->plugin->lock);
        /* Resource names, units and the limits root are fixed for the plugin's life. */
        strscpy(o.resource, n->plugin->opt.resource, sizeof o.resource);
        strscpy(o.core_resource, n->plugin->opt.core_resource, sizeof o.core_resource);
        strscpy(o.memory_resource, n->plugin->opt.memory_resource, sizeof o.memory_resource);
        o.memory_unit = n->plugin->opt.memory_unit;
        strscpy(o.limits_root, n->plugin->opt.limits_root, sizeof o.limits_root);
        strscpy(o.journal_dir, n->plugin->opt.journal_dir, sizeof o.journal_dir);
        n->plugin->opt = o;
        pthread_mutex_unlock(&n->plugin->lock);
        cdi_refresh(n, &o);
        if (n->health.running)
                health_set_options(&n->health, n->cfg.xid_ignore, n->cfg.n_xid_ignore,
                                   n->cfg.health_quiet_period_sec * 1000);
}

static void reload(struct node *n) {
        struct gpuslice_config c;
        char err[512];
        int r = config_build(&n->args, CONFIG_DEFAULT_PATH, &c, err, sizeof err);
        if (r < 0) {
                log_error_errno(r, "config reload failed, keeping the old config", "error=\"%s\"", err);
                return;
        }
        if (!streq(c.plugin_dir, n->cfg.plugin_dir) || !streq(c.state_dir, n->cfg.state_dir) ||
            !streq(config_whole_gpu_resource(&c), config_whole_gpu_resource(&n->cfg)) ||
            c.health_disabled != n->cfg.health_disabled || c.profile != n->cfg.profile ||
            config_memory_unit(&c) != config_memory_unit(&n->cfg))
                log_warn("plugin dir, state dir, resource names, memory unit and health.disabled change only on "
                         "restart",
                         "%s", "");
        strscpy(c.plugin_dir, n->cfg.plugin_dir, sizeof c.plugin_dir);
        strscpy(c.state_dir, n->cfg.state_dir, sizeof c.state_dir);
        strscpy(c.whole_gpu_resource, n->cfg.whole_gpu_resource, sizeof c.whole_gpu_resource);
        c.health_disabled = n->cfg.health_disabled;
        n->cfg = c;
        apply_runtime_config(n);
        log_info("config reloaded", "quiet_period_s=%" PRIu64 " xid_ignored=%zu", c.health_quiet_period_sec,
                 c.n_xid_ignore);
}

/* ---- the loop ---- */

static void handle_inotify(struct node *n, bool *ret_restart, bool *ret_register) {
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        for (;;) {
                ssize_t len = read(n->inofd, buf, sizeof buf);
                if (len <= 0)
                        return;
                for (char *ptr = buf; ptr < buf + len;) {
                        const struct inotify_event *ev = (const struct inotify_event *)ptr;
                        ptr += sizeof *ev + ev->len;
                        if (ev->len == 0)
                                continue;
                        if (streq(ev->name, KUBELET_SOCKET) && (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
                                log_info("kubelet socket created, registering again", "%s", "");
                                *ret_register = true;
                        } else if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) {
                                for (unsigned k = 0; k < n->n_ep; k++)
                                        if (streq(ev->name, n->ep[k].name) && !file_exists(n->ep[k].socket_path)) {
                                                log_info("plugin socket removed, serving again", "socket=%s",
                                                         n->ep[k].socket_path);
                                                *ret_restart = true;
                                        }
                        }
                }
        }
}

static int setup(struct node *n) {
        char err[512];
        int r;

        r = config_build(&n->args, CONFIG_DEFAULT_PATH, &n->cfg, err, sizeof err);
        if (r < 0) {
                log_error_errno(r, "bad configuration", "error=\"%s\"", err);
                return -EINVAL;
        }
        log_set_level((enum log_level)n->cfg.log_level);

        if (mkdir(n->cfg.state_dir, 0700) < 0 && errno != EEXIST)
                return log_error_errno(-errno, "cannot create the state dir", "dir=%s", n->cfg.state_dir);

        struct nvml_error ne = { 0 };
        r = nvml_open(n->cfg.nvml_library[0] ? n->cfg.nvml_library : NULL, &n->nvml, &ne);
        if (r < 0)
                return log_error_errno(r, "cannot load NVML", "func=%s nvml=\"%s\"", ne.func, ne.text);
        struct topo *t = malloc(sizeof *t);
        if (!t)
                return log_error_errno(-ENOMEM, "out of memory", "%s", "");
        r = nvml_inventory(n->nvml, t, &ne);
        if (r < 0) {
                free(t);
                return log_error_errno(r, "cannot read the GPUs", "func=%s nvml=\"%s\"", ne.func, ne.text);
        }
        struct plugin_options o;
        plugin_options_from_config(&n->cfg, &o);
        n->plugin = malloc(sizeof *n->plugin);
        if (!n->plugin) {
                free(t);
                return log_error_errno(-ENOMEM, "out of memory", "%s", "");
        }
        plugin_init(n->plugin, &o, t);
        free(t);
        log_info("inventory", "gpus=%u devices=%u driver=%s", n->plugin->topo.n_gpus, n->plugin->n,
                 n->plugin->topo.driver_version);
        for (unsigned i = 0; i < n->plugin->n; i++)
                if (!n->plugin->gpu[i].healthy)
                        log_warn("GPU unhealthy at start", "id=%s reason=\"%s\"", n->plugin->gpu[i].id,
                                 n->plugin->gpu[i].reason);

        cdi_refresh(n, &o);
        for (unsigned k = 0; k < _PLUGIN_KIND_MAX; k++) {
                const char *res = plugin_resource(n->plugin, (enum plugin_kind)k);
                if (!res[0])
                        continue;
                struct endpoint *ep = &n->ep[n->n_ep++];
                ep->kind = (enum plugin_kind)k;
                ep->resource = res;
                char name[sizeof ep->name];
                endpoint_name(res, name, sizeof name);
                strscpy(ep->name, name, sizeof ep->name);
                if ((size_t)snprintf(ep->socket_path, sizeof ep->socket_path, "%s/%s", n->cfg.plugin_dir, name) >=
                    sizeof ep->socket_path)
                        return log_error_errno(-ENAMETOOLONG, "path too long", "%s", "");
        }
        if (n->n_ep > 1) {
                log_info("sharing GPUs", "core=%s memory=%s memory_unit=%" PRIu64 " policy=%s interposer=%s",
                         o.core_resource[0] ? o.core_resource : "-", o.memory_resource[0] ? o.memory_resource : "-",
                         o.memory_unit, o.spread ? "spread" : "binpack", o.interposer);
                if (access(o.interposer, R_OK) < 0)
                        log_warn("the CUDA interposer is missing: fractional Allocate calls will fail",
                                 "interposer=%s", o.interposer);
        }
        if ((size_t)snprintf(n->kubelet_path, sizeof n->kubelet_path, "%s/%s", n->cfg.plugin_dir, KUBELET_SOCKET) >=
                    sizeof n->kubelet_path ||
            (size_t)snprintf(n->status_path, sizeof n->status_path, "%s/%s", n->cfg.state_dir, AGENT_STATUS_SOCKET) >=
                    sizeof n->status_path)
                return log_error_errno(-ENAMETOOLONG, "path too long", "%s", "");
        snprintf(n->kubelet_target, sizeof n->kubelet_target, "unix:%s", n->kubelet_path);

        bool loaded = state_restore(n);
        int jr = share_restore(n->plugin); /* the fractional journal (share.h) */
        if (jr >= 0)
                log_info("fractional journal loaded", "records=%d", jr);
        else if (jr != -ENOENT)
                log_warn_errno(jr, "fractional journal unusable, rebuilding from PodResources", "dir=%s",
                               n->cfg.state_dir);
        loaded = loaded || jr >= 0;
        bool synced = podresources_sync(n) == 0;
        state_persist(n);
        /* Only a record we can trust says which limits dirs are dead: with neither the state file
         * nor kubelet's answer, a running container's dir would look dead (its processes would
         * then fail to open their region). */
        if (loaded || synced)
                limits_cleanup(n);
        else {
                n->cleanup_pending = true;
                log_warn("keeping every limits dir until PodResources answers", "dir=%s", n->plugin->opt.limits_root);
        }

        n->inofd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (n->inofd < 0)
                return log_error_errno(-errno, "inotify_init1 failed", "%s", "");
        if (inotify_add_watch(n->inofd, n->cfg.plugin_dir, IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM) < 0)
                return log_error_errno(-errno, "cannot watch the plugin dir", "dir=%s", n->cfg.plugin_dir);
        r = status_listen(n);
        if (r < 0)
                return r;

        if (!n->cfg.health_disabled) {
                r = health_start(&n->health, n->nvml, n->plugin, n->cfg.xid_ignore, n->cfg.n_xid_ignore,
                                 n->cfg.health_quiet_period_sec * 1000);
                if (r < 0)
                        return log_error_errno(r, "cannot start the health thread", "%s", "");
        }
        monitor_start(n);
        n->publish = publish_start(&n->cfg, n->plugin);
        n->regfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (n->regfd < 0)
                return log_error_errno(-errno, "eventfd failed", "%s", "");
        for (unsigned k = 0; k < n->n_ep; k++)
                serve_and_register(n, &n->ep[k], true);
        return 0;
}

static void teardown(struct node *n) {
        if (n->plugin)
                atomic_store(&n->plugin->stopping, true);
        /* A Register in flight (kubelet may never answer it) is cancelled, not waited for. */
        for (unsigned k = 0; k < n->n_ep; k++)
                rpc_call_cancel(n->ep[k].reg_call);
        for (unsigned k = 0; k < n->n_ep; k++)
                if (n->ep[k].reg_call)
                        (void)rpc_call_finish(TAKE_PTR(n->ep[k].reg_call), NULL, NULL, NULL);
        for (unsigned k = 0; k < n->n_ep; k++)
                n->ep[k].server = rpc_server_free(n->ep[k].server);
        health_stop(&n->health);
        n->publish = publish_stop(n->publish);
        n->monitor = monitor_service_stop(n->monitor);
        if (n->plugin)
                state_persist(n);
        if (n->statusfd >= 0) {
                close(n->statusfd);
                (void)unlink(n->status_path);
        }
        if (n->inofd >= 0)
                close(n->inofd);
        if (n->regfd >= 0)
                close(n->regfd);
        if (n->sigfd >= 0)
                close(n->sigfd);
        if (n->plugin) {
                plugin_done(n->plugin);
                free(n->plugin);
        }
        n->nvml = nvml_close(n->nvml);
        config_args_done(&n->args);
        rpc_shutdown(); /* every server and call is gone: let gRPC's threads end before exit */
}

static void usage(void) {
        size_t k = 0;
        const struct config_option *opts = config_options(&k);
        printf("Usage: gpuslice node [--config FILE] [OPTIONS]\n\n"
               "Run the kubelet device plugin node agent. Options (each also a config file key):\n");
        for (size_t i = 0; i < k; i++)
                printf("  --%s%s%-*s %s\n", opts[i].flag, opts[i].metavar ? " " : "",
                       (int)(28 - strlen(opts[i].flag) - (opts[i].metavar ? strlen(opts[i].metavar) + 1 : 0)),
                       opts[i].metavar ? opts[i].metavar : "", opts[i].help);
        printf("\nSignals: SIGTERM/SIGINT stop (sockets removed, exit 0), SIGHUP reloads the config.\n"
               "Documentation: docs/node-agent.md\n");
}

int cmd_node(int argc, char **argv) {
        struct node n = { .sigfd = -1, .inofd = -1, .statusfd = -1, .regfd = -1 };
        char err[512];
        sigset_t mask;

        /* Block the signals before any thread exists, so every thread inherits the mask and only
         * the loop's signalfd sees them. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);

        int r = config_args_parse(argc, argv, 1, &n.args, err, sizeof err);
        if (r < 0) {
                fprintf(stderr, "gpuslice node: %s\n", err);
                return EXIT_USAGE;
        }
        if (n.args.help) {
                usage();
                config_args_done(&n.args);
                return EXIT_OK;
        }
        if (n.args.version) {
                config_args_done(&n.args);
                return cmd_version(0, NULL);
        }
        n.sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (n.sigfd < 0) {
                log_error_errno(-errno, "signalfd failed", "%s", "");
                config_args_done(&n.args);
                return EXIT_RUNTIME;
        }
        r = setup(&n);
        if (r < 0) {
                teardown(&n);
                return r == -EINVAL ? EXIT_DATA : EXIT_RUNTIME;
        }

        bool stop = false;
        while (!stop) {
                struct pollfd pfd[4] = {
                        { .fd = n.sigfd, .events = POLLIN },
                        { .fd = n.inofd, .events = POLLIN },
                        { .fd = n.statusfd, .events = POLLIN },
                        { .fd = n.regfd, .events = POLLIN },
                };
                (void)poll(pfd, 4, TICK_MS);
                if (pfd[0].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        while (read(n.sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
                                if (si.ssi_signo == SIGHUP) {
                                        log_info("SIGHUP: reloading the config", "%s", "");
                                        reload(&n);
                                } else {
                                        log_info("stopping", "signal=%s", strsignal((int)si.ssi_signo));
                                        stop = true;
                                }
                        }
                }
                if (stop)
                        break;
                bool restart = false, reg = false;
                if (pfd[1].revents & POLLIN) {
                        handle_inotify(&n, &restart, &reg);
                        /* kubelet removes the sockets and creates kubelet.sock in quick
                         * succession: take the burst as one event, register once. */
                        struct pollfd more = { .fd = n.inofd, .events = POLLIN };
                        while ((restart || reg) && poll(&more, 1, 20) > 0)
                                handle_inotify(&n, &restart, &reg);
                }
                if (pfd[3].revents & POLLIN) {
                        uint64_t v;
                        (void)!read(n.regfd, &v, sizeof v);
                }
                for (unsigned k = 0; k < n.n_ep; k++)
                        if (n.ep[k].reg_call && rpc_call_done(n.ep[k].reg_call))
                                register_finish(&n, &n.ep[k]);
                for (unsigned k = 0; k < n.n_ep && (restart || reg); k++) {
                        if (reg)
                                n.ep[k].backoff_ms = REGISTER_BACKOFF_MIN_MS; /* a new kubelet: no old backoff */
                        serve_and_register(&n, &n.ep[k], !file_exists(n.ep[k].socket_path));
                }
                uint64_t now = health_now_ms();
                for (unsigned k = 0; k < n.n_ep; k++)
                        if (n.ep[k].retry_register_ms && now >= n.ep[k].retry_register_ms && !n.ep[k].reg_call)
                                serve_and_register(&n, &n.ep[k], false);
                if (pfd[2].revents & POLLIN)
                        status_serve_one(&n);
                if (n.health.running && now >= n.next_probe_ms) {
                        health_probe(&n.health, now);
                        n.next_probe_ms = now + PROBE_MS;
                }
                if (now >= n.next_sync_ms) {
                        if (n.next_sync_ms)
                                (void)podresources_sync(&n);
                        n.next_sync_ms = now + PODRES_SYNC_MS;
                }
                state_persist(&n);
        }
        teardown(&n);
        log_info("stopped", "%s", "");
        return EXIT_OK;
}
