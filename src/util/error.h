/* SPDX-License-Identifier: Apache-2.0 */
/*
 * error — the one way gpuslice's libraries hand an error's details to their caller. A function returns
 * an int (>= 0 success, -errno failure) and, when it has more to say, takes a last argument
 * `struct gs_error *err` (may be NULL) that it fills on failure only: `code` is the value it returned
 * and `message` a line fit for a log or a person, without a trailing newline ("" when there is none).
 * In gRPC handlers and calls (src/rpc) the same struct carries the gRPC status: code is then the
 * status code (enum rpc_code), message the status message sent or received.
 *
 *   if (n > MAX)
 *           return gs_error_set(err, -E2BIG, "line %u: more than %u entries", line, MAX);
 *
 * Must never: log, allocate, or fail (a message that does not fit is cut).
 */
#pragma once

#include <stdarg.h>

#define GS_ERROR_MESSAGE_MAX 256

struct gs_error {
        int code;
        char message[GS_ERROR_MESSAGE_MAX];
};

/* No error yet: code 0, message "". Accepts NULL. */
void gs_error_clear(struct gs_error *e);
/* Set code and the printf-formatted message; returns code. Accepts NULL (then only returns code). */
int gs_error_set(struct gs_error *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int gs_error_setv(struct gs_error *e, int code, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
/* Put "PREFIX: " before the message (e.g. the file or line it came from); returns e->code. Accepts NULL
 * (returns 0). A message that is "" becomes PREFIX alone. */
int gs_error_prefix(struct gs_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
