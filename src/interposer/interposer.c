/* SPDX-License-Identifier: Apache-2.0 */
/*
 * interposer — libgpuslice-cuda.so: the in-container CUDA limiter. This file: initialisation, finding
 * and loading the real driver, the device map, cuInit and cuGetProcAddress, and the tables generated
 * from hooks.h; the state all files share is struct gs_state g (state.h).
 *
 * How it sits in front of the driver (docs/interposer.md has the why): this library's SONAME is
 * libcuda.so.1 and it is preloaded (/etc/ld.so.preload or LD_PRELOAD) or found by name in the driver's
 * place, so the dynamic loader hands it out for every request of "libcuda.so.1" — DT_NEEDED of programs
 * linked with -lcuda, and dlopen("libcuda.so.1") by CUDA runtimes — with no dlsym trickery. It exports
 * every driver symbol (hooked ones in interposer.c, memory.c, context.c and launch.c, the rest as
 * trampolines in passthrough.c) and loads the real driver by full path, RTLD_LOCAL.
 *
 * What it enforces, from the limits file: per device, a memory limit shared by every process of the
 * container (region.c, memory.c), virtualised memory queries, and a compute share (throttle.c,
 * launch.c); device memory the driver takes without an allocation (context limits, loaded code, pool
 * imports) counts too. Initialisation is lazy (pthread_once) on the first call of any entry point,
 * including cuGetProcAddress before cuInit. Preloaded under its own name with no $GPUSLICE_LIMITS it is
 * a transparent pass-through; loaded as libcuda.so.1 it reads the agent's fixed limits path; a missing,
 * broken or unusable limits file, region or driver makes it fail closed (every CUDA call refused).
 *
 * Must never: call a NULL pointer, allocate/lock/log/syscall on the fast path of a call when no limit
 * is near, read the environment after init, depend on anything but libc, libdl and libpthread.
 */
#include "interposer/state.h" /* first: cuda.h with every variant, the glibc floor */

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "interposer/ldcache.h"
#include "interposer/nvml-view.h"
#include "interposer/throttle.h"

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

static void *const wrappers[GS_HOOK_COUNT] = {
#define GS_WRAPPER_ADDR(sym, base, ver, fl) [GS_HOOK_##sym] = (void *)gs_w_##sym,
        GS_HOOKS(GS_WRAPPER_ADDR)
#undef GS_WRAPPER_ADDR
};

static const struct {
        const char *name;
        int version;
        unsigned hook;
} renames[] = {
#define GS_RENAME(name, ver, sym) { #name, ver, GS_HOOK_##sym },
        GS_PROC_RENAMES(GS_RENAME)
#undef GS_RENAME
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

/* ---- the state (state.h) ---- */

struct gs_state g = {
        .init_once = PTHREAD_ONCE_INIT,
        .map_lock = PTHREAD_MUTEX_INITIALIZER,
        .ctx_lock = PTHREAD_MUTEX_INITIALIZER,
        .settle_lock = PTHREAD_MUTEX_INITIALIZER,
        .vmm_lock = PTHREAD_MUTEX_INITIALIZER,
        .code_lock = PTHREAD_MUTEX_INITIALIZER,
        .slot_lock = PTHREAD_MUTEX_INITIALIZER,
        .unseen_lock = PTHREAD_MUTEX_INITIALIZER,
        .slot = GS_NO_SLOT,
};
struct gs_real real;
__thread unsigned nested;
uintptr_t gs_drv_lo, gs_drv_len;
__thread uint64_t gs_calls, gs_refused_call = UINT64_MAX;

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
        if (!dladdr((void *)gs_now_ns, &info) || !info.dli_fname || gs_stat(info.dli_fname, &self) < 0)
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
        return gs_stat(buf, &st) == 0 && S_ISREG(st.st_mode) && !same_file_as_self(&st);
}

struct cache_pick {
        char *buf;
        size_t len;
};

static int cache_entry(const struct gs_ldcache_entry *e, void *userdata) {
        struct cache_pick *p = userdata;
        const char *slash = strrchr(e->path, '/');
        if (!gs_ldcache_native(e->flags) || strcmp(e->soname, "libcuda.so.1") != 0 || !slash)
                return 0;
        return candidate(e->path, (size_t)(slash - e->path), p->buf, p->len) ? -ECANCELED : 0; /* found: stop */
}

/* The first libcuda.so.1 of the loader's cache (/etc/ld.so.cache, in its order) that is not this library:
 * where the loader finds the driver when no path names it, e.g. CUDA forward-compatibility libraries
 * configured through ld.so.conf.d. */
static bool in_loader_cache(char *buf, size_t len) {
        int fd = open("/etc/ld.so.cache", O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0)
                return false;
        if (gs_fstat(fd, &st) < 0 || st.st_size <= 0 || (uint64_t)st.st_size > GS_LDCACHE_MAX) {
                close(fd);
                return false;
        }
        void *data = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (data == MAP_FAILED)
                return false;
        struct cache_pick pick = { buf, len };
        int r = gs_ldcache_parse(data, (size_t)st.st_size, cache_entry, &pick);
        munmap(data, (size_t)st.st_size);
        return r == -ECANCELED;
}

/* The real libcuda.so.1, in the loader's order: $GPUSLICE_REAL_LIBCUDA, else the library path, else
 * GS_REAL_DRIVER_DIR (where a runtime that mounts this library at the driver's place puts the driver), else
 * the loader's cache, else the usual driver dirs — skipping this library itself wherever it is linked as
 * libcuda.so.1. */
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
        if (candidate(GS_REAL_DRIVER_DIR, strlen(GS_REAL_DRIVER_DIR), buf, len) || in_loader_cache(buf, len))
                return 0;
        static const char *const dirs[] = {
                "/usr/lib/x86_64-linux-gnu",
                "/usr/lib64",
                "/lib/x86_64-linux-gnu",
                "/lib64",
                "/usr/lib",
                "/usr/local/nvidia/lib64",
                "/usr/local/nvidia/lib",
                "/usr/lib/wsl/lib",
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

/* The driver's image: the loaded object whose segments contain one of its entry points (every segment,
 * first to last: code the driver runs lies inside). A caller there is the driver itself (state.h). */
struct image_find {
        uintptr_t addr, lo, hi;
};

static int image_of(struct dl_phdr_info *info, size_t size, void *data) {
        (void)size;
        struct image_find *f = data;
        uintptr_t lo = UINTPTR_MAX, hi = 0;
        for (unsigned i = 0; i < info->dlpi_phnum; i++) {
                const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
                if (ph->p_type != PT_LOAD)
                        continue;
                uintptr_t a = info->dlpi_addr + ph->p_vaddr;
                lo = a < lo ? a : lo;
                hi = a + ph->p_memsz > hi ? a + ph->p_memsz : hi;
        }
        if (lo >= hi || f->addr < lo || f->addr >= hi)
                return 0;
        f->lo = lo;
        f->hi = hi;
        return 1;
}

static void find_driver_image(void) {
        void *entry = dlsym(g.dl, "cuInit");
        struct image_find f = { (uintptr_t)entry, 0, 0 };
        if (entry && gs_dl_iterate_phdr(image_of, &f) == 1) {
                gs_drv_lo = f.lo;
                gs_drv_len = f.hi - f.lo;
        }
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

static void atfork_prepare(void) {
        gs_dl_atfork_prepare();
}

static void atfork_parent(void) {
        gs_dl_atfork_parent();
}

static void atfork_child(void) {
        gs_dl_atfork_child();
        /* A forked child owns none of its parent's allocations; it claims a slot of its own only when it
         * uses CUDA (have_slot), so workers that never do (data loaders) do not fill the region. An init the
         * fork cut short is run again by pthread_once in the child. */
        if (g.mode != GS_MODE_LIMITED) /* set last by gs_init */
                return;
        gs_table_reset();
        gs_throttle_atfork_child();
        /* The child has no contexts (CUDA does not survive fork) and holds nothing. */
        memset(&g.proc, 0, sizeof g.proc);
        /* Every lock of this file and the others: a fork while another thread held one (g.map_lock is held
         * across the driver's calls of the first device mapping) would leave it locked forever. A mapping cut
         * short by the fork is redone (g.mapped is set last); NVML is opened again. */
        pthread_mutex_init(&g.map_lock, NULL);
        gs_view_atfork_child();
        pthread_mutex_init(&g.ctx_lock, NULL);
        pthread_mutex_init(&g.settle_lock, NULL);
        pthread_mutex_init(&g.vmm_lock, NULL);
        pthread_mutex_init(&g.code_lock, NULL);
        pthread_mutex_init(&g.slot_lock, NULL);
        pthread_mutex_init(&g.unseen_lock, NULL);
        __atomic_store_n(&g.slot, GS_NO_SLOT, __ATOMIC_RELEASE);
}

bool gs_claim_slot(void) {
        static bool said;
        if (g.mode != GS_MODE_LIMITED)
                return false;
        gs_lock(&g.slot_lock);
        unsigned slot = __atomic_load_n(&g.slot, __ATOMIC_ACQUIRE);
        if (slot == GS_NO_SLOT && gs_region_claim(g.region, &slot) == 0)
                __atomic_store_n(&g.slot, slot, __ATOMIC_RELEASE);
        else if (slot == GS_NO_SLOT && !said) {
                said = true;
                complain("no free process slot in %s (%u processes of this container use CUDA): this process's "
                         "device memory, contexts and launches are refused",
                         g.limits.region, GS_REGION_SLOTS);
        }
        gs_unlock(&g.slot_lock);
        return slot != GS_NO_SLOT;
}

/* Loaded under the driver's name (libcuda.so.1 / libcuda.so: mounted at the driver's place or first on the
 * library path) rather than preloaded under its own: then it exists only to limit, and runs limited or not
 * at all. */
static bool stands_in_for_driver(void) {
        Dl_info info;
        if (!dladdr((void *)gs_now_ns, &info) || !info.dli_fname)
                return false;
        const char *base = strrchr(info.dli_fname, '/');
        base = base ? base + 1 : info.dli_fname;
        return strcmp(base, "libcuda.so.1") == 0 || strcmp(base, "libcuda.so") == 0;
}

void gs_init(void) {
        for (unsigned i = 0; i < GS_MAX_ORDINALS; i++)
                g.dev_li[i] = -1;
        char path[PATH_MAX];
        int r = find_real_driver(path, sizeof path);
        if (r == 0) {
                g.dl = gs_dlopen(path, RTLD_NOW | RTLD_LOCAL);
                if (!g.dl)
                        complain("cannot load the CUDA driver %s: %s", path, dlerror());
        }
        if (g.dl) {
                resolve_real();
                find_driver_image();
        }

        /* Which limits: $GPUSLICE_LIMITS; else, standing in for the driver, the agent's fixed path (its
         * absence is an error: this library is installed as libcuda.so.1 only to limit); else none. */
        const char *lim = secure_getenv(GS_LIMITS_ENV);
        bool standin = stands_in_for_driver();
        if ((!lim || !*lim) && standin)
                lim = GS_LIMITS_DEFAULT_PATH;
        if (!lim || !*lim) {
                g.mode = GS_MODE_PASS;
                return;
        }
        g.mode = GS_MODE_FAILED;
        g.fail_code = CUDA_ERROR_NOT_INITIALIZED;
        if (!g.dl) {
                complain("no CUDA driver found (set GPUSLICE_REAL_LIBCUDA): every CUDA call fails");
                g.fail_code = CUDA_ERROR_NO_DEVICE;
                return;
        }
        if (read_limits(lim, &g.limits) < 0) {
                complain("CUDA is refused to this process (its limits cannot be read)");
                return;
        }
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
        /* A slot this very process holds belongs to the image it replaced with execve(); this one claims
         * its own when it first needs it (have_slot). */
        gs_region_drop_own(g.region);
        for (unsigned i = 0; i < g.limits.n_devices; i++) {
                g.any_mem |= g.limits.dev[i].memory_bytes != 0;
                g.any_core |= g.limits.dev[i].core_percent < 100;
        }
        g.mode = GS_MODE_LIMITED;
}

/* At load, before any thread can be inside this library's init (the handlers cover the init itself). */
__attribute__((constructor)) static void register_atfork(void) {
        pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

void *gs_real_symbol(const char *name) {
        ensure_init();
        return g.dl && g.mode != GS_MODE_FAILED ? dlsym(g.dl, name) : NULL;
}

int gs_fail_code(void) {
        ensure_init();
        return g.mode == GS_MODE_FAILED ? (int)g.fail_code : (int)CUDA_ERROR_NOT_FOUND;
}

__attribute__((destructor)) static void fini(void) {
        /* Normal exit: stop counting at once rather than when someone notices we are gone. (Keeping the slot
         * while memory is still charged, for the driver's teardown, was tried: in containers with their own PID
         * namespace a later container never reclaimed it — agent-share-podman — so a normal exit releases; a
         * killed process's slot waits for the driver: memory.c, slot_held.) */
        unsigned slot = __atomic_load_n(&g.slot, __ATOMIC_ACQUIRE);
        if (__atomic_load_n(&g.init_done, __ATOMIC_ACQUIRE) && g.mode == GS_MODE_LIMITED && slot != GS_NO_SLOT)
                gs_region_release(g.region, slot);
}

/* ---- devices ---- */

static void format_uuid(const CUuuid *u, char *buf, size_t len) {
        const unsigned char *b = (const unsigned char *)u->bytes;
        snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
                 b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

void gs_map_devices(void) {
        if (__atomic_load_n(&g.mapped, __ATOMIC_ACQUIRE) || g.mode != GS_MODE_LIMITED)
                return;
        gs_lock(&g.map_lock);
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
                                if (ld->uuid[0] ? gs_uuid_equal(ld->uuid, g.uuid[d]) : ld->index == d)
                                        li = (int)i;
                        }
                        g.dev_li[d] = li;
                }
                __atomic_store_n(&g.mapped, 1, __ATOMIC_RELEASE);
                if (g.any_core)
                        gs_throttle_setup(g.region, &g.limits, g.dev_li, g.uuid, g.n_ordinals);
        }
        gs_unlock(&g.map_lock);
}

/* ---- wrappers: init and cuGetProcAddress ---- */

CUresult gs_w_cuInit(unsigned int flags) {
        ensure_init();
        if (UNLIKELY(g.mode == GS_MODE_FAILED))
                return g.fail_code;
        if (!g.dl)
                return CUDA_ERROR_NO_DEVICE; /* no driver on this machine, as the driver's absence looks */
        CUresult r = REAL(cuInit, flags);
        if (r == CUDA_SUCCESS && g.mode == GS_MODE_LIMITED)
                gs_map_devices();
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
         * pick our variant by the driver's rules — newest at or before `version` (counting the names that
         * became another entry point, GS_PROC_RENAMES), per-thread stream variants when asked — so the
         * call still goes through a wrapper of the right prototype. */
        int best = -1, best_version = -1;
        bool ptsz = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
        for (unsigned i = 0; i < GS_HOOK_COUNT; i++) {
                if (strcmp(hook_info[i].base, symbol) != 0 || hook_info[i].version > version)
                        continue;
                bool is_ptsz = hook_info[i].flags & GS_PTSZ;
                if (is_ptsz && !ptsz)
                        continue;
                if (best < 0 || hook_info[i].version > best_version ||
                    (hook_info[i].version == best_version && is_ptsz))
                        best = (int)i, best_version = hook_info[i].version;
        }
        for (unsigned k = 0; k < ELEMENTS(renames); k++)
                if (strcmp(renames[k].name, symbol) == 0 && renames[k].version <= version &&
                    renames[k].version > best_version)
                        best = (int)renames[k].hook, best_version = renames[k].version;
        return best >= 0 ? wrappers[best] : fn;
}

CUresult gs_w_cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                  CUdriverProcAddressQueryResult *symbolStatus) {
        ENTER(); /* failed closed: no entry point at all (an unhooked one would bypass the refusal) */
        CUresult r = REAL(cuGetProcAddress_v2, symbol, pfn, cudaVersion, flags, symbolStatus);
        if (r == CUDA_SUCCESS && pfn && symbol)
                *pfn = map_proc(symbol, *pfn, cudaVersion, flags);
        return r;
}

CUresult gs_w_cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
        ENTER();
        CUresult r = REAL(cuGetProcAddress, symbol, pfn, cudaVersion, flags);
        if (r == CUDA_SUCCESS && pfn && symbol)
                *pfn = map_proc(symbol, *pfn, cudaVersion, flags);
        return r;
}

/* ---- exports ---- */

GS_HOOKS_INIT(GS_EXPORT)
