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
 *   nvidia.c     --nvidia-config: NVIDIA's plugin config; with a ConfigMap dir, the node label and the dir's files
 *                watched (the publisher's informer, inotify): a new entry checked, then the agent restarted
 *   dra-link.c   --dra: the DRA driver (src/dra) started on the publisher's API client, fed the table's
 *                view of the GPUs, its claims' GPUs marked held in the table
 *
 * Threads: the loop thread runs every callback here; gRPC handlers, the health thread and the
 * status server's thread reach the loop only through loop_event_post (and devices_changed).
 *
 * A new part: a row in agent.c's parts[] (start, stop, devices_changed — called on the loop thread,
 * coalesced, after any change kubelet would see: health, allocations); its place in the table is its
 * start-up order, and the unwind is the reverse.
 */
#pragma once

#include <limits.h>
#include <pthread.h>
#include <signal.h>
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

struct node;
struct share;
struct http_server;
struct monitor_service;
struct publish;
struct dra;
struct dra_mps;
struct podres_service;
struct mps;
struct nvidia_watch;

/* One resource name: its own socket, server and registration. */
struct endpoint {
        struct node *node;
        enum plugin_kind kind;
        unsigned mig;         /* PLUGIN_MIG: which MIG resource (plugin_mig_service); PLUGIN_REPLICA: which set */
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
        struct endpoint ep[_PLUGIN_KIND_MAX + PLUGIN_MIG_MAX + PLUGIN_REPLICA_SETS]; /* + the renamed replica sets */
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

        pthread_mutex_t status_lock;   /* endpoint registration fields read by the status thread */
        pthread_mutex_t sync_lock;     /* one PodResources answer applied at a time (loop, status, handlers) */
        struct podres_service *podres; /* the agent's one PodResources client (podres.h; its own lock) */
        uint64_t applied_ms;           /* asked_ms of the answer applied last (sync_lock) */
        uint64_t last_status_sync_ms;  /* when a status request last asked PodResources (sync_lock) */
        bool cleanup_pending;          /* limits dirs not checked yet: no trusted record at start (sync_lock) */
        uint64_t saved_generation;     /* of the state written last (loop thread) */

        struct http_server *status;            /* the status server */
        struct monitor_service *monitor;       /* /metrics and /healthz; NULL when off or not started */
        struct publish *publish;               /* the Node object's labels (publish.c); NULL: node-local only */
        struct assign_names assign_names;      /* the resource names the assignment watcher matches */
        struct dra *dra;                       /* the DRA driver (dra-link.c); NULL when off */
        struct dra_mps *dra_mps;               /* the MPS control daemons of DRA claims (dra-link.c); NULL when off */
        struct nvconfig *nvidia;               /* NVIDIA's plugin config (nvidia.c); NULL when off */
        struct nvidia_watch *nvidia_watch;     /* its label and directory watched (nvidia.c); NULL: not a dir */
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

        /* agent.c's parts table */
        const sigset_t *sigmask; /* the signals the loop takes (agent_run's) */
        unsigned n_started;      /* parts whose stop teardown runs */
        uint32_t parts_hooked;   /* parts whose devices_changed is on (a record change is posted to `changed`) */
};

/* register.c */
/* Thread: the loop; lock: none. */
int register_init(struct node *n); /* endpoints' timers and the reg_done source */
/* Thread: the loop; lock: none. */
void serve_and_register(struct node *n, struct endpoint *ep, bool restart_server);
/* Thread: the loop; lock: none. */
void register_cancel_all(struct node *n); /* teardown: cancel and finish calls in flight */
/* Thread: the loop; lock: none. */
void register_done(struct node *n);
/* Thread: any; lock: none. */
bool file_exists(const char *path);

/* kubewatch.c */
/* Thread: the loop; lock: none. */
int kubewatch_start(struct node *n);
/* Thread: the loop; lock: none. */
void kubewatch_stop(struct node *n);

/* podsync.c */
/* Ask PodResources now (the service, podres.h) and reconcile the record; sync_lock only while applying.
 * podresources_sync waits up to PODRES_CALL_MS (loop thread); _for_call up to PODRES_HANDLER_MS (a gRPC
 * handler: counted in gpuslice_agent_call_waits_total). 0 or -errno (logged, but -ENOENT: no socket). */
/* Thread: the loop (start, timer); lock: takes sync_lock to apply, never across the call. */
int podresources_sync(struct node *n);
/* Thread: a gRPC handler (share.c's hook); lock: takes sync_lock to apply, never across the call; waits PODRES_HANDLER_MS at most. */
int podresources_sync_for_call(struct node *n);
/* Thread: the loop; lock: none. */
int podsync_start(struct node *n); /* the periodic timer */
/* Thread: the loop; lock: none. */
void podsync_arm(struct node *n); /* loop thread: start the timer if off and anything is on record */
/* Thread: the loop; lock: none. */
void podsync_stop(struct node *n);
/* Thread: a sync's (loop, status, a handler's); lock: sync_lock held (at start: no other thread yet). */
void limits_cleanup(struct node *n);
/* Thread: the status server's; lock: takes sync_lock briefly, never across the call. */
void podsync_status_request(struct node *n); /* rate-limited sync for a status request */

/* persist.c */
/* Thread: the loop; lock: none. */
bool state_restore(struct node *n); /* whether a state file was loaded */
/* Thread: the loop; lock: none. */
void state_persist(struct node *n);
/* Thread: the loop; lock: none. */
int persist_start(struct node *n);
/* Thread: the loop; lock: none. */
void persist_stop(struct node *n);

/* status.c */
/* Thread: the loop; lock: none. */
int status_start(struct node *n);
/* Thread: the loop; lock: none. */
void status_stop(struct node *n);

/* reload.c */
/* Thread: any; lock: none (pure). */
void plugin_options_from_config(const struct gpuslice_config *cfg, struct plugin_options *o);
/* o's NVML stand-in (next to the interposer) and the host's real NVML (the driver's library the CDI discovery finds
 * under devices.driver-root, named under devices.host-driver-root): both, or neither when either is missing —
 * logged once per change (docs/interposer.md "NVML"). */
void node_nvml_libs(const struct gpuslice_config *cfg, const struct topo *t, struct plugin_options *o);
/* Thread: the loop; lock: none. */
void cdi_refresh(struct node *n, const struct plugin_options *o); /* the CDI spec (list strategy cdi) */
/* The paths every CDI spec the agent writes is made with, the device plugin's and the DRA claims' alike
 * (docs/configuration.md, [devices]): the roots the agent reads, the same roots as the host sees them (what the
 * specs name: the runtime on the host reads them), and the host's path of the gpuslice binary for the spec's hook
 * (devices.hook-path, else this binary). Strings borrowed from cfg but hook. */
struct node_cdi_paths {
        const char *dev_root, *driver_root;
        const char *host_dev_root, *host_driver_root; /* "" when the same as the agent's */
        char hook[PATH_MAX];                          /* "" when unknown: the specs carry no hook */
};
/* Thread: any; lock: none (pure). */
void node_cdi_paths(const struct gpuslice_config *cfg, struct node_cdi_paths *ret);
/* Thread: the loop; lock: none. */
void node_reload(struct node *n);

/* dra-link.c */
/* Thread: the loop; lock: none. */
int node_dra_start(struct node *n); /* 0 when off or started */
/* Thread: the loop; lock: none. */
void node_dra_stop(struct node *n);
/* A node_change_fn: the table's view of the GPUs to the DRA driver (nothing when it is off). */
/* Thread: the loop; lock: none. */
void node_dra_push(struct node *n, void *userdata);

/* miglayout.c */
/* Load the layout file and recover every GPU's interrupted change: 1 when a GPU changed (read the inventory
 * again), 0, or -errno (a layout file that cannot be read). */
/* Thread: the loop; lock: none. */
int miglayout_recover(struct node *n, const struct topo *t);
/* Thread: the loop; lock: none. */
int miglayout_start(struct node *n); /* after the publisher: watch the label */
/* A node_change_fn (agent.c registers it): a holder may have gone (a PodResources sync, a DRA unprepare), so a
 * layout that failed only because a GPU was in use is looked at again. */
/* Thread: the loop; lock: none. */
void miglayout_devices_changed(struct node *n, void *userdata);
/* Thread: the loop; lock: none. */
void miglayout_stop(struct node *n);

/* nvidia.c: NVIDIA's device plugin config (--nvidia-config, nvconfig.h) */
/* After config_build: the file (or the ConfigMap entry the node label picks) onto n->cfg, the rest kept in
 * n->nvidia. 0 (also when off), -EINVAL (malformed), -EOPNOTSUPP (a key gpuslice refuses): logged. */
int node_nvidia_config(struct node *n);
/* After the table and MIG devices: the replicated GPUs into the plugin (plugin_set_replicas). 0 or -errno. */
int node_nvidia_replicas(struct node *n);
/* After the publisher, with --nvidia-config DIR: watch the node label (the publisher's informer) and the directory
 * (inotify). An entry that differs (another name, or the same one's bytes) and passes the start's checks stops
 * the loop for a restart (n->reexec: agent_run starts the agent again, which reads the label anew); one that is
 * missing or refused is logged once and the current config kept. 0 (also when off), or -errno (logged). */
/* Thread: the loop; lock: none (the publisher's thread only posts). */
int node_nvidia_watch_start(struct node *n);
/* Thread: the loop, at teardown; lock: none. */
void node_nvidia_watch_stop(struct node *n);
/* SIGHUP: the same file's flags again on top of a freshly built config c (its sharing changes only on restart).
 * 0, or -errno (logged): keep the old config. */
int node_nvidia_reload(struct node *n, struct gpuslice_config *c);
void node_nvidia_free(struct node *n);

/* mps.c: the MPS control daemon for sharing.mps (started, configured, supervised, stopped). 0 when off or started. */
int node_mps_start(struct node *n);
void node_mps_stop(struct node *n);
/* mps.c, one control daemon for a DRA claim (dra-link.c; docs/dra.md "Sharing modes"): `<program> -f` with its pipe
 * and log dirs <dir>/pipe and <dir>/log and, in a mount namespace of its own, the tmpfs <dir>/shm as /dev/shm (made
 * and mounted here; one already mounted there is kept), sent `commands` (client lines, "" none) once it serves; a
 * daemon an earlier agent left serving <dir>/pipe is told to quit first. 0 and *ret, or -errno (nothing left
 * running). The owner supervises it with mps_daemon_check (restarted and sent commands again when it exited: 1;
 * serving: 0; -errno: could not restart) and ends it with mps_daemon_stop. */
/* Thread: any (the caller serializes calls on one daemon); lock: none (waits on the daemon, 5 s at most). */
int mps_daemon_start(const char *program, const char *dir, const char *commands, struct mps **ret);
/* Thread: as mps_daemon_start; lock: none. */
int mps_daemon_check(struct mps *m, const char *program, const char *commands);
/* Thread: as mps_daemon_start; lock: none. */
pid_t mps_daemon_pid(const struct mps *m);
/* Stop it (SIGTERM, then SIGKILL) and unmount its shm tmpfs. */
/* Thread: as mps_daemon_start; lock: none (NULL is a no-op). */
void mps_daemon_stop(struct mps *m);
/* Tell the daemon serving <dir>/pipe, when one does, to quit (bounded wait); unmount the tmpfs at <dir>/shm. */
/* Thread: any; lock: none. */
void mps_daemon_quit(const char *program, const char *dir);

/* agent-metrics.c */
/* Thread: a gRPC thread (the RPC observer); lock: none. */
void node_observe_rpc(void *userdata, const char *method, enum rpc_code code, double seconds);
/* Thread: the loop; lock: none. */
void node_monitor_start(struct node *n);
