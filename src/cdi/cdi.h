/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cdi — what a container needs from the node to use its GPUs, as a Container Device Interface
 * spec (`gpuslice cdi generate`) and as the same edits applied by an OCI hook (`gpuslice hook`).
 *
 * Four parts:
 *   - the ld.so.cache reader (interposer/ldcache.h: pure, bytes in, entries out; glibc's
 *     "glibc-ld.so.cache1.1" format, alone or after the old "ld.so-1.7.0" table);
 *   - discovery (I/O, read only): device nodes under a dev root (major/minor from the node itself),
 *     the driver's user-space libraries (lib*.so.<driver version>, found through the ld cache under
 *     a driver root, grouped by capability), its binaries and IPC sockets;
 *   - the spec (pure): discovery + the node's GPUs → a jansson tree in the CDI format, with the
 *     lowest cdiVersion that fits, written as JSON or YAML;
 *   - the OCI hook (hook.c): its inputs (the state, config.json), the legacy image checks and plan
 *     (NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES, NVIDIA_REQUIRE_*), and applying a plan
 *     inside a container's root (mount namespace, openat2(RESOLVE_IN_ROOT), ldconfig). Fail closed:
 *     anything it cannot read, find or do refuses the container with one line, never half-set-up.
 *
 * Paths: discovery looks under dev_root/driver_root as gpuslice sees them; the spec's host paths
 * are written under host_dev_root/host_driver_root (how the host sees the same trees, for a
 * gpuslice running in a container with the host mounted at, say, /host); container paths are the
 * paths relative to the root (/dev/nvidia0, /usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05).
 *
 * Library code: never logs, never writes a file outside a container's root (the CLI writes the spec
 * atomically), never follows a symlink out of the driver root or out of a container's root.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "interposer/ldcache.h"
#include "mig/mig.h"
#include "topo/topo.h"
#include "util/error.h"

struct mps_client; /* util/mps-client.h */

#define CDI_PATH_MAX 1024
/* ---- ld.so.cache: interposer/ldcache.h (gs_ldcache_parse, shared with libgpuslice-cuda.so) ---- */

/* ---- discovery ---- */

enum cdi_cap {
        CDI_CAP_UTILITY = 1 << 0,  /* NVML, nvidia-smi */
        CDI_CAP_COMPUTE = 1 << 1,  /* CUDA, PTX JIT, OpenCL */
        CDI_CAP_VIDEO = 1 << 2,    /* NVENC / NVDEC */
        CDI_CAP_GRAPHICS = 1 << 3, /* GL, EGL, Vulkan */
        CDI_CAP_ALL = 0xf,
};
/* "compute,utility" / "all" → bits. 0 or -EINVAL (unknown name; *ret_bad points at it). "" → 0 bits. */
int cdi_caps_parse(const char *s, unsigned *ret, const char **ret_bad);

enum cdi_file_kind {
        CDI_FILE_LIBRARY,
        CDI_FILE_BINARY,
        CDI_FILE_IPC
};

struct cdi_file {
        enum cdi_file_kind kind;
        unsigned cap;              /* enum cdi_cap bit */
        char path[CDI_PATH_MAX];   /* inside the root: /usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05 */
        char source[CDI_PATH_MAX]; /* the file to mount there, inside the root (path, or a binary's link target) */
        char soname[128];          /* libraries: "libcuda.so.1" ("" unknown) */
};

struct cdi_devnode {
        char path[64]; /* inside the container: /dev/nvidia0 */
        unsigned major, minor;
        char type; /* 'c' */
};

/* One MIG device: its parent's node (gpu[] of the discovery) and its two capability nodes. */
struct cdi_mig {
        unsigned gpu;              /* topo GPU position */
        unsigned index;            /* MIG index */
        char uuid[96];             /* "MIG-…" */
        struct cdi_devnode gi, ci; /* /dev/nvidia-caps/nvidia-cap<M>: gpuN/giG/access, gpuN/giG/ciC/access */
};

#define CDI_MIG_MINORS "/proc/driver/nvidia-caps/mig-minors"

struct cdi_discovery {
        char driver_version[80];
        struct cdi_devnode control[4]; /* nvidiactl, nvidia-uvm, nvidia-uvm-tools, nvidia-modeset: those present */
        unsigned n_control;
        struct cdi_devnode gpu[TOPO_MAX_GPUS]; /* by topo GPU position; major 0 = absent */
        struct cdi_file *files;
        size_t n_files;
        char lib_dirs[8][CDI_PATH_MAX]; /* distinct directories of the libraries, for ldconfig */
        unsigned n_lib_dirs;
        struct cdi_mig *mig; /* MIG devices (cdi_discover_mig) */
        size_t n_mig;
};

struct cdi_roots {
        const char *dev_root;    /* default "/" */
        const char *driver_root; /* default "/" */
};

/*
 * Find what the node offers for the GPUs of t (minor numbers) and t->driver_version: device nodes
 * that exist as character devices, libraries of the wanted capabilities listed in
 * driver_root/etc/ld.so.cache whose file is lib*.so.<driver version>, binaries in the usual bin
 * directories, IPC sockets. 0 or -errno with err (one line) filled: -ENOENT no ld cache, -EBADMSG
 * malformed cache, -ENODATA no library of the driver version found. Free with cdi_discovery_done.
 */
int cdi_discover(const struct topo *t, const struct cdi_roots *roots, unsigned caps, struct cdi_discovery *ret,
                 struct gs_error *err);
void cdi_discovery_done(struct cdi_discovery *d);
/* The device nodes alone (control nodes, the GPUs' nodes), no driver files: what a node whose ld cache cannot
 * be read still offers. Never fails; ret is filled (free with cdi_discovery_done). */
void cdi_discover_nodes(const struct topo *t, const struct cdi_roots *roots, struct cdi_discovery *ret);

/*
 * Add the MIG devices of mig (GPUs with MIG on) to d: each one's capability nodes, whose minors the
 * driver's mig-minors text (the file mig_minors, read whole) gives for gpu<device minor>/gi<G>/access and
 * gpu<minor>/gi<G>/ci<C>/access, and which exist as character devices under the dev root. 0, or -errno
 * with err: -ENOENT the file or a node is missing (a MIG device a container could not use: nothing is
 * offered rather than that), -ENODEV the parent's /dev/nvidiaN is missing.
 */
int cdi_discover_mig(const struct topo *t, const struct mig_node *mig, const struct cdi_roots *roots,
                     const char *mig_minors, struct cdi_discovery *d, struct gs_error *err);

/* ---- the spec ---- */

struct cdi_spec_options {
        const char *kind; /* "nvidia.com/gpu" */
        /* The host's view of the roots (gpuslice in a container reads them elsewhere; the runtime on the host reads
         * the spec): the prefix of deviceNodes' hostPath and of the driver files' mount hostPath. NULL or "": the
         * roots gpuslice reads (it runs on the host). */
        const char *host_dev_root;
        const char *host_driver_root;
        const char *hook_path;  /* the host's path of gpuslice for the createContainer hook; NULL or "": no hook */
        const char *interposer; /* host path of libgpuslice-cuda.so: adds "<id>-shared" devices; NULL none */
        /* host path of libgpuslice-nvml.so (NULL none): the shared devices also mount it and the discovery's
         * real NVML (cdi_real_nvml), and preload it after the interposer — not when the real NVML is missing */
        const char *nvml_standin;
};

/* The host's path of the driver's real NVML (the discovered library whose soname is libnvidia-ml.so.1, under
 * the host driver root as the spec names it): 0, or -ENOENT (none found) / -ENAMETOOLONG. */
int cdi_real_nvml(const struct cdi_discovery *d, const struct cdi_roots *roots, const struct cdi_spec_options *o,
                  char *buf, size_t len);

/* Build the spec: one device per GPU by index and by UUID, one per MIG device by "<gpu index>:<MIG index>"
 * and by MIG UUID (the parent's node and the two capability nodes), "all", and with an interposer one
 * "<index>-shared" / "<uuid>-shared" device per GPU. *ret is a new reference. 0 or -EINVAL (bad
 * kind) / -ENOMEM. */
int cdi_spec_build(const struct topo *t, const struct cdi_discovery *d, const struct cdi_roots *roots,
                   const struct cdi_spec_options *o, json_t **ret);
/* ---- one DRA claim's spec ---- */

struct cdi_claim_device {
        const char *name;          /* the CDI device name: "<claim uid>-<device>" ([A-Za-z0-9_.:-]) */
        unsigned gpu;              /* position of its GPU in the topology */
        const struct cdi_mig *mig; /* a MIG device of that GPU (an entry of the discovery's mig[]), or NULL */
};

/* The limiter of a claim with shared devices: the host dir made by limits_dir_create (limits, shm/,
 * ld.so.preload) and the interposer, mounted where every limited container has them (util/limits-dir.h). */
struct cdi_claim_limits {
        const char *dir;
        const char *interposer;
        const char *nvml_standin; /* as in cdi_spec_options; NULL none */
};

/* One claim's spec under o->kind ("gpu.gpuslice.io/claim"): a device per entry of dev[0..n) with its GPU's
 * device node (a MIG device: its parent's node and its two capability nodes); in the spec-wide edits (applied once whichever devices a container gets) the driver's files and
 * hook as in cdi_spec_build, and with limits the limiter's environment (LD_PRELOAD, GPUSLICE_LIMITS) and mounts.
 * 0, -EINVAL (bad kind or name, a GPU without a device node), -ENAMETOOLONG, -ENOMEM. */
int cdi_claim_spec_build(const struct topo *t, const struct cdi_discovery *d, const struct cdi_roots *roots,
                         const struct cdi_spec_options *o, const struct cdi_claim_device *dev, size_t n,
                         const struct cdi_claim_limits *limits, json_t **ret);

/* Add an MPS client's edits to a spec's spec-wide edits (docs/dra.md "Sharing modes"): c's env and mounts (each
 * bind-mounted read-write, util/mps-client.h), then env[0..n_env) ("KEY=value": the client's own limits). 0 or
 * -ENOMEM. */
int cdi_spec_add_mps(json_t *spec, const struct mps_client *c, const char *const *env, size_t n_env);
/* Whether a CDI device name is valid: 1..255 of [A-Za-z0-9_.:-]. */
bool cdi_name_valid(const char *name);

/* The lowest cdiVersion that accepts this spec (names starting with a digit and deviceNodes
 * hostPath need 0.5.0, mount type 0.4.0, annotations 0.6.0; 0.3.0 otherwise). */
const char *cdi_spec_min_version(const json_t *spec);
/* Whether a kind is "vendor/class" as CDI wants it. */
bool cdi_kind_valid(const char *kind);
/* The spec file name for a kind: "nvidia.com-gpu.yaml" (ext "yaml" or "json"). */
int cdi_spec_file_name(const char *kind, const char *ext, char *buf, size_t len);

/* JSON or YAML text of any jansson tree (objects, arrays, strings, integers, booleans).
 * *ret malloc'ed, caller frees. 0 or -ENOMEM / -EINVAL. */
int cdi_format_json(const json_t *v, char **ret);
int cdi_format_yaml(const json_t *v, char **ret);

/* ---- OCI hook input ---- */

#define CDI_OCI_MAX (4u << 20) /* state and config.json larger than this are refused */

/* What the hook needs from the OCI state (stdin) and the bundle's config.json. */
struct cdi_oci {
        int pid; /* container init, 0 unknown */
        char bundle[CDI_PATH_MAX];
        char rootfs[CDI_PATH_MAX]; /* absolute: root.path resolved against the bundle */
        char **env;                /* process.env, NULL-terminated; owned */
        size_t n_env;
};
/* Parse the state JSON (id, pid, bundle). 0 or -EINVAL with err. */
int cdi_oci_parse_state(const char *text, size_t len, struct cdi_oci *ret, struct gs_error *err);
/* Parse config.json into ret (root.path, process.env; the bundle from the state). 0 or -EINVAL. */
int cdi_oci_parse_config(const char *text, size_t len, struct cdi_oci *ret, struct gs_error *err);
void cdi_oci_done(struct cdi_oci *o);

/* ---- generate: discover + build + text (+ atomic write) ---- */

struct cdi_generate {
        struct cdi_roots roots;
        struct cdi_spec_options spec;
        unsigned caps;              /* 0 → CDI_CAP_ALL */
        bool json;                  /* JSON instead of YAML */
        const struct mig_node *mig; /* MIG devices to offer (NULL: none) */
        const char *mig_minors;     /* NULL → CDI_MIG_MINORS */
};
/* The spec text for node t. *ret malloc'ed. 0 or -errno with err. */
int cdi_generate_text(const struct topo *t, const struct cdi_generate *g, char **ret, struct gs_error *err);
/* The same, written atomically to path (temporary file, fsync, rename: the project's atomic writer). */
int cdi_generate_file(const struct topo *t, const struct cdi_generate *g, const char *path, struct gs_error *err);

/*
 * For the node agent: (re)write the node's CDI spec so the names its Allocate answers carry
 * (kind=<index> or kind=<UUID>, and <id>-shared with an interposer) exist. g as the agent's configuration gives it
 * (the roots it reads, their host view and the hook's host path in g->spec, the MIG devices; g->mig_minors NULL:
 * <dev root>/proc/driver/nvidia-caps/mig-minors; g->json is ignored). Output: the environment's GPUSLICE_CDI_SPEC
 * (read with secure_getenv; "none" disables; a path ending in .json writes JSON), else
 * /var/run/cdi/<vendor>-<class>.yaml. The path written goes to ret_path. 0 written, 1 disabled, -errno with err.
 */
int cdi_agent_refresh(const struct topo *t, const struct cdi_generate *g, char *ret_path, size_t path_len,
                      struct gs_error *err);

/* ---- the OCI hook (hook.c; `gpuslice hook` is its command line) ---- */

#define CDI_HOOK_LINKS_MAX 256
#define CDI_HOOK_LDCONFIG_MAX 8

/* Which hook stage runs where: prestart and createRuntime in the runtime's mount namespace (the hook
 * joins the container's), createContainer in the container's; the stages after start do nothing. */
enum cdi_hook_stage {
        CDI_HOOK_STAGE_NOTHING = 0,  /* poststart, startContainer, poststop */
        CDI_HOOK_STAGE_RUNTIME_NS,   /* prestart, createRuntime */
        CDI_HOOK_STAGE_CONTAINER_NS, /* createContainer */
};
/* 0 or -EINVAL (an unknown stage). */
int cdi_hook_stage(const char *name, enum cdi_hook_stage *ret);

/* The OCI state from fd (the hook's stdin) and the bundle's config.json into ret (free with
 * cdi_oci_done). 0 or -errno with err: what could not be read or parsed. */
int cdi_hook_read_oci(int fd, struct cdi_oci *ret, struct gs_error *err);

/* What to do inside one container's root. */
struct cdi_hook_link {
        char target[128];        /* a file name (no '/'): the link's content */
        char path[CDI_PATH_MAX]; /* absolute, inside the root */
};
struct cdi_hook_plan {
        char rootfs[CDI_PATH_MAX]; /* the container's root filesystem (absolute, as the runtime sees it) */
        int pid;                   /* > 0: join this process's mount namespace first */
        char driver_root[CDI_PATH_MAX];
        const struct cdi_devnode *nodes[TOPO_MAX_GPUS + 4]; /* device nodes to create (borrowed) */
        size_t n_nodes;
        const struct cdi_discovery *d; /* its files to bind-mount (read-only but sockets), NULL none (borrowed) */
        struct cdi_hook_link *links;   /* malloc'ed */
        size_t n_links;
        char ldconfig[CDI_HOOK_LDCONFIG_MAX][CDI_PATH_MAX]; /* directories for the container's ld cache */
        size_t n_ldconfig;
        const char *ldconfig_bin; /* NULL: /sbin/ldconfig, else /usr/sbin/ldconfig */
};
/* Add a link (target: a file name; path: absolute). 0, -EINVAL, -E2BIG (too many), -ENOMEM. */
int cdi_hook_plan_link(struct cdi_hook_plan *p, const char *target, const char *path);
/* Add a directory for ldconfig (absolute). 0, -EINVAL, -E2BIG. */
int cdi_hook_plan_ldconfig(struct cdi_hook_plan *p, const char *dir);
void cdi_hook_plan_done(struct cdi_hook_plan *p);

/* The legacy-image hook's decision for a container (`gpuslice hook [STAGE]`): its
 * NVIDIA_VISIBLE_DEVICES (indices, UUIDs, all; none and void and unset: nothing to do),
 * NVIDIA_DRIVER_CAPABILITIES and NVIDIA_REQUIRE_* / NVIDIA_DISABLE_REQUIRE / CUDA_VERSION checked
 * against the node (load_node fills the node's GPUs and driver: asked only for a GPU container),
 * then the plan: the GPUs' and the control device nodes, the driver's files of those capabilities,
 * the soname and libcuda.so links, the ld cache directories. d receives the discovery the plan
 * borrows (free with cdi_discovery_done after the plan). 0 (a plan to apply), 1 (nothing to do), or
 * the refusal: -errno with err saying what failed and, for requirements, what the node has. */
struct cdi_hook_legacy {
        const struct cdi_oci *oci;
        enum cdi_hook_stage stage;
        struct cdi_roots roots;
        int (*load_node)(void *userdata, struct topo *ret, struct gs_error *err);
        void *userdata;
};
int cdi_hook_plan_legacy(const struct cdi_hook_legacy *in, struct cdi_discovery *d, struct cdi_hook_plan *ret,
                         struct gs_error *err);

/* NVIDIA_VISIBLE_DEVICES (a list of indices or UUIDs, "all", "none") → ret_sel[i] for GPU i of t.
 * 0, or -EINVAL / -ENODEV (no such GPU, or one not usable) with err. */
int cdi_hook_select_gpus(const struct topo *t, const char *list, bool *ret_sel, struct gs_error *err);

/* Apply a plan in a child process (so joining a mount namespace never touches the caller): device
 * nodes made, files bind-mounted (read-only, nosuid, nodev; IPC sockets writable), links made, every
 * path resolved inside the root (openat2 RESOLVE_IN_ROOT: a symlink in the image cannot lead out of
 * it), then ldconfig -r ROOT (best effort: images without /etc or with a foreign libc keep theirs).
 * 0, or the first failure as -errno with err (the container must be refused). */
int cdi_hook_apply(const struct cdi_hook_plan *p, struct gs_error *err);
