/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cluster/resource — the request classifier (cluster.h): which resource names ask for GPUs, what
 * each asks, and the small name tables of the codec (policies, sources, flags). Pure. Must never
 * learn a resource name anywhere but in the table below (and the one override of cluster_units).
 */
#include <errno.h>
#include <string.h>

#include "cluster/cluster.h"
#include "util/util.h"

void cluster_units_default(struct cluster_units *ret) {
        *ret = (struct cluster_units){ .gpuslice_mib = 256, .tencent_mib = 256, .aliyun_mib = 1024 };
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
