/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the simulator's shared state file check (sim/state.c): every process using the simulated
 * node maps the file, so a corrupt or foreign file must be refused with -EPROTO and a message —
 * never mapped and trusted. The first byte picks how the file is made: the raw input; a valid image
 * with its header overwritten by the input; or a valid image with the input at an offset and its
 * size changed. An accepted file is then read through the lock-free accessors.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "sim/sim.h"

static char path[64];
static uint8_t *image; /* a valid state file's bytes */
static struct topo node;

static void cleanup(void) {
        unlink(path);
}

static void setup(void) {
        snprintf(path, sizeof path, "/tmp/fuzz-sim-state-%d", (int)getpid());
        atexit(cleanup);
        node.n_gpus = 2;
        char err[512];
        struct sim_state *s;
        unlink(path);
        CHECK(sim_state_open_path(path, &node, "/nonexistent/fuzz.node", &s, err, sizeof err) == 0);
        image = malloc(sizeof *s);
        CHECK(image);
        memcpy(image, s, sizeof *s);
        sim_state_close(s);
}

static void write_file(const void *buf, size_t len) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        CHECK(fd >= 0);
        CHECK(len == 0 || write(fd, buf, len) == (ssize_t)len);
        close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (!image)
                setup();
        if (size < 1)
                return 0;
        const size_t full = sizeof(struct sim_state);
        uint8_t mode = data[0] % 3;
        data++, size--;
        if (mode == 0)
                write_file(data, size);
        else {
                uint8_t *f = malloc(full + 256);
                CHECK(f);
                memcpy(f, image, full);
                memset(f + full, 0xa5, 256);
                size_t len = full, off = 0;
                if (mode == 2 && size >= 4) {
                        off = ((size_t)data[0] << 8 | data[1]) * 8 % full;
                        int delta = (int)data[2] - 128; /* -128..127 bytes */
                        len = (size_t)((long)full + delta);
                        data += 3, size -= 3;
                }
                size_t n = size < full - off ? size : full - off;
                memcpy(f + off, data, n);
                write_file(f, len);
                free(f);
        }
        char err[512] = "";
        struct sim_state *s = NULL;
        int r = sim_state_open_path(path, &node, "/nonexistent/fuzz.node", &s, err, sizeof err);
        if (r < 0) {
                CHECK(r == -EPROTO);
                CHECK(err[0] && memchr(err, 0, sizeof err));
        } else {
                CHECK(s->magic == SIM_STATE_MAGIC && s->n_gpus == node.n_gpus);
                CHECK(memchr(s->node, 0, sizeof s->node));
                for (unsigned g = 0; g < node.n_gpus; g++) {
                        unsigned mem;
                        CHECK(sim_gpu_util_locked(s, g, &mem) <= 100 && mem <= 100);
                        (void)sim_state_used_locked(s, g);
                        (void)sim_gpu_temperature_locked(s, g);
                        (void)sim_gpu_power_mw_locked(s, g, 250000);
                }
                sim_state_close(s);
        }
        return 0;
}
