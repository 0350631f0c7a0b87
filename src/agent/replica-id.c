/* SPDX-License-Identifier: Apache-2.0 */
/*
 * replica-id — the time-slicing replicas' device IDs (timeslice.h): "<uuid>::<j>", NVIDIA's annotated IDs,
 * formatted and parsed back against the device table. Pure: no lock, no I/O. Must never accept an ID that does
 * not format back to itself (a leading zero, a sign) or one of a MIG device or a GPU in MIG mode.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent/timeslice.h"
#include "util/util.h"

void timeslice_format_id(const char *gpu, unsigned j, char *buf, size_t len) {
        snprintf(buf, len, "%.96s::%u", gpu, j);
}

int timeslice_parse_id(const struct devices *d, const char *id, unsigned n, unsigned *ret_gpu, unsigned *ret_j) {
        if (!id || n == 0 || strlen(id) >= TIMESLICE_ID_MAX)
                return -EINVAL;
        const char *sep = strstr(id, "::");
        if (!sep)
                return -EINVAL;
        char gpu[TIMESLICE_ID_MAX];
        snprintf(gpu, sizeof gpu, "%.*s", (int)(sep - id), id);
        int g = devices_find(d, gpu);
        unsigned j;
        if (g < 0 || devices_info(d, (unsigned)g)->kind != DEVICE_GPU || devices_info(d, (unsigned)g)->mig_mode ||
            parse_uint(sep + 2, n - 1, &j) < 0)
                return -EINVAL;
        char canon[TIMESLICE_ID_MAX];
        timeslice_format_id(gpu, j, canon, sizeof canon);
        if (!streq(canon, id))
                return -EINVAL;
        *ret_gpu = (unsigned)g;
        *ret_j = j;
        return 0;
}
