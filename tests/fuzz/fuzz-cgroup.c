/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for cgroup_parse (/proc/PID/cgroup text): no crash, no read past the input, and
 * a result that is either -EINVAL or an attribution whose fields are well formed. */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "monitor/cgroup.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        if (size)
                memcpy(buf, data, size);
        struct cgroup_info info;
        int r = cgroup_parse(buf, size, &info);
        CHECK(r == -EINVAL || r == 0 || r == 1);
        if (r >= 0) {
                size_t n = strlen(info.container_id);
                CHECK(n == 0 || n == CGROUP_CONTAINER_ID_LEN);
                for (size_t i = 0; i < n; i++)
                        CHECK(isxdigit((unsigned char)info.container_id[i]) &&
                              !isupper((unsigned char)info.container_id[i]));
                CHECK(strlen(info.pod_uid) < CGROUP_POD_UID_MAX);
                CHECK(r == (info.container_id[0] || info.pod_uid[0]));
                CHECK((info.runtime == CGROUP_RUNTIME_NONE) == (n == 0));
        }
        free(buf);
        return 0;
}
