/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state — the one state of libgpuslice-cuda.so (struct gs_state g) and what its files share: the typed
 * pointers into the real driver (REAL), the wrapper → driver nesting depth (GUARD), the entry check of
 * every wrapper (ENTER), the device map, and the accounting primitives of the fast path — inline here,
 * so that splitting the wrappers over files added no call to any of them (docs/BENCHMARKS.md).
 *
 * The files: interposer.c (init, finding the driver, devices, cuInit, cuGetProcAddress, the generated
 * tables), memory.c (every way device memory is taken, given back or queried), context.c (contexts),
 * launch.c (the compute share). Each defines the wrappers of its group in hooks.h and exports them.
 * Internal: never installed, never included outside src/interposer.
 */
#pragma once

#include "interposer/compat.h"   /* first: the glibc floor */
#include "interposer/cuda-abi.h" /* the driver API subset used (no CUDA toolkit needed) */

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "interposer/hooks.h"
#include "interposer/interposer.h"
#include "interposer/limits.h"
#include "interposer/region.h"

_Static_assert(GS_TAB_MAX_DEV == GS_MAX_DEVICES, "the allocation table counts per limits device");

#define GS_HIDDEN __attribute__((visibility("hidden")))
#define GS_MAX_ORDINALS 64
#define GS_USER_POOLS 32   /* created or named pools settled by name */
#define GS_CREATED_MAX 256 /* created and green contexts charged */
#define GS_NO_SLOT GS_REGION_SLOTS
#define ELEMENTS(x) (sizeof(x) / sizeof((x)[0]))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- the real driver ---- */

/* Typed pointers into the real driver: every hooked variant and the few functions we call ourselves. */
struct gs_real {
#define GS_REAL_MEMBER(sym, base, ver, fl) __typeof__(&sym) sym;
        GS_HOOKS(GS_REAL_MEMBER)
#undef GS_REAL_MEMBER
#define GS_INTERNAL_MEMBER(sym) __typeof__(&sym) sym;
        GS_INTERNAL(GS_INTERNAL_MEMBER)
#undef GS_INTERNAL_MEMBER
};
extern struct gs_real real GS_HIDDEN;

/* Call the real variant, or fail as the driver would for a missing entry point: never a NULL call. */
#define REAL(sym, ...) (LIKELY(real.sym != NULL) ? real.sym(__VA_ARGS__) : CUDA_ERROR_NOT_FOUND)

/* The wrappers, each with the exact prototype of its variant (checked where it is exported). */
#define GS_WRAPPER_DECL(sym, base, ver, fl) extern __typeof__(sym) gs_w_##sym GS_HIDDEN;
GS_HOOKS(GS_WRAPPER_DECL)
#undef GS_WRAPPER_DECL

/* At the end of the file defining them: each wrapper under its driver name, cuda.h's prototype checked. */
#define GS_EXPORT(sym, base, ver, fl)                                                           \
        _Static_assert(__builtin_types_compatible_p(__typeof__(&gs_w_##sym), __typeof__(&sym)), \
                       #sym " wrapper must have the driver's prototype");                       \
        extern __typeof__(sym) sym __attribute__((alias("gs_w_" #sym), visibility("default")));

/* ---- the state ---- */

enum gs_mode {
        GS_MODE_PASS,    /* no limits file: transparent */
        GS_MODE_LIMITED, /* limits loaded, region mapped */
        GS_MODE_FAILED,  /* limits requested but unusable: fail closed */
};

struct gs_state {
        /* Set once by gs_init (under init_once), read-only after. */
        pthread_once_t init_once;
        int init_done; /* atomic: skips pthread_once on the fast path */
        enum gs_mode mode;
        CUresult fail_code;
        void *dl; /* the real driver */
        struct gs_limits limits;
        struct gs_region *region;
        /* This process's slot in the region (atomic), GS_NO_SLOT until it first charges memory, creates a
         * context or launches: a forked child that never uses CUDA (a data-loader worker) takes none. */
        unsigned slot;
        pthread_mutex_t slot_lock;
        bool any_mem, any_core;
        /* Device map: CUDA ordinal → index into limits.dev, -1 = not limited. Written once, under map_lock. */
        pthread_mutex_t map_lock;
        int mapped;
        unsigned n_ordinals;
        int dev_li[GS_MAX_ORDINALS];
        char uuid[GS_MAX_ORDINALS][GS_UUID_MAX];
        /* Rare calls serialise on these (process-local; re-initialised in a forked child). */
        pthread_mutex_t ctx_lock;    /* contexts, context limits (context.c, memory.c) */
        pthread_mutex_t settle_lock; /* settling pool caches and graph memory with the driver */
        pthread_mutex_t vmm_lock;    /* VMM map/unmap/release */
        pthread_mutex_t code_lock;   /* module/library loads are measured one at a time */
        pthread_mutex_t unseen_lock; /* settling g.proc.unseen with NVML */
        /* This process's own (a forked child starts from zero). */
        struct {
                /* Contexts charged to this process (context.c). */
                unsigned primary_refs[GS_MAX_ORDINALS];
                CUcontext primary_ctx[GS_MAX_ORDINALS];
                uint64_t primary_measured[GS_MAX_ORDINALS]; /* charged beyond context= for it (measured) */
                struct {
                        CUcontext ctx;
                        int li;            /* -1: context= not charged */
                        int mli;           /* where `measured` is charged */
                        uint64_t measured; /* charged beyond context= (measured) */
                } created[GS_CREATED_MAX];
                /* Memory the driver holds for this process that no hooked call accounts (lazily loaded
                 * kernels, code a runtime registers through private entry points): NVML's per-process
                 * figure minus what the hooks charged, settled at most every 100 ms (memory.c). */
                uint64_t unseen[GS_MAX_DEVICES];
                uint64_t reconcile_last_ns; /* atomic */
                /* Memory held without an allocation of its own behind it (memory.c; atomics). */
                uint64_t pool_cached[GS_MAX_DEVICES], graph_live[GS_MAX_DEVICES], graph_retained[GS_MAX_DEVICES];
                struct {
                        CUmemoryPool pool;
                        int li1; /* limits index + 1; 0 = not known yet */
                } user_pools[GS_USER_POOLS];
                uint64_t sweep_last_ns; /* atomic; 0 = never swept (memory.c) */
        } proc;
};
extern struct gs_state g GS_HIDDEN;

/*
 * Depth of wrapper → real driver calls on this thread. A call that enters a wrapper while this thread is
 * already inside the driver is one of two kinds (docs/interposer.md, "Calls made inside a driver call"):
 *   - the driver's own, made from code in the driver's image while it implements the outer call (a driver
 *     calling its exported entry points through the global scope): it goes straight to the driver, so
 *     nothing is counted or throttled twice;
 *   - a callback's: the driver runs a profiler's callback (CUPTI, Kineto, Nsight) on the calling thread,
 *     inside the outer call, and the callback calls the API itself. That is the application's own call and
 *     is counted like any other.
 * Told apart by the caller's address (in the driver's image or not: g.drv_lo/g.drv_len). While the
 * interposer itself holds one of its locks across a driver call, or measures what the driver takes, it adds
 * GS_NEST_INTERNAL: every call made inside goes straight through then (a callback's allocation there is
 * left to NVML's per-process figure, gs_reconcile), so no callback re-enters a held lock or a measurement.
 * initial-exec: no TLS lookup call.
 */
extern __thread unsigned nested __attribute__((tls_model("initial-exec"), visibility("hidden")));
#define GS_NEST_INTERNAL (1u << 16)
#define GUARD(expr)                                 \
        __extension__({                             \
                nested++;                           \
                __typeof__(expr) guard_r_ = (expr); \
                nested--;                           \
                guard_r_;                           \
        })

#define GUARD_VOID(expr)  \
        do {              \
                nested++; \
                expr;     \
                nested--; \
        } while (0)

/* The interposer's own work around driver calls (measuring, settling, anything under its locks). */
#define INTERNAL_BEGIN() (nested += GS_NEST_INTERNAL)
#define INTERNAL_END() (nested -= GS_NEST_INTERNAL)

static inline void gs_lock(pthread_mutex_t *m) {
        pthread_mutex_lock(m);
        INTERNAL_BEGIN();
}

static inline void gs_unlock(pthread_mutex_t *m) {
        INTERNAL_END();
        pthread_mutex_unlock(m);
}

/* The real driver's mapped image [drv_lo, drv_lo + drv_len), 0/0 when unknown (set once by gs_init). */
extern uintptr_t gs_drv_lo, gs_drv_len GS_HIDDEN;

/* A call entering a wrapper (return address ra) is the driver's own: made inside a driver call, from the
 * driver's code or while the interposer works internally. Unknown image: every nested call is the driver's. */
static inline bool driver_own_call(const void *ra) {
        unsigned n = nested;
        if (LIKELY(!n))
                return false;
        return n >= GS_NEST_INTERNAL || !gs_drv_len || (uintptr_t)ra - gs_drv_lo < gs_drv_len;
}

/* ---- init (interposer.c) ---- */

void gs_init(void) GS_HIDDEN;

static inline void ensure_init(void) {
        if (UNLIKELY(!__atomic_load_n(&g.init_done, __ATOMIC_ACQUIRE))) {
                pthread_once(&g.init_once, gs_init);
                __atomic_store_n(&g.init_done, 1, __ATOMIC_RELEASE);
        }
}

/* The hooked calls this thread has entered (ENTER), and the one of them whose refusal was last counted:
 * one call retries a charge that did not fit (after settling with the driver), and counts as one refusal. */
extern __thread uint64_t gs_calls, gs_refused_call __attribute__((tls_model("initial-exec"), visibility("hidden")));

/* Entry check of every wrapper: initialise, and refuse when failed closed. Keeps the wrapper's return address
 * for NESTED: this call is the driver's own (driver_own_call), to go straight through — asked only where a
 * wrapper needs it, so a path that never asks pays nothing. Must be expanded in the wrapper itself (or a
 * helper always inlined into it): the return address is the wrapper's caller. */
#define ENTER()                                                                         \
        const void *const gs_ra_ __attribute__((unused)) = __builtin_return_address(0); \
        do {                                                                            \
                ensure_init();                                                          \
                gs_calls++;                                                             \
                if (UNLIKELY(g.mode == GS_MODE_FAILED))                                 \
                        return g.fail_code;                                             \
        } while (0)
#define NESTED driver_own_call(gs_ra_)

/* ---- devices (interposer.c) ---- */

void gs_map_devices(void) GS_HIDDEN;

static inline int li_of_ordinal(CUdevice d) {
        if (UNLIKELY(!__atomic_load_n(&g.mapped, __ATOMIC_ACQUIRE)))
                gs_map_devices();
        return d >= 0 && d < GS_MAX_ORDINALS ? g.dev_li[d] : -1;
}

/* Limits index of the calling thread's current device, -1 when not limited (or no context). */
static inline int current_li(void) {
        if (UNLIKELY(!__atomic_load_n(&g.mapped, __ATOMIC_ACQUIRE)))
                gs_map_devices();
        if (LIKELY(g.n_ordinals == 1))
                return g.dev_li[0]; /* one visible GPU: every context is on it */
        CUdevice d;
        if (!real.cuCtxGetDevice || real.cuCtxGetDevice(&d) != CUDA_SUCCESS)
                return -1;
        return d >= 0 && d < GS_MAX_ORDINALS ? g.dev_li[d] : -1;
}

static inline int mem_li(int li) {
        return li >= 0 && g.limits.dev[li].memory_bytes ? li : -1;
}

/* ---- the process slot (interposer.c) ---- */

/* Claim this process's slot (slow path, once): false when the region has none free (said on stderr once). */
bool gs_claim_slot(void) GS_HIDDEN __attribute__((noinline));

/* This process has a slot (claiming it on first use). One acquire load on the fast path. */
static inline bool have_slot(void) {
        return LIKELY(__atomic_load_n(&g.slot, __ATOMIC_ACQUIRE) != GS_NO_SLOT) || gs_claim_slot();
}

/* ---- accounting primitives (memory.c has the rest) ---- */

static inline bool reserve(int li, uint64_t bytes) {
        if (LIKELY(have_slot() &&
                   gs_region_reserve(g.region, g.slot, (unsigned)li, g.limits.dev[li].memory_bytes, bytes) == 0))
                return true;
        if (gs_refused_call != gs_calls) { /* the region's refusal counter: once per call */
                gs_refused_call = gs_calls;
                gs_region_count_refusal(g.region, (unsigned)li);
        }
        return false;
}

static inline void refund(int li, uint64_t bytes) {
        /* without a slot nothing was ever charged */
        if (bytes && __atomic_load_n(&g.slot, __ATOMIC_ACQUIRE) != GS_NO_SLOT)
                gs_region_unreserve(g.region, g.slot, (unsigned)li, bytes);
}

/* A charge that does not fit: settle what no hook sees, pool caches and graph memory with the driver, then try
 * again. */
bool gs_charge_slow(int li, uint64_t bytes) GS_HIDDEN __attribute__((noinline));
/* The charge of memory the driver already took and that was measured (a context, a code load): like charge(),
 * but never settles what no hook sees — that settling would count this very memory as unseen. */
bool gs_charge_measured(int li, uint64_t bytes) GS_HIDDEN;

static inline bool charge(int li, uint64_t bytes) {
        return LIKELY(reserve(li, bytes)) || gs_charge_slow(li, bytes);
}

/* ---- measuring what the driver took (memory.c): contexts, code, what no hook sees ---- */

/* A reading before a call that takes device memory nobody names (a context, a code load). */
struct gs_took {
        bool proc_ok, dev_ok, free_ok;
        uint64_t proc;     /* NVML: this process's used memory on the device (0 when not listed yet) */
        uint64_t dev_used; /* NVML: the device's used memory */
        uint64_t free;     /* cuMemGetInfo: the device's free memory (needs a current context) */
};
/* The device (uuid) before the call; with_ctx: a context is current (cuMemGetInfo can be asked). */
void gs_took_begin(const char *uuid, bool with_ctx, struct gs_took *t) GS_HIDDEN;
/* What the call took: NVML's per-process delta when NVML knows this process (a neighbour's allocation in
 * the window is not counted), else the device's used delta, else the device's free delta; 0 when nothing
 * can say. */
uint64_t gs_took_end(const char *uuid, bool with_ctx, const struct gs_took *t) GS_HIDDEN;
/* The UUID the driver reports for limits index li ("" when unknown). */
const char *gs_uuid_of(int li) GS_HIDDEN;
/* Settle g.proc.unseen[li] with NVML's per-process figure (rate-limited: at most every 100 ms). */
void gs_reconcile(int li) GS_HIDDEN;

static inline void give_cached(int li, uint64_t bytes) {
        if (bytes)
                __atomic_add_fetch(&g.proc.pool_cached[li], bytes, __ATOMIC_ACQ_REL);
}

/* The calling thread's current context (what the driver frees an allocation with), 0 if none. */
static inline uint64_t current_ctx(void) {
        CUcontext c = NULL;
        if (!real.cuCtxGetCurrent || real.cuCtxGetCurrent(&c) != CUDA_SUCCESS)
                return 0;
        return (uint64_t)(uintptr_t)c;
}

/* After a successful tracked allocation: remember it, or report that it must be undone (table full).
 * VMM handles outlive contexts; everything else goes with the context it was made in. */
static inline CUresult remember(enum gs_table t, uint64_t key, uint64_t bytes, int li) {
        uint64_t ctx = t == GS_TAB_VMM ? 0 : current_ctx();
        if (LIKELY(gs_table_insert(t, key, bytes, (unsigned)li, ctx) == 0))
                return CUDA_SUCCESS;
        refund(li, bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
}
