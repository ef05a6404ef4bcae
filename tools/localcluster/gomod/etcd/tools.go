//go:build tools

// Package tools pins the commands built from go.etcd.io/etcd/server/v3 v3.6.16.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
