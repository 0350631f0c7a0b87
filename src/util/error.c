/* SPDX-License-Identifier: Apache-2.0 */
/* error — struct gs_error, the error-detail convention of every library (error.h). */
#include "util/error.h"

#include <stdio.h>
#include <string.h>

void gs_error_clear(struct gs_error *e) {
        if (!e)
                return;
        e->code = 0;
        e->message[0] = 0;
}

int gs_error_setv(struct gs_error *e, int code, const char *fmt, va_list ap) {
        if (!e)
                return code;
        e->code = code;
        if (!fmt || vsnprintf(e->message, sizeof e->message, fmt, ap) < 0)
                e->message[0] = 0;
        return code;
}

int gs_error_set(struct gs_error *e, int code, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int r = gs_error_setv(e, code, fmt, ap);
        va_end(ap);
        return r;
}

int gs_error_prefix(struct gs_error *e, const char *fmt, ...) {
        if (!e)
                return 0;
        char prefix[GS_ERROR_MESSAGE_MAX], old[GS_ERROR_MESSAGE_MAX];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(prefix, sizeof prefix, fmt, ap);
        va_end(ap);
        if (n < 0)
                return e->code;
        memcpy(old, e->message, sizeof old);
        old[sizeof old - 1] = 0;
        /* prefix, then ": " and the old message while they fit (snprintf would warn of the cut) */
        size_t cap = sizeof e->message - 1, len = strnlen(prefix, cap);
        memcpy(e->message, prefix, len);
        const char *parts[2] = { old[0] ? ": " : "", old };
        for (unsigned k = 0; k < 2; k++) {
                size_t m = strnlen(parts[k], cap - len);
                memcpy(e->message + len, parts[k], m);
                len += m;
        }
        e->message[len] = 0;
        return e->code;
}
