/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuslice hook — the command line of the OCI hook (prestart / createRuntime / createContainer; the
 * container state on stdin, the bundle's config.json) in two modes:
 *
 *   gpuslice hook [STAGE] [OPTIONS]   legacy images: NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES,
 *       NVIDIA_REQUIRE_* checked against the node; an allowed container gets its device nodes, the
 *       driver's libraries, binaries and IPC sockets and the library links inside its root.
 *   gpuslice hook cdi-links [--link TARGET::LINK]... [--ldconfig DIR]...   the createContainer hook a
 *       CDI spec from `gpuslice cdi generate` names: soname and libcuda.so links, the ld cache.
 *
 * A thin wrapper: the checks, the plan and the injection (mount namespaces, openat2(RESOLVE_IN_ROOT),
 * ldconfig) are src/cdi's (cdi.h, "the OCI hook"), which fail closed. This file parses flags, reads
 * the node for the library and turns a refusal into one line on stderr and exit 1. It must never
 * decide or touch a container's root itself.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

#include "cdi/cdi.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "util/util.h"

static int refused(const struct gs_error *err) {
        fprintf(stderr, "gpuslice hook: container refused: %s\n", err->message);
        return EXIT_RUNTIME;
}

static void help(FILE *f) {
        fputs("Usage: gpuslice hook [STAGE] [OPTIONS]             (OCI state on stdin)\n"
              "       gpuslice hook cdi-links [--link TARGET::LINK]... [--ldconfig DIR]...\n\n"
              "An OCI hook. The first form does for legacy CUDA images what NVIDIA's runtime hook does:\n"
              "reads NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES, NVIDIA_REQUIRE_*,\n"
              "NVIDIA_DISABLE_REQUIRE and CUDA_VERSION from the container's config.json, refuses a container\n"
              "the node's driver cannot run (one line: what failed, what the node has, what would do), and\n"
              "injects device nodes and the driver's libraries into its root filesystem. The second form is\n"
              "the createContainer hook of `gpuslice cdi generate` specs.\n\n"
              "Options:\n"
              "      --dev-root DIR         where /dev/nvidia* are (default /)\n"
              "      --driver-root DIR      root of the driver installation (default /)\n" NODE_SOURCE_HELP
              "  -h, --help                 this help\n",
              f);
}

/* ---- legacy ---- */

/* The node, for the library (asked only for a GPU container); node_load prints why it failed. */
static int load_node(void *userdata, struct topo *ret, struct gs_error *err) {
        return node_load(userdata, ret) == EXIT_OK ? 0 : gs_error_set(err, -EIO, "see above");
}

static int hook_legacy(int argc, char **argv) {
        enum {
                OPT_NVML = 0x100,
                OPT_DEV,
                OPT_DRV
        };
        static const struct option opts[] = {
                { "dev-root", required_argument, NULL, OPT_DEV },
                { "driver-root", required_argument, NULL, OPT_DRV },
                { "topology", required_argument, NULL, 't' },
                { "nvml-library", required_argument, NULL, OPT_NVML },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        struct node_source src = { 0 };
        struct cdi_hook_legacy in = { .roots = { "/", "/" }, .load_node = load_node, .userdata = &src };
        int c;
        optind = 0;
        while ((c = getopt_long(argc, argv, "t:h", opts, NULL)) >= 0) {
                switch (c) {
                        case OPT_DEV: in.roots.dev_root = optarg; break;
                        case OPT_DRV: in.roots.driver_root = optarg; break;
                        case 't': src.topology = optarg; break;
                        case OPT_NVML: src.nvml_library = optarg; break;
                        case 'h': help(stdout); return EXIT_OK;
                        default: help(stderr); return EXIT_USAGE;
                }
        }
        const char *stage = optind < argc ? argv[optind] : "prestart";
        if (cdi_hook_stage(stage, &in.stage) < 0) {
                fprintf(stderr, "gpuslice hook: unknown stage '%s'\n", stage);
                return EXIT_USAGE;
        }
        if (in.stage == CDI_HOOK_STAGE_NOTHING)
                return EXIT_OK; /* only the stages before the container runs do anything */
        struct cdi_oci oci = { 0 };
        struct cdi_discovery d = { 0 };
        struct cdi_hook_plan p = { 0 };
        struct gs_error err = { 0 };
        in.oci = &oci;
        int r = cdi_hook_read_oci(STDIN_FILENO, &oci, &err);
        if (r >= 0)
                r = cdi_hook_plan_legacy(&in, &d, &p, &err);
        if (r == 0)
                r = cdi_hook_apply(&p, &err);
        cdi_hook_plan_done(&p);
        cdi_discovery_done(&d);
        cdi_oci_done(&oci);
        return r < 0 ? refused(&err) : EXIT_OK;
}

int cmd_hook(int argc, char **argv) {
        if (argc >= 2 && streq(argv[1], "cdi-links"))
                return hook_cdi_links(argc - 1, argv + 1);
        return hook_legacy(argc, argv);
}
