/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for MIG layout files (src/migctl: mig-parted's format through the YAML reader) and the planner on
 * what they ask: no crash, no leak; a refusal says why; an accepted file's layouts have entries whose wants are
 * well-formed, and whatever the planner places on an A100-40GB's profiles is a layout the GPU could hold. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "migctl/migctl.h"
#include "util/util.h"

static struct mig_caps a100(void) {
        static const struct {
                unsigned id, slices, instances, size, n, starts[7];
                const char *name;
        } p[] = {
                { 19, 1, 7, 1, 7, { 0, 1, 2, 3, 4, 5, 6 }, "1g.5gb" },
                { 20, 1, 1, 1, 7, { 0, 1, 2, 3, 4, 5, 6 }, "1g.5gb+me" },
                { 15, 1, 4, 2, 4, { 0, 2, 4, 6 }, "1g.10gb" },
                { 14, 2, 3, 2, 3, { 0, 2, 4 }, "2g.10gb" },
                { 9, 3, 2, 4, 2, { 0, 4 }, "3g.20gb" },
                { 5, 4, 1, 4, 1, { 0 }, "4g.20gb" },
                { 0, 7, 1, 8, 1, { 0 }, "7g.40gb" },
        };
        struct mig_caps c = { 0 };
        for (size_t i = 0; i < ELEMENTSOF(p); i++) {
                struct mig_profile *x = &c.profile[c.n_profiles++];
                x->id = p[i].id;
                x->slices = p[i].slices;
                x->instances = p[i].instances;
                strscpy(x->name, p[i].name, sizeof x->name);
                x->n_placements = p[i].n;
                for (unsigned k = 0; k < p[i].n; k++)
                        x->placement[k] = (struct mig_placement){ p[i].starts[k], p[i].size };
        }
        return c;
}

static void check_target(const struct mig_target *t) {
        unsigned used = 0, compute = 0;
        for (unsigned k = 0; k < t->n; k++) {
                unsigned bits = ((1u << t->gi[k].placement.size) - 1) << t->gi[k].placement.start;
                CHECK((used & bits) == 0);
                used |= bits;
                compute += t->gi[k].slices;
        }
        CHECK(compute <= 7);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static struct mig_caps caps;
        static bool init;
        if (!init) {
                caps = a100();
                init = true;
        }
        char *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        if (size)
                memcpy(buf, data, size);
        struct migctl_config c;
        struct gs_error err = { 0 };
        int r = migctl_config_parse(buf, size, "fuzz.yaml", &c, &err);
        if (r < 0) {
                CHECK(r == -EINVAL || r == -EFBIG || r == -ENOMEM);
                CHECK(r == -ENOMEM || err.message[0]);
                CHECK(!c.layout);
        } else {
                struct mig_gpu now = { .mode = 1, .pending = 1 };
                for (unsigned i = 0; i < c.n; i++) {
                        const struct migctl_layout *l = &c.layout[i];
                        CHECK(l->n > 0 && l->n <= MIGCTL_MAX_ENTRIES && l->name[0]);
                        CHECK(migctl_config_find(&c, l->name) != NULL);
                        for (unsigned e = 0; e < l->n; e++) {
                                const struct mig_want *w = &l->entry[e].want;
                                CHECK(w->enabled || w->n == 0);
                                struct mig_target t;
                                if (mig_plan_place(&caps, &now, w, &t, NULL) == 0)
                                        check_target(&t);
                        }
                        const struct migctl_entry *sel;
                        (void)migctl_layout_select(l, 0, 0x20B010DEu, &sel, NULL);
                }
                migctl_config_done(&c);
        }
        free(buf);
        return 0;
}
