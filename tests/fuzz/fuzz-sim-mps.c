/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the simulated MPS daemon's state parser (sim/mps.c): no crash, no read past the input; an accepted state
 * has a pid and a thread percentage 1..100, and formats to text that parses back to the same state. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "sim/mps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text = malloc(size ? size : 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        struct sim_mps m, again;
        if (sim_mps_parse(text, size, &m) == 0) {
                char buf[8192];
                int n = sim_mps_format(&m, buf, sizeof buf);
                if (m.pid <= 0 || m.thread_percentage < 1 || m.thread_percentage > 100 || n < 0 ||
                    sim_mps_parse(buf, (size_t)n, &again) != 0 || memcmp(&m, &again, sizeof m) != 0)
                        abort();
        }
        free(text);
        return 0;
}
