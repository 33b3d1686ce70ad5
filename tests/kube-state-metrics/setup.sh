#!/usr/bin/env bash
# Builds, once, kube-state-metrics v2.20.0 from the pinned module in
# tests/kube-state-metrics/infra (Go module proxy; no other downloads), static, and prints the
# directory that holds bin/kube-state-metrics. tests/integration/mcs_status.rs runs it with
# deploy/monitoring/mcs/kube-state-metrics.yaml. Cached by this script and the module's files.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
key=$(cat "$0" "$here/infra/go.mod" "$here/infra/go.sum" "$here/infra/tools.go" | sha256sum | cut -c1-16)
dir=${CLUSTERSET_DNS_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterset-dns-tests}/kube-state-metrics-$key
if ! [ -x "$dir/bin/kube-state-metrics" ]; then
  command -v go >/dev/null || { echo "tests/kube-state-metrics/setup.sh: Go is needed to build kube-state-metrics" >&2; exit 1; }
  echo "tests/kube-state-metrics/setup.sh: building kube-state-metrics into $dir (once; a few minutes on 2 cores)" >&2
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp/bin"
  (
    cd "$here/infra"
    # Stamped with its version, as its Makefile stamps it (its /metrics and --version say it).
    v=$(go list -m -f '{{.Version}}' k8s.io/kube-state-metrics/v2)
    CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-X github.com/prometheus/common/version.Version=$v" \
      -o "$dir.tmp/bin/kube-state-metrics" k8s.io/kube-state-metrics/v2
  ) >&2
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
echo "$dir"
