/* SPDX-License-Identifier: Apache-2.0 */
/* cmd-version — `gpuslice version` (also `--version`, `gpuslice node --version`): a file of its own, so that
 * main.c's table and the commands that print the version do not use each other. */
#include <stdio.h>

#include "cli/commands.h"

int cmd_version(int argc, char **argv) {
        (void)argc;
        (void)argv;
        printf("gpuslice %s\n", GPUSLICE_VERSION);
        return EXIT_OK;
}
