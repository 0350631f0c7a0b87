/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/state: record helpers, reconcile with kubelet's view, the file format and its
 * rejection of every truncation and bit flip, and the atomicity of state_save when a write fails.
 * Works only inside its own temp dir; restores every limit and signal disposition it changes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "helpers.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "state/state.h"
#include "util/util.h"

static char tmpdir[256];

static int setup_dir(void **state) {
        (void)state;
        char *d = test_tmpdir_new("test-state");
        strscpy(tmpdir, d, sizeof tmpdir);
        free(d);
        return 0;
}

static int teardown_dir(void **state) {
        (void)state;
        return test_rmtree(tmpdir) == 0 ? 0 : -1;
}

/* A fresh empty subdirectory of tmpdir for one test. */
static void subdir(const char *name, char *out, size_t len) {
        snprintf(out, len, "%s/%s", tmpdir, name);
        assert_int_equal(mkdir(out, 0700), 0);
}

static struct state_alloc mk(const char *resource, const char *id, const char *ns, const char *pod,
                             const char *container) {
        struct state_alloc a = { .alloc_time = 1700000000, .gpu_index = -1 };
        strscpy(a.resource, resource, sizeof a.resource);
        strscpy(a.device_id, id, sizeof a.device_id);
        strscpy(a.pod_namespace, ns, sizeof a.pod_namespace);
        strscpy(a.pod_name, pod, sizeof a.pod_name);
        strscpy(a.container, container, sizeof a.container);
        return a;
}

/* A state with a whole GPU, a fractional pair and an entry whose pod is not known yet. */
static void sample(struct gpuslice_state *s) {
        state_init(s);
        struct state_alloc a =
                mk("nvidia.com/gpu", "GPU-6a1f0c2e-1111-2222-3333-444455556666", "ml", "train-0", "main");
        strscpy(a.pod_uid, "0b7c5d4e-aaaa-bbbb-cccc-ddddeeeeffff", sizeof a.pod_uid);
        a.gpu_index = 3;
        assert_int_equal(state_add(s, &a), 0);
        struct state_alloc b = mk("gpuslice.io/gpu-core", "GPU-0::core-7", "web", "infer-\xc3\xa9", "srv");
        b.gpu_index = 0;
        b.core_percent = 25;
        assert_int_equal(state_add(s, &b), 0);
        struct state_alloc c = mk("gpuslice.io/gpu-memory", "GPU-0::mem-\"12\"\\", "", "", "");
        c.gpu_index = 0;
        c.memory_bytes = 256ULL << 20;
        c.alloc_time = 0;
        assert_int_equal(state_add(s, &c), 0);
}

static void encode(const struct gpuslice_state *s, char **buf, size_t *len) {
        assert_int_equal(state_encode(s, buf, len), 0);
}

static void assert_same_state(const struct gpuslice_state *a, const struct gpuslice_state *b) {
        assert_int_equal(a->generation, b->generation);
        assert_int_equal(a->n_allocs, b->n_allocs);
        for (size_t i = 0; i < a->n_allocs; i++) {
                const struct state_alloc *x = &a->allocs[i], *y = &b->allocs[i];
                assert_string_equal(x->resource, y->resource);
                assert_string_equal(x->device_id, y->device_id);
                assert_string_equal(x->pod_namespace, y->pod_namespace);
                assert_string_equal(x->pod_name, y->pod_name);
                assert_string_equal(x->pod_uid, y->pod_uid);
                assert_string_equal(x->container, y->container);
                assert_int_equal(x->alloc_time, y->alloc_time);
                assert_int_equal(x->gpu_index, y->gpu_index);
                assert_int_equal(x->memory_bytes, y->memory_bytes);
                assert_int_equal(x->core_percent, y->core_percent);
        }
}

/* Wrap a JSON body in a correct header, so the schema checks are reached. */
static char *wrap(const char *body, size_t *ret_len) {
        size_t blen = strlen(body);
        char *out = malloc(blen + 64);
        assert_non_null(out);
        int h = snprintf(out, 64, "gpuslice-state 1 %zu %08" PRIx32 "\n", blen, state_crc32c(0, body, blen));
        memcpy(out + h, body, blen);
        *ret_len = (size_t)h + blen;
        return out;
}

static int decode_text(const char *body) {
        size_t len;
        _cleanup_(freep) char *file = wrap(body, &len);
        struct gpuslice_state s = { .generation = 77 };
        int r = state_decode(file, len, &s);
        if (r == 0)
                state_done(&s);
        else
                assert_int_equal(s.generation, 77); /* untouched */
        return r;
}

/* ---- CRC ---- */

static void test_crc32c_known_vectors(void **state) {
        (void)state;
        assert_int_equal(state_crc32c(0, "123456789", 9), 0xe3069283);
        assert_int_equal(state_crc32c(0, "", 0), 0);
        static const uint8_t zeros[32] = { 0 };
        assert_int_equal(state_crc32c(0, zeros, sizeof zeros), 0x8a9136aa); /* RFC 3720 B.4 */
        /* chaining equals one pass */
        assert_int_equal(state_crc32c(state_crc32c(0, "1234", 4), "56789", 5), 0xe3069283);
}

/* ---- record helpers ---- */

static void test_add_find_remove(void **state) {
        (void)state;
        struct gpuslice_state s;
        sample(&s);
        assert_int_equal(s.n_allocs, 3);
        assert_int_equal(s.generation, 3);
        const struct state_alloc *a = state_find(&s, "nvidia.com/gpu", "GPU-6a1f0c2e-1111-2222-3333-444455556666");
        assert_non_null(a);
        assert_string_equal(a->pod_name, "train-0");
        assert_ptr_equal(state_find(&s, NULL, "GPU-0::core-7"), &s.allocs[1]);
        assert_null(state_find(&s, "nvidia.com/gpu", "GPU-0::core-7"));
        assert_int_equal(state_remove(&s, "gpuslice.io/gpu-core", "GPU-0::core-7"), 0);
        assert_int_equal(s.generation, 4);
        assert_null(state_find(&s, NULL, "GPU-0::core-7"));
        assert_int_equal(state_remove(&s, NULL, "GPU-0::core-7"), -ENOENT);
        assert_int_equal(s.generation, 4);
        assert_int_equal(s.n_allocs, 2);
        state_done(&s);
        state_done(&s);
        state_done(NULL);
}

static void test_add_duplicate_rejected(void **state) {
        (void)state;
        struct gpuslice_state s;
        sample(&s);
        struct state_alloc dup = mk("nvidia.com/gpu", "GPU-6a1f0c2e-1111-2222-3333-444455556666", "x", "y", "z");
        assert_int_equal(state_add(&s, &dup), -EEXIST);
        /* the same ID under another resource is a different device */
        struct state_alloc other = mk("example.com/gpu", "GPU-6a1f0c2e-1111-2222-3333-444455556666", "x", "y", "z");
        assert_int_equal(state_add(&s, &other), 0);
        state_done(&s);
}

static void test_add_invalid_rejected(void **state) {
        (void)state;
        struct gpuslice_state s;
        state_init(&s);
        struct state_alloc bad[6];
        bad[0] = mk("", "id", "", "", "");
        bad[1] = mk("r/x", "", "", "", "");
        bad[2] = mk("r/x", "id\n", "", "", "");
        bad[3] = mk("r/x", "id", "", "", "");
        bad[3].core_percent = 101;
        bad[4] = mk("r/x", "id", "", "", "");
        bad[4].gpu_index = -2;
        bad[5] = mk("r/x", "id", "", "", "");
        memset(bad[5].container, 'c', sizeof bad[5].container); /* not terminated */
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(state_add(&s, &bad[i]), -EINVAL);
        assert_int_equal(s.n_allocs, 0);
        assert_int_equal(s.generation, 0);
        state_done(&s);
}

/* Every string goes into the JSON body: bytes that are not UTF-8 would make every later encode
 * (and so every state_save) fail, so they are refused where they come in. */
static void test_add_invalid_utf8_rejected(void **state) {
        (void)state;
        struct gpuslice_state s;
        state_init(&s);
        static const char *bad[] = { "\xd3\xcf", "a\x80", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct state_alloc a = mk("r/x", bad[i], "", "", "");
                assert_int_equal(state_add(&s, &a), -EINVAL);
                a = mk("r/x", "id", "", bad[i], "");
                assert_int_equal(state_add(&s, &a), -EINVAL);
        }
        assert_int_equal(s.n_allocs, 0);
        struct state_alloc ok = mk("r/x", "gpu-\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x98\x80", "", "", "");
        assert_int_equal(state_add(&s, &ok), 0);
        char *buf = NULL;
        size_t len;
        assert_int_equal(state_encode(&s, &buf, &len), 0);
        free(buf);
        state_done(&s);
}

/* Found by fuzz-podres: kubelet reported a device ID with bytes that are not UTF-8; it was added,
 * and from then on the state could not be encoded. Such a report is skipped. */
static void test_reconcile_skips_invalid_utf8(void **state) {
        (void)state;
        struct gpuslice_state s;
        sample(&s);
        const struct state_report rep[] = {
                { .resource = "nvidia.com/gpu", .device_id = "GPU-09551615-0000\xd3\xcf\xcf\xcd" },
                { .resource = "nvidia.com/gpu", .device_id = "GPU-ok", .pod_name = "p\xff" },
        };
        size_t added, skipped;
        assert_int_equal(state_reconcile(&s, rep, ELEMENTSOF(rep), NULL, NULL, 1, 0, &added, NULL, NULL, &skipped), 0);
        assert_int_equal(added, 0);
        assert_int_equal(skipped, 2);
        char *buf = NULL;
        size_t len;
        assert_int_equal(state_encode(&s, &buf, &len), 0);
        free(buf);
        state_done(&s);
}

static void test_add_past_max_entries(void **state) {
        (void)state;
        struct gpuslice_state s;
        state_init(&s);
        struct state_alloc a = mk("r.io/x", "", "", "", "");
        /* fill directly (state_add's duplicate scan would make this quadratic) and add one more */
        for (unsigned i = 0; i < STATE_MAX_ENTRIES - 1; i++) {
                snprintf(a.device_id, sizeof a.device_id, "id-%u", i);
                if (i == 0)
                        assert_int_equal(state_add(&s, &a), 0);
                else {
                        if (s.n_allocs == s.cap) {
                                struct state_alloc *n = realloc(s.allocs, s.cap * 2 * sizeof *n);
                                assert_non_null(n);
                                s.allocs = n;
                                s.cap *= 2;
                        }
                        s.allocs[s.n_allocs++] = a;
                }
        }
        snprintf(a.device_id, sizeof a.device_id, "last");
        assert_int_equal(state_add(&s, &a), 0);
        assert_int_equal(s.n_allocs, STATE_MAX_ENTRIES);
        snprintf(a.device_id, sizeof a.device_id, "one-too-many");
        assert_int_equal(state_add(&s, &a), -E2BIG);
        assert_int_equal(s.n_allocs, STATE_MAX_ENTRIES);
        state_done(&s);
}

static void test_remove_container(void **state) {
        (void)state;
        struct gpuslice_state s;
        state_init(&s);
        struct state_alloc a = mk("nvidia.com/gpu", "g0", "ns", "p", "c1");
        assert_int_equal(state_add(&s, &a), 0);
        a = mk("nvidia.com/gpu", "g1", "ns", "p", "c1");
        assert_int_equal(state_add(&s, &a), 0);
        a = mk("nvidia.com/gpu", "g2", "ns", "p", "c2");
        assert_int_equal(state_add(&s, &a), 0);
        uint64_t g = s.generation;
        assert_int_equal(state_remove_container(&s, "ns", "p", "c1"), 2);
        assert_int_equal(s.n_allocs, 1);
        assert_string_equal(s.allocs[0].device_id, "g2");
        assert_int_equal(s.generation, g + 1);
        assert_int_equal(state_remove_container(&s, "ns", "p", "c1"), 0);
        assert_int_equal(s.generation, g + 1);
        state_done(&s);
}

static void test_copy_is_deep(void **state) {
        (void)state;
        struct gpuslice_state s, c;
        sample(&s);
        assert_int_equal(state_copy(&s, &c), 0);
        assert_same_state(&s, &c);
        assert_ptr_not_equal(s.allocs, c.allocs);
        assert_int_equal(state_remove(&c, NULL, "GPU-0::core-7"), 0);
        assert_int_equal(s.n_allocs, 3);
        state_done(&s);
        state_done(&c);
}

/* ---- reconcile ---- */

static bool only_nvidia(const char *resource, void *userdata) {
        (void)userdata;
        return streq(resource, "nvidia.com/gpu");
}

static void test_reconcile_adds_drops_updates(void **state) {
        (void)state;
        struct gpuslice_state s;
        state_init(&s);
        struct state_alloc a = mk("nvidia.com/gpu", "g0", "", "", ""); /* allocated, pod unknown */
        a.alloc_time = 100;
        a.gpu_index = 0;
        assert_int_equal(state_add(&s, &a), 0);
        a = mk("nvidia.com/gpu", "g1", "old", "gone", "c"); /* kubelet no longer reports it */
        a.alloc_time = 100;
        assert_int_equal(state_add(&s, &a), 0);
        a = mk("nvidia.com/gpu", "g2", "ns", "p", "c"); /* reported unchanged */
        a.alloc_time = 100;
        assert_int_equal(state_add(&s, &a), 0);
        uint64_t g = s.generation;

        const struct state_report rep[] = {
                { "nvidia.com/gpu", "g0", "ns", "p", NULL, "c" },
                { "nvidia.com/gpu", "g2", "ns", "p", "", "c" },
                { "nvidia.com/gpu", "g3", "ns", "q", NULL, "d" }, /* we did not know it */
                { "other.com/fpga", "f0", "ns", "q", NULL, "d" }, /* not ours */
                { "nvidia.com/gpu", "", "ns", "q", NULL, "d" },   /* malformed */
                { NULL, "g9", "ns", "q", NULL, "d" },             /* malformed */
        };
        size_t added = 9, removed = 9, updated = 9, skipped = 9;
        assert_int_equal(state_reconcile(&s, rep, ELEMENTSOF(rep), only_nvidia, NULL, 500, UINT64_MAX, &added, &removed,
                                         &updated, &skipped),
                         0);
        assert_int_equal(added, 1);
        assert_int_equal(removed, 1);
        assert_int_equal(updated, 2); /* g0 named, g2 listed for the first time (seen) */
        assert_int_equal(skipped, 2);
        assert_int_equal(s.n_allocs, 3);
        assert_int_equal(s.generation, g + 1);
        const struct state_alloc *x = state_find(&s, "nvidia.com/gpu", "g0");
        assert_non_null(x);
        assert_string_equal(x->pod_name, "p");
        assert_int_equal(x->gpu_index, 0);    /* kept */
        assert_int_equal(x->alloc_time, 100); /* kept */
        assert_null(state_find(&s, NULL, "g1"));
        assert_null(state_find(&s, NULL, "f0"));
        x = state_find(&s, "nvidia.com/gpu", "g3");
        assert_non_null(x);
        assert_int_equal(x->alloc_time, 500);
        assert_int_equal(x->gpu_index, -1);
        assert_string_equal(x->container, "d");
        state_done(&s);
}

static void test_reconcile_without_change_keeps_generation(void **state) {
        (void)state;
        struct gpuslice_state s;
        state_init(&s);
        struct state_alloc a = mk("nvidia.com/gpu", "g0", "ns", "p", "c");
        a.seen = true;
        assert_int_equal(state_add(&s, &a), 0);
        const struct state_report rep[] = { { "nvidia.com/gpu", "g0", "ns", "p", NULL, "c" } };
        size_t added, removed, updated;
        assert_int_equal(state_reconcile(&s, rep, 1, NULL, NULL, 5, UINT64_MAX, &added, &removed, &updated, NULL), 0);
        assert_int_equal(added + removed + updated, 0);
        assert_int_equal(s.generation, 1);
        state_done(&s);
}

static void test_reconcile_keeps_recent_unreported(void **state) {
        (void)state;
        struct gpuslice_state s;
        state_init(&s);
        struct state_alloc a = mk("nvidia.com/gpu", "old", "", "", "");
        a.alloc_time = 100;
        assert_int_equal(state_add(&s, &a), 0);
        a = mk("nvidia.com/gpu", "fresh", "", "", "");
        a.alloc_time = 195;
        assert_int_equal(state_add(&s, &a), 0);
        size_t removed;
        /* now = 200, grace 10 s: keep entries allocated at 190 or later */
        assert_int_equal(state_reconcile(&s, NULL, 0, NULL, NULL, 200, 190, NULL, &removed, NULL, NULL), 0);
        assert_int_equal(removed, 1);
        assert_non_null(state_find(&s, NULL, "fresh"));
        assert_null(state_find(&s, NULL, "old"));
        state_done(&s);
}

/* Issue 10: a fraction is free as soon as PodResources stops listing its container; the grace
 * holds only for entries PodResources never listed (still starting). */
static void test_reconcile_frees_seen_entry_at_once(void **state) {
        (void)state;
        struct gpuslice_state s;
        state_init(&s);
        struct state_alloc a = mk("gpuslice.io/gpu-core", "GPU-a::core-0", "", "", "");
        a.alloc_time = 195;
        assert_int_equal(state_add(&s, &a), 0);
        a = mk("gpuslice.io/gpu-core", "GPU-a::core-1", "", "", ""); /* never listed: starting */
        a.alloc_time = 195;
        assert_int_equal(state_add(&s, &a), 0);
        const struct state_report rep[] = { { "gpuslice.io/gpu-core", "GPU-a::core-0", "ns", "p", NULL, "c" } };
        size_t removed = 9, updated = 9;
        assert_int_equal(state_reconcile(&s, rep, 1, NULL, NULL, 196, 190, NULL, &removed, &updated, NULL), 0);
        assert_int_equal(removed, 0);
        assert_int_equal(updated, 1);
        assert_true(state_find(&s, NULL, "GPU-a::core-0")->seen);
        assert_false(state_find(&s, NULL, "GPU-a::core-1")->seen);
        /* one second later the container is gone from PodResources: its entry goes at once, the
         * never-listed one keeps its grace */
        assert_int_equal(state_reconcile(&s, NULL, 0, NULL, NULL, 197, 190, NULL, &removed, NULL, NULL), 0);
        assert_int_equal(removed, 1);
        assert_null(state_find(&s, NULL, "GPU-a::core-0"));
        assert_non_null(state_find(&s, NULL, "GPU-a::core-1"));
        /* the seen mark survives the file */
        a = mk("gpuslice.io/gpu-core", "GPU-a::core-2", "", "", "");
        a.seen = true;
        assert_int_equal(state_add(&s, &a), 0);
        char *buf = NULL;
        size_t len;
        assert_int_equal(state_encode(&s, &buf, &len), 0);
        struct gpuslice_state t;
        assert_int_equal(state_decode(buf, len, &t), 0);
        free(buf);
        assert_true(state_find(&t, NULL, "GPU-a::core-2")->seen);
        assert_false(state_find(&t, NULL, "GPU-a::core-1")->seen);
        state_done(&t);
        state_done(&s);
}

/* An entry kubelet has had every chance to record (it called again after the Allocate) and does
 * not list is gone at the next reconcile, however young; one made after that call keeps its grace;
 * the mark is not written to the file. */
static void test_reconcile_drops_settled_entry(void **state) {
        (void)state;
        struct gpuslice_state s;
        state_init(&s);
        struct state_alloc a = mk("nvidia.com/gpu", "GPU-a", "", "", "");
        a.alloc_time = 195;
        assert_int_equal(state_add(&s, &a), 0);
        uint64_t gen = s.generation;
        assert_int_equal(state_mark_settled(&s), 1);
        assert_int_equal(state_mark_settled(&s), 0);
        assert_int_equal(s.generation, gen);
        a = mk("nvidia.com/gpu", "GPU-b", "", "", ""); /* answered after kubelet's last call */
        a.alloc_time = 195;
        assert_int_equal(state_add(&s, &a), 0);
        char *buf = NULL;
        size_t len, removed = 9;
        assert_int_equal(state_encode(&s, &buf, &len), 0);
        assert_int_equal(state_reconcile(&s, NULL, 0, NULL, NULL, 196, 190, NULL, &removed, NULL, NULL), 0);
        assert_int_equal(removed, 1);
        assert_null(state_find(&s, NULL, "GPU-a"));
        assert_non_null(state_find(&s, NULL, "GPU-b"));
        struct gpuslice_state t;
        assert_int_equal(state_decode(buf, len, &t), 0);
        free(buf);
        assert_false(state_find(&t, NULL, "GPU-a")->settled);
        state_done(&t);
        state_done(&s);
}

static void test_reconcile_empty_report_drops_all(void **state) {
        (void)state;
        struct gpuslice_state s;
        sample(&s);
        size_t removed;
        assert_int_equal(state_reconcile(&s, NULL, 0, NULL, NULL, 1, UINT64_MAX, NULL, &removed, NULL, NULL), 0);
        assert_int_equal(removed, 3);
        assert_int_equal(s.n_allocs, 0);
        state_done(&s);
}

/* ---- encoding ---- */

static void test_encode_decode_round_trip(void **state) {
        (void)state;
        struct gpuslice_state s, t;
        sample(&s);
        _cleanup_(freep) char *buf = NULL;
        size_t len;
        encode(&s, &buf, &len);
        assert_true(startswith(buf, "gpuslice-state 1 "));
        assert_int_equal(strlen(buf), len);
        assert_int_equal(state_decode(buf, len, &t), 0);
        assert_same_state(&s, &t);
        state_done(&s);
        state_done(&t);
}

static void test_encode_empty_state(void **state) {
        (void)state;
        struct gpuslice_state s, t;
        state_init(&s);
        _cleanup_(freep) char *buf = NULL;
        size_t len;
        encode(&s, &buf, &len);
        assert_int_equal(state_decode(buf, len, &t), 0);
        assert_int_equal(t.n_allocs, 0);
        state_done(&t);
}

static void test_encode_rejects_invalid_entry(void **state) {
        (void)state;
        struct gpuslice_state s;
        sample(&s);
        s.allocs[1].core_percent = 500; /* corrupted in memory, bypassing state_add */
        char *buf = NULL;
        size_t len;
        assert_int_equal(state_encode(&s, &buf, &len), -EINVAL);
        assert_null(buf);
        state_done(&s);
}

static void test_decode_every_truncation_rejected(void **state) {
        (void)state;
        struct gpuslice_state s, t;
        sample(&s);
        _cleanup_(freep) char *buf = NULL;
        size_t len;
        encode(&s, &buf, &len);
        for (size_t n = 0; n < len; n++) {
                int r = state_decode(buf, n, &t);
                if (r != -EBADMSG)
                        fail_msg("truncated to %zu of %zu bytes: r=%d", n, len, r);
        }
        state_done(&s);
}

static void test_decode_every_bit_flip_rejected(void **state) {
        (void)state;
        struct gpuslice_state s, t;
        sample(&s);
        _cleanup_(freep) char *buf = NULL;
        size_t len;
        encode(&s, &buf, &len);
        for (size_t i = 0; i < len; i++)
                for (unsigned bit = 0; bit < 8; bit++) {
                        buf[i] ^= (char)(1u << bit);
                        int r = state_decode(buf, len, &t);
                        buf[i] ^= (char)(1u << bit);
                        if (r != -EBADMSG)
                                fail_msg("bit %u of byte %zu flipped: r=%d", bit, i, r);
                }
        assert_int_equal(state_decode(buf, len, &t), 0); /* restored: fine again */
        state_done(&t);
        state_done(&s);
}

static void test_decode_appended_bytes_rejected(void **state) {
        (void)state;
        struct gpuslice_state s, t;
        sample(&s);
        char *buf = NULL;
        size_t len;
        encode(&s, &buf, &len);
        char *longer = realloc(buf, len + 1);
        assert_non_null(longer);
        longer[len] = '\n';
        assert_int_equal(state_decode(longer, len + 1, &t), -EBADMSG);
        free(longer);
        state_done(&s);
}

static void test_decode_header_variants_rejected(void **state) {
        (void)state;
        static const char body[] = "{\"generation\": 1, \"allocations\": []}";
        char file[256];
        uint32_t crc = state_crc32c(0, body, strlen(body));
        struct gpuslice_state t;
        char lo[16], up[16], nopad[16], hdr[10][96];
        size_t bl = strlen(body);
        snprintf(lo, sizeof lo, "%08" PRIx32, crc);
        snprintf(up, sizeof up, "%08" PRIX32, crc);
        snprintf(nopad, sizeof nopad, "%" PRIx32, crc);
        size_t nh = 0;
        snprintf(hdr[nh++], sizeof hdr[0], "gpuslice-state 2 %zu %s\n", bl, lo); /* future version */
        snprintf(hdr[nh++], sizeof hdr[0], "gpuslice-state 0 %zu %s\n", bl, lo);
        snprintf(hdr[nh++], sizeof hdr[0], "gpuslice-state 01 %zu %s\n", bl, lo); /* not canonical */
        snprintf(hdr[nh++], sizeof hdr[0], "gpuslice-state 1 0%zu %s\n", bl, lo);
        snprintf(hdr[nh++], sizeof hdr[0], "gpuslice-state  1 %zu %s\n", bl, lo);
        snprintf(hdr[nh++], sizeof hdr[0], "gpuslice-state 1 %zu %s \n", bl, lo);
        snprintf(hdr[nh++], sizeof hdr[0], "gpuslice-statf 1 %zu %s\n", bl, lo);
        snprintf(hdr[nh++], sizeof hdr[0], "gpuslice-state 1 %zu %s\r\n", bl, lo);
        if (!streq(lo, up))
                snprintf(hdr[nh++], sizeof hdr[0], "gpuslice-state 1 %zu %s\n", bl, up); /* upper case */
        if (!streq(lo, nopad))
                snprintf(hdr[nh++], sizeof hdr[0], "gpuslice-state 1 %zu %s\n", bl, nopad); /* unpadded */
        for (size_t i = 0; i < nh; i++) {
                size_t h = strlen(hdr[i]);
                assert_true(h + bl < sizeof file);
                memcpy(file, hdr[i], h);
                memcpy(file + h, body, bl);
                int r = state_decode(file, h + bl, &t);
                if (r != -EBADMSG)
                        fail_msg("header variant '%s' accepted", hdr[i]);
        }
        /* the canonical one is fine */
        int h = snprintf(file, sizeof file, "gpuslice-state 1 %zu %08" PRIx32 "\n", strlen(body), crc);
        memcpy(file + h, body, strlen(body));
        assert_int_equal(state_decode(file, (size_t)h + strlen(body), &t), 0);
        assert_int_equal(t.generation, 1);
        state_done(&t);
        /* no header at all, and an over-long first line */
        assert_int_equal(state_decode(body, strlen(body), &t), -EBADMSG);
        assert_int_equal(state_decode("", 0, &t), -EBADMSG);
}

#define ENTRY(fields) "{\"generation\": 3, \"allocations\": [{" fields "}]}"
#define GOOD_FIELDS                                                                                        \
        "\"resource\": \"nvidia.com/gpu\", \"device_id\": \"g0\", \"namespace\": \"ns\", \"pod\": \"p\", " \
        "\"pod_uid\": \"\", \"container\": \"c\", \"time\": 5, \"gpu_index\": 1, \"memory_bytes\": 0, "    \
        "\"core_percent\": 0"

static void test_decode_schema(void **state) {
        (void)state;
        assert_int_equal(decode_text(ENTRY(GOOD_FIELDS)), 0);
        static const char *const bad[] = {
                "[]",
                "{\"generation\": 3}",
                "{\"generation\": 3, \"allocations\": [], \"extra\": 1}",
                "{\"generation\": -1, \"allocations\": []}",
                "{\"generation\": 1.5, \"allocations\": []}",
                "{\"generation\": \"3\", \"allocations\": []}",
                "{\"generation\": 3, \"allocations\": {}}",
                "{\"generation\": 3, \"allocations\": [1]}",
                "{\"generation\": 3, \"generation\": 3, \"allocations\": []}",
                "{\"generation\": 99999999999999999999, \"allocations\": []}",
                "{\"generation\": 3, \"allocations\": []",
                "{\"generation\": 3, \"allocations\": []} x",
                ENTRY(GOOD_FIELDS ", \"extra\": 1"),
                ENTRY("\"resource\": \"nvidia.com/gpu\", \"device_id\": \"g0\", \"namespace\": \"ns\", \"pod\": "
                      "\"p\", \"pod_uid\": \"\", \"container\": \"c\", \"time\": 5, \"gpu_index\": 1, "
                      "\"memory_bytes\": 0, \"core\": 0"),
                ENTRY("\"resource\": \"\", \"device_id\": \"g0\", \"namespace\": \"ns\", \"pod\": \"p\", "
                      "\"pod_uid\": \"\", \"container\": \"c\", \"time\": 5, \"gpu_index\": 1, \"memory_bytes\": 0, "
                      "\"core_percent\": 0"),
                ENTRY("\"resource\": \"nvidia.com/gpu\", \"device_id\": \"g\\u00000\", \"namespace\": \"ns\", "
                      "\"pod\": \"p\", \"pod_uid\": \"\", \"container\": \"c\", \"time\": 5, \"gpu_index\": 1, "
                      "\"memory_bytes\": 0, \"core_percent\": 0"),
                ENTRY("\"resource\": \"nvidia.com/gpu\", \"device_id\": \"g\\n0\", \"namespace\": \"ns\", "
                      "\"pod\": \"p\", \"pod_uid\": \"\", \"container\": \"c\", \"time\": 5, \"gpu_index\": 1, "
                      "\"memory_bytes\": 0, \"core_percent\": 0"),
                ENTRY("\"resource\": \"nvidia.com/gpu\", \"device_id\": \"g0\", \"namespace\": \"ns\", \"pod\": "
                      "\"p\", \"pod_uid\": \"\", \"container\": \"c\", \"time\": 5, \"gpu_index\": -2, "
                      "\"memory_bytes\": 0, \"core_percent\": 0"),
                ENTRY("\"resource\": \"nvidia.com/gpu\", \"device_id\": \"g0\", \"namespace\": \"ns\", \"pod\": "
                      "\"p\", \"pod_uid\": \"\", \"container\": \"c\", \"time\": 5, \"gpu_index\": 1, "
                      "\"memory_bytes\": 0, \"core_percent\": 101"),
                ENTRY("\"resource\": \"nvidia.com/gpu\", \"device_id\": \"g0\", \"namespace\": \"ns\", \"pod\": "
                      "\"p\", \"pod_uid\": \"\", \"container\": \"c\", \"time\": -5, \"gpu_index\": 1, "
                      "\"memory_bytes\": 0, \"core_percent\": 0"),
                ENTRY("\"resource\": \"nvidia.com/gpu\", \"device_id\": 7, \"namespace\": \"ns\", \"pod\": "
                      "\"p\", \"pod_uid\": \"\", \"container\": \"c\", \"time\": 5, \"gpu_index\": 1, "
                      "\"memory_bytes\": 0, \"core_percent\": 0"),
                ENTRY("\"resource\": \"nvidia.com/gpu\", \"device_id\": \"g0\", \"namespace\": null, \"pod\": "
                      "\"p\", \"pod_uid\": \"\", \"container\": \"c\", \"time\": 5, \"gpu_index\": 1, "
                      "\"memory_bytes\": 0, \"core_percent\": 0"),
                "{\"generation\": 3, \"allocations\": [{" GOOD_FIELDS "}, {" GOOD_FIELDS "}]}", /* duplicate */
                "{\"generation\": 3, \"allocations\": [\"\xff\xfe\"]}",                         /* bad UTF-8 */
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                int r = decode_text(bad[i]);
                if (r != -EBADMSG)
                        fail_msg("bad body %zu accepted (r=%d): %s", i, r, bad[i]);
        }
}

static void test_decode_overlong_strings_rejected(void **state) {
        (void)state;
        char ns[STATE_NAMESPACE_MAX + 1];
        memset(ns, 'n', sizeof ns - 1);
        ns[sizeof ns - 1] = '\0';
        char body[1024];
        snprintf(body, sizeof body,
                 ENTRY("\"resource\": \"nvidia.com/gpu\", \"device_id\": \"g0\", \"namespace\": \"%s\", \"pod\": "
                       "\"p\", \"pod_uid\": \"\", \"container\": \"c\", \"time\": 5, \"gpu_index\": 1, "
                       "\"memory_bytes\": 0, \"core_percent\": 0"),
                 ns);
        assert_int_equal(decode_text(body), -EBADMSG);
        ns[STATE_NAMESPACE_MAX - 1] = '\0'; /* the longest that fits */
        snprintf(body, sizeof body,
                 ENTRY("\"resource\": \"nvidia.com/gpu\", \"device_id\": \"g0\", \"namespace\": \"%s\", \"pod\": "
                       "\"p\", \"pod_uid\": \"\", \"container\": \"c\", \"time\": 5, \"gpu_index\": 1, "
                       "\"memory_bytes\": 0, \"core_percent\": 0"),
                 ns);
        assert_int_equal(decode_text(body), 0);
}

static void test_decode_too_many_entries_rejected(void **state) {
        (void)state;
        size_t cap = (size_t)(STATE_MAX_ENTRIES + 1) * 200 + 64, n = 0;
        _cleanup_(freep) char *body = malloc(cap);
        assert_non_null(body);
        n += (size_t)snprintf(body + n, cap - n, "{\"generation\": 1, \"allocations\": [");
        for (unsigned i = 0; i <= STATE_MAX_ENTRIES; i++)
                n += (size_t)snprintf(body + n, cap - n,
                                      "%s{\"resource\": \"r.io/x\", \"device_id\": \"%u\", \"namespace\": \"\", "
                                      "\"pod\": \"\", \"pod_uid\": \"\", \"container\": \"\", \"time\": 0, "
                                      "\"gpu_index\": -1, \"memory_bytes\": 0, \"core_percent\": 0}",
                                      i ? "," : "", i);
        snprintf(body + n, cap - n, "]}");
        assert_int_equal(decode_text(body), -EBADMSG);
}

/* JSON nested a million deep (arrays, objects, inside an entry): refused by the parser's depth
 * bound, no stack exhaustion. */
static void test_decode_deep_nesting_rejected(void **state) {
        (void)state;
        const size_t depth = 1000000;
        _cleanup_(freep) char *body = malloc(2 * depth + 64);
        assert_non_null(body);
        size_t n = (size_t)snprintf(body, 64, "{\"generation\": 1, \"allocations\": ");
        for (size_t i = 0; i < depth; i++)
                body[n++] = i % 2 ? '[' : '{';
        body[n] = '\0';
        assert_int_equal(decode_text(body), -EBADMSG);
        n = (size_t)snprintf(body, 64, "{\"generation\": 1, \"allocations\": [");
        for (size_t i = 0; i < depth; i++)
                body[n++] = '[';
        for (size_t i = 0; i < depth; i++)
                body[n++] = ']';
        snprintf(body + n, 4, "]}");
        assert_int_equal(decode_text(body), -EBADMSG);
}

/* The sample in docs/configuration.md is a real file. */
static void test_docs_example_decodes(void **state) {
        (void)state;
        _cleanup_(freep) char *doc = NULL;
        assert_int_equal(read_file(GPUSLICE_SOURCE_DIR "/docs/configuration.md", 1 << 20, &doc, NULL), 0);
        const char *start = strstr(doc, "```\ngpuslice-state ");
        assert_non_null(start);
        start += 4;
        const char *end = strstr(start, "\n```");
        assert_non_null(end);
        struct gpuslice_state t;
        assert_int_equal(state_decode(start, (size_t)(end - start) + 1, &t), 0);
        assert_int_equal(t.generation, 42);
        assert_int_equal(t.n_allocs, 1);
        assert_int_equal(t.allocs[0].gpu_index, 3);
        /* and it is exactly what the encoder writes */
        _cleanup_(freep) char *buf = NULL;
        size_t len;
        encode(&t, &buf, &len);
        assert_int_equal(len, (size_t)(end - start) + 1);
        assert_memory_equal(buf, start, len);
        state_done(&t);
}

/* ---- files ---- */

static void test_save_load_round_trip(void **state) {
        (void)state;
        char dir[300];
        subdir("roundtrip", dir, sizeof dir);
        struct gpuslice_state s, t;
        sample(&s);
        assert_int_equal(state_save(dir, &s), 0);
        assert_int_equal(state_load(dir, &t), 0);
        assert_same_state(&s, &t);
        assert_int_equal(test_count_entries(dir), 1); /* no temp file left */
        char path[400];
        snprintf(path, sizeof path, "%s/" STATE_FILE_NAME, dir);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        /* saving again replaces it */
        assert_int_equal(state_remove(&s, NULL, "GPU-0::core-7"), 0);
        assert_int_equal(state_save(dir, &s), 0);
        state_done(&t);
        assert_int_equal(state_load(dir, &t), 0);
        assert_same_state(&s, &t);
        assert_int_equal(test_count_entries(dir), 1);
        state_done(&s);
        state_done(&t);
}

static void write_bytes(const char *path, const char *buf, size_t len) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, buf, len), (ssize_t)len);
        close(fd);
}

static void test_save_removes_stale_temp_files(void **state) {
        (void)state;
        char dir[300], path[400];
        subdir("stale", dir, sizeof dir);
        snprintf(path, sizeof path, "%s/." STATE_FILE_NAME ".tmp-0123456789abcdef", dir);
        write_bytes(path, "half", 4);
        snprintf(path, sizeof path, "%s/unrelated", dir);
        write_bytes(path, "keep", 4);
        struct gpuslice_state s;
        sample(&s);
        assert_int_equal(state_save(dir, &s), 0);
        assert_int_equal(test_count_entries(dir), 2); /* the state file and "unrelated" */
        assert_int_equal(access(path, F_OK), 0);
        state_done(&s);
}

static void test_load_absent(void **state) {
        (void)state;
        char dir[300];
        subdir("absent", dir, sizeof dir);
        struct gpuslice_state t = { .generation = 5 };
        assert_int_equal(state_load(dir, &t), -ENOENT);
        assert_int_equal(t.generation, 5);
        char missing[400];
        snprintf(missing, sizeof missing, "%s/nope", dir);
        assert_int_equal(state_load(missing, &t), -ENOENT);
}

static void test_load_truncated_files_rejected(void **state) {
        (void)state;
        char dir[300], path[400];
        subdir("truncated", dir, sizeof dir);
        snprintf(path, sizeof path, "%s/" STATE_FILE_NAME, dir);
        struct gpuslice_state s, t;
        sample(&s);
        _cleanup_(freep) char *buf = NULL;
        size_t len;
        encode(&s, &buf, &len);
        /* a crash while writing in place would leave a prefix: every prefix is rejected on disk too */
        for (size_t n = 0; n < len; n += 7) {
                write_bytes(path, buf, n);
                assert_int_equal(state_load(dir, &t), -EBADMSG);
        }
        write_bytes(path, buf, len);
        assert_int_equal(state_load(dir, &t), 0);
        state_done(&t);
        state_done(&s);
}

static void test_load_non_regular_rejected(void **state) {
        (void)state;
        char dir[300], path[400];
        subdir("nonregular", dir, sizeof dir);
        snprintf(path, sizeof path, "%s/" STATE_FILE_NAME, dir);
        struct gpuslice_state t;
        assert_int_equal(mkdir(path, 0700), 0);
        assert_int_equal(state_load(dir, &t), -EBADMSG);
        assert_int_equal(rmdir(path), 0);
        assert_int_equal(symlink("/etc/hostname", path), 0);
        assert_int_equal(state_load(dir, &t), -EBADMSG);
}

static void test_load_huge_file_rejected(void **state) {
        (void)state;
        char dir[300], path[400];
        subdir("huge", dir, sizeof dir);
        snprintf(path, sizeof path, "%s/" STATE_FILE_NAME, dir);
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, (off_t)STATE_FILE_MAX + 1), 0);
        close(fd);
        struct gpuslice_state t;
        assert_int_equal(state_load(dir, &t), -EFBIG);
}

static void test_save_into_missing_dir_fails(void **state) {
        (void)state;
        char dir[300];
        snprintf(dir, sizeof dir, "%s/does-not-exist", tmpdir);
        struct gpuslice_state s;
        sample(&s);
        assert_int_equal(state_save(dir, &s), -ENOENT);
        char file[400];
        snprintf(file, sizeof file, "%s/plainfile", tmpdir);
        write_bytes(file, "x", 1);
        assert_int_equal(state_save(file, &s), -ENOTDIR);
        state_done(&s);
}

/* The write of the new file fails midway (file size limit, like a full disk): the old file must
 * still load, and no temp file may stay behind. */
static void test_failed_save_keeps_previous_file(void **state) {
        (void)state;
        char dir[300];
        subdir("midway", dir, sizeof dir);
        struct gpuslice_state good, big, t;
        sample(&good);
        assert_int_equal(state_save(dir, &good), 0);

        state_init(&big);
        for (unsigned i = 0; i < 200; i++) {
                struct state_alloc a = mk("nvidia.com/gpu", "", "namespace", "pod-with-a-long-name", "container");
                snprintf(a.device_id, sizeof a.device_id, "GPU-%08u-aaaa-bbbb-cccc-dddddddddddd", i);
                assert_int_equal(state_add(&big, &a), 0);
        }
        _cleanup_(freep) char *buf = NULL;
        size_t len;
        encode(&big, &buf, &len);

        struct rlimit old;
        assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
        struct sigaction ign = { .sa_handler = SIG_IGN }, oldsa;
        assert_int_equal(sigaction(SIGXFSZ, &ign, &oldsa), 0);
        struct rlimit lim = { .rlim_cur = len / 2, .rlim_max = old.rlim_max };
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
        int r = state_save(dir, &big);
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
        assert_int_equal(sigaction(SIGXFSZ, &oldsa, NULL), 0);

        assert_int_equal(r, -EFBIG);
        assert_int_equal(test_count_entries(dir), 1);
        assert_int_equal(state_load(dir, &t), 0);
        assert_same_state(&good, &t);
        state_done(&t);
        /* and with the limit gone the same save works */
        assert_int_equal(state_save(dir, &big), 0);
        assert_int_equal(state_load(dir, &t), 0);
        assert_same_state(&big, &t);
        state_done(&t);
        state_done(&good);
        state_done(&big);
}

/* The rename cannot happen (a directory sits where the file goes): error, temp file removed. */
static void test_failed_rename_cleans_up(void **state) {
        (void)state;
        char dir[300], path[400];
        subdir("rename", dir, sizeof dir);
        snprintf(path, sizeof path, "%s/" STATE_FILE_NAME, dir);
        assert_int_equal(mkdir(path, 0700), 0);
        snprintf(path, sizeof path, "%s/" STATE_FILE_NAME "/inside", dir);
        assert_int_equal(mkdir(path, 0700), 0); /* non-empty: rename over it must fail */
        struct gpuslice_state s;
        sample(&s);
        int r = state_save(dir, &s);
        assert_true(r == -EISDIR || r == -ENOTEMPTY || r == -EEXIST);
        assert_int_equal(test_count_entries(dir), 1);
        state_done(&s);
}

static struct gpuslice_state *child_state;

static int save_in_child(void *dir) {
        return state_save(dir, child_state);
}

/* An unwritable directory: the save fails with -EACCES and the previous file stays. */
static void test_save_unwritable_dir_keeps_previous(void **state) {
        (void)state;
        char dir[300];
        subdir("readonly", dir, sizeof dir);
        assert_int_equal(chmod(tmpdir, 0755), 0); /* let an unprivileged child reach dir */
        struct gpuslice_state s, t;
        sample(&s);
        assert_int_equal(state_save(dir, &s), 0);
        assert_int_equal(state_remove(&s, NULL, "GPU-0::core-7"), 0);
        child_state = &s;
        assert_int_equal(chmod(dir, 0555), 0);
        assert_int_equal(test_without_root(save_in_child, dir), -EACCES);
        assert_int_equal(chmod(dir, 0777), 0);
        assert_int_equal(test_without_root(save_in_child, dir), 0); /* the child can save otherwise */
        assert_int_equal(chmod(dir, 0700), 0);
        assert_int_equal(state_load(dir, &t), 0);
        assert_int_equal(t.n_allocs, 2);
        state_done(&t);
        state_done(&s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_crc32c_known_vectors),
                cmocka_unit_test(test_add_find_remove),
                cmocka_unit_test(test_add_duplicate_rejected),
                cmocka_unit_test(test_add_invalid_rejected),
                cmocka_unit_test(test_add_invalid_utf8_rejected),
                cmocka_unit_test(test_reconcile_skips_invalid_utf8),
                cmocka_unit_test(test_add_past_max_entries),
                cmocka_unit_test(test_remove_container),
                cmocka_unit_test(test_copy_is_deep),
                cmocka_unit_test(test_reconcile_adds_drops_updates),
                cmocka_unit_test(test_reconcile_without_change_keeps_generation),
                cmocka_unit_test(test_reconcile_keeps_recent_unreported),
                cmocka_unit_test(test_reconcile_frees_seen_entry_at_once),
                cmocka_unit_test(test_reconcile_drops_settled_entry),
                cmocka_unit_test(test_reconcile_empty_report_drops_all),
                cmocka_unit_test(test_encode_decode_round_trip),
                cmocka_unit_test(test_encode_empty_state),
                cmocka_unit_test(test_encode_rejects_invalid_entry),
                cmocka_unit_test(test_decode_every_truncation_rejected),
                cmocka_unit_test(test_decode_every_bit_flip_rejected),
                cmocka_unit_test(test_decode_appended_bytes_rejected),
                cmocka_unit_test(test_decode_header_variants_rejected),
                cmocka_unit_test(test_decode_deep_nesting_rejected),
                cmocka_unit_test(test_decode_schema),
                cmocka_unit_test(test_decode_overlong_strings_rejected),
                cmocka_unit_test(test_decode_too_many_entries_rejected),
                cmocka_unit_test(test_docs_example_decodes),
                cmocka_unit_test(test_save_load_round_trip),
                cmocka_unit_test(test_save_removes_stale_temp_files),
                cmocka_unit_test(test_load_absent),
                cmocka_unit_test(test_load_truncated_files_rejected),
                cmocka_unit_test(test_load_non_regular_rejected),
                cmocka_unit_test(test_load_huge_file_rejected),
                cmocka_unit_test(test_save_into_missing_dir_fails),
                cmocka_unit_test(test_failed_save_keeps_previous_file),
                cmocka_unit_test(test_failed_rename_cleans_up),
                cmocka_unit_test(test_save_unwritable_dir_keeps_previous),
        };
        return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
