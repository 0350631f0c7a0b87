/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for topo_parse: `nvidia-smi topo -m` text and node descriptions (two corpora,
 * one parser). Whatever comes in: no crash, no read past the input, and either a clear error or
 * a model that validates, whose tree holds every GPU once and whose printed links read back. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

#include "fuzz.h"
#include "topo/topo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static struct topo t;
        static struct topo_tree tr;
        struct gs_error e;
        /* copy so the parser cannot lean on a terminator past `size` */
        char *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        if (size)
                memcpy(buf, data, size);
        int r = topo_parse(buf, size, &t, &e);
        if (r < 0) {
                CHECK(r == -EINVAL);
                CHECK(e.message[0] != '\0');
        } else {
                CHECK(topo_validate(&t, NULL) == 0);
                topo_tree_build(&t, &tr);
                uint64_t seen = 0;
                for (unsigned k = 0; k < tr.n_nodes; k++)
                        if (tr.nodes[k].kind == TOPO_TREE_GPU) {
                                CHECK(!(seen & (1ULL << tr.nodes[k].gpu)));
                                seen |= 1ULL << tr.nodes[k].gpu;
                        }
                CHECK(seen == (t.n_gpus >= 64 ? ~0ULL : (1ULL << t.n_gpus) - 1));
                for (unsigned i = 0; i < t.n_gpus; i++)
                        for (unsigned j = 0; j < t.n_gpus; j++) {
                                char b[8];
                                struct topo_link l;
                                const char *n = topo_link_name(t.link[i][j], b);
                                CHECK(topo_link_from_name(n, strlen(n), &l) == 0 || t.link[i][j].pcie == 0);
                        }
        }
        free(buf);
        return 0;
}
