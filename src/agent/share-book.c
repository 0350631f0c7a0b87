/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share-book — the fractional book in memory (share-book.h).
 * Must never: do I/O, log, take a lock, or know a device beyond its table index.
 */
#include "agent/share-book.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/share.h"
#include "util/util.h"

struct share_book {
        struct share_rec *rec;
        size_t n, cap;
        struct share_shape shape[SHARE_SHAPES]; /* recent container shapes, newest first */
        unsigned n_shapes;
        struct share_proposal prop;
        char last[SHARE_REC_NAME_MAX];
};

struct share_book *share_book_new(void) {
        return calloc(1, sizeof(struct share_book));
}

void share_rec_done(struct share_rec *r) {
        free(r->ids);
        r->ids = NULL;
        r->n_ids = 0;
}

struct share_book *share_book_free(struct share_book *b) {
        if (!b)
                return NULL;
        for (size_t i = 0; i < b->n; i++)
                share_rec_done(&b->rec[i]);
        free(b->rec);
        free(b);
        return NULL;
}

void share_book_clear(struct share_book *b) {
        for (size_t i = 0; i < b->n; i++)
                share_rec_done(&b->rec[i]);
        b->n = 0;
        b->n_shapes = 0;
        b->last[0] = 0;
        b->prop = (struct share_proposal){ 0 };
}

size_t share_book_count(const struct share_book *b) {
        return b->n;
}

struct share_rec *share_book_at(struct share_book *b, size_t i) {
        return i < b->n ? &b->rec[i] : NULL;
}

struct share_rec *share_book_open(struct share_book *b) {
        for (size_t i = 0; i < b->n; i++)
                if (b->rec[i].open)
                        return &b->rec[i];
        return NULL;
}

struct share_rec *share_book_find(struct share_book *b, const char *name) {
        for (size_t i = 0; name && i < b->n; i++)
                if (streq(b->rec[i].name, name))
                        return &b->rec[i];
        return NULL;
}

static struct share_rec *append(struct share_book *b) {
        if (b->n >= SHARE_RECS_MAX)
                return NULL;
        if (array_reserve(&b->rec, &b->cap, b->n + 1, 16) < 0)
                return NULL;
        return &b->rec[b->n++];
}

struct share_rec *share_book_add(struct share_book *b, const char *name) {
        struct share_rec *r = append(b);
        if (r) {
                *r = (struct share_rec){ 0 };
                strscpy(r->name, name, sizeof r->name);
        }
        return r;
}

struct share_rec *share_book_put(struct share_book *b, struct share_rec *r) {
        struct share_rec *dst = share_book_find(b, r->name);
        if (dst)
                share_rec_done(dst);
        else if (!(dst = append(b)))
                return NULL;
        *dst = *r;
        r->ids = NULL;
        r->n_ids = 0;
        return dst;
}

void share_book_remove(struct share_book *b, struct share_rec *r) {
        if (!r || r < b->rec || r >= b->rec + b->n)
                return;
        share_rec_done(r);
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

/* ---- shapes ---- */

void share_book_learn(struct share_book *b, unsigned core, unsigned mem) {
        if (core == 0 || mem == 0 || core > SHARE_CORE_IDS || mem > SHARE_MEM_IDS_MAX)
                return;
        unsigned i = 0;
        while (i < b->n_shapes && !(b->shape[i].core == core && b->shape[i].mem == mem))
                i++;
        if (i == b->n_shapes && b->n_shapes < SHARE_SHAPES)
                b->n_shapes++;
        if (i == SHARE_SHAPES)
                i = SHARE_SHAPES - 1;
        memmove(&b->shape[1], &b->shape[0], i * sizeof b->shape[0]);
        b->shape[0] = (struct share_shape){ .core = (uint16_t)core, .mem = (uint16_t)mem };
}

unsigned share_book_expect(const struct share_book *b, enum plugin_kind kind, unsigned size) {
        unsigned exact = 0;
        for (unsigned i = 0; i < b->n_shapes; i++) {
                unsigned mine = kind == PLUGIN_CORE ? b->shape[i].core : b->shape[i].mem;
                unsigned other = kind == PLUGIN_CORE ? b->shape[i].mem : b->shape[i].core;
                if (mine == size)
                        exact = MAX(exact, other);
        }
        return exact; /* a shape seen before: the largest partner it had */
}

unsigned share_book_need(const struct share_book *b, enum plugin_kind kind, unsigned size) {
        unsigned least = 0;
        for (unsigned i = 0; i < b->n_shapes; i++) {
                unsigned mine = kind == PLUGIN_CORE ? b->shape[i].core : b->shape[i].mem;
                unsigned other = kind == PLUGIN_CORE ? b->shape[i].mem : b->shape[i].core;
                if (mine == size && (least == 0 || other < least))
                        least = other;
        }
        return least;
}

void share_book_forget_shapes(struct share_book *b) {
        b->n_shapes = 0;
}

unsigned share_book_shapes(const struct share_book *b, struct share_shape *ret, unsigned max) {
        unsigned n = MIN(max, b->n_shapes);
        memcpy(ret, b->shape, n * sizeof *ret);
        return n;
}

/* ---- the small fields ---- */

struct share_proposal *share_book_proposal(struct share_book *b) {
        return &b->prop;
}

const struct share_proposal *share_book_proposal_const(const struct share_book *b) {
        return &b->prop;
}

const char *share_book_last(const struct share_book *b) {
        return b->last;
}

void share_book_set_last(struct share_book *b, const char *name) {
        strscpy(b->last, name ? name : "", sizeof b->last);
}
