/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tree — the tree view of a node (system → NUMA node → host bridge → PCIe switches → GPUs),
 * derived from pair levels by single-linkage grouping at each level. Pure: no I/O, no heap.
 */
#include <string.h>

#include "topo/topo.h"
#include "util/util.h"

typedef uint64_t gset;

/* Group thresholds, outermost first: GPUs joined by a PCIe path better than `above`. */
static const struct {
        enum topo_tree_kind kind;
        enum topo_level above;
} levels[] = {
        { TOPO_TREE_NUMA, TOPO_LEVEL_SYS },
        { TOPO_TREE_HOSTBRIDGE, TOPO_LEVEL_NODE },
        { TOPO_TREE_SWITCHTREE, TOPO_LEVEL_PHB },
        { TOPO_TREE_SWITCH, TOPO_LEVEL_PXB },
};

static unsigned lowest(gset s) {
        return (unsigned)__builtin_ctzll(s);
}

/* The connected component of `start` within `set` using links better than `above`. */
static gset component(const struct topo *t, gset set, unsigned start, enum topo_level above) {
        gset comp = 1ULL << start, frontier = comp;
        while (frontier) {
                unsigned i = lowest(frontier);
                frontier &= frontier - 1;
                for (gset rest = set & ~comp; rest; rest &= rest - 1) {
                        unsigned j = lowest(rest);
                        if (t->link[i][j].pcie > above) {
                                comp |= 1ULL << j;
                                frontier |= 1ULL << j;
                        }
                }
        }
        return comp;
}

/* A multi-GPU group is named by its worst internal PCIe path. */
static enum topo_tree_kind kind_of_group(const struct topo *t, gset set, enum topo_tree_kind split_kind) {
        if (__builtin_popcountll(set) < 2)
                return split_kind;
        enum topo_level worst = TOPO_LEVEL_SELF;
        for (gset a = set; a; a &= a - 1)
                for (gset b = a & (a - 1); b; b &= b - 1) {
                        enum topo_level l = (enum topo_level)t->link[lowest(a)][lowest(b)].pcie;
                        if (l < worst)
                                worst = l;
                }
        switch (worst) {
                case TOPO_LEVEL_PIX: return TOPO_TREE_SWITCH;
                case TOPO_LEVEL_PXB: return TOPO_TREE_SWITCHTREE;
                case TOPO_LEVEL_PHB: return TOPO_TREE_HOSTBRIDGE;
                default: return TOPO_TREE_NUMA;
        }
}

static int add_node(struct topo_tree *tr, enum topo_tree_kind kind, int parent, int gpu, unsigned depth) {
        struct topo_tree_node *n = &tr->nodes[tr->n_nodes];
        *n = (struct topo_tree_node){ .kind = kind, .parent = parent, .gpu = gpu, .numa_node = -1, .depth = depth };
        return (int)tr->n_nodes++;
}

static void build(const struct topo *t, struct topo_tree *tr, int parent, gset set, unsigned level, unsigned depth) {
        if (level >= ELEMENTSOF(levels)) {
                for (gset s = set; s; s &= s - 1)
                        add_node(tr, TOPO_TREE_GPU, parent, (int)lowest(s), depth);
                return;
        }
        /* split into components; fold the level when it does not split anything */
        gset comps[TOPO_MAX_GPUS];
        unsigned n = 0;
        for (gset rest = set; rest;) {
                gset c = component(t, rest, lowest(rest), levels[level].above);
                comps[n++] = c;
                rest &= ~c;
        }
        if (n == 1 && parent >= 0) {
                build(t, tr, parent, set, level + 1, depth);
                return;
        }
        for (unsigned k = 0; k < n; k++) {
                if (__builtin_popcountll(comps[k]) == 1) {
                        add_node(tr, TOPO_TREE_GPU, parent, (int)lowest(comps[k]), depth);
                        continue;
                }
                /* Socket-level groups are NUMA nodes whatever lies inside; deeper groups are named by
                 * their worst internal path (a PIX pair is one switch even if split at PHB). */
                enum topo_tree_kind kind = level == 0 ? TOPO_TREE_NUMA : kind_of_group(t, comps[k], levels[level].kind);
                int node = add_node(tr, kind, parent, -1, depth);
                int numa = t->gpu[lowest(comps[k])].numa_node;
                for (gset s = comps[k]; s; s &= s - 1)
                        if (t->gpu[lowest(s)].numa_node != numa)
                                numa = -1;
                tr->nodes[node].numa_node = numa;
                build(t, tr, node, comps[k], level + 1, depth + 1);
        }
}

void topo_tree_build(const struct topo *t, struct topo_tree *ret) {
        ret->n_nodes = 0;
        int root = add_node(ret, TOPO_TREE_SYSTEM, -1, -1, 0);
        gset all = t->n_gpus >= 64 ? ~0ULL : (1ULL << t->n_gpus) - 1;
        if (all)
                build(t, ret, root, all, 0, 1);
}

const char *topo_tree_kind_name(enum topo_tree_kind k) {
        switch (k) {
                case TOPO_TREE_SYSTEM: return "system";
                case TOPO_TREE_NUMA: return "NUMA node";
                case TOPO_TREE_HOSTBRIDGE: return "host bridge";
                case TOPO_TREE_SWITCHTREE: return "PCIe switches";
                case TOPO_TREE_SWITCH: return "PCIe switch";
                case TOPO_TREE_GPU: return "GPU";
        }
        return "?";
}
