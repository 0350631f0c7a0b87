/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the DRA driver's opaque-parameters decoder (src/dra/claim.c): no crash, and either a
 * known core policy or an error with a message; nothing but apiVersion, kind and corePolicy is accepted. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dra/claim.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        memcpy(buf, data, size);
        struct dra_params p;
        struct gs_error err = { 0 };
        int r = dra_params_decode(buf, size, &p, &err);
        if (r == 0)
                CHECK(p.core_policy <= DRA_POLICY_ELASTIC && size <= DRA_PARAMS_MAX &&
                      p.sharing.strategy <= DRA_SHARING_MPS && p.sharing.interval <= DRA_INTERVAL_LONG &&
                      p.sharing.thread_percentage <= 100 && p.sharing.n_per_device <= DRA_MPS_LIMITS_MAX &&
                      (p.sharing.pinned == 0 || p.sharing.pinned >= DRA_MPS_MIN_PINNED));
        else
                CHECK(r < 0 && err.message[0]);
        free(buf);
        return 0;
}
