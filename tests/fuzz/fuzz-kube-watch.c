/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the watch stream decoder (src/kube/decoder.c): the input is split into chunks
 * at positions taken from its first byte, as a network would cut it. Whatever comes in: no crash,
 * every event handed out has a known type and an object, and the same bytes fed in one chunk
 * give the same events up to the first error. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "kube/kube.h"

struct tally {
        unsigned n;
        uint64_t hash;
};

static int on_event(const struct kube_event *ev, void *u) {
        struct tally *t = u;
        CHECK(ev->type <= KUBE_EVENT_ERROR);
        CHECK(json_is_object(ev->object));
        if (ev->type == KUBE_EVENT_BOOKMARK)
                CHECK(ev->resource_version != NULL);
        t->n++;
        t->hash = t->hash * 31 + (uint64_t)ev->type + (ev->resource_version ? strlen(ev->resource_version) : 0);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        unsigned step = data[0] ? data[0] : 1;
        const char *in = (const char *)data + 1;
        size_t len = size - 1;

        struct tally a = { 0 }, b = { 0 };
        struct kube_watch_decoder d;
        kube_watch_decoder_init(&d, 4096, on_event, &a);
        int ra = 0;
        for (size_t off = 0; off < len && ra == 0; off += step) {
                size_t n = len - off < step ? len - off : step;
                char *chunk = malloc(n); /* exact-size copy: no reading past a chunk */
                if (!chunk)
                        break;
                memcpy(chunk, in + off, n);
                ra = kube_watch_decoder_feed(&d, chunk, n);
                free(chunk);
        }
        kube_watch_decoder_done(&d);

        kube_watch_decoder_init(&d, 4096, on_event, &b);
        char *all = malloc(len ? len : 1);
        if (!all)
                return 0;
        memcpy(all, in, len);
        int rb = kube_watch_decoder_feed(&d, all, len);
        free(all);
        kube_watch_decoder_done(&d);
        CHECK((ra < 0) == (rb < 0) || ra == -E2BIG || rb == -E2BIG);
        if (ra == 0 && rb == 0)
                CHECK(a.n == b.n && a.hash == b.hash);
        return 0;
}
