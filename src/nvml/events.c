/* SPDX-License-Identifier: Apache-2.0 */
/*
 * events — NVML event sets for health: register each GPU for the event bits it supports and
 * wait for the next event, reported by GPU index.
 *
 * Must never: register a bit the device does not report as supported, fail because one GPU
 * cannot be registered (it is skipped and can be added later), or log.
 */
#include "nvml/nvml-internal.h"

#include <errno.h>
#include <stdlib.h>

#include "util/util.h"

struct nvml_events {
        struct nvml *n;
        nvmlEventSet_t set;
        uint64_t mask;
        bool registered[TOPO_MAX_GPUS]; /* read and written with __atomic: add_device may race wait */
};

int nvml_events_add_device(struct nvml_events *e, unsigned index, struct nvml_error *err) {
        if (!e)
                return -EINVAL;
        struct nvml *n = e->n;
        nvmlDevice_t h;
        /* A GPU re-added after a fault gets a fresh handle. */
        int r = nvml_handle_fresh(n, index, &h, err);
        if (r < 0)
                return r;

        unsigned long long supported = e->mask;
        int rc = NVCALL(n, nvmlDeviceGetSupportedEventTypes, h, &supported);
        if (rc != NVML_SUCCESS && rc != NVML_SYM_MISSING)
                return nvml_fail(n, rc, "nvmlDeviceGetSupportedEventTypes", err);
        unsigned long long bits = supported & e->mask;
        if (bits == 0) {
                nvml_error_set(err, NVML_ERROR_NOT_SUPPORTED, "nvmlDeviceGetSupportedEventTypes",
                               "the GPU supports none of the requested event types");
                return -EOPNOTSUPP;
        }
        rc = NVCALL(n, nvmlDeviceRegisterEvents, h, bits, e->set);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc, "nvmlDeviceRegisterEvents", err);

        __atomic_store_n(&e->registered[index], true, __ATOMIC_RELEASE);
        return 0;
}

int nvml_events_new(struct nvml *n, uint64_t mask, struct nvml_events **ret, struct nvml_error *err) {
        if (!n || !ret)
                return -EINVAL;
        if (!n->sym.nvmlEventSetCreate || !n->sym.nvmlEventSetFree || !n->sym.nvmlEventSetWait_v2 ||
            !n->sym.nvmlDeviceRegisterEvents) {
                const char *missing = !n->sym.nvmlEventSetCreate    ? "nvmlEventSetCreate"
                                      : !n->sym.nvmlEventSetFree    ? "nvmlEventSetFree"
                                      : !n->sym.nvmlEventSetWait_v2 ? "nvmlEventSetWait_v2"
                                                                    : "nvmlDeviceRegisterEvents";
                return nvml_fail(n, NVML_SYM_MISSING, missing, err);
        }

        unsigned count;
        int r = nvml_device_count(n, &count, err);
        if (r < 0)
                return r;

        _cleanup_(freep) struct nvml_events *e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->n = n;
        e->mask = mask ? mask : nvmlEventTypeXidCriticalError;
        int rc = n->sym.nvmlEventSetCreate(&e->set);
        if (rc != NVML_SUCCESS)
                return nvml_fail(n, rc, "nvmlEventSetCreate", err);

        for (unsigned i = 0; i < count && i < TOPO_MAX_GPUS; i++)
                (void)nvml_events_add_device(e, i, NULL); /* skipped GPUs: see nvml_events_registered */

        *ret = TAKE_PTR(e);
        return 0;
}

struct nvml_events *nvml_events_free(struct nvml_events *e) {
        if (!e)
                return NULL;
        e->n->sym.nvmlEventSetFree(e->set); /* checked at creation */
        free(e);
        return NULL;
}

bool nvml_events_registered(const struct nvml_events *e, unsigned index) {
        if (!e || index >= TOPO_MAX_GPUS)
                return false;
        return __atomic_load_n(&e->registered[index], __ATOMIC_ACQUIRE);
}

int nvml_events_wait(struct nvml_events *e, unsigned timeout_ms, struct nvml_event *ret, struct nvml_error *err) {
        if (!e || !ret)
                return -EINVAL;
        nvmlEventData_t d = { 0 };
        int rc = e->n->sym.nvmlEventSetWait_v2(e->set, &d, timeout_ms);
        if (rc == NVML_ERROR_TIMEOUT)
                return 0;
        if (rc != NVML_SUCCESS)
                return nvml_fail(e->n, rc, "nvmlEventSetWait_v2", err);
        *ret = (struct nvml_event){
                .gpu = nvml_index_of_handle(e->n, d.device),
                .type = d.eventType,
                .data = d.eventData,
                .xid = d.eventType == nvmlEventTypeXidCriticalError
                               ? (d.eventData > UINT32_MAX ? 999u : (unsigned)d.eventData)
                               : 0,
                .gpu_instance = d.gpuInstanceId,
                .compute_instance = d.computeInstanceId,
        };
        return 1;
}
