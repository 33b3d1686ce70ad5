#!/usr/bin/env bash
# Makes, once, the images the real clusters of tests/integration/cluster.rs and clusterset.rs run besides ours, since
# no registry can be reached, and prints the directory that holds them as `docker save`
# archives (for `ctr images import`):
#   pause.tar    registry.k8s.io/pause:3.10.2, the sandbox image: Kubernetes' own pause.c (from
#                the pinned k8s.io/kubernetes module), built static as its Makefile builds it
#   coredns.tar  registry.k8s.io/coredns/coredns:v1.15.0: the CoreDNS the tests build
#                (tests/coredns/setup.sh) on the distroless base of tests/image/setup.sh
#   metrics-server.tar  registry.k8s.io/metrics-server/metrics-server:v0.8.0: the static binary of
#                tests/metrics-server/setup.sh on scratch, as its Dockerfile builds it
#   client.tar   clusterset-dns-test/client:1: Debian 12 (glibc, dig, bash) with tests/cluster/lookup.c
#                and tests/cluster/serve.c (the two-cluster test's backends)
# Cached by the inputs' hashes. Uses the Docker engine of tests/image/setup.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${CLUSTERSET_DNS_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterset-dns-tests}
docker=/usr/bin/docker
say() { echo "tests/cluster/images.sh: $*" >&2; }
DOCKER_HOST=$("$here/../image/setup.sh")
export DOCKER_HOST
coredns=$("$here/../coredns/setup.sh")
metrics_server=$("$here/../metrics-server/setup.sh")/bin/metrics-server
# The module's source, fetched again when the Go module cache was emptied after the components
# were built (`go list` alone prints nothing then).
kubernetes=$(cd "$here/../k8s/infra" && go mod download k8s.io/kubernetes && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
[ -f "$kubernetes/build/pause/Makefile" ] || { say "no k8s.io/kubernetes source in the Go module cache (got '$kubernetes')"; exit 1; }
pause_c=$kubernetes/build/pause/linux/pause.c
pause_tag=$(sed -n 's/^TAG ?= *//p' "$kubernetes/build/pause/Makefile")
key=$(cat "$0" "$here/lookup.c" "$here/serve.c" "$pause_c" "$coredns" "$metrics_server" | sha256sum | cut -c1-16)
dir=$cache/cluster-images-$key
if [ -f "$dir/done" ]; then echo "$dir"; exit 0; fi
rm -rf "$dir" && mkdir -p "$dir/pause" "$dir/coredns" "$dir/metrics-server" "$dir/client"

say "building registry.k8s.io/pause:$pause_tag from $pause_c"
gcc -Os -Wall -Werror -static -DVERSION="v$pause_tag-clusterset-dns-test" -o "$dir/pause/pause" "$pause_c"
printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$dir/pause/Dockerfile"
$docker build -q -t "registry.k8s.io/pause:$pause_tag" "$dir/pause" >/dev/null

say "building registry.k8s.io/coredns/coredns:v1.15.0 from $coredns"
cp "$coredns" "$dir/coredns/coredns"
printf 'FROM gcr.io/distroless/cc-debian12:nonroot\nCOPY coredns /coredns\nEXPOSE 53 53/udp\nENTRYPOINT ["/coredns"]\n' >"$dir/coredns/Dockerfile"
$docker build -q -t registry.k8s.io/coredns/coredns:v1.15.0 "$dir/coredns" >/dev/null

say "building registry.k8s.io/metrics-server/metrics-server:v0.8.0 from $metrics_server"
cp "$metrics_server" "$dir/metrics-server/metrics-server"
printf 'FROM scratch\nCOPY metrics-server /metrics-server\nUSER 65534:65534\nENTRYPOINT ["/metrics-server"]\n' >"$dir/metrics-server/Dockerfile"
$docker build -q -t registry.k8s.io/metrics-server/metrics-server:v0.8.0 "$dir/metrics-server" >/dev/null

say "making clusterset-dns-test/client:1 from Debian 12 packages (once; a few minutes)"
root=$dir/client/root
debootstrap --variant=minbase --include=bind9-dnsutils bookworm "$root" \
  http://deb.debian.org/debian >"$dir/client/debootstrap.log" 2>&1 ||
  { say "debootstrap failed: $(tail -5 "$dir/client/debootstrap.log")"; exit 1; }
rm -rf "$root/var/cache/apt/archives"/*.deb "$root/var/lib/apt/lists"/* "$root/usr/share/doc" "$root/usr/share/man"
gcc -O2 -Wall -Werror -pthread -o "$root/usr/local/bin/lookup" "$here/lookup.c"
gcc -O2 -Wall -Werror -o "$root/usr/local/bin/serve" "$here/serve.c"
tar -C "$root" -c . | $docker import --change 'CMD ["sleep", "infinity"]' - clusterset-dns-test/client:1 >/dev/null
rm -rf "$root"

for image in "pause registry.k8s.io/pause:$pause_tag" "coredns registry.k8s.io/coredns/coredns:v1.15.0" \
  "metrics-server registry.k8s.io/metrics-server/metrics-server:v0.8.0" "client clusterset-dns-test/client:1"; do
  set -- $image
  $docker save -o "$dir/$1.tar" "$2"
done
rm -rf "$dir/pause" "$dir/coredns" "$dir/metrics-server" "$dir/client"
echo "$pause_tag" >"$dir/pause-tag"
touch "$dir/done"
echo "$dir"
