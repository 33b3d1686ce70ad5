#!/usr/bin/env bash
# What a lone lookup costs on zones of 1k, 10k and 100k services, counted by callgrind rather
# than timed: instructions, and first-level and last-level data-cache misses in callgrind's
# model of this machine's caches. The counts repeat exactly from run to run whatever else the
# machine does, unlike the nanoseconds of `cargo bench --bench lookup`, which also include
# where each missed line comes from (second-level cache, third, memory) and TLB misses, which
# callgrind does not model.
#
# usage: benches/flatness.sh [PASSES=20]     needs: valgrind
set -euo pipefail
passes=${1:-20}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
cargo build --release --quiet --example lookup_cost --manifest-path "$root/Cargo.toml"
bin="$root/target/release/examples/lookup_cost"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw, inside the lookup loop alone.
counts() {
  valgrind --tool=callgrind --cache-sim=yes --toggle-collect='*lookups*' \
    --callgrind-out-file="$tmp/out" "$bin" "$1" "$2" >/dev/null 2>&1
  sed -n 's/^summary: //p' "$tmp/out"
}
printf "%-10s %14s %14s %14s\n" services instructions D1_misses LL_misses
for n in 1000 10000 100000; do
  python3 - "$n" "$passes" "$(counts "$n" "$passes")" <<'PY'
import sys
n, passes = int(sys.argv[1]), int(sys.argv[2])
c = list(map(int, sys.argv[3].split())) + [0] * 9  # callgrind leaves out trailing zeros
lookups = passes * 1024
print(f"{n:<10} {c[0] / lookups:14.1f} {c[4] / lookups:14.2f} {c[7] / lookups:14.3f}   (per lookup, {lookups} lookups)")
PY
done
