#!/usr/bin/env bash
# Builds, once, what the two-cluster test (tests/integration/clusterset/) adds to a cluster,
# from the pinned module in tests/mcs/infra (Go module proxy; no other downloads), and prints the
# directory that holds them:
#   bin/servicecontroller  sigs.k8s.io/mcs-api/controllers' cmd/servicecontroller (its master, on
#                          v1alpha1, served only as the pseudo-version in go.mod)
#   bin/syncer             the test's export syncer (tests/mcs/infra/syncer)
#   crds/                  the MCS CRDs of sigs.k8s.io/mcs-api v0.5.2 (config/crd: both versions,
#                          v1beta1 stored)
#   crds-v0.3.0/           those of v0.3.0, v1alpha1 alone, as Cilium 1.18 serves them
#                          (tests/integration/mcs_status.rs)
#   crds-v0.3.1-0.20260224125735-0f775a3eff97/
#                          those of the pseudo-version Cilium 1.19.3 pins (its go.mod), which its
#                          operator installs: v1alpha1 alone, ServiceImport conditions added
#   crds-v0.1.0/           those of v0.1.0, the version Submariner Lighthouse pins (v1alpha1;
#                          a condition's reason may be empty)
#   rbac/role.yaml         the controller's ClusterRole (config/rbac/role.yaml of the same module)
# Cached by this script and the module's files.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
key=$(cat "$0" "$here/infra/go.mod" "$here/infra/go.sum" "$here/infra/tools.go" "$here/infra/syncer/main.go" | sha256sum | cut -c1-16)
cilium119=v0.3.1-0.20260224125735-0f775a3eff97
dir=${CLUSTERSET_DNS_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterset-dns-tests}/mcs-$key
if ! [ -x "$dir/bin/syncer" ] || ! [ -x "$dir/bin/servicecontroller" ] || ! [ -f "$dir/rbac/role.yaml" ] ||
  ! [ -d "$dir/crds-v0.3.0" ] || ! [ -d "$dir/crds-v0.1.0" ] || ! [ -d "$dir/crds-$cilium119" ]; then
  command -v go >/dev/null || { echo "tests/mcs/setup.sh: Go is needed to build the MCS controller" >&2; exit 1; }
  echo "tests/mcs/setup.sh: building the MCS controller and the export syncer into $dir (once; a few minutes)" >&2
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp/bin" "$dir.tmp/crds" "$dir.tmp/crds-v0.3.0" "$dir.tmp/crds-v0.1.0" \
    "$dir.tmp/crds-$cilium119" "$dir.tmp/rbac"
  (
    cd "$here/infra"
    go build -o "$dir.tmp/bin/servicecontroller" sigs.k8s.io/mcs-api/controllers/cmd/servicecontroller
    go build -o "$dir.tmp/bin/syncer" ./syncer
    go mod download sigs.k8s.io/mcs-api
    mcs=$(go list -m -f '{{.Dir}}' sigs.k8s.io/mcs-api)
    cp "$mcs"/config/crd/*.yaml "$dir.tmp/crds/"
    cp "$mcs/config/rbac/role.yaml" "$dir.tmp/rbac/role.yaml"
    # Other versions of the same module than go.mod's: fetched by name and version, outside it.
    for v in v0.3.0 v0.1.0 "$cilium119"; do
      old=$(cd / && GOFLAGS= go mod download -json "sigs.k8s.io/mcs-api@$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
      cp "$old"/config/crd/*.yaml "$dir.tmp/crds-$v/"
    done
  ) >&2
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
echo "$dir"
