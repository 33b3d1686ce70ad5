#!/usr/bin/env bash
# Builds, once, the real CoreDNS that the forwarding and differential tests run, from the Go
# module proxy (`go install` of a pinned release; no other downloads), and prints the path of
# the binary. Cached by version.
set -euo pipefail
version=v1.15.0
dir=${CLUSTERSET_DNS_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterset-dns-tests}/coredns-$version
if [ ! -x "$dir/coredns" ]; then
  command -v go >/dev/null || { echo "tests/coredns/setup.sh: Go is needed to build CoreDNS" >&2; exit 1; }
  echo "tests/coredns/setup.sh: building CoreDNS $version into $dir (once; about 5 minutes on 2 cores)" >&2
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  GOBIN="$dir.tmp" GOFLAGS=-mod=mod go install "github.com/coredns/coredns@$version" >&2
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
echo "$dir/coredns"
