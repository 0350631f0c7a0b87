/* SPDX-License-Identifier: Apache-2.0 */
/*
 * engine — a client of the Docker-compatible Engine API (Docker's dockerd, `podman system
 * service`) over a unix socket (or plain http on localhost), with libcurl and jansson.
 *
 * gpuslice asks it two things on hosts without Kubernetes: the names of running containers (so
 * a GPU process is shown as "trainer-1", not as a container id) and which GPUs running
 * containers already hold (device nodes /dev/nvidiaN, `--gpus` device requests,
 * NVIDIA_VISIBLE_DEVICES in their environment), so `gpuslice alloc --engine URL` picks among the
 * others. The JSON parsers are pure and fuzzed; only engine_request/engine_list do I/O.
 *
 * Endpoints used: GET /containers/json (running containers: Id, Names, State, Labels) and
 * GET /containers/ID/json (Name, State.Running, HostConfig.Devices, HostConfig.DeviceRequests,
 * Config.Env, Config.Labels).
 *
 * Must never: log, follow redirects, talk to anything but the URL it was given, or trust a
 * length or a count from the peer.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "topo/topo.h"

#define ENGINE_DEFAULT_URL "unix:///run/podman/podman.sock"
#define ENGINE_MAX_DEVICES 32
#define ENGINE_MAX_BODY (16u << 20)
#define ENGINE_TIMEOUT_MS 5000

struct engine_device {
        char path_on_host[256];
        int minor; /* of a character device with the NVIDIA major (195), -1 unknown / other */
};

struct engine_container {
        char id[65];    /* full id, lower-case hex */
        char name[256]; /* without the leading '/' */
        bool running;
        /* Kubernetes labels when the engine runs pods (dockershim, podman kube play), else "" */
        char pod_name[256], pod_namespace[256], pod_uid[64], container_name[256];
        /* GPUs asked for (from /containers/ID/json only) */
        size_t n_devices;
        struct engine_device devices[ENGINE_MAX_DEVICES];
        bool gpus_all;      /* --gpus all, NVIDIA_VISIBLE_DEVICES=all */
        int gpus_count;     /* --gpus N without ids: the first N GPUs; 0 none */
        char gpu_ids[1024]; /* comma list of indices and/or UUIDs (device requests + env) */
};

/* Parse a URL: "unix:///path" or "/path" (→ *ret_socket = path, *ret_base = "http://localhost"),
 * or "http://127.0.0.1:2375" / "tcp://127.0.0.1:2375" (→ *ret_socket = "", *ret_base =
 * "http://127.0.0.1:2375", without a trailing '/').
 * 0 or -EINVAL (other schemes, https, empty). */
int engine_parse_url(const char *url, char *ret_socket, size_t socket_len, char *ret_base, size_t base_len);

/* /containers/json → array of containers (ids, names, state, labels). *ret malloc'ed (NULL when
 * empty), caller frees. -EINVAL when the JSON is not the expected shape, -ENOMEM. */
int engine_parse_list(const char *json, size_t len, struct engine_container **ret, size_t *ret_n);

/* /containers/ID/json → one container with its GPU requests. -EINVAL, -ENOMEM. */
int engine_parse_inspect(const char *json, size_t len, struct engine_container *ret);

/* Fill devices[].minor from the device nodes themselves (stat; NVIDIA major 195). Nodes that
 * do not exist keep the minor their name says (/dev/nvidiaN → N) or -1. */
void engine_resolve_devices(struct engine_container *c);

/*
 * The GPUs of `t` a container holds, as a bit set over GPU indices. A stopped container holds
 * nothing. Device nodes map by minor number (t->gpu[].minor), ids by index or UUID; "all" is
 * every GPU, "none"/"void"/"" nothing; tokens that name no GPU of t (MIG ids, unknown UUIDs)
 * are ignored. Pure.
 */
uint64_t engine_container_gpus(const struct engine_container *c, const struct topo *t);

/*
 * GET path (e.g. "/containers/json") from the engine at url. On HTTP 200 returns 0 with the body
 * (NUL-terminated, caller frees). -ECONNREFUSED/-ENOENT when the socket is not there,
 * -ETIMEDOUT, -EFBIG past ENGINE_MAX_BODY, -EREMOTEIO on another status (*ret_status says which;
 * may be NULL), -EIO otherwise.
 */
int engine_request(const char *url, const char *path, char **ret_body, size_t *ret_len, long *ret_status);

/* Running containers; with `inspect`, each one is also inspected (GPU requests) and its device
 * nodes resolved. A container that disappears between the two calls is dropped. */
int engine_list(const char *url, bool inspect, struct engine_container **ret, size_t *ret_n);
