/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz gs_limits_format, the writer `gpuslice run` and the node agent use for limits files
 * (src/interposer/limits.c): arbitrary limits (any bytes in the strings, any numbers, any device
 * count) into a buffer of arbitrary size. Either -EINVAL / -ENOBUFS, or text that fits the buffer,
 * is terminated, and parses back to exactly the limits given — what the interposer will enforce is
 * what the writer meant.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "interposer/limits.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static struct gs_limits l, back;
        if (size < 2)
                return 0;
        size_t len = ((size_t)data[0] << 8 | data[1]) % (GS_LIMITS_MAX_FILE + 64);
        data += 2, size -= 2;
        memset(&l, 0, sizeof l);
        memcpy(&l, data, size < sizeof l ? size : sizeof l);
        /* the writer's contract: terminated strings; everything else is fair game */
        l.container[sizeof l.container - 1] = '\0';
        l.region[sizeof l.region - 1] = '\0';
        l.n_devices %= GS_MAX_DEVICES + 2;
        l.core_policy = (enum gs_core_policy)((unsigned)l.core_policy % 3);
        for (unsigned i = 0; i < GS_MAX_DEVICES; i++)
                l.dev[i].uuid[sizeof l.dev[i].uuid - 1] = '\0';
        char *buf = malloc(len ? len : 1); /* exact size: ASan sees a write past it */
        CHECK(buf);
        int n = gs_limits_format(&l, buf, len);
        if (n < 0)
                CHECK(n == -EINVAL || n == -ENOBUFS);
        else {
                CHECK((size_t)n < len && buf[n] == '\0' && strlen(buf) == (size_t)n);
                CHECK(gs_limits_parse(buf, (size_t)n, &back, NULL, 0) == 0);
                CHECK(back.n_devices == l.n_devices && strcmp(back.container, l.container) == 0 &&
                      strcmp(back.region, l.region) == 0);
                CHECK(back.core_policy == (l.core_policy == GS_CORE_ELASTIC ? GS_CORE_ELASTIC : GS_CORE_HARD));
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
