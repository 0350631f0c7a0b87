/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuslice monitor — the monitor service on its own, in the foreground: samples GPU usage and
 * serves /metrics and /healthz until SIGTERM/SIGINT (exit 0). The node agent runs the same
 * service (monitor_service_start) inside `gpuslice node`.
 */
#include <getopt.h>
#include <signal.h>

#include "cli/commands.h"
#include "cli/output.h"
#include "rpc/rpc.h"
#include "config/config.h"
#include "http/http.h"
#include "monitor/monitor.h"
#include "util/log.h"
#include "util/util.h"

static void help(FILE *f) {
        fputs("Usage: gpuslice monitor [OPTIONS]\n\n"
              "Sample who uses which GPU (NVML processes → cgroup → container → pod) and serve\n"
              "Prometheus metrics on /metrics and a health check on /healthz, in the foreground.\n"
              "SIGTERM or SIGINT stops it (exit 0). Metric names: docs/metrics.md.\n\n"
              "Options:\n"
              "      --metrics-address HOST:PORT  listen address (default 127.0.0.1:9400)\n"
              "      --proc-root DIR              where /proc is (default /proc)\n"
              "      --engine URL                 Docker/Podman Engine API for names and allocation,\n"
              "                                   e.g. unix:///run/podman/podman.sock\n"
              "      --cri-socket PATH            CRI runtime socket (containerd, CRI-O) for pod and\n"
              "                                   container names\n"
              "      --sample-interval DURATION   sampling period (default 5s)\n"
              "      --metrics-compat LIST        also pod-used-gpu-mem, gpu-manager families\n"
              "      --node-name NAME             `node` label of compat families (default hostname)\n"
              "      --nfd-features-file FILE     keep the node's GPU labels in FILE (Node Feature\n"
              "                                   Discovery features file; see gpuslice labels)\n"
              "      --nvml-library PATH          load NVML from PATH instead of libnvidia-ml.so.1\n"
              "  -h, --help                       this help\n",
              f);
}

/* lint: long — a command's main: the getopt switch (one case per flag, each checking its value and naming the flag
 * in its message), then the command's steps in order; its size is its flags'. */
int cmd_monitor(int argc, char **argv) {
        enum {
                OPT_ADDR = 0x100,
                OPT_PROC,
                OPT_ENGINE,
                OPT_CRI,
                OPT_INTERVAL,
                OPT_COMPAT,
                OPT_NODE,
                OPT_NFD,
                OPT_NVML
        };
        static const struct option opts[] = {
                { "metrics-address", required_argument, NULL, OPT_ADDR },
                { "proc-root", required_argument, NULL, OPT_PROC },
                { "engine", required_argument, NULL, OPT_ENGINE },
                { "cri-socket", required_argument, NULL, OPT_CRI },
                { "sample-interval", required_argument, NULL, OPT_INTERVAL },
                { "metrics-compat", required_argument, NULL, OPT_COMPAT },
                { "node-name", required_argument, NULL, OPT_NODE },
                { "nfd-features-file", required_argument, NULL, OPT_NFD },
                { "nvml-library", required_argument, NULL, OPT_NVML },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        /* indexed from OPT_ADDR; the first index reads OPT_ADDR - OPT_ADDR on purpose */
        static const char *const keys[] = {
                // NOLINTNEXTLINE(misc-redundant-expression)
                [OPT_ADDR - OPT_ADDR] = "metrics.address",
                [OPT_PROC - OPT_ADDR] = "monitor.proc-root",
                [OPT_ENGINE - OPT_ADDR] = "monitor.engine",
                [OPT_CRI - OPT_ADDR] = "monitor.cri-socket",
                [OPT_INTERVAL - OPT_ADDR] = "monitor.sample-interval",
                [OPT_COMPAT - OPT_ADDR] = "metrics.compat",
                [OPT_NODE - OPT_ADDR] = NULL,
                [OPT_NFD - OPT_ADDR] = "monitor.nfd-features-file",
                [OPT_NVML - OPT_ADDR] = "nvml.library",
        };
        struct gpuslice_config cfg;
        config_init_defaults(&cfg);
        cfg.cri_socket[0] = '\0'; /* the standalone monitor asks no CRI unless told to */
        const char *node_name = NULL;
        bool nvml_given = false;
        int c;
        optind = 0;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
                if (c == 'h') {
                        help(stdout);
                        return EXIT_OK;
                }
                if (c == OPT_NODE) {
                        node_name = optarg;
                        continue;
                }
                if (c == OPT_ADDR) {
                        /* port 0 (any free port, logged) is fine here, unlike in the agent's config */
                        struct sockaddr_storage ss;
                        socklen_t sl;
                        if (http_parse_address(optarg, &ss, &sl) < 0 || strlen(optarg) >= sizeof cfg.metrics_address) {
                                fprintf(stderr, "gpuslice monitor: --metrics-address: expected HOST:PORT, got '%s'\n",
                                        optarg);
                                return EXIT_USAGE;
                        }
                        strscpy(cfg.metrics_address, optarg, sizeof cfg.metrics_address);
                        continue;
                }
                if (c < OPT_ADDR || c > OPT_NVML) {
                        help(stderr);
                        return EXIT_USAGE;
                }
                struct gs_error err;
                if (config_set(&cfg, keys[c - OPT_ADDR], optarg, &err) < 0) {
                        fprintf(stderr, "gpuslice monitor: %s\n", err.message);
                        return EXIT_USAGE;
                }
                nvml_given |= c == OPT_NVML;
        }
        if (cli_no_more_args("monitor", argc, argv) != EXIT_OK)
                return EXIT_USAGE;
        if (!cfg.metrics_address[0]) {
                fputs("gpuslice monitor: --metrics-address must not be empty\n", stderr);
                return EXIT_USAGE;
        }

        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        pthread_sigmask(SIG_BLOCK, &mask, NULL); /* before any thread: only sigwait sees them */
        signal(SIGPIPE, SIG_IGN);

        struct monitor_options o;
        monitor_options_init(&o);
        o.proc_root = cfg.proc_root;
        o.engine_url = cfg.engine_url;
        o.cri_socket = cfg.cri_socket;
        o.nvml_library = nvml_given ? cfg.nvml_library : NULL;
        o.node_name = node_name;
        o.compat = cfg.metrics_compat;
        o.nfd_features_file = cfg.nfd_features_file;
        o.interval_ms = (unsigned)MIN(cfg.sample_interval_sec * 1000u, 3600u * 1000u);
        struct nvml *nvml = NULL;
        int r = cli_nvml_open("gpuslice monitor", o.nvml_library, &nvml);
        if (r != EXIT_OK)
                return r;
        struct monitor_service *svc;
        r = monitor_service_start(&o, nvml, cfg.metrics_address, &svc);
        if (r < 0) {
                log_error_errno(r, "cannot start the monitor", "address=%s", cfg.metrics_address);
                nvml_close(nvml);
                return EXIT_RUNTIME;
        }
        log_info("monitor serving", "address=%s port=%u interval_ms=%u", cfg.metrics_address, monitor_service_port(svc),
                 o.interval_ms);
        int sig = 0;
        sigwait(&mask, &sig);
        log_info("monitor stopping", "signal=%d", sig);
        monitor_service_stop(svc);
        nvml_close(nvml);
        rpc_shutdown(); /* the CRI client's gRPC threads end before exit */
        return EXIT_OK;
}
