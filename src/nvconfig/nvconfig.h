/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvconfig — NVIDIA's device plugin config file (`version: v1`, NVIDIA/k8s-device-plugin api/config/v1) read as it
 * is: `flags` (and `flags.plugin`, `flags.gfd`), `resources`, `sharing.timeSlicing`, `sharing.mps`, and the choice
 * of one entry of a config directory (a mounted ConfigMap) by the node label nvidia.com/device-plugin.config, as
 * NVIDIA's config-manager makes it. docs/sharing.md ("Migrating from NVIDIA's device plugin") lists every key.
 *
 * Every key is either applied (onto struct gpuslice_config through config_set, or kept here for the agent:
 * replicas), accepted because it has no effect in gpuslice and said so (a note the agent logs), or refused with
 * the key named (-EOPNOTSUPP): never ignored silently. An unknown key is refused too (-EINVAL): a typo must not
 * turn into a default. Pure library code: never logs, never touches global state; YAML through kube/yaml.h.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "util/error.h"

#define NVCONFIG_FILE_MAX (1u << 20)
#define NVCONFIG_LABEL "nvidia.com/device-plugin.config"
#define NVCONFIG_MAX_DEVICES 64    /* entries of one `devices` list */
#define NVCONFIG_REPLICAS_MAX 1024 /* replicas of one GPU: bounds the ListAndWatch list */
#define NVCONFIG_NOTES_MAX 16
#define NVCONFIG_DEVICE_REF_MAX 96

enum nvconfig_sharing {
        NVCONFIG_SHARING_NONE = 0,
        NVCONFIG_SHARING_TIME_SLICING, /* sharing.timeSlicing */
        NVCONFIG_SHARING_MPS,          /* sharing.mps */
};

/* The replicated resource of one strategy (sharing.*.resources[]: gpuslice takes one, nvidia.com/gpu). */
struct nvconfig_replicas {
        enum nvconfig_sharing sharing;       /* NONE: the strategy is not in the file (the rest is zero) */
        bool fail_requests_greater_than_one; /* time-slicing: default false; MPS: default true (NVIDIA's) */
        char name[CONFIG_NAME_MAX];          /* what the replicas are advertised as: rename, <name>.shared, or name */
        unsigned replicas;                   /* per GPU, 1..NVCONFIG_REPLICAS_MAX */
        bool all;                            /* devices: all (the default) */
        unsigned count;                      /* devices: N — the first N GPUs by index (0: not this form) */
        char devices[NVCONFIG_MAX_DEVICES][NVCONFIG_DEVICE_REF_MAX]; /* devices: [index | GPU UUID, ...] */
        unsigned n_devices;
};

/* What the file says that gpuslice_config does not hold. A plain value. Both strategies may be given (beyond
 * NVIDIA's plugin, which takes MPS alone then): their devices must be disjoint and their names differ, checked here
 * where the file decides it (all, counts, equal entries, an index inside a count) and against the GPUs by the agent
 * (a UUID beside an index). */
struct nvconfig {
        struct nvconfig_replicas ts;         /* sharing.timeSlicing (ts.sharing NONE: absent) */
        struct nvconfig_replicas mps;        /* sharing.mps (mps.sharing NONE: absent) */
        bool pass_device_specs;              /* flags.plugin.passDeviceSpecs (default false, NVIDIA's) */
        char notes[NVCONFIG_NOTES_MAX][160]; /* keys accepted without an effect, and why (the agent logs them) */
        char source[CONFIG_PATH_MAX + 256];  /* the path it was read from (nvconfig_parse's `path`) */
        unsigned n_notes;
};

/* Parse file text (need not be NUL-terminated) into *ret and apply its flags onto *cfg (both written only on
 * success). -EINVAL: malformed, a wrong type or value, an unknown key; -EOPNOTSUPP: a key or value gpuslice does
 * not support; err names the key ("PATH: sharing.timeSlicing.resources[0].replicas: ..."). */
int nvconfig_parse(const char *text, size_t len, const char *path, struct gpuslice_config *cfg, struct nvconfig *ret,
                   struct gs_error *err);
/* Read PATH (at most NVCONFIG_FILE_MAX bytes) into *ret_text (malloc'ed, NUL-terminated, caller frees) and
 * *ret_len, both written only on success: the one reader of the file, for callers that look at its bytes before
 * parsing them. -errno; err says why ("PATH: larger than 1 MiB"). */
int nvconfig_read(const char *path, char **ret_text, size_t *ret_len, struct gs_error *err);
/* Read PATH (nvconfig_read) and parse it as nvconfig_parse. */
int nvconfig_load(const char *path, struct gpuslice_config *cfg, struct nvconfig *ret, struct gs_error *err);

/* The entry of config directory DIR to use, as NVIDIA's config-manager chooses: the value of the node label
 * (label_value; NULL or "" when the node has none) names the entry; without one, default_name ("" none), else an
 * entry named "default", else the only entry. Entry names are file names in DIR (ConfigMap keys: no '/', no
 * leading '.'); the result is "DIR/NAME" in buf. -ENOENT (the named entry is missing), -EINVAL (no label and no
 * default among several entries, or a bad name), -errno reading DIR. */
int nvconfig_select(const char *dir, const char *label_value, const char *default_name, char *buf, size_t len,
                    struct gs_error *err);

/* The name of a sharing strategy as GFD labels it: "none", "time-slicing", "mps". */
const char *nvconfig_sharing_name(enum nvconfig_sharing s);
/* The file's key of strategy s ("sharing.timeSlicing", "sharing.mps"; "sharing" for NONE). */
const char *nvconfig_sharing_key(enum nvconfig_sharing s);
