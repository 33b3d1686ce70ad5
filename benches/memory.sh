#!/usr/bin/env bash
# Memory at the capacity planner's workload (issue: a third less memory): IMPORTS ServiceImports,
# half ClusterSetIP and half headless, each with one EndpointSlice of ENDPOINTS named endpoints
# (defaults 10,000 and 10: 100,000 endpoints, the shape of benches/source.rs's `programming`),
# served with --file. For each of ROUNDS fresh processes: VmRSS and VmHWM 3 s after /ready, then
# the median and [min-max]. With HEAPTRACK=1, one more run under heaptrack (Debian's), whose
# report (the peak heap, and the allocation sites that hold it at the peak) is printed.
#
# usage: benches/memory.sh [ROUNDS=3] [IMPORTS=10000] [ENDPOINTS=10]
#   ARGS="--max-zone-names 0 --max-endpoints-per-service 0" passes flags to the server (here: no
#   caps, for a million endpoints).
# needs: python3, curl; heaptrack for HEAPTRACK=1
set -euo pipefail
rounds=${1:-3}
imports=${2:-10000}
eps=${3:-10}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
dir=${BENCH_DIR:-/tmp/clusterset-bench}/memory-$imports-$eps
cargo build --release --quiet --manifest-path "$root/Cargo.toml"
bin=${BIN:-$root/target/release/clusterset-dns}
mkdir -p "$dir"
if [ ! -f "$dir/objects.yaml" ]; then
  python3 - "$dir/objects.yaml" "$imports" "$eps" <<'PY'
import sys
out, n, e = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(out, "w") as f:
    for i in range(n):
        headless = i % 2 == 1
        spec = ("  type: Headless\n" if headless else
                f"  type: ClusterSetIP\n  ips: [10.{100 + i // 65536}.{(i // 256) % 256}.{i % 256}]\n")
        f.write(f"---\napiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceImport\n"
                f"metadata: {{name: svc{i}, namespace: scale}}\nspec:\n{spec}"
                f"  ports: [{{name: http, protocol: TCP, port: 80}}]\n")
        eps = ", ".join(f"{{addresses: [10.{(200 + k) % 256}.{(i // 256) % 256}.{i % 256}], hostname: pod-{k}, conditions: {{ready: true}}}}"
                        for k in range(e))
        f.write(f"---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                f"metadata:\n  name: svc{i}-east\n  namespace: scale\n  labels: {{multicluster.kubernetes.io/service-name: svc{i}, "
                f"multicluster.kubernetes.io/source-cluster: east}}\n"
                f"addressType: IPv4\nports: [{{name: http, protocol: TCP, port: 80}}]\nendpoints: [{eps}]\n")
PY
fi
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# run PREFIX...: starts the server (under PREFIX, if any), waits for /ready, holds 3 s, prints
# "RSS_kB HWM_kB seconds_to_ready refused_services", then stops it with SIGTERM.
run() {
  local admin pid start
  admin=$(port)
  start=$(date +%s.%N)
  "$@" "$bin" --file "$dir/objects.yaml" --listen 127.0.0.1:0 --admin-listen "127.0.0.1:$admin" \
    --log-level warn --lameduck 0s ${ARGS:-} >/dev/null 2>"$dir/server.log" &
  pid=$!
  for _ in $(seq 1 1200); do
    curl -sf "http://127.0.0.1:$admin/ready" >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { echo "the server exited: $(tail -3 "$dir/server.log")" >&2; exit 1; }
    sleep 0.1
  done
  local ready
  ready=$(python3 -c "import time; print(f'{time.time() - $start:.2f}')")
  sleep 3
  # The server's own process: under heaptrack, the child of the wrapper.
  local server=$pid
  if [ $# -gt 0 ]; then server=$(pgrep -P "$pid" -f clusterset-dns | head -1 || echo "$pid"); fi
  local rss hwm refused
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$server/status")
  hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$server/status")
  refused=$(curl -s "http://127.0.0.1:$admin/metrics" | awk '/^clusterset_dns_refused_services/ {s += $2} END {print s + 0}')
  kill -TERM "$server"
  wait "$pid" 2>/dev/null || true
  echo "$rss $hwm $ready $refused"
}

echo "$imports imports (half headless), $eps endpoints each: $((imports * eps)) endpoints; file $(du -m "$dir/objects.yaml" | cut -f1) MB"
results=()
for r in $(seq "$rounds"); do
  line=$(run)
  echo "round $r: VmRSS, VmHWM (kB), s to ready, services refused: $line"
  results+=("$line")
done
printf '%s\n' "${results[@]}" | python3 -c '
import statistics as st, sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
for i, what in enumerate(["VmRSS", "VmHWM"]):
    v = [r[i] / 1000 for r in rows]
    print(f"{what}: median {st.median(v):.1f} MB [{min(v):.1f}-{max(v):.1f}]")
v = [r[2] for r in rows]
print(f"to ready: median {st.median(v):.2f} s [{min(v):.2f}-{max(v):.2f}]")'
if [ "${HEAPTRACK:-}" = 1 ]; then
  rm -f "$dir"/heaptrack*.zst "$dir/stacks.txt"
  line=$(run heaptrack -o "$dir/heaptrack")
  echo "under heaptrack (VmRSS and VmHWM include its own overhead): $line"
  heaptrack_print -f "$dir"/heaptrack*.zst --print-peaks 0 --print-allocators 0 --print-temporary 0 \
    --print-leaks 0 -F "$dir/stacks.txt" --flamegraph-cost-type peak 2>/dev/null | grep -E 'peak heap|leaked'
  # The heap at its peak by the innermost three frames in this crate's sources (mod.rs left out:
  # the standard library's collections have files of that name too).
  python3 - "$dir/stacks.txt" "$root/src" <<'PY'
import collections, os, re, sys
stacks, src = sys.argv[1], sys.argv[2]
ours = {f for _, _, fs in os.walk(src) for f in fs if f.endswith(".rs") and f != "mod.rs"}
by, total = collections.Counter(), 0
for line in open(stacks):
    stack, cost = line.rstrip("\n").rsplit(" ", 1)
    total += int(cost)
    chain = []
    for frame in reversed(stack.split(";")):
        m = re.match(r"(.*) \((.*)\)$", frame)
        if m and m.group(2) in ours and not m.group(1).startswith("_R"):
            chain.append(f"{m.group(1)}@{m.group(2)}")
            if len(chain) == 3:
                break
    by[" < ".join(chain) or "outside this crate"] += int(cost)
print(f"heap at its peak: {total / 1e6:.2f} MB, by where it was allocated:")
for k, v in by.most_common(15):
    print(f"{v / 1e6:8.2f} MB {100 * v / total:5.1f} %  {k}")
PY
fi
