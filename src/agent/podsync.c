/* SPDX-License-Identifier: Apache-2.0 */
/*
 * podsync — keeps the allocation record reconciled with kubelet's PodResources List: every
 * PODRES_SYNC_MS on a loop timer while anything of ours is on record (podsync_arm), and for a
 * status request (at most once per STATUS_SYNC_MS);
 * removes the limits dirs of allocations that ended.
 * kubelet is asked through the agent's one PodResources service (podres.h).
 * Must never: apply two answers at once (sync_lock), hold sync_lock while waiting for kubelet, or wait on
 * kubelet longer than PODRES_CALL_MS (PODRES_HANDLER_MS for a kubelet call's sync).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <time.h>

#include "agent/node-internal.h"
#include "agent/podres.h"
#include "agent/share.h"
#include "util/log.h"
#include "util/util.h"

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

/* One answer into the record. Under sync_lock. */
static int apply_locked(struct node *n, const struct podres_reports *pr) {
        size_t added = 0, removed = 0, updated = 0, skipped = 0;
        uint64_t now = (uint64_t)time(NULL);
        devices_lock(n->devices);
        int r = state_reconcile(plugin_record(n->plugin), pr->rep, pr->n, owned_resource, n, now, now - STATE_GRACE_SEC,
                                &added, &removed, &updated, &skipped);
        if (r >= 0 && (added || removed))
                (void)plugin_record_fixup(n->plugin);
        if (r >= 0 && (added || removed || updated))
                devices_changed(n->devices); /* whole/fraction exclusion may change; holders named (node annotation) */
        if (r >= 0)
                (void)share_after_sync(n->share); /* the container admitted when the agent died */
        devices_unlock(n->devices);
        if (r < 0)
                return log_warn_errno(r, "cannot reconcile with PodResources");
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

/* An answer asked after since_ms (the PodResources service, podres.h), waiting at most wait_ms, into the
 * record. No lock is held while waiting for kubelet; sync_lock only while the answer is applied, and an answer
 * older than the one applied last is not applied again. */
static int sync_within(struct node *n, uint64_t since_ms, int wait_ms, bool handler) {
        struct podres_snapshot *snap = NULL;
        struct gs_error st = { 0 };
        char sock[PATH_MAX];
        int r = podres_service_get(n->podres, since_ms, wait_ms, &snap, &st);
        if (handler && r != -ENOENT)
                podres_handler_wait_count("podresources", r);
        if (r == -ENOENT)
                return r;
        if (r == -EBADMSG)
                return log_warn_errno(r, "cannot decode the PodResources List answer");
        if (r == -ENOMEM)
                return log_error_errno(r, "out of memory");
        if (r < 0)
                return log_warn_errno(r, "PodResources List failed", "socket=%s code=%s detail=\"%s\"",
                                      podres_service_socket(n->podres, sock, sizeof sock), rpc_code_name(st.code),
                                      st.message);
        pthread_mutex_lock(&n->sync_lock);
        if (snap->asked_ms > n->applied_ms) {
                r = apply_locked(n, &snap->r);
                if (r == 0)
                        n->applied_ms = snap->asked_ms;
        }
        pthread_mutex_unlock(&n->sync_lock);
        podres_snapshot_put(snap);
        return r;
}

int podresources_sync(struct node *n) {
        return sync_within(n, monotonic_ms(), PODRES_CALL_MS, false);
}

int podresources_sync_for_call(struct node *n) {
        return sync_within(n, monotonic_ms(), PODRES_HANDLER_MS, true);
}

void podsync_status_request(struct node *n) {
        /* at most one call per STATUS_SYNC_MS, however many ask: a request within it takes that call's answer
         * (waiting for it when it is in flight) */
        uint64_t now = monotonic_ms();
        pthread_mutex_lock(&n->sync_lock);
        if (!n->last_status_sync_ms || now - n->last_status_sync_ms >= STATUS_SYNC_MS)
                n->last_status_sync_ms = now;
        uint64_t since = n->last_status_sync_ms - 1;
        pthread_mutex_unlock(&n->sync_lock);
        (void)sync_within(n, since, PODRES_CALL_MS, false);
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
                return log_error_errno(r, "timerfd failed");
        podsync_arm(n);
        return 0;
}

void podsync_stop(struct node *n) {
        loop_timer_done(&n->sync_timer);
}
