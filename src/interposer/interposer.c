/* SPDX-License-Identifier: Apache-2.0 */
/*
 * interposer — libgpuslice-cuda.so: the in-container CUDA limiter.
 *
 * How it sits in front of the driver (docs/interposer.md has the why): this library's SONAME is
 * libcuda.so.1 and it is preloaded (LD_PRELOAD), so the dynamic loader hands it out for every request
 * of "libcuda.so.1" — DT_NEEDED of programs linked with -lcuda, and dlopen("libcuda.so.1") by CUDA
 * runtimes — with no dlsym trickery. It exports every driver symbol (hooked ones here, the rest as
 * trampolines in passthrough.c) and loads the real driver by full path, RTLD_LOCAL.
 *
 * What it enforces, from the limits file named by $GPUSLICE_LIMITS: per device, a memory limit shared
 * by every process of the container (region.c), virtualised memory queries, and a compute share
 * (throttle.c). Initialisation is lazy (pthread_once) on the first call of any entry point, including
 * cuGetProcAddress before cuInit. With no $GPUSLICE_LIMITS it is a transparent pass-through; with a
 * broken limits file or region it fails closed (cuInit and every hooked call return an error).
 *
 * Must never: call a NULL pointer, allocate/lock/log/syscall on the fast path of a call when no limit
 * is near, read the environment after init, depend on anything but libc, libdl and libpthread.
 */
#define __CUDA_API_VERSION_INTERNAL 1 /* declares every ABI variant under its own name */
#include <cuda.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "interposer/hooks.h"
#include "interposer/interposer.h"
#include "interposer/limits.h"
#include "interposer/region.h"
#include "interposer/throttle.h"

_Static_assert(GS_TAB_MAX_DEV == GS_MAX_DEVICES, "the allocation table counts per limits device");

#define GS_MAX_ORDINALS 64
#define ELEMENTS(x) (sizeof(x) / sizeof((x)[0]))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- the tables generated from GS_HOOKS ---- */

enum gs_hook {
#define GS_ENUM(sym, base, ver, fl) GS_HOOK_##sym,
        GS_HOOKS(GS_ENUM)
#undef GS_ENUM
                GS_HOOK_COUNT
};

static const struct {
        const char *symbol;
        const char *base;
        int version;
        unsigned flags;
} hook_info[GS_HOOK_COUNT] = {
#define GS_INFO(sym, base, ver, fl) [GS_HOOK_##sym] = { #sym, #base, ver, fl },
        GS_HOOKS(GS_INFO)
#undef GS_INFO
};

/* Typed pointers into the real driver: every hooked variant and the few functions we call ourselves. */
static struct {
#define GS_REAL_MEMBER(sym, base, ver, fl) __typeof__(&sym) sym;
        GS_HOOKS(GS_REAL_MEMBER)
#undef GS_REAL_MEMBER
#define GS_INTERNAL_MEMBER(sym) __typeof__(&sym) sym;
        GS_INTERNAL(GS_INTERNAL_MEMBER)
#undef GS_INTERNAL_MEMBER
} real;

/* The wrappers (defined below, each with the exact prototype of its variant, checked at compile time). */
#define GS_WRAPPER_DECL(sym, base, ver, fl) static __typeof__(sym) gs_w_##sym;
GS_HOOKS(GS_WRAPPER_DECL)
#undef GS_WRAPPER_DECL

static void *const wrappers[GS_HOOK_COUNT] = {
#define GS_WRAPPER_ADDR(sym, base, ver, fl) [GS_HOOK_##sym] = (void *)gs_w_##sym,
        GS_HOOKS(GS_WRAPPER_ADDR)
#undef GS_WRAPPER_ADDR
};

static void *real_ptr(unsigned i) {
        switch (i) {
#define GS_REAL_CASE(sym, base, ver, fl) \
        case GS_HOOK_##sym: return (void *)real.sym;
                GS_HOOKS(GS_REAL_CASE)
#undef GS_REAL_CASE
        }
        return NULL;
}

/* Call the real variant, or fail as the driver would for a missing entry point: never a NULL call. */
#define REAL(sym, ...) (LIKELY(real.sym != NULL) ? real.sym(__VA_ARGS__) : CUDA_ERROR_NOT_FOUND)

/* ---- state ---- */

enum gs_mode {
        GS_MODE_PASS,    /* no limits file: transparent */
        GS_MODE_LIMITED, /* limits loaded, region mapped */
        GS_MODE_FAILED,  /* limits requested but unusable: fail closed */
};

static struct {
        enum gs_mode mode;
        CUresult fail_code;
        void *dl; /* the real driver */
        struct gs_limits limits;
        struct gs_region *region;
        unsigned slot;
        bool any_mem, any_core;
        /* Device map: CUDA ordinal → index into limits.dev, -1 = not limited. Written once, under map_lock. */
        int mapped;
        unsigned n_ordinals;
        int dev_li[GS_MAX_ORDINALS];
        char uuid[GS_MAX_ORDINALS][GS_UUID_MAX];
} g;

/*
 * Depth of wrapper → real driver calls on this thread. A driver may call its own exported entry points
 * (they then resolve to our wrappers, which come first in the global scope): such nested calls go
 * straight to the driver, so nothing is counted or throttled twice. initial-exec: no TLS lookup call.
 */
static __thread unsigned nested __attribute__((tls_model("initial-exec")));
#define GUARD(expr)                                \
        __extension__({                            \
                nested++;                          \
                __typeof__(expr) guard_r_ = (expr); \
                nested--;                          \
                guard_r_;                          \
        })

/* Contexts charged to this process (see "wrappers: contexts"). */
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned primary_refs[GS_MAX_ORDINALS];
static CUcontext primary_ctx[GS_MAX_ORDINALS];
static struct {
        CUcontext ctx;
        int li; /* -1: not charged */
} created[256];

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_done; /* atomic: skips pthread_once on the fast path */
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t gs_now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void complain(const char *fmt, ...) {
        /* Init-time only: a broken setup must say why, once. */
        char buf[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        dprintf(STDERR_FILENO, "gpuslice: %s\n", buf);
}

/* ---- finding and loading the real driver ---- */

static bool same_file_as_self(const struct stat *st) {
        Dl_info info;
        struct stat self;
        if (!dladdr((void *)gs_now_ns, &info) || !info.dli_fname || stat(info.dli_fname, &self) < 0)
                return false;
        return st->st_dev == self.st_dev && st->st_ino == self.st_ino;
}

static bool candidate(const char *dir, size_t dir_len, char *buf, size_t len) {
        if (dir_len == 0 || dir[0] != '/')
                return false;
        int n = snprintf(buf, len, "%.*s/libcuda.so.1", (int)dir_len, dir);
        if (n < 0 || (size_t)n >= len)
                return false;
        struct stat st;
        return stat(buf, &st) == 0 && S_ISREG(st.st_mode) && !same_file_as_self(&st);
}

/* The real libcuda.so.1: $GPUSLICE_REAL_LIBCUDA, else the library path, else the usual driver dirs —
 * skipping this library itself wherever it is linked as libcuda.so.1. */
static int find_real_driver(char *buf, size_t len) {
        const char *e = secure_getenv("GPUSLICE_REAL_LIBCUDA");
        if (e && *e) {
                if (e[0] != '/' || strlen(e) >= len)
                        return -EINVAL;
                memcpy(buf, e, strlen(e) + 1);
                return 0;
        }
        const char *lp = secure_getenv("LD_LIBRARY_PATH");
        while (lp && *lp) {
                const char *colon = strchr(lp, ':');
                size_t n = colon ? (size_t)(colon - lp) : strlen(lp);
                if (candidate(lp, n, buf, len))
                        return 0;
                lp = colon ? colon + 1 : NULL;
        }
        static const char *const dirs[] = {
                "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/lib/x86_64-linux-gnu", "/lib64", "/usr/lib",
                "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/wsl/lib",
        };
        for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
                if (candidate(dirs[i], strlen(dirs[i]), buf, len))
                        return 0;
        return -ENOENT;
}

void *gs_real_symbol(const char *name);

static void resolve_real(void) {
#define GS_RESOLVE(sym, base, ver, fl) real.sym = (__typeof__(real.sym))dlsym(g.dl, #sym);
        GS_HOOKS(GS_RESOLVE)
#undef GS_RESOLVE
#define GS_RESOLVE_INTERNAL(sym) real.sym = (__typeof__(real.sym))dlsym(g.dl, #sym);
        GS_INTERNAL(GS_RESOLVE_INTERNAL)
#undef GS_RESOLVE_INTERNAL
}

/* ---- limits ---- */

static int read_limits(const char *path, struct gs_limits *ret) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                int r = -errno;
                complain("cannot open limits file %s: %s", path, strerror(-r));
                return r;
        }
        char buf[GS_LIMITS_MAX_FILE + 1];
        size_t len = 0;
        for (;;) {
                ssize_t n = read(fd, buf + len, sizeof buf - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        int r = -errno;
                        close(fd);
                        complain("cannot read limits file %s: %s", path, strerror(-r));
                        return r;
                }
                if (n == 0 || (len += (size_t)n) == sizeof buf)
                        break;
        }
        close(fd);
        char err[256];
        int r = gs_limits_parse(buf, len, ret, err, sizeof err);
        if (r < 0)
                complain("limits file %s: %s", path, err);
        return r;
}

static void atfork_child(void) {
        /* A forked child owns none of its parent's allocations and needs its own slot. */
        if (g.mode != GS_MODE_LIMITED)
                return;
        gs_table_reset();
        gs_throttle_atfork_child();
        /* The child has no contexts (CUDA does not survive fork); its new slot starts at zero. */
        memset(primary_refs, 0, sizeof primary_refs);
        memset(primary_ctx, 0, sizeof primary_ctx);
        memset(created, 0, sizeof created);
        pthread_mutex_init(&ctx_lock, NULL);
        unsigned slot;
        if (gs_region_claim(g.region, &slot) < 0) {
                g.mode = GS_MODE_FAILED;
                g.fail_code = CUDA_ERROR_OUT_OF_MEMORY;
                return;
        }
        g.slot = slot;
}

static void init(void) {
        for (unsigned i = 0; i < GS_MAX_ORDINALS; i++)
                g.dev_li[i] = -1;
        char path[PATH_MAX];
        int r = find_real_driver(path, sizeof path);
        if (r == 0) {
                g.dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
                if (!g.dl)
                        complain("cannot load the CUDA driver %s: %s", path, dlerror());
        }
        if (g.dl)
                resolve_real();

        const char *lim = secure_getenv(GS_LIMITS_ENV);
        if (!lim || !*lim) {
                g.mode = GS_MODE_PASS;
                return;
        }
        g.mode = GS_MODE_FAILED;
        g.fail_code = CUDA_ERROR_NOT_INITIALIZED;
        if (!g.dl) {
                complain("no CUDA driver found (set GPUSLICE_REAL_LIBCUDA)");
                g.fail_code = CUDA_ERROR_NO_DEVICE;
                return;
        }
        if (read_limits(lim, &g.limits) < 0)
                return;
        r = gs_region_open(&g.limits, &g.region);
        if (r < 0) {
                complain("cannot use the shared region %s: %s", g.limits.region,
                         r == -EPROTO ? "not a gpuslice region of this version and container" : strerror(-r));
                return;
        }
        if (gs_table_init() < 0) {
                complain("cannot map the allocation table");
                return;
        }
        r = gs_region_claim(g.region, &g.slot);
        if (r < 0) {
                complain("no free process slot in %s", g.limits.region);
                return;
        }
        for (unsigned i = 0; i < g.limits.n_devices; i++) {
                g.any_mem |= g.limits.dev[i].memory_bytes != 0;
                g.any_core |= g.limits.dev[i].core_percent < 100;
        }
        pthread_atfork(NULL, NULL, atfork_child);
        g.mode = GS_MODE_LIMITED;
}

static inline void ensure_init(void) {
        if (UNLIKELY(!__atomic_load_n(&init_done, __ATOMIC_ACQUIRE))) {
                pthread_once(&init_once, init);
                __atomic_store_n(&init_done, 1, __ATOMIC_RELEASE);
        }
}

void *gs_real_symbol(const char *name) {
        ensure_init();
        return g.dl ? dlsym(g.dl, name) : NULL;
}

__attribute__((destructor)) static void fini(void) {
        /* Normal exit: stop counting at once rather than when someone notices we are gone. */
        if (__atomic_load_n(&init_done, __ATOMIC_ACQUIRE) && g.mode == GS_MODE_LIMITED)
                gs_region_release(g.region, g.slot);
}

/* Entry check of every wrapper: initialise, and refuse when failed closed. */
#define ENTER()                                                    \
        do {                                                       \
                ensure_init();                                     \
                if (UNLIKELY(g.mode == GS_MODE_FAILED))            \
                        return g.fail_code;                        \
        } while (0)

/* ---- devices ---- */

static void format_uuid(const CUuuid *u, char *buf, size_t len) {
        const unsigned char *b = (const unsigned char *)u->bytes;
        snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                 b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static void map_devices(void) {
        if (__atomic_load_n(&g.mapped, __ATOMIC_ACQUIRE) || g.mode != GS_MODE_LIMITED)
                return;
        pthread_mutex_lock(&map_lock);
        int count = 0;
        if (!g.mapped && real.cuDeviceGetCount && real.cuDeviceGetCount(&count) == CUDA_SUCCESS) {
                g.n_ordinals = count < 0 ? 0 : count > GS_MAX_ORDINALS ? GS_MAX_ORDINALS : (unsigned)count;
                for (unsigned d = 0; d < g.n_ordinals; d++) {
                        CUuuid u;
                        CUresult r = real.cuDeviceGetUuid_v2 ? real.cuDeviceGetUuid_v2(&u, (CUdevice)d)
                                                             : REAL(cuDeviceGetUuid, &u, (CUdevice)d);
                        if (r == CUDA_SUCCESS)
                                format_uuid(&u, g.uuid[d], sizeof g.uuid[d]);
                        int li = -1;
                        for (unsigned i = 0; i < g.limits.n_devices && li < 0; i++) {
                                const struct gs_limits_device *ld = &g.limits.dev[i];
                                if (ld->uuid[0] ? (g.uuid[d][0] && strcasecmp(ld->uuid, g.uuid[d]) == 0)
                                                : ld->index == d)
                                        li = (int)i;
                        }
                        g.dev_li[d] = li;
                }
                __atomic_store_n(&g.mapped, 1, __ATOMIC_RELEASE);
                if (g.any_core)
                        gs_throttle_setup(g.region, &g.limits, g.dev_li, g.uuid, g.n_ordinals);
        }
        pthread_mutex_unlock(&map_lock);
}

static inline int li_of_ordinal(CUdevice d) {
        if (UNLIKELY(!__atomic_load_n(&g.mapped, __ATOMIC_ACQUIRE)))
                map_devices();
        return d >= 0 && d < GS_MAX_ORDINALS ? g.dev_li[d] : -1;
}

/* Limits index of the calling thread's current device, -1 when not limited (or no context). */
static inline int current_li(void) {
        if (UNLIKELY(!__atomic_load_n(&g.mapped, __ATOMIC_ACQUIRE)))
                map_devices();
        if (LIKELY(g.n_ordinals == 1))
                return g.dev_li[0]; /* one visible GPU: every context is on it */
        CUdevice d;
        if (!real.cuCtxGetDevice || real.cuCtxGetDevice(&d) != CUDA_SUCCESS)
                return -1;
        return d >= 0 && d < GS_MAX_ORDINALS ? g.dev_li[d] : -1;
}

static inline int mem_li(int li) {
        return li >= 0 && g.limits.dev[li].memory_bytes ? li : -1;
}

/* ---- memory accounting ---- */

static inline bool charge(int li, uint64_t bytes) {
        return gs_region_reserve(g.region, g.slot, (unsigned)li, g.limits.dev[li].memory_bytes, bytes) == 0;
}

static inline void refund(int li, uint64_t bytes) {
        gs_region_unreserve(g.region, g.slot, (unsigned)li, bytes);
}

/* The calling thread's current context (what the driver frees an allocation with), 0 if none. */
static inline uint64_t current_ctx(void) {
        CUcontext c = NULL;
        if (!real.cuCtxGetCurrent || real.cuCtxGetCurrent(&c) != CUDA_SUCCESS)
                return 0;
        return (uint64_t)(uintptr_t)c;
}

/* After a successful tracked allocation: remember it, or undo it (table full) with undo(key). VMM handles
 * outlive contexts; everything else goes with the context it was made in. */
static inline CUresult remember(enum gs_table t, uint64_t key, uint64_t bytes, int li) {
        uint64_t ctx = t == GS_TAB_VMM ? 0 : current_ctx();
        if (LIKELY(gs_table_insert(t, key, bytes, (unsigned)li, ctx) == 0))
                return CUDA_SUCCESS;
        refund(li, bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
}

/*
 * The allocation pattern: charge first (so the container's sum never exceeds its limit, even while the
 * driver works), call the driver, refund on failure, remember on success. `key` is evaluated after
 * the call; `undo` releases the fresh allocation when it cannot be remembered.
 */
#define TRACKED_ALLOC(table, li_expr, bytes_expr, call, key, undo)                      \
        do {                                                                            \
                ENTER();                                                                \
                int li_ = g.mode == GS_MODE_LIMITED && !nested ? mem_li(li_expr) : -1;  \
                if (li_ < 0)                                                            \
                        return call;                                                    \
                uint64_t bytes_ = (bytes_expr);                                         \
                if (!charge(li_, bytes_))                                               \
                        return CUDA_ERROR_OUT_OF_MEMORY;                                \
                CUresult r_ = GUARD(call);                                              \
                if (r_ != CUDA_SUCCESS) {                                               \
                        refund(li_, bytes_);                                            \
                        return r_;                                                      \
                }                                                                       \
                r_ = remember(table, (uint64_t)(key), bytes_, li_);                     \
                if (r_ != CUDA_SUCCESS)                                                 \
                        (void)GUARD(undo);                                              \
                return r_;                                                              \
        } while (0)

/* The free pattern: forget first (the key cannot be handed out again until the driver frees it), call
 * the driver, refund on success, remember again on failure. */
#define TRACKED_FREE(table, key_expr, call)                                              \
        do {                                                                             \
                ENTER();                                                                 \
                uint64_t key_ = (uint64_t)(key_expr), bytes_;                            \
                unsigned li_;                                                            \
                if (g.mode != GS_MODE_LIMITED || nested || gs_table_take(table, key_, &bytes_, &li_) < 0) \
                        return call;                                                     \
                CUresult r_ = GUARD(call);                                               \
                if (r_ == CUDA_SUCCESS)                                                  \
                        refund((int)li_, bytes_);                                        \
                else                                                                     \
                        (void)gs_table_insert(table, key_, bytes_, li_, current_ctx());  \
                return r_;                                                               \
        } while (0)

static uint64_t mul_sat(uint64_t a, uint64_t b) {
        uint64_t r;
        return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t format_bytes(CUarray_format f) {
        switch ((int)f) {
        case CU_AD_FORMAT_UNSIGNED_INT8:
        case CU_AD_FORMAT_SIGNED_INT8: return 1;
        case CU_AD_FORMAT_UNSIGNED_INT16:
        case CU_AD_FORMAT_SIGNED_INT16:
        case CU_AD_FORMAT_HALF: return 2;
        default: return 4; /* 32-bit formats, and an upper bound for the packed/compressed ones */
        }
}

static uint64_t array_bytes(uint64_t w, uint64_t h, uint64_t d, uint64_t channels, CUarray_format f) {
        uint64_t b = mul_sat(mul_sat(w ? w : 1, h ? h : 1), d ? d : 1);
        return mul_sat(mul_sat(b, channels ? channels : 1), format_bytes(f));
}

#define PITCH_ALIGN 512u /* the widest pitch alignment drivers use */

/* ---- wrappers: init and cuGetProcAddress ---- */

static CUresult gs_w_cuInit(unsigned int flags) {
        ensure_init();
        if (UNLIKELY(g.mode == GS_MODE_FAILED))
                return g.fail_code;
        if (!g.dl)
                return CUDA_ERROR_NO_DEVICE; /* no driver on this machine, as the driver's absence looks */
        CUresult r = REAL(cuInit, flags);
        if (r == CUDA_SUCCESS && g.mode == GS_MODE_LIMITED)
                map_devices();
        return r;
}

/* Map what the real cuGetProcAddress returned to our wrapper of that exact variant. */
static void *map_proc(const char *symbol, void *fn, int version, cuuint64_t flags) {
        if (!fn)
                return fn;
        for (unsigned i = 0; i < GS_HOOK_COUNT; i++)
                if (real_ptr(i) == fn)
                        return wrappers[i];
        /* A pointer we do not know for a name we hook (a driver handing out internal entry points):
         * pick our variant by the driver's rules — newest at or before `version`, per-thread stream
         * variants when asked — so the call still goes through a wrapper. */
        int best = -1;
        bool ptsz = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
        for (unsigned i = 0; i < GS_HOOK_COUNT; i++) {
                if (strcmp(hook_info[i].base, symbol) != 0 || hook_info[i].version > version)
                        continue;
                bool is_ptsz = hook_info[i].flags & GS_PTSZ;
                if (is_ptsz && !ptsz)
                        continue;
                if (best < 0 || hook_info[i].version > hook_info[best].version ||
                    (hook_info[i].version == hook_info[best].version && is_ptsz))
                        best = (int)i;
        }
        return best >= 0 ? wrappers[best] : fn;
}

static CUresult gs_w_cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult *symbolStatus) {
        ensure_init();
        CUresult r = REAL(cuGetProcAddress_v2, symbol, pfn, cudaVersion, flags, symbolStatus);
        if (r == CUDA_SUCCESS && pfn && symbol)
                *pfn = map_proc(symbol, *pfn, cudaVersion, flags);
        return r;
}

static CUresult gs_w_cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
        ensure_init();
        CUresult r = REAL(cuGetProcAddress, symbol, pfn, cudaVersion, flags);
        if (r == CUDA_SUCCESS && pfn && symbol)
                *pfn = map_proc(symbol, *pfn, cudaVersion, flags);
        return r;
}

/* ---- wrappers: allocations ---- */

static CUresult gs_w_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
        TRACKED_ALLOC(GS_TAB_PTR, current_li(), bytesize, REAL(cuMemAlloc_v2, dptr, bytesize), *dptr,
                      REAL(cuMemFree_v2, *dptr));
}

static CUresult gs_w_cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize) {
        TRACKED_ALLOC(GS_TAB_PTR, current_li(), bytesize, REAL(cuMemAlloc, dptr, bytesize), *dptr,
                      REAL(cuMemFree, *dptr));
}

static CUresult gs_w_cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
        TRACKED_ALLOC(GS_TAB_PTR, current_li(), bytesize, REAL(cuMemAllocManaged, dptr, bytesize, flags), *dptr,
                      REAL(cuMemFree_v2, *dptr));
}

static CUresult gs_w_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
        TRACKED_ALLOC(GS_TAB_PTR, current_li(), bytesize, REAL(cuMemAllocAsync, dptr, bytesize, hStream), *dptr,
                      REAL(cuMemFreeAsync, *dptr, hStream));
}

static CUresult gs_w_cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
        TRACKED_ALLOC(GS_TAB_PTR, current_li(), bytesize, REAL(cuMemAllocAsync_ptsz, dptr, bytesize, hStream),
                      *dptr, REAL(cuMemFreeAsync_ptsz, *dptr, hStream));
}

static CUresult gs_w_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream hStream) {
        TRACKED_ALLOC(GS_TAB_PTR, current_li(), bytesize, REAL(cuMemAllocFromPoolAsync, dptr, bytesize, pool, hStream),
                      *dptr, REAL(cuMemFreeAsync, *dptr, hStream));
}

static CUresult gs_w_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                  CUstream hStream) {
        TRACKED_ALLOC(GS_TAB_PTR, current_li(), bytesize,
                      REAL(cuMemAllocFromPoolAsync_ptsz, dptr, bytesize, pool, hStream), *dptr,
                      REAL(cuMemFreeAsync_ptsz, *dptr, hStream));
}

static CUresult gs_w_cuExternalMemoryGetMappedBuffer(CUdeviceptr *devPtr, CUexternalMemory extMem,
                                                     const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *bufferDesc) {
        TRACKED_ALLOC(GS_TAB_PTR, current_li(), bufferDesc ? bufferDesc->size : 0,
                      REAL(cuExternalMemoryGetMappedBuffer, devPtr, extMem, bufferDesc), *devPtr,
                      REAL(cuMemFree_v2, *devPtr));
}

static int vmm_li(const CUmemAllocationProp *prop) {
        if (!prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
                return -1; /* host memory is not a device limit */
        return li_of_ordinal((CUdevice)prop->location.id);
}

static CUresult gs_w_cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                                 unsigned long long flags) {
        TRACKED_ALLOC(GS_TAB_VMM, vmm_li(prop), size, REAL(cuMemCreate, handle, size, prop, flags), *handle,
                      REAL(cuMemRelease, *handle));
}

static CUresult gs_w_cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d) {
        TRACKED_ALLOC(GS_TAB_ARRAY, current_li(), d ? array_bytes(d->Width, d->Height, 1, d->NumChannels, d->Format) : 0,
                      REAL(cuArrayCreate_v2, pHandle, d), (uintptr_t)*pHandle, REAL(cuArrayDestroy, *pHandle));
}

static CUresult gs_w_cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *d) {
        TRACKED_ALLOC(GS_TAB_ARRAY, current_li(), d ? array_bytes(d->Width, d->Height, 1, d->NumChannels, d->Format) : 0,
                      REAL(cuArrayCreate, pHandle, d), (uintptr_t)*pHandle, REAL(cuArrayDestroy, *pHandle));
}

static CUresult gs_w_cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d) {
        TRACKED_ALLOC(GS_TAB_ARRAY, current_li(),
                      d ? array_bytes(d->Width, d->Height, d->Depth, d->NumChannels, d->Format) : 0,
                      REAL(cuArray3DCreate_v2, pHandle, d), (uintptr_t)*pHandle, REAL(cuArrayDestroy, *pHandle));
}

static CUresult gs_w_cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d) {
        TRACKED_ALLOC(GS_TAB_ARRAY, current_li(),
                      d ? array_bytes(d->Width, d->Height, d->Depth, d->NumChannels, d->Format) : 0,
                      REAL(cuArray3DCreate, pHandle, d), (uintptr_t)*pHandle, REAL(cuArrayDestroy, *pHandle));
}

static uint64_t mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels) {
        if (!d)
                return 0;
        uint64_t sum = 0;
        for (unsigned l = 0; l < (levels ? levels : 1) && l < 64; l++) {
                uint64_t w = d->Width >> l, h = d->Height >> l, z = d->Depth >> l;
                uint64_t b = array_bytes(w ? w : 1, h ? h : 1, z ? z : 1, d->NumChannels, d->Format);
                sum = sum + b < sum ? UINT64_MAX : sum + b;
        }
        return sum;
}

static CUresult gs_w_cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                            unsigned int numMipmapLevels) {
        TRACKED_ALLOC(GS_TAB_ARRAY, current_li(), mipmap_bytes(d, numMipmapLevels),
                      REAL(cuMipmappedArrayCreate, pHandle, d, numMipmapLevels), (uintptr_t)*pHandle,
                      REAL(cuMipmappedArrayDestroy, *pHandle));
}

struct pitch_req {
        bool wide; /* _v2 (size_t) or legacy (unsigned int) */
        void *dptr, *pitch;
        size_t w, h;
        unsigned elem;
};

static CUresult pitch_driver_alloc(const struct pitch_req *q, uint64_t *ret_pitch) {
        CUresult r;
        if (q->wide) {
                r = REAL(cuMemAllocPitch_v2, (CUdeviceptr *)q->dptr, (size_t *)q->pitch, q->w, q->h, q->elem);
                if (r == CUDA_SUCCESS)
                        *ret_pitch = *(size_t *)q->pitch;
        } else {
                r = REAL(cuMemAllocPitch, (CUdeviceptr_v1 *)q->dptr, (unsigned int *)q->pitch, (unsigned int)q->w,
                         (unsigned int)q->h, q->elem);
                if (r == CUDA_SUCCESS)
                        *ret_pitch = *(unsigned int *)q->pitch;
        }
        return r;
}

static uint64_t pitch_key(const struct pitch_req *q) {
        return q->wide ? (uint64_t)*(CUdeviceptr *)q->dptr : (uint64_t)*(CUdeviceptr_v1 *)q->dptr;
}

static void pitch_driver_free(const struct pitch_req *q) {
        if (q->wide)
                (void)REAL(cuMemFree_v2, *(CUdeviceptr *)q->dptr);
        else
                (void)REAL(cuMemFree, *(CUdeviceptr_v1 *)q->dptr);
}

/* The driver picks the pitch: charge the widest it may pick, then settle on what it picked. */
static CUresult pitch_alloc(int li, const struct pitch_req *q) {
        uint64_t h = q->h ? q->h : 1;
        uint64_t wide = q->w > UINT64_MAX - PITCH_ALIGN ? UINT64_MAX : ((uint64_t)q->w + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
        uint64_t est = mul_sat(wide, h);
        if (!charge(li, est))
                return CUDA_ERROR_OUT_OF_MEMORY;
        uint64_t pitch = 0;
        CUresult r = pitch_driver_alloc(q, &pitch);
        if (r != CUDA_SUCCESS) {
                refund(li, est);
                return r;
        }
        uint64_t actual = mul_sat(pitch, h);
        if (actual < est)
                refund(li, est - actual);
        else if (actual > est && !charge(li, actual - est)) {
                refund(li, est);
                pitch_driver_free(q);
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        r = remember(GS_TAB_PTR, pitch_key(q), actual, li);
        if (r != CUDA_SUCCESS)
                pitch_driver_free(q);
        return r;
}

static CUresult gs_w_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                        unsigned int ElementSizeBytes) {
        ENTER();
        int li = g.mode == GS_MODE_LIMITED && !nested ? mem_li(current_li()) : -1;
        if (li < 0 || !dptr || !pPitch)
                return REAL(cuMemAllocPitch_v2, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
        struct pitch_req q = { true, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes };
        return GUARD(pitch_alloc(li, &q));
}

static CUresult gs_w_cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                                     unsigned int Height, unsigned int ElementSizeBytes) {
        ENTER();
        int li = g.mode == GS_MODE_LIMITED && !nested ? mem_li(current_li()) : -1;
        if (li < 0 || !dptr || !pPitch)
                return REAL(cuMemAllocPitch, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
        struct pitch_req q = { false, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes };
        return GUARD(pitch_alloc(li, &q));
}

/* ---- wrappers: frees ---- */

static CUresult gs_w_cuMemFree_v2(CUdeviceptr dptr) {
        TRACKED_FREE(GS_TAB_PTR, dptr, REAL(cuMemFree_v2, dptr));
}

static CUresult gs_w_cuMemFree(CUdeviceptr_v1 dptr) {
        TRACKED_FREE(GS_TAB_PTR, dptr, REAL(cuMemFree, dptr));
}

static CUresult gs_w_cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
        TRACKED_FREE(GS_TAB_PTR, dptr, REAL(cuMemFreeAsync, dptr, hStream));
}

static CUresult gs_w_cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
        TRACKED_FREE(GS_TAB_PTR, dptr, REAL(cuMemFreeAsync_ptsz, dptr, hStream));
}

static CUresult gs_w_cuMemRelease(CUmemGenericAllocationHandle handle) {
        TRACKED_FREE(GS_TAB_VMM, handle, REAL(cuMemRelease, handle));
}

static CUresult gs_w_cuArrayDestroy(CUarray hArray) {
        TRACKED_FREE(GS_TAB_ARRAY, (uintptr_t)hArray, REAL(cuArrayDestroy, hArray));
}

static CUresult gs_w_cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
        TRACKED_FREE(GS_TAB_ARRAY, (uintptr_t)hMipmappedArray, REAL(cuMipmappedArrayDestroy, hMipmappedArray));
}

/* ---- wrappers: contexts ----
 * A context costs device memory the application never asked for (context= in the limits file). The
 * primary context is charged while this process holds it retained, every created context while it lives.
 * Context calls are rare: a process-local mutex is fine here. */


/* The driver destroyed ctx and everything allocated in it: stop counting those bytes. */
static void ctx_gone(CUcontext ctx) {
        if (g.mode != GS_MODE_LIMITED || !ctx)
                return;
        uint64_t bytes[GS_TAB_MAX_DEV] = { 0 };
        gs_table_take_ctx(GS_TAB_PTR, (uint64_t)(uintptr_t)ctx, bytes);
        gs_table_take_ctx(GS_TAB_ARRAY, (uint64_t)(uintptr_t)ctx, bytes);
        for (unsigned li = 0; li < GS_TAB_MAX_DEV; li++)
                if (bytes[li])
                        refund((int)li, bytes[li]);
}

static int ctx_li(CUdevice dev) {
        if (g.mode != GS_MODE_LIMITED || nested)
                return -1;
        int li = mem_li(li_of_ordinal(dev));
        return li >= 0 && g.limits.dev[li].context_bytes ? li : -1;
}

/* A compute share is enforced on dev and this process's host PID is not known yet. */
static bool want_host_pid(CUdevice dev) {
        int li = li_of_ordinal(dev);
        return li >= 0 && g.limits.dev[li].core_percent < 100 &&
               !__atomic_load_n(&g.region->slot[g.slot].host_pid, __ATOMIC_RELAXED);
}

static bool ctx_charge(int li) {
        /* li < 0: the context is not charged */
        return li < 0 || charge(li, g.limits.dev[li].context_bytes);
}

static void ctx_refund(int li) {
        if (li >= 0)
                refund(li, g.limits.dev[li].context_bytes);
}

static CUresult gs_w_cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
        ENTER();
        if (g.mode != GS_MODE_LIMITED || nested || dev < 0 || dev >= GS_MAX_ORDINALS)
                return REAL(cuDevicePrimaryCtxRetain, pctx, dev);
        int li = ctx_li(dev); /* -1: references counted, nothing charged */
        pthread_mutex_lock(&ctx_lock);
        bool first = primary_refs[dev] == 0;
        CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
        if (!first || ctx_charge(li)) {
                struct gs_pidset before = { 0 };
                bool learn = first && want_host_pid(dev);
                if (learn)
                        gs_hostpid_before(g.uuid[dev], &before);
                r = GUARD(REAL(cuDevicePrimaryCtxRetain, pctx, dev));
                if (learn && r == CUDA_SUCCESS)
                        gs_hostpid_after(g.region, g.slot, g.uuid[dev], &before);
                if (r == CUDA_SUCCESS) {
                        primary_refs[dev]++;
                        primary_ctx[dev] = *pctx;
                }
                else if (first)
                        ctx_refund(li);
        }
        pthread_mutex_unlock(&ctx_lock);
        return r;
}

/* After the driver released (or reset: all references at once) device dev's primary context. When the
 * last reference goes, the driver destroys the context with its allocations. */
static void primary_dropped(CUdevice dev, bool all) {
        if (g.mode != GS_MODE_LIMITED || nested || dev < 0 || dev >= GS_MAX_ORDINALS)
                return;
        int li = ctx_li(dev);
        pthread_mutex_lock(&ctx_lock);
        bool gone = false;
        if (primary_refs[dev]) {
                primary_refs[dev] = all ? 0 : primary_refs[dev] - 1;
                gone = !primary_refs[dev];
                if (gone)
                        ctx_refund(li);
        }
        CUcontext c = primary_ctx[dev];
        if (gone)
                primary_ctx[dev] = NULL;
        pthread_mutex_unlock(&ctx_lock);
        if (gone)
                ctx_gone(c);
}

#define PRIMARY_DROP(call, dev, all)                       \
        do {                                               \
                ENTER();                                   \
                CUresult r_ = GUARD(call);                 \
                if (r_ == CUDA_SUCCESS)                    \
                        primary_dropped(dev, all);         \
                return r_;                                 \
        } while (0)

static CUresult gs_w_cuDevicePrimaryCtxRelease(CUdevice dev) {
        PRIMARY_DROP(REAL(cuDevicePrimaryCtxRelease, dev), dev, false);
}

static CUresult gs_w_cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
        PRIMARY_DROP(REAL(cuDevicePrimaryCtxRelease_v2, dev), dev, false);
}

static CUresult gs_w_cuDevicePrimaryCtxReset(CUdevice dev) {
        PRIMARY_DROP(REAL(cuDevicePrimaryCtxReset, dev), dev, true);
}

static CUresult gs_w_cuDevicePrimaryCtxReset_v2(CUdevice dev) {
        PRIMARY_DROP(REAL(cuDevicePrimaryCtxReset_v2, dev), dev, true);
}

/* Charge, create, remember (or refund). The context table is full: created, not charged (documented). */
#define CTX_CREATE(call, pctx, dev)                                                      \
        do {                                                                             \
                ENTER();                                                                 \
                if (g.mode != GS_MODE_LIMITED || nested)                                 \
                        return call;                                                     \
                int li_ = ctx_li(dev);                                                   \
                if (!ctx_charge(li_))                                                    \
                        return CUDA_ERROR_OUT_OF_MEMORY;                                 \
                struct gs_pidset before_ = { 0 };                                        \
                bool learn_ = (dev) >= 0 && (dev) < GS_MAX_ORDINALS && want_host_pid(dev); \
                if (learn_)                                                              \
                        gs_hostpid_before(g.uuid[dev], &before_);                        \
                CUresult r_ = GUARD(call);                                               \
                if (learn_ && r_ == CUDA_SUCCESS)                                        \
                        gs_hostpid_after(g.region, g.slot, g.uuid[dev], &before_);       \
                if (li_ < 0)                                                             \
                        return r_;                                                       \
                if (r_ != CUDA_SUCCESS) {                                                \
                        ctx_refund(li_);                                                 \
                        return r_;                                                       \
                }                                                                        \
                pthread_mutex_lock(&ctx_lock);                                           \
                size_t k_ = 0;                                                           \
                while (k_ < ELEMENTS(created) && created[k_].ctx)                        \
                        k_++;                                                            \
                if (k_ < ELEMENTS(created))                                              \
                        created[k_].ctx = *(pctx), created[k_].li = li_;                 \
                else                                                                     \
                        ctx_refund(li_);                                                 \
                pthread_mutex_unlock(&ctx_lock);                                         \
                return r_;                                                               \
        } while (0)

static CUresult gs_w_cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) {
        CTX_CREATE(REAL(cuCtxCreate, pctx, flags, dev), pctx, dev);
}

static CUresult gs_w_cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
        CTX_CREATE(REAL(cuCtxCreate_v2, pctx, flags, dev), pctx, dev);
}

static CUresult gs_w_cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int numParams, unsigned int flags,
                                    CUdevice dev) {
        CTX_CREATE(REAL(cuCtxCreate_v3, pctx, params, numParams, flags, dev), pctx, dev);
}

static CUresult gs_w_cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev) {
        CTX_CREATE(REAL(cuCtxCreate_v4, pctx, params, flags, dev), pctx, dev);
}

static CUresult ctx_destroy(CUresult (*destroy)(CUcontext), CUcontext ctx) {
        ENTER();
        if (!destroy)
                return CUDA_ERROR_NOT_FOUND;
        if (g.mode != GS_MODE_LIMITED || nested || !ctx)
                return destroy(ctx);
        CUresult r = GUARD(destroy(ctx));
        if (r != CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&ctx_lock);
        for (size_t k = 0; k < ELEMENTS(created); k++)
                if (created[k].ctx == ctx) {
                        ctx_refund(created[k].li);
                        created[k].ctx = NULL;
                        break;
                }
        pthread_mutex_unlock(&ctx_lock);
        ctx_gone(ctx);
        return r;
}

static CUresult gs_w_cuCtxDestroy(CUcontext ctx) {
        return ctx_destroy(real.cuCtxDestroy, ctx);
}

static CUresult gs_w_cuCtxDestroy_v2(CUcontext ctx) {
        return ctx_destroy(real.cuCtxDestroy_v2, ctx);
}

/* ---- wrappers: memory queries ---- */

/* The container's view of a device: total = min(limit, physical), free = min(limit - used, physical free). */
static void virtual_info(int li, uint64_t real_free, uint64_t real_total, uint64_t *ret_free, uint64_t *ret_total) {
        uint64_t limit = g.limits.dev[li].memory_bytes;
        uint64_t total = limit < real_total ? limit : real_total;
        uint64_t used = gs_region_used(g.region, (unsigned)li);
        uint64_t free = used >= total ? 0 : total - used;
        *ret_free = free < real_free ? free : real_free;
        *ret_total = total;
}

static CUresult gs_w_cuMemGetInfo_v2(size_t *free, size_t *total) {
        ENTER();
        if (nested)
                return REAL(cuMemGetInfo_v2, free, total);
        CUresult r = GUARD(REAL(cuMemGetInfo_v2, free, total));
        if (r != CUDA_SUCCESS || g.mode != GS_MODE_LIMITED || !free || !total)
                return r;
        int li = mem_li(current_li());
        if (li < 0)
                return r;
        uint64_t f, t;
        virtual_info(li, *free, *total, &f, &t);
        *free = (size_t)f;
        *total = (size_t)t;
        return r;
}

static CUresult gs_w_cuMemGetInfo(unsigned int *free, unsigned int *total) {
        ENTER();
        if (nested)
                return REAL(cuMemGetInfo, free, total);
        CUresult r = GUARD(REAL(cuMemGetInfo, free, total));
        if (r != CUDA_SUCCESS || g.mode != GS_MODE_LIMITED || !free || !total)
                return r;
        int li = mem_li(current_li());
        if (li < 0)
                return r;
        uint64_t f, t;
        virtual_info(li, *free, *total, &f, &t);
        *free = (unsigned int)(f > UINT_MAX ? UINT_MAX : f);
        *total = (unsigned int)(t > UINT_MAX ? UINT_MAX : t);
        return r;
}

static CUresult gs_w_cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
        ENTER();
        if (nested)
                return REAL(cuDeviceTotalMem_v2, bytes, dev);
        CUresult r = GUARD(REAL(cuDeviceTotalMem_v2, bytes, dev));
        if (r != CUDA_SUCCESS || g.mode != GS_MODE_LIMITED || !bytes)
                return r;
        int li = mem_li(li_of_ordinal(dev));
        if (li >= 0 && g.limits.dev[li].memory_bytes < *bytes)
                *bytes = (size_t)g.limits.dev[li].memory_bytes;
        return r;
}

static CUresult gs_w_cuDeviceTotalMem(unsigned int *bytes, CUdevice dev) {
        ENTER();
        if (nested)
                return REAL(cuDeviceTotalMem, bytes, dev);
        CUresult r = GUARD(REAL(cuDeviceTotalMem, bytes, dev));
        if (r != CUDA_SUCCESS || g.mode != GS_MODE_LIMITED || !bytes)
                return r;
        int li = mem_li(li_of_ordinal(dev));
        if (li >= 0 && g.limits.dev[li].memory_bytes < *bytes)
                *bytes = (unsigned int)g.limits.dev[li].memory_bytes;
        return r;
}

bool gs_memory_view(const char *uuid, uint64_t *ret_limit, uint64_t *ret_used) {
        ensure_init();
        if (g.mode != GS_MODE_LIMITED || !uuid)
                return false;
        int li = -1;
        for (unsigned i = 0; i < g.limits.n_devices && li < 0; i++)
                if (g.limits.dev[i].uuid[0] && strcasecmp(g.limits.dev[i].uuid, uuid) == 0)
                        li = (int)i;
        /* Entries without a UUID: through the CUDA ordinal that has this UUID, once the devices are mapped. */
        if (li < 0 && __atomic_load_n(&g.mapped, __ATOMIC_ACQUIRE))
                for (unsigned d = 0; d < g.n_ordinals && li < 0; d++)
                        if (strcasecmp(g.uuid[d], uuid) == 0)
                                li = g.dev_li[d];
        if (mem_li(li) < 0)
                return false;
        *ret_limit = g.limits.dev[li].memory_bytes;
        *ret_used = gs_region_used(g.region, (unsigned)li);
        return true;
}

/* ---- wrappers: launches ---- */

static inline void before_launch(void) {
        if (LIKELY(!g.any_core) || g.mode != GS_MODE_LIMITED || nested)
                return;
        int li = current_li();
        if (li < 0 || g.limits.dev[li].core_percent >= 100)
                return;
        gs_throttle_launch(g.region, g.slot, (unsigned)li);
}

#define LAUNCH(call)               \
        do {                       \
                ENTER();           \
                before_launch();   \
                return GUARD(call); \
        } while (0)

static CUresult gs_w_cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                    unsigned int by, unsigned int bz, unsigned int shm, CUstream s, void **params,
                                    void **extra) {
        LAUNCH(REAL(cuLaunchKernel, f, gx, gy, gz, bx, by, bz, shm, s, params, extra));
}

static CUresult gs_w_cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                         unsigned int bx, unsigned int by, unsigned int bz, unsigned int shm, CUstream s,
                                         void **params, void **extra) {
        LAUNCH(REAL(cuLaunchKernel_ptsz, f, gx, gy, gz, bx, by, bz, shm, s, params, extra));
}

static CUresult gs_w_cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params, void **extra) {
        LAUNCH(REAL(cuLaunchKernelEx, config, f, params, extra));
}

static CUresult gs_w_cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **params, void **extra) {
        LAUNCH(REAL(cuLaunchKernelEx_ptsz, config, f, params, extra));
}

static CUresult gs_w_cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                               unsigned int bx, unsigned int by, unsigned int bz, unsigned int shm,
                                               CUstream s, void **params) {
        LAUNCH(REAL(cuLaunchCooperativeKernel, f, gx, gy, gz, bx, by, bz, shm, s, params));
}

static CUresult gs_w_cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                                    unsigned int bx, unsigned int by, unsigned int bz,
                                                    unsigned int shm, CUstream s, void **params) {
        LAUNCH(REAL(cuLaunchCooperativeKernel_ptsz, f, gx, gy, gz, bx, by, bz, shm, s, params));
}

static CUresult gs_w_cuGraphLaunch(CUgraphExec hGraph, CUstream hStream) {
        LAUNCH(REAL(cuGraphLaunch, hGraph, hStream));
}

static CUresult gs_w_cuGraphLaunch_ptsz(CUgraphExec hGraph, CUstream hStream) {
        LAUNCH(REAL(cuGraphLaunch_ptsz, hGraph, hStream));
}

static CUresult gs_w_cuLaunch(CUfunction f) {
        LAUNCH(REAL(cuLaunch, f));
}

static CUresult gs_w_cuLaunchGrid(CUfunction f, int grid_width, int grid_height) {
        LAUNCH(REAL(cuLaunchGrid, f, grid_width, grid_height));
}

static CUresult gs_w_cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height, CUstream hStream) {
        LAUNCH(REAL(cuLaunchGridAsync, f, grid_width, grid_height, hStream));
}

/* ---- exports: each wrapper under its driver name, with cuda.h's prototype checked ---- */

#define GS_EXPORT(sym, base, ver, fl)                                                                  \
        _Static_assert(__builtin_types_compatible_p(__typeof__(&gs_w_##sym), __typeof__(&sym)),         \
                       #sym " wrapper must have the driver's prototype");                               \
        extern __typeof__(sym) sym __attribute__((alias("gs_w_" #sym), visibility("default")));
GS_HOOKS(GS_EXPORT)
#undef GS_EXPORT
