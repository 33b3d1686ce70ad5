#!/usr/bin/env bash
# Builds, once, the Go programs the monitoring tests use, from the pinned module in
# tests/monitoring/tools (Go module proxy; no other downloads), and renders the
# prometheus-operator's CRDs from its API types (github.com/prometheus-operator/
# prometheus-operator/pkg/apis/monitoring, with controller-gen, as the operator's own build
# renders them: its repository's YAML is not on the proxy). Prints the directory that holds
# bin/controller-gen, bin/helm and crds/. Cached by this script and the module's go.mod and go.sum.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
key=$(cat "$0" "$here/tools/go.mod" "$here/tools/go.sum" "$here/tools/tools.go" | sha256sum | cut -c1-16)
dir=${CLUSTERSET_DNS_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterset-dns-tests}/monitoring-$key
if ! [ -x "$dir/bin/helm" ] || ! [ -f "$dir/crds/monitoring.coreos.com_servicemonitors.yaml" ]; then
  command -v go >/dev/null || { echo "tests/monitoring/setup.sh: Go is needed to build controller-gen and helm" >&2; exit 1; }
  echo "tests/monitoring/setup.sh: building controller-gen and helm into $dir (once; a few minutes)" >&2
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp/bin"
  (
    cd "$here/tools"
    go build -o "$dir.tmp/bin/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen
    go build -o "$dir.tmp/bin/helm" helm.sh/helm/v4/cmd/helm
    "$dir.tmp/bin/controller-gen" crd:crdVersions=v1,maxDescLen=0 \
      paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 \
      output:crd:dir="$dir.tmp/crds"
  ) >&2
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
echo "$dir"
