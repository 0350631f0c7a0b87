/* SPDX-License-Identifier: Apache-2.0 */
/*
 * procaddr-replay — replays cuGetProcAddress lookups the way the CUDA runtime makes them: dlopen("libcuda.so.1"),
 * dlsym("cuGetProcAddress_v2"), ask it for "cuGetProcAddress" at 12000 and use that for every lookup. Reads
 * one lookup per line, "SYMBOL" VERSION FLAGS [EXPECTED] (cudart-13.0-lookups.txt, cuda-13.0-variants.txt),
 * and prints one line per lookup:
 *
 *   "SYMBOL" VERSION FLAGS -> RESULT STATUS EXPORTED-NAME FILE [ok|MISMATCH EXPECTED|none EXPECTED]
 *
 * (EXPORTED-NAME and FILE from dladdr, "-" when nothing was handed out). With EXPECTED, the pointer handed
 * out must be the exported symbol EXPECTED of the library named by --lib (its file name; default: any):
 * "ok", else "MISMATCH"; "none" when nothing was handed out (a driver without that entry point). Exit 0,
 * 3 when a lookup mismatched, 1 when the driver or the file cannot be read, 2 bad usage. Used by
 * unit-interposer (test_cudart_lookups_replayed, test_procaddr_variants_by_name) and the hardware kit.
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
        const char *lib = NULL, *file = NULL;
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--lib") == 0 && i + 1 < argc)
                        lib = argv[++i];
                else if (!file)
                        file = argv[i];
                else
                        file = NULL, i = argc;
        }
        if (!file) {
                fprintf(stderr, "usage: procaddr-replay [--lib FILENAME] LOOKUPS\n");
                return 2;
        }
        FILE *f = fopen(file, "re");
        void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        gpa_fn gpa = dl ? (gpa_fn)dlsym(dl, "cuGetProcAddress_v2") : NULL;
        if (!f || !gpa) {
                fprintf(stderr, "procaddr-replay: cannot read %s or load the driver\n", file);
                return 1;
        }
        void *self = NULL;
        CUdriverProcAddressQueryResult st = 0;
        if (gpa("cuGetProcAddress", &self, 12000, 0, &st) == 0 && self)
                gpa = (gpa_fn)self;
        char line[512];
        bool mismatch = false;
        while (fgets(line, sizeof line, f)) {
                char name[256], expect[256] = "";
                int version;
                unsigned long long flags;
                if (line[0] == '#' || line[0] == '\n')
                        continue;
                if (sscanf(line, "\"%255[^\"]\" %d %llu %255s", name, &version, &flags, expect) < 3) {
                        if (sscanf(line, "\"\" %d %llu", &version, &flags) != 2)
                                continue;
                        name[0] = '\0';
                }
                void *fn = NULL;
                st = -1;
                CUresult r = gpa(name, &fn, version, flags, &st);
                Dl_info info;
                bool known = fn && dladdr(fn, &info) && info.dli_fname;
                const char *sym = known && info.dli_sname ? info.dli_sname : "-";
                printf("\"%s\" %d %llu -> %d %d %s %s", name, version, flags, r, st, sym,
                       known ? base_name(info.dli_fname) : "-");
                if (expect[0] && !fn)
                        printf(" none %s", expect);
                else if (expect[0]) {
                        bool ok = known && strcmp(sym, expect) == 0 &&
                                  (!lib || strcmp(base_name(info.dli_fname), lib) == 0);
                        mismatch |= !ok;
                        printf(ok ? " ok" : " MISMATCH %s", expect);
                }
                putchar('\n');
        }
        fclose(f);
        return mismatch ? 3 : 0;
}
