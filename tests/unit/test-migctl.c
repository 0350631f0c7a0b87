/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test-migctl — declared MIG layouts (src/migctl): the layout file (mig-parted's format, malformed input),
 * the journal's codec, the agent's layout request file (format and malformed input), and the applier through the real NVML ABI against the simulator
 * (build/sim/libnvidia-ml.so.1): layouts reached, refusals that change nothing (cannot hold, in use),
 * MIG turned on first, a mode change pending a reset, and crash safety — the applier killed after each
 * of its changes in turn (the simulator's mig-fault), then recovery completing the change; a change that
 * fails part way rolled back at once; a recovery that fails rolled back to the layout before.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "helpers.h"

#include "migctl/migctl.h"
#include "nvml/nvml.h"
#include "util/util.h"

#define SIM_NVML GPUSLICE_BUILD_DIR "/sim/libnvidia-ml.so.1"
#define SIM_CLI GPUSLICE_BUILD_DIR "/sim/gpuslice-sim"
#define MIG_NODE GPUSLICE_SOURCE_DIR "/tests/data/mig/h100-mixed.node"

static char tmpdir[256], state_dir[PATH_MAX], sim_state[PATH_MAX];
static unsigned counter;
static struct nvml *N;

static struct mig_want balanced(void) {
        struct mig_want w = { .enabled = true, .n = 3 };
        strscpy(w.item[0].profile, "1g.10gb", MIG_PROFILE_NAME_MAX);
        w.item[0].count = 2;
        strscpy(w.item[1].profile, "2g.20gb", MIG_PROFILE_NAME_MAX);
        w.item[1].count = 1;
        strscpy(w.item[2].profile, "3g.40gb", MIG_PROFILE_NAME_MAX);
        w.item[2].count = 1;
        return w;
}

static int group_setup(void **state) {
        (void)state;
        char *d = test_tmpdir_new("test-migctl");
        snprintf(tmpdir, sizeof tmpdir, "%s", d);
        free(d);
        return 0;
}

static int group_teardown(void **state) {
        (void)state;
        return test_rmtree(tmpdir) == 0 ? 0 : -1;
}

/* A fresh simulated node (its own state file) and state directory per test. */
static int setup(void **state) {
        (void)state;
        counter++;
        snprintf(sim_state, sizeof sim_state, "%s/sim-%u", tmpdir, counter);
        snprintf(state_dir, sizeof state_dir, "%s/state-%u", tmpdir, counter);
        setenv("GPUSLICE_SIM_NODE", MIG_NODE, 1);
        setenv("GPUSLICE_SIM_STATE", sim_state, 1);
        struct nvml_error e;
        return nvml_open(SIM_NVML, &N, &e) < 0 ? -1 : 0;
}

static int teardown(void **state) {
        (void)state;
        N = nvml_close(N);
        unlink(sim_state);
        return 0;
}

static void sim(const char *args) {
        char cmd[PATH_MAX + 256];
        snprintf(cmd, sizeof cmd, "%s %s", SIM_CLI, args);
        assert_int_equal(system(cmd), 0);
}

static void gpu(unsigned i, struct mig_gpu *ret) {
        assert_int_equal(nvml_mig_gpu(N, i, ret, NULL), 0);
}

/* The GPU holds 2 x 1g.10gb, 1 x 2g.20gb, 1 x 3g.40gb, each with one full compute instance. */
static void assert_balanced(unsigned i) {
        struct mig_gpu g;
        gpu(i, &g);
        unsigned n1 = 0, n2 = 0, n3 = 0;
        for (unsigned k = 0; k < g.n_devices; k++) {
                n1 += streq(g.dev[k].profile, "1g.10gb");
                n2 += streq(g.dev[k].profile, "2g.20gb");
                n3 += streq(g.dev[k].profile, "3g.40gb");
        }
        assert_int_equal(g.n_devices, 4);
        assert_int_equal(g.n_gis, 4);
        assert_int_equal(n1, 2);
        assert_int_equal(n2, 1);
        assert_int_equal(n3, 1);
}

static bool journal_exists(unsigned i) {
        char uuid[96], path[PATH_MAX + 128];
        assert_int_equal(nvml_device_uuid(N, i, uuid, sizeof uuid, NULL), 0);
        snprintf(path, sizeof path, "%s/mig/%s.json", state_dir, uuid);
        return access(path, F_OK) == 0;
}

static bool same_layout(const struct mig_target *a, const struct mig_target *b) {
        if (a->enabled != b->enabled || a->n != b->n)
                return false;
        for (unsigned k = 0; k < a->n; k++) {
                bool found = false;
                for (unsigned j = 0; j < b->n && !found; j++)
                        found = a->gi[k].profile_id == b->gi[j].profile_id &&
                                a->gi[k].placement.start == b->gi[j].placement.start &&
                                a->gi[k].n_cis == b->gi[j].n_cis;
                if (!found)
                        return false;
        }
        return true;
}

/* ---- layout files ---- */

static const char config_default[] = "version: v1\n"
                                     "mig-configs:\n"
                                     "  all-disabled:\n"
                                     "    - devices: all\n"
                                     "      mig-enabled: false\n"
                                     "  all-enabled:\n"
                                     "    - devices: all\n"
                                     "      mig-enabled: true\n"
                                     "      mig-devices: {}\n"
                                     "  all-1g.10gb:\n"
                                     "    - device-filter: [\"0x233010DE\", \"0x20B210DE\"]\n"
                                     "      devices: all\n"
                                     "      mig-enabled: true\n"
                                     "      mig-devices:\n"
                                     "        \"1g.10gb\": 7\n"
                                     "    - device-filter: \"0x20B010DE\"\n"
                                     "      devices: all\n"
                                     "      mig-enabled: true\n"
                                     "      mig-devices:\n"
                                     "        \"1g.10gb\": 4\n"
                                     "  custom-config:   # a comment\n"
                                     "    - devices: [0,1,2,3]\n"
                                     "      mig-enabled: false\n"
                                     "    - devices: [4]\n"
                                     "      mig-enabled: true\n"
                                     "      mig-devices: { \"1g.5gb+me\": 1, \"1g.5gb\": 6 }\n";

static void test_config_mig_parted_format(void **state) {
        (void)state;
        struct migctl_config c;
        struct gs_error err = { 0 };
        assert_int_equal(migctl_config_parse(config_default, strlen(config_default), "cfg.yaml", &c, &err), 0);
        assert_int_equal(c.n, 4);
        const struct migctl_layout *l = migctl_config_find(&c, "all-1g.10gb");
        assert_non_null(l);
        assert_int_equal(l->n, 2);
        const struct migctl_entry *e = NULL;
        assert_int_equal(migctl_layout_select(l, 3, 0x233010DE, &e, &err), 0);
        assert_ptr_equal(e, &l->entry[0]);
        assert_int_equal(e->want.item[0].count, 7);
        assert_int_equal(migctl_layout_select(l, 3, 0x20B010DE, &e, &err), 0);
        assert_ptr_equal(e, &l->entry[1]);
        assert_int_equal(migctl_layout_select(l, 3, 0x1DB110DE, &e, &err), 0);
        assert_null(e); /* a V100: no entry, left as it is */
        l = migctl_config_find(&c, "custom-config");
        assert_int_equal(migctl_layout_select(l, 4, 0, &e, &err), 0);
        assert_true(e->want.enabled);
        assert_int_equal(e->want.n, 2);
        assert_int_equal(migctl_layout_select(l, 5, 0, &e, &err), 0);
        assert_null(e);
        l = migctl_config_find(&c, "all-enabled");
        assert_int_equal(migctl_layout_select(l, 9, 0, &e, &err), 0);
        assert_true(e->want.enabled);
        assert_int_equal(e->want.n, 0);
        assert_null(migctl_config_find(&c, "nope"));
        migctl_config_done(&c);
        /* the same file as JSON (what YAML reads too) */
        const char json[] = "{\"version\": \"v1\", \"mig-configs\": {\"x\": [{\"devices\": \"all\", \"mig-enabled\": "
                            "true, \"mig-devices\": {\"3g.40gb\": 2}}]}}";
        assert_int_equal(migctl_config_parse(json, strlen(json), "cfg.json", &c, &err), 0);
        migctl_config_done(&c);
}

static void test_config_malformed(void **state) {
        (void)state;
        static const struct {
                const char *text, *why;
        } bad[] = {
                { "version: v2\nmig-configs: {a: [{devices: all, mig-enabled: false}]}\n", "version: expected v1" },
                { "mig-configs: {a: [{devices: all, mig-enabled: false}]}\n", "version" },
                { "version: v1\n", "mig-configs" },
                { "version: v1\nmig-configs: {}\n", "mig-configs" },
                { "version: v1\nextra: 1\nmig-configs: {a: [{devices: all, mig-enabled: false}]}\n",
                  "unknown key 'extra'" },
                { "version: v1\nmig-configs: {a: []}\n", "a: expected a list" },
                { "version: v1\nmig-configs: {a: [{devices: all}]}\n", "devices and mig-enabled are required" },
                { "version: v1\nmig-configs: {a: [{devices: some, mig-enabled: true}]}\n", "devices: expected all" },
                { "version: v1\nmig-configs: {a: [{devices: [64], mig-enabled: true}]}\n", "not a GPU index" },
                { "version: v1\nmig-configs: {a: [{devices: [-1], mig-enabled: true}]}\n", "not a GPU index" },
                { "version: v1\nmig-configs: {a: [{devices: all, mig-enabled: yes please}]}\n", "mig-enabled" },
                { "version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, mig-devices: {1c.3g.20gb: 1}}]}\n",
                  "compute-instance subdivisions" },
                { "version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, mig-devices: {1g.10gb: 0}}]}\n",
                  "count 1..7" },
                { "version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, mig-devices: {1g.10gb: 8}}]}\n",
                  "count 1..7" },
                { "version: v1\nmig-configs: {a: [{devices: all, mig-enabled: false, mig-devices: {1g.10gb: 1}}]}\n",
                  "mig-devices with mig-enabled: false" },
                { "version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, device-filter: 0x20B0}]}\n",
                  "not a PCI id" },
                { "version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, colour: red}]}\n",
                  "unknown key 'colour'" },
                { "version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true}], a: []}\n", "duplicate key" },
                { "version: v1\nmig-configs: &x {a: *x}\n", "aliases" },
                { "version: v1\nmig-configs: {a: [devices]}\n", "expected a mapping" },
                { "version: [v1\n", "line" },
                { "", "empty" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct migctl_config c;
                struct gs_error err = { 0 };
                int r = migctl_config_parse(bad[i].text, strlen(bad[i].text), "cfg.yaml", &c, &err);
                if (r >= 0 || !strstr(err.message, bad[i].why))
                        fail_msg("case %zu: %d '%s', want '%s'", i, r, err.message, bad[i].why);
                assert_null(c.layout);
        }
}

static void test_config_two_entries_select_one_gpu(void **state) {
        (void)state;
        const char text[] = "version: v1\nmig-configs:\n  a:\n    - {devices: all, mig-enabled: false}\n"
                            "    - {devices: [2], mig-enabled: true}\n";
        struct migctl_config c;
        struct gs_error err = { 0 };
        assert_int_equal(migctl_config_parse(text, strlen(text), "cfg.yaml", &c, &err), 0);
        const struct migctl_entry *e;
        assert_int_equal(migctl_layout_select(&c.layout[0], 2, 0, &e, &err), -EINVAL);
        assert_non_null(strstr(err.message, "entries 0 and 1"));
        assert_int_equal(migctl_layout_select(&c.layout[0], 1, 0, &e, &err), 0);
        migctl_config_done(&c);
}

/* ---- the journal ---- */

static void test_journal_round_trip_and_malformed(void **state) {
        (void)state;
        struct migctl_journal j = { .gpu = "GPU-1234", .layout = "all-balanced", .pending_reset = true };
        j.before.enabled = true;
        j.before.n = 1;
        j.before.gi[0] = (struct mig_target_gi){ .profile_id = 9, .slices = 3, .placement = { 4, 4 }, .n_cis = 2 };
        j.before.gi[0].ci[0] = (struct mig_placement){ 0, 2 };
        j.before.gi[0].ci[1] = (struct mig_placement){ 2, 1 };
        j.want = balanced();
        _cleanup_(freep) char *text = NULL;
        assert_int_equal(migctl_journal_format(&j, &text), 0);
        struct migctl_journal back;
        struct gs_error err = { 0 };
        assert_int_equal(migctl_journal_parse(text, strlen(text), &back, &err), 0);
        assert_string_equal(back.gpu, j.gpu);
        assert_string_equal(back.layout, j.layout);
        assert_true(back.pending_reset);
        assert_true(same_layout(&back.before, &j.before));
        assert_int_equal(back.before.gi[0].ci[1].start, 2);
        assert_int_equal(back.want.n, 3);
        assert_int_equal(back.want.item[2].count, 1);
        static const char *bad[] = {
                "",
                "{}",
                "[1]",
                "{\"version\":2,\"gpu\":\"GPU-1\",\"layout\":\"a\",\"pending_reset\":false,\"before\":{\"enabled\":"
                "false,"
                "\"gis\":[]},\"want\":{\"enabled\":false,\"devices\":{}}}",
                "{\"version\":1,\"gpu\":\"MIG-1\",\"layout\":\"a\",\"pending_reset\":false,\"before\":{\"enabled\":"
                "false,"
                "\"gis\":[]},\"want\":{\"enabled\":false,\"devices\":{}}}",
                "{\"version\":1,\"gpu\":\"GPU-1\",\"layout\":\"a\",\"pending_reset\":false,\"before\":{\"enabled\":"
                "true,"
                "\"gis\":[{\"profile\":9,\"slices\":3,\"start\":4,\"size\":40,\"cis\":[]}]},\"want\":{\"enabled\":"
                "false,"
                "\"devices\":{}}}",
                "{\"version\":1,\"gpu\":\"GPU-1\",\"layout\":\"a\",\"pending_reset\":false,\"before\":{\"enabled\":"
                "false,"
                "\"gis\":[]},\"want\":{\"enabled\":true,\"devices\":{\"1g.10gb\":9}}}",
                "{\"version\":1,\"version\":1}",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(migctl_journal_parse(bad[i], strlen(bad[i]), &back, &err), -EINVAL);
}

/* ---- applying ---- */

/* ---- the agent's layout request (<state-dir>/mig-layout) ---- */

static void test_request_round_trip(void **state) {
        (void)state;
        static const struct migctl_request in[] = {
                { .name = "all-1g.10gb", .state = "success" },
                { .name = "halves", .state = "failed", .reason = "GPU 0 is in use: ml/train", .busy = true },
                { .name = "too-big", .state = "failed", .reason = "GPU 0 cannot hold layout too-big" },
                { .name = "x", .state = "pending", .reason = "a MIG mode change waits for a GPU reset" },
        };
        for (size_t i = 0; i < ELEMENTSOF(in); i++) {
                char text[sizeof(struct migctl_request) + 16];
                struct migctl_request back;
                struct gs_error err = { 0 };
                int n = migctl_request_format(&in[i], text, sizeof text);
                assert_true(n > 0 && (size_t)n == strlen(text));
                assert_int_equal(migctl_request_parse(text, (size_t)n, &back, &err), 0);
                assert_string_equal(back.name, in[i].name);
                assert_string_equal(back.state, in[i].state);
                assert_string_equal(back.reason, in[i].reason);
                assert_int_equal(back.busy, in[i].busy);
        }
        /* a reason with a newline is written on one line; the file before the busy line still reads */
        struct migctl_request r = { .name = "a", .state = "failed", .reason = "two\nlines" }, back;
        char text[700];
        assert_int_equal(migctl_request_format(&r, text, sizeof text), (int)strlen("a\nfailed\ntwo lines\n"));
        assert_string_equal(text, "a\nfailed\ntwo lines\n");
        assert_int_equal(migctl_request_parse("a\nsuccess\n\n", 11, &back, NULL), 0);
        assert_false(back.busy);
        assert_int_equal(migctl_request_format(&r, text, 8), -ENOBUFS);
        struct migctl_request bad = { .name = "a", .state = "success", .busy = true };
        assert_int_equal(migctl_request_format(&bad, text, sizeof text), -EINVAL);
        bad = (struct migctl_request){ .name = "", .state = "success" };
        assert_int_equal(migctl_request_format(&bad, text, sizeof text), -EINVAL);
        bad = (struct migctl_request){ .name = "a", .state = "done" };
        assert_int_equal(migctl_request_format(&bad, text, sizeof text), -EINVAL);
}

static void test_request_malformed(void **state) {
        (void)state;
        static const struct {
                const char *text;
                size_t len; /* 0: strlen */
                const char *why;
        } bad[] = {
                { "", 0, "line 1" },
                { "\nsuccess\n\n", 0, "line 1" },
                { "a", 0, "line 1" },
                { "a\n", 0, "line 2" },
                { "a\ndone\n\n", 0, "line 2" },
                { "a\nsuccess", 0, "line 2" },
                { "a\nsuccess\n", 0, "line 3" },
                { "a\nfailed\nwhy", 0, "line 3" },
                { "a\nfailed\nw\thy\n", 0, "line 3" },
                { "a\nfailed\nwhy\nbusy", 0, "line 4" },
                { "a\nfailed\nwhy\nbusy\nmore\n", 0, "line 4" },
                { "a\nfailed\nwhy\nlazy\n", 0, "line 4" },
                { "a\nsuccess\n\nbusy\n", 0, "busy but success" },
                { "a\0b\nsuccess\n\n", 13, "line 1" },
                { "0123456789012345678901234567890123456789012345678901234567890123456789\nsuccess\n\n", 0, "line 1" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                struct migctl_request r = { .name = "kept" };
                struct gs_error err = { 0 };
                int ret = migctl_request_parse(bad[i].text, bad[i].len ? bad[i].len : strlen(bad[i].text), &r, &err);
                if (ret != -EINVAL || !strstr(err.message, bad[i].why))
                        fail_msg("case %zu: %d '%s', want '%s'", i, ret, err.message, bad[i].why);
                assert_string_equal(r.name, "kept"); /* nothing written on a refusal */
        }
}

static void test_apply_reaches_layout_then_unchanged(void **state) {
        (void)state;
        struct mig_want w = balanced();
        struct migctl_result res;
        struct gs_error err = { 0 };
        assert_int_equal(migctl_apply_gpu(N, 2, "all-balanced", &w, state_dir, &res, &err), 0);
        assert_int_equal(res.outcome, MIGCTL_DONE);
        assert_int_equal(res.steps, 8);
        assert_balanced(2);
        assert_false(journal_exists(2));
        assert_int_equal(migctl_apply_gpu(N, 2, "all-balanced", &w, state_dir, &res, &err), 0);
        assert_int_equal(res.outcome, MIGCTL_UNCHANGED);
        assert_int_equal(res.steps, 0);
}

static void test_apply_refuses_what_cannot_fit(void **state) {
        (void)state;
        struct mig_want w = { .enabled = true, .n = 1 };
        strscpy(w.item[0].profile, "3g.40gb", MIG_PROFILE_NAME_MAX);
        w.item[0].count = 3;
        struct migctl_result res;
        struct gs_error err = { 0 };
        struct mig_gpu before, after;
        gpu(0, &before);
        assert_int_equal(migctl_apply_gpu(N, 0, "three", &w, state_dir, &res, &err), -ENOSPC);
        assert_non_null(strstr(err.message, "holds at most 2"));
        gpu(0, &after);
        assert_int_equal(after.n_devices, before.n_devices);
        assert_int_equal(res.steps, 0);
        assert_false(journal_exists(0));
        strscpy(w.item[0].profile, "1g.5gb", MIG_PROFILE_NAME_MAX); /* an A100-40GB name on an H100 */
        w.item[0].count = 1;
        assert_int_equal(migctl_apply_gpu(N, 0, "wrong", &w, state_dir, &res, &err), -EINVAL);
        assert_non_null(strstr(err.message, "no profile 1g.5gb"));
}

static void test_apply_refuses_busy_gpu(void **state) {
        (void)state;
        char args[128];
        snprintf(args, sizeof args, "proc add --gpu 0 --pid %d --mem 1MiB --mig 14:0 --keep", (int)getpid());
        sim(args);
        struct mig_want w = balanced();
        struct migctl_result res;
        struct gs_error err = { 0 };
        assert_int_equal(migctl_apply_gpu(N, 0, "all-balanced", &w, state_dir, &res, &err), -EBUSY);
        assert_non_null(strstr(err.message, "in use"));
        struct mig_gpu g;
        gpu(0, &g);
        assert_int_equal(g.n_devices, 7);
        assert_false(journal_exists(0));
}

static void test_apply_turns_mig_on_first(void **state) {
        (void)state;
        struct mig_want off = { .enabled = false };
        struct migctl_result res;
        struct gs_error err = { 0 };
        assert_int_equal(migctl_apply_gpu(N, 2, "all-disabled", &off, state_dir, &res, &err), 0);
        assert_int_equal(res.outcome, MIGCTL_DONE);
        int cur, pend;
        assert_int_equal(nvml_mig_mode(N, 2, &cur, &pend, NULL), 0);
        assert_int_equal(cur, 0);
        /* the plan cannot see profiles before MIG is on */
        struct mig_want w = balanced();
        assert_int_equal(migctl_plan_gpu(N, 2, "all-balanced", &w, &res, &err), 0);
        assert_int_equal(res.plan.n, 1);
        assert_int_equal(res.plan.step[0].kind, MIG_STEP_SET_MODE);
        assert_int_equal(migctl_apply_gpu(N, 2, "all-balanced", &w, state_dir, &res, &err), 0);
        assert_int_equal(res.outcome, MIGCTL_DONE);
        assert_balanced(2);
}

static void test_refusal_after_mig_on_turns_it_off_again(void **state) {
        (void)state;
        struct mig_want off = { .enabled = false };
        struct migctl_result res;
        struct gs_error err = { 0 };
        assert_int_equal(migctl_apply_gpu(N, 2, "all-disabled", &off, state_dir, &res, &err), 0);
        struct mig_want w = { .enabled = true, .n = 1 };
        strscpy(w.item[0].profile, "7g.80gb", MIG_PROFILE_NAME_MAX);
        w.item[0].count = 2;
        assert_int_equal(migctl_apply_gpu(N, 2, "two-whole", &w, state_dir, &res, &err), -ENOSPC);
        assert_non_null(strstr(err.message, "rolled back"));
        int cur, pend;
        assert_int_equal(nvml_mig_mode(N, 2, &cur, &pend, NULL), 0);
        assert_int_equal(cur, 0);
        assert_int_equal(pend, 0);
        assert_false(journal_exists(2));
}

static void test_mode_change_pending_reset(void **state) {
        (void)state;
        struct mig_want w = balanced();
        struct migctl_result res;
        struct gs_error err = { 0 };
        /* GPU 3: MIG off, a mode change needs a reset */
        assert_int_equal(migctl_apply_gpu(N, 3, "all-balanced", &w, state_dir, &res, &err), 0);
        assert_int_equal(res.outcome, MIGCTL_PENDING_RESET);
        assert_true(journal_exists(3));
        char uuid[96], layout[MIGCTL_NAME_MAX];
        bool pending = false;
        assert_int_equal(nvml_device_uuid(N, 3, uuid, sizeof uuid, NULL), 0);
        assert_int_equal(migctl_journal_peek(state_dir, uuid, layout, sizeof layout, &pending, &err), 0);
        assert_string_equal(layout, "all-balanced");
        assert_true(pending);
        /* before the reset, recovery still waits */
        assert_int_equal(migctl_recover_gpu(N, 3, state_dir, &res, &err), 0);
        assert_int_equal(res.outcome, MIGCTL_PENDING_RESET);
        sim("gpu-reset 3");
        assert_int_equal(migctl_recover_gpu(N, 3, state_dir, &res, &err), 0);
        assert_int_equal(res.outcome, MIGCTL_RECOVERED);
        assert_balanced(3);
        assert_false(journal_exists(3));
}

/* Apply in a child process (so it can be killed); its exit status, 128+signal when killed. */
static int apply_in_child(unsigned i, const struct mig_want *w) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct migctl_result res;
                _exit(migctl_apply_gpu(N, i, "all-balanced", w, state_dir, &res, NULL) < 0 ? 1 : 0);
        }
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void test_killed_after_every_change_recovers(void **state) {
        (void)state;
        struct mig_want w = balanced();
        struct migctl_result res;
        struct gs_error err = { 0 };
        assert_int_equal(migctl_plan_gpu(N, 0, "all-balanced", &w, &res, &err), 0);
        unsigned steps = res.plan.n; /* from 7 x 1g.10gb: 5 compute + 5 GPU instances go, 2 + 2 come */
        assert_int_equal(steps, 14);
        for (unsigned k = 1; k <= steps; k++) {
                sim("reset");
                char args[64];
                snprintf(args, sizeof args, "mig-fault kill %u", k);
                sim(args);
                assert_int_equal(apply_in_child(0, &w), 128 + SIGKILL);
                assert_true(journal_exists(0));
                struct mig_gpu mid;
                gpu(0, &mid);
                assert_true(mid.n_devices != 7 || k == steps); /* really stopped half way */
                int rr = migctl_recover_gpu(N, 0, state_dir, &res, &err);
                if (rr != 0)
                        fail_msg("killed after change %u: recovery failed: %s", k, err.message);
                if (res.outcome != MIGCTL_RECOVERED)
                        fail_msg("killed after change %u: recovery says %s", k, migctl_outcome_name(res.outcome));
                assert_balanced(0);
                assert_false(journal_exists(0));
        }
}

static void test_failed_change_rolls_back_at_once(void **state) {
        (void)state;
        struct mig_want w = balanced();
        struct mig_gpu g;
        gpu(0, &g);
        struct mig_target before;
        mig_target_from_gpu(&g, &before);
        static const unsigned at[] = { 1, 6, 11, 14 };
        for (size_t i = 0; i < ELEMENTSOF(at); i++) {
                sim("reset");
                char args[64];
                snprintf(args, sizeof args, "mig-fault fail %u", at[i]);
                sim(args);
                struct migctl_result res;
                struct gs_error err = { 0 };
                int rr = migctl_apply_gpu(N, 0, "all-balanced", &w, state_dir, &res, &err);
                if (rr != -EIO || !strstr(err.message, "rolled back"))
                        fail_msg("fail at %u: %d %s", at[i], rr, err.message);
                gpu(0, &g);
                struct mig_target now;
                mig_target_from_gpu(&g, &now);
                if (!same_layout(&now, &before))
                        fail_msg("change %u failed: the GPU is not back to its 7 x 1g.10gb", at[i]);
                assert_false(journal_exists(0));
        }
}

static void test_failed_recovery_rolls_back(void **state) {
        (void)state;
        struct mig_want w = balanced();
        struct mig_gpu g;
        gpu(0, &g);
        struct mig_target before;
        mig_target_from_gpu(&g, &before);
        sim("mig-fault kill 6");
        assert_int_equal(apply_in_child(0, &w), 128 + SIGKILL);
        sim("mig-fault fail 1"); /* the recovery's first change fails */
        struct migctl_result res;
        struct gs_error err = { 0 };
        assert_int_equal(migctl_recover_gpu(N, 0, state_dir, &res, &err), 0);
        assert_int_equal(res.outcome, MIGCTL_ROLLED_BACK);
        gpu(0, &g);
        struct mig_target now;
        mig_target_from_gpu(&g, &now);
        assert_true(same_layout(&now, &before));
        assert_false(journal_exists(0));
}

static void test_recovery_waits_while_busy(void **state) {
        (void)state;
        struct mig_want w = balanced();
        sim("mig-fault kill 3");
        assert_int_equal(apply_in_child(0, &w), 128 + SIGKILL);
        /* a process on a MIG device the change has not touched yet: neither way now */
        char args[128];
        snprintf(args, sizeof args, "proc add --gpu 0 --pid %d --mem 1MiB --mig 10:0 --keep", (int)getpid());
        sim(args);
        struct migctl_result res;
        struct gs_error err = { 0 };
        assert_int_equal(migctl_recover_gpu(N, 0, state_dir, &res, &err), -EBUSY);
        assert_true(journal_exists(0));
        snprintf(args, sizeof args, "proc del --pid %d", (int)getpid());
        sim(args);
        assert_int_equal(migctl_recover_gpu(N, 0, state_dir, &res, &err), 0);
        assert_int_equal(res.outcome, MIGCTL_RECOVERED);
        assert_balanced(0);
}

static void test_gpu_without_mig_refused(void **state) {
        (void)state;
        struct mig_want w = balanced();
        struct migctl_result res;
        struct gs_error err = { 0 };
        assert_int_equal(migctl_apply_gpu(N, 4, "all-balanced", &w, state_dir, &res, &err), -EOPNOTSUPP);
        assert_non_null(strstr(err.message, "has no MIG"));
}

/* One instance at a placement (the DRA driver's dynamic MIG devices) on the empty GPU 2: made with one compute
 * instance covering it; an overlapping one refused with nothing left; destroyed by profile and placement, also when
 * already gone; refused while a process runs; MIG off refused. */
static void test_instance_create_destroy(void **state) {
        (void)state;
        struct gs_error err = { 0 };
        struct mig_gpu g;
        unsigned gi = 99, ci = 99, gi1, ci1;
        struct mig_placement three = { 4, 4 }, seven = { 0, 8 }, one = { 0, 1 };
        assert_int_equal(migctl_instance_create(N, 2, 9, three, state_dir, &gi, &ci, &err), 0); /* 3g.40gb */
        gpu(2, &g);
        assert_true(g.n_gis == 1 && g.gi[0].id == gi && g.gi[0].placement.start == 4 && g.gi[0].n_cis == 1 &&
                    g.gi[0].ci[0].id == ci && g.n_devices == 1 && g.dev[0].ci_slices == 3);
        assert_int_not_equal(migctl_instance_create(N, 2, 0, seven, state_dir, &gi1, &ci1, &err), 0); /* 7g over it */
        gpu(2, &g);
        assert_int_equal(g.n_gis, 1);
        assert_int_equal(migctl_instance_create(N, 2, 19, one, state_dir, &gi1, &ci1, &err), 0); /* 1g.10gb at 0 */
        assert_int_equal(migctl_instance_create(N, 2, 77, one, state_dir, &gi1, &ci1, &err), -EINVAL);
        char args[128];
        snprintf(args, sizeof args, "proc add --gpu 2 --pid %d --mem 1MiB --mig %u:%u --keep", (int)getpid(), gi, ci);
        sim(args);
        assert_int_equal(migctl_instance_destroy(N, 2, 9, three, state_dir, &err), -EBUSY);
        snprintf(args, sizeof args, "proc del --pid %d", (int)getpid());
        sim(args);
        assert_int_equal(migctl_instance_destroy(N, 2, 9, three, state_dir, &err), 0);
        assert_int_equal(migctl_instance_destroy(N, 2, 9, three, state_dir, &err), 0); /* gone: nothing to do */
        assert_int_equal(migctl_instance_destroy(N, 2, 0, seven, state_dir, &err), 0); /* another profile: none */
        gpu(2, &g);
        assert_true(g.n_gis == 1 && g.gi[0].placement.start == 0 && g.gi[0].placement.size == 1);
        assert_int_equal(migctl_instance_create(N, 3, 9, three, state_dir, &gi1, &ci1, &err), -ENODEV); /* MIG off */
        assert_non_null(strstr(err.message, "not in MIG mode"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_request_round_trip),
                cmocka_unit_test(test_request_malformed),
                cmocka_unit_test(test_config_mig_parted_format),
                cmocka_unit_test(test_config_malformed),
                cmocka_unit_test(test_config_two_entries_select_one_gpu),
                cmocka_unit_test(test_journal_round_trip_and_malformed),
                cmocka_unit_test_setup_teardown(test_apply_reaches_layout_then_unchanged, setup, teardown),
                cmocka_unit_test_setup_teardown(test_apply_refuses_what_cannot_fit, setup, teardown),
                cmocka_unit_test_setup_teardown(test_apply_refuses_busy_gpu, setup, teardown),
                cmocka_unit_test_setup_teardown(test_apply_turns_mig_on_first, setup, teardown),
                cmocka_unit_test_setup_teardown(test_refusal_after_mig_on_turns_it_off_again, setup, teardown),
                cmocka_unit_test_setup_teardown(test_mode_change_pending_reset, setup, teardown),
                cmocka_unit_test_setup_teardown(test_killed_after_every_change_recovers, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failed_change_rolls_back_at_once, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failed_recovery_rolls_back, setup, teardown),
                cmocka_unit_test_setup_teardown(test_recovery_waits_while_busy, setup, teardown),
                cmocka_unit_test_setup_teardown(test_gpu_without_mig_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_instance_create_destroy, setup, teardown),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
