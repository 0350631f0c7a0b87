/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state — the node agent's record of which container holds which device ID, and its on-disk file.
 *
 * One entry per (resource name, device ID): a container holding two GPUs has two entries. For
 * fractional resources each device ID stands for a share of one GPU, and the entry carries that
 * GPU's index and the memory bytes / core percent that one ID represents; a container's limits are
 * the sums over its entries.
 *
 * The file (DIR/gpuslice.state, docs/configuration.md) is written atomically: a crash at any instant
 * leaves the old file or the new one. It is checksummed and bounded, and a file that fails any
 * check is rejected as a whole (-EBADMSG) — never partially trusted.
 *
 * Pure library code: no logging, no global state. Not thread-safe: the caller serializes access to
 * one struct gpuslice_state.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STATE_FILE_NAME "gpuslice.state"
#define STATE_FORMAT_VERSION 1
#define STATE_MAX_ENTRIES 16384
#define STATE_FILE_MAX (16u << 20) /* bytes; larger files are rejected */

/* Buffer sizes, including the terminating NUL (so the longest string is one less). */
#define STATE_RESOURCE_MAX 320 /* domain (253) + '/' + name (63) */
#define STATE_DEVICE_ID_MAX 256
#define STATE_NAMESPACE_MAX 64 /* DNS label, 63 */
#define STATE_POD_NAME_MAX 254 /* DNS subdomain, 253 */
#define STATE_POD_UID_MAX 64
#define STATE_CONTAINER_MAX 64 /* DNS label, 63 */

struct state_alloc {
        char resource[STATE_RESOURCE_MAX];       /* "nvidia.com/gpu"; required */
        char device_id[STATE_DEVICE_ID_MAX];     /* as advertised to kubelet; required, no NUL/control chars */
        char pod_namespace[STATE_NAMESPACE_MAX]; /* "" when not known yet */
        char pod_name[STATE_POD_NAME_MAX];       /* "" when not known yet */
        char pod_uid[STATE_POD_UID_MAX];         /* "" when not known (PodResources does not report it) */
        char container[STATE_CONTAINER_MAX];     /* "" when not known yet */
        uint64_t alloc_time;                     /* Unix seconds when the agent recorded it */
        int32_t gpu_index;                       /* GPU the ID lives on; -1 = not recorded */
        uint64_t memory_bytes;                   /* fractional: memory this ID grants; 0 = none */
        uint32_t core_percent;                   /* fractional: percent of the GPU this ID grants, 0..100 */
        bool seen;                               /* PodResources has listed it at least once */
        /* In memory only (not in the file): kubelet called a plugin again after the Allocate that
         * recorded it. Kubelet records an Allocate answer before its next call (one goroutine admits
         * pods, resource by resource), so from then on an unlisted entry is not held. */
        bool settled;
};

/* Caller-owned; initialize with state_init() (or = {0}), release with state_done(). */
struct gpuslice_state {
        uint64_t generation;        /* bumped by every change made through the functions below */
        struct state_alloc *allocs; /* n_allocs valid entries, no (resource, device_id) twice */
        size_t n_allocs, cap;
};

/* One (resource, device ID) → pod/container pair as kubelet's PodResources List reports it.
 * Borrowed strings; NULL or "" = unknown. */
struct state_report {
        const char *resource;
        const char *device_id;
        const char *pod_namespace;
        const char *pod_name;
        const char *pod_uid;
        const char *container;
};

void state_init(struct gpuslice_state *s);
/* Frees the entries; s is empty (and reusable) afterwards. NULL is a no-op. */
void state_done(struct gpuslice_state *s);
/* Deep copy into *ret (which must not hold entries); -ENOMEM. */
int state_copy(const struct gpuslice_state *s, struct gpuslice_state *ret);

/* Check one entry: required fields set, strings terminated and free of control characters,
 * gpu_index >= -1, core_percent <= 100. 0 or -EINVAL. */
int state_alloc_validate(const struct state_alloc *a);

/* Add a copy of *a. -EINVAL (invalid entry), -EEXIST (same resource and device ID present),
 * -E2BIG (STATE_MAX_ENTRIES reached), -ENOMEM. Bumps generation on success. */
int state_add(struct gpuslice_state *s, const struct state_alloc *a);
/* Remove the entry of (resource, device_id); resource NULL = any resource. -ENOENT if absent.
 * Bumps generation on success. */
int state_remove(struct gpuslice_state *s, const char *resource, const char *device_id);
/* Remove every entry of one container (pod namespace + name + container). Returns the number
 * removed (bumps generation if > 0). */
size_t state_remove_container(struct gpuslice_state *s, const char *pod_namespace, const char *pod_name,
                              const char *container);
/* The entry of (resource, device_id), resource NULL = any resource; NULL if absent. The pointer is
 * valid until the next change to s. */
const struct state_alloc *state_find(const struct gpuslice_state *s, const char *resource, const char *device_id);

/*
 * Make s agree with what kubelet reports (reports[0..n)):
 *  - entries kubelet reports that we did not know are added (alloc_time = now, gpu_index -1, no
 *    fractional fields) — only for resources for which owned(resource, userdata) is true (owned
 *    NULL = every resource), so other plugins' devices are ignored;
 *  - known entries take kubelet's pod/container names where kubelet gives them;
 *  - reported entries are marked seen;
 *  - entries kubelet does not report are dropped at once when it has listed them before (the
 *    container is gone) or they are settled (kubelet made a call after recording them), and
 *    otherwise unless alloc_time >= keep_since (allocated so recently that kubelet may not list
 *    them yet, docs/sharing.md): pass now - grace, or UINT64_MAX to drop every unreported entry.
 * Reports with an empty resource or device ID, or strings too long for an entry, are skipped and
 * counted in *ret_skipped. On -ENOMEM / -E2BIG s is unchanged. Bumps generation once if anything
 * changed. ret_* may be NULL.
 */
int state_reconcile(struct gpuslice_state *s, const struct state_report *reports, size_t n,
                    bool (*owned)(const char *resource, void *userdata), void *userdata, uint64_t now,
                    uint64_t keep_since, size_t *ret_added, size_t *ret_removed, size_t *ret_updated,
                    size_t *ret_skipped);

/* Mark every entry settled (kubelet called again: it has recorded every Allocate answered so far).
 * Not a change of the file: generation is not bumped. Returns how many were newly marked. */
size_t state_mark_settled(struct gpuslice_state *s);

/* Serialize to the file format (header + JSON body). *ret is malloc'ed, caller frees. */
int state_encode(const struct gpuslice_state *s, char **ret, size_t *ret_len);
/* Parse the file format. -EBADMSG on any defect (magic, version, length, checksum, JSON, schema,
 * bounds, duplicates), -ENOMEM. *ret is written only on success (caller then owns it). */
int state_decode(const void *data, size_t len, struct gpuslice_state *ret);

/* Write DIR/gpuslice.state atomically: temp file (O_EXCL|O_CLOEXEC, 0600) in DIR, write, fsync,
 * rename over the state file, fsync DIR. On failure the previous file is untouched and the temp
 * file removed. Temp files of an earlier save that crashed are removed first: one writer per DIR.
 * -errno (if only the final fsync of DIR fails, the new file is in place but may not survive a
 * power loss). */
int state_save(const char *dir, const struct gpuslice_state *s);
/* The same atomic write for any file DIR/name (name: one path component) with permissions `mode`:
 * temp file ".name.tmp-*" (stale ones of this name removed first: one writer per name), full
 * write, fsync, rename, fsync DIR. 0 or -errno; on failure the previous file is untouched.
 * With STATE_WRITE_NO_SYNC in flags the two fsyncs are skipped: readers still see the old or the
 * new file whole, but a power loss may lose the change (for files rebuilt from a durable record). */
#define STATE_WRITE_NO_SYNC 1u
int state_write_atomic(const char *dir, const char *name, const void *data, size_t len, unsigned mode, unsigned flags);
/* Read DIR/gpuslice.state. -ENOENT when absent, -EBADMSG when corrupt (see state_decode), -EFBIG
 * when larger than STATE_FILE_MAX, other -errno when unreadable. *ret written only on success. */
int state_load(const char *dir, struct gpuslice_state *ret);

/* CRC-32C (Castagnoli) of buf, as used in the file header; crc = 0 to start. */
uint32_t state_crc32c(uint32_t crc, const void *buf, size_t len);
