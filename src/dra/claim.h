/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dra/claim — the decoders of what the DRA driver reads from the API: a ResourceClaim's allocation
 * (status.allocation.devices: results with request, driver, pool, device, shareID, consumedCapacity,
 * adminAccess; config with the opaque parameters of this driver) and those opaque parameters.
 * Pure: text in, structs out; no I/O, no logging. Everything is untrusted: types are checked, strings
 * bounded, unknown parameter fields refused. Fuzzed (tests/fuzz/fuzz-dra-claim.c, fuzz-dra-params.c).
 *
 * Opaque parameters of this driver (DeviceClass or ResourceClaim spec.devices.config[].opaque with
 * driver = the driver's name; docs/dra.md "Sharing modes"):
 *     {"apiVersion": "gpu.gpuslice.io/v1alpha1", "kind": "GpuConfig", "corePolicy": "hard" | "elastic",
 *      "sharing": SHARING}
 *     {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": SHARING}   (NVIDIA's)
 *     SHARING: {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"|"Short"|"Medium"|"Long"}}
 *            | {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 1..100,
 *               "defaultPinnedDeviceMemoryLimit": QUANTITY, "defaultPerDevicePinnedMemoryLimit": {KEY: QUANTITY},
 *               "multiUser": false}}
 * corePolicy: how a shared device's cores are enforced (the limits file's core-policy); absent: the
 * node's sharing.limit-when-alone. sharing: as NVIDIA's DRA driver reads it (api/nvidia.com/resource/
 * v1beta1/sharing.go); KEY an NVML index ("0") or a GPU UUID, QUANTITY a string ("4Gi") or an integer of
 * bytes, at least 1 MiB. Whether a value can be applied on this node (an interval other than Default, a KEY
 * the claim does not hold) is prepare's check, not the decoder's. Configs from the class apply first, the
 * claim's after them (a later config's sharing replaces an earlier one's); a config's requests (empty: all)
 * name a request, or a main request for all its subrequests.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "dra/slices.h"
#include "util/error.h"

#define DRA_RESULTS_MAX 32            /* AllocationResultsMaxSize */
#define DRA_CLAIM_TEXT_MAX (1u << 20) /* a longer claim is refused */
#define DRA_PARAMS_MAX (10u * 1024)   /* OpaqueParametersMaxLength */
#define DRA_UID_MAX 64
#define DRA_PARAMS_API_VERSION "gpu.gpuslice.io/v1alpha1"
#define DRA_PARAMS_KIND "GpuConfig"
#define DRA_PARAMS_NVIDIA_API_VERSION "resource.nvidia.com/v1beta1"
#define DRA_MPS_LIMITS_MAX 8 /* entries of defaultPerDevicePinnedMemoryLimit */
#define DRA_MPS_MIN_PINNED (UINT64_C(1) << 20)

enum dra_core_policy {
        DRA_POLICY_NODE = 0, /* the node's default */
        DRA_POLICY_HARD,
        DRA_POLICY_ELASTIC,
};

enum dra_sharing {
        DRA_SHARING_NONE = 0, /* no sharing config: the device is the claim's alone */
        DRA_SHARING_TIMESLICING,
        DRA_SHARING_MPS,
};

enum dra_interval { /* timeSlicingConfig.interval */
        DRA_INTERVAL_DEFAULT = 0,
        DRA_INTERVAL_SHORT,
        DRA_INTERVAL_MEDIUM,
        DRA_INTERVAL_LONG,
};

struct dra_mps_limit {
        char device[96]; /* an NVML index ("0") or a GPU UUID, as written */
        uint64_t bytes;
};

struct dra_sharing_params {
        enum dra_sharing strategy;
        enum dra_interval interval; /* TimeSlicing */
        unsigned thread_percentage; /* MPS: 1..100, 0 not set */
        uint64_t pinned;            /* MPS: bytes for every device, 0 not set */
        unsigned n_per_device;      /* MPS: the per-device limits, overriding pinned */
        struct dra_mps_limit per_device[DRA_MPS_LIMITS_MAX];
};

struct dra_params {
        enum dra_core_policy core_policy;
        struct dra_sharing_params sharing; /* strategy NONE: none given */
};

/* One device allocated by this driver for the claim. */
struct dra_result {
        char request[128]; /* "gpus" or "gpus/shared" */
        char pool[DRA_MAX_POOL_NAME + 1];
        char device[DRA_MAX_LABEL + 1];
        char share_id[DRA_UID_MAX]; /* "" when the device is not shared */
        bool admin;                 /* adminAccess */
        bool has_memory, has_cores; /* consumedCapacity memory / cores present */
        uint64_t memory;            /* bytes */
        uint64_t cores;             /* percent of the GPU */
        struct dra_params params;   /* this driver's configs that apply to the request, merged */
};

#define DRA_RESERVED_KEPT 4 /* pod names kept of status.reservedFor */

struct dra_claim {
        char uid[DRA_UID_MAX];
        char namespace_[DRA_MAX_LABEL + 1];
        char name[DRA_MAX_POOL_NAME + 1];
        bool allocated; /* status.allocation present */
        unsigned n_results;
        struct dra_result results[DRA_RESULTS_MAX];
        unsigned n_reserved_pods; /* pods in status.reservedFor (the first DRA_RESERVED_KEPT named below) */
        char reserved_pods[DRA_RESERVED_KEPT][DRA_MAX_POOL_NAME + 1];
};

/* Decode a ResourceClaim of any served version (v1, v1beta2, v1beta1 agree on what is read here) and
 * keep what `driver` was allocated. 0, or -EINVAL / -E2BIG with err naming the field ("status.allocation.
 * devices.results[2].consumedCapacity.memory: ..."). *ret is written only on success. */
/* Thread: any; lock: none (pure). */
int dra_claim_decode(const char *text, size_t len, const char *driver, struct dra_claim *ret, struct gs_error *err);

/* The same from a claim already parsed (the API client's answer). */
/* Thread: any; lock: none (pure). */
int dra_claim_from_json(const json_t *root, const char *driver, struct dra_claim *ret, struct gs_error *err);

/* Decode this driver's opaque parameters (a JSON object). 0, or -EINVAL / -E2BIG with err. */
/* Thread: any; lock: none (pure). */
int dra_params_decode(const char *text, size_t len, struct dra_params *ret, struct gs_error *err);

/* "TimeSlicing", "MPS", "" for none; "Default", "Short", ... */
/* Thread: any; lock: none (pure). */
const char *dra_sharing_name(enum dra_sharing s);
/* Thread: any; lock: none (pure). */
const char *dra_interval_name(enum dra_interval i);

/* Whether a claim UID is one the driver accepts in names and files: 1..63 of [a-z0-9-]. */
/* Thread: any; lock: none (pure). */
bool dra_uid_valid(const char *uid);
