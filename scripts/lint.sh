#!/usr/bin/env bash
# make lint: every check below must find nothing (docs/style.md).
#   format      clang-format --dry-run with the checked-in .clang-format (make format applies it)
#   tidy        clang-tidy with the checked-in .clang-tidy on src/ and sim/ (needs BUILD/compile_commands.json)
#   shell       shellcheck on every shell script (--only shellcheck)
#   includes    the layer rules of docs/architecture.md (scripts/lint-includes.sh)
#   banned      unbounded or unchecked libc calls that have safer twins in util.h (curl's habit)
#   size        functions of src/ and sim/ over 80 lines or cyclomatic complexity 25 (pmccabe) need a comment saying
#               why, with `lint: long`, in the 6 lines above their first line (scripts/lint-size.allow: the
#               few not yet annotated, each with its reason)
#   cycles      no cycle between the .c files of any folder of src/ (scripts/lint-cycles.py: a file uses
#               another when it names a function or variable the other defines; docs/style.md)
#   owners      the node agent's state objects (struct plugin, devices, share, share_book, share_journal)
#               are defined in their owner's .c file only, so no other file can read a field of them
#               (docs/node-agent.md, "The agent's files")
#   runners     every Python test runner in tests/, bench/, hwkit/ is tests/runner.py: no main loop, verdict
#               line or exit 77 of its own (scripts/lint-runners.py; the tools that are no runner are named,
#               with a reason, in scripts/lint-runners.allow)
#   benchstamps every generated section of docs/BENCHMARKS.md names a commit that exists, is not dirty, and
#               none of the code it measures (its paths=) changed since that commit (bench/section.py check)
#
#   scripts/lint.sh [--root DIR] [--build DIR] [--only KIND,...] [--except KIND,...] [--tidy-files FILE...]
# --root: the tree to check (default: this repository); --build: the build whose compile database
# clang-tidy uses (default ROOT/build); --except: every kind but these; --tidy-files: clang-tidy on these files only.
# make lint runs every kind; make test (scripts/run-tests.sh) every kind but benchstamps: a code change must not
# wait for the benchmarks (up to ~40 min on 2 cores) to pass its tests, while make lint says which sections the
# change made stale, to be re-run before their figures are quoted (docs/BENCHMARKS.md's header).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root="$here/.."
build=
only=format,tidy,shellcheck,includes,banned,size,cycles,owners,runners,benchstamps
tidy_files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --except)
      for k in ${2//,/ }; do only=$(sed -E "s/(^|,)$k(,|$)/\1\2/; s/,,/,/; s/^,|,$//g" <<<"$only"); done
      shift 2 ;;
    --tidy-files) shift; tidy_files=("$@"); break ;;
    *) echo "usage: $0 [--root DIR] [--build DIR] [--only KIND,...] [--except KIND,...] [--tidy-files FILE...]" >&2; exit 2 ;;
  esac
done
cd "$root" || exit 2
root=$PWD
build=${build:-$root/build}
failed=()

want() { case ",$only," in *",$1,"*) return 0 ;; esac; return 1; }

# Generated files (not ours to format): gen-passthrough.sh writes passthrough.h and checks it byte for byte.
c_files() {
  find src sim tests bench -name '*.[ch]' -not -path 'src/interposer/passthrough.h' -print | sort
}

if want format; then
  # shellcheck disable=SC2046 # one path per line, no spaces in the tree's file names
  if ! clang-format --dry-run --Werror --style=file $(c_files); then
    echo "lint: format: files differ from .clang-format (run make format)"
    failed+=(format)
  fi
fi

if want tidy; then
  if [ ! -f "$build/compile_commands.json" ]; then
    echo "lint: tidy: no $build/compile_commands.json (configure the build first: make build)"
    failed+=(tidy)
  elif [ ${#tidy_files[@]} -gt 0 ]; then
    clang-tidy -p "$build" --quiet "${tidy_files[@]}" 2>/dev/null || failed+=(tidy)
  else
    # every src/ and sim/ file the build compiles (generated protobuf code lives in the build tree)
    run-clang-tidy -p "$build" -quiet -j "$(nproc)" "^$root/(src|sim)/" >"$build/clang-tidy.log" 2>&1 ||
      { grep -E 'error:|warning:' "$build/clang-tidy.log" | sort -u; failed+=(tidy); }
  fi
fi

if want shellcheck; then
  # SC2129 (group redirects into one { } block) is a style preference the bench report writers ignore.
  if ! shellcheck -e SC2129 .ci/run scripts/*.sh bench/*.sh src/interposer/*.sh tests/integration/*.sh \
    tests/interposer/*.sh tests/lint/*.sh hwkit/*.sh; then
    failed+=(shellcheck)
  fi
fi

if want includes; then
  "$here/lint-includes.sh" "$root" >/dev/null || { "$here/lint-includes.sh" "$root"; failed+=(includes); }
fi

if want banned; then
  pat='\b(sprintf|vsprintf|strcpy|strcat|strtok|atoi|atol|atof|gets)\s*\('
  hits=$(grep -rnE "$pat" src sim bench tests hwkit --include='*.c' --include='*.h' | grep -v 'lint: allow' || true)
  if [ -n "$hits" ]; then
    echo "lint: banned functions (use snprintf, strscpy, strtok_r, parse_uint):"
    echo "$hits"
    failed+=(banned)
  fi
fi

if want size; then
  # pmccabe columns: modified and traditional McCabe complexity, statements, first line, lines, file(line): name
  # shellcheck disable=SC2046 # one path per line, no spaces in the tree's file names
  hits=$(pmccabe $(find src sim -name '*.c' | sort) 2>/dev/null | awk -v max_lines=80 -v max_cc=25 '
    FNR == NR { if ($0 !~ /^#/ && NF) allowed[$1] = 1; next }
    ($2 > max_cc || $5 > max_lines) {
      split($6, loc, /[()]/); file = loc[1]; line = loc[2]; name = $7
      if ((file ":" name) in allowed) next
      found = 0
      for (i = (line > 6 ? line - 6 : 1); i <= line; i++) {
        cmd = "sed -n " i "p " file; cmd | getline text; close(cmd)
        if (text ~ /lint: long/) found = 1
      }
      if (!found) printf "%s:%s: %s: %d lines, complexity %d (split it, or say why with lint: long)\n", file, line, name, $5, $2
    }' "$here/lint-size.allow" -)
  if [ -n "$hits" ]; then
    echo "lint: size: functions over 80 lines or complexity 25 without a reason:"
    echo "$hits"
    failed+=(size)
  fi
fi

if want cycles; then
  # every folder of src/ with C files in it
  cycle_dirs=()
  for d in "$root"/src/*/; do
    d=${d%/}
    compgen -G "$d/*.c" >/dev/null && cycle_dirs+=("src/${d##*/}")
  done
  "$here/lint-cycles.py" --root "$root" "${cycle_dirs[@]}" || failed+=(cycles)
fi

if want owners; then
  # struct NAME is defined in FILE and nowhere else in src/ (a header defining it would hand its fields out)
  bad=0
  for pair in plugin:src/agent/plugin.c devices:src/agent/devices.c share:src/agent/share.c \
    share_book:src/agent/share-book.c share_journal:src/agent/share-journal-file.c; do
    name=${pair%%:*} file=${pair#*:}
    where=$(grep -rlE "^struct $name \{" src --include='*.c' --include='*.h' | sort | tr '\n' ' ')
    if [ "$where" != "$file " ]; then
      echo "lint: owners: struct $name must be defined in $file only (its owner), found in: ${where:-nowhere}"
      bad=1
    fi
  done
  [ "$bad" -eq 0 ] || failed+=(owners)
fi

if want runners; then
  /usr/bin/python3 "$here/lint-runners.py" --root "$root" || failed+=(runners)
fi

if want benchstamps; then
  # the figures' provenance: re-run a stale section with the command its stamp names (bench/run.sh --only NAME)
  /usr/bin/python3 "$root/bench/section.py" check --root "$root" || failed+=(benchstamps)
fi

if [ ${#failed[@]} -gt 0 ]; then
  echo "lint: FAILED: ${failed[*]}"
  exit 1
fi
echo "lint: ok ($only)"
