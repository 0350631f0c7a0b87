/* SPDX-License-Identifier: Apache-2.0 */
/*
 * persist — the allocation record in the state file: restored at start, and written on the loop
 * thread whenever it changed (n->persist is posted after every RPC and every PodResources sync;
 * a write happens only when the record's generation moved) and once more at teardown. The same
 * event starts the periodic PodResources sync once something is on record (podsync_arm).
 * Must never: trust a damaged file (start empty and rebuild), or write with the device lock held.
 */
#include <errno.h>
#include <inttypes.h>

#include "agent/node-internal.h"
#include "state/state.h"
#include "util/log.h"
#include "util/util.h"

void state_persist(struct node *n) {
        struct gpuslice_state copy;
        state_init(&copy);
        devices_lock(n->devices);
        uint64_t gen = plugin_record(n->plugin)->generation;
        int r = gen == n->saved_generation ? 1 : state_copy(plugin_record(n->plugin), &copy);
        devices_unlock(n->devices);
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
        if (n->parts_hooked) /* the record changed: an allocation, which the parts' hooks see too (agent.c) */
                (void)loop_event_post(&n->changed);
}

bool state_restore(struct node *n) {
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
        devices_lock(n->devices);
        struct gpuslice_state *rec = plugin_record(n->plugin);
        for (size_t i = 0; i < s.n_allocs; i++) {
                const struct state_alloc *a = &s.allocs[i];
                /* Keep other resources' entries too: they are not ours to drop. */
                if (state_add(rec, a) >= 0)
                        kept++;
        }
        (void)plugin_record_fixup(n->plugin);
        n->saved_generation = rec->generation;
        devices_unlock(n->devices);
        state_done(&s);
        log_info("state file loaded", "dir=%s allocations=%zu", n->cfg.state_dir, kept);
        return true;
}

static void on_persist(struct loop_event *e) {
        state_persist(e->userdata);
        podsync_arm(e->userdata); /* an allocation recorded: reconcile it from now on */
}

int persist_start(struct node *n) {
        int r = loop_event_init(&n->loop, &n->persist, on_persist, n);
        if (r < 0)
                return log_error_errno(r, "eventfd failed");
        return 0;
}

void persist_stop(struct node *n) {
        loop_event_done(&n->persist);
}
