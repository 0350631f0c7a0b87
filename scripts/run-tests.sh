#!/usr/bin/env bash
# Runs the whole test suite in the normal build and in the ASan/UBSan (+libFuzzer) build, then
# prints one closing line "N passed, N failed" over both.
set -u
total_pass=0; total_fail=0; status=0
for dir in "$@"; do
  echo "=== ctest in $dir"
  log=$(mktemp)
  (cd "$dir" && ctest --output-on-failure -j "$(nproc)" --timeout 600) 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  line=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -1)
  rm -f "$log"
  if [ -z "$line" ]; then echo "no ctest summary from $dir"; status=1; total_fail=$((total_fail+1)); continue; fi
  failed=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/' <<<"$line")
  all=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\2/' <<<"$line")
  total_pass=$((total_pass + all - failed)); total_fail=$((total_fail + failed))
  [ "$rc" -eq 0 ] || status=1
done
./scripts/lint.sh || { status=1; total_fail=$((total_fail+1)); }
echo "$total_pass passed, $total_fail failed"
exit $status
