/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuslice scheduler — the kube-scheduler extender in the foreground: serves filter, prioritize
 * and bind (src/sched/server.c) over a cluster model fed by the API server's node and pod watches
 * (src/sched/feed.c), or from a snapshot file (--snapshot), until SIGTERM/SIGINT (exit 0).
 * docs/scheduler.md explains the decisions and the configuration.
 */
#include <getopt.h>
#include <signal.h>

#include "cli/commands.h"
#include "http/http.h"
#include "sched/feed.h"
#include "sched/server.h"
#include "util/log.h"
#include "util/util.h"

static void help(FILE *f) {
        fputs("Usage: gpuslice scheduler [OPTIONS]\n\n"
              "Serve the kube-scheduler extender verbs (POST /filter, /prioritize, /bind, /preempt) that place\n"
              "GPU pods on nodes and GPUs where they really fit, plus /healthz, /metrics and the read-only operator\n"
              "page GET /ui with its JSON API (/api/v1/cluster, /api/v1/topology), in the foreground.\n"
              "SIGTERM or SIGINT stops it (exit 0). docs/scheduler.md and docs/ui.md have the details.\n\n"
              "Options:\n"
              "      --address HOST:PORT        listen address (default 127.0.0.1:9445)\n"
              "      --policy NAME              default placement policy (default frag): binpack, spread, or\n"
              "                                 a packing policy (frag, fgd, bestfit, gpupacking, gpuclustering,\n"
              "                                 dotprod, random: docs/scheduler.md); a pod may override it with\n"
              "                                 the gpuslice.io/scheduling-policy annotation\n"
              "      --kubeconfig FILE          the API server to watch and bind through (default:\n"
              "                                 $KUBECONFIG, in-cluster, ~/.kube/config)\n"
              "      --context NAME             kubeconfig context (default: the current one)\n"
              "      --snapshot FILE            instead of the API: load the cluster from FILE\n"
              "                                 ({\"nodes\": [Node...], \"pods\": [Pod...]})\n"
              "      --memory-unit NAME=MIB     MiB per unit of a memory resource, as configured on the\n"
              "                                 nodes (defaults: gpuslice.io/gpu-memory=256,\n"
              "                                 tencent.com/vcuda-memory=256, aliyun.com/gpu-mem=1024)\n"
              "      --filter-answer FORM       best (default): filter answers only the node the policy picks\n"
              "                                 when one fits and the pod has no soft preference, so\n"
              "                                 kube-scheduler skips its scoring and prioritize; all: every\n"
              "                                 node that fits (docs/scheduler.md)\n"
              "      --tls-cert FILE            serve HTTPS with this PEM certificate chain\n"
              "      --tls-key FILE             and this PEM key\n"
              "      --tls-client-ca FILE       require client certificates signed by this CA\n"
              "      --log-level LEVEL          error, warn, info (default), debug\n"
              "  -h, --help                     this help\n",
              f);
}

static int load_snapshot(struct sched_server *s, const char *path, const struct cluster_units *u, size_t *nn,
                         size_t *np) {
        char *text = NULL;
        size_t len = 0;
        int r = read_file(path, SCHED_CODEC_MAX_SNAPSHOT, &text, &len);
        if (r < 0) {
                log_error_errno(r, "cannot read the snapshot", "file=%s", path);
                return EXIT_RUNTIME;
        }
        struct gs_error err = { 0 };
        struct sched_model *m = sched_server_lock(s);
        r = sched_snapshot_load(m, text, len, u, nn, np, &err);
        sched_server_unlock(s);
        free(text);
        if (r < 0) {
                log_error("bad snapshot", "file=%s err=\"%s\"", path, err.message);
                return EXIT_DATA;
        }
        sched_server_set_ready(s, true);
        return EXIT_OK;
}

/* lint: long — a command's main: the getopt switch (one case per flag, each checking its value and naming the flag
 * in its message), then the command's steps in order; its size is its flags'. */
int cmd_scheduler(int argc, char **argv) {
        enum {
                OPT_ADDR = 0x100,
                OPT_POLICY,
                OPT_SNAPSHOT,
                OPT_UNIT,
                OPT_CERT,
                OPT_KEY,
                OPT_CA,
                OPT_LOG,
                OPT_KUBECONFIG,
                OPT_CONTEXT,
                OPT_FILTER
        };
        static const struct option opts[] = {
                { "address", required_argument, NULL, OPT_ADDR },
                { "policy", required_argument, NULL, OPT_POLICY },
                { "snapshot", required_argument, NULL, OPT_SNAPSHOT },
                { "memory-unit", required_argument, NULL, OPT_UNIT },
                { "tls-cert", required_argument, NULL, OPT_CERT },
                { "tls-key", required_argument, NULL, OPT_KEY },
                { "tls-client-ca", required_argument, NULL, OPT_CA },
                { "log-level", required_argument, NULL, OPT_LOG },
                { "kubeconfig", required_argument, NULL, OPT_KUBECONFIG },
                { "context", required_argument, NULL, OPT_CONTEXT },
                { "filter-answer", required_argument, NULL, OPT_FILTER },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        struct sched_server_options o = { .address = "127.0.0.1:9445", .policy = CLUSTER_POLICY_FRAG };
        cluster_units_default(&o.units);
        const char *snapshot = NULL, *kubeconfig = NULL, *context = NULL;
        int c;
        optind = 0;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
                switch (c) {
                        case 'h': help(stdout); return EXIT_OK;
                        case OPT_ADDR: {
                                struct sockaddr_storage ss;
                                socklen_t sl;
                                if (http_parse_address(optarg, &ss, &sl) < 0) {
                                        fprintf(stderr, "gpuslice scheduler: --address: expected HOST:PORT, got '%s'\n",
                                                optarg);
                                        return EXIT_USAGE;
                                }
                                o.address = optarg;
                                break;
                        }
                        case OPT_POLICY:
                                if (cluster_policy_from_name(optarg, &o.policy) < 0) {
                                        fprintf(stderr,
                                                "gpuslice scheduler: --policy: expected binpack, spread, frag, fgd, "
                                                "bestfit, gpupacking, "
                                                "gpuclustering, dotprod or random, got '%s'\n",
                                                optarg);
                                        return EXIT_USAGE;
                                }
                                break;
                        case OPT_SNAPSHOT: snapshot = optarg; break;
                        case OPT_UNIT:
                                if (cluster_units_set(&o.units, optarg) < 0) {
                                        fprintf(stderr,
                                                "gpuslice scheduler: --memory-unit: expected RESOURCE=MIB with a "
                                                "memory "
                                                "resource name, got '%s'\n",
                                                optarg);
                                        return EXIT_USAGE;
                                }
                                break;
                        case OPT_KUBECONFIG: kubeconfig = optarg; break;
                        case OPT_CONTEXT: context = optarg; break;
                        case OPT_FILTER:
                                if (!streq(optarg, "best") && !streq(optarg, "all")) {
                                        fprintf(stderr,
                                                "gpuslice scheduler: --filter-answer: expected best or all, got '%s'\n",
                                                optarg);
                                        return EXIT_USAGE;
                                }
                                o.filter_all = streq(optarg, "all");
                                break;
                        case OPT_CERT: o.tls_cert_file = optarg; break;
                        case OPT_KEY: o.tls_key_file = optarg; break;
                        case OPT_CA: o.tls_client_ca_file = optarg; break;
                        case OPT_LOG: {
                                enum log_level l;
                                if (log_level_from_name(optarg, &l) < 0) {
                                        fprintf(stderr, "gpuslice scheduler: --log-level: unknown level '%s'\n",
                                                optarg);
                                        return EXIT_USAGE;
                                }
                                log_set_level(l);
                                break;
                        }
                        default: help(stderr); return EXIT_USAGE;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "gpuslice scheduler: unexpected argument '%s'\n", argv[optind]);
                return EXIT_USAGE;
        }
        if (!o.tls_cert_file != !o.tls_key_file || (o.tls_client_ca_file && !o.tls_cert_file)) {
                fputs("gpuslice scheduler: --tls-cert and --tls-key go together (and --tls-client-ca needs them)\n",
                      stderr);
                return EXIT_USAGE;
        }
        if (snapshot && (kubeconfig || context)) {
                fputs("gpuslice scheduler: --snapshot and --kubeconfig/--context exclude each other\n", stderr);
                return EXIT_USAGE;
        }
        struct sched_feed *feed = NULL;
        if (!snapshot) {
                struct gs_error kerr = { 0 };
                int kr = sched_feed_new(kubeconfig, context, &feed, &kerr);
                if (kr < 0) {
                        log_error_errno(kr, "cannot reach the API server", "err=\"%s\"", kerr.message);
                        return EXIT_RUNTIME;
                }
                o.binder = sched_feed_binder(feed);
        }

        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        pthread_sigmask(SIG_BLOCK, &mask, NULL); /* before any thread: only sigwait sees them */
        signal(SIGPIPE, SIG_IGN);

        struct sched_server *s;
        int r = sched_server_new(&o, &s);
        if (r < 0) {
                log_error_errno(r, "cannot set up the scheduler extender", "address=%s tls_cert=%s", o.address,
                                o.tls_cert_file ? o.tls_cert_file : "");
                sched_feed_free(feed);
                return r == -EINVAL ? EXIT_USAGE : EXIT_RUNTIME;
        }
        size_t nn = 0, np = 0;
        int ret = EXIT_OK;
        if (feed) {
                struct gs_error kerr = { 0 };
                r = sched_feed_run(feed, s, &o.units, &kerr);
                if (r < 0) {
                        log_error_errno(r, "cannot watch the cluster", "err=\"%s\"", kerr.message);
                        ret = EXIT_RUNTIME;
                        goto out;
                }
        } else {
                ret = load_snapshot(s, snapshot, &o.units, &nn, &np);
                if (ret != EXIT_OK)
                        goto out;
        }
        r = sched_server_start(s);
        if (r < 0) {
                log_error_errno(r, "cannot serve", "address=%s", o.address);
                ret = EXIT_RUNTIME;
                goto out;
        }
        log_info("scheduler extender serving", "address=%s port=%u policy=%s tls=%s source=%s nodes=%zu pods=%zu",
                 o.address, sched_server_port(s), cluster_policy_name(o.policy),
                 o.tls_cert_file ? (o.tls_client_ca_file ? "mutual" : "yes") : "no", snapshot ? snapshot : "api", nn,
                 np);
        int sig = 0;
        sigwait(&mask, &sig);
        log_info("scheduler extender stopping", "signal=%d", sig);
out:
        sched_server_free(s);
        sched_feed_free(feed); /* after the server: no handler runs any more */
        return ret;
}
