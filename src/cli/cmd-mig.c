/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuslice mig — MIG layouts by hand: the node's MIG state (and any change left half done), what a
 * declared layout would change, applying it, completing or rolling back an interrupted change. A thin
 * client of src/migctl (layout files, the crash-safe applier) and src/nvml: it must never change a GPU
 * itself, only through migctl (which refuses busy GPUs and journals every change).
 */
#include <getopt.h>

#include "cli/commands.h"
#include "cli/output.h"
#include "migctl/migctl.h"
#include "nvml/nvml.h"
#include "util/util.h"

#define DEFAULT_STATE_DIR "/var/lib/gpuslice"

static void help(FILE *f) {
        fputs("Usage: gpuslice mig status [OPTIONS]\n"
              "       gpuslice mig plan --config FILE --layout NAME [OPTIONS]\n"
              "       gpuslice mig apply --config FILE --layout NAME [OPTIONS]\n"
              "       gpuslice mig recover [OPTIONS]\n\n"
              "MIG (Multi-Instance GPU) layouts declared in a file of NVIDIA mig-parted's format\n"
              "(version: v1, mig-configs: NAME: [{devices, device-filter, mig-enabled, mig-devices}]):\n"
              "  status   each GPU's MIG mode, GPU instances and MIG devices, and changes left half done\n"
              "  plan     what apply would change on each GPU, or why a GPU cannot hold the layout\n"
              "  apply    make each GPU the layout selects hold it: refused on a GPU with processes, or one\n"
              "           that cannot hold it, before anything changes; a change that fails is rolled back;\n"
              "           one that was interrupted (a journal under --state-dir) is completed first\n"
              "  recover  complete, or roll back, every change a killed gpuslice left half done\n\n"
              "Options:\n"
              "  -c, --config FILE       the layout file (YAML or JSON)\n"
              "  -l, --layout NAME       the layout (a mig-configs key)\n"
              "  -g, --gpu N             only GPU N (NVML index)\n"
              "      --state-dir DIR     where the journals of changes in progress live (default /var/lib/gpuslice)\n"
              "      --json              machine-readable output (status)\n"
              "      --nvml-library PATH load NVML from PATH instead of libnvidia-ml.so.1\n"
              "  -h, --help              this help\n\n"
              "Exit codes: 0 done (or nothing to do), 1 NVML or a file failed, 2 usage, 3 malformed layout file,\n"
              "4 a GPU is busy, cannot hold the layout, waits for a reset, or a change was rolled back.\n",
              f);
}

struct mig_args {
        const char *config, *layout, *state_dir, *nvml_library;
        int gpu; /* -1 all */
        bool json;
};

static int parse_args(int argc, char **argv, struct mig_args *a) {
        enum {
                OPT_STATE = 0x100,
                OPT_JSON,
                OPT_NVML,
        };
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "layout", required_argument, NULL, 'l' },
                { "gpu", required_argument, NULL, 'g' },    { "state-dir", required_argument, NULL, OPT_STATE },
                { "json", no_argument, NULL, OPT_JSON },    { "nvml-library", required_argument, NULL, OPT_NVML },
                { "help", no_argument, NULL, 'h' },         {},
        };
        *a = (struct mig_args){ .state_dir = DEFAULT_STATE_DIR, .gpu = -1 };
        int c;
        optind = 0;
        while ((c = getopt_long(argc, argv, "c:l:g:h", opts, NULL)) >= 0) {
                unsigned g;
                switch (c) {
                        case 'c': a->config = optarg; break;
                        case 'l': a->layout = optarg; break;
                        case 'g':
                                if (parse_uint(optarg, TOPO_MAX_GPUS - 1, &g) < 0) {
                                        fprintf(stderr, "gpuslice mig: --gpu: '%s' is not a GPU index\n", optarg);
                                        return EXIT_USAGE;
                                }
                                a->gpu = (int)g;
                                break;
                        case OPT_STATE: a->state_dir = optarg; break;
                        case OPT_JSON: a->json = true; break;
                        case OPT_NVML: a->nvml_library = optarg; break;
                        case 'h': help(stdout); return -1;
                        default: help(stderr); return EXIT_USAGE;
                }
        }
        return cli_no_more_args("mig", argc, argv);
}

static void print_steps(const struct migctl_result *res) {
        for (unsigned i = 0; i < res->plan.n; i++) {
                char what[160];
                mig_step_describe(&res->plan.step[i], res->have_caps ? &res->caps : NULL, what, sizeof what);
                printf("  %s\n", what);
        }
}

static int mig_status(const struct mig_args *a, struct nvml *n) {
        _cleanup_(freep) struct topo *t = malloc(sizeof *t);
        _cleanup_(freep) struct mig_node *m = malloc(sizeof *m);
        struct nvml_error e = { 0 };
        if (!t || !m)
                return EXIT_RUNTIME;
        if (nvml_inventory(n, t, &e) < 0 || nvml_mig_inventory(n, t, m, &e) < 0) {
                fprintf(stderr, "gpuslice mig status: %s: %s\n", e.func, e.text);
                return EXIT_RUNTIME;
        }
        if (a->json)
                return json_print(stdout, json_mig(m)) < 0 ? EXIT_RUNTIME : EXIT_OK;
        print_mig(stdout, m);
        bool any = false;
        for (unsigned i = 0; i < t->n_gpus; i++) {
                char layout[MIGCTL_NAME_MAX];
                bool pending = false;
                struct gs_error err = { 0 };
                int r = migctl_journal_peek(a->state_dir, t->gpu[i].uuid, layout, sizeof layout, &pending, &err);
                if (r == -ENOENT)
                        continue;
                if (!any)
                        printf("\nChanges in progress (%s/mig):\n", a->state_dir);
                any = true;
                if (r < 0)
                        printf("  GPU %u: %s\n", i, err.message);
                else
                        printf("  GPU %u: layout %s%s\n", i, layout,
                               pending ? ", waiting for a GPU reset"
                                       : ", interrupted: `gpuslice mig recover` completes it");
        }
        return EXIT_OK;
}

static int exit_of(int r) {
        return r == -EBUSY || r == -ENOSPC || r == -EINVAL || r == -EIO ? EXIT_UNSAT : EXIT_RUNTIME;
}

/* plan or apply one GPU with its layout entry; prints what happened. */
static int one_gpu(const struct mig_args *a, struct nvml *n, unsigned i, const struct migctl_entry *e, bool apply) {
        struct migctl_result *res = calloc(1, sizeof *res);
        if (!res)
                return EXIT_RUNTIME;
        struct gs_error err = { 0 };
        int r = apply ? migctl_apply_gpu(n, i, a->layout, &e->want, a->state_dir, res, &err)
                      : migctl_plan_gpu(n, i, a->layout, &e->want, res, &err);
        int ex = EXIT_OK;
        if (r < 0) {
                fprintf(stderr, "gpuslice mig %s: %s\n", apply ? "apply" : "plan", err.message);
                ex = exit_of(r);
        } else if (!apply) {
                printf("GPU %u: %s\n", i, res->plan.n ? "would change:" : "holds the layout already");
                print_steps(res);
        } else {
                printf("GPU %u: %s (%u change%s)\n", i, migctl_outcome_name(res->outcome), res->steps,
                       res->steps == 1 ? "" : "s");
                print_steps(res);
                if (res->outcome == MIGCTL_PENDING_RESET) {
                        fprintf(stderr,
                                "gpuslice mig apply: GPU %u waits for a reset (or a reboot) to change its MIG "
                                "mode; run apply again after it\n",
                                i);
                        ex = EXIT_UNSAT;
                }
        }
        free(res);
        return ex;
}

static int mig_plan_apply(const struct mig_args *a, struct nvml *n, bool apply) {
        if (!a->config || !a->layout) {
                fprintf(stderr, "gpuslice mig: --config FILE and --layout NAME are required\n");
                return EXIT_USAGE;
        }
        struct migctl_config cfg;
        struct gs_error err = { 0 };
        int r = migctl_config_load(a->config, &cfg, &err);
        if (r < 0) {
                fprintf(stderr, "gpuslice mig: %s\n", err.message);
                return r == -EINVAL || r == -EFBIG ? EXIT_DATA : EXIT_RUNTIME;
        }
        const struct migctl_layout *l = migctl_config_find(&cfg, a->layout);
        _cleanup_(freep) struct topo *t = malloc(sizeof *t);
        struct nvml_error e = { 0 };
        int ex = EXIT_OK;
        if (!l) {
                fprintf(stderr, "gpuslice mig: %s has no layout '%s'\n", a->config, a->layout);
                ex = EXIT_DATA;
        } else if (!t || nvml_inventory(n, t, &e) < 0) {
                fprintf(stderr, "gpuslice mig: NVML inventory failed: %s: %s\n", e.func, e.text);
                ex = EXIT_RUNTIME;
        }
        for (unsigned i = 0; ex != EXIT_DATA && t && i < t->n_gpus; i++) {
                const struct migctl_entry *entry = NULL;
                if (a->gpu >= 0 && (unsigned)a->gpu != i)
                        continue;
                if (migctl_layout_select(l, i, t->gpu[i].pci_device_id, &entry, &err) < 0) {
                        fprintf(stderr, "gpuslice mig: %s\n", err.message);
                        ex = EXIT_DATA;
                        break;
                }
                if (!entry) {
                        printf("GPU %u: not in layout %s, left as it is\n", i, l->name);
                        continue;
                }
                int x = one_gpu(a, n, i, entry, apply);
                if (x != EXIT_OK && (ex == EXIT_OK || x == EXIT_RUNTIME))
                        ex = x;
        }
        migctl_config_done(&cfg);
        return ex;
}

static int mig_recover(const struct mig_args *a, struct nvml *n) {
        unsigned count = 0;
        struct nvml_error e = { 0 };
        if (nvml_device_count(n, &count, &e) < 0) {
                fprintf(stderr, "gpuslice mig recover: %s: %s\n", e.func, e.text);
                return EXIT_RUNTIME;
        }
        int ex = EXIT_OK;
        for (unsigned i = 0; i < count && i < TOPO_MAX_GPUS; i++) {
                if (a->gpu >= 0 && (unsigned)a->gpu != i)
                        continue;
                struct migctl_result res;
                struct gs_error err = { 0 };
                int r = migctl_recover_gpu(n, i, a->state_dir, &res, &err);
                if (r < 0) {
                        fprintf(stderr, "gpuslice mig recover: %s\n", err.message);
                        ex = ex == EXIT_RUNTIME ? ex : exit_of(r);
                } else if (res.outcome != MIGCTL_UNCHANGED)
                        printf("GPU %u: %s (%u change%s)\n", i, migctl_outcome_name(res.outcome), res.steps,
                               res.steps == 1 ? "" : "s");
        }
        return ex;
}

int cmd_mig(int argc, char **argv) {
        if (argc < 2 || streq(argv[1], "--help") || streq(argv[1], "-h")) {
                help(argc < 2 ? stderr : stdout);
                return argc < 2 ? EXIT_USAGE : EXIT_OK;
        }
        const char *sub = argv[1];
        if (!streq(sub, "status") && !streq(sub, "plan") && !streq(sub, "apply") && !streq(sub, "recover")) {
                fprintf(stderr, "gpuslice mig: unknown subcommand '%s' (status, plan, apply, recover)\n", sub);
                return EXIT_USAGE;
        }
        struct mig_args a;
        int r = parse_args(argc - 1, argv + 1, &a);
        if (r != EXIT_OK)
                return r < 0 ? EXIT_OK : r;
        struct nvml *n = NULL;
        r = cli_nvml_open("gpuslice mig", a.nvml_library, &n);
        if (r != EXIT_OK)
                return r;
        if (streq(sub, "status"))
                r = mig_status(&a, n);
        else if (streq(sub, "recover"))
                r = mig_recover(&a, n);
        else
                r = mig_plan_apply(&a, n, streq(sub, "apply"));
        nvml_close(n);
        return r;
}
