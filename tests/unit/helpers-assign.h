/* SPDX-License-Identifier: Apache-2.0 */
/*
 * helpers-assign — fixtures of the tests of src/agent/assign.c (test-assign.c): pod objects with
 * containers, limits and annotations as the API server sends them, gpuslice.io/assignment texts,
 * parsed fractional pods, and one kubelet call matched with its verdict checked. Every helper
 * fails the running cmocka test on an error it cannot report otherwise.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "agent/assign.h"

/* The resource names of the gpuslice profile. */
extern const struct assign_names TEST_ASSIGN_NAMES;

/* A pod object of namespace "ns" bound to node "gpu-a": container "a" (and "b" when LIMITS_B) with
 * those limits (JSON objects), ANNOTATIONS (a JSON object text). Caller decrefs. */
json_t *test_assign_pod_json(const char *name, const char *created, const char *limits_a, const char *limits_b,
                             const char *annotations);

/* The annotations object text {"gpuslice.io/assignment": "{...node gpu-a, time T, CONTAINERS}",
 * "gpuslice.io/assigned": "false"} in BUF; returns BUF. */
char *test_assign_annotation(char *buf, size_t len, const char *containers, long long t);

/* assign_pod_parse(J, "gpu-a", names) and json_decref(J); returns its result. */
int test_assign_parse(json_t *j, struct assign_pod *p);

/* A parsed fractional pod: container "a" asks 40 % + 40 memory units, assigned GPU. */
void test_assign_frac_pod(struct assign_pod *p, const char *name, const char *created, int gpu, long long t);

/* One call (kind, size, GetPreferredAllocation or Allocate with its IDs on the GPUs of IDS) matched
 * against PODS[0..N) with SEEN (may be NULL); the match must succeed, and its verdict be VERDICT
 * (-1: any). Returns the decision. */
struct assign_decision test_assign_expect(const struct assign_pod *pods, size_t n, const struct assign_seen *seen,
                                          enum plugin_kind kind, unsigned size, bool allocate, uint64_t ids,
                                          int verdict);
