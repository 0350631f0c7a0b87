/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dl — every dlopen and dl_iterate_phdr of the interposer (interposer.h: gs_dlopen, gs_dl_iterate_phdr; both
 * take the loader's locks), never while the process forks: a child
 * forked while another thread was inside the loader would find its state half-changed (glibc asserts in
 * the child's next dlopen), so the fork handlers hold the lock across fork. Its own file: interposer.c
 * (the driver) and nvml-view.c (NVML) both open libraries, and interposer.c's fork handlers also reach
 * nvml-view.c — one owner below both keeps the folder without a file cycle (scripts/lint-cycles.py).
 *
 * Must never: be held across anything but dlopen or dl_iterate_phdr itself.
 */
#include "interposer/compat.h" /* first: the glibc floor */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include "interposer/interposer.h"

static pthread_mutex_t dl_lock = PTHREAD_MUTEX_INITIALIZER;

void *gs_dlopen(const char *file, int flags) {
        pthread_mutex_lock(&dl_lock);
        void *h = dlopen(file, flags);
        pthread_mutex_unlock(&dl_lock);
        return h;
}

int gs_dl_iterate_phdr(int (*fn)(struct dl_phdr_info *, size_t, void *), void *data) {
        pthread_mutex_lock(&dl_lock);
        int r = dl_iterate_phdr(fn, data);
        pthread_mutex_unlock(&dl_lock);
        return r;
}

void gs_dl_atfork_prepare(void) {
        pthread_mutex_lock(&dl_lock);
}

void gs_dl_atfork_parent(void) {
        pthread_mutex_unlock(&dl_lock);
}

void gs_dl_atfork_child(void) {
        pthread_mutex_init(&dl_lock, NULL);
}
