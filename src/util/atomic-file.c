/* SPDX-License-Identifier: Apache-2.0 */
/* atomic-file — temporary file, full write, fsync, rename, fsync of the directory (atomic-file.h). */
#include "util/atomic-file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

static int write_all(int fd, const uint8_t *p, size_t n) {
        while (n > 0) {
                ssize_t k = write(fd, p, n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return -EIO;
                p += k;
                n -= (size_t)k;
        }
        return 0;
}

static int temp_name(char *buf, size_t len, const char *name, unsigned attempt) {
        uint64_t rnd = 0;
        if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd) {
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                rnd = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)attempt << 48);
        }
        int k = snprintf(buf, len, ".%s" ATOMIC_FILE_TEMP_INFIX "%016" PRIx64, name, rnd);
        return k < 0 || (size_t)k >= len ? -ENAMETOOLONG : 0;
}

/* lint: long — its complexity is the argument checks and one check per system call of the write (open, write loop,
 * fsync, rename, fsync of the directory), each undoing what came before; 30 lines. */
int atomic_file_write_at(int dfd, const char *name, const void *data, size_t len, mode_t mode, unsigned flags) {
        if (dfd < 0 || !name || !*name || strchr(name, '/') || streq(name, ".") || streq(name, "..") ||
            (!data && len > 0))
                return -EINVAL;
        char tmp[NAME_MAX + 1];
        _cleanup_(closep) int fd = -1;
        for (unsigned attempt = 0; fd < 0; attempt++) {
                int r = temp_name(tmp, sizeof tmp, name, attempt);
                if (r < 0)
                        return r;
                fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode & 07777);
                if (fd < 0 && (errno != EEXIST || attempt >= 16))
                        return -errno;
        }
        int r = write_all(fd, data, len);
        if (r == 0 && fchmod(fd, mode & 07777) < 0)
                r = -errno;
        if (r == 0 && !(flags & ATOMIC_FILE_NO_SYNC) && fsync(fd) < 0)
                r = -errno;
        if (r == 0 && close(TAKE_FD(fd)) < 0 && errno != EINTR)
                r = -errno;
        if (r == 0 && renameat(dfd, tmp, dfd, name) < 0)
                r = -errno;
        if (r < 0) {
                (void)unlinkat(dfd, tmp, 0);
                return r;
        }
        /* The new file is in place; make the rename itself durable. */
        return !(flags & ATOMIC_FILE_NO_SYNC) && fsync(dfd) < 0 ? -errno : 0;
}

int atomic_file_write(const char *path, const void *data, size_t len, mode_t mode, unsigned flags) {
        if (!path || !*path)
                return -EINVAL;
        const char *slash = strrchr(path, '/');
        const char *name = slash ? slash + 1 : path;
        char dir[PATH_MAX];
        if (!slash)
                strscpy(dir, ".", sizeof dir);
        else if (slash == path)
                strscpy(dir, "/", sizeof dir);
        else if ((size_t)(slash - path) >= sizeof dir)
                return -ENAMETOOLONG;
        else
                strnscpy(dir, sizeof dir, path, (size_t)(slash - path));
        _cleanup_(closep) int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        return atomic_file_write_at(dfd, name, data, len, mode, flags);
}

void atomic_file_remove_temps(int dfd, const char *name) {
        char prefix[NAME_MAX + 1];
        if (!name || (size_t)snprintf(prefix, sizeof prefix, ".%s" ATOMIC_FILE_TEMP_INFIX, name) >= sizeof prefix)
                return;
        int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd < 0 ? NULL : fdopendir(fd);
        if (!d) {
                if (fd >= 0)
                        close(fd);
                return;
        }
        struct dirent *de;
        while ((de = readdir(d)))
                if (startswith(de->d_name, prefix))
                        (void)unlinkat(dfd, de->d_name, 0);
        closedir(d);
}
