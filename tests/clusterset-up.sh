#!/usr/bin/env bash
# Brings up the two-cluster set of tests/integration/clusterset (two clusters of real
# components, the MCS API's controller, clusterset-dns behind CoreDNS in each, the
# linkerd-bridge's export half in east, web exported from east) and leaves it running, so the
# README's walk can be tried by hand or a conformance suite pointed at it. It prints a
# kubeconfig with the contexts east and west, how to use it, and how to tear it down (remove
# the file it names; the set also goes after MINUTES, default 120). As root, on the machine
# tests/run.sh sets up (it does the set-up steps first).
#   tests/clusterset-up.sh [--bridge] [MINUTES]
# --bridge: the set of tests/integration/clusterset_bridge.rs instead, with the linkerd-bridge as
# the MCS implementation (no MCS controller, no syncer): the chart with both halves in each
# cluster, Links both ways on Linkerd's remote-access tokens, and Linkerd's own service mirror
# from LINKERD_CONTROLLER=<path of linkerd2's `controller` binary, built from its source>; the
# conformance suite's pod images as stand-ins (tests/mcs/conformance-images.sh) in both nodes.
set -euo pipefail
test=clusterset::a_real_cluster_set_of_two_clusters_with_the_mcs_controller
if [ "${1:-}" = --bridge ]; then
  shift
  [ -x "${LINKERD_CONTROLLER:-}" ] || { echo "clusterset-up --bridge: LINKERD_CONTROLLER must name linkerd2's controller binary (got '${LINKERD_CONTROLLER:-}')" >&2; exit 2; }
  test=clusterset_bridge::the_bridge_routes_clients_outside_the_mesh_to_every_exporting_clusters_pods
fi
minutes="${1:-120}"
[[ "$minutes" =~ ^[0-9]+$ ]] || { echo "clusterset-up: MINUTES must be whole minutes, not '$minutes'" >&2; exit 2; }
cd "$(dirname "$0")/.."
CLUSTERSET_KEEP="$minutes" exec bash tests/run.sh --test integration -- "$test" --exact --nocapture
