/* SPDX-License-Identifier: Apache-2.0 */
/*
 * limits — the contract between whoever sets a container's GPU limits (the node agent, `gpuslice
 * run`) and libgpuslice-cuda.so, which enforces them inside every process of the container:
 *
 *   1. the limits file: a small read-only text file, named by $GPUSLICE_LIMITS (read with
 *      secure_getenv), parsed strictly by gs_limits_parse();
 *   2. the shared region: one fixed-layout file per container (path given in the limits file),
 *      mapped by every process of the container, that carries the container's memory accounting
 *      and compute throttle state with atomics only — no lock anywhere, so a process SIGKILLed at
 *      any instant never leaves anything held.
 *
 * This header is the ABI: the agent includes it to write limits files (gs_limits_format) and may map
 * the region read-only for metrics. Changing a layout below means bumping GS_REGION_ABI.
 * Nothing here may depend on anything but libc: the interposer links libc, libdl, libpthread only.
 *
 * ## Limits file format (version 1)
 *
 *     # comment lines and blank lines are ignored
 *     gpuslice-limits 1                      first non-comment line, exactly
 *     container <id>                         1..127 chars of [A-Za-z0-9._:-]
 *     region <absolute path>                 the container's shared region file (created on first use)
 *     core-policy hard|elastic               optional, default hard: the core share is enforced even when
 *                                            the container is alone; elastic lets it use idle GPU time
 *     device <index> [uuid=<uuid>] [memory=<bytes>] [core=<1..100>] [context=<bytes>]
 *                                            one line per GPU the container may use (1..16 lines, distinct
 *                                            indexes and uuids); index = CUDA ordinal inside the container,
 *                                            used when uuid is absent; memory absent = no memory limit;
 *                                            core absent or 100 = no compute limit; context = what
 *                                            one CUDA context costs on that GPU, charged against
 *                                            memory per context (default 0: not charged)
 *
 * Fields are separated by spaces or tabs; every line ends with '\n' (the last may omit it). Numbers are
 * plain decimal, no sign, no suffix (the writer converts sizes). Anything else is an error.
 */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GS_LIMITS_ENV "GPUSLICE_LIMITS"
/* Where the agent mounts the limits file in a container: read when $GPUSLICE_LIMITS is unset and the
 * interposer stands in for the driver (loaded as libcuda.so.1), so clearing the environment is no escape. */
#define GS_LIMITS_DEFAULT_PATH "/run/gpuslice/limits"
/* Where the real driver is looked for first (after $GPUSLICE_REAL_LIBCUDA and the library path) when this
 * library is mounted at the driver's own place in a container. */
#define GS_REAL_DRIVER_DIR "/run/gpuslice/driver"
#define GS_LIMITS_VERSION 1u
#define GS_LIMITS_MAX_FILE 16384u /* a longer file is refused */
#define GS_MAX_DEVICES 16u
#define GS_CONTAINER_MAX 128u /* including the NUL */
#define GS_UUID_MAX 96u       /* including the NUL */
#define GS_REGION_PATH_MAX 1024u

enum gs_core_policy {
        GS_CORE_HARD = 0,    /* enforce the share whether or not others use the GPU */
        GS_CORE_ELASTIC = 1, /* the share is a floor: idle GPU time may be used */
};

struct gs_limits_device {
        unsigned index;         /* CUDA ordinal inside the container */
        char uuid[GS_UUID_MAX]; /* "GPU-…" or "" (match by index) */
        uint64_t memory_bytes;  /* 0 = no memory limit */
        unsigned core_percent;  /* 1..100; 100 = no compute limit */
        uint64_t context_bytes; /* charged per CUDA context against memory_bytes; 0 = not charged */
};

struct gs_limits {
        unsigned version;
        char container[GS_CONTAINER_MAX];
        char region[GS_REGION_PATH_MAX];
        enum gs_core_policy core_policy;
        unsigned n_devices;
        struct gs_limits_device dev[GS_MAX_DEVICES];
};

/*
 * Parse a limits file held in text[0..len) (need not be NUL-terminated). Pure: no I/O, no allocation.
 * Returns 0 and fills *ret, or -EINVAL (malformed; err gets "line N: why") / -E2BIG (len too large).
 * *ret is written only on success.
 */
int gs_limits_parse(const char *text, size_t len, struct gs_limits *ret, char *err, size_t err_len);

/* Write l in the file format. Returns the length, -EINVAL when l would not parse back, -ENOBUFS. */
int gs_limits_format(const struct gs_limits *l, char *buf, size_t len);

/* a and b name one device: equal but for case and their GPU-/MIG- prefix (CUDA gives a MIG device's UUID as
 * bytes, formatted GPU-… here; NVML and the limits files write it MIG-…). */
bool gs_uuid_equal(const char *a, const char *b);

/* Index into l->dev of the entry for (ordinal, uuid): by uuid (gs_uuid_equal) when the entry has one, else by
 * index; -1. */
int gs_limits_match(const struct gs_limits *l, unsigned ordinal, const char *uuid);

/* ---------------------------------------------------------------------------------------------
 * The shared region (ABI 2). All multi-process fields are accessed with __atomic builtins only.
 *
 * Memory accounting: a container's usage on a device is the sum of used[dev] over LIVE slots. A slot
 * is written only by its owner process; admission is an optimistic check-then-CAS on the device's
 * `admit_seq` (see region.c), so the sum of committed reservations can never exceed the limit, and a
 * dead owner's slot is simply dropped (the driver frees a dead process's memory), making recovery
 * from SIGKILL at any instant a matter of noticing the owner is gone.
 *
 * Slot owner word: state (2 bits) | pid (22 bits) << 2 | start time (40 bits, clock ticks since
 * boot, /proc/PID/stat field 22) << 24. FREE slots are ignored; CLAIMING slots are being zeroed by a
 * new owner (not counted); LIVE slots are counted. Reclaiming a dead LIVE/CLAIMING slot is one CAS to FREE.
 * host_pid: NVML reports host PIDs, a process in a container knows only its own namespace's PID; the
 * interposer learns its host PID as the one process that appears in NVML's list of the device when it
 * creates its first context there (reset when the slot is claimed).
 * --------------------------------------------------------------------------------------------- */

#define GS_REGION_MAGIC 0x314e4f4947525347ULL /* "GSRGION1" little-endian */
#define GS_REGION_ABI 2u
#define GS_REGION_SLOTS 256u

#define GS_SLOT_FREE 0u
#define GS_SLOT_CLAIMING 1u
#define GS_SLOT_LIVE 2u
#define GS_OWNER(state, pid, start) \
        ((uint64_t)(state) | ((uint64_t)(pid)&0x3fffffULL) << 2 | ((uint64_t)(start)&0xffffffffffULL) << 24)
#define GS_OWNER_STATE(o) ((unsigned)((o)&3u))
#define GS_OWNER_PID(o) ((unsigned)(((o) >> 2) & 0x3fffffu))
#define GS_OWNER_START(o) ((uint64_t)(o) >> 24)

struct gs_region_slot {
        uint64_t owner;                        /* GS_OWNER(...) */
        uint64_t used[GS_MAX_DEVICES];         /* device memory bytes held by this process */
        uint64_t launches[GS_MAX_DEVICES];     /* kernel/graph launches made (monotonic) */
        uint64_t throttled_ns[GS_MAX_DEVICES]; /* time spent waiting in the throttle (monotonic) */
        uint32_t host_pid; /* the PID NVML reports for this process (host PID namespace), 0 = unknown */
        uint32_t reserved0;
};

struct gs_region_device {
        char uuid[GS_UUID_MAX]; /* as in the limits file that created the region (information) */
        uint64_t limit_bytes;   /* likewise */
        uint32_t core_percent;  /* likewise */
        uint32_t index;
        uint64_t admit_seq; /* bumped by every committed reservation (the admission CAS) */
        uint64_t oom_count; /* refusals (information) */
        /* Compute throttle: a shared GCRA rate limiter plus the controller that sets its rate. */
        uint64_t tat_ns;         /* theoretical arrival time of the next launch (CLOCK_MONOTONIC ns) */
        uint64_t interval_ns;    /* minimum spacing between launches; 0 = not throttled */
        uint64_t ctl_last_ns;    /* last controller step (CAS elects the one process that steps) */
        uint64_t ctl_launches;   /* container launches counted at the last step */
        uint64_t ctl_util_milli; /* last measured container utilization, in 1/1000 percent */
        /* the controller's window (throttle.h, struct gs_ctl_window): GPU time and launches not yet learnt */
        uint64_t ctl_win_busy_ns, ctl_win_launches, ctl_win_age_ns;
        uint64_t ctl_last_seen_us; /* newest NVML utilization sample already counted (its timeStamp) */
        uint64_t reserved[4];
};

struct gs_region {
        uint64_t magic;       /* GS_REGION_MAGIC */
        uint32_t abi_version; /* GS_REGION_ABI */
        uint32_t size;        /* sizeof(struct gs_region) */
        char container[GS_CONTAINER_MAX];
        uint32_t n_devices;
        uint32_t slots_hw; /* high-water mark of claimed slot indexes + 1 (only grows) */
        uint64_t reclaims; /* dead slots reclaimed (information) */
        struct gs_region_device dev[GS_MAX_DEVICES];
        struct gs_region_slot slot[GS_REGION_SLOTS];
};
