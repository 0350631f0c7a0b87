/* SPDX-License-Identifier: Apache-2.0 */
/*
 * status-client — agent_status_fetch (agent.h): `GET /v1/status` over the agent's unix socket
 * with libcurl (CURLOPT_UNIX_SOCKET_PATH). Must never: hang on a stuck agent (5 s in all), or
 * keep more than AGENT_STATUS_MAX bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include <curl/curl.h>

#include "agent/agent.h"
#include "util/util.h"

struct body {
        char *buf;
        size_t len;
        bool too_big, no_mem;
};

static size_t on_data(char *data, size_t size, size_t nmemb, void *userdata) {
        struct body *b = userdata;
        size_t n = size * nmemb;
        if (b->len + n > AGENT_STATUS_MAX) {
                b->too_big = true;
                return 0; /* aborts the transfer */
        }
        char *nb = realloc(b->buf, b->len + n + 1);
        if (!nb) {
                b->no_mem = true;
                return 0;
        }
        memcpy(nb + b->len, data, n);
        b->len += n;
        nb[b->len] = 0;
        b->buf = nb;
        return n;
}

int agent_status_fetch(const char *socket_path, char **ret) {
        if (!socket_path || !ret)
                return -EINVAL;
        if (strlen(socket_path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
                return -ENAMETOOLONG;
        CURL *c = curl_easy_init();
        if (!c)
                return -ENOMEM;
        struct body b = { 0 };
        curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, socket_path);
        curl_easy_setopt(c, CURLOPT_URL, "http://localhost" AGENT_STATUS_URL_PATH);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
        CURLcode cc = curl_easy_perform(c);
        long code = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_cleanup(c);
        int r = 0;
        if (b.too_big)
                r = -EFBIG;
        else if (b.no_mem)
                r = -ENOMEM;
        else if (cc == CURLE_COULDNT_CONNECT)
                r = access(socket_path, F_OK) < 0 ? -ENOENT : access(socket_path, W_OK) < 0 ? -EACCES : -ECONNREFUSED;
        else if (cc == CURLE_OPERATION_TIMEDOUT)
                r = -ETIMEDOUT;
        else if (cc != CURLE_OK)
                r = -EIO;
        else if (code != 200)
                r = -EPROTO;
        if (r < 0) {
                free(b.buf);
                return r;
        }
        *ret = b.buf ? b.buf : strdup("");
        return *ret ? 0 : -ENOMEM;
}
