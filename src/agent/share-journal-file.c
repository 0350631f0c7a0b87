/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share-journal-file — the fractional journal's two files (share-journal.h): which entry a save
 * writes (a log line with what changed since the last entry, or a snapshot), the writes (the
 * snapshot with the atomic writer, the log line with one write() and fdatasync()), and the reads at
 * start. It remembers, per record, what the last entry said of it (name and share_journal_key), so
 * a save compares instead of encoding every record; the book itself knows nothing of the journal.
 * Must never: acknowledge an entry that is not durable, or append after a write that may have torn
 * a line (the next save writes a snapshot instead).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/share-internal.h"
#include "agent/share-journal.h"
#include "agent/share.h"
#include "state/state.h"
#include "util/log.h"
#include "util/util.h"

#define JOURNAL_LOG_MIN (64u << 10)

/* What the last entry said of one record. */
struct saved {
        char name[SHARE_REC_NAME_MAX];
        uint8_t *key;
        size_t len;
};

struct share_journal {
        char dir[4096]; /* "" = none */
        bool log_open;  /* log_fd appends; false: the next save writes a snapshot */
        int log_fd;
        uint64_t seq;        /* of the last entry written or read */
        size_t log_bytes;    /* appended since the snapshot */
        size_t snap_bytes;   /* the snapshot's size */
        char *fields;        /* the book's small fields as last written */
        struct saved *saved; /* by name: every record the last entry left in the book */
        size_t n_saved;
};

struct share_journal *share_journal_new(const char *dir) {
        struct share_journal *j = calloc(1, sizeof *j);
        if (j) {
                strscpy(j->dir, dir ? dir : "", sizeof j->dir);
                j->log_fd = -1;
        }
        return j;
}

static void saved_free(struct saved *s, size_t n) {
        for (size_t i = 0; s && i < n; i++)
                free(s[i].key);
        free(s);
}

static void log_close(struct share_journal *j) {
        if (j->log_open)
                close(j->log_fd);
        j->log_open = false;
        j->log_fd = -1;
}

struct share_journal *share_journal_free(struct share_journal *j) {
        if (!j)
                return NULL;
        log_close(j);
        saved_free(j->saved, j->n_saved);
        free(j->fields);
        free(j);
        return NULL;
}

static int saved_cmp(const void *a, const void *b) {
        return strcmp(((const struct saved *)a)->name, ((const struct saved *)b)->name);
}

/* The book's records as the entry being written leaves them: name and key each, sorted by name. */
static struct saved *saved_of(struct share_book *b) {
        size_t n = share_book_count(b);
        struct saved *s = calloc(n ? n : 1, sizeof *s);
        for (size_t i = 0; s && i < n; i++) {
                const struct share_rec *r = share_book_at(b, i);
                strscpy(s[i].name, r->name, sizeof s[i].name);
                if (!(s[i].key = share_journal_key(r, &s[i].len))) {
                        saved_free(s, n);
                        return NULL;
                }
        }
        if (s)
                qsort(s, n, sizeof *s, saved_cmp);
        return s;
}

/* The entry written: remember what it said. */
static void entry_written(struct share_journal *j, struct saved *now, size_t n, char *fields) {
        saved_free(j->saved, j->n_saved);
        j->saved = now;
        j->n_saved = n;
        free(j->fields);
        j->fields = fields;
        j->seq++;
}

/* A new snapshot of the whole book (entry seq+1), then an empty log opened for appending. */
static int compact(struct share_journal *j, const struct devices *d, struct share_book *b) {
        _cleanup_(freep) char *fields = share_journal_fields(d, b);
        struct saved *now = saved_of(b);
        size_t len = 0;
        _cleanup_(freep) char *text = fields && now ? share_journal_snapshot(d, b, j->seq + 1, fields, &len) : NULL;
        if (!text) {
                saved_free(now, share_book_count(b));
                return -ENOMEM;
        }
        log_close(j);
        int r = state_write_atomic(j->dir, SHARE_JOURNAL_FILE, text, len, 0600, 0);
        if (r < 0) {
                saved_free(now, share_book_count(b));
                return r;
        }
        entry_written(j, now, share_book_count(b), TAKE_PTR(fields));
        j->snap_bytes = len;
        j->log_bytes = 0;
        /* The log restarts empty; its dir entry made durable once, so later fdatasyncs suffice. A log
         * that cannot be opened only means the next decision writes a snapshot again. */
        _cleanup_(closep) int dfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int fd = dfd < 0 ? -1
                         : openat(dfd, SHARE_JOURNAL_LOG,
                                  O_WRONLY | O_APPEND | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 && fsync(dfd) == 0) {
                j->log_fd = fd;
                j->log_open = true;
        } else if (fd >= 0)
                close(fd);
        return 0;
}

static int write_all(int fd, const char *s, size_t len) {
        while (len > 0) {
                ssize_t w = write(fd, s, len);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return w < 0 ? -errno : -EIO;
                s += w;
                len -= (size_t)w;
        }
        return 0;
}

/* lint: long — one log line of what changed since the last entry, made durable: the diff of the book against what
 * the last entry said (records put, names deleted, the small fields), the write, and the bookkeeping after it share
 * the arrays it allocates. */
static int append(struct share_journal *j, const struct devices *d, struct share_book *b) {
        size_t n = share_book_count(b);
        struct saved *now = saved_of(b);
        size_t *put = calloc(n ? n : 1, sizeof *put);
        bool *kept = calloc(j->n_saved ? j->n_saved : 1, sizeof *kept);
        const char **del = calloc(j->n_saved ? j->n_saved : 1, sizeof *del);
        _cleanup_(freep) char *fields = share_journal_fields(d, b);
        _cleanup_(freep) char *text = NULL;
        size_t n_put = 0, n_del = 0, len = 0;
        int r = -ENOMEM;
        if (!now || !put || !kept || !del || !fields)
                goto out;
        for (size_t i = 0; i < n; i++) {
                const struct share_rec *rec = share_book_at(b, i);
                struct saved key = { 0 };
                strscpy(key.name, rec->name, sizeof key.name);
                const struct saved *was =
                        j->n_saved ? bsearch(&key, j->saved, j->n_saved, sizeof key, saved_cmp) : NULL;
                const struct saved *is = bsearch(&key, now, n, sizeof key, saved_cmp);
                if (was)
                        kept[was - j->saved] = true;
                if (!was || !is || was->len != is->len || memcmp(was->key, is->key, is->len) != 0)
                        put[n_put++] = i;
        }
        for (size_t i = 0; i < j->n_saved; i++)
                if (!kept[i])
                        del[n_del++] = j->saved[i].name;
        r = 0;
        if (n_put == 0 && n_del == 0 && j->fields && streq(j->fields, fields))
                goto out; /* nothing to make durable */
        r = -ENOMEM;
        if (!(text = share_journal_line(d, b, j->seq + 1, del, n_del, put, n_put, fields, &len)))
                goto out;
        r = write_all(j->log_fd, text, len);
        if (r == 0 && fdatasync(j->log_fd) < 0)
                r = -errno;
        if (r < 0) {
                log_close(j); /* a torn line may follow: the next save writes a snapshot */
                goto out;
        }
        entry_written(j, now, n, TAKE_PTR(fields));
        now = NULL;
        j->log_bytes += len;
out:
        saved_free(now, n);
        free(put);
        free(kept);
        free(del);
        return r;
}

int share_journal_save(struct share_journal *j, const struct devices *d, struct share_book *b) {
        if (!j->dir[0])
                return 0;
        size_t limit = MIN(MAX((size_t)JOURNAL_LOG_MIN, 4 * j->snap_bytes), (size_t)SHARE_JOURNAL_MAX / 2);
        bool snapshot = !j->log_open || j->log_bytes >= limit;
        int r = snapshot ? compact(j, d, b) : append(j, d, b);
        share_count("gpuslice_share_journal_writes_total", r < 0 ? "error" : snapshot ? "snapshot" : "append");
        if (r < 0)
                log_error_errno(r, "cannot write the fractional journal", "dir=%s", j->dir);
        return r;
}

/* A file of the journal dir, read whole (at most max). */
static int read_in(const char *dir, const char *name, char **ret, size_t *ret_len) {
        char path[4200];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
                return -ENAMETOOLONG;
        return read_file(path, SHARE_JOURNAL_MAX, ret, ret_len);
}

int share_journal_load(struct share_journal *j, const struct devices *d, struct share_book *b) {
        if (!j->dir[0])
                return -ENOENT;
        _cleanup_(freep) char *text = NULL, *log = NULL;
        size_t len = 0, log_len = 0;
        uint64_t seq = 0;
        int r = read_in(j->dir, SHARE_JOURNAL_FILE, &text, &len);
        if (r < 0)
                return r;
        r = share_journal_decode(d, b, text, len, &seq);
        if (r < 0)
                return r;
        r = read_in(j->dir, SHARE_JOURNAL_LOG, &log, &log_len);
        if (r == -ENOENT) /* a snapshot alone (written, the log not created yet) */
                r = 0;
        else if (r == 0)
                r = share_journal_replay(d, b, log, log_len, &seq);
        if (r < 0) {
                share_book_clear(b);
                return r == -EFBIG ? -EBADMSG : r;
        }
        /* the next save writes a snapshot (the log folded in, a torn last line dropped) */
        log_close(j);
        saved_free(j->saved, j->n_saved);
        j->saved = NULL;
        j->n_saved = 0;
        j->seq = seq;
        return (int)share_book_count(b);
}
