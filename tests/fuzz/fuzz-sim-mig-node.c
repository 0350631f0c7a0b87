/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the simulator's `mig` node-description lines (sim/mig-node.c) after the topology
 * parser: no crash, no read past the input; a refusal says why; an accepted description builds MIG
 * state the hardware could hold (no two GPU instances on one memory slice, at most 7 compute slices, no
 * two compute instances on one compute slice, distinct MIG device indices). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "sim/sim.h"

static void check_gpu(const struct sim_mig_gpu *g, const struct sim_mig_model *m) {
        unsigned mem = 0, compute = 0, indices = 0;
        for (unsigned i = 0; i < SIM_MIG_MAX_GI; i++) {
                const struct sim_mig_gi *gi = &g->gi[i];
                if (!gi->used)
                        continue;
                CHECK(m != NULL);
                const struct sim_mig_profile *p = sim_mig_profile(m, gi->profile);
                CHECK(p != NULL);
                unsigned bits = ((1u << gi->size) - 1) << gi->start;
                CHECK((mem & bits) == 0);
                mem |= bits;
                compute += p->slices;
                unsigned cs = 0;
                for (unsigned j = 0; j < SIM_MIG_MAX_CI; j++) {
                        const struct sim_mig_ci *ci = &gi->ci[j];
                        if (!ci->used)
                                continue;
                        unsigned cb = ((1u << ci->size) - 1) << ci->start;
                        CHECK((cs & cb) == 0 && ci->start + ci->size <= p->slices);
                        cs |= cb;
                        CHECK(ci->index < SIM_MIG_MAX_DEVICES && !(indices & (1u << ci->index)));
                        indices |= 1u << ci->index;
                }
        }
        CHECK(compute <= 7);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static struct topo t;
        static struct sim_mig_node m;
        char *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        if (size)
                memcpy(buf, data, size);
        struct gs_error e;
        if (topo_parse(buf, size, &t, &e) == 0) {
                char err[256] = "";
                int r = sim_mig_node_parse(buf, size, &t, &m, err, sizeof err);
                if (r < 0) {
                        CHECK(r == -EINVAL && err[0]);
                } else {
                        for (unsigned i = 0; i < t.n_gpus; i++)
                                check_gpu(&m.gpu[i], sim_mig_model(&t.gpu[i]));
                }
        }
        free(buf);
        return 0;
}
