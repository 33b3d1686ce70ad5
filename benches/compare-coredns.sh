#!/usr/bin/env bash
# Knot DNS, CoreDNS and clusterset-dns on the same workload and query file, in the same run:
# CoreDNS v1.15.0 serves it through its kubernetes plugin (`multicluster clusterset.local`) and
# clusterset-dns through its Kubernetes source, both watching one real kube-apiserver + etcd (the
# test infrastructure's, built by tests/k8s/setup.sh and tests/coredns/setup.sh) that holds the
# workload's ServiceImports and EndpointSlices; Knot serves the equivalent zone file. Several
# rounds; prints every round's table, then per server the median and spread of CPU per answered
# query and the ratio against Knot.
#
# usage: benches/compare-coredns.sh [ROUNDS=3] [SECONDS=10]
# needs: knotd and dnsperf (apt-get install knot dnsperf), kubectl, openssl, Go, taskset, python3
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
k8s=$("$root/tests/k8s/setup.sh")
coredns=$("$root/tests/coredns/setup.sh")
[ -f "$BENCH_DIR/queries.txt" ] || python3 "$here/kit/genzone.py" "$BENCH_DIR" >/dev/null

work=$(mktemp -d)
pids=()
# Newest first (the API server before its etcd, which it would otherwise keep retrying while
# shutting down), and SIGKILL whatever is still there after 10 s.
cleanup() {
  local i p
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
  for _ in $(seq 100); do
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && break; p=; done
    [ -z "$p" ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
etcd_port=$(port); peer=$(port); api_port=$(port)

# etcd and kube-apiserver on loopback, on the load generator's CPU (they idle once loaded).
(cd "$work" && openssl genrsa -out sa.key 2048 2>/dev/null && openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null)
echo "admintoken,admin,admin,system:masters" > "$work/tokens.csv"
taskset -c 1 "$k8s/etcd" --data-dir "$work/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
  --initial-cluster "default=http://127.0.0.1:$peer" >/dev/null 2>"$work/etcd.log" &
pids+=($!)
(cd "$work" && exec taskset -c 1 "$k8s/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --endpoint-reconciler-type none \
  --secure-port "$api_port" --cert-dir "$work/certs" \
  --service-account-issuer https://kubernetes.default.svc --service-account-key-file sa.pub \
  --service-account-signing-key-file sa.key --token-auth-file tokens.csv \
  --authorization-mode RBAC --service-cluster-ip-range 198.19.0.0/16) >/dev/null 2>"$work/apiserver.log" &
pids+=($!)
cat > "$work/kubeconfig" <<K
apiVersion: v1
kind: Config
clusters:
- name: bench
  cluster: {server: "https://127.0.0.1:$api_port", insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: admintoken}
contexts:
- name: bench
  context: {cluster: bench, user: admin}
current-context: bench
K
kc() { kubectl --kubeconfig "$work/kubeconfig" "$@"; }
for i in $(seq 240); do kc get --raw /readyz >/dev/null 2>&1 && break; sleep 0.25; done
kc get --raw /readyz >/dev/null

echo "loading the workload into the API server" >&2
kc apply -f "$root/tests/k8s/crds/serviceimports-v1beta1.yaml" >/dev/null
kc wait --for=condition=Established crd/serviceimports.multicluster.x-k8s.io >/dev/null
python3 - "$BENCH_DIR/objects.yaml" > "$work/namespaces.yaml" <<'PY'
import re, sys
for ns in sorted(set(re.findall(r"^  namespace: (\S+)$", open(sys.argv[1]).read(), re.M))):
    print(f"---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}")
PY
kc apply -f "$work/namespaces.yaml" >/dev/null
kc create -f "$BENCH_DIR/objects.yaml" >/dev/null
want=$(grep -c '^kind: ServiceImport' "$BENCH_DIR/objects.yaml")
have=$(kc get serviceimports.v1alpha1.multicluster.x-k8s.io -A --no-headers | wc -l)
[ "$have" = "$want" ] || { echo "the API server holds $have of $want ServiceImports" >&2; exit 1; }

cat > "$work/Corefile" <<C
clusterset.local:5320 {
    bind 127.0.0.1
    kubernetes clusterset.local {
        kubeconfig $work/kubeconfig bench
        multicluster clusterset.local
        startup_timeout 60s
    }
}
C

out=$(mktemp)
for r in $(seq "$rounds"); do
  echo "== round $r of $rounds ($secs s each)"
  bash "$here/kit/compare.sh" "$secs" \
    "coredns|5320|$coredns -conf $work/Corefile" \
    "clusterset-dns|5310|$bin --kubeconfig $work/kubeconfig --listen 127.0.0.1:5310 --admin-listen 127.0.0.1:0 --log-level warn" \
    | tee -a "$out"
done
python3 "$here/summarize.py" "$out"
rm -f "$out"
