/* SPDX-License-Identifier: Apache-2.0 */
/*
 * names — the string pool of a monitor snapshot (monitor.h, monitor_names_*): an open-addressing
 * hash set over strings kept in 4 KiB chunks, so a name shared by a thousand processes is stored
 * once and the process entries hold pointers. Must never: hand out a pointer that moves (chunks
 * are never reallocated), or be shared between threads while it is written.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "monitor/monitor.h"
#include "util/util.h"

#define CHUNK_SIZE 4096u

struct chunk {
        struct chunk *next;
        size_t used, cap;
        char data[];
};

struct monitor_names {
        const char **slot; /* open addressing, NULL = free; capacity a power of two */
        size_t cap, n;
        struct chunk *chunks;
        size_t bytes;
};

static uint64_t hash(const char *s, size_t len) {
        uint64_t h = 14695981039346656037ull; /* FNV-1a */
        for (size_t i = 0; i < len; i++) {
                h ^= (unsigned char)s[i];
                h *= 1099511628211ull;
        }
        return h;
}

struct monitor_names *monitor_names_new(void) {
        struct monitor_names *n = calloc(1, sizeof *n);
        if (!n)
                return NULL;
        n->cap = 64;
        n->slot = calloc(n->cap, sizeof *n->slot);
        if (!n->slot) {
                free(n);
                return NULL;
        }
        n->bytes = sizeof *n + n->cap * sizeof *n->slot;
        return n;
}

struct monitor_names *monitor_names_free(struct monitor_names *n) {
        if (!n)
                return NULL;
        for (struct chunk *c = n->chunks, *next; c; c = next) {
                next = c->next;
                free(c);
        }
        free(n->slot);
        free(n);
        return NULL;
}

size_t monitor_names_size(const struct monitor_names *n) {
        return n ? n->bytes : 0;
}

static int grow(struct monitor_names *n) {
        size_t cap = n->cap * 2;
        const char **slot = calloc(cap, sizeof *slot);
        if (!slot)
                return -ENOMEM;
        for (size_t i = 0; i < n->cap; i++) {
                if (!n->slot[i])
                        continue;
                size_t k = (size_t)hash(n->slot[i], strlen(n->slot[i])) & (cap - 1);
                while (slot[k])
                        k = (k + 1) & (cap - 1);
                slot[k] = n->slot[i];
        }
        free(n->slot);
        n->bytes += (cap - n->cap) * sizeof *slot;
        n->slot = slot;
        n->cap = cap;
        return 0;
}

static char *store(struct monitor_names *n, const char *s, size_t len) {
        struct chunk *c = n->chunks;
        if (!c || c->cap - c->used < len + 1) {
                size_t cap = MAX((size_t)CHUNK_SIZE, len + 1);
                c = malloc(sizeof *c + cap);
                if (!c)
                        return NULL;
                /* a big string gets a chunk of its own behind the current one, which stays open */
                c->used = 0;
                c->cap = cap;
                if (cap > CHUNK_SIZE && n->chunks) {
                        c->next = n->chunks->next;
                        n->chunks->next = c;
                } else {
                        c->next = n->chunks;
                        n->chunks = c;
                }
                n->bytes += sizeof *c + cap;
        }
        char *p = c->data + c->used;
        memcpy(p, s, len);
        p[len] = '\0';
        c->used += len + 1;
        return p;
}

const char *monitor_names_intern(struct monitor_names *n, const char *s, size_t max_len) {
        if (!n || !s)
                return NULL;
        size_t len = strnlen(s, max_len);
        if (len == 0)
                return "";
        if ((n->n + 1) * 2 > n->cap && grow(n) < 0)
                return NULL;
        size_t k = (size_t)hash(s, len) & (n->cap - 1);
        for (; n->slot[k]; k = (k + 1) & (n->cap - 1))
                if (strncmp(n->slot[k], s, len) == 0 && n->slot[k][len] == '\0')
                        return n->slot[k];
        char *p = store(n, s, len);
        if (!p)
                return NULL;
        n->slot[k] = p;
        n->n++;
        return p;
}
