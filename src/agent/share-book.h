/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share-book — the fractional book: one record per container holding fractions of a GPU (its core
 * half, its memory half, or the pair), the container shapes seen lately, the last proposal and the
 * record the last Allocate wrote. An object in memory only: no files, no device table, no lock, no
 * log (the journal, share-journal.h, makes it durable; share.c decides what goes in it and holds the
 * device lock around every use). Records are plain rows callers read and change; the book keeps
 * them, their IDs and their order.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/assign.h"
#include "agent/plugin.h"

#define SHARE_SHAPES 32u
#define SHARE_RECS_MAX 16384u   /* records in one book */
#define SHARE_REC_NAME_MAX 128u /* a record's name, with its NUL */

/* One ID of a record: device table index, kind, number. */
struct share_id {
        uint8_t gpu;
        uint8_t kind; /* enum plugin_kind */
        uint16_t n;
};

/* One container's fractional grant: its core half, its memory half, or both (a pair). */
struct share_rec {
        char name[SHARE_REC_NAME_MAX]; /* limits dir name = limits `container` id: first ID, "::" → "." */
        uint8_t first;                 /* kind that opened it */
        bool has[_PLUGIN_KIND_MAX];
        bool open;            /* waiting for the other half */
        bool guessed;         /* the pair was joined without a proposal kubelet followed */
        bool restored;        /* open when the agent restarted (from the journal) */
        bool confirmed;       /* restored, and PodResources listed its first half when a partner came */
        bool tentative;       /* a half joined it after the restart: reversed if its first half turns out free */
        uint64_t gpus;        /* table indices */
        uint64_t deadline_ms; /* open: CLOCK_MONOTONIC after which no partner joins */
        uint64_t wall;        /* Unix seconds of the last half */
        struct share_id *ids; /* the book's (share_rec_add_id grows it) */
        size_t n_ids;
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
        char rec[SHARE_REC_NAME_MAX]; /* the open record it was made for ("" = a first half) */
};

/* A container's shape: its core and memory IDs. */
struct share_shape {
        uint16_t core, mem;
};

struct share_book;

/* Thread: the loop, at start; lock: none. */
struct share_book *share_book_new(void); /* NULL: out of memory */
/* Thread: the loop, at teardown; lock: none. */
struct share_book *share_book_free(struct share_book *b); /* NULL-safe; returns NULL */
/* Every record, shape, the proposal and the last record's name go. */
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
void share_book_clear(struct share_book *b);

/* ---- records ---- */
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
size_t share_book_count(const struct share_book *b);
/* Record i (< count). Adding or removing a record moves the others: pointers into the book hold
 * until then; removing record i moves the ones after it down by one. */
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
struct share_rec *share_book_at(struct share_book *b, size_t i);
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
struct share_rec *share_book_open(struct share_book *b); /* the open record, if any */
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
struct share_rec *share_book_find(struct share_book *b, const char *name);
/* A new record (closed, no IDs) at the end, or NULL (the book is full, out of memory). */
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
struct share_rec *share_book_add(struct share_book *b, const char *name);
/* Put a record built outside the book (its IDs move into the book; *r is emptied): it replaces the
 * record of its name in place, or goes at the end. NULL (r untouched): full, out of memory. */
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
struct share_rec *share_book_put(struct share_book *b, struct share_rec *r);
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
void share_book_remove(struct share_book *b, struct share_rec *r);
/* A record that is not in a book yet (share_book_put) frees its IDs here. */
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
void share_rec_done(struct share_rec *r);

/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
int share_rec_add_id(struct share_rec *r, unsigned gpu, enum plugin_kind kind, unsigned n); /* 0 or -ENOMEM */
/* IDs of a kind on a device in a record. */
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
unsigned share_rec_count(const struct share_rec *r, enum plugin_kind kind, unsigned gpu);
/* Recompute gpus and has[] from the IDs (after dropping some). */
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
void share_rec_refresh(struct share_rec *r);

/* ---- shapes: what containers asked lately ---- */
/* Remember a container's (core, memory) IDs, newest first (at most SHARE_SHAPES). */
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
void share_book_learn(struct share_book *b, unsigned core, unsigned mem);
/* The partner a first half of `kind` and `size` keeps room for: the largest partner seen with a half
 * of that size (0 = a size not seen yet: the caller keeps the most room it can). */
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
unsigned share_book_expect(const struct share_book *b, enum plugin_kind kind, unsigned size);
/* The smallest partner every remembered container with a half of this kind and size had (0 = no
 * such shape): a first half no GPU keeps that much room for is refused. */
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
unsigned share_book_need(const struct share_book *b, enum plugin_kind kind, unsigned size);
/* Forget every shape (a journal's list replaces them). */
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
void share_book_forget_shapes(struct share_book *b);
/* The shapes, newest first: how many (≤ max) were copied to ret. */
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
unsigned share_book_shapes(const struct share_book *b, struct share_shape *ret, unsigned max);

/* ---- the small fields ---- */
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
struct share_proposal *share_book_proposal(struct share_book *b);
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
const struct share_proposal *share_book_proposal_const(const struct share_book *b);
/* The record the last Allocate wrote (kubelet admits one container at a time); "" none. */
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
const char *share_book_last(const struct share_book *b);
/* Thread: a gRPC handler or the loop; lock: the device lock held (the book has no lock of its own). */
void share_book_set_last(struct share_book *b, const char *name);
