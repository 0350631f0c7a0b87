/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the requirement parser (compat_require_check, compat_env_check). Whatever comes
 * in: no crash, no read past the input; validate and check agree on what is malformed; a refusal
 * always says why in one terminated line; the same input gives the same answer twice. The input
 * is also read as a container environment (one K=V per line). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "compat/compat.h"

static void one(const char *s, size_t n, const struct compat_node *nd) {
        struct gs_error e = { 0 }, e2 = { 0 };
        const char *msg = e.message, *again = e2.message;
        int v = compat_require_validate(s, n, NULL);
        int r = compat_require_check(s, n, nd, &e);
        if ((v == -EINVAL) != (r == -EINVAL) || (r != 0 && r != -EPERM && r != -EINVAL))
                abort();
        if (r < 0 && (msg[0] == '\0' || strchr(msg, '\n') || e.code != r))
                abort();
        int r2 = compat_require_check(s, n, nd, &e2);
        if (r2 != r || (r < 0 && strcmp(msg, again) != 0))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text = malloc(size ? size : 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        static const struct compat_gpu gpus[] = { { 0, "tesla", 8, 0 }, { 1, "geforce", 7, 5 } };
        struct compat_node nodes[] = {
                { "535.104.05", 12020, gpus, 2 },
                { "580.65.06", 13000, gpus, 1 },
                { "", 0, NULL, 0 },
        };
        for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++)
                one(text, size, &nodes[i]);

        /* as an environment: NUL-terminated lines */
        char *env_text = malloc(size + 1);
        const char *env[64];
        size_t n_env = 0;
        if (env_text) {
                memcpy(env_text, data, size);
                env_text[size] = '\0';
                char *p = env_text;
                while (n_env < 64) {
                        env[n_env++] = p;
                        char *nl = strchr(p, '\n');
                        if (!nl)
                                break;
                        *nl = '\0';
                        p = nl + 1;
                }
                struct gs_error e = { 0 };
                int r = compat_env_check(env, n_env, &nodes[0], &e);
                if (r != 0 && r != -EPERM && r != -EINVAL)
                        abort();
                if (r < 0 && (e.message[0] == '\0' || e.code != r))
                        abort();
                free(env_text);
        }
        free(text);
        return 0;
}
