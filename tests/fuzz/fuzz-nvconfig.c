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
        } else if (nv.sharing != NVCONFIG_SHARING_NONE) {
                if (nv.rep.replicas < 1 || nv.rep.replicas > NVCONFIG_REPLICAS_MAX ||
                    !memchr(nv.rep.name, 0, sizeof nv.rep.name) || !nv.rep.name[0] ||
                    nv.rep.n_devices > NVCONFIG_MAX_DEVICES)
                        abort();
        }
        free(text);
        return 0;
}
