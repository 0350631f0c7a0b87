/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share-journal — the codec of the fractional journal (share-journal.h): the book's records and
 * small fields as JSON texts, a snapshot and a log line assembled, a snapshot decoded into a book
 * and a log replayed on it. In memory only: no files, no lock, no log.
 * Must never: keep part of a journal it rejects (a journal is accepted or rejected whole), or accept
 * an ID, name or number it did not check.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/share-journal.h"
#include "agent/share.h"
#include "util/util.h"

/* ---- encoding ---- */

static json_t *rec_json(const struct devices *d, const struct share_rec *r) {
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
                if (share_format_id(devices_info(d, r->ids[k].gpu)->id, (enum plugin_kind)r->ids[k].kind, r->ids[k].n,
                                    id, sizeof id) == 0)
                        json_array_append_new(ids, json_string(id));
        }
        json_object_set_new(o, "ids", ids);
        return o;
}

char *share_journal_record(const struct devices *d, const struct share_rec *r) {
        _cleanup_(json_decrefp) json_t *o = rec_json(d, r);
        return o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
}

uint8_t *share_journal_key(const struct share_rec *r, size_t *ret_len) {
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

char *share_journal_fields(const struct devices *d, const struct share_book *b) {
        _cleanup_(json_decrefp) json_t *o = json_object();
        json_t *shapes = json_array();
        if (!o || !shapes) {
                json_decref(shapes);
                return NULL;
        }
        json_object_set_new(o, "shapes", shapes);
        struct share_shape sh[SHARE_SHAPES];
        unsigned n = share_book_shapes(b, sh, SHARE_SHAPES);
        for (unsigned i = 0; i < n; i++)
                json_array_append_new(shapes, json_pack("[ii]", sh[i].core, sh[i].mem));
        const struct share_proposal *q = share_book_proposal_const(b);
        json_t *prop = NULL;
        if (q->set && q->gpu >= 0 && (unsigned)q->gpu < devices_count(d))
                prop = json_pack("{s:s, s:s, s:I, s:s}", "kind", share_kind_word((enum plugin_kind)q->kind), "gpu",
                                 devices_info(d, (unsigned)q->gpu)->id, "size", (json_int_t)q->size, "record", q->rec);
        json_object_set_new(o, "proposal", prop ? prop : json_null());
        json_object_set_new(o, "last", json_string(share_book_last(b)));
        char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!text)
                return NULL;
        size_t len = strlen(text); /* strip the braces: "{...}" -> "..." */
        memmove(text, text + 1, len - 2);
        text[len - 2] = 0;
        return text;
}

static void sb_num(struct gs_buf *sb, uint64_t v) {
        gs_buf_printf(sb, "%" PRIu64, v);
}

static void sb_rec(struct gs_buf *sb, const struct devices *d, const struct share_rec *r) {
        _cleanup_(freep) char *text = share_journal_record(d, r);
        if (text)
                gs_buf_puts(sb, text);
        else
                sb->no_mem = true;
}

/* The buffer's text, or NULL (freed) when out of memory. */
static char *sb_take(struct gs_buf *sb, size_t *ret_len) {
        char *text;
        return gs_buf_finish(sb, &text, ret_len) < 0 ? NULL : text;
}

char *share_journal_snapshot(const struct devices *d, struct share_book *b, uint64_t seq, const char *fields,
                             size_t *ret_len) {
        struct gs_buf sb = { 0 };
        gs_buf_puts(&sb, "{\"version\":");
        sb_num(&sb, SHARE_JOURNAL_VERSION);
        gs_buf_puts(&sb, ",\"seq\":");
        sb_num(&sb, seq);
        gs_buf_puts(&sb, ",\"records\":[");
        for (size_t i = 0; i < share_book_count(b); i++) {
                if (i)
                        gs_buf_puts(&sb, ",");
                sb_rec(&sb, d, share_book_at(b, i));
        }
        gs_buf_puts(&sb, "],");
        gs_buf_puts(&sb, fields);
        gs_buf_puts(&sb, "}");
        return sb_take(&sb, ret_len);
}

char *share_journal_line(const struct devices *d, struct share_book *b, uint64_t seq, const char *const *del,
                         size_t n_del, const size_t *put, size_t n_put, const char *fields, size_t *ret_len) {
        struct gs_buf sb = { 0 };
        gs_buf_puts(&sb, "{\"seq\":");
        sb_num(&sb, seq);
        gs_buf_puts(&sb, ",\"del\":[");
        for (size_t i = 0; i < n_del; i++) {
                _cleanup_(json_decrefp) json_t *name = json_string(del[i]);
                _cleanup_(freep) char *q = name ? json_dumps(name, JSON_ENCODE_ANY) : NULL;
                if (!q)
                        sb.no_mem = true;
                if (i)
                        gs_buf_puts(&sb, ",");
                if (q)
                        gs_buf_puts(&sb, q);
        }
        gs_buf_puts(&sb, "],\"put\":[");
        for (size_t i = 0; i < n_put; i++) {
                if (i)
                        gs_buf_puts(&sb, ",");
                sb_rec(&sb, d, share_book_at(b, put[i]));
        }
        gs_buf_puts(&sb, "],");
        gs_buf_puts(&sb, fields);
        gs_buf_puts(&sb, "}\n");
        return sb_take(&sb, ret_len);
}

/* ---- decoding ---- */

/* One record of a journal into r (not in the book yet: its IDs are r's until share_book_put). */
static int decode_rec(const struct devices *d, json_t *o, struct share_rec *r) {
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
                if (!json_is_string(v) || share_parse_id(d, json_string_value(v), &kind, &g, &n) < 0 ||
                    share_rec_add_id(r, g, kind, n) < 0)
                        return -EBADMSG;
        }
        return 0; /* a record may have lost its first half already (kubelet released it first) */
}

static int decode_shapes(struct share_book *b, json_t *shapes) {
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
        share_book_forget_shapes(b);
        /* oldest first, so the newest ends up in front */
        for (size_t i = json_array_size(shapes); i-- > 0;) {
                json_int_t c, m;
                (void)json_unpack(json_array_get(shapes, i), "[II]", &c, &m);
                share_book_learn(b, (unsigned)c, (unsigned)m);
        }
        return 0;
}

static int decode_proposal(const struct devices *d, json_t *o, struct share_proposal *ret) {
        const char *kind, *gpu, *rec;
        json_int_t size;
        *ret = (struct share_proposal){ 0 };
        if (json_is_null(o))
                return 0;
        if (json_unpack(o, "{s:s, s:s, s:I, s:s !}", "kind", &kind, "gpu", &gpu, "size", &size, "record", &rec) < 0 ||
            (!streq(kind, "core") && !streq(kind, "mem")) || size < 1 ||
            size > (json_int_t)SHARE_CORE_IDS * TOPO_MAX_GPUS || strlen(rec) >= sizeof ret->rec)
                return -EBADMSG;
        int g = devices_find(d, gpu);
        if (g < 0)
                return -EBADMSG;
        *ret = (struct share_proposal){
                .set = true, .kind = streq(kind, "core") ? PLUGIN_CORE : PLUGIN_MEMORY, .gpu = g, .size = (unsigned)size
        };
        strscpy(ret->rec, rec, sizeof ret->rec);
        return 0;
}

/* The small fields of either kind of entry. */
static int decode_fields(const struct devices *d, struct share_book *b, json_t *shapes, json_t *prop,
                         const char *last) {
        struct share_proposal q;
        if (strlen(last) >= SHARE_REC_NAME_MAX || decode_proposal(d, prop, &q) < 0 || decode_shapes(b, shapes) < 0)
                return -EBADMSG;
        *share_book_proposal(b) = q;
        share_book_set_last(b, last);
        return 0;
}

/* Put one decoded record in the book, replacing the one of its name (replace) or refusing a
 * duplicate (!replace). */
static int put_rec(const struct devices *d, struct share_book *b, json_t *o, bool replace) {
        struct share_rec tmp = { 0 };
        int r = decode_rec(d, o, &tmp);
        if (r == 0 && !replace && share_book_find(b, tmp.name))
                r = -EBADMSG;
        if (r == 0 && !share_book_put(b, &tmp))
                r = -EBADMSG;
        share_rec_done(&tmp);
        return r;
}

int share_journal_decode(const struct devices *d, struct share_book *b, const char *text, size_t len,
                         uint64_t *ret_seq) {
        if (len > SHARE_JOURNAL_MAX)
                return -EBADMSG;
        _cleanup_(json_decrefp) json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
        json_int_t version, seq;
        json_t *recs, *shapes, *prop;
        const char *last;
        if (!root ||
            json_unpack(root, "{s:I, s:I, s:o, s:o, s:o, s:s !}", "version", &version, "seq", &seq, "records", &recs,
                        "shapes", &shapes, "proposal", &prop, "last", &last) < 0 ||
            version != (json_int_t)SHARE_JOURNAL_VERSION || seq < 1 || !json_is_array(recs) ||
            json_array_size(recs) > SHARE_RECS_MAX)
                return -EBADMSG;
        int r = decode_fields(d, b, shapes, prop, last);
        size_t k;
        json_t *v;
        json_array_foreach(recs, k, v) {
                if (r < 0)
                        break;
                r = put_rec(d, b, v, false);
        }
        if (r < 0)
                share_book_clear(b);
        else
                *ret_seq = (uint64_t)seq;
        return r;
}

/* One complete log line. 1 applied, 0 skipped (at or below the entry *seq), -EBADMSG. */
static int replay_line(const struct devices *d, struct share_book *b, const char *line, size_t len, uint64_t *seq) {
        _cleanup_(json_decrefp) json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
        json_int_t at;
        json_t *del, *put, *shapes, *prop;
        const char *last;
        if (!root ||
            json_unpack(root, "{s:I, s:o, s:o, s:o, s:o, s:s !}", "seq", &at, "del", &del, "put", &put, "shapes",
                        &shapes, "proposal", &prop, "last", &last) < 0 ||
            !json_is_array(del) || !json_is_array(put) || json_array_size(put) > SHARE_RECS_MAX || at < 1)
                return -EBADMSG;
        if ((uint64_t)at <= *seq)
                return 0;
        if ((uint64_t)at != *seq + 1)
                return -EBADMSG; /* an entry is missing */
        size_t k;
        json_t *v;
        json_array_foreach(del, k, v) {
                struct share_rec *r = json_is_string(v) ? share_book_find(b, json_string_value(v)) : NULL;
                if (!r)
                        return -EBADMSG;
                share_book_remove(b, r);
        }
        json_array_foreach(put, k, v) {
                if (put_rec(d, b, v, true) < 0)
                        return -EBADMSG;
        }
        if (decode_fields(d, b, shapes, prop, last) < 0)
                return -EBADMSG;
        *seq = (uint64_t)at;
        return 1;
}

int share_journal_replay(const struct devices *d, struct share_book *b, const char *text, size_t len, uint64_t *seq) {
        if (len > SHARE_JOURNAL_MAX) {
                share_book_clear(b);
                return -EBADMSG;
        }
        int applied = 0;
        size_t at = 0;
        while (at < len) {
                const char *nl = memchr(text + at, '\n', len - at);
                if (!nl)
                        break; /* the last write, cut short by the crash: never acknowledged */
                size_t n = (size_t)(nl - (text + at));
                int r = replay_line(d, b, text + at, n, seq);
                if (r < 0) {
                        share_book_clear(b);
                        return r;
                }
                applied += r;
                at += n + 1;
        }
        return applied;
}
