/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config — the node agent's settings: defaults, an INI-style file, command-line flags, and a dump
 * in the same file format. Pure library code: it never logs, never exits, never touches global
 * state, and never modifies a caller's config unless the whole operation succeeded (so a SIGHUP
 * reload either takes effect completely or not at all).
 *
 * Precedence, lowest first: built-in defaults < config file < command-line flags.
 *
 * Every option has one dotted key ("health.quiet-period"), used in the file as `quiet-period`
 * inside `[health]`, and one long flag ("--health-quiet-period"). config_set() is the single place
 * that validates a key/value pair; the file parser and the flag parser both go through it.
 *
 * The format is documented in docs/configuration.md.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/error.h"

#define CONFIG_PATH_MAX 4096      /* includes the terminating NUL */
#define CONFIG_NAME_MAX 320       /* resource names: DNS prefix (253) + '/' + name (63) + NUL */
#define CONFIG_ADDRESS_MAX 256    /* HOST:PORT */
#define CONFIG_NODE_NAME_MAX 254  /* a Node's name: a DNS subdomain (253) + NUL */
#define CONFIG_XID_MAX 64         /* entries in health.xid-ignore */
#define CONFIG_LINE_MAX 8191      /* longest accepted line of a config file, in bytes */
#define CONFIG_FILE_MAX (1 << 20) /* largest accepted config file, in bytes */
#define CONFIG_DEFAULT_PATH "/etc/gpuslice/node.conf"

enum config_profile {
        CONFIG_PROFILE_DEFAULT = 0, /* nvidia.com/gpu, whole GPUs only */
        CONFIG_PROFILE_GPUSLICE,    /* + gpuslice.io/gpu-core, gpuslice.io/gpu-memory */
        CONFIG_PROFILE_TENCENT,     /* + tencent.com/vcuda-core, tencent.com/vcuda-memory */
        CONFIG_PROFILE_ALIYUN,      /* + aliyun.com/gpu-mem */
        _CONFIG_PROFILE_MAX,
};

enum config_device_id_strategy {
        CONFIG_DEVICE_ID_UUID = 0, /* NVIDIA_VISIBLE_DEVICES=GPU-6a1f… */
        CONFIG_DEVICE_ID_INDEX,    /* NVIDIA_VISIBLE_DEVICES=0,1 */
        _CONFIG_DEVICE_ID_MAX,
};

/* How MIG devices are served (NVIDIA's device plugin's names, docs/mig.md). */
enum config_mig_strategy {
        CONFIG_MIG_NONE = 0, /* MIG ignored: GPUs served whole, as without MIG */
        CONFIG_MIG_SINGLE,   /* every GPU in MIG mode with one profile: nvidia.com/gpu per MIG device */
        CONFIG_MIG_MIXED,    /* nvidia.com/mig-<profile> per profile; MIG-mode GPUs never served whole */
        _CONFIG_MIG_MAX,
};

/* Bit mask: any combination, at least one. */
enum config_device_list {
        CONFIG_DEVICE_LIST_ENVVAR = 1 << 0, /* NVIDIA_VISIBLE_DEVICES + device specs */
        CONFIG_DEVICE_LIST_CDI = 1 << 1,    /* cdi_devices in the Allocate response */
};

enum config_alloc_policy {
        CONFIG_POLICY_BINPACK = 0, /* fill the fullest GPU that fits first */
        CONFIG_POLICY_SPREAD,      /* prefer the emptiest GPU */
        CONFIG_POLICY_FGD,         /* the extender's fgd: the GPU that fragments the node least (docs/scheduler.md) */
        CONFIG_POLICY_FRAG,        /* the extender's frag (ours) */
        _CONFIG_POLICY_MAX,
};

/* Mirrors enum log_level of util/log.h (same order, same names). */
enum config_log_level {
        CONFIG_LOG_ERROR = 0,
        CONFIG_LOG_WARN,
        CONFIG_LOG_INFO,
        CONFIG_LOG_DEBUG,
        _CONFIG_LOG_MAX,
};

/* Compatibility metric families, bit mask (issue 4). */
enum config_metrics_compat {
        CONFIG_COMPAT_POD_GPU_MEM = 1 << 0, /* pod_used_gpu_mem_MB{pod_name,pod_namespace,…} */
        CONFIG_COMPAT_GPU_MANAGER = 1 << 1, /* gpu-manager's container_gpu_* */
};

/*
 * Every setting of the agent. A plain value: copy it with `=`, nothing to free. Strings are
 * NUL-terminated; an empty string means "off"/"not set" where the comment says so.
 */
struct gpuslice_config {
        /* [agent] */
        char state_dir[CONFIG_PATH_MAX]; /* agent.state-dir        /var/lib/gpuslice */
        enum config_log_level log_level; /* agent.log-level        info */

        /* [kubelet] */
        char plugin_dir[CONFIG_PATH_MAX];           /* kubelet.plugin-dir     /var/lib/kubelet/device-plugins */
        char pod_resources_socket[CONFIG_PATH_MAX]; /* kubelet.pod-resources-socket
                                                       /var/lib/kubelet/pod-resources/kubelet.sock */

        /* [nvml] */
        char nvml_library[CONFIG_PATH_MAX]; /* nvml.library           libnvidia-ml.so.1 (soname or path) */

        /* [resources] */
        enum config_profile profile;                      /* resources.profile      default */
        char whole_gpu_resource[CONFIG_NAME_MAX];         /* resources.whole-gpu-name  "" = nvidia.com/gpu */
        enum config_mig_strategy mig_strategy;            /* resources.mig-strategy none */
        char mig_layouts[CONFIG_PATH_MAX];                /* resources.mig-layouts  "" = off (docs/mig.md) */
        char nvidia_config[CONFIG_PATH_MAX];              /* resources.nvidia-config  "" = off (docs/sharing.md) */
        char nvidia_config_default[CONFIG_NODE_NAME_MAX]; /* resources.nvidia-config-default  "" */
        char mps_control[CONFIG_PATH_MAX];                /* resources.mps-control  nvidia-cuda-mps-control */

        /* [devices] */
        enum config_device_id_strategy device_id_strategy; /* devices.id-strategy    uuid */
        unsigned device_list_strategy;    /* devices.list-strategy  envvar (enum config_device_list bits) */
        char cdi_vendor[CONFIG_NAME_MAX]; /* devices.cdi-kind       gpuslice.io/gpu (vendor part) */
        char cdi_class[CONFIG_NAME_MAX];  /*                        (class part) */
        char dev_root[CONFIG_PATH_MAX];   /* devices.dev-root       / (host root holding /dev) */
        /* devices.host-dev-root "" (= dev_root), devices.driver-root /, devices.host-driver-root "" (= driver_root),
         * devices.hook-path "" (= /proc/self/exe): the agent's and the host's views, for CDI specs */
        char host_dev_root[CONFIG_PATH_MAX], driver_root[CONFIG_PATH_MAX], host_driver_root[CONFIG_PATH_MAX];
        char hook_path[CONFIG_PATH_MAX];

        /* [health] */
        bool health_disabled;                /* health.disabled        false */
        unsigned xid_ignore[CONFIG_XID_MAX]; /* health.xid-ignore      13,31,43,45,68,109 */
        size_t n_xid_ignore;
        uint64_t health_quiet_period_sec; /* health.quiet-period    60s */

        /* [metrics] */
        char metrics_address[CONFIG_ADDRESS_MAX]; /* metrics.address        127.0.0.1:9400, "" = off */
        unsigned metrics_compat;                  /* metrics.compat         "" (enum config_metrics_compat bits) */

        /* [monitor] */
        char proc_root[CONFIG_PATH_MAX];         /* monitor.proc-root      /proc */
        char cri_socket[CONFIG_PATH_MAX];        /* monitor.cri-socket     /run/containerd/containerd.sock, "" = off */
        char engine_url[CONFIG_PATH_MAX];        /* monitor.engine         "" = off; unix:///run/podman/podman.sock */
        uint64_t sample_interval_sec;            /* monitor.sample-interval  5s */
        char nfd_features_file[CONFIG_PATH_MAX]; /* monitor.nfd-features-file  "" = off */

        /* [sharing] — fractional GPUs (issue 5) */
        enum config_alloc_policy alloc_policy; /* sharing.policy         frag */
        uint64_t memory_unit_bytes;            /* sharing.memory-unit    0 = the profile's unit */
        char interposer_library
                [CONFIG_PATH_MAX]; /* sharing.interposer     /usr/local/lib/gpuslice/libgpuslice-cuda.so */
        bool limit_when_alone;     /* sharing.limit-when-alone  true */

        /* [kube] — publishing the node to the API server (docs/cluster.md) */
        char kubeconfig[CONFIG_PATH_MAX];     /* kube.kubeconfig        "" = in-cluster when in a pod, else off */
        char node_name[CONFIG_NODE_NAME_MAX]; /* kube.node-name   "" = $NODE_NAME, else the host name */

        /* [dra] — Dynamic Resource Allocation (docs/dra.md) */
        bool dra_enabled;                       /* dra.enabled            false (--dra) */
        bool dra_device_plugin;                 /* dra.device-plugin      false: DRA alone */
        char dra_driver[64];                    /* dra.driver-name        gpu.gpuslice.io */
        char dra_registry_dir[CONFIG_PATH_MAX]; /* dra.registry-dir       /var/lib/kubelet/plugins_registry */
        char dra_plugin_dir[CONFIG_PATH_MAX];   /* dra.plugin-dir         /var/lib/kubelet/plugins */
        char dra_cdi_dir[CONFIG_PATH_MAX];      /* dra.cdi-dir            /var/run/cdi */
        bool dra_sharing;                       /* dra.sharing            true */
        char dra_mig_dynamic[256];              /* dra.mig-dynamic        "" (none; "all" or "0,2") */
};

/* What a resource profile advertises. Names of absent resources are NULL. */
struct config_profile_info {
        const char *name;            /* "default", "gpuslice", "tencent", "aliyun" */
        const char *core_resource;   /* percent of one GPU, 100 = whole GPU; NULL if none */
        const char *memory_resource; /* units of GPU memory; NULL if none */
        uint64_t memory_unit_bytes;  /* size of one memory unit (0 if no memory resource) */
};

/* One option, for --help output and flag parsing. */
struct config_option {
        const char *key;     /* "health.quiet-period" */
        const char *flag;    /* "health-quiet-period" (without the leading "--") */
        const char *metavar; /* "DURATION"; NULL for a boolean flag that may be given without a value */
        const char *help;    /* one line */
};

/* Fill in every default documented above. Never fails. */
void config_init_defaults(struct gpuslice_config *cfg);

/* Validate and apply one setting. key is the dotted key ("health.quiet-period"). On failure cfg is
 * unchanged, err holds "KEY: what was expected, got 'VALUE'", and the return is -EINVAL (bad value)
 * or -ENOKEY (unknown key). err may be NULL. */
int config_set(struct gpuslice_config *cfg, const char *key, const char *value, struct gs_error *err);

/* Parse config file text (need not be NUL-terminated; len bytes) on top of *cfg. cfg is in/out and
 * written only on success; on failure err says "line N: KEY: …". -EINVAL for any syntax or value
 * error, -ENOKEY for an unknown section or key. */
int config_parse_text(const char *text, size_t len, struct gpuslice_config *cfg, struct gs_error *err);

/* Read a regular file (at most CONFIG_FILE_MAX bytes) and parse it on top of *cfg; written only on
 * success. -errno when unreadable (err says "PATH: strerror"), else as config_parse_text (err is
 * prefixed with "PATH: "). */
int config_load_file(const char *path, struct gpuslice_config *cfg, struct gs_error *err);

/* Write the effective config as a complete config file; parsing the output on top of any config
 * gives back an identical config. Returns 0 or -EIO. */
int config_dump(const struct gpuslice_config *cfg, FILE *f);

/* Every option, in documentation order; *ret_n gets the count. */
const struct config_option *config_options(size_t *ret_n);
/* Lookup by dotted key or by flag name (with or without leading "--"); NULL if unknown. */
const struct config_option *config_option_by_key(const char *key);
const struct config_option *config_option_by_flag(const char *flag);

/* The profile table; NULL if out of range. */
const struct config_profile_info *config_profile_info(enum config_profile p);
/* The whole-GPU resource name in effect: the override, or "nvidia.com/gpu". */
const char *config_whole_gpu_resource(const struct gpuslice_config *cfg);
/* The memory unit in effect: sharing.memory-unit if set, else the profile's (0 = no memory resource). */
uint64_t config_memory_unit(const struct gpuslice_config *cfg);

/* Names of enum values, for logs and dumps. */
const char *config_profile_name(enum config_profile p);
const char *config_log_level_name(enum config_log_level l);
const char *config_mig_strategy_name(enum config_mig_strategy s); /* "none", "single", "mixed" */

/*
 * Command-line arguments of `gpuslice node`, kept so that a reload re-applies the same flags on top
 * of the re-read file. Caller-owned; release with config_args_done().
 */
struct config_override {
        const char *key; /* static string from the option table */
        char *value;     /* owned copy */
};
struct config_args {
        char *config_path;                 /* --config FILE / -c FILE; NULL = none given */
        bool config_path_given;            /* --config was on the command line */
        bool help, version;                /* --help / -h, --version */
        struct config_override *overrides; /* in command-line order; the last one of a key wins */
        size_t n_overrides;
};

/*
 * Parse argv[first..argc) into *ret: `--flag VALUE`, `--flag=VALUE`, boolean flags also bare
 * (`--health-disabled` = true), `--config FILE`, `-c FILE`, `--help`, `-h`, `--version`. Each
 * value is validated now (against a scratch config), so a bad flag fails at start-up with a
 * message naming the flag. Unknown options and positional arguments are errors (-EINVAL).
 * *ret is written only on success.
 */
int config_args_parse(int argc, char *const *argv, int first, struct config_args *ret, struct gs_error *err);
void config_args_done(struct config_args *args);

/*
 * defaults → file → flags, into *ret only on success. The file is args->config_path if given,
 * else default_path if it exists (NULL: none). A config file named with --config must exist; a
 * missing default file is not an error. Use this at start and again on SIGHUP: on failure keep
 * running with the old config and log err.
 */
int config_build(const struct config_args *args, const char *default_path, struct gpuslice_config *ret,
                 struct gs_error *err);
