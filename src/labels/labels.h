/* SPDX-License-Identifier: Apache-2.0 */
/*
 * labels — node labels describing a node's GPUs, as a Node Feature Discovery features file
 * (one `name=value` per line, read by NFD from /etc/kubernetes/node-feature-discovery/features.d/).
 * Names follow the field's conventions so existing node affinities keep working:
 *   nvidia-gpu-name=TITAN-V                       (the Kubernetes docs' GPU model label)
 *   nvidia.com/gpu.product=TITAN-V  nvidia.com/gpu.memory=12066 (MiB)  nvidia.com/gpu.count=8
 *   nvidia.com/gpu.family=volta  nvidia.com/gpu.compute.major=7  nvidia.com/gpu.compute.minor=0
 *   nvidia.com/cuda.driver-version.{major,minor,revision,full}=450 57 … 450.57   (the driver)
 *   nvidia.com/cuda.runtime-version.{major,minor,full}=11 0 11.0   (the newest CUDA the driver runs)
 * GPU fields come from the first GPU NVML could query (GPU feature discovery does the same);
 * unknown facts are left out, never guessed. Values are made valid label values ([A-Za-z0-9._-],
 * at most 63 characters, alphanumeric at both ends).
 *
 * Pure formatting plus an atomic file write; must never log or leave a torn file behind.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "mig/mig.h"
#include "topo/topo.h"

/* The features file text for node t. *ret malloc'ed, caller frees. 0, -ENODEV when t has no
 * GPU that could be queried, -ENOMEM. */
int labels_format(const struct topo *t, char **ret, size_t *ret_len);

/*
 * The MIG labels as GPU Feature Discovery names them, in the same text form: nvidia.com/mig.capable
 * (true when a GPU has MIG), nvidia.com/mig.strategy=STRATEGY (NULL: none, not labelled), and per profile
 * of the MIG devices present nvidia.com/mig-<profile>.{count,product,replicas,memory (MiB),multiprocessors,
 * slices.gi,slices.ci,engines.copy,engines.decoder,engines.encoder,engines.jpeg,engines.ofa} ('+' of a
 * profile becomes '.'). With single_profile (the `single` strategy on a node that fits it) the GPU labels
 * describe the MIG devices: nvidia.com/gpu.product=<product>-MIG-<profile>, gpu.count (MIG devices),
 * gpu.memory, gpu.multiprocessors, gpu.slices.{gi,ci}, gpu.engines.*; single_profile "" (a node that does
 * not fit `single`) gives GFD's INVALID set: product <product>-MIG-INVALID, count 0, memory 0. They follow
 * labels_format's lines and replace them. m may be NULL (no MIG side read): only mig.strategy. 0 or -ENOMEM.
 */
int labels_format_mig(const struct topo *t, const struct mig_node *m, const char *strategy, const char *single_profile,
                      char **ret, size_t *ret_len);

/*
 * GFD's sharing labels (NVIDIA's device plugin config, sharing.timeSlicing / sharing.mps): nvidia.com/gpu.replicas=N,
 * nvidia.com/gpu.sharing-strategy=STRATEGY ("time-slicing", "mps"), and with `suffix` (the replicas keep the
 * GPU's resource name) nvidia.com/gpu.product=<product>-SHARED, replacing labels_format's product line.
 * 0, -ENODEV (no GPU with a name) or -ENOMEM.
 */
int labels_format_sharing(const struct topo *t, const char *strategy, unsigned replicas, bool suffix, char **ret,
                          size_t *ret_len);

/* A label value from free text: invalid characters become '-', cut to 63, trimmed to start and
 * end with an alphanumeric. buf of at least 64 bytes. Returns buf ("" if nothing is left). */
char *labels_sanitize(const char *s, char *buf, size_t len);

/* "volta" for compute capability 7.0, … ; NULL when unknown. */
const char *labels_gpu_family(int cc_major, int cc_minor);

/* Write data to path atomically: a temporary file beside it, fsync, rename, fsync of the
 * directory. 0 or -errno (the old file is then untouched). */
int labels_write_atomic(const char *path, const char *data, size_t len);
