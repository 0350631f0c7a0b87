/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share-restart — the fractional path across an agent restart (share-internal.h, docs/sharing.md
 * "Crash safety"): the journal read back into the book and the allocation record at start, every
 * live limits dir rewritten from it; the first PodResources reconcile after that deciding what became
 * of the container kubelet was admitting when the agent died; a record restored open confirmed with
 * kubelet before a call pairs with it; a join of a restored record reversed when its first half
 * turns out to be gone.
 * Must never: keep a grant kubelet does not hold after the first reconcile, or pair a call with a
 * container kubelet failed while the agent was down when PodResources can tell.
 */
#include <string.h>

#include "agent/share-internal.h"
#include "agent/share.h"
#include "state/state.h"
#include "util/log.h"
#include "util/util.h"

static enum plugin_kind other_kind(enum plugin_kind kind) {
        return kind == PLUGIN_CORE ? PLUGIN_MEMORY : PLUGIN_CORE;
}

/* The lowest GPU of a record (its only one but for whole GPUs through the core resource). */
static int rec_gpu(const struct share_rec *r) {
        return r && r->gpus ? __builtin_ctzll(r->gpus) : -1;
}

/* The device ID of one of a record's IDs. */
static int id_text(const struct plugin *p, const struct share_id *id, char *buf, size_t len) {
        return share_format_id(devices_info(plugin_devices(p), id->gpu)->id, (enum plugin_kind)id->kind, id->n, buf,
                               len);
}

/* A restored record's IDs back in the allocation record (the state file may be older). */
static void rec_to_state(struct plugin *p, const struct share_rec *r) {
        struct gpuslice_state *s = plugin_record(p);
        for (size_t k = 0; k < r->n_ids; k++) {
                const struct share_id *id = &r->ids[k];
                struct state_alloc e = { .gpu_index = devices_info(plugin_devices(p), id->gpu)->index,
                                         .alloc_time = r->wall };
                strscpy(e.resource, plugin_resource(p, (enum plugin_kind)id->kind), sizeof e.resource);
                if (id_text(p, id, e.device_id, sizeof e.device_id) < 0 || state_find(s, e.resource, e.device_id))
                        continue;
                if (id->kind == PLUGIN_CORE)
                        e.core_percent = 1;
                else
                        e.memory_bytes = plugin_options(p)->memory_unit;
                (void)state_add(s, &e);
        }
}

int share_restart_restore(struct plugin *p, struct share_book *b, struct share_journal *j) {
        struct devices *d = plugin_devices(p);
        int r = share_journal_load(j, d, b);
        if (r < 0)
                return r;
        uint64_t now = monotonic_ms();
        unsigned open = 0;
        for (size_t i = 0; i < share_book_count(b); i++) {
                struct share_rec *rec = share_book_at(b, i);
                rec_to_state(p, rec);
                if (rec->open && open++ == 0) {
                        rec->deadline_ms = now + SHARE_PAIR_RESTART_MS; /* its partner may still come */
                        rec->restored = true;
                } else
                        rec->open = false;
                if (rec->tentative) /* the call after its join may still come and reverse it */
                        rec->deadline_ms = now + SHARE_PAIR_RESTART_MS;
                struct gs_error err = { 0 };
                if (share_dir_write(p, rec, false, &err) < 0)
                        log_warn("cannot rewrite a limits dir from the journal", "container=%s error=\"%s\"", rec->name,
                                 err.message);
        }
        devices_touch(d);
        (void)share_check(p, b, NULL);
        (void)share_journal_save(j, d, b); /* the log folded into a snapshot; a torn last line dropped */
        return (int)share_book_count(b);
}

/* Is this ID of the record held by kubelet (listed by PodResources)? */
static bool id_listed(struct plugin *p, const struct share_id *id) {
        char dev[SHARE_ID_MAX];
        if (id_text(p, id, dev, sizeof dev) < 0)
                return false;
        const struct state_alloc *a = state_find(plugin_record(p), plugin_resource(p, (enum plugin_kind)id->kind), dev);
        return a && a->seen;
}

bool share_rec_listed(struct plugin *p, const struct share_rec *r, enum plugin_kind kind) {
        for (size_t k = 0; k < r->n_ids; k++)
                if (r->ids[k].kind == kind)
                        return id_listed(p, &r->ids[k]);
        return false;
}

/* The second half never reached kubelet: back to the first half alone, open for it again. */
static void rec_reopen(struct plugin *p, struct share_rec *r) {
        enum plugin_kind second = other_kind((enum plugin_kind)r->first);
        size_t o = 0;
        for (size_t k = 0; k < r->n_ids; k++) {
                if (r->ids[k].kind != second) {
                        r->ids[o++] = r->ids[k];
                        continue;
                }
                char dev[SHARE_ID_MAX];
                if (id_text(p, &r->ids[k], dev, sizeof dev) == 0)
                        (void)state_remove(plugin_record(p), plugin_resource(p, second), dev);
        }
        r->n_ids = o;
        share_rec_refresh(r);
        r->open = true;
        r->restored = true;
        r->deadline_ms = monotonic_ms() + SHARE_PAIR_RESTART_MS;
}

/* The container kubelet was admitting when the agent died (the last record written). */
static int after_sync_last(struct plugin *p, struct share_book *b, struct share_journal *j, struct share_rec *r) {
        enum plugin_kind first = (enum plugin_kind)r->first;
        enum plugin_kind second = other_kind(first);
        int changed = 0;
        if (!share_rec_listed(p, r, first)) {
                if (r->open) {
                        share_rec_close(p, r, "expired", "kubelet does not hold its first half after the restart");
                        changed = 1;
                }
        } else if (r->has[second] && !share_rec_listed(p, r, second)) {
                rec_reopen(p, r);
                log_debug("record reopened: its second half never reached kubelet", "container=%s", r->name);
                struct gs_error err = { 0 };
                if (share_dir_write(p, r, false, &err) < 0)
                        log_warn("cannot rewrite a limits dir", "container=%s error=\"%s\"", r->name, err.message);
                changed = 1;
        }
        if (changed) {
                (void)share_journal_save(j, plugin_devices(p), b);
                (void)share_check(p, b, r);
                devices_touch(plugin_devices(p));
        }
        return changed;
}

/* Is `resource` one of our fractional resources? */
static bool fractional(const struct plugin *p, const char *resource) {
        const char *core = plugin_resource(p, PLUGIN_CORE), *mem = plugin_resource(p, PLUGIN_MEMORY);
        return (core[0] && streq(resource, core)) || (mem[0] && streq(resource, mem));
}

/* The first sync after a restore (the one at start, before the services are served): every ID of
 * the journal's records that PodResources does not list is not held by kubelet — kubelet lists an
 * allocation as soon as its Allocate returned, so an unlisted one's answer never reached kubelet
 * (the agent died first) or kubelet has let it go (a container failed while the agent was down).
 * Left in the record, it would count against the room of its GPU for the state's 120 s grace.
 * Records left without IDs go, with their dirs. Returns the number of IDs dropped. */
static size_t drop_unlisted(struct plugin *p, struct share_book *b) {
        struct gpuslice_state *s = plugin_record(p);
        size_t dropped = 0;
        for (size_t i = 0; i < share_book_count(b);) {
                struct share_rec *r = share_book_at(b, i);
                size_t o = 0;
                for (size_t k = 0; k < r->n_ids; k++) {
                        const struct share_id *id = &r->ids[k];
                        char dev[SHARE_ID_MAX];
                        if (id_listed(p, id)) {
                                r->ids[o++] = *id;
                                continue;
                        }
                        if (id_text(p, id, dev, sizeof dev) == 0)
                                (void)state_remove(s, plugin_resource(p, (enum plugin_kind)id->kind), dev);
                        dropped++;
                }
                r->n_ids = o;
                share_rec_refresh(r);
                if (o > 0) {
                        i++;
                        continue;
                }
                log_debug("record dropped: PodResources lists none of its IDs after the restart", "container=%s",
                          r->name);
                share_dir_remove(p, r->name);
                share_book_remove(b, r);
        }
        /* The same for fractional entries of the state file that no record holds (the state file is
         * written after the journal, asynchronously: it may hold grants the journal has dropped). */
        for (size_t k = 0; k < s->n_allocs;) {
                const struct state_alloc *a = &s->allocs[k];
                if (!fractional(p, a->resource) || a->seen) {
                        k++;
                        continue;
                }
                char res[STATE_RESOURCE_MAX], dev[STATE_DEVICE_ID_MAX];
                strscpy(res, a->resource, sizeof res);
                strscpy(dev, a->device_id, sizeof dev);
                if (state_remove(s, res, dev) < 0)
                        k++;
                else
                        dropped++;
        }
        return dropped;
}

int share_restart_after_sync(struct plugin *p, struct share_book *b, struct share_journal *j) {
        int changed = 0;
        const char *last = share_book_last(b);
        struct share_rec *r = last[0] ? share_book_find(b, last) : NULL;
        if (r)
                changed = after_sync_last(p, b, j, r);
        /* only while every grant on record is from an earlier life (no Allocate answered since) */
        if (plugin_counters(p).allocate == 0 && drop_unlisted(p, b) > 0) {
                changed = 1;
                (void)share_journal_save(j, plugin_devices(p), b);
                (void)share_check(p, b, NULL);
                devices_touch(plugin_devices(p));
        }
        return changed;
}

/* Before a call of `kind` may pair with a record restored from the journal, ask kubelet (PodResources)
 * whether it still holds that record's first half. The journal says which half was waiting when the
 * agent died, not whether kubelet then failed its container: the start-up sync may have listed it
 * before kubelet failed it, and a container kubelet fails is dropped from PodResources before the
 * next container's first call (kubelet frees the devices of inactive pods at the start of each
 * admission). Listed: this call is its partner (the join is not tentative). Not listed: its container
 * is gone, the record closes and this call is a first half. No answer: the pairing stays tentative
 * (share_restart_reverse). The PodResources call runs without the lock. */
void share_restart_confirm(struct plugin *p, struct share_book *b, struct share_journal *j, enum plugin_kind kind,
                           int (*sync)(void *userdata), void *userdata) {
        struct devices *d = plugin_devices(p);
        devices_lock(d);
        struct share_rec *r = share_book_open(b);
        bool ask = sync && r && r->restored && !r->confirmed && r->first != kind;
        devices_unlock(d);
        if (!ask)
                return;
        int e = sync(userdata);
        devices_lock(d);
        r = share_book_open(b);
        if (e == 0 && r && r->restored && !r->confirmed && r->first != kind) {
                if (share_rec_listed(p, r, (enum plugin_kind)r->first)) {
                        r->confirmed = true;
                        share_log_decision(p, "confirm", kind, rec_gpu(r), r->name,
                                           "PodResources lists its first half: this call is its partner");
                } else {
                        share_rec_close(p, r, "expired",
                                        "PodResources no longer lists its first half: kubelet failed its container "
                                        "while the agent was down");
                        (void)share_journal_save(j, d, b);
                }
        }
        devices_unlock(d);
}

/* A half that joined a record restored from the journal is tentative: if kubelet then lists the
 * record's first half as available (release_available dropped it), that half belonged to a
 * container kubelet failed while the agent was down, and the joined half is really the first half
 * of the container being admitted now. The record becomes its record, open for its other half, and
 * keeps its dir (the joined half's answer mounts it). */
void share_restart_reverse(struct plugin *p, struct share_book *b, bool lost_first) {
        const char *last = share_book_last(b);
        struct share_rec *r = last[0] ? share_book_find(b, last) : NULL;
        if (r && r->tentative && monotonic_ms() > r->deadline_ms)
                r->tentative = false; /* only the call right after the join can tell */
        if (!r || !r->tentative || !lost_first || r->has[r->first] || r->n_ids == 0)
                return;
        r->tentative = false;
        r->first = (uint8_t)other_kind((enum plugin_kind)r->first);
        r->open = true;
        r->guessed = false;
        r->deadline_ms = monotonic_ms() + SHARE_PAIR_WINDOW_MS;
        share_count("gpuslice_share_pairs_total", "reversed");
        share_log_decision(p, "reverse", (enum plugin_kind)r->first, rec_gpu(r), r->name,
                           "the guessed partner was a container kubelet failed during the restart");
        struct gs_error err = { 0 };
        if (share_dir_write(p, r, false, &err) < 0)
                share_log_decision(p, "reverse", (enum plugin_kind)r->first, rec_gpu(r), r->name, err.message);
}
