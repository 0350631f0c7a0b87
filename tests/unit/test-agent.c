/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the node agent's plugin logic (src/agent/plugin.c, whole.c, devices.c, health.c) called
 * directly with protobuf-c messages: preferred allocation on the seed topology, Allocate answers and
 * their options, every refusal, health transitions and the ListAndWatch list.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "helpers-agent.h"
#include "helpers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/devices.h"
#include "agent/health.h"
#include "agent/plugin.h"
#include "agent/whole.h"
#include "deviceplugin.pb-c.h"
#include "topo/topo.h"
#include "util/util.h"

static void make_file(const char *dir, const char *name) {
        test_touch(test_path(test_path(dir, "dev"), name));
}

static int setup(void **state) {
        struct test_plugin *f = test_plugin_new("seed000-8gpu-pcie-2socket.topo", "agent");
        assert_int_equal(mkdir(test_path(f->tmp, "dev"), 0755), 0);
        make_file(f->tmp, "nvidia6");
        make_file(f->tmp, "nvidia7");
        make_file(f->tmp, "nvidiactl");
        struct plugin_options o = { .resource = "nvidia.com/gpu", .list_envvar = true, .cdi_kind = "gpuslice.io/gpu" };
        snprintf(o.dev_root, sizeof o.dev_root, "%s", f->tmp);
        test_plugin_init(f, &o);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        test_plugin_free(*state);
        return 0;
}

static const char *id(struct test_plugin *f, int i) {
        return test_device_id(f, (unsigned)i);
}

/* What plugin_set_unhealthy(p, i, reason, now, fault_cleared) was: a fault, and with fault_cleared a
 * normal answer right after it at `now` (an Xid the GPU answered after). */
static void set_unhealthy(struct test_plugin *f, unsigned i, const char *reason, uint64_t now, bool answered) {
        (void)devices_fault(f->dev, i, reason);
        if (answered)
                devices_answered(f->dev, i, now);
}

/* ---- request builders ---- */

static enum rpc_code prefer(struct test_plugin *f, const int *avail, size_t na, const int *must, size_t nm, int size,
                            V1beta1__PreferredAllocationResponse **ret, struct gs_error *st) {
        char *a[8], *m[8];
        for (size_t i = 0; i < na; i++)
                a[i] = (char *)id(f, avail[i]);
        for (size_t i = 0; i < nm; i++)
                m[i] = (char *)id(f, must[i]);
        return test_rpc_preferred(whole_get_preferred, f->p, a, na, m, nm, size, ret, st);
}

static enum rpc_code allocate(struct test_plugin *f, char **ids, size_t n, V1beta1__AllocateResponse **ret,
                              struct gs_error *st) {
        return test_rpc_allocate(whole_allocate, f->p, ids, n, ret, st);
}

static bool has_id(const V1beta1__ContainerPreferredAllocationResponse *r, const char *want) {
        for (size_t i = 0; i < r->n_deviceids; i++)
                if (streq(r->deviceids[i], want))
                        return true;
        return false;
}

/* ---- tests ---- */

static void test_preferred_seed_case(void **state) {
        struct test_plugin *f = *state;
        const int avail[] = { 2, 5, 6, 7 };
        V1beta1__PreferredAllocationResponse *r = NULL;
        struct gs_error st;
        assert_int_equal(prefer(f, avail, 4, NULL, 0, 2, &r, &st), RPC_OK);
        assert_int_equal(r->n_container_responses, 1);
        assert_int_equal(r->container_responses[0]->n_deviceids, 2);
        assert_true(has_id(r->container_responses[0], id(f, 6)));
        assert_true(has_id(r->container_responses[0], id(f, 7)));
        v1beta1__preferred_allocation_response__free_unpacked(r, NULL);
}

static void test_preferred_must_include(void **state) {
        struct test_plugin *f = *state;
        const int avail[] = { 0, 1, 2, 3, 4, 5, 6, 7 }, must[] = { 5 };
        V1beta1__PreferredAllocationResponse *r = NULL;
        struct gs_error st;
        assert_int_equal(prefer(f, avail, 8, must, 1, 2, &r, &st), RPC_OK);
        assert_true(has_id(r->container_responses[0], id(f, 5)));
        assert_true(has_id(r->container_responses[0], id(f, 4)));
        v1beta1__preferred_allocation_response__free_unpacked(r, NULL);
}

static void test_preferred_skips_unhealthy(void **state) {
        struct test_plugin *f = *state;
        set_unhealthy(f, 7, "xid 48", 1000, true);
        const int avail[] = { 2, 5, 6, 7 };
        V1beta1__PreferredAllocationResponse *r = NULL;
        struct gs_error st;
        assert_int_equal(prefer(f, avail, 4, NULL, 0, 2, &r, &st), RPC_OK);
        assert_false(has_id(r->container_responses[0], id(f, 7)));
        v1beta1__preferred_allocation_response__free_unpacked(r, NULL);
        /* must-include of an unhealthy GPU is refused */
        const int must[] = { 7 };
        assert_int_equal(prefer(f, avail, 4, must, 1, 2, &r, &st), RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "unhealthy"));
        /* too few healthy GPUs left */
        assert_int_equal(prefer(f, avail, 4, NULL, 0, 4, &r, &st), RPC_RESOURCE_EXHAUSTED);
}

static void test_preferred_bad_requests(void **state) {
        struct test_plugin *f = *state;
        const int avail[] = { 0, 1 }, must[] = { 3 };
        V1beta1__PreferredAllocationResponse *r = NULL;
        struct gs_error st;
        assert_int_equal(prefer(f, avail, 2, NULL, 0, 0, &r, &st), RPC_INVALID_ARGUMENT);
        assert_int_equal(prefer(f, avail, 2, NULL, 0, 9, &r, &st), RPC_INVALID_ARGUMENT);
        assert_int_equal(prefer(f, avail, 2, must, 1, 1, &r, &st), RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "must_include"));
        const int dup[] = { 1, 1 };
        assert_int_equal(prefer(f, dup, 2, NULL, 0, 1, &r, &st), RPC_INVALID_ARGUMENT);
        uint8_t *out = NULL;
        size_t n = 0;
        const uint8_t garbage[] = { 0xff, 0xff, 0xff };
        assert_int_equal(whole_get_preferred(f->p, garbage, sizeof garbage, &out, &n, &st), RPC_INVALID_ARGUMENT);
        assert_null(out);
        /* an empty message has no container requests */
        assert_int_equal(whole_get_preferred(f->p, NULL, 0, &out, &n, &st), RPC_INVALID_ARGUMENT);
}

static void test_allocate_env_and_specs(void **state) {
        struct test_plugin *f = *state;
        char *ids[] = { (char *)id(f, 7), (char *)id(f, 6) };
        V1beta1__AllocateResponse *r = NULL;
        struct gs_error st;
        assert_int_equal(allocate(f, ids, 2, &r, &st), RPC_OK);
        assert_int_equal(r->n_container_responses, 1);
        V1beta1__ContainerAllocateResponse *c = r->container_responses[0];
        assert_int_equal(c->n_envs, 1);
        assert_string_equal(c->envs[0]->key, "NVIDIA_VISIBLE_DEVICES");
        char want[256];
        snprintf(want, sizeof want, "%s,%s", id(f, 6), id(f, 7));
        assert_string_equal(c->envs[0]->value, want);
        /* nvidia6, nvidia7, nvidiactl exist; uvm, uvm-tools, modeset do not */
        assert_int_equal(c->n_devices, 3);
        assert_string_equal(c->devices[0]->container_path, "/dev/nvidia6");
        /* the host's /dev, whatever the dev root the agent looked in */
        assert_string_equal(c->devices[0]->host_path, "/dev/nvidia6");
        assert_string_equal(c->devices[0]->permissions, "rw");
        assert_string_equal(c->devices[2]->container_path, "/dev/nvidiactl");
        assert_int_equal(c->n_cdi_devices, 0);
        v1beta1__allocate_response__free_unpacked(r, NULL);
        /* recorded for the state file */
        assert_non_null(state_find(plugin_record(f->p), "nvidia.com/gpu", id(f, 6)));
        assert_null(state_find(plugin_record(f->p), "nvidia.com/gpu", id(f, 5)));
}

static void test_allocate_index_and_cdi(void **state) {
        struct test_plugin *f = *state;
        devices_lock(f->dev);
        struct plugin_options o = *plugin_options(f->p);
        devices_unlock(f->dev);
        o.ids_by_index = true;
        o.list_cdi = true;
        o.list_envvar = false;
        plugin_set_options(f->p, &o);
        char *ids[] = { (char *)id(f, 3), (char *)id(f, 1) };
        V1beta1__AllocateResponse *r = NULL;
        struct gs_error st;
        assert_int_equal(allocate(f, ids, 2, &r, &st), RPC_OK);
        V1beta1__ContainerAllocateResponse *c = r->container_responses[0];
        assert_int_equal(c->n_envs, 0);
        assert_int_equal(c->n_devices, 0);
        assert_int_equal(c->n_cdi_devices, 2);
        assert_string_equal(c->cdi_devices[0]->name, "gpuslice.io/gpu=1");
        assert_string_equal(c->cdi_devices[1]->name, "gpuslice.io/gpu=3");
        v1beta1__allocate_response__free_unpacked(r, NULL);
}

static void test_allocate_refusals(void **state) {
        struct test_plugin *f = *state;
        V1beta1__AllocateResponse *r = NULL;
        struct gs_error st;
        char *unknown[] = { "GPU-nope" };
        assert_int_equal(allocate(f, unknown, 1, &r, &st), RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "unknown device ID"));
        char *dup[] = { (char *)id(f, 2), (char *)id(f, 2) };
        assert_int_equal(allocate(f, dup, 2, &r, &st), RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "twice"));
        assert_int_equal(allocate(f, NULL, 0, &r, &st), RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "no device IDs"));
        set_unhealthy(f, 2, "GPU_IS_LOST", 1000, false);
        char *sick[] = { (char *)id(f, 2) };
        assert_int_equal(allocate(f, sick, 1, &r, &st), RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "unhealthy"));
        uint8_t *out = NULL;
        size_t n = 0;
        assert_int_equal(whole_allocate(f->p, NULL, 0, &out, &n, &st), RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "no container requests"));
        const uint8_t trunc[] = { 0x0a, 0x40, 0x0a };
        assert_int_equal(whole_allocate(f->p, trunc, sizeof trunc, &out, &n, &st), RPC_INVALID_ARGUMENT);
        assert_null(out);
        assert_null(state_find(plugin_record(f->p), NULL, id(f, 2)));
}

static void test_health_xid_quiet_period(void **state) {
        struct test_plugin *f = *state;
        uint64_t g0 = devices_generation(f->dev);
        set_unhealthy(f, 4, "xid 48", 10000, true);
        assert_false(test_device_healthy(f, 4));
        assert_true(devices_generation(f->dev) > g0);
        devices_probe_ok(f->dev, 4, 11000, 2000);
        assert_false(test_device_healthy(f, 4));
        devices_probe_ok(f->dev, 4, 12000, 2000);
        assert_true(test_device_healthy(f, 4));
        struct device_health h;
        devices_health(f->dev, 4, &h);
        assert_string_equal(h.reason, "");
        for (unsigned i = 0; i < devices_count(f->dev); i++)
                assert_true(test_device_healthy(f, i));
}

static void test_health_lost_needs_answers(void **state) {
        struct test_plugin *f = *state;
        set_unhealthy(f, 1, "GPU_IS_LOST", 10000, false);
        /* still lost at 20000: the quiet period has not started */
        set_unhealthy(f, 1, "GPU_IS_LOST", 20000, false);
        devices_probe_ok(f->dev, 1, 20500, 2000); /* first normal answer */
        assert_false(test_device_healthy(f, 1));
        devices_probe_ok(f->dev, 1, 22000, 2000);
        assert_false(test_device_healthy(f, 1));
        devices_probe_ok(f->dev, 1, 22500, 2000);
        assert_true(test_device_healthy(f, 1));
        assert_true(test_device_healthy(f, 0));
}

/* An Xid on a GPU that does not answer (lost, refused) starts no quiet period: it starts at the
 * first normal answer after it, however long ago the Xid was (the health thread marks the fault,
 * then probes; only a normal answer calls devices_answered). */
static void test_health_xid_without_answer(void **state) {
        struct test_plugin *f = *state;
        set_unhealthy(f, 5, "xid 79", 10000, false); /* the Xid; the probe right after it failed */
        devices_probe_ok(f->dev, 5, 10400, 2000);    /* the first normal answer */
        assert_false(test_device_healthy(f, 5));
        devices_probe_ok(f->dev, 5, 12000, 2000); /* 2 s after the Xid, 1.6 s after the answer */
        assert_false(test_device_healthy(f, 5));
        assert_int_equal(devices_quiet_due(f->dev, 5, 2000), 12400);
        devices_probe_ok(f->dev, 5, 12400, 2000);
        assert_true(test_device_healthy(f, 5));
        /* an answer while healthy, or a second one, moves nothing */
        devices_answered(f->dev, 5, 13000);
        assert_int_equal(devices_quiet_due(f->dev, 5, 2000), 0);
}

static uint64_t drain(int fd) {
        uint64_t v = 0;
        if (read(fd, &v, sizeof v) != (ssize_t)sizeof v)
                return 0;
        return v;
}

/* "devices changed": a health change writes change_fd; nothing changed, nothing written; a
 * generation bumped behind devices_changed's back is told by devices_notify, once. */
static void test_change_notifications(void **state) {
        struct test_plugin *f = *state;
        int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        assert_true(fd >= 0);
        devices_set_change_fd(f->dev, fd);
        devices_notify(f->dev);
        assert_int_equal(drain(fd), 0);
        set_unhealthy(f, 2, "xid 48", 1000, true);
        assert_int_equal(drain(fd), 1);
        set_unhealthy(f, 2, "xid 48", 1100, true); /* already unhealthy: no change */
        assert_int_equal(drain(fd), 0);
        devices_touch(f->dev);
        devices_notify(f->dev);
        devices_notify(f->dev);
        assert_int_equal(drain(fd), 1);
        devices_probe_ok(f->dev, 2, 5000, 0); /* quiet period 0: healthy on the first normal answer */
        assert_true(test_device_healthy(f, 2));
        assert_int_equal(drain(fd), 1);
        devices_set_change_fd(f->dev, -1);
        close(fd);
}

static void test_list_devices(void **state) {
        struct test_plugin *f = *state;
        set_unhealthy(f, 3, "xid 79", 1, false);
        uint8_t *buf = NULL;
        size_t n = 0;
        uint64_t gen = 0;
        assert_int_equal(plugin_pack_devices(f->p, &buf, &n, &gen), 0);
        assert_int_equal(gen, devices_generation(f->dev));
        V1beta1__ListAndWatchResponse *r = v1beta1__list_and_watch_response__unpack(NULL, n, buf);
        free(buf);
        assert_non_null(r);
        assert_int_equal(r->n_devices, 8);
        for (size_t i = 0; i < r->n_devices; i++) {
                assert_string_equal(r->devices[i]->id, id(f, (int)i));
                assert_string_equal(r->devices[i]->health, i == 3 ? "Unhealthy" : "Healthy");
                if (f->t.gpu[i].numa_node >= 0) {
                        assert_non_null(r->devices[i]->topology);
                        assert_int_equal(r->devices[i]->topology->nodes[0]->id, f->t.gpu[i].numa_node);
                }
        }
        v1beta1__list_and_watch_response__free_unpacked(r, NULL);
}

/* Devices another driver holds (the DRA driver's claims, plugin_set_held_elsewhere): counted as held whole
 * and in fractions, not as the device plugin's own use, listed Unhealthy, never offered, refused at Allocate;
 * released, they are the device plugin's again. */
static void test_held_elsewhere(void **state) {
        struct test_plugin *f = *state;
        uint64_t held = UINT64_C(1) << 2 | UINT64_C(1) << 5;
        devices_lock(f->dev);
        assert_true(plugin_set_held_elsewhere(f->p, held));
        assert_false(plugin_set_held_elsewhere(f->p, held));
        assert_int_equal(plugin_held_elsewhere(f->p), held);
        struct plugin_usage u;
        plugin_usage(f->p, &u);
        assert_int_equal(u.whole & held, held);
        assert_int_equal(u.frac & held, held);
        assert_int_equal(plugin_own_use(f->p), 0);
        devices_unlock(f->dev);

        uint8_t *buf = NULL;
        size_t n = 0;
        uint64_t gen = 0;
        assert_int_equal(plugin_pack_devices(f->p, &buf, &n, &gen), 0);
        V1beta1__ListAndWatchResponse *l = v1beta1__list_and_watch_response__unpack(NULL, n, buf);
        free(buf);
        assert_non_null(l);
        for (size_t i = 0; i < l->n_devices; i++)
                assert_string_equal(l->devices[i]->health, (held >> i & 1) ? "Unhealthy" : "Healthy");
        v1beta1__list_and_watch_response__free_unpacked(l, NULL);

        V1beta1__PreferredAllocationResponse *pr = NULL;
        struct gs_error st;
        const int all[] = { 0, 1, 2, 3, 4, 5, 6, 7 };
        assert_int_equal(prefer(f, all, 8, NULL, 0, 6, &pr, &st), RPC_OK);
        assert_false(has_id(pr->container_responses[0], id(f, 2)) || has_id(pr->container_responses[0], id(f, 5)));
        v1beta1__preferred_allocation_response__free_unpacked(pr, NULL);

        V1beta1__AllocateResponse *r = NULL;
        char *two[] = { (char *)id(f, 2) };
        assert_int_equal(allocate(f, two, 1, &r, &st), RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "held by another driver"));
        assert_null(state_find(plugin_record(f->p), NULL, id(f, 2)));

        devices_lock(f->dev);
        assert_true(plugin_set_held_elsewhere(f->p, 0));
        devices_unlock(f->dev);
        assert_int_equal(allocate(f, two, 1, &r, &st), RPC_OK);
        v1beta1__allocate_response__free_unpacked(r, NULL);
        devices_lock(f->dev);
        assert_int_equal(plugin_own_use(f->p), UINT64_C(1) << 2);
        devices_unlock(f->dev);
}

static void test_options(void **state) {
        struct test_plugin *f = *state;
        uint8_t *out = NULL;
        size_t n = 0;
        struct gs_error st;
        assert_int_equal(plugin_get_options(plugin_service(f->p, PLUGIN_WHOLE), NULL, 0, &out, &n, &st), RPC_OK);
        V1beta1__DevicePluginOptions *o = v1beta1__device_plugin_options__unpack(NULL, n, out);
        free(out);
        assert_non_null(o);
        assert_true(o->get_preferred_allocation_available);
        assert_false(o->pre_start_required);
        v1beta1__device_plugin_options__free_unpacked(o, NULL);
}

static void test_xid_ignore_list(void **state) {
        (void)state;
        const unsigned ignore[] = { 13, 31, 43, 45, 68, 109 };
        assert_false(health_xid_is_critical(ignore, ELEMENTSOF(ignore), 13));
        assert_false(health_xid_is_critical(ignore, ELEMENTSOF(ignore), 109));
        assert_true(health_xid_is_critical(ignore, ELEMENTSOF(ignore), 48));
        assert_true(health_xid_is_critical(ignore, ELEMENTSOF(ignore), 79));
        assert_true(health_xid_is_critical(NULL, 0, 13));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_preferred_seed_case, setup, teardown),
                cmocka_unit_test_setup_teardown(test_preferred_must_include, setup, teardown),
                cmocka_unit_test_setup_teardown(test_preferred_skips_unhealthy, setup, teardown),
                cmocka_unit_test_setup_teardown(test_preferred_bad_requests, setup, teardown),
                cmocka_unit_test_setup_teardown(test_allocate_env_and_specs, setup, teardown),
                cmocka_unit_test_setup_teardown(test_allocate_index_and_cdi, setup, teardown),
                cmocka_unit_test_setup_teardown(test_allocate_refusals, setup, teardown),
                cmocka_unit_test_setup_teardown(test_health_xid_quiet_period, setup, teardown),
                cmocka_unit_test_setup_teardown(test_health_lost_needs_answers, setup, teardown),
                cmocka_unit_test_setup_teardown(test_health_xid_without_answer, setup, teardown),
                cmocka_unit_test_setup_teardown(test_change_notifications, setup, teardown),
                cmocka_unit_test_setup_teardown(test_list_devices, setup, teardown),
                cmocka_unit_test_setup_teardown(test_held_elsewhere, setup, teardown),
                cmocka_unit_test_setup_teardown(test_options, setup, teardown),
                cmocka_unit_test(test_xid_ignore_list),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
