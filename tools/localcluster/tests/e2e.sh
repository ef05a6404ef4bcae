#!/usr/bin/env bash
# Proof that the local cluster is real (issue 5), run against a cluster that
# `lc.py up` started:  KUBECONFIG=... e2e.sh <agent-sandbox release>
# Prints one line per check and closes with "N passed, N failed".
set -uo pipefail
LC=$(cd "$(dirname "$0")/.." && pwd)
REL=${1:?usage: e2e.sh v0.4.6|v0.5.6}
# shellcheck disable=SC1091
. "$LC/versions.env"
STATE=$(cd "$(dirname "$KUBECONFIG")/.." && pwd)
KCDIR=$STATE/kubeconfig
NS=default
pass=0; fail=0
ok()   { pass=$((pass+1)); echo "ok - $*"; }
bad()  { fail=$((fail+1)); echo "FAIL - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
kq() { kubectl "$@" >/dev/null; }
kwait() { kubectl wait "$@" >/dev/null; }
jqp() { /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# 1. kubectl reports the server version we built.
sv=$(kubectl version -o json 2>/dev/null | jqp 'd["serverVersion"]["gitVersion"]')
check "kubectl version reports server $sv (want $K8S_VERSION)" test "$sv" = "$K8S_VERSION"

# 2. The four agent-sandbox CRDs.
# (kwok's own PortForward CRD is there too: the pod runner declares one per sandboxd pod)
crds=$(kubectl get crd -o name | grep 'agents\.x-k8s\.io$' | sort | tr '\n' ' ')
want="customresourcedefinition.apiextensions.k8s.io/sandboxclaims.extensions.agents.x-k8s.io customresourcedefinition.apiextensions.k8s.io/sandboxes.agents.x-k8s.io customresourcedefinition.apiextensions.k8s.io/sandboxtemplates.extensions.agents.x-k8s.io customresourcedefinition.apiextensions.k8s.io/sandboxwarmpools.extensions.agents.x-k8s.io "
check "kubectl get crd lists the four agent-sandbox CRDs" test "$crds" = "$want"
if [ "$REL" = "$AGENT_SANDBOX_V05" ]; then api=v1beta1; else api=v1alpha1; fi
pref=$(kubectl get --raw /apis/extensions.agents.x-k8s.io | jqp 'd["preferredVersion"]["version"]')
check "discovery prefers $api (got $pref)" test "$pref" = "$api"

# 3. A claim applied with kubectl becomes Ready through the real controller.
claim=sandbox-claim-$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
if [ "$api" = v1beta1 ]; then
  spec="warmPoolRef: {name: python-sandbox-warmpool}"
else
  spec="sandboxTemplateRef: {name: python-sandbox-template}"
fi
kubectl apply -f - >/dev/null <<EOT
apiVersion: extensions.agents.x-k8s.io/$api
kind: SandboxClaim
metadata:
  name: $claim
  namespace: $NS
  labels: {agents.x-k8s.io/created-by: localcluster-e2e}
spec:
  $spec
EOT
t0=$(date +%s.%N)
check "claim $claim becomes Ready" kwait --for=condition=Ready "sandboxclaim/$claim" -n $NS --timeout=90s
echo "#   claim Ready after $(/usr/bin/python3 -c "print(round($(date +%s.%N) - $t0, 2))")s"
sb=$(kubectl get sandboxclaim "$claim" -n $NS -o json | jqp '(d.get("status",{}).get("sandbox") or {}).get("name") or (d.get("status",{}).get("sandbox") or {}).get("Name") or ""')
check "claim status names its sandbox ($sb)" test -n "$sb"
check "sandbox $sb is Ready" kwait --for=condition=Ready "sandbox/$sb" -n $NS --timeout=30s
pod=$(kubectl get sandbox "$sb" -n $NS -o json | jqp 'd["metadata"].get("annotations",{}).get("agents.x-k8s.io/pod-name") or d["metadata"]["name"]')
ip=$(kubectl get pod "$pod" -n $NS -o jsonpath='{.status.podIP}')
check "pod $pod has a loopback 127.1.x.y IP ($ip)" bash -c "[[ '$ip' =~ ^127\.1\.[0-9]+\.[0-9]+$ ]]"
node=$(kubectl get pod "$pod" -n $NS -o jsonpath='{.spec.nodeName}')
check "the scheduler bound $pod to the kwok node ($node)" test "$node" = kwok-node-0
# Readiness as a kubelet decides it: the template's readinessProbe. kwok starts
# the pod unready; the pod runner probes the runtime and writes Ready itself.
# The router pod declares no probe: kwok makes it Ready at once.
managers() { kubectl get pod "$1" -n "$2" --show-managed-fields -o json |
             jqp '" ".join(sorted(m["manager"] + "/" + (m.get("subresource") or "") for m in d["metadata"]["managedFields"]))'; }
probed=$(grep -c "readiness probe passed for $NS/$pod " "$STATE/logs/podrunner.log")
check "pod $pod is Ready after the pod runner's probe passed (log lines: $probed; writers: $(managers "$pod" $NS))" \
  bash -c "[ '$probed' -ge 1 ] && [[ ' $(managers "$pod" $NS) ' == *' lc-podrunner/status '* ]] &&
           kubectl wait --for=condition=Ready pod/$pod -n $NS --timeout=1s >/dev/null"
check "router pod (no readinessProbe) is Ready by kwok alone (writers: $(managers sandbox-router agent-sandbox-system))" \
  bash -c "[[ ' $(managers sandbox-router agent-sandbox-system) ' != *lc-podrunner* ]] &&
           kubectl wait --for=condition=Ready pod/sandbox-router -n agent-sandbox-system --timeout=1s >/dev/null"

# 4. curl through kubectl port-forward svc/sandbox-router-svc with X-Sandbox-* headers.
pflog=$(mktemp); kubectl port-forward svc/sandbox-router-svc -n agent-sandbox-system :8080 >"$pflog" 2>&1 &
pf=$!
port=""
for _ in $(seq 1 300); do
  port=$(sed -n 's/^Forwarding from 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$pflog" | head -1)
  [ -n "$port" ] && break; sleep 0.1
done
check "kubectl port-forward svc/sandbox-router-svc is listening (127.0.0.1:$port)" test -n "$port"
H=(-H "X-Sandbox-ID: $sb" -H "X-Sandbox-Namespace: $NS" -H "X-Sandbox-Port: 8888")
body=""
for _ in $(seq 1 50); do
  body=$(curl -sS --max-time 5 "${H[@]}" "http://127.0.0.1:$port/" 2>/dev/null) && [[ $body == *'"status"'* ]] && break
  sleep 0.2
done
check "GET / through router reaches the runtime in $pod: $body" bash -c "[[ '$body' == *'\"ok\"'* ]]"
body=$(curl -sS --max-time 10 "${H[@]}" -H "X-Sandbox-Pod-IP: $ip" -H 'Content-Type: application/json' \
       -d '{"command":"echo hello-from-sandbox"}' "http://127.0.0.1:$port/execute" 2>&1)
check "POST /execute with X-Sandbox-Pod-IP runs in the runtime: $body" bash -c "[[ '$body' == *hello-from-sandbox* ]]"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H "X-Sandbox-ID: no-such-sandbox" -H "X-Sandbox-Namespace: $NS" "http://127.0.0.1:$port/")
check "router answers 502 for an unknown sandbox (got $code)" test "$code" = 502
# Its DNS fallback (<id>.<ns>.svc.cluster.local) goes to the cluster DNS, on loopback too.
dns=$(jqp 'd["dns"]' < "$STATE/cluster.json")
lookups=$(grep -o 'lookup [^ ]* on [^:]*:53' "$STATE/logs/sandbox-router.log" | sort -u)
check "router name lookups went only to the cluster DNS $dns:53 ($(echo $lookups | cut -c1-90))" \
  bash -c "[ -n '$lookups' ] && ! echo '$lookups' | grep -qv ' on ${dns//./\\.}:53\$'"
# The cluster DNS answers as CoreDNS would (below: a headless Service is
# its Ready pods' IPs, a ClusterIP Service its ClusterIP); an unknown name
# is NXDOMAIN; a name outside the cluster is refused, never forwarded.
dnsq() { /usr/bin/python3 - "$dns" "$1" <<'PY'
import random, socket, sys
server, name = sys.argv[1], sys.argv[2]
qid = random.randrange(65536)
q = qid.to_bytes(2, "big") + b"\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\x00\x00\x01\x00\x01"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.sendto(q, (server, 53))
r = s.recv(512)
rcode, an = r[3] & 0xF, int.from_bytes(r[6:8], "big")
i = len(q)
ips = []
for _ in range(an):
    rdlen = int.from_bytes(r[i + 10:i + 12], "big")
    ips.append(socket.inet_ntoa(r[i + 12:i + 12 + rdlen]))
    i += 12 + rdlen
print(",".join(ips) if ips else {3: "NXDOMAIN", 5: "REFUSED"}.get(rcode, "rcode%d" % rcode))
PY
}
ans=$(dnsq "no-such-sandbox.$NS.svc.cluster.local")
check "cluster DNS: an unknown service is $ans" test "$ans" = NXDOMAIN
ans=$(dnsq "example.com")
check "cluster DNS: a name outside the cluster is $ans, not forwarded" test "$ans" = REFUSED
# A Service the router's pod cache does not index (its name is no
# sandbox's) reaches the same pod through the cluster DNS, as the router's
# fallback does for a sandbox it has not cached yet.
hash=$(kubectl get pod "$pod" -n $NS -o jsonpath='{.metadata.labels.agents\.x-k8s\.io/sandbox-name-hash}')
kubectl apply -f - >/dev/null <<EOT
apiVersion: v1
kind: Service
metadata: {name: lc-dns-check, namespace: $NS}
spec:
  clusterIP: None
  selector: {agents.x-k8s.io/sandbox-name-hash: "$hash"}
  ports: [{port: 8888}]
EOT
ans=$(dnsq "lc-dns-check.$NS.svc.cluster.local")
check "cluster DNS: headless Service lc-dns-check.$NS.svc.cluster.local is $ans (pod IP $ip)" \
  test "$ans" = "$ip"
ans=$(dnsq "kubernetes.default.svc.cluster.local")
check "cluster DNS: kubernetes.default.svc.cluster.local is its ClusterIP $ans" \
  test "$ans" = "$(kubectl get service kubernetes -n default -o jsonpath='{.spec.clusterIP}')"
body=$(curl -sS --max-time 10 -H "X-Sandbox-ID: lc-dns-check" -H "X-Sandbox-Namespace: $NS" \
       -H "X-Sandbox-Port: 8888" "http://127.0.0.1:$port/" 2>&1)
check "router reaches a pod by cluster DNS when its cache has no entry: $body" \
  bash -c "[[ '$body' == *'\"ok\"'* ]]"
kubectl delete service lc-dns-check -n $NS --wait=false >/dev/null
kill "$pf" 2>/dev/null; wait "$pf" 2>/dev/null; rm -f "$pflog"

# 5. Credentials: token, exec plugin, RBAC-restricted user.
check "static-token user can list claims" kq --kubeconfig "$KCDIR/token.kubeconfig" get sandboxclaims -n $NS -o name
check "exec-plugin user can list claims" kq --kubeconfig "$KCDIR/exec.kubeconfig" get sandboxclaims -n $NS -o name
check "exec plugin was run" test -s "$STATE/logs/exec-credential.calls"
err=$(kubectl --kubeconfig "$KCDIR/restricted.kubeconfig" get sandboxclaims -n $NS 2>&1)
check "restricted user is denied by RBAC ($(echo "$err" | head -1 | cut -c1-80)...)" bash -c "[[ '$err' == *Forbidden* || '$err' == *forbidden* ]]"

# 6. Deleting the claim removes the Sandbox and the pod (GC), and the pod runner stops the runtime.
kubectl delete sandboxclaim "$claim" -n $NS --wait=true --timeout=60s >/dev/null
gone() { ! kubectl get "$1" "$2" -n $NS >/dev/null 2>&1; }
waitfor() { local i; for i in $(seq 1 150); do "$@" && return 0; sleep 0.2; done; return 1; }
check "sandbox $sb is garbage-collected" waitfor gone sandbox "$sb"
check "pod $pod is garbage-collected" waitfor gone pod "$pod"
closed() { ! (exec 3<>"/dev/tcp/$ip/8888") 2>/dev/null; }
check "the runtime on $ip:8888 was stopped" waitfor closed

# 7. Loopback only: every socket our processes listen on or dial is 127.x.
pids=$(cat "$STATE"/pids/*.pid "$STATE"/podrunner/*.pid 2>/dev/null | awk '{print $1}' | sort -u)
re=$(echo $pids | sed 's/ /|/g')
n_listen=$(ss -Hltnp | grep -cE "pid=($re),")
n_conn=$(ss -Htnp state established | grep -cE "pid=($re),")
check "ss sees our processes: $n_listen listening sockets, $n_conn connections" test "$n_listen" -ge 9 -a "$n_conn" -gt 0
bad_listen=$(ss -Hltnp | grep -E "pid=($re)," | awk '{print $4}' | grep -vE '^(127\.[0-9.]+|\[::1\]|\[::ffff:127\.[0-9.]+\]):' || true)
check "no listener of ours outside loopback ${bad_listen:+: $bad_listen}" test -z "$bad_listen"
bad_peer=$(ss -Htnp state established | grep -E "pid=($re)," | awk '{print $4}' | grep -vE '^(127\.[0-9.]+|\[::1\]|\[::ffff:127\.[0-9.]+\]):' || true)
check "no connection of ours outside loopback ${bad_peer:+: $bad_peer}" test -z "$bad_peer"

# 8. The real sandboxd (v0.5.x): a sandboxd-template pod driven by the upstream
# Python SDK 1.0.8 [grpc] through its pod tunnel (test_sandboxd_pysdk.py; the
# venv comes from tests/upstream/rules.mk, named by LC_PYSDK_PYTHON).
if [ "$REL" = "$SANDBOXD_VERSION" ]; then
  if [ -z "${LC_PYSDK_PYTHON:-}" ] || [ ! -x "${LC_PYSDK_PYTHON:-}" ]; then
    bad "sandboxd: no Python SDK 1.0.8 venv (LC_PYSDK_PYTHON=${LC_PYSDK_PYTHON:-unset}; make cluster-e2e sets it)"
  else
    out=$("$LC_PYSDK_PYTHON" "$LC/tests/test_sandboxd_pysdk.py" "$STATE" 2>&1); rc=$?
    echo "$out" | grep -E '^(ok|FAIL) - ' | sed 's/^/  sandboxd: /'
    n=$(echo "$out" | grep -c '^ok - ')
    if [ $rc -eq 0 ] && [ "$n" -ge 20 ]; then
      ok "sandboxd: the Python SDK 1.0.8 [grpc] proof passed ($n checks)"
    else
      echo "$out" | grep -vE '^(ok|FAIL) - ' | tail -15
      bad "sandboxd: the Python SDK 1.0.8 [grpc] proof failed (exit $rc after $n checks)"
    fi
  fi
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
