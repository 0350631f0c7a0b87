/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for state_decode. Whatever comes in: no crash, no read past the input; a file is
 * either rejected with -EBADMSG or accepted as a state whose entries validate and which encodes
 * to a file that decodes to the same state. Each input is tried twice: as a whole file (header
 * checks) and as a body behind a correct header (so the fuzzer reaches the JSON and schema checks
 * without having to forge a CRC). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "state/state.h"

static void check(const char *copy, size_t size) {
        struct gpuslice_state s;
        state_init(&s);
        int r = state_decode(copy, size, &s);
        if (r < 0) {
                if (r != -EBADMSG && r != -ENOMEM)
                        abort();
        } else {
                for (size_t i = 0; i < s.n_allocs; i++)
                        if (state_alloc_validate(&s.allocs[i]) < 0)
                                abort();
                char *out = NULL;
                size_t len = 0;
                if (state_encode(&s, &out, &len) < 0)
                        abort();
                struct gpuslice_state t;
                if (state_decode(out, len, &t) < 0 || t.n_allocs != s.n_allocs || t.generation != s.generation ||
                    (s.n_allocs && memcmp(t.allocs, s.allocs, s.n_allocs * sizeof *s.allocs) != 0))
                        abort();
                state_done(&t);
                free(out);
        }
        state_done(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* exact-size copy, so ASan catches a read past the input */
        char *copy = malloc(size ? size : 1);
        if (!copy)
                return 0;
        memcpy(copy, data, size);
        check(copy, size);
        free(copy);
        copy = malloc(size + 64);
        if (!copy)
                return 0;
        int h = snprintf(copy, 64, "gpuslice-state %d %zu %08" PRIx32 "\n", STATE_FORMAT_VERSION, size,
                         state_crc32c(0, data, size));
        memcpy(copy + h, data, size);
        check(copy, (size_t)h + size);
        free(copy);
        return 0;
}
