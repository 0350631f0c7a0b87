/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cuda-launch — kernels on a simulated device clock, so GPU time is real in the simulation:
 *
 *  - Modules hold no code. cuModuleGetFunction(&f, mod, "spin_<µs>") gives a kernel each of whose
 *    blocks keeps one SM busy for <µs> microseconds (any other name: 10 µs).
 *  - Every GPU has sm_count SMs (the node description's `sms=`, 20…132 in the shipped nodes). Their
 *    timelines live in a file shared by every process of the node (<state file>.launch), so kernels
 *    of different processes compete for the same SMs. A launch places its blocks greedily on the
 *    SMs that free up first, no earlier than the end of the process's previous kernel on that GPU
 *    (one stream per process and GPU: all streams are serialised), and returns at once; like the
 *    driver's bounded launch queue, it blocks while more than 10 ms of this process's work is queued.
 *  - An MPS client (sim/mps.h) places its blocks on at most its active thread percentage of the SMs (at least
 *    one): at any moment the ones that free up first, so two clients at 50 % each run at about half rate, side
 *    by side on the whole GPU. The percentage is read once per process, as a client's context takes it.
 *  - cuCtxSynchronize / cuStreamSynchronize sleep until the process's work is done.
 *  - Each process publishes its SM utilization (SM-busy time / (SMs × 100 ms window), percent) to its
 *    entry in the node state every 20 ms, which is what the simulated NVML reports per process.
 *
 * Launch entry points: cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel, cuGraphLaunch,
 * each with its _ptsz twin. Must never hold the shared lock across a sleep, never leave it held
 * (robust mutex), never export anything but CUDA API names.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sim/cuda-sim.h"
#include "sim/mps.h"
#include "util/util.h"

#define LAUNCH_MAGIC 0x48434e55414c5347ULL /* "GSLAUNCH" */
#define LAUNCH_ABI 1u
#define MAX_SMS 256u
#define QUEUE_NS 10000000ULL   /* a process blocks in launch while more than this is queued */
#define WINDOW_MS 100u         /* utilization window (NVML's sampling scale) */
#define PUBLISH_NS 20000000ULL /* utilization published every 20 ms */
#define BUCKETS 1024u          /* 1 ms buckets of SM-busy time */
#define DEFAULT_BLOCK_US 10u
#define COOP_BLOCKS_PER_SM 16u
#define GRAPH_MAX_NODES 64u

struct launch_state {
        uint64_t magic;
        uint32_t abi_version;
        uint32_t size;
        pthread_mutex_t lock;                        /* robust, process-shared */
        uint64_t sm_free_ns[TOPO_MAX_GPUS][MAX_SMS]; /* CLOCK_MONOTONIC ns at which each SM is free */
};

#define MOD_MAGIC 0x444f4d53u  /* "SMOD" */
#define FUNC_MAGIC 0x434e5546u /* "FUNC" */
#define GRAPH_MAGIC 0x48505247u
#define EXEC_MAGIC 0x43455847u
#define STREAM_MAGIC 0x4d525453u

/* Every object this file hands out is on one list until destroyed: the driver owns them (and
 * leak checkers see them reachable, as they are in a real driver). */
struct obj_link {
        struct obj_link *next, *prev;
};

struct CUmod_st {
        struct obj_link link;
        uint32_t magic;
        CUcontext ctx; /* modules go with their context */
        unsigned gpu;
        uint64_t bytes; /* device memory the load took (charged) */
        uint64_t lazy;  /* taken at the first cuModuleGetFunction (CUDA_MODULE_LOADING=LAZY), 0 = none */
        bool lazy_taken;
};

#define LIB_MAGIC 0x4249424cu /* "LBIB" */
struct CUlib_st {
        struct obj_link link;
        uint32_t magic;
        bool charged;
        unsigned gpu;
        uint64_t bytes;
};

struct CUfunc_st {
        struct obj_link link;
        uint32_t magic;
        uint32_t block_us;
};

#define NODE_MAGIC 0x45444f4eu /* "NODE" */

/* A graph node: a kernel, or a memory node (the allocation's address is fixed when the node is made). */
struct CUgraphNode_st {
        uint32_t magic;
        CUgraphNodeType type; /* KERNEL, MEM_ALLOC or MEM_FREE */
        CUfunction f;
        uint64_t blocks;
        CUdeviceptr ptr; /* memory nodes */
        uint64_t bytes;  /* MEM_ALLOC */
        int ordinal;     /* MEM_ALLOC: the device */
};
#define knode CUgraphNode_st

struct CUgraph_st {
        struct obj_link link;
        uint32_t magic;
        unsigned n;
        struct knode node[GRAPH_MAX_NODES];
};

struct CUgraphExec_st {
        struct obj_link link;
        uint32_t magic;
        unsigned n;
        struct knode node[GRAPH_MAX_NODES];
};

struct CUstream_st {
        struct obj_link link;
        uint32_t magic;
        int ordinal;     /* the device of the context it was created in (cuStreamGetDevice) */
        unsigned gpu;    /* its node GPU */
        CUgraph capture; /* cuStreamBeginCapture..cuStreamEndCapture: the graph work goes into, else NULL */
};

static pthread_mutex_t objs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct obj_link objs = { &objs, &objs };

static void obj_add(struct obj_link *l) {
        pthread_mutex_lock(&objs_lock);
        l->next = objs.next;
        l->prev = &objs;
        objs.next->prev = l;
        objs.next = l;
        pthread_mutex_unlock(&objs_lock);
}

static void obj_del(struct obj_link *l) {
        pthread_mutex_lock(&objs_lock);
        l->prev->next = l->next;
        l->next->prev = l->prev;
        pthread_mutex_unlock(&objs_lock);
}

/* A graph node handle is its index + 1 within its graph (never dereferenced). */

/* Process-local utilization record of one GPU: SM-busy ns per millisecond of the monotonic clock. */
struct buckets {
        uint64_t epoch_ms[BUCKETS];
        uint64_t sm_ns[BUCKETS];
};

static pthread_mutex_t local_lock = PTHREAD_MUTEX_INITIALIZER;
static struct launch_state *ls;
static uint64_t tail_ns[TOPO_MAX_GPUS]; /* end of this process's last kernel on each GPU */
static struct buckets *bk[TOPO_MAX_GPUS];
static bool publisher_started;

static uint64_t mono_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t) {
        struct timespec ts = { (time_t)(t / 1000000000ULL), (long)(t % 1000000000ULL) };
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                ;
}

/* ---- the shared SM timelines ---- */

static int state_create(const char *path) {
        char tmp[PATH_MAX];
        if (snprintf(tmp, sizeof tmp, "%s.new-XXXXXX", path) >= (int)sizeof tmp)
                return -ENAMETOOLONG;
        int fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0)
                return -errno;
        (void)fchmod(fd, 0666);
        int r = 0;
        struct launch_state *s = MAP_FAILED;
        if (ftruncate(fd, sizeof *s) < 0)
                r = -errno;
        if (r == 0 && (s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
                r = -errno;
        if (r == 0) {
                s->magic = LAUNCH_MAGIC;
                s->abi_version = LAUNCH_ABI;
                s->size = sizeof *s;
                pthread_mutexattr_t a;
                pthread_mutexattr_init(&a);
                pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
                pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
                r = -pthread_mutex_init(&s->lock, &a);
                pthread_mutexattr_destroy(&a);
                munmap(s, sizeof *s);
        }
        if (r == 0 && link(tmp, path) < 0 && errno != EEXIST)
                r = -errno;
        unlink(tmp);
        close(fd);
        return r;
}

static struct launch_state *state_open(void) {
        char base[PATH_MAX], path[PATH_MAX];
        if (sim_state_path(sim_cuda_node_path(), base, sizeof base) < 0 ||
            snprintf(path, sizeof path, "%s.launch", base) >= (int)sizeof path)
                return NULL;
        for (int attempt = 0; attempt < 3; attempt++) {
                int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
                if (fd < 0 && errno == ENOENT) {
                        if (state_create(path) < 0)
                                return NULL;
                        continue;
                }
                if (fd < 0)
                        return NULL;
                struct stat st;
                struct launch_state *s = MAP_FAILED;
                if (fstat(fd, &st) == 0 && (size_t)st.st_size == sizeof *s)
                        s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                close(fd);
                if (s == MAP_FAILED)
                        return NULL;
                if (s->magic != LAUNCH_MAGIC || s->abi_version != LAUNCH_ABI || s->size != sizeof *s) {
                        munmap(s, sizeof *s);
                        return NULL;
                }
                return s;
        }
        return NULL;
}

static int lock_shared(void) {
        int r = pthread_mutex_lock(&ls->lock);
        if (r == EOWNERDEAD) {
                /* A holder died mid-placement: timelines are plain numbers, still usable. */
                pthread_mutex_consistent(&ls->lock);
                r = 0;
        }
        return -r;
}

static unsigned sm_count(unsigned gpu) {
        int n = sim_cuda_node()->gpu[gpu].sm_count;
        return n < 1 ? 1 : (unsigned)n > MAX_SMS ? MAX_SMS : (unsigned)n;
}

/* ---- utilization ---- */

/* Spread sm_ns of SM-busy time evenly over [start, end) into 1 ms buckets; local_lock held. */
static void account_locked(unsigned gpu, uint64_t start, uint64_t end, uint64_t sm_ns) {
        if (!bk[gpu] && !(bk[gpu] = calloc(1, sizeof *bk[gpu])))
                return;
        struct buckets *b = bk[gpu];
        if (end <= start)
                end = start + 1;
        for (uint64_t t = start; t < end;) {
                uint64_t ms = t / 1000000ULL, next = MIN((ms + 1) * 1000000ULL, end);
                unsigned i = (unsigned)(ms % BUCKETS);
                if (b->epoch_ms[i] != ms) {
                        b->epoch_ms[i] = ms;
                        b->sm_ns[i] = 0;
                }
                b->sm_ns[i] += (uint64_t)((unsigned __int128)sm_ns * (next - t) / (end - start));
                t = next;
        }
}

/* Percent of the GPU's SM time this process used over the last window; local_lock held. */
static unsigned util_locked(unsigned gpu, uint64_t now) {
        struct buckets *b = bk[gpu];
        if (!b)
                return 0;
        uint64_t now_ms = now / 1000000ULL, busy = 0;
        for (uint64_t ms = now_ms - WINDOW_MS; ms < now_ms; ms++) {
                unsigned i = (unsigned)(ms % BUCKETS);
                if (b->epoch_ms[i] == ms)
                        busy += b->sm_ns[i];
        }
        uint64_t cap = (uint64_t)sm_count(gpu) * WINDOW_MS * 1000000ULL;
        uint64_t pct = (busy * 100 + cap / 2) / cap;
        return pct > 100 ? 100 : (unsigned)pct;
}

static void *publisher(void *arg) {
        (void)arg;
        for (;;) {
                uint64_t now = mono_ns();
                unsigned util[TOPO_MAX_GPUS];
                bool active[TOPO_MAX_GPUS];
                pthread_mutex_lock(&local_lock);
                for (unsigned g = 0; g < TOPO_MAX_GPUS; g++) {
                        active[g] = bk[g] != NULL;
                        util[g] = active[g] ? util_locked(g, now) : 0;
                }
                pthread_mutex_unlock(&local_lock);
                struct sim_state *s = sim_cuda_state();
                if (sim_state_lock(s) == 0) {
                        for (unsigned g = 0; g < TOPO_MAX_GPUS; g++) {
                                if (!active[g])
                                        continue;
                                struct sim_proc *p = sim_proc_find_locked(s, sim_cuda_self()->pid, g);
                                if (p) {
                                        p->sm_util = util[g];
                                        p->mem_util = util[g] / 2;
                                        p->sample_us = sim_now_us();
                                }
                        }
                        sim_state_unlock(s);
                }
                sleep_until(now + PUBLISH_NS);
        }
        return NULL;
}

static void start_publisher_locked(void) {
        if (publisher_started)
                return;
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_t th;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        publisher_started = pthread_create(&th, &a, publisher, NULL) == 0;
        pthread_attr_destroy(&a);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void atfork_child(void) {
        /* The child has none of the parent's work, and no publisher thread. */
        memset(tail_ns, 0, sizeof tail_ns);
        for (unsigned g = 0; g < TOPO_MAX_GPUS; g++) {
                free(bk[g]);
                bk[g] = NULL;
        }
        publisher_started = false;
        pthread_mutex_init(&local_lock, NULL);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

static unsigned threads_pct = 100; /* sim_mps_client_threads(), read once */

static void open_once(void) {
        ls = state_open();
        threads_pct = sim_mps_client_threads();
        pthread_atfork(NULL, NULL, atfork_child);
}

/* ---- the launch itself ---- */

struct heap_e {
        uint64_t t;
        unsigned sm;
};

static void sift_down(struct heap_e *h, unsigned n, unsigned i) {
        for (;;) {
                unsigned l = 2 * i + 1, r = l + 1, m = i;
                if (l < n && h[l].t < h[m].t)
                        m = l;
                if (r < n && h[r].t < h[m].t)
                        m = r;
                if (m == i)
                        return;
                struct heap_e x = h[i];
                h[i] = h[m];
                h[m] = x;
                i = m;
        }
}

static CUresult launch(CUfunction f, uint64_t blocks, bool cooperative) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!f || f->magic != FUNC_MAGIC)
                return CUDA_ERROR_INVALID_HANDLE;
        if (blocks == 0)
                return CUDA_ERROR_INVALID_VALUE;
        int ord;
        unsigned gpu;
        CUresult r = sim_cuda_current(&ord, &gpu);
        if (r != CUDA_SUCCESS)
                return r;
        unsigned S = sm_count(gpu);
        if (cooperative && blocks > (uint64_t)S * COOP_BLOCKS_PER_SM)
                return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
        pthread_once(&once, open_once);
        if (!ls)
                return CUDA_ERROR_UNKNOWN;
        uint64_t d = (uint64_t)f->block_us * 1000ULL;
        pthread_mutex_lock(&local_lock);
        if (lock_shared() < 0) {
                pthread_mutex_unlock(&local_lock);
                return CUDA_ERROR_UNKNOWN;
        }
        uint64_t now = mono_ns();
        uint64_t earliest = MAX(now, tail_ns[gpu]);
        struct heap_e h[MAX_SMS];
        for (unsigned i = 0; i < S; i++)
                h[i] = (struct heap_e){ MAX(ls->sm_free_ns[gpu][i], earliest), i };
        for (unsigned i = S / 2; i-- > 0;)
                sift_down(h, S, i);
        /* an MPS client: only its share of the SMs, the ones free first (ascending order is a heap too) */
        unsigned use = MAX(1u, S * threads_pct / 100);
        if (use < S) {
                struct heap_e first[MAX_SMS];
                for (unsigned i = 0, n = S; i < use; i++) {
                        first[i] = h[0];
                        h[0] = h[--n];
                        sift_down(h, n, 0);
                }
                memcpy(h, first, use * sizeof *h);
        }
        uint64_t kstart = h[0].t, kend = 0;
        for (uint64_t b = 0; b < blocks; b++) {
                uint64_t end = h[0].t + d;
                kend = MAX(kend, end);
                h[0].t = end;
                sift_down(h, use, 0);
        }
        for (unsigned i = 0; i < use; i++)
                if (h[i].t > ls->sm_free_ns[gpu][h[i].sm])
                        ls->sm_free_ns[gpu][h[i].sm] = h[i].t;
        pthread_mutex_unlock(&ls->lock);
        tail_ns[gpu] = kend;
        account_locked(gpu, kstart, kend, blocks * d);
        start_publisher_locked();
        pthread_mutex_unlock(&local_lock);
        /* The driver's launch queue is bounded: a process that outruns the GPU waits here. */
        if (kend > now + QUEUE_NS)
                sleep_until(kend - QUEUE_NS);
        return CUDA_SUCCESS;
}

void sim_launch_sync(unsigned gpu) {
        if (gpu >= TOPO_MAX_GPUS)
                return;
        pthread_mutex_lock(&local_lock);
        uint64_t t = tail_ns[gpu];
        pthread_mutex_unlock(&local_lock);
        if (t > mono_ns())
                sleep_until(t);
}

static uint64_t grid(unsigned x, unsigned y, unsigned z) {
        return (uint64_t)x * y * z;
}

static bool is_user_stream(CUstream s) {
        return s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD;
}

static CUresult capture_node_locked(CUgraph gr, const struct knode *k);

/* A launch into a capturing stream is recorded as a kernel node of its graph, not run (stream capture). */
static CUresult launch_on(CUstream s, CUfunction f, uint64_t blocks) {
        if (is_user_stream(s) && s->magic == STREAM_MAGIC && s->capture) {
                if (!f || f->magic != FUNC_MAGIC)
                        return CUDA_ERROR_INVALID_HANDLE;
                struct knode k = { .magic = NODE_MAGIC, .type = CU_GRAPH_NODE_TYPE_KERNEL, .f = f, .blocks = blocks };
                return capture_node_locked(s->capture, &k);
        }
        return launch(f, blocks, false);
}

_public_ CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                 unsigned int by, unsigned int bz, unsigned int shm, CUstream s, void **params,
                                 void **extra) {
        cuLaunchKernel_params p = { f, gx, gy, gz, bx, by, bz, shm, s, params, extra };
        SIM_TRACED(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel", &p, launch_on(s, f, grid(gx, gy, gz)));
}

_public_ CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                      unsigned int by, unsigned int bz, unsigned int shm, CUstream s, void **params,
                                      void **extra) {
        (void)bx, (void)by, (void)bz, (void)shm, (void)params, (void)extra;
        return launch_on(s, f, grid(gx, gy, gz));
}

static bool config_cooperative(const CUlaunchConfig *c) {
        for (unsigned i = 0; c->attrs && i < c->numAttrs; i++)
                if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && c->attrs[i].value.cooperative)
                        return true;
        return false;
}

_public_ CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra) {
        (void)params, (void)extra;
        if (!config)
                return CUDA_ERROR_INVALID_VALUE;
        return launch(f, grid(config->gridDimX, config->gridDimY, config->gridDimZ), config_cooperative(config));
}

_public_ CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params, void **extra) {
        (void)params, (void)extra;
        if (!config)
                return CUDA_ERROR_INVALID_VALUE;
        return launch(f, grid(config->gridDimX, config->gridDimY, config->gridDimZ), config_cooperative(config));
}

_public_ CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                            unsigned int bx, unsigned int by, unsigned int bz, unsigned int shm,
                                            CUstream s, void **params) {
        (void)bx, (void)by, (void)bz, (void)shm, (void)s, (void)params;
        return launch(f, grid(gx, gy, gz), true);
}

_public_ CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                                 unsigned int bx, unsigned int by, unsigned int bz, unsigned int shm,
                                                 CUstream s, void **params) {
        (void)bx, (void)by, (void)bz, (void)shm, (void)s, (void)params;
        return launch(f, grid(gx, gy, gz), true);
}

/* ---- modules and libraries ----
 * Loading code takes device memory, as on a GPU: MODULE_CODE_BYTES for the code, plus the __device__
 * globals a simulated image declares. A simulated image is text:
 * "gpuslice-sim-module[ globals=SIZE][ lazy=SIZE][ delay=MS]" — lazy: what a module takes later, at its
 * first cuModuleGetFunction (the driver's lazy loading: no call a limiter hooks takes it); delay: the load
 * takes MS milliseconds after taking its memory (a window in which others allocate). Any other image (a
 * real cubin or fatbin) is code only. A module takes its memory on the current context's GPU and gives it
 * back when unloaded or when its context goes; a library (context-independent) takes it on the current
 * context's GPU when there is one, until unloaded. */

#define MODULE_CODE_BYTES (2ULL << 20)
#define SIM_IMAGE "gpuslice-sim-module"
#define IMAGE_MAX 4096u

struct image_info {
        uint64_t bytes, lazy;
        unsigned delay_ms;
};

/* What an image takes on the device. A simulated image is "gpuslice-sim-module" followed by key=SIZE tokens
 * (globals, lazy, delay); anything else in it (an unknown token, a bad size) makes it code only. */
static struct image_info image_info(const char *image, size_t len) {
        struct image_info i = { MODULE_CODE_BYTES, 0, 0 }, code_only = i;
        size_t n = strnlen(image, len);
        if (n < sizeof SIM_IMAGE - 1 || memcmp(image, SIM_IMAGE, sizeof SIM_IMAGE - 1) != 0)
                return i;
        char text[IMAGE_MAX];
        memcpy(text, image, MIN(n, sizeof text - 1));
        text[MIN(n, sizeof text - 1)] = '\0';
        const char *p = text + sizeof SIM_IMAGE - 1;
        while (*p) {
                if (*p++ != ' ')
                        return code_only;
                size_t tl = strcspn(p, " ");
                const char *eq = memchr(p, '=', tl);
                char val[32];
                uint64_t v;
                if (!eq || (size_t)(p + tl - eq - 1) >= sizeof val)
                        return code_only;
                strnscpy(val, sizeof val, eq + 1, (size_t)(p + tl - eq - 1));
                if (parse_size(val, &v) < 0)
                        return code_only;
                size_t kl = (size_t)(eq - p);
                if (kl == 7 && memcmp(p, "globals", 7) == 0)
                        i.bytes = MODULE_CODE_BYTES + v;
                else if (kl == 4 && memcmp(p, "lazy", 4) == 0)
                        i.lazy = v;
                else if (kl == 5 && memcmp(p, "delay", 5) == 0)
                        i.delay_ms = v > 60000 ? 60000 : (unsigned)v;
                else
                        return code_only;
                p += tl;
        }
        return i;
}

static uint64_t image_bytes(const char *image, size_t len) {
        return image_info(image, len).bytes;
}

/* An image's bytes from a file (the first IMAGE_MAX bytes are enough to tell). */
static CUresult file_bytes(const char *fname, uint64_t *ret) {
        int fd = open(fname, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return CUDA_ERROR_FILE_NOT_FOUND;
        char buf[IMAGE_MAX];
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n < 0)
                return CUDA_ERROR_FILE_NOT_FOUND;
        buf[n] = '\0';
        *ret = image_bytes(buf, (size_t)n);
        return CUDA_SUCCESS;
}

static CUresult module_new(CUmodule *m, struct image_info info) {
        uint64_t bytes = info.bytes;
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        int ord;
        unsigned gpu;
        CUcontext ctx = NULL;
        CUresult r = sim_cuda_current(&ord, &gpu);
        if (r == CUDA_SUCCESS)
                r = cuCtxGetCurrent(&ctx);
        if (r != CUDA_SUCCESS)
                return r;
        struct CUmod_st *x = calloc(1, sizeof *x);
        if (!x)
                return CUDA_ERROR_OUT_OF_MEMORY;
        r = sim_mem_charge(gpu, bytes);
        if (r != CUDA_SUCCESS) {
                free(x);
                return r;
        }
        x->magic = MOD_MAGIC;
        x->ctx = ctx;
        x->gpu = gpu;
        x->bytes = bytes;
        x->lazy = info.lazy;
        if (info.delay_ms) {
                struct timespec ts = { (time_t)(info.delay_ms / 1000), (long)(info.delay_ms % 1000) * 1000000L };
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                        ;
        }
        obj_add(&x->link);
        *m = x;
        return CUDA_SUCCESS;
}

_public_ CUresult cuModuleLoadData(CUmodule *module, const void *image) {
        if (!module || !image)
                return CUDA_ERROR_INVALID_VALUE;
        return module_new(module, image_info(image, IMAGE_MAX));
}

_public_ CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                     CUjit_option *options, void **optionValues) {
        if (!module || !image || (numOptions && (!options || !optionValues)))
                return CUDA_ERROR_INVALID_VALUE;
        return module_new(module, image_info(image, IMAGE_MAX));
}

_public_ CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin) {
        if (!module || !fatCubin)
                return CUDA_ERROR_INVALID_VALUE;
        return module_new(module, image_info(fatCubin, IMAGE_MAX));
}

_public_ CUresult cuModuleLoad(CUmodule *module, const char *fname) {
        if (!module || !fname)
                return CUDA_ERROR_INVALID_VALUE;
        uint64_t bytes;
        CUresult r = file_bytes(fname, &bytes);
        return r == CUDA_SUCCESS ? module_new(module, (struct image_info){ bytes, 0, 0 }) : r;
}

static void module_free(struct CUmod_st *m) {
        sim_mem_uncharge(m->gpu, m->bytes + (m->lazy_taken ? m->lazy : 0));
        m->magic = 0;
        free(m); /* functions stay valid handles: they own nothing */
}

/* Is l one of the live objects? (A handle is checked against the list before it is dereferenced: an
 * unloaded one may be freed memory.) objs_lock held. */
static bool obj_live_locked(const struct obj_link *l) {
        for (const struct obj_link *x = objs.next; x != &objs; x = x->next)
                if (x == l)
                        return true;
        return false;
}

_public_ CUresult cuModuleUnload(CUmodule hmod) {
        pthread_mutex_lock(&objs_lock);
        bool ok = hmod && obj_live_locked(&hmod->link) && hmod->magic == MOD_MAGIC;
        if (ok) {
                hmod->link.prev->next = hmod->link.next;
                hmod->link.next->prev = hmod->link.prev;
                hmod->magic = 0;
        }
        pthread_mutex_unlock(&objs_lock);
        if (!ok)
                return CUDA_ERROR_INVALID_HANDLE;
        module_free(hmod);
        return CUDA_SUCCESS;
}

void sim_launch_ctx_gone(CUcontext ctx) {
        struct obj_link gone = { &gone, &gone };
        pthread_mutex_lock(&objs_lock);
        for (struct obj_link *l = objs.next, *next; l != &objs; l = next) {
                next = l->next;
                struct CUmod_st *m = (struct CUmod_st *)(void *)l; /* every object starts with link, magic */
                if (m->magic != MOD_MAGIC || m->ctx != ctx)
                        continue;
                l->prev->next = l->next;
                l->next->prev = l->prev;
                l->next = gone.next;
                gone.next = l;
        }
        pthread_mutex_unlock(&objs_lock);
        for (struct obj_link *l = gone.next, *next; l != &gone; l = next) {
                next = l->next;
                module_free((struct CUmod_st *)(void *)l);
        }
}

static CUresult library_new(CUlibrary *library, uint64_t bytes, unsigned numJitOptions, CUjit_option *jitOptions,
                            void **jitOptionsValues, unsigned numLibraryOptions, CUlibraryOption *libraryOptions,
                            void **libraryOptionValues) {
        if (!library || (numJitOptions && (!jitOptions || !jitOptionsValues)) ||
            (numLibraryOptions && (!libraryOptions || !libraryOptionValues)))
                return CUDA_ERROR_INVALID_VALUE;
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        struct CUlib_st *x = calloc(1, sizeof *x);
        if (!x)
                return CUDA_ERROR_OUT_OF_MEMORY;
        int ord;
        unsigned gpu;
        if (sim_cuda_current(&ord, &gpu) == CUDA_SUCCESS) { /* loaded into the current context's device */
                CUresult r = sim_mem_charge(gpu, bytes);
                if (r != CUDA_SUCCESS) {
                        free(x);
                        return r;
                }
                x->charged = true;
                x->gpu = gpu;
                x->bytes = bytes;
        }
        x->magic = LIB_MAGIC;
        obj_add(&x->link);
        *library = x;
        return CUDA_SUCCESS;
}

_public_ CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                    void **jitOptionsValues, unsigned int numJitOptions,
                                    CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                    unsigned int numLibraryOptions) {
        if (!code)
                return CUDA_ERROR_INVALID_VALUE;
        return library_new(library, image_bytes(code, IMAGE_MAX), numJitOptions, jitOptions, jitOptionsValues,
                           numLibraryOptions, libraryOptions, libraryOptionValues);
}

_public_ CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                                        void **jitOptionsValues, unsigned int numJitOptions,
                                        CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                        unsigned int numLibraryOptions) {
        uint64_t bytes;
        if (!fileName)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = file_bytes(fileName, &bytes);
        return r == CUDA_SUCCESS ? library_new(library, bytes, numJitOptions, jitOptions, jitOptionsValues,
                                               numLibraryOptions, libraryOptions, libraryOptionValues)
                                 : r;
}

_public_ CUresult cuLibraryUnload(CUlibrary library) {
        pthread_mutex_lock(&objs_lock);
        bool ok = library && obj_live_locked(&library->link) && library->magic == LIB_MAGIC;
        if (ok) {
                library->link.prev->next = library->link.next;
                library->link.next->prev = library->link.prev;
                library->magic = 0;
        }
        pthread_mutex_unlock(&objs_lock);
        if (!ok)
                return CUDA_ERROR_INVALID_HANDLE;
        if (library->charged)
                sim_mem_uncharge(library->gpu, library->bytes);
        free(library);
        return CUDA_SUCCESS;
}

_public_ CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!hfunc || !name)
                return CUDA_ERROR_INVALID_VALUE;
        if (!hmod || hmod->magic != MOD_MAGIC)
                return CUDA_ERROR_INVALID_HANDLE;
        unsigned us = DEFAULT_BLOCK_US;
        if (startswith(name, "spin_") && parse_uint(name + 5, 10000000, &us) < 0)
                return CUDA_ERROR_NOT_FOUND;
        pthread_mutex_lock(&objs_lock);
        CUresult lr = CUDA_SUCCESS;
        if (hmod->lazy && !hmod->lazy_taken) { /* lazy loading: the code arrives at its first use */
                lr = sim_mem_charge(hmod->gpu, hmod->lazy);
                hmod->lazy_taken = lr == CUDA_SUCCESS;
        }
        pthread_mutex_unlock(&objs_lock);
        if (lr != CUDA_SUCCESS)
                return lr;
        struct CUfunc_st *f = calloc(1, sizeof *f);
        if (!f)
                return CUDA_ERROR_OUT_OF_MEMORY;
        f->magic = FUNC_MAGIC;
        f->block_us = us;
        obj_add(&f->link);
        *hfunc = f;
        return CUDA_SUCCESS;
}

/* ---- streams (all of a process's streams on a GPU share one queue) ---- */

_public_ CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags) {
        (void)Flags;
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!phStream)
                return CUDA_ERROR_INVALID_VALUE;
        int ord;
        unsigned gpu;
        CUresult r = sim_cuda_current(&ord, &gpu);
        if (r != CUDA_SUCCESS)
                return r;
        struct CUstream_st *s = calloc(1, sizeof *s);
        if (!s)
                return CUDA_ERROR_OUT_OF_MEMORY;
        s->magic = STREAM_MAGIC;
        s->ordinal = ord;
        s->gpu = gpu;
        obj_add(&s->link);
        *phStream = s;
        return CUDA_SUCCESS;
}

_public_ CUresult cuStreamDestroy_v2(CUstream hStream) {
        if (!hStream || hStream->magic != STREAM_MAGIC)
                return CUDA_ERROR_INVALID_HANDLE;
        hStream->magic = 0;
        obj_del(&hStream->link);
        free(hStream);
        return CUDA_SUCCESS;
}

/* The device a stream belongs to: a created stream's context's; NULL, CU_STREAM_LEGACY and
 * CU_STREAM_PER_THREAD name the current context's default stream. */
CUresult sim_stream_info(CUstream s, int *ret_ordinal, unsigned *ret_gpu, CUgraph *ret_capture) {
        *ret_capture = NULL;
        if (!is_user_stream(s))
                return sim_cuda_current(ret_ordinal, ret_gpu);
        if (s->magic != STREAM_MAGIC)
                return CUDA_ERROR_INVALID_HANDLE;
        *ret_ordinal = s->ordinal;
        *ret_gpu = s->gpu;
        *ret_capture = s->capture;
        return CUDA_SUCCESS;
}

_public_ CUresult cuStreamGetDevice(CUstream hStream, CUdevice *device) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!device)
                return CUDA_ERROR_INVALID_VALUE;
        int ord;
        unsigned gpu;
        CUgraph cap;
        CUresult r = sim_stream_info(hStream, &ord, &gpu, &cap);
        if (r == CUDA_SUCCESS)
                *device = ord;
        return r;
}

/*
 * Stream capture (CUDA 10.0): between cuStreamBeginCapture and cuStreamEndCapture the work issued into the
 * stream is not run but recorded into a graph — kernels as kernel nodes, cuMemAllocAsync as memory
 * allocation nodes (their addresses handed out at capture, the memory taken from the graph pool when the
 * instantiated graph is launched), cuMemFreeAsync as memory free nodes. The legacy default stream cannot be
 * captured (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); ending a capture that was not begun is
 * CUDA_ERROR_ILLEGAL_STATE. One stream at a time per capture (no cross-stream joins through events).
 */
_public_ CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (mode > CU_STREAM_CAPTURE_MODE_RELAXED)
                return CUDA_ERROR_INVALID_VALUE;
        if (!is_user_stream(hStream))
                return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        if (hStream->magic != STREAM_MAGIC)
                return CUDA_ERROR_INVALID_HANDLE;
        if (hStream->capture)
                return CUDA_ERROR_ILLEGAL_STATE;
        CUgraph gr;
        CUresult r = cuGraphCreate(&gr, 0);
        if (r == CUDA_SUCCESS)
                hStream->capture = gr;
        return r;
}

_public_ CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) {
        if (!phGraph)
                return CUDA_ERROR_INVALID_VALUE;
        if (!is_user_stream(hStream) || hStream->magic != STREAM_MAGIC || !hStream->capture)
                return CUDA_ERROR_ILLEGAL_STATE;
        *phGraph = hStream->capture;
        hStream->capture = NULL;
        return CUDA_SUCCESS;
}

_public_ CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus) {
        if (!captureStatus)
                return CUDA_ERROR_INVALID_VALUE;
        if (is_user_stream(hStream) && hStream->magic != STREAM_MAGIC)
                return CUDA_ERROR_INVALID_HANDLE;
        *captureStatus = is_user_stream(hStream) && hStream->capture ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                                                     : CU_STREAM_CAPTURE_STATUS_NONE;
        return CUDA_SUCCESS;
}

CUresult sim_capture_mem_node(CUgraph gr, CUgraphNodeType type, int ordinal, unsigned gpu, uint64_t bytes,
                              CUdeviceptr *ptr) {
        struct knode k = { .magic = NODE_MAGIC, .type = type, .ptr = *ptr, .bytes = bytes, .ordinal = ordinal };
        if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
                CUresult r = sim_graph_mem_reserve(gpu, bytes, &k.ptr);
                if (r != CUDA_SUCCESS)
                        return r;
        }
        CUresult r = capture_node_locked(gr, &k);
        if (r == CUDA_SUCCESS)
                *ptr = k.ptr;
        return r;
}

static CUresult stream_sync(void) {
        int ord;
        unsigned gpu;
        CUresult r = sim_cuda_current(&ord, &gpu);
        if (r == CUDA_SUCCESS) {
                sim_launch_sync(gpu);
                sim_mem_sync(gpu); /* pools release what exceeds their threshold */
        }
        return r;
}

_public_ CUresult cuStreamSynchronize(CUstream hStream) {
        (void)hStream;
        return stream_sync();
}

_public_ CUresult cuStreamSynchronize_ptsz(CUstream hStream) {
        (void)hStream;
        return stream_sync();
}

/* ---- graphs: kernel nodes run one after another ---- */

_public_ CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags) {
        if (!phGraph || flags)
                return CUDA_ERROR_INVALID_VALUE;
        struct CUgraph_st *g = calloc(1, sizeof *g);
        if (!g)
                return CUDA_ERROR_OUT_OF_MEMORY;
        g->magic = GRAPH_MAGIC;
        obj_add(&g->link);
        *phGraph = g;
        return CUDA_SUCCESS;
}

_public_ CUresult cuGraphDestroy(CUgraph hGraph) {
        if (!hGraph || hGraph->magic != GRAPH_MAGIC)
                return CUDA_ERROR_INVALID_VALUE;
        hGraph->magic = 0;
        obj_del(&hGraph->link);
        free(hGraph);
        return CUDA_SUCCESS;
}

_public_ CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                          size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS *p) {
        (void)dependencies, (void)numDependencies;
        if (!phGraphNode || !hGraph || hGraph->magic != GRAPH_MAGIC || !p || !p->func || p->func->magic != FUNC_MAGIC)
                return CUDA_ERROR_INVALID_VALUE;
        if (hGraph->n == GRAPH_MAX_NODES)
                return CUDA_ERROR_OUT_OF_MEMORY;
        struct knode *k = &hGraph->node[hGraph->n++];
        *k = (struct knode){ .magic = NODE_MAGIC,
                             .type = CU_GRAPH_NODE_TYPE_KERNEL,
                             .f = p->func,
                             .blocks = grid(p->gridDimX, p->gridDimY, p->gridDimZ) };
        *phGraphNode = k;
        return CUDA_SUCCESS;
}

/* Append a node to a graph being captured. */
static CUresult capture_node_locked(CUgraph gr, const struct knode *k) {
        if (!gr || gr->magic != GRAPH_MAGIC)
                return CUDA_ERROR_INVALID_VALUE;
        if (gr->n == GRAPH_MAX_NODES)
                return CUDA_ERROR_OUT_OF_MEMORY;
        gr->node[gr->n++] = *k;
        return CUDA_SUCCESS;
}

/* Graph memory nodes: the allocation comes from the GPU's graph pool at launch (cuda-mem.c). */
_public_ CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                         size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams) {
        (void)dependencies, (void)numDependencies;
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!phGraphNode || !hGraph || hGraph->magic != GRAPH_MAGIC || !nodeParams || nodeParams->bytesize == 0 ||
            nodeParams->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
                return CUDA_ERROR_INVALID_VALUE;
        if (hGraph->n == GRAPH_MAX_NODES)
                return CUDA_ERROR_OUT_OF_MEMORY;
        unsigned gpu;
        CUdeviceptr ptr;
        CUresult r = sim_cuda_gpu_of(nodeParams->poolProps.location.id, &gpu);
        if (r == CUDA_SUCCESS)
                r = sim_graph_mem_reserve(gpu, nodeParams->bytesize, &ptr);
        if (r != CUDA_SUCCESS)
                return r;
        struct knode *k = &hGraph->node[hGraph->n++];
        *k = (struct knode){ .magic = NODE_MAGIC,
                             .type = CU_GRAPH_NODE_TYPE_MEM_ALLOC,
                             .ptr = ptr,
                             .bytes = nodeParams->bytesize,
                             .ordinal = nodeParams->poolProps.location.id };
        nodeParams->dptr = ptr;
        *phGraphNode = k;
        return CUDA_SUCCESS;
}

_public_ CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                        size_t numDependencies, CUdeviceptr dptr) {
        (void)dependencies, (void)numDependencies;
        if (!phGraphNode || !hGraph || hGraph->magic != GRAPH_MAGIC || !dptr)
                return CUDA_ERROR_INVALID_VALUE;
        if (hGraph->n == GRAPH_MAX_NODES)
                return CUDA_ERROR_OUT_OF_MEMORY;
        struct knode *k = &hGraph->node[hGraph->n++];
        *k = (struct knode){ .magic = NODE_MAGIC, .type = CU_GRAPH_NODE_TYPE_MEM_FREE, .ptr = dptr };
        *phGraphNode = k;
        return CUDA_SUCCESS;
}

_public_ CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes) {
        if (!hGraph || hGraph->magic != GRAPH_MAGIC || !numNodes)
                return CUDA_ERROR_INVALID_VALUE;
        if (nodes) {
                for (size_t i = 0; i < *numNodes; i++)
                        nodes[i] = i < hGraph->n ? &hGraph->node[i] : NULL;
        }
        *numNodes = hGraph->n;
        return CUDA_SUCCESS;
}

_public_ CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type) {
        if (!hNode || hNode->magic != NODE_MAGIC || !type)
                return CUDA_ERROR_INVALID_VALUE;
        *type = hNode->type;
        return CUDA_SUCCESS;
}

_public_ CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out) {
        if (!hNode || hNode->magic != NODE_MAGIC || hNode->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC || !params_out)
                return CUDA_ERROR_INVALID_VALUE;
        memset(params_out, 0, sizeof *params_out);
        params_out->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        params_out->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        params_out->poolProps.location.id = hNode->ordinal;
        params_out->bytesize = hNode->bytes;
        params_out->dptr = hNode->ptr;
        return CUDA_SUCCESS;
}

_public_ CUresult cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out) {
        if (!hNode || hNode->magic != NODE_MAGIC || hNode->type != CU_GRAPH_NODE_TYPE_MEM_FREE || !dptr_out)
                return CUDA_ERROR_INVALID_VALUE;
        *dptr_out = hNode->ptr;
        return CUDA_SUCCESS;
}

_public_ CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags) {
        (void)flags;
        if (!phGraphExec || !hGraph || hGraph->magic != GRAPH_MAGIC)
                return CUDA_ERROR_INVALID_VALUE;
        struct CUgraphExec_st *e = calloc(1, sizeof *e);
        if (!e)
                return CUDA_ERROR_OUT_OF_MEMORY;
        e->magic = EXEC_MAGIC;
        e->n = hGraph->n;
        memcpy(e->node, hGraph->node, sizeof e->node);
        obj_add(&e->link);
        *phGraphExec = e;
        return CUDA_SUCCESS;
}

/* The 5-argument forms (CUDA 10.0 and 11.0; since 12.0 "cuGraphInstantiate" names the WithFlags form):
 * nothing goes wrong in a simulated instantiation, so there is never an error node or a log to write. */
_public_ CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                        char *logBuffer, size_t bufferSize) {
        if (phErrorNode)
                *phErrorNode = NULL;
        if (logBuffer && bufferSize)
                logBuffer[0] = '\0';
        return cuGraphInstantiateWithFlags(phGraphExec, hGraph, 0);
}

_public_ CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                     char *logBuffer, size_t bufferSize) {
        return cuGraphInstantiate_v2(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

_public_ CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
        if (!hGraphExec || hGraphExec->magic != EXEC_MAGIC)
                return CUDA_ERROR_INVALID_VALUE;
        hGraphExec->magic = 0;
        obj_del(&hGraphExec->link);
        free(hGraphExec);
        return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec e) {
        if (!sim_cuda_ready())
                return CUDA_ERROR_NOT_INITIALIZED;
        if (!e || e->magic != EXEC_MAGIC)
                return CUDA_ERROR_INVALID_VALUE;
        for (unsigned i = 0; i < e->n; i++) {
                const struct knode *k = &e->node[i];
                CUresult r = k->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC  ? sim_graph_mem_alloc(k->ptr)
                             : k->type == CU_GRAPH_NODE_TYPE_MEM_FREE ? sim_mem_free_other(k->ptr)
                                                                      : launch(k->f, k->blocks, false);
                if (r != CUDA_SUCCESS)
                        return r;
        }
        return CUDA_SUCCESS;
}

_public_ CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
        (void)hStream;
        return graph_launch(hGraphExec);
}

_public_ CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
        (void)hStream;
        return graph_launch(hGraphExec);
}

/* ---- cuGetProcAddress ---- */

static const struct sim_proc_entry launch_procs[] = {
        { "cuLaunchKernel", 4000, false, (void *)cuLaunchKernel },
        { "cuLaunchKernel", 7000, true, (void *)cuLaunchKernel_ptsz },
        { "cuLaunchKernelEx", 11060, false, (void *)cuLaunchKernelEx },
        { "cuLaunchKernelEx", 11060, true, (void *)cuLaunchKernelEx_ptsz },
        { "cuLaunchCooperativeKernel", 9000, false, (void *)cuLaunchCooperativeKernel },
        { "cuLaunchCooperativeKernel", 9000, true, (void *)cuLaunchCooperativeKernel_ptsz },
        { "cuModuleLoad", 2000, false, (void *)cuModuleLoad },
        { "cuModuleLoadData", 2000, false, (void *)cuModuleLoadData },
        { "cuModuleLoadDataEx", 2010, false, (void *)cuModuleLoadDataEx },
        { "cuModuleLoadFatBinary", 2000, false, (void *)cuModuleLoadFatBinary },
        { "cuLibraryLoadData", 12000, false, (void *)cuLibraryLoadData },
        { "cuLibraryLoadFromFile", 12000, false, (void *)cuLibraryLoadFromFile },
        { "cuLibraryUnload", 12000, false, (void *)cuLibraryUnload },
        { "cuModuleUnload", 2000, false, (void *)cuModuleUnload },
        { "cuModuleGetFunction", 2000, false, (void *)cuModuleGetFunction },
        { "cuStreamCreate", 2000, false, (void *)cuStreamCreate },
        { "cuStreamDestroy", 4000, false, (void *)cuStreamDestroy_v2 },
        { "cuStreamGetDevice", 12080, false, (void *)cuStreamGetDevice },
        { "cuStreamBeginCapture", 10010, false, (void *)cuStreamBeginCapture_v2 },
        { "cuStreamEndCapture", 10000, false, (void *)cuStreamEndCapture },
        { "cuStreamIsCapturing", 10000, false, (void *)cuStreamIsCapturing },
        { "cuStreamSynchronize", 2000, false, (void *)cuStreamSynchronize },
        { "cuStreamSynchronize", 7000, true, (void *)cuStreamSynchronize_ptsz },
        { "cuGraphCreate", 10000, false, (void *)cuGraphCreate },
        { "cuGraphDestroy", 10000, false, (void *)cuGraphDestroy },
        { "cuGraphAddKernelNode", 12000, false, (void *)cuGraphAddKernelNode_v2 },
        { "cuGraphInstantiateWithFlags", 11040, false, (void *)cuGraphInstantiateWithFlags },
        { "cuGraphInstantiate", 10000, false, (void *)cuGraphInstantiate },
        { "cuGraphInstantiate", 11000, false, (void *)cuGraphInstantiate_v2 },
        { "cuGraphInstantiate", 12000, false, (void *)cuGraphInstantiateWithFlags }, /* cudaTypedefs.h, 12.0 */
        { "cuGraphExecDestroy", 10000, false, (void *)cuGraphExecDestroy },
        { "cuGraphAddMemAllocNode", 11040, false, (void *)cuGraphAddMemAllocNode },
        { "cuGraphAddMemFreeNode", 11040, false, (void *)cuGraphAddMemFreeNode },
        { "cuGraphGetNodes", 10000, false, (void *)cuGraphGetNodes },
        { "cuGraphNodeGetType", 10000, false, (void *)cuGraphNodeGetType },
        { "cuGraphMemAllocNodeGetParams", 11040, false, (void *)cuGraphMemAllocNodeGetParams },
        { "cuGraphMemFreeNodeGetParams", 11040, false, (void *)cuGraphMemFreeNodeGetParams },
        { "cuGraphLaunch", 10000, false, (void *)cuGraphLaunch },
        { "cuGraphLaunch", 10000, true, (void *)cuGraphLaunch_ptsz },
};

void *sim_cuda_launch_proc(const char *symbol, int version, cuuint64_t flags, bool *ret_named) {
        return sim_proc_lookup(launch_procs, ELEMENTSOF(launch_procs), symbol, version, flags, ret_named);
}
