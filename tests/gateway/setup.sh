#!/usr/bin/env bash
# Builds, once, what tests/integration/gateway.rs runs, from the pinned module in
# tests/gateway/infra (Go module proxy; no other downloads), static, and prints the directory
# that holds them:
#   bin/envoy-gateway  github.com/envoyproxy/gateway's cmd/envoy-gateway (v1.9.1), the controller
#                      and xDS server (no Envoy: none can be built here)
#   bin/xdsclient      the test's xDS client (tests/gateway/infra/xdsclient), in Envoy's place
#   crds/              the Gateway API's standard CRDs (sigs.k8s.io/gateway-api, the version
#                      envoy-gateway pins) and Envoy Gateway's own (its gateway-crds-helm chart's
#                      generated CRDs, without the chart's one `if` around each)
# Its own module: envoy-gateway's Kubernetes libraries are not the other test components'.
# Cached by this script and the module's files.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
key=$(cat "$0" "$here/infra/go.mod" "$here/infra/go.sum" "$here/infra/tools.go" "$here/infra/xdsclient/main.go" | sha256sum | cut -c1-16)
dir=${CLUSTERSET_DNS_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterset-dns-tests}/gateway-$key
if ! [ -x "$dir/bin/envoy-gateway" ] || ! [ -x "$dir/bin/xdsclient" ] || ! [ -f "$dir/crds/gateway.networking.k8s.io_httproutes.yaml" ]; then
  command -v go >/dev/null || { echo "tests/gateway/setup.sh: Go is needed to build Envoy Gateway" >&2; exit 1; }
  echo "tests/gateway/setup.sh: building Envoy Gateway and the xDS client into $dir (once; about 8 minutes on 2 cores)" >&2
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp/bin" "$dir.tmp/crds"
  (
    cd "$here/infra"
    v=$(go list -m -f '{{.Version}}' github.com/envoyproxy/gateway)
    # Stamped with its version, as its Makefile stamps it.
    CGO_ENABLED=0 go build -mod=readonly -trimpath \
      -ldflags "-X github.com/envoyproxy/gateway/internal/cmd/version.envoyGatewayVersion=$v" \
      -o "$dir.tmp/bin/envoy-gateway" github.com/envoyproxy/gateway/cmd/envoy-gateway
    CGO_ENABLED=0 go build -mod=readonly -trimpath -o "$dir.tmp/bin/xdsclient" ./xdsclient
    eg=$(go list -m -f '{{.Dir}}' github.com/envoyproxy/gateway)
    gwapi=$(go list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)
    for f in "$gwapi"/config/crd/standard/gateway.networking.k8s.io_*.yaml; do
      # The ValidatingAdmissionPolicy that guards upgrades is not a CRD.
      case $f in *_vap_*) continue ;; esac
      cp "$f" "$dir.tmp/crds/"
    done
    for f in "$eg"/charts/gateway-crds-helm/templates/generated/*.yaml; do
      grep -v '^{{' "$f" >"$dir.tmp/crds/$(basename "$f")"
    done
    chmod -R u+w "$dir.tmp/crds"
  ) >&2
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
echo "$dir"
