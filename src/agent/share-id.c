/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share-id — the fractional resources' device IDs (share.h): "<uuid>::core-<n>", "<uuid>::mem-<n>",
 * formatted and parsed back against the device table. <uuid> is a whole GPU's or a MIG device's
 * ("MIG-…", shared like a small GPU: docs/mig.md). Pure: no lock (what a device is never changes),
 * no I/O. Must never: accept an ID that does not format back to itself, or one of a GPU in MIG mode
 * (only its MIG devices are shared).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent/share.h"
#include "util/util.h"

const char *share_kind_word(enum plugin_kind kind) {
        return kind == PLUGIN_CORE ? "core" : kind == PLUGIN_MEMORY ? "mem" : "";
}

int share_format_id(const char *uuid, enum plugin_kind kind, unsigned n, char *buf, size_t len) {
        if (kind != PLUGIN_CORE && kind != PLUGIN_MEMORY)
                return -EINVAL;
        int w = snprintf(buf, len, "%s::%s-%u", uuid, share_kind_word(kind), n);
        return w < 0 || (size_t)w >= len || (size_t)w >= SHARE_ID_MAX ? -ENAMETOOLONG : 0;
}

int share_parse_id(const struct devices *d, const char *id, enum plugin_kind *ret_kind, unsigned *ret_gpu,
                   unsigned *ret_n) {
        if (!id || strlen(id) >= SHARE_ID_MAX)
                return -EINVAL;
        const char *sep = strstr(id, "::");
        if (!sep)
                return -EINVAL;
        size_t ulen = (size_t)(sep - id);
        int g = -1;
        for (unsigned i = 0; i < devices_count(d) && g < 0; i++) {
                const char *uuid = devices_info(d, i)->id;
                if (strlen(uuid) == ulen && strncmp(uuid, id, ulen) == 0)
                        g = (int)i;
        }
        if (g < 0 || devices_info(d, (unsigned)g)->mig_mode)
                return -EINVAL;
        const char *rest = sep + 2;
        enum plugin_kind kind;
        if (startswith(rest, "core-")) {
                kind = PLUGIN_CORE;
                rest += 5;
        } else if (startswith(rest, "mem-")) {
                kind = PLUGIN_MEMORY;
                rest += 4;
        } else
                return -EINVAL;
        unsigned n;
        unsigned max = kind == PLUGIN_CORE ? SHARE_CORE_IDS : devices_info(d, (unsigned)g)->n_mem;
        if (max == 0 || parse_uint(rest, max - 1, &n) < 0)
                return -EINVAL;
        char canon[SHARE_ID_MAX];
        if (share_format_id(devices_info(d, (unsigned)g)->id, kind, n, canon, sizeof canon) < 0 || !streq(canon, id))
                return -EINVAL;
        *ret_kind = kind;
        *ret_gpu = (unsigned)g;
        *ret_n = n;
        return 0;
}
