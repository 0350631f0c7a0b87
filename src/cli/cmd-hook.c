/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuslice hook — an OCI hook (prestart / createRuntime / createContainer; the container state on
 * stdin, the bundle's config.json) in two modes:
 *
 *   gpuslice hook [STAGE] [OPTIONS]   legacy images: NVIDIA_VISIBLE_DEVICES (indices, UUIDs, all,
 *       none, void), NVIDIA_DRIVER_CAPABILITIES, NVIDIA_REQUIRE_* / NVIDIA_DISABLE_REQUIRE / CUDA_VERSION
 *       checked against the node (src/compat); a container that fails is refused with one line on
 *       stderr and exit 1; an allowed one gets its device nodes, the driver's libraries (bind-mounted
 *       read-only), binaries and IPC sockets inside its root filesystem, and the library links.
 *   gpuslice hook cdi-links [--link TARGET::LINK]... [--ldconfig DIR]...   the createContainer hook a
 *       CDI spec from `gpuslice cdi generate` names: soname and libcuda.so links, the ld cache.
 *
 * Fail closed: a state or config.json that cannot be read, a device that does not exist, a node
 * that cannot be asked — the container is refused with a clear line, never started half-set-up.
 * Every path inside the container's root is resolved with openat2(RESOLVE_IN_ROOT), so symlinks in
 * an image cannot point the hook at the host's files.
 */
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cdi/cdi.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "compat/compat.h"
#include "util/util.h"

#define MAX_LINKS 256

_printf_(1, 2) static int refuse(const char *fmt, ...) {
        va_list ap;
        fputs("gpuslice hook: container refused: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        return EXIT_RUNTIME;
}

static void help(FILE *f) {
        fputs("Usage: gpuslice hook [STAGE] [OPTIONS]             (OCI state on stdin)\n"
              "       gpuslice hook cdi-links [--link TARGET::LINK]... [--ldconfig DIR]...\n\n"
              "An OCI hook. The first form does for legacy CUDA images what NVIDIA's runtime hook does:\n"
              "reads NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES, NVIDIA_REQUIRE_*,\n"
              "NVIDIA_DISABLE_REQUIRE and CUDA_VERSION from the container's config.json, refuses a container\n"
              "the node's driver cannot run (one line: what failed, what the node has, what would do), and\n"
              "injects device nodes and the driver's libraries into its root filesystem. The second form is\n"
              "the createContainer hook of `gpuslice cdi generate` specs.\n\n"
              "Options:\n"
              "      --dev-root DIR         where /dev/nvidia* are (default /)\n"
              "      --driver-root DIR      root of the driver installation (default /)\n" NODE_SOURCE_HELP
              "  -h, --help                 this help\n",
              f);
}

/* ---- inputs ---- */

static int read_fd_all(int fd, size_t max, char **ret, size_t *ret_len) {
        size_t cap = 4096, len = 0;
        char *buf = malloc(cap + 1);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                if (len == cap) {
                        if (cap >= max) {
                                free(buf);
                                return -EFBIG;
                        }
                        cap = MIN(cap * 2, max);
                        char *nb = realloc(buf, cap + 1);
                        if (!nb) {
                                free(buf);
                                return -ENOMEM;
                        }
                        buf = nb;
                }
                ssize_t n = read(fd, buf + len, cap - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        int e = -errno;
                        free(buf);
                        return e;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        buf[len] = '\0';
        *ret = buf;
        *ret_len = len;
        return 0;
}

/* State from stdin, then the bundle's config.json. EXIT_OK or a refusal. */
static int load_oci(struct cdi_oci *oci) {
        _cleanup_(freep) char *state = NULL, *config = NULL;
        size_t len;
        struct gs_error err;
        char path[CDI_PATH_MAX + 16];
        int r = read_fd_all(STDIN_FILENO, CDI_OCI_MAX, &state, &len);
        if (r < 0)
                return refuse("cannot read the OCI state on stdin: %s", strerror(-r));
        if (cdi_oci_parse_state(state, len, oci, &err) < 0)
                return refuse("%s", err.message);
        snprintf(path, sizeof path, "%s/config.json", oci->bundle);
        r = read_file(path, CDI_OCI_MAX, &config, &len);
        if (r < 0)
                return refuse("cannot read %s: %s", path, r == -EFBIG ? "too large" : strerror(-r));
        if (cdi_oci_parse_config(config, len, oci, &err) < 0)
                return refuse("%s: %s", path, err.message);
        return EXIT_OK;
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

/* Bind-mount host file `source` read-only (ro: false for sockets) at `path` in the root. */
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
        if (r < 0 || !ro)
                return r;
        /* the new mount is on top now: reopen the path to reach it, then make it read-only */
        tfd = open_in_root(rootfd, path, O_PATH | O_NOFOLLOW);
        if (tfd < 0)
                return tfd;
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", tfd);
        r = mount(NULL, proc, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0 ? -errno : 0;
        close(tfd);
        return r;
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

/* Refresh the container's ld cache with the host's ldconfig, chrooted into the root (best effort:
 * images without /etc or with a foreign libc keep theirs). */
static void run_ldconfig(const char *rootfs, char **dirs, size_t n) {
        const char *ldconfig = access("/sbin/ldconfig", X_OK) == 0 ? "/sbin/ldconfig" : "/usr/sbin/ldconfig";
        char *argv[16 + 4];
        size_t k = 0;
        argv[k++] = (char *)ldconfig;
        argv[k++] = (char *)"-r";
        argv[k++] = (char *)rootfs;
        for (size_t i = 0; i < n && k < ELEMENTSOF(argv) - 1; i++)
                argv[k++] = dirs[i];
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

/* Join the container's mount namespace when we are not in it (prestart / createRuntime run in the
 * runtime's). Must be called single-threaded: in a forked child. */
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

struct plan {
        const char *rootfs;
        int pid; /* > 0: join its mount namespace first (prestart, createRuntime) */
        const char *dev_root, *driver_root;
        const struct cdi_devnode *nodes[TOPO_MAX_GPUS + 4];
        size_t n_nodes;
        const struct cdi_discovery *d;
        char *links[MAX_LINKS][2];
        size_t n_links;
        char *ldconfig[8];
        size_t n_ldconfig;
};

/* In a child: enter the namespace, apply the plan. Returns EXIT_OK or a refusal. */
static int apply(const struct plan *p) {
        pid_t child = fork();
        if (child < 0)
                return refuse("fork: %s", strerror(errno));
        if (child > 0) {
                int status;
                while (waitpid(child, &status, 0) < 0)
                        if (errno != EINTR)
                                return refuse("waitpid: %s", strerror(errno));
                return WIFEXITED(status) ? WEXITSTATUS(status) : refuse("injection process died");
        }
        int r = enter_mount_ns(p->pid);
        if (r < 0)
                _exit(refuse("cannot enter the container's mount namespace (pid %d): %s", p->pid, strerror(-r)));
        int rootfd = open(p->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rootfd < 0)
                _exit(refuse("cannot open the root filesystem %s: %s", p->rootfs, strerror(errno)));
        for (size_t i = 0; i < p->n_nodes; i++)
                if ((r = inject_node(rootfd, p->nodes[i])) < 0)
                        _exit(refuse("cannot create %s in the container: %s", p->nodes[i]->path, strerror(-r)));
        for (size_t i = 0; p->d && i < p->d->n_files; i++) {
                const struct cdi_file *f = &p->d->files[i];
                char host[CDI_PATH_MAX * 2];
                size_t rl = strlen(p->driver_root);
                while (rl > 0 && p->driver_root[rl - 1] == '/')
                        rl--;
                snprintf(host, sizeof host, "%.*s%s", (int)rl, p->driver_root, f->source);
                bool dir = f->kind == CDI_FILE_IPC && !strstr(f->path, "socket");
                if ((r = inject_file(rootfd, host, f->path, f->kind != CDI_FILE_IPC, dir)) < 0)
                        _exit(refuse("cannot mount %s at %s in the container: %s", host, f->path, strerror(-r)));
        }
        for (size_t i = 0; i < p->n_links; i++)
                if ((r = make_link(rootfd, p->links[i][0], p->links[i][1])) < 0)
                        _exit(refuse("cannot link %s to %s in the container: %s", p->links[i][1], p->links[i][0],
                                     strerror(-r)));
        close(rootfd);
        if (p->n_ldconfig)
                run_ldconfig(p->rootfs, (char **)p->ldconfig, p->n_ldconfig);
        _exit(EXIT_OK);
}

/* ---- cdi-links ---- */

static int hook_cdi_links(int argc, char **argv) {
        static const struct option opts[] = {
                { "link", required_argument, NULL, 'l' },
                { "ldconfig", required_argument, NULL, 'L' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        struct plan p = { 0 };
        int c;
        optind = 0;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
                switch (c) {
                        case 'l': {
                                char *sep = strstr(optarg, "::");
                                if (!sep || sep == optarg || !sep[2] || sep[2] != '/' || p.n_links == MAX_LINKS) {
                                        fprintf(stderr,
                                                "gpuslice hook cdi-links: --link wants TARGET::/ABSOLUTE/LINK, got "
                                                "'%s'\n",
                                                optarg);
                                        return EXIT_USAGE;
                                }
                                *sep = '\0';
                                p.links[p.n_links][0] = optarg;
                                p.links[p.n_links++][1] = sep + 2;
                                break;
                        }
                        case 'L':
                                if (optarg[0] != '/' || p.n_ldconfig == ELEMENTSOF(p.ldconfig)) {
                                        fprintf(stderr,
                                                "gpuslice hook cdi-links: --ldconfig wants an absolute directory\n");
                                        return EXIT_USAGE;
                                }
                                p.ldconfig[p.n_ldconfig++] = optarg;
                                break;
                        case 'h': help(stdout); return EXIT_OK;
                        default: help(stderr); return EXIT_USAGE;
                }
        }
        struct cdi_oci oci = { 0 };
        int r = load_oci(&oci);
        if (r == EXIT_OK) {
                p.rootfs = oci.rootfs; /* createContainer: already in the container's mount namespace */
                r = apply(&p);
        }
        cdi_oci_done(&oci);
        return r;
}

/* ---- legacy ---- */

static int select_gpus(const struct topo *t, const char *list, bool *sel) {
        if (streq(list, "all")) {
                for (unsigned i = 0; i < t->n_gpus; i++)
                        sel[i] = true;
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
                        return refuse("NVIDIA_VISIBLE_DEVICES: malformed list '%s'", list);
                strnscpy(tok, sizeof tok, p, n);
                unsigned idx;
                bool found = false;
                for (unsigned i = 0; i < t->n_gpus; i++)
                        if ((parse_uint(tok, 1u << 20, &idx) == 0 && (int)idx == t->gpu[i].index) ||
                            streq(tok, t->gpu[i].uuid)) {
                                if (t->gpu[i].state != TOPO_GPU_OK)
                                        return refuse("NVIDIA_VISIBLE_DEVICES: GPU %s is not usable (%s)", tok,
                                                      t->gpu[i].state_text);
                                sel[i] = found = true;
                        }
                if (!found)
                        return refuse(
                                "NVIDIA_VISIBLE_DEVICES: no GPU '%s' on this node (%u GPUs: indices 0-%u or UUIDs)",
                                tok, t->n_gpus, t->n_gpus ? t->n_gpus - 1 : 0);
                p = end ? end + 1 : p + n;
        }
        return 0;
}

/* lint: long — a command's main: the getopt switch (one case per flag, each checking its value and naming the flag
 * in its message), then the command's steps in order; its size is its flags' (the legacy hook's flags, as
 * nvidia-container-runtime passes them). */
static int hook_legacy(int argc, char **argv) {
        enum {
                OPT_NVML = 0x100,
                OPT_DEV,
                OPT_DRV
        };
        static const struct option opts[] = {
                { "dev-root", required_argument, NULL, OPT_DEV },
                { "driver-root", required_argument, NULL, OPT_DRV },
                { "topology", required_argument, NULL, 't' },
                { "nvml-library", required_argument, NULL, OPT_NVML },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        struct node_source src = { 0 };
        struct cdi_roots roots = { "/", "/" };
        int c;
        optind = 0;
        while ((c = getopt_long(argc, argv, "t:h", opts, NULL)) >= 0) {
                switch (c) {
                        case OPT_DEV: roots.dev_root = optarg; break;
                        case OPT_DRV: roots.driver_root = optarg; break;
                        case 't': src.topology = optarg; break;
                        case OPT_NVML: src.nvml_library = optarg; break;
                        case 'h': help(stdout); return EXIT_OK;
                        default: help(stderr); return EXIT_USAGE;
                }
        }
        /* the stage: only the ones before the container runs do anything */
        const char *stage = optind < argc ? argv[optind] : "prestart";
        if (streq(stage, "poststart") || streq(stage, "poststop") || streq(stage, "startContainer"))
                return EXIT_OK;
        if (!streq(stage, "prestart") && !streq(stage, "createRuntime") && !streq(stage, "createContainer")) {
                fprintf(stderr, "gpuslice hook: unknown stage '%s'\n", stage);
                return EXIT_USAGE;
        }

        struct cdi_oci oci = { 0 };
        int r = load_oci(&oci);
        if (r != EXIT_OK)
                return r;
        const char *const *env = (const char *const *)oci.env;
        const char *visible = compat_env_get(env, oci.n_env, "NVIDIA_VISIBLE_DEVICES");
        _cleanup_(freep) struct topo *t = NULL;
        struct cdi_discovery d = { 0 };
        if (!visible || !visible[0] || streq(visible, "void"))
                goto out; /* not a GPU container: nothing to check, nothing to inject */

        const char *caps_text = compat_env_get(env, oci.n_env, "NVIDIA_DRIVER_CAPABILITIES");
        unsigned caps = CDI_CAP_UTILITY | CDI_CAP_COMPUTE;
        const char *bad = NULL;
        if (caps_text && caps_text[0] && cdi_caps_parse(caps_text, &caps, &bad) < 0) {
                r = refuse("NVIDIA_DRIVER_CAPABILITIES: unknown capability in '%s' (utility, compute, video, graphics, "
                           "display, compat32, all)",
                           caps_text);
                goto out;
        }
        t = malloc(sizeof *t);
        if (!t) {
                r = refuse("out of memory");
                goto out;
        }
        if (node_load(&src, t) != EXIT_OK) {
                r = refuse("cannot read the node's GPUs and driver (see above)");
                goto out;
        }
        bool sel[TOPO_MAX_GPUS] = { false };
        if ((r = select_gpus(t, visible, sel)) != 0)
                goto out;

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
        struct gs_error err;
        if (compat_env_check(env, oci.n_env, &node, &err) < 0) {
                r = refuse("%s", err.message);
                goto out;
        }

        if (cdi_discover(t, &roots, caps ? caps : CDI_CAP_UTILITY, &d, &err) < 0) {
                r = refuse("%s", err.message);
                goto out;
        }
        /* createContainer hooks already run in the container's namespaces (where the state's pid
         * means nothing); prestart and createRuntime run in the runtime's and must join it */
        struct plan p = { .rootfs = oci.rootfs,
                          .pid = streq(stage, "createContainer") ? 0 : oci.pid,
                          .dev_root = roots.dev_root,
                          .driver_root = roots.driver_root,
                          .d = &d };
        for (unsigned i = 0; i < t->n_gpus; i++)
                if (sel[i]) {
                        if (!d.gpu[i].major) {
                                r = refuse("GPU %d: no device node /dev/nvidia%d under %s", t->gpu[i].index,
                                           t->gpu[i].minor, roots.dev_root);
                                goto out;
                        }
                        p.nodes[p.n_nodes++] = &d.gpu[i];
                }
        for (unsigned i = 0; i < d.n_control; i++)
                p.nodes[p.n_nodes++] = &d.control[i];
        /* soname links (libcuda.so.1 → libcuda.so.535.104.05) and libcuda.so */
        static char linkbuf[MAX_LINKS][2][CDI_PATH_MAX];
        for (size_t i = 0; i < d.n_files && p.n_links + 2 <= MAX_LINKS; i++) {
                const struct cdi_file *f = &d.files[i];
                if (f->kind != CDI_FILE_LIBRARY || !f->soname[0])
                        continue;
                const char *base = strrchr(f->path, '/') + 1;
                int dl = (int)(base - f->path);
                if (!streq(base, f->soname)) {
                        strscpy(linkbuf[p.n_links][0], base, CDI_PATH_MAX);
                        snprintf(linkbuf[p.n_links][1], CDI_PATH_MAX, "%.*s%s", dl, f->path, f->soname);
                        p.links[p.n_links][0] = linkbuf[p.n_links][0];
                        p.links[p.n_links][1] = linkbuf[p.n_links][1];
                        p.n_links++;
                }
                if (startswith(f->soname, "libcuda.so.")) {
                        snprintf(linkbuf[p.n_links][0], CDI_PATH_MAX, "%s", f->soname);
                        snprintf(linkbuf[p.n_links][1], CDI_PATH_MAX, "%.*slibcuda.so", dl, f->path);
                        p.links[p.n_links][0] = linkbuf[p.n_links][0];
                        p.links[p.n_links][1] = linkbuf[p.n_links][1];
                        p.n_links++;
                }
        }
        for (unsigned i = 0; i < d.n_lib_dirs && p.n_ldconfig < ELEMENTSOF(p.ldconfig); i++)
                p.ldconfig[p.n_ldconfig++] = d.lib_dirs[i];
        r = apply(&p);
out:
        cdi_discovery_done(&d);
        cdi_oci_done(&oci);
        return r;
}

int cmd_hook(int argc, char **argv) {
        if (argc >= 2 && streq(argv[1], "cdi-links"))
                return hook_cdi_links(argc - 1, argv + 1);
        return hook_legacy(argc, argv);
}
