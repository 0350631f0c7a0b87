#!/usr/bin/env bash
# Banned functions (curl's habit): unbounded or unchecked calls have safer twins in util.h.
set -u
cd "$(dirname "$0")/.."
pat='\b(sprintf|vsprintf|strcpy|strcat|strtok|atoi|atol|atof|gets)\s*\('
hits=$(grep -rnE "$pat" src sim bench tests --include='*.c' --include='*.h' | grep -v 'lint: allow' || true)
if [ -n "$hits" ]; then
  echo "lint: banned functions (use snprintf, strscpy, strtok_r, parse_uint):"
  echo "$hits"
  exit 1
fi
./scripts/lint-includes.sh || exit 1
echo "lint: ok"
