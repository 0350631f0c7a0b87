/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dra/journal — the DRA driver's durable record of prepared claims: one file per claim,
 * <journal dir>/<claim uid>.json, written whole with the one atomic writer (util/atomic-file.h:
 * temporary file, fsync, rename, fsync of the directory) BEFORE the step it announces, and removed
 * (unlink + fsync of the directory) only after the claim's last file is gone. A record says which
 * devices the claim holds (for the exclusivity checks), what was consumed of a shared one (for its
 * limits file), and which files prepare made (its CDI spec, its limits dir), so that after a SIGKILL at
 * any instant start-up can finish or undo what was under way (docs/dra.md, "Crash safety"):
 *
 *   preparing    written before any file of the claim (and before a dynamic MIG device's instance is made,
 *                again after): rolled back at start (files, instances and record removed; kubelet, which
 *                never got an answer, prepares again)
 *   prepared     written after the last file: the claim is held; its files are rewritten at start
 *   unpreparing  written before removing the files: finished at start
 *
 * The codec is pure and fuzzed (tests/fuzz/fuzz-dra-record.c); a record that fails any check is not
 * trusted. The file functions do local file I/O only and never log.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dra/claim.h"
#include "util/error.h"

#define DRA_RECORD_VERSION 1
#define DRA_RECORD_MAX (64u << 10)
#define DRA_RECORD_SUFFIX ".json"
#define DRA_PATH_MAX 1024

enum dra_record_state {
        DRA_REC_PREPARING = 1,
        DRA_REC_PREPARED,
        DRA_REC_UNPREPARING,
};

struct dra_record_device {
        char request[128];
        char device[DRA_MAX_LABEL + 1]; /* "gpu-3", "gpu-3-shared", "gpu-3-mig-7-0" (the pool is the node's) */
        char share_id[DRA_UID_MAX];
        char uuid[96];  /* the GPU's UUID when prepared (a MIG device: its MIG UUID) */
        unsigned index; /* its GPU's NVML index */
        bool shared;
        enum dra_device_kind kind; /* from the device's name (not encoded) */
        uint64_t memory;           /* shared: bytes consumed */
        unsigned cores;            /* shared: percent consumed */
        uint64_t mps_pinned;       /* sharing MPS: the pinned device memory limit of its clients (0: none) */
        /* a dynamic MIG device (gpu-<i>-mig-<label>-<start>): whether its instance was made, and its ids (the
         * record is written again after the instance is made; recovery finds an unrecorded one by placement) */
        bool made;
        unsigned gi, ci;
};

struct dra_record {
        char uid[DRA_UID_MAX];
        char namespace_[DRA_MAX_LABEL + 1];
        char name[DRA_MAX_POOL_NAME + 1];
        enum dra_record_state state;
        bool elastic; /* the limits file's core-policy */
        /* the claim's sharing config (claim.h): TimeSlicing, or MPS with its control daemon in
         * <state>/dra-mps/<uid> (thread percentage 0: the daemon's default) */
        enum dra_sharing sharing;
        enum dra_interval interval;
        unsigned mps_threads;
        unsigned n;
        struct dra_record_device dev[DRA_RESULTS_MAX];
        char spec[DRA_PATH_MAX];      /* the CDI spec file ("" none) */
        char limits[DRA_UID_MAX + 8]; /* the limits dir's name under the limits root ("" none) */
};

/* Thread: any; lock: none (pure). */
const char *dra_record_state_name(enum dra_record_state s);

/* Encode as compact JSON (*ret malloc'd, NUL-terminated). 0, -EINVAL (a field out of range), -ENOMEM. */
/* Thread: any; lock: none (pure). */
int dra_record_encode(const struct dra_record *r, char **ret);
/* Decode and check every field (version, UID, names, device names, ranges). 0 or -EINVAL with err. */
/* Thread: any; lock: none (pure). */
int dra_record_decode(const char *text, size_t len, struct dra_record *ret, struct gs_error *err);

/* Write the record durably as <dir>/<uid>.json (dfd: the journal dir). 0 or -errno. */
/* Thread: the driver's (servers', start-up); lock: d->lock held (the engine does journal I/O under it). */
int dra_record_write(int dfd, const struct dra_record *r);
/* Remove <dir>/<uid>.json and make the removal durable; a missing file is not an error. */
/* Thread: the driver's (servers', start-up); lock: d->lock held (the engine does journal I/O under it). */
int dra_record_remove(int dfd, const char *uid);
/* Call fn for each record file of the journal (the name and its decoded record, or NULL and the
 * decode error for one that is not trusted); temporaries of the atomic writer are removed first.
 * 0 or -errno from reading the directory. */
/* Thread: start-up (dra_engine_open); lock: none yet (no thread serves). */
int dra_journal_scan(int dfd,
                     void (*fn)(const char *file, const struct dra_record *r, const struct gs_error *e, void *userdata),
                     void *userdata);
