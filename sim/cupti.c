/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cupti — the simulated libcupti.so.13: CUPTI's callback API for the driver-API domain, as profilers
 * (Kineto, Nsight, tools built on CUPTI) use it: one subscriber (cuptiSubscribe), its callback enabled per
 * domain (cuptiEnableDomain) or per callback id (cuptiEnableCallback), called by the driver on the thread
 * that made the API call, inside the call, at CUPTI_API_ENTER and CUPTI_API_EXIT with a CUpti_CallbackData.
 * Like the real one it reaches the driver through a private export table (sim/cupti-table.h), loading
 * libcuda.so.1 by name (so, in a limited container, through whatever answers to that name).
 *
 * Only the driver-API domain, and only the calls the simulated driver traces (cuMemAlloc_v2, cuMemFree_v2,
 * cuLaunchKernel). Exports nothing but cupti* (cupti.map).
 */
#include "interposer/cupti-abi.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "sim/cupti-table.h"

#define _public_ __attribute__((visibility("default")))
#define MAX_CBID 1024u

struct CUpti_Subscriber_st {
        CUpti_CallbackFunc callback;
        void *userdata;
        bool enabled[MAX_CBID]; /* driver-API callback ids; atomics */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUpti_Subscriber_st subscriber;
static struct CUpti_Subscriber_st *active; /* atomic: the one subscriber, NULL = none */
static const struct sim_cupti_table *table;

static void on_api(CUpti_CallbackId cbid, CUpti_ApiCallbackSite site, const char *name, const void *params,
                   CUresult *ret, CUcontext ctx, uint64_t *correlation, uint32_t correlation_id) {
        struct CUpti_Subscriber_st *s = __atomic_load_n(&active, __ATOMIC_ACQUIRE);
        if (!s || cbid >= MAX_CBID || !__atomic_load_n(&s->enabled[cbid], __ATOMIC_RELAXED))
                return;
        CUpti_CallbackData d = {
                .callbackSite = site,
                .functionName = name,
                .functionParams = params,
                .functionReturnValue = ret,
                .symbolName = NULL,
                .context = ctx,
                .contextUid = ctx ? 1 : 0,
                .correlationData = correlation,
                .correlationId = correlation_id,
        };
        s->callback(s->userdata, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &d);
}

/* The driver's table for CUPTI (NULL when there is no driver). */
static const struct sim_cupti_table *driver_table(void) {
        if (table)
                return table;
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        CUresult (*get)(const void **, const CUuuid *) =
                h ? (CUresult(*)(const void **, const CUuuid *))dlsym(h, "cuGetExportTable") : NULL;
        static const CUuuid id = SIM_CUPTI_TABLE_ID;
        const void *t = NULL;
        if (get && get(&t, &id) == CUDA_SUCCESS && t &&
            ((const struct sim_cupti_table *)t)->size >= sizeof(struct sim_cupti_table))
                table = t;
        return table;
}

_public_ CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *ret, CUpti_CallbackFunc callback, void *userdata) {
        if (!ret || !callback)
                return CUPTI_ERROR_INVALID_PARAMETER;
        pthread_mutex_lock(&lock);
        CUptiResult r = CUPTI_SUCCESS;
        if (active)
                r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; /* CUPTI allows one subscriber per process */
        else if (!driver_table())
                r = CUPTI_ERROR_NOT_INITIALIZED;
        else {
                memset(&subscriber, 0, sizeof subscriber);
                subscriber.callback = callback;
                subscriber.userdata = userdata;
                __atomic_store_n(&active, &subscriber, __ATOMIC_RELEASE);
                table->set_api_callback(on_api);
                *ret = &subscriber;
        }
        pthread_mutex_unlock(&lock);
        return r;
}

_public_ CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle s) {
        pthread_mutex_lock(&lock);
        CUptiResult r = s && s == active ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
        if (r == CUPTI_SUCCESS) {
                table->set_api_callback(NULL);
                __atomic_store_n(&active, NULL, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&lock);
        return r;
}

_public_ CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle s, CUpti_CallbackDomain domain,
                                         CUpti_CallbackId cbid) {
        if (!s || s != __atomic_load_n(&active, __ATOMIC_ACQUIRE) || domain <= CUPTI_CB_DOMAIN_INVALID ||
            domain >= CUPTI_CB_DOMAIN_SIZE)
                return CUPTI_ERROR_INVALID_PARAMETER;
        if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cbid >= MAX_CBID)
                return CUPTI_SUCCESS; /* nothing of the other domains is ever reported here */
        __atomic_store_n(&s->enabled[cbid], enable != 0, __ATOMIC_RELAXED);
        return CUPTI_SUCCESS;
}

_public_ CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle s, CUpti_CallbackDomain domain) {
        if (!s || s != __atomic_load_n(&active, __ATOMIC_ACQUIRE) || domain <= CUPTI_CB_DOMAIN_INVALID ||
            domain >= CUPTI_CB_DOMAIN_SIZE)
                return CUPTI_ERROR_INVALID_PARAMETER;
        if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
                for (unsigned i = 0; i < MAX_CBID; i++)
                        __atomic_store_n(&s->enabled[i], enable != 0, __ATOMIC_RELAXED);
        return CUPTI_SUCCESS;
}

_public_ CUptiResult cuptiGetResultString(CUptiResult result, const char **str) {
        if (!str)
                return CUPTI_ERROR_INVALID_PARAMETER;
        switch (result) {
                case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
                case CUPTI_ERROR_INVALID_PARAMETER: *str = "CUPTI_ERROR_INVALID_PARAMETER"; break;
                case CUPTI_ERROR_NOT_INITIALIZED: *str = "CUPTI_ERROR_NOT_INITIALIZED"; break;
                case CUPTI_ERROR_INVALID_HANDLE: *str = "CUPTI_ERROR_INVALID_HANDLE"; break;
                case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
                        *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
                        break;
                default: *str = "CUPTI_ERROR_UNKNOWN"; return CUPTI_ERROR_INVALID_PARAMETER;
        }
        return CUPTI_SUCCESS;
}
