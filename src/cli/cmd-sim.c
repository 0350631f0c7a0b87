/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuslice sim record — the node this runs on, written as a simulator node description
 * (docs/node-description.md): the link matrix and what NVML says of each GPU (model, memory, UUID, bus id,
 * minor number, NUMA node, compute capability, power limit, MIG mode — read only, never changed — brand), the
 * driver and CUDA versions, whether NVML answers per-process utilization, and from the CUDA driver each
 * GPU's SM count and what one context takes on the first GPU (measured: NVML's per-process memory of this
 * process after retaining the primary context). The simulator loaded with the file answers the same NVML
 * queries the same way (the hardware kit diffs `gpuslice topo --json` of both: docs/hardware.md), so its
 * defaults can come from real machines (tests/data/nodes/).
 *
 * Must never change the GPU's settings; touches the GPU only to create (and release) one context.
 */
#include "interposer/cuda-abi.h" /* the CUDA driver API as gpuslice declares it: no toolkit needed */

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/output.h"
#include "nvml/nvml.h"
#include "topo/topo.h"
#include "util/atomic-file.h"
#include "util/util.h"

static void help(FILE *f) {
        fputs("Usage: gpuslice sim record [OPTIONS]\n\n"
              "Write this node (read through NVML and the CUDA driver) as a simulator node description:\n"
              "the link matrix, each GPU's attributes, the driver and CUDA versions, each GPU's SM count,\n"
              "what one CUDA context takes, and the NVML queries the driver does not support\n"
              "(docs/node-description.md). GPUSLICE_SIM_NODE=FILE then simulates it (docs/simulator.md).\n"
              "Nothing on the GPU is changed; one context is made and released on the first GPU.\n\n"
              "Options:\n"
              "  -o, --output FILE       write FILE (atomically) instead of standard output\n"
              "      --nvml-library PATH libnvidia-ml.so.1 to load\n"
              "      --cuda-library PATH libcuda.so.1 to load\n"
              "      --no-cuda           NVML only: no SM counts, no context cost\n"
              "  -h, --help              this help\n",
              f);
}

/* What the CUDA driver adds: SM counts (per NVML index) and a context's cost on GPU 0. */
struct cuda_facts {
        int sms[TOPO_MAX_GPUS];
        uint64_t context_bytes;
};

/* The process NVML lists on GPU `index` that was not in before[0..n) (this one, whatever PID namespace). */
static bool new_process_memory(struct nvml *n, unsigned index, const struct nvml_process *before, size_t n_before,
                               uint64_t *ret) {
        struct nvml_error e;
        _cleanup_(freep) struct nvml_process *now = NULL;
        size_t n_now = 0;
        if (nvml_device_processes(n, index, &now, &n_now, &e) < 0)
                return false;
        for (size_t i = 0; i < n_now; i++) {
                bool old = false;
                for (size_t k = 0; k < n_before && !old; k++)
                        old = before[k].pid == now[i].pid;
                if (!old && now[i].used_memory != UINT64_MAX) {
                        *ret = now[i].used_memory;
                        return true;
                }
        }
        return false;
}

/* lint: long — one pass over the CUDA driver's answers, each call checked in turn (load, init, per-device
 * attributes by UUID, the measured context), so that a missing piece leaves the rest recorded. */
static void cuda_facts(struct nvml *n, const struct topo *t, const char *library, struct cuda_facts *ret) {
        memset(ret, 0, sizeof *ret);
        void *dl = dlopen(library ? library : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!dl) {
                fprintf(stderr, "gpuslice sim record: no CUDA driver (%s): SM counts and context cost not recorded\n",
                        dlerror());
                return;
        }
        __typeof__(&cuInit) init = (__typeof__(init))dlsym(dl, "cuInit");
        __typeof__(&cuDeviceGetCount) count = (__typeof__(count))dlsym(dl, "cuDeviceGetCount");
        __typeof__(&cuDeviceGetUuid_v2) uuid = (__typeof__(uuid))dlsym(dl, "cuDeviceGetUuid_v2");
        __typeof__(&cuDeviceGetAttribute) attr = (__typeof__(attr))dlsym(dl, "cuDeviceGetAttribute");
        __typeof__(&cuDevicePrimaryCtxRetain) retain = (__typeof__(retain))dlsym(dl, "cuDevicePrimaryCtxRetain");
        __typeof__(&cuDevicePrimaryCtxRelease_v2) release =
                (__typeof__(release))dlsym(dl, "cuDevicePrimaryCtxRelease_v2");
        int devices = 0;
        if (!init || !count || !uuid || !attr || init(0) != CUDA_SUCCESS || count(&devices) != CUDA_SUCCESS) {
                fputs("gpuslice sim record: the CUDA driver did not initialise: SM counts and context cost not "
                      "recorded\n",
                      stderr);
                dlclose(dl);
                return;
        }
        int ord0 = -1; /* the CUDA ordinal of NVML's GPU 0 */
        for (int d = 0; d < devices; d++) {
                CUuuid u;
                char s[96];
                if (uuid(&u, d) != CUDA_SUCCESS)
                        continue;
                const unsigned char *b = (const unsigned char *)u.bytes;
                snprintf(s, sizeof s, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                         b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                         b[15]);
                for (unsigned i = 0; i < t->n_gpus; i++)
                        if (strcasecmp(t->gpu[i].uuid, s) == 0) {
                                (void)attr(&ret->sms[i], CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d);
                                if (i == 0)
                                        ord0 = d;
                        }
        }
        struct nvml_error e;
        _cleanup_(freep) struct nvml_process *before = NULL;
        size_t n_before = 0;
        CUcontext ctx;
        if (ord0 >= 0 && retain && release && nvml_device_processes(n, 0, &before, &n_before, &e) == 0 &&
            retain(&ctx, ord0) == CUDA_SUCCESS) {
                if (!new_process_memory(n, 0, before, n_before, &ret->context_bytes))
                        fputs("gpuslice sim record: NVML does not list this process: context cost not recorded\n",
                              stderr);
                (void)release(ord0);
        }
        dlclose(dl);
}

static void put_size(FILE *f, const char *key, uint64_t bytes) {
        if (bytes % (1ULL << 20) == 0)
                fprintf(f, " %s=%lluMiB", key, (unsigned long long)(bytes >> 20));
        else
                fprintf(f, " %s=%llu", key, (unsigned long long)bytes);
}

/* The directives that say what the matrix does not, in the parser's grammar (docs/node-description.md). */
static void print_directives(FILE *f, const struct topo *t) {
        if (t->driver_version[0] || t->cuda_version) {
                fputs("node", f);
                if (t->driver_version[0])
                        fprintf(f, " driver=%s", t->driver_version);
                if (t->cuda_version)
                        fprintf(f, " cuda=%d.%d", t->cuda_version / 1000, (t->cuda_version % 1000) / 10);
                fputc('\n', f);
        }
        if (t->nvswitch)
                fputs("nvswitch\n", f);
        if (t->cuda_context_bytes) {
                fputs("cuda", f);
                put_size(f, "context", t->cuda_context_bytes);
                fputc('\n', f);
        }
        if (t->unsupported & TOPO_UNSUPPORTED_PROCESS_UTIL)
                fputs("unsupported process-utilization\n", f);
        for (unsigned i = 0; i < t->n_gpus; i++) {
                const struct topo_gpu *g = &t->gpu[i];
                fprintf(f, "gpu %u", i);
                if (g->name[0] && !strchr(g->name, '"'))
                        fprintf(f, " name=\"%s\"", g->name);
                if (g->memory_total)
                        put_size(f, "memory", g->memory_total);
                if (g->uuid[0])
                        fprintf(f, " uuid=%s", g->uuid);
                if (g->bus_id[0])
                        fprintf(f, " bus=%s", g->bus_id);
                if (g->minor >= 0)
                        fprintf(f, " minor=%d", g->minor);
                if (g->numa_node >= 0)
                        fprintf(f, " numa=%d", g->numa_node);
                else
                        fputs(" numa=none", f); /* NVML knows none (a VM): the simulator must not make one up */
                if (g->sm_count > 0)
                        fprintf(f, " sms=%d", g->sm_count);
                if (g->cc_major > 0)
                        fprintf(f, " cc=%d.%d", g->cc_major, g->cc_minor);
                if (g->power_limit_mw >= 1000)
                        fprintf(f, " power=%uW", g->power_limit_mw / 1000);
                if (g->mig_mode >= 0)
                        fprintf(f, " mig=%s", g->mig_mode ? "on" : "off");
                if (g->brand[0])
                        fprintf(f, " brand=%s", g->brand);
                fputc('\n', f);
        }
}

static int record(const char *output, const char *nvml_library, const char *cuda_library, bool cuda) {
        struct nvml *n = NULL;
        int r = cli_nvml_open("gpuslice sim record", nvml_library, &n);
        if (r != EXIT_OK)
                return r;
        _cleanup_(freep) struct topo *t = malloc(sizeof *t);
        struct nvml_error e = { 0 };
        if (!t || nvml_inventory(n, t, &e) < 0) {
                fprintf(stderr, "gpuslice sim record: NVML inventory failed: %s: %s\n", e.func, e.text);
                nvml_close(n);
                return EXIT_RUNTIME;
        }
        _cleanup_(freep) struct nvml_process_sample *s = NULL;
        size_t n_s = 0;
        if (t->n_gpus && nvml_device_process_utilization(n, 0, 0, &s, &n_s, &e) < 0 &&
            e.nvml_code == NVML_ERROR_NOT_SUPPORTED)
                t->unsupported |= TOPO_UNSUPPORTED_PROCESS_UTIL;
        if (cuda) {
                struct cuda_facts c;
                cuda_facts(n, t, cuda_library, &c);
                for (unsigned i = 0; i < t->n_gpus; i++)
                        if (c.sms[i] > 0)
                                t->gpu[i].sm_count = c.sms[i];
                t->cuda_context_bytes = c.context_bytes;
        }
        nvml_close(n);

        _cleanup_(freep) char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return EXIT_RUNTIME;
        char host[256] = "", date[32] = "";
        time_t now = time(NULL);
        struct tm tm;
        (void)gethostname(host, sizeof host - 1);
        if (gmtime_r(&now, &tm))
                strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", &tm);
        fprintf(f, "# recorded by gpuslice sim record (%s) on %s, %s\n", GPUSLICE_VERSION, host, date);
        print_matrix(f, t);
        fputc('\n', f);
        print_directives(f, t);
        if (fclose(f) != 0)
                return EXIT_RUNTIME;
        if (!output || streq(output, "-"))
                return fwrite(text, 1, len, stdout) == len ? EXIT_OK : EXIT_RUNTIME;
        r = atomic_file_write(output, text, len, 0644, 0);
        if (r < 0) {
                fprintf(stderr, "gpuslice sim record: cannot write %s: %s\n", output, strerror(-r));
                return EXIT_RUNTIME;
        }
        return EXIT_OK;
}

int cmd_sim(int argc, char **argv) {
        enum {
                OPT_NVML = 0x100,
                OPT_CUDA,
                OPT_NO_CUDA
        };
        static const struct option opts[] = {
                { "output", required_argument, NULL, 'o' },
                { "nvml-library", required_argument, NULL, OPT_NVML },
                { "cuda-library", required_argument, NULL, OPT_CUDA },
                { "no-cuda", no_argument, NULL, OPT_NO_CUDA },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        if (argc >= 2 && (streq(argv[1], "-h") || streq(argv[1], "--help"))) {
                help(stdout);
                return EXIT_OK;
        }
        if (argc < 2 || !streq(argv[1], "record")) {
                help(stderr);
                return EXIT_USAGE;
        }
        const char *output = NULL, *nvml_library = NULL, *cuda_library = NULL;
        bool cuda = true;
        int c;
        optind = 0;
        argc--, argv++; /* getopt from "record" on */
        while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) >= 0) {
                switch (c) {
                        case 'o': output = optarg; break;
                        case OPT_NVML: nvml_library = optarg; break;
                        case OPT_CUDA: cuda_library = optarg; break;
                        case OPT_NO_CUDA: cuda = false; break;
                        case 'h': help(stdout); return EXIT_OK;
                        default: help(stderr); return EXIT_USAGE;
                }
        }
        if (cli_no_more_args("sim record", argc, argv) != EXIT_OK)
                return EXIT_USAGE;
        return record(output, nvml_library, cuda_library, cuda);
}
