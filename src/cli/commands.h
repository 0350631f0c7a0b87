/* SPDX-License-Identifier: Apache-2.0 */
/*
 * commands — the gpuslice subcommands. Each takes argc/argv starting at its own name and
 * returns the process exit code (see docs/cli.md):
 */
#pragma once

enum {
        EXIT_OK = 0,
        EXIT_RUNTIME = 1, /* the node or a file could not be read, a peer failed */
        EXIT_USAGE = 2,   /* bad command line */
        EXIT_DATA = 3,    /* malformed input data (topology, config) */
        EXIT_UNSAT = 4,   /* the request cannot be satisfied (not enough free GPUs, floor) */
};

int cmd_topo(int argc, char **argv);
int cmd_alloc(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_monitor(int argc, char **argv);   /* src/cli/cmd-monitor.c */
int cmd_ps(int argc, char **argv);        /* src/cli/cmd-ps.c */
int cmd_labels(int argc, char **argv);    /* src/cli/cmd-labels.c */
int cmd_node(int argc, char **argv);      /* src/cli/cmd-node.c */
int cmd_status(int argc, char **argv);    /* src/cli/cmd-status.c */
int cmd_run(int argc, char **argv);       /* src/cli/cmd-run.c */
int cmd_cdi(int argc, char **argv);       /* src/cli/cmd-cdi.c */
int cmd_hook(int argc, char **argv);      /* src/cli/cmd-hook.c */
int cmd_check(int argc, char **argv);     /* src/cli/cmd-check.c */
int cmd_inspect(int argc, char **argv);   /* src/cli/cmd-inspect.c */
int cmd_scheduler(int argc, char **argv); /* src/cli/cmd-scheduler.c */
int cmd_mig(int argc, char **argv);       /* src/cli/cmd-mig.c */
int cmd_sim(int argc, char **argv);       /* src/cli/cmd-sim.c */
int cmd_replay(int argc, char **argv);    /* src/cli/cmd-replay.c */
/* `hook cdi-links` (src/cli/hook-links.c): argv starts at "cdi-links". Also gpuslice-cdi-hook's whole work. */
int hook_cdi_links(int argc, char **argv);
