#!/usr/bin/env bash
# A/B of builds of the server: CPU per answered query of each build on its UDP sockets and (as
# root) through AF_XDP on lo, on compare-knot.sh's workload and on scale.sh's largest (100,000
# ClusterSetIP services and 10,000 headless ones), with Knot first in every table as the
# reference (benches/kit/compare.sh: same pinning, load and duration). The builds' order turns
# from round to round, so each runs first as often as the others. Prints every table, then the
# usual summary: per row, the median and spread of CPU per query and of the ratio to Knot.
#
# usage: benches/ab.sh ROUNDS SECONDS NAME=BINARY ...
#   e.g. benches/ab.sh 3 10 before=/tmp/a/clusterset-dns after=target/release/clusterset-dns
# needs: knotd and dnsperf (apt-get install knot dnsperf), taskset, python3
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,11p' "$0"; exit 2; }
rounds=$1
secs=$2
shift 2
builds=("$@")
here=$(cd "$(dirname "$0")" && pwd)
base=${BENCH_DIR:-/tmp/clusterset-bench}
big=$base/scale/100000
[ -f "$base/queries.txt" ] || python3 "$here/kit/genzone.py" "$base" >/dev/null
[ -f "$big/queries.txt" ] || python3 "$here/kit/genzone.py" "$big" 100000 10000 >/dev/null
netns=()
xdp=0
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
  source "$here/xdp-rows.sh"
  lo_netns
  xdp=1
else
  echo "not root: no XDP rows (--xdp needs root)" >&2
fi
out=$(mktemp)
for r in $(seq "$rounds"); do
  k=$(((r - 1) % ${#builds[@]}))
  order=("${builds[@]:k}" "${builds[@]:0:k}")
  for workload in default 100k; do
    dir=$base
    [ "$workload" = 100k ] && dir=$big
    rows=()
    port=5320
    for b in "${order[@]}"; do
      name=${b%%=*}
      srv="${b#*=} --file \$W/objects.yaml --admin-listen 127.0.0.1:0 --log-level warn --max-zone-names 0"
      rows+=("$name@$workload|$port|$srv --listen 127.0.0.1:$port")
      port=$((port + 1))
      if [ "$xdp" = 1 ]; then
        rows+=("$name-xdp@$workload|$port|$srv --listen 127.0.0.1:$port --xdp lo")
        port=$((port + 1))
      fi
    done
    echo "== round $r of $rounds, $workload workload ($secs s each)"
    BENCH_DIR=$dir "${netns[@]}" bash "$here/kit/compare.sh" "$secs" "${rows[@]}" | tee -a "$out"
  done
done
python3 "$here/summarize.py" "$out"
rm -f "$out"
