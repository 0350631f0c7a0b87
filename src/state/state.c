/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state — the allocation record, its checksummed file format and its crash-safe save.
 * It must never trust a file that fails any check, never leave a torn state file behind, never
 * change signal dispositions or log: callers decide what to do with an error.
 *
 * File layout (docs/configuration.md, "State file"):
 *   gpuslice-state <version> <body length> <crc32c of body, 8 lowercase hex>\n
 *   <body: JSON object, exactly <body length> bytes>
 */
#include "state/state.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/atomic-file.h"
#include "util/util.h"

#define STATE_MAGIC "gpuslice-state"
#define HEADER_MAX 64
#define JSON_INT_MAX_U ((uint64_t)INT64_MAX)

/* ---- CRC-32C, reflected polynomial 0x82F63B78, one nibble at a time -------------------------- */

uint32_t state_crc32c(uint32_t crc, const void *buf, size_t len) {
        static const uint32_t t[16] = {
                0x00000000, 0x105ec76f, 0x20bd8ede, 0x30e349b1, 0x417b1dbc, 0x5125dad3, 0x61c69362, 0x7198540d,
                0x82f63b78, 0x92a8fc17, 0xa24bb5a6, 0xb21572c9, 0xc38d26c4, 0xd3d3e1ab, 0xe330a81a, 0xf36e6f75,
        };
        const unsigned char *p = buf;
        crc = ~crc;
        for (size_t i = 0; i < len; i++) {
                crc ^= p[i];
                crc = (crc >> 4) ^ t[crc & 15];
                crc = (crc >> 4) ^ t[crc & 15];
        }
        return ~crc;
}

/* ---- the record ----------------------------------------------------------------------------- */

void state_init(struct gpuslice_state *s) {
        *s = (struct gpuslice_state){ 0 };
}

void state_done(struct gpuslice_state *s) {
        if (!s)
                return;
        free(s->allocs);
        *s = (struct gpuslice_state){ 0 };
}

int state_copy(const struct gpuslice_state *s, struct gpuslice_state *ret) {
        struct gpuslice_state c = { .generation = s->generation };
        if (s->n_allocs > 0) {
                c.allocs = malloc(s->n_allocs * sizeof *c.allocs);
                if (!c.allocs)
                        return -ENOMEM;
                memcpy(c.allocs, s->allocs, s->n_allocs * sizeof *c.allocs);
                c.n_allocs = c.cap = s->n_allocs;
        }
        *ret = c;
        return 0;
}

/* Terminated within size, free of control characters, and valid UTF-8: every string ends up in
 * the JSON body, and one that cannot be encoded would make every later state_save fail. */
static bool valid_str(const char *s, size_t size, bool required) {
        size_t n = strnlen(s, size);
        if (n == size || (required && n == 0))
                return false;
        return utf8_printable(s, n);
}

int state_alloc_validate(const struct state_alloc *a) {
        if (!a || !valid_str(a->resource, sizeof a->resource, true) ||
            !valid_str(a->device_id, sizeof a->device_id, true) ||
            !valid_str(a->pod_namespace, sizeof a->pod_namespace, false) ||
            !valid_str(a->pod_name, sizeof a->pod_name, false) || !valid_str(a->pod_uid, sizeof a->pod_uid, false) ||
            !valid_str(a->container, sizeof a->container, false))
                return -EINVAL;
        if (a->gpu_index < -1 || a->core_percent > 100 || a->alloc_time > JSON_INT_MAX_U ||
            a->memory_bytes > JSON_INT_MAX_U)
                return -EINVAL;
        return 0;
}

static ssize_t find_index(const struct gpuslice_state *s, const char *resource, const char *device_id) {
        for (size_t i = 0; i < s->n_allocs; i++)
                if (streq(s->allocs[i].device_id, device_id) && (!resource || streq(s->allocs[i].resource, resource)))
                        return (ssize_t)i;
        return -1;
}

const struct state_alloc *state_find(const struct gpuslice_state *s, const char *resource, const char *device_id) {
        if (!s || !device_id)
                return NULL;
        ssize_t i = find_index(s, resource, device_id);
        return i < 0 ? NULL : &s->allocs[i];
}

static int grow(struct gpuslice_state *s, size_t need) {
        if (need <= s->cap)
                return 0;
        if (need > STATE_MAX_ENTRIES)
                return -E2BIG;
        size_t cap = MAX(MAX(s->cap * 2, (size_t)8), need);
        cap = MIN(cap, (size_t)STATE_MAX_ENTRIES);
        struct state_alloc *n = realloc(s->allocs, cap * sizeof *n);
        if (!n)
                return -ENOMEM;
        s->allocs = n;
        s->cap = cap;
        return 0;
}

int state_add(struct gpuslice_state *s, const struct state_alloc *a) {
        if (!s || state_alloc_validate(a) < 0)
                return -EINVAL;
        if (find_index(s, a->resource, a->device_id) >= 0)
                return -EEXIST;
        int r = grow(s, s->n_allocs + 1);
        if (r < 0)
                return r;
        s->allocs[s->n_allocs++] = *a;
        s->generation++;
        return 0;
}

int state_remove(struct gpuslice_state *s, const char *resource, const char *device_id) {
        if (!s || !device_id)
                return -EINVAL;
        ssize_t i = find_index(s, resource, device_id);
        if (i < 0)
                return -ENOENT;
        memmove(&s->allocs[i], &s->allocs[i + 1], (s->n_allocs - (size_t)i - 1) * sizeof *s->allocs);
        s->n_allocs--;
        s->generation++;
        return 0;
}

size_t state_remove_container(struct gpuslice_state *s, const char *pod_namespace, const char *pod_name,
                              const char *container) {
        if (!s || !pod_namespace || !pod_name || !container)
                return 0;
        size_t o = 0, removed = 0;
        for (size_t i = 0; i < s->n_allocs; i++) {
                const struct state_alloc *a = &s->allocs[i];
                if (streq(a->pod_namespace, pod_namespace) && streq(a->pod_name, pod_name) &&
                    streq(a->container, container)) {
                        removed++;
                        continue;
                }
                s->allocs[o++] = *a;
        }
        s->n_allocs = o;
        if (removed)
                s->generation++;
        return removed;
}

/* Copy a report's string into an entry field if given; true if the field changed. -1 if too long. */
static int take_str(char *field, size_t size, const char *v) {
        if (!v || !*v)
                return 0;
        if (!valid_str(v, size, true))
                return -1;
        if (streq(field, v))
                return 0;
        strscpy(field, v, size);
        return 1;
}

static bool report_valid(const struct state_report *rp) {
        return rp->resource && rp->device_id && valid_str(rp->resource, STATE_RESOURCE_MAX, true) &&
               valid_str(rp->device_id, STATE_DEVICE_ID_MAX, true) &&
               (!rp->pod_namespace || valid_str(rp->pod_namespace, STATE_NAMESPACE_MAX, false)) &&
               (!rp->pod_name || valid_str(rp->pod_name, STATE_POD_NAME_MAX, false)) &&
               (!rp->pod_uid || valid_str(rp->pod_uid, STATE_POD_UID_MAX, false)) &&
               (!rp->container || valid_str(rp->container, STATE_CONTAINER_MAX, false));
}

size_t state_mark_settled(struct gpuslice_state *s) {
        size_t n = 0;
        for (size_t i = 0; s && i < s->n_allocs; i++)
                if (!s->allocs[i].settled) {
                        s->allocs[i].settled = true;
                        n++;
                }
        return n;
}

/* lint: long (about 85 lines): one pass over the reports and one over the entries on a
 * private copy, swapped in only at the end, so that every failure leaves s unchanged; split into
 * helpers it would have to pass the copy, the seen array and four counters around. */
int state_reconcile(struct gpuslice_state *s, const struct state_report *reports, size_t n,
                    bool (*owned)(const char *resource, void *userdata), void *userdata, uint64_t now,
                    uint64_t keep_since, size_t *ret_added, size_t *ret_removed, size_t *ret_updated,
                    size_t *ret_skipped) {
        if (!s || (n > 0 && !reports))
                return -EINVAL;
        size_t added = 0, removed = 0, updated = 0, skipped = 0;
        struct gpuslice_state c;
        int r = state_copy(s, &c);
        if (r < 0)
                return r;
        bool *seen = calloc(s->n_allocs + n + 1, sizeof *seen);
        if (!seen) {
                state_done(&c);
                return -ENOMEM;
        }

        for (size_t k = 0; k < n; k++) {
                const struct state_report *rp = &reports[k];
                if (!report_valid(rp)) {
                        skipped++;
                        continue;
                }
                if (owned && !owned(rp->resource, userdata))
                        continue;
                ssize_t i = find_index(&c, rp->resource, rp->device_id);
                if (i < 0) {
                        r = grow(&c, c.n_allocs + 1);
                        if (r < 0)
                                goto fail;
                        struct state_alloc *a = &c.allocs[c.n_allocs];
                        *a = (struct state_alloc){ .alloc_time = MIN(now, JSON_INT_MAX_U), .gpu_index = -1 };
                        strscpy(a->resource, rp->resource, sizeof a->resource);
                        strscpy(a->device_id, rp->device_id, sizeof a->device_id);
                        take_str(a->pod_namespace, sizeof a->pod_namespace, rp->pod_namespace);
                        take_str(a->pod_name, sizeof a->pod_name, rp->pod_name);
                        take_str(a->pod_uid, sizeof a->pod_uid, rp->pod_uid);
                        take_str(a->container, sizeof a->container, rp->container);
                        a->seen = true;
                        seen[c.n_allocs++] = true;
                        added++;
                        continue;
                }
                struct state_alloc *a = &c.allocs[i];
                int ch = take_str(a->pod_namespace, sizeof a->pod_namespace, rp->pod_namespace) |
                         take_str(a->pod_name, sizeof a->pod_name, rp->pod_name) |
                         take_str(a->pod_uid, sizeof a->pod_uid, rp->pod_uid) |
                         take_str(a->container, sizeof a->container, rp->container);
                if ((ch || !a->seen) && !seen[i])
                        updated++;
                a->seen = true;
                seen[i] = true;
        }

        size_t o = 0;
        for (size_t i = 0; i < c.n_allocs; i++) {
                /* Listed before and not now, or kubelet called again since it recorded the answer:
                 * the container is gone, whatever its age. Otherwise its answer may still be on its
                 * way to kubelet's books (docs/sharing.md, "Ending"). */
                if (!seen[i] && (c.allocs[i].seen || c.allocs[i].settled || c.allocs[i].alloc_time < keep_since)) {
                        removed++;
                        continue;
                }
                c.allocs[o++] = c.allocs[i];
        }
        c.n_allocs = o;
        free(seen);

        if (added || removed || updated)
                c.generation++;
        state_done(s);
        *s = c;
        if (ret_added)
                *ret_added = added;
        if (ret_removed)
                *ret_removed = removed;
        if (ret_updated)
                *ret_updated = updated;
        if (ret_skipped)
                *ret_skipped = skipped;
        return 0;
fail:
        free(seen);
        state_done(&c);
        return r;
}

/* ---- encoding ------------------------------------------------------------------------------- */

static int set_str(json_t *o, const char *k, const char *v) {
        return json_object_set_new(o, k, json_string(v)) < 0 ? -ENOMEM : 0;
}
static int set_int(json_t *o, const char *k, json_int_t v) {
        return json_object_set_new(o, k, json_integer(v)) < 0 ? -ENOMEM : 0;
}

/* lint: long — one field of the state file per line, each checked (JSON_INT bounds, out of memory); 49 lines. */
int state_encode(const struct gpuslice_state *s, char **ret, size_t *ret_len) {
        if (!s || !ret || s->n_allocs > STATE_MAX_ENTRIES || s->generation > JSON_INT_MAX_U)
                return -EINVAL;
        _cleanup_(json_decrefp) json_t *root = json_object();
        if (!root || json_object_set_new(root, "generation", json_integer((json_int_t)s->generation)) < 0 ||
            json_object_set_new(root, "allocations", json_array()) < 0)
                return -ENOMEM;
        json_t *arr = json_object_get(root, "allocations"); /* borrowed */
        for (size_t i = 0; i < s->n_allocs; i++) {
                const struct state_alloc *a = &s->allocs[i];
                if (state_alloc_validate(a) < 0)
                        return -EINVAL;
                json_t *o = json_object();
                if (!o || json_array_append_new(arr, o) < 0)
                        return -ENOMEM;
                if (set_str(o, "resource", a->resource) < 0 || set_str(o, "device_id", a->device_id) < 0 ||
                    set_str(o, "namespace", a->pod_namespace) < 0 || set_str(o, "pod", a->pod_name) < 0 ||
                    set_str(o, "pod_uid", a->pod_uid) < 0 || set_str(o, "container", a->container) < 0 ||
                    set_int(o, "time", (json_int_t)a->alloc_time) < 0 || set_int(o, "gpu_index", a->gpu_index) < 0 ||
                    set_int(o, "memory_bytes", (json_int_t)a->memory_bytes) < 0 ||
                    set_int(o, "core_percent", a->core_percent) < 0 ||
                    json_object_set_new(o, "seen", json_boolean(a->seen)) < 0)
                        return -ENOMEM;
                /* json_string() refuses invalid UTF-8 by returning NULL, which set_new reports */
        }
        _cleanup_(freep) char *body = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        if (!body)
                return -EINVAL; /* jansson refuses only for invalid UTF-8 or out of memory */
        size_t blen = strlen(body);
        char hdr[HEADER_MAX];
        int h = snprintf(hdr, sizeof hdr, STATE_MAGIC " %d %zu %08" PRIx32 "\n", STATE_FORMAT_VERSION, blen + 1,
                         state_crc32c(state_crc32c(0, body, blen), "\n", 1));
        if (h < 0 || (size_t)h >= sizeof hdr)
                return -EINVAL;
        size_t total = (size_t)h + blen + 1;
        if (total > STATE_FILE_MAX)
                return -EFBIG;
        char *out = malloc(total + 1);
        if (!out)
                return -ENOMEM;
        memcpy(out, hdr, (size_t)h);
        memcpy(out + h, body, blen);
        out[total - 1] = '\n';
        out[total] = '\0';
        *ret = out;
        if (ret_len)
                *ret_len = total;
        return 0;
}

/* ---- decoding ------------------------------------------------------------------------------- */

/* Parse the header exactly as state_encode writes it. Returns header length or -EBADMSG. */
static ssize_t parse_header(const char *data, size_t len, size_t *ret_body_len, uint32_t *ret_crc) {
        const char *nl = memchr(data, '\n', MIN(len, (size_t)HEADER_MAX));
        if (!nl)
                return -EBADMSG;
        size_t hlen = (size_t)(nl - data) + 1;
        char h[HEADER_MAX + 1];
        memcpy(h, data, hlen);
        h[hlen] = '\0';
        if (!startswith(h, STATE_MAGIC " "))
                return -EBADMSG;
        char *p = h + sizeof STATE_MAGIC;
        char *end;
        errno = 0;
        unsigned long version = strtoul(p, &end, 10);
        if (end == p || *end != ' ' || errno)
                return -EBADMSG;
        if (version != STATE_FORMAT_VERSION)
                return -EBADMSG;
        p = end + 1;
        unsigned long long blen = strtoull(p, &end, 10);
        if (end == p || *end != ' ' || errno || blen > STATE_FILE_MAX)
                return -EBADMSG;
        p = end + 1;
        unsigned long crc = strtoul(p, &end, 16);
        if (end == p || *end != '\n' || errno || crc > UINT32_MAX)
                return -EBADMSG;
        /* Only the canonical spelling is accepted: no signs, spaces, leading zeros or upper case. */
        char canon[HEADER_MAX];
        int n = snprintf(canon, sizeof canon, STATE_MAGIC " %d %llu %08lx\n", STATE_FORMAT_VERSION, blen, crc);
        if (n < 0 || (size_t)n != hlen || memcmp(canon, h, hlen) != 0)
                return -EBADMSG;
        *ret_body_len = (size_t)blen;
        *ret_crc = (uint32_t)crc;
        return (ssize_t)hlen;
}

static int get_str(json_t *o, const char *k, char *out, size_t size, bool required) {
        json_t *v = json_object_get(o, k);
        if (!json_is_string(v))
                return -EBADMSG;
        size_t n = json_string_length(v);
        const char *s = json_string_value(v);
        if (n >= size || strlen(s) != n || !valid_str(s, size, required))
                return -EBADMSG;
        memcpy(out, s, n + 1);
        return 0;
}

static int get_int(json_t *o, const char *k, json_int_t min, json_int_t max, json_int_t *ret) {
        json_t *v = json_object_get(o, k);
        if (!json_is_integer(v))
                return -EBADMSG;
        json_int_t x = json_integer_value(v);
        if (x < min || x > max)
                return -EBADMSG;
        *ret = x;
        return 0;
}

static int cmp_alloc(const void *x, const void *y) {
        const struct state_alloc *a = *(const struct state_alloc *const *)x;
        const struct state_alloc *b = *(const struct state_alloc *const *)y;
        int c = strcmp(a->resource, b->resource);
        return c ? c : strcmp(a->device_id, b->device_id);
}

/* lint: long: its branch count comes from one || chain of field checks per entry (each key read and bounded),
 * not from nested logic. */
static int decode_body(json_t *root, struct gpuslice_state *out) {
        if (!json_is_object(root) || json_object_size(root) != 2)
                return -EBADMSG;
        json_int_t gen;
        if (get_int(root, "generation", 0, INT64_MAX, &gen) < 0)
                return -EBADMSG;
        json_t *arr = json_object_get(root, "allocations");
        if (!json_is_array(arr) || json_array_size(arr) > STATE_MAX_ENTRIES)
                return -EBADMSG;
        size_t n = json_array_size(arr);
        struct gpuslice_state s = { .generation = (uint64_t)gen };
        if (n > 0) {
                s.allocs = calloc(n, sizeof *s.allocs);
                if (!s.allocs)
                        return -ENOMEM;
                s.cap = n;
        }
        int r = -EBADMSG;
        for (size_t i = 0; i < n; i++) {
                json_t *o = json_array_get(arr, i);
                struct state_alloc *a = &s.allocs[i];
                json_int_t t, gi, mem, core;
                /* "seen" was added later: files without it are read as never seen */
                json_t *seen = json_is_object(o) ? json_object_get(o, "seen") : NULL;
                if (!json_is_object(o) || json_object_size(o) != (seen ? 11u : 10u) || (seen && !json_is_boolean(seen)))
                        goto fail;
                a->seen = seen && json_is_true(seen); // NOLINT(misc-redundant-expression): the macro tests NULL too
                /* exactly 10 (11) members, and all known keys present below: nothing else */
                if (get_str(o, "resource", a->resource, sizeof a->resource, true) < 0 ||
                    get_str(o, "device_id", a->device_id, sizeof a->device_id, true) < 0 ||
                    get_str(o, "namespace", a->pod_namespace, sizeof a->pod_namespace, false) < 0 ||
                    get_str(o, "pod", a->pod_name, sizeof a->pod_name, false) < 0 ||
                    get_str(o, "pod_uid", a->pod_uid, sizeof a->pod_uid, false) < 0 ||
                    get_str(o, "container", a->container, sizeof a->container, false) < 0 ||
                    get_int(o, "time", 0, INT64_MAX, &t) < 0 || get_int(o, "gpu_index", -1, INT32_MAX, &gi) < 0 ||
                    get_int(o, "memory_bytes", 0, INT64_MAX, &mem) < 0 || get_int(o, "core_percent", 0, 100, &core) < 0)
                        goto fail;
                a->alloc_time = (uint64_t)t;
                a->gpu_index = (int32_t)gi;
                a->memory_bytes = (uint64_t)mem;
                a->core_percent = (uint32_t)core;
                if (state_alloc_validate(a) < 0)
                        goto fail;
        }
        s.n_allocs = n;
        if (n > 1) {
                const struct state_alloc **idx = malloc(n * sizeof *idx);
                if (!idx) {
                        r = -ENOMEM;
                        goto fail;
                }
                for (size_t i = 0; i < n; i++)
                        idx[i] = &s.allocs[i];
                qsort(idx, n, sizeof *idx, cmp_alloc);
                bool dup = false;
                for (size_t i = 1; i < n && !dup; i++)
                        dup = cmp_alloc(&idx[i - 1], &idx[i]) == 0;
                free(idx);
                if (dup)
                        goto fail;
        }
        *out = s;
        return 0;
fail:
        state_done(&s);
        return r;
}

int state_decode(const void *data, size_t len, struct gpuslice_state *ret) {
        if (!ret || (!data && len > 0))
                return -EINVAL;
        if (len > STATE_FILE_MAX)
                return -EBADMSG;
        size_t blen;
        uint32_t crc;
        ssize_t hlen = parse_header(data, len, &blen, &crc);
        if (hlen < 0)
                return (int)hlen;
        if (len - (size_t)hlen != blen)
                return -EBADMSG; /* truncated, or something appended */
        const char *body = (const char *)data + hlen;
        if (state_crc32c(0, body, blen) != crc)
                return -EBADMSG;
        json_error_t jerr;
        _cleanup_(json_decrefp) json_t *root = json_loadb(body, blen, JSON_REJECT_DUPLICATES, &jerr);
        if (!root)
                return -EBADMSG;
        return decode_body(root, ret);
}

/* ---- files ---------------------------------------------------------------------------------- */

int state_write_atomic(const char *dir, const char *name, const void *data, size_t len, unsigned mode, unsigned flags) {
        bool sync = !(flags & STATE_WRITE_NO_SYNC);
        if (!dir || !name || !name[0] || strchr(name, '/') || strlen(name) > 128 || (!data && len))
                return -EINVAL;
        _cleanup_(closep) int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        atomic_file_remove_temps(dfd, name); /* a crashed save's, none in use: one writer per directory */
        return atomic_file_write_at(dfd, name, data, len, (mode_t)(mode & 07777), sync ? 0 : ATOMIC_FILE_NO_SYNC);
}

int state_save(const char *dir, const struct gpuslice_state *s) {
        if (!dir || !s)
                return -EINVAL;
        _cleanup_(freep) char *data = NULL;
        size_t len;
        int r = state_encode(s, &data, &len);
        if (r < 0)
                return r;
        return state_write_atomic(dir, STATE_FILE_NAME, data, len, 0600, 0);
}

int state_load(const char *dir, struct gpuslice_state *ret) {
        if (!dir || !ret)
                return -EINVAL;
        _cleanup_(closep) int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        _cleanup_(freep) char *buf = NULL;
        size_t len;
        int r = read_file_at(dfd, STATE_FILE_NAME, READ_FILE_NOFOLLOW | READ_FILE_REGULAR, STATE_FILE_MAX, &buf, &len);
        if (r == -ELOOP || r == -EBADFD)
                return -EBADMSG; /* a link or not a regular file: not ours to trust */
        if (r < 0)
                return r;
        return state_decode(buf, len, ret);
}
