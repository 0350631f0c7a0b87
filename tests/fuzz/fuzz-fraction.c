/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for alloc_pick_fraction (src/alloc/fraction.c): the bytes describe up to 64 GPUs
 * (usable, must, totals, used, available) and a request (kind, policy, size, partner, pair,
 * expect). The answer must honour every guarantee of fraction.h or be a documented error.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "alloc/fraction.h"

static unsigned take(const uint8_t **p, size_t *left) {
        if (*left == 0)
                return 0;
        (*left)--;
        return *(*p)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const uint8_t *p = data;
        size_t left = size;
        struct alloc_frac_request q;
        memset(&q, 0, sizeof q);
        unsigned flags = take(&p, &left);
        q.kind = (enum alloc_frac_kind)(flags & 1);
        q.policy = (enum alloc_frac_policy)((flags >> 1) & 1);
        q.pair = (flags >> 2) & 1;
        q.size = take(&p, &left) | (take(&p, &left) << 8);
        q.partner = (int)take(&p, &left) - 2;
        q.expect = take(&p, &left);
        q.n = take(&p, &left) % (ALLOC_FRAC_MAX_GPUS + 2);
        for (unsigned g = 0; g < q.n && g < ALLOC_FRAC_MAX_GPUS; g++) {
                struct alloc_frac_gpu *x = &q.gpu[g];
                unsigned b = take(&p, &left);
                x->usable = b & 1;
                x->must = (b >> 1) & 1 && (b >> 2) & 1 && (b >> 3) & 1;
                x->total[0] = take(&p, &left) % 101;
                x->total[1] = take(&p, &left) * 4;
                x->used[0] = take(&p, &left);
                x->used[1] = take(&p, &left) * 4;
                x->avail = take(&p, &left) * 4;
        }
        struct alloc_frac_decision d;
        int r = alloc_pick_fraction(&q, &d);
        if (strnlen(d.why, sizeof d.why) == sizeof d.why)
                abort();
        if (r == 0) {
                if (d.gpu < 0 || (unsigned)d.gpu >= q.n || !q.gpu[d.gpu].usable || q.gpu[d.gpu].avail < q.size)
                        abort();
                if (q.partner >= 0 && d.gpu != q.partner)
                        abort();
        } else if (r != -EINVAL && r != -E2BIG && r != -ENOSPC && r != -EXDEV) {
                abort();
        } else if (d.gpu != -1) {
                abort();
        }
        return 0;
}
