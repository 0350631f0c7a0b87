/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mig — the MIG (Multi-Instance GPU) side of the node model, beside struct topo: for each GPU its MIG
 * mode (current and pending), its GPU instances (GI) with their compute instances (CI), and the MIG
 * devices they make (one per CI: what a container gets). Also what a GPU can hold (its GI profiles and
 * their placements, as NVML reports them), the pure layout planner (a wanted set of profiles → exact
 * placements → the create/destroy steps from what exists), and the reader of the driver's
 * /proc/driver/nvidia-caps/mig-minors text.
 *
 * A MIG device is not a GPU: it never appears in struct topo's GPU list, so nothing that hands out
 * whole GPUs can offer one. src/nvml fills these structs from NVML (nvml_mig_*), src/migctl applies
 * plans through NVML with a journal, src/cdi turns MIG devices into CDI devices.
 *
 * Pure: no I/O, no allocation, no global state, no logging. Errors: -errno with a struct gs_error.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "topo/topo.h"
#include "util/error.h"

#define MIG_MAX_PROFILES 17  /* NVML_GPU_INSTANCE_PROFILE_COUNT */
#define MIG_MAX_PLACEMENTS 8 /* memory slices: a profile starts at most at each */
#define MIG_MAX_GIS 8        /* GPU instances per GPU (7 on every MIG GPU so far) */
#define MIG_MAX_CIS 8        /* compute instances per GPU instance */
#define MIG_MAX_DEVICES 8    /* MIG devices per GPU (nvmlDeviceGetMaxMigDeviceCount: 7 so far) */
#define MIG_NO_INSTANCE UINT32_MAX
#define MIG_PROFILE_NAME_MAX 32

struct mig_placement {
        unsigned start, size; /* memory slices (GPU instance) or compute slices (compute instance) */
};

/* A GPU instance profile as the GPU reports it (nvmlDeviceGetGpuInstanceProfileInfoV, placements). */
struct mig_profile {
        unsigned nvml_profile;           /* NVML_GPU_INSTANCE_PROFILE_* (the shape asked for) */
        unsigned id;                     /* info.id: nvidia-smi's profile ID, device specific */
        char name[MIG_PROFILE_NAME_MAX]; /* "1g.10gb", "1g.10gb+me" */
        unsigned slices;                 /* compute slices */
        unsigned instances;              /* how many may exist at once */
        unsigned sms, copy_engines, decoders, encoders, jpegs, ofas;
        uint64_t memory_mib;
        unsigned n_placements;
        struct mig_placement placement[MIG_MAX_PLACEMENTS];
};

/* What one GPU can hold. */
struct mig_caps {
        unsigned n_profiles;
        struct mig_profile profile[MIG_MAX_PROFILES];
};

struct mig_ci {
        unsigned id;         /* unique within its GPU instance */
        unsigned profile_id; /* compute instance profile id */
        unsigned slices;     /* compute slices */
        struct mig_placement placement;
};

struct mig_gi {
        unsigned id;                        /* GPU instance id (0..14) */
        unsigned profile_id;                /* the GPU instance profile's id */
        char profile[MIG_PROFILE_NAME_MAX]; /* its name, "3g.40gb" ("" unknown) */
        unsigned slices;                    /* its compute slices */
        struct mig_placement placement;
        unsigned n_cis;
        struct mig_ci ci[MIG_MAX_CIS];
};

/* One MIG device: a compute instance, with what NVML says through its own handle. */
struct mig_device {
        unsigned gpu;                       /* the parent's NVML index */
        unsigned index;                     /* MIG index (indices may have holes) */
        unsigned gi, ci;                    /* instance ids */
        char profile[MIG_PROFILE_NAME_MAX]; /* "3g.40gb", or "1c.3g.40gb" for a part of its GPU instance */
        char uuid[96];                      /* "MIG-…" */
        char name[96];                      /* NVML's name: "NVIDIA A100-SXM4-80GB MIG 1g.10gb" */
        struct mig_placement placement;     /* the GPU instance's memory slices */
        uint64_t memory_total, memory_used; /* bytes, the GPU instance's (its compute instances share it) */
        uint64_t memory_mib;                /* attributes: memorySizeMB */
        unsigned sms, gi_slices, ci_slices, copy_engines, decoders, encoders, jpegs, ofas;
};

/* One GPU's MIG side. */
struct mig_gpu {
        int mode, pending; /* 1 on, 0 off, -1 the GPU has no MIG (or it could not be read) */
        unsigned n_gis;
        struct mig_gi gi[MIG_MAX_GIS]; /* every GPU instance, also those without a compute instance */
        unsigned n_devices;
        struct mig_device dev[MIG_MAX_DEVICES]; /* by MIG index */
};

/* The node's MIG side: gpu[i] belongs to struct topo's gpu[i]. */
struct mig_node {
        unsigned n_gpus;
        struct mig_gpu gpu[TOPO_MAX_GPUS];
};

/* Every GPU without MIG (mode -1), no instances. */
void mig_node_init(struct mig_node *m, unsigned n_gpus);
/* The MIG device of GPU gpu with this UUID / MIG index / instance ids, or NULL. */
const struct mig_device *mig_device_by_uuid(const struct mig_node *m, const char *uuid);
const struct mig_device *mig_device_by_index(const struct mig_node *m, unsigned gpu, unsigned index);
const struct mig_device *mig_device_by_ids(const struct mig_node *m, unsigned gpu, unsigned gi, unsigned ci);

/* ---- profile names ---- */

/* "MIG 1g.5gb" (NVML's profile names) → "1g.5gb"; anything else is copied as is. */
void mig_profile_name_clean(const char *nvml_name, char *buf, size_t len);
/* A GPU instance profile's name when NVML has no name for it (drivers before the _v2 profile info): the
 * share of the GPU's memory rounded up to eighths, times the GPU's memory in GB rounded up, as NVIDIA's
 * device plugin names it: 1g.5gb on a 40 GB A100. media: the +me profile. */
void mig_profile_name_compose(unsigned slices, uint64_t memory_mib, uint64_t gpu_memory_bytes, bool media, char *buf,
                              size_t len);
/* Whether s is a GPU instance profile name as layouts write it: <G>g.<M>gb with an optional +me, -me,
 * +me.all or +gfx suffix (no compute-instance part). */
bool mig_profile_name_valid(const char *s);
/* The compute instance profile (NVML_COMPUTE_INSTANCE_PROFILE_*) for a slice count, -EINVAL if none. */
int mig_ci_profile_for_slices(unsigned slices);

/* ---- layouts: what to make, where, and how ---- */

/* What a layout wants of one GPU: MIG on or off, and how many instances of each GI profile (each with
 * one compute instance covering it, as NVIDIA's tools make them). */
struct mig_want {
        bool enabled;
        unsigned n;
        struct {
                char profile[MIG_PROFILE_NAME_MAX];
                unsigned count;
        } item[MIG_MAX_PROFILES];
};

/* An exact layout: GPU instances at placements, each with its compute instances at theirs (from a layout:
 * one compute instance covering the GPU instance). */
struct mig_target_gi {
        unsigned profile_id;
        unsigned slices;
        struct mig_placement placement;
        unsigned n_cis;
        struct mig_placement ci[MIG_MAX_CIS]; /* compute slices */
};

struct mig_target {
        bool enabled;
        unsigned n;
        struct mig_target_gi gi[MIG_MAX_GIS];
};

/* The exact layout a GPU has now (what a rollback restores). */
void mig_target_from_gpu(const struct mig_gpu *g, struct mig_target *ret);
/* Whether the GPU holds exactly the target (mode included). */
bool mig_target_reached(const struct mig_gpu *g, const struct mig_target *t);

enum mig_step_kind {
        MIG_STEP_DESTROY_CI, /* gi, ci */
        MIG_STEP_DESTROY_GI, /* gi */
        MIG_STEP_SET_MODE,   /* mode */
        MIG_STEP_CREATE_GI,  /* profile_id at placement */
        MIG_STEP_CREATE_CI,  /* a compute instance at ci_placement in the GPU instance at placement */
};

struct mig_step {
        enum mig_step_kind kind;
        unsigned gi, ci; /* existing instances' ids (destroy) */
        unsigned profile_id;
        struct mig_placement placement;    /* of the GPU instance (create) */
        struct mig_placement ci_placement; /* compute slices of the compute instance (create) */
        int mode;
};

#define MIG_MAX_STEPS (2 * MIG_MAX_GIS * (MIG_MAX_CIS + 1) + 2)

struct mig_plan {
        unsigned n;
        struct mig_step step[MIG_MAX_STEPS];
};

/* The memory slices and compute slices of a GPU, from its profiles (the largest placement end, the
 * largest slice count). */
unsigned mig_caps_memory_slices(const struct mig_caps *c);
unsigned mig_caps_compute_slices(const struct mig_caps *c);
const struct mig_profile *mig_caps_profile_by_name(const struct mig_caps *c, const char *name);
const struct mig_profile *mig_caps_profile_by_id(const struct mig_caps *c, unsigned id);

/*
 * Choose placements for want on a GPU that can hold caps and holds now: every instance at one of its
 * profile's placements, no two sharing a memory slice, at most `instances` of a profile, compute slices
 * within the GPU's; among the layouts that fit, one that keeps the most existing GPU instances where
 * they are. 0 with *ret, or -EINVAL (a profile the GPU lacks, a malformed want) / -ENOSPC (it does not
 * fit) with the reason in err, before anything is changed. want->enabled false → an empty target.
 */
int mig_plan_place(const struct mig_caps *caps, const struct mig_gpu *now, const struct mig_want *want,
                   struct mig_target *ret, struct gs_error *err);

/*
 * The steps from now to target: compute instances the target does not have (at their placement, in a
 * GPU instance it keeps) and GPU instances it does not have are destroyed (compute instances first), then
 * the mode is set if it differs, then the missing GPU instances and compute instances are created. A GPU
 * instance is kept when the target has its profile at its placement. An empty plan: nothing to do.
 */
void mig_plan_steps(const struct mig_gpu *now, const struct mig_target *target, struct mig_plan *ret);

/* "destroy compute instance 0 of GPU instance 3", "create 1g.10gb at 2:1", … (caps may be NULL). */
void mig_step_describe(const struct mig_step *s, const struct mig_caps *caps, char *buf, size_t len);

/* ---- /proc/driver/nvidia-caps/mig-minors ---- */

#define MIG_MINORS_MAX (1u << 20) /* longer texts are refused */

struct mig_minor {
        enum {
                MIG_CAP_CONFIG,
                MIG_CAP_MONITOR,
                MIG_CAP_GI,
                MIG_CAP_CI
        } kind;
        unsigned gpu, gi, ci; /* gpu: the GPU's device minor */
        unsigned minor;       /* /dev/nvidia-caps/nvidia-cap<minor> */
};

/*
 * Called per line of mig-minors: "config M", "monitor M", "gpuN/giG/access M", "gpuN/giG/ciC/access M".
 * Lines of any other shape are skipped (as NVIDIA's plugin and toolkit skip them); a negative return stops
 * the walk and is returned.
 */
typedef int (*mig_minor_fn)(const struct mig_minor *m, void *userdata);
/* 0, or -EFBIG past MIG_MINORS_MAX, or fn's error. text need not be NUL-terminated. */
int mig_minors_parse(const char *text, size_t len, mig_minor_fn fn, void *userdata);
/* The minors of one MIG device's two capabilities, gpu<gpu_minor>/gi<gi>/access and .../ci<ci>/access:
 * 0, or -ENOENT when the text lacks either. */
int mig_minors_lookup(const char *text, size_t len, unsigned gpu_minor, unsigned gi, unsigned ci, unsigned *ret_gi,
                      unsigned *ret_ci);
