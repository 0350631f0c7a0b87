/* SPDX-License-Identifier: Apache-2.0 */
/*
 * podres-service — the agent's one PodResources client (podres.h): one kept connection to kubelet's socket, one
 * List at a time, the last answer decoded and shared as a refcounted snapshot stamped with when it was asked.
 * Readers say how fresh an answer they need and how long they may wait; whoever finds no call in flight makes
 * it, the others wait for its answer (or give up at their own deadline).
 * Locks: s->lock guards everything but the connection, which belongs to whoever holds s->busy; it is never held
 * across the RPC. Must never: keep a caller past its own wait_ms, or hand out an answer of a socket the agent
 * no longer reads.
 */
#include "agent/podres.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "metrics/metrics.h"
#include "rpc/rpc.h"
#include "util/util.h"

struct podres_service {
        pthread_mutex_t lock;
        pthread_cond_t done;           /* a call ended */
        char socket[PATH_MAX];         /* "" = none */
        uint64_t gen;                  /* bumped when the socket changes */
        bool busy;                     /* a call is in flight; its maker owns rc */
        struct podres_snapshot *cache; /* the last answer of this gen, or NULL */
        int last_err;                  /* the last call's failure (0: it answered) ... */
        uint64_t last_err_asked_ms;    /* ... asked then ... */
        uint64_t last_err_gen;         /* ... of this socket */
        struct gs_error last_st;       /* its status */
        struct rpc_client *rc;         /* the kept connection (the busy holder's) */
        char rc_target[PATH_MAX + 8];  /* what rc connects to */
};

int podres_service_new(const char *socket, struct podres_service **ret) {
        struct podres_service *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        pthread_mutex_init(&s->lock, NULL);
        cond_init_monotonic(&s->done);
        if (socket)
                strscpy(s->socket, socket, sizeof s->socket);
        *ret = s;
        return 0;
}

void podres_snapshot_put(struct podres_snapshot *snap) {
        if (!snap || atomic_fetch_sub(&snap->refs, 1) != 1)
                return;
        podres_reports_done(&snap->r);
        free(snap);
}

struct podres_service *podres_service_free(struct podres_service *s) {
        if (!s)
                return NULL;
        podres_snapshot_put(s->cache);
        s->rc = rpc_client_free(s->rc);
        pthread_cond_destroy(&s->done);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return NULL;
}

void podres_service_set_socket(struct podres_service *s, const char *socket) {
        pthread_mutex_lock(&s->lock);
        if (!streq(s->socket, socket ? socket : "")) {
                strscpy(s->socket, socket ? socket : "", sizeof s->socket);
                s->gen++;
                podres_snapshot_put(s->cache);
                s->cache = NULL;
        }
        pthread_mutex_unlock(&s->lock);
}

const char *podres_service_socket(struct podres_service *s, char *buf, size_t len) {
        pthread_mutex_lock(&s->lock);
        strscpy(buf, s->socket[0] ? s->socket : "-", len);
        pthread_mutex_unlock(&s->lock);
        return buf;
}

/* The call itself, by the busy holder, with no lock held. */
static int list_now(struct podres_service *s, const char *socket, int timeout_ms, struct podres_snapshot **ret,
                    struct gs_error *st) {
        struct stat stt;
        if (!socket[0] || stat(socket, &stt) < 0)
                return -ENOENT;
        char target[PATH_MAX + 8];
        snprintf(target, sizeof target, "unix:%s", socket);
        if (s->rc && !streq(target, s->rc_target))
                s->rc = rpc_client_free(s->rc);
        int r = 0;
        if (!s->rc) {
                r = rpc_client_new(target, &s->rc);
                if (r < 0)
                        return r;
                strscpy(s->rc_target, target, sizeof s->rc_target);
        }
        V1__ListPodResourcesRequest req = V1__LIST_POD_RESOURCES_REQUEST__INIT;
        uint8_t *buf = NULL, *resp = NULL;
        size_t len = 0, resp_len = 0;
        r = rpc_pack(&req.base, &buf, &len);
        if (r >= 0)
                r = rpc_client_call(s->rc, "/v1.PodResourcesLister/List", buf, len, timeout_ms, &resp, &resp_len, st);
        free(buf);
        struct podres_snapshot *snap = r >= 0 ? calloc(1, sizeof *snap) : NULL;
        if (r >= 0 && !snap)
                r = -ENOMEM;
        if (r >= 0)
                r = podres_decode(resp, resp_len, &snap->r);
        free(resp);
        if (r < 0) {
                free(snap);
                return r;
        }
        atomic_init(&snap->refs, 1);
        *ret = snap;
        return 0;
}

static struct podres_snapshot *hold(struct podres_snapshot *snap) {
        atomic_fetch_add(&snap->refs, 1);
        return snap;
}

/* lint: long — one wait loop: the cached answer, a call in flight (wait for it), or a call made here; each branch
 * is a few lines and they share the lock's state. */
int podres_service_get(struct podres_service *s, uint64_t since_ms, int wait_ms, struct podres_snapshot **ret,
                       struct gs_error *st) {
        uint64_t deadline = monotonic_ms() + (uint64_t)(wait_ms > 0 ? wait_ms : 0);
        int r;
        pthread_mutex_lock(&s->lock);
        for (;;) {
                uint64_t now = monotonic_ms();
                if (s->cache && s->cache->asked_ms > since_ms) {
                        *ret = hold(s->cache);
                        r = 0;
                        break;
                }
                if (s->last_err && s->last_err_gen == s->gen && s->last_err_asked_ms > since_ms) {
                        if (st)
                                *st = s->last_st;
                        r = s->last_err; /* a call asked late enough failed: not once more per waiter */
                        break;
                }
                if (now >= deadline) {
                        r = -ETIMEDOUT;
                        break;
                }
                if (s->busy) {
                        struct timespec ts = timespec_after_ms(CLOCK_MONOTONIC, deadline - now);
                        pthread_cond_timedwait(&s->done, &s->lock, &ts);
                        continue;
                }
                /* no call in flight: this caller makes it, with no lock held */
                char socket[PATH_MAX];
                strscpy(socket, s->socket, sizeof socket);
                uint64_t gen = s->gen;
                s->busy = true;
                pthread_mutex_unlock(&s->lock);
                struct podres_snapshot *snap = NULL;
                struct gs_error cst = { 0 };
                int timeout = (int)MIN(deadline - now, (uint64_t)PODRES_CALL_MS);
                r = list_now(s, socket, timeout, &snap, &cst);
                pthread_mutex_lock(&s->lock);
                s->busy = false;
                if (r == 0)
                        snap->asked_ms = now;
                if (gen == s->gen) { /* the socket is still the one asked */
                        if (r == 0) {
                                podres_snapshot_put(s->cache);
                                s->cache = hold(snap);
                        }
                        s->last_err = r;
                        s->last_err_asked_ms = now;
                        s->last_err_gen = gen;
                        s->last_st = cst;
                }
                pthread_cond_broadcast(&s->done);
                if (gen != s->gen) { /* the socket changed meanwhile: that answer is nobody's */
                        podres_snapshot_put(snap);
                        continue;
                }
                if (r == 0)
                        *ret = snap;
                if (st && r < 0)
                        *st = cst;
                break;
        }
        pthread_mutex_unlock(&s->lock);
        return r;
}

void podres_handler_wait_count(const char *peer, int r) {
        char value[64];
        snprintf(value, sizeof value, "%s%s", peer, r == 0 ? "" : r == -ETIMEDOUT ? "-late" : "-failed");
        metrics_counter_add(metrics_counter_get("gpuslice_agent_call_waits_total",
                                                "What a kubelet call (Allocate, GetPreferredAllocation) waited "
                                                "for: podresources or pods-list answered within the call's bound, "
                                                "-late (the bound passed: decided without it), -failed.",
                                                "wait", value),
                            1);
}
