/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for gs_ldcache_parse. Whatever comes in: no crash, no read past the input (the
 * copy is exactly `size` bytes, so ASan sees any overrun); every entry handed out has its strings
 * inside the input; the answer is 0 or -EBADMSG and the same twice. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "cdi/cdi.h"

struct bounds {
        const char *lo, *hi;
        size_t n;
};

static int on_entry(const struct gs_ldcache_entry *e, void *userdata) {
        struct bounds *b = userdata;
        if (e->soname < b->lo || e->soname >= b->hi || e->path < b->lo || e->path >= b->hi)
                abort();
        if (strlen(e->soname) >= (size_t)(b->hi - e->soname) || strlen(e->path) >= (size_t)(b->hi - e->path))
                abort();
        (void)gs_ldcache_native(e->flags);
        b->n++;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *copy = malloc(size ? size : 1);
        if (!copy)
                return 0;
        memcpy(copy, data, size);
        struct bounds b = { copy, copy + size, 0 }, b2 = b;
        int r = gs_ldcache_parse(copy, size, on_entry, &b);
        if (r != 0 && r != -EBADMSG)
                abort();
        int r2 = gs_ldcache_parse(copy, size, on_entry, &b2);
        if (r2 != r || b2.n != b.n)
                abort();
        free(copy);
        return 0;
}
