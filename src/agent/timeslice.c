/* SPDX-License-Identifier: Apache-2.0 */
/*
 * timeslice — the time-slicing replicas' handlers (timeslice.h): GetPreferredAllocation spreading replicas over
 * GPUs, Allocate checked against the device table, answered with the replicas' GPUs and recorded per replica ID.
 * The scheduler's assignments (assign.h) are for whole GPUs and fractions: a time-sliced resource is placed by
 * kubelet alone. Must never: let a request's IDs or sizes index anything unchecked, hand out a replica of a GPU
 * held another way, or leave the lock held on an error path.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "agent/plugin-internal.h"
#include "agent/timeslice.h"
#include "util/mps-client.h"
#include "util/util.h"

/* One request's IDs, resolved: replicas per GPU (a bitmap of j) and plain GPUs (not replicated). */
struct picks {
        uint64_t gpus;  /* every GPU named */
        uint64_t plain; /* GPUs named by their own ID */
        unsigned n;     /* IDs */
        unsigned n_rep; /* replica IDs among them */
        uint8_t rep[DEVICES_MAX][TIMESLICE_REPLICAS_MAX / 8];
};

static bool rep_test(const struct picks *k, unsigned g, unsigned j) {
        return k->rep[g][j / 8] & (1u << (j % 8));
}

static void rep_set(struct picks *k, unsigned g, unsigned j) {
        k->rep[g][j / 8] |= (uint8_t)(1u << (j % 8));
}

/* Resolve ids against what service svc lists; with `usable` each must be free to hand out now. Caller holds the
 * lock. */
static enum rpc_code resolve(const struct plugin *p, const struct plugin_service *svc, const struct plugin_usage *u,
                             char **ids, size_t n, bool usable, const char *what, struct picks *ret,
                             struct gs_error *st) {
        const struct devices *d = plugin_devices(p);
        uint64_t rep = plugin_replicated(p);
        for (size_t k = 0; k < n; k++) {
                const char *id = ids[k] ? ids[k] : "";
                unsigned g, j;
                bool is_rep = timeslice_parse_id(d, id, TIMESLICE_REPLICAS_MAX, &g, &j) == 0 && ((rep >> g) & 1) &&
                              j < plugin_replicas_of(p, g);
                if (!is_rep) {
                        int i = devices_find(d, id);
                        if (i < 0 || ((rep >> i) & 1))
                                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: unknown device ID \"%.96s\"", what, id);
                        g = (unsigned)i;
                }
                uint64_t bit = UINT64_C(1) << g;
                if (!plugin_serves(p, svc, g))
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: device %s is not one of this resource's", what,
                                         id);
                if (is_rep ? rep_test(ret, g, j) : (ret->plain & bit) != 0)
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: device ID %s given twice", what, id);
                if (usable && !devices_healthy(d, g))
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: device %s is unhealthy (%s)", what, id,
                                         devices_reason(d, g));
                if (usable && (plugin_held_elsewhere(p) & bit))
                        return rpc_error(st, RPC_INVALID_ARGUMENT,
                                         "%s: device %s is held by another driver on this node (a DRA claim)", what,
                                         id);
                if (usable && ((u->frac | (is_rep ? u->plain : u->replica)) & bit))
                        return rpc_error(st, RPC_INVALID_ARGUMENT,
                                         "%s: device %s is held another way (whole, in fractions or as replicas)", what,
                                         id);
                if (is_rep) {
                        rep_set(ret, g, j);
                        ret->n_rep++;
                } else
                        ret->plain |= bit;
                ret->gpus |= bit;
                ret->n++;
        }
        return RPC_OK;
}

/* ---- GetPreferredAllocation: spread ---- */

/* The free ID of GPU g with the lowest number (a plain GPU: its own ID), -1 none; in `avail` minus `taken`. */
static int first_free(const struct picks *avail, const struct picks *taken, unsigned g, unsigned n) {
        uint64_t bit = UINT64_C(1) << g;
        if (avail->plain & bit)
                return taken->plain & bit ? -1 : 0;
        for (unsigned j = 0; j < n; j++)
                if (rep_test(avail, g, j) && !rep_test(taken, g, j))
                        return (int)j;
        return -1;
}

/* lint: long — one container's preferred replicas: the bounds checked, must-include first, then each pick from
 * the GPU with the fewest IDs held (the record's and this answer's), the lowest NVML index on a tie. */
static enum rpc_code prefer_one(void *ctx, const struct assign_ctx *ax,
                                const V1beta1__ContainerPreferredAllocationRequest *cr, unsigned k, struct arena *a,
                                V1beta1__ContainerPreferredAllocationResponse *out, struct gs_error *st) {
        const struct plugin_service *svc = ctx;
        struct plugin *p = svc->p;
        const struct devices *d = plugin_devices(p);
        unsigned n = devices_count(d);
        char what[48];
        (void)ax;
        snprintf(what, sizeof what, "container request %u", k);
        if (cr->allocation_size <= 0 || (size_t)cr->allocation_size > cr->n_available_deviceids)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: allocation_size %" PRId32 " is not in 1..%zu", what,
                                 cr->allocation_size, cr->n_available_deviceids);
        struct plugin_usage u;
        plugin_usage(p, &u);
        /* the call's arena, not the stack or thread-local storage: three of them are 24 KiB (a thread-local
         * would be zeroed for every thread this binary starts, in every subcommand) */
        struct picks *pk = arena_alloc(a, 3 * sizeof *pk);
        if (!pk)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        memset(pk, 0, 3 * sizeof *pk);
        struct picks *avail = &pk[0], *must = &pk[1], *taken = &pk[2];
        enum rpc_code c =
                resolve(p, svc, &u, cr->available_deviceids, cr->n_available_deviceids, false, what, avail, st);
        if (c == RPC_OK)
                c = resolve(p, svc, &u, cr->must_include_deviceids, cr->n_must_include_deviceids, true, what, must, st);
        if (c != RPC_OK)
                return c;
        if (must->n > (unsigned)cr->allocation_size)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: %u must-include devices but allocation_size %" PRId32,
                                 what, must->n, cr->allocation_size);
        out->deviceids = arena_alloc(a, sizeof(char *) * ((size_t)cr->allocation_size + 1));
        if (!out->deviceids)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        unsigned load[DEVICES_MAX];
        for (unsigned g = 0; g < n; g++)
                load[g] = u.rep[g] + (unsigned)((u.plain >> g) & 1);
        for (size_t m = 0; m < cr->n_must_include_deviceids; m++) {
                out->deviceids[out->n_deviceids++] = arena_printf(a, "%s", cr->must_include_deviceids[m]);
                unsigned g, j;
                if (timeslice_parse_id(d, cr->must_include_deviceids[m], TIMESLICE_REPLICAS_MAX, &g, &j) == 0)
                        rep_set(taken, g, j);
                else
                        g = (unsigned)devices_find(d, cr->must_include_deviceids[m]), taken->plain |= UINT64_C(1) << g;
                load[g]++;
        }
        while (out->n_deviceids < (size_t)cr->allocation_size) {
                int best = -1, best_j = -1;
                for (unsigned g = 0; g < n; g++) {
                        if (!((avail->gpus >> g) & 1) || !devices_healthy(d, g) ||
                            ((u.frac | plugin_held_elsewhere(p)) & (UINT64_C(1) << g)))
                                continue;
                        int j = first_free(avail, taken, g, plugin_replicas_of(p, g));
                        if (j < 0)
                                continue;
                        if (best < 0 || load[g] < load[best] ||
                            (load[g] == load[best] &&
                             devices_info(d, g)->index < devices_info(d, (unsigned)best)->index))
                                best = (int)g, best_j = j;
                }
                if (best < 0)
                        return rpc_error(st, RPC_RESOURCE_EXHAUSTED,
                                         "%s: fewer than %" PRId32 " usable devices offered", what,
                                         cr->allocation_size);
                uint64_t bit = UINT64_C(1) << best;
                char id[TIMESLICE_ID_MAX];
                if (avail->plain & bit) {
                        taken->plain |= bit;
                        snprintf(id, sizeof id, "%s", devices_info(d, (unsigned)best)->id);
                } else {
                        rep_set(taken, (unsigned)best, (unsigned)best_j);
                        timeslice_format_id(devices_info(d, (unsigned)best)->id, (unsigned)best_j, id, sizeof id);
                }
                load[best]++;
                if (!(out->deviceids[out->n_deviceids++] = arena_printf(a, "%s", id)))
                        return rpc_error(st, RPC_INTERNAL, "out of memory");
        }
        return RPC_OK;
}

enum rpc_code timeslice_get_preferred(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret,
                                      size_t *ret_len, struct gs_error *st) {
        struct plugin_service *svc = userdata;
        plugin_kubelet_called(svc->p);
        V1beta1__PreferredAllocationRequest *in = v1beta1__preferred_allocation_request__unpack(NULL, req_len, req);
        if (!in)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "cannot decode PreferredAllocationRequest");
        struct assign_ctx ax; /* none: PLUGIN_REPLICA is not a kind the scheduler assigns */
        plugin_assign_preferred(svc->p, PLUGIN_REPLICA, in, &ax);
        enum rpc_code c = plugin_preferred_each(svc->p, in, &ax, prefer_one, svc, ret, ret_len, st);
        assign_call_end(&ax);
        v1beta1__preferred_allocation_request__free_unpacked(in, NULL);
        return c;
}

/* ---- Allocate ---- */

/* An MPS client's part of the answer, NVIDIA's (internal/plugin/mps.go there): CUDA_MPS_PIPE_DIRECTORY=/mps/<resource>/
 * pipe, the daemon's pipe dir mounted there and its shm dir at /dev/shm, both read-write (util/mps-client.h, the
 * same edits as a DRA MPS claim's CDI spec). */
static enum rpc_code mps_client(struct plugin *p, unsigned set, const char *resource, struct arena *a,
                                V1beta1__ContainerAllocateResponse *o, struct gs_error *st) {
        V1beta1__ContainerAllocateResponse__EnvsEntry *e = arena_alloc(a, sizeof *e);
        V1beta1__Mount *m = arena_alloc(a, MPS_CLIENT_MOUNTS * sizeof *m);
        const char *pipe = arena_printf(a, TIMESLICE_MPS_ROOT "/%s/pipe", resource);
        o->mounts = arena_alloc(a, MPS_CLIENT_MOUNTS * sizeof(void *));
        if (!e || !m || !pipe || !o->mounts)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        struct mps_client c;
        if (mps_client_edits(plugin_replica_mps(p, set), plugin_replica_mps_shm(p, set), pipe, &c) < 0)
                return rpc_error(st, RPC_INTERNAL, "%s: resource name too long", resource);
        v1beta1__container_allocate_response__envs_entry__init(e);
        e->key = MPS_CLIENT_PIPE_ENV;
        e->value = (char *)pipe;
        o->envs[o->n_envs++] = e;
        for (unsigned i = 0; i < c.n_mounts; i++) {
                v1beta1__mount__init(&m[i]);
                m[i].container_path = arena_printf(a, "%s", c.mount[i].container);
                m[i].host_path = arena_printf(a, "%s", c.mount[i].host);
                m[i].read_only = 0;
                if (!m[i].container_path || !m[i].host_path)
                        return rpc_error(st, RPC_INTERNAL, "out of memory");
                o->mounts[o->n_mounts++] = &m[i];
        }
        return RPC_OK;
}

static void record(struct plugin *p, const char *resource, const struct picks *k) {
        const struct devices *d = plugin_devices(p);
        time_t now = time(NULL);
        for (unsigned g = 0; g < devices_count(d); g++)
                for (unsigned j = 0; ((k->gpus >> g) & 1) && !((k->plain >> g) & 1) && j < plugin_replicas_of(p, g);
                     j++) {
                        if (!rep_test(k, g, j))
                                continue;
                        struct state_alloc e = { .gpu_index = devices_info(d, g)->index, .alloc_time = (uint64_t)now };
                        strscpy(e.resource, resource, sizeof e.resource);
                        timeslice_format_id(devices_info(d, g)->id, j, e.device_id, sizeof e.device_id);
                        (void)state_remove(plugin_record(p), resource, e.device_id);
                        (void)state_add(plugin_record(p), &e); /* cannot fail for a valid, known ID */
                }
        if (k->plain)
                plugin_record_whole(p, resource, k->plain);
}

/* lint: long — one Allocate: every container's IDs resolved and checked (failRequestsGreaterThanOne, no ID twice
 * across containers), the answers built, then all recorded at once under the one lock. */
enum rpc_code timeslice_allocate(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                                 struct gs_error *st) {
        struct plugin_service *svc = userdata;
        struct plugin *p = svc->p;
        struct devices *d = plugin_devices(p);
        const char *resource =
                svc->kind == PLUGIN_REPLICA ? plugin_replica_resource(p, svc->set) : plugin_resource(p, PLUGIN_WHOLE);
        /* the one set whose replicas this resource lists: the service's, or the set keeping the whole-GPU name */
        int set = svc->kind == PLUGIN_REPLICA ? (int)svc->set : plugin_replica_find(p, resource);
        struct arena a = { 0 };
        plugin_kubelet_called(p);
        V1beta1__AllocateRequest *in = v1beta1__allocate_request__unpack(NULL, req_len, req);
        if (!in)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "cannot decode AllocateRequest");
        V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
        /* the call's arena (see prefer_one): 72 KiB */
        struct picks *all = arena_alloc(&a, 9 * sizeof *all), *one = all ? all + 1 : NULL;
        const size_t n_one = 8;
        if (!all) {
                arena_free(&a);
                v1beta1__allocate_request__free_unpacked(in, NULL);
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        }
        memset(all, 0, sizeof *all);
        devices_lock(d);
        void **slots = NULL;
        struct plugin_usage u;
        plugin_usage(p, &u);
        enum rpc_code c = plugin_responses_new(in->n_container_requests, "AllocateRequest", &a, &slots, st);
        if (c == RPC_OK && in->n_container_requests > n_one)
                c = rpc_error(st, RPC_INVALID_ARGUMENT, "AllocateRequest: more than %zu containers", n_one);
        resp.container_responses = (void *)slots;
        for (size_t k = 0; c == RPC_OK && k < in->n_container_requests; k++) {
                const V1beta1__ContainerAllocateRequest *cr = in->container_requests[k];
                char what[48];
                snprintf(what, sizeof what, "container request %zu", k);
                memset(&one[k], 0, sizeof one[k]);
                if (cr->n_devices_ids == 0) {
                        c = rpc_error(st, RPC_INVALID_ARGUMENT, "%s: no device IDs", what);
                        break;
                }
                c = resolve(p, svc, &u, cr->devices_ids, cr->n_devices_ids, true, what, &one[k], st);
                if (c == RPC_OK && set >= 0 && plugin_replica_fail_gt_one(p, (unsigned)set) && one[k].n_rep > 0 &&
                    cr->n_devices_ids > 1)
                        c = rpc_error(st, RPC_INVALID_ARGUMENT,
                                      "request for '%s: %zu' too large: maximum request size for shared resources is 1",
                                      resource, cr->n_devices_ids);
                if (c == RPC_OK) /* the same ID for two containers: resolve's duplicate check over them all */
                        c = resolve(p, svc, &u, cr->devices_ids, cr->n_devices_ids, false,
                                    "a device is also requested by another container:", all, st);
                V1beta1__ContainerAllocateResponse *o = c == RPC_OK ? arena_alloc(&a, sizeof *o) : NULL;
                if (c == RPC_OK && !o)
                        c = rpc_error(st, RPC_INTERNAL, "out of memory");
                if (c != RPC_OK)
                        break;
                v1beta1__container_allocate_response__init(o);
                bool mps = set >= 0 && plugin_replica_mps(p, (unsigned)set)[0] && one[k].n_rep > 0;
                c = plugin_fill_devices(p, &a, one[k].gpus, mps, o, st); /* NVIDIA_VISIBLE_DEVICES=<uuid> */
                if (c == RPC_OK && mps)
                        c = mps_client(p, (unsigned)set, resource, &a, o,
                                       st); /* the limits are the daemon's defaults (mps.c) */
                if (o->n_envs == 0)
                        o->envs = NULL;
                resp.container_responses[resp.n_container_responses++] = o;
        }
        if (c == RPC_OK)
                for (size_t k = 0; k < in->n_container_requests; k++)
                        record(p, resource, &one[k]);
        plugin_count(p, PLUGIN_CALL_ALLOCATE, c == RPC_OK);
        devices_unlock(d);
        if (c == RPC_OK)
                devices_changed(d); /* the record changed: persisted, the holders published */
        if (c == RPC_OK && rpc_pack(&resp.base, ret, ret_len) < 0)
                c = rpc_error(st, RPC_INTERNAL, "out of memory");
        arena_free(&a);
        v1beta1__allocate_request__free_unpacked(in, NULL);
        return c;
}

bool timeslice_all_renamed(const struct plugin *p) {
        if (!plugin_replicated(p))
                return false;
        const struct plugin_service whole = { .kind = PLUGIN_WHOLE };
        for (unsigned i = 0; i < devices_count(plugin_devices(p)); i++)
                if (plugin_serves(p, &whole, i))
                        return false;
        return true;
}

int timeslice_serve(struct plugin_service *svc, struct rpc_server *s) {
        int r;
        if ((r = plugin_serve_common_svc(svc, s)) < 0 ||
            (r = rpc_server_add_unary(s, "/v1beta1.DevicePlugin/GetPreferredAllocation", timeslice_get_preferred,
                                      svc)) < 0 ||
            (r = rpc_server_add_unary(s, "/v1beta1.DevicePlugin/Allocate", timeslice_allocate, svc)) < 0)
                return r;
        return 0;
}
