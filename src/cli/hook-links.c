/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hook-links — `gpuslice hook cdi-links [--link TARGET::LINK]... [--ldconfig DIR]...`, the createContainer hook of
 * the CDI specs gpuslice writes (the driver libraries' soname links and the container's ld cache), shared by the
 * gpuslice executable and the statically linked gpuslice-cdi-hook that the DaemonSet installs on the host (the
 * runtime there runs it; the host need not have gpuslice's libraries). The work is src/cdi's (cdi_hook_*): this
 * file parses the flags and turns a refusal into one line and exit 1. It must never touch a root itself.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cdi/cdi.h"
#include "cli/commands.h"
#include "util/util.h"

static int links_refused(const struct gs_error *err) {
        fprintf(stderr, "gpuslice hook: container refused: %s\n", err->message);
        return EXIT_RUNTIME;
}

static void links_help(FILE *f) {
        fputs("Usage: gpuslice hook cdi-links [--link TARGET::LINK]... [--ldconfig DIR]...   (OCI state on stdin)\n\n"
              "The createContainer hook of gpuslice's CDI specs: makes the library links inside the container's\n"
              "root and refreshes its ld cache.\n",
              f);
}

int hook_cdi_links(int argc, char **argv) {
        static const struct option opts[] = {
                { "link", required_argument, NULL, 'l' },
                { "ldconfig", required_argument, NULL, 'L' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        struct cdi_hook_plan p = { 0 };
        int c, r = EXIT_OK;
        optind = 0;
        while (r == EXIT_OK && (c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
                char *sep = c == 'l' ? strstr(optarg, "::") : NULL;
                switch (c) {
                        case 'l':
                                if (!sep || sep == optarg ||
                                    cdi_hook_plan_link(&p, (*sep = '\0', optarg), sep + 2) < 0) {
                                        fprintf(stderr,
                                                "gpuslice hook cdi-links: --link wants TARGET::/ABSOLUTE/LINK\n");
                                        r = EXIT_USAGE;
                                }
                                break;
                        case 'L':
                                if (cdi_hook_plan_ldconfig(&p, optarg) < 0) {
                                        fprintf(stderr,
                                                "gpuslice hook cdi-links: --ldconfig wants an absolute directory "
                                                "(at most %d)\n",
                                                CDI_HOOK_LDCONFIG_MAX);
                                        r = EXIT_USAGE;
                                }
                                break;
                        case 'h':
                                links_help(stdout);
                                cdi_hook_plan_done(&p);
                                return EXIT_OK;
                        default:
                                links_help(stderr);
                                r = EXIT_USAGE;
                                break;
                }
        }
        struct cdi_oci oci = { 0 };
        struct gs_error err = { 0 };
        if (r == EXIT_OK && cdi_hook_read_oci(STDIN_FILENO, &oci, &err) < 0)
                r = links_refused(&err);
        if (r == EXIT_OK) {
                /* createContainer: already in the container's mount namespace */
                strscpy(p.rootfs, oci.rootfs, sizeof p.rootfs);
                if (cdi_hook_apply(&p, &err) < 0)
                        r = links_refused(&err);
        }
        cdi_oci_done(&oci);
        cdi_hook_plan_done(&p);
        return r;
}
