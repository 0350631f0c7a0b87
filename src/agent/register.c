/* SPDX-License-Identifier: Apache-2.0 */
/*
 * register — serve each resource's DevicePlugin socket and register it with kubelet
 * (Registration.Register on kubelet.sock), asynchronously: the call runs on a thread of its own
 * (rpc_call_start) and its end wakes the loop (n->reg_done). A failed Register is retried with
 * backoff (1 s doubling to 16 s) on the endpoint's timer.
 * Must never: block the loop on kubelet, or leave a call unfinished at teardown.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>

#include "agent/migdev.h"
#include "agent/node-internal.h"
#include "agent/share.h"
#include "agent/timeslice.h"
#include "agent/whole.h"
#include "deviceplugin.pb-c.h"
#include "metrics/metrics.h"
#include "util/log.h"
#include "util/util.h"

#define REGISTER_TIMEOUT_MS 10000
#define REGISTER_BACKOFF_MIN_MS 1000
#define REGISTER_BACKOFF_MAX_MS 16000

bool file_exists(const char *p) {
        struct stat st;
        return stat(p, &st) == 0;
}

static void set_registered(struct node *n, struct endpoint *ep, bool registered) {
        pthread_mutex_lock(&n->status_lock);
        ep->registered = registered;
        if (registered)
                ep->n_registrations++;
        pthread_mutex_unlock(&n->status_lock);
        metrics_gauge_set(metrics_gauge_get("gpuslice_agent_registered",
                                            "1 while the resource is registered with kubelet, else 0 (by resource).",
                                            "resource", ep->resource),
                          registered ? 1 : 0);
}

static void retry_in(struct endpoint *ep, uint64_t ms) {
        (void)loop_timer_start(&ep->retry, ms);
}

/* Start Register on kubelet.sock without waiting for it: kubelet calls GetDevicePluginOptions
 * back on our socket during the call (our server is serving already), and a hung kubelet must not
 * hold up signals, health or the status socket. The result arrives in register_finish. A call
 * already in flight is cancelled and started anew once it has ended. */
static void register_start(struct node *n, struct endpoint *ep) {
        if (ep->reg_call) {
                ep->reg_again = true;
                rpc_call_cancel(ep->reg_call);
                return;
        }
        V1beta1__DevicePluginOptions opts = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
        V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
        opts.get_preferred_allocation_available = 1;
        req.version = PLUGIN_API_VERSION;
        req.endpoint = ep->name;
        req.resource_name = (char *)ep->resource;
        req.options = &opts;

        _cleanup_(freep) uint8_t *buf = NULL;
        size_t len = 0;
        set_registered(n, ep, false);
        int r = rpc_pack(&req.base, &buf, &len);
        if (r >= 0)
                r = rpc_call_start(n->kubelet_target, "/v1beta1.Registration/Register", buf, len, REGISTER_TIMEOUT_MS,
                                   loop_event_fd(&n->reg_done), &ep->reg_call);
        if (r < 0) {
                log_error_errno(r, "cannot start the registration", "resource=%s", ep->resource);
                retry_in(ep, ep->backoff_ms);
                return;
        }
        ep->reg_started_ms = monotonic_ms();
        log_debug("registering with kubelet", "resource=%s socket=%s", ep->resource, n->kubelet_path);
}

/* A Register call has ended: registered, or retried with backoff. */
static void register_finish(struct node *n, struct endpoint *ep) {
        struct gs_error st;
        int r = rpc_call_finish(TAKE_PTR(ep->reg_call), NULL, NULL, &st);
        uint64_t now = monotonic_ms();
        if (ep->reg_again) {
                ep->reg_again = false;
                log_debug("registration superseded, registering again", "resource=%s", ep->resource);
                serve_and_register(n, ep, false);
                return;
        }
        if (ep->backoff_ms < REGISTER_BACKOFF_MIN_MS)
                ep->backoff_ms = REGISTER_BACKOFF_MIN_MS;
        if (r < 0) {
                set_registered(n, ep, false);
                log_warn_errno(r, "registration with kubelet failed",
                               "resource=%s socket=%s code=%s detail=\"%s\" ms=%" PRIu64 " retry_ms=%" PRIu64,
                               ep->resource, n->kubelet_path, rpc_code_name(st.code), st.message,
                               now - ep->reg_started_ms, ep->backoff_ms);
                retry_in(ep, ep->backoff_ms);
                ep->backoff_ms = MIN(ep->backoff_ms * 2, (uint64_t)REGISTER_BACKOFF_MAX_MS);
                return;
        }
        set_registered(n, ep, true);
        ep->backoff_ms = REGISTER_BACKOFF_MIN_MS;
        log_info("registered with kubelet", "resource=%s endpoint=%s ms=%" PRIu64, ep->resource, ep->name,
                 now - ep->reg_started_ms);
}

static void on_reg_done(struct loop_event *e) {
        struct node *n = e->userdata;
        for (unsigned k = 0; k < n->n_ep; k++)
                if (n->ep[k].reg_call && rpc_call_done(n->ep[k].reg_call))
                        register_finish(n, &n->ep[k]);
}

static void on_retry(struct loop_timer *t) {
        struct endpoint *ep = t->userdata;
        if (!ep->reg_call)
                serve_and_register(ep->node, ep, false);
}

static int serve(struct node *n, struct endpoint *ep) {
        ep->server = rpc_server_free(ep->server);
        int r = rpc_server_new(ep->socket_path, 0, &ep->server);
        if (r < 0)
                return log_error_errno(r, "cannot create the plugin server", "socket=%s", ep->socket_path);
        r = ep->kind == PLUGIN_WHOLE     ? whole_serve(n->plugin, ep->server)
            : ep->kind == PLUGIN_MIG     ? migdev_serve(n->plugin, ep->mig, ep->server)
            : ep->kind == PLUGIN_REPLICA ? timeslice_serve(plugin_replica_service(n->plugin, ep->mig), ep->server)
                                         : share_serve(n->share, ep->kind, ep->server);
        rpc_server_set_observer(ep->server, node_observe_rpc, n);
        if (r >= 0)
                r = rpc_server_start(ep->server);
        if (r < 0) {
                ep->server = rpc_server_free(ep->server);
                return log_error_errno(r, "cannot serve the device plugin", "socket=%s", ep->socket_path);
        }
        log_info("serving device plugin", "resource=%s socket=%s", ep->resource, ep->socket_path);
        return 0;
}

/* (Re)start serving and start registering if kubelet is there; on failure retry from a timer. */
void serve_and_register(struct node *n, struct endpoint *ep, bool restart_server) {
        (void)loop_timer_stop(&ep->retry);
        if (ep->backoff_ms < REGISTER_BACKOFF_MIN_MS)
                ep->backoff_ms = REGISTER_BACKOFF_MIN_MS;
        if (restart_server || !ep->server || !file_exists(ep->socket_path)) {
                if (serve(n, ep) < 0) {
                        retry_in(ep, REGISTER_BACKOFF_MIN_MS);
                        return;
                }
        }
        if (!file_exists(n->kubelet_path)) {
                set_registered(n, ep, false);
                if (ep->reg_call)
                        rpc_call_cancel(ep->reg_call); /* kubelet is gone; inotify tells when it is back */
                log_info("waiting for kubelet", "resource=%s socket=%s", ep->resource, n->kubelet_path);
                return;
        }
        register_start(n, ep);
}

int register_init(struct node *n) {
        int r = loop_event_init(&n->loop, &n->reg_done, on_reg_done, n);
        if (r < 0)
                return log_error_errno(r, "eventfd failed");
        for (unsigned k = 0; k < n->n_ep; k++) {
                n->ep[k].node = n;
                n->ep[k].backoff_ms = REGISTER_BACKOFF_MIN_MS;
                r = loop_timer_init(&n->loop, &n->ep[k].retry, on_retry, &n->ep[k]);
                if (r < 0)
                        return log_error_errno(r, "timerfd failed");
        }
        return 0;
}

void register_cancel_all(struct node *n) {
        /* A Register in flight (kubelet may never answer it) is cancelled, not waited for. */
        for (unsigned k = 0; k < n->n_ep; k++)
                rpc_call_cancel(n->ep[k].reg_call);
        for (unsigned k = 0; k < n->n_ep; k++)
                if (n->ep[k].reg_call)
                        (void)rpc_call_finish(TAKE_PTR(n->ep[k].reg_call), NULL, NULL, NULL);
}

void register_done(struct node *n) {
        register_cancel_all(n);
        for (unsigned k = 0; k < n->n_ep; k++) {
                n->ep[k].server = rpc_server_free(n->ep[k].server);
                loop_timer_done(&n->ep[k].retry);
        }
        loop_event_done(&n->reg_done);
}
