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
#include "interposer/throttle.h"
#include "nvml/nvml-abi.h"

#define MAX_INTERVAL_NS 1000000000ULL /* never space launches more than 1 s apart */
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

uint64_t gs_throttle_next_interval(uint64_t interval_ns, uint64_t dt_ns, uint64_t launches, uint64_t util_milli,
                                   uint64_t target_milli) {
        if (launches == 0 || dt_ns == 0 || target_milli == 0)
                return interval_ns; /* nothing learned */
        if (util_milli < 500)       /* < 0.5 %: launches cost nothing measurable; relax */
                return interval_ns / 2 < 1000 ? 0 : interval_ns / 2;
        /* interval that would have given `target` with this period's cost per launch */
        unsigned __int128 num = (unsigned __int128)dt_ns * util_milli;
        unsigned __int128 den = (unsigned __int128)target_milli * launches;
        uint64_t want = num / den > MAX_INTERVAL_NS ? MAX_INTERVAL_NS : (uint64_t)(num / den);
        if (interval_ns == 0)
                return want;
        /* Smooth (samples lag and jitter): half old, half new — so at most halving per step — and
         * growing by at most ×4 per step. */
        uint64_t next = interval_ns / 2 + want / 2;
        if (next > interval_ns * 4)
                next = interval_ns * 4;
        return next > MAX_INTERVAL_NS ? MAX_INTERVAL_NS : next;
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
        if (!n->init || !n->by_uuid || !n->proc_util || n->init() != NVML_SUCCESS)
                return -ENOENT;
        for (unsigned i = 0; i < t.limits->n_devices; i++)
                if (!t.uuid[i][0] || n->by_uuid(t.uuid[i], &n->dev[i]) != NVML_SUCCESS)
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

/* The container's SM utilization on a device, in 1/1000 percent; the device's in *ret_all. -1 on error. */
static int64_t container_util(struct nvml *n, unsigned li, uint64_t *ret_all) {
        static nvmlProcessUtilizationSample_t s[MAX_SAMPLES];
        unsigned count = MAX_SAMPLES;
        nvmlReturn_t r = n->proc_util(n->dev[li], s, &count, 0);
        if (r == NVML_ERROR_NOT_FOUND)
                count = 0;
        else if (r != NVML_SUCCESS)
                return -1;
        uint64_t mine = 0, all = 0;
        for (unsigned i = 0; i < count && i < MAX_SAMPLES; i++) {
                all += s[i].smUtil;
                if (pid_in_container(t.region, s[i].pid))
                        mine += s[i].smUtil;
        }
        *ret_all = all * 1000;
        return (int64_t)(mine * 1000);
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
        int64_t u = container_util(n, li, &all);
        if (u < 0)
                return;
        __atomic_store_n(&d->ctl_util_milli, (uint64_t)u, __ATOMIC_RELAXED);
        uint64_t target = (uint64_t)t.limits->dev[li].core_percent * 1000;
        if (t.limits->core_policy == GS_CORE_ELASTIC) {
                uint64_t others = all > (uint64_t)u ? all - (uint64_t)u : 0;
                uint64_t idle = others < 100000 ? 100000 - others : 0;
                if (idle > target)
                        target = idle;
                if (target >= 100000) {
                        __atomic_store_n(&d->interval_ns, 0, __ATOMIC_RELAXED);
                        return;
                }
        }
        uint64_t cur = __atomic_load_n(&d->interval_ns, __ATOMIC_RELAXED);
        uint64_t next = gs_throttle_next_interval(cur, now - last, launches - prev, (uint64_t)u, target);
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
