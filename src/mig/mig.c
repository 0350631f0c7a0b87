/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mig — the node's MIG model: lookups, profile names, and the reader of the driver's mig-minors text.
 * Pure: never allocates, never reads past the length it is given, never logs.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mig/mig.h"
#include "util/util.h"

void mig_node_init(struct mig_node *m, unsigned n_gpus) {
        memset(m, 0, sizeof *m);
        m->n_gpus = MIN(n_gpus, (unsigned)TOPO_MAX_GPUS);
        for (unsigned i = 0; i < TOPO_MAX_GPUS; i++)
                m->gpu[i].mode = m->gpu[i].pending = -1;
}

const struct mig_device *mig_device_by_uuid(const struct mig_node *m, const char *uuid) {
        for (unsigned g = 0; g < m->n_gpus; g++)
                for (unsigned k = 0; k < m->gpu[g].n_devices; k++)
                        if (streq(m->gpu[g].dev[k].uuid, uuid))
                                return &m->gpu[g].dev[k];
        return NULL;
}

const struct mig_device *mig_device_by_index(const struct mig_node *m, unsigned gpu, unsigned index) {
        for (unsigned k = 0; gpu < m->n_gpus && k < m->gpu[gpu].n_devices; k++)
                if (m->gpu[gpu].dev[k].index == index)
                        return &m->gpu[gpu].dev[k];
        return NULL;
}

const struct mig_device *mig_device_by_ids(const struct mig_node *m, unsigned gpu, unsigned gi, unsigned ci) {
        for (unsigned k = 0; gpu < m->n_gpus && k < m->gpu[gpu].n_devices; k++)
                if (m->gpu[gpu].dev[k].gi == gi && m->gpu[gpu].dev[k].ci == ci)
                        return &m->gpu[gpu].dev[k];
        return NULL;
}

/* ---- names ---- */

void mig_profile_name_clean(const char *nvml_name, char *buf, size_t len) {
        const char *s = startswith(nvml_name, "MIG ") ? nvml_name + 4 : nvml_name;
        strscpy(buf, s, len);
}

void mig_profile_name_compose(unsigned slices, uint64_t memory_mib, uint64_t gpu_memory_bytes, bool media, char *buf,
                              size_t len) {
        uint64_t total_mib = gpu_memory_bytes >> 20, gb = (gpu_memory_bytes + (1ULL << 30) - 1) >> 30;
        uint64_t eighths = total_mib ? MIN((memory_mib * 8 + total_mib - 1) / total_mib, 8u) : 8;
        snprintf(buf, len, "%ug.%llugb%s", slices, (unsigned long long)((eighths * gb + 4) / 8), media ? "+me" : "");
}

/* Digits, then the letter: "1g", "40gb". Returns the characters read, 0 if none. */
static size_t number_then(const char *s, const char *unit) {
        size_t n = 0;
        while (isdigit((unsigned char)s[n]))
                n++;
        if (n == 0 || n > 4 || (s[0] == '0' && n > 1) || !startswith(s + n, unit))
                return 0;
        return n + strlen(unit);
}

bool mig_profile_name_valid(const char *s) {
        size_t n = number_then(s, "g.");
        if (!n)
                return false;
        size_t m = number_then(s + n, "gb");
        if (!m)
                return false;
        const char *rest = s + n + m;
        return !*rest || streq(rest, "+me") || streq(rest, "-me") || streq(rest, "+me.all") || streq(rest, "+gfx");
}

int mig_ci_profile_for_slices(unsigned slices) {
        /* NVML_COMPUTE_INSTANCE_PROFILE_<n>_SLICE: 1 → 0, 2 → 1, 3 → 2, 4 → 3, 7 → 4, 8 → 5, 6 → 6 */
        static const int profile[] = { -1, 0, 1, 2, 3, -1, 6, 4, 5 };
        return slices < ELEMENTSOF(profile) && profile[slices] >= 0 ? profile[slices] : -EINVAL;
}

/* ---- mig-minors ---- */

/* Strict unsigned decimal of at most 9 digits at *s; advances. */
static bool read_uint(const char **s, const char *end, unsigned *ret) {
        unsigned v = 0, n = 0;
        while (*s < end && isdigit((unsigned char)**s) && n < 9) {
                v = v * 10 + (unsigned)(**s - '0');
                (*s)++;
                n++;
        }
        if (n == 0 || (*s < end && isdigit((unsigned char)**s)))
                return false;
        *ret = v;
        return true;
}

static bool read_word(const char **s, const char *end, const char *w) {
        size_t n = strlen(w);
        if ((size_t)(end - *s) < n || memcmp(*s, w, n) != 0)
                return false;
        *s += n;
        return true;
}

/* One line [s, end): NVIDIA's tools try, in order, "gpu%d/gi%d/ci%d/access %d", "gpu%d/gi%d/access %d",
 * "config %d", "monitor %d"; a line matching none is skipped. */
static bool parse_line(const char *s, const char *end, struct mig_minor *ret) {
        struct mig_minor m = { 0 };
        if (read_word(&s, end, "config "))
                m.kind = MIG_CAP_CONFIG;
        else if (read_word(&s, end, "monitor "))
                m.kind = MIG_CAP_MONITOR;
        else {
                if (!read_word(&s, end, "gpu") || !read_uint(&s, end, &m.gpu) || !read_word(&s, end, "/gi") ||
                    !read_uint(&s, end, &m.gi) || !read_word(&s, end, "/"))
                        return false;
                m.kind = MIG_CAP_GI;
                if (read_word(&s, end, "ci")) {
                        if (!read_uint(&s, end, &m.ci) || !read_word(&s, end, "/"))
                                return false;
                        m.kind = MIG_CAP_CI;
                }
                if (!read_word(&s, end, "access "))
                        return false;
        }
        if (!read_uint(&s, end, &m.minor))
                return false;
        while (s < end && (*s == ' ' || *s == '\t' || *s == '\r'))
                s++;
        if (s != end)
                return false;
        *ret = m;
        return true;
}

int mig_minors_parse(const char *text, size_t len, mig_minor_fn fn, void *userdata) {
        if (len > MIG_MINORS_MAX)
                return -EFBIG;
        const char *s = text, *end = text + len;
        while (s < end) {
                const char *nl = memchr(s, '\n', (size_t)(end - s));
                const char *le = nl ? nl : end;
                struct mig_minor m;
                if (parse_line(s, le, &m)) {
                        int r = fn(&m, userdata);
                        if (r < 0)
                                return r;
                }
                s = nl ? nl + 1 : end;
        }
        return 0;
}

struct lookup {
        unsigned gpu, gi, ci;
        int found_gi, found_ci;
};

static int on_minor(const struct mig_minor *m, void *userdata) {
        struct lookup *l = userdata;
        if (m->gpu != l->gpu || m->gi != l->gi)
                return 0;
        if (m->kind == MIG_CAP_GI)
                l->found_gi = (int)MIN(m->minor, (unsigned)INT32_MAX);
        else if (m->kind == MIG_CAP_CI && m->ci == l->ci)
                l->found_ci = (int)MIN(m->minor, (unsigned)INT32_MAX);
        return 0;
}

int mig_minors_lookup(const char *text, size_t len, unsigned gpu_minor, unsigned gi, unsigned ci, unsigned *ret_gi,
                      unsigned *ret_ci) {
        struct lookup l = { .gpu = gpu_minor, .gi = gi, .ci = ci, .found_gi = -1, .found_ci = -1 };
        int r = mig_minors_parse(text, len, on_minor, &l);
        if (r < 0)
                return r;
        if (l.found_gi < 0 || l.found_ci < 0)
                return -ENOENT;
        *ret_gi = (unsigned)l.found_gi;
        *ret_ci = (unsigned)l.found_ci;
        return 0;
}
