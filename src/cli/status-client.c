/* SPDX-License-Identifier: Apache-2.0 */
/*
 * status-client — `gpuslice status`'s client of the node agent (status-client.h): `GET /v1/status`
 * over the agent's unix socket with libcurl (CURLOPT_UNIX_SOCKET_PATH). In the CLI, so the agent
 * library does not link libcurl. Must never: hang on a stuck agent (5 s in all), or keep more than
 * AGENT_STATUS_MAX bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include <curl/curl.h>

#include "agent/agent.h"
#include "cli/status-client.h"
#include "util/util.h"

int status_fetch(const char *socket_path, char **ret) {
        if (!socket_path || !ret)
                return -EINVAL;
        if (strlen(socket_path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
                return -ENAMETOOLONG;
        CURL *c = curl_easy_init();
        if (!c)
                return -ENOMEM;
        struct gs_buf b = { .max = AGENT_STATUS_MAX };
        curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, socket_path);
        curl_easy_setopt(c, CURLOPT_URL, "http://localhost" AGENT_STATUS_URL_PATH);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, gs_buf_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
        CURLcode cc = curl_easy_perform(c);
        long code = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_cleanup(c);
        int r = 0;
        if (b.overflow)
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
                gs_buf_done(&b);
                return r;
        }
        *ret = gs_buf_take(&b);
        return *ret ? 0 : -ENOMEM;
}
