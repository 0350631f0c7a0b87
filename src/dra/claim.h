/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dra/claim — the decoders of what the DRA driver reads from the API: a ResourceClaim's allocation
 * (status.allocation.devices: results with request, driver, pool, device, shareID, consumedCapacity,
 * adminAccess; config with the opaque parameters of this driver) and those opaque parameters.
 * Pure: text in, structs out; no I/O, no logging. Everything is untrusted: types are checked, strings
 * bounded, unknown parameter fields refused. Fuzzed (tests/fuzz/fuzz-dra-claim.c, fuzz-dra-params.c).
 *
 * Opaque parameters of this driver (DeviceClass or ResourceClaim spec.devices.config[].opaque with
 * driver = the driver's name; docs/dra.md):
 *     {"apiVersion": "gpu.gpuslice.io/v1alpha1", "kind": "GpuConfig", "corePolicy": "hard" | "elastic"}
 * corePolicy: how a shared device's cores are enforced (the limits file's core-policy); absent: the
 * node's sharing.limit-when-alone. Configs from the class apply first, the claim's after them; a
 * config's requests (empty: all) name a request, or a main request for all its subrequests.
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

enum dra_core_policy {
        DRA_POLICY_NODE = 0, /* the node's default */
        DRA_POLICY_HARD,
        DRA_POLICY_ELASTIC,
};

struct dra_params {
        enum dra_core_policy core_policy;
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

/* Whether a claim UID is one the driver accepts in names and files: 1..63 of [a-z0-9-]. */
/* Thread: any; lock: none (pure). */
bool dra_uid_valid(const char *uid);
