/* SPDX-License-Identifier: Apache-2.0 */
/*
 * lookup-recorder — a stand-in libcuda.so.1 that records every cuGetProcAddress lookup a CUDA runtime
 * makes (symbol, version, flags) and forwards it to the real driver named by $LOOKUP_REAL_LIBCUDA (the
 * simulator). It hands out itself for "cuGetProcAddress", so the runtime's later lookups come back through
 * it, and records the runtime's cuGetExportTable calls when $LOOKUP_OFFER_EXPORT_TABLE is set (answering
 * CUDA_ERROR_NOT_FOUND). Used by record-cudart-lookups.sh only (needs the CUDA toolkit; never in CI):
 * it produced cudart-13.0-lookups.txt. Writes $LOOKUP_RECORD, one line per lookup.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdriverProcAddressQueryResult;
#define CU_NOT_FOUND 500

CUresult cuGetProcAddress_v2(const char *s, void **pfn, int v, uint64_t f, CUdriverProcAddressQueryResult *st);
CUresult cuGetProcAddress(const char *s, void **pfn, int v, uint64_t f);
CUresult cuGetExportTable(const void **table, const void *id);

static void *real;
static FILE *out;

static void *real_sym(const char *name) {
        if (!real) {
                const char *p = getenv("LOOKUP_REAL_LIBCUDA");
                real = p ? dlopen(p, RTLD_NOW | RTLD_LOCAL) : NULL;
        }
        if (!out) {
                const char *r = getenv("LOOKUP_RECORD");
                out = r ? fopen(r, "ae") : NULL;
        }
        return real ? dlsym(real, name) : NULL;
}

static void record(const char *fmt, const char *s, int v, uint64_t f) {
        if (out) {
                fprintf(out, fmt, s ? s : "(null)", v, (unsigned long long)f);
                fflush(out);
        }
}

/* The runtime's own lookups come back here: hand out ourselves for cuGetProcAddress. */
static void *self_for(const char *s, void *fn, int v) {
        if (s && strcmp(s, "cuGetProcAddress") == 0 && fn)
                return v >= 12000 ? (void *)cuGetProcAddress_v2 : (void *)cuGetProcAddress;
        if (s && strcmp(s, "cuGetExportTable") == 0 && getenv("LOOKUP_OFFER_EXPORT_TABLE"))
                return (void *)cuGetExportTable;
        return fn;
}

CUresult cuGetProcAddress_v2(const char *s, void **pfn, int v, uint64_t f, CUdriverProcAddressQueryResult *st) {
        CUresult (*g)(const char *, void **, int, uint64_t, CUdriverProcAddressQueryResult *) =
                (__typeof__(g))real_sym("cuGetProcAddress_v2");
        CUdriverProcAddressQueryResult mine = 0;
        CUresult r = g ? g(s, pfn, v, f, st ? st : &mine) : CU_NOT_FOUND;
        record("\"%s\" %d %llu\n", s, v, f);
        if (pfn) {
                void *fn = self_for(s, r == 0 ? *pfn : NULL, v);
                if (fn && r != 0) {
                        r = 0;
                        if (st)
                                *st = 0;
                }
                *pfn = fn;
        }
        return r;
}

CUresult cuGetProcAddress(const char *s, void **pfn, int v, uint64_t f) {
        return cuGetProcAddress_v2(s, pfn, v, f, NULL);
}

CUresult cuGetExportTable(const void **table, const void *id) {
        const unsigned char *u = id;
        if (out && u) {
                fprintf(out, "# cuGetExportTable ");
                for (int i = 0; i < 16; i++)
                        fprintf(out, "%02x", u[i]);
                fprintf(out, "\n");
                fflush(out);
        }
        if (table)
                *table = NULL;
        return CU_NOT_FOUND;
}

CUresult cuDriverGetVersion(int *v);
CUresult cuDriverGetVersion(int *v) {
        CUresult (*g)(int *) = (__typeof__(g))real_sym("cuDriverGetVersion");
        return g ? g(v) : CU_NOT_FOUND;
}

CUresult cuInit(unsigned flags);
CUresult cuInit(unsigned flags) {
        CUresult (*g)(unsigned) = (__typeof__(g))real_sym("cuInit");
        return g ? g(flags) : CU_NOT_FOUND;
}
