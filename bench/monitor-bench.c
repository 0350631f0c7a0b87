/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Monitor benchmark: what a scrape costs and what the monitor holds in memory with 8 GPUs x 256
 * processes, and what one sample costs against the simulated NVML.
 *
 *   monitor-bench [--markdown]
 *
 * Part 1 (pure): a synthetic snapshot of 8 GPUs x 256 processes (2 processes per container, all
 * in pods, names as long as real ones) → monitor_format_metrics p50/p99, output size and the memory it
 * touches (the peak RSS of one call over the RSS before it: the text and any scratch), side by side in one run with the
 * formatter it replaced (tests/unit/monitor-format-ref.c, frozen; rounds interleaved so both see the
 * same machine), and the same text served by the HTTP server and scraped over TCP on 127.0.0.1
 * (p50/p99 per scrape).
 * Part 2 (needs LD_LIBRARY_PATH=build/sim and GPUSLICE_SIM_NODE/GPUSLICE_SIM_STATE, set by the
 * bench-monitor target; runs first, on a fresh heap): the monitor in this process on the simulated 8-GPU node with
 * the simulator's maximum of processes (512) attributed through a generated proc root; time per
 * sample, scrape latency, and this process's VmRSS / RssAnon.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>

#include <malloc.h>

#include "../tests/unit/monitor-format-ref.h"
#include "http/http.h"
#include "monitor/monitor.h"
#include "util/util.h"

#define N_GPUS 8
#define PER_GPU 256
#define ROUNDS 200

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p) {
        qsort(v, n, sizeof *v, cmp_double);
        size_t i = (size_t)(p * (double)(n - 1) + 0.5);
        return v[i];
}

static long status_kb(const char *field) {
        char *text = NULL;
        size_t len;
        if (read_file("/proc/self/status", 1 << 16, &text, &len) < 0)
                return -1;
        long v = -1;
        char *p = strstr(text, field);
        if (p)
                sscanf(p + strlen(field), ":%ld", &v);
        free(text);
        return v;
}

static struct monitor_snapshot *synthetic(void) {
        struct monitor_snapshot *s = calloc(1, sizeof *s);
        s->refs = 1;
        s->n_gpus = N_GPUS;
        s->gpus = calloc(N_GPUS, sizeof *s->gpus);
        s->n_procs = N_GPUS * PER_GPU;
        s->procs = calloc(s->n_procs, sizeof *s->procs);
        s->names = monitor_names_new();
        for (unsigned g = 0; g < N_GPUS; g++) {
                struct monitor_gpu *mg = &s->gpus[g];
                *mg = (struct monitor_gpu){ .index = g,
                                            .healthy = true,
                                            .memory_used = 9ull << 30,
                                            .memory_total = 12066ull << 20,
                                            .utilization = 87,
                                            .temperature = 61,
                                            .power_mw = 212000,
                                            .allocated = 1 };
                snprintf(mg->uuid, sizeof mg->uuid, "GPU-%08x-1b2c-4d3e-8f4a-5b6c7d8e9f%02x", 0xa871201cu + g, g);
                strscpy(mg->name, "TITAN V", sizeof mg->name);
        }
        for (size_t i = 0; i < s->n_procs; i++) {
                struct monitor_process *p = &s->procs[i];
                unsigned g = (unsigned)(i / PER_GPU), c = (unsigned)(i / 2);
                *p = (struct monitor_process){ .pid = 100000 + (unsigned)i,
                                               .gpu = g,
                                               .memory = (40ull + i % 7) << 20,
                                               .sm = (int)(i % 5),
                                               .attributed = true };
                p->comm = monitor_names_intern(s->names, "python3.10", 63);
                snprintf(p->cg.container_id, sizeof p->cg.container_id, "%064x", c + 1);
                snprintf(p->cg.pod_uid, sizeof p->cg.pod_uid, "8c6e4f1a-2b3d-4c5e-9f7a-%012x", c);
                p->cg.qos = CGROUP_QOS_BURSTABLE;
                p->cg.runtime = CGROUP_RUNTIME_CONTAINERD;
                char buf[256];
                snprintf(buf, sizeof buf, "team-%u-training", c % 13);
                p->namespace = monitor_names_intern(s->names, buf, 255);
                snprintf(buf, sizeof buf, "resnet50-distributed-worker-%u-7f9c8d6b5-x2k4q", c);
                p->pod = monitor_names_intern(s->names, buf, 255);
                p->container = monitor_names_intern(s->names, "trainer", 255);
        }
        return s;
}

static struct monitor_snapshot *served;
static void serve(void *ud, const struct http_request *req, struct http_response *resp) {
        (void)ud;
        (void)req;
        if (monitor_format_metrics(served, 0, "node-1", &resp->body, &resp->body_len) < 0)
                resp->status = 500;
}

/* One GET over a fresh TCP connection, whole answer read. Returns bytes or -1. */
static long scrape(unsigned port, const char *path) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct timeval tv = { .tv_sec = 10 };
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
                close(fd);
                return -1;
        }
        char req[128];
        int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
        if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
                close(fd);
                return -1;
        }
        static char buf[1 << 16];
        long total = 0;
        ssize_t k;
        while ((k = recv(fd, buf, sizeof buf, 0)) > 0)
                total += k;
        close(fd);
        return total;
}

/* Reset this process's peak RSS (VmHWM) to its current RSS (proc(5), clear_refs "5"). */
static void reset_peak_rss(void) {
        FILE *f = fopen("/proc/self/clear_refs", "we");
        if (f) {
                fputs("5", f);
                fclose(f);
        }
}

typedef int (*format_fn)(const struct monitor_snapshot *s, unsigned compat, const char *node_name, char **ret,
                         size_t *ret_len);

static double format_once(format_fn fn, const struct monitor_snapshot *s, size_t *bytes) {
        char *text;
        double t0 = now_s();
        if (fn(s, 0, "node-1", &text, bytes) < 0)
                exit(1);
        double t = now_s() - t0;
        free(text);
        return t;
}

/* The most memory one call touches (peak RSS above the RSS before it, kB: the text and the formatter's
 * scratch), over a few calls; malloc_trim first so that no call reuses pages an earlier one left. */
static long format_peak_kb(format_fn fn, const struct monitor_snapshot *s) {
        long most = 0;
        for (int r = 0; r < 5; r++) {
                char *text;
                size_t len;
                malloc_trim(0);
                reset_peak_rss();
                long base = status_kb("VmRSS");
                if (fn(s, 0, "node-1", &text, &len) < 0)
                        exit(1);
                most = MAX(most, status_kb("VmHWM") - base);
                free(text);
        }
        return most;
}

static void part_format(bool md) {
        long rss0 = status_kb("RssAnon");
        struct monitor_snapshot *s = synthetic();
        long rss1 = status_kb("RssAnon");
        double t[ROUNDS], to[ROUNDS];
        size_t bytes = 0, old_bytes = 0;
        for (int r = 0; r < ROUNDS; r++) {
                to[r] = format_once(monitor_format_metrics_ref, s, &old_bytes);
                t[r] = format_once(monitor_format_metrics, s, &bytes);
        }
        long old_heap = format_peak_kb(monitor_format_metrics_ref, s), heap = format_peak_kb(monitor_format_metrics, s);
        double f50 = pct(t, ROUNDS, 0.5), f99 = pct(t, ROUNDS, 0.99);
        double o50 = pct(to, ROUNDS, 0.5), o99 = pct(to, ROUNDS, 0.99);
        if (md)
                printf("| format, synthetic 8 x 256 processes | old: %zu B, p50 %.2f ms / p99 %.2f ms, %.0f MB/s, peak "
                       "RSS +"
                       "%ld kB | new: %zu B, p50 %.2f ms / p99 %.2f ms, %.0f MB/s, peak RSS +%ld kB | %.1fx |\n",
                       old_bytes, o50 * 1e3, o99 * 1e3, (double)old_bytes / o50 / 1e6, old_heap, bytes, f50 * 1e3,
                       f99 * 1e3, (double)bytes / f50 / 1e6, heap, o50 / f50);
        else
                printf("format old (before the rewrite): %zu bytes, p50 %.3f ms, p99 %.3f ms, %.0f MB/s, peak RSS "
                       "+%ld kB\n"
                       "format new:                      %zu bytes, p50 %.3f ms, p99 %.3f ms, %.0f MB/s, peak RSS "
                       "+%ld kB\n"
                       "speed-up (p50): %.1fx\n",
                       old_bytes, o50 * 1e3, o99 * 1e3, (double)old_bytes / o50 / 1e6, old_heap, bytes, f50 * 1e3,
                       f99 * 1e3, (double)bytes / f50 / 1e6, heap, o50 / f50);

        served = s;
        struct http_server *h;
        if (http_server_new("127.0.0.1:0", &h) < 0 || http_server_handle(h, "/metrics", serve, NULL) < 0 ||
            http_server_start(h) < 0)
                exit(1);
        long got = 0;
        for (int r = 0; r < ROUNDS; r++) {
                double t0 = now_s();
                got = scrape(http_server_port(h), "/metrics");
                t[r] = now_s() - t0;
        }
        http_server_free(h);
        double s50 = pct(t, ROUNDS, 0.5), s99 = pct(t, ROUNDS, 0.99);
        if (md)
                printf("| scrape over TCP, synthetic 8 x 256 processes (1024 containers) | %zu B of text | scrape p50 "
                       "%.2f ms / p99 %.2f ms | snapshot %zu kB (RssAnon +%ld kB) |\n",
                       bytes, s50 * 1e3, s99 * 1e3,
                       (s->n_procs * sizeof *s->procs + s->n_gpus * sizeof *s->gpus + monitor_names_size(s->names)) /
                               1024,
                       rss1 - rss0);
        else
                printf("scrape over TCP (%ld bytes): p50 %.3f ms, p99 %.3f ms; snapshot RssAnon +%ld kB (sizeof "
                       "process "
                       "entry %zu, names %zu kB)\n",
                       got, s50 * 1e3, s99 * 1e3, rss1 - rss0, sizeof(struct monitor_process),
                       monitor_names_size(s->names) / 1024);
        monitor_snapshot_unref(s);
}

static void part_service(bool md) {
        const char *sim = getenv("GPUSLICE_BENCH_SIM_CLI");
        if (!getenv("GPUSLICE_SIM_NODE") || !sim) {
                fputs("part 2 skipped: GPUSLICE_SIM_NODE / GPUSLICE_BENCH_SIM_CLI not set\n", stderr);
                return;
        }
        char root[] = "/tmp/gpuslice-monitor-bench-XXXXXX";
        if (!mkdtemp(root))
                exit(1);
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "%s reset >/dev/null", sim);
        if (system(cmd) != 0)
                exit(1);
        /* 64 processes per GPU: the simulator's table holds 512 */
        for (unsigned i = 0; i < 512; i++) {
                unsigned pid = 200000 + i, c = i / 2;
                char dir[512], file[600];
                snprintf(dir, sizeof dir, "%s/%u", root, pid);
                mkdir(dir, 0755);
                snprintf(file, sizeof file, "%s/cgroup", dir);
                FILE *f = fopen(file, "we");
                fprintf(f,
                        "0::/kubepods.slice/kubepods-burstable.slice/"
                        "kubepods-burstable-pod8c6e4f1a_2b3d_4c5e_9f7a_%012x.slice/"
                        "cri-containerd-%064x.scope\n",
                        c, c + 1);
                fclose(f);
                snprintf(file, sizeof file, "%s/comm", dir);
                f = fopen(file, "we");
                fputs("python3.10\n", f);
                fclose(f);
                snprintf(cmd, sizeof cmd, "%s proc add --gpu %u --pid %u --mem %uMiB --sm %u --keep", sim, i % 8, pid,
                         40 + i % 7, i % 5);
                if (system(cmd) != 0)
                        exit(1);
        }
        long rss0 = status_kb("RssAnon");
        struct monitor_options o;
        monitor_options_init(&o);
        o.proc_root = root;
        o.interval_ms = 3600 * 1000; /* samples are taken by hand below */
        struct monitor *m;
        if (monitor_new(&o, NULL, &m) < 0)
                exit(1);
        double t[50];
        for (int r = 0; r < 50; r++) {
                double t0 = now_s();
                if (monitor_sample(m) < 0)
                        exit(1);
                t[r] = now_s() - t0;
        }
        struct monitor_snapshot *s = monitor_snapshot(m);
        size_t n_procs = s->n_procs;
        served = s;
        double p50 = pct(t, 50, 0.5), p99 = pct(t, 50, 0.99);
        struct http_server *h;
        if (http_server_new("127.0.0.1:0", &h) < 0 || http_server_handle(h, "/metrics", serve, NULL) < 0 ||
            http_server_start(h) < 0)
                exit(1);
        double sc[ROUNDS];
        for (int r = 0; r < ROUNDS; r++) {
                double t0 = now_s();
                scrape(http_server_port(h), "/metrics");
                sc[r] = now_s() - t0;
        }
        http_server_free(h);
        long rss1 = status_kb("RssAnon"), vm = status_kb("VmRSS");
        if (md)
                printf("| simulated node, %zu processes, monitor + HTTP in-process | sample p50 %.1f ms / p99 %.1f ms "
                       "| "
                       "scrape p50 %.2f ms / p99 %.2f ms | RssAnon +%ld kB (VmRSS %ld kB) |\n",
                       n_procs, p50 * 1e3, p99 * 1e3, pct(sc, ROUNDS, 0.5) * 1e3, pct(sc, ROUNDS, 0.99) * 1e3,
                       rss1 - rss0, vm);
        else
                printf("sample (%zu processes): p50 %.2f ms, p99 %.2f ms; scrape p50 %.3f ms, p99 %.3f ms; RssAnon "
                       "+%ld kB, "
                       "VmRSS %ld kB\n",
                       n_procs, p50 * 1e3, p99 * 1e3, pct(sc, ROUNDS, 0.5) * 1e3, pct(sc, ROUNDS, 0.99) * 1e3,
                       rss1 - rss0, vm);
        monitor_snapshot_unref(s);
        monitor_free(m);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'; %s reset >/dev/null", root, sim);
        if (system(cmd) != 0)
                fputs("cleanup failed\n", stderr);
}

int main(int argc, char **argv) {
        bool md = argc > 1 && streq(argv[1], "--markdown");
        /* the service first: its RssAnon growth is measured on a fresh heap */
        part_service(md);
        part_format(md);
        return 0;
}
