/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for the scheduler extender's untrusted inputs (src/sched/codec.c): the input is
 * decoded as ExtenderArgs, ExtenderBindingArgs, ExtenderPreemptionArgs, a Pod, a node GPU
 * annotation and a snapshot;
 * whatever decodes is run through the model and the decisions (filter of the decoded pod on every
 * loaded node, scores, the filter reply), which must keep their invariants. The input is also parsed
 * as the operator page's query string (src/sched/view.h); whatever parses must hold only what its
 * fields may hold and render the cluster and topology documents over a fixed model as valid JSON.
 */
#undef NDEBUG /* the checks are the point, in every build type */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "sched/codec.h"
#include "sched/view.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A node of 2 GPUs with a share on each and a pending pod, for the page's documents. */
static const char page_model[] =
        "{\"nodes\":[{\"metadata\":{\"name\":\"gpu-a\",\"annotations\":{\"gpuslice.io/gpus\":"
        "\"{\\\"v\\\":1,\\\"gpus\\\":[{\\\"i\\\":0,\\\"uuid\\\":\\\"GPU-0\\\",\\\"model\\\":"
        "\\\"Tesla T4\\\",\\\"mem\\\":16384,\\\"health\\\":\\\"ok\\\"},{\\\"i\\\":1,"
        "\\\"uuid\\\":\\\"GPU-1\\\",\\\"model\\\":\\\"Tesla T4\\\",\\\"mem\\\":16384,"
        "\\\"health\\\":\\\"xid 79\\\"}],\\\"links\\\":\\\"PIX\\\"}\"}}}],"
        "\"pods\":[{\"metadata\":{\"namespace\":\"ml\",\"name\":\"p\",\"uid\":\"u\"},\"spec\":{"
        "\"nodeName\":\"gpu-a\",\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{"
        "\"gpuslice.io/gpu-memory\":\"4\"}}}]}}]}";

static void page_query(const char *s, size_t size) {
        static struct sched_model *pm;
        struct gs_error err = { 0 };
        if (!pm) {
                struct cluster_units u;
                cluster_units_default(&u);
                assert(sched_model_new(&pm) == 0);
                sched_model_keep_details(pm, true);
                assert(sched_snapshot_load(pm, page_model, strlen(page_model), &u, NULL, NULL, &err) == 0);
        }
        struct sched_view_query q;
        if (sched_view_query_parse(s, size, &q, &err) < 0) {
                assert(err.message[0]);
                return;
        }
        assert(size <= SCHED_VIEW_MAX_QUERY);
        assert(strlen(q.node) < sizeof q.node &&
               strspn(q.node, "abcdefghijklmnopqrstuvwxyz0123456789-.") == strlen(q.node));
        assert(strspn(q.ns, "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(q.ns) && strlen(q.ns) < 64);
        assert(strlen(q.model) <= SCHED_VIEW_MAX_MODEL);
        struct sched_view_pending none = { 0 };
        struct sched_view_state st = { .generation = 3, .ready = true, .now_ns = 1 };
        char *text;
        size_t len;
        assert(sched_view_cluster(pm, &none, 0, &q, &st, &text, &len) == 0);
        json_error_t je;
        json_t *j = json_loadb(text, len, 0, &je);
        assert(j);
        assert(json_object_get(j, q.has_since && q.since == 3 ? "unchanged" : "nodes"));
        json_decref(j);
        free(text);
        int r = sched_view_topology(pm, q.node, &text, &len);
        assert(r == 0 || r == -ENOENT);
        if (r == 0) {
                j = json_loadb(text, len, 0, &je);
                assert(j);
                json_decref(j);
                free(text);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *s = (const char *)data;
        page_query(s, size);
        struct cluster_units u;
        cluster_units_default(&u);
        struct gs_error err = { 0 };
        struct sched_ext_args a;
        int have_args = sched_ext_args_decode(s, size, &u, &a, &err) == 0;
        { /* the fast path of the node names answers as the full decoder */
                struct sched_ext_args f;
                struct gs_error ferr = { 0 };
                assert((sched_ext_args_decode_full(s, size, &u, &f, &ferr) == 0) == have_args);
                assert(have_args || strcmp(err.message, ferr.message) == 0);
                if (have_args) {
                        assert(f.n_nodes == a.n_nodes && f.node_cache == a.node_cache);
                        for (size_t i = 0; i < a.n_nodes; i++)
                                assert(strcmp(f.node_names[i], a.node_names[i]) == 0);
                        sched_ext_args_done(&f);
                }
        }
        struct sched_ext_bind_args b;
        if (sched_ext_bind_decode(s, size, &b, &err) == 0)
                assert(b.pod_name[0] && b.node[0]);
        struct cluster_node_info *ni = malloc(sizeof *ni);
        assert(ni);
        ni->name[0] = 'n';
        ni->name[1] = '\0';
        struct sched_model *m;
        assert(sched_model_new(&m) == 0);
        if (cluster_node_decode(s, size, ni, &err) == 0) {
                assert(ni->n_gpus <= CLUSTER_GPUS_MAX);
                char *text;
                assert(cluster_node_encode(ni, &text) == 0);
                free(text);
                assert(sched_model_set_node(m, ni) == 0);
        }
        free(ni);
        (void)sched_snapshot_load(m, s, size, &u, NULL, NULL, &err);
        if (have_args) {
                size_t n = a.n_nodes;
                struct sched_fit *fits = calloc(n ? n : 1, sizeof *fits);
                struct sched_ext_node_result *res = calloc(n ? n : 1, sizeof *res);
                int *scores = calloc(n ? n : 1, sizeof *scores);
                assert(fits && res && scores);
                for (size_t i = 0; i < n; i++) {
                        const struct sched_node *node = sched_model_node(m, a.node_names[i]);
                        if (node)
                                (void)sched_fit_node(m, node, &a.pod.req, CLUSTER_POLICY_BINPACK, &fits[i]);
                        else
                                fits[i].verdict = SCHED_UNRESOLVABLE;
                        res[i].verdict = fits[i].verdict;
                        res[i].reason = fits[i].reason;
                }
                sched_score_fits(fits, n, CLUSTER_POLICY_SPREAD, scores);
                for (size_t i = 0; i < n; i++)
                        assert(scores[i] >= 0 && scores[i] <= 10);
                char *out;
                size_t out_len;
                if (sched_ext_filter_encode(&a, res, NULL, &out, &out_len) == 0)
                        free(out);
                free(fits);
                free(res);
                free(scores);
                sched_ext_args_done(&a);
        }
        /* as ExtenderPreemptionArgs: whatever decodes is answered on the loaded model, which must
         * come back unchanged */
        struct sched_ext_preempt_args pa;
        if (sched_ext_preempt_decode(s, size, &u, &pa, &err) == 0) {
                bool *keep = calloc(pa.n_nodes ? pa.n_nodes : 1, sizeof *keep);
                assert(keep);
                uint64_t gen = sched_model_generation(m);
                for (size_t i = 0; i < pa.n_nodes; i++) {
                        assert(pa.nodes[i].node && pa.nodes[i].node[0]);
                        struct sched_fit f;
                        keep[i] = sched_model_fit_without(m, pa.nodes[i].node, pa.nodes[i].uids, pa.nodes[i].n_uids,
                                                          &pa.pod.req, CLUSTER_POLICY_BINPACK, &f) == 0;
                }
                assert(sched_model_generation(m) == gen);
                char *out;
                size_t out_len;
                if (sched_ext_preempt_encode(&pa, keep, &out, &out_len) == 0)
                        free(out);
                free(keep);
                sched_ext_preempt_args_done(&pa);
        }
        sched_model_free(m);
        return 0;
}
