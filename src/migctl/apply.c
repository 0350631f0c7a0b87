/* SPDX-License-Identifier: Apache-2.0 */
/*
 * migctl/apply — a MIG layout applied to one GPU through NVML, crash-safe: plan (refusing what the GPU
 * cannot hold), refuse a busy GPU, write the journal, make the changes one by one, remove the journal;
 * roll back at once when a change fails; complete or roll back a journal a killed process left behind.
 * The contract is in migctl.h. One applier at a time per state directory (flock on <state-dir>/mig/.lock).
 * Never logs; never touches a GPU other than the one it was asked about.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "migctl/migctl.h"
#include "util/atomic-file.h"
#include "util/util.h"

#define JOURNAL_MAX (1u << 16)

struct ctx {
        struct nvml *n;
        unsigned index;
        char uuid[96];
        char dir[PATH_MAX];  /* <state-dir>/mig */
        char path[PATH_MAX]; /* <dir>/<uuid>.json */
        bool journaled;
        struct migctl_journal journal;
        struct migctl_result *res;
        struct gs_error *err;
};

const char *migctl_outcome_name(enum migctl_outcome o) {
        switch (o) {
                case MIGCTL_UNCHANGED: return "unchanged";
                case MIGCTL_DONE: return "done";
                case MIGCTL_PENDING_RESET: return "pending-reset";
                case MIGCTL_ROLLED_BACK: return "rolled-back";
                case MIGCTL_RECOVERED: return "recovered";
        }
        return "?";
}

static int nvml_err(struct ctx *c, int r, const struct nvml_error *e, const char *what) {
        return gs_error_set(c->err, r, "GPU %u: %s: %s: %s", c->index, what, e->func, e->text);
}

static int ctx_init(struct ctx *c, struct nvml *n, unsigned index, const char *state_dir, struct migctl_result *res,
                    struct gs_error *err) {
        *c = (struct ctx){ .n = n, .index = index, .res = res, .err = err };
        struct nvml_error e;
        /* the GPU's UUID names its journal: the index may change between boots, the UUID does not */
        int r = nvml_device_uuid(n, index, c->uuid, sizeof c->uuid, &e);
        if (r < 0)
                return nvml_err(c, r, &e, "its UUID");
        if (snprintf(c->dir, sizeof c->dir, "%s/mig", state_dir) >= (int)sizeof c->dir ||
            snprintf(c->path, sizeof c->path, "%s/%s.json", c->dir, c->uuid) >= (int)sizeof c->path)
                return gs_error_set(err, -ENAMETOOLONG, "%s: path too long", state_dir);
        if ((mkdir(state_dir, 0755) < 0 && errno != EEXIST) || (mkdir(c->dir, 0700) < 0 && errno != EEXIST))
                return gs_error_set(err, -errno, "cannot create %s: %s", c->dir, strerror(errno));
        return 0;
}

/* ---- the journal file ---- */

static int journal_write(struct ctx *c) {
        _cleanup_(freep) char *text = NULL;
        int r = migctl_journal_format(&c->journal, &text);
        if (r >= 0)
                r = atomic_file_write(c->path, text, strlen(text), 0600, 0);
        if (r < 0)
                return gs_error_set(c->err, r, "cannot write the MIG journal %s: %s", c->path, strerror(-r));
        c->journaled = true;
        return 0;
}

/* 0 read, 1 none, -errno. */
static int journal_read(struct ctx *c) {
        _cleanup_(freep) char *text = NULL;
        size_t len = 0;
        int r = read_file(c->path, JOURNAL_MAX, &text, &len);
        if (r == -ENOENT)
                return 1;
        if (r < 0)
                return gs_error_set(c->err, r, "cannot read the MIG journal %s: %s", c->path, strerror(-r));
        r = migctl_journal_parse(text, len, &c->journal, c->err);
        if (r < 0)
                return gs_error_prefix(c->err, "%s", c->path);
        c->journaled = true;
        return 0;
}

static int journal_remove(struct ctx *c) {
        if (!c->journaled)
                return 0;
        if (unlink(c->path) < 0 && errno != ENOENT)
                return gs_error_set(c->err, -errno, "cannot remove the MIG journal %s: %s", c->path, strerror(errno));
        int dfd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) { /* the removal survives a power loss too */
                (void)fsync(dfd);
                close(dfd);
        }
        c->journaled = false;
        return 0;
}

/* ---- the GPU ---- */

static int read_gpu(struct ctx *c, struct mig_gpu *ret) {
        struct nvml_error e;
        int r = nvml_mig_gpu(c->n, c->index, ret, &e);
        if (r == -EOPNOTSUPP)
                return gs_error_set(c->err, r, "GPU %u has no MIG", c->index);
        return r < 0 ? nvml_err(c, r, &e, "reading its MIG state") : 0;
}

/* -EBUSY when any process runs on the GPU or one of its MIG devices. Through the parent when NVML lets us
 * (the mig/monitor capability), else device by device. */
static int check_idle(struct ctx *c, const struct mig_gpu *g) {
        struct nvml_process *p = NULL;
        size_t n = 0;
        struct nvml_error e;
        int r = nvml_device_processes(c->n, c->index, &p, &n, &e);
        if (r >= 0 && n > 0) {
                unsigned pid = p[0].pid, gi = p[0].gpu_instance, ci = p[0].compute_instance;
                free(p);
                if (gi != MIG_NO_INSTANCE)
                        return gs_error_set(c->err, -EBUSY, "GPU %u is in use: process %u on MIG device GI %u CI %u",
                                            c->index, pid, gi, ci);
                return gs_error_set(c->err, -EBUSY, "GPU %u is in use: process %u", c->index, pid);
        }
        free(p);
        if (r >= 0)
                return 0;
        if (r != -EPERM)
                return nvml_err(c, r, &e, "listing its processes");
        for (unsigned k = 0; k < g->n_devices; k++) {
                p = NULL;
                r = nvml_mig_device_processes(c->n, c->index, g->dev[k].index, &p, &n, &e);
                free(p);
                if (r < 0 && r != -ENOENT && r != -EINVAL)
                        return nvml_err(c, r, &e, "listing a MIG device's processes");
                if (r >= 0 && n > 0)
                        return gs_error_set(c->err, -EBUSY,
                                            "GPU %u is in use: MIG device %s (GI %u CI %u) has %zu process%s", c->index,
                                            g->dev[k].uuid, g->dev[k].gi, g->dev[k].ci, n, n == 1 ? "" : "es");
        }
        return 0;
}

/* The GPU instance id at a placement start, from what exists now. */
static int gi_at(const struct mig_gpu *g, struct mig_placement p) {
        for (unsigned i = 0; i < g->n_gis; i++)
                if (g->gi[i].placement.start == p.start && g->gi[i].placement.size == p.size)
                        return (int)g->gi[i].id;
        return -1;
}

/* One change. 0 done, 1 the mode change is pending a reset, -errno with err. g: updated as it goes. */
static int run_step(struct ctx *c, struct mig_gpu *g, const struct mig_step *s) {
        struct nvml_error e;
        char what[160];
        mig_step_describe(s, c->res->have_caps ? &c->res->caps : NULL, what, sizeof what);
        int r = 0, act = 0;
        unsigned id;
        switch (s->kind) {
                case MIG_STEP_DESTROY_CI: r = nvml_mig_destroy_ci(c->n, c->index, s->gi, s->ci, &e); break;
                case MIG_STEP_DESTROY_GI:
                        r = nvml_mig_destroy_gi(c->n, c->index, s->gi, &e);
                        for (unsigned i = 0; r >= 0 && i < g->n_gis; i++)
                                if (g->gi[i].id == s->gi) {
                                        g->gi[i] = g->gi[--g->n_gis];
                                        break;
                                }
                        break;
                case MIG_STEP_SET_MODE:
                        r = nvml_mig_set_mode(c->n, c->index, s->mode, &act, &e);
                        if (r >= 0 && act != NVML_SUCCESS)
                                r = 1;
                        break;
                case MIG_STEP_CREATE_GI:
                        r = nvml_mig_create_gi(c->n, c->index, s->profile_id, s->placement, &id, &e);
                        if (r >= 0 && g->n_gis < MIG_MAX_GIS)
                                g->gi[g->n_gis++] = (struct mig_gi){ .id = id,
                                                                     .profile_id = s->profile_id,
                                                                     .placement = s->placement };
                        break;
                case MIG_STEP_CREATE_CI: {
                        int gi = gi_at(g, s->placement);
                        if (gi < 0)
                                return gs_error_set(c->err, -EIO, "GPU %u: %s: no GPU instance at %u:%u", c->index,
                                                    what, s->placement.start, s->placement.size);
                        r = nvml_mig_create_ci(c->n, c->index, (unsigned)gi, s->ci_placement, &id, &e);
                        break;
                }
        }
        if (r < 0)
                return nvml_err(c, r, &e, what);
        if (c->res->plan.n < MIG_MAX_STEPS)
                c->res->plan.step[c->res->plan.n++] = *s;
        c->res->steps++;
        return r;
}

static int execute(struct ctx *c, struct mig_gpu *g, const struct mig_plan *p) {
        for (unsigned i = 0; i < p->n; i++) {
                int r = run_step(c, g, &p->step[i]);
                if (r != 0)
                        return r;
        }
        return 0;
}

/* The target for want on the GPU as it is: placed when MIG is on; MIG on with nothing yet when it is off
 * (its profiles can only be read once it is on). */
static int target_for(struct ctx *c, const struct mig_gpu *g, const struct mig_want *want, struct mig_target *ret,
                      bool *ret_partial) {
        *ret_partial = false;
        if (!want->enabled || g->mode != 1) {
                memset(ret, 0, sizeof *ret);
                ret->enabled = want->enabled;
                *ret_partial = want->enabled && want->n > 0;
                return 0;
        }
        struct nvml_error e;
        int r = nvml_mig_caps(c->n, c->index, &c->res->caps, &e);
        if (r < 0)
                return nvml_err(c, r, &e, "reading its MIG profiles");
        c->res->have_caps = true;
        r = mig_plan_place(&c->res->caps, g, want, ret, c->err);
        return r < 0 ? gs_error_prefix(c->err, "GPU %u cannot hold layout %s", c->index, c->journal.layout) : 0;
}

/*
 * Bring the GPU to want, from whatever state it is in. The journal is written before the first change
 * (unless it exists). 0 done (c->res->steps says whether anything changed), 1 pending a reset, -errno.
 */
static int converge(struct ctx *c, const struct mig_want *want) {
        for (int round = 0; round < 2; round++) {
                struct mig_gpu g;
                struct mig_target target;
                bool partial;
                int r = read_gpu(c, &g);
                if (r < 0)
                        return r;
                if ((r = target_for(c, &g, want, &target, &partial)) < 0)
                        return r;
                struct mig_plan plan;
                mig_plan_steps(&g, &target, &plan);
                if (plan.n == 0 && !partial)
                        return 0;
                if (plan.n > 0) {
                        if ((r = check_idle(c, &g)) < 0)
                                return r;
                        if (!c->journaled && (r = journal_write(c)) < 0)
                                return r;
                        if ((r = execute(c, &g, &plan)) != 0)
                                return r;
                }
                if (!partial)
                        return 0;
        }
        return gs_error_set(c->err, -EIO, "GPU %u: MIG mode did not turn on", c->index);
}

/* Back to the journal's `before`. 0, or -errno (the journal stays). */
static int rollback(struct ctx *c) {
        struct mig_gpu g;
        struct gs_error first = { 0 };
        if (c->err)
                first = *c->err;
        int r = read_gpu(c, &g);
        if (r >= 0) {
                struct mig_plan plan;
                mig_plan_steps(&g, &c->journal.before, &plan);
                r = execute(c, &g, &plan);
        }
        if (r != 0) {
                /* keep the first failure's words, add the rollback's */
                char second[GS_ERROR_MESSAGE_MAX];
                strscpy(second, c->err ? c->err->message : "", sizeof second);
                if (c->err) {
                        *c->err = first;
                        gs_error_prefix(c->err, "rollback failed too (%s); the journal %s stays", second, c->path);
                }
                return r < 0 ? r : -EIO;
        }
        return journal_remove(c);
}

static int lock_dir(const char *dir, struct gs_error *err) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/.lock", dir);
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 || flock(fd, LOCK_EX) < 0) {
                int r = -errno;
                if (fd >= 0)
                        close(fd);
                return gs_error_set(err, r, "cannot lock %s: %s", path, strerror(-r));
        }
        return fd;
}

static int recover_locked(struct ctx *c) {
        int r = journal_read(c);
        if (r != 0)
                return r < 0 ? r : 0; /* no journal: nothing to recover */
        struct mig_want want = c->journal.want;
        r = converge(c, &want);
        if (r == 1) {
                c->res->outcome = MIGCTL_PENDING_RESET;
                return 0;
        }
        if (r == 0) {
                c->res->outcome = MIGCTL_RECOVERED;
                return journal_remove(c);
        }
        if (r == -EBUSY)
                return r; /* neither way now: the journal stays for the next start */
        int rb = rollback(c);
        if (rb < 0)
                return rb;
        c->res->outcome = MIGCTL_ROLLED_BACK;
        return 0;
}

/* The context of one GPU with its state directory locked: the lock's fd (close it to unlock), or -errno. */
static int ctx_open(struct ctx *c, struct nvml *n, unsigned index, const char *state_dir, struct migctl_result *ret,
                    struct gs_error *err) {
        memset(ret, 0, sizeof *ret);
        int r = ctx_init(c, n, index, state_dir, ret, err);
        return r < 0 ? r : lock_dir(c->dir, err);
}

int migctl_recover_gpu(struct nvml *n, unsigned index, const char *state_dir, struct migctl_result *ret,
                       struct gs_error *err) {
        struct ctx c;
        int fd = ctx_open(&c, n, index, state_dir, ret, err);
        if (fd < 0)
                return fd;
        int r = recover_locked(&c);
        close(fd);
        return r;
}

static int apply_locked(struct ctx *c, const char *layout, const struct mig_want *want) {
        int r = recover_locked(c);
        if (r < 0)
                return r;
        memset(c->res, 0, sizeof *c->res);
        struct mig_gpu g;
        if ((r = read_gpu(c, &g)) < 0)
                return r;
        memset(&c->journal, 0, sizeof c->journal);
        strscpy(c->journal.gpu, c->uuid, sizeof c->journal.gpu);
        strscpy(c->journal.layout, layout, sizeof c->journal.layout);
        mig_target_from_gpu(&g, &c->journal.before);
        c->journal.want = *want;
        r = converge(c, want);
        if (r == 1) {
                c->journal.pending_reset = true;
                c->res->outcome = MIGCTL_PENDING_RESET;
                return journal_write(c);
        }
        if (r == 0) {
                c->res->outcome = c->res->steps ? MIGCTL_DONE : MIGCTL_UNCHANGED;
                return journal_remove(c);
        }
        if (!c->journaled)
                return r; /* refused before any change */
        int rb = rollback(c);
        if (rb < 0)
                return rb;
        /* rolled back: say so, keep the code of a refusal (the GPU cannot hold it), else -EIO */
        gs_error_prefix(c->err, "rolled back to the layout before");
        return r == -EINVAL || r == -ENOSPC || r == -EBUSY ? r : -EIO;
}

int migctl_apply_gpu(struct nvml *n, unsigned index, const char *layout, const struct mig_want *want,
                     const char *state_dir, struct migctl_result *ret, struct gs_error *err) {
        if (!want || !layout)
                return gs_error_set(err, -EINVAL, "no layout");
        struct ctx c;
        int fd = ctx_open(&c, n, index, state_dir, ret, err);
        if (fd < 0)
                return fd;
        int r = apply_locked(&c, layout, want);
        close(fd);
        return r;
}

int migctl_plan_gpu(struct nvml *n, unsigned index, const char *layout, const struct mig_want *want,
                    struct migctl_result *ret, struct gs_error *err) {
        memset(ret, 0, sizeof *ret);
        struct ctx c = { .n = n, .index = index, .res = ret, .err = err };
        strscpy(c.journal.layout, layout ? layout : "", sizeof c.journal.layout);
        struct mig_gpu g;
        struct mig_target target;
        bool partial;
        int r = read_gpu(&c, &g);
        if (r >= 0)
                r = target_for(&c, &g, want, &target, &partial);
        if (r < 0)
                return r;
        mig_plan_steps(&g, &target, &ret->plan);
        ret->outcome = ret->plan.n ? MIGCTL_DONE : MIGCTL_UNCHANGED;
        return 0;
}

int migctl_journal_peek(const char *state_dir, const char *uuid, char *ret_layout, size_t len, bool *ret_pending,
                        struct gs_error *err) {
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/mig/%s.json", state_dir, uuid) >= (int)sizeof path)
                return -ENAMETOOLONG;
        _cleanup_(freep) char *text = NULL;
        size_t n = 0;
        int r = read_file(path, JOURNAL_MAX, &text, &n);
        if (r < 0)
                return r == -ENOENT ? r : gs_error_set(err, r, "%s: %s", path, strerror(-r));
        struct migctl_journal j;
        if ((r = migctl_journal_parse(text, n, &j, err)) < 0)
                return gs_error_prefix(err, "%s", path);
        strscpy(ret_layout, j.layout, len);
        *ret_pending = j.pending_reset;
        return 0;
}

/* ---- one instance (the DRA driver's dynamic MIG devices) ---- */

/* The GPU instance of profile_id at exactly `at`, or NULL. */
static const struct mig_gi *gi_exact(const struct mig_gpu *g, unsigned profile_id, struct mig_placement at) {
        for (unsigned i = 0; i < g->n_gis; i++)
                if (g->gi[i].profile_id == profile_id && g->gi[i].placement.start == at.start &&
                    g->gi[i].placement.size == at.size)
                        return &g->gi[i];
        return NULL;
}

/* Its compute instances, then it (g updated). */
static int destroy_gi(struct ctx *c, struct mig_gpu *g, const struct mig_gi *gi) {
        unsigned id = gi->id, n_cis = gi->n_cis;
        struct mig_ci cis[MIG_MAX_CIS];
        memcpy(cis, gi->ci, sizeof cis);
        for (unsigned k = 0; k < n_cis; k++) {
                struct mig_step s = { .kind = MIG_STEP_DESTROY_CI, .gi = id, .ci = cis[k].id };
                int r = run_step(c, g, &s);
                if (r < 0)
                        return r;
        }
        struct mig_step s = { .kind = MIG_STEP_DESTROY_GI, .gi = id };
        return run_step(c, g, &s);
}

static int instance_create_locked(struct ctx *c, unsigned profile_id, struct mig_placement at, unsigned *ret_gi,
                                  unsigned *ret_ci) {
        struct mig_gpu g;
        struct nvml_error e;
        int r = read_gpu(c, &g);
        if (r == 0 && g.mode != 1)
                r = gs_error_set(c->err, -ENODEV, "GPU %u is not in MIG mode", c->index);
        if (r == 0 && (r = nvml_mig_caps(c->n, c->index, &c->res->caps, &e)) < 0)
                r = nvml_err(c, r, &e, "reading its MIG profiles");
        const struct mig_profile *p = r == 0 ? mig_caps_profile_by_id(&c->res->caps, profile_id) : NULL;
        if (r == 0 && !p)
                r = gs_error_set(c->err, -EINVAL, "GPU %u has no GPU instance profile %u", c->index, profile_id);
        if (r < 0)
                return r;
        c->res->have_caps = true;
        struct mig_step s = { .kind = MIG_STEP_CREATE_GI, .profile_id = profile_id, .placement = at };
        if ((r = run_step(c, &g, &s)) < 0)
                return r;
        *ret_gi = g.gi[g.n_gis - 1].id;
        /* one compute instance covering it, as NVIDIA's tools make them */
        s = (struct mig_step){ .kind = MIG_STEP_CREATE_CI, .placement = at, .ci_placement = { 0, p->slices } };
        if ((r = run_step(c, &g, &s)) < 0) {
                struct nvml_error de;
                (void)nvml_mig_destroy_gi(c->n, c->index, *ret_gi, &de); /* nothing left made */
                return r;
        }
        /* the compute instance's id: the GPU as NVML has it now */
        if ((r = read_gpu(c, &g)) < 0)
                return r;
        const struct mig_gi *gi = gi_exact(&g, profile_id, at);
        if (!gi || gi->n_cis != 1)
                return gs_error_set(c->err, -EIO, "GPU %u: the instance made at %u:%u is not there", c->index, at.start,
                                    at.size);
        *ret_ci = gi->ci[0].id;
        return 0;
}

int migctl_instance_create(struct nvml *n, unsigned index, unsigned profile_id, struct mig_placement at,
                           const char *state_dir, unsigned *ret_gi, unsigned *ret_ci, struct gs_error *err) {
        struct ctx c;
        struct migctl_result res;
        int fd = ctx_open(&c, n, index, state_dir, &res, err);
        if (fd < 0)
                return fd;
        int r = instance_create_locked(&c, profile_id, at, ret_gi, ret_ci);
        close(fd);
        return r;
}

int migctl_instance_destroy(struct nvml *n, unsigned index, unsigned profile_id, struct mig_placement at,
                            const char *state_dir, struct gs_error *err) {
        struct ctx c;
        struct migctl_result res;
        int fd = ctx_open(&c, n, index, state_dir, &res, err);
        if (fd < 0)
                return fd;
        struct mig_gpu g;
        int r = read_gpu(&c, &g);
        const struct mig_gi *gi = r == 0 && g.mode == 1 ? gi_exact(&g, profile_id, at) : NULL;
        if (gi && (r = check_idle(&c, &g)) == 0)
                r = destroy_gi(&c, &g, gi);
        close(fd);
        return r < 0 ? r : 0;
}
