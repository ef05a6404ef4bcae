#!/bin/sh
# For the in-cluster Service-name case of test_sdk_cluster: a template like
# python-sandbox-template with `service: true` (the controller then makes a
# headless Service per sandbox, which the local cluster's DNS answers), and
# a ServiceAccount "asb-in-cluster-dns" that may manage claims but not read
# Sandboxes, so the client's pod IP lookup is refused and it must use the
# Service name. Writes the account's mounted directory (token, ca.crt,
# namespace) to STATE_DIR/serviceaccount-dns. FROM and TO (default
# python-sandbox-template, asb-service-template): the template copied and
# its copy's name (test_sandboxd_cluster copies sandboxd-template); POOL:
# a SandboxWarmPool (v1beta1) of one for the copy, for v0.5 claims.
# Usage: dns-fallback-setup.sh STATE_DIR [FROM TO [POOL]]
set -eu
state=$1 from=${2:-python-sandbox-template} to=${3:-asb-service-template} pool=${4:-}
out=$state/serviceaccount-dns
export KUBECONFIG="$state/kubeconfig/admin.kubeconfig"
kubectl get sandboxtemplate "$from" -n default -o json | python3 -c '
import json, sys
t = json.load(sys.stdin)
t["metadata"] = {"name": sys.argv[1], "namespace": t["metadata"]["namespace"]}
t["spec"]["service"] = True
t.pop("status", None)
print(json.dumps(t))' "$to" | kubectl apply -f - >/dev/null
[ -z "$pool" ] || cat <<YAML | kubectl apply -f - >/dev/null
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: $pool, namespace: default}
spec: {replicas: 1, sandboxTemplateRef: {name: $to}}
YAML
cat <<'YAML' | kubectl apply -f - >/dev/null
apiVersion: v1
kind: ServiceAccount
metadata: {name: asb-in-cluster-dns, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: asb-in-cluster-dns, namespace: default}
rules:
- apiGroups: [extensions.agents.x-k8s.io]
  resources: [sandboxclaims]
  verbs: [create, get, watch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: asb-in-cluster-dns, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: asb-in-cluster-dns}
subjects: [{kind: ServiceAccount, name: asb-in-cluster-dns, namespace: default}]
YAML
mkdir -p "$out"
kubectl create token asb-in-cluster-dns -n default --duration=1h > "$out/token"
cp "$state/pki/ca.crt" "$out/ca.crt"
printf default > "$out/namespace"
