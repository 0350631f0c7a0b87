/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the Prometheus text builder (src/metrics/metrics.c) with label values and HELP text as
 * workloads and peers supply them (process names from /proc/PID/comm, pod and container names
 * from kubelet): whatever the bytes, the exposition is valid UTF-8, has exactly one line per
 * HELP/TYPE/sample, and every label value is a closed, correctly escaped quoted string.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "metrics/metrics.h"
#include "util/util.h"

/* Walk one `{k="v",...}` block; returns the position after '}'. */
static const char *check_labels(const char *p, unsigned n_labels) {
        CHECK(*p++ == '{');
        for (unsigned i = 0; i < n_labels; i++) {
                if (i)
                        CHECK(*p++ == ',');
                CHECK(*p++ == 'k');
                CHECK(*p++ == '=');
                CHECK(*p++ == '"');
                for (; *p != '"'; p++) {
                        CHECK(*p && *p != '\n');
                        if (*p == '\\') {
                                p++;
                                CHECK(*p == '\\' || *p == '"' || *p == 'n');
                        }
                }
                p++;
        }
        CHECK(*p++ == '}');
        return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* NUL-separated: HELP text, then up to 4 label values */
        char *buf = malloc(size + 1);
        if (!buf)
                return 0;
        memcpy(buf, data, size);
        buf[size] = '\0';
        const char *parts[5] = { "", NULL, NULL, NULL, NULL };
        unsigned np = 0;
        for (size_t off = 0; np < 5 && off <= size; np++) {
                parts[np] = buf + off;
                off += strlen(buf + off) + 1;
        }
        const char *labels[9] = { NULL };
        unsigned nl = 0;
        for (unsigned i = 1; i < np; i++, nl++) {
                labels[2 * nl] = "k";
                labels[2 * nl + 1] = parts[i];
        }
        struct metrics_text t = { 0 };
        metrics_text_family(&t, "m", "gauge", parts[0]);
        metrics_text_sample(&t, "m", labels, 1);
        char *out;
        size_t len;
        if (metrics_text_finish(&t, &out, &len) < 0) {
                free(buf);
                return 0;
        }
        CHECK(strlen(out) == len);
        for (size_t i = 0; i < len;) {
                size_t k = utf8_seq_len(out + i, len - i);
                CHECK(k > 0);
                i += k;
        }
        /* line 1: # HELP m ..., line 2: # TYPE m gauge, line 3: the sample */
        char *l2 = strchr(out, '\n');
        CHECK(l2 && strncmp(out, "# HELP m ", 9) == 0);
        l2++;
        CHECK(strncmp(l2, "# TYPE m gauge\n", 15) == 0);
        const char *l3 = l2 + 15;
        CHECK(*l3++ == 'm');
        if (nl)
                l3 = check_labels(l3, nl);
        CHECK(strcmp(l3, " 1\n") == 0);
        free(out);
        free(buf);
        return 0;
}
