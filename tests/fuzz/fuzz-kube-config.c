/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the kubeconfig parser (src/kube/config.c: libyaml → JSON tree → fields).
 * Whatever comes in: no crash, no unbounded recursion or growth (aliases refused, depth and
 * node count bounded), and either a configuration with an http(s) server or an error naming
 * the file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "kube/kube.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        if (size)
                memcpy(buf, data, size);
        struct kube_config c;
        struct gs_error err = { 0 };
        int r = kube_config_parse(buf, size, "/fuzz/config", NULL, &c, &err);
        if (r == 0) {
                CHECK(c.server && (startswith(c.server, "https://") || startswith(c.server, "http://")));
                CHECK((c.cert_pem || c.cert_file) == (c.key_pem || c.key_file));
                kube_config_done(&c);
        } else {
                CHECK(r < 0);
                CHECK(strstr(err.message, "/fuzz/config") != NULL || r == -ENOMEM);
        }
        free(buf);
        return 0;
}
