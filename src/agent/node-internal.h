/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node-internal — what the node agent's own files share (never included outside src/agent): the agent's
 * state and each part's start/stop. agent.c owns the loop and calls the parts:
 *
 *   register.c   serve each resource's socket and register with kubelet (async, backoff timers)
 *   kubewatch.c  inotify on the plugin dir: kubelet restarts, removed sockets (debounced)
 *   podsync.c    PodResources reconcile every 10 s while anything is on record (and on status requests),
 *                limits-dir clean-up
 *   persist.c    state file: restored at start, written when the record changes (event)
 *   status.c     GET /v1/status over the status unix socket (src/http)
 *   reload.c     config → plugin options, SIGHUP reload
 *   agent-metrics.c  RPC metrics observer, /metrics service glue
 *   health.c     its own thread: NVML events + probes (no loop source)
 *   publish.c    its own thread: the Node object's labels and annotation (started from setup)
 *   assign-watch.c  the informer of this node's pods and the patcher thread: the scheduler's
 *                assignment honoured at Allocate (assign.h; on the publisher's API client)
 *   dra-link.c   --dra: the DRA driver (src/dra) started on the publisher's API client, fed the table's
 *                view of the GPUs, its claims' GPUs marked held in the table
 *
 * Threads: the loop thread runs every callback here; gRPC handlers, the health thread and the
 * status server's thread reach the loop only through loop_event_post (and devices_changed).
 *
 * Hooks for other parts started from the agent (node publishing, CDI regeneration): add a source
 * to n->loop in agent.c's setup, and/or node_on_devices_changed — called on the loop thread,
 * coalesced, after any change kubelet would see (health, allocations).
 */
#pragma once

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/assign.h"
#include "agent/devices.h"
#include "agent/health.h"
#include "agent/plugin.h"
#include "config/config.h"
#include "migctl/migctl.h"
#include "rpc/rpc.h"
#include "util/loop.h"

#define KUBELET_SOCKET "kubelet.sock"
#define NODE_MAX_CHANGE_HOOKS 8

struct node;
struct share;
struct http_server;
struct monitor_service;
struct publish;
struct dra;
struct mps;

/* One resource name: its own socket, server and registration. */
struct endpoint {
        struct node *node;
        enum plugin_kind kind;
        unsigned mig;         /* PLUGIN_MIG: which MIG resource (plugin_mig_service) */
        const char *resource; /* plugin_resource() / plugin_mig_resource(): fixed for the plugin's life */
        char name[352];       /* socket file name in the plugin dir */
        char socket_path[PATH_MAX];
        struct rpc_server *server;
        bool registered; /* registered and n_registrations: under node->status_lock */
        uint64_t n_registrations;
        struct loop_timer retry; /* a Register to retry (backoff) */
        /* Register runs asynchronously (rpc_call_start): the loop never waits on kubelet. */
        struct rpc_client_call *reg_call; /* in flight, or NULL */
        uint64_t reg_started_ms;
        bool reg_again;      /* the call in flight was cancelled: register anew when it ends */
        uint64_t backoff_ms; /* next retry delay after a failed Register */
};

typedef void (*node_change_fn)(struct node *n, void *userdata);

struct node {
        struct config_args args;
        struct gpuslice_config cfg;
        struct nvml *nvml;
        struct devices *devices; /* the device table (devices.h) */
        struct plugin *plugin;   /* the resources' shared core (plugin.h) on it */
        struct share *share;     /* the fractional resources (share.h): book and journal, served with a profile */
        struct health health;
        struct endpoint ep[_PLUGIN_KIND_MAX + PLUGIN_MIG_MAX + 1]; /* + 1: time-slicing replicas renamed */
        unsigned n_ep;
        char kubelet_target[PATH_MAX + 8];
        char kubelet_path[PATH_MAX];
        char status_path[PATH_MAX];

        struct loop loop;
        struct loop_signal signals; /* SIGTERM, SIGINT, SIGHUP */
        struct loop_event reg_done; /* a Register call has ended (rpc_call_start's notify fd) */
        struct loop_event persist;  /* the record may have changed: write the state file */
        struct loop_event changed;  /* the device table's change fd: run the devices-changed hooks */
        struct loop_io inotify;     /* kubewatch.c */
        int inofd;
        struct loop_timer inotify_settle; /* kubelet's burst of socket events taken as one */
        bool pending_restart, pending_register;
        struct loop_timer sync_timer; /* PodResources every PODRES_SYNC_MS */

        pthread_mutex_t status_lock;      /* endpoint registration fields read by the status thread */
        pthread_mutex_t sync_lock;        /* one PodResources sync at a time (loop or status thread) */
        struct rpc_client *podres;        /* the kept PodResources connection (sync_lock) */
        char podres_target[PATH_MAX + 8]; /* what podres connects to (sync_lock) */
        uint64_t last_status_sync_ms;     /* under sync_lock */
        bool cleanup_pending;             /* limits dirs not checked yet: no trusted record at start (sync_lock) */
        uint64_t saved_generation;        /* of the state written last (loop thread) */

        struct http_server *status;            /* the status server */
        struct monitor_service *monitor;       /* /metrics and /healthz; NULL when off or not started */
        struct publish *publish;               /* the Node object's labels (publish.c); NULL: node-local only */
        struct assign_names assign_names;      /* the resource names the assignment watcher matches */
        struct dra *dra;                       /* the DRA driver (dra-link.c); NULL when off */
        struct nvconfig *nvidia;               /* NVIDIA's plugin config (nvidia.c); NULL when off */
        struct mps *mps;                       /* the MPS control daemon (mps.c); NULL when off */
        char mig_error[256];                   /* why the node does not fit its MIG strategy ("" fits; agent.c) */
        struct mig_node *mig;                  /* the MIG side read at start (single/mixed; NULL: none; agent.c) */
        char mig_single[MIG_PROFILE_NAME_MAX]; /* the profile of a node that fits `single` ("" otherwise) */
        /* miglayout.c: declared layouts (--mig-layouts) */
        struct migctl_config *layouts; /* NULL: off */
        struct loop_event layout_kick; /* the Node changed: look at nvidia.com/mig.config */
        bool layout_kick_on;
        struct migctl_request layout; /* last asked (<state-dir>/mig-layout) */
        bool reexec;                  /* a layout changed the MIG devices: agent_run starts the agent again */

        struct {
                node_change_fn fn;
                void *userdata;
        } change_hooks[NODE_MAX_CHANGE_HOOKS];
        unsigned n_change_hooks;
};

/* Run fn(n, userdata) on the loop thread after devices change (coalesced). 0 or -ENOSPC. */
int node_on_devices_changed(struct node *n, node_change_fn fn, void *userdata);

/* register.c */
int register_init(struct node *n); /* endpoints' timers and the reg_done source */
void serve_and_register(struct node *n, struct endpoint *ep, bool restart_server);
void register_cancel_all(struct node *n); /* teardown: cancel and finish calls in flight */
void register_done(struct node *n);
bool file_exists(const char *path);

/* kubewatch.c */
int kubewatch_start(struct node *n);
void kubewatch_stop(struct node *n);

/* podsync.c */
int podresources_sync(struct node *n); /* takes sync_lock */
int podsync_start(struct node *n);     /* the periodic timer */
void podsync_arm(struct node *n);      /* loop thread: start the timer if off and anything is on record */
void podsync_stop(struct node *n);
void limits_cleanup(struct node *n);
void podsync_status_request(struct node *n); /* rate-limited sync for a status request */

/* persist.c */
bool state_restore(struct node *n); /* whether a state file was loaded */
void state_persist(struct node *n);
int persist_start(struct node *n);
void persist_stop(struct node *n);

/* status.c */
int status_start(struct node *n);
void status_stop(struct node *n);

/* reload.c */
void plugin_options_from_config(const struct gpuslice_config *cfg, struct plugin_options *o);
void cdi_refresh(struct node *n, const struct plugin_options *o); /* the CDI spec (list strategy cdi) */
void node_reload(struct node *n);

/* dra-link.c */
int node_dra_start(struct node *n); /* 0 when off or started */
void node_dra_stop(struct node *n);
/* A node_change_fn: the table's view of the GPUs to the DRA driver (nothing when it is off). */
void node_dra_push(struct node *n, void *userdata);

/* miglayout.c */
/* Load the layout file and recover every GPU's interrupted change: 1 when a GPU changed (read the inventory
 * again), 0, or -errno (a layout file that cannot be read). */
int miglayout_recover(struct node *n, const struct topo *t);
int miglayout_start(struct node *n); /* after the publisher: watch the label */
/* A node_change_fn (agent.c registers it): a holder may have gone (a PodResources sync, a DRA unprepare), so a
 * layout that failed only because a GPU was in use is looked at again. */
void miglayout_devices_changed(struct node *n, void *userdata);
void miglayout_stop(struct node *n);

/* nvidia.c: NVIDIA's device plugin config (--nvidia-config, nvconfig.h) */
/* After config_build: the file (or the ConfigMap entry the node label picks) onto n->cfg, the rest kept in
 * n->nvidia. 0 (also when off), -EINVAL (malformed), -EOPNOTSUPP (a key gpuslice refuses): logged. */
int node_nvidia_config(struct node *n);
/* After the table and MIG devices: the replicated GPUs into the plugin (plugin_set_replicas). 0 or -errno. */
int node_nvidia_replicas(struct node *n);
/* SIGHUP: the same file's flags again on top of a freshly built config c (its sharing changes only on restart).
 * 0, or -errno (logged): keep the old config. */
int node_nvidia_reload(struct node *n, struct gpuslice_config *c);
void node_nvidia_free(struct node *n);

/* mps.c: the MPS control daemon for sharing.mps (started, configured, supervised, stopped). 0 when off or started. */
int node_mps_start(struct node *n);
void node_mps_stop(struct node *n);

/* agent-metrics.c */
void node_observe_rpc(void *userdata, const char *method, enum rpc_code code, double seconds);
void node_monitor_start(struct node *n);
