/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuslice replay — a what-if run of a cluster: a node list and a pod list (the openb trace's CSV
 * formats, or a snapshot of a real cluster: kubectl's JSON or the extender's --snapshot file) replayed in arrival order through the extender's own decisions (src/sched/replay.h), with the
 * GPU allocation ratio against the arrived load as a table or JSON. docs/scheduler.md, "Replaying a
 * cluster", has the protocol and the JSON.
 */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/output.h"
#include "sched/replay.h"
#include "util/util.h"

#define TRACE_MAX (256u << 20)

static void help(FILE *f) {
        fputs("Usage: gpuslice replay --nodes FILE --pods FILE [OPTIONS]\n"
              "       gpuslice replay --snapshot FILE [OPTIONS]\n\n"
              "Replay a pod list on a node list (the openb trace's CSV formats) through the scheduler extender's\n"
              "own decisions and kube-scheduler's CPU, memory and GPU-model filters: pods arrive one by one in a\n"
              "shuffled order, never leave, and fail when no node takes them. Prints the GPU allocation ratio at\n"
              "each arrived load and the failed pods by reason. docs/scheduler.md has the protocol.\n\n"
              "Options:\n"
              "      --nodes FILE        node list: sn,cpu_milli,memory_mib,gpu,model\n"
              "      --pods FILE         pod list: name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec]\n"
              "      --snapshot FILE     instead: a cluster's nodes and pods as JSON (kubectl get nodes,pods -o\n"
              "                          json, or the extender's --snapshot file); bound pods are placed first\n"
              "                          where they run, then the pending ones in creation order (no tuning)\n"
              "      --memory-unit NAME=MIB  MiB per unit of a GPU memory resource (as the extender's)\n"
              "      --tune RATIO        tune the workload to RATIO x the cluster's GPU capacity (default 1.3;\n"
              "                          0: replay the list as it is)\n"
              "      --seed N            the random stream's seed: arrival order, tuning, tie-break ranks\n"
              "                          (default 42)\n"
              "      --policy NAME       frag (default), fgd, bestfit, gpupacking, gpuclustering, dotprod,\n"
              "                          random, binpack, spread\n"
              "      --live-mix          fgd and frag measure fragmentation against the mix of the pods seen so\n"
              "                          far (as the extender keeps it) instead of the whole pod list\n"
              "      --gpu-pods-only     the extender sees GPU pods only: CPU-only pods are placed by\n"
              "                          kube-scheduler's default scoring, not by the policy\n"
              "      --json              print one JSON object (docs/scheduler.md)\n"
              "  -h, --help              this help\n",
              f);
}

static void progress(void *arg, size_t done, size_t total) {
        (void)arg;
        unsigned w = 40, k = total ? (unsigned)(done * w / total) : w;
        fprintf(stderr, "\r[%.*s%*s] %zu/%zu pods", (int)k, "========================================", (int)(w - k),
                "", done, total);
        if (done == total)
                fputs("\r\033[K", stderr);
        fflush(stderr);
}

enum list {
        LIST_NODES,
        LIST_PODS,
        LIST_SNAPSHOT
};

static int load(const char *path, enum list what, const struct cluster_units *u, struct sched_trace *t) {
        char *text = NULL;
        size_t len = 0;
        int r = read_file(path, TRACE_MAX, &text, &len);
        if (r < 0) {
                fprintf(stderr, "gpuslice replay: cannot read %s: %s\n", path, strerror(-r));
                return EXIT_RUNTIME;
        }
        struct gs_error err = { 0 };
        r = what == LIST_NODES  ? sched_trace_parse_nodes(t, text, len, &err)
            : what == LIST_PODS ? sched_trace_parse_pods(t, text, len, &err)
                                : sched_trace_parse_snapshot(t, text, len, u, &err);
        free(text);
        if (r < 0) {
                fprintf(stderr, "gpuslice replay: %s: %s\n", path, err.message[0] ? err.message : strerror(-r));
                return r == -ENOMEM ? EXIT_RUNTIME : EXIT_DATA;
        }
        return EXIT_OK;
}

/* A snapshot's pods where they went: {"pod", "node" (null: failed), "gpus": [i...], "bound", "failed": reason}. */
static json_t *placements_json(const struct sched_replay_result *res, const struct sched_trace *t) {
        json_t *a = json_array();
        for (size_t k = 0; a && k < res->n_place; k++) {
                const struct sched_replay_place *pl = &res->place[k];
                const struct sched_trace_pod *p = &t->pods[pl->pod];
                json_t *g = json_array();
                for (unsigned i = 0; i < 64; i++)
                        if (pl->gpus >> i & 1)
                                json_array_append_new(g, json_integer(i));
                json_t *o = json_pack("{s:s, s:o, s:o, s:b}", "pod", p->name, "node",
                                      pl->node >= 0 ? json_string(t->nodes[pl->node].name) : json_null(), "gpus", g,
                                      "bound", p->node[0] != 0);
                if (o && pl->node < 0 && pl->reason >= 0)
                        json_object_set_new(o, "failed", json_string(sched_fail_reason_name(pl->reason)));
                json_array_append_new(a, o);
        }
        return a;
}

static int print_json(const struct sched_replay_result *res, const struct sched_trace *t, const char *policy,
                      uint64_t seed) {
        json_t *c = json_array(),
               *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:f, s:o}", "policy", policy, "seed", (json_int_t)seed, "gpus",
                              (json_int_t)res->gpus, "pods", (json_int_t)res->pods, "failed", (json_int_t)res->failed,
                              "seconds", round(res->seconds * 1000.0) / 1000.0, "curve", c);
        if (!o)
                return EXIT_RUNTIME;
        for (unsigned x = 0; x < res->n_curve; x++)
                json_array_append_new(c, json_pack("{s:i, s:f}", "arrived", (int)x, "allocated", res->curve[x]));
        if (res->place)
                json_object_set_new(o, "placements", placements_json(res, t));
        int r = json_dumpf(o, stdout, JSON_COMPACT | JSON_REAL_PRECISION(10)) == 0 && fputc('\n', stdout) != EOF;
        json_decref(o);
        return r ? EXIT_OK : EXIT_RUNTIME;
}

/* A snapshot's pods in the order replayed, each where it went or why it failed. */
static void print_placements(const struct sched_replay_result *res, const struct sched_trace *t) {
        printf("\npods in the order replayed (bound ones first, where they run; then pending ones by creation):\n");
        printf("  %-40s %-24s %s\n", "POD", "NODE", "GPUS");
        for (size_t k = 0; k < res->n_place; k++) {
                const struct sched_replay_place *pl = &res->place[k];
                const struct sched_trace_pod *p = &t->pods[pl->pod];
                if (pl->node < 0) {
                        printf("  %-40s %-24s failed: %s\n", p->name, "-",
                               pl->reason >= 0 ? sched_fail_reason_name(pl->reason) : "?");
                        continue;
                }
                char gpus[200] = "-";
                size_t at = 0;
                for (unsigned i = 0; i < 64 && at + 4 < sizeof gpus; i++)
                        if (pl->gpus >> i & 1)
                                at += (size_t)snprintf(gpus + at, sizeof gpus - at, "%s%u", at ? "," : "", i);
                printf("  %-40s %-24s %s%s\n", p->name, t->nodes[pl->node].name, gpus, p->node[0] ? " (bound)" : "");
        }
}

static void print_table(const struct sched_replay_result *res, const char *policy, uint64_t seed) {
        printf("policy %s, seed %llu: %zu pods on %llu GPUs, %zu failed, %.2f s\n\n", policy, (unsigned long long)seed,
               res->pods, (unsigned long long)res->gpus, res->failed, res->seconds);
        printf("%-10s %s\n", "ARRIVED %", "ALLOCATED %");
        for (unsigned x = 0; x < res->n_curve; x++)
                if (x % 10 == 0 || x == res->n_curve - 1)
                        printf("%-10u %.2f\n", x, res->curve[x]);
        if (!res->failed)
                return;
        printf("\nfailed pods by reason:\n");
        for (unsigned why = 0; why < _SCHED_FAIL_MAX; why++) {
                if (!res->fail_by_reason[why])
                        continue;
                printf("  %zu %s\n", res->fail_by_reason[why], sched_fail_reason_name(why));
                for (size_t k = 0; k < res->n_fail; k++) {
                        const struct sched_replay_fail *f = &res->fail[k];
                        if (f->reason != why)
                                continue;
                        if (!f->num_gpu)
                                printf("      %zu CPU-only\n", f->count);
                        else if (f->gpu_milli < 1000)
                                printf("      %zu x 0.%03u GPU\n", f->count, f->gpu_milli);
                        else
                                printf("      %zu x %u GPU\n", f->count, f->num_gpu);
                }
        }
}

enum {
        OPT_NODES = 256,
        OPT_PODS,
        OPT_TUNE,
        OPT_SEED,
        OPT_POLICY,
        OPT_LIVE,
        OPT_GPU_ONLY,
        OPT_JSON,
        OPT_SNAPSHOT,
        OPT_UNIT
};

/* lint: long — the getopt switch, one case per option, then load, run, print. */
int cmd_replay(int argc, char **argv) {
        static const struct option opts[] = {
                { "nodes", required_argument, NULL, OPT_NODES },
                { "pods", required_argument, NULL, OPT_PODS },
                { "tune", required_argument, NULL, OPT_TUNE },
                { "seed", required_argument, NULL, OPT_SEED },
                { "policy", required_argument, NULL, OPT_POLICY },
                { "json", no_argument, NULL, OPT_JSON },
                { "live-mix", no_argument, NULL, OPT_LIVE },
                { "gpu-pods-only", no_argument, NULL, OPT_GPU_ONLY },
                { "snapshot", required_argument, NULL, OPT_SNAPSHOT },
                { "memory-unit", required_argument, NULL, OPT_UNIT },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        const char *nodes = NULL, *pods = NULL, *snapshot = NULL;
        struct sched_replay_options o = { .policy = CLUSTER_POLICY_FRAG, .seed = 42, .tune = 1.3 };
        struct cluster_units units;
        cluster_units_default(&units);
        bool json = false, tune_set = false;
        int c;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                char *end = NULL;
                switch (c) {
                        case OPT_NODES: nodes = optarg; break;
                        case OPT_PODS: pods = optarg; break;
                        case OPT_TUNE:
                                tune_set = true;
                                o.tune = strtod(optarg, &end);
                                if (!optarg[0] || *end || !(o.tune >= 0 && o.tune <= 100)) {
                                        fprintf(stderr, "gpuslice replay: --tune: expected a ratio 0..100, got '%s'\n",
                                                optarg);
                                        return EXIT_USAGE;
                                }
                                break;
                        case OPT_SEED:
                                if (parse_u64(optarg, &o.seed) < 0) {
                                        fprintf(stderr, "gpuslice replay: --seed: expected a number, got '%s'\n",
                                                optarg);
                                        return EXIT_USAGE;
                                }
                                break;
                        case OPT_POLICY:
                                if (cluster_policy_from_name(optarg, &o.policy) < 0) {
                                        fprintf(stderr, "gpuslice replay: --policy: unknown policy '%s'\n", optarg);
                                        return EXIT_USAGE;
                                }
                                break;
                        case OPT_JSON: json = true; break;
                        case OPT_LIVE: o.live = true; break;
                        case OPT_GPU_ONLY: o.gpu_pods_only = true; break;
                        case OPT_SNAPSHOT: snapshot = optarg; break;
                        case OPT_UNIT:
                                if (cluster_units_set(&units, optarg) < 0) {
                                        fprintf(stderr,
                                                "gpuslice replay: --memory-unit: expected RESOURCE=MIB with a memory "
                                                "resource name, got '%s'\n",
                                                optarg);
                                        return EXIT_USAGE;
                                }
                                break;
                        case 'h': help(stdout); return EXIT_OK;
                        default: help(stderr); return EXIT_USAGE;
                }
        }
        int r = cli_no_more_args("replay", argc, argv);
        if (r != EXIT_OK)
                return r;
        if (snapshot && (nodes || pods)) {
                fprintf(stderr, "gpuslice replay: --snapshot and --nodes/--pods exclude each other\n");
                return EXIT_USAGE;
        }
        if (!snapshot && (!nodes || !pods)) {
                fprintf(stderr, "gpuslice replay: --nodes and --pods (or --snapshot) are required\n");
                return EXIT_USAGE;
        }
        if (snapshot && tune_set && o.tune > 0) {
                fprintf(stderr, "gpuslice replay: --tune: a snapshot replays as it is (--tune 0)\n");
                return EXIT_USAGE;
        }
        if (snapshot)
                o.tune = 0;
        struct sched_trace t = { 0 };
        if (snapshot) {
                r = load(snapshot, LIST_SNAPSHOT, &units, &t);
        } else {
                r = load(nodes, LIST_NODES, &units, &t);
                if (r == EXIT_OK)
                        r = load(pods, LIST_PODS, &units, &t);
        }
        if (r != EXIT_OK) {
                sched_trace_free(&t);
                return r;
        }
        if (isatty(STDERR_FILENO))
                o.progress = progress;
        struct sched_replay_result res;
        struct gs_error err = { 0 };
        int e = sched_replay_run(&t, &o, &res, &err);
        if (e < 0) {
                sched_trace_free(&t);
                fprintf(stderr, "gpuslice replay: %s\n", err.message[0] ? err.message : strerror(-e));
                return e == -ENOMEM ? EXIT_RUNTIME : EXIT_DATA;
        }
        const char *name = cluster_policy_name(o.policy);
        if (json)
                r = print_json(&res, &t, name, o.seed);
        else
                print_table(&res, name, o.seed);
        if (!json && res.place)
                print_placements(&res, &t);
        sched_replay_result_free(&res);
        sched_trace_free(&t);
        return r;
}
