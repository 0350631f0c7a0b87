/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the OCI hook's inputs (cdi_oci_parse_state, cdi_oci_parse_config). Whatever
 * comes in: no crash or leak; a refusal says why; an accepted state has an absolute bundle; an
 * accepted config has an absolute root path and a NULL-terminated environment of n_env strings. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "cdi/cdi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *copy = malloc(size ? size : 1);
        if (!copy)
                return 0;
        memcpy(copy, data, size);
        struct cdi_oci o;
        struct gs_error gerr = { 0 };
        char *err = gerr.message;
        memset(&o, 0, sizeof o);
        err[0] = '\0';
        int r = cdi_oci_parse_state(copy, size, &o, &gerr);
        if (r == 0 ? (o.bundle[0] != '/' || o.pid < 0) : (r != -EINVAL || !err[0]))
                abort();
        memcpy(o.bundle, "/bundle", sizeof "/bundle");
        err[0] = '\0';
        r = cdi_oci_parse_config(copy, size, &o, &gerr);
        if (r == 0) {
                if (o.rootfs[0] != '/' || !o.env || o.env[o.n_env] != NULL)
                        abort();
                for (size_t i = 0; i < o.n_env; i++)
                        if (!o.env[i])
                                abort();
        } else if ((r != -EINVAL && r != -ENOMEM) || !err[0])
                abort();
        cdi_oci_done(&o);
        free(copy);
        return 0;
}
