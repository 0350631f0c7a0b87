/* SPDX-License-Identifier: Apache-2.0 */
/*
 * migctl — declared MIG layouts: the layout file (NVIDIA mig-parted's config format: named layouts, each
 * a list of entries with a device selector, mig-enabled and mig-devices {profile: count}), and applying a
 * layout to a GPU through NVML the way a crash cannot break:
 *
 *   - the wanted profiles are placed by the pure planner (src/mig) against what the GPU reports; what it
 *     cannot hold is refused with the reason before anything changes;
 *   - a GPU with any process on it (any MIG device, or the GPU) is refused (-EBUSY), nothing changed;
 *   - before the first change a journal is written with the one atomic writer (util/atomic-file.h):
 *     <state-dir>/mig/<GPU UUID>.json, holding the layout as it was and the one wanted; it is removed after
 *     the last change. A change that fails half way is rolled back at once to the layout as it was;
 *   - a process killed in the middle leaves its journal: migctl_recover completes the change from whatever
 *     state the GPU is in (the planner works from what exists), or, when that fails, rolls it back.
 *
 * A MIG mode change that waits for a GPU reset (NVML's activation status RESET_REQUIRED or IN_USE) ends
 * the call with MIGCTL_PENDING_RESET and the journal kept: the next call after the reset completes it.
 *
 * Must never change a GPU that is in use, change anything before a layout is known to fit (except turning
 * MIG on, which the profiles can only be read after — and which a refusal turns back off), or log.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "mig/mig.h"
#include "nvml/nvml.h"
#include "topo/topo.h"
#include "util/error.h"

/* ---- layout files ---- */

#define MIGCTL_CONFIG_MAX (1u << 20)
#define MIGCTL_NAME_MAX 64
#define MIGCTL_MAX_ENTRIES 16
#define MIGCTL_MAX_FILTERS 8

struct migctl_entry {
        bool all;                            /* devices: all */
        uint64_t devices;                    /* devices: [0, 1, …]: bit i = GPU index i */
        unsigned n_filters;                  /* device-filter: PCI ids, any of them matches */
        uint32_t filter[MIGCTL_MAX_FILTERS]; /* "0x20B010DE": device id << 16 | vendor id */
        struct mig_want want;                /* mig-enabled, mig-devices */
};

struct migctl_layout {
        char name[MIGCTL_NAME_MAX];
        unsigned n;
        struct migctl_entry entry[MIGCTL_MAX_ENTRIES];
};

struct migctl_config {
        unsigned n;
        struct migctl_layout *layout; /* malloc'ed */
};

/*
 * Parse a layout file: YAML (or JSON), `version: v1` and `mig-configs: {NAME: [entry, …]}`; each entry
 * has `devices` (all or a list of GPU indices), optional `device-filter` (a PCI id string or a list),
 * `mig-enabled` (true/false) and, with MIG on, optional `mig-devices` ({profile: count}; profile names as
 * nvidia-smi writes them, "1g.10gb", "1g.10gb+me"; compute-instance subdivisions are not supported).
 * Unknown keys, a malformed value, a count of 0 or over 7, MIG devices with mig-enabled false are
 * errors with the layout and field named. 0, or -EINVAL / -EFBIG with err. Free with migctl_config_done.
 */
int migctl_config_parse(const char *text, size_t len, const char *path, struct migctl_config *ret,
                        struct gs_error *err);
/* migctl_config_parse of a file (read whole, at most MIGCTL_CONFIG_MAX). */
int migctl_config_load(const char *path, struct migctl_config *ret, struct gs_error *err);
void migctl_config_done(struct migctl_config *c);
const struct migctl_layout *migctl_config_find(const struct migctl_config *c, const char *name);

/* The entry of layout l for GPU `index` with PCI id pci_id: 0 with *ret (NULL: no entry selects the
 * GPU, the layout leaves it as it is), or -EINVAL when two entries select it. */
int migctl_layout_select(const struct migctl_layout *l, unsigned index, uint32_t pci_id,
                         const struct migctl_entry **ret, struct gs_error *err);

/* ---- applying ---- */

enum migctl_outcome {
        MIGCTL_UNCHANGED = 0, /* the GPU already held the layout */
        MIGCTL_DONE,          /* changed: it holds the layout now */
        MIGCTL_PENDING_RESET, /* the MIG mode change waits for a GPU reset; the journal completes it after */
        MIGCTL_ROLLED_BACK,   /* (recovery) an interrupted change could not be completed and was undone */
        MIGCTL_RECOVERED,     /* (recovery) an interrupted change was completed */
};

const char *migctl_outcome_name(enum migctl_outcome o);

struct migctl_result {
        enum migctl_outcome outcome;
        unsigned steps;       /* changes made */
        struct mig_plan plan; /* the changes planned (for a person) */
        struct mig_caps caps; /* the GPU's profiles, when they were read (names for the plan) */
        bool have_caps;
};

/*
 * Plan only: what migctl_apply_gpu would do to GPU `index` for want (caps and the plan in *ret). With MIG
 * off and want enabled the plan is "set MIG mode on" (the profiles can only be read with MIG on).
 * -EINVAL / -ENOSPC: the GPU cannot hold want (err says why). Nothing is changed.
 */
int migctl_plan_gpu(struct nvml *n, unsigned index, const char *layout, const struct mig_want *want,
                    struct migctl_result *ret, struct gs_error *err);

/*
 * Make GPU `index` hold want (layout: a name for the journal and messages). An interrupted change of this
 * GPU (its journal) is recovered first. 0 with *ret, or: -EINVAL/-ENOSPC the GPU cannot hold want (nothing
 * changed); -EBUSY processes on the GPU (nothing changed); -EIO a change failed and was rolled back (err
 * says which); another -errno when even the rollback failed (the journal stays for migctl_recover).
 */
int migctl_apply_gpu(struct nvml *n, unsigned index, const char *layout, const struct mig_want *want,
                     const char *state_dir, struct migctl_result *ret, struct gs_error *err);

/*
 * Recover GPU `index`'s interrupted change, if its journal says there is one: complete it, or roll it
 * back when completing fails. 0 with *ret (MIGCTL_UNCHANGED: no journal), or the errors of
 * migctl_apply_gpu (the journal then stays).
 */
int migctl_recover_gpu(struct nvml *n, unsigned index, const char *state_dir, struct migctl_result *ret,
                       struct gs_error *err);

/* ---- one instance at a placement (the DRA driver's dynamic MIG devices, docs/dra.md "Dynamic MIG") ---- */

/*
 * Make a GPU instance of profile_id (info.id) at placement `at` of GPU `index`, with one compute instance
 * covering it, under the applier's lock of state_dir (no journal: the caller journals what it makes). A compute
 * instance that cannot be made takes its GPU instance down again. 0 with the ids, or -errno with err: -ENODEV
 * MIG off, -EINVAL no such profile, NVML's refusal (-ENOSPC: the placement is taken), nothing left made.
 */
int migctl_instance_create(struct nvml *n, unsigned index, unsigned profile_id, struct mig_placement at,
                           const char *state_dir, unsigned *ret_gi, unsigned *ret_ci, struct gs_error *err);
/* Destroy the GPU instance of profile_id at exactly `at` (its compute instances first): 0, also when there is
 * none (or MIG is off); -EBUSY with a process on the GPU (nothing destroyed); another -errno with err. */
int migctl_instance_destroy(struct nvml *n, unsigned index, unsigned profile_id, struct mig_placement at,
                            const char *state_dir, struct gs_error *err);

/* The journal of GPU uuid: 0 with its layout name and whether it waits for a reset; -ENOENT none. */
int migctl_journal_peek(const char *state_dir, const char *uuid, char *ret_layout, size_t len, bool *ret_pending,
                        struct gs_error *err);

/* ---- the journal's format (a codec of its own, for tests and fuzzing) ---- */

struct migctl_journal {
        char gpu[96];                 /* the GPU's UUID */
        char layout[MIGCTL_NAME_MAX]; /* the layout being applied */
        bool pending_reset;           /* a mode change waits for a reset */
        struct mig_target before;     /* the exact layout before the change (a rollback restores it) */
        struct mig_want want;         /* the layout wanted */
};

/* JSON text of a journal; *ret malloc'ed. 0 or -ENOMEM. */
int migctl_journal_format(const struct migctl_journal *j, char **ret);
/* 0, or -EINVAL with err (malformed, another version). */
int migctl_journal_parse(const char *text, size_t len, struct migctl_journal *ret, struct gs_error *err);

/* ---- the agent's layout request (<state-dir>/mig-layout, docs/mig.md "Layouts from the node label") ---- */

/* The layout name the node label asked last, its state as published (pending, success, failed), why it failed,
 * and whether it failed only because a GPU was in use (then it is tried again once the GPUs are idle by the
 * agent's record; any other failure waits for the label to change). */
struct migctl_request {
        char name[MIGCTL_NAME_MAX];
        char state[16];
        char reason[512];
        bool busy; /* failed: a GPU was in use */
};

/* The file's text: "name\nstate\nreason\n", then "busy\n" when busy. Control characters of the reason are
 * written as spaces. The text's length (at most len - 1, NUL-terminated), or -ENOBUFS, -EINVAL (no name, a
 * name with a newline, an unknown state, busy but not failed). */
int migctl_request_format(const struct migctl_request *r, char *buf, size_t len);
/* 0, or -EINVAL with err (not four or three lines, an empty or too long field, an unknown state, a NUL or
 * control byte, busy with a state other than failed). */
int migctl_request_parse(const char *text, size_t len, struct migctl_request *ret, struct gs_error *err);
