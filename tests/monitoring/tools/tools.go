//go:build tools

// Package tools pins the Go programs the monitoring tests build: controller-gen (to render
// prometheus-operator's CRDs from its API types) and helm.
package tools

import (
	_ "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	_ "helm.sh/helm/v4/cmd/helm"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
