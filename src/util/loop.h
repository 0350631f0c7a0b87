/* SPDX-License-Identifier: Apache-2.0 */
/*
 * loop — a small event loop on epoll: fd, timer (timerfd), signal (signalfd) and cross-thread
 * wake-up (eventfd) sources, in libuv's style: the caller owns every handle (usually embedded in
 * its own struct), arguments are checked at the API edge (-EINVAL), errors are -errno.
 *
 *   struct loop l;            loop_init(&l);
 *   struct loop_timer t;      loop_timer_init(&l, &t, on_timer, ctx);  loop_timer_start(&t, 500);
 *   struct loop_signal s;     loop_signal_init(&l, &s, mask, on_signal, ctx);
 *   struct loop_event e;      loop_event_init(&l, &e, on_wake, ctx);   // loop_event_post(&e) from any thread
 *   loop_run(&l);             // until a callback calls loop_stop(&l)
 *
 * Everything but loop_event_post runs on the loop's thread. Callbacks run one at a time, one
 * ready source per epoll_wait (so a callback may stop or free any other handle safely). A loop
 * that has nothing due sleeps in epoll_wait without a timeout: idle costs no wake-ups.
 * A zeroed handle may be given to *_done and loop_io_stop (nothing happens), so a struct holding
 * handles can be torn down whatever point its set-up reached.
 * Must never: log, block other than in epoll_wait, or keep an fd it was not given past *_done.
 */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

struct loop {
        int epfd;
        bool stop;
        uint64_t n_dispatched; /* callbacks run (tests, benchmarks) */
};

struct loop_io;
/* events: EPOLLIN, EPOLLOUT, EPOLLERR, EPOLLHUP as epoll reports them. */
typedef void (*loop_io_fn)(struct loop_io *h, uint32_t events);

/* An fd source. The fd stays the caller's (loop_io_stop does not close it). */
struct loop_io {
        struct loop *loop;
        int fd;
        bool active;
        loop_io_fn fn;
        void *userdata;
};

struct loop_timer;
typedef void (*loop_timer_fn)(struct loop_timer *t);
/* A one-shot timer on CLOCK_MONOTONIC (a callback re-arms it for periodic work). */
struct loop_timer {
        struct loop_io io; /* its timerfd */
        loop_timer_fn fn;
        void *userdata;
        bool armed;
};

struct loop_signal;
typedef void (*loop_signal_fn)(struct loop_signal *s, int signo);
/* Signals delivered through a signalfd. The caller blocks them (sigprocmask/pthread_sigmask)
 * before any thread exists, so that only this source sees them. */
struct loop_signal {
        struct loop_io io;
        loop_signal_fn fn;
        void *userdata;
};

struct loop_event;
typedef void (*loop_event_fn)(struct loop_event *e);
/* A wake-up other threads post (loop_event_post); posts before the callback runs coalesce. */
struct loop_event {
        struct loop_io io;
        loop_event_fn fn;
        void *userdata;
};

/* 0 or -errno (epoll_create1). */
int loop_init(struct loop *l);
/* Close the epoll fd. Handles must be stopped or done first. NULL and a failed init are fine. */
void loop_done(struct loop *l);
/* Dispatch until loop_stop. 0, or -errno when epoll_wait fails for another reason than EINTR. */
int loop_run(struct loop *l);
/* Run callbacks that are ready now, waiting at most timeout_ms (-1: forever) for the first.
 * Returns how many ran (0 on timeout) or -errno. */
int loop_run_once(struct loop *l, int timeout_ms);
/* Make loop_run return after the current callback. */
void loop_stop(struct loop *l);

/* Watch fd for `events` (EPOLLIN/EPOLLOUT; level-triggered). -EINVAL, -EBUSY when h is active,
 * -EBADF/-EPERM (fds epoll refuses, e.g. regular files) from epoll_ctl. */
int loop_io_start(struct loop *l, struct loop_io *h, int fd, uint32_t events, loop_io_fn fn, void *userdata);
/* Stop watching; 0 when it was not active. */
int loop_io_stop(struct loop_io *h);

int loop_timer_init(struct loop *l, struct loop_timer *t, loop_timer_fn fn, void *userdata);
/* Fire once in ms milliseconds (0: as soon as possible); re-arming replaces the old deadline. */
int loop_timer_start(struct loop_timer *t, uint64_t ms);
int loop_timer_stop(struct loop_timer *t);
bool loop_timer_armed(const struct loop_timer *t);
void loop_timer_done(struct loop_timer *t);

/* Deliver the signals in `mask` to fn. -EINVAL for an empty mask. */
int loop_signal_init(struct loop *l, struct loop_signal *s, const sigset_t *mask, loop_signal_fn fn, void *userdata);
void loop_signal_done(struct loop_signal *s);

int loop_event_init(struct loop *l, struct loop_event *e, loop_event_fn fn, void *userdata);
/* Thread-safe and async-signal-safe. 0 or -errno. */
int loop_event_post(struct loop_event *e);
/* The eventfd, for APIs that notify by writing 8 bytes to an fd (rpc_call_start). */
int loop_event_fd(const struct loop_event *e);
void loop_event_done(struct loop_event *e);
