/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Engine API client: URL forms, /containers/json and /containers/ID/json parsing (recorded
 * shapes in tests/data/engine/), which GPUs a container holds, and the transport against a
 * local HTTP server (src/http) standing in for the engine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "engine/engine.h"
#include "http/http.h"
#include "util/util.h"

#define DATA GPUSLICE_SOURCE_DIR "/tests/data/engine/"
#define ID "1964289d64696393f9c672383fe159ae432dc11fa64cde34573b6052734b03ab"

static char *load(const char *name, size_t *len) {
        char *text = NULL;
        char path[512];
        snprintf(path, sizeof path, DATA "%s", name);
        assert_int_equal(read_file(path, 1 << 20, &text, len), 0);
        return text;
}

static struct topo *node8(void) {
        static struct topo t;
        memset(&t, 0, sizeof t);
        t.n_gpus = 8;
        for (int i = 0; i < 8; i++) {
                t.gpu[i].index = i;
                t.gpu[i].minor = i;
                snprintf(t.gpu[i].uuid, sizeof t.gpu[i].uuid, "GPU-00000000-0000-0000-0000-00000000000%d", i);
        }
        return &t;
}

static void test_url_unix(void **state) {
        (void)state;
        char sock[256], base[256];
        assert_int_equal(engine_parse_url("unix:///run/podman/podman.sock", sock, sizeof sock, base, sizeof base), 0);
        assert_string_equal(sock, "/run/podman/podman.sock");
        assert_string_equal(base, "http://localhost");
        assert_int_equal(engine_parse_url("/var/run/docker.sock", sock, sizeof sock, base, sizeof base), 0);
        assert_string_equal(sock, "/var/run/docker.sock");
}

static void test_url_http(void **state) {
        (void)state;
        char sock[256], base[256];
        assert_int_equal(engine_parse_url("http://127.0.0.1:2375/", sock, sizeof sock, base, sizeof base), 0);
        assert_string_equal(sock, "");
        assert_string_equal(base, "http://127.0.0.1:2375");
        assert_int_equal(engine_parse_url("tcp://127.0.0.1:2375", sock, sizeof sock, base, sizeof base), 0);
        assert_string_equal(base, "http://127.0.0.1:2375");
}

static void test_url_bad(void **state) {
        (void)state;
        char sock[256], base[256];
        assert_int_equal(engine_parse_url("", sock, sizeof sock, base, sizeof base), -EINVAL);
        assert_int_equal(engine_parse_url("https://x", sock, sizeof sock, base, sizeof base), -EINVAL);
        assert_int_equal(engine_parse_url("unix://relative.sock", sock, sizeof sock, base, sizeof base), -EINVAL);
        assert_int_equal(engine_parse_url("ftp://1.2.3.4:2375", sock, sizeof sock, base, sizeof base), -EINVAL);
        assert_int_equal(engine_parse_url("tcp://", sock, sizeof sock, base, sizeof base), -EINVAL);
        assert_int_equal(engine_parse_url("http://", sock, sizeof sock, base, sizeof base), -EINVAL);
}

static void test_list(void **state) {
        (void)state;
        size_t len, n;
        char *json = load("list.json", &len);
        struct engine_container *c;
        assert_int_equal(engine_parse_list(json, len, &c, &n), 0);
        free(json);
        /* the short id and the non-object are dropped; the exited one is kept, not running */
        assert_int_equal(n, 3);
        assert_string_equal(c[0].id, "791490b2b8c504dc2df6b135e583858444d40d5d4ff4eb06a512b35376167639");
        assert_string_equal(c[0].name, "mon-env");
        assert_true(c[0].running);
        assert_string_equal(c[0].pod_name, "");
        assert_string_equal(c[1].pod_name, "trainer-0");
        assert_string_equal(c[1].pod_namespace, "ml");
        assert_string_equal(c[1].container_name, "worker");
        assert_string_equal(c[1].pod_uid, "8c6e4f1a-2b3d-4c5e-9f7a-1b2c3d4e5f6a");
        assert_false(c[2].running);
        free(c);
}

static void test_list_empty(void **state) {
        (void)state;
        struct engine_container *c = (void *)1;
        size_t n = 99;
        assert_int_equal(engine_parse_list("[]", 2, &c, &n), 0);
        assert_null(c);
        assert_int_equal(n, 0);
}

static void test_list_malformed(void **state) {
        (void)state;
        struct engine_container *c;
        size_t n;
        assert_int_equal(engine_parse_list("{}", 2, &c, &n), -EINVAL);
        assert_int_equal(engine_parse_list("[", 1, &c, &n), -EINVAL);
        assert_int_equal(engine_parse_list("", 0, &c, &n), -EINVAL);
        assert_int_equal(engine_parse_list("[{\"Id\":1},{\"Id\":1}]", 19, &c, &n), 0); /* wrong types: dropped */
        assert_int_equal(n, 0);
}

static uint64_t gpus_of(const char *file) {
        size_t len;
        char *json = load(file, &len);
        struct engine_container c;
        assert_int_equal(engine_parse_inspect(json, len, &c), 0);
        free(json);
        return engine_container_gpus(&c, node8());
}

static void test_inspect_device_nodes(void **state) {
        (void)state;
        /* nvidia6, nvidia7 → GPUs 6, 7; nvidiactl and nvidia-uvm are not GPUs; "void" env: none */
        assert_int_equal(gpus_of("inspect-devices.json"), (1u << 6) | (1u << 7));
}

static void test_inspect_device_minor_not_index(void **state) {
        (void)state;
        size_t len;
        char *json = load("inspect-devices.json", &len);
        struct engine_container c;
        assert_int_equal(engine_parse_inspect(json, len, &c), 0);
        free(json);
        struct topo *t = node8();
        t->gpu[0].minor = 6; /* GPU 0 is /dev/nvidia6, GPU 6 is /dev/nvidia0 */
        t->gpu[6].minor = 0;
        assert_int_equal(engine_container_gpus(&c, t), (1u << 0) | (1u << 7));
}

static void test_inspect_gpus_all(void **state) {
        (void)state;
        assert_int_equal(gpus_of("inspect-gpus-all.json"), 0xff);
}

static void test_inspect_ids_and_uuids(void **state) {
        (void)state;
        /* DeviceIDs 1,5 + env UUID of GPU 3; the MIG id and the non-GPU request are ignored */
        assert_int_equal(gpus_of("inspect-gpus-ids.json"), (1u << 1) | (1u << 3) | (1u << 5));
}

static void test_inspect_count(void **state) {
        (void)state;
        assert_int_equal(gpus_of("inspect-gpus-count.json"), 0x3);
}

static void test_inspect_stopped_holds_nothing(void **state) {
        (void)state;
        assert_int_equal(gpus_of("inspect-stopped.json"), 0);
}

static void test_inspect_malformed(void **state) {
        (void)state;
        struct engine_container c;
        assert_int_equal(engine_parse_inspect("[]", 2, &c), -EINVAL);
        assert_int_equal(engine_parse_inspect("{\"Id\":\"xyz\"}", 12, &c), -EINVAL);
        assert_int_equal(engine_parse_inspect("{\"Id\":", 6, &c), -EINVAL);
}

static void test_out_of_range_ids_ignored(void **state) {
        (void)state;
        struct engine_container c = { .running = true };
        strscpy(c.gpu_ids, "7,8,63,99,-1,,GPU-unknown", sizeof c.gpu_ids);
        assert_int_equal(engine_container_gpus(&c, node8()), 1u << 7);
}

static void test_resolve_devices(void **state) {
        (void)state;
        struct engine_container c = { .running = true, .n_devices = 2 };
        strscpy(c.devices[0].path_on_host, "/dev/null", sizeof c.devices[0].path_on_host); /* major 1 */
        c.devices[0].minor = 3;
        strscpy(c.devices[1].path_on_host, "/nonexistent/nvidia4", sizeof c.devices[1].path_on_host);
        c.devices[1].minor = 4;
        engine_resolve_devices(&c);
        assert_int_equal(c.devices[0].minor, -1); /* exists, not an NVIDIA device */
        assert_int_equal(c.devices[1].minor, 4);  /* absent: the name stands */
}

/* ---- transport against a local server ---- */

static void serve_list(void *ud, const struct http_request *req, struct http_response *resp) {
        (void)ud;
        (void)req;
        size_t len;
        resp->body = load("list.json", &len);
        resp->body_len = len;
        strscpy(resp->content_type, "application/json", sizeof resp->content_type);
}

static void serve_inspect(void *ud, const struct http_request *req, struct http_response *resp) {
        (void)req;
        size_t len;
        resp->body = load(ud, &len);
        resp->body_len = len;
}

static void serve_error(void *ud, const struct http_request *req, struct http_response *resp) {
        (void)ud;
        (void)req;
        resp->status = 500;
        resp->body = strdup("{\"message\":\"boom\"}");
        resp->body_len = strlen(resp->body);
}

static struct http_server *engine_stub(char *url, size_t len) {
        struct http_server *s;
        assert_int_equal(http_server_new("127.0.0.1:0", &s), 0);
        assert_int_equal(http_server_handle(s, "/containers/json", serve_list, NULL), 0);
        assert_int_equal(http_server_handle(
                                 s, "/containers/791490b2b8c504dc2df6b135e583858444d40d5d4ff4eb06a512b35376167639/json",
                                 serve_inspect, "inspect-devices.json"),
                         0);
        assert_int_equal(http_server_handle(
                                 s, "/containers/f47063a2169ba2632c764bb0f856d63374c3ca77f2744372dbcedf720adff0cc/json",
                                 serve_inspect, "inspect-stopped.json"),
                         0);
        assert_int_equal(http_server_handle(s, "/error", serve_error, NULL), 0);
        assert_int_equal(http_server_start(s), 0);
        snprintf(url, len, "http://127.0.0.1:%u", http_server_port(s));
        return s;
}

static void test_request_ok(void **state) {
        (void)state;
        char url[64];
        struct http_server *s = engine_stub(url, sizeof url);
        char *body;
        size_t len;
        long status;
        assert_int_equal(engine_request(url, "/containers/json", &body, &len, &status), 0);
        assert_int_equal(status, 200);
        assert_non_null(strstr(body, "mon-env"));
        free(body);
        http_server_free(s);
}

static void test_request_status(void **state) {
        (void)state;
        char url[64];
        struct http_server *s = engine_stub(url, sizeof url);
        char *body;
        size_t len;
        long status;
        assert_int_equal(engine_request(url, "/error", &body, &len, &status), -EREMOTEIO);
        assert_int_equal(status, 500);
        assert_int_equal(engine_request(url, "/nope", &body, &len, &status), -EREMOTEIO);
        assert_int_equal(status, 404);
        http_server_free(s);
}

static void test_request_refused(void **state) {
        (void)state;
        char *body;
        size_t len;
        assert_int_equal(engine_request("unix:///nonexistent/engine.sock", "/containers/json", &body, &len, NULL),
                         -ECONNREFUSED);
        assert_int_equal(engine_request("unix:///x.sock", "relative", &body, &len, NULL), -EINVAL);
}

static void test_list_inspects_running(void **state) {
        (void)state;
        char url[64];
        struct http_server *s = engine_stub(url, sizeof url);
        struct engine_container *c;
        size_t n;
        assert_int_equal(engine_list(url, true, &c, &n), 0);
        /* mon-env → inspect-devices (running); trainer → inspect-stopped (stopped meanwhile: dropped);
         * old: exited; so one container, with its devices */
        assert_int_equal(n, 1);
        assert_int_equal(c[0].n_devices, 4);
        assert_int_equal(engine_container_gpus(&c[0], node8()), (1u << 6) | (1u << 7));
        free(c);
        http_server_free(s);
}

static void test_list_names_only(void **state) {
        (void)state;
        char url[64];
        struct http_server *s = engine_stub(url, sizeof url);
        struct engine_container *c;
        size_t n;
        assert_int_equal(engine_list(url, false, &c, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(c[1].pod_name, "trainer-0");
        free(c);
        http_server_free(s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_url_unix),
                cmocka_unit_test(test_url_http),
                cmocka_unit_test(test_url_bad),
                cmocka_unit_test(test_list),
                cmocka_unit_test(test_list_empty),
                cmocka_unit_test(test_list_malformed),
                cmocka_unit_test(test_inspect_device_nodes),
                cmocka_unit_test(test_inspect_device_minor_not_index),
                cmocka_unit_test(test_inspect_gpus_all),
                cmocka_unit_test(test_inspect_ids_and_uuids),
                cmocka_unit_test(test_inspect_count),
                cmocka_unit_test(test_inspect_stopped_holds_nothing),
                cmocka_unit_test(test_inspect_malformed),
                cmocka_unit_test(test_out_of_range_ids_ignored),
                cmocka_unit_test(test_resolve_devices),
                cmocka_unit_test(test_request_ok),
                cmocka_unit_test(test_request_status),
                cmocka_unit_test(test_request_refused),
                cmocka_unit_test(test_list_inspects_running),
                cmocka_unit_test(test_list_names_only),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
