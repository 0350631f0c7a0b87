/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rpc — the smallest gRPC layer gpuslice needs, on the gRPC C core with insecure credentials
 * over unix sockets: a server that serves unary and server-streaming methods on a thread of its
 * own (so it answers while the process waits in a client call — kubelet calls us back during our
 * Register), and a unary client. Messages are opaque bytes here; protobuf-c lives in the callers.
 *
 * The first use initialises gRPC for the process and, unless the environment already names them,
 * sets GRPC_POLL_STRATEGY=poll and GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS=0 (why: rpc.c,
 * grpc_init_once): call rpc_init before starting threads that may read the environment meanwhile.
 *
 * Must never: log (callers log), abort on a peer's bytes, or hold a lock while calling a handler.
 */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "util/error.h"

/* gRPC status codes (the wire values). */
enum rpc_code {
        RPC_OK = 0,
        RPC_CANCELLED = 1,
        RPC_UNKNOWN = 2,
        RPC_INVALID_ARGUMENT = 3,
        RPC_DEADLINE_EXCEEDED = 4,
        RPC_NOT_FOUND = 5,
        RPC_ALREADY_EXISTS = 6,
        RPC_PERMISSION_DENIED = 7,
        RPC_RESOURCE_EXHAUSTED = 8,
        RPC_FAILED_PRECONDITION = 9,
        RPC_ABORTED = 10,
        RPC_OUT_OF_RANGE = 11,
        RPC_UNIMPLEMENTED = 12,
        RPC_INTERNAL = 13,
        RPC_UNAVAILABLE = 14,
        RPC_DATA_LOSS = 15,
        RPC_UNAUTHENTICATED = 16,
};

/* Statuses travel in struct gs_error (util/error.h): code is the gRPC status code (enum rpc_code), message
 * its message. */

/* Default limit on a received message; bigger ones are refused by gRPC (RESOURCE_EXHAUSTED). */
#define RPC_DEFAULT_MAX_RECV (1u << 20)
/* Calls served at once; more are refused with RESOURCE_EXHAUSTED. */
#define RPC_MAX_ACTIVE_CALLS 64

/*
 * A unary handler, run on the server thread once the whole request has arrived: it must not
 * block (no calls to other servers, no waiting on locks held across I/O), since the next call
 * waits for it. req/req_len is the request (not NUL-terminated). On success return RPC_OK
 * and set *ret_resp (malloc'd, the server frees it; NULL with length 0 is an empty message).
 * On failure return a code and write a message for the peer into st->message.
 */
typedef enum rpc_code (*rpc_unary_fn)(void *userdata, const uint8_t *req, size_t req_len, uint8_t **ret_resp,
                                      size_t *ret_resp_len, struct gs_error *st);

struct rpc_stream;
/* A server-streaming handler: runs on the call's own thread (it may block) until it returns (then the final
 * status is sent). It sends with rpc_stream_send and waits with rpc_stream_wait. */
typedef enum rpc_code (*rpc_stream_fn)(void *userdata, const uint8_t *req, size_t req_len, struct rpc_stream *s,
                                       struct gs_error *st);

/* Send one message. 0, -EPIPE when the client is gone or the call was cancelled,
 * -ETIMEDOUT when the client does not take it within 10 s (the call is then cancelled). */
int rpc_stream_send(struct rpc_stream *s, const void *msg, size_t len);
/* Sleep up to timeout_ms (-1: no limit). 0 on timeout, -EPIPE when the client has gone or the
 * server stops. An idle stream costs no wake-ups: it sleeps on a condition variable that only its
 * call's completions, a stopping server and rpc_streams_wake signal. */
int rpc_stream_wait(struct rpc_stream *s, int timeout_ms);
/* The same, also returning 1 as soon as *value differs from `seen` — checked when the call
 * starts waiting and at every rpc_streams_wake, so a writer changes *value and then calls
 * rpc_streams_wake, and no change is missed. */
int rpc_stream_wait_change(struct rpc_stream *s, const atomic_uint_fast64_t *value, uint64_t seen, int timeout_ms);
/* Wake every stream in rpc_stream_wait_change (of every server) to look at its value again.
 * Thread-safe, any thread, never blocks for long; spurious wake-ups are harmless. */
void rpc_streams_wake(void);

struct rpc_server;

/* Initialise gRPC for the process now (any rpc_* call does it at its first use). */
void rpc_init(void);

/* End gRPC for this process once every server is freed and no call is running: joins gRPC's
 * own threads. For the end of main(); a later rpc_* call is not allowed. */
void rpc_shutdown(void);

/* A server listening on the unix socket `path` (an existing file there is removed first).
 * Methods are added before rpc_server_start. max_recv: 0 = RPC_DEFAULT_MAX_RECV. */
int rpc_server_new(const char *path, size_t max_recv, struct rpc_server **ret);
/* method is the full gRPC path ("/v1beta1.DevicePlugin/Allocate"); the string must outlive the
 * server. -EINVAL when started, -ENOSPC past 16 methods. */
int rpc_server_add_unary(struct rpc_server *s, const char *method, rpc_unary_fn fn, void *userdata);
int rpc_server_add_stream(struct rpc_server *s, const char *method, rpc_stream_fn fn, void *userdata);
/* Called after every call with its method, final status and how long the handler ran (for
 * streams: how long the stream lasted). Runs on the call's thread: keep it short and thread-safe.
 * Set before rpc_server_start; NULL = none. */
typedef void (*rpc_observe_fn)(void *userdata, const char *method, enum rpc_code code, double seconds);
void rpc_server_set_observer(struct rpc_server *s, rpc_observe_fn fn, void *userdata);
/* Bind and start serving on a thread of its own. 0, -EADDRINUSE/-EIO when binding fails. */
int rpc_server_start(struct rpc_server *s);
/* Stop: refuse new calls, cancel running ones (streams see -EPIPE), wait for every handler to
 * return, remove the socket file. Accepts NULL. Always returns NULL. */
struct rpc_server *rpc_server_free(struct rpc_server *s);
const char *rpc_server_path(const struct rpc_server *s);

/*
 * One unary call to `target` ("unix:/path") with a deadline. On OK returns 0 and sets *ret_resp
 * (malloc'd, may be NULL for an empty message). Otherwise returns -ECONNREFUSED (UNAVAILABLE),
 * -ETIMEDOUT (DEADLINE_EXCEEDED) or -EREMOTEIO (any other status); st (may be NULL) always gets
 * the status and its message. timeout_ms (-1: none) is kept by the caller's side alone: a call
 * still unanswered then is cancelled with DEADLINE_EXCEEDED (no gRPC deadline timer, no
 * grpc-timeout sent to the peer; why: rpc.c, call_on).
 */
int rpc_call_unary(const char *target, const char *method, const void *req, size_t req_len, int timeout_ms,
                   uint8_t **ret_resp, size_t *ret_resp_len, struct gs_error *st);

/*
 * A client of one target that keeps its connection between calls (a connection per call costs a
 * handshake and a dozen wake-ups). rpc_client_call is rpc_call_unary on that connection; when the
 * peer went away since the last call, it reconnects at once and tries once more; after a failed
 * call the connection is dropped and the next call makes a new one. Not thread-safe: one caller
 * at a time. rpc_client_free accepts NULL and returns NULL.
 */
struct rpc_client;
int rpc_client_new(const char *target, struct rpc_client **ret);
int rpc_client_call(struct rpc_client *c, const char *method, const void *req, size_t req_len, int timeout_ms,
                    uint8_t **ret_resp, size_t *ret_resp_len, struct gs_error *st);
struct rpc_client *rpc_client_free(struct rpc_client *c);

/*
 * The same call, asynchronous: rpc_call_start copies its arguments and runs the call on a thread
 * of its own, returning at once (0, -EINVAL, -ENOMEM or a pthread error). When the call has
 * ended, rpc_call_done is true and, if notify_fd >= 0 (an eventfd, or the write end of a
 * non-blocking pipe), the 8-byte value 1 is written to it. rpc_call_cancel ends a call in flight
 * soon with CANCELLED (-EREMOTEIO), whatever the peer does; it may be called at any time, from
 * any thread. rpc_call_finish waits for the call to end (cancel first not to wait for the peer),
 * returns what rpc_call_unary would have returned (setting *ret_resp and *ret_resp_len on 0 when
 * they are not NULL, and st when not NULL) and frees the call. Every started call must be
 * finished exactly once.
 */
struct rpc_client_call;
int rpc_call_start(const char *target, const char *method, const void *req, size_t req_len, int timeout_ms,
                   int notify_fd, struct rpc_client_call **ret);
bool rpc_call_done(const struct rpc_client_call *c);
void rpc_call_cancel(struct rpc_client_call *c);
int rpc_call_finish(struct rpc_client_call *c, uint8_t **ret_resp, size_t *ret_resp_len, struct gs_error *st);

/* protobuf-c glue: pack a message into a malloc'd buffer. 0 or -ENOMEM. */
int rpc_pack(const ProtobufCMessage *m, uint8_t **ret, size_t *ret_len);

/* gs_error_set for a gRPC status: printf into st->message, set st->code and return code (for handlers:
 * `return rpc_error(st, RPC_..., ...)`). */
enum rpc_code rpc_error(struct gs_error *st, enum rpc_code code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
const char *rpc_code_name(enum rpc_code c);
