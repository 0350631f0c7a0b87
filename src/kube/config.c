/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/config — where the API server is and how to authenticate: kubeconfig files (YAML, read
 * with libyaml into a jansson tree, then checked field by field) and the in-cluster service
 * account. Why libyaml and not a hand-written subset: kubeconfig files come from kubectl, kind,
 * cloud CLIs and PyYAML, which between them use block and flow styles, every quoting style and
 * folded scalars; libyaml is the reference C parser (Debian's libyaml-dev, fuzzed by OSS-Fuzz).
 * What we add is strictness: no aliases (no billion laughs), bounded depth, size and node count,
 * and errors naming the file and the field. Must never log or exit.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "kube/kube-internal.h"
#include "kube/kube.h"
#include "util/util.h"

#define YAML_DEPTH_MAX 32
#define YAML_NODES_MAX 100000
#define SA_ROOT "/var/run/secrets/kubernetes.io/serviceaccount"

/* ---- YAML → JSON (every scalar a string) ---------------------------------------------------- */

struct ytree {
        yaml_parser_t p;
        unsigned nodes;
        struct gs_error *err;
        const char *path;
};

static int y_node(struct ytree *y, yaml_event_t *first, unsigned depth, json_t **ret);

static int y_next(struct ytree *y, yaml_event_t *ev) {
        if (!yaml_parser_parse(&y->p, ev))
                return gs_error_set(y->err, -EINVAL, "%s: line %zu: %s", y->path, y->p.problem_mark.line + 1,
                                    y->p.problem ? y->p.problem : "YAML syntax error");
        return 0;
}

/* lint: long — the YAML-to-JSON walk: one case per libyaml event kind (scalar, sequence, mapping, alias) with its
 * own checks. */
static int y_node(struct ytree *y, yaml_event_t *ev, unsigned depth, json_t **ret) {
        int r;
        if (depth > YAML_DEPTH_MAX)
                return gs_error_set(y->err, -EINVAL, "%s: line %zu: nested too deeply", y->path,
                                    ev->start_mark.line + 1);
        if (++y->nodes > YAML_NODES_MAX)
                return gs_error_set(y->err, -EINVAL, "%s: too many YAML nodes", y->path);
        switch (ev->type) {
                case YAML_ALIAS_EVENT:
                        return gs_error_set(y->err, -EINVAL, "%s: line %zu: YAML aliases are not accepted", y->path,
                                            ev->start_mark.line + 1);
                case YAML_SCALAR_EVENT: {
                        json_t *s = json_stringn((const char *)ev->data.scalar.value, ev->data.scalar.length);
                        if (!s)
                                return gs_error_set(y->err, -EINVAL, "%s: line %zu: not valid UTF-8", y->path,
                                                    ev->start_mark.line + 1);
                        *ret = s;
                        return 0;
                }
                case YAML_SEQUENCE_START_EVENT: {
                        json_t *a = json_array();
                        if (!a)
                                return -ENOMEM;
                        for (;;) {
                                yaml_event_t e;
                                r = y_next(y, &e);
                                if (r < 0)
                                        break;
                                if (e.type == YAML_SEQUENCE_END_EVENT) {
                                        yaml_event_delete(&e);
                                        *ret = a;
                                        return 0;
                                }
                                json_t *v = NULL;
                                r = y_node(y, &e, depth + 1, &v);
                                yaml_event_delete(&e);
                                if (r < 0)
                                        break;
                                json_array_append_new(a, v);
                        }
                        json_decref(a);
                        return r;
                }
                case YAML_MAPPING_START_EVENT: {
                        json_t *o = json_object();
                        if (!o)
                                return -ENOMEM;
                        for (;;) {
                                yaml_event_t k;
                                r = y_next(y, &k);
                                if (r < 0)
                                        break;
                                if (k.type == YAML_MAPPING_END_EVENT) {
                                        yaml_event_delete(&k);
                                        *ret = o;
                                        return 0;
                                }
                                if (k.type != YAML_SCALAR_EVENT) {
                                        r = gs_error_set(y->err, -EINVAL, "%s: line %zu: mapping keys must be scalars",
                                                         y->path, k.start_mark.line + 1);
                                        yaml_event_delete(&k);
                                        break;
                                }
                                char *key = strndup((const char *)k.data.scalar.value, k.data.scalar.length);
                                size_t line = k.start_mark.line + 1;
                                yaml_event_delete(&k);
                                if (!key) {
                                        r = -ENOMEM;
                                        break;
                                }
                                yaml_event_t v;
                                r = y_next(y, &v);
                                if (r < 0) {
                                        free(key);
                                        break;
                                }
                                json_t *val = NULL;
                                r = y_node(y, &v, depth + 1, &val);
                                yaml_event_delete(&v);
                                if (r >= 0 && json_object_get(o, key)) {
                                        json_decref(val);
                                        r = gs_error_set(y->err, -EINVAL, "%s: line %zu: duplicate key '%.64s'",
                                                         y->path, line, key);
                                }
                                if (r >= 0 && json_object_set_new(o, key, val) < 0)
                                        r = gs_error_set(y->err, -EINVAL, "%s: line %zu: bad key", y->path, line);
                                free(key);
                                if (r < 0)
                                        break;
                        }
                        json_decref(o);
                        return r;
                }
                default:
                        return gs_error_set(y->err, -EINVAL, "%s: line %zu: unexpected YAML event", y->path,
                                            ev->start_mark.line + 1);
        }
}

int kube_yaml_to_json(const char *text, size_t len, const char *path, json_t **ret, struct gs_error *err) {
        struct ytree y = { .err = err, .path = path };
        json_t *root = NULL;
        int r = 0;
        bool doc = false;

        if (len > KUBE_CONFIG_MAX)
                return gs_error_set(err, -EFBIG, "%s: larger than %u bytes", path, KUBE_CONFIG_MAX);
        if (!yaml_parser_initialize(&y.p))
                return -ENOMEM;
        yaml_parser_set_input_string(&y.p, (const unsigned char *)text, len);
        for (;;) {
                yaml_event_t ev;
                r = y_next(&y, &ev);
                if (r < 0)
                        break;
                yaml_event_type_t t = ev.type;
                if (t == YAML_STREAM_END_EVENT) {
                        yaml_event_delete(&ev);
                        break;
                }
                if (t == YAML_STREAM_START_EVENT || t == YAML_DOCUMENT_END_EVENT) {
                        yaml_event_delete(&ev);
                        continue;
                }
                if (t == YAML_DOCUMENT_START_EVENT) {
                        yaml_event_delete(&ev);
                        if (doc) {
                                r = gs_error_set(err, -EINVAL, "%s: more than one YAML document", path);
                                break;
                        }
                        doc = true;
                        continue;
                }
                r = y_node(&y, &ev, 0, &root);
                yaml_event_delete(&ev);
                if (r < 0)
                        break;
        }
        yaml_parser_delete(&y.p);
        if (r < 0) {
                json_decref(root);
                return r;
        }
        if (!root)
                return gs_error_set(err, -EINVAL, "%s: empty file", path);
        *ret = root;
        return 0;
}

/* ---- base64 -------------------------------------------------------------------------------- */

int kube_base64_decode(const char *in, size_t len, char **ret, size_t *ret_len) {
        static const signed char T[256] = {
                ['A'] = 1,  ['B'] = 2,  ['C'] = 3,  ['D'] = 4,  ['E'] = 5,  ['F'] = 6,  ['G'] = 7,  ['H'] = 8,
                ['I'] = 9,  ['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14, ['O'] = 15, ['P'] = 16,
                ['Q'] = 17, ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21, ['V'] = 22, ['W'] = 23, ['X'] = 24,
                ['Y'] = 25, ['Z'] = 26, ['a'] = 27, ['b'] = 28, ['c'] = 29, ['d'] = 30, ['e'] = 31, ['f'] = 32,
                ['g'] = 33, ['h'] = 34, ['i'] = 35, ['j'] = 36, ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40,
                ['o'] = 41, ['p'] = 42, ['q'] = 43, ['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48,
                ['w'] = 49, ['x'] = 50, ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56,
                ['4'] = 57, ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63, ['/'] = 64,
        };
        char *out = malloc(len / 4 * 3 + 4);
        if (!out)
                return -ENOMEM;
        size_t n = 0, pad = 0;
        uint32_t acc = 0;
        unsigned bits = 0, q = 0;
        for (size_t i = 0; i < len; i++) {
                unsigned char ch = (unsigned char)in[i];
                if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')
                        continue;
                if (ch == '=') {
                        pad++;
                        continue;
                }
                if (pad || !T[ch]) {
                        free(out);
                        return -EINVAL;
                }
                acc = (acc << 6) | (uint32_t)(T[ch] - 1);
                bits += 6;
                q++;
                if (bits >= 8) {
                        bits -= 8;
                        out[n++] = (char)((acc >> bits) & 0xff);
                }
        }
        if (pad > 2 || q % 4 == 1 || (pad && (q + pad) % 4)) {
                free(out);
                return -EINVAL;
        }
        out[n] = 0;
        *ret = out;
        *ret_len = n;
        return 0;
}

/* ---- kubeconfig ---------------------------------------------------------------------------- */

void kube_config_done(struct kube_config *c) {
        if (!c)
                return;
        free(c->server);
        free(c->ca_file);
        free(c->ca_pem);
        free(c->cert_file);
        free(c->key_file);
        free(c->cert_pem);
        if (c->key_pem) {
                explicit_bzero(c->key_pem, strlen(c->key_pem));
                free(c->key_pem);
        }
        if (c->token) {
                explicit_bzero(c->token, strlen(c->token));
                free(c->token);
        }
        free(c->token_file);
        free(c->namespace_);
        free(c->source);
        memset(c, 0, sizeof *c);
}

/* The named entry of a kubeconfig list (clusters/contexts/users), or NULL. */
static int named_entry(json_t *root, const char *list, const char *name, const char *inner, const char *path,
                       json_t **ret, struct gs_error *err) {
        json_t *a = json_object_get(root, list);
        if (a && !json_is_array(a))
                return gs_error_set(err, -EINVAL, "%s: %s: not a list", path, list);
        size_t i;
        json_t *v;
        json_array_foreach(a, i, v) {
                json_t *n = json_object_get(v, "name");
                if (!json_is_string(n))
                        return gs_error_set(err, -EINVAL, "%s: %s[%zu].name: missing", path, list, i);
                if (!streq(json_string_value(n), name))
                        continue;
                json_t *in = json_object_get(v, inner);
                if (!json_is_object(in))
                        return gs_error_set(err, -EINVAL, "%s: %s[name=%.64s].%s: missing or not a mapping", path, list,
                                            name, inner);
                *ret = in;
                return 0;
        }
        return gs_error_set(err, -EINVAL, "%s: %s: no entry named '%.64s'", path, list, name);
}

/* Optional string field; a non-string is an error. */
static int get_str(json_t *o, const char *field, const char *where, const char *path, const char **ret,
                   struct gs_error *err) {
        json_t *v = json_object_get(o, field);
        *ret = NULL;
        if (!v)
                return 0;
        if (!json_is_string(v))
                return gs_error_set(err, -EINVAL, "%s: %s.%s: not a string", path, where, field);
        *ret = json_string_value(v);
        return 0;
}

static int dup_path(const char *file, const char *base_dir, char **ret) {
        if (file[0] == '/' || !base_dir)
                *ret = strdup(file);
        else if (asprintf(ret, "%s/%s", base_dir, file) < 0)
                *ret = NULL;
        return *ret ? 0 : -ENOMEM;
}

static int pem_from_base64(const char *b64, const char *where, const char *field, const char *path, char **ret,
                           struct gs_error *err) {
        size_t n;
        char *pem;
        if (kube_base64_decode(b64, strlen(b64), &pem, &n) < 0)
                return gs_error_set(err, -EINVAL, "%s: %s.%s: not valid base64", path, where, field);
        if (n == 0 || strlen(pem) != n || !strstr(pem, "-----BEGIN ")) {
                free(pem);
                return gs_error_set(err, -EINVAL, "%s: %s.%s: does not hold PEM data", path, where, field);
        }
        *ret = pem;
        return 0;
}

/* lint: long — a strict parser: one check per field of the format, in the format's order, each with its own
 * message; split, the grammar would no longer read top to bottom (kubeconfig: context, cluster, user, each field
 * and its mutual exclusions). */
int kube_config_parse(const char *text, size_t len, const char *path, const char *context, struct kube_config *ret,
                      struct gs_error *err) {
        struct kube_config c = { 0 };
        json_t *root = NULL, *ctx, *cl, *us;
        const char *s;
        char where[256], *dir = NULL;
        int r;

        if (!path)
                path = "kubeconfig";
        r = kube_yaml_to_json(text, len, path, &root, err);
        if (r < 0)
                return r;
        if (!json_is_object(root)) {
                r = gs_error_set(err, -EINVAL, "%s: not a mapping at the top", path);
                goto fail;
        }
        json_t *kind = json_object_get(root, "kind");
        if (kind && (!json_is_string(kind) || !streq(json_string_value(kind), "Config"))) {
                r = gs_error_set(err, -EINVAL, "%s: kind: expected Config", path);
                goto fail;
        }
        if (!context) {
                r = get_str(root, "current-context", "", path, &context, err);
                if (r < 0)
                        goto fail;
                if (!context || !context[0]) {
                        r = gs_error_set(err, -EINVAL, "%s: current-context: not set", path);
                        goto fail;
                }
        }
        r = named_entry(root, "contexts", context, "context", path, &ctx, err);
        if (r < 0)
                goto fail;
        snprintf(where, sizeof where, "contexts[name=%.64s].context", context);
        const char *cluster, *user;
        if ((r = get_str(ctx, "cluster", where, path, &cluster, err)) < 0 ||
            (r = get_str(ctx, "user", where, path, &user, err)) < 0 ||
            (r = get_str(ctx, "namespace", where, path, &s, err)) < 0)
                goto fail;
        if (!cluster) {
                r = gs_error_set(err, -EINVAL, "%s: %s.cluster: missing", path, where);
                goto fail;
        }
        if (s && !(c.namespace_ = strdup(s)))
                goto oom;
        r = named_entry(root, "clusters", cluster, "cluster", path, &cl, err);
        if (r < 0)
                goto fail;

        {
                const char *slash = strrchr(path, '/');
                if (slash && !(dir = strndup(path, (size_t)(slash - path) + (slash == path))))
                        goto oom;
        }

        snprintf(where, sizeof where, "clusters[name=%.64s].cluster", cluster);
        if ((r = get_str(cl, "server", where, path, &s, err)) < 0)
                goto fail;
        if (!s || !s[0]) {
                r = gs_error_set(err, -EINVAL, "%s: %s.server: missing", path, where);
                goto fail;
        }
        const char *host = startswith(s, "https://") ? s + 8 : startswith(s, "http://") ? s + 7 : NULL;
        if (!host || !host[0] || host[0] == '/') {
                r = gs_error_set(err, -EINVAL, "%s: %s.server: not an http(s) URL: '%.128s'", path, where, s);
                goto fail;
        }
        if (!(c.server = strdup(s)))
                goto oom;
        for (size_t n = strlen(c.server); n > 0 && c.server[n - 1] == '/'; n--)
                c.server[n - 1] = 0;
        if ((r = get_str(cl, "certificate-authority-data", where, path, &s, err)) < 0)
                goto fail;
        if (s && (r = pem_from_base64(s, where, "certificate-authority-data", path, &c.ca_pem, err)) < 0)
                goto fail;
        if ((r = get_str(cl, "certificate-authority", where, path, &s, err)) < 0)
                goto fail;
        if (s && !c.ca_pem && dup_path(s, dir, &c.ca_file) < 0)
                goto oom;
        if ((r = get_str(cl, "insecure-skip-tls-verify", where, path, &s, err)) < 0)
                goto fail;
        if (s) {
                if (streq(s, "true"))
                        c.insecure = true;
                else if (!streq(s, "false")) {
                        r = gs_error_set(err, -EINVAL, "%s: %s.insecure-skip-tls-verify: expected true or false", path,
                                         where);
                        goto fail;
                }
        }

        if (user) {
                r = named_entry(root, "users", user, "user", path, &us, err);
                if (r < 0)
                        goto fail;
                snprintf(where, sizeof where, "users[name=%.64s].user", user);
                if (json_object_get(us, "exec") || json_object_get(us, "auth-provider")) {
                        r = gs_error_set(err, -ENOTSUP,
                                         "%s: %s: exec and auth-provider credentials are not supported (use a token, "
                                         "tokenFile or a client certificate)",
                                         path, where);
                        goto fail;
                }
                static const struct {
                        const char *field;
                        bool pem, file;
                        size_t off;
                } F[] = {
                        { "client-certificate-data", true, false, offsetof(struct kube_config, cert_pem) },
                        { "client-key-data", true, false, offsetof(struct kube_config, key_pem) },
                        { "client-certificate", false, true, offsetof(struct kube_config, cert_file) },
                        { "client-key", false, true, offsetof(struct kube_config, key_file) },
                        { "token", false, false, offsetof(struct kube_config, token) },
                        { "tokenFile", false, true, offsetof(struct kube_config, token_file) },
                };
                for (size_t i = 0; i < ELEMENTSOF(F); i++) {
                        char **dst = (char **)((char *)&c + F[i].off);
                        if ((r = get_str(us, F[i].field, where, path, &s, err)) < 0)
                                goto fail;
                        if (!s)
                                continue;
                        if (F[i].pem)
                                r = pem_from_base64(s, where, F[i].field, path, dst, err);
                        else if (F[i].file)
                                r = dup_path(s, dir, dst);
                        else
                                r = (*dst = strdup(s)) ? 0 : -ENOMEM;
                        if (r == -ENOMEM)
                                goto oom;
                        if (r < 0)
                                goto fail;
                }
                bool cert = c.cert_pem || c.cert_file, key = c.key_pem || c.key_file;
                if (cert != key) {
                        r = gs_error_set(err, -EINVAL, "%s: %s: %s without %s", path, where,
                                         cert ? "a client certificate" : "a client key",
                                         cert ? "its client-key" : "its client-certificate");
                        goto fail;
                }
        }
        if (!(c.source = strdup(path)))
                goto oom;
        free(dir);
        json_decref(root);
        *ret = c;
        return 0;
oom:
        r = gs_error_set(err, -ENOMEM, "%s: out of memory", path);
fail:
        free(dir);
        json_decref(root);
        kube_config_done(&c);
        return r;
}

int kube_config_in_cluster(const char *root, struct kube_config *ret, struct gs_error *err) {
        struct kube_config c = { 0 };
        const char *host = secure_getenv("KUBERNETES_SERVICE_HOST");
        const char *port = secure_getenv("KUBERNETES_SERVICE_PORT");
        char p[PATH_MAX];
        int r;

        if (!root)
                root = SA_ROOT;
        if (!host || !host[0])
                return gs_error_set(err, -ENOENT, "not in a pod: KUBERNETES_SERVICE_HOST is not set");
        if (!port || !port[0])
                port = "443";
        snprintf(p, sizeof p, "%s/token", root);
        if (access(p, R_OK) < 0)
                return gs_error_set(err, -ENOENT, "in-cluster: %s: %s", p, strerror(errno));
        bool v6 = strchr(host, ':') != NULL;
        if (asprintf(&c.server, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port) < 0) {
                c.server = NULL;
                goto oom;
        }
        if (!(c.token_file = strdup(p)))
                goto oom;
        snprintf(p, sizeof p, "%s/ca.crt", root);
        if (access(p, R_OK) == 0 && !(c.ca_file = strdup(p)))
                goto oom;
        snprintf(p, sizeof p, "%s/namespace", root);
        char *ns = NULL;
        size_t nslen;
        if (read_file(p, 256, &ns, &nslen) >= 0) {
                while (nslen && (ns[nslen - 1] == '\n' || ns[nslen - 1] == ' '))
                        ns[--nslen] = 0;
                c.namespace_ = ns;
        }
        if (!(c.source = strdup("in-cluster")))
                goto oom;
        *ret = c;
        return 0;
oom:
        r = gs_error_set(err, -ENOMEM, "out of memory");
        kube_config_done(&c);
        return r;
}

static int load_file(const char *path, const char *context, struct kube_config *ret, struct gs_error *err) {
        char *text = NULL;
        size_t len = 0;
        int r = read_file(path, KUBE_CONFIG_MAX, &text, &len);
        if (r < 0)
                return gs_error_set(err, r, "%s: %s", path, strerror(-r));
        r = kube_config_parse(text, len, path, context, ret, err);
        free(text);
        return r;
}

int kube_config_load(const char *kubeconfig_path, const char *context, struct kube_config *ret, struct gs_error *err) {
        if (kubeconfig_path && kubeconfig_path[0])
                return load_file(kubeconfig_path, context, ret, err);
        const char *env = secure_getenv("KUBECONFIG");
        if (env && env[0]) {
                /* kubectl merges the list; we take the first file that exists. */
                for (const char *f = env; *f;) {
                        size_t n = strcspn(f, ":");
                        char one[PATH_MAX];
                        if (n > 0 && n < sizeof one) {
                                memcpy(one, f, n);
                                one[n] = 0;
                                if (access(one, F_OK) == 0)
                                        return load_file(one, context, ret, err);
                        }
                        f += n;
                        if (*f == ':')
                                f++;
                }
                return gs_error_set(err, -ENOENT, "KUBECONFIG=%.200s: no such file", env);
        }
        int r = kube_config_in_cluster(NULL, ret, err);
        if (r != -ENOENT)
                return r;
        const char *home = secure_getenv("HOME");
        if (home && home[0]) {
                char p[PATH_MAX];
                snprintf(p, sizeof p, "%s/.kube/config", home);
                if (access(p, F_OK) == 0)
                        return load_file(p, context, ret, err);
        }
        return gs_error_set(
                err, -ENOENT,
                "no API server configured: no --kubeconfig, no KUBECONFIG, not in a pod, no ~/.kube/config");
}
