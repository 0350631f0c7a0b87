/* SPDX-License-Identifier: Apache-2.0 */
/*
 * topo — the one topology model of gpuslice.
 *
 * A node is a set of GPUs (with what we know of each) and, for every pair, the link between
 * them: the PCIe level of their common ancestor and the number of bonded NVLinks. The same
 * model is built from NVML (src/nvml) or parsed from the text of `nvidia-smi topo -m`
 * (optionally enriched with gpuslice node-description directives, see docs/node-description.md).
 *
 * Pure code: no I/O, no global state, no logging. Callers own every struct topo they pass in.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define TOPO_MAX_GPUS 64
#define TOPO_MAX_NICS 16

/* PCIe path between two devices, far (worst) to near (best). Numeric order is meaningful. */
enum topo_level {
        TOPO_LEVEL_UNKNOWN = 0,
        TOPO_LEVEL_SYS = 1,  /* crosses the SMP interconnect between NUMA nodes (old name: SOC) */
        TOPO_LEVEL_NODE = 2, /* crosses host bridges within one NUMA node */
        TOPO_LEVEL_PHB = 3,  /* crosses a PCIe host bridge (the CPU) */
        TOPO_LEVEL_PXB = 4,  /* crosses several PCIe bridges, not the host bridge */
        TOPO_LEVEL_PIX = 5,  /* at most one PCIe bridge (same switch) */
        TOPO_LEVEL_SELF = 6, /* the diagonal */
};

struct topo_link {
        uint8_t pcie;    /* enum topo_level */
        uint8_t nvlinks; /* bonded NVLinks between the pair (through NVSwitch counts too), 0 = none */
};

enum topo_gpu_state {
        TOPO_GPU_OK = 0,
        TOPO_GPU_NO_PERMISSION, /* NVML counts it but will not let us query it */
        TOPO_GPU_LOST,          /* fallen off the bus (GPU_IS_LOST / Xid 79) */
        TOPO_GPU_ERROR,         /* any other query failure; see state_text */
};

struct topo_gpu {
        int index; /* NVML index / GPUn in the matrix */
        enum topo_gpu_state state;
        char state_text[64];     /* NVML's text when state != OK */
        char uuid[96];           /* "" when unknown */
        char name[96];           /* model, "" when unknown */
        char bus_id[32];         /* "00000000:1A:00.0", "" when unknown */
        uint64_t memory_total;   /* bytes, 0 when unknown */
        uint64_t memory_used;    /* bytes */
        int minor;               /* /dev/nvidia<minor>, -1 when unknown */
        int numa_node;           /* host NUMA node, -1 when unknown (TOPO_NUMA_NONE: said so, `numa=none`) */
        char cpu_affinity[128];  /* cpulist ("0-9,20-29"), "" when unknown */
        int mig_mode;            /* 0 off, 1 on, -1 not supported / unknown */
        int cc_major, cc_minor;  /* CUDA compute capability, 0 when unknown */
        int sm_count;            /* streaming multiprocessors, 0 when unknown */
        uint64_t context_bytes;  /* what one CUDA context takes on it (`context=`, else the node's `cuda
                                  * context=`; the simulated driver charges it), 0 when unknown */
        unsigned power_limit_mw; /* 0 when unknown */
        char brand[24];          /* NVML brand as requirement terms name it ("tesla", "geforce"), "" unknown */
        uint32_t pci_device_id;  /* PCI device id << 16 | vendor id (0x20B010DE), 0 when unknown */
};

struct topo_nic {
        char name[32];                /* "mlx4_0" */
        uint8_t level[TOPO_MAX_GPUS]; /* enum topo_level from each GPU */
};

struct topo {
        unsigned n_gpus;
        struct topo_gpu gpu[TOPO_MAX_GPUS];
        struct topo_link link[TOPO_MAX_GPUS][TOPO_MAX_GPUS]; /* symmetric; diagonal is SELF */
        unsigned n_nics;
        struct topo_nic nic[TOPO_MAX_NICS];
        bool nvswitch;           /* NVLinks go through an NVSwitch fabric */
        char driver_version[80]; /* "" when unknown */
        int cuda_version;        /* 1000*major + 10*minor, 0 when unknown */
        /* What the CUDA driver takes on a GPU for one context (measured on a real node by `gpuslice sim
         * record`; the simulated driver charges it per context). 0 when unknown. */
        uint64_t cuda_context_bytes;
        /* How long the driver keeps an exited process's memory while it tears the process's contexts down
         * (`cuda teardown-ms=N`; the simulated driver lists it in NVML, memory held, that long). 0: freed at exit. */
        unsigned cuda_teardown_ms;
        unsigned unsupported; /* TOPO_UNSUPPORTED_*: NVML queries this node's driver answers NOT_SUPPORTED */
};

#define TOPO_UNSUPPORTED_PROCESS_UTIL 1u /* nvmlDeviceGetProcessUtilization */
/* numa_node between topo_parse_raw and topo_apply_defaults: the text said `numa=none` (unknown, no default) */
#define TOPO_NUMA_NONE (-2)

/* Parse and validation errors: struct gs_error (util/error.h), code -EINVAL, a message fit for a
 * person that starts with "line N: " when a line is at fault. */

/* Reset to an empty node: no GPUs, every link UNKNOWN, fields "unknown" as documented above. */
void topo_init(struct topo *t);

/*
 * Parse `nvidia-smi topo -m` text as people paste it (tabs or spaces, NIC columns, CPU/NUMA
 * affinity columns, legend lines, `X` on the diagonal, SOC for SYS) together with optional
 * node-description directives (`node`, `default`, `gpu N`, `nvswitch`; docs/node-description.md).
 * Fills unknown per-GPU fields with the documented defaults (model, memory, UUID, bus id, minor,
 * NUMA node). Returns 0, or -EINVAL with *ret_err filled (ret is then unspecified).
 * `text` need not be NUL-terminated.
 */
int topo_parse(const char *text, size_t len, struct topo *ret, struct gs_error *ret_err);

/* Same as topo_parse without applying defaults: fields the text does not give stay unknown. */
int topo_parse_raw(const char *text, size_t len, struct topo *ret, struct gs_error *ret_err);

/* Default per-GPU fields for a parsed node (documented in docs/node-description.md). */
void topo_apply_defaults(struct topo *t);

/* Link names: "X", "NV12", "PIX", "PXB", "PHB", "NODE", "SYS", "?" — buf of at least 8 bytes. */
const char *topo_link_name(struct topo_link l, char buf[static 8]);
const char *topo_level_name(enum topo_level l);
/* "SOC" is accepted for SYS, "NV#" for NVLinks. Returns 0 or -EINVAL. */
int topo_link_from_name(const char *s, size_t len, struct topo_link *ret);

/* Estimated bandwidth of a link in GB/s: NV# = 25*#, PIX 12, PXB 11, PHB 8, NODE 7, SYS 5, unknown 5. */
unsigned topo_link_bw(struct topo_link l);
/* <0, 0, >0 as a is worse than, as good as, better than b (by bandwidth, then PCIe level). */
int topo_link_cmp(struct topo_link a, struct topo_link b);

static inline struct topo_link topo_get_link(const struct topo *t, unsigned a, unsigned b) {
        return t->link[a][b];
}
/* Sets both directions. */
void topo_set_link(struct topo *t, unsigned a, unsigned b, struct topo_link l);

/* Check invariants (symmetry, diagonal, indices): 0 or -EINVAL with a message. */
int topo_validate(const struct topo *t, struct gs_error *ret_err);

/*
 * The tree view: root (the system) → NUMA node / socket groups → host bridges → PCIe switch
 * trees → PCIe switches → GPUs, built from the pair levels by single-linkage grouping. A group
 * level that would hold exactly the same GPUs as its parent is folded away.
 */
enum topo_tree_kind {
        TOPO_TREE_SYSTEM = 0,
        TOPO_TREE_NUMA,       /* GPUs closer than SYS */
        TOPO_TREE_HOSTBRIDGE, /* closer than NODE */
        TOPO_TREE_SWITCHTREE, /* closer than PHB (share a PCIe switch hierarchy) */
        TOPO_TREE_SWITCH,     /* closer than PXB (one switch) */
        TOPO_TREE_GPU,
};

struct topo_tree_node {
        enum topo_tree_kind kind;
        int parent;    /* index into nodes[], -1 for the root */
        int gpu;       /* GPU index for TOPO_TREE_GPU, else -1 */
        int numa_node; /* for TOPO_TREE_NUMA when all its GPUs agree, else -1 */
        unsigned depth;
};

struct topo_tree {
        unsigned n_nodes;
        /* at most 1 root + 4 group levels * 64 + 64 GPUs */
        struct topo_tree_node nodes[1 + 5 * TOPO_MAX_GPUS];
};

/* Nodes come out in depth-first order (a parent before its children, children by lowest GPU). */
void topo_tree_build(const struct topo *t, struct topo_tree *ret);
const char *topo_tree_kind_name(enum topo_tree_kind k);
