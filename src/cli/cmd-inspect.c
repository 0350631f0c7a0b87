/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd-inspect — `gpuslice inspect` (also `kubectl gpuslice inspect`): the cluster's GPUs as the API
 * server knows them. Lists nodes and pods (paged), reads the agents' gpuslice.io/gpus annotations
 * and the pods' assignment annotations into the one cluster model (src/sched/model.h, the
 * scheduler extender's), and prints one row per node and GPU with memory and compute allocated
 * (what the assignments record: sched_node_records), the whole-GPU holder, health and pods; pending
 * GPU pods are shown as such. Where the API serves resource.k8s.io, the ResourceClaims allocated by
 * gpuslice's DRA driver are shown beside the pods, on the GPU their device names (docs/dra.md). --json
 * is the cluster JSON (docs/cluster.md), written by its one writer (src/sched/view.h: sched_view_inspect)
 * with the claims and MIG devices added per GPU. A thin client: the model, the annotation readers and
 * the JSON writer live in src/sched, the claim decoder in src/dra.
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
#include "dra/claim.h"
#include "dra/dra.h"
#include "kube/kube.h"
#include "sched/codec.h"
#include "sched/model.h"
#include "sched/view.h"
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

/* A node as listed: its name, and why it publishes no GPUs (else it is in the model). */
struct listed_node {
        char name[CLUSTER_NAME_MAX];
        bool published;
        char error[128];
        /* the MIG devices its annotation lists (docs/mig.md), with their GPU's NVML index */
        struct listed_mig {
                unsigned gpu;
                struct cluster_mig_info m;
        } * mig;
        size_t n_mig;
};

/* One device a DRA claim of gpuslice's driver holds (the claim is shown on that node's GPU). */
struct listed_claim {
        char ns[DRA_MAX_LABEL + 1], name[DRA_MAX_POOL_NAME + 1], request[128];
        char node[DRA_MAX_POOL_NAME + 1];
        char device[DRA_MAX_LABEL + 1]; /* gpu-<i>, gpu-<i>-shared, gpu-<i>-mig-<gi>-<ci> */
        unsigned gpu;                   /* NVML index, from the device name */
        enum dra_device_kind kind;
        uint64_t memory, cores;
        char pods[DRA_RESERVED_KEPT * 64]; /* "ns/pod,..." of status.reservedFor */
};

/* What the LISTs bring: nodes and bound GPU pods go into the one cluster model (src/sched/model.h,
 * the extender's), pending GPU pods (no node yet) are kept aside, DRA claims beside them; nothing
 * keeps the JSON. */
struct collect {
        struct sched_model *model;
        struct cluster_units units;
        struct cluster_node_info *info; /* scratch */
        struct listed_node *nodes;
        size_t n_nodes, cap_nodes;
        struct cluster_pod *view; /* scratch */
        struct cluster_pod *pending;
        size_t n_pending, cap_pending;
        size_t n_pods;
        struct listed_claim *claims;
        size_t n_claims, cap_claims;
        struct dra_claim *claim; /* scratch */
        int error;
};

/* The node's MIG devices, kept for the output (the model has no MIG side). */
static int keep_mig(struct listed_node *n, const struct cluster_node_info *info) {
        size_t k = 0;
        for (unsigned g = 0; g < info->n_gpus; g++)
                k += info->gpu[g].n_mig;
        if (!k)
                return 0;
        n->mig = calloc(k, sizeof *n->mig);
        if (!n->mig)
                return -ENOMEM;
        for (unsigned g = 0; g < info->n_gpus; g++)
                for (unsigned j = 0; j < info->gpu[g].n_mig; j++)
                        n->mig[n->n_mig++] = (struct listed_mig){ g, info->gpu[g].mig_dev[j] };
        return 0;
}

/* The table's lines of GPU g's MIG devices. */
static void inspect_mig_print(FILE *f, const struct listed_node *ln, unsigned g) {
        for (size_t k = 0; k < ln->n_mig; k++) {
                const struct cluster_mig_info *m = &ln->mig[k].m;
                if (ln->mig[k].gpu == g)
                        fprintf(f, "%29s MIG %u %-10s %-40s %-22.60s %s\n", "", m->index, m->profile, m->uuid,
                                m->holder[0] ? m->holder : "-", m->healthy ? "ok" : "unhealthy");
        }
}

static int collect_node(json_t *obj, void *u) {
        struct collect *c = u;
        if (!obj) { /* the list restarted */
                for (size_t i = 0; i < c->n_nodes; i++) {
                        if (c->nodes[i].published)
                                (void)sched_model_remove_node(c->model, c->nodes[i].name);
                        free(c->nodes[i].mig);
                }
                c->n_nodes = 0;
                return 0;
        }
        if (array_reserve(&c->nodes, &c->cap_nodes, c->n_nodes + 1, 64) < 0)
                return -ENOMEM;
        struct listed_node *n = &c->nodes[c->n_nodes];
        const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
        if (!name || strlen(name) >= sizeof n->name)
                return 0;
        strscpy(n->name, name, sizeof n->name);
        n->mig = NULL;
        n->n_mig = 0;
        struct gs_error err = { 0 };
        int r = cluster_node_decode_json(obj, c->info, &err);
        if (r == 0)
                r = sched_model_set_node(c->model, c->info);
        if (r == 0 && keep_mig(n, c->info) < 0)
                return -ENOMEM;
        if (r == -ENOMEM)
                return r;
        n->published = r == 0;
        if (r == -ENOENT)
                strscpy(n->error, "no " CLUSTER_ANN_GPUS " annotation", sizeof n->error);
        else if (r < 0) {
                /* "node NAME: gpuslice.io/gpus: why": the name is on the row already */
                const char *e = err.message;
                size_t l = strlen(name);
                if (strncmp(e, "node ", 5) == 0 && strncmp(e + 5, name, l) == 0 && strncmp(e + 5 + l, ": ", 2) == 0)
                        e += 7 + l;
                strscpy(n->error, e, sizeof n->error);
        }
        c->n_nodes++;
        return 0;
}

/* Pods bound to a node go into the model; pods without a node are kept as pending (spec.nodeName
 * empty: an assignment without a binding holds nothing yet as far as inspect tells). */
static int collect_pod(json_t *obj, void *u) {
        struct collect *c = u;
        if (!obj) { /* the list restarted: forget what it brought */
                c->n_pending = 0;
                if (c->model) {
                        size_t cur = 0;
                        const struct sched_node *n;
                        char **uids = NULL;
                        size_t nu = 0;
                        while ((n = sched_model_next_node(c->model, &cur)))
                                for (const struct sched_pod *p = n->pods; p; p = p->next_on_node) {
                                        char **x = realloc(uids, (nu + 1) * sizeof *uids);
                                        if (!x)
                                                break;
                                        uids = x;
                                        uids[nu++] = p->uid;
                                }
                        for (size_t i = 0; i < nu; i++)
                                (void)sched_model_remove_pod(c->model, uids[i]);
                        free(uids);
                }
                return 0;
        }
        struct gs_error err = { 0 };
        if (cluster_pod_decode_json(obj, &c->units, c->view, &err) < 0 || !cluster_request_any(&c->view->req) ||
            c->view->terminated)
                return 0; /* holds nothing we can count */
        if (!c->view->node_name[0]) {
                if (array_reserve(&c->pending, &c->cap_pending, c->n_pending + 1, 16) < 0)
                        return -ENOMEM;
                c->pending[c->n_pending++] = *c->view;
                return 0;
        }
        if (!c->model || c->view->req.n == 0)
                return 0;     /* the pending-only list; MIG devices only: the annotation names their holders */
        if (!c->view->uid[0]) /* the model keys pods by uid */
                snprintf(c->view->uid, sizeof c->view->uid, "inspect-%zu", c->n_pods);
        struct sched_pod_info info;
        sched_pod_view_info(c->view, &info);
        int r = sched_model_set_pod(c->model, &info);
        if (r == -ENOMEM)
                return r;
        c->n_pods++;
        return 0;
}

/* A ResourceClaim: each device gpuslice's DRA driver allocated for it. */
static int collect_claim(json_t *obj, void *u) {
        struct collect *c = u;
        if (!obj) {
                c->n_claims = 0;
                return 0;
        }
        struct gs_error err = { 0 };
        if (dra_claim_from_json(obj, DRA_DRIVER_DEFAULT, c->claim, &err) < 0)
                return 0; /* not one inspect can show */
        const struct dra_claim *cl = c->claim;
        for (unsigned i = 0; i < cl->n_results; i++) {
                const struct dra_result *res = &cl->results[i];
                struct dra_device_ref ref;
                if (dra_device_parse(res->device, &ref) < 0)
                        continue;
                if (array_reserve(&c->claims, &c->cap_claims, c->n_claims + 1, 16) < 0)
                        return -ENOMEM;
                struct listed_claim *lc = &c->claims[c->n_claims++];
                *lc = (struct listed_claim){
                        .gpu = ref.index, .kind = ref.kind, .memory = res->memory, .cores = res->cores
                };
                strscpy(lc->device, res->device, sizeof lc->device);
                strscpy(lc->ns, cl->namespace_, sizeof lc->ns);
                strscpy(lc->name, cl->name, sizeof lc->name);
                strscpy(lc->request, res->request, sizeof lc->request);
                strscpy(lc->node, res->pool, sizeof lc->node);
                size_t at = 0;
                for (unsigned k = 0; k < MIN(cl->n_reserved_pods, (unsigned)DRA_RESERVED_KEPT); k++)
                        at += (size_t)snprintf(lc->pods + at, sizeof lc->pods - MIN(at, sizeof lc->pods), "%s%s/%s",
                                               k ? "," : "", cl->namespace_, cl->reserved_pods[k]);
        }
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

static void view_request(const struct cluster_pod *v, uint64_t *mem, unsigned *core, unsigned *whole) {
        *mem = 0;
        *core = 0;
        *whole = 0;
        for (unsigned k = 0; k < v->req.n; k++) {
                *mem += v->req.c[k].mem_mib;
                *core += v->req.c[k].core;
                *whole += v->req.c[k].whole;
        }
}

/* The claims of gpuslice's DRA driver, where the server serves resource.k8s.io (else none, silently). */
static int list_claims(struct kube_client *cl, unsigned page, struct collect *c) {
        json_t *group = NULL;
        if (kube_request(cl, KUBE_GET, "/apis/resource.k8s.io", NULL, &group, NULL) < 0)
                return 0;
        static const char *const prefer[] = { "v1", "v1beta2", "v1beta1" };
        const char *version = NULL;
        for (size_t k = 0; k < ELEMENTSOF(prefer) && !version; k++) {
                size_t i;
                json_t *v;
                json_array_foreach(json_object_get(group, "versions"), i, v) {
                        const char *ver = json_string_value(json_object_get(v, "version"));
                        if (ver && streq(ver, prefer[k]))
                                version = prefer[k];
                }
        }
        json_decref(group);
        if (!version || !(c->claim = malloc(sizeof *c->claim)))
                return version ? -ENOMEM : 0;
        char path[80];
        snprintf(path, sizeof path, "/apis/resource.k8s.io/%s/resourceclaims", version);
        return list_all(cl, path, NULL, page, collect_claim, c);
}

static int node_cmp(const void *a, const void *b) {
        return strcmp(((const struct listed_node *)a)->name, ((const struct listed_node *)b)->name);
}

static const char *gpu_model(const struct sched_node *n, unsigned g) {
        return n->details ? n->details->gpu[g].model : "";
}
static const char *gpu_health(const struct sched_node *n, unsigned g) {
        return n->details ? n->details->gpu[g].health : (n->gpu[g].healthy ? "ok" : "unhealthy");
}

static int node_name_cmp(const void *key, const void *elem) {
        return strcmp(key, ((const struct listed_node *)elem)->name);
}

/* --json: what the LISTs bring beside the model, as more fields of GPU g of `node` (the cluster JSON's writer,
 * sched_view_inspect, calls it): gpus[].claims (the DRA claims on it) and gpus[].mig (its MIG devices). */
static void json_gpu_extra(struct gs_buf *w, const char *node, unsigned g, void *userdata) {
        const struct collect *c = userdata;
        GS_BUF_LIT(w, ",\"claims\":[");
        bool first = true;
        for (size_t i = 0; i < c->n_claims; i++) {
                const struct listed_claim *lc = &c->claims[i];
                if (!streq(lc->node, node) || lc->gpu != g)
                        continue;
                gs_buf_puts(w, first ? "{\"namespace\":" : ",{\"namespace\":");
                first = false;
                gs_buf_json_string(w, lc->ns);
                GS_BUF_LIT(w, ",\"name\":");
                gs_buf_json_string(w, lc->name);
                GS_BUF_LIT(w, ",\"request\":");
                gs_buf_json_string(w, lc->request);
                GS_BUF_LIT(w, ",\"device\":");
                gs_buf_json_string(w, lc->device);
                gs_buf_printf(w, ",\"whole\":%s,\"mig\":%s,\"memory_mib\":%" PRIu64 ",\"core_percent\":%" PRIu64,
                              lc->kind == DRA_DEVICE_GPU ? "true" : "false",
                              dra_kind_mig(lc->kind) && !dra_kind_shared(lc->kind) ? "true" : "false", lc->memory >> 20,
                              lc->cores);
                GS_BUF_LIT(w, ",\"reserved_for\":");
                gs_buf_json_string(w, lc->pods);
                GS_BUF_LIT(w, "}");
        }
        GS_BUF_LIT(w, "],\"mig\":[");
        const struct listed_node *ln = bsearch(node, c->nodes, c->n_nodes, sizeof *c->nodes, node_name_cmp);
        first = true;
        for (size_t k = 0; ln && k < ln->n_mig; k++) {
                const struct cluster_mig_info *m = &ln->mig[k].m;
                if (ln->mig[k].gpu != g)
                        continue;
                gs_buf_printf(w, "%s{\"index\":%u,\"uuid\":", first ? "" : ",", m->index);
                first = false;
                gs_buf_json_string(w, m->uuid);
                GS_BUF_LIT(w, ",\"profile\":");
                gs_buf_json_string(w, m->profile);
                gs_buf_printf(w, ",\"memory_mib\":%" PRIu64 ",\"health\":\"%s\",\"holder\":", (uint64_t)m->mem_mib,
                              m->healthy ? "ok" : "unhealthy");
                if (m->holder[0])
                        gs_buf_json_string(w, m->holder);
                else
                        GS_BUF_LIT(w, "null");
                GS_BUF_LIT(w, "}");
        }
        GS_BUF_LIT(w, "]");
}

/* --json (docs/cluster.md, "The cluster JSON"): the one writer's document, printed indented as before. */
static int print_json(FILE *f, const struct collect *c, const char *only) {
        struct sched_view_listed *nodes = calloc(c->n_nodes + 1, sizeof *nodes);
        struct sched_view_pending *pending = calloc(c->n_pending + 1, sizeof *pending);
        size_t nn = 0;
        for (size_t i = 0; nodes && i < c->n_nodes; i++)
                if (!only || streq(c->nodes[i].name, only))
                        nodes[nn++] = (struct sched_view_listed){ c->nodes[i].name, c->nodes[i].published,
                                                                  c->nodes[i].error };
        for (size_t i = 0; pending && i < c->n_pending; i++)
                pending[i].pod = &c->pending[i];
        struct sched_view_extra x = { .gpu = json_gpu_extra, .userdata = (void *)c };
        _cleanup_(freep) char *text = NULL;
        size_t len = 0;
        int r = nodes && pending ? sched_view_inspect(c->model, nodes, nn, pending, c->n_pending, &x, &text, &len)
                                 : -ENOMEM;
        free(nodes);
        free(pending);
        if (r < 0)
                return r;
        return json_print_text(f, text, len);
}

/* lint: long — the table of `gpuslice inspect`: one fprintf per column per row, and the totals; long because the
 * table is wide, not because it decides much. */
static int print_table(FILE *f, const struct collect *c, const char *only, bool details) {
        uint64_t tot_mem = 0, tot_alloc = 0;
        unsigned n_gpus = 0;
        fprintf(f, "%-24s %-4s %-28s %-17s %-9s %-22s %-9s %s\n", "NODE", "GPU", "MODEL", "MEMORY(MiB)", "CORE(%)",
                "WHOLE-GPU HOLDER", "HEALTH", "PODS");
        for (size_t i = 0; i < c->n_nodes; i++) {
                const struct listed_node *ln = &c->nodes[i];
                if (only && !streq(ln->name, only))
                        continue;
                if (!ln->published) {
                        fprintf(f, "%-24s %-4s (not published: %s)\n", ln->name, "-", ln->error);
                        continue;
                }
                const struct sched_node *n = sched_model_node(c->model, ln->name);
                struct sched_node_records rec;
                if (sched_node_records(n, &rec) < 0)
                        return -ENOMEM;
                for (unsigned g = 0; g < n->n_gpus; g++) {
                        const struct sched_gpu_record *u = &rec.gpu[g];
                        uint64_t total = n->gpu[g].mem_total_mib;
                        char mem[40], core[24], holder[330] = "-";
                        snprintf(mem, sizeof mem, "%" PRIu64 "/%" PRIu64, u->mem_mib, total);
                        snprintf(core, sizeof core, "%u/100", u->core);
                        for (unsigned q = 0; q < u->n_pods; q++) {
                                const struct sched_pod *p = u->pods[q];
                                uint64_t m;
                                unsigned cr;
                                bool whole;
                                sched_pod_share(p, n, g, &m, &cr, &whole);
                                if (whole) {
                                        snprintf(holder, sizeof holder, "%s/%s", p->ns, p->name);
                                        break;
                                }
                        }
                        unsigned n_claims = 0;
                        for (size_t k = 0; k < c->n_claims; k++)
                                if (streq(c->claims[k].node, ln->name) && c->claims[k].gpu == g) {
                                        n_claims++;
                                        if (c->claims[k].kind == DRA_DEVICE_GPU && streq(holder, "-"))
                                                snprintf(holder, sizeof holder, "claim %s/%s", c->claims[k].ns,
                                                         c->claims[k].name);
                                }
                        char claims[40] = "";
                        if (n_claims)
                                snprintf(claims, sizeof claims, " (+%u DRA claim%s)", n_claims,
                                         n_claims > 1 ? "s" : "");
                        fprintf(f, "%-24s %-4u %-28.28s %-17s %-9s %-22.60s %-9.9s %u%s\n", g ? "" : ln->name, g,
                                gpu_model(n, g), mem, core, holder, gpu_health(n, g), u->n_pods, claims);
                        tot_mem += total;
                        tot_alloc += MIN(u->mem_mib, total);
                        n_gpus++;
                        inspect_mig_print(f, ln, g);
                        for (unsigned q = 0; details && q < u->n_pods; q++) {
                                const struct sched_pod *p = u->pods[q];
                                uint64_t m;
                                unsigned cr;
                                bool whole;
                                sched_pod_share(p, n, g, &m, &cr, &whole);
                                const char *src = cluster_source_name(p->source);
                                if (whole)
                                        fprintf(f, "%29s %s/%s  whole GPU%s  [%s]\n", "", p->ns, p->name,
                                                p->confirmed ? "" : "  (assigned, not yet started)", src);
                                else
                                        fprintf(f, "%29s %s/%s  memory %" PRIu64 " MiB  core %u%%%s  [%s]\n", "", p->ns,
                                                p->name, m, cr, p->confirmed ? "" : "  (assigned, not yet started)",
                                                src);
                        }
                        for (size_t k = 0; details && k < c->n_claims; k++) {
                                const struct listed_claim *lc = &c->claims[k];
                                if (!streq(lc->node, ln->name) || lc->gpu != g)
                                        continue;
                                if (lc->kind == DRA_DEVICE_SHARED)
                                        fprintf(f,
                                                "%29s claim %s/%s  memory %" PRIu64 " MiB  core %" PRIu64
                                                "%%  [dra: %s%s%s]\n",
                                                "", lc->ns, lc->name, lc->memory >> 20, lc->cores, lc->request,
                                                lc->pods[0] ? ", pods " : "", lc->pods);
                                else if (lc->kind == DRA_DEVICE_MIG || lc->kind == DRA_DEVICE_MIG_DYNAMIC)
                                        fprintf(f, "%29s claim %s/%s  MIG device %s  [dra: %s%s%s]\n", "", lc->ns,
                                                lc->name, lc->device, lc->request, lc->pods[0] ? ", pods " : "",
                                                lc->pods);
                                else
                                        fprintf(f, "%29s claim %s/%s  whole GPU  [dra: %s%s%s]\n", "", lc->ns, lc->name,
                                                lc->request, lc->pods[0] ? ", pods " : "", lc->pods);
                        }
                }
                for (unsigned q = 0; q < rec.n_unplaced; q++) {
                        const struct sched_pod *p = rec.unplaced[q];
                        uint64_t m;
                        unsigned cr, wh;
                        sched_pod_request(p, &m, &cr, &wh);
                        fprintf(f,
                                "%-24s %-4s %s/%s holds GPU resources (whole %u, core %u%%, memory %" PRIu64
                                " MiB) on no recorded GPU\n",
                                rec.n_unplaced && !n->n_gpus ? ln->name : "", "?", p->ns, p->name, wh, cr, m);
                }
                sched_node_records_free(&rec);
        }
        if (c->n_pending) {
                fprintf(f, "\nPENDING (no node yet):\n");
                for (size_t q = 0; q < c->n_pending; q++) {
                        const struct cluster_pod *p = &c->pending[q];
                        uint64_t m;
                        unsigned cr, wh;
                        view_request(p, &m, &cr, &wh);
                        for (unsigned k = 0; k < p->req.n_mig; k++)
                                fprintf(f, "  %s/%s  %u MIG device(s) %s\n", p->ns, p->name, p->req.mig[k].count,
                                        p->req.mig[k].profile);
                        if (wh)
                                fprintf(f, "  %s/%s  %u whole GPU(s)\n", p->ns, p->name, wh);
                        else if (p->req.n)
                                fprintf(f,
                                        "  %s/%s  memory %" PRIu64 " MiB  core %u%%  (fractional, GPU not assigned)\n",
                                        p->ns, p->name, m, cr);
                }
        }
        fprintf(f, "\nGPUs: %u  memory allocated/total: %" PRIu64 "/%" PRIu64 " MiB (%.0f%%)\n", n_gpus, tot_alloc,
                tot_mem, tot_mem ? 100.0 * (double)tot_alloc / (double)tot_mem : 0.0);
        return 0;
}

static void collect_done(struct collect *c) {
        c->model = sched_model_free(c->model);
        free(c->claims);
        free(c->claim);
        free(c->info);
        free(c->view);
        for (size_t i = 0; i < c->n_nodes; i++)
                free(c->nodes[i].mig);
        free(c->nodes);
        free(c->pending);
}

/* lint: long — a command's main: the getopt switch (one case per flag, each checking its value and naming the flag
 * in its message), then the command's steps in order; its size is its flags'. */
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
        struct gs_error err = { 0 };
        int r = kube_config_load(o.kubeconfig, o.context, &kc, &err);
        if (r < 0) {
                fprintf(stderr, "gpuslice inspect: %s\n", err.message);
                return r == -ENOENT && !o.kubeconfig ? EXIT_RUNTIME : EXIT_DATA;
        }
        struct kube_client *cl = NULL;
        r = kube_client_new(&kc, &cl);
        kube_config_done(&kc);
        if (r < 0) {
                fprintf(stderr, "gpuslice inspect: %s\n", strerror(-r));
                return EXIT_RUNTIME;
        }
        struct collect col = { 0 }, pending = { 0 };
        cluster_units_default(&col.units);
        pending.units = col.units;
        col.info = malloc(sizeof *col.info);
        col.view = malloc(sizeof *col.view);
        pending.view = malloc(sizeof *pending.view);
        r = col.info && col.view && pending.view ? sched_model_new(&col.model) : -ENOMEM;
        if (r < 0) {
                collect_done(&col);
                collect_done(&pending);
                kube_client_free(cl);
                return EXIT_RUNTIME;
        }
        sched_model_keep_details(col.model, true);
        char sel[320];
        const char *node_sel = NULL;
        if (o.node) {
                snprintf(sel, sizeof sel, "metadata.name=%.256s", o.node);
                node_sel = sel;
        }
        r = list_all(cl, "/api/v1/nodes", node_sel, o.page, collect_node, &col);
        if (r >= 0 && o.node) {
                /* that node's pods, then the pending ones (spec.nodeName empty) */
                char ps[320];
                snprintf(ps, sizeof ps, "spec.nodeName=%.256s", o.node);
                r = list_all(cl, "/api/v1/pods", ps, o.page, collect_pod, &col);
                /* a restart of the second list must not forget the first: its own collector */
                if (r >= 0)
                        r = list_all(cl, "/api/v1/pods", "spec.nodeName=", o.page, collect_pod, &pending);
                if (r >= 0 && pending.n_pending) {
                        struct cluster_pod *m = realloc(col.pending, (col.n_pending + pending.n_pending) * sizeof *m);
                        if (!m)
                                r = -ENOMEM;
                        else {
                                memcpy(m + col.n_pending, pending.pending, pending.n_pending * sizeof *m);
                                col.pending = m;
                                col.n_pending += pending.n_pending;
                        }
                }
        } else if (r >= 0)
                r = list_all(cl, "/api/v1/pods", NULL, o.page, collect_pod, &col);
        if (r >= 0)
                r = list_claims(cl, o.page, &col);
        kube_client_free(cl);
        collect_done(&pending);
        if (r < 0) {
                collect_done(&col);
                return EXIT_RUNTIME;
        }
        qsort(col.nodes, col.n_nodes, sizeof *col.nodes, node_cmp);
        if (o.node && col.n_nodes == 0) {
                fprintf(stderr, "gpuslice inspect: node '%s' not found\n", o.node);
                collect_done(&col);
                return EXIT_RUNTIME;
        }
        if (o.json) {
                r = print_json(stdout, &col, o.node) < 0 || fflush(stdout) != 0 ? EXIT_RUNTIME : EXIT_OK;
        } else {
                r = print_table(stdout, &col, o.node, o.details) < 0 || fflush(stdout) != 0 ? EXIT_RUNTIME : EXIT_OK;
        }
        collect_done(&col);
        return r;
}
