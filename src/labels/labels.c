/* SPDX-License-Identifier: Apache-2.0 */
/*
 * labels — NFD features file for the node's GPUs (see labels.h). Must never log, guess unknown
 * facts, or leave a half-written file where NFD reads.
 */
#include "labels/labels.h"

#include <ctype.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "metrics/metrics.h"
#include "util/atomic-file.h"
#include "util/util.h"

char *labels_sanitize(const char *s, char *buf, size_t len) {
        size_t n = 0;
        for (; s && *s && n + 1 < len && n < 63; s++) {
                char c = *s;
                buf[n++] = isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-' ? c : '-';
        }
        buf[n] = '\0';
        while (n && !isalnum((unsigned char)buf[n - 1]))
                buf[--n] = '\0';
        size_t k = 0;
        while (buf[k] && !isalnum((unsigned char)buf[k]))
                k++;
        memmove(buf, buf + k, n - k + 1);
        return buf;
}

const char *labels_gpu_family(int major, int minor) {
        switch (major) {
                case 1: return "tesla";
                case 2: return "fermi";
                case 3: return "kepler";
                case 5: return "maxwell";
                case 6: return "pascal";
                case 7: return minor < 5 ? "volta" : "turing";
                case 8: return minor < 9 ? "ampere" : "ada-lovelace";
                case 9: return "hopper";
                case 10:
                case 12: return "blackwell";
                default: return NULL;
        }
}

/* The GPU the node's labels describe: the first healthy one with a name (NULL: none). */
static const struct topo_gpu *first_named_gpu(const struct topo *t) {
        for (unsigned i = 0; i < t->n_gpus; i++)
                if (t->gpu[i].state == TOPO_GPU_OK && t->gpu[i].name[0])
                        return &t->gpu[i];
        return NULL;
}

int labels_format_sharing(const struct topo *t, const char *strategy, unsigned replicas, bool suffix, char **ret,
                          size_t *ret_len) {
        const struct topo_gpu *g = first_named_gpu(t);
        if (!g)
                return -ENODEV;
        struct metrics_text x = { 0 };
        char v[64], shared[64 + 8];
        metrics_text_printf(&x, "nvidia.com/gpu.replicas=%u\n", replicas);
        labels_sanitize(strategy, v, sizeof v);
        metrics_text_printf(&x, "nvidia.com/gpu.sharing-strategy=%s\n", v);
        labels_sanitize(g->name, v, sizeof v);
        if (suffix && v[0]) {
                /* GFD cuts the product so the suffix always fits a label value (63) */
                snprintf(shared, sizeof shared, "%.*s-SHARED", (int)MIN(strlen(v), (size_t)56), v);
                labels_sanitize(shared, v, sizeof v);
                metrics_text_printf(&x, "nvidia.com/gpu.product=%s\n", v);
        }
        return metrics_text_finish(&x, ret, ret_len);
}

int labels_format(const struct topo *t, char **ret, size_t *ret_len) {
        const struct topo_gpu *g = first_named_gpu(t);
        if (!g)
                return -ENODEV;
        struct metrics_text x = { 0 };
        char v[64];
        labels_sanitize(g->name, v, sizeof v);
        if (v[0]) {
                metrics_text_printf(&x, "nvidia-gpu-name=%s\n", v);
                metrics_text_printf(&x, "nvidia.com/gpu.product=%s\n", v);
        }
        if (g->memory_total)
                metrics_text_printf(&x, "nvidia.com/gpu.memory=%llu\n", (unsigned long long)(g->memory_total >> 20));
        metrics_text_printf(&x, "nvidia.com/gpu.count=%u\n", t->n_gpus);
        if (g->cc_major > 0) {
                const char *fam = labels_gpu_family(g->cc_major, g->cc_minor);
                if (fam)
                        metrics_text_printf(&x, "nvidia.com/gpu.family=%s\n", fam);
                metrics_text_printf(&x, "nvidia.com/gpu.compute.major=%d\nnvidia.com/gpu.compute.minor=%d\n",
                                    g->cc_major, g->cc_minor);
        }
        if (t->driver_version[0]) {
                unsigned a = 0, b = 0, c = 0;
                int n = sscanf(t->driver_version, "%6u.%6u.%6u", &a, &b, &c); /* widths: no overflow */
                labels_sanitize(t->driver_version, v, sizeof v);
                if (n >= 1)
                        metrics_text_printf(&x, "nvidia.com/cuda.driver-version.major=%u\n", a);
                if (n >= 2)
                        metrics_text_printf(&x, "nvidia.com/cuda.driver-version.minor=%u\n", b);
                if (n >= 3)
                        metrics_text_printf(&x, "nvidia.com/cuda.driver-version.revision=%u\n", c);
                if (v[0])
                        metrics_text_printf(&x, "nvidia.com/cuda.driver-version.full=%s\n", v);
        }
        if (t->cuda_version > 0) {
                int major = t->cuda_version / 1000, minor = (t->cuda_version % 1000) / 10;
                metrics_text_printf(&x, "nvidia.com/cuda.runtime-version.major=%d\n", major);
                metrics_text_printf(&x, "nvidia.com/cuda.runtime-version.minor=%d\n", minor);
                metrics_text_printf(&x, "nvidia.com/cuda.runtime-version.full=%d.%d\n", major, minor);
        }
        return metrics_text_finish(&x, ret, ret_len);
}

/* The attributes of one MIG device under PREFIX ("nvidia.com/mig-1g.10gb." or "nvidia.com/gpu."). */
static void mig_attributes(struct metrics_text *x, const char *prefix, const struct mig_device *d) {
        metrics_text_printf(x, "%smemory=%llu\n", prefix, (unsigned long long)d->memory_mib);
        metrics_text_printf(x, "%smultiprocessors=%u\n", prefix, d->sms);
        metrics_text_printf(x, "%sslices.gi=%u\n%sslices.ci=%u\n", prefix, d->gi_slices, prefix, d->ci_slices);
        metrics_text_printf(x, "%sengines.copy=%u\n%sengines.decoder=%u\n", prefix, d->copy_engines, prefix,
                            d->decoders);
        metrics_text_printf(x, "%sengines.encoder=%u\n%sengines.jpeg=%u\n%sengines.ofa=%u\n", prefix, d->encoders,
                            prefix, d->jpegs, prefix, d->ofas);
}

/* PREFIXproduct=<the GPUs' model>-MIG-<profile>, sanitised (nothing when no GPU has a model). */
static void mig_product(struct metrics_text *x, const char *prefix, const struct topo *t, const char *profile) {
        const struct topo_gpu *g = NULL;
        for (unsigned i = 0; i < t->n_gpus && !g; i++)
                if (t->gpu[i].state == TOPO_GPU_OK && t->gpu[i].name[0])
                        g = &t->gpu[i];
        char v[64], prod[160];
        snprintf(prod, sizeof prod, "%s-MIG-%s", g ? g->name : "", profile);
        labels_sanitize(prod, v, sizeof v);
        if (g && v[0])
                metrics_text_printf(x, "%sproduct=%s\n", prefix, v);
}

/* The first MIG device of `profile` on the node (NULL none), and how many there are. */
static const struct mig_device *mig_first(const struct mig_node *m, const char *profile, unsigned *ret_count) {
        const struct mig_device *first = NULL;
        unsigned n = 0;
        for (unsigned g = 0; g < m->n_gpus; g++)
                for (unsigned k = 0; m->gpu[g].mode == 1 && k < m->gpu[g].n_devices; k++)
                        if (streq(m->gpu[g].dev[k].profile, profile)) {
                                first = first ? first : &m->gpu[g].dev[k];
                                n++;
                        }
        *ret_count = n;
        return first;
}

/* lint: long — the MIG labels in GFD's order: capability, strategy, the single strategy's GPU labels, then each
 * profile's count and attributes once (the first device of a profile stands for all of them). */
int labels_format_mig(const struct topo *t, const struct mig_node *m, const char *strategy, const char *single_profile,
                      char **ret, size_t *ret_len) {
        struct metrics_text x = { 0 };
        bool capable = false;
        for (unsigned g = 0; m && g < m->n_gpus; g++)
                capable = capable || m->gpu[g].mode >= 0;
        if (m)
                metrics_text_printf(&x, "nvidia.com/mig.capable=%s\n", capable ? "true" : "false");
        if (strategy && strategy[0])
                metrics_text_printf(&x, "nvidia.com/mig.strategy=%s\n", strategy);
        unsigned count = 0;
        const struct mig_device *sd = m && single_profile ? mig_first(m, single_profile, &count) : NULL;
        if (single_profile) {
                mig_product(&x, "nvidia.com/gpu.", t, sd ? single_profile : "INVALID");
                metrics_text_printf(&x, "nvidia.com/gpu.count=%u\n", sd ? count : 0);
                if (sd)
                        mig_attributes(&x, "nvidia.com/gpu.", sd);
                else
                        metrics_text_printf(&x, "nvidia.com/gpu.memory=0\n");
        }
        for (unsigned g = 0; m && g < m->n_gpus; g++) {
                for (unsigned k = 0; m->gpu[g].mode == 1 && k < m->gpu[g].n_devices; k++) {
                        const struct mig_device *d = &m->gpu[g].dev[k];
                        if (mig_first(m, d->profile, &count) != d)
                                continue; /* a profile once */
                        char prefix[MIG_PROFILE_NAME_MAX + 32];
                        snprintf(prefix, sizeof prefix, "nvidia.com/mig-%s.", d->profile);
                        for (char *c = prefix; *c; c++)
                                *c = *c == '+' ? '.' : *c;
                        metrics_text_printf(&x, "%scount=%u\n%sreplicas=1\n", prefix, count, prefix);
                        mig_product(&x, prefix, t, d->profile);
                        mig_attributes(&x, prefix, d);
                }
        }
        return metrics_text_finish(&x, ret, ret_len);
}

int labels_write_atomic(const char *path, const char *data, size_t len) {
        /* readable by NFD, which may run as another user */
        return atomic_file_write(path, data, len, 0644, 0);
}
