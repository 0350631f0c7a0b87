/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the MIG change journal's codec (src/migctl/journal.c), which a restarted applier trusts to
 * complete or roll back a change: no crash; a malformed journal is refused; an accepted one formats back to a
 * journal that parses to the same thing. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "migctl/migctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static struct migctl_journal j, back;
        struct gs_error err = { 0 };
        if (migctl_journal_parse((const char *)data, size, &j, &err) < 0) {
                CHECK(err.message[0]);
                return 0;
        }
        char *text = NULL;
        CHECK(migctl_journal_format(&j, &text) == 0);
        CHECK(migctl_journal_parse(text, strlen(text), &back, &err) == 0);
        CHECK(strcmp(j.gpu, back.gpu) == 0 && strcmp(j.layout, back.layout) == 0);
        CHECK(j.pending_reset == back.pending_reset && j.before.n == back.before.n && j.want.n == back.want.n);
        CHECK(memcmp(&j.before, &back.before, sizeof j.before) == 0);
        free(text);
        return 0;
}
