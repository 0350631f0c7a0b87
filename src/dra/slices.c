/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dra/slices — the node's ResourceSlices from its topology, and the name, version and quantity codecs
 * of the DRA driver (slices.h). Pure: no I/O, no logging. Must never build a slice the API server
 * would refuse (the limits of slices.h are checked here, and tests check the output against them).
 */
#include "dra/slices.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "util/util.h"

/* ---- names ---- */

bool dra_dns_label_valid(const char *s) {
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > DRA_MAX_LABEL || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-'))
                        return false;
        return true;
}

/* Kubernetes' IsDNS1123Subdomain: at most 253 characters, dot-separated labels of [a-z0-9-] that start
 * and end with an alphanumeric (the label length is not limited there). */
bool dra_dns_subdomain_valid(const char *s) {
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > DRA_MAX_POOL_NAME)
                return false;
        bool start = true;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (c == '.') {
                        if (start || s[i - 1] == '-')
                                return false;
                        start = true;
                        continue;
                }
                if (!(islower((unsigned char)c) || isdigit((unsigned char)c) || c == '-'))
                        return false;
                if (start && c == '-')
                        return false;
                start = false;
        }
        return !start && s[n - 1] != '-';
}

static bool c_identifier(const char *s, size_t n) {
        if (n == 0 || n > DRA_MAX_ID || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
                return false;
        for (size_t i = 1; i < n; i++)
                if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
                        return false;
        return true;
}

bool dra_qualified_name_valid(const char *s) {
        if (!s)
                return false;
        const char *slash = strchr(s, '/');
        if (!slash)
                return c_identifier(s, strlen(s));
        char domain[DRA_MAX_DOMAIN + 1];
        size_t dl = (size_t)(slash - s);
        if (dl == 0 || dl > DRA_MAX_DOMAIN || strchr(slash + 1, '/'))
                return false;
        memcpy(domain, s, dl);
        domain[dl] = '\0';
        return dra_dns_subdomain_valid(domain) && c_identifier(slash + 1, strlen(slash + 1));
}

int dra_device_name(const struct dra_device_ref *ref, char *buf, size_t len) {
        if (ref->kind == DRA_DEVICE_MIG_DYNAMIC) {
                int w = snprintf(buf, len, "gpu-%u" DRA_DEVICE_MIG_INFIX "%s-%u", ref->index, ref->label, ref->start);
                return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
        }
        int w = dra_kind_mig(ref->kind)
                        ? snprintf(buf, len, "gpu-%u" DRA_DEVICE_MIG_INFIX "%u-%u%s", ref->index, ref->gi, ref->ci,
                                   ref->kind == DRA_DEVICE_MIG_SHARED ? DRA_DEVICE_SHARED_SUFFIX : "")
                        : snprintf(buf, len, "gpu-%u%s", ref->index,
                                   ref->kind == DRA_DEVICE_SHARED ? DRA_DEVICE_SHARED_SUFFIX : "");
        return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

/* A decimal number without leading zeros, at most `max` digits: its length, or 0. */
static size_t number(const char *p, size_t max, unsigned *ret) {
        size_t digits = strspn(p, "0123456789");
        if (digits == 0 || digits > max || (digits > 1 && p[0] == '0'))
                return 0;
        unsigned v = 0;
        for (size_t i = 0; i < digits; i++)
                v = v * 10 + (unsigned)(p[i] - '0');
        *ret = v;
        return digits;
}

/* "<label>-<start>" after the MIG infix: a label starts "<digits>g" (a static device's "<gi>-<ci>" never does). */
static int parse_dynamic(const char *p, struct dra_device_ref *r) {
        const char *dash = strrchr(p, '-');
        size_t n = dash ? (size_t)(dash - p) : 0;
        unsigned start;
        if (!dash || n == 0 || n >= sizeof r->label || number(dash + 1, 1, &start) == 0 || dash[2] != '\0' ||
            strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789-") < n || dash[-1] == '-')
                return -EINVAL;
        memcpy(r->label, p, n);
        r->label[n] = '\0';
        r->start = start;
        r->kind = DRA_DEVICE_MIG_DYNAMIC;
        return 0;
}

int dra_device_parse(const char *name, struct dra_device_ref *ret) {
        struct dra_device_ref r = { .kind = DRA_DEVICE_GPU };
        if (!name || !startswith(name, "gpu-"))
                return -EINVAL;
        const char *p = name + 4;
        size_t n = number(p, 6, &r.index);
        if (n == 0)
                return -EINVAL;
        p += n;
        if (streq(p, DRA_DEVICE_SHARED_SUFFIX))
                r.kind = DRA_DEVICE_SHARED;
        else if (startswith(p, DRA_DEVICE_MIG_INFIX)) {
                p += strlen(DRA_DEVICE_MIG_INFIX);
                size_t digits = strspn(p, "0123456789");
                if (digits > 0 && p[digits] == 'g') {
                        if (parse_dynamic(p, &r) < 0)
                                return -EINVAL;
                        *ret = r;
                        return 0;
                }
                if ((n = number(p, 2, &r.gi)) == 0 || p[n] != '-')
                        return -EINVAL;
                p += n + 1;
                if ((n = number(p, 2, &r.ci)) == 0 || (p[n] != '\0' && !streq(p + n, DRA_DEVICE_SHARED_SUFFIX)))
                        return -EINVAL;
                r.kind = p[n] ? DRA_DEVICE_MIG_SHARED : DRA_DEVICE_MIG;
        } else if (*p != '\0')
                return -EINVAL;
        *ret = r;
        return 0;
}

/* ---- versions ---- */

static bool numeric_id(const char *s, size_t n) {
        if (n == 0 || strspn(s, "0123456789") < n)
                return false;
        return n == 1 || s[0] != '0';
}

/* Dot-separated identifiers of [0-9A-Za-z-]; prerelease ones that are numeric have no leading zero. */
static bool ids_valid(const char *s, size_t n, bool prerelease) {
        size_t start = 0;
        for (size_t i = 0; i <= n; i++) {
                if (i < n && s[i] != '.') {
                        if (!isalnum((unsigned char)s[i]) && s[i] != '-')
                                return false;
                        continue;
                }
                size_t l = i - start;
                if (l == 0)
                        return false;
                if (prerelease && strspn(s + start, "0123456789") >= l && !numeric_id(s + start, l))
                        return false;
                start = i + 1;
        }
        return true;
}

bool dra_semver_valid(const char *s) {
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > DRA_MAX_ATTR_VALUE)
                return false;
        const char *p = s;
        for (int part = 0; part < 3; part++) {
                size_t d = strspn(p, "0123456789");
                if (!numeric_id(p, d))
                        return false;
                p += d;
                if (part < 2) {
                        if (*p != '.')
                                return false;
                        p++;
                }
        }
        if (*p == '-') {
                const char *end = strchr(p, '+');
                size_t l = end ? (size_t)(end - p - 1) : strlen(p + 1);
                if (!ids_valid(p + 1, l, true))
                        return false;
                p += 1 + l;
        }
        if (*p == '+') {
                if (!ids_valid(p + 1, strlen(p + 1), false))
                        return false;
                p += strlen(p);
        }
        return *p == '\0';
}

int dra_semver_from_driver(const char *v, char *buf, size_t len) {
        unsigned long parts[3] = { 0, 0, 0 };
        unsigned n = 0;
        const char *p = v;
        if (!v || !*v)
                return -EINVAL;
        for (;;) {
                size_t d = strspn(p, "0123456789");
                if (d == 0 || d > 9 || n >= 3)
                        return -EINVAL;
                unsigned long x = 0;
                for (size_t i = 0; i < d; i++)
                        x = x * 10 + (unsigned long)(p[i] - '0');
                parts[n++] = x;
                p += d;
                if (*p == '\0')
                        break;
                if (*p != '.')
                        return -EINVAL;
                p++;
        }
        int w = snprintf(buf, len, "%lu.%lu.%lu", parts[0], parts[1], parts[2]);
        return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

int dra_pci_bus_id(const char *nvml_bus_id, char *buf, size_t len) {
        /* "00000000:3B:00.0" or "0000:3b:00.0": DOMAIN:BUS:DEVICE.FUNCTION, the domain's last 4 digits kept */
        const char *c1 = nvml_bus_id ? strchr(nvml_bus_id, ':') : NULL;
        if (!c1 || len < 13)
                return -EINVAL;
        size_t dl = (size_t)(c1 - nvml_bus_id);
        if (dl < 4 || dl > 8 || strspn(nvml_bus_id, "0123456789abcdefABCDEF") != dl || strlen(c1) != 8)
                return -EINVAL;
        for (size_t i = 0; i < dl - 4; i++)
                if (nvml_bus_id[i] != '0')
                        return -EINVAL;
        char out[13];
        memcpy(out, nvml_bus_id + dl - 4, 4);
        memcpy(out + 4, c1, 8);
        out[12] = '\0';
        /* ":BB:DD.F" */
        static const char shape[] = ":xx:xx.x";
        for (size_t i = 0; i < 8; i++) {
                char c = out[4 + i];
                if (shape[i] == 'x' ? !isxdigit((unsigned char)c) : c != shape[i])
                        return -EINVAL;
        }
        for (size_t i = 0; i < 12; i++)
                buf[i] = (char)tolower((unsigned char)out[i]);
        buf[12] = '\0';
        return 0;
}

/* ---- quantities ---- */

#define Q_MAX ((unsigned __int128)INT64_MAX)

static int quantity_suffix(const char *s, int *ret_base2, int *ret_exp10) {
        static const struct {
                const char *s;
                int b2, e10;
        } sfx[] = {
                { "", 0, 0 },    { "Ki", 10, 0 }, { "Mi", 20, 0 }, { "Gi", 30, 0 }, { "Ti", 40, 0 }, { "Pi", 50, 0 },
                { "Ei", 60, 0 }, { "n", 0, -9 },  { "u", 0, -6 },  { "m", 0, -3 },  { "k", 0, 3 },   { "M", 0, 6 },
                { "G", 0, 9 },   { "T", 0, 12 },  { "P", 0, 15 },  { "E", 0, 18 },
        };
        for (size_t i = 0; i < ELEMENTSOF(sfx); i++)
                if (streq(s, sfx[i].s)) {
                        *ret_base2 = sfx[i].b2;
                        *ret_exp10 = sfx[i].e10;
                        return 0;
                }
        if (*s != 'e' && *s != 'E')
                return -EINVAL;
        const char *p = s + 1;
        bool neg = *p == '-';
        if (*p == '-' || *p == '+')
                p++;
        size_t d = strspn(p, "0123456789");
        if (d == 0 || p[d] != '\0' || d > 3)
                return -EINVAL;
        int e = 0;
        for (size_t i = 0; i < d; i++)
                e = e * 10 + (p[i] - '0');
        *ret_base2 = 0;
        *ret_exp10 = neg ? -e : e;
        return 0;
}

/* lint: long — the quantity grammar (sign, digits, fraction, three suffix kinds) and exact rounding in one pass. */
int dra_quantity_parse(const char *s, uint64_t *ret) {
        if (!s || !*s)
                return -EINVAL;
        const char *p = s;
        bool negative = false;
        if (*p == '+' || *p == '-')
                negative = *p++ == '-';
        unsigned __int128 mant = 0;
        unsigned sig = 0, frac = 0;
        bool any = false, dot = false;
        for (; *p; p++) {
                if (*p == '.') {
                        if (dot)
                                return -EINVAL;
                        dot = true;
                        continue;
                }
                if (!isdigit((unsigned char)*p))
                        break;
                any = true;
                if (mant == 0 && *p == '0') {
                        frac += dot;
                        continue;
                }
                if (++sig > 36)
                        return -ERANGE;
                mant = mant * 10 + (unsigned)(*p - '0');
                frac += dot;
        }
        int b2, e10;
        if (!any || quantity_suffix(p, &b2, &e10) < 0)
                return -EINVAL;
        if (mant == 0) {
                *ret = 0;
                return 0;
        }
        if (negative)
                return -ERANGE;
        int exp10 = e10 - (int)frac;
        unsigned __int128 den = 1;
        /* value = mant * 2^b2 * 10^exp10, rounded up */
        for (int i = 0; i < b2; i++) {
                mant <<= 1;
                if (mant > ((unsigned __int128)1 << 120))
                        return -ERANGE;
        }
        for (; exp10 > 0; exp10--) {
                mant *= 10;
                if (mant > Q_MAX)
                        return -ERANGE;
        }
        for (; exp10 < 0; exp10++) {
                if (den > mant) { /* a positive amount below 1 rounds up to 1 */
                        *ret = 1;
                        return 0;
                }
                den *= 10;
        }
        unsigned __int128 v = (mant + den - 1) / den;
        if (v > Q_MAX)
                return -ERANGE;
        *ret = (uint64_t)v;
        return 0;
}

/* ---- topology groups ---- */

static unsigned uf_find(int *parent, unsigned i) {
        while ((unsigned)parent[i] != i)
                i = (unsigned)(parent[i] = parent[parent[i]]);
        return i;
}

static void groups(const struct topo *t, int out[TOPO_MAX_GPUS], bool (*joined)(struct topo_link l)) {
        int parent[TOPO_MAX_GPUS];
        for (unsigned i = 0; i < TOPO_MAX_GPUS; i++)
                parent[i] = (int)i;
        for (unsigned a = 0; a < t->n_gpus; a++)
                for (unsigned b = a + 1; b < t->n_gpus; b++)
                        if (joined(topo_get_link(t, a, b))) {
                                unsigned ra = uf_find(parent, a), rb = uf_find(parent, b);
                                parent[MAX(ra, rb)] = (int)MIN(ra, rb);
                        }
        for (unsigned i = 0; i < TOPO_MAX_GPUS; i++)
                out[i] = i < t->n_gpus ? (int)uf_find(parent, i) : -1;
}

static bool nvlinked(struct topo_link l) {
        return l.nvlinks > 0;
}

static bool same_switch(struct topo_link l) {
        return l.pcie >= TOPO_LEVEL_PIX && l.pcie != TOPO_LEVEL_SELF;
}

void dra_nvlink_islands(const struct topo *t, int island[TOPO_MAX_GPUS]) {
        groups(t, island, nvlinked);
}

void dra_pcie_switch_groups(const struct topo *t, int group[TOPO_MAX_GPUS]) {
        groups(t, group, same_switch);
}

/* ---- counters ---- */

static json_t *quantity(uint64_t v);

bool dra_mig_gpu(const struct dra_mig *m, unsigned g) {
        return m && g < m->node.n_gpus && m->node.gpu[g].mode == 1 && m->memory_slices[g] > 0 &&
               m->memory_slices[g] <= MIG_MAX_PLACEMENTS && m->compute_slices[g] > 0;
}

void dra_mig_label(const char *profile, char *buf, size_t len) {
        size_t n = 0;
        for (const char *c = profile ? profile : ""; *c && n + 1 < len; c++)
                buf[n++] = *c == '.' || *c == '+' ? '-' : (char)tolower((unsigned char)*c);
        if (len)
                buf[n] = '\0';
}

int dra_mig_placement(const struct mig_caps *caps, const char *label, unsigned start, const struct mig_profile **ret,
                      struct mig_placement *ret_at) {
        for (unsigned i = 0; i < caps->n_profiles; i++) {
                const struct mig_profile *p = &caps->profile[i];
                char l[MIG_PROFILE_NAME_MAX];
                dra_mig_label(p->name, l, sizeof l);
                if (!streq(l, label))
                        continue;
                *ret = p;
                for (unsigned k = 0; k < p->n_placements; k++)
                        if (p->placement[k].start == start) {
                                *ret_at = p->placement[k];
                                return 0;
                        }
                return -ERANGE;
        }
        return -ENOENT;
}

bool dra_mig_dynamic_gpu(const struct dra_slice_input *in, unsigned g) {
        return g < 64 && (in->mig_dynamic >> g & 1) && dra_mig_gpu(in->mig, g) && in->mig->caps[g].n_profiles > 0;
}

const struct mig_gi *dra_mig_blocker(const struct dra_slice_input *in, unsigned g, struct mig_placement at,
                                     bool skip_owned) {
        const struct mig_gpu *mg = &in->mig->node.gpu[g];
        for (unsigned k = 0; k < mg->n_gis; k++) {
                const struct mig_gi *gi = &mg->gi[k];
                bool owned = gi->id < 16 && (in->mig_owned[g] >> gi->id & 1);
                if (at.start < gi->placement.start + gi->placement.size && gi->placement.start < at.start + at.size &&
                    !(owned && skip_owned))
                        return gi;
        }
        return NULL;
}

unsigned dra_mig_dynamic_devices(const struct dra_slice_input *in, unsigned g, struct dra_device_ref *ret,
                                 unsigned max) {
        unsigned n = 0;
        if (!dra_mig_dynamic_gpu(in, g))
                return 0;
        const struct mig_caps *caps = &in->mig->caps[g];
        for (unsigned i = 0; i < caps->n_profiles; i++) {
                const struct mig_profile *p = &caps->profile[i];
                for (unsigned k = 0; k < p->n_placements && n < max; k++) {
                        if (dra_mig_blocker(in, g, p->placement[k], true))
                                continue;
                        ret[n] = (struct dra_device_ref){ .kind = DRA_DEVICE_MIG_DYNAMIC,
                                                          .index = (unsigned)in->t->gpu[g].index,
                                                          .start = p->placement[k].start };
                        dra_mig_label(p->name, ret[n].label, sizeof ret[n].label);
                        n++;
                }
        }
        return n;
}

/* Whether a MIG device of GPU g has a shared twin: shared devices on, the server keeps counters, room for
 * two shares. */
static bool mig_shareable(const struct dra_slice_input *in, const struct mig_device *md) {
        return in->sharing && !in->counters_dropped && md->memory_total >= 2 * in->memory_unit;
}

/* The "mig-<gi>-<ci>" counter's size: the MIG device's memory in bytes (a share takes 1). */
static uint64_t mig_share_counter(const struct mig_device *md) {
        return md->memory_total;
}

/* The MIG device's position in its GPU's list (the index of its mig-<gi>-<ci> counter), or -1. */
static int mig_position(const struct dra_slice_input *in, unsigned g, const struct mig_device *md) {
        const struct mig_gpu *mg = &in->mig->node.gpu[g];
        for (unsigned k = 0; k < mg->n_devices && k < MIG_MAX_DEVICES; k++)
                if (&mg->dev[k] == md)
                        return (int)k;
        return -1;
}

/* The profiles of a GPU partitioned dynamically that cannot have an instance at every placement at once. */
static void profile_limits(const struct mig_caps *caps, struct dra_counters *ret) {
        for (unsigned k = 0; k < caps->n_profiles && k < MIG_MAX_PROFILES; k++)
                if (caps->profile[k].instances < caps->profile[k].n_placements) {
                        ret->profile_instances[k] = caps->profile[k].instances;
                        ret->profile_id[k] = caps->profile[k].id;
                }
}

void dra_gpu_counters(const struct dra_slice_input *in, unsigned g, struct dra_counters *ret) {
        memset(ret, 0, sizeof *ret);
        ret->memory = in->t->gpu[g].memory_total;
        if (!dra_mig_gpu(in->mig, g))
                return;
        ret->n_memory_slices = in->mig->memory_slices[g];
        for (unsigned i = 0; i < ret->n_memory_slices; i++)
                ret->memory_slice[i] = 1;
        ret->compute_slices = in->mig->compute_slices[g];
        const struct mig_gpu *mg = &in->mig->node.gpu[g];
        if (dra_mig_dynamic_gpu(in, g))
                profile_limits(&in->mig->caps[g], ret);
        for (unsigned k = 0; !dra_mig_dynamic_gpu(in, g) && k < mg->n_devices && k < MIG_MAX_DEVICES; k++) {
                ret->mig_gi[k] = mg->dev[k].gi;
                ret->mig_ci[k] = mg->dev[k].ci;
                if (mig_shareable(in, &mg->dev[k]))
                        ret->mig_share[k] = mig_share_counter(&mg->dev[k]);
        }
}

/* The GPU instance of a MIG device. */
static const struct mig_gi *gpu_instance(const struct mig_gpu *mg, unsigned gi) {
        for (unsigned k = 0; k < mg->n_gis; k++)
                if (mg->gi[k].id == gi)
                        return &mg->gi[k];
        return NULL;
}

/* A placement consumes its memory slices and its profile's compute slices (made as one compute instance). */
static int dynamic_consumption(const struct dra_slice_input *in, unsigned g, const struct dra_device_ref *ref,
                               struct dra_counters *ret) {
        const struct mig_profile *p;
        struct mig_placement at;
        memset(ret, 0, sizeof *ret);
        if (!dra_mig_dynamic_gpu(in, g) || dra_mig_placement(&in->mig->caps[g], ref->label, ref->start, &p, &at) < 0)
                return -ENODEV;
        ret->n_memory_slices = in->mig->memory_slices[g];
        for (unsigned i = at.start; i < at.start + at.size && i < ret->n_memory_slices; i++)
                ret->memory_slice[i] = 1;
        ret->compute_slices = p->slices;
        unsigned k = (unsigned)(p - in->mig->caps[g].profile);
        if (k < MIG_MAX_PROFILES && p->instances < p->n_placements) {
                ret->profile_instances[k] = 1;
                ret->profile_id[k] = p->id;
        }
        return 0;
}

int dra_device_consumption(const struct dra_slice_input *in, unsigned g, const struct dra_device_ref *ref,
                           struct dra_counters *ret) {
        switch (ref->kind) {
                case DRA_DEVICE_GPU: dra_gpu_counters(in, g, ret); return 0;
                case DRA_DEVICE_SHARED:
                        memset(ret, 0, sizeof *ret);
                        ret->memory = 1; /* any share keeps the whole device out, and the whole device any share */
                        return 0;
                case DRA_DEVICE_MIG_DYNAMIC: return dynamic_consumption(in, g, ref, ret);
                case DRA_DEVICE_MIG:
                case DRA_DEVICE_MIG_SHARED: break;
        }
        if (dra_mig_dynamic_gpu(in, g)) /* its instances are the claims': only placements are devices */
                return -ENODEV;
        memset(ret, 0, sizeof *ret);
        const struct mig_device *md = in->mig ? mig_device_by_ids(&in->mig->node, g, ref->gi, ref->ci) : NULL;
        int k = md ? mig_position(in, g, md) : -1;
        if (!md || k < 0 || !dra_mig_gpu(in->mig, g) || (ref->kind == DRA_DEVICE_MIG_SHARED && !mig_shareable(in, md)))
                return -ENODEV;
        ret->n_memory_slices = in->mig->memory_slices[g];
        ret->mig_gi[k] = md->gi;
        ret->mig_ci[k] = md->ci;
        if (ref->kind == DRA_DEVICE_MIG_SHARED) { /* the instance's slices are its MIG device's, which it excludes */
                ret->mig_share[k] = 1;
                return 0;
        }
        if (mig_shareable(in, md))
                ret->mig_share[k] = mig_share_counter(md);
        const struct mig_gi *gi = gpu_instance(&in->mig->node.gpu[g], ref->gi);
        ret->compute_slices = md->ci_slices ? md->ci_slices : md->gi_slices;
        /* The compute instances of one GPU instance share its memory: only a GPU instance's sole compute
         * instance consumes its memory slices (two of them would exclude each other). */
        if (!gi || gi->n_cis == 1)
                for (unsigned i = md->placement.start;
                     i < md->placement.start + md->placement.size && i < ret->n_memory_slices; i++)
                        ret->memory_slice[i] = 1;
        return 0;
}

void dra_counters_add(struct dra_counters *a, const struct dra_counters *b) {
        a->memory += b->memory;
        for (unsigned i = 0; i < MIG_MAX_PLACEMENTS; i++)
                a->memory_slice[i] += b->memory_slice[i];
        a->compute_slices += b->compute_slices;
        for (unsigned k = 0; k < MIG_MAX_DEVICES; k++)
                a->mig_share[k] += b->mig_share[k];
        for (unsigned k = 0; k < MIG_MAX_PROFILES; k++) {
                a->profile_instances[k] += b->profile_instances[k];
                a->profile_id[k] = b->profile_instances[k] ? b->profile_id[k] : a->profile_id[k];
        }
}

bool dra_counters_fit(const struct dra_counters *a, const struct dra_counters *cap) {
        bool fit = a->memory <= cap->memory && a->compute_slices <= cap->compute_slices;
        for (unsigned i = 0; i < MIG_MAX_PLACEMENTS; i++)
                fit &= a->memory_slice[i] <= (i < cap->n_memory_slices ? cap->memory_slice[i] : 0);
        for (unsigned k = 0; k < MIG_MAX_DEVICES; k++)
                fit &= a->mig_share[k] <= cap->mig_share[k];
        for (unsigned k = 0; k < MIG_MAX_PROFILES; k++)
                fit &= !a->profile_instances[k] || a->profile_instances[k] <= cap->profile_instances[k];
        return fit;
}

/* The counters as the API writes them: {"memory": {"value": …}, "memory-slice-0": …, "compute-slices": …};
 * zero counters left out (a consumption names only what it takes). */
static json_t *counters_json(const struct dra_counters *c, bool set) {
        json_t *o = json_object();
        char name[32];
        if (!o)
                return NULL;
        if ((set || c->memory) &&
            json_object_set_new(o, "memory", json_pack("{s:o}", "value", quantity(c->memory))) < 0)
                goto fail;
        for (unsigned i = 0; i < c->n_memory_slices && i < MIG_MAX_PLACEMENTS; i++) {
                if (!c->memory_slice[i])
                        continue;
                snprintf(name, sizeof name, "memory-slice-%u", i);
                if (json_object_set_new(o, name, json_pack("{s:o}", "value", quantity(c->memory_slice[i]))) < 0)
                        goto fail;
        }
        if (c->compute_slices &&
            json_object_set_new(o, "compute-slices", json_pack("{s:o}", "value", quantity(c->compute_slices))) < 0)
                goto fail;
        for (unsigned k = 0; k < MIG_MAX_PROFILES; k++) {
                if (!c->profile_instances[k])
                        continue;
                snprintf(name, sizeof name, "profile-%u-instances", c->profile_id[k]);
                if (json_object_set_new(o, name, json_pack("{s:o}", "value", quantity(c->profile_instances[k]))) < 0)
                        goto fail;
        }
        for (unsigned k = 0; k < MIG_MAX_DEVICES; k++) {
                if (!c->mig_share[k])
                        continue;
                snprintf(name, sizeof name, "mig-%u-%u", c->mig_gi[k], c->mig_ci[k]);
                if (json_object_set_new(o, name, json_pack("{s:o}", "value", quantity(c->mig_share[k]))) < 0)
                        goto fail;
        }
        return o;
fail:
        json_decref(o);
        return NULL;
}

/* ---- attributes ---- */

static const char *architecture(int major, int minor) {
        switch (major) {
                case 3: return "Kepler";
                case 5: return "Maxwell";
                case 6: return "Pascal";
                case 7: return minor >= 5 ? "Turing" : "Volta";
                case 8: return minor == 9 ? "Ada" : "Ampere";
                case 9: return "Hopper";
                case 10:
                case 12: return "Blackwell";
                default: return NULL;
        }
}

static int set_attr(json_t *attrs, const char *name, const char *type, json_t *v) {
        if (!v)
                return -ENOMEM;
        return json_object_set_new(attrs, name, json_pack("{s:o}", type, v)) < 0 ? -ENOMEM : 0;
}

static int attr_string(json_t *attrs, const char *name, const char *s) {
        char v[DRA_MAX_ATTR_VALUE + 1];
        if (!s || !*s)
                return 0;
        strscpy(v, s, sizeof v); /* the API refuses longer strings */
        return set_attr(attrs, name, "string", json_string(v));
}

static int attr_int(json_t *attrs, const char *name, long long v) {
        return set_attr(attrs, name, "int", json_integer(v));
}

static int attr_version(json_t *attrs, const char *name, const char *v) {
        if (!dra_semver_valid(v))
                return 0;
        return set_attr(attrs, name, "version", json_string(v));
}

static json_t *quantity(uint64_t v) {
        char s[32];
        snprintf(s, sizeof s, "%" PRIu64, v);
        return json_string(s);
}

/* lint: long — one attribute per line, in the order docs/dra.md lists them; each is optional. */
static int gpu_attributes(const struct dra_slice_input *in, unsigned g, bool shared, const int *island, const int *sw,
                          json_t *attrs) {
        const struct topo_gpu *gpu = &in->t->gpu[g];
        char v[80];
        int r = attr_string(attrs, "type", shared ? "shared" : "gpu");
        r = r ?: attr_string(attrs, "uuid", gpu->uuid);
        r = r ?: attr_int(attrs, "index", gpu->index);
        if (gpu->minor >= 0)
                r = r ?: attr_int(attrs, "minor", gpu->minor);
        r = r ?: attr_string(attrs, "productName", gpu->name);
        r = r ?: attr_string(attrs, "brand", gpu->brand);
        if (gpu->cc_major > 0) {
                r = r ?: attr_string(attrs, "architecture", architecture(gpu->cc_major, gpu->cc_minor));
                snprintf(v, sizeof v, "%d.%d.0", gpu->cc_major, gpu->cc_minor);
                r = r ?: attr_version(attrs, "cudaComputeCapability", v);
        }
        if (dra_semver_from_driver(in->t->driver_version, v, sizeof v) == 0)
                r = r ?: attr_version(attrs, "driverVersion", v);
        if (in->t->cuda_version > 0) {
                snprintf(v, sizeof v, "%d.%d.0", in->t->cuda_version / 1000, in->t->cuda_version % 1000 / 10);
                r = r ?: attr_version(attrs, "cudaDriverVersion", v);
        }
        if (gpu->numa_node >= 0)
                r = r ?: attr_int(attrs, "numaNode", gpu->numa_node);
        r = r ?: attr_int(attrs, "nvlinkIsland", in->t->gpu[island[g]].index);
        r = r ?: attr_int(attrs, "pcieSwitch", in->t->gpu[sw[g]].index);
        if (in->pcie_root[g][0])
                r = r ?: attr_string(attrs, DRA_PCIE_ROOT_ATTR, in->pcie_root[g]);
        if (dra_pci_bus_id(gpu->bus_id, v, sizeof v) == 0)
                r = r ?: attr_string(attrs, DRA_PCI_BUS_ID_ATTR, v);
        return r;
}

/* A capacity with the request policy of a consumable share: default and minimum one step, steps of `step`. */
static json_t *consumable(uint64_t total, uint64_t step) {
        return json_pack("{s:o, s:{s:o, s:{s:o, s:o}}}", "value", quantity(total), "requestPolicy", "default",
                         quantity(step), "validRange", "min", quantity(step), "step", quantity(step));
}

/* What a device takes from its GPU's counter set (dra_device_consumption) as consumesCounters. */
static json_t *device_counters(const struct dra_slice_input *in, unsigned g, const struct dra_device_ref *ref) {
        struct dra_counters c;
        char set[32];
        if (dra_device_consumption(in, g, ref, &c) < 0)
                return NULL;
        snprintf(set, sizeof set, "gpu-%d", in->t->gpu[g].index);
        json_t *counters = counters_json(&c, false);
        return counters ? json_pack("[{s:s, s:o}]", "counterSet", set, "counters", counters) : NULL;
}

/* Whether GPU g is in MIG mode, by NVML's inventory or the MIG side read since. */
static bool mig_on(const struct dra_slice_input *in, unsigned g) {
        return in->t->gpu[g].mig_mode == 1 || (in->mig && g < in->mig->node.n_gpus && in->mig->node.gpu[g].mode == 1);
}

/* A MIG device's own attributes over its parent's: what it is, which instance, whose. */
static int mig_attributes(const struct topo_gpu *gpu, const struct mig_device *md, json_t *attrs) {
        json_object_del(attrs, "index");
        json_object_del(attrs, "minor");
        int r = attr_string(attrs, "type", "mig");
        r = r ?: attr_string(attrs, "uuid", md->uuid);
        r = r ?: attr_string(attrs, "profile", md->profile);
        r = r ?: attr_int(attrs, "gpuInstance", md->gi);
        r = r ?: attr_int(attrs, "computeInstance", md->ci);
        r = r ?: attr_string(attrs, "parentUUID", gpu->uuid);
        r = r ?: attr_int(attrs, "parentIndex", gpu->index);
        if (md->sms)
                r = r ?: attr_int(attrs, "multiprocessors", md->sms);
        return r;
}

/* A dynamic MIG device's attributes over its parent's: the profile and placement it would be made at (no UUID:
 * the instance does not exist until prepare), its memory (*ret_memory, bytes). */
static int dynamic_attributes(const struct dra_slice_input *in, unsigned g, const struct dra_device_ref *ref,
                              json_t *attrs, uint64_t *ret_memory) {
        const struct topo_gpu *gpu = &in->t->gpu[g];
        const struct mig_profile *p;
        struct mig_placement at;
        if (dra_mig_placement(&in->mig->caps[g], ref->label, ref->start, &p, &at) < 0)
                return -ENODEV;
        json_object_del(attrs, "index");
        json_object_del(attrs, "minor");
        json_object_del(attrs, "uuid");
        int r = attr_string(attrs, "type", "mig");
        r = r ?: attr_string(attrs, "profile", p->name);
        r = r ?: set_attr(attrs, "dynamic", "bool", json_true());
        r = r ?: attr_int(attrs, "placementStart", at.start);
        r = r ?: attr_int(attrs, "placementSize", at.size);
        r = r ?: attr_string(attrs, "parentUUID", gpu->uuid);
        r = r ?: attr_int(attrs, "parentIndex", gpu->index);
        if (p->sms)
                r = r ?: attr_int(attrs, "multiprocessors", p->sms);
        *ret_memory = p->memory_mib << 20;
        return r;
}

void dra_taint_value(const char *reason, char *buf, size_t len) {
        size_t n = 0;
        if (!len)
                return;
        for (const char *c = reason ? reason : ""; *c && n + 1 < len && n < DRA_MAX_LABEL; c++) {
                bool ok = isalnum((unsigned char)*c) || *c == '.' || *c == '_' || *c == '-';
                if (n == 0 && !isalnum((unsigned char)*c))
                        continue;
                buf[n++] = ok ? *c : '-';
        }
        while (n > 0 && !isalnum((unsigned char)buf[n - 1]))
                n--;
        buf[n] = '\0';
}

/* The unhealthy taint of GPU g's devices. */
static json_t *taints_json(const struct dra_slice_input *in, unsigned g) {
        char key[DRA_MAX_DOMAIN + DRA_MAX_ID + 2];
        const char *value = in->taint_value[g];
        snprintf(key, sizeof key, "%s/%s", in->driver, DRA_TAINT_UNHEALTHY);
        json_t *t = json_pack("{s:s, s:s}", "key", key, "effect", "NoSchedule");
        if (t && value[0] && json_object_set_new(t, "value", json_string(value)) < 0)
                json_decref(TAKE_PTR(t));
        return t ? json_pack("[o]", t) : NULL;
}

/* lint: long — one device of any kind: its attributes, its capacities and what it consumes, checked against
 * the per-device limit. */
static json_t *device_json(const struct dra_slice_input *in, unsigned g, const struct dra_device_ref *ref,
                           bool counters, const int *island, const int *sw) {
        const struct topo_gpu *gpu = &in->t->gpu[g];
        bool shared = dra_kind_shared(ref->kind);
        const struct mig_device *md = NULL;
        char name[DRA_MAX_LABEL + 1];
        uint64_t memory = gpu->memory_total;
        bool dynamic = ref->kind == DRA_DEVICE_MIG_DYNAMIC;
        if (dra_kind_mig(ref->kind) && !dynamic &&
            !(in->mig && (md = mig_device_by_ids(&in->mig->node, g, ref->gi, ref->ci))))
                return NULL;
        if (dra_device_name(ref, name, sizeof name) < 0)
                return NULL;
        json_t *d = json_pack("{s:s, s:{}, s:{}}", "name", name, "attributes", "capacity");
        json_t *attrs = json_object_get(d, "attributes");
        if (!d || gpu_attributes(in, g, shared, island, sw, attrs) < 0 || (md && mig_attributes(gpu, md, attrs) < 0) ||
            (dynamic && dynamic_attributes(in, g, ref, attrs, &memory) < 0) ||
            (ref->kind == DRA_DEVICE_MIG_SHARED && attr_string(attrs, "type", "mig-shared") < 0))
                goto fail;
        /* a GPU in MIG mode is no CUDA device of its own: the whole-GPU class leaves it out by this */
        if (ref->kind == DRA_DEVICE_GPU && set_attr(attrs, "migEnabled", "bool", json_boolean(mig_on(in, g))) < 0)
                goto fail;
        json_t *cap = json_object_get(d, "capacity");
        if (md)
                memory = md->memory_total;
        if (shared) {
                if (json_object_set_new(d, "allowMultipleAllocations", json_true()) < 0 ||
                    json_object_set_new(cap, "memory", consumable(memory, in->memory_unit)) < 0 ||
                    json_object_set_new(cap, "cores", consumable(DRA_CORES_TOTAL, 1)) < 0)
                        goto fail;
        } else if (memory && json_object_set_new(cap, "memory", json_pack("{s:o}", "value", quantity(memory))) < 0)
                goto fail;
        if (counters && json_object_set_new(d, "consumesCounters", device_counters(in, g, ref)) < 0)
                goto fail;
        if (in->tainted[g] && json_object_set_new(d, "taints", taints_json(in, g)) < 0)
                goto fail;
        if (json_object_size(attrs) + json_object_size(cap) > DRA_MAX_ATTRS_AND_CAPS)
                goto fail;
        return d;
fail:
        json_decref(d);
        return NULL;
}

/* ---- slices ---- */

static uint64_t fnv64(const char *a, const char *b) {
        uint64_t h = UINT64_C(0xcbf29ce484222325);
        for (const char *s = a; *s; s++)
                h = (h ^ (unsigned char)*s) * UINT64_C(0x100000001b3);
        h = (h ^ '/') * UINT64_C(0x100000001b3);
        for (const char *s = b; *s; s++)
                h = (h ^ (unsigned char)*s) * UINT64_C(0x100000001b3);
        return h;
}

static void slice_name(const struct dra_slice_input *in, unsigned k, char *buf, size_t len) {
        int w = snprintf(buf, len, "%s-%s-%u", in->node, in->driver, k);
        if (w < 0 || (size_t)w >= len || !dra_dns_subdomain_valid(buf))
                snprintf(buf, len, "gpuslice-dra-%016" PRIx64 "-%u", fnv64(in->node, in->driver), k);
}

static json_t *slice_json(const struct dra_slice_input *in, unsigned k, json_t *devices, json_t *counters) {
        char name[DRA_MAX_POOL_NAME + 1];
        slice_name(in, k, name, sizeof name);
        json_t *spec =
                json_pack("{s:s, s:s, s:{s:s, s:I, s:I}}", "driver", in->driver, "nodeName", in->node, "pool", "name",
                          in->node, "generation", (json_int_t)in->generation, "resourceSliceCount", (json_int_t)0);
        if (!spec || (devices && json_object_set_new(spec, "devices", devices) < 0) ||
            (counters && json_object_set_new(spec, "sharedCounters", counters) < 0)) {
                json_decref(spec);
                return NULL;
        }
        return json_pack("{s:s, s:s, s:{s:s}, s:o}", "apiVersion", "resource.k8s.io/v1", "kind", "ResourceSlice",
                         "metadata", "name", name, "spec", spec);
}

static int append(json_t *slices, json_t *slice) {
        return slice && json_array_append_new(slices, slice) == 0 ? 0 : -ENOMEM;
}

/* What the pool has of GPU g. */
struct gpu_plan {
        bool published, mig_on, mig, counters; /* counters: its devices consume its counter set */
};

static struct gpu_plan plan_gpu(const struct dra_slice_input *in, unsigned g) {
        const struct topo_gpu *gpu = &in->t->gpu[g];
        struct gpu_plan p = { .published = in->offered[g] && gpu->uuid[0] && gpu->index >= 0 };
        p.mig_on = mig_on(in, g);
        p.mig = p.published && dra_mig_gpu(in->mig, g);
        p.counters = p.published && (in->sharing || (p.mig && !in->counters_dropped));
        return p;
}

/* The pool being built: full device slices are appended as they fill. */
struct builder {
        const struct dra_slice_input *in;
        json_t *slices, *devices;
        unsigned k, per_slice;
};

static int add_device(struct builder *b, json_t *dev) {
        if (!dev || (!b->devices && !(b->devices = json_array())) || json_array_append_new(b->devices, dev) < 0)
                return -ENOMEM; /* dev went with json_array_append_new, or was NULL */
        if (json_array_size(b->devices) < b->per_slice)
                return 0;
        return append(b->slices, slice_json(b->in, b->k++, TAKE_PTR(b->devices), NULL));
}

/* The dynamic MIG devices of every GPU partitioned dynamically (only where its counters are published: the
 * placements exclude each other by them alone). */
static int add_dynamic(struct builder *b, const struct gpu_plan *plan, const int *island, const int *sw) {
        struct dra_device_ref refs[DRA_MIG_DYNAMIC_MAX];
        for (unsigned g = 0; g < b->in->t->n_gpus; g++) {
                unsigned n = plan[g].mig && plan[g].counters
                                     ? dra_mig_dynamic_devices(b->in, g, refs, DRA_MIG_DYNAMIC_MAX)
                                     : 0;
                for (unsigned k = 0; k < n; k++)
                        if (add_device(b, device_json(b->in, g, &refs[k], true, island, sw)) < 0)
                                return -ENOMEM;
        }
        return 0;
}

/* lint: long — every device of the pool in order (whole GPUs, shared devices, MIG devices), each kind only
 * where plan_gpu says so. */
static int add_devices(struct builder *b, const struct gpu_plan *plan, const int *island, const int *sw) {
        const struct dra_slice_input *in = b->in;
        for (unsigned g = 0; g < in->t->n_gpus; g++) {
                struct dra_device_ref ref = { .kind = DRA_DEVICE_GPU, .index = (unsigned)in->t->gpu[g].index };
                /* without counters, a MIG GPU's whole device and its MIG devices would not exclude each other */
                if (plan[g].published && !(plan[g].mig && !plan[g].counters) &&
                    add_device(b, device_json(in, g, &ref, plan[g].counters, island, sw)) < 0)
                        return -ENOMEM;
        }
        for (unsigned g = 0; in->sharing && g < in->t->n_gpus; g++) {
                struct dra_device_ref ref = { .kind = DRA_DEVICE_SHARED, .index = (unsigned)in->t->gpu[g].index };
                if (plan[g].published && !plan[g].mig_on && in->t->gpu[g].memory_total >= 2 * in->memory_unit &&
                    add_device(b, device_json(in, g, &ref, true, island, sw)) < 0)
                        return -ENOMEM;
        }
        if (add_dynamic(b, plan, island, sw) < 0)
                return -ENOMEM;
        for (unsigned g = 0; g < in->t->n_gpus; g++) {
                const struct mig_gpu *mg = plan[g].mig && !dra_mig_dynamic_gpu(in, g) ? &in->mig->node.gpu[g] : NULL;
                for (unsigned k = 0; mg && k < mg->n_devices; k++) {
                        struct dra_device_ref ref = { .kind = DRA_DEVICE_MIG,
                                                      .index = (unsigned)in->t->gpu[g].index,
                                                      .gi = mg->dev[k].gi,
                                                      .ci = mg->dev[k].ci };
                        if (add_device(b, device_json(in, g, &ref, plan[g].counters, island, sw)) < 0)
                                return -ENOMEM;
                }
        }
        for (unsigned g = 0; g < in->t->n_gpus; g++) {
                const struct mig_gpu *mg =
                        plan[g].mig && plan[g].counters && !dra_mig_dynamic_gpu(in, g) ? &in->mig->node.gpu[g] : NULL;
                for (unsigned k = 0; mg && k < mg->n_devices && k < MIG_MAX_DEVICES; k++) {
                        struct dra_device_ref ref = { .kind = DRA_DEVICE_MIG_SHARED,
                                                      .index = (unsigned)in->t->gpu[g].index,
                                                      .gi = mg->dev[k].gi,
                                                      .ci = mg->dev[k].ci };
                        if (mig_shareable(in, &mg->dev[k]) &&
                            add_device(b, device_json(in, g, &ref, true, island, sw)) < 0)
                                return -ENOMEM;
                }
        }
        if (b->devices && append(b->slices, slice_json(in, b->k++, TAKE_PTR(b->devices), NULL)) < 0)
                return -ENOMEM;
        return 0;
}

static int add_counter_sets(struct builder *b, const struct gpu_plan *plan) {
        json_t *sets = NULL;
        for (unsigned g = 0; g < b->in->t->n_gpus; g++) {
                if (!plan[g].counters)
                        continue;
                struct dra_counters c;
                char set[32];
                dra_gpu_counters(b->in, g, &c);
                snprintf(set, sizeof set, "gpu-%d", b->in->t->gpu[g].index);
                json_t *counters = counters_json(&c, true);
                if ((!sets && !(sets = json_array())) || !counters ||
                    json_array_append_new(sets, json_pack("{s:s, s:o}", "name", set, "counters", counters)) < 0) {
                        json_decref(sets);
                        return -ENOMEM;
                }
                if (json_array_size(sets) == DRA_MAX_COUNTER_SETS_PER_SLICE &&
                    append(b->slices, slice_json(b->in, b->k++, NULL, TAKE_PTR(sets))) < 0)
                        return -ENOMEM;
        }
        if (sets && append(b->slices, slice_json(b->in, b->k++, NULL, sets)) < 0)
                return -ENOMEM;
        return 0;
}

/* The pool in order: the device slices (chunked by the per-slice limit), then the counter slices, then every
 * slice's resourceSliceCount. */
int dra_slices_build(const struct dra_slice_input *in, json_t **ret) {
        if (!in || !in->t || !dra_dns_subdomain_valid(in->driver) || strlen(in->driver) > DRA_MAX_DOMAIN ||
            !dra_dns_subdomain_valid(in->node) || (in->sharing && in->memory_unit == 0))
                return -EINVAL;
        int island[TOPO_MAX_GPUS], sw[TOPO_MAX_GPUS];
        struct gpu_plan plan[TOPO_MAX_GPUS];
        bool counters = false;
        dra_nvlink_islands(in->t, island);
        dra_pcie_switch_groups(in->t, sw);
        for (unsigned g = 0; g < in->t->n_gpus; g++) {
                plan[g] = plan_gpu(in, g);
                counters |= plan[g].counters;
        }
        struct builder b = { .in = in,
                             .slices = json_array(),
                             .per_slice = counters ? DRA_MAX_DEVICES_WITH_COUNTERS : DRA_MAX_DEVICES_PER_SLICE };
        if (!b.slices || add_devices(&b, plan, island, sw) < 0 || add_counter_sets(&b, plan) < 0)
                goto oom;
        if (b.k == 0 && append(b.slices, slice_json(in, b.k++, NULL, NULL)) < 0) /* an empty pool still says so */
                goto oom;
        size_t i;
        json_t *s;
        json_array_foreach(b.slices, i, s) {
                json_t *pool = json_object_get(json_object_get(s, "spec"), "pool");
                if (json_object_set_new(pool, "resourceSliceCount", json_integer(b.k)) < 0)
                        goto oom;
        }
        *ret = b.slices;
        return 0;
oom:
        json_decref(b.devices);
        json_decref(b.slices);
        return -ENOMEM;
}

/* ---- versions of the API ---- */

static json_t *map_devices(const json_t *slice, bool wrap) {
        json_t *out = json_deep_copy(slice);
        json_t *devices = out ? json_object_get(json_object_get(out, "spec"), "devices") : NULL;
        size_t i;
        json_t *d;
        json_array_foreach(devices, i, d) {
                if (wrap) {
                        json_t *name = json_incref(json_object_get(d, "name"));
                        json_object_del(d, "name");
                        json_t *basic = json_deep_copy(d);
                        json_object_clear(d);
                        if (!basic || json_object_set_new(d, "name", name) < 0 ||
                            json_object_set_new(d, "basic", basic) < 0)
                                goto fail;
                } else {
                        json_t *basic = json_incref(json_object_get(d, "basic"));
                        json_object_del(d, "basic");
                        if (basic && json_object_update(d, basic) < 0) {
                                json_decref(basic);
                                goto fail;
                        }
                        json_decref(basic);
                }
        }
        return out;
fail:
        json_decref(out);
        return NULL;
}

json_t *dra_slice_for_version(const json_t *slice_v1, const char *version) {
        if (!version || (!streq(version, "v1") && !streq(version, "v1beta2") && !streq(version, "v1beta1")))
                return NULL;
        json_t *out = map_devices(slice_v1, streq(version, "v1beta1"));
        char av[64];
        snprintf(av, sizeof av, "resource.k8s.io/%s", version);
        if (out && json_object_set_new(out, "apiVersion", json_string(av)) < 0) {
                json_decref(out);
                return NULL;
        }
        return out;
}

json_t *dra_slice_to_v1(const json_t *slice) {
        return map_devices(slice, false);
}
