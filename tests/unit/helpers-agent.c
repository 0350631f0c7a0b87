/* SPDX-License-Identifier: Apache-2.0 */
/* helpers-agent — the node agent's unit-test fixtures (helpers-agent.h). */
#include "helpers-agent.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "helpers.h"

struct test_plugin *test_plugin_new(const char *topo, const char *tag) {
        struct test_plugin *f = calloc(1, sizeof *f);
        assert_non_null(f);
        test_load_topo(topo, &f->t);
        f->tmp = test_tmpdir_new(tag);
        return f;
}

void test_plugin_init(struct test_plugin *f, const struct plugin_options *o) {
        assert_int_equal(devices_new(&f->t, o->memory_unit, SHARE_MEM_IDS_MAX, &f->dev), 0);
        assert_int_equal(plugin_new(f->dev, o, &f->p), 0);
}

const char *test_device_id(const struct test_plugin *f, unsigned i) {
        return devices_info(f->dev, i)->id;
}

bool test_device_healthy(struct test_plugin *f, unsigned i) {
        struct device_health h;
        devices_health(f->dev, i, &h);
        return h.healthy;
}

void test_plugin_free(struct test_plugin *f) {
        if (!f)
                return;
        f->s = share_free(f->s);
        f->p = plugin_free(f->p);
        f->dev = devices_free(f->dev);
        assert_int_equal(test_tmpdir_free(f->tmp), 0);
        free(f);
}

/* Pack REQ, call H, unpack the answer with UNPACK on RPC_OK. */
static enum rpc_code call(rpc_unary_fn h, void *userdata, const ProtobufCMessage *req,
                          void *(*unpack)(size_t len, const uint8_t *data), void **ret, struct gs_error *st) {
        uint8_t *buf = NULL, *out = NULL;
        size_t len = 0, out_len = 0;
        assert_int_equal(rpc_pack(req, &buf, &len), 0);
        enum rpc_code c = h(userdata, buf, len, &out, &out_len, st);
        free(buf);
        if (c == RPC_OK) {
                *ret = unpack(out_len, out);
                assert_non_null(*ret);
        } else
                assert_null(out);
        free(out);
        return c;
}

static void *unpack_allocate(size_t len, const uint8_t *data) {
        return v1beta1__allocate_response__unpack(NULL, len, data);
}

static void *unpack_preferred(size_t len, const uint8_t *data) {
        return v1beta1__preferred_allocation_response__unpack(NULL, len, data);
}

enum rpc_code test_rpc_allocate_containers(rpc_unary_fn h, void *userdata, char **const *ids, const size_t *n, size_t k,
                                           V1beta1__AllocateResponse **ret, struct gs_error *st) {
        V1beta1__ContainerAllocateRequest cr[TEST_RPC_CONTAINERS_MAX], *crs[TEST_RPC_CONTAINERS_MAX];
        assert_true(k >= 1 && k <= TEST_RPC_CONTAINERS_MAX);
        for (size_t i = 0; i < k; i++) {
                v1beta1__container_allocate_request__init(&cr[i]);
                cr[i].devices_ids = ids[i];
                cr[i].n_devices_ids = n[i];
                crs[i] = &cr[i];
        }
        V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
        req.container_requests = crs;
        req.n_container_requests = k;
        void *r = NULL;
        enum rpc_code c = call(h, userdata, &req.base, unpack_allocate, &r, st);
        if (c == RPC_OK)
                *ret = r;
        return c;
}

enum rpc_code test_rpc_allocate(rpc_unary_fn h, void *userdata, char **ids, size_t n, V1beta1__AllocateResponse **ret,
                                struct gs_error *st) {
        return test_rpc_allocate_containers(h, userdata, &ids, &n, 1, ret, st);
}

enum rpc_code test_rpc_preferred(rpc_unary_fn h, void *userdata, char **avail, size_t na, char **must, size_t nm,
                                 int size, V1beta1__PreferredAllocationResponse **ret, struct gs_error *st) {
        V1beta1__ContainerPreferredAllocationRequest cr = V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
        cr.available_deviceids = avail;
        cr.n_available_deviceids = na;
        cr.must_include_deviceids = must;
        cr.n_must_include_deviceids = nm;
        cr.allocation_size = size;
        V1beta1__ContainerPreferredAllocationRequest *crs[1] = { &cr };
        V1beta1__PreferredAllocationRequest req = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
        req.container_requests = crs;
        req.n_container_requests = 1;
        void *r = NULL;
        enum rpc_code c = call(h, userdata, &req.base, unpack_preferred, &r, st);
        if (c == RPC_OK)
                *ret = r;
        return c;
}
