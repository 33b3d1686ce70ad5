#!/usr/bin/env bash
# Builds, once, a real CoreDNS release from the Go module proxy (`go install` of a pinned release;
# no other downloads), and prints the path of the binary. Cached by version.
#   tests/coredns/setup.sh            v1.15.0: the forwarding, differential and cluster tests'.
#   tests/coredns/setup.sh v1.13.2    the version node-local-dns's node-cache links
#                                     (kubernetes/dns@9aa70b8f go.mod), for
#                                     tests/integration/node_local_dns.rs.
set -euo pipefail
version=${1:-v1.15.0}
case $version in
  v1.15.0 | v1.13.2) ;;
  *) echo "tests/coredns/setup.sh: $version is not a version the tests pin (v1.15.0, v1.13.2)" >&2; exit 2 ;;
esac
dir=${CLUSTERSET_DNS_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterset-dns-tests}/coredns-$version
if [ ! -x "$dir/coredns" ]; then
  command -v go >/dev/null || { echo "tests/coredns/setup.sh: Go is needed to build CoreDNS" >&2; exit 1; }
  echo "tests/coredns/setup.sh: building CoreDNS $version into $dir (once; about 5 minutes on 2 cores)" >&2
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  GOBIN="$dir.tmp" GOFLAGS=-mod=mod go install "github.com/coredns/coredns@$version" >&2
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
echo "$dir/coredns"
