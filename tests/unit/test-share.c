/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the node agent's fractional GPUs (src/agent/share.c) called directly with protobuf-c
 * messages on the seed topology (8 x 24 GiB): device IDs and their malformed forms, the limits
 * file an Allocate writes (read back with gs_limits_parse), pairing of a container's core and
 * memory, the per-container dir clean-up, the state fix-up after a reconcile, the scheduler's
 * choice of GPU arriving as the call's decision, and the journal codec on a book in memory; MIG
 * devices shared like small GPUs (their IDs, the GPU in MIG mode's refused, the journal with them).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "helpers-share.h"
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/devices.h"
#include "agent/plugin.h"
#include "agent/share-book.h"
#include "agent/share-journal.h"
#include "agent/share.h"
#include "deviceplugin.pb-c.h"
#include "interposer/limits.h"
#include "mig/mig.h"
#include "state/state.h"
#include "topo/topo.h"
#include "util/util.h"

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)

static int setup(void **state) {
        *state = test_share_new();
        return 0;
}

static int teardown(void **state) {
        test_plugin_free(*state);
        return 0;
}

/* ---- IDs ---- */

static void test_id_round_trip(void **state) {
        struct test_plugin *f = *state;
        char id[SHARE_ID_MAX];
        enum plugin_kind kind;
        unsigned g, n;
        test_share_id(f, 5, PLUGIN_CORE, 99, id);
        assert_true(strlen(id) <= 63);
        assert_int_equal(share_parse_id(f->dev, id, &kind, &g, &n), 0);
        assert_int_equal(kind, PLUGIN_CORE);
        assert_int_equal(g, 5);
        assert_int_equal(n, 99);
        test_share_id(f, 7, PLUGIN_MEMORY, 95, id);
        assert_int_equal(share_parse_id(f->dev, id, &kind, &g, &n), 0);
        assert_int_equal(kind, PLUGIN_MEMORY);
        assert_int_equal(g, 7);
        assert_int_equal(n, 95);
        assert_int_equal(devices_info(f->dev, 0)->n_mem, 96); /* 24 GiB / 256 MiB */
        assert_int_equal(share_format_id(test_device_id(f, 0), PLUGIN_WHOLE, 0, id, sizeof id), -EINVAL);
}

static void test_id_malformed(void **state) {
        struct test_plugin *f = *state;
        const char *u = test_device_id(f, 2);
        char bad[20][160];
        int k = 0;
        snprintf(bad[k++], 160, "%s", u);           /* no suffix */
        snprintf(bad[k++], 160, "%s::core-100", u); /* out of range */
        snprintf(bad[k++], 160, "%s::core-07", u);  /* not canonical */
        snprintf(bad[k++], 160, "%s::core--1", u);
        snprintf(bad[k++], 160, "%s::core-", u);
        snprintf(bad[k++], 160, "%s::core-1x", u);
        snprintf(bad[k++], 160, "%s::mem-96", u); /* past the GPU's memory IDs */
        snprintf(bad[k++], 160, "%s::gpu-1", u);
        snprintf(bad[k++], 160, "%s:core-1", u);
        snprintf(bad[k++], 160, "%s::core-1::core-1", u);
        snprintf(bad[k++], 160, "X%s::core-1", u);   /* unknown GPU */
        snprintf(bad[k++], 160, "%.20s::core-1", u); /* a UUID prefix */
        snprintf(bad[k++], 160, "::core-1");
        snprintf(bad[k++], 160, "%s", "");
        snprintf(bad[k++], 160, "%s::core-1%050d", u, 0); /* too long */
        for (int i = 0; i < k; i++) {
                enum plugin_kind kind;
                unsigned g, n;
                if (share_parse_id(f->dev, bad[i], &kind, &g, &n) != -EINVAL)
                        fail_msg("accepted malformed ID %s", bad[i]);
        }
}

/* ---- MIG devices (docs/mig.md, "Fractions of a MIG device") ---- */

#define MIG_A "MIG-4bcc1fec-69fd-dd28-608b-42d1a184cbb8"
#define MIG_B "MIG-4d2af4e5-330e-211d-8b1f-f665fe180049"

/* GPU 0 in MIG mode with two 1g.10gb MIG devices of 9856 MiB (table 8 and 9): 38 memory IDs each. */
static int mig_setup(void **state) {
        struct test_plugin *f = test_share_new();
        static struct mig_node m;
        mig_node_init(&m, f->t.n_gpus);
        m.gpu[0].mode = 1;
        const char *uuids[] = { MIG_A, MIG_B };
        for (unsigned k = 0; k < 2; k++) {
                struct mig_device *d = &m.gpu[0].dev[m.gpu[0].n_devices++];
                d->index = k;
                d->gi = 11 + k;
                snprintf(d->profile, sizeof d->profile, "1g.10gb");
                snprintf(d->uuid, sizeof d->uuid, "%s", uuids[k]);
                d->sms = 14;
                d->memory_total = 9856 * MIB;
        }
        assert_int_equal(devices_add_mig(f->dev, &m), 2);
        *state = f;
        return 0;
}

static void test_mig_ids(void **state) {
        struct test_plugin *f = *state;
        assert_string_equal(test_device_id(f, 8), MIG_A);
        assert_int_equal(devices_info(f->dev, 8)->n_mem, 38); /* 9856 MiB / 256 MiB */
        char id[SHARE_ID_MAX];
        enum plugin_kind kind;
        unsigned g, n;
        test_share_id(f, 9, PLUGIN_MEMORY, 37, id);
        assert_string_equal(id, MIG_B "::mem-37");
        assert_true(strlen(id) <= 50);
        assert_int_equal(share_parse_id(f->dev, id, &kind, &g, &n), 0);
        assert_true(kind == PLUGIN_MEMORY && g == 9 && n == 37);
        assert_int_equal(share_parse_id(f->dev, MIG_A "::core-99", &kind, &g, &n), 0);
        assert_true(kind == PLUGIN_CORE && g == 8 && n == 99);
        test_share_id(f, 1, PLUGIN_CORE, 0, id); /* a GPU with MIG off still shares */
        assert_int_equal(share_parse_id(f->dev, id, &kind, &g, &n), 0);
        char bad[16][160];
        int k = 0;
        snprintf(bad[k++], 160, "%s::core-0", test_device_id(f, 0)); /* the GPU in MIG mode */
        snprintf(bad[k++], 160, "%s::mem-0", test_device_id(f, 0));
        snprintf(bad[k++], 160, "%s", MIG_A "::mem-38"); /* past the instance's memory */
        snprintf(bad[k++], 160, "%s", MIG_A "::core-100");
        snprintf(bad[k++], 160, "%s", "mig-4bcc1fec-69fd-dd28-608b-42d1a184cbb8::core-1"); /* case */
        snprintf(bad[k++], 160, "%s", "MIG-4bcc1fec-69fd-dd28-608b-42d1a184cbb::core-1");  /* a prefix */
        snprintf(bad[k++], 160, "%s", MIG_A "0::core-1");
        snprintf(bad[k++], 160, "%s", "MIG-::core-1");
        snprintf(bad[k++], 160, "%s", MIG_A "::core-01");
        snprintf(bad[k++], 160, "%s", MIG_A ":core-1");
        snprintf(bad[k++], 160, "%s", MIG_A);
        for (int i = 0; i < k; i++)
                if (share_parse_id(f->dev, bad[i], &kind, &g, &n) != -EINVAL)
                        fail_msg("accepted malformed ID %s", bad[i]);
}

/* A book with shares of a MIG device round-trips through the journal; on a table without that MIG
 * device (MIG off after a reboot) the journal is rejected whole. */
static void test_mig_journal(void **state) {
        struct test_plugin *f = *state;
        struct share_book *b = share_book_new(), *c = share_book_new(), *x = share_book_new();
        assert_true(b && c && x);
        struct share_rec *r = share_book_add(b, MIG_A ".core-0");
        r->first = PLUGIN_CORE;
        for (unsigned i = 0; i < 50; i++)
                assert_int_equal(share_rec_add_id(r, 8, PLUGIN_CORE, i), 0);
        for (unsigned i = 0; i < 16; i++)
                assert_int_equal(share_rec_add_id(r, 8, PLUGIN_MEMORY, i), 0);
        char *fields = share_journal_fields(f->dev, b);
        size_t len = 0;
        char *snap = share_journal_snapshot(f->dev, b, 3, fields, &len);
        assert_non_null(snap);
        assert_non_null(strstr(snap, MIG_A "::mem-15"));
        uint64_t seq = 0;
        assert_int_equal(share_journal_decode(f->dev, c, snap, len, &seq), 0);
        assert_int_equal(share_book_count(c), 1);
        size_t ka, kb;
        uint8_t *a = share_journal_key(share_book_at(b, 0), &ka), *z = share_journal_key(share_book_at(c, 0), &kb);
        assert_true(a && z && ka == kb && memcmp(a, z, ka) == 0);
        struct devices *plain = NULL;
        assert_int_equal(devices_new(&f->t, 256 * MIB, SHARE_MEM_IDS_MAX, &plain), 0);
        assert_int_equal(share_journal_decode(plain, x, snap, len, &seq), -EBADMSG);
        assert_int_equal(share_book_count(x), 0);
        devices_free(plain);
        free(a);
        free(z);
        free(snap);
        free(fields);
        share_book_free(b);
        share_book_free(c);
        share_book_free(x);
}

/* ---- Allocate ---- */

static void test_pair_writes_limits(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        V1beta1__AllocateResponse *core = NULL, *mem = NULL;
        assert_int_equal(test_share_allocate_run(f, PLUGIN_CORE, 3, 0, 25, &core, &st), RPC_OK);
        const char *path = test_share_mount(core->container_responses[0], SHARE_LIMITS_PATH);
        assert_non_null(path);
        struct gs_limits l;
        test_share_read_limits(path, &l);
        assert_int_equal(l.n_devices, 1);
        assert_int_equal(l.dev[0].core_percent, 25);
        /* no memory yet: the smallest share (one unit), never looser than the grant */
        assert_int_equal(l.dev[0].memory_bytes, 256 * MIB);

        /* The memory of the same container joins the record: the same file now carries both. */
        assert_int_equal(test_share_allocate_run(f, PLUGIN_MEMORY, 3, 10, 12, &mem, &st), RPC_OK);
        const char *path2 = test_share_mount(mem->container_responses[0], SHARE_LIMITS_PATH);
        assert_non_null(path2);
        assert_string_equal(path, path2);
        test_share_read_limits(path2, &l);
        assert_int_equal(l.version, 1);
        assert_int_equal(l.n_devices, 1);
        assert_string_equal(l.dev[0].uuid, test_device_id(f, 3));
        assert_int_equal(l.dev[0].index, 0);
        assert_int_equal(l.dev[0].core_percent, 25);
        assert_int_equal(l.dev[0].memory_bytes, 12 * 256 * MIB);
        assert_int_equal(l.core_policy, GS_CORE_HARD);
        assert_string_equal(l.region, SHARE_REGION_PATH);
        /* the container id is the dir name */
        const char *slash = strrchr(path, '/');
        assert_non_null(slash);
        assert_true(strncmp(path + strlen(plugin_options(f->p)->limits_root) + 1, l.container, strlen(l.container)) ==
                    0);

        const V1beta1__ContainerAllocateResponse *c = mem->container_responses[0];
        assert_string_equal(test_share_env(c, "LD_PRELOAD"), SHARE_LIB_PATH);
        assert_string_equal(test_share_env(c, GS_LIMITS_ENV), SHARE_LIMITS_PATH);
        assert_string_equal(test_share_env(c, "NVIDIA_VISIBLE_DEVICES"), test_device_id(f, 3));
        assert_string_equal(test_share_mount(c, SHARE_LIB_PATH), plugin_options(f->p)->interposer);
        /* /etc/ld.so.preload names the interposer (mounted under the driver's name): it loads whatever the env */
        char pre[256] = "";
        FILE *pf = fopen(test_share_mount(c, SHARE_LD_PRELOAD), "re");
        assert_non_null(pf);
        assert_non_null(fgets(pre, sizeof pre, pf));
        fclose(pf);
        assert_string_equal(pre, SHARE_LIB_PATH "\n");
        assert_null(test_share_mount(c, LIMITS_DIR_CONTAINER_NVML)); /* no real NVML known: no stand-in */
        assert_int_equal(c->n_mounts, 4);
        for (size_t i = 0; i < c->n_mounts; i++)
                assert_int_equal(c->mounts[i]->read_only, !streq(c->mounts[i]->container_path, SHARE_SHM_PATH));
        struct stat sb;
        assert_int_equal(stat(path, &sb), 0);
        assert_int_equal(sb.st_mode & 0777, 0444);
        assert_int_equal(stat(test_share_mount(c, SHARE_SHM_PATH), &sb), 0);
        assert_true(S_ISDIR(sb.st_mode) && (sb.st_mode & 0777) == 0777);

        struct plugin_usage u;
        plugin_usage(f->p, &u);
        assert_int_equal(u.core[3], 25);
        assert_int_equal(u.mem[3], 12);
        assert_true(u.frac == UINT64_C(1) << 3 && u.whole == 0);
        v1beta1__allocate_response__free_unpacked(core, NULL);
        v1beta1__allocate_response__free_unpacked(mem, NULL);
}

/* With the NVML stand-in and the real NVML known (node_nvml_libs), the answer also mounts both read-only where the
 * stand-in's $ORIGIN/../driver finds the real one, and LD_PRELOAD and /etc/ld.so.preload name the stand-in after the
 * interposer (docs/interposer.md "NVML"); with either unknown, neither (test_pair_writes_limits). */
static void test_allocate_mounts_nvml_standin(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        struct plugin_options o = *plugin_options(f->p);
        snprintf(o.nvml_standin, sizeof o.nvml_standin, "%s/libgpuslice-nvml.so", f->tmp);
        snprintf(o.nvml_real, sizeof o.nvml_real, "%s/libnvidia-ml.so.535.104.05", f->tmp);
        plugin_set_options(f->p, &o);
        V1beta1__AllocateResponse *mem = NULL;
        assert_int_equal(test_share_allocate_run(f, PLUGIN_MEMORY, 2, 0, 4, &mem, &st), RPC_OK);
        const V1beta1__ContainerAllocateResponse *c = mem->container_responses[0];
        assert_string_equal(test_share_env(c, "LD_PRELOAD"), SHARE_LIB_PATH " " LIMITS_DIR_CONTAINER_NVML);
        assert_string_equal(LIMITS_DIR_CONTAINER_NVML, "/run/gpuslice/lib/libnvidia-ml.so.1");
        assert_string_equal(LIMITS_DIR_CONTAINER_REAL_NVML, "/run/gpuslice/driver/libnvidia-ml.so.1");
        assert_string_equal(test_share_mount(c, SHARE_LIB_PATH), o.interposer);
        assert_string_equal(test_share_mount(c, LIMITS_DIR_CONTAINER_NVML), o.nvml_standin);
        assert_string_equal(test_share_mount(c, LIMITS_DIR_CONTAINER_REAL_NVML), o.nvml_real);
        assert_int_equal(c->n_mounts, 6);
        for (size_t i = 0; i < c->n_mounts; i++)
                assert_int_equal(c->mounts[i]->read_only, !streq(c->mounts[i]->container_path, SHARE_SHM_PATH));
        char pre[256] = "";
        FILE *pf = fopen(test_share_mount(c, SHARE_LD_PRELOAD), "re");
        assert_non_null(pf);
        assert_non_null(fgets(pre, sizeof pre, pf));
        fclose(pf);
        assert_string_equal(pre, SHARE_LIB_PATH " " LIMITS_DIR_CONTAINER_NVML "\n");
        v1beta1__allocate_response__free_unpacked(mem, NULL);
}

static void test_same_kind_starts_new_container(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        V1beta1__AllocateResponse *a = NULL, *b = NULL;
        assert_int_equal(test_share_allocate_run(f, PLUGIN_CORE, 1, 0, 10, &a, &st), RPC_OK);
        assert_int_equal(test_share_allocate_run(f, PLUGIN_CORE, 1, 10, 10, &b, &st), RPC_OK);
        assert_string_not_equal(test_share_mount(a->container_responses[0], SHARE_LIMITS_PATH),
                                test_share_mount(b->container_responses[0], SHARE_LIMITS_PATH));
        v1beta1__allocate_response__free_unpacked(a, NULL);
        v1beta1__allocate_response__free_unpacked(b, NULL);
}

static void test_second_resource_on_other_gpu_refused(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        V1beta1__AllocateResponse *a = NULL, *b = NULL;
        assert_int_equal(test_share_allocate_run(f, PLUGIN_MEMORY, 0, 0, 4, &a, &st), RPC_OK);
        assert_int_equal(test_share_allocate_run(f, PLUGIN_CORE, 1, 0, 10, &b, &st), RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "must be on one GPU"));
        assert_non_null(strstr(st.message, test_device_id(f, 0)));
        /* nothing recorded for the refusal, and the pending record is closed: the next core
         * allocation elsewhere is a container of its own */
        struct plugin_usage u;
        plugin_usage(f->p, &u);
        assert_int_equal(u.core[1], 0);
        assert_int_equal(test_share_allocate_run(f, PLUGIN_CORE, 1, 0, 10, &b, &st), RPC_OK);
        v1beta1__allocate_response__free_unpacked(a, NULL);
        v1beta1__allocate_response__free_unpacked(b, NULL);
}

static void test_span_and_exceed_refused(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        V1beta1__AllocateResponse *r = NULL;
        char store[200][SHARE_ID_MAX];
        char *ids[200];
        for (unsigned i = 0; i < 10; i++) {
                test_share_id(f, 0, PLUGIN_CORE, i, store[i]);
                test_share_id(f, 1, PLUGIN_CORE, i, store[10 + i]);
        }
        for (unsigned i = 0; i < 20; i++)
                ids[i] = store[i];
        assert_int_equal(test_rpc_allocate(share_allocate, share_service(f->s, PLUGIN_CORE), ids, 20, &r, &st),
                         RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "span 2 GPUs"));
        /* 150: one whole GPU and half of another */
        for (unsigned i = 0; i < 100; i++)
                test_share_id(f, 0, PLUGIN_CORE, i, store[i]);
        for (unsigned i = 0; i < 50; i++)
                test_share_id(f, 1, PLUGIN_CORE, i, store[100 + i]);
        for (unsigned i = 0; i < 150; i++)
                ids[i] = store[i];
        assert_int_equal(test_rpc_allocate(share_allocate, share_service(f->s, PLUGIN_CORE), ids, 150, &r, &st),
                         RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "multiple of 100"));
        /* 200 as 100 + 100 is two whole GPUs */
        for (unsigned i = 0; i < 100; i++)
                test_share_id(f, 1, PLUGIN_CORE, i, store[100 + i]);
        for (unsigned i = 0; i < 200; i++)
                ids[i] = store[i];
        assert_int_equal(test_rpc_allocate(share_allocate, share_service(f->s, PLUGIN_CORE), ids, 200, &r, &st),
                         RPC_OK);
        v1beta1__allocate_response__free_unpacked(r, NULL);
}

static void test_missing_interposer_refused(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        V1beta1__AllocateResponse *r = NULL;
        assert_int_equal(unlink(plugin_options(f->p)->interposer), 0);
        assert_int_equal(test_share_allocate_run(f, PLUGIN_CORE, 0, 0, 5, &r, &st), RPC_FAILED_PRECONDITION);
        assert_non_null(strstr(st.message, "interposer"));
}

static void test_two_containers_in_one_message(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        V1beta1__AllocateResponse *r = NULL;
        char s1[3][SHARE_ID_MAX], s2[2][SHARE_ID_MAX];
        char *a[3] = { s1[0], s1[1], s1[2] }, *b[2] = { s2[0], s2[1] };
        test_share_id(f, 0, PLUGIN_CORE, 0, s1[0]);
        test_share_id(f, 0, PLUGIN_CORE, 1, s1[1]);
        test_share_id(f, 0, PLUGIN_CORE, 2, s1[2]);
        test_share_id(f, 0, PLUGIN_CORE, 3, s2[0]);
        test_share_id(f, 0, PLUGIN_CORE, 2, s2[1]); /* also in the first container */
        assert_int_equal(test_share_allocate(f, PLUGIN_CORE, (char **const[]){ a, b }, (size_t[]){ 3, 2 }, 2, &r, &st),
                         RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "another container"));
        struct plugin_usage u;
        plugin_usage(f->p, &u);
        assert_int_equal(u.core[0], 0);
        test_share_id(f, 0, PLUGIN_CORE, 4, s2[1]);
        assert_int_equal(test_share_allocate(f, PLUGIN_CORE, (char **const[]){ a, b }, (size_t[]){ 3, 2 }, 2, &r, &st),
                         RPC_OK);
        assert_int_equal(r->n_container_responses, 2);
        /* two containers: two limits files, never paired with each other */
        assert_string_not_equal(test_share_mount(r->container_responses[0], SHARE_LIMITS_PATH),
                                test_share_mount(r->container_responses[1], SHARE_LIMITS_PATH));
        struct gs_limits l;
        test_share_read_limits(test_share_mount(r->container_responses[1], SHARE_LIMITS_PATH), &l);
        assert_int_equal(l.dev[0].core_percent, 2);
        v1beta1__allocate_response__free_unpacked(r, NULL);
}

/* ---- state upkeep ---- */

static void test_cleanup_removes_ended(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        V1beta1__AllocateResponse *a = NULL, *b = NULL;
        assert_int_equal(test_share_allocate_run(f, PLUGIN_CORE, 4, 0, 10, &a, &st), RPC_OK);
        assert_int_equal(test_share_allocate_run(f, PLUGIN_CORE, 5, 0, 10, &b, &st), RPC_OK);
        char gone[4400], kept[4400];
        snprintf(gone, sizeof gone, "%s", test_share_mount(a->container_responses[0], SHARE_SHM_PATH));
        snprintf(kept, sizeof kept, "%s", test_share_mount(b->container_responses[0], SHARE_SHM_PATH));
        /* a region file the container created */
        char region[4500];
        snprintf(region, sizeof region, "%s/region", gone);
        int fd = open(region, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(share_cleanup_dirs(f->s), 0); /* both live */
        /* the first container ends: PodResources no longer lists its IDs */
        for (unsigned i = 0; i < 10; i++) {
                char id[SHARE_ID_MAX];
                test_share_id(f, 4, PLUGIN_CORE, i, id);
                assert_int_equal(state_remove(plugin_record(f->p), "gpuslice.io/gpu-core", id), 0);
        }
        assert_int_equal(share_cleanup_dirs(f->s), 1);
        struct stat sb;
        assert_int_equal(stat(gone, &sb), -1);
        assert_int_equal(stat(kept, &sb), 0);
        v1beta1__allocate_response__free_unpacked(a, NULL);
        v1beta1__allocate_response__free_unpacked(b, NULL);
}

static void test_cleanup_without_root(void **state) {
        struct test_plugin *f = *state;
        assert_int_equal(share_cleanup_dirs(f->s), -ENOENT);
}

static void test_fixup_after_reconcile(void **state) {
        struct test_plugin *f = *state;
        struct state_alloc e = { .resource = "gpuslice.io/gpu-memory", .gpu_index = -1 };
        test_share_id(f, 6, PLUGIN_MEMORY, 3, e.device_id);
        assert_int_equal(state_add(plugin_record(f->p), &e), 0);
        struct state_alloc o = { .resource = "example.com/fpga", .device_id = "fpga-0", .gpu_index = -1 };
        assert_int_equal(state_add(plugin_record(f->p), &o), 0);
        assert_int_equal(plugin_record_fixup(f->p), 1);
        const struct state_alloc *a = state_find(plugin_record(f->p), "gpuslice.io/gpu-memory", e.device_id);
        assert_non_null(a);
        assert_int_equal(a->gpu_index, devices_info(f->dev, 6)->index);
        assert_int_equal(a->memory_bytes, 256 * MIB);
        assert_int_equal(state_find(plugin_record(f->p), "example.com/fpga", "fpga-0")->gpu_index, -1);
        assert_int_equal(plugin_record_fixup(f->p), 0);
}

/* ---- placement ---- */

/* The scheduler's choice of GPU reaches the fractional placement as the call's decision
 * (assign_call_begin's struct assign_ctx), passed as a parameter — no field of the plugin holds it.
 * Built here as assign_call_begin would for a pod assigned GPU 6: the preferred IDs are on GPU 6;
 * an Allocate whose IDs contradict the assignment is refused and hands out nothing; without a
 * decision the same IDs are handed out. (The decision itself, from a pod's annotation: unit-assign,
 * agent-assign-twins.) */
static void test_assignment_steers_fractions(void **state) {
        struct test_plugin *f = *state;
        struct share_service *svc = share_service(f->s, PLUGIN_CORE);
        struct gs_error st;
        uint8_t *out = NULL;
        size_t out_len = 0;
        /* GetPreferredAllocation of 30 core IDs, every core ID of every GPU available */
        unsigned n = devices_count(f->dev);
        char(*store)[SHARE_ID_MAX] = calloc((size_t)n * SHARE_CORE_IDS, SHARE_ID_MAX);
        char **avail = calloc((size_t)n * SHARE_CORE_IDS, sizeof *avail);
        assert_true(store && avail);
        for (unsigned k = 0; k < n * SHARE_CORE_IDS; k++) {
                test_share_id(f, (int)(k / SHARE_CORE_IDS), PLUGIN_CORE, k % SHARE_CORE_IDS, store[k]);
                avail[k] = store[k];
        }
        V1beta1__ContainerPreferredAllocationRequest cr = V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
        cr.available_deviceids = avail;
        cr.n_available_deviceids = (size_t)n * SHARE_CORE_IDS;
        cr.allocation_size = 30;
        V1beta1__ContainerPreferredAllocationRequest *crs[1] = { &cr };
        V1beta1__PreferredAllocationRequest preq = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
        preq.container_requests = crs;
        preq.n_container_requests = 1;
        struct assign_ctx match = { .active = true,
                                    .call = { .kind = PLUGIN_CORE, .size = 30 },
                                    .d = { .verdict = ASSIGN_MATCH,
                                           .gpus = UINT64_C(1) << devices_info(f->dev, 6)->index } };
        assert_int_equal(share_preferred_decided(svc, &preq, &match, &out, &out_len, &st), RPC_OK);
        assert_int_equal(cr.n_available_deviceids, (size_t)n * SHARE_CORE_IDS); /* narrowed, then restored */
        V1beta1__PreferredAllocationResponse *pr = v1beta1__preferred_allocation_response__unpack(NULL, out_len, out);
        free(out);
        assert_non_null(pr);
        assert_int_equal(pr->container_responses[0]->n_deviceids, 30);
        for (size_t i = 0; i < pr->container_responses[0]->n_deviceids; i++) {
                enum plugin_kind kind;
                unsigned g, num;
                assert_int_equal(share_parse_id(f->dev, pr->container_responses[0]->deviceids[i], &kind, &g, &num), 0);
                assert_int_equal(g, 6);
        }
        v1beta1__preferred_allocation_response__free_unpacked(pr, NULL);
        free(avail);
        free(store);

        /* Allocate of 10 core IDs on GPU 2 */
        char ids_store[10][SHARE_ID_MAX], *ids[10];
        for (unsigned i = 0; i < 10; i++) {
                test_share_id(f, 2, PLUGIN_CORE, i, ids_store[i]);
                ids[i] = ids_store[i];
        }
        V1beta1__ContainerAllocateRequest acr = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
        acr.devices_ids = ids;
        acr.n_devices_ids = 10;
        V1beta1__ContainerAllocateRequest *acrs[1] = { &acr };
        V1beta1__AllocateRequest areq = V1BETA1__ALLOCATE_REQUEST__INIT;
        areq.container_requests = acrs;
        areq.n_container_requests = 1;
        struct assign_ctx refuse = { .active = true,
                                     .call = { .kind = PLUGIN_CORE, .size = 10, .allocate = true },
                                     .d = { .verdict = ASSIGN_REFUSE, .why = "pod ns/p was assigned GPU 6" } };
        out = NULL;
        assert_int_equal(share_allocate_decided(svc, &areq, &refuse, &out, &out_len, &st), RPC_FAILED_PRECONDITION);
        assert_null(out);
        assert_non_null(strstr(st.message, "was assigned GPU 6"));
        struct plugin_usage u;
        devices_lock(f->dev);
        plugin_usage(f->p, &u);
        devices_unlock(f->dev);
        assert_int_equal(u.core[2], 0);
        struct assign_ctx none = { 0 };
        assert_int_equal(share_allocate_decided(svc, &areq, &none, &out, &out_len, &st), RPC_OK);
        free(out);
}

static void test_preferred_follows_pending(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        V1beta1__AllocateResponse *r = NULL;
        /* the container's core went to GPU 5 (say kubelet ignored an earlier hint): its memory follows */
        assert_int_equal(test_share_allocate_run(f, PLUGIN_CORE, 5, 0, 40, &r, &st), RPC_OK);
        int gpu = -1;
        assert_int_equal(test_share_prefer(f, PLUGIN_MEMORY, 8, NULL, 0, &gpu, &st), RPC_OK);
        assert_int_equal(gpu, 5);
        v1beta1__allocate_response__free_unpacked(r, NULL);
}

/* Issue 14: the agent dies between a container's two halves; the journal keeps the open record,
 * and the second half after the restart joins it (one dir, both limits). */
static void test_restart_keeps_pair(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        V1beta1__AllocateResponse *core = NULL, *mem = NULL;
        assert_int_equal(test_share_allocate_run(f, PLUGIN_CORE, 4, 0, 30, &core, &st), RPC_OK);
        char path[4400];
        snprintf(path, sizeof path, "%s", test_share_mount(core->container_responses[0], SHARE_LIMITS_PATH));
        char journal[256];
        snprintf(journal, sizeof journal, "%s/%s", f->tmp, SHARE_JOURNAL_FILE);
        assert_true(access(journal, R_OK) == 0); /* written before the answer */
        /* "restart": a new plugin on the same dirs */
        test_share_restart(f, 1);
        assert_int_equal(test_share_allocate_run(f, PLUGIN_MEMORY, 4, 0, 8, &mem, &st), RPC_OK);
        assert_string_equal(test_share_mount(mem->container_responses[0], SHARE_LIMITS_PATH), path);
        struct gs_limits l;
        test_share_read_limits(path, &l);
        assert_int_equal(l.dev[0].core_percent, 30);
        assert_int_equal(l.dev[0].memory_bytes, 8 * 256 * MIB);
        assert_int_equal(share_check_all(f->s), 0);
        v1beta1__allocate_response__free_unpacked(core, NULL);
        v1beta1__allocate_response__free_unpacked(mem, NULL);
}

/* Issue 14: a container whose second half fails at GetPreferredAllocation is refused by kubelet;
 * its record must not stay open for the next container. */
static void test_failed_preferred_closes_pair(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        V1beta1__AllocateResponse *core = NULL, *mem = NULL;
        assert_int_equal(test_share_allocate_run(f, PLUGIN_CORE, 2, 0, 20, &core, &st), RPC_OK);
        assert_int_not_equal(test_share_prefer(f, PLUGIN_MEMORY, 97, NULL, 0, NULL, &st), RPC_OK); /* more than a GPU */
        assert_int_equal(test_share_allocate_run(f, PLUGIN_MEMORY, 2, 0, 8, &mem, &st), RPC_OK);
        const char *a = test_share_mount(core->container_responses[0], SHARE_LIMITS_PATH);
        const char *b = test_share_mount(mem->container_responses[0], SHARE_LIMITS_PATH);
        assert_string_not_equal(a, b); /* another container: its own dir */
        struct gs_limits l;
        test_share_read_limits(a, &l);
        assert_int_equal(l.dev[0].core_percent, 20);
        assert_int_equal(l.dev[0].memory_bytes, 256 * MIB); /* never unlimited */
        test_share_read_limits(b, &l);
        assert_int_equal(l.dev[0].core_percent, 1); /* memory only: the smallest compute share */
        v1beta1__allocate_response__free_unpacked(core, NULL);
        v1beta1__allocate_response__free_unpacked(mem, NULL);
}

/* ---- pairing after a restart: PodResources as evidence (issue 14) ---- */

/* The agent dies right after a container's first half (2 memory units on GPU 6); kubelet fails that
 * container while the agent is down, after the start-up sync listed it. The next container asks for
 * 30 % core first, on GPU 3: before, the agent took it for the restored record's partner and refused
 * it ("IDs are on another GPU"); now PodResources says the record's container is gone. */
static void test_restart_failed_container_not_partner(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        V1beta1__AllocateResponse *mem = NULL, *core = NULL;
        struct test_podres k = { .f = f };
        assert_int_equal(test_share_allocate_run(f, PLUGIN_MEMORY, 6, 56, 2, &mem, &st), RPC_OK);
        test_share_id(f, 6, PLUGIN_MEMORY, 56, k.ids[0]);
        test_share_id(f, 6, PLUGIN_MEMORY, 57, k.ids[1]);
        k.n = 2;
        test_share_restart(f, 1);
        share_set_podres_sync(f->s, test_podres_sync, &k);
        assert_int_equal(test_podres_sync(&k), 0); /* the start-up sync still lists it */
        k.n = 0;                                   /* ... then kubelet fails the container */
        assert_int_equal(test_share_allocate_run(f, PLUGIN_CORE, 3, 0, 30, &core, &st), RPC_OK);
        assert_true(k.calls >= 2);
        const char *a = test_share_mount(mem->container_responses[0], SHARE_LIMITS_PATH);
        const char *b = test_share_mount(core->container_responses[0], SHARE_LIMITS_PATH);
        assert_string_not_equal(a, b);
        struct gs_limits l;
        test_share_read_limits(b, &l);
        assert_string_equal(l.dev[0].uuid, test_device_id(f, 3));
        assert_int_equal(l.dev[0].core_percent, 30);
        assert_int_equal(share_check_all(f->s), 0);
        v1beta1__allocate_response__free_unpacked(mem, NULL);
        v1beta1__allocate_response__free_unpacked(core, NULL);
}

/* The same restart, but kubelet retries the container (PodResources still lists its first half):
 * its core half joins the restored record, one dir with both limits. */
static void test_restart_listed_container_pairs(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        V1beta1__AllocateResponse *mem = NULL, *core = NULL;
        struct test_podres k = { .f = f };
        assert_int_equal(test_share_allocate_run(f, PLUGIN_MEMORY, 6, 56, 2, &mem, &st), RPC_OK);
        test_share_id(f, 6, PLUGIN_MEMORY, 56, k.ids[0]);
        test_share_id(f, 6, PLUGIN_MEMORY, 57, k.ids[1]);
        k.n = 2;
        test_share_restart(f, 1);
        share_set_podres_sync(f->s, test_podres_sync, &k);
        assert_int_equal(test_share_allocate_run(f, PLUGIN_CORE, 6, 0, 5, &core, &st), RPC_OK);
        assert_int_equal(k.calls, 1);
        const char *a = test_share_mount(mem->container_responses[0], SHARE_LIMITS_PATH);
        assert_string_equal(a, test_share_mount(core->container_responses[0], SHARE_LIMITS_PATH));
        struct gs_limits l;
        test_share_read_limits(a, &l);
        assert_int_equal(l.dev[0].core_percent, 5);
        assert_int_equal(l.dev[0].memory_bytes, 2 * 256 * MIB);
        v1beta1__allocate_response__free_unpacked(mem, NULL);
        v1beta1__allocate_response__free_unpacked(core, NULL);
}

/* A container granted before the agent died whose Allocate answer never reached kubelet (or that
 * kubelet let go while the agent was down): the first PodResources answer after the restart does not
 * list it, and its IDs stop counting against the GPU's room at once (before, for the state's 120 s
 * grace: first halves were refused for room that kubelet had free). A listed container stays. */
static void test_restart_drops_unlisted(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        V1beta1__AllocateResponse *a = NULL;
        struct test_podres k = { .f = f };
        test_share_allocate_ok(f, PLUGIN_CORE, 4, 0, 30);
        test_share_allocate_ok(f, PLUGIN_MEMORY, 4, 0, 8);
        assert_int_equal(test_share_allocate_run(f, PLUGIN_CORE, 2, 0, 50, &a, &st), RPC_OK); /* its answer is lost */
        const char *lost = test_share_mount(a->container_responses[0], SHARE_LIMITS_PATH);
        for (unsigned i = 0; i < 30; i++)
                test_share_id(f, 4, PLUGIN_CORE, i, k.ids[k.n++]);
        for (unsigned i = 0; i < 8; i++)
                test_share_id(f, 4, PLUGIN_MEMORY, i, k.ids[k.n++]);
        test_share_restart(f, 2);
        struct plugin_usage u;
        plugin_usage(f->p, &u);
        assert_int_equal(u.core[2], 50);
        assert_int_equal(test_podres_sync(&k), 0);
        devices_lock(f->dev);
        assert_int_equal(share_after_sync(f->s), 1);
        plugin_usage(f->p, &u);
        devices_unlock(f->dev);
        assert_int_equal(u.core[2], 0); /* not held by kubelet: free now */
        assert_int_equal(u.core[4], 30);
        assert_int_equal(u.mem[4], 8);
        assert_true(access(lost, F_OK) < 0);
        assert_int_equal(share_check_all(f->s), 0);
        v1beta1__allocate_response__free_unpacked(a, NULL);
}

/* Issue 14, point 2: a half joined a restored record tentatively (no PodResources to ask), and the
 * agent dies right after that join. The restart must still know the join was tentative: the next
 * call lists the record's first half as available (its container had been failed), so the join is
 * reversed and the joined container's other half joins it — one dir. Before, `tentative` was not
 * journaled: after the second restart the memory half became a container of its own (split). */
static void test_restart_keeps_tentative(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        V1beta1__AllocateResponse *old = NULL, *core = NULL, *mem = NULL;
        assert_int_equal(test_share_allocate_run(f, PLUGIN_MEMORY, 6, 56, 2, &old, &st), RPC_OK);
        test_share_restart(f, 1);                                                                /* no PodResources */
        assert_int_equal(test_share_allocate_run(f, PLUGIN_CORE, 6, 0, 30, &core, &st), RPC_OK); /* tentative join */
        test_share_restart(f, 1); /* killed right after the join */
        /* the core container's memory half: kubelet lists every memory ID, the failed container's too */
        int gpu = -1;
        assert_int_equal(test_share_prefer(f, PLUGIN_MEMORY, 8, NULL, 0, &gpu, &st), RPC_OK);
        assert_int_equal(gpu, 6); /* steered to the core half's GPU */
        assert_int_equal(test_share_allocate_run(f, PLUGIN_MEMORY, 6, 0, 8, &mem, &st), RPC_OK);
        const char *a = test_share_mount(core->container_responses[0], SHARE_LIMITS_PATH);
        assert_string_equal(a, test_share_mount(mem->container_responses[0], SHARE_LIMITS_PATH));
        struct gs_limits l;
        test_share_read_limits(a, &l);
        assert_int_equal(l.dev[0].core_percent, 30);
        assert_int_equal(l.dev[0].memory_bytes, 8 * 256 * MIB);
        assert_int_equal(share_check_all(f->s), 0);
        v1beta1__allocate_response__free_unpacked(old, NULL);
        v1beta1__allocate_response__free_unpacked(core, NULL);
        v1beta1__allocate_response__free_unpacked(mem, NULL);
}

/* The journal is a snapshot plus an append-only log: decisions append one line each, and a restart
 * rebuilds the same records from both (then folds the log into a new snapshot). */
static void test_journal_log_appends_and_restores(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        V1beta1__AllocateResponse *r[6] = { 0 };
        char snap[512], logp[512];
        snprintf(snap, sizeof snap, "%s/%s", f->tmp, SHARE_JOURNAL_FILE);
        snprintf(logp, sizeof logp, "%s/%s", f->tmp, SHARE_JOURNAL_LOG);
        assert_int_equal(test_share_allocate_run(f, PLUGIN_CORE, 1, 0, 30, &r[0], &st),
                         RPC_OK); /* first save: snapshot */
        struct stat s0, s1, l0, l1;
        assert_int_equal(stat(snap, &s0), 0);
        assert_int_equal(stat(logp, &l0), 0);
        assert_int_equal(test_share_allocate_run(f, PLUGIN_MEMORY, 1, 0, 8, &r[1], &st), RPC_OK);
        assert_int_equal(test_share_allocate_run(f, PLUGIN_MEMORY, 2, 0, 4, &r[2], &st), RPC_OK);
        assert_int_equal(test_share_allocate_run(f, PLUGIN_CORE, 2, 0, 10, &r[3], &st), RPC_OK);
        assert_int_equal(stat(snap, &s1), 0);
        assert_int_equal(stat(logp, &l1), 0);
        assert_int_equal(s1.st_ino, s0.st_ino); /* not rewritten */
        assert_true(l1.st_size > l0.st_size);   /* appended */
        struct plugin_usage u0, u1;
        plugin_usage(f->p, &u0);
        test_share_restart(f, 2);
        plugin_usage(f->p, &u1);
        assert_memory_equal(u0.core, u1.core, sizeof u0.core);
        assert_memory_equal(u0.mem, u1.mem, sizeof u0.mem);
        assert_int_equal(stat(logp, &l1), 0);
        assert_int_equal(l1.st_size, 0); /* folded into a new snapshot at start */
        assert_int_equal(share_check_all(f->s), 0);
        /* the restored records go on: a second core on GPU 1 is another container, its dir its own */
        assert_int_equal(test_share_allocate_run(f, PLUGIN_CORE, 1, 30, 20, &r[4], &st), RPC_OK);
        assert_string_not_equal(test_share_mount(r[4]->container_responses[0], SHARE_LIMITS_PATH),
                                test_share_mount(r[0]->container_responses[0], SHARE_LIMITS_PATH));
        for (unsigned i = 0; i < 6; i++)
                if (r[i])
                        v1beta1__allocate_response__free_unpacked(r[i], NULL);
}

/* The log parser: complete lines in order; a last line cut short ignored; entries at or below the
 * snapshot's skipped; everything else rejects the journal whole (nothing kept). */
static void test_journal_log_malformed(void **state) {
        struct test_plugin *f = *state;
        char id0[SHARE_ID_MAX], id1[SHARE_ID_MAX], snap[1024], rec[512], rec2[512];
        test_share_id(f, 3, PLUGIN_CORE, 0, id0);
        test_share_id(f, 3, PLUGIN_MEMORY, 0, id1);
        snprintf(rec, sizeof rec,
                 "{\"name\":\"%.40s.core-0\",\"first\":\"core\",\"open\":false,\"guessed\":false,\"restored\":false,"
                 "\"tentative\":false,\"time\":5,\"ids\":[\"%s\"]}",
                 test_device_id(f, 3), id0);
        snprintf(rec2, sizeof rec2,
                 "{\"name\":\"%.40s.mem-0\",\"first\":\"mem\",\"open\":true,\"guessed\":false,\"restored\":false,"
                 "\"tentative\":true,\"time\":6,\"ids\":[\"%s\"]}",
                 test_device_id(f, 3), id1);
        snprintf(snap, sizeof snap,
                 "{\"version\":2,\"seq\":3,\"records\":[%s],\"shapes\":[[30,12]],\"proposal\":null,\"last\":\"\"}",
                 rec);
        const char *book = "\"shapes\":[[30,12]],\"proposal\":null,\"last\":\"x\"";
        struct {
                const char *what;
                int want; /* entries applied, or -EBADMSG */
                size_t n_recs;
                char log[2048];
        } cases[16];
        unsigned n = 0;
#define CASE(w, res, nr, ...)                                             \
        do {                                                              \
                cases[n].what = (w);                                      \
                cases[n].want = (res);                                    \
                cases[n].n_recs = (nr);                                   \
                snprintf(cases[n].log, sizeof cases[n].log, __VA_ARGS__); \
                n++;                                                      \
        } while (0)
        CASE("empty", 0, 1, "%s", "");
        CASE("one put", 1, 2, "{\"seq\":4,\"del\":[],\"put\":[%s],%s}\n", rec2, book);
        CASE("torn last line ignored", 1, 2, "{\"seq\":4,\"del\":[],\"put\":[%s],%s}\n{\"seq\":5,\"del\":[", rec2,
             book);
        CASE("stale entries skipped", 1, 2,
             "{\"seq\":2,\"del\":[\"nope\"],\"put\":[],%s}\n{\"seq\":4,\"del\":[],\"put\":[%s],%s}\n", book, rec2,
             book);
        CASE("delete", 1, 0, "{\"seq\":4,\"del\":[\"%.40s.core-0\"],\"put\":[],%s}\n", test_device_id(f, 3), book);
        CASE("gap", -EBADMSG, 0, "{\"seq\":5,\"del\":[],\"put\":[%s],%s}\n", rec2, book);
        CASE("delete unknown", -EBADMSG, 0, "{\"seq\":4,\"del\":[\"x.core-1\"],\"put\":[],%s}\n", book);
        CASE("garbage line", -EBADMSG, 0, "{\"seq\":4,\"del\":[],\"put\":[],%s}\nnot json\n", book);
        CASE("extra key", -EBADMSG, 0, "{\"seq\":4,\"del\":[],\"put\":[],\"x\":1,%s}\n", book);
        CASE("missing key", -EBADMSG, 0, "{\"seq\":4,\"del\":[],%s}\n", book);
        CASE("bad ID", -EBADMSG, 0,
             "{\"seq\":4,\"del\":[],\"put\":[{\"name\":\"a.core-0\",\"first\":\"core\",\"open\":false,\"guessed\":"
             "false,"
             "\"restored\":false,\"tentative\":false,\"time\":1,\"ids\":[\"GPU-x::core-0\"]}],%s}\n",
             book);
        CASE("bad proposal GPU", -EBADMSG, 0,
             "{\"seq\":4,\"del\":[],\"put\":[],\"shapes\":[],\"proposal\":{\"kind\":\"core\",\"gpu\":\"GPU-x\","
             "\"size\":3,\"record\":\"\"},\"last\":\"\"}\n");
        CASE("shape out of range", -EBADMSG, 0,
             "{\"seq\":4,\"del\":[],\"put\":[],\"shapes\":[[101,1]],\"proposal\":null,\"last\":\"\"}\n");
        CASE("negative seq", -EBADMSG, 0, "{\"seq\":-1,\"del\":[],\"put\":[],%s}\n", book);
        CASE("control byte", -EBADMSG, 0, "{\"seq\":4,\"del\":[],\"put\":[]%c,%s}\n", 1, book);
#undef CASE
        for (unsigned i = 0; i < n; i++) { /* each on a fresh book in memory: no plugin, no file */
                struct share_book *b = share_book_new();
                uint64_t seq = 0;
                assert_non_null(b);
                assert_int_equal(share_journal_decode(f->dev, b, snap, strlen(snap), &seq), 0);
                int r = share_journal_replay(f->dev, b, cases[i].log, strlen(cases[i].log), &seq);
                if (r != cases[i].want)
                        fail_msg("%s: %d, want %d", cases[i].what, r, cases[i].want);
                size_t recs = share_book_count(b);
                share_book_free(b);
                if (recs != cases[i].n_recs)
                        fail_msg("%s: %zu records, want %zu", cases[i].what, recs, cases[i].n_recs);
        }
}

/* A first half is refused for room only on what PodResources says now: every GPU looks full of core
 * to the agent, but kubelet has let GPU 3's big container go (no sync has told the agent yet). The
 * memory half of a (20 %, 12 units) container — a shape seen before — must go to GPU 3 rather than
 * be refused (before: refused, "no GPU ... keeps 20 core IDs for the partner"). */
static void test_refusal_for_room_asks_podresources(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        static struct test_podres k;
        k = (struct test_podres){ .f = f };
        test_share_pair_on(f, 3, 0, 20, 0, 12, &k); /* shape (20, 12) learnt */
        for (int g = 0; g < 8; g++)
                if (g != 3)
                        test_share_pair_on(f, g, 0, 95, 0, 10, &k);
        size_t before = k.n;
        test_share_pair_on(f, 3, 20, 75, 12, 10, &k);
        share_set_podres_sync(f->s, test_podres_sync, &k);
        assert_int_equal(test_podres_sync(&k), 0); /* everything listed once */
        k.n = before;                              /* then GPU 3's big container ends */
        int gpu = -1;
        assert_int_equal(test_share_prefer(f, PLUGIN_MEMORY, 12, k.ids, k.n, &gpu, &st), RPC_OK);
        assert_int_equal(gpu, 3);
        /* and with kubelet still holding it, the refusal stands */
        test_share_pair_on(f, 3, 20, 75, 12, 10, &k);
        assert_int_equal(test_podres_sync(&k), 0);
        assert_int_equal(test_share_prefer(f, PLUGIN_MEMORY, 12, k.ids, k.n, &gpu, &st), RPC_RESOURCE_EXHAUSTED);
        assert_non_null(strstr(st.message, "20 core IDs for the partner"));
}

/* Kubelet records an Allocate answer before its next call: an allocation PodResources does not list
 * once kubelet called again is not held (freed at that sync, not after the 120 s grace); the last
 * answer, which kubelet may not have recorded yet, keeps the grace. */
static void test_unlisted_after_next_call_freed(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        static struct test_podres k;
        k = (struct test_podres){ .f = f };
        struct plugin_usage u;
        test_share_allocate_ok(f, PLUGIN_CORE, 2, 0, 30);
        assert_int_equal(test_podres_sync(&k), 0); /* kubelet lists nothing: the answer may be in flight */
        plugin_usage(f->p, &u);
        assert_int_equal(u.core[2], 30);
        /* kubelet's next call (the memory half's GetPreferredAllocation) */
        assert_int_equal(test_share_prefer(f, PLUGIN_MEMORY, 4, NULL, 0, NULL, &st), RPC_OK);
        assert_int_equal(test_podres_sync(&k), 0);
        plugin_usage(f->p, &u);
        assert_int_equal(u.core[2], 0); /* kubelet moved past it without listing it: not held */
        /* a listed one stays, and so does the answer after the last call */
        test_share_pair_on(f, 4, 0, 20, 0, 8, &k);
        test_share_allocate_ok(f, PLUGIN_CORE, 5, 0, 10);
        assert_int_equal(test_podres_sync(&k), 0);
        plugin_usage(f->p, &u);
        assert_int_equal(u.core[4], 20);
        assert_int_equal(u.mem[4], 8);
        assert_int_equal(u.core[5], 10);
}

/* A first half refused for room is decided again after a PodResources reconcile; a GPU that reconcile
 * frees from a whole-GPU hold is not offered in that same call: kubelet's list of the other
 * resource still marks its IDs Unhealthy until ListAndWatch reaches it, and the partner would be
 * refused (seen in make faults, seed 7: "the container's other half is on GPU 1, which has 0 IDs of
 * this kind available"). The next call may use it. */
static void test_just_freed_whole_gpu_not_offered(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        static struct test_podres k;
        k = (struct test_podres){ .f = f };
        for (int g = 0; g < 8; g++)
                if (g != 3)
                        test_share_pair_on(f, g, 0, 95, 0, 10, &k);
        struct state_alloc w = { .resource = "nvidia.com/gpu",
                                 .gpu_index = devices_info(f->dev, 3)->index,
                                 .alloc_time = 1 };
        snprintf(w.device_id, sizeof w.device_id, "%s", test_device_id(f, 3));
        assert_int_equal(state_add(plugin_record(f->p), &w), 0); /* held whole; its pod has ended, no sync saw it */
        share_set_podres_sync(f->s, test_podres_sync, &k);
        int gpu = -1;
        assert_int_equal(test_share_prefer(f, PLUGIN_CORE, 30, k.ids, k.n, &gpu, &st), RPC_RESOURCE_EXHAUSTED);
        assert_true(k.calls >= 1); /* reconciled, and GPU 3 freed ... */
        assert_null(state_find(plugin_record(f->p), "nvidia.com/gpu", test_device_id(f, 3)));
        assert_int_equal(test_share_prefer(f, PLUGIN_CORE, 30, k.ids, k.n, &gpu, &st), RPC_OK);
        assert_int_equal(gpu, 3); /* ... offered from the next call on */
}

/* The agent checks its own invariants: a limits file that differs from its grant is found. */
static void test_invariant_finds_tampered_limits(void **state) {
        struct test_plugin *f = *state;
        struct gs_error st;
        V1beta1__AllocateResponse *core = NULL;
        assert_int_equal(test_share_allocate_run(f, PLUGIN_CORE, 1, 0, 10, &core, &st), RPC_OK);
        assert_int_equal(share_check_all(f->s), 0);
        const char *path = test_share_mount(core->container_responses[0], SHARE_LIMITS_PATH);
        assert_int_equal(chmod(path, 0644), 0);
        FILE *fp = fopen(path, "we");
        assert_non_null(fp);
        fprintf(fp, "gpuslice-limits 1\ncontainer x\nregion /run/gpuslice/shm/region\ndevice 0 uuid=%s core=100\n",
                test_device_id(f, 1));
        fclose(fp);
        assert_int_equal(share_check_all(f->s), 1);
        v1beta1__allocate_response__free_unpacked(core, NULL);
}

/* ---- the book and its codec, in memory (no plugin, no file) ---- */

/* Records added, found, put in place, removed (the later ones move down), IDs counted; shapes newest
 * first without duplicates; the small fields; clear. */
static void test_book_in_memory(void **state) {
        (void)state;
        struct share_book *b = share_book_new();
        assert_non_null(b);
        struct share_rec *r = share_book_add(b, "a.core-0");
        assert_non_null(r);
        r->first = PLUGIN_CORE;
        r->open = true;
        assert_int_equal(share_rec_add_id(r, 3, PLUGIN_CORE, 0), 0);
        assert_int_equal(share_rec_add_id(r, 3, PLUGIN_CORE, 1), 0);
        assert_non_null(share_book_add(b, "b.mem-0"));
        assert_non_null(share_book_add(b, "c.core-5"));
        assert_int_equal(share_book_count(b), 3);
        r = share_book_find(b, "a.core-0");
        assert_non_null(r);
        assert_int_equal(share_rec_count(r, PLUGIN_CORE, 3), 2);
        assert_int_equal(r->gpus, UINT64_C(1) << 3);
        assert_true(share_book_open(b) == r);
        /* put: replaces the record of that name in place, its IDs moved into the book */
        struct share_rec x = { .first = PLUGIN_MEMORY };
        strscpy(x.name, "b.mem-0", sizeof x.name);
        assert_int_equal(share_rec_add_id(&x, 1, PLUGIN_MEMORY, 7), 0);
        struct share_rec *put = share_book_put(b, &x);
        assert_true(put == share_book_at(b, 1));
        assert_null(x.ids);
        assert_int_equal(share_rec_count(put, PLUGIN_MEMORY, 1), 1);
        /* remove: the later records move down */
        share_book_remove(b, share_book_at(b, 0));
        assert_int_equal(share_book_count(b), 2);
        assert_string_equal(share_book_at(b, 0)->name, "b.mem-0");
        assert_null(share_book_open(b));
        /* shapes: newest first, a repeated one moves to the front, out-of-range ones ignored */
        share_book_learn(b, 30, 12);
        share_book_learn(b, 20, 8);
        share_book_learn(b, 30, 12);
        share_book_learn(b, 101, 1);
        struct share_shape sh[SHARE_SHAPES];
        assert_int_equal(share_book_shapes(b, sh, SHARE_SHAPES), 2);
        assert_int_equal(sh[0].core, 30);
        assert_int_equal(sh[1].core, 20);
        share_book_learn(b, 30, 20);
        assert_int_equal(share_book_expect(b, PLUGIN_CORE, 30), 20);
        assert_int_equal(share_book_need(b, PLUGIN_CORE, 30), 12);
        assert_int_equal(share_book_expect(b, PLUGIN_MEMORY, 8), 20);
        assert_int_equal(share_book_expect(b, PLUGIN_CORE, 55), 0);
        share_book_set_last(b, "c.core-5");
        share_book_proposal(b)->set = true;
        share_book_clear(b);
        assert_int_equal(share_book_count(b), 0);
        assert_string_equal(share_book_last(b), "");
        assert_false(share_book_proposal_const(b)->set);
        assert_int_equal(share_book_shapes(b, sh, SHARE_SHAPES), 0);
        share_book_free(b);
}

/* A book encoded as a snapshot decodes into an equal book; a log line of its changes replays onto
 * the old one to the same records. */
static void test_journal_round_trip_in_memory(void **state) {
        struct test_plugin *f = *state;
        struct share_book *b = share_book_new(), *c = share_book_new();
        assert_true(b && c);
        struct share_rec *r = share_book_add(b, "GPU-x.core-0");
        r->first = PLUGIN_CORE;
        r->open = true;
        r->wall = 42;
        assert_int_equal(share_rec_add_id(r, 2, PLUGIN_CORE, 0), 0);
        assert_int_equal(share_rec_add_id(r, 2, PLUGIN_CORE, 1), 0);
        r = share_book_add(b, "GPU-y.mem-3");
        r->first = PLUGIN_MEMORY;
        r->tentative = true;
        assert_int_equal(share_rec_add_id(r, 5, PLUGIN_MEMORY, 3), 0);
        share_book_learn(b, 25, 24);
        share_book_set_last(b, "GPU-y.mem-3");
        *share_book_proposal(b) =
                (struct share_proposal){ .set = true, .kind = PLUGIN_MEMORY, .gpu = 5, .size = 1, .rec = "" };
        char *fields = share_journal_fields(f->dev, b);
        size_t len = 0;
        char *snap = share_journal_snapshot(f->dev, b, 7, fields, &len);
        assert_non_null(snap);
        uint64_t seq = 0;
        assert_int_equal(share_journal_decode(f->dev, c, snap, len, &seq), 0);
        assert_int_equal(seq, 7);
        assert_int_equal(share_book_count(c), 2);
        for (size_t i = 0; i < 2; i++) {
                size_t ka, kb;
                uint8_t *a = share_journal_key(share_book_at(b, i), &ka),
                        *z = share_journal_key(share_book_at(c, i), &kb);
                assert_true(a && z && ka == kb && memcmp(a, z, ka) == 0);
                assert_string_equal(share_book_at(b, i)->name, share_book_at(c, i)->name);
                free(a);
                free(z);
        }
        char *fields_c = share_journal_fields(f->dev, c);
        assert_string_equal(fields, fields_c);
        /* one change: a record closed, one deleted */
        share_book_at(b, 0)->open = false;
        const char *del[] = { "GPU-y.mem-3" };
        size_t put[] = { 0 };
        char *line = share_journal_line(f->dev, b, 8, del, 1, put, 1, fields, &len);
        assert_non_null(line);
        assert_int_equal(share_journal_replay(f->dev, c, line, len, &seq), 1);
        assert_int_equal(seq, 8);
        assert_int_equal(share_book_count(c), 1);
        assert_false(share_book_at(c, 0)->open);
        free(line);
        free(fields_c);
        free(snap);
        free(fields);
        share_book_free(b);
        share_book_free(c);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_book_in_memory),
                cmocka_unit_test_setup_teardown(test_journal_round_trip_in_memory, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart_keeps_pair, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failed_preferred_closes_pair, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart_failed_container_not_partner, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart_listed_container_pairs, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart_drops_unlisted, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart_keeps_tentative, setup, teardown),
                cmocka_unit_test_setup_teardown(test_journal_log_appends_and_restores, setup, teardown),
                cmocka_unit_test_setup_teardown(test_journal_log_malformed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_refusal_for_room_asks_podresources, setup, teardown),
                cmocka_unit_test_setup_teardown(test_invariant_finds_tampered_limits, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unlisted_after_next_call_freed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_just_freed_whole_gpu_not_offered, setup, teardown),
                cmocka_unit_test_setup_teardown(test_id_round_trip, setup, teardown),
                cmocka_unit_test_setup_teardown(test_id_malformed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_mig_ids, mig_setup, teardown),
                cmocka_unit_test_setup_teardown(test_mig_journal, mig_setup, teardown),
                cmocka_unit_test_setup_teardown(test_pair_writes_limits, setup, teardown),
                cmocka_unit_test_setup_teardown(test_allocate_mounts_nvml_standin, setup, teardown),
                cmocka_unit_test_setup_teardown(test_same_kind_starts_new_container, setup, teardown),
                cmocka_unit_test_setup_teardown(test_second_resource_on_other_gpu_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_span_and_exceed_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_missing_interposer_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_two_containers_in_one_message, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cleanup_removes_ended, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cleanup_without_root, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fixup_after_reconcile, setup, teardown),
                cmocka_unit_test_setup_teardown(test_assignment_steers_fractions, setup, teardown),
                cmocka_unit_test_setup_teardown(test_preferred_follows_pending, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
