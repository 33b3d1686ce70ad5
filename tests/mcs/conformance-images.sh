#!/usr/bin/env bash
# Makes, once, stand-ins for the two pod images sigs.k8s.io/mcs-api's conformance suite runs
# (conformance/k8s_objects.go at ded161a), since no registry can be reached, for a hand run of
# the suite against the cluster set of tests/integration/clusterset_bridge.rs (its
# CLUSTERSET_KEEP switch imports them into both nodes). Prints the directory that holds them as
# `docker save` archives:
#   socat.tar     alpine/socat:1.7.4.4 — the exported pods: /bin/sh, grep -E, tr, awk and socat
#                 (the suite's socatListenerScript), from Debian 12's packages
#   netshoot.tar  nicolaka/netshoot:v0.15 — the request pod: sh, nslookup (bind9-dnsutils, the
#                 output the suite parses, as netshoot's bind-tools prints it) and nc with -4/-6,
#                 -v and -w (netcat-openbsd), from Debian 12's packages
# Neither is the image it stands in for: they hold what the suite runs in them, nothing else.
# Cached by this script's hash. Uses the Docker engine of tests/image/setup.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${CLUSTERSET_DNS_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterset-dns-tests}
docker=/usr/bin/docker
say() { echo "tests/mcs/conformance-images.sh: $*" >&2; }
DOCKER_HOST=$("$here/../image/setup.sh")
export DOCKER_HOST
key=$(sha256sum <"$0" | cut -c1-16)
dir=$cache/conformance-images-$key
if [ -f "$dir/done" ]; then echo "$dir"; exit 0; fi
rm -rf "$dir" && mkdir -p "$dir"

say "making alpine/socat:1.7.4.4 and nicolaka/netshoot:v0.15 stand-ins from Debian 12 packages (once; a few minutes)"
root=$dir/root
debootstrap --variant=minbase --include=socat,netcat-openbsd,bind9-dnsutils bookworm "$root" \
  http://deb.debian.org/debian >"$dir/debootstrap.log" 2>&1 ||
  { say "debootstrap failed: $(tail -5 "$dir/debootstrap.log")"; exit 1; }
rm -rf "$root/var/cache/apt/archives"/*.deb "$root/var/lib/apt/lists"/* "$root/usr/share/doc" "$root/usr/share/man"
for image in "socat alpine/socat:1.7.4.4" "netshoot nicolaka/netshoot:v0.15"; do
  set -- $image
  tar -C "$root" -c . | $docker import - "$2" >/dev/null
  $docker save -o "$dir/$1.tar" "$2"
done
rm -rf "$root"
touch "$dir/done"
echo "$dir"
