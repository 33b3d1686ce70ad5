#!/usr/bin/env bash
# The README's test command: does every set-up step a new machine needs, then runs every test.
#   - Debian packages the tests use (dig, kubectl, Prometheus, Docker's engine, ...) and pip's
#     kubernetes-validate, when missing;
#   - the crates (cargo fetch --locked);
#   - the Go-built components, from the Go module proxy, once, cached in
#     ~/.cache/clusterset-dns-tests: kube-apiserver, etcd and the rest of a Kubernetes node
#     (tests/k8s/setup.sh), CoreDNS v1.15.0 and, as node-local-dns links it, v1.13.2
#     (tests/coredns/setup.sh), controller-gen with the
#     prometheus-operator's CRDs and helm (tests/monitoring/setup.sh), the MCS API's controller,
#     its CRDs and the two-cluster test's export syncer (tests/mcs/setup.sh), metrics-server
#     (tests/metrics-server/setup.sh), kube-state-metrics (tests/kube-state-metrics/setup.sh),
#     Envoy Gateway and the test's xDS client (tests/gateway/setup.sh);
#   - then `cargo test --locked`, with any arguments given here passed on.
# Needs root (as CI has): apt-get, network namespaces, a container engine.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v dig >/dev/null 2>&1 || need_apt+=(bind9-dnsutils)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
command -v kubectl >/dev/null 2>&1 || need_apt+=(kubectl)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)
# ip and nsenter, for the tests that make network namespaces (tests/integration/xdp/, tests/integration/lameduck.rs,
# tests/integration/cluster.rs); setpriv and prlimit, for deploy/xdp's capabilities and locked-memory limit.
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
{ command -v setpriv && command -v prlimit && command -v nsenter; } >/dev/null 2>&1 || need_apt+=(util-linux)
# iptables and conntrack, for tests/integration/lameduck.rs (a Service address spread over instances as
# kube-proxy's iptables mode does) and kube-proxy itself in tests/integration/cluster.rs.
command -v iptables-restore >/dev/null 2>&1 || need_apt+=(iptables)
command -v conntrack >/dev/null 2>&1 || need_apt+=(conntrack)
# Docker's engine (dockerd, containerd, runc) and debootstrap, for tests/integration/image.rs and
# tests/integration/cluster.rs: images are built from Debian packages, since no registry is reached.
{ command -v dockerd && command -v containerd && command -v ctr && command -v runc; } >/dev/null 2>&1 ||
  need_apt+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
# The CNI plugins (bridge, host-local, loopback), for the kubelet in tests/integration/cluster.rs.
[ -x /usr/lib/cni/bridge ] || need_apt+=(containernetworking-plugins)
# The clients and forwarders of tests/integration/compat.rs: musl's getaddrinfo (musl-gcc), Node.js, Python,
# unbound, dnsmasq (as kube-dns runs it) and Knot Resolver. Java is used where a JDK is present.
command -v musl-gcc >/dev/null 2>&1 || need_apt+=(musl-tools)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
command -v unbound >/dev/null 2>&1 || need_apt+=(unbound)
command -v dnsmasq >/dev/null 2>&1 || need_apt+=(dnsmasq-base)
command -v kresd >/dev/null 2>&1 || need_apt+=(knot-resolver)
# Prometheus server and promtool, for tests/integration/ops.rs and tests/integration/cluster.rs.
{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 || need_apt+=(prometheus)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "tests/run.sh: installing ${need_apt[*]}" >&2
  apt-get update -qq
  # No service of these packages (unbound, Prometheus, Docker) is started by the install: the
  # tests start their own, in namespaces of their own.
  guard=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && guard=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  if [ -n "$guard" ]; then rm -f /usr/sbin/policy-rc.d && trap - EXIT; fi
fi
# kubernetes-validate: pip's, where pip may install; else (Debian's own Python refuses, PEP 668)
# in a virtual environment of the tests' own, kept with the other set-up.
if ! command -v kubernetes-validate >/dev/null 2>&1 && ! pip install -q kubernetes-validate 2>/dev/null; then
  venv=${CLUSTERSET_DNS_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterset-dns-tests}/venv
  if [ ! -x "$venv/bin/kubernetes-validate" ]; then
    echo "tests/run.sh: pip cannot install here; installing kubernetes-validate in $venv" >&2
    python3 -m venv "$venv" 2>/dev/null || {
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      python3 -m venv "$venv"
    }
    "$venv/bin/pip" install -q kubernetes-validate
  fi
  export PATH=$PATH:$venv/bin
fi

cargo fetch --locked
# Kubernetes and etcd (tests/integration/kube_source.rs, tests/integration/differential/, tests/integration/cluster.rs) and CoreDNS
# (tests/integration/forwarding.rs, tests/integration/differential/, tests/integration/cluster.rs): slow only the first time.
tests/k8s/setup.sh >/dev/null
tests/coredns/setup.sh >/dev/null
tests/coredns/setup.sh v1.13.2 >/dev/null
# The prometheus-operator's CRDs and helm (tests/integration/monitoring.rs).
tests/monitoring/setup.sh >/dev/null
# The MCS controller, the MCS CRDs and the export syncer, and metrics-server (tests/integration/clusterset/).
tests/mcs/setup.sh >/dev/null
tests/metrics-server/setup.sh >/dev/null
# kube-state-metrics, for the MCS status kit (tests/integration/mcs_status.rs), and Envoy Gateway
# with the xDS client that stands in for Envoy (tests/integration/gateway.rs).
tests/kube-state-metrics/setup.sh >/dev/null
tests/gateway/setup.sh >/dev/null

exec cargo test --locked "$@"
