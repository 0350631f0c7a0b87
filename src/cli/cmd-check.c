/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice check — the CUDA toolkit ↔ driver table answered for this node: its driver, the newest
 * CUDA it runs, and for each toolkit version whether it runs natively, through minor-version
 * compatibility, only with forward compatibility (data-center GPUs), or not at all. */
#include <getopt.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "cli/output.h"
#include "compat/compat.h"
#include "util/util.h"

static void help(FILE *f) {
        fputs("Usage: gpuslice check [OPTIONS]\n\n"
              "Show the node's driver, the newest CUDA version it supports, and which CUDA toolkit versions\n"
              "run on it natively, through minor-version compatibility, or only with forward compatibility\n"
              "(the cuda-compat package, data-center GPUs only).\n\n"
              "Options:\n"
              "  -j, --json              JSON instead of a table\n" NODE_SOURCE_HELP
              "  -h, --help              this help\n",
              f);
}

/* lint: long — a command's main: the getopt switch (one case per flag, each checking its value and naming the flag
 * in its message), then the command's steps in order; its size is its flags'. */
int cmd_check(int argc, char **argv) {
        enum {
                OPT_NVML = 0x100
        };
        static const struct option opts[] = {
                { "json", no_argument, NULL, 'j' },
                { "topology", required_argument, NULL, 't' },
                { "nvml-library", required_argument, NULL, OPT_NVML },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        struct node_source src = { 0 };
        bool json = false;
        int c;
        optind = 0;
        while ((c = getopt_long(argc, argv, "jt:h", opts, NULL)) >= 0) {
                switch (c) {
                        case 'j': json = true; break;
                        case 't': src.topology = optarg; break;
                        case OPT_NVML: src.nvml_library = optarg; break;
                        case 'h': help(stdout); return EXIT_OK;
                        default: help(stderr); return EXIT_USAGE;
                }
        }
        if (cli_no_more_args("check", argc, argv) != EXIT_OK)
                return EXIT_USAGE;
        _cleanup_(freep) struct topo *t = NULL;
        int r = node_load_new(&src, &t);
        if (r != EXIT_OK)
                return r;

        /* forward compatibility needs every GPU to be a data-center part */
        bool datacenter = t->n_gpus > 0;
        const char *brand = "", *model = "";
        for (unsigned i = 0; i < t->n_gpus; i++) {
                if (!compat_gpu_datacenter(t->gpu[i].brand, t->gpu[i].name))
                        datacenter = false;
                if (!model[0]) {
                        brand = t->gpu[i].brand;
                        model = t->gpu[i].name;
                }
        }
        char cuda[32] = "unknown";
        if (t->cuda_version > 0) {
                struct compat_version v = compat_version_from_cuda(t->cuda_version);
                compat_version_format(&v, cuda, sizeof cuda);
        }
        size_t n;
        const struct compat_cuda_row *rows = compat_cuda_table(&n);
        if (json) {
                json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:b, s:[]}", "driver",
                                      t->driver_version[0] ? t->driver_version : "unknown", "cuda", cuda, "gpu", model,
                                      "brand", brand[0] ? brand : "unknown", "forward_compatibility_possible",
                                      datacenter, "toolkits");
                if (!o)
                        return EXIT_RUNTIME;
                json_t *a = json_object_get(o, "toolkits");
                for (size_t i = n; i-- > 0;) {
                        struct compat_version v = compat_version_from_cuda(rows[i].cuda);
                        char vb[16];
                        enum compat_mode m =
                                compat_classify(rows[i].cuda, t->cuda_version, t->driver_version, datacenter);
                        json_array_append_new(a, json_pack("{s:s, s:s, s:s}", "cuda",
                                                           compat_version_format(&v, vb, sizeof vb), "min_driver",
                                                           rows[i].min_driver, "mode", compat_mode_name(m)));
                }
                return json_print(stdout, o) < 0 ? EXIT_RUNTIME : EXIT_OK;
        }
        printf("driver:          %s\n", t->driver_version[0] ? t->driver_version : "unknown");
        printf("CUDA (driver):   %s (the newest CUDA toolkit it runs natively)\n", cuda);
        printf("GPUs:            %u × %s (brand %s; %s)\n", t->n_gpus, model[0] ? model : "unknown",
               brand[0] ? brand : "unknown",
               datacenter ? "data-center: forward compatibility possible" : "forward compatibility not supported");
        int major = t->cuda_version / 1000;
        const char *mvc = compat_minor_compat_driver(major);
        if (mvc)
                printf("minor-version:   CUDA %d.x toolkits run on drivers ≥ %s (PTX JIT of newer code excepted)\n",
                       major, mvc);
        printf("\n%-14s %-15s %s\n", "CUDA toolkit", "minimum driver", "on this node");
        for (size_t i = n; i-- > 0;) {
                struct compat_version v = compat_version_from_cuda(rows[i].cuda);
                char vb[16];
                enum compat_mode m = compat_classify(rows[i].cuda, t->cuda_version, t->driver_version, datacenter);
                printf("%-14s %-15s %s\n", compat_version_format(&v, vb, sizeof vb), rows[i].min_driver,
                       compat_mode_name(m));
        }
        return EXIT_OK;
}
