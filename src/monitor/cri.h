/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cri — names of containers from the Kubernetes Container Runtime Interface: one
 * RuntimeService/ListContainers call (runtime.v1, proto/cri-subset.proto) over the runtime's unix
 * socket (containerd, CRI-O), through src/rpc's unary client. The answer is turned into the same
 * struct engine_container the Engine API client gives, so naming has one code path
 * (monitor_name_process).
 *
 * Must never: log, or trust the peer's message beyond what protobuf-c validated.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

#define CRI_LIST_CONTAINERS "/runtime.v1.RuntimeService/ListContainers"
#define CRI_TIMEOUT_MS 2000

/* ListContainersResponse bytes → running containers with their Kubernetes labels. *ret malloc'ed
 * (NULL when none), caller frees. -EBADMSG when the bytes do not decode, -ENOMEM. */
int cri_parse_list(const uint8_t *msg, size_t len, struct engine_container **ret, size_t *ret_n);

/* Ask the runtime at `socket` (a path, or "unix:///path") for its running containers.
 * -ECONNREFUSED when nothing answers, -ETIMEDOUT, -EREMOTEIO for a gRPC error, -EBADMSG. */
int cri_list(const char *socket, struct engine_container **ret, size_t *ret_n);
