/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test-dra — the DRA driver's pure parts and its engine without servers (src/dra): names, versions,
 * quantities, the slices of reference topologies and of simulated MIG nodes against the API's limits, the
 * claim, parameter and journal decoders with malformed input, and prepare/unprepare/recovery in a private
 * directory (MIG devices on the simulator's H100 node).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "dra/claim.h"
#include "dra/dra-internal.h"
#include "dra/journal.h"
#include "dra/slices.h"
#include "helpers.h"
#include "interposer/limits.h"
#include "nvml/nvml.h"
#include "topo/topo.h"
#include "util/util.h"

#define DRV "gpu.gpuslice.io"
#define SIM_NVML GPUSLICE_BUILD_DIR "/sim/libnvidia-ml.so.1"
#define SIM_CLI GPUSLICE_BUILD_DIR "/sim/gpuslice-sim"
#define MIG_DATA GPUSLICE_SOURCE_DIR "/tests/data/mig/"
#define UID1 "4e2b1f8c-6a7d-4b0e-9f31-2c5d8e7a9b10"
#define UID2 "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b"

/* ---- names, versions, quantities ---- */

static void test_device_names(void **state) {
        (void)state;
        char buf[64];
        struct dra_device_ref ref = { .kind = DRA_DEVICE_SHARED, .index = 7 }, got;
        assert_int_equal(dra_device_name(&ref, buf, sizeof buf), 0);
        assert_string_equal(buf, "gpu-7-shared");
        assert_int_equal(dra_device_parse("gpu-7-shared", &got), 0);
        assert_true(got.index == 7 && got.kind == DRA_DEVICE_SHARED);
        assert_int_equal(dra_device_parse("gpu-0", &got), 0);
        assert_true(got.index == 0 && got.kind == DRA_DEVICE_GPU);
        ref = (struct dra_device_ref){ .kind = DRA_DEVICE_MIG, .index = 3, .gi = 13, .ci = 0 };
        assert_int_equal(dra_device_name(&ref, buf, sizeof buf), 0);
        assert_string_equal(buf, "gpu-3-mig-13-0");
        assert_int_equal(dra_device_parse(buf, &got), 0);
        assert_true(got.kind == DRA_DEVICE_MIG && got.index == 3 && got.gi == 13 && got.ci == 0);
        static const char *const bad[] = { "gpu-07",          "gpu--1",         "gpu-",
                                           "gpu-1-sharedx",   "gpu-1shared",    "GPU-1",
                                           "gpu-1234567",     "mig-1",          "",
                                           "gpu-1-",          "gpu-1-mig-",     "gpu-1-mig-1",
                                           "gpu-1-mig-1-",    "gpu-1-mig-01-0", "gpu-1-mig-1-0x",
                                           "gpu-1-mig-123-0", "gpu-1-mig--1-0" };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
                assert_int_equal(dra_device_parse(bad[i], &got), -EINVAL);
        ref = (struct dra_device_ref){ .kind = DRA_DEVICE_GPU, .index = 1 };
        assert_int_equal(dra_device_name(&ref, buf, 5), -ENAMETOOLONG);
        assert_true(dra_dns_label_valid("gpu-0-shared"));
        assert_false(dra_dns_label_valid("gpu_0") || dra_dns_label_valid("-a") || dra_dns_label_valid("A"));
        assert_true(dra_dns_subdomain_valid("gpu.gpuslice.io") && dra_dns_subdomain_valid("node-1.example"));
        assert_false(dra_dns_subdomain_valid("a..b") || dra_dns_subdomain_valid("a.-b") || dra_dns_subdomain_valid(""));
        assert_true(dra_qualified_name_valid("productName") && dra_qualified_name_valid(DRA_PCIE_ROOT_ATTR));
        assert_false(dra_qualified_name_valid("1abc") || dra_qualified_name_valid("/x") ||
                     dra_qualified_name_valid("a.io/") || dra_qualified_name_valid("a/b/c") ||
                     dra_qualified_name_valid("thisidentifieriswaytoolongforthek8sapi"));
}

static void test_versions(void **state) {
        (void)state;
        char v[64];
        assert_int_equal(dra_semver_from_driver("535.104.05", v, sizeof v), 0);
        assert_string_equal(v, "535.104.5");
        assert_int_equal(dra_semver_from_driver("570.86", v, sizeof v), 0);
        assert_string_equal(v, "570.86.0");
        assert_int_equal(dra_semver_from_driver("550", v, sizeof v), 0);
        assert_string_equal(v, "550.0.0");
        static const char *const bad[] = { "", "535.", ".1", "1.2.3.4", "535.104.05-rc1", "abc", "1..2" };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
                assert_int_equal(dra_semver_from_driver(bad[i], v, sizeof v), -EINVAL);
        static const char *const good[] = { "1.2.3", "0.0.0", "12.4.0-rc.1+build.5", "1.0.0-alpha-1" };
        for (size_t i = 0; i < sizeof good / sizeof *good; i++)
                assert_true(dra_semver_valid(good[i]));
        static const char *const nots[] = { "1.2", "01.2.3", "1.2.3-01", "1.2.3-", "1.2.3+", "v1.2.3", "1.2.3-a..b" };
        for (size_t i = 0; i < sizeof nots / sizeof *nots; i++)
                assert_false(dra_semver_valid(nots[i]));
        assert_int_equal(dra_pci_bus_id("00000000:3B:00.0", v, sizeof v), 0);
        assert_string_equal(v, "0000:3b:00.0");
        assert_int_equal(dra_pci_bus_id("0001:1a:1f.7", v, sizeof v), 0);
        assert_string_equal(v, "0001:1a:1f.7");
        assert_int_equal(dra_pci_bus_id("00010000:3B:00.0", v, sizeof v), -EINVAL);
        assert_int_equal(dra_pci_bus_id("3B:00.0", v, sizeof v), -EINVAL);
        assert_int_equal(dra_pci_bus_id("0000:3G:00.0", v, sizeof v), -EINVAL);
}

static void test_quantities(void **state) {
        (void)state;
        static const struct {
                const char *s;
                uint64_t v;
        } good[] = { { "80Gi", 85899345920ULL },
                     { "1073741824", 1073741824ULL },
                     { "1.5Gi", 1610612736ULL },
                     { "100m", 1 },
                     { "1500m", 2 },
                     { "0", 0 },
                     { "1e3", 1000 },
                     { "1E-3", 1 },
                     { "2k", 2000 },
                     { "+5", 5 },
                     { "0.5", 1 },
                     { "1G", 1000000000ULL },
                     { "9223372036854775807", INT64_MAX } };
        for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
                uint64_t v = 7;
                assert_int_equal(dra_quantity_parse(good[i].s, &v), 0);
                assert_true(v == good[i].v);
        }
        static const char *const bad[] = { "", "Gi", "1.2.3", "1Gb", "abc", "1 Gi", "1e", "e3", "1e1234" };
        uint64_t v;
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
                assert_int_equal(dra_quantity_parse(bad[i], &v), -EINVAL);
        assert_int_equal(dra_quantity_parse("-1", &v), -ERANGE);
        assert_int_equal(dra_quantity_parse("9223372036854775808", &v), -ERANGE);
        assert_int_equal(dra_quantity_parse("10Ei", &v), -ERANGE);
}

/* ---- slices ---- */

static json_t *build(const char *topo, bool sharing, struct topo *t) {
        test_load_topo(topo, t);
        struct dra_slice_input in = {
                .t = t, .driver = DRV, .node = "node-a", .sharing = sharing, .memory_unit = 256u << 20, .generation = 3
        };
        for (unsigned g = 0; g < t->n_gpus; g++)
                in.offered[g] = true;
        strscpy(in.pcie_root[0], "pci0000:00", sizeof in.pcie_root[0]);
        json_t *s = NULL;
        assert_int_equal(dra_slices_build(&in, &s), 0);
        return s;
}

/* Every slice within the API's limits; the pool's devices and counters counted. */
static void check_pool(json_t *slices, unsigned *ret_devices, unsigned *ret_sets) {
        size_t i, k;
        json_t *s, *d;
        *ret_devices = *ret_sets = 0;
        json_array_foreach(slices, i, s) {
                json_t *spec = json_object_get(s, "spec");
                json_t *devs = json_object_get(spec, "devices"), *sets = json_object_get(spec, "sharedCounters");
                assert_false(devs && sets);
                assert_true(dra_dns_subdomain_valid(
                        json_string_value(json_object_get(json_object_get(s, "metadata"), "name"))));
                assert_int_equal(
                        json_integer_value(json_object_get(json_object_get(spec, "pool"), "resourceSliceCount")),
                        json_array_size(slices));
                assert_int_equal(json_integer_value(json_object_get(json_object_get(spec, "pool"), "generation")), 3);
                bool counters = false;
                json_array_foreach(devs, k, d) {
                        counters |= json_object_get(d, "consumesCounters") != NULL;
                        assert_true(dra_dns_label_valid(json_string_value(json_object_get(d, "name"))));
                        assert_true(json_object_size(json_object_get(d, "attributes")) +
                                            json_object_size(json_object_get(d, "capacity")) <=
                                    DRA_MAX_ATTRS_AND_CAPS);
                        const char *key;
                        json_t *a;
                        json_object_foreach(json_object_get(d, "attributes"), key, a) {
                                assert_true(dra_qualified_name_valid(key));
                                assert_int_equal(json_object_size(a), 1);
                                const char *v = json_string_value(json_object_get(a, "version"));
                                assert_true(!v || dra_semver_valid(v));
                        }
                }
                assert_true(json_array_size(devs) <=
                            (counters ? DRA_MAX_DEVICES_WITH_COUNTERS : DRA_MAX_DEVICES_PER_SLICE));
                assert_true(json_array_size(sets) <= DRA_MAX_COUNTER_SETS_PER_SLICE);
                json_array_foreach(sets, k, d) {
                        const char *key;
                        json_t *c;
                        assert_true(dra_dns_label_valid(json_string_value(json_object_get(d, "name"))));
                        assert_true(json_object_size(json_object_get(d, "counters")) <= 32);
                        json_object_foreach(json_object_get(d, "counters"), key, c)
                                assert_true(dra_dns_label_valid(key));
                }
                *ret_devices += (unsigned)json_array_size(devs);
                *ret_sets += (unsigned)json_array_size(sets);
        }
}

static void test_slices_reference(void **state) {
        (void)state;
        struct topo *t = malloc(sizeof *t);
        unsigned devs, sets;
        json_t *s = build("dgx-a100-nvswitch.topo", true, t);
        check_pool(s, &devs, &sets);
        assert_int_equal(devs, 2 * t->n_gpus);
        assert_int_equal(sets, t->n_gpus);
        json_t *d0 = json_array_get(json_object_get(json_object_get(json_array_get(s, 0), "spec"), "devices"), 0);
        json_t *a = json_object_get(d0, "attributes");
        assert_string_equal(json_string_value(json_object_get(json_object_get(a, "type"), "string")), "gpu");
        assert_string_equal(json_string_value(json_object_get(json_object_get(a, DRA_PCIE_ROOT_ATTR), "string")),
                            "pci0000:00");
        assert_int_equal(json_integer_value(json_object_get(json_object_get(a, "nvlinkIsland"), "int")), 0);
        json_decref(s);
        s = build("seed000-8gpu-pcie-2socket.topo", false, t);
        check_pool(s, &devs, &sets);
        assert_true(devs == t->n_gpus && sets == 0 && json_array_size(s) == 1);
        json_decref(s);
        free(t);
}

/* A reason as a taint value: a label value or nothing. */
static void test_taint_value(void **state) {
        (void)state;
        char v[DRA_MAX_LABEL + 1], small[4];
        dra_taint_value("Xid 79 (fallen off the bus)", v, sizeof v);
        assert_string_equal(v, "Xid-79--fallen-off-the-bus");
        dra_taint_value("  -lost.", v, sizeof v);
        assert_string_equal(v, "lost");
        dra_taint_value("", v, sizeof v);
        assert_string_equal(v, "");
        dra_taint_value(NULL, v, sizeof v);
        assert_string_equal(v, "");
        dra_taint_value("ab-cd", small, sizeof small);
        assert_string_equal(small, "ab");
        char longer[200];
        memset(longer, 'a', sizeof longer - 1);
        longer[sizeof longer - 1] = '\0';
        dra_taint_value(longer, v, sizeof v);
        assert_int_equal(strlen(v), DRA_MAX_LABEL);
}

/* 64 GPUs with shared devices: 128 devices, two slices of 64, eight counter slices of eight sets. */
static void test_slices_many(void **state) {
        (void)state;
        struct topo *t = calloc(1, sizeof *t);
        topo_init(t);
        t->n_gpus = TOPO_MAX_GPUS;
        strscpy(t->driver_version, "550.54.15", sizeof t->driver_version);
        struct dra_slice_input in = { .t = t, .driver = DRV, .node = "n", .sharing = true, .memory_unit = 1u << 30 };
        for (unsigned g = 0; g < t->n_gpus; g++) {
                t->gpu[g].index = (int)g;
                snprintf(t->gpu[g].uuid, sizeof t->gpu[g].uuid, "GPU-%u", g);
                t->gpu[g].memory_total = 80ULL << 30;
                in.offered[g] = g != 5;
        }
        in.generation = 3;
        json_t *s = NULL;
        assert_int_equal(dra_slices_build(&in, &s), 0);
        unsigned devs, sets;
        check_pool(s, &devs, &sets);
        assert_int_equal(devs, 2 * 63);
        assert_int_equal(sets, 63);
        assert_int_equal(json_array_size(s), 2 + 8);
        json_decref(s);
        in.node = "Not_A_Node";
        assert_int_equal(dra_slices_build(&in, &s), -EINVAL);
        in.node = "n";
        in.driver = "a-driver-name-that-is-far-too-long-to-be-the-name-of-any-dra-driver.example.com";
        assert_int_equal(dra_slices_build(&in, &s), -EINVAL);
        free(t);
}

/* ---- MIG nodes of the simulator ---- */

/* A simulated node: its topology and MIG side read through the simulated NVML as the agent reads them
 * (src/agent/dra-link.c: nvml_mig_inventory, nvml_mig_caps). */
struct sim_node {
        char *dir;
        struct nvml *nvml;
        struct topo t;
        struct dra_mig *mig;
};

static int sim_mig_read(struct nvml *n, const struct topo *t, struct dra_mig *m) {
        memset(m, 0, sizeof *m);
        int r = nvml_mig_inventory(n, t, &m->node, NULL);
        struct mig_caps *caps = malloc(sizeof *caps);
        for (unsigned g = 0; r == 0 && g < m->node.n_gpus; g++)
                if (m->node.gpu[g].mode == 1 && nvml_mig_caps(n, (unsigned)t->gpu[g].index, caps, NULL) == 0) {
                        m->memory_slices[g] = mig_caps_memory_slices(caps);
                        m->compute_slices[g] = mig_caps_compute_slices(caps);
                        m->caps[g] = *caps;
                }
        free(caps);
        return r;
}

static void sim_open(struct sim_node *s, const char *node_file) {
        char st[4200];
        s->dir = test_tmpdir_new("dra-mig");
        snprintf(st, sizeof st, "%s/sim", s->dir);
        setenv("GPUSLICE_SIM_NODE", node_file, 1);
        setenv("GPUSLICE_SIM_STATE", st, 1);
        assert_int_equal(nvml_open(SIM_NVML, &s->nvml, NULL), 0);
        assert_int_equal(nvml_inventory(s->nvml, &s->t, NULL), 0);
        s->mig = calloc(1, sizeof *s->mig);
        assert_int_equal(sim_mig_read(s->nvml, &s->t, s->mig), 0);
}

static void sim_close(struct sim_node *s) {
        s->nvml = nvml_close(s->nvml);
        test_rmtree(s->dir);
        free(s->dir);
        free(s->mig);
}

static json_t *build_mig(const struct sim_node *s, bool sharing, bool dropped) {
        struct dra_slice_input in = { .t = &s->t,
                                      .driver = DRV,
                                      .node = "node-a",
                                      .sharing = sharing,
                                      .memory_unit = 256u << 20,
                                      .generation = 3,
                                      .mig = s->mig,
                                      .counters_dropped = dropped };
        for (unsigned g = 0; g < s->t.n_gpus; g++)
                in.offered[g] = true;
        json_t *out = NULL;
        assert_int_equal(dra_slices_build(&in, &out), 0);
        return out;
}

/* The entry named `name` of any slice's spec.<list> ("devices" or "sharedCounters"), or NULL. */
static json_t *find_named(json_t *slices, const char *list, const char *name) {
        size_t i, k;
        json_t *sl, *x;
        json_array_foreach(slices, i, sl) {
                json_array_foreach(json_object_get(json_object_get(sl, "spec"), list), k, x) {
                        if (streq(json_string_value(json_object_get(x, "name")), name))
                                return x;
                }
        }
        return NULL;
}

static json_t *find_device(json_t *slices, const char *name) {
        return find_named(slices, "devices", name);
}

static json_t *find_set(json_t *slices, const char *name) {
        return json_object_get(find_named(slices, "sharedCounters", name), "counters");
}

static const char *attr_s(json_t *dev, const char *name) {
        return json_string_value(json_object_get(json_object_get(json_object_get(dev, "attributes"), name), "string"));
}

static long long counter(json_t *counters, const char *name) {
        uint64_t v = 0;
        const char *q = json_string_value(json_object_get(json_object_get(counters, name), "value"));
        return q && dra_quantity_parse(q, &v) == 0 ? (long long)v : -1;
}

/* A100-80GB, GPU 0 with all-balanced (2 x 1g.10gb, 2g.20gb, 3g.40gb), GPU 1 MIG off: one device per MIG
 * device with its attributes, the GPU's counter set with its 8 memory slices and 7 compute slices, no shared
 * device on the MIG GPU, and the consumptions excluding a MIG device and its whole GPU. */
static void test_slices_mig_a100(void **state) {
        (void)state;
        struct sim_node s;
        unsigned devs, sets;
        sim_open(&s, MIG_DATA "a100-80gb-2gpu.node");
        const struct mig_gpu *mg = &s.mig->node.gpu[0];
        assert_int_equal(mg->n_devices, 4);
        assert_true(s.mig->memory_slices[0] == 8 && s.mig->compute_slices[0] == 7);
        json_t *sl = build_mig(&s, true, false);
        check_pool(sl, &devs, &sets);
        /* two whole GPUs, GPU 1's shared device, four MIG devices and their four shared twins */
        assert_int_equal(devs, 2 + 1 + 4 + 4);
        assert_int_equal(sets, 2);
        assert_null(find_device(sl, "gpu-0-shared"));
        assert_non_null(find_device(sl, "gpu-1-shared"));
        json_t *set0 = find_set(sl, "gpu-0");
        assert_int_equal(json_object_size(set0), 1 + 8 + 1 + 4); /* + mig-<gi>-<ci> per shared MIG device */
        assert_int_equal(counter(set0, "memory-slice-7"), 1);
        assert_int_equal(counter(set0, "compute-slices"), 7);
        assert_int_equal(json_object_size(find_set(sl, "gpu-1")), 1); /* memory only */
        json_t *whole = json_object_get(
                json_array_get(json_object_get(find_device(sl, "gpu-0"), "consumesCounters"), 0), "counters");
        assert_true(counter(whole, "memory-slice-0") == 1 && counter(whole, "compute-slices") == 7);
        for (unsigned k = 0; k < mg->n_devices; k++) {
                const struct mig_device *md = &mg->dev[k];
                char name[64];
                struct dra_device_ref ref = { .kind = DRA_DEVICE_MIG, .index = 0, .gi = md->gi, .ci = md->ci };
                assert_int_equal(dra_device_name(&ref, name, sizeof name), 0);
                json_t *d = find_device(sl, name);
                assert_non_null(d);
                assert_string_equal(attr_s(d, "type"), "mig");
                assert_string_equal(attr_s(d, "uuid"), md->uuid);
                assert_true(startswith(attr_s(d, "uuid"), "MIG-"));
                assert_string_equal(attr_s(d, "profile"), md->profile);
                assert_string_equal(attr_s(d, "parentUUID"), s.t.gpu[0].uuid);
                assert_string_equal(attr_s(d, "productName"), s.t.gpu[0].name);
                assert_non_null(attr_s(d, DRA_PCI_BUS_ID_ATTR));
                json_t *a = json_object_get(d, "attributes");
                assert_int_equal(json_integer_value(json_object_get(json_object_get(a, "parentIndex"), "int")), 0);
                assert_int_equal(json_integer_value(json_object_get(json_object_get(a, "nvlinkIsland"), "int")), 0);
                assert_null(json_object_get(a, "index"));
                assert_int_equal(counter(json_object_get(d, "capacity"), "memory"), (long long)md->memory_total);
                json_t *c = json_object_get(json_array_get(json_object_get(d, "consumesCounters"), 0), "counters");
                assert_int_equal(counter(c, "compute-slices"), md->ci_slices);
                char mc[32];
                snprintf(mc, sizeof mc, "mig-%u-%u", md->gi, md->ci);
                assert_int_equal(counter(c, mc), (long long)md->memory_total); /* all of its twin's counter */
                assert_int_equal(counter(set0, mc), (long long)md->memory_total);
                /* its shared twin: the MIG device's attributes, consumable memory and cores, one of the counter */
                ref.kind = DRA_DEVICE_MIG_SHARED;
                assert_int_equal(dra_device_name(&ref, name, sizeof name), 0);
                json_t *sd = find_device(sl, name);
                assert_non_null(sd);
                assert_string_equal(attr_s(sd, "type"), "mig-shared");
                assert_string_equal(attr_s(sd, "uuid"), md->uuid);
                assert_true(json_is_true(json_object_get(sd, "allowMultipleAllocations")));
                json_t *scap = json_object_get(sd, "capacity");
                assert_int_equal(counter(scap, "memory"), (long long)md->memory_total);
                assert_int_equal(counter(scap, "cores"), 100);
                json_t *sc = json_object_get(json_array_get(json_object_get(sd, "consumesCounters"), 0), "counters");
                assert_int_equal(json_object_size(sc), 1);
                assert_int_equal(counter(sc, mc), 1);
                struct dra_device_ref back;
                assert_int_equal(dra_device_parse(name, &back), 0);
                assert_true(back.kind == DRA_DEVICE_MIG_SHARED && back.gi == md->gi && back.ci == md->ci);
                for (unsigned i = 0; i < 8; i++) {
                        char cn[32];
                        snprintf(cn, sizeof cn, "memory-slice-%u", i);
                        bool in = i >= md->placement.start && i < md->placement.start + md->placement.size;
                        assert_int_equal(counter(c, cn), in ? 1 : -1);
                }
        }
        /* the scheduler's arithmetic: all MIG devices together fit, the whole GPU with any of them does not */
        struct dra_slice_input in = { .t = &s.t, .mig = s.mig };
        struct dra_counters cap, sum = { 0 }, c;
        dra_gpu_counters(&in, 0, &cap);
        for (unsigned k = 0; k < mg->n_devices; k++) {
                struct dra_device_ref ref = { .kind = DRA_DEVICE_MIG, .gi = mg->dev[k].gi, .ci = mg->dev[k].ci };
                assert_int_equal(dra_device_consumption(&in, 0, &ref, &c), 0);
                dra_counters_add(&sum, &c);
                struct dra_counters both;
                struct dra_device_ref w = { .kind = DRA_DEVICE_GPU };
                assert_int_equal(dra_device_consumption(&in, 0, &w, &both), 0);
                dra_counters_add(&both, &c);
                assert_false(dra_counters_fit(&both, &cap));
        }
        assert_true(dra_counters_fit(&sum, &cap));
        struct dra_device_ref gone = { .kind = DRA_DEVICE_MIG, .gi = 14, .ci = 0 };
        assert_int_equal(dra_device_consumption(&in, 0, &gone, &c), -ENODEV);
        /* with shares: many shares of one MIG device fit, with other MIG devices too; not with the MIG device
         * itself, nor with the whole GPU */
        in.sharing = true;
        in.memory_unit = 256u << 20;
        dra_gpu_counters(&in, 0, &cap);
        const struct mig_device *m0 = &mg->dev[0];
        struct dra_device_ref sh = { .kind = DRA_DEVICE_MIG_SHARED, .gi = m0->gi, .ci = m0->ci };
        struct dra_device_ref mine = { .kind = DRA_DEVICE_MIG, .gi = m0->gi, .ci = m0->ci };
        struct dra_device_ref other = { .kind = DRA_DEVICE_MIG, .gi = mg->dev[1].gi, .ci = mg->dev[1].ci };
        struct dra_device_ref w = { .kind = DRA_DEVICE_GPU };
        struct dra_counters shares = { 0 }, x;
        for (int i = 0; i < 3; i++) {
                assert_int_equal(dra_device_consumption(&in, 0, &sh, &c), 0);
                dra_counters_add(&shares, &c);
        }
        assert_int_equal(dra_device_consumption(&in, 0, &other, &c), 0);
        dra_counters_add(&shares, &c);
        assert_true(dra_counters_fit(&shares, &cap));
        x = shares;
        assert_int_equal(dra_device_consumption(&in, 0, &mine, &c), 0);
        dra_counters_add(&x, &c);
        assert_false(dra_counters_fit(&x, &cap));
        x = shares;
        assert_int_equal(dra_device_consumption(&in, 0, &w, &c), 0);
        dra_counters_add(&x, &c);
        assert_false(dra_counters_fit(&x, &cap));
        /* no twin where the server drops counters */
        in.counters_dropped = true;
        assert_int_equal(dra_device_consumption(&in, 0, &sh, &c), -ENODEV);
        struct dra_device_ref bad;
        assert_int_equal(dra_device_parse("gpu-0-mig-1-0-sharedx", &bad), -EINVAL);
        assert_int_equal(dra_device_parse("gpu-0-mig-1-0-", &bad), -EINVAL);
        json_decref(sl);
        /* without shared devices the MIG GPU still has its counters, the other GPU none */
        sl = build_mig(&s, false, false);
        check_pool(sl, &devs, &sets);
        assert_true(devs == 2 + 4 && sets == 1);
        assert_null(json_object_get(find_device(sl, "gpu-1"), "consumesCounters"));
        json_decref(sl);
        /* a server that drops counters: the MIG devices without the whole MIG GPU (they would not exclude) */
        sl = build_mig(&s, false, true);
        check_pool(sl, &devs, &sets);
        assert_true(devs == 1 + 4 && sets == 0);
        assert_null(find_device(sl, "gpu-0"));
        json_decref(sl);
        sim_close(&s);
}

/* 64 GPUs in MIG mode with seven MIG devices each: 512 devices in slices of 64 (all consume counters), 64
 * counter sets of 10 counters in slices of 8. */
static void test_slices_many_mig(void **state) {
        (void)state;
        struct topo *t = calloc(1, sizeof *t);
        struct dra_mig *m = calloc(1, sizeof *m);
        topo_init(t);
        t->n_gpus = TOPO_MAX_GPUS;
        mig_node_init(&m->node, t->n_gpus);
        struct dra_slice_input in = { .t = t, .driver = DRV, .node = "n", .mig = m, .generation = 3 };
        for (unsigned g = 0; g < t->n_gpus; g++) {
                t->gpu[g].index = (int)g;
                snprintf(t->gpu[g].uuid, sizeof t->gpu[g].uuid, "GPU-%u", g);
                t->gpu[g].memory_total = 80ULL << 30;
                in.offered[g] = true;
                struct mig_gpu *mg = &m->node.gpu[g];
                mg->mode = 1;
                m->memory_slices[g] = 8;
                m->compute_slices[g] = 7;
                for (unsigned k = 0; k < 7; k++) {
                        mg->gi[mg->n_gis++] = (struct mig_gi){ .id = 8 + k, .n_cis = 1, .placement = { k, 1 } };
                        struct mig_device *md = &mg->dev[mg->n_devices++];
                        *md = (struct mig_device){ .gpu = g,
                                                   .index = k,
                                                   .gi = 8 + k,
                                                   .ci = 0,
                                                   .gi_slices = 1,
                                                   .ci_slices = 1,
                                                   .placement = { k, 1 },
                                                   .memory_total = 10ULL << 30 };
                        snprintf(md->uuid, sizeof md->uuid, "MIG-%u-%u", g, k);
                        strscpy(md->profile, "1g.10gb", sizeof md->profile);
                }
        }
        json_t *s = NULL;
        assert_int_equal(dra_slices_build(&in, &s), 0);
        unsigned devs, sets;
        check_pool(s, &devs, &sets);
        assert_int_equal(devs, 64 + 64 * 7);
        assert_int_equal(sets, 64);
        assert_int_equal(json_array_size(s), 8 + 8);
        json_decref(s);
        free(m);
        free(t);
}

/* H100s: a GPU instance split into two compute instances (they share its memory: neither consumes its
 * memory slices), a GPU instance without a compute instance (no device), a MIG GPU without instances (its
 * whole device and counters only), MIG off with MIG on pending (a GPU like any other), a V100. */
static void test_slices_mig_h100(void **state) {
        (void)state;
        struct sim_node s;
        unsigned devs, sets;
        sim_open(&s, MIG_DATA "h100-mixed.node");
        json_t *sl = build_mig(&s, true, false);
        check_pool(sl, &devs, &sets);
        /* whole 5; shared on GPUs 3 and 4; MIG: 7 on GPU 0, 3 on GPU 1, each with its shared twin */
        assert_int_equal(devs, 5 + 2 + 2 * (7 + 3));
        assert_int_equal(sets, 5);
        const struct mig_gpu *g1 = &s.mig->node.gpu[1];
        unsigned split = 0;
        for (unsigned k = 0; k < g1->n_devices; k++) {
                char name[64];
                struct dra_device_ref ref = {
                        .kind = DRA_DEVICE_MIG, .index = 1, .gi = g1->dev[k].gi, .ci = g1->dev[k].ci
                };
                dra_device_name(&ref, name, sizeof name);
                json_t *c = json_object_get(
                        json_array_get(json_object_get(find_device(sl, name), "consumesCounters"), 0), "counters");
                bool shares_gi = g1->dev[k].ci_slices < g1->dev[k].gi_slices;
                split += shares_gi;
                assert_int_equal(counter(c, "memory-slice-4") == 1, !shares_gi && g1->dev[k].placement.start == 4);
                assert_int_equal(counter(c, "compute-slices"), g1->dev[k].ci_slices);
        }
        assert_int_equal(split, 2);
        assert_int_equal(json_object_size(find_set(sl, "gpu-2")), 10);
        assert_non_null(find_device(sl, "gpu-3-shared"));
        assert_null(find_device(sl, "gpu-2-shared"));
        json_decref(sl);
        sim_close(&s);
}

/* Dynamic MIG device names: "gpu-<index>-mig-<label>-<start>", the label a profile name as a DNS label part. */
static void test_device_names_dynamic(void **state) {
        (void)state;
        char buf[64], label[32];
        struct dra_device_ref ref = { .kind = DRA_DEVICE_MIG_DYNAMIC, .index = 2, .label = "1g-10gb-me", .start = 6 },
                              got;
        assert_int_equal(dra_device_name(&ref, buf, sizeof buf), 0);
        assert_string_equal(buf, "gpu-2-mig-1g-10gb-me-6");
        assert_int_equal(dra_device_parse(buf, &got), 0);
        assert_true(got.kind == DRA_DEVICE_MIG_DYNAMIC && got.index == 2 && got.start == 6);
        assert_string_equal(got.label, "1g-10gb-me");
        assert_true(dra_kind_mig(got.kind) && !dra_kind_shared(got.kind));
        dra_mig_label("1g.10gb+me", label, sizeof label);
        assert_string_equal(label, "1g-10gb-me");
        dra_mig_label("7g.141gb", label, sizeof label);
        assert_string_equal(label, "7g-141gb");
        static const char *const bad[] = { "gpu-0-mig-1g-5gb-",   "gpu-0-mig-1g-5gb-01", "gpu-0-mig-1g-5gb-10",
                                           "gpu-0-mig-1g--0",     "gpu-0-mig-1G-5gb-0",  "gpu-0-mig-1g.5gb-0",
                                           "gpu-0-mig-1g-5gb-0-", "gpu-0-mig-1g",        "gpu-0-mig-1g-5gb-x" };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
                assert_int_equal(dra_device_parse(bad[i], &got), -EINVAL);
}

static void dynamic_input(const struct sim_node *s, uint64_t marked, struct dra_slice_input *in) {
        *in = (struct dra_slice_input){ .t = &s->t,
                                        .driver = DRV,
                                        .node = "node-a",
                                        .memory_unit = 256u << 20,
                                        .generation = 1,
                                        .mig = s->mig,
                                        .mig_dynamic = marked };
        for (unsigned g = 0; g < s->t.n_gpus; g++)
                in->offered[g] = true;
}

/* The placements of an empty A100 40GB, as NVIDIA's MIG user guide lists them: 1g.5gb (and +me) at 0-6, 1g.10gb at
 * 0,2,4,6, 2g.10gb at 0,2,4, 3g.20gb at 0,4, 4g.20gb and 7g.40gb at 0; none over a GPU instance made outside the
 * driver, all over one made for a claim. */
static void test_mig_placements(void **state) {
        (void)state;
        struct sim_node s;
        struct dra_slice_input in;
        struct dra_device_ref refs[DRA_MIG_DYNAMIC_MAX];
        char name[64], all[2048] = "";
        sim_open(&s, MIG_DATA "a100-40gb-dynamic.node");
        dynamic_input(&s, 1, &in);
        assert_true(dra_mig_dynamic_gpu(&in, 0) && !dra_mig_dynamic_gpu(&in, 1));
        unsigned n = dra_mig_dynamic_devices(&in, 0, refs, DRA_MIG_DYNAMIC_MAX);
        for (unsigned k = 0; k < n; k++) {
                assert_int_equal(dra_device_name(&refs[k], name, sizeof name), 0);
                snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", k ? " " : "",
                         name + strlen("gpu-0-mig-"));
        }
        /* in NVML's profile order (NVML_GPU_INSTANCE_PROFILE_*) */
        assert_string_equal(all, "1g-5gb-0 1g-5gb-1 1g-5gb-2 1g-5gb-3 1g-5gb-4 1g-5gb-5 1g-5gb-6 "
                                 "2g-10gb-0 2g-10gb-2 2g-10gb-4 3g-20gb-0 3g-20gb-4 4g-20gb-0 7g-40gb-0 "
                                 "1g-5gb-me-0 1g-5gb-me-1 1g-5gb-me-2 1g-5gb-me-3 1g-5gb-me-4 1g-5gb-me-5 1g-5gb-me-6 "
                                 "1g-10gb-0 1g-10gb-2 1g-10gb-4 1g-10gb-6");
        assert_int_equal(dra_mig_dynamic_devices(&in, 1, refs, DRA_MIG_DYNAMIC_MAX), 0); /* not marked */
        /* GPU 1's all-balanced layout covers every memory slice: nothing free; its instances a claim's: all */
        in.mig_dynamic = 3;
        assert_int_equal(dra_mig_dynamic_devices(&in, 1, refs, DRA_MIG_DYNAMIC_MAX), 0);
        for (unsigned k = 0; k < s.mig->node.gpu[1].n_gis; k++)
                in.mig_owned[1] |= (uint16_t)(1u << s.mig->node.gpu[1].gi[k].id);
        assert_int_equal(dra_mig_dynamic_devices(&in, 1, refs, DRA_MIG_DYNAMIC_MAX), 25);
        const struct mig_profile *p;
        struct mig_placement at;
        assert_int_equal(dra_mig_placement(&s.mig->caps[0], "3g-20gb", 4, &p, &at), 0);
        assert_true(at.start == 4 && at.size == 4 && p->slices == 3);
        assert_int_equal(dra_mig_placement(&s.mig->caps[0], "3g-20gb", 2, &p, &at), -ERANGE);
        assert_int_equal(dra_mig_placement(&s.mig->caps[0], "9g-99gb", 0, &p, &at), -ENOENT);
        assert_null(dra_mig_blocker(&in, 0, at, false));
        sim_close(&s);
}

/* What placements consume, and which exclude each other by the counters the scheduler sums. */
static void test_mig_dynamic_counters(void **state) {
        (void)state;
        struct sim_node s;
        struct dra_slice_input in;
        struct dra_counters cap, a, b;
        sim_open(&s, MIG_DATA "a100-40gb-dynamic.node");
        dynamic_input(&s, 1, &in);
        dra_gpu_counters(&in, 0, &cap);
        struct dra_device_ref three = { .kind = DRA_DEVICE_MIG_DYNAMIC, .index = 0, .label = "3g-20gb", .start = 4 };
        struct dra_device_ref four = { .kind = DRA_DEVICE_MIG_DYNAMIC, .index = 0, .label = "4g-20gb", .start = 0 };
        struct dra_device_ref seven = { .kind = DRA_DEVICE_MIG_DYNAMIC, .index = 0, .label = "7g-40gb", .start = 0 };
        struct dra_device_ref one = { .kind = DRA_DEVICE_MIG_DYNAMIC, .index = 0, .label = "1g-5gb", .start = 4 };
        assert_int_equal(dra_device_consumption(&in, 0, &three, &a), 0);
        assert_true(a.compute_slices == 3 && a.memory_slice[3] == 0 && a.memory_slice[4] == 1 &&
                    a.memory_slice[7] == 1);
        assert_int_equal(dra_device_consumption(&in, 0, &four, &b), 0);
        dra_counters_add(&a, &b);
        assert_true(dra_counters_fit(&a, &cap)); /* 3g at 4 beside 4g at 0: 7 compute slices, 8 memory slices */
        assert_int_equal(dra_device_consumption(&in, 0, &one, &b), 0);
        dra_counters_add(&a, &b);
        assert_false(dra_counters_fit(&a, &cap));
        assert_int_equal(dra_device_consumption(&in, 0, &three, &a), 0);
        assert_int_equal(dra_device_consumption(&in, 0, &seven, &b), 0);
        dra_counters_add(&a, &b);
        assert_false(dra_counters_fit(&a, &cap));
        /* one 1g.5gb+me per GPU (its instance count), though its placements do not overlap */
        struct dra_device_ref me0 = { .kind = DRA_DEVICE_MIG_DYNAMIC, .index = 0, .label = "1g-5gb-me", .start = 0 };
        struct dra_device_ref me1 = me0;
        me1.start = 1;
        assert_int_equal(dra_device_consumption(&in, 0, &me0, &a), 0);
        assert_int_equal(dra_device_consumption(&in, 0, &me1, &b), 0);
        assert_true(dra_counters_fit(&a, &cap));
        dra_counters_add(&a, &b);
        assert_false(dra_counters_fit(&a, &cap));
        assert_int_equal(dra_device_consumption(&in, 0, &one, &b), 0); /* 1g.5gb beside it: fine */
        assert_int_equal(dra_device_consumption(&in, 0, &me0, &a), 0);
        dra_counters_add(&a, &b);
        assert_true(dra_counters_fit(&a, &cap));
        struct dra_device_ref gone = three;
        gone.start = 2;
        assert_int_equal(dra_device_consumption(&in, 0, &gone, &a), -ENODEV);
        in.mig_dynamic = 0;
        assert_int_equal(dra_device_consumption(&in, 0, &three, &a), -ENODEV);
        /* the slices: placements on GPU 0 with their attributes, GPU 1's static devices as before */
        in.mig_dynamic = 1;
        json_t *sl = NULL;
        assert_int_equal(dra_slices_build(&in, &sl), 0);
        json_t *d = find_device(sl, "gpu-0-mig-3g-20gb-4");
        assert_non_null(d);
        assert_string_equal(attr_s(d, "profile"), "3g.20gb");
        assert_null(attr_s(d, "uuid"));
        assert_int_equal(counter(find_set(sl, "gpu-0"), "profile-20-instances"), 1);
        assert_int_equal(
                counter(json_object_get(json_array_get(json_object_get(find_device(sl, "gpu-0-mig-1g-5gb-me-3"),
                                                                       "consumesCounters"),
                                                       0),
                                        "counters"),
                        "profile-20-instances"),
                1);
        assert_int_equal(counter(find_set(sl, "gpu-1"), "profile-20-instances"), -1); /* static: none */
        assert_non_null(find_device(sl, "gpu-1-mig-1-0"));
        assert_null(find_device(sl, "gpu-1-mig-3g-20gb-4"));
        json_decref(sl);
        sim_close(&s);
}

static void test_slice_versions(void **state) {
        (void)state;
        struct topo *t = malloc(sizeof *t);
        json_t *s = build("seed000-8gpu-pcie-2socket.topo", true, t);
        json_t *v1 = json_array_get(s, 0);
        json_t *b1 = dra_slice_for_version(v1, "v1beta1");
        json_t *d = json_array_get(json_object_get(json_object_get(b1, "spec"), "devices"), 0);
        assert_non_null(json_object_get(d, "basic"));
        assert_null(json_object_get(d, "attributes"));
        assert_string_equal(json_string_value(json_object_get(b1, "apiVersion")), "resource.k8s.io/v1beta1");
        json_t *back = dra_slice_to_v1(b1);
        json_object_set_new(back, "apiVersion", json_string("resource.k8s.io/v1"));
        assert_true(json_equal(back, v1));
        assert_null(dra_slice_for_version(v1, "v2"));
        json_decref(back);
        json_decref(b1);
        json_decref(s);
        free(t);
}

static void test_groups(void **state) {
        (void)state;
        struct topo *t = malloc(sizeof *t);
        int island[TOPO_MAX_GPUS], sw[TOPO_MAX_GPUS];
        test_load_topo("seed000-8gpu-pcie-2socket.topo", t);
        dra_nvlink_islands(t, island);
        dra_pcie_switch_groups(t, sw);
        for (unsigned g = 0; g < 8; g++) {
                assert_int_equal(island[g], (int)g);     /* no NVLink: an island each */
                assert_int_equal(sw[g], (int)(g & ~1u)); /* PIX pairs */
        }
        test_load_topo("dgx1-v100-hybrid-cube-mesh.topo", t);
        dra_nvlink_islands(t, island);
        for (unsigned g = 0; g < 8; g++)
                assert_int_equal(island[g], 0);
        free(t);
}

/* ---- the claim and its parameters ---- */

static const char *claim_text(const char *results, const char *config) {
        static char buf[8192];
        snprintf(buf, sizeof buf,
                 "{\"metadata\":{\"name\":\"c\",\"namespace\":\"default\",\"uid\":\"" UID1 "\"},"
                 "\"status\":{\"allocation\":{\"devices\":{\"results\":[%s],\"config\":[%s]}}}}",
                 results, config);
        return buf;
}

#define PARAMS(p) "{\"apiVersion\":\"gpu.gpuslice.io/v1alpha1\",\"kind\":\"GpuConfig\"" p "}"

static void test_claim_decode(void **state) {
        (void)state;
        struct dra_claim *c = malloc(sizeof *c);
        struct gs_error err = { 0 };
        const char *t = claim_text(
                "{\"request\":\"gpus/fast\",\"driver\":\"" DRV "\",\"pool\":\"n\",\"device\":\"gpu-0-shared\","
                "\"shareID\":\"" UID2 "\",\"consumedCapacity\":{\"memory\":\"4Gi\",\"cores\":\"30\"}},"
                "{\"request\":\"nic\",\"driver\":\"dra.net\",\"pool\":\"n\",\"device\":\"eth0\"},"
                "{\"request\":\"other\",\"driver\":\"" DRV "\",\"pool\":\"n\",\"device\":\"gpu-1\"}",
                "{\"source\":\"FromClaim\",\"requests\":[\"gpus\"],\"opaque\":{\"driver\":\"" DRV
                "\",\"parameters\":" PARAMS(
                        ",\"corePolicy\":\"elastic\"") "}},"
                                                       "{\"source\":\"FromClass\",\"opaque\":{\"driver\":\"" DRV
                                                       "\",\"parameters\":" PARAMS(
                                                               ",\"corePolicy\":\"hard\"") "}},"
                                                                                           "{\"source\":\"FromClaim\","
                                                                                           "\"opaque\":{\"driver\":"
                                                                                           "\"dra.net\",\"parameters\":"
                                                                                           "{\"x\":1}}}");
        assert_int_equal(dra_claim_decode(t, strlen(t), DRV, c, &err), 0);
        assert_true(c->allocated && c->n_results == 2);
        assert_string_equal(c->results[0].device, "gpu-0-shared");
        assert_true(c->results[0].has_memory && c->results[0].memory == 4ULL << 30 && c->results[0].cores == 30);
        assert_string_equal(c->results[0].share_id, UID2);
        /* the claim's config for "gpus" applies to "gpus/fast" after the class's */
        assert_int_equal(c->results[0].params.core_policy, DRA_POLICY_ELASTIC);
        assert_int_equal(c->results[1].params.core_policy, DRA_POLICY_HARD);
        assert_false(c->results[1].has_memory);
        free(c);
}

static void test_claim_malformed(void **state) {
        (void)state;
        struct dra_claim *c = malloc(sizeof *c);
        struct {
                const char *text, *want;
        } cases[] = {
                { "not json", "not JSON" },
                { "[1]", "not a JSON object" },
                { "{\"metadata\":{\"name\":\"c\",\"namespace\":\"d\"}}", "metadata.uid" },
                { "{\"metadata\":{\"name\":\"c\",\"namespace\":\"d\",\"uid\":\"UPPER\"}}", "not a UID" },
                { "{\"metadata\":{\"name\":\"c\",\"namespace\":\"d\",\"uid\":\"a\"},\"status\":{\"allocation\":[]}}",
                  "malformed" },
                { NULL, NULL },
        };
        struct gs_error err = { 0 };
        for (size_t i = 0; cases[i].text; i++) {
                gs_error_clear(&err);
                assert_int_equal(dra_claim_decode(cases[i].text, strlen(cases[i].text), DRV, c, &err), -EINVAL);
                assert_non_null(strstr(err.message, cases[i].want));
        }
        static const char *const results[] = {
                "{\"request\":\"r\",\"driver\":\"" DRV "\",\"pool\":\"n\"}",            /* no device */
                "{\"request\":\"r\",\"driver\":7,\"pool\":\"n\",\"device\":\"gpu-0\"}", /* driver type */
                "{\"request\":\"r\",\"driver\":\"" DRV "\",\"pool\":\"n\",\"device\":\"gpu-0\","
                "\"consumedCapacity\":{\"memory\":\"lots\"}}",
                "{\"request\":\"r\",\"driver\":\"" DRV "\",\"pool\":\"n\",\"device\":\"gpu-0\",\"shareID\":\"X\"}",
                "{\"request\":\"r\",\"driver\":\"" DRV "\",\"pool\":\"n\",\"device\":\"gpu-0\",\"adminAccess\":1}",
                "{\"request\":\"r\",\"driver\":\"" DRV "\",\"pool\":\"n\",\"device\":"
                "\"a-device-name-far-longer-than-a-dns-label-of-sixty-three-characters-can-be\"}",
                "7",
        };
        for (size_t i = 0; i < sizeof results / sizeof *results; i++) {
                const char *t = claim_text(results[i], "");
                assert_int_equal(dra_claim_decode(t, strlen(t), DRV, c, &err), -EINVAL);
                assert_true(strstr(err.message, "results[0]") != NULL);
        }
        const char *t = claim_text("{\"request\":\"r\",\"driver\":\"" DRV "\",\"pool\":\"n\",\"device\":\"gpu-0\"}",
                                   "{\"source\":\"FromClaim\",\"opaque\":{\"driver\":\"" DRV
                                   "\",\"parameters\":{\"kind\":\"GpuConfig\"}}}");
        assert_int_equal(dra_claim_decode(t, strlen(t), DRV, c, &err), -EINVAL);
        assert_non_null(strstr(err.message, "config[0]"));
        char *many = malloc(64 * 100 + 256);
        size_t at = (size_t)snprintf(many, 64 * 100 + 256,
                                     "{\"metadata\":{\"name\":\"c\",\"namespace\":\"d\",\"uid\":\"a\"},"
                                     "\"status\":{\"allocation\":{\"devices\":{\"results\":[");
        for (int i = 0; i < 33; i++)
                at += (size_t)snprintf(many + at, 64 * 100 + 256 - at, "%s{}", i ? "," : "");
        snprintf(many + at, 64 * 100 + 256 - at, "]}}}}");
        assert_int_equal(dra_claim_decode(many, strlen(many), DRV, c, &err), -E2BIG);
        free(many);
        free(c);
}

static void test_params(void **state) {
        (void)state;
        struct dra_params p;
        struct gs_error err = { 0 };
        const char *ok = PARAMS(",\"corePolicy\":\"hard\"");
        assert_int_equal(dra_params_decode(ok, strlen(ok), &p, &err), 0);
        assert_int_equal(p.core_policy, DRA_POLICY_HARD);
        ok = PARAMS("");
        assert_int_equal(dra_params_decode(ok, strlen(ok), &p, &err), 0);
        assert_int_equal(p.core_policy, DRA_POLICY_NODE);
        static const struct {
                const char *text, *want;
        } bad[] = {
                { PARAMS(",\"corePolicy\":\"turbo\""), "corePolicy" },
                { PARAMS(",\"corePolicy\":1"), "not a string" },
                { PARAMS(",\"sharing\":{}"), "sharing.strategy: missing" },
                { PARAMS(",\"shared\":{}"), "parameters: unknown field \"shared\"" },
                { "{\"apiVersion\":\"gpu.nvidia.com/v1beta1\",\"kind\":\"GpuConfig\"}", "expected" },
                { "{\"kind\":\"GpuConfig\"}", "apiVersion" },
                { "[]", "not a JSON object" },
                { PARAMS(",\"corePolicy\":\"hard\",\"corePolicy\":\"elastic\""), "not JSON" },
                { "{", "not JSON" },
        };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                assert_int_equal(dra_params_decode(bad[i].text, strlen(bad[i].text), &p, &err), -EINVAL);
                assert_non_null(strstr(err.message, bad[i].want));
        }
        char *big = calloc(1, DRA_PARAMS_MAX + 2);
        memset(big, ' ', DRA_PARAMS_MAX + 1);
        assert_int_equal(dra_params_decode(big, DRA_PARAMS_MAX + 1, &p, &err), -E2BIG);
        free(big);
}

#define NVIDIA(p) "{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":\"GpuConfig\"" p "}"

/* The sharing config as NVIDIA's DRA driver has it (GpuConfig.sharing), in both apiVersions. */
static void test_params_sharing(void **state) {
        (void)state;
        struct dra_params p;
        struct gs_error err = { 0 };
        const char *ts = NVIDIA(",\"sharing\":{\"strategy\":\"TimeSlicing\",\"timeSlicingConfig\":{\"interval\":"
                                "\"Long\"}}");
        assert_int_equal(dra_params_decode(ts, strlen(ts), &p, &err), 0);
        assert_int_equal(p.sharing.strategy, DRA_SHARING_TIMESLICING);
        assert_int_equal(p.sharing.interval, DRA_INTERVAL_LONG);
        const char *mps =
                NVIDIA(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultActiveThreadPercentage\":50,"
                       "\"defaultPinnedDeviceMemoryLimit\":\"10Gi\",\"defaultPerDevicePinnedMemoryLimit\":"
                       "{\"0\":\"2Gi\",\"GPU-x\":1073741824},\"multiUser\":false}}");
        assert_int_equal(dra_params_decode(mps, strlen(mps), &p, &err), 0);
        assert_int_equal(p.sharing.strategy, DRA_SHARING_MPS);
        assert_int_equal(p.sharing.thread_percentage, 50);
        assert_true(p.sharing.pinned == 10ULL << 30 && p.sharing.n_per_device == 2);
        assert_true(p.sharing.per_device[0].bytes == 2ULL << 30 && p.sharing.per_device[1].bytes == 1ULL << 30);
        assert_string_equal(p.sharing.per_device[1].device, "GPU-x");
        const char *bare = PARAMS(",\"corePolicy\":\"elastic\",\"sharing\":{\"strategy\":\"MPS\"}");
        assert_int_equal(dra_params_decode(bare, strlen(bare), &p, &err), 0);
        assert_true(p.sharing.strategy == DRA_SHARING_MPS && p.sharing.thread_percentage == 0 && p.sharing.pinned == 0);
        assert_int_equal(p.core_policy, DRA_POLICY_ELASTIC);
        const char *pct =
                NVIDIA(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultActiveThreadPercentage\":10}}");
        assert_int_equal(dra_params_decode(pct, strlen(pct), &p, &err), 0);
        assert_true(p.sharing.thread_percentage == 10 && p.sharing.n_per_device == 0);
        static const struct {
                const char *text, *want;
        } bad[] = {
                { NVIDIA(",\"corePolicy\":\"hard\""), "parameters: unknown field \"corePolicy\"" },
                { NVIDIA(",\"sharing\":[]"), "sharing: not an object" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"Mps\"}"), "strategy: \"Mps\"" },
                { NVIDIA(",\"sharing\":{\"strategy\":1}"), "strategy: not a string" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"MPS\",\"replicas\":2}"), "unknown field \"replicas\"" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"MPS\",\"timeSlicingConfig\":{}}"), "given with MPS" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"TimeSlicing\",\"mpsConfig\":{}}"), "given with TimeSlicing" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"TimeSlicing\",\"timeSlicingConfig\":{\"interval\":\"Tiny\"}}"),
                  "interval: an unknown value" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"TimeSlicing\",\"timeSlicingConfig\":{\"interval\":3}}"),
                  "interval: not a string" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"TimeSlicing\",\"timeSlicingConfig\":{\"slice\":1}}"),
                  "timeSlicingConfig: unknown field \"slice\"" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultActiveThreadPercentage\":0}}"),
                  "defaultActiveThreadPercentage: not an integer 1..100" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultActiveThreadPercentage\":101}}"),
                  "defaultActiveThreadPercentage" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultActiveThreadPercentage\":\"50\"}"
                         "}"),
                  "defaultActiveThreadPercentage" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultPinnedDeviceMemoryLimit\":\"10 "
                         "G\"}}"),
                  "defaultPinnedDeviceMemoryLimit: not a quantity" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultPinnedDeviceMemoryLimit\":\"1Ki\"}"
                         "}"),
                  "at least 1Mi" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultPinnedDeviceMemoryLimit\":-5}}"),
                  "not a quantity" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultPerDevicePinnedMemoryLimit\":[]}"
                         "}"),
                  "defaultPerDevicePinnedMemoryLimit: not an object" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultPerDevicePinnedMemoryLimit\":"
                         "{\"0\":true}}}"),
                  "defaultPerDevicePinnedMemoryLimit.0: not a quantity" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultPerDevicePinnedMemoryLimit\":"
                         "{\"\":\"1Gi\"}}}"),
                  "empty" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"multiUser\":true}}"), "multiUser: true" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"multiUser\":1}}"),
                  "multiUser: not a boolean" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"pinned\":1}}"),
                  "mpsConfig: unknown field \"pinned\"" },
                { NVIDIA(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":7}"), "mpsConfig: not an object" },
        };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
                err.message[0] = 0;
                int r = dra_params_decode(bad[i].text, strlen(bad[i].text), &p, &err);
                if (r != -EINVAL || !strstr(err.message, bad[i].want))
                        fail_msg("case %zu: %d \"%s\", wanted \"%s\"", i, r, err.message, bad[i].want);
        }
        /* more devices than kept: E2BIG */
        const char *many =
                NVIDIA(",\"sharing\":{\"strategy\":\"MPS\",\"mpsConfig\":{\"defaultPerDevicePinnedMemoryLimit\":"
                       "{\"0\":\"1Gi\",\"1\":\"1Gi\",\"2\":\"1Gi\",\"3\":\"1Gi\",\"4\":\"1Gi\",\"5\":\"1Gi\","
                       "\"6\":\"1Gi\",\"7\":\"1Gi\",\"8\":\"1Gi\"}}}");
        assert_int_equal(dra_params_decode(many, strlen(many), &p, &err), -E2BIG);
}

/* ---- the journal ---- */

static void test_record_codec(void **state) {
        (void)state;
        struct dra_record *r = calloc(1, sizeof *r), *back = calloc(1, sizeof *back);
        strscpy(r->uid, UID1, sizeof r->uid);
        strscpy(r->namespace_, "default", sizeof r->namespace_);
        strscpy(r->name, "c", sizeof r->name);
        r->state = DRA_REC_PREPARED;
        r->elastic = true;
        r->n = 2;
        r->dev[0] = (struct dra_record_device){ .request = "a",
                                                .device = "gpu-3-shared",
                                                .uuid = "GPU-x",
                                                .index = 3,
                                                .shared = true,
                                                .memory = 1ULL << 34,
                                                .cores = 40 };
        strscpy(r->dev[0].share_id, UID2, sizeof r->dev[0].share_id);
        r->dev[1] = (struct dra_record_device){
                .request = "b", .device = "gpu-4", .uuid = "GPU-y", .index = 4, .mps_pinned = 1ULL << 31
        };
        r->sharing = DRA_SHARING_MPS;
        r->mps_threads = 25;
        strscpy(r->spec, "/var/run/cdi/x.json", sizeof r->spec);
        strscpy(r->limits, "dra-" UID1, sizeof r->limits);
        char *text = NULL;
        struct gs_error err = { 0 };
        assert_int_equal(dra_record_encode(r, &text), 0);
        assert_int_equal(dra_record_decode(text, strlen(text), back, &err), 0);
        char *again = NULL; /* the same fields again (padding of a compound literal is not compared) */
        assert_int_equal(dra_record_encode(back, &again), 0);
        assert_string_equal(text, again);
        assert_true(back->n == 2 && back->dev[0].memory == 1ULL << 34 && back->dev[0].cores == 40 && back->elastic);
        assert_string_equal(back->dev[1].device, "gpu-4");
        assert_true(back->sharing == DRA_SHARING_MPS && back->mps_threads == 25 &&
                    back->dev[1].mps_pinned == 1ULL << 31 && back->dev[0].mps_pinned == 0);
        free(again);
        free(text);
        r->dev[1] = (struct dra_record_device){ .request = "b",
                                                .device = "gpu-4-mig-3g-40gb-4",
                                                .index = 4,
                                                .kind = DRA_DEVICE_MIG_DYNAMIC,
                                                .made = true,
                                                .gi = 1,
                                                .ci = 0 };
        assert_int_equal(dra_record_encode(r, &text), 0);
        assert_non_null(strstr(text, "\"gi\":1,\"ci\":0"));
        assert_int_equal(dra_record_decode(text, strlen(text), back, &err), 0);
        assert_true(back->dev[1].made && back->dev[1].gi == 1 && back->dev[1].ci == 0 &&
                    back->dev[1].kind == DRA_DEVICE_MIG_DYNAMIC && !back->dev[0].made);
        free(text);
        static const char *const bad[] = {
                "{\"v\":1,\"uid\":\"a\",\"namespace\":\"n\",\"name\":\"x\",\"state\":\"prepared\",\"corePolicy\":"
                "\"hard\",\"devices\":[{\"request\":\"r\",\"device\":\"gpu-1-mig-1-0\",\"shareID\":\"\",\"uuid\":\"u\","
                "\"index\":1,\"shared\":false,\"memory\":0,\"cores\":0,\"gi\":1,\"ci\":0}],\"spec\":\"\",\"limits\":"
                "\"\"}",
                "{\"v\":1,\"uid\":\"a\",\"namespace\":\"n\",\"name\":\"x\",\"state\":\"prepared\",\"corePolicy\":"
                "\"hard\",\"devices\":[{\"request\":\"r\",\"device\":\"gpu-1-mig-1g-5gb-0\",\"shareID\":\"\",\"uuid\":"
                "\"\",\"index\":1,\"shared\":false,\"memory\":0,\"cores\":0,\"gi\":1}],\"spec\":\"\",\"limits\":\"\"}",
                "{}",
                "{\"v\":2,\"uid\":\"a\",\"namespace\":\"n\",\"name\":\"x\",\"state\":\"prepared\",\"corePolicy\":"
                "\"hard\","
                "\"devices\":[],\"spec\":\"\",\"limits\":\"\"}",
                "{\"v\":1,\"uid\":\"a\",\"namespace\":\"n\",\"name\":\"x\",\"state\":\"done\",\"corePolicy\":\"hard\","
                "\"devices\":[],\"spec\":\"\",\"limits\":\"\"}",
                "{\"v\":1,\"uid\":\"a\",\"namespace\":\"n\",\"name\":\"x\",\"state\":\"prepared\",\"corePolicy\":"
                "\"hard\","
                "\"devices\":[],\"spec\":\"relative\",\"limits\":\"\"}",
                "{\"v\":1,\"uid\":\"a\",\"namespace\":\"n\",\"name\":\"x\",\"state\":\"prepared\",\"corePolicy\":"
                "\"hard\","
                "\"devices\":[],\"spec\":\"\",\"limits\":\"../etc\"}",
                "{\"v\":1,\"uid\":\"a\",\"namespace\":\"n\",\"name\":\"x\",\"state\":\"prepared\",\"corePolicy\":"
                "\"hard\","
                "\"devices\":[{\"request\":\"r\",\"device\":\"gpu-1\",\"shareID\":\"\",\"uuid\":\"u\",\"index\":2,"
                "\"shared\":false,\"memory\":0,\"cores\":0}],\"spec\":\"\",\"limits\":\"\"}",
                "{\"v\":1,\"uid\":\"a\",\"namespace\":\"n\",\"name\":\"x\",\"state\":\"prepared\",\"corePolicy\":"
                "\"hard\","
                "\"devices\":[{\"request\":\"r\",\"device\":\"gpu-1\",\"shareID\":\"\",\"uuid\":\"u\",\"index\":1,"
                "\"shared\":false,\"memory\":0,\"cores\":101}],\"spec\":\"\",\"limits\":\"\"}",
                "{\"v\":1,\"uid\":\"a\",\"namespace\":\"n\",\"name\":\"x\",\"state\":\"prepared\",\"corePolicy\":"
                "\"hard\",\"sharing\":{\"strategy\":\"Sometimes\",\"interval\":\"Default\",\"threads\":0},"
                "\"devices\":[],\"spec\":\"\",\"limits\":\"\"}",
                "{\"v\":1,\"uid\":\"a\",\"namespace\":\"n\",\"name\":\"x\",\"state\":\"prepared\",\"corePolicy\":"
                "\"hard\",\"sharing\":{\"strategy\":\"MPS\",\"interval\":\"Default\",\"threads\":101},"
                "\"devices\":[],\"spec\":\"\",\"limits\":\"\"}",
                "{\"v\":1,\"uid\":\"a\",\"namespace\":\"n\",\"name\":\"x\",\"state\":\"prepared\",\"corePolicy\":"
                "\"hard\",\"sharing\":{\"strategy\":\"MPS\",\"interval\":\"Never\",\"threads\":1},"
                "\"devices\":[],\"spec\":\"\",\"limits\":\"\"}",
                "{\"v\":1,\"uid\":\"a\",\"namespace\":\"n\",\"name\":\"x\",\"state\":\"prepared\",\"corePolicy\":"
                "\"hard\","
                "\"devices\":[{\"request\":\"r\",\"device\":\"gpu-1\",\"shareID\":\"\",\"uuid\":\"u\",\"index\":1,"
                "\"shared\":false,\"memory\":0,\"cores\":0,\"mpsPinned\":-1}],\"spec\":\"\",\"limits\":\"\"}",
        };
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
                assert_int_equal(dra_record_decode(bad[i], strlen(bad[i]), back, &err), -EINVAL);
        free(r);
        free(back);
}

/* ---- the engine, in a private directory ---- */

struct fixture {
        char *dir;
        struct topo t;
        struct dra *d;
        uint64_t held;
        int takes;
        struct sim_node *sim; /* the MIG fixture's simulated node, read by fixture_mig_read */
};

static int fixture_mig_read(void *userdata, struct dra_mig *ret) {
        struct fixture *f = userdata;
        return sim_mig_read(f->sim->nvml, &f->sim->t, ret);
}

static int take(void *userdata, uint64_t gpus, char *why, size_t len) {
        struct fixture *f = userdata;
        f->takes++;
        if (gpus & (UINT64_C(1) << 7)) { /* the table's say: GPU 7 is the device plugin's */
                snprintf(why, len, "GPU 7 is held by the device plugin");
                return -EBUSY;
        }
        f->held |= gpus;
        return 0;
}

static void set_held(void *userdata, uint64_t gpus) {
        ((struct fixture *)userdata)->held = gpus;
}

static void open_driver(struct fixture *f) {
        char p[4200];
        struct dra_options o = { .node = "node-a",
                                 .state_dir = f->dir,
                                 .interposer = "/lib/x/libgpuslice-cuda.so",
                                 .sharing = true,
                                 .memory_unit = 256u << 20,
                                 .limit_when_alone = true };
        char limits[4200], cdi[4200], dev[4200];
        snprintf(limits, sizeof limits, "%s/limits", f->dir);
        snprintf(cdi, sizeof cdi, "%s/cdi", f->dir);
        snprintf(dev, sizeof dev, "%s/host", f->dir);
        o.limits_root = limits;
        o.cdi_dir = cdi;
        o.dev_root = dev;
        snprintf(p, sizeof p, "%s/host/dev", f->dir);
        mkdir(dev, 0755);
        mkdir(p, 0755);
        struct dra_table_ops ops = {
                .take = take, .set_held = set_held, .mig_read = f->sim ? fixture_mig_read : NULL, .userdata = f
        };
        struct gs_error err = { 0 };
        assert_int_equal(dra_new(&o, &f->t, &ops, &f->d, &err), 0);
}

static int setup(void **state) {
        struct fixture *f = calloc(1, sizeof *f);
        f->dir = test_tmpdir_new("dra");
        test_load_topo("seed000-8gpu-pcie-2socket.topo", &f->t);
        char p[4200];
        snprintf(p, sizeof p, "%s/host", f->dir);
        mkdir(p, 0755);
        snprintf(p, sizeof p, "%s/host/dev", f->dir);
        mkdir(p, 0755);
        /* the device nodes as files; the engine takes what cdi_discover_nodes finds, so fake char devices
         * need root: without it, GPUs have no node and the spec builder refuses (tested below) */
        for (unsigned g = 0; g < f->t.n_gpus; g++) {
                snprintf(p, sizeof p, "%s/host/dev/nvidia%d", f->dir, f->t.gpu[g].minor);
                if (mknod(p, S_IFCHR | 0666, makedev(195, (unsigned)f->t.gpu[g].minor)) < 0)
                        test_touch(p);
        }
        open_driver(f);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;
        dra_free(f->d);
        test_tmpdir_free(f->dir);
        if (f->sim) {
                sim_close(f->sim);
                free(f->sim);
        }
        free(f);
        return 0;
}

/* The simulator's H100 node (tests/data/mig/h100-mixed.node) with its device nodes and, as the driver and
 * nvidia-modprobe make them, mig-minors and the capability nodes (gpuslice-sim caps) under the dev root. */
static int setup_mig(void **state) {
        struct fixture *f = calloc(1, sizeof *f);
        f->sim = calloc(1, sizeof *f->sim);
        sim_open(f->sim, MIG_DATA "h100-mixed.node");
        f->t = f->sim->t;
        f->dir = test_tmpdir_new("dra");
        char p[4200];
        snprintf(p, sizeof p, "%s/host", f->dir);
        mkdir(p, 0755);
        snprintf(p, sizeof p, "%s/host/dev", f->dir);
        mkdir(p, 0755);
        for (unsigned g = 0; g < f->t.n_gpus; g++) {
                snprintf(p, sizeof p, "%s/host/dev/nvidia%d", f->dir, f->t.gpu[g].minor);
                if (mknod(p, S_IFCHR | 0666, makedev(195, (unsigned)f->t.gpu[g].minor)) < 0)
                        test_touch(p);
        }
        snprintf(p, sizeof p, "%s caps %s/host >/dev/null 2>&1", SIM_CLI, f->dir);
        if (system(p) != 0) /* not root: no character devices; the tests skip */
                memset(&f->t, 0, sizeof f->t);
        open_driver(f);
        *state = f;
        return 0;
}

static bool have_nodes(struct fixture *f) {
        return f->d->disc.gpu[0].major != 0;
}

static struct dra_claim *claim(const char *uid, const char *device, uint64_t memory, uint64_t cores) {
        struct dra_claim *c = calloc(1, sizeof *c);
        strscpy(c->uid, uid, sizeof c->uid);
        strscpy(c->namespace_, "default", sizeof c->namespace_);
        strscpy(c->name, "c", sizeof c->name);
        c->allocated = true;
        c->n_results = 1;
        strscpy(c->results[0].request, "r", sizeof c->results[0].request);
        strscpy(c->results[0].pool, "node-a", sizeof c->results[0].pool);
        strscpy(c->results[0].device, device, sizeof c->results[0].device);
        c->results[0].has_memory = c->results[0].has_cores = memory > 0;
        c->results[0].memory = memory;
        c->results[0].cores = cores;
        return c;
}

static void test_engine_prepare(void **state) {
        struct fixture *f = *state;
        if (!have_nodes(f))
                skip();
        struct dra_record r;
        struct gs_error err = { 0 };
        struct dra_claim *a = claim(UID1, "gpu-2-shared", 3ULL << 30, 25);
        assert_int_equal(dra_engine_prepare(f->d, a, &r, &err), 0);
        assert_true(f->held == UINT64_C(1) << 2);
        char path[4300];
        snprintf(path, sizeof path, "%s/limits/dra-" UID1 "/limits", f->dir);
        char *text = test_read_file(path);
        struct gs_limits l;
        char e[128];
        assert_int_equal(gs_limits_parse(text, strlen(text), &l, e, sizeof e), 0);
        assert_true(l.n_devices == 1 && l.dev[0].memory_bytes == 3ULL << 30 && l.dev[0].core_percent == 25);
        assert_string_equal(l.dev[0].uuid, f->t.gpu[2].uuid);
        assert_int_equal(l.core_policy, GS_CORE_HARD);
        free(text);
        /* twice: the same record */
        struct dra_record again;
        assert_int_equal(dra_engine_prepare(f->d, a, &again, &err), 0);
        assert_memory_equal(&r, &again, sizeof r);
        /* another share fits; one that does not is refused; the whole GPU is refused */
        struct dra_claim *b = claim(UID2, "gpu-2-shared", 1ULL << 30, 80);
        assert_int_equal(dra_engine_prepare(f->d, b, &r, &err), -EBUSY);
        assert_non_null(strstr(err.message, "exceed"));
        struct dra_claim *w = claim(UID2, "gpu-2", 0, 0);
        assert_int_equal(dra_engine_prepare(f->d, w, &r, &err), -EBUSY);
        /* the table refuses GPU 7 */
        struct dra_claim *x = claim(UID2, "gpu-7", 0, 0);
        assert_int_equal(dra_engine_prepare(f->d, x, &r, &err), -EBUSY);
        assert_non_null(strstr(err.message, "device plugin"));
        /* another node's pool */
        strscpy(x->results[0].pool, "node-b", sizeof x->results[0].pool);
        assert_int_equal(dra_engine_prepare(f->d, x, &r, &err), -EINVAL);
        assert_int_equal(dra_engine_unprepare(f->d, UID1, &err), 0);
        assert_true(f->held == 0);
        assert_int_equal(test_count_entries(f->d->limits_root), 0);
        assert_int_equal(test_count_entries(f->d->cdi_dir), 0);
        assert_int_equal(dra_engine_unprepare(f->d, "NOT A UID", &err), -EINVAL);
        /* a claim with nothing of this driver: prepared, nothing held or written */
        a->n_results = 0;
        assert_int_equal(dra_engine_prepare(f->d, a, &r, &err), 0);
        assert_true(r.n == 0 && f->held == 0 && f->d->n_recs == 0);
        assert_int_equal(test_count_entries(f->d->cdi_dir), 0);
        free(a);
        free(b);
        free(w);
        free(x);
}

static const char *mig_name(struct fixture *f, unsigned g, unsigned k, char *buf) {
        const struct mig_device *md = &f->sim->mig->node.gpu[g].dev[k];
        struct dra_device_ref ref = { .kind = DRA_DEVICE_MIG, .index = g, .gi = md->gi, .ci = md->ci };
        assert_int_equal(dra_device_name(&ref, buf, 64), 0);
        return buf;
}

/* MIG claims: the spec has exactly the instance's three nodes; MIG devices of one GPU go to different claims,
 * one MIG device to one claim, and a MIG device and its whole GPU exclude each other as the counters say; no
 * fractions of a MIG GPU; an instance destroyed or a GPU out of MIG mode is refused; a prepared MIG claim
 * survives a restart. */
static void test_engine_mig(void **state) {
        struct fixture *f = *state;
        if (f->t.n_gpus == 0 || !have_nodes(f))
                skip();
        struct dra_record r;
        struct gs_error err = { 0 };
        char n0[64], n1[64], n2[64], path[4300];
        assert_string_equal(f->d->mig_error, "");
        struct dra_claim *a = claim(UID1, mig_name(f, 0, 0, n0), 0, 0);
        assert_int_equal(dra_engine_prepare(f->d, a, &r, &err), 0);
        assert_true(f->held == UINT64_C(1) << 0 && r.n == 1 && r.dev[0].kind == DRA_DEVICE_MIG);
        assert_string_equal(r.dev[0].uuid, f->sim->mig->node.gpu[0].dev[0].uuid);
        snprintf(path, sizeof path, "%s/cdi/" DRV "-claim_" UID1 ".json", f->dir);
        char *text = test_read_file(path);
        json_t *spec = json_loads(text, 0, NULL);
        json_t *dev = json_array_get(json_object_get(spec, "devices"), 0);
        json_t *nodes = json_object_get(json_object_get(dev, "containerEdits"), "deviceNodes");
        assert_int_equal(json_array_size(json_object_get(spec, "devices")), 1);
        assert_int_equal(json_array_size(nodes), 3);
        assert_string_equal(json_string_value(json_object_get(json_array_get(nodes, 0), "path")), "/dev/nvidia0");
        for (size_t i = 1; i < 3; i++)
                assert_true(startswith(json_string_value(json_object_get(json_array_get(nodes, i), "path")),
                                       "/dev/nvidia-caps/nvidia-cap"));
        json_decref(spec);
        free(text);
        assert_int_equal(test_count_entries(f->d->limits_root), 0);
        /* another MIG device of GPU 0: fine; the same one again, the whole GPU, a share of it: refused */
        struct dra_claim *b = claim(UID2, mig_name(f, 0, 1, n1), 0, 0);
        assert_int_equal(dra_engine_prepare(f->d, b, &r, &err), 0);
        struct dra_claim *x = claim("5a5a5a5a-0000-4000-8000-000000000001", n0, 0, 0);
        assert_int_equal(dra_engine_prepare(f->d, x, &r, &err), -EBUSY);
        assert_non_null(strstr(err.message, "already prepared"));
        strscpy(x->results[0].device, "gpu-0", sizeof x->results[0].device);
        assert_int_equal(dra_engine_prepare(f->d, x, &r, &err), -EBUSY);
        assert_non_null(strstr(err.message, "MIG devices"));
        struct dra_claim *sh = claim("5a5a5a5a-0000-4000-8000-000000000002", "gpu-0-shared", 1ULL << 30, 10);
        assert_int_equal(dra_engine_prepare(f->d, sh, &r, &err), -EINVAL);
        assert_non_null(strstr(err.message, "MIG mode"));
        /* a restart keeps both and their specs */
        dra_free(f->d);
        open_driver(f);
        assert_int_equal(f->d->n_recs, 2);
        assert_true(f->held == UINT64_C(1) << 0);
        assert_int_equal(test_count_entries(f->d->cdi_dir), 2);
        assert_int_equal(dra_engine_unprepare(f->d, UID1, &err), 0);
        assert_int_equal(dra_engine_unprepare(f->d, UID2, &err), 0);
        assert_true(f->held == 0);
        /* the whole GPU now; then its MIG devices are refused */
        assert_int_equal(dra_engine_prepare(f->d, x, &r, &err), 0);
        assert_int_equal(dra_engine_prepare(f->d, a, &r, &err), -EBUSY);
        assert_int_equal(dra_engine_unprepare(f->d, x->uid, &err), 0);
        /* an instance destroyed: refused, nothing written */
        const struct mig_device *gone = &f->sim->mig->node.gpu[0].dev[2];
        mig_name(f, 0, 2, n2);
        assert_int_equal(nvml_mig_destroy_ci(f->sim->nvml, 0, gone->gi, gone->ci, NULL), 0);
        assert_int_equal(nvml_mig_destroy_gi(f->sim->nvml, 0, gone->gi, NULL), 0);
        struct dra_claim *g = claim(UID1, n2, 0, 0);
        assert_int_equal(dra_engine_prepare(f->d, g, &r, &err), -ENODEV);
        assert_non_null(strstr(err.message, "gone"));
        /* a GPU out of MIG mode (GPU 2: MIG on, no instance) */
        int act = 0;
        assert_int_equal(nvml_mig_set_mode(f->sim->nvml, 2, 0, &act, NULL), 0);
        strscpy(g->results[0].device, "gpu-2-mig-1-0", sizeof g->results[0].device);
        assert_int_equal(dra_engine_prepare(f->d, g, &r, &err), -ENODEV);
        assert_non_null(strstr(err.message, "not in MIG mode"));
        assert_int_equal(test_count_entries(f->d->cdi_dir), 0);
        assert_int_equal(f->d->n_recs, 0);
        free(a);
        free(b);
        free(x);
        free(sh);
        free(g);
}

/* A record left "preparing" by a crash (with its files) is rolled back at start; a "prepared" one keeps
 * its GPU and has its files written again; a file no record names is removed. */
static void test_engine_recover(void **state) {
        struct fixture *f = *state;
        if (!have_nodes(f))
                skip();
        struct dra_record r;
        struct gs_error err = { 0 };
        struct dra_claim *a = claim(UID1, "gpu-1", 0, 0), *b = claim(UID2, "gpu-4-shared", 1ULL << 30, 10);
        assert_int_equal(dra_engine_prepare(f->d, a, &r, &err), 0);
        assert_int_equal(dra_engine_prepare(f->d, b, &r, &err), 0);
        r.state = DRA_REC_PREPARING; /* b as a crash mid-prepare leaves it */
        assert_int_equal(dra_record_write(f->d->journal_fd, &r), 0);
        char stray[4300];
        snprintf(stray, sizeof stray, "%s/" DRV "-claim_99999999-0000-0000-0000-000000000000.json", f->d->cdi_dir);
        test_touch(stray);
        snprintf(stray, sizeof stray, "%s/dra-11111111-0000-0000-0000-000000000000", f->d->limits_root);
        mkdir(stray, 0755);
        dra_free(f->d);
        f->held = ~UINT64_C(0);
        open_driver(f);
        assert_true(f->held == UINT64_C(1) << 1);
        assert_int_equal(f->d->n_recs, 1);
        assert_string_equal(f->d->recs[0].uid, UID1);
        assert_int_equal(test_count_entries(f->d->limits_root), 0);
        assert_int_equal(test_count_entries(f->d->cdi_dir), 1);
        free(a);
        free(b);
}

/* Without device nodes nothing is prepared, and nothing is left. */
static void test_engine_no_nodes(void **state) {
        struct fixture *f = *state;
        struct gs_error err = { 0 };
        struct dra_record r;
        memset(f->d->disc.gpu, 0, sizeof f->d->disc.gpu);
        struct dra_claim *a = claim(UID1, "gpu-1", 0, 0);
        assert_true(dra_engine_prepare(f->d, a, &r, &err) < 0);
        assert_non_null(strstr(err.message, "device node"));
        assert_int_equal(test_count_entries(f->d->cdi_dir), 0);
        assert_int_equal(f->d->n_recs, 0);
        assert_true(f->held == 0);
        free(a);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_device_names),
                cmocka_unit_test(test_versions),
                cmocka_unit_test(test_quantities),
                cmocka_unit_test(test_slices_reference),
                cmocka_unit_test(test_taint_value),
                cmocka_unit_test(test_slices_many),
                cmocka_unit_test(test_slices_mig_a100),
                cmocka_unit_test(test_slices_mig_h100),
                cmocka_unit_test(test_slices_many_mig),
                cmocka_unit_test(test_device_names_dynamic),
                cmocka_unit_test(test_mig_placements),
                cmocka_unit_test(test_mig_dynamic_counters),
                cmocka_unit_test(test_slice_versions),
                cmocka_unit_test(test_groups),
                cmocka_unit_test(test_claim_decode),
                cmocka_unit_test(test_claim_malformed),
                cmocka_unit_test(test_params),
                cmocka_unit_test(test_params_sharing),
                cmocka_unit_test(test_record_codec),
                cmocka_unit_test_setup_teardown(test_engine_prepare, setup, teardown),
                cmocka_unit_test_setup_teardown(test_engine_recover, setup, teardown),
                cmocka_unit_test_setup_teardown(test_engine_no_nodes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_engine_mig, setup_mig, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
