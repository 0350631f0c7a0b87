/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml-mig — the MIG part of the simulated libnvidia-ml.so.1: MIG mode (current and pending), GPU
 * instance and compute instance profiles, placements, remaining capacity, create and destroy, MIG device
 * handles and their attributes. The state lives in the shared node state (every process sees one node);
 * the rules are sim/mig.c's. Semantics and return codes: docs/simulator.md ("MIG"), which says where
 * NVIDIA's documentation leaves a code open and which one the simulator chose.
 *
 * Must never hold the state lock across anything that blocks, never crash on a caller's bad argument,
 * and never change anything when it answers an error.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/nvml-sim.h"
#include "util/util.h"

#define GI_IDS 15u /* 0..14: mig-minors' gi0..gi14 */

static struct nvmlGpuInstance_st gi_handles[TOPO_MAX_GPUS][GI_IDS];
static struct nvmlComputeInstance_st ci_handles[TOPO_MAX_GPUS][GI_IDS][SIM_MIG_MAX_CI];

/* CAP_SYS_ADMIN is bit 21 of the effective set. GPUSLICE_SIM_UNPRIVILEGED=1, a test hook, makes a root caller one
 * that is not (NVML's NO_PERMISSION paths, without running the caller as another user). */
bool nvml_sim_privileged(void) {
        const char *hook = secure_getenv("GPUSLICE_SIM_UNPRIVILEGED");
        if (hook && streq(hook, "1"))
                return false;
        if (geteuid() == 0)
                return true;
        _cleanup_(fclosep) FILE *f = fopen("/proc/self/status", "re");
        char line[256];
        while (f && fgets(line, sizeof line, f))
                if (startswith(line, "CapEff:"))
                        return (strtoull(line + 7, NULL, 16) >> 21) & 1;
        return false;
}

static const struct sim_mig_model *model_of(unsigned gpu) {
        return sim_mig_model(&nvml_sim_node()->gpu[gpu]);
}

static struct sim_mig_gpu *mig_of(unsigned gpu) {
        return &nvml_sim_state()->mig[gpu];
}

/* A GPU handle of a MIG-capable GPU; with need_on, MIG must be on (NOT_SUPPORTED otherwise). */
static nvmlReturn_t gpu_check(nvmlDevice_t d, bool need_on) {
        CHECK(nvml_sim_dev_check(d));
        if (!model_of(d->index))
                return NVML_ERROR_NOT_SUPPORTED;
        if (!need_on)
                return NVML_SUCCESS;
        CHECK(nvml_sim_lock());
        bool on = mig_of(d->index)->current == NVML_DEVICE_MIG_ENABLE;
        sim_state_unlock(nvml_sim_state());
        return on ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

/* ---- changes: privilege, the injected fault (gpuslice-sim mig-fault) ---- */

static nvmlReturn_t change_begin_locked(void) {
        struct sim_state *s = nvml_sim_state();
        if (s->mig_fault == SIM_MIG_FAULT_FAIL && s->mig_fault_after == 1) {
                s->mig_fault = SIM_MIG_FAULT_NONE;
                s->mig_fault_after = 0;
                return NVML_ERROR_UNKNOWN;
        }
        return NVML_SUCCESS;
}

/* After a change was made: true when the fault says the caller dies now. */
static bool change_done_locked(void) {
        struct sim_state *s = nvml_sim_state();
        if (s->mig_fault == SIM_MIG_FAULT_NONE || s->mig_fault_after == 0 || --s->mig_fault_after > 0)
                return false;
        bool kill = s->mig_fault == SIM_MIG_FAULT_KILL;
        s->mig_fault = SIM_MIG_FAULT_NONE;
        return kill;
}

static nvmlReturn_t change_end(bool kill) {
        sim_state_unlock(nvml_sim_state());
        if (kill)
                raise(SIGKILL); /* the process dies between two changes, as with a crash or a kill -9 */
        return NVML_SUCCESS;
}

static nvmlReturn_t errno_to_nvml(int r) {
        switch (r) {
                case 0: return NVML_SUCCESS;
                case -EOPNOTSUPP: return NVML_ERROR_NOT_SUPPORTED;
                case -EINVAL: return NVML_ERROR_INVALID_ARGUMENT;
                case -ENOSPC: return NVML_ERROR_INSUFFICIENT_RESOURCES;
                case -EBUSY: return NVML_ERROR_IN_USE;
                default: return NVML_ERROR_UNKNOWN;
        }
}

/* ---- MIG mode ---- */

/* Pending mode semantics: the new mode is pending at once; it becomes current now unless the GPU runs
 * processes (activation IN_USE) or the node needs a reset for it (RESET_REQUIRED); `gpuslice-sim
 * gpu-reset` applies a pending mode. Disabling MIG while GPU instances exist is refused (IN_USE). */
_public_ nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode, nvmlReturn_t *activationStatus) {
        CHECK(gpu_check(device, false));
        if (!activationStatus || mode > NVML_DEVICE_MIG_ENABLE)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!nvml_sim_privileged())
                return NVML_ERROR_NO_PERMISSION;
        CHECK(nvml_sim_lock());
        struct sim_state *s = nvml_sim_state();
        struct sim_mig_gpu *g = mig_of(device->index);
        bool has_gi = false;
        for (unsigned i = 0; i < SIM_MIG_MAX_GI; i++)
                has_gi |= g->gi[i].used != 0;
        nvmlReturn_t r = mode == NVML_DEVICE_MIG_DISABLE && has_gi ? NVML_ERROR_IN_USE : change_begin_locked();
        if (r != NVML_SUCCESS) {
                sim_state_unlock(s);
                return r;
        }
        sim_state_prune_locked(s);
        bool busy = false;
        for (unsigned i = 0; i < SIM_MAX_PROCS && !busy; i++)
                busy = s->proc[i].pid && s->proc[i].gpu == device->index;
        g->pending = mode;
        if (g->current == mode)
                *activationStatus = NVML_SUCCESS;
        else if (busy)
                *activationStatus = NVML_ERROR_IN_USE;
        else if (g->reset_required)
                *activationStatus = NVML_ERROR_RESET_REQUIRED;
        else {
                g->current = mode;
                *activationStatus = NVML_SUCCESS;
        }
        return change_end(change_done_locked());
}

_public_ nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
        CHECK(nvml_sim_dev_check(device));
        if (!count)
                return NVML_ERROR_INVALID_ARGUMENT;
        *count = 0;
        if (!model_of(device->index))
                return NVML_SUCCESS;
        CHECK(nvml_sim_lock());
        if (mig_of(device->index)->current == NVML_DEVICE_MIG_ENABLE)
                *count = SIM_MIG_MAX_DEVICES;
        sim_state_unlock(nvml_sim_state());
        return NVML_SUCCESS;
}

/* ---- MIG device handles ---- */

nvmlReturn_t nvml_sim_mig_resolve_locked(nvmlDevice_t d, struct sim_mig_gi **ret_gi, struct sim_mig_ci **ret_ci) {
        struct sim_mig_gpu *g = mig_of(d->index);
        uint64_t serial = __atomic_load_n(&d->serial, __ATOMIC_ACQUIRE);
        if (g->current != NVML_DEVICE_MIG_ENABLE || !serial)
                return NVML_ERROR_INVALID_ARGUMENT;
        for (unsigned i = 0; i < SIM_MIG_MAX_GI; i++)
                for (unsigned j = 0; g->gi[i].used && j < SIM_MIG_MAX_CI; j++) {
                        struct sim_mig_ci *c = &g->gi[i].ci[j];
                        if (c->used && c->index == d->mig - 1 && c->serial == serial) {
                                *ret_gi = &g->gi[i];
                                *ret_ci = c;
                                return NVML_SUCCESS;
                        }
                }
        return NVML_ERROR_INVALID_ARGUMENT; /* the MIG device it named was destroyed */
}

nvmlDevice_t nvml_sim_mig_by_uuid_locked(const char *uuid) {
        const struct topo *t = nvml_sim_node();
        char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        for (unsigned gpu = 0; gpu < t->n_gpus; gpu++) {
                struct sim_mig_gpu *g = mig_of(gpu);
                if (g->current != NVML_DEVICE_MIG_ENABLE)
                        continue;
                for (unsigned i = 0; i < SIM_MIG_MAX_GI; i++)
                        for (unsigned j = 0; g->gi[i].used && j < SIM_MIG_MAX_CI; j++) {
                                const struct sim_mig_ci *c = &g->gi[i].ci[j];
                                if (!c->used)
                                        continue;
                                sim_mig_uuid(t->gpu[gpu].uuid, c->serial, buf, sizeof buf);
                                if (streq(buf, uuid))
                                        return nvml_sim_mig_handle(gpu, c->index, c->serial);
                        }
        }
        return NULL;
}

void nvml_sim_mig_uuid_locked(nvmlDevice_t d, const struct sim_mig_ci *ci, char *buf, size_t len) {
        sim_mig_uuid(nvml_sim_node()->gpu[d->index].uuid, ci->serial, buf, len);
}

void nvml_sim_mig_name_locked(nvmlDevice_t d, const struct sim_mig_gi *gi, const struct sim_mig_ci *ci, char *buf,
                              size_t len) {
        char profile[48];
        sim_mig_device_name(model_of(d->index), gi, ci, profile, sizeof profile);
        snprintf(buf, len, "%s MIG %s", nvml_sim_node()->gpu[d->index].name, profile);
}

/* Indices may have holes: a destroyed device's index stays free until a new one takes it. */
_public_ nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                          nvmlDevice_t *migDevice) {
        CHECK(gpu_check(device, true));
        if (!migDevice || index >= SIM_MIG_MAX_DEVICES)
                return NVML_ERROR_INVALID_ARGUMENT;
        CHECK(nvml_sim_lock());
        struct sim_mig_gpu *g = mig_of(device->index);
        nvmlReturn_t r = NVML_ERROR_NOT_FOUND;
        for (unsigned i = 0; i < SIM_MIG_MAX_GI && r != NVML_SUCCESS; i++)
                for (unsigned j = 0; g->gi[i].used && j < SIM_MIG_MAX_CI; j++) {
                        const struct sim_mig_ci *c = &g->gi[i].ci[j];
                        if (c->used && c->index == index) {
                                *migDevice = nvml_sim_mig_handle(device->index, index, c->serial);
                                r = NVML_SUCCESS;
                                break;
                        }
                }
        sim_state_unlock(nvml_sim_state());
        return r;
}

static nvmlReturn_t mig_handle_check(nvmlDevice_t d, struct sim_mig_gi *ret_gi, struct sim_mig_ci *ret_ci) {
        if (!nvml_sim_initialized())
                return NVML_ERROR_UNINITIALIZED;
        if (!nvml_sim_handle_valid(d))
                return NVML_ERROR_INVALID_ARGUMENT;
        CHECK(nvml_sim_gpu_faults(d->index));
        if (!d->mig)
                return NVML_ERROR_INVALID_ARGUMENT; /* a GPU handle where a MIG device handle is wanted */
        CHECK(nvml_sim_lock());
        struct sim_mig_gi *gi = NULL;
        struct sim_mig_ci *ci = NULL;
        nvmlReturn_t r = nvml_sim_mig_resolve_locked(d, &gi, &ci);
        if (r == NVML_SUCCESS) {
                *ret_gi = *gi;
                *ret_ci = *ci;
        }
        sim_state_unlock(nvml_sim_state());
        return r;
}

_public_ nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice) {
        if (!nvml_sim_initialized())
                return NVML_ERROR_UNINITIALIZED;
        if (!nvml_sim_handle_valid(device) || !isMigDevice)
                return NVML_ERROR_INVALID_ARGUMENT;
        *isMigDevice = device->mig != 0;
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice, nvmlDevice_t *device) {
        struct sim_mig_gi gi;
        struct sim_mig_ci ci;
        CHECK(mig_handle_check(migDevice, &gi, &ci));
        if (!device)
                return NVML_ERROR_INVALID_ARGUMENT;
        *device = nvml_sim_gpu_handle(migDevice->index);
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id) {
        struct sim_mig_gi gi;
        struct sim_mig_ci ci;
        CHECK(mig_handle_check(device, &gi, &ci));
        if (!id)
                return NVML_ERROR_INVALID_ARGUMENT;
        *id = gi.id;
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id) {
        struct sim_mig_gi gi;
        struct sim_mig_ci ci;
        CHECK(mig_handle_check(device, &gi, &ci));
        if (!id)
                return NVML_ERROR_INVALID_ARGUMENT;
        *id = ci.id;
        return NVML_SUCCESS;
}

/* MIG device handles only (NVIDIA's header: "currently supports only MIG device handles"). */
_public_ nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes) {
        if (nvml_sim_initialized() && nvml_sim_handle_valid(device) && !device->mig)
                return NVML_ERROR_NOT_SUPPORTED;
        struct sim_mig_gi gi;
        struct sim_mig_ci ci;
        CHECK(mig_handle_check(device, &gi, &ci));
        if (!attributes)
                return NVML_ERROR_INVALID_ARGUMENT;
        const struct sim_mig_model *m = model_of(device->index);
        const struct sim_mig_profile *p = sim_mig_profile(m, gi.profile);
        struct sim_mig_ci_shape sh;
        if (!p || sim_mig_ci_shape(m, &gi, ci.profile, &sh) < 0)
                return NVML_ERROR_UNKNOWN;
        *attributes = (nvmlDeviceAttributes_t){ .multiprocessorCount = sh.sms,
                                                .sharedCopyEngineCount = p->copy_engines,
                                                .sharedDecoderCount = p->decoders,
                                                .sharedEncoderCount = p->encoders,
                                                .sharedJpegCount = p->jpegs,
                                                .sharedOfaCount = p->ofas,
                                                .gpuInstanceSliceCount = p->slices,
                                                .computeInstanceSliceCount = sh.slices,
                                                .memorySizeMB = p->memory_mib };
        return NVML_SUCCESS;
}

/* ---- GPU instance profiles ---- */

static void fill_gi_profile(const struct sim_mig_profile *p, nvmlGpuInstanceProfileInfo_t *info) {
        *info = (nvmlGpuInstanceProfileInfo_t){ .id = p->id,
                                                .isP2pSupported = 0,
                                                .sliceCount = p->slices,
                                                .instanceCount = p->instances,
                                                .multiprocessorCount = p->sms,
                                                .copyEngineCount = p->copy_engines,
                                                .decoderCount = p->decoders,
                                                .encoderCount = p->encoders,
                                                .jpegCount = p->jpegs,
                                                .ofaCount = p->ofas,
                                                .memorySizeMB = p->memory_mib };
}

/* profile: an NVML_GPU_INSTANCE_PROFILE_* shape. A shape the model lacks: NOT_SUPPORTED. */
static nvmlReturn_t gi_profile_lookup(nvmlDevice_t device, unsigned profile, const void *info,
                                      const struct sim_mig_profile **ret) {
        CHECK(gpu_check(device, true));
        if (!info || profile >= NVML_GPU_INSTANCE_PROFILE_COUNT)
                return NVML_ERROR_INVALID_ARGUMENT;
        *ret = sim_mig_profile(model_of(device->index), profile);
        return *ret ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

_public_ nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                          nvmlGpuInstanceProfileInfo_t *info) {
        const struct sim_mig_profile *p;
        CHECK(gi_profile_lookup(device, profile, info, &p));
        fill_gi_profile(p, info);
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                           nvmlGpuInstanceProfileInfo_v2_t *info) {
        const struct sim_mig_profile *p;
        CHECK(gi_profile_lookup(device, profile, info, &p));
        if (info->version != nvmlGpuInstanceProfileInfo_v2)
                return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        nvmlGpuInstanceProfileInfo_t v1;
        fill_gi_profile(p, &v1);
        *info = (nvmlGpuInstanceProfileInfo_v2_t){ .version = nvmlGpuInstanceProfileInfo_v2,
                                                   .id = v1.id,
                                                   .isP2pSupported = v1.isP2pSupported,
                                                   .sliceCount = v1.sliceCount,
                                                   .instanceCount = v1.instanceCount,
                                                   .multiprocessorCount = v1.multiprocessorCount,
                                                   .copyEngineCount = v1.copyEngineCount,
                                                   .decoderCount = v1.decoderCount,
                                                   .encoderCount = v1.encoderCount,
                                                   .jpegCount = v1.jpegCount,
                                                   .ofaCount = v1.ofaCount,
                                                   .memorySizeMB = v1.memorySizeMB };
        snprintf(info->name, sizeof info->name, "MIG %s", p->name);
        return NVML_SUCCESS;
}

/* profileId: a profile's id (info.id). Placements need privilege; they are answered whether MIG is on or
 * not (the static placements of the profile, whatever exists). */
_public_ nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device, unsigned int profileId,
                                                                    nvmlGpuInstancePlacement_t *placements,
                                                                    unsigned int *count) {
        CHECK(gpu_check(device, false));
        if (!count)
                return NVML_ERROR_INVALID_ARGUMENT;
        const struct sim_mig_profile *p = sim_mig_profile_by_id(model_of(device->index), profileId);
        if (!p)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!nvml_sim_privileged())
                return NVML_ERROR_NO_PERMISSION;
        unsigned starts[8], n = sim_mig_placements(p, starts);
        if (!placements) {
                *count = n;
                return NVML_SUCCESS;
        }
        if (*count < n) {
                *count = n;
                return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        for (unsigned i = 0; i < n; i++)
                placements[i] = (nvmlGpuInstancePlacement_t){ .start = starts[i], .size = p->mem_slices };
        *count = n;
        return NVML_SUCCESS;
}

static nvmlReturn_t gi_id_check(nvmlDevice_t device, unsigned profileId, const struct sim_mig_profile **ret) {
        CHECK(gpu_check(device, true));
        *ret = sim_mig_profile_by_id(model_of(device->index), profileId);
        if (!*ret)
                return NVML_ERROR_INVALID_ARGUMENT;
        return nvml_sim_privileged() ? NVML_SUCCESS : NVML_ERROR_NO_PERMISSION;
}

_public_ nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int profileId,
                                                                unsigned int *count) {
        const struct sim_mig_profile *p;
        CHECK(gi_id_check(device, profileId, &p));
        if (!count)
                return NVML_ERROR_INVALID_ARGUMENT;
        CHECK(nvml_sim_lock());
        *count = sim_mig_gi_remaining(mig_of(device->index), model_of(device->index), p->profile);
        sim_state_unlock(nvml_sim_state());
        return NVML_SUCCESS;
}

static nvmlGpuInstance_t gi_handle(unsigned gpu, uint32_t id) {
        struct nvmlGpuInstance_st *h = &gi_handles[gpu][id];
        h->gpu = gpu;
        h->id = id;
        return h;
}

static nvmlReturn_t gi_create(nvmlDevice_t device, unsigned profileId, int start, nvmlGpuInstance_t *gpuInstance) {
        const struct sim_mig_profile *p;
        CHECK(gi_id_check(device, profileId, &p));
        if (!gpuInstance)
                return NVML_ERROR_INVALID_ARGUMENT;
        CHECK(nvml_sim_lock());
        nvmlReturn_t r = change_begin_locked();
        struct sim_mig_gi *gi = NULL;
        if (r == NVML_SUCCESS)
                r = errno_to_nvml(
                        sim_mig_gi_create(mig_of(device->index), model_of(device->index), p->profile, start, &gi));
        if (r != NVML_SUCCESS) {
                sim_state_unlock(nvml_sim_state());
                return r;
        }
        *gpuInstance = gi_handle(device->index, gi->id);
        return change_end(change_done_locked());
}

_public_ nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profileId,
                                                  nvmlGpuInstance_t *gpuInstance) {
        return gi_create(device, profileId, -1, gpuInstance);
}

_public_ nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                               const nvmlGpuInstancePlacement_t *placement,
                                                               nvmlGpuInstance_t *gpuInstance) {
        const struct sim_mig_profile *p;
        CHECK(gi_id_check(device, profileId, &p));
        if (!placement || placement->size != p->mem_slices || placement->start > 7)
                return NVML_ERROR_INVALID_ARGUMENT;
        return gi_create(device, profileId, (int)placement->start, gpuInstance);
}

/* A GPU instance handle that names a GPU instance that exists now; lock held on success. */
static nvmlReturn_t gi_resolve_lock(nvmlGpuInstance_t h, struct sim_mig_gi **ret) {
        if (!nvml_sim_initialized())
                return NVML_ERROR_UNINITIALIZED;
        uintptr_t p = (uintptr_t)h, lo = (uintptr_t)gi_handles, hi = (uintptr_t)(gi_handles + nvml_sim_node()->n_gpus);
        if (!h || p < lo || p >= hi || (p - lo) % sizeof gi_handles[0][0])
                return NVML_ERROR_INVALID_ARGUMENT;
        CHECK(nvml_sim_gpu_faults(h->gpu));
        CHECK(nvml_sim_lock());
        struct sim_mig_gpu *g = mig_of(h->gpu);
        *ret = g->current == NVML_DEVICE_MIG_ENABLE ? sim_mig_gi_find(g, h->id) : NULL;
        if (!*ret) {
                sim_state_unlock(nvml_sim_state());
                return NVML_ERROR_INVALID_ARGUMENT; /* destroyed */
        }
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance) {
        struct sim_mig_gi *gi;
        CHECK(gi_resolve_lock(gpuInstance, &gi));
        nvmlReturn_t r = nvml_sim_privileged() ? change_begin_locked() : NVML_ERROR_NO_PERMISSION;
        if (r == NVML_SUCCESS)
                r = errno_to_nvml(sim_mig_gi_destroy(gi));
        if (r != NVML_SUCCESS) {
                sim_state_unlock(nvml_sim_state());
                return r;
        }
        return change_end(change_done_locked());
}

/* The GPU instances of one profile (profileId: info.id). gpuInstances must hold the profile's instanceCount. */
_public_ nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                                nvmlGpuInstance_t *gpuInstances, unsigned int *count) {
        CHECK(gpu_check(device, true));
        const struct sim_mig_profile *p = sim_mig_profile_by_id(model_of(device->index), profileId);
        if (!p || !gpuInstances || !count)
                return NVML_ERROR_INVALID_ARGUMENT;
        CHECK(nvml_sim_lock());
        struct sim_mig_gpu *g = mig_of(device->index);
        unsigned n = 0;
        for (unsigned i = 0; i < SIM_MIG_MAX_GI; i++)
                if (g->gi[i].used && g->gi[i].profile == p->profile && n < p->instances)
                        gpuInstances[n++] = gi_handle(device->index, g->gi[i].id);
        sim_state_unlock(nvml_sim_state());
        *count = n;
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                                   nvmlGpuInstance_t *gpuInstance) {
        CHECK(gpu_check(device, true));
        if (!gpuInstance || id >= GI_IDS)
                return NVML_ERROR_INVALID_ARGUMENT;
        CHECK(nvml_sim_lock());
        bool found = sim_mig_gi_find(mig_of(device->index), id) != NULL;
        sim_state_unlock(nvml_sim_state());
        if (!found)
                return NVML_ERROR_NOT_FOUND;
        *gpuInstance = gi_handle(device->index, id);
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info) {
        struct sim_mig_gi *gi;
        CHECK(gi_resolve_lock(gpuInstance, &gi));
        const struct sim_mig_profile *p = sim_mig_profile(model_of(gpuInstance->gpu), gi->profile);
        nvmlGpuInstanceInfo_t v = { .device = nvml_sim_gpu_handle(gpuInstance->gpu),
                                    .id = gi->id,
                                    .profileId = p ? p->id : 0,
                                    .placement = { .start = gi->start, .size = gi->size } };
        sim_state_unlock(nvml_sim_state());
        if (!info)
                return NVML_ERROR_INVALID_ARGUMENT;
        *info = v;
        return NVML_SUCCESS;
}

/* ---- compute instances ---- */

static nvmlReturn_t ci_shape_lock(nvmlGpuInstance_t gpuInstance, unsigned profile, struct sim_mig_gi **ret_gi,
                                  struct sim_mig_ci_shape *ret) {
        CHECK(gi_resolve_lock(gpuInstance, ret_gi));
        nvmlReturn_t r = NVML_SUCCESS;
        if (profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT)
                r = NVML_ERROR_INVALID_ARGUMENT;
        else if (sim_mig_ci_shape(model_of(gpuInstance->gpu), *ret_gi, profile, ret) < 0)
                r = NVML_ERROR_NOT_SUPPORTED;
        if (r != NVML_SUCCESS)
                sim_state_unlock(nvml_sim_state());
        return r;
}

static nvmlReturn_t ci_profile_info(nvmlGpuInstance_t gpuInstance, unsigned profile, unsigned engProfile,
                                    nvmlComputeInstanceProfileInfo_t *info, char *name, size_t name_len) {
        if (engProfile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
                return NVML_ERROR_NOT_SUPPORTED;
        struct sim_mig_gi *gi;
        struct sim_mig_ci_shape sh;
        CHECK(ci_shape_lock(gpuInstance, profile, &gi, &sh));
        const struct sim_mig_model *m = model_of(gpuInstance->gpu);
        const struct sim_mig_profile *p = sim_mig_profile(m, gi->profile);
        struct sim_mig_ci shape_ci = { .size = sh.slices };
        char pname[48];
        sim_mig_device_name(m, gi, &shape_ci, pname, sizeof pname);
        sim_state_unlock(nvml_sim_state());
        if (!p)
                return NVML_ERROR_UNKNOWN;
        *info = (nvmlComputeInstanceProfileInfo_t){ .id = profile,
                                                    .sliceCount = sh.slices,
                                                    .instanceCount = sh.instances,
                                                    .multiprocessorCount = sh.sms,
                                                    .sharedCopyEngineCount = p->copy_engines,
                                                    .sharedDecoderCount = p->decoders,
                                                    .sharedEncoderCount = p->encoders,
                                                    .sharedJpegCount = p->jpegs,
                                                    .sharedOfaCount = p->ofas };
        if (name)
                snprintf(name, name_len, "MIG %s", pname);
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance, unsigned int profile,
                                                                   unsigned int engProfile,
                                                                   nvmlComputeInstanceProfileInfo_t *info) {
        if (!info)
                return NVML_ERROR_INVALID_ARGUMENT;
        return ci_profile_info(gpuInstance, profile, engProfile, info, NULL, 0);
}

_public_ nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(nvmlGpuInstance_t gpuInstance, unsigned int profile,
                                                                    unsigned int engProfile,
                                                                    nvmlComputeInstanceProfileInfo_v2_t *info) {
        if (!info)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (info->version != nvmlComputeInstanceProfileInfo_v2)
                return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        nvmlComputeInstanceProfileInfo_t v1;
        char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
        CHECK(ci_profile_info(gpuInstance, profile, engProfile, &v1, name, sizeof name));
        *info = (nvmlComputeInstanceProfileInfo_v2_t){ .version = nvmlComputeInstanceProfileInfo_v2,
                                                       .id = v1.id,
                                                       .sliceCount = v1.sliceCount,
                                                       .instanceCount = v1.instanceCount,
                                                       .multiprocessorCount = v1.multiprocessorCount,
                                                       .sharedCopyEngineCount = v1.sharedCopyEngineCount,
                                                       .sharedDecoderCount = v1.sharedDecoderCount,
                                                       .sharedEncoderCount = v1.sharedEncoderCount,
                                                       .sharedJpegCount = v1.sharedJpegCount,
                                                       .sharedOfaCount = v1.sharedOfaCount };
        strscpy(info->name, name, sizeof info->name);
        return NVML_SUCCESS;
}

/* Compute instance profile ids are the NVML_COMPUTE_INSTANCE_PROFILE_* values (nvidia-smi's CI "ID"). */
_public_ nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t gpuInstance,
                                                                         unsigned int profileId, unsigned int *count) {
        struct sim_mig_gi *gi;
        struct sim_mig_ci_shape sh;
        CHECK(ci_shape_lock(gpuInstance, profileId, &gi, &sh));
        bool ok = count && nvml_sim_privileged();
        if (ok)
                *count = sim_mig_ci_remaining(mig_of(gpuInstance->gpu), model_of(gpuInstance->gpu), gi, profileId);
        sim_state_unlock(nvml_sim_state());
        return ok ? NVML_SUCCESS : count ? NVML_ERROR_NO_PERMISSION : NVML_ERROR_INVALID_ARGUMENT;
}

_public_ nvmlReturn_t nvmlGpuInstanceGetComputeInstancePossiblePlacements(nvmlGpuInstance_t gpuInstance,
                                                                          unsigned int profileId,
                                                                          nvmlComputeInstancePlacement_t *placements,
                                                                          unsigned int *count) {
        struct sim_mig_gi *gi;
        struct sim_mig_ci_shape sh;
        CHECK(ci_shape_lock(gpuInstance, profileId, &gi, &sh));
        const struct sim_mig_profile *p = sim_mig_profile(model_of(gpuInstance->gpu), gi->profile);
        sim_state_unlock(nvml_sim_state());
        if (!count || !p)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!nvml_sim_privileged())
                return NVML_ERROR_NO_PERMISSION;
        unsigned n = 0;
        nvmlComputeInstancePlacement_t all[SIM_MIG_MAX_CI];
        for (unsigned s = 0; s + sh.slices <= p->slices; s += sh.align)
                all[n++] = (nvmlComputeInstancePlacement_t){ .start = s, .size = sh.slices };
        if (!placements) {
                *count = n;
                return NVML_SUCCESS;
        }
        if (*count < n) {
                *count = n;
                return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        memcpy(placements, all, n * sizeof all[0]);
        *count = n;
        return NVML_SUCCESS;
}

static nvmlComputeInstance_t ci_handle(unsigned gpu, uint32_t gi, uint32_t id) {
        struct nvmlComputeInstance_st *h = &ci_handles[gpu][gi][id];
        h->gpu = gpu;
        h->gi = gi;
        h->id = id;
        return h;
}

static nvmlReturn_t ci_create(nvmlGpuInstance_t gpuInstance, unsigned profileId, int start,
                              nvmlComputeInstance_t *computeInstance) {
        struct sim_mig_gi *gi;
        struct sim_mig_ci_shape sh;
        CHECK(ci_shape_lock(gpuInstance, profileId, &gi, &sh));
        nvmlReturn_t r = !computeInstance         ? NVML_ERROR_INVALID_ARGUMENT
                         : !nvml_sim_privileged() ? NVML_ERROR_NO_PERMISSION
                                                  : change_begin_locked();
        struct sim_mig_ci *ci = NULL;
        if (r == NVML_SUCCESS)
                r = errno_to_nvml(sim_mig_ci_create(mig_of(gpuInstance->gpu), model_of(gpuInstance->gpu), gi, profileId,
                                                    start, &nvml_sim_state()->mig_serial, &ci));
        if (r != NVML_SUCCESS) {
                sim_state_unlock(nvml_sim_state());
                return r;
        }
        *computeInstance = ci_handle(gpuInstance->gpu, gi->id, ci->id);
        return change_end(change_done_locked());
}

_public_ nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                                                           nvmlComputeInstance_t *computeInstance) {
        return ci_create(gpuInstance, profileId, -1, computeInstance);
}

_public_ nvmlReturn_t nvmlGpuInstanceCreateComputeInstanceWithPlacement(nvmlGpuInstance_t gpuInstance,
                                                                        unsigned int profileId,
                                                                        const nvmlComputeInstancePlacement_t *placement,
                                                                        nvmlComputeInstance_t *computeInstance) {
        if (!placement || placement->start > 7)
                return NVML_ERROR_INVALID_ARGUMENT;
        struct sim_mig_gi *gi;
        struct sim_mig_ci_shape sh;
        CHECK(ci_shape_lock(gpuInstance, profileId, &gi, &sh));
        sim_state_unlock(nvml_sim_state());
        if (placement->size != sh.slices)
                return NVML_ERROR_INVALID_ARGUMENT;
        return ci_create(gpuInstance, profileId, (int)placement->start, computeInstance);
}

/* A compute instance handle that names one that exists now; lock held on success. */
static nvmlReturn_t ci_resolve_lock(nvmlComputeInstance_t h, struct sim_mig_gi **ret_gi, struct sim_mig_ci **ret) {
        if (!nvml_sim_initialized())
                return NVML_ERROR_UNINITIALIZED;
        uintptr_t p = (uintptr_t)h, lo = (uintptr_t)ci_handles, hi = (uintptr_t)(ci_handles + nvml_sim_node()->n_gpus);
        if (!h || p < lo || p >= hi || (p - lo) % sizeof ci_handles[0][0][0])
                return NVML_ERROR_INVALID_ARGUMENT;
        CHECK(nvml_sim_gpu_faults(h->gpu));
        CHECK(nvml_sim_lock());
        struct sim_mig_gpu *g = mig_of(h->gpu);
        *ret_gi = g->current == NVML_DEVICE_MIG_ENABLE ? sim_mig_gi_find(g, h->gi) : NULL;
        *ret = *ret_gi ? sim_mig_ci_find(*ret_gi, h->id) : NULL;
        if (!*ret) {
                sim_state_unlock(nvml_sim_state());
                return NVML_ERROR_INVALID_ARGUMENT;
        }
        return NVML_SUCCESS;
}

/* Refused (IN_USE) while processes run on it. */
_public_ nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance) {
        struct sim_mig_gi *gi;
        struct sim_mig_ci *ci;
        CHECK(ci_resolve_lock(computeInstance, &gi, &ci));
        struct sim_state *s = nvml_sim_state();
        sim_state_prune_locked(s);
        nvmlReturn_t r = !nvml_sim_privileged()                                             ? NVML_ERROR_NO_PERMISSION
                         : sim_mig_ci_procs_locked(s, computeInstance->gpu, gi->id, ci->id) ? NVML_ERROR_IN_USE
                                                                                            : change_begin_locked();
        if (r != NVML_SUCCESS) {
                sim_state_unlock(s);
                return r;
        }
        memset(ci, 0, sizeof *ci);
        return change_end(change_done_locked());
}

_public_ nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                                                         nvmlComputeInstance_t *computeInstances, unsigned int *count) {
        struct sim_mig_gi *gi;
        struct sim_mig_ci_shape sh;
        CHECK(ci_shape_lock(gpuInstance, profileId, &gi, &sh));
        unsigned n = 0;
        if (computeInstances && count)
                for (unsigned i = 0; i < SIM_MIG_MAX_CI; i++)
                        if (gi->ci[i].used && gi->ci[i].profile == profileId && n < sh.instances)
                                computeInstances[n++] = ci_handle(gpuInstance->gpu, gi->id, gi->ci[i].id);
        sim_state_unlock(nvml_sim_state());
        if (!computeInstances || !count)
                return NVML_ERROR_INVALID_ARGUMENT;
        *count = n;
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpuInstance, unsigned int id,
                                                            nvmlComputeInstance_t *computeInstance) {
        struct sim_mig_gi *gi;
        CHECK(gi_resolve_lock(gpuInstance, &gi));
        bool found = id < SIM_MIG_MAX_CI && sim_mig_ci_find(gi, id);
        uint32_t gid = gi->id;
        sim_state_unlock(nvml_sim_state());
        if (!computeInstance || id >= SIM_MIG_MAX_CI)
                return NVML_ERROR_INVALID_ARGUMENT;
        if (!found)
                return NVML_ERROR_NOT_FOUND;
        *computeInstance = ci_handle(gpuInstance->gpu, gid, id);
        return NVML_SUCCESS;
}

_public_ nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance,
                                                    nvmlComputeInstanceInfo_t *info) {
        struct sim_mig_gi *gi;
        struct sim_mig_ci *ci;
        CHECK(ci_resolve_lock(computeInstance, &gi, &ci));
        nvmlComputeInstanceInfo_t v = { .device = nvml_sim_gpu_handle(computeInstance->gpu),
                                        .gpuInstance = gi_handle(computeInstance->gpu, gi->id),
                                        .id = ci->id,
                                        .profileId = ci->profile,
                                        .placement = { .start = ci->start, .size = ci->size } };
        sim_state_unlock(nvml_sim_state());
        if (!info)
                return NVML_ERROR_INVALID_ARGUMENT;
        *info = v;
        return NVML_SUCCESS;
}
