/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz the fractional-GPU surface of the node agent (src/agent/share.c): the first byte picks the
 * device-ID parser or a core/memory GetPreferredAllocation or Allocate, the rest is the input as
 * kubelet (or anyone who can reach the socket) would send it. An ID that parses must format back
 * to itself; every call gets an answer or a clean gRPC error, and every answer decodes again.
 * The interposer path does not exist, so Allocate stops before writing any file. A first byte of
 * 0xf0 or more feeds the rest to the journal parser (share_journal_decode) on a fresh book in
 * memory, which must accept or reject it whole; 0xe0..0xef splits the rest at its first NUL into a
 * snapshot and a log (gpuslice.fractions.log) replayed on it (share_journal_replay): a rejected log
 * leaves no record. GPU 1 is in MIG mode with two MIG devices (shared like small GPUs: docs/mig.md): an
 * ID of GPU 1 itself must never parse.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "agent/devices.h"
#include "mig/mig.h"
#include "agent/plugin.h"
#include "agent/share-book.h"
#include "agent/share-journal.h"
#include "agent/share.h"
#include "deviceplugin.pb-c.h"
#include "topo/topo.h"

static const char node[] = "      GPU0  GPU1  GPU2\n"
                           "GPU0   X    NV2   SYS\n"
                           "GPU1  NV2    X    SYS\n"
                           "GPU2  SYS   SYS    X\n"
                           "gpu 0 uuid=GPU-00000000-0000-0000-0000-000000000000 numa=0 memory=4GiB\n"
                           "gpu 1 uuid=GPU-00000000-0000-0000-0000-000000000001 numa=0 memory=4GiB\n"
                           "gpu 2 uuid=GPU-00000000-0000-0000-0000-000000000002 numa=1 memory=2GiB\n";

/* GPU 1 in MIG mode: two 1 GiB MIG devices (table 3 and 4). */
static void add_mig(struct devices *d) {
        static struct mig_node m;
        mig_node_init(&m, 3);
        m.gpu[1].mode = 1;
        for (unsigned k = 0; k < 2; k++) {
                struct mig_device *x = &m.gpu[1].dev[m.gpu[1].n_devices++];
                x->gpu = 1;
                x->index = k;
                x->gi = 7 + k;
                snprintf(x->profile, sizeof x->profile, "1g.10gb");
                snprintf(x->uuid, sizeof x->uuid, "MIG-00000000-0000-0000-0000-00000000000%u", k);
                x->sms = 14;
                x->memory_total = UINT64_C(1) << 30;
        }
        if (devices_add_mig(d, &m) != 2)
                abort();
}

static struct share *get_share(void) {
        static struct share *s;
        if (!s) {
                static struct topo t;
                struct gs_error err;
                if (topo_parse(node, sizeof node - 1, &t, &err) < 0)
                        abort();
                struct plugin_options o = { .resource = "nvidia.com/gpu",
                                            .core_resource = "gpuslice.io/gpu-core",
                                            .memory_resource = "gpuslice.io/gpu-memory",
                                            .memory_unit = 256u << 20,
                                            .list_envvar = true,
                                            .dev_root = "/nonexistent",
                                            .interposer = "/nonexistent/libgpuslice-cuda.so",
                                            .limits_root = "/nonexistent/containers" };
                struct devices *d = NULL;
                struct plugin *p = NULL;
                if (devices_new(&t, o.memory_unit, SHARE_MEM_IDS_MAX, &d) < 0)
                        abort();
                add_mig(d);
                if (plugin_new(d, &o, &p) < 0 || share_new(p, &s) < 0)
                        abort();
                (void)devices_fault(d, 2, "xid 79");
        }
        return s;
}

static const struct devices *get_devices(void) {
        static struct devices *d;
        if (!d) {
                static struct topo t;
                struct gs_error err;
                if (topo_parse(node, sizeof node - 1, &t, &err) < 0 ||
                    devices_new(&t, 256u << 20, SHARE_MEM_IDS_MAX, &d) < 0)
                        abort();
                add_mig(d);
        }
        return d;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        struct gs_error st = { 0 };
        uint8_t *out = NULL;
        size_t out_len = 0;
        const uint8_t *req = data + 1;
        size_t len = size - 1;
        enum plugin_kind kind = (data[0] & 1) ? PLUGIN_MEMORY : PLUGIN_CORE;

        if (data[0] >= 0xf0) { /* the fractional journal (gpuslice.fractions), on a book in memory */
                struct share_book *b = share_book_new();
                uint64_t seq = 0;
                if (!b)
                        return 0;
                int r = share_journal_decode(get_devices(), b, (const char *)req, len, &seq);
                if (r != 0 && r != -EBADMSG && r != -ENOMEM)
                        abort();
                if (r != 0 && share_book_count(b) != 0)
                        abort(); /* a rejected journal leaves nothing behind */
                share_book_free(b);
                return 0;
        }
        if (data[0] >= 0xe0) { /* snapshot NUL log */
                const uint8_t *nul = memchr(req, 0, len);
                size_t slen = nul ? (size_t)(nul - req) : 0;
                const char *log = nul ? (const char *)nul + 1 : (const char *)req;
                size_t llen = nul ? len - slen - 1 : len;
                struct share_book *b = share_book_new();
                uint64_t seq = 0;
                if (!b)
                        return 0;
                if (slen)
                        (void)share_journal_decode(get_devices(), b, (const char *)req, slen, &seq);
                int r = share_journal_replay(get_devices(), b, log, llen, &seq);
                if (r < 0 && r != -EBADMSG && r != -ENOMEM)
                        abort();
                if (r == -EBADMSG && share_book_count(b) != 0)
                        abort(); /* rejected whole */
                share_book_free(b);
                return 0;
        }
        switch ((data[0] >> 1) % 3) {
                case 0: {
                        char id[128];
                        if (len >= sizeof id)
                                return 0;
                        memcpy(id, req, len);
                        id[len] = 0;
                        enum plugin_kind k;
                        unsigned g, n;
                        char back[SHARE_ID_MAX];
                        const struct devices *d = get_devices();
                        if (share_parse_id(d, id, &k, &g, &n) == 0 &&
                            (share_format_id(devices_info(d, g)->id, k, n, back, sizeof back) < 0 ||
                             strcmp(back, id) != 0 || devices_info(d, g)->mig_mode))
                                abort();
                        return 0;
                }
                case 1:
                        if (share_get_preferred(share_service(get_share(), kind), req, len, &out, &out_len, &st) ==
                            RPC_OK) {
                                V1beta1__PreferredAllocationResponse *r =
                                        v1beta1__preferred_allocation_response__unpack(NULL, out_len, out);
                                if (!r)
                                        abort();
                                v1beta1__preferred_allocation_response__free_unpacked(r, NULL);
                        }
                        break;
                default:
                        if (share_allocate(share_service(get_share(), kind), req, len, &out, &out_len, &st) == RPC_OK)
                                abort(); /* the interposer is missing: never OK */
                        break;
        }
        free(out);
        return 0;
}
