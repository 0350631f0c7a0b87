/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for config_parse_text. Whatever comes in: no crash, no read past the input, a
 * failure leaves the config untouched and says why; an accepted file dumps to text that parses
 * back to the same config (same dump). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "config/config.h"

static char *dump(const struct gpuslice_config *cfg, size_t *ret_len) {
        char *buf = NULL;
        FILE *f = open_memstream(&buf, ret_len);
        if (!f || config_dump(cfg, f) < 0)
                abort();
        fclose(f);
        return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static struct gpuslice_config cfg, again;
        /* copy so the parser cannot lean on a terminator past `size` */
        char *text = malloc(size ? size : 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        config_init_defaults(&cfg);
        size_t l0;
        char *before = dump(&cfg, &l0);
        struct gs_error err = { 0 };
        int r = config_parse_text(text, size, &cfg, &err);
        size_t l1;
        char *after = dump(&cfg, &l1);
        if (r < 0) {
                if (err.message[0] == '\0' || err.code != r || l0 != l1 || memcmp(before, after, l0) != 0)
                        abort(); /* a failed parse must say why and change nothing */
        } else {
                config_init_defaults(&again);
                if (config_parse_text(after, l1, &again, &err) < 0)
                        abort();
                size_t l2;
                char *third = dump(&again, &l2);
                if (l1 != l2 || memcmp(after, third, l1) != 0)
                        abort();
                free(third);
        }
        free(before);
        free(after);
        free(text);
        return 0;
}
