/* SPDX-License-Identifier: Apache-2.0 */
/*
 * procaddr-replay — replays a CUDA runtime's cuGetProcAddress lookups (cudart-13.0-lookups.txt) the way
 * the runtime makes them: dlopen("libcuda.so.1"), dlsym("cuGetProcAddress_v2"), ask it for
 * "cuGetProcAddress" at 12000 and use that for every lookup. Prints one line per lookup:
 *
 *   "SYMBOL" VERSION FLAGS -> RESULT STATUS EXPORTED-NAME FILE
 *
 * (EXPORTED-NAME and FILE from dladdr, "-" when nothing was handed out). Exit 0, or 1 when the driver or
 * the file cannot be read. Used by unit-interposer (test_cudart_lookups_replayed).
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
typedef int CUdriverProcAddressQueryResult;
typedef CUresult (*gpa_fn)(const char *, void **, int, uint64_t, CUdriverProcAddressQueryResult *);

static const char *base_name(const char *path) {
        const char *s = strrchr(path, '/');
        return s ? s + 1 : path;
}

int main(int argc, char **argv) {
        if (argc != 2) {
                fprintf(stderr, "usage: procaddr-replay LOOKUPS\n");
                return 2;
        }
        FILE *f = fopen(argv[1], "re");
        void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        gpa_fn gpa = dl ? (gpa_fn)dlsym(dl, "cuGetProcAddress_v2") : NULL;
        if (!f || !gpa) {
                fprintf(stderr, "procaddr-replay: cannot read %s or load the driver\n", argv[1]);
                return 1;
        }
        void *self = NULL;
        CUdriverProcAddressQueryResult st = 0;
        if (gpa("cuGetProcAddress", &self, 12000, 0, &st) == 0 && self)
                gpa = (gpa_fn)self;
        char line[512];
        while (fgets(line, sizeof line, f)) {
                char name[256];
                int version;
                unsigned long long flags;
                if (line[0] == '#' || line[0] == '\n')
                        continue;
                if (sscanf(line, "\"%255[^\"]\" %d %llu", name, &version, &flags) != 3) {
                        if (sscanf(line, "\"\" %d %llu", &version, &flags) != 2)
                                continue;
                        name[0] = '\0';
                }
                void *fn = NULL;
                st = -1;
                CUresult r = gpa(name, &fn, version, flags, &st);
                Dl_info info;
                bool known = fn && dladdr(fn, &info) && info.dli_fname;
                printf("\"%s\" %d %llu -> %d %d %s %s\n", name, version, flags, r, st,
                       known && info.dli_sname ? info.dli_sname : "-", known ? base_name(info.dli_fname) : "-");
        }
        fclose(f);
        return 0;
}
