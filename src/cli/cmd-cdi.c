/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice cdi generate — the node's CDI spec (devices, driver libraries, binaries, IPC sockets,
 * the createContainer hook), written atomically where container engines read it. */
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>

#include "cdi/cdi.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "util/util.h"

static void help(FILE *f) {
        fputs("Usage: gpuslice cdi generate [OPTIONS]\n\n"
              "Write a Container Device Interface spec for the node's GPUs: one device per GPU by index\n"
              "and by UUID plus `all` (and `<id>-shared` devices with --interposer), one per MIG device by\n"
              "`<GPU index>:<MIG index>` and by MIG UUID (the GPU's node and the MIG device's two capability\n"
              "nodes under /dev/nvidia-caps, their minors from --mig-minors), device nodes, the\n"
              "driver's libraries found through the ld cache, its binaries and IPC sockets, and a\n"
              "createContainer hook (`gpuslice hook cdi-links`) for the library links.\n\n"
              "Options:\n"
              "  -o, --output FILE          where to write (atomically); - for stdout\n"
              "                             (default /var/run/cdi/<vendor>-<class>.yaml or .json)\n"
              "      --format yaml|json     (default yaml, or json when FILE ends in .json)\n"
              "      --kind VENDOR/CLASS    device kind (default nvidia.com/gpu)\n"
              "      --dev-root DIR         where to look for /dev/nvidia* (default /)\n"
              "      --host-dev-root DIR    how the host sees that directory, for hostPath (default: --dev-root)\n"
              "      --driver-root DIR      root of the driver installation (its etc/ld.so.cache) (default /)\n"
              "      --host-driver-root DIR how the host sees it, for mount hostPath (default: --driver-root)\n"
              "      --capabilities LIST    utility,compute,video,graphics or all (default all)\n"
              "      --hook-path PATH       gpuslice binary the hook runs (default: this binary)\n"
              "      --interposer PATH      host path of libgpuslice-cuda.so: adds <id>-shared "
              "devices\n"
              "      --mig-minors FILE      the driver's MIG capability minors (default "
              "/proc/driver/nvidia-caps/mig-minors)\n" NODE_SOURCE_HELP "  -h, --help                 this help\n",
              f);
}

/* lint: long — a command's main: the getopt switch (one case per flag, each checking its value and naming the flag
 * in its message), then the command's steps in order; its size is its flags'. */
int cmd_cdi(int argc, char **argv) {
        enum {
                OPT_NVML = 0x100,
                OPT_FORMAT,
                OPT_KIND,
                OPT_DEV,
                OPT_HOST_DEV,
                OPT_DRV,
                OPT_HOST_DRV,
                OPT_CAPS,
                OPT_HOOK,
                OPT_INTERPOSER,
                OPT_MIG_MINORS,
        };
        static const struct option opts[] = {
                { "output", required_argument, NULL, 'o' },
                { "format", required_argument, NULL, OPT_FORMAT },
                { "kind", required_argument, NULL, OPT_KIND },
                { "dev-root", required_argument, NULL, OPT_DEV },
                { "host-dev-root", required_argument, NULL, OPT_HOST_DEV },
                { "driver-root", required_argument, NULL, OPT_DRV },
                { "host-driver-root", required_argument, NULL, OPT_HOST_DRV },
                { "capabilities", required_argument, NULL, OPT_CAPS },
                { "hook-path", required_argument, NULL, OPT_HOOK },
                { "interposer", required_argument, NULL, OPT_INTERPOSER },
                { "mig-minors", required_argument, NULL, OPT_MIG_MINORS },
                { "topology", required_argument, NULL, 't' },
                { "nvml-library", required_argument, NULL, OPT_NVML },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        if (argc < 2 || streq(argv[1], "--help") || streq(argv[1], "-h")) {
                help(argc < 2 ? stderr : stdout);
                return argc < 2 ? EXIT_USAGE : EXIT_OK;
        }
        if (!streq(argv[1], "generate")) {
                fprintf(stderr, "gpuslice cdi: unknown subcommand '%s' (known: generate)\n", argv[1]);
                return EXIT_USAGE;
        }
        argc--;
        argv++;
        struct node_source src = { 0 };
        struct cdi_generate g = { .spec.kind = "nvidia.com/gpu" };
        const char *output = NULL, *format = NULL;
        char self[PATH_MAX];
        int c;
        optind = 0;
        while ((c = getopt_long(argc, argv, "o:t:h", opts, NULL)) >= 0) {
                switch (c) {
                        case 'o': output = optarg; break;
                        case OPT_FORMAT: format = optarg; break;
                        case OPT_KIND: g.spec.kind = optarg; break;
                        case OPT_DEV: g.roots.dev_root = optarg; break;
                        case OPT_HOST_DEV: g.spec.host_dev_root = optarg; break;
                        case OPT_DRV: g.roots.driver_root = optarg; break;
                        case OPT_HOST_DRV: g.spec.host_driver_root = optarg; break;
                        case OPT_HOOK: g.spec.hook_path = optarg; break;
                        case OPT_INTERPOSER: g.spec.interposer = optarg; break;
                        case OPT_MIG_MINORS: g.mig_minors = optarg; break;
                        case OPT_CAPS: {
                                const char *bad = NULL;
                                if (cdi_caps_parse(optarg, &g.caps, &bad) < 0 || g.caps == 0) {
                                        fprintf(stderr,
                                                "gpuslice cdi generate: --capabilities: unknown '%s' (utility, "
                                                "compute, video, graphics, all)\n",
                                                bad ? bad : optarg);
                                        return EXIT_USAGE;
                                }
                                break;
                        }
                        case 't': src.topology = optarg; break;
                        case OPT_NVML: src.nvml_library = optarg; break;
                        case 'h': help(stdout); return EXIT_OK;
                        default: help(stderr); return EXIT_USAGE;
                }
        }
        if (cli_no_more_args("cdi generate", argc, argv) != EXIT_OK)
                return EXIT_USAGE;
        if (!cdi_kind_valid(g.spec.kind)) {
                fprintf(stderr, "gpuslice cdi generate: --kind must be VENDOR/CLASS (e.g. nvidia.com/gpu), got '%s'\n",
                        g.spec.kind);
                return EXIT_USAGE;
        }
        if (format && !streq(format, "yaml") && !streq(format, "json")) {
                fprintf(stderr, "gpuslice cdi generate: --format must be yaml or json\n");
                return EXIT_USAGE;
        }
        size_t ol = output ? strlen(output) : 0;
        g.json = format ? streq(format, "json") : ol > 5 && streq(output + ol - 5, ".json");
        if (!g.spec.hook_path) {
                if (!realpath("/proc/self/exe", self)) {
                        fprintf(stderr,
                                "gpuslice cdi generate: cannot find this binary for the hook (--hook-path): %m\n");
                        return EXIT_RUNTIME;
                }
                g.spec.hook_path = self;
        }
        char def[512];
        if (!output) {
                char name[400];
                if (cdi_spec_file_name(g.spec.kind, g.json ? "json" : "yaml", name, sizeof name) < 0)
                        return EXIT_USAGE;
                snprintf(def, sizeof def, "/var/run/cdi/%s", name);
                output = def;
        }

        _cleanup_(freep) struct topo *t = NULL;
        _cleanup_(freep) struct mig_node *mig = NULL;
        int r = node_load_new_mig(&src, &t, &mig);
        if (r != EXIT_OK)
                return r;
        g.mig = mig;
        struct gs_error err = { 0 };
        if (streq(output, "-")) {
                _cleanup_(freep) char *text = NULL;
                r = cdi_generate_text(t, &g, &text, &err);
                if (r >= 0)
                        fputs(text, stdout);
        } else
                r = cdi_generate_file(t, &g, output, &err);
        if (r < 0) {
                fprintf(stderr, "gpuslice cdi generate: %s\n", err.message);
                return r == -EBADMSG ? EXIT_DATA : EXIT_RUNTIME;
        }
        return EXIT_OK;
}
