#!/usr/bin/env bash
# Builds, once, the real Kubernetes components the tests run, from the pinned Go module in
# tests/k8s/infra (Go module proxy; no other downloads), and prints the directory that holds
# them: kube-apiserver and etcd (the Kubernetes-source tests), and kube-controller-manager,
# kube-scheduler, kubelet and kube-proxy (the single-node cluster of tests/integration/cluster.rs). Cached by
# this script and the module's go.mod and go.sum.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
key=$(cat "$0" "$here/infra/go.mod" "$here/infra/go.sum" | sha256sum | cut -c1-16)
dir=${CLUSTERSET_DNS_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterset-dns-tests}/k8s-$key
commands=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
ready=true
for c in "${commands[@]}" etcd; do [ -x "$dir/$c" ] || ready=false; done
if ! $ready; then
  command -v go >/dev/null || { echo "tests/k8s/setup.sh: Go is needed to build Kubernetes and etcd" >&2; exit 1; }
  echo "tests/k8s/setup.sh: building ${commands[*]} and etcd into $dir (once; about 25 minutes on 2 cores)" >&2
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  (
    cd "$here/infra"
    # Stamped with the module's version, as Kubernetes' own build stamps it (the kubelet
    # reports it in the Node's status, and kubectl version shows it).
    v=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
    major=${v#v}; major=${major%%.*}; minor=${v#v$major.}; minor=${minor%%.*}
    pkg=k8s.io/component-base/version
    flags="-X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
    for c in "${commands[@]}"; do go build -ldflags "$flags" -o "$dir.tmp/$c" "k8s.io/kubernetes/cmd/$c"; done
    go build -o "$dir.tmp/etcd" go.etcd.io/etcd/server/v3
  ) >&2
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
echo "$dir"
