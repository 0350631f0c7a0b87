/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for src/rpc: a real gRPC server and client over a unix socket in a temp dir — unary
 * round trip, error statuses, unknown methods, oversized messages, streaming, and a handler that
 * calls back into the same server while its own call is in flight (kubelet's Register handshake).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "helpers.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "deviceplugin.pb-c.h"
#include "rpc/rpc.h"

struct fixture {
        char *dir;
        char path[128];
        char target[140];
        char path2[128];
        char target2[140];
        struct rpc_server *srv;
        atomic_int stream_sent;
        atomic_int hang_ended; /* hang_stream calls that returned */
};

static enum rpc_code echo(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                          struct gs_error *st) {
        (void)userdata;
        if (req_len == 4 && memcmp(req, "fail", 4) == 0)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "you asked for %s", "failure");
        uint8_t *p = malloc(req_len + 1);
        if (!p)
                return rpc_error(st, RPC_INTERNAL, "oom");
        memcpy(p, req, req_len);
        *ret = p;
        *ret_len = req_len;
        return RPC_OK;
}

/* Kubelet's side of Register: while the caller waits, call back into the caller's server. */
static enum rpc_code callback(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                              struct gs_error *st) {
        struct fixture *f = userdata;
        (void)req;
        (void)req_len;
        uint8_t *resp = NULL;
        size_t n = 0;
        int r = rpc_call_unary(f->target, "/t.T/Echo", "inner", 5, 5000, &resp, &n, NULL);
        if (r < 0)
                return rpc_error(st, RPC_INTERNAL, "inner call failed: %d", r);
        *ret = resp;
        *ret_len = n;
        return RPC_OK;
}

static enum rpc_code counter_stream(void *userdata, const uint8_t *req, size_t req_len, struct rpc_stream *s,
                                    struct gs_error *st) {
        struct fixture *f = userdata;
        (void)req;
        (void)req_len;
        (void)st;
        for (int i = 0; i < 1000; i++) {
                char buf[16];
                int n = snprintf(buf, sizeof buf, "%d", i);
                if (rpc_stream_send(s, buf, (size_t)n) < 0)
                        break;
                atomic_fetch_add(&f->stream_sent, 1);
                if (rpc_stream_wait(s, 20) < 0)
                        break;
        }
        return RPC_OK;
}

/* A peer that accepts a call and never answers it (a hung kubelet): it waits until cancelled. */
static enum rpc_code hang_stream(void *userdata, const uint8_t *req, size_t req_len, struct rpc_stream *s,
                                 struct gs_error *st) {
        struct fixture *f = userdata;
        (void)req;
        (void)req_len;
        (void)st;
        while (rpc_stream_wait(s, -1) == 0) /* no timeout: only the client or a stopping server ends it */
                ;
        atomic_fetch_add(&f->hang_ended, 1);
        return RPC_OK;
}

/* Waits for `changed` to move (rpc_stream_wait_change), then sends one message saying why it
 * stopped waiting: "woke" (the value moved), "timeout" (1 s passed) or nothing (closed). */
static atomic_uint_fast64_t changed;
static enum rpc_code wait_stream(void *userdata, const uint8_t *req, size_t req_len, struct rpc_stream *s,
                                 struct gs_error *st) {
        (void)userdata;
        (void)req;
        (void)req_len;
        (void)st;
        uint64_t seen = atomic_load(&changed);
        int r = rpc_stream_wait_change(s, &changed, seen, 1000);
        if (r == 1)
                (void)rpc_stream_send(s, "woke", 4);
        else if (r == 0)
                (void)rpc_stream_send(s, "timeout", 7);
        return RPC_OK;
}

static int setup(void **state) {
        struct fixture *f = calloc(1, sizeof *f);
        assert_non_null(f);
        f->dir = test_tmpdir_new("rpc");
        snprintf(f->path, sizeof f->path, "%s/s.sock", f->dir);
        snprintf(f->target, sizeof f->target, "unix:%s", f->path);
        assert_int_equal(rpc_server_new(f->path, 4096, &f->srv), 0);
        assert_int_equal(rpc_server_add_unary(f->srv, "/t.T/Echo", echo, f), 0);
        assert_int_equal(rpc_server_add_stream(f->srv, "/t.T/Count", counter_stream, f), 0);
        assert_int_equal(rpc_server_add_stream(f->srv, "/t.T/Hang", hang_stream, f), 0);
        assert_int_equal(rpc_server_add_stream(f->srv, "/t.T/Wait", wait_stream, f), 0);
        assert_int_equal(rpc_server_start(f->srv), 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;
        f->srv = rpc_server_free(f->srv);
        struct stat st;
        assert_int_equal(stat(f->path, &st), -1); /* socket removed */
        assert_int_equal(test_tmpdir_free(f->dir), 0);
        free(f);
        return 0;
}

static void test_unary_roundtrip(void **state) {
        struct fixture *f = *state;
        uint8_t *resp = NULL;
        size_t n = 0;
        struct gs_error st;
        assert_int_equal(rpc_call_unary(f->target, "/t.T/Echo", "hello", 5, 5000, &resp, &n, &st), 0);
        assert_int_equal(st.code, RPC_OK);
        assert_int_equal(n, 5);
        assert_memory_equal(resp, "hello", 5);
        free(resp);
}

static void test_unary_empty_message(void **state) {
        struct fixture *f = *state;
        uint8_t *resp = (uint8_t *)"x";
        size_t n = 99;
        assert_int_equal(rpc_call_unary(f->target, "/t.T/Echo", NULL, 0, 5000, &resp, &n, NULL), 0);
        assert_int_equal(n, 0);
        free(resp);
}

static void test_unary_error_status(void **state) {
        struct fixture *f = *state;
        uint8_t *resp = NULL;
        size_t n = 0;
        struct gs_error st;
        assert_int_equal(rpc_call_unary(f->target, "/t.T/Echo", "fail", 4, 5000, &resp, &n, &st), -EREMOTEIO);
        assert_int_equal(st.code, RPC_INVALID_ARGUMENT);
        assert_string_equal(st.message, "you asked for failure");
        assert_null(resp);
}

static void test_unknown_method(void **state) {
        struct fixture *f = *state;
        uint8_t *resp = NULL;
        size_t n = 0;
        struct gs_error st;
        assert_int_equal(rpc_call_unary(f->target, "/t.T/Nope", "x", 1, 5000, &resp, &n, &st), -EREMOTEIO);
        assert_int_equal(st.code, RPC_UNIMPLEMENTED);
        assert_non_null(strstr(st.message, "/t.T/Nope"));
}

static void test_oversized_message_refused(void **state) {
        struct fixture *f = *state;
        size_t big = 64 * 1024; /* the fixture's limit is 4096 */
        char *buf = calloc(1, big);
        assert_non_null(buf);
        uint8_t *resp = NULL;
        size_t n = 0;
        struct gs_error st;
        assert_int_equal(rpc_call_unary(f->target, "/t.T/Echo", buf, big, 5000, &resp, &n, &st), -EREMOTEIO);
        assert_int_equal(st.code, RPC_RESOURCE_EXHAUSTED);
        free(buf);
        /* the server still serves */
        assert_int_equal(rpc_call_unary(f->target, "/t.T/Echo", "ok", 2, 5000, &resp, &n, &st), 0);
        free(resp);
}

static void test_callback_during_call(void **state) {
        struct fixture *f = *state;
        /* A second server plays kubelet: its Register-like handler calls our Echo while our
         * client call to it is in flight — our server must answer meanwhile. */
        struct rpc_server *kubelet = NULL;
        snprintf(f->path2, sizeof f->path2, "%s/k.sock", f->dir);
        snprintf(f->target2, sizeof f->target2, "unix:%s", f->path2);
        assert_int_equal(rpc_server_new(f->path2, 0, &kubelet), 0);
        assert_int_equal(rpc_server_add_unary(kubelet, "/t.K/Register", callback, f), 0);
        assert_int_equal(rpc_server_start(kubelet), 0);
        uint8_t *resp = NULL;
        size_t n = 0;
        assert_int_equal(rpc_call_unary(f->target2, "/t.K/Register", "x", 1, 5000, &resp, &n, NULL), 0);
        assert_int_equal(n, 5);
        assert_memory_equal(resp, "inner", 5);
        free(resp);
        assert_null(rpc_server_free(kubelet));
}

static void test_many_sequential_calls(void **state) {
        struct fixture *f = *state;
        for (int i = 0; i < 200; i++) {
                char msg[16];
                int len = snprintf(msg, sizeof msg, "m%d", i);
                uint8_t *resp = NULL;
                size_t n = 0;
                assert_int_equal(rpc_call_unary(f->target, "/t.T/Echo", msg, (size_t)len, 5000, &resp, &n, NULL), 0);
                assert_int_equal(n, (size_t)len);
                assert_memory_equal(resp, msg, n);
                free(resp);
        }
}

static void test_no_server(void **state) {
        struct fixture *f = *state;
        char target[200];
        snprintf(target, sizeof target, "unix:%s/absent.sock", f->dir);
        uint8_t *resp = NULL;
        size_t n = 0;
        struct gs_error st;
        assert_int_equal(rpc_call_unary(target, "/t.T/Echo", "x", 1, 2000, &resp, &n, &st), -ECONNREFUSED);
        assert_int_equal(st.code, RPC_UNAVAILABLE);
}

static void test_stream_cancelled_by_free(void **state) {
        struct fixture *f = *state;
        /* A streaming call from a thread; freeing the server must end it and return. The unary
         * client cannot read streams, but it starts the call: the handler runs and is cancelled. */
        uint8_t *resp = NULL;
        size_t n = 0;
        struct gs_error st;
        int r = rpc_call_unary(f->target, "/t.T/Count", "", 0, 300, &resp, &n, &st);
        /* A unary reader gets the first message and then a protocol error, or the deadline. */
        assert_true(r < 0 || n > 0);
        free(resp);
        assert_true(atomic_load(&f->stream_sent) >= 1);
}

static uint64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A stream waiting for a change: a wake-up without a change keeps it waiting, a change plus
 * rpc_streams_wake ends the wait at once (no polling), and with neither it times out. */
static void test_stream_woken_by_change(void **state) {
        struct fixture *f = *state;
        struct rpc_client_call *c = NULL;
        assert_int_equal(rpc_call_start(f->target, "/t.T/Wait", "", 0, 10000, -1, &c), 0);
        usleep(200 * 1000); /* the handler is waiting (its call has arrived) */
        rpc_streams_wake(); /* spurious: the value did not move */
        usleep(100 * 1000);
        assert_false(rpc_call_done(c));
        uint64_t t0 = now_ms();
        atomic_fetch_add(&changed, 1);
        rpc_streams_wake();
        uint8_t *resp = NULL;
        size_t n = 0;
        int r = rpc_call_finish(c, &resp, &n, NULL);
        uint64_t dt = now_ms() - t0;
        /* a unary reader of a stream gets its message (then maybe a protocol error) */
        assert_true(n == 4 && memcmp(resp, "woke", 4) == 0);
        (void)r;
        assert_true(dt < 900); /* woken, not the 1 s timeout */
        free(resp);

        /* nobody wakes it: the timeout */
        resp = NULL;
        n = 0;
        t0 = now_ms();
        (void)rpc_call_unary(f->target, "/t.T/Wait", "", 0, 10000, &resp, &n, NULL);
        assert_true(n == 7 && memcmp(resp, "timeout", 7) == 0);
        assert_true(now_ms() - t0 >= 900);
        free(resp);
}

/* Wait up to 5 s for the server's hung handlers to have returned n times in all. */
static bool hang_ended_within(struct fixture *f, int n) {
        for (int i = 0; i < 500 && atomic_load(&f->hang_ended) < n; i++)
                usleep(10 * 1000);
        return atomic_load(&f->hang_ended) >= n;
}

/* A peer that never answers: the call ends with DEADLINE_EXCEEDED after its timeout (kept by the
 * client alone, no gRPC deadline), and the cancel reaches the peer, whose handler then returns. */
static void test_unary_hung_peer_times_out(void **state) {
        struct fixture *f = *state;
        uint8_t *resp = NULL;
        size_t n = 0;
        struct gs_error st;
        uint64_t t0 = now_ms();
        assert_int_equal(rpc_call_unary(f->target, "/t.T/Hang", "x", 1, 300, &resp, &n, &st), -ETIMEDOUT);
        uint64_t dt = now_ms() - t0;
        assert_int_equal(st.code, RPC_DEADLINE_EXCEEDED);
        assert_null(resp);
        assert_true(dt >= 290 && dt < 5000);
        assert_true(hang_ended_within(f, 1));
        /* the server still serves */
        assert_int_equal(rpc_call_unary(f->target, "/t.T/Echo", "ok", 2, 5000, &resp, &n, &st), 0);
        free(resp);
}

/* The same on a kept connection: the call times out, the next call on the client succeeds. */
static void test_client_hung_peer_times_out(void **state) {
        struct fixture *f = *state;
        struct rpc_client *c = NULL;
        assert_int_equal(rpc_client_new(f->target, &c), 0);
        uint8_t *resp = NULL;
        size_t n = 0;
        struct gs_error st;
        assert_int_equal(rpc_client_call(c, "/t.T/Echo", "a", 1, 5000, &resp, &n, &st), 0);
        free(resp);
        resp = NULL;
        uint64_t t0 = now_ms();
        assert_int_equal(rpc_client_call(c, "/t.T/Hang", "x", 1, 300, &resp, &n, &st), -ETIMEDOUT);
        uint64_t dt = now_ms() - t0;
        assert_int_equal(st.code, RPC_DEADLINE_EXCEEDED);
        assert_true(dt >= 290 && dt < 5000);
        assert_true(hang_ended_within(f, 1));
        assert_int_equal(rpc_client_call(c, "/t.T/Echo", "b", 1, 5000, &resp, &n, &st), 0);
        assert_int_equal(n, 1);
        free(resp);
        assert_null(rpc_client_free(c));
}

/* An asynchronous call (Register's way) to a peer that never answers ends at its timeout. */
static void test_async_hung_peer_times_out(void **state) {
        struct fixture *f = *state;
        int efd = eventfd(0, EFD_CLOEXEC);
        assert_true(efd >= 0);
        struct rpc_client_call *c = NULL;
        uint64_t t0 = now_ms();
        assert_int_equal(rpc_call_start(f->target, "/t.T/Hang", "x", 1, 300, efd, &c), 0);
        struct pollfd p = { .fd = efd, .events = POLLIN };
        assert_int_equal(poll(&p, 1, 10000), 1);
        uint64_t dt = now_ms() - t0;
        assert_true(dt >= 290 && dt < 5000);
        struct gs_error st;
        assert_int_equal(rpc_call_finish(c, NULL, NULL, &st), -ETIMEDOUT);
        assert_int_equal(st.code, RPC_DEADLINE_EXCEEDED);
        assert_true(hang_ended_within(f, 1));
        close(efd);
}

/* A stream sleeping without a timeout is ended by freeing the server. */
static void test_stream_wait_ended_by_free(void **state) {
        struct fixture *f = *state;
        struct rpc_client_call *c = NULL;
        assert_int_equal(rpc_call_start(f->target, "/t.T/Hang", "", 0, 10000, -1, &c), 0);
        usleep(200 * 1000);
        uint64_t t0 = now_ms();
        f->srv = rpc_server_free(f->srv);
        assert_true(now_ms() - t0 < 5000);
        (void)rpc_call_finish(c, NULL, NULL, NULL); /* ended (its status depends on who was first) */
}

static void test_async_roundtrip_notifies(void **state) {
        struct fixture *f = *state;
        int efd = eventfd(0, EFD_CLOEXEC);
        assert_true(efd >= 0);
        struct rpc_client_call *c = NULL;
        assert_int_equal(rpc_call_start(f->target, "/t.T/Echo", "async", 5, 5000, efd, &c), 0);
        struct pollfd p = { .fd = efd, .events = POLLIN };
        assert_int_equal(poll(&p, 1, 10000), 1);
        uint64_t v = 0;
        assert_int_equal(read(efd, &v, sizeof v), (ssize_t)sizeof v);
        assert_int_equal(v, 1);
        assert_true(rpc_call_done(c));
        uint8_t *resp = NULL;
        size_t n = 0;
        struct gs_error st;
        assert_int_equal(rpc_call_finish(c, &resp, &n, &st), 0);
        assert_int_equal(st.code, RPC_OK);
        assert_int_equal(n, 5);
        assert_memory_equal(resp, "async", 5);
        free(resp);
        close(efd);
}

static void test_async_error_status(void **state) {
        struct fixture *f = *state;
        struct rpc_client_call *c = NULL;
        assert_int_equal(rpc_call_start(f->target, "/t.T/Echo", "fail", 4, 5000, -1, &c), 0);
        struct gs_error st;
        uint8_t *resp = NULL;
        size_t n = 0;
        assert_int_equal(rpc_call_finish(c, &resp, &n, &st), -EREMOTEIO);
        assert_int_equal(st.code, RPC_INVALID_ARGUMENT);
        assert_non_null(strstr(st.message, "failure"));
        assert_null(resp);
}

static void test_async_cancel_hung_peer(void **state) {
        struct fixture *f = *state;
        int efd = eventfd(0, EFD_CLOEXEC);
        assert_true(efd >= 0);
        struct rpc_client_call *c = NULL;
        /* The peer never answers and the deadline is far away: only the cancel ends the call. */
        assert_int_equal(rpc_call_start(f->target, "/t.T/Hang", "x", 1, 600000, efd, &c), 0);
        struct pollfd p = { .fd = efd, .events = POLLIN };
        assert_int_equal(poll(&p, 1, 200), 0);
        assert_false(rpc_call_done(c));
        rpc_call_cancel(c);
        rpc_call_cancel(c); /* twice is harmless */
        struct gs_error st;
        assert_int_equal(rpc_call_finish(c, NULL, NULL, &st), -EREMOTEIO);
        assert_int_equal(st.code, RPC_CANCELLED);
        assert_int_equal(poll(&p, 1, 0), 1);
        close(efd);
}

static void test_async_cancel_before_connect(void **state) {
        struct fixture *f = *state;
        char target[200];
        snprintf(target, sizeof target, "unix:%s/absent.sock", f->dir);
        struct rpc_client_call *c = NULL;
        assert_int_equal(rpc_call_start(target, "/t.T/Echo", "x", 1, 600000, -1, &c), 0);
        rpc_call_cancel(c);
        struct gs_error st;
        int r = rpc_call_finish(c, NULL, NULL, &st);
        /* Cancelled, or refused first if the connection attempt failed before the cancel. */
        assert_true(r == -EREMOTEIO || r == -ECONNREFUSED);
        assert_true(st.code == RPC_CANCELLED || st.code == RPC_UNAVAILABLE);
}

static void restart_server(struct fixture *f) {
        f->srv = rpc_server_free(f->srv);
        assert_int_equal(rpc_server_new(f->path, 4096, &f->srv), 0);
        assert_int_equal(rpc_server_add_unary(f->srv, "/t.T/Echo", echo, f), 0);
        assert_int_equal(rpc_server_start(f->srv), 0);
}

static void client_echo(struct rpc_client *c, int expect) {
        uint8_t *resp = NULL;
        size_t n = 0;
        struct gs_error st;
        assert_int_equal(rpc_client_call(c, "/t.T/Echo", "kept", 4, 2000, &resp, &n, &st), expect);
        if (expect == 0) {
                assert_int_equal(n, 4);
                assert_memory_equal(resp, "kept", 4);
        } else {
                assert_int_equal(st.code, RPC_UNAVAILABLE);
        }
        free(resp);
}

/* The kept connection: calls in a row, the peer restarting between calls (the next call still
 * succeeds), the peer gone (UNAVAILABLE) and back. */
static void test_client_kept_connection(void **state) {
        struct fixture *f = *state;
        struct rpc_client *c = NULL;
        assert_int_equal(rpc_client_new(f->target, &c), 0);
        for (int i = 0; i < 5; i++)
                client_echo(c, 0);
        restart_server(f);
        client_echo(c, 0);
        f->srv = rpc_server_free(f->srv);
        client_echo(c, -ECONNREFUSED);
        restart_server(f);
        client_echo(c, 0);
        uint8_t *resp = NULL;
        size_t n = 0;
        struct gs_error st;
        assert_int_equal(rpc_client_call(c, "/t.T/Echo", "fail", 4, 2000, &resp, &n, &st), -EREMOTEIO);
        assert_int_equal(st.code, RPC_INVALID_ARGUMENT);
        client_echo(c, 0);
        assert_null(rpc_client_free(c));
        assert_null(rpc_client_free(NULL));
        assert_int_equal(rpc_client_new(NULL, &c), -EINVAL);
        assert_int_equal(rpc_client_call(NULL, "/a/b", NULL, 0, 100, &resp, &n, NULL), -EINVAL);
}

static void test_pack_protobuf(void **state) {
        (void)state;
        V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
        o.get_preferred_allocation_available = 1;
        uint8_t *buf = NULL;
        size_t n = 0;
        assert_int_equal(rpc_pack(&o.base, &buf, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(buf[0], 0x10); /* field 2, varint */
        assert_int_equal(buf[1], 1);
        free(buf);
}

static void test_bad_arguments(void **state) {
        (void)state;
        struct rpc_server *s = NULL;
        assert_int_equal(rpc_server_new(NULL, 0, &s), -EINVAL);
        char longpath[200];
        memset(longpath, 'a', sizeof longpath - 1);
        longpath[sizeof longpath - 1] = 0;
        assert_int_equal(rpc_server_new(longpath, 0, &s), -EINVAL);
        assert_int_equal(rpc_server_new("/tmp/x.sock", 0, &s), 0);
        assert_int_equal(rpc_server_add_unary(s, "/a/b", NULL, NULL), -EINVAL);
        assert_null(rpc_server_free(s));
        assert_null(rpc_server_free(NULL));
        assert_int_equal(rpc_call_unary(NULL, "/a/b", NULL, 0, 100, NULL, NULL, NULL), -EINVAL);
        struct rpc_client_call *c = NULL;
        assert_int_equal(rpc_call_start(NULL, "/a/b", NULL, 0, 100, -1, &c), -EINVAL);
        assert_int_equal(rpc_call_start("unix:/x", "/a/b", NULL, 1, 100, -1, &c), -EINVAL);
        assert_null(c);
        assert_int_equal(rpc_call_finish(NULL, NULL, NULL, NULL), -EINVAL);
        rpc_call_cancel(NULL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_unary_roundtrip, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unary_empty_message, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unary_error_status, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unknown_method, setup, teardown),
                cmocka_unit_test_setup_teardown(test_oversized_message_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_callback_during_call, setup, teardown),
                cmocka_unit_test_setup_teardown(test_many_sequential_calls, setup, teardown),
                cmocka_unit_test_setup_teardown(test_no_server, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stream_cancelled_by_free, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stream_woken_by_change, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stream_wait_ended_by_free, setup, teardown),
                cmocka_unit_test_setup_teardown(test_async_roundtrip_notifies, setup, teardown),
                cmocka_unit_test_setup_teardown(test_async_error_status, setup, teardown),
                cmocka_unit_test_setup_teardown(test_async_cancel_hung_peer, setup, teardown),
                cmocka_unit_test_setup_teardown(test_async_cancel_before_connect, setup, teardown),
                cmocka_unit_test_setup_teardown(test_client_kept_connection, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unary_hung_peer_times_out, setup, teardown),
                cmocka_unit_test_setup_teardown(test_client_hung_peer_times_out, setup, teardown),
                cmocka_unit_test_setup_teardown(test_async_hung_peer_times_out, setup, teardown),
                cmocka_unit_test(test_pack_protobuf),
                cmocka_unit_test(test_bad_arguments),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
