/* SPDX-License-Identifier: Apache-2.0 */
/*
 * map-internal — a small open-addressing hash map (linear probing, backward-shift deletion) from byte
 * keys to pointers, for the scheduler model's node, pod and topology-class tables. Keys are not
 * copied: they must live as long as their entry (the model keys by strings its values own).
 * Internal to src/sched. Must never: hold an entry whose key was freed.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct sched_map_entry {
        uint64_t hash; /* 0 = empty slot */
        const void *key;
        size_t klen;
        void *value;
};

struct sched_map {
        struct sched_map_entry *e;
        size_t cap, n; /* cap is 0 or a power of two */
};

/* Thread: any; lock: the map's owner serialises (the model's caller). */
uint64_t sched_map_hash(const void *key, size_t klen);
/* Thread: any; lock: the map's owner serialises (the model's caller). */
void *sched_map_get(const struct sched_map *m, const void *key, size_t klen);
/* Insert or replace. 0 or -ENOMEM. */
/* Thread: any; lock: the map's owner serialises (the model's caller). */
int sched_map_put(struct sched_map *m, const void *key, size_t klen, void *value);
/* The removed value, or NULL when absent. */
/* Thread: any; lock: the map's owner serialises (the model's caller). */
void *sched_map_del(struct sched_map *m, const void *key, size_t klen);
/* Iterate: *cursor starts at 0; returns the next value or NULL at the end. */
/* Thread: any; lock: the map's owner serialises (the model's caller). */
void *sched_map_next(const struct sched_map *m, size_t *cursor);
/* Thread: any; lock: the map's owner serialises (the model's caller). */
void sched_map_done(struct sched_map *m);
