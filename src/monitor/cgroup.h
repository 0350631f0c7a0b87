/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroup — attribution of a process to a container and a pod from its cgroup membership.
 *
 * Reads /proc/PID/cgroup (under a configurable proc root, so tests use prepared trees) and
 * recognises the layouts Kubernetes and container engines create:
 *   cgroup v1 (one line per hierarchy, named ones like `1:name=systemd:/…` included) and v2 (`0::/…`);
 *   cgroupfs driver: /kubepods/pod<uid>/<cid>, /kubepods/burstable/pod<uid>/<cid>,
 *                    /kubepods/besteffort/pod<uid>/<cid>, /docker/<cid>, /libpod_parent/libpod-<cid>,
 *                    CRI-O's crio-<cid>;
 *   systemd driver:  kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice/
 *                    cri-containerd-<cid>.scope | crio-<cid>.scope | docker-<cid>.scope,
 *                    machine.slice/libpod-<cid>.scope[/container], system.slice/docker-<cid>.scope,
 *                    and the same under a kubelet cgroup root prefix (kind: kubelet-kubepods-…).
 * Conmon scopes (crio-conmon-…, libpod-conmon-…) are the runtime's monitor, not the container.
 *
 * Pure parsing plus one file read; never logs, never allocates on the parse path.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CGROUP_CONTAINER_ID_LEN 64 /* hex digits of a full container id */
#define CGROUP_POD_UID_MAX 64      /* with terminator; uids are 36 chars (static pods: 32 hex) */

enum cgroup_qos {
        CGROUP_QOS_NONE = 0,   /* not a Kubernetes pod */
        CGROUP_QOS_GUARANTEED, /* directly under kubepods */
        CGROUP_QOS_BURSTABLE,
        CGROUP_QOS_BESTEFFORT,
};

enum cgroup_runtime {
        CGROUP_RUNTIME_NONE = 0, /* no container id found */
        CGROUP_RUNTIME_UNKNOWN,  /* a bare container id (cgroupfs driver under kubepods) */
        CGROUP_RUNTIME_CONTAINERD,
        CGROUP_RUNTIME_CRIO,
        CGROUP_RUNTIME_DOCKER,
        CGROUP_RUNTIME_PODMAN,
};

struct cgroup_info {
        char container_id[CGROUP_CONTAINER_ID_LEN + 1]; /* lower-case hex, "" when none */
        char pod_uid[CGROUP_POD_UID_MAX];               /* with dashes, "" when none */
        enum cgroup_qos qos;
        enum cgroup_runtime runtime;
};

/*
 * Attribute one cgroup path ("/kubepods/burstable/pod…/…"). len bytes, need not be
 * NUL-terminated. Returns 1 when a container id or pod uid was found (*ret filled), 0 when the
 * path belongs to no container (*ret zeroed), -EINVAL when the path is not absolute.
 */
int cgroup_parse_path(const char *path, size_t len, struct cgroup_info *ret);

/*
 * Attribute the contents of a /proc/PID/cgroup file (len bytes, need not be NUL-terminated).
 * Lines are `ID:CONTROLLERS:PATH`; malformed lines are skipped. The line naming the most
 * (container id and pod uid over only one of them) wins; on a tie the first. Returns 1 attributed,
 * 0 a process of no container (*ret zeroed), -EINVAL when no line at all is well formed.
 * *ret is written on success only.
 */
int cgroup_parse(const char *text, size_t len, struct cgroup_info *ret);

/*
 * Read PROC_ROOT/PID/cgroup and attribute it. -ENOENT/-ESRCH when the process has gone (callers
 * skip it, not an error of the whole sample), other -errno when unreadable, -EINVAL malformed.
 * proc_root NULL means "/proc".
 */
int cgroup_attribute_pid(const char *proc_root, unsigned pid, struct cgroup_info *ret);

/*
 * A process known only by its PID inside another PID namespace (namespace inode `pidns`, PID
 * `ns_pid` there) → its PID in the namespace of this proc root: scans PROC_ROOT/N/ns/pid
 * ("pid:[INODE]") and the last NSpid field of PROC_ROOT/N/status. 0 with *ret_pid, -ENOENT when
 * no such process, -errno when the proc root cannot be read.
 */
int cgroup_resolve_ns_pid(const char *proc_root, uint64_t pidns, unsigned ns_pid, unsigned *ret_pid);

/* "guaranteed", "burstable", "besteffort", "" */
const char *cgroup_qos_name(enum cgroup_qos q);
/* "containerd", "cri-o", "docker", "podman", "unknown", "" */
const char *cgroup_runtime_name(enum cgroup_runtime r);
