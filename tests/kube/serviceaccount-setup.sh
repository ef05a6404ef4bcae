#!/bin/sh
# Gives examples/in_cluster what a pod of the local cluster would have: a
# ServiceAccount "asb-in-cluster" in "default" with only the rights the
# example's comment lists (a Role, so a missing right fails the run), and
# its mounted directory (token, ca.crt, namespace) written to OUT_DIR.
# Prints the apiserver's port, for KUBERNETES_SERVICE_PORT (the host is
# 127.0.0.1). Usage: serviceaccount-setup.sh STATE_DIR OUT_DIR
set -eu
state=$1
out=$2
export KUBECONFIG="$state/kubeconfig/admin.kubeconfig"
cat <<'YAML' | kubectl apply -f - >/dev/null
apiVersion: v1
kind: ServiceAccount
metadata: {name: asb-in-cluster, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: asb-in-cluster, namespace: default}
rules:
- apiGroups: [extensions.agents.x-k8s.io]
  resources: [sandboxclaims]
  verbs: [create, get, watch, delete]
- apiGroups: [agents.x-k8s.io]
  resources: [sandboxes]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: asb-in-cluster, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: asb-in-cluster}
subjects: [{kind: ServiceAccount, name: asb-in-cluster, namespace: default}]
YAML
mkdir -p "$out"
kubectl create token asb-in-cluster -n default --duration=1h > "$out/token"
cp "$state/pki/ca.crt" "$out/ca.crt"
printf default > "$out/namespace"
python3 -c "import json;print(json.load(open('$state/cluster.json'))['ports']['apiserver'])"
