/* SPDX-License-Identifier: Apache-2.0 */
/*
 * limits — strict parser and writer of the limits file (format in limits.h).
 *
 * Compiled into libgpuslice-cuda.so, the gpuslice CLI and the agent. Pure: no I/O, no allocation,
 * no locale, no libc beyond <string.h>/<stdio.h>'s snprintf. Must never read outside text[0..len),
 * never accept a line it does not fully understand, never leave *ret half-written.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "interposer/limits.h"

#define LINE_MAX_LEN 1024u
#define ELEMENTS(x) (sizeof(x) / sizeof((x)[0]))
#define MIN_LEN(n) ((n) > 64 ? 64 : (n)) /* bound what an error message quotes */

static void set_err(char *err, size_t err_len, unsigned line, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static void set_err(char *err, size_t err_len, unsigned line, const char *fmt, ...) {
        if (!err || !err_len)
                return;
        int n = snprintf(err, err_len, "line %u: ", line);
        if (n < 0 || (size_t)n >= err_len)
                return;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, err_len - (size_t)n, fmt, ap);
        va_end(ap);
}

/* A token: [p, p+n). */
struct tok {
        const char *p;
        size_t n;
};

static bool tok_eq(struct tok t, const char *s) {
        size_t n = strlen(s);
        return t.n == n && memcmp(t.p, s, n) == 0;
}

static bool is_space(char c) {
        return c == ' ' || c == '\t';
}

/* Split a line into at most max tokens; returns the count, or max + 1 when there are more. */
static size_t split(const char *p, size_t n, struct tok *toks, size_t max) {
        size_t count = 0, i = 0;
        while (i < n) {
                while (i < n && is_space(p[i]))
                        i++;
                if (i == n)
                        break;
                size_t start = i;
                while (i < n && !is_space(p[i]))
                        i++;
                if (count == max)
                        return max + 1;
                toks[count++] = (struct tok){ p + start, i - start };
        }
        return count;
}

/* Plain decimal, no sign, no leading zeros (except "0"), fits in max. */
static bool parse_dec(struct tok t, uint64_t max, uint64_t *ret) {
        if (t.n == 0 || t.n > 20 || (t.n > 1 && t.p[0] == '0'))
                return false;
        uint64_t v = 0;
        for (size_t i = 0; i < t.n; i++) {
                char c = t.p[i];
                if (c < '0' || c > '9')
                        return false;
                unsigned d = (unsigned)(c - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return false;
                v = v * 10 + d;
        }
        if (v > max)
                return false;
        *ret = v;
        return true;
}

static bool container_char_ok(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
               c == ':' || c == '-';
}

static bool uuid_char_ok(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '/' ||
               c == '_';
}

/* Printable, no control characters; the path is used as is by open(2). */
static bool path_char_ok(char c) {
        return (unsigned char)c >= 0x21 && (unsigned char)c < 0x7f;
}

static bool copy_checked(struct tok t, char *dst, size_t cap, bool (*ok)(char)) {
        if (t.n == 0 || t.n >= cap)
                return false;
        for (size_t i = 0; i < t.n; i++)
                if (!ok(t.p[i]))
                        return false;
        memcpy(dst, t.p, t.n);
        dst[t.n] = '\0';
        return true;
}

static int parse_device(struct tok *toks, size_t n, struct gs_limits *l, unsigned line, char *err, size_t err_len) {
        if (l->n_devices == GS_MAX_DEVICES) {
                set_err(err, err_len, line, "more than %u devices", GS_MAX_DEVICES);
                return -EINVAL;
        }
        struct gs_limits_device d = { .core_percent = 100 };
        uint64_t v;
        if (n < 2 || !parse_dec(toks[1], GS_MAX_DEVICES * 64u, &v)) {
                set_err(err, err_len, line, "device needs an index (0..%u)", GS_MAX_DEVICES * 64u);
                return -EINVAL;
        }
        d.index = (unsigned)v;
        bool seen_uuid = false, seen_mem = false, seen_core = false, seen_ctx = false;
        for (size_t i = 2; i < n; i++) {
                const char *eq = memchr(toks[i].p, '=', toks[i].n);
                if (!eq) {
                        set_err(err, err_len, line, "expected key=value, got '%.*s'", (int)MIN_LEN(toks[i].n),
                                toks[i].p);
                        return -EINVAL;
                }
                struct tok key = { toks[i].p, (size_t)(eq - toks[i].p) };
                struct tok val = { eq + 1, toks[i].n - key.n - 1 };
                if (tok_eq(key, "uuid") && !seen_uuid) {
                        if (!copy_checked(val, d.uuid, sizeof d.uuid, uuid_char_ok)) {
                                set_err(err, err_len, line, "bad uuid");
                                return -EINVAL;
                        }
                        seen_uuid = true;
                } else if (tok_eq(key, "memory") && !seen_mem) {
                        if (!parse_dec(val, UINT64_MAX, &d.memory_bytes) || d.memory_bytes == 0) {
                                set_err(err, err_len, line, "memory must be a positive number of bytes");
                                return -EINVAL;
                        }
                        seen_mem = true;
                } else if (tok_eq(key, "context") && !seen_ctx) {
                        if (!parse_dec(val, UINT64_MAX, &d.context_bytes)) {
                                set_err(err, err_len, line, "context must be a number of bytes");
                                return -EINVAL;
                        }
                        seen_ctx = true;
                } else if (tok_eq(key, "core") && !seen_core) {
                        if (!parse_dec(val, 100, &v) || v == 0) {
                                set_err(err, err_len, line, "core must be 1..100");
                                return -EINVAL;
                        }
                        d.core_percent = (unsigned)v;
                        seen_core = true;
                } else {
                        set_err(err, err_len, line, "unknown or repeated key '%.*s'", (int)MIN_LEN(key.n), key.p);
                        return -EINVAL;
                }
        }
        for (unsigned i = 0; i < l->n_devices; i++) {
                if (l->dev[i].index == d.index) {
                        set_err(err, err_len, line, "device %u listed twice", d.index);
                        return -EINVAL;
                }
                if (d.uuid[0] && strcmp(l->dev[i].uuid, d.uuid) == 0) {
                        set_err(err, err_len, line, "uuid %s listed twice", d.uuid);
                        return -EINVAL;
                }
        }
        l->dev[l->n_devices++] = d;
        return 0;
}

/* lint: long — a strict parser: one check per field of the format, in the format's order, each with its own
 * message; split, the grammar would no longer read top to bottom (docs/interposer.md); the interposer trusts
 * nothing it has not checked here. */
int gs_limits_parse(const char *text, size_t len, struct gs_limits *ret, char *err, size_t err_len) {
        if (err && err_len)
                err[0] = '\0';
        if (!text || !ret)
                return -EINVAL;
        if (len > GS_LIMITS_MAX_FILE) {
                set_err(err, err_len, 0, "file longer than %u bytes", GS_LIMITS_MAX_FILE);
                return -E2BIG;
        }
        struct gs_limits l;
        memset(&l, 0, sizeof l);
        bool seen_header = false, seen_container = false, seen_region = false, seen_policy = false;
        unsigned line = 0;
        size_t pos = 0;
        while (pos < len) {
                line++;
                const char *nl = memchr(text + pos, '\n', len - pos);
                size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
                const char *p = text + pos;
                pos += n + (nl ? 1 : 0);
                if (n > LINE_MAX_LEN) {
                        set_err(err, err_len, line, "line longer than %u bytes", LINE_MAX_LEN);
                        return -EINVAL;
                }
                for (size_t i = 0; i < n; i++)
                        if ((unsigned char)p[i] < 0x20 && p[i] != '\t') {
                                set_err(err, err_len, line, "control character");
                                return -EINVAL;
                        }
                struct tok toks[8];
                size_t nt = split(p, n, toks, ELEMENTS(toks));
                if (nt == 0 || toks[0].p[0] == '#')
                        continue;
                if (nt > ELEMENTS(toks)) {
                        set_err(err, err_len, line, "too many fields");
                        return -EINVAL;
                }
                if (!seen_header) {
                        uint64_t v;
                        if (nt != 2 || !tok_eq(toks[0], "gpuslice-limits") || !parse_dec(toks[1], UINT32_MAX, &v)) {
                                set_err(err, err_len, line, "expected 'gpuslice-limits %u'", GS_LIMITS_VERSION);
                                return -EINVAL;
                        }
                        if (v != GS_LIMITS_VERSION) {
                                set_err(err, err_len, line, "limits file version %llu, this library reads %u",
                                        (unsigned long long)v, GS_LIMITS_VERSION);
                                return -EINVAL;
                        }
                        l.version = (unsigned)v;
                        seen_header = true;
                        continue;
                }
                if (tok_eq(toks[0], "container")) {
                        if (seen_container || nt != 2 ||
                            !copy_checked(toks[1], l.container, sizeof l.container, container_char_ok)) {
                                set_err(err, err_len, line, "container: one id of [A-Za-z0-9._:-], at most %u chars",
                                        GS_CONTAINER_MAX - 1);
                                return -EINVAL;
                        }
                        seen_container = true;
                } else if (tok_eq(toks[0], "region")) {
                        if (seen_region || nt != 2 || toks[1].p[0] != '/' ||
                            !copy_checked(toks[1], l.region, sizeof l.region, path_char_ok)) {
                                set_err(err, err_len, line, "region: one absolute path");
                                return -EINVAL;
                        }
                        seen_region = true;
                } else if (tok_eq(toks[0], "core-policy")) {
                        if (seen_policy || nt != 2 || !(tok_eq(toks[1], "hard") || tok_eq(toks[1], "elastic"))) {
                                set_err(err, err_len, line, "core-policy: hard or elastic");
                                return -EINVAL;
                        }
                        l.core_policy = tok_eq(toks[1], "hard") ? GS_CORE_HARD : GS_CORE_ELASTIC;
                        seen_policy = true;
                } else if (tok_eq(toks[0], "device")) {
                        int r = parse_device(toks, nt, &l, line, err, err_len);
                        if (r < 0)
                                return r;
                } else {
                        set_err(err, err_len, line, "unknown directive '%.*s'", (int)MIN_LEN(toks[0].n), toks[0].p);
                        return -EINVAL;
                }
        }
        if (!seen_header || !seen_container || !seen_region || l.n_devices == 0) {
                set_err(err, err_len, line, "missing %s",
                        !seen_header      ? "'gpuslice-limits' header"
                        : !seen_container ? "'container'"
                        : !seen_region    ? "'region'"
                                          : "'device' line");
                return -EINVAL;
        }
        *ret = l;
        return 0;
}

int gs_limits_format(const struct gs_limits *l, char *buf, size_t len) {
        if (!l || !buf || l->n_devices == 0 || l->n_devices > GS_MAX_DEVICES)
                return -EINVAL;
        size_t off = 0;
#define APPEND(...)                                                   \
        do {                                                          \
                int _n = snprintf(buf + off, len - off, __VA_ARGS__); \
                if (_n < 0)                                           \
                        return -EINVAL;                               \
                if ((size_t)_n >= len - off)                          \
                        return -ENOBUFS;                              \
                off += (size_t)_n;                                    \
        } while (0)
        if (len == 0)
                return -ENOBUFS;
        APPEND("gpuslice-limits %u\ncontainer %s\nregion %s\ncore-policy %s\n", GS_LIMITS_VERSION, l->container,
               l->region, l->core_policy == GS_CORE_ELASTIC ? "elastic" : "hard");
        for (unsigned i = 0; i < l->n_devices; i++) {
                const struct gs_limits_device *d = &l->dev[i];
                APPEND("device %u", d->index);
                if (d->uuid[0])
                        APPEND(" uuid=%s", d->uuid);
                if (d->memory_bytes)
                        APPEND(" memory=%llu", (unsigned long long)d->memory_bytes);
                if (d->context_bytes)
                        APPEND(" context=%llu", (unsigned long long)d->context_bytes);
                APPEND(" core=%u\n", d->core_percent);
        }
#undef APPEND
        /* Only ever hand out what the parser accepts, and reads back as l: a value with a space or
         * tab in it (container "\tc") would otherwise parse, as something else. */
        struct gs_limits check;
        if (gs_limits_parse(buf, off, &check, NULL, 0) < 0)
                return -EINVAL;
        if (strcmp(check.container, l->container) != 0 || strcmp(check.region, l->region) != 0 ||
            check.core_policy != (l->core_policy == GS_CORE_ELASTIC ? GS_CORE_ELASTIC : GS_CORE_HARD))
                return -EINVAL;
        for (unsigned i = 0; i < l->n_devices; i++) {
                const struct gs_limits_device *a = &check.dev[i], *b = &l->dev[i];
                if (a->index != b->index || strcmp(a->uuid, b->uuid) != 0 || a->memory_bytes != b->memory_bytes ||
                    a->core_percent != b->core_percent || a->context_bytes != b->context_bytes)
                        return -EINVAL;
        }
        return (int)off;
}

static const char *uuid_body(const char *u) {
        return strncasecmp(u, "GPU-", 4) == 0 || strncasecmp(u, "MIG-", 4) == 0 ? u + 4 : u;
}

bool gs_uuid_equal(const char *a, const char *b) {
        return a && b && a[0] && b[0] && strcasecmp(uuid_body(a), uuid_body(b)) == 0;
}

int gs_limits_match(const struct gs_limits *l, unsigned ordinal, const char *uuid) {
        for (unsigned i = 0; i < l->n_devices; i++) {
                const struct gs_limits_device *d = &l->dev[i];
                if (d->uuid[0] ? gs_uuid_equal(d->uuid, uuid) : d->index == ordinal)
                        return (int)i;
        }
        return -1;
}
