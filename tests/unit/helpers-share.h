/* SPDX-License-Identifier: Apache-2.0 */
/*
 * helpers-share — fixtures of the tests of the agent's fractional GPUs (test-share.c), on top of
 * helpers-agent.h (the plugin in a private directory, the one-container RPC calls): the gpuslice
 * profile over the seed topology (8 x 24 GiB, 256 MiB units), its "restart" on the same
 * directories, share_allocate / share_get_preferred over runs of IDs, what an answer mounts and sets,
 * the limits file read back, and a fake PodResources reconciled into the state as podsync.c does.
 * Every helper fails the running cmocka test on an error it cannot report otherwise.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "agent/plugin.h"
#include "agent/share.h"
#include "deviceplugin.pb-c.h"
#include "helpers-agent.h"
#include "interposer/limits.h"
#include "util/error.h"

/* A new fixture: the plugin core and the fractional service (f->s) with the gpuslice profile, its
 * dev root, journal dir, limits root (tmp/containers) and interposer file in f->tmp, no journal
 * loaded. Free with test_plugin_free. */
struct test_plugin *test_share_new(void);

/* The agent restarts on the same directories: service, plugin and table freed and made anew,
 * share_restore, which must restore RECORDS records (-1: any). */
void test_share_restart(struct test_plugin *f, int records);

/* Device ID N of KIND on GPU (table index) into BUF (SHARE_ID_MAX bytes). */
void test_share_id(struct test_plugin *f, int gpu, enum plugin_kind kind, unsigned n, char *buf);

/* share_allocate of KIND with one container request per IDS[k][0..N[k]), K (2..4) of them (kubelet
 * sends one; test_rpc_allocate builds that). On RPC_OK *RET is the unpacked answer (free with
 * v1beta1__allocate_response__free_unpacked); otherwise nothing was answered. */
enum rpc_code test_share_allocate(struct test_plugin *f, enum plugin_kind kind, char **const *ids, const size_t *n,
                                  size_t k, V1beta1__AllocateResponse **ret, struct gs_error *st);

/* One container: COUNT consecutive IDs of KIND from FIRST on GPU. */
enum rpc_code test_share_allocate_run(struct test_plugin *f, enum plugin_kind kind, int gpu, unsigned first,
                                      unsigned count, V1beta1__AllocateResponse **ret, struct gs_error *st);

/* The same, which must succeed; the answer is freed. */
void test_share_allocate_ok(struct test_plugin *f, enum plugin_kind kind, int gpu, unsigned first, unsigned count);

/* share_get_preferred of KIND for SIZE IDs over every ID of KIND but those in EXCEPT[0..N_EXCEPT).
 * On RPC_OK the answer must be SIZE IDs on one GPU, returned in *RET_GPU (may be NULL). */
enum rpc_code test_share_prefer(struct test_plugin *f, enum plugin_kind kind, int size, char (*except)[SHARE_ID_MAX],
                                size_t n_except, int *ret_gpu, struct gs_error *st);

/* The host path of the mount at CONTAINER_PATH, the value of environment variable KEY (NULL: none). */
const char *test_share_mount(const V1beta1__ContainerAllocateResponse *c, const char *container_path);
const char *test_share_env(const V1beta1__ContainerAllocateResponse *c, const char *key);
/* The limits file of the answer's (only) container. */
const char *test_share_limits_path(const V1beta1__AllocateResponse *r);

/* The limits file at PATH, parsed (it must parse). */
void test_share_read_limits(const char *path, struct gs_limits *ret);

/* A fake kubelet's PodResources: the device IDs it lists (pod default/p, container c). */
struct test_podres {
        struct test_plugin *f;
        char ids[1024][SHARE_ID_MAX];
        size_t n;
        unsigned calls;
};

/* The agent's PodResources hook (share_set_podres_sync, USERDATA a struct test_podres): the fake's
 * list reconciled into the record as podsync.c does (120 s grace). 0 or -errno. */
int test_podres_sync(void *userdata);

/* A pair: CORE IDs from CORE0 and MEM IDs from MEM0 on GPU, both Allocates must succeed; with K, the
 * fake kubelet lists them. */
void test_share_pair_on(struct test_plugin *f, int gpu, unsigned core0, unsigned core, unsigned mem0, unsigned mem,
                        struct test_podres *k);
