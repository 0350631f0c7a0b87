/* SPDX-License-Identifier: Apache-2.0 */
/*
 * publish — the node agent's GPUs published on its Node object: GFD-named labels
 * (nvidia.com/gpu.product, …), gpuslice.io/… labels, and the gpuslice.io/gpus annotation
 * (src/cluster/cluster.h). A thread of its own watches the node (an informer on this one node) and the
 * device table's generation, and sends a merge patch touching only gpuslice's keys whenever what
 * is published differs from what should be (health flip, driver upgrade, someone edited a label).
 * Without an API server (no --kubeconfig, not in a pod) it is not started and the agent works
 * node-local, saying so once. See docs/cluster.md.
 */
#pragma once

#include <jansson.h>

#include "agent/devices.h"
#include "agent/plugin.h"
#include "config/config.h"
#include "topo/topo.h"

struct publish;

/* The MIG side of the labels (labels_format_mig): the node's MIG devices (NULL: not read, the `none`
 * strategy), the strategy's name, the profile of a node that fits `single` (else NULL). */
struct publish_mig {
        const struct mig_node *node;
        const char *strategy;
        const char *single_profile;
        struct plugin *plugin; /* whose record names the MIG devices' holders (the node annotation); may be NULL */
};

/* Start publishing the GPUs of table d, or return NULL (logged once: not configured, or the config
 * is bad). d must outlive the publisher; mig (may be NULL) is copied. */
/* Thread: the loop, at start; lock: none (starts the publisher thread). */
struct publish *publish_start(const struct gpuslice_config *cfg, struct devices *d, const struct publish_mig *mig);
/* The publisher's API client and node name, for other parts of the agent that talk to the API
 * server (assign.h): one client per agent. Valid until publish_stop. */
/* Thread: any; lock: none (the client is fixed; kube_client is thread-safe). */
struct kube_client *publish_client(const struct publish *pub);
/* Thread: any; lock: none (fixed). */
const char *publish_node(const struct publish *pub);

/* ---- declared MIG layouts (miglayout.c): the node label that selects one, the state published back ---- */
#define PUBLISH_MIG_CONFIG_LABEL "nvidia.com/mig.config"              /* the user's: never written */
#define PUBLISH_MIG_STATE_LABEL "nvidia.com/mig.config.state"         /* pending, success, failed */
#define PUBLISH_MIG_REASON_ANNOTATION "gpuslice.io/mig.config.reason" /* why it failed ("" removed) */
/* Add a hook: fn(userdata) runs on the informer's thread, under the publisher's lock, whenever the Node object
 * changes (it must only post: no publish_ call, no blocking). 0, -ENOSPC (PUBLISH_NODE_HOOKS_MAX hooks on), -EINVAL. */
/* Thread: the loop, at start; lock: takes the publisher's lock. */
#define PUBLISH_NODE_HOOKS_MAX 4
int publish_on_node_change(struct publish *pub, void (*fn)(void *userdata), void *userdata);
/* Remove the hook (fn, userdata): when it returns, no call of it is in flight. */
/* Thread: the loop, at teardown; lock: takes the publisher's lock. */
void publish_off_node_change(struct publish *pub, void (*fn)(void *userdata), void *userdata);
/* A label of the Node as last seen into buf ("" when it has none). 0, or -ENOENT: no Node seen yet. */
/* Thread: the loop (miglayout.c); lock: takes the publisher's lock. */
int publish_node_label(struct publish *pub, const char *key, char *buf, size_t len);
/* The layout's state label and reason annotation to publish from now on (state NULL: none). Any thread. */
/* Thread: the loop (miglayout.c); lock: takes the publisher's lock. */
void publish_set_mig_state(struct publish *pub, const char *state, const char *reason);

/* Stop the thread and free. NULL is a no-op. Returns NULL. */
/* Thread: the loop, at teardown; lock: none (joins the publisher thread). */
struct publish *publish_stop(struct publish *pub);

/* The labels (object name → string) the agent publishes for t; healthy[i] per GPU of t. Pure. */
/* Thread: any; lock: none (pure). */
json_t *publish_labels(const struct topo *t, const bool *healthy, const struct publish_mig *mig);
/* The merge patch taking node (a node object, possibly slim) to the wanted labels and annotation:
 * only keys that differ, label keys gpuslice manages but no longer wants set to null. NULL when
 * nothing differs (or out of memory). Pure. */
/* Thread: any; lock: none (pure). */
json_t *publish_diff(const json_t *node, const json_t *labels, const char *annotation);
