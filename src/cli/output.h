/* SPDX-License-Identifier: Apache-2.0 */
/*
 * output — where the CLI gets a node (a topology file or NVML) and how it shows it: the
 * `nvidia-smi topo -m` style matrix (which topo_parse reads back), the tree, the GPU table and
 * their JSON forms. Printing only; decisions live in src/topo and src/alloc.
 */
#pragma once

#include <jansson.h>
#include <stdio.h>

#include "mig/mig.h"
#include "topo/topo.h"

struct node_source {
        const char *topology;     /* --topology FILE ("-" = stdin), NULL = ask NVML */
        const char *nvml_library; /* --nvml-library PATH, NULL = libnvidia-ml.so.1 */
};

struct nvml;
/* Open NVML (library NULL = libnvidia-ml.so.1) for a CLI command. On failure prints NVML's own
 * text (dlerror, init error) with a hint and returns EXIT_RUNTIME; EXIT_OK with *ret otherwise. */
int cli_nvml_open(const char *cmd, const char *library, struct nvml **ret);

/* Fill *ret from the source. Prints a clear error and returns a CLI exit code on failure. */
int node_load(const struct node_source *src, struct topo *ret);
/* node_load into a malloc'd topo (*ret, the caller frees it): EXIT_OK, EXIT_RUNTIME or node_load's code. */
int node_load_new(const struct node_source *src, struct topo **ret);
/* node_load_new and the node's MIG side (from NVML; from a file: the modes only). Both malloc'd. */
int node_load_new_mig(const struct node_source *src, struct topo **ret, struct mig_node **ret_mig);
/* After a command's getopt loop: EXIT_OK when no argument is left, else "gpuslice CMD: unexpected
 * argument 'X'" on stderr and EXIT_USAGE. */
int cli_no_more_args(const char *cmd, int argc, char *const *argv);

void print_matrix(FILE *f, const struct topo *t);
void print_tree(FILE *f, const struct topo *t);
void print_gpus(FILE *f, const struct topo *t);
/* MIG mode per GPU, GPU instances, MIG devices (nothing for a node without MIG). */
void print_mig(FILE *f, const struct mig_node *m);
json_t *json_mig(const struct mig_node *m);

json_t *json_topo(const struct topo *t);
json_t *json_link(struct topo_link l);
/* Print compact-but-indented JSON and a newline; returns 0 or -EIO. Steals the reference. */
int json_print(FILE *f, json_t *j);
/* The same layout for a document already written as compact JSON text (valid: the cluster JSON's writer). */
int json_print_text(FILE *f, const char *text, size_t len);

/* Common option text for commands that read a node. */
#define NODE_SOURCE_HELP                                                                     \
        "  -t, --topology FILE     read the node from `nvidia-smi topo -m` text or a node\n" \
        "                          description (docs/node-description.md); - for stdin\n"    \
        "      --nvml-library PATH load NVML from PATH instead of libnvidia-ml.so.1\n"
