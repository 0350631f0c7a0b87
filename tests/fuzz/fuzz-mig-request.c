/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the agent's MIG layout request file (<state-dir>/mig-layout, src/migctl/request.c), which a
 * restarted agent trusts to decide whether a layout is applied again: no crash; a malformed file is refused
 * with a message and nothing written; an accepted one formats back to the same bytes and parses to the same. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "migctl/migctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static struct migctl_request r, back;
        static const struct migctl_request untouched = { .name = "untouched" };
        struct gs_error err = { 0 };
        r = untouched;
        if (migctl_request_parse((const char *)data, size, &r, &err) < 0) {
                CHECK(err.message[0] && memcmp(&r, &untouched, sizeof r) == 0);
                return 0;
        }
        CHECK(r.name[0] && (!r.busy || strcmp(r.state, "failed") == 0));
        char text[sizeof r + 16];
        int n = migctl_request_format(&r, text, sizeof text);
        CHECK(n > 0 && (size_t)n == size && memcmp(text, data, size) == 0);
        CHECK(migctl_request_parse(text, (size_t)n, &back, &err) == 0);
        CHECK(memcmp(&r, &back, sizeof r) == 0);
        return 0;
}
