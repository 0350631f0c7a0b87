/* SPDX-License-Identifier: Apache-2.0 */
/*
 * migctl/journal — the format of a MIG change's journal (JSON): which GPU, which layout, the exact
 * layout before the change (what a rollback restores), the layout wanted, whether a mode change waits
 * for a reset. One codec: the applier writes and reads it only through these two functions. Never logs.
 *
 *   {"version": 1, "gpu": "GPU-…", "layout": "all-balanced", "pending_reset": false,
 *    "before": {"enabled": true, "gis": [{"profile": 9, "slices": 3, "start": 4, "size": 4,
 *                                         "cis": [{"start": 0, "size": 3}]}]},
 *    "want": {"enabled": true, "devices": {"1g.10gb": 2, "3g.40gb": 1}}}
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "migctl/migctl.h"
#include "util/util.h"

#define JOURNAL_VERSION 1

static json_t *placement_json(struct mig_placement p) {
        return json_pack("{s:I, s:I}", "start", (json_int_t)p.start, "size", (json_int_t)p.size);
}

static json_t *before_json(const struct mig_target *t) {
        json_t *gis = json_array();
        for (unsigned k = 0; gis && k < t->n; k++) {
                const struct mig_target_gi *g = &t->gi[k];
                json_t *cis = json_array();
                for (unsigned j = 0; cis && j < g->n_cis; j++)
                        json_array_append_new(cis, placement_json(g->ci[j]));
                json_array_append_new(gis, json_pack("{s:I, s:I, s:I, s:I, s:o*}", "profile", (json_int_t)g->profile_id,
                                                     "slices", (json_int_t)g->slices, "start",
                                                     (json_int_t)g->placement.start, "size",
                                                     (json_int_t)g->placement.size, "cis", cis));
        }
        return json_pack("{s:b, s:o*}", "enabled", t->enabled, "gis", gis);
}

static json_t *want_json(const struct mig_want *w) {
        json_t *devs = json_object();
        for (unsigned i = 0; devs && i < w->n; i++)
                json_object_set_new(devs, w->item[i].profile, json_integer(w->item[i].count));
        return json_pack("{s:b, s:o*}", "enabled", w->enabled, "devices", devs);
}

int migctl_journal_format(const struct migctl_journal *j, char **ret) {
        json_t *o = json_pack("{s:i, s:s, s:s, s:b, s:o*, s:o*}", "version", JOURNAL_VERSION, "gpu", j->gpu, "layout",
                              j->layout, "pending_reset", j->pending_reset, "before", before_json(&j->before), "want",
                              want_json(&j->want));
        if (!o)
                return -ENOMEM;
        char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

static int get_uint(const json_t *o, const char *key, unsigned max, unsigned *ret) {
        const json_t *v = json_object_get(o, key);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
                return -EINVAL;
        *ret = (unsigned)json_integer_value(v);
        return 0;
}

static int parse_placement(const json_t *o, unsigned max, struct mig_placement *ret) {
        if (!json_is_object(o) || get_uint(o, "start", max, &ret->start) < 0 ||
            get_uint(o, "size", max, &ret->size) < 0 || ret->size == 0 || ret->start + ret->size > max)
                return -EINVAL;
        return 0;
}

static int parse_before(const json_t *o, struct mig_target *t) {
        const json_t *gis = json_object_get(o, "gis");
        if (!json_is_object(o) || !json_is_boolean(json_object_get(o, "enabled")) || !json_is_array(gis) ||
            json_array_size(gis) > MIG_MAX_GIS)
                return -EINVAL;
        t->enabled = json_is_true(json_object_get(o, "enabled"));
        size_t i;
        const json_t *g;
        json_array_foreach(gis, i, g) {
                struct mig_target_gi *x = &t->gi[t->n];
                struct mig_placement pl = { 0, 0 };
                const json_t *cis = json_object_get(g, "cis");
                if (!json_is_object(g) || get_uint(g, "profile", 0xffff, &x->profile_id) < 0 ||
                    get_uint(g, "slices", 16, &x->slices) < 0 || parse_placement(g, 16, &pl) < 0 ||
                    !json_is_array(cis) || json_array_size(cis) > MIG_MAX_CIS)
                        return -EINVAL;
                x->placement = pl;
                size_t j;
                const json_t *c;
                json_array_foreach(cis, j, c) {
                        if (parse_placement(c, 16, &x->ci[x->n_cis]) < 0)
                                return -EINVAL;
                        x->n_cis++;
                }
                t->n++;
        }
        return 0;
}

static int parse_want(const json_t *o, struct mig_want *w) {
        const json_t *devs = json_object_get(o, "devices");
        if (!json_is_object(o) || !json_is_boolean(json_object_get(o, "enabled")) || !json_is_object(devs) ||
            json_object_size(devs) > MIG_MAX_PROFILES)
                return -EINVAL;
        w->enabled = json_is_true(json_object_get(o, "enabled"));
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)devs, k, v) {
                if (!mig_profile_name_valid(k) || !json_is_integer(v) || json_integer_value(v) < 1 ||
                    json_integer_value(v) > 7)
                        return -EINVAL;
                strscpy(w->item[w->n].profile, k, MIG_PROFILE_NAME_MAX);
                w->item[w->n++].count = (unsigned)json_integer_value(v);
        }
        return 0;
}

int migctl_journal_parse(const char *text, size_t len, struct migctl_journal *ret, struct gs_error *err) {
        memset(ret, 0, sizeof *ret);
        json_error_t je;
        json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!o)
                return gs_error_set(err, -EINVAL, "journal: %s", je.text);
        int r = 0;
        const json_t *v = json_object_get(o, "version");
        const char *gpu = json_string_value(json_object_get(o, "gpu")),
                   *layout = json_string_value(json_object_get(o, "layout"));
        if (!json_is_integer(v) || json_integer_value(v) != JOURNAL_VERSION)
                r = gs_error_set(err, -EINVAL, "journal: version %d expected", JOURNAL_VERSION);
        else if (!gpu || !startswith(gpu, "GPU-") || strlen(gpu) >= sizeof ret->gpu || !layout ||
                 strlen(layout) >= sizeof ret->layout || !json_is_boolean(json_object_get(o, "pending_reset")))
                r = gs_error_set(err, -EINVAL, "journal: gpu, layout or pending_reset missing or malformed");
        else if (parse_before(json_object_get(o, "before"), &ret->before) < 0)
                r = gs_error_set(err, -EINVAL, "journal: before is malformed");
        else if (parse_want(json_object_get(o, "want"), &ret->want) < 0)
                r = gs_error_set(err, -EINVAL, "journal: want is malformed");
        else {
                strscpy(ret->gpu, gpu, sizeof ret->gpu);
                strscpy(ret->layout, layout, sizeof ret->layout);
                ret->pending_reset = json_is_true(json_object_get(o, "pending_reset"));
        }
        json_decref(o);
        return r;
}
