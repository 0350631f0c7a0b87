#!/usr/bin/env bash
# lint-planted: `make lint` (scripts/lint.sh) fails on a planted violation of each kind it checks.
# The tree is copied to a temporary directory (the build's compile database rewritten to point at the
# copy); the untouched copy must pass, then each kind gets one violation in a fresh copy and the check
# of that kind must fail and name it.
#   test-lint-planted.sh SOURCE-DIR BUILD-DIR
set -u
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tree=$tmp/tree
pass=0
fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }

fresh() {
  rm -rf "$tree" "$tmp/build"
  mkdir -p "$tree" "$tmp/build"
  (cd "$src" && tar cf - .clang-format .clang-tidy .ci scripts src sim tests bench hwkit) | tar xf - -C "$tree"
  sed -e "s#$src/src/#$tree/src/#g" -e "s#$src/sim/#$tree/sim/#g" "$build/compile_commands.json" \
    >"$tmp/build/compile_commands.json"
}

lint() { # lint KIND [FILE...]: scripts/lint.sh of the copy, on the copy, one kind
  local kind=$1
  shift
  if [ "$kind" = tidy ]; then
    "$tree/scripts/lint.sh" --root "$tree" --build "$tmp/build" --only tidy --tidy-files "$@"
  else
    "$tree/scripts/lint.sh" --root "$tree" --build "$tmp/build" --only "$kind"
  fi
}

expect_fail() { # expect_fail KIND PATTERN [FILE...]: the check fails and its output matches PATTERN
  local kind=$1 pattern=$2 out rc
  shift 2
  out=$(lint "$kind" "$@" 2>&1)
  rc=$?
  if [ $rc -ne 0 ] && grep -qE "$pattern" <<<"$out"; then
    ok "$kind: planted violation found: $(grep -E "$pattern" <<<"$out" | head -n1 | sed "s#$tree/##")"
  else
    bad "$kind: planted violation not reported (exit $rc): $out"
  fi
}

util=src/util/util.c
fresh
for kind in format shellcheck includes banned size cycles owners runners; do
  if out=$(lint "$kind" 2>&1); then ok "$kind: the untouched tree passes"; else bad "$kind: untouched tree fails: $out"; fi
done
if out=$(lint tidy "$tree/$util" "$tree/src/topo/tree.c" 2>&1); then
  ok "tidy: the untouched files pass"
else
  bad "tidy: untouched files fail: $out"
fi

fresh
printf 'int  lint_planted_format (void){return 0;}\n' >>"$tree/$util"
expect_fail format "util/util.c"

fresh
cat >>"$tree/$util" <<'C'
int lint_planted_tidy(const char *a, const char *b);
int lint_planted_tidy(const char *a, const char *b) {
        if (strcmp(a, b))
                return 1;
        return 0;
}
C
expect_fail tidy "bugprone-suspicious-string-compare" "$tree/$util"

fresh
# shellcheck disable=SC2016 # the planted line is literal shell, unexpanded on purpose
printf 'ls $(pwd)\n' >>"$tree/scripts/demo.sh"
expect_fail shellcheck "SC2046"

fresh
sed -i '1i #include "agent/plugin.h"' "$tree/src/topo/tree.c"
expect_fail includes 'src/topo/tree.c:1: layer 1 \(topo\) includes "agent/plugin.h" of layer 4'

fresh
printf 'void lint_planted_banned(char *b);\nvoid lint_planted_banned(char *b) {\n        sprintf(b, "x");\n}\n' >>"$tree/$util"
expect_fail banned "util/util.c:.*sprintf"

fresh
{
  printf 'int lint_planted_size(int x);\nint lint_planted_size(int x) {\n'
  for i in $(seq 1 90); do printf '        x += %d;\n' "$i"; done
  printf '        return x;\n}\n'
} >>"$tree/$util"
expect_fail size "util/util.c:[0-9]+: lint_planted_size: 9[0-9] lines"

fresh
{
  printf 'int lint_planted_branchy(int x);\nint lint_planted_branchy(int x) {\n'
  for i in $(seq 1 30); do printf '        if (x == %d)\n                x++;\n' "$i"; done
  printf '        return x;\n}\n'
} >>"$tree/$util"
expect_fail size "util/util.c:[0-9]+: lint_planted_branchy: [0-9]+ lines, complexity 31"

fresh
# the same function with its reason passes
{
  printf '/* lint: long — planted: a reason makes it pass. */\nint lint_planted_size(int x);\nint lint_planted_size(int x) {\n'
  for i in $(seq 1 90); do printf '        x += %d;\n' "$i"; done
  printf '        return x;\n}\n'
} >>"$tree/$util"
if out=$(lint size 2>&1); then ok "size: a function with lint: long above it passes"; else bad "size: annotated function fails: $out"; fi

fresh
# a file cycle in src/agent: devices.c (which plugin.c uses) calls into plugin.c
printf '#include "agent/plugin.h"\nvoid lint_planted_cycle(void);\nvoid lint_planted_cycle(void) {\n        (void)plugin_free(NULL);\n}\n' >>"$tree/src/agent/devices.c"
expect_fail cycles "src/agent: files call each other in a cycle: .*devices.c.*plugin.c|src/agent: files call each other in a cycle: .*plugin.c.*devices.c"

fresh
# the same names in comments and strings are not uses
printf '/* plugin_free */\nconst char *lint_planted_name(void);\nconst char *lint_planted_name(void) {\n        return "plugin_free";\n}\n' >>"$tree/src/agent/devices.c"
if out=$(lint cycles 2>&1); then ok "cycles: a name in a comment or a string is no use"; else bad "cycles: comment/string counted: $out"; fi

fresh
# every folder of src/ is checked, not only src/agent: main.c (whose table names cmd_node) planted with a use
# back from cmd-node.c's side: cmd-node.c already calls cmd_version, so main.c defining one makes a cycle
printf 'int lint_planted_main(void);\nint lint_planted_main(void) {\n        return 0;\n}\n' >>"$tree/src/cli/main.c"
printf 'int lint_planted_node(void);\nint lint_planted_node(void) {\n        return lint_planted_main();\n}\n' \
  >>"$tree/src/cli/cmd-node.c"
expect_fail cycles "src/cli: files call each other in a cycle: .*cmd-node.c.*main.c"

fresh
# a planted cycle in src/sched (view.c <-> ui.c) fails the folder
printf 'int lint_planted_ui(void);\nint lint_planted_ui(void) {\n        return 0;\n}\n' >>"$tree/src/sched/ui.c"
printf 'int lint_planted_view(void);\nint lint_planted_view(void) {\n        return lint_planted_ui() + sched_ui_register(NULL, NULL);\n}\n' \
  >>"$tree/src/sched/view.c"
printf 'int lint_planted_ui2(void);\nint lint_planted_ui2(void) {\n        return lint_planted_view();\n}\n' >>"$tree/src/sched/ui.c"
expect_fail cycles "src/sched: files call each other in a cycle: .*ui.c.*view.c|src/sched: files call each other in a cycle: .*view.c.*ui.c"

fresh
# a static variable of an unnamed struct (`static struct { ... } t;` in the interposer's throttle.c, which
# ctags does not mark as file scope) is no definition another file can use, though alloc-table.c names a
# `t` of its own: throttle.c may then use alloc-table.c
printf 'void lint_planted_reset(void);\nvoid lint_planted_reset(void) {\n        gs_table_reset();\n}\n' \
  >>"$tree/src/interposer/throttle.c"
if out=$(lint cycles 2>&1); then ok "cycles: static struct { ... } t; is file scope"; else bad "cycles: a static unnamed-struct variable counted: $out"; fi
# the same variable with external linkage is one: alloc-table.c's `t` then uses it, and the planted call closes a cycle
sed -i 's/^static struct {$/struct {/' "$tree/src/interposer/throttle.c"
expect_fail cycles "src/interposer: files call each other in a cycle: .*alloc-table.c.*throttle.c"

fresh
# a field of struct plugin handed out: its definition copied into a header
printf 'struct plugin {\n        int planted;\n};\n' >>"$tree/src/agent/plugin-internal.h"
expect_fail owners "struct plugin must be defined in src/agent/plugin.c only"

fresh
# a test script with a main loop of its own, not tests/runner.py's
printf 'import sys\n\n\ndef main():\n    return 0\n\n\nif __name__ == "__main__":\n    sys.exit(main())\n' \
  >"$tree/tests/integration/test_planted.py"
expect_fail runners "tests/integration/test_planted.py: a main of its own"

fresh
# a verdict and a skip exit written by hand in a script that does use the runner
printf 'import runner\nprint("PASS planted")\nsys.exit(77)\nrunner.main({})\nif __name__ == "__main__":\n    pass\n' \
  >"$tree/bench/planted_check.py"
expect_fail runners "bench/planted_check.py:2: prints its own verdict line"
expect_fail runners "bench/planted_check.py:3: exits 77 itself"

fresh
# a stale line of the allow file
echo "tests/integration/gone.py a tool that was removed" >>"$tree/scripts/lint-runners.allow"
expect_fail runners "lint-runners.allow:[0-9]+: tests/integration/gone.py does not exist"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
