/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice alloc — what the allocator would pick on this node (or a pasted topology). */
#include <getopt.h>

#include "alloc/alloc.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "engine/engine.h"
#include "util/util.h"

static void help(FILE *f) {
        fputs("Usage: gpuslice alloc --count K [OPTIONS]\n\n"
              "Pick K whole GPUs along the fastest links among the free ones, and say why: the set's\n"
              "ring bandwidth (slowest link of its best ring, what an all-reduce sees), its worst link\n"
              "and the sum over all its pairs. GPUs that are lost or forbidden are never picked.\n\n"
              "Options:\n"
              "  -c, --count K           number of GPUs (required)\n"
              "  -b, --busy LIST         GPUs already in use, e.g. 0,1,3-4\n"
              "  -i, --must-include LIST GPUs the answer must contain\n"
              "      --engine URL        also count GPUs held by running containers of a Docker or\n"
              "                          Podman Engine API (unix:///run/podman/podman.sock): device\n"
              "                          nodes, --gpus requests, NVIDIA_VISIBLE_DEVICES\n"
              "      --min-link LEVEL    refuse sets whose worst link is below LEVEL\n"
              "                          (NV#, PIX, PXB, PHB, NODE, SYS)\n" NODE_SOURCE_HELP
              "      --json              machine-readable output ({\"gpus\": [...], ...})\n"
              "  -h, --help              this help\n\n"
              "Exit status: 0 picked, 2 bad usage, 3 bad topology, 4 not satisfiable, 1 other errors.\n",
              f);
}

/* lint: long — a command's main: the getopt switch (one case per flag, each checking its value and naming the flag
 * in its message), then the command's steps in order; its size is its flags'. */
int cmd_alloc(int argc, char **argv) {
        enum {
                OPT_NVML = 0x100,
                OPT_JSON,
                OPT_MIN,
                OPT_ENGINE
        };
        static const struct option opts[] = {
                { "count", required_argument, NULL, 'c' },
                { "busy", required_argument, NULL, 'b' },
                { "must-include", required_argument, NULL, 'i' },
                { "min-link", required_argument, NULL, OPT_MIN },
                { "engine", required_argument, NULL, OPT_ENGINE },
                { "topology", required_argument, NULL, 't' },
                { "nvml-library", required_argument, NULL, OPT_NVML },
                { "json", no_argument, NULL, OPT_JSON },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        struct node_source src = { 0 };
        const char *busy_s = "", *must_s = "", *min_s = NULL, *engine = NULL;
        unsigned count = 0;
        bool have_count = false, json = false;
        int c;
        optind = 0;
        while ((c = getopt_long(argc, argv, "c:b:i:t:h", opts, NULL)) >= 0) {
                switch (c) {
                        case 'c':
                                if (parse_uint(optarg, TOPO_MAX_GPUS * 4, &count) < 0) {
                                        fprintf(stderr, "gpuslice alloc: --count: expected a number, got '%s'\n",
                                                optarg);
                                        return EXIT_USAGE;
                                }
                                have_count = true;
                                break;
                        case 'b': busy_s = optarg; break;
                        case 'i': must_s = optarg; break;
                        case OPT_MIN: min_s = optarg; break;
                        case OPT_ENGINE: engine = optarg; break;
                        case 't': src.topology = optarg; break;
                        case OPT_NVML: src.nvml_library = optarg; break;
                        case OPT_JSON: json = true; break;
                        case 'h': help(stdout); return EXIT_OK;
                        default: help(stderr); return EXIT_USAGE;
                }
        }
        if (cli_no_more_args("alloc", argc, argv) != EXIT_OK)
                return EXIT_USAGE;
        if (!have_count) {
                fputs("gpuslice alloc: --count is required\n", stderr);
                return EXIT_USAGE;
        }
        struct alloc_request req = { .count = count };
        if (min_s && topo_link_from_name(min_s, strlen(min_s), &req.min_link) < 0) {
                fprintf(stderr,
                        "gpuslice alloc: --min-link: '%s' is not a link level (NV#, PIX, PXB, PHB, NODE, SYS)\n",
                        min_s);
                return EXIT_USAGE;
        }

        _cleanup_(freep) struct topo *t = NULL;
        int r = node_load_new(&src, &t);
        if (r != EXIT_OK)
                return r;

        alloc_set_t busy, must, usable = 0;
        if (alloc_set_parse(busy_s, t->n_gpus, &busy) < 0) {
                fprintf(stderr, "gpuslice alloc: --busy: '%s' is not a list of GPU indices below %u (e.g. 0,1,4-5)\n",
                        busy_s, t->n_gpus);
                return EXIT_USAGE;
        }
        if (alloc_set_parse(must_s, t->n_gpus, &must) < 0) {
                fprintf(stderr,
                        "gpuslice alloc: --must-include: '%s' is not a list of GPU indices below %u (e.g. 0,1,4-5)\n",
                        must_s, t->n_gpus);
                return EXIT_USAGE;
        }
        if (engine) {
                struct engine_container *cs = NULL;
                size_t n_cs = 0;
                r = engine_list(engine, true, &cs, &n_cs);
                if (r < 0) {
                        fprintf(stderr, "gpuslice alloc: --engine %s: %s\n", engine, strerror(-r));
                        return EXIT_RUNTIME;
                }
                for (size_t k = 0; k < n_cs; k++) {
                        alloc_set_t held = engine_container_gpus(&cs[k], t);
                        if (!held)
                                continue;
                        char list[512];
                        alloc_set_format(held, list, sizeof list);
                        fprintf(stderr, "busy:            %s (container %s)\n", list, cs[k].name);
                        busy |= held;
                }
                free(cs);
        }
        for (unsigned i = 0; i < t->n_gpus; i++)
                if (t->gpu[i].state == TOPO_GPU_OK)
                        usable |= 1ULL << i;
        req.available = usable & ~busy;
        req.must_include = must;

        struct alloc_result res;
        struct gs_error err = { 0 };
        r = alloc_pick_gpus(t, &req, &res, &err);
        if (r < 0) {
                fprintf(stderr, "gpuslice alloc: %s\n", err.message[0] ? err.message : strerror(-r));
                return r == -EINVAL ? EXIT_USAGE : EXIT_UNSAT;
        }
        char set[512], worst[8];
        alloc_set_format(res.set, set, sizeof set);
        if (json) {
                json_t *gpus = json_array(), *uuids = json_array();
                for (unsigned k = 0; k < res.n; k++) {
                        json_array_append_new(gpus, json_integer(res.gpus[k]));
                        json_array_append_new(uuids, json_string(t->gpu[res.gpus[k]].uuid));
                }
                return json_print(stdout, json_pack("{s:o, s:o, s:i, s:i, s:s, s:s}", "gpus", gpus, "uuids", uuids,
                                                    "ring_bandwidth_gbps", (int)res.ring_bw, "pair_total_gbps",
                                                    (int)res.pair_total, "worst_link", topo_link_name(res.worst, worst),
                                                    "why", res.why)) < 0
                               ? EXIT_RUNTIME
                               : EXIT_OK;
        }
        printf("GPUs:            %s\n", set);
        if (res.n > 1) {
                printf("ring bandwidth:  %u GB/s (slowest link of the best ring through them)\n", res.ring_bw);
                printf("worst link:      %s\n", topo_link_name(res.worst, worst));
                printf("pair total:      %u GB/s\n", res.pair_total);
        }
        printf("why:             %s\n", res.why);
        printf("docker:          --gpus '\"device=%s\"'\n", set);
        return EXIT_OK;
}
