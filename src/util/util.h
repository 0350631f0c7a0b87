/* SPDX-License-Identifier: Apache-2.0 */
/*
 * util — small helpers shared by every part: cleanup attributes, ownership transfer, bounded
 * string copies, checked number parsing. No global state, no logging.
 */
#pragma once

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _unused_ __attribute__((unused))
#define _pure_ __attribute__((pure))
#define _public_ __attribute__((visibility("default")))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Hand ownership out of a _cleanup_ variable: returns the value and leaves NULL behind. */
#define TAKE_PTR(p)                         \
        ({                                  \
                __typeof__(p) *_pp_ = &(p); \
                __typeof__(p) _p_ = *_pp_;  \
                *_pp_ = NULL;               \
                _p_;                        \
        })
#define TAKE_FD(fd)                 \
        ({                          \
                int *_pfd_ = &(fd); \
                int _fd_ = *_pfd_;  \
                *_pfd_ = -1;        \
                _fd_;               \
        })

static inline void freep(void *p) {
        free(*(void **)p);
}
static inline void closep(int *fd) {
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}
static inline void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}

/* Copy at most len-1 bytes and always terminate (len > 0). Returns dst. */
static inline char *strscpy(char *dst, const char *src, size_t len) {
        size_t n = strnlen(src, len - 1);
        memcpy(dst, src, n);
        dst[n] = '\0';
        return dst;
}
/* Copy exactly srclen bytes of a non-terminated source, truncated to fit. */
static inline char *strnscpy(char *dst, size_t len, const char *src, size_t srclen) {
        size_t n = MIN(srclen, len - 1);
        memcpy(dst, src, n);
        dst[n] = '\0';
        return dst;
}

static inline bool streq(const char *a, const char *b) {
        return strcmp(a, b) == 0;
}
static inline bool startswith(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Length (1..4) of the well-formed UTF-8 sequence at s[0..n) (n > 0), 0 when none starts there:
 * overlong forms, surrogates and code points past U+10FFFF are not well-formed (as JSON, jansson
 * and the Prometheus text format want it). */
size_t utf8_seq_len(const char *s, size_t n);
/* s[0..n) is well-formed UTF-8 without control characters (below 0x20, 0x7f). */
bool utf8_printable(const char *s, size_t n);
/* The value of one hexadecimal digit, -1 when c is none. */
int hex_digit(char c);

/* Checked parsing: whole string, base 10, in range; 0 or -EINVAL / -ERANGE. */
int parse_uint(const char *s, unsigned max, unsigned *ret);
int parse_u64(const char *s, uint64_t *ret);
/* "24GiB", "12066MiB", "16G", "512M", "1024" (bytes), "1.5GiB". 0 or -EINVAL / -ERANGE. */
int parse_size(const char *s, uint64_t *ret);
/* CLOCK's time now plus MS milliseconds: a deadline for pthread_cond_timedwait (CLOCK_REALTIME unless the
 * condition variable was made with another clock). */
struct timespec timespec_after_ms(clockid_t clock, uint64_t ms);
/* CLOCK_MONOTONIC in milliseconds: the one clock for durations, deadlines and periods (never the wall
 * clock, which can jump). */
uint64_t monotonic_ms(void);
/* Initialise C as a condition variable whose timed waits are on CLOCK_MONOTONIC (deadlines from
 * timespec_after_ms(CLOCK_MONOTONIC, ...)): the one place that sets the clock attribute. */
void cond_init_monotonic(pthread_cond_t *c);

/* Format bytes as "24.0 GiB" / "512 MiB". Returns buf. */
char *format_size(uint64_t bytes, char *buf, size_t len);

/* The one whole-file reader: the variants are flags (as systemd's fileio.h has them). */
enum read_file_flags {
        READ_FILE_NOFOLLOW = 1 << 0, /* opened O_NOFOLLOW | O_NOCTTY: a symlink is refused (-ELOOP) */
        READ_FILE_REGULAR = 1 << 1,  /* only a regular file (else -EBADFD), refused before reading when larger than
                                        max (-EFBIG), read at the size it has when opened: a file that grows while
                                        it is read is -EBADMSG (not ours to trust) */
};
/* Read a whole file (at most max bytes; -EFBIG past that), NUL-terminated. Caller frees. */
int read_file(const char *path, size_t max, char **ret, size_t *ret_len);
/* The same for NAME in the directory open as DFD (or AT_FDCWD), with READ_FILE_* flags. */
int read_file_at(int dfd, const char *name, unsigned flags, size_t max, char **ret, size_t *ret_len);

/* Crash points for the fault-injection tests (tests/faults, the DRA kill tests, the extender's e2e
 * restart): true when $GPUSLICE_CRASH_AT (read with secure_getenv) names `point` ("point", or "point:N"
 * for the Nth time this process reaches it); the caller then SIGKILLs itself (after a log line, in a
 * daemon). Always false when the variable is unset. */
bool crash_point_due(const char *point);
/* The same from an open fd (a pipe: until end of file), which stays open. */
int read_fd(int fd, size_t max, char **ret, size_t *ret_len);

/* The one growing byte buffer, with a bound: what an HTTP answer is read into (libcurl's write callback,
 * gs_buf_write), what a JSON or text document is written into. Zero-initialise, set max (0 = no bound),
 * free with gs_buf_done. A failed append sets its flag and keeps nothing of it; the flags stay set, so
 * a writer appends without checking and asks once at the end (gs_buf_failed, gs_buf_finish). */
struct gs_buf {
        char *p; /* NUL-terminated when not NULL */
        size_t len, cap, max;
        bool overflow; /* an append would have passed max (nothing of it was kept) */
        bool no_mem;
};
/* Append n bytes. 0, -EFBIG (past max: overflow set), -ENOMEM (no_mem set). Inline where it fits the room
 * (the JSON writers append a few bytes at a time, MBs per document). */
int gs_buf_append_grow(struct gs_buf *b, const void *data, size_t n);
static inline int gs_buf_append(struct gs_buf *b, const void *data, size_t n) {
        if (b->max || n >= b->cap - b->len) /* cap - len is 0 while p is NULL */
                return gs_buf_append_grow(b, data, n);
        memcpy(b->p + b->len, data, n);
        b->len += n;
        b->p[b->len] = '\0';
        return 0;
}
/* Make room for n more bytes (and the NUL) without writing them: p + len has cap - len bytes. 0, or the
 * errors of gs_buf_append. */
int gs_buf_reserve(struct gs_buf *b, size_t n);
/* Append a NUL-terminated string; printf-style text. The errors of gs_buf_append (-EINVAL: a bad format). */
int gs_buf_puts(struct gs_buf *b, const char *s);
/* A string literal (its length known at compile time; the "" makes sure it is a literal). */
#define GS_BUF_LIT(b, lit) gs_buf_append((b), "" lit, sizeof(lit) - 1)
int gs_buf_printf(struct gs_buf *b, const char *fmt, ...) _printf_(2, 3);
int gs_buf_vprintf(struct gs_buf *b, const char *fmt, va_list ap) _printf_(2, 0);
/* s as a JSON string, quotes included: '"', '\\' and control characters escaped (\u00XX), bytes that are not
 * UTF-8 written as U+FFFD (so the text is always valid JSON). The errors of gs_buf_append. */
int gs_buf_json_string(struct gs_buf *b, const char *s);
/* An append failed since the buffer was made or cleared. */
static inline bool gs_buf_failed(const struct gs_buf *b) {
        return b->overflow || b->no_mem;
}
/* Empty it (the memory kept for the next use) and forget failures. */
static inline void gs_buf_clear(struct gs_buf *b) {
        b->len = 0;
        if (b->p)
                b->p[0] = '\0';
        b->overflow = b->no_mem = false;
}
/* The contents into *ret (NUL-terminated, "" when empty; the caller frees) and *ret_len, or -ENOMEM /
 * -EFBIG when an append failed (nothing returned); the buffer is left empty either way. */
int gs_buf_finish(struct gs_buf *b, char **ret, size_t *ret_len);
/* libcurl's CURLOPT_WRITEFUNCTION for a struct gs_buf in CURLOPT_WRITEDATA: returns 0, which aborts
 * the transfer, when the append fails. */
size_t gs_buf_write(char *data, size_t size, size_t nmemb, void *userdata);
/* The contents (malloc'ed, "" when empty; the caller frees), the buffer left empty; NULL: no memory. */
char *gs_buf_take(struct gs_buf *b);
void gs_buf_done(struct gs_buf *b);

/* A growable array (*items of *cap elements of `size` bytes, NULL/0 to start): make room for `need`
 * elements in all, doubling from `first`. 0, or -ENOMEM (also on overflow) with the array as it was.
 * Use it through array_reserve(), which passes the element size of the pointer's type. */
int array_reserve_size(void **items, size_t *cap, size_t need, size_t size, size_t first);
#define array_reserve(items, cap, need, first) \
        array_reserve_size((void **)(items), (cap), (need), sizeof **(items), (first))
