/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent-metrics — the agent's side of /metrics: RPC counts, errors and latencies per method (the
 * rpc servers' observer, which also wakes streams and the state writer after every call), and the
 * allocation view the monitor's sampler asks for (gpu_allocated, gpu_healthy, container_limits with the
 * interposer's refusals read from each fractional container's shared region).
 * Must never: take the device lock for longer than a copy, or fail the device plugin when metrics
 * cannot be served.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/node-internal.h"
#include "agent/timeslice.h"
#include "interposer/limits.h"
#include "metrics/metrics.h"
#include "monitor/monitor.h"
#include "util/log.h"
#include "util/util.h"

/* After every call on the call's thread: count it, and since a handler may have changed the
 * record or what ListAndWatch shows, tell the streams (plugin_notify) and the state writer. */
void node_observe_rpc(void *userdata, const char *method, enum rpc_code code, double seconds) {
        struct node *n = userdata;
        devices_notify(n->devices);
        (void)loop_event_post(&n->persist);
        const char *m = strrchr(method, '/');
        m = m ? m + 1 : method;
        metrics_counter_add(metrics_counter_get("gpuslice_rpc_requests_total",
                                                "Device plugin RPCs answered, by method.", "method", m),
                            1);
        if (code != RPC_OK)
                metrics_counter_add(metrics_counter_get("gpuslice_rpc_errors_total",
                                                        "Device plugin RPCs answered with an error status, by method.",
                                                        "method", m),
                                    1);
        if (!streq(m, "ListAndWatch"))
                metrics_histogram_observe(metrics_histogram_get("gpuslice_rpc_duration_seconds",
                                                                "Time to answer a unary device plugin RPC.", "method",
                                                                m),
                                          seconds);
}

/* How much of device i the records hand out: 1 when held whole, else the larger of its core and
 * memory shares (caller holds the lock). */
static double held_share(const struct devices *d, const struct plugin_usage *u, unsigned i) {
        unsigned n_mem = devices_info(d, i)->n_mem;
        double core = u->core[i] / 100.0;
        double mem = n_mem ? (double)u->mem[i] / n_mem : 0.0;
        return (u->whole >> i) & 1 ? 1.0 : MIN(1.0, MAX(core, mem));
}

/* A GPU in MIG mode: the share of its memory its MIG devices hand out, whole or in fractions (caller
 * holds the lock). */
static double mig_held_share(const struct devices *d, const struct plugin_usage *u, unsigned gpu) {
        double held = 0, total = (double)devices_info(d, gpu)->memory_total;
        for (unsigned k = 0; k < devices_count(d); k++)
                if (devices_info(d, k)->parent == (int)gpu)
                        held += held_share(d, u, k) * (double)devices_info(d, k)->memory_total;
        return total > 0 ? MIN(1.0, held / total) : 0.0;
}

/* How much of GPU `index` the agent's records hand out (held_share; a GPU in MIG mode: its MIG
 * devices'). Called on the monitor's sampler thread. */
static int gpu_allocated(void *userdata, unsigned index, double *ret) {
        struct plugin *p = userdata;
        struct devices *d = plugin_devices(p);
        struct plugin_usage u;
        int r = -ENOENT;
        devices_lock(d);
        plugin_usage(p, &u);
        int i = devices_find_nvml(d, (int)index);
        if (i >= 0 && ((plugin_replicated(p) >> i) & 1)) { /* time-sliced: the replicas held of its N */
                *ret = (u.plain >> i) & 1 ? 1.0 : MIN(1.0, (double)u.rep[i] / plugin_replicas_of(p, (unsigned)i));
                r = 0;
        } else if (i >= 0) {
                *ret = devices_info(d, (unsigned)i)->mig_mode ? mig_held_share(d, &u, (unsigned)i)
                                                              : held_share(d, &u, (unsigned)i);
                r = 0;
        }
        devices_unlock(d);
        return r;
}

/* Whether GPU `index` is Healthy in the device table (what kubelet is told). Called on the monitor's
 * sampler thread. */
static int gpu_healthy(void *userdata, unsigned index, bool *ret) {
        struct devices *d = plugin_devices(userdata);
        int i = devices_find_nvml(d, (int)index);
        if (i < 0)
                return -ENOENT;
        struct device_health h;
        devices_health(d, (unsigned)i, &h);
        *ret = h.healthy;
        return 0;
}

/* A fractional ID whose record's shared region may hold the interposer's refusals for limit k. */
struct region_probe {
        size_t k;
        char dir[sizeof(((struct state_alloc *)0)->device_id)]; /* the record's limits dir if this ID opened it */
        char uuid[GS_UUID_MAX];                                 /* the GPU of the ID */
};

/* The interposer's refusals (gs_region_device.oom_count: allocations it answered out-of-memory for,
 * limits.h) on GPU `uuid` in the shared region of limits dir `dir`: <limits root>/<dir>/shm/region. A
 * record's dir is named after the ID that opened it ("GPU-…::memory-3" → "GPU-….memory-3", share.c), so
 * of a container's IDs one names an existing region. -ENOENT when there is none (no process of the
 * container has started: nothing refused yet). Read without any lock: a counter read mid-update
 * only lags. */
static int region_refusals(const char *root, const char *dir, const char *uuid, uint64_t *ret) {
        char path[4096 + 2 * sizeof(((struct state_alloc *)0)->device_id)];
        if ((size_t)snprintf(path, sizeof path, "%s/%s/shm/region", root, dir) >= sizeof path)
                return -ENAMETOOLONG;
        _cleanup_(closep) int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        uint64_t magic = 0;
        uint32_t abi = 0, n_dev = 0;
        struct gs_region_device dev[GS_MAX_DEVICES];
        if (pread(fd, &magic, sizeof magic, offsetof(struct gs_region, magic)) != sizeof magic ||
            pread(fd, &abi, sizeof abi, offsetof(struct gs_region, abi_version)) != sizeof abi ||
            pread(fd, &n_dev, sizeof n_dev, offsetof(struct gs_region, n_devices)) != sizeof n_dev ||
            pread(fd, dev, sizeof dev, offsetof(struct gs_region, dev)) != sizeof dev)
                return -EPROTO;
        if (magic != GS_REGION_MAGIC || abi != GS_REGION_ABI || n_dev > GS_MAX_DEVICES)
                return -EPROTO;
        for (unsigned i = 0; i < n_dev; i++)
                if (strncmp(dev[i].uuid, uuid, GS_UUID_MAX) == 0) {
                        *ret = dev[i].oom_count;
                        return 0;
                }
        return -ENOENT;
}

/* Remember where fractional ID a (of limit k) would have its record's region ("UUID::kind-n"). */
static int probe_add(const struct state_alloc *a, size_t k, struct region_probe **probe, size_t *n_probe) {
        const char *sep = strstr(a->device_id, "::");
        if (!sep || (size_t)(sep - a->device_id) >= GS_UUID_MAX)
                return 0;
        struct region_probe *x = realloc(*probe, (*n_probe + 1) * sizeof *x);
        if (!x)
                return -ENOMEM;
        *probe = x;
        x[*n_probe] = (struct region_probe){ .k = k };
        int ul = (int)(sep - a->device_id);
        snprintf(x[*n_probe].dir, sizeof x[*n_probe].dir, "%.*s.%s", ul, a->device_id, sep + 2);
        snprintf(x[*n_probe].uuid, sizeof x[*n_probe].uuid, "%.*s", ul, a->device_id);
        (*n_probe)++;
        return 0;
}

/* The refusals of every memory share from the regions found (without the device lock). */
static void add_refusals(const char *root, struct monitor_limit *out, const struct region_probe *probe, size_t n) {
        for (size_t i = 0; i < n; i++) {
                struct monitor_limit *l = &out[probe[i].k];
                uint64_t refused = 0;
                if (l->whole || !l->memory_bytes)
                        continue;
                l->has_refusals = true; /* a memory share: refusals are 0 until its region says otherwise */
                if (region_refusals(root, probe[i].dir, probe[i].uuid, &refused) == 0)
                        l->refusals += refused;
        }
}

/* The entry of out for a's container on GPU gpu, added when new. Its index, or -ENOMEM. */
static ssize_t limit_slot(struct monitor_limit **out, size_t *n, size_t *cap, unsigned gpu,
                          const struct state_alloc *a) {
        for (size_t k = 0; k < *n; k++)
                if ((*out)[k].gpu_index == gpu && streq((*out)[k].namespace, a->pod_namespace) &&
                    streq((*out)[k].pod, a->pod_name) && streq((*out)[k].container, a->container))
                        return (ssize_t)k;
        if (array_reserve(out, cap, *n + 1, 16) < 0)
                return -ENOMEM;
        struct monitor_limit *l = &(*out)[*n];
        *l = (struct monitor_limit){ .gpu_index = gpu };
        strscpy(l->namespace, a->pod_namespace, sizeof l->namespace);
        strscpy(l->pod, a->pod_name, MIN(sizeof l->pod, sizeof a->pod_name));
        strscpy(l->container, a->container, sizeof l->container);
        return (ssize_t)(*n)++;
}

/* Every named container's shares from the records: whole GPUs of the whole-GPU resource, core
 * and memory IDs of the fractional ones, summed per (container, GPU), with the interposer's refusals
 * for those with a memory share. Entries PodResources has not named yet are left out. Called on the
 * monitor's sampler thread. */
static int container_limits(void *userdata, struct monitor_limit **ret, size_t *ret_n) {
        struct plugin *p = userdata;
        struct monitor_limit *out = NULL;
        struct region_probe *probe = NULL;
        size_t n = 0, cap = 0, n_probe = 0;
        int r = 0;
        struct devices *d = plugin_devices(p);
        const char *core = plugin_resource(p, PLUGIN_CORE), *memory = plugin_resource(p, PLUGIN_MEMORY);
        char root[sizeof((struct plugin_options *)0)->limits_root];
        devices_lock(d);
        strscpy(root, plugin_options(p)->limits_root, sizeof root);
        const struct gpuslice_state *s = plugin_record(p);
        for (size_t i = 0; i < s->n_allocs; i++) {
                const struct state_alloc *a = &s->allocs[i];
                bool whole = streq(a->resource, plugin_resource(p, PLUGIN_WHOLE));
                bool frac = (core[0] && streq(a->resource, core)) || (memory[0] && streq(a->resource, memory));
                unsigned rg, rj; /* a replica holder (time-slicing): the whole GPU, no limit */
                int rk = plugin_replica_find(p, a->resource);
                bool rep = rk >= 0 && timeslice_parse_id(d, a->device_id, TIMESLICE_REPLICAS_MAX, &rg, &rj) == 0 &&
                           plugin_replica_set_of(p, rg) == rk && rj < plugin_replica_count(p, (unsigned)rk);
                if ((!whole && !frac && !rep) || !a->pod_name[0])
                        continue;
                int gpu = -1;
                if (rep) {
                        gpu = devices_info(d, rg)->index;
                        whole = true;
                } else if (whole) {
                        int g = devices_find(d, a->device_id);
                        if (g >= 0)
                                gpu = devices_info(d, (unsigned)g)->index;
                } else
                        gpu = a->gpu_index;
                if (gpu < 0)
                        continue;
                ssize_t k = limit_slot(&out, &n, &cap, (unsigned)gpu, a);
                if (k < 0) {
                        r = (int)k;
                        break;
                }
                if (whole)
                        out[k].whole = true;
                out[k].memory_bytes += a->memory_bytes;
                out[k].core_percent += a->core_percent;
                if (frac && (r = probe_add(a, (size_t)k, &probe, &n_probe)) < 0)
                        break;
        }
        devices_unlock(d);
        if (r >= 0)
                add_refusals(root, out, probe, n_probe);
        free(probe);
        if (r < 0) {
                free(out);
                return r;
        }
        *ret = out;
        *ret_n = n;
        return 0;
}

/* Metrics are a side service: a node that cannot serve them still serves kubelet. */
void node_monitor_start(struct node *n) {
        if (!n->cfg.metrics_address[0])
                return;
        struct monitor_options o;
        monitor_options_init(&o);
        o.proc_root = n->cfg.proc_root;
        o.engine_url = n->cfg.engine_url;
        o.cri_socket = n->cfg.cri_socket;
        o.compat = n->cfg.metrics_compat;
        o.interval_ms = n->cfg.sample_interval_sec * 1000;
        o.nfd_features_file = n->cfg.nfd_features_file;
        o.node_name = n->cfg.node_name[0] ? n->cfg.node_name : NULL; /* --node-name: the compat `node` label too */
        o.gpu_allocated = gpu_allocated;
        o.gpu_healthy = gpu_healthy;
        o.container_limits = container_limits;
        o.userdata = n->plugin;
        int r = monitor_service_start(&o, n->nvml, n->cfg.metrics_address, &n->monitor);
        if (r < 0) {
                log_error_errno(r, "cannot serve metrics; the device plugin goes on without them", "address=%s",
                                n->cfg.metrics_address);
                return;
        }
        log_info("serving metrics", "address=%s", n->cfg.metrics_address);
}
