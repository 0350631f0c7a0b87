/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share-journal — the fractional book made durable (docs/sharing.md, "Crash safety"): a write-ahead
 * journal of two files in the journal dir (the state dir):
 *
 *   gpuslice.fractions      a snapshot of the whole book, replaced whole by the atomic writer (temp
 *                           file, fsync, rename, fsync of the dir): {"version","seq","records",
 *                           "shapes","proposal","last"}
 *   gpuslice.fractions.log  an append-only log of one line per decision since that snapshot: what
 *                           changed ({"seq","del","put",...}: records deleted by name, records put
 *                           whole, the book's small fields), written with one write() and made
 *                           durable with fdatasync() before the answer leaves the agent
 *
 * Each entry carries a sequence number one above the one before; a snapshot holds everything up to
 * its own, so log lines at or below it (left by a crash between the snapshot's rename and the log's
 * truncation) are skipped. A last line without its newline is a write the crash cut short (never
 * acknowledged) and is ignored; anything else wrong rejects the journal whole. The log is folded
 * into a new snapshot when it outgrows its bound (at least 64 KiB, four times the snapshot), and at
 * every start.
 *
 * Two parts: the codec (share-journal.c: book ⇄ text, in memory, what the fuzz target and the unit
 * tests drive) and the files (share-journal-file.c: which entry to write, the writes, the reads at
 * start). Neither takes a lock: the caller holds the device lock around every use of the book.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "agent/devices.h"
#include "agent/share-book.h"

#define SHARE_JOURNAL_VERSION UINT64_C(2)
#define SHARE_JOURNAL_MAX (8u << 20) /* bytes of a snapshot or a log at most */

/* ---- the codec (share-journal.c) ---- */

/* A record's journal text (one JSON object), NULL when out of memory. Caller frees. */
/* Thread: any; lock: none (pure). */
char *share_journal_record(const struct devices *d, const struct share_rec *r);
/* What a record's journal text says, as bytes to compare (cheaper than encoding it: a save looks at
 * every record). NULL when out of memory. Caller frees. */
/* Thread: any; lock: none (pure). */
uint8_t *share_journal_key(const struct share_rec *r, size_t *ret_len);
/* The book's small fields, `"shapes":…,"proposal":…,"last":…` (no braces), for both kinds of
 * entry. NULL when out of memory. Caller frees. */
/* Thread: any; lock: none (pure). */
char *share_journal_fields(const struct devices *d, const struct share_book *b);
/* The snapshot text of the whole book as entry `seq` (fields: share_journal_fields'). NULL: out of
 * memory. Caller frees. */
/* Thread: any; lock: none (pure). */
char *share_journal_snapshot(const struct devices *d, struct share_book *b, uint64_t seq, const char *fields,
                             size_t *ret_len);
/* One log line, its newline included: entry `seq`, the records named del[0..n_del) deleted, the
 * book's records put[0..n_put) (indices) put whole, the small fields. NULL: out of memory. */
/* Thread: any; lock: none (pure). */
char *share_journal_line(const struct devices *d, struct share_book *b, uint64_t seq, const char *const *del,
                         size_t n_del, const size_t *put, size_t n_put, const char *fields, size_t *ret_len);
/* Parse a snapshot into an empty book: 0 and *ret_seq, or -EBADMSG (the book emptied), -ENOMEM. */
/* Thread: any; lock: none (pure). */
int share_journal_decode(const struct devices *d, struct share_book *b, const char *text, size_t len,
                         uint64_t *ret_seq);
/* Replay a log on the book share_journal_decode filled, *seq its entry (updated): complete lines in
 * order, entries at or below *seq skipped, a last line without its newline ignored. The number of
 * entries applied, or -EBADMSG (the book emptied: the journal is rejected whole), -ENOMEM. */
/* Thread: any; lock: none (pure). */
int share_journal_replay(const struct devices *d, struct share_book *b, const char *text, size_t len, uint64_t *seq);

/* ---- the files (share-journal-file.c) ---- */

struct share_journal;

/* The journal of dir (copied; "" = none: every save succeeds and writes nothing). NULL: out of memory. */
/* Thread: the loop, at start; lock: none. */
struct share_journal *share_journal_new(const char *dir);
/* Thread: the loop, at teardown; lock: none. */
struct share_journal *share_journal_free(struct share_journal *j); /* NULL-safe; closes the log */
/* Make the book durable: one append of what changed since the last entry (nothing when nothing
 * did), or a new snapshot when there is no log yet or it outgrew its bound. 0 or -errno (logged;
 * the caller fails its answer). */
/* Thread: a gRPC handler or the loop; lock: the device lock held (the journal's fd is its). */
int share_journal_save(struct share_journal *j, const struct devices *d, struct share_book *b);
/* Read the snapshot and replay the log into the (empty) book. The number of records, -ENOENT (no
 * journal, or none configured), -EBADMSG (rejected whole: the book emptied), -errno. The next save
 * writes a snapshot. */
/* Thread: the loop, at start; lock: none (nothing served yet). */
int share_journal_load(struct share_journal *j, const struct devices *d, struct share_book *b);
