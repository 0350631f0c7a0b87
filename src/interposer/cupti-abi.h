/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cupti-abi — the subset of NVIDIA's CUPTI callback API (cupti_result.h, cupti_callbacks.h,
 * cupti_driver_cbid.h, generated_cuda_meta.h) that the simulated libcupti.so.13 implements and the test
 * programs call: subscribing one callback, enabling it per domain or per callback id, and the data a
 * driver-API callback receives. Same names, values and layouts as CUPTI's headers; no toolkit needed.
 * Header only (part of gpuslice_cuda_abi); the interposer itself never calls CUPTI.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "interposer/cuda-abi.h"

#define CUPTIAPI

typedef enum {
        CUPTI_SUCCESS = 0,
        CUPTI_ERROR_INVALID_PARAMETER = 1,
        CUPTI_ERROR_NOT_INITIALIZED = 15,
        CUPTI_ERROR_INVALID_HANDLE = 19,
        CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39,
        CUPTI_ERROR_UNKNOWN = 999,
} CUptiResult;

typedef enum {
        CUPTI_CB_DOMAIN_INVALID = 0,
        CUPTI_CB_DOMAIN_DRIVER_API = 1,
        CUPTI_CB_DOMAIN_RUNTIME_API = 2,
        CUPTI_CB_DOMAIN_RESOURCE = 3,
        CUPTI_CB_DOMAIN_SYNCHRONIZE = 4,
        CUPTI_CB_DOMAIN_NVTX = 5,
        CUPTI_CB_DOMAIN_SIZE,
        CUPTI_CB_DOMAIN_FORCE_INT = 0x7fffffff
} CUpti_CallbackDomain;

typedef uint32_t CUpti_CallbackId;

typedef enum {
        CUPTI_API_ENTER = 0,
        CUPTI_API_EXIT = 1,
        CUPTI_API_CBSITE_FORCE_INT = 0x7fffffff
} CUpti_ApiCallbackSite;

/* cupti_driver_cbid.h (the ids of the entry points the simulator reports) */
#define CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2 243
#define CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2 245
#define CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel 307

/* cupti_callbacks.h: what a CUPTI_CB_DOMAIN_DRIVER_API / _RUNTIME_API callback receives as cbdata. */
typedef struct {
        CUpti_ApiCallbackSite callbackSite;
        const char *functionName;
        const void *functionParams; /* the call's arguments (<name>_params below) */
        void *functionReturnValue;  /* CUresult *: valid at CUPTI_API_EXIT */
        const char *symbolName;     /* launches: the kernel's name, else NULL */
        CUcontext context;
        uint32_t contextUid;
        uint64_t *correlationData; /* shared by the ENTER and EXIT callbacks of one call */
        uint32_t correlationId;
} CUpti_CallbackData;

typedef void(CUPTIAPI *CUpti_CallbackFunc)(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                           const void *cbdata);

typedef struct CUpti_Subscriber_st *CUpti_SubscriberHandle;

/* generated_cuda_meta.h */
typedef struct cuMemAlloc_v2_params_st {
        CUdeviceptr *dptr;
        size_t bytesize;
} cuMemAlloc_v2_params;

typedef struct cuMemFree_v2_params_st {
        CUdeviceptr dptr;
} cuMemFree_v2_params;

typedef struct cuLaunchKernel_params_st {
        CUfunction f;
        unsigned int gridDimX, gridDimY, gridDimZ;
        unsigned int blockDimX, blockDimY, blockDimZ;
        unsigned int sharedMemBytes;
        CUstream hStream;
        void **kernelParams;
        void **extra;
} cuLaunchKernel_params;

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback, void *userdata);
CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber);
CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                         CUpti_CallbackDomain domain, CUpti_CallbackId cbid);
CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain);
CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str);
