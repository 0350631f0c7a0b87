/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sampler and the service against the binding's fake NVML node (tests/unit/fake-nvml/
 * fake-nvml-node.c: GPU 0 runs 3 processes with utilization samples, GPU 4 is lost, GPU 5
 * forbidden): a sample's content, a lost or forbidden GPU not failing the sample, the allocation
 * hook, and /metrics and /healthz served over TCP.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "monitor/monitor.h"
#include "util/util.h"

struct fixture {
        struct nvml *nvml;
        struct monitor *mon;
};

static int setup(void **state) {
        struct fixture *f = calloc(1, sizeof *f);
        if (nvml_open(FAKE_NVML_NODE, &f->nvml, NULL) < 0)
                return -1;
        struct monitor_options o;
        monitor_options_init(&o);
        o.proc_root = "/nonexistent-proc"; /* every PID "vanished": no attribution, no error */
        if (monitor_new(&o, f->nvml, &f->mon) < 0)
                return -1;
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;
        monitor_free(f->mon);
        nvml_close(f->nvml);
        free(f);
        return 0;
}

static const struct monitor_process *find(const struct monitor_snapshot *s, unsigned pid) {
        for (size_t i = 0; i < s->n_procs; i++)
                if (s->procs[i].pid == pid)
                        return &s->procs[i];
        return NULL;
}

static void test_no_snapshot_before_sample(void **state) {
        struct fixture *f = *state;
        assert_null(monitor_snapshot(f->mon));
        assert_int_equal(monitor_write_labels(f->mon, "/tmp/unused"), -ENODATA);
}

static void test_sample_gpus(void **state) {
        struct fixture *f = *state;
        assert_int_equal(monitor_sample(f->mon), 0);
        struct monitor_snapshot *s = monitor_snapshot(f->mon);
        assert_non_null(s);
        assert_int_equal(s->n_gpus, 6);
        assert_true(s->gpus[0].healthy);
        assert_int_equal(s->gpus[0].utilization, 42);
        assert_int_equal(s->gpus[0].temperature, 55);
        assert_int_equal(s->gpus[0].power_mw, 123456);
        assert_true(s->gpus[0].allocated < 0); /* no engine, no hook: unknown */
        /* lost and forbidden GPUs are reported unhealthy, the sample still succeeds */
        assert_false(s->gpus[4].healthy);
        assert_int_equal(s->gpus[4].utilization, -1);
        assert_false(s->gpus[5].healthy);
        monitor_snapshot_unref(s);
}

static void test_sample_processes(void **state) {
        struct fixture *f = *state;
        assert_int_equal(monitor_sample(f->mon), 0);
        struct monitor_snapshot *s = monitor_snapshot(f->mon);
        const struct monitor_process *p100 = find(s, 100), *p101 = find(s, 101), *p102 = find(s, 102);
        assert_non_null(p100);
        assert_int_equal(p100->memory, 100ull << 20);
        assert_int_equal(p100->sm, 30);
        assert_int_equal(p101->sm, 60);
        assert_int_equal(p102->sm, 0); /* no sample: idle */
        assert_false(p100->attributed);
        assert_string_equal(p100->container, "");
        /* GPU 1's process list grew between the size query and the fetch: all 20 are there */
        size_t on1 = 0;
        for (size_t i = 0; i < s->n_procs; i++)
                on1 += s->gpus[s->procs[i].gpu].index == 1;
        assert_int_equal(on1, 20);
        monitor_snapshot_unref(s);
}

static void test_utilization_only_newer_samples(void **state) {
        struct fixture *f = *state;
        assert_int_equal(monitor_sample(f->mon), 0);
        assert_int_equal(monitor_sample(f->mon), 0);
        /* the fake's samples are old by now: nothing ran since the last sample */
        struct monitor_snapshot *s = monitor_snapshot(f->mon);
        assert_int_equal(find(s, 100)->sm, 0);
        assert_int_equal(find(s, 101)->sm, 0);
        monitor_snapshot_unref(s);
}

static void test_snapshot_outlives_swap(void **state) {
        struct fixture *f = *state;
        assert_int_equal(monitor_sample(f->mon), 0);
        struct monitor_snapshot *old = monitor_snapshot(f->mon);
        assert_int_equal(monitor_sample(f->mon), 0);
        struct monitor_snapshot *cur = monitor_snapshot(f->mon);
        assert_ptr_not_equal(old, cur);
        assert_int_equal(old->n_gpus, 6); /* still readable after the swap */
        monitor_snapshot_unref(old);
        monitor_snapshot_unref(cur);
}

static int half_allocated(void *ud, unsigned index, double *ret) {
        (void)ud;
        if (index == 3)
                return -ENOENT;
        *ret = index == 0 ? 0.5 : 0;
        return 0;
}

static void test_allocation_hook(void **state) {
        struct fixture *f = *state;
        struct monitor_options o;
        monitor_options_init(&o);
        o.proc_root = "/nonexistent-proc";
        o.gpu_allocated = half_allocated;
        struct monitor *m;
        assert_int_equal(monitor_new(&o, f->nvml, &m), 0);
        assert_int_equal(monitor_sample(m), 0);
        struct monitor_snapshot *s = monitor_snapshot(m);
        assert_true(s->gpus[0].allocated == 0.5);
        assert_true(s->gpus[1].allocated == 0);
        assert_true(s->gpus[3].allocated < 0);
        monitor_snapshot_unref(s);
        monitor_free(m);
}

static char *http_get(unsigned port, const char *path) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct timeval tv = { .tv_sec = 10 };
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
        char req[128];
        int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
        assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
        size_t cap = 1 << 20, got = 0;
        char *buf = malloc(cap);
        ssize_t k;
        while ((k = recv(fd, buf + got, cap - got - 1, 0)) > 0)
                got += (size_t)k;
        buf[got] = '\0';
        close(fd);
        return buf;
}

static void test_service(void **state) {
        struct fixture *f = *state;
        struct monitor_options o;
        monitor_options_init(&o);
        o.proc_root = "/nonexistent-proc";
        o.interval_ms = 1000;
        struct monitor_service *svc;
        assert_int_equal(monitor_service_start(&o, f->nvml, "127.0.0.1:0", &svc), 0);
        unsigned port = monitor_service_port(svc);
        assert_true(port > 0);
        char *r = http_get(port, "/metrics");
        assert_true(startswith(r, "HTTP/1.1 200"));
        assert_non_null(strstr(r, "Content-Type: text/plain; version=0.0.4"));
        assert_non_null(strstr(r, "gpuslice_gpu_healthy{gpu_index=\"4\","));
        assert_non_null(strstr(r, "gpuslice_process_sm_utilization_ratio{pid=\"101\","));
        assert_non_null(strstr(r, "# TYPE gpuslice_monitor_samples_total counter\n"));
        free(r);
        r = http_get(port, "/healthz");
        assert_true(startswith(r, "HTTP/1.1 200"));
        free(r);
        assert_null(monitor_service_stop(svc));
}

static void test_service_bad_address(void **state) {
        struct fixture *f = *state;
        struct monitor_options o;
        monitor_options_init(&o);
        struct monitor_service *svc = NULL;
        assert_int_equal(monitor_service_start(&o, f->nvml, "not-an-address", &svc), -EINVAL);
        assert_null(svc);
        assert_null(monitor_service_stop(NULL));
}

static void test_no_nvml(void **state) {
        (void)state;
        struct monitor_options o;
        monitor_options_init(&o);
        o.nvml_library = "/nonexistent/libnvidia-ml.so.1";
        struct monitor *m = NULL;
        assert_int_equal(monitor_new(&o, NULL, &m), -ELIBACC);
        assert_null(m);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_no_snapshot_before_sample, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sample_gpus, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sample_processes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_utilization_only_newer_samples, setup, teardown),
                cmocka_unit_test_setup_teardown(test_snapshot_outlives_swap, setup, teardown),
                cmocka_unit_test_setup_teardown(test_allocation_hook, setup, teardown),
                cmocka_unit_test_setup_teardown(test_service, setup, teardown),
                cmocka_unit_test_setup_teardown(test_service_bad_address, setup, teardown),
                cmocka_unit_test(test_no_nvml),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
