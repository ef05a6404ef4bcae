#!/bin/sh
# Gives the local cluster a Gateway for the SDK's Gateway mode test: the
# Gateway API CRD from its Go module (the registry's copy), a Gateway
# "asb-gw" whose status lists a few invalid addresses before the loopback
# one, and prints the router's real port (the address a Gateway would
# front). Usage: gateway-setup.sh STATE_DIR
set -eu
state=$1
export KUBECONFIG="$state/kubeconfig/admin.kubeconfig"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
( cd "$work" && go mod init asbgw >/dev/null 2>&1 &&
  go mod download -json sigs.k8s.io/gateway-api@v1.2.1 > mod.json )
dir=$(python3 -c "import json;print(json.load(open('$work/mod.json'))['Dir'])")
kubectl apply --server-side -f "$dir/config/crd/standard/gateway.networking.k8s.io_gateways.yaml" >/dev/null
kubectl wait --for=condition=Established crd/gateways.gateway.networking.k8s.io --timeout=60s >/dev/null
cat <<'YAML' | kubectl apply -f - >/dev/null
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: asb-gw, namespace: default}
spec:
  gatewayClassName: asb-test
  listeners: [{name: http, port: 80, protocol: HTTP}]
YAML
kubectl patch gateway asb-gw -n default --subresource=status --type=merge -p \
  '{"status":{"addresses":[{"type":"example.com/custom","value":"evil.com/admin"},{"type":"example.com/custom","value":"2130706433"},{"type":"IPAddress","value":"127.0.0.1"}]}}' >/dev/null
python3 -c "import json;print(json.load(open('$state/cluster.json'))['ports']['router'])"
