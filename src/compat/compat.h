/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compat — will this CUDA container run on this node? NVIDIA's requirement expressions
 * (NVIDIA_REQUIRE_*), the CUDA toolkit ↔ minimum driver table, and the container environment
 * rules that NVIDIA's runtime hook applies (NVIDIA_DISABLE_REQUIRE, legacy CUDA_VERSION).
 *
 * Requirement grammar (as libnvidia-container reads it):
 *   expr  := group { ' ' group }      alternatives: one satisfied group is enough (OR)
 *   group := term { ',' term }        every term of a group must hold (AND)
 *   term  := key op value             key: cuda | driver | arch | brand (| anything else)
 *   op    := '=' | '!=' | '<' | '<=' | '>' | '>='
 * `cuda` compares with the highest CUDA version the driver supports, `driver` with the driver
 * version, `arch` with each GPU's compute capability (major.minor), `brand` (= and != only) with
 * each GPU's brand name (tesla, geforce, quadro, nvidia, titan, …, case-insensitive). Versions
 * compare component by component (470 < 470.57.02 < 471). A term whose key is unknown is skipped
 * (treated as true); a term without an operator, with an empty value or a malformed version is an
 * error (the whole expression is refused: fail closed). GPU terms (brand, arch) are checked for
 * every GPU the container gets; with no GPU they are skipped.
 *
 * Pure code: no I/O, no allocation, no global state, no logging. Messages are one line, fit for
 * a person: which requirement failed, what the node has, what would satisfy it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

#define COMPAT_VERSION_PARTS 4
#define COMPAT_EXPR_MAX 4096 /* longer expressions are refused */

/* A dotted version: "12.4" → {12, 4}, n = 2; "535.104.05" → {535, 104, 5}, n = 3. */
struct compat_version {
        unsigned part[COMPAT_VERSION_PARTS];
        unsigned n;
};

/* Parse s[0..len) ("12", "12.4", "535.104.05"; 1..4 numeric parts of at most 9 digits each).
 * 0 or -EINVAL. */
int compat_version_parse(const char *s, size_t len, struct compat_version *ret);
/* <0, 0, >0; missing trailing parts count as 0 (12 == 12.0). */
int compat_version_cmp(const struct compat_version *a, const struct compat_version *b);
/* CUDA as NVML gives it (1000 * major + 10 * minor, e.g. 12020) → {12, 2}. */
struct compat_version compat_version_from_cuda(int cuda);
/* "12.4" / "535.104.05": parts as given, later parts zero-padded to 2 digits (NVIDIA's driver
 * style: 535.104.05, 470.57.02). Returns buf. */
char *compat_version_format(const struct compat_version *v, char *buf, size_t len);

/* One GPU the container gets, for brand and arch terms. */
struct compat_gpu {
        int index;              /* for messages */
        char brand[32];         /* "tesla", "geforce", …; "" unknown */
        int cc_major, cc_minor; /* 0 unknown */
};

/* What the node has. */
struct compat_node {
        char driver[80]; /* driver version "535.104.05"; "" unknown */
        int cuda;        /* CUDA driver version, 1000 * major + 10 * minor; 0 unknown */
        const struct compat_gpu *gpus;
        size_t n_gpus;
};

/*
 * Check one expression. 0 when satisfied (or empty); -EPERM when not, msg says why in one line
 * ("cuda>=13.0: needs driver ≥ 580.65.06 for CUDA 13.0, node has 535.104.05 (CUDA 12.2)");
 * -EINVAL when malformed (msg says where). err (util/error.h) may be NULL.
 */
int compat_require_check(const char *expr, size_t len, const struct compat_node *node, struct gs_error *err);

/* Only parse (for tests and fuzzing): 0 or -EINVAL with msg. */
int compat_require_validate(const char *expr, size_t len, struct gs_error *err);

/* Booleans the way NVIDIA's hook reads them (Go's strconv.ParseBool): 1 t T true TRUE True → true;
 * anything else false. */
bool compat_parse_bool(const char *s);

/*
 * The container's environment (K=V strings; later entries override earlier ones) against the
 * node: NVIDIA_DISABLE_REQUIRE true → 0 without looking further; every NVIDIA_REQUIRE_<X> must
 * hold; CUDA_VERSION=M.m[.p] without NVIDIA_REQUIRE_CUDA means cuda>=M.m. 0, -EPERM (msg:
 * "NVIDIA_REQUIRE_CUDA: cuda>=13.0: needs …") or -EINVAL (malformed; msg says which variable).
 */
int compat_env_check(const char *const *env, size_t n_env, const struct compat_node *node, struct gs_error *err);

/* The last value of `name` in env, or NULL. */
const char *compat_env_get(const char *const *env, size_t n_env, const char *name);

/*
 * The CUDA toolkit ↔ driver table.
 */
struct compat_cuda_row {
        int cuda;               /* 1000 * major + 10 * minor */
        const char *min_driver; /* the toolkit's own minimum Linux driver (native) */
};
/* Rows oldest first; *ret_n rows. */
const struct compat_cuda_row *compat_cuda_table(size_t *ret_n);

/* The toolkit's minimum driver (native): from the table; for a version newer than the table
 * within a known major, NULL (unknown). */
const char *compat_min_driver(int cuda);
/* Minimum driver for minor-version compatibility within a major (11 → 450.80.02, 12 → 525.60.13,
 * 13 → 580.65.06); NULL for majors without it (< 11) or unknown. */
const char *compat_minor_compat_driver(int major);

enum compat_mode {
        COMPAT_NATIVE = 0,               /* the driver supports this CUDA version */
        COMPAT_MINOR_VERSION,            /* same major, driver ≥ the major's minimum: runs, some features limited */
        COMPAT_FORWARD,                  /* newer major: only with the cuda-compat package on a data-center GPU */
        COMPAT_FORWARD_NEEDS_DATACENTER, /* would need forward compatibility, but the GPU is not data-center */
        COMPAT_NONE,                     /* older driver of the same major below its minimum, or unknown facts */
};
/* How a toolkit `cuda` runs on a driver whose CUDA driver version is driver_cuda (both
 * 1000*M+10*m) and version `driver`; datacenter: the GPU supports forward compatibility. */
enum compat_mode compat_classify(int cuda, int driver_cuda, const char *driver, bool datacenter);
const char *compat_mode_name(enum compat_mode m);

/* Whether a GPU brand / model name is a data-center part (forward compatibility applies):
 * brand tesla (NVIDIA's data-center brand in NVML), or a name with Tesla, A100, H100, … */
bool compat_gpu_datacenter(const char *brand, const char *name);

/* NVML's brand enum (nvmlBrandType_t) → the lower-case name requirement terms use
 * ("tesla", "geforce", …); "unknown" outside the enum. */
const char *compat_brand_name(int nvml_brand);
/* The brand NVIDIA would report for a model name, when NVML cannot say: GeForce → geforce,
 * Quadro → quadro, TITAN → titan, "RTX A…" → nvidiartx, otherwise tesla. */
const char *compat_brand_from_name(const char *name);
