/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the mig-minors reader (src/mig): the driver's /proc/driver/nvidia-caps/mig-minors text as the
 * CDI generator reads it. No crash, no read past the input; every entry it takes is one of the four shapes, and a
 * lookup agrees with the walk. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "mig/mig.h"

struct seen {
        unsigned n;
        struct mig_minor first_ci;
        int have_ci;
};

static int on(const struct mig_minor *m, void *ud) {
        struct seen *s = ud;
        CHECK(m->kind == MIG_CAP_CONFIG || m->kind == MIG_CAP_MONITOR || m->kind == MIG_CAP_GI ||
              m->kind == MIG_CAP_CI);
        CHECK(m->minor <= 999999999u);
        if (m->kind == MIG_CAP_CI && !s->have_ci) {
                s->first_ci = *m;
                s->have_ci = 1;
        }
        s->n++;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        if (size)
                memcpy(buf, data, size);
        struct seen s = { 0 };
        int r = mig_minors_parse(buf, size, on, &s);
        CHECK(r == 0 || r == -EFBIG);
        if (r == 0 && s.have_ci) {
                unsigned gi, ci;
                int l = mig_minors_lookup(buf, size, s.first_ci.gpu, s.first_ci.gi, s.first_ci.ci, &gi, &ci);
                CHECK(l == 0 || l == -ENOENT);
        }
        free(buf);
        return 0;
}
