/* SPDX-License-Identifier: Apache-2.0 */
/*
 * limits-dir — the directory of one limited container, made the same way by both writers of limits
 * files (the node agent's Allocate, `gpuslice run`):
 *
 *     <root>/<name>/          0755 (created when missing; an existing one is reused)
 *     <root>/<name>/limits    the limits file libgpuslice-cuda.so reads (interposer/limits.h), 0444,
 *                             replaced atomically and durably (util/atomic-file.h)
 *     <root>/<name>/shm/      0777: the shared region is created there by the container's first
 *                             process, whatever its user
 *     <root>/<name>/key       the agent only: which allocation the directory belongs to
 *     <root>/<name>/ld.so.preload  the agent only: the line the container's /etc/ld.so.preload holds
 *
 * Inside a limited container (the device plugin's Allocate answer and the DRA driver's CDI spec mount
 * the same files at the same places, from these names):
 *
 *     /run/gpuslice/limits           the limits file, read-only ($GPUSLICE_LIMITS names it)
 *     /run/gpuslice/shm/             the shared-region dir, read-write
 *     /run/gpuslice/lib/libcuda.so.1 the interposer, read-only, preloaded (LD_PRELOAD and
 *                                    /etc/ld.so.preload) and handed out for every later libcuda request
 *     /run/gpuslice/lib/libnvidia-ml.so.1     libgpuslice-nvml.so (the NVML stand-in), read-only, preloaded
 *                                    after the interposer (docs/interposer.md "NVML")
 *     /run/gpuslice/driver/libnvidia-ml.so.1  the host's real NVML the stand-in depends on, read-only
 *     /etc/ld.so.preload             the ld.so.preload file above, read-only
 *
 * The two NVML mounts come together or not at all: a stand-in whose real NVML is missing cannot load.
 *
 * No logging; functions return 0 (or an fd) or -errno, and name the failed step in ERR.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "util/error.h"

#define LIMITS_DIR_LIMITS_FILE "limits"
#define LIMITS_DIR_SHM_DIR "shm"
#define LIMITS_DIR_KEY_FILE "key"
#define LIMITS_DIR_PRELOAD_FILE "ld.so.preload"

#define LIMITS_DIR_CONTAINER_DIR "/run/gpuslice"
#define LIMITS_DIR_CONTAINER_LIMITS LIMITS_DIR_CONTAINER_DIR "/limits"
#define LIMITS_DIR_CONTAINER_SHM LIMITS_DIR_CONTAINER_DIR "/shm"
#define LIMITS_DIR_CONTAINER_REGION LIMITS_DIR_CONTAINER_SHM "/region"
#define LIMITS_DIR_CONTAINER_LIB LIMITS_DIR_CONTAINER_DIR "/lib/libcuda.so.1"
#define LIMITS_DIR_CONTAINER_PRELOAD "/etc/ld.so.preload"
#define LIMITS_DIR_CONTAINER_NVML LIMITS_DIR_CONTAINER_DIR "/lib/libnvidia-ml.so.1"
#define LIMITS_DIR_CONTAINER_REAL_NVML LIMITS_DIR_CONTAINER_DIR "/driver/libnvidia-ml.so.1"
#define LIMITS_DIR_NVML_NAME "libgpuslice-nvml.so" /* the stand-in's host file, next to the interposer */
#define LIMITS_DIR_PRELOAD_MAX 96

/* The libraries a limited container gets: the interposer, and the NVML stand-in with the real NVML when both
 * are known. mount[i].host borrows the callers' strings. preload: what LD_PRELOAD and the ld.so.preload file
 * hold, the interposer first ("/run/gpuslice/lib/libcuda.so.1 /run/gpuslice/lib/libnvidia-ml.so.1"). */
struct limits_dir_libs {
        struct {
                const char *host, *container;
        } mount[3];
        unsigned n_mounts;
        bool nvml; /* the stand-in is in */
        char preload[LIMITS_DIR_PRELOAD_MAX];
};

/* The one place the list is made (device plugin, CDI, DRA, gpuslice run). INTERPOSER: its host path;
 * STANDIN, REAL_NVML: the stand-in's and the real NVML's host paths, NULL or "" when unknown (then neither is
 * mounted nor preloaded). Pure. */
void limits_dir_libs(const char *interposer, const char *standin, const char *real_nvml, struct limits_dir_libs *ret);

/* The stand-in's path next to the interposer's: <dir of INTERPOSER>/libgpuslice-nvml.so. 0 or -ENAMETOOLONG. */
int limits_dir_standin_path(const char *interposer, char *buf, size_t len);

/* Create ROOT (when missing) and ROOT/NAME (NAME: one path component) with its shm/ directory.
 * FRESH: a directory of that name is someone else's leftover: remove it first. Returns an fd of
 * ROOT/NAME (O_DIRECTORY, O_CLOEXEC, not through a symlink) or -errno with ERR set. */
int limits_dir_create(const char *root, const char *name, bool fresh, struct gs_error *err);

/* Replace NAME (one path component) in the directory DFD (from limits_dir_create: written through
 * that fd, never by a path rebuilt from it) with LEN bytes of DATA, file mode MODE, atomically
 * (util/atomic-file.h); temporary files of NAME a crash left there are removed first. FLAGS:
 * ATOMIC_FILE_NO_SYNC for a file rebuilt from a durable record at start (the agent's). */
int limits_dir_write(int dfd, const char *name, const void *data, size_t len, mode_t mode, unsigned flags);

/* Write the limits file TEXT into the directory DFD: limits_dir_write of LIMITS_DIR_LIMITS_FILE,
 * mode 0444. */
int limits_dir_write_limits(int dfd, const char *text, size_t len, unsigned flags);

/* The agent's files of a directory from limits_dir_create, in this order: KEY (what the directory belongs
 * to, written first so a dir with limits can always be attributed), the limits file TEXT, and the
 * ld.so.preload line PRELOAD (limits_dir_libs; NULL: LIMITS_DIR_CONTAINER_LIB alone). Each is replaced by limits_dir_write; flags as
 * there (ATOMIC_FILE_NO_SYNC when a durable record rewrites them at start). 0 or -errno with ERR naming
 * the file. The device plugin's fractional containers (share-dirs.c) and the DRA driver's claims. */
int limits_dir_write_files(int dfd, const char *key, size_t key_len, const char *text, size_t len, const char *preload,
                           unsigned flags, struct gs_error *err);

/* Remove PARENT/NAME (NAME relative to the directory fd PARENT, or AT_FDCWD, or absolute) and what is in it (limits, key, shm/ and its region); a missing one is not an
 * error. Stays inside the tree: symlinks are removed, never followed. */
int limits_dir_remove_at(int parent, const char *name);
