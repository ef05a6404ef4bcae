#!/usr/bin/env bash
# The e2e tier: for each agent-sandbox release, bring the cluster up, run the
# proof tests against it, tear it down (also on failure).
#   run-e2e.sh [release ...]      (default: v0.4.6 v0.5.6)
set -uo pipefail
LC=$(cd "$(dirname "$0")/.." && pwd)
PY=${LC_PYTHON:-/usr/bin/python3}
# Its own state directory and pod range: other tiers and developers use the
# default cluster (build/localcluster, 127.1.0.0/24) of the same checkout, and
# a `make cluster-down` of theirs must not stop this one (nor this theirs).
export LC_STATE_DIR=${LC_E2E_STATE_DIR:-$(cd "$LC/../.." && pwd)/build/localcluster-e2e}
export LC_POD_CIDR=${LC_E2E_POD_CIDR:-127.1.128.0/24}
releases=("$@"); [ ${#releases[@]} -gt 0 ] || releases=(v0.4.6 v0.5.6)
trap '"$PY" "$LC/lc.py" down >/dev/null 2>&1' EXIT
"$PY" "$LC/lc.py" down >/dev/null 2>&1
rc=0; total_p=0; total_f=0
for rel in "${releases[@]}"; do
  echo "--- cluster-e2e: agent-sandbox $rel"
  start=$(date +%s)
  # Ports are picked free just before the daemons bind them; another process
  # on the machine can win that race. One retry, reported, covers that.
  if ! out=$("$PY" "$LC/lc.py" up --agent-sandbox "$rel") &&
     { echo "$out" | tail -5; echo "cluster-e2e: cluster-up failed once for $rel; retrying" >&2
       rm -rf "$LC_STATE_DIR.failed"; cp -r "$LC_STATE_DIR/logs" "$LC_STATE_DIR.failed" 2>/dev/null &&
       echo "cluster-e2e: logs of the failed attempt kept in $LC_STATE_DIR.failed" >&2
       "$PY" "$LC/lc.py" down >/dev/null; ! out=$("$PY" "$LC/lc.py" up --agent-sandbox "$rel"); }; then
    echo "$out"; echo "cluster-e2e: cluster-up failed for $rel" >&2
    for f in "$LC_STATE_DIR"/logs/*.log; do [ -f "$f" ] && { echo "--- tail of $f"; tail -15 "$f"; }; done
    "$PY" "$LC/lc.py" status || true
    rc=1; total_f=$((total_f + 1)); "$PY" "$LC/lc.py" down; continue
  fi
  echo "$out" | tail -3
  echo "cluster-e2e: cluster-up $rel took $(( $(date +%s) - start ))s"
  kc=$(echo "$out" | tail -1 | sed -n 's/^export KUBECONFIG=//p')
  res=$(mktemp)
  KUBECONFIG=$kc "$LC/tests/e2e.sh" "$rel" | tee "$res"
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  read -r p f < <(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$res" | tail -1)
  total_p=$((total_p + ${p:-0})); total_f=$((total_f + ${f:-1}))
  rm -f "$res"
  "$PY" "$LC/lc.py" down
done
echo "cluster-e2e (${releases[*]}): $total_p passed, $total_f failed"
exit $rc
