/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics — the exposition text builder and the agent's counter registry (see metrics.h).
 * The registry is the one piece of global state here: a mutex-guarded append-only list whose
 * entries are bumped with atomics, so hot paths never take the lock. Must never log.
 */
#include "metrics/metrics.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>

/* Room for n more bytes in util's buffer; false once anything failed (the text is incomplete then). */
bool metrics_text_reserve(struct metrics_text *t, size_t n) {
        return !t->b.no_mem && gs_buf_reserve(&t->b, n) == 0;
}

void metrics_text_printf(struct metrics_text *t, const char *fmt, ...) {
        if (t->b.no_mem)
                return;
        va_list ap;
        va_start(ap, fmt);
        if (gs_buf_vprintf(&t->b, fmt, ap) < 0)
                t->b.no_mem = true;
        va_end(ap);
}

void metrics_text_append(struct metrics_text *t, const char *s, size_t n) {
        if (!t->b.no_mem)
                gs_buf_append(&t->b, s, n);
}

static void text_putc(struct metrics_text *t, char c) {
        metrics_text_append(t, &c, 1);
}

/* Bytes copied as they are: ASCII except the backslash, the newline and (in label values) the
 * double quote. */
static bool plain_byte(unsigned char c, bool quote) {
        return c < 0x80 && c != '\\' && c != '\n' && c != '\0' && !(quote && c == '"');
}

/* Escaped as the text format wants, and valid UTF-8 whatever comes in: label values carry process
 * names (/proc/PID/comm, any bytes a workload chooses) and Prometheus refuses a whole scrape over
 * one invalid byte. Each byte that does not start a well-formed sequence becomes U+FFFD. Runs of
 * plain bytes (all of most values) are copied at once. */
static void text_escaped(struct metrics_text *t, const char *s, bool quote) {
        if (!s)
                return;
        const char *end = s + strlen(s);
        while (s < end) {
                const char *run = s;
                while (s < end && plain_byte((unsigned char)*s, quote))
                        s++;
                if (s > run)
                        metrics_text_append(t, run, (size_t)(s - run));
                if (s == end)
                        break;
                size_t k = utf8_seq_len(s, (size_t)(end - s));
                if (k == 0) {
                        metrics_text_append(t, "\xef\xbf\xbd", 3);
                        s++;
                } else if (k > 1) {
                        metrics_text_append(t, s, k);
                        s += k;
                } else {
                        char esc[2] = { '\\', *s == '\n' ? 'n' : *s };
                        metrics_text_append(t, esc, 2);
                        s++;
                }
        }
}

void metrics_text_escaped(struct metrics_text *t, const char *s) {
        text_escaped(t, s, true);
}

void metrics_text_family(struct metrics_text *t, const char *name, const char *type, const char *help) {
        metrics_text_printf(t, "# HELP %s ", name);
        text_escaped(t, help, false);
        metrics_text_printf(t, "\n# TYPE %s %s\n", name, type);
}

/* v in decimal, backwards from the end of buf; returns where it starts. */
static char *u64_digits(uint64_t v, char *end) {
        do {
                *--end = (char)('0' + v % 10);
                v /= 10;
        } while (v);
        return end;
}

void metrics_text_uint(struct metrics_text *t, uint64_t v) {
        char buf[24], *p = u64_digits(v, buf + sizeof buf);
        metrics_text_append(t, p, (size_t)(buf + sizeof buf - p));
}

void metrics_text_value(struct metrics_text *t, double v) {
        if (isnan(v))
                metrics_text_append(t, "NaN", 3);
        else if (isinf(v))
                metrics_text_append(t, v > 0 ? "+Inf" : "-Inf", 4);
        else if (v == floor(v) && fabs(v) < 1e15) {
                if (v >= 0 && !signbit(v))
                        metrics_text_uint(t, (uint64_t)v); /* = "%.0f" of a whole number below 1e15 */
                else
                        metrics_text_printf(t, "%.0f", v);
        } else
                metrics_text_printf(t, "%.12g", v);
}

void metrics_text_sample(struct metrics_text *t, const char *name, const char *const *labels, double value) {
        metrics_text_append(t, name, strlen(name));
        if (labels && labels[0]) {
                text_putc(t, '{');
                for (size_t i = 0; labels[i]; i += 2) {
                        if (i)
                                text_putc(t, ',');
                        metrics_text_append(t, labels[i], strlen(labels[i]));
                        metrics_text_append(t, "=\"", 2);
                        text_escaped(t, labels[i + 1], true);
                        text_putc(t, '"');
                }
                text_putc(t, '}');
        }
        text_putc(t, ' ');
        metrics_text_value(t, value);
        text_putc(t, '\n');
}

void metrics_text_sample_span(struct metrics_text *t, const char *name, struct metrics_span labels, double value) {
        size_t nl = strlen(name);
        if (labels.len == 0 || labels.off + labels.len > t->b.len) {
                metrics_text_sample(t, name, NULL, value);
                return;
        }
        if (!metrics_text_reserve(t, nl + labels.len + 3))
                return; /* from here on t->b.p stays where it is for these copies */
        /* name{, then the labels from where they are in this same buffer, then } */
        metrics_text_append(t, name, nl);
        metrics_text_append(t, "{", 1);
        memmove(t->b.p + t->b.len, t->b.p + labels.off, labels.len);
        t->b.len += labels.len;
        metrics_text_append(t, "}", 1);
        text_putc(t, ' ');
        metrics_text_value(t, value);
        text_putc(t, '\n');
}

int metrics_escape_label(const char *value, char *buf, size_t len) {
        struct metrics_text t = { 0 };
        text_escaped(&t, value, true);
        if (t.b.no_mem) {
                metrics_text_done(&t);
                return -ENOMEM;
        }
        const char *s = t.b.p ? t.b.p : "";
        int r = strlen(s) < len ? 0 : -ENOBUFS;
        strscpy(buf, s, len);
        metrics_text_done(&t);
        return r;
}

int metrics_text_finish(struct metrics_text *t, char **ret, size_t *ret_len) {
        return gs_buf_finish(&t->b, ret, ret_len);
}

void metrics_text_done(struct metrics_text *t) {
        gs_buf_done(&t->b);
}

bool metrics_valid_name(const char *s) {
        if (!s || !s[0] || isdigit((unsigned char)s[0]))
                return false;
        for (; *s; s++)
                if (!isalnum((unsigned char)*s) && *s != '_' && *s != ':')
                        return false;
        return true;
}

/* ---- registry ---- */

static const double bucket_bounds[] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                        0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10 };
#define N_BUCKETS ELEMENTSOF(bucket_bounds)

enum entry_kind {
        ENTRY_COUNTER,
        ENTRY_HISTOGRAM,
        ENTRY_GAUGE
};

struct entry {
        struct entry *next;
        enum entry_kind kind;
        char *name, *help, *label_key, *label_value;
};

struct metrics_counter {
        struct entry e;
        uint64_t value;
};

struct metrics_gauge {
        struct entry e;
        uint64_t bits; /* the double's bits, atomically */
};

struct metrics_histogram {
        struct entry e;
        uint64_t buckets[N_BUCKETS]; /* non-cumulative; summed when written */
        uint64_t count;
        uint64_t sum_ns; /* sum of observations in ns, exact with atomics */
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry *registry_head, **registry_tail = &registry_head;

static bool same_label(const char *a, const char *b) {
        return (!a && !b) || (a && b && streq(a, b));
}

static struct entry *registry_get(enum entry_kind kind, size_t size, const char *name, const char *help, const char *lk,
                                  const char *lv) {
        if (!metrics_valid_name(name) || !help || (!lk) != (!lv) || (lk && !metrics_valid_name(lk)))
                return NULL;
        pthread_mutex_lock(&registry_lock);
        struct entry *e;
        for (e = registry_head; e; e = e->next)
                if (e->kind == kind && streq(e->name, name) && same_label(e->label_key, lk) &&
                    same_label(e->label_value, lv))
                        goto done;
        e = calloc(1, size);
        if (!e)
                goto done;
        e->kind = kind;
        e->name = strdup(name);
        e->help = strdup(help);
        e->label_key = lk ? strdup(lk) : NULL;
        e->label_value = lv ? strdup(lv) : NULL;
        if (!e->name || !e->help || (lk && (!e->label_key || !e->label_value))) {
                free(e->name);
                free(e->help);
                free(e->label_key);
                free(e->label_value);
                free(e);
                e = NULL;
                goto done;
        }
        *registry_tail = e;
        registry_tail = &e->next;
done:
        pthread_mutex_unlock(&registry_lock);
        return e;
}

struct metrics_counter *metrics_counter_get(const char *name, const char *help, const char *label_key,
                                            const char *label_value) {
        return (struct metrics_counter *)registry_get(ENTRY_COUNTER, sizeof(struct metrics_counter), name, help,
                                                      label_key, label_value);
}

void metrics_counter_add(struct metrics_counter *c, uint64_t n) {
        if (c)
                __atomic_add_fetch(&c->value, n, __ATOMIC_RELAXED);
}

uint64_t metrics_counter_value(const struct metrics_counter *c) {
        return c ? __atomic_load_n(&c->value, __ATOMIC_RELAXED) : 0;
}

struct metrics_gauge *metrics_gauge_get(const char *name, const char *help, const char *label_key,
                                        const char *label_value) {
        if (!name || (strlen(name) > 6 && streq(name + strlen(name) - 6, "_total")))
                return NULL; /* a gauge named like a counter */
        return (struct metrics_gauge *)registry_get(ENTRY_GAUGE, sizeof(struct metrics_gauge), name, help, label_key,
                                                    label_value);
}

void metrics_gauge_set(struct metrics_gauge *g, double v) {
        uint64_t bits;
        memcpy(&bits, &v, sizeof bits);
        if (g)
                __atomic_store_n(&g->bits, bits, __ATOMIC_RELAXED);
}

double metrics_gauge_value(const struct metrics_gauge *g) {
        if (!g)
                return 0;
        uint64_t bits = __atomic_load_n(&g->bits, __ATOMIC_RELAXED);
        double v;
        memcpy(&v, &bits, sizeof v);
        return v;
}

struct metrics_histogram *metrics_histogram_get(const char *name, const char *help, const char *label_key,
                                                const char *label_value) {
        return (struct metrics_histogram *)registry_get(ENTRY_HISTOGRAM, sizeof(struct metrics_histogram), name, help,
                                                        label_key, label_value);
}

void metrics_histogram_observe(struct metrics_histogram *h, double seconds) {
        if (!h || !(seconds >= 0))
                return;
        size_t b = 0;
        while (b < N_BUCKETS && seconds > bucket_bounds[b])
                b++;
        if (b < N_BUCKETS)
                __atomic_add_fetch(&h->buckets[b], 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&h->count, 1, __ATOMIC_RELAXED);
        double ns = seconds * 1e9;
        __atomic_add_fetch(&h->sum_ns, ns > 1.8e19 ? UINT64_MAX / 2 : (uint64_t)ns, __ATOMIC_RELAXED);
}

static void format_histogram(struct metrics_text *t, const struct metrics_histogram *h) {
        const struct entry *e = &h->e;
        char name[256], le[32];
        uint64_t cum = 0;
        snprintf(name, sizeof name, "%s_bucket", e->name);
        for (size_t b = 0; b <= N_BUCKETS; b++) {
                if (b < N_BUCKETS) {
                        cum += __atomic_load_n(&h->buckets[b], __ATOMIC_RELAXED);
                        snprintf(le, sizeof le, "%g", bucket_bounds[b]);
                }
                const char *labels[5];
                size_t k = 0;
                if (e->label_key) {
                        labels[k++] = e->label_key;
                        labels[k++] = e->label_value;
                }
                labels[k++] = "le";
                labels[k++] = b < N_BUCKETS ? le : "+Inf";
                labels[k] = NULL;
                uint64_t v = b < N_BUCKETS ? cum : __atomic_load_n(&h->count, __ATOMIC_RELAXED);
                metrics_text_sample(t, name, labels, (double)MAX(v, cum));
        }
        const char *labels[] = { e->label_key, e->label_value, NULL };
        snprintf(name, sizeof name, "%s_sum", e->name);
        metrics_text_sample(t, name, labels, (double)__atomic_load_n(&h->sum_ns, __ATOMIC_RELAXED) / 1e9);
        snprintf(name, sizeof name, "%s_count", e->name);
        metrics_text_sample(t, name, labels, (double)__atomic_load_n(&h->count, __ATOMIC_RELAXED));
}

void metrics_registry_format(struct metrics_text *t) {
        pthread_mutex_lock(&registry_lock);
        /* group by family: write each name's HELP/TYPE at its first entry, then all its entries */
        for (const struct entry *e = registry_head; e; e = e->next) {
                bool seen = false;
                for (const struct entry *p = registry_head; p != e; p = p->next)
                        if (p->kind == e->kind && streq(p->name, e->name))
                                seen = true;
                if (seen)
                        continue;
                static const char *const type[] = {
                        [ENTRY_COUNTER] = "counter", [ENTRY_HISTOGRAM] = "histogram", [ENTRY_GAUGE] = "gauge"
                };
                metrics_text_family(t, e->name, type[e->kind], e->help);
                for (const struct entry *q = e; q; q = q->next) {
                        if (q->kind != e->kind || !streq(q->name, e->name))
                                continue;
                        const char *labels[] = { q->label_key, q->label_value, NULL };
                        if (q->kind == ENTRY_COUNTER)
                                metrics_text_sample(t, q->name, labels,
                                                    (double)metrics_counter_value((const struct metrics_counter *)q));
                        else if (q->kind == ENTRY_GAUGE)
                                metrics_text_sample(t, q->name, labels,
                                                    metrics_gauge_value((const struct metrics_gauge *)q));
                        else {
                                format_histogram(t, (const struct metrics_histogram *)q);
                        }
                }
        }
        pthread_mutex_unlock(&registry_lock);
}
