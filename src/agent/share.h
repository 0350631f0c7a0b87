/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share — fractional GPUs in the node agent (docs/sharing.md): the core and memory resources
 * advertised per GPU as device IDs that name their GPU, placement on one GPU without any cluster
 * component (GetPreferredAllocation), the pairing of one container's core and memory allocations,
 * and the per-container limits directory (limits file for libgpuslice-cuda.so, shared-region dir)
 * whose mounts and environment the Allocate answer carries.
 *
 * Device IDs (at most 63 characters; a GPU UUID is 40):
 *   core    <uuid>::core-<n>   n = 0..99, each 1 % of the GPU's compute
 *   memory  <uuid>::mem-<n>    n = 0..N-1, each one memory unit; N = min(total / unit, SHARE_MEM_IDS_MAX)
 *
 * Must never: hand out fractions of a GPU held whole (or the reverse), let one container's core
 * and memory land on two GPUs, write outside the limits root, or trust an ID it did not parse back.
 * Every function expects the caller to hold p->lock unless it says otherwise.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/plugin.h"
#include "util/limits-dir.h"

#define SHARE_CORE_IDS 100u                        /* core IDs per GPU: percent */
#define SHARE_MEM_IDS_MAX 1024u                    /* memory IDs per GPU at most (bounds ListAndWatch messages) */
#define SHARE_ID_MAX 64u                           /* device ID buffer, including the NUL */
#define SHARE_PAIR_WINDOW_MS 5000u                 /* a container's second resource must follow its first within this */
#define SHARE_PAIR_RESTART_MS 30000u               /* ... or within this after an agent restart (the journal kept it) */
#define SHARE_JOURNAL_FILE "gpuslice.fractions"    /* in the state dir: the fractional write-ahead journal */
#define SHARE_JOURNAL_LOG "gpuslice.fractions.log" /* ... and its append-only log since that snapshot */

/* Where things appear inside a fractional container. */
#define SHARE_CONTAINER_DIR "/run/gpuslice"
#define SHARE_LIMITS_PATH SHARE_CONTAINER_DIR "/limits" /* the limits file, read-only */
#define SHARE_SHM_PATH SHARE_CONTAINER_DIR "/shm"       /* the shared-region dir, read-write */
#define SHARE_REGION_PATH SHARE_SHM_PATH "/region"
/* The interposer, read-only, under the driver's name: preloaded by /etc/ld.so.preload (and LD_PRELOAD), it is
 * the libcuda.so.1 handed out for every later request of the loader (docs/interposer.md). */
#define SHARE_LIB_DIR SHARE_CONTAINER_DIR "/lib"
#define SHARE_LIB_PATH SHARE_LIB_DIR "/libcuda.so.1"
#define SHARE_LD_PRELOAD "/etc/ld.so.preload" /* names SHARE_LIB_PATH; read by the loader whatever the env */

/* Host side, under the limits root: <root>/<name>/{key,limits,ld.so.preload,shm/}. */
#define SHARE_KEY_FILE LIMITS_DIR_KEY_FILE
#define SHARE_LIMITS_FILE LIMITS_DIR_LIMITS_FILE
#define SHARE_SHM_DIR LIMITS_DIR_SHM_DIR
#define SHARE_PRELOAD_FILE "ld.so.preload"

/* Fractional use per GPU according to the state (table indices). */
struct share_usage {
        uint16_t core[TOPO_MAX_GPUS]; /* core IDs held */
        uint16_t mem[TOPO_MAX_GPUS];  /* memory IDs held */
        uint64_t whole;               /* GPUs held whole (the whole-GPU resource) */
        uint64_t frac;                /* GPUs with any core or memory ID held */
};
void share_usage(const struct plugin *p, struct share_usage *ret);

/* "<uuid>::core-<n>" / "<uuid>::mem-<n>". 0, -EINVAL (kind), -ENAMETOOLONG. */
int share_format_id(const char *uuid, enum plugin_kind kind, unsigned n, char *buf, size_t len);
/* Parse an ID back: kind, table index of its GPU, number. Only canonical IDs of advertised GPUs
 * and numbers parse (core-7, never core-07; mem-n only for n < the GPU's n_mem). 0 or -EINVAL. */
int share_parse_id(const struct plugin *p, const char *id, enum plugin_kind *ret_kind, unsigned *ret_gpu,
                   unsigned *ret_n);

/* Handlers of the core and memory services (userdata: struct plugin_service). */
enum rpc_code share_get_preferred(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                                  struct gs_error *st);
enum rpc_code share_allocate(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                             struct gs_error *st);

/* After a PodResources reconcile: entries it added for our fractional resources get their GPU
 * index and the share one ID stands for. Returns how many were filled in. */
size_t share_fixup_state(struct plugin *p);

/* Drop the records of containers whose IDs the state no longer holds, then remove the
 * per-container dirs that neither a record nor the state's key ID keeps (the allocation is gone).
 * Takes p->lock itself, per dir. Returns how many dirs were removed, or -errno if the root cannot
 * be read (-ENOENT: none yet). */
int share_cleanup_dirs(struct plugin *p);

/* At start, after the state file: read the journal (opt.journal_dir/gpuslice.fractions), put its
 * records' IDs back in the state, keep a half waiting for its partner open
 * (SHARE_PAIR_RESTART_MS), rewrite every record's limits dir, and check the invariants. Returns the
 * number of records, -ENOENT (no journal), -EBADMSG (rejected whole: nothing restored). Takes
 * p->lock itself. */
int share_restore(struct plugin *p);
/* Parse a journal into the plugin's book (exposed for the fuzz target and tests). 0 or -EBADMSG
 * (nothing kept), -ENOMEM. */
int share_journal_decode(struct plugin *p, const char *text, size_t len);
/* Replay a journal log (gpuslice.fractions.log) on the book share_journal_decode filled: complete
 * lines in order, entries at or below the snapshot's skipped, a last line without its newline
 * ignored (a write the crash cut short). The number of entries applied, or -EBADMSG (the book
 * emptied: the journal is rejected whole), -ENOMEM. */
int share_journal_replay(struct plugin *p, const char *text, size_t len);
/* The number of fractional records in the book (tests and the fuzz target). */
size_t share_record_count(struct plugin *p);
/* After a PodResources reconcile (caller holds the lock): the first one after a restore decides
 * what became of the container kubelet was admitting when the agent died — its first half listed
 * and its second not: the second half never reached kubelet, the record waits for it again; its
 * first half not listed: kubelet failed the container, nothing may join it. Returns 1 when it
 * changed a record. */
int share_after_sync(struct plugin *p);
/* The invariants over every record (see share-internal.h); returns the number of violations.
 * Caller holds the lock. */
unsigned share_check_all(struct plugin *p);

/* A whole-GPU Allocate happened: another container, so the open fractional record is closed. */
void share_note_whole(struct plugin *p);
void share_book_free(struct share_book *b);

/* The seam for a GPU chosen by the cluster scheduler: restrict the next fractional placement and
 * allocation to GPU `uuid` (NULL: no restriction). Nothing calls it yet: a later scheduler extender
 * records its choice in a pod annotation, and the component that reads it for the pod kubelet is
 * admitting calls this before kubelet's GetPreferredAllocation. 0 or -ENOENT (unknown GPU). */
int share_set_explicit_gpu(struct plugin *p, const char *uuid);
