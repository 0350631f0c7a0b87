/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for cri_parse_list (src/monitor/cri.c): a ListContainersResponse as the container
 * runtime (containerd, CRI-O) answers it over the CRI socket — a peer the monitor does not control.
 * Whatever comes in: -EBADMSG or a list of running containers whose ids are 64 lower-case hex
 * digits and whose names are terminated inside their fields; no crash, leak or read past the input.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "monitor/cri.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uint8_t *copy = malloc(size ? size : 1); /* exact size */
        if (!copy)
                return 0;
        memcpy(copy, data, size);
        struct engine_container *c = NULL;
        size_t n = 0;
        int r = cri_parse_list(copy, size, &c, &n);
        if (r < 0)
                CHECK(r == -EBADMSG || r == -ENOMEM);
        else {
                CHECK((n == 0) == (c == NULL));
                for (size_t i = 0; i < n; i++) {
                        CHECK(strlen(c[i].id) == 64 && strspn(c[i].id, "0123456789abcdef") == 64);
                        CHECK(c[i].running);
                        CHECK(memchr(c[i].name, 0, sizeof c[i].name) && memchr(c[i].pod_name, 0, sizeof c[i].pod_name));
                        CHECK(memchr(c[i].pod_namespace, 0, sizeof c[i].pod_namespace));
                        CHECK(memchr(c[i].pod_uid, 0, sizeof c[i].pod_uid));
                        CHECK(memchr(c[i].container_name, 0, sizeof c[i].container_name));
                }
                free(c);
        }
        free(copy);
        return 0;
}
