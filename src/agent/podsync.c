/* SPDX-License-Identifier: Apache-2.0 */
/*
 * podsync — keeps the allocation record reconciled with kubelet's PodResources List: every
 * PODRES_SYNC_MS on a loop timer while anything of ours is on record (podsync_arm), and for a
 * status request (at most once per STATUS_SYNC_MS);
 * removes the limits dirs of allocations that ended.
 * Must never: run two syncs at once (sync_lock), or wait on kubelet longer than PODRES_TIMEOUT_MS.
 */
#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "agent/node-internal.h"
#include "agent/podres.h"
#include "agent/share.h"
#include "podresources.pb-c.h"
#include "util/log.h"
#include "util/util.h"

#define PODRES_TIMEOUT_MS 2000
#define PODRES_SYNC_MS 10000
#define STATUS_SYNC_MS 250  /* at most one PodResources call per this, however many ask */
#define STATE_GRACE_SEC 120 /* a fresh Allocate may not be listed by PodResources yet */

static bool owned_resource(const char *resource, void *userdata) {
        const struct node *n = userdata;
        for (unsigned k = 0; k < n->n_ep; k++)
                if (streq(resource, n->ep[k].resource))
                        return true;
        return false;
}

/* Per-container limits dirs of allocations the state no longer holds. */
void limits_cleanup(struct node *n) {
        if (n->n_ep < 2)
                return;
        const char *root = plugin_options(n->plugin)->limits_root; /* fixed for the plugin's life */
        int r = share_cleanup_dirs(n->share);
        if (r > 0)
                log_info("removed limits dirs of ended allocations", "count=%d dir=%s", r, root);
        else if (r < 0 && r != -ENOENT)
                log_warn_errno(r, "cannot clean the limits dirs", "dir=%s", root);
}

static int sync_locked(struct node *n) {
        V1__ListPodResourcesRequest req = V1__LIST_POD_RESOURCES_REQUEST__INIT;
        _cleanup_(freep) uint8_t *buf = NULL;
        _cleanup_(freep) uint8_t *resp = NULL;
        size_t len = 0, resp_len = 0;
        char target[PATH_MAX + 8];
        struct gs_error st;

        if (!n->cfg.pod_resources_socket[0] || !file_exists(n->cfg.pod_resources_socket))
                return -ENOENT;
        int r = rpc_pack(&req.base, &buf, &len);
        if (r < 0)
                return r;
        snprintf(target, sizeof target, "unix:%s", n->cfg.pod_resources_socket);
        /* One kept connection (a new one per sync cost a dozen wake-ups every PODRES_SYNC_MS,
         * bench/agent-bench.py); made anew when the socket setting changes (reload). */
        if (n->podres && !streq(target, n->podres_target))
                n->podres = rpc_client_free(n->podres);
        if (!n->podres) {
                r = rpc_client_new(target, &n->podres);
                if (r < 0)
                        return log_error_errno(r, "out of memory", "%s", "");
                strscpy(n->podres_target, target, sizeof n->podres_target);
        }
        r = rpc_client_call(n->podres, "/v1.PodResourcesLister/List", buf, len, PODRES_TIMEOUT_MS, &resp, &resp_len,
                            &st);
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
        devices_lock(n->devices);
        r = state_reconcile(plugin_record(n->plugin), pr.rep, pr.n, owned_resource, n, now, now - STATE_GRACE_SEC,
                            &added, &removed, &updated, &skipped);
        if (r >= 0 && (added || removed))
                (void)plugin_record_fixup(n->plugin);
        if (r >= 0 && (added || removed || updated))
                devices_changed(n->devices); /* whole/fraction exclusion may change; holders named (node annotation) */
        if (r >= 0)
                (void)share_after_sync(n->share); /* the container admitted when the agent died */
        devices_unlock(n->devices);
        podres_reports_done(&pr);
        if (r < 0)
                return log_warn_errno(r, "cannot reconcile with PodResources", "%s", "");
        if (added || removed || updated) {
                log_info("reconciled with PodResources", "added=%zu removed=%zu updated=%zu skipped=%zu", added,
                         removed, updated, skipped);
                (void)loop_event_post(&n->persist);
        }
        if (removed || n->cleanup_pending) {
                n->cleanup_pending = false;
                limits_cleanup(n);
        }
        return 0;
}

int podresources_sync(struct node *n) {
        pthread_mutex_lock(&n->sync_lock);
        int r = sync_locked(n);
        pthread_mutex_unlock(&n->sync_lock);
        return r;
}

void podsync_status_request(struct node *n) {
        pthread_mutex_lock(&n->sync_lock);
        uint64_t now = monotonic_ms();
        if (!n->last_status_sync_ms || now - n->last_status_sync_ms >= STATUS_SYNC_MS) {
                (void)sync_locked(n);
                n->last_status_sync_ms = monotonic_ms();
        }
        pthread_mutex_unlock(&n->sync_lock);
}

/* Whether a periodic sync can change anything: with no allocation of ours on record (and the
 * limits dirs checked), kubelet holds none of our devices that we do not know of — the record
 * is only ever emptied by a sync or a fresh start, both of which asked PodResources. The timer
 * then stays off (no wake-up every PODRES_SYNC_MS on a node without pods) until an allocation
 * is recorded: every RPC posts n->persist, whose handler calls podsync_arm. */
static bool sync_needed(struct node *n) {
        bool any = false;
        devices_lock(n->devices);
        const struct gpuslice_state *s = plugin_record(n->plugin);
        for (size_t i = 0; i < s->n_allocs && !any; i++)
                any = owned_resource(s->allocs[i].resource, n);
        devices_unlock(n->devices);
        pthread_mutex_lock(&n->sync_lock);
        any = any || n->cleanup_pending;
        pthread_mutex_unlock(&n->sync_lock);
        return any;
}

void podsync_arm(struct node *n) {
        if (!loop_timer_armed(&n->sync_timer) && sync_needed(n))
                (void)loop_timer_start(&n->sync_timer, PODRES_SYNC_MS);
}

static void on_sync(struct loop_timer *t) {
        struct node *n = t->userdata;
        if (sync_needed(n))
                (void)podresources_sync(n);
        podsync_arm(n); /* again while anything of ours is on record */
}

int podsync_start(struct node *n) {
        int r = loop_timer_init(&n->loop, &n->sync_timer, on_sync, n);
        if (r < 0)
                return log_error_errno(r, "timerfd failed", "%s", "");
        podsync_arm(n);
        return 0;
}

void podsync_stop(struct node *n) {
        loop_timer_done(&n->sync_timer);
        pthread_mutex_lock(&n->sync_lock);
        n->podres = rpc_client_free(n->podres);
        pthread_mutex_unlock(&n->sync_lock);
}
