/* SPDX-License-Identifier: Apache-2.0 */
/*
 * interposer — internal interfaces between the files of libgpuslice-cuda.so (never installed,
 * never included outside src/interposer and its tests).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* Initialise (once) and look a symbol up in the real driver; NULL when absent or no driver. */
void *gs_real_symbol(const char *name) __attribute__((visibility("hidden")));

/* What an entry point the driver lacks returns: CUDA_ERROR_NOT_FOUND, or when failed closed the refusal
 * (every pass-through call then fails too). */
int gs_fail_code(void) __attribute__((visibility("hidden")));

/* For NVML's memory queries: is the device with this UUID limited in this container? Its limit and the
 * container's usage. Initialises on first use; false when not limited. */
bool gs_memory_view(const char *uuid, uint64_t *ret_limit, uint64_t *ret_used) __attribute__((visibility("hidden")));
/* Whether host PID pid (as NVML reports processes) is a live process of this container (its slot learnt it). */
bool gs_container_host_pid(unsigned pid) __attribute__((visibility("hidden")));

/* dlopen, never while the process forks (dl.c's lock): every dlopen of this library goes through here. */
void *gs_dlopen(const char *file, int flags) __attribute__((visibility("hidden")));
/* dl_iterate_phdr under the same lock (it holds the loader's lock while it runs: a fork then would leave the
 * child's loader locked). */
struct dl_phdr_info;
int gs_dl_iterate_phdr(int (*fn)(struct dl_phdr_info *, size_t, void *), void *data)
        __attribute__((visibility("hidden")));
/* The fork handlers' part for that lock: held across fork, re-initialised in the child. */
void gs_dl_atfork_prepare(void) __attribute__((visibility("hidden")));
void gs_dl_atfork_parent(void) __attribute__((visibility("hidden")));
void gs_dl_atfork_child(void) __attribute__((visibility("hidden")));

/* CLOCK_MONOTONIC in ns (vDSO: no syscall). Inline: the throttle and the entry points read it, and no file
 * of the interposer owns a clock (a definition in interposer.c made throttle.c and interposer.c use each
 * other: scripts/lint-cycles.py). */
static inline uint64_t gs_now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ---- allocation table (alloc-table.c): what each live allocation of this process costs ---- */

enum gs_table {
        GS_TAB_PTR,      /* device pointers: cuMemAlloc*, managed, async, external buffers */
        GS_TAB_ARRAY,    /* CUarray and CUmipmappedArray handles */
        GS_TAB_VMM,      /* cuMemCreate handles, and imported handles once mapped */
        GS_TAB_ASYNC,    /* device pointers from a stream-ordered pool (cuMemAllocAsync, cuMemAllocFromPoolAsync) */
        GS_TAB_EXT,      /* imported external memory objects (cuImportExternalMemory) */
        GS_TAB_GRAPH,    /* executable graphs with memory nodes: key exec << 4 | limits index */
        GS_TAB_MAPPING,  /* VMM mappings of tracked handles: key VA → (size, limits index, handle in ctx) */
        GS_TAB_MAPCOUNT, /* live mappings per tracked VMM handle: key handle → count in bytes */
        GS_TAB_RELEASED, /* VMM handles released while still mapped: charged until their last unmap */
        GS_TAB_LIMIT,    /* context limits (cuCtxSetLimit): key ctx << 2 | CUlimit → bytes beyond the defaults */
        GS_TAB_CODE,     /* loaded modules and libraries: key handle → what the load took */
        GS_TAB_COUNT,
};

/* Map the tables (once, at init). -ENOMEM. */
int gs_table_init(void) __attribute__((visibility("hidden")));
/* Forget everything (child after fork). */
void gs_table_reset(void) __attribute__((visibility("hidden")));
#define GS_TAB_MAX_DEV 16 /* = GS_MAX_DEVICES */

/* Record key → (bytes, dev, the context it lives in or 0). -ENOSPC when the table is full. Lock-free. */
int gs_table_insert(enum gs_table t, uint64_t key, uint64_t bytes, unsigned dev, uint64_t ctx)
        __attribute__((visibility("hidden")));
/* Remove key and return what it cost. -ENOENT when not tracked. Lock-free. */
int gs_table_take(enum gs_table t, uint64_t key, uint64_t *ret_bytes, unsigned *ret_dev)
        __attribute__((visibility("hidden")));
/* The same, also returning the entry's context value. */
int gs_table_take_all(enum gs_table t, uint64_t key, uint64_t *ret_bytes, unsigned *ret_dev, uint64_t *ret_ctx)
        __attribute__((visibility("hidden")));
/* Remove every entry of context ctx (the driver freed them with it); adds their bytes per device. */
void gs_table_take_ctx(enum gs_table t, uint64_t ctx, uint64_t ret_bytes[GS_TAB_MAX_DEV])
        __attribute__((visibility("hidden")));
