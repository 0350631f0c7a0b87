/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share-check — the fractional invariants, checked after every decision (share-internal.h): per
 * GPU sums within the GPU, no ID in two records, no GPU held whole and in fractions, every record's
 * limits file equal to its grant. A violation is logged and counted, never repaired here.
 * Must never: change the book, the record or a file.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "agent/share-internal.h"
#include "agent/share.h"
#include "util/log.h"
#include "util/util.h"

__attribute__((format(printf, 2, 3))) static void violation(const char *check, const char *fmt, ...) {
        share_count("gpuslice_share_invariant_violations_total", check);
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        log_error("fractional invariant violated", "check=%s detail=\"%s\"", check, msg);
}

/* The record's limits file is exactly what share_dir_limits says. */
static unsigned check_dir(struct plugin *p, const struct share_rec *r) {
        struct gs_limits want, have;
        if (share_dir_limits(p, r, &want) < 0)
                return 0;
        if (share_dir_read_limits(p, r->name, &have) < 0) {
                violation("limits-dir", "%s: limits file missing or unreadable", r->name);
                return 1;
        }
        bool same = have.n_devices == want.n_devices && have.core_policy == want.core_policy &&
                    streq(have.container, want.container);
        for (unsigned i = 0; same && i < want.n_devices; i++)
                same = streq(have.dev[i].uuid, want.dev[i].uuid) &&
                       have.dev[i].memory_bytes == want.dev[i].memory_bytes &&
                       have.dev[i].core_percent == want.dev[i].core_percent;
        if (!same) {
                violation("limits-dir", "%s: limits file differs from the grant", r->name);
                return 1;
        }
        return 0;
}

/* Per GPU sums over the records, and no ID in two records. */
static unsigned check_sums(struct plugin *p, struct share_book *b) {
        const struct devices *d = plugin_devices(p);
        unsigned n = devices_count(d);
        struct plugin_usage u;
        unsigned found = 0;
        plugin_usage(p, &u);
        _cleanup_(freep) uint8_t *held = calloc((size_t)n * (SHARE_CORE_IDS + SHARE_MEM_IDS_MAX), 1);
        unsigned core[DEVICES_MAX] = { 0 }, mem[DEVICES_MAX] = { 0 };
        if (!held)
                return 0;
        for (size_t i = 0; i < share_book_count(b); i++) {
                const struct share_rec *r = share_book_at(b, i);
                for (size_t k = 0; k < r->n_ids; k++) {
                        const struct share_id *id = &r->ids[k];
                        size_t slot = (size_t)id->gpu * (SHARE_CORE_IDS + SHARE_MEM_IDS_MAX) +
                                      (id->kind == PLUGIN_CORE ? 0 : SHARE_CORE_IDS) + id->n;
                        if (held[slot]++ == 1) {
                                violation("id-twice", "%s: an ID is in two records (n=%u kind=%u)", r->name, id->n,
                                          id->kind);
                                found++;
                        }
                        (id->kind == PLUGIN_CORE ? core : mem)[id->gpu]++;
                }
        }
        uint64_t unit = plugin_options(p)->memory_unit;
        for (unsigned g = 0; g < n; g++) {
                const struct device_info *x = devices_info(d, g);
                if (core[g] > SHARE_CORE_IDS) {
                        violation("core-over", "%s: %u %% core granted (max 100)", x->id, core[g]);
                        found++;
                }
                if ((uint64_t)mem[g] * unit > x->memory_total) {
                        violation("memory-over", "%s: %u memory units granted, %u fit", x->id, mem[g], x->n_mem);
                        found++;
                }
                if ((core[g] || mem[g]) && (u.whole & (UINT64_C(1) << g))) {
                        violation("whole-and-fraction", "%s: held whole and in fractions", x->id);
                        found++;
                }
        }
        return found;
}

unsigned share_check(struct plugin *p, struct share_book *b, const struct share_rec *rec) {
        unsigned found = check_sums(p, b);
        if (rec)
                return found + check_dir(p, rec);
        for (size_t i = 0; i < share_book_count(b); i++)
                found += check_dir(p, share_book_at(b, i));
        return found;
}
