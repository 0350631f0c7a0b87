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

#define SHARE_CORE_IDS 100u        /* core IDs per GPU: percent */
#define SHARE_MEM_IDS_MAX 1024u    /* memory IDs per GPU at most (bounds ListAndWatch messages) */
#define SHARE_ID_MAX 64u           /* device ID buffer, including the NUL */
#define SHARE_PAIR_WINDOW_MS 5000u /* a container's second resource must follow its first within this */

/* Where things appear inside a fractional container. */
#define SHARE_CONTAINER_DIR "/run/gpuslice"
#define SHARE_LIMITS_PATH SHARE_CONTAINER_DIR "/limits"  /* the limits file, read-only */
#define SHARE_SHM_PATH SHARE_CONTAINER_DIR "/shm"        /* the shared-region dir, read-write */
#define SHARE_REGION_PATH SHARE_SHM_PATH "/region"
#define SHARE_LIB_PATH "/usr/local/lib/gpuslice/libgpuslice-cuda.so" /* the interposer, read-only */

/* Host side, under the limits root: <root>/<name>/{key,limits,shm/}. */
#define SHARE_KEY_FILE "key"
#define SHARE_LIMITS_FILE "limits"
#define SHARE_SHM_DIR "shm"

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
enum rpc_code share_get_preferred(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret,
                                  size_t *ret_len, struct rpc_status *st);
enum rpc_code share_allocate(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                             struct rpc_status *st);

/* After a PodResources reconcile: entries it added for our fractional resources get their GPU
 * index and the share one ID stands for. Returns how many were filled in. */
size_t share_fixup_state(struct plugin *p);

/* Remove the per-container dirs whose key device ID the state no longer holds (the allocation is
 * gone). Takes p->lock itself, per dir. Returns how many were removed, or -errno if the root cannot
 * be read (-ENOENT: none yet). */
int share_cleanup_dirs(struct plugin *p);

/* The seam for a GPU chosen by the cluster scheduler: restrict the next fractional placement and
 * allocation to GPU `uuid` (NULL: no restriction). Nothing calls it yet: a later scheduler extender
 * records its choice in a pod annotation, and the component that reads it for the pod kubelet is
 * admitting calls this before kubelet's GetPreferredAllocation. 0 or -ENOENT (unknown GPU). */
int share_set_explicit_gpu(struct plugin *p, const char *uuid);
