/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuslice ps — every GPU process with its GPU, memory, SM share and who it belongs to
 * (namespace/pod/container, or the container's name on a plain Docker/Podman host).
 * One sample of the monitor (src/monitor), printed; --watch repeats in place.
 */
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <time.h>

#include "cli/commands.h"
#include "cli/output.h"
#include "config/config.h"
#include "monitor/monitor.h"
#include "util/util.h"

static void help(FILE *f) {
        fputs("Usage: gpuslice ps [OPTIONS]\n\n"
              "List every process using a GPU: GPU, memory, SM utilization, and the namespace, pod\n"
              "and container it runs in (or the container's name on a plain Docker/Podman host). A process\n"
              "on a MIG device shows its GPU instance and compute instance (MIG column, GI:CI); NVML has no\n"
              "per-process utilization with MIG on (SM% -).\n\n"
              "Options:\n"
              "      --json               machine-readable output\n"
              "  -w, --watch              refresh in place every --interval (Ctrl-C stops)\n"
              "      --interval DURATION  refresh period for --watch (default 2s)\n"
              "      --proc-root DIR      where /proc is (default /proc)\n"
              "      --engine URL         Docker/Podman Engine API for container names\n"
              "      --nvml-library PATH  load NVML from PATH instead of libnvidia-ml.so.1\n"
              "  -h, --help               this help\n",
              f);
}

static const char *or_dash(const char *s) {
        return s && s[0] ? s : "-";
}

/* "GI:CI" of a process on a MIG device, "-" otherwise. */
static const char *mig_of(const struct monitor_snapshot *s, const struct monitor_process *p, char *buf, size_t len) {
        if (!p->mig || p->mig > s->n_migs)
                return "-";
        const struct monitor_mig *m = &s->migs[p->mig - 1];
        snprintf(buf, len, "%u:%u", m->gpu_instance, m->compute_instance);
        return buf;
}

static void print_table(FILE *f, const struct monitor_snapshot *s) {
        bool k8s = false, mig = false;
        for (size_t i = 0; i < s->n_procs; i++) {
                k8s |= s->procs[i].pod[0] != '\0';
                mig |= s->procs[i].mig != 0;
        }
        fprintf(f, "%-4s ", "GPU");
        if (mig)
                fprintf(f, "%-5s ", "MIG");
        if (k8s)
                fprintf(f, "%-8s %10s %4s  %-16s %-16s %-28s %s\n", "PID", "MEMORY", "SM%", "PROCESS", "NAMESPACE",
                        "POD", "CONTAINER");
        else
                fprintf(f, "%-8s %10s %4s  %-16s %s\n", "PID", "MEMORY", "SM%", "PROCESS", "CONTAINER");
        for (size_t i = 0; i < s->n_procs; i++) {
                const struct monitor_process *p = &s->procs[i];
                char mem[32], sm[16], gc[24];
                if (p->memory == UINT64_MAX)
                        strscpy(mem, "?", sizeof mem);
                else
                        snprintf(mem, sizeof mem, "%" PRIu64 "MiB", p->memory >> 20);
                if (p->sm < 0)
                        strscpy(sm, "-", sizeof sm);
                else
                        snprintf(sm, sizeof sm, "%d", p->sm);
                fprintf(f, "%-4u ", s->gpus[p->gpu].index);
                if (mig)
                        fprintf(f, "%-5s ", mig_of(s, p, gc, sizeof gc));
                if (k8s)
                        fprintf(f, "%-8u %10s %4s  %-16s %-16s %-28s %s\n", p->pid, mem, sm, or_dash(p->comm),
                                or_dash(p->namespace), or_dash(p->pod), or_dash(p->container));
                else
                        fprintf(f, "%-8u %10s %4s  %-16s %s\n", p->pid, mem, sm, or_dash(p->comm),
                                or_dash(p->container));
        }
        if (s->n_procs == 0)
                fputs("(no GPU processes)\n", f);
}

static json_t *json_snapshot(const struct monitor_snapshot *s) {
        json_t *procs = json_array();
        for (size_t i = 0; i < s->n_procs; i++) {
                const struct monitor_process *p = &s->procs[i];
                const struct monitor_gpu *g = &s->gpus[p->gpu];
                json_array_append_new(
                        procs, json_pack("{s:i, s:s, s:i, s:o, s:o, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "gpu",
                                         (int)g->index, "gpu_uuid", g->uuid, "pid", (int)p->pid, "memory_bytes",
                                         p->memory == UINT64_MAX ? json_null() : json_integer((json_int_t)p->memory),
                                         "sm_percent", p->sm < 0 ? json_null() : json_integer(p->sm), "process",
                                         p->comm, "namespace", p->namespace, "pod", p->pod, "container", p->container,
                                         "container_id", p->cg.container_id, "pod_uid", p->cg.pod_uid, "qos",
                                         cgroup_qos_name(p->cg.qos), "runtime", cgroup_runtime_name(p->cg.runtime)));
                const struct monitor_mig *m = p->mig && p->mig <= s->n_migs ? &s->migs[p->mig - 1] : NULL;
                json_t *o = json_array_get(procs, json_array_size(procs) - 1);
                json_object_set_new(o, "mig",
                                    m ? json_pack("{s:s, s:s, s:i, s:i, s:i}", "uuid", m->uuid, "profile", m->profile,
                                                  "index", (int)m->index, "gpu_instance", (int)m->gpu_instance,
                                                  "compute_instance", (int)m->compute_instance)
                                      : json_null());
        }
        return json_pack("{s:o}", "processes", procs);
}

static volatile sig_atomic_t stop;
static void on_signal(int sig) {
        (void)sig;
        stop = 1;
}

/* lint: long — a command's main: the getopt switch (one case per flag, each checking its value and naming the flag
 * in its message), then the command's steps in order; its size is its flags'. */
int cmd_ps(int argc, char **argv) {
        enum {
                OPT_JSON = 0x100,
                OPT_INTERVAL,
                OPT_PROC,
                OPT_ENGINE,
                OPT_NVML
        };
        static const struct option opts[] = {
                { "json", no_argument, NULL, OPT_JSON },
                { "watch", no_argument, NULL, 'w' },
                { "interval", required_argument, NULL, OPT_INTERVAL },
                { "proc-root", required_argument, NULL, OPT_PROC },
                { "engine", required_argument, NULL, OPT_ENGINE },
                { "nvml-library", required_argument, NULL, OPT_NVML },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        struct gpuslice_config cfg;
        config_init_defaults(&cfg);
        bool json = false, watch = false;
        const char *nvml_lib = NULL;
        uint64_t interval = 2;
        struct gs_error err;
        int c;
        optind = 0;
        while ((c = getopt_long(argc, argv, "wh", opts, NULL)) >= 0) {
                const char *key = NULL;
                switch (c) {
                        case OPT_JSON: json = true; break;
                        case 'w': watch = true; break;
                        case OPT_INTERVAL: key = "monitor.sample-interval"; break;
                        case OPT_PROC: key = "monitor.proc-root"; break;
                        case OPT_ENGINE: key = "monitor.engine"; break;
                        case OPT_NVML: nvml_lib = optarg; break;
                        case 'h': help(stdout); return EXIT_OK;
                        default: help(stderr); return EXIT_USAGE;
                }
                if (key && config_set(&cfg, key, optarg, &err) < 0) {
                        fprintf(stderr, "gpuslice ps: %s\n", err.message);
                        return EXIT_USAGE;
                }
                if (c == OPT_INTERVAL)
                        interval = cfg.sample_interval_sec;
        }
        if (cli_no_more_args("ps", argc, argv) != EXIT_OK)
                return EXIT_USAGE;

        struct monitor_options o;
        monitor_options_init(&o);
        o.proc_root = cfg.proc_root;
        o.engine_url = cfg.engine_url;
        o.nvml_library = nvml_lib;
        struct nvml *nvml = NULL;
        int r = cli_nvml_open("gpuslice ps", nvml_lib, &nvml);
        if (r != EXIT_OK)
                return r;
        struct monitor *m;
        r = monitor_new(&o, nvml, &m);
        if (r < 0) {
                fprintf(stderr, "gpuslice ps: %s\n", strerror(-r));
                nvml_close(nvml);
                return EXIT_RUNTIME;
        }
        if (watch) {
                signal(SIGINT, on_signal);
                signal(SIGTERM, on_signal);
        }
        int ret = EXIT_OK;
        do {
                r = monitor_sample(m);
                if (r < 0) {
                        fprintf(stderr, "gpuslice ps: cannot read the GPUs: %s\n", strerror(-r));
                        ret = EXIT_RUNTIME;
                        break;
                }
                struct monitor_snapshot *s = monitor_snapshot(m);
                if (watch && !json)
                        fputs("\033[H\033[2J", stdout); /* home, clear: refresh in place */
                if (json)
                        ret = json_print(stdout, json_snapshot(s)) < 0 ? EXIT_RUNTIME : EXIT_OK;
                else
                        print_table(stdout, s);
                fflush(stdout);
                monitor_snapshot_unref(s);
                for (uint64_t t = 0; watch && !stop && t < interval * 10; t++)
                        nanosleep(&(struct timespec){ .tv_nsec = 100000000L }, NULL);
        } while (watch && !stop);
        monitor_free(m);
        nvml_close(nvml);
        return ret;
}
