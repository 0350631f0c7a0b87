/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share-key — the key file of a fractional container's limits dir (share-internal.h): two lines,
 * the resource and the device ID of the allocation the dir lives by (its record's first ID), so the
 * clean-up can tell a live dir from a dead one without the record. Pure: text in, text out.
 * Must never: accept a key whose fields do not fit the record's (state.h) sizes.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent/share-internal.h"
#include "util/util.h"

int share_key_format(const char *resource, const char *id, char *buf, size_t len) {
        int w = snprintf(buf, len, "%s\n%s\n", resource, id);
        return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : w;
}

bool share_key_parse(char *text, char *resource, size_t rlen, char *id, size_t ilen) {
        char *nl = strchr(text, '\n');
        if (!nl)
                return false;
        *nl = 0;
        char *end = strchr(nl + 1, '\n');
        if (end)
                *end = 0;
        if (strlen(text) >= rlen || strlen(nl + 1) >= ilen)
                return false;
        strscpy(resource, text, rlen);
        strscpy(id, nl + 1, ilen);
        return true;
}
