/* SPDX-License-Identifier: Apache-2.0 */
/* log — structured key=value lines on stderr, one write per line so threads do not interleave. */
#include "util/log.h"

#include <stdatomic.h>
#include <time.h>

static _Atomic int log_level = LOG_INFO;

void log_set_level(enum log_level l) {
        atomic_store(&log_level, (int)l);
}

enum log_level log_get_level(void) {
        return (enum log_level)atomic_load(&log_level);
}

int log_level_from_name(const char *s, enum log_level *ret) {
        static const char *const names[] = { "error", "warn", "info", "debug" };
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (streq(s, names[i])) {
                        *ret = (enum log_level)i;
                        return 0;
                }
        return -EINVAL;
}

int log_full(enum log_level l, int err, const char *msg, const char *fmt, ...) {
        static const char *const names[] = { "error", "warn", "info", "debug" };
        int saved = errno;
        if (err < 0)
                err = -err;
        if ((int)l > atomic_load(&log_level))
                goto out;

        char line[2048];
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        size_t n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
        n += (size_t)snprintf(line + n, sizeof line - n, ".%03ldZ level=%s msg=\"%s\"", ts.tv_nsec / 1000000, names[l],
                              msg);
        if (n < sizeof line && fmt && fmt[0]) {
                line[n++] = ' ';
                va_list ap;
                va_start(ap, fmt);
                int k = vsnprintf(line + n, sizeof line - n, fmt, ap);
                va_end(ap);
                if (k > 0)
                        n += (size_t)k;
        }
        if (n < sizeof line && err)
                n += (size_t)snprintf(line + n, sizeof line - n, " err=\"%s\"", strerror(err));
        if (n >= sizeof line - 1)
                n = sizeof line - 2;
        line[n++] = '\n';
        (void)!write(STDERR_FILENO, line, n);
out:
        errno = saved;
        return -err;
}

int log_msg(enum log_level l, int err, const char *msg) {
        return log_full(l, err, msg, NULL); /* no fields */
}
