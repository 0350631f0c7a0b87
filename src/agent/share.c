/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share — the fractional GPU services of the node agent (see share.h, docs/sharing.md): the gRPC
 * handlers, each decode → pick → encode.
 *
 * Kubelet admits one pod at a time and, per container, asks resource by resource (GetPreferredAllocation,
 * then Allocate) in an undefined order. The first half's Allocate opens the container's record
 * (share-record.c); the other resource's GetPreferredAllocation is steered to that record's GPU
 * (alloc_pick_fraction, src/alloc/fraction.c) and its Allocate joins the record. Every decision is
 * in the journal before its answer leaves; a half that cannot join its partner's GPU is refused,
 * never split.
 *
 * Must never: index anything with an unchecked ID or count, leave the lock held on an error path,
 * or answer before the decision is durable.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/assign.h"
#include "agent/health.h"
#include "agent/plugin-internal.h"
#include "agent/plugin.h"
#include "agent/share-internal.h"
#include "agent/share.h"
#include "alloc/alloc.h"
#include "alloc/fraction.h"
#include "deviceplugin.pb-c.h"
#include "interposer/limits.h"
#include "util/util.h"

#define BITS_WORDS (SHARE_MEM_IDS_MAX / 64u) /* enough for core (100) and memory (1024) IDs */

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

static unsigned ids_on_gpu(const struct plugin *p, enum plugin_kind kind, unsigned g) {
        return kind == PLUGIN_CORE ? SHARE_CORE_IDS : kind == PLUGIN_MEMORY ? p->gpu[g].n_mem : 0;
}

static enum plugin_kind other_kind(enum plugin_kind kind) {
        return kind == PLUGIN_CORE ? PLUGIN_MEMORY : PLUGIN_CORE;
}

/* ---- IDs ---- */

int share_format_id(const char *uuid, enum plugin_kind kind, unsigned n, char *buf, size_t len) {
        if (kind != PLUGIN_CORE && kind != PLUGIN_MEMORY)
                return -EINVAL;
        int w = snprintf(buf, len, "%s::%s-%u", uuid, share_kind_word(kind), n);
        return w < 0 || (size_t)w >= len || (size_t)w >= SHARE_ID_MAX ? -ENAMETOOLONG : 0;
}

int share_parse_id(const struct plugin *p, const char *id, enum plugin_kind *ret_kind, unsigned *ret_gpu,
                   unsigned *ret_n) {
        if (!id || strlen(id) >= SHARE_ID_MAX)
                return -EINVAL;
        const char *sep = strstr(id, "::");
        if (!sep)
                return -EINVAL;
        size_t ulen = (size_t)(sep - id);
        int g = -1;
        for (unsigned i = 0; i < p->n; i++)
                if (strlen(p->gpu[i].id) == ulen && strncmp(p->gpu[i].id, id, ulen) == 0) {
                        g = (int)i;
                        break;
                }
        if (g < 0)
                return -EINVAL;
        const char *rest = sep + 2;
        enum plugin_kind kind;
        if (startswith(rest, "core-")) {
                kind = PLUGIN_CORE;
                rest += 5;
        } else if (startswith(rest, "mem-")) {
                kind = PLUGIN_MEMORY;
                rest += 4;
        } else
                return -EINVAL;
        unsigned n;
        unsigned max = ids_on_gpu(p, kind, (unsigned)g);
        if (max == 0 || parse_uint(rest, max - 1, &n) < 0)
                return -EINVAL;
        char canon[SHARE_ID_MAX];
        if (share_format_id(p->gpu[g].id, kind, n, canon, sizeof canon) < 0 || !streq(canon, id))
                return -EINVAL;
        *ret_kind = kind;
        *ret_gpu = (unsigned)g;
        *ret_n = n;
        return 0;
}

void share_usage(const struct plugin *p, struct share_usage *ret) {
        struct share_usage u = { 0 };
        for (size_t k = 0; k < p->state.n_allocs; k++) {
                const struct state_alloc *a = &p->state.allocs[k];
                if (streq(a->resource, p->opt.resource)) {
                        int i = plugin_find(p, a->device_id);
                        if (i >= 0)
                                u.whole |= UINT64_C(1) << i;
                        continue;
                }
                bool core = p->opt.core_resource[0] && streq(a->resource, p->opt.core_resource);
                bool mem = p->opt.memory_resource[0] && streq(a->resource, p->opt.memory_resource);
                if (!core && !mem)
                        continue;
                enum plugin_kind kind;
                unsigned g, n;
                if (share_parse_id(p, a->device_id, &kind, &g, &n) < 0 || kind != (core ? PLUGIN_CORE : PLUGIN_MEMORY))
                        continue;
                if (core)
                        u.core[g]++;
                else
                        u.mem[g]++;
                u.frac |= UINT64_C(1) << g;
        }
        *ret = u;
}

/* Parse a request's IDs of one kind into per-GPU bit sets. Duplicates and foreign IDs are refused;
 * with `usable`, so are IDs on unhealthy GPUs and on GPUs held whole. */
static enum rpc_code ids_to_bits(const struct plugin *p, enum plugin_kind kind, char **ids, size_t n, bool usable,
                                 const struct share_usage *u, const char *what, struct gpu_bits *bits,
                                 uint64_t *ret_gpus, struct gs_error *st) {
        uint64_t gpus = 0;
        for (size_t k = 0; k < n; k++) {
                const char *id = ids[k] ? ids[k] : "";
                enum plugin_kind kk;
                unsigned g, num;
                if (share_parse_id(p, id, &kk, &g, &num) < 0 || kk != kind)
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: unknown %s device ID \"%.96s\"", what,
                                         plugin_resource(p, kind), id);
                if (bit_test(&bits[g], num))
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: device ID %s given twice", what, id);
                if (usable && !p->gpu[g].healthy)
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: device %s is on unhealthy GPU %s (%s)", what,
                                         id, p->gpu[g].id, p->gpu[g].reason);
                if (usable && (u->whole & (UINT64_C(1) << g)))
                        return rpc_error(st, RPC_INVALID_ARGUMENT,
                                         "%s: device %s is on GPU %s, which is allocated whole (%s); fractions of "
                                         "it cannot be handed out",
                                         what, id, p->gpu[g].id, p->opt.resource);
                bit_set(&bits[g], num);
                gpus |= UINT64_C(1) << g;
        }
        *ret_gpus = gpus;
        return RPC_OK;
}

/* ---- whole GPUs through the core resource ---- */

static int topo_of(const struct plugin *p, unsigned i) {
        for (unsigned g = 0; g < p->topo.n_gpus; g++)
                if (streq(p->topo.gpu[g].uuid, p->gpu[i].id))
                        return (int)g;
        return -1;
}

/* Whole GPUs through the core resource (a multiple of 100): untouched GPUs, topology-aware. */
static enum rpc_code prefer_whole_cores(struct plugin *p, unsigned count, uint64_t cand, uint64_t must_gpus,
                                        const char *what, uint64_t *ret, struct gs_error *st) {
        struct alloc_request ar = { .count = count };
        for (unsigned i = 0; i < p->n; i++) {
                int g = topo_of(p, i);
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
        if (alloc_pick_gpus(&p->topo, &ar, &res, &err) < 0)
                return rpc_error(st, RPC_RESOURCE_EXHAUSTED, "%s: no %u whole GPUs: %.159s", what, count, err.message);
        uint64_t set = 0;
        for (unsigned j = 0; j < res.n; j++)
                for (unsigned i = 0; i < p->n; i++)
                        if (streq(p->topo.gpu[res.gpus[j]].uuid, p->gpu[i].id))
                                set |= UINT64_C(1) << i;
        *ret = set;
        return RPC_OK;
}

/* ---- pairing ---- */

/* The open record this call of `kind` may be the partner of. A record opened by the same kind is
 * closed first (the call is another container's), and so is one past its deadline. */
static struct share_rec *partner_for(struct plugin *p, enum plugin_kind kind, bool may_pair, uint64_t now) {
        struct share_rec *r = share_rec_open(p);
        if (!r)
                return NULL;
        if (!may_pair || r->first == kind) {
                share_rec_close(p, r, "single", "the next container asked for the same resource");
                return NULL;
        }
        if (now > r->deadline_ms) {
                share_rec_close(p, r, "expired", "no partner within the pairing window");
                return NULL;
        }
        return r;
}

/* A call that was this open record's partner failed: kubelet fails the container, nothing joins. */
static void partner_failed(struct plugin *p, enum plugin_kind kind, const char *why) {
        struct share_rec *r = share_rec_open(p);
        if (r && r->first != kind) {
                share_rec_close(p, r, "refused", why);
                (void)share_journal_save(p);
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
static bool rec_owner(struct plugin *p, const struct share_rec *r, char *buf, size_t len) {
        if (r->owner[0]) {
                strscpy(buf, r->owner, len);
                return true;
        }
        char dev[SHARE_ID_MAX];
        if (r->n_ids == 0 || share_format_id(p->gpu[r->ids[0].gpu].id, (enum plugin_kind)r->ids[0].kind, r->ids[0].n,
                                             dev, sizeof dev) < 0)
                return false;
        const struct state_alloc *a = state_find(&p->state, plugin_resource(p, (enum plugin_kind)r->ids[0].kind), dev);
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
static bool pair_evidence(struct plugin *p, enum plugin_kind kind, const struct assign_ctx *ax) {
        struct share_rec *r = share_rec_open(p);
        if (!r || r->first == kind)
                return false;
        const struct assign_ctx *e = call_evidence(ax);
        char owner[ASSIGN_OWNER_MAX], why[600];
        bool known = rec_owner(p, r, owner, sizeof owner);
        if (e && (!e->other_asked || !e->other_held)) {
                snprintf(why, sizeof why,
                         "the scheduler's assignment says this call is %.383s's %s (PodResources lists no other half "
                         "of it)",
                         e->owner, e->other_asked ? "first half" : "only fractional resource");
                share_rec_close(p, r, "single", why);
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
                share_rec_close(p, r, "single", why);
        }
        return false;
}

/* Before a call of `kind` may pair with a record restored from the journal, ask kubelet (PodResources)
 * whether it still holds that record's first half. The journal says which half was waiting when the
 * agent died, not whether kubelet then failed its container: the start-up sync may have listed it
 * before kubelet failed it, and a container kubelet fails is dropped from PodResources before the
 * next container's first call (kubelet frees the devices of inactive pods at the start of each
 * admission). Listed: this call is its partner (the join is not tentative). Not listed: its container
 * is gone, the record closes and this call is a first half. No answer: the pairing stays tentative
 * (reverse_stale_join). Takes p->lock itself; the PodResources call runs without it. */
static void confirm_restored(struct plugin *p, enum plugin_kind kind) {
        pthread_mutex_lock(&p->lock);
        struct share_rec *r = share_rec_open(p);
        bool ask = p->podres_sync && r && r->restored && !r->confirmed && r->first != kind;
        pthread_mutex_unlock(&p->lock);
        if (!ask)
                return;
        int e = p->podres_sync(p->podres_userdata);
        pthread_mutex_lock(&p->lock);
        r = share_rec_open(p);
        if (e == 0 && r && r->restored && !r->confirmed && r->first != kind) {
                if (share_rec_listed(p, r, (enum plugin_kind)r->first)) {
                        r->confirmed = true;
                        share_log_decision(p, "confirm", kind, rec_gpu(r), r->name,
                                           "PodResources lists its first half: this call is its partner");
                } else {
                        share_rec_close(p, r, "expired",
                                        "PodResources no longer lists its first half: kubelet failed its container "
                                        "while the agent was down");
                        (void)share_journal_save(p);
                }
        }
        pthread_mutex_unlock(&p->lock);
}

/* ---- GetPreferredAllocation: decode → alloc_pick_fraction → encode ---- */

/* Kubelet lists as available only IDs it does not hold, and it releases a container's devices
 * together: a record with any ID among them belongs to a container that is gone (or never
 * started), and all its IDs are free — except for the last record written, whose second half may
 * be the one a restart interrupted (only the listed IDs go there). Dropping them now rather than
 * at the next PodResources sync lets placement see what is really free. */
static bool id_in(const struct share_id *a, const struct share_id *b) {
        return a->gpu == b->gpu && a->kind == b->kind && a->n == b->n;
}

/* Drop ids[k] (keep[k] false) from record r, and from the allocation record unless another record
 * holds it too. */
static void rec_forget(struct plugin *p, struct share_rec *r, bool (*listed)(const struct share_id *, const void *),
                       const void *ctx) {
        struct share_book *b = share_book(p);
        size_t o = 0;
        for (size_t k = 0; k < r->n_ids; k++) {
                struct share_id id = r->ids[k];
                if (listed && !listed(&id, ctx)) {
                        r->ids[o++] = id;
                        continue;
                }
                bool elsewhere = false;
                for (size_t i = 0; i < b->n && !elsewhere; i++)
                        for (size_t j = 0; &b->rec[i] != r && j < b->rec[i].n_ids && !elsewhere; j++)
                                elsewhere = id_in(&b->rec[i].ids[j], &id);
                char dev[SHARE_ID_MAX];
                if (!elsewhere &&
                    share_format_id(p->gpu[id.gpu].id, (enum plugin_kind)id.kind, id.n, dev, sizeof dev) == 0)
                        (void)state_remove(&p->state, plugin_resource(p, (enum plugin_kind)id.kind), dev);
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
static bool release_available(struct plugin *p, enum plugin_kind kind, const struct gpu_bits *avail,
                              const struct gpu_bits *must) {
        struct share_book *b = share_book(p);
        struct avail_ctx ctx = { kind, avail, must };
        bool changed = false, last_lost_first = false;
        for (size_t i = 0; b && i < b->n;) {
                struct share_rec *r = &b->rec[i];
                bool any = false;
                for (size_t k = 0; k < r->n_ids && !any; k++)
                        any = is_available(&r->ids[k], &ctx);
                if (!any || r->open) {
                        i++;
                        continue;
                }
                changed = true;
                bool last = streq(r->name, b->last), had = r->has[r->first];
                rec_forget(p, r, last ? is_available : NULL, &ctx);
                share_rec_refresh(r);
                last_lost_first |= last && had && r->first == kind && !r->has[r->first];
                if (r->n_ids > 0) {
                        i++;
                        continue;
                }
                share_log_decision(p, "release", kind, -1, r->name, "kubelet no longer holds its IDs");
                share_rec_remove_dir(p, r);
                share_rec_remove(p, r);
        }
        if (changed)
                atomic_fetch_add(&p->generation, 1); /* whole GPUs may be free again */
        return last_lost_first;
}

/* A half that joined a record restored from the journal is tentative: if kubelet then lists the
 * record's first half as available (release_available dropped it), that half belonged to a
 * container kubelet failed while the agent was down, and the joined half is really the first half
 * of the container being admitted now. The record becomes its record, open for its other half, and
 * keeps its dir (the joined half's answer mounts it). */
static void reverse_stale_join(struct plugin *p, bool lost_first) {
        struct share_book *b = share_book(p);
        struct share_rec *r = b && b->last[0] ? share_rec_find(p, b->last) : NULL;
        if (r && r->tentative && health_now_ms() > r->deadline_ms)
                r->tentative = false; /* only the call right after the join can tell */
        if (!r || !r->tentative || !lost_first || r->has[r->first] || r->n_ids == 0)
                return;
        r->tentative = false;
        r->first = (uint8_t)other_kind((enum plugin_kind)r->first);
        r->open = true;
        r->guessed = false;
        r->deadline_ms = health_now_ms() + SHARE_PAIR_WINDOW_MS;
        share_count("gpuslice_share_pairs_total", "reversed");
        share_log_decision(p, "reverse", (enum plugin_kind)r->first, rec_gpu(r), r->name,
                           "the guessed partner was a container kubelet failed during the restart");
        struct gs_error err = { 0 };
        if (share_rec_write_dir(p, r, false, &err) < 0)
                share_log_decision(p, "reverse", (enum plugin_kind)r->first, rec_gpu(r), r->name, err.message);
}

struct prefer_in {
        unsigned size;
        struct gpu_bits avail[TOPO_MAX_GPUS], must[TOPO_MAX_GPUS];
        uint64_t avail_gpus, must_gpus;
        struct share_usage u;
};

static enum rpc_code prefer_decode(struct plugin *p, enum plugin_kind kind,
                                   const V1beta1__ContainerPreferredAllocationRequest *cr, const char *what,
                                   struct prefer_in *in, struct gs_error *st) {
        share_usage(p, &in->u);
        if (cr->allocation_size <= 0)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: allocation_size %" PRId32 " is not positive", what,
                                 cr->allocation_size);
        in->size = (unsigned)cr->allocation_size;
        enum rpc_code c = ids_to_bits(p, kind, cr->available_deviceids, cr->n_available_deviceids, false, &in->u, what,
                                      in->avail, &in->avail_gpus, st);
        if (c == RPC_OK)
                c = ids_to_bits(p, kind, cr->must_include_deviceids, cr->n_must_include_deviceids, true, &in->u, what,
                                in->must, &in->must_gpus, st);
        if (c != RPC_OK)
                return c;
        for (unsigned g = 0; g < p->n; g++)
                for (unsigned w = 0; w < BITS_WORDS; w++)
                        if (in->must[g].w[w] & ~in->avail[g].w[w])
                                return rpc_error(st, RPC_INVALID_ARGUMENT,
                                                 "%s: must_include_deviceIDs not all in available_deviceIDs", what);
        if (cr->n_must_include_deviceids > in->size)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: %zu must-include devices but allocation_size %u", what,
                                 cr->n_must_include_deviceids, in->size);
        return RPC_OK;
}

static bool gpu_usable(const struct plugin *p, const struct share_usage *u, unsigned g) {
        return p->gpu[g].healthy && !(u->whole & (UINT64_C(1) << g)) &&
               (p->explicit_gpu < 0 || (unsigned)p->explicit_gpu == g);
}

/* Whole GPUs through the core resource (a multiple of 100): untouched GPUs, topology-aware. */
static enum rpc_code prefer_whole(struct plugin *p, const struct prefer_in *in, const char *what, uint64_t *ret,
                                  struct gs_error *st) {
        if (in->size % SHARE_CORE_IDS)
                return rpc_error(st, RPC_INVALID_ARGUMENT,
                                 "%s: %u %s exceeds one GPU (100) and is not a multiple of 100: more than one GPU "
                                 "must be whole GPUs",
                                 what, in->size, p->opt.core_resource);
        uint64_t cand = 0;
        for (unsigned g = 0; g < p->n; g++)
                if (gpu_usable(p, &in->u, g) && bit_count(&in->avail[g]) == SHARE_CORE_IDS &&
                    !(in->u.frac & (UINT64_C(1) << g)))
                        cand |= UINT64_C(1) << g;
        if (in->must_gpus & ~cand)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: must-include IDs are on a GPU not wholly free", what);
        return prefer_whole_cores(p, in->size / SHARE_CORE_IDS, cand, in->must_gpus, what, ret, st);
}

static void frac_request_fill(struct plugin *p, enum plugin_kind kind, const struct prefer_in *in, int partner,
                              struct alloc_frac_request *q) {
        enum plugin_kind ok = other_kind(kind);
        *q = (struct alloc_frac_request){
                .kind = kind == PLUGIN_CORE ? ALLOC_FRAC_CORE : ALLOC_FRAC_MEM,
                .policy = p->opt.spread ? ALLOC_FRAC_SPREAD : ALLOC_FRAC_BINPACK,
                .size = in->size,
                .partner = partner,
                .pair = plugin_resource(p, ok)[0] != 0,
                .n = p->n,
        };
        if (partner < 0 && q->pair) {
                /* A size seen before: room for the largest partner it had, and refused when no GPU keeps
                 * the smallest. A size never seen: its partner may be anything, so keep a whole GPU's worth
                 * (an untouched GPU, by the policy), else the GPU keeping the most room: the guess most
                 * likely to let the partner follow. */
                q->expect = share_shape_expect(p, kind, in->size);
                q->need = share_shape_need(p, kind, in->size);
                unsigned whole = 0;
                for (unsigned g = 0; g < p->n; g++)
                        whole = MAX(whole, ok == PLUGIN_CORE ? SHARE_CORE_IDS : p->gpu[g].n_mem);
                if (q->expect == 0)
                        q->expect = whole;
        }
        uint64_t just_freed = partner < 0 && share_book(p) ? share_book(p)->just_freed : 0;
        for (unsigned g = 0; g < p->n; g++) {
                struct alloc_frac_gpu *x = &q->gpu[g];
                x->usable = gpu_usable(p, &in->u, g) && !(just_freed >> g & 1);
                x->must = (in->must_gpus >> g) & 1;
                x->total[ALLOC_FRAC_CORE] = p->opt.core_resource[0] ? SHARE_CORE_IDS : 0;
                x->total[ALLOC_FRAC_MEM] = p->opt.memory_resource[0] ? p->gpu[g].n_mem : 0;
                x->used[ALLOC_FRAC_CORE] = in->u.core[g];
                x->used[ALLOC_FRAC_MEM] = in->u.mem[g];
                x->avail = bit_count(&in->avail[g]);
        }
}

static enum rpc_code frac_error(struct plugin *p, enum plugin_kind kind, unsigned size, int r,
                                const struct alloc_frac_decision *d, const char *what, struct gs_error *st) {
        const char *res = plugin_resource(p, kind);
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
static enum rpc_code prefer_encode(struct plugin *p, enum plugin_kind kind, uint64_t chosen, const struct prefer_in *in,
                                   const V1beta1__ContainerPreferredAllocationRequest *cr, struct arena *a,
                                   V1beta1__ContainerPreferredAllocationResponse *out, const char *what,
                                   struct gs_error *st) {
        out->deviceids = arena_alloc(a, sizeof(char *) * (in->size + 1));
        if (!out->deviceids)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        for (size_t j = 0; j < cr->n_must_include_deviceids; j++)
                out->deviceids[out->n_deviceids++] = arena_printf(a, "%s", cr->must_include_deviceids[j]);
        for (unsigned g = 0; g < p->n && out->n_deviceids < in->size; g++) {
                if (!(chosen & (UINT64_C(1) << g)))
                        continue;
                unsigned max = ids_on_gpu(p, kind, g);
                for (unsigned n = 0; n < max && out->n_deviceids < in->size; n++) {
                        if (!bit_test(&in->avail[g], n) || bit_test(&in->must[g], n))
                                continue;
                        char id[SHARE_ID_MAX];
                        if (share_format_id(p->gpu[g].id, kind, n, id, sizeof id) < 0)
                                return rpc_error(st, RPC_INTERNAL, "device ID too long");
                        out->deviceids[out->n_deviceids++] = arena_printf(a, "%s", id);
                }
        }
        if (out->n_deviceids != in->size || a->failed)
                return rpc_error(st, RPC_INTERNAL, "%s: could not fill %u IDs", what, in->size);
        return RPC_OK;
}

/* Remember the proposal (journal) before it leaves: the Allocate that follows it is "made". */
static void prefer_record(struct plugin *p, enum plugin_kind kind, unsigned size, int gpu, const struct share_rec *r,
                          const char *reason) {
        struct share_book *b = share_book(p);
        if (b) {
                b->prop = (struct share_proposal){ .set = true, .kind = (uint8_t)kind, .gpu = gpu, .size = size };
                if (r)
                        strscpy(b->prop.rec, r->name, sizeof b->prop.rec);
        }
        share_log_decision(p, "preferred", kind, gpu, r ? r->name : NULL, reason);
        (void)share_journal_save(p);
        share_crash_point("preferred-journaled");
}

static void learn_refused(struct plugin *p, const struct share_rec *partner, enum plugin_kind kind, unsigned size) {
        unsigned g = (unsigned)rec_gpu(partner);
        if (kind == PLUGIN_CORE)
                share_shape_learn(p, size, share_rec_count(partner, PLUGIN_MEMORY, g));
        else
                share_shape_learn(p, share_rec_count(partner, PLUGIN_CORE, g), size);
}

static enum rpc_code prefer_one(struct plugin_service *svc, const V1beta1__ContainerPreferredAllocationRequest *cr,
                                unsigned k, bool may_pair, struct arena *a,
                                V1beta1__ContainerPreferredAllocationResponse *out, struct gs_error *st) {
        struct plugin *p = svc->p;
        enum plugin_kind kind = svc->kind;
        char what[48];
        struct prefer_in *in = calloc(1, sizeof *in);
        uint64_t chosen = 0;
        if (!in)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        snprintf(what, sizeof what, "container request %u", k);
        enum rpc_code c = prefer_decode(p, kind, cr, what, in, st);
        if (c == RPC_OK) {
                reverse_stale_join(p, release_available(p, kind, in->avail, in->must));
                share_usage(p, &in->u);
        }
        if (c == RPC_OK && may_pair)
                (void)pair_evidence(p, kind, p->call_assign);
        struct share_rec *partner = c == RPC_OK ? partner_for(p, kind, may_pair, health_now_ms()) : NULL;
        if (c == RPC_OK && kind == PLUGIN_CORE && in->size > SHARE_CORE_IDS && !partner) {
                c = prefer_whole(p, in, what, &chosen, st);
                if (c == RPC_OK)
                        prefer_record(p, kind, in->size, __builtin_ctzll(chosen), NULL, "whole GPUs");
        } else if (c == RPC_OK) {
                struct alloc_frac_request q;
                struct alloc_frac_decision d;
                frac_request_fill(p, kind, in, rec_gpu(partner), &q);
                const struct assign_ctx *e = call_evidence(p->call_assign);
                if (e && !e->other_asked)
                        q.pair = false; /* one resource only (the pod's spec): no partner to keep room for */
                int r = alloc_pick_fraction(&q, &d);
                if (r < 0) {
                        if (partner) /* the partner's size is known now: the next container of this shape fits */
                                learn_refused(p, partner, kind, in->size);
                        if (r == -ENOSPC && !partner && share_book(p)) {
                                share_book(p)->no_room = true;
                                share_book(p)->no_room_partner = d.reason == ALLOC_FRAC_NO_ROOM;
                        }
                        c = frac_error(p, kind, in->size, r, &d, what, st);
                } else {
                        chosen = UINT64_C(1) << d.gpu;
                        prefer_record(p, kind, in->size, d.gpu, partner, d.why);
                }
        }
        if (c == RPC_OK)
                c = prefer_encode(p, kind, chosen, in, cr, a, out, what, st);
        if (c != RPC_OK) {
                share_log_decision(p, "preferred", kind, -1, partner ? partner->name : NULL, st->message);
                partner_failed(p, kind, st->message);
        }
        free(in);
        return c;
}
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
static enum rpc_code check_shape(const struct plugin *p, enum plugin_kind kind, const struct gpu_bits *bits,
                                 uint64_t gpus, const char *what, struct gs_error *st) {
        const char *res = plugin_resource(p, kind);
        unsigned total = 0, ngpus = (unsigned)__builtin_popcountll(gpus);
        for (unsigned g = 0; g < p->n; g++)
                total += bit_count(&bits[g]);
        if (kind == PLUGIN_CORE && total > SHARE_CORE_IDS) {
                if (total % SHARE_CORE_IDS)
                        return rpc_error(st, RPC_INVALID_ARGUMENT,
                                         "%s: %u %s exceeds one GPU (100) and is not a multiple of 100; more than "
                                         "one GPU must be whole GPUs",
                                         what, total, res);
                for (unsigned g = 0; g < p->n; g++)
                        if ((gpus & (UINT64_C(1) << g)) && bit_count(&bits[g]) != SHARE_CORE_IDS)
                                return rpc_error(st, RPC_INVALID_ARGUMENT,
                                                 "%s: %u %s must be %u whole GPUs, but GPU %s gives %u of 100", what,
                                                 total, res, total / SHARE_CORE_IDS, p->gpu[g].id, bit_count(&bits[g]));
                return RPC_OK;
        }
        if (ngpus > 1) {
                char list[256] = "";
                size_t len = 0;
                for (unsigned g = 0; g < p->n && len < sizeof list - 1; g++)
                        if (gpus & (UINT64_C(1) << g)) {
                                int w = snprintf(list + len, sizeof list - len, "%s%s: %u", len ? ", " : "",
                                                 p->gpu[g].id, bit_count(&bits[g]));
                                len = w < 0 ? len : MIN(len + (size_t)w, sizeof list - 1);
                        }
                unsigned largest = 0;
                for (unsigned g = 0; g < p->n; g++)
                        largest = MAX(largest, ids_on_gpu(p, kind, g));
                if (total > largest)
                        return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: %u %s exceeds one GPU (%u at most) (%s)", what,
                                         total, res, largest, list);
                return rpc_error(st, RPC_INVALID_ARGUMENT,
                                 "%s: %s IDs span %u GPUs (%s); one container's share must come from one GPU", what,
                                 res, ngpus, list);
        }
        return RPC_OK;
}

static enum rpc_code prefer_share(void *ctx, const V1beta1__ContainerPreferredAllocationRequest *cr, unsigned k,
                                  struct arena *a, V1beta1__ContainerPreferredAllocationResponse *out,
                                  struct gs_error *st) {
        /* kubelet sends one container per call; only the first of several may be a partner */
        return prefer_one(ctx, cr, k, k == 0, a, out, st);
}

enum rpc_code share_get_preferred(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                                  struct gs_error *st) {
        struct plugin_service *svc = userdata;
        struct plugin *p = svc->p;
        plugin_kubelet_called(p);
        confirm_restored(p, svc->kind);
        pthread_mutex_lock(&p->lock);
        if (share_book(p))
                share_book(p)->no_room = share_book(p)->no_room_partner = false;
        pthread_mutex_unlock(&p->lock);
        enum rpc_code c = plugin_preferred_each(p, svc->kind, req, req_len, prefer_share, svc, ret, ret_len, st);
        pthread_mutex_lock(&p->lock);
        bool again = c == RPC_RESOURCE_EXHAUSTED && p->podres_sync && share_book(p) && share_book(p)->no_room;
        struct share_usage before;
        share_usage(p, &before);
        pthread_mutex_unlock(&p->lock);
        /* A first half refused for room: the room counted may be of containers kubelet no longer
         * holds (failed while the agent was down, not yet dropped by a sync). Refuse only on what
         * PodResources says now: reconcile and decide once more. A GPU that was held whole until
         * now is not offered to this first half: kubelet's list of the other resource still marks
         * its IDs Unhealthy until our ListAndWatch reaches it, and the partner would be refused. */
        if (again && p->podres_sync(p->podres_userdata) == 0) {
                share_log_decision(p, "preferred", svc->kind, -1, NULL, "refused for room: asked PodResources, again");
                pthread_mutex_lock(&p->lock);
                share_book(p)->just_freed = before.whole;
                pthread_mutex_unlock(&p->lock);
                c = plugin_preferred_each(p, svc->kind, req, req_len, prefer_share, svc, ret, ret_len, st);
                pthread_mutex_lock(&p->lock);
                share_book(p)->just_freed = 0;
                pthread_mutex_unlock(&p->lock);
        }
        pthread_mutex_lock(&p->lock);
        if (c == RPC_RESOURCE_EXHAUSTED && share_book(p) && share_book(p)->no_room && share_book(p)->no_room_partner)
                share_count("gpuslice_share_pairs_total", "no-room"); /* refused before its partner, once */
        pthread_mutex_unlock(&p->lock);
        return c;
}

/* ---- Allocate: decode → pair → commit (journal, dir) → encode ---- */

struct alloc_plan {
        struct gpu_bits bits[TOPO_MAX_GPUS];
        uint64_t gpus;
        char join[128]; /* the open record this half joins, "" = a new record */
        bool guessed;
        bool certain;                 /* the assignment says this half is the record's partner */
        const struct assign_ctx *why; /* the assignment's evidence of this call, NULL none */
};

/* IDs parsed, on healthy GPUs not held whole, in no earlier container of the message, of an
 * accepted shape, on the scheduler's GPU, and the interposer present. */
static enum rpc_code allocate_decode(struct plugin *p, enum plugin_kind kind,
                                     const V1beta1__ContainerAllocateRequest *cr, const char *what,
                                     struct gpu_bits *all, struct alloc_plan *plan, struct gs_error *st) {
        struct share_usage u;
        if (cr->n_devices_ids == 0)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: no device IDs", what);
        share_usage(p, &u);
        enum rpc_code c =
                ids_to_bits(p, kind, cr->devices_ids, cr->n_devices_ids, true, &u, what, plan->bits, &plan->gpus, st);
        if (c != RPC_OK)
                return c;
        for (unsigned g = 0; g < p->n; g++)
                for (unsigned w = 0; w < BITS_WORDS; w++) {
                        if (all[g].w[w] & plan->bits[g].w[w])
                                return rpc_error(st, RPC_INVALID_ARGUMENT,
                                                 "%s: a device is also requested by another container", what);
                        all[g].w[w] |= plan->bits[g].w[w];
                }
        c = check_shape(p, kind, plan->bits, plan->gpus, what, st);
        if (c != RPC_OK)
                return c;
        if (p->explicit_gpu >= 0 && plan->gpus != UINT64_C(1) << p->explicit_gpu)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "%s: the scheduler placed this container on GPU %s", what,
                                 p->gpu[p->explicit_gpu].id);
        struct stat lib;
        if (stat(p->opt.interposer, &lib) < 0 || !S_ISREG(lib.st_mode))
                return rpc_error(st, RPC_FAILED_PRECONDITION,
                                 "%s: the CUDA interposer %s is missing on the node (sharing.interposer)", what,
                                 p->opt.interposer);
        return RPC_OK;
}

/* Join the open record of the other resource, or start a new one; a half on another GPU than its
 * partner is refused (kubelet fails the container), never split. */
static enum rpc_code allocate_pair(struct plugin *p, enum plugin_kind kind, bool may_pair, struct alloc_plan *plan,
                                   const struct assign_ctx *ax, const char *what, struct gs_error *st) {
        plan->why = may_pair ? call_evidence(ax) : NULL;
        plan->certain = may_pair && pair_evidence(p, kind, ax);
        struct share_rec *r = partner_for(p, kind, may_pair, health_now_ms());
        if (!r)
                return RPC_OK;
        bool same = kind == PLUGIN_MEMORY ? (plan->gpus & ~r->gpus) == 0
                                          : (r->gpus & ~plan->gpus) == 0; /* core may be whole GPUs */
        if (!same) {
                int g = rec_gpu(r);
                rpc_error(st, RPC_INVALID_ARGUMENT,
                          "%s: %s IDs are on another GPU than this container's %s (on %s, allocated just before); one "
                          "container's core and memory must be on one GPU",
                          what, plugin_resource(p, kind), plugin_resource(p, (enum plugin_kind)r->first),
                          g >= 0 ? p->gpu[g].id : "?");
                return RPC_INVALID_ARGUMENT; /* partner_failed closes the record */
        }
        const struct share_proposal *q = &share_book(p)->prop;
        plan->guessed = !plan->certain && !(q->set && q->kind == kind && streq(q->rec, r->name) && q->gpu >= 0 &&
                                            plan->gpus == UINT64_C(1) << q->gpu);
        if (plan->certain)
                r->confirmed = true; /* restored or not, the assignment says whose it is: not tentative */
        strscpy(plan->join, r->name, sizeof plan->join);
        return RPC_OK;
}

static size_t plan_ids(const struct plugin *p, enum plugin_kind kind, const struct alloc_plan *plan,
                       struct share_id *ids) {
        size_t n = 0;
        for (unsigned g = 0; g < p->n; g++)
                for (unsigned i = 0; (plan->gpus >> g & 1) && i < ids_on_gpu(p, kind, g); i++)
                        if (bit_test(&plan->bits[g], i))
                                ids[n++] =
                                        (struct share_id){ .gpu = (uint8_t)g, .kind = (uint8_t)kind, .n = (uint16_t)i };
        return n;
}

/* The record this Allocate writes: the one it joins, or a new one named after its first ID (a
 * suffix when a record of that name still holds IDs: a record keeps the name of its first ID even
 * when that ID went back to kubelet). */
static struct share_rec *plan_record(struct plugin *p, enum plugin_kind kind, bool may_pair,
                                     const struct alloc_plan *plan, const struct share_id *first) {
        const struct assign_ctx *e = plan->why;
        if (plan->join[0])
                return share_rec_find(p, plan->join);
        char name[128];
        int w = snprintf(name, sizeof name, "%s.%s-%u", p->gpu[first->gpu].id, share_kind_word(kind), first->n);
        for (unsigned k = 2; share_rec_find(p, name) && k < 1000 && w > 0 && (size_t)w < sizeof name - 8; k++)
                snprintf(name + w, sizeof name - (size_t)w, ".%u", k);
        if (share_rec_find(p, name))
                return NULL;
        struct share_rec *r = share_rec_add(p, name);
        if (r) {
                enum plugin_kind ok = other_kind(kind);
                r->first = (uint8_t)kind;
                /* a container the assignment says asks only this resource waits for no partner */
                r->open = may_pair && plugin_resource(p, ok)[0] && !(e && !e->other_asked);
                r->deadline_ms = health_now_ms() + SHARE_PAIR_WINDOW_MS;
                if (e)
                        strscpy(r->owner, e->owner, sizeof r->owner);
        }
        return r;
}

static void plan_to_state(struct plugin *p, enum plugin_kind kind, const struct share_id *ids, size_t n, uint64_t now) {
        const char *res = plugin_resource(p, kind);
        for (size_t k = 0; k < n; k++) {
                struct state_alloc e = { .gpu_index = p->gpu[ids[k].gpu].index, .alloc_time = now };
                strscpy(e.resource, res, sizeof e.resource);
                (void)share_format_id(p->gpu[ids[k].gpu].id, kind, ids[k].n, e.device_id, sizeof e.device_id);
                if (kind == PLUGIN_CORE)
                        e.core_percent = 1;
                else
                        e.memory_bytes = p->opt.memory_unit;
                (void)state_remove(&p->state, res, e.device_id);
                (void)state_add(&p->state, &e);
        }
}

static void pair_outcome(struct plugin *p, struct share_rec *r, bool guessed) {
        unsigned g = (unsigned)rec_gpu(r);
        r->open = false;
        r->guessed = guessed;
        /* its first half may be a container kubelet failed meanwhile, unless PodResources said otherwise */
        r->tentative = r->restored && !r->confirmed;
        r->deadline_ms = health_now_ms() + SHARE_PAIR_WINDOW_MS;
        r->restored = r->confirmed = false;
        share_count("gpuslice_share_pairs_total", guessed ? "guessed" : "made");
        if (__builtin_popcountll(r->gpus) == 1)
                share_shape_learn(p, share_rec_count(r, PLUGIN_CORE, g), share_rec_count(r, PLUGIN_MEMORY, g));
}

/* Record the grant (allocation record, the container's record, the journal — durable before
 * anything else happens), then write its limits dir and check the invariants. */
static enum rpc_code allocate_commit(struct plugin *p, enum plugin_kind kind, bool may_pair,
                                     const struct alloc_plan *plan, const char *what, char *ret_name,
                                     struct gs_error *st) {
        struct share_id *ids = calloc(SHARE_CORE_IDS * TOPO_MAX_GPUS + SHARE_MEM_IDS_MAX, sizeof *ids);
        if (!ids)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        size_t n = plan_ids(p, kind, plan, ids);
        share_rec_release_ids(p, NULL, ids, n); /* kubelet handed them out again: their holder is gone */
        struct share_rec *r = n ? plan_record(p, kind, may_pair, plan, &ids[0]) : NULL;
        for (size_t k = 0; r && k < n; k++)
                if (share_rec_add_id(r, ids[k].gpu, kind, ids[k].n) < 0)
                        r = NULL;
        if (!r) {
                free(ids);
                return rpc_error(st, RPC_INTERNAL, "%s: cannot record the grant", what);
        }
        char name[128];
        strscpy(name, r->name, sizeof name);
        strscpy(share_book(p)->last, name, sizeof share_book(p)->last);
        r->wall = (uint64_t)time(NULL);
        if (plan->join[0])
                pair_outcome(p, r, plan->guessed);
        plan_to_state(p, kind, ids, n, (uint64_t)time(NULL));
        free(ids);
        int e = share_journal_save(p);
        r = share_rec_find(p, name);
        if (e < 0 || !r) {
                if (r)
                        r->open = false;
                return rpc_error(st, RPC_INTERNAL, "%s: cannot write the fractional journal: %s", what,
                                 strerror(e < 0 ? -e : ENOENT));
        }
        share_crash_point("allocate-journaled");
        struct gs_error err = { 0 };
        if (share_rec_write_dir(p, r, !plan->join[0], &err) < 0)
                return rpc_error(st, RPC_INTERNAL, "%s: %s", what, err.message);
        share_crash_point("allocate-dir-written");
        (void)share_check(p, r);
        share_log_decision(p, "allocate", kind, rec_gpu(r), r->name,
                           plan->join[0] ? (plan->certain   ? "joined its partner (the scheduler's assignment)"
                                            : plan->guessed ? "joined its partner (guessed)"
                                                            : "joined its partner")
                           : r->open     ? "first half, waiting for its partner"
                           : plan->why   ? "single (the scheduler's assignment: one resource only)"
                                         : "single");
        strscpy(ret_name, r->name, 128);
        return RPC_OK;
}

/* The answer: the GPU's devices, the interposer's environment and the three mounts. */
static enum rpc_code allocate_encode(struct plugin *p, const char *name, struct arena *a,
                                     V1beta1__ContainerAllocateResponse *out, struct gs_error *st) {
        struct share_rec *r = share_rec_find(p, name);
        if (!r)
                return rpc_error(st, RPC_INTERNAL, "record %s vanished", name);
        enum rpc_code c = plugin_fill_devices(p, a, r->gpus, 2, out, st);
        if (c != RPC_OK)
                return c;
        /* CDI: the GPU's <id>-shared device, which also brings the interposer (src/cdi, docs/runtime.md) */
        for (size_t j = 0; j < out->n_cdi_devices; j++)
                if (!(out->cdi_devices[j]->name = arena_printf(a, "%s-shared", out->cdi_devices[j]->name)))
                        return rpc_error(st, RPC_INTERNAL, "out of memory");
        if (!add_env(out, a, "LD_PRELOAD", SHARE_LIB_PATH) || !add_env(out, a, GS_LIMITS_ENV, SHARE_LIMITS_PATH))
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        char host[4400];
        out->mounts = arena_alloc(a, sizeof(void *) * 4);
        if (!out->mounts)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        snprintf(host, sizeof host, "%s/%s/%s", p->opt.limits_root, r->name, SHARE_LIMITS_FILE);
        out->mounts[out->n_mounts++] = mount_msg(a, SHARE_LIMITS_PATH, host, true);
        snprintf(host, sizeof host, "%s/%s/%s", p->opt.limits_root, r->name, SHARE_SHM_DIR);
        out->mounts[out->n_mounts++] = mount_msg(a, SHARE_SHM_PATH, host, false);
        out->mounts[out->n_mounts++] = mount_msg(a, SHARE_LIB_PATH, p->opt.interposer, true);
        snprintf(host, sizeof host, "%s/%s/%s", p->opt.limits_root, r->name, SHARE_PRELOAD_FILE);
        out->mounts[out->n_mounts++] = mount_msg(a, SHARE_LD_PRELOAD, host, true);
        if (!out->mounts[0] || !out->mounts[1] || !out->mounts[2] || !out->mounts[3])
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        return RPC_OK;
}

/* Every container request is decoded before anything is recorded; then each is paired,
 * committed and encoded in turn. */
static enum rpc_code allocate_all(struct plugin_service *svc, const V1beta1__AllocateRequest *in,
                                  const struct assign_ctx *ax, struct arena *a, V1beta1__AllocateResponse *resp,
                                  struct gs_error *st) {
        struct plugin *p = svc->p;
        size_t n = in->n_container_requests;
        bool may_pair = n == 1; /* kubelet sends one container per call; only then may it pair */
        struct gpu_bits *all = calloc(TOPO_MAX_GPUS, sizeof *all);
        struct alloc_plan *plans = calloc(n ? n : 1, sizeof *plans);
        enum rpc_code c = all && plans ? RPC_OK : rpc_error(st, RPC_INTERNAL, "out of memory");
        char what[48];
        for (size_t k = 0; c == RPC_OK && k < n; k++) {
                snprintf(what, sizeof what, "container request %zu", k);
                c = allocate_decode(p, svc->kind, in->container_requests[k], what, all, &plans[k], st);
        }
        for (size_t k = 0; c == RPC_OK && k < n; k++) {
                char name[128] = "";
                snprintf(what, sizeof what, "container request %zu", k);
                c = allocate_pair(p, svc->kind, may_pair, &plans[k], ax, what, st);
                if (c == RPC_OK)
                        c = allocate_commit(p, svc->kind, may_pair, &plans[k], what, name, st);
                V1beta1__ContainerAllocateResponse *o = c == RPC_OK ? arena_alloc(a, sizeof *o) : NULL;
                if (c == RPC_OK && !o)
                        c = rpc_error(st, RPC_INTERNAL, "out of memory");
                if (c == RPC_OK) {
                        v1beta1__container_allocate_response__init(o);
                        resp->container_responses[resp->n_container_responses++] = o;
                        c = allocate_encode(p, name, a, o, st);
                }
        }
        free(all);
        free(plans);
        return c;
}

enum rpc_code share_allocate(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                             struct gs_error *st) {
        struct plugin_service *svc = userdata;
        struct plugin *p = svc->p;
        struct arena a = { 0 };
        plugin_kubelet_called(p);

        V1beta1__AllocateRequest *in = v1beta1__allocate_request__unpack(NULL, req_len, req);
        if (!in)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "cannot decode AllocateRequest");
        V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
        struct assign_ctx ax; /* the scheduler's assignment (assign.h) */
        const V1beta1__ContainerAllocateRequest *cr0 = in->n_container_requests == 1 ? in->container_requests[0] : NULL;
        assign_call_begin(&ax, p, svc->kind, true, cr0 ? (unsigned)cr0->n_devices_ids : 0,
                          cr0 ? cr0->devices_ids : NULL, cr0 ? cr0->n_devices_ids : 0);

        confirm_restored(p, svc->kind);
        pthread_mutex_lock(&p->lock);
        p->n_allocate++;
        void **slots = NULL;
        enum rpc_code c = plugin_responses_new(in->n_container_requests, "AllocateRequest", &a, &slots, st);
        resp.container_responses = (void *)slots;
        if (c == RPC_OK)
                c = assign_call_check(&ax, p, "container request 0", st);
        if (c == RPC_OK)
                c = allocate_all(svc, in, &ax, &a, &resp, st);
        if (c == RPC_OK) {
                atomic_fetch_add(&p->generation, 1); /* the other kind's IDs of these GPUs change health */
                assign_call_commit(&ax);
        } else {
                p->n_errors++;
                share_log_decision(p, "allocate", svc->kind, -1, NULL, st->message);
                partner_failed(p, svc->kind, st->message);
        }
        pthread_mutex_unlock(&p->lock);

        if (c == RPC_OK && rpc_pack(&resp.base, ret, ret_len) < 0)
                c = rpc_error(st, RPC_INTERNAL, "out of memory");
        arena_free(&a);
        assign_call_end(&ax);
        v1beta1__allocate_request__free_unpacked(in, NULL);
        return c;
}

/* ---- state upkeep ---- */

size_t share_fixup_state(struct plugin *p) {
        size_t fixed = 0;
        for (size_t k = 0; k < p->state.n_allocs; k++) {
                struct state_alloc *a = &p->state.allocs[k];
                bool core = p->opt.core_resource[0] && streq(a->resource, p->opt.core_resource);
                bool mem = p->opt.memory_resource[0] && streq(a->resource, p->opt.memory_resource);
                enum plugin_kind kind;
                unsigned g, n;
                if ((!core && !mem) || a->gpu_index >= 0 || share_parse_id(p, a->device_id, &kind, &g, &n) < 0)
                        continue;
                a->gpu_index = p->gpu[g].index;
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

void share_note_whole(struct plugin *p) {
        share_rec_close(p, share_rec_open(p), "single", "a whole-GPU Allocate came next");
}

int share_set_explicit_gpu(struct plugin *p, const char *uuid) {
        if (!uuid) {
                p->explicit_gpu = -1;
                return 0;
        }
        int i = plugin_find(p, uuid);
        if (i < 0)
                return -ENOENT;
        p->explicit_gpu = i;
        return 0;
}
