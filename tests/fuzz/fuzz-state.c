/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for state_decode. Whatever comes in: no crash, no read past the input; a file is
 * either rejected with -EBADMSG or accepted as a state whose entries validate and which encodes
 * to a file that decodes to the same state. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "state/state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *copy = malloc(size ? size : 1);
        if (!copy)
                return 0;
        memcpy(copy, data, size);
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
        free(copy);
        return 0;
}
