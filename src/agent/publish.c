/* SPDX-License-Identifier: Apache-2.0 */
/*
 * publish — the node agent's GPUs on its Node object (publish.h, docs/cluster.md). One thread:
 * an informer on this node only (fieldSelector metadata.name=NODE) tells what is published; the
 * device table's generation tells when health changed; a merge patch sends only what differs. A failed
 * patch is retried with capped backoff; errors are logged once per change of error, not per try.
 * Must never block the agent's loop or touch keys gpuslice does not manage.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "agent/publish.h"
#include "cluster/cluster.h"
#include "kube/kube.h"
#include "labels/labels.h"
#include "metrics/metrics.h"
#include "util/log.h"
#include "util/util.h"

#define PUBLISH_TICK_MS 1000
#define RESEND_SAME_MS 30000 /* the same patch again, at most this often */

/* Label keys outside gpuslice.io/ that the agent sets, hence may remove. */
static const char *const managed_labels[] = {
        "nvidia-gpu-name",
        "nvidia.com/gpu.present",
        "nvidia.com/gpu.product",
        "nvidia.com/gpu.memory",
        "nvidia.com/gpu.count",
        "nvidia.com/gpu.replicas",
        "nvidia.com/gpu.sharing-strategy",
        "nvidia.com/gpu.family",
        "nvidia.com/gpu.compute.major",
        "nvidia.com/gpu.compute.minor",
        "nvidia.com/cuda.driver.major",
        "nvidia.com/cuda.driver.minor",
        "nvidia.com/cuda.driver.rev",
        "nvidia.com/cuda.runtime.major",
        "nvidia.com/cuda.runtime.minor",
        "nvidia.com/cuda.driver-version.major",
        "nvidia.com/cuda.driver-version.minor",
        "nvidia.com/cuda.driver-version.revision",
        "nvidia.com/cuda.driver-version.full",
        "nvidia.com/cuda.runtime-version.major",
        "nvidia.com/cuda.runtime-version.minor",
        "nvidia.com/cuda.runtime-version.full",
};

/* Label keys under these prefixes are the agent's too (the MIG labels; never nvidia.com/mig.config, the
 * user's choice of layout). */
static const char *const managed_prefixes[] = { "gpuslice.io/",
                                                "nvidia.com/mig-",
                                                "nvidia.com/mig.strategy",
                                                "nvidia.com/mig.capable",
                                                "nvidia.com/gpu.multiprocessors",
                                                "nvidia.com/gpu.slices.",
                                                "nvidia.com/gpu.engines." };

static bool label_managed(const char *k) {
        for (size_t i = 0; i < ELEMENTSOF(managed_prefixes); i++)
                if (startswith(k, managed_prefixes[i]))
                        return true;
        for (size_t i = 0; i < ELEMENTSOF(managed_labels); i++)
                if (streq(k, managed_labels[i]))
                        return true;
        return false;
}

static void set_label(json_t *o, const char *k, const char *v) {
        char buf[64];
        labels_sanitize(v, buf, sizeof buf);
        if (buf[0])
                json_object_set_new(o, k, json_string(buf));
}

/* The NFD features text (one name=value per line) into o, a later line replacing an earlier one. */
static void add_lines(json_t *o, char *text) {
        for (char *line = text; line && *line;) {
                char *nl = strchr(line, '\n'), *eq = strchr(line, '=');
                if (nl)
                        *nl = 0;
                if (eq) {
                        *eq = 0;
                        json_object_set_new(o, line, json_string(eq + 1));
                }
                line = nl ? nl + 1 : NULL;
        }
}

/* The replica set GFD's sharing labels describe (-1 none): the only one; with both time-slicing and MPS, the set that
 * keeps the whole-GPU name (the nvidia.com/gpu the labels speak of), else MPS, as NVIDIA's SharingStrategy() prefers
 * MPS when both are given (docs/sharing.md, "Time-slicing and MPS on one node"). */
static int label_set(const struct plugin *p) {
        if (!plugin_replicated(p))
                return -1;
        int keep = plugin_replica_find(p, plugin_resource(p, PLUGIN_WHOLE));
        if (keep >= 0)
                return keep;
        for (unsigned k = 0; k < plugin_replica_sets(p); k++)
                if (plugin_replica_mps(p, k)[0])
                        return (int)k;
        return 0;
}

json_t *publish_labels(const struct topo *t, const bool *healthy, const struct publish_mig *mig) {
        json_t *o = json_object();
        if (!o)
                return NULL;
        char *text = NULL;
        size_t len = 0;
        if (labels_format(t, &text, &len) == 0) {
                add_lines(o, text);
                free(text);
        }
        if (mig && (mig->node || mig->strategy) &&
            labels_format_mig(t, mig->node, mig->strategy, mig->single_profile, &text, &len) == 0) {
                add_lines(o, text);
                free(text);
        }
        /* time-slicing, MPS (timeslice.h): GFD's replicas, sharing-strategy and -SHARED product, of one set */
        int set = mig && mig->plugin ? label_set(mig->plugin) : -1;
        if (set >= 0 &&
            labels_format_sharing(t, plugin_replica_mps(mig->plugin, (unsigned)set)[0] ? "mps" : "time-slicing",
                                  plugin_replica_count(mig->plugin, (unsigned)set),
                                  plugin_replica_count(mig->plugin, (unsigned)set) > 1 &&
                                          !plugin_replica_served(mig->plugin, (unsigned)set)[0],
                                  &text, &len) == 0) {
                add_lines(o, text);
                free(text);
        }
        char v[64];
        set_label(o, "nvidia.com/gpu.present", t->n_gpus ? "true" : "false");
        if (t->driver_version[0]) {
                /* GFD's names: cuda.driver.{major,minor,rev} are the three fields of the driver
                 * version as written ("535.104.05" → 535, 104, 05) */
                char d[80];
                strscpy(d, t->driver_version, sizeof d);
                static const char *const k[] = { "nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor",
                                                 "nvidia.com/cuda.driver.rev" };
                char *p = d;
                for (size_t i = 0; i < ELEMENTSOF(k) && p && *p; i++) {
                        char *dot = strchr(p, '.');
                        if (dot)
                                *dot = 0;
                        set_label(o, k[i], p);
                        p = dot ? dot + 1 : NULL;
                }
        }
        if (t->cuda_version > 0) {
                snprintf(v, sizeof v, "%d", t->cuda_version / 1000);
                set_label(o, "nvidia.com/cuda.runtime.major", v);
                snprintf(v, sizeof v, "%d", (t->cuda_version % 1000) / 10);
                set_label(o, "nvidia.com/cuda.runtime.minor", v);
        }
        unsigned ok = 0, nvl = 0;
        for (unsigned i = 0; i < t->n_gpus; i++) {
                ok += healthy[i];
                for (unsigned j = i + 1; j < t->n_gpus; j++)
                        nvl += t->link[i][j].nvlinks > 0;
        }
        snprintf(v, sizeof v, "%u", ok);
        set_label(o, "gpuslice.io/gpu.healthy", v);
        set_label(o, "gpuslice.io/nvlink", nvl ? "true" : "false");
        set_label(o, "gpuslice.io/nvswitch", t->nvswitch ? "true" : "false");
        set_label(o, "gpuslice.io/gpus.version", "1");
        return o;
}

json_t *publish_diff(const json_t *node, const json_t *labels, const char *annotation) {
        json_t *meta = json_object_get(node, "metadata");
        json_t *have_l = json_object_get(meta, "labels"), *have_a = json_object_get(meta, "annotations");
        json_t *pl = json_object(), *pa = json_object();
        if (!pl || !pa) {
                json_decref(pl);
                json_decref(pa);
                return NULL;
        }
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)labels, k, v) {
                json_t *h = json_object_get(have_l, k);
                if (!json_is_string(h) || !json_equal(h, v))
                        json_object_set(pl, k, v);
        }
        json_object_foreach(have_l, k, v) if (label_managed(k) && !json_object_get(labels, k))
                json_object_set_new(pl, k, json_null());
        const char *h = json_string_value(json_object_get(have_a, CLUSTER_ANN_GPUS));
        if (annotation && (!h || !streq(h, annotation)))
                json_object_set_new(pa, CLUSTER_ANN_GPUS, json_string(annotation));
        if (!json_object_size(pl) && !json_object_size(pa)) {
                json_decref(pl);
                json_decref(pa);
                return NULL;
        }
        json_t *m = json_object();
        if (json_object_size(pl))
                json_object_set(m, "labels", pl);
        if (json_object_size(pa))
                json_object_set(m, "annotations", pa);
        json_decref(pl);
        json_decref(pa);
        json_t *patch = json_object();
        json_object_set_new(patch, "metadata", m);
        return patch;
}

struct publish {
        struct devices *devices; /* borrowed: what is published, and when (its generation) */
        struct kube_client *client;
        struct kube_informer *inf;
        char node[256];
        char path[512];
        pthread_t thread;
        atomic_bool stop;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool kick;            /* the node changed */
        struct mig_node *mig; /* the MIG side of the labels (a copy; NULL: none) */
        char mig_strategy[16], single_profile[MIG_PROFILE_NAME_MAX];
        bool single_fits;
        struct plugin *plugin; /* the MIG devices' holders (its record, under the table's lock); NULL none */
        /* under lock: */
        struct {
                void (*fn)(void *userdata);
                void *userdata;
        } node_hook[PUBLISH_NODE_HOOKS_MAX]; /* the Node changed (miglayout.c, nvidia.c); fn NULL: a free slot */
        char mig_state[16];                  /* nvidia.com/mig.config.state to publish ("" none) */
        char mig_reason[512];                /* gpuslice.io/mig.config.reason */
        char last_error[KUBE_ERR_MAX + 128];
};

static void node_changed(const json_t *old_obj, const json_t *new_obj, void *u) {
        (void)old_obj, (void)new_obj;
        struct publish *pub = u;
        pthread_mutex_lock(&pub->lock);
        pub->kick = true;
        pthread_cond_signal(&pub->cond);
        /* under the lock: once publish_off_node_change returned, no call of that hook is in flight */
        for (unsigned k = 0; k < PUBLISH_NODE_HOOKS_MAX; k++)
                if (pub->node_hook[k].fn)
                        pub->node_hook[k].fn(pub->node_hook[k].userdata);
        pthread_mutex_unlock(&pub->lock);
}

int publish_on_node_change(struct publish *pub, void (*fn)(void *userdata), void *userdata) {
        int r = -ENOSPC;
        if (!fn)
                return -EINVAL;
        pthread_mutex_lock(&pub->lock);
        for (unsigned k = 0; k < PUBLISH_NODE_HOOKS_MAX && r < 0; k++)
                if (!pub->node_hook[k].fn) {
                        pub->node_hook[k].fn = fn;
                        pub->node_hook[k].userdata = userdata;
                        r = 0;
                }
        pthread_mutex_unlock(&pub->lock);
        return r;
}

void publish_off_node_change(struct publish *pub, void (*fn)(void *userdata), void *userdata) {
        pthread_mutex_lock(&pub->lock);
        for (unsigned k = 0; k < PUBLISH_NODE_HOOKS_MAX; k++)
                if (pub->node_hook[k].fn == fn && pub->node_hook[k].userdata == userdata)
                        pub->node_hook[k].fn = NULL;
        pthread_mutex_unlock(&pub->lock);
}

int publish_node_label(struct publish *pub, const char *key, char *buf, size_t len) {
        json_t *node = kube_informer_get(pub->inf, pub->node);
        if (!node)
                return -ENOENT;
        const char *v =
                json_string_value(json_object_get(json_object_get(json_object_get(node, "metadata"), "labels"), key));
        snprintf(buf, len, "%s", v ? v : "");
        json_decref(node);
        return 0;
}

void publish_set_mig_state(struct publish *pub, const char *state, const char *reason) {
        pthread_mutex_lock(&pub->lock);
        strscpy(pub->mig_state, state ? state : "", sizeof pub->mig_state);
        strscpy(pub->mig_reason, reason ? reason : "", sizeof pub->mig_reason);
        pub->kick = true;
        pthread_cond_signal(&pub->cond);
        pthread_mutex_unlock(&pub->lock);
}

/* The layout state into the wanted labels and, when it differs from the node's, the reason annotation into
 * the patch (made when there is none). */
static void add_mig_state(struct publish *pub, const json_t *node, json_t *labels, json_t **patch) {
        char state[sizeof pub->mig_state], reason[sizeof pub->mig_reason];
        pthread_mutex_lock(&pub->lock);
        strscpy(state, pub->mig_state, sizeof state);
        strscpy(reason, pub->mig_reason, sizeof reason);
        pthread_mutex_unlock(&pub->lock);
        if (!state[0])
                return;
        const json_t *l = json_object_get(json_object_get(node, "metadata"), "labels");
        const char *have_s = json_string_value(json_object_get(l, PUBLISH_MIG_STATE_LABEL));
        const json_t *a = json_object_get(json_object_get(node, "metadata"), "annotations");
        const char *have_r = json_string_value(json_object_get(a, PUBLISH_MIG_REASON_ANNOTATION));
        bool state_differs = !have_s || !streq(have_s, state);
        bool reason_differs = reason[0] ? !have_r || !streq(have_r, reason) : have_r != NULL;
        json_object_set_new(labels, PUBLISH_MIG_STATE_LABEL, json_string(state));
        if (!state_differs && !reason_differs)
                return;
        if (!*patch)
                *patch = json_pack("{s:{}}", "metadata");
        json_t *m = json_object_get(*patch, "metadata");
        if (!m)
                return;
        if (state_differs) {
                if (!json_object_get(m, "labels"))
                        json_object_set_new(m, "labels", json_object());
                json_object_set_new(json_object_get(m, "labels"), PUBLISH_MIG_STATE_LABEL, json_string(state));
        }
        if (reason_differs) {
                if (!json_object_get(m, "annotations"))
                        json_object_set_new(m, "annotations", json_object());
                json_object_set_new(json_object_get(m, "annotations"), PUBLISH_MIG_REASON_ANNOTATION,
                                    reason[0] ? json_string(reason) : json_null());
        }
}

/* The table's MIG devices into the annotation's GPUs (by NVML index), each with its holder per the
 * plugin's record. Caller holds the table's lock. */
static void fill_mig(const struct publish *pub, struct cluster_node_info *info) {
        const struct devices *d = pub->devices;
        struct plugin_usage use = { 0 };
        if (pub->plugin)
                plugin_usage(pub->plugin, &use);
        for (unsigned i = 0; i < devices_count(d); i++) {
                const struct device_info *x = devices_info(d, i);
                if (x->index < 0 || (unsigned)x->index >= info->n_gpus)
                        continue;
                struct cluster_gpu_info *g = &info->gpu[x->index];
                if (x->kind == DEVICE_GPU) {
                        g->mig = g->mig || x->mig_mode;
                        continue;
                }
                if (g->n_mig >= CLUSTER_MIG_MAX)
                        continue;
                struct cluster_mig_info *m = &g->mig_dev[g->n_mig++];
                m->index = (unsigned)x->mig_index;
                strscpy(m->uuid, x->id, sizeof m->uuid);
                strscpy(m->profile, x->profile, sizeof m->profile);
                m->mem_mib = (uint32_t)MIN(x->memory_total >> 20, (uint64_t)UINT32_MAX);
                m->healthy = devices_healthy(d, i);
                const struct state_alloc *a = pub->plugin ? state_find(plugin_record(pub->plugin),
                                                                       plugin_device_resource(pub->plugin, i), x->id)
                                                          : NULL;
                if (a && a->pod_name[0])
                        cluster_mig_holder(a->pod_namespace, a->pod_name, m->holder, sizeof m->holder);
                else if (use.frac & (1ULL << i)) /* shared in fractions: not free for the extender's count */
                        strscpy(m->holder, CLUSTER_MIG_SHARED, sizeof m->holder);
        }
}

/* The replicated GPUs (time-slicing, MPS: plugin_set_replicas) into the annotation's GPUs: their mode, replica
 * count and replicas held per the plugin's record. Caller holds the table's lock. */
static void fill_sharing(const struct publish *pub, struct cluster_node_info *info) {
        uint64_t rep = pub->plugin ? plugin_replicated(pub->plugin) : 0;
        if (!rep)
                return;
        struct plugin_usage use = { 0 };
        plugin_usage(pub->plugin, &use);
        /* the node's replica resource (what an older extender reads for every replicated GPU): the set keeping the
         * whole-GPU name, else the first set; each GPU's own mode is its `sharing`, its own resource its
         * `replica_resource` (written where it differs from the node's: the extender counts a GPU's replicas
         * against its own resource only) */
        int keep = plugin_replica_find(pub->plugin, plugin_resource(pub->plugin, PLUGIN_WHOLE));
        strscpy(info->replica_resource, plugin_replica_resource(pub->plugin, keep >= 0 ? (unsigned)keep : 0),
                sizeof info->replica_resource);
        const struct devices *d = pub->devices;
        for (unsigned i = 0; i < devices_count(d) && i < 64; i++) {
                const struct device_info *x = devices_info(d, i);
                if (!(rep >> i & 1) || x->kind != DEVICE_GPU || x->index < 0 || (unsigned)x->index >= info->n_gpus)
                        continue;
                struct cluster_gpu_info *g = &info->gpu[x->index];
                unsigned set = (unsigned)plugin_replica_set_of(pub->plugin, i);
                snprintf(g->sharing, sizeof g->sharing, "%s",
                         plugin_replica_mps(pub->plugin, set)[0] ? CLUSTER_SHARING_MPS : CLUSTER_SHARING_TIMESLICE);
                strscpy(g->replica_resource, plugin_replica_resource(pub->plugin, set), sizeof g->replica_resource);
                g->replicas = plugin_replica_count(pub->plugin, set);
                g->held = MIN((unsigned)use.rep[i], g->replicas);
        }
}

/* What should be published now: labels and annotation from the device table's inventory and health. */
static int wanted(struct publish *pub, json_t **ret_labels, char **ret_ann) {
        struct topo *t = malloc(sizeof *t);
        bool healthy[TOPO_MAX_GPUS] = { false };
        char reasons[TOPO_MAX_GPUS][96];
        const char *reason[TOPO_MAX_GPUS];
        if (!t)
                return -ENOMEM;
        struct devices *d = pub->devices;
        *t = *devices_topo(d);
        devices_lock(d);
        for (unsigned i = 0; i < t->n_gpus; i++) {
                int k = t->gpu[i].uuid[0] ? devices_find(d, t->gpu[i].uuid) : -1;
                healthy[i] = k >= 0 && devices_healthy(d, (unsigned)k);
                strscpy(reasons[i], k < 0 ? "not usable" : devices_reason(d, (unsigned)k), sizeof reasons[i]);
                reason[i] = reasons[i];
        }
        struct cluster_node_info *info = malloc(sizeof *info);
        int r = info ? cluster_node_from_topo(t, healthy, reason, info) : -ENOMEM;
        if (r >= 0) {
                fill_mig(pub, info);
                fill_sharing(pub, info);
                strscpy(info->mig_strategy, pub->mig_strategy, sizeof info->mig_strategy);
        }
        devices_unlock(d);
        if (r >= 0)
                r = cluster_node_encode(info, ret_ann);
        free(info);
        if (r >= 0) {
                struct publish_mig pm = { pub->mig, pub->mig_strategy[0] ? pub->mig_strategy : NULL,
                                          pub->single_fits ? pub->single_profile : NULL, pub->plugin };
                *ret_labels = publish_labels(t, healthy, &pm);
                if (!*ret_labels) {
                        free(*ret_ann);
                        r = -ENOMEM;
                }
        }
        free(t);
        return r;
}

static void note_error(struct publish *pub, const char *what) {
        if (streq(pub->last_error, what))
                return;
        strscpy(pub->last_error, what, sizeof pub->last_error);
        if (what[0])
                log_warn("cannot publish the node", "node=%s error=\"%s\"", pub->node, what);
}

static struct metrics_counter *failures(const char *reason) {
        return metrics_counter_get("gpuslice_node_publish_failures_total",
                                   "Failed attempts to publish the node's GPUs on its Node object, by reason: watch "
                                   "(the Node cannot be read), no-node (no Node of the agent's node name: see "
                                   "--node-name), patch (the patch was refused).",
                                   "reason", reason);
}

/* A failed attempt: counted (gpuslice_node_publish_failures_total, by reason) every time, logged
 * once per change of error. */
static void failed(struct publish *pub, const char *reason, const char *what) {
        metrics_counter_add(failures(reason), 1);
        note_error(pub, what);
}

/* One pass: 0 when in step (or patched), -EAGAIN to retry later. */
static int sync_once(struct publish *pub, char **last_sent, char **last_sent_from, uint64_t *last_sent_ms) {
        if (!kube_informer_synced(pub->inf)) {
                char e[KUBE_ERR_MAX + 256];
                kube_informer_last_error(pub->inf, e, sizeof e);
                if (e[0])
                        failed(pub, "watch", e);
                return -EAGAIN;
        }
        json_t *node = kube_informer_get(pub->inf, pub->node);
        if (!node) {
                failed(pub, "no-node",
                       "no Node object of this name (yet): is it the Node's name? (--node-name, kube.node-name, "
                       "$NODE_NAME)");
                return -EAGAIN;
        }
        json_t *labels = NULL;
        char *ann = NULL;
        int r = wanted(pub, &labels, &ann);
        if (r < 0) {
                json_decref(node);
                return r;
        }
        json_t *patch = publish_diff(node, labels, ann);
        add_mig_state(pub, node, labels, &patch);
        const char *rv = json_string_value(json_object_get(json_object_get(node, "metadata"), "resourceVersion"));
        char *body = patch ? json_dumps(patch, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        r = 0;
        uint64_t now = monotonic_ms();
        if (body && *last_sent && streq(*last_sent, body) &&
            ((*last_sent_from && rv && streq(*last_sent_from, rv)) || now - *last_sent_ms < RESEND_SAME_MS)) {
                /* sent already: the watch has not brought the new version yet, or the server does
                 * not keep what we send (a webhook rewriting it): do not hammer it */
                r = -EAGAIN;
        } else if (body) {
                struct kube_error e;
                r = kube_request(pub->client, KUBE_PATCH_MERGE, pub->path, body, NULL, &e);
                if (r < 0) {
                        char msg[KUBE_ERR_MAX + 256];
                        snprintf(msg, sizeof msg, "PATCH %.200s: %.64s (HTTP %ld): %.300s", pub->path, strerror(-r),
                                 e.http, e.message);
                        failed(pub, "patch", msg);
                        r = -EAGAIN;
                } else {
                        note_error(pub, "");
                        log_info("node published", "node=%s patch_bytes=%zu", pub->node, strlen(body));
                        free(*last_sent);
                        free(*last_sent_from);
                        *last_sent = TAKE_PTR(body);
                        *last_sent_from = rv ? strdup(rv) : NULL;
                        *last_sent_ms = now;
                }
        } else
                note_error(pub, "");
        free(body);
        json_decref(patch);
        json_decref(labels);
        free(ann);
        json_decref(node);
        return r;
}

/* What the replicated GPUs' held counts are now, as one number (0: none replicated): a change republishes
 * (Allocate does not bump the table's generation). */
static uint64_t replica_sig(struct publish *pub) {
        if (!pub->plugin || !plugin_replicated(pub->plugin))
                return 0;
        struct plugin_usage use = { 0 };
        devices_lock(pub->devices);
        plugin_usage(pub->plugin, &use);
        devices_unlock(pub->devices);
        uint64_t h = 1469598103934665603ULL;
        for (unsigned i = 0; i < DEVICES_MAX; i++)
                h = (h ^ use.rep[i]) * 1099511628211ULL;
        return h;
}

static void *publish_main(void *u) {
        struct publish *pub = u;
        uint64_t seen_gen = UINT64_MAX;
        unsigned attempt = 0;
        char *last_sent = NULL, *last_from = NULL;
        uint64_t last_sent_ms = 0;
        uint64_t retry_at = 0, seen_sig = 0;
        while (!atomic_load(&pub->stop)) {
                uint64_t now = monotonic_ms();
                uint64_t gen = devices_generation(pub->devices), sig = replica_sig(pub);
                pthread_mutex_lock(&pub->lock);
                bool kick = pub->kick || sig != seen_sig;
                seen_sig = sig;
                pub->kick = false;
                pthread_mutex_unlock(&pub->lock);
                if ((kick || gen != seen_gen || retry_at) && now >= retry_at) {
                        int r = sync_once(pub, &last_sent, &last_from, &last_sent_ms);
                        if (r == -EAGAIN) {
                                uint32_t rnd = 0;
                                (void)!getrandom(&rnd, sizeof rnd, GRND_NONBLOCK);
                                retry_at = now + kube_backoff_ms(attempt, 500, 30000, rnd);
                                if (attempt < 30)
                                        attempt++;
                        } else {
                                retry_at = 0;
                                attempt = 0;
                                seen_gen = gen;
                        }
                }
                struct timespec ts = timespec_after_ms(CLOCK_REALTIME, PUBLISH_TICK_MS / 4);
                pthread_mutex_lock(&pub->lock);
                if (!pub->kick && !atomic_load(&pub->stop))
                        pthread_cond_timedwait(&pub->cond, &pub->lock, &ts);
                pthread_mutex_unlock(&pub->lock);
        }
        free(last_sent);
        free(last_from);
        return NULL;
}

/* The MIG side of the labels and annotation, copied. */
static void keep_mig(struct publish *pub, const struct publish_mig *mig) {
        if (!mig)
                return;
        if (mig->node && (pub->mig = malloc(sizeof *pub->mig)))
                *pub->mig = *mig->node;
        if (mig->strategy)
                strscpy(pub->mig_strategy, mig->strategy, sizeof pub->mig_strategy);
        pub->plugin = mig->plugin;
        if (mig->single_profile) {
                strscpy(pub->single_profile, mig->single_profile, sizeof pub->single_profile);
                pub->single_fits = true;
        }
}

struct publish *publish_start(const struct gpuslice_config *cfg, struct devices *d, const struct publish_mig *mig) {
        struct kube_config kc;
        struct gs_error err = { 0 };
        int r;
        if (cfg->kubeconfig[0])
                r = kube_config_load(cfg->kubeconfig, NULL, &kc, &err);
        else
                r = kube_config_in_cluster(NULL, &kc, &err);
        if (r == -ENOENT && !cfg->kubeconfig[0]) {
                log_info("no Kubernetes API server configured (no --kubeconfig, not in a pod): the node is not "
                         "published, working node-local");
                return NULL;
        }
        if (r < 0) {
                log_error_errno(r, "cannot read the API server configuration: the node is not published",
                                "error=\"%s\"", err.message);
                return NULL;
        }
        struct publish *pub = calloc(1, sizeof *pub);
        if (!pub) {
                kube_config_done(&kc);
                return NULL;
        }
        pub->devices = d;
        keep_mig(pub, mig);
        pthread_mutex_init(&pub->lock, NULL);
        pthread_cond_init(&pub->cond, NULL);
        /* kube.node-name (--node-name), else $NODE_NAME (the DaemonSet's downward API), else the host name */
        const char *nn = cfg->node_name[0] ? cfg->node_name : secure_getenv("NODE_NAME");
        if (nn && nn[0])
                strscpy(pub->node, nn, sizeof pub->node);
        else if (gethostname(pub->node, sizeof pub->node - 1) < 0)
                pub->node[0] = 0;
        char esc[800], sel[900];
        r = kube_client_new(&kc, &pub->client);
        if (r >= 0)
                kube_client_set_cancel(pub->client, &pub->stop); /* SIGTERM never waits on a hung server */
        const char *source = kc.source ? kc.source : "?";
        if (r >= 0 && (!pub->node[0] || !kube_escape(pub->node, esc, sizeof esc)))
                r = -EINVAL;
        if (r >= 0) {
                snprintf(pub->path, sizeof pub->path, "/api/v1/nodes/%.400s", esc);
                snprintf(sel, sizeof sel, "metadata.name=%s", pub->node);
                struct kube_informer_handlers h = { .changed = node_changed, .userdata = pub };
                r = kube_informer_new(pub->client, "/api/v1/nodes", NULL, sel, kube_slim_node, &h, &pub->inf);
        }
        if (r >= 0)
                r = kube_informer_start(pub->inf);
        /* every reason at 0 from the start: a failure is a rise of the counter, not a new series */
        (void)failures("watch"), (void)failures("no-node"), (void)failures("patch");
        if (r >= 0 && (r = -pthread_create(&pub->thread, NULL, publish_main, pub)) == 0)
                log_info("publishing the node to the API server", "node=%s server=%s config=%s", pub->node, kc.server,
                         source);
        kube_config_done(&kc);
        if (r < 0) {
                log_error_errno(r, "cannot start publishing the node", "node=%s", pub->node);
                pub->inf = kube_informer_free(pub->inf);
                pub->client = kube_client_free(pub->client);
                pthread_cond_destroy(&pub->cond);
                pthread_mutex_destroy(&pub->lock);
                free(pub->mig);
                free(pub);
                return NULL;
        }
        return pub;
}

struct kube_client *publish_client(const struct publish *pub) {
        return pub ? pub->client : NULL;
}

const char *publish_node(const struct publish *pub) {
        return pub ? pub->node : NULL;
}

struct publish *publish_stop(struct publish *pub) {
        if (!pub)
                return NULL;
        pthread_mutex_lock(&pub->lock);
        atomic_store(&pub->stop, true);
        pthread_cond_signal(&pub->cond);
        pthread_mutex_unlock(&pub->lock);
        pthread_join(pub->thread, NULL);
        kube_informer_free(pub->inf);
        kube_client_free(pub->client);
        pthread_cond_destroy(&pub->cond);
        pthread_mutex_destroy(&pub->lock);
        free(pub->mig);
        free(pub);
        return NULL;
}
