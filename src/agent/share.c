/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share — the fractional GPU services of the node agent (see share.h, docs/sharing.md): the gRPC
 * handlers, each decode → pick → encode, and the pairing of one container's two halves.
 *
 * Kubelet admits one pod at a time and, per container, asks resource by resource (GetPreferredAllocation,
 * then Allocate) in an undefined order. The first half's Allocate opens the container's record
 * (share-book.h); the other resource's GetPreferredAllocation is steered to that record's GPU
 * (alloc_pick_fraction, src/alloc/fraction.c) and its Allocate joins the record. Every decision is
 * in the journal before its answer leaves; a half that cannot join its partner's GPU is refused,
 * never split. The scheduler's decision for a call (assign.h) arrives as a parameter.
 *
 * struct share is this file's: the book, the journal, the pairing's per-call state. Must never:
 * index anything with an unchecked ID or count, leave the lock held on an error path, or answer
 * before the decision is durable.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "agent/plugin-internal.h"
#include "agent/share-internal.h"
#include "agent/share.h"
#include "alloc/alloc.h"
#include "alloc/fraction.h"
#include "interposer/limits.h"
#include "sched/pack.h"
#include "util/log.h"
#include "util/util.h"

#define BITS_WORDS (SHARE_MEM_IDS_MAX / 64u) /* enough for core (100) and memory (1024) IDs */

struct share_service {
        struct share *s;
        enum plugin_kind kind;
};

struct share {
        struct plugin *p;    /* borrowed */
        struct devices *dev; /* plugin_devices(p) */
        struct share_book *book;
        struct share_journal *journal;
        struct share_service svc[_PLUGIN_KIND_MAX];
        int (*podres_sync)(void *userdata); /* PodResources now (the agent's); NULL: none */
        void *podres_userdata;
        bool restored;        /* loaded from the journal; not yet checked against PodResources */
        bool no_room;         /* the last GetPreferredAllocation refused a first half for room */
        bool no_room_partner; /* ... because no GPU keeps room for its known partner */
        /* GPUs held whole until the reconcile of the running GetPreferredAllocation: kubelet's list
         * of the other fractional resource may still show their IDs Unhealthy (ListAndWatch has not
         * reached it), so no first half goes there in that call (0 outside one) */
        uint64_t just_freed;
        /* sharing.policy fgd or frag: the shares this agent placed as first halves, and their typical shapes
         * (the workload the policy measures fragmentation against; share-pack.c) */
        struct sched_mix mix;
        struct sched_workload workload;
};

struct gpu_bits {
        uint64_t w[BITS_WORDS];
};

static void bit_set(struct gpu_bits *b, unsigned n) {
        b->w[n / 64] |= UINT64_C(1) << (n % 64);
}

static bool bit_test(const struct gpu_bits *b, unsigned n) {
        return b->w[n / 64] & (UINT64_C(1) << (n % 64));
}

static unsigned bit_count(const struct gpu_bits *b) {
        unsigned c = 0;
        for (unsigned i = 0; i < BITS_WORDS; i++)
                c += (unsigned)__builtin_popcountll(b->w[i]);
        return c;
}

static unsigned ids_on_gpu(const struct devices *d, enum plugin_kind kind, unsigned g) {
        return kind == PLUGIN_CORE ? SHARE_CORE_IDS : kind == PLUGIN_MEMORY ? devices_info(d, g)->n_mem : 0;
}

static enum plugin_kind other_kind(enum plugin_kind kind) {
        return kind == PLUGIN_CORE ? PLUGIN_MEMORY : PLUGIN_CORE;
}

static const char *gpu_id(const struct share *s, unsigned g) {
        return devices_info(s->dev, g)->id;
}

/* ---- the service ---- */

/* A whole-GPU Allocate happened: another container, so the open fractional record is closed. */
static void whole_allocated(void *userdata) {
        struct share *s = userdata;
        share_rec_close(s->p, share_book_open(s->book), "single", "a whole-GPU Allocate came next");
}

int share_new(struct plugin *p, struct share **ret) {
        struct share *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->p = p;
        s->dev = plugin_devices(p);
        s->book = share_book_new();
        s->journal = share_journal_new(plugin_options(p)->journal_dir);
        if (!s->book || !s->journal)
                return share_free(s), -ENOMEM;
        for (unsigned k = 0; k < _PLUGIN_KIND_MAX; k++)
                s->svc[k] = (struct share_service){ .s = s, .kind = (enum plugin_kind)k };
        plugin_on_whole_allocate(p, whole_allocated, s);
        *ret = s;
        return 0;
}

struct share *share_free(struct share *s) {
        if (!s)
                return NULL;
        plugin_on_whole_allocate(s->p, NULL, NULL);
        share_book_free(s->book);
        share_journal_free(s->journal);
        sched_mix_free(&s->mix);
        free(s);
        return NULL;
}

void share_set_podres_sync(struct share *s, int (*fn)(void *userdata), void *userdata) {
        s->podres_sync = fn;
        s->podres_userdata = userdata;
}

struct share_service *share_service(struct share *s, enum plugin_kind kind) {
        return &s->svc[kind < _PLUGIN_KIND_MAX ? kind : PLUGIN_CORE];
}

unsigned share_check_all(struct share *s) {
        return share_check(s->p, s->book, NULL);
}

int share_restore(struct share *s) {
        devices_lock(s->dev);
        int r = share_restart_restore(s->p, s->book, s->journal);
        if (r >= 0)
                s->restored = true;
        devices_unlock(s->dev);
        return r;
}

int share_after_sync(struct share *s) {
        if (!s->restored)
                return 0;
        s->restored = false;
        return share_restart_after_sync(s->p, s->book, s->journal);
}

int share_cleanup_dirs(struct share *s) {
        return share_dirs_cleanup(s->p, s->book, s->journal);
}

static int journal_save(struct share *s) {
        return share_journal_save(s->journal, s->dev, s->book);
}

/* Parse a request's IDs of one kind into per-GPU bit sets. Duplicates and foreign IDs are refused;
 * with `usable`, so are IDs on unhealthy GPUs and on GPUs held whole. */
static enum rpc_code ids_to_bits(const struct share *s, enum plugin_kind kind, char **ids, size_t n, bool usable,
                                 const struct plugin_usage *u, const char *what, struct gpu_bits *bits,
                                 uint64_t *ret_gpus, struct gs_error *st) {
        uint64_t gpus = 0;
        for (size_t k = 0; k < n; k++) {
                const char *id = ids[k] ? ids[k] : "";
                enum plugin_kind kk;
                unsigned g, num;
                if (share_parse_id(s->dev, id, &kk, &g, &num) < 0 || kk != kind)
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: unknown %s device ID \"%.96s\"", what,
                                         plugin_resource(s->p, kind), id);
                if (bit_test(&bits[g], num))
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: device ID %s given twice", what, id);
                if (usable && !devices_healthy(s->dev, g))
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: device %s is on unhealthy GPU %s (%s)", what,
                                         id, gpu_id(s, g), devices_reason(s->dev, g));
                if (usable && (u->whole & devices_mask_up(s->dev, g)))
                        return rpc_error(st, RPC_INVALID_ARGUMENT,
                                         "%s: device %s is on GPU %s, which is allocated whole (%s); fractions of "
                                         "it cannot be handed out",
                                         what, id, gpu_id(s, g), plugin_resource(s->p, PLUGIN_WHOLE));
                bit_set(&bits[g], num);
                gpus |= UINT64_C(1) << g;
        }
        *ret_gpus = gpus;
        return RPC_OK;
}

/* ---- whole GPUs through the core resource ---- */

static int topo_of(const struct devices *d, unsigned i) {
        const struct topo *t = devices_topo(d);
        for (unsigned g = 0; g < t->n_gpus; g++)
                if (streq(t->gpu[g].uuid, devices_info(d, i)->id))
                        return (int)g;
        return -1;
}

/* Whole GPUs through the core resource (a multiple of 100): untouched GPUs, topology-aware. */
static enum rpc_code prefer_whole_cores(const struct share *s, unsigned count, uint64_t cand, uint64_t must_gpus,
                                        const char *what, uint64_t *ret, struct gs_error *st) {
        const struct topo *t = devices_topo(s->dev);
        struct alloc_request ar = { .count = count };
        for (unsigned i = 0; i < devices_count(s->dev); i++) {
                int g = topo_of(s->dev, i);
                if (g < 0)
                        continue;
                if (cand & (UINT64_C(1) << i))
                        ar.available |= (alloc_set_t)1 << g;
                if (must_gpus & (UINT64_C(1) << i))
                        ar.must_include |= (alloc_set_t)1 << g;
        }
        if ((unsigned)__builtin_popcountll(ar.available) < count)
                return rpc_error(st, RPC_RESOURCE_EXHAUSTED, "%s: %u whole GPUs wanted, %d untouched ones available",
                                 what, count, __builtin_popcountll(ar.available));
        struct alloc_result res;
        struct gs_error err = { 0 };
        if (alloc_pick_gpus(t, &ar, &res, &err) < 0)
                return rpc_error(st, RPC_RESOURCE_EXHAUSTED, "%s: no %u whole GPUs: %.159s", what, count, err.message);
        uint64_t set = 0;
        for (unsigned j = 0; j < res.n; j++) {
                int i = devices_find(s->dev, t->gpu[res.gpus[j]].uuid);
                if (i >= 0)
                        set |= UINT64_C(1) << i;
        }
        *ret = set;
        return RPC_OK;
}

/* ---- pairing ---- */

/* The open record this call of `kind` may be the partner of. A record opened by the same kind is
 * closed first (the call is another container's), and so is one past its deadline. */
static struct share_rec *partner_for(struct share *s, enum plugin_kind kind, bool may_pair, uint64_t now) {
        struct share_rec *r = share_book_open(s->book);
        if (!r)
                return NULL;
        if (!may_pair || r->first == kind) {
                share_rec_close(s->p, r, "single", "the next container asked for the same resource");
                return NULL;
        }
        if (now > r->deadline_ms) {
                share_rec_close(s->p, r, "expired", "no partner within the pairing window");
                return NULL;
        }
        return r;
}

/* A call that was this open record's partner failed: kubelet fails the container, nothing joins. */
static void partner_failed(struct share *s, enum plugin_kind kind, const char *why) {
        struct share_rec *r = share_book_open(s->book);
        if (r && r->first != kind) {
                share_rec_close(s->p, r, "refused", why);
                (void)journal_save(s);
        }
}

/* The lowest GPU of a record (its only one but for whole GPUs through the core resource). */
static int rec_gpu(const struct share_rec *r) {
        return r && r->gpus ? __builtin_ctzll(r->gpus) : -1;
}

/* What the scheduler's assignment and PodResources say of this call's container (assign.h): NULL
 * when they say nothing (no assignment matched, or no PodResources answer during the call). */
static const struct assign_ctx *call_evidence(const struct assign_ctx *ax) {
        return ax && ax->active && ax->d.verdict == ASSIGN_MATCH && ax->evidence ? ax : NULL;
}

/* The container record r belongs to ("ns/pod/container"): the assignment's at its first half, or
 * the one PodResources named holding its first ID. False when neither is known. */
static bool rec_owner(struct share *s, const struct share_rec *r, char *buf, size_t len) {
        if (r->owner[0]) {
                strscpy(buf, r->owner, len);
                return true;
        }
        char dev[SHARE_ID_MAX];
        if (r->n_ids == 0 || share_format_id(gpu_id(s, r->ids[0].gpu), (enum plugin_kind)r->ids[0].kind, r->ids[0].n,
                                             dev, sizeof dev) < 0)
                return false;
        const struct state_alloc *a =
                state_find(plugin_record(s->p), plugin_resource(s->p, (enum plugin_kind)r->ids[0].kind), dev);
        if (!a || !a->pod_name[0] || !a->container[0])
                return false;
        int w = snprintf(buf, len, "%s/%s/%s", a->pod_namespace, a->pod_name, a->container);
        return w > 0 && (size_t)w < len;
}

/* Pairing on evidence instead of the call order (docs/sharing.md, "How the pair is known"). Before
 * a call of `kind` may pair with the open record:
 *  - the assignment names this call's container and says it asks only this resource, or that its
 *    other half is not handed out yet (this call is its first half): the open record is another
 *    container's and closes (`single`);
 *  - it says the other half is handed out, and the record is not known to be another container's:
 *    the record is its partner for certain (returns true: not a guess, not tentative);
 *  - no assignment matched this call, but the record's container has one (assign_lookup_container):
 *    its partner would have been matched to it, so this call is not its partner: the record closes.
 * Otherwise the call order decides as before (returns false). */
static bool pair_evidence(struct share *s, enum plugin_kind kind, const struct assign_ctx *ax) {
        struct share_rec *r = share_book_open(s->book);
        if (!r || r->first == kind)
                return false;
        const struct assign_ctx *e = call_evidence(ax);
        char owner[ASSIGN_OWNER_MAX], why[600];
        bool known = rec_owner(s, r, owner, sizeof owner);
        if (e && (!e->other_asked || !e->other_held)) {
                snprintf(why, sizeof why,
                         "the scheduler's assignment says this call is %.383s's %s (PodResources lists no other half "
                         "of it)",
                         e->owner, e->other_asked ? "first half" : "only fractional resource");
                share_rec_close(s->p, r, "single", why);
                return false;
        }
        if (e)
                return !known || streq(owner, e->owner);
        if (!known || !ax || !ax->a || ax->active)
                return false;
        char ns[64], pod[254], ctr[64];
        int gpus[ASSIGN_GPUS_MAX];
        if (sscanf(owner, "%63[^/]/%253[^/]/%63s", ns, pod, ctr) == 3 &&
            assign_lookup_container(ax->a, ns, pod, ctr, gpus, ASSIGN_GPUS_MAX) > 0) {
                snprintf(why, sizeof why,
                         "its container %.383s has the scheduler's assignment and this call was not matched to it",
                         owner);
                share_rec_close(s->p, r, "single", why);
        }
        return false;
}

/* ---- GetPreferredAllocation: decode → alloc_pick_fraction → encode ---- */

static bool id_in(const struct share_id *a, const struct share_id *b) {
        return a->gpu == b->gpu && a->kind == b->kind && a->n == b->n;
}

/* Drop ids[k] (listed) from record r, and from the allocation record unless another record holds
 * it too. */
static void rec_forget(struct share *s, struct share_rec *r, bool (*listed)(const struct share_id *, const void *),
                       const void *ctx) {
        size_t o = 0;
        for (size_t k = 0; k < r->n_ids; k++) {
                struct share_id id = r->ids[k];
                if (listed && !listed(&id, ctx)) {
                        r->ids[o++] = id;
                        continue;
                }
                bool elsewhere = false;
                for (size_t i = 0; i < share_book_count(s->book) && !elsewhere; i++) {
                        const struct share_rec *x = share_book_at(s->book, i);
                        for (size_t j = 0; x != r && j < x->n_ids && !elsewhere; j++)
                                elsewhere = id_in(&x->ids[j], &id);
                }
                char dev[SHARE_ID_MAX];
                if (!elsewhere &&
                    share_format_id(gpu_id(s, id.gpu), (enum plugin_kind)id.kind, id.n, dev, sizeof dev) == 0)
                        (void)state_remove(plugin_record(s->p), plugin_resource(s->p, (enum plugin_kind)id.kind), dev);
        }
        r->n_ids = o;
}

struct avail_ctx {
        enum plugin_kind kind;
        const struct gpu_bits *avail, *must;
};

/* Listed as available and not as must-include: kubelet passes an init container's devices that an
 * app container of the same pod reuses in both lists, and those it still holds. */
static bool is_available(const struct share_id *id, const void *ctx) {
        const struct avail_ctx *c = ctx;
        return id->kind == c->kind && bit_test(&c->avail[id->gpu], id->n) && !bit_test(&c->must[id->gpu], id->n);
}

/* Kubelet lists as available only IDs it does not hold, and it releases a container's devices
 * together: a record with any ID among them belongs to a container that is gone (or never
 * started), and all its IDs are free — except for the last record written, whose second half may
 * be the one a restart interrupted (only the listed IDs go there). Dropping them now rather than
 * at the next PodResources sync lets placement see what is really free. */
static bool release_available(struct share *s, enum plugin_kind kind, const struct gpu_bits *avail,
                              const struct gpu_bits *must) {
        struct avail_ctx ctx = { kind, avail, must };
        bool changed = false, last_lost_first = false;
        for (size_t i = 0; i < share_book_count(s->book);) {
                struct share_rec *r = share_book_at(s->book, i);
                bool any = false;
                for (size_t k = 0; k < r->n_ids && !any; k++)
                        any = is_available(&r->ids[k], &ctx);
                if (!any || r->open) {
                        i++;
                        continue;
                }
                changed = true;
                bool last = streq(r->name, share_book_last(s->book)), had = r->has[r->first];
                rec_forget(s, r, last ? is_available : NULL, &ctx);
                share_rec_refresh(r);
                last_lost_first |= last && had && r->first == kind && !r->has[r->first];
                if (r->n_ids > 0) {
                        i++;
                        continue;
                }
                share_log_decision(s->p, "release", kind, -1, r->name, "kubelet no longer holds its IDs");
                share_dir_remove(s->p, r->name);
                share_book_remove(s->book, r);
        }
        if (changed)
                devices_touch(s->dev); /* whole GPUs may be free again */
        return last_lost_first;
}

struct prefer_in {
        unsigned size;
        struct gpu_bits avail[DEVICES_MAX], must[DEVICES_MAX];
        uint64_t avail_gpus, must_gpus;
        struct plugin_usage u;
};

static enum rpc_code prefer_decode(struct share *s, enum plugin_kind kind,
                                   const V1beta1__ContainerPreferredAllocationRequest *cr, const char *what,
                                   struct prefer_in *in, struct gs_error *st) {
        plugin_usage(s->p, &in->u);
        if (cr->allocation_size <= 0)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: allocation_size %" PRId32 " is not positive", what,
                                 cr->allocation_size);
        in->size = (unsigned)cr->allocation_size;
        enum rpc_code c = ids_to_bits(s, kind, cr->available_deviceids, cr->n_available_deviceids, false, &in->u, what,
                                      in->avail, &in->avail_gpus, st);
        if (c == RPC_OK)
                c = ids_to_bits(s, kind, cr->must_include_deviceids, cr->n_must_include_deviceids, true, &in->u, what,
                                in->must, &in->must_gpus, st);
        if (c != RPC_OK)
                return c;
        for (unsigned g = 0; g < devices_count(s->dev); g++)
                for (unsigned w = 0; w < BITS_WORDS; w++)
                        if (in->must[g].w[w] & ~in->avail[g].w[w])
                                return rpc_error(st, RPC_INVALID_ARGUMENT,
                                                 "%s: must_include_deviceIDs not all in available_deviceIDs", what);
        if (cr->n_must_include_deviceids > in->size)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: %zu must-include devices but allocation_size %u", what,
                                 cr->n_must_include_deviceids, in->size);
        return RPC_OK;
}

static bool gpu_usable(const struct share *s, const struct plugin_usage *u, unsigned g) {
        return devices_healthy(s->dev, g) && !(u->whole & devices_mask_up(s->dev, g));
}

/* Whole GPUs through the core resource (a multiple of 100): untouched GPUs, topology-aware. */
static enum rpc_code prefer_whole(struct share *s, const struct prefer_in *in, const char *what, uint64_t *ret,
                                  struct gs_error *st) {
        if (in->size % SHARE_CORE_IDS)
                return rpc_error(st, RPC_INVALID_ARGUMENT,
                                 "%s: %u %s exceeds one GPU (100) and is not a multiple of 100: more than one GPU "
                                 "must be whole GPUs",
                                 what, in->size, plugin_resource(s->p, PLUGIN_CORE));
        uint64_t cand = 0;
        for (unsigned g = 0; g < devices_count(s->dev); g++)
                if (devices_info(s->dev, g)->kind == DEVICE_GPU && gpu_usable(s, &in->u, g) &&
                    bit_count(&in->avail[g]) == SHARE_CORE_IDS && !(in->u.frac & (UINT64_C(1) << g)))
                        cand |= UINT64_C(1) << g;
        if (in->must_gpus & ~cand)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: must-include IDs are on a GPU not wholly free", what);
        return prefer_whole_cores(s, in->size / SHARE_CORE_IDS, cand, in->must_gpus, what, ret, st);
}

static void frac_request_fill(struct share *s, enum plugin_kind kind, const struct prefer_in *in, int partner,
                              struct alloc_frac_request *q) {
        const struct plugin_options *o = plugin_options(s->p);
        unsigned n = devices_count(s->dev);
        enum plugin_kind ok = other_kind(kind);
        *q = (struct alloc_frac_request){
                .kind = kind == PLUGIN_CORE ? ALLOC_FRAC_CORE : ALLOC_FRAC_MEM,
                .policy = o->spread ? ALLOC_FRAC_SPREAD : ALLOC_FRAC_BINPACK,
                .size = in->size,
                .partner = partner,
                .pair = plugin_resource(s->p, ok)[0] != 0,
                .n = n,
        };
        if (partner < 0 && q->pair) {
                /* A size seen before: room for the largest partner it had, and refused when no GPU keeps
                 * the smallest. A size never seen: its partner may be anything, so keep a whole GPU's worth
                 * (an untouched GPU, by the policy), else the GPU keeping the most room: the guess most
                 * likely to let the partner follow. */
                q->expect = share_book_expect(s->book, kind, in->size);
                q->need = share_book_need(s->book, kind, in->size);
                unsigned whole = 0;
                for (unsigned g = 0; g < n; g++)
                        whole = MAX(whole, ok == PLUGIN_CORE ? SHARE_CORE_IDS : devices_info(s->dev, g)->n_mem);
                if (q->expect == 0)
                        q->expect = whole;
        }
        uint64_t just_freed = partner < 0 ? s->just_freed : 0;
        for (unsigned g = 0; g < n; g++) {
                struct alloc_frac_gpu *x = &q->gpu[g];
                x->usable = gpu_usable(s, &in->u, g) && !(just_freed >> g & 1);
                x->must = (in->must_gpus >> g) & 1;
                x->total[ALLOC_FRAC_CORE] = o->core_resource[0] ? SHARE_CORE_IDS : 0;
                x->total[ALLOC_FRAC_MEM] = o->memory_resource[0] ? devices_info(s->dev, g)->n_mem : 0;
                x->used[ALLOC_FRAC_CORE] = in->u.core[g];
                x->used[ALLOC_FRAC_MEM] = in->u.mem[g];
                x->avail = bit_count(&in->avail[g]);
        }
}

static enum rpc_code frac_error(struct share *s, enum plugin_kind kind, unsigned size, int r,
                                const struct alloc_frac_decision *d, const char *what, struct gs_error *st) {
        const char *res = plugin_resource(s->p, kind);
        switch (r) {
                case -E2BIG: return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: %u %s %s", what, size, res, d->why);
                case -EXDEV:
                        return rpc_error(
                                st, RPC_RESOURCE_EXHAUSTED,
                                "%s: %s: %s; one container's core and memory must be on one GPU (the container is "
                                "refused rather than split)",
                                what, res, d->why);
                case -ENOSPC: return rpc_error(st, RPC_RESOURCE_EXHAUSTED, "%s: %s: %s", what, res, d->why);
                default: return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: %s: %s", what, res, d->why);
        }
}

/* Must-include first, then the lowest available IDs on the chosen GPUs. */
static enum rpc_code prefer_encode(struct share *s, enum plugin_kind kind, uint64_t chosen, const struct prefer_in *in,
                                   const V1beta1__ContainerPreferredAllocationRequest *cr, struct arena *a,
                                   V1beta1__ContainerPreferredAllocationResponse *out, const char *what,
                                   struct gs_error *st) {
        out->deviceids = arena_alloc(a, sizeof(char *) * (in->size + 1));
        if (!out->deviceids)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        for (size_t j = 0; j < cr->n_must_include_deviceids; j++)
                out->deviceids[out->n_deviceids++] = arena_printf(a, "%s", cr->must_include_deviceids[j]);
        for (unsigned g = 0; g < devices_count(s->dev) && out->n_deviceids < in->size; g++) {
                if (!(chosen & (UINT64_C(1) << g)))
                        continue;
                unsigned max = ids_on_gpu(s->dev, kind, g);
                for (unsigned n = 0; n < max && out->n_deviceids < in->size; n++) {
                        if (!bit_test(&in->avail[g], n) || bit_test(&in->must[g], n))
                                continue;
                        char id[SHARE_ID_MAX];
                        if (share_format_id(gpu_id(s, g), kind, n, id, sizeof id) < 0)
                                return rpc_error(st, RPC_INTERNAL, "device ID too long");
                        out->deviceids[out->n_deviceids++] = arena_printf(a, "%s", id);
                }
        }
        if (out->n_deviceids != in->size || a->failed)
                return rpc_error(st, RPC_INTERNAL, "%s: could not fill %u IDs", what, in->size);
        return RPC_OK;
}

/* Remember the proposal (journal) before it leaves: the Allocate that follows it is "made". */
static void prefer_record(struct share *s, enum plugin_kind kind, unsigned size, int gpu, const struct share_rec *r,
                          const char *reason) {
        struct share_proposal *q = share_book_proposal(s->book);
        *q = (struct share_proposal){ .set = true, .kind = (uint8_t)kind, .gpu = gpu, .size = size };
        if (r)
                strscpy(q->rec, r->name, sizeof q->rec);
        share_log_decision(s->p, "preferred", kind, gpu, r ? r->name : NULL, reason);
        (void)journal_save(s);
        share_crash_point("preferred-journaled");
}

static void learn_refused(struct share *s, const struct share_rec *partner, enum plugin_kind kind, unsigned size) {
        unsigned g = (unsigned)rec_gpu(partner);
        if (kind == PLUGIN_CORE)
                share_book_learn(s->book, size, share_rec_count(partner, PLUGIN_MEMORY, g));
        else
                share_book_learn(s->book, share_rec_count(partner, PLUGIN_CORE, g), size);
}

/* A first half or a partner placed by alloc_pick_fraction: *chosen, or the refusal. */
static enum rpc_code prefer_fraction(struct share *s, enum plugin_kind kind, const struct prefer_in *in,
                                     struct share_rec *partner, const struct assign_ctx *ax, const char *what,
                                     uint64_t *chosen, struct gs_error *st) {
        struct alloc_frac_request q;
        struct alloc_frac_decision d;
        frac_request_fill(s, kind, in, rec_gpu(partner), &q);
        const struct assign_ctx *e = call_evidence(ax);
        if (e && !e->other_asked)
                q.pair = false; /* one resource only (the pod's spec): no partner to keep room for */
        enum cluster_policy pol = plugin_options(s->p)->pack;
        if (!partner && pol != CLUSTER_POLICY_BINPACK) {
                /* the extender's own GPU choice among the candidates, against the shares seen here */
                struct sched_shape sh = { .num_gpu = 1, .gpu_milli = share_pack_milli(&q) };
                (void)sched_mix_observe(&s->mix, &sh, false, &s->workload);
                share_pack_prefer(&q, pol, &s->workload);
        }
        int r = alloc_pick_fraction(&q, &d);
        if (r < 0) {
                if (partner) /* the partner's size is known now: the next container of this shape fits */
                        learn_refused(s, partner, kind, in->size);
                if (r == -ENOSPC && !partner) {
                        s->no_room = true;
                        s->no_room_partner = d.reason == ALLOC_FRAC_NO_ROOM;
                }
                return frac_error(s, kind, in->size, r, &d, what, st);
        }
        *chosen = UINT64_C(1) << d.gpu;
        prefer_record(s, kind, in->size, d.gpu, partner, d.why);
        return RPC_OK;
}

static enum rpc_code prefer_one(struct share_service *svc, const struct assign_ctx *ax,
                                const V1beta1__ContainerPreferredAllocationRequest *cr, unsigned k, bool may_pair,
                                struct arena *a, V1beta1__ContainerPreferredAllocationResponse *out,
                                struct gs_error *st) {
        struct share *s = svc->s;
        enum plugin_kind kind = svc->kind;
        char what[48];
        struct prefer_in *in = calloc(1, sizeof *in);
        uint64_t chosen = 0;
        if (!in)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        snprintf(what, sizeof what, "container request %u", k);
        enum rpc_code c = prefer_decode(s, kind, cr, what, in, st);
        if (c == RPC_OK) {
                share_restart_reverse(s->p, s->book, release_available(s, kind, in->avail, in->must));
                plugin_usage(s->p, &in->u);
        }
        if (c == RPC_OK && may_pair)
                (void)pair_evidence(s, kind, ax);
        struct share_rec *partner = c == RPC_OK ? partner_for(s, kind, may_pair, monotonic_ms()) : NULL;
        if (c == RPC_OK && kind == PLUGIN_CORE && in->size > SHARE_CORE_IDS && !partner) {
                c = prefer_whole(s, in, what, &chosen, st);
                if (c == RPC_OK)
                        prefer_record(s, kind, in->size, __builtin_ctzll(chosen), NULL, "whole GPUs");
        } else if (c == RPC_OK)
                c = prefer_fraction(s, kind, in, partner, ax, what, &chosen, st);
        if (c == RPC_OK)
                c = prefer_encode(s, kind, chosen, in, cr, a, out, what, st);
        if (c != RPC_OK) {
                share_log_decision(s->p, "preferred", kind, -1, partner ? partner->name : NULL, st->message);
                partner_failed(s, kind, st->message);
        }
        free(in);
        return c;
}

static enum rpc_code prefer_share(void *ctx, const struct assign_ctx *ax,
                                  const V1beta1__ContainerPreferredAllocationRequest *cr, unsigned k, struct arena *a,
                                  V1beta1__ContainerPreferredAllocationResponse *out, struct gs_error *st) {
        /* kubelet sends one container per call; only the first of several may be a partner */
        return prefer_one(ctx, ax, cr, k, k == 0, a, out, st);
}

enum rpc_code share_preferred_decided(struct share_service *svc, V1beta1__PreferredAllocationRequest *in,
                                      struct assign_ctx *ax, uint8_t **ret, size_t *ret_len, struct gs_error *st) {
        return plugin_preferred_each(svc->s->p, in, ax, prefer_share, svc, ret, ret_len, st);
}

/* lint: long — the handler's steps in order: a restored record confirmed, the decision once, and once more on what
 * PodResources says now when a first half was refused for room; each step is short and the order is the point. */
enum rpc_code share_get_preferred(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                                  struct gs_error *st) {
        struct share_service *svc = userdata;
        struct share *s = svc->s;
        plugin_kubelet_called(s->p);
        share_restart_confirm(s->p, s->book, s->journal, svc->kind, s->podres_sync, s->podres_userdata);
        devices_lock(s->dev);
        s->no_room = s->no_room_partner = false;
        devices_unlock(s->dev);
        V1beta1__PreferredAllocationRequest *in = v1beta1__preferred_allocation_request__unpack(NULL, req_len, req);
        if (!in)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "cannot decode PreferredAllocationRequest");
        struct assign_ctx ax; /* the scheduler's assignment (assign.h) */
        plugin_assign_preferred(s->p, svc->kind, in, &ax);
        enum rpc_code c = share_preferred_decided(svc, in, &ax, ret, ret_len, st);
        assign_call_end(&ax);
        devices_lock(s->dev);
        bool again = c == RPC_RESOURCE_EXHAUSTED && s->podres_sync && s->no_room;
        struct plugin_usage before;
        plugin_usage(s->p, &before);
        devices_unlock(s->dev);
        /* A first half refused for room: the room counted may be of containers kubelet no longer
         * holds (failed while the agent was down, not yet dropped by a sync). Refuse only on what
         * PodResources says now: reconcile and decide once more. A GPU that was held whole until
         * now is not offered to this first half: kubelet's list of the other resource still marks
         * its IDs Unhealthy until our ListAndWatch reaches it, and the partner would be refused. */
        if (again && s->podres_sync(s->podres_userdata) == 0) {
                share_log_decision(s->p, "preferred", svc->kind, -1, NULL,
                                   "refused for room: asked PodResources, again");
                devices_lock(s->dev);
                s->just_freed = before.whole;
                devices_unlock(s->dev);
                plugin_assign_preferred(s->p, svc->kind, in, &ax);
                c = share_preferred_decided(svc, in, &ax, ret, ret_len, st);
                assign_call_end(&ax);
                devices_lock(s->dev);
                s->just_freed = 0;
                devices_unlock(s->dev);
        }
        devices_lock(s->dev);
        if (c == RPC_RESOURCE_EXHAUSTED && s->no_room && s->no_room_partner)
                share_count("gpuslice_share_pairs_total", "no-room"); /* refused before its partner, once */
        devices_unlock(s->dev);
        v1beta1__preferred_allocation_request__free_unpacked(in, NULL);
        return c;
}

/* ---- Allocate: decode → pair → commit (journal, dir) → encode ---- */

struct alloc_plan {
        struct gpu_bits bits[DEVICES_MAX];
        uint64_t gpus;
        char join[SHARE_REC_NAME_MAX]; /* the open record this half joins, "" = a new record */
        bool guessed;
        bool certain;                 /* the assignment says this half is the record's partner */
        const struct assign_ctx *why; /* the assignment's evidence of this call, NULL none */
};

static V1beta1__Mount *mount_msg(struct arena *a, const char *container_path, const char *host_path, bool ro) {
        V1beta1__Mount *m = arena_alloc(a, sizeof *m);
        if (!m)
                return NULL;
        v1beta1__mount__init(m);
        m->container_path = arena_printf(a, "%s", container_path);
        m->host_path = arena_printf(a, "%s", host_path);
        m->read_only = ro;
        return m->container_path && m->host_path ? m : NULL;
}

static bool add_env(V1beta1__ContainerAllocateResponse *out, struct arena *a, const char *key, const char *value) {
        V1beta1__ContainerAllocateResponse__EnvsEntry *e = arena_alloc(a, sizeof *e);
        if (!e)
                return false;
        v1beta1__container_allocate_response__envs_entry__init(e);
        e->key = arena_printf(a, "%s", key);
        e->value = arena_printf(a, "%s", value);
        out->envs[out->n_envs++] = e;
        return e->key && e->value;
}

/* Check the shape of one container's IDs: core up to 100 on one GPU, more only as whole GPUs;
 * memory on one GPU. */
static enum rpc_code check_shape(const struct share *s, enum plugin_kind kind, const struct gpu_bits *bits,
                                 uint64_t gpus, const char *what, struct gs_error *st) {
        const char *res = plugin_resource(s->p, kind);
        unsigned n = devices_count(s->dev);
        unsigned total = 0, ngpus = (unsigned)__builtin_popcountll(gpus);
        for (unsigned g = 0; g < n; g++)
                total += bit_count(&bits[g]);
        if (kind == PLUGIN_CORE && total > SHARE_CORE_IDS) {
                if (total % SHARE_CORE_IDS)
                        return rpc_error(st, RPC_INVALID_ARGUMENT,
                                         "%s: %u %s exceeds one GPU (100) and is not a multiple of 100; more than "
                                         "one GPU must be whole GPUs",
                                         what, total, res);
                for (unsigned g = 0; g < n; g++)
                        if ((gpus & (UINT64_C(1) << g)) && devices_info(s->dev, g)->kind == DEVICE_MIG)
                                return rpc_error(st, RPC_INVALID_ARGUMENT,
                                                 "%s: %u %s must be whole GPUs, but %s is a MIG device (100 at most)",
                                                 what, total, res, gpu_id(s, g));
                for (unsigned g = 0; g < n; g++)
                        if ((gpus & (UINT64_C(1) << g)) && bit_count(&bits[g]) != SHARE_CORE_IDS)
                                return rpc_error(st, RPC_INVALID_ARGUMENT,
                                                 "%s: %u %s must be %u whole GPUs, but GPU %s gives %u of 100", what,
                                                 total, res, total / SHARE_CORE_IDS, gpu_id(s, g), bit_count(&bits[g]));
                return RPC_OK;
        }
        if (ngpus > 1) {
                char list[256] = "";
                size_t len = 0;
                for (unsigned g = 0; g < n && len < sizeof list - 1; g++)
                        if (gpus & (UINT64_C(1) << g)) {
                                int w = snprintf(list + len, sizeof list - len, "%s%s: %u", len ? ", " : "",
                                                 gpu_id(s, g), bit_count(&bits[g]));
                                len = w < 0 ? len : MIN(len + (size_t)w, sizeof list - 1);
                        }
                unsigned largest = 0;
                for (unsigned g = 0; g < n; g++)
                        largest = MAX(largest, ids_on_gpu(s->dev, kind, g));
                if (total > largest)
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: %u %s exceeds one GPU (%u at most) (%s)", what,
                                         total, res, largest, list);
                return rpc_error(st, RPC_INVALID_ARGUMENT,
                                 "%s: %s IDs span %u GPUs (%s); one container's share must come from one GPU", what,
                                 res, ngpus, list);
        }
        return RPC_OK;
}

/* IDs parsed, on healthy GPUs not held whole, in no earlier container of the message, of an
 * accepted shape, and the interposer present. */
static enum rpc_code allocate_decode(struct share *s, enum plugin_kind kind,
                                     const V1beta1__ContainerAllocateRequest *cr, const char *what,
                                     struct gpu_bits *all, struct alloc_plan *plan, struct gs_error *st) {
        struct plugin_usage u;
        if (cr->n_devices_ids == 0)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: no device IDs", what);
        plugin_usage(s->p, &u);
        enum rpc_code c =
                ids_to_bits(s, kind, cr->devices_ids, cr->n_devices_ids, true, &u, what, plan->bits, &plan->gpus, st);
        if (c != RPC_OK)
                return c;
        for (unsigned g = 0; g < devices_count(s->dev); g++)
                for (unsigned w = 0; w < BITS_WORDS; w++) {
                        if (all[g].w[w] & plan->bits[g].w[w])
                                return rpc_error(st, RPC_INVALID_ARGUMENT,
                                                 "%s: a device is also requested by another container", what);
                        all[g].w[w] |= plan->bits[g].w[w];
                }
        c = check_shape(s, kind, plan->bits, plan->gpus, what, st);
        if (c != RPC_OK)
                return c;
        const char *interposer = plugin_options(s->p)->interposer;
        struct stat lib;
        if (stat(interposer, &lib) < 0 || !S_ISREG(lib.st_mode))
                return rpc_error(st, RPC_FAILED_PRECONDITION,
                                 "%s: the CUDA interposer %s is missing on the node (sharing.interposer)", what,
                                 interposer);
        return RPC_OK;
}

/* Join the open record of the other resource, or start a new one; a half on another GPU than its
 * partner is refused (kubelet fails the container), never split. */
static enum rpc_code allocate_pair(struct share *s, enum plugin_kind kind, bool may_pair, struct alloc_plan *plan,
                                   const struct assign_ctx *ax, const char *what, struct gs_error *st) {
        plan->why = may_pair ? call_evidence(ax) : NULL;
        plan->certain = may_pair && pair_evidence(s, kind, ax);
        struct share_rec *r = partner_for(s, kind, may_pair, monotonic_ms());
        if (!r)
                return RPC_OK;
        bool same = kind == PLUGIN_MEMORY ? (plan->gpus & ~r->gpus) == 0
                                          : (r->gpus & ~plan->gpus) == 0; /* core may be whole GPUs */
        if (!same) {
                int g = rec_gpu(r);
                rpc_error(st, RPC_INVALID_ARGUMENT,
                          "%s: %s IDs are on another GPU than this container's %s (on %s, allocated just before); one "
                          "container's core and memory must be on one GPU",
                          what, plugin_resource(s->p, kind), plugin_resource(s->p, (enum plugin_kind)r->first),
                          g >= 0 ? gpu_id(s, (unsigned)g) : "?");
                return RPC_INVALID_ARGUMENT; /* partner_failed closes the record */
        }
        const struct share_proposal *q = share_book_proposal_const(s->book);
        plan->guessed = !plan->certain && !(q->set && q->kind == kind && streq(q->rec, r->name) && q->gpu >= 0 &&
                                            plan->gpus == UINT64_C(1) << q->gpu);
        if (plan->certain)
                r->confirmed = true; /* restored or not, the assignment says whose it is: not tentative */
        strscpy(plan->join, r->name, sizeof plan->join);
        return RPC_OK;
}

static size_t plan_ids(const struct share *s, enum plugin_kind kind, const struct alloc_plan *plan,
                       struct share_id *ids) {
        size_t n = 0;
        for (unsigned g = 0; g < devices_count(s->dev); g++)
                for (unsigned i = 0; (plan->gpus >> g & 1) && i < ids_on_gpu(s->dev, kind, g); i++)
                        if (bit_test(&plan->bits[g], i))
                                ids[n++] =
                                        (struct share_id){ .gpu = (uint8_t)g, .kind = (uint8_t)kind, .n = (uint16_t)i };
        return n;
}

/* Drop the given IDs from every record (kubelet handed them out again: their holder is gone);
 * records left without IDs go, with their dirs. */
static void release_ids(struct share *s, const struct share_id *ids, size_t n) {
        for (size_t i = 0; i < share_book_count(s->book);) {
                struct share_rec *r = share_book_at(s->book, i);
                size_t o = 0;
                for (size_t k = 0; k < r->n_ids; k++) {
                        bool gone = false;
                        for (size_t j = 0; j < n && !gone; j++)
                                gone = id_in(&ids[j], &r->ids[k]);
                        if (!gone)
                                r->ids[o++] = r->ids[k];
                }
                r->n_ids = o;
                share_rec_refresh(r);
                if (o == 0) {
                        log_debug("record released: kubelet no longer holds its IDs", "container=%s", r->name);
                        share_dir_remove(s->p, r->name);
                        share_book_remove(s->book, r);
                        continue;
                }
                i++;
        }
}

/* The record this Allocate writes: the one it joins, or a new one named after its first ID (a
 * suffix when a record of that name still holds IDs: a record keeps the name of its first ID even
 * when that ID went back to kubelet). */
static struct share_rec *plan_record(struct share *s, enum plugin_kind kind, bool may_pair,
                                     const struct alloc_plan *plan, const struct share_id *first) {
        const struct assign_ctx *e = plan->why;
        if (plan->join[0])
                return share_book_find(s->book, plan->join);
        char name[SHARE_REC_NAME_MAX];
        int w = snprintf(name, sizeof name, "%s.%s-%u", gpu_id(s, first->gpu), share_kind_word(kind), first->n);
        for (unsigned k = 2; share_book_find(s->book, name) && k < 1000 && w > 0 && (size_t)w < sizeof name - 8; k++)
                snprintf(name + w, sizeof name - (size_t)w, ".%u", k);
        if (share_book_find(s->book, name))
                return NULL;
        struct share_rec *r = share_book_add(s->book, name);
        if (r) {
                enum plugin_kind ok = other_kind(kind);
                r->first = (uint8_t)kind;
                /* a container the assignment says asks only this resource waits for no partner */
                r->open = may_pair && plugin_resource(s->p, ok)[0] && !(e && !e->other_asked);
                r->deadline_ms = monotonic_ms() + SHARE_PAIR_WINDOW_MS;
                if (e)
                        strscpy(r->owner, e->owner, sizeof r->owner);
        }
        return r;
}

static void plan_to_state(struct share *s, enum plugin_kind kind, const struct share_id *ids, size_t n, uint64_t now) {
        const char *res = plugin_resource(s->p, kind);
        struct gpuslice_state *rec = plugin_record(s->p);
        for (size_t k = 0; k < n; k++) {
                struct state_alloc e = { .gpu_index = devices_info(s->dev, ids[k].gpu)->index, .alloc_time = now };
                strscpy(e.resource, res, sizeof e.resource);
                (void)share_format_id(gpu_id(s, ids[k].gpu), kind, ids[k].n, e.device_id, sizeof e.device_id);
                if (kind == PLUGIN_CORE)
                        e.core_percent = 1;
                else
                        e.memory_bytes = plugin_options(s->p)->memory_unit;
                (void)state_remove(rec, res, e.device_id);
                (void)state_add(rec, &e);
        }
}

static void pair_outcome(struct share *s, struct share_rec *r, bool guessed) {
        unsigned g = (unsigned)rec_gpu(r);
        r->open = false;
        r->guessed = guessed;
        /* its first half may be a container kubelet failed meanwhile, unless PodResources said otherwise */
        r->tentative = r->restored && !r->confirmed;
        r->deadline_ms = monotonic_ms() + SHARE_PAIR_WINDOW_MS;
        r->restored = r->confirmed = false;
        share_count("gpuslice_share_pairs_total", guessed ? "guessed" : "made");
        if (__builtin_popcountll(r->gpus) == 1)
                share_book_learn(s->book, share_rec_count(r, PLUGIN_CORE, g), share_rec_count(r, PLUGIN_MEMORY, g));
}

/* Record the grant (allocation record, the container's record, the journal — durable before
 * anything else happens), then write its limits dir and check the invariants. */
static enum rpc_code allocate_commit(struct share *s, enum plugin_kind kind, bool may_pair,
                                     const struct alloc_plan *plan, const char *what, char *ret_name,
                                     struct gs_error *st) {
        struct share_id *ids = calloc(SHARE_CORE_IDS * TOPO_MAX_GPUS + SHARE_MEM_IDS_MAX, sizeof *ids);
        if (!ids)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        size_t n = plan_ids(s, kind, plan, ids);
        release_ids(s, ids, n); /* kubelet handed them out again: their holder is gone */
        struct share_rec *r = n ? plan_record(s, kind, may_pair, plan, &ids[0]) : NULL;
        for (size_t k = 0; r && k < n; k++)
                if (share_rec_add_id(r, ids[k].gpu, kind, ids[k].n) < 0)
                        r = NULL;
        if (!r) {
                free(ids);
                return rpc_error(st, RPC_INTERNAL, "%s: cannot record the grant", what);
        }
        char name[SHARE_REC_NAME_MAX];
        strscpy(name, r->name, sizeof name);
        share_book_set_last(s->book, name);
        r->wall = (uint64_t)time(NULL);
        if (plan->join[0])
                pair_outcome(s, r, plan->guessed);
        plan_to_state(s, kind, ids, n, (uint64_t)time(NULL));
        free(ids);
        int e = journal_save(s);
        r = share_book_find(s->book, name);
        if (e < 0 || !r) {
                if (r)
                        r->open = false;
                return rpc_error(st, RPC_INTERNAL, "%s: cannot write the fractional journal: %s", what,
                                 strerror(e < 0 ? -e : ENOENT));
        }
        share_crash_point("allocate-journaled");
        struct gs_error err = { 0 };
        if (share_dir_write(s->p, r, !plan->join[0], &err) < 0)
                return rpc_error(st, RPC_INTERNAL, "%s: %s", what, err.message);
        share_crash_point("allocate-dir-written");
        (void)share_check(s->p, s->book, r);
        share_log_decision(s->p, "allocate", kind, rec_gpu(r), r->name,
                           plan->join[0] ? (plan->certain   ? "joined its partner (the scheduler's assignment)"
                                            : plan->guessed ? "joined its partner (guessed)"
                                                            : "joined its partner")
                           : r->open     ? "first half, waiting for its partner"
                           : plan->why   ? "single (the scheduler's assignment: one resource only)"
                                         : "single");
        strscpy(ret_name, r->name, SHARE_REC_NAME_MAX);
        return RPC_OK;
}

/* The answer: the GPU's devices, the interposer's environment, the limits dir's three mounts and the libraries
 * (limits_dir_libs: the interposer, and the NVML stand-in with the real NVML when the node has both). */
static enum rpc_code allocate_encode(struct share *s, const char *name, struct arena *a,
                                     V1beta1__ContainerAllocateResponse *out, struct gs_error *st) {
        const struct plugin_options *o = plugin_options(s->p);
        struct share_rec *r = share_book_find(s->book, name);
        if (!r)
                return rpc_error(st, RPC_INTERNAL, "record %s vanished", name);
        enum rpc_code c = plugin_fill_devices(s->p, a, r->gpus, 2, out, st);
        if (c != RPC_OK)
                return c;
        /* CDI: the GPU's <id>-shared device, which also brings the libraries (src/cdi, docs/runtime.md) */
        for (size_t j = 0; j < out->n_cdi_devices; j++)
                if (!(out->cdi_devices[j]->name = arena_printf(a, "%s-shared", out->cdi_devices[j]->name)))
                        return rpc_error(st, RPC_INTERNAL, "out of memory");
        struct limits_dir_libs libs;
        limits_dir_libs(o->interposer, o->nvml_standin, o->nvml_real, &libs);
        if (!add_env(out, a, "LD_PRELOAD", libs.preload) || !add_env(out, a, GS_LIMITS_ENV, SHARE_LIMITS_PATH))
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        char host[4400];
        out->mounts = arena_alloc(a, sizeof(void *) * (3 + ELEMENTSOF(libs.mount)));
        if (!out->mounts)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        snprintf(host, sizeof host, "%s/%s/%s", o->limits_root, r->name, SHARE_LIMITS_FILE);
        out->mounts[out->n_mounts++] = mount_msg(a, SHARE_LIMITS_PATH, host, true);
        snprintf(host, sizeof host, "%s/%s/%s", o->limits_root, r->name, SHARE_SHM_DIR);
        out->mounts[out->n_mounts++] = mount_msg(a, SHARE_SHM_PATH, host, false);
        for (unsigned i = 0; i < libs.n_mounts; i++)
                out->mounts[out->n_mounts++] = mount_msg(a, libs.mount[i].container, libs.mount[i].host, true);
        snprintf(host, sizeof host, "%s/%s/%s", o->limits_root, r->name, SHARE_PRELOAD_FILE);
        out->mounts[out->n_mounts++] = mount_msg(a, SHARE_LD_PRELOAD, host, true);
        for (size_t i = 0; i < out->n_mounts; i++)
                if (!out->mounts[i])
                        return rpc_error(st, RPC_INTERNAL, "out of memory");
        return RPC_OK;
}

/* Every container request is decoded before anything is recorded; then each is paired,
 * committed and encoded in turn. */
static enum rpc_code allocate_all(struct share_service *svc, const V1beta1__AllocateRequest *in,
                                  const struct assign_ctx *ax, struct arena *a, V1beta1__AllocateResponse *resp,
                                  struct gs_error *st) {
        struct share *s = svc->s;
        size_t n = in->n_container_requests;
        bool may_pair = n == 1; /* kubelet sends one container per call; only then may it pair */
        struct gpu_bits *all = calloc(DEVICES_MAX, sizeof *all);
        struct alloc_plan *plans = calloc(n ? n : 1, sizeof *plans);
        enum rpc_code c = all && plans ? RPC_OK : rpc_error(st, RPC_INTERNAL, "out of memory");
        char what[48];
        for (size_t k = 0; c == RPC_OK && k < n; k++) {
                snprintf(what, sizeof what, "container request %zu", k);
                c = allocate_decode(s, svc->kind, in->container_requests[k], what, all, &plans[k], st);
        }
        for (size_t k = 0; c == RPC_OK && k < n; k++) {
                char name[SHARE_REC_NAME_MAX] = "";
                snprintf(what, sizeof what, "container request %zu", k);
                c = allocate_pair(s, svc->kind, may_pair, &plans[k], ax, what, st);
                if (c == RPC_OK)
                        c = allocate_commit(s, svc->kind, may_pair, &plans[k], what, name, st);
                V1beta1__ContainerAllocateResponse *o = c == RPC_OK ? arena_alloc(a, sizeof *o) : NULL;
                if (c == RPC_OK && !o)
                        c = rpc_error(st, RPC_INTERNAL, "out of memory");
                if (c == RPC_OK) {
                        v1beta1__container_allocate_response__init(o);
                        resp->container_responses[resp->n_container_responses++] = o;
                        c = allocate_encode(s, name, a, o, st);
                }
        }
        free(all);
        free(plans);
        return c;
}

enum rpc_code share_allocate_decided(struct share_service *svc, const V1beta1__AllocateRequest *in,
                                     struct assign_ctx *ax, uint8_t **ret, size_t *ret_len, struct gs_error *st) {
        struct share *s = svc->s;
        struct arena a = { 0 };
        V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
        share_restart_confirm(s->p, s->book, s->journal, svc->kind, s->podres_sync, s->podres_userdata);
        devices_lock(s->dev);
        void **slots = NULL;
        enum rpc_code c = plugin_responses_new(in->n_container_requests, "AllocateRequest", &a, &slots, st);
        resp.container_responses = (void *)slots;
        if (c == RPC_OK)
                c = assign_call_check(ax, "container request 0", st);
        if (c == RPC_OK)
                c = allocate_all(svc, in, ax, &a, &resp, st);
        if (c == RPC_OK) {
                devices_touch(s->dev); /* the other kind's IDs of these GPUs change health */
                assign_call_commit(ax);
        } else {
                share_log_decision(s->p, "allocate", svc->kind, -1, NULL, st->message);
                partner_failed(s, svc->kind, st->message);
        }
        plugin_count(s->p, PLUGIN_CALL_ALLOCATE, c == RPC_OK);
        devices_unlock(s->dev);

        if (c == RPC_OK && rpc_pack(&resp.base, ret, ret_len) < 0)
                c = rpc_error(st, RPC_INTERNAL, "out of memory");
        arena_free(&a);
        return c;
}

enum rpc_code share_allocate(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                             struct gs_error *st) {
        struct share_service *svc = userdata;
        plugin_kubelet_called(svc->s->p);
        V1beta1__AllocateRequest *in = v1beta1__allocate_request__unpack(NULL, req_len, req);
        if (!in)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "cannot decode AllocateRequest");
        struct assign_ctx ax; /* the scheduler's assignment (assign.h) */
        plugin_assign_allocate(svc->s->p, svc->kind, in, &ax);
        enum rpc_code c = share_allocate_decided(svc, in, &ax, ret, ret_len, st);
        assign_call_end(&ax);
        v1beta1__allocate_request__free_unpacked(in, NULL);
        return c;
}

int share_serve(struct share *s, enum plugin_kind kind, struct rpc_server *srv) {
        struct share_service *svc = share_service(s, kind);
        int r;
        if ((r = plugin_serve_common(s->p, kind, srv)) < 0 ||
            (r = rpc_server_add_unary(srv, "/v1beta1.DevicePlugin/GetPreferredAllocation", share_get_preferred, svc)) <
                    0 ||
            (r = rpc_server_add_unary(srv, "/v1beta1.DevicePlugin/Allocate", share_allocate, svc)) < 0)
                return r;
        return 0;
}
