/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice labels — the node's GPU labels as a Node Feature Discovery features file. */
#include <getopt.h>

#include "cli/commands.h"
#include "cli/output.h"
#include "labels/labels.h"
#include "util/util.h"

static void help(FILE *f) {
        fputs("Usage: gpuslice labels [OPTIONS]\n\n"
              "Print (or write atomically) node labels for the node's GPUs in Node Feature Discovery's\n"
              "features-file format: the GPU model (nvidia-gpu-name, nvidia.com/gpu.product), memory,\n"
              "count, family, driver version and the newest CUDA version the driver supports.\n\n"
              "Options:\n"
              "  -o, --output FILE       write FILE atomically instead of printing, e.g.\n"
              "                          /etc/kubernetes/node-feature-discovery/features.d/gpuslice\n" NODE_SOURCE_HELP
              "  -h, --help              this help\n",
              f);
}

int cmd_labels(int argc, char **argv) {
        enum {
                OPT_NVML = 0x100
        };
        static const struct option opts[] = {
                { "output", required_argument, NULL, 'o' },
                { "topology", required_argument, NULL, 't' },
                { "nvml-library", required_argument, NULL, OPT_NVML },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        struct node_source src = { 0 };
        const char *output = NULL;
        int c;
        optind = 0;
        while ((c = getopt_long(argc, argv, "o:t:h", opts, NULL)) >= 0) {
                switch (c) {
                        case 'o': output = optarg; break;
                        case 't': src.topology = optarg; break;
                        case OPT_NVML: src.nvml_library = optarg; break;
                        case 'h': help(stdout); return EXIT_OK;
                        default: help(stderr); return EXIT_USAGE;
                }
        }
        if (cli_no_more_args("labels", argc, argv) != EXIT_OK)
                return EXIT_USAGE;
        _cleanup_(freep) struct topo *t = NULL;
        int r = node_load_new(&src, &t);
        if (r != EXIT_OK)
                return r;
        _cleanup_(freep) char *text = NULL;
        size_t len;
        r = labels_format(t, &text, &len);
        if (r < 0) {
                fprintf(stderr, "gpuslice labels: %s\n", r == -ENODEV ? "no GPU could be queried" : strerror(-r));
                return EXIT_RUNTIME;
        }
        if (!output) {
                fwrite(text, 1, len, stdout);
                return EXIT_OK;
        }
        r = labels_write_atomic(output, text, len);
        if (r < 0) {
                fprintf(stderr, "gpuslice labels: cannot write %s: %s\n", output, strerror(-r));
                return EXIT_RUNTIME;
        }
        return EXIT_OK;
}
