/* SPDX-License-Identifier: Apache-2.0 */
/*
 * migctl/request — the codec of the agent's layout request file (<state-dir>/mig-layout, migctl.h): the layout
 * name the node label asked last, its state, the reason of a failure and whether it failed only because a GPU
 * was in use. One codec: the agent (src/agent/miglayout.c) writes and reads the file only through these two
 * functions. Must never accept a torn or foreign file as a request, or log.
 *
 *   all-1g.10gb          the name (a label value)
 *   failed               pending, success or failed
 *   GPU 0 is in use: …   the reason ("" unless failed, or pending waiting for a reset)
 *   busy                 (optional) failed only because a GPU was in use
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "migctl/migctl.h"
#include "util/util.h"

static bool known_state(const char *s) {
        return streq(s, "pending") || streq(s, "success") || streq(s, "failed");
}

int migctl_request_format(const struct migctl_request *r, char *buf, size_t len) {
        if (!r->name[0] || strchr(r->name, '\n') || !known_state(r->state) || (r->busy && !streq(r->state, "failed")))
                return -EINVAL;
        char reason[sizeof r->reason];
        strscpy(reason, r->reason, sizeof reason);
        for (char *c = reason; *c; c++)
                if ((unsigned char)*c < 0x20 || *c == 0x7f)
                        *c = ' ';
        int n = snprintf(buf, len, "%s\n%s\n%s\n%s", r->name, r->state, reason, r->busy ? "busy\n" : "");
        if (n < 0 || (size_t)n >= len)
                return -ENOBUFS;
        return n;
}

/* The line at p (it ends at a newline before end) into field (size len): past its newline, or NULL when it has no newline, is too long or
 * holds a control byte. */
static const char *take_line(const char *p, const char *end, char *field, size_t len) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl || (size_t)(nl - p) >= len)
                return NULL;
        for (const char *c = p; c < nl; c++)
                if ((unsigned char)*c < 0x20 || *c == 0x7f)
                        return NULL;
        memcpy(field, p, (size_t)(nl - p));
        field[nl - p] = 0;
        return nl + 1;
}

int migctl_request_parse(const char *text, size_t len, struct migctl_request *ret, struct gs_error *err) {
        struct migctl_request r = { 0 };
        char busy[8];
        const char *p = text, *end = text + len;
        if (!(p = take_line(p, end, r.name, sizeof r.name)) || !r.name[0])
                return gs_error_set(err, -EINVAL, "line 1: no layout name (empty, too long, or a control byte)");
        if (!(p = take_line(p, end, r.state, sizeof r.state)) || !known_state(r.state))
                return gs_error_set(err, -EINVAL, "line 2: not pending, success or failed");
        if (!(p = take_line(p, end, r.reason, sizeof r.reason)))
                return gs_error_set(err, -EINVAL, "line 3: no reason line (too long, or a control byte)");
        if (p < end) {
                if (!(p = take_line(p, end, busy, sizeof busy)) || !streq(busy, "busy") || p != end)
                        return gs_error_set(err, -EINVAL, "line 4: not \"busy\", or more lines");
                if (!streq(r.state, "failed"))
                        return gs_error_set(err, -EINVAL, "busy but %s", r.state);
                r.busy = true;
        }
        *ret = r;
        return 0;
}
