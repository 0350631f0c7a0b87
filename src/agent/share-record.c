/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share-record — the agent's records of fractional grants (one per container: its core half, its
 * memory half, or the pair), the write-ahead journal that keeps them across a crash, the
 * per-container limits dirs written from them, and the invariants checked after every decision
 * (docs/sharing.md, "Crash safety").
 *
 * The journal, <state-dir>/gpuslice.fractions, is JSON written whole with the state module's
 * atomic writer (temp file, fsync, rename, fsync dir) BEFORE an answer leaves the agent; on start
 * it is read back, the records' IDs re-enter the allocation record, every live limits dir is
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

#define JOURNAL_VERSION 1
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
                help = "Writes of the fractional journal (gpuslice.fractions), by outcome.";
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

struct share_book *share_book(struct plugin *p) {
        if (!p->book)
                p->book = calloc(1, sizeof *p->book);
        return p->book;
}

void share_book_free(struct share_book *b) {
        if (!b)
                return;
        for (size_t i = 0; i < b->n; i++)
                free(b->rec[i].ids);
        free(b->rec);
        free(b);
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
        free(r->ids);
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
        unsigned exact = 0, any = 0;
        for (unsigned i = 0; b && i < b->n_shapes; i++) {
                unsigned mine = kind == PLUGIN_CORE ? b->shape[i].core : b->shape[i].mem;
                unsigned other = kind == PLUGIN_CORE ? b->shape[i].mem : b->shape[i].core;
                if (mine == size)
                        exact = MAX(exact, other);
                any = MAX(any, other);
        }
        /* a shape seen before: the largest partner it had; else the largest partner of any shape */
        return exact ? exact : any;
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

static int open_rec_dir(struct plugin *p, const struct share_rec *r, bool fresh, char *err, size_t errlen) {
        if (mkdir(p->opt.limits_root, 0755) < 0 && errno != EEXIST) {
                int e = -errno;
                snprintf(err, errlen, "cannot create %.180s: %s", p->opt.limits_root, strerror(-e));
                return e;
        }
        _cleanup_(closep) int root = open(p->opt.limits_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0) {
                int e = -errno;
                snprintf(err, errlen, "cannot open %.180s: %s", p->opt.limits_root, strerror(-e));
                return e;
        }
        if (fresh)
                (void)limits_dir_remove_at(root, r->name);
        if (mkdirat(root, r->name, 0755) < 0 && errno != EEXIST) {
                int e = -errno;
                snprintf(err, errlen, "cannot create %.100s/%.60s: %s", p->opt.limits_root, r->name, strerror(-e));
                return e;
        }
        int dfd = openat(root, r->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0) {
                int e = -errno;
                snprintf(err, errlen, "cannot open %.100s/%.60s: %s", p->opt.limits_root, r->name, strerror(-e));
                return e;
        }
        /* The region is created by the first process of the container, whatever its user. */
        if ((mkdirat(dfd, SHARE_SHM_DIR, 0777) < 0 && errno != EEXIST) || fchmodat(dfd, SHARE_SHM_DIR, 0777, 0) < 0) {
                int e = -errno;
                close(dfd);
                snprintf(err, errlen, "cannot create the region dir: %s", strerror(-e));
                return e;
        }
        return dfd;
}

int share_rec_write_dir(struct plugin *p, const struct share_rec *r, bool fresh, char *err, size_t errlen) {
        struct gs_limits l;
        char text[GS_LIMITS_MAX_FILE], key[STATE_RESOURCE_MAX + STATE_DEVICE_ID_MAX + 4], path[4400];
        int n = rec_limits(p, r, &l);
        if (n == 0)
                n = gs_limits_format(&l, text, sizeof text);
        if (n < 0) {
                snprintf(err, errlen, "cannot format the limits file: %s", strerror(-n));
                return n;
        }
        int kl = rec_key(p, r, key, sizeof key);
        if (kl < 0) {
                snprintf(err, errlen, "bad record name %.100s", r->name);
                return kl;
        }
        int dfd = open_rec_dir(p, r, fresh, err, errlen);
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
                snprintf(err, errlen, "cannot write %.100s/%.60s: %s", p->opt.limits_root, r->name, strerror(-e));
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

static char *journal_encode(struct plugin *p) {
        struct share_book *b = share_book(p);
        _cleanup_(json_decrefp) json_t *root = json_object();
        json_t *recs = json_array(), *shapes = json_array();
        if (!root || !recs || !shapes || !b) {
                json_decref(recs);
                json_decref(shapes);
                return NULL;
        }
        json_object_set_new(root, "version", json_integer(JOURNAL_VERSION));
        json_object_set_new(root, "records", recs);
        json_object_set_new(root, "shapes", shapes);
        for (size_t i = 0; i < b->n; i++)
                json_array_append_new(recs, rec_json(p, &b->rec[i]));
        for (unsigned i = 0; i < b->n_shapes; i++)
                json_array_append_new(shapes, json_pack("[ii]", b->shape[i].core, b->shape[i].mem));
        json_t *prop = json_null();
        if (b->prop.set && b->prop.gpu >= 0 && (unsigned)b->prop.gpu < p->n)
                prop = json_pack("{s:s, s:s, s:i, s:s}", "kind", share_kind_word((enum plugin_kind)b->prop.kind), "gpu",
                                 p->gpu[b->prop.gpu].id, "size", (json_int_t)b->prop.size, "record", b->prop.rec);
        json_object_set_new(root, "proposal", prop ? prop : json_null());
        json_object_set_new(root, "last", json_string(b->last));
        return json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
}

int share_journal_save(struct plugin *p) {
        if (!p->opt.journal_dir[0])
                return 0;
        _cleanup_(freep) char *text = journal_encode(p);
        int r = text ? state_write_atomic(p->opt.journal_dir, SHARE_JOURNAL_FILE, text, strlen(text), 0600, 0)
                     : -ENOMEM;
        share_count("gpuslice_share_journal_writes_total", r < 0 ? "error" : "ok");
        if (r < 0)
                log_error_errno(r, "cannot write the fractional journal", "dir=%s", p->opt.journal_dir);
        return r;
}

static int decode_rec(struct plugin *p, json_t *o, struct share_rec *r) {
        const char *name, *first;
        int open, guessed;
        json_int_t wall;
        json_t *ids;
        if (json_unpack(o, "{s:s, s:s, s:b, s:b, s:I, s:o !}", "name", &name, "first", &first, "open", &open, "guessed",
                        &guessed, "time", &wall, "ids", &ids) < 0 ||
            strlen(name) >= sizeof r->name || !strchr(name, '.') || wall < 0 || !json_is_array(ids) ||
            json_array_size(ids) == 0 || json_array_size(ids) > SHARE_CORE_IDS * TOPO_MAX_GPUS + SHARE_MEM_IDS_MAX)
                return -EBADMSG;
        if (!streq(first, "core") && !streq(first, "mem"))
                return -EBADMSG;
        strscpy(r->name, name, sizeof r->name);
        r->first = streq(first, "core") ? PLUGIN_CORE : PLUGIN_MEMORY;
        r->open = open;
        r->guessed = guessed;
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
        json_array_foreach(shapes, k, v) {
                json_int_t c, m;
                if (k >= SHARE_SHAPES || json_unpack(v, "[II!]", &c, &m) < 0 || c < 1 || c > SHARE_CORE_IDS || m < 1 ||
                    m > SHARE_MEM_IDS_MAX)
                        return -EBADMSG;
        }
        /* oldest first, so the newest ends up in front */
        for (size_t i = json_array_size(shapes); i-- > 0;) {
                json_int_t c, m;
                (void)json_unpack(json_array_get(shapes, i), "[II]", &c, &m);
                share_shape_learn(p, (unsigned)c, (unsigned)m);
        }
        return 0;
}

int share_journal_decode(struct plugin *p, const char *text, size_t len) {
        if (len > JOURNAL_MAX)
                return -EBADMSG;
        _cleanup_(json_decrefp) json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
        json_int_t version;
        json_t *recs, *shapes, *prop;
        const char *last;
        if (!root ||
            json_unpack(root, "{s:I, s:o, s:o, s:o, s:s !}", "version", &version, "records", &recs, "shapes", &shapes,
                        "proposal", &prop, "last", &last) < 0 ||
            version != JOURNAL_VERSION || !json_is_array(recs) || !json_is_array(shapes) ||
            json_array_size(recs) > RECS_MAX || strlen(last) >= sizeof p->book->last)
                return -EBADMSG;
        struct share_book *b = share_book(p);
        if (!b)
                return -ENOMEM;
        strscpy(b->last, last, sizeof b->last);
        size_t k;
        json_t *v;
        int r = decode_shapes(p, shapes);
        json_array_foreach(recs, k, v) {
                if (r < 0)
                        break;
                struct share_rec tmp = { 0 };
                r = decode_rec(p, v, &tmp);
                struct share_rec *dst = r == 0 && !share_rec_find(p, tmp.name) ? share_rec_add(p, tmp.name) : NULL;
                if (!dst) {
                        free(tmp.ids);
                        r = r < 0 ? r : -EBADMSG;
                        break;
                }
                *dst = tmp;
        }
        if (r < 0) { /* rejected whole */
                for (size_t i = b->n; i-- > 0;)
                        share_rec_remove(p, &b->rec[i]);
                b->n_shapes = 0;
                b->last[0] = 0;
        }
        return r;
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
        _cleanup_(freep) char *text = NULL;
        size_t len = 0;
        int r = read_file(path, JOURNAL_MAX, &text, &len);
        if (r < 0)
                return r;
        r = share_journal_decode(p, text, len);
        if (r < 0)
                return r;
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
                char err[256];
                if (share_rec_write_dir(p, rec, false, err, sizeof err) < 0)
                        log_warn("cannot rewrite a limits dir from the journal", "container=%s error=\"%s\"", rec->name,
                                 err);
        }
        b->restored = true;
        atomic_fetch_add(&p->generation, 1);
        (void)share_check(p, NULL);
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
                char err[256];
                if (share_rec_write_dir(p, r, false, err, sizeof err) < 0)
                        log_warn("cannot rewrite a limits dir", "container=%s error=\"%s\"", r->name, err);
                changed = 1;
        }
        if (changed) {
                (void)share_journal_save(p);
                (void)share_check(p, r);
                atomic_fetch_add(&p->generation, 1);
        }
        return changed;
}

/* The first sync after a restore: every ID of the journal's records that PodResources does not
 * list is not held by kubelet — kubelet lists an allocation as soon as its Allocate returned, so an
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
        if (drop_unlisted(p) > 0) {
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
