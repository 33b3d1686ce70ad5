//go:build tools

// Package infra records the commands the two-cluster test builds, so `go mod tidy` keeps their
// modules: the MCS API's own controller (the derived Service of each ClusterSetIP import, its
// ClusterIP written into spec.ips, imported slices relabelled for kube-proxy).
package infra

import (
	_ "sigs.k8s.io/mcs-api/controllers/cmd/servicecontroller"
)
