/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the number parsers every other parser leans on (src/util/util.c): parse_u64, parse_uint,
 * parse_size. An accepted number is exact: parse_u64 takes only digits and gives the value they
 * spell; parse_size of plain digits (with or without an integer unit) is exactly that value times
 * the unit, or -ERANGE when that does not fit 64 bits. No crash, no UB (UBSan), no read past the
 * input's terminator.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "util/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > 64)
                return 0;
        char *s = malloc(size + 1); /* exact size: ASan sees a read past the NUL */
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = '\0';
        size_t len = strlen(s), digits = strspn(s, "0123456789");

        uint64_t v = 0;
        int r = parse_u64(s, &v);
        if (r == 0) {
                CHECK(digits == len && len > 0);
                char back[32];
                snprintf(back, sizeof back, "%" PRIu64, v);
                const char *p = s + strspn(s, "0");
                CHECK(strcmp(back, *p ? p : "0") == 0);
        } else
                CHECK(r == -EINVAL || r == -ERANGE);
        unsigned u;
        r = parse_uint(s, 1000, &u);
        CHECK(r < 0 || u <= 1000);

        uint64_t b = 0;
        int rs = parse_size(s, &b);
        CHECK(rs == 0 || rs == -EINVAL || rs == -ERANGE);
        if (digits == len && len > 0) {
                /* plain digits: exactly the number of bytes */
                CHECK(rs == (parse_u64(s, &v) == 0 ? 0 : -ERANGE));
                CHECK(rs < 0 || b == v);
        }
        static const struct {
                const char *suffix;
                uint64_t factor;
        } units[] = { { "K", 1ULL << 10 }, { "GiB", 1ULL << 30 }, { "TB", 1000000000000ULL } };
        if (len > 0 && digits == len && len < 40) {
                for (size_t i = 0; i < ELEMENTSOF(units); i++) {
                        char t[48];
                        snprintf(t, sizeof t, "%s%s", s, units[i].suffix);
                        uint64_t n, want;
                        int ru = parse_size(t, &n);
                        if (parse_u64(s, &v) == 0 && !__builtin_mul_overflow(v, units[i].factor, &want))
                                CHECK(ru == 0 && n == want);
                        else
                                CHECK(ru == -ERANGE);
                }
        }
        free(s);
        return 0;
}
