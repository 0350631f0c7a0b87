/* SPDX-License-Identifier: Apache-2.0 */
/*
 * atomic-file — the one way gpuslice replaces a file that another process trusts (the agent's
 * state, node labels, a container's limits file): write everything to a temporary file in the
 * same directory, fsync it, rename it over the target, fsync the directory. A crash at any instant
 * leaves the old content or the new one, never a torn file, and once the call returns the new
 * content survives a power loss. No logging; returns 0 or -errno.
 *
 * The temporary file is "." NAME ATOMIC_FILE_TEMP_INFIX <16 hex digits>, created with O_EXCL (never
 * through a symlink), so concurrent writers of one target never share a temporary file; it is
 * removed on every failure. A crash can leave one behind: a caller that owns its directory may
 * remove names starting with "." NAME ATOMIC_FILE_TEMP_INFIX at start.
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#define ATOMIC_FILE_TEMP_INFIX ".tmp-"

/* flags: skip both fsyncs. Readers still see the old or the new content, never a torn file, but a
 * power loss may lose the new content (for files rebuilt from a durable record at start). */
#define ATOMIC_FILE_NO_SYNC 1u

/* Replace NAME (one path component) in the directory open as DFD with LEN bytes of DATA, file mode
 * MODE (applied with fchmod, so the umask does not narrow it). */
int atomic_file_write_at(int dfd, const char *name, const void *data, size_t len, mode_t mode, unsigned flags);

/* The same for a path: its directory is opened (O_DIRECTORY) and fsynced. */
int atomic_file_write(const char *path, const void *data, size_t len, mode_t mode, unsigned flags);

/* Remove the temporary files of NAME a crash left in the directory DFD (for a caller that owns the
 * directory: one writer, so none is in use now). Best effort. */
void atomic_file_remove_temps(int dfd, const char *name);
