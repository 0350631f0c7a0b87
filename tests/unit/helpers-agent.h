/* SPDX-License-Identifier: Apache-2.0 */
/*
 * helpers-agent — the node agent's unit-test fixtures (beside helpers.h, which every unit test
 * links; these need the agent library): a device table and the plugin core over a reference topology
 * in a private directory, and a device-plugin handler (whole_allocate, share_allocate, …: any
 * rpc_unary_fn) called with a one-container request built from device IDs, its answer unpacked. Every helper fails the running
 * cmocka test on an error it cannot report otherwise.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "agent/devices.h"
#include "agent/plugin.h"
#include "agent/share.h"
#include "deviceplugin.pb-c.h"
#include "rpc/rpc.h"
#include "topo/topo.h"
#include "util/error.h"

struct test_plugin {
        struct devices *dev; /* the device table (test_plugin_init) */
        struct plugin *p;    /* the plugin core on it */
        struct share *s;     /* the fractional service on it (test_share_new; NULL otherwise) */
        struct topo t;
        char *tmp; /* the private directory ($TMPDIR/gpuslice-TAG-XXXXXX), removed by test_plugin_free */
};

/* tests/data/topologies/TOPO loaded and a private directory made; the plugin is not initialised
 * yet: fill the options (paths in f->tmp) and call test_plugin_init. Free with test_plugin_free. */
struct test_plugin *test_plugin_new(const char *topo, const char *tag);

/* The device table of f->t (O's memory unit) and the plugin core with options O on it. */
void test_plugin_init(struct test_plugin *f, const struct plugin_options *o);
/* Device ID of table device I. */
const char *test_device_id(const struct test_plugin *f, unsigned i);
/* Whether table device I is healthy (takes the lock). */
bool test_device_healthy(struct test_plugin *f, unsigned i);

/* The service, plugin and table freed, the private directory removed (the test fails if it cannot
 * be), free. */
void test_plugin_free(struct test_plugin *f);

/* Call H(USERDATA) with an AllocateRequest of one container asking for IDS[0..N). On RPC_OK *RET is
 * the unpacked answer (free with v1beta1__allocate_response__free_unpacked); otherwise the handler
 * must have answered nothing. Returns the handler's code, ST as it filled it. */
enum rpc_code test_rpc_allocate(rpc_unary_fn h, void *userdata, char **ids, size_t n, V1beta1__AllocateResponse **ret,
                                struct gs_error *st);

/* The same with K containers (1..TEST_RPC_CONTAINERS_MAX), container i asking for IDS[i][0..N[i]). */
#define TEST_RPC_CONTAINERS_MAX 4
enum rpc_code test_rpc_allocate_containers(rpc_unary_fn h, void *userdata, char **const *ids, const size_t *n, size_t k,
                                           V1beta1__AllocateResponse **ret, struct gs_error *st);

/* The same for a PreferredAllocationRequest of one container: AVAIL[0..NA), MUST[0..NM), SIZE. */
enum rpc_code test_rpc_preferred(rpc_unary_fn h, void *userdata, char **avail, size_t na, char **must, size_t nm,
                                 int size, V1beta1__PreferredAllocationResponse **ret, struct gs_error *st);
