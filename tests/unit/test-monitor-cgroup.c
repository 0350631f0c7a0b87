/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Attribution from /proc/PID/cgroup: one prepared proc tree per layout (tests/data/proc-NAME/,
 * with the expected answer in its `expect` file: "RESULT CONTAINER_ID POD_UID QOS RUNTIME", "-"
 * for empty), plus direct parser cases, vanished PIDs and the PID-namespace seam.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "monitor/cgroup.h"
#include "util/util.h"

#define DATA GPUSLICE_SOURCE_DIR "/tests/data"
#define CID "3f1c2a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a"
#define UID "8c6e4f1a-2b3d-4c5e-9f7a-1b2c3d4e5f6a"

static const char *dash(const char *s) {
        return streq(s, "-") ? "" : s;
}

static void test_tree(void **state) {
        const char *name = *state;
        char root[512], expect_path[600];
        snprintf(root, sizeof root, DATA "/proc-%s", name);
        snprintf(expect_path, sizeof expect_path, "%s/expect", root);
        char *expect = NULL;
        size_t len;
        assert_int_equal(read_file(expect_path, 4096, &expect, &len), 0);
        char want_r[16], want_cid[80], want_uid[80], want_qos[32], want_rt[32];
        assert_int_equal(sscanf(expect, "%15s %79s %79s %31s %31s", want_r, want_cid, want_uid, want_qos, want_rt), 5);
        free(expect);

        struct cgroup_info info;
        memset(&info, 0x5a, sizeof info);
        int r = cgroup_attribute_pid(root, 4242, &info);
        if (streq(want_r, "-EINVAL")) {
                assert_int_equal(r, -EINVAL);
                return;
        }
        assert_int_equal(r, streq(want_r, "1") ? 1 : 0);
        assert_string_equal(info.container_id, dash(want_cid));
        assert_string_equal(info.pod_uid, dash(want_uid));
        assert_string_equal(cgroup_qos_name(info.qos), dash(want_qos));
        assert_string_equal(cgroup_runtime_name(info.runtime), dash(want_rt));
}

static void test_vanished_pid(void **state) {
        (void)state;
        struct cgroup_info info;
        assert_int_equal(cgroup_attribute_pid(DATA "/proc-v2-host", 999999, &info), -ENOENT);
}

static void test_missing_root(void **state) {
        (void)state;
        struct cgroup_info info;
        assert_int_equal(cgroup_attribute_pid(DATA "/no-such-proc-root", 1, &info), -ENOENT);
}

static void test_self_real_proc(void **state) {
        (void)state;
        /* this machine's own /proc: whatever the layout, it must parse */
        struct cgroup_info info;
        assert_true(cgroup_attribute_pid(NULL, (unsigned)getpid(), &info) >= 0);
}

static void test_path_relative(void **state) {
        (void)state;
        struct cgroup_info info;
        assert_int_equal(cgroup_parse_path("kubepods/pod" UID, strlen("kubepods/pod" UID), &info), -EINVAL);
        assert_int_equal(cgroup_parse_path("", 0, &info), -EINVAL);
}

static void test_path_not_nul_terminated(void **state) {
        (void)state;
        /* the id runs on past len in the buffer: only len bytes count, so no id is found */
        const char *p = "/docker/" CID;
        struct cgroup_info info;
        assert_int_equal(cgroup_parse_path(p, strlen(p) - 1, &info), 0);
        assert_string_equal(info.container_id, "");
        assert_int_equal(cgroup_parse_path(p, strlen(p), &info), 1);
        assert_string_equal(info.container_id, CID);
}

static void test_pod_without_kubepods_is_not_a_pod(void **state) {
        (void)state;
        const char *p = "/system.slice/pod" UID "/" CID;
        struct cgroup_info info;
        assert_int_equal(cgroup_parse_path(p, strlen(p), &info), 1);
        assert_string_equal(info.pod_uid, "");
        assert_int_equal(info.qos, CGROUP_QOS_NONE);
        assert_string_equal(info.container_id, CID);
}

static void test_pod_sandbox_level(void **state) {
        (void)state;
        /* the pod's own cgroup (no container below): pod uid only */
        const char *p = "/kubepods/burstable/pod" UID;
        struct cgroup_info info;
        assert_int_equal(cgroup_parse_path(p, strlen(p), &info), 1);
        assert_string_equal(info.pod_uid, UID);
        assert_string_equal(info.container_id, "");
        assert_int_equal(info.runtime, CGROUP_RUNTIME_NONE);
}

static void test_bad_uid_rejected(void **state) {
        (void)state;
        const char *p = "/kubepods/podnot-a-uid-at-all/" CID;
        struct cgroup_info info;
        assert_int_equal(cgroup_parse_path(p, strlen(p), &info), 1);
        assert_string_equal(info.pod_uid, "");
        assert_string_equal(info.container_id, CID);
}

static void test_prefixed_bad_id_ignored(void **state) {
        (void)state;
        const char *p = "/machine.slice/libpod-xyz.scope";
        struct cgroup_info info;
        assert_int_equal(cgroup_parse_path(p, strlen(p), &info), 0);
}

static void test_best_line_wins(void **state) {
        (void)state;
        /* a line with the container only loses to a later one with container and pod */
        const char *t = "1:name=systemd:/docker/" CID "\n2:memory:/kubepods/pod" UID "/" CID "\n";
        struct cgroup_info info;
        assert_int_equal(cgroup_parse(t, strlen(t), &info), 1);
        assert_string_equal(info.pod_uid, UID);
}

static void test_no_trailing_newline(void **state) {
        (void)state;
        const char *t = "0::/docker/" CID;
        struct cgroup_info info;
        assert_int_equal(cgroup_parse(t, strlen(t), &info), 1);
        assert_int_equal(info.runtime, CGROUP_RUNTIME_DOCKER);
}

static void test_output_untouched_on_error(void **state) {
        (void)state;
        struct cgroup_info info;
        memset(&info, 0x5a, sizeof info);
        assert_int_equal(cgroup_parse("junk", 4, &info), -EINVAL);
        assert_int_equal((unsigned char)info.container_id[0], 0x5a);
}

static void test_resolve_ns_pid(void **state) {
        (void)state;
        unsigned pid = 0;
        assert_int_equal(cgroup_resolve_ns_pid(DATA "/proc-nspid", 4026532001ULL, 7, &pid), 0);
        assert_int_equal(pid, 4243);
}

static void test_resolve_ns_pid_wrong_ns(void **state) {
        (void)state;
        unsigned pid = 0;
        /* PID 7 exists, but in another namespace than asked */
        assert_int_equal(cgroup_resolve_ns_pid(DATA "/proc-nspid", 4026531836ULL, 7, &pid), -ENOENT);
        assert_int_equal(pid, 0);
}

static void test_resolve_ns_pid_no_root(void **state) {
        (void)state;
        unsigned pid;
        assert_int_equal(cgroup_resolve_ns_pid(DATA "/nope", 1, 1, &pid), -ENOENT);
}

#define TREE(n) cmocka_unit_test_prestate(test_tree, (void *)n)

int main(void) {
        const struct CMUnitTest tests[] = {
                TREE("v1-cgroupfs-guaranteed"),
                TREE("v1-cgroupfs-burstable"),
                TREE("v1-cgroupfs-besteffort"),
                TREE("v1-cgroupfs-crio"),
                TREE("v1-systemd-docker"),
                TREE("v1-podman-cgroupfs"),
                TREE("v1-docker-cgroupfs"),
                TREE("v1-host"),
                TREE("v1-mixed"),
                TREE("v1-malformed-lines"),
                TREE("v2-systemd-containerd-burstable"),
                TREE("v2-systemd-containerd-guaranteed"),
                TREE("v2-systemd-crio-besteffort"),
                TREE("v2-systemd-crio-conmon"),
                TREE("v2-cgroupfs-burstable"),
                TREE("v2-podman-systemd"),
                TREE("v2-podman-conmon"),
                TREE("v2-docker-systemd"),
                TREE("v2-host"),
                TREE("v2-static-pod-uppercase"),
                TREE("v2-short-id"),
                TREE("v2-kind-nested"),
                TREE("all-malformed"),
                TREE("empty"),
                cmocka_unit_test(test_vanished_pid),
                cmocka_unit_test(test_missing_root),
                cmocka_unit_test(test_self_real_proc),
                cmocka_unit_test(test_path_relative),
                cmocka_unit_test(test_path_not_nul_terminated),
                cmocka_unit_test(test_pod_without_kubepods_is_not_a_pod),
                cmocka_unit_test(test_pod_sandbox_level),
                cmocka_unit_test(test_bad_uid_rejected),
                cmocka_unit_test(test_prefixed_bad_id_ignored),
                cmocka_unit_test(test_best_line_wins),
                cmocka_unit_test(test_no_trailing_newline),
                cmocka_unit_test(test_output_untouched_on_error),
                cmocka_unit_test(test_resolve_ns_pid),
                cmocka_unit_test(test_resolve_ns_pid_wrong_ns),
                cmocka_unit_test(test_resolve_ns_pid_no_root),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
