/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log — the one logger. Lines go to stderr as
 *   2026-11-21T21:30:00.123Z level=info msg="registered" resource=nvidia.com/gpu
 * Daemons and the CLI log; library parts return errors and let their caller log once.
 */
#pragma once

#include <stdarg.h>

#include "util/util.h"

enum log_level {
        LOG_ERR = 0,
        LOG_WARN,
        LOG_INFO,
        LOG_DEBUG
};

void log_set_level(enum log_level l);
enum log_level log_get_level(void);
/* Parse "error", "warn", "info", "debug": 0 or -EINVAL. */
int log_level_from_name(const char *s, enum log_level *ret);

/* msg is a plain sentence; fmt adds key=value fields (may be NULL or ""). Returns -abs(err) when
 * err != 0 so callers can `return log_errno(LOG_ERR, r, "...", ...)`; with err an `err="..."`
 * field (strerror) is added. */
int log_full(enum log_level l, int err, const char *msg, const char *fmt, ...) _printf_(4, 5);

#define log_error(msg, ...) log_full(LOG_ERR, 0, msg, "" __VA_ARGS__)
#define log_warn(msg, ...) log_full(LOG_WARN, 0, msg, "" __VA_ARGS__)
#define log_info(msg, ...) log_full(LOG_INFO, 0, msg, "" __VA_ARGS__)
#define log_debug(msg, ...) log_full(LOG_DEBUG, 0, msg, "" __VA_ARGS__)
#define log_error_errno(err, msg, ...) log_full(LOG_ERR, err, msg, "" __VA_ARGS__)
#define log_warn_errno(err, msg, ...) log_full(LOG_WARN, err, msg, "" __VA_ARGS__)
