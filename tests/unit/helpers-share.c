/* SPDX-License-Identifier: Apache-2.0 */
/*
 * helpers-share — fixtures of test-share.c (see helpers-share.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "helpers-share.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "helpers.h"
#include "state/state.h"
#include "util/util.h"

#define MIB (UINT64_C(1) << 20)

struct test_plugin *test_share_new(void) {
        struct test_plugin *f = test_plugin_new("seed000-8gpu-pcie-2socket.topo", "share");
        struct plugin_options o = { .resource = "nvidia.com/gpu",
                                    .core_resource = "gpuslice.io/gpu-core",
                                    .memory_resource = "gpuslice.io/gpu-memory",
                                    .memory_unit = 256 * MIB,
                                    .limit_when_alone = true,
                                    .list_envvar = true };
        snprintf(o.dev_root, sizeof o.dev_root, "%s", f->tmp);
        snprintf(o.limits_root, sizeof o.limits_root, "%s/containers", f->tmp);
        snprintf(o.journal_dir, sizeof o.journal_dir, "%s", f->tmp);
        snprintf(o.interposer, sizeof o.interposer, "%s/libgpuslice-cuda.so", f->tmp);
        test_touch(o.interposer);
        test_plugin_init(f, &o);
        assert_int_equal(share_new(f->p, &f->s), 0);
        return f;
}

void test_share_restart(struct test_plugin *f, int records) {
        devices_lock(f->dev);
        struct plugin_options o = *plugin_options(f->p);
        devices_unlock(f->dev);
        f->s = share_free(f->s);
        f->p = plugin_free(f->p);
        f->dev = devices_free(f->dev);
        test_plugin_init(f, &o);
        assert_int_equal(share_new(f->p, &f->s), 0);
        int r = share_restore(f->s);
        if (records >= 0)
                assert_int_equal(r, records);
}

void test_share_id(struct test_plugin *f, int gpu, enum plugin_kind kind, unsigned n, char *buf) {
        assert_int_equal(share_format_id(test_device_id(f, (unsigned)gpu), kind, n, buf, SHARE_ID_MAX), 0);
}

enum rpc_code test_share_allocate(struct test_plugin *f, enum plugin_kind kind, char **const *ids, const size_t *n,
                                  size_t k, V1beta1__AllocateResponse **ret, struct gs_error *st) {
        assert_true(k >= 2 && k <= TEST_RPC_CONTAINERS_MAX);
        return test_rpc_allocate_containers(share_allocate, share_service(f->s, kind), ids, n, k, ret, st);
}

enum rpc_code test_share_allocate_run(struct test_plugin *f, enum plugin_kind kind, int gpu, unsigned first,
                                      unsigned count, V1beta1__AllocateResponse **ret, struct gs_error *st) {
        char store[128][SHARE_ID_MAX];
        char *ids[128];
        assert_true(count <= 128);
        for (unsigned i = 0; i < count; i++) {
                test_share_id(f, gpu, kind, first + i, store[i]);
                ids[i] = store[i];
        }
        return test_rpc_allocate(share_allocate, share_service(f->s, kind), ids, count, ret, st);
}

void test_share_allocate_ok(struct test_plugin *f, enum plugin_kind kind, int gpu, unsigned first, unsigned count) {
        struct gs_error st;
        V1beta1__AllocateResponse *r = NULL;
        enum rpc_code c = test_share_allocate_run(f, kind, gpu, first, count, &r, &st);
        if (c != RPC_OK)
                fail_msg("Allocate of %u IDs on GPU %d refused: %s", count, gpu, st.message);
        v1beta1__allocate_response__free_unpacked(r, NULL);
}

enum rpc_code test_share_prefer(struct test_plugin *f, enum plugin_kind kind, int size, char (*except)[SHARE_ID_MAX],
                                size_t n_except, int *ret_gpu, struct gs_error *st) {
        unsigned count = devices_count(f->dev);
        char(*store)[SHARE_ID_MAX] = calloc((size_t)count * SHARE_MEM_IDS_MAX, SHARE_ID_MAX);
        char **avail = calloc((size_t)count * SHARE_MEM_IDS_MAX, sizeof *avail);
        assert_true(store && avail);
        size_t n = 0;
        for (unsigned g = 0; g < count; g++)
                for (unsigned i = 0; i < (kind == PLUGIN_CORE ? 100u : devices_info(f->dev, g)->n_mem); i++) {
                        test_share_id(f, (int)g, kind, i, store[n]);
                        bool taken = false;
                        for (size_t k = 0; k < n_except && !taken; k++)
                                taken = streq(except[k], store[n]);
                        if (!taken) {
                                avail[n] = store[n];
                                n++;
                        }
                }
        V1beta1__PreferredAllocationResponse *r = NULL;
        enum rpc_code c =
                test_rpc_preferred(share_get_preferred, share_service(f->s, kind), avail, n, NULL, 0, size, &r, st);
        free(avail);
        free(store);
        if (c == RPC_OK) {
                const V1beta1__ContainerPreferredAllocationResponse *o = r->container_responses[0];
                assert_int_equal(o->n_deviceids, (size_t)size);
                int gpu = -1;
                for (size_t i = 0; i < o->n_deviceids; i++) {
                        enum plugin_kind k;
                        unsigned g, num;
                        assert_int_equal(share_parse_id(f->dev, o->deviceids[i], &k, &g, &num), 0);
                        assert_int_equal(k, kind);
                        if (gpu >= 0 && (unsigned)gpu != g)
                                fail_msg("preferred IDs on GPUs %d and %u", gpu, g);
                        gpu = (int)g;
                }
                if (ret_gpu)
                        *ret_gpu = gpu;
                v1beta1__preferred_allocation_response__free_unpacked(r, NULL);
        }
        return c;
}

const char *test_share_mount(const V1beta1__ContainerAllocateResponse *c, const char *container_path) {
        for (size_t i = 0; i < c->n_mounts; i++)
                if (streq(c->mounts[i]->container_path, container_path))
                        return c->mounts[i]->host_path;
        return NULL;
}

const char *test_share_env(const V1beta1__ContainerAllocateResponse *c, const char *key) {
        for (size_t i = 0; i < c->n_envs; i++)
                if (streq(c->envs[i]->key, key))
                        return c->envs[i]->value;
        return NULL;
}

const char *test_share_limits_path(const V1beta1__AllocateResponse *r) {
        assert_true(r->n_container_responses >= 1);
        const char *p = test_share_mount(r->container_responses[0], SHARE_LIMITS_PATH);
        assert_non_null(p);
        return p;
}

void test_share_read_limits(const char *path, struct gs_limits *ret) {
        char *text = NULL;
        size_t len = 0;
        char err[256] = "";
        assert_int_equal(read_file(path, GS_LIMITS_MAX_FILE, &text, &len), 0);
        int r = gs_limits_parse(text, len, ret, err, sizeof err);
        if (r < 0)
                fail_msg("limits file does not parse: %s\n%s", err, text);
        free(text);
}

static bool owned_frac(const char *resource, void *userdata) {
        (void)userdata;
        return streq(resource, "gpuslice.io/gpu-core") || streq(resource, "gpuslice.io/gpu-memory");
}

int test_podres_sync(void *userdata) {
        struct test_podres *k = userdata;
        static struct state_report rep[1024];
        for (size_t i = 0; i < k->n; i++)
                rep[i] = (struct state_report){ .resource = strstr(k->ids[i], "::core-") ? "gpuslice.io/gpu-core"
                                                                                         : "gpuslice.io/gpu-memory",
                                                .device_id = k->ids[i],
                                                .pod_namespace = "default",
                                                .pod_name = "p",
                                                .pod_uid = "u",
                                                .container = "c" };
        size_t a, r, u, sk;
        uint64_t now = (uint64_t)time(NULL);
        k->calls++;
        devices_lock(k->f->dev);
        int e = state_reconcile(plugin_record(k->f->p), rep, k->n, owned_frac, NULL, now, now - 120, &a, &r, &u, &sk);
        devices_unlock(k->f->dev);
        return e < 0 ? e : 0;
}

void test_share_pair_on(struct test_plugin *f, int gpu, unsigned core0, unsigned core, unsigned mem0, unsigned mem,
                        struct test_podres *k) {
        test_share_allocate_ok(f, PLUGIN_CORE, gpu, core0, core);
        test_share_allocate_ok(f, PLUGIN_MEMORY, gpu, mem0, mem);
        for (unsigned i = 0; k && i < core; i++)
                test_share_id(f, gpu, PLUGIN_CORE, core0 + i, k->ids[k->n++]);
        for (unsigned i = 0; k && i < mem; i++)
                test_share_id(f, gpu, PLUGIN_MEMORY, mem0 + i, k->ids[k->n++]);
}
