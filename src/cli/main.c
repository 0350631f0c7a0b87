/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuslice — the command-line entry point: a table of subcommands, each a thin client of the
 * library parts. Exit codes are documented in commands.h and docs/cli.md.
 */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "util/log.h"
#include "util/util.h"

struct command {
        const char *name;
        int (*run)(int argc, char **argv);
        const char *summary;
};

static const struct command commands[] = {
        { "topo", cmd_topo, "show the node: link matrix, tree, GPU table" },
        { "alloc", cmd_alloc, "pick the best-connected free GPUs for a job" },
        { "node", cmd_node, "run the kubelet device plugin node agent" },
        { "status", cmd_status, "show a running node agent's devices, health and holders" },
        { "ps", cmd_ps, "list GPU processes with their pod and container" },
        { "monitor", cmd_monitor, "serve GPU usage metrics (/metrics, /healthz) in the foreground" },
        { "labels", cmd_labels, "write GPU node labels (Node Feature Discovery features file)" },
        { "inspect", cmd_inspect, "show the cluster's GPUs: allocation, holders, health, pods" },
        { "run", cmd_run, "run a command limited to a GPU fraction (memory, compute share)" },
        { "cdi", cmd_cdi, "generate the node's CDI spec (devices, driver libraries, hook)" },
        { "mig", cmd_mig, "MIG layouts: status, plan, apply (crash-safe), recover" },
        { "hook", cmd_hook, "OCI hook: CUDA requirement check and driver injection" },
        { "check", cmd_check, "which CUDA versions this node's driver runs, and how" },
        { "scheduler", cmd_scheduler, "run the kube-scheduler extender (filter, prioritize, bind by GPU)" },
        { "sim", cmd_sim, "record this node as a simulator node description (sim record)" },
        { "replay", cmd_replay, "replay a cluster trace through the extender's decisions (what-if packing)" },
        { "version", cmd_version, "print the version" },
};

static void usage(FILE *f) {
        fputs("Usage: gpuslice COMMAND [OPTIONS]\n\n"
              "GPU manager for Kubernetes nodes and container hosts.\n\nCommands:\n",
              f);
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
        fputs("\nRun 'gpuslice COMMAND --help' for a command's options. Documentation: docs/cli.md\n", f);
}

int main(int argc, char **argv) {
        /* installed as kubectl-gpuslice too: `kubectl gpuslice inspect` runs `gpuslice inspect` */
        const char *self = argc > 0 && argv[0] ? strrchr(argv[0], '/') : NULL;
        if (argc > 0 && argv[0] && streq(self ? self + 1 : argv[0], "kubectl-gpuslice") && argc < 2)
                return cmd_inspect(argc, argv);
        if (argc < 2) {
                usage(stderr);
                return EXIT_USAGE;
        }
        if (streq(argv[1], "--help") || streq(argv[1], "-h") || streq(argv[1], "help")) {
                usage(stdout);
                return EXIT_OK;
        }
        if (streq(argv[1], "--version"))
                return cmd_version(argc - 1, argv + 1);
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (streq(argv[1], commands[i].name))
                        return commands[i].run(argc - 1, argv + 1);
        fprintf(stderr, "gpuslice: unknown command '%s'\n\n", argv[1]);
        usage(stderr);
        return EXIT_USAGE;
}
