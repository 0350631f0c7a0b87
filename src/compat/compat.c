/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compat — NVIDIA_REQUIRE_* expressions and the CUDA ↔ driver table (compat.h). Pure: no I/O, no
 * allocation, no logging. Every input is read through (pointer, length) and never past it.
 */
#include "compat/compat.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "util/error.h"
#include "util/util.h"

/* The toolkit's own minimum Linux driver, from NVIDIA's CUDA release notes (Table 3). */
static const struct compat_cuda_row cuda_table[] = {
        { 9000, "384.81" },     { 9010, "390.46" },     { 9020, "396.26" },     { 10000, "410.48" },
        { 10010, "418.39" },    { 10020, "440.33" },    { 11000, "450.36.06" }, { 11010, "455.23" },
        { 11020, "460.27.03" }, { 11030, "465.19.01" }, { 11040, "470.42.01" }, { 11050, "495.29.05" },
        { 11060, "510.39.01" }, { 11070, "515.43.04" }, { 11080, "520.61.05" }, { 12000, "525.60.13" },
        { 12010, "530.30.02" }, { 12020, "535.54.03" }, { 12030, "545.23.06" }, { 12040, "550.54.14" },
        { 12050, "555.42.02" }, { 12060, "560.28.03" }, { 12080, "570.26" },    { 12090, "575.51.03" },
        { 13000, "580.65.06" },
};

const struct compat_cuda_row *compat_cuda_table(size_t *ret_n) {
        *ret_n = ELEMENTSOF(cuda_table);
        return cuda_table;
}

const char *compat_min_driver(int cuda) {
        for (size_t i = 0; i < ELEMENTSOF(cuda_table); i++)
                if (cuda_table[i].cuda == cuda)
                        return cuda_table[i].min_driver;
        return NULL;
}

const char *compat_minor_compat_driver(int major) {
        switch (major) {
                case 11: return "450.80.02";
                case 12: return "525.60.13";
                case 13: return "580.65.06";
                default: return NULL;
        }
}

/* ---- versions ---- */

int compat_version_parse(const char *s, size_t len, struct compat_version *ret) {
        struct compat_version v = { { 0 }, 0 };
        size_t i = 0;
        if (len == 0)
                return -EINVAL;
        for (;;) {
                unsigned long x = 0;
                size_t digits = 0;
                while (i < len && s[i] >= '0' && s[i] <= '9') {
                        if (++digits > 9)
                                return -EINVAL;
                        x = x * 10 + (unsigned)(s[i] - '0');
                        i++;
                }
                if (digits == 0 || v.n == COMPAT_VERSION_PARTS)
                        return -EINVAL;
                v.part[v.n++] = (unsigned)x;
                if (i == len)
                        break;
                if (s[i] != '.')
                        return -EINVAL;
                i++;
        }
        *ret = v;
        return 0;
}

int compat_version_cmp(const struct compat_version *a, const struct compat_version *b) {
        for (unsigned i = 0; i < COMPAT_VERSION_PARTS; i++) {
                unsigned x = i < a->n ? a->part[i] : 0, y = i < b->n ? b->part[i] : 0;
                if (x != y)
                        return x < y ? -1 : 1;
        }
        return 0;
}

struct compat_version compat_version_from_cuda(int cuda) {
        struct compat_version v = { { (unsigned)(cuda / 1000), (unsigned)(cuda % 1000) / 10 }, 2 };
        return v;
}

char *compat_version_format(const struct compat_version *v, char *buf, size_t len) {
        size_t o = 0;
        buf[0] = '\0';
        for (unsigned i = 0; i < v->n && o < len; i++) {
                int w = snprintf(buf + o, len - o, i == 0 ? "%u" : i == 1 ? ".%u" : ".%02u", v->part[i]);
                if (w < 0)
                        break;
                o += (size_t)w;
        }
        return buf;
}

/* ---- brands ---- */

static const char *const brand_names[] = {
        "unknown", "quadro", "tesla",       "nvs",       "grid",      "geforce", "titan",      "vapps",    "vpc",
        "vcs",     "vws",    "cloudgaming", "quadrortx", "nvidiartx", "nvidia",  "geforcertx", "titanrtx",
};

const char *compat_brand_name(int nvml_brand) {
        if (nvml_brand < 0 || (size_t)nvml_brand >= ELEMENTSOF(brand_names))
                return "unknown";
        return brand_names[nvml_brand];
}

static bool has_word(const char *name, const char *w) {
        return name && strcasestr(name, w) != NULL;
}

const char *compat_brand_from_name(const char *name) {
        if (has_word(name, "GeForce"))
                return "geforce";
        if (has_word(name, "Quadro"))
                return "quadro";
        if (has_word(name, "TITAN"))
                return "titan";
        if (has_word(name, "RTX A") || has_word(name, "RTX PRO"))
                return "nvidiartx";
        return "tesla";
}

bool compat_gpu_datacenter(const char *brand, const char *name) {
        static const char *const models[] = { "Tesla", "A100", "A30", "A40",  "A10",  "A16",  "A2",
                                              "H100",  "H200", "H20", "H800", "B200", "B100", "GB200",
                                              "L40",   "L4",   "L20", "V100", "P100", "P40",  "T4" };
        if (brand && brand[0])
                return strcasecmp(brand, "tesla") == 0;
        for (size_t i = 0; i < ELEMENTSOF(models); i++)
                if (has_word(name, models[i]))
                        return true;
        return false;
}

/* ---- classification ---- */

enum compat_mode compat_classify(int cuda, int driver_cuda, const char *driver, bool datacenter) {
        if (cuda <= 0 || driver_cuda <= 0)
                return COMPAT_NONE;
        if (cuda <= driver_cuda)
                return COMPAT_NATIVE;
        int major = cuda / 1000;
        if (major > driver_cuda / 1000)
                return datacenter ? COMPAT_FORWARD : COMPAT_FORWARD_NEEDS_DATACENTER;
        /* same major, newer minor */
        const char *min = compat_minor_compat_driver(major);
        struct compat_version have, need;
        if (!min || !driver || compat_version_parse(driver, strlen(driver), &have) < 0 ||
            compat_version_parse(min, strlen(min), &need) < 0)
                return COMPAT_NONE;
        return compat_version_cmp(&have, &need) >= 0 ? COMPAT_MINOR_VERSION : COMPAT_NONE;
}

const char *compat_mode_name(enum compat_mode m) {
        switch (m) {
                case COMPAT_NATIVE: return "native";
                case COMPAT_MINOR_VERSION: return "minor-version compatibility";
                case COMPAT_FORWARD: return "forward compatibility only (cuda-compat package)";
                case COMPAT_FORWARD_NEEDS_DATACENTER: return "no (forward compatibility needs a data-center GPU)";
                case COMPAT_NONE: break;
        }
        return "no";
}

/* ---- expressions ---- */

enum op {
        OP_EQ,
        OP_NE,
        OP_LT,
        OP_LE,
        OP_GT,
        OP_GE
};
static const char *const op_math[] = { "=", "≠", "<", "≤", ">", "≥" };

enum key {
        KEY_CUDA,
        KEY_DRIVER,
        KEY_ARCH,
        KEY_BRAND,
        KEY_OTHER
};

struct term {
        enum key key;
        enum op op;
        const char *text; /* the whole term, for messages */
        size_t text_len;
        const char *val;
        size_t val_len;
        struct compat_version v; /* for version keys */
};

_printf_(3, 4) static void say(char *msg, size_t len, const char *fmt, ...) {
        if (!msg || len == 0)
                return;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, len, fmt, ap);
        va_end(ap);
}

/* Printable copy of s[0..n) (at most 64 bytes shown; control bytes as '?'). */
static const char *show(const char *s, size_t n, char *buf, size_t len) {
        size_t k = 0, max = MIN(n, (size_t)64);
        for (size_t i = 0; i < max && k + 1 < len; i++)
                buf[k++] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
        buf[k] = '\0';
        if (n > max && k + 4 < len)
                strscpy(buf + k, "...", len - k);
        return buf;
}

static bool is_blank(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* lint: long — a strict parser: one check per field of the format, in the format's order, each with its own
 * message; split, the grammar would no longer read top to bottom. */
static int term_parse(const char *s, size_t n, struct term *ret, char *msg, size_t msg_len) {
        char b[96];
        size_t k = 0;
        while (k < n && (isalnum((unsigned char)s[k]) || s[k] == '_' || s[k] == '-'))
                k++;
        if (k == 0 || k == n) {
                say(msg, msg_len, "malformed requirement '%s': expected key<op>value (e.g. cuda>=12.2)",
                    show(s, n, b, sizeof b));
                return -EINVAL;
        }
        struct term t = { .text = s, .text_len = n };
        size_t o = k;
        if (n - o >= 2 && s[o + 1] == '=' && (s[o] == '!' || s[o] == '<' || s[o] == '>')) {
                t.op = s[o] == '!' ? OP_NE : s[o] == '<' ? OP_LE : OP_GE;
                o += 2;
        } else if (s[o] == '=' || s[o] == '<' || s[o] == '>') {
                t.op = s[o] == '=' ? OP_EQ : s[o] == '<' ? OP_LT : OP_GT;
                o += 1;
        } else {
                say(msg, msg_len, "malformed requirement '%s': expected an operator (=, !=, <, <=, >, >=) after '%s'",
                    show(s, n, b, sizeof b), show(s, k, b + 48, sizeof b - 48));
                return -EINVAL;
        }
        t.val = s + o;
        t.val_len = n - o;
        if (t.val_len == 0) {
                say(msg, msg_len, "malformed requirement '%s': no value", show(s, n, b, sizeof b));
                return -EINVAL;
        }
        for (size_t i = 0; i < t.val_len; i++)
                if ((unsigned char)t.val[i] < 0x21 || t.val[i] == 0x7f || strchr("=<>!", t.val[i])) {
                        say(msg, msg_len, "malformed requirement '%s': bad character in the value",
                            show(s, n, b, sizeof b));
                        return -EINVAL;
                }
        if (k == 4 && strncasecmp(s, "cuda", 4) == 0)
                t.key = KEY_CUDA;
        else if (k == 6 && strncasecmp(s, "driver", 6) == 0)
                t.key = KEY_DRIVER;
        else if (k == 4 && strncasecmp(s, "arch", 4) == 0)
                t.key = KEY_ARCH;
        else if (k == 5 && strncasecmp(s, "brand", 5) == 0)
                t.key = KEY_BRAND;
        else
                t.key = KEY_OTHER;
        if (t.key == KEY_BRAND && t.op != OP_EQ && t.op != OP_NE) {
                say(msg, msg_len, "malformed requirement '%s': brand takes = or != only", show(s, n, b, sizeof b));
                return -EINVAL;
        }
        if ((t.key == KEY_CUDA || t.key == KEY_DRIVER || t.key == KEY_ARCH) &&
            compat_version_parse(t.val, t.val_len, &t.v) < 0) {
                say(msg, msg_len, "malformed requirement '%s': '%s' is not a version", show(s, n, b, sizeof b),
                    show(t.val, t.val_len, b + 64, sizeof b - 64));
                return -EINVAL;
        }
        *ret = t;
        return 0;
}

static bool op_holds(enum op op, int c) {
        switch (op) {
                case OP_EQ: return c == 0;
                case OP_NE: return c != 0;
                case OP_LT: return c < 0;
                case OP_LE: return c <= 0;
                case OP_GT: return c > 0;
                case OP_GE: return c >= 0;
        }
        return false;
}

/* What would satisfy a cuda term, in words: "driver ≥ 580.65.06 for CUDA 13.0". */
static void cuda_hint(const struct term *t, char *buf, size_t len) {
        char v[32];
        compat_version_format(&t->v, v, sizeof v);
        int cuda = (int)(t->v.part[0] * 1000 + (t->v.n > 1 ? MIN(t->v.part[1], 99u) * 10 : 0));
        if ((t->op == OP_GE || t->op == OP_GT || t->op == OP_EQ) && t->v.part[0] < 1000) {
                const char *d = compat_min_driver(cuda);
                if (d)
                        say(buf, len, "needs driver ≥ %s for CUDA %s", d, v);
                else if (compat_minor_compat_driver((int)t->v.part[0]))
                        say(buf, len, "needs a driver for CUDA %s or newer (CUDA %u.x starts at driver %s)", v,
                            t->v.part[0], compat_minor_compat_driver((int)t->v.part[0]));
                else
                        say(buf, len, "needs a driver supporting CUDA %s %s", op_math[t->op], v);
        } else
                say(buf, len, "needs CUDA %s %s", op_math[t->op], v);
}

/* Evaluate one term for one GPU (NULL: none). 1 holds, 0 fails (why filled). */
static int term_eval(const struct term *t, const struct compat_node *node, const struct compat_gpu *g, char *why,
                     size_t len) {
        char have[64], b[80], need[160];
        struct compat_version v;
        switch (t->key) {
                case KEY_OTHER: return 1;
                case KEY_CUDA:
                        if (node->cuda <= 0) {
                                cuda_hint(t, need, sizeof need);
                                say(why, len, "%s, the node's CUDA driver version is unknown", need);
                                return 0;
                        }
                        v = compat_version_from_cuda(node->cuda);
                        if (op_holds(t->op, compat_version_cmp(&v, &t->v)))
                                return 1;
                        cuda_hint(t, need, sizeof need);
                        say(why, len, "%s, node has %s (CUDA %s)", need,
                            node->driver[0] ? node->driver : "an unknown driver",
                            compat_version_format(&v, have, sizeof have));
                        return 0;
                case KEY_DRIVER:
                        if (!node->driver[0] || compat_version_parse(node->driver, strlen(node->driver), &v) < 0) {
                                say(why, len, "needs driver %s %s, the node's driver version is unknown",
                                    op_math[t->op], show(t->val, t->val_len, b, sizeof b));
                                return 0;
                        }
                        if (op_holds(t->op, compat_version_cmp(&v, &t->v)))
                                return 1;
                        say(why, len, "needs driver %s %s, node has %s", op_math[t->op],
                            show(t->val, t->val_len, b, sizeof b), node->driver);
                        return 0;
                case KEY_ARCH:
                        if (!g)
                                return 1;
                        if (g->cc_major <= 0) {
                                say(why, len, "needs compute capability %s %s, GPU %d's is unknown", op_math[t->op],
                                    show(t->val, t->val_len, b, sizeof b), g->index);
                                return 0;
                        }
                        v = (struct compat_version){ { (unsigned)g->cc_major, (unsigned)g->cc_minor }, 2 };
                        if (op_holds(t->op, compat_version_cmp(&v, &t->v)))
                                return 1;
                        say(why, len, "needs compute capability %s %s, GPU %d has %d.%d", op_math[t->op],
                            show(t->val, t->val_len, b, sizeof b), g->index, g->cc_major, g->cc_minor);
                        return 0;
                case KEY_BRAND: {
                        if (!g)
                                return 1;
                        const char *have_brand = g->brand[0] ? g->brand : "unknown";
                        bool eq = strlen(have_brand) == t->val_len && strncasecmp(have_brand, t->val, t->val_len) == 0;
                        if (eq == (t->op == OP_EQ))
                                return 1;
                        say(why, len, "needs a GPU of brand %s%s, GPU %d is %s", t->op == OP_NE ? "other than " : "",
                            show(t->val, t->val_len, b, sizeof b), g->index, have_brand);
                        return 0;
                }
        }
        return 0;
}

/* Walk the expression: for each group call fn on its terms. Parse errors stop the walk. */
struct walk {
        const struct compat_node *node;
        const struct compat_gpu *gpu;
        unsigned groups, failed_groups;
        char first_why[512];
        bool have_why;
};

/* 1: group holds, 0: fails, <0 error */
static int group_eval(const char *s, size_t n, struct walk *w, char *msg, size_t msg_len) {
        size_t i = 0;
        int holds = 1;
        char why[256], b[96];
        while (i <= n) {
                size_t j = i;
                while (j < n && s[j] != ',')
                        j++;
                if (j == i) {
                        say(msg, msg_len, "malformed requirement group '%s': empty term", show(s, n, b, sizeof b));
                        return -EINVAL;
                }
                struct term t;
                int r = term_parse(s + i, j - i, &t, msg, msg_len);
                if (r < 0)
                        return r;
                if (holds && w && !term_eval(&t, w->node, w->gpu, why, sizeof why)) {
                        holds = 0;
                        if (!w->have_why) {
                                say(w->first_why, sizeof w->first_why, "%s: %s", show(t.text, t.text_len, b, sizeof b),
                                    why);
                                w->have_why = true;
                        }
                }
                i = j + 1;
        }
        return holds;
}

/* 1 satisfied, 0 not, <0 malformed. With w NULL only validates. */
static int expr_eval(const char *s, size_t n, struct walk *w, char *msg, size_t msg_len) {
        size_t i = 0;
        int any = 0, groups = 0;
        if (n > COMPAT_EXPR_MAX) {
                say(msg, msg_len, "requirement too long (%zu bytes, at most %d)", n, COMPAT_EXPR_MAX);
                return -EINVAL;
        }
        for (size_t k = 0; k < n; k++)
                if (s[k] == '\0') {
                        say(msg, msg_len, "requirement contains a NUL byte");
                        return -EINVAL;
                }
        while (i < n) {
                while (i < n && is_blank(s[i]))
                        i++;
                if (i == n)
                        break;
                size_t j = i;
                while (j < n && !is_blank(s[j]))
                        j++;
                int r = group_eval(s + i, j - i, w, msg, msg_len);
                if (r < 0)
                        return r;
                groups++;
                if (r > 0)
                        any = 1;
                i = j;
        }
        if (w) {
                w->groups = (unsigned)groups;
        }
        return groups == 0 ? 1 : any;
}

static int require_validate_msg(const char *expr, size_t len, char *msg, size_t msg_len) {
        int r = expr_eval(expr, len, NULL, msg, msg_len);
        return r < 0 ? r : 0;
}

static int require_check_msg(const char *expr, size_t len, const struct compat_node *node, char *msg, size_t msg_len) {
        int r = expr_eval(expr, len, NULL, msg, msg_len);
        if (r < 0)
                return r;
        size_t n = node->n_gpus ? node->n_gpus : 1;
        for (size_t i = 0; i < n; i++) {
                struct walk w = { .node = node, .gpu = node->n_gpus ? &node->gpus[i] : NULL };
                r = expr_eval(expr, len, &w, msg, msg_len);
                if (r < 0)
                        return r;
                if (r == 0) {
                        if (w.groups > 1)
                                say(msg, msg_len, "%s (and none of the %u other alternatives holds)", w.first_why,
                                    w.groups - 1);
                        else
                                say(msg, msg_len, "%s", w.first_why);
                        return -EPERM;
                }
        }
        return 0;
}

bool compat_parse_bool(const char *s) {
        static const char *const yes[] = { "1", "t", "T", "true", "TRUE", "True" };
        if (!s)
                return false;
        for (size_t i = 0; i < ELEMENTSOF(yes); i++)
                if (streq(s, yes[i]))
                        return true;
        return false;
}

const char *compat_env_get(const char *const *env, size_t n_env, const char *name) {
        size_t nl = strlen(name);
        const char *found = NULL;
        for (size_t i = 0; i < n_env; i++)
                if (env[i] && strncmp(env[i], name, nl) == 0 && env[i][nl] == '=')
                        found = env[i] + nl + 1;
        return found;
}

static int env_check_msg(const char *const *env, size_t n_env, const struct compat_node *node, char *msg,
                         size_t msg_len) {
        char why[512];
        if (compat_parse_bool(compat_env_get(env, n_env, "NVIDIA_DISABLE_REQUIRE")))
                return 0;
        static const char prefix[] = "NVIDIA_REQUIRE_";
        for (size_t i = 0; i < n_env; i++) {
                const char *e = env[i];
                if (!e || !startswith(e, prefix))
                        continue;
                const char *eq = strchr(e, '=');
                if (!eq)
                        continue;
                size_t name_len = (size_t)(eq - e);
                char name[128];
                if (name_len >= sizeof name) { /* fail closed: a requirement we cannot name is not skipped */
                        say(msg, msg_len, "NVIDIA_REQUIRE_*: variable name longer than %zu bytes", sizeof name - 1);
                        return -EINVAL;
                }
                strnscpy(name, sizeof name, e, name_len);
                /* a later definition of the same variable wins: check only the last one */
                const char *val = compat_env_get(env, n_env, name);
                if (val != eq + 1)
                        continue;
                int r = require_check_msg(val, strlen(val), node, why, sizeof why);
                if (r < 0) {
                        say(msg, msg_len, "%s: %s", name, why);
                        return r;
                }
        }
        const char *cv = compat_env_get(env, n_env, "CUDA_VERSION");
        if (cv && !compat_env_get(env, n_env, "NVIDIA_REQUIRE_CUDA")) {
                struct compat_version v;
                char req[64], vb[32];
                if (compat_version_parse(cv, strlen(cv), &v) < 0) {
                        say(msg, msg_len, "CUDA_VERSION: '%s' is not a version", show(cv, strlen(cv), vb, sizeof vb));
                        return -EINVAL;
                }
                v.n = MIN(v.n, 2u);
                snprintf(req, sizeof req, "cuda>=%s", compat_version_format(&v, vb, sizeof vb));
                int r = require_check_msg(req, strlen(req), node, why, sizeof why);
                if (r < 0) {
                        say(msg, msg_len, "CUDA_VERSION=%s: %s", cv, why);
                        return r;
                }
        }
        return 0;
}

int compat_require_validate(const char *expr, size_t len, struct gs_error *err) {
        char msg[GS_ERROR_MESSAGE_MAX] = "";
        int r = require_validate_msg(expr, len, msg, sizeof msg);
        return r < 0 ? gs_error_set(err, r, "%s", msg) : r;
}

int compat_require_check(const char *expr, size_t len, const struct compat_node *node, struct gs_error *err) {
        char msg[GS_ERROR_MESSAGE_MAX] = "";
        int r = require_check_msg(expr, len, node, msg, sizeof msg);
        return r < 0 ? gs_error_set(err, r, "%s", msg) : r;
}

int compat_env_check(const char *const *env, size_t n_env, const struct compat_node *node, struct gs_error *err) {
        char msg[GS_ERROR_MESSAGE_MAX] = "";
        int r = env_check_msg(env, n_env, node, msg, sizeof msg);
        return r < 0 ? gs_error_set(err, r, "%s", msg) : r;
}
