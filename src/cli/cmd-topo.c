/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice topo — the node as a person wants to see it: matrix, tree, GPU table and MIG instances. */
#include <getopt.h>

#include "cli/commands.h"
#include "cli/output.h"
#include "util/util.h"

static void help(FILE *f) {
        fputs("Usage: gpuslice topo [OPTIONS]\n\n"
              "Show the node's GPUs and the link between every pair: the matrix (as `nvidia-smi topo -m`\n"
              "prints it, readable back with --topology), the tree (NUMA node → host bridge → PCIe switch\n"
              "→ GPU), the GPU table and, for GPUs with MIG, their MIG mode, GPU instances and MIG devices\n"
              "(as `nvidia-smi mig -lgi` and nvidia-smi's MIG devices table show them). Without --topology\n"
              "the node is read through NVML.\n\n"
              "Options:\n" NODE_SOURCE_HELP "  -m, --matrix            only the matrix\n"
              "      --tree              only the tree\n"
              "  -g, --gpus              only the GPU table\n"
              "      --mig               only the MIG tables\n"
              "      --json              machine-readable output (everything)\n"
              "  -h, --help              this help\n",
              f);
}

/* lint: long — a command's main: the getopt switch (one case per flag), then each view in order; its size is its
 * flags'. */
int cmd_topo(int argc, char **argv) {
        enum {
                OPT_NVML = 0x100,
                OPT_TREE,
                OPT_JSON,
                OPT_MIG
        };
        static const struct option opts[] = {
                { "topology", required_argument, NULL, 't' },
                { "nvml-library", required_argument, NULL, OPT_NVML },
                { "matrix", no_argument, NULL, 'm' },
                { "tree", no_argument, NULL, OPT_TREE },
                { "gpus", no_argument, NULL, 'g' },
                { "json", no_argument, NULL, OPT_JSON },
                { "mig", no_argument, NULL, OPT_MIG },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        struct node_source src = { 0 };
        bool matrix = false, tree = false, gpus = false, json = false, mig = false;
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
                        case OPT_MIG: mig = true; break;
                        case 'h': help(stdout); return EXIT_OK;
                        default: help(stderr); return EXIT_USAGE;
                }
        }
        if (cli_no_more_args("topo", argc, argv) != EXIT_OK)
                return EXIT_USAGE;
        if (!matrix && !tree && !gpus && !mig)
                matrix = tree = gpus = mig = true;

        _cleanup_(freep) struct topo *t = NULL;
        _cleanup_(freep) struct mig_node *m = NULL;
        int r = node_load_new_mig(&src, &t, &m);
        if (r != EXIT_OK)
                return r;
        if (json) {
                json_t *o = json_topo(t);
                if (o)
                        json_object_set_new(o, "mig", json_mig(m));
                return json_print(stdout, o) < 0 ? EXIT_RUNTIME : EXIT_OK;
        }
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
                sep = true;
        }
        bool any_mig = false;
        for (unsigned i = 0; i < m->n_gpus; i++)
                any_mig |= m->gpu[i].mode >= 0;
        if (mig && any_mig) {
                if (sep)
                        putchar('\n');
                print_mig(stdout, m);
        }
        return EXIT_OK;
}
