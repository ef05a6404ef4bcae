#!/usr/bin/env bash
# The CLI on agent-sandbox v0.5 (v1beta1 claims from a warm pool):
# create --warm-pool, --env into the sandbox (a template that allows it,
# and one that refuses it), the errors a v0.4 habit meets, run.
# Usage: KUBECONFIG=... e2e-v1beta1.sh BIN   (the local cluster's
#        python-sandbox-template and python-sandbox-warmpool)
set -u
B=$(realpath "$1")
. "$(dirname "$0")/lib.sh"
L=suite=cli-e2e-v1beta1
cleanup() {
    "$B" rm -l "$L" >/dev/null 2>&1
    kubectl delete sandboxwarmpool cli-open-pool --ignore-not-found >/dev/null 2>&1
    kubectl delete sandboxtemplate cli-open --ignore-not-found >/dev/null 2>&1
    rm -rf "$OUT"
}
trap cleanup EXIT
ours() { "$B" ls -l "$L" -o name | grep -c . ; }
wait_ours() {
    local i
    for i in $(seq 1 300); do [ "$(ours)" = "$1" ] && return 0; sleep 0.2; done
    return 1
}

t 0 create-from-pool "$B" create --warm-pool python-sandbox-warmpool --label "$L" -o json
ok create-from-pool-json py 'd["claim"].startswith("sandbox-claim-") and d["sandbox"]'
claim=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["claim"])' "$OUT/o")
t 0 get-pool-claim "$B" get "$claim" -o json
ok get-pool-claim-names-the-pool py 'd["spec"]["warmPoolRef"]["name"] == "python-sandbox-warmpool"'
t 0 exec-pool-claim "$B" exec "$claim" -- echo pooled
ok exec-pool-claim-output out_is pooled
t 2 create-template-on-v1beta1 "$B" create python-sandbox-template --label "$L"
ok create-template-on-v1beta1-hint has_err 'use --warm-pool'
t 3 create-missing-pool "$B" create --warm-pool cli-no-such-pool --label "$L"
ok create-missing-pool-named has_err 'warm pool cli-no-such-pool'
t 1 env-refused-by-template "$B" create --warm-pool python-sandbox-warmpool --label "$L" --env A=b
ok env-refused-reason has_err 'EnvVarsInjectionRejected'
ok env-refused-leaves-one wait_ours 1

# A template that allows injection, and a pool of it.
kubectl get sandboxtemplate python-sandbox-template -o json | python3 -c '
import json, sys
d = json.load(sys.stdin)
m = d["metadata"]
d["metadata"] = {"name": "cli-open", "namespace": m["namespace"]}
d["spec"]["envVarsInjectionPolicy"] = "Allowed"
d.pop("status", None)
print(json.dumps(d))' | kubectl create -f - >/dev/null
kubectl create -f - >/dev/null <<'POOL'
{"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
 "metadata": {"name": "cli-open-pool", "namespace": "default"},
 "spec": {"replicas": 0, "sandboxTemplateRef": {"name": "cli-open"}}}
POOL
# The local cluster's pods do not pass container env to the runtime's
# commands, so the Sandbox object is where the variable is checked.
t 0 create-with-env "$B" create --warm-pool cli-open-pool --label "$L" --env 'CLI_GREETING=hello there' -o json
sb=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sandbox"])' "$OUT/o")
kubectl get sandbox "$sb" -o json >"$OUT/o"
ok create-with-env-on-the-sandbox py '{"name": "CLI_GREETING", "value": "hello there"} in [e for c in d["spec"]["podTemplate"]["spec"]["containers"] for e in c.get("env", [])]'
t 4 run-from-pool "$B" run --warm-pool cli-open-pool --label "$L" -- sh -c 'echo ran; exit 4'
ok run-from-pool-output out_is ran
t 0 rm-pool-claims "$B" rm -l "$L"
ok rm-left-none wait_ours 0

finish "test-cli (end to end, v1beta1)"
