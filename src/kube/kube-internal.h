/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube-internal — helpers shared by the files of src/kube and their tests: not a public API.
 */
#pragma once

#include <stddef.h>

#include <jansson.h>

#include "kube/yaml.h" /* kube_yaml_to_json: public, the MIG layout files use it too */
#include "util/error.h"

/* Strict base64 (whitespace allowed). *ret malloc'ed, NUL-terminated. 0, -EINVAL, -ENOMEM. */
int kube_base64_decode(const char *in, size_t len, char **ret, size_t *ret_len);
