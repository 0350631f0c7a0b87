/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mig — a GPU's MIG side through NVML: the mode (current, pending), its GPU and compute instances, the
 * MIG devices with their UUIDs, attributes, memory and processes; its GPU instance profiles and their
 * placements; and the changes (mode, create and destroy of GPU and compute instances). Fills the model of
 * src/mig (struct mig_gpu, struct mig_caps).
 *
 * Must never: ask a MIG device handle what only the parent answers (minor, PCI, topology: NVML answers
 * those on the GPU's handle), fail a GPU's whole reading because one MIG device vanished meanwhile (a
 * destroyed device is skipped), or log.
 */
#include "nvml/nvml-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static bool is_media(unsigned nvml_profile) {
        return nvml_profile == NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 ||
               nvml_profile == NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1;
}

/* One GPU instance profile (by its NVML shape): 0, 1 when the GPU lacks it, or -errno. */
static int read_profile(struct nvml *n, nvmlDevice_t h, unsigned shape, uint64_t gpu_memory, struct mig_profile *ret,
                        struct nvml_error *err) {
        nvmlGpuInstanceProfileInfo_v2_t v2 = { .version = nvmlGpuInstanceProfileInfo_v2 };
        int rc = NVCALL(n, nvmlDeviceGetGpuInstanceProfileInfoV, h, shape, &v2);
        const char *func = "nvmlDeviceGetGpuInstanceProfileInfoV";
        if (rc == NVML_SYM_MISSING || rc == NVML_ERROR_FUNCTION_NOT_FOUND) {
                nvmlGpuInstanceProfileInfo_t v1;
                rc = NVCALL(n, nvmlDeviceGetGpuInstanceProfileInfo, h, shape, &v1);
                func = "nvmlDeviceGetGpuInstanceProfileInfo";
                if (rc == NVML_SUCCESS) {
                        v2 = (nvmlGpuInstanceProfileInfo_v2_t){ .id = v1.id,
                                                                .sliceCount = v1.sliceCount,
                                                                .instanceCount = v1.instanceCount,
                                                                .multiprocessorCount = v1.multiprocessorCount,
                                                                .copyEngineCount = v1.copyEngineCount,
                                                                .decoderCount = v1.decoderCount,
                                                                .encoderCount = v1.encoderCount,
                                                                .jpegCount = v1.jpegCount,
                                                                .ofaCount = v1.ofaCount,
                                                                .memorySizeMB = v1.memorySizeMB };
                }
        }
        if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT)
                return 1; /* this shape is not one of the GPU's */
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc == NVML_SYM_MISSING ? NVML_ERROR_FUNCTION_NOT_FOUND : rc, func, err);
        *ret = (struct mig_profile){ .nvml_profile = shape,
                                     .id = v2.id,
                                     .slices = v2.sliceCount,
                                     .instances = v2.instanceCount,
                                     .sms = v2.multiprocessorCount,
                                     .copy_engines = v2.copyEngineCount,
                                     .decoders = v2.decoderCount,
                                     .encoders = v2.encoderCount,
                                     .jpegs = v2.jpegCount,
                                     .ofas = v2.ofaCount,
                                     .memory_mib = v2.memorySizeMB };
        char name[sizeof v2.name + 1];
        strnscpy(name, sizeof name, v2.name, strnlen(v2.name, sizeof v2.name));
        if (name[0])
                mig_profile_name_clean(name, ret->name, sizeof ret->name);
        else
                mig_profile_name_compose(v2.sliceCount, v2.memorySizeMB, gpu_memory, is_media(shape), ret->name,
                                         sizeof ret->name);
        return 0;
}

static int read_placements(struct nvml *n, nvmlDevice_t h, struct mig_profile *p, struct nvml_error *err) {
        nvmlGpuInstancePlacement_t pl[MIG_MAX_PLACEMENTS];
        unsigned count = MIG_MAX_PLACEMENTS;
        int rc = NVCALL(n, nvmlDeviceGetGpuInstancePossiblePlacements_v2, h, p->id, pl, &count);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc, "nvmlDeviceGetGpuInstancePossiblePlacements_v2", err);
        p->n_placements = MIN(count, (unsigned)MIG_MAX_PLACEMENTS);
        for (unsigned i = 0; i < p->n_placements; i++)
                p->placement[i] = (struct mig_placement){ .start = pl[i].start, .size = pl[i].size };
        return 0;
}

/* The profiles, with their placements when asked (that query needs privilege). */
static int read_caps(struct nvml *n, unsigned index, bool placements, struct mig_caps *ret, struct nvml_error *err) {
        nvmlDevice_t h;
        int r = nvml_handle(n, index, &h, err);
        if (r < 0)
                return r;
        uint64_t total = 0, used = 0;
        (void)nvml_memory(n, h, &total, &used, NULL);
        struct mig_caps c = { 0 };
        for (unsigned shape = 0; shape < NVML_GPU_INSTANCE_PROFILE_COUNT && c.n_profiles < MIG_MAX_PROFILES; shape++) {
                struct mig_profile *p = &c.profile[c.n_profiles];
                r = read_profile(n, h, shape, total, p, err);
                if (r < 0)
                        return r;
                if (r > 0)
                        continue;
                if (placements && (r = read_placements(n, h, p, err)) < 0)
                        return r;
                c.n_profiles++;
        }
        if (c.n_profiles == 0)
                return nvml_fail(n, NVML_ERROR_NOT_SUPPORTED, "nvmlDeviceGetGpuInstanceProfileInfoV", err);
        *ret = c;
        return 0;
}

int nvml_mig_caps(struct nvml *n, unsigned index, struct mig_caps *ret, struct nvml_error *err) {
        if (!n || !ret)
                return -EINVAL;
        return read_caps(n, index, true, ret, err);
}

int nvml_mig_mode(struct nvml *n, unsigned index, int *ret_current, int *ret_pending, struct nvml_error *err) {
        nvmlDevice_t h;
        int r = nvml_handle(n, index, &h, err);
        if (r < 0)
                return r;
        unsigned cur = 0, pend = 0;
        int rc = NVCALL(n, nvmlDeviceGetMigMode, h, &cur, &pend);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc == NVML_SYM_MISSING ? NVML_ERROR_NOT_SUPPORTED : rc, "nvmlDeviceGetMigMode",
                                 err);
        *ret_current = cur == NVML_DEVICE_MIG_ENABLE;
        *ret_pending = pend == NVML_DEVICE_MIG_ENABLE;
        return 0;
}

/* ---- instances ---- */

static int read_cis(struct nvml *n, nvmlGpuInstance_t gh, struct mig_gi *g, struct nvml_error *err) {
        for (unsigned shape = 0; shape < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; shape++) {
                nvmlComputeInstanceProfileInfo_t info;
                int rc = NVCALL(n, nvmlGpuInstanceGetComputeInstanceProfileInfo, gh, shape,
                                NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info);
                if (rc != NVML_SUCCESS)
                        continue; /* not a shape of this GPU instance */
                nvmlComputeInstance_t ch[MIG_MAX_CIS];
                unsigned count = 0;
                rc = NVCALL(n, nvmlGpuInstanceGetComputeInstances, gh, info.id, ch, &count);
                if (rc != NVML_SUCCESS)
                        return nvml_fail(n, rc, "nvmlGpuInstanceGetComputeInstances", err);
                for (unsigned k = 0; k < MIN(count, (unsigned)MIG_MAX_CIS) && g->n_cis < MIG_MAX_CIS; k++) {
                        nvmlComputeInstanceInfo_t ci;
                        if (NVCALL(n, nvmlComputeInstanceGetInfo_v2, ch[k], &ci) != NVML_SUCCESS)
                                continue; /* destroyed meanwhile */
                        g->ci[g->n_cis++] = (struct mig_ci){ .id = ci.id,
                                                             .profile_id = ci.profileId,
                                                             .slices = info.sliceCount,
                                                             .placement = { ci.placement.start, ci.placement.size } };
                }
        }
        return 0;
}

static int read_gis(struct nvml *n, nvmlDevice_t h, const struct mig_caps *caps, struct mig_gpu *ret,
                    struct nvml_error *err) {
        for (unsigned i = 0; i < caps->n_profiles; i++) {
                const struct mig_profile *p = &caps->profile[i];
                nvmlGpuInstance_t gh[MIG_MAX_GIS];
                unsigned count = 0;
                if (p->instances > MIG_MAX_GIS)
                        return nvml_fail(n, NVML_ERROR_INSUFFICIENT_SIZE, "nvmlDeviceGetGpuInstances", err);
                int rc = NVCALL(n, nvmlDeviceGetGpuInstances, h, p->id, gh, &count);
                if (rc != NVML_SUCCESS)
                        return nvml_fail(n, rc, "nvmlDeviceGetGpuInstances", err);
                for (unsigned k = 0; k < MIN(count, p->instances) && ret->n_gis < MIG_MAX_GIS; k++) {
                        nvmlGpuInstanceInfo_t info;
                        if (NVCALL(n, nvmlGpuInstanceGetInfo, gh[k], &info) != NVML_SUCCESS)
                                continue;
                        struct mig_gi *g = &ret->gi[ret->n_gis++];
                        *g = (struct mig_gi){ .id = info.id,
                                              .profile_id = info.profileId,
                                              .slices = p->slices,
                                              .placement = { info.placement.start, info.placement.size } };
                        strscpy(g->profile, p->name, sizeof g->profile);
                        int r = read_cis(n, gh[k], g, err);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

/* MIG device k of GPU h: 0, 1 when there is none at that index (or it went away), -errno. */
static int read_device(struct nvml *n, unsigned index, nvmlDevice_t h, unsigned k, const struct mig_caps *caps,
                       struct mig_gpu *g, struct mig_device *ret) {
        nvmlDevice_t md;
        int rc = NVCALL(n, nvmlDeviceGetMigDeviceHandleByIndex, h, k, &md);
        if (rc != NVML_SUCCESS)
                return 1; /* NOT_FOUND: indices may have holes */
        struct mig_device d = { .gpu = index, .index = k };
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "", name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "";
        nvmlDeviceAttributes_t a;
        if (NVCALL(n, nvmlDeviceGetUUID, md, uuid, sizeof uuid) != NVML_SUCCESS ||
            NVCALL(n, nvmlDeviceGetGpuInstanceId, md, &d.gi) != NVML_SUCCESS ||
            NVCALL(n, nvmlDeviceGetComputeInstanceId, md, &d.ci) != NVML_SUCCESS ||
            NVCALL(n, nvmlDeviceGetAttributes_v2, md, &a) != NVML_SUCCESS)
                return 1; /* destroyed between the index and the queries */
        strnscpy(d.uuid, sizeof d.uuid, uuid, strnlen(uuid, sizeof uuid));
        if (NVCALL(n, nvmlDeviceGetName, md, name, sizeof name) == NVML_SUCCESS)
                strnscpy(d.name, sizeof d.name, name, strnlen(name, sizeof name));
        d.sms = a.multiprocessorCount;
        d.copy_engines = a.sharedCopyEngineCount;
        d.decoders = a.sharedDecoderCount;
        d.encoders = a.sharedEncoderCount;
        d.jpegs = a.sharedJpegCount;
        d.ofas = a.sharedOfaCount;
        d.gi_slices = a.gpuInstanceSliceCount;
        d.ci_slices = a.computeInstanceSliceCount;
        d.memory_mib = a.memorySizeMB;
        (void)nvml_memory(n, md, &d.memory_total, &d.memory_used, NULL);
        for (unsigned i = 0; i < g->n_gis; i++)
                if (g->gi[i].id == d.gi) {
                        d.placement = g->gi[i].placement;
                        const struct mig_profile *p = mig_caps_profile_by_id(caps, g->gi[i].profile_id);
                        if (p && d.ci_slices < p->slices)
                                snprintf(d.profile, sizeof d.profile, "%uc.%s", d.ci_slices, p->name);
                        else if (p)
                                strscpy(d.profile, p->name, sizeof d.profile);
                }
        *ret = d;
        return 0;
}

int nvml_mig_gpu(struct nvml *n, unsigned index, struct mig_gpu *ret, struct nvml_error *err) {
        if (!n || !ret)
                return -EINVAL;
        memset(ret, 0, sizeof *ret);
        ret->mode = ret->pending = -1;
        int cur, pend;
        int r = nvml_mig_mode(n, index, &cur, &pend, err);
        if (r < 0)
                return r;
        ret->mode = cur;
        ret->pending = pend;
        if (!cur)
                return 0;
        nvmlDevice_t h;
        if ((r = nvml_handle(n, index, &h, err)) < 0)
                return r;
        struct mig_caps *caps = malloc(sizeof *caps);
        if (!caps)
                return -ENOMEM;
        r = read_caps(n, index, false, caps, err);
        if (r >= 0)
                r = read_gis(n, h, caps, ret, err);
        unsigned max = 0;
        if (r >= 0 && NVCALL(n, nvmlDeviceGetMaxMigDeviceCount, h, &max) != NVML_SUCCESS)
                max = 0;
        for (unsigned k = 0; r >= 0 && k < MIN(max, (unsigned)MIG_MAX_DEVICES); k++) {
                int d = read_device(n, index, h, k, caps, ret, &ret->dev[ret->n_devices]);
                if (d == 0)
                        ret->n_devices++;
        }
        free(caps);
        return r < 0 ? r : 0;
}

int nvml_mig_inventory(struct nvml *n, const struct topo *t, struct mig_node *ret, struct nvml_error *err) {
        if (!n || !t || !ret)
                return -EINVAL;
        mig_node_init(ret, t->n_gpus);
        for (unsigned i = 0; i < t->n_gpus; i++) {
                if (t->gpu[i].state != TOPO_GPU_OK || t->gpu[i].mig_mode < 0)
                        continue;
                struct nvml_error e;
                int r = nvml_mig_gpu(n, i, &ret->gpu[i], &e);
                if (r < 0 && r != -EOPNOTSUPP && r != -ENODEV && r != -EPERM) {
                        if (err)
                                *err = e;
                        return r;
                }
        }
        return 0;
}

int nvml_mig_device_processes(struct nvml *n, unsigned index, unsigned mig_index, struct nvml_process **ret,
                              size_t *ret_n, struct nvml_error *err) {
        if (!n || !ret || !ret_n)
                return -EINVAL;
        nvmlDevice_t h, md;
        int r = nvml_handle(n, index, &h, err);
        if (r < 0)
                return r;
        int rc = NVCALL(n, nvmlDeviceGetMigDeviceHandleByIndex, h, mig_index, &md);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc, "nvmlDeviceGetMigDeviceHandleByIndex", err);
        return nvml_processes_of(n, md, ret, ret_n, err);
}

/* ---- changes ---- */

int nvml_mig_set_mode(struct nvml *n, unsigned index, int mode, int *ret_activation, struct nvml_error *err) {
        nvmlDevice_t h;
        int r = nvml_handle(n, index, &h, err);
        if (r < 0)
                return r;
        nvmlReturn_t act = NVML_SUCCESS;
        int rc = NVCALL(n, nvmlDeviceSetMigMode, h, mode ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE, &act);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc == NVML_SYM_MISSING ? NVML_ERROR_FUNCTION_NOT_FOUND : rc, "nvmlDeviceSetMigMode",
                                 err);
        *ret_activation = (int)act;
        return 0;
}

static int gi_by_id(struct nvml *n, unsigned index, unsigned gi, nvmlGpuInstance_t *ret, struct nvml_error *err) {
        nvmlDevice_t h;
        int r = nvml_handle(n, index, &h, err);
        if (r < 0)
                return r;
        int rc = NVCALL(n, nvmlDeviceGetGpuInstanceById, h, gi, ret);
        return rc == NVML_SUCCESS ? 0 : nvml_fail(n, rc, "nvmlDeviceGetGpuInstanceById", err);
}

int nvml_mig_create_gi(struct nvml *n, unsigned index, unsigned profile_id, struct mig_placement at, unsigned *ret_gi,
                       struct nvml_error *err) {
        nvmlDevice_t h;
        int r = nvml_handle(n, index, &h, err);
        if (r < 0)
                return r;
        nvmlGpuInstancePlacement_t pl = { .start = at.start, .size = at.size };
        nvmlGpuInstance_t gh;
        int rc = NVCALL(n, nvmlDeviceCreateGpuInstanceWithPlacement, h, profile_id, &pl, &gh);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc == NVML_SYM_MISSING ? NVML_ERROR_FUNCTION_NOT_FOUND : rc,
                                 "nvmlDeviceCreateGpuInstanceWithPlacement", err);
        nvmlGpuInstanceInfo_t info;
        rc = NVCALL(n, nvmlGpuInstanceGetInfo, gh, &info);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc, "nvmlGpuInstanceGetInfo", err);
        *ret_gi = info.id;
        return 0;
}

int nvml_mig_create_ci(struct nvml *n, unsigned index, unsigned gi, struct mig_placement at, unsigned *ret_ci,
                       struct nvml_error *err) {
        unsigned slices = at.size;
        nvmlGpuInstance_t gh;
        int r = gi_by_id(n, index, gi, &gh, err);
        if (r < 0)
                return r;
        int shape = mig_ci_profile_for_slices(slices);
        nvmlComputeInstanceProfileInfo_t info;
        int rc = shape < 0 ? NVML_ERROR_NOT_SUPPORTED
                           : NVCALL(n, nvmlGpuInstanceGetComputeInstanceProfileInfo, gh, (unsigned)shape,
                                    NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc, "nvmlGpuInstanceGetComputeInstanceProfileInfo", err);
        nvmlComputeInstance_t ch;
        nvmlComputeInstancePlacement_t pl = { .start = at.start, .size = at.size };
        rc = NVCALL(n, nvmlGpuInstanceCreateComputeInstanceWithPlacement, gh, info.id, &pl, &ch);
        if (rc == NVML_SYM_MISSING && at.start == 0) /* drivers before placements: the lowest free one */
                rc = NVCALL(n, nvmlGpuInstanceCreateComputeInstance, gh, info.id, &ch);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc == NVML_SYM_MISSING ? NVML_ERROR_FUNCTION_NOT_FOUND : rc,
                                 "nvmlGpuInstanceCreateComputeInstanceWithPlacement", err);
        nvmlComputeInstanceInfo_t ci;
        rc = NVCALL(n, nvmlComputeInstanceGetInfo_v2, ch, &ci);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc, "nvmlComputeInstanceGetInfo_v2", err);
        *ret_ci = ci.id;
        return 0;
}

int nvml_mig_destroy_ci(struct nvml *n, unsigned index, unsigned gi, unsigned ci, struct nvml_error *err) {
        nvmlGpuInstance_t gh;
        int r = gi_by_id(n, index, gi, &gh, err);
        if (r < 0)
                return r;
        nvmlComputeInstance_t ch;
        int rc = NVCALL(n, nvmlGpuInstanceGetComputeInstanceById, gh, ci, &ch);
        if (rc == NVML_SUCCESS)
                rc = NVCALL(n, nvmlComputeInstanceDestroy, ch);
        return rc == NVML_SUCCESS ? 0 : nvml_fail(n, rc, "nvmlComputeInstanceDestroy", err);
}

int nvml_mig_destroy_gi(struct nvml *n, unsigned index, unsigned gi, struct nvml_error *err) {
        nvmlGpuInstance_t gh;
        int r = gi_by_id(n, index, gi, &gh, err);
        if (r < 0)
                return r;
        int rc = NVCALL(n, nvmlGpuInstanceDestroy, gh);
        return rc == NVML_SUCCESS ? 0 : nvml_fail(n, rc, "nvmlGpuInstanceDestroy", err);
}
