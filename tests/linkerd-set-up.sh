#!/usr/bin/env bash
# Brings up two linked clusters for the linkerd-bridge, as tests/integration/linkerd_bridge_conflicts.rs
# does (two real API servers, each with the bridge's both halves and its id from its
# ClusterProperty, a Link to the other and its credentials Secret in linkerd-multicluster), but
# without the test's replay of Linkerd's service mirror, and leaves them running: Linkerd's own
# service mirror (built from its source) and the MCS API's conformance suite can then be run
# against them by hand. It prints a kubeconfig with the contexts east and west, the commands,
# and how to tear it down (remove the file it names; the set also goes after MINUTES, default
# 120). As root, on the machine tests/run.sh sets up (it does the set-up steps first).
# CLUSTERSET_DNS_TEST_APISERVER_ARGS adds flags to both API servers (the MCS conformance suite
# needs --disable-admission-plugins=ServiceAccount here: no controller makes ServiceAccounts).
#   tests/linkerd-set-up.sh [MINUTES]
set -euo pipefail
minutes="${1:-120}"
[[ "$minutes" =~ ^[0-9]+$ ]] || { echo "linkerd-set-up: MINUTES must be whole minutes, not '$minutes'" >&2; exit 2; }
cd "$(dirname "$0")/.."
LINKERD_SET_KEEP="$minutes" exec bash tests/run.sh --test integration -- \
  linkerd_bridge_conflicts::two_clusters_exporting_one_service_agree_and_both_say_conflict --exact --nocapture
