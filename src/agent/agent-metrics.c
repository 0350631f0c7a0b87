/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent-metrics — the agent's side of /metrics: RPC counts, errors and latencies per method (the
 * rpc servers' observer, which also wakes streams and the state writer after every call), and the
 * allocation view the monitor's sampler asks for (gpu_allocated, container_limits).
 * Must never: take the device lock for longer than a copy, or fail the device plugin when metrics
 * cannot be served.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/node-internal.h"
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

/* How much of GPU `index` the agent's records hand out: 1 when held whole, else the larger of
 * its core and memory shares. Called on the monitor's sampler thread. */
static int gpu_allocated(void *userdata, unsigned index, double *ret) {
        struct plugin *p = userdata;
        struct devices *d = plugin_devices(p);
        struct plugin_usage u;
        int r = -ENOENT;
        devices_lock(d);
        plugin_usage(p, &u);
        int i = devices_find_nvml(d, (int)index);
        if (i >= 0) {
                unsigned n_mem = devices_info(d, (unsigned)i)->n_mem;
                double core = u.core[i] / 100.0;
                double mem = n_mem ? (double)u.mem[i] / n_mem : 0.0;
                *ret = (u.whole >> i) & 1 ? 1.0 : MIN(1.0, MAX(core, mem));
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

/* Every named container's shares from the records: whole GPUs of the whole-GPU resource, core
 * and memory IDs of the fractional ones, summed per (container, GPU). Entries PodResources has not
 * named yet are left out. Called on the monitor's sampler thread. */
static int container_limits(void *userdata, struct monitor_limit **ret, size_t *ret_n) {
        struct plugin *p = userdata;
        struct monitor_limit *out = NULL;
        size_t n = 0, cap = 0;
        int r = 0;
        struct devices *d = plugin_devices(p);
        const char *core = plugin_resource(p, PLUGIN_CORE), *memory = plugin_resource(p, PLUGIN_MEMORY);
        devices_lock(d);
        const struct gpuslice_state *s = plugin_record(p);
        for (size_t i = 0; i < s->n_allocs; i++) {
                const struct state_alloc *a = &s->allocs[i];
                bool whole = streq(a->resource, plugin_resource(p, PLUGIN_WHOLE));
                bool frac = (core[0] && streq(a->resource, core)) || (memory[0] && streq(a->resource, memory));
                if ((!whole && !frac) || !a->pod_name[0])
                        continue;
                int gpu = -1;
                if (whole) {
                        int g = devices_find(d, a->device_id);
                        if (g >= 0)
                                gpu = devices_info(d, (unsigned)g)->index;
                } else
                        gpu = a->gpu_index;
                if (gpu < 0)
                        continue;
                size_t k = 0;
                for (; k < n; k++)
                        if (out[k].gpu_index == (unsigned)gpu && streq(out[k].namespace, a->pod_namespace) &&
                            streq(out[k].pod, a->pod_name) && streq(out[k].container, a->container))
                                break;
                if (k == n) {
                        if (n == cap) {
                                size_t ncap = cap ? cap * 2 : 16;
                                struct monitor_limit *m = realloc(out, ncap * sizeof *m);
                                if (!m) {
                                        r = -ENOMEM;
                                        break;
                                }
                                out = m;
                                cap = ncap;
                        }
                        out[n] = (struct monitor_limit){ .gpu_index = (unsigned)gpu };
                        strscpy(out[n].namespace, a->pod_namespace, sizeof out[n].namespace);
                        strscpy(out[n].pod, a->pod_name, MIN(sizeof out[n].pod, sizeof a->pod_name));
                        strscpy(out[n].container, a->container, sizeof out[n].container);
                        n++;
                }
                if (whole)
                        out[k].whole = true;
                out[k].memory_bytes += a->memory_bytes;
                out[k].core_percent += a->core_percent;
        }
        devices_unlock(d);
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
