/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvidia — NVIDIA's device plugin config in the agent (--nvidia-config, nvconfig.h): the file, or the entry of a
 * mounted ConfigMap directory the node label nvidia.com/device-plugin.config names (read at start from the API
 * server), applied over gpuslice's own config; its replicated GPUs handed to the plugin (timeslice.h).
 *
 * With a directory the agent then watches, as NVIDIA's config-manager sidecar does: the label (the publisher's
 * informer on this node, publish_on_node_change) and the directory's files (inotify: the kubelet swaps a
 * ConfigMap mount's ..data link, an edit writes a file in place). When the label, or the default rule once it is
 * removed, names another entry, or the entry's bytes change, the new entry is checked as the start checks it (the
 * file parsed over a freshly built config, its GPUs against the table) and applied by the agent's clean restart:
 * the loop stops, every part's stop runs (the record and journal written) and agent_run re-executes the agent,
 * which reads the label again and carries every allocation over as after any restart. An entry that is missing or
 * refused is logged once (entry, key, why) and the running config kept serving: a bad label never stops a running
 * agent (at start it does: there is no config to keep).
 * Runs on the loop thread (the publisher's thread only posts). Must never: start with a file that had a key it
 * refused, replicate a GPU the file did not name, or restart the agent for an entry it has not checked.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/node-internal.h"
#include "agent/publish.h"
#include "kube/kube.h"
#include "nvconfig/nvconfig.h"
#include "util/log.h"
#include "util/util.h"

#define WATCH_SETTLE_MS 100 /* a ConfigMap update is a burst of events in the directory: acted on once */

/* The entry in use and what watches for another (--nvidia-config DIR only). Loop thread only. */
struct nvidia_watch {
        char label[256];                  /* the label's value the entry was chosen by ("" none) */
        char path[CONFIG_PATH_MAX + 256]; /* the entry applied (DIR/NAME) */
        char *text;                       /* its bytes as applied */
        size_t len;
        char refused[640];      /* the last refusal logged ("" none): said once, not at every change of the Node */
        struct loop_event kick; /* the Node changed (posted by the publisher's thread) */
        bool kick_on, hooked;
        int inofd;
        struct loop_io io;
        struct loop_timer settle;
        bool io_on, settle_on;
};

/* The node label's value from the API server into buf ("" when it has none or there is no API server). */
static void node_label(const struct gpuslice_config *cfg, char *buf, size_t len) {
        struct kube_config kc;
        struct gs_error err = { 0 };
        buf[0] = 0;
        int r = cfg->kubeconfig[0] ? kube_config_load(cfg->kubeconfig, NULL, &kc, &err)
                                   : kube_config_in_cluster(NULL, &kc, &err);
        if (r < 0) {
                log_info("no API server: the NVIDIA config entry is the default one", "error=\"%s\"", err.message);
                return;
        }
        char node[CONFIG_NODE_NAME_MAX] = "", esc[800], path[900];
        const char *nn = cfg->node_name[0] ? cfg->node_name : secure_getenv("NODE_NAME");
        if (nn && nn[0])
                strscpy(node, nn, sizeof node);
        else if (gethostname(node, sizeof node - 1) < 0)
                node[0] = 0;
        struct kube_client *c = NULL;
        json_t *obj = NULL;
        struct kube_error ke = { 0 };
        if (node[0] && kube_escape(node, esc, sizeof esc) && kube_client_new(&kc, &c) >= 0) {
                kube_client_set_timeout(c, 10000);
                snprintf(path, sizeof path, "/api/v1/nodes/%.700s", esc);
                r = kube_request(c, KUBE_GET, path, NULL, &obj, &ke);
                if (r < 0)
                        log_warn_errno(r, "cannot read the Node: the NVIDIA config entry is the default one", "node=%s",
                                       node);
        }
        const json_t *v = json_object_get(json_object_get(json_object_get(obj, "metadata"), "labels"), NVCONFIG_LABEL);
        if (json_is_string(v))
                strscpy(buf, json_string_value(v), len);
        json_decref(obj);
        kube_client_free(c);
        kube_config_done(&kc);
}

int node_nvidia_config(struct node *n) {
        if (!n->cfg.nvidia_config[0])
                return 0;
        char path[CONFIG_PATH_MAX + 256], label[256] = "";
        struct gs_error err = { 0 };
        struct stat st;
        int r = stat(n->cfg.nvidia_config, &st) < 0 ? -errno : 0;
        if (r < 0)
                return log_error_errno(r, "cannot read the NVIDIA config", "path=%s", n->cfg.nvidia_config);
        if (S_ISDIR(st.st_mode)) {
                node_label(&n->cfg, label, sizeof label);
                r = nvconfig_select(n->cfg.nvidia_config, label, n->cfg.nvidia_config_default, path, sizeof path, &err);
                if (r < 0)
                        return log_error_errno(r, "no NVIDIA config for this node", "error=\"%s\"", err.message);
        } else
                snprintf(path, sizeof path, "%s", n->cfg.nvidia_config);
        struct nvconfig *nv = calloc(1, sizeof *nv);
        struct nvidia_watch *w = S_ISDIR(st.st_mode) ? calloc(1, sizeof *w) : NULL;
        if (!nv || (S_ISDIR(st.st_mode) && !w)) {
                free(nv);
                free(w);
                return log_error_errno(-ENOMEM, "out of memory");
        }
        _cleanup_(freep) char *text = NULL;
        size_t len = 0;
        r = nvconfig_read(path, &text, &len, &err); /* its bytes kept: what the watch compares with */
        if (r >= 0)
                r = nvconfig_parse(text, len, path, &n->cfg, nv, &err);
        if (r < 0) {
                free(nv);
                free(w);
                return log_error_errno(r, "NVIDIA config refused", "error=\"%s\"", err.message);
        }
        for (unsigned i = 0; i < nv->n_notes; i++)
                log_warn("NVIDIA config: key without an effect in gpuslice", "note=\"%s\"", nv->notes[i]);
        log_info("NVIDIA config applied",
                 "path=%s label=%s time_slicing=%s time_slicing_replicas=%u mps=%s mps_replicas=%u", path,
                 label[0] ? label : "-", nv->ts.sharing ? nv->ts.name : "-", nv->ts.replicas,
                 nv->mps.sharing ? nv->mps.name : "-", nv->mps.replicas);
        n->nvidia = nv;
        if (w) { /* what the watch compares with (node_nvidia_watch_start) */
                strscpy(w->label, label, sizeof w->label);
                strscpy(w->path, path, sizeof w->path);
                w->text = TAKE_PTR(text);
                w->len = len;
                w->inofd = -1;
                n->nvidia_watch = w;
        }
        return 0;
}

/* Is GPU i (table index) named by the replicated resource's devices? */
static bool named(const struct nvconfig_replicas *rep, const struct devices *d, unsigned i, unsigned rank) {
        const struct device_info *x = devices_info(d, i);
        if (rep->all)
                return true;
        if (rep->count)
                return rank < rep->count;
        for (unsigned k = 0; k < rep->n_devices; k++) {
                unsigned idx;
                if (streq(rep->devices[k], x->id) ||
                    (parse_uint(rep->devices[k], 1u << 20, &idx) == 0 && (int)idx == x->index))
                        return true;
        }
        return false;
}

/* The GPUs (table mask) one strategy's devices name; -ENODEV for a GPU named that this node does not have (err).
 * say: log the GPUs in MIG mode left out (at start; a check of another entry stays quiet). */
static int set_mask(const struct nvconfig_replicas *rep, const struct devices *d, bool say, uint64_t *ret,
                    unsigned *ret_n, struct gs_error *err) {
        uint64_t mask = 0;
        unsigned rank = 0, matched = 0;
        /* the table lists GPUs in NVML index order: rank is the GPU's place for `devices: N` */
        for (unsigned i = 0; i < devices_count(d); i++) {
                const struct device_info *x = devices_info(d, i);
                if (x->kind != DEVICE_GPU)
                        continue;
                bool want = named(rep, d, i, rank++);
                if (want && x->mig_mode) {
                        if (say)
                                log_warn("a GPU in MIG mode is not replicated (whole GPUs only): served as its MIG "
                                         "devices",
                                         "id=%s key=%s", x->id, nvconfig_sharing_key(rep->sharing));
                        continue;
                }
                if (want) {
                        mask |= UINT64_C(1) << i;
                        matched++;
                }
        }
        for (unsigned k = 0; k < rep->n_devices; k++) { /* a GPU named that this node does not have */
                bool found = false;
                for (unsigned i = 0; i < devices_count(d) && !found; i++) {
                        struct nvconfig_replicas one = { .n_devices = 1 };
                        strscpy(one.devices[0], rep->devices[k], sizeof one.devices[0]);
                        found = devices_info(d, i)->kind == DEVICE_GPU && named(&one, d, i, 0);
                }
                if (!found)
                        return gs_error_set(err, -ENODEV, "%s.resources[0].devices: this node has no GPU %s",
                                            nvconfig_sharing_key(rep->sharing), rep->devices[k]);
        }
        *ret = mask;
        *ret_n = matched;
        return 0;
}

/* The GPUs (table masks) each strategy of nv replicates, checked against table d as the start checks them: a GPU
 * named that the node does not have, one GPU in both strategies. 0, or -errno with err. */
static int replica_masks(const struct nvconfig *nv, const struct devices *d, bool say, uint64_t mask[2],
                         unsigned matched[2], struct gs_error *err) {
        const struct nvconfig_replicas *sets[2] = { &nv->ts, &nv->mps };
        mask[0] = mask[1] = 0;
        matched[0] = matched[1] = 0;
        for (unsigned k = 0; k < 2; k++) {
                int r = sets[k]->sharing ? set_mask(sets[k], d, say, &mask[k], &matched[k], err) : 0;
                if (r < 0)
                        return r;
        }
        if (mask[0] & mask[1]) { /* a UUID in one list, its index in the other: the file could not tell */
                unsigned i = (unsigned)__builtin_ctzll(mask[0] & mask[1]);
                return gs_error_set(err, -EINVAL,
                                    "sharing.timeSlicing.resources[0].devices and sharing.mps.resources[0].devices "
                                    "both name GPU %s (index %d): one GPU, one mode",
                                    devices_info(d, i)->id, devices_info(d, i)->index);
        }
        return 0;
}

int node_nvidia_replicas(struct node *n) {
        const struct nvconfig *nv = n->nvidia;
        if (!nv)
                return 0;
        const struct nvconfig_replicas *sets[2] = { &nv->ts, &nv->mps };
        uint64_t mask[2];
        unsigned matched[2];
        struct gs_error err = { 0 };
        int r = replica_masks(nv, n->devices, true, mask, matched, &err);
        if (r < 0)
                return log_error_errno(r, "the NVIDIA config does not fit this node's GPUs", "path=%s error=\"%s\"",
                                       nv->source, err.message);
        for (unsigned k = 0; k < 2; k++) {
                const struct nvconfig_replicas *rep = sets[k];
                if (!rep->sharing)
                        continue;
                r = plugin_set_replicas(n->plugin, rep->name, rep->replicas, rep->fail_requests_greater_than_one,
                                        mask[k]);
                if (r < 0)
                        return log_error_errno(r, "cannot replicate the GPUs", "key=%s resource=%s",
                                               nvconfig_sharing_key(rep->sharing), rep->name);
                log_info("replicated GPUs",
                         "sharing=%s resource=%s replicas=%u gpus=%u fail_requests_greater_than_one=%s",
                         nvconfig_sharing_name(rep->sharing), rep->name, rep->replicas, matched[k],
                         rep->fail_requests_greater_than_one ? "true" : "false");
        }
        return 0;
}

int node_nvidia_reload(struct node *n, struct gpuslice_config *c) {
        if (!n->nvidia)
                return 0;
        struct nvconfig *scratch = calloc(1, sizeof *scratch);
        struct gs_error err = { 0 };
        int r = scratch ? nvconfig_load(n->nvidia->source, c, scratch, &err) : -ENOMEM;
        if (r >= 0 &&
            (scratch->ts.sharing != n->nvidia->ts.sharing || scratch->ts.replicas != n->nvidia->ts.replicas ||
             !streq(scratch->ts.name, n->nvidia->ts.name) || scratch->mps.sharing != n->nvidia->mps.sharing ||
             scratch->mps.replicas != n->nvidia->mps.replicas || !streq(scratch->mps.name, n->nvidia->mps.name)))
                log_warn("NVIDIA config: sharing changes only on restart", "path=%s", n->nvidia->source);
        free(scratch);
        if (r < 0)
                return log_error_errno(r, "NVIDIA config reload failed", "error=\"%s\"", err.message);
        return 0;
}

/* ---- the watch (--nvidia-config DIR): the label and the directory ---- */

/* A refusal of the entry the label (or the default rule) names: logged once per reason, the current config kept. */
static void refuse(struct nvidia_watch *w, const char *label, const char *entry, int r, const char *why) {
        char line[sizeof w->refused];
        snprintf(line, sizeof line, "%.250s|%.250s|%.130s", label, entry, why);
        if (streq(line, w->refused))
                return;
        strscpy(w->refused, line, sizeof w->refused);
        log_error_errno(r, "NVIDIA config entry refused: the current config keeps serving",
                        "key=" NVCONFIG_LABEL " label=%s entry=%s current=%s error=\"%s\"", label[0] ? label : "-",
                        entry, w->path, why);
}

/* lint: long — one check of the entry the label names, in order: the label, the entry chosen, its bytes, the
 * config built and the file parsed over it, its GPUs against the table, then the restart; each refusal a line.
 * files: the directory changed (else only the Node did: nothing to do while the label is the same). */
static void check_entry(struct node *n, bool files) {
        struct nvidia_watch *w = n->nvidia_watch;
        char label[sizeof w->label], path[sizeof w->path];
        strscpy(label, w->label, sizeof label);
        if (n->publish && publish_node_label(n->publish, NVCONFIG_LABEL, label, sizeof label) < 0 && !files)
                return;                         /* no Node seen yet: the label as at start */
        if (!files && streq(label, w->label)) { /* another change of the Node (the publisher's own patches too) */
                if (w->refused[0])
                        log_info("NVIDIA config: the label names the entry in use again", "label=%s",
                                 label[0] ? label : "-");
                w->refused[0] = 0;
                return;
        }
        struct gs_error err = { 0 };
        const char *want = label[0] ? label : n->cfg.nvidia_config_default[0] ? n->cfg.nvidia_config_default : "-";
        int r = nvconfig_select(n->cfg.nvidia_config, label, n->cfg.nvidia_config_default, path, sizeof path, &err);
        if (r < 0) {
                refuse(w, label, want, r, err.message);
                return;
        }
        const char *entry = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        _cleanup_(freep) char *text = NULL;
        size_t len = 0;
        r = nvconfig_read(path, &text, &len, &err);
        if (r < 0) {
                refuse(w, label, entry, r, err.message);
                return;
        }
        if (streq(path, w->path) && len == w->len && memcmp(text, w->text, len) == 0) {
                if (w->refused[0])
                        log_info("NVIDIA config: the label names the entry in use again", "entry=%s", entry);
                strscpy(w->label, label, sizeof w->label); /* the same entry by another way (the default) */
                w->refused[0] = 0;
                return;
        }
        _cleanup_(freep) struct gpuslice_config *c = malloc(sizeof *c);
        _cleanup_(freep) struct nvconfig *nv = calloc(1, sizeof *nv);
        if (!c || !nv) {
                refuse(w, label, entry, -ENOMEM, "out of memory");
                return;
        }
        r = config_build(&n->args, CONFIG_DEFAULT_PATH, c, &err);
        if (r < 0) {
                refuse(w, label, entry, r, err.message);
                return;
        }
        uint64_t mask[2];
        unsigned matched[2];
        r = nvconfig_parse(text, len, path, c, nv, &err);
        if (r >= 0)
                r = replica_masks(nv, n->devices, false, mask, matched, &err);
        if (r < 0) {
                refuse(w, label, entry, r, err.message);
                return;
        }
        log_info("NVIDIA config entry changed: starting again to apply it",
                 "key=" NVCONFIG_LABEL " label=%s entry=%s path=%s was=%s time_slicing_replicas=%u mps_replicas=%u",
                 label[0] ? label : "-", entry, path, w->path, nv->ts.replicas, nv->mps.replicas);
        n->reexec = true; /* agent_run: every part stopped (the record written), then the agent again */
        loop_stop(&n->loop);
}

static void on_kick(struct loop_event *e) {
        check_entry(e->userdata, false);
}

static void on_settled(struct loop_timer *t) {
        check_entry(t->userdata, true);
}

static void on_dir(struct loop_io *io, uint32_t events) {
        (void)events;
        struct node *n = io->userdata;
        struct nvidia_watch *w = n->nvidia_watch;
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        bool any = false;
        while (read(w->inofd, buf, sizeof buf) > 0)
                any = true; /* what changed does not matter: the entry is read again */
        if (any)
                (void)loop_timer_start(&w->settle, WATCH_SETTLE_MS); /* re-armed by each burst */
}

/* The publisher's thread, under its lock: post only. */
static void post_kick(void *userdata) {
        struct node *n = userdata;
        (void)loop_event_post(&n->nvidia_watch->kick);
}

int node_nvidia_watch_start(struct node *n) {
        struct nvidia_watch *w = n->nvidia_watch;
        if (!w)
                return 0;
        int r = loop_event_init(&n->loop, &w->kick, on_kick, n);
        if (r < 0)
                return log_error_errno(r, "eventfd failed");
        w->kick_on = true;
        if (n->publish) {
                r = publish_on_node_change(n->publish, post_kick, n);
                if (r < 0)
                        return log_error_errno(r, "cannot watch the Node");
                w->hooked = true;
                post_kick(n); /* the label may have changed since it was read */
        } else
                log_warn("the node label " NVCONFIG_LABEL " is not watched: no API server", "dir=%s",
                         n->cfg.nvidia_config);
        r = loop_timer_init(&n->loop, &w->settle, on_settled, n);
        if (r < 0)
                return log_error_errno(r, "cannot set up a timer");
        w->settle_on = true;
        w->inofd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        r = w->inofd < 0 ? -errno : 0;
        if (r >= 0 && inotify_add_watch(w->inofd, n->cfg.nvidia_config,
                                        IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE) < 0)
                r = -errno;
        if (r >= 0 && (r = loop_io_start(&n->loop, &w->io, w->inofd, EPOLLIN, on_dir, n)) >= 0)
                w->io_on = true;
        if (r < 0) /* the label is still watched: not worth stopping the agent for */
                log_warn_errno(r, "cannot watch the NVIDIA config dir: a change of its files takes effect on restart",
                               "dir=%s", n->cfg.nvidia_config);
        log_info("watching the NVIDIA config entry", "dir=%s label=%s entry=%s files=%s", n->cfg.nvidia_config,
                 w->label[0] ? w->label : "-", w->path, w->io_on ? "yes" : "no");
        return 0;
}

void node_nvidia_watch_stop(struct node *n) {
        struct nvidia_watch *w = n->nvidia_watch;
        if (!w)
                return;
        if (w->hooked && n->publish) /* no post in flight once it returns */
                publish_off_node_change(n->publish, post_kick, n);
        if (w->io_on)
                (void)loop_io_stop(&w->io);
        if (w->settle_on)
                loop_timer_done(&w->settle);
        if (w->inofd >= 0)
                close(w->inofd);
        if (w->kick_on)
                loop_event_done(&w->kick);
        w->hooked = w->io_on = w->settle_on = w->kick_on = false;
        w->inofd = -1;
}

void node_nvidia_free(struct node *n) {
        free(n->nvidia);
        n->nvidia = NULL;
        if (n->nvidia_watch)
                free(n->nvidia_watch->text);
        n->nvidia_watch = (free(n->nvidia_watch), NULL);
}
