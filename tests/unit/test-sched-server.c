/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the scheduler extender's verbs (src/sched/server.c): filter, prioritize and bind
 * on the real kube-scheduler 1.20 bodies (tests/data/extender/) over a snapshot-fed model, bind's
 * assume / forget around the API calls (a recording binder stands in for the API server here;
 * the real one is exercised by the e2e tests), and the HTTP endpoints over a real socket.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "helpers.h"
#include <pthread.h>
#include <curl/curl.h>
#include <jansson.h>

#include "sched/server.h"
#include "util/util.h"

/* tests/data/extender/NAME */
static char *sample(const char *name, size_t *len) {
        return test_read_source(test_path("tests/data/extender", name), len);
}

/* gpunode: 2 GPUs of 16 GiB on one PCIe switch; gpunode-fake: 1 GPU. */
static const char SNAPSHOT[] = "{\"nodes\":["
                               "{\"metadata\":{\"name\":\"gpunode\",\"annotations\":{\"gpuslice.io/gpus\":"
                               "\"{\\\"v\\\":1,\\\"gpus\\\":[{\\\"i\\\":0,\\\"uuid\\\":\\\"GPU-a\\\",\\\"mem\\\":16384,"
                               "\\\"health\\\":\\\"ok\\\"},"
                               "{\\\"i\\\":1,\\\"uuid\\\":\\\"GPU-b\\\",\\\"mem\\\":16384,\\\"health\\\":\\\"ok\\\"}],"
                               "\\\"links\\\":\\\"PIX\\\"}\"}}},"
                               "{\"metadata\":{\"name\":\"gpunode-fake\",\"annotations\":{\"gpuslice.io/gpus\":"
                               "\"{\\\"v\\\":1,\\\"gpus\\\":[{\\\"i\\\":0,\\\"uuid\\\":\\\"GPU-c\\\",\\\"mem\\\":16384,"
                               "\\\"health\\\":\\\"ok\\\"}]}\"}}}"
                               "],\"pods\":[]}";

struct rec {
        int bind_calls;
        int bind_ret;
        char rv[64], uid[64], node[64], annotations[4096];
};

/* The Binding as the API server would take it: one call carrying the assignment annotations; its
 * answer told at once. */
static void rec_bind(void *ud, const char *ns, const char *name, const char *uid, const char *rv, const char *node,
                     const char *ann, sched_bound_fn done, void *cookie) {
        struct rec *r = ud;
        struct gs_error err = { 0 };
        (void)ns;
        (void)name;
        r->bind_calls++;
        strscpy(r->rv, rv, sizeof r->rv);
        strscpy(r->uid, uid, sizeof r->uid);
        strscpy(r->node, node, sizeof r->node);
        strscpy(r->annotations, ann ? ann : "", sizeof r->annotations);
        if (r->bind_ret == -ESTALE)
                gs_error_set(&err, -ESTALE,
                             "Operation cannot be fulfilled on pods/binding \"x\": pod x is already "
                             "assigned to node \"gpunode\"");
        else if (r->bind_ret < 0)
                gs_error_set(&err, r->bind_ret, "pods \"x\" is forbidden");
        done(cookie, r->bind_ret, &err);
}

/* filter_all: filter answers every node that fits (--filter-answer all); else the policy's node alone. */
static struct sched_server *server_answering(struct rec *rec, const char *address, enum cluster_policy policy,
                                             bool filter_all) {
        struct sched_binder b = { rec_bind, rec };
        struct sched_server_options o = {
                .address = address, .binder = rec ? &b : NULL, .policy = policy, .filter_all = filter_all
        };
        cluster_units_default(&o.units);
        struct sched_server *s;
        assert_int_equal(sched_server_new(&o, &s), 0);
        struct gs_error err = { 0 };
        struct sched_model *m = sched_server_lock(s);
        assert_int_equal(sched_snapshot_load(m, SNAPSHOT, strlen(SNAPSHOT), &o.units, NULL, NULL, &err), 0);
        sched_server_unlock(s);
        return s;
}

/* The tests of the full answer (every node's verdict and reason, prioritize after it). */
static struct sched_server *server_with_policy(struct rec *rec, const char *address, enum cluster_policy policy) {
        return server_answering(rec, address, policy, true);
}

static struct sched_server *server_with(struct rec *rec, const char *address) {
        return server_with_policy(rec, address, CLUSTER_POLICY_BINPACK);
}

static json_t *call(unsigned (*fn)(struct sched_server *, const char *, size_t, char **, size_t *),
                    struct sched_server *s, const char *body, size_t len, unsigned want_status) {
        char *out;
        size_t out_len;
        assert_int_equal(fn(s, body, len, &out, &out_len), want_status);
        json_error_t e;
        json_t *j = json_loadb(out, out_len, 0, &e);
        assert_non_null(j);
        free(out);
        return j;
}

static void test_filter_prioritize_bind(void **state) {
        (void)state;
        struct rec rec = { 0 };
        struct sched_server *s = server_with(&rec, "127.0.0.1:0");
        size_t len;
        char *body = sample("filter.request.nodecache.json", &len);
        /* not synced yet: every node fails with the Error */
        json_t *j = call(sched_server_filter, s, body, len, 200);
        assert_non_null(strstr(json_string_value(json_object_get(j, "Error")), "not synced"));
        json_decref(j);
        sched_server_set_ready(s, true);
        /* the pod wants nvidia.com/gpu: 2 — only gpunode has two GPUs */
        j = call(sched_server_filter, s, body, len, 200);
        assert_string_equal(json_string_value(json_object_get(j, "Error")), "");
        json_t *names = json_object_get(j, "NodeNames");
        assert_int_equal(json_array_size(names), 1);
        assert_string_equal(json_string_value(json_array_get(names, 0)), "gpunode");
        const char *why =
                json_string_value(json_object_get(json_object_get(j, "FailedAndUnresolvableNodes"), "gpunode-fake"));
        assert_non_null(why);
        assert_non_null(strstr(why, "container main needs 2"));
        json_decref(j);
        free(body);
        body = sample("prioritize.request.nodecache.json", &len);
        j = call(sched_server_prioritize, s, body, len, 200);
        assert_int_equal(json_array_size(j), 2);
        json_t *h0 = json_array_get(j, 0), *h1 = json_array_get(j, 1);
        assert_string_equal(json_string_value(json_object_get(h0, "Host")), "gpunode");
        assert_true(json_integer_value(json_object_get(h0, "Score")) >= 0 &&
                    json_integer_value(json_object_get(h0, "Score")) <= 10);
        assert_int_equal(json_integer_value(json_object_get(h1, "Score")), 0);
        json_decref(j);
        free(body);
        /* bind: one Binding with the assignment annotations, the filter-time uid and resourceVersion */
        body = sample("bind.request.nodecache.json", &len);
        j = call(sched_server_bind, s, body, len, 200);
        assert_string_equal(json_string_value(json_object_get(j, "Error")), "");
        json_decref(j);
        assert_int_equal(rec.bind_calls, 1);
        assert_string_equal(rec.rv, "579");
        assert_string_equal(rec.uid, "e981bc86-1140-480f-8584-8551befe9a66");
        assert_string_equal(rec.node, "gpunode");
        json_t *ann = json_loads(rec.annotations, 0, NULL);
        assert_non_null(ann);
        assert_string_equal(json_string_value(json_object_get(ann, "gpuslice.io/assigned")), "false");
        json_t *asg = json_loads(json_string_value(json_object_get(ann, "gpuslice.io/assignment")), 0, NULL);
        assert_non_null(asg);
        assert_string_equal(json_string_value(json_object_get(asg, "node")), "gpunode");
        json_t *c0 = json_array_get(json_object_get(asg, "containers"), 0);
        assert_int_equal(json_array_size(json_object_get(c0, "gpus")), 2);
        assert_int_equal(json_integer_value(json_object_get(c0, "core")), 100);
        json_decref(asg);
        json_decref(ann);
        /* the pod is counted at once: both GPUs are held */
        struct sched_model *m = sched_server_lock(s);
        const struct sched_node *n = sched_model_node(m, "gpunode");
        assert_int_equal(n->gpu[0].whole + n->gpu[1].whole, 2);
        assert_true(sched_model_pod(m, "e981bc86-1140-480f-8584-8551befe9a66")->assumed);
        sched_server_unlock(s);
        /* a bind for a pod filter never saw is refused */
        j = call(sched_server_bind, s, body, len, 200);
        assert_non_null(strstr(json_string_value(json_object_get(j, "Error")), "not seen by filter"));
        json_decref(j);
        free(body);
        s = sched_server_free(s);
}

static void test_bind_refused_conflict_failed(void **state) {
        (void)state;
        struct rec rec = { 0 };
        struct sched_server *s = server_with(&rec, "127.0.0.1:0");
        sched_server_set_ready(s, true);
        size_t len, blen;
        char *filter = sample("filter.request.nodecache.json", &len);
        char *bind = sample("bind.request.nodecache.json", &blen);
        /* a conflict on the Binding (bound already, being deleted): nothing stays assumed */
        json_decref(call(sched_server_filter, s, filter, len, 200));
        rec.bind_ret = -ESTALE;
        json_t *j = call(sched_server_bind, s, bind, blen, 200);
        assert_non_null(strstr(json_string_value(json_object_get(j, "Error")), "conflict"));
        assert_non_null(strstr(json_string_value(json_object_get(j, "Error")), "already assigned"));
        json_decref(j);
        assert_int_equal(rec.bind_calls, 1);
        struct sched_model *m = sched_server_lock(s);
        assert_null(sched_model_pod(m, "e981bc86-1140-480f-8584-8551befe9a66"));
        assert_int_equal(sched_model_node(m, "gpunode")->gpu[0].whole, 0);
        sched_server_unlock(s);
        /* the Binding fails otherwise: forgotten as well */
        rec.bind_ret = -EACCES;
        j = call(sched_server_bind, s, bind, blen, 200);
        assert_non_null(strstr(json_string_value(json_object_get(j, "Error")), "forbidden"));
        json_decref(j);
        m = sched_server_lock(s);
        assert_null(sched_model_pod(m, "e981bc86-1140-480f-8584-8551befe9a66"));
        sched_server_unlock(s);
        /* another pod took the GPUs meanwhile: bind re-decides and refuses with the reason */
        m = sched_server_lock(s);
        struct sched_pod_info other = { .uid = "other", .ns = "d", .name = "o", .node = "gpunode", .bound = true };
        other.req.n = 1;
        other.req.c[0].whole = 1;
        other.has_assignment = true;
        other.assign.n = 1;
        other.assign.c[0] = (struct cluster_container_assign){ .gpus = 1, .whole = true };
        assert_int_equal(sched_model_set_pod(m, &other), 0);
        sched_server_unlock(s);
        rec.bind_ret = 0;
        j = call(sched_server_bind, s, bind, blen, 200);
        assert_non_null(strstr(json_string_value(json_object_get(j, "Error")), "no longer fits"));
        json_decref(j);
        /* malformed bodies: 400 with the reason */
        j = call(sched_server_bind, s, "{", 1, 400);
        assert_non_null(strstr(json_string_value(json_object_get(j, "Error")), "bad ExtenderBindingArgs"));
        json_decref(j);
        j = call(sched_server_filter, s, "[]", 2, 400);
        assert_non_null(strstr(json_string_value(json_object_get(j, "Error")), "bad ExtenderArgs"));
        json_decref(j);
        j = call(sched_server_prioritize, s, "[]", 2, 400);
        assert_int_equal(json_array_size(j), 0);
        json_decref(j);
        free(filter);
        free(bind);
        sched_server_free(s);
}

static size_t collect(char *p, size_t size, size_t n, void *ud) {
        char **buf = ud;
        size_t old = *buf ? strlen(*buf) : 0;
        char *b = realloc(*buf, old + size * n + 1);
        assert_non_null(b);
        memcpy(b + old, p, size * n);
        b[old + size * n] = '\0';
        *buf = b;
        return size * n;
}

/* One request on a connection of its own: the HTTP status, or -1 when none came (refused, reset);
 * asserts nothing, so threads may call it. */
static long http_try(unsigned port, const char *path, const char *post, char **ret) {
        CURL *c = curl_easy_init();
        if (!c)
                return -1;
        char url[128];
        snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, path);
        *ret = NULL;
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, ret);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
        struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
        if (post) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, post);
                curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        }
        long status = -1;
        if (curl_easy_perform(c) == CURLE_OK)
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
        return status;
}

static long http(unsigned port, const char *path, const char *post, char **ret) {
        long status = http_try(port, path, post, ret);
        assert_true(status > 0);
        return status;
}

static void test_http_endpoints(void **state) {
        (void)state;
        struct sched_server *s = server_with(NULL, "127.0.0.1:0");
        assert_int_equal(sched_server_start(s), 0);
        unsigned port = sched_server_port(s);
        char *out;
        assert_int_equal(http(port, "/healthz", NULL, &out), 503);
        free(out);
        sched_server_set_ready(s, true);
        assert_int_equal(http(port, "/healthz", NULL, &out), 200);
        free(out);
        size_t len;
        char *body = sample("filter.request.nodecache.json", &len);
        assert_int_equal(http(port, "/filter", body, &out), 200);
        assert_non_null(strstr(out, "\"NodeNames\":[\"gpunode\"]"));
        free(out);
        assert_int_equal(http(port, "/filter", NULL, &out), 405); /* GET */
        free(out);
        free(body);
        /* bind without an API server: an answer with the reason, and nothing stays assumed */
        body = sample("bind.request.nodecache.json", &len);
        assert_int_equal(http(port, "/bind", body, &out), 200);
        assert_non_null(strstr(out, "no API server configured"));
        free(out);
        free(body);
        struct sched_model *m = sched_server_lock(s);
        assert_null(sched_model_pod(m, "e981bc86-1140-480f-8584-8551befe9a66"));
        sched_server_unlock(s);
        assert_int_equal(http(port, "/metrics", NULL, &out), 200);
        assert_non_null(strstr(out, "gpuslice_scheduler_requests_total{verb=\"filter\"}"));
        assert_non_null(strstr(out, "gpuslice_scheduler_request_duration_seconds_bucket{verb=\"filter\""));
        assert_non_null(strstr(out, "gpuslice_scheduler_decisions_total{verdict=\"unresolvable\"}"));
        assert_non_null(strstr(out, "gpuslice_scheduler_binds_total{result=\"failed\"}"));
        assert_non_null(strstr(out, "gpuslice_scheduler_model_nodes 2"));
        free(out);
        sched_server_free(s);
}

/* A binder whose Bindings stay unanswered until the test lets them go (as the API server's answers
 * come later, on the API client's thread); counts the binds waiting in it. */
struct gate {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        unsigned entered;
        sched_bound_fn done[128];
        void *cookie[128];
};

static void gate_bind(void *ud, const char *ns, const char *name, const char *uid, const char *rv, const char *node,
                      const char *ann, sched_bound_fn done, void *cookie) {
        struct gate *g = ud;
        (void)ns, (void)name, (void)uid, (void)rv, (void)node, (void)ann;
        pthread_mutex_lock(&g->lock);
        assert_true(g->entered < 128);
        g->done[g->entered] = done;
        g->cookie[g->entered++] = cookie;
        pthread_cond_broadcast(&g->cond);
        pthread_mutex_unlock(&g->lock);
}

/* Answer every waiting Binding: bound. */
static unsigned gate_release(struct gate *g) {
        pthread_mutex_lock(&g->lock);
        unsigned n = g->entered;
        pthread_mutex_unlock(&g->lock);
        for (unsigned i = 0; i < n; i++)
                g->done[i](g->cookie[i], 0, NULL);
        return n;
}

/* Until `n` binds wait in the gate, at most `seconds`: true when they all got there. */
static bool gate_wait(struct gate *g, unsigned n, int seconds) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += seconds;
        pthread_mutex_lock(&g->lock);
        int r = 0;
        while (g->entered < n && r == 0)
                r = pthread_cond_timedwait(&g->cond, &g->lock, &until);
        bool all = g->entered >= n;
        pthread_mutex_unlock(&g->lock);
        return all;
}

struct bind_call {
        unsigned port;
        char body[256];
        long status;
        char *out;
};

static long http_try(unsigned port, const char *path, const char *post, char **ret);

static void *bind_thread(void *ud) {
        struct bind_call *b = ud;
        b->status = http_try(b->port, "/bind", b->body, &b->out);
        return NULL;
}

/* More binds at once than the 16 polling threads the server once had, and than the connections it
 * once took from one address (HTTP_MAX_CONNECTIONS_PER_IP) */
#define SLOW_BINDS 80

/* Binds waiting on the API server must not hold up filter nor one another: kube-scheduler binds
 * every pod on a goroutine (and a connection) of its own while its scheduling cycle goes on with
 * the next pod's filter. Every one of SLOW_BINDS binds reaches the API call at the same time, and a
 * filter is answered meanwhile. */
static void test_slow_bind_does_not_block_filter(void **state) {
        (void)state;
        struct gate g = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
        struct sched_binder b = { gate_bind, &g };
        struct sched_server_options o = { .address = "127.0.0.1:0", .binder = &b };
        cluster_units_default(&o.units);
        struct sched_server *s;
        assert_int_equal(sched_server_new(&o, &s), 0);
        struct gs_error err = { 0 };
        assert_int_equal(
                sched_snapshot_load(sched_server_lock(s), SNAPSHOT, strlen(SNAPSHOT), &o.units, NULL, NULL, &err), 0);
        sched_server_unlock(s);
        sched_server_set_ready(s, true);
        assert_int_equal(sched_server_start(s), 0);
        unsigned port = sched_server_port(s);
        char *out;
        /* SLOW_BINDS pods of 256 MiB each (one gpu-memory unit), filtered, then bound at once */
        static struct bind_call bc[SLOW_BINDS];
        pthread_t t[SLOW_BINDS];
        for (unsigned i = 0; i < SLOW_BINDS; i++) {
                char filter[512];
                snprintf(filter, sizeof filter,
                         "{\"Pod\":{\"metadata\":{\"name\":\"p%u\",\"namespace\":\"d\",\"uid\":\"uid-%u\"},"
                         "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
                         "{\"gpuslice.io/gpu-memory\":\"1\"}}}]}},\"NodeNames\":[\"gpunode\"]}",
                         i, i);
                assert_int_equal(http(port, "/filter", filter, &out), 200);
                assert_non_null(strstr(out, "\"NodeNames\":[\"gpunode\"]"));
                free(out);
                bc[i] = (struct bind_call){ .port = port };
                snprintf(bc[i].body, sizeof bc[i].body,
                         "{\"PodName\":\"p%u\",\"PodNamespace\":\"d\",\"PodUID\":\"uid-%u\",\"Node\":\"gpunode\"}", i,
                         i);
        }
        for (unsigned i = 0; i < SLOW_BINDS; i++)
                assert_int_equal(pthread_create(&t[i], NULL, bind_thread, &bc[i]), 0);
        bool all = gate_wait(&g, SLOW_BINDS, 10);
        /* the binds are parked in the API call: a filter is still answered (another pod, that fits) */
        static const char late[] =
                "{\"Pod\":{\"metadata\":{\"name\":\"late\",\"namespace\":\"d\",\"uid\":\"uid-late\"},"
                "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
                "{\"gpuslice.io/gpu-memory\":\"1\"}}}]}},\"NodeNames\":[\"gpunode\"]}";
        assert_int_equal(http(port, "/filter", late, &out), 200);
        assert_non_null(strstr(out, "\"NodeNames\":[\"gpunode\"]"));
        free(out);
        unsigned entered = gate_release(&g);
        for (unsigned i = 0; i < SLOW_BINDS; i++)
                pthread_join(t[i], NULL);
        if (!all)
                fail_msg("only %u of %u binds reached the API call at once", entered, SLOW_BINDS);
        for (unsigned i = 0; i < SLOW_BINDS; i++) {
                assert_int_equal(bc[i].status, 200);
                assert_non_null(strstr(bc[i].out, "\"Error\":\"\""));
                free(bc[i].out);
        }
        sched_server_free(s);
}

static void scores_of(json_t *j, long *ret) {
        assert_int_equal(json_array_size(j), 2);
        for (size_t i = 0; i < 2; i++)
                ret[i] = (long)json_integer_value(json_object_get(json_array_get(j, i), "Score"));
}

/* Prioritize reuses the filter's decisions for the same pod while the model stands still: the
 * scores must be the ones a fresh decision gives, and a change of the model must be seen. */
static void test_prioritize_reuse_matches_fresh(void **state) {
        (void)state;
        static const char body[] =
                "{\"Pod\":{\"metadata\":{\"name\":\"s\",\"namespace\":\"d\",\"uid\":\"share-uid\"},"
                "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
                "{\"gpuslice.io/gpu-memory\":\"16\"}}}]}},\"NodeNames\":[\"gpunode\",\"gpunode-fake\"]}";
        struct sched_server *a = server_with(NULL, "127.0.0.1:0"), *b = server_with(NULL, "127.0.0.1:0");
        sched_server_set_ready(a, true);
        sched_server_set_ready(b, true);
        /* make the nodes differ: half of gpunode-fake's only GPU is taken */
        struct sched_model *ms[2] = { sched_server_lock(a), NULL };
        struct sched_pod_info p = { .uid = "x", .ns = "d", .name = "x", .node = "gpunode-fake", .bound = true };
        p.req.n = 1;
        p.req.c[0].mem_mib = 8192;
        assert_int_equal(sched_model_set_pod(ms[0], &p), 0);
        sched_server_unlock(a);
        ms[1] = sched_server_lock(b);
        assert_int_equal(sched_model_set_pod(ms[1], &p), 0);
        sched_server_unlock(b);
        json_decref(call(sched_server_filter, a, body, strlen(body), 200));
        long reused[2], fresh[2];
        json_t *j = call(sched_server_prioritize, a, body, strlen(body), 200);
        scores_of(j, reused);
        json_decref(j);
        j = call(sched_server_prioritize, b, body, strlen(body), 200);
        scores_of(j, fresh);
        json_decref(j);
        assert_int_equal(reused[0], fresh[0]);
        assert_int_equal(reused[1], fresh[1]);
        assert_true(fresh[1] > fresh[0]); /* binpack: the busier node */
        /* the busy pod goes away after filter: prioritize must not use the stale decision */
        json_decref(call(sched_server_filter, a, body, strlen(body), 200));
        assert_int_equal(sched_model_remove_pod(sched_server_lock(a), "x"), 0);
        sched_server_unlock(a);
        j = call(sched_server_prioritize, a, body, strlen(body), 200);
        scores_of(j, reused);
        json_decref(j);
        assert_int_equal(sched_model_remove_pod(sched_server_lock(b), "x"), 0);
        sched_server_unlock(b);
        j = call(sched_server_prioritize, b, body, strlen(body), 200);
        scores_of(j, fresh);
        json_decref(j);
        assert_int_equal(reused[0], fresh[0]);
        assert_int_equal(reused[1], fresh[1]);
        assert_true(reused[1] < 8); /* the 8 GiB pod no longer counts on gpunode-fake */
        sched_server_free(a);
        sched_server_free(b);
}

/* Under frag each node's score is kept between decisions (sched_pack_memo): a node that changed in between
 * must be scored again, as a fresh server scores it. A 0.6 share: on gpunode-fake, 0.3 taken, it leaves a
 * 0.1 fragment; once that pod is gone, a 0.4 one. */
static void test_frag_memo_follows_the_model(void **state) {
        (void)state;
        static const char body[] =
                "{\"Pod\":{\"metadata\":{\"name\":\"s\",\"namespace\":\"d\",\"uid\":\"share-uid\"},"
                "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
                "{\"gpuslice.io/gpu-core\":\"60\"}}}]}},\"NodeNames\":[\"gpunode\",\"gpunode-fake\"]}";
        struct sched_server *a = server_with_policy(NULL, "127.0.0.1:0", CLUSTER_POLICY_FRAG),
                            *b = server_with_policy(NULL, "127.0.0.1:0", CLUSTER_POLICY_FRAG);
        sched_server_set_ready(a, true);
        sched_server_set_ready(b, true);
        struct sched_pod_info p = { .uid = "x", .ns = "d", .name = "x", .node = "gpunode-fake", .bound = true };
        p.req.n = 1;
        p.req.c[0].core = 30;
        assert_int_equal(sched_model_set_pod(sched_server_lock(a), &p), 0);
        sched_server_unlock(a);
        assert_int_equal(sched_model_set_pod(sched_server_lock(b), &p), 0);
        sched_server_unlock(b);
        long before[2], reused[2], fresh[2];
        /* twice: the mix is re-read at the 1st and 2nd pod (every memo stale then), not at the 3rd */
        json_decref(call(sched_server_filter, a, body, strlen(body), 200));
        json_decref(call(sched_server_filter, a, body, strlen(body), 200));
        json_t *j = call(sched_server_prioritize, a, body, strlen(body), 200);
        scores_of(j, before);
        json_decref(j);
        assert_int_equal(sched_model_remove_pod(sched_server_lock(a), "x"), 0);
        sched_server_unlock(a);
        assert_int_equal(sched_model_remove_pod(sched_server_lock(b), "x"), 0);
        sched_server_unlock(b);
        json_decref(call(sched_server_filter, a, body, strlen(body), 200));
        j = call(sched_server_prioritize, a, body, strlen(body), 200);
        scores_of(j, reused);
        json_decref(j);
        json_decref(call(sched_server_filter, b, body, strlen(body), 200));
        j = call(sched_server_prioritize, b, body, strlen(body), 200);
        scores_of(j, fresh);
        json_decref(j);
        assert_int_equal(reused[0], fresh[0]);
        assert_int_equal(reused[1], fresh[1]);
        assert_int_equal(before[0], reused[0]); /* gpunode did not change */
        assert_true(before[1] != reused[1]);    /* gpunode-fake did */
        sched_server_free(a);
        sched_server_free(b);
}

/* Two nodes of 2 GPUs and 8 cores each; on "a" a CPU-only pod asks 7 of them (kube-scheduler counts it there). */
#define GPUS2                                                                                                  \
        "\"{\\\"v\\\":1,\\\"gpus\\\":[{\\\"i\\\":0,\\\"mem\\\":16384,\\\"health\\\":\\\"ok\\\"},{\\\"i\\\":1," \
        "\\\"mem\\\":16384,\\\"health\\\":\\\"ok\\\"}],\\\"links\\\":\\\"PIX\\\"}\""
#define CPU_NODE(name)                                                                            \
        "{\"metadata\":{\"name\":\"" name "\",\"annotations\":{\"gpuslice.io/gpus\":" GPUS2 "}}," \
        "\"status\":{\"allocatable\":{\"cpu\":\"8\",\"memory\":\"64Gi\",\"nvidia.com/gpu\":\"2\"}}}"
static const char CPU_SNAPSHOT[] = "{\"nodes\":[" CPU_NODE("a") "," CPU_NODE(
        "b") "],\"pods\":[{\"metadata\":{\"name\":\"busy\",\"namespace\":"
             "\"d\",\"uid\":\"busy-uid\"},\"spec\":{\"nodeName\":\"a\",\"containers\":[{\"name\":\"c\",\"resources\":"
             "{\"requests\":{\"cpu\":\"7\",\"memory\":\"1Gi\"}}}]}}]}";

/* frag scores a GPU pod's CPU: on "a" its 1 core takes the last free one and strands the other GPU; on "b" it
 * strands nothing. Without the nodes' allocatable and the pods' CPU requests in the model both score the same. The
 * bind counts the pod's CPU on its node at once. */
static void test_frag_reads_cpu(void **state) {
        (void)state;
        static const char body[] =
                "{\"Pod\":{\"metadata\":{\"name\":\"g\",\"namespace\":\"d\",\"uid\":\"g-uid\"},"
                "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\"},\"limits\":"
                "{\"nvidia.com/gpu\":\"1\"}}}]}},\"NodeNames\":[\"a\",\"b\"]}";
        static const char bind[] = "{\"PodName\":\"g\",\"PodNamespace\":\"d\",\"PodUID\":\"g-uid\",\"Node\":\"b\"}";
        struct rec rec = { 0 };
        struct sched_binder b = { rec_bind, &rec };
        struct sched_server_options o = { .address = "127.0.0.1:0", .binder = &b, .policy = CLUSTER_POLICY_FRAG };
        cluster_units_default(&o.units);
        struct sched_server *s;
        assert_int_equal(sched_server_new(&o, &s), 0);
        struct gs_error err = { 0 };
        struct sched_model *m = sched_server_lock(s);
        assert_int_equal(sched_snapshot_load(m, CPU_SNAPSHOT, strlen(CPU_SNAPSHOT), &o.units, NULL, NULL, &err), 0);
        const struct sched_node *na = sched_model_node(m, "a"), *nb = sched_model_node(m, "b");
        assert_int_equal(na->cpu_milli, 8000);
        assert_int_equal(na->mem_mib, 65536);
        assert_int_equal(na->cpu_used, 7000);
        assert_int_equal(na->mem_used, 1024);
        assert_int_equal(nb->cpu_used, 0);
        sched_server_unlock(s);
        sched_server_set_ready(s, true);
        json_decref(call(sched_server_filter, s, body, strlen(body), 200));
        json_t *j = call(sched_server_prioritize, s, body, strlen(body), 200);
        long score[2];
        scores_of(j, score);
        json_decref(j);
        assert_true(score[1] > score[0]); /* b, where the CPU is */
        j = call(sched_server_bind, s, bind, strlen(bind), 200);
        json_decref(j);
        assert_int_equal(rec.bind_calls, 1);
        m = sched_server_lock(s);
        assert_int_equal(sched_model_node(m, "b")->cpu_used, 1000);
        sched_server_unlock(s);
        sched_server_free(s);
}

/* A pod through the feed's path (the Pod decoder, then the model) with phase, nodeName and CPU: 1 + 0.5 cores and
 * 1Gi + 512Mi in its containers, an init container of 2 cores and 1Mi, overhead 250m and 1Mi. */
static void feed_pod(struct sched_model *m, const char *node, const char *cpu2, const char *phase) {
        char text[1024];
        snprintf(
                text, sizeof text,
                "{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\",\"uid\":\"p-uid\"},\"spec\":{\"nodeName\":\"%s\","
                "\"containers\":[{\"name\":\"a\",\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"1Gi\"}}},"
                "{\"name\":\"b\",\"resources\":{\"limits\":{\"cpu\":\"%s\",\"memory\":\"512Mi\"}}}],"
                "\"initContainers\":[{\"name\":\"i\",\"resources\":{\"requests\":{\"cpu\":\"2\",\"memory\":\"1Mi\"}}}],"
                "\"overhead\":{\"cpu\":\"250m\",\"memory\":\"1Mi\"}},\"status\":{\"phase\":\"%s\"}}",
                node, cpu2, phase);
        struct cluster_units u;
        cluster_units_default(&u);
        struct cluster_pod *v = malloc(sizeof *v);
        struct gs_error err = { 0 };
        assert_int_equal(cluster_pod_decode(text, strlen(text), &u, v, &err), 0);
        struct sched_pod_info info;
        sched_pod_view_info(v, &info);
        assert_int_equal(sched_model_set_pod(m, &info), 0);
        free(v);
}

/* The model's CPU and memory per node as kube-scheduler counts them, through pod add / update / finish / delete
 * and the node's removal and return. */
static void test_model_counts_cpu_memory(void **state) {
        (void)state;
        struct sched_server *s = server_with_policy(NULL, "127.0.0.1:0", CLUSTER_POLICY_FRAG);
        struct sched_model *m = sched_server_lock(s);
        struct gs_error err = { 0 };
        struct cluster_units u;
        cluster_units_default(&u);
        assert_int_equal(sched_snapshot_load(m, CPU_SNAPSHOT, strlen(CPU_SNAPSHOT), &u, NULL, NULL, &err), 0);
        feed_pod(m, "b", "500m", "Running"); /* max(1.5, 2) + 0.25 cores; 1.5Gi + 1Mi */
        const struct sched_node *n = sched_model_node(m, "b");
        assert_int_equal(n->cpu_used, 2250);
        assert_int_equal(n->mem_used, 1537);
        feed_pod(m, "b", "3", "Running"); /* the containers now: 4 cores */
        assert_int_equal(n->cpu_used, 4250);
        assert_int_equal(sched_model_pod(m, "p-uid")->cpu_milli, 4250);
        feed_pod(m, "a", "3", "Running"); /* moved (a new pod of the same UID): counted on a only */
        assert_int_equal(n->cpu_used, 0);
        assert_int_equal(sched_model_node(m, "a")->cpu_used, 7000 + 4250);
        feed_pod(m, "a", "3", "Succeeded"); /* holds nothing */
        assert_int_equal(sched_model_node(m, "a")->cpu_used, 7000);
        assert_null(sched_model_pod(m, "p-uid"));
        feed_pod(m, "b", "500m", "Running");
        assert_int_equal(sched_model_remove_pod(m, "p-uid"), 0); /* deleted */
        assert_int_equal(n->cpu_used, 0);
        assert_int_equal(n->mem_used, 0);
        /* the node goes (its pods stay, counted on a placeholder) and comes back with new allocatable */
        assert_int_equal(sched_model_remove_node(m, "a"), 0);
        static const char again[] =
                "{\"nodes\":[{\"metadata\":{\"name\":\"a\",\"annotations\":{\"gpuslice.io/gpus\":" GPUS2
                "}},\"status\":{\"allocatable\":{\"cpu\":\"16\",\"memory\":\"1Gi\"}}}]}";
        assert_int_equal(sched_snapshot_load(m, again, strlen(again), &u, NULL, NULL, &err), 0);
        n = sched_model_node(m, "a");
        assert_int_equal(n->cpu_milli, 16000);
        assert_int_equal(n->mem_mib, 1024);
        assert_int_equal(n->cpu_used, 7000);
        assert_int_equal(n->mem_used, 1024);
        static const char bad[] =
                "{\"nodes\":[{\"metadata\":{\"name\":\"a\",\"annotations\":{\"gpuslice.io/gpus\":" GPUS2
                "}},\"status\":{\"allocatable\":{\"cpu\":\"8x\"}}}]}";
        assert_int_equal(sched_snapshot_load(m, bad, strlen(bad), &u, NULL, NULL, &err), -EINVAL);
        assert_string_equal(err.message, "nodes[0]: status.allocatable.cpu: '8x' is not a quantity");
        sched_server_unlock(s);
        sched_server_free(s);
}

/* The same node list call after call is resolved from the last filter's list: a node that arrives
 * or leaves in between must still be seen (the cache follows the model's node set). */
static void test_node_list_cache_follows_nodes(void **state) {
        (void)state;
        static const char body[] =
                "{\"Pod\":{\"metadata\":{\"name\":\"s\",\"namespace\":\"d\",\"uid\":\"cache-uid\"},"
                "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
                "{\"gpuslice.io/gpu-memory\":\"16\"}}}]}},\"NodeNames\":[\"gpunode\",\"late\",\"gpunode-fake\"]}";
        struct sched_server *s = server_with(NULL, "127.0.0.1:0");
        sched_server_set_ready(s, true);
        for (int round = 0; round < 3; round++) {
                json_t *j = call(sched_server_filter, s, body, strlen(body), 200);
                json_t *names = json_object_get(j, "NodeNames");
                json_t *failed = json_object_get(j, "FailedNodes");
                /* rounds 0 and 2: "late" has no GPUs; round 1: it has one */
                assert_int_equal(json_array_size(names), round == 1 ? 3 : 2);
                assert_int_equal(json_object_get(failed, "late") != NULL, round != 1);
                json_decref(j);
                struct sched_model *m = sched_server_lock(s);
                if (round == 0) {
                        struct cluster_node_info *ni = calloc(1, sizeof *ni);
                        assert_non_null(ni);
                        strscpy(ni->name, "late", sizeof ni->name);
                        ni->n_gpus = 1;
                        ni->gpu[0].mem_mib = 16384;
                        ni->gpu[0].healthy = true;
                        ni->link[0][0] = (struct topo_link){ TOPO_LEVEL_SELF, 0 };
                        assert_int_equal(sched_model_set_node(m, ni), 0);
                        free(ni);
                } else if (round == 1)
                        assert_int_equal(sched_model_remove_node(m, "late"), 0);
                sched_server_unlock(s);
        }
        sched_server_free(s);
}

static void add_pod(struct sched_server *s, const char *uid, const char *node, alloc_set_t gpus, bool whole,
                    uint32_t mem) {
        struct sched_pod_info p = { .uid = uid, .ns = "d", .name = uid, .node = node, .bound = true };
        p.req.n = 1;
        strscpy(p.req.c[0].name, "c", sizeof p.req.c[0].name);
        p.has_assignment = true;
        p.assign.n = 1;
        if (whole) {
                p.req.c[0].whole = (unsigned)__builtin_popcountll(gpus);
                p.assign.c[0] = (struct cluster_container_assign){ .gpus = gpus, .whole = true };
        } else {
                p.req.c[0].mem_mib = mem;
                p.assign.c[0] = (struct cluster_container_assign){ .gpus = gpus, .mem_mib = mem };
        }
        assert_int_equal(sched_model_set_pod(sched_server_lock(s), &p), 0);
        sched_server_unlock(s);
}

/* A 4 GiB share (gpu-memory 16) asked of gpunode (2 × 16 GiB, 8 GiB of GPU 0 held), gpunode-fake (1 × 16 GiB,
 * empty) and "nogpu" (not in the model), with `extra` in the Pod's spec. */
#define BEST_BODY(extra)                                                                    \
        "{\"Pod\":{\"metadata\":{\"name\":\"s\",\"namespace\":\"d\",\"uid\":\"best-uid\"}," \
        "\"spec\":{" extra "\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"     \
        "{\"gpuslice.io/gpu-memory\":\"16\"}}}]}},\"NodeNames\":[\"nogpu\",\"gpunode-fake\",\"gpunode\"]}"

/* The node of names with the highest score in a prioritize answer. */
static const char *top_host(json_t *j) {
        const char *best = NULL;
        json_int_t top = -1;
        for (size_t i = 0; i < json_array_size(j); i++) {
                json_t *h = json_array_get(j, i);
                if (json_integer_value(json_object_get(h, "Score")) > top) {
                        top = json_integer_value(json_object_get(h, "Score"));
                        best = json_string_value(json_object_get(h, "Host"));
                }
        }
        return best;
}

/* --filter-answer best: a GPU pod that fits gets only the node prioritize would rank first (binpack: the fuller
 * gpunode; spread: the empty gpunode-fake), with no failures listed: kube-scheduler then skips scoring. */
static void test_filter_answers_policy_node(void **state) {
        (void)state;
        static const char body[] = BEST_BODY("");
        static const struct {
                enum cluster_policy pol;
                const char *want;
        } cases[] = { { CLUSTER_POLICY_BINPACK, "gpunode" },
                      { CLUSTER_POLICY_SPREAD, "gpunode-fake" },
                      { CLUSTER_POLICY_FRAG, NULL } };
        for (size_t c = 0; c < ELEMENTSOF(cases); c++) {
                /* the full answer's prioritize, the reference */
                struct sched_server *full = server_answering(NULL, "127.0.0.1:0", cases[c].pol, true);
                add_pod(full, "held", "gpunode", 1, false, 8192);
                sched_server_set_ready(full, true);
                json_t *j = call(sched_server_filter, full, body, strlen(body), 200);
                assert_int_equal(json_array_size(json_object_get(j, "NodeNames")), 2);
                json_decref(j);
                static const char prio[] =
                        "{\"Pod\":{\"metadata\":{\"name\":\"s\",\"namespace\":\"d\",\"uid\":\"best-uid\"},"
                        "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
                        "{\"gpuslice.io/gpu-memory\":\"16\"}}}]}},\"NodeNames\":[\"gpunode-fake\",\"gpunode\"]}";
                j = call(sched_server_prioritize, full, prio, strlen(prio), 200);
                char ref[64];
                strscpy(ref, top_host(j), sizeof ref);
                json_decref(j);
                if (cases[c].want)
                        assert_string_equal(ref, cases[c].want);
                sched_server_free(full);

                struct sched_server *s = server_answering(NULL, "127.0.0.1:0", cases[c].pol, false);
                add_pod(s, "held", "gpunode", 1, false, 8192);
                sched_server_set_ready(s, true);
                j = call(sched_server_filter, s, body, strlen(body), 200);
                assert_string_equal(json_string_value(json_object_get(j, "Error")), "");
                json_t *names = json_object_get(j, "NodeNames");
                assert_int_equal(json_array_size(names), 1);
                assert_string_equal(json_string_value(json_array_get(names, 0)), ref);
                assert_int_equal(json_object_size(json_object_get(j, "FailedNodes")), 0);
                json_decref(j);
                sched_server_free(s);
        }
}

/* --filter-answer best still answers in full where the one node would lose something: no node fits (every
 * reason, for the event and preemption), a soft preference kube-scheduler's Score plugins weigh, a pod that asks
 * for no GPU resource (kube-scheduler's to place). */
static void test_filter_best_answers_full_when_needed(void **state) {
        (void)state;
        struct sched_server *s = server_answering(NULL, "127.0.0.1:0", CLUSTER_POLICY_BINPACK, false);
        add_pod(s, "held", "gpunode", 1, false, 8192);
        sched_server_set_ready(s, true);
        static const char none[] =
                "{\"Pod\":{\"metadata\":{\"name\":\"s\",\"namespace\":\"d\",\"uid\":\"n-uid\"},"
                "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
                "{\"gpuslice.io/gpu-memory\":\"80\"}}}]}},\"NodeNames\":[\"nogpu\",\"gpunode-fake\",\"gpunode\"]}";
        json_t *j = call(sched_server_filter, s, none, strlen(none), 200);
        assert_int_equal(json_array_size(json_object_get(j, "NodeNames")), 0);
        json_t *failed = json_object_get(j, "FailedNodes");
        assert_int_equal(json_object_size(failed), 3);
        assert_non_null(strstr(json_string_value(json_object_get(failed, "gpunode")), "needs 20 GiB"));
        assert_non_null(json_object_get(json_object_get(j, "FailedAndUnresolvableNodes"), "nogpu"));
        json_decref(j);
        static const char *const soft[] = {
                BEST_BODY("\"affinity\":{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":"
                          "[{\"weight\":1,\"preference\":{\"matchExpressions\":[{\"key\":\"k\",\"operator\":"
                          "\"Exists\"}]}}]}},"),
                BEST_BODY("\"affinity\":{\"podAntiAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":"
                          "[{\"weight\":1,\"podAffinityTerm\":{\"topologyKey\":\"h\"}}]}},"),
                BEST_BODY("\"topologySpreadConstraints\":[{\"maxSkew\":1,\"topologyKey\":\"h\","
                          "\"whenUnsatisfiable\":\"ScheduleAnyway\"}],"),
        };
        for (size_t i = 0; i < ELEMENTSOF(soft); i++) {
                j = call(sched_server_filter, s, soft[i], strlen(soft[i]), 200);
                assert_int_equal(json_array_size(json_object_get(j, "NodeNames")), 2);
                assert_non_null(json_object_get(json_object_get(j, "FailedNodes"), "nogpu"));
                json_decref(j);
        }
        /* a hard spread constraint is kube-scheduler's filter, not a preference: one node */
        static const char hard[] = BEST_BODY("\"topologySpreadConstraints\":[{\"maxSkew\":1,\"topologyKey\":\"h\","
                                             "\"whenUnsatisfiable\":\"DoNotSchedule\"}],");
        j = call(sched_server_filter, s, hard, strlen(hard), 200);
        assert_int_equal(json_array_size(json_object_get(j, "NodeNames")), 1);
        json_decref(j);
        static const char cpu[] = "{\"Pod\":{\"metadata\":{\"name\":\"s\",\"namespace\":\"d\",\"uid\":\"c-uid\"},"
                                  "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":"
                                  "{\"cpu\":\"1\"}}}]}},\"NodeNames\":[\"nogpu\",\"gpunode-fake\",\"gpunode\"]}";
        j = call(sched_server_filter, s, cpu, strlen(cpu), 200);
        assert_int_equal(json_array_size(json_object_get(j, "NodeNames")), 3);
        json_decref(j);
        sched_server_free(s);
}

#define PREEMPT_POD                                                                                                  \
        "\"Pod\":{\"metadata\":{\"name\":\"hi\",\"namespace\":\"d\",\"uid\":\"hi-uid\"},\"spec\":{\"containers\":[{" \
        "\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}"

/* preempt keeps exactly the candidate nodes where evicting the given victims frees a GPU the pod
 * fits on, with their victims as given; the model is unchanged afterwards. */
static void test_preempt(void **state) {
        (void)state;
        struct sched_server *s = server_with(NULL, "127.0.0.1:0");
        add_pod(s, "a", "gpunode", 1, true, 0);
        add_pod(s, "b", "gpunode", 2, true, 0);
        add_pod(s, "c", "gpunode-fake", 1, false, 8192);
        static const char body[] = "{" PREEMPT_POD ",\"NodeNameToMetaVictims\":{"
                                   "\"gpunode\":{\"Pods\":[{\"UID\":\"a\"}],\"NumPDBViolations\":1},"
                                   "\"gpunode-fake\":{\"Pods\":[{\"UID\":\"zzz\"}],\"NumPDBViolations\":0},"
                                   "\"nowhere\":{\"Pods\":[{\"UID\":\"b\"}],\"NumPDBViolations\":0}}}";
        /* not synced: nothing is evicted */
        json_t *j = call(sched_server_preempt, s, body, strlen(body), 503);
        assert_int_equal(json_object_size(json_object_get(j, "NodeNameToMetaVictims")), 0);
        json_decref(j);
        sched_server_set_ready(s, true);
        uint64_t gen = sched_model_generation(sched_server_lock(s));
        sched_server_unlock(s);
        j = call(sched_server_preempt, s, body, strlen(body), 200);
        json_t *m = json_object_get(j, "NodeNameToMetaVictims");
        assert_int_equal(json_object_size(m), 1); /* the others free no GPU (zzz holds none; no GPUs) */
        json_t *v = json_object_get(m, "gpunode");
        assert_non_null(v);
        assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(v, "Pods"), 0), "UID")),
                            "a");
        assert_int_equal(json_integer_value(json_object_get(v, "NumPDBViolations")), 1);
        json_decref(j);
        /* the model is as before: both GPUs of gpunode are still held */
        struct sched_model *mod = sched_server_lock(s);
        const struct sched_node *n = sched_model_node(mod, "gpunode");
        assert_int_equal(n->gpu[0].whole + n->gpu[1].whole, 2);
        assert_int_equal(sched_model_generation(mod), gen);
        sched_server_unlock(s);
        /* full pods (nodeCacheCapable false): the share on gpunode-fake goes, a whole GPU is free */
        static const char full[] = "{" PREEMPT_POD ",\"NodeNameToVictims\":{\"gpunode-fake\":{\"Pods\":["
                                   "{\"metadata\":{\"name\":\"c\",\"namespace\":\"d\",\"uid\":\"c\"}}],"
                                   "\"NumPDBViolations\":0},\"gpunode\":{\"Pods\":[],\"NumPDBViolations\":0}}}";
        j = call(sched_server_preempt, s, full, strlen(full), 200);
        m = json_object_get(j, "NodeNameToMetaVictims");
        assert_int_equal(json_object_size(m), 1);
        assert_non_null(json_object_get(m, "gpunode-fake"));
        json_decref(j);
        /* malformed bodies answer 400 and no node */
        static const char *const bad[] = {
                "",
                "[]",
                "{\"NodeNameToMetaVictims\":{}}",
                "{" PREEMPT_POD "}",
                "{" PREEMPT_POD ",\"NodeNameToMetaVictims\":[]}",
                "{" PREEMPT_POD ",\"NodeNameToMetaVictims\":{\"n\":7}}",
                "{" PREEMPT_POD ",\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":{}}}}",
                "{" PREEMPT_POD ",\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":[{}]}}}",
                "{" PREEMPT_POD ",\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":[{\"UID\":\"\"}]}}}",
                "{" PREEMPT_POD ",\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":[{\"UID\":5}]}}}",
                "{" PREEMPT_POD ",\"NodeNameToMetaVictims\":{\"n\":{\"NumPDBViolations\":-1}}}",
                "{" PREEMPT_POD ",\"NodeNameToMetaVictims\":{\"\":{}}}",
                "{" PREEMPT_POD ",\"NodeNameToVictims\":{\"n\":{\"Pods\":[{\"metadata\":{}}]}}}",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                char *out;
                size_t out_len;
                if (sched_server_preempt(s, bad[i], strlen(bad[i]), &out, &out_len) != 400)
                        fail_msg("case %zu not refused", i);
                assert_non_null(strstr(out, "\"NodeNameToMetaVictims\":{}"));
                free(out);
        }
        sched_server_free(s);
}

/* The GPU bind gives the share of share-frag.filter.json (10 %) under policy, the cluster loaded from snapshot. */
static int bound_share_gpu(const char *snapshot, enum cluster_policy policy) {
        struct rec rec = { 0 };
        struct sched_binder b = { rec_bind, &rec };
        struct sched_server_options o = { .address = "127.0.0.1:0", .binder = &b, .policy = policy };
        cluster_units_default(&o.units);
        struct sched_server *s;
        assert_int_equal(sched_server_new(&o, &s), 0);
        size_t len;
        char *snap = sample(snapshot, &len);
        struct gs_error err = { 0 };
        assert_int_equal(sched_snapshot_load(sched_server_lock(s), snap, len, &o.units, NULL, NULL, &err), 0);
        sched_server_unlock(s);
        free(snap);
        sched_server_set_ready(s, true);
        char *body = sample("share-frag.filter.json", &len);
        json_t *j = call(sched_server_filter, s, body, len, 200);
        assert_int_equal(json_array_size(json_object_get(j, "NodeNames")), 1);
        json_decref(j);
        free(body);
        body = sample("share-frag.bind.json", &len);
        j = call(sched_server_bind, s, body, len, 200);
        assert_string_equal(json_string_value(json_object_get(j, "Error")), "");
        json_decref(j);
        free(body);
        json_t *ann = json_loads(rec.annotations, 0, NULL);
        json_t *asg = json_loads(json_string_value(json_object_get(ann, "gpuslice.io/assignment")), 0, NULL);
        json_t *c0 = json_array_get(json_object_get(asg, "containers"), 0);
        int gpu = (int)json_integer_value(json_array_get(json_object_get(c0, "gpus"), 0));
        json_decref(asg);
        json_decref(ann);
        s = sched_server_free(s);
        return gpu;
}

/* A share under a packing policy is bound to the policy's GPU (sched_pack_share_gpu), not the fit's best
 * fit: GPU 0 has 15 % free, GPU 1 70 %, and eight 10 % shares run on another node; a 10 % share on GPU 0
 * would leave 5 % no share of the mix (mostly 10 %) can use, so frag takes GPU 1 where binpack takes GPU 0. */
static void test_bind_share_by_policy(void **state) {
        (void)state;
        assert_int_equal(bound_share_gpu("share-frag-seed10.snapshot.json", CLUSTER_POLICY_BINPACK), 0);
        assert_int_equal(bound_share_gpu("share-frag-seed10.snapshot.json", CLUSTER_POLICY_FRAG), 1);
}

/* A restarted extender's mix is seeded from the pods it lists at start (mix_seed): the same node beside
 * eight running 70 % shares instead makes 70 % the likely next request, which GPU 1's 70 % free serves and
 * the 10 % share would spoil, so frag takes GPU 0 (its 15 % no 70 % share can use anyway). With the mix
 * empty at start (the pod alone, 10 %) both would take GPU 1. */
static void test_restart_seeds_mix(void **state) {
        (void)state;
        assert_int_equal(bound_share_gpu("share-frag-seed70.snapshot.json", CLUSTER_POLICY_FRAG), 0);
        assert_int_equal(bound_share_gpu("share-frag-seed10.snapshot.json", CLUSTER_POLICY_FRAG), 1);
}

int main(void) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_filter_prioritize_bind),
                cmocka_unit_test(test_bind_share_by_policy),
                cmocka_unit_test(test_restart_seeds_mix),
                cmocka_unit_test(test_bind_refused_conflict_failed),
                cmocka_unit_test(test_http_endpoints),
                cmocka_unit_test(test_prioritize_reuse_matches_fresh),
                cmocka_unit_test(test_frag_memo_follows_the_model),
                cmocka_unit_test(test_frag_reads_cpu),
                cmocka_unit_test(test_model_counts_cpu_memory),
                cmocka_unit_test(test_slow_bind_does_not_block_filter),
                cmocka_unit_test(test_node_list_cache_follows_nodes),
                cmocka_unit_test(test_preempt),
                cmocka_unit_test(test_filter_answers_policy_node),
                cmocka_unit_test(test_filter_best_answers_full_when_needed),
        };
        int r = cmocka_run_group_tests(tests, NULL, NULL);
        curl_global_cleanup();
        return r;
}
