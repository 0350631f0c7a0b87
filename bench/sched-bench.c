/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sched-bench — the scheduler extender's decision time and memory (docs/BENCHMARKS.md).
 *
 * For N nodes × 8 GPUs (N = 100, 1,000, 5,000 by default) and 40,000 pods held in the model:
 * the time of a filter call and of a prioritize call as kube-scheduler makes them with
 * nodeCacheCapable (the pod plus every node name; JSON decoded, every node decided, the reply
 * encoded), for five pod shapes (a 30 % / 4 GiB share, one whole GPU, four whole GPUs, and two
 * multi-container pods: two shares, a share beside two whole GPUs), p50 and p99; and the model's heap
 * per node and per pod (mallinfo2 deltas).
 *
 * Nodes come in four topologies (8-GPU PCIe two-socket, DGX-1-like hybrid cube mesh, two NVLink
 * quads, NVSwitch); pods are spread over the GPUs as shares sized so they fit, a quarter of the
 * nodes also hold whole GPUs; every node has 224 cores and 2 TiB allocatable, every pod held asks 4 cores and
 * 16 GiB, every container decided 2 cores and 8 GiB (the CPU and memory the extender reads). No I/O beyond stdout;
 * calls the verbs directly (no socket).
 *
 *   sched-bench [--nodes N[,N...]] [--pods P] [--iterations K] [--policy NAME[,NAME...]] [--markdown]
 *
 * --policy runs every size under each policy in turn (default binpack alone), e.g. binpack,frag side by side.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/server.h"
#include "util/util.h"

static double now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of this thread: the machine is shared, so wall time also counts waiting for a core. */
static double cpu_now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t heap(void) {
        struct mallinfo2 mi = mallinfo2();
        return mi.uordblks + mi.hblkhd;
}

static void set_links(struct cluster_node_info *n, unsigned kind) {
        static const struct topo_link SYS = { TOPO_LEVEL_SYS, 0 }, PIX = { TOPO_LEVEL_PIX, 0 },
                                      PHB = { TOPO_LEVEL_PHB, 0 };
        for (unsigned a = 0; a < 8; a++)
                for (unsigned b = 0; b < 8; b++) {
                        struct topo_link l;
                        if (a == b)
                                l = (struct topo_link){ TOPO_LEVEL_SELF, 0 };
                        else if (kind == 0) /* PCIe, two sockets, switches of 2 */
                                l = a / 4 != b / 4 ? SYS : a / 2 == b / 2 ? PIX : PHB;
                        else if (kind == 1) { /* hybrid cube mesh: quads fully linked, i <-> i+4 */
                                l = a / 4 != b / 4 ? SYS : PHB;
                                if (a / 4 == b / 4 || (a % 4) == (b % 4))
                                        l.nvlinks = (uint8_t)(a / 4 == b / 4 ? ((a ^ b) == 1 ? 2 : 1) : 2);
                        } else if (kind == 2) { /* two NVLink quads over SYS */
                                l = SYS;
                                if (a / 4 == b / 4)
                                        l.nvlinks = 4;
                        } else { /* NVSwitch */
                                l = (struct topo_link){ TOPO_LEVEL_NODE, 12 };
                        }
                        n->link[a][b] = l;
                }
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static char *args_body(unsigned n_nodes, const char *containers) {
        size_t cap = (size_t)n_nodes * 16 + 1024;
        char *b = malloc(cap);
        if (!b)
                abort();
        size_t off = (size_t)snprintf(b, cap,
                                      "{\"Pod\":{\"metadata\":{\"name\":\"bench\",\"namespace\":\"default\",\"uid\":"
                                      "\"bench-uid\",\"resourceVersion\":\"1\"},\"spec\":{\"containers\":%s}},"
                                      "\"Nodes\":null,\"NodeNames\":[",
                                      containers);
        for (unsigned i = 0; i < n_nodes; i++)
                off += (size_t)snprintf(b + off, cap - off, "%s\"n%u\"", i ? "," : "", i);
        snprintf(b + off, cap - off, "]}");
        return b;
}

struct shape {
        const char *name, *containers; /* spec.containers */
};

/* every container asks 2 cores and 8 GiB too (the extender reads them: frag's CPU and memory terms) */
#define REQUESTS "\"requests\":{\"cpu\":\"2\",\"memory\":\"8Gi\"}"
#define CONTAINER(NAME, LIMITS) "{\"name\":\"" NAME "\",\"resources\":{" REQUESTS ",\"limits\":" LIMITS "}}"
#define SHARE30 "{\"gpuslice.io/gpu-core\":\"30\",\"gpuslice.io/gpu-memory\":\"16\"}"

static const struct shape shapes[] = {
        { "share 30 % / 4 GiB", "[" CONTAINER("main", SHARE30) "]" },
        { "1 whole GPU", "[" CONTAINER("main", "{\"nvidia.com/gpu\":\"1\"}") "]" },
        { "4 whole GPUs", "[" CONTAINER("main", "{\"nvidia.com/gpu\":\"4\"}") "]" },
        { "2 containers: 2 shares 20 % / 2 GiB",
          "[" CONTAINER("a", "{\"gpuslice.io/gpu-core\":\"20\",\"gpuslice.io/gpu-memory\":\"8\"}") "," CONTAINER(
                  "b", "{\"gpuslice.io/gpu-core\":\"20\",\"gpuslice.io/gpu-memory\":\"8\"}") "]" },
        { "2 containers: share + 2 whole GPUs",
          "[" CONTAINER("a", SHARE30) "," CONTAINER("b", "{\"nvidia.com/gpu\":\"2\"}") "]" },
};

static void run(unsigned n_nodes, unsigned n_pods, unsigned iters, bool md, enum cluster_policy policy) {
        struct sched_server_options o = { .address = "127.0.0.1:0", .policy = policy };
        cluster_units_default(&o.units);
        size_t h0 = heap();
        struct sched_server *s;
        if (sched_server_new(&o, &s) < 0)
                abort();
        struct sched_model *m = sched_server_lock(s);
        struct cluster_node_info *ni = calloc(1, sizeof *ni);
        size_t h1 = heap();
        for (unsigned i = 0; i < n_nodes; i++) {
                snprintf(ni->name, sizeof ni->name, "n%u", i);
                ni->n_gpus = 8;
                for (unsigned g = 0; g < 8; g++) {
                        snprintf(ni->gpu[g].uuid, sizeof ni->gpu[g].uuid, "GPU-%08x-0000-0000-0000-%012u", i, g);
                        ni->gpu[g].mem_mib = 32768;
                        ni->gpu[g].healthy = true;
                }
                set_links(ni, i % 4);
                if (sched_model_set_node(m, ni) < 0 || /* a DGX-like node: 224 cores, 2 TiB */
                    sched_model_set_node_resources(m, ni->name, 224000, 2u << 20, NULL) < 0)
                        abort();
        }
        size_t h2 = heap();
        /* Shares on GPUs 0-3 of every node, sized so that they fit; GPUs 4-7 stay free, except on
         * every fourth node where GPUs 4 and 5 are held whole (so 4 whole GPUs fit on 3/4 of the
         * nodes, one whole GPU everywhere). */
        unsigned slots = n_nodes * 4;
        unsigned whole_pods = (n_nodes + 3) / 4 * 2;
        unsigned shares = n_pods > whole_pods ? n_pods - whole_pods : 0;
        unsigned per_gpu = (shares + slots - 1) / slots;
        unsigned core = MAX(1u, 60u / (per_gpu + 1));
        uint32_t mem = MAX(1u, 16384u / (per_gpu + 1));
        char uid[48], name[48], node[32];
        unsigned placed = 0;
        for (unsigned k = 0; placed < n_pods; k++) {
                bool whole = k < whole_pods;
                unsigned nd = whole ? (k / 2) * 4 : (k - whole_pods) % n_nodes;
                unsigned g = whole ? 4 + k % 2 : ((k - whole_pods) / n_nodes) % 4;
                snprintf(uid, sizeof uid, "00000000-0000-0000-0000-%012u", k);
                snprintf(name, sizeof name, "pod-%u", k);
                snprintf(node, sizeof node, "n%u", nd);
                struct sched_pod_info p = { .uid = uid,
                                            .ns = "default",
                                            .name = name,
                                            .node = node,
                                            .bound = true,
                                            .resource_version = "12345",
                                            .cpu_milli = 4000,
                                            .mem_mib = 16384 };
                p.req.n = 1;
                strscpy(p.req.c[0].name, "main", sizeof p.req.c[0].name);
                p.has_assignment = true;
                p.assign.n = 1;
                if (whole) {
                        p.req.c[0].whole = 1;
                        p.assign.c[0] = (struct cluster_container_assign){ .gpus = 1ULL << g, .whole = true };
                } else {
                        p.req.c[0].core = core;
                        p.req.c[0].mem_mib = mem;
                        p.assign.c[0] =
                                (struct cluster_container_assign){ .gpus = 1ULL << g, .core = core, .mem_mib = mem };
                }
                if (sched_model_set_pod(m, &p) < 0)
                        abort();
                placed++;
        }
        size_t h3 = heap();
        free(ni);
        size_t classes = sched_model_n_topo_classes(m);
        sched_server_unlock(s);
        sched_server_set_ready(s, true);
        (void)h0;
        if (md)
                printf("| %u × 8 | %u | %.0f B | %.0f B | %zu |", n_nodes, placed, (double)(h2 - h1) / n_nodes,
                       (double)(h3 - h2) / placed, classes);
        else
                printf("policy=%s nodes=%u pods=%u heap_per_node=%.0fB heap_per_pod=%.0fB topo_classes=%zu\n",
                       cluster_policy_name(policy), n_nodes, placed, (double)(h2 - h1) / n_nodes,
                       (double)(h3 - h2) / placed, classes);
        double *tf = calloc(iters, sizeof *tf), *tp = calloc(iters, sizeof *tp), *tb = calloc(iters, sizeof *tb);
        double *tc = calloc(iters, sizeof *tc);
        for (size_t sh = 0; sh < ELEMENTSOF(shapes); sh++) {
                char *body = args_body(n_nodes, shapes[sh].containers);
                size_t len = strlen(body);
                unsigned passed = 0;
                for (unsigned i = 0; i < iters + 3; i++) {
                        char *out;
                        size_t out_len;
                        double c0 = cpu_now();
                        double t0 = now();
                        if (sched_server_filter(s, body, len, &out, &out_len) != 200)
                                abort();
                        double t1 = now();
                        if (i == 0) {
                                const char *names = strstr(out, "\"NodeNames\":[");
                                for (const char *q = names ? names + 13 : ""; *q && *q != ']'; q++)
                                        passed += *q == ',';
                                passed += names && names[13] != ']';
                        }
                        free(out);
                        if (sched_server_prioritize(s, body, len, &out, &out_len) != 200)
                                abort();
                        double t2 = now();
                        double c2 = cpu_now();
                        free(out);
                        if (i >= 3) { /* the first calls fill the whole-pick memo */
                                tf[i - 3] = (t1 - t0) * 1e3;
                                tp[i - 3] = (t2 - t1) * 1e3;
                                tb[i - 3] = (t2 - t0) * 1e3;
                                tc[i - 3] = (c2 - c0) * 1e3;
                        }
                }
                qsort(tf, iters, sizeof *tf, cmp_double);
                qsort(tp, iters, sizeof *tp, cmp_double);
                qsort(tb, iters, sizeof *tb, cmp_double);
                qsort(tc, iters, sizeof *tc, cmp_double);
                unsigned p99 = (unsigned)((iters * 99 + 99) / 100) - 1;
                if (md)
                        printf(" %.2f / %.2f ms (CPU %.2f / %.2f; %u pass) |", tb[iters / 2], tb[p99], tc[iters / 2],
                               tc[p99], passed);
                else
                        printf("  %-20s filter p50 %.3f ms p99 %.3f ms | prioritize p50 %.3f p99 %.3f | both p50 %.3f "
                               "p99 %.3f ms | CPU p50 %.3f p99 %.3f ms | %u nodes pass\n",
                               shapes[sh].name, tf[iters / 2], tf[p99], tp[iters / 2], tp[p99], tb[iters / 2], tb[p99],
                               tc[iters / 2], tc[p99], passed);
                free(body);
        }
        if (md)
                printf("\n");
        free(tf);
        free(tp);
        free(tb);
        free(tc);
        sched_server_free(s);
}

int main(int argc, char **argv) {
        unsigned sizes[8] = { 100, 1000, 5000 }, n_sizes = 3, pods = 40000, iters = 200;
        bool md = false;
        enum cluster_policy pols[8] = { CLUSTER_POLICY_BINPACK };
        unsigned n_pols = 1;
        for (int i = 1; i < argc; i++) {
                if (streq(argv[i], "--policy") && i + 1 < argc) {
                        n_pols = 0;
                        char *s = argv[++i];
                        while (*s && n_pols < 8) {
                                char tmp[32];
                                size_t l = strcspn(s, ",");
                                strnscpy(tmp, sizeof tmp, s, MIN(l, sizeof tmp - 1));
                                if (cluster_policy_from_name(tmp, &pols[n_pols]) == 0)
                                        n_pols++;
                                s += l + (s[l] == ',');
                        }
                        if (!n_pols)
                                pols[n_pols++] = CLUSTER_POLICY_BINPACK;
                } else if (streq(argv[i], "--markdown"))
                        md = true;
                else if (streq(argv[i], "--pods") && i + 1 < argc)
                        (void)parse_uint(argv[++i], 10000000, &pods);
                else if (streq(argv[i], "--iterations") && i + 1 < argc)
                        (void)parse_uint(argv[++i], 1000000, &iters);
                else if (streq(argv[i], "--nodes") && i + 1 < argc) {
                        n_sizes = 0;
                        char *s = argv[++i];
                        while (*s && n_sizes < 8) {
                                char tmp[16];
                                size_t l = strcspn(s, ",");
                                strnscpy(tmp, sizeof tmp, s, MIN(l, sizeof tmp - 1));
                                if (parse_uint(tmp, 1000000, &sizes[n_sizes]) == 0 && sizes[n_sizes] > 0)
                                        n_sizes++;
                                s += l + (s[l] == ',');
                        }
                } else {
                        fprintf(stderr, "usage: sched-bench [--nodes N[,N...]] [--pods P] [--iterations K] [--policy "
                                        "NAME[,NAME...]] "
                                        "[--markdown]\n");
                        return 2;
                }
        }
        if (iters < 1)
                iters = 1;
        if (md) {
                printf("| nodes | pods | heap per node | heap per pod | topologies |");
                for (size_t sh = 0; sh < ELEMENTSOF(shapes); sh++)
                        printf(" %s: filter+prioritize p50 / p99 |", shapes[sh].name);
                printf("\n|---|---|---|---|---|");
                for (size_t sh = 0; sh < ELEMENTSOF(shapes); sh++)
                        printf("---|");
                printf("\n");
        }
        for (unsigned i = 0; i < n_sizes; i++)
                for (unsigned k = 0; k < n_pols; k++)
                        run(sizes[i], pods, iters, md, pols[k]);
        return 0;
}
