/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cdi/hook — the OCI hook's logic (cdi.h, "the OCI hook"): its inputs, the legacy image's checks and
 * plan, and applying a plan inside a container's root filesystem. `gpuslice hook` (src/cli/cmd-hook.c)
 * is its command line.
 *
 * Fail closed: a state or config.json that cannot be read, a GPU or device node that does not exist, a
 * requirement the node does not meet, a namespace that cannot be joined, a file that cannot be put in
 * place — the caller gets an error and refuses the container; nothing is started half-set-up. Every
 * path inside the container's root is resolved with openat2(RESOLVE_IN_ROOT), so symlinks in an image
 * cannot point the hook at the host's files. Never logs; the only process it starts is ldconfig.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cdi/cdi.h"
#include "compat/compat.h"
#include "util/util.h"

int cdi_hook_stage(const char *name, enum cdi_hook_stage *ret) {
        static const struct {
                const char *name;
                enum cdi_hook_stage stage;
        } stages[] = {
                { "prestart", CDI_HOOK_STAGE_RUNTIME_NS },
                { "createRuntime", CDI_HOOK_STAGE_RUNTIME_NS },
                { "createContainer", CDI_HOOK_STAGE_CONTAINER_NS },
                { "startContainer", CDI_HOOK_STAGE_NOTHING },
                { "poststart", CDI_HOOK_STAGE_NOTHING },
                { "poststop", CDI_HOOK_STAGE_NOTHING },
        };
        for (size_t i = 0; name && i < ELEMENTSOF(stages); i++)
                if (streq(name, stages[i].name)) {
                        *ret = stages[i].stage;
                        return 0;
                }
        return -EINVAL;
}

int cdi_hook_read_oci(int fd, struct cdi_oci *ret, struct gs_error *err) {
        _cleanup_(freep) char *state = NULL, *config = NULL;
        size_t len;
        char path[CDI_PATH_MAX + 16];
        int r = read_fd(fd, CDI_OCI_MAX, &state, &len);
        if (r < 0)
                return gs_error_set(err, r, "cannot read the OCI state on stdin: %s",
                                    r == -EFBIG ? "too large" : strerror(-r));
        if (cdi_oci_parse_state(state, len, ret, err) < 0)
                return -EINVAL;
        snprintf(path, sizeof path, "%s/config.json", ret->bundle);
        r = read_file(path, CDI_OCI_MAX, &config, &len);
        if (r < 0)
                return gs_error_set(err, r, "cannot read %s: %s", path, r == -EFBIG ? "too large" : strerror(-r));
        if (cdi_oci_parse_config(config, len, ret, err) < 0) {
                gs_error_prefix(err, "%s", path);
                return -EINVAL;
        }
        return 0;
}

/* ---- the plan ---- */

int cdi_hook_plan_link(struct cdi_hook_plan *p, const char *target, const char *path) {
        if (!target[0] || strchr(target, '/') || strlen(target) >= sizeof p->links[0].target || path[0] != '/' ||
            strlen(path) >= sizeof p->links[0].path)
                return -EINVAL;
        if (p->n_links >= CDI_HOOK_LINKS_MAX)
                return -E2BIG;
        struct cdi_hook_link *l = reallocarray(p->links, p->n_links + 1, sizeof *l);
        if (!l)
                return -ENOMEM;
        p->links = l;
        strscpy(l[p->n_links].target, target, sizeof l->target);
        strscpy(l[p->n_links].path, path, sizeof l->path);
        p->n_links++;
        return 0;
}

int cdi_hook_plan_ldconfig(struct cdi_hook_plan *p, const char *dir) {
        if (dir[0] != '/' || strlen(dir) >= sizeof p->ldconfig[0])
                return -EINVAL;
        if (p->n_ldconfig >= CDI_HOOK_LDCONFIG_MAX)
                return -E2BIG;
        strscpy(p->ldconfig[p->n_ldconfig++], dir, sizeof p->ldconfig[0]);
        return 0;
}

void cdi_hook_plan_done(struct cdi_hook_plan *p) {
        if (!p)
                return;
        free(p->links);
        p->links = NULL;
        p->n_links = 0;
}

/* The soname links of the discovered libraries (libcuda.so.1 → libcuda.so.535.104.05) and libcuda.so. */
static int plan_library_links(struct cdi_hook_plan *p, const struct cdi_discovery *d) {
        for (size_t i = 0; i < d->n_files; i++) {
                const struct cdi_file *f = &d->files[i];
                if (f->kind != CDI_FILE_LIBRARY || !f->soname[0])
                        continue;
                const char *base = strrchr(f->path, '/') + 1;
                int dl = (int)(base - f->path);
                char link[CDI_PATH_MAX];
                int r = 0;
                if (!streq(base, f->soname)) {
                        snprintf(link, sizeof link, "%.*s%s", dl, f->path, f->soname);
                        r = cdi_hook_plan_link(p, base, link);
                }
                if (r == 0 && startswith(f->soname, "libcuda.so.")) {
                        snprintf(link, sizeof link, "%.*slibcuda.so", dl, f->path);
                        r = cdi_hook_plan_link(p, f->soname, link);
                }
                if (r == -E2BIG)
                        return 0; /* as many as fit: the ld cache finds the rest */
                if (r < 0)
                        return r;
        }
        return 0;
}

int cdi_hook_select_gpus(const struct topo *t, const char *list, bool *ret_sel, struct gs_error *err) {
        if (streq(list, "all")) {
                for (unsigned i = 0; i < t->n_gpus; i++)
                        ret_sel[i] = true;
                return 0;
        }
        if (streq(list, "none"))
                return 0;
        const char *p = list;
        while (*p) {
                const char *end = strchr(p, ',');
                size_t n = end ? (size_t)(end - p) : strlen(p);
                char tok[128];
                if (n == 0 || n >= sizeof tok)
                        return gs_error_set(err, -EINVAL, "NVIDIA_VISIBLE_DEVICES: malformed list '%s'", list);
                strnscpy(tok, sizeof tok, p, n);
                unsigned idx;
                bool found = false, is_index = parse_uint(tok, 1u << 20, &idx) == 0;
                for (unsigned i = 0; i < t->n_gpus; i++)
                        if ((is_index && (int)idx == t->gpu[i].index) || streq(tok, t->gpu[i].uuid)) {
                                if (t->gpu[i].state != TOPO_GPU_OK)
                                        return gs_error_set(err, -ENODEV,
                                                            "NVIDIA_VISIBLE_DEVICES: GPU %s is not usable (%s)", tok,
                                                            t->gpu[i].state_text);
                                ret_sel[i] = found = true;
                        }
                if (!found)
                        return gs_error_set(
                                err, -ENODEV,
                                "NVIDIA_VISIBLE_DEVICES: no GPU '%s' on this node (%u GPUs: indices 0-%u or UUIDs)",
                                tok, t->n_gpus, t->n_gpus ? t->n_gpus - 1 : 0);
                p = end ? end + 1 : p + n;
        }
        return 0;
}

/* NVIDIA_REQUIRE_* and friends against the selected GPUs and the node's driver. */
static int check_requirements(const struct cdi_oci *oci, const struct topo *t, const bool *sel, struct gs_error *err) {
        struct compat_gpu gpus[TOPO_MAX_GPUS];
        struct compat_node node = { .cuda = t->cuda_version, .gpus = gpus };
        strscpy(node.driver, t->driver_version, sizeof node.driver);
        for (unsigned i = 0; i < t->n_gpus; i++)
                if (sel[i]) {
                        struct compat_gpu *g = &gpus[node.n_gpus++];
                        memset(g, 0, sizeof *g);
                        g->index = t->gpu[i].index;
                        strscpy(g->brand, t->gpu[i].brand, sizeof g->brand);
                        g->cc_major = t->gpu[i].cc_major;
                        g->cc_minor = t->gpu[i].cc_minor;
                }
        return compat_env_check((const char *const *)oci->env, oci->n_env, &node, err);
}

/* The GPUs' and the control device nodes, the files, links and ld cache directories. */
static int plan_from(const struct cdi_hook_legacy *in, const struct topo *t, const bool *sel,
                     const struct cdi_discovery *d, struct cdi_hook_plan *p, struct gs_error *err) {
        strscpy(p->rootfs, in->oci->rootfs, sizeof p->rootfs);
        strscpy(p->driver_root, in->roots.driver_root ? in->roots.driver_root : "/", sizeof p->driver_root);
        /* createContainer hooks already run in the container's namespaces (where the state's pid means
         * nothing); prestart and createRuntime run in the runtime's and must join it */
        p->pid = in->stage == CDI_HOOK_STAGE_CONTAINER_NS ? 0 : in->oci->pid;
        p->d = d;
        for (unsigned i = 0; i < t->n_gpus; i++)
                if (sel[i]) {
                        if (!d->gpu[i].major)
                                return gs_error_set(err, -ENODEV, "GPU %d: no device node /dev/nvidia%d under %s",
                                                    t->gpu[i].index, t->gpu[i].minor,
                                                    in->roots.dev_root ? in->roots.dev_root : "/");
                        p->nodes[p->n_nodes++] = &d->gpu[i];
                }
        for (unsigned i = 0; i < d->n_control; i++)
                p->nodes[p->n_nodes++] = &d->control[i];
        int r = plan_library_links(p, d);
        if (r < 0)
                return gs_error_set(err, r, "cannot plan the library links: %s", strerror(-r));
        for (unsigned i = 0; i < d->n_lib_dirs && p->n_ldconfig < CDI_HOOK_LDCONFIG_MAX; i++)
                (void)cdi_hook_plan_ldconfig(p, d->lib_dirs[i]);
        return 0;
}

int cdi_hook_plan_legacy(const struct cdi_hook_legacy *in, struct cdi_discovery *d, struct cdi_hook_plan *ret,
                         struct gs_error *err) {
        const char *const *env = (const char *const *)in->oci->env;
        const char *visible = compat_env_get(env, in->oci->n_env, "NVIDIA_VISIBLE_DEVICES");
        if (in->stage == CDI_HOOK_STAGE_NOTHING || !visible || !visible[0] || streq(visible, "void"))
                return 1; /* not a GPU container (or too late): nothing to check, nothing to inject */
        const char *caps_text = compat_env_get(env, in->oci->n_env, "NVIDIA_DRIVER_CAPABILITIES");
        unsigned caps = CDI_CAP_UTILITY | CDI_CAP_COMPUTE;
        const char *bad = NULL;
        if (caps_text && caps_text[0] && cdi_caps_parse(caps_text, &caps, &bad) < 0)
                return gs_error_set(err, -EINVAL,
                                    "NVIDIA_DRIVER_CAPABILITIES: unknown capability in '%s' (utility, compute, video, "
                                    "graphics, display, compat32, all)",
                                    caps_text);
        _cleanup_(freep) struct topo *t = malloc(sizeof *t);
        if (!t)
                return gs_error_set(err, -ENOMEM, "out of memory");
        int r = in->load_node(in->userdata, t, err);
        if (r < 0) {
                gs_error_prefix(err, "cannot read the node's GPUs and driver");
                return r;
        }
        bool sel[TOPO_MAX_GPUS] = { false };
        if ((r = cdi_hook_select_gpus(t, visible, sel, err)) < 0 || (r = check_requirements(in->oci, t, sel, err)) < 0)
                return r;
        if ((r = cdi_discover(t, &in->roots, caps ? caps : CDI_CAP_UTILITY, d, err)) < 0)
                return r;
        *ret = (struct cdi_hook_plan){ 0 };
        r = plan_from(in, t, sel, d, ret, err);
        if (r < 0)
                cdi_hook_plan_done(ret);
        return r;
}

/* ---- inside the container's root ---- */

static int open_in_root(int rootfd, const char *path, int flags) {
        struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC),
                                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
        while (*path == '/')
                path++;
        if (!*path)
                path = ".";
        long fd = syscall(SYS_openat2, rootfd, path, &how, sizeof how);
        return fd < 0 ? -errno : (int)fd;
}

/* The directory `dir` (absolute, in the root), created as needed: an O_PATH fd or -errno. */
static int root_mkdirs(int rootfd, const char *dir) {
        char part[CDI_PATH_MAX];
        size_t n = strlen(dir);
        if (n >= sizeof part)
                return -ENAMETOOLONG;
        for (size_t i = 1; i <= n; i++) {
                if (i != n && dir[i] != '/')
                        continue;
                strnscpy(part, sizeof part, dir, i);
                int fd = open_in_root(rootfd, part, O_PATH | O_DIRECTORY);
                if (fd >= 0) {
                        close(fd);
                        continue;
                }
                if (fd != -ENOENT)
                        return fd;
                char *slash = strrchr(part, '/');
                *slash = '\0';
                int parent = open_in_root(rootfd, part[0] ? part : "/", O_PATH | O_DIRECTORY);
                if (parent < 0)
                        return parent;
                int r = mkdirat(parent, slash + 1, 0755);
                close(parent);
                if (r < 0 && errno != EEXIST)
                        return -errno;
        }
        return open_in_root(rootfd, dir, O_PATH | O_DIRECTORY);
}

static int split_dir(const char *path, char *dir, size_t len, const char **ret_base) {
        const char *slash = strrchr(path, '/');
        if (!slash || !slash[1] || (size_t)(slash - path) >= len)
                return -EINVAL;
        strnscpy(dir, len, path, (size_t)(slash - path));
        if (!dir[0])
                strscpy(dir, "/", len);
        *ret_base = slash + 1;
        return 0;
}

static int inject_node(int rootfd, const struct cdi_devnode *n) {
        char dir[CDI_PATH_MAX];
        const char *base;
        if (split_dir(n->path, dir, sizeof dir, &base) < 0)
                return -EINVAL;
        int dfd = root_mkdirs(rootfd, dir);
        if (dfd < 0)
                return dfd;
        int r = mknodat(dfd, base, S_IFCHR | 0666, makedev(n->major, n->minor)) < 0 && errno != EEXIST ? -errno : 0;
        if (r == 0 && fchmodat(dfd, base, 0666, 0) < 0) /* the umask trimmed mknod's mode */
                r = -errno;
        close(dfd);
        return r;
}

/* Remount the mount at `path` in the root read-only, nosuid, nodev (the bind is on top now: reopen). */
static int make_read_only(int rootfd, const char *path) {
        char proc[64];
        int tfd = open_in_root(rootfd, path, O_PATH | O_NOFOLLOW);
        if (tfd < 0)
                return tfd;
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", tfd);
        int r = mount(NULL, proc, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0 ? -errno : 0;
        close(tfd);
        return r;
}

/* Bind-mount host file `source` (ro: read-only; false for sockets) at `path` in the root. */
static int inject_file(int rootfd, const char *source, const char *path, bool ro, bool dir_target) {
        char dir[CDI_PATH_MAX], proc[64];
        const char *base;
        if (split_dir(path, dir, sizeof dir, &base) < 0)
                return -EINVAL;
        int dfd = root_mkdirs(rootfd, dir);
        if (dfd < 0)
                return dfd;
        int r;
        if (dir_target)
                r = mkdirat(dfd, base, 0755) < 0 && errno != EEXIST ? -errno : 0;
        else {
                int fd = openat(dfd, base, O_CREAT | O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
                r = fd < 0 ? -errno : 0;
                if (fd >= 0)
                        close(fd);
        }
        int tfd = r < 0 ? r : openat(dfd, base, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        close(dfd);
        if (tfd < 0)
                return r < 0 ? r : -errno;
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", tfd);
        r = mount(source, proc, NULL, MS_BIND, NULL) < 0 ? -errno : 0;
        close(tfd);
        return r < 0 || !ro ? r : make_read_only(rootfd, path);
}

static int make_link(int rootfd, const char *target, const char *link) {
        char dir[CDI_PATH_MAX];
        const char *base;
        if (split_dir(link, dir, sizeof dir, &base) < 0 || strchr(target, '/'))
                return -EINVAL;
        int dfd = root_mkdirs(rootfd, dir);
        if (dfd < 0)
                return dfd;
        int r = symlinkat(target, dfd, base) < 0 && errno != EEXIST ? -errno : 0;
        close(dfd);
        return r;
}

/* Refresh the container's ld cache with the host's ldconfig, chrooted into the root (best effort). */
static void run_ldconfig(const struct cdi_hook_plan *p) {
        const char *ldconfig = p->ldconfig_bin                       ? p->ldconfig_bin
                               : access("/sbin/ldconfig", X_OK) == 0 ? "/sbin/ldconfig"
                                                                     : "/usr/sbin/ldconfig";
        char *argv[CDI_HOOK_LDCONFIG_MAX + 4];
        size_t k = 0;
        argv[k++] = (char *)ldconfig;
        argv[k++] = (char *)"-r";
        argv[k++] = (char *)p->rootfs;
        for (size_t i = 0; i < p->n_ldconfig; i++)
                argv[k++] = (char *)p->ldconfig[i];
        argv[k] = NULL;
        pid_t pid = fork();
        if (pid == 0) {
                int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
                if (null >= 0) {
                        dup2(null, STDOUT_FILENO);
                        dup2(null, STDERR_FILENO);
                }
                execv(ldconfig, argv);
                _exit(127);
        }
        if (pid > 0)
                while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
}

/* Join the container's mount namespace when we are not in it. Single-threaded only: a forked child. */
static int enter_mount_ns(int pid) {
        char path[64];
        struct stat self, them;
        if (pid <= 0)
                return 0;
        snprintf(path, sizeof path, "/proc/%d/ns/mnt", pid);
        if (stat("/proc/self/ns/mnt", &self) < 0 || stat(path, &them) < 0)
                return -errno;
        if (self.st_ino == them.st_ino && self.st_dev == them.st_dev)
                return 0;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = setns(fd, CLONE_NEWNS) < 0 ? -errno : 0;
        close(fd);
        return r;
}

/* The driver's files of the plan, bind-mounted. */
static int apply_files(const struct cdi_hook_plan *p, int rootfd, struct gs_error *err) {
        size_t rl = strlen(p->driver_root);
        while (rl > 0 && p->driver_root[rl - 1] == '/')
                rl--;
        for (size_t i = 0; p->d && i < p->d->n_files; i++) {
                const struct cdi_file *f = &p->d->files[i];
                char host[CDI_PATH_MAX * 2];
                snprintf(host, sizeof host, "%.*s%s", (int)rl, p->driver_root, f->source);
                bool dir = f->kind == CDI_FILE_IPC && !strstr(f->path, "socket");
                int r = inject_file(rootfd, host, f->path, f->kind != CDI_FILE_IPC, dir);
                if (r < 0)
                        return gs_error_set(err, r, "cannot mount %s at %s in the container: %s", host, f->path,
                                            strerror(-r));
        }
        return 0;
}

/* The whole plan, in the (single-threaded) child. 0 or -errno with err. */
static int apply_here(const struct cdi_hook_plan *p, struct gs_error *err) {
        int r = enter_mount_ns(p->pid);
        if (r < 0)
                return gs_error_set(err, r, "cannot enter the container's mount namespace (pid %d): %s", p->pid,
                                    strerror(-r));
        _cleanup_(closep) int rootfd = open(p->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rootfd < 0)
                return gs_error_set(err, -errno, "cannot open the root filesystem %s: %s", p->rootfs, strerror(errno));
        for (size_t i = 0; i < p->n_nodes; i++)
                if ((r = inject_node(rootfd, p->nodes[i])) < 0)
                        return gs_error_set(err, r, "cannot create %s in the container: %s", p->nodes[i]->path,
                                            strerror(-r));
        if ((r = apply_files(p, rootfd, err)) < 0)
                return r;
        for (size_t i = 0; i < p->n_links; i++)
                if ((r = make_link(rootfd, p->links[i].target, p->links[i].path)) < 0)
                        return gs_error_set(err, r, "cannot link %s to %s in the container: %s", p->links[i].path,
                                            p->links[i].target, strerror(-r));
        if (p->n_ldconfig)
                run_ldconfig(p);
        return 0;
}

int cdi_hook_apply(const struct cdi_hook_plan *p, struct gs_error *err) {
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return gs_error_set(err, -errno, "pipe: %s", strerror(errno));
        pid_t child = fork();
        if (child < 0) {
                int e = -errno;
                close(pipefd[0]);
                close(pipefd[1]);
                return gs_error_set(err, e, "fork: %s", strerror(-e));
        }
        if (child == 0) {
                /* the child's verdict goes back through the pipe: its code, then its message */
                struct gs_error e = { 0 };
                int r = apply_here(p, &e);
                close(pipefd[0]);
                if (r < 0)
                        (void)!write(pipefd[1], &e, sizeof e);
                _exit(r < 0 ? 1 : 0);
        }
        close(pipefd[1]);
        struct gs_error e = { 0 };
        ssize_t n;
        while ((n = read(pipefd[0], &e, sizeof e)) < 0 && errno == EINTR)
                ;
        close(pipefd[0]);
        int status = 0;
        while (waitpid(child, &status, 0) < 0)
                if (errno != EINTR)
                        return gs_error_set(err, -errno, "waitpid: %s", strerror(errno));
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return 0;
        if (n == (ssize_t)sizeof e && e.code < 0) {
                e.message[sizeof e.message - 1] = '\0';
                return gs_error_set(err, e.code, "%s", e.message);
        }
        return gs_error_set(err, -ECHILD, "the injection process died");
}
