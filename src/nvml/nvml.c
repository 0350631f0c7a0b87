/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml — loading NVML, the typed symbol table, error translation, and the per-device queries.
 * The node inventory (struct topo) lives in inventory.c.
 *
 * Must never: call a NULL function pointer (every call goes through NVCALL), log, dlopen the
 * unversioned libnvidia-ml.so, or hold the device-table lock across an NVML call.
 */
#include "nvml/nvml-internal.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static const char *const sym_names[_NVML_SYM_MAX] = {
#define X(name, ret, params) [NVML_SYM_##name] = #name,
        NVML_ABI_FUNCTIONS(X)
#undef X
};

static const struct {
        int code;
        int err;
        const char *name;
} code_table[] = {
        { NVML_SUCCESS, 0, "SUCCESS" },
        { NVML_ERROR_UNINITIALIZED, EBADFD, "UNINITIALIZED" },
        { NVML_ERROR_INVALID_ARGUMENT, EINVAL, "INVALID_ARGUMENT" },
        { NVML_ERROR_NOT_SUPPORTED, EOPNOTSUPP, "NOT_SUPPORTED" },
        { NVML_ERROR_NO_PERMISSION, EPERM, "NO_PERMISSION" },
        { NVML_ERROR_ALREADY_INITIALIZED, EALREADY, "ALREADY_INITIALIZED" },
        { NVML_ERROR_NOT_FOUND, ENOENT, "NOT_FOUND" },
        { NVML_ERROR_INSUFFICIENT_SIZE, ENOBUFS, "INSUFFICIENT_SIZE" },
        { NVML_ERROR_INSUFFICIENT_POWER, EIO, "INSUFFICIENT_POWER" },
        { NVML_ERROR_DRIVER_NOT_LOADED, ENXIO, "DRIVER_NOT_LOADED" },
        { NVML_ERROR_TIMEOUT, ETIMEDOUT, "TIMEOUT" },
        { NVML_ERROR_IRQ_ISSUE, EIO, "IRQ_ISSUE" },
        { NVML_ERROR_LIBRARY_NOT_FOUND, ELIBACC, "LIBRARY_NOT_FOUND" },
        { NVML_ERROR_FUNCTION_NOT_FOUND, ENOSYS, "FUNCTION_NOT_FOUND" },
        { NVML_ERROR_CORRUPTED_INFOROM, EIO, "CORRUPTED_INFOROM" },
        { NVML_ERROR_GPU_IS_LOST, ENODEV, "GPU_IS_LOST" },
        { NVML_ERROR_RESET_REQUIRED, ENOTRECOVERABLE, "RESET_REQUIRED" },
        { NVML_ERROR_OPERATING_SYSTEM, EIO, "OPERATING_SYSTEM" },
        { NVML_ERROR_LIB_RM_VERSION_MISMATCH, ELIBBAD, "LIB_RM_VERSION_MISMATCH" },
        { NVML_ERROR_IN_USE, EBUSY, "IN_USE" },
        { NVML_ERROR_MEMORY, ENOMEM, "MEMORY" },
        { NVML_ERROR_NO_DATA, ENODATA, "NO_DATA" },
        { NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, EOPNOTSUPP, "VGPU_ECC_NOT_SUPPORTED" },
        { NVML_ERROR_INSUFFICIENT_RESOURCES, ENOSPC, "INSUFFICIENT_RESOURCES" },
        { NVML_ERROR_FREQ_NOT_SUPPORTED, EOPNOTSUPP, "FREQ_NOT_SUPPORTED" },
        { NVML_ERROR_ARGUMENT_VERSION_MISMATCH, EPROTO, "ARGUMENT_VERSION_MISMATCH" },
        { NVML_ERROR_DEPRECATED, EOPNOTSUPP, "DEPRECATED" },
        { NVML_ERROR_NOT_READY, EAGAIN, "NOT_READY" },
        { NVML_ERROR_GPU_NOT_FOUND, ENOENT, "GPU_NOT_FOUND" },
        { NVML_ERROR_INVALID_STATE, EBADFD, "INVALID_STATE" },
        { NVML_ERROR_RESET_TYPE_NOT_SUPPORTED, EOPNOTSUPP, "RESET_TYPE_NOT_SUPPORTED" },
        { NVML_ERROR_UNKNOWN, EIO, "UNKNOWN" },
};

int nvml_errno(int nvml_code) {
        for (size_t i = 0; i < ELEMENTSOF(code_table); i++)
                if (code_table[i].code == nvml_code)
                        return -code_table[i].err;
        return -EIO;
}

const char *nvml_code_name(int nvml_code) {
        for (size_t i = 0; i < ELEMENTSOF(code_table); i++)
                if (code_table[i].code == nvml_code)
                        return code_table[i].name;
        return "UNKNOWN";
}

const char *nvml_error_string(const struct nvml_error *e, char *buf, size_t len) {
        if (!buf || len == 0)
                return "";
        if (!e) {
                buf[0] = '\0';
                return buf;
        }
        /* Truncation is acceptable: this is text for a person. */
        if (snprintf(buf, len, "%s: %s", e->func, e->text) >= (int)len)
                return buf;
        return buf;
}

void nvml_error_set(struct nvml_error *err, int code, const char *func, const char *text) {
        if (!err)
                return;
        err->nvml_code = code;
        strscpy(err->func, func ? func : "", sizeof(err->func));
        strscpy(err->text, text ? text : "", sizeof(err->text));
}

/* NVML's own text for a code; ours when the library has no nvmlErrorString or returns NULL. */
static void nvml_text(const struct nvml *n, int code, char *buf, size_t len) {
        const char *s = NULL;
        if (n && n->sym.nvmlErrorString)
                s = n->sym.nvmlErrorString((nvmlReturn_t)code);
        if (s && *s)
                strscpy(buf, s, len);
        else
                snprintf(buf, len, "NVML error %d (%s)", code, nvml_code_name(code));
}

int nvml_fail(const struct nvml *n, int r, const char *func, struct nvml_error *err) {
        if (r == NVML_SYM_MISSING) {
                if (err) {
                        char text[128];
                        /* The library path is cut to its last 64 bytes' worth: enough for a message. */
                        snprintf(text, sizeof(text), "symbol %s not exported by %.64s", func, n->library);
                        nvml_error_set(err, NVML_ERROR_FUNCTION_NOT_FOUND, func, text);
                }
                return -ENOSYS;
        }
        if (err) {
                char text[128];
                nvml_text(n, r, text, sizeof(text));
                nvml_error_set(err, r, func, text);
        }
        return nvml_errno(r);
}

/* Pick the first exported of two compatible symbols; name set to the one used (or the newer). */
#define PICK(n, field, newer, older)                                          \
        do {                                                                  \
                if ((n)->sym.newer) {                                         \
                        (n)->field = (n)->sym.newer;                          \
                        (n)->field##_name = #newer;                           \
                } else {                                                      \
                        (n)->field = (n)->sym.older;                          \
                        (n)->field##_name = (n)->sym.older ? #older : #newer; \
                }                                                             \
        } while (0)

static int resolve(struct nvml *n, struct nvml_error *err) {
#define X(name, ret, params) n->sym.name = (__typeof__(n->sym.name))dlsym(n->dl, #name);
        NVML_ABI_FUNCTIONS(X)
#undef X

        PICK(n, init, nvmlInit_v2, nvmlInit);
        PICK(n, get_count, nvmlDeviceGetCount_v2, nvmlDeviceGetCount);
        PICK(n, get_handle, nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetHandleByIndex);
        PICK(n, cuda_version, nvmlSystemGetCudaDriverVersion_v2, nvmlSystemGetCudaDriverVersion);
        PICK(n, processes, nvmlDeviceGetComputeRunningProcesses_v3, nvmlDeviceGetComputeRunningProcesses_v2);

        /* Required: without these there is no inventory at all. */
        if (!n->init)
                return nvml_fail(n, NVML_SYM_MISSING, n->init_name, err);
        if (!n->sym.nvmlShutdown)
                return nvml_fail(n, NVML_SYM_MISSING, "nvmlShutdown", err);
        if (!n->get_count)
                return nvml_fail(n, NVML_SYM_MISSING, n->get_count_name, err);
        if (!n->get_handle)
                return nvml_fail(n, NVML_SYM_MISSING, n->get_handle_name, err);
        return 0;
}

int nvml_open(const char *library, struct nvml **ret, struct nvml_error *err) {
        if (!ret)
                return -EINVAL;
        if (!library)
                library = NVML_DEFAULT_LIBRARY;
        if (!*library) {
                nvml_error_set(err, NVML_ERROR_INVALID_ARGUMENT, "nvml_open", "empty library path");
                return -EINVAL;
        }

        _cleanup_(freep) struct nvml *n = calloc(1, sizeof(*n));
        if (!n) {
                nvml_error_set(err, NVML_ERROR_MEMORY, "nvml_open", "out of memory");
                return -ENOMEM;
        }
        strscpy(n->library, library, sizeof(n->library));
        snprintf(n->sysfs_root, sizeof(n->sysfs_root), "%s", "/sys");

        (void)dlerror();
        n->dl = dlopen(library, RTLD_NOW | RTLD_LOCAL);
        if (!n->dl) {
                const char *e = dlerror();
                nvml_error_set(err, NVML_ERROR_LIBRARY_NOT_FOUND, "dlopen", e ? e : library);
                return -ELIBACC;
        }

        int r = resolve(n, err);
        if (r < 0) {
                dlclose(n->dl);
                return r;
        }

        int rc = n->init();
        if (rc != NVML_SUCCESS) {
                r = nvml_fail(n, rc, n->init_name, err);
                dlclose(n->dl);
                return r;
        }

        pthread_mutex_init(&n->lock, NULL);
        *ret = TAKE_PTR(n);
        return 0;
}

struct nvml *nvml_close(struct nvml *n) {
        if (!n)
                return NULL;
        n->sym.nvmlShutdown(); /* required at open, never NULL here */
        dlclose(n->dl);
        pthread_mutex_destroy(&n->lock);
        free(n);
        return NULL;
}

int nvml_set_sysfs_root(struct nvml *n, const char *root) {
        if (!n || !root || !*root)
                return -EINVAL;
        if (strlen(root) >= sizeof(n->sysfs_root))
                return -ENAMETOOLONG;
        strscpy(n->sysfs_root, root, sizeof(n->sysfs_root));
        return 0;
}

bool nvml_has_symbol(const struct nvml *n, const char *symbol) {
        if (!n || !symbol)
                return false;
        for (size_t i = 0; i < _NVML_SYM_MAX; i++)
                if (streq(sym_names[i], symbol))
                        return nvml_sym_present(n, (enum nvml_sym_id)i);
        return false;
}

bool nvml_sym_present(const struct nvml *n, enum nvml_sym_id id) {
        switch (id) {
#define X(name, ret, params) \
        case NVML_SYM_##name: return n->sym.name != NULL;
                NVML_ABI_FUNCTIONS(X)
#undef X
                default: return false;
        }
}

int nvml_device_count(struct nvml *n, unsigned *ret, struct nvml_error *err) {
        if (!n || !ret)
                return -EINVAL;
        unsigned count = 0;
        int rc = n->get_count(&count);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc, n->get_count_name, err);
        *ret = count;
        return 0;
}

static int bad_index(unsigned index, const char *func, struct nvml_error *err) {
        char text[128];
        snprintf(text, sizeof(text), "GPU index %u out of range (at most %u GPUs)", index, TOPO_MAX_GPUS);
        nvml_error_set(err, NVML_ERROR_INVALID_ARGUMENT, func, text);
        return -EINVAL;
}

int nvml_handle_fresh(struct nvml *n, unsigned index, nvmlDevice_t *ret, struct nvml_error *err) {
        if (index >= TOPO_MAX_GPUS)
                return bad_index(index, n->get_handle_name, err);
        nvmlDevice_t h = NULL;
        int rc = n->get_handle(index, &h);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc, n->get_handle_name, err);
        pthread_mutex_lock(&n->lock);
        n->dev[index] = h;
        n->have_dev[index] = true;
        pthread_mutex_unlock(&n->lock);
        *ret = h;
        return 0;
}

int nvml_handle(struct nvml *n, unsigned index, nvmlDevice_t *ret, struct nvml_error *err) {
        if (index >= TOPO_MAX_GPUS)
                return bad_index(index, n->get_handle_name, err);
        pthread_mutex_lock(&n->lock);
        bool have = n->have_dev[index];
        nvmlDevice_t h = n->dev[index];
        pthread_mutex_unlock(&n->lock);
        if (have) {
                *ret = h;
                return 0;
        }
        return nvml_handle_fresh(n, index, ret, err);
}

void nvml_handle_forget(struct nvml *n, unsigned index) {
        if (index >= TOPO_MAX_GPUS)
                return;
        pthread_mutex_lock(&n->lock);
        n->have_dev[index] = false;
        n->dev[index] = NULL;
        pthread_mutex_unlock(&n->lock);
}

int nvml_index_of_handle(struct nvml *n, nvmlDevice_t h) {
        int found = -1;
        pthread_mutex_lock(&n->lock);
        for (unsigned i = 0; i < TOPO_MAX_GPUS && found < 0; i++)
                if (n->have_dev[i] && n->dev[i] == h)
                        found = (int)i;
        pthread_mutex_unlock(&n->lock);
        if (found >= 0)
                return found;
        unsigned idx;
        if (NVCALL(n, nvmlDeviceGetIndex, h, &idx) == NVML_SUCCESS && idx < TOPO_MAX_GPUS)
                return (int)idx;
        return -1;
}

int nvml_memory(struct nvml *n, nvmlDevice_t h, uint64_t *ret_total, uint64_t *ret_used, struct nvml_error *err) {
        int rc = NVML_SYM_MISSING;
        if (n->sym.nvmlDeviceGetMemoryInfo_v2) {
                nvmlMemory_v2_t m = { .version = nvmlMemory_v2 };
                rc = n->sym.nvmlDeviceGetMemoryInfo_v2(h, &m);
                if (rc == NVML_SUCCESS) {
                        *ret_total = m.total;
                        *ret_used = m.used;
                        return 0;
                }
                /* An older driver may export _v2 but not understand this struct version. */
                if (rc != NVML_ERROR_ARGUMENT_VERSION_MISMATCH && rc != NVML_ERROR_NOT_SUPPORTED &&
                    rc != NVML_ERROR_FUNCTION_NOT_FOUND)
                        return nvml_fail(n, rc, "nvmlDeviceGetMemoryInfo_v2", err);
                if (!n->sym.nvmlDeviceGetMemoryInfo)
                        return nvml_fail(n, rc, "nvmlDeviceGetMemoryInfo_v2", err);
        }
        nvmlMemory_t m = { 0 };
        rc = NVCALL(n, nvmlDeviceGetMemoryInfo, h, &m);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc, "nvmlDeviceGetMemoryInfo", err);
        *ret_total = m.total;
        *ret_used = m.used;
        return 0;
}

int nvml_device_probe(struct nvml *n, unsigned index, struct nvml_error *err) {
        if (!n)
                return -EINVAL;
        nvmlDevice_t h;
        int r = nvml_handle_fresh(n, index, &h, err);
        if (r < 0)
                return r;
        char uuid[NVML_DEVICE_UUID_BUFFER_SIZE];
        int rc = NVCALL(n, nvmlDeviceGetUUID, h, uuid, sizeof(uuid));
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc, "nvmlDeviceGetUUID", err);
        uint64_t total, used;
        return nvml_memory(n, h, &total, &used, err);
}

int nvml_device_index_by_uuid(struct nvml *n, const char *uuid, unsigned *ret, struct nvml_error *err) {
        if (!n || !uuid || !ret)
                return -EINVAL;
        nvmlDevice_t h;
        int rc = NVCALL(n, nvmlDeviceGetHandleByUUID, uuid, &h);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc, "nvmlDeviceGetHandleByUUID", err);
        unsigned idx;
        rc = NVCALL(n, nvmlDeviceGetIndex, h, &idx);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc, "nvmlDeviceGetIndex", err);
        *ret = idx;
        return 0;
}

/* The three process calls: _v3 and _v2 share nvmlProcessInfo_t, the unversioned one is 16 bytes. */
static int processes_call(struct nvml *n, nvmlDevice_t h, unsigned *count, void *buf, bool v1) {
        if (v1)
                return NVCALL(n, nvmlDeviceGetComputeRunningProcesses, h, count, (nvmlProcessInfo_v1_t *)buf);
        return n->processes(h, count, (nvmlProcessInfo_t *)buf);
}

/* Enough retries for processes starting between the size query and the fetch, not a busy loop. */
#define NVML_SIZE_RETRIES 8
#define NVML_SIZE_HEADROOM 8

int nvml_device_processes(struct nvml *n, unsigned index, struct nvml_process **ret, size_t *ret_n,
                          struct nvml_error *err) {
        if (!n || !ret || !ret_n)
                return -EINVAL;
        nvmlDevice_t h;
        int r = nvml_handle(n, index, &h, err);
        if (r < 0)
                return r;
        return nvml_processes_of(n, h, ret, ret_n, err);
}

int nvml_processes_of(struct nvml *n, nvmlDevice_t h, struct nvml_process **ret, size_t *ret_n,
                      struct nvml_error *err) {
        bool v1 = !n->processes;
        const char *func = v1 ? "nvmlDeviceGetComputeRunningProcesses" : n->processes_name;
        size_t elem = v1 ? sizeof(nvmlProcessInfo_v1_t) : sizeof(nvmlProcessInfo_t);

        unsigned count = 0;
        int rc = processes_call(n, h, &count, NULL, v1);
        if (rc == NVML_SUCCESS && count == 0) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE)
                return nvml_fail(n, rc, func, err);

        for (unsigned attempt = 0; attempt < NVML_SIZE_RETRIES; attempt++) {
                unsigned cap = count + NVML_SIZE_HEADROOM;
                _cleanup_(freep) void *buf = calloc(cap, elem);
                if (!buf)
                        return -ENOMEM;
                count = cap;
                rc = processes_call(n, h, &count, buf, v1);
                if (rc == NVML_ERROR_INSUFFICIENT_SIZE)
                        continue;
                if (rc != NVML_SUCCESS)
                        return nvml_fail(n, rc, func, err);
                if (count > cap) /* a misbehaving library; never read past the buffer */
                        count = cap;

                struct nvml_process *out = NULL;
                if (count > 0) {
                        out = calloc(count, sizeof(*out));
                        if (!out)
                                return -ENOMEM;
                }
                for (unsigned i = 0; i < count; i++) {
                        if (v1) {
                                const nvmlProcessInfo_v1_t *p = (const nvmlProcessInfo_v1_t *)buf + i;
                                out[i] = (struct nvml_process){ .pid = p->pid,
                                                                .used_memory = p->usedGpuMemory,
                                                                .gpu_instance = UINT32_MAX,
                                                                .compute_instance = UINT32_MAX };
                        } else {
                                const nvmlProcessInfo_t *p = (const nvmlProcessInfo_t *)buf + i;
                                out[i] = (struct nvml_process){ .pid = p->pid,
                                                                .used_memory = p->usedGpuMemory,
                                                                .gpu_instance = p->gpuInstanceId,
                                                                .compute_instance = p->computeInstanceId };
                        }
                }
                *ret = out;
                *ret_n = count;
                return 0;
        }
        return nvml_fail(n, NVML_ERROR_INSUFFICIENT_SIZE, func, err);
}

int nvml_device_uuid(struct nvml *n, unsigned index, char *buf, size_t len, struct nvml_error *err) {
        if (!n || !buf || len == 0)
                return -EINVAL;
        nvmlDevice_t h;
        int r = nvml_handle(n, index, &h, err);
        if (r < 0)
                return r;
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
        int rc = NVCALL(n, nvmlDeviceGetUUID, h, uuid, sizeof(uuid));
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc, "nvmlDeviceGetUUID", err);
        if (strnlen(uuid, sizeof(uuid)) >= len)
                return -ENOBUFS;
        strnscpy(buf, len, uuid, strnlen(uuid, sizeof(uuid)));
        return 0;
}

int nvml_device_memory(struct nvml *n, unsigned index, uint64_t *ret_total, uint64_t *ret_used,
                       struct nvml_error *err) {
        if (!n || !ret_total || !ret_used)
                return -EINVAL;
        nvmlDevice_t h;
        int r = nvml_handle(n, index, &h, err);
        if (r < 0)
                return r;
        uint64_t total, used;
        r = nvml_memory(n, h, &total, &used, err);
        if (r < 0)
                return r;
        *ret_total = total;
        *ret_used = used;
        return 0;
}

int nvml_device_utilization(struct nvml *n, unsigned index, struct nvml_utilization *ret, struct nvml_error *err) {
        if (!n || !ret)
                return -EINVAL;
        nvmlDevice_t h;
        int r = nvml_handle(n, index, &h, err);
        if (r < 0)
                return r;
        nvmlUtilization_t u = { 0 };
        int rc = NVCALL(n, nvmlDeviceGetUtilizationRates, h, &u);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc, "nvmlDeviceGetUtilizationRates", err);
        *ret = (struct nvml_utilization){ .gpu = u.gpu, .memory = u.memory };
        return 0;
}

int nvml_device_process_utilization(struct nvml *n, unsigned index, uint64_t last_seen_us,
                                    struct nvml_process_sample **ret, size_t *ret_n, struct nvml_error *err) {
        static const char func[] = "nvmlDeviceGetProcessUtilization";
        if (!n || !ret || !ret_n)
                return -EINVAL;
        nvmlDevice_t h;
        int r = nvml_handle(n, index, &h, err);
        if (r < 0)
                return r;

        unsigned count = 0;
        int rc = NVCALL(n, nvmlDeviceGetProcessUtilization, h, NULL, &count, last_seen_us);
        if (rc == NVML_ERROR_NOT_FOUND || (rc == NVML_SUCCESS && count == 0)) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE)
                return nvml_fail(n, rc, func, err);

        for (unsigned attempt = 0; attempt < NVML_SIZE_RETRIES; attempt++) {
                unsigned cap = count + NVML_SIZE_HEADROOM;
                _cleanup_(freep) nvmlProcessUtilizationSample_t *buf = calloc(cap, sizeof(*buf));
                if (!buf)
                        return -ENOMEM;
                count = cap;
                rc = NVCALL(n, nvmlDeviceGetProcessUtilization, h, buf, &count, last_seen_us);
                if (rc == NVML_ERROR_INSUFFICIENT_SIZE)
                        continue;
                if (rc == NVML_ERROR_NOT_FOUND)
                        count = 0;
                else if (rc != NVML_SUCCESS)
                        return nvml_fail(n, rc, func, err);
                if (count > cap)
                        count = cap;
                struct nvml_process_sample *out = NULL;
                if (count > 0) {
                        out = calloc(count, sizeof(*out));
                        if (!out)
                                return -ENOMEM;
                }
                for (unsigned i = 0; i < count; i++)
                        out[i] = (struct nvml_process_sample){
                                .pid = buf[i].pid,
                                .timestamp_us = buf[i].timeStamp,
                                .sm = buf[i].smUtil,
                                .memory = buf[i].memUtil,
                                .encoder = buf[i].encUtil,
                                .decoder = buf[i].decUtil,
                        };
                *ret = out;
                *ret_n = count;
                return 0;
        }
        return nvml_fail(n, NVML_ERROR_INSUFFICIENT_SIZE, func, err);
}

int nvml_device_temperature(struct nvml *n, unsigned index, unsigned *ret_celsius, struct nvml_error *err) {
        if (!n || !ret_celsius)
                return -EINVAL;
        nvmlDevice_t h;
        int r = nvml_handle(n, index, &h, err);
        if (r < 0)
                return r;
        unsigned t = 0;
        int rc = NVCALL(n, nvmlDeviceGetTemperature, h, NVML_TEMPERATURE_GPU, &t);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc, "nvmlDeviceGetTemperature", err);
        *ret_celsius = t;
        return 0;
}

int nvml_device_power(struct nvml *n, unsigned index, unsigned *ret_milliwatts, struct nvml_error *err) {
        if (!n || !ret_milliwatts)
                return -EINVAL;
        nvmlDevice_t h;
        int r = nvml_handle(n, index, &h, err);
        if (r < 0)
                return r;
        unsigned p = 0;
        int rc = NVCALL(n, nvmlDeviceGetPowerUsage, h, &p);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc, "nvmlDeviceGetPowerUsage", err);
        *ret_milliwatts = p;
        return 0;
}

int nvml_device_compute_mode(struct nvml *n, unsigned index, int *ret_mode, struct nvml_error *err) {
        if (!n || !ret_mode)
                return -EINVAL;
        nvmlDevice_t h;
        int r = nvml_handle(n, index, &h, err);
        if (r < 0)
                return r;
        nvmlComputeMode_t mode = NVML_COMPUTEMODE_DEFAULT;
        int rc = NVCALL(n, nvmlDeviceGetComputeMode, h, &mode);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc, "nvmlDeviceGetComputeMode", err);
        *ret_mode = (int)mode;
        return 0;
}

int nvml_device_set_compute_mode(struct nvml *n, unsigned index, int mode, struct nvml_error *err) {
        if (!n || mode < 0 || mode >= NVML_COMPUTEMODE_COUNT)
                return -EINVAL;
        nvmlDevice_t h;
        int r = nvml_handle(n, index, &h, err);
        if (r < 0)
                return r;
        int rc = NVCALL(n, nvmlDeviceSetComputeMode, h, (nvmlComputeMode_t)mode);
        return rc == NVML_SUCCESS ? 0 : nvml_fail(n, rc, "nvmlDeviceSetComputeMode", err);
}

/* ---- helpers ---- */

int nvml_format_cpulist(const unsigned long *mask, size_t n_words, char *buf, size_t len) {
        if (!buf || len == 0)
                return -EINVAL;
        const size_t bits = sizeof(unsigned long) * 8;
        size_t pos = 0;
        buf[0] = '\0';
        for (size_t cpu = 0; cpu < n_words * bits;) {
                if (!(mask[cpu / bits] & (1UL << (cpu % bits)))) {
                        cpu++;
                        continue;
                }
                size_t end = cpu;
                while (end + 1 < n_words * bits && (mask[(end + 1) / bits] & (1UL << ((end + 1) % bits))))
                        end++;
                int k = end == cpu ? snprintf(buf + pos, len - pos, "%s%zu", pos ? "," : "", cpu)
                                   : snprintf(buf + pos, len - pos, "%s%zu-%zu", pos ? "," : "", cpu, end);
                if (k < 0 || (size_t)k >= len - pos) {
                        buf[0] = '\0';
                        return -ENOBUFS;
                }
                pos += (size_t)k;
                cpu = end + 1;
        }
        return 0;
}

struct bus_id {
        unsigned domain, bus, device, function;
};

/* One hex field of 1..max_digits digits ending at `end`; *s is moved past it. Digits are counted
 * so that no field can overflow (sscanf's %x would wrap "1000000001a" to 0x1a). */
static int parse_hex_field(const char **s, unsigned max_digits, char end, unsigned *ret) {
        unsigned v = 0, n = 0;
        const char *p = *s;
        for (; isxdigit((unsigned char)*p); p++, n++) {
                if (n == max_digits)
                        return -EINVAL;
                v = v * 16 + (unsigned)(isdigit((unsigned char)*p) ? *p - '0' : tolower((unsigned char)*p) - 'a' + 10);
        }
        if (n == 0 || *p != end)
                return -EINVAL;
        *s = end ? p + 1 : p;
        *ret = v;
        return 0;
}

static int parse_bus_id(const char *s, struct bus_id *ret) {
        if (!s)
                return -EINVAL;
        struct bus_id b;
        /* domain:bus:device.function — 8 (legacy 4) domain digits, then 2, 2 and 1 */
        if (parse_hex_field(&s, 8, ':', &b.domain) < 0 || parse_hex_field(&s, 2, ':', &b.bus) < 0 ||
            parse_hex_field(&s, 2, '.', &b.device) < 0 || parse_hex_field(&s, 1, '\0', &b.function) < 0)
                return -EINVAL;
        if (b.domain > 0xffff || b.device > 0x1f || b.function > 7)
                return -EINVAL;
        *ret = b;
        return 0;
}

int nvml_sysfs_bus_id(const char *bus_id, char *buf, size_t len) {
        struct bus_id b;
        if (!buf || len < 13 || parse_bus_id(bus_id, &b) < 0)
                return -EINVAL;
        snprintf(buf, len, "%04x:%02x:%02x.%x", b.domain, b.bus, b.device, b.function);
        return 0;
}

bool nvml_bus_id_equal(const char *a, const char *b) {
        struct bus_id x, y;
        if (parse_bus_id(a, &x) < 0 || parse_bus_id(b, &y) < 0)
                return false;
        return x.domain == y.domain && x.bus == y.bus && x.device == y.device && x.function == y.function;
}
