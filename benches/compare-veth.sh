#!/usr/bin/env bash
# compare-knot.sh across a veth pair, as a pod's DNS server is reached from another pod: the
# servers in one network namespace on 198.18.99.1 (interface dns0, one receive queue, as one UDP
# worker), dnsperf in another (198.18.99.2) with the same pinning, load and query file. Knot first
# on its sockets; ours on its sockets, then through AF_XDP in driver mode on dns0 (veth has it),
# with its default adaptive coalescing, with --xdp-coalesce 0 and with 100us always; Knot's own
# XDP mode last. Fresh namespaces each round.
#
# usage: [QPS=N] benches/compare-veth.sh [ROUNDS=3] [SECONDS=10]   (as root)
# needs: knotd and dnsperf (apt-get install knot dnsperf), iproute2, taskset, python3
set -euo pipefail
rounds=${1:-3}
secs=${2:-10}
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces and XDP)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
export BENCH_DIR=${BENCH_DIR:-/tmp/clusterset-bench}
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
bin="$root/target/release/clusterset-dns"
[ -f "$BENCH_DIR/queries.txt" ] || python3 "$here/kit/genzone.py" "$BENCH_DIR" >/dev/null
srv_ns=csdns-bench-srv-$$
cli_ns=csdns-bench-cli-$$
cleanup() { ip netns del "$srv_ns" 2>/dev/null || true; ip netns del "$cli_ns" 2>/dev/null || true; }
trap cleanup EXIT
srv="$bin --file \$W/objects.yaml --admin-listen 127.0.0.1:0 --log-level warn"
rows=("clusterset-dns|5310|$srv --listen 198.18.99.1:5310")
source "$here/xdp-rows.sh"
xdp_rows 198.18.99.1 dns0 "$BENCH_DIR/kxv"
out=$(mktemp)
for r in $(seq "$rounds"); do
  cleanup
  ip netns add "$srv_ns"
  ip netns add "$cli_ns"
  ip -n "$srv_ns" link set lo up
  ip -n "$cli_ns" link set lo up
  ip -n "$srv_ns" link add dns0 numrxqueues 1 numtxqueues 1 type veth \
    peer name cli0 numrxqueues 1 numtxqueues 1 netns "$cli_ns"
  ip -n "$srv_ns" addr add 198.18.99.1/24 dev dns0
  ip -n "$cli_ns" addr add 198.18.99.2/24 dev cli0
  ip -n "$srv_ns" link set dns0 up
  ip -n "$cli_ns" link set cli0 up
  echo "== round $r of $rounds ($secs s each)"
  ADDR=198.18.99.1 CLIENT="ip netns exec $cli_ns" ip netns exec "$srv_ns" \
    bash "$here/kit/compare.sh" "$secs" "${rows[@]}" | tee -a "$out"
done
python3 "$here/summarize.py" "$out"
rm -f "$out"
