/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mig — the simulated hardware's Multi-Instance GPU rules: the GPU instance profiles of each model
 * that has MIG (A100-40GB, A100-80GB, H100-80GB, H200), where each profile may be placed, which
 * combinations fit, the ids the driver gives GPU and compute instances, MIG device indices and
 * UUIDs, and the memory a MIG device sees. The NVML (nvml-mig.c), CUDA (cuda.c) and node-description
 * (mig-node.c) code all go through these functions, so the rules exist once in the simulator.
 *
 * These are the device's rules, written from NVIDIA's MIG user guide and real `nvidia-smi mig`
 * listings (docs/mig.md says which numbers are measured and which are not); gpuslice's own planner
 * (src/mig) is a separate implementation on purpose: it learns the rules through NVML, and tests
 * hold one against the other. Must never take the state lock itself (callers hold it where the
 * state is involved), never allocate, never log.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "nvml/nvml-abi.h"
#include "sim/sim.h"
#include "util/util.h"

#define COMPUTE_SLICES 7u
#define MEMORY_SLICES 8u

/* Starts as a bit mask over memory slices. */
#define S_ALL7 0x7fu  /* 0..6 */
#define S_EVEN4 0x55u /* 0, 2, 4, 6 */
#define S_EVEN3 0x15u /* 0, 2, 4 */
#define S_HALF 0x11u  /* 0, 4 */
#define S_ZERO 0x01u  /* 0 */

/* Columns: NVML constant, id (nvidia-smi's ID), name, compute slices, memory slices, instances, SMs, copy
 * engines, decoders, encoders, JPEG, OFA, MiB, starts. */
#define ROW(c, id, name, sl, ms, n, sm, ce, dec, enc, jpg, ofa, mib, st) \
        { c, id, name, sl, ms, n, sm, ce, dec, enc, jpg, ofa, mib, st }

/* A100-SXM4-40GB: NVIDIA's MIG user guide (profile table, `nvidia-smi mig -lgip` / `-lgipp` listings). */
static const struct sim_mig_profile a100_40[] = {
        ROW(NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.5gb", 1, 1, 7, 14, 1, 0, 0, 0, 0, 4864, S_ALL7),
        ROW(NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.5gb+me", 1, 1, 1, 14, 1, 1, 0, 1, 1, 4864, S_ALL7),
        ROW(NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.10gb", 1, 2, 4, 14, 1, 1, 0, 0, 0, 9856, S_EVEN4),
        ROW(NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.10gb", 2, 2, 3, 28, 2, 1, 0, 0, 0, 9856, S_EVEN3),
        ROW(NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.20gb", 3, 4, 2, 42, 3, 2, 0, 0, 0, 19968, S_HALF),
        ROW(NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.20gb", 4, 4, 1, 56, 4, 2, 0, 0, 0, 19968, S_ZERO),
        ROW(NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.40gb", 7, 8, 1, 98, 7, 5, 0, 1, 1, 40192, S_ZERO),
};

/* A100-80GB: the guide's names, the 40GB part's geometry; MiB from NVIDIA's go-nvml mock (not measured). */
static const struct sim_mig_profile a100_80[] = {
        ROW(NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.10gb", 1, 1, 7, 14, 1, 0, 0, 0, 0, 9856, S_ALL7),
        ROW(NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.10gb+me", 1, 1, 1, 14, 1, 1, 0, 1, 1, 9856, S_ALL7),
        ROW(NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.20gb", 1, 2, 4, 14, 1, 1, 0, 0, 0, 19968, S_EVEN4),
        ROW(NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.20gb", 2, 2, 3, 28, 2, 1, 0, 0, 0, 19968, S_EVEN3),
        ROW(NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.40gb", 3, 4, 2, 42, 3, 2, 0, 0, 0, 40192, S_HALF),
        ROW(NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.40gb", 4, 4, 1, 56, 4, 2, 0, 0, 0, 40192, S_ZERO),
        ROW(NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.80gb", 7, 8, 1, 98, 7, 5, 0, 1, 1, 80384, S_ZERO),
};

/* H100 80GB (SXM5, 132 SMs): a real `nvidia-smi mig -lgip` listing (GiB × 1024 = MiB); placements as on
 * the A100 (third-party `-lgipp` listings, no NVIDIA table). */
static const struct sim_mig_profile h100_80[] = {
        ROW(NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.10gb", 1, 1, 7, 16, 1, 1, 0, 1, 0, 9984, S_ALL7),
        ROW(NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.10gb+me", 1, 1, 1, 16, 1, 1, 0, 1, 1, 9984, S_ALL7),
        ROW(NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.20gb", 1, 2, 4, 26, 1, 1, 0, 1, 0, 20096, S_EVEN4),
        ROW(NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.20gb", 2, 2, 3, 32, 2, 2, 0, 2, 0, 20096, S_EVEN3),
        ROW(NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.40gb", 3, 4, 2, 60, 3, 3, 0, 3, 0, 40448, S_HALF),
        ROW(NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.40gb", 4, 4, 1, 64, 4, 4, 0, 4, 0, 40448, S_ZERO),
        ROW(NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.80gb", 7, 8, 1, 132, 8, 7, 0, 7, 1, 81152, S_ZERO),
};

/* H200 141GB: the guide's names and engine counts; MiB from go-nvml's mock and SMs as on the H100 (not
 * measured); placements as on the H100 (not in NVIDIA's tables). */
static const struct sim_mig_profile h200[] = {
        ROW(NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.18gb", 1, 1, 7, 16, 1, 1, 0, 1, 0, 18432, S_ALL7),
        ROW(NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.18gb+me", 1, 1, 1, 16, 1, 1, 0, 1, 1, 18432, S_ALL7),
        ROW(NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.35gb", 1, 2, 4, 26, 1, 1, 0, 1, 0, 35840, S_EVEN4),
        ROW(NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.35gb", 2, 2, 3, 32, 2, 2, 0, 2, 0, 35840, S_EVEN3),
        ROW(NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.71gb", 3, 4, 2, 60, 3, 3, 0, 3, 0, 72704, S_HALF),
        ROW(NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.71gb", 4, 4, 1, 64, 4, 4, 0, 4, 0, 72704, S_ZERO),
        ROW(NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.141gb", 7, 8, 1, 132, 8, 7, 0, 7, 1, 144384, S_ZERO),
};

static const struct sim_mig_model models[] = {
        { "A100-40GB", "A100", NULL, a100_40, ELEMENTSOF(a100_40) },
        { "A100-80GB", "A100", "80GB", a100_80, ELEMENTSOF(a100_80) },
        { "H100-80GB", "H100", NULL, h100_80, ELEMENTSOF(h100_80) },
        { "H200", "H200", NULL, h200, ELEMENTSOF(h200) },
};

const struct sim_mig_model *sim_mig_model(const struct topo_gpu *g) {
        /* the most specific match: "A100 … 80GB" before "A100" */
        const struct sim_mig_model *best = NULL;
        for (size_t i = 0; i < ELEMENTSOF(models); i++) {
                const struct sim_mig_model *m = &models[i];
                if (!strstr(g->name, m->match) || (m->also && !strstr(g->name, m->also)))
                        continue;
                if (!best || (m->also && !best->also))
                        best = m;
        }
        /* H100 NVL (94GB) and GH200 (96GB) have other tables, not simulated */
        if (best && streq(best->label, "H100-80GB") &&
            (strstr(g->name, "NVL") || strstr(g->name, "94GB") || strstr(g->name, "96GB") || strstr(g->name, "GH200")))
                return NULL;
        return best;
}

const char *sim_mig_models(void) {
        return "A100 (40GB), A100 80GB, H100 80GB, H200";
}

const struct sim_mig_profile *sim_mig_profile(const struct sim_mig_model *m, unsigned nvml_profile) {
        for (unsigned i = 0; m && i < m->n_profiles; i++)
                if (m->profiles[i].profile == nvml_profile)
                        return &m->profiles[i];
        return NULL;
}

const struct sim_mig_profile *sim_mig_profile_by_id(const struct sim_mig_model *m, unsigned id) {
        for (unsigned i = 0; m && i < m->n_profiles; i++)
                if (m->profiles[i].id == id)
                        return &m->profiles[i];
        return NULL;
}

const struct sim_mig_profile *sim_mig_profile_by_name(const struct sim_mig_model *m, const char *name) {
        for (unsigned i = 0; m && i < m->n_profiles; i++)
                if (streq(m->profiles[i].name, name))
                        return &m->profiles[i];
        return NULL;
}

unsigned sim_mig_placements(const struct sim_mig_profile *p, unsigned *ret_starts) {
        unsigned n = 0;
        for (unsigned s = 0; s < MEMORY_SLICES; s++)
                if (p->starts & (1u << s))
                        ret_starts[n++] = s;
        return n;
}

/* The driver's GPU instance ids follow the placement: the nodes of a binary tree over the 8 memory
 * slices, the whole GPU first (0), each level from its highest start down — 3g at 4:4 is 1, at 0:4 is 2
 * (as NVIDIA's listings show); the 15 ids are mig-minors' gi0..gi14. */
uint32_t sim_mig_gi_id(unsigned start, unsigned size) {
        unsigned level = size >= 8 ? 0 : size >= 4 ? 1 : size >= 2 ? 2 : 3;
        return (2u << level) - 2 - start / size;
}

struct sim_mig_gi *sim_mig_gi_find(struct sim_mig_gpu *g, uint32_t id) {
        for (unsigned i = 0; i < SIM_MIG_MAX_GI; i++)
                if (g->gi[i].used && g->gi[i].id == id)
                        return &g->gi[i];
        return NULL;
}

struct sim_mig_ci *sim_mig_ci_find(struct sim_mig_gi *gi, uint32_t id) {
        for (unsigned i = 0; i < SIM_MIG_MAX_CI; i++)
                if (gi->ci[i].used && gi->ci[i].id == id)
                        return &gi->ci[i];
        return NULL;
}

static unsigned gi_compute_slices(const struct sim_mig_model *m, const struct sim_mig_gi *gi) {
        const struct sim_mig_profile *p = sim_mig_profile(m, gi->profile);
        return p ? p->slices : 0;
}

/* Whether profile p fits at memory slice `start` next to the GPU's instances: a placement of the profile,
 * free memory slices, enough free compute slices, fewer than its instance count (a +me profile: one). */
static int gi_fits(const struct sim_mig_gpu *g, const struct sim_mig_model *m, const struct sim_mig_profile *p,
                   unsigned start) {
        if (start >= MEMORY_SLICES || !(p->starts & (1u << start)))
                return -EINVAL;
        unsigned compute = 0, same = 0;
        for (unsigned i = 0; i < SIM_MIG_MAX_GI; i++) {
                const struct sim_mig_gi *o = &g->gi[i];
                if (!o->used)
                        continue;
                compute += gi_compute_slices(m, o);
                same += o->profile == p->profile;
                if (start < o->start + o->size && o->start < start + p->mem_slices)
                        return -ENOSPC;
        }
        if (compute + p->slices > COMPUTE_SLICES || same >= p->instances)
                return -ENOSPC;
        return 0;
}

int sim_mig_gi_create(struct sim_mig_gpu *g, const struct sim_mig_model *m, unsigned nvml_profile, int start,
                      struct sim_mig_gi **ret) {
        const struct sim_mig_profile *p = sim_mig_profile(m, nvml_profile);
        if (!p)
                return -EOPNOTSUPP;
        int at = -1, r = -ENOSPC;
        if (start >= 0)
                at = (r = gi_fits(g, m, p, (unsigned)start)) == 0 ? start : -1;
        else /* no placement asked: the lowest free one, as the driver picks */
                for (unsigned s = 0; s < MEMORY_SLICES && at < 0; s++)
                        if ((p->starts & (1u << s)) && gi_fits(g, m, p, s) == 0)
                                at = (int)s;
        if (at < 0)
                return r == -EINVAL ? -EINVAL : -ENOSPC;
        for (unsigned i = 0; i < SIM_MIG_MAX_GI; i++) {
                struct sim_mig_gi *gi = &g->gi[i];
                if (gi->used)
                        continue;
                memset(gi, 0, sizeof *gi);
                gi->profile = nvml_profile;
                gi->start = (uint32_t)at;
                gi->size = p->mem_slices;
                gi->id = sim_mig_gi_id((unsigned)at, p->mem_slices);
                gi->used = 1;
                if (ret)
                        *ret = gi;
                return 0;
        }
        return -ENOSPC;
}

unsigned sim_mig_gi_remaining(const struct sim_mig_gpu *g, const struct sim_mig_model *m, unsigned nvml_profile) {
        const struct sim_mig_profile *p = sim_mig_profile(m, nvml_profile);
        if (!p)
                return 0;
        struct sim_mig_gpu scratch = *g;
        unsigned n = 0;
        while (sim_mig_gi_create(&scratch, m, nvml_profile, -1, NULL) == 0)
                n++;
        return n;
}

int sim_mig_gi_destroy(struct sim_mig_gi *gi) {
        for (unsigned i = 0; i < SIM_MIG_MAX_CI; i++)
                if (gi->ci[i].used)
                        return -EBUSY; /* its compute instances go first */
        memset(gi, 0, sizeof *gi);
        return 0;
}

/* ---- compute instances ---- */

static const unsigned ci_slices_of[] = {
        [NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE] = 1, [NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE] = 2,
        [NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE] = 3, [NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE] = 4,
        [NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE] = 7,
};

int sim_mig_ci_shape(const struct sim_mig_model *m, const struct sim_mig_gi *gi, unsigned ci_profile,
                     struct sim_mig_ci_shape *ret) {
        const struct sim_mig_profile *p = sim_mig_profile(m, gi->profile);
        if (!p || ci_profile >= ELEMENTSOF(ci_slices_of) || !ci_slices_of[ci_profile])
                return -EOPNOTSUPP;
        unsigned c = ci_slices_of[ci_profile];
        if (c > p->slices)
                return -EOPNOTSUPP;
        *ret = (struct sim_mig_ci_shape){ .profile = ci_profile,
                                          .slices = c,
                                          .align = c == 3 ? 4 : c,
                                          .instances = p->slices / c,
                                          .sms = p->sms * c / p->slices };
        return 0;
}

int sim_mig_ci_full_profile(const struct sim_mig_model *m, const struct sim_mig_gi *gi) {
        const struct sim_mig_profile *p = sim_mig_profile(m, gi->profile);
        for (unsigned c = 0; p && c < ELEMENTSOF(ci_slices_of); c++)
                if (ci_slices_of[c] == p->slices)
                        return (int)c;
        return -EOPNOTSUPP;
}

static int ci_fits(const struct sim_mig_gi *gi, unsigned gi_slices, const struct sim_mig_ci_shape *sh, unsigned start) {
        if (start % sh->align || start + sh->slices > gi_slices)
                return -EINVAL;
        for (unsigned i = 0; i < SIM_MIG_MAX_CI; i++) {
                const struct sim_mig_ci *o = &gi->ci[i];
                if (o->used && start < o->start + o->size && o->start < start + sh->slices)
                        return -ENOSPC;
        }
        return 0;
}

static int free_index(const struct sim_mig_gpu *g) {
        for (unsigned k = 0; k < SIM_MIG_MAX_DEVICES; k++) {
                bool taken = false;
                for (unsigned i = 0; i < SIM_MIG_MAX_GI && !taken; i++)
                        for (unsigned j = 0; j < SIM_MIG_MAX_CI && !taken; j++)
                                taken = g->gi[i].used && g->gi[i].ci[j].used && g->gi[i].ci[j].index == k;
                if (!taken)
                        return (int)k;
        }
        return -ENOSPC;
}

int sim_mig_ci_create(struct sim_mig_gpu *g, const struct sim_mig_model *m, struct sim_mig_gi *gi, unsigned ci_profile,
                      int start, uint64_t *serial, struct sim_mig_ci **ret) {
        struct sim_mig_ci_shape sh;
        int r = sim_mig_ci_shape(m, gi, ci_profile, &sh);
        if (r < 0)
                return r;
        unsigned gi_slices = gi_compute_slices(m, gi);
        int at = -1;
        r = -ENOSPC;
        if (start >= 0)
                at = (r = ci_fits(gi, gi_slices, &sh, (unsigned)start)) == 0 ? start : -1;
        else
                for (unsigned s = 0; s + sh.slices <= gi_slices && at < 0; s += sh.align)
                        if (ci_fits(gi, gi_slices, &sh, s) == 0)
                                at = (int)s;
        if (at < 0)
                return r == -EINVAL ? -EINVAL : -ENOSPC;
        int index = free_index(g);
        if (index < 0)
                return -ENOSPC;
        for (uint32_t id = 0; id < SIM_MIG_MAX_CI; id++) {
                if (sim_mig_ci_find(gi, id))
                        continue;
                for (unsigned i = 0; i < SIM_MIG_MAX_CI; i++) {
                        struct sim_mig_ci *ci = &gi->ci[i];
                        if (ci->used)
                                continue;
                        *ci = (struct sim_mig_ci){ .id = id,
                                                   .profile = ci_profile,
                                                   .start = (uint32_t)at,
                                                   .size = sh.slices,
                                                   .index = (uint32_t)index,
                                                   .serial = ++*serial,
                                                   .used = 1 };
                        if (ret)
                                *ret = ci;
                        return 0;
                }
        }
        return -ENOSPC;
}

unsigned sim_mig_ci_remaining(const struct sim_mig_gpu *g, const struct sim_mig_model *m, const struct sim_mig_gi *gi,
                              unsigned ci_profile) {
        struct sim_mig_gpu scratch = *g;
        struct sim_mig_gi *sgi = &scratch.gi[gi - g->gi];
        uint64_t serial = 0;
        unsigned n = 0;
        while (sim_mig_ci_create(&scratch, m, sgi, ci_profile, -1, &serial, NULL) == 0)
                n++;
        return n;
}

/* ---- names, UUIDs, memory ---- */

void sim_mig_device_name(const struct sim_mig_model *m, const struct sim_mig_gi *gi, const struct sim_mig_ci *ci,
                         char *buf, size_t len) {
        const struct sim_mig_profile *p = sim_mig_profile(m, gi->profile);
        if (!p) {
                snprintf(buf, len, "?");
                return;
        }
        if (!ci || ci->size == p->slices)
                snprintf(buf, len, "%s", p->name);
        else
                snprintf(buf, len, "%uc.%s", (unsigned)ci->size, p->name);
}

static uint64_t splitmix64(uint64_t x) {
        x += 0x9e3779b97f4a7c15ULL;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
        return x ^ (x >> 31);
}

void sim_mig_uuid(const char *parent_uuid, uint64_t serial, char *buf, size_t len) {
        uint64_t h = 0xcbf29ce484222325ULL;
        for (const unsigned char *s = (const unsigned char *)parent_uuid; *s; s++)
                h = (h ^ *s) * 0x100000001b3ULL;
        uint64_t a = splitmix64(h ^ serial), b = splitmix64(a ^ serial);
        snprintf(buf, len, "MIG-%08" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%04" PRIx64 "-%012" PRIx64, a >> 32,
                 (a >> 16) & 0xffff, a & 0xffff, b >> 48, b & (uint64_t)0xffffffffffff);
}

uint64_t sim_mig_gi_used_locked(const struct sim_state *s, unsigned gpu, uint32_t gi) {
        uint64_t used = 0;
        for (unsigned i = 0; i < SIM_MAX_PROCS; i++)
                if (s->proc[i].pid && s->proc[i].gpu == gpu && s->proc[i].gi == gi)
                        used += s->proc[i].used_bytes;
        return used;
}

unsigned sim_mig_ci_procs_locked(const struct sim_state *s, unsigned gpu, uint32_t gi, uint32_t ci) {
        unsigned n = 0;
        for (unsigned i = 0; i < SIM_MAX_PROCS; i++)
                n += s->proc[i].pid && s->proc[i].gpu == gpu && s->proc[i].gi == gi &&
                     (ci == SIM_NO_INSTANCE || s->proc[i].ci == ci);
        return n;
}

void sim_mem_capacity_locked(struct sim_state *s, const struct topo *t, unsigned gpu, uint32_t gi, uint64_t *ret_total,
                             uint64_t *ret_usable, uint64_t *ret_used) {
        uint64_t total = t->gpu[gpu].memory_total, used;
        const struct sim_mig_model *m = sim_mig_model(&t->gpu[gpu]);
        struct sim_mig_gi *g = gi == SIM_NO_INSTANCE ? NULL : sim_mig_gi_find(&s->mig[gpu], gi);
        const struct sim_mig_profile *p = g ? sim_mig_profile(m, g->profile) : NULL;
        if (p) {
                total = (uint64_t)p->memory_mib << 20;
                used = sim_mig_gi_used_locked(s, gpu, gi);
        } else
                used = sim_state_used_locked(s, gpu);
        uint64_t usable = total - sim_reserve_bytes(total);
        *ret_total = total;
        *ret_usable = usable;
        *ret_used = MIN(used, usable);
}

/* ---- the node's MIG state at start ---- */

void sim_mig_initial(const struct topo *t, struct sim_mig_node *ret) {
        memset(ret, 0, sizeof *ret);
        for (unsigned i = 0; i < t->n_gpus; i++) {
                uint32_t mode = t->gpu[i].mig_mode == 1 ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
                ret->gpu[i].current = ret->gpu[i].pending = mode;
        }
}

/* ---- capabilities: /proc/driver/nvidia-caps/mig-minors ---- */

/* The driver numbers every possible capability ahead of time: config 1, monitor 2, then per GPU minor
 * (0..31) and GPU instance id (0..14) the GI's access and its 8 compute instances' (MIG user guide:
 * "gpu0/gi0/access 3", "gpu0/gi0/ci0/access 4", …, "gpu31/gi14/ci7/access 4322"). ci SIM_NO_INSTANCE:
 * the GPU instance's own. */
unsigned sim_mig_cap_minor(unsigned gpu_minor, uint32_t gi, uint32_t ci) {
        unsigned base = 3 + gpu_minor * (SIM_MIG_CAP_GIS * (1 + SIM_MIG_MAX_CI)) + gi * (1 + SIM_MIG_MAX_CI);
        return ci == SIM_NO_INSTANCE ? base : base + 1 + ci;
}

int sim_mig_minors_text(char *buf, size_t len) {
        size_t w = 0;
        int n = snprintf(buf, len, "config 1\nmonitor 2\n");
        if (n < 0 || (size_t)n >= len)
                return -ENOBUFS;
        w = (size_t)n;
        for (unsigned g = 0; g < SIM_MIG_CAP_GPUS; g++)
                for (unsigned i = 0; i < SIM_MIG_CAP_GIS; i++)
                        for (int c = -1; c < (int)SIM_MIG_MAX_CI; c++) {
                                if (c < 0)
                                        n = snprintf(buf + w, len - w, "gpu%u/gi%u/access %u\n", g, i,
                                                     sim_mig_cap_minor(g, i, SIM_NO_INSTANCE));
                                else
                                        n = snprintf(buf + w, len - w, "gpu%u/gi%u/ci%d/access %u\n", g, i, c,
                                                     sim_mig_cap_minor(g, i, (uint32_t)c));
                                if (n < 0 || (size_t)n >= len - w)
                                        return -ENOBUFS;
                                w += (size_t)n;
                        }
        return (int)w;
}
