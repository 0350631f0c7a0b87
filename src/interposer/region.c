/* SPDX-License-Identifier: Apache-2.0 */
/*
 * region — the container's shared accounting region (see region.h and limits.h).
 *
 * Admission protocol (why the sum can never exceed the limit): a reserver reads the device's
 * admit_seq, sums used[] over live slots, and if the request fits, publishes it in its own slot and
 * then CASes admit_seq from the value it read. Two admissions that overlap cannot both succeed with
 * stale sums: the second CAS fails, the loser withdraws its bytes and retries, and by then it reads the
 * winner's published bytes (the winner published before its CAS). Frees only subtract from the owner's
 * slot. A dead process's slot is dropped with one CAS; the driver has freed its memory already. Dead
 * slots are looked for when a reservation does not fit, and at most once per interval from the memory
 * queries (gs_region_sweep).
 *
 * Never take a lock, never block, never allocate.
 */
#include "interposer/compat.h" /* first: the glibc floor */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "interposer/region.h"

#define MIN_U(a, b) ((a) < (b) ? (a) : (b))
#define LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)
#define CAS(p, expp, v) __atomic_compare_exchange_n((p), (expp), (v), false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)

/* /proc/PID/stat: "pid (comm) S ppid ... starttime(22)". comm may hold spaces and ')'. */
static int read_stat(unsigned pid, char *ret_state, uint64_t *ret_start) {
        char path[64], buf[1024];
        snprintf(path, sizeof path, "/proc/%u/stat", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        int saved = errno;
        close(fd);
        if (n < 0)
                return -saved;
        buf[n] = '\0';
        char *p = strrchr(buf, ')');
        if (!p || p[1] != ' ' || !p[2])
                return -EIO;
        char state = p[2];
        p += 3;
        /* Fields after state: ppid(4) ... starttime(22): skip 18 fields. */
        for (int field = 4; field < 22; field++) {
                p = strchr(p, ' ');
                if (!p)
                        return -EIO;
                p++;
        }
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno || end == p)
                return -EIO;
        *ret_state = state;
        *ret_start = v;
        return 0;
}

int gs_process_start(unsigned pid, uint64_t *ret) {
        char state;
        uint64_t start;
        int r = read_stat(pid, &state, &start);
        if (r < 0)
                return r;
        *ret = start;
        return 0;
}

int gs_process_alive(unsigned pid, uint64_t start) {
        char state;
        uint64_t s;
        int r = read_stat(pid, &state, &s);
        /* No readable /proc entry: gone, or hidden from us (hidepid=, another user's process, /proc not
         * mounted). Signal 0 tells them apart (ESRCH: gone; EPERM or success: it exists, PID reuse then
         * undetectable): dropping a live process's slot would uncount its memory. */
        if (r < 0)
                return !(kill((pid_t)pid, 0) < 0 && errno == ESRCH);
        if (state == 'Z' || state == 'X')
                return 0; /* exited: the driver has released its memory */
        return (s & 0xffffffffffULL) == start;
}

static void region_init(struct gs_region *r, const struct gs_limits *l) {
        memset(r, 0, sizeof *r);
        r->magic = GS_REGION_MAGIC;
        r->abi_version = GS_REGION_ABI;
        r->size = (uint32_t)sizeof *r;
        memcpy(r->container, l->container, sizeof r->container);
        r->n_devices = l->n_devices;
        for (unsigned i = 0; i < l->n_devices; i++) {
                memcpy(r->dev[i].uuid, l->dev[i].uuid, sizeof r->dev[i].uuid);
                r->dev[i].limit_bytes = l->dev[i].memory_bytes;
                r->dev[i].core_percent = l->dev[i].core_percent;
                r->dev[i].index = l->dev[i].index;
        }
}

static int region_create(const char *path, const struct gs_limits *l) {
        char tmp[GS_REGION_PATH_MAX + 16];
        if ((size_t)snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= sizeof tmp)
                return -ENAMETOOLONG;
        int fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = 0;
        /* Every user of the container shares it; the directory is the container's own. */
        (void)fchmod(fd, 0666);
        if (ftruncate(fd, (off_t)sizeof(struct gs_region)) < 0) {
                r = -errno;
                goto out;
        }
        void *p = mmap(NULL, sizeof(struct gs_region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
                r = -errno;
                goto out;
        }
        region_init(p, l);
        munmap(p, sizeof(struct gs_region));
        /* link() publishes the finished file atomically and never replaces a concurrent creator's. */
        if (link(tmp, path) < 0 && errno != EEXIST)
                r = -errno;
out:
        unlink(tmp);
        close(fd);
        return r;
}

static int region_map(const char *path, const struct gs_limits *l, struct gs_region **ret) {
        int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (gs_fstat(fd, &st) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        if (!S_ISREG(st.st_mode) || (size_t)st.st_size != sizeof(struct gs_region)) {
                close(fd);
                return -EPROTO;
        }
        struct gs_region *p = mmap(NULL, sizeof *p, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (p == MAP_FAILED)
                return -errno;
        if (p->magic != GS_REGION_MAGIC || p->abi_version != GS_REGION_ABI || p->size != sizeof *p ||
            strncmp(p->container, l->container, sizeof p->container) != 0) {
                munmap(p, sizeof *p);
                return -EPROTO;
        }
        /* Every process of the container must count device i in the same place. */
        for (unsigned i = 0; i < l->n_devices; i++)
                if (p->dev[i].index != l->dev[i].index || strncmp(p->dev[i].uuid, l->dev[i].uuid, GS_UUID_MAX) != 0) {
                        munmap(p, sizeof *p);
                        return -EPROTO;
                }
        *ret = p;
        return 0;
}

int gs_region_open(const struct gs_limits *l, struct gs_region **ret) {
        if (!l || !ret || l->region[0] != '/')
                return -EINVAL;
        for (int attempt = 0; attempt < 3; attempt++) {
                int r = region_map(l->region, l, ret);
                if (r != -ENOENT)
                        return r;
                r = region_create(l->region, l);
                if (r < 0)
                        return r;
        }
        return -EAGAIN;
}

void gs_region_close(struct gs_region *r) {
        if (r)
                munmap(r, sizeof *r);
}

static void raise_hw(struct gs_region *r, uint32_t n) {
        uint32_t hw = LOAD(&r->slots_hw);
        while (hw < n && !CAS(&r->slots_hw, &hw, n))
                ;
}

static int claim_once(struct gs_region *r, unsigned pid, uint64_t start, unsigned *ret_slot) {
        for (unsigned i = 0; i < GS_REGION_SLOTS; i++) {
                struct gs_region_slot *s = &r->slot[i];
                uint64_t o = LOAD(&s->owner);
                if (GS_OWNER_STATE(o) != GS_SLOT_FREE)
                        continue;
                if (!CAS(&s->owner, &o, GS_OWNER(GS_SLOT_CLAIMING, pid, start)))
                        continue;
                /* Counted from the moment it is LIVE, so the scan bound must cover it first. */
                raise_hw(r, i + 1);
                STORE(&s->host_pid, 0);
                for (unsigned d = 0; d < GS_MAX_DEVICES; d++) {
                        STORE(&s->used[d], 0);
                        STORE(&s->launches[d], 0);
                        STORE(&s->throttled_ns[d], 0);
                }
                STORE(&s->owner, GS_OWNER(GS_SLOT_LIVE, pid, start));
                *ret_slot = i;
                return 0;
        }
        return -ENOSPC;
}

static uint64_t own_start(unsigned pid) {
        uint64_t start = 0;
        if (gs_process_start(pid, &start) < 0)
                start = 0;
        return start & 0xffffffffffULL;
}

void gs_region_drop_own(struct gs_region *r) {
        unsigned pid = (unsigned)getpid();
        uint64_t start = own_start(pid);
        /* A slot already held by this very process (same PID, same start time) belongs to the image it
         * replaced with execve(): that image's device memory went with its address space. */
        unsigned hw = MIN_U(LOAD(&r->slots_hw), GS_REGION_SLOTS);
        for (unsigned i = 0; i < hw; i++) {
                uint64_t o = LOAD(&r->slot[i].owner);
                if (GS_OWNER_STATE(o) != GS_SLOT_FREE && GS_OWNER_PID(o) == (pid & 0x3fffffu) &&
                    GS_OWNER_START(o) == start && CAS(&r->slot[i].owner, &o, (uint64_t)GS_SLOT_FREE))
                        __atomic_add_fetch(&r->reclaims, 1, __ATOMIC_RELAXED);
        }
}

int gs_region_claim(struct gs_region *r, unsigned *ret_slot) {
        unsigned pid = (unsigned)getpid();
        uint64_t start = own_start(pid);
        gs_region_drop_own(r);
        if (claim_once(r, pid, start, ret_slot) == 0)
                return 0;
        gs_region_reclaim_dead(r);
        return claim_once(r, pid, start, ret_slot);
}

void gs_region_release(struct gs_region *r, unsigned slot) {
        if (slot >= GS_REGION_SLOTS)
                return;
        STORE(&r->slot[slot].owner, (uint64_t)GS_SLOT_FREE);
}

static gs_region_held_fn held_fn; /* set once at init, before any reclaim */

void gs_region_set_held(gs_region_held_fn fn) {
        held_fn = fn;
}

/* Drop the dead owners' slots whose memory the driver freed, never one owned by (me, my_start). */
static unsigned reclaim_dead_except(struct gs_region *r, unsigned me, uint64_t my_start) {
        unsigned n = 0, hw = MIN_U(LOAD(&r->slots_hw), GS_REGION_SLOTS);
        for (unsigned i = 0; i < hw; i++) {
                struct gs_region_slot *s = &r->slot[i];
                uint64_t o = LOAD(&s->owner);
                if (GS_OWNER_STATE(o) == GS_SLOT_FREE || (GS_OWNER_PID(o) == me && GS_OWNER_START(o) == my_start))
                        continue;
                if (gs_process_alive(GS_OWNER_PID(o), GS_OWNER_START(o)))
                        continue;
                if (held_fn && held_fn(s))
                        continue; /* the driver still holds its memory: it keeps counting */
                if (CAS(&s->owner, &o, (uint64_t)GS_SLOT_FREE)) {
                        __atomic_add_fetch(&r->reclaims, 1, __ATOMIC_RELAXED);
                        n++;
                }
        }
        return n;
}

unsigned gs_region_reclaim_dead(struct gs_region *r) {
        uint64_t my_start = 0;
        (void)gs_process_start((unsigned)getpid(), &my_start);
        return reclaim_dead_except(r, (unsigned)getpid() & 0x3fffffu, my_start & 0xffffffffffULL);
}

unsigned gs_region_sweep(struct gs_region *r, unsigned self, uint64_t *last_ns, uint64_t now_ns, uint64_t interval_ns) {
        uint64_t last = __atomic_load_n(last_ns, __ATOMIC_RELAXED);
        /* now < last: another thread read a later clock and swept already. */
        if (last && (now_ns < last || now_ns - last < interval_ns))
                return 0;
        if (!__atomic_compare_exchange_n(last_ns, &last, now_ns ? now_ns : 1, false, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED))
                return 0; /* a concurrent caller sweeps */
        if (self >= GS_REGION_SLOTS)
                return gs_region_reclaim_dead(r);
        /* The own slot's owner word names this process (PID, start time): no /proc read for it. */
        uint64_t o = LOAD(&r->slot[self].owner);
        if (GS_OWNER_STATE(o) != GS_SLOT_LIVE)
                return gs_region_reclaim_dead(r);
        return reclaim_dead_except(r, GS_OWNER_PID(o), GS_OWNER_START(o));
}

uint64_t gs_region_used(const struct gs_region *r, unsigned dev) {
        uint64_t sum = 0;
        unsigned hw = MIN_U(LOAD(&r->slots_hw), GS_REGION_SLOTS);
        for (unsigned i = 0; i < hw; i++) {
                const struct gs_region_slot *s = &r->slot[i];
                if (GS_OWNER_STATE(LOAD(&s->owner)) != GS_SLOT_LIVE)
                        continue;
                uint64_t u = LOAD(&s->used[dev]);
                sum = sum + u < sum ? UINT64_MAX : sum + u;
        }
        return sum;
}

int gs_region_reserve(struct gs_region *r, unsigned slot, unsigned dev, uint64_t limit, uint64_t bytes) {
        if (slot >= GS_REGION_SLOTS || dev >= GS_MAX_DEVICES)
                return -EINVAL;
        struct gs_region_device *d = &r->dev[dev];
        uint64_t *mine = &r->slot[slot].used[dev];
        bool reclaimed = false;
        unsigned rechecks = 0;
        for (;;) {
                uint64_t seq = LOAD(&d->admit_seq);
                uint64_t used = gs_region_used(r, dev);
                if (bytes > limit || used > limit - bytes) {
                        /* The sum may include a concurrent reserver's bytes that it is about to withdraw
                         * (it lost its CAS): if anything moved meanwhile, look again before refusing. */
                        if (bytes <= limit && rechecks < 16 &&
                            (LOAD(&d->admit_seq) != seq || gs_region_used(r, dev) != used)) {
                                rechecks++;
                                continue;
                        }
                        if (!reclaimed) {
                                reclaimed = true;
                                if (gs_region_reclaim_dead(r) > 0)
                                        continue;
                        }
                        return -ENOMEM;
                }
                __atomic_add_fetch(mine, bytes, __ATOMIC_SEQ_CST);
                if (CAS(&d->admit_seq, &seq, seq + 1))
                        return 0;
                __atomic_sub_fetch(mine, bytes, __ATOMIC_SEQ_CST);
        }
}

void gs_region_count_refusal(struct gs_region *r, unsigned dev) {
        if (dev < GS_MAX_DEVICES)
                __atomic_add_fetch(&r->dev[dev].oom_count, 1, __ATOMIC_RELAXED);
}

void gs_region_force(struct gs_region *r, unsigned slot, unsigned dev, uint64_t bytes) {
        if (slot >= GS_REGION_SLOTS || dev >= GS_MAX_DEVICES || !bytes)
                return;
        __atomic_add_fetch(&r->slot[slot].used[dev], bytes, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&r->dev[dev].admit_seq, 1, __ATOMIC_SEQ_CST);
}

void gs_region_unreserve(struct gs_region *r, unsigned slot, unsigned dev, uint64_t bytes) {
        if (slot >= GS_REGION_SLOTS || dev >= GS_MAX_DEVICES)
                return;
        uint64_t *mine = &r->slot[slot].used[dev];
        uint64_t cur = LOAD(mine);
        /* Never below zero, whatever a confused caller passes. */
        while (!CAS(mine, &cur, cur > bytes ? cur - bytes : 0))
                ;
}

uint64_t gs_region_throttle(struct gs_region *r, unsigned dev, uint64_t now) {
        struct gs_region_device *d = &r->dev[dev];
        uint64_t interval = __atomic_load_n(&d->interval_ns, __ATOMIC_RELAXED);
        if (!interval)
                return 0;
        /* Tolerate a short burst — four launches' worth, and at least GS_THROTTLE_MIN_BURST_NS — so bursts do not
         * stall on every call, and a waiter that wakes late (clock_nanosleep's slack, ~50 µs) finds the TAT
         * still ahead of it rather than losing the time it overslept (many-small-kernel work starved below
         * its share when the tolerance was shorter than the slack). */
        uint64_t tol = interval * 4 > GS_THROTTLE_MIN_BURST_NS ? interval * 4 : GS_THROTTLE_MIN_BURST_NS;
        uint64_t tat = LOAD(&d->tat_ns);
        for (;;) {
                uint64_t t = tat > now ? tat : now;
                /* A stale TAT far in the past must not grant an unbounded burst: start from now. */
                if (CAS(&d->tat_ns, &tat, t + interval))
                        return t - now > tol ? t - now - tol : 0;
        }
}
