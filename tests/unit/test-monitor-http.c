/* SPDX-License-Identifier: Apache-2.0 */
/* The HTTP server (src/http): addresses, registration rules, and real requests over TCP on
 * 127.0.0.1 (and a unix socket) with a raw socket client (status codes, bodies, limits). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>

#include "http/http.h"
#include "util/util.h"

static void echo(void *ud, const struct http_request *req, struct http_response *resp) {
        (void)ud;
        char *b = malloc(req->body_len + 64);
        int n = snprintf(b, 64, "%s %s %zu:", req->method, req->path, req->body_len);
        memcpy(b + n, req->body, req->body_len);
        resp->body = b;
        resp->body_len = (size_t)n + req->body_len;
        strscpy(resp->content_type, "text/x-echo", sizeof resp->content_type);
}

static void teapot(void *ud, const struct http_request *req, struct http_response *resp) {
        (void)ud;
        (void)req;
        resp->status = 418;
}

/* The raw query string back, and two extra headers. */
static void query(void *ud, const struct http_request *req, struct http_response *resp) {
        (void)ud;
        static const char *const headers[] = { "X-One", "1", "Cache-Control", "no-store", NULL };
        resp->body = strdup(req->query);
        resp->body_len = strlen(req->query);
        resp->headers = headers;
}

static struct http_server *start(void) {
        struct http_server *s;
        assert_int_equal(http_server_new("127.0.0.1:0", &s), 0);
        assert_int_equal(http_server_handle(s, "/echo", echo, NULL), 0);
        assert_int_equal(http_server_handle(s, "/teapot", teapot, NULL), 0);
        assert_int_equal(http_server_handle(s, "/query", query, NULL), 0);
        assert_int_equal(http_server_start(s), 0);
        assert_true(http_server_port(s) > 0);
        return s;
}

/* Send raw bytes, read the whole answer (server closes: we send Connection: close). */
static char *roundtrip(struct http_server *s, const char *req, size_t len) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        struct timeval tv = { .tv_sec = 10 };
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)http_server_port(s)) };
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
        for (size_t off = 0; off < len;) {
                ssize_t n = send(fd, req + off, len - off, MSG_NOSIGNAL);
                if (n <= 0)
                        break; /* the server may answer 413 and close early */
                off += (size_t)n;
        }
        size_t cap = 1 << 16, got = 0;
        char *buf = malloc(cap);
        for (;;) {
                ssize_t n = recv(fd, buf + got, cap - got - 1, 0);
                if (n <= 0)
                        break;
                got += (size_t)n;
                if (got + 1 >= cap)
                        break;
        }
        buf[got] = '\0';
        close(fd);
        return buf;
}

static char *get(struct http_server *s, const char *method, const char *path) {
        char req[512];
        int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", method, path);
        return roundtrip(s, req, (size_t)n);
}

static void test_get(void **state) {
        (void)state;
        struct http_server *s = start();
        char *r = get(s, "GET", "/echo?x=1");
        assert_true(startswith(r, "HTTP/1.1 200"));
        assert_non_null(strstr(r, "Content-Type: text/x-echo"));
        assert_non_null(strstr(r, "\r\n\r\nGET /echo 0:"));
        free(r);
        http_server_free(s);
}

/* Handlers get the query as sent (percent escapes and all; they parse it), "" without one, and send
 * the headers they name. */
static void test_query_and_headers(void **state) {
        (void)state;
        struct http_server *s = start();
        char *r = get(s, "GET", "/query?node=gpu%2Da&model=A+100&&x");
        assert_true(startswith(r, "HTTP/1.1 200"));
        assert_non_null(strstr(r, "\r\nX-One: 1\r\n"));
        assert_non_null(strstr(r, "\r\nCache-Control: no-store\r\n"));
        assert_non_null(strstr(r, "\r\n\r\nnode=gpu%2Da&model=A+100&&x"));
        free(r);
        r = get(s, "GET", "/query");
        assert_true(startswith(r, "HTTP/1.1 200"));
        assert_non_null(strstr(r, "Content-Length: 0\r\n"));
        free(r);
        r = get(s, "GET", "/query?");
        assert_non_null(strstr(r, "Content-Length: 0\r\n"));
        free(r);
        http_server_free(s);
}

static void test_head(void **state) {
        (void)state;
        struct http_server *s = start();
        char *r = get(s, "HEAD", "/echo");
        assert_true(startswith(r, "HTTP/1.1 200"));
        assert_null(strstr(r, "HEAD /echo")); /* no body on HEAD */
        free(r);
        http_server_free(s);
}

static void test_post_body(void **state) {
        (void)state;
        struct http_server *s = start();
        const char *req =
                "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 11\r\n\r\n{\"a\": [1]}\n";
        char *r = roundtrip(s, req, strlen(req));
        assert_true(startswith(r, "HTTP/1.1 200"));
        assert_non_null(strstr(r, "POST /echo 11:{\"a\": [1]}\n"));
        free(r);
        http_server_free(s);
}

static void test_not_found(void **state) {
        (void)state;
        struct http_server *s = start();
        char *r = get(s, "GET", "/echo/more");
        assert_true(startswith(r, "HTTP/1.1 404"));
        free(r);
        struct http_stats st;
        http_server_stats(s, &st);
        assert_int_equal(st.not_found, 1);
        assert_int_equal(st.requests, 1);
        http_server_free(s);
}

static void test_method_not_allowed(void **state) {
        (void)state;
        struct http_server *s = start();
        char *r = get(s, "DELETE", "/echo");
        assert_true(startswith(r, "HTTP/1.1 405"));
        free(r);
        http_server_free(s);
}

static void test_body_too_large(void **state) {
        (void)state;
        struct http_server *s = start();
        size_t body = HTTP_MAX_BODY + 10;
        char head[256];
        int n = snprintf(head, sizeof head,
                         "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n", body);
        char *req = malloc((size_t)n + body);
        memcpy(req, head, (size_t)n);
        memset(req + n, 'x', body);
        char *r = roundtrip(s, req, (size_t)n + body);
        assert_true(startswith(r, "HTTP/1.1 413"));
        free(r);
        free(req);
        struct http_stats st;
        http_server_stats(s, &st);
        assert_int_equal(st.rejected, 1);
        http_server_free(s);
}

static void test_handler_status(void **state) {
        (void)state;
        struct http_server *s = start();
        char *r = get(s, "GET", "/teapot");
        assert_true(startswith(r, "HTTP/1.1 418"));
        free(r);
        http_server_free(s);
}

static void test_garbage_request(void **state) {
        (void)state;
        struct http_server *s = start();
        char *r = roundtrip(s, "\x01\x02 nonsense\r\n\r\n", 15);
        assert_false(startswith(r, "HTTP/1.1 200"));
        free(r);
        /* and the server still answers */
        r = get(s, "GET", "/echo");
        assert_true(startswith(r, "HTTP/1.1 200"));
        free(r);
        http_server_free(s);
}

static void test_address_parse(void **state) {
        (void)state;
        struct sockaddr_storage ss;
        socklen_t len;
        assert_int_equal(http_parse_address("127.0.0.1:9400", &ss, &len), 0);
        assert_int_equal(ss.ss_family, AF_INET);
        assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 9400);
        assert_int_equal(http_parse_address("localhost:1", &ss, &len), 0);
        assert_int_equal(((struct sockaddr_in *)&ss)->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
        assert_int_equal(http_parse_address(":9400", &ss, &len), 0);
        assert_int_equal(((struct sockaddr_in *)&ss)->sin_addr.s_addr, htonl(INADDR_ANY));
        assert_int_equal(http_parse_address("[::1]:9400", &ss, &len), 0);
        assert_int_equal(ss.ss_family, AF_INET6);
        assert_int_equal(len, sizeof(struct sockaddr_in6));
}

static void test_address_bad(void **state) {
        (void)state;
        struct sockaddr_storage ss;
        socklen_t len;
        const char *bad[] = {
                "",        "9400",   "127.0.0.1", "127.0.0.1:",  "127.0.0.1:65536", "127.0.0.1:-1", "host.example:80",
                "[::1:80", "::1:80", "[zz]:80",   "1.2.3.4:80x", "999.1.1.1:80"
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(http_parse_address(bad[i], &ss, &len), -EINVAL);
        assert_int_equal(http_parse_address(NULL, &ss, &len), -EINVAL);
        struct http_server *s;
        assert_int_equal(http_server_new("nope", &s), -EINVAL);
}

static void test_handle_rules(void **state) {
        (void)state;
        struct http_server *s;
        assert_int_equal(http_server_new("127.0.0.1:0", &s), 0);
        assert_int_equal(http_server_handle(s, "relative", echo, NULL), -EINVAL);
        assert_int_equal(http_server_handle(s, "/a", NULL, NULL), -EINVAL);
        assert_int_equal(http_server_handle(s, "/a", echo, NULL), 0);
        assert_int_equal(http_server_handle(s, "/a", echo, NULL), -EEXIST);
        for (int i = 1; i < HTTP_MAX_HANDLERS; i++) {
                char p[16];
                snprintf(p, sizeof p, "/p%d", i);
                assert_int_equal(http_server_handle(s, p, echo, NULL), 0);
        }
        assert_int_equal(http_server_handle(s, "/one-too-many", echo, NULL), -ENOSPC);
        assert_int_equal(http_server_start(s), 0);
        assert_int_equal(http_server_start(s), -EBUSY);
        assert_int_equal(http_server_handle(s, "/late", echo, NULL), -EBUSY);
        http_server_free(s);
}

static void test_address_in_use(void **state) {
        (void)state;
        struct http_server *a = start(), *b;
        char addr[32];
        snprintf(addr, sizeof addr, "127.0.0.1:%u", http_server_port(a));
        assert_int_equal(http_server_new(addr, &b), 0);
        assert_int_equal(http_server_start(b), -EADDRINUSE);
        http_server_free(b);
        http_server_free(a);
}

/* "unix:/PATH": served on a unix socket made owner-only, replaced if stale, removed at free. */
static void test_unix_socket(void **state) {
        (void)state;
        char dir[] = "/tmp/gpuslice-http-XXXXXX";
        assert_non_null(mkdtemp(dir));
        char path[108], addr[120];
        snprintf(path, sizeof path, "%s/s.sock", dir);
        snprintf(addr, sizeof addr, "unix:%s", path);
        FILE *stale = fopen(path, "w");
        assert_non_null(stale);
        fclose(stale);
        struct http_server *s;
        assert_int_equal(http_server_new(addr, &s), 0);
        assert_int_equal(http_server_handle(s, "/echo", echo, NULL), 0);
        assert_int_equal(http_server_start(s), 0);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_true(S_ISSOCK(st.st_mode));
        assert_int_equal(st.st_mode & 0077, 0); /* owner only */

        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        strscpy(sa.sun_path, path, sizeof sa.sun_path);
        struct timeval tv = { .tv_sec = 10 };
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
        const char *req = "GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
        char buf[4096];
        size_t got = 0;
        for (ssize_t n; got + 1 < sizeof buf && (n = recv(fd, buf + got, sizeof buf - 1 - got, 0)) > 0;)
                got += (size_t)n;
        buf[got] = 0;
        close(fd);
        assert_true(startswith(buf, "HTTP/1.1 200"));
        assert_non_null(strstr(buf, "GET /echo 0:"));

        http_server_free(s);
        assert_int_equal(stat(path, &st), -1); /* removed */
        rmdir(dir);

        assert_int_equal(http_server_new("unix:relative.sock", &s), -EINVAL);
        char longp[200] = "unix:/";
        memset(longp + 6, 'a', sizeof longp - 7);
        longp[sizeof longp - 1] = 0;
        assert_int_equal(http_server_new(longp, &s), -EINVAL);
        assert_int_equal(http_server_new(NULL, &s), -EINVAL);
        /* a dir that does not exist: start fails, nothing is served */
        assert_int_equal(http_server_new("unix:/nonexistent-gpuslice-dir/s.sock", &s), 0);
        assert_int_equal(http_server_start(s), -ENOENT);
        http_server_free(s);
}

static void test_free_null(void **state) {
        (void)state;
        assert_null(http_server_free(NULL));
        assert_int_equal(http_server_port(NULL), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_get),
                cmocka_unit_test(test_query_and_headers),
                cmocka_unit_test(test_head),
                cmocka_unit_test(test_post_body),
                cmocka_unit_test(test_not_found),
                cmocka_unit_test(test_method_not_allowed),
                cmocka_unit_test(test_body_too_large),
                cmocka_unit_test(test_handler_status),
                cmocka_unit_test(test_garbage_request),
                cmocka_unit_test(test_address_parse),
                cmocka_unit_test(test_address_bad),
                cmocka_unit_test(test_handle_rules),
                cmocka_unit_test(test_address_in_use),
                cmocka_unit_test(test_unix_socket),
                cmocka_unit_test(test_free_null),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
