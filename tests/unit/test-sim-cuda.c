/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test-sim-cuda — the simulated libcuda.so.1 (loaded by path with dlopen, never linked): devices,
 * contexts, memory bookkeeping against the GPU's capacity, versioned entry points through
 * cuGetProcAddress, error texts; and memory allocated through it by other processes showing up in
 * the simulated NVML's process list (and leaving it when they exit or are killed).
 *
 * Processes that must start without an initialised driver re-run this program in a child mode
 * (argv[1] = "child-..."), so each one dlopens libcuda.so.1 afresh.
 */
#include "interposer/cuda-abi.h" /* the driver API as gpuslice declares it: no CUDA toolkit needed */

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "test-sim-common.h"

#define NODE_FILE SIM_TOPO("dgx1-v100-hybrid-cube-mesh.topo")
#define WORKLOAD GPUSLICE_BUILD_DIR "/sim/gpuslice-sim-workload"

static void *cuda_dl;
static struct topo T;

/* The entry points under test, each with its exact ABI variant's type. */
static struct {
        PFN_cuInit_v2000 cuInit;
        PFN_cuDriverGetVersion_v2020 cuDriverGetVersion;
        PFN_cuDeviceGetCount_v2000 cuDeviceGetCount;
        PFN_cuDeviceGet_v2000 cuDeviceGet;
        PFN_cuDeviceGetName_v2000 cuDeviceGetName;
        PFN_cuDeviceGetUuid_v11040 cuDeviceGetUuid_v2;
        PFN_cuDeviceTotalMem_v3020 cuDeviceTotalMem_v2;
        PFN_cuDeviceTotalMem_v2000 cuDeviceTotalMem;
        PFN_cuDeviceGetAttribute_v2000 cuDeviceGetAttribute;
        PFN_cuDevicePrimaryCtxRetain_v7000 cuDevicePrimaryCtxRetain;
        PFN_cuDevicePrimaryCtxRelease_v11000 cuDevicePrimaryCtxRelease_v2;
        PFN_cuCtxCreate_v3020 cuCtxCreate_v2;
        PFN_cuCtxDestroy_v4000 cuCtxDestroy_v2;
        PFN_cuCtxSetCurrent_v4000 cuCtxSetCurrent;
        PFN_cuCtxGetCurrent_v4000 cuCtxGetCurrent;
        PFN_cuMemAlloc_v3020 cuMemAlloc_v2;
        PFN_cuMemAlloc_v2000 cuMemAlloc;
        PFN_cuMemFree_v3020 cuMemFree_v2;
        PFN_cuMemFree_v2000 cuMemFree;
        PFN_cuMemGetInfo_v3020 cuMemGetInfo_v2;
        PFN_cuGetErrorString_v6000 cuGetErrorString;
        PFN_cuGetErrorName_v6000 cuGetErrorName;
        PFN_cuGetProcAddress_v12000 cuGetProcAddress_v2;
        PFN_cuGetProcAddress_v11030 cuGetProcAddress;
} C;

static int load_cuda(void) {
        cuda_dl = dlopen(SIM_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
        if (!cuda_dl) {
                fprintf(stderr, "dlopen %s: %s\n", SIM_CUDA_PATH, dlerror());
                return -1;
        }
#define RESOLVE(field, sym)                                \
        if (!(*(void **)&C.field = dlsym(cuda_dl, sym))) { \
                fprintf(stderr, "missing %s\n", sym);      \
                return -1;                                 \
        }
        RESOLVE(cuInit, "cuInit");
        RESOLVE(cuDriverGetVersion, "cuDriverGetVersion");
        RESOLVE(cuDeviceGetCount, "cuDeviceGetCount");
        RESOLVE(cuDeviceGet, "cuDeviceGet");
        RESOLVE(cuDeviceGetName, "cuDeviceGetName");
        RESOLVE(cuDeviceGetUuid_v2, "cuDeviceGetUuid_v2");
        RESOLVE(cuDeviceTotalMem_v2, "cuDeviceTotalMem_v2");
        RESOLVE(cuDeviceTotalMem, "cuDeviceTotalMem");
        RESOLVE(cuDeviceGetAttribute, "cuDeviceGetAttribute");
        RESOLVE(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
        RESOLVE(cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease_v2");
        RESOLVE(cuCtxCreate_v2, "cuCtxCreate_v2");
        RESOLVE(cuCtxDestroy_v2, "cuCtxDestroy_v2");
        RESOLVE(cuCtxSetCurrent, "cuCtxSetCurrent");
        RESOLVE(cuCtxGetCurrent, "cuCtxGetCurrent");
        RESOLVE(cuMemAlloc_v2, "cuMemAlloc_v2");
        RESOLVE(cuMemAlloc, "cuMemAlloc");
        RESOLVE(cuMemFree_v2, "cuMemFree_v2");
        RESOLVE(cuMemFree, "cuMemFree");
        RESOLVE(cuMemGetInfo_v2, "cuMemGetInfo_v2");
        RESOLVE(cuGetErrorString, "cuGetErrorString");
        RESOLVE(cuGetErrorName, "cuGetErrorName");
        RESOLVE(cuGetProcAddress_v2, "cuGetProcAddress_v2");
        RESOLVE(cuGetProcAddress, "cuGetProcAddress");
#undef RESOLVE
        return 0;
}

/* ---- child modes (a fresh process each) ---- */

/* Before cuInit and without a node: what a driverless machine answers. */
static int child_no_node(void) {
        unsetenv("GPUSLICE_SIM_NODE");
        if (load_cuda() < 0)
                return 10;
        int n = 0, v = 0;
        void *fn = NULL;
        if (C.cuDeviceGetCount(&n) != CUDA_ERROR_NOT_INITIALIZED)
                return 11;
        if (C.cuDriverGetVersion(&v) != CUDA_SUCCESS || v <= 0)
                return 12;
        if (C.cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, NULL) != CUDA_SUCCESS || !fn)
                return 13; /* works before cuInit */
        if (C.cuInit(0) != CUDA_ERROR_NO_DEVICE)
                return 14;
        setenv("GPUSLICE_SIM_NODE", NODE_FILE, 1);
        if (C.cuInit(0) != CUDA_ERROR_NO_DEVICE)
                return 15; /* a failed cuInit stays failed */
        return 0;
}

/* CUDA_VISIBLE_DEVICES (set by the parent) selects and orders devices; argv: expected node indices. */
static int child_visible(int argc, char **argv) {
        if (load_cuda() < 0 || sim_nvml_load() < 0)
                return 10;
        if (C.cuInit(0) != CUDA_SUCCESS || N.nvmlInit_v2() != NVML_SUCCESS)
                return 11;
        int n = -1;
        if (C.cuDeviceGetCount(&n) != CUDA_SUCCESS || n != argc)
                return 12;
        for (int i = 0; i < argc; i++) {
                unsigned want;
                nvmlDevice_t d;
                char uuid[96];
                CUuuid cu;
                if (parse_uint(argv[i], 63, &want) < 0 || N.nvmlDeviceGetHandleByIndex_v2(want, &d) != NVML_SUCCESS ||
                    N.nvmlDeviceGetUUID(d, uuid, sizeof uuid) != NVML_SUCCESS ||
                    C.cuDeviceGetUuid_v2(&cu, i) != CUDA_SUCCESS)
                        return 13;
                char hex[3];
                snprintf(hex, sizeof hex, "%02x", (unsigned char)cu.bytes[0]);
                if (strncmp(uuid + 4, hex, 2) != 0)
                        return 14;
        }
        return 0;
}

/* Allocate argv[1] bytes on device argv[0], print "ready", hold until stdin closes. */
static int child_alloc(int argc, char **argv) {
        if (argc != 2 || load_cuda() < 0)
                return 10;
        unsigned dev;
        uint64_t bytes;
        if (parse_uint(argv[0], 63, &dev) < 0 || parse_u64(argv[1], &bytes) < 0)
                return 11;
        CUcontext ctx;
        CUdeviceptr p;
        if (C.cuInit(0) != CUDA_SUCCESS || C.cuDevicePrimaryCtxRetain(&ctx, (CUdevice)dev) != CUDA_SUCCESS ||
            C.cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
                return 12;
        CUresult r = C.cuMemAlloc_v2(&p, bytes);
        printf("%s\n", r == CUDA_SUCCESS ? "ready" : "oom");
        fflush(stdout);
        char c;
        while (read(STDIN_FILENO, &c, 1) > 0)
                ;
        return r == CUDA_SUCCESS ? 0 : 3;
}

/* ---- helpers for the parent ---- */

struct child {
        pid_t pid;
        int to_child;   /* close to let it exit */
        int from_child; /* its stdout */
};

static struct child spawn(const char *mode, const char *a, const char *b) {
        int in[2], out[2];
        assert_int_equal(pipe2(in, O_CLOEXEC), 0);
        assert_int_equal(pipe2(out, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                dup2(in[0], STDIN_FILENO);
                dup2(out[1], STDOUT_FILENO);
                char *argv[] = { (char *)"test-sim-cuda", (char *)mode, (char *)a, (char *)b, NULL };
                execv("/proc/self/exe", argv);
                _exit(127);
        }
        close(in[0]);
        close(out[1]);
        return (struct child){ .pid = pid, .to_child = in[1], .from_child = out[0] };
}

static void read_line(struct child *c, char *buf, size_t len) {
        size_t n = 0;
        while (n + 1 < len) {
                ssize_t k = read(c->from_child, buf + n, 1);
                if (k <= 0 || buf[n] == '\n')
                        break;
                n++;
        }
        buf[n] = '\0';
}

static int finish(struct child *c) {
        close(c->to_child);
        close(c->from_child);
        int st = 0;
        assert_int_equal(waitpid(c->pid, &st, 0), c->pid);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Memory NVML lists for pid on gpu; 0 when the process is not listed, ULLONG_MAX-1 if listed with 0. */
static bool nvml_proc(unsigned gpu, unsigned pid, unsigned long long *ret_used) {
        nvmlProcessInfo_t infos[64];
        unsigned count = 64;
        assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(sim_dev(gpu), &count, infos), NVML_SUCCESS);
        for (unsigned i = 0; i < count; i++)
                if (infos[i].pid == pid) {
                        if (ret_used)
                                *ret_used = infos[i].usedGpuMemory;
                        return true;
                }
        return false;
}

static int group_setup(void **state) {
        (void)state;
        if (sim_nvml_load() < 0 || load_cuda() < 0)
                return -1;
        sim_select(NODE_FILE);
        unsetenv("CUDA_VISIBLE_DEVICES");
        if (sim_parse_file(NODE_FILE, &T) < 0)
                return -1;
        if (N.nvmlInit_v2() != NVML_SUCCESS || C.cuInit(0) != CUDA_SUCCESS)
                return -1;
        return 0;
}

static int group_teardown(void **state) {
        (void)state;
        sim_shutdown_all();
        sim_remove_tmpdir();
        return 0;
}

/* Leave no context current and nothing allocated between tests. */
static CUcontext retain_current(unsigned d) {
        CUcontext ctx = NULL;
        assert_int_equal(C.cuDevicePrimaryCtxRetain(&ctx, (CUdevice)d), CUDA_SUCCESS);
        assert_int_equal(C.cuCtxSetCurrent(ctx), CUDA_SUCCESS);
        return ctx;
}

static void release(unsigned d) {
        assert_int_equal(C.cuDevicePrimaryCtxRelease_v2((CUdevice)d), CUDA_SUCCESS);
}

/* ---- tests ---- */

static void test_driverless_process(void **state) {
        (void)state;
        struct child c = spawn("child-no-node", NULL, NULL);
        assert_int_equal(finish(&c), 0);
}

static void test_visible_devices(void **state) {
        (void)state;
        setenv("CUDA_VISIBLE_DEVICES", "3,1", 1);
        struct child c = spawn("child-visible", "3", "1");
        assert_int_equal(finish(&c), 0);
        setenv("CUDA_VISIBLE_DEVICES", "5,nonsense,2", 1); /* the list ends at the first bad entry */
        c = spawn("child-visible", "5", NULL);
        assert_int_equal(finish(&c), 0);
        unsetenv("CUDA_VISIBLE_DEVICES");
}

static void test_init_flags(void **state) {
        (void)state;
        assert_int_equal(C.cuInit(1), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(C.cuInit(0), CUDA_SUCCESS);
}

static void test_devices_match_node(void **state) {
        (void)state;
        int n = 0;
        assert_int_equal(C.cuDeviceGetCount(&n), CUDA_SUCCESS);
        assert_int_equal(n, T.n_gpus);
        CUdevice d;
        assert_int_equal(C.cuDeviceGet(&d, n), CUDA_ERROR_INVALID_DEVICE);
        assert_int_equal(C.cuDeviceGet(&d, -1), CUDA_ERROR_INVALID_DEVICE);
        for (int i = 0; i < n; i++) {
                assert_int_equal(C.cuDeviceGet(&d, i), CUDA_SUCCESS);
                char name[128];
                assert_int_equal(C.cuDeviceGetName(name, sizeof name, d), CUDA_SUCCESS);
                assert_string_equal(name, T.gpu[i].name);
                size_t total = 0;
                assert_int_equal(C.cuDeviceTotalMem_v2(&total, d), CUDA_SUCCESS);
                assert_int_equal(total, T.gpu[i].memory_total);
                int v = 0;
                assert_int_equal(C.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d), CUDA_SUCCESS);
                assert_int_equal(v, T.gpu[i].sm_count);
                assert_int_equal(C.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d),
                                 CUDA_SUCCESS);
                assert_int_equal(v, T.gpu[i].cc_major);
                assert_int_equal(C.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d),
                                 CUDA_SUCCESS);
                assert_int_equal(v, T.gpu[i].cc_minor);
                /* the UUID's 16 bytes are the hex digits of NVML's "GPU-..." string */
                CUuuid u;
                assert_int_equal(C.cuDeviceGetUuid_v2(&u, d), CUDA_SUCCESS);
                char hex[40] = "", *w = hex;
                for (unsigned k = 0; k < 16; k++)
                        w += snprintf(w, 3, "%02x", (unsigned char)u.bytes[k]);
                char plain[40] = "";
                unsigned m = 0;
                for (const char *s = T.gpu[i].uuid + 4; *s && m < 32; s++)
                        if (*s != '-')
                                plain[m++] = (char)(*s >= 'A' && *s <= 'F' ? *s - 'A' + 'a' : *s);
                assert_string_equal(hex, plain);
        }
        int v;
        assert_int_equal(C.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
        char small[6];
        assert_int_equal(C.cuDeviceGetName(small, sizeof small, 0), CUDA_SUCCESS); /* truncated, terminated */
        assert_int_equal(strlen(small), sizeof small - 1);
        unsigned legacy = 0;
        assert_int_equal(C.cuDeviceTotalMem(&legacy, 0), CUDA_SUCCESS);
        assert_true(legacy > 0);
}

static void test_alloc_needs_context(void **state) {
        (void)state;
        assert_int_equal(C.cuCtxSetCurrent(NULL), CUDA_SUCCESS);
        CUdeviceptr p;
        assert_int_equal(C.cuMemAlloc_v2(&p, 1 << 20), CUDA_ERROR_INVALID_CONTEXT);
        size_t f, t;
        assert_int_equal(C.cuMemGetInfo_v2(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
        int garbage = 0;
        assert_int_equal(C.cuCtxSetCurrent((CUcontext)&garbage), CUDA_ERROR_INVALID_CONTEXT);
}

static void test_alloc_free_shows_in_nvml(void **state) {
        (void)state;
        retain_current(2);
        unsigned pid = (unsigned)getpid();
        unsigned long long used = 0;
        assert_true(nvml_proc(2, pid, &used)); /* a context makes the process a GPU process */
        assert_int_equal(used, 0);
        size_t free0, total;
        assert_int_equal(C.cuMemGetInfo_v2(&free0, &total), CUDA_SUCCESS);
        assert_int_equal(total, T.gpu[2].memory_total);
        CUdeviceptr a, b;
        assert_int_equal(C.cuMemAlloc_v2(&a, 300u << 20), CUDA_SUCCESS);
        assert_int_equal(C.cuMemAlloc_v2(&b, 200u << 20), CUDA_SUCCESS);
        assert_true(b >= a + (300u << 20) || a >= b + (200u << 20)); /* no overlap */
        assert_true(nvml_proc(2, pid, &used));
        assert_int_equal(used, 500u << 20);
        size_t free1;
        assert_int_equal(C.cuMemGetInfo_v2(&free1, &total), CUDA_SUCCESS);
        assert_int_equal(free0 - free1, 500u << 20);
        assert_int_equal(C.cuMemFree_v2(a), CUDA_SUCCESS);
        assert_int_equal(C.cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE); /* double free */
        assert_true(nvml_proc(2, pid, &used));
        assert_int_equal(used, 200u << 20);
        release(2); /* frees b with the context, and the process leaves the list */
        assert_false(nvml_proc(2, pid, NULL));
        CUcontext cur = (CUcontext)1;
        assert_int_equal(C.cuCtxGetCurrent(&cur), CUDA_SUCCESS);
        assert_null(cur);
}

static void test_ctx_destroy_frees_memory(void **state) {
        (void)state;
        CUcontext ctx = NULL;
        assert_int_equal(C.cuCtxCreate_v2(&ctx, 0, 4), CUDA_SUCCESS);
        CUcontext cur = NULL;
        assert_int_equal(C.cuCtxGetCurrent(&cur), CUDA_SUCCESS);
        assert_ptr_equal(cur, ctx);
        CUdeviceptr p;
        assert_int_equal(C.cuMemAlloc_v2(&p, 64u << 20), CUDA_SUCCESS);
        unsigned long long used = 0;
        assert_true(nvml_proc(4, (unsigned)getpid(), &used));
        assert_int_equal(used, 64u << 20);
        assert_int_equal(C.cuCtxDestroy_v2(ctx), CUDA_SUCCESS);
        assert_false(nvml_proc(4, (unsigned)getpid(), NULL));
        assert_int_equal(C.cuMemAlloc_v2(&p, 1), CUDA_ERROR_INVALID_CONTEXT);
}

static void test_out_of_memory_and_exact_fit(void **state) {
        (void)state;
        retain_current(5);
        size_t f, t;
        assert_int_equal(C.cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
        CUdeviceptr p, q;
        assert_int_equal(C.cuMemAlloc_v2(&p, f + 1), CUDA_ERROR_OUT_OF_MEMORY);
        assert_int_equal(C.cuMemAlloc_v2(&p, f), CUDA_SUCCESS); /* exactly what is free */
        assert_int_equal(C.cuMemAlloc_v2(&q, 1), CUDA_ERROR_OUT_OF_MEMORY);
        size_t f2;
        assert_int_equal(C.cuMemGetInfo_v2(&f2, &t), CUDA_SUCCESS);
        assert_int_equal(f2, 0);
        assert_int_equal(C.cuMemAlloc_v2(&q, 0), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(C.cuMemFree_v2(p), CUDA_SUCCESS);
        release(5);
}

#define SYM(name) ((__typeof__(&name))dlsym(cuda_dl, #name))

/* Peer access as the driver API documents it, on the DGX-1's hybrid cube mesh: NVLink pairs reach each
 * other, GPU0 and GPU5 (no NVLink, across the CPU sockets: SYS) do not. */
static void test_peer_access(void **state) {
        (void)state;
        __typeof__(&cuDeviceCanAccessPeer) can = SYM(cuDeviceCanAccessPeer);
        __typeof__(&cuCtxEnablePeerAccess) enable = SYM(cuCtxEnablePeerAccess);
        __typeof__(&cuCtxDisablePeerAccess) disable = SYM(cuCtxDisablePeerAccess);
        assert_non_null(can);
        assert_non_null(enable);
        assert_non_null(disable);
        int v = -1;
        assert_int_equal(can(&v, 0, 1), CUDA_SUCCESS);
        assert_int_equal(v, 1);
        assert_int_equal(can(&v, 0, 5), CUDA_SUCCESS);
        assert_int_equal(v, 0);
        assert_int_equal(can(&v, 0, 0), CUDA_SUCCESS);
        assert_int_equal(v, 0);
        assert_int_equal(can(&v, 0, 64), CUDA_ERROR_INVALID_DEVICE);
        CUcontext c0 = retain_current(0), c1 = NULL, c5 = NULL;
        assert_int_equal(C.cuDevicePrimaryCtxRetain(&c1, 1), CUDA_SUCCESS);
        assert_int_equal(C.cuDevicePrimaryCtxRetain(&c5, 5), CUDA_SUCCESS);
        assert_int_equal(enable(c1, 1), CUDA_ERROR_INVALID_VALUE);   /* Flags must be 0 */
        assert_int_equal(enable(c0, 0), CUDA_ERROR_INVALID_CONTEXT); /* the current context itself */
        assert_int_equal(enable(c5, 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
        assert_int_equal(enable(c1, 0), CUDA_SUCCESS);
        assert_int_equal(enable(c1, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
        assert_int_equal(disable(c1), CUDA_SUCCESS);
        assert_int_equal(disable(c1), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
        assert_int_equal(C.cuCtxSetCurrent(NULL), CUDA_SUCCESS);
        assert_int_equal(enable(c1, 0), CUDA_ERROR_INVALID_CONTEXT); /* no current context */
        release(5);
        release(1);
        release(0);
}

/* A VMM allocation shared as a POSIX file descriptor (NCCL's way) imports as the same device's memory, charged
 * once; cuMemSetAccess wants a fully mapped range, devices that exist and valid flags. */
static void test_vmm_posix_fd_and_access(void **state) {
        (void)state;
        retain_current(0);
        CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                     .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                     .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
        CUmemGenericAllocationHandle h, imp;
        int fd = -1;
        assert_int_equal(SYM(cuMemCreate)(&h, 2u << 20, &prop, 0), CUDA_SUCCESS);
        assert_int_equal(SYM(cuMemExportToShareableHandle)(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                         CUDA_SUCCESS);
        assert_true(fd >= 0);
        assert_int_equal(SYM(cuMemImportFromShareableHandle)(&imp, (void *)(uintptr_t)fd,
                                                             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                         CUDA_SUCCESS);
        close(fd);
        unsigned long long used = 0;
        assert_true(nvml_proc(0, (unsigned)getpid(), &used));
        assert_int_equal(used, 2u << 20); /* the import is the same memory */
        CUdeviceptr va = 0;
        CUmemAccessDesc acc = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        assert_int_equal(SYM(cuMemAddressReserve)(&va, 4u << 20, 0, 0, 0), CUDA_SUCCESS);
        assert_int_equal(SYM(cuMemMap)(va, 2u << 20, 0, imp, 0), CUDA_SUCCESS);
        assert_int_equal(SYM(cuMemSetAccess)(va, 2u << 20, &acc, 1), CUDA_SUCCESS);
        assert_int_equal(SYM(cuMemSetAccess)(va, 4u << 20, &acc, 1), CUDA_ERROR_INVALID_VALUE); /* half unmapped */
        acc.flags = (CUmemAccess_flags)2;
        assert_int_equal(SYM(cuMemSetAccess)(va, 2u << 20, &acc, 1), CUDA_ERROR_INVALID_VALUE);
        acc = (CUmemAccessDesc){ { CU_MEM_LOCATION_TYPE_DEVICE, 64 }, CU_MEM_ACCESS_FLAGS_PROT_READ };
        assert_int_equal(SYM(cuMemSetAccess)(va, 2u << 20, &acc, 1), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(SYM(cuMemImportFromShareableHandle)(&imp, (void *)(uintptr_t)9999,
                                                             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                         CUDA_ERROR_INVALID_VALUE); /* not a descriptor */
        assert_int_equal(SYM(cuMemUnmap)(va, 2u << 20), CUDA_SUCCESS);
        assert_int_equal(SYM(cuMemRelease)(imp), CUDA_SUCCESS);
        assert_int_equal(SYM(cuMemRelease)(h), CUDA_SUCCESS);
        release(0);
}

static void test_legacy_entry_points(void **state) {
        (void)state;
        retain_current(6);
        CUdeviceptr_v1 p = 0;
        assert_int_equal(C.cuMemAlloc(&p, 1u << 20), CUDA_SUCCESS);
        assert_true(p != 0);
        unsigned long long used = 0;
        assert_true(nvml_proc(6, (unsigned)getpid(), &used));
        assert_int_equal(used, 1u << 20);
        assert_int_equal(C.cuMemFree(p), CUDA_SUCCESS);
        release(6);
}

static void test_get_proc_address_versions(void **state) {
        (void)state;
        static const struct {
                const char *name;
                int version;
                const char *symbol; /* NULL: not found */
                CUdriverProcAddressQueryResult status;
        } cases[] = {
                { "cuMemAlloc", 13000, "cuMemAlloc_v2", CU_GET_PROC_ADDRESS_SUCCESS },
                { "cuMemAlloc", 3020, "cuMemAlloc_v2", CU_GET_PROC_ADDRESS_SUCCESS },
                { "cuMemAlloc", 3010, "cuMemAlloc", CU_GET_PROC_ADDRESS_SUCCESS },
                { "cuCtxCreate", 13000, "cuCtxCreate_v4", CU_GET_PROC_ADDRESS_SUCCESS },
                { "cuCtxCreate", 12000, "cuCtxCreate_v3", CU_GET_PROC_ADDRESS_SUCCESS },
                { "cuCtxCreate", 11000, "cuCtxCreate_v2", CU_GET_PROC_ADDRESS_SUCCESS },
                { "cuDevicePrimaryCtxRelease", 12000, "cuDevicePrimaryCtxRelease_v2", CU_GET_PROC_ADDRESS_SUCCESS },
                { "cuDevicePrimaryCtxRelease", 10000, "cuDevicePrimaryCtxRelease", CU_GET_PROC_ADDRESS_SUCCESS },
                { "cuGetProcAddress", 12000, "cuGetProcAddress_v2", CU_GET_PROC_ADDRESS_SUCCESS },
                { "cuGetProcAddress", 11030, "cuGetProcAddress", CU_GET_PROC_ADDRESS_SUCCESS },
                { "cuDeviceGetUuid", 9000, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT },
                { "cuFrobnicate", 13000, NULL, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND },
                { "cuMemAlloc_v2", 13000, NULL, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND }, /* base names only */
                /* CUDA 13.0's context-taking variants, and the entry points added for the interposer */
                { "cuCtxSynchronize", 13000, "cuCtxSynchronize_v2", CU_GET_PROC_ADDRESS_SUCCESS },
                { "cuCtxSynchronize", 12090, "cuCtxSynchronize", CU_GET_PROC_ADDRESS_SUCCESS },
                { "cuCtxGetDevice", 13000, "cuCtxGetDevice_v2", CU_GET_PROC_ADDRESS_SUCCESS },
                { "cuCtxGetDevice", 2000, "cuCtxGetDevice", CU_GET_PROC_ADDRESS_SUCCESS },
                { "cuCtxSetLimit", 3010, "cuCtxSetLimit", CU_GET_PROC_ADDRESS_SUCCESS },
                { "cuModuleLoadDataEx", 13000, "cuModuleLoadDataEx", CU_GET_PROC_ADDRESS_SUCCESS },
                { "cuLibraryLoadData", 11080, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT },
                { "cuMemPoolImportPointer", 11020, "cuMemPoolImportPointer", CU_GET_PROC_ADDRESS_SUCCESS },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                void *fn = (void *)1;
                CUdriverProcAddressQueryResult st = 99;
                CUresult r = C.cuGetProcAddress_v2(cases[i].name, &fn, cases[i].version, 0, &st);
                assert_int_equal(st, cases[i].status);
                if (cases[i].symbol) {
                        assert_int_equal(r, CUDA_SUCCESS);
                        assert_ptr_equal(fn, dlsym(cuda_dl, cases[i].symbol));
                } else {
                        assert_int_equal(r, CUDA_ERROR_NOT_FOUND);
                        assert_null(fn);
                }
        }
        void *fn;
        assert_int_equal(C.cuGetProcAddress("cuMemGetInfo", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
                         CUDA_SUCCESS);
        assert_ptr_equal(fn, dlsym(cuda_dl, "cuMemGetInfo_v2"));
        /* per-thread default stream: the _ptsz variant where there is one */
        assert_int_equal(
                C.cuGetProcAddress("cuLaunchKernel", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
                CUDA_SUCCESS);
        assert_ptr_equal(fn, dlsym(cuda_dl, "cuLaunchKernel_ptsz"));
        assert_int_equal(C.cuGetProcAddress("cuLaunchKernel", &fn, 13000, 0), CUDA_SUCCESS);
        assert_ptr_equal(fn, dlsym(cuda_dl, "cuLaunchKernel"));
        assert_int_equal(C.cuGetProcAddress_v2(NULL, &fn, 12000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
        assert_int_equal(C.cuGetProcAddress_v2("cuInit", &fn, 12000, 1u << 7, NULL), CUDA_ERROR_INVALID_VALUE);
}

/* Memory the driver takes without an allocation: context limits and loaded code (as NVML sees it). */
static void test_limits_and_modules_take_memory(void **state) {
        (void)state;
        PFN_cuCtxSetLimit_v3010 set_limit = (PFN_cuCtxSetLimit_v3010)dlsym(cuda_dl, "cuCtxSetLimit");
        PFN_cuCtxGetLimit_v3010 get_limit = (PFN_cuCtxGetLimit_v3010)dlsym(cuda_dl, "cuCtxGetLimit");
        PFN_cuModuleLoadData_v2000 load = (PFN_cuModuleLoadData_v2000)dlsym(cuda_dl, "cuModuleLoadData");
        PFN_cuModuleUnload_v2000 unload = (PFN_cuModuleUnload_v2000)dlsym(cuda_dl, "cuModuleUnload");
        PFN_cuLibraryLoadData_v12000 lib_load = (PFN_cuLibraryLoadData_v12000)dlsym(cuda_dl, "cuLibraryLoadData");
        PFN_cuLibraryUnload_v12000 lib_unload = (PFN_cuLibraryUnload_v12000)dlsym(cuda_dl, "cuLibraryUnload");
        assert_non_null(set_limit);
        assert_non_null(get_limit);
        assert_non_null(load);
        assert_non_null(unload);
        assert_non_null(lib_load);
        assert_non_null(lib_unload);
        retain_current(3);
        unsigned pid = (unsigned)getpid();
        unsigned long long used = 1;
        size_t v = 0;
        assert_int_equal(get_limit(&v, CU_LIMIT_MALLOC_HEAP_SIZE), CUDA_SUCCESS);
        assert_int_equal(v, 8u << 20); /* the default heap is part of the context */
        assert_int_equal(set_limit(CU_LIMIT_MALLOC_HEAP_SIZE, 72u << 20), CUDA_SUCCESS);
        assert_true(nvml_proc(3, pid, &used));
        assert_int_equal(used, 64u << 20);
        assert_int_equal(set_limit(CU_LIMIT_STACK_SIZE, 2048), CUDA_SUCCESS); /* 1 KiB more per resident thread */
        assert_true(nvml_proc(3, pid, &used));
        assert_int_equal(used, (64u << 20) + 1024ULL * T.gpu[3].sm_count * 2048);
        assert_int_equal(set_limit(CU_LIMIT_STACK_SIZE, 1024), CUDA_SUCCESS);
        assert_int_equal(set_limit(CU_LIMIT_MALLOC_HEAP_SIZE, (size_t)T.gpu[3].memory_total), CUDA_ERROR_OUT_OF_MEMORY);
        assert_int_equal(get_limit(&v, CU_LIMIT_MALLOC_HEAP_SIZE), CUDA_SUCCESS);
        assert_int_equal(v, 72u << 20); /* unchanged by the refusal */
        assert_int_equal(set_limit(CU_LIMIT_MALLOC_HEAP_SIZE, 8u << 20), CUDA_SUCCESS);
        assert_true(nvml_proc(3, pid, &used));
        assert_int_equal(used, 0);
        /* a module: 2 MiB of code + its globals, until unloaded */
        CUmodule m = NULL;
        assert_int_equal(load(&m, "gpuslice-sim-module globals=30M"), CUDA_SUCCESS);
        assert_true(nvml_proc(3, pid, &used));
        assert_int_equal(used, 32u << 20);
        CUlibrary l = NULL;
        assert_int_equal(lib_load(&l, "gpuslice-sim-module", NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
        assert_true(nvml_proc(3, pid, &used));
        assert_int_equal(used, 34u << 20);
        assert_int_equal(lib_unload(l), CUDA_SUCCESS);
        assert_int_equal(unload(m), CUDA_SUCCESS);
        assert_int_equal(unload(m), CUDA_ERROR_INVALID_HANDLE);
        assert_true(nvml_proc(3, pid, &used));
        assert_int_equal(used, 0);
        /* malformed simulated images are code only (2 MiB): no globals parsed from them */
        static const char *const bad[] = { "gpuslice-sim-module globals=",
                                           "gpuslice-sim-module globals=lots",
                                           "gpuslice-sim-module globals=-5",
                                           "gpuslice-sim-module globals=1M junk",
                                           "gpuslice-sim-module globals=99999999999999999999999",
                                           "gpuslice-sim-modul globals=1G",
                                           "\177ELF\002\001" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(load(&m, bad[i]), CUDA_SUCCESS);
                assert_true(nvml_proc(3, pid, &used));
                if (used != 2u << 20)
                        fail_msg("image '%s' took %llu bytes", bad[i], used);
                assert_int_equal(unload(m), CUDA_SUCCESS);
        }
        /* with the context: its modules and limits go */
        assert_int_equal(load(&m, "gpuslice-sim-module globals=30M"), CUDA_SUCCESS);
        assert_int_equal(set_limit(CU_LIMIT_PRINTF_FIFO_SIZE, 17u << 20), CUDA_SUCCESS);
        assert_true(nvml_proc(3, pid, &used));
        assert_int_equal(used, 48u << 20);
        release(3);
        assert_false(nvml_proc(3, pid, NULL));
        retain_current(3);
        assert_int_equal(get_limit(&v, CU_LIMIT_PRINTF_FIFO_SIZE), CUDA_SUCCESS);
        assert_int_equal(v, 1u << 20); /* a new context: the defaults */
        release(3);
}

/* Only the CUDA API leaves the library. */
static void test_exports_only_cuda(void **state) {
        (void)state;
        static const char *const internal[] = { "topo_parse", "sim_state_open", "sim_node_load", "read_file" };
        for (size_t i = 0; i < ELEMENTSOF(internal); i++)
                assert_null(dlsym(cuda_dl, internal[i]));
}

static void test_error_names_and_strings(void **state) {
        (void)state;
        const char *s = NULL;
        assert_int_equal(C.cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
        assert_string_equal(s, "CUDA_ERROR_OUT_OF_MEMORY");
        assert_int_equal(C.cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
        assert_string_equal(s, "out of memory");
        assert_int_equal(C.cuGetErrorString(CUDA_SUCCESS, &s), CUDA_SUCCESS);
        assert_string_equal(s, "no error");
        assert_int_equal(C.cuGetErrorName(CUDA_ERROR_KEY_ROTATION, &s), CUDA_SUCCESS);
        assert_string_equal(s, "CUDA_ERROR_KEY_ROTATION");
        assert_int_equal(C.cuGetErrorString((CUresult)123456, &s), CUDA_ERROR_INVALID_VALUE);
        assert_null(s);
        assert_int_equal(C.cuGetErrorName(CUDA_SUCCESS, NULL), CUDA_ERROR_INVALID_VALUE);
}

/* A separate process's allocation is in NVML's list while it lives, and gone when it exits. */
static void test_other_process_allocation_visible(void **state) {
        (void)state;
        struct child c = spawn("child-alloc", "1", "1073741824");
        char line[32];
        read_line(&c, line, sizeof line);
        assert_string_equal(line, "ready");
        unsigned long long used = 0;
        assert_true(nvml_proc(1, (unsigned)c.pid, &used));
        assert_int_equal(used, 1ULL << 30);
        nvmlMemory_v2_t m = { .version = nvmlMemory_v2 };
        assert_int_equal(N.nvmlDeviceGetMemoryInfo_v2(sim_dev(1), &m), NVML_SUCCESS);
        assert_true(m.used >= (1ULL << 30));
        assert_int_equal(finish(&c), 0);
        assert_false(nvml_proc(1, (unsigned)c.pid, NULL));
}

/* A SIGKILLed process gets no chance to clean up: its memory is pruned as its PID is dead. */
static void test_killed_process_memory_released(void **state) {
        (void)state;
        retain_current(3);
        size_t free0, t;
        assert_int_equal(C.cuMemGetInfo_v2(&free0, &t), CUDA_SUCCESS);
        struct child c = spawn("child-alloc", "3", "2147483648");
        char line[32];
        read_line(&c, line, sizeof line);
        assert_string_equal(line, "ready");
        assert_true(nvml_proc(3, (unsigned)c.pid, NULL));
        size_t free1;
        assert_int_equal(C.cuMemGetInfo_v2(&free1, &t), CUDA_SUCCESS);
        assert_int_equal(free0 - free1, 2ULL << 30);
        kill(c.pid, SIGKILL);
        assert_int_equal(finish(&c), 128 + SIGKILL);
        assert_false(nvml_proc(3, (unsigned)c.pid, NULL));
        assert_int_equal(C.cuMemGetInfo_v2(&free1, &t), CUDA_SUCCESS);
        assert_int_equal(free1, free0);
        release(3);
}

/* Capacity is per GPU across processes: what one holds, another cannot get. */
static void test_capacity_shared_between_processes(void **state) {
        (void)state;
        retain_current(7);
        size_t f, t;
        assert_int_equal(C.cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
        char bytes[32];
        snprintf(bytes, sizeof bytes, "%zu", f - (1u << 20)); /* leave 1 MiB */
        struct child c = spawn("child-alloc", "7", bytes);
        char line[32];
        read_line(&c, line, sizeof line);
        assert_string_equal(line, "ready");
        CUdeviceptr p;
        assert_int_equal(C.cuMemAlloc_v2(&p, 2u << 20), CUDA_ERROR_OUT_OF_MEMORY);
        assert_int_equal(C.cuMemAlloc_v2(&p, 1u << 20), CUDA_SUCCESS);
        assert_int_equal(finish(&c), 0);
        assert_int_equal(C.cuMemFree_v2(p), CUDA_SUCCESS);
        release(7);
}

/* The GPU's compute mode (set through NVML, root's) rules new contexts: PROHIBITED none, EXCLUSIVE_PROCESS one
 * process's (CUDA_ERROR_DEVICE_UNAVAILABLE for a second process, either way round), DEFAULT any; NVML refuses
 * EXCLUSIVE_THREAD (support removed) and modes past the enum. */
static void test_compute_mode(void **state) {
        (void)state;
        nvmlDevice_t d = sim_dev(5);
        nvmlComputeMode_t mode = NVML_COMPUTEMODE_COUNT;
        assert_int_equal(N.nvmlDeviceGetComputeMode(d, &mode), NVML_SUCCESS);
        assert_int_equal(mode, NVML_COMPUTEMODE_DEFAULT);
        assert_int_equal(N.nvmlDeviceGetComputeMode(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N.nvmlDeviceSetComputeMode(d, NVML_COMPUTEMODE_COUNT), NVML_ERROR_INVALID_ARGUMENT);
        assert_int_equal(N.nvmlDeviceSetComputeMode(d, NVML_COMPUTEMODE_EXCLUSIVE_THREAD), NVML_ERROR_INVALID_ARGUMENT);
        if (geteuid() != 0) { /* NVML wants root (or CAP_SYS_ADMIN) to set it */
                assert_int_equal(N.nvmlDeviceSetComputeMode(d, NVML_COMPUTEMODE_PROHIBITED), NVML_ERROR_NO_PERMISSION);
                return;
        }
        CUcontext ctx;
        int v = -1;
        assert_int_equal(N.nvmlDeviceSetComputeMode(d, NVML_COMPUTEMODE_PROHIBITED), NVML_SUCCESS);
        assert_int_equal(C.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, 5), CUDA_SUCCESS);
        assert_int_equal(v, CU_COMPUTEMODE_PROHIBITED);
        assert_int_equal(C.cuDevicePrimaryCtxRetain(&ctx, 5), CUDA_ERROR_DEVICE_UNAVAILABLE);
        assert_int_equal(C.cuCtxCreate_v2(&ctx, 0, 5), CUDA_ERROR_DEVICE_UNAVAILABLE);
        assert_false(nvml_proc(5, (unsigned)getpid(), NULL));

        assert_int_equal(N.nvmlDeviceSetComputeMode(d, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetComputeMode(d, &mode), NVML_SUCCESS);
        assert_int_equal(mode, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS);
        struct child c = spawn("child-alloc", "5", "1048576");
        char line[32];
        read_line(&c, line, sizeof line);
        assert_string_equal(line, "ready");                                                   /* the first process */
        assert_int_equal(C.cuDevicePrimaryCtxRetain(&ctx, 5), CUDA_ERROR_DEVICE_UNAVAILABLE); /* a second one */
        assert_int_equal(finish(&c), 0);
        retain_current(5); /* the first gone: this process is the one now, and may hold more than one context */
        CUcontext other;
        assert_int_equal(C.cuCtxCreate_v2(&other, 0, 5), CUDA_SUCCESS);
        assert_int_equal(C.cuCtxDestroy_v2(other), CUDA_SUCCESS);
        c = spawn("child-alloc", "5", "1048576");
        assert_int_equal(finish(&c), 12);         /* its cuDevicePrimaryCtxRetain failed */
        c = spawn("child-alloc", "6", "1048576"); /* another GPU, in DEFAULT mode */
        read_line(&c, line, sizeof line);
        assert_string_equal(line, "ready");
        assert_int_equal(finish(&c), 0);
        release(5);
        assert_int_equal(N.nvmlDeviceSetComputeMode(d, NVML_COMPUTEMODE_DEFAULT), NVML_SUCCESS);
}

/* The workload program, found through the library path like a real CUDA program. */
static void test_workload_program(void **state) {
        (void)state;
        int out[2];
        assert_int_equal(pipe2(out, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                dup2(out[1], STDOUT_FILENO);
                setenv("LD_LIBRARY_PATH", GPUSLICE_BUILD_DIR "/sim", 1);
                execl(WORKLOAD, "gpuslice-sim-workload", "--gpu", "0", "--mem", "768MiB", "--seconds", "60", "--chunks",
                      "3", (char *)NULL);
                _exit(127);
        }
        close(out[1]);
        struct child c = { .pid = pid, .to_child = -1, .from_child = out[0] };
        char line[128];
        read_line(&c, line, sizeof line);
        assert_true(startswith(line, "ready pid="));
        unsigned long long used = 0;
        assert_true(nvml_proc(0, (unsigned)pid, &used));
        assert_int_equal(used, 768ULL << 20);
        kill(pid, SIGTERM); /* frees and exits cleanly */
        close(out[0]);
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
        assert_false(nvml_proc(0, (unsigned)pid, NULL));
}

/* Exit codes: out of memory is 3, a bad command line 2, a driver that cannot be loaded 4. */
static int run_workload(const char *mem, const char *driver) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
                dup2(null, STDOUT_FILENO);
                dup2(null, STDERR_FILENO);
                execl(WORKLOAD, "gpuslice-sim-workload", "--gpu", "0", "--mem", mem, "--seconds", "0", "--driver",
                      driver, (char *)NULL);
                _exit(127);
        }
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_workload_exit_codes(void **state) {
        (void)state;
        assert_int_equal(run_workload("1MiB", SIM_CUDA_PATH), 0);
        assert_int_equal(run_workload("1TiB", SIM_CUDA_PATH), 3);
        assert_int_equal(run_workload("lots", SIM_CUDA_PATH), 2);
        assert_int_equal(run_workload("1MiB", "/nonexistent/libcuda.so.1"), 4);
}

int main(int argc, char **argv) {
        if (argc >= 2 && streq(argv[1], "child-no-node"))
                return child_no_node();
        if (argc >= 2 && streq(argv[1], "child-visible")) {
                int r = child_visible(argc - 2, argv + 2);
                sim_remove_tmpdir();
                return r;
        }
        if (argc >= 2 && streq(argv[1], "child-alloc"))
                return child_alloc(argc - 2, argv + 2);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_driverless_process),
                cmocka_unit_test(test_visible_devices),
                cmocka_unit_test(test_init_flags),
                cmocka_unit_test(test_devices_match_node),
                cmocka_unit_test(test_alloc_needs_context),
                cmocka_unit_test(test_alloc_free_shows_in_nvml),
                cmocka_unit_test(test_ctx_destroy_frees_memory),
                cmocka_unit_test(test_out_of_memory_and_exact_fit),
                cmocka_unit_test(test_legacy_entry_points),
                cmocka_unit_test(test_peer_access),
                cmocka_unit_test(test_vmm_posix_fd_and_access),
                cmocka_unit_test(test_get_proc_address_versions),
                cmocka_unit_test(test_limits_and_modules_take_memory),
                cmocka_unit_test(test_exports_only_cuda),
                cmocka_unit_test(test_error_names_and_strings),
                cmocka_unit_test(test_other_process_allocation_visible),
                cmocka_unit_test(test_killed_process_memory_released),
                cmocka_unit_test(test_capacity_shared_between_processes),
                cmocka_unit_test(test_compute_mode),
                cmocka_unit_test(test_workload_program),
                cmocka_unit_test(test_workload_exit_codes),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
