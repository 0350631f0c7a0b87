/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memory — every way a process of the container takes device memory, gives it back or asks about it:
 * allocation families and frees, stream-ordered pools, VMM handles and mappings, imported memory, graph
 * memory nodes, memory the driver takes without an allocation (context limits, module and library
 * loads, pool imports), and the virtualised memory queries. All charged against the container's limit
 * in the shared region (region.c) with what each allocation took remembered per process
 * (alloc-table.c). docs/interposer.md, "Memory", says what is counted how and why.
 */
#include "interposer/state.h" /* first: cuda.h with every variant, the glibc floor */

#include "interposer/nvml-view.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/*
 * Memory queries stop counting a dead (e.g. SIGKILLed) process's memory within this long: they sweep
 * the region for dead slots at most once per interval per process. The clock is CLOCK_MONOTONIC_COARSE
 * (vDSO, no syscall), read on query paths only; launches and allocations never sweep (an allocation
 * that does not fit reclaims at once, see gs_region_reserve).
 */
#define GS_SWEEP_INTERVAL_NS 100000000ULL

static void sweep_dead_slots(void) {
        struct timespec ts;
        if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) < 0)
                return;
        uint64_t now = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
        (void)gs_region_sweep(g.region, g.slot, &g.proc.sweep_last_ns, now, GS_SWEEP_INTERVAL_NS);
}

/* ---- measuring what the driver took ---- */

/* The driver still holds memory for a dead owner's slot: NVML lists its host PID with memory used on a device
 * the slot is charged on (region.h, gs_region_set_held). */
static bool slot_held(const struct gs_region_slot *s) {
        unsigned pid = __atomic_load_n(&s->host_pid, __ATOMIC_RELAXED);
        if (!pid)
                return false; /* NVML never named it: nothing can say (the slot goes with its process) */
        for (unsigned li = 0; li < g.limits.n_devices && li < GS_MAX_DEVICES; li++) {
                uint64_t used = 0;
                if (__atomic_load_n(&s->used[li], __ATOMIC_RELAXED) &&
                    gs_view_process_used(gs_uuid_of((int)li), pid, &used) && used)
                        return true;
        }
        return false;
}

/* A dead process's slot stays while the driver holds its memory (installed at load, before any reclaim). */
__attribute__((constructor)) static void install_slot_held(void) {
        gs_region_set_held(slot_held);
}

const char *gs_uuid_of(int li) {
        if (li < 0 || (unsigned)li >= g.limits.n_devices)
                return "";
        if (g.limits.dev[li].uuid[0])
                return g.limits.dev[li].uuid;
        for (unsigned d = 0; d < g.n_ordinals; d++)
                if (g.dev_li[d] == li)
                        return g.uuid[d];
        return "";
}

static unsigned host_pid(void) {
        unsigned s = __atomic_load_n(&g.slot, __ATOMIC_ACQUIRE);
        return s < GS_REGION_SLOTS ? __atomic_load_n(&g.region->slot[s].host_pid, __ATOMIC_RELAXED) : 0;
}

/* This process's used memory on the device as NVML lists it; *listed = false when it is not listed. */
static bool proc_reading(const char *uuid, uint64_t *ret) {
        struct gs_pidset s;
        gs_view_processes(uuid, &s);
        if (!s.valid)
                return false;
        unsigned me = host_pid();
        *ret = 0; /* not listed: it holds nothing there yet (a process is listed from its first context) */
        for (unsigned i = 0; me && i < s.n; i++)
                if (s.pid[i] == me)
                        *ret = s.used[i];
        return true;
}

void gs_took_begin(const char *uuid, bool with_ctx, struct gs_took *t) {
        size_t f = 0, total = 0;
        INTERNAL_BEGIN();
        t->proc_ok = proc_reading(uuid, &t->proc);
        t->dev_ok = gs_view_device_used(uuid, &t->dev_used);
        t->free_ok = with_ctx && REAL(cuMemGetInfo_v2, &f, &total) == CUDA_SUCCESS;
        t->free = f;
        INTERNAL_END();
}

uint64_t gs_took_end(const char *uuid, bool with_ctx, const struct gs_took *t) {
        uint64_t p = 0, u = 0;
        size_t f = 0, total = 0;
        uint64_t r = 0;
        INTERNAL_BEGIN();
        /* per process only once NVML knows this process's PID (learnt at its first context) */
        if (t->proc_ok && host_pid() && proc_reading(uuid, &p))
                r = p > t->proc ? p - t->proc : 0;
        else if (t->dev_ok && gs_view_device_used(uuid, &u))
                r = u > t->dev_used ? u - t->dev_used : 0;
        else if (t->free_ok && with_ctx && REAL(cuMemGetInfo_v2, &f, &total) == CUDA_SUCCESS)
                r = t->free > f ? t->free - f : 0;
        INTERNAL_END();
        return r;
}

#define GS_RECONCILE_INTERVAL_NS 100000000ULL

void gs_reconcile(int li) {
        struct timespec ts;
        unsigned me = host_pid(), s = __atomic_load_n(&g.slot, __ATOMIC_ACQUIRE);
        if (li < 0 || !me || s >= GS_REGION_SLOTS || clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) < 0)
                return;
        uint64_t now = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
        uint64_t last = __atomic_load_n(&g.proc.reconcile_last_ns, __ATOMIC_RELAXED);
        if ((last && now >= last && now - last < GS_RECONCILE_INTERVAL_NS) ||
            !__atomic_compare_exchange_n(&g.proc.reconcile_last_ns, &last, now ? now : 1, false, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED))
                return;
        INTERNAL_BEGIN();
        uint64_t drv;
        if (gs_view_process_used(gs_uuid_of(li), me, &drv)) {
                gs_lock(&g.unseen_lock);
                /* what the hooks charged for this process = its slot minus what was charged as unseen */
                uint64_t mine = __atomic_load_n(&g.region->slot[s].used[li], __ATOMIC_ACQUIRE);
                uint64_t unseen = g.proc.unseen[li], hooked = mine > unseen ? mine - unseen : 0;
                uint64_t want = drv > hooked ? drv - hooked : 0;
                if (want > unseen)
                        gs_region_force(g.region, s, (unsigned)li, want - unseen); /* already taken: counted */
                else
                        refund(li, unseen - want);
                g.proc.unseen[li] = want;
                gs_unlock(&g.unseen_lock);
        }
        INTERNAL_END();
}

/* ---- memory accounting ---- */

/*
 * Memory this process holds that no live allocation of its own stands for (per limits index, atomics):
 *   pool_cached    — freed to a stream-ordered pool and still reserved by it: counted from the free until
 *                    the pools' RESERVED − USED (asked of the driver) says it went back to the device;
 *   graph_live     — what the memory nodes of live executable graphs need (charged at instantiation);
 *   graph_retained — graph memory of destroyed execs: the driver keeps it reserved (allocations may
 *                    outlive their graph) until cuDeviceGraphMemTrim, then RESERVED_MEM_CURRENT says.
 * Settling against the driver happens only on slow paths (a charge that does not fit, a memory query
 * while something is held, a trim), so the allocation and free fast paths stay one CAS / one add.
 * (The variables are declared with the other state, above.)
 */

/* Sum RESERVED and USED over the stream-ordered pools this process can allocate from on limits index li:
 * each mapped device's current and default pool, and the pools it created or named. */
static void pools_usage(int li, uint64_t *ret_reserved, uint64_t *ret_used) {
        CUmemoryPool seen[GS_USER_POOLS + 2 * GS_MAX_ORDINALS];
        unsigned n = 0;
        for (unsigned d = 0; d < g.n_ordinals; d++) {
                CUmemoryPool p;
                if (g.dev_li[d] != li)
                        continue;
                if (real.cuDeviceGetMemPool && real.cuDeviceGetMemPool(&p, (CUdevice)d) == CUDA_SUCCESS && p)
                        seen[n++] = p;
                if (real.cuDeviceGetDefaultMemPool && real.cuDeviceGetDefaultMemPool(&p, (CUdevice)d) == CUDA_SUCCESS &&
                    p)
                        seen[n++] = p;
        }
        for (unsigned k = 0; k < GS_USER_POOLS; k++) {
                CUmemoryPool p = __atomic_load_n(&g.proc.user_pools[k].pool, __ATOMIC_ACQUIRE);
                if (p && __atomic_load_n(&g.proc.user_pools[k].li1, __ATOMIC_ACQUIRE) == li + 2)
                        seen[n++] = p;
        }
        uint64_t r = 0, u = 0;
        for (unsigned i = 0; i < n && real.cuMemPoolGetAttribute; i++) {
                bool dup = false;
                for (unsigned j = 0; j < i; j++)
                        dup |= seen[j] == seen[i];
                cuuint64_t v = 0;
                if (dup)
                        continue;
                if (real.cuMemPoolGetAttribute(seen[i], CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) == CUDA_SUCCESS)
                        r += v;
                if (real.cuMemPoolGetAttribute(seen[i], CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v) == CUDA_SUCCESS)
                        u += v;
        }
        *ret_reserved = r;
        *ret_used = u;
}

/* Graph memory the driver keeps reserved on limits index li (every mapped device). */
static uint64_t graph_reserved(int li) {
        uint64_t sum = 0;
        for (unsigned d = 0; d < g.n_ordinals; d++) {
                cuuint64_t v = 0;
                if (g.dev_li[d] == li && real.cuDeviceGetGraphMemAttribute &&
                    real.cuDeviceGetGraphMemAttribute((CUdevice)d, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v) ==
                            CUDA_SUCCESS)
                        sum += v;
        }
        return sum;
}

/* Lower *cell from `seen` to `desired` (refunding the difference) unless someone changed it meanwhile. */
static bool lower_to(int li, uint64_t *cell, uint64_t seen, uint64_t desired) {
        if (desired >= seen)
                return true; /* never raised here: what is counted stays counted */
        if (!__atomic_compare_exchange_n(cell, &seen, desired, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                return false;
        refund(li, seen - desired);
        return true;
}

/* Slow path: give back what pools and graph memory no longer hold, as the driver reports it. */
static void settle(int li) {
        INTERNAL_BEGIN();
        gs_lock(&g.settle_lock);
        for (int tries = 0; tries < 4; tries++) {
                uint64_t seen = __atomic_load_n(&g.proc.pool_cached[li], __ATOMIC_ACQUIRE), r, u;
                if (!seen)
                        break;
                pools_usage(li, &r, &u);
                if (lower_to(li, &g.proc.pool_cached[li], seen, r > u ? r - u : 0))
                        break;
        }
        for (int tries = 0; tries < 4; tries++) {
                uint64_t seen = __atomic_load_n(&g.proc.graph_retained[li], __ATOMIC_ACQUIRE);
                if (!seen)
                        break;
                uint64_t r = graph_reserved(li), live = __atomic_load_n(&g.proc.graph_live[li], __ATOMIC_ACQUIRE);
                if (lower_to(li, &g.proc.graph_retained[li], seen, r > live ? r - live : 0))
                        break;
        }
        gs_unlock(&g.settle_lock);
        INTERNAL_END();
}

static inline bool holds_unbacked(int li) {
        return __atomic_load_n(&g.proc.pool_cached[li], __ATOMIC_RELAXED) ||
               __atomic_load_n(&g.proc.graph_retained[li], __ATOMIC_RELAXED);
}

bool gs_charge_measured(int li, uint64_t bytes) {
        if (reserve(li, bytes))
                return true;
        if (!holds_unbacked(li))
                return false;
        settle(li);
        return reserve(li, bytes);
}

bool gs_charge_slow(int li, uint64_t bytes) {
        /* Before refusing: what no hook sees, as the driver says now (lazily loaded code may have gone, or
         * come: then the refusal stands on the true figure), and what pools and graphs still hold. */
        uint64_t unseen = g.proc.unseen[li];
        gs_reconcile(li);
        if (g.proc.unseen[li] < unseen && reserve(li, bytes))
                return true;
        return gs_charge_measured(li, bytes);
}

/* Move up to `want` bytes out of the pool cache (for a pool allocation it will serve); returns how many. */
static uint64_t take_cached(int li, uint64_t want) {
        uint64_t cur = __atomic_load_n(&g.proc.pool_cached[li], __ATOMIC_ACQUIRE);
        for (;;) {
                uint64_t t = cur < want ? cur : want;
                if (!t)
                        return 0;
                if (__atomic_compare_exchange_n(&g.proc.pool_cached[li], &cur, cur - t, false, __ATOMIC_ACQ_REL,
                                                __ATOMIC_ACQUIRE))
                        return t;
        }
}

/* After a pool allocation served partly from the cache: the pools' idle memory must not exceed what is
 * counted as cached (it does when a pool grew instead of reusing). Charge the excess; false = no room. */
static bool pool_growth_counted(int li) {
        bool ok = true;
        INTERNAL_BEGIN();
        gs_lock(&g.settle_lock);
        uint64_t r, u;
        pools_usage(li, &r, &u);
        uint64_t idle = r > u ? r - u : 0, cached = __atomic_load_n(&g.proc.pool_cached[li], __ATOMIC_ACQUIRE);
        if (idle > cached) {
                ok = reserve(li, idle - cached);
                if (ok)
                        give_cached(li, idle - cached);
        }
        gs_unlock(&g.settle_lock);
        INTERNAL_END();
        return ok;
}

/* The device of a stream: a created stream's own (cuStreamGetDevice, CUDA 12.8; else through its context);
 * NULL and the special handles name the current context's default stream. */
static bool stream_device(CUstream s, CUdevice *ret) {
        if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
                return real.cuCtxGetDevice && GUARD(real.cuCtxGetDevice(ret)) == CUDA_SUCCESS;
        if (real.cuStreamGetDevice && GUARD(real.cuStreamGetDevice(s, ret)) == CUDA_SUCCESS)
                return true;
        CUcontext c = NULL, popped;
        if (!real.cuStreamGetCtx || GUARD(real.cuStreamGetCtx(s, &c)) != CUDA_SUCCESS || !c ||
            !real.cuCtxPushCurrent_v2 || !real.cuCtxPopCurrent_v2 || GUARD(real.cuCtxPushCurrent_v2(c)) != CUDA_SUCCESS)
                return false;
        bool ok = real.cuCtxGetDevice && GUARD(real.cuCtxGetDevice(ret)) == CUDA_SUCCESS;
        (void)GUARD(real.cuCtxPopCurrent_v2(&popped));
        return ok;
}

/* Limits index of a pool's device: recorded at cuMemPoolCreate (or at its first allocation); a device's
 * default or current pool found by asking each device; else (not this process's to know) the current one. */
static int pool_li(CUmemoryPool p) {
        for (unsigned k = 0; k < GS_USER_POOLS; k++)
                if (__atomic_load_n(&g.proc.user_pools[k].pool, __ATOMIC_ACQUIRE) == p) {
                        int li2 = __atomic_load_n(&g.proc.user_pools[k].li1, __ATOMIC_ACQUIRE);
                        if (li2)
                                return li2 - 2;
                        break;
                }
        for (unsigned d = 0; d < g.n_ordinals; d++) {
                CUmemoryPool q = NULL;
                if ((real.cuDeviceGetDefaultMemPool &&
                     GUARD(real.cuDeviceGetDefaultMemPool(&q, (CUdevice)d)) == CUDA_SUCCESS && q == p) ||
                    (real.cuDeviceGetMemPool && GUARD(real.cuDeviceGetMemPool(&q, (CUdevice)d)) == CUDA_SUCCESS &&
                     q == p))
                        return g.dev_li[d];
        }
        return current_li();
}

/* Limits index a stream-ordered allocation is charged to: the pool's device (cuMemAllocFromPoolAsync), else
 * the stream's device (cuMemAllocAsync allocates from the current pool of the stream's device) — not the
 * calling thread's current device, which may be another GPU. One visible GPU: no question to ask. */
static inline int async_li(CUmemoryPool pool, CUstream s) {
        if (UNLIKELY(!__atomic_load_n(&g.mapped, __ATOMIC_ACQUIRE)))
                gs_map_devices();
        if (LIKELY(g.n_ordinals == 1))
                return g.dev_li[0];
        if (pool)
                return pool_li(pool);
        CUdevice d;
        if (!stream_device(s, &d))
                return current_li();
        return d >= 0 && d < GS_MAX_ORDINALS ? g.dev_li[d] : -1;
}

/* The pool an allocation will come from: the one named, else the current pool of the stream's device. */
static CUmemoryPool target_pool(CUmemoryPool named, CUstream s) {
        CUdevice d;
        CUmemoryPool cur = NULL;
        if (named)
                return named;
        if (stream_device(s, &d) && real.cuDeviceGetMemPool && real.cuDeviceGetMemPool(&cur, d) != CUDA_SUCCESS)
                cur = NULL;
        return cur;
}

/* What pool p holds without handing it out (RESERVED − USED); 0 when unknown. */
static uint64_t pool_idle(CUmemoryPool p) {
        cuuint64_t r = 0, u = 0;
        if (!p || !real.cuMemPoolGetAttribute ||
            real.cuMemPoolGetAttribute(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &r) != CUDA_SUCCESS ||
            real.cuMemPoolGetAttribute(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &u) != CUDA_SUCCESS)
                return 0;
        return r > u ? r - u : 0;
}

/* After undoing an allocation that grew pool p past the limit: give the pool's idle memory back to the
 * device. Refusal path only. Never a synchronisation: a cuCtxSynchronize here would invalidate a stream
 * capture in progress on any thread of the process (CUDA graphs). The undone free completes in stream order;
 * until then its bytes stay counted as the pool's cache (give_cached), settled at the next slow path. */
static void pool_shrink(CUmemoryPool p) {
        if (p && real.cuMemPoolTrimTo)
                (void)real.cuMemPoolTrimTo(p, 0);
}

static void remember_pool(CUmemoryPool p, int li) {
        if (!p)
                return;
        for (unsigned k = 0; k < GS_USER_POOLS; k++)
                if (__atomic_load_n(&g.proc.user_pools[k].pool, __ATOMIC_ACQUIRE) == p)
                        return;
        for (unsigned k = 0; k < GS_USER_POOLS; k++) {
                CUmemoryPool empty = NULL;
                if (__atomic_compare_exchange_n(&g.proc.user_pools[k].pool, &empty, p, false, __ATOMIC_ACQ_REL,
                                                __ATOMIC_ACQUIRE)) {
                        __atomic_store_n(&g.proc.user_pools[k].li1, li + 2, __ATOMIC_RELEASE);
                        return;
                }
        }
        /* More pools than slots: their cache is settled only as far as the others tell (documented). */
}

static void forget_pool(CUmemoryPool p) {
        for (unsigned k = 0; k < GS_USER_POOLS; k++)
                if (__atomic_load_n(&g.proc.user_pools[k].pool, __ATOMIC_ACQUIRE) == p) {
                        __atomic_store_n(&g.proc.user_pools[k].li1, 0, __ATOMIC_RELEASE);
                        __atomic_store_n(&g.proc.user_pools[k].pool, NULL, __ATOMIC_RELEASE);
                }
}

/*
 * The allocation pattern: charge first (so the container's sum never exceeds its limit, even while the
 * driver works), call the driver, refund on failure, remember on success. `key` is evaluated after
 * the call; `undo` releases the fresh allocation when it cannot be remembered.
 */
#define TRACKED_ALLOC(table, li_expr, bytes_expr, call, key, undo)                     \
        do {                                                                           \
                ENTER();                                                               \
                int li_ = g.mode == GS_MODE_LIMITED && !NESTED ? mem_li(li_expr) : -1; \
                if (li_ < 0)                                                           \
                        return call;                                                   \
                uint64_t bytes_ = (bytes_expr);                                        \
                if (!charge(li_, bytes_))                                              \
                        return CUDA_ERROR_OUT_OF_MEMORY;                               \
                CUresult r_ = GUARD(call);                                             \
                if (r_ != CUDA_SUCCESS) {                                              \
                        refund(li_, bytes_);                                           \
                        return r_;                                                     \
                }                                                                      \
                r_ = remember(table, (uint64_t)(key), bytes_, li_);                    \
                if (r_ != CUDA_SUCCESS)                                                \
                        (void)GUARD(undo);                                             \
                return r_;                                                             \
        } while (0)

/* Frees of device pointers: tracked ones as TRACKED_FREE; pool allocations go back to their pool, whose
 * cache stays counted (g.proc.pool_cached) until the driver says the pool released it. */
#define PTR_FREE(key_expr, call)                                                                       \
        do {                                                                                           \
                ENTER();                                                                               \
                uint64_t key_ = (uint64_t)(key_expr), bytes_;                                          \
                unsigned li_;                                                                          \
                if (g.mode != GS_MODE_LIMITED || NESTED)                                               \
                        return call;                                                                   \
                if (gs_table_take(GS_TAB_PTR, key_, &bytes_, &li_) == 0) {                             \
                        CUresult r_ = GUARD(call);                                                     \
                        if (r_ == CUDA_SUCCESS)                                                        \
                                refund((int)li_, bytes_);                                              \
                        else                                                                           \
                                (void)gs_table_insert(GS_TAB_PTR, key_, bytes_, li_, current_ctx());   \
                        return r_;                                                                     \
                }                                                                                      \
                if (gs_table_take(GS_TAB_ASYNC, key_, &bytes_, &li_) == 0) {                           \
                        CUresult r_ = GUARD(call);                                                     \
                        if (r_ == CUDA_SUCCESS)                                                        \
                                give_cached((int)li_, bytes_);                                         \
                        else                                                                           \
                                (void)gs_table_insert(GS_TAB_ASYNC, key_, bytes_, li_, current_ctx()); \
                        return r_;                                                                     \
                }                                                                                      \
                return call;                                                                           \
        } while (0)

/*
 * Stream-ordered allocations: like TRACKED_ALLOC, but when the charge does not fit, the pool may serve the
 * request from memory it keeps cached (already counted in g.proc.pool_cached): take from the cache what the
 * allocation's own pool holds idle, and afterwards check with the driver that the pools did not grow
 * beyond what is counted (they do under fragmentation) — else undo it, let the pool give back its idle
 * memory, and refuse.
 */
#define ASYNC_ALLOC(pool_expr, stream_expr, bytes_expr, call, undo)                                             \
        do {                                                                                                    \
                ENTER();                                                                                        \
                int li_ = g.mode == GS_MODE_LIMITED && !NESTED ? mem_li(async_li(pool_expr, stream_expr)) : -1; \
                if (li_ < 0)                                                                                    \
                        return call;                                                                            \
                remember_pool(pool_expr, li_);                                                                  \
                uint64_t bytes_ = (bytes_expr), take_ = 0;                                                      \
                CUmemoryPool tp_ = NULL;                                                                        \
                if (!charge(li_, bytes_)) {                                                                     \
                        /* only what the allocation's own pool holds idle can serve it */                       \
                        tp_ = GUARD(target_pool(pool_expr, stream_expr));                                       \
                        uint64_t idle_ = GUARD(pool_idle(tp_));                                                 \
                        take_ = take_cached(li_, bytes_ < idle_ ? bytes_ : idle_);                              \
                        if (take_ < bytes_ && !charge(li_, bytes_ - take_)) {                                   \
                                give_cached(li_, take_);                                                        \
                                return CUDA_ERROR_OUT_OF_MEMORY;                                                \
                        }                                                                                       \
                }                                                                                               \
                CUresult r_ = GUARD(call);                                                                      \
                if (r_ != CUDA_SUCCESS) {                                                                       \
                        refund(li_, bytes_ - take_);                                                            \
                        give_cached(li_, take_);                                                                \
                        return r_;                                                                              \
                }                                                                                               \
                if (gs_table_insert(GS_TAB_ASYNC, *dptr, bytes_, (unsigned)li_, current_ctx()) < 0) {           \
                        (void)GUARD(undo);                                                                      \
                        give_cached(li_, bytes_); /* back in its pool: counted until settled */                 \
                        return CUDA_ERROR_OUT_OF_MEMORY;                                                        \
                }                                                                                               \
                if (take_ && !pool_growth_counted(li_)) {                                                       \
                        uint64_t b_;                                                                            \
                        unsigned d_;                                                                            \
                        if (gs_table_take(GS_TAB_ASYNC, *dptr, &b_, &d_) == 0) {                                \
                                (void)GUARD(undo);                                                              \
                                give_cached(li_, b_);                                                           \
                                GUARD_VOID(pool_shrink(tp_));                                                   \
                                settle(li_);                                                                    \
                        }                                                                                       \
                        return CUDA_ERROR_OUT_OF_MEMORY;                                                        \
                }                                                                                               \
                return CUDA_SUCCESS;                                                                            \
        } while (0)

/* The free pattern: forget first (the key cannot be handed out again until the driver frees it), call
 * the driver, refund on success, remember again on failure. */
#define TRACKED_FREE(table, key_expr, call)                                                               \
        do {                                                                                              \
                ENTER();                                                                                  \
                uint64_t key_ = (uint64_t)(key_expr), bytes_;                                             \
                unsigned li_;                                                                             \
                if (g.mode != GS_MODE_LIMITED || NESTED || gs_table_take(table, key_, &bytes_, &li_) < 0) \
                        return call;                                                                      \
                CUresult r_ = GUARD(call);                                                                \
                if (r_ == CUDA_SUCCESS)                                                                   \
                        refund((int)li_, bytes_);                                                         \
                else                                                                                      \
                        (void)gs_table_insert(table, key_, bytes_, li_, current_ctx());                   \
                return r_;                                                                                \
        } while (0)

static uint64_t mul_sat(uint64_t a, uint64_t b) {
        uint64_t r;
        return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t format_bytes(CUarray_format f) {
        switch ((int)f) {
                case CU_AD_FORMAT_UNSIGNED_INT8:
                case CU_AD_FORMAT_SIGNED_INT8: return 1;
                case CU_AD_FORMAT_UNSIGNED_INT16:
                case CU_AD_FORMAT_SIGNED_INT16:
                case CU_AD_FORMAT_HALF: return 2;
                default: return 4; /* 32-bit formats, and an upper bound for the packed/compressed ones */
        }
}

static uint64_t array_bytes(uint64_t w, uint64_t h, uint64_t d, uint64_t channels, CUarray_format f) {
        uint64_t b = mul_sat(mul_sat(w ? w : 1, h ? h : 1), d ? d : 1);
        return mul_sat(mul_sat(b, channels ? channels : 1), format_bytes(f));
}

#define PITCH_ALIGN 512u /* the widest pitch alignment drivers use */

/* ---- wrappers: allocations ---- */

CUresult gs_w_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
        TRACKED_ALLOC(GS_TAB_PTR, current_li(), bytesize, REAL(cuMemAlloc_v2, dptr, bytesize), *dptr,
                      REAL(cuMemFree_v2, *dptr));
}

CUresult gs_w_cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize) {
        TRACKED_ALLOC(GS_TAB_PTR, current_li(), bytesize, REAL(cuMemAlloc, dptr, bytesize), *dptr,
                      REAL(cuMemFree, *dptr));
}

CUresult gs_w_cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
        TRACKED_ALLOC(GS_TAB_PTR, current_li(), bytesize, REAL(cuMemAllocManaged, dptr, bytesize, flags), *dptr,
                      REAL(cuMemFree_v2, *dptr));
}

CUresult gs_w_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
        ASYNC_ALLOC(NULL, hStream, bytesize, REAL(cuMemAllocAsync, dptr, bytesize, hStream),
                    REAL(cuMemFreeAsync, *dptr, hStream));
}

CUresult gs_w_cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
        ASYNC_ALLOC(NULL, hStream, bytesize, REAL(cuMemAllocAsync_ptsz, dptr, bytesize, hStream),
                    REAL(cuMemFreeAsync_ptsz, *dptr, hStream));
}

CUresult gs_w_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
        ASYNC_ALLOC(pool, hStream, bytesize, REAL(cuMemAllocFromPoolAsync, dptr, bytesize, pool, hStream),
                    REAL(cuMemFreeAsync, *dptr, hStream));
}

CUresult gs_w_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
        ASYNC_ALLOC(pool, hStream, bytesize, REAL(cuMemAllocFromPoolAsync_ptsz, dptr, bytesize, pool, hStream),
                    REAL(cuMemFreeAsync_ptsz, *dptr, hStream));
}

static int vmm_li(const CUmemAllocationProp *prop) {
        if (!prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
                return -1; /* host memory is not a device limit */
        return li_of_ordinal((CUdevice)prop->location.id);
}

CUresult gs_w_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                          unsigned long long flags) {
        TRACKED_ALLOC(GS_TAB_VMM, vmm_li(prop), size, REAL(cuMemCreate, handle, size, prop, flags), *handle,
                      REAL(cuMemRelease, *handle));
}

CUresult gs_w_cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d) {
        TRACKED_ALLOC(GS_TAB_ARRAY, current_li(),
                      d ? array_bytes(d->Width, d->Height, 1, d->NumChannels, d->Format) : 0,
                      REAL(cuArrayCreate_v2, pHandle, d), (uintptr_t)*pHandle, REAL(cuArrayDestroy, *pHandle));
}

CUresult gs_w_cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *d) {
        TRACKED_ALLOC(GS_TAB_ARRAY, current_li(),
                      d ? array_bytes(d->Width, d->Height, 1, d->NumChannels, d->Format) : 0,
                      REAL(cuArrayCreate, pHandle, d), (uintptr_t)*pHandle, REAL(cuArrayDestroy, *pHandle));
}

CUresult gs_w_cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d) {
        TRACKED_ALLOC(GS_TAB_ARRAY, current_li(),
                      d ? array_bytes(d->Width, d->Height, d->Depth, d->NumChannels, d->Format) : 0,
                      REAL(cuArray3DCreate_v2, pHandle, d), (uintptr_t)*pHandle, REAL(cuArrayDestroy, *pHandle));
}

CUresult gs_w_cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d) {
        TRACKED_ALLOC(GS_TAB_ARRAY, current_li(),
                      d ? array_bytes(d->Width, d->Height, d->Depth, d->NumChannels, d->Format) : 0,
                      REAL(cuArray3DCreate, pHandle, d), (uintptr_t)*pHandle, REAL(cuArrayDestroy, *pHandle));
}

static uint64_t mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels) {
        if (!d)
                return 0;
        uint64_t sum = 0;
        for (unsigned l = 0; l < (levels ? levels : 1) && l < 64; l++) {
                uint64_t w = d->Width >> l, h = d->Height >> l, z = d->Depth >> l;
                uint64_t b = array_bytes(w ? w : 1, h ? h : 1, z ? z : 1, d->NumChannels, d->Format);
                sum = sum + b < sum ? UINT64_MAX : sum + b;
        }
        return sum;
}

CUresult gs_w_cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                     unsigned int numMipmapLevels) {
        TRACKED_ALLOC(GS_TAB_ARRAY, current_li(), mipmap_bytes(d, numMipmapLevels),
                      REAL(cuMipmappedArrayCreate, pHandle, d, numMipmapLevels), (uintptr_t)*pHandle,
                      REAL(cuMipmappedArrayDestroy, *pHandle));
}

struct pitch_req {
        bool wide; /* _v2 (size_t) or legacy (unsigned int) */
        void *dptr, *pitch;
        size_t w, h;
        unsigned elem;
};

static CUresult pitch_driver_alloc(const struct pitch_req *q, uint64_t *ret_pitch) {
        CUresult r;
        if (q->wide) {
                r = REAL(cuMemAllocPitch_v2, (CUdeviceptr *)q->dptr, (size_t *)q->pitch, q->w, q->h, q->elem);
                if (r == CUDA_SUCCESS)
                        *ret_pitch = *(size_t *)q->pitch;
        } else {
                r = REAL(cuMemAllocPitch, (CUdeviceptr_v1 *)q->dptr, (unsigned int *)q->pitch, (unsigned int)q->w,
                         (unsigned int)q->h, q->elem);
                if (r == CUDA_SUCCESS)
                        *ret_pitch = *(unsigned int *)q->pitch;
        }
        return r;
}

static uint64_t pitch_key(const struct pitch_req *q) {
        return q->wide ? (uint64_t) * (CUdeviceptr *)q->dptr : (uint64_t) * (CUdeviceptr_v1 *)q->dptr;
}

static void pitch_driver_free(const struct pitch_req *q) {
        if (q->wide)
                (void)REAL(cuMemFree_v2, *(CUdeviceptr *)q->dptr);
        else
                (void)REAL(cuMemFree, *(CUdeviceptr_v1 *)q->dptr);
}

/* The driver picks the pitch: charge the widest it may pick, then settle on what it picked. */
static CUresult pitch_alloc(int li, const struct pitch_req *q) {
        uint64_t h = q->h ? q->h : 1;
        uint64_t wide = q->w > UINT64_MAX - PITCH_ALIGN
                                ? UINT64_MAX
                                : ((uint64_t)q->w + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
        uint64_t est = mul_sat(wide, h);
        if (!charge(li, est))
                return CUDA_ERROR_OUT_OF_MEMORY;
        uint64_t pitch = 0;
        CUresult r = pitch_driver_alloc(q, &pitch);
        if (r != CUDA_SUCCESS) {
                refund(li, est);
                return r;
        }
        uint64_t actual = mul_sat(pitch, h);
        if (actual < est)
                refund(li, est - actual);
        else if (actual > est && !charge(li, actual - est)) {
                refund(li, est);
                pitch_driver_free(q);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        r = remember(GS_TAB_PTR, pitch_key(q), actual, li);
        if (r != CUDA_SUCCESS)
                pitch_driver_free(q);
        return r;
}

CUresult gs_w_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                 unsigned int ElementSizeBytes) {
        ENTER();
        int li = g.mode == GS_MODE_LIMITED && !NESTED ? mem_li(current_li()) : -1;
        if (li < 0 || !dptr || !pPitch)
                return REAL(cuMemAllocPitch_v2, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
        struct pitch_req q = { true, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes };
        return GUARD(pitch_alloc(li, &q));
}

CUresult gs_w_cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                              unsigned int Height, unsigned int ElementSizeBytes) {
        ENTER();
        int li = g.mode == GS_MODE_LIMITED && !NESTED ? mem_li(current_li()) : -1;
        if (li < 0 || !dptr || !pPitch)
                return REAL(cuMemAllocPitch, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
        struct pitch_req q = { false, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes };
        return GUARD(pitch_alloc(li, &q));
}

/* ---- wrappers: frees ---- */

CUresult gs_w_cuMemFree_v2(CUdeviceptr dptr) {
        PTR_FREE(dptr, REAL(cuMemFree_v2, dptr));
}

CUresult gs_w_cuMemFree(CUdeviceptr_v1 dptr) {
        PTR_FREE(dptr, REAL(cuMemFree, dptr));
}

CUresult gs_w_cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
        PTR_FREE(dptr, REAL(cuMemFreeAsync, dptr, hStream));
}

CUresult gs_w_cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
        PTR_FREE(dptr, REAL(cuMemFreeAsync_ptsz, dptr, hStream));
}

/* cuMemRelease: with cuMemMap ("VMM mappings"). */

CUresult gs_w_cuArrayDestroy(CUarray hArray) {
        TRACKED_FREE(GS_TAB_ARRAY, (uintptr_t)hArray, REAL(cuArrayDestroy, hArray));
}

CUresult gs_w_cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
        TRACKED_FREE(GS_TAB_ARRAY, (uintptr_t)hMipmappedArray, REAL(cuMipmappedArrayDestroy, hMipmappedArray));
}

/* ---- imported memory ----
 * Memory another process exported (cuIpcOpenMemHandle, cuMemImportFromShareableHandle + cuMemMap,
 * cuMemPoolImportPointer) is not charged to the importer: it lives on the exporter's device and is charged
 * to the exporter's container for as long as the exporter holds it. (Charging the importer too billed a
 * tensor-parallel pod for its peers' buffers, on the importer's device.) Those calls are not hooked; only
 * cuImportExternalMemory (another API's allocation that nothing else counts) is charged, below. The gap
 * this leaves — a VMM import kept alive after its exporter released it — is in docs/interposer.md. */

/*
 * VMM mappings. A handle's memory lives until it is released AND unmapped everywhere (cuMemRelease right
 * after cuMemMap is the usual pattern), so a tracked handle (cuMemCreate) stays charged past its
 * cuMemRelease while mappings of it remain, and is given back at its last cuMemUnmap. Mappings of untracked
 * handles (imported ones) are passed through. These calls are rare: one process-local mutex keeps the
 * handle, mapping and count tables consistent.
 */

/* Live mappings of a tracked handle: add delta (+1/-1), return the new count; vmm_lock held. */
static uint64_t map_count_add(uint64_t handle, int delta, unsigned li) {
        uint64_t n = 0;
        unsigned d;
        (void)gs_table_take(GS_TAB_MAPCOUNT, handle, &n, &d);
        n = delta > 0 ? n + 1 : n ? n - 1 : 0;
        if (n)
                (void)gs_table_insert(GS_TAB_MAPCOUNT, handle, n, li, 0);
        return n;
}

CUresult gs_w_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                       unsigned long long flags) {
        ENTER();
        if (g.mode != GS_MODE_LIMITED || NESTED)
                return REAL(cuMemMap, ptr, size, offset, handle, flags);
        gs_lock(&g.vmm_lock);
        CUresult r = GUARD(REAL(cuMemMap, ptr, size, offset, handle, flags));
        if (r != CUDA_SUCCESS) {
                gs_unlock(&g.vmm_lock);
                return r;
        }
        uint64_t b;
        unsigned d;
        if (gs_table_take(GS_TAB_VMM, handle, &b, &d) == 0) { /* a tracked handle: remember the mapping */
                (void)gs_table_insert(GS_TAB_VMM, handle, b, d, 0);
                if (gs_table_insert(GS_TAB_MAPPING, ptr, size, d, handle) == 0)
                        (void)map_count_add(handle, +1, d);
        }
        gs_unlock(&g.vmm_lock);
        return r;
}

CUresult gs_w_cuMemUnmap(CUdeviceptr ptr, size_t size) {
        ENTER();
        if (g.mode != GS_MODE_LIMITED || NESTED)
                return REAL(cuMemUnmap, ptr, size);
        gs_lock(&g.vmm_lock);
        CUresult r = GUARD(REAL(cuMemUnmap, ptr, size));
        /* The range may cover several mappings, one after the other. */
        for (uint64_t p = ptr; r == CUDA_SUCCESS && p < (uint64_t)ptr + size;) {
                uint64_t msize, handle, bytes;
                unsigned li, d;
                if (gs_table_take_all(GS_TAB_MAPPING, p, &msize, &li, &handle) < 0)
                        break;
                if (!map_count_add(handle, -1, li) && gs_table_take(GS_TAB_RELEASED, handle, &bytes, &d) == 0)
                        refund((int)d, bytes); /* released earlier: its memory goes now */
                p += msize ? msize : size;
        }
        gs_unlock(&g.vmm_lock);
        return r;
}

CUresult gs_w_cuMemRelease(CUmemGenericAllocationHandle handle) {
        ENTER();
        if (g.mode != GS_MODE_LIMITED || NESTED)
                return REAL(cuMemRelease, handle);
        uint64_t bytes, n;
        unsigned li, d;
        CUresult r;
        gs_lock(&g.vmm_lock);
        if (gs_table_take(GS_TAB_VMM, handle, &bytes, &li) == 0) {
                r = GUARD(REAL(cuMemRelease, handle));
                if (r != CUDA_SUCCESS)
                        (void)gs_table_insert(GS_TAB_VMM, handle, bytes, li, 0);
                else if (gs_table_take(GS_TAB_MAPCOUNT, handle, &n, &d) == 0 && n) {
                        /* still mapped: charged until the last cuMemUnmap (a full table keeps it charged) */
                        (void)gs_table_insert(GS_TAB_MAPCOUNT, handle, n, d, 0);
                        (void)gs_table_insert(GS_TAB_RELEASED, handle, bytes, li, 0);
                } else
                        refund((int)li, bytes);
        } else
                r = GUARD(REAL(cuMemRelease, handle));
        gs_unlock(&g.vmm_lock);
        return r;
}

/* External memory (Vulkan, D3D, NvSciBuf…): the whole object is charged at import (mapped buffers and
 * arrays are views of it) and given back when it is destroyed. */
CUresult gs_w_cuImportExternalMemory(CUexternalMemory *extMem_out,
                                     const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *memHandleDesc) {
        TRACKED_ALLOC(GS_TAB_EXT, current_li(), memHandleDesc ? memHandleDesc->size : 0,
                      REAL(cuImportExternalMemory, extMem_out, memHandleDesc), (uintptr_t)*extMem_out,
                      REAL(cuDestroyExternalMemory, *extMem_out));
}

CUresult gs_w_cuDestroyExternalMemory(CUexternalMemory extMem) {
        TRACKED_FREE(GS_TAB_EXT, (uintptr_t)extMem, REAL(cuDestroyExternalMemory, extMem));
}

/* ---- wrappers: stream-ordered pools ---- */

static void settle_all(void) {
        for (unsigned li = 0; li < g.limits.n_devices; li++)
                if (holds_unbacked((int)li))
                        settle((int)li);
}

CUresult gs_w_cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps) {
        ENTER();
        CUresult r = GUARD(REAL(cuMemPoolCreate, pool, poolProps));
        if (r == CUDA_SUCCESS && g.mode == GS_MODE_LIMITED && !NESTED && pool && poolProps &&
            poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
                /* its device, limited or not: its allocations are charged there (pool_li) */
                remember_pool(*pool, mem_li(li_of_ordinal((CUdevice)poolProps->location.id)));
        }
        return r;
}

CUresult gs_w_cuMemPoolDestroy(CUmemoryPool pool) {
        ENTER();
        CUresult r = GUARD(REAL(cuMemPoolDestroy, pool));
        if (r == CUDA_SUCCESS && g.mode == GS_MODE_LIMITED && !NESTED) {
                forget_pool(pool);
                settle_all(); /* its memory went back to the device */
        }
        return r;
}

CUresult gs_w_cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
        ENTER();
        CUresult r = GUARD(REAL(cuMemPoolTrimTo, pool, minBytesToKeep));
        if (r == CUDA_SUCCESS && g.mode == GS_MODE_LIMITED && !NESTED)
                settle_all();
        return r;
}

/* ---- wrappers: graph memory nodes ----
 * A graph's allocations come from a per-device graph pool the driver fills at launch (or upload) and keeps
 * reserved until cuDeviceGraphMemTrim. The exact point that can still refuse is instantiation: what the
 * graph's memory nodes need (CUDA forbids relaunching a graph whose allocations are not freed, so one exec
 * never holds more than that) is charged when it is instantiated, refused there with OUT_OF_MEMORY. When
 * the exec is destroyed its charge moves to graph_retained (allocations may outlive it and the pool stays
 * reserved), which cuDeviceGraphMemTrim (and any slow path) settles against RESERVED_MEM_CURRENT. */

#define GRAPH_DEPTH 8

/* Allocations a stream capture made (cuMemAllocAsync into a capturing stream returns the address of the
 * memory-allocation node it records): charged at capture as stream-ordered allocations, and their charge is
 * carried over to the graph when it is instantiated, so the node is charged once. */
struct graph_carry {
        size_t n, cap;
        struct {
                CUdeviceptr ptr;
                uint64_t bytes;
                unsigned li;
        } * e;
        uint64_t bytes[GS_MAX_DEVICES]; /* per limits index: already charged */
};

/* Take the capture-time charge of a node's address out of the stream-ordered table (remembered in c). */
static void carry_take(struct graph_carry *c, CUdeviceptr ptr) {
        uint64_t b;
        unsigned li;
        if (c->n == c->cap) {
                size_t cap = c->cap ? 2 * c->cap : 16;
                __typeof__(c->e) e = realloc(c->e, cap * sizeof *e);
                if (!e)
                        return; /* charged again at instantiation: the safe direction */
                c->e = e;
                c->cap = cap;
        }
        if (gs_table_take(GS_TAB_ASYNC, ptr, &b, &li) < 0 || li >= GS_MAX_DEVICES)
                return;
        c->e[c->n].ptr = ptr;
        c->e[c->n].bytes = b;
        c->e[c->n++].li = li;
        c->bytes[li] += b;
}

/* The instantiation failed: the captured allocations are stream-ordered allocations again. */
static void carry_restore(struct graph_carry *c) {
        for (size_t i = 0; i < c->n; i++)
                if (gs_table_insert(GS_TAB_ASYNC, c->e[i].ptr, c->e[i].bytes, c->e[i].li, current_ctx()) < 0)
                        refund((int)c->e[i].li, c->e[i].bytes);
}

/* Add what the memory-allocation nodes of graph gr (and its child graphs) need, per limits index; the
 * nodes' capture-time charges move into c. */
static CUresult graph_need(CUgraph gr, uint64_t need[GS_MAX_DEVICES], struct graph_carry *c, unsigned depth) {
        size_t n = 0;
        CUresult r = REAL(cuGraphGetNodes, gr, NULL, &n);
        if (r != CUDA_SUCCESS || n == 0)
                return r;
        CUgraphNode *nodes = calloc(n, sizeof *nodes);
        if (!nodes)
                return CUDA_ERROR_OUT_OF_MEMORY;
        r = REAL(cuGraphGetNodes, gr, nodes, &n);
        for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
                CUgraphNodeType t;
                if (REAL(cuGraphNodeGetType, nodes[i], &t) != CUDA_SUCCESS)
                        continue;
                if (t == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
                        CUDA_MEM_ALLOC_NODE_PARAMS p;
                        memset(&p, 0, sizeof p);
                        if (REAL(cuGraphMemAllocNodeGetParams, nodes[i], &p) != CUDA_SUCCESS ||
                            p.poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
                                continue;
                        int li = mem_li(li_of_ordinal((CUdevice)p.poolProps.location.id));
                        if (li >= 0)
                                need[li] = need[li] + p.bytesize < need[li] ? UINT64_MAX : need[li] + p.bytesize;
                        if (li >= 0 && p.dptr)
                                carry_take(c, p.dptr);
                } else if (t == CU_GRAPH_NODE_TYPE_GRAPH && depth < GRAPH_DEPTH) {
                        CUgraph child = NULL;
                        if (REAL(cuGraphChildGraphNodeGetGraph, nodes[i], &child) == CUDA_SUCCESS && child)
                                r = graph_need(child, need, c, depth + 1);
                }
        }
        free(nodes);
        return r;
}

static inline uint64_t graph_key(CUgraphExec e, unsigned li) {
        return (uint64_t)(uintptr_t)e << 4 | li;
}

#define GRAPH_INSTANTIATE(call, pexec, graph)                                                                      \
        do {                                                                                                       \
                ENTER();                                                                                           \
                if (g.mode != GS_MODE_LIMITED || NESTED || !(pexec) || !g.any_mem)                                 \
                        return call;                                                                               \
                uint64_t need_[GS_MAX_DEVICES] = { 0 }, add_[GS_MAX_DEVICES] = { 0 };                              \
                struct graph_carry carry_ = { 0 };                                                                 \
                unsigned charged_ = 0;                                                                             \
                (void)GUARD(graph_need(graph, need_, &carry_, 0)); /* the driver reports a bad graph */            \
                for (unsigned i_ = 0; i_ < GS_MAX_DEVICES; i_++)   /* what capture charged is not charged again */ \
                        add_[i_] = need_[i_] > carry_.bytes[i_] ? need_[i_] - carry_.bytes[i_] : 0;                \
                for (; charged_ < g.limits.n_devices; charged_++)                                                  \
                        if (add_[charged_] && !charge((int)charged_, add_[charged_]))                              \
                                break;                                                                             \
                CUresult r_ = charged_ < g.limits.n_devices ? CUDA_ERROR_OUT_OF_MEMORY : GUARD(call);              \
                if (r_ != CUDA_SUCCESS)                                                                            \
                        carry_restore(&carry_);                                                                    \
                free(carry_.e);                                                                                    \
                for (unsigned li_ = 0; li_ < g.limits.n_devices; li_++) {                                          \
                        if (!need_[li_])                                                                           \
                                continue;                                                                          \
                        if (r_ != CUDA_SUCCESS) {                                                                  \
                                if (li_ < charged_)                                                                \
                                        refund((int)li_, add_[li_]);                                               \
                                continue;                                                                          \
                        }                                                                                          \
                        /* A full table keeps the charge until the process ends (never less). */                   \
                        (void)gs_table_insert(GS_TAB_GRAPH, graph_key(*(pexec), li_), need_[li_], li_, 0);         \
                        __atomic_add_fetch(&g.proc.graph_live[li_], need_[li_], __ATOMIC_ACQ_REL);                 \
                }                                                                                                  \
                return r_;                                                                                         \
        } while (0)

CUresult gs_w_cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
                                 size_t bufferSize) {
        GRAPH_INSTANTIATE(REAL(cuGraphInstantiate, phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize),
                          phGraphExec, hGraph);
}

CUresult gs_w_cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
                                    size_t bufferSize) {
        GRAPH_INSTANTIATE(REAL(cuGraphInstantiate_v2, phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize),
                          phGraphExec, hGraph);
}

CUresult gs_w_cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags) {
        GRAPH_INSTANTIATE(REAL(cuGraphInstantiateWithFlags, phGraphExec, hGraph, flags), phGraphExec, hGraph);
}

CUresult gs_w_cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams) {
        GRAPH_INSTANTIATE(REAL(cuGraphInstantiateWithParams, phGraphExec, hGraph, instantiateParams), phGraphExec,
                          hGraph);
}

CUresult gs_w_cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams) {
        GRAPH_INSTANTIATE(REAL(cuGraphInstantiateWithParams_ptsz, phGraphExec, hGraph, instantiateParams), phGraphExec,
                          hGraph);
}

CUresult gs_w_cuGraphExecDestroy(CUgraphExec hGraphExec) {
        ENTER();
        if (g.mode != GS_MODE_LIMITED || NESTED || !g.any_mem)
                return REAL(cuGraphExecDestroy, hGraphExec);
        CUresult r = GUARD(REAL(cuGraphExecDestroy, hGraphExec));
        if (r != CUDA_SUCCESS)
                return r;
        for (unsigned li = 0; li < g.limits.n_devices; li++) {
                uint64_t bytes;
                unsigned d;
                if (gs_table_take(GS_TAB_GRAPH, graph_key(hGraphExec, li), &bytes, &d) < 0)
                        continue;
                /* Still reserved by the driver until trimmed: the charge stays, as retained graph memory. */
                __atomic_add_fetch(&g.proc.graph_retained[li], bytes, __ATOMIC_ACQ_REL);
                __atomic_sub_fetch(&g.proc.graph_live[li], bytes, __ATOMIC_ACQ_REL);
        }
        return r;
}

CUresult gs_w_cuDeviceGraphMemTrim(CUdevice device) {
        ENTER();
        CUresult r = GUARD(REAL(cuDeviceGraphMemTrim, device));
        if (r == CUDA_SUCCESS && g.mode == GS_MODE_LIMITED && !NESTED) {
                int li = mem_li(li_of_ordinal(device));
                if (li >= 0 && holds_unbacked(li))
                        settle(li);
        }
        return r;
}

/* ---- wrappers: memory the driver takes for context limits and loaded code ----
 * Neither is an allocation the application sees, yet each takes device memory: a context's malloc heap,
 * stack and printf FIFO (cuCtxSetLimit, up to GiBs), a module's or library's code and __device__ globals.
 * Both are rare calls. */

/* Threads a device keeps resident at once (SMs × threads per SM): what a per-thread stack size costs.
 * Unknown: the largest current GPU's (132 × 2048), so a stack is never charged for less. */
static uint64_t resident_threads(void) {
        CUdevice d;
        int sms = 0, per_sm = 0;
        if (real.cuCtxGetDevice && real.cuDeviceGetAttribute && real.cuCtxGetDevice(&d) == CUDA_SUCCESS &&
            real.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d) == CUDA_SUCCESS &&
            real.cuDeviceGetAttribute(&per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, d) == CUDA_SUCCESS &&
            sms > 0 && per_sm > 0)
                return (uint64_t)sms * (uint64_t)per_sm;
        return 132u * 2048u;
}

/* Device memory a limit's value reserves; the caller only asks for the three limits that reserve any. */
static uint64_t limit_cost(CUlimit kind, uint64_t value, uint64_t threads) {
        return kind == CU_LIMIT_STACK_SIZE ? mul_sat(value, threads) : value;
}

/*
 * cuCtxSetLimit: the current context's malloc heap (CU_LIMIT_MALLOC_HEAP_SIZE), printf FIFO
 * (CU_LIMIT_PRINTF_FIFO_SIZE) and per-thread stack (CU_LIMIT_STACK_SIZE, × resident threads) are device
 * memory. What a context reserves at its default values is part of the context's own cost (context=); a
 * change is charged by the difference it makes (new − current value, as cuCtxGetLimit says), refused with
 * OUT_OF_MEMORY when it does not fit, given back when the limit is lowered again and when the context goes.
 */
CUresult gs_w_cuCtxSetLimit(CUlimit limit, size_t value) {
        ENTER();
        bool costs = limit == CU_LIMIT_MALLOC_HEAP_SIZE || limit == CU_LIMIT_STACK_SIZE ||
                     limit == CU_LIMIT_PRINTF_FIFO_SIZE;
        int li = g.mode == GS_MODE_LIMITED && !NESTED && costs ? mem_li(current_li()) : -1;
        uint64_t ctx = li >= 0 ? current_ctx() : 0;
        size_t old = 0;
        if (!ctx || REAL(cuCtxGetLimit, &old, limit) != CUDA_SUCCESS)
                return REAL(cuCtxSetLimit, limit, value); /* not limited, or the driver reports the error */
        INTERNAL_BEGIN();
        gs_lock(&g.ctx_lock);
        uint64_t key = ctx << 2 | (uint64_t)limit, had = 0,
                 threads = limit == CU_LIMIT_STACK_SIZE ? resident_threads() : 1;
        unsigned d;
        if (gs_table_take(GS_TAB_LIMIT, key, &had, &d) < 0)
                had = 0;
        uint64_t from = limit_cost(limit, old, threads), to = limit_cost(limit, value, threads);
        /* bytes beyond the defaults after the change: had + (to − from), never below 0 */
        uint64_t want = to >= from ? (had + (to - from) < had ? UINT64_MAX : had + (to - from))
                                   : (from - to >= had ? 0 : had - (from - to));
        CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
        if (want <= had || charge(li, want - had)) {
                r = REAL(cuCtxSetLimit, limit, value);
                if (r != CUDA_SUCCESS && want > had)
                        refund(li, want - had);
                else if (r == CUDA_SUCCESS && want < had)
                        refund(li, had - want);
        }
        uint64_t keep = r == CUDA_SUCCESS ? want : had;
        /* A full table keeps the charge until the process ends (never less). */
        if (keep)
                (void)gs_table_insert(GS_TAB_LIMIT, key, keep, (unsigned)li, ctx);
        gs_unlock(&g.ctx_lock);
        INTERNAL_END();
        return r;
}

/*
 * Module and library loads: no API tells what a load takes on the device (code, constant banks,
 * __device__ globals), so it is measured around the load (gs_took_*): the driver's own per-process figure
 * through NVML where it knows this process — a neighbour's allocation during the load is not billed here —
 * else the device's used or free memory (then a neighbour's is). Loads of a process are serialised. What
 * it took is charged once the load returns; a load that does not fit is unloaded again and refused with
 * OUT_OF_MEMORY. Modules go with their context (ctx_gone), libraries (context-independent) at
 * cuLibraryUnload. Code the driver loads later (lazy loading) is what gs_reconcile finds.
 */
#define CODE_LOAD(call, phandle, undo, ctx_expr)                                                          \
        do {                                                                                              \
                ENTER();                                                                                  \
                int li_ = g.mode == GS_MODE_LIMITED && !NESTED && (phandle) ? mem_li(current_li()) : -1;  \
                if (li_ < 0)                                                                              \
                        return call;                                                                      \
                const char *uuid_ = gs_uuid_of(li_);                                                      \
                struct gs_took t_;                                                                        \
                INTERNAL_BEGIN();                                                                         \
                gs_lock(&g.code_lock);                                                                    \
                gs_took_begin(uuid_, true, &t_);                                                          \
                CUresult r_ = call;                                                                       \
                uint64_t took_ = r_ == CUDA_SUCCESS ? gs_took_end(uuid_, true, &t_) : 0;                  \
                gs_unlock(&g.code_lock);                                                                  \
                INTERNAL_END();                                                                           \
                if (r_ != CUDA_SUCCESS)                                                                   \
                        return r_;                                                                        \
                if (!gs_charge_measured(li_, took_)) {                                                    \
                        (void)GUARD(undo);                                                                \
                        return CUDA_ERROR_OUT_OF_MEMORY;                                                  \
                }                                                                                         \
                if (gs_table_insert(GS_TAB_CODE, (uint64_t)(uintptr_t) * (phandle), took_, (unsigned)li_, \
                                    (ctx_expr)) < 0) {                                                    \
                        refund(li_, took_);                                                               \
                        (void)GUARD(undo);                                                                \
                        return CUDA_ERROR_OUT_OF_MEMORY;                                                  \
                }                                                                                         \
                return CUDA_SUCCESS;                                                                      \
        } while (0)

CUresult gs_w_cuModuleLoad(CUmodule *module, const char *fname) {
        CODE_LOAD(REAL(cuModuleLoad, module, fname), module, REAL(cuModuleUnload, *module), current_ctx());
}

CUresult gs_w_cuModuleLoadData(CUmodule *module, const void *image) {
        CODE_LOAD(REAL(cuModuleLoadData, module, image), module, REAL(cuModuleUnload, *module), current_ctx());
}

CUresult gs_w_cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions, CUjit_option *options,
                                 void **optionValues) {
        CODE_LOAD(REAL(cuModuleLoadDataEx, module, image, numOptions, options, optionValues), module,
                  REAL(cuModuleUnload, *module), current_ctx());
}

CUresult gs_w_cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin) {
        CODE_LOAD(REAL(cuModuleLoadFatBinary, module, fatCubin), module, REAL(cuModuleUnload, *module), current_ctx());
}

CUresult gs_w_cuModuleUnload(CUmodule hmod) {
        TRACKED_FREE(GS_TAB_CODE, (uintptr_t)hmod, REAL(cuModuleUnload, hmod));
}

CUresult gs_w_cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions, void **jitOptionsValues,
                                unsigned int numJitOptions, CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                unsigned int numLibraryOptions) {
        CODE_LOAD(REAL(cuLibraryLoadData, library, code, jitOptions, jitOptionsValues, numJitOptions, libraryOptions,
                       libraryOptionValues, numLibraryOptions),
                  library, REAL(cuLibraryUnload, *library), 0);
}

CUresult gs_w_cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                                    void **jitOptionsValues, unsigned int numJitOptions,
                                    CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                    unsigned int numLibraryOptions) {
        CODE_LOAD(REAL(cuLibraryLoadFromFile, library, fileName, jitOptions, jitOptionsValues, numJitOptions,
                       libraryOptions, libraryOptionValues, numLibraryOptions),
                  library, REAL(cuLibraryUnload, *library), 0);
}

CUresult gs_w_cuLibraryUnload(CUlibrary library) {
        TRACKED_FREE(GS_TAB_CODE, (uintptr_t)library, REAL(cuLibraryUnload, library));
}

/* ---- wrappers: memory queries ---- */

/* The container's view of a device: total = min(limit, physical), free = min(limit - used, physical free). */
static void virtual_info(int li, uint64_t real_free, uint64_t real_total, uint64_t *ret_free, uint64_t *ret_total) {
        uint64_t limit = g.limits.dev[li].memory_bytes;
        uint64_t total = limit < real_total ? limit : real_total;
        sweep_dead_slots(); /* a dead process's memory is free again */
        uint64_t used = gs_region_used(g.region, (unsigned)li);
        uint64_t free = used >= total ? 0 : total - used;
        *ret_free = free < real_free ? free : real_free;
        *ret_total = total;
}

/* The container's view of the current device's memory, for both cuMemGetInfo ABIs: false when no
 * memory limit applies (the driver's answer stands). */
/* Inlined: as a call it cost cuMemGetInfo ~26 instructions (callgrind, docs/BENCHMARKS.md). */
static inline __attribute__((always_inline)) bool limited_info(uint64_t real_free, uint64_t real_total,
                                                               uint64_t *ret_free, uint64_t *ret_total) {
        if (g.mode != GS_MODE_LIMITED)
                return false;
        int li = mem_li(current_li());
        if (li < 0)
                return false;
        if (UNLIKELY(holds_unbacked(li)))
                settle(li);
        gs_reconcile(li); /* what no hook saw (lazily loaded code), at most every 100 ms */
        virtual_info(li, real_free, real_total, ret_free, ret_total);
        return true;
}

CUresult gs_w_cuMemGetInfo_v2(size_t *free, size_t *total) {
        ENTER();
        if (NESTED)
                return REAL(cuMemGetInfo_v2, free, total);
        CUresult r = GUARD(REAL(cuMemGetInfo_v2, free, total));
        uint64_t f, t;
        if (r == CUDA_SUCCESS && free && total && limited_info(*free, *total, &f, &t)) {
                *free = (size_t)f;
                *total = (size_t)t;
        }
        return r;
}

CUresult gs_w_cuMemGetInfo(unsigned int *free, unsigned int *total) {
        ENTER();
        if (NESTED)
                return REAL(cuMemGetInfo, free, total);
        CUresult r = GUARD(REAL(cuMemGetInfo, free, total));
        uint64_t f, t;
        if (r == CUDA_SUCCESS && free && total && limited_info(*free, *total, &f, &t)) {
                *free = (unsigned int)(f > UINT_MAX ? UINT_MAX : f);
                *total = (unsigned int)(t > UINT_MAX ? UINT_MAX : t);
        }
        return r;
}

CUresult gs_w_cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
        ENTER();
        if (NESTED)
                return REAL(cuDeviceTotalMem_v2, bytes, dev);
        CUresult r = GUARD(REAL(cuDeviceTotalMem_v2, bytes, dev));
        if (r != CUDA_SUCCESS || g.mode != GS_MODE_LIMITED || !bytes)
                return r;
        int li = mem_li(li_of_ordinal(dev));
        if (li >= 0 && g.limits.dev[li].memory_bytes < *bytes)
                *bytes = (size_t)g.limits.dev[li].memory_bytes;
        return r;
}

CUresult gs_w_cuDeviceTotalMem(unsigned int *bytes, CUdevice dev) {
        ENTER();
        if (NESTED)
                return REAL(cuDeviceTotalMem, bytes, dev);
        CUresult r = GUARD(REAL(cuDeviceTotalMem, bytes, dev));
        if (r != CUDA_SUCCESS || g.mode != GS_MODE_LIMITED || !bytes)
                return r;
        int li = mem_li(li_of_ordinal(dev));
        if (li >= 0 && g.limits.dev[li].memory_bytes < *bytes)
                *bytes = (unsigned int)g.limits.dev[li].memory_bytes;
        return r;
}

bool gs_memory_view(const char *uuid, uint64_t *ret_limit, uint64_t *ret_used) {
        ensure_init();
        if (g.mode != GS_MODE_LIMITED || !uuid)
                return false;
        int li = -1;
        for (unsigned i = 0; i < g.limits.n_devices && li < 0; i++)
                if (gs_uuid_equal(g.limits.dev[i].uuid, uuid))
                        li = (int)i;
        /* Entries without a UUID: through the CUDA ordinal that has this UUID, once the devices are mapped. */
        if (li < 0 && __atomic_load_n(&g.mapped, __ATOMIC_ACQUIRE))
                for (unsigned d = 0; d < g.n_ordinals && li < 0; d++)
                        if (gs_uuid_equal(g.uuid[d], uuid))
                                li = g.dev_li[d];
        if (mem_li(li) < 0)
                return false;
        gs_reconcile(li);
        sweep_dead_slots(); /* a dead process's memory is free again */
        *ret_limit = g.limits.dev[li].memory_bytes;
        *ret_used = gs_region_used(g.region, (unsigned)li);
        return true;
}

bool gs_container_host_pid(unsigned pid) {
        if (g.mode != GS_MODE_LIMITED || !pid)
                return false;
        for (unsigned i = 0; i < GS_REGION_SLOTS; i++) {
                const struct gs_region_slot *s = &g.region->slot[i];
                if (GS_OWNER_STATE(__atomic_load_n(&s->owner, __ATOMIC_ACQUIRE)) == GS_SLOT_LIVE &&
                    __atomic_load_n(&s->host_pid, __ATOMIC_RELAXED) == pid)
                        return true;
        }
        return false;
}

/* ---- exports ---- */

GS_HOOKS_MEMORY(GS_EXPORT)
