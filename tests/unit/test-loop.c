/* SPDX-License-Identifier: Apache-2.0 */
/* test-loop — src/util/loop.c: each kind of source fires, in order, only when due; stopping and
 * freeing handles from callbacks; cross-thread posts coalesce; every refusal at the API edge. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "util/loop.h"
#include "util/util.h"

struct rec {
        struct loop *l;
        char order[16];
        unsigned n;
        int last_signal;
        uint32_t last_events;
        struct loop_timer *other; /* stopped by the first timer's callback */
        struct loop_event *ev;
};

static void rec_add(struct rec *r, char c) {
        if (r->n + 1 < sizeof r->order)
                r->order[r->n++] = c;
}

static void on_timer_a(struct loop_timer *t) {
        rec_add(t->userdata, 'a');
}
static void on_timer_b(struct loop_timer *t) {
        struct rec *r = t->userdata;
        rec_add(r, 'b');
        loop_stop(r->l);
}

static void test_timers_fire_in_order(void **state) {
        (void)state;
        struct loop l;
        assert_int_equal(loop_init(&l), 0);
        struct rec r = { .l = &l };
        struct loop_timer a, b;
        assert_int_equal(loop_timer_init(&l, &a, on_timer_a, &r), 0);
        assert_int_equal(loop_timer_init(&l, &b, on_timer_b, &r), 0);
        assert_false(loop_timer_armed(&a));
        uint64_t t0 = monotonic_ms();
        assert_int_equal(loop_timer_start(&b, 60), 0);
        assert_int_equal(loop_timer_start(&a, 20), 0);
        assert_true(loop_timer_armed(&a));
        assert_int_equal(loop_run(&l), 0);
        assert_true(monotonic_ms() - t0 >= 60);
        assert_string_equal(r.order, "ab");
        assert_false(loop_timer_armed(&a));
        /* nothing is due any more: the loop sleeps and a bounded wait times out */
        assert_int_equal(loop_run_once(&l, 30), 0);
        loop_timer_done(&a);
        loop_timer_done(&b);
        loop_timer_done(&b); /* twice is fine */
        loop_done(&l);
}

static void on_timer_stops_other(struct loop_timer *t) {
        struct rec *r = t->userdata;
        rec_add(r, 'x');
        assert_int_equal(loop_timer_stop(r->other), 0);
}
static void on_timer_never(struct loop_timer *t) {
        rec_add(t->userdata, '!');
}

static void test_timer_stop_and_rearm(void **state) {
        (void)state;
        struct loop l;
        assert_int_equal(loop_init(&l), 0);
        struct rec r = { .l = &l };
        struct loop_timer x, y;
        assert_int_equal(loop_timer_init(&l, &x, on_timer_stops_other, &r), 0);
        assert_int_equal(loop_timer_init(&l, &y, on_timer_never, &r), 0);
        r.other = &y;
        /* both due at about the same time: whichever runs first, y must not run after x stopped it */
        assert_int_equal(loop_timer_start(&y, 30), 0);
        assert_int_equal(loop_timer_start(&y, 5000), 0); /* re-arming replaces the deadline */
        assert_int_equal(loop_timer_start(&x, 0), 0);
        assert_int_equal(loop_run_once(&l, 1000), 1);
        assert_int_equal(loop_run_once(&l, 100), 0);
        assert_string_equal(r.order, "x");
        loop_timer_done(&x);
        loop_timer_done(&y);
        loop_done(&l);
}

static void on_io(struct loop_io *h, uint32_t events) {
        struct rec *r = h->userdata;
        r->last_events = events;
        char buf[8];
        ssize_t k = read(h->fd, buf, sizeof buf);
        rec_add(r, k > 0 ? 'r' : 'e');
        if (k == 0)
                assert_int_equal(loop_io_stop(h), 0);
}

static void test_io(void **state) {
        (void)state;
        struct loop l;
        assert_int_equal(loop_init(&l), 0);
        struct rec r = { .l = &l };
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
        struct loop_io h = { 0 };
        assert_int_equal(loop_io_start(&l, &h, p[0], EPOLLIN, on_io, &r), 0);
        assert_int_equal(loop_io_start(&l, &h, p[0], EPOLLIN, on_io, &r), -EBUSY);
        assert_int_equal(loop_run_once(&l, 0), 0); /* nothing to read */
        assert_int_equal(write(p[1], "hi", 2), 2);
        assert_int_equal(loop_run_once(&l, 1000), 1);
        assert_true(r.last_events & EPOLLIN);
        close(p[1]); /* end of file: the callback stops its own handle */
        assert_int_equal(loop_run_once(&l, 1000), 1);
        assert_true(r.last_events & EPOLLHUP);
        assert_int_equal(loop_run_once(&l, 50), 0);
        assert_string_equal(r.order, "re");
        assert_int_equal(loop_io_stop(&h), 0); /* not active: fine */
        close(p[0]);
        loop_done(&l);
}

static void on_signal(struct loop_signal *s, int signo) {
        struct rec *r = s->userdata;
        r->last_signal = signo;
        loop_stop(r->l);
}

static void test_signal(void **state) {
        (void)state;
        sigset_t mask, old;
        sigemptyset(&mask);
        sigaddset(&mask, SIGUSR1);
        assert_int_equal(pthread_sigmask(SIG_BLOCK, &mask, &old), 0);
        struct loop l;
        assert_int_equal(loop_init(&l), 0);
        struct rec r = { .l = &l };
        struct loop_signal s;
        assert_int_equal(loop_signal_init(&l, &s, &mask, on_signal, &r), 0);
        assert_int_equal(raise(SIGUSR1), 0);
        assert_int_equal(loop_run(&l), 0);
        assert_int_equal(r.last_signal, SIGUSR1);
        loop_signal_done(&s);
        loop_signal_done(&s);
        loop_done(&l);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void on_event(struct loop_event *e) {
        struct rec *r = e->userdata;
        rec_add(r, 'w');
        loop_stop(r->l);
}

static void *poster(void *arg) {
        struct loop_event *e = arg;
        usleep(20 * 1000);
        for (int i = 0; i < 100; i++)
                assert_int_equal(loop_event_post(e), 0);
        return NULL;
}

static void test_event_from_thread_coalesces(void **state) {
        (void)state;
        struct loop l;
        assert_int_equal(loop_init(&l), 0);
        struct rec r = { .l = &l };
        struct loop_event e;
        assert_int_equal(loop_event_init(&l, &e, on_event, &r), 0);
        assert_true(loop_event_fd(&e) >= 0);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, poster, &e), 0);
        pthread_join(t, NULL);
        assert_int_equal(loop_run(&l), 0);
        assert_int_equal(loop_run_once(&l, 50), 0); /* 100 posts, one callback */
        assert_string_equal(r.order, "w");
        loop_event_done(&e);
        assert_int_equal(loop_event_post(&e), -EINVAL);
        loop_done(&l);
}

static void on_event_frees_timer(struct loop_event *e) {
        struct rec *r = e->userdata;
        loop_timer_done(r->other); /* a ready source stopped (and its fd closed) from a callback */
        rec_add(r, 'f');
}

static void test_callback_frees_ready_handle(void **state) {
        (void)state;
        struct loop l;
        assert_int_equal(loop_init(&l), 0);
        struct rec r = { .l = &l };
        struct loop_timer t;
        struct loop_event e;
        assert_int_equal(loop_timer_init(&l, &t, on_timer_never, &r), 0);
        assert_int_equal(loop_event_init(&l, &e, on_event_frees_timer, &r), 0);
        r.other = &t;
        assert_int_equal(loop_timer_start(&t, 0), 0);
        assert_int_equal(loop_event_post(&e), 0);
        usleep(10 * 1000); /* both ready */
        int ran = 0;
        for (int i = 0; i < 3; i++)
                ran += loop_run_once(&l, 20);
        /* the timer ran before the event freed it, or never */
        assert_true(streq(r.order, "f") || streq(r.order, "!f"));
        assert_int_equal(ran, (int)r.n);
        loop_event_done(&e);
        loop_done(&l);
}

static void on_io_dummy(struct loop_io *h, uint32_t events) {
        (void)h;
        (void)events;
}
static void on_timer_dummy(struct loop_timer *t) {
        (void)t;
}
static void on_signal_dummy(struct loop_signal *s, int signo) {
        (void)s;
        (void)signo;
}
static void on_event_dummy(struct loop_event *e) {
        (void)e;
}

static void test_refusals(void **state) {
        (void)state;
        struct loop l;
        assert_int_equal(loop_init(NULL), -EINVAL);
        assert_int_equal(loop_run(NULL), -EINVAL);
        assert_int_equal(loop_run_once(NULL, 0), -EINVAL);
        loop_done(NULL);
        loop_stop(NULL);
        assert_int_equal(loop_init(&l), 0);
        struct loop_io h = { 0 };
        assert_int_equal(loop_io_start(&l, &h, -1, EPOLLIN, on_io_dummy, NULL), -EINVAL);
        assert_int_equal(loop_io_start(&l, &h, 0, EPOLLIN, NULL, NULL), -EINVAL);
        assert_int_equal(loop_io_start(NULL, &h, 0, EPOLLIN, on_io_dummy, NULL), -EINVAL);
        assert_int_equal(loop_io_start(&l, &h, 999999, EPOLLIN, on_io_dummy, NULL), -EBADF);
        /* epoll refuses regular files */
        int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(loop_io_start(&l, &h, fd, EPOLLIN, on_io_dummy, NULL), -EPERM);
        close(fd);
        assert_int_equal(loop_io_stop(NULL), -EINVAL);

        struct loop_timer t;
        assert_int_equal(loop_timer_init(&l, &t, NULL, NULL), -EINVAL);
        assert_int_equal(loop_timer_init(NULL, &t, on_timer_dummy, NULL), -EINVAL);
        assert_int_equal(loop_timer_start(NULL, 1), -EINVAL);
        assert_int_equal(loop_timer_stop(NULL), -EINVAL);
        assert_false(loop_timer_armed(NULL));
        loop_timer_done(NULL);

        struct loop_signal s;
        sigset_t empty;
        sigemptyset(&empty);
        assert_int_equal(loop_signal_init(&l, &s, &empty, on_signal_dummy, NULL), -EINVAL);
        assert_int_equal(loop_signal_init(&l, &s, NULL, on_signal_dummy, NULL), -EINVAL);
        loop_signal_done(NULL);

        struct loop_event e;
        assert_int_equal(loop_event_init(&l, &e, NULL, NULL), -EINVAL);
        assert_int_equal(loop_event_post(NULL), -EINVAL);
        assert_int_equal(loop_event_fd(NULL), -EINVAL);
        loop_event_done(NULL);

        /* a closed loop refuses new sources, and handles made on it report the error */
        loop_done(&l);
        assert_int_equal(loop_run(&l), -EINVAL);
        assert_int_equal(loop_io_start(&l, &h, 0, EPOLLIN, on_io_dummy, NULL), -EINVAL);
        assert_int_equal(loop_event_init(&l, &e, on_event_dummy, NULL), -EINVAL);
        assert_int_equal(loop_timer_init(&l, &t, on_timer_dummy, NULL), -EINVAL);
        assert_int_equal(loop_timer_start(&t, 1), -EINVAL);
        loop_done(&l); /* twice is fine */
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_timers_fire_in_order),
                cmocka_unit_test(test_timer_stop_and_rearm),
                cmocka_unit_test(test_io),
                cmocka_unit_test(test_signal),
                cmocka_unit_test(test_event_from_thread_coalesces),
                cmocka_unit_test(test_callback_frees_ready_handle),
                cmocka_unit_test(test_refusals),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
