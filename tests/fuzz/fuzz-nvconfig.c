/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for nvconfig_parse. Whatever comes in: no crash, no read past the input; a failure says why
 * (-EINVAL, -EOPNOTSUPP, -EFBIG) and leaves the config untouched; a success gives a replicated resource with
 * 1..NVCONFIG_REPLICAS_MAX replicas when it shares, and terminated strings. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "nvconfig/nvconfig.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static struct gpuslice_config cfg, before;
        static struct nvconfig nv;
        char *text = malloc(size ? size : 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        config_init_defaults(&cfg);
        before = cfg;
        struct gs_error err = { 0 };
        int r = nvconfig_parse(text, size, "fuzz.yaml", &cfg, &nv, &err);
        if (r < 0) {
                if (!err.message[0] || (r != -EINVAL && r != -EOPNOTSUPP && r != -EFBIG && r != -ENOMEM) ||
                    memcmp(&cfg, &before, sizeof cfg) != 0)
                        abort();
        } else {
                const struct nvconfig_replicas *sets[2] = { &nv.ts, &nv.mps };
                for (unsigned k = 0; k < 2; k++)
                        if (sets[k]->sharing != NVCONFIG_SHARING_NONE &&
                            (sets[k]->replicas < 1 || sets[k]->replicas > NVCONFIG_REPLICAS_MAX ||
                             !memchr(sets[k]->name, 0, sizeof sets[k]->name) || !sets[k]->name[0] ||
                             sets[k]->n_devices > NVCONFIG_MAX_DEVICES))
                                abort();
                /* both strategies: never one name, never the same GPU entry, never `all` beside the other */
                if (nv.ts.sharing && nv.mps.sharing) {
                        if (streq(nv.ts.name, nv.mps.name) || nv.ts.all || nv.mps.all || (nv.ts.count && nv.mps.count))
                                abort();
                        for (unsigned i = 0; i < nv.ts.n_devices; i++)
                                for (unsigned j = 0; j < nv.mps.n_devices; j++)
                                        if (streq(nv.ts.devices[i], nv.mps.devices[j]))
                                                abort();
                }
        }
        free(text);
        return 0;
}
