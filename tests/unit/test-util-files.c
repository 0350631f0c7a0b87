/* SPDX-License-Identifier: Apache-2.0 */
/* test-util-files — the one atomic file writer (src/util/atomic-file.c) and the per-container
 * limits directory (src/util/limits-dir.c): contents, modes, replacement, and every error path
 * leaving the old file and no temporary file behind. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "helpers.h"
#include "util/atomic-file.h"
#include "util/limits-dir.h"
#include "util/mps-client.h"
#include "util/util.h"

static int setup(void **state) {
        *state = test_tmpdir_new("util-files");
        return 0;
}

static int teardown(void **state) {
        return test_tmpdir_free(*state) == 0 ? 0 : -1;
}

static mode_t mode_of(const char *path) {
        struct stat st;
        assert_int_equal(lstat(path, &st), 0);
        return st.st_mode & 07777;
}

static void assert_file(const char *path, const char *want) {
        char *got = test_read_file(path);
        assert_non_null(got);
        assert_string_equal(got, want);
        free(got);
}

static void test_write_new_and_replace(void **state) {
        const char *dir = *state, *p = test_path(dir, "f");
        mode_t old = umask(077);
        assert_int_equal(atomic_file_write(p, "first version\n", 14, 0644, 0), 0);
        umask(old);
        assert_file(p, "first version\n");
        assert_int_equal(mode_of(p), 0644); /* fchmod: the umask does not narrow it */
        assert_int_equal(atomic_file_write(p, "v2", 2, 0444, 0), 0);
        assert_file(p, "v2");
        assert_int_equal(mode_of(p), 0444);
        assert_int_equal(atomic_file_write(p, "", 0, 0600, 0), 0);
        assert_file(p, "");
        assert_int_equal(atomic_file_write(p, "nosync", 6, 0600, ATOMIC_FILE_NO_SYNC), 0); /* atomic, no fsync */
        assert_file(p, "nosync");
        assert_int_equal(test_count_entries(dir), 1); /* no temporary file left */
}

static void test_write_large(void **state) {
        const char *p = test_path(*state, "big");
        size_t n = 3u << 20;
        char *buf = malloc(n + 1);
        assert_non_null(buf);
        for (size_t i = 0; i < n; i++)
                buf[i] = (char)('a' + i % 26);
        buf[n] = 0;
        assert_int_equal(atomic_file_write(p, buf, n, 0600, 0), 0);
        assert_file(p, buf);
        free(buf);
}

static void test_write_at_and_relative(void **state) {
        const char *dir = *state;
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);
        assert_int_equal(atomic_file_write_at(dfd, "g", "at", 2, 0600, 0), 0);
        close(dfd);
        assert_file(test_path(dir, "g"), "at");
        char cwd[PATH_MAX];
        assert_non_null(getcwd(cwd, sizeof cwd));
        assert_int_equal(chdir(dir), 0);
        int r = atomic_file_write("rel", "r", 1, 0600, 0); /* no slash: the current directory */
        assert_int_equal(chdir(cwd), 0);
        assert_int_equal(r, 0);
        assert_file(test_path(dir, "rel"), "r");
}

static void test_write_invalid(void **state) {
        const char *dir = *state;
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);
        assert_int_equal(atomic_file_write_at(dfd, "", "x", 1, 0600, 0), -EINVAL);
        assert_int_equal(atomic_file_write_at(dfd, "a/b", "x", 1, 0600, 0), -EINVAL);
        assert_int_equal(atomic_file_write_at(dfd, "..", "x", 1, 0600, 0), -EINVAL);
        assert_int_equal(atomic_file_write_at(dfd, NULL, "x", 1, 0600, 0), -EINVAL);
        assert_int_equal(atomic_file_write_at(dfd, "n", NULL, 1, 0600, 0), -EINVAL);
        assert_int_equal(atomic_file_write_at(-1, "n", "x", 1, 0600, 0), -EINVAL);
        close(dfd);
        assert_int_equal(atomic_file_write(NULL, "x", 1, 0600, 0), -EINVAL);
        assert_int_equal(atomic_file_write("", "x", 1, 0600, 0), -EINVAL);
        assert_int_equal(test_count_entries(dir), 0);
}

static void test_write_missing_dir_and_not_a_dir(void **state) {
        const char *dir = *state;
        assert_int_equal(atomic_file_write(test_path(dir, "nope/f"), "x", 1, 0600, 0), -ENOENT);
        test_write_file(test_path(dir, "file"), "x", 1, 0600);
        assert_int_equal(atomic_file_write(test_path(dir, "file/f"), "x", 1, 0600, 0), -ENOTDIR);
        char longname[NAME_MAX + 2];
        memset(longname, 'n', sizeof longname - 1);
        longname[sizeof longname - 1] = 0;
        assert_int_equal(atomic_file_write(test_path(dir, longname), "x", 1, 0600, 0), -ENAMETOOLONG);
        assert_int_equal(test_count_entries(dir), 1);
}

/* rename over a directory fails: the directory stays, the temporary file is removed. */
static void test_write_over_directory(void **state) {
        const char *dir = *state, *p = test_path(dir, "d");
        assert_int_equal(mkdir(p, 0755), 0);
        assert_int_equal(atomic_file_write(p, "x", 1, 0600, 0), -EISDIR);
        assert_int_equal(mode_of(p) & 0777, 0755);
        assert_int_equal(test_count_entries(dir), 1);
}

/* A short write (here: past RLIMIT_FSIZE) fails the call; the old file is untouched. */
static void test_write_error_keeps_old(void **state) {
        const char *dir = *state, *p = test_path(dir, "f");
        assert_int_equal(atomic_file_write(p, "old", 3, 0600, 0), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                signal(SIGXFSZ, SIG_IGN);
                struct rlimit rl = { 4096, 4096 };
                setrlimit(RLIMIT_FSIZE, &rl);
                static char big[65536];
                int r = atomic_file_write(p, big, sizeof big, 0600, 0);
                _exit(r == -EFBIG ? 0 : 1);
        }
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        assert_file(p, "old");
        assert_int_equal(test_count_entries(dir), 1);
}

/* A symlink at the target is replaced, never written through. */
static void test_write_replaces_symlink(void **state) {
        const char *dir = *state, *p = test_path(dir, "link"), *victim = test_path(dir, "victim");
        test_write_file(victim, "keep", 4, 0600);
        assert_int_equal(symlink("victim", p), 0);
        assert_int_equal(atomic_file_write(p, "new", 3, 0600, 0), 0);
        assert_file(victim, "keep");
        struct stat st;
        assert_int_equal(lstat(p, &st), 0);
        assert_true(S_ISREG(st.st_mode));
        assert_file(p, "new");
}

/* Concurrent writers of one target: every read sees one whole version, no temporary file remains. */
static void test_write_concurrent(void **state) {
        const char *dir = *state, *p = test_path(dir, "f");
        enum {
                WRITERS = 4,
                ROUNDS = 40,
                LEN = 8192
        };
        pid_t pids[WRITERS];
        for (int w = 0; w < WRITERS; w++) {
                pids[w] = fork();
                assert_true(pids[w] >= 0);
                if (pids[w] == 0) {
                        static char buf[LEN];
                        memset(buf, 'A' + w, sizeof buf);
                        for (int i = 0; i < ROUNDS; i++)
                                if (atomic_file_write(p, buf, sizeof buf, 0600, 0) < 0)
                                        _exit(1);
                        _exit(0);
                }
        }
        for (int i = 0; i < 200; i++) {
                char *got = test_read_file(p);
                if (!got)
                        continue; /* not written yet */
                assert_int_equal(strlen(got), LEN);
                for (size_t k = 1; k < LEN; k++)
                        assert_int_equal(got[k], got[0]);
                free(got);
        }
        for (int w = 0; w < WRITERS; w++) {
                int st;
                assert_int_equal(waitpid(pids[w], &st, 0), pids[w]);
                assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        }
        assert_int_equal(test_count_entries(dir), 1);
}

static void test_limits_dir_create_layout(void **state) {
        char root[PATH_MAX];
        struct gs_error err = { 0 };
        strscpy(root, test_path(*state, "containers"), sizeof root);
        mode_t old = umask(077);
        int dfd = limits_dir_create(root, "c1", false, &err);
        umask(old);
        if (dfd < 0)
                fail_msg("%d %s", dfd, err.message);
        assert_int_equal(limits_dir_write_limits(dfd, "gpuslice-limits 1\n", 18, 0), 0);
        assert_int_equal(atomic_file_write_at(dfd, LIMITS_DIR_KEY_FILE, "k\n", 2, 0644, 0), 0);
        close(dfd);
        char c1[PATH_MAX];
        strscpy(c1, test_path(root, "c1"), sizeof c1);
        assert_int_equal(mode_of(test_path(c1, LIMITS_DIR_SHM_DIR)), 0777);
        assert_int_equal(mode_of(test_path(c1, LIMITS_DIR_LIMITS_FILE)), 0444);
        assert_file(test_path(c1, LIMITS_DIR_LIMITS_FILE), "gpuslice-limits 1\n");
        assert_int_equal(test_count_entries(c1), 3); /* key, limits, shm */

        /* Reused as it is, unless fresh: then the leftover is gone. */
        test_write_file(test_path(test_path(c1, LIMITS_DIR_SHM_DIR), "region"), "r", 1, 0600);
        dfd = limits_dir_create(root, "c1", false, &err);
        assert_true(dfd >= 0);
        close(dfd);
        assert_int_equal(test_count_entries(c1), 3);
        assert_int_equal(test_count_entries(test_path(c1, LIMITS_DIR_SHM_DIR)), 1);
        dfd = limits_dir_create(root, "c1", true, &err);
        assert_true(dfd >= 0);
        close(dfd);
        assert_int_equal(test_count_entries(c1), 1); /* shm/ only, empty */
        assert_int_equal(test_count_entries(test_path(c1, LIMITS_DIR_SHM_DIR)), 0);
}

static void test_limits_dir_create_errors(void **state) {
        const char *dir = *state;
        struct gs_error err = { 0 };
        assert_int_equal(limits_dir_create(dir, "a/b", false, &err), -EINVAL);
        assert_int_equal(limits_dir_create(dir, "..", false, &err), -EINVAL);
        assert_int_equal(limits_dir_create(dir, "", false, &err), -EINVAL);
        test_write_file(test_path(dir, "file"), "x", 1, 0600);
        gs_error_clear(&err);
        assert_int_equal(limits_dir_create(test_path(dir, "file"), "c", false, &err), -ENOTDIR);
        assert_non_null(strstr(err.message, "file"));
        assert_int_equal(limits_dir_create(test_path(dir, "no/such"), "c", false, &err), -ENOENT);
        /* The container's name is a symlink (planted by someone): not followed. */
        assert_int_equal(mkdir(test_path(dir, "elsewhere"), 0755), 0);
        assert_int_equal(mkdir(test_path(dir, "root"), 0755), 0);
        assert_int_equal(symlink(test_path(dir, "elsewhere"), test_path(test_path(dir, "root"), "c")), 0);
        gs_error_clear(&err);
        int r = limits_dir_create(test_path(dir, "root"), "c", false, &err);
        assert_true(r == -ELOOP || r == -ENOTDIR);
        assert_true(err.message[0] != 0);
        assert_int_equal(test_count_entries(test_path(dir, "elsewhere")), 0);
}

/* limits_dir_write goes through the fd limits_dir_create returned, never by the path: a dir
 * renamed after it was opened still gets the file; a temporary file a crash left is removed first. */
static void test_limits_dir_write_through_fd(void **state) {
        const char *dir = *state;
        struct gs_error err = { 0 };
        char c1[PATH_MAX], c2[PATH_MAX];
        strscpy(c1, test_path(dir, "c1"), sizeof c1);
        strscpy(c2, test_path(dir, "c2"), sizeof c2);
        int dfd = limits_dir_create(dir, "c1", false, &err);
        assert_true(dfd >= 0);
        test_write_file(test_path(c1, ".key" ATOMIC_FILE_TEMP_INFIX "0123456789abcdef"), "torn", 4, 0600);
        assert_int_equal(rename(c1, c2), 0);
        assert_int_equal(limits_dir_write(dfd, LIMITS_DIR_KEY_FILE, "r\nid\n", 5, 0644, ATOMIC_FILE_NO_SYNC), 0);
        assert_int_equal(limits_dir_write_limits(dfd, "x", 1, ATOMIC_FILE_NO_SYNC), 0);
        close(dfd);
        assert_file(test_path(c2, LIMITS_DIR_KEY_FILE), "r\nid\n");
        assert_int_equal(mode_of(test_path(c2, LIMITS_DIR_KEY_FILE)), 0644);
        assert_int_equal(mode_of(test_path(c2, LIMITS_DIR_LIMITS_FILE)), 0444);
        assert_int_equal(test_count_entries(c2), 3); /* key, limits, shm: the temporary is gone */
        assert_int_equal(access(c1, F_OK), -1);
        assert_int_equal(limits_dir_write(-1, "key", "x", 1, 0644, 0), -EINVAL);
        assert_int_equal(limits_dir_write(AT_FDCWD, "a/b", "x", 1, 0644, 0), -EINVAL);
}

static void test_limits_dir_remove(void **state) {
        const char *dir = *state;
        struct gs_error err = { 0 };
        int dfd = limits_dir_create(dir, "c", false, &err);
        assert_true(dfd >= 0);
        assert_int_equal(limits_dir_write_limits(dfd, "x", 1, 0), 0);
        close(dfd);
        /* a symlink inside points out of the tree: removed, its target kept */
        test_write_file(test_path(dir, "outside"), "keep", 4, 0600);
        assert_int_equal(symlink(test_path(dir, "outside"), test_path(test_path(dir, "c"), "link")), 0);
        test_write_file(test_path(test_path(test_path(dir, "c"), "shm"), "region"), "r", 1, 0600);
        assert_int_equal(limits_dir_remove_at(AT_FDCWD, test_path(dir, "c")), 0);
        assert_int_equal(test_count_entries(dir), 1);
        assert_file(test_path(dir, "outside"), "keep");
        assert_int_equal(limits_dir_remove_at(AT_FDCWD, test_path(dir, "c")), 0); /* already gone */
        assert_int_equal(limits_dir_remove_at(AT_FDCWD, ""), -EINVAL);
}

/* The one whole-file reader and its flags: the bound, a link refused, only a regular file. */
static void test_read_file_flags(void **state) {
        const char *dir = *state;
        _cleanup_(closep) int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);
        assert_int_equal(atomic_file_write_at(dfd, "f", "hello", 5, 0600, ATOMIC_FILE_NO_SYNC), 0);
        char *text = NULL;
        size_t len = 0;
        for (unsigned flags = 0; flags <= (READ_FILE_NOFOLLOW | READ_FILE_REGULAR); flags++) {
                assert_int_equal(read_file_at(dfd, "f", flags, 5, &text, &len), 0);
                assert_string_equal(text, "hello");
                assert_int_equal(len, 5);
                free(text);
                text = NULL;
                assert_int_equal(read_file_at(dfd, "f", flags, 4, &text, &len), -EFBIG);
                assert_null(text);
        }
        /* an empty file is "" */
        assert_int_equal(atomic_file_write_at(dfd, "empty", "", 0, 0600, ATOMIC_FILE_NO_SYNC), 0);
        assert_int_equal(read_file_at(dfd, "empty", READ_FILE_REGULAR, 0, &text, &len), 0);
        assert_string_equal(text, "");
        assert_int_equal(len, 0);
        free(text);
        text = NULL;
        /* a link: followed without READ_FILE_NOFOLLOW, refused with it */
        assert_int_equal(symlinkat("f", dfd, "link"), 0);
        assert_int_equal(read_file_at(dfd, "link", READ_FILE_REGULAR, 64, &text, &len), 0);
        free(text);
        text = NULL;
        assert_int_equal(read_file_at(dfd, "link", READ_FILE_NOFOLLOW, 64, &text, &len), -ELOOP);
        /* not a regular file: a directory opens read-only, then READ_FILE_REGULAR refuses it (read() alone
         * says EISDIR) */
        assert_int_equal(mkdirat(dfd, "d", 0700), 0);
        assert_int_equal(read_file_at(dfd, "d", READ_FILE_REGULAR, 64, &text, &len), -EBADFD);
        assert_int_equal(read_file_at(dfd, "d", 0, 64, &text, &len), -EISDIR);
        assert_int_equal(read_file_at(dfd, "missing", READ_FILE_REGULAR, 64, &text, &len), -ENOENT);
        assert_null(text);
        /* read_fd reads until end of file, across the buffer's doubling */
        char big[10000];
        memset(big, 'z', sizeof big);
        assert_int_equal(atomic_file_write_at(dfd, "big", big, sizeof big, 0600, ATOMIC_FILE_NO_SYNC), 0);
        assert_int_equal(read_file_at(dfd, "big", READ_FILE_REGULAR, sizeof big, &text, &len), 0);
        assert_int_equal(len, sizeof big);
        assert_memory_equal(text, big, sizeof big);
        assert_int_equal(text[len], '\0');
        free(text);
}

/* One builder for the device plugin's MPS clients and a DRA claim's: the pipe dir at the client's pipe path (its env),
 * the daemon's shm dir at /dev/shm; a pipe path past PATH_MAX refused, nothing written. */
static void test_mps_client_edits(void **state) {
        (void)state;
        struct mps_client c;
        assert_int_equal(mps_client_edits("/s/dra-mps/u/pipe", "/s/dra-mps/u/shm", "/tmp/nvidia-mps", &c), 0);
        assert_int_equal(c.n_mounts, 2);
        assert_string_equal(c.mount[0].host, "/s/dra-mps/u/pipe");
        assert_string_equal(c.mount[0].container, "/tmp/nvidia-mps");
        assert_string_equal(c.mount[1].host, "/s/dra-mps/u/shm");
        assert_string_equal(c.mount[1].container, "/dev/shm");
        assert_string_equal(c.env, "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps");
        assert_string_equal(c.pipe, "/tmp/nvidia-mps");
        static char long_pipe[PATH_MAX + 2];
        memset(long_pipe, 'p', sizeof long_pipe - 1);
        struct mps_client keep = c;
        assert_int_equal(mps_client_edits("/a", "/b", long_pipe, &c), -ENAMETOOLONG);
        assert_memory_equal(&c, &keep, sizeof c);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_mps_client_edits),
                cmocka_unit_test_setup_teardown(test_write_new_and_replace, setup, teardown),
                cmocka_unit_test_setup_teardown(test_write_large, setup, teardown),
                cmocka_unit_test_setup_teardown(test_write_at_and_relative, setup, teardown),
                cmocka_unit_test_setup_teardown(test_write_invalid, setup, teardown),
                cmocka_unit_test_setup_teardown(test_write_missing_dir_and_not_a_dir, setup, teardown),
                cmocka_unit_test_setup_teardown(test_write_over_directory, setup, teardown),
                cmocka_unit_test_setup_teardown(test_write_error_keeps_old, setup, teardown),
                cmocka_unit_test_setup_teardown(test_write_replaces_symlink, setup, teardown),
                cmocka_unit_test_setup_teardown(test_write_concurrent, setup, teardown),
                cmocka_unit_test_setup_teardown(test_limits_dir_create_layout, setup, teardown),
                cmocka_unit_test_setup_teardown(test_limits_dir_create_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_limits_dir_write_through_fd, setup, teardown),
                cmocka_unit_test_setup_teardown(test_limits_dir_remove, setup, teardown),
                cmocka_unit_test_setup_teardown(test_read_file_flags, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
