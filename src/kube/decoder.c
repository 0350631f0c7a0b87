/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube/decoder — the watch stream decoder: the API server sends one JSON object per line
 * ({"type":"ADDED","object":{...}}), in chunks that cut lines anywhere. Bytes are buffered up to
 * one event's bound; every complete line is checked (an object, a known type, an object) before
 * the callback sees it. Pure and fuzzed: no I/O, no logging.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kube.h"
#include "util/util.h"

void kube_watch_decoder_init(struct kube_watch_decoder *d, size_t max_event,
                             int (*event)(const struct kube_event *ev, void *userdata), void *userdata) {
        memset(d, 0, sizeof *d);
        d->max = max_event ? max_event : KUBE_EVENT_MAX;
        d->event = event;
        d->userdata = userdata;
}

void kube_watch_decoder_done(struct kube_watch_decoder *d) {
        free(d->buf);
        d->buf = NULL;
        d->len = d->cap = 0;
}

size_t kube_watch_decoder_pending(const struct kube_watch_decoder *d) {
        return d->len;
}

static int decode_line(struct kube_watch_decoder *d, const char *line, size_t len) {
        while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
                len--;
        size_t skip = 0;
        while (skip < len && (line[skip] == ' ' || line[skip] == '\t'))
                skip++;
        if (skip == len)
                return 0; /* blank line (keep-alive) */
        json_error_t je;
        json_t *j = json_loadb(line + skip, len - skip, JSON_REJECT_DUPLICATES, &je);
        if (!j) {
                snprintf(d->error, sizeof d->error, "not JSON: %.100s", je.text);
                return -EPROTO;
        }
        static const char *const names[] = { "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR" };
        json_t *type = json_object_get(j, "type"), *obj = json_object_get(j, "object");
        int r = -EPROTO;
        struct kube_event ev = { .object = obj };
        if (!json_is_object(j) || !json_is_string(type)) {
                snprintf(d->error, sizeof d->error, "no string \"type\"");
                goto out;
        }
        size_t i;
        for (i = 0; i < ELEMENTSOF(names); i++)
                if (streq(json_string_value(type), names[i]))
                        break;
        if (i == ELEMENTSOF(names)) {
                snprintf(d->error, sizeof d->error, "unknown event type \"%.32s\"", json_string_value(type));
                goto out;
        }
        if (!json_is_object(obj)) {
                snprintf(d->error, sizeof d->error, "%s event without an object", names[i]);
                goto out;
        }
        ev.type = (enum kube_event_type)i;
        json_t *rv = json_object_get(json_object_get(obj, "metadata"), "resourceVersion");
        if (rv && !json_is_string(rv)) {
                snprintf(d->error, sizeof d->error, "resourceVersion is not a string");
                goto out;
        }
        ev.resource_version = rv ? json_string_value(rv) : NULL;
        if (ev.type == KUBE_EVENT_ERROR) {
                json_t *code = json_object_get(obj, "code");
                ev.code = json_is_integer(code) ? (long)json_integer_value(code) : 0;
        } else if (ev.type == KUBE_EVENT_BOOKMARK && !ev.resource_version) {
                snprintf(d->error, sizeof d->error, "BOOKMARK without a resourceVersion");
                goto out;
        }
        d->n_events++;
        r = d->event ? d->event(&ev, d->userdata) : 0;
out:
        json_decref(j);
        return r;
}

int kube_watch_decoder_feed(struct kube_watch_decoder *d, const char *data, size_t len) {
        while (len > 0) {
                const char *nl = memchr(data, '\n', len);
                size_t take = nl ? (size_t)(nl - data) : len;
                if (d->len + take > d->max) {
                        snprintf(d->error, sizeof d->error, "event longer than %zu bytes", d->max);
                        d->len = 0;
                        return -E2BIG;
                }
                if (nl && d->len == 0) {
                        /* the common case: a whole line in this chunk, no copy */
                        int r = decode_line(d, data, take);
                        if (r < 0)
                                return r;
                } else {
                        if (d->len + take + 1 > d->cap) {
                                size_t cap = d->cap ? d->cap : 4096;
                                while (cap < d->len + take + 1)
                                        cap *= 2;
                                char *b = realloc(d->buf, cap);
                                if (!b)
                                        return -ENOMEM;
                                d->buf = b;
                                d->cap = cap;
                        }
                        memcpy(d->buf + d->len, data, take);
                        d->len += take;
                        if (nl) {
                                size_t n = d->len;
                                d->len = 0;
                                int r = decode_line(d, d->buf, n);
                                if (r < 0)
                                        return r;
                        }
                }
                if (!nl)
                        break;
                data += take + 1;
                len -= take + 1;
        }
        return 0;
}
