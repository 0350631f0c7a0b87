/* SPDX-License-Identifier: Apache-2.0 */
/*
 * alloc-table — per-process record of every tracked allocation (key → bytes, device), so a free
 * gives back exactly what its allocation took. Lock-free open addressing with linear probing:
 * keys are claimed with one CAS, removed by writing a tombstone, and tombstones are reused by later
 * inserts (keys are unique while live, so reuse cannot create duplicates). The memory is mapped once at
 * init (MAP_NORESERVE: pages appear only where entries land); nothing is allocated on a call path.
 *
 * Tombstones are never cleared (clearing one without a lock can hide a key a concurrent insert placed past
 * it), so after a few million alloc/free cycles no slot is empty any more and a lookup could not stop at
 * one. Lookups stop instead at the table's probe bound: the farthest any key has ever been placed from its
 * home slot. An insert raises the bound before it returns (before the key can be looked up), and since
 * inserts reuse tombstones the bound follows the live load, not the history: a missing key costs a few
 * probes, not a scan of the table (test_table_tombstones_do_not_slow_misses).
 */
#include "interposer/compat.h" /* first: the glibc floor */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>

#include "interposer/interposer.h"

#define TAB_BITS 17u
#define TAB_SIZE (1u << TAB_BITS)
#define KEY_EMPTY 0ULL
#define KEY_TOMB 1ULL

struct entry {
        uint64_t key;
        uint64_t bytes;
        uint64_t dev;
        uint64_t ctx; /* the context the allocation lives in (freed with it); 0 = none */
};

static struct entry *tables[GS_TAB_COUNT];
static uint64_t probe_bound[GS_TAB_COUNT]; /* atomic: max over inserts of (distance from home + 1) */

static const size_t tab_bytes = sizeof(struct entry) * TAB_SIZE;

int gs_table_init(void) {
        for (unsigned t = 0; t < GS_TAB_COUNT; t++) {
                if (tables[t])
                        continue;
                void *p = mmap(NULL, tab_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                               0);
                if (p == MAP_FAILED)
                        return -ENOMEM;
                tables[t] = p;
        }
        return 0;
}

void gs_table_reset(void) {
        for (unsigned t = 0; t < GS_TAB_COUNT; t++)
                if (tables[t]) {
                        (void)madvise(tables[t], tab_bytes, MADV_DONTNEED); /* private anonymous: zero again */
                        __atomic_store_n(&probe_bound[t], 0, __ATOMIC_RELEASE);
                }
}

/* A key now lives `distance` slots past its home: lookups must look that far. */
static inline void raise_bound(enum gs_table t, uint64_t distance) {
        uint64_t b = __atomic_load_n(&probe_bound[t], __ATOMIC_ACQUIRE);
        while (b < distance + 1 && !__atomic_compare_exchange_n(&probe_bound[t], &b, distance + 1, false,
                                                                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                ;
}

static inline uint64_t mix(uint64_t k) {
        /* splitmix64 finaliser: device pointers share their low bits (alignment). */
        k ^= k >> 30;
        k *= 0xbf58476d1ce4e5b9ULL;
        k ^= k >> 27;
        k *= 0x94d049bb133111ebULL;
        k ^= k >> 31;
        return k;
}

/* Keys 0 and 1 are the markers: shift real keys out of their way (a bijection on the rest). */
static inline uint64_t enc(uint64_t key) {
        return key + 2 < key ? key : key + 2;
}

int gs_table_insert(enum gs_table t, uint64_t key, uint64_t bytes, unsigned dev, uint64_t ctx) {
        struct entry *tab = tables[t];
        if (!tab || key >= UINT64_MAX - 2)
                return -ENOSPC;
        uint64_t k = enc(key);
        for (uint64_t i = 0, h = mix(k); i < TAB_SIZE; i++) {
                struct entry *e = &tab[(h + i) & (TAB_SIZE - 1)];
                uint64_t cur = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
                if (cur != KEY_EMPTY && cur != KEY_TOMB)
                        continue;
                /* Value first: nobody looks this key up before we return, but keep the entry whole. */
                if (__atomic_compare_exchange_n(&e->key, &cur, k, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                        __atomic_store_n(&e->bytes, bytes, __ATOMIC_RELAXED);
                        __atomic_store_n(&e->ctx, ctx, __ATOMIC_RELAXED);
                        __atomic_store_n(&e->dev, (uint64_t)dev, __ATOMIC_RELEASE);
                        raise_bound(t, i);
                        return 0;
                }
        }
        return -ENOSPC;
}

int gs_table_take(enum gs_table t, uint64_t key, uint64_t *ret_bytes, unsigned *ret_dev) {
        return gs_table_take_all(t, key, ret_bytes, ret_dev, NULL);
}

int gs_table_take_all(enum gs_table t, uint64_t key, uint64_t *ret_bytes, unsigned *ret_dev, uint64_t *ret_ctx) {
        struct entry *tab = tables[t];
        if (!tab || key >= UINT64_MAX - 2)
                return -ENOENT;
        uint64_t k = enc(key), bound = __atomic_load_n(&probe_bound[t], __ATOMIC_ACQUIRE);
        for (uint64_t i = 0, h = mix(k); i < bound; i++) {
                struct entry *e = &tab[(h + i) & (TAB_SIZE - 1)];
                uint64_t cur = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
                if (cur == KEY_EMPTY)
                        return -ENOENT;
                if (cur != k)
                        continue;
                uint64_t dev = __atomic_load_n(&e->dev, __ATOMIC_ACQUIRE);
                uint64_t bytes = __atomic_load_n(&e->bytes, __ATOMIC_RELAXED);
                uint64_t ctx = __atomic_load_n(&e->ctx, __ATOMIC_RELAXED);
                /* Two threads freeing the same pointer: only one gets it back. */
                if (!__atomic_compare_exchange_n(&e->key, &cur, KEY_TOMB, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                        return -ENOENT;
                *ret_bytes = bytes;
                *ret_dev = (unsigned)dev;
                if (ret_ctx)
                        *ret_ctx = ctx;
                return 0;
        }
        return -ENOENT;
}

void gs_table_take_ctx(enum gs_table t, uint64_t ctx, uint64_t ret_bytes[GS_TAB_MAX_DEV]) {
        struct entry *tab = tables[t];
        if (!tab || !ctx)
                return;
        /* Context teardown only (rare): a full scan is fine. */
        for (uint64_t i = 0; i < TAB_SIZE; i++) {
                struct entry *e = &tab[i];
                uint64_t cur = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
                if (cur == KEY_EMPTY || cur == KEY_TOMB || __atomic_load_n(&e->ctx, __ATOMIC_RELAXED) != ctx)
                        continue;
                uint64_t dev = __atomic_load_n(&e->dev, __ATOMIC_ACQUIRE);
                uint64_t bytes = __atomic_load_n(&e->bytes, __ATOMIC_RELAXED);
                if (dev < GS_TAB_MAX_DEV &&
                    __atomic_compare_exchange_n(&e->key, &cur, KEY_TOMB, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                        ret_bytes[dev] += bytes;
        }
}
