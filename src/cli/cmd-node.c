/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd-node — `gpuslice node`: parse the flags (each also a config file key), print help or the
 * version, and run the node agent (agent_run, src/agent) until SIGTERM.
 * Must never: start a thread before agent_run (it blocks the signals the agent's loop takes).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent/agent.h"
#include "cli/commands.h"
#include "config/config.h"
#include "util/util.h"

static void usage(void) {
        size_t k = 0;
        const struct config_option *opts = config_options(&k);
        printf("Usage: gpuslice node [--config FILE] [OPTIONS]\n\n"
               "Run the kubelet device plugin node agent. Options (each also a config file key):\n");
        /* "--flag METAVAR" padded to one column; the width is the metavar's field, after "--flag " */
        for (size_t i = 0; i < k; i++)
                printf("  --%s%s%-*s %s\n", opts[i].flag, opts[i].metavar ? " " : "",
                       (int)MAX(0, 30 - (int)strlen(opts[i].flag) - (opts[i].metavar ? 1 : 0)),
                       opts[i].metavar ? opts[i].metavar : "", opts[i].help);
        printf("  %-32s %s\n  %-32s %s\n  %-32s %s\n", "-c, --config FILE",
               "config file (default /etc/gpuslice/node.conf, if it exists)", "-h, --help", "this help", "--version",
               "print the version");
        printf("\nSignals: SIGTERM/SIGINT stop (sockets removed, exit 0), SIGHUP reloads the config.\n"
               "Documentation: docs/node-agent.md\n");
}

int cmd_node(int argc, char **argv) {
        struct agent_options o = { 0 };
        struct gs_error err;
        int r = config_args_parse(argc, argv, 1, &o.args, &err);
        if (r < 0) {
                fprintf(stderr, "gpuslice node: %s\n", err.message);
                return EXIT_USAGE;
        }
        if (o.args.help) {
                usage();
                config_args_done(&o.args);
                return EXIT_OK;
        }
        if (o.args.version) {
                config_args_done(&o.args);
                return cmd_version(0, NULL);
        }
        r = agent_run(&o);
        config_args_done(&o.args);
        if (r == -EINVAL)
                return EXIT_DATA;
        return r < 0 ? EXIT_RUNTIME : EXIT_OK;
}
