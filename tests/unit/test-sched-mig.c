/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the scheduler extender's MIG placement (src/sched/decide.c, model.c): nvidia.com/mig-*
 * requests by the free devices of the node annotation less the pods in flight, the one-parent
 * preference in the scores, `single` nodes serving MIG devices as nvidia.com/gpu, and a GPU in MIG mode
 * never offered whole or as a share.
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

/* A node of n A100-80GB GPUs; GPUs in mig_mask are in MIG mode with no devices yet. */
static struct cluster_node_info *mig_node(const char *name, unsigned n, uint64_t mig_mask, const char *strategy) {
        struct cluster_node_info *i = calloc(1, sizeof *i);
        assert_non_null(i);
        strscpy(i->name, name, sizeof i->name);
        strscpy(i->mig_strategy, strategy, sizeof i->mig_strategy);
        i->n_gpus = n;
        for (unsigned g = 0; g < n; g++) {
                snprintf(i->gpu[g].uuid, sizeof i->gpu[g].uuid, "GPU-%s-%u", name, g);
                i->gpu[g].mem_mib = 81920;
                i->gpu[g].healthy = true;
                i->gpu[g].mig = (mig_mask >> g & 1) != 0;
                for (unsigned h = 0; h < n; h++)
                        i->link[g][h] = g == h ? (struct topo_link){ TOPO_LEVEL_SELF, 0 }
                                               : (struct topo_link){ TOPO_LEVEL_SYS, 12 };
        }
        return i;
}

/* count MIG devices of profile on GPU g, holder for the first `held` of them ("" none). */
static void add_mig(struct cluster_node_info *i, unsigned g, const char *profile, unsigned count, unsigned held,
                    const char *holder, bool healthy) {
        for (unsigned k = 0; k < count; k++) {
                struct cluster_mig_info *m = &i->gpu[g].mig_dev[i->gpu[g].n_mig];
                *m = (struct cluster_mig_info){ .index = i->gpu[g].n_mig, .mem_mib = 9856, .healthy = healthy };
                snprintf(m->uuid, sizeof m->uuid, "MIG-%u-%u", g, i->gpu[g].n_mig);
                strscpy(m->profile, profile, sizeof m->profile);
                if (k < held)
                        strscpy(m->holder, holder, sizeof m->holder);
                i->gpu[g].n_mig++;
        }
}

static struct cluster_request mig_req(const char *profile, unsigned count) {
        struct cluster_request r = { .n_mig = 1 };
        strscpy(r.mig[0].profile, profile, sizeof r.mig[0].profile);
        r.mig[0].count = count;
        return r;
}

static struct cluster_request whole_req(unsigned k) {
        struct cluster_request r;
        test_whole_req(&r, k);
        return r;
}

static struct cluster_request share_req(unsigned core, uint32_t mem) {
        struct cluster_request r;
        test_share_req(&r, core, mem);
        return r;
}

static struct sched_model *new_model(void) {
        struct sched_model *m;
        assert_int_equal(sched_model_new(&m), 0);
        return m;
}

static void set_node(struct sched_model *m, struct cluster_node_info *i) {
        assert_int_equal(sched_model_set_node(m, i), 0);
}

static int fit(struct sched_model *m, const char *node, const struct cluster_request *r, struct sched_fit *f) {
        return sched_fit_node(m, sched_model_node(m, node), r, CLUSTER_POLICY_BINPACK, f);
}

static void test_mig_filtered_by_free_counts(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        struct cluster_node_info *i = mig_node("a", 2, 3, "mixed");
        add_mig(i, 0, "1g.10gb", 2, 1, "ml/x", true); /* one held, one free */
        add_mig(i, 0, "1g.10gb", 1, 0, "", false);    /* unhealthy: never counted */
        add_mig(i, 0, "2g.20gb", 1, 0, "", true);     /* another profile */
        add_mig(i, 1, "1g.10gb", 2, 0, "", true);
        set_node(m, i);
        struct sched_fit f;
        struct cluster_request r = mig_req("1g.10gb", 3);
        assert_int_equal(fit(m, "a", &r, &f), 0);
        assert_int_equal(f.verdict, SCHED_FIT);
        assert_int_equal(f.assign.n, 0); /* no device chosen: the agent picks */
        r = mig_req("1g.10gb", 4);
        assert_int_equal(fit(m, "a", &r, &f), -ENOSPC);
        assert_int_equal(f.verdict, SCHED_NO_ROOM);
        assert_string_equal(f.reason, "3 free MIG devices 1g.10gb, pod needs 4 (4 healthy: 1 held, 0 awaited by "
                                      "pods placed here)");
        r = mig_req("1g.10gb", 5);
        assert_int_equal(fit(m, "a", &r, &f), -ENODEV);
        assert_int_equal(f.verdict, SCHED_UNRESOLVABLE);
        assert_string_equal(f.reason, "4 healthy MIG devices 1g.10gb, pod needs 5");
        r = mig_req("3g.40gb", 1);
        assert_int_equal(fit(m, "a", &r, &f), -ENODEV);
        assert_string_equal(f.reason, "0 healthy MIG devices 3g.40gb, pod needs 1");
        r = mig_req("2g.20gb", 1);
        assert_int_equal(fit(m, "a", &r, &f), 0);
        /* the holder goes: one more is free */
        i->gpu[0].mig_dev[0].holder[0] = '\0';
        set_node(m, i);
        r = mig_req("1g.10gb", 4);
        assert_int_equal(fit(m, "a", &r, &f), 0);
        /* the parent GPU turns unhealthy: its devices do too (the agent says so per device) */
        for (unsigned k = 0; k < i->gpu[1].n_mig; k++)
                i->gpu[1].mig_dev[k].healthy = false;
        set_node(m, i);
        assert_int_equal(fit(m, "a", &r, &f), -ENODEV);
        free(i);
        sched_model_free(m);
}

/* A pod our bind placed counts at once; once the annotation shows it holding its devices it is counted
 * there only (not twice); when it goes they are free again. */
static void test_mig_in_flight_and_held_counted_once(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        struct cluster_node_info *i = mig_node("a", 1, 1, "mixed");
        add_mig(i, 0, "1g.10gb", 3, 0, "", true);
        set_node(m, i);
        struct sched_fit f;
        struct cluster_request r = mig_req("1g.10gb", 2);
        struct sched_pod_info p1 = { .uid = "u1", .ns = "d", .name = "p1", .req = r };
        assert_int_equal(fit(m, "a", &r, &f), 0);
        assert_int_equal(sched_model_assume_pod(m, &p1, "a", &f.assign, 1), 0);
        assert_int_equal(fit(m, "a", &r, &f), -ENOSPC);
        assert_string_equal(f.reason, "1 free MIG devices 1g.10gb, pod needs 2 (3 healthy: 0 held, 2 awaited by "
                                      "pods placed here)");
        /* an older view of the pod (pending) keeps the assumption */
        assert_int_equal(sched_model_set_pod(m, &p1), 0);
        assert_true(sched_model_pod(m, "u1")->assumed);
        assert_int_equal(fit(m, "a", &r, &f), -ENOSPC);
        /* the watch sees it bound: no assignment will come for MIG devices, the feed's view replaces ours */
        p1.node = "a";
        p1.bound = true;
        assert_int_equal(sched_model_set_pod(m, &p1), 0);
        assert_false(sched_model_pod(m, "u1")->assumed);
        assert_true(sched_model_pod(m, "u1")->bound);
        /* inspect's records: a pod holding only MIG devices is not "unplaced" (the annotation names them) */
        struct sched_node_records rec;
        assert_int_equal(sched_node_records(sched_model_node(m, "a"), &rec), 0);
        assert_int_equal(rec.n_unplaced, 0);
        sched_node_records_free(&rec);
        assert_int_equal(fit(m, "a", &r, &f), -ENOSPC);
        /* the agent holds two for it now: held, no longer awaited */
        i->gpu[0].mig_dev[0] = (struct cluster_mig_info){
                .index = 0, .uuid = "MIG-0", .profile = "1g.10gb", .mem_mib = 9856, .healthy = true, .holder = "d/p1"
        };
        strscpy(i->gpu[0].mig_dev[2].holder, "d/p1", sizeof i->gpu[0].mig_dev[2].holder);
        set_node(m, i);
        assert_int_equal(fit(m, "a", &r, &f), -ENOSPC);
        assert_string_equal(f.reason, "1 free MIG devices 1g.10gb, pod needs 2 (3 healthy: 2 held, 0 awaited by "
                                      "pods placed here)");
        struct cluster_request one = mig_req("1g.10gb", 1);
        assert_int_equal(fit(m, "a", &one, &f), 0);
        /* a pod bound by someone else, not yet shown holding anything: both awaited */
        struct sched_pod_info p2 = { .uid = "u2", .ns = "d", .name = "p2", .req = r, .node = "a", .bound = true };
        assert_int_equal(sched_model_set_pod(m, &p2), 0);
        assert_int_equal(fit(m, "a", &one, &f), -ENOSPC);
        /* both pods go, the agent frees the devices */
        assert_int_equal(sched_model_remove_pod(m, "u1"), 0);
        assert_int_equal(sched_model_remove_pod(m, "u2"), 0);
        i->gpu[0].mig_dev[0].holder[0] = i->gpu[0].mig_dev[2].holder[0] = '\0';
        set_node(m, i);
        r = mig_req("1g.10gb", 3);
        assert_int_equal(fit(m, "a", &r, &f), 0);
        free(i);
        sched_model_free(m);
}

/* Nodes where the request fits on one parent's free devices score above nodes where it must span
 * parents, then the fuller profile first (bin-pack). */
static void test_mig_one_parent_preferred(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        struct cluster_node_info *split = mig_node("split", 2, 3, "mixed");
        add_mig(split, 0, "1g.10gb", 1, 0, "", true);
        add_mig(split, 1, "1g.10gb", 1, 0, "", true);
        set_node(m, split);
        struct cluster_node_info *tight = mig_node("tight", 1, 1, "mixed");
        add_mig(tight, 0, "1g.10gb", 7, 5, "ml/other", true);
        set_node(m, tight);
        struct cluster_node_info *roomy = mig_node("roomy", 2, 3, "mixed");
        add_mig(roomy, 0, "1g.10gb", 7, 0, "", true);
        add_mig(roomy, 1, "1g.10gb", 1, 0, "", true);
        set_node(m, roomy);
        struct cluster_request r = mig_req("1g.10gb", 2);
        struct sched_fit f[3];
        const char *names[3] = { "split", "tight", "roomy" };
        for (unsigned k = 0; k < 3; k++)
                assert_int_equal(fit(m, names[k], &r, &f[k]), 0);
        assert_int_equal(f[0].mig_parents, 2);
        assert_int_equal(f[1].mig_parents, 1);
        assert_int_equal(f[2].mig_parents, 1);
        int s[3];
        sched_score_fits(f, 3, CLUSTER_POLICY_BINPACK, s);
        /* split: nothing left but two parents → 4; tight: one parent, nothing left → 10; roomy: one parent,
         * 6 of 8 left → 0.6 + 0.4 × 0.25 = 7 */
        assert_int_equal(s[0], 4);
        assert_int_equal(s[1], 10);
        assert_int_equal(s[2], 7);
        /* spread keeps the one-parent preference and prefers the emptier profile */
        sched_score_fits(f, 3, CLUSTER_POLICY_SPREAD, s);
        assert_true(s[2] > s[1] && s[1] > s[0]);
        free(split);
        free(tight);
        free(roomy);
        sched_model_free(m);
}

/* A GPU in MIG mode is never offered whole or as a share: nvidia.com/gpu and fractional requests on a
 * node whose only free GPU is in MIG mode are refused. */
static void test_mig_gpu_never_whole_or_shared(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        struct cluster_node_info *i = mig_node("a", 2, 1, "mixed");
        add_mig(i, 0, "1g.10gb", 7, 0, "", true);
        set_node(m, i);
        struct sched_pod_info p = { .uid = "w", .ns = "d", .name = "w", .node = "a", .bound = true };
        p.req = whole_req(1);
        p.has_assignment = true;
        p.assign.n = 1;
        p.assign.c[0] = (struct cluster_container_assign){ .gpus = 2, .whole = true };
        assert_int_equal(sched_model_set_pod(m, &p), 0); /* GPU 1 (not MIG) held whole */
        struct sched_fit f;
        struct cluster_request r = whole_req(1);
        assert_int_not_equal(fit(m, "a", &r, &f), 0);
        assert_int_not_equal(f.verdict, SCHED_FIT);
        r = share_req(10, 1024);
        assert_int_not_equal(fit(m, "a", &r, &f), 0);
        assert_int_not_equal(f.verdict, SCHED_FIT);
        /* the full path answers the same */
        assert_int_not_equal(sched_fit_node_full(m, sched_model_node(m, "a"), &r, CLUSTER_POLICY_BINPACK, &f), 0);
        /* a node of MIG GPUs only: never, even when empty */
        struct cluster_node_info *j = mig_node("b", 1, 1, "mixed");
        add_mig(j, 0, "1g.10gb", 7, 0, "", true);
        set_node(m, j);
        r = whole_req(1);
        assert_int_equal(fit(m, "b", &r, &f), -ENODEV);
        r = share_req(10, 1024);
        assert_int_equal(fit(m, "b", &r, &f), -ENODEV);
        /* its MIG devices are placed */
        r = mig_req("1g.10gb", 7);
        assert_int_equal(fit(m, "b", &r, &f), 0);
        free(i);
        free(j);
        sched_model_free(m);
}

/* A GPU replicated by NVIDIA's sharing (the annotation's "sharing": time-slicing, MPS) is its replicas' (kubelet
 * places them): never offered whole or as a share, the filter names it, and the scores do not count it as free
 * whole capacity (a node of one whole GPU and one replicated GPU is as full after a whole-GPU pod as a node of
 * that one whole GPU). */
static void test_replicated_gpu_never_whole_or_shared(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        sched_model_keep_details(m, true);
        struct cluster_node_info *i = mig_node("r", 2, 0, "");
        snprintf(i->gpu[0].sharing, sizeof i->gpu[0].sharing, "%s", CLUSTER_SHARING_TIMESLICE);
        i->gpu[0].replicas = 4;
        i->gpu[0].held = 1;
        strscpy(i->gpu[0].health, "ok", sizeof i->gpu[0].health);
        strscpy(i->gpu[1].health, "ok", sizeof i->gpu[1].health);
        set_node(m, i);
        struct cluster_node_info *w = mig_node("w", 1, 0, "");
        set_node(m, w);
        struct sched_fit f, fw;
        struct cluster_request r = whole_req(1);
        assert_int_equal(fit(m, "r", &r, &f), 0);
        assert_int_equal(f.assign.c[0].gpus, 2); /* GPU 1, the whole one */
        assert_int_equal(fit(m, "w", &r, &fw), 0);
        assert_true(f.pack == fw.pack); /* the replicated GPU is no free capacity */
        r = whole_req(2);
        assert_int_equal(fit(m, "r", &r, &f), -ENODEV);
        assert_int_equal(f.verdict, SCHED_UNRESOLVABLE);
        if (!strstr(f.reason, "1 of 2 GPUs free whole") || !strstr(f.reason, "GPU 0 is time-sliced (replicas)"))
                fail_msg("reason: %s", f.reason);
        r = share_req(10, 1024);
        assert_int_equal(fit(m, "r", &r, &f), 0);
        assert_int_equal(f.assign.c[0].gpus, 2);
        /* the health a person reads says so, with the replicas held */
        const struct sched_node *n = sched_model_node(m, "r");
        assert_non_null(n->details);
        assert_string_equal(n->details->gpu[0].health, "ok (time-slicing: 1 of 4 replicas held)");
        assert_string_equal(n->details->gpu[1].health, "ok");
        /* a node of one MPS GPU: never a share nor a whole GPU, even when empty */
        struct cluster_node_info *j = mig_node("mps", 1, 0, "");
        snprintf(j->gpu[0].sharing, sizeof j->gpu[0].sharing, "%s", CLUSTER_SHARING_MPS);
        j->gpu[0].replicas = 2;
        set_node(m, j);
        r = share_req(10, 1024);
        assert_int_equal(fit(m, "mps", &r, &f), -ENODEV);
        if (!strstr(f.reason, "GPU 0 is MPS-shared (replicas)"))
                fail_msg("reason: %s", f.reason);
        r = whole_req(1);
        assert_int_equal(fit(m, "mps", &r, &f), -ENODEV);
        if (!strstr(f.reason, "GPU 0 is MPS-shared (replicas)") || strstr(f.reason, "1 unhealthy"))
                fail_msg("reason: %s", f.reason);
        free(i);
        free(w);
        free(j);
        sched_model_free(m);
}

/* Replicas under nvidia.com/gpu (NVIDIA's time-slicing without rename): an nvidia.com/gpu request is counted against
 * the free replicas and free whole GPUs, with no GPU assigned (kubelet and the agent pick the IDs); a share still
 * never lands on a replicated GPU. */
static void test_replicas_as_nvidia_gpu_counted(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        struct cluster_node_info *i = mig_node("ts", 2, 0, "");
        strscpy(i->replica_resource, "nvidia.com/gpu", sizeof i->replica_resource);
        for (unsigned g = 0; g < 2; g++) {
                snprintf(i->gpu[g].sharing, sizeof i->gpu[g].sharing, "%s", CLUSTER_SHARING_TIMESLICE);
                strscpy(i->gpu[g].replica_resource, "nvidia.com/gpu", sizeof i->gpu[g].replica_resource);
                i->gpu[g].replicas = 4;
                i->gpu[g].held = 1;
        }
        set_node(m, i);
        struct sched_fit f;
        struct cluster_request r = whole_req(6);
        r.c[0].res[CLUSTER_RES_WHOLE] = CLUSTER_NAME_NVIDIA_GPU;
        r.c[0].qty[CLUSTER_RES_WHOLE] = 6;
        assert_int_equal(fit(m, "ts", &r, &f), 0); /* 3 + 3 replicas free */
        assert_int_equal(f.verdict, SCHED_FIT);
        assert_int_equal(f.assign.n, 0);
        r.c[0].whole = r.c[0].qty[CLUSTER_RES_WHOLE] = 7;
        assert_int_equal(fit(m, "ts", &r, &f), -ENODEV);
        if (!strstr(f.reason, "6 free nvidia.com/gpu replicas"))
                fail_msg("reason: %s", f.reason);
        r = share_req(10, 1024);
        assert_int_equal(fit(m, "ts", &r, &f), -ENODEV);
        /* renamed (nvidia.com/gpu.shared): nvidia.com/gpu is the whole GPUs only, and there are none */
        strscpy(i->replica_resource, "nvidia.com/gpu.shared", sizeof i->replica_resource);
        for (unsigned g = 0; g < 2; g++)
                strscpy(i->gpu[g].replica_resource, "nvidia.com/gpu.shared", sizeof i->gpu[g].replica_resource);
        set_node(m, i);
        r = whole_req(1);
        r.c[0].res[CLUSTER_RES_WHOLE] = CLUSTER_NAME_NVIDIA_GPU;
        r.c[0].qty[CLUSTER_RES_WHOLE] = 1;
        assert_int_equal(fit(m, "ts", &r, &f), -ENODEV);
        if (!strstr(f.reason, "GPU 0 and 1 more time-sliced (replicas)"))
                fail_msg("reason: %s", f.reason);
        free(i);
        sched_model_free(m);
}

/* A node with both strategies (mixed-modes.yaml): GPUs 0-1 time-sliced under nvidia.com/gpu, 2-3 MPS clients under
 * nvidia.com/gpu.mps. An nvidia.com/gpu request is counted against the time-sliced GPUs' replicas only (kubelet
 * never gives an MPS replica for it), by each GPU's own replica resource; an older agent's annotation (no resource
 * per GPU: the node's applies to all) still counts them all. */
static void test_replicas_counted_per_resource(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        struct cluster_node_info *i = mig_node("both", 4, 0, "");
        strscpy(i->replica_resource, "nvidia.com/gpu", sizeof i->replica_resource);
        for (unsigned g = 0; g < 4; g++) {
                bool mps = g >= 2;
                snprintf(i->gpu[g].sharing, sizeof i->gpu[g].sharing, "%s",
                         mps ? CLUSTER_SHARING_MPS : CLUSTER_SHARING_TIMESLICE);
                strscpy(i->gpu[g].replica_resource, mps ? "nvidia.com/gpu.mps" : "nvidia.com/gpu",
                        sizeof i->gpu[g].replica_resource);
                i->gpu[g].replicas = mps ? 10 : 4;
                i->gpu[g].held = 1;
        }
        /* through the one codec, as the extender reads it */
        struct cluster_node_info *back = calloc(1, sizeof *back);
        char *text;
        struct gs_error err = { 0 };
        assert_int_equal(cluster_node_encode(i, &text), 0);
        strscpy(back->name, "both", sizeof back->name);
        assert_int_equal(cluster_node_decode(text, strlen(text), back, &err), 0);
        free(text);
        set_node(m, back);
        assert_true(sched_model_node(m, "both")->replicas_whole);
        assert_int_equal(sched_model_node(m, "both")->replicas_free, 6); /* 3 + 3, not the MPS GPUs' 18 */
        struct sched_fit f;
        struct cluster_request r = whole_req(6);
        r.c[0].res[CLUSTER_RES_WHOLE] = CLUSTER_NAME_NVIDIA_GPU;
        r.c[0].qty[CLUSTER_RES_WHOLE] = 6;
        assert_int_equal(fit(m, "both", &r, &f), 0);
        assert_int_equal(f.verdict, SCHED_FIT);
        r.c[0].whole = r.c[0].qty[CLUSTER_RES_WHOLE] = 7; /* kubelet would refuse it: 6 nvidia.com/gpu replicas free */
        assert_int_equal(fit(m, "both", &r, &f), -ENODEV);
        if (!strstr(f.reason, "6 free nvidia.com/gpu replicas"))
                fail_msg("reason: %s", f.reason);
        /* the MPS set keeping nvidia.com/gpu instead: its replicas are the ones counted */
        for (unsigned g = 0; g < 4; g++)
                strscpy(i->gpu[g].replica_resource, g >= 2 ? "nvidia.com/gpu" : "nvidia.com/gpu.shared",
                        sizeof i->gpu[g].replica_resource);
        set_node(m, i);
        assert_int_equal(sched_model_node(m, "both")->replicas_free, 18);
        /* neither set keeps it: no replica is nvidia.com/gpu, the node has no GPU free whole */
        for (unsigned g = 0; g < 4; g++)
                strscpy(i->gpu[g].replica_resource, g >= 2 ? "nvidia.com/gpu.mps" : "nvidia.com/gpu.shared",
                        sizeof i->gpu[g].replica_resource);
        set_node(m, i);
        assert_false(sched_model_node(m, "both")->replicas_whole);
        r.c[0].whole = r.c[0].qty[CLUSTER_RES_WHOLE] = 1;
        assert_int_equal(fit(m, "both", &r, &f), -ENODEV);
        /* an older agent's annotation: no replica resource per GPU, the node's read into every replicated GPU */
        static const char old[] =
                "{\"v\":1,\"replica_resource\":\"nvidia.com/gpu\",\"gpus\":["
                "{\"i\":0,\"uuid\":\"GPU-0\",\"mem\":16384,\"health\":\"ok\",\"sharing\":\"time-slicing\","
                "\"replicas\":4,\"held\":1},"
                "{\"i\":1,\"uuid\":\"GPU-1\",\"mem\":16384,\"health\":\"ok\",\"sharing\":\"mps\",\"replicas\":10}],"
                "\"links\":\"PIX\"}";
        memset(back, 0, sizeof *back);
        strscpy(back->name, "old", sizeof back->name);
        assert_int_equal(cluster_node_decode(old, strlen(old), back, &err), 0);
        assert_string_equal(back->gpu[0].replica_resource, "nvidia.com/gpu");
        assert_string_equal(back->gpu[1].replica_resource, "nvidia.com/gpu");
        set_node(m, back);
        assert_int_equal(sched_model_node(m, "old")->replicas_free, 13);
        free(back);
        free(i);
        sched_model_free(m);
}

/* Under `single` the MIG devices are nvidia.com/gpu: whole requests are counted against them, never
 * placed on a GPU index (no whole-GPU binding of a MIG GPU); shares and nvidia.com/mig-* are refused. */
static void test_single_strategy_counts_mig_as_gpus(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        struct cluster_node_info *i = mig_node("s", 2, 3, "single");
        add_mig(i, 0, "1g.10gb", 3, 1, "ml/x", true);
        add_mig(i, 1, "1g.10gb", 3, 0, "", true);
        set_node(m, i);
        assert_true(sched_model_node(m, "s")->mig_single);
        struct sched_fit f;
        struct cluster_request r = whole_req(3);
        assert_int_equal(fit(m, "s", &r, &f), 0);
        assert_int_equal(f.assign.n, 1);
        assert_int_equal(f.assign.c[0].gpus, 0);
        assert_false(f.assign.c[0].whole);
        assert_int_equal(f.mig_parents, 1);
        r = whole_req(6);
        assert_int_equal(fit(m, "s", &r, &f), -ENOSPC);
        assert_non_null(strstr(f.reason, "5 free MIG devices (nvidia.com/gpu), pod needs 6"));
        r = whole_req(7);
        assert_int_equal(fit(m, "s", &r, &f), -ENODEV);
        /* a bind in flight counts at once */
        struct sched_pod_info p = { .uid = "u", .ns = "d", .name = "p", .req = whole_req(4) };
        assert_int_equal(fit(m, "s", &p.req, &f), 0);
        assert_int_equal(sched_model_assume_pod(m, &p, "s", &f.assign, 1), 0);
        r = whole_req(2);
        assert_int_equal(fit(m, "s", &r, &f), -ENOSPC);
        p.node = "s";
        p.bound = true;
        assert_int_equal(sched_model_set_pod(m, &p), 0); /* bound, no assignment: still awaited */
        assert_int_equal(fit(m, "s", &r, &f), -ENOSPC);
        struct sched_node_records rec;
        assert_int_equal(sched_node_records(sched_model_node(m, "s"), &rec), 0);
        assert_int_equal(rec.n_unplaced, 0);
        sched_node_records_free(&rec);
        r = whole_req(1);
        assert_int_equal(fit(m, "s", &r, &f), 0);
        r = share_req(10, 1024);
        assert_int_equal(fit(m, "s", &r, &f), -ENODEV);
        r = mig_req("1g.10gb", 1);
        assert_int_equal(fit(m, "s", &r, &f), -ENODEV);
        assert_non_null(strstr(f.reason, "MIG strategy single"));
        /* the same node under mixed: nvidia.com/gpu is not its MIG devices */
        strscpy(i->mig_strategy, "mixed", sizeof i->mig_strategy);
        set_node(m, i);
        assert_false(sched_model_node(m, "s")->mig_single);
        r = whole_req(1);
        assert_int_equal(fit(m, "s", &r, &f), -ENODEV);
        free(i);
        sched_model_free(m);
}

/* Preemption: evicting the pods that hold (or await) MIG devices frees them for the check only. */
static void test_mig_fit_without_victims(void **state) {
        (void)state;
        struct sched_model *m = new_model();
        struct cluster_node_info *i = mig_node("a", 1, 1, "mixed");
        add_mig(i, 0, "1g.10gb", 2, 2, "d/p1", true);
        add_mig(i, 0, "1g.10gb", 1, 0, "", true);
        set_node(m, i);
        struct sched_pod_info p1 = { .uid = "u1", .ns = "d", .name = "p1", .node = "a", .bound = true };
        p1.req = mig_req("1g.10gb", 2);
        struct sched_pod_info p2 = { .uid = "u2", .ns = "d", .name = "p2", .node = "a", .bound = true };
        p2.req = mig_req("1g.10gb", 1); /* awaits the last free one */
        assert_int_equal(sched_model_set_pod(m, &p1), 0);
        assert_int_equal(sched_model_set_pod(m, &p2), 0);
        struct sched_fit f;
        struct cluster_request r = mig_req("1g.10gb", 2);
        assert_int_equal(fit(m, "a", &r, &f), -ENOSPC);
        const char *v1[] = { "u1" }, *v2[] = { "u2" }, *both[] = { "u1", "u2", "u1" };
        assert_int_equal(sched_model_fit_without(m, "a", v1, 1, &r, CLUSTER_POLICY_BINPACK, &f), 0);
        assert_int_equal(sched_model_fit_without(m, "a", v2, 1, &r, CLUSTER_POLICY_BINPACK, &f), -ENOSPC);
        r = mig_req("1g.10gb", 3);
        assert_int_equal(sched_model_fit_without(m, "a", both, 3, &r, CLUSTER_POLICY_BINPACK, &f), 0);
        /* put back as they were */
        assert_int_equal(fit(m, "a", &r, &f), -ENOSPC);
        assert_string_equal(f.reason, "0 free MIG devices 1g.10gb, pod needs 3 (3 healthy: 2 held, 1 awaited by "
                                      "pods placed here)");
        free(i);
        sched_model_free(m);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_mig_filtered_by_free_counts),
                cmocka_unit_test(test_mig_in_flight_and_held_counted_once),
                cmocka_unit_test(test_mig_one_parent_preferred),
                cmocka_unit_test(test_mig_gpu_never_whole_or_shared),
                cmocka_unit_test(test_replicated_gpu_never_whole_or_shared),
                cmocka_unit_test(test_replicas_as_nvidia_gpu_counted),
                cmocka_unit_test(test_replicas_counted_per_resource),
                cmocka_unit_test(test_single_strategy_counts_mig_as_gpus),
                cmocka_unit_test(test_mig_fit_without_victims),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
