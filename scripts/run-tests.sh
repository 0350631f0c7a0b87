#!/usr/bin/env bash
# Runs the whole test suite in the normal build and in the ASan/UBSan (+libFuzzer) build, then
# prints one closing line "N passed, N failed" over both.
set -u
total_pass=0; total_fail=0; total_skip=0; status=0
for dir in "$@"; do
  echo "=== ctest in $dir"
  log=$(mktemp)
  (cd "$dir" && ctest --output-on-failure -j "$(nproc)" --timeout 600) 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -1)
  sed -n '/The following tests did not run:/,/^$/p' "$log" > "$log.skipped"
  rm -f "$log"
  if [ -z "$line" ]; then echo "no ctest summary from $dir"; status=1; total_fail=$((total_fail+1)); continue; fi
  failed=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/' <<<"$line")
  all=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\2/' <<<"$line")
  # ctest counts a skipped test (SKIP_RETURN_CODE) as not failed: report it apart, never as passed
  skipped=$(grep -cE '^[[:space:]]*[0-9]+ - .*\(Skipped\)$' "$log.skipped" 2>/dev/null || true)
  total_pass=$((total_pass + all - failed - skipped)); total_fail=$((total_fail + failed))
  total_skip=$((total_skip + skipped))
  rm -f "$log.skipped"
  [ "$rc" -eq 0 ] || status=1
done
# every lint kind but benchstamps (scripts/lint.sh: a stale benchmark section is make lint's to report, not a test failure)
./scripts/lint.sh --build "$1" --except benchstamps || { status=1; total_fail=$((total_fail+1)); }
# CI installs every peer (podman, prometheus, ...): there a skipped test means a broken setup.
if [ "${GPUSLICE_REQUIRE_ALL:-0}" = 1 ] && [ "$total_skip" -gt 0 ]; then
  echo "GPUSLICE_REQUIRE_ALL=1: $total_skip tests were skipped"
  status=1
fi
if [ "$total_skip" -gt 0 ]; then
  echo "$total_pass passed, $total_fail failed, $total_skip skipped"
else
  echo "$total_pass passed, $total_fail failed"
fi
exit $status
