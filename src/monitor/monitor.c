/* SPDX-License-Identifier: Apache-2.0 */
/*
 * monitor — the sampler: NVML + /proc + the container runtime → an immutable snapshot, swapped
 * in under a mutex held only for the pointer swap. Must never fail a whole sample for one GPU or
 * one process, and never log.
 */
#include "monitor/monitor.h"

#include <pthread.h>
#include <time.h>

#include "engine/engine.h"
#include "labels/labels.h"
#include "monitor/cri.h"
#include "util/util.h"

struct monitor {
        char *proc_root, *engine_url, *cri_socket, *nvml_library, *node_name;
        unsigned interval_ms, compat;
        int (*gpu_allocated)(void *userdata, unsigned index, double *ret);
        int (*gpu_healthy)(void *userdata, unsigned index, bool *ret);
        int (*container_limits)(void *userdata, struct monitor_limit **ret, size_t *ret_n);
        void *userdata;

        struct nvml *nvml;
        bool own_nvml;
        struct topo *topo;   /* the last inventory, reused between samples */
        struct mig_gpu *mig; /* scratch for one GPU's MIG side */
        bool have_topo;
        uint64_t last_seen_us[TOPO_MAX_GPUS];

        pthread_mutex_t lock; /* guards `current` only */
        struct monitor_snapshot *current;
};

void monitor_options_init(struct monitor_options *o) {
        *o = (struct monitor_options){ .interval_ms = 5000 };
}

static uint64_t now_us(clockid_t clk) {
        struct timespec ts;
        clock_gettime(clk, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int dup_opt(const char *s, char **ret) {
        *ret = NULL;
        if (!s || !s[0])
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

int monitor_new(const struct monitor_options *o, struct nvml *nvml, struct monitor **ret) {
        struct monitor *m = calloc(1, sizeof *m);
        if (!m)
                return -ENOMEM;
        pthread_mutex_init(&m->lock, NULL);
        m->interval_ms = o->interval_ms ? o->interval_ms : 5000;
        m->compat = o->compat;
        m->gpu_allocated = o->gpu_allocated;
        m->gpu_healthy = o->gpu_healthy;
        m->container_limits = o->container_limits;
        m->userdata = o->userdata;
        int r = 0;
        if (dup_opt(o->proc_root ? o->proc_root : "/proc", &m->proc_root) < 0 ||
            dup_opt(o->engine_url, &m->engine_url) < 0 || dup_opt(o->cri_socket, &m->cri_socket) < 0 ||
            dup_opt(o->nvml_library, &m->nvml_library) < 0 || dup_opt(o->node_name, &m->node_name) < 0)
                r = -ENOMEM;
        m->topo = malloc(sizeof *m->topo);
        m->mig = malloc(sizeof *m->mig);
        if (!m->topo || !m->mig)
                r = -ENOMEM;
        if (r == 0 && !nvml) {
                r = nvml_open(m->nvml_library, &nvml, NULL);
                m->own_nvml = r == 0;
        }
        if (r < 0) {
                monitor_free(m);
                return r;
        }
        m->nvml = nvml;
        *ret = m;
        return 0;
}

struct monitor *monitor_free(struct monitor *m) {
        if (!m)
                return NULL;
        monitor_snapshot_unref(m->current);
        if (m->own_nvml)
                nvml_close(m->nvml);
        pthread_mutex_destroy(&m->lock);
        free(m->topo);
        free(m->mig);
        free(m->proc_root);
        free(m->engine_url);
        free(m->cri_socket);
        free(m->nvml_library);
        free(m->node_name);
        free(m);
        return NULL;
}

static int cmp_limit(const void *a, const void *b) {
        const struct monitor_limit *x = a, *y = b;
        int c = strcmp(x->namespace, y->namespace);
        if (!c)
                c = strcmp(x->pod, y->pod);
        if (!c)
                c = strcmp(x->container, y->container);
        if (!c)
                c = x->gpu_index < y->gpu_index ? -1 : x->gpu_index > y->gpu_index;
        return c;
}

static void snapshot_free(struct monitor_snapshot *s) {
        monitor_names_free(s->names);
        free(s->limits);
        free(s->gpus);
        free(s->procs);
        free(s->migs);
        free(s);
}

void monitor_snapshot_unref(struct monitor_snapshot *s) {
        if (s && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0)
                snapshot_free(s);
}

struct monitor_snapshot *monitor_snapshot(struct monitor *m) {
        pthread_mutex_lock(&m->lock);
        struct monitor_snapshot *s = m->current;
        if (s)
                __atomic_add_fetch(&s->refs, 1, __ATOMIC_ACQ_REL);
        pthread_mutex_unlock(&m->lock);
        return s;
}

#define NAME_MAX_LEN 255 /* names are cut there, as the fixed fields did */
#define COMM_MAX_LEN 63

/* The process name (interned), "" when it has gone; NULL only when out of memory. */
static const char *read_comm(struct monitor_names *names, const char *proc_root, unsigned pid) {
        char path[4096];
        int k = snprintf(path, sizeof path, "%s/%u/comm", proc_root, pid);
        if (k < 0 || (size_t)k >= sizeof path)
                return "";
        _cleanup_(freep) char *text = NULL;
        size_t n;
        if (read_file(path, 4096, &text, &n) < 0)
                return "";
        while (n && (text[n - 1] == '\n' || text[n - 1] == ' '))
                text[--n] = '\0';
        return monitor_names_intern(names, text, COMM_MAX_LEN);
}

int monitor_name_process(struct monitor_names *names, struct monitor_process *p, const struct engine_container *c,
                         size_t n) {
        p->namespace = p->pod = p->container = "";
        if (!p->attributed)
                return 0;
        const struct engine_container *hit = NULL;
        for (size_t i = 0; p->cg.container_id[0] && i < n; i++)
                if (streq(c[i].id, p->cg.container_id))
                        hit = &c[i];
        const char *ns = "", *pod = "", *ctr = "";
        if (hit && hit->pod_name[0]) {
                ns = monitor_names_intern(names, hit->pod_namespace, NAME_MAX_LEN);
                pod = monitor_names_intern(names, hit->pod_name, NAME_MAX_LEN);
                ctr = monitor_names_intern(names, hit->container_name[0] ? hit->container_name : hit->name,
                                           NAME_MAX_LEN);
        } else {
                if (hit)
                        ctr = monitor_names_intern(names, hit->name, NAME_MAX_LEN);
                else if (p->cg.container_id[0])
                        ctr = monitor_names_intern(names, p->cg.container_id, 12);
                if (p->cg.pod_uid[0])
                        pod = monitor_names_intern(names, p->cg.pod_uid, NAME_MAX_LEN);
        }
        if (!ns || !pod || !ctr)
                return -ENOMEM;
        p->namespace = ns;
        p->pod = pod;
        p->container = ctr;
        return 0;
}

static int cmp_proc(const void *a, const void *b) {
        const struct monitor_process *x = a, *y = b;
        if (x->gpu != y->gpu)
                return x->gpu < y->gpu ? -1 : 1;
        if (x->mig != y->mig)
                return x->mig < y->mig ? -1 : 1;
        if (x->memory != y->memory && x->memory != UINT64_MAX && y->memory != UINT64_MAX)
                return x->memory > y->memory ? -1 : 1;
        return x->pid < y->pid ? -1 : x->pid > y->pid;
}

void monitor_sort_processes(struct monitor_snapshot *s) {
        if (s->n_procs > 1)
                qsort(s->procs, s->n_procs, sizeof *s->procs, cmp_proc);
}

/* Append one NVML process of GPU g (on MIG device mig - 1 of the snapshot; 0: none) with its name and cgroup. */
static int append_process(struct monitor *m, struct monitor_snapshot *s, size_t *cap, unsigned g,
                          const struct nvml_process *np, unsigned mig, int sm) {
        if (array_reserve(&s->procs, cap, s->n_procs + 1, 16) < 0)
                return -ENOMEM;
        struct monitor_process *p = &s->procs[s->n_procs++];
        *p = (struct monitor_process){ .pid = np->pid,
                                       .gpu = g,
                                       .mig = mig,
                                       .memory = np->used_memory,
                                       .sm = sm,
                                       .comm = "",
                                       .namespace = "",
                                       .pod = "",
                                       .container = "" };
        const char *comm = read_comm(s->names, m->proc_root, p->pid);
        if (!comm)
                return -ENOMEM;
        p->comm = comm;
        int a = cgroup_attribute_pid(m->proc_root, p->pid, &p->cg);
        p->attributed = a >= 0;
        if (a < 0 && a != -ENOENT && a != -ESRCH)
                s->errors++; /* unreadable or malformed; a vanished PID is no error */
        return 0;
}

static int add_procs(struct monitor *m, struct monitor_snapshot *s, unsigned g, size_t *cap) {
        struct nvml_process *procs = NULL;
        size_t n = 0;
        int r = nvml_device_processes(m->nvml, g, &procs, &n, NULL);
        if (r < 0) {
                s->errors++;
                return 0;
        }
        struct nvml_process_sample *samples = NULL;
        size_t n_samples = 0;
        bool have_util =
                nvml_device_process_utilization(m->nvml, g, m->last_seen_us[g], &samples, &n_samples, NULL) >= 0;
        for (size_t i = 0; i < n_samples; i++)
                m->last_seen_us[g] = MAX(m->last_seen_us[g], samples[i].timestamp_us);

        for (size_t i = 0; i < n && r >= 0; i++) {
                /* the newest sample of this pid */
                uint64_t ts = 0;
                int sm = have_util ? 0 : -1;
                for (size_t k = 0; k < n_samples; k++)
                        if (samples[k].pid == procs[i].pid && samples[k].timestamp_us >= ts) {
                                ts = samples[k].timestamp_us;
                                sm = (int)MIN(samples[k].sm, 100u);
                        }
                r = append_process(m, s, cap, g, &procs[i], 0, sm);
        }
        free(procs);
        free(samples);
        return r;
}

/* A GPU with MIG on: its MIG devices, and the processes of each through the device's own handle (no
 * privilege needed; per-process utilization does not exist with MIG on). 1 when MIG is off here. */
static int add_mig(struct monitor *m, struct monitor_snapshot *s, unsigned g, size_t *cap, size_t *cap_migs) {
        if (nvml_mig_gpu(m->nvml, g, m->mig, NULL) < 0 || m->mig->mode != 1)
                return 1;
        for (unsigned k = 0; k < m->mig->n_devices; k++) {
                const struct mig_device *d = &m->mig->dev[k];
                if (array_reserve(&s->migs, cap_migs, s->n_migs + 1, 8) < 0)
                        return -ENOMEM;
                size_t at = s->n_migs++;
                struct monitor_mig *mg = &s->migs[at];
                *mg = (struct monitor_mig){ .gpu = g,
                                            .index = d->index,
                                            .gpu_instance = d->gi,
                                            .compute_instance = d->ci,
                                            .memory_used = d->memory_used,
                                            .memory_total = d->memory_total };
                strscpy(mg->profile, d->profile, sizeof mg->profile);
                strscpy(mg->uuid, d->uuid, sizeof mg->uuid);
                struct nvml_process *procs = NULL;
                size_t n = 0;
                if (nvml_mig_device_processes(m->nvml, g, d->index, &procs, &n, NULL) < 0) {
                        s->errors++;
                        continue;
                }
                int r = 0;
                for (size_t i = 0; i < n && r >= 0; i++)
                        r = append_process(m, s, cap, g, &procs[i], (unsigned)at + 1, -1);
                free(procs);
                if (r < 0)
                        return r;
                s->migs[at].processes = (unsigned)n;
        }
        return 0;
}

/* The full inventory (pair links, NVLink probing) is costly on real GPUs: take it at the first
 * sample and while some GPU is not answering (so a recovery is seen with fresh handles); otherwise
 * refresh only what changes per sample: each GPU's memory and whether it still answers. */
static int refresh_topo(struct monitor *m) {
        bool full = !m->have_topo;
        for (unsigned g = 0; !full && g < m->topo->n_gpus; g++)
                full = m->topo->gpu[g].state != TOPO_GPU_OK;
        if (full) {
                int r = nvml_inventory(m->nvml, m->topo, NULL);
                if (r < 0)
                        return r;
                m->have_topo = true;
                return 0;
        }
        for (unsigned g = 0; g < m->topo->n_gpus; g++) {
                struct topo_gpu *tg = &m->topo->gpu[g];
                struct nvml_error e = { 0 };
                uint64_t total, used;
                int r = nvml_device_memory(m->nvml, g, &total, &used, &e);
                if (r >= 0) {
                        tg->memory_total = total;
                        tg->memory_used = used;
                        continue;
                }
                tg->state = r == -ENODEV ? TOPO_GPU_LOST : r == -EPERM ? TOPO_GPU_NO_PERMISSION : TOPO_GPU_ERROR;
                /* the func name alone fits; NVML's text is in the agent's log, not in metrics */
                strscpy(tg->state_text, e.func, sizeof tg->state_text);
        }
        return 0;
}

/* lint: long — one sample in order: topology, each GPU's readings and processes, container names from the Engine
 * API and CRI, allocations, container limits, then the snapshot swap; every step fills the one snapshot, freed
 * whole on failure. */
int monitor_sample(struct monitor *m) {
        uint64_t t0 = now_us(CLOCK_MONOTONIC);
        int r = refresh_topo(m);
        if (r < 0)
                return r;
        const struct topo *t = m->topo;
        struct monitor_snapshot *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->refs = 1;
        s->names = monitor_names_new();
        if (!s->names) {
                free(s);
                return -ENOMEM;
        }
        s->time_us = now_us(CLOCK_REALTIME);
        strscpy(s->driver_version, t->driver_version, sizeof s->driver_version);
        s->cuda_version = t->cuda_version;
        s->n_gpus = t->n_gpus;
        s->gpus = calloc(t->n_gpus ? t->n_gpus : 1, sizeof *s->gpus);
        if (!s->gpus) {
                snapshot_free(s);
                return -ENOMEM;
        }
        size_t cap = 0, cap_migs = 0;
        for (unsigned g = 0; g < t->n_gpus; g++) {
                const struct topo_gpu *tg = &t->gpu[g];
                struct monitor_gpu *mg = &s->gpus[g];
                *mg = (struct monitor_gpu){ .index = (unsigned)tg->index,
                                            .healthy = tg->state == TOPO_GPU_OK,
                                            .memory_used = tg->memory_used,
                                            .memory_total = tg->memory_total,
                                            .utilization = -1,
                                            .temperature = -1,
                                            .power_mw = -1,
                                            .allocated = -1 };
                strscpy(mg->uuid, tg->uuid, sizeof mg->uuid);
                strscpy(mg->name, tg->name, sizeof mg->name);
                if (!mg->healthy)
                        continue;
                struct nvml_utilization u;
                unsigned v;
                if (nvml_device_utilization(m->nvml, g, &u, NULL) >= 0)
                        mg->utilization = (int)MIN(u.gpu, 100u);
                if (nvml_device_temperature(m->nvml, g, &v, NULL) >= 0)
                        mg->temperature = (int)v;
                if (nvml_device_power(m->nvml, g, &v, NULL) >= 0)
                        mg->power_mw = v;
                r = tg->mig_mode >= 0 ? add_mig(m, s, g, &cap, &cap_migs) : 1;
                if (r > 0)
                        r = add_procs(m, s, g, &cap);
                if (r < 0) {
                        snapshot_free(s);
                        return r;
                }
        }

        /* names from the CRI runtime and/or the Engine API; allocation from the Engine API */
        struct engine_container *cs = NULL, *cri = NULL;
        size_t n_cs = 0, n_cri = 0;
        bool any_container = false;
        for (size_t i = 0; i < s->n_procs; i++)
                any_container |= s->procs[i].attributed && s->procs[i].cg.container_id[0];
        if (m->engine_url && (any_container || !m->gpu_allocated) &&
            engine_list(m->engine_url, !m->gpu_allocated, &cs, &n_cs) < 0)
                s->errors++;
        if (m->cri_socket && any_container && cri_list(m->cri_socket, &cri, &n_cri) < 0)
                s->errors++;
        /* one table for naming: the engine's containers, then the CRI's (the later match wins) */
        size_t n_names = n_cs;
        if (n_cri) {
                struct engine_container *all = realloc(cs, (n_cs + n_cri) * sizeof *all);
                if (all) {
                        memcpy(all + n_cs, cri, n_cri * sizeof *cri);
                        cs = all;
                        n_names += n_cri;
                } else {
                        s->errors++;
                }
        }
        for (size_t i = 0; i < s->n_procs; i++)
                if (monitor_name_process(s->names, &s->procs[i], cs, n_names) < 0)
                        s->errors++;
        for (unsigned g = 0; g < s->n_gpus; g++) {
                double a;
                bool ok;
                if (m->gpu_healthy && m->gpu_healthy(m->userdata, s->gpus[g].index, &ok) >= 0)
                        s->gpus[g].healthy &= ok;
                if (m->gpu_allocated) {
                        if (m->gpu_allocated(m->userdata, s->gpus[g].index, &a) >= 0)
                                s->gpus[g].allocated = a;
                } else if (m->engine_url) {
                        s->gpus[g].allocated = 0;
                        for (size_t i = 0; i < n_cs; i++)
                                if (engine_container_gpus(&cs[i], t) & (1ULL << g))
                                        s->gpus[g].allocated = 1;
                }
        }
        free(cs);
        free(cri);
        if (m->container_limits) {
                if (m->container_limits(m->userdata, &s->limits, &s->n_limits) < 0) {
                        s->limits = NULL;
                        s->n_limits = 0;
                        s->errors++;
                }
                for (size_t i = 0; i < s->n_limits; i++)
                        for (unsigned g = 0; g < s->n_gpus; g++)
                                if (s->limits[i].whole && s->gpus[g].index == s->limits[i].gpu_index) {
                                        s->limits[i].memory_bytes = s->gpus[g].memory_total;
                                        s->limits[i].core_percent = 100;
                                }
                if (s->n_limits)
                        qsort(s->limits, s->n_limits, sizeof *s->limits, cmp_limit);
        }
        monitor_sort_processes(s);
        s->duration_s = (double)(now_us(CLOCK_MONOTONIC) - t0) / 1e6;

        pthread_mutex_lock(&m->lock);
        struct monitor_snapshot *old = m->current;
        m->current = s;
        pthread_mutex_unlock(&m->lock);
        monitor_snapshot_unref(old);
        return 0;
}

int monitor_write_labels(struct monitor *m, const char *path) {
        if (!m->have_topo)
                return -ENODATA;
        _cleanup_(freep) char *text = NULL, *old = NULL;
        size_t len, old_len;
        int r = labels_format(m->topo, &text, &len);
        if (r < 0)
                return r;
        if (read_file(path, 1 << 20, &old, &old_len) == 0 && old_len == len && memcmp(old, text, len) == 0)
                return 0;
        r = labels_write_atomic(path, text, len);
        return r < 0 ? r : 1;
}
