/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dra/journal — the prepared-claims journal (journal.h): the record codec and the record files.
 * Must never trust a record that fails a check, or remove a file it did not name.
 */
#include "dra/journal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "util/atomic-file.h"
#include "util/util.h"

static const char *const state_names[] = {
        [DRA_REC_PREPARING] = "preparing", [DRA_REC_PREPARED] = "prepared", [DRA_REC_UNPREPARING] = "unpreparing"
};

const char *dra_record_state_name(enum dra_record_state s) {
        return s >= DRA_REC_PREPARING && s <= DRA_REC_UNPREPARING ? state_names[s] : "?";
}

static bool limits_name_valid(const char *s) {
        return !s[0] || (startswith(s, "dra-") && dra_uid_valid(s + 4));
}

/* ---- encode ---- */

static json_t *encode_device(const struct dra_record_device *d) {
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:i, s:b, s:I, s:i}", "request", d->request, "device", d->device,
                              "shareID", d->share_id, "uuid", d->uuid, "index", (int)d->index, "shared", d->shared,
                              "memory", (json_int_t)d->memory, "cores", (int)d->cores);
        if (o && d->made &&
            (json_object_set_new(o, "gi", json_integer(d->gi)) < 0 ||
             json_object_set_new(o, "ci", json_integer(d->ci)) < 0))
                json_decref(TAKE_PTR(o));
        if (o && d->mps_pinned && json_object_set_new(o, "mpsPinned", json_integer((json_int_t)d->mps_pinned)) < 0)
                json_decref(TAKE_PTR(o));
        return o;
}

int dra_record_encode(const struct dra_record *r, char **ret) {
        if (!dra_uid_valid(r->uid) || r->n > DRA_RESULTS_MAX || r->state < DRA_REC_PREPARING ||
            r->state > DRA_REC_UNPREPARING)
                return -EINVAL;
        json_t *devs = json_array();
        for (unsigned i = 0; devs && i < r->n; i++) {
                if (json_array_append_new(devs, encode_device(&r->dev[i])) < 0) {
                        json_decref(devs);
                        return -ENOMEM;
                }
        }
        json_t *o = devs ? json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:s}", "v", DRA_RECORD_VERSION, "uid",
                                     r->uid, "namespace", r->namespace_, "name", r->name, "state",
                                     dra_record_state_name(r->state), "corePolicy", r->elastic ? "elastic" : "hard",
                                     "devices", devs, "spec", r->spec, "limits", r->limits)
                         : NULL;
        if (o && r->sharing != DRA_SHARING_NONE &&
            json_object_set_new(o, "sharing",
                                json_pack("{s:s, s:s, s:i}", "strategy", dra_sharing_name(r->sharing), "interval",
                                          dra_interval_name(r->interval), "threads", (int)r->mps_threads)) < 0) {
                json_decref(o);
                return -ENOMEM;
        }
        char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(o);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

/* ---- decode ---- */

static int str(const json_t *o, const char *key, char *buf, size_t len, struct gs_error *err) {
        const json_t *v = json_object_get(o, key);
        const char *s = json_string_value(v);
        if (!s || strlen(s) != json_string_length(v) || strlen(s) >= len)
                return gs_error_set(err, -EINVAL, "%s: missing or too long", key);
        strscpy(buf, s, len);
        return 0;
}

static int num(const json_t *o, const char *key, json_int_t max, json_int_t *ret, struct gs_error *err) {
        const json_t *v = json_object_get(o, key);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
                return gs_error_set(err, -EINVAL, "%s: not an integer in 0..%lld", key, (long long)max);
        *ret = json_integer_value(v);
        return 0;
}

/* A dynamic MIG device's instance ids, when it was made ("gi" and "ci" both or neither; no other kind has them). */
static int decode_made(const json_t *o, struct dra_record_device *d, struct gs_error *err) {
        json_int_t gi, ci;
        bool has = json_object_get(o, "gi") || json_object_get(o, "ci");
        d->made = false;
        d->gi = d->ci = MIG_NO_INSTANCE;
        if (!has)
                return 0;
        if (d->kind != DRA_DEVICE_MIG_DYNAMIC)
                return gs_error_set(err, -EINVAL, "device %.63s: instance ids of a device not made at prepare",
                                    d->device);
        int r = num(o, "gi", 14, &gi, err);
        r = r ?: num(o, "ci", MIG_MAX_CIS - 1, &ci, err);
        if (r < 0)
                return r;
        d->made = true;
        d->gi = (unsigned)gi;
        d->ci = (unsigned)ci;
        return 0;
}

static int decode_device(const json_t *o, struct dra_record_device *d, struct gs_error *err) {
        json_int_t index, memory, cores;
        if (!json_is_object(o) || !json_is_boolean(json_object_get(o, "shared")))
                return gs_error_set(err, -EINVAL, "device: malformed");
        int r = str(o, "request", d->request, sizeof d->request, err);
        r = r ?: str(o, "device", d->device, sizeof d->device, err);
        r = r ?: str(o, "shareID", d->share_id, sizeof d->share_id, err);
        r = r ?: str(o, "uuid", d->uuid, sizeof d->uuid, err);
        r = r ?: num(o, "index", 999999, &index, err);
        r = r ?: num(o, "memory", INT64_MAX, &memory, err);
        r = r ?: num(o, "cores", DRA_CORES_TOTAL, &cores, err);
        if (r < 0)
                return r;
        d->index = (unsigned)index;
        d->memory = (uint64_t)memory;
        d->cores = (unsigned)cores;
        d->shared = json_is_true(json_object_get(o, "shared"));
        struct dra_device_ref ref;
        if (dra_device_parse(d->device, &ref) < 0 || ref.index != d->index || dra_kind_shared(ref.kind) != d->shared ||
            (d->share_id[0] && !dra_uid_valid(d->share_id)))
                return gs_error_set(err, -EINVAL, "device %.63s: inconsistent", d->device);
        d->kind = ref.kind;
        d->mps_pinned = 0;
        if (json_object_get(o, "mpsPinned")) {
                if ((r = num(o, "mpsPinned", INT64_MAX, &memory, err)) < 0)
                        return r;
                d->mps_pinned = (uint64_t)memory;
        }
        return decode_made(o, d, err);
}

/* The optional "sharing": {"strategy", "interval", "threads"}. */
static int decode_sharing(const json_t *o, struct dra_record *r, struct gs_error *err) {
        r->sharing = DRA_SHARING_NONE;
        r->interval = DRA_INTERVAL_DEFAULT;
        r->mps_threads = 0;
        if (!o)
                return 0;
        char strategy[16], interval[16];
        json_int_t threads;
        int e = str(o, "strategy", strategy, sizeof strategy, err);
        e = e ?: str(o, "interval", interval, sizeof interval, err);
        e = e ?: num(o, "threads", 100, &threads, err);
        if (e < 0)
                return gs_error_prefix(err, "sharing");
        for (int s = DRA_SHARING_TIMESLICING; s <= DRA_SHARING_MPS; s++)
                if (streq(strategy, dra_sharing_name((enum dra_sharing)s)))
                        r->sharing = (enum dra_sharing)s;
        for (int i = DRA_INTERVAL_LONG; i > DRA_INTERVAL_DEFAULT; i--)
                if (streq(interval, dra_interval_name((enum dra_interval)i)))
                        r->interval = (enum dra_interval)i;
        if (r->sharing == DRA_SHARING_NONE || (r->interval == DRA_INTERVAL_DEFAULT && !streq(interval, "Default")))
                return gs_error_set(err, -EINVAL, "sharing: strategy or interval unknown");
        r->mps_threads = (unsigned)threads;
        return 0;
}

static int record_from_json(const json_t *o, struct dra_record *r, struct gs_error *err) {
        char state[16], policy[16];
        json_int_t v;
        if (!json_is_object(o))
                return gs_error_set(err, -EINVAL, "not a JSON object");
        int e = num(o, "v", 1000, &v, err);
        if (e == 0 && v != DRA_RECORD_VERSION)
                return gs_error_set(err, -EINVAL, "version %lld, expected %d", (long long)v, DRA_RECORD_VERSION);
        e = e ?: str(o, "uid", r->uid, sizeof r->uid, err);
        e = e ?: str(o, "namespace", r->namespace_, sizeof r->namespace_, err);
        e = e ?: str(o, "name", r->name, sizeof r->name, err);
        e = e ?: str(o, "state", state, sizeof state, err);
        e = e ?: str(o, "corePolicy", policy, sizeof policy, err);
        e = e ?: str(o, "spec", r->spec, sizeof r->spec, err);
        e = e ?: str(o, "limits", r->limits, sizeof r->limits, err);
        if (e < 0)
                return e;
        if (!dra_uid_valid(r->uid) || !limits_name_valid(r->limits) || (r->spec[0] && r->spec[0] != '/'))
                return gs_error_set(err, -EINVAL, "uid, spec or limits malformed");
        r->state = 0;
        for (int s = DRA_REC_PREPARING; s <= DRA_REC_UNPREPARING; s++)
                if (streq(state, state_names[s]))
                        r->state = (enum dra_record_state)s;
        if (!r->state || (!streq(policy, "hard") && !streq(policy, "elastic")))
                return gs_error_set(err, -EINVAL, "state or corePolicy unknown");
        r->elastic = streq(policy, "elastic");
        if ((e = decode_sharing(json_object_get(o, "sharing"), r, err)) < 0)
                return e;
        const json_t *devs = json_object_get(o, "devices");
        if (!json_is_array(devs) || json_array_size(devs) > DRA_RESULTS_MAX)
                return gs_error_set(err, -EINVAL, "devices: not an array of at most %u", DRA_RESULTS_MAX);
        size_t i;
        const json_t *d;
        r->n = 0;
        json_array_foreach(devs, i, d) {
                if ((e = decode_device(d, &r->dev[r->n], err)) < 0)
                        return gs_error_prefix(err, "devices[%zu]", i);
                r->n++;
        }
        return 0;
}

int dra_record_decode(const char *text, size_t len, struct dra_record *ret, struct gs_error *err) {
        if (!text || len > DRA_RECORD_MAX)
                return gs_error_set(err, -EINVAL, "longer than %u bytes", DRA_RECORD_MAX);
        json_error_t je;
        json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!o)
                return gs_error_set(err, -EINVAL, "not JSON: %s", je.text);
        struct dra_record *r = calloc(1, sizeof *r);
        int e = r ? record_from_json(o, r, err) : -ENOMEM;
        json_decref(o);
        if (e == 0)
                *ret = *r;
        free(r);
        return e;
}

/* ---- files ---- */

static int file_name(const char *uid, char *buf, size_t len) {
        if (!dra_uid_valid(uid))
                return -EINVAL;
        int w = snprintf(buf, len, "%s" DRA_RECORD_SUFFIX, uid);
        return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

int dra_record_write(int dfd, const struct dra_record *r) {
        char name[DRA_UID_MAX + 8];
        _cleanup_(freep) char *text = NULL;
        int e = file_name(r->uid, name, sizeof name);
        e = e ?: dra_record_encode(r, &text);
        return e ?: atomic_file_write_at(dfd, name, text, strlen(text), 0600, 0);
}

int dra_record_remove(int dfd, const char *uid) {
        char name[DRA_UID_MAX + 8];
        int e = file_name(uid, name, sizeof name);
        if (e < 0)
                return e;
        if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
                return -errno;
        return fsync(dfd) < 0 ? -errno : 0;
}

int dra_journal_scan(int dfd,
                     void (*fn)(const char *file, const struct dra_record *r, const struct gs_error *e, void *userdata),
                     void *userdata) {
        int fd = dup(dfd);
        if (fd < 0)
                return -errno;
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        rewinddir(d);
        struct dirent *de;
        struct dra_record *rec = malloc(sizeof *rec);
        while (rec && (de = readdir(d))) {
                const char *n = de->d_name;
                size_t l = strlen(n);
                if (n[0] == '.') { /* the atomic writer's temporaries from a crash: ours to remove */
                        if (strstr(n, ATOMIC_FILE_TEMP_INFIX))
                                (void)unlinkat(dirfd(d), n, 0);
                        continue;
                }
                if (l <= strlen(DRA_RECORD_SUFFIX) || !streq(n + l - strlen(DRA_RECORD_SUFFIX), DRA_RECORD_SUFFIX))
                        continue;
                struct gs_error e = { 0 };
                char *text = NULL;
                size_t len = 0;
                int r = read_file_at(dirfd(d), n, READ_FILE_NOFOLLOW, DRA_RECORD_MAX, &text, &len);
                if (r < 0)
                        gs_error_set(&e, r, "cannot read: %s", strerror(-r));
                else if ((r = dra_record_decode(text, len, rec, &e)) == 0 &&
                         (strlen(rec->uid) + strlen(DRA_RECORD_SUFFIX) != l ||
                          strncmp(n, rec->uid, strlen(rec->uid)) != 0))
                        r = gs_error_set(&e, -EINVAL, "the file name is not the record's uid");
                free(text);
                fn(n, r == 0 ? rec : NULL, &e, userdata);
        }
        int r = rec ? 0 : -ENOMEM;
        free(rec);
        closedir(d);
        return r;
}
