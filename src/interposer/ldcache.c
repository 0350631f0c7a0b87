/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ldcache — glibc's /etc/ld.so.cache, read with bounds checks on every count and offset. Pure (bytes in,
 * entries out): compiled into libgpuslice-cuda.so (finding the real driver as the loader would) and linked
 * into the CDI generator (the driver's libraries). Never allocates, never reads outside data[0..len).
 *
 * Layout (little-endian on the machines we run on; glibc writes the host's byte order):
 *   new format: "glibc-ld.so.cache" "1.1" | u32 nlibs | u32 len_strings | u8 flags | u8 pad[3] |
 *               u32 extension_offset | u32 unused[3]   (48 bytes)
 *               then nlibs entries of { i32 flags, u32 key, u32 value, u32 osversion, u64 hwcap }
 *               (24 bytes); key and value are offsets of NUL-terminated strings counted from the
 *               start of the new header.
 *   old format: "ld.so-1.7.0" | pad | u32 nlibs | nlibs × { i32 flags, u32 key, u32 value }; glibc
 *               before 2.32 wrote the new table after it, aligned to 8 bytes. Only the new table is
 *               read (the old one alone carries no architecture bits worth trusting).
 */
#include <errno.h>
#include <string.h>

#include "interposer/ldcache.h"

#define NEW_MAGIC "glibc-ld.so.cache1.1"
#define OLD_MAGIC "ld.so-1.7.0"
#define NEW_HEADER 48u
#define NEW_ENTRY 24u
#define OLD_HEADER 16u
#define OLD_ENTRY 12u

static uint32_t get_u32(const unsigned char *p) {
        uint32_t v;
        memcpy(&v, p, sizeof v);
        return v;
}

bool gs_ldcache_native(int32_t flags) {
        if ((flags & 0xff) != 3) /* FLAG_ELF_LIBC6 */
                return false;
#if defined(__x86_64__)
        return (flags & 0xff00) == 0x0300;
#elif defined(__aarch64__)
        return (flags & 0xff00) == 0x0a00;
#elif defined(__powerpc64__)
        return (flags & 0xff00) == 0x0500;
#else
        return true;
#endif
}

/* The string at off (from base), NUL-terminated before end; NULL otherwise. */
static const char *string_at(const unsigned char *base, size_t avail, uint32_t off) {
        if (off >= avail)
                return NULL;
        const void *nul = memchr(base + off, '\0', avail - off);
        return nul ? (const char *)base + off : NULL;
}

int gs_ldcache_parse(const void *data, size_t len, gs_ldcache_fn fn, void *userdata) {
        const unsigned char *p = data;
        size_t start = 0;
        if (!data || len > GS_LDCACHE_MAX)
                return -EBADMSG;
        if (len >= OLD_HEADER && memcmp(p, OLD_MAGIC, sizeof OLD_MAGIC - 1) == 0) {
                uint32_t n_old = get_u32(p + 12);
                if (n_old > (len - OLD_HEADER) / OLD_ENTRY)
                        return -EBADMSG;
                start = (OLD_HEADER + (size_t)n_old * OLD_ENTRY + 7) & ~(size_t)7;
        }
        if (start > len || len - start < NEW_HEADER || memcmp(p + start, NEW_MAGIC, sizeof NEW_MAGIC - 1) != 0)
                return -EBADMSG;
        const unsigned char *base = p + start;
        size_t avail = len - start;
        uint32_t nlibs = get_u32(base + 20);
        if (nlibs > (avail - NEW_HEADER) / NEW_ENTRY)
                return -EBADMSG;
        for (uint32_t i = 0; i < nlibs; i++) {
                const unsigned char *e = base + NEW_HEADER + (size_t)i * NEW_ENTRY;
                struct gs_ldcache_entry ent;
                int32_t flags;
                memcpy(&flags, e, sizeof flags);
                ent.flags = flags;
                ent.soname = string_at(base, avail, get_u32(e + 4));
                ent.path = string_at(base, avail, get_u32(e + 8));
                if (!ent.soname || !ent.path)
                        return -EBADMSG;
                int r = fn(&ent, userdata);
                if (r < 0)
                        return r;
        }
        return 0;
}
