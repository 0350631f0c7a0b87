/* SPDX-License-Identifier: Apache-2.0 */
/*
 * helpers — what the unit tests share: private temporary directories (created with mkdtemp,
 * removed with nftw, never with a shell), paths in them, whole-file reads and writes, the
 * reference topologies and files of the source tree, and running a step without root's file
 * permission override. Every helper fails the running cmocka test on an error it cannot report
 * otherwise; the extender tests' pod requests. (The node agent's fixtures, which need the agent library:
 * helpers-agent.h.)
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct topo;
struct cluster_request;

/* A new directory $TMPDIR/gpuslice-TAG-XXXXXX (TMPDIR unset: /tmp); free it with test_tmpdir_free. */
char *test_tmpdir_new(const char *tag);

/* Remove PATH and everything under it (symlinks removed, never followed), then free(PATH).
 * NULL is a no-op. Returns 0 or -errno of the first failure. */
int test_tmpdir_free(char *path);

/* Remove PATH and everything under it; a missing PATH is not an error. */
int test_rmtree(const char *path);

/* DIR/NAME in a static buffer (one of four rotating, so two calls can be arguments of one call). */
const char *test_path(const char *dir, const char *name);

/* Write LEN bytes of TEXT to PATH (created or truncated, MODE); fails the test on error. */
void test_write_file(const char *path, const char *text, size_t len, mode_t mode);

/* The whole file at PATH, NUL-terminated, malloc'd (caller frees); NULL when it cannot be read. */
char *test_read_file(const char *path);

/* Number of entries in directory PATH (without . and ..), -errno when it cannot be read. */
int test_count_entries(const char *path);

/* Create an empty file at PATH (mode 0644); fails the test on error. */
void test_touch(const char *path);

/* Parse the reference topology tests/data/topologies/NAME into RET; fails the test on error. */
void test_load_topo(const char *name, struct topo *ret);
/* A 3-GPU A100 node as NVML would describe it (driver 535.104.05, CUDA 12.2, cc 8.0): GPUs 0-1 NVLinked
 * (NV12 over PIX), 0-2 SYS, 1-2 NODE. */
void test_topo_a100x3(struct topo *ret);

/* The file RELPATH of the source tree (e.g. "tests/data/extender/x.json"), malloc'd and
 * NUL-terminated, its length in *LEN; fails the test when it cannot be read. */
char *test_read_source(const char *relpath, size_t *len);

/* Run F(ARG) in a child process without root's override of file permissions (a root test run
 * drops to uid/gid 65534 first). Returns what F returned, as -errno, or -ECHILD. */
int test_without_root(int (*f)(void *), void *arg);

/* One container "main" asking for k whole GPUs / a share of core % and mem MiB (the gpuslice profile). */
void test_whole_req(struct cluster_request *r, unsigned k);
void test_share_req(struct cluster_request *r, unsigned core, uint32_t mem);
