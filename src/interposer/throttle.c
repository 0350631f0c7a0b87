/* SPDX-License-Identifier: Apache-2.0 */
/*
 * throttle — compute-share enforcement (design in throttle.h, docs/interposer.md).
 *
 * The launch path is: one relaxed atomic add (launch count), a vDSO clock read and one CAS on the
 * device's shared limiter; a syscall (clock_nanosleep) only when the launch must wait, i.e. when
 * the share is being used up. The controller runs in one background thread per process, started on
 * the first limited launch, with every signal blocked; it loads NVML itself (dlopen, RTLD_LOCAL).
 *
 * Must never: block a launch on a lock, call NVML from a launch, trust one noisy sample (steps are
 * smoothed and bounded).
 */
#include "interposer/compat.h" /* first: the glibc floor */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "interposer/interposer.h"
#include "interposer/region.h"
#include "interposer/nvml-view.h"
#include "interposer/throttle.h"
#include "nvml/nvml-abi.h"

#define MAX_SAMPLES 512u

static struct {
        struct gs_region *region;
        const struct gs_limits *limits;
        char uuid[GS_MAX_DEVICES][GS_UUID_MAX]; /* per limits index, as the driver reports it */
        int started;                            /* atomic: controller thread running */
} t;

void gs_throttle_setup(struct gs_region *r, const struct gs_limits *l, const int *dev_li,
                       const char (*uuid)[GS_UUID_MAX], unsigned n_ordinals) {
        t.region = r;
        t.limits = l;
        for (unsigned d = 0; d < n_ordinals; d++)
                if (dev_li[d] >= 0 && !t.uuid[dev_li[d]][0])
                        memcpy(t.uuid[dev_li[d]], uuid[d], GS_UUID_MAX);
}

void gs_throttle_atfork_child(void) {
        __atomic_store_n(&t.started, 0, __ATOMIC_RELEASE);
}

uint64_t gs_throttle_step(struct gs_ctl_window *w, uint64_t interval_ns, uint64_t dt_ns, uint64_t launches,
                          uint64_t util_milli, uint64_t target_milli) {
        if (dt_ns == 0 || target_milli == 0)
                return interval_ns; /* nothing learned */
        w->busy_ns += (uint64_t)((unsigned __int128)dt_ns * (util_milli > 100000 ? 100000 : util_milli) / 100000);
        w->launches += launches << GS_CTL_LAUNCH_SHIFT;
        w->age_ns += dt_ns;
        if (w->launches == 0) {
                if (w->age_ns >= GS_CTL_MAX_WINDOW_NS)
                        *w = (struct gs_ctl_window){ 0 }; /* nothing launched for a while: forget the busy time */
                return interval_ns;
        }
        if (w->launches < (GS_CTL_MIN_LAUNCHES << GS_CTL_LAUNCH_SHIFT) && w->age_ns < GS_CTL_MAX_WINDOW_NS)
                return interval_ns; /* not enough launches to learn a cost from yet */
        uint64_t busy = w->busy_ns, n = w->launches, age = w->age_ns;
        w->busy_ns /= 2, w->launches /= 2, w->age_ns /= 2; /* older periods weigh less */
        if ((unsigned __int128)busy * 200 < age)           /* < 0.5 %: launches cost nothing measurable; relax */
                return interval_ns / 2 < 1000 ? 0 : interval_ns / 2;
        /* the cost of one launch (busy / n) at the target share: interval = cost / share */
        unsigned __int128 want =
                ((unsigned __int128)busy * 100000 << GS_CTL_LAUNCH_SHIFT) / ((unsigned __int128)target_milli * n);
        uint64_t wanted = want > GS_CTL_MAX_INTERVAL_NS ? GS_CTL_MAX_INTERVAL_NS : (uint64_t)want;
        if (interval_ns == 0)
                return wanted;
        /* Smooth (samples lag and jitter): half old, half new — so at most halving per step — and
         * growing by at most ×4 per step. */
        uint64_t next = interval_ns / 2 + wanted / 2;
        if (next > interval_ns * 4)
                next = interval_ns * 4;
        return next > GS_CTL_MAX_INTERVAL_NS ? GS_CTL_MAX_INTERVAL_NS : next;
}

uint64_t gs_throttle_aggregate(const struct gs_util_sample *s, unsigned n, uint64_t last_seen_us,
                               bool (*mine)(unsigned pid), uint64_t *ret_mine, uint64_t *ret_all, bool *ret_matched) {
        uint64_t newest = last_seen_us, sum_mine = 0, sum_all = 0;
        bool matched = false;
        for (unsigned i = 0; i < n; i++) {
                if (s[i].ts_us <= last_seen_us)
                        continue;
                bool first = true; /* each PID once: the average of its samples in the window */
                for (unsigned k = 0; k < i && first; k++)
                        first = !(s[k].pid == s[i].pid && s[k].ts_us > last_seen_us);
                if (s[i].ts_us > newest)
                        newest = s[i].ts_us;
                if (!first)
                        continue;
                uint64_t total = 0, count = 0;
                for (unsigned k = i; k < n; k++)
                        if (s[k].pid == s[i].pid && s[k].ts_us > last_seen_us)
                                total += s[k].sm, count++;
                uint64_t avg = total * 1000 / count;
                sum_all += avg;
                if (mine(s[i].pid)) {
                        sum_mine += avg;
                        matched = true;
                }
        }
        *ret_mine = sum_mine;
        *ret_all = sum_all;
        *ret_matched = matched;
        return newest;
}

/* ---- the controller thread ---- */

struct nvml {
        void *dl;
        __typeof__(&nvmlInit_v2) init;
        __typeof__(&nvmlDeviceGetHandleByUUID) by_uuid;
        __typeof__(&nvmlDeviceGetProcessUtilization) proc_util;
        __typeof__(&nvmlDeviceGetUtilizationRates) util;
        nvmlDevice_t dev[GS_MAX_DEVICES];
};

static int nvml_open(struct nvml *n) {
        n->dl = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!n->dl)
                return -ENOENT;
        n->init = (__typeof__(n->init))dlsym(n->dl, "nvmlInit_v2");
        n->by_uuid = (__typeof__(n->by_uuid))dlsym(n->dl, "nvmlDeviceGetHandleByUUID");
        n->proc_util = (__typeof__(n->proc_util))dlsym(n->dl, "nvmlDeviceGetProcessUtilization");
        n->util = (__typeof__(n->util))dlsym(n->dl, "nvmlDeviceGetUtilizationRates");
        /* without per-process samples the device's utilization stands in (container_util) */
        if (!n->init || !n->by_uuid || (!n->proc_util && !n->util) || n->init() != NVML_SUCCESS)
                return -ENOENT;
        for (unsigned i = 0; i < t.limits->n_devices; i++)
                if (!t.uuid[i][0] || gs_view_by_cuda_uuid(n->by_uuid, t.uuid[i], &n->dev[i]) != NVML_SUCCESS)
                        n->dev[i] = NULL;
        return 0;
}

static bool pid_in_container(const struct gs_region *r, unsigned pid) {
        unsigned hw = __atomic_load_n(&r->slots_hw, __ATOMIC_ACQUIRE);
        for (unsigned i = 0; i < hw && i < GS_REGION_SLOTS; i++) {
                uint64_t o = __atomic_load_n(&r->slot[i].owner, __ATOMIC_ACQUIRE);
                if (GS_OWNER_STATE(o) != GS_SLOT_LIVE)
                        continue;
                /* NVML speaks host PIDs: the learnt one when known, else the own (same namespace). */
                unsigned host = __atomic_load_n(&r->slot[i].host_pid, __ATOMIC_RELAXED);
                if (host ? host == pid : GS_OWNER_PID(o) == (pid & 0x3fffffu))
                        return true;
        }
        return false;
}

static bool in_container(unsigned pid) {
        return pid_in_container(t.region, pid);
}

/*
 * The container's SM utilization on a device over the last period, in 1/1000 percent; the device's in
 * *ret_all. From NVML's per-process samples newer than the last ones counted (lastSeenTimeStamp: with 0 NVML
 * answers an average over its whole sample buffer, seconds old). Where NVML has no per-process samples (the
 * query unsupported: MIG, some newer GPUs) or none of them is the container's although it launched (its
 * processes' host PIDs unknown), the whole device's utilization stands in for the container's: the share
 * is then enforced on all the GPU's work, never left unenforced. -1 when NVML cannot say at all.
 */
static int64_t container_util(struct nvml *n, unsigned li, bool launched, uint64_t *ret_all, bool *ret_whole) {
        static nvmlProcessUtilizationSample_t s[MAX_SAMPLES];
        static struct gs_util_sample g_s[MAX_SAMPLES];
        struct gs_region_device *d = &t.region->dev[li];
        uint64_t last_seen = __atomic_load_n(&d->ctl_last_seen_us, __ATOMIC_RELAXED);
        unsigned count = MAX_SAMPLES;
        nvmlReturn_t r = n->proc_util ? n->proc_util(n->dev[li], s, &count, last_seen) : NVML_ERROR_FUNCTION_NOT_FOUND;
        uint64_t mine = 0, all = 0;
        bool matched = false, per_process = r == NVML_SUCCESS || r == NVML_ERROR_NOT_FOUND;
        if (r == NVML_SUCCESS) {
                for (unsigned i = 0; i < count && i < MAX_SAMPLES; i++)
                        g_s[i] = (struct gs_util_sample){ s[i].pid, s[i].timeStamp, s[i].smUtil };
                uint64_t newest = gs_throttle_aggregate(g_s, count < MAX_SAMPLES ? count : MAX_SAMPLES, last_seen,
                                                        in_container, &mine, &all, &matched);
                __atomic_store_n(&d->ctl_last_seen_us, newest, __ATOMIC_RELAXED);
        }
        *ret_whole = false;
        if (per_process && (matched || !launched || all == 0)) {
                *ret_all = all;
                return (int64_t)mine;
        }
        *ret_whole = true;
        nvmlUtilization_t u;
        if (!n->util || n->util(n->dev[li], &u) != NVML_SUCCESS)
                return -1;
        *ret_all = (uint64_t)u.gpu * 1000;
        return (int64_t)*ret_all;
}

static void step(struct nvml *n, unsigned li) {
        struct gs_region *r = t.region;
        struct gs_region_device *d = &r->dev[li];
        uint64_t now = gs_now_ns();
        uint64_t last = __atomic_load_n(&d->ctl_last_ns, __ATOMIC_ACQUIRE);
        if (last && now - last < GS_CTL_PERIOD_NS)
                return;
        if (!__atomic_compare_exchange_n(&d->ctl_last_ns, &last, now, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                return; /* another process of the container steps this period */
        uint64_t launches = 0;
        unsigned hw = __atomic_load_n(&r->slots_hw, __ATOMIC_ACQUIRE);
        for (unsigned i = 0; i < hw && i < GS_REGION_SLOTS; i++)
                if (GS_OWNER_STATE(__atomic_load_n(&r->slot[i].owner, __ATOMIC_ACQUIRE)) == GS_SLOT_LIVE)
                        launches += __atomic_load_n(&r->slot[i].launches[li], __ATOMIC_RELAXED);
        uint64_t prev = __atomic_exchange_n(&d->ctl_launches, launches, __ATOMIC_ACQ_REL);
        if (!last || launches < prev || !n->dev[li])
                return; /* first step, or a process left and took its count with it */
        uint64_t all = 0;
        bool whole = false;
        int64_t u = container_util(n, li, launches > prev, &all, &whole);
        if (u < 0)
                return;
        __atomic_store_n(&d->ctl_util_milli, (uint64_t)u, __ATOMIC_RELAXED);
        uint64_t target = (uint64_t)t.limits->dev[li].core_percent * 1000;
        if (t.limits->core_policy == GS_CORE_ELASTIC && !whole) { /* what others use is unknown with `whole` */
                uint64_t others = all > (uint64_t)u ? all - (uint64_t)u : 0;
                uint64_t idle = others < 100000 ? 100000 - others : 0;
                if (idle > target)
                        target = idle;
                if (target >= 100000) {
                        __atomic_store_n(&d->interval_ns, 0, __ATOMIC_RELAXED);
                        return;
                }
        }
        /* The window lives in the region: whichever process steps next continues it. */
        struct gs_ctl_window w = { __atomic_load_n(&d->ctl_win_busy_ns, __ATOMIC_RELAXED),
                                   __atomic_load_n(&d->ctl_win_launches, __ATOMIC_RELAXED),
                                   __atomic_load_n(&d->ctl_win_age_ns, __ATOMIC_RELAXED) };
        uint64_t cur = __atomic_load_n(&d->interval_ns, __ATOMIC_RELAXED);
        uint64_t next = gs_throttle_step(&w, cur, now - last, launches - prev, (uint64_t)u, target);
        __atomic_store_n(&d->ctl_win_busy_ns, w.busy_ns, __ATOMIC_RELAXED);
        __atomic_store_n(&d->ctl_win_launches, w.launches, __ATOMIC_RELAXED);
        __atomic_store_n(&d->ctl_win_age_ns, w.age_ns, __ATOMIC_RELAXED);
        __atomic_store_n(&d->interval_ns, next, __ATOMIC_RELAXED);
}

static void *controller(void *arg) {
        (void)arg;
        struct nvml n;
        memset(&n, 0, sizeof n);
        if (nvml_open(&n) < 0)
                return NULL; /* no utilization feedback: launches stay unthrottled (documented) */
        for (;;) {
                struct timespec ts = { 0, (long)(GS_CTL_PERIOD_NS / 4) };
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                        ;
                for (unsigned li = 0; li < t.limits->n_devices; li++)
                        if (t.limits->dev[li].core_percent < 100)
                                step(&n, li);
        }
        return NULL;
}

static void start_controller(void) {
        int expected = 0;
        if (!__atomic_compare_exchange_n(&t.started, &expected, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                return;
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits it: no application signal lands there */
        pthread_attr_t a;
        pthread_t th;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &a, controller, NULL) != 0)
                __atomic_store_n(&t.started, 0, __ATOMIC_RELEASE);
        pthread_attr_destroy(&a);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void gs_throttle_launch(struct gs_region *r, unsigned slot, unsigned li) {
        if (slot < GS_REGION_SLOTS)
                __atomic_add_fetch(&r->slot[slot].launches[li], 1, __ATOMIC_RELAXED);
        if (__builtin_expect(!__atomic_load_n(&t.started, __ATOMIC_ACQUIRE), 0) && t.region)
                start_controller();
        uint64_t now = gs_now_ns();
        uint64_t wait = gs_region_throttle(r, li, now);
        if (!wait)
                return;
        struct timespec until = { (time_t)((now + wait) / 1000000000ULL), (long)((now + wait) % 1000000000ULL) };
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
                ;
        if (slot < GS_REGION_SLOTS)
                __atomic_add_fetch(&r->slot[slot].throttled_ns[li], wait, __ATOMIC_RELAXED);
}
