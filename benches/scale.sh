#!/usr/bin/env bash
# CPU per answered query as the zone grows: the Knot comparison (benches/kit/compare.sh: same
# pinning, load and duration) on workloads of 1k, 10k and 100k ClusterSetIP services (with a
# tenth as many headless ones of 6 endpoints, and a query file that asks for every service once
# per pass, in random order, so the larger zones are read from memory, not cache). Knot, ours on its sockets and,
# as root, ours through AF_XDP on lo (each round in a fresh network namespace, as in
# compare-knot.sh). Prints each round's tables, the usual summary, and per server the median CPU
# per query at each size with 100k against 1k.
#
# usage: benches/scale.sh [ROUNDS=3] [SECONDS=10]
# needs: knotd and dnsperf (apt-get install knot dnsperf), taskset, python3
set -euo pipefail
rounds=${1:-3}
secs=${2:-10}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
base=${BENCH_DIR:-/tmp/clusterset-bench}/scale
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
bin="$root/target/release/clusterset-dns"
sizes=(1000 10000 100000)
for n in "${sizes[@]}"; do
  [ -f "$base/$n/queries.txt" ] || python3 "$here/kit/genzone.py" "$base/$n" "$n" $((n / 10)) >/dev/null
done
srv="$bin --file \$W/objects.yaml --admin-listen 127.0.0.1:0 --log-level warn --max-zone-names 0"
rows=("clusterset-dns|5310|$srv --listen 127.0.0.1:5310")
netns=()
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
  source "$here/xdp-rows.sh"
  lo_netns
  rows+=("clusterset-dns-xdp|5311|$srv --listen 127.0.0.1:5311 --xdp lo")
else
  echo "not root: no XDP row (--xdp needs root)" >&2
fi
out=$(mktemp)
for r in $(seq "$rounds"); do
  for n in "${sizes[@]}"; do
    echo "== round $r of $rounds, $n services ($secs s each)"
    # Each row's server name gets @SIZE, so the summary keeps the sizes apart.
    BENCH_DIR="$base/$n" "${netns[@]}" bash "$here/kit/compare.sh" "$secs" "${rows[@]}" |
      awk -v n="$n" 'NF == 9 && $1 != "server" { $1 = $1 "@" n } { print }' | tee -a "$out"
  done
done
python3 "$here/summarize.py" "$out"
python3 - "$out" "${sizes[@]}" <<'PY'
import statistics as st, sys
out, sizes = sys.argv[1], sys.argv[2:]
cpu = {}
for line in open(out):
    f = line.split()
    if len(f) == 9 and "@" in f[0]:
        name, n = f[0].rsplit("@", 1)
        cpu.setdefault(name, {}).setdefault(n, []).append(float(f[2]))
print("\nCPU per answered query (us), median by zone size")
print(f"{'server':<20}" + "".join(f"{n + ' svc':>12}" for n in sizes) + f"{'100k / 1k':>12}")
for name, by in cpu.items():
    m = [st.median(by[n]) if n in by else float("nan") for n in sizes]
    print(f"{name:<20}" + "".join(f"{x:12.2f}" for x in m) + f"{m[-1] / m[0]:12.2f}")
PY
rm -f "$out"
