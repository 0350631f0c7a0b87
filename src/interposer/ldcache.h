/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ldcache — reader of glibc's /etc/ld.so.cache (the loader's cache of library names → paths). Pure: no I/O,
 * no allocation, depends on libc's <string.h> only, so libgpuslice-cuda.so compiles it in (to find the real
 * driver where the loader would) and the CDI generator links it (to find the driver's libraries).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GS_LDCACHE_MAX (64u << 20) /* bigger caches are refused */

struct gs_ldcache_entry {
        int32_t flags;      /* FLAG_ELF_LIBC6 (3) | architecture bits (0x0300 x86-64, 0x0a00 aarch64, …) */
        const char *soname; /* "libcuda.so.1", NUL-terminated inside the data */
        const char *path;   /* "/usr/lib/x86_64-linux-gnu/libcuda.so.1" */
};
/* Called per entry; a negative return stops the walk and is returned. */
typedef int (*gs_ldcache_fn)(const struct gs_ldcache_entry *e, void *userdata);

/* Walk the cache in data[0..len), in the cache's order (the loader's). 0, or -EBADMSG when it is not a
 * well-formed cache (every offset and count is checked against len; strings must end inside the data), or
 * fn's error. */
int gs_ldcache_parse(const void *data, size_t len, gs_ldcache_fn fn, void *userdata);
/* Whether an entry's flags are a 64-bit library for the machine this was built for. */
bool gs_ldcache_native(int32_t flags);
