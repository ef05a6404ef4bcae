//go:build tools

// Package tools pins the commands built from sigs.k8s.io/agent-sandbox v0.4.6.
package tools

import (
	_ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
)
