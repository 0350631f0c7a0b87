/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plan — the MIG layout planner: which placements a wanted set of GPU instance profiles takes on a GPU
 * (refusing, with the reason, what the GPU cannot hold), and the create/destroy steps from what exists.
 * It knows the GPU only through what NVML reported (struct mig_caps): profiles, their placements and
 * instance counts. Pure: no I/O, no allocation, no global state.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mig/mig.h"
#include "util/util.h"

unsigned mig_caps_memory_slices(const struct mig_caps *c) {
        unsigned n = 0;
        for (unsigned i = 0; i < c->n_profiles; i++)
                for (unsigned k = 0; k < c->profile[i].n_placements; k++)
                        n = MAX(n, c->profile[i].placement[k].start + c->profile[i].placement[k].size);
        return n;
}

unsigned mig_caps_compute_slices(const struct mig_caps *c) {
        unsigned n = 0;
        for (unsigned i = 0; i < c->n_profiles; i++)
                n = MAX(n, c->profile[i].slices);
        return n;
}

const struct mig_profile *mig_caps_profile_by_name(const struct mig_caps *c, const char *name) {
        for (unsigned i = 0; i < c->n_profiles; i++)
                if (streq(c->profile[i].name, name))
                        return &c->profile[i];
        return NULL;
}

const struct mig_profile *mig_caps_profile_by_id(const struct mig_caps *c, unsigned id) {
        for (unsigned i = 0; i < c->n_profiles; i++)
                if (c->profile[i].id == id)
                        return &c->profile[i];
        return NULL;
}

/* ---- placing ---- */

struct search {
        const struct mig_caps *caps;
        const struct mig_gpu *now;
        unsigned n;                                  /* instances to place */
        const struct mig_profile *want[MIG_MAX_GIS]; /* largest first */
        struct mig_placement at[MIG_MAX_GIS];        /* the current choice */
        uint32_t used_mem;                           /* memory slices taken (bit mask) */
        int best_kept;                               /* -1: nothing found yet */
        struct mig_placement best[MIG_MAX_GIS];
};

static uint32_t mask(struct mig_placement p) {
        return p.size >= 32 ? UINT32_MAX : ((1u << p.size) - 1) << p.start;
}

/* Whether an existing GPU instance of that profile sits at p (and is not counted twice). */
static bool kept(const struct search *s, unsigned k) {
        for (unsigned i = 0; i < s->now->n_gis; i++) {
                const struct mig_gi *g = &s->now->gi[i];
                if (g->profile_id == s->want[k]->id && g->placement.start == s->at[k].start &&
                    g->placement.size == s->at[k].size)
                        return true;
        }
        return false;
}

static void search(struct search *s, unsigned k, int kept_so_far) {
        if (k == s->n) {
                if (kept_so_far > s->best_kept) {
                        s->best_kept = kept_so_far;
                        memcpy(s->best, s->at, sizeof s->best);
                }
                return;
        }
        if (s->best_kept == (int)s->n)
                return; /* cannot do better than keeping everything */
        const struct mig_profile *p = s->want[k];
        for (unsigned i = 0; i < p->n_placements; i++) {
                struct mig_placement pl = p->placement[i];
                /* two instances of one profile: in increasing start order, to skip permutations */
                if (k > 0 && s->want[k - 1] == p && pl.start <= s->at[k - 1].start)
                        continue;
                if (s->used_mem & mask(pl))
                        continue;
                s->at[k] = pl;
                s->used_mem |= mask(pl);
                search(s, k + 1, kept_so_far + kept(s, k));
                s->used_mem &= ~mask(pl);
        }
}

static int by_size_desc(const struct mig_profile *a, const struct mig_profile *b) {
        unsigned sa = a->n_placements ? a->placement[0].size : 0, sb = b->n_placements ? b->placement[0].size : 0;
        if (sa != sb)
                return sa > sb ? -1 : 1;
        if (a->slices != b->slices)
                return a->slices > b->slices ? -1 : 1;
        return a->id < b->id ? -1 : a->id > b->id;
}

static void profile_list(const struct mig_caps *c, char *buf, size_t len) {
        size_t w = 0;
        buf[0] = '\0';
        for (unsigned i = 0; i < c->n_profiles && w < len; i++) {
                int n = snprintf(buf + w, len - w, "%s%s", i ? ", " : "", c->profile[i].name);
                if (n < 0)
                        break;
                w += (size_t)n;
        }
}

/* Resolve want's names and counts into s->want (largest first), with every count check. */
static int plan_expand(struct search *s, const struct mig_want *want, struct gs_error *err) {
        const struct mig_caps *caps = s->caps;
        unsigned compute = 0, total = mig_caps_compute_slices(caps);
        for (unsigned i = 0; i < want->n; i++) {
                const char *name = want->item[i].profile;
                unsigned count = want->item[i].count;
                for (unsigned j = 0; j < i; j++)
                        if (streq(want->item[j].profile, name))
                                return gs_error_set(err, -EINVAL, "profile %s is given twice", name);
                const struct mig_profile *p = mig_caps_profile_by_name(caps, name);
                if (!p) {
                        char list[256];
                        profile_list(caps, list, sizeof list);
                        return gs_error_set(err, -EINVAL, "the GPU has no profile %s (it has %s)", name,
                                            list[0] ? list : "none");
                }
                if (count > p->instances)
                        return gs_error_set(err, -ENOSPC, "%u x %s: the GPU holds at most %u", count, name,
                                            p->instances);
                if (s->n + count > MIG_MAX_GIS)
                        return gs_error_set(err, -ENOSPC, "more than %u GPU instances", MIG_MAX_GIS);
                for (unsigned k = 0; k < count; k++)
                        s->want[s->n++] = p;
                compute += count * p->slices;
        }
        if (compute > total)
                return gs_error_set(err, -ENOSPC, "the instances need %u compute slices, the GPU has %u", compute,
                                    total);
        /* insertion sort, largest first: big instances have the fewest placements */
        for (unsigned i = 1; i < s->n; i++)
                for (unsigned j = i; j > 0 && by_size_desc(s->want[j], s->want[j - 1]) < 0; j--) {
                        const struct mig_profile *t = s->want[j];
                        s->want[j] = s->want[j - 1];
                        s->want[j - 1] = t;
                }
        return 0;
}

int mig_plan_place(const struct mig_caps *caps, const struct mig_gpu *now, const struct mig_want *want,
                   struct mig_target *ret, struct gs_error *err) {
        memset(ret, 0, sizeof *ret);
        ret->enabled = want->enabled;
        if (!want->enabled) {
                if (want->n)
                        return gs_error_set(err, -EINVAL, "MIG off, but instances are asked for");
                return 0;
        }
        if (want->n > MIG_MAX_PROFILES)
                return gs_error_set(err, -EINVAL, "more than %u profiles", MIG_MAX_PROFILES);
        struct search s = { .caps = caps, .now = now, .best_kept = -1 };
        int r = plan_expand(&s, want, err);
        if (r < 0)
                return r;
        search(&s, 0, 0);
        if (s.best_kept < 0) {
                unsigned mem = 0;
                for (unsigned k = 0; k < s.n; k++)
                        mem += s.want[k]->n_placements ? s.want[k]->placement[0].size : 0;
                return gs_error_set(err, -ENOSPC,
                                    "no placement of these %u instances fits the GPU's %u memory slices together (they "
                                    "need %u, and each profile may only start at its own placements)",
                                    s.n, mig_caps_memory_slices(caps), mem);
        }
        ret->n = s.n;
        for (unsigned k = 0; k < s.n; k++)
                ret->gi[k] = (struct mig_target_gi){ .profile_id = s.want[k]->id,
                                                     .slices = s.want[k]->slices,
                                                     .placement = s.best[k],
                                                     .n_cis = 1,
                                                     .ci = { { 0, s.want[k]->slices } } };
        return 0;
}

void mig_target_from_gpu(const struct mig_gpu *g, struct mig_target *ret) {
        memset(ret, 0, sizeof *ret);
        ret->enabled = g->mode == 1;
        for (unsigned i = 0; ret->enabled && i < g->n_gis && i < MIG_MAX_GIS; i++) {
                const struct mig_gi *gi = &g->gi[i];
                struct mig_target_gi *t = &ret->gi[ret->n++];
                *t = (struct mig_target_gi){ .profile_id = gi->profile_id,
                                             .slices = gi->slices,
                                             .placement = gi->placement };
                for (unsigned j = 0; j < gi->n_cis && j < MIG_MAX_CIS; j++)
                        t->ci[t->n_cis++] = gi->ci[j].placement;
        }
}

/* ---- steps ---- */

static void add(struct mig_plan *p, struct mig_step s) {
        if (p->n < MIG_MAX_STEPS)
                p->step[p->n++] = s;
}

static bool same(struct mig_placement a, struct mig_placement b) {
        return a.start == b.start && a.size == b.size;
}

static int target_index(const struct mig_target *t, const struct mig_gi *g) {
        for (unsigned k = 0; t->enabled && k < t->n; k++)
                if (t->gi[k].profile_id == g->profile_id && same(t->gi[k].placement, g->placement))
                        return (int)k;
        return -1;
}

static int target_ci_index(const struct mig_target_gi *t, const struct mig_ci *c) {
        for (unsigned j = 0; j < t->n_cis; j++)
                if (same(t->ci[j], c->placement))
                        return (int)j;
        return -1;
}

void mig_plan_steps(const struct mig_gpu *now, const struct mig_target *target, struct mig_plan *ret) {
        memset(ret, 0, sizeof *ret);
        bool have[MIG_MAX_GIS] = { false }, have_ci[MIG_MAX_GIS][MIG_MAX_CIS] = { { false } };
        /* what goes: compute instances first, then their GPU instances */
        for (unsigned i = 0; i < now->n_gis; i++) {
                const struct mig_gi *g = &now->gi[i];
                int k = target_index(target, g);
                if (k >= 0 && have[k])
                        k = -1; /* (cannot happen on hardware: one GPU instance per placement) */
                for (unsigned j = 0; j < g->n_cis; j++) {
                        int c = k >= 0 ? target_ci_index(&target->gi[k], &g->ci[j]) : -1;
                        if (c >= 0 && !have_ci[k][c]) {
                                have_ci[k][c] = true;
                                continue;
                        }
                        add(ret, (struct mig_step){ .kind = MIG_STEP_DESTROY_CI, .gi = g->id, .ci = g->ci[j].id });
                }
                if (k >= 0)
                        have[k] = true;
                else
                        add(ret, (struct mig_step){ .kind = MIG_STEP_DESTROY_GI, .gi = g->id });
        }
        int mode = target->enabled ? 1 : 0;
        if (now->mode != mode || now->pending != mode)
                add(ret, (struct mig_step){ .kind = MIG_STEP_SET_MODE, .mode = mode });
        for (unsigned k = 0; k < target->n; k++) {
                const struct mig_target_gi *t = &target->gi[k];
                if (!have[k])
                        add(ret, (struct mig_step){ .kind = MIG_STEP_CREATE_GI,
                                                    .profile_id = t->profile_id,
                                                    .placement = t->placement });
                for (unsigned j = 0; j < t->n_cis; j++)
                        if (!have_ci[k][j])
                                add(ret, (struct mig_step){ .kind = MIG_STEP_CREATE_CI,
                                                            .profile_id = t->profile_id,
                                                            .placement = t->placement,
                                                            .ci_placement = t->ci[j] });
        }
}

bool mig_target_reached(const struct mig_gpu *g, const struct mig_target *t) {
        struct mig_plan p;
        mig_plan_steps(g, t, &p);
        return p.n == 0;
}

void mig_step_describe(const struct mig_step *s, const struct mig_caps *caps, char *buf, size_t len) {
        const struct mig_profile *p = caps ? mig_caps_profile_by_id(caps, s->profile_id) : NULL;
        char name[48];
        if (p)
                strscpy(name, p->name, sizeof name);
        else
                snprintf(name, sizeof name, "profile %u", s->profile_id);
        switch (s->kind) {
                case MIG_STEP_DESTROY_CI:
                        snprintf(buf, len, "destroy compute instance %u of GPU instance %u", s->ci, s->gi);
                        return;
                case MIG_STEP_DESTROY_GI: snprintf(buf, len, "destroy GPU instance %u", s->gi); return;
                case MIG_STEP_SET_MODE: snprintf(buf, len, "set MIG mode %s", s->mode ? "on" : "off"); return;
                case MIG_STEP_CREATE_GI:
                        snprintf(buf, len, "create GPU instance %s at %u:%u", name, s->placement.start,
                                 s->placement.size);
                        return;
                case MIG_STEP_CREATE_CI:
                        snprintf(buf, len, "create compute instance %u:%u in %s at %u:%u", s->ci_placement.start,
                                 s->ci_placement.size, name, s->placement.start, s->placement.size);
                        return;
        }
        snprintf(buf, len, "?");
}
