/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the agent's one PodResources service (src/agent/podres-service.c, podres.h) against a real gRPC
 * server on a temporary socket: the cached answer and its freshness stamp, a new socket (reload) dropping it,
 * no socket, and a caller that never waits behind another caller's hung call past its own wait.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "helpers.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/podres.h"
#include "podresources.pb-c.h"
#include "rpc/rpc.h"
#include "util/util.h"

struct kubelet {
        char path[512];
        struct rpc_server *srv;
        atomic_int calls;
        atomic_int hang_ms; /* the next answers wait this long */
        const char *pod;    /* the one pod it lists */
};

static enum rpc_code list(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                          struct gs_error *st) {
        struct kubelet *k = userdata;
        (void)req;
        (void)req_len;
        (void)st;
        atomic_fetch_add(&k->calls, 1);
        int hang = atomic_load(&k->hang_ms);
        if (hang)
                usleep((useconds_t)hang * 1000);
        char *ids[] = { "GPU-0" };
        V1__ContainerDevices cd = V1__CONTAINER_DEVICES__INIT;
        cd.resource_name = "nvidia.com/gpu";
        cd.n_device_ids = 1;
        cd.device_ids = ids;
        V1__ContainerDevices *cds[] = { &cd };
        V1__ContainerResources cr = V1__CONTAINER_RESOURCES__INIT;
        cr.name = "main";
        cr.n_devices = 1;
        cr.devices = cds;
        V1__ContainerResources *crs[] = { &cr };
        V1__PodResources pr = V1__POD_RESOURCES__INIT;
        pr.name = (char *)k->pod;
        pr.namespace_ = "default";
        pr.n_containers = 1;
        pr.containers = crs;
        V1__PodResources *prs[] = { &pr };
        V1__ListPodResourcesResponse resp = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
        resp.n_pod_resources = 1;
        resp.pod_resources = prs;
        return rpc_pack(&resp.base, ret, ret_len) < 0 ? RPC_INTERNAL : RPC_OK;
}

static void kubelet_start(struct kubelet *k, const char *dir, const char *name, const char *pod) {
        snprintf(k->path, sizeof k->path, "%s/%s", dir, name);
        k->pod = pod;
        assert_int_equal(rpc_server_new(k->path, 0, &k->srv), 0);
        assert_int_equal(rpc_server_add_unary(k->srv, "/v1.PodResourcesLister/List", list, k), 0);
        assert_int_equal(rpc_server_start(k->srv), 0);
}

struct fixture {
        char *dir;
        struct kubelet a, b;
        struct podres_service *s;
};

static int setup(void **state) {
        struct fixture *f = calloc(1, sizeof *f);
        assert_non_null(f);
        f->dir = test_tmpdir_new("podres");
        kubelet_start(&f->a, f->dir, "a.sock", "on-a");
        kubelet_start(&f->b, f->dir, "b.sock", "on-b");
        assert_int_equal(podres_service_new(f->a.path, &f->s), 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;
        f->s = podres_service_free(f->s);
        f->a.srv = rpc_server_free(f->a.srv);
        f->b.srv = rpc_server_free(f->b.srv);
        test_tmpdir_free(f->dir);
        free(f);
        return 0;
}

static const char *pod_of(const struct podres_snapshot *snap) {
        assert_int_equal(snap->r.n_containers, 1);
        assert_int_equal(snap->r.n, 1);
        assert_string_equal(snap->r.containers[0].name, "main");
        assert_string_equal(snap->r.rep[0].device_id, "GPU-0");
        return snap->r.containers[0].pod;
}

/* An answer asked after `since` is reused; a later `since` makes a new call. */
static void test_cache_and_freshness(void **state) {
        struct fixture *f = *state;
        struct podres_snapshot *x = NULL, *y = NULL, *z = NULL;
        assert_int_equal(podres_service_get(f->s, 0, 2000, &x, NULL), 0);
        assert_string_equal(pod_of(x), "on-a");
        assert_int_equal(atomic_load(&f->a.calls), 1);
        assert_int_equal(podres_service_get(f->s, 0, 2000, &y, NULL), 0);
        assert_ptr_equal(x, y); /* the cached one, no call */
        assert_int_equal(atomic_load(&f->a.calls), 1);
        usleep(2000);
        assert_int_equal(podres_service_get(f->s, monotonic_ms(), 2000, &z, NULL), 0);
        assert_ptr_not_equal(z, x);
        assert_true(z->asked_ms > x->asked_ms);
        assert_int_equal(atomic_load(&f->a.calls), 2);
        podres_snapshot_put(x);
        podres_snapshot_put(y); /* x and y are one snapshot: freed with its last holder (the cache let go) */
        podres_snapshot_put(z);
}

/* A new socket (SIGHUP): the cached answer is dropped, the next call asks the new one. */
static void test_new_socket_followed(void **state) {
        struct fixture *f = *state;
        struct podres_snapshot *x = NULL;
        char buf[600];
        assert_int_equal(podres_service_get(f->s, 0, 2000, &x, NULL), 0);
        podres_snapshot_put(x);
        podres_service_set_socket(f->s, f->b.path);
        assert_string_equal(podres_service_socket(f->s, buf, sizeof buf), f->b.path);
        assert_int_equal(podres_service_get(f->s, 0, 2000, &x, NULL), 0);
        assert_string_equal(pod_of(x), "on-b");
        assert_int_equal(atomic_load(&f->b.calls), 1);
        podres_snapshot_put(x);
        podres_service_set_socket(f->s, "");
        assert_int_equal(podres_service_get(f->s, 0, 2000, &x, NULL), -ENOENT);
        podres_service_set_socket(f->s, test_path(f->dir, "missing.sock"));
        assert_int_equal(podres_service_get(f->s, 0, 2000, &x, NULL), -ENOENT);
}

struct slow_caller {
        struct podres_service *s;
        int r;
        struct podres_snapshot *snap;
};

static void *slow_call(void *u) {
        struct slow_caller *c = u;
        c->r = podres_service_get(c->s, monotonic_ms(), 3000, &c->snap, NULL);
        return NULL;
}

/* Another caller's call hangs: a caller with a short wait gives up at its own wait, not at the other's. */
static void test_never_waits_past_own_bound(void **state) {
        struct fixture *f = *state;
        atomic_store(&f->a.hang_ms, 1500);
        struct slow_caller c = { .s = f->s };
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, slow_call, &c), 0);
        while (atomic_load(&f->a.calls) == 0)
                usleep(1000);
        uint64_t t0 = monotonic_ms();
        struct podres_snapshot *x = NULL;
        assert_int_equal(podres_service_get(f->s, monotonic_ms(), 200, &x, NULL), -ETIMEDOUT);
        uint64_t took = monotonic_ms() - t0;
        assert_true(took >= 200 && took < 1000);
        pthread_join(t, NULL);
        assert_int_equal(c.r, 0); /* the slow call itself answered within its own 3 s */
        assert_string_equal(pod_of(c.snap), "on-a");
        podres_snapshot_put(c.snap);
        /* a call this caller makes itself is bounded by its own wait too */
        t0 = monotonic_ms();
        assert_int_equal(podres_service_get(f->s, monotonic_ms(), 300, &x, NULL), -ETIMEDOUT);
        took = monotonic_ms() - t0;
        assert_true(took >= 300 && took < 1200);
        atomic_store(&f->a.hang_ms, 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_cache_and_freshness, setup, teardown),
                cmocka_unit_test_setup_teardown(test_new_socket_followed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_never_waits_past_own_bound, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
