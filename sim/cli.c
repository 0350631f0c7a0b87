/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuslice-sim — change the simulated node's shared state from the shell: inject Xid events,
 * lose / deny / restore GPUs, set utilization, add and remove GPU processes, dump or reset the
 * state. Uses GPUSLICE_SIM_NODE / GPUSLICE_SIM_STATE exactly like the simulated libraries.
 *
 * Exit codes: 0 done, 1 the state could not be opened or changed, 2 bad command line (including
 * a GPU index the node does not have), 3 the node description does not parse, 4 nothing to act
 * on (no such process) or no room (process table full).
 * It must never hold the state lock while printing or waiting.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "nvml/nvml-abi.h"
#include "sim/sim.h"
#include "util/atomic-file.h"
#include "util/util.h"

enum {
        EXIT_OK = 0,
        EXIT_RUNTIME = 1,
        EXIT_USAGE = 2,
        EXIT_DATA = 3,
        EXIT_UNSAT = 4,
};

static struct topo node;
static char node_path[PATH_MAX];

static void usage(FILE *f) {
        fputs("Usage: gpuslice-sim COMMAND [ARGS]\n"
              "\n"
              "Change the simulated GPU node's shared state (see docs/simulator.md). The node is\n"
              "$GPUSLICE_SIM_NODE; the state file is $GPUSLICE_SIM_STATE, else\n"
              "/dev/shm/gpuslice-sim-<hash of the node file's path>.\n"
              "\n"
              "Commands:\n"
              "  xid GPU XID                 post an Xid event (critical error) on GPU\n"
              "  lose GPU                    GPU falls off the bus: GPU_IS_LOST, and Xid 79 is posted\n"
              "  deny GPU                    queries of GPU answer NO_PERMISSION\n"
              "  restore GPU                 clear lost / no-permission\n"
              "  util GPU PCT                set GPU utilization (0 = derive from its processes)\n"
              "  proc add --gpu N --pid P --mem SIZE [--sm PCT] [--keep]\n"
              "                              a process P holding SIZE (24GiB, 512MiB, bytes) on GPU N;\n"
              "                              --keep: keep it even though P does not exist\n"
              "                              [--mig GI:CI] on that MIG device (GPU and compute instance ids)\n"
              "  proc del --pid P            remove process P from every GPU\n"
              "  gpu-reset GPU               reset an idle GPU: a pending MIG mode takes effect, its MIG\n"
              "                              instances are gone\n"
              "  mig-fault kill|fail N       the Nth MIG change through NVML from now on kills its caller\n"
              "                              after it is made, or fails (NVML_ERROR_UNKNOWN) unmade\n"
              "  mig-fault clear             no MIG fault\n"
              "  caps ROOT                   write the MIG capabilities as the driver and nvidia-modprobe\n"
              "                              make them, under ROOT: proc/driver/nvidia-caps/mig-minors,\n"
              "                              proc/driver/nvidia/capabilities/..., dev/nvidia-caps/nvidia-cap<M>\n"
              "                              (config, monitor and every existing GPU/compute instance)\n"
              "  compute-mode [GPU MODE]     print every GPU's compute mode (nvmlComputeMode_t: 0 DEFAULT,\n"
              "                              2 PROHIBITED, 3 EXCLUSIVE_PROCESS) on one line, their UUIDs on\n"
              "                              the next; with GPU MODE, set GPU's first (as nvidia-smi -c)\n"
              "  show                        print the state\n"
              "  reset                       back to an idle, healthy node (recreates a stale file)\n"
              "  --help                      this text\n"
              "\n"
              "Exit codes: 0 done, 1 state error, 2 usage, 3 bad node description, 4 nothing to act on.\n",
              f);
}

static int load_node(void) {
        char err[512];
        int r = sim_node_load(&node, node_path, sizeof node_path, err, sizeof err);
        if (r < 0) {
                fprintf(stderr, "gpuslice-sim: %s\n", err);
                return r == -EINVAL ? EXIT_DATA : EXIT_RUNTIME;
        }
        return EXIT_OK;
}

static int open_state(struct sim_state **ret) {
        int ex = load_node();
        if (ex != EXIT_OK)
                return ex;
        char err[512];
        int r = sim_state_open(&node, node_path, ret, err, sizeof err);
        if (r < 0) {
                fprintf(stderr, "gpuslice-sim: %s\n", err);
                return EXIT_RUNTIME;
        }
        return EXIT_OK;
}

static int parse_gpu(const char *s, unsigned *ret) {
        unsigned g;
        if (parse_uint(s, UINT_MAX, &g) < 0) {
                fprintf(stderr, "gpuslice-sim: '%s' is not a GPU index\n", s);
                return EXIT_USAGE;
        }
        if (g >= node.n_gpus) {
                fprintf(stderr, "gpuslice-sim: GPU %u does not exist (the node has %u GPUs)\n", g, node.n_gpus);
                return EXIT_USAGE;
        }
        *ret = g;
        return EXIT_OK;
}

static int lock_or_fail(struct sim_state *s) {
        int r = sim_state_lock(s);
        if (r < 0) {
                fprintf(stderr, "gpuslice-sim: cannot lock the state: %s\n", strerror(-r));
                return EXIT_RUNTIME;
        }
        return EXIT_OK;
}

/* Commands taking GPU [VALUE]. */
static int cmd_gpu(const char *cmd, int argc, char **argv) {
        bool with_value = streq(cmd, "xid") || streq(cmd, "util");
        if (argc != (with_value ? 3 : 2)) {
                fprintf(stderr, "gpuslice-sim: usage: gpuslice-sim %s GPU%s\n", cmd,
                        streq(cmd, "xid") ? " XID"
                        : with_value      ? " PCT"
                                          : "");
                return EXIT_USAGE;
        }
        struct sim_state *s = NULL;
        int ex = open_state(&s);
        if (ex != EXIT_OK)
                return ex;
        unsigned gpu, value = 0;
        ex = parse_gpu(argv[1], &gpu);
        if (ex == EXIT_OK && with_value && parse_uint(argv[2], streq(cmd, "util") ? 100 : UINT32_MAX, &value) < 0) {
                fprintf(stderr, "gpuslice-sim: '%s' is not a valid %s\n", argv[2],
                        streq(cmd, "util") ? "percentage (0-100)" : "Xid number");
                ex = EXIT_USAGE;
        }
        if (ex == EXIT_OK)
                ex = lock_or_fail(s);
        if (ex != EXIT_OK) {
                sim_state_close(s);
                return ex;
        }
        uint32_t *flags = &s->gpu[gpu].flags;
        if (streq(cmd, "xid"))
                sim_state_post_xid_locked(s, gpu, value);
        else if (streq(cmd, "lose")) {
                __atomic_or_fetch(flags, SIM_GPU_LOST, __ATOMIC_RELEASE);
                sim_state_post_xid_locked(s, gpu, 79); /* "GPU has fallen off the bus" */
        } else if (streq(cmd, "deny"))
                __atomic_or_fetch(flags, SIM_GPU_NO_PERMISSION, __ATOMIC_RELEASE);
        else if (streq(cmd, "restore"))
                __atomic_and_fetch(flags, ~(SIM_GPU_LOST | SIM_GPU_NO_PERMISSION), __ATOMIC_RELEASE);
        else if (streq(cmd, "util"))
                s->gpu[gpu].util_gpu = value;
        sim_state_unlock(s);
        sim_state_close(s);
        return EXIT_OK;
}

struct proc_args {
        bool add, keep;
        const char *gpu_s, *mem_s;
        uint32_t gi, ci; /* --mig GI:CI, SIM_NO_INSTANCE none */
        unsigned pid, sm;
        uint64_t mem;
};

/* One option of `proc`. EXIT_OK, or the exit code (-1: --help printed). */
static int proc_option(int c, struct proc_args *a) {
        switch (c) {
                case 'g': a->gpu_s = optarg; break;
                case 'm': a->mem_s = optarg; break;
                case 'k': a->keep = true; break;
                case 'M': {
                        unsigned x, y;
                        char tail;
                        if (sscanf(optarg, "%u:%u%c", &x, &y, &tail) != 2 || x >= SIM_MIG_CAP_GIS ||
                            y >= SIM_MIG_MAX_CI) {
                                fprintf(stderr, "gpuslice-sim: --mig wants GI:CI (ids), got '%s'\n", optarg);
                                return EXIT_USAGE;
                        }
                        a->gi = x;
                        a->ci = y;
                        break;
                }
                case 'p':
                        if (parse_uint(optarg, INT32_MAX, &a->pid) < 0 || a->pid == 0) {
                                fprintf(stderr, "gpuslice-sim: '%s' is not a PID\n", optarg);
                                return EXIT_USAGE;
                        }
                        break;
                case 's':
                        if (parse_uint(optarg, 100, &a->sm) < 0) {
                                fprintf(stderr, "gpuslice-sim: --sm wants a percentage (0-100), got '%s'\n", optarg);
                                return EXIT_USAGE;
                        }
                        break;
                case 'h': usage(stdout); return -1;
                default: return EXIT_USAGE;
        }
        return EXIT_OK;
}

/* `proc add|del` options into a. EXIT_OK or the exit code (-1: --help printed). */
static int proc_parse(int argc, char **argv, struct proc_args *a) {
        static const struct option opts[] = {
                { "gpu", required_argument, NULL, 'g' }, { "pid", required_argument, NULL, 'p' },
                { "mem", required_argument, NULL, 'm' }, { "sm", required_argument, NULL, 's' },
                { "keep", no_argument, NULL, 'k' },      { "mig", required_argument, NULL, 'M' },
                { "help", no_argument, NULL, 'h' },      {},
        };
        int c, ex;
        optind = 1;
        while ((c = getopt_long(argc - 1, argv + 1, "", opts, NULL)) >= 0)
                if ((ex = proc_option(c, a)) != EXIT_OK)
                        return ex;
        if (optind != argc - 1) {
                fprintf(stderr, "gpuslice-sim: unexpected argument '%s'\n", argv[optind + 1]);
                return EXIT_USAGE;
        }
        if (!a->pid || (a->add && (!a->gpu_s || !a->mem_s))) {
                fprintf(stderr, "gpuslice-sim: usage: gpuslice-sim proc add --gpu N --pid P --mem SIZE [--sm PCT] "
                                "[--keep] | proc del --pid P\n");
                return EXIT_USAGE;
        }
        if (a->add && parse_size(a->mem_s, &a->mem) < 0) {
                fprintf(stderr, "gpuslice-sim: '%s' is not a size (24GiB, 512MiB, bytes)\n", a->mem_s);
                return EXIT_USAGE;
        }
        return EXIT_OK;
}

/* Whether the locked state can take a's process on GPU gpu (its MIG device exists, the memory fits).
 * EXIT_OK or EXIT_UNSAT, said on stderr. */
static int proc_fits(struct sim_state *s, const struct proc_args *a, unsigned gpu) {
        if (a->gi != SIM_NO_INSTANCE) {
                struct sim_mig_gi *g = sim_mig_gi_find(&s->mig[gpu], a->gi);
                if (s->mig[gpu].current != NVML_DEVICE_MIG_ENABLE || !g || !sim_mig_ci_find(g, a->ci)) {
                        fprintf(stderr,
                                "gpuslice-sim: GPU %u has no MIG device %u:%u (GPU instance:compute instance)\n", gpu,
                                a->gi, a->ci);
                        return EXIT_UNSAT;
                }
        }
        uint64_t total, room, used;
        sim_mem_capacity_locked(s, &node, gpu, a->gi, &total, &room, &used);
        if (a->mem > room) {
                fprintf(stderr, "gpuslice-sim: %s is more than %s has (%" PRIu64 " bytes usable)\n", a->mem_s,
                        a->gi == SIM_NO_INSTANCE ? "the GPU" : "the MIG device", room);
                return EXIT_UNSAT;
        }
        return EXIT_OK;
}

/* Add or remove the process in the locked state. EXIT_OK or EXIT_UNSAT (table full, no such process). */
static int proc_apply(struct sim_state *s, const struct proc_args *a, unsigned gpu) {
        if (!a->add)
                return sim_proc_del_locked(s, a->pid) == 0 ? EXIT_UNSAT : EXIT_OK;
        struct sim_proc *p = NULL;
        if (sim_proc_get_locked(s, a->pid, gpu, &p) < 0)
                return EXIT_UNSAT;
        p->used_bytes = a->mem;
        p->gi = a->gi;
        p->ci = a->ci;
        p->sm_util = a->sm;
        p->sample_us = sim_now_us();
        p->flags = a->keep ? SIM_PROC_KEEP : 0;
        return EXIT_OK;
}

static int cmd_proc(int argc, char **argv) {
        if (argc < 2 || (!streq(argv[1], "add") && !streq(argv[1], "del"))) {
                fprintf(stderr, "gpuslice-sim: usage: gpuslice-sim proc add|del ...\n");
                return EXIT_USAGE;
        }
        struct proc_args a = { .add = streq(argv[1], "add"), .gi = SIM_NO_INSTANCE, .ci = SIM_NO_INSTANCE };
        int ex = proc_parse(argc, argv, &a);
        if (ex != EXIT_OK)
                return ex < 0 ? EXIT_OK : ex;
        struct sim_state *s = NULL;
        if ((ex = open_state(&s)) != EXIT_OK)
                return ex;
        unsigned gpu = 0;
        if (a.add)
                ex = parse_gpu(a.gpu_s, &gpu);
        if (ex == EXIT_OK)
                ex = lock_or_fail(s);
        if (ex != EXIT_OK) {
                sim_state_close(s);
                return ex;
        }
        if (a.add && (ex = proc_fits(s, &a, gpu)) != EXIT_OK) {
                sim_state_unlock(s);
                sim_state_close(s);
                return ex;
        }
        ex = proc_apply(s, &a, gpu);
        sim_state_unlock(s);
        sim_state_close(s);
        if (ex == EXIT_UNSAT)
                fprintf(stderr,
                        a.add ? "gpuslice-sim: the process table is full (%u entries)\n"
                              : "gpuslice-sim: no process %u on the node\n",
                        a.add ? SIM_MAX_PROCS : a.pid);
        return ex;
}

/* MIG mode and instances, like `nvidia-smi mig -lgi` with the compute instances below each. */
static void print_mig(const struct sim_state *s) {
        bool any = false;
        for (unsigned g = 0; g < node.n_gpus; g++) {
                const struct sim_mig_model *m = sim_mig_model(&node.gpu[g]);
                const struct sim_mig_gpu *mg = &s->mig[g];
                if (!m)
                        continue;
                if (!any)
                        printf("\nGPU  MIG  %-8s %-12s %5s %9s  %s\n", "PENDING", "PROFILE", "GI", "PLACEMENT",
                               "COMPUTE INSTANCES (id: MIG index, profile)");
                any = true;
                printf("%3u  %-4s %-8s", g, mg->current ? "on" : "off",
                       mg->pending != mg->current ? (mg->pending ? "on" : "off") : "-");
                bool first = true;
                for (unsigned i = 0; i < SIM_MIG_MAX_GI; i++) {
                        const struct sim_mig_gi *gi = &mg->gi[i];
                        if (!gi->used)
                                continue;
                        char name[48];
                        sim_mig_device_name(m, gi, NULL, name, sizeof name);
                        printf("%s %-12s %5" PRIu32 " %7" PRIu32 ":%" PRIu32 " ", first ? "" : "\n                ",
                               name, gi->id, gi->start, gi->size);
                        first = false;
                        for (unsigned j = 0; j < SIM_MIG_MAX_CI; j++)
                                if (gi->ci[j].used) {
                                        sim_mig_device_name(m, gi, &gi->ci[j], name, sizeof name);
                                        printf(" %" PRIu32 ": %" PRIu32 ", %s;", gi->ci[j].id, gi->ci[j].index, name);
                                }
                }
                putchar('\n');
        }
}

/* compute-mode [GPU MODE]: the modes (the state's, which the simulated NVML and libcuda read), then the UUIDs. */
static int cmd_compute_mode(int argc, char **argv) {
        if (argc != 1 && argc != 3) {
                fprintf(stderr, "gpuslice-sim: usage: gpuslice-sim compute-mode [GPU MODE]\n");
                return EXIT_USAGE;
        }
        struct sim_state *s = NULL;
        int ex = open_state(&s);
        if (ex != EXIT_OK)
                return ex;
        unsigned gpu = 0, mode = 0;
        if (argc == 3 && (ex = parse_gpu(argv[1], &gpu)) == EXIT_OK &&
            (parse_uint(argv[2], 3, &mode) < 0 || mode == 1)) {
                fprintf(stderr, "gpuslice-sim: '%s' is not a compute mode (0, 2 or 3)\n", argv[2]);
                ex = EXIT_USAGE;
        }
        if (ex == EXIT_OK)
                ex = lock_or_fail(s);
        if (ex != EXIT_OK) {
                sim_state_close(s);
                return ex;
        }
        if (argc == 3)
                s->gpu[gpu].compute_mode = mode;
        uint32_t modes[TOPO_MAX_GPUS];
        for (unsigned g = 0; g < node.n_gpus; g++)
                modes[g] = s->gpu[g].compute_mode;
        sim_state_unlock(s);
        sim_state_close(s);
        for (unsigned g = 0; g < node.n_gpus; g++)
                printf("%s%" PRIu32, g ? " " : "", modes[g]);
        printf("\n");
        for (unsigned g = 0; g < node.n_gpus; g++)
                printf("%s%s", g ? " " : "", node.gpu[g].uuid);
        printf("\n");
        return EXIT_OK;
}

static int cmd_show(int argc, char **argv) {
        (void)argv;
        if (argc != 1) {
                fprintf(stderr, "gpuslice-sim: usage: gpuslice-sim show\n");
                return EXIT_USAGE;
        }
        struct sim_state *s = NULL;
        int ex = open_state(&s);
        if (ex != EXIT_OK)
                return ex;
        static struct sim_state copy;
        if ((ex = lock_or_fail(s)) != EXIT_OK) {
                sim_state_close(s);
                return ex;
        }
        sim_state_prune_locked(s);
        memcpy(&copy, s, sizeof copy);
        unsigned util[TOPO_MAX_GPUS], temp[TOPO_MAX_GPUS], power[TOPO_MAX_GPUS];
        uint64_t used[TOPO_MAX_GPUS];
        for (unsigned g = 0; g < node.n_gpus; g++) {
                util[g] = sim_gpu_util_locked(s, g, NULL);
                temp[g] = sim_gpu_temperature_locked(s, g);
                power[g] = sim_gpu_power_mw_locked(s, g, sim_power_limit_mw(&node.gpu[g]));
                used[g] = sim_state_used_locked(s, g);
        }
        sim_state_unlock(s);
        sim_state_close(s);

        char state_path[PATH_MAX];
        if (sim_state_path(node_path, state_path, sizeof state_path) < 0)
                state_path[0] = '\0';
        printf("node    %s\nstate   %s (ABI %" PRIu32 ", %" PRIu64 " events, %" PRIu64 " lock recoveries)\n\n",
               node_path, state_path, copy.abi_version, copy.event_seq, copy.lock_recoveries);
        printf("GPU  %-28s %-7s %5s %5s %8s %21s  %s\n", "NAME", "HEALTH", "UTIL", "TEMP", "POWER", "MEMORY USED",
               "LAST XID");
        for (unsigned g = 0; g < node.n_gpus; g++) {
                const struct sim_gpu_state *gs = &copy.gpu[g];
                const char *health = gs->flags & SIM_GPU_LOST            ? "lost"
                                     : gs->flags & SIM_GPU_NO_PERMISSION ? "denied"
                                                                         : "ok";
                uint64_t total = node.gpu[g].memory_total, reserve = sim_reserve_bytes(total);
                char last[32] = "-";
                if (gs->xid_posted && gs->xid[(gs->xid_posted - 1) % SIM_XID_RING].seq)
                        snprintf(last, sizeof last, "%" PRIu64, gs->xid[(gs->xid_posted - 1) % SIM_XID_RING].xid);
                printf("%3u  %-28s %-7s %4u%% %4uC %7.1fW %8" PRIu64 " / %6" PRIu64 " MiB  %s\n", g, node.gpu[g].name,
                       health, util[g], temp[g], power[g] / 1000.0, (used[g] + reserve) >> 20, total >> 20, last);
        }
        print_mig(&copy);
        printf("\nGPU  %8s %8s %12s %5s %-7s  %s\n", "PID", "NS PID", "USED MiB", "SM", "MIG", "SOURCE");
        unsigned n = 0;
        for (unsigned i = 0; i < SIM_MAX_PROCS; i++) {
                const struct sim_proc *p = &copy.proc[i];
                if (!p->pid)
                        continue;
                n++;
                char nspid[16] = "-";
                if (p->ns_pid && p->ns_pid != p->pid)
                        snprintf(nspid, sizeof nspid, "%" PRIu32, p->ns_pid);
                char mig[24] = "-";
                if (p->gi != SIM_NO_INSTANCE)
                        snprintf(mig, sizeof mig, "%" PRIu32 ":%" PRIu32, p->gi, p->ci);
                printf("%3" PRIu32 "  %8" PRIu32 " %8s %12" PRIu64 " %4" PRIu32 "%% %-7s  %s\n", p->gpu, p->pid, nspid,
                       p->used_bytes >> 20, p->sm_util, mig,
                       p->flags & SIM_PROC_CUDA   ? "cuda"
                       : p->flags & SIM_PROC_KEEP ? "manual, kept"
                                                  : "manual");
        }
        if (!n)
                printf("(no processes)\n");
        return EXIT_OK;
}

static int cmd_gpu_reset(int argc, char **argv) {
        if (argc != 2) {
                fprintf(stderr, "gpuslice-sim: usage: gpuslice-sim gpu-reset GPU\n");
                return EXIT_USAGE;
        }
        struct sim_state *s = NULL;
        int ex = open_state(&s);
        unsigned gpu = 0;
        if (ex == EXIT_OK && (ex = parse_gpu(argv[1], &gpu)) == EXIT_OK)
                ex = lock_or_fail(s);
        if (ex != EXIT_OK) {
                sim_state_close(s);
                return ex;
        }
        sim_state_prune_locked(s);
        bool busy = false;
        for (unsigned i = 0; i < SIM_MAX_PROCS; i++)
                busy |= s->proc[i].pid && s->proc[i].gpu == gpu;
        if (!busy) {
                struct sim_mig_gpu *g = &s->mig[gpu];
                g->current = g->pending;
                memset(g->gi, 0, sizeof g->gi); /* MIG instances do not survive a reset */
        }
        sim_state_unlock(s);
        sim_state_close(s);
        if (busy) {
                fprintf(stderr, "gpuslice-sim: GPU %u has processes; a reset needs it idle\n", gpu);
                return EXIT_UNSAT;
        }
        return EXIT_OK;
}

static int cmd_mig_fault(int argc, char **argv) {
        unsigned n = 0;
        bool clear = argc == 2 && streq(argv[1], "clear");
        if (!clear && (argc != 3 || (!streq(argv[1], "kill") && !streq(argv[1], "fail")) ||
                       parse_uint(argv[2], 1000000, &n) < 0 || n == 0)) {
                fprintf(stderr, "gpuslice-sim: usage: gpuslice-sim mig-fault kill|fail N (N >= 1) | mig-fault clear\n");
                return EXIT_USAGE;
        }
        struct sim_state *s = NULL;
        int ex = open_state(&s);
        if (ex == EXIT_OK)
                ex = lock_or_fail(s);
        if (ex != EXIT_OK) {
                sim_state_close(s);
                return ex;
        }
        s->mig_fault = clear ? SIM_MIG_FAULT_NONE : streq(argv[1], "kill") ? SIM_MIG_FAULT_KILL : SIM_MIG_FAULT_FAIL;
        s->mig_fault_after = n;
        sim_state_unlock(s);
        sim_state_close(s);
        return EXIT_OK;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void)st;
        (void)ftw;
        return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT ? -1 : 0;
}

/* mkdir -p */
static int mkdirs(const char *path) {
        char buf[PATH_MAX];
        strscpy(buf, path, sizeof buf);
        for (char *p = buf + 1; *p; p++)
                if (*p == '/') {
                        *p = '\0';
                        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                                return -errno;
                        *p = '/';
                }
        return mkdir(buf, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

/* One capability: its proc file (as the driver shows it) and its /dev node (as nvidia-modprobe -f makes it). */
static int write_cap(const char *root, const char *name, unsigned minor, mode_t mode) {
        char path[PATH_MAX], text[128];
        snprintf(path, sizeof path, "%s/proc/driver/nvidia/capabilities/%s", root, name);
        char *slash = strrchr(path, '/');
        *slash = '\0';
        int r = mkdirs(path);
        *slash = '/';
        int n = snprintf(text, sizeof text, "DeviceFileMinor: %u\nDeviceFileMode: %u\nDeviceFileModify: 1\n", minor,
                         (unsigned)mode);
        if (r < 0 || (r = atomic_file_write(path, text, (size_t)n, 0444, ATOMIC_FILE_NO_SYNC)) < 0)
                return r;
        snprintf(path, sizeof path, "%s/dev/nvidia-caps/nvidia-cap%u", root, minor);
        if (mknod(path, S_IFCHR | mode, makedev(SIM_MIG_CAP_MAJOR, minor)) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

/* lint: long — the driver's and nvidia-modprobe's files in order: mig-minors, then config/monitor, then every
 * existing GPU and compute instance of every GPU. */
static int cmd_caps(int argc, char **argv) {
        if (argc != 2 || argv[1][0] != '/') {
                fprintf(stderr, "gpuslice-sim: usage: gpuslice-sim caps ROOT (an absolute directory)\n");
                return EXIT_USAGE;
        }
        const char *root = argv[1];
        struct sim_state *s = NULL;
        int ex = open_state(&s);
        if (ex == EXIT_OK)
                ex = lock_or_fail(s);
        if (ex != EXIT_OK) {
                sim_state_close(s);
                return ex;
        }
        static struct sim_mig_gpu mig[TOPO_MAX_GPUS];
        memcpy(mig, s->mig, sizeof mig);
        sim_state_unlock(s);
        sim_state_close(s);

        static char text[1 << 20];
        char path[PATH_MAX];
        int len = sim_mig_minors_text(text, sizeof text), r = len < 0 ? len : 0;
        snprintf(path, sizeof path, "%s/proc/driver/nvidia-caps", root);
        if (r == 0)
                r = mkdirs(path);
        if (r == 0) {
                snprintf(path, sizeof path, "%s/proc/driver/nvidia-caps/mig-minors", root);
                r = atomic_file_write(path, text, (size_t)len, 0444, ATOMIC_FILE_NO_SYNC);
        }
        /* what exists now replaces what existed before */
        snprintf(path, sizeof path, "%s/proc/driver/nvidia/capabilities", root);
        if (r == 0 && nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
                r = -errno;
        snprintf(path, sizeof path, "%s/dev/nvidia-caps", root);
        if (r == 0 && nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
                r = -errno;
        if (r == 0)
                r = mkdirs(path);
        if (r == 0)
                r = write_cap(root, "mig/config", 1, 0400);
        if (r == 0)
                r = write_cap(root, "mig/monitor", 2, 0444);
        for (unsigned g = 0; r == 0 && g < node.n_gpus; g++) {
                unsigned minor = node.gpu[g].minor >= 0 ? (unsigned)node.gpu[g].minor : g;
                if (mig[g].current != NVML_DEVICE_MIG_ENABLE || minor >= SIM_MIG_CAP_GPUS)
                        continue;
                for (unsigned i = 0; r == 0 && i < SIM_MIG_MAX_GI; i++) {
                        const struct sim_mig_gi *gi = &mig[g].gi[i];
                        if (!gi->used)
                                continue;
                        char name[96];
                        snprintf(name, sizeof name, "gpu%u/mig/gi%" PRIu32 "/access", minor, gi->id);
                        r = write_cap(root, name, sim_mig_cap_minor(minor, gi->id, SIM_NO_INSTANCE), 0444);
                        for (unsigned j = 0; r == 0 && j < SIM_MIG_MAX_CI; j++) {
                                if (!gi->ci[j].used)
                                        continue;
                                snprintf(name, sizeof name, "gpu%u/mig/gi%" PRIu32 "/ci%" PRIu32 "/access", minor,
                                         gi->id, gi->ci[j].id);
                                r = write_cap(root, name, sim_mig_cap_minor(minor, gi->id, gi->ci[j].id), 0444);
                        }
                }
        }
        if (r < 0) {
                fprintf(stderr, "gpuslice-sim: caps under %s: %s\n", root, strerror(-r));
                return EXIT_RUNTIME;
        }
        return EXIT_OK;
}

static int cmd_reset(int argc, char **argv) {
        (void)argv;
        if (argc != 1) {
                fprintf(stderr, "gpuslice-sim: usage: gpuslice-sim reset\n");
                return EXIT_USAGE;
        }
        int ex = load_node();
        if (ex != EXIT_OK)
                return ex;
        char path[PATH_MAX], err[512];
        if (sim_state_path(node_path, path, sizeof path) < 0) {
                fprintf(stderr, "gpuslice-sim: state path too long\n");
                return EXIT_RUNTIME;
        }
        struct sim_state *s = NULL;
        int r = sim_state_open_path(path, &node, node_path, &s, err, sizeof err);
        if (r == -EPROTO) {
                /* A file from another simulator version or another node: replace it. Processes that
                 * still map the old file keep it; restart them. */
                if (unlink(path) < 0) {
                        fprintf(stderr, "gpuslice-sim: cannot remove stale state %s: %m\n", path);
                        return EXIT_RUNTIME;
                }
                fprintf(stderr, "gpuslice-sim: replaced stale state file %s\n", path);
                r = sim_state_open_path(path, &node, node_path, &s, err, sizeof err);
        }
        if (r < 0) {
                fprintf(stderr, "gpuslice-sim: %s\n", err);
                return EXIT_RUNTIME;
        }
        if ((ex = lock_or_fail(s)) == EXIT_OK) {
                sim_state_reset_locked(s, &node);
                sim_state_unlock(s);
        }
        sim_state_close(s);
        return ex;
}

int main(int argc, char **argv) {
        if (argc < 2) {
                usage(stderr);
                return EXIT_USAGE;
        }
        const char *cmd = argv[1];
        if (streq(cmd, "--help") || streq(cmd, "-h") || streq(cmd, "help")) {
                usage(stdout);
                return EXIT_OK;
        }
        for (int i = 2; i < argc; i++)
                if (streq(argv[i], "--help") || streq(argv[i], "-h")) {
                        usage(stdout);
                        return EXIT_OK;
                }
        if (streq(cmd, "xid") || streq(cmd, "lose") || streq(cmd, "deny") || streq(cmd, "restore") ||
            streq(cmd, "util")) {
                return cmd_gpu(cmd, argc - 1, argv + 1);
        }
        if (streq(cmd, "proc"))
                return cmd_proc(argc - 1, argv + 1);
        if (streq(cmd, "show"))
                return cmd_show(argc - 1, argv + 1);
        if (streq(cmd, "compute-mode"))
                return cmd_compute_mode(argc - 1, argv + 1);
        if (streq(cmd, "reset"))
                return cmd_reset(argc - 1, argv + 1);
        if (streq(cmd, "gpu-reset"))
                return cmd_gpu_reset(argc - 1, argv + 1);
        if (streq(cmd, "mig-fault"))
                return cmd_mig_fault(argc - 1, argv + 1);
        if (streq(cmd, "caps"))
                return cmd_caps(argc - 1, argv + 1);
        fprintf(stderr, "gpuslice-sim: unknown command '%s'\n\n", cmd);
        usage(stderr);
        return EXIT_USAGE;
}
