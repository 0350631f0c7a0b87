/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the device plugin's MIG side (src/agent/migdev.c, the MIG parts of devices.c and plugin.c)
 * called directly with protobuf-c messages: resource names, MIG devices in the table and their health
 * following the parent, the strategies' resources (mixed per profile, single and a node that does not fit
 * it), Allocate's answer (parent node, control nodes, both capability nodes from mig-minors, MIG UUID or
 * <gpu>:<mig>, CDI names) and refusals, preferred allocation on one parent GPU, a GPU reserved for a MIG
 * layout change refused with its MIG devices.
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
#include <sys/stat.h>

#include "agent/devices.h"
#include "agent/migdev.h"
#include "agent/whole.h"
#include "agent/plugin.h"
#include "deviceplugin.pb-c.h"
#include "mig/mig.h"
#include "util/util.h"

/* GPUs 0 and 1 of the seed topology in MIG mode: GPU 0 two 1g.10gb (GI 11, 12) and a 3g.40gb (GI 1),
 * GPU 1 two 1g.10gb (GI 7, 8); the other GPUs without MIG. MIG devices are table 8..12 in that order. */
static void add_dev(struct mig_gpu *g, unsigned gpu, unsigned gi, const char *profile) {
        struct mig_device *d = &g->dev[g->n_devices];
        d->gpu = gpu;
        d->index = g->n_devices++;
        d->gi = gi;
        d->ci = 0;
        snprintf(d->profile, sizeof d->profile, "%s", profile);
        snprintf(d->uuid, sizeof d->uuid, "MIG-%u-%u-%s", gpu, gi, profile);
        d->sms = 14;
        d->memory_total = 10ULL << 30;
}

static void mig_fill(const struct topo *t, struct mig_node *m, bool all_on) {
        memset(m, 0, sizeof *m);
        m->n_gpus = t->n_gpus;
        for (unsigned g = 0; g < t->n_gpus; g++)
                m->gpu[g].mode = -1;
        m->gpu[0].mode = m->gpu[1].mode = 1;
        add_dev(&m->gpu[0], 0, 11, "1g.10gb");
        add_dev(&m->gpu[0], 0, 12, "1g.10gb");
        add_dev(&m->gpu[0], 0, 1, "3g.40gb");
        add_dev(&m->gpu[1], 1, 7, "1g.10gb");
        add_dev(&m->gpu[1], 1, 8, "1g.10gb");
        for (unsigned g = 2; all_on && g < t->n_gpus; g++) {
                m->gpu[g].mode = 1;
                add_dev(&m->gpu[g], g, 9, "1g.10gb");
        }
}

static const char MINORS[] = "config 1\nmonitor 2\n"
                             "gpu0/gi1/access 21\ngpu0/gi1/ci0/access 22\n"
                             "gpu0/gi11/access 31\ngpu0/gi11/ci0/access 32\n"
                             "gpu0/gi12/access 41\ngpu0/gi12/ci0/access 42\n"
                             "gpu1/gi7/access 51\ngpu1/gi7/ci0/access 52\n"
                             "bogus line\n";

static void make(const char *root, const char *rel) {
        test_touch(test_path(root, rel));
}

/* The fixture: the table with the MIG devices, the plugin with options o and strategy s, a dev root with
 * the GPUs' and control nodes, the capability nodes and mig-minors (GPU 1's GI 8 left out of both). */
static struct test_plugin *fixture(enum config_mig_strategy s, bool all_on, bool by_index, char *why, size_t why_len) {
        struct test_plugin *f = test_plugin_new("seed000-8gpu-pcie-2socket.topo", "migdev");
        const char *dirs[] = { "dev", "dev/nvidia-caps", "proc", "proc/driver", "proc/driver/nvidia-caps" };
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
                assert_int_equal(mkdir(test_path(f->tmp, dirs[i]), 0755), 0);
        const char *nodes[] = { "dev/nvidia0", "dev/nvidia1", "dev/nvidiactl", "dev/nvidia-uvm" };
        for (size_t i = 0; i < ELEMENTSOF(nodes); i++)
                make(f->tmp, nodes[i]);
        const unsigned caps[] = { 21, 22, 31, 32, 41, 42, 51, 52 };
        for (size_t i = 0; i < ELEMENTSOF(caps); i++) {
                char rel[64];
                snprintf(rel, sizeof rel, "dev/nvidia-caps/nvidia-cap%u", caps[i]);
                make(f->tmp, rel);
        }
        test_write_file(test_path(f->tmp, "proc/driver/nvidia-caps/mig-minors"), MINORS, strlen(MINORS), 0444);
        struct plugin_options o = { .resource = "nvidia.com/gpu",
                                    .list_envvar = true,
                                    .list_cdi = true,
                                    .ids_by_index = by_index,
                                    .cdi_kind = "gpuslice.io/gpu" };
        snprintf(o.dev_root, sizeof o.dev_root, "%s", f->tmp);
        test_plugin_init(f, &o);
        static struct mig_node m;
        mig_fill(&f->t, &m, all_on);
        int n = devices_add_mig(f->dev, &m);
        assert_int_equal(n, all_on ? 11 : 5);
        char w[256];
        assert_true(migdev_setup(f->p, s, why ? why : w, why ? why_len : sizeof w) >= 0);
        return f;
}

static int mixed_setup(void **state) {
        *state = fixture(CONFIG_MIG_MIXED, false, false, NULL, 0);
        return 0;
}

static int teardown(void **state) {
        test_plugin_free(*state);
        return 0;
}

/* The MIG resource of that name (its service). */
static struct plugin_service *svc_of(struct test_plugin *f, const char *resource) {
        for (unsigned k = 0; k < plugin_mig_count(f->p); k++)
                if (streq(plugin_mig_resource(f->p, k), resource))
                        return plugin_mig_service(f->p, k);
        fail_msg("no MIG resource %s", resource);
        return NULL;
}

static char *mid(struct test_plugin *f, unsigned i) {
        return (char *)test_device_id(f, i);
}

/* ---- tests ---- */

static void test_resource_name(void **state) {
        (void)state;
        char buf[64];
        assert_int_equal(migdev_resource_name("1g.10gb", buf, sizeof buf), 0);
        assert_string_equal(buf, "nvidia.com/mig-1g.10gb");
        assert_int_equal(migdev_resource_name("1g.10gb+me", buf, sizeof buf), 0);
        assert_string_equal(buf, "nvidia.com/mig-1g.10gb.me");
        assert_int_equal(migdev_resource_name("1c.3g.40gb", buf, sizeof buf), 0);
        assert_string_equal(buf, "nvidia.com/mig-1c.3g.40gb");
        assert_int_equal(migdev_resource_name("", buf, sizeof buf), -EINVAL);
        assert_int_equal(migdev_resource_name(NULL, buf, sizeof buf), -EINVAL);
        assert_int_equal(migdev_resource_name("1G/10gb", buf, sizeof buf), -EINVAL);
        assert_int_equal(migdev_resource_name("1g 10gb", buf, sizeof buf), -EINVAL);
        assert_int_equal(migdev_resource_name("1g.10gb", buf, 20), -ENAMETOOLONG);
}

static void test_table(void **state) {
        struct test_plugin *f = *state;
        struct devices *d = f->dev;
        assert_int_equal(devices_count(d), 13);
        assert_true(devices_info(d, 0)->mig_mode && devices_info(d, 1)->mig_mode);
        assert_false(devices_info(d, 2)->mig_mode);
        const struct device_info *x = devices_info(d, 10);
        assert_int_equal(x->kind, DEVICE_MIG);
        assert_int_equal(x->parent, 0);
        assert_int_equal(x->mig_index, 2);
        assert_int_equal(x->gi, 1);
        assert_string_equal(x->profile, "3g.40gb");
        assert_int_equal(x->minor, devices_info(d, 0)->minor);
        assert_int_equal(devices_find(d, "MIG-1-7-1g.10gb"), 11);
        assert_int_equal(devices_find_nvml(d, 1), 1); /* the GPU, never its MIG device */
}

static void test_health_follows_parent(void **state) {
        struct test_plugin *f = *state;
        assert_true(devices_fault(f->dev, 0, "xid 79"));
        devices_lock(f->dev);
        for (unsigned i = 8; i <= 10; i++) {
                assert_false(devices_healthy(f->dev, i));
                assert_string_equal(devices_reason(f->dev, i), "xid 79");
        }
        assert_true(devices_healthy(f->dev, 11) && devices_healthy(f->dev, 12) && devices_healthy(f->dev, 1));
        devices_unlock(f->dev);
        assert_true(devices_probe_ok(f->dev, 0, 1000, 0));
        assert_true(test_device_healthy(f, 8) && test_device_healthy(f, 10));
}

static void test_mixed_resources(void **state) {
        struct test_plugin *f = *state;
        assert_int_equal(plugin_mig_count(f->p), 2);
        assert_string_equal(plugin_mig_resource(f->p, 0), "nvidia.com/mig-1g.10gb");
        assert_string_equal(plugin_mig_resource(f->p, 1), "nvidia.com/mig-3g.40gb");
        const struct plugin_service *small = svc_of(f, "nvidia.com/mig-1g.10gb");
        const struct plugin_service whole = { .kind = PLUGIN_WHOLE };
        unsigned n_small = 0, n_whole = 0;
        for (unsigned i = 0; i < devices_count(f->dev); i++) {
                n_small += plugin_serves(f->p, small, i);
                n_whole += plugin_serves(f->p, &whole, i);
        }
        assert_int_equal(n_small, 4);
        assert_int_equal(n_whole, 6); /* GPUs 2..7: GPUs 0 and 1 are in MIG mode */
        assert_string_equal(plugin_device_resource(f->p, 10), "nvidia.com/mig-3g.40gb");
        assert_string_equal(plugin_device_resource(f->p, 0), "");
        assert_string_equal(plugin_device_resource(f->p, 2), "nvidia.com/gpu");
        /* ListAndWatch of the 1g.10gb resource: exactly its 4 MIG devices */
        uint8_t *buf = NULL;
        size_t len = 0;
        assert_int_equal(plugin_pack_devices_svc(f->p, small, &buf, &len, NULL), 0);
        V1beta1__ListAndWatchResponse *r = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
        assert_non_null(r);
        assert_int_equal(r->n_devices, 4);
        assert_string_equal(r->devices[0]->id, mid(f, 8));
        v1beta1__list_and_watch_response__free_unpacked(r, NULL);
        free(buf);
}

static void test_single_fits(void **state) {
        (void)state;
        char why[256];
        struct test_plugin *f = fixture(CONFIG_MIG_SINGLE, false, false, why, sizeof why);
        assert_non_null(strstr(why, "GPU 2"));
        assert_non_null(strstr(why, "not in MIG mode"));
        assert_int_equal(plugin_mig_count(f->p), 1);
        assert_string_equal(plugin_mig_resource(f->p, 0), "nvidia.com/gpu");
        for (unsigned i = 0; i < devices_count(f->dev); i++)
                assert_false(plugin_serves(f->p, plugin_mig_service(f->p, 0), i)); /* serves nothing */
        test_plugin_free(f);

        /* every GPU in MIG mode, but 3g.40gb beside 1g.10gb: does not fit either */
        f = fixture(CONFIG_MIG_SINGLE, true, false, why, sizeof why);
        assert_non_null(strstr(why, "more than one profile"));
        test_plugin_free(f);

        /* fits: the same table without the 3g.40gb */
        f = test_plugin_new("seed000-8gpu-pcie-2socket.topo", "migdev");
        struct plugin_options o = { .resource = "nvidia.com/gpu", .list_envvar = true };
        test_plugin_init(f, &o);
        static struct mig_node m;
        mig_fill(&f->t, &m, true);
        m.gpu[0].n_devices = 2;
        assert_int_equal(devices_add_mig(f->dev, &m), 10);
        char profile[32];
        assert_true(migdev_single_fits(f->dev, profile, sizeof profile, why, sizeof why));
        assert_string_equal(profile, "1g.10gb");
        assert_int_equal(migdev_setup(f->p, CONFIG_MIG_SINGLE, why, sizeof why), 1);
        assert_string_equal(why, "");
        unsigned n = 0;
        for (unsigned i = 0; i < devices_count(f->dev); i++)
                n += plugin_serves(f->p, plugin_mig_service(f->p, 0), i);
        assert_int_equal(n, 10);
        test_plugin_free(f);
}

static void test_allocate_contents(void **state) {
        struct test_plugin *f = *state;
        struct plugin_service *small = svc_of(f, "nvidia.com/mig-1g.10gb");
        char *ids[] = { mid(f, 9), mid(f, 8) }; /* GI 12 and GI 11 of GPU 0 */
        V1beta1__AllocateResponse *r = NULL;
        struct gs_error st;
        assert_int_equal(test_rpc_allocate(migdev_allocate, small, ids, 2, &r, &st), RPC_OK);
        V1beta1__ContainerAllocateResponse *c = r->container_responses[0];
        assert_int_equal(c->n_envs, 1);
        assert_string_equal(c->envs[0]->key, "NVIDIA_VISIBLE_DEVICES");
        char want[256];
        snprintf(want, sizeof want, "%s,%s", mid(f, 8), mid(f, 9));
        assert_string_equal(c->envs[0]->value, want);
        const char *paths[] = { "/dev/nvidia0",
                                "/dev/nvidiactl",
                                "/dev/nvidia-uvm",
                                "/dev/nvidia-caps/nvidia-cap31",
                                "/dev/nvidia-caps/nvidia-cap32",
                                "/dev/nvidia-caps/nvidia-cap41",
                                "/dev/nvidia-caps/nvidia-cap42" };
        assert_int_equal(c->n_devices, ELEMENTSOF(paths)); /* the parent's node once */
        for (size_t k = 0; k < ELEMENTSOF(paths); k++) {
                assert_string_equal(c->devices[k]->container_path, paths[k]);
                assert_string_equal(c->devices[k]->host_path, paths[k]);
        }
        assert_int_equal(c->n_cdi_devices, 2);
        snprintf(want, sizeof want, "gpuslice.io/gpu=%s", mid(f, 8));
        assert_string_equal(c->cdi_devices[0]->name, want);
        v1beta1__allocate_response__free_unpacked(r, NULL);
        assert_non_null(state_find(plugin_record(f->p), "nvidia.com/mig-1g.10gb", mid(f, 8)));
        struct plugin_usage u;
        devices_lock(f->dev);
        plugin_usage(f->p, &u);
        devices_unlock(f->dev);
        assert_true(u.whole & (UINT64_C(1) << 8));
}

static void test_allocate_refusals(void **state) {
        struct test_plugin *f = *state;
        struct plugin_service *small = svc_of(f, "nvidia.com/mig-1g.10gb");
        V1beta1__AllocateResponse *r = NULL;
        struct gs_error st;
        char *other[] = { mid(f, 10) }; /* the 3g.40gb */
        assert_int_equal(test_rpc_allocate(migdev_allocate, small, other, 1, &r, &st), RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "unknown device ID"));
        char *gpu[] = { mid(f, 0) }; /* the parent GPU is no MIG device */
        assert_int_equal(test_rpc_allocate(migdev_allocate, small, gpu, 1, &r, &st), RPC_INVALID_ARGUMENT);
        char *twice[] = { mid(f, 8), mid(f, 8) };
        assert_int_equal(test_rpc_allocate(migdev_allocate, small, twice, 2, &r, &st), RPC_INVALID_ARGUMENT);
        /* GPU 1's GI 8 has no capability in mig-minors: a container could not use it */
        char *nocaps[] = { mid(f, 12) };
        assert_int_equal(test_rpc_allocate(migdev_allocate, small, nocaps, 1, &r, &st), RPC_FAILED_PRECONDITION);
        assert_non_null(strstr(st.message, "gpu1/gi8/ci0"));
        /* the parent's fault: refused, with its reason */
        (void)devices_fault(f->dev, 0, "xid 48");
        char *sick[] = { mid(f, 8) };
        assert_int_equal(test_rpc_allocate(migdev_allocate, small, sick, 1, &r, &st), RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "xid 48"));
        /* another driver's claim */
        assert_true(devices_probe_ok(f->dev, 0, 1000, 0));
        devices_lock(f->dev);
        (void)plugin_set_held_elsewhere(f->p, UINT64_C(1) << 11);
        devices_unlock(f->dev);
        char *held[] = { mid(f, 11) };
        assert_int_equal(test_rpc_allocate(migdev_allocate, small, held, 1, &r, &st), RPC_INVALID_ARGUMENT);
        /* a claim of the whole GPU holds its MIG devices too */
        devices_lock(f->dev);
        (void)plugin_set_held_elsewhere(f->p, UINT64_C(1) << 0);
        devices_unlock(f->dev);
        char *child[] = { mid(f, 8) };
        assert_int_equal(test_rpc_allocate(migdev_allocate, small, child, 1, &r, &st), RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "another driver"));
        /* the whole resource refuses a GPU in MIG mode */
        assert_int_equal(test_rpc_allocate(whole_allocate, f->p, gpu, 1, &r, &st), RPC_INVALID_ARGUMENT);
}

static void test_allocate_by_index(void **state) {
        (void)state;
        struct test_plugin *f = fixture(CONFIG_MIG_MIXED, false, true, NULL, 0);
        char *ids[] = { mid(f, 10) };
        V1beta1__AllocateResponse *r = NULL;
        struct gs_error st;
        assert_int_equal(test_rpc_allocate(migdev_allocate, svc_of(f, "nvidia.com/mig-3g.40gb"), ids, 1, &r, &st),
                         RPC_OK);
        assert_string_equal(r->container_responses[0]->envs[0]->value, "0:2");
        assert_string_equal(r->container_responses[0]->cdi_devices[0]->name, "gpuslice.io/gpu=0:2");
        v1beta1__allocate_response__free_unpacked(r, NULL);
        test_plugin_free(f);
}

static void test_preferred_one_parent(void **state) {
        struct test_plugin *f = *state;
        struct plugin_service *small = svc_of(f, "nvidia.com/mig-1g.10gb");
        V1beta1__PreferredAllocationResponse *r = NULL;
        struct gs_error st;
        /* GPU 0's 8 and GPU 1's 11, 12 available: 2 asked → both on GPU 1 */
        char *avail[] = { mid(f, 8), mid(f, 11), mid(f, 12) };
        assert_int_equal(test_rpc_preferred(migdev_get_preferred, small, avail, 3, NULL, 0, 2, &r, &st), RPC_OK);
        assert_int_equal(r->container_responses[0]->n_deviceids, 2);
        assert_string_equal(r->container_responses[0]->deviceids[0], mid(f, 11));
        assert_string_equal(r->container_responses[0]->deviceids[1], mid(f, 12));
        v1beta1__preferred_allocation_response__free_unpacked(r, NULL);
        /* must-include pulls the request to its parent */
        char *must[] = { mid(f, 9) };
        char *all[] = { mid(f, 8), mid(f, 9), mid(f, 11), mid(f, 12) };
        assert_int_equal(test_rpc_preferred(migdev_get_preferred, small, all, 4, must, 1, 2, &r, &st), RPC_OK);
        assert_string_equal(r->container_responses[0]->deviceids[0], mid(f, 8));
        assert_string_equal(r->container_responses[0]->deviceids[1], mid(f, 9));
        v1beta1__preferred_allocation_response__free_unpacked(r, NULL);
        /* 3 asked, 2 per parent: split across parents */
        assert_int_equal(test_rpc_preferred(migdev_get_preferred, small, all, 4, NULL, 0, 3, &r, &st), RPC_OK);
        assert_int_equal(r->container_responses[0]->n_deviceids, 3);
        v1beta1__preferred_allocation_response__free_unpacked(r, NULL);
        /* 5 asked of 4: exhausted; an unhealthy parent's devices are never offered */
        assert_int_equal(test_rpc_preferred(migdev_get_preferred, small, all, 4, NULL, 0, 5, &r, &st),
                         RPC_RESOURCE_EXHAUSTED);
        (void)devices_fault(f->dev, 1, "GPU_IS_LOST");
        assert_int_equal(test_rpc_preferred(migdev_get_preferred, small, all, 4, NULL, 0, 2, &r, &st), RPC_OK);
        assert_string_equal(r->container_responses[0]->deviceids[0], mid(f, 8));
        assert_string_equal(r->container_responses[0]->deviceids[1], mid(f, 9));
        v1beta1__preferred_allocation_response__free_unpacked(r, NULL);
}

/* A GPU whose MIG layout is about to change (devices_reserve, miglayout.c): neither it nor its MIG devices are
 * handed out — Allocate, preferred allocation, the whole resource — a health probe does not clear that, and
 * devices_release does. */
static void test_reserved_gpu_refused(void **state) {
        struct test_plugin *f = *state;
        struct plugin_service *small = svc_of(f, "nvidia.com/mig-1g.10gb");
        V1beta1__AllocateResponse *r = NULL;
        V1beta1__PreferredAllocationResponse *pr = NULL;
        struct gs_error st;
        devices_lock(f->dev);
        devices_reserve(f->dev, 0, "its MIG layout is being changed");
        devices_reserve(f->dev, 2, "its MIG layout is being changed"); /* a GPU with MIG off */
        devices_unlock(f->dev);
        assert_false(devices_probe_ok(f->dev, 0, 1000, 0)); /* healthy all along: nothing turns */
        char *child[] = { mid(f, 8) };
        assert_int_equal(test_rpc_allocate(migdev_allocate, small, child, 1, &r, &st), RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "MIG layout is being changed"));
        char *whole[] = { mid(f, 2) };
        assert_int_equal(test_rpc_allocate(whole_allocate, f->p, whole, 1, &r, &st), RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "MIG layout is being changed"));
        char *avail[] = { mid(f, 8), mid(f, 9), mid(f, 11) };
        assert_int_equal(test_rpc_preferred(migdev_get_preferred, small, avail, 3, NULL, 0, 2, &pr, &st),
                         RPC_RESOURCE_EXHAUSTED);
        assert_true(test_device_healthy(f, 11) && test_device_healthy(f, 1));
        devices_lock(f->dev);
        devices_release(f->dev, 0);
        devices_release(f->dev, 2);
        devices_unlock(f->dev);
        assert_int_equal(test_rpc_allocate(migdev_allocate, small, child, 1, &r, &st), RPC_OK);
        v1beta1__allocate_response__free_unpacked(r, NULL);
        assert_int_equal(test_rpc_allocate(whole_allocate, f->p, whole, 1, &r, &st), RPC_OK);
        v1beta1__allocate_response__free_unpacked(r, NULL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_resource_name),
                cmocka_unit_test_setup_teardown(test_table, mixed_setup, teardown),
                cmocka_unit_test_setup_teardown(test_health_follows_parent, mixed_setup, teardown),
                cmocka_unit_test_setup_teardown(test_mixed_resources, mixed_setup, teardown),
                cmocka_unit_test(test_single_fits),
                cmocka_unit_test_setup_teardown(test_allocate_contents, mixed_setup, teardown),
                cmocka_unit_test_setup_teardown(test_allocate_refusals, mixed_setup, teardown),
                cmocka_unit_test(test_allocate_by_index),
                cmocka_unit_test_setup_teardown(test_preferred_one_parent, mixed_setup, teardown),
                cmocka_unit_test_setup_teardown(test_reserved_gpu_refused, mixed_setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
