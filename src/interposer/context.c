/* SPDX-License-Identifier: Apache-2.0 */
/*
 * context — contexts charged against the memory limit: the primary context while this process holds it
 * retained, created and green contexts while they live; when a context goes, the driver frees what was
 * allocated in it and so does the accounting (ctx_gone). What a context costs is what the driver took for it,
 * measured around its creation with NVML's own figures (gs_took_*), at least context= of the limits file
 * (charged before the driver is asked, so a context that cannot fit even that is never made); a context whose
 * measured cost does not fit is destroyed again and refused. The first context on a limited device also
 * learns this process's host PID (nvml-view.c), which the measurements and the compute share need.
 */
#include "interposer/state.h" /* first: cuda.h with every variant, the glibc floor */

#include <string.h>

#include "interposer/nvml-view.h"

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
        if (g.mode != GS_MODE_LIMITED)
                return -1;
        int li = mem_li(li_of_ordinal(dev));
        return li >= 0 && g.limits.dev[li].context_bytes ? li : -1;
}

/* dev is limited and this process's host PID is not known yet. */
static bool want_host_pid(CUdevice dev) {
        int li = li_of_ordinal(dev);
        return li >= 0 && (g.limits.dev[li].core_percent < 100 || g.limits.dev[li].memory_bytes) && have_slot() &&
               !__atomic_load_n(&g.region->slot[g.slot].host_pid, __ATOMIC_RELAXED);
}

/* Around a context's creation on dev: the readings for its cost and for learning the host PID. */
struct ctx_watch {
        int mli; /* memory-limited index of dev, -1: not measured */
        bool learn;
        struct gs_pidset before;
        struct gs_took took;
};

static void watch_begin(CUdevice dev, struct ctx_watch *w) {
        w->mli = dev >= 0 && dev < GS_MAX_ORDINALS ? mem_li(li_of_ordinal(dev)) : -1;
        w->learn = dev >= 0 && dev < GS_MAX_ORDINALS && want_host_pid(dev);
        w->before.valid = false;
        INTERNAL_BEGIN();
        if (w->learn)
                gs_view_processes(g.uuid[dev], &w->before);
        if (w->mli >= 0)
                gs_took_begin(g.uuid[dev], false, &w->took);
        INTERNAL_END();
}

/* After the driver made the context: learn the host PID, and charge what the context took beyond context=.
 * false when that does not fit (the caller destroys the context and refuses). *ret_extra: what was charged. */
static bool watch_end(CUdevice dev, const struct ctx_watch *w, uint64_t *ret_extra) {
        *ret_extra = 0;
        INTERNAL_BEGIN();
        if (w->learn) {
                struct gs_pidset now;
                gs_view_processes(g.uuid[dev], &now);
                gs_view_learn_host_pid(g.region, g.slot, &w->before, &now);
        }
        uint64_t took = w->mli >= 0 ? gs_took_end(g.uuid[dev], false, &w->took) : 0;
        INTERNAL_END();
        uint64_t pre = w->mli >= 0 ? g.limits.dev[w->mli].context_bytes : 0;
        if (took <= pre)
                return true;
        if (!gs_charge_measured(w->mli, took - pre))
                return false;
        *ret_extra = took - pre;
        return true;
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
        if (g.mode != GS_MODE_LIMITED || NESTED || dev < 0 || dev >= GS_MAX_ORDINALS)
                return REAL(cuDevicePrimaryCtxRetain, pctx, dev);
        int li = ctx_li(dev); /* -1: references counted, nothing charged */
        gs_lock(&g.ctx_lock);
        bool first = g.proc.primary_refs[dev] == 0;
        CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
        if (!first || ctx_charge(li)) {
                struct ctx_watch w = { .mli = -1 };
                uint64_t extra = 0;
                if (first)
                        watch_begin(dev, &w);
                r = GUARD(REAL(cuDevicePrimaryCtxRetain, pctx, dev));
                if (r == CUDA_SUCCESS && first && !watch_end(dev, &w, &extra)) {
                        (void)GUARD(REAL(cuDevicePrimaryCtxRelease_v2, dev)); /* its measured cost does not fit */
                        r = CUDA_ERROR_OUT_OF_MEMORY;
                }
                if (r == CUDA_SUCCESS) {
                        g.proc.primary_refs[dev]++;
                        g.proc.primary_ctx[dev] = *pctx;
                        if (first)
                                g.proc.primary_measured[dev] = extra;
                } else if (first)
                        ctx_refund(li);
        }
        gs_unlock(&g.ctx_lock);
        return r;
}

/* After the driver released (or reset: all references at once) device dev's primary context. When the
 * last reference goes, the driver destroys the context with its allocations. */
static void primary_dropped(CUdevice dev, bool all, const void *ra) {
        if (g.mode != GS_MODE_LIMITED || driver_own_call(ra) || dev < 0 || dev >= GS_MAX_ORDINALS)
                return;
        int li = ctx_li(dev);
        gs_lock(&g.ctx_lock);
        bool gone = false;
        if (g.proc.primary_refs[dev]) {
                g.proc.primary_refs[dev] = all ? 0 : g.proc.primary_refs[dev] - 1;
                gone = !g.proc.primary_refs[dev];
                if (gone) {
                        ctx_refund(li);
                        refund(mem_li(li_of_ordinal(dev)), g.proc.primary_measured[dev]);
                        g.proc.primary_measured[dev] = 0;
                }
        }
        CUcontext c = g.proc.primary_ctx[dev];
        if (gone)
                g.proc.primary_ctx[dev] = NULL;
        gs_unlock(&g.ctx_lock);
        if (gone)
                ctx_gone(c);
}

#define PRIMARY_DROP(call, dev, all)                       \
        do {                                               \
                ENTER();                                   \
                CUresult r_ = GUARD(call);                 \
                if (r_ == CUDA_SUCCESS)                    \
                        primary_dropped(dev, all, gs_ra_); \
                return r_;                                 \
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

/* Charge context=, create, charge what the context measurably took beyond it (or destroy it again and refuse),
 * remember. The context table is full: created, not charged (documented). */
static CUresult ctx_created(CUresult r, CUcontext ctx, CUdevice dev, int li, const struct ctx_watch *w) {
        uint64_t extra = 0;
        if (r == CUDA_SUCCESS && !watch_end(dev, w, &extra)) {
                (void)GUARD(REAL(cuCtxDestroy_v2, ctx)); /* its measured cost does not fit */
                r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (r != CUDA_SUCCESS) {
                ctx_refund(li);
                return r;
        }
        if (li < 0 && !extra)
                return r;
        gs_lock(&g.ctx_lock);
        size_t k = 0;
        while (k < ELEMENTS(g.proc.created) && g.proc.created[k].ctx)
                k++;
        if (k < ELEMENTS(g.proc.created)) {
                g.proc.created[k].ctx = ctx;
                g.proc.created[k].li = li;
                g.proc.created[k].mli = w->mli;
                g.proc.created[k].measured = extra;
        } else {
                ctx_refund(li);
                refund(w->mli, extra);
        }
        gs_unlock(&g.ctx_lock);
        return r;
}

/* The creation is measured (watch_*): a callback's call inside it is measured with it (internal work). */
#define CTX_CREATE(call, pctx, dev)                                                         \
        do {                                                                                \
                ENTER();                                                                    \
                if (g.mode != GS_MODE_LIMITED || NESTED)                                    \
                        return call;                                                        \
                int li_ = ctx_li(dev);                                                      \
                if (!ctx_charge(li_))                                                       \
                        return CUDA_ERROR_OUT_OF_MEMORY;                                    \
                struct ctx_watch w_;                                                        \
                watch_begin(dev, &w_);                                                      \
                INTERNAL_BEGIN();                                                           \
                CUresult r_ = call;                                                         \
                INTERNAL_END();                                                             \
                return ctx_created(r_, r_ == CUDA_SUCCESS ? *(pctx) : NULL, dev, li_, &w_); \
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

static inline __attribute__((always_inline)) CUresult ctx_destroy(CUresult (*destroy)(CUcontext), CUcontext ctx) {
        ENTER();
        if (!destroy)
                return CUDA_ERROR_NOT_FOUND;
        if (g.mode != GS_MODE_LIMITED || NESTED || !ctx)
                return destroy(ctx);
        CUresult r = GUARD(destroy(ctx));
        if (r != CUDA_SUCCESS)
                return r;
        gs_lock(&g.ctx_lock);
        for (size_t k = 0; k < ELEMENTS(g.proc.created); k++)
                if (g.proc.created[k].ctx == ctx) {
                        ctx_refund(g.proc.created[k].li);
                        refund(g.proc.created[k].mli, g.proc.created[k].measured);
                        g.proc.created[k].measured = 0;
                        g.proc.created[k].ctx = NULL;
                        break;
                }
        gs_unlock(&g.ctx_lock);
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
        if (g.mode != GS_MODE_LIMITED || NESTED)
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
        gs_lock(&g.ctx_lock);
        size_t k = 0;
        while (k < ELEMENTS(g.proc.created) && g.proc.created[k].ctx)
                k++;
        if (k < ELEMENTS(g.proc.created))
                g.proc.created[k].ctx = (CUcontext)(void *)*phCtx, /* keyed by the green handle */
                        g.proc.created[k].li = li, g.proc.created[k].mli = -1, g.proc.created[k].measured = 0;
        else
                ctx_refund(li);
        gs_unlock(&g.ctx_lock);
        return r;
}

CUresult gs_w_cuGreenCtxDestroy(CUgreenCtx hCtx) {
        ENTER();
        if (g.mode != GS_MODE_LIMITED || NESTED || !hCtx)
                return REAL(cuGreenCtxDestroy, hCtx);
        CUcontext c = NULL; /* the context allocations made in it were recorded with */
        if (GUARD(REAL(cuCtxFromGreenCtx, &c, hCtx)) != CUDA_SUCCESS)
                c = NULL;
        CUresult r = GUARD(REAL(cuGreenCtxDestroy, hCtx));
        if (r != CUDA_SUCCESS)
                return r;
        gs_lock(&g.ctx_lock);
        for (size_t k = 0; k < ELEMENTS(g.proc.created); k++)
                if (g.proc.created[k].ctx == (CUcontext)(void *)hCtx) {
                        ctx_refund(g.proc.created[k].li);
                        g.proc.created[k].ctx = NULL;
                        break;
                }
        gs_unlock(&g.ctx_lock);
        ctx_gone(c);
        return r;
}

/* ---- exports ---- */

GS_HOOKS_CONTEXT(GS_EXPORT)
