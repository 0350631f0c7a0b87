/* SPDX-License-Identifier: Apache-2.0 */
/* loop — epoll + timerfd + signalfd + eventfd (see loop.h). */
#include "util/loop.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

int loop_init(struct loop *l) {
        if (!l)
                return -EINVAL;
        *l = (struct loop){ .epfd = epoll_create1(EPOLL_CLOEXEC) };
        if (l->epfd < 0)
                return -errno;
        return 0;
}

void loop_done(struct loop *l) {
        if (!l || l->epfd < 0)
                return;
        close(l->epfd);
        l->epfd = -1;
}

void loop_stop(struct loop *l) {
        if (l)
                l->stop = true;
}

int loop_run_once(struct loop *l, int timeout_ms) {
        if (!l || l->epfd < 0)
                return -EINVAL;
        /* One event per wait: a callback may stop (or free) any other handle, and a stale pointer
         * from the same batch could otherwise be dispatched. A ready fd costs no sleep, so this
         * adds system calls under load, not wake-ups when idle. */
        struct epoll_event ev;
        int n = epoll_wait(l->epfd, &ev, 1, timeout_ms);
        if (n < 0)
                return errno == EINTR ? 0 : -errno;
        if (n == 0)
                return 0;
        struct loop_io *h = ev.data.ptr;
        if (!h->active)
                return 0;
        l->n_dispatched++;
        h->fn(h, ev.events);
        return 1;
}

int loop_run(struct loop *l) {
        if (!l || l->epfd < 0)
                return -EINVAL;
        l->stop = false;
        while (!l->stop) {
                int r = loop_run_once(l, -1);
                if (r < 0)
                        return r;
        }
        return 0;
}

int loop_io_start(struct loop *l, struct loop_io *h, int fd, uint32_t events, loop_io_fn fn, void *userdata) {
        if (!l || !h || !fn || fd < 0 || l->epfd < 0)
                return -EINVAL;
        if (h->active && h->loop == l)
                return -EBUSY;
        *h = (struct loop_io){ .loop = l, .fd = fd, .fn = fn, .userdata = userdata };
        struct epoll_event ev = { .events = events, .data.ptr = h };
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
                return -errno;
        h->active = true;
        return 0;
}

int loop_io_stop(struct loop_io *h) {
        if (!h)
                return -EINVAL;
        if (!h->active)
                return 0;
        h->active = false;
        if (epoll_ctl(h->loop->epfd, EPOLL_CTL_DEL, h->fd, NULL) < 0)
                return -errno;
        return 0;
}

/* ---- timers ---- */

static void timer_ready(struct loop_io *io, uint32_t events) {
        (void)events;
        struct loop_timer *t = (struct loop_timer *)io; /* io is the first member */
        uint64_t expirations;
        if (read(io->fd, &expirations, sizeof expirations) != (ssize_t)sizeof expirations)
                return; /* re-armed or stopped since epoll said it was ready */
        t->armed = false;
        t->fn(t);
}

int loop_timer_init(struct loop *l, struct loop_timer *t, loop_timer_fn fn, void *userdata) {
        if (!l || !t || !fn)
                return -EINVAL;
        *t = (struct loop_timer){ .fn = fn, .userdata = userdata, .io.fd = -1 };
        int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (fd < 0)
                return -errno;
        int r = loop_io_start(l, &t->io, fd, EPOLLIN, timer_ready, t);
        if (r < 0) {
                close(fd);
                t->io.fd = -1;
        }
        return r;
}

int loop_timer_start(struct loop_timer *t, uint64_t ms) {
        if (!t || !t->io.loop || t->io.fd < 0)
                return -EINVAL;
        /* it_value 0 would disarm: "as soon as possible" is 1 ns */
        struct itimerspec its = { .it_value = { .tv_sec = (time_t)(ms / 1000),
                                                .tv_nsec = (long)(ms % 1000) * 1000000L } };
        if (ms == 0)
                its.it_value.tv_nsec = 1;
        if (timerfd_settime(t->io.fd, 0, &its, NULL) < 0)
                return -errno;
        t->armed = true;
        return 0;
}

int loop_timer_stop(struct loop_timer *t) {
        if (!t || !t->io.loop || t->io.fd < 0)
                return -EINVAL;
        struct itimerspec its = { 0 };
        if (timerfd_settime(t->io.fd, 0, &its, NULL) < 0)
                return -errno;
        t->armed = false;
        return 0;
}

bool loop_timer_armed(const struct loop_timer *t) {
        return t && t->armed;
}

void loop_timer_done(struct loop_timer *t) {
        if (!t || !t->io.loop || t->io.fd < 0) /* zeroed (never initialised) or done */
                return;
        (void)loop_io_stop(&t->io);
        close(t->io.fd);
        t->io.fd = -1;
        t->armed = false;
}

/* ---- signals ---- */

static void signal_ready(struct loop_io *io, uint32_t events) {
        (void)events;
        struct loop_signal *s = (struct loop_signal *)io;
        struct signalfd_siginfo si;
        /* one signal per dispatch: the callback may stop the loop or free the handle */
        if (read(io->fd, &si, sizeof si) == (ssize_t)sizeof si)
                s->fn(s, (int)si.ssi_signo);
}

static bool mask_empty(const sigset_t *mask) {
        for (int sig = 1; sig < NSIG; sig++)
                if (sigismember(mask, sig) == 1)
                        return false;
        return true;
}

int loop_signal_init(struct loop *l, struct loop_signal *s, const sigset_t *mask, loop_signal_fn fn, void *userdata) {
        if (!l || !s || !mask || !fn || mask_empty(mask))
                return -EINVAL;
        *s = (struct loop_signal){ .fn = fn, .userdata = userdata, .io.fd = -1 };
        int fd = signalfd(-1, mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (fd < 0)
                return -errno;
        int r = loop_io_start(l, &s->io, fd, EPOLLIN, signal_ready, s);
        if (r < 0) {
                close(fd);
                s->io.fd = -1;
        }
        return r;
}

void loop_signal_done(struct loop_signal *s) {
        if (!s || !s->io.loop || s->io.fd < 0) /* zeroed (never initialised) or done */
                return;
        (void)loop_io_stop(&s->io);
        close(s->io.fd);
        s->io.fd = -1;
}

/* ---- cross-thread wake-ups ---- */

static void event_ready(struct loop_io *io, uint32_t events) {
        (void)events;
        struct loop_event *e = (struct loop_event *)io;
        uint64_t v;
        if (read(io->fd, &v, sizeof v) == (ssize_t)sizeof v)
                e->fn(e);
}

int loop_event_init(struct loop *l, struct loop_event *e, loop_event_fn fn, void *userdata) {
        if (!l || !e || !fn)
                return -EINVAL;
        *e = (struct loop_event){ .fn = fn, .userdata = userdata, .io.fd = -1 };
        int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (fd < 0)
                return -errno;
        int r = loop_io_start(l, &e->io, fd, EPOLLIN, event_ready, e);
        if (r < 0) {
                close(fd);
                e->io.fd = -1;
        }
        return r;
}

int loop_event_post(struct loop_event *e) {
        if (!e || !e->io.loop || e->io.fd < 0)
                return -EINVAL;
        uint64_t one = 1;
        if (write(e->io.fd, &one, sizeof one) != (ssize_t)sizeof one)
                return errno == EAGAIN ? 0 : -errno; /* EAGAIN: the counter is full, a wake-up is pending */
        return 0;
}

int loop_event_fd(const struct loop_event *e) {
        return e ? e->io.fd : -EINVAL;
}

void loop_event_done(struct loop_event *e) {
        if (!e || !e->io.loop || e->io.fd < 0) /* zeroed (never initialised) or done */
                return;
        (void)loop_io_stop(&e->io);
        close(e->io.fd);
        e->io.fd = -1;
}
