/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the NVML binding's text helpers (src/nvml/nvml.c): the PCI bus-id parser behind
 * nvml_sysfs_bus_id / nvml_bus_id_equal (the bus id comes from the driver and ends up in a sysfs
 * path) and nvml_format_cpulist. First byte picks the helper.
 *  - bus id: an accepted id is at most "00000000:1A:00.0" long, its sysfs name is canonical
 *    (re-parses to itself), names the same function as the input; equality is symmetric.
 *  - cpulist: either -ENOBUFS with "" in the buffer, or a list that reads back to the same mask.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "nvml/nvml.h"

static void busid(const char *a, const char *b) {
        char out[16], again[16];
        int r = nvml_sysfs_bus_id(a, out, sizeof out);
        if (r == 0) {
                CHECK(strlen(a) <= 16);
                CHECK(strlen(out) == 12);
                CHECK(nvml_sysfs_bus_id(out, again, sizeof again) == 0 && strcmp(out, again) == 0);
                CHECK(nvml_bus_id_equal(a, out));
        } else
                CHECK(r == -EINVAL && !nvml_bus_id_equal(a, a));
        CHECK(nvml_bus_id_equal(a, b) == nvml_bus_id_equal(b, a));
}

/* "0-3,7" → bits; the formatter's own grammar, so anything else is a formatter bug */
static void cpulist_read(const char *s, unsigned long *mask, size_t n_words) {
        const size_t bits = sizeof(unsigned long) * 8;
        memset(mask, 0, n_words * sizeof *mask);
        while (*s) {
                char *end;
                unsigned long lo = strtoul(s, &end, 10), hi = lo;
                CHECK(end != s);
                if (*end == '-') {
                        s = end + 1;
                        hi = strtoul(s, &end, 10);
                        CHECK(end != s && hi > lo);
                }
                CHECK(hi < n_words * bits);
                for (unsigned long c = lo; c <= hi; c++) {
                        CHECK(!(mask[c / bits] & (1UL << (c % bits))));
                        mask[c / bits] |= 1UL << (c % bits);
                }
                s = end;
                if (*s == ',') {
                        s++;
                        CHECK(*s);
                } else
                        CHECK(*s == '\0');
        }
}

static void cpulist(const uint8_t *data, size_t size) {
        if (size < 1)
                return;
        size_t len = data[0] + 1u; /* 1..256 */
        data++, size--;
        unsigned long mask[8] = { 0 }, back[8];
        size_t n_words = size / sizeof(unsigned long);
        if (n_words > 8)
                n_words = 8;
        memcpy(mask, data, n_words * sizeof(unsigned long));
        char *buf = malloc(len); /* exact size: ASan sees a write past it */
        if (!buf)
                return;
        int r = nvml_format_cpulist(mask, n_words, buf, len);
        if (r == 0) {
                CHECK(strlen(buf) < len);
                cpulist_read(buf, back, 8);
                CHECK(memcmp(mask, back, n_words * sizeof *mask) == 0);
        } else
                CHECK(r == -ENOBUFS && buf[0] == '\0');
        free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        if (data[0] & 1) {
                cpulist(data + 1, size - 1);
                return 0;
        }
        /* "a\nb": two bus ids */
        char *s = malloc(size);
        if (!s)
                return 0;
        memcpy(s, data + 1, size - 1);
        s[size - 1] = '\0';
        char *nl = memchr(s, '\n', size - 1);
        const char *b = "00000000:1A:00.0";
        if (nl) {
                *nl = '\0';
                b = nl + 1;
        }
        busid(s, b);
        free(s);
        return 0;
}
