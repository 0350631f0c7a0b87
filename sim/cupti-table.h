/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cupti-table — how the simulated libcupti.so.13 reaches the simulated libcuda.so.1: as NVIDIA's CUPTI
 * reaches the driver, through a private export table (cuGetExportTable with an id only the two know), never
 * through an exported symbol. The driver then calls the one installed function on every traced API call,
 * on the calling thread, inside the call: at CUPTI_API_ENTER before its work and at CUPTI_API_EXIT after.
 */
#pragma once

#include "interposer/cupti-abi.h"

/* The export table's id (16 bytes, like the driver's own table ids). */
#define SIM_CUPTI_TABLE_ID                                                                         \
        {                                                                                          \
                { 'g', 's', '-', 's', 'i', 'm', '-', 'c', 'u', 'p', 't', 'i', '-', 'a', 'p', 'i' } \
        }

/* One traced call at one site: ret is the call's result (set at EXIT), correlation is shared by its two sites. */
typedef void (*sim_cupti_api_fn)(CUpti_CallbackId cbid, CUpti_ApiCallbackSite site, const char *name,
                                 const void *params, CUresult *ret, CUcontext ctx, uint64_t *correlation,
                                 uint32_t correlation_id);

struct sim_cupti_table {
        size_t size; /* sizeof(struct sim_cupti_table) */
        /* Install (or, NULL, remove) the function the driver calls on traced calls. */
        void (*set_api_callback)(sim_cupti_api_fn fn);
};
