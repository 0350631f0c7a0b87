/* SPDX-License-Identifier: Apache-2.0 */
/*
 * format — a monitor snapshot as Prometheus text: per GPU, per process, per container, the
 * compatibility families behind options, the sampler's own gauges and the agent's registry.
 * Base units: bytes, ratios 0..1, celsius, watts (the compatibility families keep their own
 * units: MiB and percent). Reads the snapshot only; must never modify it or sample.
 *
 * Written for a scrape of 8 GPUs x 256 processes (1.8 MB of text) to cost a few milliseconds: each
 * GPU's labels are escaped once, a process's or container's label set is written once and copied
 * from that line for its second family, containers are sorted once for both families,
 * numbers are written without printf where they are whole. The output is byte for byte what the
 * formatter before this one wrote (tests/unit/monitor-format-ref.c, test-monitor-format-ref).
 */
#include <inttypes.h>

#include "config/config.h"
#include "metrics/metrics.h"
#include "monitor/monitor.h"

#define MIB (1024.0 * 1024.0)

/* A GPU's labels as plain strings (the MIG families, which have their own label sets). */
struct gpu_labels {
        char index[16];
        const char *uuid, *model;
};

static struct gpu_labels gpu_labels(const struct monitor_snapshot *s, unsigned g) {
        struct gpu_labels l = { .uuid = s->gpus[g].uuid, .model = s->gpus[g].name };
        snprintf(l.index, sizeof l.index, "%u", s->gpus[g].index);
        return l;
}

/* Every GPU's labels, escaped once: gpu_index="0",gpu_uuid="GPU-…",gpu_model="…" (spans into text). */
struct gpu_blocks {
        struct metrics_text text;
        struct metrics_span *span; /* n_gpus */
};

static int gpu_blocks_init(struct gpu_blocks *b, const struct monitor_snapshot *s) {
        *b = (struct gpu_blocks){ 0 };
        b->span = calloc(s->n_gpus ? s->n_gpus : 1, sizeof *b->span);
        if (!b->span)
                return -ENOMEM;
        for (size_t g = 0; g < s->n_gpus; g++) {
                size_t off = b->text.b.len;
                metrics_text_append(&b->text, "gpu_index=\"", 11);
                metrics_text_uint(&b->text, s->gpus[g].index);
                metrics_text_append(&b->text, "\",gpu_uuid=\"", 12);
                metrics_text_escaped(&b->text, s->gpus[g].uuid);
                metrics_text_append(&b->text, "\",gpu_model=\"", 13);
                metrics_text_escaped(&b->text, s->gpus[g].name);
                metrics_text_append(&b->text, "\"", 1);
                b->span[g] = (struct metrics_span){ off, b->text.b.len - off };
        }
        return b->text.b.no_mem ? -ENOMEM : 0;
}

static void gpu_blocks_done(struct gpu_blocks *b) {
        metrics_text_done(&b->text);
        free(b->span);
}

static void put_gpu_block(struct metrics_text *t, const struct gpu_blocks *b, unsigned g) {
        metrics_text_append(t, b->text.b.p + b->span[g].off, b->span[g].len);
}

/* name{ ... } value\n written in pieces: open, the labels, close. */
static void sample_open(struct metrics_text *t, const char *name) {
        metrics_text_append(t, name, strlen(name));
        metrics_text_append(t, "{", 1);
}

static void sample_close(struct metrics_text *t, double value) {
        metrics_text_append(t, "} ", 2);
        metrics_text_value(t, value);
        metrics_text_append(t, "\n", 1);
}

/* ,key="escaped value" (the first label is written by the caller without the comma) */
static void put_label(struct metrics_text *t, const char *key_quoted, size_t key_len, const char *value) {
        metrics_text_append(t, key_quoted, key_len);
        metrics_text_escaped(t, value);
}
#define PUT_LABEL(t, lit, v) put_label(t, lit, sizeof(lit) - 1, v)

static void gpu_family(struct metrics_text *t, const struct monitor_snapshot *s, const struct gpu_blocks *b,
                       const char *name, const char *help, double (*get)(const struct monitor_gpu *g, bool *ok)) {
        bool any = false;
        for (size_t g = 0; g < s->n_gpus; g++) {
                bool ok = true;
                double v = get(&s->gpus[g], &ok);
                if (!ok)
                        continue;
                if (!any)
                        metrics_text_family(t, name, "gauge", help);
                any = true;
                sample_open(t, name);
                put_gpu_block(t, b, (unsigned)g);
                sample_close(t, v);
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

static void process_labels(struct metrics_text *t, const struct monitor_process *p, const struct gpu_blocks *b) {
        metrics_text_append(t, "pid=\"", 5);
        metrics_text_uint(t, p->pid);
        PUT_LABEL(t, "\",process=\"", p->comm);
        PUT_LABEL(t, "\",namespace=\"", p->namespace);
        PUT_LABEL(t, "\",pod=\"", p->pod);
        PUT_LABEL(t, "\",container=\"", p->container);
        metrics_text_append(t, "\",", 2);
        put_gpu_block(t, b, p->gpu);
}

/*
 * The lines a first family wrote, read back in order for the second: a line's labels are between
 * its first '{' (metric names have none) and its last '}' (the value after it has none). No array of
 * positions is kept, so the second family costs no memory beyond the text.
 */
struct line_cursor {
        size_t pos, end;
};

static struct metrics_span next_line_labels(const struct metrics_text *t, struct line_cursor *c) {
        const char *b = t->b.p ? t->b.p : "";
        const char *nl = c->pos < c->end ? memchr(b + c->pos, '\n', c->end - c->pos) : NULL;
        if (!nl)
                return (struct metrics_span){ 0 };
        const char *open = memchr(b + c->pos, '{', (size_t)(nl - (b + c->pos)));
        const char *close = nl;
        while (close > b + c->pos && *close != '}')
                close--;
        c->pos = (size_t)(nl - b) + 1;
        if (!open || close <= open)
                return (struct metrics_span){ 0 };
        return (struct metrics_span){ (size_t)(open - b) + 1, (size_t)(close - open) - 1 };
}

/* Both per-process families; a process's labels are written for the first and copied for the second. */
static void format_processes(struct metrics_text *t, const struct monitor_snapshot *s, const struct gpu_blocks *b) {
        static const char *const name[] = { "gpuslice_process_gpu_memory_used_bytes",
                                            "gpuslice_process_sm_utilization_ratio" };
        static const char *const help[] = { "GPU memory used by a process, in bytes (NVML).",
                                            "Share of the GPU's streaming multiprocessors a process kept busy over "
                                            "the last sample period (0..1)." };
        struct line_cursor first = { 0 };
        for (int f = 0; f < 2; f++) {
                bool any = false;
                for (size_t i = 0; i < s->n_procs; i++) {
                        const struct monitor_process *p = &s->procs[i];
                        bool has_mem = p->memory != UINT64_MAX;
                        struct metrics_span again = { 0 };
                        if (f == 1 && has_mem)
                                again = next_line_labels(t, &first); /* this process's line of family 0 */
                        if ((f == 0 && !has_mem) || (f == 1 && p->sm < 0))
                                continue;
                        double v = f == 0 ? (double)p->memory : p->sm / 100.0;
                        if (!any)
                                metrics_text_family(t, name[f], "gauge", help[f]);
                        if (!any && f == 0)
                                first.pos = t->b.len;
                        any = true;
                        if (again.len) {
                                metrics_text_sample_span(t, name[f], again, v);
                                continue;
                        }
                        sample_open(t, name[f]);
                        process_labels(t, p, b);
                        sample_close(t, v);
                }
                if (f == 0)
                        first.end = any ? t->b.len : 0;
        }
}

/* MIG devices (GPUs with MIG on). NVML has no utilization per GPU or per instance then: memory and
 * processes are what there is. Processes are tied to their MIG device by an info family. */
static void format_mig(struct metrics_text *t, const struct monitor_snapshot *s) {
        static const struct {
                const char *name, *help;
        } fam[] = {
                { "gpuslice_mig_device_info", "A MIG device (a compute instance of a GPU instance): always 1." },
                { "gpuslice_mig_device_memory_used_bytes",
                  "Memory in use in the MIG device's GPU instance, in bytes (its compute instances share it)." },
                { "gpuslice_mig_device_memory_total_bytes", "Memory of the MIG device's GPU instance, in bytes." },
                { "gpuslice_mig_device_processes", "Processes running on the MIG device." },
        };
        for (size_t f = 0; f < ELEMENTSOF(fam) && s->n_migs; f++) {
                metrics_text_family(t, fam[f].name, "gauge", fam[f].help);
                for (size_t i = 0; i < s->n_migs; i++) {
                        const struct monitor_mig *m = &s->migs[i];
                        char idx[16], gi[16], ci[16];
                        snprintf(idx, sizeof idx, "%u", m->index);
                        snprintf(gi, sizeof gi, "%u", m->gpu_instance);
                        snprintf(ci, sizeof ci, "%u", m->compute_instance);
                        struct gpu_labels l = gpu_labels(s, m->gpu);
                        const char *labels[] = {
                                "gpu_index",        l.index, "gpu_uuid", l.uuid,     "mig_index",    idx,
                                "mig_uuid",         m->uuid, "profile",  m->profile, "gpu_instance", gi,
                                "compute_instance", ci,      NULL
                        };
                        double v = f == 0   ? 1
                                   : f == 1 ? (double)m->memory_used
                                   : f == 2 ? (double)m->memory_total
                                            : m->processes;
                        metrics_text_sample(t, fam[f].name, labels, v);
                }
        }
        bool any = false;
        for (size_t i = 0; i < s->n_procs; i++) {
                const struct monitor_process *p = &s->procs[i];
                if (!p->mig || p->mig > s->n_migs)
                        continue;
                const struct monitor_mig *m = &s->migs[p->mig - 1];
                if (!any)
                        metrics_text_family(t, "gpuslice_process_mig_device_info", "gauge",
                                            "The MIG device a GPU process runs on: always 1.");
                any = true;
                char pid[16], gi[16], ci[16];
                snprintf(pid, sizeof pid, "%u", p->pid);
                snprintf(gi, sizeof gi, "%u", m->gpu_instance);
                snprintf(ci, sizeof ci, "%u", m->compute_instance);
                struct gpu_labels l = gpu_labels(s, p->gpu);
                const char *labels[] = { "pid",     pid,        "gpu_index",    l.index, "mig_uuid",         m->uuid,
                                         "profile", m->profile, "gpu_instance", gi,      "compute_instance", ci,
                                         NULL };
                metrics_text_sample(t, "gpuslice_process_mig_device_info", labels, 1);
        }
}

struct container_sum {
        const struct monitor_process *first;
        uint64_t memory;
        int sm;
        bool memory_known, sm_known;
};

/* The sums over the processes of the group starting at idx[i] (sorted by (gpu, container id));
 * returns where the next group starts. */
static size_t container_group(const struct monitor_snapshot *s, const size_t *idx, size_t n, size_t i,
                              struct container_sum *ret) {
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
        *ret = c;
        return j;
}

static void container_labels(struct metrics_text *t, const struct monitor_process *p, const struct gpu_blocks *b) {
        metrics_text_append(t, "namespace=\"", 11);
        metrics_text_escaped(t, p->namespace);
        PUT_LABEL(t, "\",pod=\"", p->pod);
        PUT_LABEL(t, "\",container=\"", p->container);
        PUT_LABEL(t, "\",container_id=\"", p->cg.container_id);
        metrics_text_append(t, "\",", 2);
        put_gpu_block(t, b, p->gpu);
}

/* Both per-container families (all processes of one container on one GPU, summed); the attributed
 * processes with a container are sorted once for both. */
static int format_containers(struct metrics_text *t, const struct monitor_snapshot *s, const struct gpu_blocks *b) {
        static const char *const names[] = { "gpuslice_container_gpu_memory_used_bytes",
                                             "gpuslice_container_sm_utilization_ratio" };
        static const char *const helps[] = {
                "GPU memory used by all processes of a container on one GPU, in bytes.",
                "Share of one GPU's streaming multiprocessors a container's processes kept busy (0..1).",
        };
        size_t n = 0, *idx = malloc((s->n_procs ? s->n_procs : 1) * sizeof *idx);
        if (!idx)
                return -ENOMEM;
        for (size_t i = 0; i < s->n_procs; i++)
                if (s->procs[i].attributed && s->procs[i].cg.container_id[0])
                        idx[n++] = i;
        qsort_r(idx, n, sizeof *idx, cmp_container, (void *)s);
        struct line_cursor first = { 0 };
        for (int f = 0; f < 2; f++) {
                bool any = false;
                struct container_sum c;
                for (size_t i = 0, next; i < n; i = next) {
                        next = container_group(s, idx, n, i, &c);
                        struct metrics_span again = { 0 };
                        if (f == 1 && c.memory_known)
                                again = next_line_labels(t, &first);
                        if ((f == 0 && !c.memory_known) || (f == 1 && !c.sm_known))
                                continue;
                        if (!any)
                                metrics_text_family(t, names[f], "gauge", helps[f]);
                        if (!any && f == 0)
                                first.pos = t->b.len;
                        any = true;
                        double v = f == 0 ? (double)c.memory : MIN(c.sm, 100) / 100.0;
                        if (again.len) {
                                metrics_text_sample_span(t, names[f], again, v);
                                continue;
                        }
                        sample_open(t, names[f]);
                        container_labels(t, c.first, b);
                        sample_close(t, v);
                }
                if (f == 0)
                        first.end = any ? t->b.len : 0;
        }
        free(idx);
        return 0;
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
                        metrics_text_family(t, names[f], "gauge", helps[f]);
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
                        metrics_text_sample(t, names[f], labels, f == 1 ? (double)(uint64_t)sum : sum);
                        i = j;
                }
        }
        free(idx);
}

/* The shares the node agent handed out, per container and GPU (HAMi-style limit visibility), and the
 * interposer's refusals for the memory shares (a counter). */
static void format_limits(struct metrics_text *t, const struct monitor_snapshot *s) {
        static const struct {
                const char *name, *type, *help;
        } fam[] = {
                { "gpuslice_container_gpu_memory_limit_bytes", "gauge",
                  "GPU memory the node agent granted a container on one GPU, in bytes (absent: no memory limit)." },
                { "gpuslice_container_gpu_core_share_ratio", "gauge",
                  "Share of one GPU's compute the node agent granted a container (0..1; absent: no compute limit)." },
                { "gpuslice_container_gpu_memory_refusals_total", "counter",
                  "GPU memory allocations the interposer refused a container on one GPU for going past its limit." },
        };
        for (size_t f = 0; f < ELEMENTSOF(fam); f++) {
                bool any = false;
                for (size_t i = 0; i < s->n_limits; i++) {
                        const struct monitor_limit *l = &s->limits[i];
                        if ((f == 0 && !l->memory_bytes) || (f == 1 && !l->core_percent) ||
                            (f == 2 && !l->has_refusals))
                                continue;
                        if (!any)
                                metrics_text_family(t, fam[f].name, fam[f].type, fam[f].help);
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
                        double v = f == 0   ? (double)l->memory_bytes
                                   : f == 1 ? MIN(l->core_percent, 100u) / 100.0
                                            : (double)l->refusals;
                        metrics_text_sample(t, fam[f].name, labels, v);
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
                        metrics_text_family(t, names[f], "gauge", helps[f]);
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
                        metrics_text_sample(t, names[f], labels, f == 0 ? (double)sum : (double)(sum >> 20));
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
                        metrics_text_family(
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
                metrics_text_sample(t, "pod_used_gpu_mem_MB", labels,
                                    (double)(p->memory / (1024 * 1024))); // NOLINT(bugprone-integer-division)
        }
}

int monitor_format_metrics(const struct monitor_snapshot *s, unsigned compat, const char *node_name, char **ret,
                           size_t *ret_len) {
        struct metrics_text t = { 0 };
        if (s) {
                struct gpu_blocks b;
                if (gpu_blocks_init(&b, s) < 0)
                        t.b.no_mem = true;
                static const struct {
                        const char *name, *help;
                        double (*get)(const struct monitor_gpu *g, bool *ok);
                } gfam[] = {
                        { "gpuslice_gpu_memory_used_bytes", "GPU memory in use, in bytes (NVML).", g_mem_used },
                        { "gpuslice_gpu_memory_total_bytes", "GPU memory size, in bytes (NVML).", g_mem_total },
                        { "gpuslice_gpu_utilization_ratio",
                          "Share of the last sample period a kernel ran on the GPU (0..1).", g_util },
                        { "gpuslice_gpu_temperature_celsius", "GPU core temperature, in degrees Celsius.", g_temp },
                        { "gpuslice_gpu_power_watts", "GPU power draw, in watts.", g_power },
                        { "gpuslice_gpu_healthy",
                          "1 when the GPU is healthy (NVML answers normally; in the node agent also: listed Healthy "
                          "to kubelet), else 0.",
                          g_healthy },
                        { "gpuslice_gpu_allocated_ratio",
                          "Share of the GPU allocated to containers (0..1): whole GPUs count 1.", g_alloc },
                };
                for (size_t f = 0; !t.b.no_mem && f < ELEMENTSOF(gfam); f++)
                        gpu_family(&t, s, &b, gfam[f].name, gfam[f].help, gfam[f].get);
                if (!t.b.no_mem)
                        format_processes(&t, s, &b);
                format_mig(&t, s);
                format_limits(&t, s);
                if (!t.b.no_mem && format_containers(&t, s, &b) < 0)
                        t.b.no_mem = true;
                gpu_blocks_done(&b);
                if (compat & CONFIG_COMPAT_POD_GPU_MEM)
                        format_compat_pod_mem(&t, s);
                if (compat & CONFIG_COMPAT_GPU_MANAGER) {
                        format_compat_gpu_manager(&t, s, node_name ? node_name : "");
                        format_compat_gpu_manager_requests(&t, s, node_name ? node_name : "");
                }

                metrics_text_family(&t, "gpuslice_monitor_last_sample_timestamp_seconds", "gauge",
                                    "When the metrics above were sampled (Unix time).");
                metrics_text_sample(&t, "gpuslice_monitor_last_sample_timestamp_seconds", NULL,
                                    (double)s->time_us / 1e6);
                metrics_text_family(&t, "gpuslice_monitor_sample_duration_seconds", "gauge",
                                    "How long the last sample took.");
                metrics_text_sample(&t, "gpuslice_monitor_sample_duration_seconds", NULL, s->duration_s);
                metrics_text_family(&t, "gpuslice_monitor_sample_query_errors", "gauge",
                                    "Queries that failed in the last sample (NVML, /proc, the container runtime).");
                metrics_text_sample(&t, "gpuslice_monitor_sample_query_errors", NULL, s->errors);
        }
        metrics_registry_format(&t);
        return metrics_text_finish(&t, ret, ret_len);
}
