/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share-internal — what share.c (the gRPC handlers: decode → pick → encode) and share-record.c (the
 * records of fractional grants, their write-ahead journal, the per-container limits dirs and the
 * invariants) share. Never include it outside src/agent. Every function expects p->lock held.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/assign.h"
#include "agent/plugin.h"
#include "agent/share.h"

/* One ID of a record: GPU table index, kind, number. */
struct share_id {
        uint8_t gpu;
        uint8_t kind; /* enum plugin_kind */
        uint16_t n;
};

/* One container's fractional grant: its core half, its memory half, or both (a pair). */
struct share_rec {
        char name[128]; /* limits dir name = limits `container` id: first ID, "::" → "." */
        uint8_t first;  /* kind that opened it */
        bool has[_PLUGIN_KIND_MAX];
        bool open;            /* waiting for the other half */
        bool guessed;         /* the pair was joined without a proposal kubelet followed */
        bool restored;        /* open when the agent restarted (from the journal) */
        bool confirmed;       /* restored, and PodResources listed its first half when a partner came */
        bool tentative;       /* a half joined it after the restart: reversed if its first half turns out free */
        uint64_t gpus;        /* table indices */
        uint64_t deadline_ms; /* open: CLOCK_MONOTONIC after which no partner joins */
        uint64_t wall;        /* Unix seconds of the last half */
        struct share_id *ids;
        size_t n_ids;
        uint8_t *saved;   /* what its journal text said when last written (NULL: not in the journal yet) */
        size_t saved_len; /* ... compared byte for byte at the next save (rec_journal_key) */
        /* the container it belongs to, "ns/pod/container", when the scheduler's assignment said at its
         * first half (assign_ctx.owner; in memory only: after a restart PodResources names it) */
        char owner[ASSIGN_OWNER_MAX];
};

/* What the last GetPreferredAllocation proposed (one container request). */
struct share_proposal {
        bool set;
        uint8_t kind;
        int gpu; /* table index */
        unsigned size;
        char rec[128]; /* the open record it was made for ("" = a first half) */
};

#define SHARE_SHAPES 32u

struct share_book {
        struct share_rec *rec;
        size_t n, cap;
        struct share_proposal prop;
        struct {
                uint16_t core, mem;
        } shape[SHARE_SHAPES]; /* recent container shapes, newest first */
        unsigned n_shapes;
        char last[128];       /* the record the last Allocate wrote (kubelet admits one container at a time) */
        bool restored;        /* loaded from the journal; not yet checked against PodResources */
        bool no_room;         /* the last GetPreferredAllocation refused a first half for room */
        bool no_room_partner; /* ... because no GPU keeps room for its known partner */
        /* GPUs held whole until the reconcile of the running GetPreferredAllocation: kubelet's list
         * of the other fractional resource may still show their IDs Unhealthy (ListAndWatch has not
         * reached it), so no first half goes there in that call (0 outside one) */
        uint64_t just_freed;
        /* the journal (share-record.c): snapshot + append-only log */
        bool log_open; /* log_fd appends; false: the next save writes a snapshot */
        int log_fd;
        uint64_t seq;      /* of the last entry written or read */
        size_t log_bytes;  /* appended since the snapshot */
        size_t snap_bytes; /* the snapshot's size */
        char *saved_book;  /* the small fields as last written */
        char (*gone)[128]; /* journaled records removed since the last entry */
        size_t n_gone, cap_gone;
};

struct share_book *share_book(struct plugin *p);    /* NULL only when out of memory */
struct share_rec *share_rec_open(struct plugin *p); /* the open record, if any */
struct share_rec *share_rec_find(struct plugin *p, const char *name);
/* New record (closed, no IDs) or NULL (-ENOMEM). Pointers into the book change on add/remove. */
struct share_rec *share_rec_add(struct plugin *p, const char *name);
void share_rec_remove(struct plugin *p, struct share_rec *r);
int share_rec_add_id(struct share_rec *r, unsigned gpu, enum plugin_kind kind, unsigned n);
/* IDs of a kind on a GPU in a record. */
unsigned share_rec_count(const struct share_rec *r, enum plugin_kind kind, unsigned gpu);
/* Drop the given IDs from every record other than `keep` (kubelet handed them out again: their
 * holder is gone); records left without IDs go, with their dirs. */
void share_rec_release_ids(struct plugin *p, const struct share_rec *keep, const struct share_id *ids, size_t n);

/* Recompute gpus and has[] from the IDs; remove a record's limits dir. */
void share_rec_refresh(struct share_rec *r);
void share_rec_remove_dir(struct plugin *p, const struct share_rec *r);

/* Close the open record with an outcome ("single", "expired", "refused") for metrics and log. */
void share_rec_close(struct plugin *p, struct share_rec *r, const char *outcome, const char *why);

/* The shape memory: remember a container's (core, memory) IDs (also of refused pairs); the
 * partner a first half of `kind` and `size` keeps room for: the largest partner seen with a half
 * of that size (0 = a size not seen yet: the caller keeps the most room it can). */
void share_shape_learn(struct plugin *p, unsigned core, unsigned mem);
unsigned share_shape_expect(struct plugin *p, enum plugin_kind kind, unsigned size);
/* The smallest partner every remembered container with a half of this kind and size had (0 = no
 * such shape): a first half no GPU keeps that much room for is refused (alloc_frac_request.need). */
unsigned share_shape_need(struct plugin *p, enum plugin_kind kind, unsigned size);

/* Does kubelet hold (PodResources listed) the record's half of `kind`? */
bool share_rec_listed(struct plugin *p, const struct share_rec *r, enum plugin_kind kind);

/* Make the book durable in the journal (DIR/gpuslice.fractions, the snapshot written with the
 * atomic writer, and DIR/gpuslice.fractions.log, one fdatasync'ed line per change since): one
 * append of what changed, or a new snapshot when there is no log yet or it outgrew its bound.
 * 0 or -errno (the caller fails its answer); no journal dir configured: 0. */
int share_journal_save(struct plugin *p);

/* Write <root>/<rec>/{key,limits,shm/} from the record (fresh: remove an older dir of that name
 * first). The limits file is replaced atomically. 0 or -errno with err. */
int share_rec_write_dir(struct plugin *p, const struct share_rec *r, bool fresh, struct gs_error *err);

/* The invariants after a decision (rec = the record decided on, or NULL for every record):
 * per GPU granted core <= 100 and memory <= the GPU's memory, no ID in two records, no GPU held
 * whole and in fractions, the record's limits file equal to its grant. Violations are logged and
 * counted (gpuslice_share_invariant_violations_total). Returns the number found. */
unsigned share_check(struct plugin *p, const struct share_rec *rec);

/* Metrics and the debug line of one decision. */
void share_count(const char *family, const char *outcome);
void share_log_decision(struct plugin *p, const char *call, enum plugin_kind kind, int gpu, const char *rec,
                        const char *reason);

/* Crash points for the fault-injection suite (tests/faults/): when $GPUSLICE_CRASH_AT names
 * `point` (optionally "point:N" = the Nth time), the agent SIGKILLs itself there. */
void share_crash_point(const char *point);

const char *share_kind_word(enum plugin_kind kind);
