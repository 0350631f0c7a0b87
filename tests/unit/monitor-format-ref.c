/* SPDX-License-Identifier: Apache-2.0 */
/*
 * monitor-format-ref — the Prometheus text formatter as it was before the scrape rewrite (src/monitor/format.c
 * and src/metrics' text builder of commit b18be72), frozen: the reference the unit test
 * test-monitor-format-ref compares the current formatter with byte for byte, and the "old" column of
 * bench/monitor-bench.c. Test and bench code only; never linked into a product. The agent's counter
 * registry is formatted by the current src/metrics (metrics_registry_format) in both. The MIG families
 * (issue 21) came after the freeze: they are not here, and the compared snapshots have no MIG device.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>

#include "config/config.h"
#include "metrics/metrics.h"
#include "monitor/monitor.h"
#include "monitor-format-ref.h"

static bool text_reserve(struct metrics_text *t, size_t extra) {
        if (t->b.no_mem)
                return false;
        if (t->b.len + extra + 1 <= t->b.cap)
                return true;
        size_t cap = t->b.cap ? t->b.cap : 4096;
        while (cap < t->b.len + extra + 1)
                cap *= 2;
        char *b = realloc(t->b.p, cap);
        if (!b) {
                t->b.no_mem = true;
                return false;
        }
        t->b.p = b;
        t->b.cap = cap;
        return true;
}

static _printf_(2, 3) void ref_printf(struct metrics_text *t, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
                t->b.no_mem = true;
                return;
        }
        if (!text_reserve(t, (size_t)n))
                return;
        va_start(ap, fmt);
        vsnprintf(t->b.p + t->b.len, t->b.cap - t->b.len, fmt, ap);
        va_end(ap);
        t->b.len += (size_t)n;
}

static void text_putc(struct metrics_text *t, char c) {
        if (!text_reserve(t, 1))
                return;
        t->b.p[t->b.len++] = c;
        t->b.p[t->b.len] = '\0';
}

/* Escaped as the text format wants, and valid UTF-8 whatever comes in: label values carry process
 * names (/proc/PID/comm, any bytes a workload chooses) and Prometheus refuses a whole scrape over
 * one invalid byte. Each byte that does not start a well-formed sequence becomes U+FFFD. */
static void text_escaped(struct metrics_text *t, const char *s, bool quote) {
        if (!s)
                return;
        for (const char *end = s + strlen(s); *s; s++) {
                size_t k = utf8_seq_len(s, (size_t)(end - s));
                if (k == 0) {
                        ref_printf(t, "\xef\xbf\xbd");
                        continue;
                }
                if (k > 1) {
                        for (size_t i = 0; i < k; i++)
                                text_putc(t, s[i]);
                        s += k - 1;
                        continue;
                }
                if (*s == '\\') {
                        text_putc(t, '\\');
                        text_putc(t, '\\');
                } else if (*s == '\n') {
                        text_putc(t, '\\');
                        text_putc(t, 'n');
                } else if (quote && *s == '"') {
                        text_putc(t, '\\');
                        text_putc(t, '"');
                } else {
                        text_putc(t, *s);
                }
        }
}

static void ref_family(struct metrics_text *t, const char *name, const char *type, const char *help) {
        ref_printf(t, "# HELP %s ", name);
        text_escaped(t, help, false);
        ref_printf(t, "\n# TYPE %s %s\n", name, type);
}

static void text_value(struct metrics_text *t, double v) {
        if (isnan(v))
                ref_printf(t, "NaN");
        else if (isinf(v))
                ref_printf(t, v > 0 ? "+Inf" : "-Inf");
        else if (v == floor(v) && fabs(v) < 1e15)
                ref_printf(t, "%.0f", v);
        else
                ref_printf(t, "%.12g", v);
}

static void ref_sample(struct metrics_text *t, const char *name, const char *const *labels, double value) {
        ref_printf(t, "%s", name);
        if (labels && labels[0]) {
                text_putc(t, '{');
                for (size_t i = 0; labels[i]; i += 2) {
                        ref_printf(t, "%s%s=\"", i ? "," : "", labels[i]);
                        text_escaped(t, labels[i + 1], true);
                        text_putc(t, '"');
                }
                text_putc(t, '}');
        }
        text_putc(t, ' ');
        text_value(t, value);
        text_putc(t, '\n');
}

#define MIB (1024.0 * 1024.0)

struct gpu_labels {
        char index[16];
        const char *uuid, *model;
};

static struct gpu_labels gpu_labels(const struct monitor_snapshot *s, unsigned g) {
        struct gpu_labels l = { .uuid = s->gpus[g].uuid, .model = s->gpus[g].name };
        snprintf(l.index, sizeof l.index, "%u", s->gpus[g].index);
        return l;
}

static void gpu_family(struct metrics_text *t, const struct monitor_snapshot *s, const char *name, const char *help,
                       double (*get)(const struct monitor_gpu *g, bool *ok)) {
        bool any = false;
        for (size_t g = 0; g < s->n_gpus; g++) {
                bool ok = true;
                double v = get(&s->gpus[g], &ok);
                if (!ok)
                        continue;
                if (!any)
                        ref_family(t, name, "gauge", help);
                any = true;
                struct gpu_labels l = gpu_labels(s, (unsigned)g);
                const char *labels[] = { "gpu_index", l.index, "gpu_uuid", l.uuid, "gpu_model", l.model, NULL };
                ref_sample(t, name, labels, v);
        }
}

static double g_mem_used(const struct monitor_gpu *g, bool *ok) {
        *ok = g->memory_total > 0;
        return (double)g->memory_used;
}
static double g_mem_total(const struct monitor_gpu *g, bool *ok) {
        *ok = g->memory_total > 0;
        return (double)g->memory_total;
}
static double g_util(const struct monitor_gpu *g, bool *ok) {
        *ok = g->utilization >= 0;
        return g->utilization / 100.0;
}
static double g_temp(const struct monitor_gpu *g, bool *ok) {
        *ok = g->temperature >= 0;
        return g->temperature;
}
static double g_power(const struct monitor_gpu *g, bool *ok) {
        *ok = g->power_mw >= 0;
        return (double)g->power_mw / 1000.0;
}
static double g_healthy(const struct monitor_gpu *g, bool *ok) {
        *ok = true;
        return g->healthy;
}
static double g_alloc(const struct monitor_gpu *g, bool *ok) {
        *ok = g->allocated >= 0;
        return g->allocated;
}

/* Indices of attributed processes with a container, ordered by (gpu, container id). */
static int cmp_container(const void *a, const void *b, void *ud) {
        const struct monitor_snapshot *s = ud;
        const struct monitor_process *x = &s->procs[*(const size_t *)a];
        const struct monitor_process *y = &s->procs[*(const size_t *)b];
        if (x->gpu != y->gpu)
                return x->gpu < y->gpu ? -1 : 1;
        return strcmp(x->cg.container_id, y->cg.container_id);
}

static void format_processes(struct metrics_text *t, const struct monitor_snapshot *s) {
        static const struct {
                const char *name, *help;
        } fam[] = {
                { "gpuslice_process_gpu_memory_used_bytes", "GPU memory used by a process, in bytes (NVML)." },
                { "gpuslice_process_sm_utilization_ratio", "Share of the GPU's streaming multiprocessors a process "
                                                           "kept busy over the last sample period (0..1)." },
        };
        for (size_t f = 0; f < ELEMENTSOF(fam); f++) {
                bool any = false;
                for (size_t i = 0; i < s->n_procs; i++) {
                        const struct monitor_process *p = &s->procs[i];
                        double v;
                        if (f == 0 && p->memory != UINT64_MAX)
                                v = (double)p->memory;
                        else if (f == 1 && p->sm >= 0)
                                v = p->sm / 100.0;
                        else
                                continue;
                        if (!any)
                                ref_family(t, fam[f].name, "gauge", fam[f].help);
                        any = true;
                        char pid[16];
                        snprintf(pid, sizeof pid, "%u", p->pid);
                        struct gpu_labels l = gpu_labels(s, p->gpu);
                        const char *labels[] = { "pid",        pid,     "process",  p->comm,     "namespace",
                                                 p->namespace, "pod",   p->pod,     "container", p->container,
                                                 "gpu_index",  l.index, "gpu_uuid", l.uuid,      "gpu_model",
                                                 l.model,      NULL };
                        ref_sample(t, fam[f].name, labels, v);
                }
        }
}

struct container_sum {
        const struct monitor_process *first;
        uint64_t memory;
        int sm;
        bool memory_known, sm_known;
};

/* Calls fn once per (gpu, container) with the sums over its processes. */
static int for_each_container(const struct monitor_snapshot *s, void (*fn)(void *ud, const struct container_sum *c),
                              void *ud) {
        size_t n = 0, *idx = malloc((s->n_procs ? s->n_procs : 1) * sizeof *idx);
        if (!idx)
                return -ENOMEM;
        for (size_t i = 0; i < s->n_procs; i++)
                if (s->procs[i].attributed && s->procs[i].cg.container_id[0])
                        idx[n++] = i;
        qsort_r(idx, n, sizeof *idx, cmp_container, (void *)s);
        for (size_t i = 0; i < n;) {
                struct container_sum c = { .first = &s->procs[idx[i]] };
                size_t j = i;
                for (; j < n && cmp_container(&idx[i], &idx[j], (void *)s) == 0; j++) {
                        const struct monitor_process *p = &s->procs[idx[j]];
                        if (p->memory != UINT64_MAX) {
                                c.memory += p->memory;
                                c.memory_known = true;
                        }
                        if (p->sm >= 0) {
                                c.sm += p->sm;
                                c.sm_known = true;
                        }
                }
                fn(ud, &c);
                i = j;
        }
        free(idx);
        return 0;
}

struct fam_ctx {
        struct metrics_text *t;
        const struct monitor_snapshot *s;
        int which;
        bool any;
};

static void container_sample(void *ud, const struct container_sum *c) {
        struct fam_ctx *x = ud;
        static const char *const names[] = { "gpuslice_container_gpu_memory_used_bytes",
                                             "gpuslice_container_sm_utilization_ratio" };
        static const char *const helps[] = {
                "GPU memory used by all processes of a container on one GPU, in bytes.",
                "Share of one GPU's streaming multiprocessors a container's processes kept busy (0..1).",
        };
        if ((x->which == 0 && !c->memory_known) || (x->which == 1 && !c->sm_known))
                return;
        if (!x->any)
                ref_family(x->t, names[x->which], "gauge", helps[x->which]);
        x->any = true;
        const struct monitor_process *p = c->first;
        struct gpu_labels l = gpu_labels(x->s, p->gpu);
        const char *labels[] = { "namespace",
                                 p->namespace,
                                 "pod",
                                 p->pod,
                                 "container",
                                 p->container,
                                 "container_id",
                                 p->cg.container_id,
                                 "gpu_index",
                                 l.index,
                                 "gpu_uuid",
                                 l.uuid,
                                 "gpu_model",
                                 l.model,
                                 NULL };
        double v = x->which == 0 ? (double)c->memory : MIN(c->sm, 100) / 100.0;
        ref_sample(x->t, names[x->which], labels, v);
}

/* gpu-manager: per container (all GPUs together), labels pod_name, namespace, node, container_name. */
static int cmp_container_id(const void *a, const void *b, void *ud) {
        const struct monitor_snapshot *s = ud;
        return strcmp(s->procs[*(const size_t *)a].cg.container_id, s->procs[*(const size_t *)b].cg.container_id);
}

static void format_compat_gpu_manager(struct metrics_text *t, const struct monitor_snapshot *s, const char *node) {
        static const char *const names[] = { "container_gpu_utilization", "container_gpu_memory_total" };
        static const char *const helps[] = {
                "GPU utilization of a container in percent (gpu-manager compatible; sum over its GPUs).",
                "GPU memory used by a container in MiB (gpu-manager compatible; sum over its GPUs).",
        };
        size_t n = 0, *idx = malloc((s->n_procs ? s->n_procs : 1) * sizeof *idx);
        if (!idx) {
                t->b.no_mem = true;
                return;
        }
        for (size_t i = 0; i < s->n_procs; i++)
                if (s->procs[i].attributed && s->procs[i].cg.container_id[0] && s->procs[i].pod[0])
                        idx[n++] = i;
        qsort_r(idx, n, sizeof *idx, cmp_container_id, (void *)s);
        for (int f = 0; f < 2; f++) {
                if (n)
                        ref_family(t, names[f], "gauge", helps[f]);
                for (size_t i = 0; i < n;) {
                        const struct monitor_process *p = &s->procs[idx[i]];
                        double sum = 0;
                        size_t j = i;
                        for (; j < n && cmp_container_id(&idx[i], &idx[j], (void *)s) == 0; j++) {
                                const struct monitor_process *q = &s->procs[idx[j]];
                                if (f == 0 && q->sm > 0)
                                        sum += q->sm;
                                if (f == 1 && q->memory != UINT64_MAX)
                                        sum += (double)q->memory / MIB;
                        }
                        const char *labels[] = { "pod_name", p->pod,           "namespace",  p->namespace, "node",
                                                 node,       "container_name", p->container, NULL };
                        ref_sample(t, names[f], labels, f == 1 ? (double)(uint64_t)sum : sum);
                        i = j;
                }
        }
        free(idx);
}

/* The shares the node agent handed out, per container and GPU (HAMi-style limit visibility). */
static void format_limits(struct metrics_text *t, const struct monitor_snapshot *s) {
        static const char *const names[] = { "gpuslice_container_gpu_memory_limit_bytes",
                                             "gpuslice_container_gpu_core_share_ratio" };
        static const char *const helps[] = {
                "GPU memory the node agent granted a container on one GPU, in bytes (absent: no memory limit).",
                "Share of one GPU's compute the node agent granted a container (0..1; absent: no compute limit).",
        };
        for (int f = 0; f < 2; f++) {
                bool any = false;
                for (size_t i = 0; i < s->n_limits; i++) {
                        const struct monitor_limit *l = &s->limits[i];
                        if ((f == 0 && !l->memory_bytes) || (f == 1 && !l->core_percent))
                                continue;
                        if (!any)
                                ref_family(t, names[f], "gauge", helps[f]);
                        any = true;
                        char index[16];
                        const char *uuid = "", *model = "";
                        snprintf(index, sizeof index, "%u", l->gpu_index);
                        for (size_t g = 0; g < s->n_gpus; g++)
                                if (s->gpus[g].index == l->gpu_index) {
                                        uuid = s->gpus[g].uuid;
                                        model = s->gpus[g].name;
                                }
                        const char *labels[] = { "namespace",  l->namespace, "pod", l->pod,     "container",
                                                 l->container, "gpu_index",  index, "gpu_uuid", uuid,
                                                 "gpu_model",  model,        NULL };
                        ref_sample(t, names[f], labels,
                                   f == 0 ? (double)l->memory_bytes : MIN(l->core_percent, 100u) / 100.0);
                }
        }
}

/* gpu-manager's requests: per container over all its GPUs, vcuda-core percent and MiB. The
 * limits are sorted by container, so one container's GPUs are adjacent. */
static void format_compat_gpu_manager_requests(struct metrics_text *t, const struct monitor_snapshot *s,
                                               const char *node) {
        static const char *const names[] = { "container_request_gpu_utilization", "container_request_gpu_memory" };
        static const char *const helps[] = {
                "GPU compute requested by a container in percent of one GPU (gpu-manager compatible; sum over its "
                "GPUs).",
                "GPU memory requested by a container in MiB (gpu-manager compatible; sum over its GPUs).",
        };
        for (int f = 0; f < 2; f++) {
                if (s->n_limits)
                        ref_family(t, names[f], "gauge", helps[f]);
                for (size_t i = 0; i < s->n_limits;) {
                        const struct monitor_limit *l = &s->limits[i];
                        uint64_t sum = 0;
                        size_t j = i;
                        for (; j < s->n_limits && streq(s->limits[j].namespace, l->namespace) &&
                               streq(s->limits[j].pod, l->pod) && streq(s->limits[j].container, l->container);
                             j++)
                                sum += f == 0 ? s->limits[j].core_percent : s->limits[j].memory_bytes;
                        const char *labels[] = { "pod_name", l->pod,           "namespace",  l->namespace, "node",
                                                 node,       "container_name", l->container, NULL };
                        ref_sample(t, names[f], labels, f == 0 ? (double)sum : (double)(sum >> 20));
                        i = j;
                }
        }
}

static void format_compat_pod_mem(struct metrics_text *t, const struct monitor_snapshot *s) {
        bool any = false;
        for (size_t i = 0; i < s->n_procs; i++) {
                const struct monitor_process *p = &s->procs[i];
                if (!p->attributed || !p->pod[0] || p->memory == UINT64_MAX)
                        continue;
                if (!any)
                        ref_family(
                                t, "pod_used_gpu_mem_MB", "gauge",
                                "GPU memory used by a process of a pod, in MiB (nvidia-gpu-mem-monitor compatible).");
                any = true;
                char pid[16];
                snprintf(pid, sizeof pid, "%u", p->pid);
                const char *labels[] = { "pod_name",
                                         p->pod,
                                         "pod_namespace",
                                         p->namespace,
                                         "gpu_uuid",
                                         s->gpus[p->gpu].uuid,
                                         "gpu_name",
                                         s->gpus[p->gpu].name,
                                         "app_pid",
                                         pid,
                                         NULL };
                /* whole MiB, truncated as the exporter this mimics reports them */
                ref_sample(t, "pod_used_gpu_mem_MB", labels,
                           (double)(p->memory / (1024 * 1024))); // NOLINT(bugprone-integer-division)
        }
}

int monitor_format_metrics_ref(const struct monitor_snapshot *s, unsigned compat, const char *node_name, char **ret,
                               size_t *ret_len) {
        struct metrics_text t = { 0 };
        if (s) {
                gpu_family(&t, s, "gpuslice_gpu_memory_used_bytes", "GPU memory in use, in bytes (NVML).", g_mem_used);
                gpu_family(&t, s, "gpuslice_gpu_memory_total_bytes", "GPU memory size, in bytes (NVML).", g_mem_total);
                gpu_family(&t, s, "gpuslice_gpu_utilization_ratio",
                           "Share of the last sample period a kernel ran on the GPU (0..1).", g_util);
                gpu_family(&t, s, "gpuslice_gpu_temperature_celsius", "GPU core temperature, in degrees Celsius.",
                           g_temp);
                gpu_family(&t, s, "gpuslice_gpu_power_watts", "GPU power draw, in watts.", g_power);
                /* the one change since the freeze: this family's HELP text (the agent's health joined it) */
                gpu_family(&t, s, "gpuslice_gpu_healthy",
                           "1 when the GPU is healthy (NVML answers normally; in the node agent also: listed Healthy "
                           "to kubelet), else 0.",
                           g_healthy);
                gpu_family(&t, s, "gpuslice_gpu_allocated_ratio",
                           "Share of the GPU allocated to containers (0..1): whole GPUs count 1.", g_alloc);
                format_processes(&t, s);
                format_limits(&t, s);
                for (int w = 0; w < 2; w++) {
                        struct fam_ctx x = { .t = &t, .s = s, .which = w };
                        if (for_each_container(s, container_sample, &x) < 0)
                                t.b.no_mem = true;
                }
                if (compat & CONFIG_COMPAT_POD_GPU_MEM)
                        format_compat_pod_mem(&t, s);
                if (compat & CONFIG_COMPAT_GPU_MANAGER) {
                        format_compat_gpu_manager(&t, s, node_name ? node_name : "");
                        format_compat_gpu_manager_requests(&t, s, node_name ? node_name : "");
                }

                ref_family(&t, "gpuslice_monitor_last_sample_timestamp_seconds", "gauge",
                           "When the metrics above were sampled (Unix time).");
                ref_sample(&t, "gpuslice_monitor_last_sample_timestamp_seconds", NULL, (double)s->time_us / 1e6);
                ref_family(&t, "gpuslice_monitor_sample_duration_seconds", "gauge", "How long the last sample took.");
                ref_sample(&t, "gpuslice_monitor_sample_duration_seconds", NULL, s->duration_s);
                ref_family(&t, "gpuslice_monitor_sample_query_errors", "gauge",
                           "Queries that failed in the last sample (NVML, /proc, the container runtime).");
                ref_sample(&t, "gpuslice_monitor_sample_query_errors", NULL, s->errors);
        }
        metrics_registry_format(&t);
        return metrics_text_finish(&t, ret, ret_len);
}
