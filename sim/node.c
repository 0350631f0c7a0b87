/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node — load the simulated node description ($GPUSLICE_SIM_NODE) with the one topology parser (and
 * its `mig` lines with sim/mig-node.c), and name the node's shared state file. Never writes anything;
 * never logs (callers decide).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "util/util.h"

#define SIM_NODE_MAX_BYTES (4u << 20)

/* The MIG state of the description this process loaded last, and which node it was (by its GPUs). */
static struct sim_mig_node loaded_mig;
static uint64_t loaded_hash;

static uint64_t node_hash(const struct topo *t) {
        uint64_t h = 0xcbf29ce484222325ULL ^ t->n_gpus;
        for (unsigned i = 0; i < t->n_gpus; i++)
                for (const unsigned char *p = (const unsigned char *)t->gpu[i].uuid; *p; p++)
                        h = (h ^ *p) * 0x100000001b3ULL;
        return h | 1; /* never 0: 0 means nothing loaded */
}

const struct sim_mig_node *sim_node_mig(const struct topo *t) {
        return loaded_hash && loaded_hash == node_hash(t) ? &loaded_mig : NULL;
}

int sim_node_load(struct topo *ret, char *ret_path, size_t path_len, char *err, size_t err_len) {
        const char *name = secure_getenv(SIM_ENV_NODE);
        if (!name || !*name) {
                snprintf(err, err_len, "%s is not set: no simulated node (no driver loaded)", SIM_ENV_NODE);
                return -ENOENT;
        }
        char abs[PATH_MAX];
        if (!realpath(name, abs)) {
                int r = -errno;
                snprintf(err, err_len, "%s=%s: %s", SIM_ENV_NODE, name, strerror(-r));
                return r;
        }
        _cleanup_(freep) char *text = NULL;
        size_t len = 0;
        int r = read_file(abs, SIM_NODE_MAX_BYTES, &text, &len);
        if (r < 0) {
                snprintf(err, err_len, "%s: cannot read: %s", abs, strerror(-r));
                return r;
        }
        struct gs_error perr = { 0 };
        r = topo_parse(text, len, ret, &perr);
        if (r < 0) {
                snprintf(err, err_len, "%s: %s", abs, perr.message); /* "line N: …" */
                return -EINVAL;
        }
        if (ret->n_gpus == 0) {
                snprintf(err, err_len, "%s: the node has no GPUs", abs);
                return -EINVAL;
        }
        char merr[256];
        r = sim_mig_node_parse(text, len, ret, &loaded_mig, merr, sizeof merr);
        if (r < 0) {
                snprintf(err, err_len, "%s: %s", abs, merr);
                return -EINVAL;
        }
        loaded_hash = node_hash(ret);
        if (strlen(abs) >= path_len) {
                snprintf(err, err_len, "%s: path too long", abs);
                return -ENAMETOOLONG;
        }
        strscpy(ret_path, abs, path_len);
        return 0;
}

int sim_state_path(const char *node_path, char *buf, size_t len) {
        const char *explicit = secure_getenv(SIM_ENV_STATE);
        int n;
        if (explicit && *explicit) {
                n = snprintf(buf, len, "%s", explicit);
        } else {
                uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a 64 */
                for (const unsigned char *p = (const unsigned char *)node_path; *p; p++) {
                        h ^= *p;
                        h *= 0x100000001b3ULL;
                }
                n = snprintf(buf, len, "/dev/shm/gpuslice-sim-%016" PRIx64, h);
        }
        if (n < 0 || (size_t)n >= len)
                return -ENAMETOOLONG;
        return 0;
}
