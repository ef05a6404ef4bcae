//go:build tools

// Package tools pins the Kubernetes control-plane commands built from
// k8s.io/kubernetes v1.33.13 (minor 33).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
