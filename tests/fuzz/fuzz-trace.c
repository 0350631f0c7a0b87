/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for `gpuslice replay`'s input (src/sched/replay.c, replay-snap.c): the openb node and pod
 * lists, and a cluster's snapshot. The first byte picks the policy and whether the run tunes; the rest is
 * a node list, then after the first NUL a pod list (no NUL: the same text as both); a text starting with
 * '{' is also read as a snapshot (JSON: kubectl's List or the extender's --snapshot object). Whatever parses is replayed when small, and the run must
 * keep its invariants: no more GPU placed than arrived or than the cluster has, failures grouped in full,
 * the curve within 0..100 %.
 */
#undef NDEBUG /* the checks are the point, in every build type */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sched/replay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void run(const struct sched_trace *t, uint8_t how) {
        uint64_t gpus = 0, min_share = 1000;
        for (size_t i = 0; i < t->n_nodes; i++)
                gpus += t->nodes[i].gpus;
        for (size_t i = 0; i < t->n_pods; i++)
                if (t->pods[i].gpu_milli && t->pods[i].gpu_milli < min_share)
                        min_share = t->pods[i].gpu_milli;
        if (t->n_nodes > 16 || t->n_pods > 256 || gpus > 64)
                return;
        struct sched_replay_options o = { .policy = (enum cluster_policy)(how % _CLUSTER_POLICY_MAX),
                                          .seed = how,
                                          .live = how & 0x80,
                                          .gpu_pods_only = how & 0x20,
                                          /* tuning up draws copies of pods: only with few GPUs and big shares */
                                          .tune = (how & 0x40) && gpus <= 16 && min_share >= 100 && !t->snapshot ? 1.3
                                                                                                                 : 0 };
        struct sched_replay_result r;
        struct gs_error err = { 0 };
        int e = sched_replay_run(t, &o, &r, &err);
        if (e < 0) {
                assert(e == -EINVAL || e == -ENOMEM);
                assert(err.message[0]);
                return;
        }
        assert(r.gpus == gpus);
        assert(r.gpu_milli_placed <= r.gpu_milli_arrived);
        assert(r.gpu_milli_placed <= 1000 * gpus);
        assert(r.failed <= r.pods);
        size_t grouped = 0, by_reason = 0;
        for (size_t k = 0; k < r.n_fail; k++)
                grouped += r.fail[k].count;
        for (unsigned k = 0; k < _SCHED_FAIL_MAX; k++)
                by_reason += r.fail_by_reason[k];
        assert(by_reason == r.failed && grouped <= r.failed);
        for (unsigned x = 0; x < r.n_curve; x++)
                assert(r.curve[x] >= 0 && r.curve[x] <= 100.0 + 1e-9);
        sched_replay_result_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1 || size > 1 << 16)
                return 0;
        uint8_t how = data[0];
        const char *text = (const char *)data + 1;
        size_t len = size - 1;
        const char *nul = memchr(text, '\0', len);
        size_t nodes_len = nul ? (size_t)(nul - text) : len;
        const char *pods = nul ? nul + 1 : text;
        size_t pods_len = nul ? len - nodes_len - 1 : len;
        struct sched_trace t = { 0 };
        struct gs_error err = { 0 };
        int a = sched_trace_parse_nodes(&t, text, nodes_len, &err);
        assert(a == 0 || ((a == -EINVAL || a == -ENOMEM) && err.message[0]));
        gs_error_clear(&err);
        int b = sched_trace_parse_pods(&t, pods, pods_len, &err);
        assert(b == 0 || ((b == -EINVAL || b == -ENOMEM) && err.message[0]));
        if (a == 0 && b == 0)
                run(&t, how);
        sched_trace_free(&t);
        if (len && text[0] == '{') {
                struct cluster_units u;
                cluster_units_default(&u);
                struct sched_trace s = { 0 };
                gs_error_clear(&err);
                int c = sched_trace_parse_snapshot(&s, text, len, &u, &err);
                assert(c == 0 || ((c == -EINVAL || c == -ENOMEM) && err.message[0]));
                assert(c < 0 || s.snapshot);
                for (size_t i = 0; c == 0 && i < s.n_pods; i++)
                        assert(s.pods[i].num_gpu <= CLUSTER_GPUS_MAX && s.pods[i].gpu_milli <= 1000 &&
                               (!s.pods[i].num_gpu == !s.pods[i].gpu_milli));
                if (c == 0)
                        run(&s, how);
                sched_trace_free(&s);
        }
        return 0;
}
