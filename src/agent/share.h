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
 * The fractional service (struct share, share.c's) keeps the book (share-book.h), its journal
 * (share-journal.h) and the pairing's state; it works on the plugin core's record and options
 * (plugin.h) under the device table's lock. The files: share.c (handlers, pairing), share-id.c
 * (IDs), share-book.c, share-journal.c (codec), share-journal-file.c (the two files), share-dirs.c
 * (limits dirs), share-key.c (their key file), share-restart.c (pairing across an agent restart),
 * share-check.c (invariants), share-log.c (metrics, decision log, crash points).
 *
 * Must never: hand out fractions of a GPU held whole (or the reverse), let one container's core
 * and memory land on two GPUs, write outside the limits root, or trust an ID it did not parse back.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/assign.h"
#include "agent/devices.h"
#include "agent/plugin.h"
#include "deviceplugin.pb-c.h"
#include "util/limits-dir.h"

#define SHARE_CORE_IDS 100u                        /* core IDs per GPU: percent */
#define SHARE_MEM_IDS_MAX 1024u                    /* memory IDs per GPU at most (bounds ListAndWatch messages) */
#define SHARE_ID_MAX 64u                           /* device ID buffer, including the NUL */
#define SHARE_PAIR_WINDOW_MS 5000u                 /* a container's second resource must follow its first within this */
#define SHARE_PAIR_RESTART_MS 30000u               /* ... or within this after an agent restart (the journal kept it) */
#define SHARE_JOURNAL_FILE "gpuslice.fractions"    /* in the state dir: the fractional write-ahead journal */
#define SHARE_JOURNAL_LOG "gpuslice.fractions.log" /* ... and its append-only log since that snapshot */

/* Where things appear inside a fractional container, and the host side under the limits root
 * (<root>/<name>/{key,limits,ld.so.preload,shm/}): util/limits-dir.h, shared with the DRA driver. */
#define SHARE_CONTAINER_DIR LIMITS_DIR_CONTAINER_DIR
#define SHARE_LIMITS_PATH LIMITS_DIR_CONTAINER_LIMITS
#define SHARE_SHM_PATH LIMITS_DIR_CONTAINER_SHM
#define SHARE_REGION_PATH LIMITS_DIR_CONTAINER_REGION
#define SHARE_LIB_PATH LIMITS_DIR_CONTAINER_LIB
#define SHARE_LD_PRELOAD LIMITS_DIR_CONTAINER_PRELOAD
#define SHARE_KEY_FILE LIMITS_DIR_KEY_FILE
#define SHARE_LIMITS_FILE LIMITS_DIR_LIMITS_FILE
#define SHARE_SHM_DIR LIMITS_DIR_SHM_DIR
#define SHARE_PRELOAD_FILE LIMITS_DIR_PRELOAD_FILE

/* ---- device IDs (share-id.c; any thread: what a device is never changes) ---- */

/* "<uuid>::core-<n>" / "<uuid>::mem-<n>". 0, -EINVAL (kind), -ENAMETOOLONG. */
/* Thread: any; lock: none (fixed). */
int share_format_id(const char *uuid, enum plugin_kind kind, unsigned n, char *buf, size_t len);
/* Parse an ID back: kind, table index of its device, number. Only canonical IDs of devices of the
 * table and numbers parse (core-7, never core-07; mem-n only for n < the device's n_mem); a device
 * is a whole GPU or a MIG device, never a GPU in MIG mode. 0 or -EINVAL. */
/* Thread: any; lock: none (fixed). */
int share_parse_id(const struct devices *d, const char *id, enum plugin_kind *ret_kind, unsigned *ret_gpu,
                   unsigned *ret_n);
/* "core", "mem" ("" for the whole kind). */
/* Thread: any; lock: none (pure). */
const char *share_kind_word(enum plugin_kind kind);

/* ---- the fractional service ---- */

struct share;
struct share_service; /* a handler's userdata: the service and the resource it speaks for */

/* The fractional service on plugin p (borrowed: it outlives the service): an empty book, the
 * journal in the options' journal dir (not read yet: share_restore). 0 or -ENOMEM. */
/* Thread: the loop, at start; lock: none. */
int share_new(struct plugin *p, struct share **ret);
/* Thread: the loop, at teardown; lock: none. */
struct share *share_free(struct share *s); /* NULL-safe; returns NULL */
/* Ask kubelet's PodResources now and reconcile the record with it (the agent's; NULL: no
 * PodResources). Called without the lock by a handler about to pair a call with a record restored
 * from the journal, or to decide once more on a first half refused for room. 0 or -errno. */
/* Thread: the loop, at start; lock: none. */
void share_set_podres_sync(struct share *s, int (*fn)(void *userdata), void *userdata);

/* The userdata of kind's handlers (PLUGIN_CORE or PLUGIN_MEMORY). */
/* Thread: any; lock: none (fixed). */
struct share_service *share_service(struct share *s, enum plugin_kind kind);
/* Thread: a gRPC handler; lock: takes the device lock itself, never across a peer. */
enum rpc_code share_get_preferred(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                                  struct gs_error *st);
/* Thread: a gRPC handler; lock: takes the device lock itself, never across a peer. */
enum rpc_code share_allocate(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                             struct gs_error *st);
/* What the handlers run once they have asked the scheduler's watcher for this call's decision (ax,
 * assign_call_begin's; the caller ends it): the decision travels as this parameter. */
/* Thread: a gRPC handler; lock: takes the device lock (the decision made before it). */
enum rpc_code share_preferred_decided(struct share_service *svc, V1beta1__PreferredAllocationRequest *in,
                                      struct assign_ctx *ax, uint8_t **ret, size_t *ret_len, struct gs_error *st);
/* Thread: a gRPC handler; lock: takes the device lock (the decision made before it). */
enum rpc_code share_allocate_decided(struct share_service *svc, const V1beta1__AllocateRequest *in,
                                     struct assign_ctx *ax, uint8_t **ret, size_t *ret_len, struct gs_error *st);
/* Add kind's methods (its handlers and plugin_serve_common's) to a server. */
/* Thread: the loop (register.c); lock: none. */
int share_serve(struct share *s, enum plugin_kind kind, struct rpc_server *srv);

/* At start, after the state file: read the journal, put its records' IDs back in the record, keep a
 * half waiting for its partner open (SHARE_PAIR_RESTART_MS), rewrite every record's limits dir,
 * and check the invariants. Returns the number of records, -ENOENT (no journal), -EBADMSG
 * (rejected whole: nothing restored). Takes the lock itself. */
/* Thread: the loop, at start; lock: takes the device lock. */
int share_restore(struct share *s);
/* After a PodResources reconcile (caller holds the lock): the first one after a restore decides
 * what became of the container kubelet was admitting when the agent died — its first half listed
 * and its second not: the second half never reached kubelet, the record waits for it again; its
 * first half not listed: kubelet failed the container, nothing may join it. Returns 1 when it
 * changed a record. */
/* Thread: a sync's (loop, status, a handler's: podsync); lock: the device lock held. */
int share_after_sync(struct share *s);
/* Drop the records of containers whose IDs the record no longer holds, then remove the
 * per-container dirs that neither a record nor the record's key ID keeps (the allocation is gone).
 * Takes the lock itself, per dir. Returns how many dirs were removed, or -errno if the root cannot
 * be read (-ENOENT: none yet). */
/* Thread: a sync's (loop, status, a handler's: podsync); lock: takes the device lock per dir. */
int share_cleanup_dirs(struct share *s);
/* The invariants over every record (share-check.c); the number of violations. Caller holds the lock. */
/* Thread: any; lock: the device lock held. */
unsigned share_check_all(struct share *s);
