/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroup — /proc/PID/cgroup → container id, pod uid, QoS class, runtime (see cgroup.h).
 * The parsers work on (pointer, length) slices of the caller's buffer and never read past it;
 * they must never allocate or log.
 */
#include "monitor/cgroup.h"

#include <ctype.h>
#include <dirent.h>
#include <inttypes.h>

#include "util/util.h"

#define CGROUP_FILE_MAX (64u * 1024u)

struct slice {
        const char *p;
        size_t n;
};

static bool slice_eq(struct slice s, const char *lit) {
        size_t n = strlen(lit);
        return s.n == n && memcmp(s.p, lit, n) == 0;
}

static bool slice_startswith(struct slice s, const char *lit) {
        size_t n = strlen(lit);
        return s.n >= n && memcmp(s.p, lit, n) == 0;
}

static struct slice slice_skip(struct slice s, size_t k) {
        return (struct slice){ s.p + k, s.n - k };
}

static bool slice_strip_suffix(struct slice *s, const char *lit) {
        size_t n = strlen(lit);
        if (s->n < n || memcmp(s->p + s->n - n, lit, n) != 0)
                return false;
        s->n -= n;
        return true;
}

static bool is_container_id(struct slice s) {
        if (s.n != CGROUP_CONTAINER_ID_LEN)
                return false;
        for (size_t i = 0; i < s.n; i++)
                if (!isxdigit((unsigned char)s.p[i]))
                        return false;
        return true;
}

/* Pod uids: 36 chars with dashes (or underscores in systemd slice names); static pods use a
 * 32-hex hash. Written out with dashes. */
static bool parse_pod_uid(struct slice s, char ret[static CGROUP_POD_UID_MAX]) {
        if (s.n < 32 || s.n > 36)
                return false;
        for (size_t i = 0; i < s.n; i++) {
                char c = s.p[i];
                if (!isxdigit((unsigned char)c) && c != '-' && c != '_')
                        return false;
        }
        for (size_t i = 0; i < s.n; i++)
                ret[i] = s.p[i] == '_' ? '-' : (char)tolower((unsigned char)s.p[i]);
        ret[s.n] = '\0';
        return true;
}

static void set_container(struct cgroup_info *info, struct slice id, enum cgroup_runtime rt) {
        for (size_t i = 0; i < id.n; i++)
                info->container_id[i] = (char)tolower((unsigned char)id.p[i]);
        info->container_id[id.n] = '\0';
        info->runtime = rt;
}

static enum cgroup_qos qos_from(struct slice s) {
        if (slice_eq(s, "burstable"))
                return CGROUP_QOS_BURSTABLE;
        if (slice_eq(s, "besteffort"))
                return CGROUP_QOS_BESTEFFORT;
        return CGROUP_QOS_NONE;
}

/* One path component (between slashes). */
/* lint: long — one cgroup path component against each naming it may follow (systemd slices and cgroupfs, kubepods
 * and the QoS classes, a pod UID, the runtimes' conmon scopes, containerd, CRI-O, Docker and Podman container
 * IDs); one branch per naming. */
static void parse_component(struct slice comp, struct slice prev, bool *k8s, struct cgroup_info *info) {
        struct slice name = comp;
        if (!slice_strip_suffix(&name, ".slice"))
                slice_strip_suffix(&name, ".scope");

        /* "kubepods" (cgroupfs), or a systemd slice "kubepods-burstable-pod<uid_>" — possibly under a
         * prefix of the kubelet's cgroup root, as kind's "kubelet-kubepods-…" */
        struct slice kp = { NULL, 0 };
        for (size_t i = 0; i + 8 <= name.n; i++)
                if ((i == 0 || name.p[i - 1] == '-') && memcmp(name.p + i, "kubepods", 8) == 0 &&
                    (i + 8 == name.n || name.p[i + 8] == '-')) {
                        kp = slice_skip(name, i + 8);
                        break;
                }
        if (kp.p) {
                *k8s = true;
                if (info->qos == CGROUP_QOS_NONE)
                        info->qos = CGROUP_QOS_GUARANTEED;
                if (kp.n == 0)
                        return;
                struct slice rest = slice_skip(kp, 1); /* the '-' */
                static const char *const classes[] = { "burstable", "besteffort" };
                for (size_t i = 0; i < ELEMENTSOF(classes); i++) {
                        if (!slice_startswith(rest, classes[i]))
                                continue;
                        struct slice cls = { rest.p, strlen(classes[i]) };
                        struct slice after = slice_skip(rest, cls.n);
                        if (after.n == 0 || after.p[0] == '-') {
                                info->qos = qos_from(cls);
                                rest = after.n ? slice_skip(after, 1) : after;
                        }
                        break;
                }
                if (slice_startswith(rest, "pod"))
                        parse_pod_uid(slice_skip(rest, 3), info->pod_uid);
                return;
        }
        if (*k8s && qos_from(name) != CGROUP_QOS_NONE) {
                info->qos = qos_from(name);
                return;
        }
        if (*k8s && slice_startswith(name, "pod") && parse_pod_uid(slice_skip(name, 3), info->pod_uid))
                return;

        /* The runtimes' monitor processes: not the container. */
        if (slice_startswith(name, "crio-conmon-") || slice_startswith(name, "libpod-conmon-"))
                return;
        static const struct {
                const char *prefix;
                enum cgroup_runtime rt;
        } prefixed[] = {
                { "cri-containerd-", CGROUP_RUNTIME_CONTAINERD },
                { "crio-", CGROUP_RUNTIME_CRIO },
                { "docker-", CGROUP_RUNTIME_DOCKER },
                { "libpod-", CGROUP_RUNTIME_PODMAN },
        };
        for (size_t i = 0; i < ELEMENTSOF(prefixed); i++) {
                if (!slice_startswith(name, prefixed[i].prefix))
                        continue;
                struct slice id = slice_skip(name, strlen(prefixed[i].prefix));
                if (is_container_id(id))
                        set_container(info, id, prefixed[i].rt);
                return;
        }
        if (is_container_id(name)) {
                enum cgroup_runtime rt = CGROUP_RUNTIME_UNKNOWN;
                if (slice_eq(prev, "docker"))
                        rt = CGROUP_RUNTIME_DOCKER;
                set_container(info, name, rt);
        }
}

int cgroup_parse_path(const char *path, size_t len, struct cgroup_info *ret) {
        struct cgroup_info info = { 0 };
        if (len == 0 || path[0] != '/')
                return -EINVAL;
        /* cgroup v2 marks a removed cgroup this way */
        struct slice all = { path, len };
        slice_strip_suffix(&all, " (deleted)");

        bool k8s = false;
        struct slice prev = { "", 0 };
        size_t i = 0;
        while (i < all.n) {
                while (i < all.n && all.p[i] == '/')
                        i++;
                size_t start = i;
                while (i < all.n && all.p[i] != '/')
                        i++;
                if (i == start)
                        break;
                struct slice comp = { all.p + start, i - start };
                parse_component(comp, prev, &k8s, &info);
                prev = comp;
        }
        if (!k8s)
                info.qos = CGROUP_QOS_NONE;
        bool found = info.container_id[0] || info.pod_uid[0];
        if (!found)
                info = (struct cgroup_info){ 0 };
        *ret = info;
        return found;
}

static int info_score(const struct cgroup_info *i) {
        return !!i->container_id[0] + !!i->pod_uid[0];
}

int cgroup_parse(const char *text, size_t len, struct cgroup_info *ret) {
        struct cgroup_info best = { 0 };
        int best_score = -1;
        size_t pos = 0;
        while (pos < len) {
                size_t eol = pos;
                while (eol < len && text[eol] != '\n')
                        eol++;
                const char *line = text + pos;
                size_t n = eol - pos;
                pos = eol + 1;

                /* ID:CONTROLLERS:PATH — the path may itself hold colons */
                size_t k = 0;
                while (k < n && isdigit((unsigned char)line[k]))
                        k++;
                if (k == 0 || k >= n || line[k] != ':')
                        continue;
                const char *c2 = memchr(line + k + 1, ':', n - k - 1);
                if (!c2)
                        continue;
                size_t off = (size_t)(c2 + 1 - line);
                struct cgroup_info info;
                int r = cgroup_parse_path(line + off, n - off, &info);
                if (r < 0)
                        continue;
                int score = info_score(&info);
                if (score > best_score) {
                        best = info;
                        best_score = score;
                }
        }
        if (best_score < 0)
                return -EINVAL;
        *ret = best;
        return best_score > 0;
}

/* PROC_ROOT/PID/FILE, at most CGROUP_FILE_MAX bytes, into *RET (malloc'd, NUL-terminated). */
static int read_proc(const char *proc_root, const char *pid, const char *file, char **ret, size_t *ret_len) {
        char path[4096];
        int k = snprintf(path, sizeof path, "%s/%s/%s", proc_root, pid, file);
        if (k < 0 || (size_t)k >= sizeof path)
                return -ENAMETOOLONG;
        return read_file(path, CGROUP_FILE_MAX, ret, ret_len);
}

int cgroup_attribute_pid(const char *proc_root, unsigned pid, struct cgroup_info *ret) {
        char pid_s[16];
        snprintf(pid_s, sizeof pid_s, "%u", pid);
        _cleanup_(freep) char *text = NULL;
        size_t len;
        int r = read_proc(proc_root ? proc_root : "/proc", pid_s, "cgroup", &text, &len);
        if (r < 0)
                return r;
        return cgroup_parse(text, len, ret);
}

static int ns_pid_of(const char *proc_root, const char *pid_s, unsigned *ret) {
        _cleanup_(freep) char *text = NULL;
        size_t len;
        int r = read_proc(proc_root, pid_s, "status", &text, &len);
        if (r < 0)
                return r;
        const char *line = strstr(text, "NSpid:");
        if (!line || (line != text && line[-1] != '\n'))
                return -ENOENT;
        line += strlen("NSpid:");
        const char *eol = strchrnul(line, '\n');
        /* last field of the line */
        const char *last = NULL;
        for (const char *p = line; p < eol; p++)
                if (isdigit((unsigned char)*p) && (p == line || !isdigit((unsigned char)p[-1])))
                        last = p;
        if (!last)
                return -ENOENT;
        char num[16];
        size_t n = 0;
        while (last + n < eol && isdigit((unsigned char)last[n]))
                n++;
        if (n >= sizeof num)
                return -ERANGE;
        strnscpy(num, sizeof num, last, n);
        return parse_uint(num, UINT32_MAX, ret);
}

int cgroup_resolve_ns_pid(const char *proc_root, uint64_t pidns, unsigned ns_pid, unsigned *ret_pid) {
        if (!proc_root)
                proc_root = "/proc";
        DIR *d = opendir(proc_root);
        if (!d)
                return -errno;
        char want[64];
        snprintf(want, sizeof want, "pid:[%" PRIu64 "]", pidns);
        int r = -ENOENT;
        struct dirent *de;
        while ((de = readdir(d))) {
                unsigned pid, nsp;
                if (parse_uint(de->d_name, UINT32_MAX, &pid) < 0)
                        continue;
                char path[4096], link[64];
                int k = snprintf(path, sizeof path, "%s/%s/ns/pid", proc_root, de->d_name);
                if (k < 0 || (size_t)k >= sizeof path)
                        continue;
                ssize_t n = readlink(path, link, sizeof link - 1);
                if (n < 0)
                        continue;
                link[n] = '\0';
                if (!streq(link, want))
                        continue;
                if (ns_pid_of(proc_root, de->d_name, &nsp) < 0 || nsp != ns_pid)
                        continue;
                *ret_pid = pid;
                r = 0;
                break;
        }
        closedir(d);
        return r;
}

const char *cgroup_qos_name(enum cgroup_qos q) {
        switch (q) {
                case CGROUP_QOS_GUARANTEED: return "guaranteed";
                case CGROUP_QOS_BURSTABLE: return "burstable";
                case CGROUP_QOS_BESTEFFORT: return "besteffort";
                default: return "";
        }
}

const char *cgroup_runtime_name(enum cgroup_runtime r) {
        switch (r) {
                case CGROUP_RUNTIME_UNKNOWN: return "unknown";
                case CGROUP_RUNTIME_CONTAINERD: return "containerd";
                case CGROUP_RUNTIME_CRIO: return "cri-o";
                case CGROUP_RUNTIME_DOCKER: return "docker";
                case CGROUP_RUNTIME_PODMAN: return "podman";
                default: return "";
        }
}
