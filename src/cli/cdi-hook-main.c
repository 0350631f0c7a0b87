/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuslice-cdi-hook — the CDI specs' createContainer hook alone, statically linked (no build without the
 * sanitizers links it dynamically): the binary the DaemonSet's init container installs on the host as
 * /usr/local/lib/gpuslice/gpuslice-cdi-hook, which runc on the host runs whatever libraries the host has. It
 * takes the spec's arguments as the gpuslice executable does (`hook cdi-links …`, argv[0] whatever it is) and
 * does nothing else: the work is hook-links.c's.
 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

int main(int argc, char **argv) {
        if (argc >= 3 && strcmp(argv[1], "hook") == 0 && strcmp(argv[2], "cdi-links") == 0)
                return hook_cdi_links(argc - 2, argv + 2);
        if (argc >= 2 && strcmp(argv[1], "cdi-links") == 0)
                return hook_cdi_links(argc - 1, argv + 1);
        fputs("Usage: gpuslice-cdi-hook hook cdi-links [--link TARGET::LINK]... [--ldconfig DIR]...\n"
              "(the createContainer hook of gpuslice's CDI specs; the OCI state on stdin)\n",
              stderr);
        return EXIT_USAGE;
}
