/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuslice run — run a command limited exactly as a container the node agent allocated a GPU
 * fraction to: the same limits file (written with gs_limits_format), the same per-container shared
 * region, the same loading of libgpuslice-cuda.so (LD_PRELOAD; its SONAME is libcuda.so.1), then of the NVML
 * stand-in libgpuslice-nvml.so next to it, linked into the directory as a container has it.
 *
 *   gpuslice run --gpu N [--memory SIZE] [--core PCT] [--elastic] [--context SIZE] -- CMD [ARGS...]
 *
 * The "container" is a private directory (under $XDG_RUNTIME_DIR, else /tmp) holding the limits
 * file (read-only) and the region; it is removed when the command ends unless --keep is given.
 * Never runs the command with a limit it could not set up: any failure before exec is an error.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/commands.h"
#include "interposer/limits.h"
#include "nvml/nvml-abi.h"
#include "util/limits-dir.h"
#include "util/util.h"

#define INTERPOSER_NAME "libgpuslice-cuda.so"

static void help(FILE *f) {
        fputs("Usage: gpuslice run --gpu N [OPTIONS] -- CMD [ARGS...]\n\n"
              "Run CMD limited as a container holding a fraction of GPU N would be: its processes share\n"
              "one memory limit and one compute share on that GPU, enforced by libgpuslice-cuda.so\n"
              "(preloaded; see docs/interposer.md). CMD sees only GPU N, as CUDA device 0.\n\n"
              "Options:\n"
              "  -g, --gpu N             the GPU (NVML index on this node; required)\n"
              "  -m, --memory SIZE       device memory limit (512M, 4GiB, bytes); default: no limit\n"
              "  -c, --core PCT          compute share in percent of the GPU, 1..100; default 100\n"
              "      --elastic           let the share grow into GPU time nobody else uses\n"
              "      --context SIZE      charge each CUDA context SIZE of the memory limit (default 0)\n"
              "      --interposer PATH   libgpuslice-cuda.so to preload (default: next to gpuslice)\n"
              "      --nvml-library PATH libnvidia-ml.so.1 to ask for the GPU's UUID\n"
              "      --keep              keep the limits directory (printed on stderr)\n"
              "  -h, --help              this help\n\n"
              "Exit status: CMD's own (128+N when killed by signal N); 2 bad usage, 1 setup failed.\n",
              f);
}

/* The GPU's UUID through NVML, so the interposer matches the device whatever ordinal CUDA gives it. */
static int gpu_uuid(const char *lib, unsigned index, char *buf, size_t len) {
        void *dl = dlopen(lib ? lib : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!dl)
                return -ENOENT;
        __typeof__(&nvmlInit_v2) init = (__typeof__(init))dlsym(dl, "nvmlInit_v2");
        __typeof__(&nvmlShutdown) shutdown = (__typeof__(shutdown))dlsym(dl, "nvmlShutdown");
        __typeof__(&nvmlDeviceGetHandleByIndex_v2) by_index =
                (__typeof__(by_index))dlsym(dl, "nvmlDeviceGetHandleByIndex_v2");
        __typeof__(&nvmlDeviceGetUUID) get_uuid = (__typeof__(get_uuid))dlsym(dl, "nvmlDeviceGetUUID");
        int r = -ENOENT;
        if (init && shutdown && by_index && get_uuid && init() == NVML_SUCCESS) {
                nvmlDevice_t d;
                char u[96];
                if (by_index(index, &d) != NVML_SUCCESS)
                        r = -ENODEV;
                else if (get_uuid(d, u, sizeof u) == NVML_SUCCESS && strlen(u) < len) {
                        strscpy(buf, u, len);
                        r = 0;
                }
                shutdown();
        }
        dlclose(dl);
        return r;
}

/* libgpuslice-cuda.so beside the gpuslice binary (build tree), else in ../lib/gpuslice (installed). */
static int find_interposer(char *buf, size_t len) {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0)
                return -errno;
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (!slash)
                return -ENOENT;
        *slash = '\0';
        static const char *const rel[] = { "/" INTERPOSER_NAME, "/../lib/gpuslice/" INTERPOSER_NAME };
        for (size_t i = 0; i < ELEMENTSOF(rel); i++) {
                if (snprintf(buf, len, "%s%s", exe, rel[i]) >= (int)len)
                        continue;
                char real[PATH_MAX];
                if (access(buf, R_OK) == 0 && realpath(buf, real) && strlen(real) < len) {
                        strscpy(buf, real, len);
                        return 0;
                }
        }
        return -ENOENT;
}

/* The real NVML's file, as the dynamic loader finds LIB (default libnvidia-ml.so.1): where the stand-in's
 * driver/libnvidia-ml.so.1 points. 0 or -ENOENT. */
static int real_nvml(const char *lib, char *buf, size_t len) {
        void *dl = dlopen(lib ? lib : "libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
        const struct link_map *m = NULL;
        int r = -ENOENT;
        char real[PATH_MAX];
        /* the object that defines nvmlInit_v2: not a stand-in some earlier preload brought */
        void *sym = dl ? dlsym(dl, "nvmlInit_v2") : NULL;
        Dl_info info;
        if (sym && dladdr(sym, &info) && info.dli_fname && realpath(info.dli_fname, real) && strlen(real) < len) {
                strscpy(buf, real, len);
                r = 0;
        } else if (dl && dlinfo(dl, RTLD_DI_LINKMAP, &m) == 0 && m && m->l_name[0] && realpath(m->l_name, real) &&
                   strlen(real) < len) {
                strscpy(buf, real, len);
                r = 0;
        }
        if (dl)
                dlclose(dl);
        return r;
}

/* The NVML stand-in in the run's directory laid out as a container has it (limits_dir_libs): DIR/lib/
 * libnvidia-ml.so.1 links to libgpuslice-nvml.so next to INTERPOSER, DIR/driver/libnvidia-ml.so.1 to the real
 * NVML (its $ORIGIN/../driver). The LD_PRELOAD value (the interposer, then the stand-in) in PRELOAD; without the
 * stand-in or the real NVML, the interposer alone (said on stderr). */
static void run_nvml(const char *dir, const char *interposer, const char *nvml, char *preload, size_t len) {
        char standin[PATH_MAX], real[PATH_MAX], at[PATH_MAX + 40];
        struct limits_dir_libs libs;
        bool ok = limits_dir_standin_path(interposer, standin, sizeof standin) == 0 && access(standin, R_OK) == 0 &&
                  real_nvml(nvml, real, sizeof real) == 0;
        limits_dir_libs(interposer, ok ? standin : NULL, ok ? real : NULL, &libs);
        snprintf(preload, len, "%s", interposer);
        if (!libs.nvml) {
                fprintf(stderr, "gpuslice run: no %s or no real NVML: NVML reads the whole GPU\n",
                        LIMITS_DIR_NVML_NAME);
                return;
        }
        static const char *const sub[] = { "lib", "driver" };
        for (size_t i = 0; i < ELEMENTSOF(sub); i++) {
                snprintf(at, sizeof at, "%s/%s", dir, sub[i]);
                if (mkdir(at, 0755) < 0)
                        return;
                snprintf(at, sizeof at, "%s/%s/libnvidia-ml.so.1", dir, sub[i]);
                if (symlink(libs.mount[i + 1].host, at) < 0)
                        return;
        }
        snprintf(preload, len, "%s:%s/lib/libnvidia-ml.so.1", interposer, dir);
}

static pid_t child_pid;

static void forward(int sig) {
        if (child_pid > 0)
                kill(child_pid, sig);
}

struct run_opts {
        unsigned gpu, core;
        uint64_t memory, context;
        bool have_gpu, elastic, keep;
        const char *interposer, *nvml;
};

/* The flags into *O (optind then points at CMD). -1 to go on, else the exit code (help, bad usage). */
static int run_parse(int argc, char **argv, struct run_opts *o) {
        enum {
                OPT_ELASTIC = 0x100,
                OPT_INTERPOSER,
                OPT_NVML,
                OPT_KEEP,
                OPT_CONTEXT
        };
        static const struct option opts[] = {
                { "gpu", required_argument, NULL, 'g' },
                { "memory", required_argument, NULL, 'm' },
                { "core", required_argument, NULL, 'c' },
                { "elastic", no_argument, NULL, OPT_ELASTIC },
                { "context", required_argument, NULL, OPT_CONTEXT },
                { "interposer", required_argument, NULL, OPT_INTERPOSER },
                { "nvml-library", required_argument, NULL, OPT_NVML },
                { "keep", no_argument, NULL, OPT_KEEP },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        *o = (struct run_opts){ .core = 100 };
        int c;
        optind = 0;
        /* '+': stop at the first non-option, so CMD's own options stay CMD's. */
        while ((c = getopt_long(argc, argv, "+g:m:c:h", opts, NULL)) >= 0) {
                switch (c) {
                        case 'g':
                                if (parse_uint(optarg, GS_MAX_DEVICES * 64u, &o->gpu) < 0) {
                                        fprintf(stderr, "gpuslice run: --gpu: expected a GPU index, got '%s'\n",
                                                optarg);
                                        return EXIT_USAGE;
                                }
                                o->have_gpu = true;
                                break;
                        case 'm':
                                if (parse_size(optarg, &o->memory) < 0 || o->memory == 0) {
                                        fprintf(stderr,
                                                "gpuslice run: --memory: expected a size such as 4GiB, got '%s'\n",
                                                optarg);
                                        return EXIT_USAGE;
                                }
                                break;
                        case 'c':
                                if (parse_uint(optarg, 100, &o->core) < 0 || o->core == 0) {
                                        fprintf(stderr, "gpuslice run: --core: expected 1..100, got '%s'\n", optarg);
                                        return EXIT_USAGE;
                                }
                                break;
                        case OPT_ELASTIC: o->elastic = true; break;
                        case OPT_CONTEXT:
                                if (parse_size(optarg, &o->context) < 0) {
                                        fprintf(stderr,
                                                "gpuslice run: --context: expected a size such as 300MiB, got '%s'\n",
                                                optarg);
                                        return EXIT_USAGE;
                                }
                                break;
                        case OPT_INTERPOSER: o->interposer = optarg; break;
                        case OPT_NVML: o->nvml = optarg; break;
                        case OPT_KEEP: o->keep = true; break;
                        case 'h': help(stdout); return EXIT_OK;
                        default: help(stderr); return EXIT_USAGE;
                }
        }
        if (!o->have_gpu || optind >= argc) {
                fprintf(stderr, "gpuslice run: %s\n", !o->have_gpu ? "--gpu is required" : "no command given");
                help(stderr);
                return EXIT_USAGE;
        }
        return -1;
}

/* A fresh directory of our own (mkdtemp, in DIR), laid out as the agent lays out a container's, with L written
 * into it (L's region and container name set here); LIMITS_PATH is its limits file. 0, or -1 with the reason
 * printed and the directory removed. */
static int run_write_limits(struct gs_limits *l, char *dir, size_t dir_len, char *limits_path, size_t path_len) {
        const char *base = secure_getenv("XDG_RUNTIME_DIR");
        if (snprintf(dir, dir_len, "%s/gpuslice-run-XXXXXX", base && *base == '/' ? base : "/tmp") >= (int)dir_len ||
            !mkdtemp(dir)) {
                fprintf(stderr, "gpuslice run: cannot make a directory for the limits: %s\n", strerror(errno));
                return -1;
        }
        char *name = strrchr(dir, '/') + 1;
        name[-1] = '\0';
        struct gs_error err = { 0 };
        _cleanup_(closep) int dfd = limits_dir_create(dir, name, false, &err);
        name[-1] = '/';
        snprintf(l->container, sizeof l->container, "run-%d", (int)getpid());
        snprintf(l->region, sizeof l->region, "%s/" LIMITS_DIR_SHM_DIR "/region", dir);
        snprintf(limits_path, path_len, "%s/" LIMITS_DIR_LIMITS_FILE, dir);
        char text[GS_LIMITS_MAX_FILE];
        int n = dfd < 0 ? dfd : gs_limits_format(l, text, sizeof text);
        if (n >= 0)
                n = limits_dir_write_limits(dfd, text, (size_t)n, 0);
        if (n < 0) {
                fprintf(stderr, "gpuslice run: cannot write %s: %s\n", limits_path,
                        dfd < 0 ? err.message : strerror(-n));
                (void)limits_dir_remove_at(AT_FDCWD, dir);
                return -1;
        }
        return 0;
}

/* Run CMD (argv-style) with the container's environment, SIGINT and SIGTERM forwarded to it; its wait status,
 * or -1 when it could not be started. */
static int run_child(char **cmd, const char *preload, const char *limits_path, const char *visible) {
        struct sigaction sa = { .sa_handler = forward }, old_int, old_term;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_int);
        sigaction(SIGTERM, &sa, &old_term);
        child_pid = fork();
        if (child_pid < 0) {
                fprintf(stderr, "gpuslice run: fork: %s\n", strerror(errno));
                return -1;
        }
        if (child_pid == 0) {
                sigaction(SIGINT, &old_int, NULL);
                sigaction(SIGTERM, &old_term, NULL);
                if (setenv("LD_PRELOAD", preload, 1) < 0 || setenv(GS_LIMITS_ENV, limits_path, 1) < 0 ||
                    setenv("CUDA_VISIBLE_DEVICES", visible, 1) < 0)
                        _exit(127);
                execvp(cmd[0], cmd);
                fprintf(stderr, "gpuslice run: %s: %s\n", cmd[0], strerror(errno));
                _exit(127);
        }
        int st = 0;
        while (waitpid(child_pid, &st, 0) < 0 && errno == EINTR)
                ;
        return st;
}

int cmd_run(int argc, char **argv) {
        struct run_opts o;
        int rc = run_parse(argc, argv, &o);
        if (rc >= 0)
                return rc;
        char lib[PATH_MAX];
        if (o.interposer) {
                if (!realpath(o.interposer, lib)) {
                        fprintf(stderr, "gpuslice run: --interposer %s: %s\n", o.interposer, strerror(errno));
                        return EXIT_RUNTIME;
                }
        } else if (find_interposer(lib, sizeof lib) < 0) {
                fprintf(stderr, "gpuslice run: cannot find %s next to gpuslice; use --interposer\n", INTERPOSER_NAME);
                return EXIT_RUNTIME;
        }

        struct gs_limits l = { .version = GS_LIMITS_VERSION,
                               .n_devices = 1,
                               .core_policy = o.elastic ? GS_CORE_ELASTIC : GS_CORE_HARD };
        l.dev[0] = (struct gs_limits_device){
                .index = 0, .memory_bytes = o.memory, .core_percent = o.core, .context_bytes = o.context
        };
        int r = gpu_uuid(o.nvml, o.gpu, l.dev[0].uuid, sizeof l.dev[0].uuid);
        if (r == -ENODEV) {
                fprintf(stderr, "gpuslice run: there is no GPU %u on this node\n", o.gpu);
                return EXIT_USAGE;
        }
        if (r < 0)
                fprintf(stderr, "gpuslice run: NVML unavailable; matching GPU %u by index\n", o.gpu);

        char dir[GS_REGION_PATH_MAX - 32], limits_path[PATH_MAX + 16];
        if (run_write_limits(&l, dir, sizeof dir, limits_path, sizeof limits_path) < 0)
                return EXIT_RUNTIME;
        if (o.keep)
                fprintf(stderr, "gpuslice run: limits in %s\n", limits_path);

        /* The environment every process of the "container" inherits. */
        const char *old = getenv("LD_PRELOAD");
        char libs[2 * PATH_MAX + 64];
        run_nvml(dir, lib, o.nvml, libs, sizeof libs);
        _cleanup_(freep) char *preload = NULL;
        if (asprintf(&preload, "%s%s%s", libs, old && *old ? ":" : "", old && *old ? old : "") < 0)
                return EXIT_RUNTIME;
        char visible[GS_UUID_MAX];
        if (l.dev[0].uuid[0])
                memcpy(visible, l.dev[0].uuid, sizeof visible);
        else
                snprintf(visible, sizeof visible, "%u", o.gpu);

        int st = run_child(argv + optind, preload, limits_path, visible);
        if (st < 0)
                return EXIT_RUNTIME;
        if (!o.keep)
                (void)limits_dir_remove_at(AT_FDCWD, dir);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
