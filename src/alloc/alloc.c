/* SPDX-License-Identifier: Apache-2.0 */
/*
 * alloc.c — choose k whole GPUs from a free set by topology (docs/allocator.md explains the
 * algorithm and what it guarantees).
 *
 * Objective, lexicographic: (1) the set's ring bandwidth, exact; (2) its pair total; (3) with at
 * most 16 free GPUs, what stays free: the best rings left for 8, then 4, then 2 GPUs (look-ahead);
 * (4) a tie-break weight: GPUs weakly wired in the node first, then GPUs least connected to the
 * other free GPUs (best fit); (5) first found in a fixed order, so the answer is deterministic.
 *
 * Method: for each distinct bandwidth threshold, best first, look for sets whose ring at that
 * threshold is a Hamiltonian cycle; the first threshold that has one is the best ring. Within a
 * threshold, a branch-and-bound search over one connected 2-core component at a time, with
 * interchangeable GPUs ("twins": identical links to every other free GPU) taken in index order
 * so symmetric topologies do not blow up, seeded by greedy + swap incumbents. A node budget bounds
 * the search; the incumbent is the answer when it runs out (the `why` text says so). Past 16 free
 * GPUs, ultrametric nodes (PCIe trees, NVSwitch boards on one) take an exact tree DP instead.
 *
 * Must never: allocate on the heap, do I/O, log, keep global or static mutable state, or use
 * stack arrays sized 2^k beyond the small exact-DP limit.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "alloc/alloc.h"

#define MAXG TOPO_MAX_GPUS
/* Equally good sets compared by look-ahead. */
#define ALT_MAX 16
/* Single-GPU picks look ahead (best rings left for 2/4/8 GPUs) up to this many free GPUs. */
#define LOOKAHEAD_MAX 16
/* Hamiltonian-cycle bitmask DP up to this many GPUs: 2^(n-1) uint16 = 16 KiB of stack. */
#define RING_DP_MAX 14
/* Backtracking steps for a Hamiltonian cycle past the DP limit before giving up (lower bound). */
#define RING_BACKTRACK_BUDGET 200000UL
/* The same, for each candidate set inside the search (unknown counts as no ring). */
#define SEARCH_RING_BUDGET 2000UL
/* Branch-and-bound nodes per pick before we settle for the incumbent: generous up to 16 free
 * GPUs (where the search always finishes in practice), tight beyond so that 64 GPUs stay within
 * a few milliseconds (~100 ns per node there). */
#define SEARCH_BUDGET_SMALL 200000UL
#define SEARCH_BUDGET_LARGE 16000UL
/* Ultrametric nodes (PCIe trees, NVSwitch boards on a PCIe tree): exact tree DP when more than
 * LOOKAHEAD_MAX GPUs are free, for cluster trees up to this height. */
#define TREE_DEPTH_MAX 12
/* Improving swaps tried on the greedy incumbent. */
#define SWAP_ROUNDS 64

static inline unsigned popcount64(uint64_t x) {
        return (unsigned)__builtin_popcountll(x);
}
static inline unsigned ctz64(uint64_t x) {
        return (unsigned)__builtin_ctzll(x);
}

/* ---------- Hamiltonian cycle on a compact graph of n vertices (adjacency masks) ---------- */

/* 1: has a Hamiltonian cycle, 0: has none, -1: unknown (budget exhausted). n >= 3. */
struct ham_bt {
        const uint64_t *adj;
        unsigned n;
        unsigned long steps, budget;
};

static int ham_backtrack(struct ham_bt *h, unsigned v, uint64_t visited, unsigned depth) {
        if (++h->steps > h->budget)
                return -1;
        if (depth == h->n)
                return (h->adj[v] & 1) ? 1 : 0;
        uint64_t all = (h->n == 64) ? ~0ULL : ((1ULL << h->n) - 1);
        uint64_t unvisited = all & ~visited;
        /* Every unvisited vertex still needs two ways in/out among unvisited ∪ {v, 0}. */
        for (uint64_t m = unvisited; m; m &= m - 1) {
                unsigned u = ctz64(m);
                if (popcount64(h->adj[u] & (unvisited | (1ULL << v) | 1ULL)) < 2)
                        return 0;
        }
        /* Try the neighbours with the fewest onward options first (Warnsdorff). */
        uint64_t cand = h->adj[v] & unvisited;
        bool unknown = false;
        while (cand) {
                unsigned best = 0, bestdeg = 65;
                for (uint64_t m = cand; m; m &= m - 1) {
                        unsigned u = ctz64(m);
                        unsigned d = popcount64(h->adj[u] & unvisited);
                        if (d < bestdeg) {
                                bestdeg = d;
                                best = u;
                        }
                }
                cand &= ~(1ULL << best);
                int r = ham_backtrack(h, best, visited | (1ULL << best), depth + 1);
                if (r == 1)
                        return 1;
                if (r < 0) {
                        unknown = true;
                        break;
                }
        }
        return unknown ? -1 : 0;
}

/* The vertices of WITHIN reachable, inside WITHIN, from its lowest one (WITHIN when that part of the graph
 * is connected). */
static uint64_t flood(const uint64_t adj[], uint64_t within) {
        uint64_t seen = within & -within, frontier = seen;
        while (frontier) {
                unsigned v = ctz64(frontier);
                frontier &= frontier - 1;
                uint64_t nb = adj[v] & within & ~seen;
                seen |= nb;
                frontier |= nb;
        }
        return seen;
}

static int ham_cycle(unsigned n, const uint64_t adj[], unsigned long budget) {
        if (n < 3)
                return n == 2 ? ((adj[0] & 2) ? 1 : 0) : 1;
        uint64_t all = (n == 64) ? ~0ULL : ((1ULL << n) - 1);
        unsigned mindeg = 64;
        for (unsigned i = 0; i < n; i++) {
                unsigned d = popcount64(adj[i] & all & ~(1ULL << i));
                if (d < 2)
                        return 0;
                if (d < mindeg)
                        mindeg = d;
        }
        if (2 * mindeg >= n) /* Dirac */
                return 1;
        if (flood(adj, all) != all) /* not connected */
                return 0;
        if (n <= RING_DP_MAX) {
                /* dp[mask of vertices 1..n-1] = ends (bit v-1) of paths from 0 covering {0} ∪ mask */
                uint16_t dp[1u << (RING_DP_MAX - 1)];
                unsigned full = (1u << (n - 1)) - 1;
                memset(dp, 0, sizeof(dp[0]) * (full + 1));
                uint16_t nadj[RING_DP_MAX];
                for (unsigned v = 1; v < n; v++)
                        nadj[v - 1] = (uint16_t)((adj[v] >> 1) & full);
                uint16_t start = (uint16_t)((adj[0] >> 1) & full);
                for (unsigned v = 0; v < n - 1; v++)
                        if (start & (1u << v))
                                dp[1u << v] = (uint16_t)(1u << v);
                for (unsigned mask = 1; mask <= full; mask++) {
                        unsigned ends = dp[mask];
                        while (ends) {
                                unsigned v = (unsigned)__builtin_ctz(ends);
                                ends &= ends - 1;
                                unsigned nxt = nadj[v] & ~mask;
                                while (nxt) {
                                        unsigned u = (unsigned)__builtin_ctz(nxt);
                                        nxt &= nxt - 1;
                                        dp[mask | (1u << u)] |= (uint16_t)(1u << u);
                                }
                        }
                }
                return (dp[full] & start) ? 1 : 0;
        }
        /* No cut vertex (a ring survives losing any one vertex). */
        for (unsigned x = 0; x < n; x++) {
                uint64_t rest = all & ~(1ULL << x);
                if (flood(adj, rest) != rest)
                        return 0;
        }
        struct ham_bt h = { .adj = adj, .n = n, .budget = budget };
        return ham_backtrack(&h, 0, 1, 1);
}

/* ---------- ring bandwidth of a compact set ---------- */

/*
 * bw[i][j] for i,j < n. Exact for n <= RING_DP_MAX; past it exact when the backtracking search
 * decides within its budget, else a lower bound (the best threshold proved). PCIe-only sets
 * past the DP limit use the ultrametric shortcut: ring = worst pair.
 */
static unsigned ring_bw_compact(unsigned n, const uint16_t (*bw)[MAXG], bool has_nvlink) {
        if (n < 2)
                return 0;
        if (n == 2)
                return bw[0][1];
        unsigned lb = ~0u, ub = ~0u;
        for (unsigned i = 0; i < n; i++) {
                unsigned m1 = 0, m2 = 0;
                for (unsigned j = 0; j < n; j++) {
                        if (j == i)
                                continue;
                        unsigned b = bw[i][j];
                        if (b < lb)
                                lb = b;
                        if (b > m1) {
                                m2 = m1;
                                m1 = b;
                        } else if (b > m2)
                                m2 = b;
                }
                if (m2 < ub)
                        ub = m2;
        }
        if (lb >= ub)
                return lb;
        if (!has_nvlink && n > RING_DP_MAX)
                return lb;
        unsigned tau = ub;
        for (;;) {
                uint64_t adj[MAXG];
                for (unsigned i = 0; i < n; i++) {
                        adj[i] = 0;
                        for (unsigned j = 0; j < n; j++)
                                if (j != i && bw[i][j] >= tau)
                                        adj[i] |= 1ULL << j;
                }
                if (ham_cycle(n, adj, RING_BACKTRACK_BUDGET) == 1)
                        return tau;
                /* next lower distinct value */
                unsigned next = lb;
                for (unsigned i = 0; i < n; i++)
                        for (unsigned j = i + 1; j < n; j++)
                                if (bw[i][j] < tau && bw[i][j] > next)
                                        next = bw[i][j];
                if (next <= lb)
                        return lb;
                tau = next;
        }
}

unsigned alloc_ring_bw(const struct topo *t, alloc_set_t set) {
        if (!t)
                return 0;
        int idx[MAXG];
        unsigned n = 0;
        for (alloc_set_t m = set; m && n < MAXG; m &= m - 1) {
                unsigned g = ctz64(m);
                if (g >= t->n_gpus)
                        break;
                idx[n++] = (int)g;
        }
        uint16_t bw[MAXG][MAXG];
        bool nv = false;
        for (unsigned i = 0; i < n; i++)
                for (unsigned j = 0; j < n; j++) {
                        struct topo_link l = t->link[idx[i]][idx[j]];
                        bw[i][j] = i == j ? 0 : (uint16_t)topo_link_bw(l);
                        if (i != j && l.nvlinks)
                                nv = true;
                }
        return ring_bw_compact(n, (const uint16_t(*)[MAXG])bw, nv);
}

unsigned alloc_pair_total(const struct topo *t, alloc_set_t set) {
        unsigned sum = 0;
        if (!t)
                return 0;
        for (alloc_set_t a = set; a; a &= a - 1) {
                unsigned i = ctz64(a);
                if (i >= t->n_gpus)
                        break;
                for (alloc_set_t b = a & (a - 1); b; b &= b - 1) {
                        unsigned j = ctz64(b);
                        if (j >= t->n_gpus)
                                break;
                        sum += topo_link_bw(t->link[i][j]);
                }
        }
        return sum;
}

struct topo_link alloc_worst_link(const struct topo *t, alloc_set_t set) {
        struct topo_link worst = { .pcie = TOPO_LEVEL_SELF, .nvlinks = 0 };
        bool any = false;
        if (!t)
                return worst;
        for (alloc_set_t a = set; a; a &= a - 1) {
                unsigned i = ctz64(a);
                if (i >= t->n_gpus)
                        break;
                for (alloc_set_t b = a & (a - 1); b; b &= b - 1) {
                        unsigned j = ctz64(b);
                        if (j >= t->n_gpus)
                                break;
                        struct topo_link l = t->link[i][j];
                        if (!any || topo_link_cmp(l, worst) < 0) {
                                worst = l;
                                any = true;
                        }
                }
        }
        return worst;
}

/* ---------- the search ---------- */

struct ctx {
        const struct topo *t;
        unsigned n;              /* available GPUs, local indices 0..n-1 in GPU order */
        int idx[MAXG];           /* local → GPU index */
        uint16_t bw[MAXG][MAXG]; /* local bandwidth matrix, 0 on the diagonal */
        uint64_t compat[MAXG];   /* local vertices whose link to i meets the floor (not i) */
        uint32_t deg[MAXG];      /* bandwidth to every other available GPU */
        uint32_t sdeg[MAXG];     /* bandwidth to every other GPU of the node, free or not */
        uint64_t key[MAXG];      /* tie-break weight, smaller is taken first: sdeg, then deg */
        int twin_rep[MAXG];      /* smallest local index with identical links, or itself */
        uint64_t must;           /* local mask of must-include */
        unsigned k;
        /* per threshold */
        unsigned tau;
        uint64_t adj[MAXG]; /* local, at tau */
        /* DFS state */
        int ord[MAXG];
        unsigned nord;
        int twin_prev_pos[MAXG];
        bool inc[MAXG];
        uint64_t suffix[MAXG + 1];     /* local mask of ord[pos..] */
        uint32_t gain[MAXG + 1][MAXG]; /* per depth: bandwidth of each local vertex to the set */
        unsigned maxbw;                /* best pair bandwidth among candidates at this threshold */
        unsigned long nodes, budget;
        bool exhausted;
        bool first_only; /* any set with a ring at tau will do (look-ahead) */
        bool collect;    /* gather sets as good as best (pair == best_pair) into alt[] */
        uint64_t alt[ALT_MAX];
        unsigned nalt;
        /* best so far (at this threshold) */
        bool have;
        uint64_t best;
        uint32_t best_pair;
        uint64_t best_deg;
};

static bool ctx_better(const struct ctx *c, uint32_t pair, uint64_t deg) {
        if (!c->have)
                return true;
        if (pair != c->best_pair)
                return pair > c->best_pair;
        return deg < c->best_deg;
}

/* Ring at the current threshold is a Hamiltonian cycle (k >= 3) or the pair's link (k == 2). */
static bool ctx_ring_ok(const struct ctx *c, uint64_t set) {
        unsigned n = 0;
        int loc[MAXG];
        for (uint64_t m = set; m; m &= m - 1)
                loc[n++] = (int)ctz64(m);
        if (n < 2)
                return true;
        uint64_t adj[MAXG];
        for (unsigned i = 0; i < n; i++) {
                adj[i] = 0;
                for (unsigned j = 0; j < n; j++)
                        if (j != i && (c->adj[loc[i]] >> loc[j] & 1))
                                adj[i] |= 1ULL << j;
        }
        return ham_cycle(n, adj, SEARCH_RING_BUDGET) == 1;
}

static void ctx_offer(struct ctx *c, uint64_t set, uint32_t pair, uint64_t deg) {
        if (c->collect) {
                if (pair != c->best_pair || c->nalt >= ALT_MAX)
                        return;
                for (unsigned i = 0; i < c->nalt; i++)
                        if (c->alt[i] == set)
                                return;
                if (ctx_ring_ok(c, set))
                        c->alt[c->nalt++] = set;
                return;
        }
        if (!c->first_only && !ctx_better(c, pair, deg))
                return;
        if (c->first_only && c->have)
                return;
        if (!ctx_ring_ok(c, set))
                return;
        c->have = true;
        c->best = set;
        c->best_pair = pair;
        c->best_deg = deg;
}

/* lint: long — the branch-and-bound search: each bound and pruning rule is one condition, and they must be tested
 * in this order at every node (hot path: no calls per node). */
static void ctx_dfs(struct ctx *c, unsigned pos, uint64_t set, unsigned cnt, uint32_t pair, uint64_t deg,
                    uint64_t cmask) {
        if ((c->first_only && c->have) || (c->collect && c->nalt >= ALT_MAX))
                return;
        if (cnt == c->k) {
                ctx_offer(c, set, pair, deg);
                return;
        }
        if (++c->nodes > c->budget) {
                c->exhausted = true;
                return;
        }
        unsigned r = c->k - cnt;
        uint64_t pool = c->suffix[pos] & cmask;
        if (popcount64(pool) < r)
                return;
        /* Bound: every chosen GPU needs two ring neighbours among chosen ∪ pool. */
        if (c->k >= 3)
                for (uint64_t m = set; m; m &= m - 1) {
                        unsigned v = ctz64(m);
                        if (popcount64(c->adj[v] & (set | pool)) < 2)
                                return;
                }
        /* Bound: pair total can reach at most pair + r*maxgain + C(r,2)*maxbw. */
        if (c->have) {
                const uint32_t *g = c->gain[cnt];
                uint32_t maxgain = 0;
                uint64_t mindeg = ~0ULL;
                for (uint64_t m = pool; m; m &= m - 1) {
                        unsigned v = ctz64(m);
                        if (g[v] > maxgain)
                                maxgain = g[v];
                        if (c->key[v] < mindeg)
                                mindeg = c->key[v];
                }
                uint64_t ub = pair + (uint64_t)r * maxgain + (uint64_t)r * (r - 1) / 2 * c->maxbw;
                if (ub < c->best_pair)
                        return;
                if (!c->collect && ub == c->best_pair && deg + (uint64_t)r * mindeg >= c->best_deg)
                        return;
        }
        for (unsigned p = pos; p < c->nord; p++) {
                int v = c->ord[p];
                if (!(cmask >> v & 1)) {
                        c->inc[p] = false;
                        continue;
                }
                /* Twins are taken in order: v only if its previous twin is in. */
                if (c->twin_prev_pos[p] >= 0 && !c->inc[c->twin_prev_pos[p]]) {
                        c->inc[p] = false;
                        continue;
                }
                if (popcount64(c->suffix[p] & cmask) < r)
                        break;
                c->inc[p] = true;
                const uint32_t *g = c->gain[cnt];
                uint32_t *ng = c->gain[cnt + 1];
                for (unsigned u = 0; u < c->n; u++)
                        ng[u] = g[u] + c->bw[v][u];
                ctx_dfs(c, p + 1, set | (1ULL << v), cnt + 1, pair + g[v], deg + c->key[v], cmask & c->compat[v]);
                c->inc[p] = false;
                if (c->exhausted || (c->first_only && c->have))
                        return;
        }
}

/* Add GPU V to the greedy set: its bandwidth to the set so far, its key, every GPU's gain towards
 * the set, and the candidates still compatible with all of it. */
static inline void greedy_take(const struct ctx *c, unsigned v, uint64_t *set, uint64_t *cmask, uint32_t gain[],
                               uint32_t *pair, uint64_t *deg) {
        *set |= 1ULL << v;
        *pair += gain[v];
        *deg += c->key[v];
        for (unsigned u = 0; u < c->n; u++)
                gain[u] += c->bw[v][u];
        *cmask &= c->compat[v] & ~*set;
}

/* Greedy incumbent: from the must set (or from `start`), add the GPU with the most bandwidth to
 * the set, ties to the one least connected to the rest. */
static void ctx_greedy(struct ctx *c, uint64_t allowed, int start) {
        uint64_t set = c->must;
        uint64_t cmask = allowed;
        uint32_t gain[MAXG] = { 0 };
        uint32_t pair = 0;
        uint64_t deg = 0;
        for (uint64_t m = c->must; m; m &= m - 1) {
                unsigned v = ctz64(m);
                cmask &= c->compat[v];
        }
        for (uint64_t m = c->must; m; m &= m - 1) {
                unsigned v = ctz64(m);
                pair += gain[v];
                deg += c->key[v];
                for (unsigned u = 0; u < c->n; u++)
                        gain[u] += c->bw[v][u];
        }
        cmask &= ~set;
        unsigned cnt = popcount64(set);
        if (start >= 0 && cnt < c->k) {
                if (!(cmask >> start & 1))
                        return;
                greedy_take(c, (unsigned)start, &set, &cmask, gain, &pair, &deg);
                cnt++;
        }
        while (cnt < c->k) {
                int best = -1;
                for (uint64_t m = cmask; m; m &= m - 1) {
                        unsigned v = ctz64(m);
                        /* at the threshold, prefer GPUs with ring links into the set */
                        if (best < 0)
                                best = (int)v;
                        else {
                                unsigned av = popcount64(c->adj[v] & set), ab = popcount64(c->adj[best] & set);
                                unsigned ev = av > 2 ? 2 : av, eb = ab > 2 ? 2 : ab;
                                if (ev > eb || (ev == eb && (gain[v] > gain[best] ||
                                                             (gain[v] == gain[best] && c->key[v] < c->key[best]))))
                                        best = (int)v;
                        }
                }
                if (best < 0)
                        return;
                greedy_take(c, (unsigned)best, &set, &cmask, gain, &pair, &deg);
                cnt++;
        }
        ctx_offer(c, set, pair, deg);
}

/* Improve the incumbent by swapping one chosen GPU (not a must-include) for one outside, while
 * that raises (pair total, then tie-break) and keeps the ring at the threshold. */
static void ctx_local_search(struct ctx *c, uint64_t comp) {
        if (!c->have || c->first_only || c->collect)
                return;
        for (unsigned round = 0; round < SWAP_ROUNDS; round++) {
                uint64_t set = c->best;
                uint32_t gain[MAXG];
                for (unsigned u = 0; u < c->n; u++) {
                        gain[u] = 0;
                        for (uint64_t m = set; m; m &= m - 1)
                                gain[u] += c->bw[u][ctz64(m)];
                }
                bool improved = false;
                for (uint64_t out = set & ~c->must; out && !improved; out &= out - 1) {
                        unsigned v = ctz64(out);
                        uint64_t rest = set & ~(1ULL << v);
                        uint64_t cm = comp & ~set;
                        for (uint64_t m = rest; m; m &= m - 1)
                                cm &= c->compat[ctz64(m)];
                        for (uint64_t in = cm; in; in &= in - 1) {
                                unsigned u = ctz64(in);
                                /* pair(rest + u) = pair(set) - gain(v) + gain(u) - bw(u, v) */
                                int64_t np = (int64_t)c->best_pair - gain[v] + gain[u] - c->bw[u][v];
                                uint64_t nk = c->best_deg - c->key[v] + c->key[u];
                                if (np < (int64_t)c->best_pair || (np == (int64_t)c->best_pair && nk >= c->best_deg))
                                        continue;
                                uint64_t cand = rest | (1ULL << u);
                                if (!ctx_ring_ok(c, cand))
                                        continue;
                                c->best = cand;
                                c->best_pair = (uint32_t)np;
                                c->best_deg = nk;
                                improved = true;
                                break;
                        }
                }
                if (!improved)
                        return;
        }
}

/* Search the sets inside `comp` (local mask, contains must) at the current threshold. */
static void ctx_search_component(struct ctx *c, uint64_t comp) {
        /* Pool order: most ring links inside the component first, then most bandwidth, then index. */
        unsigned key1[MAXG];
        uint32_t key2[MAXG];
        c->nord = 0;
        for (uint64_t m = comp & ~c->must; m; m &= m - 1) {
                unsigned v = ctz64(m);
                key1[v] = popcount64(c->adj[v] & comp);
                key2[v] = 0;
                for (uint64_t w = comp; w; w &= w - 1)
                        key2[v] += c->bw[v][ctz64(w)];
                unsigned p = c->nord++;
                while (p > 0) {
                        int u = c->ord[p - 1];
                        if (key1[u] > key1[v] || (key1[u] == key1[v] && key2[u] >= key2[v]))
                                break;
                        c->ord[p] = u;
                        p--;
                }
                c->ord[p] = (int)v;
        }
        c->suffix[c->nord] = 0;
        for (unsigned p = c->nord; p-- > 0;)
                c->suffix[p] = c->suffix[p + 1] | (1ULL << c->ord[p]);
        for (unsigned p = 0; p < c->nord; p++) {
                c->twin_prev_pos[p] = -1;
                c->inc[p] = false;
                for (unsigned q = p; q-- > 0;)
                        if (c->twin_rep[c->ord[q]] == c->twin_rep[c->ord[p]]) {
                                c->twin_prev_pos[p] = (int)q;
                                break;
                        }
        }
        c->maxbw = 0;
        for (uint64_t a = comp; a; a &= a - 1)
                for (uint64_t b = a & (a - 1); b; b &= b - 1) {
                        unsigned x = c->bw[ctz64(a)][ctz64(b)];
                        if (x > c->maxbw)
                                c->maxbw = x;
                }

        /* Incumbents: greedy from the must set, or from a few good starting GPUs. */
        uint64_t allowed = comp & ~c->must;
        if (c->must)
                ctx_greedy(c, allowed, -1);
        else
                for (unsigned p = 0; p < c->nord && p < 8; p++)
                        ctx_greedy(c, allowed, c->ord[p]);

        ctx_local_search(c, comp);
        if (c->exhausted || (c->first_only && c->have))
                return;
        uint32_t pair = 0;
        uint64_t deg = 0;
        uint32_t *g = c->gain[popcount64(c->must)];
        memset(g, 0, sizeof(c->gain[0]));
        uint64_t cmask = allowed;
        for (uint64_t m = c->must; m; m &= m - 1) {
                unsigned v = ctz64(m);
                pair += g[v];
                deg += c->key[v];
                for (unsigned u = 0; u < c->n; u++)
                        g[u] += c->bw[v][u];
                cmask &= c->compat[v];
        }
        ctx_dfs(c, 0, c->must, popcount64(c->must), pair, deg, cmask);
}

/* Try one threshold: restrict to GPUs compatible with the must set, peel to the 2-core of the
 * ring graph, search each component that holds the must set and is large enough. */
static void ctx_try_threshold(struct ctx *c, unsigned tau, uint64_t allowed) {
        c->tau = tau;
        for (unsigned i = 0; i < c->n; i++) {
                c->adj[i] = 0;
                if (!(allowed >> i & 1))
                        continue;
                for (unsigned j = 0; j < c->n; j++)
                        if (j != i && c->bw[i][j] >= tau && (allowed >> j & 1))
                                c->adj[i] |= 1ULL << j;
        }
        unsigned need = c->k >= 3 ? 2 : 1;
        uint64_t alive = allowed;
        bool changed = true;
        while (changed) {
                changed = false;
                for (uint64_t m = alive; m; m &= m - 1) {
                        unsigned v = ctz64(m);
                        if (popcount64(c->adj[v] & alive) < need) {
                                alive &= ~(1ULL << v);
                                changed = true;
                        }
                }
        }
        if ((alive & c->must) != c->must)
                return;
        for (unsigned i = 0; i < c->n; i++)
                c->adj[i] &= alive;
        uint64_t left = alive;
        while (left) {
                uint64_t seed = c->must ? (1ULL << ctz64(c->must)) : (left & -left);
                uint64_t comp = seed, frontier = seed;
                while (frontier) {
                        unsigned v = ctz64(frontier);
                        frontier &= frontier - 1;
                        uint64_t nb = c->adj[v] & alive & ~comp;
                        comp |= nb;
                        frontier |= nb;
                }
                left &= ~comp;
                if ((comp & c->must) == c->must && popcount64(comp) >= c->k)
                        ctx_search_component(c, comp);
                if (c->must)
                        break;
        }
}

/* Best ring bandwidth s GPUs out of `allowed` could get (no must set), 0 if none proved. */
static unsigned ctx_best_ring(struct ctx *c, uint64_t allowed, unsigned s, const unsigned *vals, unsigned nv) {
        c->k = s;
        c->must = 0;
        c->first_only = true;
        c->collect = false;
        c->have = false;
        c->budget = c->n <= 16 ? SEARCH_BUDGET_SMALL : SEARCH_BUDGET_LARGE;
        for (unsigned v = 0; v < nv; v++) {
                c->nodes = 0;
                c->exhausted = false;
                ctx_try_threshold(c, vals[v], allowed);
                if (c->have)
                        return vals[v];
        }
        return 0;
}

/*
 * One GPU, no must-include: leave the rest best connected. Up to LOOKAHEAD_MAX free GPUs, compare
 * what each choice leaves: the best ring for 8, then 4, then 2 GPUs (the usual job sizes that
 * still fit). Then take the GPU with the weakest wiring in the node (small jobs go to the parts
 * that big jobs cannot use well), then the one least connected to the other free GPUs (best fit:
 * the rest keeps the largest pair total), then the lowest index.
 */
static unsigned ctx_pick_single(struct ctx *c, const unsigned *vals, unsigned nv) {
        uint64_t all = c->n == 64 ? ~0ULL : (1ULL << c->n) - 1;
        bool look = c->n <= LOOKAHEAD_MAX && c->n >= 3;
        unsigned best = 0;
        unsigned best_rings[3] = { 0 };
        for (unsigned i = 0; i < c->n; i++) {
                unsigned rings[3] = { 0 };
                if (c->twin_rep[i] != (int)i)
                        continue; /* a twin of a lower index leaves the same */
                if (look)
                        for (unsigned z = 0; z < 3; z++) {
                                unsigned s = 8u >> z;
                                if (s <= c->n - 1)
                                        rings[z] = ctx_best_ring(c, all & ~(1ULL << i), s, vals, nv);
                        }
                int cmp = 0;
                if (i > 0)
                        for (unsigned z = 0; z < 3 && !cmp; z++)
                                cmp = rings[z] > best_rings[z] ? 1 : rings[z] < best_rings[z] ? -1 : 0;
                if (i == 0 || cmp > 0 || (cmp == 0 && c->key[i] < c->key[best])) {
                        best = i;
                        memcpy(best_rings, rings, sizeof rings);
                }
        }
        c->first_only = false;
        c->k = 1;
        return best;
}

/* Compare what two choices leave: best rings for 8, 4, 2 GPUs out of `left`. */
static void ctx_leftover(struct ctx *c, uint64_t left, const unsigned *vals, unsigned nv, unsigned ret[3]) {
        unsigned n = popcount64(left);
        for (unsigned z = 0; z < 3; z++) {
                unsigned s = 8u >> z;
                ret[z] = s <= n ? ctx_best_ring(c, left, s, vals, nv) : 0;
        }
}

/*
 * Several sets tie on ring and pair total: gather up to ALT_MAX of them (twins give the same
 * answer, so only one of each symmetric family) and keep the one that leaves the best rings for
 * 8, then 4, then 2 GPUs; then the smaller tie-break weight. Only up to LOOKAHEAD_MAX free GPUs.
 */
static void ctx_pick_among_equals(struct ctx *c, unsigned tau, uint64_t allowed, const unsigned *vals, unsigned nv) {
        uint64_t all = c->n == 64 ? ~0ULL : (1ULL << c->n) - 1;
        uint64_t best = c->best, must = c->must;
        uint32_t best_pair = c->best_pair;
        unsigned k = c->k;
        c->collect = true;
        c->nalt = 0;
        c->nodes = 0;
        ctx_try_threshold(c, tau, allowed);
        c->collect = false;
        if (c->exhausted || c->nalt < 2) {
                c->exhausted = false;
                return;
        }
        uint64_t alt[ALT_MAX];
        unsigned nalt = c->nalt;
        memcpy(alt, c->alt, sizeof alt);
        unsigned best_left[3];
        ctx_leftover(c, all & ~best, vals, nv, best_left);
        uint64_t best_key = 0;
        for (uint64_t m = best; m; m &= m - 1)
                best_key += c->key[ctz64(m)];
        for (unsigned i = 0; i < nalt; i++) {
                if (alt[i] == best)
                        continue;
                unsigned left[3];
                ctx_leftover(c, all & ~alt[i], vals, nv, left);
                int cmp = 0;
                for (unsigned z = 0; z < 3 && !cmp; z++)
                        cmp = left[z] > best_left[z] ? 1 : left[z] < best_left[z] ? -1 : 0;
                uint64_t key = 0;
                for (uint64_t m = alt[i]; m; m &= m - 1)
                        key += c->key[ctz64(m)];
                if (cmp > 0 || (cmp == 0 && key < best_key)) {
                        best = alt[i];
                        best_key = key;
                        memcpy(best_left, left, sizeof left);
                }
        }
        c->first_only = false;
        c->k = k;
        c->must = must;
        c->best = best;
        c->best_pair = best_pair;
        c->best_deg = best_key;
        c->have = true;
        c->exhausted = false;
}

/* ---------- ultrametric nodes: exact tree DP ---------- */

/*
 * When the free GPUs' bandwidths are ultrametric (in every triangle the two weakest links are
 * equal — true of any PCIe tree, and of NVSwitch boards hung on one), the GPUs at bandwidth >= τ
 * form disjoint groups for every τ, i.e. a cluster tree. A set's ring bandwidth is then the level
 * of its smallest enclosing cluster (any ring must cross that cluster's top split), so the best
 * ring is the highest level with a cluster holding k free GPUs and the must-include ones. Within
 * such a cluster the pair total is maximised exactly by a knapsack over the tree: pairs split at a
 * cluster of level L contribute L each. Ties go to the smaller tie-break weight (key).
 */
struct utree {
        unsigned n_nodes;
        struct unode {
                uint16_t level;      /* bandwidth of pairs split here (internal nodes) */
                int16_t gpu;         /* local GPU index for leaves, -1 otherwise */
                int16_t first, next; /* children list */
                uint8_t count, nmust, height;
                int16_t rep; /* a GPU of the cluster */
        } node[2 * MAXG];
        uint8_t choice[2 * MAXG][MAXG + 1]; /* GPUs given to this child when its parent's prefix holds j */
};

struct uval {
        int32_t pair[MAXG + 1]; /* -1: impossible */
        uint64_t key[MAXG + 1];
};

static bool uval_better(int32_t p, uint64_t k, int32_t bp, uint64_t bk) {
        return bp < 0 || p > bp || (p == bp && k < bk);
}

static bool ctx_is_ultrametric(const struct ctx *c) {
        for (unsigned i = 0; i < c->n; i++)
                for (unsigned j = i + 1; j < c->n; j++)
                        for (unsigned l = j + 1; l < c->n; l++) {
                                unsigned a = c->bw[i][j], b = c->bw[i][l], d = c->bw[j][l];
                                /* the two smallest must be equal */
                                unsigned lo = a < b ? a : b, hi = a < b ? b : a;
                                if (d < lo) {
                                        if (d != lo)
                                                return false;
                                } else if (d < hi) {
                                        if (lo != d)
                                                return false;
                                } else if (lo != hi)
                                        return false;
                        }
        return true;
}

/* out[j], j = 0..min(count, k): best (pair, key) of j GPUs inside node v. */
static void utree_dp(const struct ctx *c, struct utree *u, int v, struct uval *out) {
        const struct unode *nd = &u->node[v];
        unsigned k = c->k;
        for (unsigned j = 0; j <= k; j++)
                out->pair[j] = -1;
        if (nd->gpu >= 0) {
                if (!(c->must >> nd->gpu & 1))
                        out->pair[0] = 0, out->key[0] = 0;
                out->pair[1] = 0;
                out->key[1] = c->key[nd->gpu];
                return;
        }
        struct uval tmp;
        unsigned have = 0; /* GPUs in the children merged so far */
        for (int ch = nd->first; ch >= 0; ch = u->node[ch].next) {
                utree_dp(c, u, ch, &tmp);
                unsigned cc = u->node[ch].count;
                if (have == 0 && ch == nd->first) {
                        for (unsigned j = 0; j <= k; j++) {
                                out->pair[j] = j <= cc ? tmp.pair[j] : -1;
                                out->key[j] = tmp.key[j];
                                u->choice[ch][j] = (uint8_t)j;
                        }
                        have = cc;
                        continue;
                }
                unsigned top = have + cc < k ? have + cc : k;
                for (unsigned j = top + 1; j-- > 0;) {
                        int32_t bp = -1;
                        uint64_t bk = 0;
                        uint8_t bx = 0;
                        for (unsigned x = 0; x <= j && x <= cc; x++) {
                                if (j - x > have || out->pair[j - x] < 0 || tmp.pair[x] < 0)
                                        continue;
                                int32_t p = out->pair[j - x] + tmp.pair[x] + (int32_t)(nd->level * x * (j - x));
                                uint64_t kk = out->key[j - x] + tmp.key[x];
                                if (uval_better(p, kk, bp, bk)) {
                                        bp = p;
                                        bk = kk;
                                        bx = (uint8_t)x;
                                }
                        }
                        out->pair[j] = bp;
                        out->key[j] = bk;
                        u->choice[ch][j] = bx;
                }
                have += cc;
        }
}

static uint64_t utree_collect(const struct utree *u, int v, unsigned j) {
        const struct unode *nd = &u->node[v];
        if (nd->gpu >= 0)
                return j ? 1ULL << nd->gpu : 0;
        /* children were merged first to last: undo from the last */
        int kids[MAXG];
        unsigned nk = 0;
        for (int ch = nd->first; ch >= 0; ch = u->node[ch].next)
                kids[nk++] = ch;
        uint64_t set = 0;
        for (unsigned i = nk; i-- > 0;) {
                unsigned x = u->choice[kids[i]][j];
                set |= utree_collect(u, kids[i], x);
                j -= x;
        }
        return set;
}

/* The exact pick for ultrametric nodes; false when it does not apply (caller searches). */
/* noinline: its ~10 KiB of tables live only during the call, not in alloc_pick_gpus' frame */
/* lint: long — the ultrametric exact pick: build the cluster tree, then per level a DP over its clusters and a
 * redo of the winner's; the ~10 KiB of DP tables are locals on purpose (see noinline above), so helpers would take
 * them all. */
static __attribute__((noinline)) bool ctx_ultra_pick(struct ctx *c, const unsigned *vals, unsigned nv) {
        if (!ctx_is_ultrametric(c))
                return false;
        struct utree u;
        int roots[MAXG];
        unsigned nroots = 0;
        unsigned nmust = popcount64(c->must);
        u.n_nodes = 0;
        for (unsigned i = 0; i < c->n; i++) {
                struct unode *nd = &u.node[u.n_nodes];
                *nd = (struct unode){ .level = 0,
                                      .gpu = (int16_t)i,
                                      .first = -1,
                                      .next = -1,
                                      .count = 1,
                                      .nmust = (uint8_t)(c->must >> i & 1),
                                      .height = 0,
                                      .rep = (int16_t)i };
                roots[nroots++] = (int)u.n_nodes++;
        }
        for (unsigned v = 0; v < nv; v++) {
                unsigned tau = vals[v];
                bool grouped[MAXG] = { false };
                int next_roots[MAXG];
                unsigned nn = 0;
                for (unsigned a = 0; a < nroots; a++) {
                        if (grouped[a])
                                continue;
                        int members[MAXG];
                        unsigned nm = 0;
                        members[nm++] = roots[a];
                        for (unsigned b = a + 1; b < nroots; b++)
                                if (!grouped[b] && c->bw[u.node[roots[a]].rep][u.node[roots[b]].rep] >= tau) {
                                        grouped[b] = true;
                                        members[nm++] = roots[b];
                                }
                        if (nm == 1) {
                                next_roots[nn++] = roots[a];
                                continue;
                        }
                        struct unode *nd = &u.node[u.n_nodes];
                        *nd = (struct unode){ .level = (uint16_t)tau,
                                              .gpu = -1,
                                              .first = -1,
                                              .next = -1,
                                              .rep = u.node[members[0]].rep };
                        unsigned count = 0, nm2 = 0, h = 0;
                        for (unsigned i = nm; i-- > 0;) {
                                struct unode *ch = &u.node[members[i]];
                                ch->next = nd->first;
                                nd->first = (int16_t)members[i];
                                count += ch->count;
                                nm2 += ch->nmust;
                                if (ch->height + 1u > h)
                                        h = ch->height + 1u;
                        }
                        nd->count = (uint8_t)count;
                        nd->nmust = (uint8_t)nm2;
                        nd->height = (uint8_t)h;
                        next_roots[nn++] = (int)u.n_nodes++;
                }
                memcpy(roots, next_roots, nn * sizeof roots[0]);
                nroots = nn;
                /* The first level with a cluster of k free GPUs holding the must set is the best ring. */
                bool any = false;
                for (unsigned a = 0; a < nroots; a++) {
                        const struct unode *nd = &u.node[roots[a]];
                        if (nd->count >= c->k && nd->nmust == nmust) {
                                any = true;
                                if (nd->height > TREE_DEPTH_MAX)
                                        return false;
                        }
                }
                if (!any)
                        continue;
                struct uval val;
                int32_t bp = -1;
                uint64_t bk = 0;
                int best_root = -1;
                for (unsigned a = 0; a < nroots; a++) {
                        const struct unode *nd = &u.node[roots[a]];
                        if (nd->count < c->k || nd->nmust != nmust)
                                continue;
                        utree_dp(c, &u, roots[a], &val);
                        if (val.pair[c->k] >= 0 && uval_better(val.pair[c->k], val.key[c->k], bp, bk)) {
                                bp = val.pair[c->k];
                                bk = val.key[c->k];
                                best_root = roots[a];
                        }
                }
                if (best_root < 0)
                        return false;
                /* redo the winner's DP so its choices are the ones left in the table */
                utree_dp(c, &u, best_root, &val);
                c->best = utree_collect(&u, best_root, c->k);
                c->best_pair = (uint32_t)bp;
                c->best_deg = bk;
                c->have = true;
                return true;
        }
        return false;
}

static void result_fill(const struct topo *t, alloc_set_t set, struct alloc_result *r) {
        memset(r, 0, sizeof(*r));
        r->set = set;
        for (alloc_set_t m = set; m; m &= m - 1)
                r->gpus[r->n++] = (int)ctz64(m);
        r->ring_bw = alloc_ring_bw(t, set);
        r->pair_total = alloc_pair_total(t, set);
        r->worst = alloc_worst_link(t, set);
}

static bool link_meets(struct topo_link l, struct topo_link floor) {
        if (floor.pcie == 0 && floor.nvlinks == 0)
                return true;
        return topo_link_cmp(l, floor) >= 0;
}

/* The pipeline of alloc_pick_gpus: validate → build the context → search → explain. */

/* Step 1: the request against the topology. Fills *nmust and *navail. */
static int pick_validate(const struct topo *t, const struct alloc_request *req, unsigned *nmust, unsigned *navail,
                         struct gs_error *err) {
        char s1[200];
        if (!t || !req)
                return gs_error_set(err, -EINVAL, "internal error: missing topology, request or result");
        if (t->n_gpus == 0 || t->n_gpus > MAXG)
                return gs_error_set(err, -EINVAL, "the topology has %u GPUs", t->n_gpus);
        alloc_set_t all = t->n_gpus == 64 ? ~0ULL : ((1ULL << t->n_gpus) - 1);
        if (req->count == 0)
                return gs_error_set(err, -EINVAL, "asked for 0 GPUs; the count must be at least 1");
        if (req->available & ~all)
                return gs_error_set(err, -EINVAL, "available GPU index %s is past this node's GPUs 0-%u",
                                    alloc_set_format(req->available & ~all, s1, sizeof s1), t->n_gpus - 1);
        if (req->must_include & ~all)
                return gs_error_set(err, -EINVAL, "must-include GPU index %s is past this node's GPUs 0-%u",
                                    alloc_set_format(req->must_include & ~all, s1, sizeof s1), t->n_gpus - 1);
        if (req->must_include & ~req->available)
                return gs_error_set(err, -EINVAL, "must-include GPU %s is not among the available GPUs",
                                    alloc_set_format(req->must_include & ~req->available, s1, sizeof s1));
        *nmust = popcount64(req->must_include);
        if (*nmust > req->count)
                return gs_error_set(err, -EINVAL, "%u GPUs must be included but only %u were asked for", *nmust,
                                    req->count);
        *navail = popcount64(req->available);
        if (*navail < req->count)
                return gs_error_set(err, -ENOSPC, "asked for %u GPUs but only %u %s available", req->count, *navail,
                                    *navail == 1 ? "is" : "are");
        return 0;
}

/* Twins: identical links to every other available GPU (exact symmetry of the objective). */
static void ctx_find_twins(struct ctx *c) {
        const struct topo *t = c->t;
        uint32_t h[MAXG];
        for (unsigned i = 0; i < c->n; i++) {
                h[i] = 0;
                for (unsigned j = 0; j < c->n; j++) {
                        if (i == j)
                                continue;
                        struct topo_link l = t->link[c->idx[i]][c->idx[j]];
                        uint32_t x = (uint32_t)l.pcie * 131u + l.nvlinks + 1u;
                        h[i] += x * x * 2654435761u;
                }
        }
        for (unsigned i = 0; i < c->n; i++) {
                c->twin_rep[i] = (int)i;
                for (unsigned r = 0; r < i; r++) {
                        if (c->twin_rep[r] != (int)r || h[r] != h[i])
                                continue;
                        bool same = true;
                        for (unsigned j = 0; j < c->n && same; j++) {
                                if (j == i || j == r)
                                        continue;
                                struct topo_link a = t->link[c->idx[i]][c->idx[j]];
                                struct topo_link b = t->link[c->idx[r]][c->idx[j]];
                                same = a.pcie == b.pcie && a.nvlinks == b.nvlinks;
                        }
                        if (same) {
                                c->twin_rep[i] = (int)r;
                                break;
                        }
                }
        }
}

/* Step 2: the search context over the available GPUs: bandwidths, floor compatibility, degrees. */
static void ctx_build(struct ctx *c, const struct topo *t, const struct alloc_request *req, bool floor) {
        c->t = t;
        c->n = 0;
        c->k = req->count;
        c->must = 0;
        for (alloc_set_t m = req->available; m; m &= m - 1) {
                unsigned g = ctz64(m);
                if (req->must_include >> g & 1)
                        c->must |= 1ULL << c->n;
                c->idx[c->n++] = (int)g;
        }
        for (unsigned i = 0; i < c->n; i++) {
                c->compat[i] = 0;
                c->deg[i] = 0;
                for (unsigned j = 0; j < c->n; j++) {
                        if (i == j) {
                                c->bw[i][j] = 0;
                                continue;
                        }
                        struct topo_link l = t->link[c->idx[i]][c->idx[j]];
                        c->bw[i][j] = (uint16_t)topo_link_bw(l);
                        c->deg[i] += c->bw[i][j];
                        if (!floor || link_meets(l, req->min_link))
                                c->compat[i] |= 1ULL << j;
                }
                c->sdeg[i] = 0;
                for (unsigned j = 0; j < t->n_gpus; j++)
                        if (j != (unsigned)c->idx[i])
                                c->sdeg[i] += topo_link_bw(t->link[c->idx[i]][j]);
                c->key[i] = (uint64_t)c->sdeg[i] << 20 | c->deg[i];
        }
        ctx_find_twins(c);
}

/* Distinct pair bandwidths, best first: the ring thresholds to try. Returns how many. */
static unsigned ctx_thresholds(const struct ctx *c, unsigned *vals, unsigned cap) {
        unsigned nv = 0;
        for (unsigned i = 0; i < c->n; i++)
                for (unsigned j = i + 1; j < c->n; j++) {
                        unsigned b = c->bw[i][j];
                        unsigned p = 0;
                        while (p < nv && vals[p] > b)
                                p++;
                        if ((p < nv && vals[p] == b) || nv == cap)
                                continue;
                        memmove(&vals[p + 1], &vals[p], (nv - p) * sizeof vals[0]);
                        vals[p] = b;
                        nv++;
                }
        return nv;
}

/* Step 3 for k >= 2 with free choice: the best ring, then the best pair total, then what it leaves. */
static int ctx_search_multi(struct ctx *c, const struct alloc_request *req, const unsigned *vals, unsigned nv,
                            bool floor, unsigned navail, alloc_set_t *ret_pick, bool *ret_exact, struct gs_error *err) {
        char b1[8];
        /* Candidates: compatible with every must-include GPU. */
        uint64_t allowed = (c->n == 64) ? ~0ULL : ((1ULL << c->n) - 1);
        for (uint64_t m = c->must; m; m &= m - 1)
                allowed &= c->compat[ctz64(m)] | (1ULL << ctz64(m));
        c->nodes = 0;
        c->budget = c->n <= 16 ? SEARCH_BUDGET_SMALL : SEARCH_BUDGET_LARGE;
        c->exhausted = false;
        c->have = false;
        c->first_only = false;
        c->collect = false;
        c->nalt = 0;
        unsigned found = 0;
        if (c->n > LOOKAHEAD_MAX && !floor)
                ctx_ultra_pick(c, vals, nv);
        for (unsigned v = 0; v < nv && !c->have; v++) {
                ctx_try_threshold(c, vals[v], allowed);
                found = v;
        }
        if (c->have && !c->exhausted && c->n <= LOOKAHEAD_MAX && c->k < c->n)
                ctx_pick_among_equals(c, vals[found], allowed, vals, nv);
        if (!c->have) {
                /* The lowest threshold admits every compatible set; only the floor or a search cut
                 * short by the budget can leave us here. */
                if (floor)
                        return gs_error_set(err, -ERANGE,
                                            "no %u GPUs among the %u available are all linked by %s or better", c->k,
                                            navail, topo_link_name(req->min_link, b1));
                return gs_error_set(err, -EDEADLK, "internal error: no set found");
        }
        *ret_exact = !c->exhausted;
        alloc_set_t pick = 0;
        for (uint64_t m = c->best; m; m &= m - 1)
                pick |= 1ULL << c->idx[ctz64(m)];
        *ret_pick = pick;
        return 0;
}

/* Step 3: the set. */
static int pick_search(struct ctx *c, const struct alloc_request *req, unsigned nmust, unsigned navail, bool floor,
                       alloc_set_t *ret_pick, bool *ret_exact, struct gs_error *err) {
        char b1[8];
        if (floor)
                for (uint64_t m = c->must; m; m &= m - 1) {
                        unsigned v = ctz64(m);
                        if ((c->must & ~(1ULL << v) & ~c->compat[v]) != 0)
                                return gs_error_set(err, -ERANGE,
                                                    "the must-include GPUs are linked below the required %s",
                                                    topo_link_name(req->min_link, b1));
                }
        unsigned vals[272]; /* at most 255 NVLink counts + the PCIe levels */
        unsigned nv = ctx_thresholds(c, vals, sizeof vals / sizeof vals[0]);
        *ret_exact = true;
        if (c->k == 1)
                *ret_pick = nmust ? req->must_include : 1ULL << c->idx[ctx_pick_single(c, vals, nv)];
        else if (c->k == nmust)
                *ret_pick = req->must_include;
        else {
                int r = ctx_search_multi(c, req, vals, nv, floor, navail, ret_pick, ret_exact, err);
                if (r < 0)
                        return r;
        }
        if (floor && c->k >= 2 && !link_meets(alloc_worst_link(c->t, *ret_pick), req->min_link))
                return gs_error_set(err, -ERANGE, "no %u GPUs among the %u available are all linked by %s or better",
                                    c->k, navail, topo_link_name(req->min_link, b1));
        return 0;
}

/* Step 4: the result and one line for a person. */
static void pick_explain(const struct topo *t, const struct ctx *c, alloc_set_t pick, unsigned nmust, unsigned navail,
                         bool exact, struct alloc_result *r) {
        char b2[8];
        result_fill(t, pick, r);
        if (c->k == 1 && nmust)
                snprintf(r->why, sizeof r->why, "GPU %d: the must-include GPU", r->gpus[0]);
        else if (c->k == 1)
                snprintf(r->why, sizeof r->why,
                         "GPU %d: a single GPU has no ring; this one leaves the other %u free GPUs best connected "
                         "(best rings left for 8, 4, 2 GPUs, then the most weakly wired GPU)",
                         r->gpus[0], navail - 1);
        else if (c->k == nmust)
                snprintf(r->why, sizeof r->why,
                         "exactly the must-include GPUs: ring %u GB/s, worst link %s, pairs %u GB/s", r->ring_bw,
                         topo_link_name(r->worst, b2), r->pair_total);
        else
                snprintf(
                        r->why, sizeof r->why,
                        "ring %u GB/s, the best any %u of the %u free GPUs%s reach; pair total %u GB/s, the most among "
                        "those%s; %s",
                        r->ring_bw, c->k, navail, nmust ? " with the must-include ones" : "", r->pair_total,
                        c->nalt > 1 ? "; of the equal sets, it leaves the best rings free" : "",
                        exact ? "exact search" : "search budget reached: best found, not proven best");
}

int alloc_pick_gpus(const struct topo *t, const struct alloc_request *req, struct alloc_result *ret,
                    struct gs_error *err) {
        unsigned nmust = 0, navail = 0;
        if (!ret)
                return gs_error_set(err, -EINVAL, "internal error: missing topology, request or result");
        int r = pick_validate(t, req, &nmust, &navail, err);
        if (r < 0)
                return r;
        bool floor = req->min_link.pcie != 0 || req->min_link.nvlinks != 0;
        struct ctx c;
        ctx_build(&c, t, req, floor);
        alloc_set_t pick = 0;
        bool exact = true;
        r = pick_search(&c, req, nmust, navail, floor, &pick, &exact, err);
        if (r < 0)
                return r;
        struct alloc_result res;
        pick_explain(t, &c, pick, nmust, navail, exact, &res);
        *ret = res;
        return 0;
}

/* ---------- sets as text ---------- */

int alloc_set_parse(const char *s, unsigned max, alloc_set_t *ret) {
        if (!s || !ret || max > MAXG)
                return -EINVAL;
        alloc_set_t set = 0;
        const char *p = s;
        if (*p == '\0') {
                *ret = 0;
                return 0;
        }
        for (;;) {
                unsigned lo = 0, hi;
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                while (*p >= '0' && *p <= '9') {
                        lo = lo * 10 + (unsigned)(*p - '0');
                        if (lo >= max)
                                return -EINVAL;
                        p++;
                }
                hi = lo;
                if (*p == '-') {
                        p++;
                        if (*p < '0' || *p > '9')
                                return -EINVAL;
                        hi = 0;
                        while (*p >= '0' && *p <= '9') {
                                hi = hi * 10 + (unsigned)(*p - '0');
                                if (hi >= max)
                                        return -EINVAL;
                                p++;
                        }
                        if (hi < lo)
                                return -EINVAL;
                }
                for (unsigned i = lo; i <= hi; i++)
                        set |= 1ULL << i;
                if (*p == '\0')
                        break;
                if (*p != ',')
                        return -EINVAL;
                p++;
        }
        *ret = set;
        return 0;
}

char *alloc_set_format(alloc_set_t set, char *buf, size_t len) {
        if (!buf || len == 0)
                return buf;
        size_t o = 0;
        buf[0] = '\0';
        for (alloc_set_t m = set; m; m &= m - 1) {
                int w = snprintf(buf + o, len - o, o ? ",%u" : "%u", ctz64(m));
                if (w < 0 || (size_t)w >= len - o) {
                        buf[o] = '\0';
                        break;
                }
                o += (size_t)w;
        }
        return buf;
}
