//go:build tools

// Package tools pins the commands built from sigs.k8s.io/agent-sandbox v0.5.6.
package tools

import (
	_ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
	_ "sigs.k8s.io/agent-sandbox/sandbox-router/cmd"
	_ "sigs.k8s.io/agent-sandbox/packages/sandboxd/cmd/sandboxd"
)
