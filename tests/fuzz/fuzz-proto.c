/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the node agent's protocol surface: the first byte picks a DevicePlugin method, the rest is
 * the request as kubelet (or anyone who can reach the socket) would send it (src/agent/whole.c,
 * plugin.c). Every input must
 * get an answer or a clean gRPC error — never a crash, leak or out-of-bounds access — and every
 * successful answer must decode again. Also decodes the PodResources List answer the agent reads.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "agent/devices.h"
#include "agent/plugin.h"
#include "agent/whole.h"
#include "alloc/alloc.h"
#include "deviceplugin.pb-c.h"
#include "podresources.pb-c.h"
#include "topo/topo.h"

static const char node[] = "      GPU0  GPU1  GPU2  GPU3\n"
                           "GPU0   X    NV2   PHB   SYS\n"
                           "GPU1  NV2    X    PHB   SYS\n"
                           "GPU2  PHB   PHB    X    PIX\n"
                           "GPU3  SYS   SYS   PIX    X\n"
                           "gpu 0 uuid=GPU-00000000-0000-0000-0000-000000000000 numa=0\n"
                           "gpu 1 uuid=GPU-00000000-0000-0000-0000-000000000001 numa=0\n"
                           "gpu 2 uuid=GPU-00000000-0000-0000-0000-000000000002 numa=1\n"
                           "gpu 3 uuid=GPU-00000000-0000-0000-0000-000000000003 numa=1\n";

static struct plugin *get_plugin(void) {
        static struct plugin *p;
        if (!p) {
                static struct topo t;
                struct gs_error err;
                if (topo_parse(node, sizeof node - 1, &t, &err) < 0)
                        abort();
                struct plugin_options o = { .resource = "nvidia.com/gpu",
                                            .list_envvar = true,
                                            .list_cdi = true,
                                            .cdi_kind = "gpuslice.io/gpu",
                                            .dev_root = "/nonexistent" };
                struct devices *d = NULL;
                if (devices_new(&t, 0, 0, &d) < 0 || plugin_new(d, &o, &p) < 0)
                        abort();
                /* one unhealthy GPU so that path is reachable */
                (void)devices_fault(d, 3, "xid 79");
        }
        return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        struct plugin *p = get_plugin();
        struct gs_error st = { 0 };
        uint8_t *out = NULL;
        size_t out_len = 0;
        enum rpc_code c = RPC_OK;
        const uint8_t *req = data + 1;
        size_t len = size - 1;

        switch (data[0] % 5) {
                case 0:
                        c = whole_allocate(p, req, len, &out, &out_len, &st);
                        if (c == RPC_OK) {
                                V1beta1__AllocateResponse *r = v1beta1__allocate_response__unpack(NULL, out_len, out);
                                if (!r)
                                        abort();
                                v1beta1__allocate_response__free_unpacked(r, NULL);
                        }
                        break;
                case 1:
                        c = whole_get_preferred(p, req, len, &out, &out_len, &st);
                        if (c == RPC_OK) {
                                V1beta1__PreferredAllocationResponse *r =
                                        v1beta1__preferred_allocation_response__unpack(NULL, out_len, out);
                                if (!r)
                                        abort();
                                v1beta1__preferred_allocation_response__free_unpacked(r, NULL);
                        }
                        break;
                case 2: c = plugin_get_options(plugin_service(p, PLUGIN_WHOLE), req, len, &out, &out_len, &st); break;
                case 3: c = plugin_pre_start(plugin_service(p, PLUGIN_WHOLE), req, len, &out, &out_len, &st); break;
                case 4: {
                        V1__ListPodResourcesResponse *r = v1__list_pod_resources_response__unpack(NULL, len, req);
                        if (r)
                                v1__list_pod_resources_response__free_unpacked(r, NULL);
                        break;
                }
        }
        if (c != RPC_OK && (st.message[0] == 0 || out))
                abort(); /* an error must say why and return nothing */
        free(out);
        /* Allocate records hand-outs; keep the state from growing across runs. */
        state_done(plugin_record(p));
        state_init(plugin_record(p));
        return 0;
}
