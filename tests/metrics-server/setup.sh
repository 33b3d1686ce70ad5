#!/usr/bin/env bash
# Builds, once, metrics-server v0.8.0 from the pinned module in tests/metrics-server/infra (Go
# module proxy; no other downloads), static, and prints the directory that holds it:
#   bin/metrics-server  sigs.k8s.io/metrics-server's cmd/metrics-server
#   manifests/          the module's own manifests (base, components, overlays), as released
# tests/cluster/images.sh makes its image. Cached by this script and the module's files.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
key=$(cat "$0" "$here/infra/go.mod" "$here/infra/go.sum" "$here/infra/tools.go" | sha256sum | cut -c1-16)
dir=${CLUSTERSET_DNS_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterset-dns-tests}/metrics-server-$key
if ! [ -x "$dir/bin/metrics-server" ] || ! [ -f "$dir/manifests/base/deployment.yaml" ]; then
  command -v go >/dev/null || { echo "tests/metrics-server/setup.sh: Go is needed to build metrics-server" >&2; exit 1; }
  echo "tests/metrics-server/setup.sh: building metrics-server into $dir (once; about 4 minutes on 2 cores)" >&2
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp/bin"
  (
    cd "$here/infra"
    # Stamped with its version, as its Makefile stamps it (it reports it in its logs).
    v=$(go list -m -f '{{.Version}}' sigs.k8s.io/metrics-server)
    CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-X k8s.io/client-go/pkg/version.gitVersion=$v" \
      -o "$dir.tmp/bin/metrics-server" sigs.k8s.io/metrics-server/cmd/metrics-server
    cp -r "$(go list -m -f '{{.Dir}}' sigs.k8s.io/metrics-server)/manifests" "$dir.tmp/manifests"
    chmod -R u+w "$dir.tmp/manifests"
  ) >&2
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
echo "$dir"
