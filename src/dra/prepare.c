/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dra/prepare — the prepare/unprepare engine of the DRA driver: a decoded claim is checked (this node's
 * pool, devices of this driver, healthy, not held by the device plugin, not held by another claim beyond
 * what a shared device has), journaled, given its limits dir (shared devices: the claim's consumed
 * memory and cores in the limits file, the same file the device plugin's fractional path writes) and
 * its CDI spec, and journaled as prepared; unprepare undoes it in the reverse order. Start-up recovery
 * finishes or undoes whatever a crash interrupted (journal.h) and removes every file no record names.
 *
 * Must never: hand out a device twice, write a limits file looser than the claim's consumed capacity,
 * remove a file outside the names it owns (<cdi-dir>/<driver>-claim_<uid>.json, <limits-root>/dra-<uid>),
 * or do network I/O (the caller reads the claim first).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dra/dra-internal.h"
#include "interposer/limits.h"
#include "util/atomic-file.h"
#include "util/limits-dir.h"
#include "util/mps-client.h"
#include "util/util.h"

int dra_cdi_id(const struct dra *d, const char *uid, const char *device, char *buf, size_t len) {
        int w = snprintf(buf, len, "%s=%s-%s", d->cdi_kind, uid, device);
        return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

static int spec_path(const struct dra *d, const char *uid, char *buf, size_t len) {
        int w = snprintf(buf, len, "%s/%s-" DRA_CDI_CLASS "_%s.json", d->cdi_dir, d->driver, uid);
        return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

/* ---- records in memory (lock held) ---- */

static struct dra_record *find(struct dra *d, const char *uid) {
        for (size_t i = 0; i < d->n_recs; i++)
                if (streq(d->recs[i].uid, uid))
                        return &d->recs[i];
        return NULL;
}

static int put(struct dra *d, const struct dra_record *r) {
        struct dra_record *have = find(d, r->uid);
        if (have) {
                *have = *r;
                return 0;
        }
        if (array_reserve(&d->recs, &d->cap_recs, d->n_recs + 1, 16) < 0)
                return -ENOMEM;
        d->recs[d->n_recs++] = *r;
        return 0;
}

static void drop(struct dra *d, const char *uid) {
        struct dra_record *r = find(d, uid);
        if (r)
                *r = d->recs[--d->n_recs];
}

size_t dra_engine_prepared_locked(const struct dra *d) {
        size_t n = 0;
        for (size_t i = 0; i < d->n_recs; i++)
                n += d->recs[i].state == DRA_REC_PREPARED;
        return n;
}

/* GPUs (positions) a record holds. */
static uint64_t record_gpus(const struct dra *d, const struct dra_record *r) {
        uint64_t m = 0;
        for (unsigned i = 0; i < r->n; i++) {
                int g = dra_gpu_position(d, r->dev[i].index);
                if (g >= 0)
                        m |= UINT64_C(1) << g;
        }
        return m;
}

static uint64_t held_now(const struct dra *d) {
        uint64_t m = 0;
        for (size_t i = 0; i < d->n_recs; i++)
                m |= record_gpus(d, &d->recs[i]);
        return m;
}

/* ---- the files of a claim ---- */

/* The limits file of a record's shared devices: per GPU the sum of what its shares consumed; a GPU the
 * claim also has whole gets no limit. */
static int record_limits(const struct dra *d, const struct dra_record *r, struct gs_limits *l) {
        bool whole[GS_MAX_DEVICES] = { false };
        uint64_t mem[GS_MAX_DEVICES] = { 0 };
        unsigned cores[GS_MAX_DEVICES] = { 0 };
        *l = (struct gs_limits){ .version = GS_LIMITS_VERSION,
                                 .core_policy = r->elastic ? GS_CORE_ELASTIC : GS_CORE_HARD };
        snprintf(l->container, sizeof l->container, "%s", r->limits);
        strscpy(l->region, LIMITS_DIR_CONTAINER_REGION, sizeof l->region);
        for (unsigned i = 0; i < r->n; i++) {
                const struct dra_record_device *dv = &r->dev[i];
                int g = dra_gpu_position(d, dv->index);
                if (g < 0)
                        return -ENODEV;
                if (dv->kind == DRA_DEVICE_MIG || dv->kind == DRA_DEVICE_MIG_DYNAMIC) /* its own instance: nothing */
                        continue;
                /* a share of a MIG device is limited within its instance, named by its MIG UUID (the interposer
                 * reads the instance's own memory and multiprocessors, docs/mig.md) */
                const char *uuid = dv->kind == DRA_DEVICE_MIG_SHARED ? dv->uuid : d->topo.gpu[g].uuid;
                int k = gs_limits_match(l, UINT_MAX, uuid);
                if (k < 0) {
                        if (l->n_devices >= GS_MAX_DEVICES)
                                return -E2BIG;
                        k = (int)l->n_devices++;
                        l->dev[k].index = (unsigned)k;
                        strscpy(l->dev[k].uuid, uuid, sizeof l->dev[k].uuid);
                }
                whole[k] |= !dv->shared;
                mem[k] += dv->memory;
                cores[k] += dv->cores;
        }
        for (unsigned k = 0; k < l->n_devices; k++) {
                int g = -1;
                for (unsigned i = 0; i < r->n && g < 0; i++)
                        if (streq(r->dev[i].uuid, l->dev[k].uuid))
                                g = dra_gpu_position(d, r->dev[i].index);
                l->dev[k].core_percent = whole[k] ? DRA_CORES_TOTAL : MAX(1u, MIN(cores[k], DRA_CORES_TOTAL));
                l->dev[k].memory_bytes = whole[k] || g < 0 ? 0 : MIN(mem[k], d->topo.gpu[g].memory_total);
        }
        return 0;
}

#define DRA_LIB_PATH_MAX (CDI_PATH_MAX * 2 + DRA_PATH_MAX)

/* The NVML stand-in's host path for shared claims: next to the interposer, when it is there (NULL when not: the
 * claims get the interposer alone). */
static const char *claim_standin(const struct dra *d, char *buf, size_t len) {
        return limits_dir_standin_path(d->interposer, buf, len) == 0 && access(buf, R_OK) == 0 ? buf : NULL;
}

/* The libraries of a shared claim's containers (limits_dir_libs): nvml holds the real NVML's host path. */
static void claim_libs(const struct dra *d, char *standin, char *nvml, size_t len, struct limits_dir_libs *ret) {
        struct cdi_roots roots = { .dev_root = d->dev_root, .driver_root = d->driver_root };
        struct cdi_spec_options o = { .kind = d->cdi_kind, .host_driver_root = d->host_driver_root };
        const char *s = claim_standin(d, standin, len);
        if (!s || cdi_real_nvml(&d->disc, &roots, &o, nvml, len) < 0)
                nvml[0] = 0;
        limits_dir_libs(d->interposer, s, nvml, ret);
}

static int write_limits(struct dra *d, const struct dra_record *r, struct gs_error *err) {
        struct gs_limits l;
        char text[GS_LIMITS_MAX_FILE], key[DRA_UID_MAX + 8];
        int n = record_limits(d, r, &l);
        if (n == 0)
                n = gs_limits_format(&l, text, sizeof text);
        if (n < 0)
                return gs_error_set(err, n, "cannot make the limits file: %s", strerror(-n));
        int kl = snprintf(key, sizeof key, "dra\n%s\n", r->uid);
        _cleanup_(closep) int dfd = limits_dir_create(d->limits_root, r->limits, false, err);
        if (dfd < 0)
                return dfd;
        /* No fsync: the journal is the durable record and rewrites the dir at start. */
        struct limits_dir_libs libs;
        char standin[DRA_LIB_PATH_MAX], nvml[DRA_LIB_PATH_MAX];
        claim_libs(d, standin, nvml, DRA_LIB_PATH_MAX, &libs);
        return limits_dir_write_files(dfd, key, (size_t)kl, text, (size_t)n, libs.preload, ATOMIC_FILE_NO_SYNC, err);
}

/* ---- a claim's MPS control daemon (sharing.strategy MPS) ---- */

static int mps_dir(const struct dra *d, const char *uid, char *buf, size_t len) {
        int w = snprintf(buf, len, "%s/%s", d->mps_root, uid);
        return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

/* Remove the files in <dir>/pipe, <dir>/log and <dir>/shm (unmounted by ops.mps_stop), and the dirs (what the daemon
 * and its clients made; nothing deeper). */
static void mps_dir_remove(const char *dir) {
        static const char *const subs[] = { MPS_DIR_PIPE, MPS_DIR_LOG, MPS_DIR_SHM };
        _cleanup_(closep) int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        for (size_t i = 0; dfd >= 0 && i < ELEMENTSOF(subs); i++) {
                int sfd = openat(dfd, subs[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                DIR *sd = sfd >= 0 ? fdopendir(sfd) : NULL;
                struct dirent *de;
                while (sd && (de = readdir(sd)))
                        if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                                (void)unlinkat(dirfd(sd), de->d_name, 0);
                if (sd)
                        closedir(sd);
                else if (sfd >= 0)
                        close(sfd);
                (void)unlinkat(dfd, subs[i], AT_REMOVEDIR);
        }
        (void)rmdir(dir);
}

static void mps_stop(struct dra *d, const char *uid) {
        char dir[DRA_PATH_MAX + DRA_UID_MAX + 2];
        if (mps_dir(d, uid, dir, sizeof dir) < 0)
                return;
        if (d->ops.mps_stop)
                d->ops.mps_stop(d->ops.userdata, uid, dir);
        mps_dir_remove(dir);
}

/* The control client's commands of a record: the thread percentage, each GPU's pinned limit (by NVML index). */
static int mps_commands(const struct dra_record *r, char *buf, size_t len) {
        size_t at = 0;
        if (r->mps_threads)
                at += (size_t)snprintf(buf, len, "set_default_active_thread_percentage %u\n", r->mps_threads);
        for (unsigned i = 0; i < r->n && at < len; i++)
                if (r->dev[i].mps_pinned)
                        at += (size_t)snprintf(buf + at, len - at,
                                               "set_default_device_pinned_mem_limit %u %" PRIu64 "M\n", r->dev[i].index,
                                               r->dev[i].mps_pinned >> 20);
        if (len)
                buf[MIN(at, len - 1)] = 0;
        return at >= len ? -E2BIG : 0;
}

static int mps_start(struct dra *d, const struct dra_record *r, struct gs_error *err) {
        char dir[DRA_PATH_MAX + DRA_UID_MAX + 2], commands[4096], why[200] = "";
        int e = mps_dir(d, r->uid, dir, sizeof dir);
        if (e == 0 && (mkdir(d->mps_root, 0755) < 0 && errno != EEXIST))
                e = -errno;
        if (e == 0 && (mkdir(dir, 0755) < 0 && errno != EEXIST))
                e = -errno;
        if (e < 0)
                return gs_error_set(err, e, "cannot create the MPS directory %.200s: %s", dir, strerror(-e));
        if ((e = mps_commands(r, commands, sizeof commands)) < 0)
                return gs_error_set(err, e, "MPS: too many commands");
        if (!d->ops.mps_start)
                return gs_error_set(err, -EOPNOTSUPP, "MPS: this agent runs no MPS control daemon");
        if ((e = d->ops.mps_start(d->ops.userdata, r->uid, record_gpus(d, r), dir, commands, why, sizeof why)) < 0)
                return gs_error_set(err, e, "MPS control daemon: %s", why[0] ? why : strerror(-e));
        return 0;
}

/* An MPS client's edits (util/mps-client.h, the same as the device plugin's MPS clients get): the daemon's pipe dir at
 * DRA_MPS_PIPE_CONTAINER and CUDA_MPS_PIPE_DIRECTORY, its shm dir at /dev/shm, and the client's own limits
 * (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; CUDA_MPS_PINNED_DEVICE_MEM_LIMIT "0=2048M,1=..." by the container's device
 * ordinals: the claim's GPUs in NVML index order). */
static int mps_edits(const struct dra *d, const struct dra_record *r, json_t *spec) {
        char pipe[DRA_PATH_MAX + DRA_UID_MAX + 8], shm[DRA_PATH_MAX + DRA_UID_MAX + 8], threads[64],
                pinned[DRA_RESULTS_MAX * 32 + 48];
        const char *env[2] = { threads, pinned };
        size_t n_env = 0;
        struct mps_client c;
        int w = snprintf(pipe, sizeof pipe, "%s/%s/" MPS_DIR_PIPE, d->mps_root, r->uid);
        int ws = snprintf(shm, sizeof shm, "%s/%s/" MPS_DIR_SHM, d->mps_root, r->uid);
        if (w < 0 || (size_t)w >= sizeof pipe || ws < 0 || (size_t)ws >= sizeof shm ||
            mps_client_edits(pipe, shm, DRA_MPS_PIPE_CONTAINER, &c) < 0)
                return -ENAMETOOLONG;
        if (r->mps_threads) {
                snprintf(threads, sizeof threads, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%u", r->mps_threads);
                env[n_env++] = threads;
        }
        size_t at = (size_t)snprintf(pinned, sizeof pinned, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="), start = at;
        unsigned order[DRA_RESULTS_MAX], n = 0; /* the claim's devices by NVML index: the container's ordinals */
        for (unsigned i = 0; i < r->n && i < DRA_RESULTS_MAX; i++) {
                unsigned k = n++;
                for (; k > 0 && r->dev[order[k - 1]].index > r->dev[i].index; k--)
                        order[k] = order[k - 1];
                order[k] = i;
        }
        for (unsigned k = 0; k < n && at < sizeof pinned; k++)
                if (r->dev[order[k]].mps_pinned)
                        at += (size_t)snprintf(pinned + at, sizeof pinned - at, "%s%u=%" PRIu64 "M",
                                               at > start ? "," : "", k, r->dev[order[k]].mps_pinned >> 20);
        if (at >= sizeof pinned)
                return -E2BIG;
        if (at > start)
                env[n_env++] = pinned;
        return cdi_spec_add_mps(spec, &c, env, n_env);
}

static int write_spec(struct dra *d, const struct dra_record *r, struct gs_error *err) {
        struct cdi_claim_device devs[DRA_RESULTS_MAX];
        char names[DRA_RESULTS_MAX][DRA_UID_MAX + DRA_MAX_LABEL + 2];
        size_t n = 0;
        for (unsigned i = 0; i < r->n; i++) {
                int g = dra_gpu_position(d, r->dev[i].index);
                if (g < 0)
                        return gs_error_set(err, -ENODEV, "GPU %u is gone", r->dev[i].index);
                snprintf(names[n], sizeof names[n], "%s-%s", r->uid, r->dev[i].device);
                bool dup = false;
                for (size_t k = 0; k < n; k++)
                        dup |= streq(devs[k].name, names[n]);
                if (dup)
                        continue;
                devs[n] = (struct cdi_claim_device){ .name = names[n], .gpu = (unsigned)g };
                if (dra_kind_mig(r->dev[i].kind)) {
                        for (size_t k = 0; k < d->disc.n_mig && !devs[n].mig; k++)
                                if (d->disc.mig[k].gpu == (unsigned)g && streq(d->disc.mig[k].uuid, r->dev[i].uuid))
                                        devs[n].mig = &d->disc.mig[k];
                        if (!devs[n].mig)
                                return gs_error_set(err, -ENODEV, "MIG device %.63s (%.96s) is gone: %.200s",
                                                    r->dev[i].device, r->dev[i].uuid,
                                                    d->mig_error[0] ? d->mig_error
                                                                    : "no capability nodes found for it");
                }
                n++;
        }
        char dir[DRA_PATH_MAX + sizeof r->limits + 2];
        snprintf(dir, sizeof dir, "%s/%s", d->limits_root, r->limits);
        char standin[DRA_LIB_PATH_MAX];
        struct cdi_claim_limits lim = { .dir = dir,
                                        .interposer = d->interposer,
                                        .nvml_standin = claim_standin(d, standin, sizeof standin) };
        struct cdi_roots roots = { .dev_root = d->dev_root, .driver_root = d->driver_root };
        struct cdi_spec_options o = { .kind = d->cdi_kind,
                                      .host_dev_root = d->host_dev_root,
                                      .host_driver_root = d->host_driver_root,
                                      .hook_path = d->hook_path };
        _cleanup_(json_decrefp) json_t *spec = NULL;
        int e = cdi_claim_spec_build(&d->topo, &d->disc, &roots, &o, devs, n, r->limits[0] ? &lim : NULL, &spec);
        if (e == 0 && r->sharing == DRA_SHARING_MPS)
                e = mps_edits(d, r, spec);
        if (e < 0)
                return gs_error_set(err, e, "cannot build the CDI spec: %s",
                                    e == -EINVAL ? "a GPU without its device node" : strerror(-e));
        _cleanup_(freep) char *text = NULL;
        e = cdi_format_json(spec, &text);
        if (e == 0)
                e = atomic_file_write(r->spec, text, strlen(text), 0644, ATOMIC_FILE_NO_SYNC);
        return e < 0 ? gs_error_set(err, e, "cannot write %.200s: %s", r->spec, strerror(-e)) : 0;
}

static void remove_files(struct dra *d, const struct dra_record *r) {
        if (r->spec[0])
                (void)unlink(r->spec);
        if (r->sharing == DRA_SHARING_MPS)
                mps_stop(d, r->uid);
        if (r->limits[0]) {
                _cleanup_(closep) int root = open(d->limits_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (root >= 0)
                        (void)limits_dir_remove_at(root, r->limits);
        }
}

static bool files_present(const struct dra_record *r, const struct dra *d) {
        char p[DRA_PATH_MAX * 2];
        snprintf(p, sizeof p, "%s/%s/%s", d->limits_root, r->limits, LIMITS_DIR_LIMITS_FILE);
        return (!r->spec[0] || access(r->spec, F_OK) == 0) && (!r->limits[0] || access(p, F_OK) == 0);
}

static int write_files(struct dra *d, const struct dra_record *r, struct gs_error *err) {
        int e = r->limits[0] ? write_limits(d, r, err) : 0;
        return e ?: write_spec(d, r, err);
}

/* ---- prepare ---- */

/* A MIG device a claim names: its GPU still in MIG mode, the instance still there, its nodes found (lock held). */
static int mig_device_check(struct dra *d, unsigned g, const struct dra_device_ref *ref, const char *name,
                            const struct mig_device **ret, struct gs_error *err) {
        if (!d->mig || g >= d->mig->node.n_gpus || d->mig->node.gpu[g].mode != 1)
                return gs_error_set(err, -ENODEV, "device %.63s: GPU %u is not in MIG mode (any more)", name,
                                    ref->index);
        if (d->mig_dynamic >> g & 1)
                return gs_error_set(err, -ENODEV,
                                    "device %.63s: GPU %u is partitioned dynamically: its devices are placements", name,
                                    ref->index);
        const struct mig_device *md = dra_mig_device_locked(d, g, ref->gi, ref->ci);
        if (!md)
                return gs_error_set(err, -ENODEV,
                                    "device %.63s: the MIG device is gone (GPU %u has no compute instance %u in GPU "
                                    "instance %u)",
                                    name, ref->index, ref->ci, ref->gi);
        if (d->mig_error[0])
                return gs_error_set(err, -ENODEV, "device %.63s: %.200s", name, d->mig_error);
        *ret = md;
        return 0;
}

static bool sharing_equal(const struct dra_sharing_params *a, const struct dra_sharing_params *b) {
        if (a->strategy != b->strategy || a->interval != b->interval || a->thread_percentage != b->thread_percentage ||
            a->pinned != b->pinned || a->n_per_device != b->n_per_device)
                return false;
        for (unsigned i = 0; i < a->n_per_device; i++)
                if (!streq(a->per_device[i].device, b->per_device[i].device) ||
                    a->per_device[i].bytes != b->per_device[i].bytes)
                        return false;
        return true;
}

/* Each GPU's pinned limit from mpsConfig: its entry of defaultPerDevicePinnedMemoryLimit (by NVML index or UUID),
 * else defaultPinnedDeviceMemoryLimit; a key naming no GPU of the claim, or a limit past a GPU's memory, refused. */
static int mps_limits(struct dra *d, const struct dra_sharing_params *s, struct dra_record *r, struct gs_error *err) {
        static const char where[] = "parameters.sharing.mpsConfig";
        bool used[DRA_MPS_LIMITS_MAX] = { false };
        for (unsigned i = 0; i < r->n; i++) {
                struct dra_record_device *dv = &r->dev[i];
                char index[16];
                snprintf(index, sizeof index, "%u", dv->index);
                dv->mps_pinned = s->pinned;
                for (unsigned k = 0; k < s->n_per_device; k++)
                        if (streq(s->per_device[k].device, index) || streq(s->per_device[k].device, dv->uuid)) {
                                dv->mps_pinned = s->per_device[k].bytes;
                                used[k] = true;
                        }
                uint64_t total = d->topo.gpu[dra_gpu_position(d, dv->index)].memory_total;
                if (dv->mps_pinned > total)
                        return gs_error_set(err, -EINVAL,
                                            "%s: a pinned limit of %" PRIu64 " B for %.63s is more than its %" PRIu64
                                            " B",
                                            where, dv->mps_pinned, dv->device, total);
        }
        for (unsigned k = 0; k < s->n_per_device; k++)
                if (!used[k])
                        return gs_error_set(err, -EINVAL,
                                            "%s.defaultPerDevicePinnedMemoryLimit.%.96s: not a GPU of this claim (an "
                                            "NVML index or UUID)",
                                            where, s->per_device[k].device);
        r->mps_threads = s->thread_percentage;
        return 0;
}

/* The claim's sharing config (one for all its requests) against what it names and what this node can apply. */
static int claim_sharing(struct dra *d, const struct dra_claim *c, struct dra_record *r, struct gs_error *err) {
        const struct dra_sharing_params *s = c->n_results ? &c->results[0].params.sharing : NULL;
        for (unsigned i = 1; i < c->n_results; i++)
                if (!sharing_equal(s, &c->results[i].params.sharing))
                        return gs_error_set(err, -EINVAL, "requests disagree on sharing (one sharing config a claim)");
        if (!s || s->strategy == DRA_SHARING_NONE)
                return 0;
        for (unsigned i = 0; i < r->n; i++)
                if (r->dev[i].kind != DRA_DEVICE_GPU)
                        return gs_error_set(err, -EINVAL,
                                            "device %.63s: sharing.strategy %s applies to whole GPUs (a share has "
                                            "gpuslice's limits, a MIG device its instance)",
                                            r->dev[i].device, dra_sharing_name(s->strategy));
        if (s->strategy == DRA_SHARING_TIMESLICING && s->interval != DRA_INTERVAL_DEFAULT)
                return gs_error_set(err, -EOPNOTSUPP,
                                    "parameters.sharing.timeSlicingConfig.interval: %s cannot be applied (NVML has no "
                                    "call that sets a GPU's time-slice; gpuslice leaves the driver's): use Default",
                                    dra_interval_name(s->interval));
        r->sharing = s->strategy;
        r->interval = s->interval;
        return s->strategy == DRA_SHARING_MPS ? mps_limits(d, s, r, err) : 0;
}

/* The record a claim asks for, its devices checked against this node (not yet against the others). */
/* lint: long — every check of one allocation result against this node, each with the error a person reads. */
static int claim_record(struct dra *d, const struct dra_claim *c, struct dra_record *r, struct gs_error *err) {
        memset(r, 0, sizeof *r);
        strscpy(r->uid, c->uid, sizeof r->uid);
        strscpy(r->namespace_, c->namespace_, sizeof r->namespace_);
        strscpy(r->name, c->name, sizeof r->name);
        enum dra_core_policy policy = DRA_POLICY_NODE;
        bool any_shared = false;
        for (unsigned i = 0; i < c->n_results; i++) {
                const struct dra_result *res = &c->results[i];
                struct dra_record_device *dv = &r->dev[r->n];
                struct dra_device_ref ref;
                if (!streq(res->pool, d->node))
                        return gs_error_set(err, -EINVAL, "device %.63s is in pool %.100s, not this node's (%.80s)",
                                            res->device, res->pool, d->node);
                int g = dra_device_parse(res->device, &ref) == 0 ? dra_gpu_position(d, ref.index) : -1;
                if (g < 0)
                        return gs_error_set(err, -ENODEV, "device %.63s is not one of this node's", res->device);
                if (res->admin)
                        return gs_error_set(err, -EINVAL, "device %.63s: admin access is not supported by this driver",
                                            res->device);
                bool shared = dra_kind_shared(ref.kind);
                const char *uuid = d->topo.gpu[g].uuid;
                uint64_t memory_total = d->topo.gpu[g].memory_total;
                if (ref.kind == DRA_DEVICE_MIG_DYNAMIC) {
                        int e = dra_dyn_check(d, (unsigned)g, &ref, res->device, &memory_total, err);
                        if (e < 0)
                                return e;
                        uuid = ""; /* made at prepare */
                } else if (dra_kind_mig(ref.kind)) {
                        const struct mig_device *md = NULL;
                        int e = mig_device_check(d, (unsigned)g, &ref, res->device, &md, err);
                        if (e < 0)
                                return e;
                        uuid = md->uuid;
                        memory_total = md->memory_total;
                } else if (shared && d->mig && g < (int)d->mig->node.n_gpus && d->mig->node.gpu[g].mode == 1)
                        return gs_error_set(err, -EINVAL, "device %.63s: GPU %u is in MIG mode (no fractions)",
                                            res->device, ref.index);
                if (shared) {
                        if (!res->has_memory || !res->has_cores)
                                return gs_error_set(err, -EINVAL,
                                                    "shared device %.63s has no consumed memory and cores "
                                                    "(needs the scheduler's DRAConsumableCapacity)",
                                                    res->device);
                        if (res->cores < 1 || res->cores > DRA_CORES_TOTAL || res->memory < 1 ||
                            res->memory > memory_total)
                                return gs_error_set(err, -EINVAL,
                                                    "shared device %.63s: consumed %" PRIu64 " B and %" PRIu64
                                                    " %% out of range",
                                                    res->device, res->memory, res->cores);
                        if (policy != DRA_POLICY_NODE && res->params.core_policy != DRA_POLICY_NODE &&
                            res->params.core_policy != policy)
                                return gs_error_set(err, -EINVAL, "requests disagree on corePolicy");
                        if (res->params.core_policy != DRA_POLICY_NODE)
                                policy = res->params.core_policy;
                        any_shared = true;
                }
                strscpy(dv->request, res->request, sizeof dv->request);
                strscpy(dv->device, res->device, sizeof dv->device);
                strscpy(dv->share_id, res->share_id, sizeof dv->share_id);
                strscpy(dv->uuid, uuid, sizeof dv->uuid);
                dv->index = ref.index;
                dv->shared = shared;
                dv->kind = ref.kind;
                dv->memory = shared ? res->memory : 0;
                dv->cores = shared ? (unsigned)res->cores : 0;
                dv->gi = dv->ci = MIG_NO_INSTANCE;
                r->n++;
        }
        r->elastic = policy == DRA_POLICY_ELASTIC || (policy == DRA_POLICY_NODE && !d->limit_when_alone);
        if (any_shared)
                snprintf(r->limits, sizeof r->limits, "dra-%s", r->uid);
        int e = claim_sharing(d, c, r, err);
        if (e < 0)
                return e;
        return spec_path(d, r->uid, r->spec, sizeof r->spec) < 0 ? gs_error_set(err, -ENAMETOOLONG, "CDI dir too long")
                                                                 : 0;
}

/* A whole or shared device against every claim's whole and shared devices of its GPU (lock held). */
static int check_gpu_free(struct dra *d, const struct dra_record *r, const struct dra_record_device *dv, int g,
                          struct gs_error *err) {
        uint64_t mem = 0;
        unsigned cores = 0, whole = 0, shares = 0;
        for (size_t j = 0; j <= d->n_recs; j++) { /* the claim itself, then the others */
                const struct dra_record *o = j == d->n_recs ? r : &d->recs[j];
                if (j < d->n_recs && streq(o->uid, r->uid))
                        continue;
                for (unsigned k = 0; k < o->n; k++)
                        if (o->dev[k].index == dv->index && !dra_kind_mig(o->dev[k].kind)) {
                                whole += !o->dev[k].shared;
                                shares += o->dev[k].shared;
                                mem += o->dev[k].memory;
                                cores += o->dev[k].cores;
                        }
        }
        if (whole > 1 || (whole && shares))
                return gs_error_set(err, -EBUSY, "GPU %u (%.63s) is already prepared for another claim", dv->index,
                                    dv->device);
        if (mem > d->topo.gpu[g].memory_total || cores > DRA_CORES_TOTAL)
                return gs_error_set(err, -EBUSY, "GPU %u: the shares prepared would exceed it (%" PRIu64 " B, %u %%)",
                                    dv->index, mem, cores);
        return 0;
}

/* A MIG device is one claim's at a time (lock held). */
static int check_mig_free(struct dra *d, const struct dra_record *r, const struct dra_record_device *dv,
                          struct gs_error *err) {
        for (size_t j = 0; j < d->n_recs; j++)
                for (unsigned k = 0; k < d->recs[j].n && !streq(d->recs[j].uid, r->uid); k++)
                        if (streq(d->recs[j].dev[k].device, dv->device))
                                return gs_error_set(err, -EBUSY,
                                                    "MIG device %.63s is already prepared for another claim",
                                                    dv->device);
        return 0;
}

/* A share of a MIG device against every claim's shares of it: the sums within its instance (lock held). */
static int check_mig_share_free(struct dra *d, const struct dra_record *r, const struct dra_record_device *dv, int g,
                                struct gs_error *err) {
        struct dra_device_ref ref;
        const struct mig_device *md =
                dra_device_parse(dv->device, &ref) == 0 ? dra_mig_device_locked(d, (unsigned)g, ref.gi, ref.ci) : NULL;
        uint64_t mem = 0;
        unsigned cores = 0;
        for (size_t j = 0; j <= d->n_recs; j++) { /* the claim itself, then the others */
                const struct dra_record *o = j == d->n_recs ? r : &d->recs[j];
                if (j < d->n_recs && streq(o->uid, r->uid))
                        continue;
                for (unsigned k = 0; k < o->n; k++)
                        if (streq(o->dev[k].device, dv->device)) {
                                mem += o->dev[k].memory;
                                cores += o->dev[k].cores;
                        }
        }
        if (!md)
                return gs_error_set(err, -ENODEV, "device %.63s: the MIG device is gone", dv->device);
        if (mem > md->memory_total || cores > DRA_CORES_TOTAL)
                return gs_error_set(err, -EBUSY,
                                    "MIG device %.63s: the shares prepared would exceed it (%" PRIu64 " B, %u %%)",
                                    dv->device, mem, cores);
        return 0;
}

/* GPU g's counters as the scheduler counts them (dra_device_consumption: what the slices publish) over this claim
 * and every other: a whole GPU and its MIG devices exclude each other, and so do a whole GPU and its shares (lock
 * held). */
static int check_counters(struct dra *d, const struct dra_record *r, unsigned g, struct gs_error *err) {
        struct dra_slice_input in;
        struct dra_counters cap, sum, c;
        dra_slice_input_locked(d, &in);
        in.mig = d->mig;
        dra_gpu_counters(&in, g, &cap);
        memset(&sum, 0, sizeof sum);
        unsigned index = (unsigned)d->topo.gpu[g].index;
        for (size_t j = 0; j <= d->n_recs; j++) {
                const struct dra_record *o = j == d->n_recs ? r : &d->recs[j];
                if (j < d->n_recs && streq(o->uid, r->uid))
                        continue;
                for (unsigned k = 0; k < o->n; k++) {
                        struct dra_device_ref ref;
                        if (o->dev[k].index != index || dra_device_parse(o->dev[k].device, &ref) < 0 ||
                            dra_device_consumption(&in, g, &ref, &c) < 0) /* a MIG device gone holds nothing */
                                continue;
                        dra_counters_add(&sum, &c);
                }
        }
        if (!dra_counters_fit(&sum, &cap))
                return gs_error_set(
                        err, -EBUSY,
                        "GPU %u is already prepared for another claim (a whole GPU excludes its MIG devices "
                        "and its shares)",
                        index);
        return 0;
}

/* Can the record's devices be given now? Health, the device plugin, and every other claim (lock held). */
static int check_free(struct dra *d, const struct dra_record *r, struct gs_error *err) {
        for (unsigned i = 0; i < r->n; i++) {
                const struct dra_record_device *dv = &r->dev[i];
                int g = dra_gpu_position(d, dv->index);
                if (!d->gpu[g].healthy)
                        return gs_error_set(err, -EIO, "device %.63s is unhealthy (%.90s)", dv->device,
                                            d->gpu[g].reason[0] ? d->gpu[g].reason : "no reason given");
                if (d->gpu[g].busy)
                        return gs_error_set(err, -EBUSY, "device %.63s is held by the device plugin", dv->device);
                bool whole_mig = dv->kind == DRA_DEVICE_MIG || dv->kind == DRA_DEVICE_MIG_DYNAMIC;
                int e = whole_mig                           ? check_mig_free(d, r, dv, err)
                        : dv->kind == DRA_DEVICE_MIG_SHARED ? check_mig_share_free(d, r, dv, g, err)
                                                            : check_gpu_free(d, r, dv, g, err);
                e = e ?: check_counters(d, r, (unsigned)g, err);
                if (e < 0)
                        return e;
        }
        return 0;
}

int dra_engine_lookup(struct dra *d, const char *uid, struct dra_record *ret) {
        pthread_mutex_lock(&d->lock);
        struct dra_record *r = find(d, uid);
        int found = r && r->state == DRA_REC_PREPARED;
        if (found) {
                if (!files_present(r, d)) {
                        struct gs_error e = { 0 };
                        if (write_files(d, r, &e) < 0)
                                dra_log(d, DRA_LOG_ERROR, "cannot rewrite a prepared claim's files",
                                        "claim=%s error=\"%s\"", uid, e.message);
                }
                *ret = *r;
        }
        pthread_mutex_unlock(&d->lock);
        return found;
}

/* Undo a prepare that failed after its record was journaled (lock held). */
static void roll_back(struct dra *d, const struct dra_record *r) {
        if (dra_dyn_unmake(d, r, false) < 0) { /* kept as unpreparing: finished at the next start */
                struct dra_record u = *r;
                u.state = DRA_REC_UNPREPARING;
                (void)dra_record_write(d->journal_fd, &u);
                (void)put(d, &u);
                return;
        }
        remove_files(d, r);
        (void)dra_record_remove(d->journal_fd, r->uid);
        drop(d, r->uid);
        d->held = held_now(d);
        if (d->ops.set_held)
                d->ops.set_held(d->ops.userdata, d->held);
}

/* The files of a journaled record (an MPS claim's daemon started before, without the lock), then the record as
 * prepared (lock held); rolled back on failure. */
static int finish_locked(struct dra *d, struct dra_record *r, struct dra_record *ret, struct gs_error *err) {
        int e = r->limits[0] ? write_limits(d, r, err) : 0;
        if (e == 0)
                dra_crash_point(d, "dra-prepare-limits");
        e = e ?: write_spec(d, r, err);
        if (e == 0) {
                dra_crash_point(d, "dra-prepare-cdi");
                r->state = DRA_REC_PREPARED;
                if ((e = dra_record_write(d->journal_fd, r)) < 0)
                        gs_error_set(err, e, "cannot write the journal: %s", strerror(-e));
        }
        if (e < 0) {
                roll_back(d, r);
                return e;
        }
        (void)put(d, r);
        dra_crash_point(d, "dra-prepare-done");
        *ret = *r;
        return 0;
}

/* What prepare_locked leaves to do without the lock, the claim journaled as preparing (its record, in memory, holds
 * its GPUs against every other prepare meanwhile). */
#define PREPARE_MIG 1 /* its dynamic MIG instances to make (make_instances) */
#define PREPARE_MPS 2 /* its MPS control daemon to start (start_daemon) */

/* 0 prepared; PREPARE_MIG or PREPARE_MPS with *ret the journaled record (finished by dra_engine_prepare); -errno. */
static int prepare_locked(struct dra *d, const struct dra_claim *c, struct dra_record *ret, struct gs_error *err) {
        struct dra_record *have = find(d, c->uid);
        if (have && have->state == DRA_REC_PREPARED) {
                *ret = *have;
                return files_present(have, d) ? 0 : write_files(d, have, err);
        }
        struct dra_record r;
        int e = claim_record(d, c, &r, err);
        e = e ?: check_free(d, &r, err);
        if (e < 0)
                return e;
        uint64_t want = record_gpus(d, &r) & ~d->held;
        char why[200] = "";
        if (want && d->ops.take && (e = d->ops.take(d->ops.userdata, want, why, sizeof why)) < 0)
                return gs_error_set(err, e, "%s", why[0] ? why : "the device table refused the GPUs");
        r.state = DRA_REC_PREPARING;
        if ((e = put(d, &r)) < 0 || (e = dra_record_write(d->journal_fd, &r)) < 0) {
                drop(d, r.uid);
                if (d->ops.set_held)
                        d->ops.set_held(d->ops.userdata, d->held);
                return gs_error_set(err, e, "cannot write the journal: %s", strerror(-e));
        }
        d->held |= want;
        dra_crash_point(d, "dra-prepare-journaled");
        if (dra_dyn_any(&r) || r.sharing == DRA_SHARING_MPS) { /* exclusive: MPS applies to whole GPUs only */
                *ret = r;
                return dra_dyn_any(&r) ? PREPARE_MIG : PREPARE_MPS;
        }
        return finish_locked(d, &r, ret, err);
}

/* A journaled MPS claim's daemon started without the lock (it may take seconds to serve: no other prepare, unprepare
 * or lookup waits for it), then the result recorded with it: the claim finished, or rolled back when the daemon did
 * not start. A claim unprepared meanwhile has the daemon stopped at once (no record holds it: not left behind); one
 * a concurrent prepare of it finished is that prepare's. A crash before the result is recorded leaves the record
 * preparing: the next start rolls it back, its daemon included (recover_undo). */
static int start_daemon(struct dra *d, const struct dra_record *r, struct dra_record *ret, struct gs_error *err) {
        int started = mps_start(d, r, err);
        pthread_mutex_lock(&d->lock);
        struct dra_record *have = find(d, r->uid);
        int e;
        if (have && have->state == DRA_REC_PREPARED) {
                *ret = *have;
                e = 0;
        } else if (!have || have->state != DRA_REC_PREPARING) {
                if (!have)
                        mps_stop(d, r->uid);
                e = gs_error_set(err, -EAGAIN, "the claim changed while its MPS control daemon started");
        } else {
                struct dra_record back = *have;
                if (started < 0) {
                        roll_back(d, &back);
                        e = started;
                } else
                        e = finish_locked(d, &back, ret, err);
        }
        pthread_mutex_unlock(&d->lock);
        return e;
}

/* A made instance into the claim's record, in memory first (a roll back then destroys it), then in the journal
 * (lock held). A claim gone meanwhile has the instance destroyed at once. */
static int record_made_locked(struct dra *d, const char *uid, const struct dra_dyn_op *op, unsigned gi, unsigned ci,
                              struct gs_error *err) {
        struct dra_record *have = find(d, uid);
        if (!have || have->state != DRA_REC_PREPARING)
                return gs_error_set(err, -EAGAIN, "the claim changed while its MIG instance was made");
        have->dev[op->dev].made = true;
        have->dev[op->dev].gi = gi;
        have->dev[op->dev].ci = ci;
        int e = dra_record_write(d->journal_fd, have);
        return e < 0 ? gs_error_set(err, e, "cannot write the journal: %s", strerror(-e)) : 0;
}

/* The instances of a journaled claim's dynamic MIG devices, made through NVML without the lock (the record, in
 * memory as preparing, holds their placements against every other prepare meanwhile), each journaled after; a
 * failure rolls the claim back. */
static int make_instances(struct dra *d, const char *uid, struct gs_error *err) {
        struct dra_dyn_op ops[DRA_RESULTS_MAX];
        pthread_mutex_lock(&d->lock);
        struct dra_record *have = find(d, uid);
        struct dra_record r = have ? *have : (struct dra_record){ .n = 0 };
        unsigned n = have ? dra_dyn_plan_locked(d, &r, false, ops) : 0;
        pthread_mutex_unlock(&d->lock);
        int e = have ? 0 : gs_error_set(err, -EAGAIN, "the claim changed while it was prepared");
        for (unsigned k = 0; k < n && e >= 0; k++) {
                unsigned gi, ci;
                if ((e = dra_dyn_make_one(d, &r, &ops[k], &gi, &ci, err)) < 0)
                        break;
                dra_crash_point(d, "dra-prepare-mig-made");
                pthread_mutex_lock(&d->lock);
                e = record_made_locked(d, uid, &ops[k], gi, ci, err);
                if (e < 0 && !find(d, uid))
                        (void)dra_dyn_unmake_one(d, &r, &ops[k]); /* no record holds it: not left behind */
                pthread_mutex_unlock(&d->lock);
                if (e == 0)
                        dra_crash_point(d, "dra-prepare-mig-journaled");
                e = e ?: dra_dyn_nodes(d, ops[k].g, gi, ci, err);
        }
        if (e < 0) {
                pthread_mutex_lock(&d->lock);
                if ((have = find(d, uid))) {
                        struct dra_record back = *have;
                        roll_back(d, &back);
                }
                pthread_mutex_unlock(&d->lock);
        }
        return e < 0 ? e : 0;
}

/* After the MIG side was read again: the made instances' UUIDs and nodes, then the files (lock held). */
static int prepare_made_locked(struct dra *d, const char *uid, struct dra_record *ret, struct gs_error *err) {
        struct dra_record *have = find(d, uid);
        if (!have || have->state != DRA_REC_PREPARING)
                return gs_error_set(err, -EAGAIN, "the claim changed while its MIG instances were made");
        struct dra_record r = *have;
        int e = dra_dyn_fill(d, &r, err);
        if (e < 0) {
                roll_back(d, &r);
                return e;
        }
        return finish_locked(d, &r, ret, err);
}

int dra_engine_prepare(struct dra *d, const struct dra_claim *c, struct dra_record *ret, struct gs_error *err) {
        if (!c->allocated)
                return gs_error_set(err, -EINVAL, "claim %.63s/%.100s is not allocated", c->namespace_, c->name);
        if (c->n_results == 0) { /* nothing of this driver's: nothing to hold, no files, no record */
                memset(ret, 0, sizeof *ret);
                strscpy(ret->uid, c->uid, sizeof ret->uid);
                strscpy(ret->namespace_, c->namespace_, sizeof ret->namespace_);
                strscpy(ret->name, c->name, sizeof ret->name);
                ret->state = DRA_REC_PREPARED;
                return 0;
        }
        dra_mig_refresh(d); /* a MIG device named by the claim must still be there */
        pthread_mutex_lock(&d->lock);
        int e = prepare_locked(d, c, ret, err);
        pthread_mutex_unlock(&d->lock);
        if (e == PREPARE_MPS) {
                struct dra_record r = *ret;
                return start_daemon(d, &r, ret, err);
        }
        if (e != PREPARE_MIG)
                return e;
        e = make_instances(d, c->uid, err);
        if (e == 0) {
                dra_mig_refresh(d); /* the instances made: their UUIDs and capability nodes */
                pthread_mutex_lock(&d->lock);
                e = prepare_made_locked(d, c->uid, ret, err);
                pthread_mutex_unlock(&d->lock);
        }
        if (e < 0)
                dra_mig_refresh(d); /* rolled back: the instances are gone again */
        return e;
}

/* ---- unprepare ---- */

static int unprepare_done_locked(struct dra *d, const char *uid, struct gs_error *err);

/* 0 done, 1 the files removed and the claim's dynamic MIG instances to destroy (destroy_instances), -errno. */
static int unprepare_locked(struct dra *d, const char *uid, struct gs_error *err) {
        struct dra_record *have = find(d, uid);
        if (!have)
                return 0;
        struct dra_record r = *have;
        r.state = DRA_REC_UNPREPARING;
        int e = dra_record_write(d->journal_fd, &r);
        if (e < 0)
                return gs_error_set(err, e, "cannot write the journal: %s", strerror(-e));
        *have = r;
        dra_crash_point(d, "dra-unprepare-journaled");
        if (r.spec[0] && unlink(r.spec) < 0 && errno != ENOENT)
                return gs_error_set(err, -errno, "cannot remove %.200s: %s", r.spec, strerror(errno));
        dra_crash_point(d, "dra-unprepare-cdi");
        remove_files(d, &r);
        dra_crash_point(d, "dra-unprepare-limits");
        return dra_dyn_any(&r) ? 1 : unprepare_done_locked(d, uid, err);
}

/* The record removed, its GPUs given back (lock held). */
static int unprepare_done_locked(struct dra *d, const char *uid, struct gs_error *err) {
        int e;
        if ((e = dra_record_remove(d->journal_fd, uid)) < 0)
                return gs_error_set(err, e, "cannot remove the journal record: %s", strerror(-e));
        drop(d, uid);
        d->held = held_now(d);
        if (d->ops.set_held)
                d->ops.set_held(d->ops.userdata, d->held);
        dra_crash_point(d, "dra-unprepare-done");
        return 0;
}

/* An unpreparing claim's instances destroyed through NVML without the lock (its record, in memory, still holds their
 * placements), then the record removed. A failure keeps the record: kubelet's retry, or the next start, finishes. */
static int destroy_instances(struct dra *d, const char *uid, struct gs_error *err) {
        struct dra_dyn_op ops[DRA_RESULTS_MAX];
        pthread_mutex_lock(&d->lock);
        struct dra_record *have = find(d, uid);
        struct dra_record r = have ? *have : (struct dra_record){ .n = 0 };
        unsigned n = have ? dra_dyn_plan_locked(d, &r, true, ops) : 0;
        pthread_mutex_unlock(&d->lock);
        for (unsigned k = 0; k < n; k++) {
                int e = dra_dyn_unmake_one(d, &r, &ops[k]);
                if (e < 0)
                        return gs_error_set(err, e, "cannot destroy the claim's MIG instance: %s", strerror(-e));
        }
        dra_crash_point(d, "dra-unprepare-mig");
        pthread_mutex_lock(&d->lock);
        int e = have ? unprepare_done_locked(d, uid, err) : 0;
        pthread_mutex_unlock(&d->lock);
        return e;
}

int dra_engine_unprepare(struct dra *d, const char *uid, struct gs_error *err) {
        if (!dra_uid_valid(uid))
                return gs_error_set(err, -EINVAL, "not a claim UID");
        pthread_mutex_lock(&d->lock);
        int e = unprepare_locked(d, uid, err);
        pthread_mutex_unlock(&d->lock);
        if (e == 1)
                e = destroy_instances(d, uid, err);
        if (d->mig_dynamic)
                dra_mig_refresh(d); /* an instance destroyed: its placement is free again */
        return e;
}

/* ---- start-up ---- */

static int mkdir_p(const char *path, mode_t mode) {
        char p[DRA_PATH_MAX];
        strscpy(p, path, sizeof p);
        for (char *s = p + 1; *s; s++)
                if (*s == '/') {
                        *s = '\0';
                        if (mkdir(p, mode) < 0 && errno != EEXIST)
                                return -errno;
                        *s = '/';
                }
        return mkdir(p, mode) < 0 && errno != EEXIST ? -errno : 0;
}

int dra_engine_open(struct dra *d, struct gs_error *err) {
        int e = mkdir_p(d->journal_dir, 0700);
        if (e < 0)
                return gs_error_set(err, e, "cannot create %.200s: %s", d->journal_dir, strerror(-e));
        if ((e = mkdir_p(d->cdi_dir, 0755)) < 0)
                return gs_error_set(err, e, "cannot create %.200s: %s", d->cdi_dir, strerror(-e));
        if ((e = mkdir_p(d->limits_root, 0755)) < 0)
                return gs_error_set(err, e, "cannot create %.200s: %s", d->limits_root, strerror(-e));
        d->journal_fd = open(d->journal_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d->journal_fd < 0)
                return gs_error_set(err, -errno, "cannot open %.200s: %s", d->journal_dir, strerror(errno));
        struct cdi_roots roots = { .dev_root = d->dev_root, .driver_root = d->driver_root };
        struct gs_error de = { 0 };
        if (cdi_discover(&d->topo, &roots, CDI_CAP_ALL, &d->disc, &de) < 0) {
                dra_log(d, DRA_LOG_WARN,
                        "the driver's files are not found: the claims' CDI specs carry device nodes only",
                        "error=\"%s\"", de.message);
                cdi_discover_nodes(&d->topo, &roots, &d->disc);
        }
        struct limits_dir_libs libs;
        char standin[DRA_LIB_PATH_MAX], nvml[DRA_LIB_PATH_MAX];
        claim_libs(d, standin, nvml, DRA_LIB_PATH_MAX, &libs);
        if (d->interposer[0] && !libs.nvml) /* once: the discovery is not repeated */
                dra_log(d, DRA_LOG_WARN, "shared claims get no NVML stand-in: pynvml there reads the whole GPU",
                        "standin=%s nvml=%s", claim_standin(d, standin, sizeof standin) ? "found" : "missing",
                        nvml[0] ? nvml : "not found");
        return 0;
}

static void on_record(const char *file, const struct dra_record *r, const struct gs_error *e, void *userdata) {
        struct dra *d = userdata;
        if (!r) {
                dra_log(d, DRA_LOG_ERROR, "journal record not trusted: left in place", "file=%s error=\"%s\"", file,
                        e->message);
                return;
        }
        if (put(d, r) < 0)
                dra_log(d, DRA_LOG_ERROR, "out of memory reading the journal", "file=%s", file);
}

static bool named_by_record(const struct dra *d, const char *what, bool spec) {
        for (size_t i = 0; i < d->n_recs; i++) {
                const char *n = spec ? strrchr(d->recs[i].spec, '/') : d->recs[i].limits;
                if (n && streq(spec ? n + 1 : n, what))
                        return true;
        }
        return false;
}

/* Remove what a crash left that no record names: our CDI specs (and the atomic writer's temporaries of
 * them) and our limits dirs. */
static void sweep(struct dra *d) {
        char prefix[DRA_MAX_DOMAIN + 16], tmp_prefix[DRA_MAX_DOMAIN + 17];
        snprintf(prefix, sizeof prefix, "%s-" DRA_CDI_CLASS "_", d->driver);
        snprintf(tmp_prefix, sizeof tmp_prefix, ".%s", prefix);
        DIR *dir = opendir(d->cdi_dir);
        struct dirent *de;
        while (dir && (de = readdir(dir))) {
                bool tmp = startswith(de->d_name, tmp_prefix) && strstr(de->d_name, ATOMIC_FILE_TEMP_INFIX);
                if (tmp || (startswith(de->d_name, prefix) && !named_by_record(d, de->d_name, true))) {
                        dra_log(d, DRA_LOG_INFO, "removing a CDI spec no claim holds", "file=%s", de->d_name);
                        (void)unlinkat(dirfd(dir), de->d_name, 0);
                }
        }
        if (dir)
                closedir(dir);
        dir = opendir(d->limits_root);
        while (dir && (de = readdir(dir)))
                if (startswith(de->d_name, "dra-") && !named_by_record(d, de->d_name, false)) {
                        dra_log(d, DRA_LOG_INFO, "removing a limits dir no claim holds", "dir=%s", de->d_name);
                        (void)limits_dir_remove_at(dirfd(dir), de->d_name);
                }
        if (dir)
                closedir(dir);
        dir = opendir(d->mps_root);
        while (dir && (de = readdir(dir))) {
                const struct dra_record *r = dra_uid_valid(de->d_name) ? find(d, de->d_name) : NULL;
                if (dra_uid_valid(de->d_name) && (!r || r->sharing != DRA_SHARING_MPS)) {
                        dra_log(d, DRA_LOG_INFO, "stopping an MPS control daemon no claim holds", "dir=%s", de->d_name);
                        mps_stop(d, de->d_name);
                }
        }
        if (dir)
                closedir(dir);
}

/* A record that is not prepared: its instances destroyed, its files and record removed (lock held). 0 when it
 * went (then it is no more in d->recs), -errno when it stays for the next start. */
static int recover_undo(struct dra *d, const struct dra_record *r) {
        dra_log(d, DRA_LOG_INFO,
                r->state == DRA_REC_PREPARING ? "rolling back an interrupted prepare"
                                              : "finishing an interrupted unprepare",
                "claim=%s", r->uid);
        int e = dra_dyn_unmake(d, r, true);
        if (e < 0)
                return e;
        remove_files(d, r);
        if ((e = dra_record_remove(d->journal_fd, r->uid)) < 0) {
                dra_log(d, DRA_LOG_ERROR, "cannot remove a journal record", "claim=%s error=\"%s\"", r->uid,
                        strerror(-e));
                return e;
        }
        drop(d, r->uid);
        return 0;
}

/* The instances first (lock held): undone records' destroyed, prepared records' there. 1 when NVML's MIG side
 * changed. */
static int recover_instances(struct dra *d) {
        int changed = 0;
        for (size_t i = 0; i < d->n_recs;) {
                struct dra_record r = d->recs[i];
                if (r.state != DRA_REC_PREPARED) {
                        changed |= dra_dyn_any(&r);
                        if (recover_undo(d, &r) < 0)
                                i++;
                        continue; /* gone: the last record moved to i */
                }
                struct gs_error we = { 0 };
                int e = dra_dyn_any(&r) ? dra_dyn_ensure(d, &r, &we) : 0;
                if (e < 0)
                        dra_log(d, DRA_LOG_ERROR, "a prepared claim's MIG instance is gone and cannot be made again",
                                "claim=%s error=\"%s\"", r.uid, we.message);
                if (e > 0) {
                        d->recs[i] = r;
                        changed = 1;
                }
                i++;
        }
        return changed;
}

/* Then the files of the prepared records, with the MIG side as it is now (lock held). */
static void recover_files(struct dra *d) {
        for (size_t i = 0; i < d->n_recs; i++) {
                struct dra_record *r = &d->recs[i];
                struct gs_error we = { 0 };
                struct dra_record f = *r;
                if (dra_dyn_any(r) && dra_dyn_fill(d, &f, &we) == 0 && dra_record_write(d->journal_fd, &f) == 0)
                        *r = f; /* the MIG UUIDs of instances made again */
                if (write_files(d, r, &we) < 0)
                        dra_log(d, DRA_LOG_ERROR, "cannot rewrite a prepared claim's files", "claim=%s error=\"%s\"",
                                r->uid, we.message);
                if (r->sharing == DRA_SHARING_MPS && mps_start(d, r, &we) < 0)
                        dra_log(d, DRA_LOG_ERROR, "cannot start a prepared claim's MPS control daemon",
                                "claim=%s error=\"%s\"", r->uid, we.message);
        }
}

void dra_engine_recover(struct dra *d) {
        pthread_mutex_lock(&d->lock);
        int e = dra_journal_scan(d->journal_fd, on_record, d);
        if (e < 0)
                dra_log(d, DRA_LOG_ERROR, "cannot read the journal", "dir=%s error=\"%s\"", d->journal_dir,
                        strerror(-e));
        int changed = recover_instances(d);
        pthread_mutex_unlock(&d->lock);
        if (changed)
                dra_mig_refresh(d); /* no thread serves yet: the instances as they are now */
        pthread_mutex_lock(&d->lock);
        recover_files(d);
        sweep(d);
        d->held = held_now(d);
        if (d->ops.set_held)
                d->ops.set_held(d->ops.userdata, d->held);
        pthread_mutex_unlock(&d->lock);
}
