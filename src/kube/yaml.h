/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/yaml — the one YAML reader of gpuslice: YAML text (one document) → a jansson tree, every scalar a
 * string (callers check types field by field). Read with libyaml (kubeconfig files, MIG layout files);
 * strict: no aliases, bounded depth, size (KUBE_CONFIG_MAX) and node count. Never logs.
 */
#pragma once

#include <stddef.h>

#include <jansson.h>

#include "util/error.h"

/* *ret owned by the caller. -EINVAL with err "PATH: line N: ...", -EFBIG past KUBE_CONFIG_MAX. */
int kube_yaml_to_json(const char *text, size_t len, const char *path, json_t **ret, struct gs_error *err);
