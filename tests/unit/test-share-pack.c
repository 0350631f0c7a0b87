/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node agent's own placement of a share (no extender: src/agent/share-pack.c, alloc_pick_fraction's
 * prefer) picks the GPU the extender's packing policy picks (src/sched/pack.c: sched_pack_score, which
 * the replay places by, and sched_pack_share_gpu, which the extender's bind asks) on the same node state,
 * for a set of node states and requests under fgd and frag; and the choice is the policy's, not
 * binpack's (some of the cases differ from the agent's binpack order).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "agent/share-internal.h"
#include "alloc/fraction.h"
#include "sched/model.h"
#include "sched/pack.h"
#include "util/util.h"

#define NG 4

/* A model with one node of NG GPUs whose compute is used as `used` says (one share pod per GPU). */
static struct sched_model *node_with(const unsigned *used, const struct sched_node **ret) {
        struct sched_model *m;
        assert_int_equal(sched_model_new(&m), 0);
        static struct cluster_node_info info;
        memset(&info, 0, sizeof info);
        strscpy(info.name, "n", sizeof info.name);
        info.n_gpus = NG;
        for (unsigned g = 0; g < NG; g++) {
                info.gpu[g].healthy = true;
                info.gpu[g].mem_mib = 40960;
                for (unsigned h = 0; h < NG; h++)
                        info.link[g][h].pcie = g == h ? TOPO_LEVEL_SELF : TOPO_LEVEL_SYS;
        }
        assert_int_equal(sched_model_set_node(m, &info), 0);
        for (unsigned g = 0; g < NG; g++) {
                if (!used[g])
                        continue;
                char uid[16];
                snprintf(uid, sizeof uid, "p%u", g);
                struct sched_pod_info p = { .uid = uid, .ns = "t", .name = uid, .node = "n", .bound = true };
                p.req.n = 1;
                p.req.c[0].core = used[g];
                struct cluster_assignment a = { .n = 1 };
                a.c[0] = (struct cluster_container_assign){ .gpus = 1ULL << g, .core = used[g] };
                assert_int_equal(sched_model_assume_pod(m, &p, "n", &a, 0), 0);
        }
        *ret = sched_model_node(m, "n");
        assert_non_null(*ret);
        return m;
}

/* What the agent's GetPreferredAllocation asks alloc_pick_fraction for a compute first half of `core`. */
static int agent_pick(const unsigned *used, unsigned core, enum cluster_policy pol, const struct sched_workload *w) {
        struct alloc_frac_request q = {
                .kind = ALLOC_FRAC_CORE, .policy = ALLOC_FRAC_BINPACK, .size = core, .partner = -1, .n = NG
        };
        for (unsigned g = 0; g < NG; g++)
                q.gpu[g] = (struct alloc_frac_gpu){
                        .usable = true, .total = { 100, 160 }, .used = { used[g], 0 }, .avail = 100 - used[g]
                };
        if (pol != CLUSTER_POLICY_BINPACK)
                share_pack_prefer(&q, pol, w);
        struct alloc_frac_decision d;
        int r = alloc_pick_fraction(&q, &d);
        return r < 0 ? -1 : d.gpu;
}

static void test_agent_and_extender_pick_the_same_gpu(void **state) {
        (void)state;
        /* a workload of shares and whole GPUs (the extender's live mix would give one like it) */
        struct sched_mix mix = { 0 };
        static const struct {
                unsigned milli, count;
        } shapes[] = { { 300, 6 }, { 500, 4 }, { 1000, 3 }, { 200, 2 }, { 700, 1 } };
        for (size_t i = 0; i < ELEMENTSOF(shapes); i++)
                for (unsigned k = 0; k < shapes[i].count; k++) {
                        struct sched_shape s = { .num_gpu = 1, .gpu_milli = shapes[i].milli };
                        assert_int_equal(sched_mix_add(&mix, &s), 0);
                }
        struct sched_workload w;
        sched_mix_workload(&mix, 0.95, false, &w);
        static const unsigned states[][NG] = { { 0, 0, 0, 0 },    { 50, 0, 0, 0 },   { 70, 30, 0, 0 },
                                               { 80, 50, 20, 0 }, { 50, 50, 70, 0 }, { 30, 60, 90, 10 },
                                               { 0, 0, 40, 70 },  { 95, 90, 80, 75 } };
        static const unsigned cores[] = { 10, 20, 25, 30, 50, 70 };
        static const enum cluster_policy pols[] = { CLUSTER_POLICY_FRAG, CLUSTER_POLICY_FGD };
        unsigned compared = 0, unlike_binpack = 0;
        for (size_t si = 0; si < ELEMENTSOF(states); si++) {
                const struct sched_node *n;
                struct sched_model *m = node_with(states[si], &n);
                for (size_t ci = 0; ci < ELEMENTSOF(cores); ci++)
                        for (size_t pi = 0; pi < ELEMENTSOF(pols); pi++) {
                                struct sched_pack_ctx ctx = { .gpu_norm = 1000 * NG, .w = &w };
                                struct sched_shape s = { .num_gpu = 1, .gpu_milli = 10 * cores[ci] };
                                int replay = -1;
                                (void)sched_pack_score(&ctx, n, &s, pols[pi], &replay);
                                unsigned free_milli[CLUSTER_GPUS_MAX];
                                unsigned k = sched_pack_share_free(n, cores[ci], 0, free_milli);
                                int bind = sched_pack_share_gpu(&ctx, free_milli, k, n->product, &s, pols[pi]);
                                int agent = agent_pick(states[si], cores[ci], pols[pi], &w);
                                int binpack = agent_pick(states[si], cores[ci], CLUSTER_POLICY_BINPACK, NULL);
                                if (replay != bind || (replay >= 0 && agent != replay))
                                        fail_msg("state %zu, core %u, %s: replay GPU %d, bind %d, agent %d", si,
                                                 cores[ci], cluster_policy_name(pols[pi]), replay, bind, agent);
                                if (replay < 0) /* nothing fits: the agent refuses too */
                                        assert_int_equal(agent, -1);
                                compared += replay >= 0;
                                unlike_binpack += replay >= 0 && agent != binpack;
                        }
                sched_model_free(m);
        }
        assert_true(compared > 60);
        if (!unlike_binpack)
                fail_msg("every case chose binpack's GPU: the test would not see the policy missing");
        sched_mix_free(&mix);
}

/* The prefer of a request is honoured only among the candidates; a partner never gets one. */
static void test_prefer_only_among_candidates(void **state) {
        (void)state;
        struct alloc_frac_request q = { .kind = ALLOC_FRAC_CORE, .size = 40, .partner = -1, .n = 3 };
        for (unsigned g = 0; g < 3; g++)
                q.gpu[g] = (struct alloc_frac_gpu){ .usable = true, .total = { 100, 0 }, .avail = 100 };
        q.gpu[1].avail = 30; /* too little */
        struct alloc_frac_decision d;
        q.has_prefer = true;
        q.prefer = 1;
        assert_int_equal(alloc_pick_fraction(&q, &d), 0);
        assert_int_not_equal(d.gpu, 1);
        q.prefer = 2;
        assert_int_equal(alloc_pick_fraction(&q, &d), 0);
        assert_int_equal(d.gpu, 2);
        assert_int_equal(d.reason, ALLOC_FRAC_PACKING);
        q.prefer = 9; /* out of range: the policy order */
        assert_int_equal(alloc_pick_fraction(&q, &d), 0);
        assert_int_equal(d.gpu, 0);
        struct sched_workload w = { 0 };
        q.partner = 0;
        share_pack_prefer(&q, CLUSTER_POLICY_FRAG, &w);
        assert_false(q.has_prefer);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_agent_and_extender_pick_the_same_gpu),
                cmocka_unit_test(test_prefer_only_among_candidates),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
