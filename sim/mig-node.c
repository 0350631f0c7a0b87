/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mig-node — the `mig` lines of a node description (docs/node-description.md): per GPU the pending MIG
 * mode, whether a mode change needs a reset, and the GPU and compute instances that exist when the
 * node starts, given one by one (profile, placement, compute instances) or as a layout (mig-parted's
 * names, or profile counts). The topology parser skips these lines; the simulator reads them here and
 * builds the instances with the device's own rules (sim/mig.c), so a description the hardware could
 * not hold is refused with its line and the reason.
 *
 * Pure: no I/O, no allocation; never reads past `len`.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml/nvml-abi.h"
#include "sim/sim.h"
#include "util/util.h"

#define LINE_MAX_BYTES 4096
#define MAX_TOKENS 24

struct mig_parser {
        const struct topo *t;
        struct sim_mig_node *node;
        unsigned line;
        char *err;
        size_t err_len;
};

_printf_(2, 3) static int fail(struct mig_parser *p, const char *fmt, ...) {
        char msg[200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        snprintf(p->err, p->err_len, "line %u: %s", p->line, msg);
        return -EINVAL;
}

static void profile_list(const struct sim_mig_model *m, char *buf, size_t len) {
        size_t w = 0;
        buf[0] = '\0';
        for (unsigned i = 0; i < m->n_profiles && w < len; i++) {
                int n = snprintf(buf + w, len - w, "%s%s", i ? ", " : "", m->profiles[i].name);
                if (n < 0)
                        break;
                w += (size_t)n;
        }
}

static const struct sim_mig_profile *find_profile(struct mig_parser *p, const struct sim_mig_model *m, const char *name,
                                                  int *ret_err) {
        const struct sim_mig_profile *pr = sim_mig_profile_by_name(m, name);
        if (!pr) {
                char list[160];
                profile_list(m, list, sizeof list);
                *ret_err = fail(p, "mig: no profile '%s' on %s (%s)", name, m->label, list);
        }
        return pr;
}

/* "NAME" or "NAME@START" → name (in place) and start (-1 when not given). */
static int split_at(struct mig_parser *p, char *s, int *ret_start) {
        char *at = strchr(s, '@');
        *ret_start = -1;
        if (!at)
                return 0;
        *at = '\0';
        unsigned v;
        if (parse_uint(at + 1, 7, &v) < 0)
                return fail(p, "mig: placement start '%s' is not a slice number 0..7", at + 1);
        *ret_start = (int)v;
        return 0;
}

static int gi_error(struct mig_parser *p, const struct sim_mig_profile *pr, int start, int r) {
        if (r == -EINVAL)
                return fail(p, "mig: %s cannot start at memory slice %d", pr->name, start);
        return fail(p, "mig: %s%s does not fit next to the instances declared before it", pr->name,
                    start >= 0 ? " at that placement" : "");
}

/* ci=1c@0,2c@1 | ci=none; without ci=, one compute instance covers the GPU instance. */
static int add_cis(struct mig_parser *p, unsigned gpu, const struct sim_mig_model *m, struct sim_mig_gi *gi,
                   char *list) {
        struct sim_mig_gpu *g = &p->node->gpu[gpu];
        if (!list) {
                int full = sim_mig_ci_full_profile(m, gi);
                if (full < 0 || sim_mig_ci_create(g, m, gi, (unsigned)full, -1, &p->node->serial, NULL) < 0)
                        return fail(p, "mig: no room for a compute instance on GPU %u", gpu);
                return 0;
        }
        if (streq(list, "none"))
                return 0;
        char *save = NULL;
        for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                int start, r;
                if ((r = split_at(p, tok, &start)) < 0)
                        return r;
                size_t n = strlen(tok);
                unsigned c;
                char num[4];
                if (n < 2 || n > 3 || tok[n - 1] != 'c' || parse_uint(strnscpy(num, sizeof num, tok, n - 1), 8, &c) < 0)
                        return fail(p, "mig: compute instance '%s' is not like 1c or 2c@2", tok);
                static const unsigned profile_of[] = { 0,
                                                       NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE,
                                                       NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE,
                                                       NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE,
                                                       NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE,
                                                       ~0u,
                                                       ~0u,
                                                       NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE,
                                                       ~0u };
                if (c == 0 || profile_of[c] == ~0u)
                        return fail(p, "mig: no %uc compute instance profile", c);
                r = sim_mig_ci_create(g, m, gi, profile_of[c], start, &p->node->serial, NULL);
                if (r == -EOPNOTSUPP)
                        return fail(p, "mig: a %uc compute instance is larger than its GPU instance", c);
                if (r < 0)
                        return fail(p, "mig: compute instance %s does not fit its GPU instance", tok);
        }
        return 0;
}

static int add_gi(struct mig_parser *p, unsigned gpu, const struct sim_mig_model *m, const struct sim_mig_profile *pr,
                  int start, char *cis) {
        struct sim_mig_gi *gi = NULL;
        int r = sim_mig_gi_create(&p->node->gpu[gpu], m, pr->profile, start, &gi);
        if (r < 0)
                return gi_error(p, pr, start, r);
        return add_cis(p, gpu, m, gi, cis);
}

/* Place want[k..n) on GPU gpu, trying every placement of each (backtracking): as a tool that knows the
 * placements would, not as the driver's first-free choice, which leaves all-balanced without room. */
static bool place_all(struct sim_mig_gpu *g, const struct sim_mig_model *m, const struct sim_mig_profile *const *want,
                      unsigned k, unsigned n) {
        if (k == n)
                return true;
        unsigned starts[8], ns = sim_mig_placements(want[k], starts);
        for (unsigned i = 0; i < ns; i++) {
                struct sim_mig_gi *gi = NULL;
                if (sim_mig_gi_create(g, m, want[k]->profile, (int)starts[i], &gi) < 0)
                        continue;
                if (place_all(g, m, want, k + 1, n))
                        return true;
                sim_mig_gi_destroy(gi);
        }
        return false;
}

/* Place them all, then give each a compute instance covering it. */
static int add_set(struct mig_parser *p, unsigned gpu, const struct sim_mig_model *m,
                   const struct sim_mig_profile *const *want, unsigned n) {
        struct sim_mig_gpu *g = &p->node->gpu[gpu];
        struct sim_mig_gpu before = *g;
        if (!place_all(g, m, want, 0, n))
                return fail(p, "mig: these instances do not fit GPU %u together", gpu);
        for (unsigned i = 0; i < SIM_MIG_MAX_GI; i++) {
                bool fresh = g->gi[i].used && !before.gi[i].used;
                int r = fresh ? add_cis(p, gpu, m, &g->gi[i], NULL) : 0;
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Larger instances first, as a tool that knows the placements would create them. */
static int by_size_desc(const void *a, const void *b) {
        const struct sim_mig_profile *x = *(const struct sim_mig_profile *const *)a,
                                     *y = *(const struct sim_mig_profile *const *)b;
        if (x->mem_slices != y->mem_slices)
                return x->mem_slices < y->mem_slices ? 1 : -1;
        return x->slices < y->slices ? 1 : x->slices > y->slices ? -1 : 0;
}

/* devices=1g.10gb:2,3g.40gb:1 */
static int add_devices(struct mig_parser *p, unsigned gpu, const struct sim_mig_model *m, char *list) {
        const struct sim_mig_profile *want[SIM_MIG_MAX_GI * 2];
        unsigned n = 0;
        char *save = NULL;
        int r = 0;
        for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                char *colon = strchr(tok, ':');
                unsigned count = 1;
                if (colon) {
                        *colon = '\0';
                        if (parse_uint(colon + 1, SIM_MIG_MAX_GI, &count) < 0 || count == 0)
                                return fail(p, "mig: count '%s' of %s is not 1..%u", colon + 1, tok, SIM_MIG_MAX_GI);
                }
                const struct sim_mig_profile *pr = find_profile(p, m, tok, &r);
                if (!pr)
                        return r;
                for (unsigned k = 0; k < count; k++) {
                        if (n == ELEMENTSOF(want))
                                return fail(p, "mig: more instances than a GPU holds");
                        want[n++] = pr;
                }
        }
        qsort(want, n, sizeof want[0], by_size_desc);
        return add_set(p, gpu, m, want, n);
}

/* mig-parted's generic names: all-enabled (no instances), all-balanced, all-<profile> (as many as fit). */
static int add_layout(struct mig_parser *p, unsigned gpu, const struct sim_mig_model *m, const char *name) {
        if (streq(name, "all-enabled"))
                return 0;
        if (streq(name, "all-balanced")) {
                const struct sim_mig_profile *want[] = { sim_mig_profile(m, NVML_GPU_INSTANCE_PROFILE_3_SLICE),
                                                         sim_mig_profile(m, NVML_GPU_INSTANCE_PROFILE_2_SLICE),
                                                         sim_mig_profile(m, NVML_GPU_INSTANCE_PROFILE_1_SLICE),
                                                         sim_mig_profile(m, NVML_GPU_INSTANCE_PROFILE_1_SLICE) };
                return add_set(p, gpu, m, want, ELEMENTSOF(want));
        }
        if (!startswith(name, "all-"))
                return fail(p, "mig: unknown layout '%s' (all-enabled, all-balanced, all-<profile>)", name);
        char pname[48];
        strscpy(pname, name + 4, sizeof pname);
        /* mig-parted writes "+me" as ".me" in config names */
        size_t l = strlen(pname);
        if (l > 3 && streq(pname + l - 3, ".me"))
                pname[l - 3] = '+';
        int r = 0;
        const struct sim_mig_profile *pr = find_profile(p, m, pname, &r);
        if (!pr)
                return r;
        unsigned made = 0;
        while (sim_mig_gi_remaining(&p->node->gpu[gpu], m, pr->profile) > 0)
                if ((r = add_gi(p, gpu, m, pr, -1, NULL)) < 0)
                        return r;
                else
                        made++;
        return made ? 0 : fail(p, "mig: no %s fits on GPU %u", pr->name, gpu);
}

/* lint: long — one `mig` line: the GPU, then each key=value in the order the format lists them, each with its
 * own check and message. */
static int parse_line(struct mig_parser *p, char **tok, unsigned n) {
        unsigned gpu;
        if (n < 3 || parse_uint(tok[1], TOPO_MAX_GPUS - 1, &gpu) < 0)
                return fail(p, "expected 'mig GPU key=value ...'");
        if (gpu >= p->t->n_gpus)
                return fail(p, "mig %u: the matrix has %u GPUs", gpu, p->t->n_gpus);
        const struct topo_gpu *tg = &p->t->gpu[gpu];
        const struct sim_mig_model *m = sim_mig_model(tg);
        if (!m)
                return fail(p, "mig %u: %s has no MIG in the simulator (MIG models: %s)", gpu, tg->name,
                            sim_mig_models());
        struct sim_mig_gpu *g = &p->node->gpu[gpu];
        bool on = g->current == NVML_DEVICE_MIG_ENABLE;
        char *gi_spec = NULL, *ci_spec = NULL;
        for (unsigned i = 2; i < n; i++) {
                char *eq = strchr(tok[i], '=');
                if (!eq || eq == tok[i])
                        return fail(p, "expected key=value, got '%s'", tok[i]);
                *eq = '\0';
                const char *key = tok[i];
                char *val = eq + 1;
                int r;
                if (streq(key, "pending")) {
                        if (!streq(val, "on") && !streq(val, "off"))
                                return fail(p, "pending: expected on or off, got '%s'", val);
                        g->pending = streq(val, "on") ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
                } else if (streq(key, "reset")) {
                        if (!streq(val, "required"))
                                return fail(p, "reset: expected required, got '%s'", val);
                        g->reset_required = 1;
                } else if (streq(key, "gi")) {
                        gi_spec = val;
                } else if (streq(key, "ci")) {
                        ci_spec = val;
                } else if (streq(key, "layout") || streq(key, "devices")) {
                        if (!on)
                                return fail(p, "mig %u: instances need MIG on (gpu %u mig=on)", gpu, gpu);
                        if ((r = streq(key, "layout") ? add_layout(p, gpu, m, val) : add_devices(p, gpu, m, val)) < 0)
                                return r;
                } else
                        return fail(p, "unknown mig attribute '%s' (known: pending, reset, gi, ci, layout, devices)",
                                    key);
        }
        if (ci_spec && !gi_spec)
                return fail(p, "mig %u: ci= belongs to a gi= on the same line", gpu);
        if (!gi_spec)
                return 0;
        if (!on)
                return fail(p, "mig %u: instances need MIG on (gpu %u mig=on)", gpu, gpu);
        int start, r;
        if ((r = split_at(p, gi_spec, &start)) < 0)
                return r;
        const struct sim_mig_profile *pr = find_profile(p, m, gi_spec, &r);
        if (!pr)
                return r;
        return add_gi(p, gpu, m, pr, start, ci_spec);
}

static int check_modes(struct mig_parser *p) {
        p->line = 0;
        for (unsigned i = 0; i < p->t->n_gpus; i++) {
                const struct topo_gpu *g = &p->t->gpu[i];
                if (g->mig_mode >= 0 && !sim_mig_model(g)) {
                        snprintf(p->err, p->err_len,
                                 "GPU %u: mig=%s, but %s has no MIG in the simulator (MIG models: %s)", i,
                                 g->mig_mode ? "on" : "off", g->name, sim_mig_models());
                        return -EINVAL;
                }
        }
        return 0;
}

int sim_mig_node_parse(const char *text, size_t len, const struct topo *t, struct sim_mig_node *ret, char *err,
                       size_t err_len) {
        struct mig_parser p = { .t = t, .node = ret, .err = err, .err_len = err_len };
        sim_mig_initial(t, ret);
        int r = check_modes(&p);
        if (r < 0)
                return r;
        size_t pos = 0;
        while (pos < len) {
                size_t end = pos;
                while (end < len && text[end] != '\n')
                        end++;
                p.line++;
                size_t l = end - pos;
                const char *s = text + pos;
                pos = end < len ? end + 1 : end;
                while (l && (*s == ' ' || *s == '\t')) {
                        s++;
                        l--;
                }
                if (l < 4 || memcmp(s, "mig", 3) != 0 || (s[3] != ' ' && s[3] != '\t'))
                        continue;
                if (l >= LINE_MAX_BYTES)
                        return fail(&p, "line longer than %u bytes", LINE_MAX_BYTES);
                char line[LINE_MAX_BYTES];
                strnscpy(line, sizeof line, s, l);
                char *tok[MAX_TOKENS], *save = NULL;
                unsigned n = 0;
                for (char *x = strtok_r(line, " \t\r", &save); x; x = strtok_r(NULL, " \t\r", &save)) {
                        if (x[0] == '#')
                                break;
                        if (n == MAX_TOKENS)
                                return fail(&p, "too many fields");
                        tok[n++] = x;
                }
                if ((r = parse_line(&p, tok, n)) < 0)
                        return r;
        }
        return 0;
}
