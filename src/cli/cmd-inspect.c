/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd-inspect — `gpuslice inspect` (also `kubectl gpuslice inspect`): the cluster's GPUs as the API
 * server knows them. Lists nodes and pods (paged), reads the agents' gpuslice.io/gpus annotations
 * and the pods' assignment annotations (kube/cluster.h), and prints one row per node and GPU with
 * memory and compute allocated, the whole-GPU holder, health and pods; pending GPU pods are shown
 * as such. --json gives the schema documented in docs/cluster.md. A thin client: decisions live
 * in src/kube.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "cli/commands.h"
#include "cli/output.h"
#include "kube/cluster.h"
#include "kube/kube.h"
#include "util/util.h"

struct inspect_opts {
        const char *kubeconfig, *context, *node;
        bool details, json;
        unsigned page;
};

static void usage(FILE *f) {
        fputs("Usage: gpuslice inspect [OPTIONS]\n"
              "       kubectl gpuslice inspect [OPTIONS]\n\n"
              "Show the cluster's GPUs: one row per node and GPU with memory and compute allocated,\n"
              "the whole-GPU holder, health and pods; pending GPU pods at the end.\n\n"
              "Options:\n"
              "      --kubeconfig PATH  kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)\n"
              "      --context NAME     kubeconfig context (default: current-context)\n"
              "      --node NAME        only this node (and pending pods)\n"
              "  -d, --details          list each GPU's pods with their request\n"
              "      --json             machine-readable output (docs/cluster.md)\n"
              "      --page-size N      LIST page size (default 500)\n"
              "  -h, --help             this help\n",
              f);
}

struct collect {
        json_t *arr;           /* nodes: slim objects */
        struct kube_pod *pods; /* pods: parsed as they arrive (no JSON kept) */
        size_t n, cap;
};

static int collect_node(json_t *obj, void *u) {
        struct collect *c = u;
        if (!obj) { /* the list restarted */
                json_array_clear(c->arr);
                return 0;
        }
        json_t *s = kube_slim_node(obj);
        if (s)
                json_array_append_new(c->arr, s);
        return 0;
}

static int collect_pod(json_t *obj, void *u) {
        struct collect *c = u;
        if (!obj) {
                c->n = 0;
                return 0;
        }
        if (c->n == c->cap) {
                size_t cap = c->cap ? c->cap * 2 : 1024;
                struct kube_pod *p = realloc(c->pods, cap * sizeof *p);
                if (!p)
                        return -ENOMEM;
                c->pods = p;
                c->cap = cap;
        }
        if (kube_pod_parse(obj, &c->pods[c->n]) == 0)
                c->n++;
        return 0;
}

#define LIST_ATTEMPTS 5

static bool transient(int r) {
        return r == -EAGAIN || r == -ETIMEDOUT || r == -ECONNREFUSED || r == -ECONNABORTED || r == -EPROTO;
}

/* One LIST, retried on transient failures (429, 5xx, a connection or answer cut) with capped
 * jittered backoff: a busy or restarting API server does not fail the command at once. */
static int list_all(struct kube_client *cl, const char *path, const char *field_selector, unsigned page,
                    int (*item)(json_t *obj, void *u), struct collect *c) {
        struct kube_list_opts o = { .field_selector = field_selector, .limit = page };
        struct kube_error e;
        int r;
        for (unsigned attempt = 0;; attempt++) {
                r = kube_list(cl, path, &o, item, c, NULL, &e);
                if (r >= 0 || !transient(r) || attempt + 1 >= LIST_ATTEMPTS)
                        break;
                (void)item(NULL, c); /* forget a partial list */
                /* jitter only: rand() is enough */
                unsigned ms = kube_backoff_ms(attempt, 500, 4000, (uint32_t)rand()); // NOLINT(cert-msc30-c)
                fprintf(stderr, "gpuslice inspect: LIST %s: %s%s%s; retrying in %u ms\n", path, strerror(-r),
                        e.message[0] ? ": " : "", e.message, ms);
                struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
                nanosleep(&ts, NULL);
        }
        if (r < 0)
                fprintf(stderr, "gpuslice inspect: LIST %s: %s%s%s\n", path, strerror(-r), e.message[0] ? ": " : "",
                        e.message);
        return r;
}

/* The share of pod p on GPU index gi of a node: summed over its containers there. */
static void pod_share(const struct kube_pod *p, int gi, uint64_t gpu_mem, uint64_t *mem, unsigned *core, bool *whole) {
        *mem = 0;
        *core = 0;
        *whole = false;
        for (unsigned k = 0; k < p->n; k++)
                for (unsigned a = 0; a < p->c[k].n_assigned; a++)
                        if (p->c[k].assigned[a] == gi) {
                                if (p->c[k].whole) {
                                        *whole = true;
                                        *core += 100;
                                        *mem += gpu_mem;
                                } else {
                                        *core += p->c[k].core_percent;
                                        *mem += p->c[k].memory_mib;
                                }
                        }
}

static void pod_request(const struct kube_pod *p, uint64_t *mem, unsigned *core, unsigned *whole) {
        *mem = 0;
        *core = 0;
        *whole = 0;
        for (unsigned k = 0; k < p->n; k++) {
                *mem += p->c[k].memory_mib;
                *core += p->c[k].core_percent;
                *whole += p->c[k].whole;
        }
}

static json_t *json_pod_ref(const struct kube_pod *p) {
        json_t *o = json_object();
        json_object_set_new(o, "namespace", json_string(p->namespace_));
        json_object_set_new(o, "name", json_string(p->name));
        return o;
}

static json_t *json_pod_request(const struct kube_pod *p) {
        uint64_t mem;
        unsigned core, whole;
        pod_request(p, &mem, &core, &whole);
        json_t *o = json_pod_ref(p);
        json_object_set_new(o, "memory_mib", json_integer((json_int_t)mem));
        json_object_set_new(o, "core_percent", json_integer(core));
        json_object_set_new(o, "whole_gpus", json_integer(whole));
        return o;
}

static json_t *json_cluster(const struct kube_cluster *c, const char *only) {
        json_t *root = json_object(), *nodes = json_array();
        for (unsigned i = 0; i < c->n_nodes; i++) {
                const struct kube_cluster_node *n = &c->nodes[i];
                if (only && !streq(n->name, only))
                        continue;
                json_t *jn = json_object(), *gpus = json_array(), *unpl = json_array();
                json_object_set_new(jn, "name", json_string(n->name));
                json_object_set_new(jn, "published", json_boolean(n->published));
                if (!n->published)
                        json_object_set_new(jn, "error", json_string(n->error));
                if (n->g.driver[0])
                        json_object_set_new(jn, "driver", json_string(n->g.driver));
                for (unsigned g = 0; g < n->g.n; g++) {
                        const struct kube_gpu *k = &n->g.gpu[g];
                        const struct kube_gpu_use *u = &n->use[g];
                        json_t *jg = json_object(), *pods = json_array();
                        json_object_set_new(jg, "index", json_integer(k->index));
                        json_object_set_new(jg, "uuid", json_string(k->uuid));
                        json_object_set_new(jg, "model", json_string(k->model));
                        json_object_set_new(jg, "health", json_string(k->health));
                        json_object_set_new(jg, "memory_total_mib", json_integer((json_int_t)k->memory_mib));
                        json_object_set_new(jg, "memory_allocated_mib", json_integer((json_int_t)u->memory_alloc_mib));
                        json_object_set_new(jg, "core_allocated_percent", json_integer(u->core_alloc_percent));
                        json_t *holder = json_null();
                        for (unsigned q = 0; q < u->n_pods; q++) {
                                const struct kube_pod *p = &c->pods[u->pods[q]];
                                uint64_t mem;
                                unsigned core;
                                bool whole;
                                pod_share(p, k->index, k->memory_mib, &mem, &core, &whole);
                                json_t *jp = json_pod_ref(p);
                                json_object_set_new(jp, "memory_mib", json_integer((json_int_t)mem));
                                json_object_set_new(jp, "core_percent", json_integer(core));
                                json_object_set_new(jp, "whole", json_boolean(whole));
                                json_object_set_new(jp, "confirmed", json_boolean(p->confirmed));
                                json_object_set_new(jp, "source", json_string(p->source));
                                json_array_append_new(pods, jp);
                                if (whole && json_is_null(holder)) {
                                        json_decref(holder);
                                        holder = json_pod_ref(p);
                                }
                        }
                        json_object_set_new(jg, "whole_holder", holder);
                        json_object_set_new(jg, "pods", pods);
                        json_array_append_new(gpus, jg);
                }
                for (unsigned q = 0; q < n->n_unplaced; q++)
                        json_array_append_new(unpl, json_pod_request(&c->pods[n->unplaced[q]]));
                json_object_set_new(jn, "gpus", gpus);
                json_object_set_new(jn, "unplaced_pods", unpl);
                json_array_append_new(nodes, jn);
        }
        json_t *pend = json_array();
        for (unsigned q = 0; q < c->n_pending; q++)
                json_array_append_new(pend, json_pod_request(&c->pods[c->pending[q]]));
        json_object_set_new(root, "nodes", nodes);
        json_object_set_new(root, "pending_pods", pend);
        return root;
}

static void print_table(FILE *f, const struct kube_cluster *c, const char *only, bool details) {
        uint64_t tot_mem = 0, tot_alloc = 0;
        unsigned n_gpus = 0;
        fprintf(f, "%-24s %-4s %-28s %-17s %-9s %-22s %-9s %s\n", "NODE", "GPU", "MODEL", "MEMORY(MiB)", "CORE(%)",
                "WHOLE-GPU HOLDER", "HEALTH", "PODS");
        for (unsigned i = 0; i < c->n_nodes; i++) {
                const struct kube_cluster_node *n = &c->nodes[i];
                if (only && !streq(n->name, only))
                        continue;
                if (!n->published) {
                        fprintf(f, "%-24s %-4s (not published: %s)\n", n->name, "-", n->error);
                        continue;
                }
                for (unsigned g = 0; g < n->g.n; g++) {
                        const struct kube_gpu *k = &n->g.gpu[g];
                        const struct kube_gpu_use *u = &n->use[g];
                        char mem[40], core[24], holder[330] = "-";
                        snprintf(mem, sizeof mem, "%" PRIu64 "/%" PRIu64, u->memory_alloc_mib, k->memory_mib);
                        snprintf(core, sizeof core, "%u/100", u->core_alloc_percent);
                        for (unsigned q = 0; q < u->n_pods; q++) {
                                const struct kube_pod *p = &c->pods[u->pods[q]];
                                uint64_t m;
                                unsigned cr;
                                bool whole;
                                pod_share(p, k->index, k->memory_mib, &m, &cr, &whole);
                                if (whole) {
                                        snprintf(holder, sizeof holder, "%s/%s", p->namespace_, p->name);
                                        break;
                                }
                        }
                        fprintf(f, "%-24s %-4d %-28.28s %-17s %-9s %-22.60s %-9.9s %u\n", g ? "" : n->name, k->index,
                                k->model, mem, core, holder, k->health, u->n_pods);
                        tot_mem += k->memory_mib;
                        tot_alloc += MIN(u->memory_alloc_mib, k->memory_mib);
                        n_gpus++;
                        for (unsigned q = 0; details && q < u->n_pods; q++) {
                                const struct kube_pod *p = &c->pods[u->pods[q]];
                                uint64_t m;
                                unsigned cr;
                                bool whole;
                                pod_share(p, k->index, k->memory_mib, &m, &cr, &whole);
                                if (whole)
                                        fprintf(f, "%29s %s/%s  whole GPU%s  [%s]\n", "", p->namespace_, p->name,
                                                p->confirmed ? "" : "  (assigned, not yet started)", p->source);
                                else
                                        fprintf(f, "%29s %s/%s  memory %" PRIu64 " MiB  core %u%%%s  [%s]\n", "",
                                                p->namespace_, p->name, m, cr,
                                                p->confirmed ? "" : "  (assigned, not yet started)", p->source);
                        }
                }
                for (unsigned q = 0; q < n->n_unplaced; q++) {
                        const struct kube_pod *p = &c->pods[n->unplaced[q]];
                        uint64_t m;
                        unsigned cr, wh;
                        pod_request(p, &m, &cr, &wh);
                        fprintf(f,
                                "%-24s %-4s %s/%s holds GPU resources (whole %u, core %u%%, memory %" PRIu64
                                " MiB) on no recorded GPU\n",
                                n->n_unplaced && !n->g.n ? n->name : "", "?", p->namespace_, p->name, wh, cr, m);
                }
        }
        if (c->n_pending) {
                fprintf(f, "\nPENDING (no node yet):\n");
                for (unsigned q = 0; q < c->n_pending; q++) {
                        const struct kube_pod *p = &c->pods[c->pending[q]];
                        uint64_t m;
                        unsigned cr, wh;
                        pod_request(p, &m, &cr, &wh);
                        if (wh)
                                fprintf(f, "  %s/%s  %u whole GPU(s)\n", p->namespace_, p->name, wh);
                        else
                                fprintf(f,
                                        "  %s/%s  memory %" PRIu64 " MiB  core %u%%  (fractional, GPU not assigned)\n",
                                        p->namespace_, p->name, m, cr);
                }
        }
        fprintf(f, "\nGPUs: %u  memory allocated/total: %" PRIu64 "/%" PRIu64 " MiB (%.0f%%)\n", n_gpus, tot_alloc,
                tot_mem, tot_mem ? 100.0 * (double)tot_alloc / (double)tot_mem : 0.0);
}

int cmd_inspect(int argc, char **argv) {
        struct inspect_opts o = { .page = KUBE_LIST_PAGE };
        enum {
                O_KUBECONFIG = 256,
                O_CONTEXT,
                O_NODE,
                O_JSON,
                O_PAGE
        };
        static const struct option longopts[] = {
                { "kubeconfig", required_argument, NULL, O_KUBECONFIG },
                { "context", required_argument, NULL, O_CONTEXT },
                { "node", required_argument, NULL, O_NODE },
                { "details", no_argument, NULL, 'd' },
                { "json", no_argument, NULL, O_JSON },
                { "page-size", required_argument, NULL, O_PAGE },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "dh", longopts, NULL)) != -1) {
                switch (c) {
                        case O_KUBECONFIG: o.kubeconfig = optarg; break;
                        case O_CONTEXT: o.context = optarg; break;
                        case O_NODE: o.node = optarg; break;
                        case 'd': o.details = true; break;
                        case O_JSON: o.json = true; break;
                        case O_PAGE:
                                if (parse_uint(optarg, 100000, &o.page) < 0 || !o.page) {
                                        fprintf(stderr, "gpuslice inspect: --page-size: expected 1..100000, got '%s'\n",
                                                optarg);
                                        return EXIT_USAGE;
                                }
                                break;
                        case 'h': usage(stdout); return EXIT_OK;
                        default: usage(stderr); return EXIT_USAGE;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "gpuslice inspect: unexpected argument '%s'\n", argv[optind]);
                return EXIT_USAGE;
        }
        struct kube_config kc;
        char err[KUBE_ERR_MAX];
        int r = kube_config_load(o.kubeconfig, o.context, &kc, err, sizeof err);
        if (r < 0) {
                fprintf(stderr, "gpuslice inspect: %s\n", err);
                return r == -ENOENT && !o.kubeconfig ? EXIT_RUNTIME : EXIT_DATA;
        }
        struct kube_client *cl = NULL;
        r = kube_client_new(&kc, &cl);
        kube_config_done(&kc);
        if (r < 0) {
                fprintf(stderr, "gpuslice inspect: %s\n", strerror(-r));
                return EXIT_RUNTIME;
        }
        struct collect nodes = { .arr = json_array() }, pods = { 0 };
        char sel[320];
        const char *node_sel = NULL;
        if (!nodes.arr) {
                kube_client_free(cl);
                return EXIT_RUNTIME;
        }
        if (o.node) {
                snprintf(sel, sizeof sel, "metadata.name=%.256s", o.node);
                node_sel = sel;
        }
        r = list_all(cl, "/api/v1/nodes", node_sel, o.page, collect_node, &nodes);
        if (r >= 0 && o.node) {
                /* that node's pods, then the pending ones (spec.nodeName empty) */
                char ps[320];
                snprintf(ps, sizeof ps, "spec.nodeName=%.256s", o.node);
                r = list_all(cl, "/api/v1/pods", ps, o.page, collect_pod, &pods);
                if (r >= 0) {
                        /* a restart of the second list must not forget the first */
                        struct collect pending = { 0 };
                        r = list_all(cl, "/api/v1/pods", "spec.nodeName=", o.page, collect_pod, &pending);
                        if (r >= 0 && pending.n) {
                                struct kube_pod *m = realloc(pods.pods, (pods.n + pending.n) * sizeof *m);
                                if (!m)
                                        r = -ENOMEM;
                                else {
                                        memcpy(m + pods.n, pending.pods, pending.n * sizeof *m);
                                        pods.pods = m;
                                        pods.n += pending.n;
                                }
                        }
                        free(pending.pods);
                }
        } else if (r >= 0)
                r = list_all(cl, "/api/v1/pods", NULL, o.page, collect_pod, &pods);
        kube_client_free(cl);
        if (r < 0) {
                json_decref(nodes.arr);
                free(pods.pods);
                return EXIT_RUNTIME;
        }
        struct kube_cluster cluster;
        r = kube_cluster_build_pods(nodes.arr, pods.pods, pods.n, &cluster);
        json_decref(nodes.arr);
        if (r < 0) {
                fprintf(stderr, "gpuslice inspect: %s\n", strerror(-r));
                return EXIT_RUNTIME;
        }
        if (o.node && cluster.n_nodes == 0) {
                fprintf(stderr, "gpuslice inspect: node '%s' not found\n", o.node);
                kube_cluster_done(&cluster);
                return EXIT_RUNTIME;
        }
        if (o.json)
                r = json_print(stdout, json_cluster(&cluster, o.node)) < 0 ? EXIT_RUNTIME : EXIT_OK;
        else {
                print_table(stdout, &cluster, o.node, o.details);
                r = fflush(stdout) == 0 ? EXIT_OK : EXIT_RUNTIME;
        }
        kube_cluster_done(&cluster);
        return r;
}
