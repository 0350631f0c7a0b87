/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cluster/resource — the request classifier (cluster.h): which resource names ask for GPUs, what
 * each asks, and the small name tables of the codec (policies, sources, flags). Pure. Must never
 * learn a resource name anywhere but in the table below (and the one override of cluster_units).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cluster/cluster.h"
#include "util/util.h"

void cluster_units_default(struct cluster_units *ret) {
        *ret = (struct cluster_units){ .gpuslice_mib = 256, .tencent_mib = 256, .aliyun_mib = 1024 };
}

int cluster_units_set(struct cluster_units *u, const char *arg) {
        const char *eq = strchr(arg, '=');
        char name[128];
        unsigned v;
        if (!eq || (size_t)(eq - arg) >= sizeof name || parse_uint(eq + 1, 1u << 20, &v) < 0 || v == 0)
                return -EINVAL;
        strnscpy(name, sizeof name, arg, (size_t)(eq - arg));
        switch (cluster_resource_classify(name, u, NULL, NULL)) {
                case CLUSTER_NAME_GPUSLICE_MEMORY: u->gpuslice_mib = v; return 0;
                case CLUSTER_NAME_TENCENT_MEMORY: u->tencent_mib = v; return 0;
                case CLUSTER_NAME_ALIYUN_MEMORY: u->aliyun_mib = v; return 0;
                default: return -EINVAL;
        }
}

static const struct {
        const char *name;
        enum cluster_res kind;
        enum cluster_profile profile;
} names[_CLUSTER_NAME_MAX] = {
        [CLUSTER_NAME_NVIDIA_GPU] = { "nvidia.com/gpu", CLUSTER_RES_WHOLE, CLUSTER_PROFILE_NONE },
        [CLUSTER_NAME_WHOLE_OVERRIDE] = { NULL, CLUSTER_RES_WHOLE, CLUSTER_PROFILE_NONE },
        [CLUSTER_NAME_GPUSLICE_CORE] = { "gpuslice.io/gpu-core", CLUSTER_RES_CORE, CLUSTER_PROFILE_GPUSLICE },
        [CLUSTER_NAME_GPUSLICE_MEMORY] = { "gpuslice.io/gpu-memory", CLUSTER_RES_MEM, CLUSTER_PROFILE_GPUSLICE },
        [CLUSTER_NAME_TENCENT_CORE] = { "tencent.com/vcuda-core", CLUSTER_RES_CORE, CLUSTER_PROFILE_TENCENT },
        [CLUSTER_NAME_TENCENT_MEMORY] = { "tencent.com/vcuda-memory", CLUSTER_RES_MEM, CLUSTER_PROFILE_TENCENT },
        [CLUSTER_NAME_ALIYUN_MEMORY] = { "aliyun.com/gpu-mem", CLUSTER_RES_MEM, CLUSTER_PROFILE_ALIYUN },
};

enum cluster_res_name cluster_resource_classify(const char *name, const struct cluster_units *u,
                                                enum cluster_res *ret_kind, enum cluster_profile *ret_profile) {
        enum cluster_res_name found = CLUSTER_NAME_NONE;
        if (!name)
                return found;
        for (unsigned i = 1; i < _CLUSTER_NAME_MAX && !found; i++) {
                const char *n = cluster_resource_name((enum cluster_res_name)i, u);
                if (n[0] && streq(n, name))
                        found = (enum cluster_res_name)i;
        }
        if (found) {
                if (ret_kind)
                        *ret_kind = names[found].kind;
                if (ret_profile)
                        *ret_profile = names[found].profile;
        }
        return found;
}

const char *cluster_resource_name(enum cluster_res_name n, const struct cluster_units *u) {
        if (n == CLUSTER_NAME_WHOLE_OVERRIDE)
                return u && u->whole_name ? u->whole_name : "";
        return n > CLUSTER_NAME_NONE && n < _CLUSTER_NAME_MAX ? names[n].name : "";
}

bool cluster_resource_is_gpu(const char *name) {
        return streq(name, "nvidia.com/gpu") || startswith(name, CLUSTER_MIG_PREFIX) ||
               startswith(name, "gpuslice.io/") || startswith(name, "tencent.com/vcuda-") ||
               startswith(name, "aliyun.com/gpu-");
}

bool cluster_annotation_is_gpu(const char *key) {
        return startswith(key, "gpuslice.io/") || startswith(key, "ALIYUN_COM_GPU_MEM_") ||
               startswith(key, "tencent.com/");
}

static const char *const policy_names[_CLUSTER_POLICY_MAX] = {
        [CLUSTER_POLICY_BINPACK] = "binpack",
        [CLUSTER_POLICY_SPREAD] = "spread",
        [CLUSTER_POLICY_RANDOM] = "random",
        [CLUSTER_POLICY_DOTPROD] = "dotprod",
        [CLUSTER_POLICY_GPUCLUSTERING] = "gpuclustering",
        [CLUSTER_POLICY_GPUPACKING] = "gpupacking",
        [CLUSTER_POLICY_BESTFIT] = "bestfit",
        [CLUSTER_POLICY_FGD] = "fgd",
        [CLUSTER_POLICY_FRAG] = "frag",
};

int cluster_policy_from_name(const char *s, enum cluster_policy *ret) {
        for (unsigned i = 0; s && i < _CLUSTER_POLICY_MAX; i++)
                if (streq(s, policy_names[i])) {
                        *ret = (enum cluster_policy)i;
                        return 0;
                }
        return -EINVAL;
}

const char *cluster_policy_name(enum cluster_policy p) {
        return (unsigned)p < _CLUSTER_POLICY_MAX ? policy_names[p] : "binpack";
}

const char *cluster_source_name(enum cluster_source s) {
        switch (s) {
                case CLUSTER_SOURCE_GPUSLICE: return "gpuslice";
                case CLUSTER_SOURCE_GPUSHARE: return "gpushare";
                case CLUSTER_SOURCE_GPU_MANAGER: return "gpu-manager";
                case CLUSTER_SOURCE_AGENT: return "agent";
                case CLUSTER_SOURCE_NONE: break;
        }
        return "";
}

const char *cluster_flag_key(unsigned flag) {
        switch (flag) {
                case CLUSTER_FLAG_GPUSLICE: return CLUSTER_ANN_ASSIGNED;
                case CLUSTER_FLAG_GPU_MANAGER: return CLUSTER_ANN_TENCENT_ASSIGNED;
                case CLUSTER_FLAG_GPUSHARE: return CLUSTER_ANN_ALIYUN_ASSIGNED;
                default: return "";
        }
}

/* ---- quantities ---- */

/* The suffix's factor as a fraction num/den; false when it is not a suffix. */
static bool quantity_suffix(const char *s, unsigned __int128 *num, unsigned __int128 *den) {
        static const struct {
                const char *sfx;
                unsigned bin; /* 2^(10 bin) */
                int dec;      /* 10^dec */
        } sfx[] = { { "", 0, 0 },   { "n", 0, -9 }, { "u", 0, -6 }, { "m", 0, -3 }, { "k", 0, 3 },  { "M", 0, 6 },
                    { "G", 0, 9 },  { "T", 0, 12 }, { "P", 0, 15 }, { "E", 0, 18 }, { "Ki", 1, 0 }, { "Mi", 2, 0 },
                    { "Gi", 3, 0 }, { "Ti", 4, 0 }, { "Pi", 5, 0 }, { "Ei", 6, 0 } };
        int dec = 0;
        unsigned bin = 0;
        bool found = false;
        for (size_t k = 0; k < ELEMENTSOF(sfx) && !found; k++)
                if (streq(s, sfx[k].sfx)) {
                        bin = sfx[k].bin;
                        dec = sfx[k].dec;
                        found = true;
                }
        if (!found && (s[0] == 'e' || s[0] == 'E')) {
                const char *p = s + 1;
                bool neg = *p == '-';
                if (*p == '-' || *p == '+')
                        p++;
                if (!(*p >= '0' && *p <= '9') || (p[1] && !(p[1] >= '0' && p[1] <= '9')) || (p[1] && p[2]))
                        return false; /* one or two digits: beyond 10^±18 nothing fits anyway */
                dec = (p[0] - '0') * (p[1] ? 10 : 1) + (p[1] ? p[1] - '0' : 0);
                dec = neg ? -dec : dec;
                if (dec > 18 || dec < -18)
                        return false;
                found = true;
        }
        if (!found)
                return false;
        *num = (unsigned __int128)1 << (10 * bin);
        *den = 1;
        for (; dec > 0; dec--)
                *num *= 10;
        for (; dec < 0; dec++)
                *den *= 10;
        return true;
}

int cluster_quantity_milli(const char *s, uint64_t *ret) {
        if (!s)
                return -EINVAL;
        size_t i = 0;
        if (s[i] == '+')
                i++;
        unsigned __int128 mant = 0, scale = 1;
        unsigned digits = 0, kept = 0;
        bool dot = false;
        for (;; i++) {
                if (s[i] == '.' && !dot) {
                        dot = true;
                        continue;
                }
                if (!(s[i] >= '0' && s[i] <= '9'))
                        break;
                digits++;
                if (!kept && s[i] == '0' && !dot)
                        continue; /* leading zeros */
                if (kept == 19) {
                        if (!dot)
                                return -ERANGE; /* 10^19 and more */
                        continue;               /* fraction digits past 19 significant ones are dropped */
                }
                mant = mant * 10 + (unsigned)(s[i] - '0');
                kept++;
                if (dot)
                        scale *= 10;
        }
        if (!digits)
                return -EINVAL;
        unsigned __int128 num, den;
        if (!quantity_suffix(s + i, &num, &den))
                return -EINVAL;
        /* mant < 10^19 < 2^64, num <= 2^60 or 10^18: the product stays under 2^128 */
        if (mant && num > ((unsigned __int128)-1 / 1000) / mant)
                return -ERANGE;
        unsigned __int128 v = mant * num * 1000, d = den * scale;
        v = v / d + (v % d != 0);
        if (v > UINT64_MAX)
                return -ERANGE;
        *ret = (uint64_t)v;
        return 0;
}

/* ---- CPU and memory, as kube-scheduler counts them ---- */

#define CPU_MILLI_MAX (1ULL << 40)    /* milli-cores */
#define MEM_BYTES_MAX (1ULL << 62)    /* bytes */
#define NODE_MEM_MIB_MAX (1ULL << 44) /* MiB */

/* obj[key] as a quantity in thousandths (absent or null: 0); field names it in the error. */
static int quantity(const json_t *obj, const char *key, const char *field, uint64_t *ret, struct gs_error *err) {
        *ret = 0;
        json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
        if (!v || json_is_null(v))
                return 0;
        const char *s = json_string_value(v);
        if (!s || cluster_quantity_milli(s, ret) < 0)
                return gs_error_set(err, -EINVAL, "%s%s: %s%.40s%s is not a quantity", field, key, s ? "'" : "",
                                    s ? s : "a non-string", s ? "'" : "");
        return 0;
}

/* A container list's CPU (milli) and memory (bytes) requests (a limit where no request is set: what the API
 * server's defaulting makes the request), summed or (init) the largest; each and the sum at most 2^40 milli-cores and
 * 2^62 bytes (no overflow below). */
static int containers_requests(const json_t *list, bool init, uint64_t *cpu, uint64_t *mem, struct gs_error *err) {
        const char *what = init ? "initContainers" : "containers";
        *cpu = *mem = 0;
        if (list && !json_is_null(list) && !json_is_array(list))
                return gs_error_set(err, -EINVAL, "spec.%s is not an array", what);
        size_t i;
        const json_t *c;
        json_array_foreach(list, i, c) {
                const json_t *res = json_is_object(c) ? json_object_get(c, "resources") : NULL;
                const json_t *rq = json_is_object(res) ? json_object_get(res, "requests") : NULL;
                const json_t *lim = json_is_object(res) ? json_object_get(res, "limits") : NULL;
                uint64_t v[2];
                static const char *const keys[2] = { "cpu", "memory" };
                for (unsigned k = 0; k < 2; k++) {
                        const json_t *from = json_is_object(rq) && json_object_get(rq, keys[k]) ? rq : lim;
                        char field[96];
                        snprintf(field, sizeof field, "spec.%s[%zu].resources.%s.", what, i,
                                 from == rq ? "requests" : "limits");
                        if (quantity(from, keys[k], field, &v[k], err) < 0)
                                return -EINVAL;
                }
                v[1] /= 1000;
                *cpu = init ? MAX(*cpu, v[0]) : *cpu + v[0];
                *mem = init ? MAX(*mem, v[1]) : *mem + v[1];
                if (v[0] > CPU_MILLI_MAX || v[1] > MEM_BYTES_MAX || *cpu > CPU_MILLI_MAX || *mem > MEM_BYTES_MAX)
                        return gs_error_set(err, -EINVAL, "spec.%s[%zu].resources: cpu or memory out of range", what,
                                            i);
        }
        return 0;
}

int cluster_pod_requests(const json_t *spec, uint64_t *ret_cpu_milli, uint64_t *ret_mem_mib, struct gs_error *err) {
        uint64_t cpu, mem, icpu = 0, imem = 0, ocpu = 0, omem = 0;
        *ret_cpu_milli = *ret_mem_mib = 0;
        int r = containers_requests(json_object_get(spec, "containers"), false, &cpu, &mem, err);
        if (r == 0)
                r = containers_requests(json_object_get(spec, "initContainers"), true, &icpu, &imem, err);
        const json_t *over = json_object_get(spec, "overhead");
        if (r == 0)
                r = quantity(over, "cpu", "spec.overhead.", &ocpu, err);
        if (r == 0)
                r = quantity(over, "memory", "spec.overhead.", &omem, err);
        if (r < 0)
                return r;
        omem /= 1000;
        if (ocpu > CPU_MILLI_MAX || omem > MEM_BYTES_MAX)
                return gs_error_set(err, -EINVAL, "spec.overhead: cpu or memory out of range");
        *ret_cpu_milli = MAX(cpu, icpu) + ocpu;
        uint64_t bytes = MAX(mem, imem) + omem;
        *ret_mem_mib = (bytes + (1u << 20) - 1) >> 20;
        return 0;
}

int cluster_node_allocatable(const json_t *node_json, uint64_t *ret_cpu_milli, uint64_t *ret_mem_mib,
                             struct gs_error *err) {
        const json_t *status = json_object_get(node_json, "status");
        const json_t *alloc = json_is_object(status) ? json_object_get(status, "allocatable") : NULL;
        uint64_t cpu, mem;
        *ret_cpu_milli = *ret_mem_mib = 0;
        int r = quantity(alloc, "cpu", "status.allocatable.", &cpu, err);
        if (r == 0)
                r = quantity(alloc, "memory", "status.allocatable.", &mem, err);
        if (r < 0)
                return r;
        mem = mem / 1000 / (1u << 20); /* thousandths of a byte → MiB, rounded down */
        if (cpu > CPU_MILLI_MAX || mem > NODE_MEM_MIB_MAX)
                return gs_error_set(err, -EINVAL,
                                    "status.allocatable: cpu or memory out of range (at most 2^30 "
                                    "cores, 2^44 MiB)");
        *ret_cpu_milli = cpu;
        *ret_mem_mib = mem;
        return 0;
}
