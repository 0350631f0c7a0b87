/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuslice-sim-workload — a tiny GPU program for tests and demos: allocate device memory on one
 * GPU through the CUDA driver API and hold it for a while. It loads the driver the way a CUDA 12+
 * runtime does — dlopen("libcuda.so.1"), then every entry point through cuGetProcAddress_v2 — so
 * whatever libcuda.so.1 the library path (or a preload) puts first is what it uses.
 *
 *   gpuslice-sim-workload --gpu N --mem SIZE --seconds S [--chunks K] [--driver PATH]
 *
 * Prints "ready pid=P gpu=N bytes=B" on stdout once the memory is held. Exit codes: 0 done,
 * 1 a CUDA call failed, 2 bad command line, 3 out of memory, 4 the driver could not be loaded.
 * It must never link against libcuda (that would pin one library at build time).
 */
#include "interposer/cuda-abi.h" /* the driver API as gpuslice declares it: no CUDA toolkit needed */

#include <dlfcn.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

enum {
        EXIT_OK = 0,
        EXIT_CUDA = 1,
        EXIT_USAGE = 2,
        EXIT_OOM = 3,
        EXIT_DRIVER = 4
};

#define CUDA_VERSION_WANTED 12000
#define MAX_CHUNKS 1024

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
        (void)sig;
        stop = 1;
}

static struct {
        PFN_cuGetProcAddress_v12000 getProcAddress;
        PFN_cuInit_v2000 init;
        PFN_cuDeviceGet_v2000 deviceGet;
        PFN_cuDevicePrimaryCtxRetain_v7000 retain;
        PFN_cuDevicePrimaryCtxRelease_v11000 release;
        PFN_cuCtxSetCurrent_v4000 setCurrent;
        PFN_cuMemAlloc_v3020 alloc;
        PFN_cuMemFree_v3020 free;
        PFN_cuGetErrorName_v6000 errorName;
} cu;

static void usage(FILE *f) {
        fputs("Usage: gpuslice-sim-workload --gpu N --mem SIZE --seconds S [--chunks K] [--driver PATH]\n"
              "\n"
              "Allocate SIZE (24GiB, 512MiB, bytes) of device memory on CUDA device N in K allocations\n"
              "(default 1), hold it S seconds (until SIGTERM/SIGINT if sooner), free it and exit.\n"
              "The driver is dlopen(\"libcuda.so.1\") unless --driver names a file; if the library path\n"
              "has none, the simulated libcuda.so.1 next to this program is used.\n"
              "Exit codes: 0 done, 1 CUDA error, 2 usage, 3 out of memory, 4 driver not loadable.\n",
              f);
}

static void *load_driver(const char *path) {
        if (path)
                return dlopen(path, RTLD_NOW | RTLD_LOCAL);
        void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (dl)
                return dl;
        char self[PATH_MAX], beside[PATH_MAX + 32];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0)
                return NULL;
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (!slash)
                return NULL;
        *slash = '\0';
        snprintf(beside, sizeof beside, "%s/libcuda.so.1", self);
        return dlopen(beside, RTLD_NOW | RTLD_LOCAL);
}

static int resolve(const char *name, void **fn) {
        CUdriverProcAddressQueryResult st;
        if (cu.getProcAddress(name, fn, CUDA_VERSION_WANTED, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS ||
            !*fn) {
                fprintf(stderr, "gpuslice-sim-workload: the driver has no %s\n", name);
                return -1;
        }
        return 0;
}

static int fail(const char *what, CUresult r) {
        const char *name = NULL;
        if (cu.errorName)
                cu.errorName(r, &name);
        fprintf(stderr, "gpuslice-sim-workload: %s: %s (%d)\n", what, name ? name : "?", (int)r);
        return r == CUDA_ERROR_OUT_OF_MEMORY ? EXIT_OOM : EXIT_CUDA;
}

struct args {
        unsigned gpu, seconds, chunks;
        uint64_t mem;
        const char *driver;
};

/* The command line into a; EXIT_OK, or the exit code (help printed: -1 → EXIT_OK after --help). */
static int parse_args(int argc, char **argv, struct args *a) {
        static const struct option opts[] = {
                { "gpu", required_argument, NULL, 'g' },
                { "mem", required_argument, NULL, 'm' },
                { "seconds", required_argument, NULL, 's' },
                { "chunks", required_argument, NULL, 'c' },
                { "driver", required_argument, NULL, 'd' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        bool have_gpu = false, have_mem = false, have_seconds = false, ok = true;
        int c;
        *a = (struct args){ .chunks = 1 };
        while (ok && (c = getopt_long(argc, argv, "", opts, NULL)) >= 0) {
                switch (c) {
                        case 'g': ok = have_gpu = parse_uint(optarg, INT_MAX, &a->gpu) == 0; break;
                        case 'm': ok = have_mem = parse_size(optarg, &a->mem) == 0 && a->mem > 0; break;
                        case 's': ok = have_seconds = parse_uint(optarg, 86400 * 365, &a->seconds) == 0; break;
                        case 'c': ok = parse_uint(optarg, MAX_CHUNKS, &a->chunks) == 0 && a->chunks > 0; break;
                        case 'd': a->driver = optarg; break;
                        case 'h': usage(stdout); return -1;
                        default: usage(stderr); return EXIT_USAGE;
                }
        }
        if (!ok) {
                fprintf(stderr, "gpuslice-sim-workload: bad value '%s' for --%s\n", optarg,
                        c == 'g'   ? "gpu"
                        : c == 'm' ? "mem"
                        : c == 's' ? "seconds"
                                   : "chunks");
                return EXIT_USAGE;
        }
        if (optind != argc || !have_gpu || !have_mem || !have_seconds) {
                usage(stderr);
                return EXIT_USAGE;
        }
        return EXIT_OK;
}

/* The driver's entry points, the way a CUDA 12+ runtime finds them. EXIT_OK or EXIT_DRIVER. */
static int bind_driver(const char *driver) {
        void *dl = load_driver(driver);
        if (!dl) {
                fprintf(stderr, "gpuslice-sim-workload: cannot load the CUDA driver: %s\n", dlerror());
                return EXIT_DRIVER;
        }
        cu.getProcAddress = (PFN_cuGetProcAddress_v12000)dlsym(dl, "cuGetProcAddress_v2");
        if (!cu.getProcAddress) {
                fprintf(stderr, "gpuslice-sim-workload: the driver has no cuGetProcAddress_v2\n");
                return EXIT_DRIVER;
        }
        if (resolve("cuGetErrorName", (void **)&cu.errorName) < 0 || resolve("cuInit", (void **)&cu.init) < 0 ||
            resolve("cuDeviceGet", (void **)&cu.deviceGet) < 0 ||
            resolve("cuDevicePrimaryCtxRetain", (void **)&cu.retain) < 0 ||
            resolve("cuDevicePrimaryCtxRelease", (void **)&cu.release) < 0 ||
            resolve("cuCtxSetCurrent", (void **)&cu.setCurrent) < 0 || resolve("cuMemAlloc", (void **)&cu.alloc) < 0 ||
            resolve("cuMemFree", (void **)&cu.free) < 0)
                return EXIT_DRIVER;
        return EXIT_OK;
}

/* Until `seconds` have passed or a signal came. */
static void hold(unsigned seconds) {
        struct timespec end;
        clock_gettime(CLOCK_MONOTONIC, &end);
        end.tv_sec += seconds;
        while (!stop) {
                struct timespec now;
                clock_gettime(CLOCK_MONOTONIC, &now);
                if (now.tv_sec > end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
                        break;
                usleep(20 * 1000);
        }
}

int main(int argc, char **argv) {
        struct args a;
        int ex = parse_args(argc, argv, &a);
        if (ex != EXIT_OK)
                return ex < 0 ? EXIT_OK : ex;
        if ((ex = bind_driver(a.driver)) != EXIT_OK)
                return ex;

        /* Before "ready": whoever reads it may signal at once. */
        struct sigaction sa = { .sa_handler = on_signal };
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);

        CUresult r;
        CUdevice dev;
        CUcontext ctx;
        if ((r = cu.init(0)) != CUDA_SUCCESS)
                return fail("cuInit", r);
        if ((r = cu.deviceGet(&dev, (int)a.gpu)) != CUDA_SUCCESS)
                return fail("cuDeviceGet", r);
        if ((r = cu.retain(&ctx, dev)) != CUDA_SUCCESS)
                return fail("cuDevicePrimaryCtxRetain", r);
        if ((r = cu.setCurrent(ctx)) != CUDA_SUCCESS)
                return fail("cuCtxSetCurrent", r);

        static CUdeviceptr ptrs[MAX_CHUNKS];
        uint64_t chunk = a.mem / a.chunks, done = 0;
        for (unsigned i = 0; i < a.chunks; i++) {
                uint64_t n = i + 1 == a.chunks ? a.mem - done : chunk;
                if ((r = cu.alloc(&ptrs[i], n)) != CUDA_SUCCESS)
                        return fail("cuMemAlloc", r);
                done += n;
        }
        printf("ready pid=%d gpu=%u bytes=%" PRIu64 "\n", (int)getpid(), a.gpu, a.mem);
        fflush(stdout);
        hold(a.seconds);
        for (unsigned i = 0; i < a.chunks; i++)
                if ((r = cu.free(ptrs[i])) != CUDA_SUCCESS)
                        return fail("cuMemFree", r);
        if ((r = cu.release(dev)) != CUDA_SUCCESS)
                return fail("cuDevicePrimaryCtxRelease", r);
        return EXIT_OK;
}
