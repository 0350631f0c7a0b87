/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mps-client — an MPS client's mounts and env (mps-client.h). Pure: must never do I/O.
 */
#include <errno.h>
#include <stdio.h>

#include "util/mps-client.h"

int mps_client_edits(const char *host_pipe, const char *host_shm, const char *ctr_pipe, struct mps_client *ret) {
        struct mps_client c = { .mount = { { host_pipe, ctr_pipe }, { host_shm, MPS_CLIENT_SHM } },
                                .n_mounts = MPS_CLIENT_MOUNTS,
                                .pipe = ctr_pipe };
        int w = snprintf(c.env, sizeof c.env, MPS_CLIENT_PIPE_ENV "=%s", ctr_pipe);
        if (w < 0 || (size_t)w >= sizeof c.env)
                return -ENAMETOOLONG;
        *ret = c;
        return 0;
}
