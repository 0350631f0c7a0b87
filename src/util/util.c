/* SPDX-License-Identifier: Apache-2.0 */
/* util — checked number and size parsing, whole-file reads. */
#include "util/util.h"

#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
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

int buffer_reserve(char **buf, size_t *cap, size_t need) {
        return array_reserve(buf, cap, need, 4096);
}

int read_fd(int fd, size_t max, char **ret, size_t *ret_len) {
        size_t cap = 4096, len = 0;
        _cleanup_(freep) char *buf = malloc(cap);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                if (len + 1 >= cap) {
                        if (cap > max + 1)
                                return -EFBIG;
                        size_t ncap = cap * 2;
                        char *nb = realloc(buf, ncap);
                        if (!nb)
                                return -ENOMEM;
                        buf = nb;
                        cap = ncap;
                }
                ssize_t k = read(fd, buf + len, cap - len - 1);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                len += (size_t)k;
                if (len > max)
                        return -EFBIG;
        }
        buf[len] = '\0';
        if (ret_len)
                *ret_len = len;
        *ret = TAKE_PTR(buf);
        return 0;
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

int gs_buf_append(struct gs_buf *b, const void *data, size_t n) {
        if (b->max && (n > b->max || b->len > b->max - n)) {
                b->overflow = true;
                return -EFBIG;
        }
        if (n > SIZE_MAX - b->len - 1 || buffer_reserve(&b->p, &b->cap, b->len + n + 1) < 0) {
                b->no_mem = true;
                return -ENOMEM;
        }
        memcpy(b->p + b->len, data, n);
        b->len += n;
        b->p[b->len] = '\0';
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

int read_file_at(int dfd, const char *name, int flags, size_t max, char **ret, size_t *ret_len) {
        _cleanup_(closep) int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | flags);
        if (fd < 0)
                return -errno;
        return read_fd(fd, max, ret, ret_len);
}
