/* SPDX-License-Identifier: Apache-2.0 */
/* util — checked number and size parsing, whole-file reads. */
#include "util/util.h"

#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <sys/stat.h>

size_t utf8_seq_len(const char *str, size_t n) {
        const unsigned char *s = (const unsigned char *)str;
        if (s[0] < 0x80)
                return 1;
        size_t len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
        if (len == 0 || s[0] > 0xf4 || s[0] == 0xc0 || s[0] == 0xc1 || len > n)
                return 0;
        uint32_t cp = s[0] & (0x7f >> len);
        for (size_t i = 1; i < len; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (s[i] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return len;
}

bool utf8_printable(const char *s, size_t n) {
        for (size_t i = 0; i < n;) {
                unsigned char c = (unsigned char)s[i];
                if (c < 0x20 || c == 0x7f)
                        return false;
                size_t k = utf8_seq_len(s + i, n - i);
                if (k == 0)
                        return false;
                i += k;
        }
        return true;
}

int hex_digit(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

int parse_uint(const char *s, unsigned max, unsigned *ret) {
        uint64_t v;
        int r = parse_u64(s, &v);
        if (r < 0)
                return r;
        if (v > max)
                return -ERANGE;
        *ret = (unsigned)v;
        return 0;
}

int parse_u64(const char *s, uint64_t *ret) {
        if (!s || !isdigit((unsigned char)s[0]))
                return -EINVAL;
        errno = 0;
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno == ERANGE)
                return -ERANGE;
        if (*end != '\0')
                return -EINVAL;
        *ret = v;
        return 0;
}

int parse_size(const char *s, uint64_t *ret) {
        static const struct {
                const char *suffix;
                uint64_t factor;
        } units[] = {
                { "", 1 },
                { "B", 1 },
                { "K", 1ULL << 10 },
                { "KiB", 1ULL << 10 },
                { "KB", 1000ULL },
                { "M", 1ULL << 20 },
                { "MiB", 1ULL << 20 },
                { "MB", 1000000ULL },
                { "G", 1ULL << 30 },
                { "GiB", 1ULL << 30 },
                { "GB", 1000000000ULL },
                { "T", 1ULL << 40 },
                { "TiB", 1ULL << 40 },
                { "TB", 1000000000000ULL },
        };
        if (!s || !isdigit((unsigned char)s[0]))
                return -EINVAL;
        /* Decimal digits with at most one '.': strtod alone would also take "0x1p4", "1e3" and
         * "infinity", and a double cannot hold every 64-bit byte count exactly. */
        size_t int_len = strspn(s, "0123456789"), frac_len = 0;
        const char *end = s + int_len;
        if (*end == '.') {
                frac_len = strspn(end + 1, "0123456789");
                if (frac_len == 0)
                        return -EINVAL;
                end += 1 + frac_len;
        }
        while (*end == ' ')
                end++;
        for (size_t i = 0; i < ELEMENTSOF(units); i++) {
                if (strcasecmp(end, units[i].suffix) != 0 && strcmp(end, units[i].suffix) != 0)
                        continue;
                if (strcmp(end, units[i].suffix) != 0 && strcasecmp(end, units[i].suffix) == 0 &&
                    (end[0] == 'm' || end[0] == 'b'))
                        continue; /* "m"/"b" are ambiguous (milli, bits): refuse */
                if (frac_len == 0) {
                        /* exact integer arithmetic */
                        errno = 0;
                        unsigned long long v = strtoull(s, NULL, 10);
                        if (errno == ERANGE || v > UINT64_MAX / units[i].factor)
                                return -ERANGE;
                        *ret = (uint64_t)v * units[i].factor;
                        return 0;
                }
                errno = 0;
                double v = strtod(s, NULL); /* the shape is checked: only digits and one '.' */
                if (errno == ERANGE || !isfinite(v))
                        return -ERANGE;
                double bytes = v * (double)units[i].factor;
                if (bytes >= 18446744073709551615.0) /* 2^64 as a double */
                        return -ERANGE;
                /* bytes < 2^64 - 2048 here: + 0.5 and the conversion stay in range (llround does not
                 * past 2^63) */
                *ret = (uint64_t)(bytes + 0.5);
                return 0;
        }
        return -EINVAL;
}

void cond_init_monotonic(pthread_cond_t *c) {
        pthread_condattr_t a;
        pthread_condattr_init(&a);
        pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
        pthread_cond_init(c, &a);
        pthread_condattr_destroy(&a);
}

struct timespec timespec_after_ms(clockid_t clock, uint64_t ms) {
        struct timespec ts;
        clock_gettime(clock, &ts);
        ts.tv_sec += (time_t)(ms / 1000);
        ts.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
        return ts;
}

uint64_t monotonic_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

char *format_size(uint64_t bytes, char *buf, size_t len) {
        if (bytes >= (1ULL << 30) && bytes % (1ULL << 30) == 0)
                snprintf(buf, len, "%" PRIu64 " GiB", bytes >> 30);
        else if (bytes >= (1ULL << 30))
                snprintf(buf, len, "%.1f GiB", (double)bytes / (double)(1ULL << 30));
        else if (bytes >= (1ULL << 20))
                snprintf(buf, len, "%" PRIu64 " MiB", bytes >> 20);
        else
                snprintf(buf, len, "%" PRIu64 " B", bytes);
        return buf;
}

int array_reserve_size(void **items, size_t *cap, size_t need, size_t size, size_t first) {
        if (need <= *cap)
                return 0;
        size_t c = *cap ? *cap : MAX(first, (size_t)1);
        while (c < need) {
                if (c > SIZE_MAX / 2)
                        return -ENOMEM;
                c *= 2;
        }
        if (size && c > SIZE_MAX / size)
                return -ENOMEM;
        void *p = realloc(*items, c * size);
        if (!p)
                return -ENOMEM;
        *items = p;
        *cap = c;
        return 0;
}

int read_fd(int fd, size_t max, char **ret, size_t *ret_len) {
        struct gs_buf b = { 0 };
        for (;;) {
                if (gs_buf_reserve(&b, 4096) < 0) {
                        gs_buf_done(&b);
                        return -ENOMEM;
                }
                ssize_t k = read(fd, b.p + b.len, b.cap - b.len - 1);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        int r = -errno;
                        gs_buf_done(&b);
                        return r;
                }
                if (k == 0)
                        break;
                b.len += (size_t)k;
                b.p[b.len] = '\0';
                if (b.len > max) {
                        gs_buf_done(&b);
                        return -EFBIG;
                }
        }
        return gs_buf_finish(&b, ret, ret_len);
}

bool crash_point_due(const char *point) {
        const char *want = secure_getenv("GPUSLICE_CRASH_AT");
        if (!want || !want[0] || !point)
                return false;
        size_t n = strlen(point);
        if (strncmp(want, point, n) != 0 || (want[n] != '\0' && want[n] != ':'))
                return false;
        static unsigned hits; /* the process's one crash counter; tests only */
        unsigned nth = 1;
        if (want[n] == ':' && parse_uint(want + n + 1, 1000000, &nth) < 0)
                return false;
        return ++hits >= nth;
}

int gs_buf_reserve(struct gs_buf *b, size_t n) {
        if (b->max && (n > b->max || b->len > b->max - n)) {
                b->overflow = true;
                return -EFBIG;
        }
        if (b->len + n + 1 <= b->cap)
                return 0;
        /* bytes double from 4096 */
        if (n > SIZE_MAX - b->len - 1 || array_reserve(&b->p, &b->cap, b->len + n + 1, 4096) < 0) {
                b->no_mem = true;
                return -ENOMEM;
        }
        b->p[b->len] = '\0'; /* NUL-terminated from its first byte on */
        return 0;
}

int gs_buf_append_grow(struct gs_buf *b, const void *data, size_t n) {
        int r = gs_buf_reserve(b, n);
        if (r < 0)
                return r;
        if (n)
                memcpy(b->p + b->len, data, n);
        b->len += n;
        b->p[b->len] = '\0';
        return 0;
}

int gs_buf_puts(struct gs_buf *b, const char *s) {
        return gs_buf_append(b, s, strlen(s));
}

int gs_buf_vprintf(struct gs_buf *b, const char *fmt, va_list ap) {
        /* one vsnprintf when the text fits the room left (nearly always), a second one only to finish after
         * growing */
        size_t room = b->p ? b->cap - b->len : 0;
        va_list again;
        va_copy(again, ap);
        int n = vsnprintf(room ? b->p + b->len : NULL, room, fmt, ap);
        int r = n < 0                                                ? -EINVAL
                : b->max && (size_t)n > b->max - MIN(b->len, b->max) ? (b->overflow = true, -EFBIG)
                : (size_t)n >= room                                  ? gs_buf_reserve(b, (size_t)n)
                                                                     : 0;
        if (r == 0 && (size_t)n >= room)
                vsnprintf(b->p + b->len, b->cap - b->len, fmt, again);
        va_end(again);
        if (r < 0) {
                if (b->p)
                        b->p[b->len] = '\0'; /* what a cut vsnprintf left past the end is not kept */
                return r;
        }
        b->len += (size_t)n;
        return 0;
}

int gs_buf_printf(struct gs_buf *b, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int r = gs_buf_vprintf(b, fmt, ap);
        va_end(ap);
        return r;
}

int gs_buf_json_string(struct gs_buf *b, const char *s) {
        int r = gs_buf_append(b, "\"", 1);
        const char *end = s + strlen(s);
        while (r == 0 && s < end) {
                const char *run = s;
                while (s < end && (unsigned char)*s >= 0x20 && (unsigned char)*s < 0x80 && *s != '"' && *s != '\\')
                        s++;
                r = gs_buf_append(b, run, (size_t)(s - run));
                if (r < 0 || s == end)
                        break;
                unsigned char c = (unsigned char)*s;
                if (c >= 0x80) {
                        size_t k = utf8_seq_len(s, (size_t)(end - s));
                        r = k ? gs_buf_append(b, s, k) : gs_buf_append(b, "\xef\xbf\xbd", 3);
                        s += k ? k : 1;
                        continue;
                }
                static const char hex[] = "0123456789abcdef";
                const char esc[6] = { '\\', c < 0x20 ? 'u' : (char)c, '0', '0', hex[c >> 4], hex[c & 15] };
                r = gs_buf_append(b, esc, c < 0x20 ? 6 : 2);
                s++;
        }
        return r < 0 ? r : gs_buf_append(b, "\"", 1);
}

int gs_buf_finish(struct gs_buf *b, char **ret, size_t *ret_len) {
        if (gs_buf_failed(b)) {
                int r = b->no_mem ? -ENOMEM : -EFBIG;
                gs_buf_done(b);
                return r;
        }
        size_t len = b->len;
        char *p = gs_buf_take(b);
        if (!p)
                return -ENOMEM;
        *ret = p;
        if (ret_len)
                *ret_len = len;
        return 0;
}

size_t gs_buf_write(char *data, size_t size, size_t nmemb, void *userdata) {
        size_t n = size * nmemb;
        return gs_buf_append(userdata, data, n) == 0 ? n : 0;
}

char *gs_buf_take(struct gs_buf *b) {
        char *p = b->p ? b->p : strdup("");
        b->p = NULL;
        b->len = b->cap = 0;
        return p;
}

void gs_buf_done(struct gs_buf *b) {
        free(b->p);
        b->p = NULL;
        b->len = b->cap = 0;
}

int read_file(const char *path, size_t max, char **ret, size_t *ret_len) {
        return read_file_at(AT_FDCWD, path, 0, max, ret, ret_len);
}

int read_file_at(int dfd, const char *name, unsigned flags, size_t max, char **ret, size_t *ret_len) {
        int oflags = O_RDONLY | O_CLOEXEC | (flags & READ_FILE_NOFOLLOW ? O_NOFOLLOW | O_NOCTTY : 0);
        _cleanup_(closep) int fd = openat(dfd, name, oflags);
        if (fd < 0)
                return -errno;
        if (!(flags & READ_FILE_REGULAR))
                return read_fd(fd, max, ret, ret_len);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        if (st.st_size > (off_t)max)
                return -EFBIG;
        /* read at most one byte past the size it had: a byte more means it grew meanwhile */
        _cleanup_(freep) char *text = NULL;
        size_t len;
        int r = read_fd(fd, (size_t)st.st_size, &text, &len);
        if (r == -EFBIG)
                return -EBADMSG;
        if (r < 0)
                return r;
        *ret = TAKE_PTR(text);
        if (ret_len)
                *ret_len = len;
        return 0;
}
