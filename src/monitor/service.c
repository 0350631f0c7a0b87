/* SPDX-License-Identifier: Apache-2.0 */
/*
 * service — the monitor as a running service: a sampler thread taking a sample every period and
 * the HTTP server answering /metrics (formats the current snapshot) and /healthz. Must never
 * sample on a scrape, nor hold a lock while formatting.
 */
#include <pthread.h>
#include <time.h>

#include "http/http.h"
#include "metrics/metrics.h"
#include "monitor/monitor.h"
#include "util/util.h"

struct monitor_service {
        struct monitor *mon;
        struct http_server *http;
        unsigned interval_ms, compat;
        char node_name[256];
        char *nfd_file;
        pthread_t thread;
        bool thread_started;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool stop;
        uint64_t last_ok_us; /* CLOCK_MONOTONIC of the last good sample, atomic */
        struct metrics_counter *samples, *errors, *scrapes, *label_errors;
        struct metrics_histogram *scrape_time;
};

static uint64_t mono_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void sample_once(struct monitor_service *s) {
        int r = monitor_sample(s->mon);
        metrics_counter_add(s->samples, 1);
        if (r < 0)
                metrics_counter_add(s->errors, 1);
        else
                __atomic_store_n(&s->last_ok_us, mono_us(), __ATOMIC_RELEASE);
        if (r >= 0 && s->nfd_file && monitor_write_labels(s->mon, s->nfd_file) < 0)
                metrics_counter_add(s->label_errors, 1);
}

static void *sampler_main(void *userdata) {
        struct monitor_service *s = userdata;
        pthread_setname_np(pthread_self(), "sampler"); /* as bench/agent-bench.py names it */
        pthread_mutex_lock(&s->lock);
        while (!s->stop) {
                struct timespec deadline = timespec_after_ms(CLOCK_MONOTONIC, s->interval_ms);
                while (!s->stop && pthread_cond_timedwait(&s->cond, &s->lock, &deadline) == 0)
                        ;
                if (s->stop)
                        break;
                pthread_mutex_unlock(&s->lock);
                sample_once(s);
                pthread_mutex_lock(&s->lock);
        }
        pthread_mutex_unlock(&s->lock);
        return NULL;
}

static void serve_metrics(void *userdata, const struct http_request *req, struct http_response *resp) {
        struct monitor_service *s = userdata;
        (void)req;
        uint64_t t0 = mono_us();
        struct monitor_snapshot *snap = monitor_snapshot(s->mon);
        int r = monitor_format_metrics(snap, s->compat, s->node_name, &resp->body, &resp->body_len);
        monitor_snapshot_unref(snap);
        metrics_counter_add(s->scrapes, 1);
        metrics_histogram_observe(s->scrape_time, (double)(mono_us() - t0) / 1e6);
        if (r < 0) {
                resp->status = 500;
                resp->body = NULL;
                return;
        }
        strscpy(resp->content_type, "text/plain; version=0.0.4; charset=utf-8", sizeof resp->content_type);
}

static void serve_healthz(void *userdata, const struct http_request *req, struct http_response *resp) {
        struct monitor_service *s = userdata;
        (void)req;
        uint64_t last = __atomic_load_n(&s->last_ok_us, __ATOMIC_ACQUIRE);
        bool fresh = last && mono_us() - last <= 3ull * s->interval_ms * 1000u + 1000000u;
        const char *text = fresh ? "ok\n" : "stale: no successful sample recently\n";
        resp->status = fresh ? 200 : 503;
        resp->body = strdup(text);
        resp->body_len = resp->body ? strlen(resp->body) : 0;
}

int monitor_service_start(const struct monitor_options *o, struct nvml *nvml, const char *metrics_address,
                          struct monitor_service **ret) {
        struct monitor_service *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        pthread_mutex_init(&s->lock, NULL);
        cond_init_monotonic(&s->cond);
        s->interval_ms = o->interval_ms ? o->interval_ms : 5000;
        s->compat = o->compat;
        if (o->node_name && o->node_name[0])
                strscpy(s->node_name, o->node_name, sizeof s->node_name);
        else if (gethostname(s->node_name, sizeof s->node_name - 1) < 0)
                s->node_name[0] = '\0';
        s->samples = metrics_counter_get("gpuslice_monitor_samples_total", "Samples taken by the monitor.", NULL, NULL);
        s->errors = metrics_counter_get("gpuslice_monitor_errors_total",
                                        "Samples that failed as a whole (the node could not be read).", NULL, NULL);
        s->label_errors = metrics_counter_get("gpuslice_monitor_label_write_errors_total",
                                              "Failed writes of the node labels file.", NULL, NULL);
        if (o->nfd_features_file && o->nfd_features_file[0] && !(s->nfd_file = strdup(o->nfd_features_file))) {
                monitor_service_stop(s);
                return -ENOMEM;
        }
        s->scrapes = metrics_counter_get("gpuslice_http_requests_total", "HTTP requests served, by path.", "path",
                                         "/metrics");
        s->scrape_time = metrics_histogram_get("gpuslice_http_request_duration_seconds",
                                               "Time to answer an HTTP request, by path.", "path", "/metrics");

        int r = monitor_new(o, nvml, &s->mon);
        if (r < 0)
                goto fail;
        sample_once(s);
        r = http_server_new(metrics_address, &s->http);
        if (r < 0)
                goto fail;
        if ((r = http_server_handle(s->http, "/metrics", serve_metrics, s)) < 0 ||
            (r = http_server_handle(s->http, "/healthz", serve_healthz, s)) < 0 || (r = http_server_start(s->http)) < 0)
                goto fail;
        r = -pthread_create(&s->thread, NULL, sampler_main, s);
        if (r < 0)
                goto fail;
        s->thread_started = true;
        *ret = s;
        return 0;
fail:
        monitor_service_stop(s);
        return r;
}

unsigned monitor_service_port(const struct monitor_service *s) {
        return s ? http_server_port(s->http) : 0;
}

struct monitor_service *monitor_service_stop(struct monitor_service *s) {
        if (!s)
                return NULL;
        if (s->thread_started) {
                pthread_mutex_lock(&s->lock);
                s->stop = true;
                pthread_cond_broadcast(&s->cond);
                pthread_mutex_unlock(&s->lock);
                pthread_join(s->thread, NULL);
        }
        http_server_free(s->http);
        monitor_free(s->mon);
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->lock);
        free(s->nfd_file);
        free(s);
        return NULL;
}
