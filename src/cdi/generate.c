/* SPDX-License-Identifier: Apache-2.0 */
/* cdi/generate — discovery, the spec and its text in one call, for `gpuslice cdi generate` and the
 * node agent; the file is written with the project's atomic writer (util/atomic-file.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cdi/cdi.h"
#include "util/atomic-file.h"
#include "util/error.h"
#include "util/util.h"

/* What every public function returns: r, recorded in err->code when it is a failure. */
static int cdi_fail(struct gs_error *err, int r) {
        if (r < 0 && err)
                err->code = r;
        return r;
}

static int cdi_generate_text_impl(const struct topo *t, const struct cdi_generate *g, char **ret,
                                  struct gs_error *err) {
        struct cdi_discovery d;
        int r = cdi_discover(t, &g->roots, g->caps ? g->caps : CDI_CAP_ALL, &d, err);
        if (r < 0)
                return r;
        unsigned nodes = 0;
        for (unsigned i = 0; i < t->n_gpus; i++)
                nodes += d.gpu[i].major != 0;
        if (t->n_gpus > 0 && nodes == 0) {
                cdi_discovery_done(&d);
                gs_error_set(err, -EINVAL, "no GPU device node (/dev/nvidia<minor>, a character device) under %s",
                             g->roots.dev_root ? g->roots.dev_root : "/");
                return -ENODEV;
        }
        if (g->mig && (r = cdi_discover_mig(t, g->mig, &g->roots, g->mig_minors, &d, err)) < 0) {
                cdi_discovery_done(&d);
                return r;
        }
        json_t *spec = NULL;
        r = cdi_spec_build(t, &d, &g->roots, &g->spec, &spec);
        cdi_discovery_done(&d);
        if (r < 0) {
                gs_error_set(err, -EINVAL, "%s",
                             r == -EINVAL ? "the CDI kind must be vendor/class (e.g. nvidia.com/gpu)" : strerror(-r));
                return r;
        }
        r = g->json ? cdi_format_json(spec, ret) : cdi_format_yaml(spec, ret);
        json_decref(spec);
        if (r < 0)
                gs_error_set(err, -EINVAL, "%s", strerror(-r));
        return r;
}

static int cdi_generate_file_impl(const struct topo *t, const struct cdi_generate *g, const char *path,
                                  struct gs_error *err) {
        _cleanup_(freep) char *text = NULL;
        int r = cdi_generate_text(t, g, &text, err);
        if (r < 0)
                return r;
        /* engines create /var/run/cdi lazily: make it (one level) when it is missing */
        char dir[CDI_PATH_MAX];
        const char *slash = strrchr(path, '/');
        if (slash && slash != path && (size_t)(slash - path) < sizeof dir) {
                strnscpy(dir, sizeof dir, path, (size_t)(slash - path));
                if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
                        gs_error_set(err, -EINVAL, "cannot create %s: %s", dir, strerror(errno));
                        return -errno;
                }
        }
        r = atomic_file_write(path, text, strlen(text), 0644, 0);
        if (r < 0)
                gs_error_set(err, -EINVAL, "cannot write %s: %s", path, strerror(-r));
        return r;
}

static int cdi_agent_refresh_impl(const struct topo *t, const struct cdi_generate *in, char *ret_path, size_t path_len,
                                  struct gs_error *err) {
        const char *out = secure_getenv("GPUSLICE_CDI_SPEC");
        if (out && streq(out, "none"))
                return 1;
        struct cdi_generate g = *in;
        const char *kind = g.spec.kind;
        char minors[CDI_PATH_MAX];
        if (g.mig && !g.mig_minors) { /* the driver's mig-minors as the agent sees the host: under the dev root */
                const char *root = g.roots.dev_root && g.roots.dev_root[0] ? g.roots.dev_root : "/";
                size_t rl = strlen(root);
                while (rl > 0 && root[rl - 1] == '/')
                        rl--;
                snprintf(minors, sizeof minors, "%.*s%s", (int)MIN(rl, (size_t)3000), root, CDI_MIG_MINORS);
                g.mig_minors = minors;
        }
        if (out && out[0])
                strscpy(ret_path, out, path_len);
        else {
                char name[400];
                if (cdi_spec_file_name(kind, "yaml", name, sizeof name) < 0) {
                        gs_error_set(err, -EINVAL, "bad CDI kind '%s'", kind ? kind : "");
                        return -EINVAL;
                }
                snprintf(ret_path, path_len, "/var/run/cdi/%s", name);
        }
        size_t l = strlen(ret_path);
        g.json = l > 5 && streq(ret_path + l - 5, ".json");
        return cdi_generate_file(t, &g, ret_path, err);
}

int cdi_generate_text(const struct topo *t, const struct cdi_generate *g, char **ret, struct gs_error *err) {
        return cdi_fail(err, cdi_generate_text_impl(t, g, ret, err));
}

int cdi_generate_file(const struct topo *t, const struct cdi_generate *g, const char *path, struct gs_error *err) {
        return cdi_fail(err, cdi_generate_file_impl(t, g, path, err));
}

int cdi_agent_refresh(const struct topo *t, const struct cdi_generate *g, char *ret_path, size_t path_len,
                      struct gs_error *err) {
        return cdi_fail(err, cdi_agent_refresh_impl(t, g, ret_path, path_len, err));
}
