//go:build tools

// Package infra records the commands the Gateway API test builds, so `go mod tidy` keeps their
// modules.
package infra

import (
	_ "github.com/envoyproxy/gateway/cmd/envoy-gateway"
)
