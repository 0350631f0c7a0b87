/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config — option table, value validation, the INI-style file parser, the dump and the flag parser.
 * It must never log, exit, keep global mutable state, or leave a caller's config half-updated:
 * every entry point works on a copy and writes back only after complete success.
 */
#include "config/config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "util/error.h"
#include "util/util.h"

enum opt_type {
        T_PATH,     /* absolute path, required */
        T_PATH_OPT, /* absolute path or "" */
        T_LIBRARY,  /* soname (no '/') or absolute path, required */
        T_ENUM,     /* one name of opt->names */
        T_FLAGS,    /* comma-separated names of opt->names, bit i = names[i] */
        T_BOOL,
        T_DURATION,  /* seconds, written 30s / 2m / 1h30m */
        T_XIDS,      /* comma-separated Xid numbers */
        T_SIZE,      /* bytes, written 256MiB */
        T_ADDRESS,   /* HOST:PORT or "" */
        T_URL,       /* unix:///path, http://host:port, tcp://host:port, or "" */
        T_NODE_NAME, /* a Kubernetes object name (DNS subdomain) or "" */
        T_RESOURCE,  /* Kubernetes extended resource name or "" */
        T_CDI_KIND,  /* vendor/class */
        T_DRIVER,    /* DRA driver name: a lowercase DNS subdomain of at most 63 characters */
        T_GPU_LIST,  /* "", "all" or comma-separated GPU indices */
};

struct opt_def {
        enum opt_type type;
        size_t offset, size;
        const char *const *names; /* T_ENUM / T_FLAGS */
        size_t n_names;
        uint64_t min, max;  /* T_DURATION / T_SIZE (T_FLAGS: min = at least one bit) */
        const char *expect; /* what a valid value looks like, for error messages */
};

static const char *const profile_names[] = { "default", "gpuslice", "tencent", "aliyun" };
static const char *const id_strategy_names[] = { "uuid", "index" };
static const char *const mig_strategy_names[] = { "none", "single", "mixed" };
static const char *const list_strategy_names[] = { "envvar", "cdi" };
static const char *const policy_names[] = { "binpack", "spread", "fgd", "frag" };
static const char *const log_level_names[] = { "error", "warn", "info", "debug" };
static const char *const compat_names[] = { "pod-used-gpu-mem", "gpu-manager" };

#define NAMES(a) (a), ELEMENTSOF(a)
#define NO_NAMES NULL, 0
#define FIELD(f) offsetof(struct gpuslice_config, f), sizeof(((struct gpuslice_config *)0)->f)
#define DAY ((uint64_t)24 * 3600)

/* X(key, flag, metavar, help, type, field, names, min, max, expect) — documentation order. */
#define CONFIG_OPTION_LIST(X)                                                                                          \
        X("agent.state-dir", "state-dir", "DIR", "directory of the agent's state file", T_PATH, FIELD(state_dir),      \
          NO_NAMES, 0, 0, "an absolute path")                                                                          \
        X("agent.log-level", "log-level", "LEVEL", "error, warn, info or debug", T_ENUM, FIELD(log_level),             \
          NAMES(log_level_names), 0, 0, "one of error, warn, info, debug")                                             \
        X("kubelet.plugin-dir", "plugin-dir", "DIR", "kubelet device plugin directory", T_PATH, FIELD(plugin_dir),     \
          NO_NAMES, 0, 0, "an absolute path")                                                                          \
        X("kubelet.pod-resources-socket", "pod-resources-socket", "PATH", "kubelet PodResources API socket", T_PATH,   \
          FIELD(pod_resources_socket), NO_NAMES, 0, 0, "an absolute path")                                             \
        X("nvml.library", "nvml-library", "LIB", "NVML library to dlopen (soname or absolute path)", T_LIBRARY,        \
          FIELD(nvml_library), NO_NAMES, 0, 0, "a library soname like libnvidia-ml.so.1 or an absolute path")          \
        X("resources.profile", "resource-profile", "PROFILE", "resource names: default, gpuslice, tencent or aliyun",  \
          T_ENUM, FIELD(profile), NAMES(profile_names), 0, 0, "one of default, gpuslice, tencent, aliyun")             \
        X("resources.whole-gpu-name", "resource-name", "NAME", "whole-GPU resource name (empty: nvidia.com/gpu)",      \
          T_RESOURCE, FIELD(whole_gpu_resource), NO_NAMES, 0, 0, "a resource name like nvidia.com/gpu")                \
        X("resources.mig-strategy", "mig-strategy", "STRATEGY", "MIG devices served: none, single or mixed", T_ENUM,   \
          FIELD(mig_strategy), NAMES(mig_strategy_names), 0, 0, "one of none, single, mixed")                          \
        X("resources.mig-layouts", "mig-layouts", "PATH",                                                              \
          "MIG layout file the node label nvidia.com/mig.config selects from, empty: off", T_PATH_OPT,                 \
          FIELD(mig_layouts), NO_NAMES, 0, 0, "an absolute path or empty")                                             \
        X("resources.nvidia-config", "nvidia-config", "PATH",                                                          \
          "NVIDIA device plugin config (version v1): a file, or a ConfigMap dir the node label picks from",            \
          T_PATH_OPT, FIELD(nvidia_config), NO_NAMES, 0, 0, "an absolute path or empty")                               \
        X("resources.mps-control", "mps-control", "PROGRAM",                                                           \
          "NVIDIA's MPS control daemon the agent runs for sharing.mps (name on PATH or absolute path)", T_LIBRARY,     \
          FIELD(mps_control), NO_NAMES, 0, 0, "a program name like nvidia-cuda-mps-control or an absolute path")       \
        X("resources.nvidia-config-default", "nvidia-config-default", "NAME",                                          \
          "entry of the nvidia-config dir for a node without the label, empty: default or the only one", T_NODE_NAME,  \
          FIELD(nvidia_config_default), NO_NAMES, 0, 0, "a config name (lowercase DNS subdomain) or empty")            \
        X("devices.id-strategy", "device-id-strategy", "STRATEGY", "NVIDIA_VISIBLE_DEVICES lists uuid or index",       \
          T_ENUM, FIELD(device_id_strategy), NAMES(id_strategy_names), 0, 0, "one of uuid, index")                     \
        X("devices.list-strategy", "device-list-strategy", "LIST",                                                     \
          "how devices reach the container: envvar, cdi or both", T_FLAGS, FIELD(device_list_strategy),                \
          NAMES(list_strategy_names), 1, 0, "a comma-separated list of envvar, cdi (or both)")                         \
        X("devices.cdi-kind", "cdi-kind", "VENDOR/CLASS", "CDI kind of the device names", T_CDI_KIND,                  \
          FIELD(cdi_vendor), NO_NAMES, 0, 0, "a CDI kind like gpuslice.io/gpu")                                        \
        X("devices.dev-root", "dev-root", "DIR", "host root that holds /dev", T_PATH, FIELD(dev_root), NO_NAMES, 0, 0, \
          "an absolute path")                                                                                          \
        X("devices.host-dev-root", "host-dev-root", "DIR",                                                             \
          "the dev root as the host sees it, written into CDI specs, empty: the dev root", T_PATH_OPT,                 \
          FIELD(host_dev_root), NO_NAMES, 0, 0, "an absolute path or empty")                                           \
        X("devices.driver-root", "driver-root", "DIR", "root of the driver's files (ld cache, libraries, nvidia-smi)", \
          T_PATH, FIELD(driver_root), NO_NAMES, 0, 0, "an absolute path")                                              \
        X("devices.host-driver-root", "host-driver-root", "DIR",                                                       \
          "the driver root as the host sees it, written into CDI specs, empty: the driver root", T_PATH_OPT,           \
          FIELD(host_driver_root), NO_NAMES, 0, 0, "an absolute path or empty")                                        \
        X("devices.hook-path", "hook-path", "PATH", "host path of the gpuslice binary for CDI hooks, empty: this one", \
          T_PATH_OPT, FIELD(hook_path), NO_NAMES, 0, 0, "an absolute path or empty")                                   \
        X("health.disabled", "health-disabled", NULL, "do not watch GPU health", T_BOOL, FIELD(health_disabled),       \
          NO_NAMES, 0, 0, "true or false")                                                                             \
        X("health.xid-ignore", "health-xid-ignore", "LIST", "Xids that do not make a GPU unhealthy", T_XIDS,           \
          FIELD(xid_ignore), NO_NAMES, 0, 999999, "a comma-separated list of Xid numbers")                             \
        X("health.quiet-period", "health-quiet-period", "DURATION", "fault-free time before a GPU is healthy again",   \
          T_DURATION, FIELD(health_quiet_period_sec), NO_NAMES, 0, DAY, "a duration like 30s or 2m")                   \
        X("metrics.address", "metrics-address", "HOST:PORT", "metrics/health HTTP listener, empty: off", T_ADDRESS,    \
          FIELD(metrics_address), NO_NAMES, 0, 0, "HOST:PORT like 127.0.0.1:9400, or empty")                           \
        X("metrics.compat", "metrics-compat", "LIST", "extra metric families: pod-used-gpu-mem, gpu-manager", T_FLAGS, \
          FIELD(metrics_compat), NAMES(compat_names), 0, 0,                                                            \
          "a comma-separated list of pod-used-gpu-mem, gpu-manager, or empty")                                         \
        X("monitor.proc-root", "proc-root", "DIR", "where /proc is mounted", T_PATH, FIELD(proc_root), NO_NAMES, 0, 0, \
          "an absolute path")                                                                                          \
        X("monitor.cri-socket", "cri-socket", "PATH", "CRI runtime socket for pod names, empty: off", T_PATH_OPT,      \
          FIELD(cri_socket), NO_NAMES, 0, 0, "an absolute path or empty")                                              \
        X("monitor.engine", "engine", "URL", "Docker-compatible Engine API, empty: off", T_URL, FIELD(engine_url),     \
          NO_NAMES, 0, 0, "a URL like unix:///run/podman/podman.sock or http://127.0.0.1:2375, or empty")              \
        X("monitor.sample-interval", "sample-interval", "DURATION", "GPU usage sampling period", T_DURATION,           \
          FIELD(sample_interval_sec), NO_NAMES, 1, 3600, "a duration like 5s or 1m (1s to 1h)")                        \
        X("monitor.nfd-features-file", "nfd-features-file", "PATH",                                                    \
          "Node Feature Discovery features file to write, empty: off", T_PATH_OPT, FIELD(nfd_features_file), NO_NAMES, \
          0, 0, "an absolute path or empty")                                                                           \
        X("sharing.policy", "allocation-policy", "POLICY", "GPU choice for fractions: binpack, spread, fgd, frag",     \
          T_ENUM, FIELD(alloc_policy), NAMES(policy_names), 0, 0, "one of binpack, spread, fgd, frag")                 \
        X("sharing.memory-unit", "memory-unit", "SIZE", "GPU memory per memory device ID, 0: profile's", T_SIZE,       \
          FIELD(memory_unit_bytes), NO_NAMES, 1ULL << 20, 1ULL << 40,                                                  \
          "a size like 256MiB or 1GiB (1MiB to 1TiB), or 0")                                                           \
        X("sharing.interposer", "interposer", "PATH", "host path of libgpuslice-cuda.so", T_PATH,                      \
          FIELD(interposer_library), NO_NAMES, 0, 0, "an absolute path")                                               \
        X("sharing.limit-when-alone", "limit-when-alone", NULL,                                                        \
          "throttle compute even when a container is alone on its GPU", T_BOOL, FIELD(limit_when_alone), NO_NAMES, 0,  \
          0, "true or false")                                                                                          \
        X("kube.kubeconfig", "kubeconfig", "PATH",                                                                     \
          "kubeconfig to reach the API server and publish the node, empty: in-cluster or off", T_PATH_OPT,             \
          FIELD(kubeconfig), NO_NAMES, 0, 0, "an absolute path or empty")                                              \
        X("kube.node-name", "node-name", "NAME", "the Node object to publish, empty: $NODE_NAME, else the host name",  \
          T_NODE_NAME, FIELD(node_name), NO_NAMES, 0, 0, "a node name like gpu-node-1 (a DNS subdomain), or empty")    \
        X("dra.enabled", "dra", NULL, "serve GPUs through Dynamic Resource Allocation (docs/dra.md)", T_BOOL,          \
          FIELD(dra_enabled), NO_NAMES, 0, 0, "true or false")                                                         \
        X("dra.device-plugin", "dra-device-plugin", NULL,                                                              \
          "with dra.enabled, also serve the device plugin's resources", T_BOOL, FIELD(dra_device_plugin), NO_NAMES, 0, \
          0, "true or false")                                                                                          \
        X("dra.driver-name", "dra-driver-name", "NAME", "DRA driver name", T_DRIVER, FIELD(dra_driver), NO_NAMES, 0,   \
          0, "a lowercase DNS subdomain of at most 63 characters like gpu.gpuslice.io")                                \
        X("dra.registry-dir", "dra-registry-dir", "DIR", "kubelet's plugin registration directory", T_PATH,            \
          FIELD(dra_registry_dir), NO_NAMES, 0, 0, "an absolute path")                                                 \
        X("dra.plugin-dir", "dra-plugin-dir", "DIR", "directory of kubelet plugin sockets (<dir>/<driver>/dra.sock)",  \
          T_PATH, FIELD(dra_plugin_dir), NO_NAMES, 0, 0, "an absolute path")                                           \
        X("dra.cdi-dir", "dra-cdi-dir", "DIR", "where the claims' CDI specs are written", T_PATH, FIELD(dra_cdi_dir),  \
          NO_NAMES, 0, 0, "an absolute path")                                                                          \
        X("dra.sharing", "dra-sharing", NULL, "publish shared GPU devices (consumable memory and cores)", T_BOOL,      \
          FIELD(dra_sharing), NO_NAMES, 0, 0, "true or false")                                                         \
        X("dra.mig-dynamic", "dra-mig-dynamic", "GPUS",                                                                \
          "MIG GPUs partitioned at prepare: a device per profile and placement (docs/dra.md)", T_GPU_LIST,             \
          FIELD(dra_mig_dynamic), NO_NAMES, 0, 0, "all, GPU indices like 0,2, or empty")

#define X_PUB(key, flag, metavar, help, ...) { key, flag, metavar, help },
static const struct config_option options[] = { CONFIG_OPTION_LIST(X_PUB) };

#define X_DEF(key, flag, metavar, help, type, field, names, min, max, expect) { type, field, names, min, max, expect },
static const struct opt_def defs[] = { CONFIG_OPTION_LIST(X_DEF) };

_Static_assert(ELEMENTSOF(options) == ELEMENTSOF(defs), "option tables out of step");
_Static_assert(ELEMENTSOF(profile_names) == _CONFIG_PROFILE_MAX, "profile names");
_Static_assert(ELEMENTSOF(log_level_names) == _CONFIG_LOG_MAX, "log level names");
_Static_assert(ELEMENTSOF(policy_names) == _CONFIG_POLICY_MAX, "policy names");
_Static_assert(ELEMENTSOF(id_strategy_names) == _CONFIG_DEVICE_ID_MAX, "id strategy names");
_Static_assert(ELEMENTSOF(mig_strategy_names) == _CONFIG_MIG_MAX, "MIG strategy names");
/* T_ENUM fields are written as int */
_Static_assert(sizeof(enum config_profile) == sizeof(int) && sizeof(enum config_log_level) == sizeof(int) &&
                       sizeof(enum config_alloc_policy) == sizeof(int) &&
                       sizeof(enum config_device_id_strategy) == sizeof(int) &&
                       sizeof(enum config_mig_strategy) == sizeof(int),
               "enum size");

/* Sections of the file, in dump order. */
static const char *const sections[] = { "agent",   "kubelet", "nvml",    "resources", "devices", "health",
                                        "metrics", "monitor", "sharing", "kube",      "dra" };

static const struct config_profile_info profiles[] = {
        [CONFIG_PROFILE_DEFAULT] = { "default", NULL, NULL, 0 },
        [CONFIG_PROFILE_GPUSLICE] = { "gpuslice", "gpuslice.io/gpu-core", "gpuslice.io/gpu-memory", 256ULL << 20 },
        [CONFIG_PROFILE_TENCENT] = { "tencent", "tencent.com/vcuda-core", "tencent.com/vcuda-memory", 256ULL << 20 },
        [CONFIG_PROFILE_ALIYUN] = { "aliyun", NULL, "aliyun.com/gpu-mem", 1ULL << 30 },
};

#define DEFAULT_WHOLE_GPU_RESOURCE "nvidia.com/gpu"

/* ---- error text ----------------------------------------------------------------------------- */

/* The message of a failure; its code is set where the public function returns (config_fail). */
static void _printf_(2, 3) errf(struct gs_error *err, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        (void)gs_error_setv(err, -EINVAL, fmt, ap);
        va_end(ap);
}

/* What every public function returns: r, recorded in err->code when it is a failure. */
static int config_fail(struct gs_error *err, int r) {
        if (r < 0 && err)
                err->code = r;
        return r;
}

/* A value as it may appear inside '…' in a message: at most 64 bytes, non-printables as \xNN. */
static const char *shown(const char *s, char *buf, size_t len) {
        size_t o = 0;
        for (size_t i = 0; s[i] && o + 5 < len; i++) {
                unsigned char c = (unsigned char)s[i];
                if (i >= 64) {
                        snprintf(buf + o, len - o, "...");
                        return buf;
                }
                if (c < 0x20 || c == 0x7f || c == '\'' || c == '\\')
                        o += (size_t)snprintf(buf + o, len - o, "\\x%02x", c);
                else
                        buf[o++] = (char)c;
        }
        buf[MIN(o, len - 1)] = '\0';
        return buf;
}

/* ---- value parsers: 0 or -EINVAL, output written only on success ----------------------------- */

static bool has_ctrl(const char *s) {
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || *s == 0x7f)
                        return true;
        return false;
}

static int parse_bool(const char *s, bool *ret) {
        static const char *const yes[] = { "true", "yes", "on", "1" };
        static const char *const no[] = { "false", "no", "off", "0" };
        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (strcasecmp(s, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
                if (strcasecmp(s, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        }
        return -EINVAL;
}

/* "90", "30s", "2m", "1h30m", "1d". Bare numbers are seconds. */
static int parse_duration(const char *s, uint64_t *ret) {
        uint64_t total = 0;
        if (!isdigit((unsigned char)*s))
                return -EINVAL;
        while (*s) {
                uint64_t v = 0;
                if (!isdigit((unsigned char)*s))
                        return -EINVAL;
                for (; isdigit((unsigned char)*s); s++) {
                        if (v > (UINT64_MAX - 9) / 10)
                                return -ERANGE;
                        v = v * 10 + (uint64_t)(*s - '0');
                }
                uint64_t mult;
                switch (*s) {
                        case '\0':
                                if (total != 0)
                                        return -EINVAL; /* "1m30" */
                                mult = 1;
                                break;
                        case 's':
                                mult = 1;
                                s++;
                                break;
                        case 'm':
                                mult = 60;
                                s++;
                                break;
                        case 'h':
                                mult = 3600;
                                s++;
                                break;
                        case 'd':
                                mult = DAY;
                                s++;
                                break;
                        default: return -EINVAL;
                }
                if (v > UINT64_MAX / mult || total > UINT64_MAX - v * mult)
                        return -ERANGE;
                total += v * mult;
        }
        *ret = total;
        return 0;
}

static void format_duration(uint64_t sec, char *buf, size_t len) {
        if (sec != 0 && sec % DAY == 0)
                snprintf(buf, len, "%" PRIu64 "d", sec / DAY);
        else if (sec != 0 && sec % 3600 == 0)
                snprintf(buf, len, "%" PRIu64 "h", sec / 3600);
        else if (sec != 0 && sec % 60 == 0)
                snprintf(buf, len, "%" PRIu64 "m", sec / 60);
        else
                snprintf(buf, len, "%" PRIu64 "s", sec);
}

static void format_bytes(uint64_t b, char *buf, size_t len) {
        static const struct {
                const char *suffix;
                unsigned shift;
        } u[] = { { "TiB", 40 }, { "GiB", 30 }, { "MiB", 20 }, { "KiB", 10 } };
        for (size_t i = 0; i < ELEMENTSOF(u); i++)
                if (b != 0 && b % (1ULL << u[i].shift) == 0) {
                        snprintf(buf, len, "%" PRIu64 "%s", b >> u[i].shift, u[i].suffix);
                        return;
                }
        snprintf(buf, len, "%" PRIu64, b);
}

static bool valid_path(const char *s, size_t size) {
        return s[0] == '/' && strlen(s) < size && !has_ctrl(s);
}

static bool valid_library(const char *s, size_t size) {
        if (s[0] == '\0' || strlen(s) >= size || has_ctrl(s))
                return false;
        if (s[0] == '/')
                return true;
        return !strchr(s, '/'); /* a soname: the loader's search path decides */
}

static bool is_alnum(char c) {
        return isascii((unsigned char)c) && isalnum((unsigned char)c);
}

/* DNS-1123 subdomain: lowercase labels of [a-z0-9-] joined by '.', each starting and ending alnum. */
/* "", "all", or GPU indices "0,2" (no empty item, no leading zero). */
static bool valid_gpu_list(const char *s) {
        if (!s[0] || streq(s, "all"))
                return true;
        for (const char *p = s;; p++) {
                size_t n = strspn(p, "0123456789");
                if (n == 0 || n > 6 || (n > 1 && p[0] == '0'))
                        return false;
                p += n;
                if (!*p)
                        return true;
                if (*p != ',')
                        return false;
        }
}

static bool valid_dns_subdomain(const char *s, size_t n) {
        if (n == 0 || n > 253)
                return false;
        size_t label = 0;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (c == '.') {
                        if (label == 0 || s[i - 1] == '-')
                                return false;
                        label = 0;
                        continue;
                }
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
                        return false;
                if (label == 0 && c == '-')
                        return false;
                if (++label > 63)
                        return false;
        }
        return label > 0 && s[n - 1] != '-';
}

/* Kubernetes qualified name part: [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63. */
static bool valid_qualified_name(const char *s) {
        size_t n = strlen(s);
        if (n == 0 || n > 63 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
                        return false;
        return true;
}

static bool valid_resource_name(const char *s) {
        const char *slash = strchr(s, '/');
        if (!slash || !valid_dns_subdomain(s, (size_t)(slash - s)) || !valid_qualified_name(slash + 1))
                return false;
        /* kubernetes.io and its subdomains are reserved for the core resources */
        size_t plen = (size_t)(slash - s);
        static const char reserved[] = "kubernetes.io";
        size_t rlen = sizeof reserved - 1;
        if (plen >= rlen && memcmp(s + plen - rlen, reserved, rlen) == 0 && (plen == rlen || s[plen - rlen - 1] == '.'))
                return false;
        return true;
}

/* CDI: vendor and class start with a letter and end alnum; vendor may hold '.', both '-' and '_'. */
static bool valid_cdi_part(const char *s, size_t n, bool vendor) {
        if (n == 0 || n >= CONFIG_NAME_MAX || !isascii((unsigned char)s[0]) || !isalpha((unsigned char)s[0]) ||
            !is_alnum(s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && !(vendor && s[i] == '.'))
                        return false;
        return true;
}

/* HOST:PORT — host is a name, an IPv4 address, [IPv6] or empty (all addresses); port 1-65535. */
static bool valid_address(const char *s) {
        const char *colon = strrchr(s, ':');
        if (!colon || strlen(s) >= CONFIG_ADDRESS_MAX)
                return false;
        unsigned port;
        if (parse_uint(colon + 1, 65535, &port) < 0 || port == 0 || colon[1] == '0')
                return false;
        size_t hlen = (size_t)(colon - s);
        if (hlen > 0 && s[0] == '[') {
                if (hlen < 3 || s[hlen - 1] != ']')
                        return false;
                for (size_t i = 1; i < hlen - 1; i++)
                        if (!isxdigit((unsigned char)s[i]) && s[i] != ':' && s[i] != '.')
                                return false;
                return true;
        }
        for (size_t i = 0; i < hlen; i++)
                if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '.')
                        return false;
        return true;
}

static bool valid_url(const char *s) {
        if (strlen(s) >= CONFIG_PATH_MAX || has_ctrl(s) || strchr(s, ' '))
                return false;
        if (startswith(s, "unix://"))
                return s[7] == '/' && s[8] != '\0';
        const char *rest = NULL;
        if (startswith(s, "http://"))
                rest = s + 7;
        else if (startswith(s, "tcp://"))
                rest = s + 6;
        if (!rest)
                return false;
        char hostport[CONFIG_ADDRESS_MAX];
        size_t n = strcspn(rest, "/");
        if (n == 0 || n >= sizeof hostport)
                return false;
        strnscpy(hostport, sizeof hostport, rest, n);
        return valid_address(hostport) && hostport[0] != ':';
}

/* Comma-separated list: calls f on each trimmed item (empty items are errors). "" is no items. */
static int for_each_item(const char *s, int (*f)(const char *item, void *userdata), void *userdata) {
        while (*s == ' ' || *s == '\t')
                s++;
        if (*s == '\0')
                return 0;
        for (;;) {
                const char *end = strchr(s, ',');
                size_t n = end ? (size_t)(end - s) : strlen(s);
                char item[64];
                while (n > 0 && (*s == ' ' || *s == '\t'))
                        s++, n--;
                while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
                        n--;
                if (n == 0 || n >= sizeof item)
                        return -EINVAL;
                strnscpy(item, sizeof item, s, n);
                int r = f(item, userdata);
                if (r < 0)
                        return r;
                if (!end)
                        return 0;
                s = end + 1;
        }
}

struct flags_ctx {
        const struct opt_def *def;
        unsigned bits;
};

static int flags_item(const char *item, void *userdata) {
        struct flags_ctx *c = userdata;
        if (c->def->names == list_strategy_names && streq(item, "both")) {
                c->bits |= CONFIG_DEVICE_LIST_ENVVAR | CONFIG_DEVICE_LIST_CDI;
                return 0;
        }
        for (size_t i = 0; i < c->def->n_names; i++)
                if (streq(item, c->def->names[i])) {
                        c->bits |= 1U << i;
                        return 0;
                }
        return -EINVAL;
}

struct xids_ctx {
        unsigned v[CONFIG_XID_MAX];
        size_t n;
        uint64_t max;
};

static int xids_item(const char *item, void *userdata) {
        struct xids_ctx *c = userdata;
        unsigned x;
        if (parse_uint(item, (unsigned)c->max, &x) < 0)
                return -EINVAL;
        for (size_t i = 0; i < c->n; i++)
                if (c->v[i] == x)
                        return -EINVAL;
        if (c->n >= CONFIG_XID_MAX)
                return -E2BIG;
        c->v[c->n++] = x;
        return 0;
}

/* ---- suggestions for typos ------------------------------------------------------------------ */

/* Edit distance (insert, delete, substitute), capped: strings longer than 63 bytes compare as far. */
static unsigned edit_distance(const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b);
        if (la > 63 || lb > 63)
                return UINT32_MAX;
        unsigned row[64];
        for (size_t j = 0; j <= lb; j++)
                row[j] = (unsigned)j;
        for (size_t i = 1; i <= la; i++) {
                unsigned diag = row[0];
                row[0] = (unsigned)i;
                for (size_t j = 1; j <= lb; j++) {
                        unsigned up = row[j];
                        unsigned best = diag + (a[i - 1] != b[j - 1]);
                        best = MIN(best, up + 1);
                        best = MIN(best, row[j - 1] + 1);
                        row[j] = best;
                        diag = up;
                }
        }
        return row[lb];
}

/* The known name closest to s (at most 2 edits away), or NULL. */
static const char *closest(const char *s, const char *const *names, size_t n, size_t stride) {
        const char *best = NULL;
        unsigned best_d = 3;
        for (size_t i = 0; i < n; i++) {
                const char *name = *(const char *const *)((const char *)names + i * stride);
                unsigned d = edit_distance(s, name);
                if (d < best_d) {
                        best_d = d;
                        best = name;
                }
        }
        return best;
}

/* " (did you mean 'health.quiet-period'?)" or "" for an unknown dotted key. */
static void suggest_key(const char *key, char *buf, size_t len) {
        buf[0] = '\0';
        const char *hit = closest(key, &options[0].key, ELEMENTSOF(options), sizeof options[0]);
        if (!hit) {
                /* the right name in the wrong section? */
                const char *dot = strchr(key, '.');
                for (size_t i = 0; dot && i < ELEMENTSOF(options); i++)
                        if (streq(strchr(options[i].key, '.'), dot)) {
                                hit = options[i].key;
                                break;
                        }
        }
        if (hit)
                snprintf(buf, len, " (did you mean '%s'?)", hit);
}

static void suggest_flag(const char *flag, char *buf, size_t len) {
        buf[0] = '\0';
        const char *hit = closest(flag, &options[0].flag, ELEMENTSOF(options), sizeof options[0]);
        if (hit)
                snprintf(buf, len, " (did you mean '--%s'?)", hit);
}

/* ---- the one validating setter ---------------------------------------------------------------- */

static const struct opt_def *def_of(const struct config_option *o) {
        return &defs[o - options];
}

/* Apply value to cfg; name is what messages call the option (a key or a --flag). Every branch
 * validates the whole value before writing any field, so a failure leaves cfg untouched. */
/* lint: long — one branch per option type, each validating the whole value before writing (see above). */
static int set_option(struct gpuslice_config *cfg, const struct config_option *o, const char *value, const char *name,
                      struct gs_error *err) {
        const struct opt_def *d = def_of(o);
        char *field = (char *)cfg + d->offset;
        char sbuf[96];
        int r;

        switch (d->type) {
                case T_PATH:
                case T_PATH_OPT:
                        if (d->type == T_PATH_OPT && value[0] == '\0')
                                break;
                        if (!valid_path(value, d->size))
                                goto invalid;
                        break;
                case T_LIBRARY:
                        if (!valid_library(value, d->size))
                                goto invalid;
                        break;
                case T_RESOURCE:
                        if (value[0] != '\0' && (strlen(value) >= d->size || !valid_resource_name(value)))
                                goto invalid;
                        break;
                case T_ADDRESS:
                        if (value[0] != '\0' && !valid_address(value))
                                goto invalid;
                        break;
                case T_URL:
                        if (value[0] != '\0' && !valid_url(value))
                                goto invalid;
                        break;
                case T_NODE_NAME:
                        if (value[0] != '\0' &&
                            (strlen(value) >= d->size || !valid_dns_subdomain(value, strlen(value))))
                                goto invalid;
                        break;
                case T_DRIVER:
                        if (strlen(value) > 63 || !valid_dns_subdomain(value, strlen(value)))
                                goto invalid;
                        break;
                case T_GPU_LIST:
                        if (strlen(value) >= d->size || !valid_gpu_list(value))
                                goto invalid;
                        break;
                case T_CDI_KIND: {
                        const char *slash = strchr(value, '/');
                        if (!slash || !valid_cdi_part(value, (size_t)(slash - value), true) ||
                            !valid_cdi_part(slash + 1, strlen(slash + 1), false))
                                goto invalid;
                        strnscpy(cfg->cdi_vendor, sizeof cfg->cdi_vendor, value, (size_t)(slash - value));
                        strscpy(cfg->cdi_class, slash + 1, sizeof cfg->cdi_class);
                        return 0;
                }
                case T_ENUM:
                        for (size_t i = 0; i < d->n_names; i++)
                                if (streq(value, d->names[i])) {
                                        int v = (int)i;
                                        memcpy(field, &v, sizeof v);
                                        return 0;
                                }
                        goto invalid;
                case T_FLAGS: {
                        struct flags_ctx c = { d, 0 };
                        if (for_each_item(value, flags_item, &c) < 0 || (d->min && c.bits == 0))
                                goto invalid;
                        memcpy(field, &c.bits, sizeof c.bits);
                        return 0;
                }
                case T_BOOL: {
                        bool b;
                        if (parse_bool(value, &b) < 0)
                                goto invalid;
                        memcpy(field, &b, sizeof b);
                        return 0;
                }
                case T_DURATION: {
                        uint64_t v;
                        if (parse_duration(value, &v) < 0 || v < d->min || v > d->max)
                                goto invalid;
                        memcpy(field, &v, sizeof v);
                        return 0;
                }
                case T_SIZE: {
                        uint64_t v;
                        if (parse_size(value, &v) < 0 || (v != 0 && (v < d->min || v > d->max)))
                                goto invalid;
                        memcpy(field, &v, sizeof v);
                        return 0;
                }
                case T_XIDS: {
                        struct xids_ctx c = { .max = d->max };
                        r = for_each_item(value, xids_item, &c);
                        if (r == -E2BIG) {
                                errf(err, "%s: at most %d Xids, got more", name, CONFIG_XID_MAX);
                                return -EINVAL;
                        }
                        if (r < 0)
                                goto invalid;
                        memcpy(cfg->xid_ignore, c.v, sizeof c.v);
                        cfg->n_xid_ignore = c.n;
                        return 0;
                }
        }
        /* the string types */
        strscpy(field, value, d->size);
        return 0;

invalid:
        errf(err, "%s: expected %s, got '%s'", name, d->expect, shown(value, sbuf, sizeof sbuf));
        return -EINVAL;
}

static int config_set_impl(struct gpuslice_config *cfg, const char *key, const char *value, struct gs_error *err) {
        char sbuf[96];
        if (!cfg || !key || !value) {
                errf(err, "missing key or value");
                return -EINVAL;
        }
        const struct config_option *o = config_option_by_key(key);
        if (!o) {
                char hint[128];
                suggest_key(key, hint, sizeof hint);
                errf(err, "unknown key '%s'%s", shown(key, sbuf, sizeof sbuf), hint);
                return -ENOKEY;
        }
        return set_option(cfg, o, value, key, err); /* writes nothing unless valid */
}

/* ---- tables --------------------------------------------------------------------------------- */

const struct config_option *config_options(size_t *ret_n) {
        if (ret_n)
                *ret_n = ELEMENTSOF(options);
        return options;
}

const struct config_option *config_option_by_key(const char *key) {
        if (!key)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(options); i++)
                if (streq(options[i].key, key))
                        return &options[i];
        return NULL;
}

const struct config_option *config_option_by_flag(const char *flag) {
        if (!flag)
                return NULL;
        if (startswith(flag, "--"))
                flag += 2;
        for (size_t i = 0; i < ELEMENTSOF(options); i++)
                if (streq(options[i].flag, flag))
                        return &options[i];
        return NULL;
}

const struct config_profile_info *config_profile_info(enum config_profile p) {
        if ((unsigned)p >= _CONFIG_PROFILE_MAX)
                return NULL;
        return &profiles[p];
}

const char *config_whole_gpu_resource(const struct gpuslice_config *cfg) {
        return cfg->whole_gpu_resource[0] ? cfg->whole_gpu_resource : DEFAULT_WHOLE_GPU_RESOURCE;
}

uint64_t config_memory_unit(const struct gpuslice_config *cfg) {
        const struct config_profile_info *p = config_profile_info(cfg->profile);
        if (!p || !p->memory_resource)
                return 0;
        return cfg->memory_unit_bytes ? cfg->memory_unit_bytes : p->memory_unit_bytes;
}

const char *config_profile_name(enum config_profile p) {
        return (unsigned)p < ELEMENTSOF(profile_names) ? profile_names[p] : NULL;
}

const char *config_mig_strategy_name(enum config_mig_strategy s) {
        return (unsigned)s < ELEMENTSOF(mig_strategy_names) ? mig_strategy_names[s] : NULL;
}

const char *config_log_level_name(enum config_log_level l) {
        return (unsigned)l < ELEMENTSOF(log_level_names) ? log_level_names[l] : NULL;
}

/* ---- defaults ------------------------------------------------------------------------------- */

void config_init_defaults(struct gpuslice_config *cfg) {
        static const unsigned xids[] = { 13, 31, 43, 45, 68, 109 };
        *cfg = (struct gpuslice_config){
                .log_level = CONFIG_LOG_INFO,
                .profile = CONFIG_PROFILE_DEFAULT,
                .device_id_strategy = CONFIG_DEVICE_ID_UUID,
                .device_list_strategy = CONFIG_DEVICE_LIST_ENVVAR,
                .health_disabled = false,
                .health_quiet_period_sec = 60,
                .metrics_compat = 0,
                .sample_interval_sec = 5,
                .alloc_policy = CONFIG_POLICY_FRAG,
                .memory_unit_bytes = 0,
                .limit_when_alone = true,
                .dra_sharing = true,
        };
        strscpy(cfg->dra_driver, "gpu.gpuslice.io", sizeof cfg->dra_driver);
        strscpy(cfg->dra_registry_dir, "/var/lib/kubelet/plugins_registry", sizeof cfg->dra_registry_dir);
        strscpy(cfg->dra_plugin_dir, "/var/lib/kubelet/plugins", sizeof cfg->dra_plugin_dir);
        strscpy(cfg->dra_cdi_dir, "/var/run/cdi", sizeof cfg->dra_cdi_dir);
        strscpy(cfg->state_dir, "/var/lib/gpuslice", sizeof cfg->state_dir);
        strscpy(cfg->plugin_dir, "/var/lib/kubelet/device-plugins", sizeof cfg->plugin_dir);
        strscpy(cfg->pod_resources_socket, "/var/lib/kubelet/pod-resources/kubelet.sock",
                sizeof cfg->pod_resources_socket);
        strscpy(cfg->nvml_library, "libnvidia-ml.so.1", sizeof cfg->nvml_library);
        strscpy(cfg->mps_control, "nvidia-cuda-mps-control", sizeof cfg->mps_control);
        strscpy(cfg->cdi_vendor, "gpuslice.io", sizeof cfg->cdi_vendor);
        strscpy(cfg->cdi_class, "gpu", sizeof cfg->cdi_class);
        strscpy(cfg->dev_root, "/", sizeof cfg->dev_root);
        strscpy(cfg->driver_root, "/", sizeof cfg->driver_root);
        memcpy(cfg->xid_ignore, xids, sizeof xids);
        cfg->n_xid_ignore = ELEMENTSOF(xids);
        strscpy(cfg->metrics_address, "127.0.0.1:9400", sizeof cfg->metrics_address);
        strscpy(cfg->proc_root, "/proc", sizeof cfg->proc_root);
        strscpy(cfg->cri_socket, "/run/containerd/containerd.sock", sizeof cfg->cri_socket);
        strscpy(cfg->interposer_library, "/usr/local/lib/gpuslice/libgpuslice-cuda.so", sizeof cfg->interposer_library);
}

/* ---- the file parser ------------------------------------------------------------------------ */

static bool is_blank(char c) {
        return c == ' ' || c == '\t';
}

/* Parse the value part of `key = value` (s is NUL-terminated and preceded by the '='; leading
 * blanks allowed) into out.
 * Quoted: "…" with \" and \\; then only blanks or a comment. Unquoted: up to a '#' or ';' that
 * follows a blank, trailing blanks dropped. */
static int parse_value(const char *s, char *out, size_t outlen, struct gs_error *err) {
        while (is_blank(*s))
                s++;
        size_t o = 0;
        if (*s == '"') {
                for (s++;; s++) {
                        if (*s == '\0') {
                                errf(err, "unterminated quoted string");
                                return -EINVAL;
                        }
                        if (*s == '"')
                                break;
                        char c = *s;
                        if (c == '\\') {
                                s++;
                                if (*s != '\\' && *s != '"') {
                                        errf(err, "unknown escape in quoted string (only \\\\ and \\\")");
                                        return -EINVAL;
                                }
                                c = *s;
                        }
                        if (o + 1 >= outlen) {
                                errf(err, "value too long");
                                return -EINVAL;
                        }
                        out[o++] = c;
                }
                s++;
                while (is_blank(*s))
                        s++;
                if (*s != '\0' && *s != '#' && *s != ';') {
                        errf(err, "unexpected text after the closing quote");
                        return -EINVAL;
                }
                out[o] = '\0';
                return 0;
        }
        for (; *s; s++) {
                if ((*s == '#' || *s == ';') && is_blank(s[-1]))
                        break; /* s[-1] exists: the caller passes the text after '=' */
                if (o + 1 >= outlen) {
                        errf(err, "value too long");
                        return -EINVAL;
                }
                out[o++] = *s;
        }
        while (o > 0 && is_blank(out[o - 1]))
                o--;
        out[o] = '\0';
        return 0;
}

static bool valid_ident(const char *s) {
        if (!*s)
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
                        return false;
        return true;
}

static char *trim(char *s) {
        while (is_blank(*s))
                s++;
        size_t n = strlen(s);
        while (n > 0 && is_blank(s[n - 1]))
                s[--n] = '\0';
        return s;
}

struct parse_state {
        unsigned section_line[ELEMENTSOF(sections)];
        unsigned key_line[ELEMENTSOF(options)];
        int section; /* index into sections, -1 before the first header */
};

/* lint: long — a strict parser: one check per field of the format, in the format's order, each with its own
 * message; split, the grammar would no longer read top to bottom (INI lines: blank, comment, section, key =
 * value). */
static int parse_line(struct parse_state *ps, struct gpuslice_config *cfg, char *line, unsigned lineno,
                      struct gs_error *err) {
        char sbuf[96];
        char *s = trim(line);
        if (*s == '\0' || *s == '#' || *s == ';')
                return 0;

        if (*s == '[') {
                char *close = strchr(s, ']');
                if (!close) {
                        errf(err, "line %u: expected ']' to close the section header", lineno);
                        return -EINVAL;
                }
                char *rest = close + 1;
                while (is_blank(*rest))
                        rest++;
                if (*rest != '\0' && *rest != '#' && *rest != ';') {
                        errf(err, "line %u: unexpected text after the section header", lineno);
                        return -EINVAL;
                }
                *close = '\0';
                char *name = trim(s + 1);
                for (size_t i = 0; i < ELEMENTSOF(sections); i++) {
                        if (!streq(name, sections[i]))
                                continue;
                        if (ps->section_line[i]) {
                                errf(err, "line %u: section [%s] already appeared on line %u", lineno, sections[i],
                                     ps->section_line[i]);
                                return -EINVAL;
                        }
                        ps->section_line[i] = lineno;
                        ps->section = (int)i;
                        return 0;
                }
                const char *hit = closest(name, sections, ELEMENTSOF(sections), sizeof sections[0]);
                char hint[64] = "";
                if (hit)
                        snprintf(hint, sizeof hint, " (did you mean [%s]?)", hit);
                errf(err, "line %u: unknown section [%s]%s", lineno, shown(name, sbuf, sizeof sbuf), hint);
                return -ENOKEY;
        }

        char *eq = strchr(s, '=');
        if (!eq) {
                errf(err, "line %u: expected 'key = value' or '[section]', got '%s'", lineno,
                     shown(s, sbuf, sizeof sbuf));
                return -EINVAL;
        }
        *eq = '\0';
        char *name = trim(s);
        if (!valid_ident(name)) {
                errf(err, "line %u: expected a key name (lowercase letters, digits, '-'), got '%s'", lineno,
                     shown(name, sbuf, sizeof sbuf));
                return -EINVAL;
        }
        if (ps->section < 0) {
                errf(err, "line %u: %s: key outside of any [section]", lineno, name);
                return -EINVAL;
        }
        char key[96];
        snprintf(key, sizeof key, "%s.%s", sections[ps->section], name);
        const struct config_option *o = config_option_by_key(key);
        if (!o) {
                char hint[128];
                suggest_key(key, hint, sizeof hint);
                errf(err, "line %u: unknown key '%s'%s", lineno, shown(key, sbuf, sizeof sbuf), hint);
                return -ENOKEY;
        }
        size_t idx = (size_t)(o - options);
        if (ps->key_line[idx]) {
                errf(err, "line %u: %s: already set on line %u", lineno, key, ps->key_line[idx]);
                return -EINVAL;
        }
        ps->key_line[idx] = lineno;

        char value[CONFIG_LINE_MAX + 1];
        struct gs_error verr;
        if (parse_value(eq + 1, value, sizeof value, &verr) < 0) {
                errf(err, "line %u: %s: %s", lineno, key, verr.message);
                return -EINVAL;
        }
        struct gs_error serr;
        int r = set_option(cfg, o, value, key, &serr);
        if (r < 0) {
                errf(err, "line %u: %s", lineno, serr.message);
                return r;
        }
        return 0;
}

static int config_parse_text_impl(const char *text, size_t len, struct gpuslice_config *cfg, struct gs_error *err) {
        if (!cfg || (!text && len > 0)) {
                errf(err, "no text or config");
                return -EINVAL;
        }
        /* Parse into a copy (on the heap: the struct is ~45 KiB) and publish it only at the end. */
        _cleanup_(freep) struct gpuslice_config *tmp = malloc(sizeof *tmp);
        if (!tmp) {
                errf(err, "out of memory");
                return -ENOMEM;
        }
        *tmp = *cfg;
        struct parse_state ps = { .section = -1 };
        char line[CONFIG_LINE_MAX + 1];
        size_t pos = 0;
        unsigned lineno = 0;

        if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
                pos = 3; /* UTF-8 byte order mark, as some editors write */
        while (pos < len) {
                lineno++;
                const char *start = text + pos;
                const char *nl = memchr(start, '\n', len - pos);
                size_t n = nl ? (size_t)(nl - start) : len - pos;
                pos += n + (nl ? 1 : 0);
                if (n > 0 && start[n - 1] == '\r')
                        n--;
                if (n > CONFIG_LINE_MAX) {
                        errf(err, "line %u: line longer than %d bytes", lineno, CONFIG_LINE_MAX);
                        return -EINVAL;
                }
                for (size_t i = 0; i < n; i++) {
                        unsigned char c = (unsigned char)start[i];
                        if (c == '\0') {
                                errf(err, "line %u: NUL byte in the file", lineno);
                                return -EINVAL;
                        }
                        if ((c < 0x20 && c != '\t') || c == 0x7f) {
                                errf(err, "line %u: control character 0x%02x in the file", lineno, c);
                                return -EINVAL;
                        }
                }
                memcpy(line, start, n);
                line[n] = '\0';
                int r = parse_line(&ps, tmp, line, lineno, err);
                if (r < 0)
                        return r;
        }
        *cfg = *tmp;
        return 0;
}

static int config_load_file_impl(const char *path, struct gpuslice_config *cfg, struct gs_error *err) {
        if (!path || !cfg) {
                errf(err, "no path or config");
                return -EINVAL;
        }
        _cleanup_(closep) int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                int r = -errno;
                errf(err, "%s: %s", path, strerror(-r));
                return r;
        }
        struct stat st;
        if (fstat(fd, &st) < 0) {
                int r = -errno;
                errf(err, "%s: %s", path, strerror(-r));
                return r;
        }
        if (!S_ISREG(st.st_mode)) {
                errf(err, "%s: not a regular file", path);
                return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
        }
        if (st.st_size > CONFIG_FILE_MAX) {
                errf(err, "%s: larger than %d bytes", path, CONFIG_FILE_MAX);
                return -EFBIG;
        }
        /* Read through the fd we checked, not the path again. */
        size_t cap = (size_t)st.st_size + 1, len = 0;
        _cleanup_(freep) char *text = malloc(cap);
        if (!text) {
                errf(err, "%s: out of memory", path);
                return -ENOMEM;
        }
        int r;
        for (;;) {
                if (len == cap) { /* the file grew since fstat */
                        errf(err, "%s: changed while being read", path);
                        return -EBUSY;
                }
                ssize_t k = read(fd, text + len, cap - len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        r = -errno;
                        errf(err, "%s: %s", path, strerror(-r));
                        return r;
                }
                if (k == 0)
                        break;
                len += (size_t)k;
        }
        r = config_parse_text(text, len, cfg, err);
        if (r < 0)
                (void)gs_error_prefix(err, "%s", path);
        return r;
}

/* ---- dump ----------------------------------------------------------------------------------- */

static void write_value(FILE *f, const char *v) {
        bool quote = v[0] == '\0' || is_blank(v[0]) || is_blank(v[strlen(v) - 1]) || v[0] == '"' ||
                     strpbrk(v, "#;\"\\") != NULL;
        if (!quote) {
                fputs(v, f);
                return;
        }
        fputc('"', f);
        for (; *v; v++) {
                if (*v == '"' || *v == '\\')
                        fputc('\\', f);
                fputc(*v, f);
        }
        fputc('"', f);
}

/* The types whose field is the value's text. */
static bool string_type(enum opt_type t) {
        static const enum opt_type strings[] = { T_PATH,     T_PATH_OPT, T_LIBRARY, T_RESOURCE, T_DRIVER,
                                                 T_GPU_LIST, T_ADDRESS,  T_URL,     T_NODE_NAME };
        for (size_t i = 0; i < sizeof strings / sizeof *strings; i++)
                if (strings[i] == t)
                        return true;
        return false;
}

static void format_option(const struct gpuslice_config *cfg, const struct config_option *o, char *buf, size_t len) {
        const struct opt_def *d = def_of(o);
        const char *field = (const char *)cfg + d->offset;
        size_t n = 0;
        buf[0] = '\0';
        if (string_type(d->type)) {
                strscpy(buf, field, len);
                return;
        }
        switch (d->type) {
                case T_CDI_KIND: snprintf(buf, len, "%s/%s", cfg->cdi_vendor, cfg->cdi_class); break;
                case T_ENUM: {
                        int v;
                        memcpy(&v, field, sizeof v);
                        snprintf(buf, len, "%s", (unsigned)v < d->n_names ? d->names[v] : "?");
                        break;
                }
                case T_FLAGS: {
                        unsigned bits;
                        memcpy(&bits, field, sizeof bits);
                        for (size_t i = 0; i < d->n_names; i++)
                                if (bits & (1U << i))
                                        n += (size_t)snprintf(buf + n, len - MIN(n, len), "%s%s", n ? "," : "",
                                                              d->names[i]);
                        break;
                }
                case T_BOOL: {
                        bool b;
                        memcpy(&b, field, sizeof b);
                        snprintf(buf, len, "%s", b ? "true" : "false");
                        break;
                }
                case T_DURATION:
                case T_SIZE: {
                        uint64_t v;
                        memcpy(&v, field, sizeof v);
                        if (d->type == T_DURATION)
                                format_duration(v, buf, len);
                        else
                                format_bytes(v, buf, len);
                        break;
                }
                case T_XIDS:
                        for (size_t i = 0; i < cfg->n_xid_ignore && n < len; i++)
                                n += (size_t)snprintf(buf + n, len - n, "%s%u", i ? ", " : "", cfg->xid_ignore[i]);
                        break;
                default: break; /* the string types, above */
        }
}

int config_dump(const struct gpuslice_config *cfg, FILE *f) {
        char *buf = malloc(CONFIG_PATH_MAX + 64);
        if (!buf)
                return -ENOMEM;
        fputs("# gpuslice node agent configuration (effective values)\n", f);
        for (size_t s = 0; s < ELEMENTSOF(sections); s++) {
                fprintf(f, "\n[%s]\n", sections[s]);
                size_t slen = strlen(sections[s]);
                for (size_t i = 0; i < ELEMENTSOF(options); i++) {
                        const struct config_option *o = &options[i];
                        if (strncmp(o->key, sections[s], slen) != 0 || o->key[slen] != '.')
                                continue;
                        fprintf(f, "%s = ", o->key + slen + 1);
                        format_option(cfg, o, buf, CONFIG_PATH_MAX + 64);
                        write_value(f, buf);
                        fputc('\n', f);
                }
        }
        free(buf);
        return fflush(f) == 0 && !ferror(f) ? 0 : -EIO;
}

/* ---- command line --------------------------------------------------------------------------- */

void config_args_done(struct config_args *args) {
        if (!args)
                return;
        for (size_t i = 0; i < args->n_overrides; i++)
                free(args->overrides[i].value);
        free(args->overrides);
        free(args->config_path);
        *args = (struct config_args){ 0 };
}

static int args_add(struct config_args *a, const char *key, const char *value) {
        struct config_override *n = realloc(a->overrides, (a->n_overrides + 1) * sizeof *n);
        if (!n)
                return -ENOMEM;
        a->overrides = n;
        char *v = strdup(value);
        if (!v)
                return -ENOMEM;
        n[a->n_overrides++] = (struct config_override){ key, v };
        return 0;
}

/* lint: long — the agent's command line: --help, --version, --config and one --KEY[=VALUE] per configuration
 * option, each checked against a scratch config and recorded as an override in order; one branch per form. */
static int config_args_parse_impl(int argc, char *const *argv, int first, struct config_args *ret,
                                  struct gs_error *err) {
        char sbuf[96];
        if (!ret || argc < 0 || first < 0 || (argc > 0 && !argv)) {
                errf(err, "bad arguments");
                return -EINVAL;
        }
        struct config_args a = { 0 };
        struct gpuslice_config *scratch = malloc(sizeof *scratch);
        int r = 0;
        if (!scratch) {
                errf(err, "out of memory");
                return -ENOMEM;
        }
        config_init_defaults(scratch);

        for (int i = first; i < argc; i++) {
                const char *arg = argv[i];
                if (streq(arg, "-h") || streq(arg, "--help")) {
                        a.help = true;
                        continue;
                }
                if (streq(arg, "--version")) {
                        a.version = true;
                        continue;
                }
                if (!startswith(arg, "--") && !streq(arg, "-c")) {
                        errf(err, "unexpected argument '%s'", shown(arg, sbuf, sizeof sbuf));
                        r = -EINVAL;
                        goto fail;
                }
                char name[96];
                const char *eq = strchr(arg, '=');
                const char *value = NULL;
                size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
                if (nlen >= sizeof name) {
                        errf(err, "unknown option '%s'", shown(arg, sbuf, sizeof sbuf));
                        r = -EINVAL;
                        goto fail;
                }
                strnscpy(name, sizeof name, arg, nlen);
                if (eq)
                        value = eq + 1;

                bool is_config = streq(name, "-c") || streq(name, "--config");
                const struct config_option *o = is_config ? NULL : config_option_by_flag(name);
                if (!is_config && !o) {
                        char hint[128] = "";
                        if (startswith(name, "--"))
                                suggest_flag(name + 2, hint, sizeof hint);
                        errf(err, "unknown option '%s'%s", shown(name, sbuf, sizeof sbuf), hint);
                        r = -EINVAL;
                        goto fail;
                }
                if (!value) {
                        if (o && !o->metavar)
                                value = "true";
                        else if (i + 1 < argc)
                                value = argv[++i];
                        else {
                                errf(err, "%s: needs a value", name);
                                r = -EINVAL;
                                goto fail;
                        }
                }
                if (is_config) {
                        if (value[0] == '\0') {
                                errf(err, "%s: needs a file name", name);
                                r = -EINVAL;
                                goto fail;
                        }
                        char *p = strdup(value);
                        if (!p) {
                                r = -ENOMEM;
                                goto fail;
                        }
                        free(a.config_path);
                        a.config_path = p;
                        a.config_path_given = true;
                        continue;
                }
                char flagname[100];
                snprintf(flagname, sizeof flagname, "--%s", o->flag);
                r = set_option(scratch, o, value, flagname, err);
                if (r < 0)
                        goto fail;
                r = args_add(&a, o->key, value);
                if (r < 0) {
                        errf(err, "out of memory");
                        goto fail;
                }
        }
        free(scratch);
        *ret = a;
        return 0;
fail:
        free(scratch);
        config_args_done(&a);
        return r;
}

static int config_build_impl(const struct config_args *args, const char *default_path, struct gpuslice_config *ret,
                             struct gs_error *err) {
        if (!ret) {
                errf(err, "no config");
                return -EINVAL;
        }
        struct gpuslice_config *tmp = malloc(sizeof *tmp);
        if (!tmp) {
                errf(err, "out of memory");
                return -ENOMEM;
        }
        config_init_defaults(tmp);
        int r = 0;
        const char *path = args && args->config_path ? args->config_path : default_path;
        if (path) {
                r = config_load_file(path, tmp, err);
                if (r == -ENOENT && !(args && args->config_path))
                        r = 0; /* the default file is optional */
                if (r < 0)
                        goto out;
        }
        for (size_t i = 0; args && i < args->n_overrides; i++) {
                const struct config_option *o = config_option_by_key(args->overrides[i].key);
                char flagname[100];
                snprintf(flagname, sizeof flagname, "--%s", o ? o->flag : "?");
                r = o ? set_option(tmp, o, args->overrides[i].value, flagname, err) : -ENOKEY;
                if (r < 0)
                        goto out;
        }
        *ret = *tmp;
out:
        free(tmp);
        return r;
}

int config_set(struct gpuslice_config *cfg, const char *key, const char *value, struct gs_error *err) {
        return config_fail(err, config_set_impl(cfg, key, value, err));
}

int config_parse_text(const char *text, size_t len, struct gpuslice_config *cfg, struct gs_error *err) {
        return config_fail(err, config_parse_text_impl(text, len, cfg, err));
}

int config_load_file(const char *path, struct gpuslice_config *cfg, struct gs_error *err) {
        return config_fail(err, config_load_file_impl(path, cfg, err));
}

int config_args_parse(int argc, char *const *argv, int first, struct config_args *ret, struct gs_error *err) {
        return config_fail(err, config_args_parse_impl(argc, argv, first, ret, err));
}

int config_build(const struct config_args *args, const char *default_path, struct gpuslice_config *ret,
                 struct gs_error *err) {
        return config_fail(err, config_build_impl(args, default_path, ret, err));
}
