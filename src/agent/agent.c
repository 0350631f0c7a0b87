/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent — the node agent (agent_run, agent.h): the kubelet device plugin daemon. Loads NVML,
 * serves the DevicePlugin on a unix socket per resource, registers with kubelet and follows its
 * restarts, keeps health, keeps the allocation record reconciled with PodResources and in the
 * state file, answers `gpuslice status`, reloads its config on SIGHUP and stops cleanly on
 * SIGTERM (sockets removed).
 *
 * One loop (util/loop.h) on the calling thread holds every source: signals, inotify, timers
 * (registration retries, PodResources sync) and the wake-ups other threads post (Register ended,
 * record changed, devices changed). Nothing polls: idle, the loop sleeps until a timer is due.
 * The parts are in the files node-internal.h lists. Must never: block the loop on kubelet or another peer
 * for longer than a bounded timeout, or serve before the plugin table is complete.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/assign.h"
#include "agent/migdev.h"
#include "agent/node-internal.h"
#include "agent/podres.h"
#include "agent/publish.h"
#include "agent/share.h"
#include "agent/timeslice.h"
#include "monitor/monitor.h"
#include "nvml/nvml.h"
#include "util/log.h"
#include "util/util.h"

static void on_signal(struct loop_signal *s, int signo) {
        struct node *n = s->userdata;
        if (signo == SIGHUP) {
                log_info("SIGHUP: reloading the config");
                node_reload(n);
                return;
        }
        log_info("stopping", "signal=%s", strsignal(signo));
        loop_stop(&n->loop);
}

static void endpoint_name(const char *resource, char *buf, size_t len) {
        snprintf(buf, len, "gpuslice-%s.sock", resource);
        for (char *c = buf; *c; c++)
                if (*c == '/')
                        *c = '-';
}

/* Under `single` or `mixed`: the MIG devices into the table (children of their GPU) and the MIG
 * resources into the plugin (migdev.h). A node that does not fit `single` says so here and in status. */
static int setup_mig(struct node *n, const struct topo *t) {
        if (n->cfg.mig_strategy == CONFIG_MIG_NONE)
                return 0;
        struct mig_node *m = n->mig = malloc(sizeof *m);
        struct nvml_error ne = { 0 };
        if (!m)
                return log_error_errno(-ENOMEM, "out of memory");
        int r = nvml_mig_inventory(n->nvml, t, m, &ne);
        if (r < 0)
                return log_error_errno(r, "cannot read the MIG devices", "func=%s nvml=\"%s\"", ne.func, ne.text);
        r = devices_add_mig(n->devices, m);
        if (r == -ENOSPC)
                log_warn("more devices than the table holds: MIG devices left out", "max=%d", DEVICES_MAX);
        r = migdev_setup(n->plugin, n->cfg.mig_strategy, n->mig_error, sizeof n->mig_error);
        if (r < 0)
                return log_error_errno(r, "too many MIG resources", "max=%d", PLUGIN_MIG_MAX);
        char why[256];
        if (n->cfg.mig_strategy == CONFIG_MIG_SINGLE &&
            !migdev_single_fits(n->devices, n->mig_single, sizeof n->mig_single, why, sizeof why))
                n->mig_single[0] = 0;
        if (n->mig_error[0])
                log_error("the node does not fit the MIG strategy single: nvidia.com/gpu lists no device",
                          "reason=\"%s\"", n->mig_error);
        for (unsigned k = 0; k < plugin_mig_count(n->plugin); k++)
                log_info("MIG resource", "resource=%s", plugin_mig_resource(n->plugin, k));
        return 0;
}

/* An endpoint for a resource: its socket name and path in the plugin dir. */
static int add_endpoint(struct node *n, enum plugin_kind kind, unsigned mig, const char *res) {
        struct endpoint *ep = &n->ep[n->n_ep++];
        ep->kind = kind;
        ep->mig = mig;
        ep->resource = res;
        char name[sizeof ep->name];
        endpoint_name(res, name, sizeof name);
        strscpy(ep->name, name, sizeof ep->name);
        if ((size_t)snprintf(ep->socket_path, sizeof ep->socket_path, "%s/%s", n->cfg.plugin_dir, name) >=
            sizeof ep->socket_path)
                return log_error_errno(-ENAMETOOLONG, "path too long");
        return 0;
}

/* One endpoint per resource served: the fixed kinds the profile names, then the MIG resources. */
static int setup_endpoints(struct node *n) {
        /* --dra alone: the table stays (health, the DRA driver's view of it), no device plugin is served */
        bool serve = !n->cfg.dra_enabled || n->cfg.dra_device_plugin;
        int r;
        for (unsigned k = 0; k < _PLUGIN_KIND_MAX && serve; k++) {
                const char *res = plugin_resource(n->plugin, (enum plugin_kind)k);
                /* under `single` the whole-GPU resource's name is the MIG resource's */
                if (!res[0] ||
                    (k == PLUGIN_WHOLE && n->cfg.mig_strategy == CONFIG_MIG_SINGLE &&
                     plugin_mig_count(n->plugin) > 0) ||
                    (k == PLUGIN_WHOLE && timeslice_all_renamed(n->plugin))) /* NVIDIA's: only <name>.shared */
                        continue;
                if ((r = add_endpoint(n, (enum plugin_kind)k, 0, res)) < 0)
                        return r;
        }
        for (unsigned k = 0; k < plugin_mig_count(n->plugin) && serve; k++)
                if ((r = add_endpoint(n, PLUGIN_MIG, k, plugin_mig_resource(n->plugin, k))) < 0)
                        return r;
        for (unsigned k = 0; k < plugin_replica_sets(n->plugin) && serve; k++) { /* renamed replicas (timeslice.h) */
                const char *shared = plugin_replica_served(n->plugin, k);
                if (shared[0] && (r = add_endpoint(n, PLUGIN_REPLICA, k, shared)) < 0)
                        return r;
        }
        return 0;
}

/* NVML, the inventory and the plugin table. */
static int setup_plugin(struct node *n) {
        struct nvml_error ne = { 0 };
        int r = nvml_open(n->cfg.nvml_library[0] ? n->cfg.nvml_library : NULL, &n->nvml, &ne);
        if (r < 0)
                return log_error_errno(r, "cannot load NVML", "func=%s nvml=\"%s\"", ne.func, ne.text);
        _cleanup_(freep) struct topo *t = malloc(sizeof *t);
        if (!t)
                return log_error_errno(-ENOMEM, "out of memory");
        r = nvml_inventory(n->nvml, t, &ne);
        if (r >= 0 && (r = miglayout_recover(n, t)) > 0) /* a layout change completed: what it made */
                r = nvml_inventory(n->nvml, t, &ne);
        if (r < 0)
                return log_error_errno(r, "cannot read the GPUs", "func=%s nvml=\"%s\"", ne.func, ne.text);
        struct plugin_options o;
        plugin_options_from_config(&n->cfg, &o);
        node_nvml_libs(&n->cfg, t, &o);
        r = devices_new(t, o.memory_unit, SHARE_MEM_IDS_MAX, &n->devices);
        if (r >= 0)
                r = plugin_new(n->devices, &o, &n->plugin);
        if (r >= 0)
                r = share_new(n->plugin, &n->share);
        if (r < 0)
                return log_error_errno(r, "out of memory");
        r = setup_mig(n, t);
        if (r >= 0)
                r = node_nvidia_replicas(n); /* time-sliced GPUs (timeslice.h) */
        if (r < 0)
                return r;
        log_info("inventory", "gpus=%u devices=%u driver=%s", t->n_gpus, devices_count(n->devices), t->driver_version);
        for (unsigned i = 0; i < devices_count(n->devices); i++) {
                struct device_health h;
                devices_health(n->devices, i, &h);
                if (!h.healthy)
                        log_warn("GPU unhealthy at start", "id=%s reason=\"%s\"", devices_info(n->devices, i)->id,
                                 h.reason);
        }

        cdi_refresh(n, &o);
        r = setup_endpoints(n);
        if (r < 0)
                return r;
        if (o.core_resource[0] || o.memory_resource[0]) {
                log_info("sharing GPUs", "core=%s memory=%s memory_unit=%" PRIu64 " policy=%s interposer=%s",
                         o.core_resource[0] ? o.core_resource : "-", o.memory_resource[0] ? o.memory_resource : "-",
                         o.memory_unit,
                         o.pack != CLUSTER_POLICY_BINPACK ? cluster_policy_name(o.pack)
                         : o.spread                       ? "spread"
                                                          : "binpack",
                         o.interposer);
                if (access(o.interposer, R_OK) < 0)
                        log_warn("the CUDA interposer is missing: fractional Allocate calls will fail", "interposer=%s",
                                 o.interposer);
        }
        return 0;
}

static int podres_sync_hook(void *userdata) {
        return podresources_sync_for_call(userdata); /* a gRPC handler's: bounded, counted */
}

/* ---- the parts, in start-up order (parts[] below): each start is undone by its stop, in reverse ---- */

static void on_devices_changed(struct loop_event *e);

/* The loop and its signals (SIGTERM, SIGINT: stop; SIGHUP: reload). */
static int loop_part_start(struct node *n) {
        int r = loop_init(&n->loop);
        if (r >= 0)
                r = loop_signal_init(&n->loop, &n->signals, n->sigmask, on_signal, n);
        return r < 0 ? log_error_errno(r, "cannot set up the event loop") : 0;
}

static void loop_part_stop(struct node *n) {
        loop_signal_done(&n->signals);
        loop_done(&n->loop);
}

/* NVML, the inventory, the device table, the plugin and share cores, the endpoints, the sockets' paths. */
static int plugin_part_start(struct node *n) {
        int r = setup_plugin(n);
        if (r < 0)
                return r;
        if ((size_t)snprintf(n->kubelet_path, sizeof n->kubelet_path, "%s/%s", n->cfg.plugin_dir, KUBELET_SOCKET) >=
                    sizeof n->kubelet_path ||
            (size_t)snprintf(n->status_path, sizeof n->status_path, "%s/%s", n->cfg.state_dir, AGENT_STATUS_SOCKET) >=
                    sizeof n->status_path)
                return log_error_errno(-ENAMETOOLONG, "path too long", "dir=%s", n->cfg.plugin_dir);
        snprintf(n->kubelet_target, sizeof n->kubelet_target, "unix:%s", n->kubelet_path);
        return 0;
}

static void plugin_part_stop(struct node *n) {
        n->share = share_free(n->share);
        n->plugin = plugin_free(n->plugin);
        n->devices = devices_free(n->devices);
        free(n->mig);
        n->mig = NULL;
        n->nvml = nvml_close(n->nvml);
}

/* The device table's change fd: the parts' devices_changed on the loop thread. */
static int changed_part_start(struct node *n) {
        int r = loop_event_init(&n->loop, &n->changed, on_devices_changed, n);
        if (r < 0)
                return log_error_errno(r, "eventfd failed");
        devices_set_change_fd(n->devices, loop_event_fd(&n->changed));
        return 0;
}

static void changed_part_stop(struct node *n) {
        if (n->devices)
                devices_set_change_fd(n->devices, -1);
        loop_event_done(&n->changed);
}

/* The record: PodResources (the one service), the state file and the fractional journal restored, the first
 * sync, the limits dirs cleaned when the record can be trusted. */
static int record_part_start(struct node *n) {
        int r = podres_service_new(n->cfg.pod_resources_socket, &n->podres);
        if (r < 0)
                return log_error_errno(r, "out of memory");
        share_set_podres_sync(n->share, podres_sync_hook, n); /* evidence for pairing after a restart */
        bool loaded = state_restore(n);
        int jr = share_restore(n->share); /* the fractional journal (share.h) */
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
                log_warn("keeping every limits dir until PodResources answers", "dir=%s",
                         plugin_options(n->plugin)->limits_root);
        }
        return 0;
}

static void record_part_stop(struct node *n) {
        if (n->plugin)
                state_persist(n);
        n->podres = podres_service_free(n->podres); /* every reader stopped before */
}

static int health_part_start(struct node *n) {
        if (n->cfg.health_disabled)
                return 0;
        int r = health_start(&n->health, n->nvml, n->devices, n->cfg.xid_ignore, n->cfg.n_xid_ignore,
                             n->cfg.health_quiet_period_sec * 1000);
        return r < 0 ? log_error_errno(r, "cannot start the health thread") : 0;
}

static void health_part_stop(struct node *n) {
        health_stop(&n->health);
}

static int monitor_part_start(struct node *n) {
        node_monitor_start(n);
        return 0;
}

static void monitor_part_stop(struct node *n) {
        n->monitor = monitor_service_stop(n->monitor);
}

/* The Node object's labels (GFD's too) and, on the publisher's API client, the scheduler's assignments. */
static int publish_part_start(struct node *n) {
        /* GFD's labels: no mig.strategy under none; under single the MIG devices' labels, or INVALID ("") */
        const char *single = n->cfg.mig_strategy != CONFIG_MIG_SINGLE || !plugin_mig_count(n->plugin) ? NULL
                             : n->mig_single[0]                                                       ? n->mig_single
                                                                                                      : "";
        struct publish_mig pm = { n->mig, n->cfg.mig_strategy ? config_mig_strategy_name(n->cfg.mig_strategy) : NULL,
                                  single, n->plugin };
        n->publish = publish_start(&n->cfg, n->devices, &pm);
        if (n->publish) { /* the scheduler's assignments, on the publisher's API client (assign.h) */
                for (unsigned k = 0; k < _PLUGIN_KIND_MAX; k++)
                        n->assign_names.name[k] = plugin_resource(n->plugin, (enum plugin_kind)k);
                n->assign_names.memory_mib = (uint32_t)MIN(config_memory_unit(&n->cfg) >> 20, (uint64_t)UINT32_MAX);
                plugin_set_assign(n->plugin, assign_start(publish_client(n->publish), publish_node(n->publish),
                                                          n->devices, &n->assign_names, n->podres));
        }
        return 0;
}

static void publish_part_stop(struct node *n) {
        if (n->plugin) /* servers stopped: no call uses it */
                (void)assign_stop(plugin_set_assign(n->plugin, NULL));
        n->publish = publish_stop(n->publish);
}

static int miglayout_part_start(struct node *n) {
        int r = miglayout_start(n);
        return r < 0 ? r : n->layout_kick_on; /* 1: its devices_changed hook is on */
}

static int dra_part_start(struct node *n) {
        int r = node_dra_start(n);
        return r < 0 ? r : n->dra != NULL;
}

/* Serve every resource and register with kubelet; stopped first: the handlers refuse, the calls in flight end. */
static int serve_part_start(struct node *n) {
        int r = register_init(n);
        if (r < 0)
                return r;
        for (unsigned k = 0; k < n->n_ep; k++)
                serve_and_register(n, &n->ep[k], true);
        return 0;
}

static void serve_part_stop(struct node *n) {
        if (n->plugin)
                plugin_stop(n->plugin);
        if (n->devices)
                devices_set_change_fd(n->devices, -1);
        register_done(n); /* Register calls cancelled, plugin servers stopped */
}

/* One part of the agent: start (0, 1 = started and its devices_changed is on, or -errno, logged), stop (undoes a
 * start, also a failed one: every stop copes with what its start left half done), devices_changed (NULL: none;
 * on the loop thread, coalesced, after any change kubelet would see: health, allocations). */
struct part {
        const char *name;
        int (*start)(struct node *n);
        void (*stop)(struct node *n);
        node_change_fn devices_changed;
};

/* Start-up order; the unwind is its reverse. Later parts may use what earlier ones made (the publisher's client:
 * assign-watch, the DRA driver; the PodResources service: the publisher's assign-watch, podsync's timer). */
static const struct part parts[] = {
        { "loop", loop_part_start, loop_part_stop, NULL },
        { "plugin", plugin_part_start, plugin_part_stop, NULL },
        { "persist", persist_start, persist_stop, NULL },
        { "changed", changed_part_start, changed_part_stop, NULL },
        { "record", record_part_start, record_part_stop, NULL },
        { "kubewatch", kubewatch_start, kubewatch_stop, NULL },
        { "status", status_start, status_stop, NULL },
        { "health", health_part_start, health_part_stop, NULL },
        { "monitor", monitor_part_start, monitor_part_stop, NULL },
        { "mps", node_mps_start, node_mps_stop, NULL }, /* sharing.mps: the control daemon (mps.c) */
        { "publish", publish_part_start, publish_part_stop, NULL },
        { "miglayout", miglayout_part_start, miglayout_stop, miglayout_devices_changed },
        { "nvwatch", node_nvidia_watch_start, node_nvidia_watch_stop, NULL }, /* the label's entry (nvidia.c) */
        { "dra", dra_part_start, node_dra_stop, node_dra_push },
        { "podsync", podsync_start, podsync_stop, NULL },
        { "serve", serve_part_start, serve_part_stop, NULL },
};
_Static_assert(ELEMENTSOF(parts) <= 32, "parts_hooked is a 32-bit mask");

static void on_devices_changed(struct loop_event *e) {
        struct node *n = e->userdata;
        for (unsigned i = 0; i < n->n_started; i++)
                if (parts[i].devices_changed && (n->parts_hooked >> i & 1))
                        parts[i].devices_changed(n, NULL);
}

/* The configuration, then the parts in order. n->n_started: how many parts' stops teardown runs (the failed one's
 * too). */
static int setup(struct node *n) {
        struct gs_error err;
        int r = config_build(&n->args, CONFIG_DEFAULT_PATH, &n->cfg, &err);
        if (r < 0) {
                log_error_errno(r, "bad configuration", "error=\"%s\"", err.message);
                return -EINVAL;
        }
        log_set_level((enum log_level)n->cfg.log_level);
        if (node_nvidia_config(n) < 0) /* NVIDIA's plugin config over gpuslice's (nvidia.c); logged */
                return -EINVAL;
        if (mkdir(n->cfg.state_dir, 0700) < 0 && errno != EEXIST)
                return log_error_errno(-errno, "cannot create the state dir", "dir=%s", n->cfg.state_dir);
        for (unsigned i = 0; i < ELEMENTSOF(parts); i++) {
                n->n_started = i + 1;
                r = parts[i].start(n);
                if (r < 0) {
                        log_debug("start-up failed", "part=%s", parts[i].name);
                        return r;
                }
                if (r > 0 && parts[i].devices_changed)
                        n->parts_hooked |= UINT32_C(1) << i;
        }
        return 0;
}

static void teardown(struct node *n) {
        for (unsigned i = n->n_started; i-- > 0;)
                parts[i].stop(n);
        n->n_started = 0;
        node_nvidia_free(n);
        pthread_mutex_destroy(&n->status_lock);
        pthread_mutex_destroy(&n->sync_lock);
        rpc_shutdown(); /* every server and call is gone: let gRPC's threads end before exit */
}

/* Start this program again with its arguments (/proc/self/cmdline): after a layout change (miglayout.c) or a new
 * NVIDIA config entry (nvidia.c) the inventory, the device table and the resources are built anew. Returns only when it failed (logged). */
static void reexec(void) {
        _cleanup_(freep) char *text = NULL;
        size_t len = 0;
        int r = read_file("/proc/self/cmdline", 1 << 20, &text, &len);
        char *argv[256];
        size_t n = 0;
        for (size_t at = 0; r >= 0 && at < len && n + 1 < ELEMENTSOF(argv); at += strlen(text + at) + 1)
                argv[n++] = text + at;
        argv[n] = NULL;
        if (r >= 0 && n > 0) {
                log_info("starting again", "program=%s", argv[0]);
                execv("/proc/self/exe", argv);
                r = -errno;
        }
        log_error_errno(r < 0 ? r : -EINVAL, "cannot start again: restart the agent");
}

int agent_run(const struct agent_options *o) {
        if (!o)
                return -EINVAL;
        sigset_t mask;
        /* Block the signals before any thread exists, so every thread inherits the mask and only
         * the loop's signalfd sees them. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);
        rpc_init(); /* gRPC's environment settings, also before any thread exists */

        struct node *n = calloc(1, sizeof *n);
        if (!n)
                return -ENOMEM;
        n->args = o->args;
        n->inofd = -1;
        n->loop.epfd = -1;
        pthread_mutex_init(&n->status_lock, NULL);
        pthread_mutex_init(&n->sync_lock, NULL);
        n->sigmask = &mask;
        int r = setup(n);
        if (r >= 0) {
                r = loop_run(&n->loop);
                if (r < 0)
                        log_error_errno(r, "the event loop failed");
        }
        teardown(n);
        bool again = n->reexec;
        free(n);
        if (r >= 0 && again)
                reexec(); /* returns only when it failed */
        if (r >= 0)
                log_info("stopped");
        return r;
}
