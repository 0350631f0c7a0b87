/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/cluster — the annotations that carry the cluster's GPU picture through the API server: the
 * node annotation the agent publishes (written here: per GPU index, UUID, model, memory, health,
 * and the pair links) and the pod assignment annotation's names. The one reader of both, and the
 * one cluster model built from nodes and pods, are the scheduler extender's (src/sched/codec.h,
 * src/sched/model.h), which `gpuslice inspect` uses too. Pure: no I/O, no logging.
 *
 * Node annotation  gpuslice.io/gpus  (compact JSON, version 1; docs/cluster.md):
 *   {"v":1,"driver":"535.104.05","cuda":12020,"nvswitch":false,
 *    "gpus":[{"i":0,"uuid":"GPU-…","model":"NVIDIA A100-SXM4-80GB","mem":81920,"cc":"8.0","health":"ok"}],
 *    "links":"NV12/PIX,NV12/SYS,SYS;NV12/PIX,SYS;SYS"}
 *   mem in MiB; health "ok" or the reason it is not; links: for i = 0..n-2 the links from GPU i to
 *   GPUs i+1..n-1 (topo link names: NV<k>, PIX, PXB, PHB, NODE, SYS, ?; an NVLink pair also
 *   carries its PCIe level: NV12/PIX), rows split by ';'.
 *   At most KUBE_GPUS_MAX GPUs, KUBE_ANNOTATION_MAX bytes.
 *
 * Pod assignment annotation  gpuslice.io/assignment  (compact JSON, version 1), written by the
 * scheduler extender at bind (or by whoever decides the GPU), read by the agent at Allocate and by
 * inspect:
 *   {"v":1,"node":"gpu-a","time":1700000000123,
 *    "containers":[{"name":"main","gpus":[2],"core":30,"mem":4096}]}
 *   gpus: GPU indices on that node; core: percent of each GPU (100 for whole GPUs); mem: MiB on
 *   each GPU (0 = whole GPU's memory for whole GPUs, no memory limit for core-only shares).
 *   gpuslice.io/assigned = "false" until the agent has honoured it at Allocate, then "true".
 * Also read (by src/sched/codec.c): ALIYUN_COM_GPU_MEM_IDX (GPU index) + ALIYUN_COM_GPU_MEM_POD
 * (GiB, the pod's total), tencent.com/predicate-gpu-idx-<position in spec.containers> ("0" or
 * "0,1") + tencent.com/gpu-assigned.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "topo/topo.h"

#define KUBE_GPUS_MAX 64
#define KUBE_ANNOTATION_MAX (64u << 10)
#define KUBE_ANN_GPUS "gpuslice.io/gpus"
#define KUBE_ANN_ASSIGNMENT "gpuslice.io/assignment"
#define KUBE_ANN_ASSIGNED "gpuslice.io/assigned"
#define KUBE_CONTAINERS_MAX 16 /* GPU containers kept per pod (more are ignored) */

/* The annotation for a node: t's GPUs, healthy[i]/reason[i] per GPU of t (reason may be NULL).
 * *ret malloc'ed compact JSON. 0, -E2BIG (too many GPUs or too long), -ENOMEM. Read back by
 * sched_node_annotation_decode (src/sched/codec.h). */
int kube_node_gpus_format(const struct topo *t, const bool *healthy, const char *const *reason, char **ret);
