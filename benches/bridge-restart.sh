#!/usr/bin/env bash
# A linkerd-bridge started over a world the bridge-scale bench holds (`HOLD=<seconds> N=<n>
# cargo bench --bench source -- bridge-scale` prints the kubeconfig): how long it takes to
# reconcile every key (3N: N exports, 2N imports) and its RSS and high-water mark then. Then it
# is stopped (SIGTERM: it gives the Lease up for the next one).
#   benches/bridge-restart.sh <kubeconfig> <n> [binary] [wrapper...]
# A wrapper runs the bridge under a profiler, as `heaptrack -o /tmp/ht/bridge`; the RSS printed
# is then the bridge's under it.
set -euo pipefail
kubeconfig=$1 n=$2
bin=${3:-target/release/clusterset-dns}
shift $(( $# < 3 ? $# : 3 ))
port=$((20000 + RANDOM % 10000))
"$@" "$bin" linkerd-bridge --halves export,import --kubeconfig "$kubeconfig" \
  --admin-listen "127.0.0.1:$port" --lease-namespace scale --cluster-id local --resync 10m \
  --log-level warn 2>/dev/null &
pid=$!
t0=$(date +%s.%N)
reconciled=0
for _ in $(seq 1 1200); do
  sleep 0.5
  metrics=$(curl -s "127.0.0.1:$port/metrics" || true)
  reconciled=$(awk '/^clusterset_dns_bridge_reconciles_total/ {s += $2} END {print int(s)}' <<<"$metrics")
  leader=$(awk '/^clusterset_dns_bridge_leader / {print $2}' <<<"$metrics")
  [ "$leader" = 1 ] && [ "$reconciled" -ge $((3 * n)) ] && break
done
t1=$(date +%s.%N)
sleep 3
# The bridge itself: under a wrapper, the process that serves the admin port.
bridge=$(pgrep -f -- "--admin-listen 127.0.0.1:$port" | tail -1)
rss=$(awk '/^VmRSS/ {print $2}' "/proc/$bridge/status")
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$bridge/status")
printf 'reconciled %s keys in %.1f s; RSS %.1f MB, high-water %.1f MB\n' \
  "$reconciled" "$(echo "$t1 - $t0" | bc)" "$(echo "$rss / 1024" | bc -l)" "$(echo "$hwm / 1024" | bc -l)"
kill -TERM "$bridge"
wait "$pid" 2>/dev/null || true
