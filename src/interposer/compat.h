/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compat — keeps libgpuslice-cuda.so loadable on glibc 2.17 (x86-64), the oldest glibc of the
 * distributions CUDA supports (docs/interposer.md, "glibc floor"). Included first by every file of the
 * interposer.
 *
 * Built on a newer glibc, calls would bind to the newest symbol versions: dlopen/dlsym/dlerror/dladdr and
 * pthread_create/pthread_once @GLIBC_2.34 (moved into libc), pthread_sigmask @2.32, stat/fstat @2.33 —
 * and a preload that cannot load is skipped by the loader, so the workload would run unlimited. The
 * pins below bind the old versions instead (the same functions; on glibc < 2.34 they live in libdl.so.2
 * and libpthread.so.0, which the library therefore lists as DT_NEEDED), and stat/fstat go through the
 * system call (before 2.33 they were inline wrappers of __xstat, not symbols). GPUSLICE_GLIBC_FLOOR is
 * set for the interposer's own build only (not under sanitizers, whose runtimes interpose these).
 * tests/interposer/check-glibc-floor.sh fails on any version newer than 2.17.
 */
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(GPUSLICE_GLIBC_FLOOR) && defined(__x86_64__) && defined(__GLIBC__)
__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
__asm__(".symver dlerror,dlerror@GLIBC_2.2.5");
__asm__(".symver dladdr,dladdr@GLIBC_2.2.5");
__asm__(".symver pthread_create,pthread_create@GLIBC_2.2.5");
__asm__(".symver pthread_once,pthread_once@GLIBC_2.2.5");
__asm__(".symver pthread_sigmask,pthread_sigmask@GLIBC_2.2.5");
#endif

/* stat(2) and fstat(2) without glibc's versioned wrappers (the kernel's struct stat is glibc's on x86-64). */
static inline int gs_stat(const char *path, struct stat *st) {
        return (int)syscall(SYS_newfstatat, AT_FDCWD, path, st, 0);
}

static inline int gs_fstat(int fd, struct stat *st) {
        return (int)syscall(SYS_fstat, fd, st);
}
