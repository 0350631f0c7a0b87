/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice topo — the node as a person wants to see it: matrix, tree and GPU table. */
#include <getopt.h>

#include "cli/commands.h"
#include "cli/output.h"
#include "util/util.h"

static void help(FILE *f) {
        fputs("Usage: gpuslice topo [OPTIONS]\n\n"
              "Show the node's GPUs and the link between every pair: the matrix (as `nvidia-smi topo -m`\n"
              "prints it, readable back with --topology), the tree (NUMA node → host bridge → PCIe switch\n"
              "→ GPU) and the GPU table. Without --topology the node is read through NVML.\n\n"
              "Options:\n" NODE_SOURCE_HELP "  -m, --matrix            only the matrix\n"
              "      --tree              only the tree\n"
              "  -g, --gpus              only the GPU table\n"
              "      --json              machine-readable output (everything)\n"
              "  -h, --help              this help\n",
              f);
}

int cmd_topo(int argc, char **argv) {
        enum {
                OPT_NVML = 0x100,
                OPT_TREE,
                OPT_JSON
        };
        static const struct option opts[] = {
                { "topology", required_argument, NULL, 't' }, { "nvml-library", required_argument, NULL, OPT_NVML },
                { "matrix", no_argument, NULL, 'm' },         { "tree", no_argument, NULL, OPT_TREE },
                { "gpus", no_argument, NULL, 'g' },           { "json", no_argument, NULL, OPT_JSON },
                { "help", no_argument, NULL, 'h' },           {},
        };
        struct node_source src = { 0 };
        bool matrix = false, tree = false, gpus = false, json = false;
        int c;
        optind = 0;
        while ((c = getopt_long(argc, argv, "t:mgh", opts, NULL)) >= 0) {
                switch (c) {
                        case 't': src.topology = optarg; break;
                        case OPT_NVML: src.nvml_library = optarg; break;
                        case 'm': matrix = true; break;
                        case OPT_TREE: tree = true; break;
                        case 'g': gpus = true; break;
                        case OPT_JSON: json = true; break;
                        case 'h': help(stdout); return EXIT_OK;
                        default: help(stderr); return EXIT_USAGE;
                }
        }
        if (cli_no_more_args("topo", argc, argv) != EXIT_OK)
                return EXIT_USAGE;
        if (!matrix && !tree && !gpus)
                matrix = tree = gpus = true;

        _cleanup_(freep) struct topo *t = NULL;
        int r = node_load_new(&src, &t);
        if (r != EXIT_OK)
                return r;
        if (json)
                return json_print(stdout, json_topo(t)) < 0 ? EXIT_RUNTIME : EXIT_OK;
        bool sep = false;
        if (matrix) {
                print_matrix(stdout, t);
                sep = true;
        }
        if (tree) {
                if (sep)
                        putchar('\n');
                print_tree(stdout, t);
                sep = true;
        }
        if (gpus) {
                if (sep)
                        putchar('\n');
                print_gpus(stdout, t);
        }
        return EXIT_OK;
}
