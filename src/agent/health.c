/* SPDX-License-Identifier: Apache-2.0 */
/*
 * health — one thread: NVML critical-Xid events and per-GPU probes (see health.h).
 * Must never: call NVML while holding the device lock, or mark a GPU for another GPU's event.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "agent/health.h"
#include "metrics/metrics.h"
#include "util/log.h"
#include "util/util.h"

bool health_xid_is_critical(const unsigned *ignore, size_t n_ignore, unsigned xid) {
        for (size_t i = 0; i < n_ignore; i++)
                if (ignore[i] == xid)
                        return false;
        return true;
}

/* Sleep until `until_ms` (CLOCK_MONOTONIC) or health_stop. */
static void sleep_until(struct health *h, uint64_t until_ms) {
        struct timespec ts = { .tv_sec = (time_t)(until_ms / 1000), .tv_nsec = (long)(until_ms % 1000) * 1000000L };
        pthread_mutex_lock(&h->lock);
        while (!atomic_load(&h->stop))
                if (pthread_cond_timedwait(&h->wake, &h->lock, &ts) == ETIMEDOUT)
                        break;
        pthread_mutex_unlock(&h->lock);
}

/* One thread does both jobs so that the node wakes once per probe period when idle: it waits
 * for an Xid event until the next probe is due (the wait's timeout is the probe schedule), then
 * probes every GPU. An Xid is seen at once; an NVML error (lost GPU, NO_PERMISSION, ...) at the
 * next probe, so within HEALTH_PROBE_MS plus one probe round. */
static void *health_thread(void *arg) {
        struct health *h = arg;
        pthread_setname_np(pthread_self(), "health");
        struct nvml_events *ev = h->events;
        struct nvml_error err = { 0 };
        uint64_t next_probe = 0;
        int r;
        while (!atomic_load(&h->stop)) {
                uint64_t now = monotonic_ms();
                if (now >= next_probe) {
                        uint64_t recovery = health_probe(h);
                        next_probe = monotonic_ms() + HEALTH_PROBE_MS;
                        if (recovery && recovery < next_probe)
                                next_probe = MAX(recovery, monotonic_ms() + 1);
                        /* GPUs that came back (or could not be registered at start) get registered again. */
                        for (unsigned i = 0; ev && i < devices_count(h->devices); i++) {
                                if (devices_info(h->devices, i)->parent >= 0)
                                        continue; /* a MIG device: its GPU's events are its */
                                unsigned idx = (unsigned)devices_info(h->devices, i)->index;
                                struct device_health dh;
                                devices_health(h->devices, i, &dh);
                                if (dh.healthy && !nvml_events_registered(ev, idx))
                                        (void)nvml_events_add_device(ev, idx, NULL);
                        }
                        continue;
                }
                if (!ev) {
                        sleep_until(h, next_probe);
                        continue;
                }
                struct nvml_event e;
                r = nvml_events_wait(ev, (unsigned)(next_probe - now), &e, &err);
                if (r < 0) {
                        if (r != -ETIMEDOUT) {
                                log_debug("NVML event wait failed", "func=%s nvml=\"%s\"", err.func, err.text);
                                sleep_until(h, MIN(next_probe, monotonic_ms() + 200));
                        }
                        continue;
                }
                if (r == 0)
                        continue;
                pthread_mutex_lock(&h->lock);
                bool critical = health_xid_is_critical(h->ignore, h->n_ignore, e.xid);
                pthread_mutex_unlock(&h->lock);
                int i = e.gpu >= 0 ? devices_find_nvml(h->devices, e.gpu) : -1;
                if (i >= 0) /* every Xid of our GPUs, ignored ones too: a storm of any kind is news */
                        metrics_counter_add(metrics_counter_get("gpuslice_gpu_xid_errors_total",
                                                                "Xid errors NVML reported for a GPU (the ignored Xids "
                                                                "too), by GPU UUID.",
                                                                "gpu_uuid", devices_info(h->devices, (unsigned)i)->id),
                                            1);
                if (!critical) {
                        log_info("ignored Xid", "gpu=%d xid=%u", e.gpu, e.xid);
                        continue;
                }
                if (i < 0) {
                        log_warn("critical Xid on an unknown GPU, ignored", "gpu=%d xid=%u", e.gpu, e.xid);
                        continue;
                }
                health_xid(h, (unsigned)i, e.xid);
        }
        return NULL;
}

void health_xid(struct health *h, unsigned i, unsigned xid) {
        const struct device_info *d = devices_info(h->devices, i);
        char reason[32];
        snprintf(reason, sizeof reason, "xid %u", xid);
        pthread_mutex_lock(&h->lock);
        h->n_xids++;
        pthread_mutex_unlock(&h->lock);
        (void)devices_fault(h->devices, i, reason);
        log_warn("GPU unhealthy", "gpu=%d id=%s xid=%u", d->index, d->id, xid);
        /* An Xid is an event: a GPU that answers normally right after it starts its quiet period
         * now; one that does not (it is lost, or NVML refuses it) starts it at its first normal
         * probe, never at the Xid. */
        struct nvml_error err = { 0 };
        if (nvml_device_probe(h->nvml, (unsigned)d->index, &err) == 0)
                devices_answered(h->devices, i, monotonic_ms());
}

void health_set_options(struct health *h, const unsigned *ignore, size_t n_ignore, uint64_t quiet_ms) {
        pthread_mutex_lock(&h->lock);
        h->n_ignore = MIN(n_ignore, (size_t)HEALTH_XID_MAX);
        memcpy(h->ignore, ignore, h->n_ignore * sizeof *ignore);
        h->quiet_ms = quiet_ms;
        pthread_mutex_unlock(&h->lock);
}

int health_start(struct health *h, struct nvml *n, struct devices *d, const unsigned *ignore, size_t n_ignore,
                 uint64_t quiet_ms) {
        memset(h, 0, sizeof *h);
        pthread_mutex_init(&h->lock, NULL);
        cond_init_monotonic(&h->wake);
        h->nvml = n;
        h->devices = d;
        health_set_options(h, ignore, n_ignore, quiet_ms);
        h->running = true;
        /* The event set exists before health_start returns (so before the plugin registers):
         * an Xid from then on is never missed. */
        struct nvml_error err = { 0 };
        int r = nvml_events_new(n, 0, &h->events, &err);
        if (r < 0) {
                log_warn_errno(r, "NVML events unavailable, health relies on probing", "func=%s nvml=\"%s\"", err.func,
                               err.text);
                h->events = NULL;
        }
        r = pthread_create(&h->thread, NULL, health_thread, h);
        if (r != 0) {
                h->events = nvml_events_free(h->events);
                return -r;
        }
        h->thread_running = true;
        return 0;
}

uint64_t health_probe(struct health *h) {
        pthread_mutex_lock(&h->lock);
        uint64_t quiet = h->quiet_ms;
        pthread_mutex_unlock(&h->lock);
        uint64_t due = 0;
        for (unsigned i = 0; i < devices_count(h->devices); i++) {
                struct nvml_error err = { 0 };
                const struct device_info *g = devices_info(h->devices, i);
                if (g->parent >= 0)
                        continue; /* a MIG device is as healthy as its GPU (devices_healthy) */
                int r = nvml_device_probe(h->nvml, (unsigned)g->index, &err);
                /* the answer's time: after it came, so a quiet period never starts before the GPU
                 * answered normally (a fault may end while the probe runs) */
                uint64_t answered_ms = monotonic_ms();
                if (r < 0) {
                        char reason[96];
                        snprintf(reason, sizeof reason, "%s", nvml_code_name(err.nvml_code));
                        if (devices_fault(h->devices, i, reason))
                                log_warn_errno(r, "GPU unhealthy", "gpu=%d id=%s nvml=\"%s\"", g->index, g->id,
                                               err.text);
                } else if (devices_probe_ok(h->devices, i, answered_ms, quiet))
                        log_info("GPU healthy again", "gpu=%d id=%s", g->index, g->id);
                /* a GPU counting its quiet period turns healthy at the end of it: probe it then */
                uint64_t at = devices_quiet_due(h->devices, i, quiet);
                if (at && (!due || at < due))
                        due = at;
        }
        return due;
}

void health_stop(struct health *h) {
        if (!h->running)
                return;
        pthread_mutex_lock(&h->lock);
        atomic_store(&h->stop, true);
        pthread_cond_broadcast(&h->wake);
        pthread_mutex_unlock(&h->lock);
        if (h->thread_running)
                pthread_join(h->thread, NULL);
        h->thread_running = false;
        h->events = nvml_events_free(h->events);
        h->running = false;
        pthread_mutex_destroy(&h->lock);
        pthread_cond_destroy(&h->wake);
}
