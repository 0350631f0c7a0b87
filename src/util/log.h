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
/* The same with no fields: what the macros below call for `log_error_errno(r, "out of memory")`. */
int log_msg(enum log_level l, int err, const char *msg);

/* log_info("msg") or log_info("msg", "key=%s", v): the fields are optional, so no call site needs a dummy
 * format. LOG_PICK_ picks log_msg for one argument and log_full for two to 24. */
#define LOG_PICK_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, _19, _20, _21, _22, \
                  _23, _24, f, ...)                                                                                    \
        f
#define LOG_CALL_(l, err, ...)                                                                                        \
        LOG_PICK_(__VA_ARGS__, log_full, log_full, log_full, log_full, log_full, log_full, log_full, log_full,        \
                  log_full, log_full, log_full, log_full, log_full, log_full, log_full, log_full, log_full, log_full, \
                  log_full, log_full, log_full, log_full, log_full, log_msg, _)                                       \
        (l, err, __VA_ARGS__)

#define log_error(...) LOG_CALL_(LOG_ERR, 0, __VA_ARGS__)
#define log_warn(...) LOG_CALL_(LOG_WARN, 0, __VA_ARGS__)
#define log_info(...) LOG_CALL_(LOG_INFO, 0, __VA_ARGS__)
#define log_debug(...) LOG_CALL_(LOG_DEBUG, 0, __VA_ARGS__)
#define log_error_errno(err, ...) LOG_CALL_(LOG_ERR, err, __VA_ARGS__)
#define log_warn_errno(err, ...) LOG_CALL_(LOG_WARN, err, __VA_ARGS__)
