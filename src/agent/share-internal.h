/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share-internal — what the files of the fractional service share and nobody else uses (see
 * share.h for the list): the decision events, the key file, the limits dirs, the invariants and
 * the pairing across a restart. Each works on what it is given (the plugin core, the book, the
 * journal) and keeps nothing of its own. Never include it outside src/agent. Every function expects
 * the caller to hold the device lock unless it says otherwise.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/plugin.h"
#include "agent/share-book.h"
#include "agent/share-journal.h"
#include "alloc/fraction.h"
#include "cluster/cluster.h"
#include "interposer/limits.h"
#include "util/error.h"

/* ---- decision events: metrics, the debug line, crash points (share-log.c) ---- */

/* Thread: any; lock: none (the metrics' own). */
void share_count(const char *family, const char *outcome);
/* Thread: a gRPC handler or the loop; lock: the device lock held. */
void share_log_decision(const struct plugin *p, const char *call, enum plugin_kind kind, int gpu, const char *rec,
                        const char *reason);
/* Close the open record with an outcome ("single", "expired", "refused") for metrics and log. */
/* Thread: a gRPC handler or the loop; lock: the device lock held. */
void share_rec_close(const struct plugin *p, struct share_rec *r, const char *outcome, const char *why);
/* Crash points for the fault-injection suite (tests/faults/): when $GPUSLICE_CRASH_AT names
 * `point` (optionally "point:N" = the Nth time), the agent SIGKILLs itself there. */
/* Thread: any; lock: none (atomic). */
void share_crash_point(const char *point);

/* ---- the key file of a limits dir (share-key.c): "<resource>\n<device ID>\n" ---- */

/* The key of an allocation (its resource and device ID): the length, or -ENAMETOOLONG. */
/* Thread: any; lock: none (pure). */
int share_key_format(const char *resource, const char *id, char *buf, size_t len);
/* Parse a key file's text (NUL-terminated, changed in place). false: not a key. */
/* Thread: any; lock: none (pure). */
bool share_key_parse(char *text, char *resource, size_t rlen, char *id, size_t ilen);

/* ---- the limits dirs (share-dirs.c): <limits root>/<record name>/ ---- */

/* The grant of record r as a limits file. A half the container did not ask for gets the smallest
 * share of its resource when the profile serves it (1 % compute, one memory unit), so the
 * guaranteed shares of the others on the GPU hold (docs/sharing.md, "Only one of the two"); when
 * the profile has no such resource nobody holds a share of it and there is no limit. */
/* Thread: a gRPC handler or the loop; lock: the device lock held. */
int share_dir_limits(const struct plugin *p, const struct share_rec *r, struct gs_limits *ret);
/* Write r's dir (fresh: remove an older dir of that name first): key, limits file and ld.so.preload
 * written through the dir's fd, each replaced atomically. 0 or -errno with err. */
/* Thread: a gRPC handler; lock: the device lock held (local file I/O only). */
int share_dir_write(const struct plugin *p, const struct share_rec *r, bool fresh, struct gs_error *err);
/* The limits file of dir `name` read back and parsed. 0 or -errno (-EBADMSG: does not parse). */
/* Thread: any; lock: none (reads one dir). */
int share_dir_read_limits(const struct plugin *p, const char *name, struct gs_limits *ret);
/* Remove dir `name` and what is in it. */
/* Thread: a gRPC handler or the loop; lock: the device lock held. */
void share_dir_remove(const struct plugin *p, const char *name);
/* share_cleanup_dirs (share.h) on the service's book and journal. Takes the lock itself. */
/* Thread: a sync's (loop, status, a handler's: podsync); lock: takes the device lock per dir. */
int share_dirs_cleanup(struct plugin *p, struct share_book *b, struct share_journal *j);

/* ---- the invariants (share-check.c) ---- */

/* After a decision (rec = the record decided on, or NULL for every record): per GPU granted core
 * <= 100 and memory <= the GPU's memory, no ID in two records, no GPU held whole and in fractions,
 * the record's limits file equal to its grant. Violations are logged and counted
 * (gpuslice_share_invariant_violations_total). Returns the number found. */
/* Thread: a gRPC handler or the loop; lock: the device lock held. */
unsigned share_check(struct plugin *p, struct share_book *b, const struct share_rec *rec);

/* ---- pairing across an agent restart (share-restart.c) ---- */

/* share_restore (share.h) with the lock held: the journal into the (empty) book, the IDs back in
 * the record, the half waiting for its partner kept open, every dir rewritten. */
/* Thread: the loop, at start; lock: takes the device lock. */
int share_restart_restore(struct plugin *p, struct share_book *b, struct share_journal *j);
/* share_after_sync (share.h) for the first reconcile after a restore. */
/* Thread: a gRPC handler or the loop; lock: the device lock held. */
int share_restart_after_sync(struct plugin *p, struct share_book *b, struct share_journal *j);
/* Before a call of `kind` may pair with a record restored from the journal: ask kubelet (sync,
 * without the lock) whether it still holds that record's first half. Takes the lock itself. */
/* Thread: a gRPC handler; lock: takes the device lock itself, never across the sync. */
void share_restart_confirm(struct plugin *p, struct share_book *b, struct share_journal *j, enum plugin_kind kind,
                           int (*sync)(void *userdata), void *userdata);
/* A half that joined a restored record turns out to be the first half of the container being
 * admitted now (lost_first: kubelet listed the record's first half as available). */
/* Thread: a gRPC handler or the loop; lock: the device lock held. */
void share_restart_reverse(struct plugin *p, struct share_book *b, bool lost_first);
/* Does kubelet hold (PodResources listed) the record's half of `kind`? */
/* Thread: a gRPC handler or the loop; lock: the device lock held. */
bool share_rec_listed(struct plugin *p, const struct share_rec *r, enum plugin_kind kind);

/* ---- a packing policy's GPU for a share (share-pack.c) ---- */

struct sched_workload;
/* The share of a first half q in milli-GPU (1..999): its requested kind's share of the largest GPU. */
/* Thread: any; lock: none (pure). */
unsigned share_pack_milli(const struct alloc_frac_request *q);
/* The extender's GPU for first half q by policy (CLUSTER_POLICY_FGD, _FRAG) under the workload w:
 * sched_pack_share_gpu over q's candidates (alloc_frac_candidate) with their free share in milli-GPU;
 * sets q->has_prefer and q->prefer when it names one (never for a partner, or without w). */
/* Thread: any; lock: none (pure). */
void share_pack_prefer(struct alloc_frac_request *q, enum cluster_policy policy, const struct sched_workload *w);
