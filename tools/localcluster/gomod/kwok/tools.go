//go:build tools

// Package tools pins the commands built from sigs.k8s.io/kwok v0.8.0.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
