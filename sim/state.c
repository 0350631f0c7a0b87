/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state — the shared node state of the simulator: a fixed-layout file (normally in /dev/shm)
 * mapped by every process that uses the simulated node. Layout and rules are in sim.h.
 *
 * Never hold the lock across a blocking call; never trust a file that does not carry our magic,
 * ABI version and size; never leave a half-initialised file where another process can open it.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sim/sim.h"
#include "util/util.h"

static_assert(sizeof(struct sim_state) < UINT32_MAX, "state size fits the header");

uint64_t sim_now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000ULL;
}

uint64_t sim_reserve_bytes(uint64_t total) {
        /* 1 % of the memory, in whole MiB: what the driver and ECC keep for themselves. */
        return (total / 100) & ~((1ULL << 20) - 1);
}

unsigned sim_power_limit_mw(const struct topo_gpu *g) {
        if (g->power_limit_mw)
                return g->power_limit_mw;
        static const struct {
                const char *model;
                unsigned mw;
        } table[] = {
                { "A100-SXM", 400000 },  { "A100-PCIE", 250000 }, { "H100", 700000 },
                { "V100-SXM2", 300000 }, { "V100-PCIE", 250000 }, { "P100", 250000 },
                { "P40", 250000 },       { "T4", 70000 },         { "TITAN V", 250000 },
        };
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (strstr(g->name, table[i].model))
                        return table[i].mw;
        return 250000;
}

static void state_fill(struct sim_state *s, const struct topo *t) {
        s->n_gpus = t->n_gpus;
        for (unsigned i = 0; i < TOPO_MAX_GPUS; i++) {
                /* Keep the count of posted events: event sets of live processes remember sequence
                 * numbers, which only ever grow. Emptied slots (seq 0) are never delivered. */
                uint64_t posted = s->gpu[i].xid_posted;
                memset(&s->gpu[i], 0, sizeof s->gpu[i]);
                s->gpu[i].xid_posted = posted;
        }
        memset(s->proc, 0, sizeof s->proc);
        /* MIG as the node description declares it (the node this process loaded, when it is this one) */
        const struct sim_mig_node *decl = sim_node_mig(t);
        struct sim_mig_node initial;
        if (!decl) {
                sim_mig_initial(t, &initial);
                decl = &initial;
        }
        memcpy(s->mig, decl->gpu, sizeof s->mig);
        s->mig_serial = MAX(s->mig_serial, decl->serial);
        s->mig_fault = SIM_MIG_FAULT_NONE;
        s->mig_fault_after = 0;
}

void sim_state_reset_locked(struct sim_state *s, const struct topo *t) {
        state_fill(s, t);
}

static int state_init_new(struct sim_state *s, const struct topo *t, const char *node_path) {
        memset(s, 0, sizeof *s);
        s->magic = SIM_STATE_MAGIC;
        s->abi_version = SIM_STATE_ABI;
        s->size = (uint32_t)sizeof *s;
        strscpy(s->node, node_path, sizeof s->node);
        state_fill(s, t);

        pthread_mutexattr_t a;
        int r = pthread_mutexattr_init(&a);
        if (r)
                return -r;
        r = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        if (!r)
                r = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
        if (!r)
                r = pthread_mutex_init(&s->lock, &a);
        pthread_mutexattr_destroy(&a);
        return -r;
}

static int state_check(const struct sim_state *s, size_t file_size, const struct topo *t, const char *path, char *err,
                       size_t err_len) {
        if (file_size < offsetof(struct sim_state, lock) || s->magic != SIM_STATE_MAGIC) {
                snprintf(err, err_len, "%s is not a gpuslice simulator state file; remove it", path);
                return -EPROTO;
        }
        if (s->abi_version != SIM_STATE_ABI || s->size != sizeof *s || file_size != sizeof *s) {
                snprintf(err, err_len,
                         "%s has state ABI %" PRIu32 " (%" PRIu32 " bytes), this simulator speaks ABI %u "
                         "(%zu bytes); remove it or run `gpuslice-sim reset`",
                         path, s->abi_version, s->size, SIM_STATE_ABI, sizeof *s);
                return -EPROTO;
        }
        /* the node path is printed below: a file whose field is not terminated is not ours */
        if (!memchr(s->node, 0, sizeof s->node)) {
                snprintf(err, err_len, "%s is not a gpuslice simulator state file; remove it", path);
                return -EPROTO;
        }
        if (t && s->n_gpus != t->n_gpus) {
                snprintf(err, err_len,
                         "%s was made for a node with %" PRIu32 " GPUs (%s), this node has %u; "
                         "remove it or run `gpuslice-sim reset`",
                         path, s->n_gpus, s->node, t->n_gpus);
                return -EPROTO;
        }
        return 0;
}

static int state_map_existing(const char *path, const struct topo *t, struct sim_state **ret, char *err,
                              size_t err_len) {
        _cleanup_(closep) int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || (size_t)st.st_size < sizeof(uint64_t) + 2 * sizeof(uint32_t)) {
                snprintf(err, err_len, "%s is not a gpuslice simulator state file; remove it", path);
                return -EPROTO;
        }
        size_t size = (size_t)st.st_size;
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
                return -errno;
        int r = state_check(p, size, t, path, err, err_len);
        if (r < 0) {
                munmap(p, size);
                return r;
        }
        *ret = p;
        return 0;
}

static int state_create(const char *path, const struct topo *t, const char *node_path, char *err, size_t err_len) {
        char tmp[PATH_MAX];
        if (snprintf(tmp, sizeof tmp, "%s.new-XXXXXX", path) >= (int)sizeof tmp)
                return -ENAMETOOLONG;
        int fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0) {
                int r = -errno;
                snprintf(err, err_len, "cannot create simulator state %s: %s", tmp, strerror(-r));
                return r;
        }
        /* Processes of other users (a container's user) share the simulated node. */
        (void)fchmod(fd, 0666);
        int r = 0;
        void *p = MAP_FAILED;
        if (ftruncate(fd, sizeof(struct sim_state)) < 0) {
                r = -errno;
                goto fail;
        }
        p = mmap(NULL, sizeof(struct sim_state), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
                r = -errno;
                goto fail;
        }
        r = state_init_new(p, t, node_path);
        munmap(p, sizeof(struct sim_state));
        if (r < 0)
                goto fail;
        /* link() publishes the finished file atomically and never replaces a concurrent winner's. */
        if (link(tmp, path) < 0 && errno != EEXIST)
                r = -errno;
fail:
        close(fd);
        unlink(tmp);
        if (r < 0)
                snprintf(err, err_len, "cannot create simulator state %s: %s", path, strerror(-r));
        return r;
}

int sim_state_open_path(const char *path, const struct topo *t, const char *node_path, struct sim_state **ret,
                        char *err, size_t err_len) {
        if (err_len)
                err[0] = '\0';
        for (int attempt = 0; attempt < 3; attempt++) {
                int r = state_map_existing(path, t, ret, err, err_len);
                if (r != -ENOENT) {
                        if (r < 0 && !*err)
                                snprintf(err, err_len, "cannot open simulator state %s: %s", path, strerror(-r));
                        return r;
                }
                r = state_create(path, t, node_path, err, err_len);
                if (r < 0)
                        return r;
        }
        snprintf(err, err_len, "cannot open simulator state %s: it keeps disappearing", path);
        return -EAGAIN;
}

int sim_state_open(const struct topo *t, const char *node_path, struct sim_state **ret, char *err, size_t err_len) {
        char path[PATH_MAX];
        int r = sim_state_path(node_path, path, sizeof path);
        if (r < 0) {
                snprintf(err, err_len, "simulator state path too long");
                return r;
        }
        return sim_state_open_path(path, t, node_path, ret, err, err_len);
}

void sim_state_close(struct sim_state *s) {
        if (s)
                munmap(s, sizeof *s);
}

int sim_state_lock(struct sim_state *s) {
        int r = pthread_mutex_lock(&s->lock);
        if (r == EOWNERDEAD) {
                /* The holder died mid-update. Every update is a handful of independent field
                 * writes, so the state stays usable: mark the lock consistent and go on. */
                pthread_mutex_consistent(&s->lock);
                s->lock_recoveries++;
                return 0;
        }
        return -r;
}

void sim_state_unlock(struct sim_state *s) {
        pthread_mutex_unlock(&s->lock);
}

void sim_state_prune_locked(struct sim_state *s) {
        for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
                struct sim_proc *p = &s->proc[i];
                if (!p->pid || (p->flags & SIM_PROC_KEEP))
                        continue;
                /* a process of another PID namespace is alive when /proc still shows it there */
                uint32_t pid = sim_proc_visible_pid(p);
                if (pid && !(kill((pid_t)pid, 0) < 0 && errno == ESRCH))
                        continue;
                /* Gone. The driver tears its contexts down before the memory is free: listed, memory held,
                 * for the node's teardown-ms after it was first found gone. */
                uint64_t now = p->down_ms ? sim_now_us() : 0;
                if (p->down_ms && !p->dead_us)
                        p->dead_us = now ? now : 1;
                if (!p->down_ms || now - p->dead_us >= (uint64_t)p->down_ms * 1000)
                        memset(p, 0, sizeof *p);
        }
}

uint64_t sim_state_used_locked(const struct sim_state *s, unsigned gpu) {
        uint64_t used = 0;
        for (unsigned i = 0; i < SIM_MAX_PROCS; i++)
                if (s->proc[i].pid && s->proc[i].gpu == gpu)
                        used += s->proc[i].used_bytes;
        return used;
}

struct sim_proc *sim_proc_find_locked(struct sim_state *s, uint32_t pid, unsigned gpu) {
        for (unsigned i = 0; i < SIM_MAX_PROCS; i++)
                if (s->proc[i].pid == pid && s->proc[i].gpu == gpu)
                        return &s->proc[i];
        return NULL;
}

int sim_proc_get_locked(struct sim_state *s, uint32_t pid, unsigned gpu, struct sim_proc **ret) {
        if (!pid)
                return -EINVAL;
        struct sim_proc *p = sim_proc_find_locked(s, pid, gpu);
        if (p) {
                *ret = p;
                return 0;
        }
        for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
                p = &s->proc[i];
                if (p->pid)
                        continue;
                memset(p, 0, sizeof *p);
                p->gpu = gpu;
                p->gi = p->ci = SIM_NO_INSTANCE;
                p->start_us = sim_now_us();
                p->pid = pid; /* last: a dying writer leaves either a free or a complete slot */
                *ret = p;
                return 0;
        }
        return -ENOSPC;
}

unsigned sim_proc_del_locked(struct sim_state *s, uint32_t pid) {
        unsigned n = 0;
        for (unsigned i = 0; i < SIM_MAX_PROCS; i++)
                if (s->proc[i].pid == pid) {
                        memset(&s->proc[i], 0, sizeof s->proc[i]);
                        n++;
                }
        return n;
}

uint64_t sim_state_post_xid_locked(struct sim_state *s, unsigned gpu, uint64_t xid) {
        struct sim_gpu_state *g = &s->gpu[gpu];
        uint64_t seq = ++s->event_seq;
        struct sim_xid *e = &g->xid[g->xid_posted % SIM_XID_RING];
        e->xid = xid;
        e->time_us = sim_now_us();
        e->seq = seq;
        g->xid_posted++;
        __atomic_add_fetch(&s->event_futex, 1, __ATOMIC_SEQ_CST);
        syscall(SYS_futex, &s->event_futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
        return seq;
}

void sim_state_wait_event(struct sim_state *s, uint32_t seen, unsigned timeout_ms) {
        struct timespec ts = { .tv_sec = timeout_ms / 1000, .tv_nsec = (long)(timeout_ms % 1000) * 1000000L };
        /* Not FUTEX_PRIVATE: the word lives in a mapping shared between processes. */
        syscall(SYS_futex, &s->event_futex, FUTEX_WAIT, seen, &ts, NULL, 0);
}

unsigned sim_gpu_util_locked(const struct sim_state *s, unsigned gpu, unsigned *ret_mem_util) {
        unsigned sm = 0, mem = 0;
        for (unsigned i = 0; i < SIM_MAX_PROCS; i++)
                if (s->proc[i].pid && s->proc[i].gpu == gpu) {
                        sm += s->proc[i].sm_util;
                        mem += s->proc[i].mem_util;
                }
        sm = MIN(sm, 100u);
        mem = MIN(mem, 100u);
        const struct sim_gpu_state *g = &s->gpu[gpu];
        if (ret_mem_util)
                *ret_mem_util = MAX(mem, MIN(g->util_mem, 100u));
        return MAX(sm, MIN(g->util_gpu, 100u));
}

unsigned sim_gpu_temperature_locked(const struct sim_state *s, unsigned gpu) {
        if (s->gpu[gpu].temperature_c)
                return s->gpu[gpu].temperature_c;
        return 30 + sim_gpu_util_locked(s, gpu, NULL) * 45 / 100;
}

unsigned sim_gpu_power_mw_locked(const struct sim_state *s, unsigned gpu, unsigned limit_mw) {
        if (s->gpu[gpu].power_mw)
                return s->gpu[gpu].power_mw;
        unsigned idle = limit_mw / 5;
        return idle + (unsigned)((uint64_t)(limit_mw - idle) * sim_gpu_util_locked(s, gpu, NULL) / 100);
}

static uint32_t read_nspid(void) {
        _cleanup_(fclosep) FILE *f = fopen("/proc/self/status", "re");
        if (!f)
                return 0;
        char line[256];
        while (fgets(line, sizeof line, f)) {
                if (strncmp(line, "NSpid:", 6) != 0)
                        continue;
                unsigned long v = strtoul(line + 6, NULL, 10);
                return v > 0 && v <= UINT32_MAX ? (uint32_t)v : 0;
        }
        return 0;
}

void sim_self_identity(struct sim_identity *ret) {
        struct sim_identity id = { .ns_pid = (uint32_t)getpid() };
        id.pid = read_nspid();
        if (!id.pid)
                id.pid = id.ns_pid;
        char link[64];
        ssize_t n = readlink("/proc/self/ns/pid", link, sizeof link - 1);
        if (n > 0) {
                link[n] = '\0';
                const char *b = strchr(link, '[');
                if (b)
                        id.pidns = strtoull(b + 1, NULL, 10);
        }
        *ret = id;
}

/* Last NSpid field of /proc/<dir>/status (the PID in the process's own namespace), 0 if none. */
static uint32_t innermost_nspid(const char *dir) {
        char path[300], line[256];
        snprintf(path, sizeof path, "/proc/%s/status", dir);
        FILE *f = fopen(path, "re");
        if (!f)
                return 0;
        uint32_t v = 0;
        while (fgets(line, sizeof line, f)) {
                if (strncmp(line, "NSpid:", 6) != 0)
                        continue;
                char *save = NULL;
                for (char *tok = strtok_r(line + 6, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save))
                        v = (uint32_t)strtoul(tok, NULL, 10);
                break;
        }
        fclose(f);
        return v;
}

uint32_t sim_proc_visible_pid(const struct sim_proc *p) {
        static uint64_t own_pidns; /* racy first fill is harmless: every thread computes the same */
        if (!own_pidns) {
                struct sim_identity self;
                sim_self_identity(&self);
                own_pidns = self.pidns;
        }
        if (!p->pidns || !own_pidns || p->pidns == own_pidns || p->pid != p->ns_pid)
                return p->pid;
        char want[48];
        snprintf(want, sizeof want, "pid:[%" PRIu64 "]", p->pidns);
        DIR *d = opendir("/proc");
        if (!d)
                return 0;
        uint32_t found = 0;
        struct dirent *de;
        while (!found && (de = readdir(d))) {
                if (de->d_name[0] < '1' || de->d_name[0] > '9')
                        continue;
                char path[300], link[48];
                snprintf(path, sizeof path, "/proc/%s/ns/pid", de->d_name);
                ssize_t n = readlink(path, link, sizeof link - 1);
                if (n <= 0)
                        continue;
                link[n] = '\0';
                if (strcmp(link, want) == 0 && innermost_nspid(de->d_name) == p->ns_pid)
                        found = (uint32_t)strtoul(de->d_name, NULL, 10);
        }
        closedir(d);
        return found;
}
