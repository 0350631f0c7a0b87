/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dra/migdyn — dynamic MIG devices (docs/dra.md "Dynamic MIG"): a GPU the operator marks (dra.mig-dynamic) is
 * published with one device per profile and placement it could hold (slices.c); a claim's device is checked
 * against the GPU as it is now, its instance made at prepare through the agent's ops (src/migctl), journaled in
 * the claim's record before and after, its capability nodes made as nvidia-modprobe makes them, and destroyed
 * at unprepare and whenever a record that is not prepared is recovered. An instance is found again by its
 * profile and placement (the one GPU instance that can be there), so one made by a process killed before it
 * journaled the ids is found too.
 *
 * Must never: make an instance no record names, destroy one no record names (recovery destroys only at a
 * placement a record holds), or log with the lock held for long (the log callback is the agent's).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "dra/dra-internal.h"
#include "util/util.h"

int dra_dyn_parse(struct dra *d, const char *spec, struct gs_error *err) {
        d->mig_dynamic = 0;
        if (!spec || !spec[0])
                return 0;
        if (streq(spec, "all")) {
                for (unsigned g = 0; g < d->topo.n_gpus; g++)
                        d->mig_dynamic |= UINT64_C(1) << g;
                return 0;
        }
        for (const char *p = spec; *p;) {
                char *end;
                unsigned long i = strtoul(p, &end, 10);
                int g = end != p && (*end == ',' || !*end) && i < 1000000 ? dra_gpu_position(d, (unsigned)i) : -1;
                if (g < 0)
                        return gs_error_set(err, -EINVAL,
                                            "dra.mig-dynamic %.100s: not \"all\" or GPU indices of this "
                                            "node (\"0,2\")",
                                            spec);
                d->mig_dynamic |= UINT64_C(1) << g;
                p = *end ? end + 1 : end;
        }
        return 0;
}

bool dra_dyn_any(const struct dra_record *r) {
        for (unsigned i = 0; i < r->n; i++)
                if (r->dev[i].kind == DRA_DEVICE_MIG_DYNAMIC)
                        return true;
        return false;
}

/* The profile and placement of a dynamic device of GPU g (lock held). */
static int placement_of(const struct dra *d, unsigned g, const char *device, const struct mig_profile **ret,
                        struct mig_placement *ret_at) {
        struct dra_device_ref ref;
        if (!d->mig || g >= d->mig->node.n_gpus || dra_device_parse(device, &ref) < 0 ||
            ref.kind != DRA_DEVICE_MIG_DYNAMIC)
                return -ENODEV;
        return dra_mig_placement(&d->mig->caps[g], ref.label, ref.start, ret, ret_at);
}

/* Why GPU g cannot take dynamic devices now, or NULL (lock held). */
static const char *gpu_refusal(const struct dra *d, unsigned g) {
        if (!(d->mig_dynamic >> g & 1))
                return "is not partitioned dynamically (dra.mig-dynamic)";
        if (!d->mig || g >= d->mig->node.n_gpus || d->mig->node.gpu[g].mode != 1)
                return "is not in MIG mode";
        if (!dra_mig_gpu(d->mig, g) || d->mig->caps[g].n_profiles == 0)
                return "has MIG profiles that could not be read";
        return NULL;
}

static void placements_text(const struct mig_profile *p, char *buf, size_t len) {
        size_t n = 0;
        buf[0] = '\0';
        for (unsigned k = 0; k < p->n_placements && n + 4 < len; k++)
                n += (size_t)snprintf(buf + n, len - n, "%s%u", k ? "," : "", p->placement[k].start);
}

/* The prepared claims' dynamic devices of profile p on GPU g (lock held). */
static unsigned instances_of(const struct dra *d, unsigned g, const struct mig_profile *p) {
        unsigned n = 0;
        for (size_t i = 0; i < d->n_recs; i++)
                for (unsigned k = 0; k < d->recs[i].n; k++) {
                        const struct mig_profile *q;
                        struct mig_placement at;
                        const struct dra_record_device *dv = &d->recs[i].dev[k];
                        n += dra_gpu_position(d, dv->index) == (int)g && placement_of(d, g, dv->device, &q, &at) == 0 &&
                             q == p;
                }
        return n;
}

int dra_dyn_check(struct dra *d, unsigned g, const struct dra_device_ref *ref, const char *name, uint64_t *ret_memory,
                  struct gs_error *err) {
        const char *why = gpu_refusal(d, g);
        if (why)
                return gs_error_set(err, -ENODEV, "device %.63s: GPU %u %s", name, ref->index, why);
        const struct mig_profile *p = NULL;
        struct mig_placement at;
        int e = dra_mig_placement(&d->mig->caps[g], ref->label, ref->start, &p, &at);
        if (e == -ENOENT)
                return gs_error_set(err, -EINVAL, "device %.63s: GPU %u has no MIG profile %.31s", name, ref->index,
                                    ref->label);
        if (e < 0) {
                char starts[48];
                placements_text(p, starts, sizeof starts);
                return gs_error_set(err, -EINVAL,
                                    "device %.63s: profile %.31s cannot start at memory slice %u (its "
                                    "placements start at %s)",
                                    name, p->name, ref->start, starts);
        }
        struct dra_slice_input in;
        dra_slice_input_locked(d, &in);
        in.mig = d->mig;
        const struct mig_gi *gi = dra_mig_blocker(&in, g, at, false);
        if (gi)
                return gs_error_set(err, -EBUSY,
                                    "device %.63s: placement %u:%u of GPU %u is taken by GPU instance %u (%.31s at "
                                    "%u:%u)%s",
                                    name, at.start, at.size, ref->index, gi->id, gi->profile[0] ? gi->profile : "?",
                                    gi->placement.start, gi->placement.size,
                                    gi->id < 16 && (in.mig_owned[g] >> gi->id & 1) ? ", another claim's"
                                                                                   : ", not made by this driver");
        unsigned have = instances_of(d, g, p);
        if (have >= p->instances)
                return gs_error_set(err, -EBUSY,
                                    "device %.63s: GPU %u holds at most %u %.31s instance%s, prepared for "
                                    "other claims",
                                    name, ref->index, p->instances, p->name, p->instances == 1 ? "" : "s");
        *ret_memory = p->memory_mib << 20;
        return 0;
}

/* The capability nodes of a made instance, /dev/nvidia-caps/nvidia-cap<M> for gpu<minor>/gi<G>/access and
 * .../ci<C>/access, as nvidia-modprobe -f makes them: the minors from mig-minors, the major that of the MIG config
 * capability's node (the nvidia-caps major). */
struct config_minor {
        unsigned minor;
        bool found;
};

static int on_minor(const struct mig_minor *m, void *userdata) {
        struct config_minor *c = userdata;
        if (m->kind == MIG_CAP_CONFIG && !c->found)
                *c = (struct config_minor){ .minor = m->minor, .found = true };
        return 0;
}

static int make_node(const char *root, unsigned major, unsigned minor) {
        char path[DRA_PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/dev/nvidia-caps/nvidia-cap%u", root, minor);
        if (mknod(path, S_IFCHR | 0444, makedev(major, minor)) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

static int make_nodes(struct dra *d, unsigned g, unsigned gi, unsigned ci, struct gs_error *err) {
        const char *root = streq(d->dev_root, "/") ? "" : d->dev_root;
        char path[DRA_PATH_MAX + 64];
        snprintf(path, sizeof path, "%s%s", root, CDI_MIG_MINORS);
        _cleanup_(freep) char *text = NULL;
        size_t len = 0;
        struct config_minor cfg = { 0 };
        unsigned mgi, mci;
        int e = read_file(path, MIG_MINORS_MAX, &text, &len);
        if (e < 0)
                return gs_error_set(err, e, "cannot read %.200s: %s", path, strerror(-e));
        if (mig_minors_lookup(text, len, (unsigned)d->topo.gpu[g].minor, gi, ci, &mgi, &mci) < 0 ||
            mig_minors_parse(text, len, on_minor, &cfg) < 0 || !cfg.found)
                return gs_error_set(err, -ENOENT, "%.200s has no capabilities for GPU instance %u, compute instance %u",
                                    path, gi, ci);
        struct stat st;
        snprintf(path, sizeof path, "%s/dev/nvidia-caps/nvidia-cap%u", root, cfg.minor);
        if (stat(path, &st) < 0 || !S_ISCHR(st.st_mode))
                return gs_error_set(err, -ENOENT, "no MIG config capability node %.200s (nvidia-modprobe)", path);
        if ((e = make_node(root, major(st.st_rdev), mgi)) < 0 || (e = make_node(root, major(st.st_rdev), mci)) < 0)
                return gs_error_set(err, e, "cannot make the capability nodes of GPU instance %u: %s", gi,
                                    strerror(-e));
        return 0;
}

/* Make one device's instance and its nodes (lock held). */
static int make_one(struct dra *d, unsigned g, struct dra_record_device *dv, struct gs_error *err) {
        const struct mig_profile *p;
        struct mig_placement at;
        char why[200] = "";
        if (!d->ops.mig_create || placement_of(d, g, dv->device, &p, &at) < 0)
                return gs_error_set(err, -ENODEV, "device %.63s: no dynamic MIG on this node", dv->device);
        int e = d->ops.mig_create(d->ops.userdata, dv->index, p->id, at, &dv->gi, &dv->ci, why, sizeof why);
        if (e < 0)
                return gs_error_set(err, e, "device %.63s: cannot make the MIG instance: %.200s", dv->device,
                                    why[0] ? why : strerror(-e));
        dv->made = true;
        return make_nodes(d, g, dv->gi, dv->ci, err);
}

unsigned dra_dyn_plan_locked(const struct dra *d, const struct dra_record *r, bool made, struct dra_dyn_op *ret) {
        unsigned n = 0;
        for (unsigned i = 0; i < r->n && n < DRA_RESULTS_MAX; i++) {
                const struct dra_record_device *dv = &r->dev[i];
                int g = dra_gpu_position(d, dv->index);
                const struct mig_profile *p;
                struct mig_placement at;
                if (dv->kind != DRA_DEVICE_MIG_DYNAMIC || dv->made != made || g < 0 ||
                    placement_of(d, (unsigned)g, dv->device, &p, &at) < 0)
                        continue;
                ret[n++] = (struct dra_dyn_op){ .dev = i, .g = (unsigned)g, .profile_id = p->id, .at = at };
        }
        return n;
}

int dra_dyn_make_one(struct dra *d, const struct dra_record *r, const struct dra_dyn_op *op, unsigned *ret_gi,
                     unsigned *ret_ci, struct gs_error *err) {
        const struct dra_record_device *dv = &r->dev[op->dev];
        char why[200] = "";
        if (!d->ops.mig_create)
                return gs_error_set(err, -ENODEV, "device %.63s: no dynamic MIG on this node", dv->device);
        int e = d->ops.mig_create(d->ops.userdata, dv->index, op->profile_id, op->at, ret_gi, ret_ci, why, sizeof why);
        if (e < 0)
                return gs_error_set(err, e, "device %.63s: cannot make the MIG instance: %.200s", dv->device,
                                    why[0] ? why : strerror(-e));
        return 1;
}

int dra_dyn_nodes(struct dra *d, unsigned g, unsigned gi, unsigned ci, struct gs_error *err) {
        return make_nodes(d, g, gi, ci, err);
}

int dra_dyn_unmake_one(struct dra *d, const struct dra_record *r, const struct dra_dyn_op *op) {
        const struct dra_record_device *dv = &r->dev[op->dev];
        char why[200] = "";
        int e = d->ops.mig_destroy
                        ? d->ops.mig_destroy(d->ops.userdata, dv->index, op->profile_id, op->at, why, sizeof why)
                        : 0;
        if (e < 0)
                dra_log(d, DRA_LOG_ERROR, "cannot destroy a claim's MIG instance", "claim=%s device=%s error=\"%s\"",
                        r->uid, dv->device, why[0] ? why : strerror(-e));
        return e;
}

int dra_dyn_unmake(struct dra *d, const struct dra_record *r, bool unrecorded) {
        struct dra_dyn_op ops[DRA_RESULTS_MAX];
        unsigned n = dra_dyn_plan_locked(d, r, true, ops);
        if (unrecorded)
                n += dra_dyn_plan_locked(d, r, false, ops + n);
        int first = 0;
        for (unsigned k = 0; k < n; k++) {
                int e = dra_dyn_unmake_one(d, r, &ops[k]);
                first = first ?: e;
        }
        return first;
}

/* The GPU instance of the device's profile at its placement with its compute instances, or NULL (lock held). */
static const struct mig_gi *instance_of(const struct dra *d, unsigned g, const struct dra_record_device *dv) {
        const struct mig_profile *p;
        struct mig_placement at;
        if (placement_of(d, g, dv->device, &p, &at) < 0)
                return NULL;
        const struct mig_gpu *mg = &d->mig->node.gpu[g];
        for (unsigned k = 0; k < mg->n_gis; k++)
                if (mg->gi[k].profile_id == p->id && mg->gi[k].placement.start == at.start &&
                    mg->gi[k].placement.size == at.size && mg->gi[k].n_cis > 0)
                        return &mg->gi[k];
        return NULL;
}

int dra_dyn_fill(struct dra *d, struct dra_record *r, struct gs_error *err) {
        for (unsigned i = 0; i < r->n; i++) {
                struct dra_record_device *dv = &r->dev[i];
                int g = dra_gpu_position(d, dv->index);
                const struct mig_device *md = dv->kind == DRA_DEVICE_MIG_DYNAMIC && dv->made && g >= 0 && d->mig
                                                      ? mig_device_by_ids(&d->mig->node, (unsigned)g, dv->gi, dv->ci)
                                                      : NULL;
                if (dv->kind != DRA_DEVICE_MIG_DYNAMIC)
                        continue;
                if (!md)
                        return gs_error_set(err, -ENODEV, "device %.63s: the MIG instance made for it is gone",
                                            dv->device);
                strscpy(dv->uuid, md->uuid, sizeof dv->uuid);
        }
        return 0;
}

int dra_dyn_ensure(struct dra *d, struct dra_record *r, struct gs_error *err) {
        int changed = 0;
        for (unsigned i = 0; i < r->n; i++) {
                struct dra_record_device *dv = &r->dev[i];
                int g = dra_gpu_position(d, dv->index);
                if (dv->kind != DRA_DEVICE_MIG_DYNAMIC || g < 0)
                        continue;
                const struct mig_gi *gi = instance_of(d, (unsigned)g, dv);
                if (gi && dv->made && gi->id == dv->gi && gi->ci[0].id == dv->ci)
                        continue;
                changed = 1;
                if (gi) {
                        dv->made = true;
                        dv->gi = gi->id;
                        dv->ci = gi->ci[0].id;
                        continue;
                }
                dv->made = false; /* gone since: made again at its placement */
                int e = make_one(d, (unsigned)g, dv, err);
                if (e < 0)
                        return e;
        }
        int e = changed ? dra_record_write(d->journal_fd, r) : 0;
        return e < 0 ? gs_error_set(err, e, "cannot write the journal: %s", strerror(-e)) : changed;
}
