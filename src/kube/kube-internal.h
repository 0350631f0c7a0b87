/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube-internal — helpers shared by the files of src/kube and their tests: not a public API.
 */
#pragma once

#include <stddef.h>

#include <jansson.h>

#include "util/error.h"

/* YAML text (one document) → JSON tree, every scalar a string. No aliases, bounded depth and
 * node count. *ret owned by the caller. -EINVAL with err "PATH: line N: ...". */
int kube_yaml_to_json(const char *text, size_t len, const char *path, json_t **ret, struct gs_error *err);

/* Strict base64 (whitespace allowed). *ret malloc'ed, NUL-terminated. 0, -EINVAL, -ENOMEM. */
int kube_base64_decode(const char *in, size_t len, char **ret, size_t *ret_len);
