/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of src/alloc: the pick cross-checked against brute force on every reference
 * topology (every free subset, every size), must-include, floor, errors, determinism, ring
 * bandwidth by hand and against brute force on random graphs, set parsing and formatting.
 * The brute force here is written independently of alloc.c (permutations, full enumeration).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "helpers.h"

#include "alloc/alloc.h"
#include "topo/topo.h"
#include "util/util.h"

static const char *const reference[] = {
        "seed000-8gpu-pcie-2socket.topo",  "seed004-7gpu-p40-mlx4.topo", "pcie-8gpu-pix-phb-sys.topo",
        "dgx1-v100-hybrid-cube-mesh.topo", "dgx-a100-nvswitch.topo",
};

static struct topo *load_new(const char *name) {
        struct topo *t = malloc(sizeof *t);
        assert_non_null(t);
        test_load_topo(name, t);
        return t;
}

static alloc_set_t full(const struct topo *t) {
        return t->n_gpus == 64 ? ~0ULL : (1ULL << t->n_gpus) - 1;
}

/* ---------- brute force, independent of alloc.c ---------- */

static unsigned bf_bw(const struct topo *t, int a, int b) {
        return topo_link_bw(t->link[a][b]);
}

/* Max over Hamiltonian cycles (vertex v[0] fixed first) of the min edge. */
static unsigned bf_ring_rec(const struct topo *t, const int *v, unsigned n, unsigned used, int last, unsigned depth,
                            unsigned cur) {
        if (depth == n) {
                unsigned close = bf_bw(t, last, v[0]);
                return close < cur ? close : cur;
        }
        unsigned best = 0;
        for (unsigned i = 1; i < n; i++) {
                if (used >> i & 1)
                        continue;
                unsigned e = bf_bw(t, last, v[i]);
                unsigned c = e < cur ? e : cur;
                if (c <= best)
                        continue;
                unsigned r = bf_ring_rec(t, v, n, used | (1u << i), v[i], depth + 1, c);
                if (r > best)
                        best = r;
        }
        return best;
}

static unsigned bf_ring(const struct topo *t, alloc_set_t s) {
        int v[TOPO_MAX_GPUS];
        unsigned n = 0;
        for (unsigned i = 0; i < t->n_gpus; i++)
                if (s >> i & 1)
                        v[n++] = (int)i;
        if (n < 2)
                return 0;
        if (n == 2)
                return bf_bw(t, v[0], v[1]);
        return bf_ring_rec(t, v, n, 1, v[0], 1, ~0u);
}

static unsigned bf_pairs(const struct topo *t, alloc_set_t s) {
        unsigned sum = 0;
        for (unsigned i = 0; i < t->n_gpus; i++)
                for (unsigned j = i + 1; j < t->n_gpus; j++)
                        if ((s >> i & 1) && (s >> j & 1))
                                sum += bf_bw(t, (int)i, (int)j);
        return sum;
}

static bool bf_meets(const struct topo *t, alloc_set_t s, struct topo_link floor) {
        for (unsigned i = 0; i < t->n_gpus; i++)
                for (unsigned j = i + 1; j < t->n_gpus; j++)
                        if ((s >> i & 1) && (s >> j & 1) && topo_link_cmp(t->link[i][j], floor) < 0)
                                return false;
        return true;
}

/* Per-topology table of every subset's ring and pair total (n <= 8). */
struct table {
        unsigned ring[256];
        unsigned pairs[256];
};

static void table_fill(const struct topo *t, struct table *tb) {
        assert_true(t->n_gpus <= 8);
        for (alloc_set_t s = 0; s < (1ULL << t->n_gpus); s++) {
                tb->ring[s] = bf_ring(t, s);
                tb->pairs[s] = bf_pairs(t, s);
        }
}

/* Best ring, then best pair total among sets with it, over S ⊆ avail, must ⊆ S, |S| = k, floor. */
static bool bf_best(const struct topo *t, const struct table *tb, alloc_set_t avail, alloc_set_t must, unsigned k,
                    const struct topo_link *floor, unsigned *ret_ring, unsigned *ret_pairs) {
        bool any = false;
        unsigned br = 0, bp = 0;
        for (alloc_set_t s = 0; s < (1ULL << t->n_gpus); s++) {
                if ((s & ~avail) || (s & must) != must || (unsigned)__builtin_popcountll(s) != k)
                        continue;
                if (floor && !bf_meets(t, s, *floor))
                        continue;
                if (!any || tb->ring[s] > br || (tb->ring[s] == br && tb->pairs[s] > bp)) {
                        br = tb->ring[s];
                        bp = tb->pairs[s];
                        any = true;
                }
        }
        *ret_ring = br;
        *ret_pairs = bp;
        return any;
}

static int pick(const struct topo *t, unsigned k, alloc_set_t avail, alloc_set_t must, struct alloc_result *r) {
        struct alloc_request req = { .count = k, .available = avail, .must_include = must };
        struct gs_error err = { 0 };
        int rc = alloc_pick_gpus(t, &req, r, &err);
        if (rc < 0)
                print_message("alloc_pick_gpus: %s\n", err.message);
        return rc;
}

/* ---------- the pick against brute force ---------- */

static void check_quality(const char *name) {
        struct topo *t = load_new(name);
        struct table *tb = malloc(sizeof *tb);
        assert_non_null(tb);
        table_fill(t, tb);
        unsigned checked = 0;
        for (alloc_set_t avail = 1; avail <= full(t); avail++)
                for (unsigned k = 1; k <= (unsigned)__builtin_popcountll(avail); k++) {
                        struct alloc_result r;
                        assert_int_equal(pick(t, k, avail, 0, &r), 0);
                        assert_int_equal(r.n, k);
                        assert_int_equal(__builtin_popcountll(r.set), k);
                        assert_int_equal(r.set & ~avail, 0);
                        unsigned br, bp;
                        assert_true(bf_best(t, tb, avail, 0, k, NULL, &br, &bp));
                        if (tb->ring[r.set] != br || r.ring_bw != br)
                                fail_msg("%s avail=%#llx k=%u: ring %u (reported %u), best %u", name,
                                         (unsigned long long)avail, k, tb->ring[r.set], r.ring_bw, br);
                        if (100ULL * tb->pairs[r.set] < 98ULL * bp)
                                fail_msg("%s avail=%#llx k=%u: pairs %u, best %u", name, (unsigned long long)avail, k,
                                         tb->pairs[r.set], bp);
                        assert_int_equal(r.pair_total, tb->pairs[r.set]);
                        checked++;
                }
        assert_true(checked >= (1u << (t->n_gpus - 1)));
        free(tb);
        free(t);
}

static void test_quality_seed000(void **state) {
        (void)state;
        check_quality("seed000-8gpu-pcie-2socket.topo");
}
static void test_quality_seed004(void **state) {
        (void)state;
        check_quality("seed004-7gpu-p40-mlx4.topo");
}
static void test_quality_pcie8(void **state) {
        (void)state;
        check_quality("pcie-8gpu-pix-phb-sys.topo");
}
static void test_quality_dgx1(void **state) {
        (void)state;
        check_quality("dgx1-v100-hybrid-cube-mesh.topo");
}
static void test_quality_dgxa100(void **state) {
        (void)state;
        check_quality("dgx-a100-nvswitch.topo");
}

/* Best ring among subsets of r with s GPUs (0 when r is too small). */
static unsigned bf_best_ring_of(const struct table *tb, alloc_set_t r, unsigned s) {
        unsigned best = 0;
        for (alloc_set_t x = r; x; x = (x - 1) & r)
                if ((unsigned)__builtin_popcountll(x) == s && tb->ring[x] > best)
                        best = tb->ring[x];
        return best;
}

static unsigned bf_static(const struct topo *t, unsigned g) {
        unsigned sum = 0;
        for (unsigned j = 0; j < t->n_gpus; j++)
                if (j != g)
                        sum += bf_bw(t, (int)g, (int)j);
        return sum;
}

/*
 * A single GPU leaves the rest best connected: no other choice leaves a better ring for 8, then
 * 4, then 2 GPUs; among choices that leave the same, it is one of the GPUs with the weakest wiring
 * in the node, and among those it leaves the largest pair total.
 */
static void test_single_leaves_rest_best_connected(void **state) {
        (void)state;
        for (size_t f = 0; f < ELEMENTSOF(reference); f++) {
                struct topo *t = load_new(reference[f]);
                struct table *tb = malloc(sizeof *tb);
                assert_non_null(tb);
                table_fill(t, tb);
                for (alloc_set_t avail = 1; avail <= full(t); avail++) {
                        struct alloc_result r;
                        assert_int_equal(pick(t, 1, avail, 0, &r), 0);
                        unsigned na = (unsigned)__builtin_popcountll(avail);
                        unsigned score[TOPO_MAX_GPUS][3];
                        for (unsigned g = 0; g < t->n_gpus; g++)
                                for (unsigned z = 0; z < 3; z++) {
                                        unsigned s = 8u >> z;
                                        score[g][z] = (avail >> g & 1) && na >= 3 && s <= na - 1
                                                              ? bf_best_ring_of(tb, avail & ~(1ULL << g), s)
                                                              : 0;
                                }
                        unsigned c = (unsigned)r.gpus[0];
                        for (unsigned g = 0; g < t->n_gpus; g++) {
                                if (!(avail >> g & 1))
                                        continue;
                                int cmp = 0;
                                for (unsigned z = 0; z < 3 && !cmp; z++)
                                        cmp = score[g][z] > score[c][z] ? 1 : score[g][z] < score[c][z] ? -1 : 0;
                                if (cmp > 0)
                                        fail_msg("%s avail=%#llx: took %u, but %u leaves better rings", reference[f],
                                                 (unsigned long long)avail, c, g);
                                if (cmp < 0)
                                        continue;
                                if (bf_static(t, g) < bf_static(t, c))
                                        fail_msg("%s avail=%#llx: took %u, %u is wired more weakly", reference[f],
                                                 (unsigned long long)avail, c, g);
                                if (bf_static(t, g) == bf_static(t, c) &&
                                    bf_pairs(t, avail & ~(1ULL << g)) > bf_pairs(t, avail & ~(1ULL << c)))
                                        fail_msg("%s avail=%#llx: took %u, %u leaves more pair bandwidth", reference[f],
                                                 (unsigned long long)avail, c, g);
                        }
                        assert_int_equal(r.ring_bw, 0);
                }
                free(tb);
                free(t);
        }
}

/* Buddy behaviour on the seed node: with GPU 0 busy, one GPU goes to 0's PIX partner, not into
 * another pair. */
static void test_single_fills_broken_pair(void **state) {
        (void)state;
        struct topo *t = load_new("seed000-8gpu-pcie-2socket.topo");
        struct alloc_result r;
        assert_int_equal(pick(t, 1, full(t) & ~1ULL, 0, &r), 0);
        assert_int_equal(r.gpus[0], 1);
        assert_int_equal(pick(t, 1, full(t) & ~(1ULL << 6), 0, &r), 0);
        assert_int_equal(r.gpus[0], 7);
        free(t);
}

/* The story of the issue: GPUs 0,1,3,4 busy, two wanted → the free PIX pair 6,7. */
static void test_seed_case(void **state) {
        (void)state;
        struct topo *t = load_new("seed000-8gpu-pcie-2socket.topo");
        alloc_set_t busy;
        assert_int_equal(alloc_set_parse("0,1,3,4", t->n_gpus, &busy), 0);
        struct alloc_result r;
        assert_int_equal(pick(t, 2, full(t) & ~busy, 0, &r), 0);
        assert_int_equal(r.set, (1ULL << 6) | (1ULL << 7));
        assert_int_equal(r.gpus[0], 6);
        assert_int_equal(r.gpus[1], 7);
        assert_int_equal(r.ring_bw, 12);
        assert_int_equal(r.worst.pcie, TOPO_LEVEL_PIX);
        assert_true(strlen(r.why) > 0);
        free(t);
}

/* Every must-include set of up to two GPUs: honoured, and the ring is the best containing it. */
static void test_must_include_honoured(void **state) {
        (void)state;
        for (size_t f = 0; f < ELEMENTSOF(reference); f++) {
                struct topo *t = load_new(reference[f]);
                struct table *tb = malloc(sizeof *tb);
                assert_non_null(tb);
                table_fill(t, tb);
                for (alloc_set_t avail = 1; avail <= full(t); avail += 7)
                        for (alloc_set_t must = avail; must; must = (must - 1) & avail) {
                                unsigned nm = (unsigned)__builtin_popcountll(must);
                                if (nm > 2)
                                        continue;
                                for (unsigned k = nm; k <= (unsigned)__builtin_popcountll(avail); k++) {
                                        struct alloc_result r;
                                        assert_int_equal(pick(t, k, avail, must, &r), 0);
                                        assert_int_equal(r.set & must, must);
                                        assert_int_equal(r.set & ~avail, 0);
                                        unsigned br, bp;
                                        assert_true(bf_best(t, tb, avail, must, k, NULL, &br, &bp));
                                        assert_int_equal(tb->ring[r.set], br);
                                        assert_true(100ULL * tb->pairs[r.set] >= 98ULL * bp);
                                }
                        }
                free(tb);
                free(t);
        }
}

/* A floor: every answer meets it, and -ERANGE exactly when no set can. */
static void test_floor_honoured(void **state) {
        (void)state;
        static const struct topo_link floors[] = {
                { TOPO_LEVEL_PIX, 0 }, { TOPO_LEVEL_PHB, 0 }, { 0, 1 }, { 0, 2 }, { TOPO_LEVEL_NODE, 0 },
        };
        for (size_t f = 0; f < ELEMENTSOF(reference); f++) {
                struct topo *t = load_new(reference[f]);
                struct table *tb = malloc(sizeof *tb);
                assert_non_null(tb);
                table_fill(t, tb);
                for (size_t fl = 0; fl < ELEMENTSOF(floors); fl++)
                        for (alloc_set_t avail = 1; avail <= full(t); avail += 11)
                                for (unsigned k = 1; k <= (unsigned)__builtin_popcountll(avail); k++) {
                                        struct alloc_request req = { .count = k,
                                                                     .available = avail,
                                                                     .min_link = floors[fl] };
                                        struct alloc_result r;
                                        struct gs_error err = { 0 };
                                        int rc = alloc_pick_gpus(t, &req, &r, &err);
                                        unsigned br, bp;
                                        bool possible = bf_best(t, tb, avail, 0, k, &floors[fl], &br, &bp);
                                        if (!possible) {
                                                assert_int_equal(rc, -ERANGE);
                                                assert_true(strlen(err.message) > 0);
                                                continue;
                                        }
                                        assert_int_equal(rc, 0);
                                        assert_true(bf_meets(t, r.set, floors[fl]));
                                        assert_int_equal(tb->ring[r.set], br);
                                }
                free(tb);
                free(t);
        }
}

static void test_floor_out_of_reach(void **state) {
        (void)state;
        struct topo *t = load_new("seed000-8gpu-pcie-2socket.topo");
        struct alloc_request req = { .count = 4, .available = full(t), .min_link = { TOPO_LEVEL_PIX, 0 } };
        struct alloc_result r;
        struct gs_error err = { 0 };
        assert_int_equal(alloc_pick_gpus(t, &req, &r, &err), -ERANGE);
        assert_non_null(strstr(err.message, "PIX"));
        req.count = 2;
        assert_int_equal(alloc_pick_gpus(t, &req, &r, &err), 0);
        assert_int_equal(r.worst.pcie, TOPO_LEVEL_PIX);
        free(t);
}

/* ---------- errors ---------- */

static void expect_error(const struct topo *t, const struct alloc_request *req, int want) {
        struct alloc_result r;
        memset(&r, 0xA5, sizeof r);
        struct alloc_result untouched = r;
        struct gs_error err = { 0 };
        assert_int_equal(alloc_pick_gpus(t, req, &r, &err), want);
        assert_true(strlen(err.message) > 10);
        assert_memory_equal(&r, &untouched, sizeof r); /* ret written only on success */
}

static void test_error_count_zero(void **state) {
        (void)state;
        struct topo *t = load_new("dgx-a100-nvswitch.topo");
        struct alloc_request req = { .count = 0, .available = full(t) };
        expect_error(t, &req, -EINVAL);
        free(t);
}

static void test_error_too_many(void **state) {
        (void)state;
        struct topo *t = load_new("dgx-a100-nvswitch.topo");
        struct alloc_request req = { .count = 9, .available = full(t) };
        expect_error(t, &req, -ENOSPC);
        req.count = 3;
        req.available = 0x3;
        expect_error(t, &req, -ENOSPC);
        free(t);
}

static void test_error_must_include_unknown(void **state) {
        (void)state;
        struct topo *t = load_new("dgx-a100-nvswitch.topo");
        struct alloc_request req = { .count = 2, .available = full(t), .must_include = 1ULL << 9 };
        expect_error(t, &req, -EINVAL);
        free(t);
}

static void test_error_must_include_not_available(void **state) {
        (void)state;
        struct topo *t = load_new("dgx-a100-nvswitch.topo");
        struct alloc_request req = { .count = 2, .available = 0xF0, .must_include = 0x1 };
        expect_error(t, &req, -EINVAL);
        free(t);
}

static void test_error_more_must_than_count(void **state) {
        (void)state;
        struct topo *t = load_new("dgx-a100-nvswitch.topo");
        struct alloc_request req = { .count = 1, .available = full(t), .must_include = 0x3 };
        expect_error(t, &req, -EINVAL);
        free(t);
}

static void test_error_available_unknown(void **state) {
        (void)state;
        struct topo *t = load_new("seed004-7gpu-p40-mlx4.topo");
        struct alloc_request req = { .count = 1, .available = 0xFF };
        expect_error(t, &req, -EINVAL);
        free(t);
}

/* ---------- determinism ---------- */

static void test_deterministic(void **state) {
        (void)state;
        for (size_t f = 0; f < ELEMENTSOF(reference); f++) {
                struct topo *t = load_new(reference[f]);
                struct topo *copy = malloc(sizeof *copy);
                assert_non_null(copy);
                memcpy(copy, t, sizeof *t);
                for (alloc_set_t avail = 1; avail <= full(t); avail += 7)
                        for (unsigned k = 1; k <= (unsigned)__builtin_popcountll(avail); k++) {
                                struct alloc_result a, b;
                                assert_int_equal(pick(t, k, avail, 0, &a), 0);
                                assert_int_equal(pick(copy, k, avail, 0, &b), 0);
                                assert_memory_equal(&a, &b, sizeof a);
                        }
                free(copy);
                free(t);
        }
}

/* ---------- random graphs: pick and ring against brute force ---------- */

static uint64_t rng_next(uint64_t *s) {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        return *s;
}

/* n GPUs: a PCIe tree (pairs under switches, switches under sockets) plus random NVLinks. */
static void random_topo(struct topo *t, unsigned n, uint64_t *seed, unsigned nv_percent) {
        topo_init(t);
        t->n_gpus = n;
        for (unsigned i = 0; i < n; i++) {
                t->gpu[i].index = (int)i;
                t->link[i][i] = (struct topo_link){ TOPO_LEVEL_SELF, 0 };
        }
        for (unsigned i = 0; i < n; i++)
                for (unsigned j = i + 1; j < n; j++) {
                        struct topo_link l = { TOPO_LEVEL_SYS, 0 };
                        if (i / 2 == j / 2)
                                l.pcie = TOPO_LEVEL_PIX;
                        else if (i / 4 == j / 4)
                                l.pcie = TOPO_LEVEL_PXB;
                        else if (i / 8 == j / 8)
                                l.pcie = TOPO_LEVEL_PHB;
                        if (rng_next(seed) % 100 < nv_percent)
                                l.nvlinks = (uint8_t)(1 + rng_next(seed) % 3);
                        topo_set_link(t, i, j, l);
                }
}

static void test_ring_bw_random_graphs(void **state) {
        (void)state;
        struct topo *t = malloc(sizeof *t);
        assert_non_null(t);
        uint64_t seed = 0x9E3779B97F4A7C15ULL;
        for (unsigned round = 0; round < 40; round++) {
                random_topo(t, 9, &seed, 20 + round);
                for (unsigned q = 0; q < 40; q++) {
                        alloc_set_t s = rng_next(&seed) & full(t);
                        assert_int_equal(alloc_ring_bw(t, s), bf_ring(t, s));
                }
        }
        free(t);
}

/* Random 10-GPU graphs (NVLinks anywhere, not a tree): the pick's ring is still the brute-force best. */
static void test_pick_random_graphs(void **state) {
        (void)state;
        struct topo *t = malloc(sizeof *t);
        assert_non_null(t);
        uint64_t seed = 12345;
        for (unsigned round = 0; round < 12; round++) {
                random_topo(t, 10, &seed, 15 + 3 * round);
                for (unsigned q = 0; q < 25; q++) {
                        alloc_set_t avail = rng_next(&seed) & full(t);
                        unsigned na = (unsigned)__builtin_popcountll(avail);
                        if (na < 2)
                                continue;
                        unsigned k = 2 + (unsigned)(rng_next(&seed) % (na - 1));
                        struct alloc_result r;
                        assert_int_equal(pick(t, k, avail, 0, &r), 0);
                        unsigned best = 0, bestp = 0;
                        for (alloc_set_t s = avail; s; s = (s - 1) & avail) {
                                if ((unsigned)__builtin_popcountll(s) != k)
                                        continue;
                                unsigned rb = bf_ring(t, s), pb = bf_pairs(t, s);
                                if (rb > best || (rb == best && pb > bestp)) {
                                        best = rb;
                                        bestp = pb;
                                }
                        }
                        assert_int_equal(bf_ring(t, r.set), best);
                        assert_true(100ULL * bf_pairs(t, r.set) >= 98ULL * bestp);
                }
        }
        free(t);
}

/* More distinct link bandwidths than a small table would hold (66 NVLink counts, the weakest
 * last): still an answer, still exact. */
static void test_many_distinct_bandwidths(void **state) {
        (void)state;
        struct topo *t = malloc(sizeof *t);
        assert_non_null(t);
        topo_init(t);
        t->n_gpus = 12;
        unsigned c = 0;
        for (unsigned i = 0; i < 12; i++) {
                t->gpu[i].index = (int)i;
                t->link[i][i] = (struct topo_link){ TOPO_LEVEL_SELF, 0 };
                for (unsigned j = i + 1; j < 12; j++)
                        topo_set_link(t, i, j, (struct topo_link){ TOPO_LEVEL_SYS, (uint8_t)(66 - c++) });
        }
        for (unsigned k = 2; k <= 5; k++) {
                struct alloc_result r;
                assert_int_equal(pick(t, k, full(t), 0, &r), 0);
                unsigned best = 0;
                for (alloc_set_t s = 1; s <= full(t); s++)
                        if ((unsigned)__builtin_popcountll(s) == k && bf_ring(t, s) > best)
                                best = bf_ring(t, s);
                assert_int_equal(bf_ring(t, r.set), best);
                assert_int_equal(r.ring_bw, best);
        }
        /* every GPU: the ring needs the weakest links, whose thresholds come last */
        struct alloc_result r;
        assert_int_equal(pick(t, 12, full(t), 0, &r), 0);
        assert_int_equal(r.set, full(t));
        free(t);
}

/* A random PCIe tree (SYS > NODE > PHB > PXB > PIX from the root down, 2-3 branches per level)
 * whose smallest groups may be NVSwitch boards: ultrametric by construction. */
static void tree_split(struct topo *t, unsigned lo, unsigned hi, unsigned depth, uint64_t *seed) {
        static const uint8_t level[] = { TOPO_LEVEL_SYS, TOPO_LEVEL_NODE, TOPO_LEVEL_PHB, TOPO_LEVEL_PXB,
                                         TOPO_LEVEL_PIX };
        if (hi - lo < 2)
                return;
        if (depth == ELEMENTSOF(level)) {
                uint8_t nv = (uint8_t)(rng_next(seed) % 13);
                for (unsigned i = lo; i < hi; i++)
                        for (unsigned j = i + 1; j < hi; j++)
                                topo_set_link(t, i, j, (struct topo_link){ TOPO_LEVEL_PIX, nv });
                return;
        }
        unsigned cut[4] = { lo, 0, 0, hi }, nb = 2 + (unsigned)(rng_next(seed) % 2);
        if (hi - lo < nb)
                nb = hi - lo;
        for (unsigned b = 1; b < nb; b++)
                cut[b] = lo + (hi - lo) * b / nb + (unsigned)(rng_next(seed) % 2);
        cut[nb] = hi;
        for (unsigned b = 0; b < nb; b++)
                for (unsigned i = cut[b]; i < cut[b + 1]; i++)
                        for (unsigned j = cut[b + 1]; j < hi; j++)
                                topo_set_link(t, i, j, (struct topo_link){ level[depth], 0 });
        for (unsigned b = 0; b < nb; b++)
                tree_split(t, cut[b], cut[b + 1], depth + 1, seed);
}

static unsigned bf_min_pair(const struct topo *t, alloc_set_t s) {
        unsigned m = ~0u;
        for (unsigned i = 0; i < t->n_gpus; i++)
                for (unsigned j = i + 1; j < t->n_gpus; j++)
                        if ((s >> i & 1) && (s >> j & 1) && bf_bw(t, (int)i, (int)j) < m)
                                m = bf_bw(t, (int)i, (int)j);
        return m;
}

/* More than 16 free GPUs on tree-shaped nodes: the exact path for such nodes must give the best
 * ring and exactly the best pair total, with must-include GPUs too (brute force over all sets). */
static void test_tree_nodes_past_16(void **state) {
        (void)state;
        struct topo *t = malloc(sizeof *t);
        assert_non_null(t);
        uint64_t seed = 4242;
        for (unsigned round = 0; round < 6; round++) {
                unsigned n = 18 + round % 3;
                topo_init(t);
                t->n_gpus = n;
                for (unsigned i = 0; i < n; i++) {
                        t->gpu[i].index = (int)i;
                        t->link[i][i] = (struct topo_link){ TOPO_LEVEL_SELF, 0 };
                }
                tree_split(t, 0, n, 0, &seed);
                for (unsigned q = 0; q < 8; q++) {
                        alloc_set_t avail = full(t);
                        while ((unsigned)__builtin_popcountll(avail) > 17 + q % 2)
                                avail &= ~(1ULL << (rng_next(&seed) % n));
                        unsigned na = (unsigned)__builtin_popcountll(avail);
                        alloc_set_t must = (q % 3 == 0) ? (avail & -avail) : 0;
                        static const unsigned ks[] = { 2, 3, 4, 6 };
                        unsigned k = q % 2 ? na - 1 - q % 3 : ks[q % 4];
                        struct alloc_result r;
                        assert_int_equal(pick(t, k, avail, must, &r), 0);
                        assert_int_equal(r.set & must, must);
                        unsigned best = 0, bestp = 0;
                        bool any = false;
                        /* every k-subset of avail containing must */
                        for (alloc_set_t sub = avail;; sub = (sub - 1) & avail) {
                                if ((unsigned)__builtin_popcountll(sub) == k && (sub & must) == must) {
                                        unsigned rb = k <= 6 ? bf_ring(t, sub) : bf_min_pair(t, sub);
                                        unsigned pb = bf_pairs(t, sub);
                                        if (!any || rb > best || (rb == best && pb > bestp)) {
                                                best = rb;
                                                bestp = pb;
                                                any = true;
                                        }
                                }
                                if (!sub)
                                        break;
                        }
                        assert_true(any);
                        assert_int_equal(k <= 6 ? bf_ring(t, r.set) : bf_min_pair(t, r.set), best);
                        assert_int_equal(bf_pairs(t, r.set), bestp);
                }
        }
        free(t);
}

/* Enough GPUs free → an answer, on 64-GPU synthetic nodes too. */
static void test_never_fails_64(void **state) {
        (void)state;
        struct topo *t = malloc(sizeof *t);
        assert_non_null(t);
        uint64_t seed = 777;
        random_topo(t, 64, &seed, 3);
        for (unsigned q = 0; q < 25; q++) {
                alloc_set_t avail = rng_next(&seed) | rng_next(&seed);
                unsigned na = (unsigned)__builtin_popcountll(avail);
                unsigned k = 1 + (unsigned)(rng_next(&seed) % na);
                struct alloc_result r;
                assert_int_equal(pick(t, k, avail, 0, &r), 0);
                assert_int_equal(__builtin_popcountll(r.set), k);
                assert_int_equal(r.set & ~avail, 0);
        }
        free(t);
}

/* ---------- ring bandwidth by hand ---------- */

static void test_ring_bw_dgx1_by_hand(void **state) {
        (void)state;
        struct topo *t = load_new("dgx1-v100-hybrid-cube-mesh.topo");
        alloc_set_t s;
        /* the whole box: the NV2 links alone form the ring 0-3-2-1-5-6-7-4-0 */
        assert_int_equal(alloc_ring_bw(t, full(t)), 50);
        /* one quad: every 4-ring on {0,1,2,3} uses an NV1 link */
        assert_int_equal(alloc_set_parse("0-3", 8, &s), 0);
        assert_int_equal(alloc_ring_bw(t, s), 25);
        /* 0-3 NV2, 3-7 NV1, 7-4 NV2, 4-0 NV2 */
        assert_int_equal(alloc_set_parse("0,3,4,7", 8, &s), 0);
        assert_int_equal(alloc_ring_bw(t, s), 25);
        /* six of the eight: the NV2 links make a path, not a ring */
        assert_int_equal(alloc_set_parse("0-4,7", 8, &s), 0);
        assert_int_equal(alloc_ring_bw(t, s), 25);
        /* 0 and 5 only meet across the sockets */
        assert_int_equal(alloc_set_parse("0,5,6", 8, &s), 0);
        assert_int_equal(alloc_ring_bw(t, s), 5);
        assert_int_equal(alloc_set_parse("0,4", 8, &s), 0);
        assert_int_equal(alloc_ring_bw(t, s), 50);
        assert_int_equal(alloc_pair_total(t, s), 50);
        assert_int_equal(alloc_ring_bw(t, 1ULL << 3), 0);
        assert_int_equal(alloc_ring_bw(t, 0), 0);
        free(t);
}

static void test_pair_total_and_worst_link(void **state) {
        (void)state;
        struct topo *t = load_new("seed000-8gpu-pcie-2socket.topo");
        alloc_set_t s;
        assert_int_equal(alloc_set_parse("0,1,2", 8, &s), 0);
        assert_int_equal(alloc_pair_total(t, s), 12 + 8 + 8);
        struct topo_link w = alloc_worst_link(t, s);
        assert_int_equal(w.pcie, TOPO_LEVEL_PHB);
        assert_int_equal(alloc_set_parse("0,1,4", 8, &s), 0);
        assert_int_equal(alloc_worst_link(t, s).pcie, TOPO_LEVEL_SYS);
        assert_int_equal(alloc_worst_link(t, 1ULL << 2).pcie, TOPO_LEVEL_SELF);
        free(t);
}

/* 16 GPUs past the exact-DP limit: an NVLink ring (i, i+1 mod 16) over SYS; then two NVLink
 * cliques of 8 joined by one NVLink (no Hamiltonian NVLink ring: the bridge can be crossed once). */
static void test_ring_bw_past_dp_limit(void **state) {
        (void)state;
        struct topo *t = malloc(sizeof *t);
        assert_non_null(t);
        topo_init(t);
        t->n_gpus = 16;
        for (unsigned i = 0; i < 16; i++) {
                t->gpu[i].index = (int)i;
                t->link[i][i] = (struct topo_link){ TOPO_LEVEL_SELF, 0 };
                for (unsigned j = i + 1; j < 16; j++)
                        topo_set_link(t, i, j, (struct topo_link){ TOPO_LEVEL_SYS, 0 });
        }
        for (unsigned i = 0; i < 16; i++)
                topo_set_link(t, i, (i + 1) % 16, (struct topo_link){ TOPO_LEVEL_SYS, 1 });
        assert_int_equal(alloc_ring_bw(t, full(t)), 25);
        /* cut the ring once: a Hamiltonian path remains, no ring */
        topo_set_link(t, 15, 0, (struct topo_link){ TOPO_LEVEL_SYS, 0 });
        assert_int_equal(alloc_ring_bw(t, full(t)), 5);

        for (unsigned i = 0; i < 16; i++)
                for (unsigned j = i + 1; j < 16; j++)
                        topo_set_link(t, i, j, (struct topo_link){ TOPO_LEVEL_SYS, (uint8_t)(i / 8 == j / 8 ? 2 : 0) });
        topo_set_link(t, 7, 8, (struct topo_link){ TOPO_LEVEL_SYS, 2 });
        assert_int_equal(alloc_ring_bw(t, full(t)), 5);
        topo_set_link(t, 0, 15, (struct topo_link){ TOPO_LEVEL_SYS, 1 });
        assert_int_equal(alloc_ring_bw(t, full(t)), 25);
        free(t);
}

/* ---------- sets as text ---------- */

static void test_set_parse_valid(void **state) {
        (void)state;
        alloc_set_t s = 99;
        assert_int_equal(alloc_set_parse("", 8, &s), 0);
        assert_int_equal(s, 0);
        assert_int_equal(alloc_set_parse("0,1,3-5", 8, &s), 0);
        assert_int_equal(s, 0x3B);
        assert_int_equal(alloc_set_parse("7", 8, &s), 0);
        assert_int_equal(s, 0x80);
        assert_int_equal(alloc_set_parse("2-2", 8, &s), 0);
        assert_int_equal(s, 0x4);
        assert_int_equal(alloc_set_parse("0-63", 64, &s), 0);
        assert_int_equal(s, ~0ULL);
        assert_int_equal(alloc_set_parse("5,1,5", 8, &s), 0);
        assert_int_equal(s, 0x22);
}

static void test_set_parse_malformed(void **state) {
        (void)state;
        static const char *const bad[] = {
                "1,,2",
                "a",
                "3-1",
                "99",
                "-1",
                "8",
                "1,",
                ",1",
                "1-",
                "1--2",
                "1 2",
                " 1",
                "1-a",
                "0x1",
                "1.5",
                "4294967296",
                "99999999999999999999",
                "2-9",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                alloc_set_t s = 0x55;
                if (alloc_set_parse(bad[i], 8, &s) != -EINVAL)
                        fail_msg("\"%s\" was accepted", bad[i]);
                assert_int_equal(s, 0x55); /* untouched on error */
        }
        alloc_set_t s;
        assert_int_equal(alloc_set_parse("1", 65, &s), -EINVAL);
}

static void test_set_format(void **state) {
        (void)state;
        char buf[256];
        assert_string_equal(alloc_set_format(0, buf, sizeof buf), "");
        assert_string_equal(alloc_set_format(0x3B, buf, sizeof buf), "0,1,3,4,5");
        assert_string_equal(alloc_set_format(1ULL << 63, buf, sizeof buf), "63");
        /* truncation keeps whole numbers and a terminated string */
        char small[6];
        assert_string_equal(alloc_set_format(0x3B, small, sizeof small), "0,1,3");
        /* round trip */
        uint64_t seed = 42;
        for (int i = 0; i < 200; i++) {
                alloc_set_t s = rng_next(&seed), back;
                assert_int_equal(alloc_set_parse(alloc_set_format(s, buf, sizeof buf), 64, &back), 0);
                assert_int_equal(back, s);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_quality_seed000),
                cmocka_unit_test(test_quality_seed004),
                cmocka_unit_test(test_quality_pcie8),
                cmocka_unit_test(test_quality_dgx1),
                cmocka_unit_test(test_quality_dgxa100),
                cmocka_unit_test(test_single_leaves_rest_best_connected),
                cmocka_unit_test(test_single_fills_broken_pair),
                cmocka_unit_test(test_seed_case),
                cmocka_unit_test(test_must_include_honoured),
                cmocka_unit_test(test_floor_honoured),
                cmocka_unit_test(test_floor_out_of_reach),
                cmocka_unit_test(test_error_count_zero),
                cmocka_unit_test(test_error_too_many),
                cmocka_unit_test(test_error_must_include_unknown),
                cmocka_unit_test(test_error_must_include_not_available),
                cmocka_unit_test(test_error_more_must_than_count),
                cmocka_unit_test(test_error_available_unknown),
                cmocka_unit_test(test_deterministic),
                cmocka_unit_test(test_ring_bw_random_graphs),
                cmocka_unit_test(test_pick_random_graphs),
                cmocka_unit_test(test_many_distinct_bandwidths),
                cmocka_unit_test(test_tree_nodes_past_16),
                cmocka_unit_test(test_never_fails_64),
                cmocka_unit_test(test_ring_bw_dgx1_by_hand),
                cmocka_unit_test(test_pair_total_and_worst_link),
                cmocka_unit_test(test_ring_bw_past_dp_limit),
                cmocka_unit_test(test_set_parse_valid),
                cmocka_unit_test(test_set_parse_malformed),
                cmocka_unit_test(test_set_format),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
