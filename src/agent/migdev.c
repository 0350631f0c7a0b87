/* SPDX-License-Identifier: Apache-2.0 */
/*
 * migdev — the MIG resources' setup and handlers (migdev.h): the strategies' resources, the preferred
 * MIG devices (one parent GPU where it can), Allocate checked against the table and recorded under the
 * resource. Must never: let a request's IDs, sizes or counts index anything unchecked, hand out a MIG
 * device that is unhealthy, of another resource, held by another driver or shared in fractions, or
 * leave the lock held on an error path.
 */
#include "agent/migdev.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "agent/plugin-internal.h"
#include "util/util.h"

int migdev_resource_name(const char *profile, char *buf, size_t len) {
        if (!profile || !profile[0])
                return -EINVAL;
        int n = snprintf(buf, len, "%s%s", MIGDEV_RESOURCE_PREFIX, profile);
        if (n < 0 || (size_t)n >= len)
                return -ENAMETOOLONG;
        for (char *c = buf + strlen(MIGDEV_RESOURCE_PREFIX); *c; c++) {
                if (*c == '+')
                        *c = '.';
                else if (!(*c >= 'a' && *c <= 'z') && !(*c >= '0' && *c <= '9') && *c != '.' && *c != '-')
                        return -EINVAL; /* not a resource name: never registered */
        }
        return 0;
}

bool migdev_single_fits(const struct devices *d, char *profile, size_t profile_len, char *why, size_t why_len) {
        const char *first = NULL;
        unsigned gpus = 0;
        snprintf(profile, profile_len, "%s", "");
        for (unsigned i = 0; i < devices_count(d); i++) {
                const struct device_info *x = devices_info(d, i);
                if (x->kind == DEVICE_GPU) {
                        gpus++;
                        if (!x->mig_mode) {
                                snprintf(why, why_len, "GPU %d (%s) is not in MIG mode", x->index, x->id);
                                return false;
                        }
                        continue;
                }
                if (!first)
                        first = x->profile;
                else if (!streq(first, x->profile)) {
                        snprintf(why, why_len, "MIG devices of more than one profile (%s and %s on GPU %d)", first,
                                 x->profile, x->index);
                        return false;
                }
        }
        if (!first) {
                snprintf(why, why_len, "%s", gpus ? "no MIG device on any GPU" : "no GPU");
                return false;
        }
        snprintf(profile, profile_len, "%s", first);
        snprintf(why, why_len, "%s", "");
        return true;
}

/* mixed: one resource per profile present, in table order. */
static int setup_mixed(struct plugin *p) {
        const struct devices *d = plugin_devices(p);
        int added = 0;
        for (unsigned i = 0; i < devices_count(d); i++) {
                const struct device_info *x = devices_info(d, i);
                char name[320];
                if (x->kind != DEVICE_MIG || plugin_device_resource(p, i)[0])
                        continue; /* a GPU, or a profile with its resource already */
                if (migdev_resource_name(x->profile, name, sizeof name) < 0)
                        continue; /* a profile no resource can name: not served */
                int r = plugin_add_mig(p, name, x->profile, false);
                if (r < 0)
                        return r;
                added++;
        }
        return added;
}

int migdev_setup(struct plugin *p, enum config_mig_strategy s, char *why, size_t why_len) {
        snprintf(why, why_len, "%s", "");
        if (s == CONFIG_MIG_MIXED)
                return setup_mixed(p);
        if (s != CONFIG_MIG_SINGLE)
                return 0;
        bool any = false;
        for (unsigned i = 0; i < devices_count(plugin_devices(p)); i++)
                any = any || devices_info(plugin_devices(p), i)->mig_mode;
        if (!any)
                return 0; /* no GPU in MIG mode: `single` is `none` (NVIDIA's too), GPUs served whole */
        char profile[MIG_PROFILE_NAME_MAX];
        bool fits = migdev_single_fits(plugin_devices(p), profile, sizeof profile, why, why_len);
        const char *resource = plugin_options(p)->resource; /* before serving: no lock needed */
        int r = plugin_add_mig(p, resource, NULL, !fits);
        return r < 0 ? r : 1;
}

/* ---- request checking ---- */

/* IDs → a set of table indices: every ID one of this resource's MIG devices, none twice; with `usable`
 * healthy, not held by another driver nor shared in fractions. Caller holds the lock. */
static enum rpc_code ids_to_set(const struct plugin_service *svc, char **ids, size_t n, bool usable, const char *what,
                                uint64_t *ret, struct gs_error *st) {
        const struct plugin *p = svc->p;
        const struct devices *d = plugin_devices(p);
        uint64_t set = 0;
        struct plugin_usage u;
        plugin_usage(p, &u);
        for (size_t k = 0; k < n; k++) {
                const char *id = ids[k] ? ids[k] : "";
                int i = devices_find(d, id);
                if (i < 0 || !plugin_serves(p, svc, (unsigned)i))
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: unknown device ID \"%.96s\" for %s", what, id,
                                         plugin_mig_resource(p, svc->mig));
                uint64_t bit = UINT64_C(1) << i;
                uint64_t mine = devices_mask_up(d, (unsigned)i); /* it, or its GPU */
                if (set & bit)
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: device ID %s given twice", what, id);
                if (usable && !devices_healthy(d, (unsigned)i))
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: MIG device %s is unhealthy (%s)", what, id,
                                         devices_reason(d, (unsigned)i));
                if (usable && (plugin_held_elsewhere(p) & mine))
                        return rpc_error(st, RPC_INVALID_ARGUMENT,
                                         "%s: MIG device %s is held by another driver on this node (a DRA claim)", what,
                                         id);
                if (usable && (u.frac & bit))
                        return rpc_error(st, RPC_INVALID_ARGUMENT,
                                         "%s: MIG device %s is shared in fractions (%s, %s); it cannot be handed out "
                                         "whole",
                                         what, id, plugin_resource(p, PLUGIN_CORE), plugin_resource(p, PLUGIN_MEMORY));
                set |= bit;
        }
        *ret = set;
        return RPC_OK;
}

/* ---- GetPreferredAllocation ---- */

/* Take up to `need` devices of `from` whose parent is table index `parent` (-1: any), in table order. */
static uint64_t take(const struct devices *d, uint64_t from, int parent, unsigned need) {
        uint64_t got = 0;
        for (unsigned i = 0; i < devices_count(d) && need > 0; i++)
                if ((from & (UINT64_C(1) << i)) && (parent < 0 || devices_info(d, i)->parent == parent)) {
                        got |= UINT64_C(1) << i;
                        need--;
                }
        return got;
}

static unsigned count_on(const struct devices *d, uint64_t from, int parent) {
        return (unsigned)__builtin_popcountll(take(d, from, parent, DEVICES_MAX));
}

/*
 * need more devices of cand added to must: on must's parent first (when must is on one), then on the
 * parent with the fewest candidates that still holds all that is needed (binpack: the big free blocks stay
 * whole), else on parents from the most candidates down.
 */
static uint64_t pick(const struct devices *d, uint64_t cand, uint64_t must, unsigned need) {
        uint64_t got = must;
        cand &= ~must;
        int mp = -2;
        for (unsigned i = 0; i < devices_count(d); i++)
                if (must & (UINT64_C(1) << i))
                        mp = mp == -2 || mp == devices_info(d, i)->parent ? devices_info(d, i)->parent : -1;
        if (mp >= 0) {
                uint64_t t = take(d, cand, mp, need);
                got |= t;
                cand &= ~t;
                need -= (unsigned)__builtin_popcountll(t);
        }
        while (need > 0 && cand) {
                int best = -1;
                unsigned best_n = 0;
                for (unsigned g = 0; g < devices_count(d); g++) {
                        if (devices_info(d, g)->kind != DEVICE_GPU)
                                continue;
                        unsigned c = count_on(d, cand, (int)g);
                        bool fits = c >= need, best_fits = best_n >= need;
                        if (c > 0 &&
                            (best < 0 || (fits && (!best_fits || c < best_n)) || (!fits && !best_fits && c > best_n))) {
                                best = (int)g;
                                best_n = c;
                        }
                }
                if (best < 0)
                        break;
                uint64_t t = take(d, cand, best, need);
                got |= t;
                cand &= ~t;
                need -= (unsigned)__builtin_popcountll(t);
        }
        return got;
}

/* lint: long — one container's preferred MIG devices: every bound of the request checked in turn, the candidates
 * (healthy, this resource's, not held elsewhere; those our records show held avoided while enough others are
 * free), the pick, the IDs back. */
static enum rpc_code prefer_one(void *ctx, const struct assign_ctx *ax,
                                const V1beta1__ContainerPreferredAllocationRequest *cr, unsigned k, struct arena *a,
                                V1beta1__ContainerPreferredAllocationResponse *out, struct gs_error *st) {
        const struct plugin_service *svc = ctx;
        struct plugin *p = svc->p;
        const struct devices *d = plugin_devices(p);
        char what[48];
        uint64_t avail = 0, must = 0;
        (void)ax;
        snprintf(what, sizeof what, "container request %u", k);
        if (cr->allocation_size <= 0 || (unsigned)cr->allocation_size > devices_count(d))
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: allocation_size %" PRId32 " is not in 1..%u", what,
                                 cr->allocation_size, devices_count(d));
        enum rpc_code c = ids_to_set(svc, cr->available_deviceids, cr->n_available_deviceids, false, what, &avail, st);
        if (c == RPC_OK)
                c = ids_to_set(svc, cr->must_include_deviceids, cr->n_must_include_deviceids, true, what, &must, st);
        if (c != RPC_OK)
                return c;
        unsigned size = (unsigned)cr->allocation_size;
        if ((must & ~avail) != 0)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: must_include_deviceIDs not all in available_deviceIDs",
                                 what);
        if ((unsigned)__builtin_popcountll(must) > size)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: %d must-include devices but allocation_size %u", what,
                                 __builtin_popcountll(must), size);
        uint64_t cand = 0, held = 0;
        const char *resource = plugin_mig_resource(p, svc->mig);
        struct plugin_usage u;
        plugin_usage(p, &u);
        for (unsigned i = 0; i < devices_count(d); i++) {
                uint64_t bit = UINT64_C(1) << i;
                uint64_t mine = devices_mask_up(d, i);
                if (!(avail & bit) || !devices_healthy(d, i) || (plugin_held_elsewhere(p) & mine) || (u.frac & bit))
                        continue;
                cand |= bit;
                const struct state_alloc *h = state_find(plugin_record(p), resource, devices_info(d, i)->id);
                if (h && h->pod_name[0] && !(must & bit))
                        held |= bit;
        }
        unsigned need = size - (unsigned)__builtin_popcountll(must);
        if ((unsigned)__builtin_popcountll(cand & ~held & ~must) >= need)
                cand &= ~held; /* prefer MIG devices nobody holds; kubelet's view otherwise */
        if ((unsigned)__builtin_popcountll(cand & ~must) < need)
                return rpc_error(st, RPC_RESOURCE_EXHAUSTED, "%s: %u healthy MIG devices of %s available, %u asked",
                                 what, (unsigned)__builtin_popcountll((cand | must)), resource, size);
        uint64_t got = pick(d, cand, must, need);
        out->deviceids = arena_alloc(a, sizeof(char *) * (size + 1));
        if (!out->deviceids)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        for (unsigned i = 0; i < devices_count(d); i++)
                if (got & (UINT64_C(1) << i))
                        out->deviceids[out->n_deviceids++] = arena_printf(a, "%s", devices_info(d, i)->id);
        return RPC_OK;
}

enum rpc_code migdev_get_preferred(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                                   struct gs_error *st) {
        struct plugin_service *svc = userdata;
        plugin_kubelet_called(svc->p);
        V1beta1__PreferredAllocationRequest *in = v1beta1__preferred_allocation_request__unpack(NULL, req_len, req);
        if (!in)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "cannot decode PreferredAllocationRequest");
        struct assign_ctx ax = { 0 }; /* the extender assigns no MIG devices: node-local */
        enum rpc_code c = plugin_preferred_each(svc->p, in, &ax, prefer_one, svc, ret, ret_len, st);
        v1beta1__preferred_allocation_request__free_unpacked(in, NULL);
        return c;
}

/* ---- Allocate ---- */

static enum rpc_code allocate_all(const struct plugin_service *svc, const V1beta1__AllocateRequest *in, struct arena *a,
                                  V1beta1__AllocateResponse *resp, uint64_t *ret_all, struct gs_error *st) {
        void **slots = NULL;
        uint64_t all = 0;
        enum rpc_code c = plugin_responses_new(in->n_container_requests, "AllocateRequest", a, &slots, st);
        resp->container_responses = (void *)slots;
        for (size_t k = 0; c == RPC_OK && k < in->n_container_requests; k++) {
                const V1beta1__ContainerAllocateRequest *cr = in->container_requests[k];
                V1beta1__ContainerAllocateResponse *o = arena_alloc(a, sizeof *o);
                char what[48];
                uint64_t set = 0;
                if (!o)
                        return rpc_error(st, RPC_INTERNAL, "out of memory");
                v1beta1__container_allocate_response__init(o);
                snprintf(what, sizeof what, "container request %zu", k);
                if (cr->n_devices_ids == 0)
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: no device IDs", what);
                c = ids_to_set(svc, cr->devices_ids, cr->n_devices_ids, true, what, &set, st);
                if (c == RPC_OK && (set & all))
                        c = rpc_error(st, RPC_INVALID_ARGUMENT, "%s: a device is also requested by another container",
                                      what);
                if (c == RPC_OK)
                        c = plugin_fill_devices(svc->p, a, set, 0, o, st);
                if (o->n_envs == 0)
                        o->envs = NULL;
                all |= set;
                resp->container_responses[resp->n_container_responses++] = o;
        }
        *ret_all = all;
        return c;
}

enum rpc_code migdev_allocate(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                              struct gs_error *st) {
        struct plugin_service *svc = userdata;
        struct plugin *p = svc->p;
        struct devices *d = plugin_devices(p);
        struct arena a = { 0 };
        uint64_t all = 0;
        plugin_kubelet_called(p);
        V1beta1__AllocateRequest *in = v1beta1__allocate_request__unpack(NULL, req_len, req);
        if (!in)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "cannot decode AllocateRequest");
        V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
        devices_lock(d);
        enum rpc_code c = allocate_all(svc, in, &a, &resp, &all, st);
        if (c == RPC_OK)
                plugin_record_whole(p, plugin_mig_resource(p, svc->mig), all);
        plugin_count(p, PLUGIN_CALL_ALLOCATE, c == RPC_OK);
        devices_unlock(d);
        if (c == RPC_OK && rpc_pack(&resp.base, ret, ret_len) < 0)
                c = rpc_error(st, RPC_INTERNAL, "out of memory");
        arena_free(&a);
        v1beta1__allocate_request__free_unpacked(in, NULL);
        return c;
}

int migdev_serve(struct plugin *p, unsigned k, struct rpc_server *s) {
        struct plugin_service *svc = plugin_mig_service(p, k);
        int r;
        if (!svc)
                return -EINVAL;
        if ((r = rpc_server_add_unary(s, "/v1beta1.DevicePlugin/GetDevicePluginOptions", plugin_get_options, svc)) <
                    0 ||
            (r = rpc_server_add_stream(s, "/v1beta1.DevicePlugin/ListAndWatch", plugin_list_and_watch, svc)) < 0 ||
            (r = rpc_server_add_unary(s, "/v1beta1.DevicePlugin/PreStartContainer", plugin_pre_start, svc)) < 0 ||
            (r = rpc_server_add_unary(s, "/v1beta1.DevicePlugin/GetPreferredAllocation", migdev_get_preferred, svc)) <
                    0 ||
            (r = rpc_server_add_unary(s, "/v1beta1.DevicePlugin/Allocate", migdev_allocate, svc)) < 0)
                return r;
        return 0;
}
