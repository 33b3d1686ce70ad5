#!/usr/bin/env bash
# Builds the release binary and compares it with Knot DNS on the same synthetic workload
# (benches/kit: a copy of the team's side-by-side kit), several rounds, Knot first in each.
# Prints every round's table, then per server the median and the spread (min-max) of CPU per
# answered query, the median ratio against Knot (from the same rounds), qps, lost queries and RSS.
# Our server runs on its UDP sockets, and (as root) three times more answering through AF_XDP
# (--xdp lo with its default adaptive coalescing, with --xdp-coalesce 0 and with 100us always);
# as root Knot runs a second time too, in its own XDP mode. Then both answer over TCP (dnsperf's
# 8 persistent connections, how node-local-dns forwards) flat out, and both ways at the rates
# clusters really see: 1,000, 5,000 and 20,000 q/s (dnsperf -Q), where waking up is most of the
# cost and the mean latency is the figure to watch beside CPU per query.
# Every table also has the floor (benches/floor.c): the same sockets answering one precomputed
# answer with no DNS work, so ours over the floor's is what is ours to cut. The summary gives
# our CPU per query against Knot's and the floor's, round by round.
#
# usage: [QPS=N] benches/compare-knot.sh [ROUNDS=3] [SECONDS=10]   (QPS: dnsperf's rate cap)
# needs: knotd and dnsperf (apt-get install knot dnsperf), taskset, python3
set -euo pipefail
rounds=${1:-3}
secs=${2:-10}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
export BENCH_DIR=${BENCH_DIR:-/tmp/clusterset-bench}
# An XDP program on lo (say, left by trying Knot's XDP mode) runs for every packet of every
# server under test and skews all their figures.
if ip -d link show lo 2>/dev/null | grep -q 'prog/xdp'; then
  echo "warning: lo has an XDP program attached; every server's CPU per query includes it" >&2
  echo "         (remove it with: ip link set dev lo xdpgeneric off)" >&2
fi
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
bin="$root/target/release/clusterset-dns"
mkdir -p "$BENCH_DIR"
cc -O2 -o "$BENCH_DIR/floor" "$here/floor.c"
floor="floor|5320|$BENCH_DIR/floor 5320"
[ -f "$BENCH_DIR/queries.txt" ] || python3 "$here/kit/genzone.py" "$BENCH_DIR" >/dev/null
out=$(mktemp)
srv="$bin --file \$W/objects.yaml --admin-listen 127.0.0.1:0 --log-level warn"
rows=("clusterset-dns|5310|$srv --listen 127.0.0.1:5310")
# As root, every round runs in a network namespace of its own (a fresh lo, the same for each
# server), which also lets the XDP row set the two lo settings that AF_XDP answers to 127.0.0.1
# need (see README) without touching the machine's.
netns=()
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
  source "$here/xdp-rows.sh"
  lo_netns
  # Ours through XDP three ways, then Knot's XDP mode (the namespace, and its lo, go at the end
  # of the round).
  xdp_rows 127.0.0.1 lo "$BENCH_DIR/kx"
else
  echo "not root: no XDP row (--xdp needs root)" >&2
fi
for r in $(seq "$rounds"); do
  echo "== round $r of $rounds ($secs s each)"
  "${netns[@]}" bash "$here/kit/compare.sh" "$secs" "${rows[@]}" "$floor" | tee -a "$out"
  # TCP: the socket row only (XDP answers UDP; TCP goes through the kernel's sockets anyway).
  MODE=tcp "${netns[@]}" bash "$here/kit/compare.sh" "$secs" "${rows[0]}" "$floor" | tee -a "$out"
  for q in 1000 5000 20000; do
    QPS=$q "${netns[@]}" bash "$here/kit/compare.sh" "$secs" "${rows[0]}" "$floor" | tee -a "$out"
    QPS=$q MODE=tcp "${netns[@]}" bash "$here/kit/compare.sh" "$secs" "${rows[0]}" "$floor" | tee -a "$out"
  done
done
python3 "$here/summarize.py" "$out"
rm -f "$out"
