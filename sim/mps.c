/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mps — the simulated MPS daemon's state file (mps.h): parsed and formatted here only, for the daemon and the
 * simulated libcuda.so.1. Must never trust a daemon that is gone (its lock is checked).
 */
#include "sim/mps.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/file.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

int sim_mps_parse(const char *text, size_t len, struct sim_mps *ret) {
        struct sim_mps m = { .thread_percentage = 100 };
        char line[128];
        size_t at = 0;
        bool pid = false;
        while (at < len) {
                size_t n = 0;
                while (at + n < len && text[at + n] != '\n')
                        n++;
                if (n >= sizeof line)
                        return -EINVAL;
                memcpy(line, text + at, n);
                line[n] = 0;
                at += n + 1;
                unsigned a, b;
                uint64_t v;
                char tail;
                if (!line[0])
                        continue;
                if (sscanf(line, "pid %u%c", &a, &tail) == 1 && a > 0 && a < INT32_MAX) {
                        m.pid = (int)a;
                        pid = true;
                } else if (sscanf(line, "seq %" SCNu64 "%c", &v, &tail) == 1)
                        m.seq = v;
                else if (sscanf(line, "thread-percentage %u%c", &a, &tail) == 1 && a >= 1 && a <= 100)
                        m.thread_percentage = a;
                else if (sscanf(line, "pinned %u %" SCNu64 "%c", &b, &v, &tail) == 2 && b < SIM_MPS_GPUS)
                        m.pinned[b] = v;
                else
                        return -EINVAL;
        }
        if (!pid)
                return -EINVAL;
        *ret = m;
        return 0;
}

int sim_mps_format(const struct sim_mps *m, char *buf, size_t len) {
        size_t at = 0;
        int w = snprintf(buf, len, "pid %d\nseq %" PRIu64 "\nthread-percentage %u\n", m->pid, m->seq,
                         m->thread_percentage);
        if (w < 0 || (size_t)w >= len)
                return -ENOSPC;
        at = (size_t)w;
        for (unsigned i = 0; i < SIM_MPS_GPUS; i++) {
                if (!m->pinned[i])
                        continue;
                w = snprintf(buf + at, len - at, "pinned %u %" PRIu64 "\n", i, m->pinned[i]);
                if (w < 0 || (size_t)w >= len - at)
                        return -ENOSPC;
                at += (size_t)w;
        }
        return (int)at;
}

int sim_mps_load(const char *dir, struct sim_mps *ret) {
        char path[4200];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, SIM_MPS_STATE) >= sizeof path)
                return -ENAMETOOLONG;
        char *text = NULL;
        size_t len = 0;
        int r = read_file(path, 1 << 16, &text, &len);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        struct sim_mps m;
        r = sim_mps_parse(text, len, &m);
        free(text);
        if (r < 0)
                return r;
        if (!sim_mps_alive(dir))
                return 0; /* the daemon is gone: its state means nothing */
        *ret = m;
        return 1;
}

bool sim_mps_alive(const char *dir) {
        char path[4200];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, SIM_MPS_LOCK) >= sizeof path)
                return false;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        bool held = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
        close(fd); /* a lock we got goes with it */
        return held;
}

bool sim_mps_client(void) {
        const char *dir = secure_getenv("CUDA_MPS_PIPE_DIRECTORY");
        return dir && dir[0] && sim_mps_alive(dir);
}

uint64_t sim_mps_client_limit(unsigned index) {
        const char *dir = secure_getenv("CUDA_MPS_PIPE_DIRECTORY");
        if (!dir || !dir[0])
                return 0;
        struct sim_mps m;
        if (sim_mps_load(dir, &m) <= 0)
                return 0;
        const char *own = secure_getenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"); /* "0=2G,1=1G" */
        for (const char *p = own; p && *p;) {
                unsigned i;
                char val[32];
                int used = 0;
                uint64_t v;
                if (sscanf(p, "%u=%31[^,]%n", &i, val, &used) == 2 && i == index && parse_size(val, &v) == 0)
                        return v;
                p = strchr(p, ',');
                p = p ? p + 1 : NULL;
        }
        return index < SIM_MPS_GPUS ? m.pinned[index] : 0;
}

unsigned sim_mps_client_threads(void) {
        const char *dir = secure_getenv("CUDA_MPS_PIPE_DIRECTORY");
        struct sim_mps m;
        if (!dir || !dir[0] || sim_mps_load(dir, &m) <= 0)
                return 100;
        const char *own = secure_getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
        unsigned v;
        char tail = 0;
        if (own && sscanf(own, "%u%c", &v, &tail) >= 1 && (tail == 0 || tail == '.') && v >= 1 && v <= 100)
                return v;
        return m.thread_percentage;
}
