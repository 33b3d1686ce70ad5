//go:build tools

// Package infra records the command the scale-out test builds, so `go mod tidy` keeps its module.
package infra

import (
	_ "sigs.k8s.io/metrics-server/cmd/metrics-server"
)
