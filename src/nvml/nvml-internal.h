/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml-internal — what the files of src/nvml share and nobody else may use: the handle's
 * layout, the typed symbol table generated from NVML_ABI_FUNCTIONS, and the one way to call
 * NVML (NVCALL, which never calls a NULL pointer).
 */
#pragma once

#include <pthread.h>

#include "nvml/nvml.h"

/* One typed pointer per ABI function: a wrong prototype in nvml-abi.h is a compile error here. */
struct nvml_syms {
#define X(name, ret, params) __typeof__(&name) name;
        NVML_ABI_FUNCTIONS(X)
#undef X
};

enum nvml_sym_id {
#define X(name, ret, params) NVML_SYM_##name,
        NVML_ABI_FUNCTIONS(X)
#undef X
        _NVML_SYM_MAX,
};

struct nvml {
        void *dl;
        char library[256];
        char sysfs_root[256];
        struct nvml_syms sym;

        /* The version of each call with fallbacks that the library offers (see resolve()). */
        __typeof__(&nvmlInit_v2) init;
        const char *init_name;
        __typeof__(&nvmlDeviceGetCount_v2) get_count;
        const char *get_count_name;
        __typeof__(&nvmlDeviceGetHandleByIndex_v2) get_handle;
        const char *get_handle_name;
        __typeof__(&nvmlSystemGetCudaDriverVersion_v2) cuda_version;
        const char *cuda_version_name;
        __typeof__(&nvmlDeviceGetComputeRunningProcesses_v3) processes; /* NULL: only the v1 layout */
        const char *processes_name;

        pthread_mutex_t lock; /* guards dev[] and have_dev[] only; never held across NVML calls */
        nvmlDevice_t dev[TOPO_MAX_GPUS];
        bool have_dev[TOPO_MAX_GPUS];
};

/* Not an nvmlReturn_t: the symbol is not exported. */
#define NVML_SYM_MISSING (-1)

/* Call an optional NVML function: its nvmlReturn_t as int, or NVML_SYM_MISSING. */
#define NVCALL(n, fn, ...) ((n)->sym.fn ? (int)(n)->sym.fn(__VA_ARGS__) : NVML_SYM_MISSING)

/* Fill *err (may be NULL) for code r from `func` and return the mapped -errno. */
int nvml_fail(const struct nvml *n, int r, const char *func, struct nvml_error *err);
void nvml_error_set(struct nvml_error *err, int code, const char *func, const char *text);
bool nvml_sym_present(const struct nvml *n, enum nvml_sym_id id);

/* Device handle for an index: cached (nvml_handle) or asked afresh and cached (nvml_handle_fresh). */
int nvml_handle(struct nvml *n, unsigned index, nvmlDevice_t *ret, struct nvml_error *err);
int nvml_handle_fresh(struct nvml *n, unsigned index, nvmlDevice_t *ret, struct nvml_error *err);
void nvml_handle_forget(struct nvml *n, unsigned index);
/* NVML index of a handle NVML gave us (events), -1 when unknown. */
int nvml_index_of_handle(struct nvml *n, nvmlDevice_t h);
/* Memory info through _v2, falling back to the unversioned call. */
int nvml_memory(struct nvml *n, nvmlDevice_t h, uint64_t *ret_total, uint64_t *ret_used, struct nvml_error *err);
/* Compute processes through one handle (a GPU's or a MIG device's): nvml_device_processes's protocol. */
int nvml_processes_of(struct nvml *n, nvmlDevice_t h, struct nvml_process **ret, size_t *ret_n, struct nvml_error *err);
