/* SPDX-License-Identifier: Apache-2.0 */
/*
 * launch — the compute share: every kernel and graph launch on a device with a share below 100 % goes
 * through the limiter of throttle.c first (one relaxed add, a vDSO clock read and a CAS on the fast
 * path; a sleep only when the launch must wait).
 */
#include "interposer/state.h" /* first: cuda.h with every variant, the glibc floor */

#include "interposer/throttle.h"

/* ---- wrappers: launches ---- */

static inline void before_launch(const void *ra) {
        if (LIKELY(!g.any_core) || g.mode != GS_MODE_LIMITED || driver_own_call(ra))
                return;
        int li = current_li();
        if (li < 0 || g.limits.dev[li].core_percent >= 100)
                return;
        /* without a slot (none free) the launch is not counted, but still obeys the container's limiter */
        gs_throttle_launch(g.region, have_slot() ? g.slot : GS_NO_SLOT, (unsigned)li);
}

#define LAUNCH(call)                   \
        do {                           \
                ENTER();               \
                before_launch(gs_ra_); \
                return GUARD(call);    \
        } while (0)

CUresult gs_w_cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                             unsigned int by, unsigned int bz, unsigned int shm, CUstream s, void **params,
                             void **extra) {
        LAUNCH(REAL(cuLaunchKernel, f, gx, gy, gz, bx, by, bz, shm, s, params, extra));
}

CUresult gs_w_cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                  unsigned int by, unsigned int bz, unsigned int shm, CUstream s, void **params,
                                  void **extra) {
        LAUNCH(REAL(cuLaunchKernel_ptsz, f, gx, gy, gz, bx, by, bz, shm, s, params, extra));
}

CUresult gs_w_cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra) {
        LAUNCH(REAL(cuLaunchKernelEx, config, f, params, extra));
}

CUresult gs_w_cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params, void **extra) {
        LAUNCH(REAL(cuLaunchKernelEx_ptsz, config, f, params, extra));
}

CUresult gs_w_cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shm, CUstream s,
                                        void **params) {
        LAUNCH(REAL(cuLaunchCooperativeKernel, f, gx, gy, gz, bx, by, bz, shm, s, params));
}

CUresult gs_w_cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int shm,
                                             CUstream s, void **params) {
        LAUNCH(REAL(cuLaunchCooperativeKernel_ptsz, f, gx, gy, gz, bx, by, bz, shm, s, params));
}

CUresult gs_w_cuGraphLaunch(CUgraphExec hGraph, CUstream hStream) {
        LAUNCH(REAL(cuGraphLaunch, hGraph, hStream));
}

CUresult gs_w_cuGraphLaunch_ptsz(CUgraphExec hGraph, CUstream hStream) {
        LAUNCH(REAL(cuGraphLaunch_ptsz, hGraph, hStream));
}

CUresult gs_w_cuLaunch(CUfunction f) {
        LAUNCH(REAL(cuLaunch, f));
}

CUresult gs_w_cuLaunchGrid(CUfunction f, int grid_width, int grid_height) {
        LAUNCH(REAL(cuLaunchGrid, f, grid_width, grid_height));
}

CUresult gs_w_cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height, CUstream hStream) {
        LAUNCH(REAL(cuLaunchGridAsync, f, grid_width, grid_height, hStream));
}

/* ---- exports ---- */

GS_HOOKS_LAUNCH(GS_EXPORT)
