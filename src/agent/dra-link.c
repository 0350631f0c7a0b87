/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dra-link — `gpuslice node --dra`: the DRA driver (src/dra) started with the agent's inventory and API
 * client, and the two ways it meets the device table: the table's view of each GPU (health, the device
 * plugin's use) pushed to the driver whenever devices change, and the GPUs the driver's prepared claims
 * hold marked held elsewhere (plugin_set_held_elsewhere) so the device plugin never hands them out (a
 * prepared MIG device holds its whole parent GPU there), and the node's MIG side read through NVML when
 * the driver asks (mig_read), and the MPS control daemons of claims with sharing.strategy MPS (mps_start/mps_stop: one
 * daemon a claim, mps.c's, checked once a second and restarted when it exited). All the DRA logic is in src/dra; this file only translates. Must never: call into the driver with the
 * device lock held (the driver calls take/set_held with its own lock held, and they take the device lock).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/node-internal.h"
#include "agent/publish.h"
#include "dra/dra.h"
#include "dra/slices.h"
#include "migctl/migctl.h"
#include "nvml/nvml.h"
#include "util/log.h"
#include "util/util.h"

/* Table index of the GPU at topology position g, or -1. */
static int table_index(const struct devices *d, unsigned g) {
        const struct topo *t = devices_topo(d);
        return g < t->n_gpus ? devices_find_nvml(d, t->gpu[g].index) : -1;
}

static uint64_t to_table(const struct devices *d, uint64_t gpus) {
        uint64_t m = 0;
        for (unsigned g = 0; g < devices_topo(d)->n_gpus; g++) {
                int i = table_index(d, g);
                if ((gpus >> g & 1) && i >= 0)
                        m |= UINT64_C(1) << i;
        }
        return m;
}

/* The table's GPUs the device plugin uses, a GPU counted busy when any of its MIG devices is held (DRA
 * works on whole GPUs: a claim of one would take the instances a container holds). Under the device lock. */
static uint64_t plugin_gpus_in_use(const struct node *n) {
        uint64_t own = plugin_own_use(n->plugin), gpus = own;
        for (unsigned i = 0; i < devices_count(n->devices); i++) {
                int parent = devices_info(n->devices, i)->parent;
                if ((own >> i & 1) && parent >= 0)
                        gpus |= UINT64_C(1) << parent;
        }
        return gpus;
}

static int take(void *userdata, uint64_t gpus, char *why, size_t len) {
        struct node *n = userdata;
        const struct topo *t = devices_topo(n->devices);
        int r = 0;
        devices_lock(n->devices);
        uint64_t own = plugin_gpus_in_use(n), want = 0;
        for (unsigned g = 0; g < t->n_gpus && r == 0; g++) {
                if (!(gpus >> g & 1))
                        continue;
                int i = table_index(n->devices, g);
                if (i < 0)
                        r = -ENODEV;
                else if (!devices_healthy(n->devices, (unsigned)i))
                        r = -EIO;
                else if (own >> i & 1)
                        r = -EBUSY;
                else
                        want |= UINT64_C(1) << i;
                if (r < 0)
                        snprintf(why, len, "GPU %d %s", t->gpu[g].index,
                                 r == -ENODEV ? "is not in the device table"
                                 : r == -EIO  ? "is unhealthy"
                                              : "is held by the device plugin");
        }
        bool changed = r == 0 && plugin_set_held_elsewhere(n->plugin, plugin_held_elsewhere(n->plugin) | want);
        devices_unlock(n->devices);
        if (changed)
                devices_changed(n->devices);
        return r;
}

static void set_held(void *userdata, uint64_t gpus) {
        struct node *n = userdata;
        devices_lock(n->devices);
        bool changed = plugin_set_held_elsewhere(n->plugin, to_table(n->devices, gpus));
        devices_unlock(n->devices);
        if (changed)
                devices_changed(n->devices);
}

/* The MIG devices and each MIG GPU's slices, through NVML (the driver calls it without its lock). */
static int mig_read(void *userdata, struct dra_mig *ret) {
        struct node *n = userdata;
        const struct topo *t = devices_topo(n->devices);
        struct nvml_error ne = { 0 };
        int r = nvml_mig_inventory(n->nvml, t, &ret->node, &ne);
        if (r < 0)
                return r;
        struct mig_caps *caps = malloc(sizeof *caps);
        if (!caps)
                return -ENOMEM;
        for (unsigned g = 0; g < ret->node.n_gpus; g++) {
                if (ret->node.gpu[g].mode != 1 || t->gpu[g].index < 0 ||
                    nvml_mig_caps(n->nvml, (unsigned)t->gpu[g].index, caps, &ne) < 0)
                        continue; /* slices unknown: its MIG devices are not published */
                ret->memory_slices[g] = mig_caps_memory_slices(caps);
                ret->compute_slices[g] = mig_caps_compute_slices(caps);
                ret->caps[g] = *caps; /* the placements of dynamic MIG devices */
        }
        free(caps);
        return 0;
}

/* A dynamic MIG device's instance, made and destroyed through src/migctl's applier (its lock: never beside a
 * `gpuslice mig apply` of the same state dir). */
static int mig_create(void *userdata, unsigned index, unsigned profile_id, struct mig_placement at, unsigned *ret_gi,
                      unsigned *ret_ci, char *why, size_t why_len) {
        struct node *n = userdata;
        struct gs_error err = { 0 };
        int r = migctl_instance_create(n->nvml, index, profile_id, at, n->cfg.state_dir, ret_gi, ret_ci, &err);
        if (r < 0)
                snprintf(why, why_len, "%s", err.message);
        return r;
}

static int mig_destroy(void *userdata, unsigned index, unsigned profile_id, struct mig_placement at, char *why,
                       size_t why_len) {
        struct node *n = userdata;
        struct gs_error err = { 0 };
        int r = migctl_instance_destroy(n->nvml, index, profile_id, at, n->cfg.state_dir, &err);
        if (r < 0)
                snprintf(why, why_len, "%s", err.message);
        return r;
}

static void dra_log_line(void *userdata, enum dra_log_level level, const char *msg, const char *fields) {
        (void)userdata;
        switch (level) {
                case DRA_LOG_ERROR: log_error(msg, "%s", fields); break;
                case DRA_LOG_WARN: log_warn(msg, "%s", fields); break;
                case DRA_LOG_INFO: log_info(msg, "%s", fields); break;
                default: log_debug(msg, "%s", fields); break;
        }
}

/* After any change kubelet would see: the table's view of every GPU, by topology position. */
void node_dra_push(struct node *n, void *userdata) {
        struct dra_gpu_state st[TOPO_MAX_GPUS];
        unsigned count = devices_topo(n->devices)->n_gpus;
        (void)userdata;
        if (!n->dra)
                return;
        memset(st, 0, sizeof st);
        devices_lock(n->devices);
        uint64_t own = plugin_gpus_in_use(n);
        for (unsigned g = 0; g < count; g++) {
                int i = table_index(n->devices, g);
                st[g].healthy = i >= 0 && devices_healthy(n->devices, (unsigned)i);
                st[g].busy = i >= 0 && (own >> i & 1);
                strscpy(st[g].reason, i < 0 ? "no UUID" : devices_reason(n->devices, (unsigned)i), sizeof st[g].reason);
        }
        devices_unlock(n->devices);
        dra_update(n->dra, st, count);
}

/* ---- the MPS control daemons of DRA claims ---- */

#define DRA_MPS_CHECK_MS 1000

struct dra_mps_daemon {
        char uid[64];
        char commands[4096];
        struct mps *m;
        uint64_t gpus; /* the claim's GPUs (table indices) */
        bool down;     /* exited and not started again: its GPUs reserved (unhealthy) */
};

#define DRA_MPS_DOWN "MPS control daemon of the DRA claim not running"

/* The daemon's GPUs reserved (unhealthy to DRA's health stream and slices) or released; the change is pushed from
 * the loop (devices_changed only wakes it). */
static void mark_down(struct node *n, struct dra_mps_daemon *e, bool down) {
        if (e->down == down)
                return;
        devices_lock(n->devices);
        for (unsigned i = 0; i < devices_count(n->devices); i++)
                if (e->gpus >> i & 1) {
                        if (down)
                                devices_reserve(n->devices, i, DRA_MPS_DOWN);
                        else
                                devices_release(n->devices, i);
                }
        devices_unlock(n->devices);
        e->down = down;
        devices_changed(n->devices);
}

struct dra_mps {
        pthread_mutex_t lock; /* the list; taken by the driver's threads (under its lock) and the loop's check */
        struct dra_mps_daemon *d;
        size_t n, cap;
        struct loop_timer check;
        const char *program;
};

static int mps_start(void *userdata, const char *uid, uint64_t gpus, const char *dir, const char *commands, char *why,
                     size_t len) {
        struct node *n = userdata;
        struct dra_mps *s = n->dra_mps;
        if (strlen(uid) >= sizeof s->d[0].uid || strlen(commands) >= sizeof s->d[0].commands)
                return snprintf(why, len, "claim UID or commands too long"), -E2BIG;
        pthread_mutex_lock(&s->lock);
        int r = 0;
        for (size_t i = 0; i < s->n && r == 0; i++)
                if (streq(s->d[i].uid, uid)) /* already running and supervised */
                        r = 1;
        if (r == 0 && array_reserve(&s->d, &s->cap, s->n + 1, 8) < 0)
                r = -ENOMEM;
        struct mps *m = NULL;
        if (r == 0 && (r = mps_daemon_start(s->program, dir, commands, &m)) == 0) {
                struct dra_mps_daemon *e = &s->d[s->n++];
                strscpy(e->uid, uid, sizeof e->uid);
                strscpy(e->commands, commands, sizeof e->commands);
                e->m = m;
                e->gpus = to_table(n->devices, gpus);
                e->down = false;
                log_info("MPS control daemon of a DRA claim serving", "claim=%s pid=%d dir=%s", uid,
                         (int)mps_daemon_pid(m), dir);
        }
        pthread_mutex_unlock(&s->lock);
        if (r < 0)
                snprintf(why, len, "%s did not start or take its commands: %s", s->program, strerror(-r));
        return r > 0 ? 0 : r;
}

static void mps_stop(void *userdata, const char *uid, const char *dir) {
        struct node *n = userdata;
        struct dra_mps *s = n->dra_mps;
        struct mps *m = NULL;
        pthread_mutex_lock(&s->lock);
        for (size_t i = 0; i < s->n && !m; i++)
                if (streq(s->d[i].uid, uid)) {
                        m = s->d[i].m;
                        mark_down(n, &s->d[i], false);
                        s->d[i] = s->d[--s->n];
                }
        pthread_mutex_unlock(&s->lock);
        if (m) {
                mps_daemon_stop(m);
                log_info("MPS control daemon of a DRA claim stopped", "claim=%s", uid);
        } else
                mps_daemon_quit(s->program, dir);
}

static void on_mps_check(struct loop_timer *t) {
        struct node *n = t->userdata;
        struct dra_mps *s = n->dra_mps;
        pthread_mutex_lock(&s->lock);
        for (size_t i = 0; i < s->n; i++) {
                struct dra_mps_daemon *e = &s->d[i];
                int r = mps_daemon_check(e->m, s->program, e->commands);
                if (r > 0)
                        log_warn("MPS control daemon of a DRA claim exited: restarted", "claim=%s pid=%d", e->uid,
                                 (int)mps_daemon_pid(e->m));
                else if (r < 0 && !e->down)
                        log_error("MPS control daemon of a DRA claim exited and did not start again: its GPUs are "
                                  "unhealthy until it serves",
                                  "claim=%s error=\"%s\"", e->uid, strerror(-r));
                mark_down(n, e, r < 0);
        }
        pthread_mutex_unlock(&s->lock);
        (void)loop_timer_start(&s->check, DRA_MPS_CHECK_MS);
}

static int dra_mps_open(struct node *n) {
        struct dra_mps *s = n->dra_mps = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        pthread_mutex_init(&s->lock, NULL);
        s->program = n->cfg.mps_control;
        int r = loop_timer_init(&n->loop, &s->check, on_mps_check, n);
        return r < 0 ? r : loop_timer_start(&s->check, DRA_MPS_CHECK_MS);
}

static void dra_mps_close(struct node *n) {
        struct dra_mps *s = n->dra_mps;
        if (!s)
                return;
        loop_timer_done(&s->check);
        for (size_t i = 0; i < s->n; i++)
                mps_daemon_stop(s->d[i].m);
        free(s->d);
        pthread_mutex_destroy(&s->lock);
        free(s);
        n->dra_mps = NULL;
}

int node_dra_start(struct node *n) {
        if (!n->cfg.dra_enabled)
                return 0;
        if (!n->publish)
                return log_error_errno(-EINVAL, "--dra needs the API server: set kube.kubeconfig or run in a pod", "%s",
                                       "");
        char limits[CONFIG_PATH_MAX + 32];
        snprintf(limits, sizeof limits, "%s/dra-containers", n->cfg.state_dir);
        struct node_cdi_paths paths;
        node_cdi_paths(&n->cfg, &paths);
        uint64_t unit = config_memory_unit(&n->cfg);
        struct dra_options o = {
                .driver = n->cfg.dra_driver,
                .node = publish_node(n->publish),
                .registry_dir = n->cfg.dra_registry_dir,
                .plugin_dir = n->cfg.dra_plugin_dir,
                .state_dir = n->cfg.state_dir,
                .limits_root = limits,
                .cdi_dir = n->cfg.dra_cdi_dir,
                .dev_root = paths.dev_root,
                .driver_root = paths.driver_root,
                .host_dev_root = paths.host_dev_root,
                .host_driver_root = paths.host_driver_root,
                .hook_path = paths.hook,
                .interposer = n->cfg.interposer_library,
                .sharing = n->cfg.dra_sharing,
                .memory_unit = unit ? unit : UINT64_C(256) << 20,
                .limit_when_alone = n->cfg.limit_when_alone,
                .kube = publish_client(n->publish),
                .mig_dynamic = n->cfg.dra_mig_dynamic,
        };
        struct dra_table_ops ops = { .take = take,
                                     .set_held = set_held,
                                     .mig_read = n->nvml ? mig_read : NULL,
                                     .mps_start = mps_start,
                                     .mps_stop = mps_stop,
                                     .mig_create = n->nvml ? mig_create : NULL,
                                     .mig_destroy = n->nvml ? mig_destroy : NULL,
                                     .log = dra_log_line,
                                     .userdata = n };
        struct gs_error err = { 0 };
        int r = dra_mps_open(n);
        if (r < 0) {
                dra_mps_close(n);
                return log_error_errno(r, "cannot set up the DRA claims' MPS");
        }
        r = dra_start(&o, devices_topo(n->devices), &ops, &n->dra, &err);
        if (r < 0) {
                dra_mps_close(n);
                return log_error_errno(r, "cannot start the DRA driver", "error=\"%s\"", err.message);
        }
        log_info("DRA driver started", "driver=%s pool=%s device_plugin=%s", o.driver, o.node,
                 n->cfg.dra_device_plugin ? "on" : "off");
        node_dra_push(n, NULL);
        return 0;
}

void node_dra_stop(struct node *n) {
        n->dra = dra_stop(n->dra);
        dra_mps_close(n); /* the claims' daemons end with the agent; a new agent starts them for its prepared claims */
}
