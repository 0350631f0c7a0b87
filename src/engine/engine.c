/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine — Engine API client (see engine.h): JSON → struct engine_container (pure), GPUs held
 * (pure), and the libcurl transport. Must never log or trust sizes from the peer.
 */
#include "engine/engine.h"

#include <ctype.h>
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "util/util.h"

#define NVIDIA_MAJOR 195

int engine_parse_url(const char *url, char *ret_socket, size_t socket_len, char *ret_base, size_t base_len) {
        if (!url || !url[0])
                return -EINVAL;
        const char *sock = NULL;
        if (startswith(url, "unix://"))
                sock = url + strlen("unix://");
        else if (url[0] == '/')
                sock = url;
        if (sock) {
                if (sock[0] != '/' || strlen(sock) >= socket_len)
                        return -EINVAL;
                strscpy(ret_socket, sock, socket_len);
                strscpy(ret_base, "http://localhost", base_len);
                return 0;
        }
        /* Docker's tcp://HOST:PORT (plain, unauthenticated) is http:// */
        const char *rest = startswith(url, "http://")  ? url + strlen("http://")
                           : startswith(url, "tcp://") ? url + strlen("tcp://")
                                                       : NULL;
        if (!rest || !rest[0] || strlen("http://") + strlen(rest) >= base_len)
                return -EINVAL;
        snprintf(ret_base, base_len, "http://%s", rest);
        size_t n = strlen(ret_base);
        while (n > strlen("http://") && ret_base[n - 1] == '/')
                ret_base[--n] = '\0';
        ret_socket[0] = '\0';
        return 0;
}

static void copy_str(char *dst, size_t len, json_t *v) {
        const char *s = json_string_value(v);
        strscpy(dst, s ? s : "", len);
}

static bool valid_id(const char *s) {
        if (strlen(s) != 64)
                return false;
        for (; *s; s++)
                if (!isxdigit((unsigned char)*s))
                        return false;
        return true;
}

static void set_id(struct engine_container *c, json_t *v) {
        copy_str(c->id, sizeof c->id, v);
        for (char *p = c->id; *p; p++)
                *p = (char)tolower((unsigned char)*p);
}

static void set_name(struct engine_container *c, const char *s) {
        if (!s)
                return;
        while (*s == '/')
                s++;
        strscpy(c->name, s, sizeof c->name);
}

static void set_labels(struct engine_container *c, json_t *labels) {
        if (!json_is_object(labels))
                return;
        copy_str(c->pod_name, sizeof c->pod_name, json_object_get(labels, "io.kubernetes.pod.name"));
        copy_str(c->pod_namespace, sizeof c->pod_namespace, json_object_get(labels, "io.kubernetes.pod.namespace"));
        copy_str(c->pod_uid, sizeof c->pod_uid, json_object_get(labels, "io.kubernetes.pod.uid"));
        copy_str(c->container_name, sizeof c->container_name, json_object_get(labels, "io.kubernetes.container.name"));
}

static json_t *load(const char *json, size_t len) {
        json_error_t e;
        return json_loadb(json, len, JSON_REJECT_DUPLICATES, &e);
}

int engine_parse_list(const char *json, size_t len, struct engine_container **ret, size_t *ret_n) {
        json_t *root = load(json, len);
        if (!json_is_array(root)) {
                json_decref(root);
                return -EINVAL;
        }
        size_t n = json_array_size(root), k = 0;
        struct engine_container *v = n ? calloc(n, sizeof *v) : NULL;
        if (n && !v) {
                json_decref(root);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                json_t *o = json_array_get(root, i);
                if (!json_is_object(o))
                        continue;
                struct engine_container *c = &v[k];
                set_id(c, json_object_get(o, "Id"));
                if (!valid_id(c->id)) {
                        memset(c, 0, sizeof *c);
                        continue;
                }
                json_t *names = json_object_get(o, "Names");
                if (json_is_array(names))
                        set_name(c, json_string_value(json_array_get(names, 0)));
                const char *state = json_string_value(json_object_get(o, "State"));
                c->running = state && streq(state, "running");
                set_labels(c, json_object_get(o, "Labels"));
                k++;
        }
        json_decref(root);
        if (k == 0) {
                free(v);
                v = NULL;
        }
        *ret = v;
        *ret_n = k;
        return 0;
}

static void add_ids(struct engine_container *c, const char *ids) {
        if (!ids || !ids[0])
                return;
        size_t have = strlen(c->gpu_ids);
        if (have + 1 + strlen(ids) >= sizeof c->gpu_ids)
                return; /* absurdly long: keep what we have rather than a cut-off token */
        if (have)
                c->gpu_ids[have++] = ',';
        strscpy(c->gpu_ids + have, ids, sizeof c->gpu_ids - have);
}

static int minor_from_name(const char *path) {
        const char *b = strrchr(path, '/');
        b = b ? b + 1 : path;
        if (!startswith(b, "nvidia"))
                return -1;
        unsigned m;
        if (parse_uint(b + strlen("nvidia"), 255, &m) < 0)
                return -1;
        return (int)m;
}

static bool is_gpu_request(json_t *req) {
        const char *driver = json_string_value(json_object_get(req, "Driver"));
        if (driver && streq(driver, "nvidia"))
                return true;
        json_t *caps = json_object_get(req, "Capabilities"), *set;
        size_t i, j;
        json_array_foreach(caps, i, set) {
                json_t *cap;
                json_array_foreach(set, j, cap) {
                        const char *s = json_string_value(cap);
                        if (s && streq(s, "gpu"))
                                return true;
                }
        }
        return false;
}

int engine_parse_inspect(const char *json, size_t len, struct engine_container *ret) {
        json_t *root = load(json, len);
        if (!json_is_object(root)) {
                json_decref(root);
                return -EINVAL;
        }
        struct engine_container c = { 0 };
        set_id(&c, json_object_get(root, "Id"));
        if (!valid_id(c.id)) {
                json_decref(root);
                return -EINVAL;
        }
        set_name(&c, json_string_value(json_object_get(root, "Name")));
        c.running = json_is_true(json_object_get(json_object_get(root, "State"), "Running"));

        json_t *config = json_object_get(root, "Config");
        set_labels(&c, json_object_get(config, "Labels"));
        json_t *env = json_object_get(config, "Env"), *e;
        size_t i;
        json_array_foreach(env, i, e) {
                const char *s = json_string_value(e);
                if (!s || !startswith(s, "NVIDIA_VISIBLE_DEVICES="))
                        continue;
                const char *val = s + strlen("NVIDIA_VISIBLE_DEVICES=");
                if (streq(val, "all"))
                        c.gpus_all = true;
                else
                        add_ids(&c, val);
        }

        json_t *host = json_object_get(root, "HostConfig");
        json_t *devices = json_object_get(host, "Devices"), *d;
        json_array_foreach(devices, i, d) {
                const char *p = json_string_value(json_object_get(d, "PathOnHost"));
                if (!p || c.n_devices >= ENGINE_MAX_DEVICES)
                        continue;
                struct engine_device *dev = &c.devices[c.n_devices++];
                strscpy(dev->path_on_host, p, sizeof dev->path_on_host);
                dev->minor = minor_from_name(p);
        }
        json_t *reqs = json_object_get(host, "DeviceRequests"), *rq;
        json_array_foreach(reqs, i, rq) {
                if (!is_gpu_request(rq))
                        continue;
                json_t *ids = json_object_get(rq, "DeviceIDs"), *id;
                size_t j;
                if (json_array_size(ids) > 0) {
                        json_array_foreach(ids, j, id) add_ids(&c, json_string_value(id));
                        continue;
                }
                json_int_t count = json_integer_value(json_object_get(rq, "Count"));
                if (count < 0)
                        c.gpus_all = true;
                else if (count > 0)
                        c.gpus_count = (int)MIN(count, (json_int_t)TOPO_MAX_GPUS);
        }
        json_decref(root);
        *ret = c;
        return 0;
}

void engine_resolve_devices(struct engine_container *c) {
        for (size_t i = 0; i < c->n_devices; i++) {
                struct stat st;
                if (stat(c->devices[i].path_on_host, &st) < 0)
                        continue;
                if (S_ISCHR(st.st_mode) && major(st.st_rdev) == NVIDIA_MAJOR && minor(st.st_rdev) < 255)
                        c->devices[i].minor = (int)minor(st.st_rdev);
                else
                        c->devices[i].minor = -1; /* nvidiactl (minor 255), uvm (another major), … */
        }
}

static int gpu_by_minor(const struct topo *t, int minor) {
        for (unsigned g = 0; g < t->n_gpus; g++)
                if (t->gpu[g].minor == minor)
                        return (int)g;
        return -1;
}

static uint64_t all_gpus(const struct topo *t) {
        return t->n_gpus >= 64 ? UINT64_MAX : (1ULL << t->n_gpus) - 1;
}

uint64_t engine_container_gpus(const struct engine_container *c, const struct topo *t) {
        if (!c->running)
                return 0;
        if (c->gpus_all)
                return all_gpus(t);
        uint64_t set = 0;
        for (size_t i = 0; i < c->n_devices; i++) {
                int g = c->devices[i].minor >= 0 ? gpu_by_minor(t, c->devices[i].minor) : -1;
                if (g >= 0)
                        set |= 1ULL << g;
        }
        for (int k = 0; k < c->gpus_count && (unsigned)k < t->n_gpus; k++)
                set |= 1ULL << k;

        const char *p = c->gpu_ids;
        while (*p) {
                const char *end = strchrnul(p, ',');
                char tok[128];
                size_t n = (size_t)(end - p);
                while (n && isspace((unsigned char)p[n - 1]))
                        n--;
                while (n && isspace((unsigned char)*p)) {
                        p++;
                        n--;
                }
                if (n < sizeof tok) {
                        strnscpy(tok, sizeof tok, p, n);
                        unsigned idx;
                        if (streq(tok, "all"))
                                set |= all_gpus(t);
                        else if (parse_uint(tok, TOPO_MAX_GPUS - 1, &idx) == 0) {
                                if (idx < t->n_gpus)
                                        set |= 1ULL << idx;
                        } else if (startswith(tok, "GPU-")) {
                                for (unsigned g = 0; g < t->n_gpus; g++)
                                        if (strcasecmp(t->gpu[g].uuid, tok) == 0)
                                                set |= 1ULL << g;
                        }
                }
                p = *end ? end + 1 : end;
        }
        return set;
}

/* ---- transport ---- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) {
        curl_global_init(CURL_GLOBAL_NOTHING);
}

int engine_request(const char *url, const char *path, char **ret_body, size_t *ret_len, long *ret_status) {
        char sock[256], base[512], full[1024];
        int r = engine_parse_url(url, sock, sizeof sock, base, sizeof base);
        if (r < 0)
                return r;
        if (!path || path[0] != '/')
                return -EINVAL;
        int k = snprintf(full, sizeof full, "%s%s", base, path);
        if (k < 0 || (size_t)k >= sizeof full)
                return -ENAMETOOLONG;
        pthread_once(&curl_once, curl_init_once);
        CURL *h = curl_easy_init();
        if (!h)
                return -ENOMEM;
        struct gs_buf b = { .max = ENGINE_MAX_BODY };
        curl_easy_setopt(h, CURLOPT_URL, full);
        if (sock[0])
                curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, sock);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)ENGINE_TIMEOUT_MS);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)ENGINE_TIMEOUT_MS);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, gs_buf_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        CURLcode cc = curl_easy_perform(h);
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(h);
        if (ret_status)
                *ret_status = status;
        if (cc != CURLE_OK) {
                gs_buf_done(&b);
                if (b.overflow)
                        return -EFBIG;
                if (cc == CURLE_COULDNT_CONNECT)
                        return -ECONNREFUSED;
                if (cc == CURLE_OPERATION_TIMEDOUT)
                        return -ETIMEDOUT;
                return -EIO;
        }
        if (status != 200) {
                gs_buf_done(&b);
                return -EREMOTEIO;
        }
        size_t len = b.len;
        char *text = gs_buf_take(&b);
        if (!text)
                return -ENOMEM;
        *ret_body = text;
        *ret_len = len;
        return 0;
}

int engine_list(const char *url, bool inspect, struct engine_container **ret, size_t *ret_n) {
        _cleanup_(freep) char *body = NULL;
        size_t len;
        int r = engine_request(url, "/containers/json", &body, &len, NULL);
        if (r < 0)
                return r;
        struct engine_container *v;
        size_t n;
        r = engine_parse_list(body, len, &v, &n);
        if (r < 0)
                return r;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                if (!v[i].running)
                        continue;
                if (inspect) {
                        char path[128];
                        snprintf(path, sizeof path, "/containers/%s/json", v[i].id);
                        _cleanup_(freep) char *ib = NULL;
                        size_t ilen;
                        struct engine_container c;
                        if (engine_request(url, path, &ib, &ilen, NULL) < 0 || engine_parse_inspect(ib, ilen, &c) < 0)
                                continue; /* gone meanwhile */
                        engine_resolve_devices(&c);
                        v[i] = c;
                        if (!v[i].running)
                                continue;
                }
                v[k++] = v[i];
        }
        if (k == 0) {
                free(v);
                v = NULL;
        }
        *ret = v;
        *ret_n = k;
        return 0;
}
