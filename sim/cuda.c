/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cuda — the simulated libcuda.so.1: a minimal CUDA driver API (devices, primary and created
 * contexts, device memory, error texts, cuGetProcAddress with its versioned variants) with the
 * real prototypes (src/interposer/cuda-abi.h, checked against cuda.h where present). Device memory is bookkeeping only (no bytes behind the pointers):
 * every allocation is charged to the calling process on its GPU in the shared node state, so it
 * shows up in the simulated NVML's process list and counts against the GPU's capacity for every
 * process of the node.
 *
 * It must never export anything but the CUDA API (cuda.map), never hand out a pointer that
 * another allocation of this process also covers, and never leave memory charged to a process
 * that is gone (freed on cuMemFree, context destruction, exit; pruned when the PID dies).
 */
#include "interposer/cuda-abi.h" /* the driver API as gpuslice declares it: no CUDA toolkit needed */

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim/cuda-errors.h"
#include "sim/cuda-sim.h"
#include "sim/mps.h"
#include "sim/sim.h"
#include "util/util.h"

#define CTX_MAGIC 0x43545853u        /* "SXTC" */
#define VA_BASE 0x100000000000ULL    /* 16 TiB */
#define VA_PER_GPU (1ULL << 41)      /* 2 TiB of address space per GPU */
#define VA_LEGACY_BASE 0x10000000ULL /* 32-bit pointers for the legacy API */
#define VA_LEGACY_END 0xF0000000ULL
#define ALLOC_ALIGN 512ULL
#define SIM_MAX_PEERS 8 /* peers one context may access at once (CUDA_ERROR_TOO_MANY_PEERS beyond) */

struct CUctx_st {
        uint32_t magic;
        int ordinal; /* CUDA device ordinal */
        bool primary;
        bool active;                          /* a primary context is active while retained */
        unsigned refs;                        /* primary: retain count */
        size_t limit[CU_LIMIT_MAX];           /* cuCtxSetLimit values; 0 = the default (ctx_limit_default) */
        uint64_t limit_bytes;                 /* device memory the limits take beyond their defaults (charged) */
        uint64_t own_bytes;                   /* what the context itself takes (the node's `cuda context=`, charged) */
        struct CUctx_st *peer[SIM_MAX_PEERS]; /* contexts this one has peer access to (cuCtxEnablePeerAccess) */
        struct CUctx_st *next;                /* created contexts list */
};

struct alloc {
        CUdeviceptr ptr;
        uint64_t size;
        unsigned gpu;
        CUcontext ctx;
};

static struct sim_forksafe_lock lock = SIM_FORKSAFE_LOCK_INIT; /* the process's driver state */
static bool init_done;
static CUresult init_result = CUDA_ERROR_NOT_INITIALIZED;
static struct topo node;
static char node_path[PATH_MAX];
static struct sim_state *state;
static struct sim_identity self;
static unsigned n_visible;
static unsigned visible[TOPO_MAX_GPUS]; /* CUDA ordinal → node GPU index */
/* The MIG device a CUDA ordinal is (gi SIM_NO_INSTANCE: the whole GPU); a process sees at most one. */
static struct {
        uint32_t gi, ci;
        unsigned sms;
        uint64_t memory;
        char uuid[96], name[160];
} visible_mig[TOPO_MAX_GPUS];
static struct CUctx_st primary[TOPO_MAX_GPUS];
static struct CUctx_st *created;
static struct alloc *allocs;
static size_t n_allocs, cap_allocs;
static uint64_t va_next[TOPO_MAX_GPUS];
static uint64_t va_legacy_next = VA_LEGACY_BASE;
static __thread CUcontext current;

/* ---- init ---- */

static bool ready(void) {
        return __atomic_load_n(&init_done, __ATOMIC_ACQUIRE) && init_result == CUDA_SUCCESS;
}

/* The MIG device `want` (a MIG UUID, or NULL: the first MIG device of GPU gpu, by index) as the next
 * CUDA ordinal; false when there is none. State lock taken here. */
static bool add_mig_device(unsigned gpu, const char *want) {
        const struct sim_mig_model *m = sim_mig_model(&node.gpu[gpu]);
        if (!m || sim_state_lock(state) < 0)
                return false;
        struct sim_mig_gpu *g = &state->mig[gpu];
        const struct sim_mig_gi *best_gi = NULL;
        const struct sim_mig_ci *best = NULL;
        char uuid[96];
        for (unsigned i = 0; g->current == SIM_MIG_ENABLED && i < SIM_MIG_MAX_GI; i++)
                for (unsigned j = 0; g->gi[i].used && j < SIM_MIG_MAX_CI; j++) {
                        const struct sim_mig_ci *c = &g->gi[i].ci[j];
                        if (!c->used)
                                continue;
                        sim_mig_uuid(node.gpu[gpu].uuid, c->serial, uuid, sizeof uuid);
                        if (want ? startswith(uuid, want) : !best || c->index < best->index) {
                                best = c;
                                best_gi = &g->gi[i];
                        }
                }
        bool found = best != NULL;
        if (found) {
                unsigned k = n_visible++;
                struct sim_mig_ci_shape sh = { 0 };
                const struct sim_mig_profile *p = sim_mig_profile(m, best_gi->profile);
                sim_mig_ci_shape(m, best_gi, best->profile, &sh);
                visible[k] = gpu;
                visible_mig[k].gi = best_gi->id;
                visible_mig[k].ci = best->id;
                visible_mig[k].sms = sh.sms;
                visible_mig[k].memory = p ? (uint64_t)p->memory_mib << 20 : 0;
                sim_mig_uuid(node.gpu[gpu].uuid, best->serial, visible_mig[k].uuid, sizeof visible_mig[k].uuid);
                char profile[48];
                sim_mig_device_name(m, best_gi, best, profile, sizeof profile);
                snprintf(visible_mig[k].name, sizeof visible_mig[k].name, "%s MIG %s", node.gpu[gpu].name, profile);
        }
        sim_state_unlock(state);
        return found;
}

static bool mig_on(unsigned gpu) {
        return state->mig[gpu].current == SIM_MIG_ENABLED;
}

/* CUDA_VISIBLE_DEVICES: indices, GPU UUIDs or MIG UUIDs (a unique prefix will do), comma-separated; the
 * list ends at the first entry that names no device or repeats one, as with the real driver. A GPU with
 * MIG on is no CUDA device itself; a process enumerates at most one MIG device (the first named, or
 * without CUDA_VISIBLE_DEVICES the lowest-indexed of the first GPU with one). */
static void parse_visible(void) {
        const char *env = secure_getenv("CUDA_VISIBLE_DEVICES");
        n_visible = 0;
        for (unsigned k = 0; k < TOPO_MAX_GPUS; k++)
                visible_mig[k].gi = visible_mig[k].ci = SIM_NO_INSTANCE;
        bool have_mig = false;
        if (!env) {
                for (unsigned i = 0; i < node.n_gpus; i++) {
                        if (!mig_on(i))
                                visible[n_visible++] = i;
                        else if (!have_mig)
                                have_mig = add_mig_device(i, NULL);
                }
                return;
        }
        char buf[1024];
        strscpy(buf, env, sizeof buf);
        char *save = NULL;
        for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                while (*tok == ' ')
                        tok++;
                int found = -1;
                unsigned idx;
                if (startswith(tok, "MIG-")) {
                        bool added = false;
                        for (unsigned i = 0; i < node.n_gpus && !have_mig && !added; i++)
                                added = add_mig_device(i, tok);
                        if (!added)
                                return;
                        have_mig = true;
                        continue;
                }
                if (parse_uint(tok, TOPO_MAX_GPUS - 1, &idx) == 0) {
                        if (idx < node.n_gpus)
                                found = (int)idx;
                } else if (startswith(tok, "GPU-")) {
                        for (unsigned i = 0; i < node.n_gpus; i++)
                                if (startswith(node.gpu[i].uuid, tok)) {
                                        if (found >= 0) {
                                                found = -1; /* ambiguous prefix */
                                                break;
                                        }
                                        found = (int)i;
                                }
                }
                if (found < 0 || mig_on((unsigned)found))
                        return;
                for (unsigned k = 0; k < n_visible; k++)
                        if (visible[k] == (unsigned)found && visible_mig[k].gi == SIM_NO_INSTANCE)
                                return;
                visible[n_visible++] = (unsigned)found;
        }
}

static CUresult init_locked(void) {
        const char *env = secure_getenv(SIM_ENV_NODE);
        if (!env || !*env)
                return CUDA_ERROR_NO_DEVICE;
        char err[512];
        int r = sim_node_load(&node, node_path, sizeof node_path, err, sizeof err);
        if (r < 0) {
                fprintf(stderr, "gpuslice-sim: %s\n", err);
                return CUDA_ERROR_NO_DEVICE;
        }
        r = sim_state_open(&node, node_path, &state, err, sizeof err);
        if (r < 0) {
                fprintf(stderr, "gpuslice-sim: %s\n", err);
                return CUDA_ERROR_SYSTEM_DRIVER_MISMATCH;
        }
        sim_self_identity(&self);
        for (unsigned i = 0; i < TOPO_MAX_GPUS; i++)
                va_next[i] = VA_BASE + i * VA_PER_GPU;
        parse_visible();
        return n_visible ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

/* After fork the child is a new process with none of the parent's contexts or memory. */
static void atfork_prepare(void) {
        sim_forksafe_lock(&lock);
}
static void atfork_parent(void) {
        sim_forksafe_unlock(&lock);
}
static void atfork_child(void) {
        memset(primary, 0, sizeof primary);
        created = NULL; /* the parent's, not ours to free */
        n_allocs = 0;
        current = NULL;
        if (state)
                sim_self_identity(&self);
        sim_forksafe_own(&lock, true); /* held by the parent's forking thread (atfork_prepare) */
}

/* Registered when the library is loaded, not at cuInit: a fork while another thread is inside cuInit (the
 * lock held across the node's and the state's set-up) must wait for it, as the driver's own fork handlers
 * make it, rather than leave the child a lock nobody will release. */
__attribute__((constructor)) static void sim_cuda_atfork(void) {
        sim_forksafe_own(&lock, false);
        pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

_public_ CUresult cuInit(unsigned int Flags) {
        if (Flags != 0)
                return CUDA_ERROR_INVALID_VALUE;
        sim_forksafe_lock(&lock);
        if (!init_done) {
                init_result = init_locked();
                __atomic_store_n(&init_done, true, __ATOMIC_RELEASE);
        }
        CUresult r = init_result;
        sim_forksafe_unlock(&lock);
        return r; /* like the driver, a failed cuInit stays failed for the process */
}

/* Drop this process's entries at exit: its memory is gone with it — unless the node's driver tears an exited
 * process down for a while (`cuda teardown-ms=`): then they stay, memory held, until pruned that long after. */
__attribute__((destructor)) static void sim_cuda_fini(void) {
        if (node.cuda_teardown_ms)
                return;
        if (!ready() || !state || self.ns_pid != (uint32_t)getpid())
                return;
        if (sim_state_lock(state) < 0)
                return;
        for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
                struct sim_proc *p = &state->proc[i];
                if (p->pid == self.pid && (p->flags & SIM_PROC_CUDA))
                        memset(p, 0, sizeof *p);
        }
        sim_state_unlock(state);
}

_public_ CUresult cuDriverGetVersion(int *driverVersion) {
        if (!driverVersion)
                return CUDA_ERROR_INVALID_VALUE;
        /* Answers before cuInit too: the node's CUDA version once known, else this header's. */
        *driverVersion = ready() && node.cuda_version ? node.cuda_version : CUDA_VERSION;
        return CUDA_SUCCESS;
}

/* ---- devices ---- */

#define CHECK_INIT()                                       \
        do {                                               \
                if (!ready())                              \
                        return CUDA_ERROR_NOT_INITIALIZED; \
        } while (0)

/* The start of a query about one device: initialised, the out-parameter OUT given, DEV visible. */
#define CHECK_DEVICE_QUERY(out, dev)                      \
        do {                                              \
                CHECK_INIT();                             \
                if (!(out))                               \
                        return CUDA_ERROR_INVALID_VALUE;  \
                if (!dev_valid(dev))                      \
                        return CUDA_ERROR_INVALID_DEVICE; \
        } while (0)

static const struct topo_gpu *gpu_of(CUdevice dev) {
        return &node.gpu[visible[dev]];
}

static bool dev_valid(CUdevice dev) {
        return dev >= 0 && (unsigned)dev < n_visible;
}

static bool dev_is_mig(CUdevice dev) {
        return visible_mig[dev].gi != SIM_NO_INSTANCE;
}

/* SMs of a CUDA device: the GPU's, or its MIG device's compute instance's. */
static int dev_sms(CUdevice dev) {
        return dev_is_mig(dev) ? (int)visible_mig[dev].sms : gpu_of(dev)->sm_count;
}

uint32_t sim_cuda_instance(unsigned gpu) {
        for (unsigned k = 0; k < n_visible; k++)
                if (visible[k] == gpu && dev_is_mig((CUdevice)k))
                        return visible_mig[k].gi;
        return SIM_NO_INSTANCE;
}

void sim_cuda_tag_locked(struct sim_proc *p, unsigned gpu) {
        p->flags |= SIM_PROC_CUDA;
        p->down_ms = node.cuda_teardown_ms;
        p->ns_pid = self.ns_pid;
        p->pidns = self.pidns;
        for (unsigned k = 0; k < n_visible; k++)
                if (visible[k] == gpu && dev_is_mig((CUdevice)k)) {
                        p->gi = visible_mig[k].gi;
                        p->ci = visible_mig[k].ci;
                }
}

_public_ CUresult cuDeviceGetCount(int *count) {
        CHECK_INIT();
        if (!count)
                return CUDA_ERROR_INVALID_VALUE;
        *count = (int)n_visible;
        return CUDA_SUCCESS;
}

_public_ CUresult cuDeviceGet(CUdevice *device, int ordinal) {
        CHECK_DEVICE_QUERY(device, ordinal);
        *device = ordinal;
        return CUDA_SUCCESS;
}

_public_ CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
        CHECK_INIT();
        if (!name || len <= 0)
                return CUDA_ERROR_INVALID_VALUE;
        if (!dev_valid(dev))
                return CUDA_ERROR_INVALID_DEVICE;
        strscpy(name, dev_is_mig(dev) ? visible_mig[dev].name : gpu_of(dev)->name, (size_t)len); /* truncated */
        return CUDA_SUCCESS;
}

static CUresult uuid_of(CUuuid *uuid, CUdevice dev) {
        CHECK_DEVICE_QUERY(uuid, dev);
        memset(uuid, 0, sizeof *uuid);
        const char *s = dev_is_mig(dev) ? visible_mig[dev].uuid : gpu_of(dev)->uuid;
        if (startswith(s, "GPU-") || startswith(s, "MIG-"))
                s += 4;
        unsigned n = 0;
        for (; *s && n < 32; s++) {
                int v = hex_digit(*s);
                if (v < 0)
                        continue; /* dashes */
                uuid->bytes[n / 2] = (char)(uuid->bytes[n / 2] | (n % 2 ? v : v << 4));
                n++;
        }
        return CUDA_SUCCESS;
}

_public_ CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
        return uuid_of(uuid, dev);
}

_public_ CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
        return uuid_of(uuid, dev);
}

_public_ CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
        CHECK_DEVICE_QUERY(bytes, dev);
        *bytes = dev_is_mig(dev) ? visible_mig[dev].memory : gpu_of(dev)->memory_total;
        uint64_t mps = dev_is_mig(dev) ? 0 : sim_mps_client_limit(visible[dev]); /* an MPS client: its pinned limit */
        if (mps && mps < *bytes)
                *bytes = (size_t)mps;
        return CUDA_SUCCESS;
}

_public_ CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev) {
        size_t b;
        if (!bytes)
                return CUDA_ERROR_INVALID_VALUE;
        CUresult r = cuDeviceTotalMem_v2(&b, dev);
        if (r == CUDA_SUCCESS)
                *bytes = (unsigned)MIN(b, (size_t)UINT_MAX);
        return r;
}

static unsigned bus_part(const char *bus_id, int which) {
        unsigned d = 0, b = 0, dev = 0, fn = 0;
        if (sscanf(bus_id, "%x:%x:%x.%x", &d, &b, &dev, &fn) != 4)
                return 0;
        return which == 0 ? d : which == 1 ? b : dev;
}

/* lint: long — a table written as a switch: one case per CUdevice_attribute the simulator models (the values a
 * real device of its kind reports); split up, the table would no longer read as one. */
_public_ CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
        CHECK_INIT();
        if (!pi || attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
                return CUDA_ERROR_INVALID_VALUE;
        if (!dev_valid(dev))
                return CUDA_ERROR_INVALID_DEVICE;
        const struct topo_gpu *g = gpu_of(dev);
        int v;
        switch (attrib) {
                case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = dev_sms(dev); break;
                case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = g->cc_major; break;
                case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = g->cc_minor; break;
                case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: v = (int)bus_part(g->bus_id, 0); break;
                case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: v = (int)bus_part(g->bus_id, 1); break;
                case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: v = (int)bus_part(g->bus_id, 2); break;
                case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = 1024; break;
                case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: v = 1024; break;
                case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: v = 1024; break;
                case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: v = 64; break;
                case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: v = INT_MAX; break;
                case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: v = 65535; break;
                case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: v = 65535; break;
                case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
                case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: v = 48 * 1024; break;
                case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: v = 64 * 1024; break;
                case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: v = 65536; break;
                case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: v = SIM_THREADS_PER_SM; break;
                case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: v = 1410000; break;
                case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: v = 1215000; break;
                case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: v = 4096; break;
                case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: v = 40 * 1024 * 1024; break;
                case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: v = 2; break;
                case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
                        v = dev_is_mig(dev)
                                    ? CU_COMPUTEMODE_DEFAULT
                                    : (int)__atomic_load_n(&state->gpu[visible[dev]].compute_mode, __ATOMIC_ACQUIRE);
                        break;
                case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
                case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
                case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
                case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
                case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: v = 1; break;
                default: v = 0; break; /* a valid attribute the simulator does not model */
        }
        *pi = v;
        return CUDA_SUCCESS;
}

/* ---- contexts ---- */

static bool ctx_known_locked(CUcontext c) {
        if (!c)
                return false;
        uintptr_t p = (uintptr_t)c, lo = (uintptr_t)primary, hi = (uintptr_t)(primary + TOPO_MAX_GPUS);
        if (p >= lo && p < hi)
                return (p - lo) % sizeof primary[0] == 0;
        for (struct CUctx_st *x = created; x; x = x->next)
                if (x == c)
                        return true;
        return false;
}

/* CUDA_SUCCESS when c can be used; lock held. */
static CUresult ctx_check_locked(CUcontext c) {
        if (!ctx_known_locked(c) || c->magic != CTX_MAGIC)
                return CUDA_ERROR_INVALID_CONTEXT;
        if (!c->active)
                return CUDA_ERROR_CONTEXT_IS_DESTROYED;
        return CUDA_SUCCESS;
}

/* Whether gpu's compute mode (nvmlDeviceSetComputeMode, in the shared state) lets this process make a context there
 * (mps: it is an MPS client); state lock held. PROHIBITED: no context. EXCLUSIVE_PROCESS: one process's contexts
 * only — whoever holds one keeps the others out; MPS clients all reach the GPU through the one MPS server, so a client
 * joins other clients, never a process that is no client (nor the reverse). A MIG device is not ruled here. */
static CUresult compute_mode_allows_locked(unsigned gpu, bool mps) {
        uint32_t mode = __atomic_load_n(&state->gpu[gpu].compute_mode, __ATOMIC_ACQUIRE);
        if (mode == CU_COMPUTEMODE_PROHIBITED)
                return CUDA_ERROR_DEVICE_UNAVAILABLE;
        if (mode != CU_COMPUTEMODE_EXCLUSIVE_PROCESS)
                return CUDA_SUCCESS;
        sim_state_prune_locked(state);
        for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
                const struct sim_proc *p = &state->proc[i];
                if (p->pid && p->pid != self.pid && p->gpu == gpu && (p->flags & SIM_PROC_CUDA) && !p->dead_us &&
                    !(mps && (p->flags & SIM_PROC_MPS)))
                        return CUDA_ERROR_DEVICE_UNAVAILABLE;
        }
        return CUDA_SUCCESS;
}

/* Record in the node state that this process uses device dev's GPU (an entry, possibly with 0 bytes), when its
 * compute mode lets it. */
static CUresult proc_register(CUdevice dev) {
        unsigned gpu = visible[dev];
        bool mps = !dev_is_mig(dev) && sim_mps_client(); /* before the lock: it reads the pipe dir */
        if (sim_state_lock(state) < 0)
                return CUDA_ERROR_UNKNOWN;
        CUresult r = dev_is_mig(dev) ? CUDA_SUCCESS : compute_mode_allows_locked(gpu, mps);
        struct sim_proc *p = NULL;
        if (r == CUDA_SUCCESS && sim_proc_get_locked(state, self.pid, gpu, &p) < 0)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        if (r == CUDA_SUCCESS) {
                sim_cuda_tag_locked(p, gpu);
                p->flags |= mps ? SIM_PROC_MPS : 0;
        }
        sim_state_unlock(state);
        return r;
}

/* A new context takes what the node says one takes on that GPU (its `context=`, else `cuda context=SIZE`, 0
 * when unsaid), as a real driver takes its context's memory: charged to the process, seen by NVML per process;
 * lock held. */
static CUresult ctx_take_own_locked(CUcontext ctx, unsigned gpu) {
        uint64_t own = gpu < node.n_gpus ? node.gpu[gpu].context_bytes : 0;
        CUresult r = own ? sim_mem_charge(gpu, own) : CUDA_SUCCESS;
        if (r == CUDA_SUCCESS)
                ctx->own_bytes = own;
        return r;
}

/* Free every allocation of ctx, the memory its limits take, its modules and its own memory; lock held. */
static void ctx_free_allocs_locked(CUcontext ctx) {
        sim_launch_ctx_gone(ctx);
        sim_mem_ctx_gone(ctx);
        if (ctx->own_bytes)
                sim_mem_uncharge(visible[ctx->ordinal], ctx->own_bytes);
        ctx->own_bytes = 0;
        if (ctx->limit_bytes)
                sim_mem_uncharge(visible[ctx->ordinal], ctx->limit_bytes);
        ctx->limit_bytes = 0;
        memset(ctx->limit, 0, sizeof ctx->limit);
        uint64_t freed[TOPO_MAX_GPUS] = { 0 };
        size_t w = 0;
        for (size_t i = 0; i < n_allocs; i++) {
                if (allocs[i].ctx == ctx)
                        freed[allocs[i].gpu] += allocs[i].size;
                else
                        allocs[w++] = allocs[i];
        }
        n_allocs = w;
        if (sim_state_lock(state) < 0)
                return;
        for (unsigned g = 0; g < TOPO_MAX_GPUS; g++) {
                if (!freed[g])
                        continue;
                struct sim_proc *p = sim_proc_find_locked(state, self.pid, g);
                if (p)
                        p->used_bytes -= MIN(p->used_bytes, freed[g]);
        }
        sim_state_unlock(state);
}

/* When no context of this process uses gpu any more, the process leaves its list; lock held. */
static void proc_maybe_unregister_locked(unsigned gpu) {
        for (unsigned d = 0; d < n_visible; d++)
                if (visible[d] == gpu && primary[d].active)
                        return;
        for (struct CUctx_st *x = created; x; x = x->next)
                if (visible[x->ordinal] == gpu)
                        return;
        if (sim_state_lock(state) < 0)
                return;
        struct sim_proc *p = sim_proc_find_locked(state, self.pid, gpu);
        if (p && p->used_bytes == 0)
                memset(p, 0, sizeof *p);
        sim_state_unlock(state);
}

_public_ CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
        CHECK_DEVICE_QUERY(pctx, dev);
        sim_forksafe_lock(&lock);
        struct CUctx_st *c = &primary[dev];
        CUresult r = CUDA_SUCCESS;
        if (!c->active)
                r = proc_register(dev);
        if (r == CUDA_SUCCESS && !c->active)
                r = ctx_take_own_locked(c, visible[dev]);
        if (r == CUDA_SUCCESS) {
                c->magic = CTX_MAGIC;
                c->ordinal = dev;
                c->primary = true;
                c->active = true;
                c->refs++;
                *pctx = c;
        }
        sim_forksafe_unlock(&lock);
        return r;
}

_public_ CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
        CHECK_INIT();
        if (!dev_valid(dev))
                return CUDA_ERROR_INVALID_DEVICE;
        sim_forksafe_lock(&lock);
        struct CUctx_st *c = &primary[dev];
        CUresult r = CUDA_SUCCESS;
        if (!c->active || c->refs == 0)
                r = CUDA_ERROR_INVALID_CONTEXT;
        else if (--c->refs == 0) {
                ctx_free_allocs_locked(c);
                c->active = false;
                if (current == c)
                        current = NULL;
                proc_maybe_unregister_locked(visible[dev]);
        }
        sim_forksafe_unlock(&lock);
        return r;
}

_public_ CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
        return cuDevicePrimaryCtxRelease_v2(dev);
}

static CUresult ctx_create(CUcontext *pctx, CUdevice dev) {
        CHECK_DEVICE_QUERY(pctx, dev);
        struct CUctx_st *c = calloc(1, sizeof *c);
        if (!c)
                return CUDA_ERROR_OUT_OF_MEMORY;
        sim_forksafe_lock(&lock);
        CUresult r = proc_register(dev);
        if (r == CUDA_SUCCESS)
                r = ctx_take_own_locked(c, visible[dev]);
        if (r == CUDA_SUCCESS) {
                uint64_t own = c->own_bytes;
                *c = (struct CUctx_st){
                        .magic = CTX_MAGIC, .ordinal = dev, .active = true, .own_bytes = own, .next = created
                };
                created = c;
                current = c; /* a new context is made current for the calling thread */
                *pctx = c;
        }
        sim_forksafe_unlock(&lock);
        if (r != CUDA_SUCCESS)
                free(c);
        return r;
}

_public_ CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) {
        (void)flags;
        return ctx_create(pctx, dev);
}

_public_ CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
        (void)flags;
        return ctx_create(pctx, dev);
}

_public_ CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams, unsigned int flags,
                                 CUdevice dev) {
        (void)flags;
        if (numParams < 0 || (numParams > 0 && !paramsArray))
                return CUDA_ERROR_INVALID_VALUE;
        return ctx_create(pctx, dev);
}

_public_ CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                                 CUdevice dev) {
        (void)ctxCreateParams;
        (void)flags;
        return ctx_create(pctx, dev);
}

static CUresult ctx_destroy(CUcontext ctx) {
        CHECK_INIT();
        sim_forksafe_lock(&lock);
        CUresult r = ctx_check_locked(ctx);
        if (r == CUDA_SUCCESS && ctx->primary)
                r = CUDA_ERROR_INVALID_CONTEXT; /* primary contexts are released, not destroyed */
        if (r == CUDA_SUCCESS) {
                ctx_free_allocs_locked(ctx);
                for (struct CUctx_st **pp = &created; *pp; pp = &(*pp)->next)
                        if (*pp == ctx) {
                                *pp = ctx->next;
                                break;
                        }
                if (current == ctx)
                        current = NULL;
                unsigned gpu = visible[ctx->ordinal];
                ctx->magic = 0;
                free(ctx);
                proc_maybe_unregister_locked(gpu);
        }
        sim_forksafe_unlock(&lock);
        return r;
}

_public_ CUresult cuCtxDestroy_v2(CUcontext ctx) {
        return ctx_destroy(ctx);
}

_public_ CUresult cuCtxDestroy(CUcontext ctx) {
        return ctx_destroy(ctx);
}

/* ---- green contexts: a created context with a share of the SMs (the share is not simulated) ---- */

#define GREEN_MAGIC 0x4e455247u /* "GREN" */

struct CUgreenCtx_st {
        uint32_t magic;
        CUcontext ctx;
};

struct CUdevResourceDesc_st {
        uint32_t magic;
        unsigned sms;
};

static struct CUdevResourceDesc_st resource_desc = { GREEN_MAGIC, 0 };

_public_ CUresult cuDeviceGetDevResource(CUdevice device, CUdevResource *resource, CUdevResourceType type) {
        CHECK_INIT();
        if (!resource || type != CU_DEV_RESOURCE_TYPE_SM)
                return CUDA_ERROR_INVALID_VALUE;
        if (!dev_valid(device))
                return CUDA_ERROR_INVALID_DEVICE;
        memset(resource, 0, sizeof *resource);
        resource->type = CU_DEV_RESOURCE_TYPE_SM;
        resource->sm.smCount = (unsigned)dev_sms(device);
        return CUDA_SUCCESS;
}

_public_ CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *phDesc, CUdevResource *resources,
                                            unsigned int nbResources) {
        if (!phDesc || !resources || nbResources == 0)
                return CUDA_ERROR_INVALID_VALUE;
        *phDesc = &resource_desc; /* one shared description: the partition is not simulated */
        return CUDA_SUCCESS;
}

_public_ CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags) {
        CHECK_INIT();
        if (!phCtx || desc != &resource_desc || flags != CU_GREEN_CTX_DEFAULT_STREAM)
                return CUDA_ERROR_INVALID_VALUE;
        struct CUgreenCtx_st *gc = calloc(1, sizeof *gc);
        if (!gc)
                return CUDA_ERROR_OUT_OF_MEMORY;
        CUcontext was = current, c = NULL;
        CUresult r = ctx_create(&c, dev);
        current = was; /* unlike cuCtxCreate, a green context is not made current */
        if (r != CUDA_SUCCESS) {
                free(gc);
                return r;
        }
        *gc = (struct CUgreenCtx_st){ GREEN_MAGIC, c };
        *phCtx = gc;
        return CUDA_SUCCESS;
}

_public_ CUresult cuCtxFromGreenCtx(CUcontext *pContext, CUgreenCtx hCtx) {
        CHECK_INIT();
        if (!pContext || !hCtx || hCtx->magic != GREEN_MAGIC)
                return CUDA_ERROR_INVALID_VALUE;
        *pContext = hCtx->ctx;
        return CUDA_SUCCESS;
}

_public_ CUresult cuGreenCtxDestroy(CUgreenCtx hCtx) {
        CHECK_INIT();
        if (!hCtx || hCtx->magic != GREEN_MAGIC)
                return CUDA_ERROR_INVALID_HANDLE;
        CUresult r = ctx_destroy(hCtx->ctx);
        if (r == CUDA_SUCCESS) {
                hCtx->magic = 0;
                free(hCtx);
        }
        return r;
}

_public_ CUresult cuCtxSetCurrent(CUcontext ctx) {
        CHECK_INIT();
        if (!ctx) {
                current = NULL;
                return CUDA_SUCCESS;
        }
        sim_forksafe_lock(&lock);
        CUresult r = ctx_check_locked(ctx);
        sim_forksafe_unlock(&lock);
        if (r == CUDA_SUCCESS)
                current = ctx;
        return r;
}

_public_ CUresult cuCtxGetCurrent(CUcontext *pctx) {
        CHECK_INIT();
        if (!pctx)
                return CUDA_ERROR_INVALID_VALUE;
        *pctx = current;
        return CUDA_SUCCESS;
}

/* The calling thread's usable context, or an error; lock held. */
static CUresult current_locked(CUcontext *ret) {
        CUresult r = ctx_check_locked(current);
        if (r == CUDA_SUCCESS)
                *ret = current;
        return r;
}

/* ---- peer access ---- */

/* Two GPUs of the node can reach each other's memory directly: over NVLink (or an NVSwitch), or over PCIe
 * within one CPU's root complex. Across the SMP interconnect (SYS) P2P is not supported, as on real systems. */
static bool p2p_capable(unsigned a, unsigned b) {
        struct topo_link l = topo_get_link(&node, a, b);
        return a != b && (node.nvswitch || l.nvlinks || l.pcie >= TOPO_LEVEL_NODE);
}

_public_ CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev) {
        CHECK_INIT();
        if (!canAccessPeer)
                return CUDA_ERROR_INVALID_VALUE;
        if (dev < 0 || (unsigned)dev >= n_visible || peerDev < 0 || (unsigned)peerDev >= n_visible)
                return CUDA_ERROR_INVALID_DEVICE;
        *canAccessPeer = p2p_capable(visible[dev], visible[peerDev]) ? 1 : 0;
        return CUDA_SUCCESS;
}

/* The current context gains access to peerContext's allocations (documented errors: no current context, an
 * invalid peer or the current context itself → INVALID_CONTEXT; flags ≠ 0 → INVALID_VALUE; devices without
 * P2P → PEER_ACCESS_UNSUPPORTED; twice → PEER_ACCESS_ALREADY_ENABLED; more than SIM_MAX_PEERS → TOO_MANY_PEERS). */
_public_ CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
        CHECK_INIT();
        sim_forksafe_lock(&lock);
        CUcontext c = NULL;
        CUresult r = current_locked(&c);
        if (r == CUDA_SUCCESS && (ctx_check_locked(peerContext) != CUDA_SUCCESS || peerContext == c))
                r = CUDA_ERROR_INVALID_CONTEXT;
        else if (r == CUDA_SUCCESS && Flags)
                r = CUDA_ERROR_INVALID_VALUE;
        else if (r == CUDA_SUCCESS && !p2p_capable(visible[c->ordinal], visible[peerContext->ordinal]))
                r = CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
        int free_at = -1;
        for (int k = 0; r == CUDA_SUCCESS && k < SIM_MAX_PEERS; k++) {
                if (c->peer[k] == peerContext)
                        r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
                else if (!c->peer[k] && free_at < 0)
                        free_at = k;
        }
        if (r == CUDA_SUCCESS && free_at < 0)
                r = CUDA_ERROR_TOO_MANY_PEERS;
        if (r == CUDA_SUCCESS)
                c->peer[free_at] = peerContext;
        sim_forksafe_unlock(&lock);
        return r;
}

_public_ CUresult cuCtxDisablePeerAccess(CUcontext peerContext) {
        CHECK_INIT();
        sim_forksafe_lock(&lock);
        CUcontext c = NULL;
        CUresult r = current_locked(&c);
        if (r == CUDA_SUCCESS && ctx_check_locked(peerContext) != CUDA_SUCCESS)
                r = CUDA_ERROR_INVALID_CONTEXT;
        bool found = false;
        for (int k = 0; r == CUDA_SUCCESS && k < SIM_MAX_PEERS; k++)
                if (c->peer[k] == peerContext) {
                        c->peer[k] = NULL;
                        found = true;
                }
        if (r == CUDA_SUCCESS && !found)
                r = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
        sim_forksafe_unlock(&lock);
        return r;
}

_public_ CUresult cuCtxGetDevice(CUdevice *device) {
        CHECK_INIT();
        if (!device)
                return CUDA_ERROR_INVALID_VALUE;
        sim_forksafe_lock(&lock);
        CUcontext c = NULL;
        CUresult r = current_locked(&c);
        if (r == CUDA_SUCCESS)
                *device = c->ordinal;
        sim_forksafe_unlock(&lock);
        return r;
}

_public_ CUresult cuCtxSynchronize(void) {
        CHECK_INIT();
        sim_forksafe_lock(&lock);
        CUcontext c = NULL;
        CUresult r = current_locked(&c);
        unsigned gpu = c ? visible[c->ordinal] : 0;
        sim_forksafe_unlock(&lock);
        if (r == CUDA_SUCCESS) {
                sim_launch_sync(gpu); /* cuda-launch.c: wait for this process's kernels */
                sim_mem_sync(gpu);    /* cuda-mem.c: pools release what exceeds their threshold */
        }
        return r;
}

_public_ CUresult cuCtxSynchronize_v2(CUcontext ctx) {
        CHECK_INIT();
        if (!ctx)
                return cuCtxSynchronize();
        sim_forksafe_lock(&lock);
        CUresult r = ctx_check_locked(ctx);
        unsigned gpu = r == CUDA_SUCCESS ? visible[ctx->ordinal] : 0;
        sim_forksafe_unlock(&lock);
        if (r == CUDA_SUCCESS) {
                sim_launch_sync(gpu);
                sim_mem_sync(gpu);
        }
        return r;
}

_public_ CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx) {
        CHECK_INIT();
        if (!ctx)
                return cuCtxGetDevice(device);
        if (!device)
                return CUDA_ERROR_INVALID_VALUE;
        sim_forksafe_lock(&lock);
        CUresult r = ctx_check_locked(ctx);
        if (r == CUDA_SUCCESS)
                *device = ctx->ordinal;
        sim_forksafe_unlock(&lock);
        return r;
}

/* ---- context limits: the malloc heap, printf FIFO and stack are device memory, as on a GPU ---- */

static size_t ctx_limit_default(CUlimit l) {
        switch (l) {
                case CU_LIMIT_STACK_SIZE: return 1024;
                case CU_LIMIT_PRINTF_FIFO_SIZE: return 1u << 20;
                case CU_LIMIT_MALLOC_HEAP_SIZE: return 8u << 20;
                case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT: return 2048;
                case CU_LIMIT_MAX_L2_FETCH_GRANULARITY: return 128;
                default: return 0;
        }
}

static size_t ctx_limit_value(CUcontext c, CUlimit l) {
        return c->limit[l] ? c->limit[l] : ctx_limit_default(l);
}

/* Device memory the context's heap, FIFO and stacks take beyond what the defaults take (which is part of
 * a context's own cost): the heap and FIFO byte for byte, the stack per resident thread. */
static uint64_t ctx_limits_cost(CUcontext c) {
        uint64_t threads = (uint64_t)dev_sms(c->ordinal) * SIM_THREADS_PER_SM, sum = 0;
        for (CUlimit l = CU_LIMIT_STACK_SIZE; l <= CU_LIMIT_MALLOC_HEAP_SIZE; l++) {
                uint64_t v = ctx_limit_value(c, l), d = ctx_limit_default(l);
                uint64_t extra = v > d ? v - d : 0;
                sum += l == CU_LIMIT_STACK_SIZE ? extra * threads : extra;
        }
        return sum;
}

_public_ CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
        CHECK_INIT();
        if ((unsigned)limit >= CU_LIMIT_MAX || (limit <= CU_LIMIT_MALLOC_HEAP_SIZE && value > (1ULL << 40)))
                return CUDA_ERROR_INVALID_VALUE;
        sim_forksafe_lock(&lock);
        CUcontext c = NULL;
        CUresult r = current_locked(&c);
        if (r == CUDA_SUCCESS) {
                size_t was = c->limit[limit];
                c->limit[limit] = value ? value : ctx_limit_default(limit);
                uint64_t cost = ctx_limits_cost(c);
                unsigned gpu = visible[c->ordinal];
                if (cost > c->limit_bytes) {
                        r = sim_mem_charge(gpu, cost - c->limit_bytes);
                        if (r != CUDA_SUCCESS)
                                c->limit[limit] = was;
                        else
                                c->limit_bytes = cost;
                } else if (cost < c->limit_bytes) {
                        sim_mem_uncharge(gpu, c->limit_bytes - cost);
                        c->limit_bytes = cost;
                }
        }
        sim_forksafe_unlock(&lock);
        return r;
}

_public_ CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit) {
        CHECK_INIT();
        if (!pvalue || (unsigned)limit >= CU_LIMIT_MAX)
                return CUDA_ERROR_INVALID_VALUE;
        sim_forksafe_lock(&lock);
        CUcontext c = NULL;
        CUresult r = current_locked(&c);
        if (r == CUDA_SUCCESS)
                *pvalue = ctx_limit_value(c, limit);
        sim_forksafe_unlock(&lock);
        return r;
}

/* ---- memory ---- */

static CUresult mem_alloc(CUdeviceptr *dptr, uint64_t bytesize, bool legacy) {
        CHECK_INIT();
        if (!dptr || bytesize == 0)
                return CUDA_ERROR_INVALID_VALUE;
        sim_forksafe_lock(&lock);
        CUcontext c = NULL;
        CUresult r = current_locked(&c);
        if (r != CUDA_SUCCESS)
                goto out;
        unsigned gpu = visible[c->ordinal];
        uint64_t span = (bytesize + ALLOC_ALIGN - 1) & ~(ALLOC_ALIGN - 1);
        uint64_t *next = legacy ? &va_legacy_next : &va_next[gpu];
        uint64_t end = legacy ? VA_LEGACY_END : VA_BASE + (gpu + 1) * VA_PER_GPU;
        if (span < bytesize || span > end - *next) {
                r = CUDA_ERROR_OUT_OF_MEMORY;
                goto out;
        }
        if (n_allocs == cap_allocs) {
                size_t cap = cap_allocs ? cap_allocs * 2 : 64;
                struct alloc *a = realloc(allocs, cap * sizeof *a);
                if (!a) {
                        r = CUDA_ERROR_OUT_OF_MEMORY;
                        goto out;
                }
                allocs = a;
                cap_allocs = cap;
        }
        /* Capacity check and charge in one critical section of the node state: two processes
         * cannot both take the last free bytes. */
        if (sim_state_lock(state) < 0) {
                r = CUDA_ERROR_UNKNOWN;
                goto out;
        }
        sim_state_prune_locked(state);
        uint64_t total, usable, used;
        sim_mem_capacity_locked(state, &node, gpu, sim_cuda_instance(gpu), &total, &usable, &used);
        struct sim_proc *p = NULL;
        uint64_t mps = sim_mps_client_limit(gpu); /* an MPS client past its pinned limit: out of memory */
        struct sim_proc *mine = sim_proc_find_locked(state, self.pid, gpu);
        if (used > usable || bytesize > usable - used)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        else if (mps && (mine ? mine->used_bytes : 0) + bytesize > mps)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        else if (sim_proc_get_locked(state, self.pid, gpu, &p) < 0)
                r = CUDA_ERROR_OUT_OF_MEMORY;
        else {
                sim_cuda_tag_locked(p, gpu);
                p->used_bytes += bytesize;
        }
        sim_state_unlock(state);
        if (r != CUDA_SUCCESS)
                goto out;
        CUdeviceptr ptr = (CUdeviceptr)*next;
        *next += span;
        allocs[n_allocs++] = (struct alloc){ .ptr = ptr, .size = bytesize, .gpu = gpu, .ctx = c };
        *dptr = ptr;
out:
        sim_forksafe_unlock(&lock);
        return r;
}

_public_ CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
        cuMemAlloc_v2_params p = { dptr, bytesize };
        SIM_TRACED(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2", &p, mem_alloc(dptr, bytesize, false));
}

_public_ CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize) {
        if (!dptr)
                return CUDA_ERROR_INVALID_VALUE;
        CUdeviceptr p = 0;
        CUresult r = mem_alloc(&p, bytesize, true);
        if (r == CUDA_SUCCESS)
                *dptr = (CUdeviceptr_v1)p;
        return r;
}

static CUresult mem_free(CUdeviceptr dptr) {
        CHECK_INIT();
        sim_forksafe_lock(&lock);
        CUresult r = CUDA_ERROR_INVALID_VALUE;
        for (size_t i = 0; i < n_allocs; i++) {
                if (allocs[i].ptr != dptr)
                        continue;
                struct alloc a = allocs[i];
                allocs[i] = allocs[--n_allocs];
                if (sim_state_lock(state) == 0) {
                        struct sim_proc *p = sim_proc_find_locked(state, self.pid, a.gpu);
                        if (p)
                                p->used_bytes -= MIN(p->used_bytes, a.size);
                        sim_state_unlock(state);
                }
                r = CUDA_SUCCESS;
                break;
        }
        sim_forksafe_unlock(&lock);
        if (r != CUDA_SUCCESS)
                r = sim_mem_free_other(dptr); /* pool and graph allocations (cuda-mem.c) */
        return r;
}

_public_ CUresult cuMemFree_v2(CUdeviceptr dptr) {
        cuMemFree_v2_params p = { dptr };
        SIM_TRACED(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, "cuMemFree_v2", &p, mem_free(dptr));
}

_public_ CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
        CHECK_INIT();
        CUdeviceptr base;
        uint64_t size;
        unsigned gpu;
        CUresult r = sim_cuda_range(dptr, &base, &size, &gpu);
        if (r != CUDA_SUCCESS)
                r = sim_mem_range_other(dptr, &base, &size);
        if (r != CUDA_SUCCESS)
                return r;
        if (pbase)
                *pbase = base;
        if (psize)
                *psize = (size_t)size;
        return CUDA_SUCCESS;
}

_public_ CUresult cuMemFree(CUdeviceptr_v1 dptr) {
        return cuMemFree_v2((CUdeviceptr)dptr);
}

_public_ CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
        CHECK_INIT();
        if (!free_bytes || !total_bytes)
                return CUDA_ERROR_INVALID_VALUE;
        sim_forksafe_lock(&lock);
        CUcontext c = NULL;
        CUresult r = current_locked(&c);
        unsigned gpu = c ? visible[c->ordinal] : 0;
        sim_forksafe_unlock(&lock);
        if (r != CUDA_SUCCESS)
                return r;
        if (sim_state_lock(state) < 0)
                return CUDA_ERROR_UNKNOWN;
        sim_state_prune_locked(state);
        uint64_t total, usable, used;
        sim_mem_capacity_locked(state, &node, gpu, sim_cuda_instance(gpu), &total, &usable, &used);
        sim_state_unlock(state);
        *free_bytes = used >= usable ? 0 : usable - used;
        *total_bytes = total;
        uint64_t mps = sim_mps_client_limit(gpu);
        if (mps && mps < total) { /* an MPS client: the pinned limit is its device memory */
                *total_bytes = (size_t)mps;
                *free_bytes = MIN(*free_bytes, (size_t)mps);
        }
        return CUDA_SUCCESS;
}

_public_ CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total_bytes) {
        if (!free_bytes || !total_bytes)
                return CUDA_ERROR_INVALID_VALUE;
        size_t f, t;
        CUresult r = cuMemGetInfo_v2(&f, &t);
        if (r == CUDA_SUCCESS) {
                *free_bytes = (unsigned)MIN(f, (size_t)UINT_MAX);
                *total_bytes = (unsigned)MIN(t, (size_t)UINT_MAX);
        }
        return r;
}

/* ---- errors ---- */

/* A CUresult's name (#code) or, with DESCRIBE, its text (the name when it has none). */
static CUresult error_lookup(CUresult error, bool describe, const char **pStr) {
        if (!pStr)
                return CUDA_ERROR_INVALID_VALUE;
        switch (error) {
#define SIM_ERR_LOOKUP(code, text) \
        case code: *pStr = describe && (text) ? (text) : #code; return CUDA_SUCCESS;
                SIM_CUDA_ERRORS(SIM_ERR_LOOKUP)
#undef SIM_ERR_LOOKUP
                default: break;
        }
        *pStr = NULL;
        return CUDA_ERROR_INVALID_VALUE;
}

_public_ CUresult cuGetErrorName(CUresult error, const char **pStr) {
        return error_lookup(error, false, pStr);
}

_public_ CUresult cuGetErrorString(CUresult error, const char **pStr) {
        return error_lookup(error, true, pStr);
}

/* ---- cuGetProcAddress ---- */

/* Every exported entry point under its base name, with the CUDA version (1000*major + 10*minor)
 * that introduced that ABI variant (cudaTypedefs.h: PFN_<name>_v<version>). */
struct proc_entry {
        const char *name;
        int version;
        void *fn;
};

_public_ CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
_public_ CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                      CUdriverProcAddressQueryResult *symbolStatus);

static const struct proc_entry proc_table[] = {
        { "cuInit", 2000, (void *)cuInit },
        { "cuGetExportTable", 3000, (void *)cuGetExportTable },
        { "cuDeviceCanAccessPeer", 4000, (void *)cuDeviceCanAccessPeer },
        { "cuCtxEnablePeerAccess", 4000, (void *)cuCtxEnablePeerAccess },
        { "cuCtxDisablePeerAccess", 4000, (void *)cuCtxDisablePeerAccess },
        { "cuDriverGetVersion", 2020, (void *)cuDriverGetVersion },
        { "cuDeviceGet", 2000, (void *)cuDeviceGet },
        { "cuDeviceGetCount", 2000, (void *)cuDeviceGetCount },
        { "cuDeviceGetName", 2000, (void *)cuDeviceGetName },
        { "cuDeviceGetUuid", 9020, (void *)cuDeviceGetUuid },
        { "cuDeviceGetUuid", 11040, (void *)cuDeviceGetUuid_v2 },
        { "cuDeviceTotalMem", 2000, (void *)cuDeviceTotalMem },
        { "cuDeviceTotalMem", 3020, (void *)cuDeviceTotalMem_v2 },
        { "cuDeviceGetAttribute", 2000, (void *)cuDeviceGetAttribute },
        { "cuDevicePrimaryCtxRetain", 7000, (void *)cuDevicePrimaryCtxRetain },
        { "cuDevicePrimaryCtxRelease", 7000, (void *)cuDevicePrimaryCtxRelease },
        { "cuDevicePrimaryCtxRelease", 11000, (void *)cuDevicePrimaryCtxRelease_v2 },
        { "cuCtxCreate", 2000, (void *)cuCtxCreate },
        { "cuCtxCreate", 3020, (void *)cuCtxCreate_v2 },
        { "cuCtxCreate", 11040, (void *)cuCtxCreate_v3 },
        { "cuCtxCreate", 12050, (void *)cuCtxCreate_v4 },
        { "cuCtxDestroy", 2000, (void *)cuCtxDestroy },
        { "cuCtxDestroy", 4000, (void *)cuCtxDestroy_v2 },
        { "cuCtxSetCurrent", 4000, (void *)cuCtxSetCurrent },
        { "cuCtxGetCurrent", 4000, (void *)cuCtxGetCurrent },
        { "cuCtxGetDevice", 2000, (void *)cuCtxGetDevice },
        { "cuCtxGetDevice", 13000, (void *)cuCtxGetDevice_v2 },
        { "cuCtxSynchronize", 2000, (void *)cuCtxSynchronize },
        { "cuCtxSynchronize", 13000, (void *)cuCtxSynchronize_v2 },
        { "cuCtxSetLimit", 3010, (void *)cuCtxSetLimit },
        { "cuCtxGetLimit", 3010, (void *)cuCtxGetLimit },
        { "cuMemAlloc", 2000, (void *)cuMemAlloc },
        { "cuMemAlloc", 3020, (void *)cuMemAlloc_v2 },
        { "cuMemFree", 2000, (void *)cuMemFree },
        { "cuMemFree", 3020, (void *)cuMemFree_v2 },
        { "cuMemGetInfo", 2000, (void *)cuMemGetInfo },
        { "cuMemGetAddressRange", 3020, (void *)cuMemGetAddressRange_v2 },
        { "cuDeviceGetDevResource", 12040, (void *)cuDeviceGetDevResource },
        { "cuDevResourceGenerateDesc", 12040, (void *)cuDevResourceGenerateDesc },
        { "cuGreenCtxCreate", 12040, (void *)cuGreenCtxCreate },
        { "cuGreenCtxDestroy", 12040, (void *)cuGreenCtxDestroy },
        { "cuCtxFromGreenCtx", 12040, (void *)cuCtxFromGreenCtx },
        { "cuMemGetInfo", 3020, (void *)cuMemGetInfo_v2 },
        { "cuGetErrorString", 6000, (void *)cuGetErrorString },
        { "cuGetErrorName", 6000, (void *)cuGetErrorName },
        { "cuGetProcAddress", 11030, (void *)cuGetProcAddress },
        { "cuGetProcAddress", 12000, (void *)cuGetProcAddress_v2 },
};

/*
 * GPUSLICE_SIM_PROC=internal: cuGetProcAddress hands out internal entry points instead of the exported
 * symbols, as a real driver may — each a distinct trampoline (x86-64: movabs rax, fn; jmp rax) to the same
 * function — so that an interposer cannot recognise them by pointer and must pick its wrapper by name and
 * version. At most 256 distinct functions; beyond that the exported pointer itself.
 */
static void *internal_entry(void *fn) {
        static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
        static unsigned char *page;
        static void *from[256];
        static unsigned n;
        void *r = fn;
        pthread_mutex_lock(&mu);
        if (!page) {
                void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                page = p == MAP_FAILED ? NULL : p;
        }
        unsigned i = 0;
        while (i < n && from[i] != fn)
                i++;
        if (page && i == n && n < 256) {
                unsigned char *t = page + 16 * n;
                uint64_t a = (uint64_t)(uintptr_t)fn;
                t[0] = 0x48; /* movabs $fn, %rax */
                t[1] = 0xb8;
                memcpy(t + 2, &a, sizeof a);
                t[10] = 0xff; /* jmp *%rax */
                t[11] = 0xe0;
                from[n++] = fn;
        }
        if (page && i < n)
                r = page + 16 * i;
        pthread_mutex_unlock(&mu);
        return r;
}

_public_ CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                      CUdriverProcAddressQueryResult *symbolStatus) {
        /* Works before cuInit: runtimes fetch every entry point through here first. */
        if (!symbol || !pfn ||
            (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
                return CUDA_ERROR_INVALID_VALUE;
        /* None of the simulated entry points has a per-thread-stream (_ptsz/_ptds) variant, so the
         * stream flags select the same function. */
        const struct proc_entry *best = NULL;
        bool named = false;
        for (size_t i = 0; i < ELEMENTSOF(proc_table); i++) {
                if (!streq(proc_table[i].name, symbol))
                        continue;
                named = true;
                if (proc_table[i].version <= cudaVersion && (!best || proc_table[i].version > best->version))
                        best = &proc_table[i];
        }
        void *fn = best ? best->fn : NULL;
        /* The entry points of cuda-mem.c and cuda-launch.c (they have _ptsz variants). */
        if (!fn && !named)
                fn = sim_cuda_mem_proc(symbol, cudaVersion, flags, &named);
        if (!fn && !named)
                fn = sim_cuda_launch_proc(symbol, cudaVersion, flags, &named);
        const char *mode = secure_getenv("GPUSLICE_SIM_PROC");
        if (fn && mode && streq(mode, "internal"))
                fn = internal_entry(fn);
        *pfn = fn;
        if (symbolStatus)
                *symbolStatus = fn      ? CU_GET_PROC_ADDRESS_SUCCESS
                                : named ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                        : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return fn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

_public_ CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
        return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}

/* ---- seams for cuda-mem.c and cuda-launch.c (sim/cuda-sim.h) ---- */

/* ---- the simulated CUPTI's export table (sim/cupti-table.h) ---- */

static sim_cupti_api_fn cupti_fn;  /* atomic */
static uint32_t cupti_correlation; /* atomic: the correlation id of each traced call */

static void cupti_set(sim_cupti_api_fn fn) {
        __atomic_store_n(&cupti_fn, fn, __ATOMIC_RELEASE);
}

static const struct sim_cupti_table cupti_table = { sizeof(struct sim_cupti_table), cupti_set };

void sim_cupti_api(uint32_t cbid, int site, const char *name, const void *params, CUresult *ret,
                   uint64_t *correlation) {
        sim_cupti_api_fn fn = __atomic_load_n(&cupti_fn, __ATOMIC_ACQUIRE);
        if (!fn)
                return;
        static __thread uint32_t id; /* this thread's call in progress (calls do not interleave on a thread) */
        if (site == CUPTI_API_ENTER)
                id = __atomic_add_fetch(&cupti_correlation, 1, __ATOMIC_RELAXED);
        fn(cbid, (CUpti_ApiCallbackSite)site, name, params, ret, current, correlation, id);
}

/* Private tables by id, as the driver hands its own out (CUPTI, the runtime): only the simulated CUPTI's. */
_public_ CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId) {
        static const CUuuid cupti_id = SIM_CUPTI_TABLE_ID;
        if (!ppExportTable || !pExportTableId)
                return CUDA_ERROR_INVALID_VALUE;
        if (memcmp(pExportTableId->bytes, cupti_id.bytes, sizeof cupti_id.bytes) != 0)
                return CUDA_ERROR_INVALID_VALUE;
        *ppExportTable = &cupti_table;
        return CUDA_SUCCESS;
}

bool sim_cuda_ready(void) {
        return ready();
}

CUresult sim_cuda_current(int *ret_ordinal, unsigned *ret_gpu) {
        CHECK_INIT();
        sim_forksafe_lock(&lock);
        CUcontext c = NULL;
        CUresult r = current_locked(&c);
        if (r == CUDA_SUCCESS) {
                *ret_ordinal = c->ordinal;
                *ret_gpu = visible[c->ordinal];
        }
        sim_forksafe_unlock(&lock);
        return r;
}

CUresult sim_cuda_gpu_of(CUdevice dev, unsigned *ret_gpu) {
        CHECK_INIT();
        if (!dev_valid(dev))
                return CUDA_ERROR_INVALID_DEVICE;
        *ret_gpu = visible[dev];
        return CUDA_SUCCESS;
}

CUresult sim_cuda_mem_alloc(CUdeviceptr *dptr, uint64_t bytes, bool legacy) {
        return mem_alloc(dptr, bytes, legacy);
}

/* Bound inside this library: a call never lands on an interposer's cuMemFree_v2. */
CUresult sim_cuda_mem_free(CUdeviceptr dptr) {
        return mem_free(dptr);
}

CUresult sim_cuda_range(CUdeviceptr dptr, CUdeviceptr *ret_base, uint64_t *ret_size, unsigned *ret_gpu) {
        CHECK_INIT();
        sim_forksafe_lock(&lock);
        CUresult r = CUDA_ERROR_NOT_FOUND;
        for (size_t i = 0; i < n_allocs; i++)
                if (dptr >= allocs[i].ptr && dptr < allocs[i].ptr + allocs[i].size) {
                        *ret_base = allocs[i].ptr;
                        *ret_size = allocs[i].size;
                        *ret_gpu = allocs[i].gpu;
                        r = CUDA_SUCCESS;
                        break;
                }
        sim_forksafe_unlock(&lock);
        return r;
}

const struct topo *sim_cuda_node(void) {
        return &node;
}

const char *sim_cuda_node_path(void) {
        return node_path;
}

struct sim_state *sim_cuda_state(void) {
        return state;
}

const struct sim_identity *sim_cuda_self(void) {
        return &self;
}
