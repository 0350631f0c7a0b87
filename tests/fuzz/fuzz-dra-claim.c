/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the ResourceClaim decoder of the DRA driver (src/dra/claim.c) and the quantity parser
 * it uses. Whatever comes in: no crash, and either a claim whose every field is within its bounds (a valid
 * UID, at most 32 results of this driver, names that fit) or an error with a message. The input is also
 * tried as a quantity: a parsed one is a non-negative value that fits an int64. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dra/claim.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *buf = malloc(size + 1);
        if (!buf)
                return 0;
        memcpy(buf, data, size);
        buf[size] = '\0';
        struct dra_claim *c = malloc(sizeof *c);
        struct gs_error err = { 0 };
        int r = c ? dra_claim_decode(buf, size, "gpu.gpuslice.io", c, &err) : 0;
        if (c && r == 0) {
                CHECK(dra_uid_valid(c->uid) && c->namespace_[0] && c->name[0]);
                CHECK(c->n_results <= DRA_RESULTS_MAX);
                CHECK(c->allocated || c->n_results == 0);
                for (unsigned i = 0; i < c->n_results; i++) {
                        const struct dra_result *res = &c->results[i];
                        CHECK(res->request[0] && res->pool[0] && res->device[0]);
                        CHECK(!res->share_id[0] || dra_uid_valid(res->share_id));
                        CHECK(res->memory <= INT64_MAX && res->cores <= INT64_MAX);
                        CHECK(res->params.core_policy <= DRA_POLICY_ELASTIC);
                }
        } else if (c) {
                CHECK(r < 0 && (err.message[0] || r == -ENOMEM));
        }
        free(c);
        uint64_t q;
        if (size < 64 && dra_quantity_parse(buf, &q) == 0)
                CHECK(q <= INT64_MAX);
        free(buf);
        return 0;
}
