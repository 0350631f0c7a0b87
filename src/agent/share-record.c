/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share-record — the agent's records of fractional grants (one per container: its core half, its
 * memory half, or the pair), the write-ahead journal that keeps them across a crash, the
 * per-container limits dirs written from them, and the invariants checked after every decision
 * (docs/sharing.md, "Crash safety").
 *
 * The journal is a snapshot, <state-dir>/gpuslice.fractions, written whole with the atomic writer
 * (temp file, fsync, rename, fsync dir), and an append-only log, gpuslice.fractions.log, of one
 * fdatasync'ed line per decision since — durable BEFORE an answer leaves the agent; on start both
 * are read back, the records' IDs re-enter the allocation record, every live limits dir is
 * rewritten from its record, and a half still waiting for its partner keeps waiting.
 *
 * Must never: write a limits file looser than the record's grant, trust a journal that fails any
 * check (it is rejected whole), or keep the lock across anything but local file I/O.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/health.h"
#include "agent/share-internal.h"
#include "interposer/limits.h"
#include "metrics/metrics.h"
#include "state/state.h"
#include "util/limits-dir.h"
#include "util/log.h"
#include "util/util.h"

#define JOURNAL_VERSION UINT64_C(2)
#define JOURNAL_MAX (8u << 20)
#define RECS_MAX 16384u

const char *share_kind_word(enum plugin_kind kind) {
        return kind == PLUGIN_CORE ? "core" : kind == PLUGIN_MEMORY ? "mem" : "";
}

/* ---- metrics, log, crash points ---- */

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

void share_log_decision(struct plugin *p, const char *call, enum plugin_kind kind, int gpu, const char *rec,
                        const char *reason) {
        log_debug("fraction decision", "call=%s container=%s resource=%s gpu=%s reason=\"%s\"", call,
                  rec && rec[0] ? rec : "-", plugin_resource(p, kind),
                  gpu >= 0 && (unsigned)gpu < p->n ? p->gpu[gpu].id : "-", reason);
}

void share_crash_point(const char *point) {
        const char *want = secure_getenv("GPUSLICE_CRASH_AT");
        if (!want || !want[0])
                return;
        size_t n = strlen(point);
        if (strncmp(want, point, n) != 0 || (want[n] != '\0' && want[n] != ':'))
                return;
        static unsigned hits; /* the agent's one crash counter; tests only */
        unsigned nth = 1;
        if (want[n] == ':' && parse_uint(want + n + 1, 1000000, &nth) < 0)
                return;
        if (++hits >= nth) {
                log_warn("crash point reached: killing myself", "point=%s", point);
                raise(SIGKILL);
        }
}

/* ---- the book ---- */

static void log_close(struct share_book *b);

struct share_book *share_book(struct plugin *p) {
        if (!p->book)
                p->book = calloc(1, sizeof *p->book);
        return p->book;
}

void share_book_free(struct share_book *b) {
        if (!b)
                return;
        for (size_t i = 0; i < b->n; i++) {
                free(b->rec[i].ids);
                free(b->rec[i].saved);
        }
        if (b->log_open)
                close(b->log_fd);
        free(b->rec);
        free(b->gone);
        free(b->saved_book);
        free(b);
}

size_t share_record_count(struct plugin *p) {
        struct share_book *b = share_book(p);
        return b ? b->n : 0;
}

struct share_rec *share_rec_open(struct plugin *p) {
        struct share_book *b = share_book(p);
        for (size_t i = 0; b && i < b->n; i++)
                if (b->rec[i].open)
                        return &b->rec[i];
        return NULL;
}

struct share_rec *share_rec_find(struct plugin *p, const char *name) {
        struct share_book *b = share_book(p);
        for (size_t i = 0; b && i < b->n; i++)
                if (streq(b->rec[i].name, name))
                        return &b->rec[i];
        return NULL;
}

struct share_rec *share_rec_add(struct plugin *p, const char *name) {
        struct share_book *b = share_book(p);
        if (!b || b->n >= RECS_MAX)
                return NULL;
        if (b->n == b->cap) {
                size_t cap = b->cap ? b->cap * 2 : 16;
                struct share_rec *r = realloc(b->rec, cap * sizeof *r);
                if (!r)
                        return NULL;
                b->rec = r;
                b->cap = cap;
        }
        struct share_rec *r = &b->rec[b->n++];
        *r = (struct share_rec){ 0 };
        strscpy(r->name, name, sizeof r->name);
        return r;
}

void share_rec_remove(struct plugin *p, struct share_rec *r) {
        struct share_book *b = share_book(p);
        if (!b || r < b->rec || r >= b->rec + b->n)
                return;
        if (r->saved) { /* journaled: the next log line deletes it */
                if (b->n_gone == b->cap_gone) {
                        size_t cap = b->cap_gone ? b->cap_gone * 2 : 16;
                        char(*g)[128] = realloc(b->gone, cap * sizeof *g);
                        if (g) {
                                b->gone = g;
                                b->cap_gone = cap;
                        } else
                                log_close(b); /* cannot say it: the next save writes a snapshot */
                }
                if (b->n_gone < b->cap_gone)
                        strscpy(b->gone[b->n_gone++], r->name, sizeof b->gone[0]);
        }
        free(r->ids);
        free(r->saved);
        size_t i = (size_t)(r - b->rec);
        memmove(&b->rec[i], &b->rec[i + 1], (b->n - i - 1) * sizeof *r);
        b->n--;
}

int share_rec_add_id(struct share_rec *r, unsigned gpu, enum plugin_kind kind, unsigned n) {
        struct share_id *ids = realloc(r->ids, (r->n_ids + 1) * sizeof *ids);
        if (!ids)
                return -ENOMEM;
        r->ids = ids;
        r->ids[r->n_ids++] = (struct share_id){ .gpu = (uint8_t)gpu, .kind = (uint8_t)kind, .n = (uint16_t)n };
        r->gpus |= UINT64_C(1) << gpu;
        r->has[kind] = true;
        return 0;
}

unsigned share_rec_count(const struct share_rec *r, enum plugin_kind kind, unsigned gpu) {
        unsigned c = 0;
        for (size_t i = 0; i < r->n_ids; i++)
                c += r->ids[i].kind == kind && r->ids[i].gpu == gpu;
        return c;
}

void share_rec_refresh(struct share_rec *r) {
        r->gpus = 0;
        r->has[PLUGIN_CORE] = r->has[PLUGIN_MEMORY] = false;
        for (size_t i = 0; i < r->n_ids; i++) {
                r->gpus |= UINT64_C(1) << r->ids[i].gpu;
                r->has[r->ids[i].kind] = true;
        }
}

void share_rec_remove_dir(struct plugin *p, const struct share_rec *r) {
        _cleanup_(closep) int root = open(p->opt.limits_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root >= 0)
                (void)limits_dir_remove_at(root, r->name);
}

static void remove_dir(struct plugin *p, const char *name) {
        _cleanup_(closep) int root = open(p->opt.limits_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root >= 0)
                (void)limits_dir_remove_at(root, name);
}

void share_rec_release_ids(struct plugin *p, const struct share_rec *keep, const struct share_id *ids, size_t n) {
        struct share_book *b = share_book(p);
        for (size_t i = 0; b && i < b->n;) {
                struct share_rec *r = &b->rec[i];
                if (keep && streq(r->name, keep->name)) {
                        i++;
                        continue;
                }
                size_t o = 0;
                for (size_t k = 0; k < r->n_ids; k++) {
                        bool gone = false;
                        for (size_t j = 0; j < n && !gone; j++)
                                gone = ids[j].gpu == r->ids[k].gpu && ids[j].kind == r->ids[k].kind &&
                                       ids[j].n == r->ids[k].n;
                        if (!gone)
                                r->ids[o++] = r->ids[k];
                }
                r->n_ids = o;
                share_rec_refresh(r);
                if (o == 0) {
                        log_debug("record released: kubelet no longer holds its IDs", "container=%s", r->name);
                        remove_dir(p, r->name);
                        share_rec_remove(p, r);
                        continue;
                }
                i++;
        }
}

void share_rec_close(struct plugin *p, struct share_rec *r, const char *outcome, const char *why) {
        if (!r || !r->open)
                return;
        r->open = false;
        share_count("gpuslice_share_pairs_total", outcome);
        share_log_decision(p, "close", (enum plugin_kind)r->first, r->gpus ? __builtin_ctzll(r->gpus) : -1, r->name,
                           why);
}

/* ---- shapes ---- */

void share_shape_learn(struct plugin *p, unsigned core, unsigned mem) {
        struct share_book *b = share_book(p);
        if (!b || core == 0 || mem == 0 || core > SHARE_CORE_IDS || mem > SHARE_MEM_IDS_MAX)
                return;
        unsigned i = 0;
        while (i < b->n_shapes && !(b->shape[i].core == core && b->shape[i].mem == mem))
                i++;
        if (i == b->n_shapes && b->n_shapes < SHARE_SHAPES)
                b->n_shapes++;
        if (i == SHARE_SHAPES)
                i = SHARE_SHAPES - 1;
        memmove(&b->shape[1], &b->shape[0], i * sizeof b->shape[0]);
        b->shape[0].core = (uint16_t)core;
        b->shape[0].mem = (uint16_t)mem;
}

unsigned share_shape_expect(struct plugin *p, enum plugin_kind kind, unsigned size) {
        struct share_book *b = share_book(p);
        unsigned exact = 0;
        for (unsigned i = 0; b && i < b->n_shapes; i++) {
                unsigned mine = kind == PLUGIN_CORE ? b->shape[i].core : b->shape[i].mem;
                unsigned other = kind == PLUGIN_CORE ? b->shape[i].mem : b->shape[i].core;
                if (mine == size)
                        exact = MAX(exact, other);
        }
        return exact; /* a shape seen before: the largest partner it had */
}

unsigned share_shape_need(struct plugin *p, enum plugin_kind kind, unsigned size) {
        struct share_book *b = share_book(p);
        unsigned least = 0;
        for (unsigned i = 0; b && i < b->n_shapes; i++) {
                unsigned mine = kind == PLUGIN_CORE ? b->shape[i].core : b->shape[i].mem;
                unsigned other = kind == PLUGIN_CORE ? b->shape[i].mem : b->shape[i].core;
                if (mine == size && (least == 0 || other < least))
                        least = other;
        }
        return least;
}

/* ---- limits dirs ---- */

/* The grant of a record as a limits file. A half the container did not ask for gets the smallest
 * share of its resource when the profile serves it (1 % compute, one memory unit), so the
 * guaranteed shares of the others on the GPU hold (docs/sharing.md, "Only one of the two"); when
 * the profile has no such resource nobody holds a share of it and there is no limit. */
static int rec_limits(const struct plugin *p, const struct share_rec *r, struct gs_limits *l) {
        *l = (struct gs_limits){ .version = GS_LIMITS_VERSION,
                                 .core_policy = p->opt.limit_when_alone ? GS_CORE_HARD : GS_CORE_ELASTIC };
        strscpy(l->container, r->name, sizeof l->container);
        strscpy(l->region, SHARE_REGION_PATH, sizeof l->region);
        for (unsigned g = 0; g < p->n; g++) {
                if (!(r->gpus & (UINT64_C(1) << g)))
                        continue;
                if (l->n_devices >= GS_MAX_DEVICES)
                        return -E2BIG;
                struct gs_limits_device *d = &l->dev[l->n_devices];
                d->index = l->n_devices++;
                strscpy(d->uuid, p->gpu[g].id, sizeof d->uuid);
                unsigned core = share_rec_count(r, PLUGIN_CORE, g), mem = share_rec_count(r, PLUGIN_MEMORY, g);
                if (r->has[PLUGIN_CORE])
                        d->core_percent = core > 0 && core < SHARE_CORE_IDS ? core : 100;
                else
                        d->core_percent = p->opt.core_resource[0] ? 1 : 100;
                if (r->has[PLUGIN_MEMORY])
                        d->memory_bytes = MIN((uint64_t)mem * p->opt.memory_unit, p->gpu[g].memory_total);
                else if (p->opt.memory_resource[0])
                        d->memory_bytes = MIN(p->opt.memory_unit, p->gpu[g].memory_total);
        }
        return 0;
}

/* The key file: the resource and device ID the dir lives by (the record's first ID). */
static int rec_key(const struct plugin *p, const struct share_rec *r, char *buf, size_t len) {
        char id[SHARE_ID_MAX];
        if (r->n_ids == 0 ||
            share_format_id(p->gpu[r->ids[0].gpu].id, (enum plugin_kind)r->ids[0].kind, r->ids[0].n, id, sizeof id) < 0)
                return -EINVAL;
        int w = snprintf(buf, len, "%s\n%s\n", plugin_resource(p, (enum plugin_kind)r->ids[0].kind), id);
        return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : w;
}

int share_rec_write_dir(struct plugin *p, const struct share_rec *r, bool fresh, struct gs_error *err) {
        struct gs_limits l;
        char text[GS_LIMITS_MAX_FILE], key[STATE_RESOURCE_MAX + STATE_DEVICE_ID_MAX + 4], path[4400];
        int n = rec_limits(p, r, &l);
        if (n == 0)
                n = gs_limits_format(&l, text, sizeof text);
        if (n < 0)
                return gs_error_set(err, n, "cannot format the limits file: %s", strerror(-n));
        int kl = rec_key(p, r, key, sizeof key);
        if (kl < 0)
                return gs_error_set(err, kl, "bad record name %.100s", r->name);
        int dfd = limits_dir_create(p->opt.limits_root, r->name, fresh, err);
        if (dfd < 0)
                return dfd;
        close(dfd);
        snprintf(path, sizeof path, "%s/%s", p->opt.limits_root, r->name);
        /* key first: a dir whose limits exist is always one clean-up can attribute. No fsync: the
         * journal (fsynced before) is the durable record, and every dir is rewritten from it at
         * start; the rename still shows a reader the old file or the new one, whole. */
        int e = state_write_atomic(path, SHARE_KEY_FILE, key, (size_t)kl, 0644, STATE_WRITE_NO_SYNC);
        if (e >= 0)
                e = state_write_atomic(path, SHARE_LIMITS_FILE, text, (size_t)n, 0444, STATE_WRITE_NO_SYNC);
        if (e >= 0) /* the line /etc/ld.so.preload holds in the container (docs/sharing.md) */
                e = state_write_atomic(path, SHARE_PRELOAD_FILE, SHARE_LIB_PATH "\n", sizeof SHARE_LIB_PATH, 0444,
                                       STATE_WRITE_NO_SYNC);
        if (e < 0)
                gs_error_set(err, e, "cannot write %.100s/%.60s: %s", p->opt.limits_root, r->name, strerror(-e));
        return e;
}

/* ---- invariants ---- */

__attribute__((format(printf, 2, 3))) static void violation(const char *check, const char *fmt, ...) {
        share_count("gpuslice_share_invariant_violations_total", check);
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        log_error("fractional invariant violated", "check=%s detail=\"%s\"", check, msg);
}

/* The record's limits file is exactly what rec_limits says. */
static unsigned check_dir(struct plugin *p, const struct share_rec *r) {
        struct gs_limits want, have;
        char path[4400], err[128];
        _cleanup_(freep) char *text = NULL;
        size_t len = 0;
        if (rec_limits(p, r, &want) < 0)
                return 0;
        snprintf(path, sizeof path, "%s/%s/%s", p->opt.limits_root, r->name, SHARE_LIMITS_FILE);
        if (read_file(path, GS_LIMITS_MAX_FILE, &text, &len) < 0 ||
            gs_limits_parse(text, len, &have, err, sizeof err) < 0) {
                violation("limits-dir", "%s: limits file missing or unreadable", r->name);
                return 1;
        }
        bool same = have.n_devices == want.n_devices && have.core_policy == want.core_policy &&
                    streq(have.container, want.container);
        for (unsigned i = 0; same && i < want.n_devices; i++)
                same = streq(have.dev[i].uuid, want.dev[i].uuid) &&
                       have.dev[i].memory_bytes == want.dev[i].memory_bytes &&
                       have.dev[i].core_percent == want.dev[i].core_percent;
        if (!same) {
                violation("limits-dir", "%s: limits file differs from the grant", r->name);
                return 1;
        }
        return 0;
}

/* Per GPU sums over the records, and no ID in two records. */
static unsigned check_sums(struct plugin *p) {
        struct share_book *b = share_book(p);
        struct share_usage u;
        unsigned found = 0;
        if (!b)
                return 0;
        share_usage(p, &u);
        _cleanup_(freep) uint8_t *held = calloc((size_t)p->n * (SHARE_CORE_IDS + SHARE_MEM_IDS_MAX), 1);
        unsigned core[TOPO_MAX_GPUS] = { 0 }, mem[TOPO_MAX_GPUS] = { 0 };
        if (!held)
                return 0;
        for (size_t i = 0; i < b->n; i++)
                for (size_t k = 0; k < b->rec[i].n_ids; k++) {
                        const struct share_id *id = &b->rec[i].ids[k];
                        size_t slot = (size_t)id->gpu * (SHARE_CORE_IDS + SHARE_MEM_IDS_MAX) +
                                      (id->kind == PLUGIN_CORE ? 0 : SHARE_CORE_IDS) + id->n;
                        if (held[slot]++ == 1) {
                                violation("id-twice", "%s: an ID is in two records (n=%u kind=%u)", b->rec[i].name,
                                          id->n, id->kind);
                                found++;
                        }
                        (id->kind == PLUGIN_CORE ? core : mem)[id->gpu]++;
                }
        for (unsigned g = 0; g < p->n; g++) {
                if (core[g] > SHARE_CORE_IDS) {
                        violation("core-over", "%s: %u %% core granted (max 100)", p->gpu[g].id, core[g]);
                        found++;
                }
                if ((uint64_t)mem[g] * p->opt.memory_unit > p->gpu[g].memory_total) {
                        violation("memory-over", "%s: %u memory units granted, %u fit", p->gpu[g].id, mem[g],
                                  p->gpu[g].n_mem);
                        found++;
                }
                if ((core[g] || mem[g]) && (u.whole & (UINT64_C(1) << g))) {
                        violation("whole-and-fraction", "%s: held whole and in fractions", p->gpu[g].id);
                        found++;
                }
        }
        return found;
}

unsigned share_check(struct plugin *p, const struct share_rec *rec) {
        unsigned found = check_sums(p);
        struct share_book *b = share_book(p);
        if (rec)
                return found + check_dir(p, rec);
        for (size_t i = 0; b && i < b->n; i++)
                found += check_dir(p, &b->rec[i]);
        return found;
}

/* ---- journal ---- */

/* The journal is two files in the journal dir: a snapshot, SHARE_JOURNAL_FILE, replaced whole by
 * the atomic writer (temp file, fsync, rename, fsync of the dir), and an append-only log,
 * SHARE_JOURNAL_LOG, of one line per decision since that snapshot: what changed (records put
 * whole, records deleted by name) and the book's small fields, written with one write() and made
 * durable with fdatasync() before the answer leaves. Each entry carries a sequence number one
 * above the one before; a snapshot holds everything up to its own, so log lines at or below it
 * (left by a crash between the snapshot's rename and the log's truncation) are skipped. A last
 * line without its newline is a write the crash cut short (never acknowledged) and is ignored;
 * anything else wrong rejects the journal whole. The log is folded into a new snapshot when it
 * outgrows JOURNAL_LOG_MIN and four times the snapshot, and at every start. */

#define JOURNAL_LOG_MIN (64u << 10)

static json_t *rec_json(const struct plugin *p, const struct share_rec *r) {
        json_t *o = json_object(), *ids = json_array();
        if (!o || !ids) {
                json_decref(o);
                json_decref(ids);
                return NULL;
        }
        json_object_set_new(o, "name", json_string(r->name));
        json_object_set_new(o, "first", json_string(share_kind_word((enum plugin_kind)r->first)));
        json_object_set_new(o, "open", json_boolean(r->open));
        json_object_set_new(o, "guessed", json_boolean(r->guessed));
        json_object_set_new(o, "restored", json_boolean(r->restored));
        json_object_set_new(o, "tentative", json_boolean(r->tentative));
        json_object_set_new(o, "time", json_integer((json_int_t)r->wall));
        for (size_t k = 0; k < r->n_ids; k++) {
                char id[SHARE_ID_MAX];
                if (share_format_id(p->gpu[r->ids[k].gpu].id, (enum plugin_kind)r->ids[k].kind, r->ids[k].n, id,
                                    sizeof id) == 0)
                        json_array_append_new(ids, json_string(id));
        }
        json_object_set_new(o, "ids", ids);
        return o;
}

static char *rec_text(const struct plugin *p, const struct share_rec *r) {
        _cleanup_(json_decrefp) json_t *o = rec_json(p, r);
        return o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
}

/* What a record's journal text says, as bytes to compare (cheaper than encoding it: a save looks at
 * every live record). NULL when out of memory. */
static uint8_t *rec_journal_key(const struct share_rec *r, size_t *ret_len) {
        uint8_t head[5] = { r->first, r->open, r->guessed, r->restored, r->tentative };
        size_t len = sizeof head + sizeof r->wall + r->n_ids * sizeof *r->ids;
        uint8_t *k = malloc(len);
        if (!k)
                return NULL;
        memcpy(k, head, sizeof head);
        memcpy(k + sizeof head, &r->wall, sizeof r->wall);
        if (r->n_ids)
                memcpy(k + sizeof head + sizeof r->wall, r->ids, r->n_ids * sizeof *r->ids);
        *ret_len = len;
        return k;
}

static bool rec_unchanged(const struct share_rec *r, const uint8_t *key, size_t len) {
        return r->saved && r->saved_len == len && memcmp(r->saved, key, len) == 0;
}

static void rec_set_saved(struct share_rec *r, uint8_t *key, size_t len) {
        free(r->saved);
        r->saved = key;
        r->saved_len = len;
}

/* The book's small fields, `"shapes":…,"proposal":…,"last":…` (no braces), for both kinds of entry. */
static char *book_text(const struct plugin *p, const struct share_book *b) {
        _cleanup_(json_decrefp) json_t *o = json_object();
        json_t *shapes = json_array();
        if (!o || !shapes) {
                json_decref(shapes);
                return NULL;
        }
        json_object_set_new(o, "shapes", shapes);
        for (unsigned i = 0; i < b->n_shapes; i++)
                json_array_append_new(shapes, json_pack("[ii]", b->shape[i].core, b->shape[i].mem));
        json_t *prop = NULL;
        if (b->prop.set && b->prop.gpu >= 0 && (unsigned)b->prop.gpu < p->n)
                prop = json_pack("{s:s, s:s, s:I, s:s}", "kind", share_kind_word((enum plugin_kind)b->prop.kind), "gpu",
                                 p->gpu[b->prop.gpu].id, "size", (json_int_t)b->prop.size, "record", b->prop.rec);
        json_object_set_new(o, "proposal", prop ? prop : json_null());
        json_object_set_new(o, "last", json_string(b->last));
        char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!text)
                return NULL;
        size_t len = strlen(text); /* strip the braces: "{...}" -> "..." */
        memmove(text, text + 1, len - 2);
        text[len - 2] = 0;
        return text;
}

/* A growing buffer of text; `failed` once out of memory. */
struct sbuf {
        char *s;
        size_t len, cap;
        bool failed;
};

static void sb_add(struct sbuf *sb, const char *text, size_t len) {
        if (sb->failed)
                return;
        if (sb->len + len + 1 > sb->cap) {
                size_t cap = MAX(sb->cap * 2, sb->len + len + 256);
                char *s = realloc(sb->s, cap);
                if (!s) {
                        sb->failed = true;
                        return;
                }
                sb->s = s;
                sb->cap = cap;
        }
        memcpy(sb->s + sb->len, text, len);
        sb->len += len;
        sb->s[sb->len] = 0;
}

static void sb_str(struct sbuf *sb, const char *text) {
        sb_add(sb, text, strlen(text));
}

static void sb_num(struct sbuf *sb, uint64_t v) {
        char buf[24];
        int w = snprintf(buf, sizeof buf, "%" PRIu64, v);
        if (w > 0)
                sb_add(sb, buf, (size_t)w);
}

static void gone_clear(struct share_book *b) {
        b->n_gone = 0;
}

static void log_close(struct share_book *b) {
        if (b->log_open)
                close(b->log_fd);
        b->log_open = false;
}

/* A new snapshot of the whole book (entry seq+1), then an empty log opened for appending. */
static int journal_compact(struct plugin *p, struct share_book *b) {
        _cleanup_(closep) int dfd = -1;
        struct sbuf sb = { 0 };
        char **texts = calloc(b->n ? b->n : 1, sizeof *texts);
        uint8_t **keys = calloc(b->n ? b->n : 1, sizeof *keys);
        size_t *lens = calloc(b->n ? b->n : 1, sizeof *lens);
        _cleanup_(freep) char *book = book_text(p, b);
        int r = -ENOMEM;
        if (!texts || !keys || !lens || !book)
                goto out;
        for (size_t i = 0; i < b->n; i++)
                if (!(keys[i] = rec_journal_key(&b->rec[i], &lens[i])))
                        goto out;
        sb_str(&sb, "{\"version\":");
        sb_num(&sb, JOURNAL_VERSION);
        sb_str(&sb, ",\"seq\":");
        sb_num(&sb, b->seq + 1);
        sb_str(&sb, ",\"records\":[");
        for (size_t i = 0; i < b->n; i++) {
                if (!(texts[i] = rec_text(p, &b->rec[i])))
                        goto out;
                if (i)
                        sb_str(&sb, ",");
                sb_str(&sb, texts[i]);
        }
        sb_str(&sb, "],");
        sb_str(&sb, book);
        sb_str(&sb, "}");
        if (sb.failed)
                goto out;
        log_close(b);
        r = state_write_atomic(p->opt.journal_dir, SHARE_JOURNAL_FILE, sb.s, sb.len, 0600, 0);
        if (r < 0)
                goto out;
        b->seq++;
        b->snap_bytes = sb.len;
        b->log_bytes = 0;
        for (size_t i = 0; i < b->n; i++) {
                rec_set_saved(&b->rec[i], keys[i], lens[i]);
                keys[i] = NULL;
        }
        gone_clear(b);
        free(b->saved_book);
        b->saved_book = book;
        book = NULL;
        /* The log restarts empty; its dir entry made durable once, so later fdatasyncs suffice. A log
         * that cannot be opened only means the next decision writes a snapshot again. */
        dfd = open(p->opt.journal_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int fd = dfd < 0 ? -1
                         : openat(dfd, SHARE_JOURNAL_LOG,
                                  O_WRONLY | O_APPEND | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 && fsync(dfd) == 0) {
                b->log_fd = fd;
                b->log_open = true;
        } else if (fd >= 0)
                close(fd);
out:
        for (size_t i = 0; i < b->n; i++) {
                if (texts)
                        free(texts[i]);
                if (keys)
                        free(keys[i]);
        }
        free(texts);
        free(keys);
        free(lens);
        free(sb.s);
        return r;
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

/* One log line with what changed since the last entry, written and fdatasync'ed; nothing at all
 * when nothing changed. */
/* lint: long — builds one log line of every record that changed since the last entry and makes it durable; the
 * diff, the write and the fallback to a snapshot share the key arrays it allocates. */
static int journal_append(struct plugin *p, struct share_book *b) {
        struct sbuf sb = { 0 };
        uint8_t **keys = calloc(b->n ? b->n : 1, sizeof *keys);
        size_t *lens = calloc(b->n ? b->n : 1, sizeof *lens);
        _cleanup_(freep) char *book = book_text(p, b);
        size_t puts = 0;
        int r = -ENOMEM;
        if (!keys || !lens || !book)
                goto out;
        sb_str(&sb, "{\"seq\":");
        sb_num(&sb, b->seq + 1);
        sb_str(&sb, ",\"del\":[");
        for (size_t i = 0; i < b->n_gone; i++) {
                _cleanup_(json_decrefp) json_t *name = json_string(b->gone[i]);
                _cleanup_(freep) char *q = name ? json_dumps(name, JSON_ENCODE_ANY) : NULL;
                if (!q)
                        goto out;
                if (i)
                        sb_str(&sb, ",");
                sb_str(&sb, q);
        }
        sb_str(&sb, "],\"put\":[");
        for (size_t i = 0; i < b->n; i++) {
                if (!(keys[i] = rec_journal_key(&b->rec[i], &lens[i])))
                        goto out;
                if (rec_unchanged(&b->rec[i], keys[i], lens[i])) {
                        free(keys[i]);
                        keys[i] = NULL;
                        continue;
                }
                _cleanup_(freep) char *text = rec_text(p, &b->rec[i]);
                if (!text)
                        goto out;
                if (puts++)
                        sb_str(&sb, ",");
                sb_str(&sb, text);
        }
        sb_str(&sb, "],");
        sb_str(&sb, book);
        sb_str(&sb, "}\n");
        if (sb.failed)
                goto out;
        r = 0;
        if (puts == 0 && b->n_gone == 0 && b->saved_book && streq(b->saved_book, book))
                goto out; /* nothing to make durable */
        r = write_all(b->log_fd, sb.s, sb.len);
        if (r == 0 && fdatasync(b->log_fd) < 0)
                r = -errno;
        if (r < 0) {
                log_close(b); /* a torn line may follow: the next save writes a snapshot */
                goto out;
        }
        b->seq++;
        b->log_bytes += sb.len;
        for (size_t i = 0; i < b->n; i++)
                if (keys[i]) {
                        rec_set_saved(&b->rec[i], keys[i], lens[i]);
                        keys[i] = NULL;
                }
        gone_clear(b);
        free(b->saved_book);
        b->saved_book = book;
        book = NULL;
out:
        for (size_t i = 0; keys && i < b->n; i++)
                free(keys[i]);
        free(keys);
        free(lens);
        free(sb.s);
        return r;
}

int share_journal_save(struct plugin *p) {
        if (!p->opt.journal_dir[0])
                return 0;
        struct share_book *b = share_book(p);
        int r = -ENOMEM;
        if (b) {
                size_t limit = MIN(MAX((size_t)JOURNAL_LOG_MIN, 4 * b->snap_bytes), (size_t)JOURNAL_MAX / 2);
                bool compact = !b->log_open || b->log_bytes >= limit;
                r = compact ? journal_compact(p, b) : journal_append(p, b);
                share_count("gpuslice_share_journal_writes_total", r < 0 ? "error" : compact ? "snapshot" : "append");
        } else
                share_count("gpuslice_share_journal_writes_total", "error");
        if (r < 0)
                log_error_errno(r, "cannot write the fractional journal", "dir=%s", p->opt.journal_dir);
        return r;
}

static int decode_rec(struct plugin *p, json_t *o, struct share_rec *r) {
        const char *name, *first;
        int open, guessed, restored, tentative;
        json_int_t wall;
        json_t *ids;
        if (json_unpack(o, "{s:s, s:s, s:b, s:b, s:b, s:b, s:I, s:o !}", "name", &name, "first", &first, "open", &open,
                        "guessed", &guessed, "restored", &restored, "tentative", &tentative, "time", &wall, "ids",
                        &ids) < 0 ||
            strlen(name) >= sizeof r->name || !strchr(name, '.') || wall < 0 || !json_is_array(ids) ||
            json_array_size(ids) == 0 || json_array_size(ids) > SHARE_CORE_IDS * TOPO_MAX_GPUS + SHARE_MEM_IDS_MAX)
                return -EBADMSG;
        if (!streq(first, "core") && !streq(first, "mem"))
                return -EBADMSG;
        strscpy(r->name, name, sizeof r->name);
        r->first = streq(first, "core") ? PLUGIN_CORE : PLUGIN_MEMORY;
        r->open = open;
        r->guessed = guessed;
        r->restored = restored;
        r->tentative = tentative;
        r->wall = (uint64_t)wall;
        size_t k;
        json_t *v;
        json_array_foreach(ids, k, v) {
                enum plugin_kind kind;
                unsigned g, n;
                if (!json_is_string(v) || share_parse_id(p, json_string_value(v), &kind, &g, &n) < 0 ||
                    share_rec_add_id(r, g, kind, n) < 0)
                        return -EBADMSG;
        }
        return 0; /* a record may have lost its first half already (kubelet released it first) */
}

static int decode_shapes(struct plugin *p, json_t *shapes) {
        size_t k;
        json_t *v;
        if (!json_is_array(shapes))
                return -EBADMSG;
        json_array_foreach(shapes, k, v) {
                json_int_t c, m;
                if (k >= SHARE_SHAPES || json_unpack(v, "[II!]", &c, &m) < 0 || c < 1 || c > SHARE_CORE_IDS || m < 1 ||
                    m > SHARE_MEM_IDS_MAX)
                        return -EBADMSG;
        }
        share_book(p)->n_shapes = 0;
        /* oldest first, so the newest ends up in front */
        for (size_t i = json_array_size(shapes); i-- > 0;) {
                json_int_t c, m;
                (void)json_unpack(json_array_get(shapes, i), "[II]", &c, &m);
                share_shape_learn(p, (unsigned)c, (unsigned)m);
        }
        return 0;
}

static int decode_proposal(struct plugin *p, json_t *o, struct share_proposal *ret) {
        const char *kind, *gpu, *rec;
        json_int_t size;
        *ret = (struct share_proposal){ 0 };
        if (json_is_null(o))
                return 0;
        if (json_unpack(o, "{s:s, s:s, s:I, s:s !}", "kind", &kind, "gpu", &gpu, "size", &size, "record", &rec) < 0 ||
            (!streq(kind, "core") && !streq(kind, "mem")) || size < 1 ||
            size > (json_int_t)SHARE_CORE_IDS * TOPO_MAX_GPUS || strlen(rec) >= sizeof ret->rec)
                return -EBADMSG;
        int g = -1;
        for (unsigned i = 0; i < p->n && g < 0; i++)
                if (streq(p->gpu[i].id, gpu))
                        g = (int)i;
        if (g < 0)
                return -EBADMSG;
        *ret = (struct share_proposal){
                .set = true, .kind = streq(kind, "core") ? PLUGIN_CORE : PLUGIN_MEMORY, .gpu = g, .size = (unsigned)size
        };
        strscpy(ret->rec, rec, sizeof ret->rec);
        return 0;
}

/* The small fields of either kind of entry. */
static int decode_book(struct plugin *p, json_t *shapes, json_t *prop, const char *last) {
        struct share_book *b = share_book(p);
        struct share_proposal q;
        if (strlen(last) >= sizeof b->last || decode_proposal(p, prop, &q) < 0 || decode_shapes(p, shapes) < 0)
                return -EBADMSG;
        b->prop = q;
        strscpy(b->last, last, sizeof b->last);
        return 0;
}

/* Put one decoded record in the book, replacing the one of its name (replace) or refusing a
 * duplicate (!replace). */
static int put_rec(struct plugin *p, json_t *o, bool replace) {
        struct share_rec tmp = { 0 };
        int r = decode_rec(p, o, &tmp);
        struct share_rec *dst = r == 0 ? share_rec_find(p, tmp.name) : NULL;
        if (r == 0 && dst && !replace)
                r = -EBADMSG;
        if (r == 0 && dst) {
                free(dst->ids);
                free(dst->saved);
        } else if (r == 0)
                dst = share_rec_add(p, tmp.name);
        if (r < 0 || !dst) {
                free(tmp.ids);
                return r < 0 ? r : -EBADMSG;
        }
        *dst = tmp;
        return 0;
}

/* Everything the journal put in the book goes (a journal is accepted or rejected whole). */
static void book_reset(struct plugin *p) {
        struct share_book *b = share_book(p);
        for (size_t i = b->n; i-- > 0;)
                share_rec_remove(p, &b->rec[i]);
        b->n_shapes = 0;
        b->last[0] = 0;
        b->prop = (struct share_proposal){ 0 };
        b->seq = 0;
        gone_clear(b);
}

int share_journal_decode(struct plugin *p, const char *text, size_t len) {
        if (len > JOURNAL_MAX)
                return -EBADMSG;
        _cleanup_(json_decrefp) json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
        json_int_t version, seq;
        json_t *recs, *shapes, *prop;
        const char *last;
        if (!root ||
            json_unpack(root, "{s:I, s:I, s:o, s:o, s:o, s:s !}", "version", &version, "seq", &seq, "records", &recs,
                        "shapes", &shapes, "proposal", &prop, "last", &last) < 0 ||
            version != (json_int_t)JOURNAL_VERSION || seq < 1 || !json_is_array(recs) ||
            json_array_size(recs) > RECS_MAX)
                return -EBADMSG;
        struct share_book *b = share_book(p);
        if (!b)
                return -ENOMEM;
        int r = decode_book(p, shapes, prop, last);
        size_t k;
        json_t *v;
        json_array_foreach(recs, k, v) {
                if (r < 0)
                        break;
                r = put_rec(p, v, false);
        }
        if (r < 0)
                book_reset(p);
        else
                b->seq = (uint64_t)seq;
        return r;
}

/* One complete log line. 1 applied, 0 skipped (at or below the snapshot's entry), -EBADMSG. */
static int replay_line(struct plugin *p, const char *line, size_t len) {
        struct share_book *b = share_book(p);
        _cleanup_(json_decrefp) json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
        json_int_t seq;
        json_t *del, *put, *shapes, *prop;
        const char *last;
        if (!root ||
            json_unpack(root, "{s:I, s:o, s:o, s:o, s:o, s:s !}", "seq", &seq, "del", &del, "put", &put, "shapes",
                        &shapes, "proposal", &prop, "last", &last) < 0 ||
            !json_is_array(del) || !json_is_array(put) || json_array_size(put) > RECS_MAX || seq < 1)
                return -EBADMSG;
        if ((uint64_t)seq <= b->seq)
                return 0;
        if ((uint64_t)seq != b->seq + 1)
                return -EBADMSG; /* an entry is missing */
        size_t k;
        json_t *v;
        json_array_foreach(del, k, v) {
                struct share_rec *r = json_is_string(v) ? share_rec_find(p, json_string_value(v)) : NULL;
                if (!r)
                        return -EBADMSG;
                share_rec_remove(p, r);
        }
        json_array_foreach(put, k, v) {
                if (put_rec(p, v, true) < 0)
                        return -EBADMSG;
        }
        if (decode_book(p, shapes, prop, last) < 0)
                return -EBADMSG;
        b->seq = (uint64_t)seq;
        return 1;
}

int share_journal_replay(struct plugin *p, const char *text, size_t len) {
        struct share_book *b = share_book(p);
        if (!b)
                return -ENOMEM;
        if (len > JOURNAL_MAX) {
                book_reset(p);
                return -EBADMSG;
        }
        int applied = 0;
        size_t at = 0;
        while (at < len) {
                const char *nl = memchr(text + at, '\n', len - at);
                if (!nl)
                        break; /* the last write, cut short by the crash: never acknowledged */
                size_t n = (size_t)(nl - (text + at));
                int r = replay_line(p, text + at, n);
                if (r < 0) {
                        book_reset(p);
                        return r;
                }
                applied += r;
                at += n + 1;
        }
        gone_clear(b);
        return applied;
}

/* A restored record's IDs back in the allocation record (the state file may be older). */
static void rec_to_state(struct plugin *p, const struct share_rec *r) {
        for (size_t k = 0; k < r->n_ids; k++) {
                const struct share_id *id = &r->ids[k];
                struct state_alloc e = { .gpu_index = p->gpu[id->gpu].index, .alloc_time = r->wall };
                strscpy(e.resource, plugin_resource(p, (enum plugin_kind)id->kind), sizeof e.resource);
                if (share_format_id(p->gpu[id->gpu].id, (enum plugin_kind)id->kind, id->n, e.device_id,
                                    sizeof e.device_id) < 0 ||
                    state_find(&p->state, e.resource, e.device_id))
                        continue;
                if (id->kind == PLUGIN_CORE)
                        e.core_percent = 1;
                else
                        e.memory_bytes = p->opt.memory_unit;
                (void)state_add(&p->state, &e);
        }
}

static int restore_locked(struct plugin *p) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", p->opt.journal_dir, SHARE_JOURNAL_FILE);
        _cleanup_(freep) char *text = NULL, *log = NULL;
        size_t len = 0, log_len = 0;
        int r = read_file(path, JOURNAL_MAX, &text, &len);
        if (r < 0)
                return r;
        r = share_journal_decode(p, text, len);
        if (r < 0)
                return r;
        snprintf(path, sizeof path, "%s/%s", p->opt.journal_dir, SHARE_JOURNAL_LOG);
        r = read_file(path, JOURNAL_MAX, &log, &log_len);
        if (r == -ENOENT) /* a snapshot alone (written, the log not created yet) */
                r = 0;
        else if (r == 0)
                r = share_journal_replay(p, log, log_len);
        if (r < 0) {
                book_reset(p);
                return r == -EFBIG ? -EBADMSG : r;
        }
        struct share_book *b = share_book(p);
        uint64_t now = health_now_ms();
        unsigned open = 0;
        for (size_t i = 0; i < b->n; i++) {
                struct share_rec *rec = &b->rec[i];
                rec_to_state(p, rec);
                if (rec->open && open++ == 0) {
                        rec->deadline_ms = now + SHARE_PAIR_RESTART_MS; /* its partner may still come */
                        rec->restored = true;
                } else
                        rec->open = false;
                if (rec->tentative) /* the call after its join may still come and reverse it */
                        rec->deadline_ms = now + SHARE_PAIR_RESTART_MS;
                struct gs_error err = { 0 };
                if (share_rec_write_dir(p, rec, false, &err) < 0)
                        log_warn("cannot rewrite a limits dir from the journal", "container=%s error=\"%s\"", rec->name,
                                 err.message);
        }
        b->restored = true;
        atomic_fetch_add(&p->generation, 1);
        (void)share_check(p, NULL);
        (void)share_journal_save(p); /* the log folded into a snapshot; a torn last line dropped */
        return (int)b->n;
}

/* Is this ID of the record held by kubelet (listed by PodResources)? */
static bool id_listed(struct plugin *p, const struct share_id *id) {
        char dev[SHARE_ID_MAX];
        if (share_format_id(p->gpu[id->gpu].id, (enum plugin_kind)id->kind, id->n, dev, sizeof dev) < 0)
                return false;
        const struct state_alloc *a = state_find(&p->state, plugin_resource(p, (enum plugin_kind)id->kind), dev);
        return a && a->seen;
}

bool share_rec_listed(struct plugin *p, const struct share_rec *r, enum plugin_kind kind) {
        for (size_t k = 0; k < r->n_ids; k++)
                if (r->ids[k].kind == kind)
                        return id_listed(p, &r->ids[k]);
        return false;
}

/* The second half never reached kubelet: back to the first half alone, open for it again. */
static void rec_reopen(struct plugin *p, struct share_rec *r) {
        enum plugin_kind second = r->first == PLUGIN_CORE ? PLUGIN_MEMORY : PLUGIN_CORE;
        size_t o = 0;
        for (size_t k = 0; k < r->n_ids; k++) {
                if (r->ids[k].kind != second) {
                        r->ids[o++] = r->ids[k];
                        continue;
                }
                char dev[SHARE_ID_MAX];
                if (share_format_id(p->gpu[r->ids[k].gpu].id, second, r->ids[k].n, dev, sizeof dev) == 0)
                        (void)state_remove(&p->state, plugin_resource(p, second), dev);
        }
        r->n_ids = o;
        share_rec_refresh(r);
        r->open = true;
        r->restored = true;
        r->deadline_ms = health_now_ms() + SHARE_PAIR_RESTART_MS;
}

/* The container kubelet was admitting when the agent died (the last record written). */
static int after_sync_last(struct plugin *p, struct share_rec *r) {
        enum plugin_kind first = (enum plugin_kind)r->first;
        enum plugin_kind second = first == PLUGIN_CORE ? PLUGIN_MEMORY : PLUGIN_CORE;
        int changed = 0;
        if (!share_rec_listed(p, r, first)) {
                if (r->open) {
                        share_rec_close(p, r, "expired", "kubelet does not hold its first half after the restart");
                        changed = 1;
                }
        } else if (r->has[second] && !share_rec_listed(p, r, second)) {
                rec_reopen(p, r);
                log_debug("record reopened: its second half never reached kubelet", "container=%s", r->name);
                struct gs_error err = { 0 };
                if (share_rec_write_dir(p, r, false, &err) < 0)
                        log_warn("cannot rewrite a limits dir", "container=%s error=\"%s\"", r->name, err.message);
                changed = 1;
        }
        if (changed) {
                (void)share_journal_save(p);
                (void)share_check(p, r);
                atomic_fetch_add(&p->generation, 1);
        }
        return changed;
}

/* The first sync after a restore (the one at start, before the services are served): every ID of
 * the journal's records that PodResources does not list is not held by kubelet — kubelet lists an allocation as soon as its Allocate returned, so an
 * unlisted one's answer never reached kubelet (the agent died first) or kubelet has let it go (a
 * container failed while the agent was down). Left in the record, it would count against the room
 * of its GPU for the state's 120 s grace. Records left without IDs go, with their dirs. Returns
 * the number of IDs dropped. */
static size_t drop_unlisted(struct plugin *p) {
        struct share_book *b = share_book(p);
        size_t dropped = 0;
        for (size_t i = 0; b && i < b->n;) {
                struct share_rec *r = &b->rec[i];
                size_t o = 0;
                for (size_t k = 0; k < r->n_ids; k++) {
                        const struct share_id *id = &r->ids[k];
                        char dev[SHARE_ID_MAX];
                        if (id_listed(p, id)) {
                                r->ids[o++] = *id;
                                continue;
                        }
                        if (share_format_id(p->gpu[id->gpu].id, (enum plugin_kind)id->kind, id->n, dev, sizeof dev) ==
                            0)
                                (void)state_remove(&p->state, plugin_resource(p, (enum plugin_kind)id->kind), dev);
                        dropped++;
                }
                r->n_ids = o;
                share_rec_refresh(r);
                if (o > 0) {
                        i++;
                        continue;
                }
                log_debug("record dropped: PodResources lists none of its IDs after the restart", "container=%s",
                          r->name);
                share_rec_remove_dir(p, r);
                share_rec_remove(p, r);
        }
        /* The same for fractional entries of the state file that no record holds (the state file is
         * written after the journal, asynchronously: it may hold grants the journal has dropped). */
        for (size_t k = 0; k < p->state.n_allocs;) {
                const struct state_alloc *a = &p->state.allocs[k];
                bool frac = (p->opt.core_resource[0] && streq(a->resource, p->opt.core_resource)) ||
                            (p->opt.memory_resource[0] && streq(a->resource, p->opt.memory_resource));
                if (!frac || a->seen) {
                        k++;
                        continue;
                }
                char res[STATE_RESOURCE_MAX], dev[STATE_DEVICE_ID_MAX];
                strscpy(res, a->resource, sizeof res);
                strscpy(dev, a->device_id, sizeof dev);
                if (state_remove(&p->state, res, dev) < 0)
                        k++;
                else
                        dropped++;
        }
        return dropped;
}

int share_after_sync(struct plugin *p) {
        struct share_book *b = share_book(p);
        if (!b || !b->restored)
                return 0;
        b->restored = false;
        int changed = 0;
        struct share_rec *r = b->last[0] ? share_rec_find(p, b->last) : NULL;
        if (r)
                changed = after_sync_last(p, r);
        /* only while every grant on record is from an earlier life (no Allocate answered since) */
        if (p->n_allocate == 0 && drop_unlisted(p) > 0) {
                changed = 1;
                (void)share_journal_save(p);
                (void)share_check(p, NULL);
                atomic_fetch_add(&p->generation, 1);
        }
        return changed;
}

int share_restore(struct plugin *p) {
        if (!p->opt.journal_dir[0])
                return -ENOENT;
        pthread_mutex_lock(&p->lock);
        int r = restore_locked(p);
        pthread_mutex_unlock(&p->lock);
        return r;
}

unsigned share_check_all(struct plugin *p) {
        return share_check(p, NULL);
}

/* ---- clean-up ---- */

static bool read_key(int root, const char *name, char *resource, size_t rlen, char *id, size_t ilen) {
        char path[512], buf[STATE_RESOURCE_MAX + STATE_DEVICE_ID_MAX + 4];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", name, SHARE_KEY_FILE) >= sizeof path)
                return false;
        int fd = openat(root, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return false;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
                return false;
        buf[n] = 0;
        char *nl = strchr(buf, '\n');
        if (!nl)
                return false;
        *nl = 0;
        char *end = strchr(nl + 1, '\n');
        if (end)
                *end = 0;
        if (strlen(buf) >= rlen || strlen(nl + 1) >= ilen)
                return false;
        strscpy(resource, buf, rlen);
        strscpy(id, nl + 1, ilen);
        return true;
}

/* Records none of whose IDs the allocation record still holds: the container is gone. */
static size_t drop_ended_records(struct plugin *p) {
        struct share_book *b = share_book(p);
        size_t dropped = 0;
        for (size_t i = 0; b && i < b->n;) {
                struct share_rec *r = &b->rec[i];
                bool live = r->open;
                for (size_t k = 0; k < r->n_ids && !live; k++) {
                        char id[SHARE_ID_MAX];
                        live = share_format_id(p->gpu[r->ids[k].gpu].id, (enum plugin_kind)r->ids[k].kind, r->ids[k].n,
                                               id, sizeof id) == 0 &&
                               state_find(&p->state, plugin_resource(p, (enum plugin_kind)r->ids[k].kind), id);
                }
                if (live) {
                        i++;
                        continue;
                }
                log_debug("fraction record ended", "container=%s", r->name);
                share_rec_remove(p, r);
                dropped++;
        }
        return dropped;
}

int share_cleanup_dirs(struct plugin *p) {
        pthread_mutex_lock(&p->lock);
        if (drop_ended_records(p) > 0)
                (void)share_journal_save(p);
        pthread_mutex_unlock(&p->lock);
        int root = open(p->opt.limits_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return -errno;
        DIR *d = fdopendir(root);
        if (!d) {
                int r = -errno;
                close(root);
                return r;
        }
        int removed = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                char resource[STATE_RESOURCE_MAX], id[STATE_DEVICE_ID_MAX];
                bool have = read_key(dirfd(d), de->d_name, resource, sizeof resource, id, sizeof id);
                /* Decide and remove under the lock: an Allocate may be re-creating this name. */
                pthread_mutex_lock(&p->lock);
                bool live = share_rec_find(p, de->d_name) || (have && state_find(&p->state, resource, id));
                if (!live && limits_dir_remove_at(dirfd(d), de->d_name) == 0)
                        removed++;
                pthread_mutex_unlock(&p->lock);
        }
        closedir(d);
        return removed;
}
