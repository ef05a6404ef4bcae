#!/usr/bin/env bash
# make bench-cli: wall time of `agentsandbox exec CLAIM -- true` in a fresh
# process (through the kubectl tunnel, the native tunnel and a direct
# router URL) against the upstream Python SDK doing the same in a fresh
# `python3 -c`, on a v0.5.6 local cluster (the SDK sends v1beta1 claims).
# One "bench:" line per measure. kubectl exec has nothing to run on the
# local cluster (its pods are processes, not containers: "no exec found"),
# so it is not measured.
# Usage: KUBECONFIG=... bench.sh BIN PYTHON ROUTER_PORT
set -eu
B=$(realpath "$1")
PY=$2
PORT=$3
OUT=$(mktemp -d)
claim=$("$B" create --warm-pool python-sandbox-warmpool --label suite=cli-bench)
trap '"$B" rm "$claim" >/dev/null; rm -rf "$OUT"' EXIT
hyperfine -N -w 2 -r 10 --export-json "$OUT/h.json" \
    -n cli-tunnel "$B exec $claim -- true" \
    -n cli-direct "$B --connect direct=http://127.0.0.1:$PORT exec $claim -- true" \
    -n cli-native "$B --connect native exec $claim -- true" \
    -n python-sdk "$PY -c \"from k8s_agent_sandbox import SandboxClient; import sys; sys.exit(SandboxClient().get_sandbox('$claim').commands.run('true').exit_code)\"" \
    >/dev/null
python3 - "$OUT/h.json" <<'PY'
import json, sys
r = {x["command"]: x["mean"] for x in json.load(open(sys.argv[1]))["results"]}
for k in ("cli-tunnel", "cli-native", "cli-direct", "python-sdk"):
    print("bench: exec true, fresh process, %-10s %8.1f ms" % (k, r[k] * 1000))
print("bench: cli (kubectl tunnel, as the SDK) is %.1fx faster than the Python SDK" % (r["python-sdk"] / r["cli-tunnel"]))
print("bench: cli (native tunnel: no kubectl to start) is %.1fx faster than the Python SDK (tunnel)" % (r["python-sdk"] / r["cli-native"]))
print("bench: cli (direct router URL) is %.1fx faster than the Python SDK (tunnel)" % (r["python-sdk"] / r["cli-direct"]))
PY
