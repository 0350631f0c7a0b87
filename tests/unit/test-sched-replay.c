/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the cluster replay and the packing policies (src/sched/replay.c, pack.c): the openb CSV
 * parser and its errors, kube-scheduler's filters, the published scores' choices, frag's CPU stranding,
 * its scarcity weights and the score memo, the run's protocol
 * (failures by reason, the curve, reproducibility) on tests/data/replay.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>

#include "helpers.h"
#include "sched/model.h"
#include "sched/pack.h"
#include "sched/replay.h"
#include "util/util.h"

static void parse_fails(bool nodes, const char *text, const char *want) {
        struct sched_trace t = { 0 };
        struct gs_error err = { 0 };
        int r = nodes ? sched_trace_parse_nodes(&t, text, strlen(text), &err)
                      : sched_trace_parse_pods(&t, text, strlen(text), &err);
        if (r != -EINVAL || !strstr(err.message, want))
                fail_msg("input '%s': got %d '%s', want -EINVAL with '%s'", text, r, err.message, want);
        sched_trace_free(&t);
}

static void test_parse_nodes_and_pods(void **state) {
        (void)state;
        struct sched_trace t = { 0 };
        struct gs_error err = { 0 };
        const char *nodes = "model,sn,gpu,cpu_milli,memory_mib,extra\r\nT4,n1,2,32000,1024,x\r\n\r\n";
        assert_int_equal(sched_trace_parse_nodes(&t, nodes, strlen(nodes), &err), 0);
        assert_int_equal(t.n_nodes, 1);
        assert_string_equal(t.nodes[0].name, "n1");
        assert_string_equal(t.nodes[0].model, "T4");
        assert_int_equal(t.nodes[0].gpus, 2);
        assert_int_equal(t.nodes[0].cpu_milli, 32000);
        assert_int_equal(t.nodes[0].mem_mib, 1024);
        /* the multigpu files' five columns; a share over 1000 is clamped as the converter does */
        const char *pods = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,100,10,1,1500\np2,100,0,0,0\n"
                           "p3,1,1,8,1000";
        assert_int_equal(sched_trace_parse_pods(&t, pods, strlen(pods), &err), 0);
        assert_int_equal(t.n_pods, 3);
        assert_int_equal(t.pods[0].gpu_milli, 1000);
        assert_int_equal(t.pods[1].num_gpu, 0);
        assert_int_equal(t.pods[2].num_gpu, 8);
        assert_string_equal(t.pods[2].spec, "");
        sched_trace_free(&t);
}

static void test_parse_malformed_names_the_line(void **state) {
        (void)state;
        parse_fails(true, "", "line 1: empty input");
        parse_fails(true, "\nsn,cpu_milli,memory_mib,gpu,model\n", "line 1: expected the header");
        parse_fails(true, "sn,cpu_milli,memory_mib,gpu\nn,1,1,1\n", "line 1: no column 'model'");
        parse_fails(true, "sn,cpu_milli,memory_mib,gpu,model\nn,1,1,1,T4\nm,1,1,1\n",
                    "line 3: 4 fields, the header has 5");
        parse_fails(true, "sn,cpu_milli,memory_mib,gpu,model\nn,x1,1,1,T4\n", "line 2: cpu_milli: expected a number");
        parse_fails(true, "sn,cpu_milli,memory_mib,gpu,model\nn,-1,1,1,T4\n", "line 2: cpu_milli");
        parse_fails(true, "sn,cpu_milli,memory_mib,gpu,model\nn,1,1,65,T4\n", "line 2: gpu: expected a number 0..64");
        parse_fails(true, "sn,cpu_milli,memory_mib,gpu,model\n,1,1,1,T4\n", "line 2: sn: expected 1..");
        parse_fails(true, "sn,cpu_milli,memory_mib,gpu,model\n\"n\",1,1,1,T4\n", "line 2: field 1 is quoted");
        parse_fails(true, "sn,cpu_milli,memory_mib,gpu,model\nn,,1,1,T4\n", "line 2: cpu_milli");
        const char h[] = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n";
        char buf[256];
        snprintf(buf, sizeof buf, "%sp,1,1,0,500,\n", h);
        parse_fails(false, buf, "line 2: num_gpu 0 with gpu_milli 500 (both or neither)");
        snprintf(buf, sizeof buf, "%sp,1,1,1,0,\n", h);
        parse_fails(false, buf, "line 2: num_gpu 1 with gpu_milli 0");
        snprintf(buf, sizeof buf, "%sp,1,1,1,100,\nq,1,1,2,500,\n", h);
        parse_fails(false, buf, "line 3: num_gpu 2 with gpu_milli 500: several GPUs are whole");
        snprintf(buf, sizeof buf, "%sp,1,1,1,100,\nq,1,1,1,99999999999,\n", h);
        parse_fails(false, buf, "line 3: gpu_milli: expected a number");
        parse_fails(false, "name,cpu_milli,memory_mib,num_gpu\n", "line 1: no column 'gpu_milli'");
        char nul[] = "sn,cpu_milli,memory_mib,gpu,model\nn,1\0,1,1,T4\n";
        struct sched_trace t = { 0 };
        struct gs_error err = { 0 };
        assert_int_equal(sched_trace_parse_nodes(&t, nul, sizeof nul - 1, &err), -EINVAL);
        assert_non_null(strstr(err.message, "line 2: a NUL byte"));
        sched_trace_free(&t);
}

/* A model of two 2-GPU nodes, x with one GPU half used, and their CPU, memory and product. */
static struct sched_model *two_nodes(void) {
        struct sched_model *m;
        assert_int_equal(sched_model_new(&m), 0);
        struct cluster_node_info *info = calloc(1, sizeof *info);
        assert_non_null(info);
        const char *names[] = { "x", "y" };
        for (unsigned k = 0; k < 2; k++) {
                memset(info, 0, sizeof *info);
                strscpy(info->name, names[k], sizeof info->name);
                info->n_gpus = 2;
                for (unsigned g = 0; g < 2; g++) {
                        info->gpu[g].healthy = true;
                        for (unsigned h = 0; h < 2; h++)
                                info->link[g][h].pcie = g == h ? TOPO_LEVEL_SELF : TOPO_LEVEL_SYS;
                }
                assert_int_equal(sched_model_set_node(m, info), 0);
                assert_int_equal(sched_model_set_node_resources(m, names[k], 16000, 65536, k ? "V100" : "T4"), 0);
        }
        free(info);
        struct sched_pod_info p = {
                .uid = "u1", .ns = "d", .name = "p1", .node = "x", .bound = true, .cpu_milli = 4000, .mem_mib = 1024
        };
        test_share_req(&p.req, 50, 0);
        struct cluster_assignment a = { .n = 1 };
        a.c[0] = (struct cluster_container_assign){ .gpus = 1, .core = 50 };
        assert_int_equal(sched_model_assume_pod(m, &p, "x", &a, 0), 0);
        return m;
}

static void test_kube_filters_and_cpu_accounting(void **state) {
        (void)state;
        struct sched_model *m = two_nodes();
        const struct sched_node *x = sched_model_node(m, "x"), *y = sched_model_node(m, "y");
        assert_int_equal(x->cpu_used, 4000);
        assert_int_equal(x->mem_used, 1024);
        int t4 = sched_model_product(m, "T4"), v100 = sched_model_product(m, "V100");
        assert_true(t4 >= 0 && v100 >= 0 && t4 != v100);
        assert_int_equal(sched_model_product(m, "A100"), -ENOENT);
        struct sched_shape s = { .cpu_milli = 12001, .mem_mib = 1, .num_gpu = 1, .gpu_milli = 100 };
        assert_int_equal(sched_pack_kube_fit(x, &s), -ENOSPC); /* 16000 - 4000 left */
        assert_int_equal(sched_pack_kube_fit(y, &s), 0);
        s.cpu_milli = 1000;
        s.mem_mib = 64513;
        assert_int_equal(sched_pack_kube_fit(x, &s), -EMSGSIZE);
        s.mem_mib = 1;
        s.models = 1ULL << v100;
        assert_int_equal(sched_pack_kube_fit(x, &s), -ENXIO);
        assert_int_equal(sched_pack_kube_fit(y, &s), 0);
        s.num_gpu = 0; /* a CPU-only pod goes anywhere */
        assert_int_equal(sched_pack_kube_fit(x, &s), 0);
        /* a CPU-only pod is kept and counted; removing it gives the CPU back */
        struct sched_pod_info c = {
                .uid = "cpu", .ns = "d", .name = "c", .node = "y", .bound = true, .cpu_milli = 2000, .mem_mib = 10
        };
        struct cluster_assignment none = { 0 };
        assert_int_equal(sched_model_assume_pod(m, &c, "y", &none, 0), 0);
        assert_int_equal(y->cpu_used, 2000);
        assert_int_equal(sched_model_remove_pod(m, "cpu"), 0);
        assert_int_equal(sched_model_node(m, "y")->cpu_used, 0);
        assert_int_equal(sched_model_set_node_resources(m, "nope", 1, 1, "T4"), -ENOENT);
        /* kube-scheduler's default scoring: the emptier node (y), and a balanced one over a lopsided one */
        struct sched_shape cpu_only = { .cpu_milli = 1000, .mem_mib = 1024 };
        assert_true(sched_pack_kube_score(sched_model_node(m, "y"), &cpu_only) > sched_pack_kube_score(x, &cpu_only));
        /* y after it: (15000/16000, 64512/65536) -> least (93 + 98) / 2 = 95, balanced (1 - |1/16 - 1/64|) = 95 */
        assert_true(sched_pack_kube_score(sched_model_node(m, "y"), &cpu_only) == 95 + 95);
        sched_model_free(m);
}

/* kube-scheduler 1.20's numbers by hand (noderesources/least_allocated.go, balanced_allocation.go): requests
 * of 0 count 100m CPU and 200 MB memory, a fraction reaching 1 scores no balance. */
static void test_kube_score_as_kube_scheduler(void **state) {
        (void)state;
        struct sched_model *m;
        assert_int_equal(sched_model_new(&m), 0);
        struct cluster_node_info *info = calloc(1, sizeof *info);
        strscpy(info->name, "k", sizeof info->name);
        assert_int_equal(sched_model_set_node(m, info), 0);
        free(info);
        assert_int_equal(sched_model_set_node_resources(m, "k", 4000, 8192, ""), 0);
        struct sched_pod_info p = { .uid = "u", .ns = "d", .name = "p", .node = "k", .bound = true, .cpu_milli = 1000 };
        struct cluster_assignment none = { 0 };
        assert_int_equal(sched_model_assume_pod(m, &p, "k", &none, 0), 0);
        const struct sched_node *n = sched_model_node(m, "k");
        assert_int_equal(n->cpu_nonzero, 1000);
        assert_int_equal(n->mem_nonzero, SCHED_NONZERO_MEM);
        /* cpu 2000/4000, memory 191 + 1024 = 1215/8192: least (50 + 85) / 2 = 67; balanced
         * (1 - |0.5 - 0.1483|) * 100 = 64 */
        struct sched_shape a = { .cpu_milli = 1000, .mem_mib = 1024 };
        assert_true(sched_pack_kube_score(n, &a) == 67 + 64);
        /* cpu 4000/4000 (fraction 1: no balance), memory 382/8192: least (0 + 95) / 2 = 47 */
        struct sched_shape b = { .cpu_milli = 3000 };
        assert_true(sched_pack_kube_score(n, &b) == 47);
        /* a pod asking nothing counts 100m and 191 MiB: cpu 1100/4000 → 72, memory 382/8192 → 95 */
        struct sched_shape c = { 0 };
        assert_true(sched_pack_kube_score(n, &c) ==
                    (72 + 95) / 2 + (int)((1.0 - fabs(1100.0 / 4000 - 382.0 / 8192)) * 100));
        sched_model_free(m);
}

/* A 0.4 share with 0.5 shares and 2-GPU pods to come: every policy takes x (y keeps its two free GPUs for a
 * 2-GPU pod), but BestFit's GPU would be x's half-used one (0.1 left, a fragment) and FGD and frag take the
 * free one (two 0.5 holes stay). */
static void test_policies_choose_as_defined(void **state) {
        (void)state;
        struct sched_model *m = two_nodes();
        const struct sched_node *x = sched_model_node(m, "x"), *y = sched_model_node(m, "y");
        struct sched_mix mix = { 0 };
        struct sched_shape half = { .cpu_milli = 1000, .num_gpu = 1, .gpu_milli = 500 };
        struct sched_shape two = { .cpu_milli = 1000, .num_gpu = 2, .gpu_milli = 1000 };
        assert_int_equal(sched_mix_add(&mix, &half), 0);
        assert_int_equal(sched_mix_add(&mix, &two), 0);
        struct sched_workload w;
        sched_mix_workload(&mix, 1.0, false, &w);
        assert_int_equal(w.n, 2);
        struct sched_pack_ctx ctx = { .cpu_norm = 16000, .gpu_norm = 2000, .w = &w };
        struct sched_shape s = { .cpu_milli = 1000, .num_gpu = 1, .gpu_milli = 400 };
        int gx, gy;
        assert_true(sched_pack_score(&ctx, x, &s, CLUSTER_POLICY_BESTFIT, &gx) >
                    sched_pack_score(&ctx, y, &s, CLUSTER_POLICY_BESTFIT, &gy));
        assert_int_equal(gx, -1); /* the filter's best fit: GPU 0 */
        double fx = sched_pack_score(&ctx, x, &s, CLUSTER_POLICY_FGD, &gx);
        double fy = sched_pack_score(&ctx, y, &s, CLUSTER_POLICY_FGD, &gy);
        assert_true(fx == 54 && fy == 31); /* F decreases by 200 on x, grows by 800 on y */
        assert_int_equal(gx, 1);
        assert_true(sched_pack_score(&ctx, x, &s, CLUSTER_POLICY_FRAG, &gx) >
                    sched_pack_score(&ctx, y, &s, CLUSTER_POLICY_FRAG, &gy));
        assert_int_equal(gx, 1);
        /* a CPU-only pod that strands nothing on either node: frag keeps y, untouched, for the pods that need
         * a whole node (50 steps), and its tie-break leans to x, whose GPUs are fuller, below one step */
        struct sched_shape cpu = { .cpu_milli = 1000 };
        double cx = sched_pack_score(&ctx, x, &cpu, CLUSTER_POLICY_FRAG, &gx);
        double cy = sched_pack_score(&ctx, y, &cpu, CLUSTER_POLICY_FRAG, &gy);
        assert_true(cx - cy > 50.0 && cx - cy < 51.0 && cx > 0.0 && cx < 1.0);
        /* once y holds a share too, only the tie-break is left between them */
        struct sched_pod_info t = { .uid = "tiny", .ns = "d", .name = "t", .node = "y", .bound = true };
        test_share_req(&t.req, 1, 0);
        struct cluster_assignment ta = { .n = 1 };
        ta.c[0] = (struct cluster_container_assign){ .gpus = 1, .core = 1 };
        assert_int_equal(sched_model_assume_pod(m, &t, "y", &ta, 0), 0);
        y = sched_model_node(m, "y");
        cy = sched_pack_score(&ctx, y, &cpu, CLUSTER_POLICY_FRAG, &gy);
        assert_true(cx > cy && cx - cy < 1.0 && cy >= 0.0);
        assert_int_equal(sched_model_remove_pod(m, "tiny"), 0);
        y = sched_model_node(m, "y");
        assert_true(sched_pack_score(&ctx, x, &s, CLUSTER_POLICY_GPUPACKING, &gx) >
                    sched_pack_score(&ctx, y, &s, CLUSTER_POLICY_GPUPACKING, &gy));
        assert_true(sched_pack_score(&ctx, x, &s, CLUSTER_POLICY_GPUCLUSTERING, &gx) >
                    sched_pack_score(&ctx, y, &s, CLUSTER_POLICY_GPUCLUSTERING, &gy)); /* x holds a share */
        assert_true(sched_pack_score(&ctx, x, &s, CLUSTER_POLICY_DOTPROD, &gx) >
                    sched_pack_score(&ctx, y, &s, CLUSTER_POLICY_DOTPROD, &gy));
        sched_mix_free(&mix);
        mix = (struct sched_mix){ 0 };
        assert_int_equal(sched_mix_add(&mix, &half), 0);
        sched_mix_workload(&mix, 0.95, false, &w);
        /* F_n: x's GPU 0 (500 free) fits the 0.5 share: no fragment; after a 0.4 there it would be 100 */
        assert_true(sched_pack_frag(&w, x) < 1e-9);
        /* the workload: by count, cut at 95 %, renormalised */
        struct sched_shape other = { .cpu_milli = 7, .num_gpu = 0 };
        for (unsigned i = 0; i < 30; i++)
                assert_int_equal(sched_mix_add(&mix, &half), 0);
        assert_int_equal(sched_mix_add(&mix, &other), 0);
        sched_mix_workload(&mix, 0.95, false, &w);
        assert_int_equal(w.n, 1);
        assert_true(w.p[0] > 0.999);
        sched_mix_workload(&mix, 1.0, false, &w);
        assert_int_equal(w.n, 2);
        sched_mix_free(&mix);
        sched_model_free(m);
}

/* CPU stranding (frag's F′, not FGD's F): y keeps 8 of its 16 cores after a CPU-only pod, x 16 minus the
 * share's 4. The GPU pods to come ask 4 cores per GPU. A 4-core CPU-only pod leaves either node room for one
 * such pod, so FGD's F does not change on either; but y's 4 cores left would feed one of its two free GPUs
 * (the other stranded), x's 8 feed all of its free milli: frag takes x. Then the score memo: reused while the
 * node, the context's version, the shape and the policy stay, taken anew when any changes. */
static void test_frag_counts_cpu_stranding(void **state) {
        (void)state;
        struct sched_model *m = two_nodes();
        struct sched_pod_info c = {
                .uid = "cpu", .ns = "d", .name = "c", .node = "y", .bound = true, .cpu_milli = 8000, .mem_mib = 10
        };
        struct cluster_assignment none = { 0 };
        assert_int_equal(sched_model_assume_pod(m, &c, "y", &none, 0), 0);
        /* and a 1 % share, so that neither node is untouched (FRAG_UNTOUCHED stays out of it) */
        struct sched_pod_info t = { .uid = "tiny", .ns = "d", .name = "t", .node = "y", .bound = true };
        test_share_req(&t.req, 1, 0);
        struct cluster_assignment ta = { .n = 1 };
        ta.c[0] = (struct cluster_container_assign){ .gpus = 1, .core = 1 };
        assert_int_equal(sched_model_assume_pod(m, &t, "y", &ta, 0), 0);
        const struct sched_node *x = sched_model_node(m, "x"), *y = sched_model_node(m, "y");
        struct sched_mix mix = { 0 };
        struct sched_shape one = { .cpu_milli = 4000, .mem_mib = 1, .num_gpu = 1, .gpu_milli = 1000 };
        assert_int_equal(sched_mix_add(&mix, &one), 0);
        struct sched_workload w;
        sched_mix_workload(&mix, 1.0, false, &w);
        assert_true(fabs(w.cpu_per_milli - 4.0) < 1e-9 && fabs(w.mem_per_milli - 0.001) < 1e-9);
        struct sched_pack_ctx ctx = { .cpu_norm = 16000, .gpu_norm = 2000, .w = &w, .version = 1 };
        struct sched_shape cpu = { .cpu_milli = 4000, .mem_mib = 10 };
        int gx, gy;
        assert_true(sched_pack_score(&ctx, x, &cpu, CLUSTER_POLICY_FGD, &gx) ==
                    sched_pack_score(&ctx, y, &cpu, CLUSTER_POLICY_FGD, &gy));
        double fx = sched_pack_score(&ctx, x, &cpu, CLUSTER_POLICY_FRAG, &gx);
        double fy = sched_pack_score(&ctx, y, &cpu, CLUSTER_POLICY_FRAG, &gy);
        /* y: 990 milli stranded (1990 free, 4 cores feed 1000), twice over: 49 steps of 40 (x: none); the tie-break
         * leans to x (1500 free) */
        assert_true(fx - fy > 49.0 && fx - fy < 50.0);
        /* the memo */
        struct sched_pack_memo memo = { 0 };
        assert_true(sched_pack_score_memo(&ctx, x, &cpu, CLUSTER_POLICY_FRAG, &memo, &gx) == fx);
        memo.score = 12345; /* what a reuse returns */
        assert_true(sched_pack_score_memo(&ctx, x, &cpu, CLUSTER_POLICY_FRAG, &memo, &gx) == 12345);
        assert_true(sched_pack_score_memo(&ctx, y, &cpu, CLUSTER_POLICY_FRAG, &memo, &gy) == fy); /* another node */
        memo.score = 12345;
        ctx.version++;
        assert_true(sched_pack_score_memo(&ctx, y, &cpu, CLUSTER_POLICY_FRAG, &memo, &gy) == fy);
        memo.score = 12345;
        assert_true(sched_pack_score_memo(&ctx, y, &one, CLUSTER_POLICY_FRAG, &memo, &gy) != 12345);
        memo.score = 12345;
        assert_true(sched_pack_score_memo(&ctx, y, &one, CLUSTER_POLICY_FGD, &memo, &gy) != 12345);
        memo.score = 12345;
        assert_int_equal(sched_model_remove_pod(m, "cpu"), 0); /* y changes: its generation */
        y = sched_model_node(m, "y");
        assert_true(sched_pack_score_memo(&ctx, y, &one, CLUSTER_POLICY_FGD, &memo, &gy) != 12345);
        sched_mix_free(&mix);
        sched_model_free(m);
}

/* frag's scarcity weights: two_nodes plus z, a free 2-GPU T4 like x. The mix: 90 pods of one whole GPU of any
 * model, 10 of two V100 GPUs, which only y (2 of the 6 GPUs: h = 1/3) can host, so they weigh 3. A 1-GPU pod
 * on y leaves no room there for the V100 pair: F′ rises by p × weight × 1000 = 100 before the weights (2 steps
 * of 40), 300 with them (7 steps); on z the pair could never land, and F′ falls as much. FGD's F keeps p. */
static void test_frag_weighs_scarce_shapes(void **state) {
        (void)state;
        struct sched_model *m = two_nodes();
        struct cluster_node_info *info = calloc(1, sizeof *info);
        assert_non_null(info);
        strscpy(info->name, "z", sizeof info->name);
        info->n_gpus = 2;
        for (unsigned g = 0; g < 2; g++) {
                info->gpu[g].healthy = true;
                for (unsigned h = 0; h < 2; h++)
                        info->link[g][h].pcie = g == h ? TOPO_LEVEL_SELF : TOPO_LEVEL_SYS;
        }
        assert_int_equal(sched_model_set_node(m, info), 0);
        assert_int_equal(sched_model_set_node_resources(m, "z", 16000, 65536, "T4"), 0);
        free(info);
        int v100 = sched_model_product(m, "V100");
        assert_true(v100 >= 0);
        struct sched_shape any = { .cpu_milli = 1000, .num_gpu = 1, .gpu_milli = 1000 };
        struct sched_shape pair = { .cpu_milli = 1000, .num_gpu = 2, .gpu_milli = 1000, .models = 1ULL << v100 };
        struct sched_mix mix = { 0 };
        for (unsigned i = 0; i < 100; i++)
                assert_int_equal(sched_mix_add(&mix, i < 90 ? &any : &pair), 0);
        struct sched_workload w;
        sched_mix_workload(&mix, 1.0, false, &w);
        assert_int_equal(w.n, 2);
        assert_true(w.k[0] == 1 && w.k[1] == 1); /* not weighed yet */
        struct sched_pack_ctx ctx = { .cpu_norm = 16000, .gpu_norm = 2000, .w = &w, .version = 1 };
        const struct sched_node *y = sched_model_node(m, "y"), *z = sched_model_node(m, "z");
        int g;
        assert_true(sched_pack_score(&ctx, y, &any, CLUSTER_POLICY_FRAG, &g) == -2);
        assert_true(sched_pack_score(&ctx, z, &any, CLUSTER_POLICY_FRAG, &g) == 3);
        double fgd_y = sched_pack_score(&ctx, y, &any, CLUSTER_POLICY_FGD, &g);
        sched_workload_scarcity(&w, m);
        assert_true(w.k[0] == 1);               /* any model: every GPU hosts it */
        assert_true(fabs(w.k[1] - 3.0) < 1e-9); /* the V100 pair: 2 of 6 */
        ctx.version++;
        assert_true(sched_pack_score(&ctx, y, &any, CLUSTER_POLICY_FRAG, &g) == -7);
        assert_true(sched_pack_score(&ctx, z, &any, CLUSTER_POLICY_FRAG, &g) == 8);
        assert_true(sched_pack_score(&ctx, y, &any, CLUSTER_POLICY_FGD, &g) == fgd_y);
        /* half the GPUs or more: not scarce. A third V100 node's pair of GPUs makes y's kind 4 of 8 */
        info = calloc(1, sizeof *info);
        assert_non_null(info);
        strscpy(info->name, "v", sizeof info->name);
        info->n_gpus = 2;
        for (unsigned k = 0; k < 2; k++)
                info->gpu[k].healthy = true;
        assert_int_equal(sched_model_set_node(m, info), 0);
        assert_int_equal(sched_model_set_node_resources(m, "v", 16000, 65536, "V100"), 0);
        free(info);
        sched_workload_scarcity(&w, m);
        assert_true(w.k[1] == 1);
        sched_mix_free(&mix);
        sched_model_free(m);
}

static void load_data(struct sched_trace *t) {
        size_t len;
        struct gs_error err = { 0 };
        char *s = test_read_source("tests/data/replay/nodes.csv", &len);
        assert_int_equal(sched_trace_parse_nodes(t, s, len, &err), 0);
        free(s);
        s = test_read_source("tests/data/replay/pods.csv", &len);
        assert_int_equal(sched_trace_parse_pods(t, s, len, &err), 0);
        free(s);
}

static void test_replay_protocol(void **state) {
        (void)state;
        struct sched_trace t = { 0 };
        load_data(&t);
        assert_int_equal(t.n_nodes, 4);
        assert_int_equal(t.n_pods, 13);
        for (unsigned p = CLUSTER_POLICY_BINPACK; p < _CLUSTER_POLICY_MAX; p++) {
                struct sched_replay_options o = { .policy = p, .seed = 7, .gpu_pods_only = p % 2 };
                struct sched_replay_result a, b;
                struct gs_error err = { 0 };
                assert_int_equal(sched_replay_run(&t, &o, &a, &err), 0);
                assert_int_equal(a.gpus, 15);
                assert_int_equal(a.pods, 13); /* tune 0: the list as it is */
                assert_int_equal(a.gpu_milli_arrived, 21030);
                assert_true(a.gpu_milli_placed <= 15000);
                /* these three never fit, whatever the policy */
                assert_int_equal(a.fail_by_reason[SCHED_FAIL_CPU], 1);
                assert_int_equal(a.fail_by_reason[SCHED_FAIL_MEMORY], 1);
                assert_int_equal(a.fail_by_reason[SCHED_FAIL_MODEL], 1);
                size_t grouped = 0;
                for (size_t k = 0; k < a.n_fail; k++)
                        grouped += a.fail[k].count;
                assert_int_equal(grouped, a.failed);
                assert_int_equal(a.n_curve, 141); /* 21030 of 15000 arrived: 0..140 % */
                assert_true(fabs(a.curve[a.n_curve - 1] - (double)a.gpu_milli_placed / 150.0) < 0.006);
                for (unsigned x = 1; x < a.n_curve; x++)
                        assert_true(a.curve[x] + 1e-9 >= a.curve[x - 1] - 7); /* one pod moves it ≤ 1/15 */
                /* the same seed, the same run */
                assert_int_equal(sched_replay_run(&t, &o, &b, &err), 0);
                assert_int_equal(a.failed, b.failed);
                assert_memory_equal(a.curve, b.curve, a.n_curve * sizeof *a.curve);
                sched_replay_result_free(&a);
                sched_replay_result_free(&b);
        }
        sched_trace_free(&t);
}

static void test_replay_tuning(void **state) {
        (void)state;
        struct sched_trace t = { 0 };
        load_data(&t);
        struct gs_error err = { 0 };
        /* up to 3 x 15 GPUs: copies drawn until the next would overshoot by its per-GPU share */
        struct sched_replay_options o = { .policy = CLUSTER_POLICY_FGD, .seed = 1, .tune = 3.0 };
        struct sched_replay_result r;
        assert_int_equal(sched_replay_run(&t, &o, &r, &err), 0);
        assert_true(r.pods > 13);
        assert_true(r.gpu_milli_arrived <= 45000 + 7000);
        assert_true(r.gpu_milli_arrived + 1000 > 45000);
        assert_int_equal(r.n_curve, 301);
        sched_replay_result_free(&r);
        /* down to 0.5 x: pods removed at random until the sum is at most the target */
        o.tune = 0.5;
        assert_int_equal(sched_replay_run(&t, &o, &r, &err), 0);
        assert_true(r.pods < 13);
        assert_true(r.gpu_milli_arrived <= 7500);
        assert_int_equal(r.n_curve, 51);
        sched_replay_result_free(&r);
        /* a node list the model refuses */
        struct sched_trace dup = { 0 };
        const char *nodes = "sn,cpu_milli,memory_mib,gpu,model\nn,1,1,1,T4\nn,1,1,1,T4\n";
        assert_int_equal(sched_trace_parse_nodes(&dup, nodes, strlen(nodes), &err), 0);
        assert_int_equal(sched_replay_run(&dup, &o, &r, &err), -EINVAL);
        assert_non_null(strstr(err.message, "node n is listed twice"));
        sched_trace_free(&dup);
        sched_trace_free(&t);
}

static void test_rng(void **state) {
        (void)state;
        struct sched_rng a, b;
        sched_rng_seed(&a, 42);
        sched_rng_seed(&b, 42);
        unsigned hist[7] = { 0 };
        for (unsigned i = 0; i < 70000; i++) {
                uint64_t x = sched_rng_below(&a, 7);
                assert_true(x < 7);
                assert_int_equal(x, sched_rng_below(&b, 7));
                hist[x]++;
        }
        for (unsigned k = 0; k < 7; k++)
                assert_true(hist[k] > 9500 && hist[k] < 10500);
        sched_rng_seed(&b, 43);
        assert_true(sched_rng_next(&a) != sched_rng_next(&b));
}

/* ---- snapshots of a real cluster (replay-snap.c) ---- */

static void test_quantities(void **state) {
        (void)state;
        static const struct {
                const char *s;
                uint64_t milli;
        } ok[] = { { "500m", 500 },
                   { "2", 2000 },
                   { "1.5", 1500 },
                   { "0.1", 100 },
                   { "1Ki", 1024000 },
                   { "2Gi", 2147483648000ULL },
                   { "1e3", 1000000 },
                   { "1E-3", 1 },
                   { "100n", 1 },
                   { "+3", 3000 },
                   { "007", 7000 },
                   { "1.0001", 1001 },
                   { "128974848", 128974848000ULL },
                   { "129M", 129000000000ULL },
                   { "0", 0 } };
        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                uint64_t v = 0;
                if (cluster_quantity_milli(ok[i].s, &v) != 0 || v != ok[i].milli)
                        fail_msg("'%s': got %llu, want %llu", ok[i].s, (unsigned long long)v,
                                 (unsigned long long)ok[i].milli);
        }
        static const char *const bad[] = {
                "", "m", "-1", "1x", "1.2.3", "1 Gi", "1Gib", "e3", "1e", "1e123", ".", "1ki"
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                uint64_t v;
                if (cluster_quantity_milli(bad[i], &v) != -EINVAL)
                        fail_msg("'%s' accepted", bad[i]);
        }
        uint64_t v;
        assert_int_equal(cluster_quantity_milli("20Ei", &v), -ERANGE);
        assert_int_equal(cluster_quantity_milli("99999999999999999999", &v), -ERANGE);
}

static void load_snapshot(const char *path, struct sched_trace *t) {
        size_t len;
        char *s = test_read_source(path, &len);
        struct cluster_units u;
        cluster_units_default(&u);
        struct gs_error err = { 0 };
        int r = sched_trace_parse_snapshot(t, s, len, &u, &err);
        if (r != 0)
                fail_msg("%s: %d %s", path, r, err.message);
        free(s);
}

static const struct sched_trace_pod *pod_named(const struct sched_trace *t, const char *name) {
        for (size_t i = 0; i < t->n_pods; i++)
                if (streq(t->pods[i].name, name))
                        return &t->pods[i];
        fail_msg("no pod %s", name);
        return NULL;
}

static void check_snapshot(const struct sched_trace *t) {
        assert_true(t->snapshot);
        assert_int_equal(t->n_nodes, 3);
        assert_string_equal(t->nodes[0].name, "gpu-a");
        assert_int_equal(t->nodes[0].cpu_milli, 8000);
        assert_int_equal(t->nodes[0].mem_mib, 32768);
        assert_int_equal(t->nodes[0].gpus, 2);
        assert_string_equal(t->nodes[0].model, "NVIDIA-A100-SXM4-40GB"); /* the label, not the NVML name */
        assert_non_null(t->nodes[0].gpus_ann);
        assert_int_equal(t->nodes[1].cpu_milli, 4000);
        assert_int_equal(t->nodes[1].gpus, 1);
        assert_null(t->nodes[1].gpus_ann);
        assert_string_equal(t->nodes[1].model, "Tesla-T4");
        assert_int_equal(t->nodes[2].gpus, 0);
        assert_int_equal(t->nodes[2].mem_mib, 4096);
        assert_int_equal(t->n_pods, 7); /* "done" Succeeded: skipped */
        const struct sched_trace_pod *p = pod_named(t, "team/running-a");
        assert_string_equal(p->node, "gpu-a");
        assert_int_equal(p->gpus, 1u << 1);
        assert_int_equal(p->num_gpu, 1);
        assert_int_equal(p->gpu_milli, 500);
        assert_int_equal(p->cpu_milli, 1000);
        assert_int_equal(p->mem_mib, 2048);
        p = pod_named(t, "team/pend-1");
        assert_string_equal(p->node, "");
        assert_string_equal(p->spec, "Tesla-T4");
        assert_int_equal(p->gpu_milli, 1000);
        p = pod_named(t, "team/pend-3");
        assert_int_equal(p->num_gpu, 2);
        assert_string_equal(p->spec, "NVIDIA-A100-SXM4-40GB|NVIDIA-H100-80GB-HBM3");
        p = pod_named(t, "team/pend-5"); /* 80 units × 256 MiB, memory only; the sidecar's limit */
        assert_int_equal(p->num_gpu, 1);
        assert_int_equal(p->gpu_milli, 10); /* the extender's shape of a memory-only share: 1 % */
        assert_non_null(p->req);
        assert_int_equal(p->req->n, 1);
        assert_int_equal(p->req->c[0].core, 0);
        assert_int_equal(p->req->c[0].mem_mib, 80 * 256);
        assert_int_equal(p->cpu_milli, 500);
        assert_int_equal(p->mem_mib, 512);
        assert_int_equal(pod_named(t, "team/pend-4")->num_gpu, 0);
}

static void test_snapshot_parse(void **state) {
        (void)state;
        struct sched_trace a = { 0 }, b = { 0 };
        load_snapshot("tests/data/replay-snapshot/kubectl.json", &a);
        load_snapshot("tests/data/replay-snapshot/extender.json", &b);
        check_snapshot(&a);
        check_snapshot(&b);
        sched_trace_free(&a);
        sched_trace_free(&b);
}

static void test_snapshot_replay(void **state) {
        (void)state;
        struct sched_trace t = { 0 };
        load_snapshot("tests/data/replay-snapshot/kubectl.json", &t);
        for (enum cluster_policy pol = 0; pol < _CLUSTER_POLICY_MAX; pol++) {
                struct sched_replay_options o = { .policy = pol, .seed = 1 };
                struct sched_replay_result r;
                struct gs_error err = { 0 };
                assert_int_equal(sched_replay_run(&t, &o, &r, &err), 0);
                assert_int_equal(r.gpus, 3);
                assert_int_equal(r.pods, 7);
                if (pol == CLUSTER_POLICY_RANDOM) { /* may put pend-2's share on the only T4, before pend-1 */
                        assert_in_range(r.failed, 1, 2);
                        sched_replay_result_free(&r);
                        continue;
                }
                /* the bound pods first where they are (running-a, created last, on half of gpu-a's GPU 1),
                 * then the pending ones by creation: pend-3's two A100s no longer fit */
                if (r.failed != 1 || r.fail_by_reason[SCHED_FAIL_GPU] != 1)
                        fail_msg("%s: %zu failed (%zu GPU room, %zu CPU)", cluster_policy_name(pol), r.failed,
                                 r.fail_by_reason[SCHED_FAIL_GPU], r.fail_by_reason[SCHED_FAIL_CPU]);
                /* pend-5's memory-only share counts as the extender's shape counts it: 10 milli */
                assert_int_equal(r.gpu_milli_arrived, 500 + 300 + 1000 + 2000 + 10);
                assert_int_equal(r.gpu_milli_placed, 500 + 300 + 1000 + 10);
                /* every pod where it went: the bound ones first, running-a on its assignment's GPU 1 */
                assert_int_equal(r.n_place, 7);
                assert_string_equal(t.pods[r.place[0].pod].name, "team/running-cpu");
                assert_string_equal(t.pods[r.place[1].pod].name, "team/running-a");
                assert_string_equal(t.nodes[r.place[1].node].name, "gpu-a");
                assert_int_equal(r.place[1].gpus, 1u << 1);
                assert_string_equal(t.pods[r.place[2].pod].name, "team/pend-1");
                assert_string_equal(t.nodes[r.place[2].node].name, "gpu-t");
                assert_string_equal(t.pods[r.place[3].pod].name, "team/pend-3");
                assert_int_equal(r.place[3].node, -1);
                assert_int_equal(r.place[3].reason, SCHED_FAIL_GPU);
                sched_replay_result_free(&r);
        }
        struct sched_replay_options o = { .policy = CLUSTER_POLICY_FRAG, .tune = 1.3 };
        struct sched_replay_result r;
        struct gs_error err = { 0 };
        assert_int_equal(sched_replay_run(&t, &o, &r, &err), -EINVAL);
        assert_non_null(strstr(err.message, "no tuning"));
        sched_trace_free(&t);
}

static void snapshot_fails(const char *text, const char *want) {
        struct sched_trace t = { 0 };
        struct cluster_units u;
        cluster_units_default(&u);
        struct gs_error err = { 0 };
        int r = sched_trace_parse_snapshot(&t, text, strlen(text), &u, &err);
        if (r != -EINVAL || !strstr(err.message, want))
                fail_msg("snapshot '%s': got %d '%s', want -EINVAL with '%s'", text, r, err.message, want);
        sched_trace_free(&t);
}

#define NODE_A "{\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"},\"status\":{\"allocatable\":{\"cpu\":\"4\"}}}"

static void test_snapshot_errors_are_named(void **state) {
        (void)state;
        snapshot_fails("", "invalid JSON");
        snapshot_fails("[]", "a snapshot is a v1 List");
        snapshot_fails("{\"items\":{}}", "a snapshot is a v1 List");
        snapshot_fails("{\"items\":[1]}", "items[0]: not an object");
        snapshot_fails("{\"items\":[{\"metadata\":{}}]}", "items[0]: no kind");
        snapshot_fails("{\"items\":[{\"kind\":\"Node\",\"metadata\":{}}]}", "items[0]: a Node without metadata.name");
        snapshot_fails("{\"items\":[{\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"},\"status\":{\"allocatable\":"
                       "{\"cpu\":\"4x\"}}}]}",
                       "items[0] (Node a): status.allocatable.cpu: '4x' is not a quantity");
        snapshot_fails("{\"items\":[{\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"},\"status\":{\"allocatable\":"
                       "{\"nvidia.com/gpu\":\"65\"}}}]}",
                       "items[0] (Node a): status.allocatable");
        snapshot_fails("{\"nodes\":[{\"metadata\":{\"name\":\"a\",\"annotations\":{\"gpuslice.io/gpus\":\"{}\"}}}]}",
                       "nodes[0]: node a:");
        snapshot_fails("{\"items\":[" NODE_A ",{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"n\"},"
                       "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"memory\":1}}}]}}]}",
                       "items[1] (Pod n/p): spec.containers[0].resources.requests.memory: a non-string is not a "
                       "quantity");
        snapshot_fails("{\"items\":[" NODE_A ",{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"n\"},"
                       "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":"
                       "\"x\"}}}]}}]}",
                       "items[1] (Pod n/p): container c: nvidia.com/gpu is not a whole number");
        snapshot_fails("{\"pods\":[{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\"},\"spec\":{\"containers\":["
                       "{\"name\":\"a\",\"resources\":{\"limits\":{\"gpuslice.io/gpu-core\":\"10\"}}},"
                       "{\"name\":\"b\",\"resources\":{\"limits\":{\"gpuslice.io/gpu-core\":\"10\"}}}]}}]}",
                       "pods[0] (Pod n/p): 2 GPU containers with shares");
        snapshot_fails("{\"pods\":[{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\"},\"spec\":{\"containers\":["
                       "{\"name\":\"a\",\"resources\":{\"limits\":{\"nvidia.com/mig-1g.10gb\":\"1\"}}}]}}]}",
                       "pods[0] (Pod n/p): asks for MIG devices");
        snapshot_fails("{\"pods\":[{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[],\"affinity\":{"
                       "\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":"
                       "[{\"matchExpressions\":[{\"key\":\"nvidia.com/gpu.product\",\"operator\":\"In\",\"values\":"
                       "[1]}]}]}}}}}]}",
                       "pods[0] (Pod /p): node affinity on nvidia.com/gpu.product: a value is not a string");
}

/* A T4 (16 GiB) and an 80 GiB GPU: a pending share asking 20 GiB of GPU memory on the T4 fails there, as the
 * extender's fit says (it asks the memory itself, not a compute share the memory was turned into), and one
 * asking 10 GiB fits. */
#define SNAP_GPU(model, mem)                                                                         \
        "\"gpuslice.io/gpus\":\"{\\\"v\\\":1,\\\"gpus\\\":[{\\\"i\\\":0,\\\"uuid\\\":\\\"GPU-" model \
        "\\\",\\\"model\\\":\\\"" model "\\\",\\\"mem\\\":" mem ",\\\"health\\\":\\\"ok\\\"}]}\""
#define SNAP_NODE(name, model, mem)                                                                          \
        "{\"metadata\":{\"name\":\"" name "\",\"labels\":{\"nvidia.com/gpu.product\":\"" model "\"},"        \
        "\"annotations\":{" SNAP_GPU(model, mem) "}},\"status\":{\"allocatable\":{\"cpu\":\"8\",\"memory\":" \
                                                 "\"32Gi\",\"nvidia.com/gpu\":\"1\"}}}"
#define SNAP_POD(name, units)                                                                            \
        "{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"n\"},\"spec\":{\"nodeSelector\":"          \
        "{\"nvidia.com/gpu.product\":\"T4\"},\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":" \
        "{\"gpuslice.io/gpu-memory\":\"" units "\"}}}]}}"

static void test_snapshot_memory_share(void **state) {
        (void)state;
        const char *text = "{\"nodes\":[" SNAP_NODE("small", "T4", "16384") "," SNAP_NODE(
                "big", "A100", "81920") "],\"pods\":[" SNAP_POD("p20g", "80") "," SNAP_POD("q10g", "40") "]}";
        struct sched_trace t = { 0 };
        struct cluster_units u;
        cluster_units_default(&u);
        struct gs_error err = { 0 };
        if (sched_trace_parse_snapshot(&t, text, strlen(text), &u, &err) != 0)
                fail_msg("%s", err.message);
        const struct sched_trace_pod *p = pod_named(&t, "n/p20g");
        assert_int_equal(p->gpu_milli, 10); /* not 250, 20 GiB of the largest GPU's 80 */
        assert_int_equal(p->req->c[0].mem_mib, 20480);
        for (enum cluster_policy pol = 0; pol < _CLUSTER_POLICY_MAX; pol++) {
                struct sched_replay_options o = { .policy = pol, .seed = 1 };
                struct sched_replay_result r;
                assert_int_equal(sched_replay_run(&t, &o, &r, &err), 0);
                if (r.failed != 1 || r.fail_by_reason[SCHED_FAIL_GPU] != 1 || r.n_place != 2)
                        fail_msg("%s: %zu failed (%zu GPU room)", cluster_policy_name(pol), r.failed,
                                 r.fail_by_reason[SCHED_FAIL_GPU]);
                for (size_t k = 0; k < r.n_place; k++) {
                        bool big = streq(t.pods[r.place[k].pod].name, "n/p20g");
                        assert_int_equal(r.place[k].node, big ? -1 : 0); /* q10g on the T4 (node 0) */
                }
                sched_replay_result_free(&r);
        }
        sched_trace_free(&t);
}

/* Two 16 GiB GPUs, 12 GiB of GPU 0 held by a bound share: a share asking 8 GiB goes to GPU 1 under every
 * policy, as the extender's filter and bind put it (the GPU memory is asked, not folded into compute). */
static void test_snapshot_share_memory_gpu(void **state) {
        (void)state;
        struct sched_trace t = { 0 };
        load_snapshot("tests/data/replay-snapshot/memory.json", &t);
        assert_int_equal(pod_named(&t, "n/new")->req->c[0].mem_mib, 32 * 256);
        for (enum cluster_policy pol = 0; pol < _CLUSTER_POLICY_MAX; pol++) {
                struct sched_replay_options o = { .policy = pol, .seed = 1 };
                struct sched_replay_result r;
                struct gs_error err = { 0 };
                assert_int_equal(sched_replay_run(&t, &o, &r, &err), 0);
                assert_int_equal(r.failed, 0);
                assert_int_equal(r.n_place, 2);
                assert_string_equal(t.pods[r.place[1].pod].name, "n/new");
                if (r.place[1].gpus != 1u << 1)
                        fail_msg("%s: the share on GPUs %#llx, want GPU 1", cluster_policy_name(pol),
                                 (unsigned long long)r.place[1].gpus);
                sched_replay_result_free(&r);
        }
        sched_trace_free(&t);
}

static void test_snapshot_bound_elsewhere_fails(void **state) {
        (void)state;
        /* a NodeList's items carry no kind; a pod bound to a node the snapshot lacks, one whose node has no
         * GPU for it, and a pod affinity whose terms include one without the product: any model */
        const char *text =
                "{\"kind\":\"NodeList\",\"items\":[{\"metadata\":{\"name\":\"a\"},\"status\":{\"allocatable\":"
                "{\"nvidia.com/gpu\":\"1\"}}}]}";
        struct sched_trace t = { 0 };
        struct cluster_units u;
        cluster_units_default(&u);
        struct gs_error err = { 0 };
        assert_int_equal(sched_trace_parse_snapshot(&t, text, strlen(text), &u, &err), 0);
        const char *pods =
                "{\"kind\":\"PodList\",\"items\":["
                "{\"metadata\":{\"name\":\"gone\",\"namespace\":\"n\"},\"spec\":{\"nodeName\":\"b\",\"containers\":"
                "[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}},"
                "{\"metadata\":{\"name\":\"full\",\"namespace\":\"n\"},\"spec\":{\"nodeName\":\"a\",\"containers\":"
                "[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"2\"}}}]}},"
                "{\"metadata\":{\"name\":\"any\",\"namespace\":\"n\"},\"spec\":{\"affinity\":{\"nodeAffinity\":"
                "{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":[{\"matchExpressions\":"
                "[{\"key\":\"nvidia.com/gpu.product\",\"operator\":\"In\",\"values\":[\"X\"]}]},{}]}}},"
                "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}]}";
        assert_int_equal(sched_trace_parse_snapshot(&t, pods, strlen(pods), &u, &err), 0);
        assert_int_equal(t.n_pods, 3);
        assert_string_equal(pod_named(&t, "n/any")->spec, "");
        struct sched_replay_options o = { .policy = CLUSTER_POLICY_FRAG };
        struct sched_replay_result r;
        assert_int_equal(sched_replay_run(&t, &o, &r, &err), 0);
        assert_int_equal(r.failed, 2);
        assert_int_equal(r.fail_by_reason[SCHED_FAIL_BOUND], 2);
        assert_int_equal(r.gpu_milli_placed, 1000); /* "any" on a */
        sched_replay_result_free(&r);
        sched_trace_free(&t);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_nodes_and_pods),
                cmocka_unit_test(test_parse_malformed_names_the_line),
                cmocka_unit_test(test_kube_filters_and_cpu_accounting),
                cmocka_unit_test(test_kube_score_as_kube_scheduler),
                cmocka_unit_test(test_policies_choose_as_defined),
                cmocka_unit_test(test_frag_counts_cpu_stranding),
                cmocka_unit_test(test_frag_weighs_scarce_shapes),
                cmocka_unit_test(test_replay_protocol),
                cmocka_unit_test(test_replay_tuning),
                cmocka_unit_test(test_rng),
                cmocka_unit_test(test_quantities),
                cmocka_unit_test(test_snapshot_parse),
                cmocka_unit_test(test_snapshot_replay),
                cmocka_unit_test(test_snapshot_errors_are_named),
                cmocka_unit_test(test_snapshot_memory_share),
                cmocka_unit_test(test_snapshot_share_memory_gpu),
                cmocka_unit_test(test_snapshot_bound_elsewhere_fails),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
