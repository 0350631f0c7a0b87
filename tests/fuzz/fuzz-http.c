/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz target for the HTTP request path: the input goes over a real TCP connection to the
 * gpuslice HTTP server (src/http, libmicrohttpd) on 127.0.0.1, whose handler checks what it is
 * given; the server must answer or close, never crash, and must still serve a well-formed request
 * afterwards. The first line of input (up to '\n') is also fed to http_parse_address.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "fuzz.h"
#include "http/http.h"
#include "util/util.h"

static void handler(void *ud, const struct http_request *req, struct http_response *resp) {
        (void)ud;
        CHECK(req->path[0] == '/');
        CHECK(strlen(req->body) <= req->body_len && req->body_len <= HTTP_MAX_BODY);
        resp->body = strdup("ok\n");
        resp->body_len = resp->body ? 3 : 0;
}

static struct http_server *server;

static int exchange(const void *req, size_t len, char *reply, size_t cap, long timeout_ms) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)http_server_port(server)) };
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
                close(fd);
                return -1;
        }
        (void)!send(fd, req, len, MSG_NOSIGNAL);
        shutdown(fd, SHUT_WR);
        size_t got = 0;
        for (;;) {
                ssize_t n = recv(fd, reply + got, cap - got - 1, 0);
                if (n <= 0)
                        break;
                got += (size_t)n;
                if (got + 1 >= cap)
                        break;
        }
        reply[got] = '\0';
        close(fd);
        return (int)got;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static unsigned runs;
        if (!server) {
                CHECK(http_server_new("127.0.0.1:0", &server) == 0);
                CHECK(http_server_handle(server, "/metrics", handler, NULL) == 0);
                CHECK(http_server_handle(server, "/healthz", handler, NULL) == 0);
                CHECK(http_server_start(server) == 0);
        }
        char line[128];
        const uint8_t *nl = memchr(data, '\n', size);
        size_t ll = nl ? (size_t)(nl - data) : size;
        if (ll < sizeof line) {
                memcpy(line, data, ll);
                line[ll] = '\0';
                struct sockaddr_storage ss;
                socklen_t sl;
                if (http_parse_address(line, &ss, &sl) == 0)
                        CHECK(ss.ss_family == AF_INET || ss.ss_family == AF_INET6);
        }
        static char reply[1 << 16];
        /* short: a keep-alive answer leaves the connection open until the timeout */
        exchange(data, size, reply, sizeof reply, 100);
        /* Every so often: the server still answers a good request. The fuzz clients' connections
         * are released asynchronously and one address may hold only so many (the slowloris cap),
         * so a probe right after a burst may be turned away: the server must recover within 10 s. */
        if (++runs % 64 == 0) {
                static const char ok[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
                int got = -1;
                for (int attempt = 0; attempt < 100 && got <= 0; attempt++) {
                        if (attempt)
                                usleep(100 * 1000);
                        got = exchange(ok, sizeof ok - 1, reply, sizeof reply, 5000);
                }
                CHECK(got > 0);
                CHECK(strncmp(reply, "HTTP/1.1 200", 12) == 0);
        }
        return 0;
}
