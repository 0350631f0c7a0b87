/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test-mig — the pure MIG model (src/mig): profile names, the layout planner (placements, refusals with
 * their reasons, keeping what exists, the steps), and the mig-minors reader with malformed input.
 * The GPU is an A100-40GB's profile table as NVIDIA's `nvidia-smi mig -lgip/-lgipp` lists it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "mig/mig.h"
#include "util/util.h"

static struct mig_caps a100(void) {
        struct mig_caps c = { 0 };
        static const struct {
                unsigned id, slices, instances, size, n;
                unsigned starts[7];
                const char *name;
        } p[] = {
                { 19, 1, 7, 1, 7, { 0, 1, 2, 3, 4, 5, 6 }, "1g.5gb" },
                { 20, 1, 1, 1, 7, { 0, 1, 2, 3, 4, 5, 6 }, "1g.5gb+me" },
                { 15, 1, 4, 2, 4, { 0, 2, 4, 6 }, "1g.10gb" },
                { 14, 2, 3, 2, 3, { 0, 2, 4 }, "2g.10gb" },
                { 9, 3, 2, 4, 2, { 0, 4 }, "3g.20gb" },
                { 5, 4, 1, 4, 1, { 0 }, "4g.20gb" },
                { 0, 7, 1, 8, 1, { 0 }, "7g.40gb" },
        };
        for (size_t i = 0; i < ELEMENTSOF(p); i++) {
                struct mig_profile *x = &c.profile[c.n_profiles++];
                x->id = p[i].id;
                x->slices = p[i].slices;
                x->instances = p[i].instances;
                strscpy(x->name, p[i].name, sizeof x->name);
                x->n_placements = p[i].n;
                for (unsigned k = 0; k < p[i].n; k++)
                        x->placement[k] = (struct mig_placement){ p[i].starts[k], p[i].size };
        }
        return c;
}

static struct mig_want want_of(bool enabled, const char *a, unsigned na, const char *b, unsigned nb, const char *c,
                               unsigned nc) {
        struct mig_want w = { .enabled = enabled };
        const char *names[] = { a, b, c };
        unsigned counts[] = { na, nb, nc };
        for (unsigned i = 0; i < 3; i++)
                if (names[i]) {
                        strscpy(w.item[w.n].profile, names[i], MIG_PROFILE_NAME_MAX);
                        w.item[w.n++].count = counts[i];
                }
        return w;
}

static struct mig_gpu empty_on(void) {
        struct mig_gpu g = { .mode = 1, .pending = 1 };
        return g;
}

/* every pair of target GPU instances on distinct memory slices, each at one of its profile's placements */
static void assert_valid(const struct mig_caps *c, const struct mig_target *t) {
        unsigned used = 0, compute = 0;
        for (unsigned k = 0; k < t->n; k++) {
                const struct mig_profile *p = mig_caps_profile_by_id(c, t->gi[k].profile_id);
                assert_non_null(p);
                bool listed = false;
                for (unsigned i = 0; i < p->n_placements; i++)
                        listed |= p->placement[i].start == t->gi[k].placement.start &&
                                  p->placement[i].size == t->gi[k].placement.size;
                assert_true(listed);
                unsigned bits = ((1u << t->gi[k].placement.size) - 1) << t->gi[k].placement.start;
                assert_int_equal(used & bits, 0);
                used |= bits;
                compute += p->slices;
                assert_int_equal(t->gi[k].n_cis, 1);
        }
        assert_true(compute <= 7);
}

static void test_names(void **state) {
        (void)state;
        char buf[32];
        mig_profile_name_clean("MIG 1g.5gb", buf, sizeof buf);
        assert_string_equal(buf, "1g.5gb");
        mig_profile_name_clean("3g.40gb", buf, sizeof buf);
        assert_string_equal(buf, "3g.40gb");
        assert_true(mig_profile_name_valid("1g.10gb"));
        assert_true(mig_profile_name_valid("1g.10gb+me"));
        assert_true(mig_profile_name_valid("7g.141gb"));
        assert_false(mig_profile_name_valid("1c.3g.20gb"));
        assert_false(mig_profile_name_valid("1g.10g"));
        assert_false(mig_profile_name_valid("g.10gb"));
        assert_false(mig_profile_name_valid("01g.10gb"));
        assert_false(mig_profile_name_valid("1g.10gb+x"));
        assert_false(mig_profile_name_valid(""));
        /* the device plugin's rule: the share of memory rounded up to eighths, times the GPU's GB */
        mig_profile_name_compose(1, 4864, 40ULL << 30, false, buf, sizeof buf);
        assert_string_equal(buf, "1g.5gb");
        mig_profile_name_compose(7, 40192, 40ULL << 30, false, buf, sizeof buf);
        assert_string_equal(buf, "7g.40gb");
        mig_profile_name_compose(1, 4864, 40ULL << 30, true, buf, sizeof buf);
        assert_string_equal(buf, "1g.5gb+me");
        assert_int_equal(mig_ci_profile_for_slices(7), 4);
        assert_int_equal(mig_ci_profile_for_slices(3), 2);
        assert_int_equal(mig_ci_profile_for_slices(5), -EINVAL);
}

static void test_place_balanced_needs_search(void **state) {
        (void)state;
        struct mig_caps c = a100();
        struct mig_gpu g = empty_on();
        struct mig_want w = want_of(true, "1g.5gb", 2, "2g.10gb", 1, "3g.20gb", 1);
        struct mig_target t;
        struct gs_error err = { 0 };
        /* lowest-free placement in the asked order would leave the last 1g without a start: the planner searches */
        assert_int_equal(mig_plan_place(&c, &g, &w, &t, &err), 0);
        assert_int_equal(t.n, 4);
        assert_valid(&c, &t);
}

static void test_place_every_full_layout(void **state) {
        (void)state;
        struct mig_caps c = a100();
        struct mig_gpu g = empty_on();
        static const struct {
                const char *a;
                unsigned na;
                const char *b;
                unsigned nb;
        } ok[] = {
                { "1g.5gb", 7, NULL, 0 },        { "1g.10gb", 4, NULL, 0 },      { "2g.10gb", 3, "1g.5gb", 1 },
                { "3g.20gb", 2, NULL, 0 },       { "4g.20gb", 1, "3g.20gb", 1 }, { "7g.40gb", 1, NULL, 0 },
                { "1g.5gb+me", 1, "1g.5gb", 6 },
        };
        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                struct mig_want w = want_of(true, ok[i].a, ok[i].na, ok[i].b, ok[i].nb, NULL, 0);
                struct mig_target t;
                struct gs_error err = { 0 };
                if (mig_plan_place(&c, &g, &w, &t, &err) != 0)
                        fail_msg("%s x%u + %s x%u: %s", ok[i].a, ok[i].na, ok[i].b ? ok[i].b : "-", ok[i].nb,
                                 err.message);
                assert_valid(&c, &t);
        }
}

static void test_place_refusals_say_why(void **state) {
        (void)state;
        struct mig_caps c = a100();
        struct mig_gpu g = empty_on();
        static const struct {
                const char *a;
                unsigned na;
                const char *b;
                unsigned nb;
                int code;
                const char *why;
        } bad[] = {
                { "1g.10gb", 7, NULL, 0, -ENOSPC, "holds at most 4" },
                { "1g.20gb", 1, NULL, 0, -EINVAL, "has no profile 1g.20gb" },
                { "4g.20gb", 1, "3g.20gb", 2, -ENOSPC, "10 compute slices" },
                { "1g.10gb", 4, "2g.10gb", 1, -ENOSPC, "no placement" },
                { "1g.5gb+me", 2, NULL, 0, -ENOSPC, "holds at most 1" },
                { "3g.20gb", 1, "3g.20gb", 1, -EINVAL, "given twice" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct mig_want w = want_of(true, bad[i].a, bad[i].na, bad[i].b, bad[i].nb, NULL, 0);
                struct mig_target t;
                struct gs_error err = { 0 };
                int r = mig_plan_place(&c, &g, &w, &t, &err);
                if (r != bad[i].code || !strstr(err.message, bad[i].why))
                        fail_msg("case %zu: %d '%s', want %d '%s'", i, r, err.message, bad[i].code, bad[i].why);
        }
        struct mig_want off = want_of(false, "1g.5gb", 1, NULL, 0, NULL, 0);
        struct mig_target t;
        assert_int_equal(mig_plan_place(&c, &g, &off, &t, NULL), -EINVAL);
}

static void add_gi(struct mig_gpu *g, unsigned id, unsigned profile, unsigned slices, unsigned start, unsigned size,
                   bool full_ci) {
        struct mig_gi *gi = &g->gi[g->n_gis++];
        *gi = (struct mig_gi){ .id = id, .profile_id = profile, .slices = slices, .placement = { start, size } };
        if (full_ci)
                gi->ci[gi->n_cis++] = (struct mig_ci){ .id = 0, .slices = slices, .placement = { 0, slices } };
}

static void test_place_keeps_what_exists(void **state) {
        (void)state;
        struct mig_caps c = a100();
        struct mig_gpu g = empty_on();
        add_gi(&g, 1, 9, 3, 4, 4, true);   /* a 3g.20gb at 4:4 */
        add_gi(&g, 13, 19, 1, 1, 1, true); /* a 1g.5gb at 1:1 */
        struct mig_want w = want_of(true, "3g.20gb", 1, "1g.5gb", 2, NULL, 0);
        struct mig_target t;
        assert_int_equal(mig_plan_place(&c, &g, &w, &t, NULL), 0);
        struct mig_plan p;
        mig_plan_steps(&g, &t, &p);
        /* both stay where they are: one GPU instance and its compute instance to create */
        assert_int_equal(p.n, 2);
        assert_int_equal(p.step[0].kind, MIG_STEP_CREATE_GI);
        assert_int_equal(p.step[0].profile_id, 19);
        assert_int_equal(p.step[1].kind, MIG_STEP_CREATE_CI);
        assert_int_equal(p.step[1].ci_placement.size, 1);
}

static void test_steps_order_and_idempotence(void **state) {
        (void)state;
        struct mig_caps c = a100();
        struct mig_gpu g = empty_on();
        add_gi(&g, 0, 0, 7, 0, 8, false); /* a 7g.40gb split into a 2c and a 1c */
        g.gi[0].ci[g.gi[0].n_cis++] = (struct mig_ci){ .id = 0, .slices = 2, .placement = { 0, 2 } };
        g.gi[0].ci[g.gi[0].n_cis++] = (struct mig_ci){ .id = 1, .slices = 1, .placement = { 2, 1 } };
        struct mig_want w = want_of(true, "3g.20gb", 2, NULL, 0, NULL, 0);
        struct mig_target t;
        assert_int_equal(mig_plan_place(&c, &g, &w, &t, NULL), 0);
        struct mig_plan p;
        mig_plan_steps(&g, &t, &p);
        /* compute instances go before their GPU instance, creations last */
        assert_int_equal(p.n, 7);
        assert_int_equal(p.step[0].kind, MIG_STEP_DESTROY_CI);
        assert_int_equal(p.step[1].kind, MIG_STEP_DESTROY_CI);
        assert_int_equal(p.step[2].kind, MIG_STEP_DESTROY_GI);
        for (unsigned i = 3; i < 7; i++)
                assert_int_equal(p.step[i].kind, i % 2 ? MIG_STEP_CREATE_GI : MIG_STEP_CREATE_CI);
        char what[160];
        mig_step_describe(&p.step[3], &c, what, sizeof what);
        assert_non_null(strstr(what, "3g.20gb"));
        /* the GPU as the target describes it needs nothing more */
        struct mig_gpu after = empty_on();
        add_gi(&after, 2, 9, 3, t.gi[0].placement.start, 4, true);
        add_gi(&after, 1, 9, 3, t.gi[1].placement.start, 4, true);
        assert_true(mig_target_reached(&after, &t));
        assert_false(mig_target_reached(&g, &t));
}

static void test_steps_mode(void **state) {
        (void)state;
        struct mig_gpu off = { .mode = 0, .pending = 0 };
        struct mig_target on = { .enabled = true };
        struct mig_plan p;
        mig_plan_steps(&off, &on, &p);
        assert_int_equal(p.n, 1);
        assert_int_equal(p.step[0].kind, MIG_STEP_SET_MODE);
        assert_int_equal(p.step[0].mode, 1);
        /* everything goes before MIG goes off */
        struct mig_gpu g = empty_on();
        add_gi(&g, 1, 9, 3, 4, 4, true);
        struct mig_target disabled = { .enabled = false };
        mig_plan_steps(&g, &disabled, &p);
        assert_int_equal(p.n, 3);
        assert_int_equal(p.step[2].kind, MIG_STEP_SET_MODE);
        assert_int_equal(p.step[2].mode, 0);
        /* a pending mode counts: on now but off pending is not "on" */
        struct mig_gpu pend = { .mode = 1, .pending = 0 };
        mig_plan_steps(&pend, &on, &p);
        assert_int_equal(p.n, 1);
        /* the exact layout a GPU has, as a rollback target, reaches itself */
        struct mig_target same;
        mig_target_from_gpu(&g, &same);
        assert_true(mig_target_reached(&g, &same));
}

/* ---- mig-minors ---- */

static int count_minor(const struct mig_minor *m, void *ud) {
        unsigned *n = ud;
        n[m->kind]++;
        return 0;
}

static void test_minors_parse(void **state) {
        (void)state;
        const char text[] = "config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access 4\ngpu0/gi1/access 12\n"
                            "gpu0/gi1/ci0/access 13\ngpu3/gi14/ci7/access 4322\r\n";
        unsigned n[4] = { 0 };
        assert_int_equal(mig_minors_parse(text, strlen(text), count_minor, n), 0);
        assert_int_equal(n[MIG_CAP_CONFIG], 1);
        assert_int_equal(n[MIG_CAP_MONITOR], 1);
        assert_int_equal(n[MIG_CAP_GI], 2);
        assert_int_equal(n[MIG_CAP_CI], 3);
        unsigned gi, ci;
        assert_int_equal(mig_minors_lookup(text, strlen(text), 0, 1, 0, &gi, &ci), 0);
        assert_int_equal(gi, 12);
        assert_int_equal(ci, 13);
        assert_int_equal(mig_minors_lookup(text, strlen(text), 3, 14, 7, &gi, &ci), -ENOENT); /* no gi line */
        assert_int_equal(mig_minors_lookup(text, strlen(text), 0, 1, 1, &gi, &ci), -ENOENT);
}

static void test_minors_malformed_lines_skipped(void **state) {
        (void)state;
        static const char *bad[] = {
                "config\n",
                "config x\n",
                "gpu0/gi0/access\n",
                "gpu/gi0/access 3\n",
                "gpu0/gi/access 3\n",
                "gpu0/gi0/ci/access 3\n",
                "gpu0/gi0/access 3 4\n",
                "gpu0/gi0/accesss 3\n",
                "gpu0/gi0/access -3\n",
                "gpu0/gi0/access 99999999999\n",
                "GPU0/gi0/access 3\n",
                " config 1\n",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                unsigned n[4] = { 0 };
                assert_int_equal(mig_minors_parse(bad[i], strlen(bad[i]), count_minor, n), 0);
                if (n[0] + n[1] + n[2] + n[3] != 0)
                        fail_msg("'%s' was taken", bad[i]);
        }
        /* a NUL inside a line is no blank */
        const char nul[] = "gpu0/gi0/access 3\0\n";
        unsigned z[4] = { 0 };
        assert_int_equal(mig_minors_parse(nul, sizeof nul - 1, count_minor, z), 0);
        assert_int_equal(z[MIG_CAP_GI], 0);
        /* a line cut by the length is not read past it */
        const char cut[] = "gpu0/gi0/access 35";
        unsigned n[4] = { 0 };
        assert_int_equal(mig_minors_parse(cut, 17, count_minor, n), 0);
        assert_int_equal(n[MIG_CAP_GI], 1);
        static char big[MIG_MINORS_MAX + 2];
        memset(big, '\n', sizeof big);
        assert_int_equal(mig_minors_parse(big, sizeof big, count_minor, n), -EFBIG);
}

static void test_device_lookups(void **state) {
        (void)state;
        static struct mig_node m;
        mig_node_init(&m, 2);
        assert_int_equal(m.gpu[0].mode, -1);
        m.gpu[1].mode = 1;
        m.gpu[1].n_devices = 2;
        m.gpu[1].dev[0] = (struct mig_device){ .gpu = 1, .index = 0, .gi = 3, .ci = 0, .uuid = "MIG-a" };
        m.gpu[1].dev[1] = (struct mig_device){ .gpu = 1, .index = 4, .gi = 5, .ci = 1, .uuid = "MIG-b" };
        assert_ptr_equal(mig_device_by_uuid(&m, "MIG-b"), &m.gpu[1].dev[1]);
        assert_null(mig_device_by_uuid(&m, "MIG-c"));
        assert_ptr_equal(mig_device_by_index(&m, 1, 4), &m.gpu[1].dev[1]);
        assert_null(mig_device_by_index(&m, 1, 1)); /* a hole */
        assert_ptr_equal(mig_device_by_ids(&m, 1, 3, 0), &m.gpu[1].dev[0]);
        assert_null(mig_device_by_ids(&m, 5, 3, 0));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_place_balanced_needs_search),
                cmocka_unit_test(test_place_every_full_layout),
                cmocka_unit_test(test_place_refusals_say_why),
                cmocka_unit_test(test_place_keeps_what_exists),
                cmocka_unit_test(test_steps_order_and_idempotence),
                cmocka_unit_test(test_steps_mode),
                cmocka_unit_test(test_minors_parse),
                cmocka_unit_test(test_minors_malformed_lines_skipped),
                cmocka_unit_test(test_device_lookups),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
