/* SPDX-License-Identifier: Apache-2.0 */
/*
 * monitor — who uses which GPU: samples NVML (per GPU memory, utilization, temperature, power,
 * health; per process memory and SM utilization; per MIG device memory and processes, each process
 * attributed to its MIG device), attributes every GPU process to a container
 * and pod (monitor/cgroup.h), names them (CRI or Engine API, falling back to ids), and publishes
 * the result as an immutable, reference-counted snapshot. Scrapes format the current snapshot;
 * they never sample (sampling is decoupled from scraping, so a scrape stays cheap).
 *
 * Two ways to use it:
 *  - the whole service (sampler thread + HTTP server with /metrics and /healthz), as
 *    `gpuslice monitor` does and the node agent does inside `gpuslice node`:
 *
 *      struct monitor_options o;
 *      monitor_options_init(&o);
 *      o.proc_root = cfg->proc_root; o.engine_url = cfg->engine_url; o.compat = cfg->metrics_compat;
 *      o.interval_ms = cfg->sample_interval_sec * 1000;
 *      struct monitor_service *svc;
 *      r = monitor_service_start(&o, nvml, cfg->metrics_address, &svc);   // nvml may be NULL
 *      ...
 *      svc = monitor_service_stop(svc);
 *
 *  - one synchronous sample (`gpuslice ps`, tests): monitor_new + monitor_sample + monitor_snapshot.
 *
 * Threads: monitor_snapshot/monitor_snapshot_unref and the formatting functions may be called
 * from any thread; monitor_sample is called by one thread at a time (the sampler).
 * Must never: fail a whole sample because one GPU or one process misbehaves (a lost GPU is
 * reported unhealthy, a vanished PID is reported without attribution), or log (the service
 * counts failures in gpuslice_monitor_errors_total; callers log).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "monitor/cgroup.h"
#include "nvml/nvml.h"

/* One container's share of one GPU as the node agent handed it out (its allocation records,
 * named through PodResources). */
struct monitor_limit {
        char namespace[64], pod[256], container[64];
        unsigned gpu_index;    /* NVML index */
        bool whole;            /* the GPU is held whole: all its memory and compute */
        uint64_t memory_bytes; /* memory granted (whole: the GPU's total, filled in by the sampler); 0 = none */
        unsigned core_percent; /* compute granted, percent of the GPU (whole: 100); 0 = none */
        bool has_refusals;     /* a memory share the interposer enforces: refusals below are known */
        uint64_t refusals;     /* allocations the interposer refused for going past memory_bytes, so far */
};

struct monitor_options {
        const char *proc_root;         /* NULL = "/proc" */
        const char *engine_url;        /* Engine API for names and allocation; NULL/"" = off */
        const char *cri_socket;        /* CRI runtime socket for pod names; NULL/"" = off (see monitor_names) */
        const char *nvml_library;      /* when the monitor opens NVML itself; NULL = libnvidia-ml.so.1 */
        const char *node_name;         /* the `node` label of compatibility metrics; NULL = hostname */
        unsigned interval_ms;          /* sampling period; 0 = 5000 */
        unsigned compat;               /* CONFIG_COMPAT_* bits (config/config.h) */
        const char *nfd_features_file; /* the service (re)writes the node labels there (labels/labels.h)
                                        * whenever they change; NULL/"" = off */
        /* How much of GPU `index` is allocated (0..1), from the agent's state; NULL = from the
         * Engine API's running containers when engine_url is set, else not reported. Returns 0
         * with *ret, or <0 unknown. Called on the sampler thread. */
        int (*gpu_allocated)(void *userdata, unsigned index, double *ret);
        /* Whether GPU `index` is healthy as the node agent lists it to kubelet (a critical Xid makes
         * it unhealthy until its quiet period has passed, though NVML answers); NULL = NVML's answer
         * alone. Returns 0 with *ret, or <0 unknown. Called on the sampler thread. */
        int (*gpu_healthy)(void *userdata, unsigned index, bool *ret);
        /* Every container's GPU shares from the agent's records (whole GPUs and fractions, one
         * entry per container and GPU); NULL = none. Returns 0 with a malloc'd array (NULL when
         * empty) or <0. Called on the sampler thread. */
        int (*container_limits)(void *userdata, struct monitor_limit **ret, size_t *ret_n);
        void *userdata;
};

void monitor_options_init(struct monitor_options *o);

struct monitor_gpu {
        unsigned index;
        char uuid[96], name[96];
        bool healthy; /* NVML answers normally (and the agent lists it healthy: monitor_options.gpu_healthy) */
        uint64_t memory_used, memory_total; /* bytes */
        int utilization;                    /* percent, -1 unknown */
        int temperature;                    /* °C, -1 unknown */
        int64_t power_mw;                   /* -1 unknown */
        double allocated;                   /* 0..1, <0 unknown */
};

/*
 * Interned strings: every distinct name is stored once per snapshot and process entries point at
 * it (thousands of processes share a handful of process, namespace and container names). Not
 * thread-safe; a snapshot's pool is written only while the snapshot is built.
 */
struct monitor_names;
struct monitor_names *monitor_names_new(void);
struct monitor_names *monitor_names_free(struct monitor_names *n);
/* The pool's copy of s, of at most max_len bytes of it (stopping at a NUL); the same pointer for
 * equal strings. "" for an empty s. NULL only when out of memory. */
const char *monitor_names_intern(struct monitor_names *n, const char *s, size_t max_len);
/* Bytes the pool holds (strings, table, chunk headers): for benchmarks. */
size_t monitor_names_size(const struct monitor_names *n);

/* One MIG device of a GPU with MIG on (NVML answers utilization neither per GPU nor per instance then). */
struct monitor_mig {
        unsigned gpu;   /* index into snapshot->gpus */
        unsigned index; /* MIG index */
        unsigned gpu_instance, compute_instance;
        char profile[32];                   /* "1g.10gb", "1c.3g.40gb" */
        char uuid[96];                      /* "MIG-…" */
        uint64_t memory_used, memory_total; /* bytes, its GPU instance's */
        unsigned processes;
};

struct monitor_process {
        unsigned pid;
        unsigned gpu;     /* index into snapshot->gpus */
        unsigned mig;     /* 1 + index into snapshot->migs; 0: not on a MIG device (the GPU has MIG off) */
        uint64_t memory;  /* bytes; UINT64_MAX unknown */
        int sm;           /* percent, -1 unknown */
        bool attributed;  /* cgroup read (false: vanished or unreadable) */
        const char *comm; /* process name, "" if gone; interned, never NULL */
        struct cgroup_info cg;
        /* names: Kubernetes (namespace, pod, container) or the engine's container name in
         * `container` on a plain host; falling back to the pod uid and the short container id.
         * Interned in the snapshot's pool (or static strings); never NULL, "" when unknown. */
        const char *namespace, *pod, *container;
};

struct monitor_snapshot {
        unsigned refs;     /* atomic */
        uint64_t time_us;  /* when the sample was taken (CLOCK_REALTIME µs) */
        double duration_s; /* how long the sample took */
        char driver_version[80];
        int cuda_version;
        size_t n_gpus;
        struct monitor_gpu *gpus;
        size_t n_procs;
        struct monitor_process *procs;
        size_t n_migs;
        struct monitor_mig *migs;     /* MIG devices, by GPU then MIG index */
        struct monitor_names *names;  /* the strings procs point at; freed with the snapshot */
        unsigned errors;              /* queries that failed in this sample */
        size_t n_limits;              /* from monitor_options.container_limits, sorted by */
        struct monitor_limit *limits; /* namespace, pod, container, GPU index */
};

struct monitor;

/* A monitor over `nvml` (borrowed, must outlive the monitor), or opening its own NVML when
 * nvml is NULL (-ELIBACC etc. as nvml_open). The options' strings are copied. */
int monitor_new(const struct monitor_options *o, struct nvml *nvml, struct monitor **ret);
struct monitor *monitor_free(struct monitor *m);

/* Take one sample now and publish it. 0, or -errno when the node as a whole cannot be read
 * (the previous snapshot then stays). */
int monitor_sample(struct monitor *m);

/* The current snapshot with a reference taken (NULL before the first sample). */
struct monitor_snapshot *monitor_snapshot(struct monitor *m);
void monitor_snapshot_unref(struct monitor_snapshot *s);

/* Prometheus text of a snapshot (NULL: only the agent's own metrics), compat families as in
 * `compat`, then the registry of metrics.h. *ret malloc'ed. 0 or -ENOMEM. */
int monitor_format_metrics(const struct monitor_snapshot *s, unsigned compat, const char *node_name, char **ret,
                           size_t *ret_len);

/* Node labels (labels/labels.h) from the last sample's inventory, written atomically to path
 * unless the file already holds exactly that text. 1 written, 0 unchanged, -errno (-ENODATA
 * before the first sample). Called on the sampler thread (not thread-safe with monitor_sample). */
int monitor_write_labels(struct monitor *m, const char *path);

/* Sort helper for display: by GPU, then memory (largest first), then pid. */
void monitor_sort_processes(struct monitor_snapshot *s);

/* Set names of an attributed process from what the runtime knows (or the fallbacks), interned in
 * `names`. 0, or -ENOMEM (the names are then ""). */
struct engine_container;
int monitor_name_process(struct monitor_names *names, struct monitor_process *p, const struct engine_container *c,
                         size_t n);

/* ---- the service: sampler thread + HTTP (/metrics, /healthz) ---- */

struct monitor_service;

/*
 * Start sampling every o->interval_ms on a thread of its own (the first sample is taken before
 * this returns, so the first scrape has data) and serve /metrics and /healthz on
 * metrics_address (HOST:PORT; port 0 = any, see monitor_service_port). 0 or -errno
 * (-EADDRINUSE when the address is taken, -EINVAL bad address, NVML errors as monitor_new).
 * /healthz answers 200 "ok" while samples succeed and are fresh (within 3 periods), else 503.
 */
int monitor_service_start(const struct monitor_options *o, struct nvml *nvml, const char *metrics_address,
                          struct monitor_service **ret);
unsigned monitor_service_port(const struct monitor_service *s);
/* Stop the thread and the server, free. NULL is fine. Returns NULL. */
struct monitor_service *monitor_service_stop(struct monitor_service *s);
