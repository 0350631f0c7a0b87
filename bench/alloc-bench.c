/* SPDX-License-Identifier: Apache-2.0 */
/*
 * alloc-bench — allocation quality (single requests and churn) and decision time of the
 * gpuslice allocator against baselines: random, first-fit, greedy best-now, NVIDIA's
 * partition-based best-effort policy (a faithful re-implementation of its enumeration, capped),
 * and an exhaustive myopic best-now (<= 16 GPUs). Prints markdown tables on stdout;
 * bench/run.sh puts them into docs/BENCHMARKS.md.
 *
 * Usage: alloc-bench [--quick] [--topologies DIR] [--only NAME] [--churn-only] [--churn-scale N] [--seed N]
 *
 * Benchmark code, not product code: it may allocate and print, and it measures wall time.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc/alloc.h"
#include "topo/topo.h"
#include "util/util.h"

#ifndef GPUSLICE_TOPO_DIR
#define GPUSLICE_TOPO_DIR "tests/data/topologies"
#endif

static bool quick;
static FILE *dout; /* the detailed tables; the summary goes first on stdout */

/* Collected for the summary. */
#define MAXT 16
static struct {
        char name[64];
        unsigned n;
        double single_opt[6]; /* ring optimal %, by policy; -1 = not run */
        double churn[6];      /* mean ring / empty-node best, by policy; -1 = not run */
        double tmax;          /* worst decision time of gpuslice, µs */
        unsigned tmax_k;
} summary[MAXT];
static unsigned nsum;

static unsigned sum_slot(const char *name, unsigned n) {
        for (unsigned i = 0; i < nsum; i++)
                if (strcmp(summary[i].name, name) == 0)
                        return i;
        snprintf(summary[nsum].name, sizeof summary[nsum].name, "%s", name);
        summary[nsum].n = n;
        for (int p = 0; p < 6; p++)
                summary[nsum].single_opt[p] = summary[nsum].churn[p] = -1;
        return nsum++;
}
static const char *only;         /* --only SUBSTRING: just the topologies whose name contains it */
static unsigned churn_scale = 1; /* --churn-scale N: N times the churn events */
static bool churn_only;
static unsigned seed_base = 1000; /* --seed N: first churn seed */

/* ---------- small helpers ---------- */

static uint64_t rng_next(uint64_t *s) {
        /* splitmix64: every seed is a fine seed */
        uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
}

static unsigned popc(alloc_set_t s) {
        return (unsigned)__builtin_popcountll(s);
}

static alloc_set_t full_set(const struct topo *t) {
        return t->n_gpus == 64 ? ~0ULL : (1ULL << t->n_gpus) - 1;
}

static double now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* CPU time of this thread: what a decision costs, without the time other processes on a shared
 * machine take the core away. */
static double cpu_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static unsigned bw(const struct topo *t, unsigned a, unsigned b) {
        return topo_link_bw(t->link[a][b]);
}

/* ---------- topologies ---------- */

struct bench_topo {
        char name[64];
        char what[96];
        struct topo *t;
};

static void synth_init(struct topo *t, unsigned n) {
        topo_init(t);
        t->n_gpus = n;
        for (unsigned i = 0; i < n; i++) {
                t->gpu[i].index = (int)i;
                t->link[i][i] = (struct topo_link){ TOPO_LEVEL_SELF, 0 };
        }
}

/* PCIe tree: pairs on a switch (PIX), quads under one switch tree (PXB), groups on a host
 * bridge (PHB), host bridges of a socket (NODE), sockets (SYS). Sizes are group widths. */
static void synth_pcie(struct topo *t, unsigned n, unsigned pix, unsigned pxb, unsigned phb, unsigned node) {
        synth_init(t, n);
        for (unsigned i = 0; i < n; i++)
                for (unsigned j = i + 1; j < n; j++) {
                        uint8_t l = TOPO_LEVEL_SYS;
                        if (i / pix == j / pix)
                                l = TOPO_LEVEL_PIX;
                        else if (i / pxb == j / pxb)
                                l = TOPO_LEVEL_PXB;
                        else if (i / phb == j / phb)
                                l = TOPO_LEVEL_PHB;
                        else if (i / node == j / node)
                                l = TOPO_LEVEL_NODE;
                        topo_set_link(t, i, j, (struct topo_link){ l, 0 });
                }
}

/* Boards of 8 GPUs behind NVSwitch (NV# between every pair of a board), boards on a PCIe tree. */
static void synth_nvswitch(struct topo *t, unsigned n, unsigned per_board, uint8_t nv) {
        synth_pcie(t, n, 2, 4, per_board, 2 * per_board);
        for (unsigned i = 0; i < n; i++)
                for (unsigned j = i + 1; j < n; j++)
                        if (i / per_board == j / per_board)
                                t->link[i][j].nvlinks = t->link[j][i].nvlinks = nv;
        t->nvswitch = true;
}

/* Boards of 8 V100 in the DGX-1 hybrid cube mesh; GPUs of different boards meet over SYS. */
static void synth_dgx1(struct topo *t, unsigned n) {
        static const uint8_t mesh[8][8] = {
                { 0, 1, 1, 2, 2, 0, 0, 0 }, { 1, 0, 2, 1, 0, 2, 0, 0 }, { 1, 2, 0, 2, 0, 0, 1, 0 },
                { 2, 1, 2, 0, 0, 0, 0, 1 }, { 2, 0, 0, 0, 0, 1, 1, 2 }, { 0, 2, 0, 0, 1, 0, 2, 1 },
                { 0, 0, 1, 0, 1, 2, 0, 2 }, { 0, 0, 0, 1, 2, 1, 2, 0 },
        };
        synth_init(t, n);
        for (unsigned i = 0; i < n; i++)
                for (unsigned j = i + 1; j < n; j++) {
                        struct topo_link l = { TOPO_LEVEL_SYS, 0 };
                        if (i / 8 == j / 8)
                                l.nvlinks = mesh[i % 8][j % 8];
                        topo_set_link(t, i, j, l);
                }
}

static int load_reference(const char *dir, const char *file, struct bench_topo *bt) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        char *text = NULL;
        size_t len = 0;
        int r = read_file(path, 1 << 20, &text, &len);
        if (r < 0) {
                fprintf(stderr, "alloc-bench: cannot read %s: %s\n", path, strerror(-r));
                return r;
        }
        struct gs_error e = { 0 };
        bt->t = malloc(sizeof *bt->t);
        if (!bt->t) {
                free(text);
                return -ENOMEM;
        }
        r = topo_parse(text, len, bt->t, &e);
        free(text);
        if (r < 0) {
                fprintf(stderr, "alloc-bench: %s: %s\n", path, e.message);
                free(bt->t);
                return r;
        }
        snprintf(bt->name, sizeof bt->name, "%.*s", (int)(strlen(file) - 5), file);
        snprintf(bt->what, sizeof bt->what, "reference, %u GPUs", bt->t->n_gpus);
        return 0;
}

/* ---------- policies ---------- */

struct pctx {
        uint64_t rng;         /* random policy */
        unsigned long be_cap; /* best-effort: combinations per decision before giving up */
        unsigned long be_gave_up, be_invalid, be_calls;
        bool last_unproven; /* gpuslice's last answer: search budget reached */
};

typedef int (*policy_fn)(struct pctx *p, const struct topo *t, alloc_set_t avail, unsigned k, alloc_set_t *ret);

static int pol_ours(struct pctx *p, const struct topo *t, alloc_set_t avail, unsigned k, alloc_set_t *ret) {
        struct alloc_request req = { .count = k, .available = avail };
        struct alloc_result r;
        struct gs_error err = { 0 };
        int rc = alloc_pick_gpus(t, &req, &r, &err);
        if (rc < 0) {
                fprintf(stderr, "alloc-bench: ours failed: %s\n", err.message);
                return rc;
        }
        p->last_unproven = strstr(r.why, "not proven") != NULL;
        *ret = r.set;
        return 0;
}

static int pol_random(struct pctx *p, const struct topo *t, alloc_set_t avail, unsigned k, alloc_set_t *ret) {
        (void)t;
        alloc_set_t s = 0;
        for (unsigned i = 0; i < k; i++) {
                unsigned left = popc(avail & ~s);
                unsigned pick = (unsigned)(rng_next(&p->rng) % left);
                alloc_set_t m = avail & ~s;
                while (pick--)
                        m &= m - 1;
                s |= m & -m;
        }
        *ret = s;
        return 0;
}

static int pol_firstfit(struct pctx *p, const struct topo *t, alloc_set_t avail, unsigned k, alloc_set_t *ret) {
        (void)p;
        (void)t;
        alloc_set_t s = 0, m = avail;
        for (unsigned i = 0; i < k; i++) {
                s |= m & -m;
                m &= m - 1;
        }
        *ret = s;
        return 0;
}

/* Greedy best-now: from every free GPU, grow by the GPU whose weakest link into the set is best
 * (then most bandwidth into the set); keep the grown set with the best ring, then pair total. */
static int pol_greedy(struct pctx *p, const struct topo *t, alloc_set_t avail, unsigned k, alloc_set_t *ret) {
        (void)p;
        alloc_set_t best = 0;
        unsigned best_ring = 0, best_pair = 0;
        for (alloc_set_t st = avail; st; st &= st - 1) {
                alloc_set_t s = st & -st;
                while (popc(s) < k) {
                        int pick = -1;
                        unsigned pmin = 0, psum = 0;
                        for (alloc_set_t m = avail & ~s; m; m &= m - 1) {
                                unsigned v = (unsigned)__builtin_ctzll(m), mn = ~0u, sum = 0;
                                for (alloc_set_t q = s; q; q &= q - 1) {
                                        unsigned b = bw(t, v, (unsigned)__builtin_ctzll(q));
                                        mn = b < mn ? b : mn;
                                        sum += b;
                                }
                                if (pick < 0 || mn > pmin || (mn == pmin && sum > psum)) {
                                        pick = (int)v;
                                        pmin = mn;
                                        psum = sum;
                                }
                        }
                        s |= 1ULL << pick;
                }
                unsigned r = alloc_ring_bw(t, s), pt = alloc_pair_total(t, s);
                if (!best || r > best_ring || (r == best_ring && pt > best_pair)) {
                        best = s;
                        best_ring = r;
                        best_pair = pt;
                }
        }
        *ret = best;
        return 0;
}

/* Exhaustive myopic best-now: the best (ring, pair total) set, ties to the lowest indices. */
static int pol_bestnow(struct pctx *p, const struct topo *t, alloc_set_t avail, unsigned k, alloc_set_t *ret) {
        (void)p;
        int idx[64];
        unsigned n = 0;
        for (alloc_set_t m = avail; m; m &= m - 1)
                idx[n++] = __builtin_ctzll(m);
        unsigned c[64];
        for (unsigned i = 0; i < k; i++)
                c[i] = i;
        alloc_set_t best = 0;
        unsigned br = 0, bp = 0;
        for (;;) {
                alloc_set_t s = 0;
                for (unsigned i = 0; i < k; i++)
                        s |= 1ULL << idx[c[i]];
                unsigned r = alloc_ring_bw(t, s), pt = alloc_pair_total(t, s);
                if (!best || r > br || (r == br && pt > bp)) {
                        best = s;
                        br = r;
                        bp = pt;
                }
                int i = (int)k - 1;
                while (i >= 0 && c[i] == n - k + (unsigned)i)
                        i--;
                if (i < 0)
                        break;
                c[i]++;
                for (unsigned j = (unsigned)i + 1; j < k; j++)
                        c[j] = c[j - 1] + 1;
        }
        *ret = best;
        return 0;
}

/*
 * NVIDIA's best-effort policy (go-gpuallocator, besteffort_policy.go), re-implemented: pad the
 * free list with empty slots to a multiple of k; enumerate every partition into sets of size k
 * (each set holds the first remaining device plus k-1 later ones, in combination order; sets
 * with some but not all of the padding are skipped); keep the first partition with the highest
 * total pair score; return its highest-scoring set. Pair score: PCIe SYS 10, NODE 20, PHB 30,
 * PXB 40, PIX 50, plus 100 per NVLink. The enumeration is capped at be_cap combinations per
 * decision: past it the policy "gives up" and we use the best partition seen so far.
 */
struct be {
        const struct topo *t;
        unsigned k, padding;
        int score[65][65]; /* index 64 = padding */
        unsigned long steps, cap;
        bool gave_up;
        bool have;
        long best_score;
        unsigned nsets, best_nsets;
        int sets[64][64]; /* current partition: sets of k device slots */
        int best_sets[64][64];
};

static int be_pair_score(struct topo_link l) {
        static const int pcie[] = { [TOPO_LEVEL_SYS] = 10,
                                    [TOPO_LEVEL_NODE] = 20,
                                    [TOPO_LEVEL_PHB] = 30,
                                    [TOPO_LEVEL_PXB] = 40,
                                    [TOPO_LEVEL_PIX] = 50 };
        int s = l.pcie < ELEMENTSOF(pcie) ? pcie[l.pcie] : 0;
        return s + 100 * l.nvlinks;
}

static long be_set_score(const struct be *b, const int *set) {
        long s = 0;
        for (unsigned i = 0; i < b->k; i++)
                for (unsigned j = i + 1; j < b->k; j++)
                        s += b->score[set[i]][set[j]];
        return s;
}

static void be_iterate(struct be *b, const int *dev, unsigned n, long acc) {
        if (b->gave_up)
                return;
        if (n == b->k) {
                memcpy(b->sets[b->nsets], dev, n * sizeof *dev);
                long sc = acc + be_set_score(b, dev);
                /* every partition has a set without padding (no must-include in this bench) */
                if (!b->have || sc > b->best_score) {
                        b->have = true;
                        b->best_score = sc;
                        b->best_nsets = b->nsets + 1;
                        memcpy(b->best_sets, b->sets, sizeof(b->sets[0]) * (b->nsets + 1));
                }
                return;
        }
        unsigned r = b->k - 1, m = n - 1;
        unsigned c[64];
        for (unsigned i = 0; i < r; i++)
                c[i] = i;
        for (;;) {
                if (++b->steps > b->cap) {
                        b->gave_up = true;
                        return;
                }
                int *set = b->sets[b->nsets];
                set[0] = dev[0];
                unsigned pad = dev[0] == 64;
                for (unsigned i = 0; i < r; i++) {
                        set[i + 1] = dev[1 + c[i]];
                        pad += dev[1 + c[i]] == 64;
                }
                if (pad == 0 || pad == b->padding) {
                        int rest[128];
                        unsigned nr = 0, ci = 0;
                        for (unsigned i = 0; i < m; i++) {
                                if (ci < r && c[ci] == i) {
                                        ci++;
                                        continue;
                                }
                                rest[nr++] = dev[1 + i];
                        }
                        long sc = be_set_score(b, set);
                        b->nsets++;
                        be_iterate(b, rest, nr, acc + sc);
                        b->nsets--;
                        if (b->gave_up)
                                return;
                }
                int i = (int)r - 1;
                while (i >= 0 && c[i] == m - r + (unsigned)i)
                        i--;
                if (i < 0)
                        break;
                c[i]++;
                for (unsigned j = (unsigned)i + 1; j < r; j++)
                        c[j] = c[j - 1] + 1;
        }
}

static int pol_besteffort(struct pctx *p, const struct topo *t, alloc_set_t avail, unsigned k, alloc_set_t *ret) {
        static struct be b; /* large; the bench is single-threaded */
        memset(&b, 0, sizeof b);
        b.t = t;
        b.k = k;
        b.cap = p->be_cap;
        p->be_calls++;
        for (unsigned i = 0; i < 65; i++)
                for (unsigned j = 0; j < 65; j++)
                        b.score[i][j] = (i < 64 && j < 64 && i != j && i < t->n_gpus && j < t->n_gpus)
                                                ? be_pair_score(t->link[i][j])
                                                : 0;
        int dev[128]; /* free GPUs plus up to k-1 padding slots */
        unsigned n = 0;
        for (alloc_set_t m = avail; m; m &= m - 1)
                dev[n++] = __builtin_ctzll(m);
        if (k == 1) { /* the policy's shortcut: every single device is its own partition; first wins */
                *ret = 1ULL << dev[0];
                return 0;
        }
        while (n % k)
                dev[n++] = 64;
        b.padding = n - popc(avail);
        be_iterate(&b, dev, n, 0);
        if (b.gave_up)
                p->be_gave_up++;
        alloc_set_t best = 0;
        long bs = -1;
        bool best_padded = false;
        for (unsigned i = 0; i < b.best_nsets; i++) {
                long sc = be_set_score(&b, b.best_sets[i]);
                if (sc > bs) {
                        bs = sc;
                        best = 0;
                        best_padded = false;
                        for (unsigned j = 0; j < k; j++) {
                                if (b.best_sets[i][j] == 64)
                                        best_padded = true;
                                else
                                        best |= 1ULL << b.best_sets[i][j];
                        }
                }
        }
        if (!b.have || best_padded || popc(best) != k) {
                /* The real policy would hand back a set with empty slots (or nothing): count it and
                 * fall back to first-fit, as a device plugin would have to. */
                p->be_invalid++;
                return pol_firstfit(p, t, avail, k, ret);
        }
        *ret = best;
        return 0;
}

enum {
        P_OURS,
        P_RANDOM,
        P_FIRSTFIT,
        P_GREEDY,
        P_BESTEFFORT,
        P_BESTNOW,
        P_MAX
};
static const char *const pol_name[P_MAX] = { "gpuslice",        "random",      "first-fit",
                                             "greedy best-now", "best-effort", "exhaustive best-now" };
static const policy_fn pol_fn[P_MAX] = { pol_ours, pol_random, pol_firstfit, pol_greedy, pol_besteffort, pol_bestnow };

static bool pol_applies(int p, const struct topo *t) {
        if (p == P_BESTNOW)
                return t->n_gpus <= 16;
        return true;
}

/* ---------- single requests ---------- */

struct qstat {
        unsigned long n, ring_opt;
        double ring_ratio, pair_ratio, worst_ratio;
};

static void single_quality(const struct bench_topo *bt) {
        const struct topo *t = bt->t;
        struct pctx pc = { .rng = 1, .be_cap = quick ? 200000 : 1000000 };
        struct qstat q[P_MAX] = { 0 };
        for (int p = 0; p < P_MAX; p++)
                q[p].worst_ratio = 1.0;
        uint64_t seed = 0xC0FFEE;
        unsigned samples = t->n_gpus <= 8 ? (1u << t->n_gpus) : (quick ? 40 : 150);
        unsigned long truth_exhaustive = 0, truth_known = 0;
        for (unsigned sI = 0; sI < samples; sI++) {
                alloc_set_t avail;
                if (t->n_gpus <= 8)
                        avail = sI;
                else {
                        /* occupancy from 0 % to ~90 % */
                        avail = full_set(t);
                        unsigned busy = (unsigned)(rng_next(&seed) % (t->n_gpus * 9 / 10 + 1));
                        for (unsigned i = 0; i < busy; i++)
                                avail &= ~(1ULL << (rng_next(&seed) % t->n_gpus));
                }
                unsigned na = popc(avail);
                for (unsigned k = 2; k <= na; k++) {
                        if (t->n_gpus > 8 && k > 8 && k != na)
                                continue; /* sizes people ask for */
                        alloc_set_t pick[P_MAX] = { 0 };
                        unsigned ring[P_MAX] = { 0 }, pairs[P_MAX] = { 0 };
                        bool have[P_MAX] = { false };
                        for (int p = 0; p < P_MAX; p++) {
                                if (!pol_applies(p, t))
                                        continue;
                                if (p == P_BESTEFFORT && t->n_gpus > 16)
                                        continue;
                                if (pol_fn[p](&pc, t, avail, k, &pick[p]) < 0)
                                        continue;
                                have[p] = true;
                                ring[p] = alloc_ring_bw(t, pick[p]);
                                pairs[p] = alloc_pair_total(t, pick[p]);
                        }
                        /* truth: the exhaustive best-now where it runs, else the best any policy found */
                        unsigned best_ring = 0, best_pair = 0;
                        if (have[P_BESTNOW]) {
                                best_ring = ring[P_BESTNOW];
                                best_pair = pairs[P_BESTNOW];
                                truth_exhaustive++;
                        } else {
                                for (int p = 0; p < P_MAX; p++)
                                        if (have[p] &&
                                            (ring[p] > best_ring || (ring[p] == best_ring && pairs[p] > best_pair))) {
                                                best_ring = ring[p];
                                                best_pair = pairs[p];
                                        }
                                truth_known++;
                        }
                        for (int p = 0; p < P_MAX; p++) {
                                if (!have[p])
                                        continue;
                                double rr = best_ring ? (double)ring[p] / best_ring : 1.0;
                                q[p].n++;
                                q[p].ring_opt += ring[p] >= best_ring;
                                q[p].ring_ratio += rr;
                                q[p].pair_ratio += best_pair ? (double)pairs[p] / best_pair : 1.0;
                                if (rr < q[p].worst_ratio)
                                        q[p].worst_ratio = rr;
                        }
                }
        }
        fprintf(dout, "\n#### %s (%s)\n\n", bt->name, bt->what);
        fprintf(dout, "%s: %s, every size from 2 up. Reference for the ratios: %s.\n\n",
                t->n_gpus <= 8 ? "Requests" : "Requests",
                t->n_gpus <= 8 ? "every free subset" : "random free subsets (0-90 % busy), sizes 2-8 and all-free",
                truth_known ? "the best ring any policy found (no exhaustive search at this size)"
                            : "exhaustive search over every set");
        fprintf(dout,
                "| policy | requests | ring optimal | mean ring / best | worst ring / best | mean pairs / best |\n");
        fprintf(dout, "|---|---:|---:|---:|---:|---:|\n");
        unsigned si = sum_slot(bt->name, t->n_gpus);
        for (int p = 0; p < P_MAX; p++) {
                if (!q[p].n)
                        continue;
                summary[si].single_opt[p] = 100.0 * q[p].ring_opt / q[p].n;
                fprintf(dout, "| %s | %lu | %.1f %% | %.3f | %.2f | %.3f |\n", pol_name[p], q[p].n,
                        100.0 * q[p].ring_opt / q[p].n, q[p].ring_ratio / q[p].n, q[p].worst_ratio,
                        q[p].pair_ratio / q[p].n);
        }
        if (pc.be_gave_up)
                fprintf(dout,
                        "\nbest-effort gave up (cap %lu combinations) on %lu of %lu decisions; it then used the best "
                        "partition seen so far.\n",
                        pc.be_cap, pc.be_gave_up, pc.be_calls);
        if (pc.be_invalid)
                fprintf(dout,
                        "\nbest-effort returned a set with empty padding slots %lu times (counted with a first-fit "
                        "fallback).\n",
                        pc.be_invalid);
}

/* ---------- churn ---------- */

struct job {
        unsigned size;
        alloc_set_t set[P_MAX];
};

struct cstat {
        unsigned long jobs;
        double ratio;
        unsigned long at_best;
        double us;
};

static void churn(const struct bench_topo *bt, unsigned events, unsigned seeds, bool with_slow) {
        const struct topo *t = bt->t;
        static const unsigned sizes[] = { 1, 2, 4, 8 };
        static const unsigned weight[] = { 40, 30, 20, 10 };
        struct pctx pc = { .rng = 7, .be_cap = quick ? 100000 : 300000 };
        struct cstat cs[P_MAX] = { 0 };
        unsigned empty_best[65] = { 0 };
        for (unsigned k = 2; k <= t->n_gpus && k <= 64; k++) {
                alloc_set_t s;
                if (pol_ours(&pc, t, full_set(t), k, &s) == 0)
                        empty_best[k] = alloc_ring_bw(t, s);
        }
        bool run[P_MAX];
        for (int p = 0; p < P_MAX; p++)
                run[p] = pol_applies(p, t) && (with_slow || (p != P_BESTEFFORT && p != P_BESTNOW));
        unsigned long accepted = 0, rejected = 0;
        for (unsigned sd = 0; sd < seeds; sd++) {
                uint64_t rng = seed_base + sd;
                struct job *jobs = calloc(t->n_gpus, sizeof *jobs);
                unsigned njobs = 0, used = 0;
                alloc_set_t freeset[P_MAX];
                for (int p = 0; p < P_MAX; p++)
                        freeset[p] = full_set(t);
                for (unsigned ev = 0; ev < events; ev++) {
                        /* depart with probability 0.45 (if anything runs), else arrive */
                        if (njobs && rng_next(&rng) % 100 < 45) {
                                unsigned j = (unsigned)(rng_next(&rng) % njobs);
                                for (int p = 0; p < P_MAX; p++)
                                        freeset[p] |= jobs[j].set[p];
                                used -= jobs[j].size;
                                jobs[j] = jobs[--njobs];
                                continue;
                        }
                        unsigned w = (unsigned)(rng_next(&rng) % 100), si = 0, acc = weight[0];
                        while (w >= acc)
                                acc += weight[++si];
                        unsigned k = sizes[si];
                        if (k > t->n_gpus || used + k > t->n_gpus) {
                                rejected++;
                                continue;
                        }
                        accepted++;
                        struct job *jb = &jobs[njobs++];
                        jb->size = k;
                        used += k;
                        for (int p = 0; p < P_MAX; p++) {
                                if (!run[p]) {
                                        jb->set[p] = 0;
                                        continue;
                                }
                                double t0 = now_us();
                                alloc_set_t s;
                                if (pol_fn[p](&pc, t, freeset[p], k, &s) < 0) {
                                        fprintf(stderr, "alloc-bench: %s failed\n", pol_name[p]);
                                        exit(1);
                                }
                                cs[p].us += now_us() - t0;
                                if ((s & ~freeset[p]) || popc(s) != k) {
                                        fprintf(stderr, "alloc-bench: %s returned a bad set\n", pol_name[p]);
                                        exit(1);
                                }
                                jb->set[p] = s;
                                freeset[p] &= ~s;
                                if (k >= 2 && empty_best[k]) {
                                        unsigned r = alloc_ring_bw(t, s);
                                        cs[p].jobs++;
                                        cs[p].ratio += (double)r / empty_best[k];
                                        cs[p].at_best += r >= empty_best[k];
                                }
                        }
                }
                free(jobs);
        }
        fprintf(dout, "\n#### %s (%s)\n\n", bt->name, bt->what);
        fprintf(dout,
                "%u seeds x %u events (arrivals of 1/2/4/8-GPU jobs weighted 40/30/20/10, departures 45 %%); "
                "%lu jobs placed, %lu turned away for lack of free GPUs (the same for every policy).\n\n",
                seeds, events, accepted, rejected);
        fprintf(dout, "| policy | multi-GPU jobs | mean ring / empty-node best | jobs at empty-node best | gpuslice / "
                      "policy | "
                      "mean decision |\n");
        fprintf(dout, "|---|---:|---:|---:|---:|---:|\n");
        double ours = cs[P_OURS].jobs ? cs[P_OURS].ratio / cs[P_OURS].jobs : 0;
        unsigned si = sum_slot(bt->name, t->n_gpus);
        for (int p = 0; p < P_MAX; p++) {
                if (!run[p] || !cs[p].jobs)
                        continue;
                double m = cs[p].ratio / cs[p].jobs;
                summary[si].churn[p] = m;
                unsigned long calls = accepted; /* every policy decides every placed job */
                fprintf(dout, "| %s | %lu | %.4f | %.1f %% | %.3f | %.1f µs |\n", pol_name[p], cs[p].jobs, m,
                        100.0 * cs[p].at_best / cs[p].jobs, m > 0 ? ours / m : 0.0, cs[p].us / (double)calls);
        }
        if (run[P_BESTEFFORT] && pc.be_gave_up)
                fprintf(dout,
                        "\nbest-effort gave up (cap %lu combinations) on %lu of %lu decisions and used the best "
                        "partition seen so far.\n",
                        pc.be_cap, pc.be_gave_up, pc.be_calls);
        if (run[P_BESTEFFORT] && pc.be_invalid)
                fprintf(dout, "\nbest-effort's answer held empty padding slots %lu times (first-fit fallback).\n",
                        pc.be_invalid);
        if (!with_slow)
                fprintf(dout, "\nbest-effort and the exhaustive best-now are left out at this size: one decision takes "
                              "longer than the whole run (see the timing table).\n");
}

/* ---------- decision time ---------- */

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static void timing_row(const struct bench_topo *bt, unsigned k, double budget_us) {
        const struct topo *t = bt->t;
        unsigned samples = quick ? 60 : 300;
        double *us = calloc(samples, sizeof *us);
        double wall_max = 0;
        unsigned unproven = 0;
        uint64_t seed = 99 + k;
        struct pctx pc = { .rng = 3, .be_cap = quick ? 100000 : 1000000 };
        unsigned n = 0;
        double be_us = 0, gr_us = 0;
        unsigned be_n = 0, gr_n = 0;
        unsigned long gave0 = 0;
        for (unsigned s = 0; s < samples; s++) {
                alloc_set_t avail = full_set(t);
                /* half of the samples on an empty node, half with a random part busy */
                if (s % 2) {
                        unsigned spare = t->n_gpus - k;
                        unsigned busy = spare ? (unsigned)(rng_next(&seed) % (spare + 1)) : 0;
                        while (popc(full_set(t) & ~avail) < busy)
                                avail &= ~(1ULL << (rng_next(&seed) % t->n_gpus));
                }
                alloc_set_t out;
                double w0 = now_us();
                double t0 = cpu_us();
                if (pol_ours(&pc, t, avail, k, &out) < 0)
                        continue;
                us[n++] = cpu_us() - t0;
                unproven += pc.last_unproven;
                if (now_us() - w0 > wall_max)
                        wall_max = now_us() - w0;
                if (s < 20) {
                        t0 = now_us();
                        pol_greedy(&pc, t, avail, k, &out);
                        gr_us += now_us() - t0;
                        gr_n++;
                }
                if (s == 0) {
                        /* best-effort once, on the empty node, with a higher cap */
                        pc.be_cap = quick ? 3000000 : 20000000;
                        gave0 = pc.be_gave_up;
                        t0 = cpu_us();
                        pol_besteffort(&pc, t, avail, k, &out);
                        be_us = cpu_us() - t0;
                        be_n = pc.be_gave_up == gave0;
                }
        }
        qsort(us, n, sizeof *us, cmp_double);
        unsigned si = sum_slot(bt->name, t->n_gpus);
        if (us[n - 1] > summary[si].tmax) {
                summary[si].tmax = us[n - 1];
                summary[si].tmax_k = k;
        }
        double p50 = us[n / 2], p99 = us[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1], mx = us[n - 1];
        char be[48];
        if (be_n && be_us >= 1000)
                snprintf(be, sizeof be, "%.1f ms", be_us / 1000);
        else if (be_n)
                snprintf(be, sizeof be, "%.0f µs", be_us);
        else
                snprintf(be, sizeof be, "gave up after %.0f ms", be_us / 1000);
        fprintf(dout, "| %s | %u | %u | %.1f | %.1f | %.1f | %.1f | %.0f %% | %s | %.1f | %s |\n", bt->name, t->n_gpus,
                k, p50, p99, mx, wall_max, 100.0 * (n - unproven) / n, mx <= budget_us ? "yes" : "**no**",
                gr_n ? gr_us / gr_n : 0.0, be);
        free(us);
}

/* ---------- summary ---------- */

static void print_cell(double v, int decimals, const char *unit) {
        if (v < 0)
                printf(" – |");
        else
                printf(" %.*f%s |", decimals, v, unit);
}

static void print_summary(void) {
        printf("### Allocator: summary\n\n");
        printf("Single requests — share of requests whose ring bandwidth equals the best achievable from that "
               "free set (exhaustive search up to 16 GPUs; at 64, the best any policy found):\n\n");
        printf("| topology | GPUs | gpuslice | greedy best-now | best-effort | first-fit | random |\n");
        printf("|---|---:|---:|---:|---:|---:|---:|\n");
        static const int order[] = { P_OURS, P_GREEDY, P_BESTEFFORT, P_FIRSTFIT, P_RANDOM };
        for (unsigned i = 0; i < nsum; i++) {
                if (summary[i].single_opt[P_OURS] < 0)
                        continue;
                printf("| %s | %u |", summary[i].name, summary[i].n);
                for (size_t j = 0; j < ELEMENTSOF(order); j++)
                        print_cell(summary[i].single_opt[order[j]], 1, " %");
                printf("\n");
        }
        printf("\nChurn — mean over multi-GPU jobs of ring bandwidth / the empty node's best for that size, and "
               "gpuslice's mean divided by each baseline's (>= 1.000: gpuslice at least as good):\n\n");
        printf("| topology | GPUs | gpuslice | greedy best-now | best-effort | first-fit | random | ÷ greedy | "
               "÷ best-effort |\n");
        printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (unsigned i = 0; i < nsum; i++) {
                if (summary[i].churn[P_OURS] < 0)
                        continue;
                printf("| %s | %u |", summary[i].name, summary[i].n);
                for (size_t j = 0; j < ELEMENTSOF(order); j++)
                        print_cell(summary[i].churn[order[j]], 4, "");
                double o = summary[i].churn[P_OURS];
                print_cell(summary[i].churn[P_GREEDY] > 0 ? o / summary[i].churn[P_GREEDY] : -1, 3, "");
                print_cell(summary[i].churn[P_BESTEFFORT] > 0 ? o / summary[i].churn[P_BESTEFFORT] : -1, 3, "");
                printf("\n");
        }
        bool any_time = false;
        for (unsigned i = 0; i < nsum; i++)
                any_time |= summary[i].tmax > 0;
        if (!any_time)
                return;
        printf("\nDecision time — slowest gpuslice decision seen per topology (all sizes), against the budget:\n\n");
        printf("| topology | GPUs | slowest decision | at k | budget | within |\n");
        printf("|---|---:|---:|---:|---:|---|\n");
        for (unsigned i = 0; i < nsum; i++) {
                double budget = summary[i].n <= 8 ? 50 : summary[i].n <= 16 ? 1000 : 10000;
                printf("| %s | %u | %.1f µs | %u | %.0f µs | %s |\n", summary[i].name, summary[i].n, summary[i].tmax,
                       summary[i].tmax_k, budget, summary[i].tmax <= budget ? "yes" : "**no**");
        }
        printf("\n");
}

/* ---------- main ---------- */

int main(int argc, char **argv) {
        const char *topologies = GPUSLICE_TOPO_DIR;
        for (int i = 1; i < argc; i++) {
                if (streq(argv[i], "--quick"))
                        quick = true;
                else if (streq(argv[i], "--topologies") && i + 1 < argc)
                        topologies = argv[++i];
                else if (streq(argv[i], "--only") && i + 1 < argc)
                        only = argv[++i];
                else if (streq(argv[i], "--seed") && i + 1 < argc)
                        seed_base = (unsigned)strtoul(argv[++i], NULL, 10);
                else if (streq(argv[i], "--churn-only"))
                        churn_only = true;
                else if (streq(argv[i], "--churn-scale") && i + 1 < argc)
                        churn_scale = (unsigned)strtoul(argv[++i], NULL, 10);
                else {
                        fprintf(stderr,
                                "usage: %s [--quick] [--topologies DIR] [--only NAME] [--churn-only] [--churn-scale N] "
                                "[--seed N]\n",
                                argv[0]);
                        return 2;
                }
        }
        static const char *const refs[] = {
                "seed000-8gpu-pcie-2socket.topo",  "seed004-7gpu-p40-mlx4.topo", "pcie-8gpu-pix-phb-sys.topo",
                "dgx1-v100-hybrid-cube-mesh.topo", "dgx-a100-nvswitch.topo",
        };
        struct bench_topo bts[16];
        unsigned nb = 0;
        for (size_t i = 0; i < ELEMENTSOF(refs); i++)
                if (load_reference(topologies, refs[i], &bts[nb]) == 0)
                        nb++;
        unsigned nref = nb;
        struct {
                const char *name, *what;
                int kind;
                unsigned n;
        } syn[] = {
                { "pcie-16", "synthetic: 2 sockets x 8, PIX pairs, PXB quads, PHB per socket", 0, 16 },
                { "nvswitch-16", "synthetic: 2 boards x 8 behind NVSwitch (NV12), PCIe between boards", 1, 16 },
                { "dgx1-x2-16", "synthetic: 2 DGX-1 hybrid cube meshes, SYS between", 2, 16 },
                { "pcie-64", "synthetic: 4 sockets x 2 host bridges x 2 switch trees x 2 switches x 2 GPUs", 3, 64 },
                { "nvswitch-64", "synthetic: 8 boards x 8 behind NVSwitch (NV12), PCIe tree between boards", 4, 64 },
                { "dgx1-x8-64", "synthetic: 8 DGX-1 hybrid cube meshes, SYS between", 5, 64 },
        };
        for (size_t i = 0; i < ELEMENTSOF(syn); i++) {
                struct bench_topo *bt = &bts[nb++];
                bt->t = malloc(sizeof *bt->t);
                snprintf(bt->name, sizeof bt->name, "%s", syn[i].name);
                snprintf(bt->what, sizeof bt->what, "%s", syn[i].what);
                switch (syn[i].kind) {
                        case 0: synth_pcie(bt->t, 16, 2, 4, 8, 8); break;
                        case 1: synth_nvswitch(bt->t, 16, 8, 12); break;
                        case 2: synth_dgx1(bt->t, 16); break;
                        case 3: synth_pcie(bt->t, 64, 2, 4, 8, 16); break;
                        case 4: synth_nvswitch(bt->t, 64, 8, 12); break;
                        default: synth_dgx1(bt->t, 64); break;
                }
        }
        if (only) {
                unsigned keep = 0;
                for (unsigned i = 0; i < nb; i++) {
                        if (strstr(bts[i].name, only))
                                bts[keep++] = bts[i];
                        else
                                free(bts[i].t);
                }
                nb = keep;
        }
        if (nref != ELEMENTSOF(refs))
                fprintf(stderr, "alloc-bench: only %u of %zu reference topologies loaded\n", nref, ELEMENTSOF(refs));

        char *detail = NULL;
        size_t detail_len = 0;
        dout = open_memstream(&detail, &detail_len);
        if (!dout)
                return 1;
        if (churn_only)
                goto churn_section;
        fprintf(dout, "### Allocator: single requests\n\n");
        fprintf(dout, "Ring bandwidth is the slowest link of the best ring through the chosen GPUs (estimated GB/s: "
                      "NV# = 25 x #, PIX 12, PXB 11, PHB 8, NODE 7, SYS 5); \"pairs\" is the sum over all pairs. "
                      "\"ring optimal\" counts requests whose ring equals the best achievable from that free set.\n");
        for (unsigned i = 0; i < nb; i++)
                if (bts[i].t->n_gpus <= 16)
                        single_quality(&bts[i]);
        for (unsigned i = 0; i < nb; i++)
                if (bts[i].t->n_gpus > 16)
                        single_quality(&bts[i]);

churn_section:
        fprintf(dout, "\n### Allocator: churn\n\n");
        fprintf(dout,
                "Random arrivals and departures, the same job sequence for every policy (a job is turned away "
                "only when too few GPUs are free, which does not depend on the policy). Metric: for every job of 2 "
                "or more GPUs, its ring bandwidth divided by the best ring that size gets on an empty node; the "
                "mean over all such jobs. \"gpuslice / policy\" divides gpuslice's mean by the policy's (>= 1: "
                "gpuslice "
                "is at least as good).\n");
        for (unsigned i = 0; i < nb; i++) {
                unsigned n = bts[i].t->n_gpus;
                if (n <= 8)
                        churn(&bts[i], churn_scale * (quick ? 400 : 2000), quick ? 2 : 5, true);
                else if (n <= 16)
                        churn(&bts[i], churn_scale * (quick ? 150 : 1000), quick ? 1 : 4, true);
                else
                        churn(&bts[i], churn_scale * (quick ? 300 : 1500), quick ? 1 : 3, false);
        }

        if (churn_only)
                goto out;
        fprintf(dout, "\n### Allocator: decision time\n\n");
        fprintf(dout,
                "CPU time of one alloc_pick_gpus() call (µs, the calling thread's clock, so that other load on a "
                "shared "
                "machine does not count; \"max wall\" is the slowest wall-clock time seen) over %u requests per row: "
                "half on an empty node, half "
                "with a random part busy. Budget: 50 µs for 8 GPUs, 1 ms for 16, 10 ms for 64 (\"in budget\" "
                "judges the maximum). \"proven\": share of answers whose search finished (the pair total is then "
                "proven best; otherwise it is the best found within the node budget). Greedy: mean of 20 calls on the "
                "same requests. Best-effort: one call on the empty "
                "node, capped at %lu combinations (it then \"gives up\").\n\n",
                quick ? 60 : 300, quick ? 3000000UL : 20000000UL);
        fprintf(dout,
                "| topology | GPUs | k | p50 | p99 | max | max wall | proven | in budget | greedy | best-effort |\n");
        fprintf(dout, "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n");
        for (unsigned i = 0; i < nb; i++) {
                unsigned n = bts[i].t->n_gpus;
                double budget = n <= 8 ? 50 : n <= 16 ? 1000 : 10000;
                static const unsigned ks[] = { 1, 2, 3, 4, 6, 8, 12, 16, 32, 48, 64 };
                for (size_t j = 0; j < ELEMENTSOF(ks); j++) {
                        unsigned k = ks[j];
                        if (k > n)
                                break;
                        if (n <= 8 && k != 1 && k != 2 && k != 4 && k != 6 && k != n)
                                continue;
                        timing_row(&bts[i], k, budget);
                }
        }
out:
        fclose(dout);
        print_summary();
        fputs(detail, stdout);
        free(detail);
        for (unsigned i = 0; i < nb; i++)
                free(bts[i].t);
        return 0;
}
