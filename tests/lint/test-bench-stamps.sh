#!/usr/bin/env bash
# lint-benchstamps-planted: `make lint`'s benchstamps kind (bench/section.py check, through scripts/lint.sh)
# passes on a freshly generated section and fails on each planted problem: a commit that does not exist,
# measured code changed after the stamped commit, a run on a dirty tree, a hand-written (unstamped)
# section. Also: a benchmark that fails writes nothing. Runs in a temporary git repository holding copies
# of scripts/lint.sh and bench/section.py.
#   test-bench-stamps.sh SOURCE-DIR
set -u
src=$(cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
repo=$tmp/repo
pass=0
fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }
export GIT_AUTHOR_NAME=planted GIT_AUTHOR_EMAIL=planted@example.invalid GIT_COMMITTER_NAME=planted \
  GIT_COMMITTER_EMAIL=planted@example.invalid GIT_CONFIG_NOSYSTEM=1 HOME=$tmp
g() { git -C "$repo" "$@" >/dev/null 2>&1; }
lint() { "$repo/scripts/lint.sh" --root "$repo" --only benchstamps 2>&1; }
write() { # write NAME PATHS CMD...: bench/section.py write in the repository
  local name=$1 paths=$2
  shift 2
  /usr/bin/python3 "$repo/bench/section.py" write --name "$name" --title "Planted $name" --paths "$paths" \
    --command "planted $name" -- "$@"
}
expect_pass() { # expect_pass WHAT
  local out
  if out=$(lint); then ok "$1"; else bad "$1: the check failed: $out"; fi
}
expect_fail() { # expect_fail WHAT PATTERN
  local out rc
  out=$(lint)
  rc=$?
  if [ $rc -ne 0 ] && grep -qE "$2" <<<"$out"; then
    ok "$1: $(grep -E "$2" <<<"$out" | head -n1)"
  else
    bad "$1: not reported (exit $rc): $out"
  fi
}

mkdir -p "$repo/scripts" "$repo/bench" "$repo/src/measured" "$repo/src/other" "$repo/docs"
cp "$src/scripts/lint.sh" "$repo/scripts/"
cp "$src/bench/section.py" "$repo/bench/"
echo 'int measured(void) { return 1; }' >"$repo/src/measured/m.c"
echo 'int other(void) { return 1; }' >"$repo/src/other/o.c"
if ! { g init -q && g add -A && g commit -q -m base; }; then echo "FAIL git init"; exit 1; fi

write alpha src/measured printf '| figure | 1 |\n' >/dev/null || bad "write alpha failed"
g add -A && g commit -q -m "bench: alpha"
if grep -qE '^<!-- BEGIN alpha commit=[0-9a-f]{40} dirty=no paths=src/measured -->$' "$repo/docs/BENCHMARKS.md" &&
  grep -q '^| figure | 1 |$' "$repo/docs/BENCHMARKS.md" && grep -q 'load average' "$repo/docs/BENCHMARKS.md"; then
  ok "write: the section is stamped (commit, dirty=no, paths, load) and holds the command's output"
else
  bad "write: unexpected section: $(cat "$repo/docs/BENCHMARKS.md")"
fi
expect_pass "a fresh section at an existing commit passes"

# a second section and a re-write keep one copy of each, in place
write beta src/other printf 'beta body\n' >/dev/null && write alpha src/measured printf '| figure | 2 |\n' >/dev/null
if [ "$(grep -c '^<!-- BEGIN alpha ' "$repo/docs/BENCHMARKS.md")" = 1 ] && grep -q '^| figure | 2 |$' "$repo/docs/BENCHMARKS.md" &&
  ! grep -q '^| figure | 1 |$' "$repo/docs/BENCHMARKS.md" && grep -q '^beta body$' "$repo/docs/BENCHMARKS.md"; then
  ok "re-writing a section replaces it in place, other sections stay"
else
  bad "re-write: $(cat "$repo/docs/BENCHMARKS.md")"
fi
g add -A && g commit -q -m "bench: alpha again, beta"
expect_pass "two fresh sections pass"

# a benchmark that fails writes nothing
before=$(cat "$repo/docs/BENCHMARKS.md")
if write alpha src/measured sh -c 'echo partial; exit 3' >/dev/null 2>&1; then
  bad "a failing benchmark: write returned 0"
elif [ "$(cat "$repo/docs/BENCHMARKS.md")" = "$before" ]; then
  ok "a failing benchmark leaves the file untouched (and write fails)"
else
  bad "a failing benchmark changed the file"
fi

# planted: a commit that does not exist
cp "$repo/docs/BENCHMARKS.md" "$tmp/good.md"
sed -i -E 's/^(<!-- BEGIN alpha commit=)[0-9a-f]{40}/\1deadbeefdeadbeefdeadbeefdeadbeefdeadbeef/' "$repo/docs/BENCHMARKS.md"
expect_fail "planted: a commit git cat-file cannot find" "section alpha: commit deadbeefdeadbeefdeadbeefdeadbeefdeadbeef does not exist"
cp "$tmp/good.md" "$repo/docs/BENCHMARKS.md"

# a change outside the measured paths is no reason to re-run; a change inside is
echo '/* edited */' >>"$repo/src/other/o.c"
g commit -q -am "other code changed"
expect_fail "planted: measured code changed after the commit (beta measures src/other)" \
  "section beta: measured code changed after [0-9a-f]{12} \(src/other/o.c\)"
if lint | grep -q "section alpha"; then bad "alpha reported though src/measured did not change"; else
  ok "a change outside a section's paths leaves that section alone"; fi
write beta src/other printf 'beta body\n' >/dev/null && g add -A && g commit -q -m "bench: beta re-run"
expect_pass "re-running the stale section makes the check pass again"
echo '/* edited */' >>"$repo/src/measured/m.c"
g commit -q -am "measured code changed"
expect_fail "planted: measured code changed after the commit (alpha)" "section alpha: measured code changed after"
write alpha src/measured printf '| figure | 3 |\n' >/dev/null && g add -A && g commit -q -m "bench: alpha re-run"
expect_pass "re-run after the change passes"

# planted: measured on a dirty tree
echo '/* uncommitted */' >>"$repo/src/measured/m.c"
write alpha src/measured printf '| figure | 4 |\n' >/dev/null
g add docs && g commit -q -m "bench: alpha measured dirty"
expect_fail "planted: a section measured with uncommitted changes" "section alpha: measured with uncommitted changes"
if grep -q 'with uncommitted changes in src/measured/m.c' "$repo/docs/BENCHMARKS.md"; then
  ok "the dirty section's stamp says so in its text"
else
  bad "the dirty stamp does not name the file"
fi
g checkout -q -- src/measured/m.c
write alpha src/measured printf '| figure | 5 |\n' >/dev/null && g add -A && g commit -q -m "bench: alpha clean"
expect_pass "a clean re-run passes"

# planted: a hand-written section (markers without a stamp), and a section without its END
printf '\n<!-- BEGIN replay -->\nhand-written figures\n<!-- END replay -->\n' >>"$repo/docs/BENCHMARKS.md"
expect_fail "planted: a section without commit=" "section replay: no commit= stamp"
git -C "$repo" show HEAD:docs/BENCHMARKS.md >"$repo/docs/BENCHMARKS.md"
printf '\n<!-- BEGIN gamma commit=%s dirty=no paths=src/measured -->\nno end\n' "$(git -C "$repo" rev-parse HEAD)" \
  >>"$repo/docs/BENCHMARKS.md"
expect_fail "planted: a BEGIN without its END" "section gamma has no END"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
