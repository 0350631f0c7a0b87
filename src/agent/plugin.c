/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plugin — what every resource's DevicePlugin shares (see plugin.h): the options, the allocation
 * record, the counters, the handlers alike for every resource, the device part of an Allocate
 * answer and the GetPreferredAllocation frame (plugin-internal.h).
 *
 * Responses are built in an arena (every small protobuf-c struct and string comes from it and is
 * freed in one go after packing). Must never: let a request's IDs, sizes or counts index anything
 * unchecked, or leave the lock held on an error path.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "agent/plugin-internal.h"
#include "agent/plugin.h"
#include "agent/share.h"
#include "agent/timeslice.h"
#include "deviceplugin.pb-c.h"
#include "util/util.h"

struct plugin {
        struct devices *dev;         /* borrowed; its lock guards everything below but `stopping` */
        struct plugin_options opt;   /* a reload replaces all but the fixed fields (plugin_set_options) */
        struct gpuslice_state state; /* who holds which device ID (Allocate + PodResources) */
        struct plugin_service svc[_PLUGIN_KIND_MAX];
        struct assign *assign; /* the scheduler's assignments, set before serving; NULL: node-local only */
        struct {
                void (*fn)(void *userdata);
                void *userdata;
        } whole_hook;
        struct plugin_counters count;
        /* Devices another driver on this node holds (the DRA driver's prepared claims; table indices):
         * counted as held whole and in fractions, so no kind hands them out (plugin_usage). */
        uint64_t held_elsewhere;
        /* MIG resources (plugin_add_mig), fixed once serving */
        struct {
                char resource[320];
                char profile[MIG_PROFILE_NAME_MAX]; /* "" every MIG device (single) */
                bool nothing;                       /* lists no device (a node that does not fit) */
                struct plugin_service svc;
        } mig[PLUGIN_MIG_MAX];
        unsigned n_mig;
        /* the replica sets (plugin_set_replicas: time-slicing, MPS), fixed once serving; their GPUs disjoint */
        struct {
                char resource[320];
                unsigned n;
                bool fail_gt_one;
                uint64_t gpus;
                char mps_pipe[PATH_MAX]; /* MPS: the daemon's pipe dir on the host; "" time-slicing */
                char mps_shm[PATH_MAX];  /* MPS: the daemon's /dev/shm on the host */
                struct plugin_service svc;
        } rep[PLUGIN_REPLICA_SETS];
        unsigned n_rep;
        atomic_bool stopping;
};

/* ---- a small arena for building responses ---- */

struct arena_block {
        struct arena_block *next;
        size_t used, size;
        max_align_t data[];
};

void *arena_alloc(struct arena *a, size_t n) {
        n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
        if (!a->head || a->head->size - a->head->used < n) {
                size_t size = MAX(n, (size_t)16384);
                struct arena_block *b = malloc(sizeof *b + size);
                if (!b) {
                        a->failed = true;
                        return NULL;
                }
                b->next = a->head;
                b->used = 0;
                b->size = size;
                a->head = b;
        }
        void *p = (char *)a->head->data + a->head->used;
        a->head->used += n;
        memset(p, 0, n);
        return p;
}

char *arena_printf(struct arena *a, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n < 0)
                return NULL;
        char *s = arena_alloc(a, (size_t)n + 1);
        if (!s)
                return NULL;
        va_start(ap, fmt);
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        va_end(ap);
        return s;
}

void arena_free(struct arena *a) {
        while (a->head) {
                struct arena_block *b = a->head;
                a->head = b->next;
                free(b);
        }
}

/* ---- the core ---- */

int plugin_new(struct devices *d, const struct plugin_options *opt, struct plugin **ret) {
        struct plugin *p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        p->dev = d;
        p->opt = *opt;
        state_init(&p->state);
        for (unsigned k = 0; k < _PLUGIN_KIND_MAX; k++)
                p->svc[k] = (struct plugin_service){ .p = p, .kind = (enum plugin_kind)k };
        for (unsigned k = 0; k < PLUGIN_REPLICA_SETS; k++)
                p->rep[k].svc = (struct plugin_service){ .p = p, .kind = PLUGIN_REPLICA, .set = k };
        *ret = p;
        return 0;
}

struct plugin *plugin_free(struct plugin *p) {
        if (!p)
                return NULL;
        state_done(&p->state);
        free(p);
        return NULL;
}

struct devices *plugin_devices(const struct plugin *p) {
        return p->dev;
}

struct plugin_service *plugin_service(struct plugin *p, enum plugin_kind kind) {
        if (kind == PLUGIN_REPLICA)
                return &p->rep[0].svc;
        return &p->svc[kind < _PLUGIN_KIND_MAX ? kind : PLUGIN_WHOLE];
}

const char *plugin_resource(const struct plugin *p, enum plugin_kind kind) {
        switch (kind) {
                case PLUGIN_WHOLE: return p->opt.resource;
                case PLUGIN_CORE: return p->opt.core_resource;
                case PLUGIN_MEMORY: return p->opt.memory_resource;
                /* served on its own only when renamed; else the whole-GPU resource lists the replicas */
                case PLUGIN_REPLICA: return plugin_replica_served(p, 0);
                default: return "";
        }
}

int plugin_set_replicas(struct plugin *p, const char *resource, unsigned n, bool fail_gt_one, uint64_t gpus) {
        if (!resource || !resource[0] || strlen(resource) >= sizeof p->rep[0].resource || n == 0 ||
            n > TIMESLICE_REPLICAS_MAX)
                return -EINVAL;
        if (p->n_rep >= PLUGIN_REPLICA_SETS)
                return -ENOSPC;
        for (unsigned i = 0; i < devices_count(p->dev); i++)
                if ((gpus & (UINT64_C(1) << i)) &&
                    (devices_info(p->dev, i)->kind != DEVICE_GPU || devices_info(p->dev, i)->mig_mode))
                        return -EINVAL;
        for (unsigned k = 0; k < p->n_rep; k++) /* one GPU, one mode; one name, one set */
                if ((p->rep[k].gpus & gpus) || streq(p->rep[k].resource, resource))
                        return -EEXIST;
        unsigned k = p->n_rep++;
        strscpy(p->rep[k].resource, resource, sizeof p->rep[k].resource);
        p->rep[k].n = n;
        p->rep[k].fail_gt_one = fail_gt_one;
        p->rep[k].gpus = gpus;
        return (int)k;
}

int plugin_set_replica_mps(struct plugin *p, unsigned set, const char *pipe_dir, const char *shm_dir) {
        if (set >= p->n_rep)
                return -EINVAL;
        if (strlen(pipe_dir) >= sizeof p->rep[set].mps_pipe || strlen(shm_dir) >= sizeof p->rep[set].mps_shm)
                return -ENAMETOOLONG;
        strscpy(p->rep[set].mps_pipe, pipe_dir, sizeof p->rep[set].mps_pipe);
        strscpy(p->rep[set].mps_shm, shm_dir, sizeof p->rep[set].mps_shm);
        return 0;
}

unsigned plugin_replica_sets(const struct plugin *p) {
        return p->n_rep;
}

int plugin_replica_set_of(const struct plugin *p, unsigned gpu) {
        for (unsigned k = 0; gpu < 64 && k < p->n_rep; k++)
                if ((p->rep[k].gpus >> gpu) & 1)
                        return (int)k;
        return -1;
}

int plugin_replica_find(const struct plugin *p, const char *resource) {
        for (unsigned k = 0; resource && k < p->n_rep; k++)
                if (streq(p->rep[k].resource, resource))
                        return (int)k;
        return -1;
}

struct plugin_service *plugin_replica_service(struct plugin *p, unsigned set) {
        return set < PLUGIN_REPLICA_SETS ? &p->rep[set].svc : NULL;
}

uint64_t plugin_replica_gpus(const struct plugin *p, unsigned set) {
        return set < p->n_rep ? p->rep[set].gpus : 0;
}

unsigned plugin_replica_count(const struct plugin *p, unsigned set) {
        return set < p->n_rep ? p->rep[set].n : 0;
}

bool plugin_replica_fail_gt_one(const struct plugin *p, unsigned set) {
        return set < p->n_rep && p->rep[set].fail_gt_one;
}

const char *plugin_replica_resource(const struct plugin *p, unsigned set) {
        return set < p->n_rep ? p->rep[set].resource : "";
}

const char *plugin_replica_served(const struct plugin *p, unsigned set) {
        return set < p->n_rep && !streq(p->rep[set].resource, p->opt.resource) ? p->rep[set].resource : "";
}

const char *plugin_replica_mps(const struct plugin *p, unsigned set) {
        return set < p->n_rep ? p->rep[set].mps_pipe : "";
}

const char *plugin_replica_mps_shm(const struct plugin *p, unsigned set) {
        return set < p->n_rep ? p->rep[set].mps_shm : "";
}

uint64_t plugin_replicated(const struct plugin *p) {
        uint64_t m = 0;
        for (unsigned k = 0; k < p->n_rep; k++)
                m |= p->rep[k].gpus;
        return m;
}

unsigned plugin_replicas_of(const struct plugin *p, unsigned gpu) {
        int k = plugin_replica_set_of(p, gpu);
        return k < 0 ? 0 : p->rep[k].n;
}

int plugin_add_mig(struct plugin *p, const char *resource, const char *profile, bool nothing) {
        if (!resource || !resource[0] || strlen(resource) >= sizeof p->mig[0].resource)
                return -EINVAL;
        if (p->n_mig >= PLUGIN_MIG_MAX)
                return -ENOSPC;
        unsigned k = p->n_mig++;
        strscpy(p->mig[k].resource, resource, sizeof p->mig[k].resource);
        strscpy(p->mig[k].profile, profile ? profile : "", sizeof p->mig[k].profile);
        p->mig[k].nothing = nothing;
        p->mig[k].svc = (struct plugin_service){ .p = p, .kind = PLUGIN_MIG, .mig = k };
        return (int)k;
}

unsigned plugin_mig_count(const struct plugin *p) {
        return p->n_mig;
}

const char *plugin_mig_resource(const struct plugin *p, unsigned k) {
        return k < p->n_mig ? p->mig[k].resource : "";
}

struct plugin_service *plugin_mig_service(struct plugin *p, unsigned k) {
        return k < p->n_mig ? &p->mig[k].svc : NULL;
}

/* The MIG resource of that name, or -1. */
static int mig_resource_index(const struct plugin *p, const char *resource) {
        for (unsigned k = 0; k < p->n_mig; k++)
                if (streq(p->mig[k].resource, resource))
                        return (int)k;
        return -1;
}

bool plugin_serves(const struct plugin *p, const struct plugin_service *svc, unsigned i) {
        const struct device_info *d = devices_info(p->dev, i);
        int set = plugin_replica_set_of(p, i); /* a time-sliced (MPS) GPU: its replicas only (timeslice.h) */
        bool rep = set >= 0;
        if (svc->kind == PLUGIN_REPLICA)
                return rep && (unsigned)set == svc->set;
        if (svc->kind == PLUGIN_WHOLE) /* replicas that keep the whole-GPU name are its IDs */
                return d->kind == DEVICE_GPU && !d->mig_mode && !(rep && plugin_replica_served(p, (unsigned)set)[0]);
        if (svc->kind != PLUGIN_MIG) /* fractions: a GPU not in MIG mode, or a MIG device (docs/mig.md) */
                return (d->kind == DEVICE_MIG || !d->mig_mode) && !rep;
        if (svc->mig >= p->n_mig || d->kind != DEVICE_MIG || p->mig[svc->mig].nothing)
                return false;
        return !p->mig[svc->mig].profile[0] || streq(p->mig[svc->mig].profile, d->profile);
}

const char *plugin_device_resource(const struct plugin *p, unsigned i) {
        if (devices_info(p->dev, i)->kind == DEVICE_GPU && plugin_replica_set_of(p, i) >= 0)
                return p->rep[plugin_replica_set_of(p, i)].resource;
        if (devices_info(p->dev, i)->kind == DEVICE_GPU)
                return devices_info(p->dev, i)->mig_mode ? "" : p->opt.resource;
        for (unsigned k = 0; k < p->n_mig; k++)
                if (plugin_serves(p, &p->mig[k].svc, i))
                        return p->mig[k].resource;
        return "";
}

const struct plugin_options *plugin_options(const struct plugin *p) {
        return &p->opt;
}

void plugin_set_options(struct plugin *p, const struct plugin_options *o) {
        struct plugin_options n = *o;
        devices_lock(p->dev);
        strscpy(n.resource, p->opt.resource, sizeof n.resource);
        strscpy(n.core_resource, p->opt.core_resource, sizeof n.core_resource);
        strscpy(n.memory_resource, p->opt.memory_resource, sizeof n.memory_resource);
        n.memory_unit = p->opt.memory_unit;
        strscpy(n.limits_root, p->opt.limits_root, sizeof n.limits_root);
        strscpy(n.journal_dir, p->opt.journal_dir, sizeof n.journal_dir);
        p->opt = n;
        devices_unlock(p->dev);
}

struct gpuslice_state *plugin_record(struct plugin *p) {
        return &p->state;
}

/* Is `resource` one of our fractional resources, and which? */
static bool fractional(const struct plugin *p, const char *resource, enum plugin_kind *ret) {
        if (p->opt.core_resource[0] && streq(resource, p->opt.core_resource))
                *ret = PLUGIN_CORE;
        else if (p->opt.memory_resource[0] && streq(resource, p->opt.memory_resource))
                *ret = PLUGIN_MEMORY;
        else
                return false;
        return true;
}

void plugin_usage(const struct plugin *p, struct plugin_usage *ret) {
        struct plugin_usage u = { 0 };
        for (size_t k = 0; k < p->state.n_allocs; k++) {
                const struct state_alloc *a = &p->state.allocs[k];
                unsigned rg, rj;
                int rk = plugin_replica_find(p, a->resource);
                if (rk >= 0 && timeslice_parse_id(p->dev, a->device_id, p->rep[rk].n, &rg, &rj) == 0 &&
                    plugin_replica_set_of(p, rg) == rk) {
                        u.replica |= UINT64_C(1) << rg;
                        u.rep[rg]++;
                        continue;
                }
                if (streq(a->resource, p->opt.resource) || mig_resource_index(p, a->resource) >= 0) {
                        int i = devices_find(p->dev, a->device_id);
                        if (i >= 0) {
                                u.whole |= UINT64_C(1) << i;
                                if (devices_info(p->dev, (unsigned)i)->kind == DEVICE_GPU)
                                        u.plain |= UINT64_C(1) << i;
                        }
                        continue;
                }
                enum plugin_kind want, kind;
                unsigned g, n;
                if (!fractional(p, a->resource, &want) || share_parse_id(p->dev, a->device_id, &kind, &g, &n) < 0 ||
                    kind != want)
                        continue;
                if (kind == PLUGIN_CORE)
                        u.core[g]++;
                else
                        u.mem[g]++;
                u.frac |= UINT64_C(1) << g;
        }
        u.whole |= plugin_replicated(p) | u.replica; /* time-sliced: no fraction, no core-resource whole GPU */
        u.whole |= p->held_elsewhere;                /* another driver's: neither kind may hand them out */
        u.frac |= p->held_elsewhere;
        *ret = u;
}

uint64_t plugin_own_use(const struct plugin *p) {
        struct plugin_usage u;
        plugin_usage(p, &u);
        return (u.whole | u.frac) & ~p->held_elsewhere;
}

uint64_t plugin_held_elsewhere(const struct plugin *p) {
        return p->held_elsewhere;
}

bool plugin_set_held_elsewhere(struct plugin *p, uint64_t devices) {
        bool changed = devices != p->held_elsewhere;
        p->held_elsewhere = devices;
        return changed;
}

size_t plugin_record_fixup(struct plugin *p) {
        size_t fixed = 0;
        for (size_t k = 0; k < p->state.n_allocs; k++) {
                struct state_alloc *a = &p->state.allocs[k];
                enum plugin_kind want, kind;
                unsigned g, n;
                if (!fractional(p, a->resource, &want) || a->gpu_index >= 0 ||
                    share_parse_id(p->dev, a->device_id, &kind, &g, &n) < 0)
                        continue;
                a->gpu_index = devices_info(p->dev, g)->index;
                if (kind == PLUGIN_CORE)
                        a->core_percent = 1;
                else
                        a->memory_bytes = p->opt.memory_unit;
                fixed++;
        }
        if (fixed)
                p->state.generation++;
        return fixed;
}

void plugin_count(struct plugin *p, enum plugin_call call, bool ok) {
        if (call == PLUGIN_CALL_ALLOCATE)
                p->count.allocate++;
        else
                p->count.preferred++;
        if (!ok)
                p->count.errors++;
}

struct plugin_counters plugin_counters(const struct plugin *p) {
        return p->count;
}

void plugin_kubelet_called(struct plugin *p) {
        devices_lock(p->dev);
        (void)state_mark_settled(&p->state);
        devices_unlock(p->dev);
}

struct assign *plugin_set_assign(struct plugin *p, struct assign *a) {
        struct assign *old = p->assign;
        p->assign = a;
        return old;
}

void plugin_on_whole_allocate(struct plugin *p, void (*fn)(void *userdata), void *userdata) {
        p->whole_hook.fn = fn;
        p->whole_hook.userdata = userdata;
}

void plugin_whole_allocated(struct plugin *p) {
        if (p->whole_hook.fn)
                p->whole_hook.fn(p->whole_hook.userdata);
}

void plugin_stop(struct plugin *p) {
        atomic_store(&p->stopping, true);
}

/* ---- GetDevicePluginOptions, PreStartContainer ---- */

enum rpc_code plugin_get_options(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                                 struct gs_error *st) {
        (void)userdata;
        V1beta1__Empty *in = v1beta1__empty__unpack(NULL, req_len, req);
        if (!in)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "cannot decode Empty");
        v1beta1__empty__free_unpacked(in, NULL);
        V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
        o.pre_start_required = 0;
        o.get_preferred_allocation_available = 1;
        if (rpc_pack(&o.base, ret, ret_len) < 0)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        return RPC_OK;
}

enum rpc_code plugin_pre_start(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                               struct gs_error *st) {
        (void)userdata;
        V1beta1__PreStartContainerRequest *in = v1beta1__pre_start_container_request__unpack(NULL, req_len, req);
        if (!in)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "cannot decode PreStartContainerRequest");
        v1beta1__pre_start_container_request__free_unpacked(in, NULL);
        V1beta1__PreStartContainerResponse o = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
        if (rpc_pack(&o.base, ret, ret_len) < 0)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        return RPC_OK;
}

/* ---- ListAndWatch ---- */

static V1beta1__Device *device_msg(struct arena *a, const char *id, bool healthy, int numa) {
        V1beta1__Device *dev = arena_alloc(a, sizeof *dev);
        if (!dev)
                return NULL;
        v1beta1__device__init(dev);
        dev->id = arena_printf(a, "%s", id);
        dev->health = healthy ? "Healthy" : "Unhealthy";
        if (numa >= 0) {
                V1beta1__TopologyInfo *ti = arena_alloc(a, sizeof *ti);
                V1beta1__NUMANode *nn = arena_alloc(a, sizeof *nn);
                V1beta1__NUMANode **nodes = arena_alloc(a, sizeof *nodes);
                if (!ti || !nn || !nodes)
                        return NULL;
                v1beta1__topology_info__init(ti);
                v1beta1__numanode__init(nn);
                nn->id = numa;
                nodes[0] = nn;
                ti->nodes = nodes;
                ti->n_nodes = 1;
                dev->topology = ti;
        }
        return dev->id ? dev : NULL;
}

int plugin_pack_devices_kind(struct plugin *p, enum plugin_kind kind, uint8_t **ret, size_t *ret_len,
                             uint64_t *ret_generation) {
        return plugin_pack_devices_svc(p, plugin_service(p, kind), ret, ret_len, ret_generation);
}

/* lint: long — one ListAndWatch list of any service: whole GPUs, MIG devices, or fractional IDs, each listed with
 * the health the other kinds' use gives it, all in one arena under one lock. */
int plugin_pack_devices_svc(struct plugin *p, const struct plugin_service *svc, uint8_t **ret, size_t *ret_len,
                            uint64_t *ret_generation) {
        enum plugin_kind kind = svc->kind;
        struct arena a = { 0 };
        V1beta1__ListAndWatchResponse resp = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
        struct plugin_usage u;
        int r = -ENOMEM;
        unsigned n = devices_count(p->dev);

        devices_lock(p->dev);
        uint64_t gen = devices_generation(p->dev);
        plugin_usage(p, &u);
        size_t cap = 0;
        for (unsigned i = 0; i < n; i++)
                cap += kind == PLUGIN_WHOLE || kind == PLUGIN_MIG || kind == PLUGIN_REPLICA
                               ? 1 + plugin_replicas_of(p, i)
                       : kind == PLUGIN_CORE ? SHARE_CORE_IDS
                                             : devices_info(p->dev, i)->n_mem;
        resp.devices = arena_alloc(&a, sizeof(void *) * (cap + 1));
        for (unsigned i = 0; resp.devices && i < n; i++) {
                const struct device_info *d = devices_info(p->dev, i);
                bool healthy = devices_healthy(p->dev, i);
                uint64_t bit = UINT64_C(1) << i;
                if (!plugin_serves(p, svc, i))
                        continue;         /* another resource's (a MIG device, a GPU in MIG mode) */
                if (kind == PLUGIN_MIG) { /* another driver's claim (of it or its GPU): Unhealthy, never handed out */
                        uint64_t mine = devices_mask_up(p->dev, i);
                        bool ok = healthy && !(p->held_elsewhere & mine) && !(u.frac & bit); /* not shared */
                        V1beta1__Device *dev = device_msg(&a, d->id, ok, d->numa);
                        if (!dev)
                                break;
                        resp.devices[resp.n_devices++] = dev;
                        continue;
                }
                /* Whole and fractional use of a GPU exclude each other: while one kind holds a
                 * GPU, the other kind's IDs of it are listed Unhealthy (docs/sharing.md). */
                if ((kind == PLUGIN_WHOLE || kind == PLUGIN_REPLICA) && ((plugin_replicated(p) >> i) & 1)) {
                        /* replicas: Unhealthy while the GPU is held another way (a record from before a config
                         * change, another driver's claim) */
                        bool ok = healthy && !((u.frac | u.plain | p->held_elsewhere) & bit);
                        unsigned j = 0, nrep = plugin_replicas_of(p, i);
                        for (; j < nrep; j++) {
                                char id[TIMESLICE_ID_MAX];
                                timeslice_format_id(d->id, j, id, sizeof id);
                                V1beta1__Device *dev = device_msg(&a, id, ok, d->numa);
                                if (!dev)
                                        break;
                                resp.devices[resp.n_devices++] = dev;
                        }
                        if (j < nrep)
                                break;
                        continue;
                }
                if (kind == PLUGIN_WHOLE) {
                        V1beta1__Device *dev = device_msg(&a, d->id, healthy && !(u.frac & bit), d->numa);
                        if (!dev)
                                break;
                        resp.devices[resp.n_devices++] = dev;
                        continue;
                }
                bool ok = healthy && !(u.whole & devices_mask_up(p->dev, i)); /* a MIG device: its GPU's claim too */
                unsigned k = kind == PLUGIN_CORE ? SHARE_CORE_IDS : d->n_mem;
                for (unsigned j = 0; j < k; j++) {
                        char id[SHARE_ID_MAX];
                        share_format_id(d->id, kind, j, id, sizeof id);
                        V1beta1__Device *dev = device_msg(&a, id, ok, d->numa);
                        if (!dev)
                                break;
                        resp.devices[resp.n_devices++] = dev;
                }
        }
        devices_unlock(p->dev);
        if (!a.failed && resp.devices) {
                r = rpc_pack(&resp.base, ret, ret_len);
                if (r >= 0 && ret_generation)
                        *ret_generation = gen;
        }
        arena_free(&a);
        return r;
}

int plugin_pack_devices(struct plugin *p, uint8_t **ret, size_t *ret_len, uint64_t *ret_generation) {
        return plugin_pack_devices_kind(p, PLUGIN_WHOLE, ret, ret_len, ret_generation);
}

enum rpc_code plugin_list_and_watch(void *userdata, const uint8_t *req, size_t req_len, struct rpc_stream *s,
                                    struct gs_error *st) {
        struct plugin_service *svc = userdata;
        struct plugin *p = svc->p;
        V1beta1__Empty *in = v1beta1__empty__unpack(NULL, req_len, req);
        if (!in)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "cannot decode Empty");
        v1beta1__empty__free_unpacked(in, NULL);

        /* A burst of changes (an Allocate per pod) must not cost a full list per change: a token
         * bucket lets PLUGIN_WATCH_BURST lists go out at once, then one per PLUGIN_WATCH_MIN_MS,
         * each carrying every change made meanwhile. A lone change is sent at once. */
        const uint64_t cap = PLUGIN_WATCH_BURST * PLUGIN_WATCH_MIN_MS;
        uint64_t sent = 0, credit = cap, last_ms = monotonic_ms();
        for (;;) {
                if (atomic_load(&p->stopping))
                        return rpc_error(st, RPC_UNAVAILABLE, "plugin is stopping");
                if (devices_generation(p->dev) != sent) {
                        uint64_t now = monotonic_ms();
                        credit = MIN(cap, credit + (now - last_ms));
                        last_ms = now;
                        if (credit < PLUGIN_WATCH_MIN_MS) {
                                if (rpc_stream_wait(s, (int)(PLUGIN_WATCH_MIN_MS - credit)) < 0)
                                        return rpc_error(st, RPC_CANCELLED, "stream closed");
                                continue;
                        }
                        credit -= PLUGIN_WATCH_MIN_MS;
                        uint8_t *buf = NULL;
                        size_t n = 0;
                        if (plugin_pack_devices_svc(p, svc, &buf, &n, &sent) < 0)
                                return rpc_error(st, RPC_INTERNAL, "out of memory");
                        int r = rpc_stream_send(s, buf, n);
                        free(buf);
                        if (r < 0)
                                return rpc_error(st, RPC_CANCELLED, "stream closed");
                }
                /* Woken by devices_changed (rpc_streams_wake), not by polling; the timeout is a
                 * safety net for a change made without it (see devices.h). */
                if (devices_wait_change(p->dev, s, sent, PLUGIN_WATCH_SAFETY_MS) < 0)
                        return rpc_error(st, RPC_CANCELLED, "stream closed");
        }
}

int plugin_serve_common(struct plugin *p, enum plugin_kind kind, struct rpc_server *s) {
        return plugin_serve_common_svc(plugin_service(p, kind), s);
}

int plugin_serve_common_svc(struct plugin_service *svc, struct rpc_server *s) {
        int r;
        if ((r = rpc_server_add_unary(s, "/v1beta1.DevicePlugin/GetDevicePluginOptions", plugin_get_options, svc)) <
                    0 ||
            (r = rpc_server_add_stream(s, "/v1beta1.DevicePlugin/ListAndWatch", plugin_list_and_watch, svc)) < 0 ||
            (r = rpc_server_add_unary(s, "/v1beta1.DevicePlugin/PreStartContainer", plugin_pre_start, svc)) < 0)
                return r;
        return 0;
}

/* ---- the frame of GetPreferredAllocation ---- */

void plugin_assign_preferred(struct plugin *p, enum plugin_kind kind, const V1beta1__PreferredAllocationRequest *in,
                             struct assign_ctx *ax) {
        const V1beta1__ContainerPreferredAllocationRequest *cr0 =
                in->n_container_requests == 1 ? in->container_requests[0] : NULL;
        assign_call_begin(ax, p->assign, kind, false,
                          cr0 && cr0->allocation_size > 0 ? (unsigned)cr0->allocation_size : 0, NULL, 0);
}

void plugin_assign_allocate(struct plugin *p, enum plugin_kind kind, const V1beta1__AllocateRequest *in,
                            struct assign_ctx *ax) {
        const V1beta1__ContainerAllocateRequest *cr0 = in->n_container_requests == 1 ? in->container_requests[0] : NULL;
        assign_call_begin(ax, p->assign, kind, true, cr0 ? (unsigned)cr0->n_devices_ids : 0,
                          cr0 ? cr0->devices_ids : NULL, cr0 ? cr0->n_devices_ids : 0);
}

enum rpc_code plugin_responses_new(size_t n, const char *what, struct arena *a, void ***ret, struct gs_error *st) {
        if (n == 0)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s has no container requests", what);
        if (n > 1024)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "too many container requests (%zu)", n);
        *ret = arena_alloc(a, sizeof(void *) * n);
        if (!*ret)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        return RPC_OK;
}

enum rpc_code plugin_preferred_each(struct plugin *p, V1beta1__PreferredAllocationRequest *in, struct assign_ctx *ax,
                                    plugin_prefer_fn prefer, void *ctx, uint8_t **ret, size_t *ret_len,
                                    struct gs_error *st) {
        struct arena a = { 0 };
        V1beta1__PreferredAllocationResponse resp = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
        /* the scheduler's assignment (assign.h): kubelet sends one container per call */
        V1beta1__ContainerPreferredAllocationRequest *cr0 =
                in->n_container_requests == 1 ? in->container_requests[0] : NULL;
        size_t n_avail = cr0 ? cr0->n_available_deviceids : 0;

        devices_lock(p->dev);
        void **slots = NULL;
        enum rpc_code c = plugin_responses_new(in->n_container_requests, "PreferredAllocationRequest", &a, &slots, st);
        if (c == RPC_OK && cr0)
                c = assign_call_narrow(ax, p->dev, cr0->available_deviceids, &cr0->n_available_deviceids,
                                       cr0->must_include_deviceids, cr0->n_must_include_deviceids,
                                       "container request 0", st);
        resp.container_responses = (void *)slots;
        for (size_t k = 0; c == RPC_OK && k < in->n_container_requests; k++) {
                V1beta1__ContainerPreferredAllocationResponse *o = arena_alloc(&a, sizeof *o);
                if (!o) {
                        c = rpc_error(st, RPC_INTERNAL, "out of memory");
                        break;
                }
                v1beta1__container_preferred_allocation_response__init(o);
                c = prefer(ctx, ax, in->container_requests[k], (unsigned)k, &a, o, st);
                resp.container_responses[resp.n_container_responses++] = o;
        }
        plugin_count(p, PLUGIN_CALL_PREFERRED, c == RPC_OK);
        devices_unlock(p->dev);

        if (c == RPC_OK && rpc_pack(&resp.base, ret, ret_len) < 0)
                c = rpc_error(st, RPC_INTERNAL, "out of memory");
        arena_free(&a);
        if (cr0)
                cr0->n_available_deviceids = n_avail; /* narrowed in place: every ID is freed */
        return c;
}

void plugin_record_handout(struct plugin *p, const char *resource, uint64_t set) {
        time_t now = time(NULL);
        for (unsigned i = 0; i < devices_count(p->dev); i++) {
                if (!(set & (UINT64_C(1) << i)))
                        continue;
                struct state_alloc e = { .gpu_index = devices_info(p->dev, i)->index, .alloc_time = (uint64_t)now };
                strscpy(e.resource, resource, sizeof e.resource);
                snprintf(e.device_id, sizeof e.device_id, "%s", devices_info(p->dev, i)->id);
                (void)state_remove(&p->state, resource, e.device_id);
                (void)state_add(&p->state, &e); /* cannot fail for a valid, known ID */
        }
}

void plugin_record_whole(struct plugin *p, const char *resource, uint64_t set) {
        plugin_record_handout(p, resource, set);
        if (p->opt.core_resource[0] || p->opt.memory_resource[0]) {
                devices_changed(p->dev);
                plugin_whole_allocated(p);
        }
}

/* ---- the device part of an Allocate answer ---- */

static const char *const control_nodes[] = { "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset" };

/* "<dev-root>/<dir>/<name>" without doubled slashes: where the agent sees a host file. */
static int root_path(const struct plugin *p, const char *dir, const char *name, char *buf, size_t len) {
        const char *root = p->opt.dev_root[0] ? p->opt.dev_root : "/";
        size_t rl = strlen(root);
        while (rl > 0 && root[rl - 1] == '/')
                rl--;
        int n = snprintf(buf, len, "%.*s/%s/%s", (int)rl, root, dir, name);
        return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* "<dev-root>/dev/<name>": where the agent looks for a device node. */
static int dev_root_path(const struct plugin *p, const char *name, char *buf, size_t len) {
        return root_path(p, "dev", name, buf, len);
}

static bool dev_exists(const struct plugin *p, const char *name) {
        char path[4200];
        struct stat stt;
        return dev_root_path(p, name, path, sizeof path) == 0 && stat(path, &stt) == 0;
}

/* The device spec's host path is always the host's /dev/<name>: the container runtime resolves it on
 * the host, where the dev root (the agent's view of the host's /dev, e.g. /host in the DaemonSet)
 * does not exist. */
static V1beta1__DeviceSpec *dev_spec(struct arena *a, const char *name) {
        V1beta1__DeviceSpec *d = arena_alloc(a, sizeof *d);
        if (!d)
                return NULL;
        v1beta1__device_spec__init(d);
        d->container_path = arena_printf(a, "/dev/%s", name);
        d->host_path = arena_printf(a, "/dev/%s", name);
        d->permissions = "rw";
        return d->container_path && d->host_path ? d : NULL;
}

/* The device ID of device i as the answer names it: its UUID, or its NVML index (a MIG device:
 * <GPU index>:<MIG index>, as NVIDIA's tools name it). */
static int answer_id(const struct plugin *p, unsigned i, const char *sep, char *buf, size_t len) {
        const struct device_info *d = devices_info(p->dev, i);
        if (p->opt.ids_by_index && d->kind == DEVICE_MIG)
                return snprintf(buf, len, "%s%d:%d", sep, d->index, d->mig_index);
        return p->opt.ids_by_index ? snprintf(buf, len, "%s%d", sep, d->index) : snprintf(buf, len, "%s%s", sep, d->id);
}

/* Add /dev/<name> to out->devices when it exists under the dev root (room was made for it). */
static enum rpc_code add_node(struct plugin *p, struct arena *a, const char *name,
                              V1beta1__ContainerAllocateResponse *out, struct gs_error *st) {
        if (!dev_exists(p, name))
                return RPC_OK;
        for (size_t j = 0; j < out->n_devices; j++)
                if (streq(out->devices[j]->container_path + 5, name))
                        return RPC_OK; /* two MIG devices of one GPU: its node once */
        if (!(out->devices[out->n_devices] = dev_spec(a, name)))
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        out->n_devices++;
        return RPC_OK;
}

/* The two capability nodes of each MIG device in set (/dev/nvidia-caps/nvidia-cap<M>), their minors
 * from the driver's mig-minors (<dev-root>/proc/driver/nvidia-caps/mig-minors). A MIG device whose
 * capabilities are missing is refused: a container could not use it. */
static enum rpc_code add_mig_caps(struct plugin *p, struct arena *a, uint64_t set,
                                  V1beta1__ContainerAllocateResponse *out, struct gs_error *st) {
        _cleanup_(freep) char *text = NULL;
        size_t len = 0;
        char path[4200];
        bool read = false;
        for (unsigned i = 0; i < devices_count(p->dev); i++) {
                const struct device_info *d = devices_info(p->dev, i);
                if (!(set & (UINT64_C(1) << i)) || d->kind != DEVICE_MIG)
                        continue;
                if (!read) {
                        int r = root_path(p, "proc/driver/nvidia-caps", "mig-minors", path, sizeof path);
                        if (r >= 0)
                                r = read_file(path, MIG_MINORS_MAX, &text, &len);
                        if (r < 0)
                                return rpc_error(st, RPC_FAILED_PRECONDITION, "MIG device %s: cannot read %s: %s",
                                                 d->id, path, strerror(-r));
                        read = true;
                }
                unsigned gi_minor, ci_minor;
                if (d->minor < 0 ||
                    mig_minors_lookup(text, len, (unsigned)d->minor, d->gi, d->ci, &gi_minor, &ci_minor) < 0)
                        return rpc_error(st, RPC_FAILED_PRECONDITION,
                                         "MIG device %s: no capability gpu%d/gi%u/ci%u in %s", d->id, d->minor, d->gi,
                                         d->ci, path);
                char name[2][48];
                snprintf(name[0], sizeof name[0], "nvidia-caps/nvidia-cap%u", gi_minor);
                snprintf(name[1], sizeof name[1], "nvidia-caps/nvidia-cap%u", ci_minor);
                for (unsigned k = 0; k < 2; k++) {
                        if (!dev_exists(p, name[k]))
                                return rpc_error(st, RPC_FAILED_PRECONDITION, "MIG device %s: /dev/%s is missing",
                                                 d->id, name[k]);
                        enum rpc_code c = add_node(p, a, name[k], out, st);
                        if (c != RPC_OK)
                                return c;
                }
        }
        return RPC_OK;
}

/* lint: long — one Allocate answer's devices, environment and CDI names from one set, with every arena allocation
 * checked; the pieces share the ID list built first. */
enum rpc_code plugin_fill_devices(struct plugin *p, struct arena *a, uint64_t set, unsigned env_room,
                                  V1beta1__ContainerAllocateResponse *out, struct gs_error *st) {
        unsigned count = devices_count(p->dev);
        /* The IDs in NVML index order, as a comma list, for env and CDI. */
        size_t cap = (size_t)count * 100 + 1;
        char *list = arena_alloc(a, cap);
        if (!list)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        size_t len = 0;
        unsigned n = 0;
        for (unsigned i = 0; i < count; i++) {
                if (!(set & (UINT64_C(1) << i)))
                        continue;
                int w = answer_id(p, i, n ? "," : "", list + len, cap - len);
                if (w < 0 || (size_t)w >= cap - len)
                        return rpc_error(st, RPC_INTERNAL, "device list too long");
                len += (size_t)w;
                n++;
        }

        out->envs = arena_alloc(a, sizeof(void *) * (1 + env_room));
        if (!out->envs)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        if (p->opt.list_envvar) {
                V1beta1__ContainerAllocateResponse__EnvsEntry *e = arena_alloc(a, sizeof *e);
                if (!e)
                        return rpc_error(st, RPC_INTERNAL, "out of memory");
                v1beta1__container_allocate_response__envs_entry__init(e);
                e->key = "NVIDIA_VISIBLE_DEVICES";
                e->value = list;
                out->envs[out->n_envs++] = e;

                /* a GPU's node each (a MIG device: its parent's), the control nodes, 2 caps per MIG device */
                out->devices = arena_alloc(a, sizeof(void *) * (3 * n + ELEMENTSOF(control_nodes)));
                if (!out->devices)
                        return rpc_error(st, RPC_INTERNAL, "out of memory");
                enum rpc_code c = RPC_OK;
                for (unsigned i = 0; c == RPC_OK && i < count; i++) {
                        char name[32];
                        int minor = devices_info(p->dev, i)->minor;
                        if (!(set & (UINT64_C(1) << i)) || minor < 0)
                                continue;
                        snprintf(name, sizeof name, "nvidia%d", minor);
                        c = add_node(p, a, name, out, st);
                }
                for (size_t j = 0; c == RPC_OK && j < ELEMENTSOF(control_nodes); j++)
                        c = add_node(p, a, control_nodes[j], out, st);
                if (c == RPC_OK)
                        c = add_mig_caps(p, a, set, out, st);
                if (c != RPC_OK)
                        return c;
        }
        if (p->opt.list_cdi) {
                out->cdi_devices = arena_alloc(a, sizeof(void *) * n);
                if (!out->cdi_devices)
                        return rpc_error(st, RPC_INTERNAL, "out of memory");
                for (unsigned i = 0; i < count; i++) {
                        if (!(set & (UINT64_C(1) << i)))
                                continue;
                        V1beta1__CDIDevice *d = arena_alloc(a, sizeof *d);
                        char id[128];
                        if (!d)
                                return rpc_error(st, RPC_INTERNAL, "out of memory");
                        v1beta1__cdidevice__init(d);
                        (void)answer_id(p, i, "", id, sizeof id);
                        d->name = arena_printf(a, "%s=%s", p->opt.cdi_kind, id);
                        if (!d->name)
                                return rpc_error(st, RPC_INTERNAL, "out of memory");
                        out->cdi_devices[out->n_cdi_devices++] = d;
                }
        }
        return RPC_OK;
}
