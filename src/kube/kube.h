/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube — a small Kubernetes API client (libcurl + jansson), shared by the node agent (publishing
 * its node, watching its pods), `gpuslice inspect` and the scheduler extender.
 *
 *   configuration  kube_config_load(): --kubeconfig / $KUBECONFIG / ~/.kube/config (current
 *                  context, server, CA, client cert/key, token/tokenFile, insecure-skip-tls-verify),
 *                  or in-cluster (service account token re-read when it rotates, CA bundle,
 *                  KUBERNETES_SERVICE_HOST/PORT). Errors name the file and the field.
 *   requests       kube_request() (GET, POST, PATCH merge/JSON), kube_list() (limit/continue paging,
 *                  label/field selectors), kube_watch() (a streamed response decoded event by event).
 *   informer       kube_informer: list + watch into a cache of slimmed objects (only the fields the
 *                  caller keeps), 410 → relist, reconnect with capped backoff and jitter, handlers.
 *   codecs         pure, fuzzed: the kubeconfig parser, the watch-event stream decoder, the Status
 *                  error decoder (the GPU annotations are the cluster codec's: src/cluster/cluster.h).
 *
 * Everything the API sends is untrusted: bodies are bounded (KUBE_BODY_MAX, KUBE_EVENT_MAX), JSON
 * is type-checked before use, and API errors carry the server's Status message.
 *
 * Library code: never logs, never exits. Functions return >= 0 or -errno; ret_ parameters are
 * written only on success. A kube_client may be used by one thread at a time per request (each
 * request takes its own curl handle, so distinct threads may run requests concurrently).
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <pthread.h>

#include "util/error.h"

#define KUBE_BODY_MAX (64u << 20)  /* largest non-watch response body (one LIST page) */
#define KUBE_EVENT_MAX (4u << 20)  /* largest single watch event line */
#define KUBE_CONFIG_MAX (4u << 20) /* largest kubeconfig / token / CA file */
#define KUBE_LIST_PAGE 500         /* default `limit` of kube_list pages */
#define KUBE_ERR_MAX 512

/* -------------------------------------------------------------------------------------------- */
/* Configuration                                                                                 */

/* Where to reach the API server and how to authenticate. Every string is malloc'ed or NULL and
 * owned by the struct (kube_config_done frees them). PEM data is held decoded (not base64). */
struct kube_config {
        char *server;  /* "https://10.0.0.1:6443" (no trailing slash) */
        char *ca_file; /* PEM bundle path, or NULL */
        char *ca_pem;  /* PEM bundle bytes (certificate-authority-data), or NULL */
        char *cert_file, *key_file;
        char *cert_pem, *key_pem;
        char *token;      /* static bearer token, or NULL */
        char *token_file; /* re-read when it changes (in-cluster: projected SA token) */
        bool insecure;    /* insecure-skip-tls-verify */
        char *namespace_; /* the context's namespace (in-cluster: the pod's), or NULL */
        char *source;     /* "/home/u/.kube/config" or "in-cluster": for messages */
};

/* Parse kubeconfig text (YAML or JSON; len bytes) named `path` (for messages) and pick `context`
 * (NULL = current-context). Relative file paths in it are resolved against path's directory.
 * -EINVAL with err = "PATH: FIELD: what is wrong" on any malformed or missing field. */
int kube_config_parse(const char *text, size_t len, const char *path, const char *context, struct kube_config *ret,
                      struct gs_error *err);

/* In-cluster configuration from the environment and the service account files under root
 * (NULL = /var/run/secrets/kubernetes.io/serviceaccount). -ENOENT when not running in a pod
 * (KUBERNETES_SERVICE_HOST unset or no token file). */
int kube_config_in_cluster(const char *root, struct kube_config *ret, struct gs_error *err);

/* The usual search: kubeconfig_path if given; else $KUBECONFIG (first existing file of the
 * colon-separated list); else in-cluster; else ~/.kube/config. -ENOENT when nothing applies
 * (err says what was looked for), -EINVAL/-EACCES/... for a file that exists but is bad. */
int kube_config_load(const char *kubeconfig_path, const char *context, struct kube_config *ret, struct gs_error *err);

void kube_config_done(struct kube_config *c);

/* -------------------------------------------------------------------------------------------- */
/* Client and requests                                                                           */

struct kube_client;

/* The API's answer to a failed request. http = 0 when no HTTP answer came (connection, TLS,
 * timeout: message holds curl's text). reason/message come from the Status object when the
 * server sent one (reason "NotFound", "Conflict", "Expired", ...). */
struct kube_error {
        long http;
        char reason[64];
        char message[KUBE_ERR_MAX];
};

/* The client copies what it needs from cfg. 0, -ENOMEM, -EINVAL (no server). */
int kube_client_new(const struct kube_config *cfg, struct kube_client **ret);
struct kube_client *kube_client_free(struct kube_client *c);

/* A flag that, once true, ends every request in flight within about a second (-ECANCELED; a watch
 * returns 0): lets an owner stop a thread stuck on a hung server at once. NULL: none. */
void kube_client_set_cancel(struct kube_client *c, atomic_bool *cancel);

/* Per-request timeout for non-watch requests (default 30 s). */
void kube_client_set_timeout(struct kube_client *c, unsigned ms);

enum kube_method {
        KUBE_GET,
        KUBE_POST,
        KUBE_PATCH_MERGE, /* application/merge-patch+json */
        KUBE_PATCH_JSON,  /* application/json-patch+json */
        KUBE_PATCH_STRATEGIC,
        KUBE_PUT,
        KUBE_DELETE,
        KUBE_PATCH_APPLY, /* server-side apply: application/apply-patch+yaml (JSON is YAML); the path carries
                           * ?fieldManager= (and force=true) */
};

/* One request. path starts with "/" ("/api/v1/nodes/n1"), query already encoded. body may be
 * NULL. On 2xx *ret (may be NULL) is the decoded JSON body, caller json_decref's it. Errors:
 * -ENOENT (404), -EEXIST (409 AlreadyExists), -ESTALE (409 Conflict), -EIDRM (410 Gone/Expired), -EACCES (401/403), -EAGAIN (429, 5xx), -ETIMEDOUT, -ECONNREFUSED/-EHOSTUNREACH
 * (no answer), -EPROTO (non-JSON or oversized answer); e (may be NULL) then describes it. */
int kube_request(struct kube_client *c, enum kube_method m, const char *path, const char *body, json_t **ret,
                 struct kube_error *e);

/* kube_request without waiting for the answer: done(userdata, r, ret, e) is called once, on the
 * client's own request thread (never inside this call), with what kube_request would have returned;
 * ret (may be NULL) is then done's to json_decref, e valid during the call only. done must be quick and
 * must not wait on another request of this client. 0 when started, or -errno (done is not called). */
typedef void (*kube_done_fn)(void *userdata, int r, json_t *ret, const struct kube_error *e);
int kube_request_start(struct kube_client *c, enum kube_method m, const char *path, const char *body, kube_done_fn done,
                       void *userdata);

/* Selectors and paging for LIST and WATCH. Strings may be NULL. */
struct kube_list_opts {
        const char *label_selector;
        const char *field_selector;
        unsigned limit;      /* page size, 0 = KUBE_LIST_PAGE */
        unsigned timeout_ms; /* LIST: every page within this (-ETIMEDOUT after); 0 = the client's per request */
};

/* LIST every page of a collection (path "/api/v1/pods"), calling item(obj) for each item (the
 * callback borrows obj; return < 0 to stop with that error). *ret_rv (may be NULL; malloc'ed) is
 * the list's resourceVersion for a following watch. A 410 on a continue token restarts the
 * whole list once: item(NULL) is called first, telling the caller to forget the items so far. */
int kube_list(struct kube_client *c, const char *path, const struct kube_list_opts *o,
              int (*item)(json_t *obj, void *userdata), void *userdata, char **ret_rv, struct kube_error *e);

/* URL-encode s into buf (query values). Returns buf, or NULL when it does not fit. */
char *kube_escape(const char *s, char *buf, size_t len);

/* -------------------------------------------------------------------------------------------- */
/* Watch                                                                                         */

enum kube_event_type {
        KUBE_EVENT_ADDED,
        KUBE_EVENT_MODIFIED,
        KUBE_EVENT_DELETED,
        KUBE_EVENT_BOOKMARK,
        KUBE_EVENT_ERROR,
};

/* One decoded watch event. object is borrowed by the callback (keep a reference with
 * json_incref). For ERROR, object is the Status: code holds its `code` (410 = Expired). */
struct kube_event {
        enum kube_event_type type;
        json_t *object;
        const char *resource_version; /* object's metadata.resourceVersion, or NULL */
        long code;                    /* ERROR events: Status.code */
};

/* The watch stream decoder: newline-delimited JSON events fed in arbitrary chunks (curl's write
 * callback). Pure; fuzzed. An event line longer than KUBE_EVENT_MAX, a line that is not a JSON
 * object with a known string "type" and an object "object", is an error: the stream is then
 * dropped by the caller (kube_watch reconnects). */
struct kube_watch_decoder {
        char *buf;
        size_t len, cap, max;
        int (*event)(const struct kube_event *ev, void *userdata);
        void *userdata;
        uint64_t n_events;
        char error[128]; /* what was wrong with the last rejected line */
};

void kube_watch_decoder_init(struct kube_watch_decoder *d, size_t max_event,
                             int (*event)(const struct kube_event *ev, void *userdata), void *userdata);
/* Feed bytes; calls event() for every complete line. 0, -EPROTO (malformed event: d->error says
 * why), -E2BIG (line too long), or the callback's negative return. */
int kube_watch_decoder_feed(struct kube_watch_decoder *d, const char *data, size_t len);
/* Bytes of an incomplete event still buffered (a stream cut mid-event leaves these). */
size_t kube_watch_decoder_pending(const struct kube_watch_decoder *d);
void kube_watch_decoder_done(struct kube_watch_decoder *d);

struct kube_watch_opts {
        const char *label_selector;
        const char *field_selector;
        const char *resource_version;  /* start after this version; NULL = "most recent" */
        unsigned timeout_seconds;      /* server-side timeout (0 = 300); the client gives up on a
                                         silent stream after timeout + 30 s */
        unsigned idle_timeout_seconds; /* 0 = timeout_seconds + 30 */
        bool bookmarks;                /* allowWatchBookmarks=true */
        atomic_bool *stop;             /* polled while streaming; true ends the watch (returns 0) */
};

/* One watch request streamed until the server ends it (timeout: returns 0), *stop, a decoder
 * error (-EPROTO), the callback's negative return, or an HTTP error (410 → -EIDRM, as for
 * kube_request). ERROR events are passed to the callback. */
int kube_watch(struct kube_client *c, const char *path, const struct kube_watch_opts *o,
               int (*event)(const struct kube_event *ev, void *userdata), void *userdata, struct kube_error *e);

/* -------------------------------------------------------------------------------------------- */
/* Decoders shared by the requests (pure, exposed for tests and fuzzing)                         */

/* Fill e from an error body (a Status object, or anything). Never fails. */
void kube_status_decode(const char *body, size_t len, long http, struct kube_error *e);

/* -errno for an HTTP status (see kube_request), 0 for 2xx. reason may be NULL. */
int kube_errno_from_http(long http, const char *reason);

/* Reconnect delay: capped exponential backoff with full jitter in [base/2, base], base =
 * min(cap, first << attempt). rnd is any 32-bit random value (tests pass fixed ones). */
unsigned kube_backoff_ms(unsigned attempt, unsigned first_ms, unsigned cap_ms, uint32_t rnd);

/* -------------------------------------------------------------------------------------------- */
/* Informer                                                                                      */

/* Keep only what the caller uses: returns a new (owned) slim object, or NULL to drop the object
 * from the cache (treated as a delete). */
typedef json_t *(*kube_slim_fn)(json_t *obj);

struct kube_informer_handlers {
        /* Called on the informer thread with the lock held: do not call informer functions from
         * here except kube_informer_get_locked. old is NULL for an add, new NULL for a delete. */
        void (*changed)(const json_t *old_obj, const json_t *new_obj, void *userdata);
        /* After a (re)list has been applied (the cache is complete). */
        void (*synced)(void *userdata);
        void *userdata;
};

struct kube_informer_stats {
        uint64_t lists, watches, events, relists_410, errors;
        size_t objects;
};

struct kube_informer;

/* path: the collection ("/api/v1/nodes"); selectors may be NULL; slim may be NULL (keep the
 * whole object). Does not start anything. The client must outlive the informer. */
int kube_informer_new(struct kube_client *c, const char *path, const char *label_selector, const char *field_selector,
                      kube_slim_fn slim, const struct kube_informer_handlers *h, struct kube_informer **ret);
/* Start the list+watch thread. */
int kube_informer_start(struct kube_informer *inf);
/* Stop (joins the thread, at most one request timeout) and free. NULL is a no-op. */
struct kube_informer *kube_informer_free(struct kube_informer *inf);

/* Has the first list completed? */
bool kube_informer_synced(struct kube_informer *inf);
/* Wait up to ms for the first sync. 0 or -ETIMEDOUT. */
int kube_informer_wait_synced(struct kube_informer *inf, unsigned ms);

/* A copy (json_deep_copy; caller decrefs) of the cached object "ns/name" (cluster-scoped: "name"),
 * or NULL. */
json_t *kube_informer_get(struct kube_informer *inf, const char *key);
/* Call fn for every cached object under the lock (fn borrows obj). */
void kube_informer_foreach(struct kube_informer *inf, void (*fn)(const char *key, const json_t *obj, void *u), void *u);
void kube_informer_stats(struct kube_informer *inf, struct kube_informer_stats *ret);
/* The last error, for the caller's log ("" when none). Copied into buf. */
void kube_informer_last_error(struct kube_informer *inf, char *buf, size_t len);
/* Backoff bounds (tests use small ones). Defaults: 500 ms, 30 s. */
void kube_informer_set_backoff(struct kube_informer *inf, unsigned first_ms, unsigned cap_ms);
/* Server-side watch timeout in seconds (default 300), and how long a silent stream is trusted
 * (0 = timeout + 30 s; bookmarks and events reset it). */
void kube_informer_set_watch_timeout(struct kube_informer *inf, unsigned seconds, unsigned idle_seconds);

/* Ready-made slimming for the resources gpuslice reads (see docs/cluster.md): a node keeps name,
 * resourceVersion, gpuslice/nvidia labels, the gpuslice and compatibility annotations, and GPU
 * capacity/allocatable (and allocatable CPU and memory); a pod keeps namespace, name, uid, nodeName, phase, GPU annotations,
 * per-container GPU resource requests/limits, and nothing else. NULL for a pod with no GPU
 * resource and no GPU annotation. */
json_t *kube_slim_node(json_t *obj);
json_t *kube_slim_pod(json_t *obj);
/* The scheduler extender's: the same, plus each container's and init container's CPU and memory
 * requests/limits and spec.overhead's, and it keeps also a pod bound to a node (spec.nodeName) that asks for
 * CPU or memory but no GPU (what kube-scheduler counts on a node: docs/scheduler.md). */
json_t *kube_slim_pod_requests(json_t *obj);

/* -------------------------------------------------------------------------------------------- */
/* Typed writes the agent and the scheduler extender use                                         */

/* Merge-patch a pod's annotations (value NULL deletes the key). resource_version non-NULL makes it
 * a precondition: -ESTALE (409 Conflict) when the pod changed since. */
int kube_pod_annotate(struct kube_client *c, const char *ns, const char *name, const char *resource_version,
                      const char *const *keys, const char *const *values, size_t n, struct kube_error *e);

/*
 * POST pods/NAME/binding: bind the pod to node, and merge `annotations` ({"key":"value"}, may be NULL)
 * into the pod's in the same storage update (kube-apiserver's setPodHostAndAnnotations: the pod's other
 * annotations are kept, these keys overwritten). -ENOENT: no such pod; -ESTALE (409 Conflict): the pod
 * is bound already or being deleted. uid and resource_version (each may be NULL) ride in the Binding's
 * metadata as preconditions: kube-apiserver honours them from 1.23 (kubernetes#105913); 1.20 ignores
 * them (docs/scheduler.md, "Bind").
 */
int kube_pod_bind(struct kube_client *c, const char *ns, const char *name, const char *uid,
                  const char *resource_version, const char *node, const json_t *annotations, struct kube_error *e);
/* kube_pod_bind without waiting: see kube_request_start. */
int kube_pod_bind_start(struct kube_client *c, const char *ns, const char *name, const char *uid,
                        const char *resource_version, const char *node, const json_t *annotations, kube_done_fn done,
                        void *userdata);

/* Create an Event about an object (kind "Pod"/"Node"; ns NULL/"" for cluster-scoped objects, the
 * event then goes to "default"). type "Normal" or "Warning". */
int kube_event_post(struct kube_client *c, const char *ns, const char *kind, const char *name, const char *uid,
                    const char *type, const char *reason, const char *message, const char *component,
                    struct kube_error *e);
