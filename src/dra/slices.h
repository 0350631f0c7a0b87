/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dra/slices — the ResourceSlices of one node's pool, built from the topology (pure: no I/O, no
 * logging, no global state), and the naming, version and quantity codecs the DRA driver shares.
 *
 * Devices (docs/dra.md, "What the driver publishes"):
 *   gpu-<index>          a whole GPU: attributes for CEL selectors and matchAttribute (type "gpu", uuid,
 *                        index, minor, productName, brand, architecture, cudaComputeCapability,
 *                        driverVersion and cudaDriverVersion as semver versions, numaNode,
 *                        nvlinkIsland, pcieSwitch, resource.kubernetes.io/pcieRoot and /pciBusID), capacity
 *                        memory (bytes)
 *   gpu-<index>-shared   the same GPU for fractions (type "shared"): allowMultipleAllocations, consumable
 *                        capacities memory (step: the memory unit) and cores (percent, step 1), each with
 *                        a request policy whose default is the smallest share (as the device plugin's
 *                        fractional path grants a half a container did not ask for)
 * With shared devices on, the pool also has a counter set per GPU ("gpu-<index>", counter memory): the
 * whole device consumes all of it, the shared device one unit, so the scheduler never gives a GPU whole
 * and in fractions at once (KEP-4815 partitionable devices). The counter sets travel in slices of their
 * own (a slice holds devices or counters, never both), at most 8 per slice; a slice with devices that
 * consume counters holds at most 64 devices, else 128.
 *
 *   gpu-<index>-mig-<gi>-<ci>
 *                        a MIG device of a GPU with MIG on (type "mig", static layouts: one per compute
 *                        instance that exists): its profile, MIG UUID, gpuInstance, computeInstance,
 *                        parentUUID, parentIndex and the parent's other attributes, capacity memory
 *   gpu-<index>-mig-<gi>-<ci>-shared
 *                        with shared devices on, the same MIG device for fractions (type "mig-shared"):
 *                        the MIG device's attributes, allowMultipleAllocations, consumable memory (its
 *                        instance's) and cores; it and its MIG device exclude each other by the counter
 *                        "mig-<gi>-<ci>" of the GPU's set (the MIG device consumes all, a share 1)
 *   gpu-<index>-mig-<label>-<start>
 *                        on a GPU partitioned dynamically (mig_dynamic): a placement of a profile (type "mig",
 *                        dynamic, profile, placementStart/Size, no UUID), consuming its memory slices and its
 *                        profile's compute slices; the GPU's instances are not published
 * An unhealthy GPU on a server that keeps device taints is published with the taint "<driver>/unhealthy"
 * (effect NoSchedule) on every device of it; elsewhere it is left out (dra.c decides, slices.c draws).
 * A GPU with MIG on publishes no shared device; its counter set adds one counter per memory slice
 * ("memory-slice-<i>", 1 each) and "compute-slices" (the GPU's, from struct mig_caps): the whole device
 * consumes all of it, a MIG device its compute slices and, when it is its GPU instance's only compute
 * instance, its memory slices — so a MIG device and its whole GPU exclude each other (KEP-4815). What a
 * device consumes is built in one place (dra_device_consumption), which the engine also checks at
 * prepare as the scheduler does. A server that drops the counters (DRAPartitionableDevices off) gets
 * the MIG devices of a MIG GPU without its whole device.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "mig/mig.h"
#include "topo/topo.h"
#include "util/error.h"

/* The Kubernetes limits the slices must meet (resource.k8s.io/v1 types.go and validation). */
#define DRA_MAX_DEVICES_PER_SLICE 128
#define DRA_MAX_DEVICES_WITH_COUNTERS 64
#define DRA_MAX_COUNTER_SETS_PER_SLICE 8
#define DRA_MAX_ATTRS_AND_CAPS 32
#define DRA_MAX_ATTR_VALUE 64
#define DRA_MAX_ID 32         /* the identifier of a qualified name */
#define DRA_MAX_DOMAIN 63     /* the domain of a qualified name, and a driver name */
#define DRA_MAX_POOL_NAME 253 /* also the longest object name (DNS subdomain) */
#define DRA_MAX_LABEL 63      /* device names are DNS labels */

#define DRA_PCIE_ROOT_ATTR "resource.kubernetes.io/pcieRoot"
#define DRA_PCI_BUS_ID_ATTR "resource.kubernetes.io/pciBusID"
#define DRA_DEVICE_SHARED_SUFFIX "-shared"
#define DRA_CORES_TOTAL 100u
#define DRA_DEVICE_MIG_INFIX "-mig-"

/* The node's MIG side as the driver publishes it: the MIG devices (static layouts) and, per GPU with MIG
 * on, its memory and compute slices (mig_caps_memory_slices / mig_caps_compute_slices; 0: unknown, and
 * then the GPU's MIG devices are not published). By topology position. */
struct dra_mig {
        struct mig_node node;
        unsigned memory_slices[TOPO_MAX_GPUS], compute_slices[TOPO_MAX_GPUS];
        struct mig_caps caps[TOPO_MAX_GPUS]; /* each MIG GPU's profiles and placements (n_profiles 0: unread) */
};

/* Whether GPU g (topology position) is published as a MIG GPU: MIG on, its slices known. */
/* Thread: any; lock: none (pure). */
bool dra_mig_gpu(const struct dra_mig *m, unsigned g);

/* What the slices are built from. */
struct dra_slice_input {
        const struct topo *t;
        const char *driver; /* "gpu.gpuslice.io" */
        const char *node;   /* the node name: also the pool's name */
        bool sharing;       /* publish gpu-<i>-shared devices and the counter sets */
        uint64_t memory_unit;
        bool offered[TOPO_MAX_GPUS];       /* per topo position: false = not published (unhealthy, held) */
        char pcie_root[TOPO_MAX_GPUS][32]; /* "pci0000:00", "" unknown (then not published) */
        int64_t generation;                /* pool.generation written into every slice */
        const struct dra_mig *mig;         /* NULL: no MIG devices */
        bool counters_dropped;             /* the server drops counters: no device of a MIG GPU consumes any */
        /* per topo position: published (offered) with a NoSchedule taint DRA_TAINT_KEY on each of its devices,
         * the value from the reason (KEP-5055 device taints: a server that keeps them, 1.36+) */
        bool tainted[TOPO_MAX_GPUS];
        char taint_value[TOPO_MAX_GPUS][DRA_MAX_LABEL + 1]; /* dra_taint_value of the reason, "" none */
        /* dynamic MIG partitioning (docs/dra.md "Dynamic MIG"): bit g = GPU position g publishes a device per
         * profile and placement instead of the instances that exist; mig_owned[g] bit i = GPU instance i of it
         * was made for a claim (the placements over it stay published: the counters exclude them) */
        uint64_t mig_dynamic;
        uint16_t mig_owned[TOPO_MAX_GPUS];
};

#define DRA_TAINT_UNHEALTHY "unhealthy" /* the taint's key in the driver's domain: "gpu.gpuslice.io/unhealthy" */

/* A reason as a taint value (a label value: [A-Za-z0-9._-], alphanumeric at both ends, at most 63): other
 * characters become '-'; "" when nothing is left. */
void dra_taint_value(const char *reason, char *buf, size_t len);

/*
 * The pool's slices as resource.k8s.io/v1 ResourceSlice objects ({apiVersion, kind, metadata{name},
 * spec}), names "<node>-<driver>-<k>" (a hash when that is not a valid name). *ret is a new JSON array.
 * 0, -EINVAL (bad driver or node name), -ENOMEM.
 */
/* Thread: any; lock: none (pure). */
int dra_slices_build(const struct dra_slice_input *in, json_t **ret);

/* The same slice in another served version: "v1" and "v1beta2" share one shape; "v1beta1" wraps a
 * device's fields but its name in "basic". A new reference; NULL for an unknown version or no memory. */
/* Thread: any; lock: none (pure). */
json_t *dra_slice_for_version(const json_t *slice_v1, const char *version);
/* The reverse for what a server answers: a v1-shaped copy of a slice read in any served version. */
/* Thread: any; lock: none (pure). */
json_t *dra_slice_to_v1(const json_t *slice);

enum dra_device_kind {
        DRA_DEVICE_GPU,         /* gpu-<index> */
        DRA_DEVICE_SHARED,      /* gpu-<index>-shared */
        DRA_DEVICE_MIG,         /* gpu-<index>-mig-<gi>-<ci> */
        DRA_DEVICE_MIG_SHARED,  /* gpu-<index>-mig-<gi>-<ci>-shared: fractions of a MIG device */
        DRA_DEVICE_MIG_DYNAMIC, /* gpu-<index>-mig-<profile label>-<start>: a placement, made at prepare */
};

static inline bool dra_kind_mig(enum dra_device_kind k) {
        return k == DRA_DEVICE_MIG || k == DRA_DEVICE_MIG_SHARED || k == DRA_DEVICE_MIG_DYNAMIC;
}
static inline bool dra_kind_shared(enum dra_device_kind k) {
        return k == DRA_DEVICE_SHARED || k == DRA_DEVICE_MIG_SHARED;
}

/* A device by name: its kind, its GPU's NVML index and, for a MIG device, its instance ids; for a dynamic
 * MIG device its profile's label ("1g.10gb+me" → "1g-10gb-me") and its placement's first memory slice. */
struct dra_device_ref {
        enum dra_device_kind kind;
        unsigned index, gi, ci;
        char label[MIG_PROFILE_NAME_MAX];
        unsigned start;
};

/* A profile name as a device name's part: lower case, '.' and '+' as '-' ("1g.10gb+me" → "1g-10gb-me"). */
/* Thread: any; lock: none (pure). */
void dra_mig_label(const char *profile, char *buf, size_t len);
/* The profile of caps with this label and the placement of it at memory slice start: 0, or -ENOENT (no such
 * profile) / -ERANGE (the profile has no placement there). */
/* Thread: any; lock: none (pure). */
int dra_mig_placement(const struct mig_caps *caps, const char *label, unsigned start, const struct mig_profile **ret,
                      struct mig_placement *ret_at);
/* A GPU instance of GPU g (position) over placement `at`, or NULL: with skip_owned, not one made for a claim
 * (mig_owned: the slices keep publishing the placements under a claim's instance, which its counters exclude). */
/* Thread: any; lock: none (pure). */
const struct mig_gi *dra_mig_blocker(const struct dra_slice_input *in, unsigned g, struct mig_placement at,
                                     bool skip_owned);
/* The dynamic MIG devices GPU g (position) publishes: every placement of every profile that no GPU instance
 * covers but a claim's (dra_mig_blocker, skip_owned), profile by profile in the GPU's order, placements rising. How many (at most max in ret). */
/* Thread: any; lock: none (pure). */
unsigned dra_mig_dynamic_devices(const struct dra_slice_input *in, unsigned g, struct dra_device_ref *ret,
                                 unsigned max);
#define DRA_MIG_DYNAMIC_MAX (MIG_MAX_PROFILES * MIG_MAX_PLACEMENTS)

/* Whether GPU g (position) is published dynamically: marked, a MIG GPU, its profiles read. */
/* Thread: any; lock: none (pure). */
bool dra_mig_dynamic_gpu(const struct dra_slice_input *in, unsigned g);

/* Device names. Parse: 0 or -EINVAL for anything else (leading zeros, other suffixes, too long). */
/* Thread: any; lock: none (pure). */
int dra_device_name(const struct dra_device_ref *ref, char *buf, size_t len);
/* Thread: any; lock: none (pure). */
int dra_device_parse(const char *name, struct dra_device_ref *ret);

/* One GPU's counter set, or what one device consumes of it (KEP-4815 counters of "gpu-<index>"). */
struct dra_counters {
        uint64_t memory;                           /* bytes */
        unsigned memory_slice[MIG_MAX_PLACEMENTS]; /* MIG GPUs: memory-slice-<i> */
        unsigned n_memory_slices;
        unsigned compute_slices; /* MIG GPUs */
        /* MIG GPUs with shared MIG devices: "mig-<gi>-<ci>" per MIG device that has a shared twin (by its
         * position in the GPU's MIG device list): the MIG device consumes all of it, each share 1 */
        uint64_t mig_share[MIG_MAX_DEVICES];
        unsigned mig_gi[MIG_MAX_DEVICES], mig_ci[MIG_MAX_DEVICES];
        /* GPUs partitioned dynamically: "profile-<id>-instances" per profile that cannot fill all its placements at
         * once (a +me profile: one instance), by the profile's index in the GPU's mig_caps; each placement of it 1 */
        unsigned profile_instances[MIG_MAX_PROFILES], profile_id[MIG_MAX_PROFILES];
};

/* What GPU g's counter set holds, and what device ref (of GPU g) consumes of it: the one place both the
 * slices and the engine's check read. -ENODEV for a MIG device the input does not have. */
/* Thread: any; lock: none (pure). */
void dra_gpu_counters(const struct dra_slice_input *in, unsigned g, struct dra_counters *ret);
/* Thread: any; lock: none (pure). */
int dra_device_consumption(const struct dra_slice_input *in, unsigned g, const struct dra_device_ref *ref,
                           struct dra_counters *ret);
/* a += b; then whether a fits in cap. */
/* Thread: any; lock: none (pure). */
void dra_counters_add(struct dra_counters *a, const struct dra_counters *b);
/* Thread: any; lock: none (pure). */
bool dra_counters_fit(const struct dra_counters *a, const struct dra_counters *cap);

/* NVLink islands: island[i] = the lowest topo position of GPU i's NVLink-connected component (a GPU
 * without NVLink is an island of its own). PCIe switch groups the same way over PIX links. */
/* Thread: any; lock: none (pure). */
void dra_nvlink_islands(const struct topo *t, int island[TOPO_MAX_GPUS]);
/* Thread: any; lock: none (pure). */
void dra_pcie_switch_groups(const struct topo *t, int group[TOPO_MAX_GPUS]);

/* A driver version as semver: "535.104.05" → "535.104.5", "570.86" → "570.86.0". -EINVAL when not
 * numeric dot-separated parts (1..3 of them). */
/* Thread: any; lock: none (pure). */
int dra_semver_from_driver(const char *v, char *buf, size_t len);
/* Whether s is a version the API accepts (semver.org 2.0.0, at most 64 characters). */
/* Thread: any; lock: none (pure). */
bool dra_semver_valid(const char *s);

/* The PCI bus ID as Kubernetes writes it ("0000:3b:00.0") from NVML's ("00000000:3B:00.0"). -EINVAL. */
/* Thread: any; lock: none (pure). */
int dra_pci_bus_id(const char *nvml_bus_id, char *buf, size_t len);

/* Names as the API validates them. */
/* Thread: any; lock: none (pure). */
bool dra_dns_label_valid(const char *s);
/* Thread: any; lock: none (pure). */
bool dra_dns_subdomain_valid(const char *s);
/* Thread: any; lock: none (pure). */
bool dra_qualified_name_valid(const char *s); /* [domain/]C-identifier */

/* A Kubernetes quantity ("80Gi", "1073741824", "1.5G", "100m", "1e3") as an integer, rounded up as
 * Quantity.Value() does. Only non-negative values up to 2^63-1. 0 or -EINVAL / -ERANGE. */
/* Thread: any; lock: none (pure). */
int dra_quantity_parse(const char *s, uint64_t *ret);
