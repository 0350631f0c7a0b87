/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dra-pick — how good the DRA scheduler's pick of a multi-GPU claim is next to gpuslice's allocator
 * (src/alloc), by ring bandwidth (alloc_ring_bw), on the reference topologies. The scheduler has no
 * scoring (resource.k8s.io/v1: "the scheduler will select the first set of devices that satisfies all
 * the requests"): it takes devices in the order the slices list them (gpu-0, gpu-1, ...) and keeps a
 * set only when every matchAttribute constraint holds, backtracking otherwise. Modelled here with the
 * attributes the driver publishes (src/dra/slices.h: nvlinkIsland, pcieSwitch; pcieRoot as the host
 * bridge groups of the topology). For each topology, claim size and constraint: every free set of the
 * node is a case when the node has at most 8 GPUs (all 2^n subsets with enough GPUs); the mean ring
 * bandwidth of the two picks over the cases both can serve, and how many cases only the allocator serves
 * (the constraint leaves the scheduler nothing).
 *
 *   dra-pick [TOPOLOGY...]     default: the reference topologies and tests/data/dra/nvlink-pairs.topo
 *
 * Deterministic; prints a markdown table (docs/dra.md, "Multi-GPU claims"). Never a test: numbers only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/alloc.h"
#include "dra/slices.h"
#include "topo/topo.h"
#include "util/util.h"

enum constraint {
        C_NONE,
        C_ISLAND,
        C_SWITCH,
        C_ROOT,
        C_MAX
};
static const char *const cname[] = { "none", "nvlinkIsland", "pcieSwitch", "pcieRoot" };

/* Host bridge groups: GPUs whose link is PHB or closer share a root complex. */
static void roots(const struct topo *t, int out[TOPO_MAX_GPUS]) {
        for (unsigned i = 0; i < t->n_gpus; i++) {
                out[i] = (int)i;
                for (unsigned j = 0; j < i; j++) {
                        struct topo_link l = topo_get_link(t, i, j);
                        if (l.pcie >= TOPO_LEVEL_PHB && l.pcie != TOPO_LEVEL_SELF) {
                                out[i] = out[j];
                                break;
                        }
                }
        }
}

/* The scheduler's first fit: k GPUs of `avail` in index order, all with one value of `attr` (NULL: any). */
static bool first_fit(unsigned n, alloc_set_t avail, unsigned k, const int *attr, alloc_set_t *ret) {
        for (unsigned start = 0; start < n; start++) {
                if (!(avail >> start & 1))
                        continue;
                alloc_set_t s = 0;
                unsigned got = 0;
                for (unsigned g = start; g < n && got < k; g++)
                        if ((avail >> g & 1) && (!attr || attr[g] == attr[start])) {
                                s |= (alloc_set_t)1 << g;
                                got++;
                        }
                if (got == k) {
                        *ret = s;
                        return true;
                }
                if (!attr)
                        return false;
        }
        return false;
}

static void run(const char *path) {
        _cleanup_(freep) char *text = NULL;
        size_t len = 0;
        struct topo *t = malloc(sizeof *t);
        struct gs_error err = { 0 };
        if (!t || read_file(path, 1 << 20, &text, &len) < 0 || topo_parse(text, len, t, &err) < 0) {
                fprintf(stderr, "dra-pick: %s: %s\n", path, err.message);
                free(t);
                return;
        }
        int attr[C_MAX][TOPO_MAX_GPUS];
        dra_nvlink_islands(t, attr[C_ISLAND]);
        dra_pcie_switch_groups(t, attr[C_SWITCH]);
        roots(t, attr[C_ROOT]);
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        unsigned n = MIN(t->n_gpus, 8u);
        for (unsigned k = 2; k <= 4; k += 2)
                for (int c = C_NONE; c < C_MAX; c++) {
                        double sched = 0, mine = 0, worst = 1e9;
                        unsigned both = 0, only_alloc = 0, cases = 0, worse = 0;
                        for (alloc_set_t avail = 0; avail < ((alloc_set_t)1 << n); avail++) {
                                if ((unsigned)__builtin_popcountll(avail) < k)
                                        continue;
                                cases++;
                                struct alloc_request req = { .count = k, .available = avail };
                                struct alloc_result best;
                                if (alloc_pick_gpus(t, &req, &best, NULL) < 0)
                                        continue;
                                alloc_set_t s;
                                if (!first_fit(n, avail, k, c == C_NONE ? NULL : attr[c], &s)) {
                                        only_alloc++;
                                        continue;
                                }
                                unsigned a = alloc_ring_bw(t, s);
                                both++;
                                sched += a;
                                mine += best.ring_bw;
                                worse += a < best.ring_bw;
                                if (best.ring_bw)
                                        worst = MIN(worst, (double)a / best.ring_bw);
                        }
                        if (!both) {
                                printf("| %s | %u | %s | %u | — | — | — | — | %u |\n", base, k, cname[c], cases,
                                       only_alloc);
                                continue;
                        }
                        printf("| %s | %u | %s | %u | %.1f | %.1f | %.0f %% | %.0f %% (%u) | %u |\n", base, k, cname[c],
                               cases, sched / both, mine / both, 100.0 * sched / mine, 100.0 * worst, worse,
                               only_alloc);
                }
        free(t);
}

int main(int argc, char **argv) {
        static const char *const dflt[] = { GPUSLICE_TOPO_DIR "/pcie-8gpu-pix-phb-sys.topo",
                                            GPUSLICE_TOPO_DIR "/seed000-8gpu-pcie-2socket.topo",
                                            GPUSLICE_TOPO_DIR "/dgx1-v100-hybrid-cube-mesh.topo",
                                            GPUSLICE_TOPO_DIR "/dgx-a100-nvswitch.topo",
                                            GPUSLICE_SOURCE_DIR "/tests/data/dra/nvlink-pairs.topo" };
        printf("| topology | GPUs | constraint | free sets | scheduler ring GB/s | allocator ring GB/s | "
               "scheduler / allocator | worst case (sets worse) | only the allocator serves |\n");
        printf("|---|---|---|---|---|---|---|---|---|\n");
        if (argc > 1)
                for (int i = 1; i < argc; i++)
                        run(argv[i]);
        else
                for (size_t i = 0; i < ELEMENTSOF(dflt); i++)
                        run(dflt[i]);
        return 0;
}
