/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for src/alloc. First byte even: the rest is a GPU list for alloc_set_parse (an
 * accepted list must format and re-parse to the same set). First byte odd: the bytes describe a
 * small node (links, free set, must-include, floor, count) and a request; alloc_pick_gpus must
 * either answer with a set that honours every constraint or fail with a documented error.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "alloc/alloc.h"
#include "topo/topo.h"

static uint8_t take(const uint8_t **p, size_t *left) {
        if (*left == 0)
                return 0;
        (*left)--;
        return *(*p)++;
}

static void fuzz_set_text(const uint8_t *data, size_t size) {
        char text[256];
        unsigned max = size ? data[0] % 66 : 8;
        size_t n = size > 1 ? size - 1 : 0;
        if (n >= sizeof text)
                n = sizeof text - 1;
        if (n)
                memcpy(text, data + 1, n);
        text[n] = '\0';
        alloc_set_t s = 0, back = 0;
        if (alloc_set_parse(text, max, &s) < 0)
                return;
        if (max < 64 && (s >> max))
                abort();
        char buf[256];
        if (alloc_set_parse(alloc_set_format(s, buf, sizeof buf), 64, &back) < 0 || back != s)
                abort();
}

/* A tree-shaped node (PCIe levels from the root down, NVLink boards at the bottom), so that the
 * allocator's exact path for such nodes gets fuzzed too. */
static void tree_split(struct topo *t, unsigned lo, unsigned hi, unsigned depth, const uint8_t **p, size_t *left) {
        static const uint8_t level[] = { TOPO_LEVEL_SYS, TOPO_LEVEL_NODE, TOPO_LEVEL_PHB, TOPO_LEVEL_PXB,
                                         TOPO_LEVEL_PIX };
        if (hi - lo < 2)
                return;
        if (depth == sizeof level) {
                uint8_t nv = (uint8_t)(take(p, left) % 13);
                for (unsigned i = lo; i < hi; i++)
                        for (unsigned j = i + 1; j < hi; j++)
                                topo_set_link(t, i, j, (struct topo_link){ TOPO_LEVEL_PIX, nv });
                return;
        }
        unsigned cut = lo + 1 + take(p, left) % (hi - lo - 1);
        for (unsigned i = lo; i < cut; i++)
                for (unsigned j = cut; j < hi; j++)
                        topo_set_link(t, i, j, (struct topo_link){ level[depth], 0 });
        tree_split(t, lo, cut, depth + 1, p, left);
        tree_split(t, cut, hi, depth + (take(p, left) & 1), p, left);
}

static void fuzz_pick(const uint8_t *p, size_t left) {
        static struct topo t; /* large; one input at a time */
        topo_init(&t);
        uint8_t shape = take(&p, &left);
        unsigned n = 1 + (shape & 0x7f) % 24;
        t.n_gpus = n;
        for (unsigned i = 0; i < n; i++) {
                t.gpu[i].index = (int)i;
                t.link[i][i] = (struct topo_link){ TOPO_LEVEL_SELF, 0 };
        }
        if (shape & 0x80)
                tree_split(&t, 0, n, 0, &p, &left);
        else
                for (unsigned i = 0; i < n; i++)
                        for (unsigned j = i + 1; j < n; j++) {
                                uint8_t b = take(&p, &left);
                                struct topo_link l = { (uint8_t)(b % 6),
                                                       (uint8_t)((b >> 4) % 4 == 3 ? (b >> 6) + 1 : 0) };
                                topo_set_link(&t, i, j, l);
                        }
        alloc_set_t all = (1ULL << n) - 1;
        alloc_set_t avail = 0, must = 0;
        for (unsigned i = 0; i < 4; i++)
                avail |= (alloc_set_t)take(&p, &left) << (8 * i);
        for (unsigned i = 0; i < 4; i++)
                must |= (alloc_set_t)take(&p, &left) << (8 * i);
        uint8_t flags = take(&p, &left);
        struct alloc_request req = {
                .count = take(&p, &left) % (n + 2),
                .available = (flags & 1) ? avail : avail & all,
                .must_include = (flags & 2) ? must : must & avail & all,
        };
        if (flags & 4)
                req.min_link = (struct topo_link){ (uint8_t)(take(&p, &left) % 6), 0 };
        if (flags & 8)
                req.min_link.nvlinks = (uint8_t)(take(&p, &left) % 3);
        if (!(flags & 16))
                req.must_include &= (req.must_include & (req.must_include - 1)); /* mostly few */

        struct alloc_result r;
        struct gs_error err = { 0 };
        int rc = alloc_pick_gpus(&t, &req, &r, &err);
        if (rc < 0) {
                if (rc != -EINVAL && rc != -ENOSPC && rc != -ERANGE)
                        abort();
                if (!err.message[0])
                        abort();
                if (rc == -ENOSPC && (unsigned)__builtin_popcountll(req.available) >= req.count)
                        abort();
                if (rc == -ERANGE && req.min_link.pcie == 0 && req.min_link.nvlinks == 0)
                        abort(); /* never fails without a floor when enough GPUs are free */
                return;
        }
        if ((unsigned)__builtin_popcountll(r.set) != req.count || r.n != req.count)
                abort();
        if ((r.set & ~req.available) || (r.set & req.must_include) != req.must_include)
                abort();
        if ((req.min_link.pcie || req.min_link.nvlinks) && req.count >= 2 &&
            topo_link_cmp(alloc_worst_link(&t, r.set), req.min_link) < 0)
                abort();
        if (r.ring_bw != alloc_ring_bw(&t, r.set) || r.pair_total != alloc_pair_total(&t, r.set))
                abort();
        for (unsigned i = 1; i < r.n; i++)
                if (r.gpus[i - 1] >= r.gpus[i])
                        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size == 0)
                return 0;
        if (data[0] & 1)
                fuzz_pick(data + 1, size - 1);
        else
                fuzz_set_text(data + 1, size - 1);
        return 0;
}
