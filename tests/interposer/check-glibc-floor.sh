#!/usr/bin/env bash
# The glibc floor of libgpuslice-cuda.so (docs/interposer.md): every symbol version it needs is at most
# GLIBC_2.17 (x86-64), and it needs no library beyond libc, libdl and libpthread. A preload that cannot
# load is skipped by the dynamic loader, so a newer requirement would let old-glibc images run unlimited.
#   check-glibc-floor.sh LIB [FLOOR]      (FLOOR defaults to 2.17; exit 1 with the offenders listed)
set -euo pipefail
lib=$1
floor=${2:-2.17}
[ -f "$lib" ] || { echo "no such file: $lib" >&2; exit 2; }
bad=0
# Version needs, from both the dynamic symbol table and the version-needs section.
needs=$( { objdump -T "$lib" | grep -oE 'GLIBC_[0-9]+(\.[0-9]+)+\)? +[^ ]+$' | tr -d ')' || true
           readelf -V "$lib" | grep -oE 'Name: GLIBC_[0-9]+(\.[0-9]+)+' | sed 's/Name: //; s/$/ version-need/' || true
         } | sed -E 's/^GLIBC_//' | sort -u)
[ -n "$needs" ] || { echo "$lib: no GLIBC version needs found (objdump/readelf output changed?)" >&2; exit 2; }
while read -r ver what; do
  newest=$(printf '%s\n%s\n' "$ver" "$floor" | sort -V | tail -n1)
  if [ "$newest" != "$floor" ]; then
    echo "$lib: needs GLIBC_$ver ($what), newer than the floor GLIBC_$floor" >&2
    bad=1
  fi
done <<< "$needs"
while read -r needed; do
  case "$needed" in
    libc.so.6 | libdl.so.2 | libpthread.so.0 | ld-linux-x86-64.so.2) ;;
    *) echo "$lib: depends on $needed (only libc, libdl and libpthread are allowed)" >&2; bad=1 ;;
  esac
done < <(readelf -d "$lib" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p')
if [ $bad = 0 ]; then
  echo "$lib: every GLIBC version needed is at most $floor; needs $(readelf -d "$lib" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p' | tr '\n' ' ')"
fi
exit $bad
