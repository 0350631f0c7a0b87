/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for time-slicing in the node agent (src/agent/timeslice.h, replica-id.c, timeslice.c, the plugin's
 * replicas): NVIDIA's replica IDs and their canonical form, the listing beside whole GPUs and fractions (a GPU is in
 * one mode), Allocate's answer and record, failRequestsGreaterThanOne, the spreading preferred allocation, and the
 * GFD labels (labels_format_sharing). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "helpers-agent.h"
#include "helpers.h"

#include <string.h>

#include "agent/timeslice.h"
#include "labels/labels.h"
#include "util/util.h"

#define MIB (UINT64_C(1) << 20)

/* The seed node (8 P40s), the gpuslice profile's fractions, GPUs 0 and 1 time-sliced 4 ways under `resource`. */
static struct test_plugin *node(const char *resource, bool fail_gt_one) {
        struct test_plugin *f = test_plugin_new("seed000-8gpu-pcie-2socket.topo", "timeslice");
        struct plugin_options o = { .resource = "nvidia.com/gpu",
                                    .core_resource = "gpuslice.io/gpu-core",
                                    .memory_resource = "gpuslice.io/gpu-memory",
                                    .memory_unit = 256 * MIB,
                                    .list_envvar = true };
        snprintf(o.dev_root, sizeof o.dev_root, "%s", f->tmp);
        snprintf(o.limits_root, sizeof o.limits_root, "%s/containers", f->tmp);
        test_plugin_init(f, &o);
        assert_int_equal(plugin_set_replicas(f->p, resource, 4, fail_gt_one, 0x3), 0);
        return f;
}

static char *rid(const struct test_plugin *f, unsigned g, unsigned j) {
        static char buf[4][TIMESLICE_ID_MAX];
        static unsigned k;
        char *b = buf[k++ % 4];
        timeslice_format_id(test_device_id(f, g), j, b, TIMESLICE_ID_MAX);
        return b;
}

static void test_ids(void **state) {
        (void)state;
        struct test_plugin *f = node("nvidia.com/gpu", false);
        unsigned g, j;
        char id[TIMESLICE_ID_MAX];
        snprintf(id, sizeof id, "%s::3", test_device_id(f, 1));
        assert_int_equal(timeslice_parse_id(f->dev, id, 4, &g, &j), 0);
        assert_int_equal(g, 1);
        assert_int_equal(j, 3);
        static const char *const bad[] = { "::4", "::03", "::-1", "::+1", "::", "::1x", ":1", "" };
        for (size_t k = 0; k < ELEMENTSOF(bad); k++) {
                snprintf(id, sizeof id, "%s%s", test_device_id(f, 1), bad[k]);
                assert_int_equal(timeslice_parse_id(f->dev, id, 4, &g, &j), -EINVAL);
        }
        assert_int_equal(timeslice_parse_id(f->dev, "GPU-00000000-0000-0000-0000-000000000000::0", 4, &g, &j), -EINVAL);
        assert_int_equal(plugin_set_replicas(f->p, "nvidia.com/gpu", 0, false, 1), -EINVAL);
        assert_int_equal(plugin_set_replicas(f->p, "nvidia.com/gpu", TIMESLICE_REPLICAS_MAX + 1, false, 1), -EINVAL);
        test_plugin_free(f);
}

/* One GPU, one mode: a time-sliced GPU has no whole ID and no fractions; the others have both. */
static void test_one_mode_per_gpu(void **state) {
        (void)state;
        struct test_plugin *f = node("nvidia.com/gpu.shared", false);
        assert_string_equal(plugin_resource(f->p, PLUGIN_REPLICA), "nvidia.com/gpu.shared");
        for (unsigned i = 0; i < 8; i++) {
                bool rep = i < 2;
                assert_int_equal(plugin_serves(f->p, plugin_service(f->p, PLUGIN_REPLICA), i), rep);
                assert_int_equal(plugin_serves(f->p, plugin_service(f->p, PLUGIN_WHOLE), i), !rep);
                assert_int_equal(plugin_serves(f->p, plugin_service(f->p, PLUGIN_CORE), i), !rep);
                assert_int_equal(plugin_serves(f->p, plugin_service(f->p, PLUGIN_MEMORY), i), !rep);
        }
        uint8_t *buf;
        size_t len;
        assert_int_equal(plugin_pack_devices_kind(f->p, PLUGIN_REPLICA, &buf, &len, NULL), 0);
        V1beta1__ListAndWatchResponse *l = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
        assert_non_null(l);
        assert_int_equal(l->n_devices, 8);
        assert_string_equal(l->devices[0]->id, rid(f, 0, 0));
        assert_string_equal(l->devices[7]->id, rid(f, 1, 3));
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        free(buf);
        assert_int_equal(plugin_pack_devices_kind(f->p, PLUGIN_WHOLE, &buf, &len, NULL), 0);
        l = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
        assert_int_equal(l->n_devices, 6);
        assert_string_equal(l->devices[0]->id, test_device_id(f, 2));
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        free(buf);
        /* a fraction of a time-sliced GPU is refused (its IDs are not served) */
        test_plugin_free(f);
}

/* Not renamed: nvidia.com/gpu lists the replicas of GPUs 0-1 and the UUIDs of the rest, and hands out both. */
static void test_allocate_unrenamed(void **state) {
        (void)state;
        struct test_plugin *f = node("nvidia.com/gpu", false);
        assert_string_equal(plugin_resource(f->p, PLUGIN_REPLICA), "");
        uint8_t *buf;
        size_t len;
        assert_int_equal(plugin_pack_devices_kind(f->p, PLUGIN_WHOLE, &buf, &len, NULL), 0);
        V1beta1__ListAndWatchResponse *l = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
        assert_int_equal(l->n_devices, 4 + 4 + 6);
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        free(buf);

        void *svc = plugin_service(f->p, PLUGIN_WHOLE);
        V1beta1__AllocateResponse *r;
        struct gs_error st = { 0 };
        char *two[] = { rid(f, 0, 1), rid(f, 0, 2) }; /* two replicas of one GPU: allowed without fail_gt_one */
        assert_int_equal(test_rpc_allocate(timeslice_allocate, svc, two, 2, &r, &st), RPC_OK);
        assert_int_equal(r->n_container_responses, 1);
        const V1beta1__ContainerAllocateResponse *c = r->container_responses[0];
        assert_int_equal(c->n_envs, 1);
        assert_string_equal(c->envs[0]->key, "NVIDIA_VISIBLE_DEVICES");
        assert_string_equal(c->envs[0]->value, test_device_id(f, 0)); /* the GPU once: NVIDIA's answer */
        v1beta1__allocate_response__free_unpacked(r, NULL);
        char *plain[] = { (char *)test_device_id(f, 5) };
        assert_int_equal(test_rpc_allocate(timeslice_allocate, svc, plain, 1, &r, &st), RPC_OK);
        v1beta1__allocate_response__free_unpacked(r, NULL);

        devices_lock(f->dev);
        struct plugin_usage u;
        plugin_usage(f->p, &u);
        assert_int_equal(u.rep[0], 2);
        assert_true(u.replica & 1);
        assert_true(u.plain & (1u << 5));
        assert_non_null(state_find(plugin_record(f->p), "nvidia.com/gpu", rid(f, 0, 2)));
        devices_unlock(f->dev);

        /* a replica ID twice, a replica of a GPU not time-sliced, an unknown one */
        char *dup[] = { rid(f, 1, 0), rid(f, 1, 0) };
        assert_int_equal(test_rpc_allocate(timeslice_allocate, svc, dup, 2, &r, &st), RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "twice"));
        char *other[] = { rid(f, 4, 0) };
        assert_int_equal(test_rpc_allocate(timeslice_allocate, svc, other, 1, &r, &st), RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "unknown device ID"));
        char *whole0[] = { (char *)test_device_id(f, 0) }; /* a time-sliced GPU's own ID */
        assert_int_equal(test_rpc_allocate(timeslice_allocate, svc, whole0, 1, &r, &st), RPC_INVALID_ARGUMENT);
        test_plugin_free(f);
}

static void test_fail_requests_greater_than_one(void **state) {
        (void)state;
        struct test_plugin *f = node("nvidia.com/gpu.shared", true);
        void *svc = plugin_service(f->p, PLUGIN_REPLICA);
        V1beta1__AllocateResponse *r;
        struct gs_error st = { 0 };
        char *two[] = { rid(f, 0, 0), rid(f, 1, 0) };
        assert_int_equal(test_rpc_allocate(timeslice_allocate, svc, two, 2, &r, &st), RPC_INVALID_ARGUMENT);
        assert_string_equal(st.message, "request for 'nvidia.com/gpu.shared: 2' too large: maximum request size for "
                                        "shared resources is 1");
        /* two containers of one pod: a replica each, of the same GPU */
        char *a[] = { rid(f, 0, 0) }, *b[] = { rid(f, 0, 1) };
        char **ids[] = { a, b };
        size_t n[] = { 1, 1 };
        assert_int_equal(test_rpc_allocate_containers(timeslice_allocate, svc, ids, n, 2, &r, &st), RPC_OK);
        assert_int_equal(r->n_container_responses, 2);
        v1beta1__allocate_response__free_unpacked(r, NULL);
        devices_lock(f->dev);
        assert_non_null(state_find(plugin_record(f->p), "nvidia.com/gpu.shared", rid(f, 0, 1)));
        devices_unlock(f->dev);
        /* the same replica for two containers */
        char **same[] = { a, a };
        assert_int_equal(test_rpc_allocate_containers(timeslice_allocate, svc, same, n, 2, &r, &st),
                         RPC_INVALID_ARGUMENT);
        test_plugin_free(f);
}

/* Spread: each pick from the GPU with the fewest replicas held, the lower index on a tie. */
static void test_preferred_spreads(void **state) {
        (void)state;
        struct test_plugin *f = node("nvidia.com/gpu.shared", false);
        void *svc = plugin_service(f->p, PLUGIN_REPLICA);
        V1beta1__AllocateResponse *r;
        struct gs_error st = { 0 };
        char *held[] = { rid(f, 0, 0) };
        assert_int_equal(test_rpc_allocate(timeslice_allocate, svc, held, 1, &r, &st), RPC_OK);
        v1beta1__allocate_response__free_unpacked(r, NULL);
        char *avail[7];
        for (unsigned k = 0; k < 7; k++)
                avail[k] = strdup(rid(f, (k + 1) / 4, (k + 1) % 4));
        V1beta1__PreferredAllocationResponse *p;
        assert_int_equal(test_rpc_preferred(timeslice_get_preferred, svc, avail, 7, NULL, 0, 3, &p, &st), RPC_OK);
        assert_int_equal(p->container_responses[0]->n_deviceids, 3);
        assert_string_equal(p->container_responses[0]->deviceids[0], rid(f, 1, 0)); /* GPU 1 holds none */
        assert_string_equal(p->container_responses[0]->deviceids[1], rid(f, 0, 1)); /* 1 each: the lower index */
        assert_string_equal(p->container_responses[0]->deviceids[2], rid(f, 1, 1));
        v1beta1__preferred_allocation_response__free_unpacked(p, NULL);
        assert_int_equal(test_rpc_preferred(timeslice_get_preferred, svc, avail, 7, NULL, 0, 8, &p, &st),
                         RPC_INVALID_ARGUMENT);
        for (unsigned k = 0; k < 7; k++)
                free(avail[k]);
        test_plugin_free(f);
}

/* Time-slicing and MPS on one node: GPUs 0-1 time-sliced 4 ways as nvidia.com/gpu, GPUs 2-3 MPS clients 2 ways as
 * nvidia.com/gpu.shared, 4-7 whole and fractional. Each set its own IDs, service, failRequestsGreaterThanOne and MPS
 * answer; no GPU in two sets, no name twice. */
static void test_two_sets(void **state) {
        (void)state;
        struct test_plugin *f = node("nvidia.com/gpu", false);
        assert_int_equal(plugin_set_replicas(f->p, "nvidia.com/gpu.shared", 2, true, 0x6), -EEXIST); /* GPU 1 */
        assert_int_equal(plugin_set_replicas(f->p, "nvidia.com/gpu", 2, true, 0xc), -EEXIST);        /* the name */
        assert_int_equal(plugin_set_replicas(f->p, "nvidia.com/gpu.shared", 2, true, 0xc), 1);
        assert_int_equal(plugin_set_replicas(f->p, "example.com/third", 2, true, 0x10), -ENOSPC);
        assert_int_equal(plugin_set_replica_mps(f->p, 1, "/run/mps/pipe", "/run/mps/shm"), 0);
        assert_int_equal(plugin_set_replica_mps(f->p, 2, "/run/mps/pipe", "/run/mps/shm"), -EINVAL);
        assert_int_equal(plugin_replicated(f->p), 0xf);
        assert_int_equal(plugin_replica_set_of(f->p, 1), 0);
        assert_int_equal(plugin_replica_set_of(f->p, 3), 1);
        assert_int_equal(plugin_replica_set_of(f->p, 4), -1);
        assert_int_equal(plugin_replicas_of(f->p, 2), 2);
        assert_string_equal(plugin_replica_served(f->p, 0), "");
        assert_string_equal(plugin_replica_served(f->p, 1), "nvidia.com/gpu.shared");
        void *mps = plugin_replica_service(f->p, 1), *whole = plugin_service(f->p, PLUGIN_WHOLE);
        for (unsigned i = 0; i < 8; i++) {
                assert_int_equal(plugin_serves(f->p, mps, i), i == 2 || i == 3);
                assert_int_equal(plugin_serves(f->p, whole, i), i < 2 || i >= 4);
                assert_int_equal(plugin_serves(f->p, plugin_service(f->p, PLUGIN_CORE), i), i >= 4);
        }
        uint8_t *buf;
        size_t len;
        assert_int_equal(plugin_pack_devices_svc(f->p, mps, &buf, &len, NULL), 0);
        V1beta1__ListAndWatchResponse *l = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
        assert_int_equal(l->n_devices, 4); /* 2 GPUs x 2 */
        assert_string_equal(l->devices[0]->id, rid(f, 2, 0));
        assert_string_equal(l->devices[3]->id, rid(f, 3, 1));
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        free(buf);
        assert_int_equal(plugin_pack_devices_kind(f->p, PLUGIN_WHOLE, &buf, &len, NULL), 0);
        l = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
        assert_int_equal(l->n_devices, 2 * 4 + 4); /* the time-sliced replicas and GPUs 4-7 */
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);
        free(buf);

        V1beta1__AllocateResponse *r;
        struct gs_error st = { 0 };
        char *two_mps[] = { rid(f, 2, 0), rid(f, 3, 0) };
        assert_int_equal(test_rpc_allocate(timeslice_allocate, mps, two_mps, 2, &r, &st), RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "'nvidia.com/gpu.shared: 2' too large"));
        char *ts_on_mps[] = { rid(f, 0, 0) }; /* a time-sliced replica is not the MPS resource's */
        assert_int_equal(test_rpc_allocate(timeslice_allocate, mps, ts_on_mps, 1, &r, &st), RPC_INVALID_ARGUMENT);
        char *mps_on_whole[] = { rid(f, 2, 0) };
        assert_int_equal(test_rpc_allocate(timeslice_allocate, whole, mps_on_whole, 1, &r, &st), RPC_INVALID_ARGUMENT);
        char *one_mps[] = { rid(f, 2, 1) };
        assert_int_equal(test_rpc_allocate(timeslice_allocate, mps, one_mps, 1, &r, &st), RPC_OK);
        const V1beta1__ContainerAllocateResponse *c = r->container_responses[0];
        bool pipe = false;
        for (size_t k = 0; k < c->n_envs; k++)
                pipe |= streq(c->envs[k]->key, "CUDA_MPS_PIPE_DIRECTORY") &&
                        streq(c->envs[k]->value, "/mps/nvidia.com/gpu.shared/pipe");
        assert_true(pipe);
        assert_int_equal(c->n_mounts, 2);
        assert_string_equal(c->mounts[0]->host_path, "/run/mps/pipe");
        v1beta1__allocate_response__free_unpacked(r, NULL);
        char *two_ts[] = { rid(f, 0, 0), rid(f, 1, 0) }; /* time-slicing: fail_gt_one off, no MPS env or mounts */
        assert_int_equal(test_rpc_allocate(timeslice_allocate, whole, two_ts, 2, &r, &st), RPC_OK);
        c = r->container_responses[0];
        for (size_t k = 0; k < c->n_envs; k++)
                assert_false(startswith(c->envs[k]->key, "CUDA_MPS"));
        assert_int_equal(c->n_mounts, 0);
        v1beta1__allocate_response__free_unpacked(r, NULL);
        devices_lock(f->dev);
        struct plugin_usage u;
        plugin_usage(f->p, &u);
        assert_int_equal(u.rep[0], 1);
        assert_int_equal(u.rep[1], 1);
        assert_int_equal(u.rep[2], 1);
        assert_int_equal(u.replica, 0x7);
        assert_non_null(state_find(plugin_record(f->p), "nvidia.com/gpu.shared", rid(f, 2, 1)));
        assert_non_null(state_find(plugin_record(f->p), "nvidia.com/gpu", rid(f, 1, 0)));
        devices_unlock(f->dev);
        test_plugin_free(f);
}

static void test_labels(void **state) {
        (void)state;
        static struct topo t;
        t.n_gpus = 1;
        t.gpu[0].state = TOPO_GPU_OK;
        snprintf(t.gpu[0].name, sizeof t.gpu[0].name, "Tesla P40");
        char *s;
        size_t n;
        assert_int_equal(labels_format_sharing(&t, "time-slicing", 10, true, &s, &n), 0);
        assert_non_null(strstr(s, "nvidia.com/gpu.replicas=10\n"));
        assert_non_null(strstr(s, "nvidia.com/gpu.sharing-strategy=time-slicing\n"));
        assert_non_null(strstr(s, "nvidia.com/gpu.product=Tesla-P40-SHARED\n"));
        free(s);
        assert_int_equal(labels_format_sharing(&t, "time-slicing", 10, false, &s, &n), 0);
        assert_null(strstr(s, "gpu.product")); /* renamed: the product stays */
        free(s);
        static struct topo none;
        assert_int_equal(labels_format_sharing(&none, "time-slicing", 2, true, &s, &n), -ENODEV);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ids),
                cmocka_unit_test(test_one_mode_per_gpu),
                cmocka_unit_test(test_allocate_unrenamed),
                cmocka_unit_test(test_fail_requests_greater_than_one),
                cmocka_unit_test(test_preferred_spreads),
                cmocka_unit_test(test_two_sets),
                cmocka_unit_test(test_labels),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
