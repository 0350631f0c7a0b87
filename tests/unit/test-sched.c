/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the scheduler extender's cluster model and decisions (src/sched/model.c,
 * decide.c), whose shares go through the fractional placement of src/alloc (fraction.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "helpers.h"
#include "sched/decide.h"
#include "sched/model.h"
#include "util/util.h"

static const struct topo_link SYS = { TOPO_LEVEL_SYS, 0 };
static const struct topo_link PIX = { TOPO_LEVEL_PIX, 0 };
static const struct topo_link NV2 = { TOPO_LEVEL_SYS, 2 };

static struct cluster_node_info *node_info(const char *name, unsigned n, uint32_t mem_mib, struct topo_link l) {
        struct cluster_node_info *i = calloc(1, sizeof *i);
        assert_non_null(i);
        strscpy(i->name, name, sizeof i->name);
        i->n_gpus = n;
        for (unsigned g = 0; g < n; g++) {
                snprintf(i->gpu[g].uuid, sizeof i->gpu[g].uuid, "GPU-%s-%u", name, g);
                i->gpu[g].mem_mib = mem_mib;
                i->gpu[g].healthy = true;
                for (unsigned h = 0; h < n; h++)
                        i->link[g][h] = g == h ? (struct topo_link){ TOPO_LEVEL_SELF, 0 } : l;
        }
        return i;
}

static void add_node(struct sched_model *m, struct cluster_node_info *i) {
        assert_int_equal(sched_model_set_node(m, i), 0);
        free(i);
}

static struct cluster_request share_req(unsigned core, uint32_t mem) {
        struct cluster_request r;
        test_share_req(&r, core, mem);
        return r;
}

static struct cluster_request whole_req(unsigned k) {
        struct cluster_request r;
        test_whole_req(&r, k);
        return r;
}

/* A pod placed on `node` with a share on GPU g. */
static void add_share_pod(struct sched_model *m, const char *uid, const char *node, unsigned g, unsigned core,
                          uint32_t mem) {
        struct sched_pod_info p = { .uid = uid, .ns = "default", .name = uid, .node = node, .bound = true };
        p.req = share_req(core, mem);
        p.has_assignment = true;
        p.assign.n = 1;
        p.assign.c[0] = (struct cluster_container_assign){ .gpus = 1ULL << g, .core = core, .mem_mib = mem };
        assert_int_equal(sched_model_set_pod(m, &p), 0);
}

static void add_whole_pod(struct sched_model *m, const char *uid, const char *node, alloc_set_t set) {
        struct sched_pod_info p = { .uid = uid, .ns = "default", .name = uid, .node = node, .bound = true };
        p.req = whole_req((unsigned)__builtin_popcountll(set));
        p.has_assignment = true;
        p.assign.n = 1;
        p.assign.c[0] = (struct cluster_container_assign){ .gpus = set, .whole = true };
        assert_int_equal(sched_model_set_pod(m, &p), 0);
}

static struct sched_model *new_model(void) {
        struct sched_model *m;
        assert_int_equal(sched_model_new(&m), 0);
        return m;
}

/* ---- filter ---- */

static void test_8gib_on_two_6gib_gpus(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        add_node(m, node_info("small", 2, 6144, PIX));
        add_node(m, node_info("big", 1, 16384, PIX));
        struct cluster_request r = share_req(50, 8192);
        struct sched_fit f;
        /* 12 GiB in total on "small", but no one GPU has 8 */
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "small"), &r, CLUSTER_POLICY_BINPACK, &f), -ENODEV);
        assert_int_equal(f.verdict, SCHED_UNRESOLVABLE);
        assert_non_null(strstr(f.reason, "largest free GPU has 6 GiB, container main needs 8 GiB"));
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "big"), &r, CLUSTER_POLICY_BINPACK, &f), 0);
        assert_int_equal(f.verdict, SCHED_FIT);
        assert_int_equal(f.assign.n, 1);
        assert_int_equal(f.assign.c[0].gpus, 1);
        sched_model_free(m);
}

static void test_no_room_reason_names_shortage(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        add_node(m, node_info("n", 2, 16384, PIX));
        add_share_pod(m, "a", "n", 0, 10, 10752); /* 10.5 GiB used: 5.5 GiB left */
        add_share_pod(m, "b", "n", 1, 10, 12288); /* 4 GiB left */
        struct cluster_request r = share_req(10, 8192);
        struct sched_fit f;
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "n"), &r, CLUSTER_POLICY_BINPACK, &f), -ENOSPC);
        assert_int_equal(f.verdict, SCHED_NO_ROOM);
        assert_string_equal(f.reason, "largest free GPU has 5.5 GiB, container main needs 8 GiB");
        /* compute is the shortage */
        add_share_pod(m, "c", "n", 0, 80, 0);
        add_share_pod(m, "d", "n", 1, 70, 0);
        r = share_req(40, 1024);
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "n"), &r, CLUSTER_POLICY_BINPACK, &f), -ENOSPC);
        assert_string_equal(f.reason, "most free compute on one GPU is 20 %, container main needs 40 %");
        /* freeing a pod makes room again */
        assert_int_equal(sched_model_remove_pod(m, "d"), 0);
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "n"), &r, CLUSTER_POLICY_BINPACK, &f), 0);
        assert_int_equal(f.assign.c[0].gpus, 2);
        sched_model_free(m);
}

static void test_unpublished_and_unknown_node(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        /* a pod on a node that has not published yet makes a placeholder */
        add_share_pod(m, "p", "later", 0, 10, 100);
        const struct sched_node *n = sched_model_node(m, "later");
        assert_non_null(n);
        assert_false(n->published);
        struct cluster_request r = share_req(10, 100);
        struct sched_fit f;
        assert_int_equal(sched_fit_node(m, n, &r, CLUSTER_POLICY_BINPACK, &f), -ENODEV);
        assert_non_null(strstr(f.reason, "publishes no GPUs"));
        add_node(m, node_info("later", 1, 1000, PIX));
        n = sched_model_node(m, "later");
        assert_true(n->published);
        assert_int_equal(n->gpu[0].mem_used_mib, 100); /* the earlier pod is counted */
        assert_int_equal(n->gpu[0].core_used, 10);
        assert_int_equal(sched_model_remove_node(m, "later"), 0);
        assert_non_null(sched_model_node(m, "later")); /* its pod keeps the placeholder */
        assert_int_equal(sched_model_remove_pod(m, "p"), 0);
        assert_null(sched_model_node(m, "later"));
        assert_int_equal(sched_model_remove_node(m, "later"), -ENOENT);
        sched_model_free(m);
}

static void test_whole_and_shared_never_overlap(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        struct cluster_node_info *i = node_info("n", 4, 16384, PIX);
        i->gpu[3].healthy = false;
        add_node(m, i);
        add_share_pod(m, "s", "n", 0, 10, 1024); /* GPU 0 shared */
        add_whole_pod(m, "w", "n", 1ULL << 1);   /* GPU 1 held whole */
        struct sched_fit f;
        struct cluster_request r = whole_req(1);
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "n"), &r, CLUSTER_POLICY_BINPACK, &f), 0);
        assert_int_equal(f.assign.c[0].gpus, 1ULL << 2); /* the only healthy free one */
        assert_true(f.assign.c[0].whole);
        r = whole_req(2);
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "n"), &r, CLUSTER_POLICY_BINPACK, &f), -ENOSPC);
        assert_string_equal(f.reason, "1 of 4 GPUs free whole (1 shared, 1 held, 1 unhealthy), container main needs 2");
        r = whole_req(4);
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "n"), &r, CLUSTER_POLICY_BINPACK, &f), -ENODEV);
        assert_int_equal(f.verdict, SCHED_UNRESOLVABLE); /* one GPU is unhealthy: never 4 */
        /* a share never goes to the held or unhealthy GPU: binpack takes the shared GPU 0 */
        r = share_req(20, 2048);
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "n"), &r, CLUSTER_POLICY_BINPACK, &f), 0);
        assert_int_equal(f.assign.c[0].gpus, 1ULL << 0);
        r = share_req(20, 2048);
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "n"), &r, CLUSTER_POLICY_SPREAD, &f), 0);
        assert_int_equal(f.assign.c[0].gpus, 1ULL << 2);
        sched_model_free(m);
}

static void test_multi_container_fitted_together(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        add_node(m, node_info("two10", 2, 10240, PIX));
        add_node(m, node_info("one12", 1, 12288, PIX));
        struct cluster_request r = { .n = 2, .profile = CLUSTER_PROFILE_GPUSLICE };
        strscpy(r.c[0].name, "a", sizeof r.c[0].name);
        strscpy(r.c[1].name, "b", sizeof r.c[1].name);
        r.c[0].core = 30;
        r.c[0].mem_mib = 8192;
        r.c[1].core = 30;
        r.c[1].mem_mib = 8192;
        struct sched_fit f;
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "two10"), &r, CLUSTER_POLICY_BINPACK, &f), 0);
        assert_int_equal(f.assign.c[0].gpus | f.assign.c[1].gpus, 3); /* one each */
        /* each alone fits the 12 GiB GPU, together they do not */
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "one12"), &r, CLUSTER_POLICY_BINPACK, &f), -ENODEV);
        assert_non_null(strstr(f.reason, "after placing 1 other container"));
        /* whole + share in one pod: the share must not land on the whole GPU */
        r.c[0] = (struct cluster_container_req){ .name = "w", .whole = 1 };
        r.c[1].mem_mib = 1024;
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "two10"), &r, CLUSTER_POLICY_BINPACK, &f), 0);
        assert_true(f.assign.c[0].whole);
        assert_int_not_equal(f.assign.c[0].gpus, f.assign.c[1].gpus);
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "one12"), &r, CLUSTER_POLICY_BINPACK, &f), -ENODEV);
        sched_model_free(m);
}

/* 8 GPUs, two NVLink quads (0-3, 4-7) joined by SYS, like a two-socket NVLink box. */
static struct cluster_node_info *quad_node(const char *name) {
        struct cluster_node_info *i = node_info(name, 8, 32768, SYS);
        for (unsigned a = 0; a < 8; a++)
                for (unsigned b = 0; b < 8; b++)
                        if (a != b && a / 4 == b / 4)
                                i->link[a][b] = NV2;
        return i;
}

static void test_4gpu_ring_prefers_nvlink_island(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        add_node(m, quad_node("ring"));  /* GPUs 4-7 will be free: one NVLink quad */
        add_node(m, quad_node("cross")); /* 2 free on each quad: the ring crosses SYS */
        add_whole_pod(m, "r1", "ring", 0xfULL);
        add_whole_pod(m, "c1", "cross", (1ULL << 0) | (1ULL << 1) | (1ULL << 4) | (1ULL << 5));
        assert_int_equal(sched_model_n_topo_classes(m), 1); /* identical servers share one class */
        struct cluster_request r = whole_req(4);
        struct sched_fit f[2];
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "ring"), &r, CLUSTER_POLICY_BINPACK, &f[0]), 0);
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "cross"), &r, CLUSTER_POLICY_BINPACK, &f[1]), 0);
        assert_int_equal(f[0].assign.c[0].gpus, 0xf0ULL);
        assert_int_equal(f[0].ring_bw, topo_link_bw(NV2));
        assert_int_equal(f[1].ring_bw, topo_link_bw(SYS));
        int s[2];
        for (int p = 0; p < 2; p++) {
                sched_score_fits(f, 2, (enum cluster_policy)p, s);
                assert_true(s[0] > s[1]);
                assert_true(s[0] >= 0 && s[0] <= 10 && s[1] >= 0 && s[1] <= 10);
        }
        /* memoised: the same question gives the same answer */
        alloc_set_t set;
        unsigned bw;
        const struct sched_node *n = sched_model_node(m, "ring");
        assert_int_equal(sched_model_pick_whole(m, n, 0xf0, 4, &set, &bw), 0);
        assert_int_equal(set, 0xf0);
        assert_int_equal(sched_model_pick_whole(m, n, 0xf0, 4, &set, &bw), 0);
        assert_int_equal(set, 0xf0);
        assert_int_equal(sched_model_pick_whole(m, n, 0x70, 4, &set, &bw), -ENOSPC);
        sched_model_free(m);
}

static void test_scores_binpack_and_spread(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        add_node(m, node_info("empty", 2, 16384, PIX));
        add_node(m, node_info("busy", 2, 16384, PIX));
        add_share_pod(m, "x", "busy", 0, 50, 8192);
        struct cluster_request r = share_req(20, 4096);
        struct sched_fit f[2];
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "empty"), &r, CLUSTER_POLICY_BINPACK, &f[0]), 0);
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "busy"), &r, CLUSTER_POLICY_BINPACK, &f[1]), 0);
        int s[2];
        sched_score_fits(f, 2, CLUSTER_POLICY_BINPACK, s);
        assert_true(s[1] > s[0]);
        sched_score_fits(f, 2, CLUSTER_POLICY_SPREAD, s);
        assert_true(s[0] > s[1]);
        /* a node that did not fit scores 0 */
        f[0].verdict = SCHED_NO_ROOM;
        sched_score_fits(f, 2, CLUSTER_POLICY_SPREAD, s);
        assert_int_equal(s[0], 0);
        sched_model_free(m);
}

static void test_assume_forget_no_double_booking(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        add_node(m, node_info("n", 2, 16384, PIX));
        struct cluster_request r = share_req(60, 10240);
        struct sched_fit f;
        struct sched_pod_info p1 = { .uid = "u1", .ns = "d", .name = "p1", .req = r };
        struct sched_pod_info p2 = { .uid = "u2", .ns = "d", .name = "p2", .req = r };
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "n"), &r, CLUSTER_POLICY_BINPACK, &f), 0);
        assert_int_equal(sched_model_assume_pod(m, &p1, "n", &f.assign, 1), 0);
        alloc_set_t first = f.assign.c[0].gpus;
        /* the same identical pod now goes to the other GPU */
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "n"), &r, CLUSTER_POLICY_BINPACK, &f), 0);
        assert_int_not_equal(f.assign.c[0].gpus, first);
        assert_int_equal(sched_model_assume_pod(m, &p2, "n", &f.assign, 2), 0);
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "n"), &r, CLUSTER_POLICY_BINPACK, &f), -ENOSPC);
        /* the watch brings an older view of p1 (pending, no annotation): the assumption stays */
        assert_int_equal(sched_model_set_pod(m, &p1), 0);
        assert_true(sched_model_pod(m, "u1")->assumed);
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "n"), &r, CLUSTER_POLICY_BINPACK, &f), -ENOSPC);
        /* the watch sees p1 bound but our annotation not yet: the assumption stays */
        p1.node = "n";
        p1.bound = true;
        assert_int_equal(sched_model_set_pod(m, &p1), 0);
        assert_true(sched_model_pod(m, "u1")->assumed);
        assert_int_equal(sched_model_pod(m, "u1")->c[0].assign.gpus, first);
        /* bind of p2 failed: forget it, its GPU is free again */
        assert_int_equal(sched_model_forget_pod(m, "u2"), 0);
        assert_null(sched_model_pod(m, "u2"));
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "n"), &r, CLUSTER_POLICY_BINPACK, &f), 0);
        /* forget of a confirmed pod changes nothing */
        p1.has_assignment = true;
        p1.assign.n = 1;
        p1.assign.c[0] = (struct cluster_container_assign){ .gpus = first, .core = 60, .mem_mib = 10240 };
        assert_int_equal(sched_model_set_pod(m, &p1), 0);
        assert_false(sched_model_pod(m, "u1")->assumed);
        assert_int_equal(sched_model_forget_pod(m, "u1"), 0);
        assert_non_null(sched_model_pod(m, "u1"));
        assert_int_equal(sched_model_forget_pod(m, "nope"), -ENOENT);
        sched_model_free(m);
}

static void test_inferred_pods_and_recount(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        add_node(m, node_info("n", 2, 8192, PIX));
        /* bound without an assignment (scheduled without us): placed by our fit */
        struct sched_pod_info p = { .uid = "i", .ns = "d", .name = "i", .node = "n", .bound = true };
        p.req = share_req(50, 6144);
        assert_int_equal(sched_model_set_pod(m, &p), 0);
        const struct sched_pod *pod = sched_model_pod(m, "i");
        assert_true(pod->inferred);
        assert_int_equal(__builtin_popcountll(pod->c[0].assign.gpus), 1);
        const struct sched_node *n = sched_model_node(m, "n");
        assert_int_equal(n->gpu[0].mem_used_mib + n->gpu[1].mem_used_mib, 6144);
        /* the node republishes with bigger GPUs: everything is re-counted */
        add_node(m, node_info("n", 1, 20000, PIX));
        n = sched_model_node(m, "n");
        assert_int_equal(n->n_gpus, 1);
        assert_int_equal(n->gpu[0].mem_used_mib, 6144);
        /* terminated: gone */
        p.terminated = true;
        assert_int_equal(sched_model_set_pod(m, &p), 0);
        assert_null(sched_model_pod(m, "i"));
        assert_int_equal(sched_model_node(m, "n")->gpu[0].mem_used_mib, 0);
        assert_int_equal(sched_model_n_pods(m), 0);
        sched_model_free(m);
}

static void test_bad_input(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        struct cluster_node_info *i = node_info("", 1, 1, PIX);
        assert_int_equal(sched_model_set_node(m, i), -EINVAL);
        free(i);
        struct sched_pod_info p = { 0 };
        assert_int_equal(sched_model_set_pod(m, &p), -EINVAL);
        add_node(m, node_info("n", 1, 1024, PIX));
        struct cluster_request r = share_req(200, 1);
        struct sched_fit f;
        assert_int_equal(sched_fit_node(m, sched_model_node(m, "n"), &r, CLUSTER_POLICY_BINPACK, &f), -EINVAL);
        /* an assignment naming a GPU the node does not have is ignored, not a crash */
        add_share_pod(m, "x", "n", 5, 10, 10);
        assert_int_equal(sched_model_node(m, "n")->gpu[0].mem_used_mib, 0);
        enum cluster_policy pol;
        assert_int_equal(cluster_policy_from_name("spread", &pol), 0);
        assert_int_equal(pol, CLUSTER_POLICY_SPREAD);
        assert_int_equal(cluster_policy_from_name("fast", &pol), -EINVAL);
        char b[32];
        assert_string_equal(sched_format_mib(512, b, sizeof b), "512 MiB");
        assert_string_equal(sched_format_mib(5632, b, sizeof b), "5.5 GiB");
        sched_model_free(m);
}

static void test_many_nodes_and_pods(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        char name[32], uid[32];
        for (int k = 0; k < 300; k++) {
                snprintf(name, sizeof name, "n%d", k);
                add_node(m, quad_node(name));
        }
        for (int k = 0; k < 3000; k++) {
                snprintf(name, sizeof name, "n%d", k % 300);
                snprintf(uid, sizeof uid, "p%d", k);
                add_share_pod(m, uid, name, (unsigned)(k % 8), 5, 512);
        }
        assert_int_equal(sched_model_n_nodes(m), 300);
        assert_int_equal(sched_model_n_pods(m), 3000);
        for (int k = 0; k < 3000; k += 2) {
                snprintf(uid, sizeof uid, "p%d", k);
                assert_int_equal(sched_model_remove_pod(m, uid), 0);
        }
        assert_int_equal(sched_model_n_pods(m), 1500);
        size_t cur = 0, seen = 0;
        uint64_t used = 0;
        const struct sched_node *n;
        while ((n = sched_model_next_node(m, &cur))) {
                seen++;
                for (unsigned g = 0; g < n->n_gpus; g++)
                        used += n->gpu[g].mem_used_mib;
        }
        assert_int_equal(seen, 300);
        assert_int_equal(used, 1500 * 512);
        sched_model_free(m);
}

/* A small deterministic generator (the test must replay the same clusters everywhere). */
static uint64_t rnd_state = 0x9e3779b97f4a7c15ULL;
static unsigned rnd(unsigned n) {
        rnd_state ^= rnd_state << 13;
        rnd_state ^= rnd_state >> 7;
        rnd_state ^= rnd_state << 17;
        return n ? (unsigned)(rnd_state % n) : 0;
}

static struct cluster_container_req rnd_container(unsigned max_gpus) {
        struct cluster_container_req c = { 0 };
        strscpy(c.name, "c", sizeof c.name);
        switch (rnd(6)) {
                case 0: c.whole = 1 + rnd(max_gpus + 1); break; /* sometimes more than the node has */
                case 1: c.core = 1 + rnd(100); break;
                case 2: c.mem_mib = 256 * (1 + rnd(64)); break;
                case 3: c.whole = 1; break;
                default: c.core = 1 + rnd(100); c.mem_mib = 256 * (1 + rnd(64));
        }
        return c;
}

/* The summary fast path (sched_fit_node) and the full path (allocator, fractional placement,
 * room) agree on every node of random clusters, for every verdict, GPU, score input and reason,
 * one- and two-container pods, while pods come, go and are re-counted. */
static void test_fast_path_matches_full(void **state) {
        (void)state;
        static const struct topo_link links[] = {
                { TOPO_LEVEL_SYS, 0 }, { TOPO_LEVEL_PIX, 0 },   { TOPO_LEVEL_PHB, 0 },
                { TOPO_LEVEL_SYS, 2 }, { TOPO_LEVEL_NODE, 12 }, { TOPO_LEVEL_PXB, 1 }
        };
        unsigned checked = 0, fits = 0, fails = 0, whole_fits = 0, share_fits = 0, multi_fits = 0;
        for (unsigned round = 0; round < 40; round++) {
                struct sched_model *m = new_model();
                unsigned n_nodes = 4 + rnd(12);
                char name[32], uid[48];
                for (unsigned k = 0; k < n_nodes; k++) {
                        snprintf(name, sizeof name, "n%u", k);
                        unsigned ng = k % 7 == 6 ? 9 + rnd(4) : 1 + rnd(8); /* some past the summary's 8 */
                        struct cluster_node_info *i = node_info(name, ng, 4096u * (1 + rnd(8)), links[rnd(6)]);
                        for (unsigned g = 0; g < ng; g++) {
                                i->gpu[g].healthy = rnd(10) != 0;
                                if (rnd(4) == 0)
                                        i->gpu[g].mem_mib = 1024u * (1 + rnd(40));
                                for (unsigned h = g + 1; h < ng; h++)
                                        i->link[g][h] = i->link[h][g] = links[rnd(6)];
                        }
                        add_node(m, i);
                }
                /* pods: assigned shares and whole GPUs (sometimes overbooked, as around us), inferred ones */
                unsigned n_pods = rnd(8 * n_nodes);
                for (unsigned k = 0; k < n_pods; k++) {
                        snprintf(name, sizeof name, "n%u", rnd(n_nodes));
                        snprintf(uid, sizeof uid, "r%u-p%u", round, k);
                        const struct sched_node *nd = sched_model_node(m, name);
                        unsigned g = rnd(nd->n_gpus);
                        unsigned kind = rnd(5);
                        if (kind == 0)
                                add_whole_pod(m, uid, name, 1ULL << g);
                        else if (kind == 4) {
                                struct sched_pod_info p = {
                                        .uid = uid, .ns = "d", .name = uid, .node = name, .bound = true
                                };
                                p.req = share_req(1 + rnd(40), 256 * (1 + rnd(16)));
                                assert_int_equal(sched_model_set_pod(m, &p), 0); /* inferred */
                        } else
                                add_share_pod(m, uid, name, g, 1 + rnd(60), 256 * (1 + rnd(32)));
                        if (rnd(6) == 0) { /* and some leave again */
                                snprintf(uid, sizeof uid, "r%u-p%u", round, rnd(k + 1));
                                (void)sched_model_remove_pod(m, uid);
                        }
                }
                for (unsigned q = 0; q < 60; q++) {
                        struct cluster_request req = { .n = rnd(5) == 0 ? 2 : 1, .profile = CLUSTER_PROFILE_GPUSLICE };
                        for (unsigned c = 0; c < req.n; c++)
                                req.c[c] = rnd_container(8);
                        enum cluster_policy pol = rnd(2) ? CLUSTER_POLICY_SPREAD : CLUSTER_POLICY_BINPACK;
                        size_t cur = 0;
                        const struct sched_node *n;
                        while ((n = sched_model_next_node(m, &cur))) {
                                struct sched_fit a, b;
                                memset(&a, 0x5a, sizeof a); /* whatever the caller's buffer held */
                                memset(&b, 0xa5, sizeof b);
                                int ra = sched_fit_node(m, n, &req, pol, &a);
                                int rb = sched_fit_node_full(m, n, &req, pol, &b);
                                assert_int_equal(ra, rb);
                                assert_int_equal(a.verdict, b.verdict);
                                assert_string_equal(a.reason, b.reason);
                                assert_int_equal(a.assign.n, b.assign.n);
                                for (unsigned c = 0; c < a.assign.n; c++) {
                                        assert_int_equal(a.assign.c[c].gpus, b.assign.c[c].gpus);
                                        assert_int_equal(a.assign.c[c].whole, b.assign.c[c].whole);
                                        assert_int_equal(a.assign.c[c].core, b.assign.c[c].core);
                                        assert_int_equal(a.assign.c[c].mem_mib, b.assign.c[c].mem_mib);
                                }
                                if (a.verdict == SCHED_FIT) {
                                        assert_true(a.pack == b.pack); /* bit for bit: scores must not move */
                                        assert_int_equal(a.ring_bw, b.ring_bw);
                                        assert_int_equal(a.whole_count, b.whole_count);
                                        fits++;
                                        if (req.n == 1 && req.c[0].whole)
                                                whole_fits++;
                                        else if (req.n == 1)
                                                share_fits++;
                                        else
                                                multi_fits++;
                                } else
                                        fails++;
                                checked++;
                        }
                }
                sched_model_free(m);
        }
        /* the generator must reach every branch for the comparison to mean something */
        assert_true(checked > 10000);
        assert_true(whole_fits > 500 && share_fits > 1000 && multi_fits > 500 && fails > 1000);
        (void)fits;
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_8gib_on_two_6gib_gpus),
                cmocka_unit_test(test_no_room_reason_names_shortage),
                cmocka_unit_test(test_unpublished_and_unknown_node),
                cmocka_unit_test(test_whole_and_shared_never_overlap),
                cmocka_unit_test(test_multi_container_fitted_together),
                cmocka_unit_test(test_4gpu_ring_prefers_nvlink_island),
                cmocka_unit_test(test_scores_binpack_and_spread),
                cmocka_unit_test(test_assume_forget_no_double_booking),
                cmocka_unit_test(test_inferred_pods_and_recount),
                cmocka_unit_test(test_bad_input),
                cmocka_unit_test(test_many_nodes_and_pods),
                cmocka_unit_test(test_fast_path_matches_full),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
