/* SPDX-License-Identifier: Apache-2.0 */
/* test-kube — the pure parts of the Kubernetes client (src/kube) and of the node publisher
 * (src/agent/publish.c): kubeconfig parsing and its errors, in-cluster configuration, the watch
 * stream decoder fed in every possible split, Status errors, backoff bounds, slimming, and the
 * label/annotation merge patch (the annotations themselves: test-cluster.c). The network paths are covered by
 * tests/integration/test_kube.py (stand-in) and tests/e2e (real kube-apiserver). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "helpers.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/publish.h"
#include "cluster/cluster.h"
#include "kube/kube-internal.h"
#include "kube/kube.h"
#include "topo/topo.h"
#include "util/util.h"

#define CA_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJmYWtlCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"
#define KEY_B64 "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1JSUVmYWtlCi0tLS0tRU5EIFBSSVZBVEUgS0VZLS0tLS0K"

/* As kubectl writes it (kind-style): lists at the parent's indentation, quoted and plain scalars. */
static const char kubectl_yaml[] = "apiVersion: v1\n"
                                   "clusters:\n"
                                   "- cluster:\n"
                                   "    certificate-authority-data: " CA_B64 "\n"
                                   "    server: https://127.0.0.1:6443/\n"
                                   "  name: kind-a\n"
                                   "- cluster:\n"
                                   "    insecure-skip-tls-verify: true\n"
                                   "    server: \"https://other:443\"\n"
                                   "  name: other\n"
                                   "contexts:\n"
                                   "- context:\n"
                                   "    cluster: kind-a\n"
                                   "    user: admin\n"
                                   "    namespace: gpu\n"
                                   "  name: a\n"
                                   "- context: {cluster: other, user: tok}\n"
                                   "  name: b\n"
                                   "current-context: a\n"
                                   "kind: Config\n"
                                   "preferences: {}\n"
                                   "users:\n"
                                   "- name: admin\n"
                                   "  user:\n"
                                   "    client-certificate-data: " CA_B64 "\n"
                                   "    client-key-data: " KEY_B64 "\n"
                                   "- name: tok\n"
                                   "  user:\n"
                                   "    token: 'abc.def'\n"
                                   "    tokenFile: tokens/t\n";

static int parse(const char *text, const char *ctx, struct kube_config *c, struct gs_error *err) {
        gs_error_clear(err);
        return kube_config_parse(text, strlen(text), "/etc/k/config", ctx, c, err);
}

static void test_kubeconfig_kubectl_style(void **state) {
        (void)state;
        struct kube_config c;
        struct gs_error err = { 0 };
        assert_int_equal(parse(kubectl_yaml, NULL, &c, &err), 0);
        assert_string_equal(c.server, "https://127.0.0.1:6443");
        assert_non_null(c.ca_pem);
        assert_non_null(strstr(c.ca_pem, "BEGIN CERTIFICATE"));
        assert_non_null(strstr(c.cert_pem, "BEGIN CERTIFICATE"));
        assert_non_null(strstr(c.key_pem, "BEGIN PRIVATE KEY"));
        assert_null(c.token);
        assert_false(c.insecure);
        assert_string_equal(c.namespace_, "gpu");
        assert_string_equal(c.source, "/etc/k/config");
        kube_config_done(&c);

        assert_int_equal(parse(kubectl_yaml, "b", &c, &err), 0);
        assert_string_equal(c.server, "https://other:443");
        assert_true(c.insecure);
        assert_string_equal(c.token, "abc.def");
        assert_string_equal(c.token_file, "/etc/k/tokens/t"); /* relative to the file */
        assert_null(c.ca_pem);
        kube_config_done(&c);
}

static void test_kubeconfig_json(void **state) {
        (void)state;
        struct kube_config c;
        struct gs_error err = { 0 };
        const char *j =
                "{\"kind\":\"Config\",\"current-context\":\"x\","
                "\"contexts\":[{\"name\":\"x\",\"context\":{\"cluster\":\"c\",\"user\":\"u\"}}],"
                "\"clusters\":[{\"name\":\"c\",\"cluster\":{\"server\":\"http://127.0.0.1:8080\","
                "\"certificate-authority\":\"/abs/ca.crt\"}}],"
                "\"users\":[{\"name\":\"u\",\"user\":{\"client-certificate\":\"c.pem\",\"client-key\":\"k.pem\"}}]}";
        assert_int_equal(parse(j, NULL, &c, &err), 0);
        assert_string_equal(c.server, "http://127.0.0.1:8080");
        assert_string_equal(c.ca_file, "/abs/ca.crt");
        assert_string_equal(c.cert_file, "/etc/k/c.pem");
        assert_string_equal(c.key_file, "/etc/k/k.pem");
        kube_config_done(&c);
}

/* Every refusal names the file and the field. */
static void test_kubeconfig_errors(void **state) {
        (void)state;
        static const struct {
                const char *text, *ctx, *want;
                int r;
        } cases[] = {
                { "", NULL, "/etc/k/config: empty file", -EINVAL },
                { "- a\n- b\n", NULL, "not a mapping", -EINVAL },
                { "kind: Pod\n", NULL, "kind: expected Config", -EINVAL },
                { "kind: Config\n", NULL, "current-context: not set", -EINVAL },
                { "current-context: a\ncontexts: []\n", NULL, "contexts: no entry named 'a'", -EINVAL },
                { "current-context: a\ncontexts:\n- name: a\n", NULL, "contexts[name=a].context: missing", -EINVAL },
                { "current-context: a\ncontexts:\n- name: a\n  context: {user: u}\n", NULL,
                  "contexts[name=a].context.cluster: missing", -EINVAL },
                { "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\nclusters:\n- name: c\n  "
                  "cluster: {}\n",
                  NULL, "clusters[name=c].cluster.server: missing", -EINVAL },
                { "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\nclusters:\n- name: c\n  "
                  "cluster: {server: ftp://x}\n",
                  NULL, "server: not an http(s) URL", -EINVAL },
                /* found by fuzz-kube-config: no host, and the trailing '/' stripped made it "https:" */
                { "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\nclusters:\n- name: c\n  "
                  "cluster: {server: 'https://'}\n",
                  NULL, "server: not an http(s) URL", -EINVAL },
                { "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\nclusters:\n- name: c\n  "
                  "cluster: {server: 'https://x', certificate-authority-data: '!!notbase64'}\n",
                  NULL, "certificate-authority-data: not valid base64", -EINVAL },
                { "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\nclusters:\n- name: c\n  "
                  "cluster: {server: 'https://x', certificate-authority-data: aGVsbG8=}\n",
                  NULL, "certificate-authority-data: does not hold PEM data", -EINVAL },
                { "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c}\nclusters:\n- name: c\n  "
                  "cluster: {server: 'https://x', insecure-skip-tls-verify: maybe}\n",
                  NULL, "insecure-skip-tls-verify: expected true or false", -EINVAL },
                { "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n  "
                  "cluster: {server: 'https://x'}\nusers:\n- name: u\n  user:\n    exec: {command: aws}\n",
                  NULL, "users[name=u].user: exec and auth-provider credentials are not supported", -ENOTSUP },
                { "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n  "
                  "cluster: {server: 'https://x'}\nusers:\n- name: u\n  user: {client-certificate: c.pem}\n",
                  NULL, "a client certificate without its client-key", -EINVAL },
                { "current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: nobody}\nclusters:\n- "
                  "name: c\n  cluster: {server: 'https://x'}\n",
                  NULL, "users: no entry named 'nobody'", -EINVAL },
                { "a: &x [1]\nb: *x\n", NULL, "aliases are not accepted", -EINVAL },
                { "a: 1\na: 2\n", NULL, "duplicate key 'a'", -EINVAL },
                { "a: [1\n", NULL, "/etc/k/config: line", -EINVAL },
                { "--- {a: 1}\n--- {b: 2}\n", NULL, "more than one YAML document", -EINVAL },
                { "current-context: [x]\n", NULL, "current-context: not a string", -EINVAL },
                { "current-context: a\ncontexts: 5\n", NULL, "contexts: not a list", -EINVAL },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct kube_config c;
                struct gs_error err = { 0 };
                int r = parse(cases[i].text, cases[i].ctx, &c, &err);
                if (r != cases[i].r || !strstr(err.message, cases[i].want) || !strstr(err.message, "/etc/k/config"))
                        fail_msg("case %zu: r=%d err='%s', want %d '%s'", i, r, err.message, cases[i].r, cases[i].want);
        }
}

static void test_kubeconfig_deep_nesting_refused(void **state) {
        (void)state;
        char text[400];
        size_t n = 0;
        for (int i = 0; i < 100; i++)
                text[n++] = '[';
        text[n] = 0;
        struct kube_config c;
        struct gs_error err = { 0 };
        assert_int_equal(parse(text, NULL, &c, &err), -EINVAL);
        assert_non_null(strstr(err.message, "nested too deeply"));
}

static void test_base64(void **state) {
        (void)state;
        char *out;
        size_t n;
        assert_int_equal(kube_base64_decode("aGVsbG8=", 8, &out, &n), 0);
        assert_int_equal(n, 5);
        assert_string_equal(out, "hello");
        free(out);
        assert_int_equal(kube_base64_decode("aGVs\nbG8h", 9, &out, &n), 0);
        assert_string_equal(out, "hello!");
        free(out);
        const char *bad[] = { "a", "aGVsbG8=x", "aGV=sbG8", "a===", "@@@@" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(kube_base64_decode(bad[i], strlen(bad[i]), &out, &n), -EINVAL);
}

static void test_in_cluster(void **state) {
        (void)state;
        char *dir = test_tmpdir_new("kube-sa"), p[PATH_MAX];
        struct kube_config c;
        struct gs_error err = { 0 };
        unsetenv("KUBERNETES_SERVICE_HOST");
        assert_int_equal(kube_config_in_cluster(dir, &c, &err), -ENOENT);
        assert_non_null(strstr(err.message, "KUBERNETES_SERVICE_HOST"));
        setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
        setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
        assert_int_equal(kube_config_in_cluster(dir, &c, &err), -ENOENT); /* no token yet */
        snprintf(p, sizeof p, "%s/token", dir);
        FILE *f = fopen(p, "w");
        fputs("tok\n", f);
        fclose(f);
        snprintf(p, sizeof p, "%s/namespace", dir);
        f = fopen(p, "w");
        fputs("kube-system\n", f);
        fclose(f);
        assert_int_equal(kube_config_in_cluster(dir, &c, &err), 0);
        assert_string_equal(c.server, "https://[fd00::1]:6443");
        assert_non_null(strstr(c.token_file, "/token"));
        assert_null(c.ca_file);
        assert_string_equal(c.namespace_, "kube-system");
        kube_config_done(&c);
        unsetenv("KUBERNETES_SERVICE_HOST");
        unsetenv("KUBERNETES_SERVICE_PORT");
        assert_int_equal(test_tmpdir_free(dir), 0);
}

/* ---- watch decoder ---- */

struct seen {
        unsigned n;
        enum kube_event_type type[8];
        char rv[8][16];
        long code[8];
};

static int on_event(const struct kube_event *ev, void *u) {
        struct seen *s = u;
        if (s->n < 8) {
                s->type[s->n] = ev->type;
                strscpy(s->rv[s->n], ev->resource_version ? ev->resource_version : "", sizeof s->rv[0]);
                s->code[s->n] = ev->code;
        }
        s->n++;
        return 0;
}

static const char stream[] =
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"10\"}}}\n"
        "\r\n"
        "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"11\"}}}\r\n"
        "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"12\"}}}\n"
        "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"13\"}}}\n"
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}}\n";

/* Every split of the stream into two chunks, and byte-by-byte, decodes the same five events. */
static void test_decoder_splits(void **state) {
        (void)state;
        size_t len = strlen(stream);
        for (size_t cut = 0; cut <= len; cut++) {
                struct seen s = { 0 };
                struct kube_watch_decoder d;
                kube_watch_decoder_init(&d, 0, on_event, &s);
                assert_int_equal(kube_watch_decoder_feed(&d, stream, cut), 0);
                assert_int_equal(kube_watch_decoder_feed(&d, stream + cut, len - cut), 0);
                assert_int_equal(s.n, 5);
                assert_int_equal(kube_watch_decoder_pending(&d), 0);
                kube_watch_decoder_done(&d);
                assert_int_equal(s.type[0], KUBE_EVENT_ADDED);
                assert_string_equal(s.rv[0], "10");
                assert_int_equal(s.type[1], KUBE_EVENT_MODIFIED);
                assert_int_equal(s.type[2], KUBE_EVENT_BOOKMARK);
                assert_string_equal(s.rv[2], "12");
                assert_int_equal(s.type[3], KUBE_EVENT_DELETED);
                assert_int_equal(s.type[4], KUBE_EVENT_ERROR);
                assert_int_equal(s.code[4], 410);
        }
        struct seen s = { 0 };
        struct kube_watch_decoder d;
        kube_watch_decoder_init(&d, 0, on_event, &s);
        for (size_t i = 0; i < len; i++)
                assert_int_equal(kube_watch_decoder_feed(&d, stream + i, 1), 0);
        assert_int_equal(s.n, 5);
        kube_watch_decoder_done(&d);
}

/* A stream cut mid-event leaves the partial event buffered, never delivered. */
static void test_decoder_cut_mid_event(void **state) {
        (void)state;
        struct seen s = { 0 };
        struct kube_watch_decoder d;
        kube_watch_decoder_init(&d, 0, on_event, &s);
        assert_int_equal(kube_watch_decoder_feed(&d, stream, 100), 0);
        assert_int_equal(s.n, 1);
        assert_true(kube_watch_decoder_pending(&d) > 0);
        kube_watch_decoder_done(&d);
}

static void test_decoder_malformed(void **state) {
        (void)state;
        static const struct {
                const char *line;
                int r;
                const char *why;
        } bad[] = {
                { "not json\n", -EPROTO, "not JSON" },
                { "[1,2]\n", -EPROTO, "type" },
                { "{\"type\":5,\"object\":{}}\n", -EPROTO, "type" },
                { "{\"type\":\"ADDED\"}\n", -EPROTO, "without an object" },
                { "{\"type\":\"ADDED\",\"object\":[]}\n", -EPROTO, "without an object" },
                { "{\"type\":\"EXPLODED\",\"object\":{}}\n", -EPROTO, "unknown event type" },
                { "{\"type\":\"BOOKMARK\",\"object\":{}}\n", -EPROTO, "BOOKMARK without" },
                { "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":7}}}\n", -EPROTO, "not a string" },
                { "{\"type\":\"ADDED\",\"type\":\"ADDED\",\"object\":{}}\n", -EPROTO, "not JSON" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct seen s = { 0 };
                struct kube_watch_decoder d;
                kube_watch_decoder_init(&d, 0, on_event, &s);
                int r = kube_watch_decoder_feed(&d, bad[i].line, strlen(bad[i].line));
                if (r != bad[i].r || !strstr(d.error, bad[i].why) || s.n != 0)
                        fail_msg("case %zu: r=%d error='%s' events=%u", i, r, d.error, s.n);
                kube_watch_decoder_done(&d);
        }
        /* a line longer than the bound, even without its newline yet */
        struct seen s = { 0 };
        struct kube_watch_decoder d;
        kube_watch_decoder_init(&d, 64, on_event, &s);
        char big[100];
        memset(big, 'x', sizeof big);
        assert_int_equal(kube_watch_decoder_feed(&d, big, 50), 0);
        assert_int_equal(kube_watch_decoder_feed(&d, big, 50), -E2BIG);
        kube_watch_decoder_done(&d);
}

static int stop_at_second(const struct kube_event *ev, void *u) {
        (void)ev;
        return ++*(int *)u == 2 ? -ECANCELED : 0;
}

static void test_decoder_callback_error(void **state) {
        (void)state;
        int n = 0;
        struct kube_watch_decoder d;
        kube_watch_decoder_init(&d, 0, stop_at_second, &n);
        assert_int_equal(kube_watch_decoder_feed(&d, stream, strlen(stream)), -ECANCELED);
        assert_int_equal(n, 2);
        kube_watch_decoder_done(&d);
}

/* ---- errors, backoff, escaping ---- */

static void test_status_decode(void **state) {
        (void)state;
        struct kube_error e;
        const char *st = "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"nodes \\\"x\\\" not found\","
                         "\"reason\":\"NotFound\",\"code\":404}";
        kube_status_decode(st, strlen(st), 404, &e);
        assert_int_equal(e.http, 404);
        assert_string_equal(e.reason, "NotFound");
        assert_string_equal(e.message, "nodes \"x\" not found");
        kube_status_decode("<html>\x01oops", 11, 502, &e);
        assert_string_equal(e.reason, "");
        assert_string_equal(e.message, "<html> oops");
        kube_status_decode(NULL, 0, 503, &e);
        assert_string_equal(e.message, "HTTP 503");
        assert_int_equal(kube_errno_from_http(200, NULL), 0);
        assert_int_equal(kube_errno_from_http(404, NULL), -ENOENT);
        assert_int_equal(kube_errno_from_http(409, "Conflict"), -ESTALE);
        assert_int_equal(kube_errno_from_http(409, "AlreadyExists"), -EEXIST);
        assert_int_equal(kube_errno_from_http(410, "Expired"), -EIDRM);
        assert_int_equal(kube_errno_from_http(403, NULL), -EACCES);
        assert_int_equal(kube_errno_from_http(429, NULL), -EAGAIN);
        assert_int_equal(kube_errno_from_http(500, NULL), -EAGAIN);
        assert_int_equal(kube_errno_from_http(302, NULL), -EPROTO);
}

static void test_backoff(void **state) {
        (void)state;
        for (unsigned a = 0; a < 40; a++)
                for (uint32_t rnd = 0; rnd < 5000; rnd += 97) {
                        unsigned ms = kube_backoff_ms(a, 500, 30000, rnd * 2654435761u);
                        unsigned base = a >= 6 ? 30000 : MIN(30000u, 500u << a);
                        if (ms < base / 2 || ms > base)
                                fail_msg("attempt %u: %u not in [%u, %u]", a, ms, base / 2, base);
                }
        /* jitter: different random values give different delays */
        assert_int_not_equal(kube_backoff_ms(3, 500, 30000, 1), kube_backoff_ms(3, 500, 30000, 1000));
}

static void test_escape(void **state) {
        (void)state;
        char b[64];
        assert_string_equal(kube_escape("metadata.name=n 1/x", b, sizeof b), "metadata.name%3Dn%201%2Fx");
        assert_null(kube_escape("abcdef", b, 4));
        assert_null(kube_escape("=", b, 3));
}

/* ---- node annotation ---- */

static json_t *pod(const char *name, const char *node, const char *res, const char *ann) {
        char buf[2048];
        snprintf(buf, sizeof buf,
                 "{\"metadata\":{\"namespace\":\"ns\",\"name\":\"%s\",\"annotations\":%s},"
                 "\"spec\":{\"nodeName\":\"%s\",\"containers\":[{\"name\":\"main\",\"image\":\"x\","
                 "\"resources\":{\"limits\":%s}}]},\"status\":{\"phase\":\"Running\"}}",
                 name, ann, node, res);
        json_error_t je;
        json_t *j = json_loads(buf, 0, &je);
        if (!j)
                fail_msg("bad test pod: %s", je.text);
        return j;
}

static void test_slim(void **state) {
        (void)state;
        json_t *p =
                pod("a", "n1", "{\"nvidia.com/gpu\":\"1\",\"cpu\":\"4\",\"memory\":\"1Gi\"}",
                    "{\"gpuslice.io/assignment\":\"x\",\"kubectl.kubernetes.io/last-applied-configuration\":\"big\"}");
        json_t *s = kube_slim_pod(p);
        assert_non_null(s);
        json_t *lim = json_object_get(
                json_object_get(json_array_get(json_object_get(json_object_get(s, "spec"), "containers"), 0),
                                "resources"),
                "limits");
        assert_int_equal(json_object_size(lim), 1);
        assert_non_null(json_object_get(lim, "nvidia.com/gpu"));
        json_t *an = json_object_get(json_object_get(s, "metadata"), "annotations");
        assert_int_equal(json_object_size(an), 1);
        assert_string_equal(json_string_value(json_object_get(json_object_get(s, "spec"), "nodeName")), "n1");
        json_decref(s);
        json_decref(p);
        p = pod("b", "n1", "{\"cpu\":\"1\"}", "{}");
        assert_null(kube_slim_pod(p)); /* no GPU at all: not cached */
        /* the extender's: a bound pod asking CPU is kept, with its CPU and memory (init containers', overhead's) */
        json_t *spec = json_object_get(p, "spec");
        json_object_set_new(spec, "initContainers",
                            json_pack("[{s:s, s:{s:{s:s, s:s}}}]", "name", "i", "resources", "requests", "memory",
                                      "1Gi", "ephemeral-storage", "1Gi"));
        json_object_set_new(spec, "overhead", json_pack("{s:s, s:s}", "cpu", "10m", "pods", "1"));
        s = kube_slim_pod_requests(p);
        assert_non_null(s);
        char *dump = json_dumps(json_object_get(s, "spec"), JSON_COMPACT | JSON_SORT_KEYS);
        assert_string_equal(dump, "{\"containers\":[{\"name\":\"main\",\"resources\":{\"limits\":{\"cpu\":\"1\"}}}],"
                                  "\"initContainers\":[{\"name\":\"i\",\"resources\":{\"requests\":{\"memory\":"
                                  "\"1Gi\"}}}],\"nodeName\":\"n1\",\"overhead\":{\"cpu\":\"10m\"}}");
        free(dump);
        json_decref(s);
        json_object_set_new(spec, "nodeName", json_string("")); /* pending, no GPU: not the extender's */
        assert_null(kube_slim_pod_requests(p));
        json_decref(p);
        p = pod("b2", "n1", "{\"nvidia.com/gpu\":\"1\",\"cpu\":\"2\"}", "{}");
        s = kube_slim_pod_requests(p); /* a GPU pod keeps its CPU too */
        assert_non_null(s);
        assert_string_equal(
                json_string_value(json_object_get(
                        json_object_get(
                                json_object_get(
                                        json_array_get(json_object_get(json_object_get(s, "spec"), "containers"), 0),
                                        "resources"),
                                "limits"),
                        "cpu")),
                "2");
        json_decref(s);
        json_decref(p);
        p = pod("b3", "n1", "{}", "{}");
        assert_null(kube_slim_pod_requests(p)); /* bound, asks nothing */
        json_decref(p);
        p = pod("c", "n1", "{\"nvidia.com/gpu\":\"1\"}", "{}");
        json_object_set_new(json_object_get(p, "status"), "phase", json_string("Failed"));
        assert_null(kube_slim_pod(p));
        json_decref(p);

        json_t *node = json_loads("{\"metadata\":{\"name\":\"n\",\"resourceVersion\":\"5\",\"labels\":{\"a\":\"b\","
                                  "\"nvidia.com/gpu.product\":\"X\"},\"annotations\":{\"gpuslice.io/gpus\":\"{}\","
                                  "\"other\":\"y\"},\"managedFields\":[{}]},\"status\":{\"capacity\":{\"cpu\":\"8\","
                                  "\"nvidia.com/gpu\":\"8\"},\"images\":[{}]}}",
                                  0, NULL);
        s = kube_slim_node(node);
        char *d = json_dumps(s, JSON_COMPACT | JSON_SORT_KEYS);
        assert_string_equal(d,
                            "{\"metadata\":{\"annotations\":{\"gpuslice.io/gpus\":\"{}\"},\"labels\":{\"nvidia.com/"
                            "gpu.product\":\"X\"},\"name\":\"n\",\"resourceVersion\":\"5\"},\"status\":{\"capacity\":{"
                            "\"nvidia.com/gpu\":\"8\"}}}");
        free(d);
        json_decref(s);
        json_decref(node);
}

/* ---- publish: labels and the merge patch ---- */

static void test_publish_labels_and_diff(void **state) {
        (void)state;
        struct topo *t = malloc(sizeof *t);
        test_topo_a100x3(t);
        bool healthy[3] = { true, false, true };
        json_t *l = publish_labels(t, healthy, NULL);
        free(t);
        assert_string_equal(json_string_value(json_object_get(l, "nvidia.com/gpu.product")), "NVIDIA-A100-SXM4-40GB");
        assert_string_equal(json_string_value(json_object_get(l, "nvidia.com/gpu.count")), "3");
        assert_string_equal(json_string_value(json_object_get(l, "nvidia.com/gpu.memory")), "40960");
        assert_string_equal(json_string_value(json_object_get(l, "nvidia.com/gpu.present")), "true");
        assert_string_equal(json_string_value(json_object_get(l, "nvidia.com/cuda.driver.major")), "535");
        assert_string_equal(json_string_value(json_object_get(l, "nvidia.com/cuda.driver.minor")), "104");
        assert_string_equal(json_string_value(json_object_get(l, "nvidia.com/cuda.driver.rev")), "05");
        assert_string_equal(json_string_value(json_object_get(l, "nvidia.com/cuda.runtime.major")), "12");
        assert_string_equal(json_string_value(json_object_get(l, "nvidia.com/cuda.runtime.minor")), "2");
        assert_string_equal(json_string_value(json_object_get(l, "nvidia.com/gpu.compute.major")), "8");
        assert_string_equal(json_string_value(json_object_get(l, "nvidia.com/gpu.family")), "ampere");
        assert_string_equal(json_string_value(json_object_get(l, "gpuslice.io/gpu.healthy")), "2");
        assert_string_equal(json_string_value(json_object_get(l, "gpuslice.io/nvlink")), "true");

        /* a node with nothing: everything is sent */
        json_t *node = json_loads("{\"metadata\":{\"name\":\"n\",\"labels\":{\"kubernetes.io/hostname\":\"n\","
                                  "\"nvidia.com/gpu.machine\":\"DGX\",\"gpuslice.io/stale\":\"1\","
                                  "\"nvidia.com/cuda.driver-version.full\":\"1.2\"}}}",
                                  0, NULL);
        json_t *p = publish_diff(node, l, "{\"v\":1}");
        assert_non_null(p);
        json_t *pl = json_object_get(json_object_get(p, "metadata"), "labels");
        assert_true(json_object_size(pl) >= json_object_size(l));
        assert_true(json_is_null(json_object_get(pl, "gpuslice.io/stale"))); /* ours, gone: removed */
        assert_null(json_object_get(pl, "kubernetes.io/hostname"));          /* not ours: untouched */
        assert_null(json_object_get(pl, "nvidia.com/gpu.machine"));          /* GFD's, not ours */
        assert_string_equal(json_string_value(json_object_get(
                                    json_object_get(json_object_get(p, "metadata"), "annotations"), CLUSTER_ANN_GPUS)),
                            "{\"v\":1}");
        /* applied: nothing left to send */
        json_t *meta = json_object_get(node, "metadata");
        json_t *have = json_object_get(meta, "labels");
        const char *k;
        json_t *v;
        json_object_foreach(pl, k, v) {
                if (json_is_null(v))
                        json_object_del(have, k);
                else
                        json_object_set(have, k, v);
        }
        json_object_set_new(meta, "annotations", json_pack("{s:s}", CLUSTER_ANN_GPUS, "{\"v\":1}"));
        json_decref(p);
        assert_null(publish_diff(node, l, "{\"v\":1}"));
        /* a health flip changes only the annotation */
        p = publish_diff(node, l, "{\"v\":1,\"x\":2}");
        assert_non_null(p);
        assert_null(json_object_get(json_object_get(p, "metadata"), "labels"));
        json_decref(p);
        json_decref(node);
        json_decref(l);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_kubeconfig_kubectl_style),
                cmocka_unit_test(test_kubeconfig_json),
                cmocka_unit_test(test_kubeconfig_errors),
                cmocka_unit_test(test_kubeconfig_deep_nesting_refused),
                cmocka_unit_test(test_base64),
                cmocka_unit_test(test_in_cluster),
                cmocka_unit_test(test_decoder_splits),
                cmocka_unit_test(test_decoder_cut_mid_event),
                cmocka_unit_test(test_decoder_malformed),
                cmocka_unit_test(test_decoder_callback_error),
                cmocka_unit_test(test_status_decode),
                cmocka_unit_test(test_backoff),
                cmocka_unit_test(test_escape),
                cmocka_unit_test(test_slim),
                cmocka_unit_test(test_publish_labels_and_diff),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
