/* SPDX-License-Identifier: Apache-2.0 */
/*
 * map.c — open-addressing hash map for the scheduler model (see map-internal.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sched/map-internal.h"

uint64_t sched_map_hash(const void *key, size_t klen) {
        /* FNV-1a, then a finaliser so the low bits (the slot) mix well; never 0 (the empty mark) */
        const unsigned char *p = key;
        uint64_t h = 1469598103934665603ULL;
        for (size_t i = 0; i < klen; i++) {
                h ^= p[i];
                h *= 1099511628211ULL;
        }
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 33;
        return h ? h : 1;
}

static size_t find_slot(const struct sched_map *m, uint64_t h, const void *key, size_t klen, int *found) {
        size_t mask = m->cap - 1;
        for (size_t i = h & mask;; i = (i + 1) & mask) {
                const struct sched_map_entry *e = &m->e[i];
                if (e->hash == 0) {
                        *found = 0;
                        return i;
                }
                if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0) {
                        *found = 1;
                        return i;
                }
        }
}

void *sched_map_get(const struct sched_map *m, const void *key, size_t klen) {
        if (m->cap == 0)
                return NULL;
        int found;
        size_t i = find_slot(m, sched_map_hash(key, klen), key, klen, &found);
        return found ? m->e[i].value : NULL;
}

static int grow(struct sched_map *m) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        struct sched_map_entry *e = calloc(cap, sizeof *e);
        if (!e)
                return -ENOMEM;
        struct sched_map old = *m;
        m->e = e;
        m->cap = cap;
        for (size_t i = 0; i < old.cap; i++) {
                if (old.e[i].hash == 0)
                        continue;
                int found;
                size_t j = find_slot(m, old.e[i].hash, old.e[i].key, old.e[i].klen, &found);
                m->e[j] = old.e[i];
        }
        free(old.e);
        return 0;
}

int sched_map_put(struct sched_map *m, const void *key, size_t klen, void *value) {
        if ((m->n + 1) * 4 > m->cap * 3) { /* load factor <= 3/4 */
                int r = grow(m);
                if (r < 0)
                        return r;
        }
        uint64_t h = sched_map_hash(key, klen);
        int found;
        size_t i = find_slot(m, h, key, klen, &found);
        if (!found)
                m->n++;
        m->e[i] = (struct sched_map_entry){ h, key, klen, value };
        return 0;
}

void *sched_map_del(struct sched_map *m, const void *key, size_t klen) {
        if (m->cap == 0)
                return NULL;
        int found;
        size_t i = find_slot(m, sched_map_hash(key, klen), key, klen, &found);
        if (!found)
                return NULL;
        void *v = m->e[i].value;
        size_t mask = m->cap - 1;
        /* backward-shift: pull later entries of the probe run into the hole */
        size_t hole = i;
        for (size_t j = (i + 1) & mask; m->e[j].hash != 0; j = (j + 1) & mask) {
                size_t home = m->e[j].hash & mask;
                /* entry j may move to the hole if the hole lies cyclically in [home, j) */
                if (((j - home) & mask) >= ((j - hole) & mask)) {
                        m->e[hole] = m->e[j];
                        hole = j;
                }
        }
        m->e[hole] = (struct sched_map_entry){ 0 };
        m->n--;
        return v;
}

void *sched_map_next(const struct sched_map *m, size_t *cursor) {
        while (*cursor < m->cap) {
                const struct sched_map_entry *e = &m->e[(*cursor)++];
                if (e->hash != 0)
                        return e->value;
        }
        return NULL;
}

void sched_map_done(struct sched_map *m) {
        free(m->e);
        *m = (struct sched_map){ 0 };
}
