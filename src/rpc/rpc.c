/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rpc — gRPC C core server and client over unix sockets (see rpc.h).
 *
 * Every method is registered with gRPC so that a call is handed to us only once its request
 * message has fully arrived. Unary calls are then answered right on the server thread (no thread
 * hop: the latency kubelet sees is the handler's), and their final batch completes on the
 * server's queue without anyone waiting for it. Streams (and refusals of unknown methods, which
 * must wait for the client) get a completion queue and a detached thread of their own.
 * Must never: trust a peer's message, wait on a peer in the server thread, or leave a thread
 * behind on free.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <time.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>

#include "rpc/rpc.h"
#include "util/util.h"

#define RPC_MAX_METHODS 16

enum {
        TAG_BATCH = 1,
        TAG_CLOSE = 2
};

/* What a tag on a server's queue points at: every such struct starts with one of these. */
enum tag_kind {
        TK_SHUTDOWN = 0x7a01,
        TK_CALL,
        TK_OP
};

struct rpc_method {
        const char *name;
        rpc_unary_fn unary;
        rpc_stream_fn stream;
        void *userdata;
        void *handle;             /* grpc_server_register_method */
        struct rpc_call *pending; /* the outstanding request for this method */
};

struct rpc_server {
        char path[108];
        size_t max_recv;
        struct rpc_method methods[RPC_MAX_METHODS];
        unsigned n_methods;

        grpc_server *server;
        grpc_completion_queue *cq;
        pthread_t thread;
        bool started;
        atomic_bool stopping;
        int shutdown_tag; /* TK_SHUTDOWN */

        rpc_observe_fn observe;
        void *observe_userdata;

        pthread_mutex_t lock;
        pthread_cond_t idle;
        unsigned active; /* call threads running */
};

enum call_kind {
        CALL_GENERIC,    /* an unregistered method: refused on a thread of its own */
        CALL_REGISTERED, /* notification of a registered method's call, payload already read */
        CALL_FINISH,     /* the final batch of a unary call answered on the server thread */
};

/* One call. Unary calls of registered methods live on the server's queue and are answered on
 * the server thread (their request has fully arrived, handlers do not block); streams and
 * unknown methods get a queue and a thread of their own. */
struct rpc_call;
/* The tag of one batch of a call on the server's queue (streams): the server thread marks it
 * done under stream_lock and wakes the stream's thread. */
struct call_op {
        int tk; /* TK_OP */
        int tag;
        struct rpc_call *c;
};

struct rpc_call {
        int tk; /* TK_CALL: the call itself is the tag of its request and of a unary final batch */
        struct rpc_server *srv;
        enum call_kind kind;
        int method; /* index, -1 for generic */
        grpc_call *call;
        grpc_call_details details;
        grpc_metadata_array md;
        gpr_timespec deadline;
        grpc_byte_buffer *payload;
        grpc_completion_queue *cq; /* own queue (unknown methods), NULL when on the server queue */
        struct call_op op[3];      /* batch tags of a stream on the server queue */
        bool done[3];              /* by tag; for calls on the server queue guarded by stream_lock */
        bool ok[3];
        int cancelled; /* from RECV_CLOSE_ON_SERVER */
        /* kept alive until the inline final batch completes */
        grpc_slice finish_details;
        grpc_byte_buffer *finish_msg;
};

struct rpc_stream {
        struct rpc_call *c;
};

/* Streams sleep on one condition variable (CLOCK_MONOTONIC) for their batches, their client's
 * close, a server stopping and rpc_streams_wake: an idle stream costs no wake-ups. One for the
 * process, since a wake-up is for every stream of every server (they are few). */
static pthread_mutex_t stream_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stream_cond;
static pthread_once_t stream_once = PTHREAD_ONCE_INIT;
static void stream_cond_init(void) {
        cond_init_monotonic(&stream_cond);
}

void rpc_streams_wake(void) {
        pthread_once(&stream_once, stream_cond_init);
        pthread_mutex_lock(&stream_lock);
        pthread_cond_broadcast(&stream_cond);
        pthread_mutex_unlock(&stream_lock);
}

/* Wait on stream_cond until `until` (CLOCK_MONOTONIC; NULL: forever). false on timeout.
 * Caller holds stream_lock. */
static bool stream_sleep(const struct timespec *until) {
        if (!until) {
                pthread_cond_wait(&stream_cond, &stream_lock);
                return true;
        }
        return pthread_cond_timedwait(&stream_cond, &stream_lock, until) != ETIMEDOUT;
}

static struct timespec *deadline_ts(int timeout_ms, struct timespec *ts) {
        if (timeout_ms < 0)
                return NULL;
        *ts = timespec_after_ms(CLOCK_MONOTONIC, (uint64_t)timeout_ms);
        return ts;
}

static pthread_once_t grpc_once = PTHREAD_ONCE_INIT;
static atomic_bool grpc_started;
static void grpc_init_once(void) {
        /* Kept initialised for the life of the process: gRPC's own threads stay warm and
         * grpc_shutdown from a handler thread is never needed. rpc_shutdown ends it. */
        /* The "poll" engine, not gRPC's default "epoll1": under epoll1 every thread waiting on any
         * completion queue takes turns watching all of the process's sockets, so a client call's
         * bytes wake the (idle) server threads too — about 25 context switches per PodResources
         * sync instead of about 5 (bench/agent-bench.py). With a handful of sockets, poll() costs
         * nothing measurable. Kept channels (rpc_client) need no backup poller: a call on a dead
         * connection fails and the channel is made anew. The caller's environment wins. */
        (void)setenv("GRPC_POLL_STRATEGY", "poll", 0);
        (void)setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "0", 0);
        grpc_init();
        atomic_store(&grpc_started, true);
}

void rpc_init(void) {
        pthread_once(&grpc_once, grpc_init_once);
}

void rpc_shutdown(void) {
        /* Joins gRPC's background threads, so nothing of gRPC runs while the process exits
         * (LeakSanitizer's exit-time stop-the-world hung on them now and then). */
        if (atomic_exchange(&grpc_started, false))
                grpc_shutdown_blocking();
}

enum rpc_code rpc_error(struct gs_error *st, enum rpc_code code, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        (void)gs_error_setv(st, (int)code, fmt, ap);
        va_end(ap);
        return code;
}

const char *rpc_code_name(enum rpc_code c) {
        static const char *const names[] = {
                "OK",        "CANCELLED",       "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
                "NOT_FOUND", "ALREADY_EXISTS",  "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
                "ABORTED",   "OUT_OF_RANGE",    "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
                "DATA_LOSS", "UNAUTHENTICATED",
        };
        if ((unsigned)c < ELEMENTSOF(names))
                return names[c];
        return "?";
}

int rpc_pack(const ProtobufCMessage *m, uint8_t **ret, size_t *ret_len) {
        size_t n = protobuf_c_message_get_packed_size(m);
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf)
                return -ENOMEM;
        protobuf_c_message_pack(m, buf);
        *ret = buf;
        *ret_len = n;
        return 0;
}

static gpr_timespec deadline_in(int ms) {
        if (ms < 0)
                return gpr_inf_future(GPR_CLOCK_MONOTONIC);
        return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

/* Copy a received byte buffer into one malloc'd block (NUL-terminated for safety). */
static int buffer_take(grpc_byte_buffer *bb, uint8_t **ret, size_t *ret_len) {
        grpc_byte_buffer_reader r;
        if (!grpc_byte_buffer_reader_init(&r, bb))
                return -EBADMSG;
        grpc_slice s = grpc_byte_buffer_reader_readall(&r);
        grpc_byte_buffer_reader_destroy(&r);
        size_t n = GRPC_SLICE_LENGTH(s);
        uint8_t *p = malloc(n + 1);
        if (!p) {
                grpc_slice_unref(s);
                return -ENOMEM;
        }
        memcpy(p, GRPC_SLICE_START_PTR(s), n);
        p[n] = 0;
        grpc_slice_unref(s);
        *ret = p;
        *ret_len = n;
        return 0;
}

static grpc_byte_buffer *buffer_make(const void *p, size_t n) {
        grpc_slice s = grpc_slice_from_copied_buffer(p, n);
        grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
        grpc_slice_unref(s);
        return bb;
}

/* ---- server side: one call ---- */

/* Pump the call's queue until `tag` completes or timeout_ms passes (-1: forever).
 * Returns 1 when it completed, 0 on timeout. */
static int call_pump(struct rpc_call *c, int tag, int timeout_ms) {
        if (!c->cq) {
                /* on the server queue: the server thread marks it done */
                struct timespec ts, *until = deadline_ts(timeout_ms, &ts);
                pthread_mutex_lock(&stream_lock);
                while (!c->done[tag])
                        if (!stream_sleep(until))
                                break;
                bool done = c->done[tag];
                pthread_mutex_unlock(&stream_lock);
                return done;
        }
        gpr_timespec dl = deadline_in(timeout_ms);
        while (!c->done[tag]) {
                grpc_event ev = grpc_completion_queue_next(c->cq, dl, NULL);
                if (ev.type == GRPC_QUEUE_TIMEOUT)
                        return 0;
                if (ev.type != GRPC_OP_COMPLETE)
                        return 0; /* not reached: the queue is shut down only by us */
                int t = (int)(intptr_t)ev.tag;
                if (t >= 0 && t < 3) {
                        c->done[t] = true;
                        c->ok[t] = ev.success;
                }
        }
        return 1;
}

/* Wait for a batch we started; if it does not finish in time, cancel the call (which makes
 * every pending op complete) and wait for it. Returns whether the op succeeded. */
static bool call_wait(struct rpc_call *c, int tag, int timeout_ms) {
        if (!call_pump(c, tag, timeout_ms)) {
                grpc_call_cancel(c->call, NULL);
                call_pump(c, tag, -1);
        }
        return c->ok[tag];
}

static void call_mark(struct rpc_call *c, int tag, bool done, bool ok) {
        if (!c->cq)
                pthread_mutex_lock(&stream_lock);
        c->done[tag] = done;
        c->ok[tag] = ok;
        if (!c->cq) {
                pthread_cond_broadcast(&stream_cond);
                pthread_mutex_unlock(&stream_lock);
        }
}

static bool call_start(struct rpc_call *c, const grpc_op *ops, size_t n, int tag) {
        call_mark(c, tag, false, false);
        void *t = c->cq ? (void *)(intptr_t)tag : (void *)&c->op[tag];
        if (grpc_call_start_batch(c->call, ops, n, t, NULL) != GRPC_CALL_OK) {
                call_mark(c, tag, true, false);
                return false;
        }
        return true;
}

static void call_send_status(struct rpc_call *c, const struct gs_error *st, const uint8_t *msg, size_t len,
                             bool with_msg, bool with_close) {
        grpc_op ops[3];
        size_t n = 0;
        grpc_byte_buffer *bb = NULL;
        grpc_slice details = grpc_slice_from_copied_string(st->code == RPC_OK ? "" : st->message);

        memset(ops, 0, sizeof ops);
        if (with_msg) {
                bb = buffer_make(msg, len);
                ops[n].op = GRPC_OP_SEND_MESSAGE;
                ops[n].data.send_message.send_message = bb;
                n++;
        }
        ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[n].data.send_status_from_server.status = (grpc_status_code)st->code;
        ops[n].data.send_status_from_server.status_details = &details;
        ops[n].data.send_status_from_server.trailing_metadata_count = 0;
        n++;
        if (with_close) {
                ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
                ops[n].data.recv_close_on_server.cancelled = &c->cancelled;
                n++;
        }
        if (call_start(c, ops, n, TAG_BATCH))
                call_wait(c, TAG_BATCH, 10000);
        if (bb)
                grpc_byte_buffer_destroy(bb);
        grpc_slice_unref(details);
}

int rpc_stream_send(struct rpc_stream *s, const void *msg, size_t len) {
        struct rpc_call *c = s->c;
        grpc_op op;

        if (atomic_load(&c->srv->stopping))
                return -EPIPE;
        pthread_mutex_lock(&stream_lock);
        bool closed = c->done[TAG_CLOSE];
        pthread_mutex_unlock(&stream_lock);
        if (closed)
                return -EPIPE;
        memset(&op, 0, sizeof op);
        grpc_byte_buffer *bb = buffer_make(msg, len);
        op.op = GRPC_OP_SEND_MESSAGE;
        op.data.send_message.send_message = bb;
        bool ok = false;
        bool timed_out = false;
        if (call_start(c, &op, 1, TAG_BATCH)) {
                if (!call_pump(c, TAG_BATCH, 10000)) {
                        timed_out = true;
                        grpc_call_cancel(c->call, NULL);
                        call_pump(c, TAG_BATCH, -1);
                }
                ok = c->ok[TAG_BATCH];
        }
        grpc_byte_buffer_destroy(bb);
        if (timed_out)
                return -ETIMEDOUT;
        return ok ? 0 : -EPIPE;
}

int rpc_stream_wait_change(struct rpc_stream *s, const atomic_uint_fast64_t *value, uint64_t seen, int timeout_ms) {
        struct rpc_call *c = s->c;
        struct timespec ts, *until = deadline_ts(timeout_ms, &ts);
        int r = 0;
        pthread_mutex_lock(&stream_lock);
        for (;;) {
                if (c->done[TAG_CLOSE] || atomic_load(&c->srv->stopping)) {
                        r = -EPIPE;
                        break;
                }
                if (value && atomic_load(value) != seen) {
                        r = 1;
                        break;
                }
                if (!stream_sleep(until))
                        break;
        }
        pthread_mutex_unlock(&stream_lock);
        return r;
}

int rpc_stream_wait(struct rpc_stream *s, int timeout_ms) {
        return rpc_stream_wait_change(s, NULL, 0, timeout_ms);
}

static void call_free(struct rpc_call *c) {
        if (!c)
                return;
        if (c->call)
                grpc_call_unref(c->call);
        if (c->payload)
                grpc_byte_buffer_destroy(c->payload);
        if (c->finish_msg)
                grpc_byte_buffer_destroy(c->finish_msg);
        grpc_slice_unref(c->finish_details);
        grpc_call_details_destroy(&c->details);
        grpc_metadata_array_destroy(&c->md);
        if (c->cq) {
                grpc_completion_queue_shutdown(c->cq);
                while (grpc_completion_queue_next(c->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
                       GRPC_QUEUE_SHUTDOWN)
                        ;
                grpc_completion_queue_destroy(c->cq);
        }
        free(c);
}

/* A call to a method nobody registered: read what the client sends, then refuse it. */
static void call_run_generic(struct rpc_call *c) {
        struct gs_error st;
        grpc_op ops[2];
        grpc_byte_buffer *in = NULL;
        char name[128];

        memset(ops, 0, sizeof ops);
        ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
        ops[1].op = GRPC_OP_RECV_MESSAGE;
        ops[1].data.recv_message.recv_message = &in;
        if (call_start(c, ops, 2, TAG_BATCH))
                (void)call_wait(c, TAG_BATCH, 30000);
        if (in)
                grpc_byte_buffer_destroy(in);
        strnscpy(name, sizeof name, (const char *)GRPC_SLICE_START_PTR(c->details.method),
                 GRPC_SLICE_LENGTH(c->details.method));
        rpc_error(&st, RPC_UNIMPLEMENTED, "unknown method %s", name);
        call_send_status(c, &st, NULL, 0, false, true);
}

/* A server-streaming call: the request message has arrived with the call. */
static void call_run_stream(struct rpc_call *c) {
        struct gs_error st = { .code = RPC_OK };
        const struct rpc_method *m = &c->srv->methods[c->method];
        _cleanup_(freep) uint8_t *req = NULL;
        size_t req_len = 0;
        grpc_op ops[2];

        memset(ops, 0, sizeof ops);
        ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
        if (!call_start(c, ops, 1, TAG_BATCH) || !call_wait(c, TAG_BATCH, 10000)) {
                rpc_error(&st, RPC_CANCELLED, "call ended early");
                call_send_status(c, &st, NULL, 0, false, true);
                return;
        }
        if (!c->payload)
                rpc_error(&st, RPC_INVALID_ARGUMENT, "missing request message");
        else if (buffer_take(c->payload, &req, &req_len) < 0)
                rpc_error(&st, RPC_INTERNAL, "cannot read request message");
        if (st.code != RPC_OK) {
                call_send_status(c, &st, NULL, 0, false, true);
                return;
        }
        /* Watch for the client going away while the handler runs. */
        memset(ops, 0, sizeof ops);
        ops[0].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        ops[0].data.recv_close_on_server.cancelled = &c->cancelled;
        bool close_started = call_start(c, ops, 1, TAG_CLOSE);
        struct rpc_stream s = { .c = c };
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        st.code = m->stream(m->userdata, req, req_len, &s, &st);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (c->srv->observe)
                c->srv->observe(c->srv->observe_userdata, m->name, st.code,
                                (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
        call_send_status(c, &st, NULL, 0, false, false);
        if (close_started && !call_pump(c, TAG_CLOSE, 5000)) {
                grpc_call_cancel(c->call, NULL);
                call_pump(c, TAG_CLOSE, -1);
        }
}

static void *call_thread(void *arg) {
        struct rpc_call *c = arg;
        struct rpc_server *srv = c->srv;
        pthread_setname_np(pthread_self(), "rpc-stream");

        if (c->kind == CALL_GENERIC)
                call_run_generic(c);
        else
                call_run_stream(c);
        call_free(c);
        pthread_mutex_lock(&srv->lock);
        srv->active--;
        pthread_cond_broadcast(&srv->idle);
        pthread_mutex_unlock(&srv->lock);
        return NULL;
}

static void call_refuse(struct rpc_call *c, enum rpc_code code, const char *msg) {
        struct gs_error st;
        rpc_error(&st, code, "%s", msg);
        if (c->cq) {
                call_send_status(c, &st, NULL, 0, false, true);
                call_free(c);
                return;
        }
        /* On the server queue, refused from the server thread: it must not wait for its own
         * queue. The final batch completes there like a unary answer's and frees the call. */
        grpc_op ops[3];
        memset(ops, 0, sizeof ops);
        ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
        c->finish_details = grpc_slice_from_copied_string(st.message);
        ops[1].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[1].data.send_status_from_server.status = (grpc_status_code)st.code;
        ops[1].data.send_status_from_server.status_details = &c->finish_details;
        ops[2].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        ops[2].data.recv_close_on_server.cancelled = &c->cancelled;
        c->kind = CALL_FINISH;
        if (grpc_call_start_batch(c->call, ops, 3, c, NULL) != GRPC_CALL_OK)
                call_free(c);
}

static struct rpc_call *call_new(struct rpc_server *srv, enum call_kind kind, int method, bool own_cq) {
        struct rpc_call *c = calloc(1, sizeof *c);
        if (!c)
                return NULL;
        c->tk = TK_CALL;
        c->srv = srv;
        c->kind = kind;
        c->method = method;
        for (int t = 0; t < 3; t++)
                c->op[t] = (struct call_op){ .tk = TK_OP, .tag = t, .c = c };
        c->finish_details = grpc_empty_slice();
        grpc_call_details_init(&c->details);
        grpc_metadata_array_init(&c->md);
        if (own_cq && !(c->cq = grpc_completion_queue_create_for_next(NULL))) {
                free(c);
                return NULL;
        }
        return c;
}

/* Ask gRPC for the next call of method i (i < 0: of any unregistered method). */
static struct rpc_call *request_next(struct rpc_server *srv, int i) {
        if (i < 0) {
                struct rpc_call *c = call_new(srv, CALL_GENERIC, -1, true);
                if (c && grpc_server_request_call(srv->server, &c->call, &c->details, &c->md, c->cq, srv->cq, c) !=
                                 GRPC_CALL_OK) {
                        call_free(c);
                        c = NULL;
                }
                return c;
        }
        struct rpc_method *m = &srv->methods[i];
        /* Every registered call lives on the server queue (the server thread is its only poller):
         * a stream's thread sleeps on stream_cond, woken by its completions or rpc_streams_wake. */
        struct rpc_call *c = call_new(srv, CALL_REGISTERED, i, false);
        if (!c)
                return NULL;
        if (grpc_server_request_registered_call(srv->server, m->handle, &c->call, &c->deadline, &c->md, &c->payload,
                                                c->cq ? c->cq : srv->cq, srv->cq, c) != GRPC_CALL_OK) {
                call_free(c);
                return NULL;
        }
        return c;
}

/* Answer a unary call on the server thread and start its final batch without waiting for it
 * (a peer that never reads must not stall the loop): its completion frees the call. */
static void unary_answer(struct rpc_call *c) {
        const struct rpc_method *m = &c->srv->methods[c->method];
        struct gs_error st = { .code = RPC_OK };
        _cleanup_(freep) uint8_t *req = NULL;
        _cleanup_(freep) uint8_t *resp = NULL;
        size_t req_len = 0, resp_len = 0;

        if (!c->payload)
                rpc_error(&st, RPC_INVALID_ARGUMENT, "missing request message");
        else if (buffer_take(c->payload, &req, &req_len) < 0)
                rpc_error(&st, RPC_INTERNAL, "cannot read request message");
        else {
                struct timespec t0, t1;
                clock_gettime(CLOCK_MONOTONIC, &t0);
                st.code = m->unary(m->userdata, req, req_len, &resp, &resp_len, &st);
                clock_gettime(CLOCK_MONOTONIC, &t1);
                if (c->srv->observe)
                        c->srv->observe(c->srv->observe_userdata, m->name, st.code,
                                        (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
        }

        grpc_op ops[4];
        size_t n = 0;
        memset(ops, 0, sizeof ops);
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
        if (st.code == RPC_OK) {
                c->finish_msg = buffer_make(resp, resp_len);
                ops[n].op = GRPC_OP_SEND_MESSAGE;
                ops[n++].data.send_message.send_message = c->finish_msg;
        }
        c->finish_details = grpc_slice_from_copied_string(st.code == RPC_OK ? "" : st.message);
        ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[n].data.send_status_from_server.status = (grpc_status_code)st.code;
        ops[n++].data.send_status_from_server.status_details = &c->finish_details;
        ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
        c->kind = CALL_FINISH;
        if (grpc_call_start_batch(c->call, ops, n, c, NULL) != GRPC_CALL_OK)
                call_free(c);
}

static void spawn(struct rpc_server *srv, struct rpc_call *c) {
        pthread_mutex_lock(&srv->lock);
        bool busy = srv->active >= RPC_MAX_ACTIVE_CALLS;
        if (!busy)
                srv->active++;
        pthread_mutex_unlock(&srv->lock);
        if (busy) {
                call_refuse(c, RPC_RESOURCE_EXHAUSTED, "too many calls in progress");
                return;
        }
        pthread_attr_t attr;
        pthread_t t;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 256 * 1024);
        int r = pthread_create(&t, &attr, call_thread, c);
        pthread_attr_destroy(&attr);
        if (r != 0) {
                pthread_mutex_lock(&srv->lock);
                srv->active--;
                pthread_mutex_unlock(&srv->lock);
                call_refuse(c, RPC_RESOURCE_EXHAUSTED, "cannot start a thread for the call");
        }
}

/* A request slot for every method (and the generic one) that has none waiting. */
static void request_all(struct rpc_server *srv, struct rpc_call **generic) {
        for (unsigned i = 0; i < srv->n_methods; i++)
                if (!srv->methods[i].pending)
                        srv->methods[i].pending = request_next(srv, (int)i);
        if (!*generic)
                *generic = request_next(srv, -1);
}

/* A call's completion on the server queue: a finished call is freed; a new one frees its request slot
 * and is answered here (unary) or on its own thread (streams, unknown methods) — unless the server is
 * stopping or the request failed (ok false). */
static void dispatch(struct rpc_server *srv, struct rpc_call *c, struct rpc_call **generic, bool ok) {
        if (c->kind == CALL_FINISH) {
                call_free(c);
                return;
        }
        if (c == *generic)
                *generic = NULL;
        else if (c->method >= 0 && srv->methods[c->method].pending == c)
                srv->methods[c->method].pending = NULL;
        if (!ok || atomic_load(&srv->stopping)) {
                call_free(c);
                return;
        }
        if (c->kind == CALL_REGISTERED && srv->methods[c->method].unary)
                unary_answer(c);
        else
                spawn(srv, c);
}

static void *server_thread(void *arg) {
        struct rpc_server *srv = arg;
        pthread_setname_np(pthread_self(), "rpc-server");
        struct rpc_call *generic = NULL;
        bool shut = false, cq_shut = false;

        for (;;) {
                /* Stream calls live on this queue until their threads end: shut it down only
                 * then, polling for that end (only while stopping) every 2 ms. */
                if (shut && !cq_shut) {
                        pthread_mutex_lock(&srv->lock);
                        bool idle = srv->active == 0;
                        pthread_mutex_unlock(&srv->lock);
                        if (idle) {
                                grpc_completion_queue_shutdown(srv->cq);
                                cq_shut = true;
                        }
                }
                if (!shut && !atomic_load(&srv->stopping))
                        request_all(srv, &generic);
                grpc_event ev = grpc_completion_queue_next(
                        srv->cq, shut && !cq_shut ? deadline_in(2) : gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
                if (ev.type == GRPC_QUEUE_SHUTDOWN)
                        break;
                if (ev.type != GRPC_OP_COMPLETE)
                        continue;
                if (ev.tag == &srv->shutdown_tag) {
                        shut = true;
                        continue;
                }
                if (*(const int *)ev.tag == TK_OP) {
                        /* a stream's batch: its thread is waiting for it */
                        struct call_op *op = ev.tag;
                        call_mark(op->c, op->tag, true, ev.success);
                        continue;
                }
                dispatch(srv, ev.tag, &generic, ev.success && !shut);
        }
        if (generic)
                call_free(generic);
        return NULL;
}

int rpc_server_new(const char *path, size_t max_recv, struct rpc_server **ret) {
        if (!path || strlen(path) >= sizeof(((struct rpc_server *)0)->path) || !ret)
                return -EINVAL;
        pthread_once(&grpc_once, grpc_init_once);
        struct rpc_server *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        strscpy(s->path, path, sizeof s->path);
        s->max_recv = max_recv ? max_recv : RPC_DEFAULT_MAX_RECV;
        s->shutdown_tag = TK_SHUTDOWN;
        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->idle, NULL);
        pthread_once(&stream_once, stream_cond_init);
        *ret = s;
        return 0;
}

static int add_method(struct rpc_server *s, const char *name, rpc_unary_fn u, rpc_stream_fn st, void *userdata) {
        if (!s || !name || s->started)
                return -EINVAL;
        if (s->n_methods >= RPC_MAX_METHODS)
                return -ENOSPC;
        s->methods[s->n_methods++] = (struct rpc_method){ name, u, st, userdata };
        return 0;
}

void rpc_server_set_observer(struct rpc_server *s, rpc_observe_fn fn, void *userdata) {
        s->observe = fn;
        s->observe_userdata = userdata;
}

int rpc_server_add_unary(struct rpc_server *s, const char *method, rpc_unary_fn fn, void *userdata) {
        return fn ? add_method(s, method, fn, NULL, userdata) : -EINVAL;
}

int rpc_server_add_stream(struct rpc_server *s, const char *method, rpc_stream_fn fn, void *userdata) {
        return fn ? add_method(s, method, NULL, fn, userdata) : -EINVAL;
}

const char *rpc_server_path(const struct rpc_server *s) {
        return s->path;
}

int rpc_server_start(struct rpc_server *s) {
        char target[128];

        if (!s || s->started)
                return -EINVAL;
        (void)unlink(s->path);

        grpc_arg args[2];
        args[0].type = GRPC_ARG_INTEGER;
        args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
        args[0].value.integer = (int)s->max_recv;
        /* No bandwidth-delay probing: messages here are small, and its ping timers kept gRPC's timer
         * thread waking twice a second on every connection a client keeps open (bench/agent-bench.py). */
        args[1].type = GRPC_ARG_INTEGER;
        args[1].key = (char *)GRPC_ARG_HTTP2_BDP_PROBE;
        args[1].value.integer = 0;
        grpc_channel_args ca = { .num_args = 2, .args = args };

        s->server = grpc_server_create(&ca, NULL);
        if (!s->server)
                return -ENOMEM;
        s->cq = grpc_completion_queue_create_for_next(NULL);
        grpc_server_register_completion_queue(s->server, s->cq, NULL);
        for (unsigned i = 0; i < s->n_methods; i++)
                s->methods[i].handle = grpc_server_register_method(s->server, s->methods[i].name, NULL,
                                                                   GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
        snprintf(target, sizeof target, "unix:%s", s->path);
        grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
        int port = grpc_server_add_http2_port(s->server, target, creds);
        grpc_server_credentials_release(creds);
        if (port == 0) {
                grpc_server_destroy(s->server);
                s->server = NULL;
                grpc_completion_queue_shutdown(s->cq);
                while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
                       GRPC_QUEUE_SHUTDOWN)
                        ;
                grpc_completion_queue_destroy(s->cq);
                s->cq = NULL;
                return -EADDRINUSE;
        }
        grpc_server_start(s->server);
        if (pthread_create(&s->thread, NULL, server_thread, s) != 0) {
                atomic_store(&s->stopping, true);
                grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);
                grpc_server_cancel_all_calls(s->server);
                for (;;) {
                        grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
                        if (ev.type == GRPC_OP_COMPLETE && ev.tag == &s->shutdown_tag)
                                break;
                }
                grpc_server_destroy(s->server);
                s->server = NULL;
                grpc_completion_queue_shutdown(s->cq);
                while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
                       GRPC_QUEUE_SHUTDOWN)
                        ;
                grpc_completion_queue_destroy(s->cq);
                s->cq = NULL;
                return -EAGAIN;
        }
        s->started = true;
        return 0;
}

struct rpc_server *rpc_server_free(struct rpc_server *s) {
        if (!s)
                return NULL;
        if (s->started) {
                atomic_store(&s->stopping, true);
                rpc_streams_wake(); /* streams waiting in rpc_stream_wait see the stop */
                grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);
                grpc_server_cancel_all_calls(s->server);
                pthread_join(s->thread, NULL);
                pthread_mutex_lock(&s->lock);
                while (s->active > 0)
                        pthread_cond_wait(&s->idle, &s->lock);
                pthread_mutex_unlock(&s->lock);
                grpc_server_destroy(s->server);
                grpc_completion_queue_destroy(s->cq);
        }
        (void)unlink(s->path);
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->idle);
        free(s);
        return NULL;
}

/* ---- client ---- */

static int status_to_errno(grpc_status_code c) {
        switch (c) {
                case GRPC_STATUS_OK: return 0;
                case GRPC_STATUS_UNAVAILABLE: return -ECONNREFUSED;
                case GRPC_STATUS_DEADLINE_EXCEEDED: return -ETIMEDOUT;
                default: return -EREMOTEIO;
        }
}

/* An asynchronous unary call (rpc_call_start): the call runs on a thread of its own; `call` is
 * published under the lock while in flight so that rpc_call_cancel can reach it. */
struct rpc_client_call {
        pthread_t thread;
        pthread_mutex_t lock;
        grpc_call *call; /* in flight; NULL before and after */
        bool cancelled;
        atomic_bool done;
        int notify_fd;
        char *target, *method;
        uint8_t *req;
        size_t req_len;
        int timeout_ms;
        int r;
        uint8_t *resp;
        size_t resp_len;
        struct gs_error st;
};

static grpc_channel *channel_create(const char *target) {
        grpc_arg args[3];
        args[0].type = GRPC_ARG_INTEGER;
        args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
        args[0].value.integer = 16 << 20;
        args[1].type = GRPC_ARG_INTEGER;
        args[1].key = (char *)GRPC_ARG_HTTP2_BDP_PROBE;
        args[1].value.integer = 0;
        args[2].type = GRPC_ARG_INTEGER;
        args[2].key = (char *)GRPC_ARG_CLIENT_IDLE_TIMEOUT_MS;
        args[2].value.integer = INT_MAX;
        grpc_channel_args ca = { .num_args = 3, .args = args };
        grpc_channel_credentials *creds = grpc_insecure_credentials_create();
        grpc_channel *ch = grpc_channel_create(target, creds, &ca);
        grpc_channel_credentials_release(creds);
        return ch;
}

/*
 * One unary call on channel ch (see rpc_client for a kept one).
 *
 * The call itself has no gRPC deadline: its time limit is the wait for its completion
 * (grpc_completion_queue_pluck's deadline is the poller's own sleep, no timer), after which the
 * call is cancelled with DEADLINE_EXCEEDED. Same result for the caller, but no gRPC timer: every
 * call deadline is a timer in gRPC 1.51's iomgr timer list, whose shards each wake gRPC's timer
 * thread once a second and adapt their window to the timers they get — a short deadline (the
 * 2 s PodResources sync every 10 s) shortened one shard's window and put its wake-ups out of
 * step with the others' for good: 1 to 2 × cores timer wake-ups a second instead of 1
 * (bench/agent-bench.py, docs/BENCHMARKS.md). The peer does not learn our deadline (no
 * grpc-timeout header); the cancel ends its side of the call (RST_STREAM).
 */
static int call_on(grpc_channel *ch, const char *method, const void *req, size_t req_len, int timeout_ms,
                   uint8_t **ret_resp, size_t *ret_resp_len, struct gs_error *st, struct rpc_client_call *holder) {
        grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
        grpc_slice mslice = grpc_slice_from_copied_string(method);
        grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, mslice, NULL,
                                                   gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        grpc_slice_unref(mslice);
        if (holder) {
                pthread_mutex_lock(&holder->lock);
                if (holder->cancelled)
                        (void)grpc_call_cancel(call, NULL);
                holder->call = call;
                pthread_mutex_unlock(&holder->lock);
        }

        grpc_metadata_array init_md, trail_md;
        grpc_metadata_array_init(&init_md);
        grpc_metadata_array_init(&trail_md);
        grpc_byte_buffer *out = buffer_make(req ? req : "", req_len);
        grpc_byte_buffer *in = NULL;
        grpc_status_code status = GRPC_STATUS_UNKNOWN;
        grpc_slice details = grpc_empty_slice();
        grpc_op ops[6];
        memset(ops, 0, sizeof ops);
        ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
        ops[1].op = GRPC_OP_SEND_MESSAGE;
        ops[1].data.send_message.send_message = out;
        ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
        ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
        ops[3].data.recv_initial_metadata.recv_initial_metadata = &init_md;
        ops[4].op = GRPC_OP_RECV_MESSAGE;
        ops[4].data.recv_message.recv_message = &in;
        ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
        ops[5].data.recv_status_on_client.trailing_metadata = &trail_md;
        ops[5].data.recv_status_on_client.status = &status;
        ops[5].data.recv_status_on_client.status_details = &details;

        int r;
        if (grpc_call_start_batch(call, ops, 6, (void *)1, NULL) != GRPC_CALL_OK) {
                rpc_error(st, RPC_INTERNAL, "cannot start call");
                r = -EIO;
        } else {
                if (grpc_completion_queue_pluck(cq, (void *)1, deadline_in(timeout_ms), NULL).type ==
                    GRPC_QUEUE_TIMEOUT) {
                        (void)grpc_call_cancel_with_status(call, GRPC_STATUS_DEADLINE_EXCEEDED, "Deadline Exceeded",
                                                           NULL);
                        (void)grpc_completion_queue_pluck(cq, (void *)1, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
                }
                st->code = (enum rpc_code)status;
                strnscpy(st->message, sizeof st->message, (const char *)GRPC_SLICE_START_PTR(details),
                         GRPC_SLICE_LENGTH(details));
                r = status_to_errno(status);
                if (r == 0) {
                        if (in)
                                r = buffer_take(in, ret_resp, ret_resp_len);
                        else {
                                *ret_resp = NULL;
                                *ret_resp_len = 0;
                        }
                }
        }
        if (in)
                grpc_byte_buffer_destroy(in);
        grpc_byte_buffer_destroy(out);
        grpc_slice_unref(details);
        grpc_metadata_array_destroy(&init_md);
        grpc_metadata_array_destroy(&trail_md);
        if (holder) {
                pthread_mutex_lock(&holder->lock);
                holder->call = NULL;
                pthread_mutex_unlock(&holder->lock);
        }
        grpc_call_unref(call);
        grpc_completion_queue_shutdown(cq);
        while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
               GRPC_QUEUE_SHUTDOWN)
                ;
        grpc_completion_queue_destroy(cq);
        return r;
}

static void status_clear(struct gs_error *st) {
        gs_error_clear(st);
        st->code = RPC_UNKNOWN;
}

/* One unary call on a channel of its own (rpc_call_unary, rpc_call_start). */
static int call_unary(const char *target, const char *method, const void *req, size_t req_len, int timeout_ms,
                      uint8_t **ret_resp, size_t *ret_resp_len, struct gs_error *st, struct rpc_client_call *holder) {
        struct gs_error local;
        if (!st)
                st = &local;
        status_clear(st);
        if (!target || !method || (!req && req_len))
                return -EINVAL;
        pthread_once(&grpc_once, grpc_init_once);

        grpc_channel *ch = channel_create(target);
        if (!ch)
                return -ENOMEM;
        int r = call_on(ch, method, req, req_len, timeout_ms, ret_resp, ret_resp_len, st, holder);
        grpc_channel_destroy(ch);
        return r;
}

struct rpc_client {
        char *target;
        grpc_channel *ch; /* NULL until the first call, and after a failed one */
};

int rpc_client_new(const char *target, struct rpc_client **ret) {
        if (!target || !ret)
                return -EINVAL;
        struct rpc_client *c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        c->target = strdup(target);
        if (!c->target) {
                free(c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

static void client_drop_channel(struct rpc_client *c) {
        if (c->ch)
                grpc_channel_destroy(c->ch);
        c->ch = NULL;
}

int rpc_client_call(struct rpc_client *c, const char *method, const void *req, size_t req_len, int timeout_ms,
                    uint8_t **ret_resp, size_t *ret_resp_len, struct gs_error *st) {
        struct gs_error local;
        if (!st)
                st = &local;
        status_clear(st);
        if (!c || !method || (!req && req_len) || !ret_resp || !ret_resp_len)
                return -EINVAL;
        pthread_once(&grpc_once, grpc_init_once);
        bool fresh = !c->ch;
        if (fresh && !(c->ch = channel_create(c->target)))
                return -ENOMEM;
        int r = call_on(c->ch, method, req, req_len, timeout_ms, ret_resp, ret_resp_len, st, NULL);
        if (r == -ECONNREFUSED && !fresh) {
                /* The kept connection went away (the peer restarted): a new channel connects at once,
                 * where the old one would wait out gRPC's reconnect backoff. */
                client_drop_channel(c);
                if (!(c->ch = channel_create(c->target)))
                        return -ENOMEM;
                status_clear(st);
                r = call_on(c->ch, method, req, req_len, timeout_ms, ret_resp, ret_resp_len, st, NULL);
        }
        if (r < 0 && r != -EREMOTEIO)
                client_drop_channel(c); /* no channel in backoff is kept: the next call starts afresh */
        return r;
}

struct rpc_client *rpc_client_free(struct rpc_client *c) {
        if (!c)
                return NULL;
        client_drop_channel(c);
        free(c->target);
        free(c);
        return NULL;
}

int rpc_call_unary(const char *target, const char *method, const void *req, size_t req_len, int timeout_ms,
                   uint8_t **ret_resp, size_t *ret_resp_len, struct gs_error *st) {
        return call_unary(target, method, req, req_len, timeout_ms, ret_resp, ret_resp_len, st, NULL);
}

static void *client_call_thread(void *arg) {
        struct rpc_client_call *c = arg;
        pthread_setname_np(pthread_self(), "rpc-call");
        c->r = call_unary(c->target, c->method, c->req, c->req_len, c->timeout_ms, &c->resp, &c->resp_len, &c->st, c);
        atomic_store(&c->done, true);
        if (c->notify_fd >= 0) {
                uint64_t one = 1;
                (void)!write(c->notify_fd, &one, sizeof one);
        }
        return NULL;
}

static void client_call_free(struct rpc_client_call *c) {
        pthread_mutex_destroy(&c->lock);
        free(c->target);
        free(c->method);
        free(c->req);
        free(c->resp);
        free(c);
}

int rpc_call_start(const char *target, const char *method, const void *req, size_t req_len, int timeout_ms,
                   int notify_fd, struct rpc_client_call **ret) {
        if (!target || !method || (!req && req_len) || !ret)
                return -EINVAL;
        struct rpc_client_call *c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        pthread_mutex_init(&c->lock, NULL);
        c->notify_fd = notify_fd;
        c->timeout_ms = timeout_ms;
        c->req_len = req_len;
        c->target = strdup(target);
        c->method = strdup(method);
        c->req = malloc(req_len ? req_len : 1);
        if (!c->target || !c->method || !c->req) {
                client_call_free(c);
                return -ENOMEM;
        }
        if (req_len)
                memcpy(c->req, req, req_len);
        int r = -pthread_create(&c->thread, NULL, client_call_thread, c);
        if (r < 0) {
                client_call_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

bool rpc_call_done(const struct rpc_client_call *c) {
        return atomic_load(&((struct rpc_client_call *)c)->done);
}

void rpc_call_cancel(struct rpc_client_call *c) {
        if (!c)
                return;
        pthread_mutex_lock(&c->lock);
        c->cancelled = true;
        if (c->call)
                (void)grpc_call_cancel(c->call, NULL);
        pthread_mutex_unlock(&c->lock);
}

int rpc_call_finish(struct rpc_client_call *c, uint8_t **ret_resp, size_t *ret_resp_len, struct gs_error *st) {
        if (!c)
                return -EINVAL;
        pthread_join(c->thread, NULL);
        int r = c->r;
        if (st)
                *st = c->st;
        if (r == 0 && ret_resp && ret_resp_len) {
                *ret_resp = TAKE_PTR(c->resp);
                *ret_resp_len = c->resp_len;
        }
        client_call_free(c);
        return r;
}
