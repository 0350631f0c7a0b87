/* SPDX-License-Identifier: Apache-2.0 */
/* inspect-kube-bench — the Kubernetes client's costs that do not need a server (bench/inspect.sh
 * runs the whole `gpuslice inspect` against one):
 *   1. watch events decoded per second: N MODIFIED events of realistic pods (labels, annotations,
 *      managedFields, status: ~3 KiB each, as kube-apiserver 1.20 sends them) fed to the decoder in
 *      16 KiB chunks, each event slimmed as the informer does;
 *   2. informer memory per cached pod: the informer's cache (a jansson object keyed "ns/name"
 *      holding kube_slim_pod's output) for P pods, heap bytes measured with mallinfo2 before and
 *      after; the same for whole pods (what a cache without slimming would hold).
 *   inspect-kube-bench [--events N] [--pods P] [--markdown] */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/kube.h"
#include "util/util.h"

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A pod as the API sends it: enough of everything kubectl shows. */
static json_t *make_pod(unsigned i) {
        char name[64], node[32], uid[64];
        snprintf(name, sizeof name, "job-%06u-worker", i);
        snprintf(node, sizeof node, "gpu-node-%04u", i % 1000);
        snprintf(uid, sizeof uid, "6a1f%04x-1b2c-4d5e-8f90-%012u", i & 0xffff, i);
        json_t *p = json_pack(
                "{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:s,s:{s:s,s:s,s:s},s:{s:s,s:s,s:s},s:[{s:s,s:s,s:s,s:s,s:{s:{}}}]},"
                "s:{s:s,s:[{s:s,s:s,s:[s,s,s],s:{s:{s:s,s:s,s:s,s:s},s:{s:s,s:s}},s:[{s:s,s:s}],s:[{s:s,s:i}]}],"
                "s:s,s:s,s:s,s:i},"
                "s:{s:s,s:[{s:s,s:s,s:s},{s:s,s:s,s:s}],s:s,s:s,s:s,s:[{s:s,s:b,s:i,s:s,s:s}]}}",
                "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace", "ml-team", "uid", uid,
                "resourceVersion", "123456789", "creationTimestamp", "2026-11-23T10:00:00Z", "labels", "app", "trainer",
                "job-name", name, "controller-uid", uid, "annotations", "gpuslice.io/assignment",
                "{\"v\":1,\"node\":\"gpu-node-0001\",\"time\":1,\"containers\":[{\"name\":\"main\",\"gpus\":[3],"
                "\"core\":30,"
                "\"mem\":4096}]}",
                "gpuslice.io/assigned", "true", "kubectl.kubernetes.io/last-applied-configuration",
                "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"annotations\":{},\"name\":\"x\"},\"spec\":{}}",
                "managedFields", "manager", "kubectl", "operation", "Update", "apiVersion", "v1", "fieldsType",
                "FieldsV1", "fieldsV1", "f:metadata", "spec", "nodeName", node, "containers", "name", "main", "image",
                "registry.example.com/ml/trainer:2026.11", "command", "python3", "-m", "train", "resources", "limits",
                "gpuslice.io/gpu-core", "30", "gpuslice.io/gpu-memory", "16", "cpu", "4", "memory", "16Gi", "requests",
                "cpu", "2", "memory", "8Gi", "env", "name", "EPOCHS", "value", "100", "ports", "name", "metrics",
                "containerPort", 9090, "restartPolicy", "Never", "schedulerName", "default-scheduler",
                "serviceAccountName", "default", "terminationGracePeriodSeconds", 30, "status", "phase", "Running",
                "conditions", "type", "Ready", "status", "True", "lastTransitionTime", "2026-11-23T10:00:05Z", "type",
                "PodScheduled", "status", "True", "lastTransitionTime", "2026-11-23T10:00:01Z", "hostIP", "10.0.3.17",
                "podIP", "10.244.3.17", "startTime", "2026-11-23T10:00:01Z", "containerStatuses", "name", "main",
                "ready", 1, "restartCount", 0, "image", "registry.example.com/ml/trainer:2026.11", "containerID",
                "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
        return p;
}

struct dec_ctx {
        uint64_t n;
        size_t kept;
};

static int on_event(const struct kube_event *ev, void *u) {
        struct dec_ctx *c = u;
        json_t *s = kube_slim_pod(ev->object);
        c->kept += s != NULL;
        json_decref(s);
        c->n++;
        return 0;
}

static size_t heap(void) {
        struct mallinfo2 m = mallinfo2();
        return m.uordblks + m.hblkhd;
}

static json_t *deep_copy(json_t *pod) {
        return json_deep_copy(pod);
}

/* Heap bytes per pod of a cache (namespace/name → COPY(pod)) of the PODS pods FULL. */
static double cache_cost(json_t **full, unsigned pods, json_t *(*copy)(json_t *pod)) {
        size_t h0 = heap();
        json_t *cache = json_object();
        for (unsigned i = 0; i < pods; i++) {
                char key[128];
                snprintf(key, sizeof key, "ml-team/job-%06u-worker", i);
                json_object_set_new(cache, key, copy(full[i]));
        }
        double per_pod = (double)(heap() - h0) / pods;
        json_decref(cache);
        return per_pod;
}

int main(int argc, char **argv) {
        unsigned events = 100000, pods = 20000;
        bool md = false;
        for (int i = 1; i < argc; i++) {
                if (streq(argv[i], "--events") && i + 1 < argc)
                        events = (unsigned)strtoul(argv[++i], NULL, 10);
                else if (streq(argv[i], "--pods") && i + 1 < argc)
                        pods = (unsigned)strtoul(argv[++i], NULL, 10);
                else if (streq(argv[i], "--markdown"))
                        md = true;
        }
        /* 1. decode */
        size_t cap = 0, len = 0;
        char *stream = NULL;
        const unsigned distinct = 1000;
        for (unsigned i = 0; i < distinct; i++) {
                json_t *p = make_pod(i);
                json_t *ev = json_pack("{s:s,s:o}", "type", "MODIFIED", "object", p);
                char *line = json_dumps(ev, JSON_COMPACT);
                json_decref(ev);
                size_t n = strlen(line);
                if (len + n + 2 > cap) {
                        cap = (len + n + 2) * 2;
                        stream = realloc(stream, cap);
                }
                memcpy(stream + len, line, n);
                len += n;
                stream[len++] = '\n';
                free(line);
        }
        struct dec_ctx dc = { 0 };
        struct kube_watch_decoder d;
        kube_watch_decoder_init(&d, 0, on_event, &dc);
        double t0 = now_s();
        uint64_t bytes = 0;
        for (unsigned round = 0; dc.n < events; round++)
                for (size_t off = 0; off < len && dc.n < events; off += 16384) {
                        size_t n = MIN((size_t)16384, len - off);
                        if (kube_watch_decoder_feed(&d, stream + off, n) < 0)
                                return 1;
                        bytes += n;
                }
        double dt = now_s() - t0;
        kube_watch_decoder_done(&d);
        double evs = (double)dc.n / dt;

        /* 2. cache memory */
        json_t **full = calloc(pods, sizeof *full);
        for (unsigned i = 0; i < pods; i++)
                full[i] = make_pod(i);
        double per_slim = cache_cost(full, pods, kube_slim_pod);
        /* whole pods: what they cost already (built above), measured the same way */
        double per_full = cache_cost(full, pods, deep_copy);
        for (unsigned i = 0; i < pods; i++)
                json_decref(full[i]);
        free(full);
        free(stream);

        if (md) {
                printf("| measure | value |\n|---|---|\n");
                printf("| watch events decoded + slimmed per second (%u events of %.1f KiB, 16 KiB chunks) | %.0f |\n",
                       (unsigned)dc.n, (double)len / distinct / 1024, evs);
                printf("| watch stream throughput | %.1f MiB/s |\n", (double)bytes / dt / (1 << 20));
                printf("| informer cache, heap per pod (slim, %u pods) | %.0f B |\n", pods, per_slim);
                printf("| same cache holding whole pods (no slimming) | %.0f B |\n", per_full);
        } else
                printf("events=%u seconds=%.3f events_per_s=%.0f mib_per_s=%.1f slim_bytes_per_pod=%.0f "
                       "full_bytes_per_pod=%.0f\n",
                       (unsigned)dc.n, dt, evs, (double)bytes / dt / (1 << 20), per_slim, per_full);
        return dc.kept == dc.n ? 0 : 1;
}
