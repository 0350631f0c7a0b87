/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cdi/oci — the two inputs of an OCI hook: the container state on stdin ({"ociVersion", "id",
 * "status", "pid", "bundle", …}) and the bundle's config.json (root.path, process.env). Strict:
 * anything unexpected in the fields we use is an error the hook turns into a refusal.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdi/cdi.h"
#include "util/error.h"
#include "util/util.h"

/* What every public function returns: r, recorded in err->code when it is a failure. */
static int cdi_fail(struct gs_error *err, int r) {
        if (r < 0 && err)
                err->code = r;
        return r;
}

#define OCI_ENV_MAX 65536u

_printf_(2, 3) static int fail(struct gs_error *err, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        (void)gs_error_setv(err, -EINVAL, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

static json_t *load(const char *text, size_t len, const char *what, struct gs_error *err) {
        json_error_t je;
        if (len > CDI_OCI_MAX) {
                fail(err, "%s: larger than %u bytes", what, CDI_OCI_MAX);
                return NULL;
        }
        json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!root) {
                fail(err, "%s: not JSON (line %d: %s)", what, je.line, je.text);
                return NULL;
        }
        if (!json_is_object(root)) {
                json_decref(root);
                fail(err, "%s: not a JSON object", what);
                return NULL;
        }
        return root;
}

static int cdi_oci_parse_state_impl(const char *text, size_t len, struct cdi_oci *ret, struct gs_error *err) {
        json_t *root = load(text, len, "OCI state", err);
        if (!root)
                return -EINVAL;
        int r = 0;
        const json_t *bundle = json_object_get(root, "bundle"), *pid = json_object_get(root, "pid");
        const char *b = json_string_value(bundle);
        if (!b || b[0] != '/' || strlen(b) >= sizeof ret->bundle)
                r = fail(err, "OCI state: \"bundle\" must be an absolute path");
        else if (pid && (!json_is_integer(pid) || json_integer_value(pid) < 0 || json_integer_value(pid) > INT32_MAX))
                r = fail(err, "OCI state: \"pid\" must be a process id");
        else {
                strscpy(ret->bundle, b, sizeof ret->bundle);
                ret->pid = pid ? (int)json_integer_value(pid) : 0;
        }
        json_decref(root);
        return r;
}

void cdi_oci_done(struct cdi_oci *o) {
        if (!o || !o->env)
                return;
        for (size_t i = 0; i < o->n_env; i++)
                free(o->env[i]);
        free(o->env);
        o->env = NULL;
        o->n_env = 0;
}

static int cdi_oci_parse_config_impl(const char *text, size_t len, struct cdi_oci *ret, struct gs_error *err) {
        json_t *root = load(text, len, "config.json", err);
        if (!root)
                return -EINVAL;
        int r = 0;
        const char *path = json_string_value(json_object_get(json_object_get(root, "root"), "path"));
        const json_t *process = json_object_get(root, "process");
        const json_t *env = json_object_get(process, "env");
        if (!path || !path[0])
                r = fail(err, "config.json: no root.path");
        else if (process && !json_is_object(process))
                r = fail(err, "config.json: \"process\" is not an object");
        else if (env && (!json_is_array(env) || json_array_size(env) > OCI_ENV_MAX))
                r = fail(err, "config.json: process.env is not an array of at most %u strings", OCI_ENV_MAX);
        else if (path[0] == '/' ? strlen(path) >= sizeof ret->rootfs
                                : snprintf(ret->rootfs, sizeof ret->rootfs, "%s/%s", ret->bundle, path) >=
                                          (int)sizeof ret->rootfs)
                r = fail(err, "config.json: root.path too long");
        if (r < 0)
                goto out;
        if (path[0] == '/')
                strscpy(ret->rootfs, path, sizeof ret->rootfs);
        size_t n = json_array_size(env);
        char **list = calloc(n + 1, sizeof *list);
        if (!list) {
                r = -ENOMEM;
                fail(err, "out of memory");
                goto out;
        }
        for (size_t i = 0; i < n; i++) {
                const char *s = json_string_value(json_array_get(env, i));
                if (!s || !(list[i] = strdup(s))) {
                        for (size_t k = 0; k < i; k++)
                                free(list[k]);
                        free(list);
                        r = s ? -ENOMEM : fail(err, "config.json: process.env[%zu] is not a string", i);
                        goto out;
                }
        }
        cdi_oci_done(ret);
        ret->env = list;
        ret->n_env = n;
out:
        json_decref(root);
        return r;
}

int cdi_oci_parse_state(const char *text, size_t len, struct cdi_oci *ret, struct gs_error *err) {
        return cdi_fail(err, cdi_oci_parse_state_impl(text, len, ret, err));
}

int cdi_oci_parse_config(const char *text, size_t len, struct cdi_oci *ret, struct gs_error *err) {
        return cdi_fail(err, cdi_oci_parse_config_impl(text, len, ret, err));
}
