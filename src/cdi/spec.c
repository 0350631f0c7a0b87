/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cdi/spec — the CDI spec as a jansson tree, its lowest fitting cdiVersion, and its JSON / YAML
 * text. Pure: no I/O beyond memory streams, no logging.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdi/cdi.h"
#include "interposer/limits.h"
#include "util/limits-dir.h"
#include "util/mps-client.h"
#include "util/util.h"

static bool part_valid(const char *s, size_t n, bool vendor) {
        if (n == 0 || !isalpha((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && !(vendor && s[i] == '.'))
                        return false;
        return true;
}

bool cdi_kind_valid(const char *kind) {
        const char *slash = kind ? strchr(kind, '/') : NULL;
        return slash && part_valid(kind, (size_t)(slash - kind), true) &&
               part_valid(slash + 1, strlen(slash + 1), false);
}

int cdi_spec_file_name(const char *kind, const char *ext, char *buf, size_t len) {
        if (!cdi_kind_valid(kind))
                return -EINVAL;
        int w = snprintf(buf, len, "%s.%s", kind, ext);
        if (w < 0 || (size_t)w >= len)
                return -ENAMETOOLONG;
        *strchr(buf, '/') = '-';
        return 0;
}

static int prefixed(char *buf, size_t len, const char *root, const char *path) {
        size_t rl = strlen(root);
        while (rl > 0 && root[rl - 1] == '/')
                rl--;
        int w = snprintf(buf, len, "%.*s%s", (int)rl, root, path);
        return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

/* Where the runtime on the host finds the trees gpuslice reads: every hostPath of a spec starts with one of these.
 * The host's view when the caller gave one (gpuslice in a container sees the host's /dev under, say, /host), else
 * the same roots gpuslice reads (it runs on the host). The one place a spec's host roots are chosen. */
static void host_roots(const struct cdi_roots *roots, const struct cdi_spec_options *o, const char **ret_dev,
                       const char **ret_drv) {
        const char *dev = roots && roots->dev_root && roots->dev_root[0] ? roots->dev_root : "/";
        const char *drv = roots && roots->driver_root && roots->driver_root[0] ? roots->driver_root : "/";
        *ret_dev = o->host_dev_root && o->host_dev_root[0] ? o->host_dev_root : dev;
        *ret_drv = o->host_driver_root && o->host_driver_root[0] ? o->host_driver_root : drv;
}

/* Append v to the array obj[key], creating it; steals v. */
static int push(json_t *obj, const char *key, json_t *v) {
        if (!v)
                return -ENOMEM;
        json_t *a = json_object_get(obj, key);
        if (!a) {
                a = json_array();
                if (!a || json_object_set_new(obj, key, a) < 0) {
                        json_decref(v);
                        return -ENOMEM;
                }
        }
        return json_array_append_new(a, v) < 0 ? -ENOMEM : 0;
}

static json_t *node_json(const struct cdi_devnode *n, const char *host_dev_root) {
        char host[CDI_PATH_MAX * 2];
        if (prefixed(host, sizeof host, host_dev_root, n->path) < 0)
                return NULL;
        return json_pack("{s:s, s:s, s:s, s:I, s:I}", "path", n->path, "hostPath", host, "type", "c", "major",
                         (json_int_t)n->major, "minor", (json_int_t)n->minor);
}

static json_t *mount_json(const char *host, const char *container, bool ro) {
        return ro ? json_pack("{s:s, s:s, s:[s,s,s,s]}", "hostPath", host, "containerPath", container, "options", "ro",
                              "nosuid", "nodev", "bind")
                  : json_pack("{s:s, s:s, s:[s,s,s]}", "hostPath", host, "containerPath", container, "options",
                              "nosuid", "nodev", "bind");
}

static json_t *device_json(const char *name, json_t *edits) {
        if (!edits)
                return NULL;
        return json_pack("{s:s, s:o}", "name", name, "containerEdits", edits);
}

/* A GPU's edits: its node, and for a shared device the limiter's libraries (limits_dir_libs) and LD_PRELOAD. */
static json_t *gpu_edits(const struct cdi_devnode *n, const char *host_dev_root, const struct limits_dir_libs *libs) {
        char env[sizeof "LD_PRELOAD=" + LIMITS_DIR_PRELOAD_MAX];
        json_t *e = json_object();
        if (!e || push(e, "deviceNodes", node_json(n, host_dev_root)) < 0)
                goto fail;
        for (unsigned i = 0; libs && i < libs->n_mounts; i++)
                if (push(e, "mounts", mount_json(libs->mount[i].host, libs->mount[i].container, true)) < 0)
                        goto fail;
        snprintf(env, sizeof env, "LD_PRELOAD=%s", libs ? libs->preload : "");
        if (libs && push(e, "env", json_string(env)) < 0)
                goto fail;
        return e;
fail:
        json_decref(e);
        return NULL;
}

int cdi_real_nvml(const struct cdi_discovery *d, const struct cdi_roots *roots, const struct cdi_spec_options *o,
                  char *buf, size_t len) {
        const char *host_dev, *host_drv;
        host_roots(roots, o, &host_dev, &host_drv);
        for (size_t i = 0; i < d->n_files; i++)
                if (d->files[i].kind == CDI_FILE_LIBRARY && streq(d->files[i].soname, "libnvidia-ml.so.1"))
                        return prefixed(buf, len, host_drv, d->files[i].source);
        return -ENOENT;
}

/* The limiter's libraries of a spec: the interposer, and the stand-in when the discovery has the real NVML. */
static void spec_libs(const struct cdi_discovery *d, const struct cdi_roots *roots, const struct cdi_spec_options *o,
                      const char *interposer, const char *standin, char *nvml, size_t len,
                      struct limits_dir_libs *ret) {
        if (!standin || cdi_real_nvml(d, roots, o, nvml, len) < 0)
                nvml[0] = 0;
        limits_dir_libs(interposer, standin, nvml, ret);
}

/* A MIG device's edits: its parent's node and its two capability nodes. NULL without memory. */
static json_t *mig_edits(const struct cdi_discovery *d, const struct cdi_mig *m, const char *host_dev_root) {
        json_t *e = json_object();
        if (!e || push(e, "deviceNodes", node_json(&d->gpu[m->gpu], host_dev_root)) < 0 ||
            push(e, "deviceNodes", node_json(&m->gi, host_dev_root)) < 0 ||
            push(e, "deviceNodes", node_json(&m->ci, host_dev_root)) < 0) {
                json_decref(e);
                return NULL;
        }
        return e;
}

/* The edits every device of a spec needs once: control nodes, the driver's files, the hook that makes the
 * library links and runs ldconfig; NVIDIA_VISIBLE_DEVICES=void keeps a legacy hook (NVIDIA's or ours) from
 * injecting the same things a second time. 0, -ENAMETOOLONG or -ENOMEM (common keeps what was added). */
static int common_edits(json_t *common, const struct cdi_discovery *d, const char *host_dev, const char *host_drv,
                        const char *hook_path) {
        char host[CDI_PATH_MAX * 2];
        if (push(common, "env", json_string("NVIDIA_VISIBLE_DEVICES=void")) < 0)
                return -ENOMEM;
        for (unsigned i = 0; i < d->n_control; i++)
                if (push(common, "deviceNodes", node_json(&d->control[i], host_dev)) < 0)
                        return -ENOMEM;
        _cleanup_(json_decrefp) json_t *args = json_pack("[s,s,s]", "gpuslice", "hook", "cdi-links");
        if (!args)
                return -ENOMEM;
        bool links = false;
        for (size_t i = 0; i < d->n_files; i++) {
                const struct cdi_file *f = &d->files[i];
                if (prefixed(host, sizeof host, host_drv, f->source) < 0)
                        return -ENAMETOOLONG;
                if (push(common, "mounts", mount_json(host, f->path, f->kind != CDI_FILE_IPC)) < 0)
                        return -ENOMEM;
                if (f->kind != CDI_FILE_LIBRARY || !f->soname[0])
                        continue;
                const char *base = strrchr(f->path, '/') + 1;
                char link[CDI_PATH_MAX * 2 + 8];
                size_t dl = (size_t)(base - f->path);
                if (!streq(base, f->soname)) {
                        snprintf(link, sizeof link, "%s::%.*s%s", base, (int)dl, f->path, f->soname);
                        if (json_array_append_new(args, json_string("--link")) < 0 ||
                            json_array_append_new(args, json_string(link)) < 0)
                                return -ENOMEM;
                        links = true;
                }
                if (startswith(f->soname, "libcuda.so.")) { /* the development name some loaders ask for */
                        snprintf(link, sizeof link, "%s::%.*slibcuda.so", f->soname, (int)dl, f->path);
                        if (json_array_append_new(args, json_string("--link")) < 0 ||
                            json_array_append_new(args, json_string(link)) < 0)
                                return -ENOMEM;
                }
        }
        for (unsigned i = 0; i < d->n_lib_dirs; i++)
                if (json_array_append_new(args, json_string("--ldconfig")) < 0 ||
                    json_array_append_new(args, json_string(d->lib_dirs[i])) < 0)
                        return -ENOMEM;
        if ((links || d->n_lib_dirs) && hook_path && hook_path[0]) {
                json_t *hook =
                        json_pack("{s:s, s:s, s:O}", "hookName", "createContainer", "path", hook_path, "args", args);
                if (push(common, "hooks", hook) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* lint: long — the CDI spec as the spec's layout reads (devices per GPU, all, shared; then the common edits), one
 * branch per optional part; it fills one json_t that is freed whole on failure. */
int cdi_spec_build(const struct topo *t, const struct cdi_discovery *d, const struct cdi_roots *roots,
                   const struct cdi_spec_options *o, json_t **ret) {
        const char *host_dev, *host_drv;
        int r;
        host_roots(roots, o, &host_dev, &host_drv);
        if (!cdi_kind_valid(o->kind))
                return -EINVAL;
        json_t *spec = json_pack("{s:s, s:s, s:[]}", "cdiVersion", "0.3.0", "kind", o->kind, "devices");
        json_t *common = json_object();
        if (!spec || !common)
                goto oom;
        if (json_object_set_new(spec, "containerEdits", common) < 0) {
                common = NULL;
                goto oom;
        }
        json_t *devices = json_object_get(spec, "devices");

        /* one device per GPU (by index and by UUID), then all; shared devices last */
        json_t *all = json_object();
        if (!all)
                goto oom;
        for (unsigned i = 0; i < t->n_gpus; i++) {
                const struct cdi_devnode *n = &d->gpu[i];
                char name[128];
                if (!n->major)
                        continue;
                snprintf(name, sizeof name, "%d", t->gpu[i].index);
                if (json_array_append_new(devices, device_json(name, gpu_edits(n, host_dev, NULL))) < 0 ||
                    push(all, "deviceNodes", node_json(n, host_dev)) < 0)
                        goto oom_all;
                if (t->gpu[i].uuid[0] &&
                    json_array_append_new(devices, device_json(t->gpu[i].uuid, gpu_edits(n, host_dev, NULL))) < 0)
                        goto oom_all;
        }
        /* one device per MIG device: "<gpu index>:<MIG index>" and its MIG UUID, as NVIDIA's toolkit names them */
        for (size_t i = 0; i < d->n_mig; i++) {
                const struct cdi_mig *m = &d->mig[i];
                char name[64];
                snprintf(name, sizeof name, "%d:%u", t->gpu[m->gpu].index, m->index);
                for (int k = 0; k < 2; k++)
                        if (json_array_append_new(devices, device_json(k ? m->uuid : name, mig_edits(d, m, host_dev))) <
                            0)
                                goto oom_all;
                if (push(all, "deviceNodes", node_json(&m->gi, host_dev)) < 0 ||
                    push(all, "deviceNodes", node_json(&m->ci, host_dev)) < 0)
                        goto oom_all;
        }
        if (json_object_size(all) == 0)
                json_decref(all);
        else if (json_array_append_new(devices, device_json("all", all)) < 0)
                goto oom;
        struct limits_dir_libs libs;
        char nvml[CDI_PATH_MAX * 2];
        spec_libs(d, roots, o, o->interposer, o->nvml_standin, nvml, sizeof nvml, &libs);
        if (o->interposer)
                for (unsigned i = 0; i < t->n_gpus; i++) {
                        const struct cdi_devnode *n = &d->gpu[i];
                        char name[160];
                        if (!n->major)
                                continue;
                        snprintf(name, sizeof name, "%d-shared", t->gpu[i].index);
                        if (json_array_append_new(devices, device_json(name, gpu_edits(n, host_dev, &libs))) < 0)
                                goto oom;
                        snprintf(name, sizeof name, "%s-shared", t->gpu[i].uuid);
                        if (t->gpu[i].uuid[0] &&
                            json_array_append_new(devices, device_json(name, gpu_edits(n, host_dev, &libs))) < 0)
                                goto oom;
                }

        r = common_edits(common, d, host_dev, host_drv, o->hook_path);
        if (r < 0) {
                json_decref(spec);
                return r;
        }
        if (json_object_set_new(spec, "cdiVersion", json_string(cdi_spec_min_version(spec))) < 0)
                goto oom;
        *ret = spec;
        return 0;
oom_all:
        json_decref(all);
oom:
        json_decref(spec);
        return -ENOMEM;
}

static int limiter_edits(json_t *common, const struct cdi_claim_limits *l, const struct limits_dir_libs *libs) {
        char host[CDI_PATH_MAX * 2];
        snprintf(host, sizeof host, "LD_PRELOAD=%s", libs->preload);
        if (push(common, "env", json_string(host)) < 0 ||
            push(common, "env", json_string(GS_LIMITS_ENV "=" LIMITS_DIR_CONTAINER_LIMITS)) < 0)
                return -ENOMEM;
        static const struct {
                const char *file, *container;
                bool ro;
        } m[] = {
                { LIMITS_DIR_LIMITS_FILE, LIMITS_DIR_CONTAINER_LIMITS, true },
                { LIMITS_DIR_SHM_DIR, LIMITS_DIR_CONTAINER_SHM, false },
                { LIMITS_DIR_PRELOAD_FILE, LIMITS_DIR_CONTAINER_PRELOAD, true },
        };
        for (size_t i = 0; i < ELEMENTSOF(m); i++) {
                int w = snprintf(host, sizeof host, "%s/%s", l->dir, m[i].file);
                if (w < 0 || (size_t)w >= sizeof host)
                        return -ENAMETOOLONG;
                if (push(common, "mounts", mount_json(host, m[i].container, m[i].ro)) < 0)
                        return -ENOMEM;
        }
        for (unsigned i = 0; i < libs->n_mounts; i++)
                if (push(common, "mounts", mount_json(libs->mount[i].host, libs->mount[i].container, true)) < 0)
                        return -ENOMEM;
        return 0;
}

int cdi_claim_spec_build(const struct topo *t, const struct cdi_discovery *d, const struct cdi_roots *roots,
                         const struct cdi_spec_options *o, const struct cdi_claim_device *dev, size_t n,
                         const struct cdi_claim_limits *limits, json_t **ret) {
        const char *host_dev, *host_drv;
        host_roots(roots, o, &host_dev, &host_drv);
        if (!cdi_kind_valid(o->kind) || (limits && (!limits->dir || !limits->interposer)))
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (dev[i].gpu >= t->n_gpus || !d->gpu[dev[i].gpu].major || !cdi_name_valid(dev[i].name) ||
                    (dev[i].mig && dev[i].mig->gpu != dev[i].gpu))
                        return -EINVAL;
        _cleanup_(json_decrefp) json_t *spec = json_pack("{s:s, s:s, s:[], s:{}}", "cdiVersion", "0.3.0", "kind",
                                                         o->kind, "devices", "containerEdits");
        if (!spec)
                return -ENOMEM;
        json_t *devices = json_object_get(spec, "devices"), *common = json_object_get(spec, "containerEdits");
        for (size_t i = 0; i < n; i++)
                if (json_array_append_new(
                            devices,
                            device_json(dev[i].name, dev[i].mig ? mig_edits(d, dev[i].mig, host_dev)
                                                                : gpu_edits(&d->gpu[dev[i].gpu], host_dev, NULL))) < 0)
                        return -ENOMEM;
        int r = common_edits(common, d, host_dev, host_drv, o->hook_path);
        if (r == 0 && limits) {
                struct limits_dir_libs libs;
                char nvml[CDI_PATH_MAX * 2];
                spec_libs(d, roots, o, limits->interposer, limits->nvml_standin, nvml, sizeof nvml, &libs);
                r = limiter_edits(common, limits, &libs);
        }
        if (r < 0)
                return r;
        if (json_object_set_new(spec, "cdiVersion", json_string(cdi_spec_min_version(spec))) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(spec);
        return 0;
}

int cdi_spec_add_mps(json_t *spec, const struct mps_client *c, const char *const *env, size_t n_env) {
        json_t *common = json_object_get(spec, "containerEdits");
        if (!json_is_object(common) || push(common, "env", json_string(c->env)) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < n_env; i++)
                if (push(common, "env", json_string(env[i])) < 0)
                        return -ENOMEM;
        for (unsigned i = 0; i < c->n_mounts; i++)
                if (push(common, "mounts", mount_json(c->mount[i].host, c->mount[i].container, false)) < 0)
                        return -ENOMEM;
        return 0;
}

bool cdi_name_valid(const char *name) {
        if (!name || !name[0] || strlen(name) > 255)
                return false;
        for (const char *c = name; *c; c++)
                if (!isalnum((unsigned char)*c) && *c != '_' && *c != '.' && *c != ':' && *c != '-')
                        return false;
        return true;
}

static int version_need(const json_t *edits) {
        int need = 3;
        const json_t *v;
        size_t i;
        json_array_foreach(json_object_get(edits, "deviceNodes"), i, v) {
                if (json_object_get(v, "hostPath"))
                        need = MAX(need, 5);
        }
        json_array_foreach(json_object_get(edits, "mounts"), i, v) {
                if (json_object_get(v, "type"))
                        need = MAX(need, 4);
        }
        return need;
}

const char *cdi_spec_min_version(const json_t *spec) {
        int need = 3;
        const json_t *dev;
        size_t i;
        need = MAX(need, version_need(json_object_get(spec, "containerEdits")));
        if (json_object_get(spec, "annotations"))
                need = MAX(need, 6);
        json_array_foreach(json_object_get(spec, "devices"), i, dev) {
                const char *name = json_string_value(json_object_get(dev, "name"));
                if (name && isdigit((unsigned char)name[0]))
                        need = MAX(need, 5);
                if (json_object_get(dev, "annotations"))
                        need = MAX(need, 6);
                need = MAX(need, version_need(json_object_get(dev, "containerEdits")));
        }
        return need >= 6 ? "0.6.0" : need == 5 ? "0.5.0" : need == 4 ? "0.4.0" : "0.3.0";
}

int cdi_format_json(const json_t *v, char **ret) {
        char *s = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (!s)
                return -ENOMEM;
        size_t n = strlen(s);
        char *t = realloc(s, n + 2);
        if (!t) {
                free(s);
                return -ENOMEM;
        }
        t[n] = '\n';
        t[n + 1] = '\0';
        *ret = t;
        return 0;
}

/* ---- YAML ---- */

static void yaml_string(FILE *f, const char *s) {
        fputc('"', f);
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if (*p == '"' || *p == '\\')
                        fprintf(f, "\\%c", *p);
                else if (*p < 0x20 || *p == 0x7f)
                        fprintf(f, "\\u%04x", *p);
                else
                        fputc(*p, f);
        }
        fputc('"', f);
}

static bool plain_key(const char *k) {
        if (!*k)
                return false;
        for (const char *p = k; *p; p++)
                if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-')
                        return false;
        return true;
}

static int yaml_scalar(FILE *f, const json_t *v) {
        switch (json_typeof(v)) {
                case JSON_STRING: yaml_string(f, json_string_value(v)); return 0;
                case JSON_INTEGER: fprintf(f, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); return 0;
                case JSON_TRUE: fputs("true", f); return 0;
                case JSON_FALSE: fputs("false", f); return 0;
                case JSON_NULL: fputs("null", f); return 0;
                case JSON_OBJECT: fputs("{}", f); return 0; /* only reached when empty */
                case JSON_ARRAY: fputs("[]", f); return 0;
                default: return -EINVAL;
        }
}

static bool is_block(const json_t *v) {
        return (json_is_object(v) && json_object_size(v) > 0) || (json_is_array(v) && json_array_size(v) > 0);
}

static int yaml_block(FILE *f, const json_t *v, int indent, bool first_inline);

static int yaml_block(FILE *f, const json_t *v, int indent, bool first_inline) {
        int r = 0;
        if (json_is_object(v)) {
                const char *k;
                const json_t *c;
                bool first = true;
                json_object_foreach((json_t *)v, k, c) {
                        if (!(first && first_inline))
                                fprintf(f, "%*s", indent, "");
                        first = false;
                        if (plain_key(k))
                                fputs(k, f);
                        else
                                yaml_string(f, k);
                        fputc(':', f);
                        if (is_block(c)) {
                                fputc('\n', f);
                                if ((r = yaml_block(f, c, indent + 2, false)) < 0)
                                        return r;
                        } else {
                                fputc(' ', f);
                                if ((r = yaml_scalar(f, c)) < 0)
                                        return r;
                                fputc('\n', f);
                        }
                }
                return 0;
        }
        size_t i;
        const json_t *c;
        bool first = true;
        json_array_foreach(v, i, c) {
                if (!(first && first_inline))
                        fprintf(f, "%*s", indent, "");
                first = false;
                fputs("- ", f);
                if (json_is_object(c) && json_object_size(c) > 0)
                        r = yaml_block(f, c, indent + 2, true);
                else if (is_block(c)) {
                        fputc('\n', f);
                        r = yaml_block(f, c, indent + 2, false);
                } else {
                        r = yaml_scalar(f, c);
                        fputc('\n', f);
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

int cdi_format_yaml(const json_t *v, char **ret) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f)
                return -ENOMEM;
        int r;
        if (is_block(v))
                r = yaml_block(f, v, 0, false);
        else {
                r = yaml_scalar(f, v);
                fputc('\n', f);
        }
        if (fclose(f) != 0 && r == 0)
                r = -ENOMEM;
        if (r < 0) {
                free(buf);
                return r;
        }
        *ret = buf;
        return 0;
}
