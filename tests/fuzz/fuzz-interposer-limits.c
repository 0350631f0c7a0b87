/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for gs_limits_parse (the interposer's limits file). Whatever comes in: no crash, no
 * read past the input, either -EINVAL/-E2BIG with a message or limits that are in range, and the
 * writer's text of accepted limits parses back to the same limits. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "interposer/limits.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *buf = malloc(size ? size : 1); /* exact size: the parser must not need a terminator */
        if (!buf)
                return 0;
        if (size)
                memcpy(buf, data, size);
        static struct gs_limits l, back;
        char err[256] = "";
        int r = gs_limits_parse(buf, size, &l, err, sizeof err);
        if (r < 0) {
                CHECK(r == -EINVAL || r == -E2BIG);
                CHECK(err[0] != '\0');
        } else {
                CHECK(l.n_devices >= 1 && l.n_devices <= GS_MAX_DEVICES);
                CHECK(l.region[0] == '/' && l.container[0]);
                for (unsigned i = 0; i < l.n_devices; i++)
                        CHECK(l.dev[i].core_percent >= 1 && l.dev[i].core_percent <= 100);
                static char text[GS_LIMITS_MAX_FILE];
                int n = gs_limits_format(&l, text, sizeof text);
                CHECK(n > 0);
                CHECK(gs_limits_parse(text, (size_t)n, &back, NULL, 0) == 0);
                CHECK(back.n_devices == l.n_devices && back.core_policy == l.core_policy);
                CHECK(strcmp(back.container, l.container) == 0 && strcmp(back.region, l.region) == 0);
                for (unsigned i = 0; i < l.n_devices; i++)
                        CHECK(back.dev[i].index == l.dev[i].index &&
                              back.dev[i].memory_bytes == l.dev[i].memory_bytes &&
                              back.dev[i].core_percent == l.dev[i].core_percent &&
                              back.dev[i].context_bytes == l.dev[i].context_bytes &&
                              strcmp(back.dev[i].uuid, l.dev[i].uuid) == 0);
        }
        free(buf);
        return 0;
}
