/* SPDX-License-Identifier: Apache-2.0 */
/*
 * whole — the whole-GPU resource's handlers (nvidia.com/gpu; whole.h): GetPreferredAllocation answered by
 * the topology-aware allocator (alloc_pick_gpus), Allocate checked against the device table and
 * recorded. Must never: let a request's IDs, sizes or counts index anything unchecked, hand out a
 * GPU that is unhealthy or has fractions out, or leave the lock held on an error path.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "agent/plugin-internal.h"
#include "agent/timeslice.h"
#include "agent/whole.h"
#include "alloc/alloc.h"
#include "util/util.h"

/* ---- request checking shared by Allocate and GetPreferredAllocation ---- */

/* Turn a list of IDs into a set of table indices. Every ID must be known; with `healthy` every
 * one must be healthy; duplicates are refused. Caller holds the lock. */
static enum rpc_code ids_to_set(const struct plugin *p, char **ids, size_t n, bool healthy, const char *what,
                                uint64_t *ret, struct gs_error *st) {
        const struct devices *d = plugin_devices(p);
        const struct plugin_options *o = plugin_options(p);
        uint64_t set = 0;
        struct plugin_usage u;
        const struct plugin_service whole_svc = { .kind = PLUGIN_WHOLE };
        plugin_usage(p, &u);
        for (size_t k = 0; k < n; k++) {
                const char *id = ids[k] ? ids[k] : "";
                int i = devices_find(d, id);
                if (i < 0)
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: unknown device ID \"%.96s\"", what, id);
                if (!plugin_serves(p, &whole_svc, (unsigned)i))
                        return rpc_error(st, RPC_INVALID_ARGUMENT,
                                         "%s: device %s is not a whole GPU of this resource (a MIG device, or a GPU "
                                         "in MIG mode)",
                                         what, id);
                if (set & (UINT64_C(1) << i))
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: device ID %s given twice", what, id);
                if (healthy && !devices_healthy(d, (unsigned)i))
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: device %s is unhealthy (%s)", what, id,
                                         devices_reason(d, (unsigned)i));
                if (healthy && (plugin_held_elsewhere(p) & (UINT64_C(1) << i)))
                        return rpc_error(st, RPC_INVALID_ARGUMENT,
                                         "%s: device %s is held by another driver on this node (a DRA claim)", what,
                                         id);
                if (healthy && (u.frac & (UINT64_C(1) << i)))
                        return rpc_error(st, RPC_INVALID_ARGUMENT,
                                         "%s: device %s is shared: fractions of it are allocated (%s%s%s), so it "
                                         "cannot be handed out whole",
                                         what, id, o->core_resource,
                                         o->core_resource[0] && o->memory_resource[0] ? ", " : "", o->memory_resource);
                set |= UINT64_C(1) << i;
        }
        *ret = set;
        return RPC_OK;
}

/* Table index → topology index (the allocator works on NVML indices). */
static int topo_index(const struct devices *d, unsigned i) {
        const struct topo *t = devices_topo(d);
        const struct device_info *x = devices_info(d, i);
        for (unsigned g = 0; g < t->n_gpus; g++)
                if (t->gpu[g].index == x->index && streq(t->gpu[g].uuid, x->id))
                        return (int)g;
        return -1;
}

/* ---- GetPreferredAllocation ---- */

/* lint: long — one container's preferred GPUs: every bound of the request checked in turn, the candidates translated
 * to the allocator's topology indices (unhealthy, shared and held GPUs left out), the allocator's answer back. */
static enum rpc_code prefer_one(void *ctx, const struct assign_ctx *ax,
                                const V1beta1__ContainerPreferredAllocationRequest *cr, unsigned k, struct arena *a,
                                V1beta1__ContainerPreferredAllocationResponse *out, struct gs_error *st) {
        struct plugin *p = ctx;
        const struct devices *d = plugin_devices(p);
        unsigned n = devices_count(d);
        char what[48];
        uint64_t avail = 0, must = 0;
        enum rpc_code c;
        (void)ax; /* plugin_preferred_each narrowed kubelet's IDs to the assignment already */

        snprintf(what, sizeof what, "container request %u", k);
        if (cr->allocation_size <= 0 || (unsigned)cr->allocation_size > n)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: allocation_size %" PRId32 " is not in 1..%u", what,
                                 cr->allocation_size, n);
        c = ids_to_set(p, cr->available_deviceids, cr->n_available_deviceids, false, what, &avail, st);
        if (c != RPC_OK)
                return c;
        c = ids_to_set(p, cr->must_include_deviceids, cr->n_must_include_deviceids, true, what, &must, st);
        if (c != RPC_OK)
                return c;
        if ((must & ~avail) != 0)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: must_include_deviceIDs not all in available_deviceIDs",
                                 what);
        if ((unsigned)__builtin_popcountll(must) > (unsigned)cr->allocation_size)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: %d must-include devices but allocation_size %" PRId32,
                                 what, __builtin_popcountll(must), cr->allocation_size);

        /* Translate to topology indices, dropping unhealthy GPUs from what may be offered. */
        struct alloc_request ar = { .count = (unsigned)cr->allocation_size };
        uint64_t held_free = 0; /* available but held by someone per our records */
        struct plugin_usage u;
        plugin_usage(p, &u);
        const char *resource = plugin_resource(p, PLUGIN_WHOLE);
        for (unsigned i = 0; i < n; i++) {
                if (!(avail & (UINT64_C(1) << i)) || !devices_healthy(d, i) || (u.frac & (UINT64_C(1) << i)))
                        continue;
                int g = topo_index(d, i);
                if (g < 0)
                        continue;
                alloc_set_t bit = (alloc_set_t)1 << g;
                const struct state_alloc *held = state_find(plugin_record(p), resource, devices_info(d, i)->id);
                if (held && held->pod_name[0] && !(must & (UINT64_C(1) << i)))
                        held_free |= bit;
                ar.available |= bit;
                if (must & (UINT64_C(1) << i))
                        ar.must_include |= bit;
        }
        /* Prefer GPUs nobody holds; fall back to kubelet's view if that leaves too few. */
        if ((unsigned)__builtin_popcountll(ar.available & ~held_free) >= ar.count)
                ar.available &= ~held_free;

        struct alloc_result res;
        struct gs_error err = { 0 };
        int r = alloc_pick_gpus(devices_topo(d), &ar, &res, &err);
        if (r < 0)
                return rpc_error(st, r == -ENOSPC ? RPC_RESOURCE_EXHAUSTED : RPC_INVALID_ARGUMENT,
                                 "%s: no preferred allocation of %" PRId32 " healthy devices: %.159s", what,
                                 cr->allocation_size, err.message[0] ? err.message : "allocator refused");
        out->deviceids = arena_alloc(a, sizeof(char *) * (res.n + 1));
        if (!out->deviceids)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        for (unsigned j = 0; j < res.n; j++) {
                int i = devices_find(d, devices_topo(d)->gpu[res.gpus[j]].uuid);
                if (i < 0)
                        return rpc_error(st, RPC_INTERNAL, "allocator returned an unknown GPU");
                out->deviceids[out->n_deviceids++] = arena_printf(a, "%s", devices_info(d, (unsigned)i)->id);
        }
        return RPC_OK;
}

enum rpc_code whole_get_preferred(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                                  struct gs_error *st) {
        struct plugin *p = userdata;
        plugin_kubelet_called(p);
        V1beta1__PreferredAllocationRequest *in = v1beta1__preferred_allocation_request__unpack(NULL, req_len, req);
        if (!in)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "cannot decode PreferredAllocationRequest");
        struct assign_ctx ax; /* the scheduler's assignment (assign.h) */
        plugin_assign_preferred(p, PLUGIN_WHOLE, in, &ax);
        enum rpc_code c = plugin_preferred_each(p, in, &ax, prefer_one, p, ret, ret_len, st);
        assign_call_end(&ax);
        v1beta1__preferred_allocation_request__free_unpacked(in, NULL);
        return c;
}

/* ---- Allocate ---- */

static enum rpc_code allocate_one(struct plugin *p, const V1beta1__ContainerAllocateRequest *cr, unsigned k,
                                  struct arena *a, V1beta1__ContainerAllocateResponse *out, uint64_t *ret_set,
                                  struct gs_error *st) {
        char what[48];
        uint64_t set = 0;

        snprintf(what, sizeof what, "container request %u", k);
        if (cr->n_devices_ids == 0)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: no device IDs", what);
        enum rpc_code c = ids_to_set(p, cr->devices_ids, cr->n_devices_ids, true, what, &set, st);
        if (c != RPC_OK)
                return c;
        c = plugin_fill_devices(p, a, set, 0, out, st);
        if (c != RPC_OK)
                return c;
        if (out->n_envs == 0)
                out->envs = NULL;
        *ret_set = set;
        return RPC_OK;
}

enum rpc_code whole_allocate(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                             struct gs_error *st) {
        struct plugin *p = userdata;
        struct devices *d = plugin_devices(p);
        struct arena a = { 0 };
        uint64_t all = 0;
        plugin_kubelet_called(p);

        V1beta1__AllocateRequest *in = v1beta1__allocate_request__unpack(NULL, req_len, req);
        if (!in)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "cannot decode AllocateRequest");
        V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
        struct assign_ctx ax; /* the scheduler's assignment (assign.h) */
        plugin_assign_allocate(p, PLUGIN_WHOLE, in, &ax);

        devices_lock(d);
        void **slots = NULL;
        enum rpc_code c = plugin_responses_new(in->n_container_requests, "AllocateRequest", &a, &slots, st);
        if (c == RPC_OK)
                c = assign_call_check(&ax, "container request 0", st);
        resp.container_responses = (void *)slots;
        for (size_t k = 0; c == RPC_OK && k < in->n_container_requests; k++) {
                V1beta1__ContainerAllocateResponse *o = arena_alloc(&a, sizeof *o);
                uint64_t set = 0;
                if (!o) {
                        c = rpc_error(st, RPC_INTERNAL, "out of memory");
                        break;
                }
                v1beta1__container_allocate_response__init(o);
                c = allocate_one(p, in->container_requests[k], (unsigned)k, &a, o, &set, st);
                if (c == RPC_OK && (set & all))
                        c = rpc_error(st, RPC_INVALID_ARGUMENT,
                                      "container request %zu: a device is also requested by another container", k);
                all |= set;
                resp.container_responses[resp.n_container_responses++] = o;
        }
        if (c == RPC_OK) {
                plugin_record_whole(p, plugin_resource(p, PLUGIN_WHOLE), all);
                assign_call_commit(&ax);
        }
        plugin_count(p, PLUGIN_CALL_ALLOCATE, c == RPC_OK);
        devices_unlock(d);

        if (c == RPC_OK && rpc_pack(&resp.base, ret, ret_len) < 0)
                c = rpc_error(st, RPC_INTERNAL, "out of memory");
        arena_free(&a);
        assign_call_end(&ax);
        v1beta1__allocate_request__free_unpacked(in, NULL);
        return c;
}

int whole_serve(struct plugin *p, struct rpc_server *s) {
        int r;
        if (plugin_replica_find(p, plugin_resource(p, PLUGIN_WHOLE)) >= 0) /* replicas under this very name */
                return timeslice_serve(plugin_service(p, PLUGIN_WHOLE), s);
        if ((r = plugin_serve_common(p, PLUGIN_WHOLE, s)) < 0 ||
            (r = rpc_server_add_unary(s, "/v1beta1.DevicePlugin/GetPreferredAllocation", whole_get_preferred, p)) < 0 ||
            (r = rpc_server_add_unary(s, "/v1beta1.DevicePlugin/Allocate", whole_allocate, p)) < 0)
                return r;
        return 0;
}
