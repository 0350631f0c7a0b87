/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the Engine API JSON parsers (/containers/json and /containers/ID/json) and the
 * GPU mapping that follows: no crash, no read past the input, ids well formed, GPU sets inside
 * the node. The first byte picks the parser. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "engine/engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static struct topo t;
        if (size < 1)
                return 0;
        if (t.n_gpus == 0) {
                t.n_gpus = 8;
                for (int i = 0; i < 8; i++) {
                        t.gpu[i].index = i;
                        t.gpu[i].minor = 7 - i;
                        snprintf(t.gpu[i].uuid, sizeof t.gpu[i].uuid, "GPU-000%d", i);
                }
        }
        char *buf = malloc(size - 1 ? size - 1 : 1);
        if (!buf)
                return 0;
        memcpy(buf, data + 1, size - 1);
        if (data[0] & 1) {
                struct engine_container c;
                if (engine_parse_inspect(buf, size - 1, &c) == 0) {
                        CHECK(strlen(c.id) == 64);
                        CHECK(c.n_devices <= ENGINE_MAX_DEVICES);
                        uint64_t set = engine_container_gpus(&c, &t);
                        CHECK((set & ~0xffull) == 0);
                        CHECK(c.running || set == 0);
                }
        } else {
                struct engine_container *c;
                size_t n;
                if (engine_parse_list(buf, size - 1, &c, &n) == 0) {
                        for (size_t i = 0; i < n; i++)
                                CHECK(strlen(c[i].id) == 64);
                        free(c);
                }
        }
        free(buf);
        return 0;
}
