/* SPDX-License-Identifier: Apache-2.0 */
/* limits-dir — one container's limits directory (limits-dir.h). */
#include "util/limits-dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/atomic-file.h"
#include "util/util.h"

/* Remove PARENT/NAME, DEPTH directory levels below it at most. */
static int remove_tree_at(int parent, const char *name, unsigned depth) {
        int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return unlinkat(parent, name, 0) < 0 && errno != ENOENT ? -errno : 0;
        DIR *d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                close(fd);
                return r;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (de->d_type == DT_DIR && depth > 0)
                        (void)remove_tree_at(dirfd(d), de->d_name, depth - 1);
                else
                        (void)unlinkat(dirfd(d), de->d_name, 0);
        }
        closedir(d);
        return unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}

int limits_dir_remove_at(int parent, const char *name) {
        if (!name || !*name)
                return -EINVAL;
        return remove_tree_at(parent, name, 2);
}

static int fail(int r, struct gs_error *err, const char *what, const char *root, const char *name) {
        return gs_error_set(err, r, "cannot %s %.180s%s%.60s: %s", what, root, name ? "/" : "", name ? name : "",
                            strerror(-r));
}

int limits_dir_create(const char *root, const char *name, bool fresh, struct gs_error *err) {
        if (!root || !*root || !name || !*name || strchr(name, '/') || streq(name, ".") || streq(name, ".."))
                return fail(-EINVAL, err, "use", root ? root : "", name);
        if (mkdir(root, 0755) < 0 && errno != EEXIST)
                return fail(-errno, err, "create", root, NULL);
        _cleanup_(closep) int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (rfd < 0)
                return fail(-errno, err, "open", root, NULL);
        if (fresh)
                (void)remove_tree_at(rfd, name, 2);
        if (mkdirat(rfd, name, 0755) < 0 && errno != EEXIST)
                return fail(-errno, err, "create", root, name);
        int dfd = openat(rfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return fail(-errno, err, "open", root, name);
        /* The region is created by the first process of the container, whatever its user. */
        if ((mkdirat(dfd, LIMITS_DIR_SHM_DIR, 0777) < 0 && errno != EEXIST) ||
            fchmodat(dfd, LIMITS_DIR_SHM_DIR, 0777, 0) < 0) {
                int r = -errno;
                close(dfd);
                return gs_error_set(err, r, "cannot create the region dir: %s", strerror(-r));
        }
        return dfd;
}

int limits_dir_write(int dfd, const char *name, const void *data, size_t len, mode_t mode, unsigned flags) {
        if (dfd < 0 || !name || !*name || strchr(name, '/'))
                return -EINVAL;
        atomic_file_remove_temps(dfd, name);
        return atomic_file_write_at(dfd, name, data, len, mode, flags);
}

int limits_dir_write_limits(int dfd, const char *text, size_t len, unsigned flags) {
        return limits_dir_write(dfd, LIMITS_DIR_LIMITS_FILE, text, len, 0444, flags);
}

void limits_dir_libs(const char *interposer, const char *standin, const char *real_nvml, struct limits_dir_libs *ret) {
        *ret = (struct limits_dir_libs){ .mount = { { interposer, LIMITS_DIR_CONTAINER_LIB } }, .n_mounts = 1 };
        ret->nvml = standin && standin[0] && real_nvml && real_nvml[0];
        if (ret->nvml) {
                ret->mount[ret->n_mounts++] = (typeof(ret->mount[0])){ standin, LIMITS_DIR_CONTAINER_NVML };
                ret->mount[ret->n_mounts++] = (typeof(ret->mount[0])){ real_nvml, LIMITS_DIR_CONTAINER_REAL_NVML };
        }
        snprintf(ret->preload, sizeof ret->preload, "%s%s", LIMITS_DIR_CONTAINER_LIB,
                 ret->nvml ? " " LIMITS_DIR_CONTAINER_NVML : "");
}

int limits_dir_standin_path(const char *interposer, char *buf, size_t len) {
        const char *slash = strrchr(interposer, '/');
        int dl = slash ? (int)(slash - interposer) : 1;
        int w = snprintf(buf, len, "%.*s/%s", dl, slash ? interposer : ".", LIMITS_DIR_NVML_NAME);
        return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

int limits_dir_write_files(int dfd, const char *key, size_t key_len, const char *text, size_t len,
                           const char *preload_line, unsigned flags, struct gs_error *err) {
        char preload[LIMITS_DIR_PRELOAD_MAX + 1];
        snprintf(preload, sizeof preload, "%s\n", preload_line ? preload_line : LIMITS_DIR_CONTAINER_LIB);
        int r = limits_dir_write(dfd, LIMITS_DIR_KEY_FILE, key, key_len, 0644, flags);
        if (r < 0)
                return gs_error_set(err, r, "cannot write %s: %s", LIMITS_DIR_KEY_FILE, strerror(-r));
        r = limits_dir_write_limits(dfd, text, len, flags);
        if (r < 0)
                return gs_error_set(err, r, "cannot write %s: %s", LIMITS_DIR_LIMITS_FILE, strerror(-r));
        r = limits_dir_write(dfd, LIMITS_DIR_PRELOAD_FILE, preload, strlen(preload), 0444, flags);
        if (r < 0)
                return gs_error_set(err, r, "cannot write %s: %s", LIMITS_DIR_PRELOAD_FILE, strerror(-r));
        return 0;
}
