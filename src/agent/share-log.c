/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share-log — the fractional path's decision events (share-internal.h): the metric families, the
 * debug line of every decision, an open record closed with its outcome, and the crash points of
 * the fault-injection suite. Must never: change a decision (a record closed here was decided on by
 * its caller).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "agent/share-internal.h"
#include "metrics/metrics.h"
#include "util/log.h"
#include "util/util.h"

void share_count(const char *family, const char *outcome) {
        const char *help = "Fractional decisions of the node agent, by outcome.";
        const char *key = "outcome";
        if (streq(family, "gpuslice_share_pairs_total"))
                help = "Pairing of one container's core and memory halves: made (kubelet followed the proposal), "
                       "guessed (joined without a followed proposal), refused, expired, single (closed by the next "
                       "container), reversed, no-room (a first half refused: no GPU keeps room for the smallest "
                       "partner a container of its size had).";
        else if (streq(family, "gpuslice_share_invariant_violations_total")) {
                help = "Violated fractional invariants found by the agent's own checks (must stay 0).";
                key = "check";
        } else if (streq(family, "gpuslice_share_journal_writes_total"))
                help = "Durable writes of the fractional journal: append (a log line), snapshot, error.";
        metrics_counter_add(metrics_counter_get(family, help, key, outcome), 1);
}

void share_log_decision(const struct plugin *p, const char *call, enum plugin_kind kind, int gpu, const char *rec,
                        const char *reason) {
        const struct devices *d = plugin_devices(p);
        log_debug("fraction decision", "call=%s container=%s resource=%s gpu=%s reason=\"%s\"", call,
                  rec && rec[0] ? rec : "-", plugin_resource(p, kind),
                  gpu >= 0 && (unsigned)gpu < devices_count(d) ? devices_info(d, (unsigned)gpu)->id : "-", reason);
}

void share_rec_close(const struct plugin *p, struct share_rec *r, const char *outcome, const char *why) {
        if (!r || !r->open)
                return;
        r->open = false;
        share_count("gpuslice_share_pairs_total", outcome);
        share_log_decision(p, "close", (enum plugin_kind)r->first, r->gpus ? __builtin_ctzll(r->gpus) : -1, r->name,
                           why);
}

void share_crash_point(const char *point) {
        if (crash_point_due(point)) {
                log_warn("crash point reached: killing myself", "point=%s", point);
                raise(SIGKILL);
        }
}
