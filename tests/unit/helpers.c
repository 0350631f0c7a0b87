/* SPDX-License-Identifier: Apache-2.0 */
/* helpers — temporary directories and small file helpers shared by the unit tests (helpers.h). */
#include "helpers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>
#include <cmocka.h>

#include "cluster/cluster.h"
#include "topo/topo.h"
#include "util/util.h"

char *test_tmpdir_new(const char *tag) {
        const char *base = getenv("TMPDIR");
        char *path = NULL;
        if (asprintf(&path, "%s/gpuslice-%s-XXXXXX", base && *base ? base : "/tmp", tag) < 0)
                fail_msg("out of memory");
        if (!mkdtemp(path))
                fail_msg("mkdtemp %s: %s", path, strerror(errno));
        return path;
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        (void)st;
        (void)ftw;
        int r = type == FTW_DP ? rmdir(path) : unlink(path);
        return r < 0 && errno != ENOENT ? -errno : 0;
}

int test_rmtree(const char *path) {
        if (!path)
                return 0;
        int r = nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
        if (r < 0)
                return errno == ENOENT ? 0 : -errno;
        return r; /* remove_one's -errno */
}

int test_tmpdir_free(char *path) {
        int r = test_rmtree(path);
        free(path);
        return r;
}

const char *test_path(const char *dir, const char *name) {
        static char buf[4][PATH_MAX];
        static unsigned next;
        char *b = buf[next++ % 4];
        if (snprintf(b, PATH_MAX, "%s/%s", dir, name) >= PATH_MAX)
                fail_msg("path too long: %s/%s", dir, name);
        return b;
}

void test_write_file(const char *path, const char *text, size_t len, mode_t mode) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        if (fd < 0)
                fail_msg("open %s: %s", path, strerror(errno));
        if (write(fd, text, len) != (ssize_t)len)
                fail_msg("write %s: %s", path, strerror(errno));
        close(fd);
}

char *test_read_file(const char *path) {
        char *buf = NULL;
        size_t len = 0;
        return read_file(path, 1 << 24, &buf, &len) < 0 ? NULL : buf;
}

int test_count_entries(const char *path) {
        DIR *d = opendir(path);
        if (!d)
                return -errno;
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}

void test_touch(const char *path) {
        test_write_file(path, "", 0, 0644);
}

void test_load_topo(const char *name, struct topo *ret) {
        char *text = NULL;
        size_t len = 0;
        const char *path = test_path(GPUSLICE_TOPO_DIR, name);
        int r = read_file(path, 1 << 20, &text, &len);
        if (r < 0)
                fail_msg("%s: %s", path, strerror(-r));
        struct gs_error err = { 0 };
        r = topo_parse(text, len, ret, &err);
        free(text);
        if (r < 0)
                fail_msg("%s: %s", path, err.message);
}

char *test_read_source(const char *relpath, size_t *len) {
        char *buf = NULL;
        const char *path = test_path(GPUSLICE_SOURCE_DIR, relpath);
        int r = read_file(path, 1 << 24, &buf, len);
        if (r < 0)
                fail_msg("%s: %s", path, strerror(-r));
        return buf;
}

int test_without_root(int (*f)(void *), void *arg) {
        pid_t pid = fork();
        if (pid < 0)
                return -ECHILD;
        if (pid == 0) {
                if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0))
                        _exit(255);
                int r = f(arg);
                _exit(r < 0 && r > -255 ? -r : r == 0 ? 0 : 254);
        }
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) >= 254)
                return -ECHILD;
        return -WEXITSTATUS(status);
}

void test_topo_a100x3(struct topo *t) {
        topo_init(t);
        t->n_gpus = 3;
        strscpy(t->driver_version, "535.104.05", sizeof t->driver_version);
        t->cuda_version = 12020;
        for (unsigned i = 0; i < 3; i++) {
                t->gpu[i].index = (int)i;
                snprintf(t->gpu[i].uuid, sizeof t->gpu[i].uuid, "GPU-%u", i);
                strscpy(t->gpu[i].name, "NVIDIA A100-SXM4-40GB", sizeof t->gpu[i].name);
                t->gpu[i].memory_total = 40960ULL << 20;
                t->gpu[i].cc_major = 8;
        }
        topo_set_link(t, 0, 1, (struct topo_link){ .pcie = TOPO_LEVEL_PIX, .nvlinks = 12 });
        topo_set_link(t, 0, 2, (struct topo_link){ .pcie = TOPO_LEVEL_SYS });
        topo_set_link(t, 1, 2, (struct topo_link){ .pcie = TOPO_LEVEL_NODE });
}

void test_whole_req(struct cluster_request *r, unsigned k) {
        *r = (struct cluster_request){ .n = 1 };
        strscpy(r->c[0].name, "main", sizeof r->c[0].name);
        r->c[0].whole = k;
}

void test_share_req(struct cluster_request *r, unsigned core, uint32_t mem) {
        *r = (struct cluster_request){ .n = 1, .profile = CLUSTER_PROFILE_GPUSLICE };
        strscpy(r->c[0].name, "main", sizeof r->c[0].name);
        r->c[0].core = core;
        r->c[0].mem_mib = mem;
}
