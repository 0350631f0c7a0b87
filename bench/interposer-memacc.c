/* SPDX-License-Identifier: Apache-2.0 */
/*
 * interposer-memacc — memory-limit accuracy of libgpuslice-cuda.so over randomized allocation
 * sequences. Run it under the interposer (bench/interposer.sh does): it reaches the driver as a
 * CUDA 12+ runtime does (dlopen + cuGetProcAddress_v2), then for each seed performs STEPS random
 * allocations and frees — sizes log-uniform from 1 B to a quarter of the limit, plus deliberate
 * exact fits (the last free byte) and one-byte-over requests — and checks every answer against an
 * exact model of the container's usage:
 *
 *   over       an allocation granted although it did not fit (a byte over the limit)
 *   false_oom  OUT_OF_MEMORY although it fitted
 *   info_err   cuMemGetInfo's free differs from limit − used
 *
 *   interposer-memacc LIMIT_BYTES SEED STEPS     prints one line for the sequence of that seed
 * (one sequence per process: the simulated driver never reuses device addresses).
 * Exit 0 when every counter is 0.
 */
#include "interposer/cuda-abi.h" /* the driver API as gpuslice declares it: no CUDA toolkit needed */

#include <dlfcn.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LIVE 4096

static struct {
        __typeof__(&cuInit) init;
        __typeof__(&cuDeviceGet) deviceGet;
        __typeof__(&cuDevicePrimaryCtxRetain) retain;
        __typeof__(&cuCtxSetCurrent) setCurrent;
        __typeof__(&cuMemAlloc_v2) alloc;
        __typeof__(&cuMemFree_v2) free;
        __typeof__(&cuMemGetInfo_v2) info;
} cu;

static uint64_t rng_state;

static uint64_t rnd(void) { /* splitmix64: reproducible across machines */
        uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
}

static int load(void) {
        void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!dl)
                return -1;
        __typeof__(&cuGetProcAddress_v2) gpa = (__typeof__(gpa))dlsym(dl, "cuGetProcAddress_v2");
        if (!gpa)
                return -1;
        CUdriverProcAddressQueryResult st;
        int ok = 1;
#define GET(field, name) ok &= gpa(name, (void **)&cu.field, 12000, 0, &st) == CUDA_SUCCESS && cu.field;
        GET(init, "cuInit")
        GET(deviceGet, "cuDeviceGet")
        GET(retain, "cuDevicePrimaryCtxRetain")
        GET(setCurrent, "cuCtxSetCurrent")
        GET(alloc, "cuMemAlloc")
        GET(free, "cuMemFree")
        GET(info, "cuMemGetInfo")
#undef GET
        return ok ? 0 : -1;
}

int main(int argc, char **argv) {
        if (argc != 4) {
                fprintf(stderr, "usage: interposer-memacc LIMIT_BYTES SEED STEPS\n");
                return 2;
        }
        uint64_t limit = strtoull(argv[1], NULL, 10);
        unsigned first = (unsigned)strtoul(argv[2], NULL, 10), steps = (unsigned)strtoul(argv[3], NULL, 10);
        CUdevice d;
        CUcontext c;
        if (limit < 16 || load() < 0 || cu.init(0) != CUDA_SUCCESS || cu.deviceGet(&d, 0) != CUDA_SUCCESS ||
            cu.retain(&c, d) != CUDA_SUCCESS || cu.setCurrent(c) != CUDA_SUCCESS) {
                fprintf(stderr, "interposer-memacc: no usable driver\n");
                return 1;
        }
        static CUdeviceptr ptr[MAX_LIVE];
        static uint64_t size[MAX_LIVE];
        uint64_t t_over = 0, t_false = 0, t_info = 0;
        for (unsigned seed = first; seed == first; seed++) {
                rng_state = seed;
                unsigned live = 0;
                uint64_t used = 0, allocs = 0, ooms = 0, over = 0, false_oom = 0, info_err = 0, exact = 0;
                for (unsigned s = 0; s < steps; s++) {
                        unsigned what = (unsigned)(rnd() % 100);
                        if (live && (what < 40 || live == MAX_LIVE)) { /* free a random live allocation */
                                unsigned k = (unsigned)(rnd() % live);
                                if (cu.free(ptr[k]) != CUDA_SUCCESS) {
                                        fprintf(stderr, "free failed\n");
                                        return 1;
                                }
                                used -= size[k];
                                ptr[k] = ptr[--live];
                                size[k] = size[live];
                        } else {
                                uint64_t n;
                                if (what < 50)
                                        n = limit - used; /* exactly the last free byte */
                                else if (what < 55)
                                        n = limit - used + 1; /* one byte over */
                                else
                                        n = (uint64_t)exp2((double)(rnd() % 1000) / 1000.0 * log2((double)limit / 4));
                                if (n == 0)
                                        n = 1;
                                exact += what < 50;
                                CUdeviceptr p;
                                CUresult r = cu.alloc(&p, n);
                                bool fits = used + n <= limit;
                                if (r == CUDA_SUCCESS) {
                                        allocs++;
                                        over += !fits;
                                        ptr[live] = p;
                                        size[live++] = n;
                                        used += n;
                                } else if (r == CUDA_ERROR_OUT_OF_MEMORY) {
                                        ooms++;
                                        false_oom += fits;
                                } else {
                                        fprintf(stderr, "alloc %" PRIu64 ": error %d\n", n, r);
                                        return 1;
                                }
                        }
                        size_t f, t;
                        if (cu.info(&f, &t) != CUDA_SUCCESS || t != limit || f != limit - used)
                                info_err++;
                }
                while (live)
                        cu.free(ptr[--live]);
                printf("seed %u steps %u allocs %" PRIu64 " ooms %" PRIu64 " exact_fits %" PRIu64 " over %" PRIu64
                       " false_oom %" PRIu64 " info_err %" PRIu64 "\n",
                       seed, steps, allocs, ooms, exact, over, false_oom, info_err);
                t_over += over, t_false += false_oom, t_info += info_err;
        }
        return t_over || t_false || t_info ? 1 : 0;
}
