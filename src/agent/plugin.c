/* SPDX-License-Identifier: Apache-2.0 */
/*
 * plugin — the kubelet DevicePlugin service for whole GPUs (see plugin.h).
 *
 * Responses are built in an arena (every small protobuf-c struct and string comes from it and is
 * freed in one go after packing). Must never: let a request's IDs, sizes or counts index anything
 * unchecked, or leave the lock held on an error path.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <time.h>

#include "agent/assign.h"
#include "agent/plugin-internal.h"
#include "agent/plugin.h"
#include "agent/share.h"
#include "alloc/alloc.h"
#include "deviceplugin.pb-c.h"
#include "util/util.h"

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

/* ---- the table ---- */

void plugin_init(struct plugin *p, const struct plugin_options *opt, const struct topo *t) {
        memset(p, 0, sizeof *p);
        pthread_mutex_init(&p->lock, NULL);
        p->opt = *opt;
        p->topo = *t;
        for (unsigned i = 0; i < t->n_gpus && p->n < TOPO_MAX_GPUS; i++) {
                const struct topo_gpu *g = &t->gpu[i];
                if (!g->uuid[0])
                        continue; /* no ID to advertise */
                struct plugin_gpu *d = &p->gpu[p->n++];
                strscpy(d->id, g->uuid, sizeof d->id);
                d->index = g->index;
                d->minor = g->minor;
                d->numa = g->numa_node;
                d->healthy = g->state == TOPO_GPU_OK;
                d->memory_total = g->memory_total;
                if (opt->memory_unit > 0) {
                        uint64_t k = g->memory_total / opt->memory_unit;
                        d->n_mem = (unsigned)MIN(k, (uint64_t)SHARE_MEM_IDS_MAX);
                }
                if (!d->healthy)
                        strscpy(d->reason, g->state_text[0] ? g->state_text : "not readable", sizeof d->reason);
        }
        state_init(&p->state);
        for (unsigned k = 0; k < _PLUGIN_KIND_MAX; k++)
                p->svc[k] = (struct plugin_service){ .p = p, .kind = (enum plugin_kind)k };
        p->explicit_gpu = -1;
        p->change_fd = -1;
        atomic_store(&p->generation, 1);
        atomic_store(&p->notified, 1);
}

static uint64_t plugin_now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void plugin_notify(struct plugin *p) {
        uint64_t g = atomic_load(&p->generation);
        if (atomic_exchange(&p->notified, g) == g)
                return;
        rpc_streams_wake();
        int fd = atomic_load(&p->change_fd);
        if (fd >= 0) {
                uint64_t one = 1;
                (void)!write(fd, &one, sizeof one); /* EAGAIN: a wake-up is pending anyway */
        }
}

void plugin_changed(struct plugin *p) {
        atomic_fetch_add(&p->generation, 1);
        plugin_notify(p);
}

const char *plugin_resource(const struct plugin *p, enum plugin_kind kind) {
        switch (kind) {
                case PLUGIN_WHOLE: return p->opt.resource;
                case PLUGIN_CORE: return p->opt.core_resource;
                case PLUGIN_MEMORY: return p->opt.memory_resource;
                default: return "";
        }
}

void plugin_done(struct plugin *p) {
        share_book_free(p->book);
        p->book = NULL;
        state_done(&p->state);
        pthread_mutex_destroy(&p->lock);
}

int plugin_find(const struct plugin *p, const char *id) {
        for (unsigned i = 0; i < p->n; i++)
                if (streq(p->gpu[i].id, id))
                        return (int)i;
        return -1;
}

void plugin_set_unhealthy(struct plugin *p, unsigned i, const char *reason, uint64_t now_ms, bool fault_cleared) {
        pthread_mutex_lock(&p->lock);
        if (i < p->n) {
                struct plugin_gpu *d = &p->gpu[i];
                bool was = d->healthy;
                d->healthy = false;
                strscpy(d->reason, reason, sizeof d->reason);
                /* An Xid is an event: the GPU answers normally right after, so the quiet period
                 * starts now. A lost GPU starts counting only when it answers again. */
                d->ok_since_ms = fault_cleared ? MAX(now_ms, (uint64_t)1) : 0;
                if (was)
                        plugin_changed(p);
        }
        pthread_mutex_unlock(&p->lock);
}

void plugin_probe_ok(struct plugin *p, unsigned i, uint64_t now_ms, uint64_t quiet_ms) {
        pthread_mutex_lock(&p->lock);
        if (i < p->n && !p->gpu[i].healthy) {
                struct plugin_gpu *d = &p->gpu[i];
                if (d->ok_since_ms == 0)
                        d->ok_since_ms = MAX(now_ms, (uint64_t)1);
                /* a quiet period of 0 turns healthy on the first normal answer */
                if (now_ms >= d->ok_since_ms + quiet_ms) {
                        d->healthy = true;
                        d->reason[0] = 0;
                        d->ok_since_ms = 0;
                        plugin_changed(p);
                }
        }
        pthread_mutex_unlock(&p->lock);
}

/* ---- GetDevicePluginOptions ---- */

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
        struct arena a = { 0 };
        V1beta1__ListAndWatchResponse resp = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
        struct share_usage u;
        int r = -ENOMEM;

        pthread_mutex_lock(&p->lock);
        uint64_t gen = atomic_load(&p->generation);
        share_usage(p, &u);
        size_t cap = 0;
        for (unsigned i = 0; i < p->n; i++)
                cap += kind == PLUGIN_WHOLE ? 1 : kind == PLUGIN_CORE ? SHARE_CORE_IDS : p->gpu[i].n_mem;
        resp.devices = arena_alloc(&a, sizeof(void *) * (cap + 1));
        for (unsigned i = 0; resp.devices && i < p->n; i++) {
                const struct plugin_gpu *d = &p->gpu[i];
                uint64_t bit = UINT64_C(1) << i;
                /* Whole and fractional use of a GPU exclude each other: while one kind holds a
                 * GPU, the other kind's IDs of it are listed Unhealthy (docs/sharing.md). */
                if (kind == PLUGIN_WHOLE) {
                        V1beta1__Device *dev = device_msg(&a, d->id, d->healthy && !(u.frac & bit), d->numa);
                        if (!dev)
                                break;
                        resp.devices[resp.n_devices++] = dev;
                        continue;
                }
                bool ok = d->healthy && !(u.whole & bit);
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
        pthread_mutex_unlock(&p->lock);
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

static enum rpc_code watch(struct plugin *p, enum plugin_kind kind, const uint8_t *req, size_t req_len,
                           struct rpc_stream *s, struct gs_error *st) {
        V1beta1__Empty *in = v1beta1__empty__unpack(NULL, req_len, req);
        if (!in)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "cannot decode Empty");
        v1beta1__empty__free_unpacked(in, NULL);

        /* A burst of changes (an Allocate per pod) must not cost a full list per change: a token
         * bucket lets PLUGIN_WATCH_BURST lists go out at once, then one per PLUGIN_WATCH_MIN_MS,
         * each carrying every change made meanwhile. A lone change is sent at once. */
        const uint64_t cap = PLUGIN_WATCH_BURST * PLUGIN_WATCH_MIN_MS;
        uint64_t sent = 0, credit = cap, last_ms = plugin_now_ms();
        for (;;) {
                if (atomic_load(&p->stopping))
                        return rpc_error(st, RPC_UNAVAILABLE, "plugin is stopping");
                if (atomic_load(&p->generation) != sent) {
                        uint64_t now = plugin_now_ms();
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
                        if (plugin_pack_devices_kind(p, kind, &buf, &n, &sent) < 0)
                                return rpc_error(st, RPC_INTERNAL, "out of memory");
                        int r = rpc_stream_send(s, buf, n);
                        free(buf);
                        if (r < 0)
                                return rpc_error(st, RPC_CANCELLED, "stream closed");
                }
                /* Woken by plugin_changed (rpc_streams_wake), not by polling; the timeout is a
                 * safety net for a change made without it (see plugin.h). */
                if (rpc_stream_wait_change(s, &p->generation, sent, PLUGIN_WATCH_SAFETY_MS) < 0)
                        return rpc_error(st, RPC_CANCELLED, "stream closed");
        }
}

enum rpc_code plugin_list_and_watch(void *userdata, const uint8_t *req, size_t req_len, struct rpc_stream *s,
                                    struct gs_error *st) {
        return watch(userdata, PLUGIN_WHOLE, req, req_len, s, st);
}

enum rpc_code plugin_service_list_and_watch(void *userdata, const uint8_t *req, size_t req_len, struct rpc_stream *s,
                                            struct gs_error *st) {
        struct plugin_service *svc = userdata;
        return watch(svc->p, svc->kind, req, req_len, s, st);
}

/* ---- request checking shared by Allocate and GetPreferredAllocation ---- */

/* Turn a list of IDs into a set of table indices. Every ID must be known; with `healthy` every
 * one must be healthy; duplicates are refused. Caller holds the lock. */
static enum rpc_code ids_to_set(const struct plugin *p, char **ids, size_t n, bool healthy, const char *what,
                                uint64_t *ret, struct gs_error *st) {
        uint64_t set = 0;
        struct share_usage u;
        share_usage(p, &u);
        for (size_t k = 0; k < n; k++) {
                const char *id = ids[k] ? ids[k] : "";
                int i = plugin_find(p, id);
                if (i < 0)
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: unknown device ID \"%.96s\"", what, id);
                if (set & (UINT64_C(1) << i))
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: device ID %s given twice", what, id);
                if (healthy && !p->gpu[i].healthy)
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: device %s is unhealthy (%s)", what, id,
                                         p->gpu[i].reason);
                if (healthy && (u.frac & (UINT64_C(1) << i)))
                        return rpc_error(st, RPC_INVALID_ARGUMENT,
                                         "%s: device %s is shared: fractions of it are allocated (%s%s%s), so it "
                                         "cannot be handed out whole",
                                         what, id, p->opt.core_resource,
                                         p->opt.core_resource[0] && p->opt.memory_resource[0] ? ", " : "",
                                         p->opt.memory_resource);
                set |= UINT64_C(1) << i;
        }
        *ret = set;
        return RPC_OK;
}

/* Table index → topology index (the allocator works on NVML indices). */
static int topo_index(const struct plugin *p, unsigned i) {
        for (unsigned g = 0; g < p->topo.n_gpus; g++)
                if (p->topo.gpu[g].index == p->gpu[i].index && streq(p->topo.gpu[g].uuid, p->gpu[i].id))
                        return (int)g;
        return -1;
}

static int table_index_of_topo(const struct plugin *p, unsigned g) {
        for (unsigned i = 0; i < p->n; i++)
                if (streq(p->topo.gpu[g].uuid, p->gpu[i].id))
                        return (int)i;
        return -1;
}

/* ---- GetPreferredAllocation ---- */

static enum rpc_code prefer_one(struct plugin *p, const V1beta1__ContainerPreferredAllocationRequest *cr, unsigned k,
                                struct arena *a, V1beta1__ContainerPreferredAllocationResponse *out,
                                struct gs_error *st) {
        char what[48];
        uint64_t avail = 0, must = 0;
        enum rpc_code c;

        snprintf(what, sizeof what, "container request %u", k);
        if (cr->allocation_size <= 0 || (unsigned)cr->allocation_size > p->n)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: allocation_size %" PRId32 " is not in 1..%u", what,
                                 cr->allocation_size, p->n);
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
        struct share_usage u;
        share_usage(p, &u);
        for (unsigned i = 0; i < p->n; i++) {
                if (!(avail & (UINT64_C(1) << i)) || !p->gpu[i].healthy || (u.frac & (UINT64_C(1) << i)))
                        continue;
                int g = topo_index(p, i);
                if (g < 0)
                        continue;
                alloc_set_t bit = (alloc_set_t)1 << g;
                const struct state_alloc *held = state_find(&p->state, p->opt.resource, p->gpu[i].id);
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
        int r = alloc_pick_gpus(&p->topo, &ar, &res, &err);
        if (r < 0)
                return rpc_error(st, r == -ENOSPC ? RPC_RESOURCE_EXHAUSTED : RPC_INVALID_ARGUMENT,
                                 "%s: no preferred allocation of %" PRId32 " healthy devices: %.159s", what,
                                 cr->allocation_size, err.message[0] ? err.message : "allocator refused");
        out->deviceids = arena_alloc(a, sizeof(char *) * (res.n + 1));
        if (!out->deviceids)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        for (unsigned j = 0; j < res.n; j++) {
                int i = table_index_of_topo(p, (unsigned)res.gpus[j]);
                if (i < 0)
                        return rpc_error(st, RPC_INTERNAL, "allocator returned an unknown GPU");
                out->deviceids[out->n_deviceids++] = arena_printf(a, "%s", p->gpu[i].id);
        }
        return RPC_OK;
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

enum rpc_code plugin_preferred_each(struct plugin *p, enum plugin_kind kind, const uint8_t *req, size_t req_len,
                                    plugin_prefer_fn prefer, void *ctx, uint8_t **ret, size_t *ret_len,
                                    struct gs_error *st) {
        struct arena a = { 0 };
        enum rpc_code c = RPC_OK;

        V1beta1__PreferredAllocationRequest *in = v1beta1__preferred_allocation_request__unpack(NULL, req_len, req);
        if (!in)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "cannot decode PreferredAllocationRequest");
        V1beta1__PreferredAllocationResponse resp = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
        /* the scheduler's assignment (assign.h): kubelet sends one container per call */
        V1beta1__ContainerPreferredAllocationRequest *cr0 =
                in->n_container_requests == 1 ? in->container_requests[0] : NULL;
        size_t n_avail = cr0 ? cr0->n_available_deviceids : 0;
        struct assign_ctx ax;
        assign_call_begin(&ax, p, kind, false, cr0 && cr0->allocation_size > 0 ? (unsigned)cr0->allocation_size : 0,
                          NULL, 0);

        pthread_mutex_lock(&p->lock);
        p->n_preferred++;
        void **slots = NULL;
        c = plugin_responses_new(in->n_container_requests, "PreferredAllocationRequest", &a, &slots, st);
        if (c == RPC_OK && cr0)
                c = assign_call_narrow(&ax, p, cr0->available_deviceids, &cr0->n_available_deviceids,
                                       cr0->must_include_deviceids, cr0->n_must_include_deviceids,
                                       "container request 0", st);
        resp.container_responses = (void *)slots;
        p->call_assign = &ax;
        for (size_t k = 0; c == RPC_OK && k < in->n_container_requests; k++) {
                V1beta1__ContainerPreferredAllocationResponse *o = arena_alloc(&a, sizeof *o);
                if (!o) {
                        c = rpc_error(st, RPC_INTERNAL, "out of memory");
                        break;
                }
                v1beta1__container_preferred_allocation_response__init(o);
                c = prefer(ctx, in->container_requests[k], (unsigned)k, &a, o, st);
                resp.container_responses[resp.n_container_responses++] = o;
        }
        p->call_assign = NULL;
        if (c != RPC_OK)
                p->n_errors++;
        pthread_mutex_unlock(&p->lock);

        if (c == RPC_OK && rpc_pack(&resp.base, ret, ret_len) < 0)
                c = rpc_error(st, RPC_INTERNAL, "out of memory");
        arena_free(&a);
        if (cr0)
                cr0->n_available_deviceids = n_avail; /* narrowed in place: every ID is freed */
        assign_call_end(&ax);
        v1beta1__preferred_allocation_request__free_unpacked(in, NULL);
        return c;
}

static enum rpc_code prefer_whole(void *ctx, const V1beta1__ContainerPreferredAllocationRequest *cr, unsigned k,
                                  struct arena *a, V1beta1__ContainerPreferredAllocationResponse *out,
                                  struct gs_error *st) {
        return prefer_one(ctx, cr, k, a, out, st);
}

void plugin_kubelet_called(struct plugin *p) {
        pthread_mutex_lock(&p->lock);
        (void)state_mark_settled(&p->state);
        pthread_mutex_unlock(&p->lock);
}

enum rpc_code plugin_get_preferred(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                                   struct gs_error *st) {
        plugin_kubelet_called(userdata);
        return plugin_preferred_each(userdata, PLUGIN_WHOLE, req, req_len, prefer_whole, userdata, ret, ret_len, st);
}

/* ---- Allocate ---- */

static const char *const control_nodes[] = { "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset" };

/* "<dev-root>/dev/<name>" without doubled slashes: where the agent looks for a device node. */
static int dev_root_path(const struct plugin *p, const char *name, char *buf, size_t len) {
        const char *root = p->opt.dev_root[0] ? p->opt.dev_root : "/";
        size_t rl = strlen(root);
        while (rl > 0 && root[rl - 1] == '/')
                rl--;
        int n = snprintf(buf, len, "%.*s/dev/%s", (int)rl, root, name);
        return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
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

/* lint: long — one Allocate answer's devices, environment and CDI names from one set, with every arena allocation
 * checked; the pieces share the ID list built first. */
enum rpc_code plugin_fill_devices(struct plugin *p, struct arena *a, uint64_t set, unsigned env_room,
                                  V1beta1__ContainerAllocateResponse *out, struct gs_error *st) {
        /* The IDs in NVML index order, as a comma list, for env and CDI. */
        size_t cap = (size_t)p->n * 100 + 1;
        char *list = arena_alloc(a, cap);
        if (!list)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        size_t len = 0;
        unsigned n = 0;
        for (unsigned i = 0; i < p->n; i++) {
                if (!(set & (UINT64_C(1) << i)))
                        continue;
                int w = p->opt.ids_by_index ? snprintf(list + len, cap - len, "%s%d", n ? "," : "", p->gpu[i].index)
                                            : snprintf(list + len, cap - len, "%s%s", n ? "," : "", p->gpu[i].id);
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

                out->devices = arena_alloc(a, sizeof(void *) * (n + ELEMENTSOF(control_nodes)));
                if (!out->devices)
                        return rpc_error(st, RPC_INTERNAL, "out of memory");
                for (unsigned i = 0; i < p->n; i++) {
                        char name[32];
                        if (!(set & (UINT64_C(1) << i)) || p->gpu[i].minor < 0)
                                continue;
                        snprintf(name, sizeof name, "nvidia%d", p->gpu[i].minor);
                        if (!dev_exists(p, name))
                                continue;
                        if (!(out->devices[out->n_devices] = dev_spec(a, name)))
                                return rpc_error(st, RPC_INTERNAL, "out of memory");
                        out->n_devices++;
                }
                for (size_t j = 0; j < ELEMENTSOF(control_nodes); j++) {
                        if (!dev_exists(p, control_nodes[j]))
                                continue;
                        if (!(out->devices[out->n_devices] = dev_spec(a, control_nodes[j])))
                                return rpc_error(st, RPC_INTERNAL, "out of memory");
                        out->n_devices++;
                }
        }
        if (p->opt.list_cdi) {
                out->cdi_devices = arena_alloc(a, sizeof(void *) * n);
                if (!out->cdi_devices)
                        return rpc_error(st, RPC_INTERNAL, "out of memory");
                for (unsigned i = 0; i < p->n; i++) {
                        if (!(set & (UINT64_C(1) << i)))
                                continue;
                        V1beta1__CDIDevice *d = arena_alloc(a, sizeof *d);
                        if (!d)
                                return rpc_error(st, RPC_INTERNAL, "out of memory");
                        v1beta1__cdidevice__init(d);
                        d->name = p->opt.ids_by_index ? arena_printf(a, "%s=%d", p->opt.cdi_kind, p->gpu[i].index)
                                                      : arena_printf(a, "%s=%s", p->opt.cdi_kind, p->gpu[i].id);
                        if (!d->name)
                                return rpc_error(st, RPC_INTERNAL, "out of memory");
                        out->cdi_devices[out->n_cdi_devices++] = d;
                }
        }
        return RPC_OK;
}

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

enum rpc_code plugin_allocate(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                              struct gs_error *st) {
        struct plugin *p = userdata;
        struct arena a = { 0 };
        enum rpc_code c = RPC_OK;
        uint64_t all = 0;
        plugin_kubelet_called(p);

        V1beta1__AllocateRequest *in = v1beta1__allocate_request__unpack(NULL, req_len, req);
        if (!in)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "cannot decode AllocateRequest");
        V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
        struct assign_ctx ax; /* the scheduler's assignment (assign.h) */
        const V1beta1__ContainerAllocateRequest *cr0 = in->n_container_requests == 1 ? in->container_requests[0] : NULL;
        assign_call_begin(&ax, p, PLUGIN_WHOLE, true, cr0 ? (unsigned)cr0->n_devices_ids : 0,
                          cr0 ? cr0->devices_ids : NULL, cr0 ? cr0->n_devices_ids : 0);

        pthread_mutex_lock(&p->lock);
        p->n_allocate++;
        void **slots = NULL;
        c = plugin_responses_new(in->n_container_requests, "AllocateRequest", &a, &slots, st);
        if (c == RPC_OK)
                c = assign_call_check(&ax, p, "container request 0", st);
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
                /* Record the hand-out; PodResources later names the pod and container. A device
                 * kubelet hands out again was released by its previous holder: replace it. */
                time_t now = time(NULL);
                for (unsigned i = 0; i < p->n; i++) {
                        if (!(all & (UINT64_C(1) << i)))
                                continue;
                        struct state_alloc e = { .gpu_index = p->gpu[i].index, .alloc_time = (uint64_t)now };
                        strscpy(e.resource, p->opt.resource, sizeof e.resource);
                        strscpy(e.device_id, p->gpu[i].id, sizeof e.device_id);
                        (void)state_remove(&p->state, p->opt.resource, e.device_id);
                        (void)state_add(&p->state, &e); /* cannot fail for a valid, known ID */
                }
                if (p->opt.core_resource[0] || p->opt.memory_resource[0]) {
                        plugin_changed(p);   /* fractions of these GPUs turn Unhealthy */
                        share_note_whole(p); /* another container: no pairing across it */
                }
                assign_call_commit(&ax);
        } else
                p->n_errors++;
        pthread_mutex_unlock(&p->lock);

        if (c == RPC_OK && rpc_pack(&resp.base, ret, ret_len) < 0)
                c = rpc_error(st, RPC_INTERNAL, "out of memory");
        arena_free(&a);
        assign_call_end(&ax);
        v1beta1__allocate_request__free_unpacked(in, NULL);
        return c;
}

int plugin_serve_kind(struct plugin *p, enum plugin_kind kind, struct rpc_server *s) {
        struct plugin_service *svc = &p->svc[kind];
        int r;
        if (kind == PLUGIN_WHOLE)
                return plugin_serve(p, s);
        if ((r = rpc_server_add_unary(s, "/v1beta1.DevicePlugin/GetDevicePluginOptions", plugin_get_options, svc)) <
                    0 ||
            (r = rpc_server_add_stream(s, "/v1beta1.DevicePlugin/ListAndWatch", plugin_service_list_and_watch, svc)) <
                    0 ||
            (r = rpc_server_add_unary(s, "/v1beta1.DevicePlugin/GetPreferredAllocation", share_get_preferred, svc)) <
                    0 ||
            (r = rpc_server_add_unary(s, "/v1beta1.DevicePlugin/Allocate", share_allocate, svc)) < 0 ||
            (r = rpc_server_add_unary(s, "/v1beta1.DevicePlugin/PreStartContainer", plugin_pre_start, svc)) < 0)
                return r;
        return 0;
}

int plugin_serve(struct plugin *p, struct rpc_server *s) {
        int r;
        if ((r = rpc_server_add_unary(s, "/v1beta1.DevicePlugin/GetDevicePluginOptions", plugin_get_options, p)) < 0 ||
            (r = rpc_server_add_stream(s, "/v1beta1.DevicePlugin/ListAndWatch", plugin_list_and_watch, p)) < 0 ||
            (r = rpc_server_add_unary(s, "/v1beta1.DevicePlugin/GetPreferredAllocation", plugin_get_preferred, p)) <
                    0 ||
            (r = rpc_server_add_unary(s, "/v1beta1.DevicePlugin/Allocate", plugin_allocate, p)) < 0 ||
            (r = rpc_server_add_unary(s, "/v1beta1.DevicePlugin/PreStartContainer", plugin_pre_start, p)) < 0)
                return r;
        return 0;
}
