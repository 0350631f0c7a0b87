/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test-interposer-region — the container's shared region (src/interposer/region.c) without any
 * driver: creation and ABI checks, slots, exact admission at and past the limit, fragmentation,
 * many threads, several processes sharing one limit, SIGKILL at random instants with the survivors
 * still working and the dead processes' bytes recovered, and the launch limiter's spacing.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "helpers.h"

#include "interposer/interposer.h"
#include "interposer/region.h"
#include "interposer/throttle.h"

static char dir[256];
static struct gs_limits lim;

/* Every child a case forks, so that teardown kills and reaps what a failed assertion left running
 * (cmocka leaves the case at the failed assert; spinning children would outlive the test). */
static pid_t children[64];
static unsigned n_children;

static int setup(void **state) {
        (void)state;
        n_children = 0;
        char *d = test_tmpdir_new("region");
        int k = snprintf(dir, sizeof dir, "%s", d);
        free(d);
        if (k < 0 || (size_t)k >= sizeof dir)
                return -1;
        memset(&lim, 0, sizeof lim);
        lim.version = 1;
        snprintf(lim.container, sizeof lim.container, "test-container");
        snprintf(lim.region, sizeof lim.region, "%s/region", dir);
        lim.n_devices = 2;
        lim.dev[0] = (struct gs_limits_device){ .index = 0, .memory_bytes = 1000000, .core_percent = 50 };
        lim.dev[1] = (struct gs_limits_device){ .index = 1, .memory_bytes = 4096, .core_percent = 100 };
        snprintf(lim.dev[0].uuid, GS_UUID_MAX, "GPU-aaaa");
        return 0;
}

static pid_t fork_child(void) {
        pid_t p = fork();
        if (p > 0 && n_children < sizeof children / sizeof children[0])
                children[n_children++] = p;
        return p;
}

static int teardown(void **state) {
        (void)state;
        for (unsigned i = 0; i < n_children; i++) {
                /* Only a child not reaped yet: a reaped pid may belong to someone else by now. */
                if (waitpid(children[i], NULL, WNOHANG) != 0)
                        continue;
                kill(children[i], SIGKILL);
                (void)waitpid(children[i], NULL, 0);
        }
        n_children = 0;
        return test_rmtree(dir) == 0 ? 0 : -1;
}

static struct gs_region *open_claimed(unsigned *slot) {
        struct gs_region *r = NULL;
        assert_int_equal(gs_region_open(&lim, &r), 0);
        assert_int_equal(gs_region_claim(r, slot), 0);
        return r;
}

static void test_create_and_reopen(void **state) {
        (void)state;
        struct gs_region *a = NULL, *b = NULL;
        assert_int_equal(gs_region_open(&lim, &a), 0);
        assert_int_equal(a->magic, GS_REGION_MAGIC);
        assert_int_equal(a->abi_version, GS_REGION_ABI);
        assert_string_equal(a->container, "test-container");
        assert_int_equal(a->dev[0].limit_bytes, 1000000);
        assert_int_equal(gs_region_open(&lim, &b), 0);
        a->reclaims = 77; /* the same file behind both mappings */
        assert_int_equal(b->reclaims, 77);
        gs_region_close(a);
        gs_region_close(b);
}

static void test_refuses_other_container(void **state) {
        (void)state;
        struct gs_region *a = NULL;
        assert_int_equal(gs_region_open(&lim, &a), 0);
        gs_region_close(a);
        struct gs_limits other = lim;
        snprintf(other.container, sizeof other.container, "someone-else");
        assert_int_equal(gs_region_open(&other, &a), -EPROTO);
        other = lim;
        snprintf(other.dev[0].uuid, GS_UUID_MAX, "GPU-bbbb"); /* devices in another order */
        assert_int_equal(gs_region_open(&other, &a), -EPROTO);
}

static void test_refuses_wrong_abi_and_size(void **state) {
        (void)state;
        struct gs_region *a = NULL;
        assert_int_equal(gs_region_open(&lim, &a), 0);
        a->abi_version = GS_REGION_ABI + 1;
        gs_region_close(a);
        assert_int_equal(gs_region_open(&lim, &a), -EPROTO);
        unlink(lim.region);
        int fd = open(lim.region, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "short", 5), 5);
        close(fd);
        assert_int_equal(gs_region_open(&lim, &a), -EPROTO);
}

static void test_refuses_relative_path(void **state) {
        (void)state;
        struct gs_limits l = lim;
        snprintf(l.region, sizeof l.region, "relative/region");
        struct gs_region *a = NULL;
        assert_int_equal(gs_region_open(&l, &a), -EINVAL);
}

static void test_claim_release(void **state) {
        (void)state;
        unsigned slot;
        struct gs_region *r = open_claimed(&slot);
        uint64_t o = r->slot[slot].owner;
        assert_int_equal(GS_OWNER_STATE(o), GS_SLOT_LIVE);
        assert_int_equal(GS_OWNER_PID(o), (unsigned)getpid() & 0x3fffffu);
        assert_int_equal(gs_region_reserve(r, slot, 0, lim.dev[0].memory_bytes, 100), 0);
        assert_int_equal(gs_region_used(r, 0), 100);
        gs_region_release(r, slot);
        assert_int_equal(gs_region_used(r, 0), 0); /* a released slot stops counting */
        gs_region_close(r);
}

static void test_exact_limit(void **state) {
        (void)state;
        unsigned slot;
        struct gs_region *r = open_claimed(&slot);
        uint64_t limit = lim.dev[0].memory_bytes;
        assert_int_equal(gs_region_reserve(r, slot, 0, limit, limit), 0);
        assert_int_equal(gs_region_reserve(r, slot, 0, limit, 1), -ENOMEM);
        assert_int_equal(gs_region_used(r, 0), limit);
        gs_region_unreserve(r, slot, 0, 1);
        assert_int_equal(gs_region_reserve(r, slot, 0, limit, 1), 0);
        assert_int_equal(gs_region_reserve(r, slot, 0, limit, 0), 0); /* nothing more is fine */
        gs_region_unreserve(r, slot, 0, limit);
        assert_int_equal(gs_region_used(r, 0), 0);
        gs_region_close(r);
}

static void test_over_limit(void **state) {
        (void)state;
        unsigned slot;
        struct gs_region *r = open_claimed(&slot);
        uint64_t limit = lim.dev[0].memory_bytes;
        assert_int_equal(gs_region_reserve(r, slot, 0, limit, limit + 1), -ENOMEM);
        assert_int_equal(gs_region_reserve(r, slot, 0, limit, UINT64_MAX), -ENOMEM);
        assert_int_equal(gs_region_used(r, 0), 0); /* a refusal counts nothing */
        assert_int_equal(gs_region_reserve(r, slot, 0, limit, limit / 2), 0);
        assert_int_equal(gs_region_reserve(r, slot, 0, limit, limit / 2 + 1), -ENOMEM);
        assert_int_equal(r->dev[0].oom_count, 0); /* the caller counts its refusals, once per call */
        gs_region_count_refusal(r, 0);
        assert_int_equal(r->dev[0].oom_count, 1);
        /* Devices are counted apart. */
        assert_int_equal(gs_region_reserve(r, slot, 1, lim.dev[1].memory_bytes, 4096), 0);
        assert_int_equal(gs_region_used(r, 0), limit / 2);
        gs_region_close(r);
}

static void test_unreserve_never_underflows(void **state) {
        (void)state;
        unsigned slot;
        struct gs_region *r = open_claimed(&slot);
        assert_int_equal(gs_region_reserve(r, slot, 0, 1000, 10), 0);
        gs_region_unreserve(r, slot, 0, 50);
        assert_int_equal(gs_region_used(r, 0), 0);
        assert_int_equal(gs_region_reserve(r, slot, 0, 1000, 1000), 0);
        gs_region_close(r);
}

static void test_fragmentation(void **state) {
        (void)state;
        unsigned slot;
        struct gs_region *r = open_claimed(&slot);
        const uint64_t limit = 1000000;
        uint64_t sizes[100], held = 0;
        /* Fill with uneven pieces up to exactly the limit, free every other one, refill the holes
         * with pieces of other sizes: the container's sum is what decides, never a byte more or less. */
        for (unsigned i = 0; i < 100; i++) {
                sizes[i] = i < 99 ? 1000 + 97 * i : limit - held;
                assert_int_equal(gs_region_reserve(r, slot, 0, limit, sizes[i]), 0);
                held += sizes[i];
        }
        assert_int_equal(held, limit);
        assert_int_equal(gs_region_reserve(r, slot, 0, limit, 1), -ENOMEM);
        uint64_t freed = 0;
        for (unsigned i = 0; i < 100; i += 2) {
                gs_region_unreserve(r, slot, 0, sizes[i]);
                freed += sizes[i];
        }
        assert_int_equal(gs_region_reserve(r, slot, 0, limit, freed + 1), -ENOMEM);
        assert_int_equal(gs_region_reserve(r, slot, 0, limit, freed / 3), 0);
        assert_int_equal(gs_region_reserve(r, slot, 0, limit, freed - freed / 3), 0);
        assert_int_equal(gs_region_used(r, 0), limit);
        gs_region_close(r);
}

struct thread_arg {
        struct gs_region *r;
        unsigned slot;
        unsigned seed;
        uint64_t *inflight; /* what the threads hold between their own reserve and unreserve */
        int over;
};

static void *thread_main(void *p) {
        struct thread_arg *a = p;
        for (unsigned i = 0; i < 20000; i++) {
                uint64_t n = 1 + rand_r(&a->seed) % 300000;
                if (gs_region_reserve(a->r, a->slot, 0, 1000000, n) < 0)
                        continue;
                if (__atomic_add_fetch(a->inflight, n, __ATOMIC_SEQ_CST) > 1000000)
                        a->over = 1;
                __atomic_sub_fetch(a->inflight, n, __ATOMIC_SEQ_CST);
                gs_region_unreserve(a->r, a->slot, 0, n);
        }
        return NULL;
}

static void test_many_threads(void **state) {
        (void)state;
        unsigned slot;
        struct gs_region *r = open_claimed(&slot);
        uint64_t inflight = 0;
        pthread_t th[8];
        struct thread_arg args[8];
        for (unsigned i = 0; i < 8; i++) {
                args[i] = (struct thread_arg){ r, slot, i + 1, &inflight, 0 };
                assert_int_equal(pthread_create(&th[i], NULL, thread_main, &args[i]), 0);
        }
        for (unsigned i = 0; i < 8; i++) {
                pthread_join(th[i], NULL);
                assert_false(args[i].over);
        }
        assert_int_equal(gs_region_used(r, 0), 0);
        gs_region_close(r);
}

/* A child process: claim a slot, then reserve/unreserve random sizes forever, checking through a
 * shared counter that the committed sum never passes the limit. */
static void child_loop(unsigned seed, uint64_t *inflight, int *over, uint64_t *progress) {
        struct gs_region *r = NULL;
        unsigned slot;
        if (gs_region_open(&lim, &r) < 0 || gs_region_claim(r, &slot) < 0)
                _exit(3);
        for (;;) {
                uint64_t n = 1 + rand_r(&seed) % 200000;
                if (gs_region_reserve(r, slot, 0, 1000000, n) == 0) {
                        if (inflight) {
                                if (__atomic_add_fetch(inflight, n, __ATOMIC_SEQ_CST) > 1000000)
                                        __atomic_store_n(over, 1, __ATOMIC_SEQ_CST);
                                __atomic_sub_fetch(inflight, n, __ATOMIC_SEQ_CST);
                                gs_region_unreserve(r, slot, 0, n);
                        } /* else: keep it, as a process holding memory when it is killed */
                        if (!inflight && rand_r(&seed) % 2)
                                gs_region_unreserve(r, slot, 0, n);
                }
                __atomic_add_fetch(progress, 1, __ATOMIC_RELAXED);
        }
}

struct shared {
        uint64_t inflight;
        int over;
        uint64_t progress[8];
};

static void test_processes_share_limit(void **state) {
        (void)state;
        struct gs_region *r = NULL;
        assert_int_equal(gs_region_open(&lim, &r), 0);
        struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        assert_true(sh != MAP_FAILED);
        memset(sh, 0, sizeof *sh);
        pid_t pids[4];
        for (unsigned i = 0; i < 4; i++) {
                pids[i] = fork_child();
                assert_true(pids[i] >= 0);
                if (pids[i] == 0)
                        child_loop(i + 11, &sh->inflight, &sh->over, &sh->progress[i]);
        }
        /* Let them contend until each has done a good number of rounds. */
        for (int spins = 0; spins < 2000; spins++) {
                bool all = true;
                for (unsigned i = 0; i < 4; i++)
                        all &= __atomic_load_n(&sh->progress[i], __ATOMIC_RELAXED) > 20000;
                if (all)
                        break;
                usleep(5000);
        }
        for (unsigned i = 0; i < 4; i++) {
                kill(pids[i], SIGKILL);
                waitpid(pids[i], NULL, 0);
                assert_true(sh->progress[i] > 0);
        }
        assert_false(sh->over);
        munmap(sh, sizeof *sh);
        gs_region_close(r);
}

static void test_sigkill_recovery(void **state) {
        (void)state;
        unsigned slot;
        struct gs_region *r = open_claimed(&slot);
        struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        assert_true(sh != MAP_FAILED);
        memset(sh, 0, sizeof *sh);
        pid_t pids[6];
        for (unsigned i = 0; i < 6; i++) {
                pids[i] = fork_child();
                assert_true(pids[i] >= 0);
                if (pids[i] == 0)
                        child_loop(i + 101, NULL, NULL, &sh->progress[i]);
        }
        unsigned seed = 7;
        /* Kill four of them at random instants — mid-reservation, holding memory, anywhere. */
        for (unsigned i = 0; i < 4; i++) {
                usleep(1000 + rand_r(&seed) % 20000);
                kill(pids[i], SIGKILL);
                /* Not reaped yet: a zombie's memory is gone too and must count as free. */
        }
        /* The survivors keep making progress. */
        /* Up to 10 s: on a loaded machine the survivors may not run for a while. */
        uint64_t before[2] = { sh->progress[4], sh->progress[5] };
        for (int spins = 0; spins < 2000; spins++) {
                if (sh->progress[4] > before[0] && sh->progress[5] > before[1])
                        break;
                usleep(5000);
        }
        assert_true(sh->progress[4] > before[0]);
        assert_true(sh->progress[5] > before[1]);
        kill(pids[4], SIGKILL);
        kill(pids[5], SIGKILL);
        for (unsigned i = 0; i < 6; i++)
                waitpid(pids[i], NULL, 0);
        /* Everything the dead held comes back: the whole limit is available to a new reservation. */
        assert_int_equal(gs_region_reserve(r, slot, 0, 1000000, 1000000), 0);
        assert_true(r->reclaims >= 1);
        assert_int_equal(gs_region_used(r, 0), 1000000);
        munmap(sh, sizeof *sh);
        gs_region_close(r);
}

static void test_slots_reused_after_death(void **state) {
        (void)state;
        struct gs_region *r = NULL;
        assert_int_equal(gs_region_open(&lim, &r), 0);
        /* More short-lived processes than slots: dead owners' slots must be reclaimed for new ones. */
        for (unsigned i = 0; i < GS_REGION_SLOTS + 20; i++) {
                pid_t p = fork_child();
                assert_true(p >= 0);
                if (p == 0) {
                        unsigned s;
                        _exit(gs_region_claim(r, &s) == 0 ? 0 : 1);
                }
                int st;
                waitpid(p, &st, 0);
                assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        }
        gs_region_close(r);
}

/* A child that claims a slot, reserves bytes on device 0, says so and waits to be killed. */
static pid_t holder(struct gs_region *r, uint64_t bytes) {
        int p[2];
        assert_int_equal(pipe(p), 0);
        pid_t pid = fork_child();
        assert_true(pid >= 0);
        if (pid == 0) {
                unsigned s;
                char ok = gs_region_claim(r, &s) == 0 && gs_region_reserve(r, s, 0, 1000000, bytes) == 0 ? 'y' : 'n';
                (void)!write(p[1], &ok, 1);
                for (;;)
                        pause();
        }
        close(p[1]);
        char ok = 0;
        assert_int_equal(read(p[0], &ok, 1), 1);
        close(p[0]);
        assert_int_equal(ok, 'y');
        return pid;
}

#define SWEEP_NS 100000000ULL

static void test_sweep_rate_limited(void **state) {
        (void)state;
        unsigned slot;
        struct gs_region *r = open_claimed(&slot);
        pid_t pid = holder(r, 300000);
        uint64_t st = 0;
        assert_int_equal(gs_process_start((unsigned)pid, &st), 0);
        kill(pid, SIGKILL);
        /* Not reaped: its slot belongs to a zombie, which holds no device memory. */
        for (unsigned k = 0; gs_process_alive((unsigned)pid, st & 0xffffffffffULL); k++) {
                assert_true(k < 10000);
                usleep(1000);
        }
        assert_int_equal(gs_region_used(r, 0), 300000);
        uint64_t last = 5000;
        /* A sweep 1 ns too early does nothing (and makes no syscall), nor one with a clock behind the last. */
        assert_int_equal(gs_region_sweep(r, slot, &last, 5000 + SWEEP_NS - 1, SWEEP_NS), 0);
        assert_int_equal(gs_region_sweep(r, slot, &last, 4000, SWEEP_NS), 0);
        assert_int_equal(last, 5000);
        assert_int_equal(gs_region_used(r, 0), 300000);
        /* Once due, it drops the dead slot and moves the timestamp. */
        assert_int_equal(gs_region_sweep(r, slot, &last, 5000 + SWEEP_NS, SWEEP_NS), 1);
        assert_int_equal(last, 5000 + SWEEP_NS);
        assert_int_equal(gs_region_used(r, 0), 0);
        waitpid(pid, NULL, 0);
        /* Never swept yet (0): due at once. */
        pid = holder(r, 200000);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        last = 0;
        assert_int_equal(gs_region_sweep(r, slot, &last, 7, SWEEP_NS), 1);
        assert_int_equal(gs_region_used(r, 0), 0);
        assert_int_equal(last, 7);
        gs_region_close(r);
}

static void test_sweep_keeps_live_slots(void **state) {
        (void)state;
        unsigned slot;
        struct gs_region *r = open_claimed(&slot);
        assert_int_equal(gs_region_reserve(r, slot, 0, 1000000, 1000), 0);
        pid_t pid = holder(r, 20000);
        /* A slot naming the live child's PID with another start time: the PID was reused, the owner is dead. */
        unsigned forged = GS_REGION_SLOTS;
        for (unsigned i = 0; i < GS_REGION_SLOTS && forged == GS_REGION_SLOTS; i++)
                if (GS_OWNER_STATE(r->slot[i].owner) == GS_SLOT_FREE)
                        forged = i;
        assert_true(forged < GS_REGION_SLOTS);
        uint64_t start = 0;
        assert_int_equal(gs_process_start((unsigned)pid, &start), 0);
        r->slot[forged].used[0] = 300;
        r->slot[forged].owner = GS_OWNER(GS_SLOT_LIVE, (unsigned)pid, (start + 1) & 0xffffffffffULL);
        if (r->slots_hw < forged + 1)
                r->slots_hw = forged + 1;
        assert_int_equal(gs_region_used(r, 0), 21300);
        uint64_t last = 0;
        assert_int_equal(gs_region_sweep(r, slot, &last, 1, SWEEP_NS), 1);
        /* The caller's own bytes and the live child's stay counted; only the impostor's went. */
        assert_int_equal(gs_region_used(r, 0), 21000);
        assert_int_equal(r->slot[forged].owner, (uint64_t)GS_SLOT_FREE);
        /* Without a slot of its own the caller is still recognised (by /proc) and kept. */
        last = 0;
        assert_int_equal(gs_region_sweep(r, GS_REGION_SLOTS, &last, 1, SWEEP_NS), 0);
        assert_int_equal(gs_region_used(r, 0), 21000);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        assert_int_equal(gs_region_sweep(r, slot, &last, 1 + SWEEP_NS, SWEEP_NS), 1);
        assert_int_equal(gs_region_used(r, 0), 1000);
        gs_region_close(r);
}

static void test_process_alive(void **state) {
        (void)state;
        uint64_t start;
        assert_int_equal(gs_process_start((unsigned)getpid(), &start), 0);
        assert_true(gs_process_alive((unsigned)getpid(), start & 0xffffffffffULL));
        assert_false(gs_process_alive((unsigned)getpid(), (start + 1) & 0xffffffffffULL)); /* PID reused */
        pid_t p = fork_child();
        if (p == 0)
                _exit(0);
        uint64_t cs = 0;
        siginfo_t info;
        /* until it has exited, without reaping it (a fixed sleep was too short under load) */
        assert_int_equal(waitid(P_PID, (id_t)p, &info, WEXITED | WNOWAIT), 0);
        (void)gs_process_start((unsigned)p, &cs);
        assert_false(gs_process_alive((unsigned)p, cs)); /* a zombie is dead */
        waitpid(p, NULL, 0);
        assert_false(gs_process_alive((unsigned)p, cs));
}

static void test_throttle_spacing(void **state) {
        (void)state;
        struct gs_region *r = NULL;
        assert_int_equal(gs_region_open(&lim, &r), 0);
        assert_int_equal(gs_region_throttle(r, 0, 1000), 0); /* interval 0: never waits */
        r->dev[0].interval_ns = 1000000;                     /* 1 ms: the burst is four launches */
        r->dev[0].tat_ns = 0;
        uint64_t now = 1000000000, waited = 0;
        /* 100 launches at the same instant: a burst of 5 passes, then each waits one interval more. */
        for (unsigned i = 0; i < 100; i++) {
                uint64_t w = gs_region_throttle(r, 0, now);
                if (i <= 4)
                        assert_int_equal(w, 0);
                else
                        assert_int_equal(w, (i - 4) * 1000000ULL);
                waited = w;
        }
        assert_int_equal(waited, 95000000);
        /* A long idle gap does not bank an unbounded burst. */
        now += 10000000000ULL;
        assert_int_equal(gs_region_throttle(r, 0, now), 0);
        for (unsigned i = 0; i < 4; i++)
                (void)gs_region_throttle(r, 0, now);
        assert_int_equal(gs_region_throttle(r, 0, now), 1000000);
        /* Short intervals: the burst is at least GS_THROTTLE_MIN_BURST_NS worth (1 ms = 1000 launches of 1 µs). */
        r->dev[0].interval_ns = 1000;
        now += 10000000000ULL;
        for (unsigned i = 0; i <= 1000; i++)
                assert_int_equal(gs_region_throttle(r, 0, now), 0);
        assert_int_equal(gs_region_throttle(r, 0, now), 1000);
        gs_region_close(r);
}

/* A launcher whose sleeps end ~50 µs late (clock_nanosleep's slack) gets its share: with launches 5 µs apart,
 * 100 ms give ≥ 95 % of the 20000 launches. When the burst tolerance was four intervals (20 µs, shorter than
 * the slack) every late wake-up lost the time overslept: 57 % of the share (11480 launches). */
static void test_throttle_oversleep_keeps_share(void **state) {
        (void)state;
        struct gs_region *r = NULL;
        assert_int_equal(gs_region_open(&lim, &r), 0);
        r->dev[0].interval_ns = 5000;
        r->dev[0].tat_ns = 0;
        uint64_t start = 5000000000ULL, now = start, n = 0;
        while (now < start + 100000000) {
                uint64_t w = gs_region_throttle(r, 0, now);
                now += w ? w + 50000 : 0; /* woken 50 µs late */
                now += 1000;              /* the launch itself */
                n++;
        }
        print_message("launches in 100 ms at 5 µs spacing with 50 µs oversleep: %llu\n", (unsigned long long)n);
        assert_true(n >= 19000);
        gs_region_close(r);
}

/* Fresh window: one step learns the cost per launch from one period. */
static uint64_t one_step(uint64_t interval, uint64_t dt, uint64_t launches, uint64_t util, uint64_t target) {
        struct gs_ctl_window w = { 0 };
        return gs_throttle_step(&w, interval, dt, launches, util, target);
}

static void test_controller_learns_cost_per_launch(void **state) {
        (void)state;
        const uint64_t P = 100000000; /* 100 ms */
        /* Unthrottled, 1000 launches gave 100 %: for 25 % each launch must be spaced 4 × 100 µs. */
        assert_int_equal(one_step(0, P, 1000, 100000, 25000), 400000);
        /* The same cost at a 20× smaller scale (bigger kernels, fewer launches): same answer per launch cost. */
        assert_int_equal(one_step(0, P, 50, 100000, 25000), 8000000);
        /* Already right: stays. */
        assert_int_equal(one_step(400000, P, 250, 25000, 25000), 400000);
        /* Half-way moves (smoothing), growth bounded to ×4 per step. */
        assert_int_equal(one_step(400000, P, 250, 50000, 25000), 600000);
        assert_int_equal(one_step(1000, P, 10, 100000, 10000), 4000);
        /* A big drop only halves the interval per step. */
        assert_int_equal(one_step(4000000, P, 1000, 1000, 90000), 2000555);
}

static void test_controller_edge_cases(void **state) {
        (void)state;
        const uint64_t P = 100000000;
        /* No time, no target: nothing learned. */
        assert_int_equal(one_step(1234, 0, 10, 50000, 30000), 1234);
        assert_int_equal(one_step(1234, P, 10, 50000, 0), 1234);
        /* Fewer than GS_CTL_MIN_LAUNCHES launches in a young window: not yet. */
        assert_int_equal(one_step(1234, P, 3, 50000, 30000), 1234);
        assert_int_equal(one_step(1234, P, 0, 50000, 30000), 1234);
        /* Launches that cost nothing measurable relax the limiter down to off. */
        assert_int_equal(one_step(8000, P, 10, 100, 30000), 4000);
        assert_int_equal(one_step(1500, P, 10, 100, 30000), 0);
        /* Never more than ten seconds between launches. */
        assert_int_equal(one_step(0, P, 4, 100000, 1000), 2500000000ULL);
        struct gs_ctl_window w = { 0 };
        for (unsigned i = 0; i < 60; i++)
                (void)gs_throttle_step(&w, 0, P, 0, 100000, 1000); /* busy, nothing launched: forgotten at 5 s */
        assert_true(w.age_ns < 5000000000ULL);
        w = (struct gs_ctl_window){ 0 };
        assert_int_equal(gs_throttle_step(&w, 0, 60 * 1000000000ULL, 1, 100000, 1000), 10000000000ULL);
}

/*
 * A whole training step as one CUDA graph (one cuGraphLaunch keeps the GPU busy for 800 ms) under a 30 %
 * share: the controller must learn that one launch costs 800 ms although no period of 100 ms can show more
 * than 100 ms of it, and space launches ~2.7 s apart. A closed loop: the GPU runs each launch for 800 ms
 * when the limiter lets it go; utilization over the last 30 s of 60 must be 25-35 %. (The controller that
 * learnt from one period at a time, capped at 1 s, gave ~80 %.)
 */
static void test_controller_long_graph_launches(void **state) {
        (void)state;
        const uint64_t P = 100000000, COST = 800000000, TARGET = 30000;
        struct gs_ctl_window w = { 0 };
        uint64_t interval = 0, next_launch = 0, busy_until = 0, busy_late = 0;
        for (uint64_t t = 0; t < 60000000000ULL; t += P) {
                uint64_t launches = 0;
                /* the application launches as soon as the previous step is done and the limiter allows */
                if (t >= busy_until && t >= next_launch) {
                        launches = 1;
                        busy_until = t + COST;
                        next_launch = t + interval;
                }
                uint64_t busy = busy_until > t ? (busy_until - t > P ? P : busy_until - t) : 0;
                if (t >= 30000000000ULL)
                        busy_late += busy;
                interval = gs_throttle_step(&w, interval, P, launches, busy * 100000 / P, TARGET);
        }
        double util = (double)busy_late / 30e9;
        print_message("one 800 ms graph launch at 30 %%: interval %.2f s, utilization %.1f %%\n",
                      (double)interval / 1e9, util * 100);
        assert_true(util > 0.25 && util < 0.35);
}

/* NVML's samples: several per process (it may return its buffer), averaged per PID rather than summed;
 * only those newer than the last counted; the newest timestamp returned for the next call. */
static bool even_pid(unsigned pid) {
        return pid % 2 == 0;
}

static void test_controller_aggregates_samples(void **state) {
        (void)state;
        const struct gs_util_sample s[] = {
                { 10, 1000, 30 }, { 11, 1000, 20 }, { 10, 1100, 50 }, { 10, 900, 99 }, /* old: before last_seen */
                { 12, 1200, 10 },
        };
        uint64_t mine, all;
        bool matched;
        uint64_t newest = gs_throttle_aggregate(s, 5, 950, even_pid, &mine, &all, &matched);
        assert_int_equal(newest, 1200);
        assert_int_equal(mine, 40000 + 10000); /* pid 10: (30 + 50) / 2, pid 12: 10 */
        assert_int_equal(all, 40000 + 20000 + 10000);
        assert_true(matched);
        newest = gs_throttle_aggregate(s, 5, 1200, even_pid, &mine, &all, &matched);
        assert_int_equal(newest, 1200); /* nothing newer */
        assert_int_equal(all, 0);
        assert_false(matched);
}

/* ---- the per-process allocation table (alloc-table.c) ---- */

static void test_table_round_trip(void **state) {
        (void)state;
        assert_int_equal(gs_table_init(), 0);
        gs_table_reset();
        uint64_t bytes;
        unsigned dev;
        assert_int_equal(gs_table_take(GS_TAB_PTR, 0x7f0000001000, &bytes, &dev), -ENOENT);
        assert_int_equal(gs_table_insert(GS_TAB_PTR, 0x7f0000001000, 4096, 3, 0), 0);
        assert_int_equal(gs_table_insert(GS_TAB_ARRAY, 0x7f0000001000, 99, 1, 0), 0); /* tables are apart */
        assert_int_equal(gs_table_insert(GS_TAB_PTR, 0, 1, 0, 0), 0);                 /* 0 and 1 are valid keys too */
        assert_int_equal(gs_table_insert(GS_TAB_PTR, 1, 2, 0, 0), 0);
        assert_int_equal(gs_table_take(GS_TAB_PTR, 0x7f0000001000, &bytes, &dev), 0);
        assert_int_equal(bytes, 4096);
        assert_int_equal(dev, 3);
        assert_int_equal(gs_table_take(GS_TAB_PTR, 0x7f0000001000, &bytes, &dev), -ENOENT); /* once */
        assert_int_equal(gs_table_take(GS_TAB_ARRAY, 0x7f0000001000, &bytes, &dev), 0);
        assert_int_equal(bytes, 99);
        assert_int_equal(gs_table_take(GS_TAB_PTR, 0, &bytes, &dev), 0);
        assert_int_equal(bytes, 1);
        assert_int_equal(gs_table_take(GS_TAB_PTR, 1, &bytes, &dev), 0);
        assert_int_equal(bytes, 2);
}

static void test_table_full_and_tombstones(void **state) {
        (void)state;
        assert_int_equal(gs_table_init(), 0);
        gs_table_reset();
        uint64_t bytes;
        unsigned dev;
        unsigned n = 0;
        /* Fill it: every insert succeeds until the table is full, then -ENOSPC. */
        while (gs_table_insert(GS_TAB_VMM, 0x1000 + (uint64_t)n * 512, n, 0, 0) == 0)
                n++;
        assert_int_equal(n, 1u << 17);
        assert_int_equal(gs_table_insert(GS_TAB_VMM, 0xdead0000, 1, 0, 0), -ENOSPC);
        /* Freed entries are reused, and every remaining key is still found behind the tombstones. */
        for (unsigned i = 0; i < n; i += 2)
                assert_int_equal(gs_table_take(GS_TAB_VMM, 0x1000 + (uint64_t)i * 512, &bytes, &dev), 0);
        assert_int_equal(gs_table_insert(GS_TAB_VMM, 0xdead0000, 7, 0, 0), 0);
        for (unsigned i = 1; i < n; i += 2) {
                assert_int_equal(gs_table_take(GS_TAB_VMM, 0x1000 + (uint64_t)i * 512, &bytes, &dev), 0);
                assert_int_equal(bytes, i);
        }
        assert_int_equal(gs_table_take(GS_TAB_VMM, 0xdead0000, &bytes, &dev), 0);
        assert_int_equal(bytes, 7);
        gs_table_reset();
}

/* Every free leaves a tombstone; after a few million alloc/free cycles none of the table's slots is empty
 * any more. A lookup of a key that is not there (every cuMemFreeAsync probes the pointer table first, every
 * cuMemMap the handle tables) must still stop early, not scan all 131072 slots: 100000 such lookups take
 * milliseconds when bounded and tens of seconds when not. */
static void test_table_tombstones_do_not_slow_misses(void **state) {
        (void)state;
        assert_int_equal(gs_table_init(), 0);
        gs_table_reset();
        uint64_t bytes;
        unsigned dev;
        for (uint64_t i = 0; i < 3000000; i++) {
                assert_int_equal(gs_table_insert(GS_TAB_PTR, 0x7f0000000000 + i * 512, 512, 0, 0), 0);
                assert_int_equal(gs_table_take(GS_TAB_PTR, 0x7f0000000000 + i * 512, &bytes, &dev), 0);
        }
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (uint64_t i = 0; i < 100000; i++)
                assert_int_equal(gs_table_take(GS_TAB_PTR, 0x100000000000 + i * 512, &bytes, &dev), -ENOENT);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
        printf("100000 missing lookups after 3e6 cycles: %.3f s\n", s);
        assert_true(s < 2.0);
        /* and keys inserted now are still found */
        assert_int_equal(gs_table_insert(GS_TAB_PTR, 0x4242000, 9, 2, 0), 0);
        assert_int_equal(gs_table_take(GS_TAB_PTR, 0x4242000, &bytes, &dev), 0);
        assert_int_equal(bytes, 9);
        gs_table_reset();
}

static void test_table_take_ctx(void **state) {
        (void)state;
        assert_int_equal(gs_table_init(), 0);
        gs_table_reset();
        assert_int_equal(gs_table_insert(GS_TAB_PTR, 0x1000, 10, 0, 0xa), 0);
        assert_int_equal(gs_table_insert(GS_TAB_PTR, 0x2000, 20, 1, 0xa), 0);
        assert_int_equal(gs_table_insert(GS_TAB_PTR, 0x3000, 40, 1, 0xb), 0);
        assert_int_equal(gs_table_insert(GS_TAB_PTR, 0x4000, 80, 1, 0), 0);
        uint64_t per_dev[GS_TAB_MAX_DEV] = { 0 };
        gs_table_take_ctx(GS_TAB_PTR, 0xa, per_dev);
        assert_int_equal(per_dev[0], 10);
        assert_int_equal(per_dev[1], 20);
        uint64_t bytes;
        unsigned dev;
        assert_int_equal(gs_table_take(GS_TAB_PTR, 0x1000, &bytes, &dev), -ENOENT); /* gone with the context */
        assert_int_equal(gs_table_take(GS_TAB_PTR, 0x3000, &bytes, &dev), 0);       /* another context's stays */
        assert_int_equal(gs_table_take(GS_TAB_PTR, 0x4000, &bytes, &dev), 0);       /* ctx 0: never dropped */
        memset(per_dev, 0, sizeof per_dev);
        gs_table_take_ctx(GS_TAB_PTR, 0, per_dev);
        assert_int_equal(per_dev[1], 0);
}

struct table_race {
        unsigned taken;
};

static void *table_taker(void *p) {
        struct table_race *t = p;
        uint64_t bytes;
        unsigned dev;
        for (unsigned i = 0; i < 20000; i++)
                if (gs_table_take(GS_TAB_ARRAY, 0x10000 + (uint64_t)i * 64, &bytes, &dev) == 0)
                        t->taken++;
        return NULL;
}

static void test_table_concurrent_takes(void **state) {
        (void)state;
        assert_int_equal(gs_table_init(), 0);
        gs_table_reset();
        for (unsigned i = 0; i < 20000; i++)
                assert_int_equal(gs_table_insert(GS_TAB_ARRAY, 0x10000 + (uint64_t)i * 64, i, 0, 0), 0);
        /* Four threads "free" the same 20000 pointers: each is given back exactly once. */
        pthread_t th[4];
        struct table_race t[4] = { 0 };
        for (unsigned k = 0; k < 4; k++)
                assert_int_equal(pthread_create(&th[k], NULL, table_taker, &t[k]), 0);
        unsigned total = 0;
        for (unsigned k = 0; k < 4; k++) {
                pthread_join(th[k], NULL);
                total += t[k].taken;
        }
        assert_int_equal(total, 20000);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_create_and_reopen, setup, teardown),
                cmocka_unit_test_setup_teardown(test_refuses_other_container, setup, teardown),
                cmocka_unit_test_setup_teardown(test_refuses_wrong_abi_and_size, setup, teardown),
                cmocka_unit_test_setup_teardown(test_refuses_relative_path, setup, teardown),
                cmocka_unit_test_setup_teardown(test_claim_release, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exact_limit, setup, teardown),
                cmocka_unit_test_setup_teardown(test_over_limit, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unreserve_never_underflows, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fragmentation, setup, teardown),
                cmocka_unit_test_setup_teardown(test_many_threads, setup, teardown),
                cmocka_unit_test_setup_teardown(test_processes_share_limit, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sigkill_recovery, setup, teardown),
                cmocka_unit_test_setup_teardown(test_slots_reused_after_death, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sweep_rate_limited, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sweep_keeps_live_slots, setup, teardown),
                cmocka_unit_test_setup_teardown(test_process_alive, setup, teardown),
                cmocka_unit_test_setup_teardown(test_throttle_spacing, setup, teardown),
                cmocka_unit_test_setup_teardown(test_throttle_oversleep_keeps_share, setup, teardown),
                cmocka_unit_test(test_controller_learns_cost_per_launch),
                cmocka_unit_test(test_controller_edge_cases),
                cmocka_unit_test(test_controller_long_graph_launches),
                cmocka_unit_test(test_controller_aggregates_samples),
                cmocka_unit_test(test_table_round_trip),
                cmocka_unit_test(test_table_full_and_tombstones),
                cmocka_unit_test(test_table_tombstones_do_not_slow_misses),
                cmocka_unit_test(test_table_take_ctx),
                cmocka_unit_test(test_table_concurrent_takes),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
