/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dra/kubelet — the DRA driver's side of kubelet, on the project's gRPC transport (src/rpc):
 *
 *   <registry-dir>/<driver>-reg.sock   pluginregistration.Registration: GetInfo answers type "DRAPlugin",
 *                                      the driver's name, the DRA socket, and the services served, most
 *                                      preferred first; NotifyRegistrationStatus is recorded
 *   <plugin-dir>/<driver>/dra.sock     k8s.io.kubelet.pkg.apis.dra.{v1,v1beta1}.DRAPlugin (identical
 *                                      messages: one handler serves both) and {v1,v1alpha1}.DRAResourceHealth
 *
 * NodePrepareResources answers every claim of the request (kubelet retries a missing one): a claim
 * already prepared from the journal, else read from the API (the version the publisher found) and
 * prepared by the engine; an error is the claim's, never the call's. Must never: block the server on
 * anything but one claim's API read (bounded) and local file I/O, or answer a claim by another UID.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "dra-health-v1.pb-c.h"
#include "dra-v1.pb-c.h"
#include "dra/dra-internal.h"
#include "kube/kube.h"
#include "metrics/metrics.h"
#include "pluginregistration.pb-c.h"
#include "rpc/rpc.h"
#include "util/util.h"

/* The one message set for both versions (same wire format). */
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest PrepareRequest;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse PrepareResponse;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry PrepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse PrepareResult;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device Device;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest UnprepareRequest;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse UnprepareResponse;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry UnprepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse UnprepareResult;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim Claim;

#define DRA_V1 "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"
#define DRA_V1BETA1 "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin"
#define CLAIMS_MAX 1024        /* claims in one call */
#define HEALTH_RESEND_MS 30000 /* the health list is sent again this often ... */
#define HEALTH_TIMEOUT_S 90    /* ... and kubelet told to wait this long for it */

/* What GetInfo lists, most preferred first: kubelet takes the first DRAPlugin service it knows; a 1.37+
 * kubelet also picks its health service here (1.36 subscribes on v1alpha1 whatever is listed). */
static const char *const supported_services[] = { "v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth",
                                                  "v1alpha1.DRAResourceHealth" };

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void count_error(const char *op) {
        metrics_counter_add(metrics_counter_get("gpuslice_dra_claim_errors_total",
                                                "Claims kubelet asked the DRA driver to prepare or unprepare that "
                                                "failed, by operation.",
                                                "operation", op),
                            1);
}

static void set_prepared_gauge(struct dra *d) {
        pthread_mutex_lock(&d->lock);
        size_t n = dra_engine_prepared_locked(d);
        pthread_mutex_unlock(&d->lock);
        metrics_gauge_set(metrics_gauge_get("gpuslice_dra_prepared_claims",
                                            "Claims the DRA driver holds prepared on this node.", NULL, NULL),
                          (double)n);
}

/* ---- registration ---- */

static enum rpc_code get_info(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                              struct gs_error *st) {
        struct dra *d = userdata;
        (void)req;
        (void)req_len;
        Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
        info.type = (char *)DRA_PLUGIN_TYPE;
        info.name = d->driver;
        info.endpoint = d->dra_socket;
        info.supported_versions = (char **)supported_services;
        info.n_supported_versions = ELEMENTSOF(supported_services);
        if (rpc_pack(&info.base, ret, ret_len) < 0)
                return rpc_error(st, RPC_INTERNAL, "out of memory");
        return RPC_OK;
}

static enum rpc_code notify_status(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                                   struct gs_error *st) {
        struct dra *d = userdata;
        Pluginregistration__RegistrationStatus *s = pluginregistration__registration_status__unpack(NULL, req_len, req);
        if (!s)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "cannot decode RegistrationStatus");
        pthread_mutex_lock(&d->lock);
        d->registered = s->plugin_registered;
        strscpy(d->reg_error, s->error ? s->error : "", sizeof d->reg_error);
        pthread_mutex_unlock(&d->lock);
        if (s->plugin_registered)
                dra_log(d, DRA_LOG_INFO, "registered with kubelet", "driver=%s socket=%s", d->driver, d->dra_socket);
        else
                dra_log(d, DRA_LOG_ERROR, "kubelet refused the registration", "driver=%s error=\"%s\"", d->driver,
                        s->error ? s->error : "");
        pluginregistration__registration_status__free_unpacked(s, NULL);
        *ret = NULL;
        *ret_len = 0;
        return RPC_OK;
}

/* ---- prepare ---- */

/* Everything one claim's answer points at, freed in one go. */
struct answer {
        PrepareEntry entry;
        PrepareResult result;
        Device dev[DRA_RESULTS_MAX];
        Device *devp[DRA_RESULTS_MAX];
        char *req[DRA_RESULTS_MAX];
        char *id[DRA_RESULTS_MAX];
        char ids[DRA_RESULTS_MAX][DRA_UID_MAX + DRA_MAX_DOMAIN + DRA_MAX_LABEL + 16];
        struct dra_record rec;
        char error[GS_ERROR_MESSAGE_MAX + 64];
};

/* Read the claim from the API: its allocation is what the scheduler wrote. */
static int fetch_claim(struct dra *d, const Claim *c, struct dra_claim *ret, struct gs_error *err) {
        char path[600], version[16];
        int r = dra_api_version(d, version, sizeof version, err);
        if (r < 0)
                return r;
        if (!dra_dns_label_valid(c->namespace_) || !dra_dns_subdomain_valid(c->name))
                return gs_error_set(err, -EINVAL, "not a valid claim namespace/name");
        snprintf(path, sizeof path, "/apis/resource.k8s.io/%s/namespaces/%s/resourceclaims/%s", version, c->namespace_,
                 c->name);
        json_t *obj = NULL;
        struct kube_error ke = { 0 };
        r = kube_request(d->kube, KUBE_GET, path, NULL, &obj, &ke);
        if (r < 0)
                return gs_error_set(err, r, "cannot read claim %s/%s: %s", c->namespace_, c->name,
                                    ke.message[0] ? ke.message : strerror(-r));
        r = dra_claim_from_json(obj, d->driver, ret, err);
        json_decref(obj);
        if (r == 0 && !streq(ret->uid, c->uid))
                r = gs_error_set(err, -ESTALE, "claim %s/%s is UID %s now, kubelet asked for %s", c->namespace_,
                                 c->name, ret->uid, c->uid);
        return r;
}

static int prepare_claim(struct dra *d, const Claim *c, struct answer *a) {
        struct gs_error err = { 0 };
        if (!c->uid || !dra_uid_valid(c->uid))
                return gs_error_set(&err, -EINVAL, "not a claim UID");
        if (dra_engine_lookup(d, c->uid, &a->rec)) /* prepared before: the same answer */
                return 0;
        struct dra_claim *claim = malloc(sizeof *claim);
        if (!claim)
                return -ENOMEM;
        int r = fetch_claim(d, c, claim, &err);
        if (r == 0)
                r = dra_engine_prepare(d, claim, &a->rec, &err);
        free(claim);
        if (r < 0)
                snprintf(a->error, sizeof a->error, "%s", err.message[0] ? err.message : strerror(-r));
        return r;
}

/* The claim's status.devices (r NULL: cleared); a refusal is logged, the claim stays as prepared. */
static void write_status(struct dra *d, const Claim *c, const struct dra_record *r) {
        struct gs_error err = { 0 };
        if (!c->namespace_ || !c->name || !c->uid)
                return;
        if (dra_claim_status_apply(d, c->namespace_, c->name, c->uid, r, &err) < 0)
                dra_log(d, DRA_LOG_WARN, "cannot write the claim's device status", "claim=%s/%s error=\"%s\"",
                        c->namespace_, c->name, err.message);
}

static void fill_answer(struct dra *d, const char *uid, struct answer *a) {
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__claims_entry__init(&a->entry);
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resource_response__init(&a->result);
        a->entry.key = (char *)uid;
        a->entry.value = &a->result;
        if (a->error[0]) {
                a->result.error = a->error;
                return;
        }
        for (unsigned i = 0; i < a->rec.n; i++) {
                const struct dra_record_device *rd = &a->rec.dev[i];
                Device *dev = &a->dev[i];
                k8s__io__kubelet__pkg__apis__dra__v1__device__init(dev);
                a->req[i] = (char *)rd->request;
                dev->request_names = &a->req[i];
                dev->n_request_names = 1;
                dev->pool_name = d->node;
                dev->device_name = (char *)rd->device;
                dra_cdi_id(d, a->rec.uid, rd->device, a->ids[i], sizeof a->ids[i]);
                a->id[i] = a->ids[i];
                dev->cdi_device_ids = &a->id[i];
                dev->n_cdi_device_ids = 1;
                if (rd->share_id[0])
                        dev->share_id = (char *)rd->share_id;
                a->devp[i] = dev;
        }
        a->result.devices = a->devp;
        a->result.n_devices = a->rec.n;
}

static enum rpc_code prepare(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                             struct gs_error *st) {
        struct dra *d = userdata;
        PrepareRequest *in =
                k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__unpack(NULL, req_len, req);
        if (!in)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "cannot decode NodePrepareResourcesRequest");
        if (in->n_claims > CLAIMS_MAX) {
                k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__free_unpacked(in, NULL);
                return rpc_error(st, RPC_INVALID_ARGUMENT, "more than %d claims", CLAIMS_MAX);
        }
        struct answer *a = calloc(in->n_claims + 1, sizeof *a);
        PrepareEntry **entries = calloc(in->n_claims + 1, sizeof *entries);
        enum rpc_code code = RPC_OK;
        if (!a || !entries) {
                code = rpc_error(st, RPC_RESOURCE_EXHAUSTED, "out of memory");
                goto out;
        }
        for (size_t i = 0; i < in->n_claims; i++) {
                const Claim *c = in->claims[i];
                double t0 = now_s();
                int r = prepare_claim(d, c, &a[i]);
                metrics_histogram_observe(metrics_histogram_get("gpuslice_dra_prepare_seconds",
                                                                "Time to prepare one claim (journal, files, and the "
                                                                "claim's read from the API when not prepared yet).",
                                                                NULL, NULL),
                                          now_s() - t0);
                if (r < 0) {
                        count_error("prepare");
                        dra_log(d, DRA_LOG_WARN, "cannot prepare a claim", "claim=%s/%s uid=%s error=\"%s\"",
                                c->namespace_, c->name, c->uid, a[i].error);
                } else {
                        dra_log(d, DRA_LOG_INFO, "claim prepared", "claim=%s/%s uid=%s devices=%u", c->namespace_,
                                c->name, c->uid, a[i].rec.n);
                        write_status(d, c, &a[i].rec);
                }
                fill_answer(d, c->uid ? c->uid : "", &a[i]);
                entries[i] = &a[i].entry;
        }
        PrepareResponse out = K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__INIT;
        out.claims = entries;
        out.n_claims = in->n_claims;
        if (rpc_pack(&out.base, ret, ret_len) < 0)
                code = rpc_error(st, RPC_RESOURCE_EXHAUSTED, "out of memory");
        set_prepared_gauge(d);
out:
        free(entries);
        free(a);
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__free_unpacked(in, NULL);
        return code;
}

/* ---- unprepare ---- */

static enum rpc_code unprepare(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret, size_t *ret_len,
                               struct gs_error *st) {
        struct dra *d = userdata;
        UnprepareRequest *in =
                k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__unpack(NULL, req_len, req);
        if (!in)
                return rpc_error(st, RPC_INVALID_ARGUMENT, "cannot decode NodeUnprepareResourcesRequest");
        size_t n = MIN(in->n_claims, (size_t)CLAIMS_MAX);
        UnprepareEntry *e = calloc(n + 1, sizeof *e);
        UnprepareEntry **ep = calloc(n + 1, sizeof *ep);
        UnprepareResult *res = calloc(n + 1, sizeof *res);
        char(*errors)[GS_ERROR_MESSAGE_MAX] = calloc(n + 1, sizeof *errors);
        enum rpc_code code = RPC_OK;
        if (in->n_claims > CLAIMS_MAX)
                code = rpc_error(st, RPC_INVALID_ARGUMENT, "more than %d claims", CLAIMS_MAX);
        else if (!e || !ep || !res || !errors)
                code = rpc_error(st, RPC_RESOURCE_EXHAUSTED, "out of memory");
        for (size_t i = 0; code == RPC_OK && i < n; i++) {
                const Claim *c = in->claims[i];
                struct gs_error err = { 0 };
                double t0 = now_s();
                int r = dra_engine_unprepare(d, c->uid ? c->uid : "", &err);
                metrics_histogram_observe(metrics_histogram_get("gpuslice_dra_unprepare_seconds",
                                                                "Time to unprepare one claim.", NULL, NULL),
                                          now_s() - t0);
                k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__claims_entry__init(&e[i]);
                k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resource_response__init(&res[i]);
                if (r < 0) {
                        count_error("unprepare");
                        snprintf(errors[i], sizeof errors[i], "%s", err.message);
                        res[i].error = errors[i];
                        dra_log(d, DRA_LOG_WARN, "cannot unprepare a claim", "uid=%s error=\"%s\"", c->uid,
                                err.message);
                } else {
                        dra_log(d, DRA_LOG_INFO, "claim unprepared", "claim=%s/%s uid=%s", c->namespace_, c->name,
                                c->uid);
                        write_status(d, c, NULL);
                }
                e[i].key = c->uid ? c->uid : (char *)"";
                e[i].value = &res[i];
                ep[i] = &e[i];
        }
        if (code == RPC_OK) {
                UnprepareResponse out = K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;
                out.claims = ep;
                out.n_claims = n;
                if (rpc_pack(&out.base, ret, ret_len) < 0)
                        code = rpc_error(st, RPC_RESOURCE_EXHAUSTED, "out of memory");
                set_prepared_gauge(d);
        }
        free(e);
        free(ep);
        free(res);
        free(errors);
        k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__free_unpacked(in, NULL);
        return code;
}

/* ---- health ---- */

#define HEALTH_MAX_DEVICES (TOPO_MAX_GPUS * (2 + 2 * MIG_MAX_DEVICES))

/* One health stream message's storage (too large for a thread's stack). */
struct health_msg {
        V1__DeviceHealth h[HEALTH_MAX_DEVICES];
        V1__DeviceIdentifier id[HEALTH_MAX_DEVICES];
        V1__DeviceHealth *hp[HEALTH_MAX_DEVICES];
        char names[HEALTH_MAX_DEVICES][DRA_MAX_LABEL + 1];
        char reasons[TOPO_MAX_GPUS][96];
        size_t n;
};

static void health_add(struct dra *d, struct health_msg *m, unsigned g, const struct dra_device_ref *ref, int64_t now) {
        size_t n = m->n;
        if (n >= HEALTH_MAX_DEVICES || dra_device_name(ref, m->names[n], sizeof m->names[n]) < 0)
                return;
        v1__device_identifier__init(&m->id[n]);
        v1__device_health__init(&m->h[n]);
        m->id[n].pool_name = d->node;
        m->id[n].device_name = m->names[n];
        m->h[n].device = &m->id[n];
        m->h[n].health = d->gpu[g].healthy ? V1__HEALTH_STATUS__HEALTHY : V1__HEALTH_STATUS__UNHEALTHY;
        m->h[n].last_updated_time = now;
        m->h[n].health_check_timeout_seconds = HEALTH_TIMEOUT_S;
        m->h[n].message = d->gpu[g].healthy ? (char *)"" : m->reasons[g];
        m->hp[n] = &m->h[n];
        m->n++;
}

/* A dynamically partitioned GPU's placements, as the slices have them (lock held). */
static void health_dynamic(struct dra *d, struct health_msg *m, unsigned g, int64_t now) {
        struct dra_slice_input in;
        struct dra_device_ref refs[DRA_MIG_DYNAMIC_MAX];
        dra_slice_input_locked(d, &in);
        unsigned n = in.mig ? dra_mig_dynamic_devices(&in, g, refs, DRA_MIG_DYNAMIC_MAX) : 0;
        for (unsigned k = 0; k < n; k++)
                health_add(d, m, g, &refs[k], now);
}

/* Every device the driver has (its MIG devices with their GPU's health), the complete list each time. */
static int send_health(struct dra *d, struct rpc_stream *s) {
        struct health_msg *m = calloc(1, sizeof *m);
        if (!m)
                return -ENOMEM;
        int64_t now = (int64_t)time(NULL);
        pthread_mutex_lock(&d->lock);
        bool shared = d->sharing_wanted && d->sharing_ok;
        for (unsigned g = 0; g < d->topo.n_gpus; g++) {
                if (d->topo.gpu[g].index < 0)
                        continue;
                strscpy(m->reasons[g], d->gpu[g].reason, sizeof m->reasons[g]);
                struct dra_device_ref ref = { .kind = DRA_DEVICE_GPU, .index = (unsigned)d->topo.gpu[g].index };
                health_add(d, m, g, &ref, now);
                bool mig = d->mig && dra_mig_gpu(d->mig, g);
                bool mig_on = d->topo.gpu[g].mig_mode == 1 || (d->mig && d->mig->node.gpu[g].mode == 1);
                ref.kind = DRA_DEVICE_SHARED;
                if (shared && !mig_on) /* as the slices: no shared device of a GPU in MIG mode */
                        health_add(d, m, g, &ref, now);
                health_dynamic(d, m, g, now);
                for (unsigned k = 0;
                     mig && !(d->mig_dynamic >> g & 1) && !d->mig_error[0] && k < d->mig->node.gpu[g].n_devices; k++) {
                        ref.gi = d->mig->node.gpu[g].dev[k].gi;
                        ref.ci = d->mig->node.gpu[g].dev[k].ci;
                        ref.kind = DRA_DEVICE_MIG;
                        health_add(d, m, g, &ref, now);
                        ref.kind = DRA_DEVICE_MIG_SHARED; /* its fractions (when published) */
                        if (shared)
                                health_add(d, m, g, &ref, now);
                }
        }
        pthread_mutex_unlock(&d->lock);
        V1__NodeWatchResourcesResponse resp = V1__NODE_WATCH_RESOURCES_RESPONSE__INIT;
        resp.devices = m->hp;
        resp.n_devices = m->n;
        uint8_t *buf = NULL;
        size_t len = 0;
        int r = rpc_pack(&resp.base, &buf, &len);
        if (r == 0)
                r = rpc_stream_send(s, buf, len);
        free(buf);
        free(m);
        return r;
}

static enum rpc_code watch_health(void *userdata, const uint8_t *req, size_t req_len, struct rpc_stream *s,
                                  struct gs_error *st) {
        struct dra *d = userdata;
        (void)req;
        (void)req_len;
        (void)st;
        for (;;) {
                uint64_t seen = atomic_load(&d->health_gen);
                if (send_health(d, s) < 0)
                        return RPC_OK;
                if (rpc_stream_wait_change(s, &d->health_gen, seen, HEALTH_RESEND_MS) < 0)
                        return RPC_OK;
        }
}

/* ---- servers ---- */

static int mkdir_one(const char *path) {
        return mkdir(path, 0750) < 0 && errno != EEXIST ? -errno : 0;
}

int dra_kubelet_start(struct dra *d, struct gs_error *err) {
        char dir[DRA_PATH_MAX + DRA_MAX_DOMAIN + 2];
        snprintf(dir, sizeof dir, "%s/%s", d->plugin_dir, d->driver);
        if (snprintf(d->dra_socket, sizeof d->dra_socket, "%s/" DRA_SOCKET, dir) >= (int)sizeof d->dra_socket ||
            snprintf(d->reg_socket, sizeof d->reg_socket, "%s/%s-reg.sock", d->registry_dir, d->driver) >=
                    (int)sizeof d->reg_socket)
                return gs_error_set(err, -ENAMETOOLONG, "socket path too long");
        int r = mkdir_one(d->plugin_dir);
        r = r ?: mkdir_one(dir);
        r = r ?: mkdir_one(d->registry_dir);
        if (r < 0)
                return gs_error_set(err, r, "cannot create %.200s: %s", dir, strerror(-r));
        static const char *const methods[][2] = {
                { "/" DRA_V1 "/NodePrepareResources", "p" },
                { "/" DRA_V1 "/NodeUnprepareResources", "u" },
                { "/" DRA_V1BETA1 "/NodePrepareResources", "p" },
                { "/" DRA_V1BETA1 "/NodeUnprepareResources", "u" },
        };
        r = rpc_server_new(d->dra_socket, 0, &d->dra_server);
        for (size_t i = 0; r == 0 && i < ELEMENTSOF(methods); i++)
                r = rpc_server_add_unary(d->dra_server, methods[i][0], methods[i][1][0] == 'p' ? prepare : unprepare,
                                         d);
        r = r ?: rpc_server_add_stream(d->dra_server, "/v1.DRAResourceHealth/NodeWatchResources", watch_health, d);
        r = r
                    ?: rpc_server_add_stream(d->dra_server, "/v1alpha1.DRAResourceHealth/NodeWatchResources",
                                             watch_health, d);
        r = r ?: rpc_server_start(d->dra_server);
        if (r < 0)
                return gs_error_set(err, r, "cannot serve %.200s: %s", d->dra_socket, strerror(-r));
        /* registration last: kubelet dials the DRA socket as soon as it sees this one */
        r = rpc_server_new(d->reg_socket, 0, &d->reg_server);
        r = r ?: rpc_server_add_unary(d->reg_server, "/pluginregistration.Registration/GetInfo", get_info, d);
        r = r
                    ?: rpc_server_add_unary(d->reg_server, "/pluginregistration.Registration/NotifyRegistrationStatus",
                                            notify_status, d);
        r = r ?: rpc_server_start(d->reg_server);
        if (r < 0)
                return gs_error_set(err, r, "cannot serve %.200s: %s", d->reg_socket, strerror(-r));
        set_prepared_gauge(d);
        return 0;
}

void dra_kubelet_stop(struct dra *d) {
        /* registration first: kubelet stops sending calls before the DRA socket goes */
        d->reg_server = rpc_server_free(d->reg_server);
        d->dra_server = rpc_server_free(d->dra_server);
}
