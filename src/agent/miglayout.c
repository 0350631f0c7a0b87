/* SPDX-License-Identifier: Apache-2.0 */
/*
 * miglayout — declared MIG layouts applied by the agent (docs/mig.md, "Layouts from the node label"): the
 * layout file (--mig-layouts, mig-parted's format, src/migctl) loaded at start and every GPU's interrupted
 * change recovered (migctl_recover_gpu) before the inventory is read; then, on every change of the Node,
 * the label nvidia.com/mig.config names the layout wanted. A new name is applied GPU by GPU through
 * src/migctl — only when no container holds the GPU or one of its MIG devices (the agent's own record:
 * migctl's busy check sees processes only), a layout the GPUs cannot hold or a busy GPU refused before
 * anything changes — and the state is published as mig-manager does (nvidia.com/mig.config.state pending,
 * success, failed; the reason in gpuslice.io/mig.config.reason) and kept in <state-dir>/mig-layout. After
 * a change the agent starts itself again (agent_run re-executes it): the device table, the MIG resources,
 * the CDI spec and the labels are built anew from the new inventory, and every holder is kept as over any
 * restart (state file, PodResources). The GPUs to change are found idle and reserved in the device table under
 * one hold of its lock (devices_reserve), so no Allocate or DRA prepare takes one while NVML changes it. A
 * request refused only because a GPU was in use is tried again when the devices' holders change (the loop's
 * "devices changed" hook: a PodResources sync, a DRA unprepare), never on a timer.
 * Runs on the loop thread. Must never change a GPU a container of ours holds, or apply a name twice (but a
 * busy-refused one, once idle).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/node-internal.h"
#include "agent/publish.h"
#include "migctl/migctl.h"
#include "nvml/nvml.h"
#include "util/atomic-file.h"
#include "util/log.h"
#include "util/util.h"

#define LAYOUT_STATE_FILE "mig-layout"

/* <state-dir>/mig-layout through its one codec (migctl_request_format). */
static void layout_save(struct node *n) {
        char path[PATH_MAX + 16], text[sizeof n->layout + 16];
        int len = migctl_request_format(&n->layout, text, sizeof text);
        snprintf(path, sizeof path, "%.4000s/%s", n->cfg.state_dir, LAYOUT_STATE_FILE);
        int r = len < 0 ? len : atomic_file_write(path, text, (size_t)len, 0600, 0);
        if (r < 0)
                log_warn_errno(r, "cannot write the layout state", "path=%s", path);
}

static void layout_load(struct node *n) {
        char path[PATH_MAX + 16];
        _cleanup_(freep) char *text = NULL;
        size_t len = 0;
        struct gs_error err = { 0 };
        snprintf(path, sizeof path, "%.4000s/%s", n->cfg.state_dir, LAYOUT_STATE_FILE);
        if (read_file(path, 4096, &text, &len) < 0)
                return;
        if (migctl_request_parse(text, len, &n->layout, &err) < 0) /* torn or not ours: the label is looked at again */
                log_warn("forgetting an unreadable layout state", "path=%s error=\"%s\"", path, err.message);
}

static void set_state(struct node *n, const char *name, const char *state, const char *reason, bool busy) {
        strscpy(n->layout.name, name, sizeof n->layout.name);
        strscpy(n->layout.state, state, sizeof n->layout.state);
        strscpy(n->layout.reason, reason, sizeof n->layout.reason);
        n->layout.busy = busy;
        layout_save(n);
        if (n->publish)
                publish_set_mig_state(n->publish, state, reason);
        if (streq(state, "failed"))
                log_warn("MIG layout failed", "layout=%s reason=\"%s\" retried_when_idle=%s", name, reason,
                         busy ? "yes" : "no");
        else
                log_info("MIG layout", "layout=%s state=%s", name, state);
}

int miglayout_recover(struct node *n, const struct topo *t) {
        if (!n->cfg.mig_layouts[0])
                return 0;
        struct gs_error err = { 0 };
        n->layouts = calloc(1, sizeof *n->layouts);
        if (!n->layouts)
                return log_error_errno(-ENOMEM, "out of memory");
        int r = migctl_config_load(n->cfg.mig_layouts, n->layouts, &err);
        if (r < 0) {
                n->layouts = (free(n->layouts), NULL);
                return log_error_errno(r, "cannot read the MIG layout file", "path=%s error=\"%s\"", n->cfg.mig_layouts,
                                       err.message);
        }
        layout_load(n);
        int changed = 0;
        for (unsigned g = 0; g < t->n_gpus; g++) {
                struct migctl_result res;
                r = migctl_recover_gpu(n->nvml, (unsigned)t->gpu[g].index, n->cfg.state_dir, &res, &err);
                if (r < 0)
                        log_error_errno(r, "cannot recover an interrupted MIG layout change", "gpu=%d error=\"%s\"",
                                        t->gpu[g].index, err.message);
                else if (res.outcome != MIGCTL_UNCHANGED) {
                        log_warn("recovered an interrupted MIG layout change", "gpu=%d outcome=%s", t->gpu[g].index,
                                 migctl_outcome_name(res.outcome));
                        changed = 1;
                }
        }
        return changed;
}

/* Is device x on a GPU of `change` (NVML indices, a mask): the GPU itself or one of its MIG devices? */
static bool on_changed_gpu(const struct device_info *x, uint64_t change) {
        return x->index >= 0 && x->index < 64 && (change >> x->index & 1);
}

/* Under one hold of the device lock: every GPU of `change` (NVML indices, a mask) idle by the agent's own
 * record — no container holds it or one of its MIG devices, no DRA claim (plugin_usage counts both) — and then
 * reserved (devices_reserve), so no Allocate, share or DRA prepare takes it or one of its MIG devices while it
 * changes (the agent starts again on a new table after a change). 0, or -EBUSY with the holder in who and
 * nothing reserved. */
static int reserve_idle(struct node *n, uint64_t change, char *who, size_t len) {
        struct devices *d = n->devices;
        int r = 0;
        devices_lock(d);
        struct plugin_usage u;
        plugin_usage(n->plugin, &u);
        for (unsigned i = 0; i < devices_count(d) && r == 0; i++) {
                const struct device_info *x = devices_info(d, i);
                if (!on_changed_gpu(x, change) || !((u.whole | u.frac) >> i & 1))
                        continue;
                const struct state_alloc *a =
                        state_find(plugin_record(n->plugin), plugin_device_resource(n->plugin, i), x->id);
                bool named = a && a->pod_name[0];
                snprintf(who, len, "GPU %d is in use, nothing changed: %s %s is held by %s%s%s", x->index,
                         x->kind == DEVICE_MIG ? "MIG device" : "GPU", x->id, named ? a->pod_namespace : "a container",
                         named ? "/" : "", named ? a->pod_name : "");
                r = -EBUSY;
        }
        for (unsigned i = 0; i < devices_count(d) && r == 0; i++) {
                const struct device_info *x = devices_info(d, i);
                if (x->kind == DEVICE_GPU && on_changed_gpu(x, change))
                        devices_reserve(d, i, "its MIG layout is being changed");
        }
        devices_unlock(d);
        if (r == 0 && change)
                devices_changed(d);
        return r;
}

/* The reservations of reserve_idle undone (a change that ends without the agent starting again). */
static void release(struct node *n, uint64_t change) {
        struct devices *d = n->devices;
        devices_lock(d);
        for (unsigned i = 0; i < devices_count(d); i++) {
                const struct device_info *x = devices_info(d, i);
                if (x->kind == DEVICE_GPU && on_changed_gpu(x, change))
                        devices_release(d, i);
        }
        devices_unlock(d);
        devices_changed(d);
}

/* What layout l wants of each GPU: the GPUs it changes (NVML indices, a mask) and their wants. 0, or -errno
 * with why (nothing changed). */
static int plan_all(struct node *n, const struct migctl_layout *l, uint64_t *ret_change, struct mig_want *wants,
                    char *why, size_t why_len) {
        const struct topo *t = devices_topo(n->devices);
        struct gs_error err = { 0 };
        *ret_change = 0;
        for (unsigned g = 0; g < t->n_gpus; g++) {
                int index = t->gpu[g].index;
                const struct migctl_entry *e = NULL;
                int r = migctl_layout_select(l, (unsigned)index, t->gpu[g].pci_device_id, &e, &err);
                if (r < 0 || !e) {
                        if (r < 0)
                                snprintf(why, why_len, "GPU %d: %s", index, err.message);
                        if (r < 0)
                                return r;
                        continue;
                }
                struct migctl_result *res = malloc(sizeof *res);
                if (!res)
                        return -ENOMEM;
                r = migctl_plan_gpu(n->nvml, (unsigned)index, l->name, &e->want, res, &err);
                bool changes = r >= 0 && res->plan.n > 0;
                free(res);
                if (r < 0) {
                        snprintf(why, why_len, "GPU %d cannot hold layout %s: %s", index, l->name, err.message);
                        return r;
                }
                if (changes && index >= 0 && index < 64) {
                        *ret_change |= UINT64_C(1) << index;
                        wants[index] = e->want;
                }
        }
        return 0;
}

/* lint: long — one layout request from the label, in order: known, planned on every GPU (refused before any
 * change), every GPU to change idle and reserved, applied GPU by GPU, the state published; each step's refusal
 * is a line. retry: the request failed only because a GPU was in use and is tried again (still in use: left
 * as it is, quietly). */
static void apply(struct node *n, const char *name, bool retry) {
        char why[512] = "";
        const struct migctl_layout *l = migctl_config_find(n->layouts, name);
        if (!l) {
                snprintf(why, sizeof why, "no layout %.64s in %.400s", name, n->cfg.mig_layouts);
                set_state(n, name, "failed", why, false);
                return;
        }
        if (!retry)
                set_state(n, name, "pending", "", false);
        static struct mig_want wants[64];
        uint64_t change = 0;
        if (plan_all(n, l, &change, wants, why, sizeof why) < 0) {
                set_state(n, name, "failed", why[0] ? why : "cannot plan the layout", false);
                return;
        }
        if (reserve_idle(n, change, why, sizeof why) < 0) {
                if (!retry || !streq(why, n->layout.reason)) /* a new holder named */
                        set_state(n, name, "failed", why, true);
                return;
        }
        if (retry)
                set_state(n, name, "pending", "", false); /* the GPUs are idle again */
        struct migctl_result *res = malloc(sizeof *res);
        struct gs_error err = { 0 };
        bool reset = false;
        if (!res) { /* nothing changed yet: not "success" */
                release(n, change);
                set_state(n, name, "failed", "out of memory", false);
                return;
        }
        for (int g = 0; g < 64; g++) {
                if (!(change & (UINT64_C(1) << g)))
                        continue;
                int r = migctl_apply_gpu(n->nvml, (unsigned)g, name, &wants[g], n->cfg.state_dir, res, &err);
                if (r < 0) {
                        snprintf(why, sizeof why, "GPU %d: %s (%s)", g, err.message, strerror(-r));
                        free(res);
                        set_state(n, name, "failed", why, false);
                        n->reexec = true; /* GPUs before it may have changed; the reservations end with it */
                        loop_stop(&n->loop);
                        return;
                }
                reset = reset || res->outcome == MIGCTL_PENDING_RESET;
        }
        free(res);
        if (reset) {
                release(n, change); /* the mode change waits for the operator's reset: the GPUs as they were */
                set_state(n, name, "pending", "a MIG mode change waits for a GPU reset (mig-manager: rebooting)",
                          false);
                return;
        }
        set_state(n, name, "success", "", false);
        if (change) { /* new MIG devices: the table, resources, CDI spec and labels anew */
                log_info("MIG layout changed the GPUs: starting again", "layout=%s", name);
                n->reexec = true;
                loop_stop(&n->loop);
        }
}

static void on_kick(struct loop_event *e) {
        struct node *n = e->userdata;
        char name[sizeof n->layout.name];
        if (!n->publish || publish_node_label(n->publish, PUBLISH_MIG_CONFIG_LABEL, name, sizeof name) < 0 || !name[0])
                return;
        /* A name is applied once. A failed one again when the label changes (to it again), or, when it failed
         * only because a GPU was in use, on the next kick: a change of the devices' holders
         * (miglayout_devices_changed) or of the Node */
        bool same = streq(name, n->layout.name);
        if (same && n->layout.busy)
                apply(n, name, true);
        else if (!same || streq(n->layout.state, "pending"))
                apply(n, name, false);
}

void miglayout_devices_changed(struct node *n, void *userdata) {
        (void)userdata;
        if (n->layout_kick_on && n->layout.busy)
                (void)loop_event_post(&n->layout_kick);
}

static void post_kick(void *userdata) {
        struct node *n = userdata;
        (void)loop_event_post(&n->layout_kick);
}

int miglayout_start(struct node *n) {
        if (!n->layouts)
                return 0;
        if (!n->publish) {
                log_warn("MIG layouts need the API server (the node label nvidia.com/mig.config): not applied",
                         "layouts=%s", n->cfg.mig_layouts);
                return 0;
        }
        int r = loop_event_init(&n->loop, &n->layout_kick, on_kick, n);
        if (r < 0)
                return log_error_errno(r, "eventfd failed");
        n->layout_kick_on = true;
        if (n->layout.state[0])
                publish_set_mig_state(n->publish, n->layout.state, n->layout.reason);
        r = publish_on_node_change(n->publish, post_kick, n);
        if (r < 0)
                return log_error_errno(r, "cannot watch the Node");
        post_kick(n);
        return 0;
}

void miglayout_stop(struct node *n) {
        if (n->publish)
                publish_off_node_change(n->publish, post_kick, n);
        if (n->layout_kick_on)
                loop_event_done(&n->layout_kick);
        n->layout_kick_on = false;
        if (n->layouts)
                migctl_config_done(n->layouts);
        n->layouts = (free(n->layouts), NULL);
}
