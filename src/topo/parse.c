/* SPDX-License-Identifier: Apache-2.0 */
/*
 * parse — `nvidia-smi topo -m` text (as people paste it) plus gpuslice node-description
 * directives → struct topo.
 *
 * Accepts tabs or spaces, NIC columns, "CPU Affinity" / "NUMA Affinity" / "GPU NUMA ID"
 * columns, the legend, comments, `X` on the diagonal, SOC as the old name of SYS. Rejects
 * anything else with the line and a reason. Must never read past `len`, never allocate, never
 * trust a count from the input before checking it against the fixed bounds below.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "compat/compat.h"
#include "topo/topo.h"
#include "util/util.h"

#define MAX_INPUT (1u << 20)
#define MAX_LINE 4096
#define MAX_TOKENS (TOPO_MAX_GPUS + TOPO_MAX_NICS + 8)

/* Defaults for what a plain matrix does not say (docs/node-description.md). */
#define DEFAULT_NAME "Tesla P40"
#define DEFAULT_MEMORY (24ULL << 30)
#define DEFAULT_SMS 30
#define DEFAULT_CC_MAJOR 6
#define DEFAULT_CC_MINOR 1
#define DEFAULT_POWER_MW 250000u
#define DEFAULT_DRIVER "550.54.15"
#define DEFAULT_CUDA 12040

struct token {
        const char *s;
        size_t len;
};

struct line {
        unsigned no;
        const char *s;
        size_t len;
};

enum column_kind {
        COL_GPU,
        COL_NIC
};

struct column {
        enum column_kind kind;
        unsigned id; /* GPU index or NIC slot */
};

struct parser {
        struct topo *t;
        struct gs_error *err;
        bool have_header;
        unsigned n_cols;
        struct column cols[TOPO_MAX_GPUS + TOPO_MAX_NICS];
        bool has_cpu_aff, has_numa_aff, has_gpu_numa;
        bool row_seen[TOPO_MAX_GPUS + TOPO_MAX_NICS];
        bool in_legend;
        /* directive defaults, applied to GPUs the `gpu N` lines leave unset */
        struct topo_gpu dflt;
        bool numa_given[TOPO_MAX_GPUS];
};

_printf_(3, 4) static int fail(struct parser *p, unsigned line, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        (void)gs_error_setv(p->err, -EINVAL, fmt, ap);
        va_end(ap);
        if (line)
                (void)gs_error_prefix(p->err, "line %u", line);
        return -EINVAL;
}

static bool tok_eq(struct token t, const char *s) {
        return strlen(s) == t.len && memcmp(t.s, s, t.len) == 0;
}

/* Printable excerpt of a token for messages. */
static const char *tok_show(struct token t, char *buf, size_t len) {
        size_t n = MIN(t.len, len - 1);
        for (size_t i = 0; i < n; i++)
                buf[i] = isprint((unsigned char)t.s[i]) ? t.s[i] : '?';
        buf[n] = '\0';
        if (t.len > n && n >= 3)
                memcpy(buf + n - 3, "...", 3);
        return buf;
}

/* Split on blanks. Quoted values (key="a b") stay in one token. Returns count or -E2BIG. */
static int tokenize(const char *s, size_t len, struct token *toks, unsigned max) {
        unsigned n = 0;
        size_t i = 0;
        while (i < len) {
                while (i < len && (s[i] == ' ' || s[i] == '\t'))
                        i++;
                if (i >= len)
                        break;
                size_t start = i;
                bool quoted = false;
                while (i < len && (quoted || (s[i] != ' ' && s[i] != '\t'))) {
                        if (s[i] == '"')
                                quoted = !quoted;
                        i++;
                }
                if (n >= max)
                        return -E2BIG;
                toks[n++] = (struct token){ s + start, i - start };
        }
        return (int)n;
}

/* "GPU12" → 12 */
static int parse_gpu_name(struct token t, unsigned *ret) {
        if (t.len < 4 || t.len > 6 || memcmp(t.s, "GPU", 3) != 0)
                return -EINVAL;
        unsigned v = 0;
        for (size_t i = 3; i < t.len; i++) {
                if (!isdigit((unsigned char)t.s[i]))
                        return -EINVAL;
                v = v * 10 + (unsigned)(t.s[i] - '0');
        }
        if (t.len > 4 && t.s[3] == '0')
                return -EINVAL; /* GPU01 */
        *ret = v;
        return 0;
}

static bool is_link_token(struct token t) {
        struct topo_link l;
        return topo_link_from_name(t.s, t.len, &l) == 0;
}

/* A cpulist like "0-9,20-29" (or "N/A"). */
static bool is_cpulist(struct token t) {
        if (t.len == 0 || t.len >= sizeof(((struct topo_gpu *)0)->cpu_affinity))
                return false;
        bool digit = false;
        for (size_t i = 0; i < t.len; i++) {
                char c = t.s[i];
                if (isdigit((unsigned char)c))
                        digit = true;
                else if (c == '-' || c == ',') {
                        if (!digit)
                                return false;
                        digit = false;
                } else
                        return false;
        }
        return digit;
}

static int parse_small_int(struct token t, int max, int *ret) {
        if (t.len == 0 || t.len > 6)
                return -EINVAL;
        int v = 0;
        for (size_t i = 0; i < t.len; i++) {
                if (!isdigit((unsigned char)t.s[i]))
                        return -EINVAL;
                v = v * 10 + (t.s[i] - '0');
        }
        if (v > max)
                return -ERANGE;
        *ret = v;
        return 0;
}

/* lint: long — a strict parser: one check per field of the format, in the format's order, each with its own
 * message; split, the grammar would no longer read top to bottom (the header row of nvidia-smi topo -m). */
static int parse_header(struct parser *p, const struct line *ln, struct token *toks, unsigned n) {
        unsigned i = 0, n_gpus = 0, n_nics = 0;
        char b[40];
        for (; i < n; i++) {
                if (tok_eq(toks[i], "CPU") || tok_eq(toks[i], "NUMA") ||
                    (tok_eq(toks[i], "GPU") && i + 1 < n && tok_eq(toks[i + 1], "NUMA")))
                        break;
                if (p->n_cols >= ELEMENTSOF(p->cols))
                        return fail(p, ln->no, "too many columns (at most %d GPUs and %d NICs)", TOPO_MAX_GPUS,
                                    TOPO_MAX_NICS);
                unsigned g;
                if (parse_gpu_name(toks[i], &g) == 0) {
                        if (g != n_gpus)
                                return fail(p, ln->no, "header: expected GPU%u, got %s", n_gpus,
                                            tok_show(toks[i], b, sizeof b));
                        if (n_gpus >= TOPO_MAX_GPUS)
                                return fail(p, ln->no, "more than %d GPUs", TOPO_MAX_GPUS);
                        p->cols[p->n_cols++] = (struct column){ COL_GPU, n_gpus++ };
                        continue;
                }
                if (n_gpus == 0)
                        return fail(p, ln->no, "expected the matrix header (GPU0 GPU1 ...), got '%s'",
                                    tok_show(toks[i], b, sizeof b));
                /* a NIC column: mlx5_0, NIC0, ... */
                if (n_nics >= TOPO_MAX_NICS)
                        return fail(p, ln->no, "more than %d NIC columns", TOPO_MAX_NICS);
                for (size_t k = 0; k < toks[i].len; k++)
                        if (!isalnum((unsigned char)toks[i].s[k]) && toks[i].s[k] != '_' && toks[i].s[k] != '-' &&
                            toks[i].s[k] != '.' && toks[i].s[k] != ':')
                                return fail(p, ln->no, "'%s' is not a device column name",
                                            tok_show(toks[i], b, sizeof b));
                if (toks[i].len >= sizeof p->t->nic[0].name)
                        return fail(p, ln->no, "NIC name '%s' is too long", tok_show(toks[i], b, sizeof b));
                strnscpy(p->t->nic[n_nics].name, sizeof p->t->nic[0].name, toks[i].s, toks[i].len);
                p->cols[p->n_cols++] = (struct column){ COL_NIC, n_nics++ };
        }
        if (n_gpus == 0)
                return fail(p, ln->no, "header has no GPU columns");
        /* the affinity phrases, in nvidia-smi's order */
        while (i < n) {
                if (i + 1 < n && tok_eq(toks[i], "CPU") && tok_eq(toks[i + 1], "Affinity") && !p->has_cpu_aff &&
                    !p->has_numa_aff) {
                        p->has_cpu_aff = true;
                        i += 2;
                } else if (i + 1 < n && tok_eq(toks[i], "NUMA") && tok_eq(toks[i + 1], "Affinity") &&
                           !p->has_numa_aff) {
                        p->has_numa_aff = true;
                        i += 2;
                } else if (i + 2 < n && tok_eq(toks[i], "GPU") && tok_eq(toks[i + 1], "NUMA") &&
                           tok_eq(toks[i + 2], "ID") && !p->has_gpu_numa) {
                        p->has_gpu_numa = true;
                        i += 3;
                } else
                        return fail(p, ln->no, "unexpected header column '%s'", tok_show(toks[i], b, sizeof b));
        }
        p->t->n_gpus = n_gpus;
        p->t->n_nics = n_nics;
        p->have_header = true;
        return 0;
}

static int find_row(struct parser *p, struct token name, unsigned *ret_col) {
        unsigned g;
        bool is_gpu = parse_gpu_name(name, &g) == 0;
        for (unsigned c = 0; c < p->n_cols; c++) {
                if (is_gpu && p->cols[c].kind == COL_GPU && p->cols[c].id == g) {
                        *ret_col = c;
                        return 0;
                }
                if (!is_gpu && p->cols[c].kind == COL_NIC && tok_eq(name, p->t->nic[p->cols[c].id].name)) {
                        *ret_col = c;
                        return 0;
                }
        }
        return -ENOENT;
}

/* lint: long — a strict parser: one check per field of the format, in the format's order, each with its own
 * message; split, the grammar would no longer read top to bottom (one row of the link matrix). */
static int parse_row(struct parser *p, const struct line *ln, struct token *toks, unsigned n) {
        char b[40], b2[40];
        unsigned row;
        if (find_row(p, toks[0], &row) < 0)
                return fail(p, ln->no, "row '%s' is not a column of the header", tok_show(toks[0], b, sizeof b));
        if (p->row_seen[row])
                return fail(p, ln->no, "row '%s' appears twice", tok_show(toks[0], b, sizeof b));
        p->row_seen[row] = true;
        const struct column *rc = &p->cols[row];

        unsigned nvals = n - 1;
        if (nvals < p->n_cols)
                return fail(p, ln->no, "row %s has %u values, expected %u", tok_show(toks[0], b, sizeof b), nvals,
                            p->n_cols);
        for (unsigned c = 0; c < p->n_cols; c++) {
                struct token v = toks[1 + c];
                struct topo_link l;
                if (topo_link_from_name(v.s, v.len, &l) < 0)
                        return fail(p, ln->no,
                                    "'%s' in row %s is not a link (expected X, NV#, PIX, PXB, PHB, NODE, SYS or SOC)",
                                    tok_show(v, b, sizeof b), tok_show(toks[0], b2, sizeof b2));
                bool diag = c == row;
                if (diag != (l.pcie == TOPO_LEVEL_SELF && l.nvlinks == 0))
                        return fail(p, ln->no,
                                    diag ? "row %s: expected X on the diagonal, got '%s'"
                                         : "row %s: X off the diagonal ('%s')",
                                    tok_show(toks[0], b, sizeof b), tok_show(v, b2, sizeof b2));
                if (diag)
                        continue;
                const struct column *cc = &p->cols[c];
                if (rc->kind == COL_GPU && cc->kind == COL_GPU) {
                        struct topo_link prev = p->t->link[cc->id][rc->id];
                        bool prev_set = p->row_seen[c];
                        if (prev_set && (prev.pcie != l.pcie || prev.nvlinks != l.nvlinks)) {
                                char pn[8], ln2[8];
                                return fail(p, ln->no, "matrix is not symmetric: GPU%u-GPU%u is %s, GPU%u-GPU%u is %s",
                                            cc->id, rc->id, topo_link_name(prev, pn), rc->id, cc->id,
                                            topo_link_name(l, ln2));
                        }
                        p->t->link[rc->id][cc->id] = l;
                } else if (l.nvlinks == 0) {
                        /* GPU↔NIC or NIC↔NIC: only the PCIe level matters */
                        if (rc->kind == COL_GPU)
                                p->t->nic[cc->id].level[rc->id] = l.pcie;
                        else if (cc->kind == COL_GPU && !p->row_seen[c])
                                p->t->nic[rc->id].level[cc->id] = l.pcie;
                }
        }
        /* affinity columns (GPU rows only; NIC rows end after their links) */
        unsigned k = 1 + p->n_cols;
        if (rc->kind == COL_GPU) {
                struct topo_gpu *g = &p->t->gpu[rc->id];
                if (p->has_cpu_aff && k < n) {
                        if (is_cpulist(toks[k]))
                                strnscpy(g->cpu_affinity, sizeof g->cpu_affinity, toks[k].s, toks[k].len);
                        else if (!tok_eq(toks[k], "N/A"))
                                return fail(p, ln->no, "row %s: '%s' is not a CPU list", tok_show(toks[0], b, sizeof b),
                                            tok_show(toks[k], b2, sizeof b2));
                        k++;
                }
                if (p->has_numa_aff && k < n) {
                        int v;
                        if (parse_small_int(toks[k], 4095, &v) == 0) {
                                g->numa_node = v;
                                p->numa_given[rc->id] = true;
                        } else if (!tok_eq(toks[k], "N/A"))
                                return fail(p, ln->no, "row %s: '%s' is not a NUMA node",
                                            tok_show(toks[0], b, sizeof b), tok_show(toks[k], b2, sizeof b2));
                        k++;
                }
                if (p->has_gpu_numa && k < n) {
                        int v;
                        if (parse_small_int(toks[k], 4095, &v) < 0 && !tok_eq(toks[k], "N/A"))
                                return fail(p, ln->no, "row %s: '%s' is not a GPU NUMA ID",
                                            tok_show(toks[0], b, sizeof b), tok_show(toks[k], b2, sizeof b2));
                        k++;
                }
        }
        if (k < n)
                return fail(p, ln->no, "row %s has %u values, expected %u", tok_show(toks[0], b, sizeof b), n - 1,
                            k - 1);
        return 0;
}

/* ---- directives ---- */

static int unquote(struct token v, char *buf, size_t len, struct token *ret) {
        if (v.len >= 2 && v.s[0] == '"' && v.s[v.len - 1] == '"') {
                v.s++;
                v.len -= 2;
        }
        for (size_t i = 0; i < v.len; i++)
                if (v.s[i] == '"')
                        return -EINVAL;
        if (v.len >= len)
                return -ENAMETOOLONG;
        strnscpy(buf, len, v.s, v.len);
        *ret = v;
        return 0;
}

/* lint: long — a strict parser: one check per field of the format, in the format's order, each with its own
 * message; split, the grammar would no longer read top to bottom (one directive field of a GPU). */
static int set_gpu_field(struct parser *p, unsigned line, struct topo_gpu *g, unsigned gpu, struct token key,
                         const char *val) {
        char b[40];
        uint64_t u;
        int r;
        if (tok_eq(key, "name")) {
                if (!val[0])
                        return fail(p, line, "name is empty");
                strscpy(g->name, val, sizeof g->name);
        } else if (tok_eq(key, "memory")) {
                if (parse_size(val, &u) < 0 || u == 0)
                        return fail(p, line, "memory: expected a size like 24GiB or 16384MiB, got '%s'", val);
                g->memory_total = u;
        } else if (tok_eq(key, "uuid")) {
                if (!startswith(val, "GPU-") || strlen(val) < 8)
                        return fail(p, line, "uuid: expected GPU-..., got '%s'", val);
                strscpy(g->uuid, val, sizeof g->uuid);
        } else if (tok_eq(key, "bus")) {
                unsigned dom, bus, dev, fn;
                char tail;
                /* sscanf's %x would also take a sign or "0x" */
                if (val[strspn(val, "0123456789abcdefABCDEF:.")] != '\0' ||
                    sscanf(val, "%8x:%2x:%2x.%1x%c", &dom, &bus, &dev, &fn, &tail) != 4 || strlen(val) > 16 ||
                    dom > 0xffff || dev > 0x1f || fn > 7)
                        return fail(p, line, "bus: expected a PCI bus id like 00000000:1A:00.0, got '%s'", val);
                snprintf(g->bus_id, sizeof g->bus_id, "%08X:%02X:%02X.%X", dom, bus, dev, fn);
        } else if (tok_eq(key, "numa") && streq(val, "none")) {
                g->numa_node = TOPO_NUMA_NONE; /* NVML knows none (a VM): no default either */
                if (gpu < TOPO_MAX_GPUS)
                        p->numa_given[gpu] = true;
        } else if (tok_eq(key, "minor") || tok_eq(key, "numa") || tok_eq(key, "sms")) {
                unsigned v;
                if (parse_uint(val, 65535, &v) < 0)
                        return fail(p, line, "%s: expected a number, got '%s'", tok_show(key, b, sizeof b), val);
                if (tok_eq(key, "minor"))
                        g->minor = (int)v;
                else if (tok_eq(key, "sms"))
                        g->sm_count = (int)v;
                else {
                        g->numa_node = (int)v;
                        if (gpu < TOPO_MAX_GPUS)
                                p->numa_given[gpu] = true;
                }
        } else if (tok_eq(key, "cc")) {
                unsigned ma, mi;
                char tail;
                if (val[strspn(val, "0123456789.")] != '\0' || sscanf(val, "%2u.%2u%c", &ma, &mi, &tail) != 2 ||
                    ma == 0)
                        return fail(p, line, "cc: expected a compute capability like 8.0, got '%s'", val);
                g->cc_major = (int)ma;
                g->cc_minor = (int)mi;
        } else if (tok_eq(key, "power")) {
                unsigned w;
                size_t l = strlen(val);
                char num[16];
                if (l < 2 || l > 8 || val[l - 1] != 'W')
                        return fail(p, line, "power: expected watts like 250W, got '%s'", val);
                strnscpy(num, sizeof num, val, l - 1);
                if ((r = parse_uint(num, 100000, &w)) < 0 || w == 0)
                        return fail(p, line, "power: expected watts like 250W, got '%s'", val);
                g->power_limit_mw = w * 1000;
        } else if (tok_eq(key, "brand")) {
                static const char *const brands[] = { "unknown",    "quadro",      "tesla",     "nvs",       "grid",
                                                      "geforce",    "titan",       "vapps",     "vpc",       "vcs",
                                                      "vws",        "cloudgaming", "quadrortx", "nvidiartx", "nvidia",
                                                      "geforcertx", "titanrtx" };
                bool known = false;
                for (size_t i = 0; i < ELEMENTSOF(brands); i++)
                        known |= streq(val, brands[i]);
                if (!known)
                        return fail(p, line,
                                    "brand: expected tesla, geforce, quadro, nvidia, titan, nvidiartx, ... (NVML's "
                                    "brands), got '%s'",
                                    val);
                strscpy(g->brand, val, sizeof g->brand);
        } else if (tok_eq(key, "context")) {
                if (parse_size(val, &u) < 0)
                        return fail(p, line, "context: expected a size like 416MiB, got '%s'", val);
                g->context_bytes = u;
        } else if (tok_eq(key, "mig")) {
                if (streq(val, "on"))
                        g->mig_mode = 1;
                else if (streq(val, "off"))
                        g->mig_mode = 0;
                else
                        return fail(p, line, "mig: expected on or off, got '%s'", val);
        } else
                return fail(p, line,
                            "unknown GPU attribute '%s' (known: name, memory, uuid, bus, minor, numa, sms, cc, power, "
                            "mig, brand, context)",
                            tok_show(key, b, sizeof b));
        return 0;
}

static int split_kv(struct parser *p, unsigned line, struct token t, struct token *ret_key, char *val, size_t vlen) {
        char b[40];
        const char *eq = memchr(t.s, '=', t.len);
        if (!eq || eq == t.s)
                return fail(p, line, "expected key=value, got '%s'", tok_show(t, b, sizeof b));
        *ret_key = (struct token){ t.s, (size_t)(eq - t.s) };
        struct token v = { eq + 1, t.len - (size_t)(eq - t.s) - 1 }, out;
        int r = unquote(v, val, vlen, &out);
        if (r == -ENAMETOOLONG)
                return fail(p, line, "value of '%s' is too long", tok_show(*ret_key, b, sizeof b));
        if (r < 0)
                return fail(p, line, "stray quote in '%s'", tok_show(t, b, sizeof b));
        return 0;
}

/* `cuda context=SIZE` and `unsupported QUERY...`: what the node's CUDA driver and NVML do (recorded by
 * `gpuslice sim record`), each its own directive. */
static int parse_driver_directive(struct parser *p, const struct line *ln, struct token *toks, unsigned n) {
        char val[128], b[40];
        struct token key;
        int r;
        if (tok_eq(toks[0], "unsupported")) {
                if (n < 2)
                        return fail(p, ln->no, "unsupported: name at least one query (process-utilization)");
                for (unsigned i = 1; i < n; i++) {
                        if (!tok_eq(toks[i], "process-utilization"))
                                return fail(p, ln->no, "unsupported: unknown query '%s' (known: process-utilization)",
                                            tok_show(toks[i], b, sizeof b));
                        p->t->unsupported |= TOPO_UNSUPPORTED_PROCESS_UTIL;
                }
                return 0;
        }
        for (unsigned i = 1; i < n; i++) { /* cuda */
                uint64_t u;
                if ((r = split_kv(p, ln->no, toks[i], &key, val, sizeof val)) < 0)
                        return r;
                if (tok_eq(key, "teardown-ms")) {
                        unsigned ms;
                        if (parse_uint(val, 600000, &ms) < 0)
                                return fail(p, ln->no, "teardown-ms: expected milliseconds (at most 600000), got '%s'",
                                            val);
                        p->t->cuda_teardown_ms = ms;
                        continue;
                }
                if (!tok_eq(key, "context"))
                        return fail(p, ln->no, "unknown cuda attribute '%s' (known: context, teardown-ms)",
                                    tok_show(key, b, sizeof b));
                if (parse_size(val, &u) < 0)
                        return fail(p, ln->no, "context: expected a size like 512MiB, got '%s'", val);
                p->t->cuda_context_bytes = u;
        }
        return 0;
}

static int parse_directive(struct parser *p, const struct line *ln, struct token *toks, unsigned n) {
        char val[128], b[40];
        struct token key;
        int r;
        if (tok_eq(toks[0], "mig"))
                return 0; /* MIG instances of a simulated node: read by the simulator (sim/mig-node.c) */
        if (tok_eq(toks[0], "cuda") || tok_eq(toks[0], "unsupported"))
                return parse_driver_directive(p, ln, toks, n);
        if (tok_eq(toks[0], "nvswitch")) {
                if (n != 1)
                        return fail(p, ln->no, "nvswitch takes no arguments");
                p->t->nvswitch = true;
                return 0;
        }
        if (tok_eq(toks[0], "node")) {
                for (unsigned i = 1; i < n; i++) {
                        if ((r = split_kv(p, ln->no, toks[i], &key, val, sizeof val)) < 0)
                                return r;
                        if (tok_eq(key, "driver")) {
                                if (!val[0] || !isdigit((unsigned char)val[0]))
                                        return fail(p, ln->no, "driver: expected a version like 550.54.15, got '%s'",
                                                    val);
                                strscpy(p->t->driver_version, val, sizeof p->t->driver_version);
                        } else if (tok_eq(key, "cuda")) {
                                unsigned ma, mi;
                                char tail;
                                if (sscanf(val, "%3u.%2u%c", &ma, &mi, &tail) != 2 || ma == 0 || mi > 9)
                                        return fail(p, ln->no, "cuda: expected a version like 12.4, got '%s'", val);
                                p->t->cuda_version = (int)(ma * 1000 + mi * 10);
                        } else
                                return fail(p, ln->no, "unknown node attribute '%s' (known: driver, cuda)",
                                            tok_show(key, b, sizeof b));
                }
                return 0;
        }
        struct topo_gpu *g;
        unsigned first = 1, gpu = TOPO_MAX_GPUS;
        if (tok_eq(toks[0], "default"))
                g = &p->dflt;
        else { /* gpu N */
                char idx[8];
                if (n < 2 || toks[1].len >= sizeof idx ||
                    parse_uint(strnscpy(idx, sizeof idx, toks[1].s, toks[1].len), TOPO_MAX_GPUS - 1, &gpu) < 0)
                        return fail(p, ln->no, "expected 'gpu INDEX key=value ...'");
                if (gpu >= p->t->n_gpus)
                        return fail(p, ln->no, "gpu %u: the matrix has %u GPUs", gpu, p->t->n_gpus);
                g = &p->t->gpu[gpu];
                first = 2;
        }
        for (unsigned i = first; i < n; i++) {
                if ((r = split_kv(p, ln->no, toks[i], &key, val, sizeof val)) < 0)
                        return r;
                if ((r = set_gpu_field(p, ln->no, g, gpu, key, val)) < 0)
                        return r;
        }
        return 0;
}

static bool is_directive(struct token t) {
        return tok_eq(t, "node") || tok_eq(t, "gpu") || tok_eq(t, "default") || tok_eq(t, "nvswitch") ||
               tok_eq(t, "mig") || tok_eq(t, "cuda") || tok_eq(t, "unsupported");
}

/* Legend lines look like "  NV#  = Connection traversing ..." */
static bool is_legend_line(struct token *toks, unsigned n) {
        return n >= 2 && tok_eq(toks[1], "=");
}

/* ---- the whole text ---- */

static int next_line(const char *text, size_t len, size_t *pos, unsigned *no, struct line *ret) {
        if (*pos >= len)
                return 0;
        size_t start = *pos, end = start;
        while (end < len && text[end] != '\n')
                end++;
        *pos = end < len ? end + 1 : end;
        (*no)++;
        size_t l = end - start;
        while (l > 0 && (text[start + l - 1] == '\r' || text[start + l - 1] == ' ' || text[start + l - 1] == '\t'))
                l--;
        *ret = (struct line){ *no, text + start, l };
        return 1;
}

static int check_bytes(struct parser *p, const struct line *ln) {
        if (ln->len > MAX_LINE)
                return fail(p, ln->no, "line longer than %u bytes", MAX_LINE);
        for (size_t i = 0; i < ln->len; i++) {
                unsigned char c = (unsigned char)ln->s[i];
                if (c < 0x20 && c != '\t' && c != '\r')
                        return fail(p, ln->no, "unexpected control byte 0x%02x", c);
        }
        return 0;
}

/* pass: 0 = matrix, 1 = directives */
/* lint: long — a strict parser: one check per field of the format, in the format's order, each with its own
 * message; split, the grammar would no longer read top to bottom (the line loop of one pass: matrix, then
 * directives). */
static int parse_pass(struct parser *p, const char *text, size_t len, int pass) {
        size_t pos = 0;
        unsigned no = 0;
        struct line ln;
        struct token toks[MAX_TOKENS];
        p->in_legend = false;
        while (next_line(text, len, &pos, &no, &ln) > 0) {
                int r;
                if (pass == 0 && (r = check_bytes(p, &ln)) < 0)
                        return r;
                size_t i = 0;
                while (i < ln.len && (ln.s[i] == ' ' || ln.s[i] == '\t'))
                        i++;
                if (i == ln.len || ln.s[i] == '#')
                        continue;
                int n = tokenize(ln.s, ln.len, toks, MAX_TOKENS);
                if (n == -E2BIG) {
                        if (pass == 0)
                                return fail(p, ln.no, "too many columns");
                        continue;
                }
                if (n <= 0)
                        continue;
                if (tok_eq(toks[0], "Legend:")) {
                        p->in_legend = true;
                        continue;
                }
                if (p->in_legend && is_legend_line(toks, (unsigned)n))
                        continue;
                if (is_directive(toks[0])) {
                        if (pass == 1 && (r = parse_directive(p, &ln, toks, (unsigned)n)) < 0)
                                return r;
                        continue;
                }
                if (pass == 1)
                        continue;
                if (p->in_legend)
                        return fail(p, ln.no, "unexpected text after the legend");
                /* A header's second token is a column name, a row's is a link. */
                bool row = n >= 2 && is_link_token(toks[1]);
                if (!p->have_header) {
                        if (row)
                                return fail(p, ln.no, "matrix row before the header line (GPU0 GPU1 ...)");
                        if ((r = parse_header(p, &ln, toks, (unsigned)n)) < 0)
                                return r;
                        continue;
                }
                if (!row) {
                        char b[40];
                        return fail(p, ln.no, "expected a matrix row like 'GPU1  PIX  X ...', got '%s'",
                                    tok_show(toks[0], b, sizeof b));
                }
                if ((r = parse_row(p, &ln, toks, (unsigned)n)) < 0)
                        return r;
        }
        return 0;
}

/* NVLink pairs hide the PCIe path in `topo -m`; estimate it from the CPU side. */
static void infer_nvlink_pcie(struct topo *t) {
        for (unsigned i = 0; i < t->n_gpus; i++)
                for (unsigned j = i + 1; j < t->n_gpus; j++) {
                        struct topo_link l = t->link[i][j];
                        if (l.nvlinks == 0 || l.pcie != TOPO_LEVEL_UNKNOWN)
                                continue;
                        const struct topo_gpu *a = &t->gpu[i], *b = &t->gpu[j];
                        if (a->numa_node >= 0 && b->numa_node >= 0)
                                l.pcie = a->numa_node == b->numa_node ? TOPO_LEVEL_NODE : TOPO_LEVEL_SYS;
                        else if (a->cpu_affinity[0] && b->cpu_affinity[0])
                                l.pcie = streq(a->cpu_affinity, b->cpu_affinity) ? TOPO_LEVEL_NODE : TOPO_LEVEL_SYS;
                        else
                                continue;
                        topo_set_link(t, i, j, l);
                }
}

/* `default` (d) fills what `gpu N` lines left unset; a context's cost falls back to the node's `cuda context=`. */
static void fill_from_default(struct topo *t, const struct topo_gpu *d) {
        for (unsigned i = 0; i < t->n_gpus; i++) {
                struct topo_gpu *g = &t->gpu[i];
                if (!g->name[0])
                        strscpy(g->name, d->name, sizeof g->name);
                if (!g->memory_total)
                        g->memory_total = d->memory_total;
                if (!g->sm_count)
                        g->sm_count = d->sm_count;
                if (!g->cc_major) {
                        g->cc_major = d->cc_major;
                        g->cc_minor = d->cc_minor;
                }
                if (!g->power_limit_mw)
                        g->power_limit_mw = d->power_limit_mw;
                if (g->mig_mode < 0)
                        g->mig_mode = d->mig_mode;
                if (!g->brand[0])
                        strscpy(g->brand, d->brand, sizeof g->brand);
                if (!g->context_bytes)
                        g->context_bytes = d->context_bytes ? d->context_bytes : t->cuda_context_bytes;
        }
}

int topo_parse_raw(const char *text, size_t len, struct topo *ret, struct gs_error *ret_err) {
        struct parser p = { .t = ret, .err = ret_err };
        int r;
        topo_init(ret);
        memset(&p.dflt, 0, sizeof p.dflt);
        p.dflt.minor = p.dflt.numa_node = p.dflt.mig_mode = -1;
        if (len > MAX_INPUT)
                return fail(&p, 0, "input larger than %u bytes", MAX_INPUT);
        if ((r = parse_pass(&p, text, len, 0)) < 0)
                return r;
        if (!p.have_header)
                return fail(&p, 0, "no topology matrix found (expected `nvidia-smi topo -m` output)");
        for (unsigned c = 0; c < p.n_cols; c++)
                if (!p.row_seen[c]) {
                        if (p.cols[c].kind == COL_GPU)
                                return fail(&p, 0, "row GPU%u is missing", p.cols[c].id);
                        /* NIC rows are optional: the GPU rows carry the GPU↔NIC levels */
                }
        if ((r = parse_pass(&p, text, len, 1)) < 0)
                return r;
        fill_from_default(ret, &p.dflt);
        infer_nvlink_pcie(ret);
        for (unsigned i = 0; i < ret->n_gpus; i++)
                for (unsigned j = i + 1; j < ret->n_gpus; j++) {
                        if (ret->gpu[i].uuid[0] && streq(ret->gpu[i].uuid, ret->gpu[j].uuid))
                                return fail(&p, 0, "GPU%u and GPU%u have the same uuid", i, j);
                        if (ret->gpu[i].bus_id[0] && streq(ret->gpu[i].bus_id, ret->gpu[j].bus_id))
                                return fail(&p, 0, "GPU%u and GPU%u have the same bus id %s", i, j, ret->gpu[i].bus_id);
                        if (ret->gpu[i].minor >= 0 && ret->gpu[i].minor == ret->gpu[j].minor)
                                return fail(&p, 0, "GPU%u and GPU%u have the same minor number %d", i, j,
                                            ret->gpu[i].minor);
                }
        return topo_validate(ret, ret_err);
}

/* FNV-1a, to derive stable defaults (UUIDs) from the description itself. */
static uint64_t fnv1a(const void *data, size_t len, uint64_t h) {
        const unsigned char *s = data;
        for (size_t i = 0; i < len; i++) {
                h ^= s[i];
                h *= 0x100000001b3ULL;
        }
        return h;
}

static uint64_t topo_hash(const struct topo *t) {
        uint64_t h = 0xcbf29ce484222325ULL;
        h = fnv1a(&t->n_gpus, sizeof t->n_gpus, h);
        for (unsigned i = 0; i < t->n_gpus; i++) {
                h = fnv1a(t->link[i], sizeof(struct topo_link) * t->n_gpus, h);
                h = fnv1a(t->gpu[i].cpu_affinity, strlen(t->gpu[i].cpu_affinity), h);
                h = fnv1a(t->gpu[i].name, strlen(t->gpu[i].name), h);
        }
        return h;
}

/* Defaults never collide with values the description gave explicitly. */
static int unused_minor(const struct topo *t, int want) {
        for (;; want++) {
                bool used = false;
                for (unsigned j = 0; j < t->n_gpus; j++)
                        if (t->gpu[j].minor == want)
                                used = true;
                if (!used)
                        return want;
        }
}

static void default_bus_id(const struct topo *t, unsigned i, char *buf, size_t len) {
        for (unsigned bus = 0x1A + 3 * i;; bus++) {
                bool used = false;
                snprintf(buf, len, "00000000:%02X:00.0", bus & 0xff);
                for (unsigned j = 0; j < t->n_gpus; j++)
                        if (j != i && streq(t->gpu[j].bus_id, buf))
                                used = true;
                if (!used)
                        return;
        }
}

/* lint: long — each default is one rule applied where the file was silent (NUMA nodes, the links inferred, every
 * GPU field left out, driver and CUDA versions), in order, since later ones read earlier ones. */
void topo_apply_defaults(struct topo *t) {
        /* NUMA nodes: from the file, else one per distinct CPU affinity, else one per SYS island */
        int numa_of_group[TOPO_MAX_GPUS];
        int next_numa = 0;
        for (unsigned i = 0; i < t->n_gpus; i++)
                numa_of_group[i] = -1;
        for (unsigned i = 0; i < t->n_gpus; i++) {
                struct topo_gpu *g = &t->gpu[i];
                if (g->numa_node >= 0)
                        continue;
                int found = -1;
                for (unsigned j = 0; j < i && found < 0; j++) {
                        bool same = g->cpu_affinity[0]
                                            ? streq(g->cpu_affinity, t->gpu[j].cpu_affinity)
                                            : (!t->gpu[j].cpu_affinity[0] && (t->link[i][j].pcie > TOPO_LEVEL_SYS));
                        if (same)
                                found = t->gpu[j].numa_node >= 0 ? t->gpu[j].numa_node : numa_of_group[j];
                }
                if (found < 0) {
                        /* a new group: do not collide with numbers the file gave */
                        for (;;) {
                                bool used = false;
                                for (unsigned j = 0; j < t->n_gpus; j++)
                                        if (t->gpu[j].numa_node == next_numa)
                                                used = true;
                                if (!used)
                                        break;
                                next_numa++;
                        }
                        found = next_numa++;
                }
                numa_of_group[i] = found;
        }
        for (unsigned i = 0; i < t->n_gpus; i++) {
                if (t->gpu[i].numa_node == TOPO_NUMA_NONE)
                        t->gpu[i].numa_node = -1;
                else if (t->gpu[i].numa_node < 0)
                        t->gpu[i].numa_node = numa_of_group[i];
        }
        infer_nvlink_pcie(t);

        uint64_t h = topo_hash(t);
        for (unsigned i = 0; i < t->n_gpus; i++) {
                struct topo_gpu *g = &t->gpu[i];
                if (!g->name[0])
                        strscpy(g->name, DEFAULT_NAME, sizeof g->name);
                if (!g->memory_total)
                        g->memory_total = DEFAULT_MEMORY;
                if (!g->sm_count)
                        g->sm_count = DEFAULT_SMS;
                if (!g->cc_major) {
                        g->cc_major = DEFAULT_CC_MAJOR;
                        g->cc_minor = DEFAULT_CC_MINOR;
                }
                if (!g->power_limit_mw)
                        g->power_limit_mw = DEFAULT_POWER_MW;
                if (!g->brand[0])
                        strscpy(g->brand, compat_brand_from_name(g->name), sizeof g->brand);
                if (g->minor < 0)
                        g->minor = unused_minor(t, (int)i);
                if (!g->bus_id[0])
                        default_bus_id(t, i, g->bus_id, sizeof g->bus_id);
                if (!g->uuid[0]) {
                        uint64_t a = fnv1a(&i, sizeof i, h), b = fnv1a(&a, sizeof a, h ^ 0x9e3779b97f4a7c15ULL);
                        snprintf(g->uuid, sizeof g->uuid, "GPU-%08x-%04x-%04x-%04x-%012llx", (unsigned)(a >> 32),
                                 (unsigned)(a >> 16) & 0xffff, ((unsigned)a & 0x0fff) | 0x4000,
                                 ((unsigned)(b >> 48) & 0x3fff) | 0x8000, (unsigned long long)(b & 0xffffffffffffULL));
                }
        }
        if (!t->driver_version[0])
                strscpy(t->driver_version, DEFAULT_DRIVER, sizeof t->driver_version);
        if (!t->cuda_version)
                t->cuda_version = DEFAULT_CUDA;
}

int topo_parse(const char *text, size_t len, struct topo *ret, struct gs_error *ret_err) {
        int r = topo_parse_raw(text, len, ret, ret_err);
        if (r < 0)
                return r;
        topo_apply_defaults(ret);
        return 0;
}
