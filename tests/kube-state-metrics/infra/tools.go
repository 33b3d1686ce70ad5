//go:build tools

// Package infra records the command the monitoring test builds, so `go mod tidy` keeps its module.
package infra

import (
	_ "k8s.io/kube-state-metrics/v2"
)
