/* SPDX-License-Identifier: Apache-2.0 */
/*
 * topo — link names, bandwidth estimates, ordering and invariants of the topology model.
 * Pure: no I/O, no allocation, no global state.
 */
#include "topo/topo.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "util/util.h"

static const char *const level_names[] = {
        [TOPO_LEVEL_UNKNOWN] = "?", [TOPO_LEVEL_SYS] = "SYS", [TOPO_LEVEL_NODE] = "NODE", [TOPO_LEVEL_PHB] = "PHB",
        [TOPO_LEVEL_PXB] = "PXB",   [TOPO_LEVEL_PIX] = "PIX", [TOPO_LEVEL_SELF] = "X",
};

/* GB/s per level, index = enum topo_level. Unknown is assumed to be the worst real path. */
static const unsigned level_bw[] = {
        [TOPO_LEVEL_UNKNOWN] = 5, [TOPO_LEVEL_SYS] = 5,  [TOPO_LEVEL_NODE] = 7, [TOPO_LEVEL_PHB] = 8,
        [TOPO_LEVEL_PXB] = 11,    [TOPO_LEVEL_PIX] = 12, [TOPO_LEVEL_SELF] = 0,
};

#define NVLINK_BW 25u

void topo_init(struct topo *t) {
        memset(t, 0, sizeof *t);
        for (unsigned i = 0; i < TOPO_MAX_GPUS; i++) {
                t->gpu[i].index = (int)i;
                t->gpu[i].minor = -1;
                t->gpu[i].numa_node = -1;
                t->gpu[i].mig_mode = -1;
                t->link[i][i].pcie = TOPO_LEVEL_SELF;
        }
}

const char *topo_level_name(enum topo_level l) {
        if ((unsigned)l >= ELEMENTSOF(level_names))
                return "?";
        return level_names[l];
}

const char *topo_link_name(struct topo_link l, char buf[static 8]) {
        if (l.nvlinks > 0)
                snprintf(buf, 8, "NV%u", (unsigned)l.nvlinks);
        else
                snprintf(buf, 8, "%s", topo_level_name((enum topo_level)l.pcie));
        return buf;
}

int topo_link_from_name(const char *s, size_t len, struct topo_link *ret) {
        static const struct {
                const char *name;
                enum topo_level level;
        } names[] = {
                { "X", TOPO_LEVEL_SELF },  { "PIX", TOPO_LEVEL_PIX },   { "PXB", TOPO_LEVEL_PXB },
                { "PHB", TOPO_LEVEL_PHB }, { "NODE", TOPO_LEVEL_NODE }, { "SYS", TOPO_LEVEL_SYS },
                { "SOC", TOPO_LEVEL_SYS },
        };
        if (len >= 3 && strncasecmp(s, "NV", 2) == 0) {
                unsigned n = 0;
                for (size_t i = 2; i < len; i++) {
                        if (s[i] < '0' || s[i] > '9')
                                return -EINVAL;
                        n = n * 10 + (unsigned)(s[i] - '0');
                        if (n > 255)
                                return -EINVAL;
                }
                if (n == 0)
                        return -EINVAL;
                *ret = (struct topo_link){ .pcie = TOPO_LEVEL_UNKNOWN, .nvlinks = (uint8_t)n };
                return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (strlen(names[i].name) == len && strncasecmp(s, names[i].name, len) == 0) {
                        *ret = (struct topo_link){ .pcie = (uint8_t)names[i].level, .nvlinks = 0 };
                        return 0;
                }
        return -EINVAL;
}

unsigned topo_link_bw(struct topo_link l) {
        if (l.nvlinks > 0)
                return NVLINK_BW * l.nvlinks;
        if (l.pcie >= ELEMENTSOF(level_bw))
                return 0;
        return level_bw[l.pcie];
}

int topo_link_cmp(struct topo_link a, struct topo_link b) {
        unsigned ba = topo_link_bw(a), bb = topo_link_bw(b);
        if (ba != bb)
                return ba < bb ? -1 : 1;
        if (a.pcie != b.pcie)
                return a.pcie < b.pcie ? -1 : 1;
        return 0;
}

void topo_set_link(struct topo *t, unsigned a, unsigned b, struct topo_link l) {
        t->link[a][b] = l;
        t->link[b][a] = l;
}

int topo_validate(const struct topo *t, struct gs_error *ret_err) {
        struct gs_error e = { 0 };
        if (t->n_gpus > TOPO_MAX_GPUS) {
                gs_error_set(&e, -EINVAL, "%u GPUs, at most %d are supported", t->n_gpus, TOPO_MAX_GPUS);
                goto fail;
        }
        for (unsigned i = 0; i < t->n_gpus; i++) {
                if (t->gpu[i].index != (int)i) {
                        gs_error_set(&e, -EINVAL, "GPU at position %u has index %d", i, t->gpu[i].index);
                        goto fail;
                }
                if (t->link[i][i].pcie != TOPO_LEVEL_SELF || t->link[i][i].nvlinks != 0) {
                        gs_error_set(&e, -EINVAL, "GPU%u: diagonal is not X", i);
                        goto fail;
                }
                for (unsigned j = 0; j < t->n_gpus; j++) {
                        if (i == j)
                                continue;
                        struct topo_link a = t->link[i][j], b = t->link[j][i];
                        if (a.pcie != b.pcie || a.nvlinks != b.nvlinks) {
                                char na[8], nb[8];
                                gs_error_set(&e, -EINVAL,
                                             "matrix is not symmetric: GPU%u-GPU%u is %s but GPU%u-GPU%u is %s", i, j,
                                             topo_link_name(a, na), j, i, topo_link_name(b, nb));
                                goto fail;
                        }
                        if (a.pcie == TOPO_LEVEL_SELF) {
                                gs_error_set(&e, -EINVAL, "GPU%u-GPU%u: X off the diagonal", i, j);
                                goto fail;
                        }
                }
        }
        return 0;
fail:
        if (ret_err)
                *ret_err = e;
        return -EINVAL;
}
