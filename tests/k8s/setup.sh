#!/usr/bin/env bash
# Builds, once, the real kube-apiserver and etcd that the Kubernetes-source tests run, from the
# pinned Go module in tests/k8s/infra (Go module proxy; no other downloads), and prints the
# directory that holds them. Cached by the module's go.mod and go.sum.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
key=$(cat "$here/infra/go.mod" "$here/infra/go.sum" | sha256sum | cut -c1-16)
dir=${CLUSTERSET_DNS_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterset-dns-tests}/k8s-$key
if [ ! -x "$dir/kube-apiserver" ] || [ ! -x "$dir/etcd" ]; then
  command -v go >/dev/null || { echo "tests/k8s/setup.sh: Go is needed to build kube-apiserver and etcd" >&2; exit 1; }
  echo "tests/k8s/setup.sh: building kube-apiserver and etcd into $dir (once; about 15 minutes on 2 cores)" >&2
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  (cd "$here/infra" && go build -o "$dir.tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver \
    && go build -o "$dir.tmp/etcd" go.etcd.io/etcd/server/v3) >&2
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
echo "$dir"
