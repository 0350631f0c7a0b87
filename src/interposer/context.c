/* SPDX-License-Identifier: Apache-2.0 */
/*
 * context — contexts charged against the memory limit: the primary context while this process holds it
 * retained, created and green contexts while they live (context= in the limits file, docs/interposer.md);
 * when a context goes, the driver frees what was allocated in it and so does the accounting (ctx_gone).
 * The first context on a device with a compute share also learns this process's host PID (throttle.c).
 */
#include "interposer/state.h" /* first: cuda.h with every variant, the glibc floor */

#include <string.h>

#include "interposer/throttle.h"

/* ---- wrappers: contexts ----
 * A context costs device memory the application never asked for (context= in the limits file). The
 * primary context is charged while this process holds it retained, every created context while it lives.
 * Context calls are rare: a process-local mutex is fine here. */

/* The driver destroyed ctx and everything allocated in it: stop counting those bytes. */
static void ctx_gone(CUcontext ctx) {
        if (g.mode != GS_MODE_LIMITED || !ctx)
                return;
        uint64_t bytes[GS_TAB_MAX_DEV] = { 0 };
        gs_table_take_ctx(GS_TAB_PTR, (uint64_t)(uintptr_t)ctx, bytes);
        gs_table_take_ctx(GS_TAB_ARRAY, (uint64_t)(uintptr_t)ctx, bytes);
        gs_table_take_ctx(GS_TAB_EXT, (uint64_t)(uintptr_t)ctx, bytes);
        gs_table_take_ctx(GS_TAB_LIMIT, (uint64_t)(uintptr_t)ctx, bytes);
        gs_table_take_ctx(GS_TAB_CODE, (uint64_t)(uintptr_t)ctx, bytes);
        uint64_t pooled[GS_TAB_MAX_DEV] = { 0 };
        gs_table_take_ctx(GS_TAB_ASYNC, (uint64_t)(uintptr_t)ctx, pooled);
        for (unsigned li = 0; li < GS_TAB_MAX_DEV; li++) {
                if (bytes[li])
                        refund((int)li, bytes[li]);
                give_cached((int)li, pooled[li]); /* pools belong to the device: cached until settled */
        }
}

static int ctx_li(CUdevice dev) {
        if (g.mode != GS_MODE_LIMITED || nested)
                return -1;
        int li = mem_li(li_of_ordinal(dev));
        return li >= 0 && g.limits.dev[li].context_bytes ? li : -1;
}

/* A compute share is enforced on dev and this process's host PID is not known yet. */
static bool want_host_pid(CUdevice dev) {
        int li = li_of_ordinal(dev);
        return li >= 0 && g.limits.dev[li].core_percent < 100 && have_slot() &&
               !__atomic_load_n(&g.region->slot[g.slot].host_pid, __ATOMIC_RELAXED);
}

static bool ctx_charge(int li) {
        /* li < 0: the context is not charged */
        return li < 0 || charge(li, g.limits.dev[li].context_bytes);
}

static void ctx_refund(int li) {
        if (li >= 0)
                refund(li, g.limits.dev[li].context_bytes);
}

CUresult gs_w_cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
        ENTER();
        if (g.mode != GS_MODE_LIMITED || nested || dev < 0 || dev >= GS_MAX_ORDINALS)
                return REAL(cuDevicePrimaryCtxRetain, pctx, dev);
        int li = ctx_li(dev); /* -1: references counted, nothing charged */
        pthread_mutex_lock(&g.ctx_lock);
        bool first = g.proc.primary_refs[dev] == 0;
        CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
        if (!first || ctx_charge(li)) {
                struct gs_pidset before = { 0 };
                bool learn = first && want_host_pid(dev);
                if (learn)
                        gs_hostpid_before(g.uuid[dev], &before);
                r = GUARD(REAL(cuDevicePrimaryCtxRetain, pctx, dev));
                if (learn && r == CUDA_SUCCESS)
                        gs_hostpid_after(g.region, g.slot, g.uuid[dev], &before);
                if (r == CUDA_SUCCESS) {
                        g.proc.primary_refs[dev]++;
                        g.proc.primary_ctx[dev] = *pctx;
                } else if (first)
                        ctx_refund(li);
        }
        pthread_mutex_unlock(&g.ctx_lock);
        return r;
}

/* After the driver released (or reset: all references at once) device dev's primary context. When the
 * last reference goes, the driver destroys the context with its allocations. */
static void primary_dropped(CUdevice dev, bool all) {
        if (g.mode != GS_MODE_LIMITED || nested || dev < 0 || dev >= GS_MAX_ORDINALS)
                return;
        int li = ctx_li(dev);
        pthread_mutex_lock(&g.ctx_lock);
        bool gone = false;
        if (g.proc.primary_refs[dev]) {
                g.proc.primary_refs[dev] = all ? 0 : g.proc.primary_refs[dev] - 1;
                gone = !g.proc.primary_refs[dev];
                if (gone)
                        ctx_refund(li);
        }
        CUcontext c = g.proc.primary_ctx[dev];
        if (gone)
                g.proc.primary_ctx[dev] = NULL;
        pthread_mutex_unlock(&g.ctx_lock);
        if (gone)
                ctx_gone(c);
}

#define PRIMARY_DROP(call, dev, all)               \
        do {                                       \
                ENTER();                           \
                CUresult r_ = GUARD(call);         \
                if (r_ == CUDA_SUCCESS)            \
                        primary_dropped(dev, all); \
                return r_;                         \
        } while (0)

CUresult gs_w_cuDevicePrimaryCtxRelease(CUdevice dev) {
        PRIMARY_DROP(REAL(cuDevicePrimaryCtxRelease, dev), dev, false);
}

CUresult gs_w_cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
        PRIMARY_DROP(REAL(cuDevicePrimaryCtxRelease_v2, dev), dev, false);
}

CUresult gs_w_cuDevicePrimaryCtxReset(CUdevice dev) {
        PRIMARY_DROP(REAL(cuDevicePrimaryCtxReset, dev), dev, true);
}

CUresult gs_w_cuDevicePrimaryCtxReset_v2(CUdevice dev) {
        PRIMARY_DROP(REAL(cuDevicePrimaryCtxReset_v2, dev), dev, true);
}

/* Charge, create, remember (or refund). The context table is full: created, not charged (documented). */
#define CTX_CREATE(call, pctx, dev)                                                        \
        do {                                                                               \
                ENTER();                                                                   \
                if (g.mode != GS_MODE_LIMITED || nested)                                   \
                        return call;                                                       \
                int li_ = ctx_li(dev);                                                     \
                if (!ctx_charge(li_))                                                      \
                        return CUDA_ERROR_OUT_OF_MEMORY;                                   \
                struct gs_pidset before_ = { 0 };                                          \
                bool learn_ = (dev) >= 0 && (dev) < GS_MAX_ORDINALS && want_host_pid(dev); \
                if (learn_)                                                                \
                        gs_hostpid_before(g.uuid[dev], &before_);                          \
                CUresult r_ = GUARD(call);                                                 \
                if (learn_ && r_ == CUDA_SUCCESS)                                          \
                        gs_hostpid_after(g.region, g.slot, g.uuid[dev], &before_);         \
                if (li_ < 0)                                                               \
                        return r_;                                                         \
                if (r_ != CUDA_SUCCESS) {                                                  \
                        ctx_refund(li_);                                                   \
                        return r_;                                                         \
                }                                                                          \
                pthread_mutex_lock(&g.ctx_lock);                                           \
                size_t k_ = 0;                                                             \
                while (k_ < ELEMENTS(g.proc.created) && g.proc.created[k_].ctx)            \
                        k_++;                                                              \
                if (k_ < ELEMENTS(g.proc.created))                                         \
                        g.proc.created[k_].ctx = *(pctx), g.proc.created[k_].li = li_;     \
                else                                                                       \
                        ctx_refund(li_);                                                   \
                pthread_mutex_unlock(&g.ctx_lock);                                         \
                return r_;                                                                 \
        } while (0)

CUresult gs_w_cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) {
        CTX_CREATE(REAL(cuCtxCreate, pctx, flags, dev), pctx, dev);
}

CUresult gs_w_cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
        CTX_CREATE(REAL(cuCtxCreate_v2, pctx, flags, dev), pctx, dev);
}

CUresult gs_w_cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int numParams, unsigned int flags,
                             CUdevice dev) {
        CTX_CREATE(REAL(cuCtxCreate_v3, pctx, params, numParams, flags, dev), pctx, dev);
}

CUresult gs_w_cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev) {
        CTX_CREATE(REAL(cuCtxCreate_v4, pctx, params, flags, dev), pctx, dev);
}

static CUresult ctx_destroy(CUresult (*destroy)(CUcontext), CUcontext ctx) {
        ENTER();
        if (!destroy)
                return CUDA_ERROR_NOT_FOUND;
        if (g.mode != GS_MODE_LIMITED || nested || !ctx)
                return destroy(ctx);
        CUresult r = GUARD(destroy(ctx));
        if (r != CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&g.ctx_lock);
        for (size_t k = 0; k < ELEMENTS(g.proc.created); k++)
                if (g.proc.created[k].ctx == ctx) {
                        ctx_refund(g.proc.created[k].li);
                        g.proc.created[k].ctx = NULL;
                        break;
                }
        pthread_mutex_unlock(&g.ctx_lock);
        ctx_gone(ctx);
        return r;
}

CUresult gs_w_cuCtxDestroy(CUcontext ctx) {
        return ctx_destroy(real.cuCtxDestroy, ctx);
}

CUresult gs_w_cuCtxDestroy_v2(CUcontext ctx) {
        return ctx_destroy(real.cuCtxDestroy_v2, ctx);
}

/* ---- wrappers: green contexts (charged like other contexts) ---- */

CUresult gs_w_cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags) {
        ENTER();
        if (g.mode != GS_MODE_LIMITED || nested)
                return REAL(cuGreenCtxCreate, phCtx, desc, dev, flags);
        int li = ctx_li(dev);
        if (!ctx_charge(li))
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = GUARD(REAL(cuGreenCtxCreate, phCtx, desc, dev, flags));
        if (li < 0)
                return r;
        if (r != CUDA_SUCCESS) {
                ctx_refund(li);
                return r;
        }
        pthread_mutex_lock(&g.ctx_lock);
        size_t k = 0;
        while (k < ELEMENTS(g.proc.created) && g.proc.created[k].ctx)
                k++;
        if (k < ELEMENTS(g.proc.created))
                g.proc.created[k].ctx = (CUcontext)(void *)*phCtx,
                g.proc.created[k].li = li; /* keyed by the green handle */
        else
                ctx_refund(li);
        pthread_mutex_unlock(&g.ctx_lock);
        return r;
}

CUresult gs_w_cuGreenCtxDestroy(CUgreenCtx hCtx) {
        ENTER();
        if (g.mode != GS_MODE_LIMITED || nested || !hCtx)
                return REAL(cuGreenCtxDestroy, hCtx);
        CUcontext c = NULL; /* the context allocations made in it were recorded with */
        if (GUARD(REAL(cuCtxFromGreenCtx, &c, hCtx)) != CUDA_SUCCESS)
                c = NULL;
        CUresult r = GUARD(REAL(cuGreenCtxDestroy, hCtx));
        if (r != CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&g.ctx_lock);
        for (size_t k = 0; k < ELEMENTS(g.proc.created); k++)
                if (g.proc.created[k].ctx == (CUcontext)(void *)hCtx) {
                        ctx_refund(g.proc.created[k].li);
                        g.proc.created[k].ctx = NULL;
                        break;
                }
        pthread_mutex_unlock(&g.ctx_lock);
        ctx_gone(c);
        return r;
}

/* ---- exports ---- */

GS_HOOKS_CONTEXT(GS_EXPORT)
