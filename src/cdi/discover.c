/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cdi/discover — what the node offers a GPU container: device nodes (major/minor read from the
 * nodes themselves), the driver's libraries by capability (through the ld cache under the driver
 * root, only files named lib*.so.<driver version>), binaries and IPC sockets. Reads only; symlinks
 * are resolved inside the driver root, never out of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cdi/cdi.h"
#include "util/error.h"
#include "util/util.h"

/* What every public function returns: r, recorded in err->code when it is a failure. */
static int cdi_fail(struct gs_error *err, int r) {
        if (r < 0 && err)
                err->code = r;
        return r;
}

/* Library base names (the soname up to ".so") by capability, as NVIDIA's toolkit groups them. */
static const struct {
        unsigned cap;
        const char *base;
} libraries[] = {
        { CDI_CAP_UTILITY, "libnvidia-ml" },
        { CDI_CAP_UTILITY, "libnvidia-cfg" },
        { CDI_CAP_COMPUTE, "libcuda" },
        { CDI_CAP_COMPUTE, "libcudadebugger" },
        { CDI_CAP_COMPUTE, "libnvidia-opencl" },
        { CDI_CAP_COMPUTE, "libnvidia-ptxjitcompiler" },
        { CDI_CAP_COMPUTE, "libnvidia-fatbinaryloader" },
        { CDI_CAP_COMPUTE, "libnvidia-allocator" },
        { CDI_CAP_COMPUTE, "libnvidia-compiler" },
        { CDI_CAP_COMPUTE, "libnvidia-nvvm" },
        { CDI_CAP_COMPUTE, "libnvidia-gpucomp" },
        { CDI_CAP_VIDEO, "libvdpau_nvidia" },
        { CDI_CAP_VIDEO, "libnvidia-encode" },
        { CDI_CAP_VIDEO, "libnvidia-opticalflow" },
        { CDI_CAP_VIDEO, "libnvcuvid" },
        { CDI_CAP_GRAPHICS, "libnvidia-eglcore" },
        { CDI_CAP_GRAPHICS, "libnvidia-glcore" },
        { CDI_CAP_GRAPHICS, "libnvidia-tls" },
        { CDI_CAP_GRAPHICS, "libnvidia-glsi" },
        { CDI_CAP_GRAPHICS, "libnvidia-fbc" },
        { CDI_CAP_GRAPHICS, "libnvidia-ifr" },
        { CDI_CAP_GRAPHICS, "libnvidia-rtcore" },
        { CDI_CAP_GRAPHICS, "libnvoptix" },
        { CDI_CAP_GRAPHICS, "libGLX_nvidia" },
        { CDI_CAP_GRAPHICS, "libEGL_nvidia" },
        { CDI_CAP_GRAPHICS, "libGLESv2_nvidia" },
        { CDI_CAP_GRAPHICS, "libGLESv1_CM_nvidia" },
        { CDI_CAP_GRAPHICS, "libnvidia-glvkspirv" },
};

static const struct {
        unsigned cap;
        const char *name;
} binaries[] = {
        { CDI_CAP_UTILITY, "nvidia-smi" },
        { CDI_CAP_UTILITY, "nvidia-debugdump" },
        { CDI_CAP_UTILITY, "nvidia-persistenced" },
        { CDI_CAP_COMPUTE, "nvidia-cuda-mps-control" },
        { CDI_CAP_COMPUTE, "nvidia-cuda-mps-server" },
};
static const char *const bin_dirs[] = { "/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/local/bin" };

static const struct {
        unsigned cap;
        const char *path;
        bool dir;
} ipcs[] = {
        { CDI_CAP_UTILITY, "/run/nvidia-persistenced/socket", false },
        { CDI_CAP_UTILITY, "/var/run/nvidia-persistenced/socket", false },
        { CDI_CAP_UTILITY, "/run/nvidia-fabricmanager/socket", false },
        { CDI_CAP_UTILITY, "/var/run/nvidia-fabricmanager/socket", false },
        { CDI_CAP_COMPUTE, "/tmp/nvidia-mps", true },
};

static const char *const control_nodes[] = { "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset" };

int cdi_caps_parse(const char *s, unsigned *ret, const char **ret_bad) {
        static const struct {
                const char *name;
                unsigned bits;
        } names[] = {
                { "utility", CDI_CAP_UTILITY },
                { "compute", CDI_CAP_COMPUTE },
                { "video", CDI_CAP_VIDEO },
                { "graphics", CDI_CAP_GRAPHICS },
                { "display", CDI_CAP_GRAPHICS },
                { "all", CDI_CAP_ALL },
                { "compat32", 0 }, /* 32-bit libraries: accepted, not provided */
        };
        unsigned bits = 0;
        const char *p = s;
        while (p && *p) {
                const char *end = strchr(p, ',');
                size_t n = end ? (size_t)(end - p) : strlen(p);
                bool found = n == 0;
                for (size_t i = 0; i < ELEMENTSOF(names) && !found; i++)
                        if (strlen(names[i].name) == n && strncmp(p, names[i].name, n) == 0) {
                                bits |= names[i].bits;
                                found = true;
                        }
                if (!found) {
                        if (ret_bad)
                                *ret_bad = p;
                        return -EINVAL;
                }
                p = end ? end + 1 : NULL;
        }
        *ret = bits;
        return 0;
}

_printf_(2, 3) static int fail(struct gs_error *err, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        (void)gs_error_setv(err, -EINVAL, fmt, ap);
        va_end(ap);
        return 0;
}

static int join(char *buf, size_t len, const char *root, const char *path) {
        size_t rl = strlen(root);
        while (rl > 0 && root[rl - 1] == '/')
                rl--;
        int w = snprintf(buf, len, "%.*s%s%s", (int)rl, root, path[0] == '/' ? "" : "/", path);
        return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

/* Resolve `path` (absolute, inside root) through symlinks, staying inside root: the final in-root
 * path into ret (CDI_PATH_MAX). Only the last component's links are followed (the ld cache points
 * at a soname link next to its file; directories are taken as they are). */
static int resolve_in_root(const char *root, const char *path, char *ret) {
        char cur[CDI_PATH_MAX], full[CDI_PATH_MAX * 2], target[CDI_PATH_MAX];
        if (strlen(path) >= sizeof cur || path[0] != '/')
                return -ENAMETOOLONG;
        strscpy(cur, path, sizeof cur);
        for (int hop = 0; hop < 16; hop++) {
                if (join(full, sizeof full, root, cur) < 0)
                        return -ENAMETOOLONG;
                struct stat st;
                if (lstat(full, &st) < 0)
                        return -errno;
                if (!S_ISLNK(st.st_mode)) {
                        strscpy(ret, cur, CDI_PATH_MAX);
                        return 0;
                }
                ssize_t n = readlink(full, target, sizeof target - 1);
                if (n < 0)
                        return -errno;
                target[n] = '\0';
                if (target[0] == '/')
                        strscpy(cur, target, sizeof cur);
                else {
                        char *slash = strrchr(cur, '/');
                        size_t dl = (size_t)(slash - cur) + 1;
                        if (dl + (size_t)n >= sizeof cur)
                                return -ENAMETOOLONG;
                        memcpy(cur + dl, target, (size_t)n + 1);
                }
                if (strstr(cur, "/../") || (strlen(cur) >= 3 && streq(cur + strlen(cur) - 3, "/..")))
                        return -ELOOP; /* would climb: refuse rather than leave the root */
        }
        return -ELOOP;
}

static int add_file(struct cdi_discovery *d, size_t *cap_files, enum cdi_file_kind kind, unsigned cap, const char *path,
                    const char *source, const char *soname) {
        for (size_t i = 0; i < d->n_files; i++)
                if (streq(d->files[i].path, path))
                        return 0;
        if (array_reserve(&d->files, cap_files, d->n_files + 1, 32) < 0)
                return -ENOMEM;
        struct cdi_file *f = &d->files[d->n_files++];
        memset(f, 0, sizeof *f);
        f->kind = kind;
        f->cap = cap;
        strscpy(f->path, path, sizeof f->path);
        strscpy(f->source, source, sizeof f->source);
        strscpy(f->soname, soname ? soname : "", sizeof f->soname);
        return 0;
}

struct lib_walk {
        struct cdi_discovery *d;
        size_t cap_files;
        const char *root;
        unsigned caps;
        char suffix[96]; /* ".so.535.104.05" */
        int error;
};

static int on_entry(const struct gs_ldcache_entry *e, void *userdata) {
        struct lib_walk *w = userdata;
        if (!gs_ldcache_native(e->flags))
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(libraries); i++) {
                size_t bl = strlen(libraries[i].base);
                if (!(w->caps & libraries[i].cap) || strncmp(e->soname, libraries[i].base, bl) != 0 ||
                    !startswith(e->soname + bl, ".so"))
                        continue;
                char real[CDI_PATH_MAX], full[CDI_PATH_MAX * 2];
                if (resolve_in_root(w->root, e->path, real) < 0)
                        return 0; /* a stale cache entry: skip it */
                const char *base = strrchr(real, '/') + 1;
                size_t rl = strlen(base), sl = strlen(w->suffix);
                if (rl <= sl || !streq(base + rl - sl, w->suffix))
                        return 0; /* not this driver's file (another version, or a non-NVIDIA lib) */
                struct stat st;
                if (join(full, sizeof full, w->root, real) < 0 || stat(full, &st) < 0 || !S_ISREG(st.st_mode))
                        return 0;
                int r = add_file(w->d, &w->cap_files, CDI_FILE_LIBRARY, libraries[i].cap, real, real, e->soname);
                if (r < 0)
                        return r;
                char dir[CDI_PATH_MAX];
                strnscpy(dir, sizeof dir, real, (size_t)(base - real - 1));
                bool seen = false;
                for (unsigned k = 0; k < w->d->n_lib_dirs; k++)
                        seen |= streq(w->d->lib_dirs[k], dir);
                if (!seen && w->d->n_lib_dirs < ELEMENTSOF(w->d->lib_dirs))
                        strscpy(w->d->lib_dirs[w->d->n_lib_dirs++], dir, CDI_PATH_MAX);
                return 0;
        }
        return 0;
}

static bool devnode(const char *dev_root, const char *name, struct cdi_devnode *ret) {
        char full[CDI_PATH_MAX];
        struct stat st;
        snprintf(ret->path, sizeof ret->path, "/dev/%s", name);
        if (join(full, sizeof full, dev_root, ret->path) < 0 || stat(full, &st) < 0 || !S_ISCHR(st.st_mode))
                return false;
        ret->major = major(st.st_rdev);
        ret->minor = minor(st.st_rdev);
        ret->type = 'c';
        return true;
}

static void find_nodes(const struct topo *t, const char *dev_root, struct cdi_discovery *d) {
        for (size_t i = 0; i < ELEMENTSOF(control_nodes); i++)
                if (devnode(dev_root, control_nodes[i], &d->control[d->n_control]))
                        d->n_control++;
        for (unsigned i = 0; i < t->n_gpus && i < TOPO_MAX_GPUS; i++) {
                char name[32];
                if (t->gpu[i].minor < 0)
                        continue;
                snprintf(name, sizeof name, "nvidia%d", t->gpu[i].minor);
                if (!devnode(dev_root, name, &d->gpu[i]))
                        memset(&d->gpu[i], 0, sizeof d->gpu[i]);
        }
}

void cdi_discover_nodes(const struct topo *t, const struct cdi_roots *roots, struct cdi_discovery *ret) {
        memset(ret, 0, sizeof *ret);
        strscpy(ret->driver_version, t->driver_version, sizeof ret->driver_version);
        find_nodes(t, roots && roots->dev_root ? roots->dev_root : "/", ret);
}

void cdi_discovery_done(struct cdi_discovery *d) {
        if (!d)
                return;
        free(d->files);
        d->files = NULL;
        d->n_files = 0;
        free(d->mig);
        d->mig = NULL;
        d->n_mig = 0;
}

static int cdi_discover_mig_impl(const struct topo *t, const struct mig_node *mig, const struct cdi_roots *roots,
                                 const char *mig_minors, struct cdi_discovery *d, struct gs_error *err) {
        const char *dev_root = roots && roots->dev_root ? roots->dev_root : "/";
        size_t total = 0;
        for (unsigned g = 0; g < mig->n_gpus && g < t->n_gpus; g++)
                total += mig->gpu[g].mode == 1 ? mig->gpu[g].n_devices : 0;
        if (total == 0)
                return 0;
        _cleanup_(freep) char *text = NULL;
        size_t len = 0;
        int r = read_file(mig_minors, MIG_MINORS_MAX, &text, &len);
        if (r < 0) {
                fail(err, "the node has MIG devices but %s cannot be read: %s", mig_minors, strerror(-r));
                return r;
        }
        struct cdi_mig *out = calloc(total, sizeof *out);
        if (!out)
                return -ENOMEM;
        size_t n = 0;
        for (unsigned g = 0; g < mig->n_gpus && g < t->n_gpus; g++) {
                if (mig->gpu[g].mode != 1 || mig->gpu[g].n_devices == 0)
                        continue;
                if (!d->gpu[g].major || t->gpu[g].minor < 0) {
                        free(out);
                        fail(err, "GPU %u has MIG devices but no device node /dev/nvidia<minor>", g);
                        return -ENODEV;
                }
                for (unsigned k = 0; k < mig->gpu[g].n_devices; k++) {
                        const struct mig_device *md = &mig->gpu[g].dev[k];
                        struct cdi_mig *x = &out[n];
                        unsigned gi_minor, ci_minor;
                        char gi_name[48], ci_name[48];
                        x->gpu = g;
                        x->index = md->index;
                        strscpy(x->uuid, md->uuid, sizeof x->uuid);
                        r = mig_minors_lookup(text, len, (unsigned)t->gpu[g].minor, md->gi, md->ci, &gi_minor,
                                              &ci_minor);
                        if (r == 0) {
                                snprintf(gi_name, sizeof gi_name, "nvidia-caps/nvidia-cap%u", gi_minor);
                                snprintf(ci_name, sizeof ci_name, "nvidia-caps/nvidia-cap%u", ci_minor);
                                if (!devnode(dev_root, gi_name, &x->gi) || !devnode(dev_root, ci_name, &x->ci))
                                        r = -ENOENT;
                        }
                        if (r < 0) {
                                free(out);
                                fail(err,
                                     "MIG device %u:%u (GPU %d, GI %u, CI %u): no capability nodes for "
                                     "gpu%d/gi%u/access and .../ci%u/access (%s, /dev/nvidia-caps under %s; "
                                     "`nvidia-smi` or `nvidia-modprobe -f` makes them)",
                                     g, md->index, t->gpu[g].minor, md->gi, md->ci, t->gpu[g].minor, md->gi, md->ci,
                                     mig_minors, dev_root);
                                return -ENOENT;
                        }
                        n++;
                }
        }
        free(d->mig);
        d->mig = out;
        d->n_mig = n;
        return 0;
}

int cdi_discover_mig(const struct topo *t, const struct mig_node *mig, const struct cdi_roots *roots,
                     const char *mig_minors, struct cdi_discovery *d, struct gs_error *err) {
        return cdi_fail(err, cdi_discover_mig_impl(t, mig, roots, mig_minors ? mig_minors : CDI_MIG_MINORS, d, err));
}

/* lint: long — discovery of the driver's files: device nodes, libraries through the ld cache, binaries, IPC
 * sockets, each kind a loop with its own checks, all filling one result that is freed whole on failure. */
static int cdi_discover_impl(const struct topo *t, const struct cdi_roots *roots, unsigned caps,
                             struct cdi_discovery *ret, struct gs_error *err) {
        const char *dev_root = roots && roots->dev_root ? roots->dev_root : "/";
        const char *drv_root = roots && roots->driver_root ? roots->driver_root : "/";
        struct cdi_discovery d;
        memset(&d, 0, sizeof d);
        strscpy(d.driver_version, t->driver_version, sizeof d.driver_version);
        if (!d.driver_version[0]) {
                fail(err, "the driver version is unknown (NVML did not say)");
                return -ENODATA;
        }

        find_nodes(t, dev_root, &d);

        /* libraries through the ld cache */
        char path[CDI_PATH_MAX];
        _cleanup_(freep) char *cache = NULL;
        size_t len = 0;
        if (join(path, sizeof path, drv_root, "/etc/ld.so.cache") < 0)
                return -ENAMETOOLONG;
        int r = read_file(path, GS_LDCACHE_MAX, &cache, &len);
        if (r < 0) {
                fail(err, "cannot read the driver root's ld cache %s: %s", path, strerror(-r));
                return r;
        }
        struct lib_walk w = { .d = &d, .root = drv_root, .caps = caps };
        snprintf(w.suffix, sizeof w.suffix, ".so.%s", d.driver_version);
        r = gs_ldcache_parse(cache, len, on_entry, &w);
        if (r < 0) {
                cdi_discovery_done(&d);
                fail(err, r == -EBADMSG ? "%s is not a well-formed ld.so.cache" : "%s: %s", path, strerror(-r));
                return r;
        }
        bool any_lib = d.n_files > 0;

        for (size_t i = 0; i < ELEMENTSOF(binaries); i++) {
                if (!(caps & binaries[i].cap))
                        continue;
                for (size_t k = 0; k < ELEMENTSOF(bin_dirs); k++) {
                        char in_root[CDI_PATH_MAX], real[CDI_PATH_MAX], full[CDI_PATH_MAX * 2];
                        struct stat st;
                        snprintf(in_root, sizeof in_root, "%s/%s", bin_dirs[k], binaries[i].name);
                        if (resolve_in_root(drv_root, in_root, real) < 0 ||
                            join(full, sizeof full, drv_root, real) < 0 || stat(full, &st) < 0 || !S_ISREG(st.st_mode))
                                continue;
                        /* mounted where the container looks for it: the name it was found under */
                        if ((r = add_file(&d, &w.cap_files, CDI_FILE_BINARY, binaries[i].cap, in_root, real, NULL)) < 0)
                                goto oom;
                        break;
                }
        }
        for (size_t i = 0; i < ELEMENTSOF(ipcs); i++) {
                char full[CDI_PATH_MAX * 2];
                struct stat st;
                if (!(caps & ipcs[i].cap) || join(full, sizeof full, drv_root, ipcs[i].path) < 0 ||
                    lstat(full, &st) < 0)
                        continue;
                if (ipcs[i].dir ? !S_ISDIR(st.st_mode) : !S_ISSOCK(st.st_mode))
                        continue;
                if ((r = add_file(&d, &w.cap_files, CDI_FILE_IPC, ipcs[i].cap, ipcs[i].path, ipcs[i].path, NULL)) < 0)
                        goto oom;
        }
        if (!any_lib && (caps & (CDI_CAP_UTILITY | CDI_CAP_COMPUTE))) {
                cdi_discovery_done(&d);
                fail(err, "no library of driver %s (lib*.so.%s) in %s", d.driver_version, d.driver_version, path);
                return -ENODATA;
        }
        *ret = d;
        return 0;
oom:
        cdi_discovery_done(&d);
        fail(err, "out of memory");
        return r;
}

int cdi_discover(const struct topo *t, const struct cdi_roots *roots, unsigned caps, struct cdi_discovery *ret,
                 struct gs_error *err) {
        return cdi_fail(err, cdi_discover_impl(t, roots, caps, ret, err));
}
